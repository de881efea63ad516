#!/usr/bin/env python3
# toktrain_quality.py — fat5's Unigram tokenizer trainer against SentencePiece's spm_train: the
# compression of held-out text (tokens per byte, each side encoding with its own model) and the
# training wall time, for each thread count.
#
#     python3 ref/toktrain_quality.py [--corpus data/fortunes/fortunes.txt.gz] [--vocab 8000]
#                                     [--threads 1,2] [--work /tmp/toktrain_quality]
#
# Needs the Python package sentencepiece and a C compiler; builds build/dev/fat5.h (make) and a
# small trainer / encoder program in the work directory. The corpus: its lines (the fortune "%"
# separators and blank lines left out), 10% of them held out (a seeded shuffle), the rest trained
# on by both with the same settings: --model_type=unigram, --normalization_rule_name=identity, the
# other spm_train defaults (fat5: the same defaults, no <extra_id_N> sentinels). Tokens are counted
# without special tokens (no EOS), over the UTF-8 bytes of each held-out line; fat5 encodes with
# the spiece.model it wrote (SentencePiece's rules, as spm's side; its tokenizer.json's count is
# printed too: `tokenizers`' WhitespaceSplit drops tabs and newlines). fat5's spiece.model is also
# encoded with sentencepiece: its count must equal fat5's own.
import argparse
import gzip
import os
import random
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# trains with fat5_tokenizer_train (argv: train file, out dir, vocab size, threads), or counts the
# tokens of each line of a file (argv: "encode", tokenizer path, file): "tokens bytes"
C_PROGRAM = r"""
#define FAT5_IMPLEMENTATION
#include "fat5.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    fat5_ctx *ctx;
    fat5_ctx_config cc = fat5_ctx_config_default();
    char why[256], line[1 << 16];
    if (argc < 4) return 2;
    cc.device = FAT5_DEVICE_CPU;
    cc.n_threads = argc > 4 ? atoi(argv[4]) : 1;
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why)) { fprintf(stderr, "%s\n", why); return 1; }
    if (!strcmp(argv[1], "encode")) {
        fat5_tokenizer *t;
        FILE *f = fopen(argv[3], "rb");
        long long toks = 0, bytes = 0;
        if (!f || fat5_tokenizer_load(ctx, argv[2], &t)) { fprintf(stderr, "%s\n", fat5_last_error(ctx)); return 1; }
        while (fgets(line, sizeof line, f)) {
            int32_t *ids;
            int64_t n;
            size_t len = strlen(line);
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
            if (fat5_tokenize(t, line, len, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &n)) {
                fprintf(stderr, "%s\n", fat5_last_error(ctx));
                return 1;
            }
            toks += n, bytes += (long long)len;
            fat5_free(ctx, ids);
        }
        printf("%lld %lld\n", toks, bytes);
    } else {
        fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
        fat5_tokenizer_train_report rep;
        const char *files[1];
        files[0] = argv[1];
        cfg.vocab_size = atoi(argv[3]);
        cfg.normalization_rule_name = "identity";
        cfg.num_threads = cc.n_threads;
        cfg.extra_ids = 0;
        cfg.input_format = "text";
        if (fat5_tokenizer_train(ctx, &cfg, files, 1, argv[2], &rep)) {
            fprintf(stderr, "%s\n", fat5_last_error(ctx));
            return 1;
        }
        printf("%.3f %lld %d\n", rep.seconds, (long long)rep.alphabet_size, rep.rounds);
    }
    fat5_ctx_destroy(ctx);
    return 0;
}
"""


def split(corpus, work):
    opener = gzip.open if corpus.endswith(".gz") else open
    with opener(corpus, "rt", encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    lines = [l for l in lines if l.strip() and l != "%"]
    idx = list(range(len(lines)))
    random.Random(0).shuffle(idx)
    held = set(idx[:len(lines) // 10])
    train, test = os.path.join(work, "train.txt"), os.path.join(work, "held.txt")
    with open(train, "w", encoding="utf-8") as f:
        f.writelines(lines[i] + "\n" for i in range(len(lines)) if i not in held)
    with open(test, "w", encoding="utf-8") as f:
        f.writelines(lines[i] + "\n" for i in range(len(lines)) if i in held)
    return train, test


def spm_count(model, test):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model)
    toks = nbytes = 0
    with open(test, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            toks += len(sp.encode(line))
            nbytes += len(line.encode("utf-8"))
    return toks, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(ROOT, "data", "fortunes", "fortunes.txt.gz"))
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--work", default="/tmp/toktrain_quality")
    a = ap.parse_args()
    import sentencepiece as spm
    os.makedirs(a.work, exist_ok=True)
    train, test = split(a.corpus, a.work)
    subprocess.run(["make", "-C", ROOT, "--no-print-directory", "build/dev/fat5.h"], check=True, stdout=subprocess.DEVNULL)
    src, exe = os.path.join(a.work, "fat5_toktrain.c"), os.path.join(a.work, "fat5_toktrain")
    with open(src, "w") as f:
        f.write(C_PROGRAM)
    subprocess.run(["cc", "-std=c99", "-O2", "-DFAT5_NO_CUDA", "-I" + os.path.join(ROOT, "build", "dev"), "-o", exe, src,
                    "-lm", "-ldl", "-lpthread"], check=True)
    rows = []
    for th in [int(x) for x in a.threads.split(",")]:
        prefix = os.path.join(a.work, "spm_%d" % th)
        t0 = time.time()
        spm.SentencePieceTrainer.train(input=train, model_prefix=prefix, vocab_size=a.vocab, model_type="unigram",
                                       normalization_rule_name="identity", num_threads=th, minloglevel=2)
        t_spm = time.time() - t0
        s_tok, s_bytes = spm_count(prefix + ".model", test)
        out = os.path.join(a.work, "fat5_%d" % th)
        t0 = time.time()
        r = subprocess.run([exe, train, out, str(a.vocab), str(th)], check=True, capture_output=True, text=True)
        t_fat5 = time.time() - t0
        f_tok, f_bytes = [int(x) for x in subprocess.run([exe, "encode", os.path.join(out, "spiece.model"), test, "1"],
                                                           check=True, capture_output=True, text=True).stdout.split()]
        j_tok = int(subprocess.run([exe, "encode", os.path.join(out, "tokenizer.json"), test, "1"], check=True,
                                   capture_output=True, text=True).stdout.split()[0])
        x_tok, _ = spm_count(os.path.join(out, "spiece.model"), test)
        if f_bytes != s_bytes:
            sys.exit("byte counts differ: %d %d" % (f_bytes, s_bytes))
        rows.append((th, s_tok / s_bytes, t_spm, f_tok / f_bytes, t_fat5, x_tok == f_tok, r.stdout.split()))
        print("threads %d: spm %.5f tokens/byte in %.1f s; fat5 %.5f tokens/byte (%+.2f%%) in %.1f s; fat5's "
              "spiece.model in sentencepiece: %s; its tokenizer.json %.5f tokens/byte; fat5 alphabet %s, rounds %s"
              % (th, s_tok / s_bytes, t_spm, f_tok / f_bytes, 100.0 * (f_tok / s_tok - 1), t_fat5,
                 "same count" if x_tok == f_tok else "%d tokens (fat5 %d)" % (x_tok, f_tok), j_tok / f_bytes,
                 r.stdout.split()[1], r.stdout.split()[2]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
