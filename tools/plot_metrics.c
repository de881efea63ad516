// plot_metrics: a training run's metrics.jsonl as a PNG plot, with nothing but libc and libm
// (built with `make tools/plot_metrics`; it reads only the version string of fat5.h, through cli.h).
//
//     tools/plot_metrics METRICS.jsonl OUT.png [--title T] [--log-y] [--no-lr] [--smooth N|auto]
//                        [--width N] [--height N]
//     tools/plot_metrics --check FILE.png
//     tools/plot_metrics --help | --version      (--help: every option and its default)
//
// Each line of the log is one JSON object, as the trainer writes them (src/run_trainer.c: one row
// a step with "step", "loss", "lr", ...; the steps that evaluate add "eval_loss"). Rows with "step"
// and "loss" are training points (a blue line); with "step" and "eval_loss", evaluation points
// (orange squares, joined); with "step" and "lr", the learning rate (a green dashed line on its own
// axis, at the right). With more training points than half the plot's pixel columns, the loss is
// drawn lightly and its running mean over it (--smooth). Other keys ("grad_norm", "tokens_per_s", ...) and rows without those keys
// are ignored; keys may come in any order, with any JSON whitespace, and values may be any JSON
// (nested ones are skipped). Non-finite values (NaN, Infinity, -Infinity, null, or numbers past the
// double range), and with --log-y losses <= 0, are skipped and counted on stderr. A line that is not
// a JSON object, or has a loss without a step, is an error naming the file and line.
//
// The PNG is RGB, 8 bits per channel. Each row takes the PNG filter (none, sub, up, average, Paeth)
// whose bytes have the smallest sum of magnitudes, and the rows are compressed here: a zlib stream
// of deflate blocks with LZ77 (hash chains over the 32 KiB window, lazy matching) and dynamic
// Huffman codes (length-limited, built per block); CRC-32 and Adler-32 are computed here too. A
// plot of 800x500 (1.2 MB of pixel rows) takes about 10 KB. --check re-reads a PNG: the signature,
// every chunk's CRC, IHDR (8-bit RGB), the zlib header, the deflate stream (inflated here: stored,
// fixed and dynamic blocks), the Adler-32, the exact amount of pixel data and every row's filter
// byte; it prints "ok: WxH, ..." and exits 0, or names the first problem and exits 1.
//
// The text is drawn with the bitmap font below, made for this program: upper and lower case,
// digits and ASCII punctuation, proportional, 7 pixels above the baseline and 2 below.

#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "plot_metrics: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    exit(1);
}

// ---------------------------------------------------------------------------------------------
// JSONL reading

typedef struct { double *x, *y; size_t n, cap; } series;

static void series_add(series *s, double x, double y) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        double *nx = (double *)realloc(s->x, cap * sizeof(double)), *ny;
        if (!nx) die("%s%s", "out of memory", "");
        s->x = nx;
        ny = (double *)realloc(s->y, cap * sizeof(double));
        if (!ny) die("%s%s", "out of memory", "");
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
}

typedef struct { const char *p, *err; } jcur;

static void jws(jcur *c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n') c->p++;
}

// a string at c->p (after its opening quote is checked here); up to cap-1 bytes of it (escapes
// \" \\ \/ \b \f \n \r \t kept as their character, \uXXXX as '?') go to out
static int jstring(jcur *c, char *out, size_t cap) {
    size_t n = 0;
    if (*c->p != '"') return c->err = "expected a string", 0;
    c->p++;
    for (;;) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == 0) return c->err = "unterminated string", 0;
        if (ch < 0x20) return c->err = "control character in a string", 0;
        c->p++;
        if (ch == '"') break;
        if (ch == '\\') {
            char e = *c->p++;
            int i;
            switch (e) {
            case '"': case '\\': case '/': ch = (unsigned char)e; break;
            case 'b': ch = '\b'; break;
            case 'f': ch = '\f'; break;
            case 'n': ch = '\n'; break;
            case 'r': ch = '\r'; break;
            case 't': ch = '\t'; break;
            case 'u':
                for (i = 0; i < 4; i++, c->p++)
                    if (!((*c->p >= '0' && *c->p <= '9') || (*c->p >= 'a' && *c->p <= 'f') ||
                          (*c->p >= 'A' && *c->p <= 'F')))
                        return c->err = "bad \\u escape", 0;
                ch = '?';
                break;
            default: return c->err = "bad escape in a string", 0;
            }
        }
        if (out && n + 1 < cap) out[n++] = (char)ch;
    }
    if (out) out[n] = 0;
    return 1;
}

// A number (JSON grammar) or one of NaN, Infinity, -Infinity, null (as NaN). *num gets it.
static int jnumber(jcur *c, double *num) {
    const char *s = c->p, *q = s;
    char buf[64];
    size_t len;
    if (!strncmp(q, "NaN", 3)) { c->p += 3; *num = NAN; return 1; }
    if (!strncmp(q, "null", 4)) { c->p += 4; *num = NAN; return 1; }
    if (!strncmp(q, "Infinity", 8)) { c->p += 8; *num = INFINITY; return 1; }
    if (!strncmp(q, "-Infinity", 9)) { c->p += 9; *num = -INFINITY; return 1; }
    if (*q == '-') q++;
    if (*q == '0') q++;
    else if (*q >= '1' && *q <= '9') while (*q >= '0' && *q <= '9') q++;
    else return c->err = "expected a value", 0;
    if (*q == '.') {
        q++;
        if (!(*q >= '0' && *q <= '9')) return c->err = "bad number", 0;
        while (*q >= '0' && *q <= '9') q++;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '+' || *q == '-') q++;
        if (!(*q >= '0' && *q <= '9')) return c->err = "bad number", 0;
        while (*q >= '0' && *q <= '9') q++;
    }
    len = (size_t)(q - s);
    if (len >= sizeof buf) {  // a long mantissa: its value is still what strtod reads
        char *tmp = (char *)malloc(len + 1);
        if (!tmp) die("%s%s", "out of memory", "");
        memcpy(tmp, s, len);
        tmp[len] = 0;
        *num = strtod(tmp, NULL);
        free(tmp);
    } else {
        memcpy(buf, s, len);
        buf[len] = 0;
        *num = strtod(buf, NULL);  // the C locale: '.' is the decimal point
    }
    c->p = q;
    return 1;
}

// any JSON value, skipped
static int jskip(jcur *c, int depth) {
    double d;
    jws(c);
    if (depth > 64) return c->err = "nested too deeply", 0;
    if (*c->p == '"') return jstring(c, NULL, 0);
    if (!strncmp(c->p, "true", 4)) return c->p += 4, 1;
    if (!strncmp(c->p, "false", 5)) return c->p += 5, 1;
    if (*c->p == '[' || *c->p == '{') {
        char close = *c->p == '[' ? ']' : '}';
        int obj = close == '}';
        c->p++;
        jws(c);
        if (*c->p == close) return c->p++, 1;
        for (;;) {
            if (obj) {
                jws(c);
                if (!jstring(c, NULL, 0)) return 0;
                jws(c);
                if (*c->p != ':') return c->err = "expected ':'", 0;
                c->p++;
            }
            if (!jskip(c, depth + 1)) return 0;
            jws(c);
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == close) return c->p++, 1;
            return c->err = obj ? "expected ',' or '}'" : "expected ',' or ']'", 0;
        }
    }
    return jnumber(c, &d);
}

// One line: a JSON object. has[0..3] / val[0..3]: "step", "loss", "eval_loss", "lr" (the last
// one of a key wins).
#define NKEYS 4
static int jline(jcur *c, int has[NKEYS], double val[NKEYS]) {
    static const char *keys[NKEYS] = {"step", "loss", "eval_loss", "lr"};
    jws(c);
    if (*c->p != '{') return c->err = "not a JSON object", 0;
    c->p++;
    jws(c);
    if (*c->p == '}') c->p++;
    else
        for (;;) {
            char key[16];
            int k = -1, i;
            jws(c);
            if (!jstring(c, key, sizeof key)) return 0;
            for (i = 0; i < NKEYS; i++)
                if (!strcmp(key, keys[i])) k = i;
            jws(c);
            if (*c->p != ':') return c->err = "expected ':'", 0;
            c->p++;
            jws(c);
            if (k >= 0 && ((*c->p >= '0' && *c->p <= '9') || *c->p == '-' || *c->p == 'N' || *c->p == 'I' ||
                           *c->p == 'n')) {
                if (!jnumber(c, &val[k])) return 0;
                has[k] = 1;
            } else if (!jskip(c, 1)) {
                return 0;
            } else if (k >= 0 && k < 3) {   // an "lr" that is no number is left out
                return c->err = k == 0 ? "\"step\" is not a number" : "a loss is not a number", 0;
            }
            jws(c);
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == '}') { c->p++; break; }
            return c->err = "expected ',' or '}'", 0;
        }
    jws(c);
    if (*c->p) return c->err = "text after the object", 0;
    return 1;
}

