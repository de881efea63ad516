// fat5_tokenize — text to token ids and back with a checkpoint's tokenizer (fat5_tokenize).
//     cc -std=c99 -O2 -o tools/fat5_tokenize tools/fat5_tokenize.c -lm -ldl -lpthread
//     tools/fat5_tokenize [options] PATH < text.txt         ids, space-separated, on one line
//     tools/fat5_tokenize --decode [options] PATH < ids.txt  the text of the ids
//     tools/fat5_tokenize --bench FILE [--repeat N] PATH     tokenizer speed, one JSON line
// PATH is a tokenizer.json, a SentencePiece .model, or a directory holding one (fat5_tokenizer_load).
// Encoding reads the whole of standard input as one UTF-8 text and keeps every byte of it, a
// trailing newline included (the tokenizer's normaliser decides what it becomes: T5's strips it);
// the ids are those of Tokenizer.encode(text).ids, the post-processor applied (EOS appended for
// T5), unless --no-special. --lines tokenizes each line on its own (the newline not part of it;
// a \r before it is) and prints one line of ids per input line. --pair TEXT encodes the input and
// TEXT as a pair (the pair template).
// --decode reads integers separated by whitespace or commas and writes their text exactly, with
// no newline added (--lines: each input line decoded on its own, one output line each);
// --skip-special leaves special tokens out.
// --bench tokenizes each line of FILE (without its newline), --repeat N times (default 3), and
// prints {"bench":"tokenize","file":...,"bytes":...,"lines":...,"tokens":...,"seconds":...,
// "tokens_per_s":...,"mb_per_s":...}: the fastest pass (monotonic clock), tokens counted with
// the post-processor (or without it, with --no-special); ref/compare_hf.py --tokenize compares
// it with the Python libraries.
// Exits 1 with a one-line reason on an error (a bad tokenizer, a bad id), 2 on a usage error.
// --help lists the options; --version prints the library's version.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { O_LINES = 1, O_NO_SPECIAL, O_PAIR, O_DECODE, O_SKIP_SPECIAL, O_BENCH, O_REPEAT };
static const cli_opt opts[] = {
    {.id = O_LINES, .name = "lines", .kind = CLI_FLAG, .help = "one text per input line (newline left out), one line of ids each"},
    {.id = O_NO_SPECIAL, .name = "no-special", .kind = CLI_FLAG, .help = "no post-processor (no EOS or template tokens)"},
    {.id = O_PAIR, .name = "pair", .kind = CLI_STR, .meta = "TEXT", .help = "encode the input and TEXT as a pair"},
    {.id = O_DECODE, .name = "decode", .kind = CLI_FLAG,
     .help = "ids (whitespace or comma separated) on standard input to text"},
    {.id = O_SKIP_SPECIAL, .name = "skip-special", .alias = "skip_special_tokens", .kind = CLI_FLAG,
     .help = "--decode: leave special tokens out"},
    {.id = O_BENCH, .name = "bench", .kind = CLI_STR, .meta = "FILE",
     .help = "tokenize FILE line by line, print the speed as one JSON line"},
    {.id = O_REPEAT, .name = "repeat", .kind = CLI_INT, .def = "3", .help = "--bench: passes over FILE, the fastest reported",
     .lo = 1, .hi = 1e9},
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// the whole of fp; NULL (and a message) on a read error or out of memory
static char *read_all(FILE *fp, const char *name, size_t *len) {
    size_t cap = 1 << 16, n = 0, got;
    char *buf = (char *)malloc(cap + 1), *nb;
    if (!buf) goto oom;
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            if (!(nb = (char *)realloc(buf, 2 * cap + 1))) goto oom;
            buf = nb;
            cap *= 2;
        }
    }
    if (ferror(fp)) {
        fprintf(stderr, "fat5_tokenize: %s: read failed\n", name);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
oom:
    fprintf(stderr, "fat5_tokenize: %s: out of memory\n", name);
    free(buf);
    return NULL;
}

