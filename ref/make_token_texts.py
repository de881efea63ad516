#!/usr/bin/env python3
"""Writes tests/data/tokenizers/token_texts.json: the text of every id of three fixture tokenizers
as transformers' stop-string matching reads a vocabulary (StopStringCriteria.clean_tokenizer_vocab,
the same static prefix), for fat5_tokenizer_token_texts to compare against.

    python3 ref/make_token_texts.py
"""
import json
import os

import transformers
from transformers import PreTrainedTokenizerFast
from transformers.generation.stopping_criteria import StopStringCriteria

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "tokenizers")
NAMES = ["t5uni", "uniseq", "mt5bf"]


def main():
    out = {"transformers": transformers.__version__, "tokenizers": {}}
    for name in NAMES:
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, name, "tokenizer.json"))
        texts, ids = StopStringCriteria.clean_tokenizer_vocab(tok)
        by_id = dict(zip(ids, texts))
        n = max(by_id) + 1
        out["tokenizers"][name] = [by_id.get(i, "") for i in range(n)]
    path = os.path.join(DATA, "token_texts.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, {k: len(v) for k, v in out["tokenizers"].items()})


if __name__ == "__main__":
    main()
