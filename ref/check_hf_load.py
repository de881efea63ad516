"""Loads a directory fat5 saved with transformers: model, tokenizer and generation settings.

    python3 ref/check_hf_load.py DIR [DIR ...]

For each directory: T5ForConditionalGeneration (or its auto class) with the weights' dtype from
config.json's torch_dtype, AutoTokenizer, GenerationConfig; then one greedy generation of a short
text with the loaded settings. Prints one JSON line per directory; exit status 1 when any fails.
Needs torch and transformers (the GPU machine has them; this machine may not).
"""
import json
import sys


def check(path):
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig

    out = {"dir": path}
    cfg = json.load(open(f"{path}/config.json"))
    out["torch_dtype"] = cfg.get("torch_dtype")
    model = AutoModelForSeq2SeqLM.from_pretrained(path, torch_dtype="auto")
    out["param_dtype"] = str(next(model.parameters()).dtype).replace("torch.", "")
    tok = AutoTokenizer.from_pretrained(path)
    out["tokenizer"] = type(tok).__name__
    gen = GenerationConfig.from_pretrained(path)
    out["generation"] = {k: getattr(gen, k) for k in ("decoder_start_token_id", "eos_token_id", "pad_token_id",
                                                      "num_beams", "max_new_tokens")}
    ids = tok("translate English to German: a small test", return_tensors="pt").input_ids
    with torch.no_grad():
        res = model.generate(ids, generation_config=gen, max_new_tokens=8, num_beams=1, do_sample=False)
    out["generated"] = res[0].tolist()
    out["ok"] = (out["param_dtype"] == {"bfloat16": "bfloat16", "float32": "float32"}.get(out["torch_dtype"])
                 and res.shape[1] >= 2)
    return out


def main():
    bad = 0
    for path in sys.argv[1:]:
        try:
            r = check(path)
        except Exception as e:  # report and go on with the next directory
            r = {"dir": path, "ok": False, "error": f"{type(e).__name__}: {e}"}
        bad += not r["ok"]
        print(json.dumps(r), flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
