#!/bin/sh
# The command-line tools on the fixtures: fat5_inspect on good and bad input, fat5_forward's loss
# against the loss transformers computed (tests/data/*/reference.safetensors metadata).
set -u
out=${TMPDIR:-/tmp}/fat5_tools_$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
fail=0
check() { if "$@"; then :; else echo "test_tools: FAILED: $*"; fail=1; fi; }

for d in tests/data/*/; do
    d=${d%/}
    check tools/fat5_inspect "$d" > "$out/inspect.txt"
    check grep -q "relative_attention_bias" "$out/inspect.txt"
    check tools/fat5_forward "$d" "$d/batch.json" "$out/logits.safetensors" > "$out/fwd.txt"
    want=$(tools/fat5_inspect "$d/reference.safetensors" | sed -n 's/^  metadata loss = //p')
    got=$(tools/fat5_inspect "$out/logits.safetensors" | sed -n 's/^  metadata loss = //p')
    check awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 1e-4 * (b < 0 ? -b : b)) }'
    echo "test_tools: $d: loss $got (transformers $want)"
done
# a truncated file: non-zero exit, one line on stderr naming the problem
head -c 100 tests/data/t5_v10_relu_tied/model.safetensors > "$out/trunc.safetensors"
if tools/fat5_inspect "$out/trunc.safetensors" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: fat5_inspect accepted a truncated file"; fail=1
fi
check test "$(wc -l < "$out/err.txt")" -eq 1
check grep -q "past the end" "$out/err.txt"
if tools/fat5_inspect "$out/missing_dir" > /dev/null 2>&1; then
    echo "test_tools: FAILED: fat5_inspect accepted a missing path"; fail=1
fi
[ $fail -eq 0 ] && echo "test_tools: ok"
exit $fail
