// serve_request.h — what examples/serve reads from its clients, and the text it writes back:
//   - an incremental HTTP/1.1 request parser (request line, headers, Content-Length or chunked
//     bodies, keep-alive, Expect: 100-continue), bounded: header bytes, header count, body bytes;
//   - a strict JSON parser (RFC 8259: depth limit, value-count limit, UTF-8 checked, \u escapes
//     with surrogate pairs, numbers whole), its values in one arena per request;
//   - the mapping of a body to a generation or embedding request: the inputs, Text Generation
//     Inference's parameters and every fat5_generate_config option by its Hugging Face name,
//     overlaid on the checkpoint's generation config, with lists in memory the request owns;
//   - JSON string writing (invalid UTF-8 written as U+FFFD) and UTF-8 helpers.
// Every malformed input is an error with an HTTP status and a message (400 malformed, 404 / 405
// routing, 411 no length, 413 too large, 414 / 431 request line / headers too large, 417, 422
// invalid values, 501, 505), never a crash; memory is bounded by the limits.
// Static functions, C99 and the C library; included by examples/serve.c and by the libFuzzer
// target tests/fuzz/fuzz_serve_request.c. Include fat5.h (its declarations) first.
#ifndef FAT5_SERVE_REQUEST_H
#define FAT5_SERVE_REQUEST_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define SV_UNUSED __attribute__((unused))
#else
#define SV_UNUSED
#endif
#define SV_STATIC static SV_UNUSED

// ---------------------------------------------------------------------------------------------
// errors: an HTTP status, TGI's error_type and a message

typedef struct sv_error {
    int status;          // 400, 404, 405, 408, 411, 413, 414, 417, 422, 431, 500, 501, 503, 505
    const char *type;    // "bad_request", "validation", "not_found", ... (the response's error_type)
    char msg[512];
} sv_error;

