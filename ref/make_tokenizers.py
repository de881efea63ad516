#!/usr/bin/env python3
"""Tokenizer fixtures for fat5.h's C tokenizers: small trained models and the ids/strings
that Hugging Face `tokenizers` and Google's `sentencepiece` give for a fixed set of texts.

What it makes (under tests/data/tokenizers/, see the README.md there):

  t5uni/spiece.model     sentencepiece Unigram, nmt_nfkc, T5 ids (pad 0, eos 1, unk 2, no bos)
  t5uni/tokenizer.json   that model converted as transformers 4.x does (T5TokenizerFast,
                         100 <extra_id_N> sentinels as added tokens)
  mt5bf/spiece.model     sentencepiece Unigram, identity normalisation, byte_fallback,
                         user_defined_symbols "<sep>" and "▁<extra_id_0>"
  mt5bf/tokenizer.json   converted with T5TokenizerFast (extra_ids=0)
  spmbpe/spiece.model    sentencepiece BPE, identity normalisation, byte_fallback, Llama ids
  spmbpe/tokenizer.json  converted with LlamaTokenizerFast (BPE + byte_fallback + merges)
  bytebpe/tokenizer.json `tokenizers` byte-level BPE (GPT-2 style) with assorted added tokens
  uniseq/tokenizer.json  `tokenizers` Unigram with a Sequence normalizer / pre-tokenizer
  legacy/tokenizer.json  mt5bf/tokenizer.json with the old Metaspace form
                         {"add_prefix_space": true} (no prepend_scheme)
  cases.json             texts (hex) and, per tokenizer, encode / encode_plain / pairs /
                         decode / decode_special / decode_ids
  real.json              the same for the real T5 / mT5 / SD3-T5 files (only with --real-dir)

Packages (two Python environments, because only transformers 4.x converts a sentencepiece
model to tokenizer.json the way the published T5 files were made):

  main:        pip install sentencepiece==0.2.3 tokenizers==0.23.3
  conversion:  pip install transformers==4.57.6 tokenizers==0.22.2 sentencepiece==0.2.3 protobuf

Run (from the repository root, with the main environment's python):

  python ref/make_tokenizers.py --python4 /path/to/venv4/bin/python
  python ref/make_tokenizers.py --only-real --real-dir /tmp/t5real   # real.json (downloads
        # diffsynth==1.1.9 with pip --no-deps and copies its T5 tokenizer files into
        # /tmp/t5real; --real-src WHEEL_OR_DIR uses a wheel / unpacked tree already here)

The conversion step runs as `PY4 ref/make_tokenizers.py --convert-step OUT` in a subprocess.
Without --python4 the converted tokenizer.json files already in OUT are kept (and checked to
exist).  Everything is deterministic: sentencepiece trains with num_threads=1 and no input
shuffling, `tokenizers` trains with RAYON_NUM_THREADS=1, random choices use fixed seeds.
The corpus is data/fortunes/fortunes.txt.gz plus the small SUPPLEMENT below.
"""
import os
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import argparse, gzip, json, random, shutil, subprocess, sys, tempfile, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "data", "fortunes", "fortunes.txt.gz")
VOCAB = 1000

# A few non-ASCII words mixed into the training text so that some accented letters, Greek,
# Cyrillic and a few CJK characters become pieces while the rest of the test texts' scripts
# (Thai, Devanagari, Hangul, Arabic, most emoji, ...) stay unknown / byte-fallback.
SUPPLEMENT_WORDS = ["café", "naïve", "résumé", "Zürich", "Ångström", "façade", "señor", "über",
                    "straße", "½", "™", "—", "–", "…", "“quoted”", "‘x’", "€", "£",
                    "привет", "мир", "αβγ", "東京", "日本", "🙂"]

def corpus_docs():
    text = gzip.open(CORPUS, "rt", encoding="utf-8").read()
    return [d.strip("\n") for d in text.split("\n%\n") if d.strip("\n%")]

def supplement():
    rng = random.Random(1234)
    return [" ".join(rng.choice(SUPPLEMENT_WORDS) for _ in range(8)) for _ in range(400)]

def training_lines():
    """Lines for sentencepiece (one sentence per line)."""
    lines = []
    for d in corpus_docs():
        lines += [l for l in d.split("\n") if l.strip()]
    return lines + supplement()

