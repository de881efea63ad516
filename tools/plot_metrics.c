// cc -std=c99 -O2 -o tools/plot_metrics tools/plot_metrics.c -lm
//
// plot_metrics: a JSONL metrics log as a PNG plot, with nothing but libc and libm.
//
//     tools/plot_metrics metrics.jsonl out.png [--title T] [--log-y]
//     tools/plot_metrics --check out.png
//
// Each line of the log is one JSON object. Lines with "step" and "loss" are training points (a
// blue line); lines with "step" and "eval_loss" are evaluation points (orange squares, joined).
// Other keys ("lr", "tokens_per_s", "grad_norm", ...) and lines without either loss are ignored;
// keys may come in any order, with any JSON whitespace, and values may be any JSON (nested ones
// are skipped). Non-finite values (NaN, Infinity, -Infinity, null, or numbers past the double
// range), and with --log-y values <= 0, are skipped and counted on stderr. A line that is not a
// JSON object, or has a loss without a step, is an error naming the file and line.
//
// The PNG is RGB, 8 bits per channel, its zlib stream made of stored (uncompressed) deflate
// blocks; CRC-32 and Adler-32 are computed here. --check re-reads a PNG written this way: the
// signature, every chunk's CRC, IHDR, the zlib header, the stored blocks, the Adler-32 and the
// pixel count; it prints "ok: WxH" and exits 0, or names the first problem and exits 1.
//
// The text is drawn with the 5x7 bitmap font below (capitals, digits and a little punctuation;
// lower case is drawn in capitals).

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 800
#define H 500
#define LEFT 78   // plot area inside the margins
#define RIGHT 24
#define TOP 44
#define BOTTOM 54

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

