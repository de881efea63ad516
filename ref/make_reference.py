#!/usr/bin/env python3
"""Reference fixtures for fat5.h, produced with Hugging Face transformers (and, for the
position encodings, with a small PyTorch T5 written here).

Eight modes:

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

      The oracles for the other generate options (forced/suppressed/bad tokens, sequence
      bias, encoder penalties, decoder prefixes, group and constrained beam search, the
      sampling filters...) are written by ref/make_generate_options.py into
      ``generate_options.json`` and ``generate_warpers.json``; see its docstring.

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

  make_reference.py --heads [--out tests/data] [--only heads_<name>]
      Task-head fixtures ``<out>/heads_<name>/``: transformers'
      T5/MT5/UMT5ForSequenceClassification, -ForTokenClassification,
      -ForQuestionAnswering and T5/UMT5EncoderModel (fp32, eager, CPU), files as
      in the first mode with the class's own names.  batch.json holds "inputs"
      (every row ending with EOS) and the targets: "labels" (sequence
      classification: one int per row, -100 ignored; multi-label: [rows][num_labels]
      floats 0/1; regression: one float per row; token classification: one int
      per token, -100 ignored) or "start_positions" / "end_positions" (one int per
      row; a position clamped to the row's length is ignored).  The reference is
      every row run alone (batch size 1, no padding), concatenated in row order:
      ``logits`` is [rows, num_labels] (sequence classification), [tokens,
      num_labels] (token classification), [tokens, 2] (question answering:
      start, end) or [tokens, d_model] (encoder: last_hidden_state); ``loss`` is
      HF's loss formula over the whole batch from those outputs (CE mean over
      non-ignored rows / tokens, BCE-with-logits mean over rows x labels, MSE
      mean over rows; QA: (start_loss + end_loss) / 2, each the mean over the
      rows whose position is not ignored of the CE over the row's own
      positions; encoder: sum(last_hidden_state * grad_output) with the F32
      ``grad_output`` [tokens, d_model] stored beside it), and ``grad.<name>``
      its gradient for every parameter of ``named_parameters()`` (the shared
      embedding once, under its saved name).  The script asserts that the loss
      formula on one row equals the loss HF's forward returns for that row, and
      that the rows as one right-padded batch with attention_mask give the same
      outputs (and, for classification, the same loss).  Label names are in
      config.json's id2label / label2id (num_labels is not written: transformers
      derives it from id2label; question answering has neither and gets 2).

  make_reference.py --check-head DIR --against tests/data/heads_<name>
      Load DIR (e.g. a head model written by fat5) with AutoConfig and the class
      named in its config.json ``architectures``, run the fixture's rows alone as
      above and compare logits and loss with the fixture's reference.safetensors
      (fails when the max abs difference exceeds 1e-4 times the reference's max
      abs value); also checks that architectures, id2label, label2id and
      problem_type equal the fixture's config.json.

The --check and --check-logits modes print max abs / max rel differences and exit
with status 1 when some value fails |a - b| <= 1e-5 + 1e-4 * |b| (b = the
reference side); --check-head exits with status 1 on any failure it prints.

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
  * In the head classes the stacks' ``embed_tokens`` are aliases of the shared
    embedding as long as ``config.tie_word_embeddings`` is True when the model
    is built (the configs force it; setting the attribute to False before
    building gives the stacks their own, separately initialised embeddings).
    save_pretrained then writes only ``shared.weight`` (``transformer.shared.weight``
    in the sequence- and token-classification classes); a config.json saying
    ``tie_word_embeddings: false`` still loads tied, and extra identical
    ``encoder.embed_tokens.weight`` copies in the file are accepted.
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
    AutoConfig,
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
    """The generated ids up to and including the first EOS (HF pads after it); eos: an id or a list."""
    eos_ids = eos if isinstance(eos, (list, tuple)) else [eos]
    out = []
    for t in ids:
        out.append(int(t))
        if t in eos_ids:
            break
    return out


def chosen_scores(out, outputs, beam):
    """Beam search: sequences_scores; else each row's summed log-probabilities of its chosen tokens
    after the processors (log_softmax of out.scores, in double)."""
    if beam:
        return [float(x) for x in out.sequences_scores.tolist()]
    scores = []
    for b, row in enumerate(outputs):
        total = 0.0
        for t, tok in enumerate(row):
            total += float(F.log_softmax(out.scores[t][b].double(), dim=-1)[tok])
        scores.append(total)
    return scores


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
        scores = chosen_scores(out, outputs, opts.get("num_beams", 1) > 1)
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


# ---------------------------------------------------------------------------
# task-head fixtures (--heads, --check-head)
#
# transformers' T5-family task heads.  The reference is every row run alone
# (batch size 1, no padding, no attention mask), outputs concatenated in row
# order, which is what a packed run (rows back to back, positions restarting,
# no attention across rows) must reproduce.  The script checks that the rows as
# one right-padded batch with attention_mask give the same outputs.
#
# What each class computes (transformers 5.x):
#   *ForSequenceClassification: the full encoder-decoder (T5Model / UMT5Model);
#     the decoder input is the encoder input shifted right (decoder start token
#     0 first, the last token dropped); the decoder's final hidden state at the
#     row's last EOS position goes through classification_head: out_proj(tanh(dense(h))).
#   *ForTokenClassification: the encoder only; classifier(h) at every token.
#   *ForQuestionAnswering: the full encoder-decoder, decoder input shifted right
#     as above; qa_outputs(h) at every decoder position: column 0 start, 1 end.
#   *EncoderModel: the encoder's last_hidden_state (after the final RMSNorm).

HEADS_T5_V11 = dict(
    vocab_size=80, d_model=32, d_kv=12, num_heads=2, d_ff=48,
    num_layers=2, num_decoder_layers=2,
    relative_attention_num_buckets=16, relative_attention_max_distance=24,
    feed_forward_proj="gated-gelu", tie_word_embeddings=False,
)
HEADS_T5_V10 = dict(
    vocab_size=80, d_model=32, d_kv=8, num_heads=3, d_ff=64,
    num_layers=2, num_decoder_layers=2,
    relative_attention_num_buckets=8, relative_attention_max_distance=20,
    feed_forward_proj="relu", tie_word_embeddings=True,
)
HEADS_MT5 = dict(
    vocab_size=84, d_model=32, d_kv=8, num_heads=2, d_ff=48,
    num_layers=2, num_decoder_layers=2,
    relative_attention_num_buckets=16, relative_attention_max_distance=24,
    feed_forward_proj="gated-gelu", tie_word_embeddings=False,
)
HEADS_UMT5 = dict(
    vocab_size=76, d_model=32, d_kv=8, num_heads=3, d_ff=48,
    num_layers=2, num_decoder_layers=2,
    relative_attention_num_buckets=8, relative_attention_max_distance=16,
    feed_forward_proj="gated-silu", tie_word_embeddings=False,
)
# Row lengths: 30 > every max_distance; 3 is shorter than the exact buckets.
HEADS_INPUTS = [30, 12, 3, 20]

# Each fixture: transformers config and model class (by name), the head kind
# ("seqcls", "tokcls", "qa", "encoder"), the label names (id2label order) and
# the config fields of the architecture.
HEADS_FIXTURES = [
    {"name": "heads_t5_seqcls", "config_class": "T5Config", "class": "T5ForSequenceClassification",
     "head": "seqcls", "seed": 4001, "labels": ["NEG", "NEU", "POS"],
     "config": dict(HEADS_T5_V11, problem_type="single_label_classification")},
    {"name": "heads_mt5_seqcls_multi", "config_class": "MT5Config", "class": "MT5ForSequenceClassification",
     "head": "seqcls", "seed": 4002, "labels": ["SPORT", "POLITICS", "SCIENCE", "ARTS"],
     "config": dict(HEADS_MT5, problem_type="multi_label_classification")},
    {"name": "heads_umt5_seqcls_reg", "config_class": "UMT5Config", "class": "UMT5ForSequenceClassification",
     "head": "seqcls", "seed": 4003, "labels": ["SCORE"],
     "config": dict(HEADS_UMT5, problem_type="regression")},
    {"name": "heads_t5_tokcls", "config_class": "T5Config", "class": "T5ForTokenClassification",
     "head": "tokcls", "seed": 4004, "labels": ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"],
     "config": dict(HEADS_T5_V10)},
    {"name": "heads_umt5_tokcls", "config_class": "UMT5Config", "class": "UMT5ForTokenClassification",
     "head": "tokcls", "seed": 4005, "labels": ["O", "B-ORG", "I-ORG"],
     "config": dict(HEADS_UMT5)},
    {"name": "heads_t5_qa", "config_class": "T5Config", "class": "T5ForQuestionAnswering",
     "head": "qa", "seed": 4006, "labels": None, "config": dict(HEADS_T5_V11)},
    {"name": "heads_mt5_qa", "config_class": "MT5Config", "class": "MT5ForQuestionAnswering",
     "head": "qa", "seed": 4007, "labels": None, "config": dict(HEADS_MT5)},
    {"name": "heads_t5_encoder", "config_class": "T5Config", "class": "T5EncoderModel",
     "head": "encoder", "seed": 4008, "labels": None, "config": dict(HEADS_T5_V11, d_ff=64)},
    {"name": "heads_umt5_encoder", "config_class": "UMT5Config", "class": "UMT5EncoderModel",
     "head": "encoder", "seed": 4009, "labels": None, "config": dict(HEADS_UMT5, d_ff=64)},
    {"name": "heads_mt5_tokcls", "config_class": "MT5Config", "class": "MT5ForTokenClassification",
     "head": "tokcls", "seed": 4010, "labels": ["O", "B-MISC", "I-MISC", "B-LOC"],
     "config": dict(HEADS_MT5)},
    {"name": "heads_mt5_encoder", "config_class": "MT5Config", "class": "MT5EncoderModel",
     "head": "encoder", "seed": 4011, "labels": None, "config": dict(HEADS_MT5)},
    {"name": "heads_umt5_qa", "config_class": "UMT5Config", "class": "UMT5ForQuestionAnswering",
     "head": "qa", "seed": 4012, "labels": None, "config": dict(HEADS_UMT5)},
]
for _spec in HEADS_FIXTURES:
    _spec["inputs"] = HEADS_INPUTS


def head_kind(class_name):
    """The head kind of a transformers class name ("seqcls", "tokcls", "qa" or "encoder")."""
    for suffix, kind in (("ForSequenceClassification", "seqcls"), ("ForTokenClassification", "tokcls"),
                         ("ForQuestionAnswering", "qa"), ("EncoderModel", "encoder")):
        if class_name.endswith(suffix):
            return kind
    raise ValueError(f"{class_name}: not a T5 task-head class")


def heads_build_model(spec):
    """A freshly initialised fp32 head model, deterministic for the spec's seed.

    The RMSNorm scales (HF: exactly 1) and every bias of the head (HF: exactly 0)
    are randomised so that a reader which skips them fails."""
    config_cls = getattr(transformers, spec["config_class"])
    model_cls = getattr(transformers, spec["class"])
    cfg = dict(spec["config"], dropout_rate=0.0, classifier_dropout=0.0, decoder_start_token_id=PAD)
    if spec["labels"]:
        cfg["id2label"] = {i: name for i, name in enumerate(spec["labels"])}
        cfg["label2id"] = {name: i for i, name in enumerate(spec["labels"])}
    elif spec["head"] == "qa":
        cfg["num_labels"] = 2
    # T5Config/MT5Config/UMT5Config force tie_word_embeddings = True whatever is
    # passed, which keeps encoder.embed_tokens and decoder.embed_tokens aliases
    # of shared.weight (these classes have no lm_head).  Setting the attribute
    # to False before building the model would give the stacks their own
    # embeddings, so it is left alone.
    config = config_cls(**cfg)
    assert config.tie_word_embeddings, f"{spec['name']}: config is not tied"
    torch.manual_seed(spec["seed"])
    model = model_cls._from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
            elif name.endswith(".bias"):
                param.copy_(0.2 * torch.randn_like(param))
    heads_check_tied(model, spec["name"])
    return model.float().eval()


def heads_check_tied(model, what):
    """Every token embedding of the model is the one shared Parameter."""
    shared = model.get_input_embeddings().weight
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and "relative_attention_bias" not in name:
            assert module.weight is shared, f"{what}: {name} is not tied to the shared embedding"


def heads_make_batch(spec, config):
    """Random rows (ids 2..V-1, EOS last) of spec["inputs"] lengths and the head's targets."""
    gen = torch.Generator().manual_seed(spec["seed"] + 7)
    inputs = []
    for n in spec["inputs"]:
        ids = torch.randint(2, config.vocab_size, (n,), generator=gen).tolist()
        ids[-1] = EOS
        inputs.append(ids)
    batch = {"inputs": inputs}
    head, rows, n_labels = spec["head"], len(inputs), config.num_labels
    if head == "seqcls":
        problem = config.problem_type
        if problem == "single_label_classification":
            labels = torch.randint(0, n_labels, (rows,), generator=gen).tolist()
            labels[2] = IGNORE  # one row left out of the mean
        elif problem == "multi_label_classification":
            labels = torch.randint(0, 2, (rows, n_labels), generator=gen).float().tolist()
        else:  # regression: 3 decimals, exactly what the JSON says
            labels = [round(v, 3) for v in (1.5 * torch.randn(rows, generator=gen)).tolist()]
        batch["labels"] = labels
    elif head == "tokcls":
        labels = []
        for ids in inputs:
            row = torch.randint(0, n_labels, (len(ids),), generator=gen)
            row[torch.rand(len(ids), generator=gen) < 0.2] = IGNORE
            labels.append(row.tolist())
        labels[0][-1] = IGNORE  # the EOS of row 0
        labels[2][0] = IGNORE
        batch["labels"] = labels
    elif head == "qa":
        starts, ends = [], []
        for ids in inputs:
            n = len(ids)
            s = int(torch.randint(0, n, (1,), generator=gen))
            e = int(torch.randint(s, n, (1,), generator=gen))
            starts.append(s)
            ends.append(e)
        starts[1] = len(inputs[1]) + 3  # past the row: clamped to its length, ignored
        ends[3] = len(inputs[3])        # exactly the length: ignored
        batch["start_positions"] = starts
        batch["end_positions"] = ends
    return batch


