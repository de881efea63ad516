#!/bin/sh
# Builds data/debian-faq-fr/faq-fr.txt.gz, a small French corpus, from the Debian package
# debian-faq-fr (the Debian FAQ in French, plain-text edition). Usage:
#     data/debian-faq-fr/extract.sh [FAQ.txt.gz [OUT.gz]]
# Without FAQ.txt.gz, the package is downloaded (apt-get download, no installation; run
# apt-get update once first) and unpacked in a temporary directory.
# Output: UTF-8 text, one paragraph a line (the source's wrapped lines joined with a space, runs of
# spaces and no-break spaces collapsed to a space; a numbered heading or contents entry starts a
# paragraph), paragraphs separated by a blank line (pretokenize --sep blank: a paragraph a
# document); rule lines of dashes and empty paragraphs dropped; gzip -9n (the same input gives
# the same bytes).
set -eu
out=${2:-$(dirname "$0")/faq-fr.txt.gz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=${1:-}
if [ -z "$src" ]; then
    (cd "$tmp" && apt-get download debian-faq-fr >/dev/null 2>&1)
    dpkg-deb -x "$tmp"/debian-faq-fr_*.deb "$tmp/pkg"
    src=$tmp/pkg/usr/share/doc/debian/FAQ/debian-faq.fr.txt.gz
fi
gzip -dc "$src" | iconv -f UTF-8 -t UTF-8 |
LC_ALL=C awk '
    function flush() { if (p != "") { if (n++) print ""; print p } p = "" }
    { sub(/\r$/, ""); gsub(/\t/, " "); gsub(/( |\302\240)( |\302\240)+/, " "); sub(/^ /, ""); sub(/ $/, "") }
    /^-+$/ { flush(); next }
    /^[0-9]+(\.[0-9]+)*\. / { flush() }
    $0 == "" { flush(); next }
    { p = p == "" ? $0 : p " " $0 }
    END { flush() }' > "$tmp/out.txt"
gzip -9n < "$tmp/out.txt" > "$out"
echo "extract.sh: $(grep -c . "$tmp/out.txt") paragraphs, $(wc -c < "$tmp/out.txt") bytes -> $out ($(wc -c < "$out") bytes)"
