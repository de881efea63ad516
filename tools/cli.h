// cli.h — the command line of fat5's programs (examples/ and tools/): one argument parser for all
// of them. Header-only (static functions), C99, the C library only; it reads FAT5_VERSION_STRING
// from fat5.h (declarations only) for --version. docs/cli.md describes the conventions:
//   --help          the usage and every option with its default on standard output, exit 0
//   --version       the library's version, exit 0
//   --key value     and --key=value; names are spelled with dashes, underscores accepted
//                   (--max-steps, --max_steps); Hugging Face's names where the meaning is the same
//   unknown option  an error naming the closest valid one ("did you mean --max-steps?")
//   numbers         the whole text is a number in the option's range, else an error
//   errors          one line on standard error, "PROGRAM: ...", exit status 2 (usage errors)
// A program describes its options in a table of cli_opt and reads them with cli_next:
//     static const cli_opt opts[] = {
//         {.id = O_STEPS, .name = "max-steps", .kind = CLI_INT, .meta = "N", .def = "150",
//          .help = "optimizer steps", .lo = 1, .hi = 1e15},
//         ...
//     };
//     cli c;
//     int o;
//     cli_init(&c, "train", "usage: train [options]\n", opts, sizeof opts / sizeof opts[0], argc, argv);
//     while ((o = cli_next(&c)) != CLI_END) {
//         if (o < 0) return cli_status(o);           // --help / --version: 0; an error: 2
//         if (o == CLI_POS) ... c.val ...            // a positional argument
//         else if (o == O_STEPS) steps = c.ival;    // checked against the range already
//     }
// Also here, for the programs' inputs and outputs: JSON lines (a field of an object, a string
// decoded, a string written escaped) and reading a line of any length.
#ifndef FAT5_CLI_H
#define FAT5_CLI_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FAT5_VERSION_STRING
#include "../fat5.h"   // the declarations only: FAT5_VERSION_STRING
#endif

enum cli_kind {
    CLI_FLAG = 0,   // no value; --flag=false (or --flag false) turns it off: c.ival 1 or 0
    CLI_STR,        // any text: c.val
    CLI_INT,        // a whole integer (decimal), in [lo, hi] when lo < hi: c.ival
    CLI_NUM,        // a finite number, in [lo, hi] (lo_open: > lo) when lo < hi: c.dval
    CLI_CHOICE,     // one of choices ("cpu|gpu|auto"): c.ival its index, c.val its text
    CLI_HINT,       // a name this program does not take: refused with help as the reason
    CLI_SECTION     // no option: a heading of --help (help is its title)
};

typedef struct cli_opt {
    int id;               // what cli_next returns for it (> 0)
    const char *name;     // the one spelling, with dashes ("max-new-tokens")
    const char *alias;    // other names it answers to, space-separated ("sample num_train_steps"),
                          // or a short form "-o"; NULL: none
    int kind;             // enum cli_kind
    const char *meta;     // the value's name in --help ("N", "FILE"); NULL: from the kind
    const char *def;      // the default --help shows; NULL: none
    const char *help;     // --help's text; "\n" starts another line
    double lo, hi;        // CLI_INT, CLI_NUM: the range, checked when lo < hi
    int lo_open;          // CLI_NUM: lo itself is refused (> lo)
    const char *choices;  // CLI_CHOICE: the values, '|'-separated
} cli_opt;

enum { CLI_POS = 0, CLI_END = -1, CLI_EXIT = -2, CLI_FAIL = -3 };

typedef struct cli {
    const char *prog;     // "generate": the start of every message
    const char *usage;    // --help's first lines (the synopsis, what the program does)
    const char *notes;    // --help's last lines (NULL: none)
    const cli_opt *opts;
    int n_opts, argc, i, only_pos;
    char **argv;
    // what the last cli_next returned
    const cli_opt *opt;   // the option (NULL: a positional argument)
    char given[72];       // the option as given, without "=value" ("--max_new_tokens")
    const char *val;      // its value's text, or the positional argument
    long long ival;       // CLI_INT; CLI_FLAG 1 / 0; CLI_CHOICE the index
    double dval;          // CLI_NUM
} cli;