def heads_write_batch(path, batch):
    """batch.json: one row per line for lists of rows, one line for lists of numbers."""
    parts = []
    for key, value in batch.items():
        if value and isinstance(value[0], list):
            body = ",\n".join("    " + json.dumps(r, separators=(",", ":")) for r in value)
            parts.append('  "%s": [\n%s\n  ]' % (key, body))
        else:
            parts.append('  "%s": %s' % (key, json.dumps(value, separators=(",", ":"))))
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(parts) + "\n}\n")


def heads_row_output(model, head, ids):
    """One row run alone (input_ids [1, n], no mask).  Returns seqcls: [num_labels];
    tokcls: [n, num_labels]; qa: [n, 2] (start, end); encoder: [n, d_model]."""
    x = torch.tensor([ids], dtype=torch.long)
    out = model(input_ids=x)
    if head == "encoder":
        return out.last_hidden_state[0]
    if head == "qa":
        return torch.stack([out.start_logits[0], out.end_logits[0]], dim=-1)
    return out.logits[0]


def heads_pack(head, outputs):
    """Per-row outputs in packed order: seqcls [rows, num_labels], else [total_tokens, C]."""
    return torch.stack(outputs, dim=0) if head == "seqcls" else torch.cat(outputs, dim=0)


def qa_clamped(positions, lengths):
    """HF's clamp(0, ignored_index) per row, ignored_index = the row's length."""
    return [min(max(int(p), 0), n) for p, n in zip(positions, lengths)]