// Fills *e (when not NULL) and returns 0, so that parsers can `return sv_fail(...)`.
SV_STATIC int sv_fail(sv_error *e, int status, const char *type, const char *fmt, ...) {
    va_list ap;
    if (!e) return 0;
    e->status = status;
    e->type = type;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// a growing byte buffer (responses, escaped strings); after a failed allocation it keeps what it
// had and sets oom, and every later put does nothing

typedef struct sv_buf {
    char *p;
    size_t n, cap;
    int oom;
} sv_buf;

SV_STATIC int sv_buf_reserve(sv_buf *b, size_t extra) {
    size_t need, nc;
    char *np;
    if (b->oom) return 0;
    if (extra > ((size_t)-1) / 4 - b->n) return b->oom = 1, 0;
    need = b->n + extra + 1;
    if (need <= b->cap) return 1;
    nc = b->cap ? b->cap : 256;
    while (nc < need) nc *= 2;
    if (!(np = (char *)realloc(b->p, nc))) return b->oom = 1, 0;
    b->p = np;
    b->cap = nc;
    return 1;
}

SV_STATIC void sv_buf_put(sv_buf *b, const char *s, size_t n) {
    if (!sv_buf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

SV_STATIC void sv_buf_puts(sv_buf *b, const char *s) { sv_buf_put(b, s, strlen(s)); }

SV_STATIC void sv_buf_printf(sv_buf *b, const char *fmt, ...) {
    va_list ap;
    int k;
    char small[256];
    va_start(ap, fmt);
    k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) return;
    if ((size_t)k < sizeof small) {
        sv_buf_put(b, small, (size_t)k);
        return;
    }
    if (!sv_buf_reserve(b, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

SV_STATIC void sv_buf_free(sv_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

// ---------------------------------------------------------------------------------------------
// UTF-8

// The length (1..4) of the valid UTF-8 character at s[0 .. n); 0 when the bytes there are not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid); -1 when the n bytes are
// a valid start of a character that needs more bytes.
SV_STATIC int sv_utf8_char(const unsigned char *s, size_t n) {
    unsigned c;
    int need, k;
    if (n == 0) return -1;
    c = s[0];
    if (c < 0x80) return 1;
    if (c < 0xC2 || c > 0xF4) return 0;
    need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    for (k = 1; k < need; k++) {
        unsigned lo = 0x80, hi = 0xBF;
        if (k == 1) {   // the second byte's range excludes overlong forms, surrogates and > U+10FFFF
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
            else if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        }
        if ((size_t)k >= n) return -1;
        if (s[k] < lo || s[k] > hi) return 0;
    }
    return need;
}

// Appends code point cp (valid, not a surrogate) as UTF-8 to out; returns the bytes written.
SV_STATIC int sv_utf8_put(char *out, unsigned long cp) {
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Appends s[0 .. n) as a JSON string, quotes included: control characters escaped, every byte
// that is not part of valid UTF-8 written as U+FFFD, so that the output is always valid JSON.
SV_STATIC void sv_buf_json_str(sv_buf *b, const char *s, size_t n) {
    size_t i = 0, run = 0;
    const unsigned char *u = (const unsigned char *)s;
    sv_buf_put(b, "\"", 1);
    while (i < n) {
        unsigned c = u[i];
        int k;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {   // a run of plain ASCII
            for (run = i; run < n && u[run] >= 0x20 && u[run] < 0x80 && u[run] != '"' && u[run] != '\\'; run++) {}
            sv_buf_put(b, s + i, run - i);
            i = run;
            continue;
        }
        if (c == '"') sv_buf_put(b, "\\\"", 2);
        else if (c == '\\') sv_buf_put(b, "\\\\", 2);
        else if (c == '\n') sv_buf_put(b, "\\n", 2);
        else if (c == '\r') sv_buf_put(b, "\\r", 2);
        else if (c == '\t') sv_buf_put(b, "\\t", 2);
        else if (c < 0x20) sv_buf_printf(b, "\\u%04x", c);
        else if ((k = sv_utf8_char(u + i, n - i)) > 0) {
            sv_buf_put(b, s + i, (size_t)k);
            i += (size_t)k;
            continue;
        } else {
            sv_buf_put(b, "\xEF\xBF\xBD", 3);
        }
        i++;
    }
    sv_buf_put(b, "\"", 1);
}

// A text that comes a few bytes at a time (a byte-level model's tokens), written out as whole
// characters: each byte that cannot start or continue a valid character becomes U+FFFD (the
// policy of sv_buf_json_str), and an incomplete character at the end is held until its bytes come
// (or written as U+FFFD per byte by a push with last = 1).
typedef struct sv_utf8_stream {
    unsigned char pend[4];
    int n;
} sv_utf8_stream;

SV_STATIC void sv_utf8_stream_push(sv_utf8_stream *s, const char *p, size_t n, int last, sv_buf *out) {
    size_t i;
    for (i = 0; i <= n; i++) {
        int k;
        if (i < n) s->pend[s->n++] = (unsigned char)p[i];
        else if (!last) break;
        while (s->n > 0) {
            k = sv_utf8_char(s->pend, (size_t)s->n);
            if (k < 0 && i < n) break;   // more bytes may complete it
            if (k <= 0) {                // invalid (or incomplete at the end): one U+FFFD for its first byte
                sv_buf_put(out, "\xEF\xBF\xBD", 3);
                k = 1;
            } else {
                sv_buf_put(out, (const char *)s->pend, (size_t)k);
            }
            memmove(s->pend, s->pend + k, (size_t)(s->n - k));
            s->n -= k;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 requests, parsed as their bytes come

enum {
    SV_HTTP_HEAD = 0,     // reading the request line and headers
    SV_HTTP_BODY,         // reading a Content-Length body
    SV_HTTP_CHUNK_SIZE,   // chunked: a chunk-size line
    SV_HTTP_CHUNK_DATA,   // chunked: a chunk's bytes
    SV_HTTP_CHUNK_END,    // chunked: the line break after a chunk
    SV_HTTP_TRAILER,      // chunked: the trailer lines after the last chunk
    SV_HTTP_DONE,         // a whole request: method, path, headers, body
    SV_HTTP_ERROR         // malformed or over a limit: err says why (the connection must close)
};

#define SV_METHOD_MAX 16
#define SV_PATH_MAX 2048
#define SV_CHUNK_LINE_MAX 256

typedef struct sv_http_limits {
    size_t max_head;      // the request line and headers, in bytes (16 KiB; over it: 431, 414)
    int max_headers;      // header fields (100; over it: 431)
    size_t max_body;      // body bytes (2,000,000; over it: 413)
} sv_http_limits;

typedef struct sv_http {
    sv_http_limits lim;
    int state;
    // the head as it comes (lim.max_head bytes at most)
    char *head;
    size_t head_len;
    size_t line_chars;        // characters of the current head line (CR not counted)
    int saw_line;             // a line break was seen (the request line is complete)
    // the request
    char method[SV_METHOD_MAX];
    char path[SV_PATH_MAX];   // the target's path, without the query
    int minor;                // HTTP/1.<minor>
    int keep_alive;           // the connection stays open after the response
    int expect_continue;      // Expect: 100-continue (the server answers 100 before the body)
    int chunked;
    int64_t content_length;   // -1: none
    int head_done;            // the head is parsed (the body may follow)
    char *body;               // the body (decoded from chunks), NUL-terminated; body_len bytes
    size_t body_len, body_cap;
    // chunked state
    uint64_t chunk_left;
    char cline[SV_CHUNK_LINE_MAX];
    size_t cline_len;
    size_t trailer_bytes;
    size_t trailer_line;
    sv_error err;
} sv_http;

SV_STATIC void sv_http_init(sv_http *h, const sv_http_limits *lim) {
    memset(h, 0, sizeof *h);
    h->lim = *lim;
    h->content_length = -1;
}

// Ready for the next request on the same connection (the buffers are kept).
SV_STATIC void sv_http_reset(sv_http *h) {
    char *head = h->head, *body = h->body;
    size_t cap = h->body_cap;
    sv_http_limits lim = h->lim;
    memset(h, 0, sizeof *h);
    h->lim = lim;
    h->head = head;
    h->body = body;
    h->body_cap = cap;
    h->content_length = -1;
}

SV_STATIC void sv_http_free(sv_http *h) {
    free(h->head);
    free(h->body);
    h->head = h->body = NULL;
    h->body_cap = 0;
}

static int sv_http_error(sv_http *h, int status, const char *fmt, ...) {
    va_list ap;
    h->state = SV_HTTP_ERROR;
    h->err.status = status;
    h->err.type = status == 413 || status == 431 || status == 414 ? "too_large" : "bad_request";
    va_start(ap, fmt);
    vsnprintf(h->err.msg, sizeof h->err.msg, fmt, ap);
    va_end(ap);
    return 0;
}

// RFC 9110's tchar
static int sv_tchar(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int sv_lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

// 1 when a[0 .. n) is the word w, ignoring ASCII case
static int sv_ieq(const char *a, size_t n, const char *w) {
    size_t k;
    for (k = 0; k < n; k++)
        if (!w[k] || sv_lower((unsigned char)a[k]) != sv_lower((unsigned char)w[k])) return 0;
    return w[n] == 0;
}

// Each comma-separated element of a header value, trimmed, one call at a time: the next one's
// start and length, or NULL at the end. *pos starts at 0.
static const char *sv_list_next(const char *v, size_t n, size_t *pos, size_t *len) {
    size_t a = *pos, e;
    while (a < n && (v[a] == ' ' || v[a] == '\t' || v[a] == ',')) a++;
    if (a >= n) return NULL;
    for (e = a; e < n && v[e] != ','; e++) {}
    *pos = e;
    while (e > a && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
    *len = e - a;
    return v + a;
}

// Parses the complete head (h->head, head_len bytes, its last line empty).
static int sv_http_parse_head(sv_http *h) {
    char *p = h->head, *end = h->head + h->head_len;
    char *line, *eol, *sp1, *sp2, *q;
    size_t n;
    int n_headers = 0, has_cl = 0, has_te = 0, conn_close = 0, conn_keep = 0;
    // the request line: METHOD SP TARGET SP HTTP/1.x
    eol = (char *)memchr(p, '\n', (size_t)(end - p));
    if (!eol) return sv_http_error(h, 400, "malformed request line");
    line = p;
    n = (size_t)(eol - line);
    if (n && line[n - 1] == '\r') n--;
    for (q = line; q < line + n; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) return sv_http_error(h, 400, "a control character in the request line");
    sp1 = (char *)memchr(line, ' ', n);
    if (!sp1 || sp1 == line) return sv_http_error(h, 400, "malformed request line (expected METHOD /path HTTP/1.1)");
    sp2 = (char *)memchr(sp1 + 1, ' ', (size_t)(line + n - sp1 - 1));
    if (!sp2 || sp2 == sp1 + 1) return sv_http_error(h, 400, "malformed request line (expected METHOD /path HTTP/1.1)");
    if ((size_t)(sp1 - line) >= SV_METHOD_MAX) return sv_http_error(h, 501, "method not implemented");
    for (q = line; q < sp1; q++)
        if (!sv_tchar((unsigned char)*q)) return sv_http_error(h, 400, "malformed method");
    memcpy(h->method, line, (size_t)(sp1 - line));
    h->method[sp1 - line] = 0;
    {   // the target: origin-form (/path?query), or "*" (OPTIONS)
        const char *t = sp1 + 1, *te = sp2, *qm;
        size_t tl;
        if (!(t[0] == '/' || (te - t == 1 && t[0] == '*')))
            return sv_http_error(h, 400, "the request target must be a path starting with /");
        qm = (const char *)memchr(t, '?', (size_t)(te - t));
        tl = (size_t)((qm ? qm : te) - t);
        if (tl >= SV_PATH_MAX) return sv_http_error(h, 414, "the request target is longer than %d bytes", SV_PATH_MAX - 1);
        memcpy(h->path, t, tl);
        h->path[tl] = 0;
    }
    {   // the version
        const char *v = sp2 + 1;
        size_t vl = (size_t)(line + n - v);
        if (vl != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' || v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
            return sv_http_error(h, 400, "malformed request line (expected HTTP/1.1 at its end)");
        if (v[5] != '1') return sv_http_error(h, 505, "HTTP version %.8s is not supported (HTTP/1.1 or 1.0)", v);
        h->minor = v[7] - '0';
    }
    // the header fields
    for (p = eol + 1; p < end; p = eol + 1) {
        char *colon, *v, *ve;
        eol = (char *)memchr(p, '\n', (size_t)(end - p));
        if (!eol) break;
        line = p;
        n = (size_t)(eol - line);
        if (n && line[n - 1] == '\r') n--;
        if (n == 0) break;   // the empty line that ends the head
        if (line[0] == ' ' || line[0] == '\t') return sv_http_error(h, 400, "obsolete line folding in a header");
        if (++n_headers > h->lim.max_headers)
            return sv_http_error(h, 431, "more than %d header fields", h->lim.max_headers);
        colon = (char *)memchr(line, ':', n);
        if (!colon || colon == line) return sv_http_error(h, 400, "malformed header line");
        for (q = line; q < colon; q++)
            if (!sv_tchar((unsigned char)*q)) return sv_http_error(h, 400, "malformed header name");
        v = colon + 1;
        ve = line + n;
        for (q = v; q < ve; q++)
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
                return sv_http_error(h, 400, "a control character in a header value");
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        if (sv_ieq(line, (size_t)(colon - line), "content-length")) {
            int64_t x = 0;
            if (v == ve) return sv_http_error(h, 400, "an empty Content-Length");
            for (q = v; q < ve; q++) {
                if (*q < '0' || *q > '9') return sv_http_error(h, 400, "malformed Content-Length");
                if (x > (INT64_MAX - 9) / 10) return sv_http_error(h, 413, "Content-Length too large");
                x = x * 10 + (*q - '0');
            }
            if (has_cl && x != h->content_length) return sv_http_error(h, 400, "two different Content-Length headers");
            has_cl = 1;
            h->content_length = x;
        } else if (sv_ieq(line, (size_t)(colon - line), "transfer-encoding")) {
            size_t pos = 0, el;
            const char *e;
            while ((e = sv_list_next(v, (size_t)(ve - v), &pos, &el)) != NULL) {
                if (!sv_ieq(e, el, "chunked") || h->chunked)
                    return sv_http_error(h, 501, "Transfer-Encoding %.*s is not supported (only chunked)",
                                         (int)(el > 40 ? 40 : el), e);
                h->chunked = 1;
            }
            if (!h->chunked) return sv_http_error(h, 400, "an empty Transfer-Encoding");
            has_te = 1;
        } else if (sv_ieq(line, (size_t)(colon - line), "connection")) {
            size_t pos = 0, el;
            const char *e;
            while ((e = sv_list_next(v, (size_t)(ve - v), &pos, &el)) != NULL) {
                if (sv_ieq(e, el, "close")) conn_close = 1;
                else if (sv_ieq(e, el, "keep-alive")) conn_keep = 1;
            }
        } else if (sv_ieq(line, (size_t)(colon - line), "expect")) {
            if (!sv_ieq(v, (size_t)(ve - v), "100-continue"))
                return sv_http_error(h, 417, "Expect: only 100-continue is supported");
            h->expect_continue = 1;
        }
    }
    if (has_te && has_cl) return sv_http_error(h, 400, "both Content-Length and Transfer-Encoding");
    if (has_te && h->minor == 0) return sv_http_error(h, 400, "Transfer-Encoding in an HTTP/1.0 request");
    h->keep_alive = h->minor >= 1 ? !conn_close : (conn_keep && !conn_close);
    if (h->content_length > 0 && (uint64_t)h->content_length > (uint64_t)h->lim.max_body)
        return sv_http_error(h, 413, "the body (%lld bytes) is larger than the limit, %zu bytes",
                             (long long)h->content_length, h->lim.max_body);
    if (!has_cl && !has_te && (!strcmp(h->method, "POST") || !strcmp(h->method, "PUT") || !strcmp(h->method, "PATCH")))
        return sv_http_error(h, 411, "a %s request needs Content-Length or Transfer-Encoding: chunked", h->method);
    h->head_done = 1;
    return 1;
}

// Appends n body bytes (413 beyond the limit).
static int sv_http_body_put(sv_http *h, const char *p, size_t n) {
    if (n > h->lim.max_body - h->body_len)
        return sv_http_error(h, 413, "the body is larger than the limit, %zu bytes", h->lim.max_body);
    if (h->body_len + n + 1 > h->body_cap) {
        size_t nc = h->body_cap ? h->body_cap : 1024;
        char *nb;
        while (nc < h->body_len + n + 1) nc *= 2;
        if (!(nb = (char *)realloc(h->body, nc))) {
            h->state = SV_HTTP_ERROR;
            return sv_fail(&h->err, 500, "internal", "out of memory for the body");
        }
        h->body = nb;
        h->body_cap = nc;
    }
    if (n) memcpy(h->body + h->body_len, p, n);
    h->body_len += n;
    h->body[h->body_len] = 0;
    return 1;
}

// After the head: where the body starts (or the request is complete).
static void sv_http_after_head(sv_http *h) {
    if (!sv_http_body_put(h, "", 0)) return;   // the body buffer exists (NUL-terminated) even when empty
    if (h->chunked) h->state = SV_HTTP_CHUNK_SIZE;
    else if (h->content_length > 0) h->state = SV_HTTP_BODY;
    else h->state = SV_HTTP_DONE;
}

// A chunk-size line (without its line break): hex digits, then optional extensions.
static int sv_http_chunk_line(sv_http *h) {
    size_t k = 0, n = h->cline_len;
    uint64_t x = 0;
    if (n && h->cline[n - 1] == '\r') n--;
    for (; k < n; k++) {
        int c = (unsigned char)h->cline[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else break;
        if (x >> 60) return sv_http_error(h, 413, "a chunk size too large");
        x = x * 16 + (uint64_t)d;
    }
    if (k == 0) return sv_http_error(h, 400, "malformed chunk size");
    while (k < n && (h->cline[k] == ' ' || h->cline[k] == '\t')) k++;
    if (k < n && h->cline[k] != ';') return sv_http_error(h, 400, "malformed chunk size");
    for (; k < n; k++)
        if ((unsigned char)h->cline[k] < 0x20 && h->cline[k] != '\t') return sv_http_error(h, 400, "a control character in a chunk extension");
    if (x > (uint64_t)(h->lim.max_body - h->body_len))
        return sv_http_error(h, 413, "the body is larger than the limit, %zu bytes", h->lim.max_body);
    h->chunk_left = x;
    h->cline_len = 0;
    h->state = x ? SV_HTTP_CHUNK_DATA : SV_HTTP_TRAILER;
    return 1;
}

// Feeds the next n bytes of the connection. Returns how many were used: all of them, or fewer
// when the request ended before (state DONE: the rest is the next request's) or on an error
// (state ERROR, err filled). Call again while the state is neither DONE nor ERROR.
SV_STATIC size_t sv_http_feed(sv_http *h, const char *p, size_t n) {
    size_t i = 0;
    while (i < n && h->state != SV_HTTP_DONE && h->state != SV_HTTP_ERROR) {
        char c = p[i];
        switch (h->state) {
        case SV_HTTP_HEAD:
            if (h->head_len == 0 && (c == '\r' || c == '\n')) {   // blank lines before a request are ignored
                i++;
                break;
            }
            if (!h->head && !(h->head = (char *)malloc(h->lim.max_head + 1))) {
                h->state = SV_HTTP_ERROR;
                sv_fail(&h->err, 500, "internal", "out of memory");
                break;
            }
            if (h->head_len >= h->lim.max_head) {
                if (!h->saw_line) sv_http_error(h, 414, "the request line is longer than %zu bytes", h->lim.max_head);
                else sv_http_error(h, 431, "the request headers are larger than %zu bytes", h->lim.max_head);
                break;
            }
            if (c == 0) {
                sv_http_error(h, 400, "a NUL byte in the request head");
                break;
            }
            h->head[h->head_len++] = c;
            i++;
            if (c == '\n') {
                if (h->line_chars == 0 && h->saw_line) {   // the empty line: the head is complete
                    h->head[h->head_len] = 0;
                    if (sv_http_parse_head(h)) sv_http_after_head(h);
                    break;
                }
                h->saw_line = 1;
                h->line_chars = 0;
            } else if (c != '\r') {
                h->line_chars++;
            }
            break;
        case SV_HTTP_BODY: {
            size_t want = (size_t)h->content_length - h->body_len, take = n - i < want ? n - i : want;
            if (!sv_http_body_put(h, p + i, take)) break;
            i += take;
            if (h->body_len == (size_t)h->content_length) h->state = SV_HTTP_DONE;
            break;
        }
        case SV_HTTP_CHUNK_SIZE:
            i++;
            if (c == '\n') {
                sv_http_chunk_line(h);
                break;
            }
            if (h->cline_len >= SV_CHUNK_LINE_MAX - 1) {
                sv_http_error(h, 400, "a chunk-size line longer than %d bytes", SV_CHUNK_LINE_MAX - 1);
                break;
            }
            h->cline[h->cline_len++] = c;
            break;
        case SV_HTTP_CHUNK_DATA: {
            size_t take = n - i;
            if ((uint64_t)take > h->chunk_left) take = (size_t)h->chunk_left;
            if (!sv_http_body_put(h, p + i, take)) break;
            i += take;
            h->chunk_left -= take;
            if (h->chunk_left == 0) h->state = SV_HTTP_CHUNK_END, h->cline_len = 0;
            break;
        }
        case SV_HTTP_CHUNK_END:   // "\r\n" (or "\n") after a chunk's data
            i++;
            if (c == '\r' && h->cline_len == 0) {
                h->cline_len = 1;
            } else if (c == '\n') {
                h->cline_len = 0;
                h->state = SV_HTTP_CHUNK_SIZE;
            } else {
                sv_http_error(h, 400, "a chunk's data is not followed by a line break");
            }
            break;
        case SV_HTTP_TRAILER:   // trailer fields (ignored) until an empty line
            i++;
            if (++h->trailer_bytes > h->lim.max_head) {
                sv_http_error(h, 431, "the trailer fields are larger than %zu bytes", h->lim.max_head);
                break;
            }
            if (c == '\n') {
                if (h->trailer_line == 0) h->state = SV_HTTP_DONE;
                h->trailer_line = 0;
            } else if (c != '\r') {
                if (c == 0) sv_http_error(h, 400, "a NUL byte in a trailer");
                h->trailer_line++;
            }
            break;
        default:
            return i;
        }
    }
    return i;
}

// ---------------------------------------------------------------------------------------------
// routes

enum { SV_EP_NONE = 0, SV_EP_GENERATE, SV_EP_STREAM, SV_EP_COMPAT, SV_EP_EMBED, SV_EP_HEALTH, SV_EP_INFO, SV_EP_METRICS };

// The endpoint of a method and path; 0 with err 404 (no such path) or 405 (*allow: the methods the
// path takes).
SV_STATIC int sv_route(const char *method, const char *path, const char **allow, sv_error *err) {
    static const struct { const char *path, *method; int ep; } routes[] = {
        {"/generate", "POST", SV_EP_GENERATE}, {"/generate_stream", "POST", SV_EP_STREAM}, {"/", "POST", SV_EP_COMPAT},
        {"/embed", "POST", SV_EP_EMBED},       {"/health", "GET", SV_EP_HEALTH},         {"/info", "GET", SV_EP_INFO},
        {"/metrics", "GET", SV_EP_METRICS}};
    size_t k;
    *allow = NULL;
    for (k = 0; k < sizeof routes / sizeof routes[0]; k++) {
        if (strcmp(routes[k].path, path) != 0) continue;
        if (!strcmp(routes[k].method, method)) return routes[k].ep;
        *allow = routes[k].method;
        sv_fail(err, 405, "method_not_allowed", "%s takes %s, not %.16s", path, routes[k].method, method);
        return 0;
    }
    sv_fail(err, 404, "not_found", "no such endpoint: %.200s (POST /generate, /generate_stream, /embed; GET /health, "
            "/info, /metrics)", path);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// JSON: a strict parser into values that live in one arena

enum { SJ_NULL = 0, SJ_FALSE, SJ_TRUE, SJ_NUMBER, SJ_STRING, SJ_ARRAY, SJ_OBJECT };

typedef struct sj_val {
    unsigned char type;
    unsigned char is_int;     // NUMBER: written as an integer that fits in int64_t (i)
    int32_t n;                // ARRAY, OBJECT: members
    const char *key;          // a member of an OBJECT: its name, NUL-terminated, key_len bytes
    size_t key_len;
    const char *s;            // STRING: the decoded text, NUL-terminated, len bytes (may hold NUL);
    size_t len;               //   NUMBER: its text as written
    double d;                 // NUMBER
    int64_t i;
    struct sj_val *child, *next;
} sj_val;

typedef struct sj_block {
    struct sj_block *next;
    size_t used, cap;
    double align_;            // the data that follows is aligned for any member
} sj_block;

typedef struct sj_limits {
    int max_depth;            // nesting of arrays and objects (32)
    int64_t max_values;       // values in the document (131072; over it: 413)
} sj_limits;

typedef struct sj_doc {
    sj_block *blocks;
    sj_val *root;
    int64_t values;
    // while parsing
    const char *start, *p, *end;
    sj_limits lim;
    sv_error *err;
} sj_doc;

// n bytes from the arena (8-byte aligned), or NULL when out of memory
SV_STATIC void *sj_alloc(sj_doc *d, size_t n) {
    sj_block *b = d->blocks;
    n = (n + 7) & ~(size_t)7;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        if (!(b = (sj_block *)malloc(sizeof *b + cap))) return NULL;
        b->next = d->blocks, b->used = 0, b->cap = cap;
        d->blocks = b;
    }
    b->used += n;
    return (char *)(b + 1) + b->used - n;
}

SV_STATIC void sj_free(sj_doc *d) {
    sj_block *b = d->blocks, *nb;
    for (; b; b = nb) {
        nb = b->next;
        free(b);
    }
    d->blocks = NULL;
    d->root = NULL;
}

static int sj_error(sj_doc *d, const char *what) {
    return sv_fail(d->err, 400, "bad_request", "invalid JSON body at byte %zu: %s", (size_t)(d->p - d->start), what);
}

static void sj_ws(sj_doc *d) {
    while (d->p < d->end && (*d->p == ' ' || *d->p == '\t' || *d->p == '\n' || *d->p == '\r')) d->p++;
}

static int sj_hex4(const char *p, unsigned long *out) {
    int k;
    unsigned long v = 0;
    for (k = 0; k < 4; k++) {
        int c = (unsigned char)p[k], dv;
        if (c >= '0' && c <= '9') dv = c - '0';
        else if (c >= 'a' && c <= 'f') dv = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') dv = c - 'A' + 10;
        else return 0;
        v = v * 16 + (unsigned long)dv;
    }
    *out = v;
    return 1;
}

// A string at d->p (its opening quote): decoded into the arena. 1, or 0 with the error.
static int sj_string(sj_doc *d, const char **out, size_t *out_len) {
    const char *q = d->p + 1, *e;
    char *buf, *w;
    // the closing quote (an escaped quote is skipped): an upper bound of the decoded length
    for (e = q; e < d->end && *e != '"'; e++)
        if (*e == '\\') e++;
    if (e >= d->end) return sj_error(d, "an unterminated string");
    if (!(buf = (char *)sj_alloc(d, (size_t)(e - q) + 1))) return sv_fail(d->err, 500, "internal", "out of memory");
    w = buf;
    d->p = q;
    while (d->p < e) {
        unsigned char c = (unsigned char)*d->p;
        if (c == '\\') {
            unsigned long cp;
            char x = d->p + 1 < e ? d->p[1] : 0;
            switch (x) {
            case '"': *w++ = '"'; break;
            case '\\': *w++ = '\\'; break;
            case '/': *w++ = '/'; break;
            case 'b': *w++ = '\b'; break;
            case 'f': *w++ = '\f'; break;
            case 'n': *w++ = '\n'; break;
            case 'r': *w++ = '\r'; break;
            case 't': *w++ = '\t'; break;
            case 'u':
                if (e - d->p < 6 || !sj_hex4(d->p + 2, &cp)) return sj_error(d, "a malformed \\u escape");
                if (cp >= 0xDC00 && cp <= 0xDFFF) return sj_error(d, "a lone low surrogate in a \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {   // a high surrogate: its low one must follow
                    unsigned long lo;
                    if (e - d->p < 12 || d->p[6] != '\\' || d->p[7] != 'u' || !sj_hex4(d->p + 8, &lo) || lo < 0xDC00 ||
                        lo > 0xDFFF)
                        return sj_error(d, "a high surrogate \\u escape without its low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    d->p += 6;
                }
                w += sv_utf8_put(w, cp);
                d->p += 4;
                break;
            default:
                return sj_error(d, "an invalid escape in a string");
            }
            d->p += 2;
        } else if (c < 0x20) {
            return sj_error(d, "a control character in a string (escape it)");
        } else if (c < 0x80) {
            *w++ = (char)c;
            d->p++;
        } else {
            int k = sv_utf8_char((const unsigned char *)d->p, (size_t)(e - d->p));
            if (k <= 0) return sj_error(d, "invalid UTF-8 in a string");
            memcpy(w, d->p, (size_t)k);
            w += k;
            d->p += k;
        }
    }
    *w = 0;
    *out = buf;
    *out_len = (size_t)(w - buf);
    d->p = e + 1;
    return 1;
}

// A number at d->p, RFC 8259's grammar.
static int sj_number(sj_doc *d, sj_val *v) {
    const char *s = d->p, *p = s;
    char tmp[400];
    int integral = 1;
    if (p < d->end && *p == '-') p++;
    if (p >= d->end || *p < '0' || *p > '9') return sj_error(d, "a malformed number");
    if (*p == '0') p++;
    else
        while (p < d->end && *p >= '0' && *p <= '9') p++;
    if (p < d->end && *p == '.') {
        integral = 0;
        p++;
        if (p >= d->end || *p < '0' || *p > '9') return sj_error(d, "a malformed number (digits after '.')");
        while (p < d->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < d->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < d->end && (*p == '+' || *p == '-')) p++;
        if (p >= d->end || *p < '0' || *p > '9') return sj_error(d, "a malformed number (exponent)");
        while (p < d->end && *p >= '0' && *p <= '9') p++;
    }
    if ((size_t)(p - s) >= sizeof tmp) return sj_error(d, "a number longer than 399 characters");
    memcpy(tmp, s, (size_t)(p - s));
    tmp[p - s] = 0;
    v->type = SJ_NUMBER;
    v->s = s;
    v->len = (size_t)(p - s);
    v->d = strtod(tmp, NULL);
    if (!isfinite(v->d)) return sj_error(d, "a number out of range");
    if (integral) {   // exactly, when it fits in int64_t
        const char *q = tmp + (tmp[0] == '-');
        uint64_t x = 0;
        int ok = 1;
        for (; *q; q++) {
            if (x > (UINT64_MAX - 9) / 10) {
                ok = 0;
                break;
            }
            x = x * 10 + (uint64_t)(*q - '0');
        }
        if (ok && tmp[0] == '-' && x <= (uint64_t)INT64_MAX + 1) v->is_int = 1, v->i = x ? -(int64_t)(x - 1) - 1 : 0;
        else if (ok && tmp[0] != '-' && x <= (uint64_t)INT64_MAX) v->is_int = 1, v->i = (int64_t)x;
    }
    d->p = p;
    return 1;
}

static sj_val *sj_value(sj_doc *d, int depth);

static sj_val *sj_new(sj_doc *d) {
    sj_val *v;
    if (++d->values > d->lim.max_values) {
        sv_fail(d->err, 413, "too_large", "the JSON body holds more than %lld values", (long long)d->lim.max_values);
        return NULL;
    }
    if (!(v = (sj_val *)sj_alloc(d, sizeof *v))) {
        sv_fail(d->err, 500, "internal", "out of memory");
        return NULL;
    }
    memset(v, 0, sizeof *v);
    return v;
}

static sj_val *sj_container(sj_doc *d, sj_val *v, int depth) {
    int obj = *d->p == '{';
    char close = obj ? '}' : ']';
    sj_val **tail = &v->child;
    if (depth >= d->lim.max_depth) {
        sj_error(d, "nested deeper than the limit");
        return NULL;
    }
    v->type = obj ? SJ_OBJECT : SJ_ARRAY;
    d->p++;
    sj_ws(d);
    if (d->p < d->end && *d->p == close) {
        d->p++;
        return v;
    }
    for (;;) {
        sj_val *m;
        const char *key = NULL;
        size_t key_len = 0;
        sj_ws(d);
        if (obj) {
            if (d->p >= d->end || *d->p != '"') {
                sj_error(d, "expected a member name (a string)");
                return NULL;
            }
            if (!sj_string(d, &key, &key_len)) return NULL;
            sj_ws(d);
            if (d->p >= d->end || *d->p != ':') {
                sj_error(d, "expected ':' after a member name");
                return NULL;
            }
            d->p++;
        }
        if (!(m = sj_value(d, depth + 1))) return NULL;
        m->key = key, m->key_len = key_len;
        *tail = m;
        tail = &m->next;
        if (v->n == INT32_MAX) {
            sj_error(d, "too many members");
            return NULL;
        }
        v->n++;
        sj_ws(d);
        if (d->p < d->end && *d->p == ',') {
            d->p++;
            continue;
        }
        if (d->p < d->end && *d->p == close) {
            d->p++;
            return v;
        }
        sj_error(d, obj ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
        return NULL;
    }
}

static int sj_word(sj_doc *d, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(d->end - d->p) < n || memcmp(d->p, w, n) != 0) return 0;
    d->p += n;
    return 1;
}

static sj_val *sj_value(sj_doc *d, int depth) {
    sj_val *v;
    sj_ws(d);
    if (d->p >= d->end) {
        sj_error(d, "expected a value");
        return NULL;
    }
    if (!(v = sj_new(d))) return NULL;
    switch (*d->p) {
    case '{':
    case '[': return sj_container(d, v, depth);
    case '"':
        v->type = SJ_STRING;
        return sj_string(d, &v->s, &v->len) ? v : NULL;
    case 't': v->type = SJ_TRUE; break;
    case 'f': v->type = SJ_FALSE; break;
    case 'n': v->type = SJ_NULL; break;
    default: return sj_number(d, v) ? v : NULL;
    }
    if (!sj_word(d, v->type == SJ_TRUE ? "true" : v->type == SJ_FALSE ? "false" : "null")) {
        sj_error(d, "an unknown word (expected true, false or null)");
        return NULL;
    }
    return v;
}

// Parses text[0 .. len) as one JSON value (whitespace around it allowed). 1 with d->root, or 0
// with *err filled; either way sj_free(d) releases what was made.
SV_STATIC int sj_parse(const char *text, size_t len, const sj_limits *lim, sj_doc *d, sv_error *err) {
    memset(d, 0, sizeof *d);
    d->start = d->p = text;
    d->end = text + len;
    d->lim = *lim;
    d->err = err;
    if (len == 0) return sv_fail(err, 400, "bad_request", "an empty body (expected a JSON object)");
    if (!(d->root = sj_value(d, 0))) return 0;
    sj_ws(d);
    if (d->p != d->end) return sj_error(d, "text after the JSON value");
    return 1;
}

// "a string", "an array", ... for messages
SV_STATIC const char *sj_kind(const sj_val *v) {
    switch (v->type) {
    case SJ_NULL: return "null";
    case SJ_FALSE:
    case SJ_TRUE: return "a boolean";
    case SJ_NUMBER: return v->is_int ? "an integer" : "a number";
    case SJ_STRING: return "a string";
    case SJ_ARRAY: return "an array";
    default: return "an object";
    }
}

// ---------------------------------------------------------------------------------------------
// requests: a body mapped to what the server runs

// Every parameter a generation request may hold: fat5_generate_config's options by their Hugging
// Face names, Text Generation Inference's, and fat5's (ignore_eos).
#define SV_PARAMS(X)                                                                                                   \
    X(max_new_tokens) X(min_new_tokens) X(max_length) X(min_length) X(do_sample) X(temperature) X(top_k) X(top_p)      \
    X(seed) X(num_beams) X(length_penalty) X(early_stopping) X(num_return_sequences) X(repetition_penalty)             \
    X(no_repeat_ngram_size) X(eos_token_id) X(pad_token_id) X(decoder_start_token_id) X(forced_bos_token_id)           \
    X(forced_eos_token_id) X(suppress_tokens) X(begin_suppress_tokens) X(bad_words_ids) X(sequence_bias)               \
    X(encoder_repetition_penalty) X(encoder_no_repeat_ngram_size) X(exponential_decay_length_penalty)                  \
    X(renormalize_logits) X(remove_invalid_values) X(min_p) X(typical_p) X(epsilon_cutoff) X(eta_cutoff)               \
    X(num_beam_groups) X(diversity_penalty) X(force_words_ids) X(decoder_input_ids) X(output_scores)                   \
    X(output_logits) X(max_time) X(use_cache) X(stop) X(stop_strings) X(details) X(return_full_text) X(ignore_eos)     \
    X(decoder_input_details) X(watermark) X(truncate) X(best_of) X(top_n_tokens) X(frequency_penalty) X(grammar)        \
    X(adapter_id)
#define SV_P_ENUM(n) SV_P_##n,
#define SV_P_NAME(n) #n,
enum { SV_PARAMS(SV_P_ENUM) SV_P_COUNT };
static const char *const sv_param_names[] = {SV_PARAMS(SV_P_NAME) NULL};

typedef struct sv_req_limits {
    sj_limits json;
    int64_t max_stop;           // stop sequences of a request (4)
    size_t max_stop_bytes;      // bytes of one stop sequence (256)
    int64_t max_embed_inputs;   // inputs of one /embed request (32)
} sv_req_limits;

typedef struct sv_req {
    int endpoint;               // SV_EP_GENERATE, SV_EP_STREAM (also POST / with "stream": true), SV_EP_EMBED
    // the inputs (in the arena of doc): texts, or rows of ids ("input_ids")
    int64_t n_inputs;           // /generate: 1; /embed: 1 or more
    const char **texts;         // [n_inputs] (NULL: ids given)
    size_t *text_lens;
    const int32_t **ids;        // [n_inputs] when "input_ids" was given
    int64_t *n_ids;
    // generation
    fat5_generate_config g;     // the checkpoint's config with the parameters over it; its lists
                                // live in the arena (or are the defaults')
    int has_max_new_tokens;     // max_new_tokens or max_length given by the client
    int has_seed;               // seed given (else sampling draws one)
    int details, return_full_text, ignore_eos, decoder_input_details;
    int64_t truncate;           // keep the last N input tokens; 0: all
    double max_time;            // seconds; 0: none (the server cancels)
    const char **stops;         // [n_stops]: the server ends the request when its text ends in one
    size_t *stop_lens;
    int64_t n_stops;
    // /embed
    int normalize;              // L2-normalise the vectors (false unless asked)
    int truncate_embed;         // cut inputs longer than the limit instead of refusing them
    sj_doc doc;                 // the body's values: everything above points into it
} sv_req;

SV_STATIC void sv_req_free(sv_req *r) { sj_free(&r->doc); }

// the edit distance of two short names (for "did you mean")
static size_t sv_distance(const char *a, size_t n, const char *b, size_t m) {
    size_t d[2][66], i, j;
    if (n > 64 || m > 64) return 99;
    for (j = 0; j <= m; j++) d[0][j] = j;
    for (i = 1; i <= n; i++) {
        size_t *cur = d[i & 1], *prev = d[(i - 1) & 1];
        cur[0] = i;
        for (j = 1; j <= m; j++) {
            size_t v = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            cur[j] = v;
        }
    }
    return d[n & 1][m];
}

// " (did you mean X?)" for the name closest to key among names, or "" when none is close
static const char *sv_suggest(const char *key, size_t len, const char *const *names, char *buf, size_t cap) {
    const char *best = NULL;
    size_t bd = 99, k;
    for (k = 0; names[k]; k++) {
        size_t dd = sv_distance(key, len, names[k], strlen(names[k]));
        if (dd < bd) bd = dd, best = names[k];
    }
    if (!best || bd > 2 || bd * 3 > len) return "";
    snprintf(buf, cap, " (did you mean %s?)", best);
    return buf;
}

static int sv_bad_type(sv_error *e, const char *name, const char *want, const sj_val *v) {
    return sv_fail(e, 400, "validation", "%s must be %s, got %s", name, want, sj_kind(v));
}

static int sv_get_int(const sj_val *v, const char *name, int64_t lo, int64_t hi, int64_t *out, sv_error *e) {
    if (v->type != SJ_NUMBER || !v->is_int) return sv_bad_type(e, name, "an integer", v);
    if (v->i < lo || v->i > hi)
        return sv_fail(e, 422, "validation", "%s = %lld is out of range (%lld .. %lld)", name, (long long)v->i,
                       (long long)lo, (long long)hi);
    *out = v->i;
    return 1;
}

static int sv_get_num(const sj_val *v, const char *name, double *out, sv_error *e) {
    if (v->type != SJ_NUMBER) return sv_bad_type(e, name, "a number", v);
    *out = v->d;
    return 1;
}

static int sv_get_bool(const sj_val *v, const char *name, int *out, sv_error *e) {
    if (v->type != SJ_TRUE && v->type != SJ_FALSE) return sv_bad_type(e, name, "true or false", v);
    *out = v->type == SJ_TRUE;
    return 1;
}

// a token id: an integer in [0, INT32_MAX]
static int sv_get_id(const sj_val *v, const char *name, int64_t i, int64_t j, int32_t *out, sv_error *e) {
    char where[48] = "";
    if (i >= 0 && j >= 0) snprintf(where, sizeof where, "[%lld][%lld]", (long long)i, (long long)j);
    else if (i >= 0) snprintf(where, sizeof where, "[%lld]", (long long)i);
    if (v->type != SJ_NUMBER || !v->is_int)
        return sv_fail(e, 400, "validation", "%s%s must be a token id (an integer), got %s", name, where, sj_kind(v));
    if (v->i < 0 || v->i > INT32_MAX)
        return sv_fail(e, 422, "validation", "%s%s = %lld is not a token id", name, where, (long long)v->i);
    *out = (int32_t)v->i;
    return 1;
}

// An id or a list of ids (one_ok), or a list of ids: into the arena.
static int sv_get_ids(sj_doc *d, const sj_val *v, const char *name, int one_ok, fat5_token_list *out, sv_error *e) {
    const sj_val *x;
    int32_t *ids;
    int64_t k = 0;
    if (one_ok && v->type == SJ_NUMBER) {
        if (!(ids = (int32_t *)sj_alloc(d, sizeof *ids))) return sv_fail(e, 500, "internal", "out of memory");
        if (!sv_get_id(v, name, -1, -1, ids, e)) return 0;
        out->ids = ids, out->n = 1;
        return 1;
    }
    if (v->type != SJ_ARRAY) return sv_bad_type(e, name, one_ok ? "a token id or a list of them" : "a list of token ids", v);
    if (!(ids = (int32_t *)sj_alloc(d, (size_t)(v->n ? v->n : 1) * sizeof *ids))) return sv_fail(e, 500, "internal", "out of memory");
    for (x = v->child; x; x = x->next, k++)
        if (!sv_get_id(x, name, k, -1, &ids[k], e)) return 0;
    out->ids = ids, out->n = v->n;
    return 1;
}

// A list of non-empty lists of ids (with_bias: of [[ids...], bias] pairs, sequence_bias's form).
static int sv_get_seqs(sj_doc *d, const sj_val *v, const char *name, int with_bias, fat5_token_seqs *out,
                       const float **bias, sv_error *e) {
    const sj_val *row, *x;
    int64_t total = 0, i = 0, j;
    int32_t *cu, *ids;
    float *b = NULL;
    if (v->type != SJ_ARRAY)
        return sv_bad_type(e, name, with_bias ? "a list of [[ids...], bias] pairs" : "a list of lists of token ids", v);
    for (row = v->child; row; row = row->next, i++) {
        const sj_val *seq = row;
        if (with_bias) {
            if (row->type != SJ_ARRAY || row->n != 2 || row->child->type != SJ_ARRAY || row->child->next->type != SJ_NUMBER)
                return sv_fail(e, 400, "validation", "%s[%lld] must be a pair [[ids...], bias]", name, (long long)i);
            seq = row->child;
        }
        if (seq->type != SJ_ARRAY || seq->n == 0)
            return sv_fail(e, 400, "validation", "%s[%lld] must be a non-empty list of token ids", name, (long long)i);
        total += seq->n;
    }
    if (total > INT32_MAX) return sv_fail(e, 413, "too_large", "%s is too long", name);
    cu = (int32_t *)sj_alloc(d, (size_t)(v->n + 1) * sizeof *cu);
    ids = (int32_t *)sj_alloc(d, (size_t)(total ? total : 1) * sizeof *ids);
    if (with_bias) b = (float *)sj_alloc(d, (size_t)(v->n ? v->n : 1) * sizeof *b);
    if (!cu || !ids || (with_bias && !b)) return sv_fail(e, 500, "internal", "out of memory");
    cu[0] = 0;
    for (row = v->child, i = 0; row; row = row->next, i++) {
        const sj_val *seq = with_bias ? row->child : row;
        if (with_bias) {
            double bv = row->child->next->d;
            if (bv > 3.0e38 || bv < -3.0e38)
                return sv_fail(e, 422, "validation", "%s[%lld]: the bias %g is out of range", name, (long long)i, bv);
            b[i] = (float)bv;
        }
        for (x = seq->child, j = cu[i]; x; x = x->next, j++) {
            char nm[64];
            snprintf(nm, sizeof nm, "%s[%lld]", name, (long long)i);
            if (!sv_get_id(x, nm, j - cu[i], -1, &ids[j], e)) return 0;
        }
        cu[i + 1] = (int32_t)j;
    }
    out->ids = ids, out->cu = cu, out->n = v->n;
    if (with_bias) *bias = b;
    return 1;
}

// force_words_ids: phrases (lists of ids) or disjunctive constraints (lists of lists of ids).
static int sv_get_force_words(sj_doc *d, const sj_val *v, fat5_token_seqs *out, const int32_t **constraint,
                              sv_error *e) {
    const sj_val *item, *seq, *x;
    int64_t n = 0, total = 0, i = 0, c, j;
    int32_t *cu, *ids, *con;
    if (v->type != SJ_ARRAY || v->n == 0)
        return sv_fail(e, 400, "validation", "parameters.force_words_ids must be a non-empty list of phrases (lists of ids) "
                       "or of lists of them");
    for (item = v->child, c = 0; item; item = item->next, c++) {
        int nested;
        if (item->type != SJ_ARRAY || item->n == 0)
            return sv_fail(e, 400, "validation", "parameters.force_words_ids[%lld] must be a non-empty list", (long long)c);
        nested = item->child->type == SJ_ARRAY;
        for (seq = nested ? item->child : item; seq; seq = nested ? seq->next : NULL) {
            if (nested && (seq->type != SJ_ARRAY || seq->n == 0))
                return sv_fail(e, 400, "validation", "parameters.force_words_ids[%lld] mixes lists and ids or holds an "
                               "empty list", (long long)c);
            n++, total += seq->n;
        }
    }
    if (total > INT32_MAX) return sv_fail(e, 413, "too_large", "parameters.force_words_ids is too long");
    cu = (int32_t *)sj_alloc(d, (size_t)(n + 1) * sizeof *cu);
    con = (int32_t *)sj_alloc(d, (size_t)n * sizeof *con);
    ids = (int32_t *)sj_alloc(d, (size_t)total * sizeof *ids);
    if (!cu || !con || !ids) return sv_fail(e, 500, "internal", "out of memory");
    cu[0] = 0;
    for (item = v->child, c = 0; item; item = item->next, c++) {
        int nested = item->child->type == SJ_ARRAY;
        for (seq = nested ? item->child : item; seq; seq = nested ? seq->next : NULL, i++) {
            for (x = seq->child, j = cu[i]; x; x = x->next, j++)
                if (!sv_get_id(x, "parameters.force_words_ids", c, -1, &ids[j], e)) return 0;
            cu[i + 1] = (int32_t)j;
            con[i] = (int32_t)c;
        }
    }
    out->ids = ids, out->cu = cu, out->n = n;
    *constraint = con;
    return 1;
}

// The parameters object of a generation request, over r->g.
static int sv_req_params(sv_req *r, const sj_val *params, const sv_req_limits *lim, sv_error *e) {
    const sj_val *val[SV_P_COUNT], *m;
    sj_doc *d = &r->doc;
    int k, has_max_new = 0, has_max_len = 0;
    int64_t x;
    fat5_generate_config *g = &r->g;
    char sug[96];
    memset(val, 0, sizeof val);
    if (params->type == SJ_NULL) return 1;
    if (params->type != SJ_OBJECT) return sv_fail(e, 400, "validation", "parameters must be an object, got %s", sj_kind(params));
    for (m = params->child; m; m = m->next) {
        for (k = 0; k < SV_P_COUNT; k++)
            if (strlen(sv_param_names[k]) == m->key_len && !memcmp(sv_param_names[k], m->key, m->key_len)) break;
        if (k == SV_P_COUNT)
            return sv_fail(e, 400, "validation", "unknown parameter \"%.64s\"%s (docs/serving.md lists them)", m->key,
                           sv_suggest(m->key, m->key_len, sv_param_names, sug, sizeof sug));
        if (val[k]) return sv_fail(e, 400, "validation", "parameter \"%s\" given twice", sv_param_names[k]);
        val[k] = m;
    }
    // null is "not given" (the checkpoint's value), except for eos_token_id and the token-list
    // options, where it is Hugging Face's None: off
    for (k = 0; k < SV_P_COUNT; k++) {
        const sj_val *v = val[k];
        char name[64];
        if (!v) continue;
        snprintf(name, sizeof name, "parameters.%s", sv_param_names[k]);
        if (v->type == SJ_NULL) {
            switch (k) {
            case SV_P_eos_token_id: g->eos_token_id = -1, g->eos_token_ids.n = 0; break;
            case SV_P_forced_bos_token_id: g->forced_bos_token_id = -1; break;
            case SV_P_forced_eos_token_id: g->forced_eos_token_id.n = 0; break;
            case SV_P_suppress_tokens: g->suppress_tokens.n = 0; break;
            case SV_P_begin_suppress_tokens: g->begin_suppress_tokens.n = 0; break;
            case SV_P_bad_words_ids: g->bad_words_ids.n = 0; break;
            case SV_P_sequence_bias: g->sequence_bias.n = 0; break;
            case SV_P_force_words_ids: g->force_words_ids.n = 0; break;
            case SV_P_exponential_decay_length_penalty: g->exponential_decay_start = -1; break;
            default: break;
            }
            continue;
        }
        switch (k) {
        case SV_P_max_new_tokens:
            if (!sv_get_int(v, name, 1, INT32_MAX / 2, &g->max_new_tokens, e)) return 0;
            has_max_new = 1;
            break;
        case SV_P_max_length:
            if (!sv_get_int(v, name, 2, INT32_MAX / 2, &x, e)) return 0;
            g->max_length = x, has_max_len = 1;
            break;
        case SV_P_min_new_tokens: if (!sv_get_int(v, name, 0, INT32_MAX, &g->min_new_tokens, e)) return 0; break;
        case SV_P_min_length: if (!sv_get_int(v, name, 0, INT32_MAX, &g->min_length, e)) return 0; break;
        case SV_P_do_sample: if (!sv_get_bool(v, name, &g->do_sample, e)) return 0; break;
        case SV_P_temperature: if (!sv_get_num(v, name, &g->temperature, e)) return 0; break;
        case SV_P_top_k: if (!sv_get_int(v, name, 0, INT32_MAX, &g->top_k, e)) return 0; break;
        case SV_P_top_p: if (!sv_get_num(v, name, &g->top_p, e)) return 0; break;
        case SV_P_seed: {   // any 64-bit unsigned value (TGI's u64)
            const char *s = v->s;
            uint64_t u = 0;
            size_t q;
            if (v->type != SJ_NUMBER || v->len == 0 || s[0] == '-' || memchr(s, '.', v->len) || memchr(s, 'e', v->len) ||
                memchr(s, 'E', v->len))
                return v->type == SJ_NUMBER && s[0] == '-' && v->is_int
                           ? sv_fail(e, 422, "validation", "parameters.seed = %lld is negative", (long long)v->i)
                           : sv_bad_type(e, name, "a non-negative integer", v);
            for (q = 0; q < v->len; q++) {
                uint64_t dg = (uint64_t)(s[q] - '0');
                if (u > (UINT64_MAX - dg) / 10) return sv_fail(e, 422, "validation", "parameters.seed is larger than 2^64 - 1");
                u = u * 10 + dg;
            }
            g->seed = u;
            r->has_seed = 1;
            break;
        }
        case SV_P_num_beams: if (!sv_get_int(v, name, 1, 1 << 20, &g->num_beams, e)) return 0; break;
        case SV_P_length_penalty: if (!sv_get_num(v, name, &g->length_penalty, e)) return 0; break;
        case SV_P_early_stopping:
            if (v->type == SJ_STRING) {
                if (strcmp(v->s, "never") != 0)
                    return sv_fail(e, 422, "validation", "parameters.early_stopping must be true, false or \"never\"");
                g->early_stopping = 2;
            } else if (!sv_get_bool(v, name, &g->early_stopping, e)) {
                return 0;
            }
            break;
        case SV_P_num_return_sequences: if (!sv_get_int(v, name, 1, INT32_MAX, &g->num_return_sequences, e)) return 0; break;
        case SV_P_repetition_penalty: if (!sv_get_num(v, name, &g->repetition_penalty, e)) return 0; break;
        case SV_P_no_repeat_ngram_size: if (!sv_get_int(v, name, 0, INT32_MAX, &g->no_repeat_ngram_size, e)) return 0; break;
        case SV_P_eos_token_id:   // an id, or a list (every one stops), as Hugging Face
            if (!sv_get_ids(d, v, name, 1, &g->eos_token_ids, e)) return 0;
            if (g->eos_token_ids.n == 0) {
                g->eos_token_id = -1;
            } else {
                g->eos_token_id = g->eos_token_ids.ids[0];
                if (v->type != SJ_ARRAY) g->eos_token_ids.n = 0;
            }
            break;
        case SV_P_pad_token_id: if (!sv_get_int(v, name, 0, INT32_MAX, &g->pad_token_id, e)) return 0; break;
        case SV_P_decoder_start_token_id:
            if (!sv_get_int(v, name, 0, INT32_MAX, &g->decoder_start_token_id, e)) return 0;
            break;
        case SV_P_forced_bos_token_id: if (!sv_get_int(v, name, -1, INT32_MAX, &g->forced_bos_token_id, e)) return 0; break;
        case SV_P_forced_eos_token_id:
            if (!sv_get_ids(d, v, name, 1, &g->forced_eos_token_id, e)) return 0;
            break;
        case SV_P_suppress_tokens: if (!sv_get_ids(d, v, name, 0, &g->suppress_tokens, e)) return 0; break;
        case SV_P_begin_suppress_tokens:
            if (!sv_get_ids(d, v, name, 0, &g->begin_suppress_tokens, e)) return 0;
            break;
        case SV_P_bad_words_ids: if (!sv_get_seqs(d, v, name, 0, &g->bad_words_ids, NULL, e)) return 0; break;
        case SV_P_sequence_bias:
            if (!sv_get_seqs(d, v, name, 1, &g->sequence_bias, &g->sequence_bias_values, e)) return 0;
            break;
        case SV_P_encoder_repetition_penalty: if (!sv_get_num(v, name, &g->encoder_repetition_penalty, e)) return 0; break;
        case SV_P_encoder_no_repeat_ngram_size:
            if (!sv_get_int(v, name, 0, INT32_MAX, &g->encoder_no_repeat_ngram_size, e)) return 0;
            break;
        case SV_P_exponential_decay_length_penalty:
            if (v->type != SJ_ARRAY || v->n != 2 || v->child->type != SJ_NUMBER || !v->child->is_int ||
                v->child->next->type != SJ_NUMBER)
                return sv_bad_type(e, name, "[start_index, decay_factor]", v);
            if (v->child->i < 0 || v->child->i > INT32_MAX)
                return sv_fail(e, 422, "validation", "parameters.exponential_decay_length_penalty: start_index %lld is out "
                               "of range", (long long)v->child->i);
            g->exponential_decay_start = v->child->i;
            g->exponential_decay_factor = v->child->next->d;
            break;
        case SV_P_renormalize_logits: if (!sv_get_bool(v, name, &g->renormalize_logits, e)) return 0; break;
        case SV_P_remove_invalid_values: if (!sv_get_bool(v, name, &g->remove_invalid_values, e)) return 0; break;
        case SV_P_min_p: if (!sv_get_num(v, name, &g->min_p, e)) return 0; break;
        case SV_P_typical_p: if (!sv_get_num(v, name, &g->typical_p, e)) return 0; break;
        case SV_P_epsilon_cutoff: if (!sv_get_num(v, name, &g->epsilon_cutoff, e)) return 0; break;
        case SV_P_eta_cutoff: if (!sv_get_num(v, name, &g->eta_cutoff, e)) return 0; break;
        case SV_P_num_beam_groups: if (!sv_get_int(v, name, 1, 1 << 20, &g->num_beam_groups, e)) return 0; break;
        case SV_P_diversity_penalty: if (!sv_get_num(v, name, &g->diversity_penalty, e)) return 0; break;
        case SV_P_force_words_ids:
            if (!sv_get_force_words(d, v, &g->force_words_ids, &g->force_words_constraint, e)) return 0;
            break;
        case SV_P_decoder_input_ids: if (!sv_get_seqs(d, v, name, 0, &g->decoder_input_ids, NULL, e)) return 0; break;
        case SV_P_output_scores: if (!sv_get_bool(v, name, &g->output_scores, e)) return 0; break;
        case SV_P_output_logits: if (!sv_get_bool(v, name, &g->output_logits, e)) return 0; break;
        case SV_P_max_time:
            if (!sv_get_num(v, name, &r->max_time, e)) return 0;
            if (!(r->max_time >= 0) || r->max_time > 1e9)
                return sv_fail(e, 422, "validation", "parameters.max_time = %g; expected seconds >= 0 (0: none)", r->max_time);
            break;
        case SV_P_use_cache: {   // always on; accepted for Hugging Face's configs
            int on;
            if (!sv_get_bool(v, name, &on, e)) return 0;
            if (!on) return sv_fail(e, 422, "validation", "parameters.use_cache = false is not supported");
            break;
        }
        case SV_P_stop:
        case SV_P_stop_strings: {   // a list of strings (stop_strings, Hugging Face's: also one string)
            const sj_val *x;
            int64_t q = 0;
            if (val[SV_P_stop] && val[SV_P_stop_strings] && val[SV_P_stop]->type != SJ_NULL &&
                val[SV_P_stop_strings]->type != SJ_NULL)
                return sv_fail(e, 400, "validation", "parameters.stop and parameters.stop_strings: give one of them");
            if (v->type == SJ_STRING && k == SV_P_stop_strings) x = v;
            else if (v->type == SJ_ARRAY) x = v->child;
            else return sv_bad_type(e, name, "a list of strings", v);
            if ((v->type == SJ_ARRAY ? v->n : 1) > lim->max_stop)
                return sv_fail(e, 422, "validation", "%s: at most %lld stop sequences, got %lld", name,
                               (long long)lim->max_stop, (long long)(v->type == SJ_ARRAY ? v->n : 1));
            r->n_stops = v->type == SJ_ARRAY ? v->n : 1;
            r->stops = (const char **)sj_alloc(d, (size_t)(r->n_stops ? r->n_stops : 1) * sizeof *r->stops);
            r->stop_lens = (size_t *)sj_alloc(d, (size_t)(r->n_stops ? r->n_stops : 1) * sizeof *r->stop_lens);
            if (!r->stops || !r->stop_lens) return sv_fail(e, 500, "internal", "out of memory");
            for (; x && q < r->n_stops; x = x->next, q++) {
                if (x->type != SJ_STRING) return sv_fail(e, 400, "validation", "%s[%lld] must be a string, got %s",
                                                        name, (long long)q, sj_kind(x));
                if (x->len == 0 || x->len > lim->max_stop_bytes)
                    return sv_fail(e, 422, "validation", "%s[%lld] must be 1 to %zu bytes long", name, (long long)q,
                                   lim->max_stop_bytes);
                r->stops[q] = x->s, r->stop_lens[q] = x->len;
            }
            break;
        }
        case SV_P_details: if (!sv_get_bool(v, name, &r->details, e)) return 0; break;
        case SV_P_return_full_text: if (!sv_get_bool(v, name, &r->return_full_text, e)) return 0; break;
        case SV_P_ignore_eos: if (!sv_get_bool(v, name, &r->ignore_eos, e)) return 0; break;
        case SV_P_decoder_input_details: if (!sv_get_bool(v, name, &r->decoder_input_details, e)) return 0; break;
        case SV_P_watermark: {
            int on;
            if (!sv_get_bool(v, name, &on, e)) return 0;
            if (on) return sv_fail(e, 400, "validation", "parameters.watermark: watermarking is not supported");
            break;
        }
        case SV_P_truncate: if (!sv_get_int(v, name, 1, INT32_MAX, &r->truncate, e)) return 0; break;
        case SV_P_best_of:
            if (!sv_get_int(v, name, 1, INT32_MAX, &x, e)) return 0;
            if (x > 1) return sv_fail(e, 422, "validation", "parameters.best_of = %lld: only 1 is supported", (long long)x);
            break;
        case SV_P_top_n_tokens:
            if (!sv_get_int(v, name, 0, INT32_MAX, &x, e)) return 0;
            if (x > 0) return sv_fail(e, 422, "validation", "parameters.top_n_tokens = %lld: top tokens are not returned",
                                      (long long)x);
            break;
        case SV_P_frequency_penalty: {
            double f = 0;
            if (!sv_get_num(v, name, &f, e)) return 0;
            if (f != 0) return sv_fail(e, 422, "validation", "parameters.frequency_penalty is not supported "
                                       "(repetition_penalty is)");
            break;
        }
        case SV_P_grammar: return sv_fail(e, 422, "validation", "parameters.grammar: guided generation is not supported");
        case SV_P_adapter_id: return sv_fail(e, 422, "validation", "parameters.adapter_id: adapters are not supported");
        default: break;
        }
    }
    // Hugging Face's rule: max_new_tokens wins over max_length (also the checkpoint's max_length)
    if (has_max_new) g->max_length = 0;
    r->has_max_new_tokens = has_max_new || has_max_len;
    if (r->ignore_eos) g->eos_token_id = -1, g->eos_token_ids.n = 0;
    return 1;
}

// The input rows: "inputs" (a string, or for /embed a list of strings) or "input_ids" (a list of
// ids, or for /embed a list of such lists).
static int sv_req_inputs(sv_req *r, const sj_val *inputs, const sj_val *input_ids, const sv_req_limits *lim,
                         sv_error *e) {
    sj_doc *d = &r->doc;
    int embed = r->endpoint == SV_EP_EMBED;
    int64_t i = 0, n;
    const sj_val *x;
    if (inputs && input_ids) return sv_fail(e, 400, "validation", "give \"inputs\" or \"input_ids\", not both");
    if (!inputs && !input_ids) return sv_fail(e, 400, "validation", "no \"inputs\" (a string) in the request");
    if (inputs) {
        if (inputs->type == SJ_STRING) n = 1, x = inputs;
        else if (embed && inputs->type == SJ_ARRAY) n = inputs->n, x = inputs->child;
        else return sv_fail(e, 400, "validation", "inputs must be %s, got %s", embed ? "a string or a list of strings" : "a string",
                            sj_kind(inputs));
        if (n == 0) return sv_fail(e, 422, "validation", "inputs is an empty list");
        if (n > lim->max_embed_inputs)
            return sv_fail(e, 422, "validation", "inputs holds %lld texts; at most %lld per request", (long long)n,
                           (long long)lim->max_embed_inputs);
        r->texts = (const char **)sj_alloc(d, (size_t)n * sizeof *r->texts);
        r->text_lens = (size_t *)sj_alloc(d, (size_t)n * sizeof *r->text_lens);
        if (!r->texts || !r->text_lens) return sv_fail(e, 500, "internal", "out of memory");
        for (; x && i < n; x = x->next, i++) {
            if (x->type != SJ_STRING)
                return sv_fail(e, 400, "validation", "inputs[%lld] must be a string, got %s", (long long)i, sj_kind(x));
            r->texts[i] = x->s, r->text_lens[i] = x->len;
        }
    } else {
        int nested = input_ids->type == SJ_ARRAY && input_ids->n > 0 && input_ids->child->type == SJ_ARRAY;
        if (input_ids->type != SJ_ARRAY || (nested && !embed))
            return sv_fail(e, 400, "validation", "input_ids must be %s, got %s",
                           embed ? "a list of token ids or a list of such lists" : "a list of token ids", sj_kind(input_ids));
        n = nested ? input_ids->n : 1;
        if (n > lim->max_embed_inputs)
            return sv_fail(e, 422, "validation", "input_ids holds %lld rows; at most %lld per request", (long long)n,
                           (long long)lim->max_embed_inputs);
        r->ids = (const int32_t **)sj_alloc(d, (size_t)n * sizeof *r->ids);
        r->n_ids = (int64_t *)sj_alloc(d, (size_t)n * sizeof *r->n_ids);
        if (!r->ids || !r->n_ids) return sv_fail(e, 500, "internal", "out of memory");
        for (x = nested ? input_ids->child : input_ids; x && i < n; x = x->next, i++) {
            fat5_token_list l;
            char nm[40];
            if (nested) snprintf(nm, sizeof nm, "input_ids[%lld]", (long long)i);
            else snprintf(nm, sizeof nm, "input_ids");
            if (x->type != SJ_ARRAY) return sv_fail(e, 400, "validation", "%s must be a list of token ids, got %s", nm, sj_kind(x));
            if (!sv_get_ids(d, x, nm, 0, &l, e)) return 0;
            if (l.n == 0) return sv_fail(e, 422, "validation", "%s is empty", nm);
            r->ids[i] = l.ids, r->n_ids[i] = l.n;
        }
    }
    r->n_inputs = n;
    return 1;
}

// Maps a request body to *r: endpoint SV_EP_GENERATE, SV_EP_STREAM, SV_EP_COMPAT (POST /: TGI's
// {"inputs", "parameters", "stream"}; r->endpoint becomes GENERATE or STREAM) or SV_EP_EMBED;
// defaults: the checkpoint's generation config. 1, or 0 with *err (400 malformed, unknown keys and
// wrong types; 413 too large; 422 invalid values). Either way sv_req_free(r) releases it.
SV_STATIC int sv_req_parse(int endpoint, const char *body, size_t len, const sv_req_limits *lim,
                           const fat5_generate_config *defaults, sv_req *r, sv_error *e) {
    static const char *const gen_keys[] = {"inputs", "input_ids", "parameters", "stream", NULL};
    static const char *const embed_keys[] = {"inputs", "input_ids", "normalize", "truncate", "truncation_direction", NULL};
    const char *const *keys = endpoint == SV_EP_EMBED ? embed_keys : gen_keys;
    const sj_val *root, *m, *inputs = NULL, *input_ids = NULL, *params = NULL, *stream = NULL, *norm = NULL, *trunc = NULL,
                          *dir = NULL;
    char sug[96];
    memset(r, 0, sizeof *r);
    r->endpoint = endpoint;
    r->g = *defaults;
    if (!sj_parse(body, len, &lim->json, &r->doc, e)) return 0;
    root = r->doc.root;
    if (root->type != SJ_OBJECT) return sv_fail(e, 400, "validation", "the body must be a JSON object, got %s", sj_kind(root));
    for (m = root->child; m; m = m->next) {
        const sj_val **slot = NULL;
        int k;
        for (k = 0; keys[k]; k++)
            if (strlen(keys[k]) == m->key_len && !memcmp(keys[k], m->key, m->key_len)) break;
        if (!keys[k] || (k == 3 && endpoint != SV_EP_COMPAT && endpoint != SV_EP_EMBED))
            return sv_fail(e, 400, "validation", "unknown key \"%.64s\"%s", m->key,
                           keys[k] ? " (POST /generate_stream streams)" : sv_suggest(m->key, m->key_len, keys, sug, sizeof sug));
        if (k == 0) slot = &inputs;
        else if (k == 1) slot = &input_ids;
        else if (endpoint == SV_EP_EMBED) slot = k == 2 ? &norm : k == 3 ? &trunc : &dir;
        else slot = k == 2 ? &params : &stream;
        if (*slot) return sv_fail(e, 400, "validation", "key \"%s\" given twice", keys[k]);
        *slot = m;
    }
    if (endpoint == SV_EP_COMPAT) {
        int s = 0;
        if (stream && stream->type != SJ_NULL && !sv_get_bool(stream, "stream", &s, e)) return 0;
        r->endpoint = s ? SV_EP_STREAM : SV_EP_GENERATE;
    }
    if (endpoint == SV_EP_EMBED) {
        if (norm && norm->type != SJ_NULL && !sv_get_bool(norm, "normalize", &r->normalize, e)) return 0;
        if (trunc && trunc->type != SJ_NULL && !sv_get_bool(trunc, "truncate", &r->truncate_embed, e)) return 0;
        if (dir && dir->type != SJ_NULL && !(dir->type == SJ_STRING && (!strcmp(dir->s, "right") || !strcmp(dir->s, "Right"))))
            return sv_fail(e, 422, "validation", "truncation_direction: only \"right\" (keep the beginning) is supported");
    }
    if (!sv_req_inputs(r, inputs, input_ids, lim, e)) return 0;
    if (params && !sv_req_params(r, params, lim, e)) return 0;
    return 1;
}

#endif   // FAT5_SERVE_REQUEST_H
