#!/usr/bin/env python3
"""The Adafactor fixture of fat5.h, produced with transformers.optimization.Adafactor (torch, CPU,
fp32).

    make_adafactor_fixture.py [--out tests/data/adafactor]

writes into the output directory

  config.json, model.safetensors   a tiny randomly initialised T5 (transformers' T5ForConditional
                                   Generation, save_pretrained, fp32) whose parameters cover the
                                   shapes Adafactor treats differently: 2-D tensors (factored second
                                   moments) among them a 1 x 8 (q, k, v with one head of d_kv 1),
                                   an 8 x 1 (o) and a 32 x 1 (the relative-attention bias), and 1-D
                                   tensors (the RMSNorm weights, full second moments)
  adafactor.safetensors            for every case c of CASES (its options in the metadata entry
                                   "case.<c>", JSON; "cases" lists them) and every update t = 1 ..
                                   steps, for every parameter <name> (model.named_parameters()):
                                     c.<c>.t<t>.grad.<name>    the gradient handed to step t
                                     c.<c>.t<t>.param.<name>   the parameter after step t
                                     c.<c>.t<t>.mag.<name>     |update| + |weight_decay * lr * p|
                                                               of step t, element-wise (float64
                                                               norms of the two terms, for the
                                                               test's tolerance)
                                   and the state after the last step:
                                     c.<c>.row.<name>, c.<c>.col.<name>   (2-D: exp_avg_sq_row / _col)
                                     c.<c>.v.<name>                       (1-D: exp_avg_sq)
                                     c.<c>.m.<name>                       (with beta1: exp_avg)

The gradients are seeded normal draws (torch.Generator, seed 1000 c + t) times a per-step scale:
large and tiny steps (a 1e-15 scale, where eps1 = 1e-30 is of the size of g^2) and steps whose
update's RMS exceeds clip_threshold. Weight decay is given as Hugging Face's Trainer groups it:
parameters whose name contains "bias" or "layer_norm" in a group without decay. A case with
relative_step false takes the constant rate "lr".

The C side (tests/test_optim.c, adafactor_fixture) loads the model with fat5, runs fat5's
Adafactor from the same initial weights on the same gradients and compares every step.
"""
import argparse
import json
import math
import os

import torch
from safetensors.torch import save_file
from transformers import T5Config, T5ForConditionalGeneration
from transformers.optimization import Adafactor

# Options as transformers' Adafactor names them; "scales" are the gradient scales of the steps.
CASES = [
    # HF Trainer's optim "adafactor": external rate, no parameter scale, no first moment
    dict(name="trainer", lr=1e-3, relative_step=False, scale_parameter=False, warmup_init=False,
         clip_threshold=1.0, decay_rate=-0.8, beta1=None, weight_decay=0.0, scales=[1.0, 0.1, 30.0, 1.0, 0.01]),
    # the class's defaults: relative step, parameter scale
    dict(name="defaults", lr=None, relative_step=True, scale_parameter=True, warmup_init=False,
         clip_threshold=1.0, decay_rate=-0.8, beta1=None, weight_decay=0.0, scales=[1.0, 2.0, 0.5, 1.0, 1.0]),
    # warm-up init, a first moment, a tighter clip, another decay rate
    dict(name="warmup_beta1", lr=None, relative_step=True, scale_parameter=True, warmup_init=True,
         clip_threshold=0.5, decay_rate=-0.5, beta1=0.9, weight_decay=0.0, scales=[1.0, 10.0, 0.1, 1.0, 3.0]),
    # external rate with parameter scale, first moment and weight decay
    dict(name="scaled_decay", lr=3e-3, relative_step=False, scale_parameter=True, warmup_init=False,
         clip_threshold=1.0, decay_rate=-0.8, beta1=0.8, weight_decay=0.1, scales=[1.0, 0.3, 1.0, 5.0, 1.0]),
    # relative step without parameter scale, weight decay, gradients at eps1's size first
    dict(name="tiny_grads", lr=None, relative_step=True, scale_parameter=False, warmup_init=False,
         clip_threshold=2.0, decay_rate=-0.8, beta1=None, weight_decay=0.05, scales=[1e-15, 1e-15, 1.0, 1e-3, 1.0]),
]

