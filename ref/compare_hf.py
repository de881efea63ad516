#!/usr/bin/env python3
"""fat5.h against Hugging Face transformers, on the same model and the same inputs; and its
tokenizers against the `tokenizers` and `sentencepiece` libraries.

  compare_hf.py --generate [--tiny] [--device cpu|cuda] [--dtype fp32|bf16]
                [--batch-sizes 1,64] [--input-len 512] [--new-tokens 128]
  compare_hf.py --tokenize [--text FILE] [--repeat 3] TOKENIZER...
  compare_hf.py --toktrain [--text FILE] [--heldout FILE] [--vocab-size 8000] [--models unigram,bpe]
                [--toktrain-threads 1,2] [--keep DIR]      (ref/toktrain_compare.py says what it does)
  compare_hf.py --attention [--repeat 10]
  compare_hf.py --train [--tiny] [--device cpu|cuda] [--repeat 10] [--no-compile]
  compare_hf.py --finetune [--tiny] [--device cpu|cuda] [--repeat 10] [--no-compile]

Builds a randomly initialised T5 (by default the FAT5-small shape that examples/train and
dev/bench use: d_model 512, d_ff 2048, 8 heads of 64, 12 + 12 layers, gated-gelu, untied,
the byte vocabulary of 384; --tiny: the 128 / 512, 4 heads of 32, 2 + 2 layers model of a CPU
run), saves it with save_pretrained to a temporary directory, and for every batch size:

  * runs transformers' ``generate`` (greedy, min_new_tokens = max_new_tokens so that every row
    has the full length) after one warm-up call, and times the fastest of --repeat calls (3);
  * runs ``examples/generate DIR --ids ... --print-ids`` on the same inputs (``--device gpu``
    with --device cuda) and reads the time of the generation alone from its stderr line
    ``generate: N tokens in S s`` (model load and kernel compilation are left out; one warm-up
    call runs first and the fastest of --repeat counts, as on the Hugging Face side);
  * runs both again with one new token (the time to the first token: encoder and one step);
  * prints one JSON line with both speeds in generated tokens per second and their ratio
    fat5 / transformers, both times to the first token, the per-token latency of the steps after
    it ((time - first-token time) / (new tokens - 1)), the bytes of each side's key/value cache
    (transformers: the tensors of ``past_key_values``; fat5: what fat5_generate allocated, from
    examples/generate's stderr), and whether the outputs are identical token for token.

Exit status 1 when the greedy outputs differ (the first difference is printed). In bf16 the two
sides round differently (transformers keeps bf16 weights, fat5 fp32 master weights with bf16
matrix inputs), so a difference there is reported but fails only with --strict-bf16.

Build examples/generate first (``make examples/generate``); --generate-bin names another path.

--tokenize: the speed of fat5's tokenizers against the Python libraries, on the lines of one text
(--text FILE; default the bundled corpus data/fortunes/fortunes.txt.gz, decompressed to a temporary
file). Each TOKENIZER is a tokenizer.json, a SentencePiece .model, or a directory holding one
(tokenizer.json preferred). Every line of the file, without its newline, is one text, encoded
with the post-processor (T5: EOS appended; sentencepiece: its EOS appended when it has one, as
fat5 does). Measured, the fastest of --repeat passes (monotonic clocks), on the same lines:

  * fat5: ``tools/fat5_tokenize --bench FILE --repeat N TOKENIZER`` (one thread);
  * tokenizer.json: ``tokenizers.Tokenizer.from_file``: a loop of ``encode(line)`` and one
    ``encode_batch(lines)``, single-threaded (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false),
    and ``encode_batch`` with the library's default threads;
  * .model: ``sentencepiece.SentencePieceProcessor``: a loop of ``encode(line)`` and one
    ``encode(lines)`` with num_threads=1, and with the library's default threads.

The Python sides run in subprocesses (the thread settings are read once per process); the lines
are decoded to ``str`` before the clock starts. A table of tokens/s and the ratio fat5 / library
is printed, with a JSON line per measurement; exit status 1 when a library's total token count
differs from fat5's. Build tools/fat5_tokenize first (``make tools/fat5_tokenize``).

--attention: T5 attention alone on the GPU, bf16, the shapes of ``dev/bench attn`` (16,384 tokens
in sequences of L = 1024 and 4096, 8 heads of 64 (--head-dims 64,128 adds 128), 32 buckets, max
distance 128, bidirectional and causal): fat5's kernels (``dev/bench attn``, its tensor-core forward and its
FMA kernels) and, in the same command on the same device, PyTorch's
  * ``sdpa``: scaled_dot_product_attention without a bias (the flash kernel: the ceiling);
  * ``sdpa-bias``: scaled_dot_product_attention with the T5 bias materialised as a [1, H, L, L]
    bf16 tensor (what Hugging Face's T5 does), its gradient flowing to the [buckets, H] table;
  * ``flex``: FlexAttention (torch.compile'd) with a ``score_mod`` that adds the table's entry for
    the bucket of (key - query) (a causal block mask for causal).
No 1/sqrt(d) scale (T5). Forward and forward + backward (q, k, v and the table's gradients) are
timed with CUDA events, the mean of --repeat calls (10) after warm-up; FLOPs as ``dev/bench``
counts them. One JSON line per measurement, then a table with each peer's TFLOP/s and fat5's
tensor-core forward as a multiple of it. Build dev/bench first (``make dev/bench``).

--train: one training step of the FAT5-small shape with its vocabulary of 32,768 (--tiny: the tiny
shape, 2 x 64 encoder / 16 decoder tokens, for a CPU run), batch 16 of 1024 encoder and 256 decoder
tokens of random ids, no padding, in the same command:
  * fat5: ``dev/bench step`` on the same config.json (zero_grad, forward, backward, AdamWScale with
    clipping at 1; fp32 master weights, bf16 matrix inputs on the GPU);
  * ``hf-eager``: transformers' T5ForConditionalGeneration (dropout 0, eager attention), fp32
    weights under ``torch.autocast`` bf16 on the GPU, loss from ``labels``, backward,
    ``clip_grad_norm_(1.0)``, ``torch.optim.AdamW(fused=True)`` (foreach on the CPU);
  * ``hf-compile``: the same model under ``torch.compile`` (left out with --no-compile).
Each side: warm-up steps (compilation included), then the mean of --repeat steps (10) between
synchronisations. Peak memory: torch.cuda.max_memory_allocated over the timed steps; fat5: the
device memory its model, gradients, optimizer and workspace took (cuMemGetInfo). MFU: the model
FLOPs that fat5's training loop counts (3 x forward, attention included), over 989 TFLOP/s.
One JSON line per side, then a table with fat5's speed-up over each.

--finetune: the same comparison on a fine-tuning step of the FLAN-T5-base shape (d_model 768,
d_ff 2048, 12 heads of 64, 12 + 12 layers, gated-gelu, untied, vocabulary 32,128; --tiny: the tiny
shape as --train), batch 32 of 512 encoder and 128 decoder tokens, dropout 0.1 in training mode on
both sides, and Adafactor as Hugging Face's Trainer sets it up for ``optim adafactor``
(``transformers.optimization.Adafactor(lr=1e-3, scale_parameter=False, relative_step=False,
warmup_init=False)``; fat5: ``dev/bench step --optim adafactor``), clipping at 1. Both drop at every
site T5 has, the attention probabilities included.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

torch = transformers = T5Config = T5ForConditionalGeneration = untie_lm_head = None


def import_hf():
    """torch and transformers, imported for --generate only (--tokenize needs neither)."""
    global torch, transformers, T5Config, T5ForConditionalGeneration, untie_lm_head
    import torch as torch_
    import transformers as transformers_
    torch, transformers = torch_, transformers_
    T5Config, T5ForConditionalGeneration = transformers.T5Config, transformers.T5ForConditionalGeneration
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_reference import untie_lm_head as u  # (same untied layout as the fixtures)
    untie_lm_head = u


PAD, EOS = 0, 1
SHAPES = {
    "fat5-small": dict(d_model=512, d_ff=2048, num_heads=8, d_kv=64, num_layers=12, num_decoder_layers=12),
    "flan-t5-base": dict(d_model=768, d_ff=2048, num_heads=12, d_kv=64, num_layers=12, num_decoder_layers=12),
    "tiny": dict(d_model=128, d_ff=512, num_heads=4, d_kv=32, num_layers=2, num_decoder_layers=2),
}
TIMING = re.compile(r"^generate: (\d+) tokens in ([0-9.eE+-]+) s", re.M)
CACHE = re.compile(r"^generate: key/value caches (\d+) bytes", re.M)


def build_model(shape, vocab, seed):
    config = T5Config(vocab_size=vocab, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                      dropout_rate=0.0, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD,
                      relative_attention_num_buckets=32, relative_attention_max_distance=128,
                      **SHAPES[shape])
    torch.manual_seed(seed)
    try:
        model = T5ForConditionalGeneration._from_config(config, attn_implementation="eager")
    except (TypeError, ValueError):
        model = T5ForConditionalGeneration(config)
    with torch.no_grad():
        untie_lm_head(model)
    if getattr(model.config, "decoder_start_token_id", None) is None:
        model.config.decoder_start_token_id = PAD
    return model.float().eval()


def make_inputs(batch, length, vocab, seed):
    """batch rows of byte-level ids (3 .. 258), each ending with EOS."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, min(vocab, 259), (batch, length), generator=g)
    ids[:, -1] = EOS
    return ids


