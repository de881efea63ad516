#!/bin/sh
# Every task-head fixture (tests/data/heads_*) loaded and saved by fat5 (tools/fat5_convert, fp32),
# then loaded by transformers: the same outputs and loss as the fixture's reference, and the same
# architecture, id2label, label2id and problem_type (ref/make_reference.py --check-head).
# Needs python3 with torch and transformers. Usage: dev/check_heads_export.sh
set -eu
make -s tools/fat5_convert
out=${TMPDIR:-/tmp}/fat5_heads_export_$$
trap 'rm -rf "$out"' EXIT
mkdir -p "$out"
for d in tests/data/heads_*/; do
    d=${d%/}
    [ -f "$d/reference.safetensors" ] || continue   # heads_configs: config files only
    n=$(basename "$d")
    tools/fat5_convert "$d" "$out/$n" --dtype fp32 > /dev/null
    python3 ref/make_reference.py --check-head "$out/$n" --against "$d" | tail -1 | sed "s|^|$n: |"
done
echo "check_heads_export: every head checkpoint fat5 saved reads back in transformers"