typedef struct { series train, eval, lr; long skipped_nonfinite, skipped_nonpositive, lines; } metrics;

static void read_metrics(const char *path, int log_y, metrics *m) {
    FILE *f = fopen(path, "rb");
    char *line = NULL, lbuf[32];
    size_t cap = 0, len;
    long ln = 0;
    int ch = 0;
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    memset(m, 0, sizeof *m);
    while (ch != EOF) {
        jcur c;
        int has[NKEYS] = {0, 0, 0, 0}, k;
        double val[NKEYS] = {0, 0, 0, 0};
        len = 0;
        while ((ch = fgetc(f)) != EOF && ch != '\n') {
            if (len + 1 >= cap) {
                char *nl = (char *)realloc(line, cap = cap ? 2 * cap : 1024);
                if (!nl) die("%s%s", "out of memory", "");
                line = nl;
            }
            if (ch == 0) {
                sprintf(lbuf, "%ld", ln + 1);
                die("%s:%s: a NUL byte (not a text file?)", path, lbuf);
            }
            line[len++] = (char)ch;
        }
        if (ch == EOF && len == 0) break;
        ln++;
        if (!line) {  // an empty first line
            line = (char *)malloc(cap = 1024);
            if (!line) die("%s%s", "out of memory", "");
        }
        line[len] = 0;
        c.p = line;
        c.err = NULL;
        jws(&c);
        if (!*c.p) continue;  // blank line
        m->lines++;
        if (!jline(&c, has, val)) {
            sprintf(lbuf, "%ld", ln);
            fprintf(stderr, "plot_metrics: %s:%s: malformed JSON line (%s at column %ld)\n", path, lbuf, c.err,
                    (long)(c.p - line) + 1);
            exit(1);
        }
        if (!has[1] && !has[2] && !(has[3] && has[0])) continue;   // "lr" alone: with a step only
        if (!has[0]) {
            sprintf(lbuf, "%ld", ln);
            die("%s:%s: a loss without a \"step\"", path, lbuf);
        }
        for (k = 1; k < NKEYS; k++) {
            if (!has[k]) continue;
            if (!isfinite(val[0]) || !isfinite(val[k])) m->skipped_nonfinite++;
            else if (log_y && k < 3 && val[k] <= 0) m->skipped_nonpositive++;
            else series_add(k == 1 ? &m->train : k == 2 ? &m->eval : &m->lr, val[0], val[k]);
        }
    }
    if (ferror(f)) die("cannot read %s: %s", path, strerror(errno));
    fclose(f);
    free(line);
    if (m->lines == 0) die("%s: empty (no JSON lines)%s", path, "");
    if (m->train.n + m->eval.n == 0)
        die("%s: no finite \"loss\" or \"eval_loss\" values with a \"step\"%s", path, "");
}

// ---------------------------------------------------------------------------------------------
// drawing

typedef struct { unsigned char r, g, b; } rgb;
static int W = 800, H = 500;
static unsigned char *px;   // H rows of W RGB pixels

