#!/usr/bin/env python3
"""Reference fixtures for fat5.h, produced with Hugging Face transformers (and, for the
position encodings, with a small PyTorch T5 written here).

Six modes:

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

  make_reference.py --posenc [--out tests/data] [--only posenc_<name>]
      Position-encoding fixtures ``<out>/posenc_<name>/`` (t5, none, alibi_sym,
      alibi_asym, rope_neox, rope_gptj_xpos, fire), produced by a T5 written in
      this file from the formulas (pre-norm RMSNorm, gated tanh-GELU FFN, no
      1/sqrt(d) scaling, untied lm_head without rescaling, no biases in linear
      layers); transformers is used only to cross-check the t5-bucket fixture.
      Files as above, except that config.json carries FlashT5Config's field names
      (model_type "flash_t5") and model.safetensors FAT5's parameter names.
      ``logits`` are the logits of every row run on its own (positions from 0),
      concatenated; ``loss`` their mean cross-entropy over non-ignored labels;
      ``grad.<name>`` its gradient for every floating-point parameter.  Before
      writing, the script checks that one packed run of all rows (block-diagonal
      masks, positions restarting per row) gives the same logits and gradients.
      Formulas, defaults and open points: docs/posenc_notes.md.

      FAT5 names (per stack S = encoder/decoder, block i; P = pe_encoding of
      ``S.block.0.self_attention_layer.self_attention``):
        shared.weight [V, d], lm_head.weight [V, d], S.final_layer_norm.weight [d]
        S.block.i.self_attention_layer.layer_norm.weight [d]
        S.block.i.self_attention_layer.self_attention.{Wq,Wk,Wv}.weight [H*dk, d], .o.weight [d, H*dk]
        decoder.block.i.cross_attention_layer.layer_norm.weight [d]
        decoder.block.i.cross_attention_layer.cross_attention.{Wq,Wk,Wv,o}.weight
        S.block.i.ff_layer.layer_norm.weight [d]
        S.block.i.ff_layer.act.{wi_0,wi_1}.weight [d_ff, d], S.block.i.ff_layer.wo.weight [d, d_ff]
        t5:    P.relative_attention_bias.weight [num_buckets, H]
        FIRE:  P.mlp.0.weight [W, 1], P.mlp.0.bias [W], P.mlp.2.weight [H, W], P.mlp.2.bias [H],
               P.c [] (F32), P.L_multiplier [] (F32), P.init_L [] (I64, not trained: L0)
        ALiBi, RoPE, none: no parameters (FAT5's slopes and cos/sin caches are not saved).
      FIRE's init_L is I64 because FAT5 wraps the integer
      relative_attention_max_distance in a Parameter without a dtype; it has no
      gradient.  The encoder and the decoder each own one set of block-0 tensors.

  make_reference.py --longt5 [--out tests/data] [--only longt5_<name>]
      LongT5 fixtures ``<out>/longt5_local/`` and ``<out>/longt5_tglobal/``:
      transformers' LongT5ForConditionalGeneration (encoder_attention_type
      "local" / "transient-global"; gated-gelu, untied), files as in the first
      mode, except that the reference is every row run alone (batch size 1, no
      padding): ``logits`` the rows' logits concatenated, ``loss`` the mean
      cross-entropy over all non-ignored labels of all rows, ``grad.<name>`` its
      gradient (HF names; the encoder's attention is ``layer.0.LocalSelfAttention``
      or ``layer.0.TransientGlobalSelfAttention``, with
      ``global_relative_attention_bias`` [num_buckets, H] in block 0 and
      ``global_input_layer_norm`` [d] in every block).  The script also checks
      that the rows as one right-padded batch with attention_mask give the same
      logits, loss and gradients, and that an encoder written from the formulas
      of docs/longt5_notes.md on the packed batch (positions restarting per row,
      no attention across rows) matches transformers.  The check modes run
      LongT5 models row by row as well.

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
import math
import os
import sys

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import transformers
from transformers import (
    AutoModelForSeq2SeqLM,
    LongT5Config,
    LongT5ForConditionalGeneration,
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
    "longt5": (LongT5Config, LongT5ForConditionalGeneration),
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


def write_reference(out_dir, name, logits, loss, loss_zs, grads, **meta):
    """Writes out_dir/reference.safetensors: logits, loss, loss_zs and grad.<name> of every
    parameter, with the loss settings and `meta` (which reference, library versions) as metadata,
    its header canonicalised. Returns its path."""
    tensors = {"logits": logits.contiguous(), "loss": loss.detach().reshape(1), "loss_zs": loss_zs.detach().reshape(1)}
    for k, g in grads.items():
        tensors["grad." + k] = g.contiguous()
    metadata = {
        "name": name,
        "loss": repr(loss.item()),
        "loss_zs": repr(loss_zs.item()),
        "z_loss": repr(Z_LOSS),
        "label_smoothing": repr(LABEL_SMOOTHING),
        **meta,
    }
    ref_path = os.path.join(out_dir, "reference.safetensors")
    save_file(tensors, ref_path, metadata=metadata)
    canonicalise_header(ref_path)
    return ref_path


def clean_dir(out_dir):
    """Creates out_dir, or removes the files it holds (a fixture starts from a clean directory)."""
    os.makedirs(out_dir, exist_ok=True)
    for entry in os.listdir(out_dir):
        path = os.path.join(out_dir, entry)
        if os.path.isfile(path):
            os.remove(path)


def keep_fixture_files(out_dir):
    """After save_pretrained: removes every file but FIXTURE_FILES; returns the saved tensor names."""
    for entry in os.listdir(out_dir):
        path = os.path.join(out_dir, entry)
        if entry not in FIXTURE_FILES and os.path.isfile(path):
            os.remove(path)
    return saved_tensor_names(os.path.join(out_dir, "model.safetensors"))


def forward_backward(model, batch, saved, name, run):
    """run(model, batch, with_grad=True) -> (logits, loss); returns the logits, the loss, the loss with
    z-loss and label smoothing, and {name: gradient} of every parameter in the saved file (the
    aliases of shared.weight left out)."""
    model.zero_grad(set_to_none=True)
    logits, loss = run(model, batch, with_grad=True)
    loss.backward()
    labels = packed_labels(batch)
    logits = logits.detach()
    assert logits.shape == (len(labels), model.config.vocab_size)
    assert torch.allclose(plain_loss(logits, labels), loss.detach(), rtol=1e-6, atol=1e-6)
    grads = {}
    shared = model.shared.weight
    for pname, param in model.named_parameters():
        if param is shared and pname != "shared.weight":
            continue  # alias of shared.weight
        assert pname in saved, f"{name}: parameter {pname} is not in model.safetensors"
        assert param.grad is not None, f"{name}: no gradient for {pname}"
        grads[pname] = param.grad.detach().float().contiguous()
    return logits, loss, z_smoothed_loss(logits, labels), grads


def make_fixture(spec, out_root):
    name = spec["name"]
    out_dir = os.path.join(out_root, name)
    clean_dir(out_dir)

    model = build_model(spec)
    batch = make_batch(spec, model.config.vocab_size)
    write_batch(os.path.join(out_dir, "batch.json"), batch)

    # save_pretrained, then keep only config.json + model.safetensors
    model.save_pretrained(out_dir, safe_serialization=True)
    saved = keep_fixture_files(out_dir)
    assert "shared.weight" in saved, f"{name}: shared.weight missing from model.safetensors"
    tied = spec["config"]["tie_word_embeddings"]
    assert ("lm_head.weight" in saved) == (not tied), f"{name}: lm_head.weight presence is wrong"

    # forward + backward
    logits, loss, loss_zs, grads = forward_backward(model, batch, saved, name, run_batch)
    ref_path = write_reference(out_dir, name, logits, loss, loss_zs, grads,
                               transformers_version=transformers.__version__, torch_version=torch.__version__)
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
    print(f"{name}: loss {loss.item():.6f} loss_zs {loss_zs.item():.6f} label tokens {logits.shape[0]} "
          f"grads {len(grads)}  files {sizes}")


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
    logits, loss = reference_run(model, batch)
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
    logits, loss = reference_run(model, batch)
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


# ---------------------------------------------------------------------------
# position-encoding fixtures (--posenc)
#
# A small T5 written directly in PyTorch (no transformers code in the model or
# in the position-encoding math), parameterised by the position encoding and
# named with FAT5 (flash_t5) parameter names.  See the module docstring and
# docs/posenc_notes.md for the formulas.

# Shared shapes of every position-encoding fixture (alibi_asym overrides num_heads).
POSENC_SHAPES = dict(
    vocab_size=40, d_model=8, d_kv=4, num_heads=3, d_ff=16,
    num_layers=2, num_decoder_layers=2,
    relative_attention_num_buckets=8, relative_attention_max_distance=16,
    layer_norm_epsilon=1e-6,
)
# encoder 21 > max_distance 16 (also FIRE's L0); decoder 19 > 16.
POSENC_INPUTS = [21, 6, 13]
POSENC_LABELS = [(19, [4, 18]), (1, []), (9, [2])]

# FIRE's learned scalars are written with these values (not FAT5's 0.1 / 1.0) so
# that the gradient checks see generic values and the threshold |L_mult * L0|
# (= 14.896 here) never equals an integer position, where max() has a tie.
FIRE_C = 0.137
FIRE_L_MULT = 0.931

POSENC_FIXTURES = [
    {"name": "posenc_t5", "seed": 2001, "pe": dict(position_encoding_type="t5")},
    {"name": "posenc_none", "seed": 2002, "pe": dict(position_encoding_type="none")},
    {"name": "posenc_alibi_sym", "seed": 2003,
     "pe": dict(position_encoding_type="ALiBi", alibi_mode="symetric")},
    {"name": "posenc_alibi_asym", "seed": 2004, "shapes": dict(num_heads=4),
     "pe": dict(position_encoding_type="ALiBi", alibi_mode="asymetric")},
    {"name": "posenc_rope_neox", "seed": 2005,
     "pe": dict(position_encoding_type="RoPE", rotary_emb_fraction=0.5, rotary_base=10000.0,
                rotary_interleaved=False)},
    {"name": "posenc_rope_gptj_xpos", "seed": 2006,
     "pe": dict(position_encoding_type="RoPE", rotary_emb_fraction=1.0, rotary_base=100.0,
                rotary_interleaved=True, rotary_scale_base=16.0)},
    {"name": "posenc_fire", "seed": 2007, "pe": dict(position_encoding_type="FIRE", fire_mlp_width=8)},
]

# config.json of a position-encoding fixture: FlashT5Config's field names, with
# FAT5's defaults for the fields a fixture does not set (attention_scale 1.0 and
# z_loss 0.0 instead of FAT5's None, see the spec's QUIRKs; pad 0 instead of -100).
FAT5_CONFIG_DEFAULTS = dict(
    model_type="flash_t5",
    architectures=["FlashT5ForConditionalGeneration"],
    is_encoder_decoder=True,
    tie_word_embeddings=False,
    use_glu_mlp=True,
    use_gelu_act=True,
    feed_forward_proj="gated-gelu",
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
    initializer_factor=1.0,
    eos_token_id=EOS,
    pad_token_id=PAD,
    decoder_start_token_id=PAD,
    position_encoding_type="t5",
    use_randomized_position_encoding=False,
    max_sequence_length=64,
    alibi_mode="symetric",
    rotary_emb_fraction=1.0,
    rotary_base=10000.0,
    rotary_interleaved=False,
    rotary_scale_base=None,
    fire_mlp_width=32,
    attention_scale=1.0,
    attention_type="ref",
    label_smoothing=0.0,
    z_loss=0.0,
    use_full_bias_size=False,
    use_masking=False,
)


def posenc_config(spec):
    cfg = dict(FAT5_CONFIG_DEFAULTS)
    cfg.update(POSENC_SHAPES)
    cfg.update(spec.get("shapes", {}))
    cfg.update(spec["pe"])
    return cfg


def pe_kind(cfg):
    """'t5', 'ALiBi', 'RoPE', 'FIRE' (case-sensitive, as FAT5), anything else: 'none'."""
    kind = cfg["position_encoding_type"]
    return kind if kind in ("t5", "ALiBi", "RoPE", "FIRE") else "none"


# ----- parameters ------------------------------------------------------------

PE_PREFIX = "self_attention_layer.self_attention.pe_encoding."


def posenc_param_specs(cfg):
    """[(name, shape, init)] in a fixed order; init is ('normal', std), ('norm',),
    ('uniform', bound) or ('const', value)."""
    d, h, dk, dff = cfg["d_model"], cfg["num_heads"], cfg["d_kv"], cfg["d_ff"]
    inner = h * dk
    kind = pe_kind(cfg)
    out = [("shared.weight", (cfg["vocab_size"], d), ("normal", 1.0))]

    def attention(prefix, kv_width=d):
        return [
            (prefix + "Wq.weight", (inner, d), ("normal", (d * dk) ** -0.5)),
            (prefix + "Wk.weight", (inner, kv_width), ("normal", d ** -0.5)),
            (prefix + "Wv.weight", (inner, kv_width), ("normal", d ** -0.5)),
            (prefix + "o.weight", (d, inner), ("normal", inner ** -0.5)),
        ]

    def ffn(prefix):
        return [
            (prefix + "layer_norm.weight", (d,), ("norm",)),
            (prefix + "act.wi_0.weight", (dff, d), ("normal", d ** -0.5)),
            (prefix + "act.wi_1.weight", (dff, d), ("normal", d ** -0.5)),
            (prefix + "wo.weight", (d, dff), ("normal", dff ** -0.5)),
        ]

    def pe_params(stack):
        pre = f"{stack}.block.0.{PE_PREFIX}"
        if kind == "t5":
            return [(pre + "relative_attention_bias.weight", (cfg["relative_attention_num_buckets"], h),
                     ("normal", 1.0))]
        if kind == "FIRE":
            w = cfg["fire_mlp_width"]
            return [
                (pre + "mlp.0.weight", (w, 1), ("uniform", 1.0)),
                (pre + "mlp.0.bias", (w,), ("uniform", 1.0)),
                (pre + "mlp.2.weight", (h, w), ("uniform", w ** -0.5)),
                (pre + "mlp.2.bias", (h,), ("uniform", w ** -0.5)),
                (pre + "c", (), ("const", FIRE_C)),
                (pre + "L_multiplier", (), ("const", FIRE_L_MULT)),
                (pre + "init_L", (), ("fixed_i64", cfg["relative_attention_max_distance"])),
            ]
        return []  # ALiBi, RoPE and none have no parameters (FAT5 keeps no persistent buffers)

    for stack, layers in (("encoder", cfg["num_layers"]), ("decoder", cfg["num_decoder_layers"])):
        for i in range(layers):
            blk = f"{stack}.block.{i}."
            out += [(blk + "self_attention_layer.layer_norm.weight", (d,), ("norm",))]
            out += attention(blk + "self_attention_layer.self_attention.")
            if i == 0:
                out += pe_params(stack)
            if stack == "decoder":
                out += [(blk + "cross_attention_layer.layer_norm.weight", (d,), ("norm",))]
                out += attention(blk + "cross_attention_layer.cross_attention.")
            out += ffn(blk + "ff_layer.")
        out += [(f"{stack}.final_layer_norm.weight", (d,), ("norm",))]
    out += [("lm_head.weight", (cfg["vocab_size"], d), ("normal", d ** -0.5))]
    return out


def posenc_init(cfg, seed):
    """{name: tensor}; fp32 leaves with requires_grad except FIRE's init_L (int64, fixed)."""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape, init in posenc_param_specs(cfg):
        if init[0] == "normal":
            t = torch.randn(shape, generator=gen) * init[1]
        elif init[0] == "norm":  # RMSNorm scales away from 1 so that a missing scale shows
            t = 1.0 + 0.2 * torch.randn(shape, generator=gen)
        elif init[0] == "uniform":  # PyTorch's nn.Linear default, as FAT5's FIRE MLP keeps
            t = (torch.rand(shape, generator=gen) * 2.0 - 1.0) * init[1]
        elif init[0] == "const":
            t = torch.tensor(float(init[1]), dtype=torch.float32)
        elif init[0] == "fixed_i64":
            params[name] = torch.tensor(int(init[1]), dtype=torch.int64)
            continue
        else:
            raise ValueError(init)
        params[name] = t.float().contiguous().requires_grad_(True)
    return params


