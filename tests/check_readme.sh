#!/bin/sh
# make check-readme: every ```c block of README.md is a whole program that compiles exactly as
# written (C99, -Wall -Wextra -Wpedantic -Werror) against the committed fat5.h, and runs.
#     tests/check_readme.sh [README.md]        (from the repository root, after make build/fat5_impl.o)
# The blocks are written to build/readme/blockN.c, each starting with a #line directive so that a
# compiler message names README.md and its line. They are linked with the prebuilt implementation
# (build/fat5_impl.o, -DFAT5__IMPL_DONE skips the copy their #define FAT5_IMPLEMENTATION would
# compile), as the Makefile links the examples and tools, so each takes about a second. All
# blocks compile in parallel, then run in parallel from the repository root with no arguments:
# each must exit 0 and print something on stdout (the README's blocks default to the fixture
# tests/data/t5_spiece, a tiny model with its own tokenizer).
set -eu
CC=${CC:-cc}
readme=${1:-README.md}
dir=build/readme
impl=build/fat5_impl.o
[ -f "$impl" ] || { echo "check-readme: $impl is missing (make build/fat5_impl.o)"; exit 1; }
rm -rf "$dir"
mkdir -p "$dir"

# ```c opens a block (nothing else on the line), ``` closes it
awk -v dir="$dir" -v src="$readme" '
    !inb && /^```c[ \t]*$/ { n++; f = dir "/block" n ".c"; inb = 1;
                             printf "#line %d \"%s\"\n", NR + 1, src > f; next }
    inb && /^```[ \t]*$/   { inb = 0; close(f); next }
    inb                    { print > f }
    END { if (inb) { print "check-readme: " src ": a ```c block is not closed" > "/dev/stderr"; exit 1 } }
' "$readme"

blocks=$(ls "$dir"/block*.c 2>/dev/null | sort -V || true)
[ -n "$blocks" ] || { echo "check-readme: no \`\`\`c blocks in $readme"; exit 1; }

# compile every block at once
for c in $blocks; do
    b=${c%.c}
    ( if $CC -std=c99 -Wall -Wextra -Wpedantic -Werror -O1 -I. -DFAT5__IMPL_DONE -o "$b" "$c" "$impl" \
          -lm -ldl -lpthread > "$b.cc.log" 2>&1; then echo 0; else echo 1; fi > "$b.cc.rc" ) &
done
wait
fail=0
for c in $blocks; do
    b=${c%.c}
    if [ "$(cat "$b.cc.rc")" != 0 ]; then
        echo "check-readme: $(basename "$b") (README line $(sed -n '1s/#line \([0-9]*\).*/\1/p' "$c")) does not compile:"
        cat "$b.cc.log"
        fail=1
    fi
done
[ $fail = 0 ] || exit 1

# run every block at once, from the repository root, with no arguments
for c in $blocks; do
    b=${c%.c}
    ( rc=0; "$b" > "$b.out" 2> "$b.err" || rc=$?; echo $rc > "$b.rc" ) &
done
wait
for c in $blocks; do
    b=${c%.c}
    line=$(sed -n '1s/#line \([0-9]*\).*/\1/p' "$c")
    if [ "$(cat "$b.rc")" != 0 ] || [ ! -s "$b.out" ]; then
        echo "check-readme: $(basename "$b") (README line $line) failed (exit $(cat "$b.rc")):"
        cat "$b.out" "$b.err"
        fail=1
    else
        echo "check-readme: $(basename "$b") (README line $line): $(head -c 160 "$b.out" | head -n 1)"
    fi
done
[ $fail = 0 ] || exit 1
echo "check-readme: $(echo "$blocks" | wc -w) C blocks of $readme compile (C99, -Werror) and run"