static void pset(int x, int y, rgb c) {
    unsigned char *p;
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    p = px + ((size_t)y * (size_t)W + (size_t)x) * 3;
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
}
static void rect(int x0, int y0, int x1, int y1, rgb c) {
    int x, y;
    for (y = y0; y <= y1; y++)
        for (x = x0; x <= x1; x++) pset(x, y, c);
}
// a line of width w (Bresenham, a w x w pen); dash (NULL: solid) counts the pen's steps across
// calls, so that a polyline keeps one pattern: 6 steps drawn, 4 left out (its segments after the
// first start where the one before ended: that point is not counted twice)
static void line(int x0, int y0, int x1, int y1, int w, rgb c, int *dash) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy,
        first = dash && *dash > 0;
    for (;;) {
        int e2 = 2 * e;
        if (first) first = 0;
        else if (!dash || (*dash)++ % 10 < 6) rect(x0 - (w - 1) / 2, y0 - (w - 1) / 2, x0 + w / 2, y0 + w / 2, c);
        if (x0 == x1 && y0 == y1) break;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

// The font: each glyph's rows from the top, '|' between rows, '#' ink and '.' paper; every row of
// a glyph has its width (1 to 5 columns). Row 6 is the baseline: capitals and digits take rows
// 0-6, lower case rows 2-6 with ascenders from row 0, and descenders reach rows 7-8. Glyphs are set
// one column apart.
#define FONT_ROWS 9
typedef struct { char ch; const char *rows; } glyph;
static const glyph font[] = {
    {' ', "...|...|...|...|...|...|..."},
    {'A', ".###.|#...#|#...#|#####|#...#|#...#|#...#"},
    {'B', "####.|#...#|#...#|####.|#...#|#...#|####."},
    {'C', ".###.|#...#|#....|#....|#....|#...#|.###."},
    {'D', "###..|#..#.|#...#|#...#|#...#|#..#.|###.."},
    {'E', "#####|#....|#....|####.|#....|#....|#####"},
    {'F', "#####|#....|#....|####.|#....|#....|#...."},
    {'G', ".###.|#...#|#....|#.###|#...#|#...#|.####"},
    {'H', "#...#|#...#|#...#|#####|#...#|#...#|#...#"},
    {'I', "###|.#.|.#.|.#.|.#.|.#.|###"},
    {'J', "..###|...#.|...#.|...#.|...#.|#..#.|.##.."},
    {'K', "#...#|#..#.|#.#..|##...|#.#..|#..#.|#...#"},
    {'L', "#....|#....|#....|#....|#....|#....|#####"},
    {'M', "#...#|##.##|#.#.#|#.#.#|#...#|#...#|#...#"},
    {'N', "#...#|#...#|##..#|#.#.#|#..##|#...#|#...#"},
    {'O', ".###.|#...#|#...#|#...#|#...#|#...#|.###."},
    {'P', "####.|#...#|#...#|####.|#....|#....|#...."},
    {'Q', ".###.|#...#|#...#|#...#|#.#.#|#..#.|.##.#"},
    {'R', "####.|#...#|#...#|####.|#.#..|#..#.|#...#"},
    {'S', ".###.|#...#|#....|.###.|....#|#...#|.###."},
    {'T', "#####|..#..|..#..|..#..|..#..|..#..|..#.."},
    {'U', "#...#|#...#|#...#|#...#|#...#|#...#|.###."},
    {'V', "#...#|#...#|#...#|#...#|#...#|.#.#.|..#.."},
    {'W', "#...#|#...#|#...#|#.#.#|#.#.#|##.##|#...#"},
    {'X', "#...#|#...#|.#.#.|..#..|.#.#.|#...#|#...#"},
    {'Y', "#...#|#...#|.#.#.|..#..|..#..|..#..|..#.."},
    {'Z', "#####|....#|...#.|..#..|.#...|#....|#####"},
    {'a', "....|....|.##.|...#|.###|#..#|.###"},
    {'b', "#...|#...|###.|#..#|#..#|#..#|###."},
    {'c', "...|...|.##|#..|#..|#..|.##"},
    {'d', "...#|...#|.###|#..#|#..#|#..#|.###"},
    {'e', "....|....|.##.|#..#|####|#...|.###"},
    {'f', ".##|#..|###|#..|#..|#..|#.."},
    {'g', "....|....|.###|#..#|#..#|#..#|.###|...#|.##."},
    {'h', "#...|#...|###.|#..#|#..#|#..#|#..#"},
    {'i', "#|.|#|#|#|#|#"},
    {'j', ".#|..|.#|.#|.#|.#|.#|.#|#."},
    {'k', "#...|#...|#..#|#.#.|##..|#.#.|#..#"},
    {'l', "#.|#.|#.|#.|#.|#.|.#"},
    {'m', ".....|.....|####.|#.#.#|#.#.#|#.#.#|#.#.#"},
    {'n', "....|....|###.|#..#|#..#|#..#|#..#"},
    {'o', "....|....|.##.|#..#|#..#|#..#|.##."},
    {'p', "....|....|###.|#..#|#..#|#..#|###.|#...|#..."},
    {'q', "....|....|.###|#..#|#..#|#..#|.###|...#|...#"},
    {'r', "...|...|#.#|##.|#..|#..|#.."},
    {'s', "....|....|.###|#...|.##.|...#|###."},
    {'t', "...|.#.|###|.#.|.#.|.#.|..#"},
    {'u', "....|....|#..#|#..#|#..#|#..#|.###"},
    {'v', ".....|.....|#...#|#...#|.#.#.|.#.#.|..#.."},
    {'w', ".....|.....|#...#|#...#|#.#.#|#.#.#|.#.#."},
    {'x', "....|....|#..#|#..#|.##.|#..#|#..#"},
    {'y', "....|....|#..#|#..#|#..#|#..#|.###|...#|.##."},
    {'z', "....|....|####|..#.|.#..|#...|####"},
    {'0', ".###.|#...#|#..##|#.#.#|##..#|#...#|.###."},
    {'1', "..#..|.##..|..#..|..#..|..#..|..#..|.###."},
    {'2', ".###.|#...#|....#|...#.|..#..|.#...|#####"},
    {'3', ".###.|#...#|....#|..##.|....#|#...#|.###."},
    {'4', "...#.|..##.|.#.#.|#..#.|#####|...#.|...#."},
    {'5', "#####|#....|####.|....#|....#|#...#|.###."},
    {'6', "..##.|.#...|#....|####.|#...#|#...#|.###."},
    {'7', "#####|....#|...#.|..#..|.#...|.#...|.#..."},
    {'8', ".###.|#...#|#...#|.###.|#...#|#...#|.###."},
    {'9', ".###.|#...#|#...#|.####|....#|...#.|.##.."},
    {'.', ".|.|.|.|.|.|#"},
    {',', "..|..|..|..|..|.#|.#|#."},
    {':', ".|.|#|.|.|.|#"},
    {';', "..|..|.#|..|..|..|.#|#."},
    {'!', "#|#|#|#|#|.|#"},
    {'?', ".###.|#...#|....#|...#.|..#..|.....|..#.."},
    {'\'', "#|#"},
    {'"', "#.#|#.#"},
    {'`', "#.|.#"},
    {'-', "...|...|...|###"},
    {'+', ".....|..#..|..#..|#####|..#..|..#.."},
    {'=', "....|....|####|....|####"},
    {'*', ".....|..#..|#.#.#|.###.|#.#.#|..#.."},
    {'/', "..#|..#|.#.|.#.|.#.|#..|#.."},
    {'\\', "#..|#..|.#.|.#.|.#.|..#|..#"},
    {'|', "#|#|#|#|#|#|#|#"},
    {'_', ".....|.....|.....|.....|.....|.....|.....|#####"},
    {'(', "..#|.#.|#..|#..|#..|.#.|..#"},
    {')', "#..|.#.|..#|..#|..#|.#.|#.."},
    {'[', "##|#.|#.|#.|#.|#.|##"},
    {']', "##|.#|.#|.#|.#|.#|##"},
    {'{', ".##|.#.|.#.|#..|.#.|.#.|.##"},
    {'}', "##.|.#.|.#.|..#|.#.|.#.|##."},
    {'<', "...#|..#.|.#..|#...|.#..|..#.|...#"},
    {'>', "#...|.#..|..#.|...#|..#.|.#..|#..."},
    {'%', "##..#|##..#|...#.|..#..|.#...|#..##|#..##"},
    {'#', ".#.#.|.#.#.|#####|.#.#.|#####|.#.#.|.#.#."},
    {'&', ".##..|#..#.|#.#..|.#...|#.#.#|#..#.|.##.#"},
    {'@', ".###.|#...#|#.###|#.#.#|#.###|#....|.###."},
    {'$', "..#..|.####|#.#..|.###.|..#.#|####.|..#.."},
    {'^', "..#..|.#.#.|#...#"},
    {'~', ".....|.....|.#...|#.#.#|...#."},
};
static const char *const box_glyph = "#####|#...#|#...#|#...#|#...#|#...#|#####";  // anything else
static const char *glyph_rows[128];
static int glyph_cols[128];

// the table above, indexed; its shape checked (every row of a glyph as wide, at most 9 rows)
static void font_init(void) {
    size_t g;
    for (g = 0; g < sizeof font / sizeof font[0]; g++) {
        const char *p = font[g].rows;
        int w = (int)strcspn(p, "|"), rows = 0;
        while (*p) {
            if ((int)strcspn(p, "|") != w || w < 1 || w > 5) {
                char ch[2] = {font[g].ch, 0};
                die("internal: glyph '%s' has rows of two widths%s", ch, "");
            }
            p += w;
            rows++;
            if (*p == '|') p++;
        }
        if (rows > FONT_ROWS) die("internal: a glyph has more than 9 rows%s%s", "", "");
        glyph_rows[(unsigned char)font[g].ch] = font[g].rows;
        glyph_cols[(unsigned char)font[g].ch] = w;
    }
}
static const char *glyph_of(char ch, int *cols) {
    unsigned char u = (unsigned char)ch;
    if (u < 128 && glyph_rows[u]) return *cols = glyph_cols[u], glyph_rows[u];
    return *cols = 5, box_glyph;
}
static int text_w(const char *s, int scale) {
    int w = 0, cols;
    for (; *s; s++) glyph_of(*s, &cols), w += (cols + 1) * scale;
    return w ? w - scale : 0;
}
// text with its top-left corner at (x, y) (row 0 of the glyphs); up: turned a quarter left, read
// from bottom to top, starting at (x, y) as the bottom-left corner
static void text_at(int x, int y, const char *s, int scale, rgb c, int up) {
    int pos = 0;
    for (; *s; s++) {
        int cols, r = 0, k = 0;
        const char *p = glyph_of(*s, &cols);
        for (; *p; p++) {
            if (*p == '|') { r++; k = 0; continue; }
            if (*p == '#') {
                int gx = pos + k * scale, gy = r * scale;
                if (!up) rect(x + gx, y + gy, x + gx + scale - 1, y + gy + scale - 1, c);
                else rect(x + gy, y - gx - scale + 1, x + gy + scale - 1, y - gx, c);
            }
            k++;
        }
        pos += (cols + 1) * scale;
    }
}
static void text(int x, int y, const char *s, int scale, rgb c) { text_at(x, y, s, scale, c, 0); }

// "nice" tick spacing: 1, 2 or 5 times a power of ten, about n ticks over [lo, hi]
static double nice_step(double lo, double hi, int n) {
    double raw = (hi - lo) / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}
// a tick's label: as many decimals as the step needs; 25k for 25000 on a step of 5000 or more
static void fmt_tick(char *buf, size_t cap, double v, double step) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-6) v = 0;
    if (v != 0 && step >= 5000 && fabs(v) < 1e9 && fmod(v, 1000) == 0) snprintf(buf, cap, "%.0fk", v / 1000);
    else if (v != 0 && (fabs(v) >= 1e9 || fabs(v) < 1e-4 || dec > 6)) snprintf(buf, cap, "%.3g", v);
    else snprintf(buf, cap, "%.*f", dec, v);
}
// a small number as m e-N ("2.5e-4"); numbers from 0.01 up as fmt_tick writes them
static void fmt_sci(char *buf, size_t cap, double v, double step) {
    int e;
    size_t n;
    if (fabs(v) < step * 1e-6) v = 0;
    if (v == 0) {
        snprintf(buf, cap, "0");
        return;
    }
    if (fabs(v) >= 0.01) {
        fmt_tick(buf, cap, v, step);
        return;
    }
    e = (int)floor(log10(fabs(v)) + 1e-9);
    snprintf(buf, cap, "%.2f", v / pow(10, e));
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '0') buf[--n] = 0;
    if (n > 0 && buf[n - 1] == '.') buf[--n] = 0;
    snprintf(buf + n, cap - n, "e%d", e);
}

// ---------------------------------------------------------------------------------------------
// PNG: checksums, row filters, deflate (zlib stream), chunks

static uint32_t crc_table[256];
static void crc_init(void) {
    uint32_t n, c;
    int k;
    for (n = 0; n < 256; n++) {
        for (c = n, k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}
static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
    while (n--) crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}
static uint32_t adler_update(uint32_t a, const unsigned char *p, size_t n) {
    uint32_t s1 = a & 0xFFFF, s2 = a >> 16;
    while (n) {   // 5552 bytes at most between the reductions: s2 stays below 2^32
        size_t k = n < 5552 ? n : 5552;
        n -= k;
        while (k--) {
            s1 += *p++;
            s2 += s1;
        }
        s1 %= 65521;
        s2 %= 65521;
    }
    return s2 << 16 | s1;
}
static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) die("%s%s", "out of memory", "");
    return p;
}

