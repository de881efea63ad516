#!/usr/bin/env python3
"""Fixture for the task heads' evaluation scores (tests/test_tasks.c), computed by the libraries
Hugging Face's example scripts use: seqeval (run_ner: entity-level precision, recall, F1 in its
default mode) and scikit-learn (run_classification: accuracy and macro-F1).

    python3 ref/make_task_metrics_fixture.py [--out tests/data/tasks/metrics.json]

Writes {"seqeval": [{"pred": [[tags]...], "gold": [[tags]...], "precision", "recall", "f1"}...],
        "single": [{"pred": [...], "gold": [...], "n_classes", "accuracy", "macro_f1"}...],
        "multi": [{"pred": [[0/1]...], "gold": [[0/1]...], "accuracy", "macro_f1"}...]}
Tag sequences are random over IOB2, IOBES and malformed tags (I- after O, type changes, bare
types, "B-", ".", "O"); seeds fixed, so a rerun writes the same file.
"""
import argparse, json, random, warnings

import numpy as np
from seqeval.metrics import f1_score, precision_score, recall_score
from sklearn.metrics import accuracy_score, f1_score as sk_f1

warnings.filterwarnings("ignore")
TAGS = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "E-LOC", "S-PER", "I-ORG", "B-ORG", "E-ORG", "S-ORG",
        "PER", "LOC", "B-", "I-MISC-X", "."]


def seqeval_case(rng, n_sent, max_len, tags):
    gold, pred = [], []
    for _ in range(n_sent):
        n = rng.randint(0, max_len)
        g = [rng.choice(tags) for _ in range(n)]
        p = [t if rng.random() < 0.6 else rng.choice(tags) for t in g]
        gold.append(g)
        pred.append(p)
    return {"pred": pred, "gold": gold, "precision": precision_score(gold, pred),
            "recall": recall_score(gold, pred), "f1": f1_score(gold, pred)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/tasks/metrics.json")
    a = ap.parse_args()
    rng = random.Random(12345)
    out = {"seqeval": [], "single": [], "multi": []}
    clean = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
    for k in range(60):
        out["seqeval"].append(seqeval_case(rng, rng.randint(1, 6), 12, clean if k < 20 else TAGS))
    for k in range(20):
        L = rng.randint(2, 8)
        n = rng.randint(1, 40)
        gold = [rng.randrange(L) for _ in range(n)]
        pred = [g if rng.random() < 0.5 else rng.randrange(L) for g in gold]
        out["single"].append({"pred": pred, "gold": gold, "n_classes": L, "accuracy": accuracy_score(gold, pred),
                              "macro_f1": sk_f1(gold, pred, average="macro", zero_division=0)})
    for k in range(20):
        L = rng.randint(2, 6)
        n = rng.randint(1, 30)
        gold = [[int(rng.random() < 0.4) for _ in range(L)] for _ in range(n)]
        pred = [[g if rng.random() < 0.7 else 1 - g for g in row] for row in gold]
        out["multi"].append({"pred": pred, "gold": gold, "accuracy": accuracy_score(np.array(gold), np.array(pred)),
                             "macro_f1": sk_f1(np.array(gold), np.array(pred), average="macro", zero_division=0)})
    with open(a.out, "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