def tensor_bytes(obj, seen=None, depth=0):
    """bytes of the distinct torch tensors reachable from obj (a cache object, lists, dicts)."""
    seen = set() if seen is None else seen
    if depth > 6 or obj is None:
        return 0
    if torch.is_tensor(obj):
        if obj.data_ptr() in seen:
            return 0
        seen.add(obj.data_ptr())
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(x, seen, depth + 1) for x in obj)
    if isinstance(obj, dict):
        return sum(tensor_bytes(x, seen, depth + 1) for x in obj.values())
    if hasattr(obj, "__dict__") and not isinstance(obj, (str, bytes, int, float)):
        return sum(tensor_bytes(x, seen, depth + 1) for x in vars(obj).values())
    return 0


def hf_generate(model, ids, new_tokens, device, repeat):
    """(tokens, seconds for new_tokens, seconds for 1 token, bytes of the key/value cache)."""
    ids = ids.to(device)
    mask = torch.ones_like(ids)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(n):
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, num_beams=1, attention_mask=mask)
        t, out = None, None
        with torch.inference_mode():
            model.generate(ids, **kw)          # warm-up
            for _ in range(repeat):            # the fastest of repeat runs
                sync()
                t0 = time.perf_counter()
                out = model.generate(ids, **kw)
                sync()
                dt = time.perf_counter() - t0
                t = dt if t is None else min(t, dt)
        return out, t

    out, t = timed(new_tokens)
    _, t1 = timed(1)
    with torch.inference_mode():
        full = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                              num_beams=1, attention_mask=mask, return_dict_in_generate=True)
    cache = tensor_bytes(getattr(full, "past_key_values", None))
    return out[:, 1:].cpu().tolist(), t, t1, cache    # tokens without the decoder start token


