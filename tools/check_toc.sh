#!/bin/sh
# The table of contents at the top of fat5.h lists its sections in file order: the "[n] title"
# lines of the contents against the "// ==[n] title ==" markers that open each section.
set -eu
f=${1:-fat5.h}
toc=$(sed -n 's|^//     \[\([0-9.]*\)\] *\([a-z].*\)$|\1 \2|p' "$f" | grep -v '^0 ')
marks=$(sed -n 's|^// ==\[\([0-9.]*\)\] \(.*\) ==$|\1 \2|p' "$f")
if [ "$toc" != "$marks" ]; then
    echo "check-toc: the contents of $f do not match its section markers:"
    printf '%s\n' "$toc" > "${TMPDIR:-/tmp}/toc.$$"; printf '%s\n' "$marks" > "${TMPDIR:-/tmp}/marks.$$"
    diff "${TMPDIR:-/tmp}/toc.$$" "${TMPDIR:-/tmp}/marks.$$" || true
    rm -f "${TMPDIR:-/tmp}/toc.$$" "${TMPDIR:-/tmp}/marks.$$"
    exit 1
fi
n=$(printf '%s\n' "$marks" | wc -l)
[ "$(printf '%s\n' "$marks" | cut -d' ' -f1 | sort -u | wc -l)" -eq "$n" ] || { echo "check-toc: duplicate section numbers"; exit 1; }
echo "check-toc: $n sections, contents match"
