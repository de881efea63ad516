#!/usr/bin/env python3
"""Oracle fixtures for every generate option of fat5_generate, produced with Hugging Face transformers.

  make_generate_options.py [--out tests/data] [--tf4-python PY] [--only FIXTURE]

writes

  <out>/<fixture>/generate_options.json   for t5_v10_relu_tied, t5_v11_gated_gelu_untied, umt5_gated_silu
  <out>/generate_warpers.json             the sampling filters applied to fixed logits

and prints, per fixture, a table saying whether each case's outputs (and scores) differ from the
same case run without the option under test.  Running it twice gives byte-identical files.

generate_options.json has generate.json's layout (see make_reference.py --generate):
{"transformers", "eos_token_id", "pad_token_id", "decoder_start_token_id", "cases": [...]}, each
case {"name", "options", "scores", "outputs"} plus, optionally:
  "transformers"   the version that produced the case when it is not the file's (group beam search
                   and constrained beam search, which transformers 5 moved to Hub repositories, are
                   run with transformers 4.56.2 in a separate virtual environment, see below);
  "step_scores"    (cases named "*_out") out.scores as [steps][rows][V], values rounded to 1e-7,
                   -inf written as the string "-inf";
  "step_logits"    (cases named "*_out") out.logits (output_logits=True), same layout;
  "beam_indices"   (beam "*_out" cases) out.beam_indices, one list per output row, trimmed like
                   the row's outputs.
"options" are exactly the keyword arguments given to model.generate (GenerationConfig names;
sequence_bias as a list of [[token ids], bias] pairs; eos_token_id possibly a list; decoder_input_ids
a list of per-input rows starting with the decoder start token).  "outputs" has one list per output
row (inputs * num_return_sequences, grouped by input): the generated ids after the decoder start
token and after any decoder_input_ids prefix, cut after the first token that is one of the EOS ids.
"scores": beam search: out.sequences_scores; greedy: the sum over the row's steps of
log_softmax(out.scores[t][row])[token], in double.

generate_warpers.json: {"transformers", "V", "rows": [[logits]], "cases": [{"name", "options",
"min_tokens_to_keep", "kept": [[sorted kept indices per row]], "values": [[processed value of each
kept index]]}]}: transformers' own warper classes applied in the order generate builds them
(temperature, top_k, top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff) to fp32 rows.

The transformers 4.x environment (the last 4.x release whose generation/utils.py still runs
_group_beam_search and _constrained_beam_search in core, without redirecting to the Hub):

  python3 -m venv --system-site-packages /work/scratch/venv-tf4
  /work/scratch/venv-tf4/bin/pip install "transformers==4.56.2"

The script re-runs itself there (``--tf4-worker``, option sets on stdin, results on stdout) and
checks that 4.56.2 and the main transformers agree on plain greedy and beam cases.
"""

import argparse
import json
import os
import subprocess
import sys
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import transformers  # noqa: E402
from make_reference import FIXTURES, chosen_scores, load_model, pad_batch, read_batch, trim_at_eos  # noqa: E402

DEFAULT_TF4_PYTHON = "/work/scratch/venv-tf4/bin/python"
TF4_VERSION = "4.56.2"


# ---------------------------------------------------------------------------
# running one option set


def eos_list(opts, model):
    """The EOS ids in force for a run (the option, else the model's)."""
    eos = opts.get("eos_token_id", model.generation_config.eos_token_id)
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]



def enc(x):
    """A float for JSON: rounded to 1e-7, infinities as strings."""
    x = float(x)
    if x == float("inf"):
        return "inf"
    if x == float("-inf"):
        return "-inf"
    if x != x:
        return "nan"
    return round(x, 7)


