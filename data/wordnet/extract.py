#!/usr/bin/env python3
"""Builds the WordNet definition data set (data/wordnet/) from the WordNet 3.0 database files.

Usage: python3 data/wordnet/extract.py [--wordnet-dir DIR] [--out-dir DIR] [--all]

Reads DIR/data.{noun,verb,adj,adv} and DIR/index.{noun,verb,adj,adv} (default DIR:
/usr/share/wordnet, Debian package wordnet-base) in the format of wndb(5WN), and writes to the
output directory (default: the directory of this script):

  train.jsonl, validation.jsonl, test.jsonl   one JSON object per line:
      {"input": "<lemma> (<part of speech>)", "target": "<definition>",
       "lexname": "<lexicographer file>", "pos": "noun|verb|adjective|adverb",
       "synset": "<8-digit offset>-<ss_type>"}
  labels.txt   the 45 lexicographer file names, one a line, line i (0-based) = lex_filenum i

Rows: one per synset, with the synset's first word as the lemma. Without --all only the synsets
that hold at least one sense tagged in the semantic concordances are kept (those listed among the
first tagsense_cnt offsets of some index.pos entry), which keeps the files a few MB; --all keeps
every synset (about 20 MB).
Split: by a SHA-256 hash of the lower-cased lemma, so one lemma (in any part of speech) is in one
split only: buckets 0-89 of 100 train, 90-94 validation, 95-99 test.
Order: rows within a file are sorted by the SHA-256 of their synset id, a fixed pseudo-random
order that mixes parts of speech and classes for readers that stream the file.
The output bytes depend only on the database files: the same input gives the same files.
Python 3 standard library only.
"""

import argparse
import hashlib
import json
import os
import re
import sys

# lex_filenum -> lexicographer file name, from lexnames(5WN) (WordNet 3.0).
LEXNAMES = [
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
    "adj.ppl",
]

# Database files in the order they are read: (file suffix, ss_type letter of its index).
FILES = [("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r")]

# data file suffix -> the ss_type letters its synsets may have.
SS_TYPES = {"noun": "n", "verb": "v", "adj": "as", "adv": "r"}

# ss_type -> part of speech word in the input; satellite adjectives (s) are adjectives.
POS_WORD = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}

# ss_type -> the prefix its lexicographer file names carry (a consistency check).
LEX_PREFIX = {"n": "noun.", "v": "verb.", "a": "adj.", "s": "adj.", "r": "adv."}

# An adjective's syntactic marker, appended to the word in data.adj: (a), (p) or (ip).
ADJ_MARKER = re.compile(r"\((?:a|p|ip)\)$")

# The start of the examples: a double quote that opens the gloss or follows a ";".
EXAMPLE_START = re.compile(r'(?:^|;)\s*"')

# A final example introduced by ":" or "," instead of ";" (48 glosses): the quoted text
# runs to the end of the gloss and holds no other double quote.
FINAL_EXAMPLE = re.compile(r'[:,]\s*"[^"]*"$')

SPLITS = [("train", 90), ("validation", 95), ("test", 100)]   # name, end of its bucket range


class FormatError(Exception):
    """A line of a database file that does not follow wndb(5WN)."""


def definition_of(gloss):
    """The definition part of a gloss: the text before its quoted examples, without the
    separators (";", ",", ":", spaces) that trail it. Other text is kept as written."""
    m = EXAMPLE_START.search(gloss)
    text = gloss[:m.start()] if m else gloss
    m = FINAL_EXAMPLE.search(text)
    # "e.g., \"...\"" and the like keep their quote: there the quote is part of the definition.
    if m and not re.search(r"\b(?:e\.g|i\.e)\.$", text[:m.start()]):
        text = text[:m.start()]
    text = text.rstrip(" ;,:")
    # A definition that ends in an unmatched double quote (three glosses): the quote closes an
    # example whose opening quote is missing, the part after the last ";", or is a stray.
    if text.endswith('"') and text.count('"') % 2 == 1:
        text = text[:text.rfind(";")] if ";" in text else text[:-1]
        text = text.rstrip(" ;,:")
    return text