// The rows as PNG stores them: each a filter byte and the row filtered with it, the filter whose
// bytes (as signed) have the smallest sum of magnitudes (PNG's own recommendation for RGB).
static unsigned char *filter_rows(size_t *raw_n) {
    size_t stride = 3 * (size_t)W, y, x;
    unsigned char *raw = (unsigned char *)xmalloc((size_t)H * (1 + stride)), *trial = (unsigned char *)xmalloc(5 * stride);
    for (y = 0; y < (size_t)H; y++) {
        const unsigned char *cur = px + y * stride, *up = y ? cur - stride : NULL;
        unsigned long best_sum = (unsigned long)-1;
        int f, best = 0;
        for (f = 0; f < 5; f++) {
            unsigned char *t = trial + (size_t)f * stride;
            unsigned long sum = 0;
            for (x = 0; x < stride; x++) {
                int a = x >= 3 ? cur[x - 3] : 0, b = up ? up[x] : 0, c = x >= 3 && up ? up[x - 3] : 0, pred;
                if (f == 0) pred = 0;
                else if (f == 1) pred = a;
                else if (f == 2) pred = b;
                else if (f == 3) pred = (a + b) / 2;
                else {
                    int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
                    pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
                }
                t[x] = (unsigned char)(cur[x] - pred);
                sum += t[x] < 128 ? t[x] : 256 - t[x];
            }
            if (sum < best_sum) best_sum = sum, best = f;
        }
        raw[y * (1 + stride)] = (unsigned char)best;
        memcpy(raw + y * (1 + stride) + 1, trial + (size_t)best * stride, stride);
    }
    free(trial);
    *raw_n = (size_t)H * (1 + stride);
    return raw;
}

// bits out, least significant first, as deflate packs them
typedef struct { unsigned char *p; size_t n, cap; uint32_t bb; int bn; } bitw;
static void put_byte(bitw *w, unsigned char b) {
    if (w->n == w->cap) {
        unsigned char *np = (unsigned char *)realloc(w->p, w->cap = w->cap ? 2 * w->cap : 1 << 16);
        if (!np) die("%s%s", "out of memory", "");
        w->p = np;
    }
    w->p[w->n++] = b;
}
static void put_bits(bitw *w, uint32_t v, int n) {   // n <= 16, v < 2^n
    w->bb |= v << w->bn;
    w->bn += n;
    while (w->bn >= 8) {
        put_byte(w, (unsigned char)w->bb);
        w->bb >>= 8;
        w->bn -= 8;
    }
}
static void flush_bits(bitw *w) {
    if (w->bn > 0) put_byte(w, (unsigned char)w->bb);
    w->bb = 0;
    w->bn = 0;
}

