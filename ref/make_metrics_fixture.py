#!/usr/bin/env python3
"""Metric fixtures for fat5.h's C metrics (src/text_metrics.c): the values that rouge_score,
sacrebleu, nltk's Porter stemmer and the SQuAD v1.1 evaluation logic give on a fixed, varied set of
strings. Writes tests/data/metrics/metrics.json (tests/test_metrics.c reads it; `make test` needs
no Python).

    pip install rouge_score sacrebleu nltk
    python3 ref/make_metrics_fixture.py            # writes tests/data/metrics/metrics.json

Sources of the expected values:
  - ROUGE: rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"],
    use_stemmer=...).score(ref, pred) and .score_multi(refs, pred); corpus values are the
    arithmetic means of the per-prediction scores.
  - BLEU: sacrebleu.corpus_bleu(hyps, ref_streams) with its defaults (13a, 'exp' smoothing);
    a hypothesis with fewer references than the most gets None in the other streams, which
    sacrebleu skips.
  - Porter: nltk.stem.porter.PorterStemmer() (default mode NLTK_EXTENSIONS, the one
    rouge_score uses), .stem(word).
  - SQuAD v1.1: the official evaluate-v1.1.py is not a pip package, so its few functions
    (normalize_answer, f1_score, exact_match_score, metric_max_over_ground_truths and the
    averaging of evaluate()) are written out again below, statement for statement.
  - Lower case: Python's str.lower() on every code point it changes, one at a time
    (SQuAD's normalisation and rouge_score's tokenizer both start with it).
"""

import collections
import json
import os
import re
import string
import sys
from importlib.metadata import version

import sacrebleu
from nltk.stem.porter import PorterStemmer
from rouge_score import rouge_scorer

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "metrics", "metrics.json")


# --- SQuAD v1.1 evaluation logic (evaluate-v1.1.py) ----------------------------------------------
def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def squad_corpus(cases):
    f1 = exact_match = total = 0
    for pred, refs in cases:
        total += 1
        exact_match += metric_max_over_ground_truths(exact_match_score, pred, refs)
        f1 += metric_max_over_ground_truths(f1_score, pred, refs)
    return 100.0 * exact_match / total, 100.0 * f1 / total


# --- the texts ------------------------------------------------------------------------------------
LONG_REF = (
    "The committee met on Tuesday, 14 March 2023, to review the budget. After a long discussion, "
    "the members agreed that the new library would open in the autumn, provided that the "
    "contractors finished the roof before the rains. The chairwoman thanked the volunteers, who "
    "had collected 1,250 signatures, and noted that the city's contribution of $3.5 million was "
    "larger than expected. Several residents asked whether the parking lot would be free; the "
    "answer was that parking would cost 2.50 an hour during the day but nothing at night. The "
    "meeting ended at 9:45 p.m. with a vote of 7-2 in favour of the plan, and the next meeting "
    "was scheduled for the first week of May.")
LONG_PRED = (
    "On Tuesday 14 March 2023 the committee met to review the budget. After a lengthy "
    "discussion the members agreed the new library will open in autumn if the contractors finish "
    "the roof before the rain. The chairwoman thanked volunteers who collected 1,250 signatures "
    "and said the city contributed $3.5 million, more than expected. Residents asked if parking "
    "would be free; parking will cost 2.50 per hour by day and nothing at night. The meeting "
    "ended at 9:45 p.m. after a 7-2 vote for the plan; the next meeting is in early May.")

