#!/usr/bin/env python3
"""fat5_tokenizer_train (BPE) against `tokenizers`' BpeTrainer on data/fortunes: wall time for the
same thread counts, the vocabulary and merges compared, and the compression (tokens per byte) on
held-out sentences.

The sentences are fat5's corpus reader's (the lines of fortunes.txt.gz, "%" separators and empty
lines left out); every tenth one is held out, the others are trained on. `tokenizers` trains the
pipeline fat5 writes (NFKC, Metaspace or ByteLevel with its alphabet, BPE with "<unk>") with
train_from_iterator on the sentences in memory, in a fresh process per thread count
(RAYON_NUM_THREADS); its time is train_from_iterator's. fat5's time is fat5_tokenizer_train's
whole call (reading the file, training, writing the directory), from ref/toktrain_bpe_bench.c.
Each figure is the best of --repeat runs, the two run alternately.

    python3 ref/bench_toktrain_bpe.py [--vocab 8000] [--threads 1 2] [--repeat 3] [--byte-level]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "toktrain_bpe_bench")

HF_CHILD = r"""
import json, sys, time
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
train, heldout, out, vocab, bl = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
lines = open(train, encoding="utf-8", newline="\n").read().split("\n")[:-1]
tok = Tokenizer(models.BPE(unk_token=None if bl else "<unk>"))
tok.normalizer = normalizers.NFKC()
kw = {}
if bl:
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    kw["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
else:
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<pad>", "</s>", "<unk>"], show_progress=False, **kw)
t = time.perf_counter()
tok.train_from_iterator(lines, tr)
dt = time.perf_counter() - t
tok.save(out)
held = open(heldout, encoding="utf-8", newline="\n").read().split("\n")[:-1]
n = sum(len(e.ids) for e in tok.encode_batch(held, add_special_tokens=False))
print(json.dumps({"train_s": dt, "heldout_tokens": n, "heldout_bytes": sum(len(h.encode()) for h in held)}))
"""


def sentences():
    text = gzip.open(os.path.join(ROOT, "data", "fortunes", "fortunes.txt.gz")).read().decode("utf-8")
    out = []
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if line and line != "%":
            out.append(line)
    return out


def model_of(path):
    m = json.load(open(path, encoding="utf-8"))["model"]
    return sorted(m["vocab"].items(), key=lambda kv: kv[1]), m["merges"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--byte-level", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(BENCH):
        subprocess.check_call(["make", "amalgamate"], cwd=ROOT)
        subprocess.check_call(["cc", "-std=c99", "-O2", "-DFAT5_NO_CUDA", "-I.", "-o", BENCH,
                               "ref/toktrain_bpe_bench.c", "-lm", "-lpthread"], cwd=ROOT)
    sents = sentences()
    held = sents[9::10]
    train = [s for i, s in enumerate(sents) if i % 10 != 9]
    bl = 1 if a.byte_level else 0
    with tempfile.TemporaryDirectory() as tmp:
        tf, hf = os.path.join(tmp, "train.txt"), os.path.join(tmp, "heldout.txt")
        with open(tf, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(s + "\n" for s in train))
        with open(hf, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(s + "\n" for s in held))
        print(f"fortunes: {len(train)} sentences trained on ({os.path.getsize(tf)} bytes), {len(held)} held out; "
              f"vocab {a.vocab}, {'ByteLevel' if bl else 'Metaspace'}")
        for th in a.threads:
            best = {"hf": None, "fat5": None}
            for _ in range(a.repeat):
                env = dict(os.environ, RAYON_NUM_THREADS=str(th), TOKENIZERS_PARALLELISM="true")
                r = json.loads(subprocess.check_output(
                    [sys.executable, "-c", HF_CHILD, tf, hf, os.path.join(tmp, "hf.json"), str(a.vocab), str(bl)],
                    env=env))
                if best["hf"] is None or r["train_s"] < best["hf"]["train_s"]:
                    best["hf"] = r
                r = json.loads(subprocess.check_output(
                    [BENCH, tf, hf, os.path.join(tmp, "fat5"), str(a.vocab), str(th), str(bl)]))
                if best["fat5"] is None or r["train_s"] < best["fat5"]["train_s"]:
                    best["fat5"] = r
            same = model_of(os.path.join(tmp, "hf.json")) == model_of(os.path.join(tmp, "fat5", "tokenizer.json"))
            for k in ("hf", "fat5"):
                r = best[k]
                print(f"  threads {th}  {k:5s} {r['train_s']:7.3f} s   held-out {r['heldout_tokens']} tokens / "
                      f"{r['heldout_bytes']} bytes = {r['heldout_tokens'] / r['heldout_bytes']:.4f} tokens per byte")
            print(f"  threads {th}  vocabulary and merges identical: {same}")


if __name__ == "__main__":
    main()