def heads_loss(head, problem_type, outputs, batch, grad_output=None):
    """The batch loss from the per-row outputs, with HF's formulas (fp32):
    seqcls single-label CE (mean over rows whose label is not -100), multi-label
    BCE-with-logits (mean over rows x labels), regression MSE (mean over rows);
    tokcls CE over all tokens (mean over non -100); qa (start_loss + end_loss) / 2
    with each the mean over the rows whose clamped position is not the row's
    length of the CE over the row's own positions; encoder sum(hidden * grad_output)."""
    packed = heads_pack(head, outputs)
    if head == "seqcls":
        if problem_type == "single_label_classification":
            return F.cross_entropy(packed, torch.tensor(batch["labels"], dtype=torch.long), ignore_index=IGNORE)
        if problem_type == "multi_label_classification":
            return F.binary_cross_entropy_with_logits(packed, torch.tensor(batch["labels"], dtype=torch.float32))
        if problem_type == "regression":
            assert packed.shape[1] == 1, "regression fixtures have one label"
            return F.mse_loss(packed[:, 0], torch.tensor(batch["labels"], dtype=torch.float32))
        raise ValueError(f"unknown problem_type {problem_type!r}")
    if head == "tokcls":
        labels = torch.tensor([t for row in batch["labels"] for t in row], dtype=torch.long)
        return F.cross_entropy(packed, labels, ignore_index=IGNORE)
    if head == "qa":
        lengths = [len(r) for r in batch["inputs"]]
        losses = []
        for col, key in ((0, "start_positions"), (1, "end_positions")):
            terms = [F.cross_entropy(out[:, col][None, :], torch.tensor([p]))
                     for out, p, n in zip(outputs, qa_clamped(batch[key], lengths), lengths) if p != n]
            losses.append(torch.stack(terms).mean() if terms else packed.new_tensor(float("nan")))
        return (losses[0] + losses[1]) / 2
    if head == "encoder":
        return (packed * grad_output).sum()
    raise ValueError(f"unknown head {head!r}")


