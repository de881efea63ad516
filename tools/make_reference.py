#!/usr/bin/env python3
"""Reference fixtures for fat5.h, produced with Hugging Face transformers.

Four modes:

  make_reference.py [--out tests/data]
      Build tiny randomly initialised T5-family models, run a fixed batch through
      them in fp32 (eager attention, CPU) and write, per fixture, a directory
      ``<out>/<name>/`` holding

        config.json, model.safetensors   what ``save_pretrained`` writes (fp32)
        batch.json                       {"inputs": [[ids]...], "labels": [[ids]...]}
        reference.safetensors            logits, loss, loss_zs and grad.<param>

      ``logits`` is [total_label_tokens, vocab]: the logits at every label position
      of every row, rows concatenated in batch order, padding excluded (positions
      whose label is -100 are included).  ``loss`` is HF's loss on the right-padded
      batch, ``loss_zs`` the same mean with z-loss (z=1e-3) and label smoothing
      (s=0.1), and ``grad.<name>`` the gradient of ``loss`` w.r.t. every parameter
      that ``model.named_parameters()`` yields, named as in model.safetensors.

  make_reference.py --generate [--out tests/data]
      For every existing fixture directory, run ``model.generate`` (fp32, eager
      attention, CPU) on batch.json's inputs as one padded batch for each case of
      GENERATE_CASES and write ``generate.json``: the options (GenerationConfig
      names), the generated ids of every output row (decoder start dropped, cut
      after the first EOS; beam search: num_return_sequences rows per input, best
      first) and the scores (beam search: ``sequences_scores``; greedy: the sum
      of the chosen tokens' log-softmax of the processed scores).

  make_reference.py --check DIR --against tests/data/<name>
      Load DIR (a model directory, e.g. one written by fat5) with transformers,
      run the fixture's batch.json and compare logits and loss with the fixture's
      reference.safetensors.

  make_reference.py --check-logits OUT.safetensors --model DIR --batch BATCH.json
      OUT.safetensors holds an F32 tensor ``logits`` [label_tokens, vocab] in the
      packed order above and a metadata entry ``loss``; run DIR with transformers
      on BATCH.json and compare.

Both check modes print max abs / max rel differences and exit with status 1 when
some value fails |a - b| <= 1e-5 + 1e-4 * |b| (b = the reference side).

Notes on transformers 5.x (handled below):
  * T5Config/UMT5Config force ``tie_word_embeddings = True`` and T5Config derives
    ``scale_decoder_outputs`` from the ``tie_word_embeddings`` it was given.  An
    untied model is made by setting ``config.tie_word_embeddings = False`` and
    giving ``lm_head`` its own Parameter; when both ``shared.weight`` and
    ``lm_head.weight`` are in the file and differ, from_pretrained keeps them apart.
  * UMT5 scales the decoder output by d_model**-0.5 iff
    ``config.tie_word_embeddings``, which 5.x forces to True even when config.json
    says false.  ``load_model`` restores the value written in config.json so an
    untied UMT5 checkpoint runs unscaled, as in transformers 4.x.
  * T5Config no longer has ``decoder_start_token_id`` (needed by ``labels=``);
    it is set to 0 (T5's start token) when missing.
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import transformers
from transformers import (
    AutoModelForSeq2SeqLM,
    T5Config,
    T5ForConditionalGeneration,
    UMT5Config,
    UMT5ForConditionalGeneration,
)

Z_LOSS = 1e-3
LABEL_SMOOTHING = 0.1
RTOL = 1e-4
ATOL = 1e-5
IGNORE = -100
PAD = 0
EOS = 1

# Each fixture: model class, config, seed and the batch layout.  ``inputs`` are
# encoder row lengths; ``labels`` are (length, positions set to -100).
FIXTURES = [
    {
        "name": "t5_v10_relu_tied",
        "model": "t5",
        "seed": 1001,
        "config": dict(
            vocab_size=96, d_model=32, d_kv=8, num_heads=4, d_ff=48,
            num_layers=2, num_decoder_layers=2,
            relative_attention_num_buckets=8, relative_attention_max_distance=20,
            feed_forward_proj="relu", tie_word_embeddings=True,
        ),
        # encoder 27 > max_distance 20; decoder 23 > 4 exact causal buckets and > 20
        "inputs": [27, 6, 13, 1],
        "labels": [(23, [5, 6, 22]), (1, []), (9, [8]), (12, [0, 3])],
    },
    {
        "name": "t5_v11_gated_gelu_untied",
        "model": "t5",
        "seed": 1002,
        "config": dict(
            vocab_size=80, d_model=32, d_kv=16, num_heads=3, d_ff=40,
            num_layers=3, num_decoder_layers=2,
            relative_attention_num_buckets=16, relative_attention_max_distance=24,
            feed_forward_proj="gated-gelu", tie_word_embeddings=False,
        ),
        # encoder 31 > 24; decoder 27 > 8 exact causal buckets and > 24
        "inputs": [31, 12, 3, 20],
        "labels": [(27, [0, 13, 14]), (6, [5]), (1, []), (15, [7])],
    },
    {
        "name": "umt5_gated_silu",
        "model": "umt5",
        "seed": 1003,
        "config": dict(
            vocab_size=72, d_model=24, d_kv=12, num_heads=2, d_ff=36,
            num_layers=2, num_decoder_layers=2,
            relative_attention_num_buckets=8, relative_attention_max_distance=16,
            feed_forward_proj="gated-silu", tie_word_embeddings=False,
        ),
        # encoder 19 > 16; decoder 18 > 4 exact causal buckets and > 16
        "inputs": [19, 7, 11],
        "labels": [(18, [4, 17]), (1, []), (9, [2])],
    },
]

FIXTURE_FILES = ("config.json", "model.safetensors", "batch.json", "reference.safetensors")

MODEL_CLASSES = {
    "t5": (T5Config, T5ForConditionalGeneration),
    "umt5": (UMT5Config, UMT5ForConditionalGeneration),
}


# ---------------------------------------------------------------------------
# batch handling


def make_batch(spec, vocab_size):
    """Random token rows of the lengths given in the fixture spec (ids 2..V-1, EOS last)."""
    gen = torch.Generator().manual_seed(spec["seed"] + 7)

    def row(length):
        ids = torch.randint(2, vocab_size, (length,), generator=gen).tolist()
        ids[-1] = EOS
        return ids

    inputs = [row(n) for n in spec["inputs"]]
    labels = []
    for length, ignored in spec["labels"]:
        ids = row(length)
        for pos in ignored:
            ids[pos] = IGNORE
        labels.append(ids)
    return {"inputs": inputs, "labels": labels}


def write_batch(path, batch):
    """batch.json with one row per line (readable diffs, small file)."""
    def rows(key):
        return ",\n".join("    " + json.dumps(r, separators=(",", ":")) for r in batch[key])

    with open(path, "w") as f:
        f.write('{\n  "inputs": [\n%s\n  ],\n  "labels": [\n%s\n  ]\n}\n' % (rows("inputs"), rows("labels")))


def read_batch(path):
    with open(path) as f:
        batch = json.load(f)
    if len(batch["inputs"]) != len(batch["labels"]):
        raise ValueError(f"{path}: inputs and labels have different row counts")
    return batch


def pad_batch(batch):
    """Right-pad: inputs with PAD (+ attention mask), labels with -100."""
    rows = len(batch["inputs"])
    lin = max(len(r) for r in batch["inputs"])
    llab = max(len(r) for r in batch["labels"])
    input_ids = torch.full((rows, lin), PAD, dtype=torch.long)
    attention_mask = torch.zeros((rows, lin), dtype=torch.long)
    labels = torch.full((rows, llab), IGNORE, dtype=torch.long)
    for b, (x, y) in enumerate(zip(batch["inputs"], batch["labels"])):
        input_ids[b, : len(x)] = torch.tensor(x)
        attention_mask[b, : len(x)] = 1
        labels[b, : len(y)] = torch.tensor(y)
    return input_ids, attention_mask, labels


# ---------------------------------------------------------------------------
# model construction / loading


def fp32_kwargs():
    """The keyword that from_pretrained uses for the dtype (``dtype`` since 4.56)."""
    version = tuple(int(part) for part in transformers.__version__.split(".")[:2] if part.isdigit())
    return {"dtype": torch.float32} if version >= (4, 56) else {"torch_dtype": torch.float32}


def ensure_start_token(config):
    if getattr(config, "decoder_start_token_id", None) is None:
        config.decoder_start_token_id = PAD


def build_model(spec):
    """A freshly initialised fp32 model, deterministic for the spec's seed."""
    config_cls, model_cls = MODEL_CLASSES[spec["model"]]
    cfg = dict(spec["config"], dropout_rate=0.0, decoder_start_token_id=PAD)
    tied = cfg["tie_word_embeddings"]
    config = config_cls(**cfg)
    torch.manual_seed(spec["seed"])
    try:
        model = model_cls._from_config(config, attn_implementation="eager")
    except (TypeError, ValueError):
        model = model_cls(config)

    with torch.no_grad():
        if not tied:
            untie_lm_head(model)
        # HF initialises RMSNorm scales to exactly 1, which would hide bugs.
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
    return model.float().eval()


