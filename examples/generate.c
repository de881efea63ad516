// Generates continuations with a T5 checkpoint: greedy, sampling or beam search.
//     cc -std=c99 -O2 -o examples/generate examples/generate.c -lm -ldl -lpthread
//
//     examples/generate path/to/model "translate English to German: Hi"       # its own tokenizer
//     examples/generate path/to/model --input prompts.txt > outputs.txt          # one input per line
//     examples/generate path/to/model --input rows.jsonl --input-field question --output-format jsonl
//     some_command | examples/generate path/to/model --output-format jsonl      # standard input
//     examples/generate path/to/byt5-model --bytes "The capital of France is"  # byte-level ids
//     examples/generate path/to/model --ids 3,17,5 --ids 8,1 --print-ids       # token ids, one row each
//     examples/generate path/to/model --device cpu --num-beams 4 --text "..."
//
// Inputs: each TEXT argument, --text TEXT or --ids 3,17,5 is one; --input FILE (- for standard
// input) adds one per non-empty line, or, for JSON lines (--input-field NAME, or a FILE ending in
// .jsonl: field "text"), the string field NAME of each object. With no input in the arguments,
// the inputs come from standard input when it is not a terminal. Every row ends with EOS.
// Text is tokenized with the checkpoint's own tokenizer when its directory has one (tokenizer.json,
// spiece.model or tokenizer.model), or with --tokenizer PATH (a file, or a directory holding one);
// its post-processor appends EOS, and outputs are detokenized with special tokens left out. A
// checkpoint without a tokenizer, or --bytes, takes ByT5's byte-level ids (id = byte + 3; pad 0,
// eos 1, unk 2). The tokenizer's vocabulary must not be larger than the model's.
// The inputs are generated --batch-size at a time (each batch one fat5_generate call); progress
// goes to stderr when they come from a file or standard input. Output (stdout), one line per output
// sequence in input order (num_return_sequences per input): --output-format text (default) prints
// the continuation as text (newlines and control characters escaped), or ids for --ids inputs
// without a tokenizer; jsonl prints {"input": ..., "output": ..., "tokens": [...]} (input: the text,
// or the ids of an --ids row; output: the text; tokens: the generated ids). --print-ids prints only
// the generated ids. The decoding options start from the checkpoint's generation_config.json (when
// it has one) and Hugging Face's defaults, with Hugging Face's names (--num_beams, --do_sample,
// ...: docs/cli.md). The device is the GPU when there is one (bf16), else the CPU, as for
// examples/train; --device chooses. The time of the generation alone goes to stderr as
// "generate: N tokens in S s (R tokens/s)" (--warmup and --repeat for benchmarks).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "../tools/cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum {
    O_TEXT = 1, O_IDS, O_INPUT, O_INPUT_FIELD, O_TOKENIZER, O_BYTES, O_BATCH, O_FORMAT, O_PRINT_IDS,
    O_MAX_NEW, O_MIN_NEW, O_BEAMS, O_LP, O_EARLY, O_NRET, O_RP, O_NGRAM, O_SAMPLE, O_TEMP, O_TOP_K, O_TOP_P,
    O_SEED, O_ATTENTION, O_DEVICE, O_DTYPE, O_BF16, O_THREADS, O_NO_GRAPH, O_WARMUP, O_REPEAT, O_GENCONFIG,
    O_STOP, O_STREAM
};
static const cli_opt opts[] = {
    {.kind = CLI_SECTION, .help = "input (each TEXT, --text, --ids and input line is one row; EOS is appended to each):"},
    {.id = O_TEXT, .name = "text", .kind = CLI_STR, .meta = "TEXT", .help = "one input (the same as a TEXT argument)"},
    {.id = O_IDS, .name = "ids", .kind = CLI_STR, .meta = "3,17,5", .help = "one input as token ids"},
    {.id = O_INPUT, .name = "input", .kind = CLI_STR, .meta = "FILE",
     .help = "inputs from FILE (- for standard input), one per non-empty line, or JSON lines\n"
             "(--input-field, or a .jsonl FILE); standard input when no input is given"},
    {.id = O_INPUT_FIELD, .name = "input-field", .kind = CLI_STR, .meta = "NAME",
     .help = "the input files are JSON lines: NAME is each object's input (a string)", .def = "text for a .jsonl FILE"},
    {.id = O_TOKENIZER, .name = "tokenizer", .kind = CLI_STR, .meta = "PATH",
     .def = "the checkpoint's own, else byte-level",
     .help = "tokenize text with tokenizer.json / spiece.model (a file or a directory),\n"
             "print the output with it (special tokens left out)"},
    {.id = O_BYTES, .name = "bytes", .kind = CLI_FLAG, .help = "byte-level ids (ByT5: byte + 3) even when the checkpoint has a tokenizer"},
    {.id = O_BATCH, .name = "batch-size", .alias = "per_device_eval_batch_size", .kind = CLI_INT, .def = "16",
     .help = "inputs generated together (one fat5_generate call)", .lo = 1, .hi = 1 << 20},
    {.kind = CLI_SECTION, .help = "output:"},
    {.id = O_FORMAT, .name = "output-format", .kind = CLI_CHOICE, .choices = "text|jsonl", .def = "text",
     .help = "text: one line per output sequence (the continuation, escaped; ids for --ids\n"
             "inputs without a tokenizer); jsonl: {\"input\", \"output\", \"tokens\"} per line"},
    {.id = O_PRINT_IDS, .name = "print-ids", .kind = CLI_FLAG, .help = "print only the generated ids, one line per output sequence"},
    {.kind = CLI_SECTION, .help = "decoding (Hugging Face's names and defaults, or the checkpoint's generation_config.json):"},
    {.id = O_MAX_NEW, .name = "max-new-tokens", .kind = CLI_INT, .def = "20",
     .help = "tokens generated per sequence at most (EOS included)", .lo = 1, .hi = 1 << 30},
    {.id = O_MIN_NEW, .name = "min-new-tokens", .kind = CLI_INT, .def = "0", .help = "EOS is not emitted before N tokens",
     .lo = 0, .hi = 1 << 30},
    {.id = O_BEAMS, .name = "num-beams", .kind = CLI_INT, .def = "1", .help = "beam search with N beams (1: greedy or sampling)",
     .lo = 1, .hi = 1 << 16},
    {.id = O_LP, .name = "length-penalty", .kind = CLI_NUM, .def = "1.0", .help = "beam score = sum(log p) / length^X"},
    {.id = O_EARLY, .name = "early-stopping", .kind = CLI_CHOICE, .choices = "true|false|never", .def = "false",
     .help = "beam search: when a beam is done"},
    {.id = O_NRET, .name = "num-return-sequences", .kind = CLI_INT, .def = "1", .help = "outputs per input",
     .lo = 1, .hi = 1 << 16},
    {.id = O_RP, .name = "repetition-penalty", .kind = CLI_NUM, .def = "1.0", .help = "> 1 lowers tokens already generated",
     .lo = 0, .hi = 1e300, .lo_open = 1},
    {.id = O_NGRAM, .name = "no-repeat-ngram-size", .kind = CLI_INT, .def = "0", .help = "no n-gram appears twice (0: off)",
     .lo = 0, .hi = 1 << 20},
    {.id = O_SAMPLE, .name = "do-sample", .alias = "sample", .kind = CLI_FLAG,
     .help = "sample instead of taking the most likely token"},
    {.id = O_TEMP, .name = "temperature", .kind = CLI_NUM, .def = "1.0", .help = "sampling: logits / X", .lo = 0, .hi = 1e300,
     .lo_open = 1},
    {.id = O_TOP_K, .name = "top-k", .kind = CLI_INT, .def = "50", .help = "sampling: the N most likely tokens (0: all)",
     .lo = 0, .hi = 1 << 30},
    {.id = O_TOP_P, .name = "top-p", .kind = CLI_NUM, .def = "1.0", .help = "sampling: the smallest set of mass >= X",
     .lo = 0, .hi = 1, .lo_open = 1},
    {.id = O_SEED, .name = "seed", .kind = CLI_INT, .help = "sampling: the same tokens on every run", .lo = 0, .hi = 9.2e18},
    {.id = O_GENCONFIG, .name = "generation-config", .kind = CLI_STR, .meta = "JSON|@FILE",
     .help = "any generation_config.json option by transformers' name (forced_bos_token_id,\n"
             "suppress_tokens, bad_words_ids, sequence_bias, min_p, typical_p, ...; docs/generation.md),\n"
             "over the checkpoint's; the flags above override it"},
    {.id = O_STOP, .name = "stop-strings", .kind = CLI_STR, .meta = "TEXT",
     .help = "end a sequence when its text ends in TEXT (repeatable; needs a tokenizer)"},
    {.id = O_STREAM, .name = "stream", .kind = CLI_FLAG,
     .help = "print the output as it is generated (one input, one output sequence)"},
    {.kind = CLI_SECTION, .help = "run:"},
    {.id = O_ATTENTION, .name = "attention", .kind = CLI_STR, .meta = "SPEC", .def = "the model's own",
     .help = "the encoder's attention: full, local:R, block-global:R:G or\ntransient-global:R:G (long inputs)"},
    {.id = O_DEVICE, .name = "device", .kind = CLI_CHOICE, .choices = "auto|cpu|gpu", .def = "auto",
     .help = "auto: the GPU when there is one, else the CPU (as examples/train)"},
    {.id = O_DTYPE, .name = "dtype", .kind = CLI_CHOICE, .choices = "fp32|bf16", .def = "bf16 on a GPU",
     .help = "GPU compute precision (the CPU computes in fp32)"},
    {.id = O_BF16, .name = "bf16", .kind = CLI_FLAG, .help = "the same as --dtype bf16 (--bf16 false: fp32)"},
    {.id = O_THREADS, .name = "threads", .kind = CLI_INT, .def = "0: one per CPU", .help = "CPU threads", .lo = 0, .hi = 4096},
    {.id = O_NO_GRAPH, .name = "no-graph", .kind = CLI_FLAG, .help = "GPU: launch every step instead of replaying a CUDA graph"},
    {.id = O_WARMUP, .name = "warmup", .kind = CLI_INT, .def = "0",
     .help = "untimed generations of each batch first (timing without first-call costs)", .lo = 0, .hi = 1 << 20},
    {.id = O_REPEAT, .name = "repeat", .kind = CLI_INT, .def = "1", .help = "timed generations of each batch; the fastest counts",
     .lo = 1, .hi = 1 << 20},
    {.id = 0, .name = "max-length", .kind = CLI_HINT,
     .help = "use --max-new-tokens (the decoder's length: Hugging Face's max_length counts the start token too)"},
};

