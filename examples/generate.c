// Generates continuations with a T5 checkpoint: greedy, sampling or beam search.
//     cc -std=c99 -O2 -o examples/generate examples/generate.c -lm -ldl -lpthread
//
//     examples/generate path/to/byt5-model "The capital of France is"      # byte-level text
//     examples/generate path/to/model --ids 3,17,5 --ids 8,1 --print-ids     # token ids, one row each
//     examples/generate path/to/model --device gpu --num-beams 4 --text "..."
//     examples/generate path/to/t5-model --tokenizer path/to/t5-model "translate English to German: Hi"
//
// Text is tokenized as ByT5 does (id = byte + 3; pad 0, eos 1, unk 2) and every input row ends
// with EOS, as the T5 tokenizers add it. --tokenizer PATH (a tokenizer.json, a SentencePiece
// .model, or a directory holding one, e.g. the checkpoint's) tokenizes text with that tokenizer
// instead (fat5_tokenize, its post-processor appending EOS) and prints continuations with
// fat5_detokenize, special tokens left out; its vocabulary must not be larger than the model's.
// Continuations of text are printed as text, one line each (newlines and control characters
// escaped), else as ids; --print-ids prints only the generated ids, one line per output sequence. The options start from
// the checkpoint's generation_config.json (when it has one) and Hugging Face's defaults; --help
// lists them. The time of the generation alone goes to stderr as
// "generate: N tokens in S s (R tokens/s)" (--warmup and --repeat for benchmarks).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: generate CHECKPOINT_DIR [TEXT...] [options]\n"
    "input (each TEXT, --text or --ids is one row; EOS is appended to every row):\n"
    "  TEXT, --text TEXT            UTF-8 text, byte-level ids (byte + 3); output printed as text\n"
    "  --tokenizer PATH             tokenize TEXT with tokenizer.json / spiece.model (a file or a\n"
    "                               directory), print the output with it (special tokens left out)\n"
    "  --ids 3,17,5                 token ids; output printed as ids\n"
    "decoding (Hugging Face's names and defaults, or the checkpoint's generation_config.json):\n"
    "  --max-new-tokens N           tokens generated per sequence at most (EOS included)\n"
    "  --min-new-tokens N           EOS is not emitted before N tokens\n"
    "  --num-beams K                beam search with K beams (1: greedy or sampling)\n"
    "  --length-penalty L           beam score = sum(log p) / length^L\n"
    "  --early-stopping true|false|never\n"
    "  --num-return-sequences N     outputs per input\n"
    "  --repetition-penalty R       > 1 lowers tokens already generated\n"
    "  --no-repeat-ngram-size N     no n-gram appears twice\n"
    "  --sample                     sample instead of taking the most likely token\n"
    "  --temperature T, --top-k K, --top-p P, --seed S   sampling\n"
    "run:\n"
    "  --attention SPEC             the encoder's attention: full, local:R, block-global:R:G or\n"
    "                               transient-global:R:G (long inputs; default the model's own)\n"
    "  --device cpu|gpu             default cpu\n"
    "  --dtype fp32|bf16            GPU compute precision (default bf16 on the GPU; the CPU is fp32)\n"
    "  --threads N                  CPU threads (0: one per CPU)\n"
    "  --no-graph                   GPU: launch every step instead of replaying a CUDA graph\n"
    "  --warmup N                   N untimed generations first (timing without first-call costs)\n"
    "  --repeat N                   N timed generations; the fastest is reported\n"
    "  --print-ids                  print only the generated ids, one line per output sequence\n";

// the options that take a value, for telling an unknown option from a missing value
static const char known[] =
    " --max-new-tokens --min-new-tokens --num-beams --num-return-sequences --top-k --no-repeat-ngram-size"
    " --threads --seed --warmup --repeat --length-penalty --repetition-penalty --temperature --top-p --early-stopping"
    " --device --dtype --attention --tokenizer ";