def heads_row_batch(batch, i):
    """Row i of a head batch as a batch of its own."""
    return {k: [v[i]] for k, v in batch.items()}


def heads_check_single_rows(model, head, batch, outputs, name):
    """For each row with targets, the loss formula on the row alone equals the loss
    HF's forward returns when given the labels / positions."""
    checked = 0
    for i, ids in enumerate(batch["inputs"]):
        x = torch.tensor([ids], dtype=torch.long)
        row = heads_row_batch(batch, i)
        if head == "seqcls":
            problem = model.config.problem_type
            if problem == "single_label_classification":
                if row["labels"][0] == IGNORE:
                    continue
                y = torch.tensor(row["labels"], dtype=torch.long)
            else:
                y = torch.tensor(row["labels"], dtype=torch.float32)
            hf = model(input_ids=x, labels=y).loss
        elif head == "tokcls":
            if all(t == IGNORE for t in row["labels"][0]):
                continue
            hf = model(input_ids=x, labels=torch.tensor(row["labels"], dtype=torch.long)).loss
        elif head == "qa":
            n = len(ids)
            if any(p >= n or p < 0 for p in (row["start_positions"][0], row["end_positions"][0])):
                continue
            hf = model(input_ids=x, start_positions=torch.tensor(row["start_positions"]),
                       end_positions=torch.tensor(row["end_positions"])).loss
        else:
            return 0
        mine = heads_loss(head, model.config.problem_type, [outputs[i]], row)
        assert close(mine.detach(), hf.detach(), 1e-6, 1e-6), \
            f"{name}: row {i}: loss formula {mine.item()} != HF's {hf.item()}"
        checked += 1
    assert checked > 0, f"{name}: no row checked against HF's loss"
    return checked