static const char usage[] =
    "usage: generate CHECKPOINT_DIR [TEXT...] [options]\n"
    "Generates a continuation of every input with a T5 checkpoint: greedy, sampling or beam search.\n"
    "Text is tokenized with the checkpoint's tokenizer when it has one, else byte-level (ByT5's ids).\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One input row: text (from an argument or a file) or ids, and where it came from for messages.
typedef struct row {
    char *text;           // NUL-terminated; owned when `owned`
    size_t len;
    int32_t *ids;         // --ids: the ids (EOS not included), owned
    int64_t n_ids;
    int owned;
    const char *file;     // an input file's name, or NULL: the arguments
    long line;            // its line, or the row's number among the arguments
} row;

typedef struct rows {
    row *r;
    int64_t n, cap;
} rows;

static row *rows_add(rows *rs) {
    if (rs->n == rs->cap) {
        int64_t nc = rs->cap ? 2 * rs->cap : 64;
        row *nr = (row *)realloc(rs->r, (size_t)nc * sizeof *nr);
        if (!nr) return NULL;
        rs->r = nr;
        rs->cap = nc;
    }
    memset(&rs->r[rs->n], 0, sizeof rs->r[0]);
    return &rs->r[rs->n++];
}

// where a row came from: "input row 3" or "prompts.txt:12"
// --stream: the sequence's text as its tokens come (fat5_detok_stream: whole UTF-8 characters);
// without a tokenizer, each id as it comes.
typedef struct stream_state {
    fat5_detok_stream *ds;
    int64_t n;
} stream_state;