def untie_lm_head(model):
    """Give lm_head its own weight (HF's untied init: normal, std = initializer_factor)."""
    config = model.config
    config.tie_word_embeddings = False
    vocab, d_model = model.shared.weight.shape
    std = getattr(config, "initializer_factor", 1.0)
    model.lm_head.weight = torch.nn.Parameter(torch.randn(vocab, d_model) * std)
    # transformers 5.x keeps a {target: source} table of tied parameters that
    # save_pretrained consults; drop lm_head from it.
    tied = getattr(model, "all_tied_weights_keys", None)
    if isinstance(tied, dict):
        model.all_tied_weights_keys = {k: v for k, v in tied.items() if k != "lm_head.weight"}
    assert model.lm_head.weight is not model.shared.weight


def load_model(model_dir):
    """Load a seq2seq model directory in fp32 with eager attention."""
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    model_cls = UMT5ForConditionalGeneration if raw.get("model_type") == "umt5" else AutoModelForSeq2SeqLM
    kwargs = fp32_kwargs()
    try:
        model = model_cls.from_pretrained(model_dir, attn_implementation="eager", **kwargs)
    except (TypeError, ValueError):
        model = model_cls.from_pretrained(model_dir, **kwargs)
    ensure_start_token(model.config)

    # transformers 5.x forces UMT5Config.tie_word_embeddings to True, and UMT5
    # uses that flag to decide whether to scale the decoder output; restore the
    # value in config.json (4.x semantics: untied => no scaling).
    if raw.get("model_type") == "umt5" and raw.get("tie_word_embeddings", True) is False:
        if model.config.tie_word_embeddings:
            print("note: restoring tie_word_embeddings=false for UMT5 (transformers 5.x forces true)")
            model.config.tie_word_embeddings = False
    if model.lm_head.weight is model.shared.weight and not _config_tied(raw):
        print("warning: config says untied but lm_head shares shared.weight", file=sys.stderr)
    return model.float().eval()