def heads_check_padded(model, head, batch, packed, loss, name):
    """The rows as one right-padded batch with attention_mask: the real positions'
    outputs equal the rows run alone (1e-5), and for seqcls / tokcls HF's loss on
    that batch equals the packed loss.  Returns the max abs logits difference."""
    rows = batch["inputs"]
    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        input_ids[b, : len(r)] = torch.tensor(r)
        mask[b, : len(r)] = 1
    kwargs = {}
    if head == "seqcls":
        dtype = torch.long if model.config.problem_type == "single_label_classification" else torch.float32
        kwargs["labels"] = torch.tensor(batch["labels"], dtype=dtype)
    elif head == "tokcls":
        labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        for b, y in enumerate(batch["labels"]):
            labels[b, : len(y)] = torch.tensor(y)
        kwargs["labels"] = labels
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, **kwargs)
    if head == "encoder":
        full = out.last_hidden_state
    elif head == "qa":
        full = torch.stack([out.start_logits, out.end_logits], dim=-1)
    else:
        full = out.logits
    got = full if head == "seqcls" else torch.cat([full[b, : len(r)] for b, r in enumerate(rows)], dim=0)
    diff = (got - packed).abs().max().item()
    assert close(got, packed, 1e-5, 1e-5), f"{name}: padded batch differs from the rows alone ({diff:g})"
    if "labels" in kwargs:
        assert close(out.loss, loss.detach(), 1e-5, 1e-5), \
            f"{name}: HF's padded-batch loss {out.loss.item()} != packed loss {loss.item()}"
    return diff