static void stream_put(stream_state *ss, const int32_t *ids, int64_t n, int last) {
    const char *text;
    size_t len = 0;
    if (ss->ds && fat5_detok_stream_push(ss->ds, ids, n, last, &text, &len) == FAT5_OK && len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
}

static int stream_tokens(void *user, const int64_t *seqs, const int32_t *tokens, int64_t n) {
    stream_state *ss = (stream_state *)user;
    int64_t i;
    (void)seqs;
    if (!ss->ds)
        for (i = 0; i < n; i++, ss->n++) printf("%s%d", ss->n ? " " : "", (int)tokens[i]);
    stream_put(ss, tokens, n, 0);
    fflush(stdout);
    return 0;
}

static const char *row_name(const row *r, char *buf, size_t cap) {
    if (r->file) snprintf(buf, cap, "%s:%ld", r->file, r->line);
    else snprintf(buf, cap, "input row %ld", r->line);
    return buf;
}

// the ids of "3,17,5"; 0 (reported) when malformed
static int parse_ids(const char *s, row *r) {
    const char *p = s;
    size_t n = 0, cap = strlen(s) / 2 + 1;
    if (!(r->ids = (int32_t *)malloc(cap * sizeof *r->ids))) {
        fprintf(stderr, "generate: out of memory\n");
        return 0;
    }
    while (*p) {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',') || n >= cap || (*end && !end[1])) {
            fprintf(stderr, "generate: --ids %s: expected non-negative integers separated by commas\n", s);
            return 0;
        }
        r->ids[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        fprintf(stderr, "generate: --ids \"\": no ids\n");
        return 0;
    }
    r->n_ids = (int64_t)n;
    return 1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// Reads the inputs of one file (or standard input, "-"): a row per non-empty line, or the string
// field `field` of each JSON line (field NULL: plain lines). 0 (reported) on an error.
static int read_inputs(const char *path, const char *field, rows *rs) {
    FILE *fp = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    const char *name = fp == stdin ? "standard input" : path;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    long line = 0;
    int got, ok = 1;
    if (!fp) {
        fprintf(stderr, "generate: --input %s: %s\n", path, strerror(errno));
        return 0;
    }
    while (ok && (got = cli_read_line(fp, &buf, &cap, &len)) > 0) {
        row *r;
        line++;
        if (len == 0 || (field && len == strspn(buf, " \t"))) continue;   // blank lines are no input
        if (!(r = rows_add(rs))) {
            ok = 0;
            fprintf(stderr, "generate: out of memory\n");
            break;
        }
        r->file = name;
        r->line = line;
        r->owned = 1;
        if (!field) {
            if (!(r->text = (char *)malloc(len + 1))) {
                rs->n--;
                fprintf(stderr, "generate: out of memory\n");
                ok = 0;
                break;
            }
            memcpy(r->text, buf, len + 1);
            r->len = len;
        } else {
            cli_json_it it;
            char key[256];
            const char *v = NULL, *ve = NULL, *fv = NULL, *fe = NULL;
            int m;
            cli_json_begin(&it, buf, len);
            while ((m = cli_json_member(&it, key, sizeof key, &v, &ve)) > 0)
                if (strcmp(key, field) == 0) fv = v, fe = ve;
            rs->n--;   // the row counts once it has its text
            if (m < 0) {
                fprintf(stderr, "generate: %s:%ld: not a JSON object (--input-field %s reads JSON lines)\n", name, line,
                        field);
                ok = 0;
            } else if (!fv) {
                fprintf(stderr, "generate: %s:%ld: no field \"%s\" (--input-field)\n", name, line, field);
                ok = 0;
            } else if (*fv != '"') {
                fprintf(stderr, "generate: %s:%ld: field \"%s\" is %s, not a string\n", name, line, field, cli_json_kind(fv));
                ok = 0;
            } else if (!(r->text = cli_json_str_dup(fv, fe, &r->len))) {
                fprintf(stderr, "generate: out of memory\n");
                ok = 0;
            } else {
                rs->n++;
            }
        }
    }
    if (ok && got < 0) {
        fprintf(stderr, "generate: %s: %s\n", name, ferror(fp) ? "read failed" : "out of memory");
        ok = 0;
    }
    free(buf);
    if (fp != stdin) fclose(fp);
    return ok;
}

// A growing byte buffer for one output's text.
typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->n + n + 1) * 2;
        char *np = (char *)realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