static inline void cli_init(cli *c, const char *prog, const char *usage, const cli_opt *opts, int n_opts, int argc,
                            char **argv) {
    memset(c, 0, sizeof *c);
    c->prog = prog;
    c->usage = usage;
    c->opts = opts;
    c->n_opts = n_opts;
    c->argc = argc;
    c->argv = argv;
    c->i = 1;
}

// the exit status for what cli_next returned: 0 after --help or --version, 2 after an error
static inline int cli_status(int r) { return r == CLI_EXIT ? 0 : 2; }

// "PROGRAM: message" on stderr; CLI_FAIL
static inline int cli_fail(const cli *c, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", c->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_FAIL;
}

// "PROGRAM: --option VALUE: why" about the last option; CLI_FAIL
static inline int cli_bad(const cli *c, const char *fmt, ...) {
    va_list ap;
    if (c->opt) fprintf(stderr, "%s: %s %s: ", c->prog, c->given, c->val ? c->val : "");
    else fprintf(stderr, "%s: '%s': ", c->prog, c->val ? c->val : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_FAIL;
}

// a name as the parser compares it: lower case, '_' as '-'
static inline int cli_norm(int ch) {
    if (ch == '_') return '-';
    if (ch >= 'A' && ch <= 'Z') return ch - 'A' + 'a';
    return ch;
}

// 1 when a (n bytes) names the word w[0 .. wn)
static inline int cli_same(const char *a, size_t n, const char *w, size_t wn) {
    size_t k;
    if (n != wn) return 0;
    for (k = 0; k < n; k++)
        if (cli_norm((unsigned char)a[k]) != cli_norm((unsigned char)w[k])) return 0;
    return 1;
}

// 1 when the option answers to the name (n bytes; short: a single-dash form such as -o)
static inline int cli_names(const cli_opt *o, const char *name, size_t n, int is_short) {
    const char *a = o->alias;
    if (!o->name) return 0;
    if (!is_short && cli_same(name, n, o->name, strlen(o->name))) return 1;
    while (a && *a) {
        size_t wn = strcspn(a, " ");
        if (is_short ? (a[0] == '-' && wn == n + 1 && memcmp(a + 1, name, n) == 0)
                     : (a[0] != '-' && cli_same(name, n, a, wn)))
            return 1;
        a += wn;
        while (*a == ' ') a++;
    }
    return 0;
}

// edit distance between two names as compared (insertions, deletions, substitutions, swaps)
static inline size_t cli_distance(const char *a, size_t n, const char *b, size_t m) {
    size_t d[3][72], i, j;
    if (n > 70) n = 70;
    if (m > 70) m = 70;
    for (j = 0; j <= m; j++) d[0][j] = j;
    for (i = 1; i <= n; i++) {
        size_t *cur = d[i % 3], *prev = d[(i - 1) % 3], *prev2 = d[(i + 1) % 3];
        cur[0] = i;
        for (j = 1; j <= m; j++) {
            int ca = cli_norm((unsigned char)a[i - 1]), cb = cli_norm((unsigned char)b[j - 1]);
            size_t v = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == cli_norm((unsigned char)b[j - 2]) &&
                cli_norm((unsigned char)a[i - 2]) == cb && prev2[j - 2] + 1 < v)
                v = prev2[j - 2] + 1;
            cur[j] = v;
        }
    }
    return d[n % 3][m];
}

// The valid option closest to an unknown name (its spelling with dashes), or NULL when none is
// close: within 2 edits, or a third of the name's length.
static inline const char *cli_closest(const cli *c, const char *name, size_t n) {
    static const char *const builtin[] = {"help", "version"};
    const char *best = NULL;
    size_t best_d = (size_t)-1, limit = n / 3 > 2 ? n / 3 : 2;
    int k;
    for (k = -2; k < c->n_opts; k++) {
        const cli_opt *o = k >= 0 ? &c->opts[k] : NULL;
        const char *a;
        size_t d;
        if (o && (!o->name || o->kind == CLI_HINT)) continue;
        a = o ? o->name : builtin[k + 2];
        d = cli_distance(name, n, a, strlen(a));
        if (d < best_d) best_d = d, best = a;
        for (a = o ? o->alias : NULL; a && *a;) {   // an alias close by still names the option
            size_t wn = strcspn(a, " ");
            if (a[0] != '-' && (d = cli_distance(name, n, a, wn)) < best_d) best_d = d, best = o->name;
            a += wn;
            while (*a == ' ') a++;
        }
        // a prefix of exactly one name ("--max-new" for --max-new-tokens) is close too
        if (o && n >= 3 && strlen(o->name) > n && cli_distance(name, n, o->name, n) == 0 && best_d > 1)
            best_d = 1, best = o->name;
    }
    return best_d <= limit ? best : NULL;
}