def training_docs():
    """Documents for `tokenizers` (newlines kept inside a document)."""
    return corpus_docs() + supplement()

# ---------------------------------------------------------------------------------------------
# test texts (bytes)

def test_texts():
    docs = corpus_docs()
    longl = [l for d in docs for l in d.split("\n") if len(l) >= 150][:3]
    nonascii = [l for d in docs for l in d.split("\n") if "über" in l][:1]
    multi = [d for d in docs if "\t" in d and 100 < len(d) < 400][:1]
    S = [
        "Hello world", "The quick brown fox jumps over the lazy dog.", "hello", "HELLO World",
        "café naïve résumé", "cafe\u0301 nai\u0308ve", "e\u0301\u0302\u0323 stacked a\u0300\u0301\u0302\u0303\u0304",
        "Ångström Å\u030a", "ß ẞ straße", "ＡＢＣ１２３ full-width", "ﬁnance ﬂow", "½ ™ ① ㎏",
        "東京 日本語の文章", "漢字", "한국어 텍스트", "\u1112\u1161\u11ab\u1100\u1173\u11af conjoining",
        "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "привет мир", "αβγ δ",
        "🙂 👍", "emoji🙂inline", "👩\u200d👩\u200d👧\u200d👦 family", "🇫🇷🇩🇪 flags", "👍🏽 👋🏿",
        "😀😀😀", "a  b   c", "  leading", "trailing  ", "   ", " ", "", "\t", "a\tb\t\tc",
        "a\r\nb\rc\nd", "line\n\nbreaks\n", "a\u00a0b \u00a0 c", "ideo\u3000space\u3000",
        "zero\u200bwidth\u200djoiner\u200c", "ctrl\x01char\x1f\x7f end", "next\u0085line",
        "x\u2028y\u2029z", "\ufeffbom", "a<extra_id_0>b", "x <extra_id_1> y", "<extra_id_99>",
        "<extra_id_0><extra_id_1>", "a  <extra_id_0>  b", "</s> inside", "a</s>b", "<s>", "<s> x </s>",
        "<pad><unk>", "<unk>", "<mask> x", "a <mask>  b", "xyz", "axyz b", "a xyz b", "xyz!",
        "a [rs]  b", "café cafe\u0301 CAFÉ", "a<sep>b", "a <sep> b", "``quoted''", "don't", "I'll",
        "Don't you love 🤗 Transformers? We sure do.", "1,234.56 € 42% $3", "...!?;:()[]{}",
        "—em-dash— «guillemets» „Anführung“", "ﬁ\u0301x", "Ａ\u0308", "x\u00a0\u0301", "ǅ ǆ Ǆ",
        "\u2163 \u2170 ⁵ ₂ ㈱", "unknown ☃ ꙮ 𓀀",
    ]
    out = [s.encode("utf-8") for s in S + longl + nonascii + multi]
    out += [b"\xff", b"a\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ok\xffok"]
    return out

PAIRS = None  # filled by pair_indices()

def pair_indices(texts):
    idx = {t: i for i, t in enumerate(texts)}
    want = [(b"Hello world", b"hello"), (b"", b""), (b"", b"hello"), (b"hello", b""),
            (b"x <extra_id_1> y", b"a<extra_id_0>b"), (b"</s> inside", b"<s>"),
            (b"  leading", b"trailing  "), (b"caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9", b"\xff"),
            (b"xyz", b"<mask> x"), (b"   ", b"a\tb\t\tc"), ("東京 日本語の文章".encode(), b"ok\xffok")]
    return [(idx[a], idx[b]) for a, b in want]

def as_str(b):
    return b.decode("utf-8", errors="replace")

# ---------------------------------------------------------------------------------------------
# training