def fat5_generate(binary, model_dir, ids, new_tokens, device, dtype, repeat, extra):
    cmd = [binary, model_dir, "--print-ids", "--max-new-tokens", str(new_tokens),
           "--min-new-tokens", str(new_tokens), "--num-beams", "1", "--warmup", "1", "--repeat", str(repeat),
           "--device", "gpu" if device == "cuda" else "cpu",
           "--batch-size", str(len(ids))]   # the whole batch in one fat5_generate call, as transformers runs it
    if device == "cuda":
        cmd += ["--dtype", dtype]
    cmd += extra
    for row in ids.tolist():
        # examples/generate appends EOS itself
        cmd += ["--ids", ",".join(str(t) for t in row[:-1])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_hf: examples/generate failed (status {p.returncode}): {p.stderr.strip()}")
    m = TIMING.search(p.stderr)
    if not m:
        sys.exit(f"compare_hf: no timing line in examples/generate's stderr: {p.stderr.strip()}")
    c = CACHE.search(p.stderr)
    lines = p.stdout.strip().split("\n")[-len(ids):]
    out = [[int(t) for t in line.split()] for line in lines]
    return out, float(m.group(2)), int(m.group(1)), int(c.group(1)) if c else None


def first_difference(a, b):
    for r, (x, y) in enumerate(zip(a, b)):
        for i in range(max(len(x), len(y))):
            xi = x[i] if i < len(x) else None
            yi = y[i] if i < len(y) else None
            if xi != yi:
                return r, i, xi, yi
    return None


def read_lines(path):
    """the lines of path as fat5_tokenize --bench splits them: without the newline, a last line
    without one counted, decoded as tokenizers receives text (invalid UTF-8 replaced)"""
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [x.decode("utf-8", errors="replace") for x in lines], len(data)


def tokenize_worker(kind, path, text, repeat):
    """One measurement, in its own process: prints {"tokens": N, "seconds": S}."""
    lines, _ = read_lines(text)
    best, total = None, 0
    if kind.startswith("hf-"):
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(path)
        if kind == "hf-loop":
            def run():
                return sum(len(tok.encode(x).ids) for x in lines)
        else:
            def run():
                return sum(len(e.ids) for e in tok.encode_batch(lines))
    else:
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=path)
        eos = 1 if sp.eos_id() >= 0 else 0
        if kind == "spm-loop":
            def run():
                return sum(len(sp.encode(x)) + eos for x in lines)
        else:
            threads = 1 if kind == "spm-batch" else -1
            def run():
                return sum(len(ids) + eos for ids in sp.encode(lines, num_threads=threads))
    run()   # warm-up (first-call costs, as fat5's first pass)
    for _ in range(repeat):
        t0 = time.perf_counter()
        total = run()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    print(json.dumps({"tokens": total, "seconds": best}))


