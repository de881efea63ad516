"""Writes tests/data/heads_configs/*.json: the config.json that transformers' save_pretrained writes
for every T5 / MT5 / UMT5 head class (tests/test_heads_config.c parses them).

    python ref/make_heads_configs.py      (torch, transformers; written with transformers 5.24)

Each file is <name>.json, the config.json exactly as written, for a tiny model (d_model 16). The
classes: {T5, MT5, UMT5} x {ForConditionalGeneration, EncoderModel, ForSequenceClassification,
ForTokenClassification, ForQuestionAnswering} with the default labels, a few classifiers with
named labels, problem types and a classifier dropout, and fat5's own
Fat5EncoderForSequenceClassification (not a transformers class: MT5EncoderModel's config.json with
its architecture name, labels and "classifier_pooling" added, as fat5 writes it).
"""
import json
import os
import tempfile

import transformers as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "heads_configs")
SHAPE = dict(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_decoder_layers=1, num_heads=4)
CONFIGS = {"T5": tf.T5Config, "MT5": tf.MT5Config, "UMT5": tf.UMT5Config}
CLASSES = ["ForConditionalGeneration", "EncoderModel", "ForSequenceClassification", "ForTokenClassification",
           "ForQuestionAnswering"]


def saved_config(model):
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            return f.read()


def write(name, text):
    with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as f:
        f.write(text)


def main():
    os.makedirs(OUT, exist_ok=True)
    for prefix, cfg_class in CONFIGS.items():
        for cls in CLASSES:
            write(prefix + cls, saved_config(getattr(tf, prefix + cls)(cfg_class(**SHAPE))))
    # three named labels, single-label cross-entropy, a classifier dropout (id2label only: 5.x writes
    # "label2id": null)
    c = tf.T5Config(**SHAPE, id2label={0: "neg", 1: "neutral", 2: "pos"},
                    problem_type="single_label_classification", classifier_dropout=0.1)
    write("T5ForSequenceClassification_named3", saved_config(tf.T5ForSequenceClassification(c)))
    # regression, one output
    c = tf.MT5Config(**SHAPE, num_labels=1, problem_type="regression")
    write("MT5ForSequenceClassification_regression", saved_config(tf.MT5ForSequenceClassification(c)))
    # multi-label, four outputs with both maps
    names = ["a", "b", "c", "d"]
    c = tf.UMT5Config(**SHAPE, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)},
                      problem_type="multi_label_classification", classifier_dropout=0.25)
    write("UMT5ForSequenceClassification_multi4", saved_config(tf.UMT5ForSequenceClassification(c)))
    # token labels with non-ASCII, quote and backslash characters, both maps
    names = ["O", "B-Pérson", 'I-"quoted"', "日本\\語"]
    c = tf.T5Config(**SHAPE, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    write("T5ForTokenClassification_unicode", saved_config(tf.T5ForTokenClassification(c)))
    # fat5's encoder-only sequence classifier
    c = tf.MT5Config(**SHAPE, id2label={0: "x", 1: "y", 2: "z"}, label2id={"x": 0, "y": 1, "z": 2},
                     problem_type="single_label_classification", classifier_dropout=0.1)
    d = json.loads(saved_config(tf.MT5EncoderModel(c)))
    d["architectures"] = ["Fat5EncoderForSequenceClassification"]
    d["classifier_pooling"] = "mean"
    write("Fat5EncoderForSequenceClassification_mean", json.dumps(d, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