static inline void cli_print_help(const cli *c) {
    int k;
    fputs(c->usage, stdout);
    if (c->n_opts == 0 || c->opts[0].kind != CLI_SECTION) printf("\noptions:\n");
    for (k = 0; k < c->n_opts; k++) {
        const cli_opt *o = &c->opts[k];
        char left[160], tail[400];
        const char *h = o->help ? o->help : "", *a;
        size_t n, t = 0;
        int first = 1;
        if (o->kind == CLI_SECTION) {
            printf("\n%s\n", h);
            continue;
        }
        if (!o->name || o->kind == CLI_HINT) continue;
        n = (size_t)snprintf(left, sizeof left, "  --%s", o->name);
        if (o->kind != CLI_FLAG)
            n += (size_t)snprintf(left + n, sizeof left - n, " %s",
                                  o->meta ? o->meta : o->kind == CLI_CHOICE ? o->choices
                                  : o->kind == CLI_INT ? "N" : o->kind == CLI_NUM ? "X" : "TEXT");
        // after the text: the default and the other names ("default: 8; also --per_device_train_batch_size")
        tail[0] = 0;
        if (o->def) t = (size_t)snprintf(tail, sizeof tail, "default: %s", o->def);
        for (a = o->alias; a && *a && t < sizeof tail - 64;) {
            size_t wn = strcspn(a, " ");
            if (!cli_same(a, wn, o->name, strlen(o->name))) {   // not a mere underscore spelling
                t += (size_t)snprintf(tail + t, sizeof tail - t, "%s%s%.*s", t == 0 ? "also " : strstr(tail, "also ")
                                      ? ", " : "; also ", a[0] == '-' ? "" : "--", (int)wn, a);
            }
            a += wn;
            while (*a == ' ') a++;
        }
        // the text, at its own line breaks, beside a left column 30 wide; the default after it
        for (;;) {
            size_t ln = strcspn(h, "\n");
            if (first && n > 29) printf("%s\n%-30s", left, "");
            else printf("%-30s", first ? left : "");
            printf("%.*s", (int)ln, h);
            h += ln;
            if (*h) h++;
            first = 0;
            if (*h) {
                putchar('\n');
                continue;
            }
            if (tail[0] && ln + t + 3 <= 72) printf("%s(%s)", ln ? " " : "", tail);
            else if (tail[0]) printf("\n%-30s(%s)", "", tail);
            putchar('\n');
            break;
        }
    }
    printf("  --help                      this text\n  --version                   the fat5 library's version\n");
    if (c->notes) printf("\n%s", c->notes);
}

// a boolean word: 1 true, 0 false, -1 none
static inline int cli_bool_word(const char *s) {
    static const char *const t[] = {"true", "1", "yes", "on"}, *const f[] = {"false", "0", "no", "off"};
    size_t k;
    for (k = 0; k < 4; k++) {
        if (cli_same(s, strlen(s), t[k], strlen(t[k]))) return 1;
        if (cli_same(s, strlen(s), f[k], strlen(f[k]))) return 0;
    }
    return -1;
}