// deflate's length codes 257..285 and distance codes 0..29: the first value of each, extra bits
static const unsigned short len_base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                            31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const unsigned char len_extra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                            2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const unsigned short dist_base[30] = {1,   2,   3,   4,    5,    7,    9,    13,   17,   25,
                                             33,  49,  65,  97,   129,  193,  257,  385,  513,  769,
                                             1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const unsigned char dist_extra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                                             6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
// the order the code length code's lengths are sent in
static const unsigned char cl_order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

static int len_code(int len) {   // 0..28 for a match length 3..258
    int k = 28;
    while (len_base[k] > len) k--;
    return k;
}
static int dist_code(int dist) {   // 0..29 for a distance 1..32768
    int lo = 0, hi = 29;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (dist_base[mid] <= dist) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Huffman code lengths for n symbols (n <= 288) of the given frequencies, none longer than limit:
// a Huffman tree built from the sorted leaves (two queues); while it is too deep, the frequencies
// are halved (keeping each used symbol at 1 or more) and it is built again. Unused symbols get 0.
static void huff_lengths(const uint32_t *freq, int n, int limit, unsigned char *len) {
    uint32_t f[288];
    int leaf[288], parent[576], depth[576], m, k, i;
    uint64_t wt[576];
    memcpy(f, freq, (size_t)n * sizeof f[0]);
    for (;;) {
        int li = 0, ni, next, maxd = 0;
        for (m = 0, k = 0; k < n; k++) {
            len[k] = 0;
            if (f[k]) {   // insertion into leaf[], sorted by frequency, then symbol
                for (i = m++; i > 0 && f[leaf[i - 1]] > f[k]; i--) leaf[i] = leaf[i - 1];
                leaf[i] = k;
            }
        }
        if (m == 0) return;
        if (m == 1) {
            len[leaf[0]] = 1;
            return;
        }
        for (i = 0; i < m; i++) wt[i] = f[leaf[i]];
        for (ni = next = m; next < 2 * m - 1; next++) {
            int two[2], t;
            for (t = 0; t < 2; t++) two[t] = li < m && (ni >= next || wt[li] <= wt[ni]) ? li++ : ni++;
            wt[next] = wt[two[0]] + wt[two[1]];
            parent[two[0]] = parent[two[1]] = next;
        }
        depth[2 * m - 2] = 0;
        for (i = 2 * m - 3; i >= 0; i--) depth[i] = depth[parent[i]] + 1;
        for (i = 0; i < m; i++)
            if (depth[i] > maxd) maxd = depth[i];
        if (maxd <= limit) {
            for (i = 0; i < m; i++) len[leaf[i]] = (unsigned char)depth[i];
            return;
        }
        for (k = 0; k < n; k++)
            if (f[k]) f[k] = (f[k] + 1) / 2;
    }
}
// the canonical codes of those lengths, bit-reversed for put_bits
static void huff_codes(const unsigned char *len, int n, uint16_t *code) {
    int count[16] = {0}, next[16], k, b;
    unsigned c = 0;
    for (k = 0; k < n; k++) count[len[k]]++;
    count[0] = 0;
    for (b = 1; b < 16; b++) next[b] = (int)(c = (c + (unsigned)count[b - 1]) << 1);
    for (k = 0; k < n; k++) {
        unsigned v, r = 0;
        if (!len[k]) continue;
        v = (unsigned)next[len[k]]++;
        for (b = 0; b < len[k]; b++, v >>= 1) r = r << 1 | (v & 1);
        code[k] = (uint16_t)r;
    }
}
// at least two symbols in use, so that every code is complete (a lone code would be 1 bit of 2)
static void two_used(uint32_t *freq, int n) {
    int k, used = 0;
    for (k = 0; k < n; k++) used += freq[k] != 0;
    for (k = 0; used < 2 && k < n; k++)
        if (!freq[k]) freq[k] = 1, used++;
}

typedef struct { uint16_t len, dist; } lzsym;   // dist 0: the literal byte len

// one deflate block with dynamic Huffman codes (BTYPE 10)
static void write_block(bitw *w, const lzsym *s, size_t ns, int final) {
    uint32_t lf[286] = {0}, df[30] = {0}, cf[19] = {0};
    unsigned char ll[286], dl[30], cl[19], lens[316], rle_sym[316], rle_extra[316];
    uint16_t lc[286], dc[30], cc[19];
    int hlit, hdist, hclen, total, k, nr = 0;
    size_t i;
    for (i = 0; i < ns; i++)
        if (!s[i].dist) lf[s[i].len]++;
        else lf[257 + len_code(s[i].len)]++, df[dist_code(s[i].dist)]++;
    lf[256] = 1;
    two_used(lf, 286);
    two_used(df, 30);
    huff_lengths(lf, 286, 15, ll);
    huff_lengths(df, 30, 15, dl);
    huff_codes(ll, 286, lc);
    huff_codes(dl, 30, dc);
    for (hlit = 286; hlit > 257 && !ll[hlit - 1]; hlit--) {}
    for (hdist = 30; hdist > 1 && !dl[hdist - 1]; hdist--) {}
    memcpy(lens, ll, (size_t)hlit);
    memcpy(lens + hlit, dl, (size_t)hdist);
    total = hlit + hdist;
    // the lengths, run-length coded: 16 repeats the last length 3-6 times, 17 and 18 give 3-10
    // and 11-138 zeros
    for (k = 0; k < total;) {
        int v = lens[k], run = 1, r;
        while (k + run < total && lens[k + run] == v) run++;
        r = run;
        if (v == 0) {
            while (r >= 11) {
                int t = r > 138 ? 138 : r;
                rle_sym[nr] = 18, rle_extra[nr++] = (unsigned char)(t - 11), r -= t;
            }
            if (r >= 3) rle_sym[nr] = 17, rle_extra[nr++] = (unsigned char)(r - 3), r = 0;
        } else {
            rle_sym[nr] = (unsigned char)v, rle_extra[nr++] = 0, r--;
            while (r >= 3) {
                int t = r > 6 ? 6 : r;
                rle_sym[nr] = 16, rle_extra[nr++] = (unsigned char)(t - 3), r -= t;
            }
        }
        while (r-- > 0) rle_sym[nr] = (unsigned char)v, rle_extra[nr++] = 0;
        k += run;
    }
    for (k = 0; k < nr; k++) cf[rle_sym[k]]++;
    two_used(cf, 19);
    huff_lengths(cf, 19, 7, cl);
    huff_codes(cl, 19, cc);
    for (hclen = 19; hclen > 4 && !cl[cl_order[hclen - 1]]; hclen--) {}
    put_bits(w, (uint32_t)final, 1);
    put_bits(w, 2, 2);
    put_bits(w, (uint32_t)(hlit - 257), 5);
    put_bits(w, (uint32_t)(hdist - 1), 5);
    put_bits(w, (uint32_t)(hclen - 4), 4);
    for (k = 0; k < hclen; k++) put_bits(w, cl[cl_order[k]], 3);
    for (k = 0; k < nr; k++) {
        int sym = rle_sym[k];
        put_bits(w, cc[sym], cl[sym]);
        if (sym >= 16) put_bits(w, rle_extra[k], sym == 16 ? 2 : sym == 17 ? 3 : 7);
    }
    for (i = 0; i < ns; i++) {
        if (!s[i].dist) {
            put_bits(w, lc[s[i].len], ll[s[i].len]);
        } else {
            int lcd = len_code(s[i].len), dcd = dist_code(s[i].dist);
            put_bits(w, lc[257 + lcd], ll[257 + lcd]);
            if (len_extra[lcd]) put_bits(w, (uint32_t)(s[i].len - len_base[lcd]), len_extra[lcd]);
            put_bits(w, dc[dcd], dl[dcd]);
            if (dist_extra[dcd]) put_bits(w, (uint32_t)(s[i].dist - dist_base[dcd]), dist_extra[dcd]);
        }
    }
    put_bits(w, lc[256], ll[256]);
}

// LZ77 over a 32 KiB window: the positions hashed by their first 3 bytes, each hash's earlier
// positions chained (up to MAX_CHAIN looked at); a match is kept only if the next position has no
// longer one (lazy matching). Blocks of BLOCK_SYMS symbols, each with its own codes.
#define WIN (1 << 15)
#define HASH_BITS 15
#define MAX_CHAIN 128
#define LAZY_BELOW 64
#define BLOCK_SYMS (1 << 15)
typedef struct { const unsigned char *in; size_t n; int32_t *head, *prev; } lz;
static uint32_t lz_hash(const unsigned char *p) {
    return ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16) * 2654435761u >> (32 - HASH_BITS);
}
static void lz_insert(lz *z, size_t pos) {
    if (pos + 3 <= z->n) {
        uint32_t h = lz_hash(z->in + pos);
        z->prev[pos & (WIN - 1)] = z->head[h];
        z->head[h] = (int32_t)pos;
    }
}
// the longest earlier match at pos (3 or more bytes; 0: none), its distance in *dist
static int lz_match(const lz *z, size_t pos, int *dist) {
    size_t max = z->n - pos < 258 ? z->n - pos : 258, best = 0;
    int32_t cand;
    int chain = MAX_CHAIN;
    if (max < 3) return 0;
    for (cand = z->head[lz_hash(z->in + pos)]; cand >= 0 && pos - (size_t)cand <= WIN && chain-- > 0;
         cand = z->prev[cand & (WIN - 1)]) {
        const unsigned char *a = z->in + cand, *b = z->in + pos;
        size_t l = 0;
        if (a[best] != b[best]) continue;
        while (l < max && a[l] == b[l]) l++;
        if (l > best) {
            best = l;
            *dist = (int)(pos - (size_t)cand);
            if (l == max) break;
        }
    }
    return best >= 3 ? (int)best : 0;
}
static void deflate(const unsigned char *in, size_t n, bitw *w) {
    lz z;
    lzsym *syms = (lzsym *)xmalloc(BLOCK_SYMS * sizeof(lzsym));
    size_t i = 0, ins = 0, ns = 0, k;
    z.in = in;
    z.n = n;
    z.head = (int32_t *)xmalloc(sizeof(int32_t) << HASH_BITS);
    z.prev = (int32_t *)xmalloc(sizeof(int32_t) * WIN);
    for (k = 0; k < (size_t)1 << HASH_BITS; k++) z.head[k] = -1;
    while (i < n) {
        int len, dist = 0;
        while (ins < i) lz_insert(&z, ins++);
        len = lz_match(&z, i, &dist);
        if (len) {
            while (len < LAZY_BELOW && i + 1 < n) {   // a longer match one byte on: this byte a literal
                int len2, dist2 = 0;
                while (ins < i + 1) lz_insert(&z, ins++);
                len2 = lz_match(&z, i + 1, &dist2);
                if (len2 <= len) break;
                syms[ns].len = in[i], syms[ns++].dist = 0;
                if (ns == BLOCK_SYMS) write_block(w, syms, ns, 0), ns = 0;
                i++, len = len2, dist = dist2;
            }
            syms[ns].len = (uint16_t)len, syms[ns++].dist = (uint16_t)dist;
            i += (size_t)len;
        } else {
            syms[ns].len = in[i++], syms[ns++].dist = 0;
        }
        if (ns == BLOCK_SYMS) write_block(w, syms, ns, 0), ns = 0;
    }
    write_block(w, syms, ns, 1);
    flush_bits(w);
    free(syms);
    free(z.head);
    free(z.prev);
}

static int chunk(FILE *f, const char *type, const unsigned char *data, size_t n) {
    unsigned char hdr[8], tail[4];
    uint32_t crc;
    be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    crc = crc_update(0xFFFFFFFFu, hdr + 4, 4);
    crc = crc_update(crc, data, n) ^ 0xFFFFFFFFu;
    be32(tail, crc);
    return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4;
}

// the picture as a PNG file; its size in bytes
static long write_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    size_t raw_n;
    unsigned char *raw = filter_rows(&raw_n), ihdr[13], adler[4];
    bitw z = {NULL, 0, 0, 0, 0};
    FILE *f;
    int ok;
    put_byte(&z, 0x78);   // deflate, 32 KiB window
    put_byte(&z, 0xDA);   // no dictionary, level "maximum"; (0x78 * 256 + 0xDA) % 31 == 0
    deflate(raw, raw_n, &z);
    be32(adler, adler_update(1, raw, raw_n));
    put_byte(&z, adler[0]), put_byte(&z, adler[1]), put_byte(&z, adler[2]), put_byte(&z, adler[3]);
    be32(ihdr, (uint32_t)W);
    be32(ihdr + 4, (uint32_t)H);
    ihdr[8] = 8;   // bits per channel
    ihdr[9] = 2;   // RGB
    ihdr[10] = ihdr[11] = ihdr[12] = 0;  // deflate, adaptive filters, no interlace
    if (!(f = fopen(path, "wb"))) die("cannot write %s: %s", path, strerror(errno));
    ok = fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", z.p, z.n) && chunk(f, "IEND", NULL, 0);
    if (fclose(f) != 0) ok = 0;
    if (!ok) die("cannot write %s: %s", path, strerror(errno));
    free(raw);
    free(z.p);
    return (long)(8 + 25 + 12 + z.n + 12);
}

// ---------------------------------------------------------------------------------------------
// --check: inflate (RFC 1951, all three block types), then the PNG's own rules

typedef struct { short count[16], symbol[288]; } huff;
typedef struct {
    const unsigned char *in;
    size_t n, pos;
    uint32_t bb;
    int bn;
    unsigned char *out;
    size_t outn, outcap;
    const char *err;
} inflater;