def train_spm(out):
    import sentencepiece as spm
    lines = training_lines()
    common = dict(vocab_size=VOCAB, character_coverage=1.0, num_threads=1,
                  input_sentence_size=0, shuffle_input_sentence=False, seed_sentencepiece_size=200000,
                  max_sentence_length=8192, minloglevel=2)

    def train(sub, **kw):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        prefix = os.path.join(out, sub, "spiece")
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=prefix, **common, **kw)
        os.remove(prefix + ".vocab")

    # T5-like: nmt_nfkc, no byte fallback; the test texts' Thai, Hangul, Arabic, ... are unknown.
    train("t5uni", model_type="unigram", normalization_rule_name="nmt_nfkc",
          pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    # mT5-like with byte fallback and user-defined symbols
    train("mt5bf", model_type="unigram", normalization_rule_name="identity", byte_fallback=True,
          user_defined_symbols=["<sep>", "\u2581<extra_id_0>"],
          pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    # Llama-like BPE with byte fallback
    train("spmbpe", model_type="bpe", normalization_rule_name="identity", byte_fallback=True,
          unk_id=0, bos_id=1, eos_id=2, pad_id=-1)

def train_hf(out):
    from tokenizers import (Tokenizer, AddedToken, models, trainers, normalizers,
                            pre_tokenizers, decoders, processors, Regex)
    docs = training_docs()

    # GPT-2 style byte-level BPE (with an NFC normalizer so that normalized=True added tokens
    # differ from normalized=False ones)
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    t.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=VOCAB, show_progress=False,
                             special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(docs, trainer=tr)
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))])
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    t.add_tokens([AddedToken("xyz", single_word=True, normalized=False),
                  AddedToken("café", normalized=True),
                  AddedToken("[rs]", rstrip=True, normalized=False)])
    os.makedirs(os.path.join(out, "bytebpe"), exist_ok=True)
    t.save(os.path.join(out, "bytebpe", "tokenizer.json"), pretty=False)

    # Unigram with Sequence normalizer / pre-tokenizer
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("``", '"'),
                                         normalizers.Strip(left=True, right=True)])
    # Trained with prepend_scheme "always" so that the vocabulary holds "\u2581word" pieces;
    # saved with "first" (after WhitespaceSplit only the split starting at original offset 0
    # gets the prefix).
    seq = lambda scheme: pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme)])
    t.pre_tokenizer = seq("always")
    tr = trainers.UnigramTrainer(vocab_size=VOCAB, show_progress=False,
                                 special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>")
    t.train_from_iterator(docs, trainer=tr)
    t.pre_tokenizer = seq("first")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    t.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", t.token_to_id("</s>"))])
    # The Unigram trainer's scores vary in the last bits from run to run (its float sums follow
    # hash-map order, even on one thread), which also reorders near-ties: round the scores to
    # 1e-8 and order the trained pieces by (score desc, piece) so that reruns are identical.
    d = json.loads(t.to_str())
    v = d["model"]["vocab"]
    ns = 3
    assert [p for p, _ in v[:ns]] == ["<pad>", "</s>", "<unk>"], v[:ns]
    v[ns:] = sorted(([p, round(sc, 8)] for p, sc in v[ns:]), key=lambda x: (-x[1], x[0]))
    # The trainer appends the required characters that lost out with scores falling by 1e-4
    # each, in hash-set order: give that tail's scores to its pieces in piece order.
    k = len(v) - 1
    while k > ns and 0 <= v[k - 1][1] - v[k][1] < 1.1e-4:
        k -= 1
    scores = sorted((sc for _, sc in v[k:]), reverse=True)
    v[k:] = [[p, sc] for p, sc in zip(sorted(p for p, _ in v[k:]), scores)]
    t = Tokenizer.from_str(json.dumps(d))
    os.makedirs(os.path.join(out, "uniseq"), exist_ok=True)
    t.save(os.path.join(out, "uniseq", "tokenizer.json"), pretty=False)

def convert_step(out):
    """Runs under transformers 4.x: spiece.model -> tokenizer.json as transformers converts it."""
    import warnings, logging
    warnings.filterwarnings("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    from transformers import T5TokenizerFast, LlamaTokenizerFast
    for sub, cls, name, kw in [("t5uni", T5TokenizerFast, "spiece.model", dict(extra_ids=100)),
                               ("mt5bf", T5TokenizerFast, "spiece.model", dict(extra_ids=0)),
                               ("spmbpe", LlamaTokenizerFast, "tokenizer.model", dict())]:
        d = tempfile.mkdtemp()
        shutil.copy(os.path.join(out, sub, "spiece.model"), os.path.join(d, name))
        tok = cls.from_pretrained(d, from_slow=True, **kw)
        tok.backend_tokenizer.save(os.path.join(out, sub, "tokenizer.json"), pretty=False)
        shutil.rmtree(d)
        print(f"converted {sub} with {cls.__name__} (transformers {transformers.__version__})")

def make_legacy(out):
    import tokenizers
    # From mt5bf (not t5uni, whose tokenizer.json holds the 320 KB nmt_nfkc charsmap: a second
    # copy would double the directory's largest file for no extra coverage of the Metaspace form)
    d = json.load(open(os.path.join(out, "mt5bf", "tokenizer.json"), encoding="utf-8"))
    for k in ("pre_tokenizer", "decoder"):
        assert d[k]["type"] == "Metaspace" and d[k]["prepend_scheme"] == "always", d[k]
        d[k] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    s = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
    tokenizers.Tokenizer.from_str(s)        # must still load
    os.makedirs(os.path.join(out, "legacy"), exist_ok=True)
    with open(os.path.join(out, "legacy", "tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(s)

# ---------------------------------------------------------------------------------------------
# expected outputs

def hexs(s):
    return s.encode("utf-8").hex()

def sp_accepts_bytes(model):
    import sentencepiece as spm
    p = spm.SentencePieceProcessor(model_file=model)
    try:
        return p.encode(b"hello") == p.encode("hello")
    except Exception:
        return False

class SP:
    library = "sentencepiece"
    def __init__(self, path, raw_bytes):
        import sentencepiece as spm
        self.p = spm.SentencePieceProcessor(model_file=path)
        self.raw = raw_bytes
        self.eos = self.p.eos_id()
    def size(self): return self.p.get_piece_size()
    def n_added(self): return 0
    def plain(self, b): return self.p.encode(b if self.raw else as_str(b))
    def encode(self, b): return self.plain(b) + ([self.eos] if self.eos >= 0 else [])
    def pair(self, a, b): return self.encode(a) + self.encode(b)
    def decode(self, ids): return self.p.decode(ids)
    def decode_special(self, ids):
        out, run = [], []
        for i in ids:
            if self.p.is_control(i):
                if run: out.append(self.p.decode(run)); run = []
                out.append(self.p.id_to_piece(i))
            else:
                run.append(i)
        if run: out.append(self.p.decode(run))
        return "".join(out)
    def piece(self, i): return self.p.id_to_piece(i)
    def special_ids(self):
        return [i for i in range(self.size()) if self.p.is_control(i) or self.p.is_unknown(i)]
    def byte_id(self, v):
        i = self.p.piece_to_id("<0x%02X>" % v)
        return i if self.p.is_byte(i) else None
    def token_id(self, s):
        i = self.p.piece_to_id(s)
        return i if self.p.id_to_piece(i) == s else None

class HF:
    library = "tokenizers"
    def __init__(self, path):
        from tokenizers import Tokenizer
        self.t = Tokenizer.from_file(path)
    def size(self): return self.t.get_vocab_size(with_added_tokens=True)
    def n_added(self): return len(self.t.get_added_tokens_decoder())
    def plain(self, b): return self.t.encode(as_str(b), add_special_tokens=False).ids
    def encode(self, b): return self.t.encode(as_str(b)).ids
    def pair(self, a, b): return self.t.encode(as_str(a), as_str(b)).ids
    def decode(self, ids): return self.t.decode(ids, skip_special_tokens=True)
    def decode_special(self, ids): return self.t.decode(ids, skip_special_tokens=False)
    def special_ids(self):
        return sorted(i for i, a in self.t.get_added_tokens_decoder().items() if a.special)
    def byte_id(self, v): return self.t.token_to_id("<0x%02X>" % v)
    def token_id(self, s): return self.t.token_to_id(s)

def crafted_ids(tk, rng):
    """~15 id lists for decode: random ids, byte-fallback ids (valid and invalid UTF-8),
    unknown ids, specials in the middle, empty."""
    n = tk.size()
    L = [[]]
    for k in (1, 3, 5, 8, 12, 20, 30):
        L.append([rng.randrange(n) for _ in range(k)])
    sp = tk.special_ids()
    words = [i for i in (tk.token_id(w) for w in ("\u2581the", "\u2581a", "the", "Ġthe", "\u2581of", "of", "e", "s")) if i is not None][:4]
    if not words:
        words = [rng.randrange(n) for _ in range(3)]
    for s in sp[:6]:
        L.append(words[:2] + [s] + words[2:] + [s])
    L.append(sp[:8] + words)
    bs = [tk.byte_id(v) for v in (0xC3, 0xA9, 0xFF, 0xE2, 0x82, 0xAC, 0x41, 0xF0, 0x9F)]
    if all(x is not None for x in bs):
        c3, a9, ff, e2, x82, ac, a41, f0, x9f = bs
        L += [[c3, a9], [ff], words[:1] + [c3] + words[:1], [e2, x82], [e2, x82, ac, a41],
              [f0, x9f] + words[:2], [a9, c3], [ff, ff, a41, c3]]
    for s in ("<unk>", "<extra_id_0>", "<extra_id_99>", "<sep>", "\u2581<extra_id_0>", "<mask>", "xyz", "[rs]", "café"):
        i = tk.token_id(s)
        if i is not None and i < n:
            L.append(words[:2] + [i] + words[:2])
    out, seen = [], set()
    for ids in L:
        assert all(0 <= i < n for i in ids), ids
        if json.dumps(ids) not in seen:
            seen.add(json.dumps(ids)); out.append(ids)
    return out

def expected(tk, path, texts, pairs, seed):
    rng = random.Random(seed)
    enc = [tk.encode(b) for b in texts]
    r = {"path": path, "library": tk.library, "vocab_size": tk.size(),
         "encode": enc,
         "encode_plain": [tk.plain(b) for b in texts],
         "pairs": [[i, j, tk.pair(texts[i], texts[j])] for i, j in pairs],
         "decode": [hexs(tk.decode(ids)) for ids in enc],
         "decode_special": [hexs(tk.decode_special(ids)) for ids in enc],
         "decode_ids": [[ids, hexs(tk.decode(ids)), hexs(tk.decode_special(ids))]
                        for ids in crafted_ids(tk, rng)]}
    return r

def dump(obj, path):
    """JSON with one list row per line (small diffs, compact)."""
    c = lambda x: json.dumps(x, ensure_ascii=False, separators=(",", ":"))
    parts = ["{"]
    keys = list(obj)
    for ki, k in enumerate(keys):
        v = obj[k]
        end = "," if ki < len(keys) - 1 else ""
        if k == "tokenizers":
            parts.append(' "tokenizers": [')
            for ti, t in enumerate(v):
                parts.append("  {")
                tk = list(t)
                for j, kk in enumerate(tk):
                    e = "," if j < len(tk) - 1 else ""
                    vv = t[kk]
                    if isinstance(vv, list):
                        parts.append(f'   {c(kk)}: [\n' + ",\n".join("    " + c(x) for x in vv) + f"]{e}")
                    else:
                        parts.append(f"   {c(kk)}: {c(vv)}{e}")
                parts.append("  }" + ("," if ti < len(v) - 1 else ""))
            parts.append(" ]" + end)
        elif isinstance(v, list):
            parts.append(f' {c(k)}: [\n' + ",\n".join("  " + c(x) for x in v) + f"]{end}")
        else:
            parts.append(f" {c(k)}: {c(v)}{end}")
    parts.append("}")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")

def versions():
    import sentencepiece, tokenizers
    return {"sentencepiece": sentencepiece.__version__, "tokenizers": tokenizers.__version__}

def summary(rows):
    print(f"{'tokenizer':28s} {'library':14s} {'vocab':>7s} {'added':>6s} {'bytes':>9s}  round-trip==text")
    for r in rows:
        print(f"{r[0]:28s} {r[1]:14s} {r[2]:7d} {r[3]:6d} {r[4]:9d}  {r[5]}")

def write_cases(base, specs, texts, out_path, extra_meta):
    raw = sp_accepts_bytes(os.path.join(base, next(r for r, l in specs if l == "sentencepiece")))
    pairs = pair_indices(texts) if extra_meta.get("pairs_from_main", True) else None
    res, rows = [], []
    for k, (rel, lib) in enumerate(specs):
        p = os.path.join(base, rel)
        tk = SP(p, raw) if lib == "sentencepiece" else HF(p)
        r = expected(tk, rel, texts, pairs, seed=1000 + k)
        res.append(r)
        # round trip: what the library gives is recorded; here only counted for the summary
        same = sum(bytes.fromhex(h) == (t if lib == "sentencepiece" and raw else as_str(t).encode())
                   for h, t in zip(r["decode"], texts))
        rows.append((rel, lib, tk.size(), tk.n_added(), os.path.getsize(p), f"{same}/{len(texts)}"))
    meta = {"versions": versions(), "sentencepiece_encode_input": "bytes" if raw else "str"}
    meta.update({k: v for k, v in extra_meta.items() if k != "pairs_from_main"})
    dump({"meta": meta, "texts": [t.hex() for t in texts], "tokenizers": res}, out_path)
    summary(rows)
    print(f"wrote {out_path}: {os.path.getsize(out_path)} bytes")

MAIN_SPECS = [("t5uni/spiece.model", "sentencepiece"), ("t5uni/tokenizer.json", "tokenizers"),
              ("legacy/tokenizer.json", "tokenizers"),
              ("mt5bf/spiece.model", "sentencepiece"), ("mt5bf/tokenizer.json", "tokenizers"),
              ("spmbpe/spiece.model", "sentencepiece"), ("spmbpe/tokenizer.json", "tokenizers"),
              ("bytebpe/tokenizer.json", "tokenizers"), ("uniseq/tokenizer.json", "tokenizers")]

REAL_FILES = {  # destination (relative to --real-dir) <- path inside the diffsynth 1.1.9 wheel
    "t5/spiece.model": "diffsynth/tokenizer_configs/flux/tokenizer_2/spiece.model",
    "t5/tokenizer.json": "diffsynth/tokenizer_configs/flux/tokenizer_2/tokenizer.json",
    "mt5/spiece.model": "diffsynth/tokenizer_configs/hunyuan_dit/tokenizer_t5/spiece.model",
    "t5_sd3/tokenizer.json": "diffsynth/tokenizer_configs/stable_diffusion_3/tokenizer_3/tokenizer.json",
}
REAL_SPECS = [("t5/spiece.model", "sentencepiece"), ("t5/tokenizer.json", "tokenizers"),
              ("mt5/spiece.model", "sentencepiece"), ("t5_sd3/tokenizer.json", "tokenizers")]

def layout_real(dst, src):
    """Copy the real tokenizer files into dst from a diffsynth wheel / unpacked tree (src), or
    from a wheel downloaded with pip."""
    tmp = None
    if src is None:
        tmp = tempfile.mkdtemp()
        subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                               "diffsynth==1.1.9", "-d", tmp])
        src = os.path.join(tmp, [f for f in os.listdir(tmp) if f.endswith(".whl")][0])
    for rel, inner in REAL_FILES.items():
        d = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if os.path.isdir(src):
            cand = [os.path.join(src, inner), os.path.join(src, inner.split("/", 1)[1])]
            shutil.copy(next(c for c in cand if os.path.exists(c)), d)
        else:
            with zipfile.ZipFile(src) as z, open(d, "wb") as f:
                f.write(z.read(inner))
    if tmp:
        shutil.rmtree(tmp)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "tokenizers"))
    ap.add_argument("--python4", help="python with transformers 4.x for the conversion step")
    ap.add_argument("--convert-step", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--real-dir", help="lay the real T5 files out here and write real.json")
    ap.add_argument("--real-src", help="diffsynth wheel or unpacked tree (default: pip download)")
    ap.add_argument("--only-real", action="store_true", help="skip training; only real.json")
    ap.add_argument("--only-cases", action="store_true", help="skip training; only cases.json")
    a = ap.parse_args()
    if a.convert_step:
        return convert_step(a.convert_step)
    out = a.out
    if not (a.only_real or a.only_cases):
        os.makedirs(out, exist_ok=True)
        train_spm(out)
        train_hf(out)
        if a.python4:
            subprocess.check_call([a.python4, os.path.abspath(__file__), "--convert-step", out])
        else:
            print("no --python4: keeping the converted tokenizer.json files in", out)
        make_legacy(out)
    texts = test_texts()
    if not a.only_real:
        for rel, _ in MAIN_SPECS:
            assert os.path.exists(os.path.join(out, rel)), rel
        write_cases(out, MAIN_SPECS, texts, os.path.join(out, "cases.json"), {})
    if a.real_dir:
        os.makedirs(out, exist_ok=True)
        if not all(os.path.exists(os.path.join(a.real_dir, r)) for r in REAL_FILES) or a.real_src:
            layout_real(a.real_dir, a.real_src)
        write_cases(a.real_dir, REAL_SPECS, texts, os.path.join(out, "real.json"),
                    {"files": {r: "diffsynth==1.1.9 wheel: " + p for r, p in REAL_FILES.items()}})

if __name__ == "__main__":
    main()