PAIRS = [
    ("The cat sat on the mat.", "The cat sat on the mat."),
    ("The Eiffel Tower, in Paris!", "the eiffel tower in paris"),
    ("a dog and an apple", "the dog and the apple"),
    ("theater another anthem", "the ater an other ant hem"),
    ("In 1990, 3.14 was pi; 1,000 people came.", "1990: 3.14 is pi and 1000 people"),
    ("", "something"),
    ("", ""),
    ("something", ""),
    ("  \t\n ", "word"),
    ("the the the cat cat", "the cat the cat"),
    ("cat cat cat cat", "cat"),
    ("Sentence one is here.\nSecond sentence follows.\n\nThird one.",
     "First sentence here.\nThe second follows closely.\nA third."),
    ("police killed the gunman\nthe gunman was shot", "police kill the gunman\ngunman killed by police"),
    ("one two three\nfour five", "one\ntwo three four\nfive"),
    ("a b c d e\nb d f", "b c\nd e a\nf b"),
    ("Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u00e0 Paris", "cafe creme brulee a paris"),
    ("na\u00efve r\u00e9sum\u00e9 of the caf\u00e9", "the na\u00efve r\u00e9sum\u00e9 caf\u00e9"),
    ("\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059", "\u6771\u4eac \u306f \u65e5\u672c"),
    ("\u0130stanbul and the \u212Aelvin scale", "istanbul and kelvin scale"),
    ("New\u00a0York City", "New York City"),
    ("\u00c9cole Normale, \u00c9MILE", "\u00e9cole normale \u00e9mile"),
    ("\u041c\u043e\u0441\u043a\u0432\u0430 is the capital", "\u043c\u043e\u0441\u043a\u0432\u0430 is a capital"),
    ("AT&amp;T said &quot;hello&quot; &lt;b&gt; &amp;lt;", "AT&T said \"hello\" <b> &lt;"),
    ("<skipped> a well-known e-mail for 3-4 pages", "a well-known email for 3 - 4 pages"),
    ("U.S.A. costs $5.00, 1,000.5 items; end.", "USA costs 5.00 dollars, 1000.5 items. end"),
    ("hyphen-\nated words  \n", "hyphenated words"),
    ("Don't stop: it's (really) [great] {ok} #1 @home 50% a+b=c x/y ~z |w| ^_^",
     "dont stop its really great ok 1 home 50 a b c x y z w"),
    ("The runners were running quickly toward the generalizations",
     "A runner runs quick; generalized running"),
    ("is was has it", "it is was has"),
    ("line one\r\nline two\r\n", "line one\nline two"),
    ("snake_case and camelCase words", "snake case and camel case words"),
    ("happiness, happily, happy, happier", "happy happiness happily"),
    ("relational conditional rational valenci hesitanci digitizer",
     "relate condition rational valence hesitance digitize"),
    ("tab\tseparated\u2003em\u3000space\u0085nel\u001cfs", "tab separated em space nel fs"),
    ("...,,, --- !!!", "..."),
    ("1. 2, 3.4 5,6 a.b c,d", "1 . 2 , 3.4 5,6 a . b c , d"),
    ("\u039f\u0394\u039f\u03a3 \u03a3\u039f\u03a6\u039f\u03a3 \u03a3",
     "\u03bf\u03b4\u03bf\u03c2 \u03c3\u03bf\u03c6\u03bf\u03c2 \u03c3"),
    ("\u0391\u03a3.\u0392 \u0391\u03a3'\u0392 \u0391\u03a3. \u0392 \u0391\u03a3\u0301 \u0391\u0301\u03a3 \u0391'\u03a3",
     "\u03b1\u03c3.\u03b2 \u03b1\u03c3'\u03b2 \u03b1\u03c2. \u03b2 \u03b1\u03c2\u0301 \u03b1\u0301\u03c2 \u03b1'\u03c2"),
    ("L'\u00c9T\u00c9 \u00c0 PARIS, \u00c7A VA", "l'\u00e9t\u00e9 \u00e0 paris \u00e7a va"),
    ("STRA\u1e9eE und \u00d6L", "stra\u00dfe und \u00f6l"),
    (LONG_PRED, LONG_REF),
]

# SQuAD cases with several references
SQUAD_MULTI = [
    ("Denver Broncos", ["Denver Broncos", "The Denver Broncos", "Broncos"]),
    ("the Broncos of Denver", ["Denver Broncos", "Broncos", "Carolina Panthers"]),
    ("1,000 people", ["1000", "one thousand people", "about 1,000"]),
    ("nothing", ["a b", "c d"]),
]

ROUGE_MULTI = [
    ("the cat sat on the mat", ["a cat was on a mat", "the cat sat on the mat today", "dogs"]),
    ("running runners run", ["run run run", "runners running"]),
    ("one two\nthree four", ["four three\ntwo one", "one two three four"]),
    # equal F-measures, different precision and recall: the first reference is kept
    ("a b c d", ["a b", "a b c d e f g h"]),
]

BLEU_CORPORA = [
    # hyps, refs per hyp (lists, possibly of different lengths)
    (["The cat sat on the mat.", "Hello, world!", "It is 3.14 or 3,14."],
     [["The cat is on the mat.", "There is a cat on the mat."], ["Hello world!"], ["It is 3.14, or 3,14 ."]]),
    (["xyz"], [["abc def"]]),
    (["a b"], [["a b c d e f g h"]]),
    (["a b c d e f g h i j"], [["a b c d"]]),
    (["one two three four five six", "seven eight"],
     [["one two three four five", "one two three four five six seven"], ["seven eight nine", "seven"]]),
    (["the the the the the the the"], [["the cat is on the mat", "there is a cat on the mat"]]),
    (["", "word"], [["", "a"], ["word"]]),
    ([LONG_PRED], [[LONG_REF]]),
    ([p for p, _ in PAIRS], [[r] for _, r in PAIRS]),
]

PORTER_WORDS = """
caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled sized
hopping tanned falling hissing fizzed failing filing happy sky relational conditional rational
valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli vietnamization
predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti
sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival
allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment
dependent adoption homologou communism activate angulariti homologous effective bowdlerize probate
rate cease controll roll skies dying lying tying news innings inning outings outing cannings
canning howe proceed exceed succeed dies flies died cried spied tried pies ties lies enjoy enjoying
enjoyment spy fly try cry by say says saying toy toys syzygy yyyy yyy yy y ay aya ayy ayyy
sayyying generously generalizations generalization general generate generator generation
fulli hopefulli carefulli logi analogi biologi geologi ideologi apologi trilogi alli tally
finally really totally ally rally dally bli abli possibly ably feasibli nobli humbli
running runner runners ran runs agree agreement agreeing disagree knee kneel kneeling
is was has his this thus its it as us a i an the be to of ies ied eed ed ing s ss sses
oed ied aied tied died eyed dyed
sky's don't well-known e-mail 1990s 2nd 3rd 4th 123 abc123 123abc test123ing x1y2z3 a1b2
connect connected connecting connection connections connective connectives connectively
communicate communication communications communicative computer computing compute computed
computation computational computers university universal universe universities
organization organize organizing organized organizer organizers organs organ
""".split()