static long inf_bits(inflater *s, int need) {   // -1 past the end of the input
    long v;
    while (s->bn < need) {
        if (s->pos == s->n) return s->err = "the deflate stream ends early", -1;
        s->bb |= (uint32_t)s->in[s->pos++] << s->bn;
        s->bn += 8;
    }
    v = (long)(s->bb & ((1u << need) - 1));
    s->bb >>= need;
    s->bn -= need;
    return v;
}
// the canonical code of n lengths; 0 complete, > 0 incomplete, < 0 over-subscribed
static int huff_build(huff *h, const unsigned char *len, int n) {
    short offs[16];
    int k, left = 1;
    for (k = 0; k < 16; k++) h->count[k] = 0;
    for (k = 0; k < n; k++) h->count[len[k]]++;
    if (h->count[0] == n) return 0;   // no codes: complete, decodes nothing
    for (k = 1; k < 16; k++) {
        left = left * 2 - h->count[k];
        if (left < 0) return left;
    }
    offs[1] = 0;
    for (k = 1; k < 15; k++) offs[k + 1] = (short)(offs[k] + h->count[k]);
    for (k = 0; k < n; k++)
        if (len[k]) h->symbol[offs[len[k]]++] = (short)k;
    return left;
}
static int huff_decode(inflater *s, const huff *h) {   // a symbol, or -1
    int code = 0, first = 0, index = 0, k;
    for (k = 1; k < 16; k++) {
        long b = inf_bits(s, 1);
        int count = h->count[k];
        if (b < 0) return -1;
        code |= (int)b;
        if (code - count < first) return h->symbol[index + (code - first)];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
    }
    s->err = "a code that is in no table";
    return -1;
}
static int inf_codes(inflater *s, const huff *lit, const huff *dist) {
    for (;;) {
        int sym = huff_decode(s, lit);
        if (sym < 0) return 0;
        if (sym < 256) {
            if (s->outn == s->outcap) return s->err = "more pixel data than IHDR's size", 0;
            s->out[s->outn++] = (unsigned char)sym;
        } else if (sym == 256) {
            return 1;
        } else {
            long len, d, e;
            if ((sym -= 257) >= 29) return s->err = "a bad length code", 0;
            if ((e = inf_bits(s, len_extra[sym])) < 0) return 0;
            len = len_base[sym] + e;
            if ((sym = huff_decode(s, dist)) < 0) return 0;
            if (sym >= 30) return s->err = "a bad distance code", 0;
            if ((e = inf_bits(s, dist_extra[sym])) < 0) return 0;
            d = dist_base[sym] + e;
            if ((size_t)d > s->outn) return s->err = "a distance before the start of the data", 0;
            if ((size_t)len > s->outcap - s->outn) return s->err = "more pixel data than IHDR's size", 0;
            for (; len > 0; len--, s->outn++) s->out[s->outn] = s->out[s->outn - (size_t)d];
        }
    }
}
// a block's codes: a complete code, or one code of one bit alone (as inflate accepts)
static int huff_ok(const huff *h, int err, int n) { return err == 0 || (err > 0 && n - h->count[0] == 1 && h->count[1] == 1); }
static int inf_block(inflater *s, int type) {
    static huff lit, dist;
    unsigned char len[320];
    int k;
    if (type == 0) {   // stored
        size_t n;
        s->bb = 0, s->bn = 0;
        if (s->n - s->pos < 4) return s->err = "a stored block ends early", 0;
        n = s->in[s->pos] | (size_t)s->in[s->pos + 1] << 8;
        if ((n ^ (s->in[s->pos + 2] | (size_t)s->in[s->pos + 3] << 8)) != 0xFFFF) return s->err = "stored block LEN/NLEN mismatch", 0;
        s->pos += 4;
        if (n > s->n - s->pos) return s->err = "a stored block ends early", 0;
        if (n > s->outcap - s->outn) return s->err = "more pixel data than IHDR's size", 0;
        memcpy(s->out + s->outn, s->in + s->pos, n);
        s->outn += n;
        s->pos += n;
        return 1;
    }
    if (type == 1) {   // fixed codes
        for (k = 0; k < 288; k++) len[k] = k < 144 ? 8 : k < 256 ? 9 : k < 280 ? 7 : 8;
        huff_build(&lit, len, 288);
        for (k = 0; k < 30; k++) len[k] = 5;
        huff_build(&dist, len, 30);
        return inf_codes(s, &lit, &dist);
    }
    if (type == 2) {   // dynamic codes
        long nlen = inf_bits(s, 5), ndist = inf_bits(s, 5), ncode = inf_bits(s, 4);
        huff lencode;
        if (ncode < 0) return 0;
        nlen += 257, ndist += 1, ncode += 4;
        if (nlen > 286 || ndist > 30) return s->err = "too many length or distance codes", 0;
        for (k = 0; k < 19; k++) {
            long v = k < ncode ? inf_bits(s, 3) : 0;
            if (v < 0) return 0;
            len[cl_order[k]] = (unsigned char)v;
        }
        if (huff_build(&lencode, len, 19) != 0) return s->err = "an incomplete code length code", 0;
        for (k = 0; k < nlen + ndist;) {
            int sym = huff_decode(s, &lencode), rep;
            long e;
            unsigned char v = 0;
            if (sym < 0) return 0;
            if (sym < 16) {
                len[k++] = (unsigned char)sym;
                continue;
            }
            if (sym == 16) {
                if (k == 0) return s->err = "a repeat with no length before it", 0;
                v = len[k - 1];
                if ((e = inf_bits(s, 2)) < 0) return 0;
                rep = 3 + (int)e;
            } else if (sym == 17) {
                if ((e = inf_bits(s, 3)) < 0) return 0;
                rep = 3 + (int)e;
            } else {
                if ((e = inf_bits(s, 7)) < 0) return 0;
                rep = 11 + (int)e;
            }
            if (k + rep > nlen + ndist) return s->err = "too many code lengths", 0;
            while (rep--) len[k++] = v;
        }
        if (len[256] == 0) return s->err = "no end-of-block code", 0;
        if (!huff_ok(&lit, huff_build(&lit, len, (int)nlen), (int)nlen)) return s->err = "a bad literal/length code", 0;
        if (!huff_ok(&dist, huff_build(&dist, len + nlen, (int)ndist), (int)ndist)) return s->err = "a bad distance code", 0;
        return inf_codes(s, &lit, &dist);
    }
    return s->err = "a deflate block of type 3 (reserved)", 0;
}

// 0 and "ok: WxH, ..." when the file is a PNG as write_png makes them (any deflate stream)
static int check_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL, *idat = NULL;
    size_t n = 0, cap = 0, pos = 8, idat_n = 0, got;
    uint32_t w = 0, h = 0;
    int seen_ihdr = 0, seen_iend = 0, chunks = 0, blocks = 0;
    const char *why = NULL;
    if (!f) die("cannot open %s: %s", path, strerror(errno));
    for (;;) {
        if (n == cap && !(buf = (unsigned char *)realloc(buf, cap = cap ? 2 * cap : 1 << 20))) die("%s%s", "out of memory", "");
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    fclose(f);
    if (n < 8 || memcmp(buf, sig, 8)) why = "no PNG signature";
    while (!why && !seen_iend) {
        uint32_t len, crc;
        char type[5];
        if (n - pos < 12) { why = "truncated chunk (no IEND)"; break; }
        len = rd32(buf + pos);
        if (len > n - pos - 12) { why = "chunk length past the end of the file"; break; }
        memcpy(type, buf + pos + 4, 4);
        type[4] = 0;
        crc = crc_update(0xFFFFFFFFu, buf + pos + 4, 4 + (size_t)len) ^ 0xFFFFFFFFu;
        if (crc != rd32(buf + pos + 8 + len)) {
            fprintf(stderr, "plot_metrics: %s: chunk %d (%s): CRC mismatch\n", path, chunks, type);
            free(buf);
            free(idat);
            return 1;
        }
        if (chunks == 0 && strcmp(type, "IHDR")) why = "the first chunk is not IHDR";
        else if (!strcmp(type, "IHDR")) {
            const unsigned char *d = buf + pos + 8;
            if (len != 13) why = "IHDR is not 13 bytes";
            else if ((w = rd32(d)) == 0 || (h = rd32(d + 4)) == 0 || w > 1u << 16 || h > 1u << 16) why = "bad size";
            else if (d[8] != 8 || d[9] != 2 || d[10] || d[11] || d[12]) why = "not 8-bit RGB, deflate, no interlace";
            seen_ihdr = 1;
        } else if (!strcmp(type, "IDAT")) {
            unsigned char *p = (unsigned char *)realloc(idat, idat_n + len + 1);
            if (!p) die("%s%s", "out of memory", "");
            idat = p;
            memcpy(idat + idat_n, buf + pos + 8, len);
            idat_n += len;
        } else if (!strcmp(type, "IEND")) seen_iend = 1;
        pos += 12 + (size_t)len;
        chunks++;
    }
    if (!why && !seen_ihdr) why = "no IHDR";
    if (!why && pos != n) why = "bytes after IEND";
    if (!why) {   // the zlib stream: header, deflate blocks, Adler-32; then the rows' filter bytes
        size_t want = (size_t)h * (1 + 3 * (size_t)w), y;
        inflater s;
        int final = 0;
        memset(&s, 0, sizeof s);
        s.out = (unsigned char *)xmalloc(want);
        s.outcap = want;
        s.in = idat;
        s.n = idat_n;
        s.pos = 2;
        if (idat_n < 6 || (idat[0] & 0x0F) != 8 || (idat[0] >> 4) > 7 || (idat[0] * 256 + idat[1]) % 31 || (idat[1] & 0x20))
            why = "bad zlib header";
        while (!why && !final) {
            long hdr = inf_bits(&s, 3);
            if (hdr < 0 || !inf_block(&s, (int)(hdr >> 1))) why = s.err;
            final = (int)(hdr & 1);
            blocks++;
        }
        if (!why && s.outn != want) why = "less pixel data than IHDR's size";
        if (!why && (idat_n - s.pos != 4 || rd32(idat + s.pos) != adler_update(1, s.out, s.outn)))
            why = idat_n - s.pos != 4 ? "not 4 bytes (the Adler-32) after the deflate stream" : "Adler-32 mismatch";
        for (y = 0; !why && y < h; y++)
            if (s.out[y * (1 + 3 * (size_t)w)] > 4) why = "bad row filter byte";
        free(s.out);
    }
    free(buf);
    free(idat);
    if (why) {
        fprintf(stderr, "plot_metrics: %s: %s\n", path, why);
        return 1;
    }
    printf("ok: %lux%lu, %d chunks, %lu pixels\n", (unsigned long)w, (unsigned long)h, chunks,
           (unsigned long)w * (unsigned long)h);
    return 0;
}