def heads_run(model, head, batch, grad_output=None, with_grad=False):
    """Every row alone; returns (per-row outputs, packed outputs, loss)."""
    with torch.set_grad_enabled(with_grad):
        outputs = [heads_row_output(model, head, ids) for ids in batch["inputs"]]
        loss = heads_loss(head, model.config.problem_type, outputs, batch, grad_output)
    return outputs, heads_pack(head, outputs), loss


def heads_load_model(model_dir):
    """Load a head model directory: AutoConfig, then the class named in the
    config's architectures, fp32, eager attention."""
    with open(os.path.join(model_dir, "config.json")) as f:
        raw = json.load(f)
    archs = raw.get("architectures") or []
    if len(archs) != 1:
        raise ValueError(f"{model_dir}/config.json: architectures must name one class, got {archs!r}")
    model_cls = getattr(transformers, archs[0], None)
    if model_cls is None:
        raise ValueError(f"{model_dir}/config.json: architectures names {archs[0]!r}, not a transformers class")
    config = AutoConfig.from_pretrained(model_dir)
    ensure_start_token(config)
    try:
        model = model_cls.from_pretrained(model_dir, config=config, attn_implementation="eager", **fp32_kwargs())
    except (TypeError, ValueError):
        model = model_cls.from_pretrained(model_dir, config=config, **fp32_kwargs())
    return model.float().eval(), raw


