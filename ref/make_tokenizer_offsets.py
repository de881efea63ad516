#!/usr/bin/env python3
"""Writes tests/data/tokenizers/offsets.json, the token spans that fat5_tokenize_offsets must give:

- for each tokenizer.json fixture of tests/data/tokenizers (see its README; bytetrim/tokenizer.json,
  bytebpe's with a trimming ByteLevel post-processor, is written here), the ids and spans that
  Hugging Face `tokenizers` gives (Encoding.ids and Encoding.offsets, special tokens added), the
  spans turned from characters of the decoded text into bytes of the UTF-8 input;
- for the three spiece.model fixtures, the ids and the pieces' begin / end (bytes of the input)
  that `sentencepiece` gives, with EOS appended at (0, 0) as fat5_tokenize appends it.

The texts are cases.json's (several scripts, NFKC-changed characters, added tokens, invalid
UTF-8) and EXTRA below. One long text (over the 64 KiB parts of fat5's tokenizer) is kept as a
recipe and a digest: the same texts, each followed by a space, repeated until LONG_BYTES bytes;
its ids and spans are summed into an FNV-1a hash (long_digest). A rerun gives identical files.

    pip install tokenizers==0.23.3 sentencepiece==0.2.3
    python3 ref/make_tokenizer_offsets.py
"""
import codecs
import json
import os

import sentencepiece as spm
from tokenizers import Tokenizer, __version__ as tk_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "tests", "data", "tokenizers")
NAMES = ["t5uni", "uniseq", "mt5bf", "bytebpe", "spmbpe", "legacy", "bytetrim"]
SPM_NAMES = ["t5uni", "mt5bf", "spmbpe"]   # their spiece.model files
LONG_BYTES = 70000

EXTRA = [
    "Say Hello", "  Hello   World  ", " ", "x", "\u200bab", "a\u200b", "\u200b", "ｶﾞｷﾞ", "ﬃ ﬁ\u0301",
    "a\u0323\u0301 o\u031b\u0323 e\u0301\u0302\u0323", "\u0301lead", "Hello\u3000World", "tab\tand\nnewline\r\n",
    "①②③ ⑴", "2024-01-01 12:34:56", "¼ ½ ¾", "Ｈｅｌｌｏ！", "😀 a 😀😀 b", "a <mask>", "<mask>",
    " xyz ", "[rs]", "café", "cafe\u0301", "\u1100\u1161\u11a8", "é\u0301", "ǅ", "Ａ\u0308\u0301",
    "x" * 40 + " " + "ab " * 20,
]


def make_bytetrim():
    """bytetrim/tokenizer.json: bytebpe's with GPT-2's prefix space (ByteLevel pre-tokenizer
    add_prefix_space true) and a ByteLevel post-processor that trims the spans' spaces
    (trim_offsets, add_prefix_space true) before bytebpe's template."""
    j = json.load(open(os.path.join(DIR, "bytebpe", "tokenizer.json")))
    j["pre_tokenizer"]["add_prefix_space"] = True
    j["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        j["post_processor"]]}
    os.makedirs(os.path.join(DIR, "bytetrim"), exist_ok=True)
    with open(os.path.join(DIR, "bytetrim", "tokenizer.json"), "w") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))


def char_byte_starts(b):
    """The byte offset in b of each character of b.decode('utf-8', 'replace'), then len(b)."""
    errs = []

    def rec(e):
        errs.append((e.start, e.end))
        return ("\ufffd", e.end)

    codecs.register_error("fat5_offsets_rec", rec)
    s = b.decode("utf-8", "fat5_offsets_rec")
    starts, pos, k = [], 0, 0
    for ch in s:
        starts.append(pos)
        if k < len(errs) and errs[k][0] == pos:
            pos = errs[k][1]
            k += 1
        else:
            pos += len(ch.encode("utf-8"))
    assert pos == len(b)
    starts.append(len(b))
    return s, starts


def encode(tk, b):
    s, starts = char_byte_starts(b)
    e = tk.encode(s)
    offs = []
    for a, z in e.offsets:
        offs += [starts[a], starts[z]]
    return e.ids, offs


def encode_spm(sp, b):
    """sentencepiece's pieces of the bytes b with their begin / end (bytes of b), then EOS with
    (0, 0) when the model has one (T5's convention, as fat5_tokenize appends it)."""
    r = sp.encode(b, return_type="proto")
    ids, offs = [], []
    for x in r.pieces:
        ids.append(x.id)
        offs += [x.begin, x.end]
    if sp.eos_id() >= 0:
        ids.append(sp.eos_id())
        offs += [0, 0]
    return ids, offs


def long_text(texts):
    out = b""
    while len(out) < LONG_BYTES:
        for t in texts:
            out += t + b" "
            if len(out) >= LONG_BYTES:
                break
    return out


def long_digest(ids, offs):
    """FNV-1a (64 bits) over id, start, end of each token, each as 8 little-endian bytes."""
    h = 0xCBF29CE484222325
    for i, v in enumerate(ids):
        for w in (v, offs[2 * i], offs[2 * i + 1]):
            for byte in (w & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"):
                h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def main():
    make_bytetrim()
    cases = json.load(open(os.path.join(DIR, "cases.json")))
    texts = [bytes.fromhex(h) for h in cases["texts"]] + [t.encode("utf-8") for t in EXTRA]
    longt = long_text(texts)
    out = {"meta": {"tokenizers": tk_version, "sentencepiece": spm.__version__, "long_bytes": LONG_BYTES,
                    "long_recipe": "the texts below in order, each followed by one space, "
                                   "repeated, until long_bytes bytes or more"},
           "texts": [t.hex() for t in texts], "tokenizers": []}
    for name in NAMES:
        tk = Tokenizer.from_file(os.path.join(DIR, name, "tokenizer.json"))
        ent = {"path": name + "/tokenizer.json", "ids": [], "offsets": []}
        for t in texts:
            ids, offs = encode(tk, t)
            ent["ids"].append(ids)
            ent["offsets"].append(offs)
        ids, offs = encode(tk, longt)
        ent["long"] = {"n": len(ids), "fnv1a": long_digest(ids, offs)}
        out["tokenizers"].append(ent)
    for name in SPM_NAMES:
        sp = spm.SentencePieceProcessor(model_file=os.path.join(DIR, name, "spiece.model"))
        ent = {"path": name + "/spiece.model", "ids": [], "offsets": []}
        for t in texts:
            ids, offs = encode_spm(sp, t)
            ent["ids"].append(ids)
            ent["offsets"].append(offs)
        ids, offs = encode_spm(sp, longt)
        ent["long"] = {"n": len(ids), "fnv1a": long_digest(ids, offs)}
        out["tokenizers"].append(ent)
    path = os.path.join(DIR, "offsets.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("%s: %d texts, %d bytes" % (path, len(texts), os.path.getsize(path)))


if __name__ == "__main__":
    main()
