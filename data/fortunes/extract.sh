#!/bin/sh
# Builds data/fortunes/fortunes.txt.gz from the Debian packages fortunes + fortunes-min
# (apt-get install fortunes). Usage: data/fortunes/extract.sh [SRC_DIR [OUT.gz]]
# Output: UTF-8 plain text, one fortune per document, documents separated by a line holding only
# "%"; LF line ends, no trailing blanks, no blank lines at the start or end of a document, no
# empty documents; gzip -9n (no name or time stamp: the same input gives the same bytes).
set -eu
src=${1:-/usr/share/games/fortunes}
out=${2:-$(dirname "$0")/fortunes.txt.gz}
# The English files of the inoffensive set, in name order. Left out (see README.md): the
# offensive set (off/, package fortunes-off, not installed), ascii-art (pictures, not prose),
# translate-me (not English), ethnic and men-women (jokes about groups of people; left out as a
# precaution), and pratchett, songs-poems, startrek, zippy (mostly quotations from single
# copyrighted works: novels, song lyrics, television scripts, a comic strip).
files="art computers cookie debian definitions disclaimer drugs education food fortunes goedel
humorists kids knghtbrd law linux linuxcookie literature love magic medicine miscellaneous news
paradoxum people perl pets platitudes politics riddles science sports tao wisdom work"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for f in $files; do
    [ -f "$src/$f" ] || { echo "extract.sh: $src/$f is missing (apt-get install fortunes)" >&2; exit 1; }
    iconv -f UTF-8 -t UTF-8 "$src/$f" > /dev/null || { echo "extract.sh: $src/$f is not UTF-8" >&2; exit 1; }
    cat "$src/$f"
    printf '\n%%\n'
done |
LC_ALL=C awk '
    function flush(  i) {
        if (last > 0) { if (docs++) print "%"; for (i = 1; i <= last; i++) print buf[i] }
        n = last = 0
    }
    { sub(/\r$/, ""); sub(/[ \t]+$/, "") }
    $0 == "%" { flush(); next }
    $0 == "" && n == 0 { next }
    { buf[++n] = $0; if ($0 != "") last = n }
    END { flush() }' > "$tmp"
gzip -9n < "$tmp" > "$out"
echo "extract.sh: $(grep -c '^%$' "$tmp" | awk '{ print $1 + 1 }') documents, $(wc -c < "$tmp") bytes -> $out ($(wc -c < "$out") bytes)"