def _config_tied(raw):
    return raw.get("tie_word_embeddings", True) is not False


# ---------------------------------------------------------------------------
# forward / loss


def run_batch(model, batch, with_grad=False):
    """HF forward on the padded batch; returns (packed logits, loss tensor)."""
    input_ids, attention_mask, labels = pad_batch(batch)
    with torch.set_grad_enabled(with_grad):
        out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    packed = torch.cat([out.logits[b, : len(y)] for b, y in enumerate(batch["labels"])], dim=0)
    return packed, out.loss


def packed_labels(batch):
    return torch.tensor([t for row in batch["labels"] for t in row], dtype=torch.long)


def plain_loss(logits, labels):
    return F.cross_entropy(logits.double(), labels, ignore_index=IGNORE).float()


def z_smoothed_loss(logits, labels, z=Z_LOSS, s=LABEL_SMOOTHING):
    """mean over non-ignored tokens of CE_smoothed + z * lse^2 (computed in float64)."""
    x = logits.detach().double()
    keep = labels != IGNORE
    x, y = x[keep], labels[keep]
    lse = torch.logsumexp(x, dim=-1)
    vocab = x.shape[-1]
    ce = lse - (1 - s) * x.gather(1, y[:, None])[:, 0] - (s / vocab) * x.sum(dim=-1)
    # same thing through torch's own label smoothing, as a cross-check
    ce_torch = F.cross_entropy(x, y, label_smoothing=s, reduction="none")
    assert torch.allclose(ce, ce_torch, rtol=1e-10, atol=1e-10)
    return (ce + z * lse * lse).mean().float()


# ---------------------------------------------------------------------------
# generation mode


def saved_tensor_names(path):
    with safe_open(path, framework="pt") as f:
        return set(f.keys())