OPTIONS = ("lr", "relative_step", "scale_parameter", "warmup_init", "clip_threshold", "decay_rate", "beta1",
           "weight_decay")


def no_decay(name):
    return "bias" in name or "layer_norm" in name


def tiny_model():
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=20, d_model=8, d_kv=1, num_heads=1, d_ff=6, num_layers=1, num_decoder_layers=1,
                   feed_forward_proj="gated-gelu", tie_word_embeddings=False, relative_attention_num_buckets=32,
                   relative_attention_max_distance=128, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(cfg).float()
    with torch.no_grad():  # weights of visible size everywhere (the norms are initialised to ones)
        g = torch.Generator().manual_seed(7)
        for _, p in model.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.dim() == 1 else 0.0))
    return model


def run_case(model0, idx, case, tensors):
    model = T5ForConditionalGeneration(model0.config).float()
    model.load_state_dict(model0.state_dict())
    named = list(model.named_parameters())
    opts = {k: case[k] for k in OPTIONS}
    wd = opts.pop("weight_decay")
    groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": wd},
              {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
    opt = Adafactor(groups, **opts)
    pre = "c.%s" % case["name"]
    for t, scale in enumerate(case["scales"], start=1):
        g = torch.Generator().manual_seed(1000 * idx + t)
        before = {}
        for n, p in named:
            p.grad = (torch.randn(p.shape, generator=g, dtype=torch.float32) * scale).float()
            tensors["%s.t%d.grad.%s" % (pre, t, n)] = p.grad.clone()
            before[n] = p.detach().clone()
        opt.step()
        for group in opt.param_groups:
            for p in group["params"]:
                n = next(nm for nm, q in named if q is p)
                st = opt.state[p]
                # the terms of this step, recomputed in float64 from the stored parameters: the decay
                # term wd lr p (lr as the optimizer had it) and the update = p_before - decay - p_after
                lr = float(Adafactor._get_lr(group, st))
                dec = group["weight_decay"] * lr * before[n].double()
                upd = before[n].double() - dec - p.detach().double()
                tensors["%s.t%d.mag.%s" % (pre, t, n)] = (upd.abs() + dec.abs()).float()
        for n, p in named:
            tensors["%s.t%d.param.%s" % (pre, t, n)] = p.detach().clone()
    for n, p in named:
        st = opt.state[p]
        if "exp_avg_sq_row" in st:
            tensors["%s.row.%s" % (pre, n)] = st["exp_avg_sq_row"].clone()
            tensors["%s.col.%s" % (pre, n)] = st["exp_avg_sq_col"].clone()
        else:
            tensors["%s.v.%s" % (pre, n)] = st["exp_avg_sq"].clone()
        if "exp_avg" in st:
            tensors["%s.m.%s" % (pre, n)] = st["exp_avg"].clone()
    meta = dict(opts, weight_decay=wd, steps=len(case["scales"]))
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "adafactor"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    model = tiny_model()
    model.save_pretrained(a.out, safe_serialization=True)
    gen = os.path.join(a.out, "generation_config.json")   # not part of the fixture
    if os.path.exists(gen):
        os.remove(gen)
    tensors, meta = {}, {}
    for i, case in enumerate(CASES):
        meta["case." + case["name"]] = json.dumps(run_case(model, i, case, tensors), sort_keys=True)
    meta["cases"] = ",".join(c["name"] for c in CASES)
    meta["torch"] = torch.__version__
    import transformers
    meta["transformers"] = transformers.__version__
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    save_file(tensors, os.path.join(a.out, "adafactor.safetensors"), metadata=meta)
    n = sum(v.numel() for v in tensors.values())
    print("wrote %s: %d tensors, %d floats" % (a.out, len(tensors), n))


if __name__ == "__main__":
    main()
