#!/usr/bin/env python3
"""fat5's tokenizer trainers against the reference trainers (compare_hf.py --toktrain runs this).

  compare_hf.py --toktrain [--text FILE] [--heldout FILE] [--vocab-size 8000] [--threads 1,2]
                [--models unigram,bpe] [--keep DIR]

On one text (default: the bundled fortunes, data/fortunes/fortunes.txt.gz; a larger one:
ref/make_toktrain_corpus.py), with the same vocabulary size, settings and threads on both sides:

  * unigram: ``tools/fat5_tokenizer_train --model_type unigram`` against sentencepiece's
    ``SentencePieceTrainer`` (spm_train), defaults on both (nmt_nfkc, character_coverage 0.9995,
    input_sentence_size 1,000,000 shuffled, split rules), no sentinels (--extra_ids 0);
  * bpe: ``tools/fat5_tokenizer_train --model_type bpe`` against tokenizers' ``BpeTrainer`` with
    the pipeline fat5 writes (NFKC normalizer, Metaspace pre-tokenizer, special tokens <pad> </s>
    <unk>), fed the file's lines without their newlines (``train_from_iterator``), as fat5 reads
    sentences, and fat5 keeping lines of any length (--max_sentence_length 0) as BpeTrainer does:
    the two vocabularies are then the same.

Each side is timed over the whole training (wall clock, the fat5 side as one process from the
command line; the Python side from the trainer call, the file read included). Compression is the
tokens per byte of held-out text (--heldout FILE, else every 10th line of --text is held out and
the rest trained on), every line encoded without special tokens, each model with one encoder:
sentencepiece for both .model files, `tokenizers` for both tokenizer.json files. One JSON line per
(model, threads) with both times, both tokens per byte, and their ratios (fat5 / reference).

Loading checks, for each fat5 directory: sentencepiece loads spiece.model; transformers'
AutoTokenizer loads the directory (T5TokenizerFast) and gives the same ids as
``tools/fat5_tokenize --lines`` on the first 2,000 held-out lines (EOS included); a difference is
reported and makes the exit status 1.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def split_text(path, heldout, work):
    """(train file, held-out lines): --heldout given, or every 10th line of the text held out."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        lines = [ln.rstrip("\n") for ln in f]
    train = os.path.join(work, "train.txt")
    if heldout:
        with open(heldout, encoding="utf-8", errors="replace") as f:
            held = [ln.rstrip("\n") for ln in f]
        kept = lines
    else:
        held = [ln for i, ln in enumerate(lines) if i % 10 == 9]
        kept = [ln for i, ln in enumerate(lines) if i % 10 != 9]
    with open(train, "w", encoding="utf-8") as f:
        for ln in kept:
            f.write(ln + "\n")
    held = [ln for ln in held if ln.strip() and ln.strip() != "%"]
    return train, held


def fat5_train(root, kind, train, out, vocab, threads):
    cmd = [os.path.join(root, "tools", "fat5_tokenizer_train"), "--model_type", kind, "--vocab_size", str(vocab),
           "--extra_ids", "0", "--num_threads", str(threads), "--input", train, "--model_prefix", out, "--quiet"]
    if kind == "bpe":   # BpeTrainer keeps every line, however long (spm_train skips those over 4,192 bytes, as fat5)
        cmd += ["--max_sentence_length", "0"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit("toktrain: %s failed:\n%s" % (" ".join(cmd), r.stderr))
    return dt, json.loads(r.stdout.strip().splitlines()[-1])


def spm_train(train, prefix, vocab, threads):
    import sentencepiece as spm
    t0 = time.perf_counter()
    spm.SentencePieceTrainer.train(input=train, model_prefix=prefix, vocab_size=vocab, model_type="unigram",
                                   num_threads=threads, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   minloglevel=2)
    return time.perf_counter() - t0


def hf_bpe_train(train, path, vocab, threads):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers
    t0 = time.perf_counter()
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<pad>", "</s>", "<unk>"], show_progress=False)
    # sentences as fat5 reads them, a line each without its newline (train(files) would keep the "\n")
    with open(train, encoding="utf-8") as f:
        tok.train_from_iterator((ln.rstrip("\r\n") for ln in f), tr)
    dt = time.perf_counter() - t0
    tok.save(path)
    return dt


def spm_tokens(model, lines):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model)
    return sum(len(x) for x in sp.encode(lines))