def canonicalise_header(path):
    """Rewrite a safetensors header with sorted JSON keys (same length, same data).

    safetensors writes its header from a hash map, so the order of the entries
    (and of ``__metadata__``) changes from run to run; sorting makes regenerated
    fixtures byte-identical.
    """
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
        if len(text) > size:
            return  # cannot happen for a compact header; leave the file alone
        f.seek(8)
        f.write(text + b" " * (size - len(text)))


def make_fixture(spec, out_root):
    name = spec["name"]
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    for entry in os.listdir(out_dir):  # start from a clean directory
        path = os.path.join(out_dir, entry)
        if os.path.isfile(path):
            os.remove(path)

    model = build_model(spec)
    batch = make_batch(spec, model.config.vocab_size)
    write_batch(os.path.join(out_dir, "batch.json"), batch)

    # save_pretrained, then keep only config.json + model.safetensors
    model.save_pretrained(out_dir, safe_serialization=True)
    for entry in os.listdir(out_dir):
        path = os.path.join(out_dir, entry)
        if entry not in FIXTURE_FILES and os.path.isfile(path):
            os.remove(path)
    saved = saved_tensor_names(os.path.join(out_dir, "model.safetensors"))
    assert "shared.weight" in saved, f"{name}: shared.weight missing from model.safetensors"
    tied = spec["config"]["tie_word_embeddings"]
    assert ("lm_head.weight" in saved) == (not tied), f"{name}: lm_head.weight presence is wrong"

    # forward + backward
    model.zero_grad(set_to_none=True)
    logits, loss = run_batch(model, batch, with_grad=True)
    loss.backward()
    labels = packed_labels(batch)
    logits = logits.detach()
    assert logits.shape == (len(labels), model.config.vocab_size)
    assert torch.allclose(plain_loss(logits, labels), loss.detach(), rtol=1e-6, atol=1e-6)
    loss_zs = z_smoothed_loss(logits, labels)

    tensors = {"logits": logits.contiguous(), "loss": loss.detach().reshape(1), "loss_zs": loss_zs.reshape(1)}
    shared = model.shared.weight
    for pname, param in model.named_parameters():
        if param is shared and pname != "shared.weight":
            continue  # alias of shared.weight
        assert pname in saved, f"{name}: parameter {pname} is not in model.safetensors"
        assert param.grad is not None, f"{name}: no gradient for {pname}"
        tensors["grad." + pname] = param.grad.detach().float().contiguous()
    metadata = {
        "name": name,
        "loss": repr(loss.item()),
        "loss_zs": repr(loss_zs.item()),
        "z_loss": repr(Z_LOSS),
        "label_smoothing": repr(LABEL_SMOOTHING),
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
    }
    ref_path = os.path.join(out_dir, "reference.safetensors")
    save_file(tensors, ref_path, metadata=metadata)
    canonicalise_header(ref_path)
    load_file(ref_path)  # still a valid file

    # each row run alone (no padding) must agree with its slice of the padded run
    start = 0
    for x, y in zip(batch["inputs"], batch["labels"]):
        alone, _ = run_batch(model, {"inputs": [x], "labels": [y]})
        assert torch.allclose(alone, logits[start : start + len(y)], rtol=1e-5, atol=1e-5)
        start += len(y)

    # the files on disk must reproduce the stored logits exactly
    reloaded = load_model(out_dir)
    again, again_loss = run_batch(reloaded, batch)
    if not torch.equal(again, logits):
        diff = (again - logits).abs().max().item()
        raise AssertionError(f"{name}: reloaded model gives different logits (max abs diff {diff:g})")
    assert again_loss.item() == loss.item()

    sizes = {f: os.path.getsize(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
    print(f"{name}: loss {loss.item():.6f} loss_zs {loss_zs.item():.6f} label tokens {len(labels)} "
          f"grads {sum(k.startswith('grad.') for k in tensors)}  files {sizes}")


# ---------------------------------------------------------------------------
# check modes


def compare(what, got, ref):
    """Print diffs of got vs ref; True when |got-ref| <= ATOL + RTOL*|ref| everywhere."""
    got = got.detach().double()
    ref = ref.detach().double()
    if got.shape != ref.shape:
        print(f"{what}: shape mismatch {tuple(got.shape)} vs reference {tuple(ref.shape)}")
        return False
    diff = (got - ref).abs()
    rel = diff / ref.abs().clamp_min(1e-30)
    allowed = ATOL + RTOL * ref.abs()
    bad = diff > allowed
    if not torch.isfinite(got).all():
        bad |= ~torch.isfinite(got)
    n_bad = int(bad.sum())
    ok = n_bad == 0
    print(f"{what}: max abs diff {diff.max().item():.3e}  max rel diff {rel.max().item():.3e}  "
          f"worst diff/allowed {(diff / allowed).max().item():.3f}  "
          f"out of tolerance {n_bad}/{ref.numel()}  {'OK' if ok else 'FAIL'}")
    return ok


def check_against_fixture(model_dir, fixture_dir):
    batch = read_batch(os.path.join(fixture_dir, "batch.json"))
    ref = load_file(os.path.join(fixture_dir, "reference.safetensors"))
    model = load_model(model_dir)
    logits, loss = run_batch(model, batch)
    labels = packed_labels(batch)
    ok = compare("logits", logits, ref["logits"])
    ok &= compare("loss", loss.reshape(1), ref["loss"])
    ok &= compare("loss_zs", z_smoothed_loss(logits, labels).reshape(1), ref["loss_zs"])
    return ok


def check_logits_file(out_path, model_dir, batch_path):
    batch = read_batch(batch_path)
    with safe_open(out_path, framework="pt") as f:
        got = f.get_tensor("logits").float()
        meta = f.metadata() or {}
    model = load_model(model_dir)
    logits, loss = run_batch(model, batch)
    ok = compare("logits", got, logits)
    if "loss" in meta:
        ok &= compare("loss", torch.tensor([float(meta["loss"])]), loss.reshape(1))
    else:
        print("loss: no 'loss' entry in the metadata of", out_path)
        ok = False
    return ok


# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# generation fixtures (--generate)

# Each case: Hugging Face GenerationConfig keyword arguments (the names that
# fat5_generate_config_from_json reads), run on the fixture's batch.json inputs
# as one right-padded batch.
GENERATE_CASES = [
    ("greedy_min32", dict(max_new_tokens=32, min_new_tokens=32)),
    ("greedy_plain", dict(max_new_tokens=40)),
    ("greedy_rep", dict(max_new_tokens=24, repetition_penalty=1.7)),
    ("greedy_ngram", dict(max_new_tokens=32, min_new_tokens=32, no_repeat_ngram_size=2)),
    ("beam_lp06", dict(max_new_tokens=20, num_beams=4, length_penalty=0.6, early_stopping=False,
                       num_return_sequences=2)),
    ("beam_lp2_true", dict(max_new_tokens=20, num_beams=4, length_penalty=2.0, early_stopping=True,
                           num_return_sequences=2)),
    ("beam_never", dict(max_new_tokens=16, num_beams=4, length_penalty=2.0, early_stopping="never",
                        num_return_sequences=2)),
    ("beam_rep_ngram", dict(max_new_tokens=16, num_beams=4, length_penalty=0.6, repetition_penalty=1.5,
                            no_repeat_ngram_size=3, num_return_sequences=2, min_new_tokens=4)),
]
# The same with a frequent token as EOS (``eos_token_id`` = HOT), so that rows and beams finish at
# different steps: the random tiny models almost never emit the real EOS.
HOT = "hot"
GENERATE_EOS_CASES = [
    ("greedy_hot", dict(max_new_tokens=24, eos_token_id=HOT)),
    ("greedy_hot_min", dict(max_new_tokens=24, min_new_tokens=3, no_repeat_ngram_size=2, eos_token_id=HOT)),
    ("beam_hot_lp06", dict(max_new_tokens=16, num_beams=4, length_penalty=0.6, num_return_sequences=2,
                           eos_token_id=HOT)),
    ("beam_hot_lp2_true", dict(max_new_tokens=16, num_beams=4, length_penalty=2.0, early_stopping=True,
                               num_return_sequences=2, eos_token_id=HOT)),
    ("beam_hot_never", dict(max_new_tokens=12, num_beams=3, length_penalty=1.5, early_stopping="never",
                            num_return_sequences=3, eos_token_id=HOT)),
    ("beam_hot_neg", dict(max_new_tokens=12, num_beams=4, length_penalty=-0.5, num_return_sequences=1,
                          no_repeat_ngram_size=2, eos_token_id=HOT)),
]


def trim_at_eos(ids, eos):
    """The generated ids up to and including the first EOS (HF pads after it)."""
    out = []
    for t in ids:
        out.append(int(t))
        if t == eos:
            break
    return out


def make_generate_fixture(fixture_dir):
    """generate.json: for every case, the options, HF's ids (trimmed at EOS) and scores."""
    model = load_model(fixture_dir)
    batch = read_batch(os.path.join(fixture_dir, "batch.json"))
    input_ids, attention_mask, _ = pad_batch(batch)
    eos = model.generation_config.eos_token_id
    if isinstance(eos, list):
        eos = eos[0]
    cases = []
    hot = None
    for name, opts in GENERATE_CASES + GENERATE_EOS_CASES:
        if opts.get("eos_token_id") == HOT:
            opts = dict(opts, eos_token_id=hot)
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=False,
                                 output_scores=True, return_dict_in_generate=True, **opts)
        seqs = out.sequences[:, 1:].tolist()   # drop the decoder start token
        outputs = [trim_at_eos(r, opts.get("eos_token_id", eos)) for r in seqs]
        if name == "greedy_ngram":   # the most frequent generated token, EOS of the "hot" cases
            counts = torch.bincount(torch.tensor([t for r in outputs for t in r]))
            hot = int(torch.argmax(counts))
        if opts.get("num_beams", 1) > 1:
            scores = [float(x) for x in out.sequences_scores.tolist()]
        else:
            # sum of the chosen tokens' log-probabilities after the processors
            scores = []
            for b, row in enumerate(outputs):
                total = 0.0
                for t, tok in enumerate(row):
                    total += float(F.log_softmax(out.scores[t][b].double(), dim=-1)[tok])
                scores.append(total)
        cases.append({"name": name, "options": opts, "outputs": outputs, "scores": scores})
    path = os.path.join(fixture_dir, "generate.json")
    with open(path, "w") as f:
        f.write('{\n  "transformers": %s,\n  "eos_token_id": %d,\n  "pad_token_id": %d,\n'
                '  "decoder_start_token_id": %d,\n  "cases": [\n' % (
                    json.dumps(transformers.__version__), eos, model.generation_config.pad_token_id,
                    model.config.decoder_start_token_id))
        parts = []
        for c in cases:
            rows = ",\n".join("        " + json.dumps(r, separators=(",", ":")) for r in c["outputs"])
            parts.append('    {"name": %s,\n      "options": %s,\n      "scores": %s,\n      "outputs": [\n%s\n      ]}'
                         % (json.dumps(c["name"]), json.dumps(c["options"]),
                            json.dumps([round(x, 7) for x in c["scores"]]), rows))
        f.write(",\n".join(parts) + "\n  ]\n}\n")
    print(f"wrote {path} ({len(cases)} cases)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("tests", "data"), help="fixture root (generation mode)")
    parser.add_argument("--only", action="append", help="generate only this fixture (repeatable)")
    parser.add_argument("--check", metavar="DIR", help="model directory to check against a fixture")
    parser.add_argument("--against", metavar="FIXTURE_DIR", help="fixture directory for --check")
    parser.add_argument("--check-logits", metavar="OUT", help="safetensors file with logits (+ loss metadata)")
    parser.add_argument("--model", metavar="DIR", help="model directory for --check-logits")
    parser.add_argument("--batch", metavar="BATCH", help="batch.json for --check-logits")
    parser.add_argument("--generate", action="store_true",
                        help="write generate.json into each existing fixture directory under --out")
    args = parser.parse_args()

    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    if args.check:
        if not args.against:
            parser.error("--check needs --against tests/data/<name>")
        sys.exit(0 if check_against_fixture(args.check, args.against) else 1)
    if args.check_logits:
        if not (args.model and args.batch):
            parser.error("--check-logits needs --model DIR and --batch BATCH.json")
        sys.exit(0 if check_logits_file(args.check_logits, args.model, args.batch) else 1)

    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    if args.generate:
        for spec in FIXTURES:
            if not args.only or spec["name"] in args.only:
                make_generate_fixture(os.path.join(args.out, spec["name"]))
        return
    names = {f["name"] for f in FIXTURES}
    for only in args.only or []:
        if only not in names:
            parser.error(f"unknown fixture {only!r}; known: {sorted(names)}")
    for spec in FIXTURES:
        if not args.only or spec["name"] in args.only:
            make_fixture(spec, args.out)


if __name__ == "__main__":
    main()
