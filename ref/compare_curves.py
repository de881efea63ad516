#!/usr/bin/env python3
"""Compares training-loss curves: the metrics.jsonl files that examples/train writes (one JSON object
per step with "step" and "loss").

  compare_curves.py REF.jsonl NEW.jsonl [--noise OTHER.jsonl] [--noise-pair A.jsonl B.jsonl]...
                    [--factor 2] [--from-step 1]

Aligns the runs by step and prints, as one JSON line, the steps compared, the mean and largest
|NEW - REF| and their relative size. The bf16 noise of a curve is measured, not assumed: a pair of
runs of the same code that differ only in rounding (the same model, data and seed, one of them with
FAT5_ATTN_TC=0: the attention on the exact FMA kernels instead of tensor cores) drift apart as
training amplifies the rounding, by an amount that itself varies from pair to pair. --noise OTHER is
the pair (REF, OTHER); --noise-pair A B adds another (e.g. NEW and NEW with FAT5_ATTN_TC=0). The
noise is the largest mean |A - B| over the pairs, and NEW passes when its mean difference from REF is
at most --factor (2) times that. Exit status 1 when it does not (or when two runs share no step), 0
otherwise. No third-party modules.
"""

import argparse
import json
import math
import sys


def read_curve(path):
    """step -> loss of every line that has both (later lines win: a resumed run rewrites steps)"""
    curve = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"compare_curves: {path}: {e}")
            if isinstance(r, dict) and "step" in r and isinstance(r.get("loss"), (int, float)):
                curve[int(r["step"])] = float(r["loss"])
    return curve


def diffs(a, b, first):
    steps = sorted(s for s in a.keys() & b.keys() if s >= first and math.isfinite(a[s]) and math.isfinite(b[s]))
    d = [abs(a[s] - b[s]) for s in steps]
    rel = [abs(a[s] - b[s]) / max(abs(a[s]), 1e-12) for s in steps]
    if not steps:
        return None
    worst = max(range(len(d)), key=lambda i: d[i])
    return {"steps": len(steps), "mean_abs": sum(d) / len(d), "max_abs": d[worst], "max_step": steps[worst],
            "mean_rel": sum(rel) / len(rel)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref")
    ap.add_argument("new")
    ap.add_argument("--noise", default=None, help="a run of REF's code differing only in rounding")
    ap.add_argument("--noise-pair", nargs=2, action="append", default=[], metavar=("A", "B"),
                    help="two runs of one code differing only in rounding (repeatable)")
    ap.add_argument("--factor", type=float, default=2.0, help="NEW may differ from REF by this many noises (2)")
    ap.add_argument("--from-step", type=int, default=1, help="first step compared (1)")
    args = ap.parse_args()
    ref, new = read_curve(args.ref), read_curve(args.new)
    out = {"ref": args.ref, "new": args.new, "new_vs_ref": diffs(ref, new, args.from_step)}
    ok = out["new_vs_ref"] is not None
    pairs = ([(args.ref, args.noise)] if args.noise else []) + [tuple(p) for p in args.noise_pair]
    if pairs:
        noises = []
        for a, b in pairs:
            d = diffs(read_curve(a), read_curve(b), args.from_step)
            noises.append({"a": a, "b": b, "diff": d})
            ok = ok and d is not None
        out["noise"] = noises
        if ok:
            limit = args.factor * max(n["diff"]["mean_abs"] for n in noises)
            out["limit_mean_abs"] = limit
            ok = out["new_vs_ref"]["mean_abs"] <= limit
    out["within_noise" if pairs else "compared"] = ok
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