// checks c->val for c->opt's kind and range, filling ival / dval; CLI_FAIL with the reason
static inline int cli_check_value(cli *c) {
    const cli_opt *o = c->opt;
    const char *v = c->val;
    char *end;
    if (o->kind == CLI_INT) {
        long long x;
        errno = 0;
        x = strtoll(v, &end, 10);
        if (!v[0] || *end || end == v || v[0] == ' ' || v[0] == '\t') return cli_bad(c, "not an integer");
        if (errno == ERANGE) return cli_bad(c, "out of range");
        if (o->lo < o->hi && ((double)x < o->lo || (double)x > o->hi)) {
            if (o->hi >= 9e15) return cli_bad(c, "must be at least %.0f", o->lo);
            return cli_bad(c, "must be %.0f to %.0f", o->lo, o->hi);
        }
        c->ival = x;
    } else if (o->kind == CLI_NUM) {
        double x;
        errno = 0;
        x = strtod(v, &end);
        if (!v[0] || *end || end == v || v[0] == ' ' || v[0] == '\t' || !isfinite(x) || errno == ERANGE)
            return cli_bad(c, "not a finite number");
        if (o->lo < o->hi && (x < o->lo || x > o->hi || (o->lo_open && x == o->lo))) {
            if (o->hi >= 1e300) return cli_bad(c, "must be %s %g", o->lo_open ? "greater than" : "at least", o->lo);
            return cli_bad(c, "must be in %c%g, %g]", o->lo_open ? '(' : '[', o->lo, o->hi);
        }
        c->dval = x;
    } else if (o->kind == CLI_CHOICE) {
        const char *a = o->choices;
        long long idx = 0;
        while (*a) {
            size_t wn = strcspn(a, "|");
            if (strlen(v) == wn && memcmp(v, a, wn) == 0) {
                c->ival = idx;
                return 1;
            }
            a += wn;
            if (*a) a++;
            idx++;
        }
        {   // "expected cpu, gpu or auto"
            char list[256];
            size_t n = 0, cnt = (size_t)idx, k = 0;
            for (a = o->choices; *a && n < sizeof list - 16; k++) {
                size_t wn = strcspn(a, "|");
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%.*s", k == 0 ? "" : k + 1 == cnt ? " or " : ", ",
                                      (int)wn, a);
                a += wn;
                if (*a) a++;
            }
            return cli_bad(c, "expected %s", list);
        }
    }
    return 1;
}

// The next option or positional argument: the option's id (c->opt, c->val, c->ival, c->dval
// set), CLI_POS (c->val), CLI_END, CLI_EXIT (--help or --version printed) or CLI_FAIL (an error
// printed). A lone "-" is a positional argument (standard input, by convention); after "--" every
// argument is.
static inline int cli_next(cli *c) {
    const char *a, *name, *eq;
    size_t n;
    int is_short, k;
    c->opt = NULL;
    c->val = NULL;
    c->given[0] = 0;
    c->ival = 0;
    c->dval = 0;
    for (;;) {
        if (c->i >= c->argc) return CLI_END;
        a = c->argv[c->i++];
        if (!c->only_pos && strcmp(a, "--") == 0) {
            c->only_pos = 1;
            continue;
        }
        break;
    }
    if (c->only_pos || a[0] != '-' || a[1] == 0) {
        c->val = a;
        return CLI_POS;
    }
    is_short = a[1] != '-';
    name = a + (is_short ? 1 : 2);
    eq = is_short ? NULL : strchr(name, '=');
    n = eq ? (size_t)(eq - name) : strlen(name);
    snprintf(c->given, sizeof c->given, "%.*s", (int)(n + (is_short ? 1 : 2) > 70 ? 68 : n + (is_short ? 1 : 2)), a);
    if ((!is_short && cli_same(name, n, "help", 4)) || (is_short && strcmp(name, "h") == 0)) {
        cli_print_help(c);
        return CLI_EXIT;
    }
    if (!is_short && cli_same(name, n, "version", 7)) {
        printf("%s (fat5) %s\n", c->prog, FAT5_VERSION_STRING);
        return CLI_EXIT;
    }
    for (k = 0; k < c->n_opts && !cli_names(&c->opts[k], name, n, is_short); k++) {}
    if (k == c->n_opts) {
        const char *near = is_short ? NULL : cli_closest(c, name, n);
        if (near) return cli_fail(c, "unknown option %s; did you mean --%s?", c->given, near);
        return cli_fail(c, "unknown option %s (--help lists the options)", c->given);
    }
    c->opt = &c->opts[k];
    if (c->opt->kind == CLI_HINT) {
        c->opt = NULL;
        return cli_fail(c, "%s: %s", c->given, c->opts[k].help);
    }
    if (c->opt->kind == CLI_FLAG) {
        int b = 1;
        if (eq) {
            c->val = eq + 1;
            if ((b = cli_bool_word(eq + 1)) < 0) return cli_bad(c, "expected true or false");
        } else if (c->i < c->argc && (cli_same(c->argv[c->i], strlen(c->argv[c->i]), "true", 4) ||
                                      cli_same(c->argv[c->i], strlen(c->argv[c->i]), "false", 5))) {
            c->val = c->argv[c->i++];   // Hugging Face's "--bf16 True"
            b = cli_bool_word(c->val);
        }
        c->ival = b;
        return c->opt->id;
    }
    if (eq) {
        c->val = eq + 1;
    } else if (c->i < c->argc && !(c->argv[c->i][0] == '-' && c->argv[c->i][1] == '-' && c->argv[c->i][2])) {
        c->val = c->argv[c->i++];
    } else {   // nothing, or the next option: a value that starts with "--" goes as --key=--value
        fprintf(stderr, "%s: %s: missing value (%s)\n", c->prog, c->given,
                c->opt->meta ? c->opt->meta : c->opt->kind == CLI_CHOICE ? c->opt->choices : "a value");
        return CLI_FAIL;
    }
    if (cli_check_value(c) == CLI_FAIL) return CLI_FAIL;
    return c->opt->id;
}