def hf_tokens(path, lines):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(path)
    return sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))


def check_loading(root, d, lines):
    """AutoTokenizer on the directory against tools/fat5_tokenize --lines; the number of lines that differ."""
    from transformers import AutoTokenizer
    lines = [ln for ln in lines if "\r" not in ln][:2000]
    tok = AutoTokenizer.from_pretrained(d)
    hf = [tok(ln)["input_ids"] for ln in lines]
    r = subprocess.run([os.path.join(root, "tools", "fat5_tokenize"), "--lines", d], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, check=True)
    ours = [[int(x) for x in ln.split()] for ln in r.stdout.splitlines()]
    bad = [i for i in range(len(lines)) if i >= len(ours) or ours[i] != hf[i]]
    if bad:
        i = bad[0]
        print("toktrain: %s: %d of %d lines differ from AutoTokenizer (%s); first: %r\n  hf   %s\n  fat5 %s"
              % (d, len(bad), len(lines), type(tok).__name__, lines[i], hf[i], ours[i] if i < len(ours) else None),
              file=sys.stderr)
    return len(bad), type(tok).__name__


def ref_train(kind, train, out, vocab, threads):
    """The reference trainer in a fresh process (the thread settings are read once per process);
    its training time in seconds."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kind, train, out, str(vocab),
                        str(threads)], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("toktrain: the %s reference trainer failed:\n%s" % (kind, r.stderr))
    return float(r.stdout.strip().splitlines()[-1])


def main(args, root):
    text = args.text or os.path.join(root, "data", "fortunes", "fortunes.txt.gz")
    threads = [int(x) for x in (args.threads or "1,2").split(",")]
    kinds = (args.models or "unigram,bpe").split(",")
    work = args.keep or tempfile.mkdtemp(prefix="fat5_toktrain_")
    os.makedirs(work, exist_ok=True)
    status = 0
    try:
        train, held = split_text(text, args.heldout, work)
        held_bytes = sum(len(ln.encode("utf-8")) for ln in held)
        for kind in kinds:
            for th in threads:
                out = os.path.join(work, "fat5-%s-%d" % (kind, th))
                t_fat5, rep = fat5_train(root, kind, train, out, args.vocab_size, th)
                if kind == "unigram":
                    prefix = os.path.join(work, "spm-%d" % th)
                    t_ref = ref_train("unigram", train, prefix, args.vocab_size, th)
                    n_ref = spm_tokens(prefix + ".model", held)
                    n_fat5 = spm_tokens(os.path.join(out, "spiece.model"), held)
                    ref = "sentencepiece"
                else:
                    path = os.path.join(work, "hf-bpe-%d.json" % th)
                    t_ref = ref_train("bpe", train, path, args.vocab_size, th)
                    n_ref = hf_tokens(path, held)
                    n_fat5 = hf_tokens(os.path.join(out, "tokenizer.json"), held)
                    ref = "tokenizers"
                bad, cls = check_loading(root, out, held)
                status |= bad > 0
                print(json.dumps({
                    "mode": "toktrain", "model": kind, "reference": ref, "text": os.path.basename(text),
                    "train_bytes": os.path.getsize(train), "heldout_bytes": held_bytes, "vocab_size": args.vocab_size,
                    "threads": th, "ref_seconds": round(t_ref, 3), "fat5_seconds": round(t_fat5, 3),
                    "time_ratio": round(t_fat5 / t_ref, 3), "ref_tokens_per_byte": round(n_ref / held_bytes, 5),
                    "fat5_tokens_per_byte": round(n_fat5 / held_bytes, 5),
                    "compression_ratio": round(n_fat5 / n_ref, 4), "fat5_sentences": rep.get("sentences_used"),
                    "autotokenizer": cls, "autotokenizer_lines_differing": bad}), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__" and len(sys.argv) == 7 and sys.argv[1] == "--worker":
    _, _, kind, train, out, vocab, threads = sys.argv
    fn = spm_train if kind == "unigram" else hf_bpe_train
    print(fn(train, out, int(vocab), int(threads)))
