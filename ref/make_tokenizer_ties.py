#!/usr/bin/env python3
"""Writes tests/data/tokenizers/ties.json: Unigram segmentations whose best paths tie, or nearly
tie, and the scores that Hugging Face `tokenizers` reads from tokenizer.json.

Both libraries pick the best path left to right and keep the first of equal candidates, so on an
exact tie the last piece that starts earliest wins. `tokenizers` reads the scores with
serde_json's default float parse, which is not always the nearest double: the published T5
tokenizer.json's "-" and "---" land an ulp away, and runs of 7, 10, 13, ... hyphens, which tie
with the nearest doubles, no longer tie there. The fixture holds:

- "scores": [literal, bits] pairs: a JSON number as written in a Unigram vocabulary and the f64
  that `tokenizers` holds after reading it (its own serialisation, read back), as 16 hex digits,
  or null where `tokenizers` refuses the file. The literals: the four T5 scores below, seeded
  random doubles written by Python's repr (as the T5 converter writes them), long significands,
  integers past 2^53 and 2^64, exponents near and past the double range, signed zeros.
- "models": small tokenizers, each given as tokenizer.json text ("json") and as a sentencepiece
  ModelProto ("model_hex": the same pieces, scores rounded to float, identity normaliser with the
  dummy prefix), with texts (hex of UTF-8) and the ids that `tokenizers`
  (encode(text, add_special_tokens=False)) and `sentencepiece` (encode(bytes)) give:
  * "hyphen": the T5 pieces "▁", "-", "---", "▁--" with T5's scores; hyphen runs 1..40 and runs
    inside words;
  * "exact": scores that tie exactly in double and float ("a" -1, "aa" -2, "aaa" -3, so every
    split of a run of a ties; "q" 10 then the unknown "z" ties "qz" -5, the lowest score).

    pip install tokenizers==0.23.3 sentencepiece==0.2.3
    python3 ref/make_tokenizer_ties.py
"""
import json
import os
import random
import struct

import sentencepiece as spm
from tokenizers import Tokenizer, __version__ as tk_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tokenizers", "ties.json")

T5_SCORES = ["-2.0122928619384766", "-5.129043102264404", "-12.130167007446289", "-9.931743621826172"]
FIXED_LITERALS = T5_SCORES + [
    "0", "-0", "0.0", "-0.0", "1", "-1", "10", "-5", "0.1", "-0.1", "1e0", "1E+2", "1e-2", "-2.5e-3",
    "9007199254740993", "-9007199254740993", "18446744073709551615", "18446744073709551616",
    "-9223372036854775808", "-9223372036854775809", "123456789012345678901234567890",
    "1844674407370955161.9", "1844674407370955161.3", "18446744073709551619.5",
    "0.30000000000000004441", "-12.13016700744628906250000001", "3.141592653589793238462643383279",
    "-0.000000000000000000000000000123456789", "1.7976931348623157e308", "-1.7976931348623158e308",
    "2.2250738585072014e-308", "4.9e-324", "2.4703282292062327e-324", "1e-400", "-1e-400",
    "1e-99999999999", "0e99999999999", "0e400", "123.456e-300", "0.000001e-310", "1e22", "1e23",
    "-8.98846567431158e307", "1e308", "1e309", "-1e400", "1e99999999999", "12345678901234567890e-30",
]