ROOTS = ("connect relat hope agre happ sens generous form electr adjust depend adopt activ effect "
         "bowdler control roll hop fil fail tan fizz hiss fall conflat troubl siz motor plaster sing "
         "cr sp d l enjoy valen hesit digit conform radic differ vil analog vietnam predic oper feud "
         "decis call formal sensit sensib nation rational condit bak quick slow").split()
SUFFIXES = ("- s es ed ing ly er ers ation ational ness ful fulness ment ments ence ance able ible ize "
            "izer ization ism ist ity iti ive ively iveness ous ously ousness al ally alli ical icate "
            "iciti logi bli ent ently ant ion ions y ies ied eed e ate").split()


def main():
    rs = {st: rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=st)
          for st in (False, True)}
    kinds = ["rouge1", "rouge2", "rougeL", "rougeLsum"]

    def triple(s):
        return [s.precision, s.recall, s.fmeasure]

    out = {
        "about": "written by ref/make_metrics_fixture.py; see tests/data/metrics/README.md",
        "versions": {p: version(p) for p in ("rouge_score", "sacrebleu", "nltk")},
    }

    # Porter stemmer: the listed words, every root + suffix, and every token of the texts
    stemmer = PorterStemmer()
    words = list(PORTER_WORDS)
    for r in ROOTS:
        for s in SUFFIXES:
            words.append(r + ("" if s == "-" else s))
    tok = rs[False]._tokenizer
    for p, r in PAIRS:
        words += tok.tokenize(p) + tok.tokenize(r)
    seen, porter = set(), []
    for w in words:
        if w not in seen:
            seen.add(w)
            porter.append([w, stemmer.stem(w)])
    out["porter"] = porter

    # Python's lower case of every code point it changes
    out["lower"] = [[c, chr(c).lower()] for c in range(0x110000)
                    if not 0xD800 <= c < 0xE000 and chr(c).lower() != chr(c)]

    # SQuAD
    squad = [(p, [r]) for p, r in PAIRS] + SQUAD_MULTI
    out["squad"] = [{"pred": p, "refs": refs,
                     "em": [1.0 if exact_match_score(p, r) else 0.0 for r in refs],
                     "f1": [float(f1_score(p, r)) for r in refs]} for p, refs in squad]
    em, f1 = squad_corpus(squad)
    out["squad_corpus"] = {"em": em, "f1": f1}

    # ROUGE, pair by pair
    out["rouge"] = []
    for st in (False, True):
        for p, r in PAIRS:
            sc = rs[st].score(r, p)
            e = {"pred": p, "ref": r, "stem": int(st)}
            for k in kinds:
                e[k] = triple(sc[k])
            out["rouge"].append(e)
    # ROUGE corpora: all pairs (one reference each) and the several-reference set
    out["rouge_corpus"] = []
    for st in (False, True):
        for preds, refs in ([p for p, _ in PAIRS], [[r] for _, r in PAIRS]), \
                           ([p for p, _ in ROUGE_MULTI], [r for _, r in ROUGE_MULTI]):
            scores = [rs[st].score_multi(rr, p) for p, rr in zip(preds, refs)]
            e = {"stem": int(st), "preds": preds, "refs": refs}
            for k in kinds:
                e[k] = [sum(getattr(s[k], f) for s in scores) / len(scores)
                        for f in ("precision", "recall", "fmeasure")]
            out["rouge_corpus"].append(e)

    # BLEU: each corpus, and every pair as a corpus of one
    corpora = list(BLEU_CORPORA) + [([p], [[r]]) for p, r in PAIRS]
    out["bleu"] = []
    for hyps, refs in corpora:
        most = max(len(r) for r in refs)
        streams = [[r[k] if k < len(r) else None for r in refs] for k in range(most)]
        b = sacrebleu.corpus_bleu(hyps, streams)
        out["bleu"].append({"preds": hyps, "refs": refs, "score": b.score, "precisions": list(b.precisions),
                            "bp": b.bp, "sys_len": b.sys_len, "ref_len": b.ref_len,
                            "counts": list(b.counts), "totals": list(b.totals)})

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, ensure_ascii=True, separators=(",", ":"))
        f.write("\n")
    print(f"{OUT}: {len(porter)} stems, {len(out['lower'])} lower-case mappings, {len(out['squad'])} SQuAD cases, {len(out['rouge'])} ROUGE pairs, "
          f"{len(out['bleu'])} BLEU corpora", file=sys.stderr)


if __name__ == "__main__":
    main()