def run_case(model, input_ids, attention_mask, opts, with_out=False):
    """model.generate with opts; returns {"outputs", "scores"} (+ step data when with_out)."""
    kwargs = dict(opts)
    prefix = 1
    if "decoder_input_ids" in kwargs:
        kwargs["decoder_input_ids"] = torch.tensor(kwargs["decoder_input_ids"], dtype=torch.long)
        prefix = kwargs["decoder_input_ids"].shape[1]
    beam = opts.get("num_beams", 1) > 1
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, output_scores=True,
                             output_logits=with_out, return_dict_in_generate=True, **kwargs)
    eos_ids = eos_list(opts, model)
    outputs = [trim_at_eos(r, eos_ids) for r in out.sequences[:, prefix:].tolist()]
    scores = chosen_scores(out, outputs, beam)
    res = {"outputs": outputs, "scores": scores}
    if with_out:
        res["step_scores"] = [[[enc(v) for v in r] for r in s.tolist()] for s in out.scores]
        res["step_logits"] = [[[enc(v) for v in r] for r in s.tolist()] for s in out.logits]
        if beam:
            bi = out.beam_indices.tolist()
            res["beam_indices"] = [[int(x) for x in bi[r][: len(outputs[r])]] for r in range(len(outputs))]
    return res


def load_fixture(fixture_dir):
    model = load_model(fixture_dir)
    batch = read_batch(os.path.join(fixture_dir, "batch.json"))
    input_ids, attention_mask, _ = pad_batch(batch)
    return model, batch, input_ids, attention_mask


def tf4_worker(fixture_dir):
    """Run the option sets read from stdin (JSON list of [opts, with_out]) and print the results."""
    import warnings
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    # transformers 4.x's constrained beam search fails in finalize when output_scores is on and a
    # row ends on unfinished beams that never met their constraints (their beam_indices are None);
    # the beam indices are bookkeeping only, so finalize is run without them, except in the "*_out"
    # cases, whose beam_indices are recorded (those cases are chosen so that finalize succeeds).
    from transformers.generation.beam_search import ConstrainedBeamSearchScorer
    finalize = ConstrainedBeamSearchScorer.finalize
    keep_indices = [False]

    def finalize_without_indices(self, *args, **kwargs):
        if not keep_indices[0]:
            kwargs["beam_indices"] = None
        return finalize(self, *args, **kwargs)
    ConstrainedBeamSearchScorer.finalize = finalize_without_indices
    model, _, input_ids, attention_mask = load_fixture(fixture_dir)
    jobs = json.load(sys.stdin)
    results = []
    for opts, with_out in jobs:
        keep_indices[0] = with_out
        results.append(run_case(model, input_ids, attention_mask, opts, with_out))
    json.dump({"transformers": transformers.__version__, "results": results}, sys.stdout)


def run_tf4(tf4_python, fixture_dir, jobs):
    """Run jobs ([opts, with_out] pairs) with the transformers 4.x interpreter."""
    proc = subprocess.run([tf4_python, os.path.abspath(__file__), "--tf4-worker", fixture_dir],
                          input=json.dumps(jobs), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"transformers 4.x worker failed on {fixture_dir}")
    data = json.loads(proc.stdout)
    if data["transformers"] != TF4_VERSION:
        raise SystemExit(f"{tf4_python} has transformers {data['transformers']}, expected {TF4_VERSION}")
    return data["results"]


# ---------------------------------------------------------------------------
# the cases