// The text of a generated sequence, up to EOS: the tokenizer's (special tokens left out; an id the
// model has but the tokenizer has not, a vocabulary padded past the tokenizer's, as <id>), or
// byte-level (ids 3..258 are bytes, any other id <id>). 0 (reported) on an error.
static int seq_text(fat5_tokenizer *tz, fat5_ctx *ctx, const int32_t *t, int64_t n, int64_t eos, sbuf *b) {
    int64_t V = tz ? fat5_tokenizer_vocab_size(tz) : 0, i = 0, j;
    char tmp[24];
    b->n = 0;
    sb_put(b, "", 0);
    while (i < n && t[i] != eos) {
        char *text = NULL;
        size_t len = 0;
        if (!tz) {
            char ch = (char)(t[i] - 3);
            if (t[i] >= 3 && t[i] < 259) sb_put(b, &ch, 1);
            else sb_put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "<%d>", (int)t[i]));
            i++;
            continue;
        }
        if (t[i] < 0 || t[i] >= V) {
            sb_put(b, tmp, (size_t)snprintf(tmp, sizeof tmp, "<%d>", (int)t[i++]));
            continue;
        }
        for (j = i; j < n && t[j] != eos && t[j] >= 0 && t[j] < V; j++) {}
        if (fat5_detokenize(tz, t + i, j - i, FAT5_DETOKENIZE_SKIP_SPECIAL, &text, &len) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            return 0;
        }
        sb_put(b, text, len);
        fat5_free(ctx, text);
        i = j;
    }
    if (b->oom) fprintf(stderr, "generate: out of memory\n");
    return !b->oom;
}

// text on one line: newlines and control characters escaped
static void put_line(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\n');
}

static void put_ids(const int32_t *t, int64_t n, const char *sep) {
    int64_t j;
    for (j = 0; j < n; j++) printf("%s%d", j ? sep : "", (int)t[j]);
}