// A positional argument read as a whole integer in [lo, hi] (what: its name in the message).
static inline int cli_pos_int(const cli *c, const char *what, const char *s, long long lo, long long hi,
                              long long *out) {
    char *end;
    long long x;
    errno = 0;
    x = strtoll(s, &end, 10);
    if (!s[0] || *end || errno == ERANGE || s[0] == ' ') {
        fprintf(stderr, "%s: %s '%s': not an integer\n", c->prog, what, s);
        return 0;
    }
    if (x < lo || x > hi) {
        fprintf(stderr, "%s: %s %s: must be %lld to %lld\n", c->prog, what, s, lo, hi);
        return 0;
    }
    *out = x;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// text and JSON lines

// A line of any length from fp without its "\n" (and a "\r" before it): 1, 0 at the end of the
// input, -1 out of memory or a read error. *buf grows as needed (free it).
static inline int cli_read_line(FILE *fp, char **buf, size_t *cap, size_t *len) {
    size_t n = 0;
    int any = 0;
    for (;;) {
        size_t got;
        if (*cap - n < 2) {
            size_t nc = *cap ? *cap * 2 : 256;
            char *nb = (char *)realloc(*buf, nc);
            if (!nb) return -1;
            *buf = nb;
            *cap = nc;
        }
        if (!fgets(*buf + n, (int)(*cap - n > 1 << 30 ? 1 << 30 : *cap - n), fp)) break;
        any = 1;
        got = strlen(*buf + n);   // a NUL byte in the line ends it early: text files have none
        n += got;
        if (n && (*buf)[n - 1] == '\n') break;
        if (got == 0) break;
    }
    if (ferror(fp)) return -1;
    if (!any) return 0;
    if (n && (*buf)[n - 1] == '\n') n--;
    if (n && (*buf)[n - 1] == '\r') n--;
    (*buf)[n] = 0;
    *len = n;
    return 1;
}

// the length of the valid UTF-8 character at s (n bytes left), 0 when it is not one
static inline size_t cli_utf8_char(const unsigned char *s, size_t n) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    size_t k, j;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (n < k) return 0;
    for (j = 1; j < k; j++)
        if (s[j] < (j == 1 ? lo : 0x80) || s[j] > (j == 1 ? hi : 0xBF)) return 0;
    return k;
}