def most_common(tokens, exclude=()):
    """Tokens by decreasing frequency (ties: smaller id first), without exclude."""
    counts = Counter(t for t in tokens if t not in exclude)
    return [t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def hot_token(fixture_dir):
    """The frequent token that generate.json uses as EOS in its "hot" cases."""
    with open(os.path.join(fixture_dir, "generate.json")) as f:
        for case in json.load(f)["cases"]:
            if "eos_token_id" in case["options"]:
                return case["options"]["eos_token_id"]
    raise SystemExit(f"{fixture_dir}/generate.json has no hot case")


def pick_tokens(model, input_ids, attention_mask, fixture_dir):
    """Token ids chosen from the fixture's plain greedy / beam runs so that each option matters."""
    g = run_case(model, input_ids, attention_mask, dict(do_sample=False, max_new_tokens=16))["outputs"]
    b = run_case(model, input_ids, attention_mask,
                 dict(do_sample=False, max_new_tokens=12, num_beams=4, num_return_sequences=2))["outputs"]
    special = {model.generation_config.eos_token_id, model.generation_config.pad_token_id}
    vocab = model.config.vocab_size
    gfreq = most_common([t for r in g for t in r], special)
    bfreq = most_common([t for r in b for t in r], special)
    bigrams = most_common([(r[i], r[i + 1]) for r in g for i in range(len(r) - 1) if r[i] != r[i + 1]])
    seen = set(t for r in g + b for t in r)
    unseen = [t for t in range(2, vocab) if t not in seen and t not in special]
    hot = hot_token(fixture_dir)
    tk = dict(
        hot=hot,
        A=gfreq[0],                                   # most frequent greedy token
        A2=gfreq[1] if len(gfreq) > 1 else unseen[-1],
        BA=bfreq[0],                                  # most frequent beam token
        first_g=sorted(set(r[0] for r in g)),         # first greedy tokens
        first_b=sorted(set(r[0] for r in b)),
        bigram=list(bigrams[0]) if bigrams else [gfreq[0], unseen[1]],
        u1=unseen[0], u2=unseen[len(unseen) // 2], u3=unseen[-1],
        other_eos=[t for t in gfreq if t != hot][1] if len([t for t in gfreq if t != hot]) > 1 else unseen[1],
        rows=input_ids.shape[0],
        start=model.config.decoder_start_token_id,
        g=g, b=b,
    )
    return tk


def option_cases(tk):
    """[(name, options, tested keys)] run with the main transformers; the base run of a case is
    its options without the tested keys."""
    G = dict(do_sample=False, max_new_tokens=16)
    B = dict(do_sample=False, max_new_tokens=12, num_beams=4, num_return_sequences=2)
    A, A2, BA, hot = tk["A"], tk["A2"], tk["BA"], tk["hot"]
    u1, u2, u3 = tk["u1"], tk["u2"], tk["u3"]
    s = tk["start"]
    rows = tk["rows"]
    # decoder prefixes: per-row tokens (rows differ), seen tokens so that penalties see them
    pool = [A, A2, BA] + tk["first_g"] + [u1, u2]
    p1 = [[s, pool[r % len(pool)]] for r in range(rows)]
    p3 = [[s, A, A, pool[(r + 1) % len(pool)]] if r % 2 == 0 else [s, A2, pool[r % len(pool)], A2]
          for r in range(rows)]
    eos3 = [hot, tk["other_eos"], 1]
    bias = [[[A], -3.0], [[A2], 2.0], [tk["bigram"], -6.0], [[A, u1], 8.0]]
    bias_b = [[[BA], -2.5], [[u2], 1.5], [[BA, u3], 9.0]]
    c = []

    def add(name, opts, tested):
        c.append((name, opts, tested))

    for m, base in (("greedy", G), ("beam", B)):
        top = A if m == "greedy" else BA
        first = tk["first_g"] if m == "greedy" else tk["first_b"]
        add(f"{m}_forced_bos", dict(base, forced_bos_token_id=u1), ["forced_bos_token_id"])
        add(f"{m}_forced_eos", dict(base, forced_eos_token_id=1), ["forced_eos_token_id"])
        add(f"{m}_eos_list", dict(base, eos_token_id=eos3), ["eos_token_id"])
        add(f"{m}_suppress", dict(base, suppress_tokens=[top, u2]), ["suppress_tokens"])
        add(f"{m}_begin_suppress", dict(base, begin_suppress_tokens=first), ["begin_suppress_tokens"])
        add(f"{m}_bad_single", dict(base, bad_words_ids=[[top]]), ["bad_words_ids"])
        add(f"{m}_bad_multi", dict(base, bad_words_ids=[tk["bigram"], [u1, u2, u3], [A2]]), ["bad_words_ids"])
        add(f"{m}_bad_repeat", dict(base, bad_words_ids=[[top, top, top]]), ["bad_words_ids"])
        add(f"{m}_seq_bias", dict(base, sequence_bias=bias if m == "greedy" else bias_b), ["sequence_bias"])
        # encoder_repetition_penalty > 1 pulls the encoder's tokens into the output, so that the
        # encoder's n-grams come up and the ban matters
        add(f"{m}_enc_ngram2", dict(base, encoder_repetition_penalty=4.0, encoder_no_repeat_ngram_size=2),
            ["encoder_no_repeat_ngram_size"])
        add(f"{m}_enc_ngram3", dict(base, encoder_repetition_penalty=4.0, encoder_no_repeat_ngram_size=3),
            ["encoder_no_repeat_ngram_size"])
        add(f"{m}_enc_rep15", dict(base, encoder_repetition_penalty=1.5), ["encoder_repetition_penalty"])
        add(f"{m}_enc_rep07", dict(base, encoder_repetition_penalty=0.7), ["encoder_repetition_penalty"])
        add(f"{m}_exp_decay", dict(base, eos_token_id=hot, exponential_decay_length_penalty=[3, 1.6]),
            ["exponential_decay_length_penalty"])
        add(f"{m}_renorm_rep", dict(base, repetition_penalty=1.6, renormalize_logits=True), ["renormalize_logits"])
        add(f"{m}_remove_invalid", dict(base, remove_invalid_values=True), ["remove_invalid_values"])
        add(f"{m}_prefix1", dict(base, decoder_input_ids=p1), ["decoder_input_ids"])
        add(f"{m}_prefix3", dict(base, decoder_input_ids=p3), ["decoder_input_ids"])
        add(f"{m}_prefix3_ngram", dict(base, decoder_input_ids=p3, no_repeat_ngram_size=2), ["no_repeat_ngram_size"])
        add(f"{m}_prefix3_rep", dict(base, decoder_input_ids=p3, repetition_penalty=1.8), ["repetition_penalty"])
        add(f"{m}_min_length", dict(base, eos_token_id=top, min_length=6), ["min_length"])
        add(f"{m}_prefix3_min_length", dict(base, decoder_input_ids=p3, eos_token_id=top, min_length=7),
            ["min_length"])
        ml = {k: v for k, v in base.items() if k != "max_new_tokens"}
        add(f"{m}_max_length", dict(ml, max_length=9), ["max_length"])
        add(f"{m}_prefix3_max_length", dict(ml, decoder_input_ids=p3, max_length=9), ["max_length"])
    combos = [
        ("greedy_combo_filters", dict(G, suppress_tokens=[u2], bad_words_ids=[[A, A]], sequence_bias=bias,
                                      eos_token_id=eos3, min_length=5, repetition_penalty=1.3)),
        ("beam_combo_bos_decay", dict(B, forced_bos_token_id=u1, no_repeat_ngram_size=2,
                                      encoder_repetition_penalty=1.3, eos_token_id=hot,
                                      exponential_decay_length_penalty=[4, 1.4], length_penalty=0.8)),
        ("beam_combo_prefix", dict(B, decoder_input_ids=p1, begin_suppress_tokens=tk["first_b"],
                                   sequence_bias=bias_b, forced_eos_token_id=1, min_new_tokens=3)),
        ("greedy_combo_prefix", dict(G, decoder_input_ids=p3, encoder_no_repeat_ngram_size=2,
                                     suppress_tokens=[A2], renormalize_logits=True, max_length=12,
                                     max_new_tokens=None)),
    ]
    for name, opts in combos:
        opts = {k: v for k, v in opts.items() if v is not None}
        keep = ("do_sample", "max_new_tokens", "num_beams", "num_return_sequences")
        add(name, opts, [k for k in opts if k not in keep and not (k == "decoder_input_ids" and "beam" in name)])
    GO = dict(do_sample=False, max_new_tokens=6)
    BO = dict(do_sample=False, max_new_tokens=4, num_beams=2, num_return_sequences=2)
    add("greedy_out", dict(GO, repetition_penalty=1.5), ["repetition_penalty"])
    add("greedy_renorm_out", dict(GO, repetition_penalty=1.5, renormalize_logits=True), ["renormalize_logits"])
    add("beam_out", dict(BO, repetition_penalty=1.5), ["repetition_penalty"])
    add("beam_forced_bos_out", dict(BO, forced_bos_token_id=u1), ["forced_bos_token_id"])
    return c


def tf4_cases(tk):
    """[(name, options, tested keys)] for group and constrained beam search (transformers 4.x)."""
    A, A2, BA, hot = tk["A"], tk["A2"], tk["BA"], tk["hot"]
    u1, u2, u3 = tk["u1"], tk["u2"], tk["u3"]
    c = []
    for name, extra in (
        ("group_b4_g2_dp05", dict(num_beams=4, num_beam_groups=2, diversity_penalty=0.5, num_return_sequences=2)),
        ("group_b4_g2_dp2", dict(num_beams=4, num_beam_groups=2, diversity_penalty=2.0, num_return_sequences=4)),
        ("group_b4_g4_dp05", dict(num_beams=4, num_beam_groups=4, diversity_penalty=0.5, num_return_sequences=4)),
        ("group_b8_g4_dp2", dict(num_beams=8, num_beam_groups=4, diversity_penalty=2.0, num_return_sequences=8)),
        ("group_b8_g2_dp05_hot", dict(num_beams=8, num_beam_groups=2, diversity_penalty=0.5, num_return_sequences=3,
                                      eos_token_id=hot, length_penalty=0.6)),
    ):
        c.append((name, dict(do_sample=False, max_new_tokens=10, **extra), ["num_beam_groups", "diversity_penalty"]))
    for name, extra in (
        ("constrained_one", dict(force_words_ids=[[u1, u2]])),
        ("constrained_two", dict(force_words_ids=[[u3], [A2, u1]])),
        ("constrained_disj", dict(force_words_ids=[[[u1], [u2]]])),
        ("constrained_hot", dict(force_words_ids=[[u2, A2]], eos_token_id=hot, length_penalty=0.6)),
    ):
        c.append((name, dict(do_sample=False, max_new_tokens=10, num_beams=4, num_return_sequences=2, **extra),
                  ["force_words_ids"]))
    # with output_scores / output_logits (step_scores, step_logits, beam_indices): early stops in the
    # later groups (a frequent EOS), and rows that end on the length limit (finalize's indices)
    for name, extra in (
        ("group_b4_g2_dp05_hot_out", dict(num_beams=4, num_beam_groups=2, diversity_penalty=0.5,
                                          num_return_sequences=4, max_new_tokens=6, eos_token_id=hot)),
        ("group_b6_g3_dp1_out", dict(num_beams=6, num_beam_groups=3, diversity_penalty=1.0, num_return_sequences=6,
                                     max_new_tokens=5)),
        # groups done early next to groups that run to the limit (indices read from finished groups' rows)
        ("group_b4_g2_dp2_hot_early_out", dict(num_beams=4, num_beam_groups=2, diversity_penalty=2.0,
                                               num_return_sequences=4, max_new_tokens=8, eos_token_id=hot,
                                               early_stopping=True)),
    ):
        c.append((name, dict(do_sample=False, **extra), ["num_beam_groups", "diversity_penalty"]))
    for name, extra in (
        ("constrained_hot_out", dict(force_words_ids=[[A2, u1]], eos_token_id=hot)),
        ("constrained_disj_out", dict(force_words_ids=[[[A2], [u3]]])),
        ("constrained_eos_out", dict(force_words_ids=[[A]], eos_token_id=hot)),   # hypotheses ending in EOS
    ):
        c.append((name, dict(do_sample=False, max_new_tokens=6, num_beams=4, num_return_sequences=2, **extra),
                  ["force_words_ids"]))
    del A
    return c


AGREEMENT_CASES = [
    dict(do_sample=False, max_new_tokens=16),
    dict(do_sample=False, max_new_tokens=12, repetition_penalty=1.5, no_repeat_ngram_size=3),
    dict(do_sample=False, max_new_tokens=12, num_beams=4, num_return_sequences=2),
    dict(do_sample=False, max_new_tokens=12, num_beams=4, num_return_sequences=2, length_penalty=0.6,
         suppress_tokens=[5], bad_words_ids=[[7]]),
]


def without(opts, keys):
    return {k: v for k, v in opts.items() if k not in keys}


def scores_close(a, b, tol=1e-5):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


# Cases expected to change nothing: on finite logits remove_invalid_values is the identity, and
# for greedy renormalize_logits leaves argmax and log_softmax unchanged (it shows in step_scores).
EXPECTED_SAME = ("_remove_invalid", "greedy_renorm_rep")


def write_options_file(path, header, cases):
    """generate.json's layout; large members one row a line."""
    def rows(key, vals, indent):
        return '"%s": [\n%s\n%s]' % (key, ",\n".join(indent + "  " + json.dumps(r, separators=(",", ":"))
                                                    for r in vals), indent)
    with open(path, "w") as f:
        f.write('{\n  "transformers": %s,\n  "eos_token_id": %d,\n  "pad_token_id": %d,\n'
                '  "decoder_start_token_id": %d,\n  "cases": [\n' % header)
        parts = []
        for c in cases:
            s = '    {"name": %s,\n' % json.dumps(c["name"])
            if "transformers" in c:
                s += '      "transformers": %s,\n' % json.dumps(c["transformers"])
            s += '      "options": %s,\n' % json.dumps(c["options"], separators=(", ", ": "))
            s += '      "scores": %s,\n' % json.dumps([round(x, 7) for x in c["scores"]])
            s += "      " + rows("outputs", c["outputs"], "      ")
            for key in ("beam_indices",):
                if key in c:
                    s += ",\n      " + rows(key, c[key], "      ")
            for key in ("step_scores", "step_logits"):
                if key in c:
                    steps = ",\n".join("        [\n" + ",\n".join("          " + json.dumps(r, separators=(",", ":"))
                                                               for r in st) + "\n        ]" for st in c[key])
                    s += ',\n      "%s": [\n%s\n      ]' % (key, steps)
            parts.append(s + "}")
        f.write(",\n".join(parts) + "\n  ]\n}\n")


def make_options_fixture(fixture_dir, tf4_python):
    """generate_options.json for one fixture; returns its differs table rows."""
    model, _, input_ids, attention_mask = load_fixture(fixture_dir)
    tk = pick_tokens(model, input_ids, attention_mask, fixture_dir)
    name = os.path.basename(fixture_dir)
    print(f"\n{name}: hot {tk['hot']}, A {tk['A']}, A2 {tk['A2']}, BA {tk['BA']}, first_g {tk['first_g']}, "
          f"first_b {tk['first_b']}, bigram {tk['bigram']}, unseen {tk['u1']},{tk['u2']},{tk['u3']}")
    cases, table = [], []
    for cname, opts, tested in option_cases(tk):
        out = cname.endswith("_out")
        res = run_case(model, input_ids, attention_mask, opts, with_out=out)
        base = run_case(model, input_ids, attention_mask, without(opts, tested), with_out=out)
        table.append((cname, res["outputs"] != base["outputs"],
                      not scores_close(res["scores"], base["scores"])
                      or (out and res["step_scores"] != base["step_scores"])))
        cases.append(dict(name=cname, options=opts, **res))
    # group / constrained beam search, and the agreement check, with transformers 4.x
    t4 = tf4_cases(tk)
    jobs = [[o, cn.endswith("_out")] for cn, o, _ in t4] + [[without(o, t), cn.endswith("_out")] for cn, o, t in t4]
    jobs += [[o, False] for o in AGREEMENT_CASES]
    res4 = run_tf4(tf4_python, fixture_dir, jobs)
    n = len(t4)
    for i, (cname, opts, tested) in enumerate(t4):
        res, base = res4[i], res4[n + i]
        out = cname.endswith("_out")
        table.append((cname, res["outputs"] != base["outputs"],
                      not scores_close(res["scores"], base["scores"])
                      or (out and res["step_scores"] != base["step_scores"])))
        cases.append(dict(name=cname, transformers=TF4_VERSION, options=opts, **res))
    agree = []
    for j, opts in enumerate(AGREEMENT_CASES):
        mine = run_case(model, input_ids, attention_mask, opts)
        theirs = res4[2 * n + j]
        ok = mine["outputs"] == theirs["outputs"] and scores_close(mine["scores"], theirs["scores"], 1e-6)
        agree.append(ok)
    print(f"  transformers {transformers.__version__} vs {TF4_VERSION} on {len(AGREEMENT_CASES)} plain "
          f"greedy/beam cases: {'identical outputs, scores within 1e-6' if all(agree) else 'DISAGREE ' + str(agree)}")
    if not all(agree):
        raise SystemExit("transformers 4.x and 5.x disagree")
    header = (json.dumps(transformers.__version__), model.generation_config.eos_token_id,
              model.generation_config.pad_token_id, model.config.decoder_start_token_id)
    path = os.path.join(fixture_dir, "generate_options.json")
    write_options_file(path, header, cases)
    print(f"  wrote {path} ({len(cases)} cases, {os.path.getsize(path)} bytes)")
    return table


# ---------------------------------------------------------------------------
# sampling filters (generate_warpers.json)

WARPER_V = 64
WARPER_CASES = [
    ("temperature_07", dict(temperature=0.7), 1),
    ("top_k_1", dict(top_k=1), 1),
    ("top_k_5", dict(top_k=5), 1),
    ("top_k_1_keep2", dict(top_k=1), 2),
    ("top_k_100", dict(top_k=100), 1),
    ("top_p_09", dict(top_p=0.9), 1),
    ("top_p_001", dict(top_p=0.01), 1),
    ("top_p_001_keep2", dict(top_p=0.01), 2),
    ("min_p_01", dict(min_p=0.1), 1),
    ("min_p_099_keep2", dict(min_p=0.99), 2),
    ("typical_p_09", dict(typical_p=0.9), 1),
    ("typical_p_001_keep2", dict(typical_p=0.01), 2),
    ("epsilon_3e-4", dict(epsilon_cutoff=3e-4), 1),
    ("epsilon_02_keep2", dict(epsilon_cutoff=0.2), 2),
    ("eta_3e-4", dict(eta_cutoff=3e-4), 1),
    ("eta_02_keep2", dict(eta_cutoff=0.2), 2),
    ("temp07_top_k10", dict(temperature=0.7, top_k=10), 1),
    ("temp13_top_p08", dict(temperature=1.3, top_p=0.8), 1),
    ("temp05_top_k8_top_p09_min_p005", dict(temperature=0.5, top_k=8, top_p=0.9, min_p=0.05), 1),
    ("temp15_typical08_keep2", dict(temperature=1.5, typical_p=0.8), 2),
    ("temp08_top_p095_eta1e-3", dict(temperature=0.8, top_p=0.95, eta_cutoff=1e-3), 1),
    ("top_k30_epsilon1e-3_keep2", dict(top_k=30, epsilon_cutoff=1e-3), 2),
]


def warper_rows():
    """36 fp32 rows over V: random normal at several scales, ties, peaked, flat, -inf entries."""
    g = torch.Generator().manual_seed(4242)
    rows = []
    for i in range(26):
        scale = [0.5, 1.0, 2.0, 4.0][i % 4]
        rows.append(torch.randn(WARPER_V, generator=g) * scale)
    tie = torch.randn(WARPER_V, generator=g)
    tie[[3, 17, 40]] = tie.max() + 0.5           # three-way tie at the top
    rows.append(tie)
    tie2 = torch.round(torch.randn(WARPER_V, generator=g) * 2.0)   # many ties everywhere
    rows.append(tie2)
    tie3 = torch.randn(WARPER_V, generator=g)
    tie3[[5, 6]] = tie3.max() + 1.0               # two-way tie at the top, a tie in the tail
    tie3[[50, 51, 52]] = -1.25
    rows.append(tie3)
    peak = torch.randn(WARPER_V, generator=g) * 0.3
    peak[9] = 12.0                                # one token holds nearly all the mass
    rows.append(peak)
    rows.append(torch.zeros(WARPER_V))            # flat
    rows.append(torch.full((WARPER_V,), 1.5))     # flat, non-zero
    ninf = torch.randn(WARPER_V, generator=g) * 2.0
    ninf[torch.arange(0, WARPER_V, 3)] = float("-inf")
    rows.append(ninf)
    ninf2 = torch.full((WARPER_V,), float("-inf"))
    ninf2[[2, 30, 31, 63]] = torch.tensor([1.0, 3.0, 3.0, -2.0])   # only 4 finite entries
    rows.append(ninf2)
    two = torch.full((WARPER_V,), -8.0)
    two[[0, 1]] = torch.tensor([2.0, 1.9])
    rows.append(two)
    rows.append(torch.linspace(-6.0, 6.0, WARPER_V))
    return torch.stack(rows).float()


def build_warpers(opts, keep):
    """transformers' warpers for opts, in generate's order (cf. GenerationMixin._get_logits_processor)."""
    from transformers.generation import logits_process as lp
    w = []
    if opts.get("temperature", 1.0) != 1.0:
        w.append(lp.TemperatureLogitsWarper(opts["temperature"]))
    if opts.get("top_k", 0):
        w.append(lp.TopKLogitsWarper(top_k=opts["top_k"], min_tokens_to_keep=keep))
    if opts.get("top_p", 1.0) < 1.0:
        w.append(lp.TopPLogitsWarper(top_p=opts["top_p"], min_tokens_to_keep=keep))
    if opts.get("min_p") is not None:
        w.append(lp.MinPLogitsWarper(min_p=opts["min_p"], min_tokens_to_keep=keep))
    if opts.get("typical_p", 1.0) < 1.0:
        w.append(lp.TypicalLogitsWarper(mass=opts["typical_p"], min_tokens_to_keep=keep))
    if 0.0 < opts.get("epsilon_cutoff", 0.0) < 1.0:
        w.append(lp.EpsilonLogitsWarper(epsilon=opts["epsilon_cutoff"], min_tokens_to_keep=keep))
    if 0.0 < opts.get("eta_cutoff", 0.0) < 1.0:
        w.append(lp.EtaLogitsWarper(epsilon=opts["eta_cutoff"], min_tokens_to_keep=keep))
    return w


def make_warpers_fixture(path):
    rows = warper_rows()
    dummy_ids = torch.zeros((rows.shape[0], 1), dtype=torch.long)
    cases = []
    for name, opts, keep in WARPER_CASES:
        x = rows.clone()
        for w in build_warpers(opts, keep):
            x = w(dummy_ids, x)
        kept, values = [], []
        for r in range(x.shape[0]):
            idx = [i for i in range(WARPER_V) if x[r, i] != float("-inf")]
            kept.append(idx)
            values.append([enc(x[r, i]) for i in idx])
        cases.append(dict(name=name, options=opts, min_tokens_to_keep=keep, kept=kept, values=values))
    with open(path, "w") as f:
        f.write('{\n  "transformers": %s,\n  "V": %d,\n  "rows": [\n%s\n  ],\n  "cases": [\n' % (
            json.dumps(transformers.__version__), WARPER_V,
            ",\n".join("    " + json.dumps([enc(v) for v in r], separators=(",", ":")) for r in rows.tolist())))
        parts = []
        for c in cases:
            parts.append('    {"name": %s, "options": %s, "min_tokens_to_keep": %d,\n      "kept": [\n%s\n      ],\n'
                         '      "values": [\n%s\n      ]}' % (
                             json.dumps(c["name"]), json.dumps(c["options"]), c["min_tokens_to_keep"],
                             ",\n".join("        " + json.dumps(k, separators=(",", ":")) for k in c["kept"]),
                             ",\n".join("        " + json.dumps(v, separators=(",", ":")) for v in c["values"])))
        f.write(",\n".join(parts) + "\n  ]\n}\n")
    print(f"wrote {path} ({len(cases)} cases over {rows.shape[0]} rows, {os.path.getsize(path)} bytes)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join("tests", "data"), help="fixture root")
    parser.add_argument("--only", action="append", help="only this fixture (repeatable)")
    parser.add_argument("--tf4-python", default=DEFAULT_TF4_PYTHON,
                        help=f"python of the venv with transformers=={TF4_VERSION}")
    parser.add_argument("--tf4-worker", metavar="FIXTURE_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tf4_worker:
        tf4_worker(args.tf4_worker)
        return
    import warnings
    warnings.filterwarnings("ignore")
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    make_warpers_fixture(os.path.join(args.out, "generate_warpers.json"))
    tables = {}
    for spec in FIXTURES:
        if not args.only or spec["name"] in args.only:
            tables[spec["name"]] = make_options_fixture(os.path.join(args.out, spec["name"]), args.tf4_python)
    names = list(tables)
    print("\ndiffers from the same case without the option: O = outputs, S = scores only (or step_scores), - = neither")
    print("%-28s " % "case" + " ".join("%-24s" % n for n in names))
    failures = []
    for i, (cname, _, _) in enumerate(next(iter(tables.values()))):
        marks = []
        for n in names:
            _, dout, dsc = tables[n][i]
            marks.append("O" if dout else ("S" if dsc else "-"))
            if not dout and not dsc and not any(e in cname for e in EXPECTED_SAME):
                failures.append(f"{n}:{cname}")
        print("%-28s " % cname + " ".join("%-24s" % m for m in marks))
    if failures:
        print("no effect (unexpected): " + ", ".join(failures))


if __name__ == "__main__":
    main()
