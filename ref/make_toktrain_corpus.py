#!/usr/bin/env python3
"""Assembles a multilingual text of about 100 MB from Debian packages, for comparing tokenizer
trainers on more than the bundled fortunes (compare_hf.py --toktrain --text OUT/train.txt
--heldout OUT/heldout.txt). The text is not kept in the repository; this script makes it again.

  make_toktrain_corpus.py OUT_DIR [--mb 100] [--packages LIST]

Downloads the packages with ``apt-get download`` (no installation; run ``apt-get update`` once
first), unpacks them with ``dpkg-deb -x`` into OUT_DIR/pkgs, and takes their text:
  * fortune files (usr/share/games/fortunes/**, without the .dat indexes): every fortune one line;
  * manual pages (usr/share/man/**.gz): roff requests and escapes stripped, every paragraph one line;
  * HTML documentation (usr/share/**.html): the text between the tags, every block one line;
  * plain text documentation (usr/share/doc/**.txt and .txt.gz).
Lines are whitespace-collapsed; lines of fewer than 20 characters, and lines that are not valid
UTF-8 after decoding, are dropped. Sources are taken in the order of --packages until --mb
megabytes are written, every 10th line going to heldout.txt and the others to train.txt.
OUT_DIR/manifest.json records each package's version and the bytes it gave.

The default list mixes languages (English, French, German, Spanish, Italian, Polish, Russian,
Portuguese, Czech, Japanese, Chinese documentation and fortunes); each package keeps its own
licence (usr/share/doc/PACKAGE/copyright inside OUT_DIR/pkgs).
"""
import argparse
import gzip
import html.parser
import json
import os
import re
import subprocess
import sys

PACKAGES = (
    "fortunes fortunes-min fortunes-de fortunes-es fortunes-it fortunes-pl fortunes-ru fortunes-br fortunes-cs "
    "fortunes-zh fortunes-bg fortunes-eo fortunes-ga "
    "debian-reference-en debian-reference-fr debian-reference-de debian-reference-es debian-reference-it "
    "debian-reference-ja debian-reference-zh-cn debian-reference-pt debian-faq debian-faq-fr debian-faq-de "
    "developers-reference developers-reference-fr developers-reference-de developers-reference-it "
    "developers-reference-ja developers-reference-ru maint-guide maint-guide-fr maint-guide-es maint-guide-it "
    "maint-guide-ja manpages manpages-dev manpages-fr manpages-de manpages-es manpages-it manpages-pl "
    "manpages-ru manpages-pt-br manpages-cs manpages-ja manpages-zh debian-handbook python3.11-doc debian-policy "
    "gnu-standards"
)


class TextOf(html.parser.HTMLParser):
    BLOCK = {"p", "div", "li", "dt", "dd", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "br", "tr", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skip = [""], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skip += 1
        if tag in self.BLOCK:
            self.parts.append("")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skip:
            self.skip -= 1
        if tag in self.BLOCK:
            self.parts.append("")

    def handle_data(self, data):
        if not self.skip:
            self.parts[-1] += data


ROFF_ESC = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\s[-+]?\d+|\\\(..|\\\[[^\]]*\]|\\[&|^%:e\-]|\\\*(\(..|\[[^\]]*\]|.)")


def roff_paragraphs(text):
    out, cur = [], []
    for ln in text.splitlines():
        if ln.startswith((".", "'")):
            req = ln[1:].split()[:1]
            if req and req[0] in ("SH", "SS", "PP", "P", "LP", "TP", "IP", "sp", "br", "HP", "RS", "RE", "TH"):
                if cur:
                    out.append(" ".join(cur))
                    cur = []
            if req and req[0] in ("SH", "SS", "B", "I", "BR", "IR", "RB", "RI", "BI", "IB"):
                words = ln.split(None, 1)[1:] if len(ln.split(None, 1)) > 1 else []
                cur.extend(w.replace('"', "") for w in words)
            continue
        if not ln.strip():
            if cur:
                out.append(" ".join(cur))
                cur = []
            continue
        cur.append(ROFF_ESC.sub("", ln).replace("\\", ""))
    if cur:
        out.append(" ".join(cur))
    return out


def fortune_lines(text):
    return [" ".join(doc.split()) for doc in re.split(r"\n%\n", text)]


def clean(lines):
    for ln in lines:
        ln = " ".join(ln.split())
        if len(ln) >= 20:
            yield ln


def read_text(path):
    raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def texts_of(root):
    """(kind, lines) for every text file under an unpacked package, in sorted path order."""
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                continue
            if "/games/fortunes" in "/" + rel and not name.endswith((".dat", ".u8")):
                t = read_text(path)
                if t:
                    yield rel, fortune_lines(t)
            elif rel.startswith("usr/share/man/") and name.endswith(".gz"):
                t = read_text(path)
                if t and not t.startswith(".so "):
                    yield rel, roff_paragraphs(t)
            elif rel.startswith("usr/share/") and name.endswith((".html", ".htm")):
                t = read_text(path)
                if t:
                    p = TextOf()
                    p.feed(t)
                    yield rel, p.parts
            elif rel.startswith("usr/share/doc/") and name.endswith((".txt", ".txt.gz")):
                t = read_text(path)
                if t:
                    yield rel, re.split(r"\n\s*\n", t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--packages", default=PACKAGES)
    args = ap.parse_args()
    pk_dir = os.path.join(args.out, "pkgs")
    deb_dir = os.path.join(args.out, "debs")
    os.makedirs(pk_dir, exist_ok=True)
    os.makedirs(deb_dir, exist_ok=True)
    limit = int(args.mb * 1e6)
    written, n = 0, 0
    manifest = []
    with open(os.path.join(args.out, "train.txt"), "w", encoding="utf-8") as tr, \
            open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as ho:
        for pkg in args.packages.split():
            if written >= limit:
                break
            r = subprocess.run(["apt-get", "download", pkg], cwd=deb_dir, capture_output=True, text=True)
            debs = sorted(f for f in os.listdir(deb_dir) if f.startswith(pkg + "_") and f.endswith(".deb"))
            if r.returncode != 0 or not debs:
                print("make_toktrain_corpus: %s: not downloaded (%s)" % (pkg, r.stderr.strip()[:120]), file=sys.stderr)
                continue
            root = os.path.join(pk_dir, pkg)
            subprocess.run(["dpkg-deb", "-x", os.path.join(deb_dir, debs[-1]), root], check=True)
            version = debs[-1][len(pkg) + 1:].rsplit("_", 1)[0]
            got = 0
            for rel, lines in texts_of(root):
                for ln in clean(lines):
                    b = len(ln.encode("utf-8")) + 1
                    (ho if n % 10 == 9 else tr).write(ln + "\n")
                    n += 1
                    got += b
                    written += b
                    if written >= limit:
                        break
                if written >= limit:
                    break
            manifest.append({"package": pkg, "version": version, "bytes": got})
            print("make_toktrain_corpus: %-28s %-24s %8.1f MB (total %6.1f MB)" % (pkg, version, got / 1e6, written / 1e6),
                  file=sys.stderr)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"bytes": written, "lines": n, "packages": manifest}, f, indent=1)
    print("make_toktrain_corpus: %.1f MB, %d lines -> %s/train.txt, heldout.txt" % (written / 1e6, n, args.out))


if __name__ == "__main__":
    main()