// ---------------------------------------------------------------------------------------------

enum { O_TITLE = 1, O_LOG_Y, O_NO_LR, O_SMOOTH, O_WIDTH, O_HEIGHT, O_CHECK };
static const cli_opt opts[] = {
    {.id = O_TITLE, .name = "title", .kind = CLI_STR, .meta = "TEXT", .def = "\"Training loss\"",
     .help = "the title above the plot"},
    {.id = O_LOG_Y, .name = "log-y", .kind = CLI_FLAG, .def = "off",
     .help = "the losses on a logarithmic axis"},
    {.id = O_NO_LR, .name = "no-lr", .kind = CLI_FLAG, .def = "off",
     .help = "leave the learning rate (and its right axis) out"},
    {.id = O_SMOOTH, .name = "smooth", .kind = CLI_STR, .meta = "N|auto", .def = "auto",
     .help = "the training loss drawn lightly, with its running mean\nover N points on it (0: off; auto: 1% of "
             "the points\nwhen they outnumber half the pixel columns)"},
    {.id = O_WIDTH, .name = "width", .kind = CLI_INT, .meta = "PIXELS", .def = "800", .help = "the picture's width",
     .lo = 320, .hi = 8192},
    {.id = O_HEIGHT, .name = "height", .kind = CLI_INT, .meta = "PIXELS", .def = "500", .help = "its height",
     .lo = 240, .hi = 8192},
    {.id = O_CHECK, .name = "check", .kind = CLI_STR, .meta = "FILE.png",
     .help = "check a PNG instead (8-bit RGB, as plot_metrics writes):\nchunk CRCs, IHDR, the deflate stream "
             "inflated, Adler-32,\nthe size of the pixel data, the row filters; prints\n\"ok: WxH, ...\" and "
             "exits 0, or the problem and exits 1"},
};
static const char usage_text[] =
    "usage: plot_metrics METRICS.jsonl OUT.png [options]\n"
    "       plot_metrics --check FILE.png\n"
    "\n"
    "A training run's metrics.jsonl (one JSON object a line, as examples/train writes it) as a\n"
    "PNG: the training loss (\"loss\") and the eval loss (\"eval_loss\") against \"step\", and the\n"
    "learning rate (\"lr\") on a second axis at the right. Exit status: 0 done, 1 a bad input or\n"
    "PNG, 2 a usage error.\n";

int main(int argc, char **argv) {
    const rgb white = {255, 255, 255}, black = {0, 0, 0}, frame = {60, 60, 60}, grid = {228, 228, 228},
              blue = {31, 119, 180}, light_blue = {174, 204, 230}, orange = {230, 110, 20}, green = {44, 160, 44}, dark_green = {25, 110, 25},
              gray = {80, 80, 80};
    const char *in = NULL, *out = NULL, *title = "Training loss", *check = NULL;
    int log_y = 0, no_lr = 0, o, i, x0, x1, y0, y1, show_lr, dash = 0, left_w = 0, right_w = 0;
    long smooth = -1;
    metrics m;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY, rmin = 0, rmax = -INFINITY, step, v;
    char buf[64];
    size_t k;
    long bytes;
    cli c;
    cli_init(&c, "plot_metrics", usage_text, opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == CLI_POS) {
            if (!in) in = c.val;
            else if (!out) out = c.val;
            else {
                cli_fail(&c, "unexpected argument '%s' (METRICS.jsonl and OUT.png are given already)", c.val);
                return 2;
            }
        } else if (o == O_TITLE) title = c.val;
        else if (o == O_LOG_Y) log_y = (int)c.ival;
        else if (o == O_NO_LR) no_lr = (int)c.ival;
        else if (o == O_SMOOTH) {
            char *end;
            errno = 0;
            smooth = strcmp(c.val, "auto") == 0 ? -1 : strtol(c.val, &end, 10);
            if (smooth != -1 && (!c.val[0] || *end || errno || smooth < 0 || c.val[0] == '+' || c.val[0] == ' '))
                return cli_bad(&c, "expected auto or a whole number of points (0: off)"), 2;
        }
        else if (o == O_WIDTH) W = (int)c.ival;
        else if (o == O_HEIGHT) H = (int)c.ival;
        else if (o == O_CHECK) check = c.val;
    }
    crc_init();
    if (check) {
        if (in) {
            cli_fail(&c, "--check takes no other file (given '%s')", in);
            return 2;
        }
        return check_png(check);
    }
    if (!in || !out) {
        cli_fail(&c, "expected METRICS.jsonl and OUT.png (--help for the usage)");
        return 2;
    }
    font_init();
    read_metrics(in, log_y, &m);
    if (m.skipped_nonfinite)
        fprintf(stderr, "plot_metrics: %s: skipped %ld non-finite values\n", in, m.skipped_nonfinite);
    if (m.skipped_nonpositive)
        fprintf(stderr, "plot_metrics: %s: skipped %ld values <= 0 (--log-y)\n", in, m.skipped_nonpositive);
    show_lr = !no_lr && m.lr.n > 0;
    for (i = 0; i < 3; i++) {
        series *s = i == 0 ? &m.train : i == 1 ? &m.eval : &m.lr;
        if (i == 2 && !show_lr) break;
        for (k = 0; k < s->n; k++) {
            double y = i < 2 && log_y ? log10(s->y[k]) : s->y[k];
            if (s->x[k] < xmin) xmin = s->x[k];
            if (s->x[k] > xmax) xmax = s->x[k];
            if (i == 2) {
                if (y < rmin) rmin = y;
                if (y > rmax) rmax = y;
            } else {
                if (y < ymin) ymin = y;
                if (y > ymax) ymax = y;
            }
        }
    }
    if (xmax - xmin < 1e-12 * (fabs(xmax) + 1)) { xmin -= 0.5; xmax += 0.5; }
    if (ymax - ymin < 1e-9 * (fabs(ymax) + 1e-30)) { ymin -= 0.5; ymax += 0.5; }
    else { double pad = 0.04 * (ymax - ymin); ymin -= pad; ymax += pad; }
    if (show_lr) {   // from 0 (or below, for negative rates) to 6% over the largest
        if (rmax - rmin < 1e-12 * (fabs(rmax) + 1e-30)) rmax = rmin + (rmin == 0 ? 1 : fabs(rmin));
        else rmax += 0.06 * (rmax - rmin);
    }
    x0 = 76;
    x1 = W - (show_lr ? 80 : 24);
    y0 = 46;
    y1 = H - 54;

    px = (unsigned char *)xmalloc((size_t)W * (size_t)H * 3);
    memset(px, 255, (size_t)W * (size_t)H * 3);
