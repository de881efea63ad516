#!/usr/bin/env python3
"""Writes tests/data/tokenizers/toktrain_bpe.json: BPE vocabularies and merges that Hugging Face
`tokenizers`' BpeTrainer trains, for tests/test_toktrain_bpe.c to compare fat5_tokenizer_train's
with (ids, pieces and merge order identical).

The corpora (each sentence once per entry, trained in this order):
  - "fortunes": the first 3,000 sentences of data/fortunes/fortunes.txt.gz as fat5's corpus reader
    takes them (lines of the fortune file, the "%" separators and empty lines left out), then the
    multilingual sentences below;
  - "multi": the multilingual sentences alone (many scripts, NFKC compatibility characters,
    combining marks, emoji, tabs and runs of spaces, contractions), where late merges of pairs
    seen once or twice tie on their counts.

Each case trains `tokenizers`' pipeline as fat5 writes it in tokenizer.json: models.BPE
(unk_token "<unk>"; none for byte-level), the NFKC normalizer (none for "identity"), and
pre_tokenizers.Metaspace() (replacement "\u2581", prepend_scheme "always", split) or
pre_tokenizers.ByteLevel(add_prefix_space=False) with ByteLevel.alphabet() as the initial
alphabet, with BpeTrainer(vocab_size, special_tokens ["<pad>", "</s>", "<unk>"], min_frequency,
limit_alphabet, max_token_length), fed by train_from_iterator (sentences without their newline).
The vocabulary and merges recorded are those of the trained model's own tokenizer.json.

`tokenizers` breaks ties at the limit_alphabet boundary by hash order (it differs between runs);
the script checks that no case has such a tie, and trains every case three times to check that
the result does not change.

    pip install tokenizers==0.22.2
    python3 ref/make_toktrain_bpe.py
"""
import collections
import gzip
import json
import os
import unicodedata

from tokenizers import Tokenizer, __version__ as tk_version, models, normalizers, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizers", "toktrain_bpe.json")
SPECIALS = ["<pad>", "</s>", "<unk>"]

MULTI = [
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Über allen Gipfeln ist Ruh, in allen Wipfeln spürest du kaum einen Hauch.",
    "Ελληνικά: Γνῶθι σεαυτόν, ἀρχὴ ἥμισυ παντός.",
    "Москва — столица России; ёлка, йогурт, щи и каша.",
    "日本語のテキストです。東京は大きい都市です。ｶﾀｶﾅも。",
    "中文句子：我爱学习自然语言处理，你呢？",
    "한국어 문장입니다. 안녕하세요! 감사합니다.",
    "العربية: مرحبا بالعالم، كيف حالك؟",
    "עברית: שלום עולם, מה שלומך?",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "ไทย: สวัสดีชาวโลก ขอบคุณครับ",
    "Emoji 😀👍🏽 and flags 🇫🇷🇩🇪, a ZWJ sequence 👩\u200d💻.",
    "Fullwidth ＡＢＣ１２３ and ligatures ﬁ ﬂ ﬀ, superscripts x² y³, fractions ½ ¼.",
    "Combining: e\u0301 a\u0308 n\u0303 against é ä ñ; Angstrom \u212b, Ohm \u2126, Kelvin \u212a.",
    "Spaces:  two  spaces,\ttab,\t\ttwo tabs, trailing space ",
    " leading space, no-break\u00a0space and ideographic\u3000space.",
    "Contractions: it's, don't, we're, they've, I'm, you'll, he'd, IT'S.",
    "Numbers: 3.14159, 2,718, 1e10, ٣٤٥ (Arabic-Indic), ①②③, Ⅻ.",
    "Mixed: naïve café résumé coöperate façade jalapeño piñata.",
    "Math: ∀x∈ℝ, x²≥0; ∑ᵢ aᵢ; ℌ ℍ ℕ ⅈ.",
    "Hangul jamo 각 and compatibility ㄱㅏ, halfwidth ﾡ.",
    "A bell \u0007 and a soft\u00adhyphen, a zero\u200bwidth space.",
    "Dashes – — ‒ and quotes “double” ‘single’ «guillemets» „low“.",
    "The café's naïve résumé: ﬁve ﬂoors, ２０２４年.",
    "Москва и Санкт-Петербург — большие города России.",
    "東京と大阪は日本の大きい都市です。",
    "Ελληνικά και Русский и 日本語 together.",
    "   three leading spaces and a final tab\t",
    "Ǆ ǅ ǆ Ǳ ǲ ǳ ĳ Ĳ ŉ ſ ẞ ß.",
    "Keycap 1\ufe0f\u20e3, variation \u2764\ufe0f, skin tones 👋🏻👋🏿.",
]