def make_heads_fixture(spec, out_root):
    name, head = spec["name"], spec["head"]
    out_dir = os.path.join(out_root, name)
    clean_dir(out_dir)

    model = heads_build_model(spec)
    assert type(model).__name__ == spec["class"] and head_kind(spec["class"]) == head
    batch = heads_make_batch(spec, model.config)
    heads_write_batch(os.path.join(out_dir, "batch.json"), batch)

    model.save_pretrained(out_dir, safe_serialization=True)
    saved = keep_fixture_files(out_dir)
    with open(os.path.join(out_dir, "config.json")) as f:
        raw = json.load(f)
    assert raw["architectures"] == [spec["class"]], f"{name}: architectures {raw['architectures']}"

    total = sum(len(r) for r in batch["inputs"])
    grad_output = None
    if head == "encoder":
        gen = torch.Generator().manual_seed(spec["seed"] + 11)
        grad_output = torch.randn(total, model.config.d_model, generator=gen)  # [total_tokens, d_model]

    # the reference: every row alone, one autograd graph over all rows
    model.zero_grad(set_to_none=True)
    outputs, packed, loss = heads_run(model, head, batch, grad_output, with_grad=True)
    loss.backward()
    packed = packed.detach()
    n_out = {"seqcls": model.config.num_labels, "tokcls": model.config.num_labels, "qa": 2,
             "encoder": model.config.d_model}[head]
    assert packed.shape == ((len(batch["inputs"]) if head == "seqcls" else total), n_out), packed.shape
    assert torch.isfinite(loss), f"{name}: loss {loss.item()}"
    grads = {}
    for pname, param in model.named_parameters():  # aliases of the shared embedding come once
        assert pname in saved, f"{name}: parameter {pname} is not in model.safetensors"
        assert param.grad is not None, f"{name}: no gradient for {pname}"
        assert torch.isfinite(param.grad).all() and param.grad.abs().max() > 0, f"{name}: bad gradient for {pname}"
        grads[pname] = param.grad.detach().float().contiguous()
    assert set(grads) == saved, f"{name}: saved tensors without a parameter: {sorted(saved - set(grads))}"
    model.zero_grad(set_to_none=True)

    with torch.no_grad():
        rows_checked = heads_check_single_rows(model, head, batch, [o.detach() for o in outputs], name)
        pad_diff = heads_check_padded(model, head, batch, packed, loss, name)

    tensors = {"logits": packed.contiguous(), "loss": loss.detach().reshape(1)}
    if grad_output is not None:
        tensors["grad_output"] = grad_output.contiguous()
    for k, g in grads.items():
        tensors["grad." + k] = g
    ref_path = os.path.join(out_dir, "reference.safetensors")
    save_file(tensors, ref_path, metadata={
        "name": name, "class": spec["class"], "head": head,
        "problem_type": str(model.config.problem_type), "loss": repr(loss.item()),
        "reference": "ref/make_reference.py --heads (transformers; rows run one by one)",
        "transformers_version": transformers.__version__, "torch_version": torch.__version__})
    canonicalise_header(ref_path)
    assert set(load_file(ref_path)) == set(tensors)

    # the files on disk reproduce the stored values exactly
    reloaded, _ = heads_load_model(out_dir)
    assert type(reloaded).__name__ == spec["class"]
    heads_check_tied(reloaded, name + " (reloaded)")
    assert reloaded.config.id2label == model.config.id2label and reloaded.config.problem_type == model.config.problem_type
    reloaded.zero_grad(set_to_none=True)
    _, again, again_loss = heads_run(reloaded, head, read_heads_batch(os.path.join(out_dir, "batch.json")),
                                     grad_output, with_grad=True)
    again_loss.backward()
    if not torch.equal(again.detach(), packed):
        raise AssertionError(f"{name}: reloaded model gives different outputs "
                             f"(max abs diff {(again.detach() - packed).abs().max().item():g})")
    assert again_loss.item() == loss.item()
    for k, g in grads.items():
        assert torch.equal(reloaded.get_parameter(k).grad, g), f"{name}: reloaded gradient of {k} differs"

    sizes = {f: os.path.getsize(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir))}
    print(f"{name}: {spec['class']} loss {loss.item():.6f} logits {tuple(packed.shape)} grads {len(grads)} "
          f"rows checked against HF's loss {rows_checked}, padded-batch max |diff| {pad_diff:.3e}")
    print(f"  files {sizes} total {sum(sizes.values())}")
    print("  config.json: " + ", ".join(f"{k}={raw.get(k)!r}" for k in (
        "architectures", "id2label", "label2id", "num_labels", "problem_type", "classifier_dropout",
        "tie_word_embeddings", "scale_decoder_outputs", "decoder_start_token_id")))
    print("  model.safetensors (blocks elided): " + ", ".join(
        f"{k} {list(load_file(os.path.join(out_dir, 'model.safetensors'))[k].shape)}"
        for k in sorted(saved) if ".block." not in k or ".block.0." in k))


