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
# st_file HEADER FILE: a safetensors file with that (ASCII) header and no data bytes
st_file() {
    n=${#1}
    printf "\\$(printf %03o $((n % 256)))\\$(printf %03o $((n / 256 % 256)))\\000\\000\\000\\000\\000\\000%s" "$1" > "$2"
}
# a zero-element tensor whose other dimensions multiply past int64: 0 elements, no overflow. The
# tool is also built with UBSan here, where the old unchecked product aborted.
big=4611686018427387904
st_file "{\"z\":{\"dtype\":\"F32\",\"shape\":[$big,$big,0],\"data_offsets\":[0,0]}}" "$out/zero.safetensors"
check tools/fat5_inspect "$out/zero.safetensors" > "$out/zero.txt"
check grep -q "^  z .*F32   \[$big, $big, 0\]$" "$out/zero.txt"
check grep -q "^0 elements$" "$out/zero.txt"
if ${CC:-cc} -std=c99 -O1 -g -fsanitize=undefined -fno-sanitize-recover=all -o "$out/inspect_ubsan" \
        tools/fat5_inspect.c -lm -ldl -lpthread 2> "$out/ubsan_build.txt"; then
    check "$out/inspect_ubsan" "$out/zero.safetensors" > "$out/zero_ubsan.txt"
    check grep -q "^0 elements$" "$out/zero_ubsan.txt"
else
    echo "test_tools: SKIP: the UBSan build of fat5_inspect (no -fsanitize=undefined here)"
fi
# names and metadata from the file never reach the terminal as control bytes
esc=$(printf '\033')
st_file '{"__metadata__":{"k\u001b[2J":"v\u001b]0;x\u0007"},"t\u001b[31m":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' \
    "$out/esc.safetensors"
check tools/fat5_inspect "$out/esc.safetensors" > "$out/esc.txt"
check grep -q 'metadata k\\x1B\[2J = v\\x1B\]0;x\\x07$' "$out/esc.txt"
check grep -q '^  t?\[31m ' "$out/esc.txt"
if grep -q "$esc" "$out/esc.txt"; then echo "test_tools: FAILED: raw ESC in fat5_inspect output"; fail=1; fi
# a file of another kind: one line, no number made of its bytes
printf 'plain text, not a safetensors file\n' > "$out/text.safetensors"
if tools/fat5_inspect "$out/text.safetensors" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: fat5_inspect accepted a text file"; fail=1
fi
check grep -q "not a safetensors file" "$out/err.txt"
if grep -q '[0-9]\{10\}' "$out/err.txt"; then echo "test_tools: FAILED: a header length of text bytes"; fail=1; fi
# plot_metrics: a JSONL log (keys in any order, whitespace, 1e-3 numbers, nested values, NaN)
# -> a PNG that --check re-reads (signature, chunk CRCs, IHDR, stored blocks, Adler-32, pixel count)
m="$out/metrics.jsonl"
awk 'BEGIN { for (s = 1; s <= 40; s++) {
        printf "{\"step\": %d, \"loss\": %.6f, \"lr\": 1e-3, \"grad_norm\": 0.5}\n", s, 6 * exp(-s / 15) + 1
        if (s % 10 == 0) printf "  { \"eval_loss\" : %.4e ,\"tokens_per_s\":1.5E+3, \"x\": {\"a\": [1, null, \"}\"]}, \"step\":%d }\n", 2 + 4 * exp(-s / 15), s
    }
    print ""; print "{\"step\": 41, \"loss\": NaN}"; print "{\"step\": 42, \"loss\": Infinity, \"eval_loss\": 1e999}" }' > "$m"
check tools/plot_metrics "$m" "$out/plot.png" --title "test: loss" > "$out/plot.txt" 2> "$out/plot_err.txt"
check grep -q "40 training and 4 eval points" "$out/plot.txt"
check grep -q "skipped 3 non-finite values" "$out/plot_err.txt"
check tools/plot_metrics --check "$out/plot.png" > "$out/check.txt"
check grep -q "^ok: 800x500, 3 chunks, 400000 pixels$" "$out/check.txt"
# signature and IHDR read with od: width and height big-endian at bytes 16..23
check test "$(od -An -tx1 -N8 "$out/plot.png" | tr -d ' \n')" = "89504e470d0a1a0a"
check test "$(od -An -tx1 -j12 -N12 "$out/plot.png" | tr -d ' \n')" = "4948445200000320000001f4"
check tools/plot_metrics "$m" "$out/plot_log.png" --log-y > /dev/null 2>&1
check tools/plot_metrics --check "$out/plot_log.png" > /dev/null
# a flipped pixel byte fails --check (its chunk CRC)
cp "$out/plot.png" "$out/bad.png"
printf 'X' | dd of="$out/bad.png" bs=1 seek=5000 conv=notrunc 2> /dev/null
if tools/plot_metrics --check "$out/bad.png" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: plot_metrics --check accepted a damaged PNG"; fail=1
fi
check grep -q "IDAT.*CRC mismatch" "$out/err.txt"
# a malformed line: non-zero exit, the file and line named
printf '{"step": 1, "loss": 2.5}\n{"step": 2, "loss": 2.4}\n{"step": 3, "loss": }\n' > "$out/bad.jsonl"
if tools/plot_metrics "$out/bad.jsonl" "$out/bad_plot.png" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: plot_metrics accepted a malformed line"; fail=1
fi
check grep -q "bad.jsonl:3: malformed JSON line" "$out/err.txt"
printf '{"loss": 2.5}\n' > "$out/nostep.jsonl"
if tools/plot_metrics "$out/nostep.jsonl" "$out/bad_plot.png" > /dev/null 2> "$out/err.txt"; then
    echo "test_tools: FAILED: plot_metrics accepted a loss without a step"; fail=1
fi
check grep -q "nostep.jsonl:1: a loss without a \"step\"" "$out/err.txt"
# a missing file and an empty file: non-zero exit, a message naming the file
: > "$out/empty.jsonl"
for f in "$out/missing.jsonl" "$out/empty.jsonl"; do
    if tools/plot_metrics "$f" "$out/bad_plot.png" > /dev/null 2> "$out/err.txt"; then
        echo "test_tools: FAILED: plot_metrics accepted $f"; fail=1
    fi
    check grep -q "$(basename "$f")" "$out/err.txt"
done
[ $fail -eq 0 ] && echo "test_tools: ok"
exit $fail