// the ids of one text, printed on one line; 0 (reported) on an error
static int encode(fat5_tokenizer *tok, fat5_ctx *ctx, const char *s, size_t n, const char *pair, int flags) {
    int32_t *ids = NULL;
    int64_t n_ids = 0, i;
    if (fat5_tokenize(tok, s, n, pair, pair ? strlen(pair) : 0, flags, &ids, &n_ids) != FAT5_OK) {
        fprintf(stderr, "fat5_tokenize: %s\n", fat5_last_error(ctx));
        return 0;
    }
    for (i = 0; i < n_ids; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    putchar('\n');
    fat5_free(ctx, ids);
    return 1;
}

// the text of the ids in s[0 .. n) (integers separated by whitespace or commas), written as it is
static int decode(fat5_tokenizer *tok, fat5_ctx *ctx, const char *s, size_t n, int flags, int32_t **ids, size_t *cap) {
    int64_t V = fat5_tokenizer_vocab_size(tok), n_ids = 0;
    size_t i = 0, len = 0;
    char *text = NULL;
    while (i < n) {
        size_t j;
        long long v = 0;
        if (strchr(" \t\r\n\f\v,", s[i])) {
            i++;
            continue;
        }
        for (j = i; j < n && !strchr(" \t\r\n\f\v,", s[j]); j++) {
            if (s[j] < '0' || s[j] > '9' || j - i >= 18) v = -1;
            else if (v >= 0) v = v * 10 + (s[j] - '0');
        }
        if (v < 0) {
            fprintf(stderr, "fat5_tokenize: --decode: '%.*s' is not an id (a non-negative integer)\n",
                    (int)(j - i > 40 ? 40 : j - i), s + i);
            return 0;
        }
        if (v >= V) {
            fprintf(stderr, "fat5_tokenize: --decode: id %lld is outside the vocabulary (size %lld)\n", v, (long long)V);
            return 0;
        }
        if ((size_t)n_ids == *cap) {
            int32_t *nb = (int32_t *)realloc(*ids, (*cap * 2 + 64) * sizeof **ids);
            if (!nb) {
                fprintf(stderr, "fat5_tokenize: out of memory\n");
                return 0;
            }
            *ids = nb;
            *cap = *cap * 2 + 64;
        }
        (*ids)[n_ids++] = (int32_t)v;
        i = j;
    }
    if (fat5_detokenize(tok, *ids, n_ids, flags, &text, &len) != FAT5_OK) {
        fprintf(stderr, "fat5_tokenize: %s\n", fat5_last_error(ctx));
        return 0;
    }
    fwrite(text, 1, len, stdout);
    fat5_free(ctx, text);
    return 1;
}

// s as a JSON string
static void print_json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static int bench(fat5_tokenizer *tok, fat5_ctx *ctx, const char *file, int64_t repeat, int flags) {
    FILE *fp = fopen(file, "rb");
    size_t len = 0, i, *starts = NULL, n_lines = 0;
    char *buf;
    int64_t r, tokens = 0;
    double best = 0;
    if (!fp) {
        fprintf(stderr, "fat5_tokenize: %s: %s\n", file, strerror(errno));
        return 0;
    }
    buf = read_all(fp, file, &len);
    fclose(fp);
    if (!buf) return 0;
    // line i is buf[starts[i] .. starts[i + 1] - 1), the newline left out; a last line without one
    if (!(starts = (size_t *)malloc((len + 2) * sizeof *starts))) {
        fprintf(stderr, "fat5_tokenize: out of memory\n");
        free(buf);
        return 0;
    }
    starts[0] = 0;
    for (i = 0; i < len; i++)
        if (buf[i] == '\n') starts[++n_lines] = i + 1;
    if (len && buf[len - 1] != '\n') starts[++n_lines] = len + 1;
    for (r = 0; r < repeat; r++) {
        double t0 = now_s(), t;
        int64_t n_tok = 0;
        for (i = 0; i < n_lines; i++) {
            int32_t *ids = NULL;
            int64_t n_ids = 0;
            if (fat5_tokenize(tok, buf + starts[i], starts[i + 1] - 1 - starts[i], NULL, 0, flags, &ids, &n_ids) != FAT5_OK) {
                fprintf(stderr, "fat5_tokenize: %s: line %lld: %s\n", file, (long long)i + 1, fat5_last_error(ctx));
                free(buf);
                free(starts);
                return 0;
            }
            n_tok += n_ids;
            fat5_free(ctx, ids);
        }
        t = now_s() - t0;
        if (r == 0 || t < best) best = t;
        tokens = n_tok;
    }
    printf("{\"bench\":\"tokenize\",\"file\":");
    print_json_str(file);
    printf(",\"bytes\":%llu,\"lines\":%llu,\"tokens\":%lld,\"seconds\":%.6f,\"tokens_per_s\":%.1f,\"mb_per_s\":%.3f}\n",
           (unsigned long long)len, (unsigned long long)n_lines, (long long)tokens, best,
           best > 0 ? (double)tokens / best : 0.0, best > 0 ? (double)len / best / 1e6 : 0.0);
    free(buf);
    free(starts);
    return 1;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_tokenizer *tok = NULL;
    const char *path = NULL, *pair = NULL, *bench_file = NULL;
    int lines = 0, dec = 0, no_special = 0, skip_special = 0, ok = 1, o;
    cli c;
    long long repeat = 3;
    char *in = NULL;
    size_t len = 0, cap = 0;
    int32_t *ids = NULL;   // --decode's ids
    cli_init(&c, "fat5_tokenize", "usage: fat5_tokenize [options] PATH\n"
             "Text on standard input (all of it one text, every byte kept) to ids on standard output, or back\n"
             "(--decode). PATH: tokenizer.json, a SentencePiece .model, or a directory holding one.\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == O_LINES) lines = (int)c.ival;
        else if (o == O_NO_SPECIAL) no_special = (int)c.ival;
        else if (o == O_DECODE) dec = (int)c.ival;
        else if (o == O_SKIP_SPECIAL) skip_special = (int)c.ival;
        else if (o == O_PAIR) pair = c.val;
        else if (o == O_BENCH) bench_file = c.val;
        else if (o == O_REPEAT) repeat = c.ival;
        else if (!path) path = c.val;
        else return cli_status(cli_fail(&c, "'%s': one PATH only (the text comes on standard input)", c.val));
    }
    if (!path) return cli_status(cli_fail(&c, "no tokenizer PATH (usage: fat5_tokenize [options] PATH)"));
    if (dec && (pair || no_special || bench_file)) {
        fprintf(stderr, "fat5_tokenize: --decode does not take --pair, --no-special or --bench\n");
        return 2;
    }
    if (!dec && skip_special) {
        fprintf(stderr, "fat5_tokenize: --skip-special goes with --decode\n");
        return 2;
    }
    if (bench_file && (pair || lines)) {
        fprintf(stderr, "fat5_tokenize: --bench does not take --pair or --lines\n");
        return 2;
    }
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) {
        fprintf(stderr, "fat5_tokenize: out of memory\n");
        return 1;
    }
    if (fat5_tokenizer_load(ctx, path, &tok) != FAT5_OK) {
        fprintf(stderr, "fat5_tokenize: %s\n", fat5_last_error(ctx));
        fat5_ctx_destroy(ctx);
        return 1;
    }
    if (bench_file) {
        ok = bench(tok, ctx, bench_file, repeat, no_special ? FAT5_TOKENIZE_NO_SPECIAL : 0);
    } else if (!(in = read_all(stdin, "standard input", &len))) {
        ok = 0;
    } else if (!lines) {
        ok = dec ? decode(tok, ctx, in, len, skip_special ? FAT5_DETOKENIZE_SKIP_SPECIAL : 0, &ids, &cap)
                 : encode(tok, ctx, in, len, pair, no_special ? FAT5_TOKENIZE_NO_SPECIAL : 0);
    } else {
        size_t s = 0, e;
        while (ok && s < len) {
            for (e = s; e < len && in[e] != '\n'; e++) {}
            if (dec) {
                ok = decode(tok, ctx, in + s, e - s, skip_special ? FAT5_DETOKENIZE_SKIP_SPECIAL : 0, &ids, &cap);
                if (ok) putchar('\n');
            } else {
                ok = encode(tok, ctx, in + s, e - s, pair, no_special ? FAT5_TOKENIZE_NO_SPECIAL : 0);
            }
            s = e + 1;
        }
    }
    if (fflush(stdout) != 0 && ok) {
        fprintf(stderr, "fat5_tokenize: standard output: write failed\n");
        ok = 0;
    }
    free(in);
    free(ids);
    fat5_tokenizer_destroy(tok);
    fat5_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