def trainable(params):
    return {k: v for k, v in params.items() if v.is_floating_point()}


# ----- position encodings, from the formulas ----------------------------------


def t5_bucket(rel, bidirectional, num_buckets, max_distance):
    """T5 bucket of rel = key - query (int64 tensor), float32 logarithm as T5."""
    ret = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        ret = ret + (rel > 0).long() * num_buckets
        n = rel.abs()
    else:
        n = (-rel).clamp_min(0)
    max_exact = num_buckets // 2
    nf = n.clamp_min(1).float()
    large = max_exact + (torch.log(nf / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = large.clamp_max(num_buckets - 1)
    return ret + torch.where(n < max_exact, n, large)


def alibi_slopes(n):
    """ALiBi head slopes: geometric 2^(-8/n)^(k+1) for a power of two n; otherwise the
    slopes of the largest power of two p <= n followed by the first n-p of the
    even-indexed slopes of 2p."""
    def pow2(m):
        start = 2.0 ** (-8.0 / m)
        return [start ** (k + 1) for k in range(m)]

    p = 1 << (n.bit_length() - 1)
    if p == n:
        return pow2(n)
    return pow2(p) + alibi_slopes(2 * p)[0::2][: n - p]


def fire_bias(params, cfg, stack, pos_q, pos_k):
    """FIRE bias [H, Lq, Lk]; positions are per-token (restarting per sequence)."""
    pre = f"{stack}.block.0.{PE_PREFIX}"
    c = params[pre + "c"]
    l_mult = params[pre + "L_multiplier"]
    l0 = params[pre + "init_L"].float()
    i = pos_q.float()[:, None]
    j = pos_k.float()[None, :]
    d = i - j                                   # query minus key
    thr = (l_mult * l0).abs()
    num = torch.sign(d) * torch.log((c * d).abs() + 1.0)
    den = torch.log((c * torch.maximum(i, thr)).abs() + 1.0) + 1e-6
    u = (num / den).unsqueeze(-1)               # [Lq, Lk, 1]
    hid = torch.relu(u @ params[pre + "mlp.0.weight"].t() + params[pre + "mlp.0.bias"])
    out = hid @ params[pre + "mlp.2.weight"].t() + params[pre + "mlp.2.bias"]   # [Lq, Lk, H]
    return out.permute(2, 0, 1)


def self_attention_bias(params, cfg, stack, pos):
    """(bias [H, L, L] or None, extra mask [H, L, L] or None) of a stack's self-attention.

    pos holds every token's position inside its own sequence; pairs of different
    sequences are masked by the caller, so their values here do not matter."""
    kind = pe_kind(cfg)
    h = cfg["num_heads"]
    rel = pos[None, :] - pos[:, None]           # key minus query, [Lq, Lk]
    if kind == "t5":
        bucket = t5_bucket(rel, stack == "encoder", cfg["relative_attention_num_buckets"],
                           cfg["relative_attention_max_distance"])
        table = params[f"{stack}.block.0.{PE_PREFIX}relative_attention_bias.weight"]
        return table[bucket].permute(2, 0, 1), None
    if kind == "ALiBi":
        dist = rel.abs().float()
        if stack == "encoder" and cfg["alibi_mode"] == "asymetric":
            if h % 2:
                raise ValueError("asymmetric ALiBi needs an even head count")
            slopes = torch.tensor(alibi_slopes(h // 2) * 2)
            back = (rel <= 0)[None].expand(h // 2, -1, -1)   # heads 0..H/2-1: keys at or before the query
            fwd = (rel >= 0)[None].expand(h // 2, -1, -1)    # heads H/2..H-1: keys at or after the query
            extra = torch.cat([back, fwd], dim=0)
        elif stack == "encoder" and cfg["alibi_mode"] != "symetric":
            raise ValueError(f"unknown alibi_mode {cfg['alibi_mode']!r}")
        else:
            slopes = torch.tensor(alibi_slopes(h))
            extra = None
        return -slopes[:, None, None] * dist[None], extra
    if kind == "FIRE":
        return fire_bias(params, cfg, stack, pos, pos), None
    return None, None


def rope_tables(cfg, pos, is_key):
    """cos, sin [L, rd/2] (fp32, computed in float64) for the given positions."""
    rd = int(cfg["d_kv"] * cfg["rotary_emb_fraction"])
    if rd % 2 or rd <= 0:
        raise ValueError(f"rotary dims {rd} must be positive and even")
    half = rd // 2
    k = torch.arange(half, dtype=torch.float64)
    inv_freq = float(cfg["rotary_base"]) ** (-2.0 * k / rd)
    t = pos.double()[:, None]
    ang = t * inv_freq[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    if cfg.get("rotary_scale_base") is not None:        # xPos
        zeta = (2.0 * k + 0.4 * rd) / (1.4 * rd)
        scale = zeta[None, :] ** (t / float(cfg["rotary_scale_base"]))
        if is_key:
            scale = 1.0 / scale
        cos, sin = cos * scale, sin * scale
    return cos.float(), sin.float(), rd


def rope_apply(x, cfg, pos, is_key):
    """Rotate x [H, L, d_kv] by token positions pos [L]; dims >= rd pass through."""
    cos, sin, rd = rope_tables(cfg, pos, is_key)
    xr, rest = x[..., :rd], x[..., rd:]
    if cfg["rotary_interleaved"]:                       # GPT-J: pairs (2k, 2k+1)
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
    else:                                               # NeoX: pairs (k, k + rd/2)
        half = rd // 2
        x1, x2 = xr[..., :half], xr[..., half:]
        y = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return torch.cat((y, rest), dim=-1)


# ----- the model ----------------------------------------------------------------


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def attention(params, cfg, prefix, xq, xkv, mask, bias, rope_pos=None):
    """One attention sublayer on packed tokens; mask [Lq, Lk] or [H, Lq, Lk] (True = attend)."""
    h, dk = cfg["num_heads"], cfg["d_kv"]
    q = (xq @ params[prefix + "Wq.weight"].t()).view(-1, h, dk).transpose(0, 1)
    k = (xkv @ params[prefix + "Wk.weight"].t()).view(-1, h, dk).transpose(0, 1)
    v = (xkv @ params[prefix + "Wv.weight"].t()).view(-1, h, dk).transpose(0, 1)
    if rope_pos is not None:                           # q and k only, never v
        q = rope_apply(q, cfg, rope_pos[0], is_key=False)
        k = rope_apply(k, cfg, rope_pos[1], is_key=True)
    s = (q @ k.transpose(1, 2)) * cfg["attention_scale"]
    if bias is not None:
        s = s + bias
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = (p @ v).transpose(0, 1).reshape(-1, h * dk)
    return o @ params[prefix + "o.weight"].t()


def ffn(params, cfg, prefix, x):
    x = rms_norm(x, params[prefix + "layer_norm.weight"], cfg["layer_norm_epsilon"])
    a = x @ params[prefix + "act.wi_0.weight"].t()
    a = F.gelu(a, approximate="tanh") if cfg["use_gelu_act"] else torch.relu(a)
    return (a * (x @ params[prefix + "act.wi_1.weight"].t())) @ params[prefix + "wo.weight"].t()


def shift_right(labels):
    return [PAD] + [PAD if t == IGNORE else t for t in labels[:-1]]


def pack(rows):
    ids = torch.tensor([t for r in rows for t in r], dtype=torch.long)
    pos = torch.cat([torch.arange(len(r)) for r in rows])
    seg = torch.cat([torch.full((len(r),), b, dtype=torch.long) for b, r in enumerate(rows)])
    return ids, pos, seg


def posenc_forward(params, cfg, inputs, labels):
    """Logits [label tokens, vocab] of a packed batch (rows concatenated; positions
    restart at 0 in each row; no token attends to another row)."""
    eps = cfg["layer_norm_epsilon"]
    kind = pe_kind(cfg)
    e_ids, e_pos, e_seg = pack(inputs)
    d_ids, d_pos, d_seg = pack([shift_right(y) for y in labels])

    # encoder
    mask = e_seg[:, None] == e_seg[None, :]
    bias, extra = self_attention_bias(params, cfg, "encoder", e_pos)
    if extra is not None:
        mask = mask[None] & extra
    rope = (e_pos, e_pos) if kind == "RoPE" else None
    h = params["shared.weight"][e_ids]
    for i in range(cfg["num_layers"]):
        blk = f"encoder.block.{i}."
        x = rms_norm(h, params[blk + "self_attention_layer.layer_norm.weight"], eps)
        h = h + attention(params, cfg, blk + "self_attention_layer.self_attention.", x, x, mask, bias, rope)
        h = h + ffn(params, cfg, blk + "ff_layer.", h)
    enc = rms_norm(h, params["encoder.final_layer_norm.weight"], eps)

    # decoder
    mask = (d_seg[:, None] == d_seg[None, :]) & (d_pos[None, :] <= d_pos[:, None])
    bias, extra = self_attention_bias(params, cfg, "decoder", d_pos)
    assert extra is None
    rope = (d_pos, d_pos) if kind == "RoPE" else None
    cross_mask = d_seg[:, None] == e_seg[None, :]
    h = params["shared.weight"][d_ids]
    for i in range(cfg["num_decoder_layers"]):
        blk = f"decoder.block.{i}."
        x = rms_norm(h, params[blk + "self_attention_layer.layer_norm.weight"], eps)
        h = h + attention(params, cfg, blk + "self_attention_layer.self_attention.", x, x, mask, bias, rope)
        x = rms_norm(h, params[blk + "cross_attention_layer.layer_norm.weight"], eps)
        # cross-attention: no bias and no rotation for every encoding (see the notes)
        h = h + attention(params, cfg, blk + "cross_attention_layer.cross_attention.", x, enc, cross_mask, None)
        h = h + ffn(params, cfg, blk + "ff_layer.", h)
    h = rms_norm(h, params["decoder.final_layer_norm.weight"], eps)
    return h @ params["lm_head.weight"].t()            # untied: no d_model^-0.5


def posenc_loss_and_grads(params, cfg, batch, one_by_one):
    """(logits, loss, {name: grad}); one_by_one runs every row as its own batch."""
    for p in trainable(params).values():
        p.grad = None
    if one_by_one:
        logits = torch.cat([posenc_forward(params, cfg, [x], [y])
                            for x, y in zip(batch["inputs"], batch["labels"])], dim=0)
    else:
        logits = posenc_forward(params, cfg, batch["inputs"], batch["labels"])
    labels = packed_labels(batch)
    loss = F.cross_entropy(logits, labels, ignore_index=IGNORE)
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in trainable(params).items()}
    return logits.detach(), loss.detach(), grads


# ----- self-checks ----------------------------------------------------------------


def close(a, b, rtol=1e-4, atol=1e-5):
    return torch.allclose(a.double(), b.double(), rtol=rtol, atol=atol)


def posenc_formula_checks():
    """Known values and invariances of the encodings, independent of any model."""
    assert alibi_slopes(8) == [2.0 ** -(k + 1) for k in range(8)]
    assert alibi_slopes(3) == [2.0 ** -4, 2.0 ** -8, 2.0 ** -2]
    assert alibi_slopes(6) == [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    # T5 buckets: the spec's reference values for 32 buckets / max distance 128
    rel = torch.tensor([-1, -7, -8, -16, -20, -32, -64, -128, -500, 0, 1, 8, 16, 32, 64, 127, 500])
    want = [1, 7, 8, 10, 10, 12, 14, 15, 15, 0, 17, 24, 26, 28, 30, 31, 31]
    assert t5_bucket(rel, True, 32, 128).tolist() == want
    dist = torch.tensor([15, 16, 20, 32, 64, 128, 1000])
    assert t5_bucket(-dist, False, 32, 128).tolist() == [15, 16, 17, 21, 26, 31, 31]
    # RoPE (with and without xPos): q.k depends on positions only through their
    # difference; the norm of a rotated vector is kept without xPos.
    gen = torch.Generator().manual_seed(5)
    for inter, frac, sb in ((False, 0.5, None), (True, 1.0, None), (True, 1.0, 16.0), (False, 0.75, 8.0)):
        cfg = dict(d_kv=8, rotary_emb_fraction=frac, rotary_base=100.0, rotary_interleaved=inter,
                   rotary_scale_base=sb)
        q = torch.randn(1, 1, 8, generator=gen)
        k = torch.randn(1, 1, 8, generator=gen)
        scores = []
        for shift in (0, 5, 37):
            pq, pk = torch.tensor([7 + shift]), torch.tensor([3 + shift])
            scores.append((rope_apply(q, cfg, pq, False) * rope_apply(k, cfg, pk, True)).sum())
        assert close(scores[0], scores[1], 1e-5, 1e-5) and close(scores[0], scores[2], 1e-5, 1e-5), scores
        if sb is None:
            assert close(rope_apply(q, cfg, torch.tensor([11]), False).norm(), q.norm(), 1e-6, 1e-6)
        rd = int(8 * frac)
        assert torch.equal(rope_apply(q, cfg, torch.tensor([11]), False)[..., rd:], q[..., rd:])
    print("posenc: formula checks passed (ALiBi slopes, T5 buckets, RoPE/xPos relative invariance)")


def fat5_to_hf_name(name):
    """FAT5 parameter name -> Hugging Face T5 name (spec §7, inverted)."""
    dec = name.startswith("decoder.")
    rules = [
        ("self_attention_layer.self_attention.pe_encoding.relative_attention_bias",
         "layer.0.SelfAttention.relative_attention_bias"),
        ("self_attention_layer.self_attention.Wq", "layer.0.SelfAttention.q"),
        ("self_attention_layer.self_attention.Wk", "layer.0.SelfAttention.k"),
        ("self_attention_layer.self_attention.Wv", "layer.0.SelfAttention.v"),
        ("self_attention_layer.self_attention.o", "layer.0.SelfAttention.o"),
        ("self_attention_layer.layer_norm", "layer.0.layer_norm"),
        ("cross_attention_layer.cross_attention.Wq", "layer.1.EncDecAttention.q"),
        ("cross_attention_layer.cross_attention.Wk", "layer.1.EncDecAttention.k"),
        ("cross_attention_layer.cross_attention.Wv", "layer.1.EncDecAttention.v"),
        ("cross_attention_layer.cross_attention.o", "layer.1.EncDecAttention.o"),
        ("cross_attention_layer.layer_norm", "layer.1.layer_norm"),
        ("ff_layer.layer_norm", "layer.2.layer_norm" if dec else "layer.1.layer_norm"),
        ("ff_layer.act.", "layer.2.DenseReluDense." if dec else "layer.1.DenseReluDense."),
        ("ff_layer.wo", "layer.2.DenseReluDense.wo" if dec else "layer.1.DenseReluDense.wo"),
    ]
    for old, new in rules:
        if old in name:
            return name.replace(old, new)
    return name


def posenc_check_t5_against_hf(params, cfg, batch, logits, loss, grads):
    """The t5-bucket fixture through transformers' T5 with the same weights."""
    hf_cfg = dict(
        vocab_size=cfg["vocab_size"], d_model=cfg["d_model"], d_kv=cfg["d_kv"], num_heads=cfg["num_heads"],
        d_ff=cfg["d_ff"], num_layers=cfg["num_layers"], num_decoder_layers=cfg["num_decoder_layers"],
        relative_attention_num_buckets=cfg["relative_attention_num_buckets"],
        relative_attention_max_distance=cfg["relative_attention_max_distance"],
        layer_norm_epsilon=cfg["layer_norm_epsilon"],
        feed_forward_proj="gated-gelu", tie_word_embeddings=False,
    )
    model = build_model({"model": "t5", "seed": 0, "config": hf_cfg})
    state = {fat5_to_hf_name(k): v.detach() for k, v in trainable(params).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all("embed_tokens" in m for m in missing), missing
    model.zero_grad(set_to_none=True)
    hf_logits, hf_loss = run_batch(model, batch, with_grad=True)
    hf_loss.backward()
    assert close(hf_logits, logits, 1e-5, 1e-5), (hf_logits - logits).abs().max()
    assert close(hf_loss, loss, 1e-6, 1e-6)
    hf_params = dict(model.named_parameters())
    for k, g in grads.items():
        assert close(hf_params[fat5_to_hf_name(k)].grad, g), k
    print("posenc_t5: logits, loss and every gradient match transformers' T5ForConditionalGeneration")


# ----- fixture writing ---------------------------------------------------------------


def write_config(path, cfg):
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def make_posenc_fixture(spec, out_root):
    name = spec["name"]
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    for entry in os.listdir(out_dir):
        path = os.path.join(out_dir, entry)
        if os.path.isfile(path):
            os.remove(path)

    cfg = posenc_config(spec)
    params = posenc_init(cfg, spec["seed"])
    batch = make_batch({"seed": spec["seed"], "inputs": POSENC_INPUTS, "labels": POSENC_LABELS},
                       cfg["vocab_size"])

    # the reference: every row run on its own; then the same batch packed
    logits, loss, grads = posenc_loss_and_grads(params, cfg, batch, one_by_one=True)
    p_logits, p_loss, p_grads = posenc_loss_and_grads(params, cfg, batch, one_by_one=False)
    assert close(p_logits, logits, 1e-5, 1e-5), f"{name}: packed logits differ from one-by-one"
    assert close(p_loss, loss, 1e-6, 1e-6)
    for k in grads:
        assert close(p_grads[k], grads[k]), f"{name}: packed gradient of {k} differs from one-by-one"
    for k, g in grads.items():
        assert torch.isfinite(g).all(), f"{name}: non-finite gradient {k}"
        assert g.abs().max() > 0, f"{name}: zero gradient for {k}"

    labels = packed_labels(batch)
    loss_zs = z_smoothed_loss(logits, labels)
    write_batch(os.path.join(out_dir, "batch.json"), batch)
    write_config(os.path.join(out_dir, "config.json"), cfg)
    model_path = os.path.join(out_dir, "model.safetensors")
    save_file({k: v.detach().contiguous() for k, v in params.items()}, model_path, metadata={"format": "pt"})
    canonicalise_header(model_path)

    ref_path = write_reference(out_dir, name, logits, loss, loss_zs, grads,
                               reference="ref/make_reference.py --posenc (PyTorch, formulas; rows run one by one)",
                               torch_version=torch.__version__)

    # the files on disk reproduce the stored values exactly
    with open(os.path.join(out_dir, "config.json")) as f:
        cfg2 = json.load(f)
    params2 = {k: (v.clone().requires_grad_(True) if v.is_floating_point() else v.clone())
               for k, v in load_file(model_path).items()}
    assert set(params2) == set(params)
    logits2, loss2, grads2 = posenc_loss_and_grads(params2, cfg2, read_batch(os.path.join(out_dir, "batch.json")),
                                                   one_by_one=True)
    assert torch.equal(logits2, logits) and loss2.item() == loss.item(), \
        f"{name}: reload differs ({(logits2 - logits).abs().max().item():g}, {loss2.item() - loss.item():g})"
    assert all(torch.equal(grads2[k], grads[k]) for k in grads)
    ref = load_file(ref_path)
    assert set(ref) == {"logits", "loss", "loss_zs"} | {"grad." + k for k in grads}
    if pe_kind(cfg) == "t5":
        posenc_check_t5_against_hf(params, cfg, batch, logits, loss, grads)

    sizes = {f: os.path.getsize(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
    print(f"{name}: loss {loss.item():.6f} loss_zs {loss_zs.item():.6f} label tokens {len(labels)} "
          f"params {len(params)} grads {len(grads)}  files {sizes} total {sum(sizes.values())}")


# ---------------------------------------------------------------------------
# LongT5 fixtures (--longt5)
#
# transformers' LongT5ForConditionalGeneration with a local or a transient-global
# encoder.  The reference is every row run alone (batch size 1, no padding),
# which is what a packed run (positions restarting per row, no attention across
# rows) must reproduce.  Semantics: docs/longt5_notes.md.

LONGT5_SHAPES = dict(
    vocab_size=40, d_model=8, d_kv=4, num_heads=3, d_ff=16,
    num_layers=2, num_decoder_layers=2,
    # block_len = local_radius + 1 = 5; global_block_size 4 differs from it on purpose
    local_radius=4, global_block_size=4,
    # 8 buckets, max distance 8: every reachable bidirectional bucket (0-3, 5-7) occurs
    # inside the local window (|j - i| <= 4); the decoder's 19 labels reach the last causal bucket
    relative_attention_num_buckets=8, relative_attention_max_distance=8,
    feed_forward_proj="gated-gelu", tie_word_embeddings=False,
)
# Encoder lengths: none a multiple of the block length 5 or of the global block
# size 4.  21 -> 5 local blocks (last holds 1 token), 5 global blocks + 1 orphan;
# 6 -> 2 local blocks, 1 global block + 2 orphans; 13 -> 3 local blocks, 3 global
# blocks + 1 orphan; 3 -> 1 local block and no global block at all (3 < 4).
LONGT5_INPUTS = [21, 6, 13, 3]
LONGT5_LABELS = [(19, [4, 18]), (1, []), (9, [2]), (5, [3])]

LONGT5_FIXTURES = [
    {"name": "longt5_local", "model": "longt5", "seed": 3001,
     "config": dict(LONGT5_SHAPES, encoder_attention_type="local"),
     "inputs": LONGT5_INPUTS, "labels": LONGT5_LABELS},
    {"name": "longt5_tglobal", "model": "longt5", "seed": 3002,
     "config": dict(LONGT5_SHAPES, encoder_attention_type="transient-global"),
     "inputs": LONGT5_INPUTS, "labels": LONGT5_LABELS},
]


def is_longt5(model):
    return getattr(model.config, "model_type", None) == "longt5"


def run_rows_alone(model, batch, with_grad=False):
    """Every row as its own batch of one (no padding); returns (packed logits, loss).

    loss is the mean cross-entropy over every non-ignored label of every row,
    i.e. the loss of the packed batch; its gradient is the packed gradient."""
    with torch.set_grad_enabled(with_grad):
        logits = torch.cat([run_batch(model, {"inputs": [x], "labels": [y]}, with_grad)[0]
                            for x, y in zip(batch["inputs"], batch["labels"])], dim=0)
        loss = F.cross_entropy(logits, packed_labels(batch), ignore_index=IGNORE)
    return logits, loss


def reference_run(model, batch, with_grad=False):
    """The reference forward of a fixture: rows alone for LongT5, else the padded batch."""
    return run_rows_alone(model, batch, with_grad) if is_longt5(model) else run_batch(model, batch, with_grad)


def longt5_encoder_formula(model, inputs):
    """LongT5's encoder written from the formulas of docs/longt5_notes.md on a
    packed batch (rows concatenated, positions restarting at 0, no attention
    across rows); transformers supplies only the weights.  Returns the final
    (normed) encoder states [total tokens, d_model]."""
    cfg = model.config
    p = {k: v.detach() for k, v in model.named_parameters()}
    eps, H, dk = cfg.layer_norm_epsilon, cfg.num_heads, cfg.d_kv
    r, g = cfg.local_radius, cfg.global_block_size
    tglobal = cfg.encoder_attention_type == "transient-global"
    att = "TransientGlobalSelfAttention" if tglobal else "LocalSelfAttention"
    nb, md = cfg.relative_attention_num_buckets, cfg.relative_attention_max_distance

    ids, pos, seg = pack(inputs)
    n_tok = len(ids)
    # local band: same row and |pos_j - pos_i| <= local_radius
    rel = pos[None, :] - pos[:, None]
    band = (seg[:, None] == seg[None, :]) & (rel.abs() <= r)
    local_bias = p[f"encoder.block.0.layer.0.{att}.relative_attention_bias.weight"][
        t5_bucket(rel, True, nb, md)].permute(2, 0, 1)                       # [H, T, T]

    if tglobal:
        # global blocks of each row: G = n // g; token -> min(pos // g, G - 1)
        # (orphans of the last partial block join the last full block; G = 0: none)
        gseg, gpos = [], []
        own = torch.zeros(n_tok, dtype=torch.long)              # block id of a token within its row
        tok_blk = torch.full((n_tok,), -1, dtype=torch.long)    # index of that global in the batch (-1: none)
        start = 0
        for b, row in enumerate(inputs):
            n = len(row)
            G = n // g
            if G > 0:
                own[start:start + n] = torch.clamp(torch.arange(n) // g, max=G - 1)
                tok_blk[start:start + n] = len(gseg) + own[start:start + n]
            gseg += [b] * G
            gpos += list(range(G))
            start += n
        gseg, gpos = torch.tensor(gseg, dtype=torch.long), torch.tensor(gpos, dtype=torch.long)
        n_glob = len(gseg)
        side_rel = gpos[None, :] - own[:, None]                              # global k - block(i)
        side_mask = seg[:, None] == gseg[None, :]
        side_bias = p["encoder.block.0.layer.0.TransientGlobalSelfAttention.global_relative_attention_bias.weight"][
            t5_bucket(side_rel, True, nb, md)].permute(2, 0, 1)              # [H, T, n_glob]
        member = (tok_blk[None, :] == torch.arange(n_glob)[:, None]).float()  # [n_glob, T]

    h = p["shared.weight"][ids]
    for i in range(cfg.num_layers):
        a = f"encoder.block.{i}.layer.0.{att}."
        x = rms_norm(h, p[f"encoder.block.{i}.layer.0.layer_norm.weight"], eps)
        q = (x @ p[a + "q.weight"].t()).view(n_tok, H, dk).transpose(0, 1)
        k = (x @ p[a + "k.weight"].t()).view(n_tok, H, dk).transpose(0, 1)
        v = (x @ p[a + "v.weight"].t()).view(n_tok, H, dk).transpose(0, 1)
        s = (q @ k.transpose(1, 2) + local_bias).masked_fill(~band, float("-inf"))  # no 1/sqrt(d_kv)
        if tglobal:
            xg = rms_norm(member @ x, p[a + "global_input_layer_norm.weight"], eps)   # sums of normed x
            kg = (xg @ p[a + "k.weight"].t()).view(n_glob, H, dk).transpose(0, 1)
            vg = (xg @ p[a + "v.weight"].t()).view(n_glob, H, dk).transpose(0, 1)
            sg = (q @ kg.transpose(1, 2) + side_bias).masked_fill(~side_mask, float("-inf"))
            w = torch.softmax(torch.cat([s, sg], dim=-1), dim=-1)
            out = w[..., :n_tok] @ v + w[..., n_tok:] @ vg
        else:
            out = torch.softmax(s, dim=-1) @ v
        h = h + out.transpose(0, 1).reshape(n_tok, H * dk) @ p[a + "o.weight"].t()
        f = f"encoder.block.{i}.layer.1."
        x = rms_norm(h, p[f + "layer_norm.weight"], eps)
        gate = F.gelu(x @ p[f + "DenseReluDense.wi_0.weight"].t(), approximate="tanh")
        h = h + (gate * (x @ p[f + "DenseReluDense.wi_1.weight"].t())) @ p[f + "DenseReluDense.wo.weight"].t()
    return rms_norm(h, p["encoder.final_layer_norm.weight"], eps)


def longt5_check_encoder_formula(model, batch):
    """The packed formula encoder against transformers' encoder run row by row."""
    with torch.no_grad():
        got = longt5_encoder_formula(model, batch["inputs"])
        want = torch.cat([model.encoder(input_ids=torch.tensor([x])).last_hidden_state[0]
                          for x in batch["inputs"]], dim=0)
    diff = (got - want).abs().max().item()
    assert close(got, want, 1e-5, 1e-5), f"formula encoder differs from transformers ({diff:g})"
    return diff


def make_longt5_fixture(spec, out_root):
    name = spec["name"]
    out_dir = os.path.join(out_root, name)
    clean_dir(out_dir)

    model = build_model(spec)
    assert is_longt5(model) and model.config.encoder_attention_type == spec["config"]["encoder_attention_type"]
    with torch.no_grad():  # HF initialises the bias tables with std d_model^-0.5; make them count
        for pname, param in model.named_parameters():
            if "relative_attention_bias" in pname:
                param.mul_(3.0)
    batch = make_batch(spec, model.config.vocab_size)
    write_batch(os.path.join(out_dir, "batch.json"), batch)

    model.save_pretrained(out_dir, safe_serialization=True)
    saved = keep_fixture_files(out_dir)
    assert "shared.weight" in saved and "lm_head.weight" in saved, f"{name}: untied weights missing"

    # the reference: every row alone, concatenated; loss and gradients of the packed mean
    logits, loss, loss_zs, grads = forward_backward(model, batch, saved, name, run_rows_alone)
    for pname, g in grads.items():
        assert torch.isfinite(g).all() and g.abs().max() > 0, f"{name}: bad gradient for {pname}"

    # the same rows as one right-padded batch with attention_mask: logits of the
    # real tokens, the loss and every gradient agree with the rows run alone
    model.zero_grad(set_to_none=True)
    p_logits, p_loss = run_batch(model, batch, with_grad=True)
    p_loss.backward()
    pad_diff = (p_logits.detach() - logits).abs().max().item()
    grad_diff = max((model.get_parameter(k).grad - g).abs().max().item() for k, g in grads.items())
    print(f"{name}: padded batch vs rows alone: max |logits diff| {pad_diff:.3e}, "
          f"|loss diff| {abs(p_loss.item() - loss.item()):.3e}, max |grad diff| {grad_diff:.3e}")
    assert close(p_logits.detach(), logits, 1e-5, 1e-5), f"{name}: padded logits differ ({pad_diff:g})"
    assert close(p_loss.detach(), loss.detach(), 1e-6, 1e-6)
    for k, g in grads.items():
        assert close(model.get_parameter(k).grad, g), f"{name}: padded gradient of {k} differs"
    model.zero_grad(set_to_none=True)

    # the encoder written from the notes' formulas, packed, against transformers
    enc_diff = longt5_check_encoder_formula(model, batch)
    print(f"{name}: packed formula encoder vs transformers row by row: max |diff| {enc_diff:.3e}")

    ref_path = write_reference(out_dir, name, logits, loss, loss_zs, grads,
                               reference="ref/make_reference.py --longt5 (transformers; rows run one by one)",
                               transformers_version=transformers.__version__, torch_version=torch.__version__)
    assert set(load_file(ref_path)) == {"logits", "loss", "loss_zs"} | {"grad." + k for k in grads}

    # the files on disk reproduce the stored values exactly
    reloaded = load_model(out_dir)
    assert is_longt5(reloaded) and not reloaded.config.scale_decoder_outputs
    assert reloaded.lm_head.weight is not reloaded.shared.weight
    reloaded.zero_grad(set_to_none=True)
    again, again_loss = reference_run(reloaded, read_batch(os.path.join(out_dir, "batch.json")), with_grad=True)
    again_loss.backward()
    if not torch.equal(again.detach(), logits):
        diff = (again.detach() - logits).abs().max().item()
        raise AssertionError(f"{name}: reloaded model gives different logits (max abs diff {diff:g})")
    assert again_loss.item() == loss.item()
    for k, g in grads.items():
        assert torch.equal(reloaded.get_parameter(k).grad, g), f"{name}: reloaded gradient of {k} differs"

    sizes = {f: os.path.getsize(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
    print(f"{name}: loss {loss.item():.6f} loss_zs {loss_zs.item():.6f} label tokens {logits.shape[0]} "
          f"grads {len(grads)}  files {sizes} total {sum(sizes.values())}")


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
    parser.add_argument("--longt5", action="store_true",
                        help="write the LongT5 fixtures <out>/longt5_local/ and <out>/longt5_tglobal/")
    parser.add_argument("--posenc", action="store_true",
                        help="write the position-encoding fixtures <out>/posenc_<name>/ (FAT5 names)")
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
    if args.posenc:
        names = {f["name"] for f in POSENC_FIXTURES}
        for only in args.only or []:
            if only not in names:
                parser.error(f"unknown position-encoding fixture {only!r}; known: {sorted(names)}")
        posenc_formula_checks()
        for spec in POSENC_FIXTURES:
            if not args.only or spec["name"] in args.only:
                make_posenc_fixture(spec, args.out)
        return
    if args.longt5:
        names = {f["name"] for f in LONGT5_FIXTURES}
        for only in args.only or []:
            if only not in names:
                parser.error(f"unknown LongT5 fixture {only!r}; known: {sorted(names)}")
        for spec in LONGT5_FIXTURES:
            if not args.only or spec["name"] in args.only:
                make_longt5_fixture(spec, args.out)
        return
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