// s (n bytes) as a JSON string: quotes, backslashes and control characters escaped, bytes that
// are not valid UTF-8 written as U+FFFD (a JSON text is UTF-8)
static inline void cli_json_put(FILE *fp, const char *s, size_t n) {
    size_t i = 0;
    fputc('"', fp);
    while (i < n) {
        unsigned char ch = (unsigned char)s[i];
        size_t k;
        if (ch == '"' || ch == '\\') fprintf(fp, "\\%c", ch), i++;
        else if (ch == '\n') fputs("\\n", fp), i++;
        else if (ch == '\t') fputs("\\t", fp), i++;
        else if (ch == '\r') fputs("\\r", fp), i++;
        else if (ch < 0x20 || ch == 0x7f) fprintf(fp, "\\u%04x", ch), i++;
        else if ((k = cli_utf8_char((const unsigned char *)s + i, n - i)) == 0) fputs("\\ufffd", fp), i++;
        else fwrite(s + i, 1, k, fp), i += k;
    }
    fputc('"', fp);
}

static inline const char *cli_json_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static inline int cli_json_hex4(const char *p, const char *e, unsigned *out) {
    unsigned v = 0;
    int k;
    if (e - p < 4) return 0;
    for (k = 0; k < 4; k++) {
        char h = p[k];
        v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
        if (v > 0xFFFF) return 0;
    }
    *out = v;
    return 1;
}

// The JSON string at p (its opening quote): the end (past the closing quote), NULL when malformed.
// out (NULL: only checked) gets the decoded UTF-8 bytes, at most as many as the string's text, and
// *len their count; escapes \uD83D\uDE00 pairs included, a lone surrogate as U+FFFD.
static inline const char *cli_json_string(const char *p, const char *e, char *out, size_t *len) {
    size_t n = 0;
    if (p >= e || *p != '"') return NULL;
    for (p++; p < e && *p != '"';) {
        unsigned char ch = (unsigned char)*p;
        unsigned u, u2;
        if (ch < 0x20) return NULL;
        if (ch != '\\') {
            if (out) out[n] = (char)ch;
            n++, p++;
            continue;
        }
        if (++p >= e) return NULL;
        switch (*p) {
        case '"': case '\\': case '/': u = (unsigned char)*p; break;
        case 'b': u = 8; break;
        case 'f': u = 12; break;
        case 'n': u = 10; break;
        case 'r': u = 13; break;
        case 't': u = 9; break;
        case 'u':
            if (!cli_json_hex4(p + 1, e, &u)) return NULL;
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF && e - p > 6 && p[1] == '\\' && p[2] == 'u' && cli_json_hex4(p + 3, e, &u2) &&
                u2 >= 0xDC00 && u2 <= 0xDFFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
                p += 6;
            } else if (u >= 0xD800 && u <= 0xDFFF) {
                u = 0xFFFD;
            }
            break;
        default: return NULL;
        }
        p++;
        if (out) {   // UTF-8 (never longer than the escape it came from)
            if (u < 0x80) out[n] = (char)u;
            else if (u < 0x800) out[n] = (char)(0xC0 | u >> 6), out[n + 1] = (char)(0x80 | (u & 63));
            else if (u < 0x10000)
                out[n] = (char)(0xE0 | u >> 12), out[n + 1] = (char)(0x80 | (u >> 6 & 63)), out[n + 2] = (char)(0x80 | (u & 63));
            else
                out[n] = (char)(0xF0 | u >> 18), out[n + 1] = (char)(0x80 | (u >> 12 & 63)),
                out[n + 2] = (char)(0x80 | (u >> 6 & 63)), out[n + 3] = (char)(0x80 | (u & 63));
        }
        n += u < 0x80 ? 1 : u < 0x800 ? 2 : u < 0x10000 ? 3 : 4;
    }
    if (p >= e) return NULL;
    if (len) *len = n;
    return p + 1;
}