CASES = [
    # name, corpus, byte_level, normalization_rule_name, vocab_size, min_frequency, limit_alphabet, max_token_length
    ("fortunes_metaspace", "fortunes", 0, "nfkc", 1000, 0, 0, 0),
    ("fortunes_bytelevel", "fortunes", 1, "nfkc", 1000, 0, 0, 0),
    ("fortunes_limits", "fortunes", 0, "identity", 800, 3, 80, 5),
    ("fortunes_minfreq_stop", "fortunes", 1, "nfkc", 2000, 40, 0, 0),
    ("multi_metaspace", "multi", 0, "nfkc", 700, 0, 0, 0),
    ("multi_bytelevel", "multi", 1, "nfkc", 700, 0, 0, 0),
    ("multi_identity_limit", "multi", 0, "identity", 500, 0, 69, 4),
    ("multi_symbols", "multi", 0, "nfkc", 500, 0, 0, 0),
]
# the control and user-defined symbols of a case (special tokens after "<pad>", "</s>", "<unk>"):
# a one-character symbol stands for that character in the alphabet, and a merge whose text is a
# symbol gives the symbol's id
SYMBOLS = {"multi_symbols": (["<ctl>"], ["<usr>", "é", "\u2581and"])}


def fortunes_sentences(n):
    text = gzip.open(os.path.join(ROOT, "data", "fortunes", "fortunes.txt.gz")).read().decode("utf-8")
    out = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if line and line != "%":
            out.append(line)
        if len(out) == n:
            break
    return out


def train(sentences, byte_level, rule, vocab_size, min_frequency, limit_alphabet, max_token_length, specials=SPECIALS):
    tok = Tokenizer(models.BPE(unk_token=None if byte_level else "<unk>"))
    if rule != "identity":
        tok.normalizer = normalizers.NFKC()
    kw = {}
    if byte_level:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        kw["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    if min_frequency:
        kw["min_frequency"] = min_frequency
    if limit_alphabet:
        kw["limit_alphabet"] = limit_alphabet
    if max_token_length:
        kw["max_token_length"] = max_token_length
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False, **kw)
    tok.train_from_iterator(sentences, tr)
    model = json.loads(tok.to_str())["model"]
    vocab = [p for p, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    assert [model["vocab"][p] for p in vocab] == list(range(len(vocab)))
    ids = model["vocab"]
    merges = [[ids[a], ids[b]] for a, b in model["merges"]]
    return tok, vocab, merges


def alphabet_counts(tok, sentences):
    """The characters of the words tokenizers trains on, with their counts"""
    counts = collections.Counter()
    for s in sentences:
        n = tok.normalizer.normalize_str(s) if tok.normalizer else s
        for w, _ in tok.pre_tokenizer.pre_tokenize_str(n):
            counts.update(w)
    return counts


def main():
    fort = fortunes_sentences(3000)
    corpora = {"fortunes": fort + MULTI, "multi": MULTI}
    cases = []
    for name, corpus, bl, rule, vs, mf, la, ml in CASES:
        sents = corpora[corpus]
        ctl, usr = SYMBOLS.get(name, ([], []))
        specials = SPECIALS + ctl + usr
        runs = [train(sents, bl, rule, vs, mf, la, ml, specials) for _ in range(3)]
        tok, vocab, merges = runs[0]
        for _, v2, m2 in runs[1:]:
            assert v2 == vocab and m2 == merges, name + ": tokenizers gives different results between runs"
        counts = alphabet_counts(tok, sents)
        if bl:
            alphabet = set(pre_tokenizers.ByteLevel.alphabet()) | set(counts)
        else:
            alphabet = set(counts)
        if la and la < len(alphabet):
            by_count = sorted(counts[c] for c in alphabet)
            drop = len(alphabet) - la
            assert by_count[drop - 1] != by_count[drop], name + ": a tie at the limit_alphabet boundary"
        kept = la if la and la < len(alphabet) else len(alphabet)
        new_chars = kept - sum(1 for p in specials if len(p) == 1 and p in alphabet)
        assert vocab[:len(specials)] == specials
        assert all(len(p) == 1 for p in vocab[len(specials):len(specials) + new_chars])
        cases.append({
            "name": name, "corpus": corpus, "byte_level": bl, "normalization_rule_name": rule,
            "vocab_size": vs, "min_frequency": mf, "limit_alphabet": la, "max_token_length": ml,
            "control_symbols": ctl, "user_defined_symbols": usr,
            "alphabet_size": kept, "vocab": vocab, "merges": merges,
        })
        print(f"{name}: {len(vocab)} pieces, {len(merges)} merges, alphabet {kept}, "
              f"{len(merges) - (len(vocab) - len(specials) - new_chars)} merges to a piece already there")
    doc = {
        "generator": "ref/make_toktrain_bpe.py", "tokenizers": tk_version, "special_tokens": SPECIALS,
        "fortunes": fort, "multi": MULTI, "cases": cases,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