#define XP(x) (x0 + (int)lround(((x) - xmin) / (xmax - xmin) * (x1 - x0)))
#define YP(y) (y1 - (int)lround(((y) - ymin) / (ymax - ymin) * (y1 - y0)))
#define RP(r) (y1 - (int)lround(((r) - rmin) / (rmax - rmin) * (y1 - y0)))
#define LY(s, k) (log_y ? log10((s).y[k]) : (s).y[k])
    // x ticks and grid
    step = nice_step(xmin, xmax, 7);
    for (v = ceil(xmin / step) * step; v <= xmax + step * 1e-9; v += step) {
        int x = XP(v);
        line(x, y0, x, y1, 1, grid, NULL);
        line(x, y1, x, y1 + 4, 1, frame, NULL);
        fmt_tick(buf, sizeof buf, v, step);
        text(x - text_w(buf, 1) / 2, y1 + 8, buf, 1, black);
    }
    // y ticks: on a log axis at 1, 2, 5 x 10^n (or 10^n alone when that is too many), else nice steps
    if (log_y && ymax - ymin > 1) {
        int every = ymax - ymin > 3 ? 1 : 3, e, d;
        static const double mant[3] = {1, 2, 5};
        for (e = (int)floor(ymin) - 1; e <= (int)ceil(ymax); e++)
            for (d = 0; d < every; d++) {
                double t = log10(mant[d]) + e;
                int y;
                if (t < ymin || t > ymax) continue;
                y = YP(t);
                line(x0, y, x1, y, 1, grid, NULL);
                line(x0 - 4, y, x0, y, 1, frame, NULL);
                fmt_sci(buf, sizeof buf, mant[d] * pow(10, e), mant[d] * pow(10, e));
                text(x0 - 8 - text_w(buf, 1), y - 3, buf, 1, black);
                if (text_w(buf, 1) > left_w) left_w = text_w(buf, 1);
            }
    } else {
        double lo = log_y ? pow(10, ymin) : ymin, hi = log_y ? pow(10, ymax) : ymax;
        step = nice_step(lo, hi, 6);
        for (v = ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
            int y;
            if (log_y && v <= 0) continue;
            y = YP(log_y ? log10(v) : v);
            line(x0, y, x1, y, 1, grid, NULL);
            line(x0 - 4, y, x0, y, 1, frame, NULL);
            fmt_tick(buf, sizeof buf, v, step);
            text(x0 - 8 - text_w(buf, 1), y - 3, buf, 1, black);
            if (text_w(buf, 1) > left_w) left_w = text_w(buf, 1);
        }
    }
    // the learning rate, behind the losses: a dashed line on the right axis
    if (show_lr) {   // (points on the pixel drawn last are passed over: the dashes stay dashes)
        int lx = XP(m.lr.x[0]), ly = RP(m.lr.y[0]);
        for (k = 1; k < m.lr.n; k++) {
            int x = XP(m.lr.x[k]), y = RP(m.lr.y[k]);
            if (x == lx && y == ly) continue;
            line(lx, ly, x, y, 1, green, &dash);
            lx = x, ly = y;
        }
        if (dash == 0) rect(lx - 1, ly - 1, lx + 1, ly + 1, green);   // one point
        step = nice_step(rmin, rmax, 6);
        for (v = ceil(rmin / step) * step; v <= rmax + step * 1e-9; v += step) {
            int y = RP(v);
            line(x1, y, x1 + 4, y, 1, frame, NULL);
            fmt_sci(buf, sizeof buf, v, step);
            text(x1 + 8, y - 3, buf, 1, dark_green);
            if (text_w(buf, 1) > right_w) right_w = text_w(buf, 1);
        }
    }
    // the training loss as a line; when smoothed, the points in a light line and over it their
    // running mean (over the `smooth` points centred on each, fewer near the ends, where the
    // window narrows to stay centred); the eval loss as squares joined by a thin line
    if (smooth < 0) smooth = m.train.n * 2 > (size_t)(x1 - x0) ? (long)(m.train.n / 100 > 2 ? m.train.n / 100 : 2) : 0;
    if (smooth == 1 || (size_t)smooth > m.train.n) smooth = smooth == 1 ? 0 : (long)m.train.n;
    for (k = 0; k < m.train.n; k++) {
        int x = XP(m.train.x[k]), y = YP(LY(m.train, k));
        if (k == 0) rect(x, y, x + 1, y + 1, smooth ? light_blue : blue);
        else line(XP(m.train.x[k - 1]), YP(LY(m.train, k - 1)), x, y, smooth ? 1 : 2, smooth ? light_blue : blue, NULL);
    }
    if (smooth) {
        double *sum = (double *)xmalloc((m.train.n + 1) * sizeof(double));
        int px_ = 0, py_ = 0;
        sum[0] = 0;
        for (k = 0; k < m.train.n; k++) sum[k + 1] = sum[k] + LY(m.train, k);
        for (k = 0; k < m.train.n; k++) {
            size_t half = (size_t)smooth / 2, lo, hi;
            int x, y;
            if (half > k) half = k;
            if (half > m.train.n - 1 - k) half = m.train.n - 1 - k;
            lo = k - half, hi = k + half + 1;
            x = XP(m.train.x[k]), y = YP((sum[hi] - sum[lo]) / (double)(hi - lo));
            if (k > 0) line(px_, py_, x, y, 2, blue, NULL);
            px_ = x, py_ = y;
        }
        free(sum);
    }
    for (k = 0; k < m.eval.n; k++) {
        int x = XP(m.eval.x[k]), y = YP(LY(m.eval, k));
        if (k > 0) line(XP(m.eval.x[k - 1]), YP(LY(m.eval, k - 1)), x, y, 1, orange, NULL);
    }
    for (k = 0; k < m.eval.n; k++) {
        int x = XP(m.eval.x[k]), y = YP(LY(m.eval, k));
        rect(x - 3, y - 3, x + 3, y + 3, orange);
    }
    // the frame, the axes' names, the title
    line(x0, y0, x1, y0, 1, frame, NULL);
    line(x0, y1, x1, y1, 1, frame, NULL);
    line(x0, y0, x0, y1, 1, frame, NULL);
    line(x1, y0, x1, y1, 1, frame, NULL);
    text((x0 + x1) / 2 - text_w("step", 1) / 2, y1 + 26, "step", 1, gray);
    {
        const char *yl = log_y ? "loss (log scale)" : "loss";
        int lx = x0 - 8 - left_w - 10 - FONT_ROWS, rx = x1 + 8 + right_w + 10;
        text_at(lx < 2 ? 2 : lx, (y0 + y1) / 2 + text_w(yl, 1) / 2, yl, 1, gray, 1);
        if (show_lr)
            text_at(rx > W - 2 - FONT_ROWS ? W - 2 - FONT_ROWS : rx, (y0 + y1) / 2 + text_w("learning rate", 1) / 2,
                    "learning rate", 1, dark_green, 1);
    }
    text((W - text_w(title, 2)) / 2, 12, title, 2, black);
    // the legend, top right inside the plot
    {
        const char *names[3] = {"train loss", "eval loss", "learning rate"};
        char train_name[64];
        int shown[3], rows = 0, tw = 0, lx, ly, lw, r;
        shown[0] = m.train.n > 0, shown[1] = m.eval.n > 0, shown[2] = show_lr;
        if (smooth) snprintf(train_name, sizeof train_name, "train loss (mean of %ld)", smooth), names[0] = train_name;
        for (r = 0; r < 3; r++)
            if (shown[r]) {
                rows++;
                if (text_w(names[r], 1) > tw) tw = text_w(names[r], 1);
            }
        lw = 8 + 22 + 8 + tw + 8;
        lx = x1 - 10 - lw;
        ly = y0 + 10;
        rect(lx, ly, lx + lw, ly + 8 + rows * 15, white);
        line(lx, ly, lx + lw, ly, 1, gray, NULL);
        line(lx, ly + 8 + rows * 15, lx + lw, ly + 8 + rows * 15, 1, gray, NULL);
        line(lx, ly, lx, ly + 8 + rows * 15, 1, gray, NULL);
        line(lx + lw, ly, lx + lw, ly + 8 + rows * 15, 1, gray, NULL);
        for (r = 0, i = 0; r < 3; r++) {
            int ty = ly + 6 + i * 15, my = ty + 3;
            if (!shown[r]) continue;
            if (r == 0) line(lx + 8, my, lx + 30, my, 2, blue, NULL);
            if (r == 1) line(lx + 8, my, lx + 30, my, 1, orange, NULL), rect(lx + 16, my - 3, lx + 22, my + 3, orange);
            if (r == 2) {
                int d = 0;
                line(lx + 8, my, lx + 30, my, 1, green, &d);
            }
            text(lx + 38, ty, names[r], 1, black);
            i++;
        }
    }
    bytes = write_png(out);
    printf("plot_metrics: %s: %lu training and %lu eval points, %lu learning rates -> %s (%dx%d, %ld bytes)\n", in,
           (unsigned long)m.train.n, (unsigned long)m.eval.n, (unsigned long)(show_lr ? m.lr.n : 0), out, W, H, bytes);
    free(m.train.x), free(m.train.y), free(m.eval.x), free(m.eval.y), free(m.lr.x), free(m.lr.y);
    free(px);
    return 0;
}