// a directory holding a tokenizer fat5_tokenizer_load reads
static int has_tokenizer(const char *dir) {
    static const char *const names[] = {"tokenizer.json", "spiece.model", "tokenizer.model"};
    struct stat sb;
    char p[4200];
    size_t k;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
    for (k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    char why[512], no_gpu[160] = "", where[200];
    fat5_model *m = NULL;
    fat5_tokenizer *tz = NULL;
    const char *tok_path = NULL, *field = NULL, **inputs = NULL;
    fat5_generate_config g;
    fat5_generate_result res;
    const char *dir = NULL, *attention = NULL;
    rows rs = {NULL, 0, 0};
    sbuf sb = {NULL, 0, 0, 0};
    int32_t *tok = NULL, *cu = NULL;
    int64_t *row_at = NULL, n_tok = 0, cap = 0, warmup = 0, repeat = 1, total = 0, batch = 16, i, j, n_args = 0;
    int64_t n_inputs = 0, n_seq = 0, steps = 0;
    size_t cache_bytes = 0;
    int text_mode = 0, ids_mode = 0, print_ids = 0, rc = 1, gpu = 0, no_graph = 0, device = -1, bytes = 0, jsonl = 0, o;
    int dtype = -1, streamed = 0, tty = isatty(2), implicit = 0, stream = 0;
    const char *gen_json = NULL, **stops = NULL;
    int64_t n_stops = 0;
    fat5_token_texts texts;
    stream_state ss;
    // options are applied after the model is loaded (its generation config is the base)
    int64_t max_new = -1, min_new = -1, beams = -1, nret = -1, top_k = -1, ngram = -1, threads = -1, seed = -1;
    double lp = 0, rp = 0, temp = 0, top_p = 0;
    int has_lp = 0, has_rp = 0, has_temp = 0, has_top_p = 0, sample = -1, early = -1;
    double t0, t = 0, t_load, t_start = now_s(), t_report = 0;
    cli c;

    memset(&res, 0, sizeof res);
    memset(&ss, 0, sizeof ss);
    if (!(inputs = (const char **)malloc((size_t)argc * sizeof *inputs)) ||
        !(stops = (const char **)malloc((size_t)argc * sizeof *stops))) {
        fprintf(stderr, "generate: out of memory\n");
        return 1;
    }
    cli_init(&c, "generate", usage, opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        row *r;
        if (o < 0) {
            rc = cli_status(o);
            goto done;
        }
        if (o == CLI_POS && !dir) {   // the first positional argument; the others are TEXT
            dir = c.val;
            continue;
        }
        switch (o) {
        case CLI_POS:
        case O_TEXT:
        case O_IDS:
            if (!(r = rows_add(&rs))) {
                fprintf(stderr, "generate: out of memory\n");
                goto done;
            }
            r->line = (long)++n_args;
            if (o == O_IDS) {
                ids_mode = 1;
                if (!parse_ids(c.val, r)) goto done;
            } else {
                text_mode = 1;
                r->text = (char *)c.val;
                r->len = strlen(c.val);
            }
            break;
        case O_INPUT: inputs[n_inputs++] = c.val; break;
        case O_INPUT_FIELD: field = c.val; break;
        case O_TOKENIZER: tok_path = c.val; break;
        case O_BYTES: bytes = (int)c.ival; break;
        case O_BATCH: batch = c.ival; break;
        case O_FORMAT: jsonl = (int)c.ival; break;
        case O_PRINT_IDS: print_ids = (int)c.ival; break;
        case O_MAX_NEW: max_new = c.ival; break;
        case O_MIN_NEW: min_new = c.ival; break;
        case O_BEAMS: beams = c.ival; break;
        case O_LP: lp = c.dval, has_lp = 1; break;
        case O_EARLY: early = c.ival == 0 ? 1 : c.ival == 1 ? 0 : 2; break;
        case O_NRET: nret = c.ival; break;
        case O_RP: rp = c.dval, has_rp = 1; break;
        case O_NGRAM: ngram = c.ival; break;
        case O_SAMPLE: sample = (int)c.ival; break;
        case O_TEMP: temp = c.dval, has_temp = 1; break;
        case O_TOP_K: top_k = c.ival; break;
        case O_TOP_P: top_p = c.dval, has_top_p = 1; break;
        case O_SEED: seed = c.ival; break;
        case O_ATTENTION: attention = c.val; break;
        case O_DEVICE: device = c.ival == 0 ? -1 : c.ival == 1 ? FAT5_DEVICE_CPU : FAT5_DEVICE_GPU; break;
        case O_DTYPE: case O_BF16: dtype = c.ival ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32; break;
        case O_THREADS: threads = c.ival; break;
        case O_NO_GRAPH: no_graph = (int)c.ival; break;
        case O_WARMUP: warmup = c.ival; break;
        case O_REPEAT: repeat = c.ival; break;
        case O_GENCONFIG: gen_json = c.val; break;
        case O_STOP: stops[n_stops++] = c.val; break;
        case O_STREAM: stream = (int)c.ival; break;
        default: break;
        }
    }
    rc = 2;   // usage errors from here to the context
    if (!dir) {
        cli_fail(&c, "no checkpoint directory (usage: generate CHECKPOINT_DIR [TEXT...] [options])");
        goto done;
    }
    if (bytes && tok_path) {
        cli_fail(&c, "--bytes and --tokenizer: one or the other");
        goto done;
    }
    if (dtype == FAT5_DTYPE_BF16 && device == FAT5_DEVICE_CPU) {
        cli_fail(&c, "--dtype bf16 needs a GPU (the CPU computes in fp32)");
        goto done;
    }
    if (n_inputs == 0 && rs.n == 0 && !isatty(0)) inputs[n_inputs++] = "-", implicit = 1;   // standard input
    if (field && n_inputs == 0) {
        cli_fail(&c, "--input-field %s: no --input file (or standard input) to read", field);
        goto done;
    }
    rc = 1;
    for (i = 0; i < n_inputs; i++) {
        const char *f = field ? field : ends_with(inputs[i], ".jsonl") ? "text" : NULL;
        if (!read_inputs(inputs[i], f, &rs)) goto done;
        streamed = 1;
        text_mode = 1;
    }
    if (!rs.n) {
        fprintf(stderr, "generate: no input: give TEXT, --text TEXT, --ids 3,17,5 or --input FILE%s\n",
                implicit ? " (standard input held no line of text)" : n_inputs ? " (the input files hold no line of text)" : "");
        rc = 2;
        goto done;
    }
    if (text_mode && ids_mode) {
        fprintf(stderr, "generate: give text or --ids, not both\n");
        rc = 2;
        goto done;
    }

    // the device: the GPU when there is one (as examples/train), unless --device says
    if (device != FAT5_DEVICE_CPU) {
        cc.device = FAT5_DEVICE_GPU;
        cc.dtype = dtype == FAT5_DTYPE_FP32 ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            if (device == FAT5_DEVICE_GPU) {
                fprintf(stderr, "generate: GPU: %s\n", why);
                goto done;
            }
            if (dtype == FAT5_DTYPE_BF16) {
                fprintf(stderr, "generate: --dtype bf16 needs a GPU, and there is none here (%s)\n", why);
                goto done;
            }
            snprintf(no_gpu, sizeof no_gpu, ", no GPU found");
            ctx = NULL;
        } else {
            gpu = 1;
        }
    }
    if (!ctx) {
        cc = fat5_ctx_config_default();
        if (threads >= 0) cc.n_threads = (int)threads;
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            fprintf(stderr, "generate: context: %s\n", why);
            goto done;
        }
    }
    t0 = now_s();
    if (fat5_model_load(ctx, dir, &m) != FAT5_OK || fat5_model_set_training(m, 0) != FAT5_OK) {
        fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
        goto done;
    }
    if (attention) {
        fat5_attention at;
        if (fat5_attention_parse(ctx, attention, &at) != FAT5_OK || fat5_model_set_attention(m, &at) != FAT5_OK) {
            fprintf(stderr, "generate: --attention %s: %s\n", attention, fat5_last_error(ctx));
            goto done;
        }
    }
    t_load = now_s() - t0;
    // the tokenizer: --tokenizer's, else the checkpoint's own, unless --bytes
    if (!tok_path && !bytes && has_tokenizer(dir)) tok_path = dir;
    if (tok_path) {
        int64_t V = fat5_model_get_config(m)->vocab_size, TV;
        if (fat5_tokenizer_load(ctx, tok_path, &tz) != FAT5_OK) {
            fprintf(stderr, "generate: %s%s\n", fat5_last_error(ctx),
                    tok_path == dir ? " (the checkpoint's tokenizer; --bytes for byte-level ids)" : "");
            goto done;
        }
        TV = fat5_tokenizer_vocab_size(tz);
        if (TV > V) {
            fprintf(stderr, "generate: the tokenizer's vocabulary size %lld (%s) is larger than the model's, %lld (%s): "
                    "they do not belong together\n", (long long)TV, tok_path, (long long)V, dir);
            goto done;
        }
    }
    g = fat5_generate_config_from_model(m);
    {   // every row's ids, packed (row i: tok[row_at[i] .. row_at[i + 1]), its EOS last), checked
        int64_t V = fat5_model_get_config(m)->vocab_size;
        int32_t eos = tz && fat5_tokenizer_eos_id(tz) >= 0 ? fat5_tokenizer_eos_id(tz) : (int32_t)g.eos_token_id;
        char nm[300];
        if (!(row_at = (int64_t *)malloc((size_t)(rs.n + 1) * sizeof *row_at))) {
            fprintf(stderr, "generate: out of memory\n");
            goto done;
        }
        row_at[0] = 0;
        for (i = 0; i < rs.n; i++) {
            row *r = &rs.r[i];
            int32_t *ids = r->ids, *nt;
            int64_t n_ids = r->n_ids, need;
            if (r->text && tz) {
                ids = NULL;
                if (fat5_tokenize(tz, r->text, r->len, NULL, 0, 0, &ids, &n_ids) != FAT5_OK) {
                    fprintf(stderr, "generate: %s: %s\n", row_name(r, nm, sizeof nm), fat5_last_error(ctx));
                    goto done;
                }
            } else if (r->text) {
                n_ids = (int64_t)r->len;
            }
            need = n_tok + n_ids + 1;
            if (need > cap) {
                cap = need * 2 + 1024;
                if (!(nt = (int32_t *)realloc(tok, (size_t)cap * sizeof *tok))) {
                    if (ids != r->ids) fat5_free(ctx, ids);
                    fprintf(stderr, "generate: out of memory\n");
                    goto done;
                }
                tok = nt;
            }
            if (r->text && !tz) {
                for (j = 0; j < n_ids; j++) tok[n_tok + j] = (int32_t)(unsigned char)r->text[j] + 3;
            } else {
                memcpy(tok + n_tok, ids, (size_t)n_ids * sizeof *ids);
            }
            if (ids != r->ids) fat5_free(ctx, ids);
            for (j = 0; j < n_ids; j++)
                if (tok[n_tok + j] >= V) {
                    fprintf(stderr, "generate: %s: id %d is not below the vocabulary size %lld%s\n",
                            row_name(r, nm, sizeof nm), (int)tok[n_tok + j], (long long)V,
                            r->text && !tz ? " (byte-level text needs 259; --tokenizer for a tokenizer's ids)" : "");
                    goto done;
                }
            n_tok += n_ids;
            // EOS: the tokenizer's post-processor appended it, unless its template has none
            if (!(r->text && tz && n_ids > 0 && tok[n_tok - 1] == eos)) tok[n_tok++] = r->text && tz ? eos : (int32_t)g.eos_token_id;
            row_at[i + 1] = n_tok;
        }
    }
    if (gen_json) {   // inline JSON or @FILE, over the checkpoint's generation config
        char *text = NULL;
        size_t len = 0;
        fat5_status gs;
        if (gen_json[0] == '@' && fat5_read_file(ctx, gen_json + 1, (size_t)1 << 24, &text, &len) != FAT5_OK) {
            fprintf(stderr, "generate: --generation-config: %s\n", fat5_last_error(ctx));
            goto done;
        }
        gs = text ? fat5_generate_config_from_json(ctx, text, len, &g)
                  : fat5_generate_config_from_json(ctx, gen_json, strlen(gen_json), &g);
        fat5_free(ctx, text);
        if (gs != FAT5_OK) {
            fprintf(stderr, "generate: --generation-config: %s\n", fat5_last_error(ctx));
            goto done;
        }
    }
    if (n_stops > 0) {
        if (!tz) {
            fprintf(stderr, "generate: --stop-strings needs a tokenizer (--tokenizer, or the checkpoint's)\n");
            goto done;
        }
        g.stop_strings = stops, g.n_stop_strings = n_stops;
    }
    if (g.n_stop_strings > 0) {
        if (!tz) {
            fprintf(stderr, "generate: stop_strings need a tokenizer (--tokenizer, or the checkpoint's)\n");
            goto done;
        }
        if (fat5_tokenizer_token_texts(tz, &texts) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            goto done;
        }
        g.token_texts = &texts;
    }
    if (max_new >= 0) g.max_new_tokens = max_new, g.max_length = 0;   // as in transformers, max_new_tokens wins
    if (min_new >= 0) g.min_new_tokens = min_new;
    if (beams >= 0) g.num_beams = beams;
    if (nret >= 0) g.num_return_sequences = nret;
    if (top_k >= 0) g.top_k = top_k;
    if (ngram >= 0) g.no_repeat_ngram_size = ngram;
    if (seed >= 0) g.seed = (uint64_t)seed;
    if (has_lp) g.length_penalty = lp;
    if (has_rp) g.repetition_penalty = rp;
    if (has_temp) g.temperature = temp;
    if (has_top_p) g.top_p = top_p;
    if (early >= 0) g.early_stopping = early;
    if (sample >= 0) g.do_sample = sample;
    if (no_graph) g.use_graph = 0;
    if (stream) {   // the continuation printed as the tokens come
        if (rs.n != 1 || g.num_return_sequences != 1 || g.num_beams != 1 || warmup || repeat != 1 || jsonl || print_ids) {
            fprintf(stderr, "generate: --stream prints one output as it comes: one input, one output sequence, no beam "
                    "search, --output-format text, no --warmup / --repeat\n");
            goto done;
        }
        if (tz && fat5_detok_stream_create(tz, FAT5_DETOKENIZE_SKIP_SPECIAL, &ss.ds) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            goto done;
        }
        g.stream = stream_tokens, g.stream_user = &ss;
    }
    if (!(cu = (int32_t *)malloc((size_t)(batch + 1) * sizeof *cu))) {
        fprintf(stderr, "generate: out of memory\n");
        goto done;
    }

    for (i = 0; i < rs.n; i += batch) {   // one batch: rows i .. i + nb - 1
        int64_t nb = rs.n - i < batch ? rs.n - i : batch, k, per;
        double best = 0;
        const int32_t *bt = tok + row_at[i];
        if (row_at[i + nb] - row_at[i] > INT32_MAX) {
            fprintf(stderr, "generate: a batch of more than 2^31 tokens: use a smaller --batch-size\n");
            goto done;
        }
        for (k = 0; k <= nb; k++) cu[k] = (int32_t)(row_at[i + k] - row_at[i]);
        for (k = 0; k < warmup + repeat; k++) {   // the fastest of the timed runs; the last one's output
            double ts = now_s(), ti;
            fat5_generate_result_destroy(ctx, &res);
            if (fat5_generate(m, bt, cu, nb, &g, &res) != FAT5_OK) {
                char nm[300];
                fprintf(stderr, "generate: %s%s: %s\n", nb > 1 ? "the batch from " : "", row_name(&rs.r[i], nm, sizeof nm),
                        fat5_last_error(ctx));
                goto done;
            }
            ti = now_s() - ts;
            if (k == warmup || (k > warmup && ti < best)) best = ti;
        }
        t += best;
        steps += res.steps;
        if (res.cache_bytes > cache_bytes) cache_bytes = res.cache_bytes;
        per = res.n_seq / nb;   // outputs per input
        for (k = 0; k < res.n_seq; k++) {
            const int32_t *s = res.tokens + res.cu_seqlens[k];
            int64_t n = res.cu_seqlens[k + 1] - res.cu_seqlens[k];
            const row *r = &rs.r[i + k / per];
            total += n;
            n_seq++;
            if (stream) {   // printed as it came: the rest of its text and the line's end
                stream_put(&ss, NULL, 0, 1);
                putchar('\n');
                continue;
            }
            if (print_ids || (!jsonl && !r->text && !tz)) {
                put_ids(s, n, " ");
                putchar('\n');
                continue;
            }
            if (!seq_text(tz, ctx, s, n, g.eos_token_id, &sb)) goto done;
            if (!jsonl) {
                put_line(sb.p, sb.n);
                continue;
            }
            fputs("{\"input\": ", stdout);
            if (r->text) cli_json_put(stdout, r->text, r->len);
            else putchar('['), put_ids(r->ids, r->n_ids, ", "), putchar(']');
            fputs(", \"output\": ", stdout);
            cli_json_put(stdout, sb.p, sb.n);
            fputs(", \"tokens\": [", stdout);
            put_ids(s, n, ", ");
            fputs("]}\n", stdout);
        }
        fflush(stdout);
        if (streamed && (tty || now_s() - t_report >= 2 || i + nb == rs.n)) {   // progress
            double el = now_s() - t_start;
            fprintf(stderr, "%sgenerate: %lld/%lld inputs, %lld tokens, %.1f s%s", tty ? "\r" : "", (long long)(i + nb),
                    (long long)rs.n, (long long)total, el, tty && i + nb < rs.n ? "" : "\n");
            t_report = now_s();
        }
    }
    if (ferror(stdout)) {
        fprintf(stderr, "generate: standard output: write failed\n");
        goto done;
    }
    if (gpu) snprintf(where, sizeof where, "GPU %s", cc.dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32");
    else snprintf(where, sizeof where, "CPU%s", no_gpu);
    fprintf(stderr, "generate: loaded %s (%.1fM parameters, %s) in %.2f s; %s%s\n", dir,
            (double)fat5_model_param_count(m) / 1e6, where, t_load, tz ? "tokenizer " : "byte-level ids",
            tz ? tok_path : ids_mode ? " (no text)" : "");
    fprintf(stderr, "generate: %lld tokens in %.6f s (%.1f tokens/s), %lld sequences, %lld steps\n", (long long)total, t,
            t > 0 ? (double)total / t : 0.0, (long long)n_seq, (long long)steps);
    fprintf(stderr, "generate: key/value caches %zu bytes\n", cache_bytes);
    rc = 0;
done:
    if (ctx) fat5_generate_result_destroy(ctx, &res);
    fat5_tokenizer_destroy(tz);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    for (i = 0; i < rs.n; i++) {
        if (rs.r[i].owned) free(rs.r[i].text);
        free(rs.r[i].ids);
    }
    free(rs.r);
    free(sb.p);
    free(tok);
    free(cu);
    free(row_at);
    free(inputs);
    free(stops);
    fat5_detok_stream_destroy(ss.ds);
    return rc;
}