// One line: a JSON object. has[0..2] / val[0..2]: "step", "loss", "eval_loss" (last one wins).
static int jline(jcur *c, int has[3], double val[3]) {
    static const char *keys[3] = {"step", "loss", "eval_loss"};
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
            for (i = 0; i < 3; i++)
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
            } else if (k >= 0) {
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

typedef struct { series train, eval; long skipped_nonfinite, skipped_nonpositive, lines; } metrics;

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
        int has[3] = {0, 0, 0}, k;
        double val[3] = {0, 0, 0};
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
        if (!has[1] && !has[2]) continue;
        if (!has[0]) {
            sprintf(lbuf, "%ld", ln);
            die("%s:%s: a loss without a \"step\"", path, lbuf);
        }
        for (k = 1; k <= 2; k++) {
            if (!has[k]) continue;
            if (!isfinite(val[0]) || !isfinite(val[k])) m->skipped_nonfinite++;
            else if (log_y && val[k] <= 0) m->skipped_nonpositive++;
            else series_add(k == 1 ? &m->train : &m->eval, val[0], val[k]);
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
static unsigned char px[H][W][3];

static void pset(int x, int y, rgb c) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    px[y][x][0] = c.r;
    px[y][x][1] = c.g;
    px[y][x][2] = c.b;
}
static void rect(int x0, int y0, int x1, int y1, rgb c) {
    int x, y;
    for (y = y0; y <= y1; y++)
        for (x = x0; x <= x1; x++) pset(x, y, c);
}
// a line of width w (Bresenham, a w x w pen)
static void line(int x0, int y0, int x1, int y1, int w, rgb c) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        int e2 = 2 * e;
        rect(x0 - (w - 1) / 2, y0 - (w - 1) / 2, x0 + w / 2, y0 + w / 2, c);
        if (x0 == x1 && y0 == y1) break;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

// 5x7 glyphs, '#' = ink, rows top to bottom
typedef struct { char ch; const char *rows[7]; } glyph;
static const glyph font[] = {
    {'0', {" ### ", "#   #", "#  ##", "# # #", "##  #", "#   #", " ### "}},
    {'1', {"  #  ", " ##  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "}},
    {'2', {" ### ", "#   #", "    #", "   # ", "  #  ", " #   ", "#####"}},
    {'3', {"#####", "   # ", "  #  ", "   # ", "    #", "#   #", " ### "}},
    {'4', {"   # ", "  ## ", " # # ", "#  # ", "#####", "   # ", "   # "}},
    {'5', {"#####", "#    ", "#### ", "    #", "    #", "#   #", " ### "}},
    {'6', {"  ## ", " #   ", "#    ", "#### ", "#   #", "#   #", " ### "}},
    {'7', {"#####", "    #", "   # ", "  #  ", " #   ", " #   ", " #   "}},
    {'8', {" ### ", "#   #", "#   #", " ### ", "#   #", "#   #", " ### "}},
    {'9', {" ### ", "#   #", "#   #", " ####", "    #", "   # ", " ##  "}},
    {'.', {"     ", "     ", "     ", "     ", "     ", " ##  ", " ##  "}},
    {',', {"     ", "     ", "     ", "     ", " ##  ", "  #  ", " #   "}},
    {'-', {"     ", "     ", "     ", " ### ", "     ", "     ", "     "}},
    {'+', {"     ", "  #  ", "  #  ", "#####", "  #  ", "  #  ", "     "}},
    {'=', {"     ", "     ", "#####", "     ", "#####", "     ", "     "}},
    {'_', {"     ", "     ", "     ", "     ", "     ", "     ", "#####"}},
    {':', {"     ", " ##  ", " ##  ", "     ", " ##  ", " ##  ", "     "}},
    {'/', {"    #", "    #", "   # ", "  #  ", " #   ", "#    ", "#    "}},
    {'(', {"   # ", "  #  ", " #   ", " #   ", " #   ", "  #  ", "   # "}},
    {')', {" #   ", "  #  ", "   # ", "   # ", "   # ", "  #  ", " #   "}},
    {'%', {"##  #", "##  #", "   # ", "  #  ", " #   ", "#  ##", "#  ##"}},
    {'A', {" ### ", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"}},
    {'B', {"#### ", "#   #", "#   #", "#### ", "#   #", "#   #", "#### "}},
    {'C', {" ### ", "#   #", "#    ", "#    ", "#    ", "#   #", " ### "}},
    {'D', {"#### ", "#   #", "#   #", "#   #", "#   #", "#   #", "#### "}},
    {'E', {"#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#####"}},
    {'F', {"#####", "#    ", "#    ", "#### ", "#    ", "#    ", "#    "}},
    {'G', {" ### ", "#   #", "#    ", "# ###", "#   #", "#   #", " ####"}},
    {'H', {"#   #", "#   #", "#   #", "#####", "#   #", "#   #", "#   #"}},
    {'I', {" ### ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", " ### "}},
    {'J', {"  ###", "   # ", "   # ", "   # ", "   # ", "#  # ", " ##  "}},
    {'K', {"#   #", "#  # ", "# #  ", "##   ", "# #  ", "#  # ", "#   #"}},
    {'L', {"#    ", "#    ", "#    ", "#    ", "#    ", "#    ", "#####"}},
    {'M', {"#   #", "## ##", "# # #", "# # #", "#   #", "#   #", "#   #"}},
    {'N', {"#   #", "#   #", "##  #", "# # #", "#  ##", "#   #", "#   #"}},
    {'O', {" ### ", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "}},
    {'P', {"#### ", "#   #", "#   #", "#### ", "#    ", "#    ", "#    "}},
    {'Q', {" ### ", "#   #", "#   #", "#   #", "# # #", "#  # ", " ## #"}},
    {'R', {"#### ", "#   #", "#   #", "#### ", "# #  ", "#  # ", "#   #"}},
    {'S', {" ####", "#    ", "#    ", " ### ", "    #", "    #", "#### "}},
    {'T', {"#####", "  #  ", "  #  ", "  #  ", "  #  ", "  #  ", "  #  "}},
    {'U', {"#   #", "#   #", "#   #", "#   #", "#   #", "#   #", " ### "}},
    {'V', {"#   #", "#   #", "#   #", "#   #", "#   #", " # # ", "  #  "}},
    {'W', {"#   #", "#   #", "#   #", "# # #", "# # #", "# # #", " # # "}},
    {'X', {"#   #", "#   #", " # # ", "  #  ", " # # ", "#   #", "#   #"}},
    {'Y', {"#   #", "#   #", " # # ", "  #  ", "  #  ", "  #  ", "  #  "}},
    {'Z', {"#####", "    #", "   # ", "  #  ", " #   ", "#    ", "#####"}},
};
static const char *box[7] = {"#####", "#   #", "#   #", "#   #", "#   #", "#   #", "#####"};

// one cell is 6 x 8 pixels at scale 1 (a column and a row of space)
static int text_w(const char *s, int scale) { return (int)strlen(s) * 6 * scale - scale; }
static void text(int x, int y, const char *s, int scale, rgb c) {
    for (; *s; s++, x += 6 * scale) {
        char ch = *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        const char *const *rows = box;
        size_t g;
        int r, k;
        if (ch == ' ') continue;
        for (g = 0; g < sizeof font / sizeof font[0]; g++)
            if (font[g].ch == ch) rows = font[g].rows;
        for (r = 0; r < 7; r++)
            for (k = 0; k < 5; k++)
                if (rows[r][k] == '#') rect(x + k * scale, y + r * scale, x + k * scale + scale - 1, y + r * scale + scale - 1, c);
    }
}

// "nice" tick spacing: 1, 2 or 5 times a power of ten, about n ticks over [lo, hi]
static double nice_step(double lo, double hi, int n) {
    double raw = (hi - lo) / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}
static void fmt_tick(char *buf, size_t cap, double v, double step) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-6) v = 0;
    if (v != 0 && (fabs(v) >= 1e6 || fabs(v) < 1e-4 || dec > 6)) snprintf(buf, cap, "%.3g", v);
    else snprintf(buf, cap, "%.*f", dec, v);
}

// ---------------------------------------------------------------------------------------------
// PNG

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
    while (n--) {
        s1 = (s1 + *p++) % 65521;
        s2 = (s2 + s1) % 65521;
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

static void write_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    size_t raw_n = (size_t)H * (1 + 3 * W), blocks = (raw_n + 65534) / 65535, z_n = 2 + raw_n + 5 * blocks + 4, o = 0, i;
    unsigned char *raw = (unsigned char *)malloc(raw_n), *z = (unsigned char *)malloc(z_n), ihdr[13];
    FILE *f;
    int y, ok;
    if (!raw || !z) die("%s%s", "out of memory", "");
    for (y = 0; y < H; y++) {
        raw[(size_t)y * (1 + 3 * W)] = 0;  // filter: none
        memcpy(raw + (size_t)y * (1 + 3 * W) + 1, px[y], 3 * W);
    }
    z[o++] = 0x78;  // deflate, 32K window
    z[o++] = 0x01;  // no dictionary, fastest; (0x78 * 256 + 0x01) % 31 == 0
    for (i = 0; i < raw_n; i += 65535) {
        size_t n = raw_n - i < 65535 ? raw_n - i : 65535;
        z[o++] = i + n == raw_n;  // BFINAL, BTYPE 00 (stored)
        z[o++] = (unsigned char)(n & 0xFF);
        z[o++] = (unsigned char)(n >> 8);
        z[o++] = (unsigned char)(~n & 0xFF);
        z[o++] = (unsigned char)((~n >> 8) & 0xFF);
        memcpy(z + o, raw + i, n);
        o += n;
    }
    be32(z + o, adler_update(1, raw, raw_n));
    o += 4;
    be32(ihdr, W);
    be32(ihdr + 4, H);
    ihdr[8] = 8;   // bits per channel
    ihdr[9] = 2;   // RGB
    ihdr[10] = ihdr[11] = ihdr[12] = 0;  // deflate, adaptive filters, no interlace
    if (!(f = fopen(path, "wb"))) die("cannot write %s: %s", path, strerror(errno));
    ok = fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", z, o) && chunk(f, "IEND", NULL, 0);
    if (fclose(f) != 0) ok = 0;
    if (!ok) die("cannot write %s: %s", path, strerror(errno));
    free(raw);
    free(z);
}

// --check: 0 and "ok: WxH" when the file is a PNG as write_png makes them
static int check_png(const char *path) {
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL, *idat = NULL;
    size_t n = 0, cap = 0, pos = 8, idat_n = 0, got;
    uint32_t w = 0, h = 0;
    int seen_ihdr = 0, seen_iend = 0, chunks = 0;
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
    if (!why) {  // the zlib stream: header, stored blocks, Adler-32
        size_t want = (size_t)h * (1 + 3 * (size_t)w), out = 0, q = 2, y;
        uint32_t adler = 1;
        int final = 0;
        unsigned char *raw = (unsigned char *)malloc(want + 1);
        if (!raw) die("%s%s", "out of memory", "");
        if (idat_n < 6 || (idat[0] & 0x0F) != 8 || (idat[0] * 256 + idat[1]) % 31 || (idat[1] & 0x20)) why = "bad zlib header";
        while (!why && !final) {
            size_t len;
            if (idat_n - q < 5) { why = "truncated deflate block"; break; }
            final = idat[q] & 1;
            if ((idat[q] >> 1) & 3) { why = "a compressed deflate block (--check reads stored blocks only)"; break; }
            len = idat[q + 1] | (size_t)idat[q + 2] << 8;
            if ((len ^ (idat[q + 3] | (size_t)idat[q + 4] << 8)) != 0xFFFF) { why = "stored block LEN/NLEN mismatch"; break; }
            q += 5;
            if (len > idat_n - q) { why = "stored block past the end of IDAT"; break; }
            if (len > want - out) { why = "more pixel data than IHDR's size"; break; }
            memcpy(raw + out, idat + q, len);
            adler = adler_update(adler, idat + q, len);
            out += len;
            q += len;
        }
        if (!why && out != want) why = "less pixel data than IHDR's size";
        if (!why && (idat_n - q != 4 || rd32(idat + q) != adler)) why = "Adler-32 mismatch";
        for (y = 0; !why && y < h; y++)
            if (raw[y * (1 + 3 * (size_t)w)] > 4) why = "bad row filter byte";
        free(raw);
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

static void usage(void) {
    fprintf(stderr, "usage: plot_metrics METRICS.jsonl OUT.png [--title T] [--log-y]\n"
                    "       plot_metrics --check FILE.png\n");
    exit(2);
}

int main(int argc, char **argv) {
    const rgb white = {255, 255, 255}, black = {0, 0, 0}, grid = {225, 225, 225}, blue = {31, 119, 180},
              orange = {230, 110, 20}, gray = {90, 90, 90};
    const char *in = NULL, *out = NULL, *title = "loss";
    int log_y = 0, i, x0 = LEFT, x1 = W - RIGHT, y0 = TOP, y1 = H - BOTTOM;
    metrics m;
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY, step, v;
    char buf[64];
    size_t k;
    crc_init();
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) {
            if (i + 1 >= argc) usage();
            return check_png(argv[i + 1]);
        } else if (!strcmp(argv[i], "--title")) {
            if (++i >= argc) usage();
            title = argv[i];
        } else if (!strcmp(argv[i], "--log-y")) log_y = 1;
        else if (argv[i][0] == '-' && argv[i][1] == '-') die("unknown option %s%s", argv[i], "");
        else if (!in) in = argv[i];
        else if (!out) out = argv[i];
        else usage();
    }
    if (!in || !out) usage();
    read_metrics(in, log_y, &m);
    if (m.skipped_nonfinite)
        fprintf(stderr, "plot_metrics: %s: skipped %ld non-finite values\n", in, m.skipped_nonfinite);
    if (m.skipped_nonpositive)
        fprintf(stderr, "plot_metrics: %s: skipped %ld values <= 0 (--log-y)\n", in, m.skipped_nonpositive);
    for (i = 0; i < 2; i++) {
        series *s = i ? &m.eval : &m.train;
        for (k = 0; k < s->n; k++) {
            double y = log_y ? log10(s->y[k]) : s->y[k];
            if (s->x[k] < xmin) xmin = s->x[k];
            if (s->x[k] > xmax) xmax = s->x[k];
            if (y < ymin) ymin = y;
            if (y > ymax) ymax = y;
        }
    }
    if (xmax - xmin < 1e-12 * (fabs(xmax) + 1)) { xmin -= 0.5; xmax += 0.5; }
    if (ymax - ymin < 1e-9 * (fabs(ymax) + 1e-30)) { ymin -= 0.5; ymax += 0.5; }
    else { double pad = 0.04 * (ymax - ymin); ymin -= pad; ymax += pad; }

    memset(px, 255, sizeof px);
#define XP(x) (x0 + (int)lround(((x) - xmin) / (xmax - xmin) * (x1 - x0)))
#define YP(y) (y1 - (int)lround(((y) - ymin) / (ymax - ymin) * (y1 - y0)))
    // x ticks and grid
    step = nice_step(xmin, xmax, 6);
    for (v = ceil(xmin / step) * step; v <= xmax + step * 1e-9; v += step) {
        int x = XP(v);
        line(x, y0, x, y1, 1, grid);
        line(x, y1, x, y1 + 4, 1, black);
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
                line(x0, y, x1, y, 1, grid);
                line(x0 - 4, y, x0, y, 1, black);
                snprintf(buf, sizeof buf, "%g", mant[d] * pow(10, e));
                text(x0 - 8 - text_w(buf, 1), y - 3, buf, 1, black);
            }
    } else {
        double lo = log_y ? pow(10, ymin) : ymin, hi = log_y ? pow(10, ymax) : ymax;
        step = nice_step(lo, hi, 6);
        for (v = ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
            int y = YP(log_y ? log10(v) : v);
            if (log_y && v <= 0) continue;
            line(x0, y, x1, y, 1, grid);
            line(x0 - 4, y, x0, y, 1, black);
            fmt_tick(buf, sizeof buf, v, step);
            text(x0 - 8 - text_w(buf, 1), y - 3, buf, 1, black);
        }
    }
    // axes, labels, title
    line(x0, y1, x1, y1, 1, black);
    line(x0, y0, x0, y1, 1, black);
    text((x0 + x1) / 2 - text_w("step", 1) / 2, y1 + 24, "step", 1, gray);
    text(8, y0 - 14, log_y ? "loss (log)" : "loss", 1, gray);
    text((W - text_w(title, 2)) / 2, 10, title, 2, black);
    // the series: training loss as a line, eval loss as squares joined by a thin line
    for (k = 0; k < m.train.n; k++) {
        int x = XP(m.train.x[k]), y = YP(log_y ? log10(m.train.y[k]) : m.train.y[k]);
        if (k == 0) pset(x, y, blue);
        else line(XP(m.train.x[k - 1]), YP(log_y ? log10(m.train.y[k - 1]) : m.train.y[k - 1]), x, y, 2, blue);
    }
    for (k = 0; k < m.eval.n; k++) {
        int x = XP(m.eval.x[k]), y = YP(log_y ? log10(m.eval.y[k]) : m.eval.y[k]);
        if (k > 0) line(XP(m.eval.x[k - 1]), YP(log_y ? log10(m.eval.y[k - 1]) : m.eval.y[k - 1]), x, y, 1, orange);
        rect(x - 3, y - 3, x + 3, y + 3, orange);
    }
    // legend, top right
    {
        int lx = x1 - 130, ly = y0 + 8, rows = (m.train.n > 0) + (m.eval.n > 0), r = 0;
        rect(lx - 8, ly - 6, x1 - 8, ly + rows * 16 - 2, white);
        line(lx - 8, ly - 6, x1 - 8, ly - 6, 1, gray);
        line(lx - 8, ly + rows * 16 - 2, x1 - 8, ly + rows * 16 - 2, 1, gray);
        line(lx - 8, ly - 6, lx - 8, ly + rows * 16 - 2, 1, gray);
        line(x1 - 8, ly - 6, x1 - 8, ly + rows * 16 - 2, 1, gray);
        if (m.train.n) {
            line(lx, ly + 3, lx + 20, ly + 3, 2, blue);
            text(lx + 28, ly, "train loss", 1, black);
            r++;
        }
        if (m.eval.n) {
            rect(lx + 7, ly + r * 16, lx + 13, ly + r * 16 + 6, orange);
            text(lx + 28, ly + r * 16, "eval loss", 1, black);
        }
    }
    write_png(out);
    printf("plot_metrics: %s: %lu training and %lu eval points -> %s (%dx%d)\n", in, (unsigned long)m.train.n,
           (unsigned long)m.eval.n, out, W, H);
    free(m.train.x); free(m.train.y); free(m.eval.x); free(m.eval.y);
    return 0;
}
