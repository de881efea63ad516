#!/usr/bin/env python3
"""A directory fat5 wrote, loaded by transformers as a user would, and greedy generation compared
with fat5's on the same inputs.

    python3 ref/check_hf_export.py DIR [DIR ...] [--max-new-tokens 12] [--text TEXT ...]
                                   [--generate examples/generate] [--write-fixture]

For each DIR (a training checkpoint, or the output of fat5_model_save_hf / tools/fat5_convert):

  * the files transformers reads are there: config.json, generation_config.json, the weights
    (model.safetensors, or model.safetensors.index.json and its shards) and a tokenizer;
  * AutoTokenizer.from_pretrained(DIR) and AutoModelForSeq2SeqLM.from_pretrained(DIR,
    torch_dtype="auto") load it (the model in the dtype config.json's torch_dtype names, which
    must be the weights' dtype), with no missing or unexpected weights;
  * each text is tokenized by that tokenizer and generated from greedily on the CPU
    (model.generate with the directory's generation_config.json, num_beams 1, no sampling,
    max_new_tokens N);
  * examples/generate DIR --device cpu --ids ... --print-ids --max-new-tokens N runs fat5 on the
    same ids (fp32), and the generated ids must be the same, token for token. (In a BF16 or F16
    directory transformers computes in that dtype and fat5 in fp32, so a difference there is
    reported, not failed, unless --strict.) That fat5's own tokenizer gives transformers' input
    ids is checked by tests/test_export.c, from the fixture below.

--write-fixture writes DIR/hf_generate.json: the versions of torch and transformers, the texts,
the input ids, max_new_tokens, the generated ids (without the decoder start token, up to and
including EOS) and each row's score (the sum of its tokens' log-probabilities), which tests/test_export.c reads to check, without Python, that fat5 generates
those tokens from DIR. Prints one JSON line per directory; exit status 1 when one fails.
Needs torch and transformers (CPU wheels are enough), plus sentencepiece for spiece.model.
"""
import argparse
import json
import os
import subprocess
import sys

TEXTS = ["translate English to German: The house is wonderful.", "summarize: a small test of the export",
         "Hello world", "The quick brown fox jumps over the lazy dog."]


def hf_generated(seq, start, eos, pad):
    """A transformers output row without its decoder start token, cut after the first EOS."""
    out = list(seq[1:]) if seq and seq[0] == start else list(seq)
    if eos in out:
        out = out[:out.index(eos) + 1]
    else:   # a finished row is padded; an unfinished one is not
        while out and out[-1] == pad and pad != eos:
            out.pop()
    return out


def fixture_json(d):
    """JSON with one line per key, a list of rows one row a line."""
    out = []
    for k, v in d.items():
        if isinstance(v, list) and v and isinstance(v[0], (list, str)):
            rows = ",\n  ".join(json.dumps(r, ensure_ascii=False) for r in v)
            out.append(f' {json.dumps(k)}: [\n  {rows}\n ]')
        else:
            out.append(f' {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}')
    return "{\n" + ",\n".join(out) + "\n}\n"


def fat5_generate(binary, path, ids, max_new, eos):
    """examples/generate on the rows of ids (it appends EOS to an --ids row itself)."""
    cmd = [binary, path, "--device", "cpu", "--print-ids", "--max-new-tokens", str(max_new)]
    for row in ids:
        row = row[:-1] if row and row[-1] == eos else row
        cmd += ["--ids", ",".join(str(i) for i in row)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return [[int(x) for x in line.replace(",", " ").split()] for line in res.stdout.splitlines()]


def check(path, args):
    import torch
    import transformers
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig

    out = {"dir": path}
    cfg = json.load(open(os.path.join(path, "config.json")))
    files = sorted(os.listdir(path))
    out["files"] = [f for f in files if not f.startswith(".") and f != "hf_generate.json"]
    weights = "model.safetensors" in files or "model.safetensors.index.json" in files
    tok_files = [f for f in ("tokenizer.json", "spiece.model", "tokenizer_config.json") if f in files]
    problems = []
    if not weights:
        problems.append("no weights")
    if "generation_config.json" not in files:
        problems.append("no generation_config.json")
    if not tok_files:
        problems.append("no tokenizer file")
    out["torch_dtype"] = cfg.get("torch_dtype")
    model, info = AutoModelForSeq2SeqLM.from_pretrained(path, torch_dtype="auto", output_loading_info=True)
    model.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        problems.append(f"loading: {bad}")
    out["model"] = type(model).__name__
    out["param_dtype"] = str(next(model.parameters()).dtype).replace("torch.", "")
    want = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}.get(cfg.get("torch_dtype"))
    if out["param_dtype"] != want:
        problems.append(f"parameters in {out['param_dtype']}, config.json says {cfg.get('torch_dtype')}")
    tok = AutoTokenizer.from_pretrained(path)
    out["tokenizer"] = type(tok).__name__
    gen = GenerationConfig.from_pretrained(path)
    out["generation"] = {k: getattr(gen, k) for k in ("decoder_start_token_id", "eos_token_id", "pad_token_id")}
    texts = args.text or TEXTS
    ids = [tok(t).input_ids for t in texts]
    hf, scores = [], []
    with torch.no_grad():
        for row in ids:   # one at a time: no padding enters the encoder
            res = model.generate(torch.tensor([row]), generation_config=gen, max_new_tokens=args.max_new_tokens,
                                 num_beams=1, do_sample=False, output_scores=True, return_dict_in_generate=True)
            toks = hf_generated(res.sequences[0].tolist(), gen.decoder_start_token_id, gen.eos_token_id,
                                gen.pad_token_id)
            hf.append(toks)
            # the sum of the chosen tokens' log-probabilities (fat5_generate_result.scores for greedy)
            lp = [torch.log_softmax(res.scores[i][0].double(), -1)[t].item() for i, t in enumerate(toks)]
            scores.append(sum(lp))
    out["input_ids"] = ids
    out["transformers"] = hf
    out["decoded"] = [tok.decode(r, skip_special_tokens=True) for r in hf]
    fat5 = fat5_generate(args.generate, path, ids, args.max_new_tokens, gen.eos_token_id)
    out["fat5"] = fat5
    out["same_tokens"] = fat5 == hf
    if not out["same_tokens"] and (want == "float32" or args.strict):
        problems.append("fat5 generated other tokens than transformers")
    out["problems"] = problems
    out["ok"] = not problems
    if args.write_fixture and out["ok"]:
        fixture = {"torch_version": torch.__version__, "transformers_version": transformers.__version__,
                   "texts": texts, "input_ids": ids, "max_new_tokens": args.max_new_tokens, "generated": hf,
                   "scores": scores,
                   "decoded": out["decoded"], "tokenizer": out["tokenizer"], "model": out["model"]}
        with open(os.path.join(path, "hf_generate.json"), "w") as f:
            f.write(fixture_json(fixture))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--text", action="append", help="an input text (repeat; default: four built-in ones)")
    ap.add_argument("--generate", default="examples/generate", help="fat5's examples/generate binary")
    ap.add_argument("--write-fixture", action="store_true", help="write DIR/hf_generate.json")
    ap.add_argument("--strict", action="store_true", help="fail on a difference in BF16 / F16 directories too")
    args = ap.parse_args()
    n_bad = 0
    for path in args.dirs:
        try:
            r = check(path, args)
        except Exception as e:  # report and go on with the next directory
            r = {"dir": path, "ok": False, "error": f"{type(e).__name__}: {e}"}
        n_bad += not r["ok"]
        print(json.dumps(r), flush=True)
    sys.exit(1 if n_bad else 0)


if __name__ == "__main__":
    main()