def read_tagged(wordnet_dir):
    """The synsets that hold a sense tagged in the semantic concordances, as (file suffix,
    offset) pairs: index.pos lists a lemma's synset offsets in sense order, tagged senses first,
    and tagsense_cnt says how many are tagged."""
    tagged = set()
    for suffix, letter in FILES:
        path = os.path.join(wordnet_dir, "index." + suffix)
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if raw.startswith(b"  "):           # licence header
                    continue
                fields = raw.decode("ascii").split()
                try:
                    if fields[1] != letter:
                        raise FormatError("pos %r, expected %r" % (fields[1], letter))
                    synset_cnt = int(fields[2])
                    p_cnt = int(fields[3])
                    tagsense_cnt = int(fields[5 + p_cnt])
                    offsets = fields[6 + p_cnt:]
                    if len(offsets) != synset_cnt or tagsense_cnt > synset_cnt:
                        raise FormatError("%d offsets, synset_cnt %d, tagsense_cnt %d"
                                          % (len(offsets), synset_cnt, tagsense_cnt))
                except (IndexError, ValueError, FormatError) as e:
                    raise FormatError("%s: line %d: %s" % (path, lineno, e)) from None
                for offset in offsets[:tagsense_cnt]:
                    tagged.add((suffix, offset))
    return tagged


def parse_data_line(line):
    """One synset line of data.pos -> (offset, lex_filenum, ss_type, words, gloss)."""
    f = line.split(" ")
    offset, lex_filenum, ss_type = f[0], int(f[1]), f[2]
    w_cnt = int(f[3], 16)
    words = [f[4 + 2 * i] for i in range(w_cnt)]
    i = 4 + 2 * w_cnt
    p_cnt = int(f[i])
    i += 1 + 4 * p_cnt                      # pointer_symbol synset_offset pos source/target
    if ss_type == "v":                      # frames: f_cnt + f_num w_num [+ f_num w_num...]
        f_cnt = int(f[i])
        i += 1 + 3 * f_cnt
    if f[i] != "|":
        raise FormatError("no '|' before the gloss at field %d" % i)
    gloss = line.split(" ", i + 1)[i + 1].strip(" ")   # the text after "| ", as written
    if not words or len(offset) != 8 or not offset.isdigit():
        raise FormatError("bad synset header")
    return offset, lex_filenum, ss_type, words, gloss


def read_rows(wordnet_dir, keep):
    """Rows for the synsets keep(suffix, offset) accepts, in file order, checking each line's
    synset_offset against its byte offset."""
    rows = []
    for suffix, _ in FILES:
        path = os.path.join(wordnet_dir, "data." + suffix)
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        lineno = 0
        while pos < len(data):
            end = data.find(b"\n", pos)
            end = len(data) if end < 0 else end
            raw = data[pos:end]
            lineno += 1
            start, pos = pos, end + 1
            if raw.startswith(b"  "):               # licence header
                continue
            try:
                line = raw.decode("ascii")
                offset, lex_filenum, ss_type, words, gloss = parse_data_line(line)
                if int(offset) != start:
                    raise FormatError("synset_offset %s is not the line's byte offset %d"
                                      % (offset, start))
                if ss_type not in SS_TYPES[suffix]:
                    raise FormatError("ss_type %r in data.%s" % (ss_type, suffix))
                if not 0 <= lex_filenum < len(LEXNAMES) \
                        or not LEXNAMES[lex_filenum].startswith(LEX_PREFIX[ss_type]):
                    raise FormatError("lex_filenum %d for ss_type %r" % (lex_filenum, ss_type))
            except (UnicodeDecodeError, IndexError, ValueError, FormatError) as e:
                raise FormatError("%s: line %d: %s" % (path, lineno, e)) from None
            if not keep(suffix, offset):
                continue
            word = words[0]
            if suffix == "adj":
                word = ADJ_MARKER.sub("", word)
            lemma = word.replace("_", " ")
            target = definition_of(gloss)
            if not lemma or not target:
                raise FormatError("%s: line %d: empty lemma or definition" % (path, lineno))
            rows.append({
                "input": "%s (%s)" % (lemma, POS_WORD[ss_type]),
                "target": target,
                "lexname": LEXNAMES[lex_filenum],
                "pos": POS_WORD[ss_type],
                "synset": "%s-%s" % (offset, ss_type),
                "_lemma": lemma,
            })
    return rows