def tokenizer_file(path):
    if os.path.isdir(path):
        for name in ("tokenizer.json", "spiece.model", "tokenizer.model"):
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
        sys.exit(f"compare_hf: {path}: no tokenizer.json, spiece.model or tokenizer.model in the directory")
    if not os.path.isfile(path):
        sys.exit(f"compare_hf: {path}: not found")
    return path


def tokenize_main(args):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    binary = args.tokenize_bin or os.path.join(root, "tools", "fat5_tokenize")
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_hf: {binary}: not found (make tools/fat5_tokenize)")
    tmp = None
    text = args.text
    if text is None:
        import gzip
        fd, tmp = tempfile.mkstemp(prefix="fat5_fortunes_", suffix=".txt")
        with os.fdopen(fd, "wb") as f, gzip.open(os.path.join(here, "..", "data", "fortunes", "fortunes.txt.gz")) as g:
            shutil.copyfileobj(g, f)
        text = tmp
    failed = False
    rows = []
    try:
        lines, n_bytes = read_lines(text)
        for path in args.tokenizers:
            path = tokenizer_file(path)
            p = subprocess.run([binary, "--bench", text, "--repeat", str(args.repeat), path],
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"compare_hf: fat5_tokenize failed (status {p.returncode}): {p.stderr.strip()}")
            f5 = json.loads(p.stdout)
            f5_tps = f5["tokens_per_s"]
            rows.append((path, "fat5 (1 thread)", f5["tokens"], f5_tps, f5["mb_per_s"], None))
            print(json.dumps({"mode": "tokenize", "tokenizer": path, "impl": "fat5", **f5}), flush=True)
            kinds = ([("hf-loop", "tokenizers encode loop", 1), ("hf-batch", "tokenizers encode_batch (1 thread)", 1),
                      ("hf-batch-mt", "tokenizers encode_batch (default threads)", 0)]
                     if path.endswith(".json") else
                     [("spm-loop", "sentencepiece encode loop", 1), ("spm-batch", "sentencepiece encode(list) (1 thread)", 1),
                      ("spm-batch-mt", "sentencepiece encode(list) (default threads)", 0)])
            for kind, name, single in kinds:
                env = dict(os.environ)
                if single:
                    env.update(RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
                else:
                    env.pop("RAYON_NUM_THREADS", None)
                    env["TOKENIZERS_PARALLELISM"] = "true"
                q = subprocess.run([sys.executable, os.path.abspath(__file__), "--tokenize-worker", kind, path, text,
                                    str(args.repeat)], capture_output=True, text=True, env=env)
                if q.returncode != 0:
                    sys.exit(f"compare_hf: {name} on {path} failed: {q.stderr.strip()}")
                r = json.loads(q.stdout.strip().split("\n")[-1])
                tps = r["tokens"] / r["seconds"] if r["seconds"] > 0 else float("inf")
                rows.append((path, name, r["tokens"], tps, n_bytes / r["seconds"] / 1e6, f5_tps / tps))
                print(json.dumps({"mode": "tokenize", "tokenizer": path, "impl": name, "tokens": r["tokens"],
                                  "seconds": round(r["seconds"], 6), "tokens_per_s": round(tps, 1),
                                  "fat5_ratio": round(f5_tps / tps, 3), "tokens_agree": r["tokens"] == f5["tokens"]}),
                      flush=True)
                if r["tokens"] != f5["tokens"]:
                    print(f"compare_hf: {path}: {name} gives {r['tokens']} tokens, fat5 {f5['tokens']}", file=sys.stderr)
                    failed = True
    finally:
        if tmp:
            os.unlink(tmp)
    print(f"\ntext: {args.text or 'data/fortunes/fortunes.txt.gz'}, {n_bytes} bytes, {len(lines)} lines; "
          f"best of {args.repeat}")
    print(f"{'tokenizer':<40} {'implementation':<46} {'tokens':>9} {'tokens/s':>12} {'MB/s':>7} {'fat5/lib':>8}")
    for path, name, n, tps, mbs, ratio in rows:
        short = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
        print(f"{short[-40:]:<40} {name:<46} {n:>9} {tps:>12.0f} {mbs:>7.2f} {'' if ratio is None else f'{ratio:.2f}':>8}")
    print("token counts: " + ("DIFFER" if failed else "all equal to fat5's"))
    return 1 if failed else 0


def t5_bucket(rel, bidirectional, nb, md):
    """T5's bucket of the relative position rel = key - query (Hugging Face's formula)."""
    ret = torch.zeros_like(rel)
    if bidirectional:
        nb //= 2
        ret = (rel > 0).to(rel.dtype) * nb
        n = rel.abs()
    else:
        n = (-rel).clamp(min=0)
    exact = nb // 2
    far = exact + (torch.log(n.float().clamp(min=1) / exact) / math.log(md / exact) * (nb - exact)).to(rel.dtype)
    return ret + torch.where(n < exact, n, far.clamp(max=nb - 1))


def attention_peers(L, dk, causal, H, tokens, repeat, names=("sdpa", "sdpa-bias", "flex")):
    """Times PyTorch's attention peers on one shape; yields JSON records."""
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import flex_attention, create_block_mask
    nb, md, B = 32, 128, tokens // L
    flops = 4.0 * B * H * L * L * dk / (2 if causal else 1)
    gen = torch.Generator(device="cuda").manual_seed(L + dk)
    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=gen) * scale).to(torch.bfloat16)
    q, k, v = rnd(B, H, L, dk, scale=0.3), rnd(B, H, L, dk, scale=0.3), rnd(B, H, L, dk)
    table = (torch.randn(nb, H, device="cuda", generator=gen) * 0.5).float()
    pos = torch.arange(L, device="cuda")
    rel_all = torch.arange(-(L - 1), L, device="cuda")
    bucket_of = t5_bucket(rel_all, not causal, nb, md)  # [2L - 1], index rel + L - 1
    dout = rnd(B, H, L, dk)

    def timed(fn, backward):
        def once():
            for t in (q, k, v, table):
                t.grad = None
            out = fn()
            if backward:
                out.backward(dout)
        for _ in range(3):
            once()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            once()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / repeat / 1e3

    def sdpa():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1.0)

    def sdpa_bias():
        bias = table[bucket_of[pos[None, :] - pos[:, None] + L - 1]].permute(2, 0, 1)[None]  # [1, H, L, L]
        if causal:
            bias = bias.masked_fill(pos[None, :] > pos[:, None], float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(torch.bfloat16), scale=1.0)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score + table[bucket_of[kv_idx - q_idx + L - 1], h]

    block_mask = None
    if causal:
        block_mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, L, L, device="cuda")
    flex = torch.compile(flex_attention, dynamic=False)
    flex_options = [None]  # the default tiles; when they need more shared memory than the GPU has, 64 x 64

    def flex_run():
        try:
            return flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0, kernel_options=flex_options[0])
        except Exception as e:
            if flex_options[0] is not None or "out of resource" not in str(e):
                raise
            flex_options[0] = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64,
                               "BLOCK_N2": 32, "num_stages": 2}
            return flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0, kernel_options=flex_options[0])

    for name, fn in [(n, f) for n, f in (("sdpa", sdpa), ("sdpa-bias", sdpa_bias), ("flex", flex_run)) if n in names]:
        rec = {"mode": "attention", "impl": name, "L": L, "batch": B, "heads": H, "head_dim": dk, "causal": causal}
        for backward in (False, True):
            key = "fwd_bwd" if backward else "fwd"
            for t in (q, k, v, table):
                t.requires_grad_(backward and (t is not table or name != "sdpa"))
            try:
                sec = timed(fn, backward)
                rec[key + "_ms"] = round(sec * 1e3, 3)
                rec[key + "_tflops"] = round((3.5 if backward else 1.0) * flops / sec / 1e12, 2)
            except Exception as e:  # a peer that cannot run a case (memory, an unsupported gradient)
                rec[key + "_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            torch.cuda.empty_cache()
        if name == "flex" and flex_options[0]:
            rec["flex_kernel_options"] = flex_options[0]
        yield rec


def attention_main(args):
    import_hf()
    if not torch.cuda.is_available():
        sys.exit("compare_hf: --attention needs a CUDA device")
    binary = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dev", "bench")
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_hf: {binary}: not found (make dev/bench)")
    out = subprocess.run([binary, "attn"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_hf: dev/bench attn failed:\n{out.stderr}")
    fat5 = {}
    for line in out.stdout.splitlines():
        r = json.loads(line)
        r["mode"], r["impl"] = "attention", "fat5-" + r.get("forward", "fma")
        print(json.dumps(r), flush=True)
        fat5[(r["impl"], r["L"], r["head_dim"], r["causal"])] = r
    rows = []
    for dk in [int(d) for d in args.head_dims.split(",")]:
        for L in (1024, 4096):
            for causal in (False, True):
                peers = {}
                for rec in attention_peers(L, dk, causal, 8, 16384, args.repeat, args.peers.split(",")):
                    print(json.dumps(rec), flush=True)
                    peers[rec["impl"]] = rec
                rows.append((dk, L, causal, fat5.get(("fat5-default", L, dk, causal)),
                             fat5.get(("fat5-tensor-core", L, dk, causal)), peers))
    def tf(r, key):
        return r.get(key + "_tflops") if r else None
    def fmt(x):
        return f"{x:7.1f}" if isinstance(x, (int, float)) else "      -"
    print("\nforward TFLOP/s (fat5: its default kernels, sm_90a's wgmma on H100/H200 / fat5's mma.sync kernels;"
          " fat5 default / peer in parentheses)")
    print(f"{'hd':>3} {'L':>5} {'mask':>6} | {'fat5':>7} {'mma.sync':>8} | {'sdpa':>15} {'sdpa-bias':>15} {'flex':>15}")
    def cells(a, peers, key):  # each peer's TFLOP/s and fat5's ratio to it
        out = []
        for name in ("sdpa", "sdpa-bias", "flex"):
            b = tf(peers.get(name), key)
            out.append(f"{fmt(b)} " + (f"({a / b:5.2f}x)" if a and b else "(    -)"))
        return " ".join(out)
    for dk, L, causal, tc, fma, peers in rows:
        a = tf(tc, "fwd")
        print(f"{dk:>3} {L:>5} {'causal' if causal else 'bidir':>6} | {fmt(a)} {fmt(tf(fma, 'fwd')):>8} | " + cells(a, peers, "fwd"))
    print("\nforward + backward TFLOP/s (fat5 on tensor cores, bias-table gradient included / peer in parentheses;"
          " dbias: the bias gradient's share of fat5's backward)")
    print(f"{'hd':>3} {'L':>5} {'mask':>6} | {'fat5':>7} {'mma.sync':>8} {'dbias':>6} | {'sdpa':>15} {'sdpa-bias':>15}"
          f" {'flex':>15}")
    for dk, L, causal, tc, fma, peers in rows:
        a = tf(tc, "fwd_bwd")
        share = tc.get("dbias_share_of_bwd") if tc else None
        sh = f"{100 * share:5.1f}%" if isinstance(share, (int, float)) else "     -"
        print(f"{dk:>3} {L:>5} {'causal' if causal else 'bidir':>6} | {fmt(a)} {fmt(tf(fma, 'fwd_bwd')):>8} {sh} | "
              + cells(a, peers, "fwd_bwd"))
    return 0


def hf_train_step_time(model, ids, labels, device, amp, steps, warmup, adafactor=False):
    """mean seconds of a training step (forward with labels, backward, clipping, AdamW or the
    Trainer's Adafactor) and the peak bytes allocated during the timed steps"""
    fused = device == "cuda"
    if adafactor:
        opt = transformers.optimization.Adafactor(model.parameters(), lr=1e-3, scale_parameter=False,
                                                  relative_step=False, warmup_init=False)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused, foreach=not fused)
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=amp):
            loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()
    for _ in range(warmup):
        loss = step()
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync()
    t = (time.perf_counter() - t0) / steps
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return t, peak, float(loss.detach())


def train_main(args):
    import_hf()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_hf: --device cuda: PyTorch sees no CUDA device")
    binary = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dev", "bench")
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_hf: {binary}: not found (make dev/bench)")
    ft = args.finetune  # the fine-tuning step: FLAN-T5-base's shape, dropout 0.1, Adafactor
    shape = "tiny" if args.tiny else "flan-t5-base" if ft else "fat5-small"
    vocab = 384 if args.tiny else 32128 if ft else 32768
    B, Le, Ld = (2, 64, 16) if args.tiny else (32, 512, 128) if ft else (16, 1024, 256)
    config = T5Config(vocab_size=vocab, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                      dropout_rate=0.1 if ft else 0.0, pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD,
                      relative_attention_num_buckets=32, relative_attention_max_distance=128, **SHAPES[shape])
    workdir = tempfile.mkdtemp(prefix="fat5_train_")
    recs = []
    try:
        cfg_path = os.path.join(workdir, "config.json")
        config.to_json_file(cfg_path)
        cmd = [binary, "step", "--config", cfg_path, "--batch", str(B), "--enc-len", str(Le), "--dec-len", str(Ld),
               "--steps", str(args.repeat), "--no-profile", "--device", "gpu" if args.device == "cuda" else "cpu"]
        if ft:
            cmd += ["--optim", "adafactor"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"compare_hf: {' '.join(cmd)} failed:\n{out.stderr}")
        f = json.loads(out.stdout.splitlines()[0])
        tflop = f["tflop_per_step"]
        recs.append({"mode": "train", "impl": "fat5", "ms": f["ms"], "ms_fwd_bwd": f["ms_fwd_bwd"],
                     "peak_bytes": f["device_bytes"], "loss": f["loss"]})
        torch.manual_seed(args.seed)
        g = torch.Generator().manual_seed(args.seed)
        ids = torch.randint(2, min(vocab, 32002), (B, Le), generator=g).to(args.device)
        labels = torch.randint(2, min(vocab, 32002), (B, Ld), generator=g).to(args.device)
        amp = args.device == "cuda"
        impls = ["hf-eager"] + ([] if args.no_compile else ["hf-compile"])
        for impl in impls:
            try:
                model = T5ForConditionalGeneration._from_config(config, attn_implementation="eager")
            except (TypeError, ValueError):
                model = T5ForConditionalGeneration(config)
            model = model.float().to(args.device).train()
            if impl == "hf-compile":
                model = torch.compile(model)
            t, peak, loss = hf_train_step_time(model, ids, labels, args.device, amp, args.repeat,
                                               5 if impl == "hf-compile" else 2, adafactor=ft)
            recs.append({"mode": "train", "impl": impl, "ms": round(t * 1e3, 2), "peak_bytes": peak,
                         "loss": round(loss, 4)})
            del model
            if args.device == "cuda":
                torch.cuda.empty_cache()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for r in recs:
        r.update({"mode": "finetune" if ft else "train", "model": shape + " shape", "device": args.device,
                  "optim": "adafactor" if ft else "adamw", "dropout": config.dropout_rate, "batch": B, "enc_len": Le, "dec_len": Ld,
                  "tokens_per_s": round(B * (Le + Ld) / (r["ms"] / 1e3)), "tflop_per_step": tflop,
                  "mfu": round(tflop / (r["ms"] / 1e3) / 989, 4) if args.device == "cuda" else None})
        print(json.dumps(r), flush=True)
    fat5 = recs[0]
    print(f"\n{'fine-tuning' if ft else 'training'} step, {shape} shape, batch {B} x ({Le} + {Ld} tokens), {args.device}"
          + (", bf16" if args.device == "cuda" else ", fp32"))
    print(f"{'':>11} | {'ms':>8} | {'tokens/s':>10} | {'peak GiB':>8} | {'MFU':>6} | fat5 speed-up")
    for r in recs:
        peak = f"{r['peak_bytes'] / 2**30:8.2f}" if r["peak_bytes"] else "       -"
        mfu = f"{100 * r['mfu']:5.1f}%" if r["mfu"] else "     -"
        up = "" if r is fat5 else f"{r['ms'] / fat5['ms']:.2f}x"
        print(f"{r['impl']:>11} | {r['ms']:8.2f} | {r['tokens_per_s']:10d} | {peak} | {mfu} | {up}")
    return 0


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--tokenize-worker":
        tokenize_worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generate", action="store_true", help="compare greedy generation")
    ap.add_argument("--tokenize", action="store_true", help="compare tokenizer speed (TOKENIZER... arguments)")
    ap.add_argument("--attention", action="store_true", help="compare T5 attention kernels with PyTorch's")
    ap.add_argument("--head-dims", default="64", help="--attention: the head dims the peers run (64; 64,128)")
    ap.add_argument("--peers", default="sdpa,sdpa-bias,flex",
                    help="--attention: the peers run (sdpa,sdpa-bias,flex; the biased ones take minutes)")
    ap.add_argument("--train", action="store_true", help="compare a training step with Hugging Face T5's")
    ap.add_argument("--finetune", action="store_true",
                    help="compare a fine-tuning step (FLAN-T5-base shape, dropout 0.1, Adafactor)")
    ap.add_argument("--no-compile", action="store_true", help="--train, --finetune: leave torch.compile out")
    ap.add_argument("--toktrain", action="store_true",
                    help="compare the tokenizer trainers with spm_train's and BpeTrainer's (ref/toktrain_compare.py)")
    ap.add_argument("--vocab-size", type=int, default=8000, help="--toktrain: pieces (8000)")
    ap.add_argument("--heldout", default=None, help="--toktrain: held-out text (default every 10th line of --text)")
    ap.add_argument("--models", default="unigram,bpe", help="--toktrain: unigram,bpe")
    ap.add_argument("--toktrain-threads", default="1,2", help="--toktrain: thread counts, both sides (1,2)")
    ap.add_argument("tokenizers", nargs="*", metavar="TOKENIZER", help="--tokenize: tokenizer.json / .model / directory")
    ap.add_argument("--text", default=None, help="--tokenize: the text file (default the bundled fortunes corpus)")
    ap.add_argument("--tokenize-bin", default=None, help="path of tools/fat5_tokenize")
    ap.add_argument("--tiny", action="store_true", help="the tiny CPU shape, short inputs (a quick run)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--batch-sizes", default=None, help="comma-separated (default 1,64; --tiny 1,4)")
    ap.add_argument("--input-len", type=int, default=None, help="tokens per input, EOS included (512; --tiny 32)")
    ap.add_argument("--new-tokens", type=int, default=None, help="generated per row (128; --tiny 16)")
    ap.add_argument("--vocab", type=int, default=384, help="vocabulary size (384: byte-level)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side; the fastest counts (3)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads for both sides")
    ap.add_argument("--strict-bf16", action="store_true", help="fail on a bf16 difference too")
    ap.add_argument("--generate-bin", default=None, help="path of examples/generate")
    ap.add_argument("--keep", default=None, help="save the model to this directory and keep it")
    args = ap.parse_args()
    if args.toktrain:
        import toktrain_compare
        args.threads = args.toktrain_threads
        return toktrain_compare.main(args, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if args.tokenize:
        if args.generate or not args.tokenizers:
            ap.error("--tokenize takes one or more TOKENIZER paths (and not --generate)")
        if args.repeat < 1:
            ap.error("--repeat must be >= 1")
        return tokenize_main(args)
    if args.tokenizers:
        ap.error("TOKENIZER paths go with --tokenize")
    if args.train or args.finetune:
        if args.generate or args.attention or (args.train and args.finetune):
            ap.error("--train, --finetune, --attention and --generate are separate runs")
        if args.repeat == 3:
            args.repeat = 10
        return train_main(args)
    if args.attention:
        if args.generate:
            ap.error("--attention and --generate are separate runs")
        if args.repeat == 3:
            args.repeat = 10
        return attention_main(args)
    if not args.generate:
        ap.error("nothing to do: give --generate, --tokenize, --attention or --train")
    import_hf()
    if args.dtype == "bf16" and args.device == "cpu":
        ap.error("--dtype bf16 needs --device cuda (fat5 computes in fp32 on the CPU)")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_hf: --device cuda: PyTorch sees no CUDA device")
    shape = "tiny" if args.tiny else "fat5-small"
    batches = [int(b) for b in (args.batch_sizes or ("1,4" if args.tiny else "1,64")).split(",")]
    input_len = args.input_len or (32 if args.tiny else 512)
    new_tokens = args.new_tokens or (16 if args.tiny else 128)
    if min(batches) < 1 or input_len < 2 or new_tokens < 1 or args.repeat < 1:
        ap.error("batch sizes, --new-tokens and --repeat must be >= 1, --input-len >= 2")
    binary = args.generate_bin or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "generate")
    if not os.access(binary, os.X_OK):
        sys.exit(f"compare_hf: {binary}: not found (make examples/generate)")
    extra = []
    if args.threads:
        torch.set_num_threads(args.threads)
        extra += ["--threads", str(args.threads)]

    transformers.utils.logging.disable_progress_bar()
    model = build_model(shape, args.vocab, args.seed)
    model_dir = args.keep or tempfile.mkdtemp(prefix="fat5_compare_")
    failed = False
    try:
        model.save_pretrained(model_dir)
        if args.dtype == "bf16":
            model = model.to(torch.bfloat16)
        model = model.to(args.device)
        for b in batches:
            ids = make_inputs(b, input_len, args.vocab, args.seed + b)
            hf_out, hf_t, hf_t1, hf_cache = hf_generate(model, ids, new_tokens, args.device, args.repeat)
            f_out, f_t, f_n, f_cache = fat5_generate(binary, model_dir, ids, new_tokens, args.device, args.dtype,
                                                     args.repeat, extra)
            _, f_t1, _, _ = fat5_generate(binary, model_dir, ids, 1, args.device, args.dtype, args.repeat, extra)
            diff = first_difference(hf_out, f_out)
            if diff is None and len(f_out) != len(hf_out):
                diff = (min(len(f_out), len(hf_out)), 0, "a row" if len(hf_out) > len(f_out) else None, None)
            hf_tps, f_tps = b * new_tokens / hf_t, f_n / f_t if f_t > 0 else float("inf")
            rec = {"mode": "generate", "model": shape + " shape", "device": args.device, "dtype": args.dtype,
                   "batch": b, "input_len": input_len, "new_tokens": new_tokens, "strategy": "greedy",
                   "hf_tokens_per_s": round(hf_tps, 1), "fat5_tokens_per_s": round(f_tps, 1),
                   "ratio": round(f_tps / hf_tps, 3), "hf_s": round(hf_t, 4), "fat5_s": round(f_t, 4),
                   "hf_first_token_ms": round(hf_t1 * 1e3, 2), "fat5_first_token_ms": round(f_t1 * 1e3, 2),
                   "hf_ms_per_token": round((hf_t - hf_t1) / max(new_tokens - 1, 1) * 1e3, 3),
                   "fat5_ms_per_token": round((f_t - f_t1) / max(new_tokens - 1, 1) * 1e3, 3),
                   "hf_cache_bytes": hf_cache, "fat5_cache_bytes": f_cache,
                   "identical": diff is None}
            print(json.dumps(rec), flush=True)
            if diff is not None:
                r, i, x, y = diff
                print(f"compare_hf: batch {b}: first difference at row {r}, token {i}: transformers {x}, "
                      f"fat5 {y}", file=sys.stderr)
                if args.dtype == "fp32" or args.strict_bf16:
                    failed = True
    finally:
        if not args.keep:
            shutil.rmtree(model_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