def random_literals(n, seed=1234):
    """Doubles in [-20, 0) written as Python's repr, as the T5 converter writes its scores."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        x = -rnd.uniform(0, 20)
        out.append(repr(x))
        out.append(repr(x / 1e5))   # more digits after the point
    return out


def unigram_json(vocab_literals, unk_id=0, pieces=None, metaspace=True):
    """A tokenizer.json text: a Unigram model whose scores are the literals, written as given."""
    pieces = pieces or ["p%d" % i for i in range(len(vocab_literals))]
    vocab = ", ".join("[%s, %s]" % (json.dumps(p), lit) for p, lit in zip(pieces, vocab_literals))
    pre = ('{"type": "Metaspace", "replacement": "\\u2581", "prepend_scheme": "always", "split": true}'
           if metaspace else "null")
    return ('{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null, '
            '"pre_tokenizer": %s, "post_processor": null, "decoder": null, "model": {"type": "Unigram", '
            '"unk_id": %d, "vocab": [%s], "byte_fallback": false}}' % (pre, unk_id, vocab))


def read_scores(literals):
    """[literal, 16 hex digits of the f64 tokenizers holds, or None where it refuses the file]."""
    out = []
    for lit in literals:
        text = unigram_json(["0", lit], metaspace=False)
        try:
            tok = Tokenizer.from_str(text)
        except Exception:
            out.append([lit, None])
            continue
        back = json.loads(tok.to_str())["model"]["vocab"][1][1]   # serialised shortest, read back exactly
        out.append([lit, struct.pack(">d", float(back)).hex()])
    return out


def pb_varint(v):
    b = bytearray()
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)


def pb_bytes(field, data):
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def spm_model(pieces):
    """A sentencepiece ModelProto: (piece, score literal, type) with type 1 normal, 2 unknown,
    3 control; Unigram; identity normaliser with the dummy prefix, extra spaces removed."""
    b = b""
    for piece, lit, typ in pieces:
        m = pb_bytes(1, piece.encode("utf-8")) + bytes([2 << 3 | 5]) + struct.pack("<f", float(lit))
        m += pb_varint(3 << 3) + pb_varint(typ)
        b += pb_bytes(1, m)
    b += pb_bytes(2, pb_varint(3 << 3) + pb_varint(1))   # trainer_spec.model_type = UNIGRAM
    b += pb_bytes(3, pb_bytes(1, b"identity") + bytes([3 << 3, 1, 4 << 3, 1, 5 << 3, 1]))
    return b


HEAD = [("<pad>", "0", 3), ("</s>", "0", 3), ("<unk>", "0", 2)]
MODELS = {
    "hyphen": HEAD + [("\u2581", T5_SCORES[0], 1), ("-", T5_SCORES[1], 1), ("---", T5_SCORES[2], 1),
                      ("\u2581--", T5_SCORES[3], 1), ("a", "-8.5", 1), ("b", "-9.25", 1)],
    "exact": HEAD + [("\u2581", "-0.5", 1), ("a", "-1", 1), ("aa", "-2", 1), ("aaa", "-3", 1), ("q", "10", 1),
                     ("qz", "-5", 1), ("b", "-4", 1)],
}
TEXTS = {
    "hyphen": ["-" * n for n in range(1, 41)] + [
        "a" + "-" * 7 + "b", "a" + "-" * 10, "-" * 13 + "b", "a -- --- ---- ------- ---------- b",
        "ab" + "-" * 16 + "ba", "- " * 5 + "-" * 19, "b-a-" + "-" * 22 + "a",
    ],
    "exact": ["a" * n for n in range(1, 13)] + [
        "qz", "qzqz", "aqz", "qzz", "zz", "a qz aa", "bqz", "aaqzaaa", "qzaaaaq", "b" + "a" * 7 + "b", "zqz",
    ],
}


def main():
    literals = FIXED_LITERALS + random_literals(150)
    models = []
    for name, pieces in MODELS.items():
        text = unigram_json([lit for _, lit, _ in pieces], unk_id=2, pieces=[p for p, _, _ in pieces])
        model = spm_model(pieces)
        tok = Tokenizer.from_str(text)
        sp = spm.SentencePieceProcessor(model_proto=model)
        texts = TEXTS[name]
        models.append({
            "name": name, "json": text, "model_hex": model.hex(),
            "texts": [t.encode("utf-8").hex() for t in texts],
            "tokenizers": [tok.encode(t, add_special_tokens=False).ids for t in texts],
            "sentencepiece": [sp.encode(t.encode("utf-8")) for t in texts],
        })
    doc = {"meta": {"versions": {"tokenizers": tk_version, "sentencepiece": spm.__version__}},
           "scores": read_scores(literals), "models": models}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