def sha256_int(text):
    """The first 8 bytes of the SHA-256 of text (UTF-8) as an integer."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def split_of(lemma):
    """train / validation / test from the hash of the lower-cased lemma."""
    bucket = sha256_int(lemma.lower()) % 100
    for name, end in SPLITS:
        if bucket < end:
            return name
    raise AssertionError(bucket)


def encode_row(row):
    """One JSONL line (with its "\\n") for a row, fields in a fixed order."""
    obj = {k: row[k] for k in ("input", "target", "lexname", "pos", "synset")}
    for k, v in obj.items():
        if not v or any(ord(c) < 0x20 or c == "\x7f" for c in v):
            raise FormatError("row %s: field %s is empty or holds a control character"
                              % (row["synset"], k))
    return json.dumps(obj, ensure_ascii=False) + "\n"


def check_lexnames_file(wordnet_dir):
    """If the database has a lexnames file, its names must be LEXNAMES."""
    path = os.path.join(wordnet_dir, "lexnames")
    if not os.path.exists(path):
        return
    with open(path, encoding="ascii") as f:
        names = [line.split()[1] for line in f if line.strip()]
    if names != LEXNAMES:
        raise FormatError("%s: names differ from lexnames(5WN)" % path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="Build the WordNet definition data set.")
    ap.add_argument("--wordnet-dir", default="/usr/share/wordnet",
                    help="directory of data.noun, index.noun, ... (default %(default)s)")
    ap.add_argument("--out-dir", default=here, help="output directory (default: the script's)")
    ap.add_argument("--all", action="store_true",
                    help="keep every synset, not only those with a tagged sense")
    args = ap.parse_args()

    try:
        check_lexnames_file(args.wordnet_dir)
        if args.all:
            keep = lambda suffix, offset: True
        else:
            tagged = read_tagged(args.wordnet_dir)
            keep = lambda suffix, offset: (suffix, offset) in tagged
        rows = read_rows(args.wordnet_dir, keep)
    except (OSError, FormatError) as e:
        print("extract.py: %s" % e, file=sys.stderr)
        return 1

    by_split = {name: [] for name, _ in SPLITS}
    for row in rows:
        by_split[split_of(row["_lemma"])].append(row)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, _ in SPLITS:
        part = sorted(by_split[name], key=lambda r: hashlib.sha256(r["synset"].encode()).digest())
        text = "".join(encode_row(r) for r in part)
        path = os.path.join(args.out_dir, name + ".jsonl")
        with open(path, "wb") as f:
            f.write(text.encode("utf-8"))
        ins = [len(r["input"].encode()) for r in part]
        tgs = [len(r["target"].encode()) for r in part]
        print("%-16s %6d rows %9d bytes  input bytes max %3d mean %5.1f  target bytes max %3d "
              "mean %5.1f" % (name + ".jsonl", len(part), len(text.encode("utf-8")), max(ins),
                              sum(ins) / len(ins), max(tgs), sum(tgs) / len(tgs)))
    with open(os.path.join(args.out_dir, "labels.txt"), "wb") as f:
        f.write("".join(n + "\n" for n in LEXNAMES).encode("ascii"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