static int is_known(const char *opt) {
    const char *p = strstr(known, opt);
    size_t n = strlen(opt);
    return n > 2 && p && p[-1] == ' ' && p[n] == ' ';
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bad(const char *opt, const char *val, const char *why) {
    fprintf(stderr, "generate: %s %s: %s\n", opt, val, why);
    return 0;
}

// whole-string number parsing; 0 (and a message) on anything else
static int parse_i64(const char *opt, const char *s, int64_t lo, int64_t *out) {
    char *end;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (!s[0] || *end || errno) return bad(opt, s, "not an integer");
    if (v < lo) {
        fprintf(stderr, "generate: %s %s: must be at least %lld\n", opt, s, (long long)lo);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_f64(const char *opt, const char *s, double *out) {
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (!s[0] || *end || errno || !(v == v) || v > 1e300 || v < -1e300) return bad(opt, s, "not a finite number");
    *out = v;
    return 1;
}

// appends the ids of "3,17,5" (and EOS) to the packed input
static int parse_ids(const char *s, int32_t *tok, int64_t *n, int64_t cap, int64_t eos) {
    const char *p = s;
    int64_t start = *n;
    while (*p) {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',') || *n >= cap - 1)
            return bad("--ids", s, "expected non-negative integers separated by commas");
        tok[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
        if (*end && !*p) return bad("--ids", s, "expected non-negative integers separated by commas");
    }
    if (*n == start) return bad("--ids", "\"\"", "no ids");
    tok[(*n)++] = (int32_t)eos;
    return 1;
}

// one byte of generated text, control characters escaped (one line per sequence)
static void put_byte(int c) {
    if (c == '\n') fputs("\\n", stdout);
    else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
    else putchar(c);
}

// a generated sequence as text: bytes for ids 3..258, <id> for any other id but EOS
static void print_text(const int32_t *t, int64_t n, int64_t eos) {
    int64_t i;
    for (i = 0; i < n; i++) {
        if (t[i] == eos) break;
        if (t[i] >= 3 && t[i] < 259) put_byte(t[i] - 3);
        else printf("<%d>", (int)t[i]);
    }
    putchar('\n');
}

// a generated sequence as text with the tokenizer (up to EOS, special tokens left out); an id the
// model has but the tokenizer has not (a model vocabulary padded past the tokenizer's) is <id>
static int print_detok(fat5_tokenizer *tz, fat5_ctx *ctx, const int32_t *t, int64_t n, int64_t eos) {
    int64_t V = fat5_tokenizer_vocab_size(tz), i = 0, j;
    while (i < n && t[i] != eos) {
        char *text = NULL;
        size_t len = 0, k;
        if (t[i] < 0 || t[i] >= V) {
            printf("<%d>", (int)t[i++]);
            continue;
        }
        for (j = i; j < n && t[j] != eos && t[j] >= 0 && t[j] < V; j++) {}
        if (fat5_detokenize(tz, t + i, j - i, FAT5_DETOKENIZE_SKIP_SPECIAL, &text, &len) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            return 0;
        }
        for (k = 0; k < len; k++) put_byte((unsigned char)text[k]);
        fat5_free(ctx, text);
        i = j;
    }
    putchar('\n');
    return 1;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    char why[512];  // why a context could not be made
    fat5_model *m = NULL;
    fat5_tokenizer *tz = NULL;
    const char *tok_path = NULL, **texts = NULL;
    int64_t n_texts = 0;
    fat5_generate_config g;
    fat5_generate_result res;
    const char *dir = NULL, *dtype = NULL, *attention = NULL;
    int32_t *tok = NULL, *cu = NULL;
    int64_t n_tok = 0, n_rows = 0, cap = 0, warmup = 0, repeat = 1, total = 0, i, j;
    int text_mode = 0, ids_mode = 0, print_ids = 0, rc = 1, gpu = 0, no_graph = 0;
    // options are applied after the model is loaded (its generation config is the base)
    int64_t max_new = -1, min_new = -1, beams = -1, nret = -1, top_k = -1, ngram = -1, threads = -1, seed = -1;
    double lp = 0, rp = 0, temp = 0, top_p = 0;
    int has_lp = 0, has_rp = 0, has_temp = 0, has_top_p = 0, sample = 0, early = -1;
    double t0, t = 0, t_load;

    memset(&res, 0, sizeof res);
    // worst case: every argument is one row; ids and bytes are bounded by the arguments' lengths
    for (i = 1; i < argc; i++) cap += (int64_t)strlen(argv[i]) + 2;
    tok = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    cu = (int32_t *)malloc((size_t)(argc + 1) * sizeof(int32_t));
    texts = (const char **)malloc((size_t)(argc + 1) * sizeof *texts);
    if (!tok || !cu || !texts) {
        fprintf(stderr, "generate: out of memory\n");
        goto done;
    }
    cu[0] = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int ok = 1, takes = 1;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--print-ids")) print_ids = 1, takes = 0;
        else if (!strcmp(a, "--sample")) sample = 1, takes = 0;
        else if (!strcmp(a, "--no-graph")) no_graph = 1, takes = 0;
        else if (a[0] != '-' && !dir) dir = a, takes = 0;   // the first positional argument
        else if (a[0] != '-' || !strcmp(a, "--text")) {
            const char *s = a[0] != '-' ? a : v;
            takes = s == v;
            if (!s) ok = 0;
            if (s) texts[n_texts++] = s;
            for (j = 0; s && s[j]; j++) tok[n_tok++] = (int32_t)(unsigned char)s[j] + 3;
            tok[n_tok++] = 1;
            cu[++n_rows] = (int32_t)n_tok;
            text_mode = 1;
        } else if (!strcmp(a, "--ids")) {
            ok = v && parse_ids(v, tok, &n_tok, cap, 1);
            ids_mode = 1;
            if (ok) cu[++n_rows] = (int32_t)n_tok;
        } else if (!is_known(a)) {
            fprintf(stderr, "generate: unknown option '%s' (--help lists the options)\n", a);
            goto done;
        } else if (!v) {
            ok = 0;
        } else if (!strcmp(a, "--max-new-tokens")) ok = parse_i64(a, v, 1, &max_new);
        else if (!strcmp(a, "--min-new-tokens")) ok = parse_i64(a, v, 0, &min_new);
        else if (!strcmp(a, "--num-beams")) ok = parse_i64(a, v, 1, &beams);
        else if (!strcmp(a, "--num-return-sequences")) ok = parse_i64(a, v, 1, &nret);
        else if (!strcmp(a, "--top-k")) ok = parse_i64(a, v, 0, &top_k);
        else if (!strcmp(a, "--no-repeat-ngram-size")) ok = parse_i64(a, v, 0, &ngram);
        else if (!strcmp(a, "--threads")) ok = parse_i64(a, v, 0, &threads);
        else if (!strcmp(a, "--seed")) ok = parse_i64(a, v, 0, &seed);
        else if (!strcmp(a, "--warmup")) ok = parse_i64(a, v, 0, &warmup);
        else if (!strcmp(a, "--repeat")) ok = parse_i64(a, v, 1, &repeat);
        else if (!strcmp(a, "--length-penalty")) ok = has_lp = parse_f64(a, v, &lp);
        else if (!strcmp(a, "--repetition-penalty")) {
            ok = has_rp = parse_f64(a, v, &rp);
            if (ok && !(rp > 0)) ok = bad(a, v, "must be > 0");
        } else if (!strcmp(a, "--temperature")) {
            ok = has_temp = parse_f64(a, v, &temp);
            if (ok && !(temp > 0)) ok = bad(a, v, "must be > 0");
        } else if (!strcmp(a, "--top-p")) {
            ok = has_top_p = parse_f64(a, v, &top_p);
            if (ok && !(top_p > 0 && top_p <= 1)) ok = bad(a, v, "must be in (0, 1]");
        } else if (!strcmp(a, "--early-stopping")) {
            early = !strcmp(v, "false") ? 0 : !strcmp(v, "true") ? 1 : !strcmp(v, "never") ? 2 : -1;
            if (early < 0) ok = bad(a, v, "expected true, false or never");
        } else if (!strcmp(a, "--device")) {
            gpu = !strcmp(v, "gpu");
            if (!gpu && strcmp(v, "cpu")) ok = bad(a, v, "expected cpu or gpu");
        } else if (!strcmp(a, "--tokenizer")) {
            tok_path = v;
        } else if (!strcmp(a, "--attention")) {
            attention = v;
            if (!v) ok = 0;
        } else if (!strcmp(a, "--dtype")) {
            dtype = v;
            if (strcmp(v, "fp32") && strcmp(v, "bf16")) ok = bad(a, v, "expected fp32 or bf16");
        }
        if (!ok && !v) fprintf(stderr, "generate: %s: missing value\n", a);
        if (!ok) goto done;
        i += takes;
    }
    if (!dir) {
        fprintf(stderr, "generate: no checkpoint directory (--help for usage)\n");
        goto done;
    }
    if (!n_rows) {
        fprintf(stderr, "generate: no input: give TEXT, --text TEXT or --ids 3,17,5\n");
        goto done;
    }
    if (text_mode && ids_mode) {
        fprintf(stderr, "generate: give text or --ids, not both\n");
        goto done;
    }
    if (dtype && !strcmp(dtype, "bf16") && !gpu) {
        fprintf(stderr, "generate: --dtype bf16 needs --device gpu (the CPU computes in fp32)\n");
        goto done;
    }

    cc.device = gpu ? FAT5_DEVICE_GPU : FAT5_DEVICE_CPU;
    cc.dtype = gpu && !(dtype && !strcmp(dtype, "fp32")) ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32;
    if (threads >= 0) cc.n_threads = (int)(threads > 4096 ? 4096 : threads);
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
        fprintf(stderr, "generate: %s: %s\n", gpu ? "GPU" : "context", why);
        goto done;
    }
    t0 = now_s();
    if (fat5_model_load(ctx, dir, &m) != FAT5_OK || fat5_model_set_training(m, 0) != FAT5_OK) {
        fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
        goto done;
    }
    if (attention) {
        fat5_attention at;
        if (fat5_attention_parse(ctx, attention, &at) != FAT5_OK || fat5_model_set_attention(m, &at) != FAT5_OK) {
            fprintf(stderr, "generate: --attention: %s\n", fat5_last_error(ctx));
            goto done;
        }
    }
    t_load = now_s() - t0;
    if (tok_path) {   // text rows tokenized again, with the tokenizer (EOS from its post-processor)
        int64_t V = fat5_model_get_config(m)->vocab_size, TV;
        if (fat5_tokenizer_load(ctx, tok_path, &tz) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            goto done;
        }
        TV = fat5_tokenizer_vocab_size(tz);
        if (TV > V) {
            fprintf(stderr, "generate: the tokenizer's vocabulary size %lld (%s) is larger than the model's, %lld (%s): "
                    "they do not belong together\n", (long long)TV, tok_path, (long long)V, dir);
            goto done;
        }
        if (text_mode) {
            int32_t eos = fat5_tokenizer_eos_id(tz);
            n_tok = 0;
            for (i = 0; i < n_texts; i++) {
                int32_t *ids = NULL, *nt;
                int64_t n_ids = 0;
                if (fat5_tokenize(tz, texts[i], strlen(texts[i]), NULL, 0, 0, &ids, &n_ids) != FAT5_OK) {
                    fprintf(stderr, "generate: input row %lld: %s\n", (long long)i + 1, fat5_last_error(ctx));
                    goto done;
                }
                if (n_tok + n_ids + 1 > cap) {
                    cap = 2 * (n_tok + n_ids + 1);
                    if (!(nt = (int32_t *)realloc(tok, (size_t)cap * sizeof *tok))) {
                        fat5_free(ctx, ids);
                        fprintf(stderr, "generate: out of memory\n");
                        goto done;
                    }
                    tok = nt;
                }
                memcpy(tok + n_tok, ids, (size_t)n_ids * sizeof *ids);
                n_tok += n_ids;
                // no EOS from the post-processor (not a T5 template): appended, as byte-level
                if (n_ids == 0 || ids[n_ids - 1] != eos) tok[n_tok++] = eos >= 0 ? eos : 1;
                cu[i + 1] = (int32_t)n_tok;
                fat5_free(ctx, ids);
            }
        }
    }
    {   // an id outside the vocabulary names its row
        int64_t V = fat5_model_get_config(m)->vocab_size;
        for (i = 0; i < n_rows; i++)
            for (j = cu[i]; j < cu[i + 1] - 1; j++)
                if (tok[j] >= V) {
                    fprintf(stderr, "generate: input row %lld: id %d is not below the vocabulary size %lld%s\n",
                            (long long)i + 1, (int)tok[j], (long long)V,
                            text_mode && !tz ? " (byte-level text needs 259; --tokenizer for a tokenizer's ids)" : "");
                    goto done;
                }
    }
    g = fat5_generate_config_from_model(m);
    // EOS as the model defines it (the rows were built with 1, ByT5's and T5's id; a tokenizer's
    // EOS is kept)
    if (!tz)
        for (i = 1; i <= n_rows; i++) tok[cu[i] - 1] = (int32_t)g.eos_token_id;
    if (max_new >= 0) g.max_new_tokens = max_new;
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
    if (sample) g.do_sample = 1;
    if (no_graph) g.use_graph = 0;

    for (i = 0; i < warmup; i++) {
        if (fat5_generate(m, tok, cu, n_rows, &g, &res) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            goto done;
        }
        fat5_generate_result_destroy(ctx, &res);
    }
    for (i = 0; i < repeat; i++) {   // the fastest of the timed runs; the last one's output
        double ti;
        fat5_generate_result_destroy(ctx, &res);
        t0 = now_s();
        if (fat5_generate(m, tok, cu, n_rows, &g, &res) != FAT5_OK) {
            fprintf(stderr, "generate: %s\n", fat5_last_error(ctx));
            goto done;
        }
        ti = now_s() - t0;
        if (i == 0 || ti < t) t = ti;
    }
    for (i = 0; i < res.n_seq; i++) {
        const int32_t *s = res.tokens + res.cu_seqlens[i];
        int64_t n = res.cu_seqlens[i + 1] - res.cu_seqlens[i];
        total += n;
        if (tz && !print_ids) {
            if (!print_detok(tz, ctx, s, n, g.eos_token_id)) goto done;
            continue;
        }
        if (text_mode && !print_ids) {
            print_text(s, n, g.eos_token_id);
            continue;
        }
        for (j = 0; j < n; j++) printf(j ? " %d" : "%d", (int)s[j]);
        putchar('\n');
    }
    fflush(stdout);
    fprintf(stderr, "generate: loaded %s (%.1fM parameters, %s) in %.2f s\n", dir, (double)fat5_model_param_count(m) / 1e6,
            gpu ? (cc.dtype == FAT5_DTYPE_BF16 ? "GPU bf16" : "GPU fp32") : "CPU", t_load);
    fprintf(stderr, "generate: %lld tokens in %.6f s (%.1f tokens/s), %lld sequences, %lld steps\n", (long long)total, t,
            t > 0 ? (double)total / t : 0.0, (long long)res.n_seq, (long long)res.steps);
    fprintf(stderr, "generate: key/value caches %zu bytes\n", res.cache_bytes);
    rc = 0;
done:
    if (ctx) fat5_generate_result_destroy(ctx, &res);
    fat5_tokenizer_destroy(tz);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    free(tok);
    free(cu);
    free(texts);
    return rc;
}