def read_heads_batch(path):
    """batch.json of a head fixture; checks that every target list has one entry per row."""
    with open(path) as f:
        batch = json.load(f)
    rows = len(batch["inputs"])
    for key, value in batch.items():
        if len(value) != rows:
            raise ValueError(f"{path}: {key} has {len(value)} rows, inputs has {rows}")
    return batch


def check_head(model_dir, fixture_dir):
    """--check-head: DIR's outputs and loss on the fixture's rows against its reference,
    and DIR's label names against the fixture's."""
    batch = read_heads_batch(os.path.join(fixture_dir, "batch.json"))
    ref = load_file(os.path.join(fixture_dir, "reference.safetensors"))
    with open(os.path.join(fixture_dir, "config.json")) as f:
        want = json.load(f)
    model, raw = heads_load_model(model_dir)
    ok = True
    if raw["architectures"] != want["architectures"]:
        print(f"architectures: {raw['architectures']} vs fixture {want['architectures']}  FAIL")
        ok = False
    head = head_kind(raw["architectures"][0])
    for key in ("id2label", "label2id", "problem_type"):
        same = raw.get(key) == want.get(key)
        print(f"{key}: {raw.get(key)!r}{'' if same else ' vs fixture ' + repr(want.get(key))}  {'OK' if same else 'FAIL'}")
        ok &= same
    with torch.no_grad():
        _, packed, loss = heads_run(model, head, batch, ref.get("grad_output"))
    ok &= compare_to_scale("logits", packed, ref["logits"])
    ok &= compare_to_scale("loss", loss.reshape(1), ref["loss"].reshape(1))
    return ok


def compare_to_scale(what, got, ref, rtol=RTOL):
    """Print the max abs diff of got vs ref; True when it is at most rtol times the
    reference's scale (its max abs value, at least 1e-6) and got is finite."""
    got = got.detach().double()
    ref = ref.detach().double()
    if got.shape != ref.shape:
        print(f"{what}: shape {tuple(got.shape)} vs reference {tuple(ref.shape)}  FAIL")
        return False
    scale = max(ref.abs().max().item(), 1e-6)
    diff = (got - ref).abs().max().item()
    ok = bool(torch.isfinite(got).all()) and diff <= rtol * scale
    print(f"{what}: max abs diff {diff:.3e}  reference scale {scale:.3e}  diff/scale {diff / scale:.3e} "
          f"(limit {rtol:g})  {'OK' if ok else 'FAIL'}")
    return ok


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
    parser.add_argument("--heads", action="store_true",
                        help="write the task-head fixtures <out>/heads_<name>/")
    parser.add_argument("--check-head", metavar="DIR",
                        help="head model directory to check against a heads_<name> fixture (with --against)")
    parser.add_argument("--posenc", action="store_true",
                        help="write the position-encoding fixtures <out>/posenc_<name>/ (FAT5 names)")
    args = parser.parse_args()

    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    if args.check:
        if not args.against:
            parser.error("--check needs --against tests/data/<name>")
        sys.exit(0 if check_against_fixture(args.check, args.against) else 1)
    if args.check_head:
        if not args.against:
            parser.error("--check-head needs --against tests/data/heads_<name>")
        sys.exit(0 if check_head(args.check_head, args.against) else 1)
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
    if args.heads:
        names = {f["name"] for f in HEADS_FIXTURES}
        for only in args.only or []:
            if only not in names:
                parser.error(f"unknown head fixture {only!r}; known: {sorted(names)}")
        for spec in HEADS_FIXTURES:
            if not args.only or spec["name"] in args.only:
                make_heads_fixture(spec, args.out)
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
