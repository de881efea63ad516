#!/bin/sh
# Regenerates tests/data/t5_spiece: a tiny T5 checkpoint with a SentencePiece tokenizer whose
# vocabulary fits it, for the README's text-to-text example (make check-readme runs it).
#     dev/make_text_fixture.sh            (from the repository root; builds tools/fat5_init)
# The model is randomly initialised by tools/fat5_init (Hugging Face's T5 initialisation, seed
# 38): a gated-GELU T5 v1.1 shape with d_model 16 and 2 + 2 layers, whose vocabulary (1,000 ids)
# is exactly the tokenizer's. The tokenizer is tests/data/tokenizers/mt5bf/spiece.model (a
# 1,000-piece Unigram model with byte fallback and T5's ids: pad 0, eos 1, unk 2, made by
# ref/make_tokenizers.py). Its weights are random, so what it generates is arbitrary text; the
# fixture shows the calls work end to end, not a translation.
set -eu
cd "$(dirname "$0")/.."
out=tests/data/t5_spiece
make -s tools/fat5_init
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/config.json" <<'JSON'
{
  "model_type": "t5",
  "vocab_size": 1000,
  "d_model": 16,
  "d_kv": 8,
  "num_heads": 2,
  "d_ff": 32,
  "num_layers": 2,
  "num_decoder_layers": 2,
  "relative_attention_num_buckets": 8,
  "relative_attention_max_distance": 20,
  "feed_forward_proj": "gated-gelu",
  "tie_word_embeddings": false,
  "layer_norm_epsilon": 1e-06,
  "pad_token_id": 0,
  "eos_token_id": 1,
  "decoder_start_token_id": 0
}
JSON
mkdir -p "$out"
tools/fat5_init "$tmp/config.json" "$out" 38
cp tests/data/tokenizers/mt5bf/spiece.model "$out/spiece.model"
cp tests/data/tokenizers/mt5bf/tokenizer.json "$out/tokenizer.json"   # the same tokenizer, as transformers' fast one
# for transformers' T5Tokenizer: the sentinels are none of its 100 default extra ids (the model's
# vocabulary is exactly the SentencePiece model's), fat5 reads no tokenizer_config.json
printf '{\n  "tokenizer_class": "T5Tokenizer",\n  "extra_ids": 0,\n  "model_max_length": 512\n}\n' \
    > "$out/tokenizer_config.json"
echo "make_text_fixture: wrote $out ($(du -sk "$out" | cut -f1) KB)"