// The end of the JSON value at p (whitespace skipped before it), NULL when malformed.
static inline const char *cli_json_skip(const char *p, const char *e, int depth) {
    p = cli_json_ws(p, e);
    if (p >= e || depth > 64) return NULL;
    if (*p == '"') return cli_json_string(p, e, NULL, NULL);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = cli_json_ws(p + 1, e);
        if (p < e && *p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = cli_json_string(cli_json_ws(p, e), e, NULL, NULL))) return NULL;
                p = cli_json_ws(p, e);
                if (p >= e || *p != ':') return NULL;
                p++;
            }
            if (!(p = cli_json_skip(p, e, depth + 1))) return NULL;
            p = cli_json_ws(p, e);
            if (p < e && *p == ',') {
                p++;
                continue;
            }
            return p < e && *p == close ? p + 1 : NULL;
        }
    }
    if (e - p >= 4 && (memcmp(p, "true", 4) == 0 || memcmp(p, "null", 4) == 0)) return p + 4;
    if (e - p >= 5 && memcmp(p, "false", 5) == 0) return p + 5;
    if (*p == '-' || (*p >= '0' && *p <= '9')) {   // a number, by JSON's grammar
        const char *q = p + (*p == '-');
        if (q >= e || *q < '0' || *q > '9') return NULL;
        if (*q == '0') q++;
        else while (q < e && *q >= '0' && *q <= '9') q++;
        if (q < e && *q == '.') {
            if (++q >= e || *q < '0' || *q > '9') return NULL;
            while (q < e && *q >= '0' && *q <= '9') q++;
        }
        if (q < e && (*q == 'e' || *q == 'E')) {
            q++;
            if (q < e && (*q == '+' || *q == '-')) q++;
            if (q >= e || *q < '0' || *q > '9') return NULL;
            while (q < e && *q >= '0' && *q <= '9') q++;
        }
        return q;
    }
    return NULL;
}

// The members of a JSON object, one at a time: *it starts at the text (the object's '{' after
// whitespace). Each call gives the next member's key (decoded into key, at most cap - 1 bytes; a
// longer key is cut) and its value's text [*v, *v_end); 1 for a member, 0 at the end, -1 when the
// text is not one JSON object (nothing but whitespace after it).
typedef struct cli_json_it { const char *p, *e; int state; } cli_json_it;

static inline void cli_json_begin(cli_json_it *it, const char *text, size_t len) {
    it->p = text;
    it->e = text + len;
    it->state = 0;
}

static inline int cli_json_member(cli_json_it *it, char *key, size_t cap, const char **v, const char **v_end) {
    const char *p = cli_json_ws(it->p, it->e), *q;
    size_t kl;
    if (it->state < 0) return -1;
    if (it->state == 2) return 0;
    if (it->state == 0) {   // the whole text must be one object: checked once, up front
        const char *end = cli_json_skip(p, it->e, 0);
        if (!end || *p != '{' || cli_json_ws(end, it->e) != it->e) return it->state = -1;
        p = cli_json_ws(p + 1, it->e);
        it->state = 1;
        if (*p == '}') return it->state = 2, 0;
    } else if (*p == ',') {
        p = cli_json_ws(p + 1, it->e);
    } else {
        return it->state = 2, 0;
    }
    q = cli_json_string(p, it->e, NULL, &kl);   // checked above: well formed
    if (!q) return it->state = -1;
    if (kl < cap) cli_json_string(p, it->e, key, NULL), key[kl] = 0;
    else {
        char *tmp = (char *)malloc(kl + 1);
        if (!tmp) return it->state = -1;
        cli_json_string(p, it->e, tmp, NULL);
        memcpy(key, tmp, cap - 1);
        key[cap - 1] = 0;
        free(tmp);
    }
    p = cli_json_ws(q, it->e) + 1;   // past ':'
    *v = cli_json_ws(p, it->e);
    *v_end = cli_json_skip(*v, it->e, 0);
    it->p = *v_end;
    return 1;
}

// The decoded text of the JSON string [v, v_end) as a new NUL-terminated buffer (free it), *len
// its length; NULL when it is no string (or out of memory).
static inline char *cli_json_str_dup(const char *v, const char *v_end, size_t *len) {
    size_t n;
    char *s;
    if (!cli_json_string(v, v_end, NULL, &n) || !(s = (char *)malloc(n + 1))) return NULL;
    cli_json_string(v, v_end, s, NULL);
    s[n] = 0;
    if (len) *len = n;
    return s;
}

// what a JSON value is, for messages
static inline const char *cli_json_kind(const char *v) {
    switch (*v) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't': case 'f': return "a boolean";
    case 'n': return "null";
    default: return "a number";
    }
}

#endif // FAT5_CLI_H
