// load_test — a load generator for fat5's HTTP inference server (examples/serve), or any server
// with Text Generation Inference's POST /generate and POST /generate_stream.
//     cc -std=c99 -O2 -o tools/load_test tools/load_test.c -lm -lpthread
//     tools/load_test --url http://127.0.0.1:8080 --clients 8 --requests 200
//                     --prompt-tokens uniform:64:512 --new-tokens 128 --json
//     tools/load_test --self-test
// Each request is {"input_ids": [...], "parameters": {"max_new_tokens": M, "do_sample": ...,
// "ignore_eos": ..., "details": true}}: a prompt of random ids (uniform in [3, vocab), the last one
// 1, EOS) of a length drawn from --prompt-tokens, M drawn from --new-tokens, both from a generator
// seeded by --seed and the request's number, so a run sends the same requests every time.
// Arrivals: closed loop (--clients N clients, each sends its next request when its last one ends)
// or Poisson (--rate R requests a second, exponential gaps from the seeded generator, at most N in
// flight: a request whose arrival finds every client busy waits for one, and the wait is reported
// as the dispatch delay). --warmup K requests go first and are not counted.
// Per request: time to first token (streaming: the first token event; otherwise the whole
// latency), per-token latency (streaming: (t_last - t_first) / (n - 1) over the n token events),
// end-to-end latency, tokens, the HTTP status or the transport's failure. The report: a table on
// standard error, and with --json one JSON line on standard output (docs/load_test.md lists the
// fields). Percentiles are nearest-rank on the sorted samples.
// The client: HTTP/1.1 over POSIX sockets, kept-alive connections (one a client), bodies framed by
// Content-Length, chunked, or the connection's close; server-sent events split anywhere across
// reads. Every wait is bounded by --timeout (per request, connection included): a refused,
// reset or silent server is an error with its reason, never a hang.
// --self-test checks the HTTP and event parsers on responses cut at every byte, then runs the
// load generator against an in-process fake server (127.0.0.1, an ephemeral port) with known
// delays and token counts, and against a refused port, a server that never answers, one that
// drops the stream and one that answers 503; about 1.5 s.
// Exits 0 when a request succeeded (or the self-test passed), 1 when none did, 2 on a usage error.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md); JSON helpers

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0   // SIGPIPE is ignored in main as well
#endif

// ---------------------------------------------------------------------------------------------
// time, random numbers, a growable text buffer

// seconds on the monotonic clock
static double lt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// sleeps s seconds (nothing when s <= 0)
static void lt_sleep(double s) {
    struct timespec ts;
    if (s <= 0) return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

// sleeps until the monotonic clock reads t
static void lt_sleep_until(double t) {
    double d;
    while ((d = t - lt_now()) > 0) lt_sleep(d);
}

// splitmix64: the next 64 random bits of the state s
static uint64_t lt_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// uniform in [0, 1)
static double lt_unif(uint64_t *s) { return (double)(lt_rand(s) >> 11) * (1.0 / 9007199254740992.0); }

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

// appends n bytes (kept NUL-terminated); sets oom on failure
static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        char *np;
        while (nc < b->n + n + 1) nc *= 2;
        if (!(np = (char *)realloc(b->p, nc))) {
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

// appends printf's text
static void sb_printf(sbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    int k;
    va_start(ap, fmt);
    k = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)k < sizeof small) {
        sb_add(b, small, (size_t)k);
        return;
    }
    {
        char *big = (char *)malloc((size_t)k + 1);
        if (!big) {
            b->oom = 1;
            return;
        }
        va_start(ap, fmt);
        vsnprintf(big, (size_t)k + 1, fmt, ap);
        va_end(ap);
        sb_add(b, big, (size_t)k);
        free(big);
    }
}

// a message (at most cap - 1 bytes of s, control characters as spaces) into dst
static void lt_copy_msg(char *dst, size_t cap, const char *s, size_t n) {
    size_t k;
    if (n > cap - 1) n = cap - 1;
    for (k = 0; k < n; k++) dst[k] = (unsigned char)s[k] < 0x20 ? ' ' : s[k];
    dst[n] = 0;
}

// ---------------------------------------------------------------------------------------------
// distributions of lengths: "512", "uniform:A:B", "normal:MEAN:SD", "exp:MEAN"

enum { D_FIXED, D_UNIFORM, D_NORMAL, D_EXP };
#define LT_MAX_LEN 1000000   // a drawn length is clamped to [1, LT_MAX_LEN]

typedef struct lt_dist {
    int kind;
    double a, b;   // fixed: a; uniform: [a, b]; normal: mean a, sd b; exp: mean a
} lt_dist;

// the number that is the whole of s[0 .. n): 1, or 0 when it is not one
static int lt_num(const char *s, size_t n, double *out) {
    char tmp[64], *end;
    if (n == 0 || n >= sizeof tmp) return 0;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    if (tmp[0] == ' ' || tmp[0] == '\t') return 0;
    *out = strtod(tmp, &end);
    return *end == 0 && isfinite(*out);
}

// parses DIST into d: 1, or 0 with the reason in why
static int lt_dist_parse(const char *s, lt_dist *d, const char **why) {
    const char *f[3];
    size_t fl[3];
    int nf = 0;
    double v[3] = {0, 0, 0};
    const char *p = s;
    while (nf < 3) {   // up to three ':'-separated fields
        size_t k = strcspn(p, ":");
        f[nf] = p;
        fl[nf++] = k;
        if (!p[k]) break;
        p += k + 1;
        if (nf == 3) {
            *why = "too many ':' fields";
            return 0;
        }
    }
    *why = "expected N, uniform:A:B, normal:MEAN:SD or exp:MEAN";
    if (nf == 1) {
        if (!lt_num(f[0], fl[0], &v[0]) || v[0] != floor(v[0]) || v[0] < 1 || v[0] > LT_MAX_LEN) {
            *why = "expected a whole number of tokens (1 to 1000000), or uniform:A:B, normal:MEAN:SD, exp:MEAN";
            return 0;
        }
        d->kind = D_FIXED, d->a = v[0], d->b = 0;
        return 1;
    }
    if (!lt_num(f[1], fl[1], &v[1]) || (nf == 3 && !lt_num(f[2], fl[2], &v[2]))) return 0;
    if (fl[0] == 7 && memcmp(f[0], "uniform", 7) == 0 && nf == 3) {
        if (v[1] != floor(v[1]) || v[2] != floor(v[2]) || v[1] < 1 || v[2] < v[1] || v[2] > LT_MAX_LEN) {
            *why = "uniform:A:B needs whole numbers 1 <= A <= B <= 1000000";
            return 0;
        }
        d->kind = D_UNIFORM;
    } else if (fl[0] == 6 && memcmp(f[0], "normal", 6) == 0 && nf == 3) {
        if (v[1] > LT_MAX_LEN || v[2] < 0 || v[2] > LT_MAX_LEN) {
            *why = "normal:MEAN:SD needs MEAN <= 1000000 and 0 <= SD <= 1000000";
            return 0;
        }
        d->kind = D_NORMAL;
    } else if (fl[0] == 3 && memcmp(f[0], "exp", 3) == 0 && nf == 2) {
        if (v[1] <= 0 || v[1] > LT_MAX_LEN) {
            *why = "exp:MEAN needs 0 < MEAN <= 1000000";
            return 0;
        }
        d->kind = D_EXP;
    } else {
        return 0;
    }
    d->a = v[1], d->b = v[2];
    return 1;
}

// one length from d, in [1, LT_MAX_LEN]
static int lt_dist_draw(const lt_dist *d, uint64_t *rng) {
    double x;
    switch (d->kind) {
    case D_UNIFORM: x = d->a + floor(lt_unif(rng) * (d->b - d->a + 1)); break;
    case D_NORMAL: {   // Box-Muller
        double u1 = 1.0 - lt_unif(rng), u2 = lt_unif(rng);
        x = floor(d->a + d->b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2) + 0.5);
        break;
    }
    case D_EXP: x = floor(-d->a * log(1.0 - lt_unif(rng)) + 0.5); break;
    default: x = d->a;
    }
    if (!(x >= 1)) x = 1;
    if (x > LT_MAX_LEN) x = LT_MAX_LEN;
    return (int)x;
}

// ---------------------------------------------------------------------------------------------
// the run's settings

typedef struct lt_config {
    char url[512];             // as given
    char host[256];            // the Host header: host[:port] as in the URL
    char prefix[256];          // the URL's path, without a trailing '/' ("" or "/api")
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int clients;               // at most this many requests in flight
    long long requests;        // measured requests; < 0: until --duration ends
    double duration;           // seconds of the measured window in which requests start; 0: none
    int poisson;               // arrivals: 0 closed loop, 1 Poisson
    double rate;               // Poisson: requests a second
    lt_dist prompt, new_tokens;
    long vocab;                // prompt ids are uniform in [3, vocab)
    unsigned long long seed;
    int stream, ignore_eos, sample, keep_alive;
    long long warmup;
    double timeout;            // seconds a request may take, connection included
} lt_config;

// Reads "http://HOST[:PORT][/PATH]" into c (host, prefix, the resolved address): 1, or with a
// message in err 0 (not such a URL) or -1 (the host has no address).
static int lt_parse_url(lt_config *c, const char *url, char *err, size_t errcap) {
    const char *p = url, *host_s, *host_e, *port_s = NULL, *path;
    char host[256], port[16];
    struct addrinfo hints, *res = NULL, *ai, *pick = NULL;
    int rc;
    size_t hl;
    snprintf(c->url, sizeof c->url, "%s", url);
    if (strncmp(p, "https://", 8) == 0) {
        snprintf(err, errcap, "https is not supported (the server speaks plain HTTP)");
        return 0;
    }
    if (strncmp(p, "http://", 7) != 0) {
        snprintf(err, errcap, "expected http://HOST[:PORT][/PATH]");
        return 0;
    }
    p += 7;
    if (*p == '[') {   // an IPv6 literal
        host_s = p + 1;
        if (!(host_e = strchr(host_s, ']'))) {
            snprintf(err, errcap, "unclosed '[' in the host");
            return 0;
        }
        p = host_e + 1;
    } else {
        host_s = p;
        p += strcspn(p, ":/");
        host_e = p;
    }
    if (*p == ':') port_s = ++p, p += strcspn(p, "/");
    path = p;
    hl = (size_t)(host_e - host_s);
    if (hl == 0 || hl >= sizeof host) {
        snprintf(err, errcap, "no host");
        return 0;
    }
    memcpy(host, host_s, hl);
    host[hl] = 0;
    if (port_s) {
        size_t pl = (size_t)(path - port_s), k;
        if (pl == 0 || pl > 5) {
            snprintf(err, errcap, "bad port");
            return 0;
        }
        for (k = 0; k < pl; k++)
            if (port_s[k] < '0' || port_s[k] > '9') {
                snprintf(err, errcap, "bad port");
                return 0;
            }
        memcpy(port, port_s, pl);
        port[pl] = 0;
        if (atoi(port) < 1 || atoi(port) > 65535) {
            snprintf(err, errcap, "bad port");
            return 0;
        }
    } else {
        strcpy(port, "80");
    }
    snprintf(c->host, sizeof c->host, "%.*s", (int)(path - (url + 7)), url + 7);
    snprintf(c->prefix, sizeof c->prefix, "%s", path);
    while (c->prefix[0] && c->prefix[strlen(c->prefix) - 1] == '/') c->prefix[strlen(c->prefix) - 1] = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if ((rc = getaddrinfo(host, port, &hints, &res)) != 0) {
        snprintf(err, errcap, "%.100s: %s", host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next)   // IPv4 first: servers commonly listen on 0.0.0.0
        if (ai->ai_family == AF_INET && !pick) pick = ai;
    if (!pick) pick = res;
    memcpy(&c->addr, pick->ai_addr, pick->ai_addrlen);
    c->addrlen = (socklen_t)pick->ai_addrlen;
    freeaddrinfo(res);
    return 1;
}

// ---------------------------------------------------------------------------------------------
// requests

typedef struct lt_request {
    sbuf text;          // the HTTP request, head and body
    int prompt_tokens, max_new;
} lt_request;

// The random state of request k of a phase (0: warmup, 1: measured): the same for the same seed.
static uint64_t lt_request_rng(const lt_config *c, int phase, long long k) {
    uint64_t s = (uint64_t)c->seed ^ (0xA0761D6478BD642Full * (uint64_t)(phase + 1));
    s += (uint64_t)k * 0xE7037ED1A0B428DBull;
    lt_rand(&s);
    return s;
}

// The random state of the Poisson arrivals for a seed.
static uint64_t lt_arrival_rng(unsigned long long seed) {
    uint64_t s = (uint64_t)seed ^ 0x8EBC6AF09C88C6E3ull;
    lt_rand(&s);
    return s;
}

// the gap before the next Poisson arrival, in seconds
static double lt_arrival_gap(uint64_t *rng, double rate) { return -log(1.0 - lt_unif(rng)) / rate; }

// Builds request k of a phase (head and JSON body) into rq: 1, 0 out of memory.
static int lt_build_request(const lt_config *c, int phase, long long k, lt_request *rq) {
    uint64_t rng = lt_request_rng(c, phase, k);
    sbuf body = {0};
    int i;
    rq->prompt_tokens = lt_dist_draw(&c->prompt, &rng);
    rq->max_new = lt_dist_draw(&c->new_tokens, &rng);
    sb_add(&body, "{\"input_ids\":[", 14);
    for (i = 0; i + 1 < rq->prompt_tokens; i++)
        sb_printf(&body, "%ld,", 3 + (long)(lt_rand(&rng) % (uint64_t)(c->vocab - 3)));
    sb_printf(&body, "1],\"parameters\":{\"max_new_tokens\":%d,\"do_sample\":%s", rq->max_new,
              c->sample ? "true" : "false");
    if (c->sample) sb_printf(&body, ",\"seed\":%lu", (unsigned long)(lt_rand(&rng) >> 33));
    sb_printf(&body, ",\"ignore_eos\":%s,\"details\":true}}", c->ignore_eos ? "true" : "false");
    rq->text.n = 0;
    sb_printf(&rq->text,
              "POST %s%s HTTP/1.1\r\nHost: %s\r\nUser-Agent: fat5-load_test\r\nContent-Type: application/json\r\n"
              "Accept: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n\r\n",
              c->prefix, c->stream ? "/generate_stream" : "/generate", c->host,
              c->stream ? "text/event-stream" : "application/json", body.n, c->keep_alive ? "keep-alive" : "close");
    if (!body.oom) sb_add(&rq->text, body.p, body.n);
    i = !body.oom && !rq->text.oom;
    free(body.p);
    return i;
}

// ---------------------------------------------------------------------------------------------
// responses: a push parser, fed bytes as they arrive (each read with its time)

enum { R_HEAD, R_LEN, R_CHUNK_SIZE, R_CHUNK_DATA, R_CHUNK_END, R_TRAILER, R_CLOSE, R_DONE, R_FAIL };
#define LT_MAX_BODY (64u << 20)   // a longer body, or event line, is a bad response

typedef struct lt_resp {
    int sse_wanted;        // read a 2xx body as server-sent events
    int state;             // R_*
    char head[16384];
    size_t head_n;
    int status, conn_close, chunked, sse, extra, saw_cr;
    long long clen, left;
    char cline[256];       // a chunk-size or trailer line
    size_t cline_n;
    sbuf body;             // SSE: the current line; otherwise the whole body
    sbuf ev;               // SSE: the data of the current event
    size_t received;       // bytes fed
    const char *fail;      // R_FAIL: why
    // what the body said
    int tokens;            // SSE: token events; otherwise details.generated_tokens (or the token list's length)
    double t_first, t_last;
    int final_seen, stream_error, bad_events;
    long long details_tokens;   // details.generated_tokens, -1 when absent
    char finish[32];
    char message[96];      // the server's error text
} lt_resp;

static void resp_init(lt_resp *r, int sse_wanted) {
    memset(r, 0, sizeof *r);
    r->sse_wanted = sse_wanted;
    r->clen = -1;
    r->details_tokens = -1;
}

static void resp_free(lt_resp *r) {
    free(r->body.p);
    free(r->ev.p);
    r->body.p = r->ev.p = NULL;
}

static int resp_fail(lt_resp *r, const char *why) {
    r->state = R_FAIL;
    r->fail = why;
    return R_FAIL;
}

// 1 when s[0 .. n) starts with the word w, letters compared without case
static int lt_istarts(const char *s, size_t n, const char *w) {
    size_t k, wn = strlen(w);
    if (n < wn) return 0;
    for (k = 0; k < wn; k++) {
        int a = (unsigned char)s[k], b = (unsigned char)w[k];
        if (a >= 'A' && a <= 'Z') a += 32;
        if (a != b) return 0;
    }
    return 1;
}

// 1 when s[0 .. n) holds the lower-case word w, letters compared without case
static int lt_icontains(const char *s, size_t n, const char *w) {
    size_t k, wn = strlen(w);
    for (k = 0; k + wn <= n; k++)
        if (lt_istarts(s + k, n - k, w)) return 1;
    return 0;
}

// The member key of the JSON object [o, oe) as [*v, *ve): 1, 0 when absent or not an object.
static int lt_json_get(const char *o, const char *oe, const char *key, const char **v, const char **ve) {
    cli_json_it it;
    char k[64];
    cli_json_begin(&it, o, (size_t)(oe - o));
    while (cli_json_member(&it, k, sizeof k, v, ve) == 1)
        if (strcmp(k, key) == 0) return 1;
    return 0;
}

// details of a TGI answer ({"finish_reason": ..., "generated_tokens": N, "tokens": [...]}) into r;
// returns the length of the token list, -1 when there is none
static long long resp_details(lt_resp *r, const char *o, const char *oe) {
    const char *v, *ve;
    long long ntok = -1;
    if (lt_json_get(o, oe, "finish_reason", &v, &ve) && *v == '"') {
        char *s = cli_json_str_dup(v, ve, NULL);
        if (s) snprintf(r->finish, sizeof r->finish, "%s", s);
        free(s);
    }
    if (lt_json_get(o, oe, "generated_tokens", &v, &ve) && (*v == '-' || (*v >= '0' && *v <= '9')))
        r->details_tokens = strtoll(v, NULL, 10);
    if (lt_json_get(o, oe, "tokens", &v, &ve) && *v == '[') {   // its elements, counted
        const char *p = cli_json_ws(v + 1, ve);
        ntok = 0;
        while (p && p < ve && *p != ']') {
            if (!(p = cli_json_skip(p, ve, 0))) break;
            ntok++;
            p = cli_json_ws(p, ve);
            if (p < ve && *p == ',') p = cli_json_ws(p + 1, ve);
        }
    }
    return ntok;
}

// an error object's "error" text into r->message; 1 when there was one
static int resp_error_text(lt_resp *r, const char *o, const char *oe) {
    const char *v, *ve;
    size_t n;
    char *s;
    if (!lt_json_get(o, oe, "error", &v, &ve)) return 0;
    if (*v == '"' && (s = cli_json_str_dup(v, ve, &n))) {
        lt_copy_msg(r->message, sizeof r->message, s, n);
        free(s);
    } else {
        lt_copy_msg(r->message, sizeof r->message, v, (size_t)(ve - v));
    }
    return 1;
}

// one server-sent event (its data in r->ev), received at time t
static void sse_event(lt_resp *r, double t) {
    cli_json_it it;
    char key[64];
    const char *v, *ve;
    int m, tok = 0;
    if (r->ev.n == 0) return;
    if (strcmp(r->ev.p, "[DONE]") == 0) {
        r->ev.n = 0;
        return;
    }
    cli_json_begin(&it, r->ev.p, r->ev.n);
    while ((m = cli_json_member(&it, key, sizeof key, &v, &ve)) == 1) {
        if (strcmp(key, "token") == 0 && *v == '{') tok = 1;
        else if (strcmp(key, "generated_text") == 0 && *v == '"') r->final_seen = 1;
        else if (strcmp(key, "details") == 0 && *v == '{') resp_details(r, v, ve);
        else if (strcmp(key, "error") == 0 && *v != 'n') {
            r->stream_error = 1;
            resp_error_text(r, r->ev.p, r->ev.p + r->ev.n);
        }
    }
    if (m < 0) r->bad_events++;
    if (tok) {
        if (++r->tokens == 1) r->t_first = t;
        r->t_last = t;
    }
    r->ev.n = 0;
}

// one line of an event stream (without its line end)
static void sse_line(lt_resp *r, const char *s, size_t n, double t) {
    if (n && s[n - 1] == '\r') n--;
    if (n == 0) {
        sse_event(r, t);
    } else if (n >= 5 && memcmp(s, "data:", 5) == 0) {
        s += 5, n -= 5;
        if (n && *s == ' ') s++, n--;
        if (r->ev.n) sb_add(&r->ev, "\n", 1);
        sb_add(&r->ev, s, n);
        if (r->ev.oom || r->ev.n > LT_MAX_BODY) resp_fail(r, "bad_response");
    }   // comments (':'), "event:", "id:" and "retry:" lines say nothing measured here
}

// body bytes (framing removed)
static void body_bytes(lt_resp *r, const char *p, size_t n, double t) {
    if (!r->sse) {
        sb_add(&r->body, p, n);
        if (r->body.oom || r->body.n > LT_MAX_BODY) resp_fail(r, "bad_response");
        return;
    }
    while (n && r->state != R_FAIL) {   // whole lines; a partial one waits in r->body
        const char *nl = (const char *)memchr(p, '\n', n);
        size_t k = nl ? (size_t)(nl - p) : n;
        if (!nl) {
            sb_add(&r->body, p, k);
            if (r->body.oom || r->body.n > LT_MAX_BODY) resp_fail(r, "bad_response");
            return;
        }
        if (r->body.n) {
            sb_add(&r->body, p, k);
            if (r->body.oom) {
                resp_fail(r, "bad_response");
                return;
            }
            sse_line(r, r->body.p, r->body.n, t);
            r->body.n = 0;
        } else {
            sse_line(r, p, k, t);
        }
        p += k + 1, n -= k + 1;
    }
}

// the body is complete: read what it says, and the response is done
static void body_end(lt_resp *r, double t) {
    const char *o, *oe;
    if (r->state == R_FAIL) return;
    r->state = R_DONE;
    if (r->sse) {
        if (r->body.n) sse_line(r, r->body.p, r->body.n, t);
        r->body.n = 0;
        sse_event(r, t);   // an event the stream ended without its blank line
        return;
    }
    o = cli_json_ws(r->body.p ? r->body.p : "", r->body.p ? r->body.p + r->body.n : "");
    oe = r->body.p ? r->body.p + r->body.n : o;
    if (r->status < 200 || r->status > 299) {   // an error: its text
        if (!(o < oe && *o == '{' && resp_error_text(r, o, oe))) lt_copy_msg(r->message, sizeof r->message, o, (size_t)(oe - o));
        return;
    }
    if (o < oe && *o == '[') {   // [{...}]: the first answer
        const char *e1 = cli_json_skip(cli_json_ws(o + 1, oe), oe, 0);
        o = cli_json_ws(o + 1, oe);
        oe = e1 ? e1 : o;
    }
    {
        const char *v, *ve;
        cli_json_it it;
        char key[64];
        int m;
        long long ntok = -1;
        cli_json_begin(&it, o, (size_t)(oe - o));
        while ((m = cli_json_member(&it, key, sizeof key, &v, &ve)) == 1) {
            if (strcmp(key, "generated_text") == 0 && *v == '"') r->final_seen = 1;
            else if (strcmp(key, "details") == 0 && *v == '{') ntok = resp_details(r, v, ve);
            else if (strcmp(key, "error") == 0 && *v != 'n') {
                r->stream_error = 1;
                resp_error_text(r, o, oe);
            }
        }
        if (m < 0) r->bad_events++;
        r->tokens = r->details_tokens >= 0 ? (int)r->details_tokens : ntok >= 0 ? (int)ntok : 0;
    }
}

// the head is complete (r->head): the status, the framing of the body
static void resp_head(lt_resp *r, double t) {
    const char *p = r->head, *e = r->head + r->head_n;
    int http10, keep = 0;
    if (!lt_istarts(p, (size_t)(e - p), "http/1.") || e - p < 12 || p[8] != ' ') {
        resp_fail(r, "bad_response");
        return;
    }
    http10 = p[7] == '0';
    if (p[9] < '0' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9') {
        resp_fail(r, "bad_response");
        return;
    }
    r->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    r->clen = -1, r->chunked = 0, r->conn_close = 0;
    p = (const char *)memchr(p, '\n', (size_t)(e - p)) + 1;
    while (p < e) {   // the header lines
        const char *le = (const char *)memchr(p, '\n', (size_t)(e - p)), *v;
        size_t n = (size_t)(le - p);
        if (n && p[n - 1] == '\r') n--;
        v = (const char *)memchr(p, ':', n);
        if (v) {
            size_t vn;
            v++;
            while (v < p + n && (*v == ' ' || *v == '\t')) v++;
            vn = (size_t)(p + n - v);
            if (lt_istarts(p, n, "content-length:")) {
                char *end;
                char tmp[32];
                snprintf(tmp, sizeof tmp, "%.*s", (int)(vn < 31 ? vn : 31), v);
                r->clen = strtoll(tmp, &end, 10);
                while (*end == ' ' || *end == '\t') end++;
                if (end == tmp || *end || r->clen < 0) {
                    resp_fail(r, "bad_response");
                    return;
                }
            } else if (lt_istarts(p, n, "transfer-encoding:")) {
                r->chunked = lt_icontains(v, vn, "chunked");
            } else if (lt_istarts(p, n, "connection:")) {
                if (lt_icontains(v, vn, "close")) r->conn_close = 1;
                if (lt_icontains(v, vn, "keep-alive")) keep = 1;
            }
        }
        p = le + 1;
    }
    if (http10 && !keep) r->conn_close = 1;
    r->head_n = 0;
    if (r->status >= 100 && r->status < 200 && r->status != 101) return;   // 100 Continue: the real head follows
    r->sse = r->sse_wanted && r->status >= 200 && r->status <= 299;
    if (r->status == 204 || r->status == 304) body_end(r, t);
    else if (r->chunked) r->state = R_CHUNK_SIZE;
    else if (r->clen >= 0) {
        r->state = R_LEN;
        r->left = r->clen;
        if (r->left == 0) body_end(r, t);
    } else {   // the body ends with the connection
        r->state = R_CLOSE;
        r->conn_close = 1;
    }
}

// Feeds n response bytes received at time t; the state after them (R_DONE, R_FAIL or reading on).
// Bytes past the end of the response mark the connection unfit for another request.
static int resp_feed(lt_resp *r, const char *p, size_t n, double t) {
    size_t i = 0;
    r->received += n;
    while (i < n && r->state != R_FAIL) {
        size_t k;
        char ch;
        switch (r->state) {
        case R_DONE:
            r->extra = 1;
            return r->state;
        case R_HEAD:
            ch = p[i++];
            if (r->head_n + 1 >= sizeof r->head) return resp_fail(r, "bad_response");
            r->head[r->head_n++] = ch;
            r->head[r->head_n] = 0;
            if (ch == '\n' && ((r->head_n >= 4 && memcmp(r->head + r->head_n - 4, "\r\n\r\n", 4) == 0) ||
                               (r->head_n >= 2 && r->head[r->head_n - 2] == '\n')))
                resp_head(r, t);
            break;
        case R_LEN:
        case R_CHUNK_DATA:
            k = n - i < (size_t)r->left ? n - i : (size_t)r->left;
            body_bytes(r, p + i, k, t);
            i += k;
            r->left -= (long long)k;
            if (r->left == 0 && r->state == R_LEN) body_end(r, t);
            else if (r->left == 0 && r->state == R_CHUNK_DATA) r->state = R_CHUNK_END, r->saw_cr = 0;
            break;
        case R_CLOSE:
            body_bytes(r, p + i, n - i, t);
            i = n;
            break;
        case R_CHUNK_END:   // the CRLF after a chunk's data
            ch = p[i++];
            if (ch == '\r' && !r->saw_cr) r->saw_cr = 1;
            else if (ch == '\n') r->state = R_CHUNK_SIZE;
            else return resp_fail(r, "bad_response");
            break;
        case R_CHUNK_SIZE:
        case R_TRAILER:
            ch = p[i++];
            if (ch != '\n') {
                if (r->cline_n + 1 >= sizeof r->cline) return resp_fail(r, "bad_response");
                r->cline[r->cline_n++] = ch;
                break;
            }
            if (r->cline_n && r->cline[r->cline_n - 1] == '\r') r->cline_n--;
            r->cline[r->cline_n] = 0;
            k = r->cline_n;
            r->cline_n = 0;
            if (r->state == R_TRAILER) {
                if (k == 0) body_end(r, t);
            } else {
                long long size = 0;
                size_t d = 0;
                for (; d < k; d++) {   // hex digits, then nothing or an extension (";...")
                    char h = r->cline[d];
                    int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (v < 0) break;
                    if (size > (long long)LT_MAX_BODY) return resp_fail(r, "bad_response");
                    size = size * 16 + v;
                }
                if (d == 0 || (d < k && r->cline[d] != ';' && r->cline[d] != ' ' && r->cline[d] != '\t'))
                    return resp_fail(r, "bad_response");
                if (size == 0) r->state = R_TRAILER;
                else r->state = R_CHUNK_DATA, r->left = size;
            }
            break;
        default:
            return resp_fail(r, "bad_response");
        }
    }
    return r->state;
}

// The connection has closed (at time t): the end of a body that runs to it, else the response is
// cut short.
static int resp_eof(lt_resp *r, double t) {
    if (r->state == R_CLOSE) body_end(r, t);
    else if (r->state != R_DONE && r->state != R_FAIL) resp_fail(r, "closed");
    return r->state;
}

// ---------------------------------------------------------------------------------------------
// the client side of one request

typedef struct lt_result {
    int ok;               // 1: a complete 2xx answer
    int status;           // the HTTP status; 0 when none came
    char key[24];         // !ok: the status ("503") or the failure ("refused", "timeout", ...)
    char message[96];     // !ok: the server's error text, if any
    int prompt_tokens, max_new, tokens, mismatch;
    double ttft, tpot, e2e, delay;   // seconds; ttft, tpot < 0: none
    double t_done;        // when it ended (monotonic clock)
} lt_result;

// Waits for fd to be ready for events until the deadline: 1 ready, 0 timed out, -1 an error.
static int lt_wait(int fd, short events, double deadline) {
    for (;;) {
        struct pollfd pf;
        double left = deadline - lt_now();
        int ms, r;
        if (left <= 0) return 0;
        ms = left > 1e6 ? 1000000000 : (int)ceil(left * 1000.0);
        pf.fd = fd;
        pf.events = events;
        pf.revents = 0;
        r = poll(&pf, 1, ms);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -1;
    }
}

// A connected, non-blocking socket to the server, or -1 with the reason in *why.
static int lt_connect(const lt_config *c, double deadline, const char **why) {
    int fd = socket(c->addr.ss_family, SOCK_STREAM, 0), one = 1, err = 0, fl;
    if (fd < 0) {
        *why = "socket_error";
        return -1;
    }
    fl = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)&c->addr, c->addrlen) < 0) {
        if (errno != EINPROGRESS && errno != EINTR) {
            err = errno;
        } else {
            int w = lt_wait(fd, POLLOUT, deadline);
            socklen_t el = sizeof err;
            if (w == 0) {
                close(fd);
                *why = "timeout";
                return -1;
            }
            if (w < 0) err = errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
        }
    }
    if (err) {
        close(fd);
        *why = err == ECONNREFUSED ? "refused" : err == ETIMEDOUT ? "timeout"
             : err == ENETUNREACH || err == EHOSTUNREACH ? "unreachable" : "connect_error";
        return -1;
    }
    return fd;
}

// sends all of p; NULL, or the reason it could not
static const char *lt_send_all(int fd, const char *p, size_t n, double deadline) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k, n -= (size_t)k;
        } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = lt_wait(fd, POLLOUT, deadline);
            if (w == 0) return "timeout";
            if (w < 0) return "send_error";
        } else if (k < 0 && errno == EINTR) {
            continue;
        } else {
            return k < 0 && (errno == ECONNRESET || errno == EPIPE) ? "reset" : "send_error";
        }
    }
    return NULL;
}

// reads the response into r until it is complete; NULL, or the reason it is not
static const char *lt_receive(int fd, lt_resp *r, double deadline) {
    char buf[65536];
    while (r->state != R_DONE) {
        ssize_t k;
        int w = lt_wait(fd, POLLIN, deadline);
        if (w == 0) return "timeout";
        if (w < 0) return "recv_error";
        k = recv(fd, buf, sizeof buf, 0);
        if (k > 0) {
            if (resp_feed(r, buf, (size_t)k, lt_now()) == R_FAIL) return r->fail;
        } else if (k == 0) {
            if (resp_eof(r, lt_now()) == R_FAIL) return r->fail;
        } else if (errno == ECONNRESET) {
            return "reset";
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return "recv_error";
        }
    }
    return NULL;
}

// The result of a request started at t0 and ended at t_done: the response r, or the transport's
// failure why (NULL: none). res arrives with prompt_tokens and max_new set.
static void lt_finish(const lt_resp *r, const char *why, double t0, double t_done, lt_result *res) {
    res->t_done = t_done;
    res->e2e = t_done - t0;
    res->status = r->status;
    res->ok = res->tokens = res->mismatch = 0;
    res->ttft = res->tpot = -1;
    if (why) snprintf(res->key, sizeof res->key, "%s", why);
    else if (r->status < 200 || r->status > 299) snprintf(res->key, sizeof res->key, "%d", r->status);
    else if (r->bad_events) snprintf(res->key, sizeof res->key, "bad_response");
    else if (r->stream_error) snprintf(res->key, sizeof res->key, "stream_error");
    else if (!r->final_seen) snprintf(res->key, sizeof res->key, "incomplete");
    else res->ok = 1;
    snprintf(res->message, sizeof res->message, "%s", r->message);
    if (!res->ok) return;
    res->tokens = r->tokens;
    if (!r->sse) res->ttft = res->e2e;   // the first token comes with the last
    else if (r->tokens > 0) res->ttft = r->t_first - t0;
    if (r->sse && r->tokens >= 2) res->tpot = (r->t_last - r->t_first) / (r->tokens - 1);
    res->mismatch = r->sse && r->details_tokens >= 0 && r->details_tokens != r->tokens;
}

// Sends one request, started at t0, on the client's connection *fd (-1: none; a new one is made,
// and kept when the server allows it) and fills res. A kept-alive connection that the server has
// closed meanwhile (nothing received on it) is replaced by a new one, once.
static void lt_one(const lt_config *c, int *fd, const lt_request *rq, double t0, lt_result *res) {
    double deadline = t0 + c->timeout;
    int attempt;
    memset(res, 0, sizeof *res);
    res->prompt_tokens = rq->prompt_tokens;
    res->max_new = rq->max_new;
    res->ttft = res->tpot = -1;
    for (attempt = 0; attempt < 2; attempt++) {
        int reused = *fd >= 0;
        const char *why = NULL;
        lt_resp r;
        if (!reused && (*fd = lt_connect(c, deadline, &why)) < 0) {
            res->t_done = lt_now();
            res->e2e = res->t_done - t0;
            snprintf(res->key, sizeof res->key, "%s", why);
            return;
        }
        resp_init(&r, c->stream);
        why = lt_send_all(*fd, rq->text.p, rq->text.n, deadline);
        if (!why) why = lt_receive(*fd, &r, deadline);
        if (why && reused && r.received == 0 && strcmp(why, "timeout") != 0 && attempt == 0) {
            close(*fd);
            *fd = -1;
            resp_free(&r);
            continue;
        }
        if (why || r.conn_close || r.extra || !c->keep_alive) {
            close(*fd);
            *fd = -1;
        }
        lt_finish(&r, why, t0, lt_now(), res);
        resp_free(&r);
        return;
    }
}

// ---------------------------------------------------------------------------------------------
// the run: client threads taking requests from a shared schedule

typedef struct lt_outcome {
    lt_result *res;
    size_t n, cap;
    double t_start, t_end;   // the window: the phase's start, the end of its last request
    int oom;
} lt_outcome;

typedef struct lt_shared {
    const lt_config *c;
    int phase, poisson;
    pthread_mutex_t mu;
    long long next, limit;   // the next request's number; limit < 0: none
    double t_stop;           // no request starts (or, Poisson, arrives) at or after it; 0: none
    double next_arrival;     // Poisson: the last arrival handed out
    uint64_t arrival_rng;
    lt_outcome *out;
} lt_shared;

// one client: requests until the schedule ends
static void *lt_client(void *arg) {
    lt_shared *s = (lt_shared *)arg;
    const lt_config *c = s->c;
    lt_request rq;
    int fd = -1;
    memset(&rq, 0, sizeof rq);
    for (;;) {
        long long k;
        double when = 0, t0;
        lt_result res;
        pthread_mutex_lock(&s->mu);
        if (s->limit >= 0 && s->next >= s->limit) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        if (s->poisson) when = (s->next_arrival += lt_arrival_gap(&s->arrival_rng, c->rate));
        if (s->t_stop > 0 && (s->poisson ? when : lt_now()) >= s->t_stop) {
            s->limit = s->next;   // the window is over: every client stops
            pthread_mutex_unlock(&s->mu);
            break;
        }
        k = s->next++;
        pthread_mutex_unlock(&s->mu);
        if (!lt_build_request(c, s->phase, k, &rq)) {
            pthread_mutex_lock(&s->mu);
            s->out->oom = 1;
            s->limit = s->next;
            pthread_mutex_unlock(&s->mu);
            break;
        }
        if (s->poisson) lt_sleep_until(when);
        t0 = lt_now();
        lt_one(c, &fd, &rq, t0, &res);
        res.delay = s->poisson ? t0 - when : 0;
        pthread_mutex_lock(&s->mu);
        if (s->out->n == s->out->cap) {
            size_t nc = s->out->cap ? 2 * s->out->cap : 256;
            lt_result *nr = (lt_result *)realloc(s->out->res, nc * sizeof *nr);
            if (nr) s->out->res = nr, s->out->cap = nc;
        }
        if (s->out->n < s->out->cap) s->out->res[s->out->n++] = res;
        else s->out->oom = 1;
        if (res.t_done > s->out->t_end) s->out->t_end = res.t_done;
        pthread_mutex_unlock(&s->mu);
        // a server that refuses connections answers at once: pause, rather than spin through it
        if (!res.ok && (!strcmp(res.key, "refused") || !strcmp(res.key, "unreachable") || !strcmp(res.key, "connect_error")))
            lt_sleep(0.02);
    }
    if (fd >= 0) close(fd);
    free(rq.text.p);
    return NULL;
}

// Runs one phase (0: warmup, 1: measured) of `limit` requests (< 0: until `duration` seconds
// pass) with `clients` threads; the results into out (which starts empty). 1, 0 when no thread started.
static int lt_phase(const lt_config *c, int phase, long long limit, double duration, int poisson, int clients,
                    lt_outcome *out) {
    lt_shared s;
    pthread_t *th = (pthread_t *)calloc((size_t)clients, sizeof *th);
    pthread_attr_t attr;
    int k, started = 0;
    memset(out, 0, sizeof *out);
    if (!th) return 0;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.phase = phase;
    s.poisson = poisson;
    s.limit = limit;
    s.out = out;
    s.arrival_rng = lt_arrival_rng(c->seed);
    pthread_mutex_init(&s.mu, NULL);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    out->t_start = out->t_end = s.next_arrival = lt_now();
    if (duration > 0) s.t_stop = out->t_start + duration;
    for (k = 0; k < clients; k++)
        if (pthread_create(&th[started], &attr, lt_client, &s) == 0) started++;
    for (k = 0; k < started; k++) pthread_join(th[k], NULL);
    pthread_attr_destroy(&attr);
    pthread_mutex_destroy(&s.mu);
    free(th);
    return started > 0;
}

// ---------------------------------------------------------------------------------------------
// the report

typedef struct lt_stat {
    size_t n;
    double mean, p50, p90, p99, max, min;
} lt_stat;

typedef struct lt_errkey {
    char key[24];
    long long count;
    char message[96];   // the first one's
} lt_errkey;

#define LT_MAX_KEYS 24
typedef struct lt_summary {
    long long requests, ok, errors, gen_tokens, prompt_tokens, stopped_early, mismatch;
    lt_errkey err[LT_MAX_KEYS];
    int n_err;
    double wall, tok_s, req_s;
    lt_stat ttft, tpot, e2e, delay;
} lt_summary;

static int lt_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// The p-th percentile (p in 1..100) of n sorted samples, nearest rank: the sample of rank
// ceil(p / 100 * n) (counted from 1).
static double lt_rank(const double *sorted, size_t n, int p) {
    size_t rank = ((size_t)p * n + 99) / 100;
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

// the statistics of n samples (sorted here, in place)
static lt_stat lt_stats(double *x, size_t n) {
    lt_stat s;
    size_t k;
    double sum = 0;
    memset(&s, 0, sizeof s);
    s.n = n;
    if (!n) return s;
    qsort(x, n, sizeof *x, lt_cmp_double);
    for (k = 0; k < n; k++) sum += x[k];
    s.mean = sum / (double)n;
    s.min = x[0];
    s.max = x[n - 1];
    s.p50 = lt_rank(x, n, 50);
    s.p90 = lt_rank(x, n, 90);
    s.p99 = lt_rank(x, n, 99);
    return s;
}

// counts and statistics of a measured phase
static lt_summary lt_summarize(const lt_outcome *o) {
    lt_summary s;
    size_t k, nt = 0, np = 0, ne = 0, nd = 0;
    double *tt = (double *)malloc((o->n + 1) * sizeof(double)), *tp = (double *)malloc((o->n + 1) * sizeof(double));
    double *ee = (double *)malloc((o->n + 1) * sizeof(double)), *dd = (double *)malloc((o->n + 1) * sizeof(double));
    memset(&s, 0, sizeof s);
    for (k = 0; k < o->n; k++) {
        const lt_result *r = &o->res[k];
        s.requests++;
        s.prompt_tokens += r->prompt_tokens;
        if (dd) dd[nd++] = r->delay;
        if (!r->ok) {
            int e;
            s.errors++;
            for (e = 0; e < s.n_err && strcmp(s.err[e].key, r->key) != 0; e++) {}
            if (e == s.n_err && s.n_err == LT_MAX_KEYS) e = LT_MAX_KEYS - 1;   // "other": the last slot
            if (e == s.n_err) {
                s.n_err++;
                snprintf(s.err[e].key, sizeof s.err[e].key, "%s", r->key);
                snprintf(s.err[e].message, sizeof s.err[e].message, "%s", r->message);
            }
            s.err[e].count++;
            continue;
        }
        s.ok++;
        s.gen_tokens += r->tokens;
        s.stopped_early += r->tokens < r->max_new;
        s.mismatch += r->mismatch;
        if (tt && r->ttft >= 0) tt[nt++] = r->ttft;
        if (tp && r->tpot >= 0) tp[np++] = r->tpot;
        if (ee) ee[ne++] = r->e2e;
    }
    s.wall = o->t_end - o->t_start;
    s.tok_s = s.wall > 0 ? (double)s.gen_tokens / s.wall : 0;
    s.req_s = s.wall > 0 ? (double)s.ok / s.wall : 0;
    if (tt) s.ttft = lt_stats(tt, nt);
    if (tp) s.tpot = lt_stats(tp, np);
    if (ee) s.e2e = lt_stats(ee, ne);
    if (dd) s.delay = lt_stats(dd, nd);
    free(tt), free(tp), free(ee), free(dd);
    return s;
}

// one row of the latency table (milliseconds)
static void lt_table_row(FILE *f, const char *name, const lt_stat *st) {
    if (!st->n) {
        fprintf(f, "  %-22s %10s\n", name, "-");
        return;
    }
    fprintf(f, "  %-22s %10.2f %10.2f %10.2f %10.2f %10.2f\n", name, st->mean * 1e3, st->p50 * 1e3, st->p90 * 1e3,
            st->p99 * 1e3, st->max * 1e3);
}

static void lt_print_table(FILE *f, const lt_config *c, const lt_summary *s, const lt_outcome *warm) {
    int e;
    fprintf(f, "load_test: %s%s%s, %s, %d client%s, %s\n", c->url, c->url[strlen(c->url) - 1] == '/' ? "" : "/",
            c->stream ? "generate_stream" : "generate", c->poisson ? "Poisson arrivals" : "closed loop", c->clients,
            c->clients == 1 ? "" : "s", c->stream ? "streaming" : "not streaming");
    if (c->poisson) fprintf(f, "  rate                   %.3f requests/s\n", c->rate);
    if (warm && warm->n) {
        long long werr = 0;
        size_t k;
        for (k = 0; k < warm->n; k++) werr += !warm->res[k].ok;
        fprintf(f, "  warmup                 %zu requests (%lld errors), not counted\n", warm->n, werr);
    }
    fprintf(f, "  requests               %lld: %lld ok, %lld errors\n", s->requests, s->ok, s->errors);
    for (e = 0; e < s->n_err; e++)
        fprintf(f, "    %-20s %lld%s%s%s\n", s->err[e].key, s->err[e].count, s->err[e].message[0] ? " (" : "",
                s->err[e].message, s->err[e].message[0] ? ")" : "");
    fprintf(f, "  wall                   %.3f s\n", s->wall);
    fprintf(f, "  throughput             %.1f generated tokens/s, %.2f requests/s\n", s->tok_s, s->req_s);
    fprintf(f, "  tokens                 %lld generated (%.1f a request), %lld prompt\n", s->gen_tokens,
            s->ok ? (double)s->gen_tokens / (double)s->ok : 0.0, s->prompt_tokens);
    if (s->stopped_early) fprintf(f, "  stopped early          %lld requests ended before max_new_tokens\n", s->stopped_early);
    if (s->mismatch) fprintf(f, "  token count mismatch   %lld streams: token events != details.generated_tokens\n", s->mismatch);
    fprintf(f, "  %-22s %10s %10s %10s %10s %10s\n", "milliseconds", "mean", "p50", "p90", "p99", "max");
    lt_table_row(f, "time to first token", &s->ttft);
    lt_table_row(f, "per token", &s->tpot);
    lt_table_row(f, "end to end", &s->e2e);
    if (c->poisson) lt_table_row(f, "dispatch delay", &s->delay);
    fprintf(f, "  (percentiles: nearest rank)\n");
}

// a statistic as a JSON object in milliseconds; null values when there are no samples
static void lt_json_stat(FILE *f, const char *name, const lt_stat *st) {
    if (!st->n) {
        fprintf(f, ",\"%s\":{\"n\":0,\"mean\":null,\"p50\":null,\"p90\":null,\"p99\":null,\"max\":null}", name);
        return;
    }
    fprintf(f, ",\"%s\":{\"n\":%zu,\"mean\":%.3f,\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f}", name, st->n,
            st->mean * 1e3, st->p50 * 1e3, st->p90 * 1e3, st->p99 * 1e3, st->max * 1e3);
}

static void lt_print_json(FILE *f, const lt_config *c, const lt_summary *s, long long warmup) {
    int e;
    fputs("{\"url\":", f);
    cli_json_put(f, c->url, strlen(c->url));
    fprintf(f, ",\"endpoint\":\"%s\",\"arrival\":\"%s\",\"clients\":%d", c->stream ? "/generate_stream" : "/generate",
            c->poisson ? "poisson" : "closed", c->clients);
    if (c->poisson) fprintf(f, ",\"rate\":%.6g", c->rate);
    else fputs(",\"rate\":null", f);
    fprintf(f, ",\"warmup\":%lld,\"requests\":%lld,\"ok\":%lld,\"error_count\":%lld,\"errors\":{", warmup, s->requests,
            s->ok, s->errors);
    for (e = 0; e < s->n_err; e++) {
        if (e) fputc(',', f);
        cli_json_put(f, s->err[e].key, strlen(s->err[e].key));
        fprintf(f, ":%lld", s->err[e].count);
    }
    fprintf(f, "},\"wall_s\":%.6f,\"generated_tokens\":%lld,\"prompt_tokens\":%lld,\"tokens_per_s\":%.3f,"
            "\"requests_per_s\":%.4f,\"stopped_early\":%lld,\"token_count_mismatch\":%lld",
            s->wall, s->gen_tokens, s->prompt_tokens, s->tok_s, s->req_s, s->stopped_early, s->mismatch);
    lt_json_stat(f, "ttft_ms", &s->ttft);
    lt_json_stat(f, "tpot_ms", &s->tpot);
    lt_json_stat(f, "e2e_ms", &s->e2e);
    if (c->poisson) lt_json_stat(f, "dispatch_delay_ms", &s->delay);
    fputs("}\n", f);
    fflush(f);
}

// Runs the warmup and the measured phase of c: their outcomes into warm and meas. 1, or 0 (a
// message printed) when the run could not be made.
static int lt_run(const lt_config *c, lt_outcome *warm, lt_outcome *meas) {
    int wc = c->warmup < c->clients ? (int)c->warmup : c->clients;
    memset(warm, 0, sizeof *warm);
    if (c->warmup > 0 && !lt_phase(c, 0, c->warmup, 0, 0, wc, warm)) {
        fprintf(stderr, "load_test: cannot start the client threads\n");
        return 0;
    }
    if (!lt_phase(c, 1, c->requests, c->duration, c->poisson, c->clients, meas)) {
        fprintf(stderr, "load_test: cannot start the client threads\n");
        return 0;
    }
    if (warm->oom || meas->oom) {
        fprintf(stderr, "load_test: out of memory\n");
        return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// --self-test: the parsers on responses cut at every byte, and the whole generator against an
// in-process fake TGI server

static int st_checks, st_failed;

// one check: counted; a failure printed with its line
static int st_check(int ok, const char *what, int line) {
    st_checks++;
    if (!ok) {
        st_failed++;
        fprintf(stderr, "load_test: self-test: FAILED (load_test.c:%d): %s\n", line, what);
    }
    return ok;
}
#define ST_CHECK(cond) st_check((cond) ? 1 : 0, #cond, __LINE__)

enum { FAKE_OK, FAKE_BUSY, FAKE_STALL, FAKE_DROP };

// The fake server: TGI's /generate and /generate_stream with fixed delays. It answers a request
// for M new tokens with M tokens (ids 100, 101, ...), the first after first_delay seconds and each
// next one token_delay later (/generate: the whole answer after the same time). It checks and
// counts what it receives.
typedef struct fake {
    int lfd, port, stop, mode, chunked;   // chunked: stream with chunked framing, else until close
    int hang_up;                          // close each connection after one answer, without saying so
    double first_delay, token_delay;
    long vocab;                           // prompt ids are checked against [3, vocab)
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int active;                           // connection threads running
    long long requests, prompt_tokens, tokens_sent, bad_requests;
    int inflight, max_inflight;
    double arrivals[64];                  // when the first requests came (monotonic clock)
} fake;

typedef struct fake_conn {
    fake *f;
    int fd;
} fake_conn;

// sends all of p (blocking, with the socket's send timeout); 0 ok, -1 the client is gone
static int fake_send(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

// Checks a request body: input_ids (each in [3, vocab) but the last, 1), parameters.max_new_tokens.
// Returns max_new_tokens (20 when absent), -1 when the body is not a valid request; *n_ids the
// prompt's length.
static int fake_parse_body(const fake *f, const char *b, size_t n, long long *n_ids) {
    const char *v, *ve, *p;
    int max_new = 20;
    *n_ids = 0;
    if (!lt_json_get(b, b + n, "input_ids", &v, &ve) || *v != '[') return -1;
    for (p = v + 1; p < ve && *p != ']';) {
        char *end;
        long id = strtol(p, &end, 10);
        if (end == p) return -1;
        p = end;
        ++*n_ids;
        if (*p == ',') {
            if (id < 3 || id >= f->vocab) return -1;
            p++;
        } else if (id != 1) {
            return -1;   // the last id is EOS
        }
    }
    if (lt_json_get(b, b + n, "parameters", &v, &ve) && *v == '{') {
        const char *m, *me;
        if (lt_json_get(v, ve, "max_new_tokens", &m, &me)) max_new = atoi(m);
        if (!lt_json_get(v, ve, "details", &m, &me) || *m != 't') return -1;
    }
    return max_new >= 1 ? max_new : -1;
}

// one token event of the stream; the last one carries the generated text and the details
static void fake_event(sbuf *ev, int i, int m) {
    ev->n = 0;
    sb_printf(ev, "data: {\"token\": {\"id\": %d, \"text\": \"t%d\", \"logprob\": -0.5, \"special\": false}, ", 100 + i, i);
    if (i + 1 < m) sb_printf(ev, "\"generated_text\": null, \"details\": null}\n\n");
    else sb_printf(ev, "\"generated_text\": \"x\\u00e9\", \"details\": {\"finish_reason\": \"length\", "
                       "\"generated_tokens\": %d, \"seed\": null}}\n\n", m);
}

// Answers one request; 0 to keep the connection, -1 to close it.
static int fake_answer(fake *f, int fd, int stream, int max_new, int close_after) {
    char head[256];
    sbuf ev = {0}, ch = {0};
    int i, failed = 0, rc = close_after ? -1 : 0, m = f->mode == FAKE_DROP && max_new > 3 ? 3 : max_new;
    if (f->mode == FAKE_BUSY) {
        static const char body[] = "{\"error\":\"queue full\",\"error_type\":\"overloaded\"}";
        snprintf(head, sizeof head, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                 "Retry-After: 1\r\nContent-Length: %zu\r\n\r\n", sizeof body - 1);
        if (fake_send(fd, head, strlen(head)) || fake_send(fd, body, sizeof body - 1)) return -1;
        return rc;
    }
    if (f->mode == FAKE_STALL) {   // never answers: waits for the client to give up
        char b[256];
        while (recv(fd, b, sizeof b, 0) > 0) {}
        return -1;
    }
    if (!stream) {
        sbuf body = {0};
        lt_sleep(f->first_delay + (max_new - 1) * f->token_delay);
        sb_printf(&body, "{\"generated_text\": \"x\", \"details\": {\"finish_reason\": \"length\", "
                         "\"generated_tokens\": %d, \"seed\": null, \"prefill\": [], \"tokens\": []}}", max_new);
        snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n",
                 body.n, close_after ? "Connection: close\r\n" : "");
        if (fake_send(fd, head, strlen(head)) || fake_send(fd, body.p, body.n)) rc = -1;
        else {
            pthread_mutex_lock(&f->mu);
            f->tokens_sent += max_new;
            pthread_mutex_unlock(&f->mu);
        }
        free(body.p);
        return rc;
    }
    snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n%s\r\n",
             f->chunked ? "Transfer-Encoding: chunked\r\n" : "Connection: close\r\n");
    if (fake_send(fd, head, strlen(head))) return -1;
    for (i = 0; i < m && !failed; i++) {
        size_t half;
        lt_sleep(i == 0 ? f->first_delay : f->token_delay);
        fake_event(&ev, i, max_new);
        ch.n = 0;
        if (f->chunked) sb_printf(&ch, "%zx;ext=1\r\n", ev.n);
        sb_add(&ch, ev.p, ev.n);
        if (f->chunked) sb_add(&ch, "\r\n", 2);
        half = ch.n / 2;   // in two writes: the event arrives split
        failed = fake_send(fd, ch.p, half) || fake_send(fd, ch.p + half, ch.n - half);
    }
    // the end: the last chunk, or (FAKE_DROP) the connection cut after 3 tokens
    if (!failed && f->mode != FAKE_DROP && f->chunked) failed = fake_send(fd, "0\r\n\r\n", 5) != 0;
    if (!failed && f->mode != FAKE_DROP) {
        pthread_mutex_lock(&f->mu);
        f->tokens_sent += m;
        pthread_mutex_unlock(&f->mu);
    }
    free(ev.p);
    free(ch.p);
    return failed || f->mode == FAKE_DROP || !f->chunked || close_after ? -1 : 0;
}

// one connection: requests (head, Content-Length body) answered until either side closes
static void *fake_conn_main(void *arg) {
    fake_conn *fc = (fake_conn *)arg;
    fake *f = fc->f;
    int fd = fc->fd;
    sbuf in = {0};
    free(fc);
    for (;;) {
        char buf[16384], *he;
        ssize_t k;
        size_t hl;
        long long clen = 0, n_ids = 0;
        int stream, close_after, max_new, rc;
        const char *cl;
        while (!(he = in.p ? strstr(in.p, "\r\n\r\n") : NULL)) {   // the head
            if ((k = recv(fd, buf, sizeof buf, 0)) <= 0) goto done;
            sb_add(&in, buf, (size_t)k);
        }
        hl = (size_t)(he - in.p) + 4;
        if ((cl = strstr(in.p, "Content-Length: ")) && cl < he) clen = atoll(cl + 16);
        while (in.n < hl + (size_t)clen) {   // the body
            if ((k = recv(fd, buf, sizeof buf, 0)) <= 0) goto done;
            sb_add(&in, buf, (size_t)k);
        }
        stream = strncmp(in.p, "POST /generate_stream ", 22) == 0;
        close_after = lt_icontains(in.p, hl, "connection: close");
        max_new = fake_parse_body(f, in.p + hl, (size_t)clen, &n_ids);
        pthread_mutex_lock(&f->mu);
        if (f->requests < 64) f->arrivals[f->requests] = lt_now();
        f->requests++;
        f->prompt_tokens += n_ids;
        if (max_new < 0 || (!stream && strncmp(in.p, "POST /generate ", 15) != 0)) f->bad_requests++;
        if (++f->inflight > f->max_inflight) f->max_inflight = f->inflight;
        pthread_mutex_unlock(&f->mu);
        rc = max_new < 0 ? -1 : fake_answer(f, fd, stream, max_new, close_after);
        pthread_mutex_lock(&f->mu);
        f->inflight--;
        pthread_mutex_unlock(&f->mu);
        if (rc < 0 || f->hang_up) break;
        memmove(in.p, in.p + hl + clen, in.n - hl - (size_t)clen);   // what follows this request
        in.n -= hl + (size_t)clen;
        in.p[in.n] = 0;
    }
done:
    close(fd);
    free(in.p);
    pthread_mutex_lock(&f->mu);
    f->active--;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

// the accept loop: a thread for each connection
static void *fake_accept_main(void *arg) {
    fake *f = (fake *)arg;
    for (;;) {
        struct pollfd pf;
        int stop, fd, one = 1;
        struct timeval tv;
        fake_conn *fc;
        pthread_t th;
        pthread_mutex_lock(&f->mu);
        stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) break;
        pf.fd = f->lfd;
        pf.events = POLLIN;
        if (poll(&pf, 1, 20) <= 0) continue;
        if ((fd = accept(f->lfd, NULL, NULL)) < 0) continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        tv.tv_sec = 5;   // a safety net: the fake never waits on a client for long
        tv.tv_usec = 0;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (!(fc = (fake_conn *)malloc(sizeof *fc))) {
            close(fd);
            continue;
        }
        fc->f = f;
        fc->fd = fd;
        pthread_mutex_lock(&f->mu);
        f->active++;
        pthread_mutex_unlock(&f->mu);
        if (pthread_create(&th, NULL, fake_conn_main, fc) != 0) {
            close(fd);
            free(fc);
            pthread_mutex_lock(&f->mu);
            f->active--;
            pthread_mutex_unlock(&f->mu);
            continue;
        }
        pthread_detach(th);
    }
    return NULL;
}

// A listening socket on 127.0.0.1, an ephemeral port (*port); listening or only bound. -1 on failure.
static int fake_socket(int do_listen, int *port) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || (do_listen && listen(fd, 64) < 0) ||
        getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

// starts the fake server (its settings already in f); 1, 0 on failure
static int fake_start(fake *f) {
    f->stop = f->active = 0;
    f->requests = f->prompt_tokens = f->tokens_sent = f->bad_requests = 0;
    f->inflight = f->max_inflight = 0;
    if ((f->lfd = fake_socket(1, &f->port)) < 0) return 0;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    if (pthread_create(&f->th, NULL, fake_accept_main, f) != 0) {
        close(f->lfd);
        return 0;
    }
    return 1;
}

// Stops the fake server: no more connections, and the open ones finished (a few seconds at most;
// past that the self-test cannot go on, and the process ends with status 1).
static void fake_stop(fake *f) {
    struct timespec until;
    int left;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->th, NULL);
    close(f->lfd);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 6;
    pthread_mutex_lock(&f->mu);
    while (f->active > 0)
        if (pthread_cond_timedwait(&f->cv, &f->mu, &until) != 0) break;
    left = f->active;
    pthread_mutex_unlock(&f->mu);
    if (left != 0) {
        fprintf(stderr, "load_test: self-test: FAILED: the fake server's connections did not end\n");
        exit(1);
    }
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

// the settings of a self-test run against 127.0.0.1:port
static void st_config(lt_config *c, int port) {
    char url[64], err[128];
    const char *why;
    memset(c, 0, sizeof *c);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
    if (lt_parse_url(c, url, err, sizeof err) <= 0) fprintf(stderr, "load_test: self-test: %s\n", err);
    c->clients = 2;
    c->requests = 4;
    c->vocab = 500;
    c->seed = 7;
    c->stream = c->ignore_eos = c->keep_alive = 1;
    c->timeout = 5;
    lt_dist_parse("uniform:4:40", &c->prompt, &why);
    lt_dist_parse("8", &c->new_tokens, &why);
}

// the count of an error key in a summary
static long long st_err(const lt_summary *s, const char *key) {
    int e;
    for (e = 0; e < s->n_err; e++)
        if (strcmp(s->err[e].key, key) == 0) return s->err[e].count;
    return 0;
}

// runs c; its summary into s; 1 when it ran
static int st_run(const lt_config *c, lt_summary *s, lt_outcome *meas) {
    lt_outcome warm;
    int ok = lt_run(c, &warm, meas);
    *s = lt_summarize(meas);
    free(warm.res);
    return ok;
}

// A canned streaming response: a chunked event stream of 3 tokens (CRLF or LF line ends inside the
// events, a comment, an extension on a chunk size, a trailer). *first_end: the offset of the byte
// that completes the first event, *last_end the last.
static void st_canned_stream(sbuf *b, size_t *first_end, size_t *last_end) {
    static const char *const ev[] = {
        ": a comment line\r\ndata: {\"token\": {\"id\": 5, \"text\": \"a\", \"special\": false}, "
        "\"generated_text\": null, \"details\": null}\r\n\r\n",
        "data:{\"token\":{\"id\":6,\"text\":\"b\\n\\\"\",\"special\":false},\"generated_text\":null,\"details\":null}\n\n",
        "event: message\ndata: {\"token\": {\"id\": 1, \"text\": \"</s>\", \"special\": true},\n"
        "data: \"generated_text\": \"ab\", \"details\": {\"finish_reason\": \"eos_token\", \"generated_tokens\": 3}}\n\n"};
    size_t k;
    b->n = 0;
    sb_printf(b, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\ntransfer-encoding: Chunked\r\n\r\n");
    for (k = 0; k < 3; k++) {
        sb_printf(b, k == 1 ? "%zX;name=value\r\n" : "%zx\r\n", strlen(ev[k]));
        sb_add(b, ev[k], strlen(ev[k]));
        if (k == 0) *first_end = b->n - 1;
        if (k == 2) *last_end = b->n - 1;
        sb_add(b, "\r\n", 2);
    }
    sb_printf(b, "0\r\nX-Trailer: 1\r\n\r\n");
}

// feeds text to a fresh parser in pieces: cut at `cut` (0: whole), or one byte at a time when
// bytewise; each piece's time is the offset of its last byte. The parser's state after it.
static int st_feed(lt_resp *r, int sse, const char *p, size_t n, size_t cut, int bytewise) {
    size_t k;
    resp_init(r, sse);
    if (bytewise) {
        for (k = 0; k < n && r->state != R_FAIL; k++) resp_feed(r, p + k, 1, (double)k);
    } else if (cut) {
        resp_feed(r, p, cut, (double)(cut - 1));
        if (r->state != R_FAIL) resp_feed(r, p + cut, n - cut, (double)(n - 1));
    } else {
        resp_feed(r, p, n, (double)(n - 1));
    }
    return r->state;
}

// the parsers: the same answer however the bytes are cut
static void st_parsers(void) {
    sbuf b = {0};
    size_t first_end = 0, last_end = 0, cut, n;
    lt_resp r;
    int all = 1;
    static const char json_body[] = "[{\"generated_text\": \"hi\", \"details\": {\"finish_reason\": \"length\", "
                                    "\"generated_tokens\": 4, \"tokens\": [{},{},{},{}]}}]";
    static const char json_body2[] = "{\"generated_text\": \"hi\", \"details\": {\"tokens\": [{\"id\": 3}, {\"id\": 4}]}}";
    static const char busy_body[] = "{\"error\": \"queue full\", \"error_type\": \"overloaded\"}";
    sbuf json_resp = {0}, busy = {0};
    static const char sse10[] = "HTTP/1.0 200 OK\nContent-Type: text/event-stream\n\n"
                                "data: {\"token\": {\"id\": 7, \"text\": \"x\", \"special\": false}}\n\n"
                                "data: {\"token\": {\"id\": 8, \"text\": \"y\", \"special\": false}, \"generated_text\": \"xy\"}\n";
    st_canned_stream(&b, &first_end, &last_end);
    for (cut = 0; cut < b.n; cut++) {   // every cut into two reads, then one byte a read
        int st = st_feed(&r, 1, b.p, b.n, cut, 0);
        all &= st == R_DONE && r.tokens == 3 && r.final_seen && r.details_tokens == 3 && !r.conn_close &&
               !strcmp(r.finish, "eos_token") && !r.bad_events && r.status == 200 &&
               r.t_first == (cut == 0 || cut > first_end ? (double)(cut == 0 ? b.n - 1 : cut - 1) : (double)(b.n - 1));
        resp_free(&r);
    }
    ST_CHECK(all);
    ST_CHECK(st_feed(&r, 1, b.p, b.n, 0, 1) == R_DONE && r.tokens == 3 && r.t_first == (double)first_end &&
             r.t_last == (double)last_end && !r.extra);
    {   // the request's figures from it: started at -10, ended at n + 5
        lt_result res;
        memset(&res, 0, sizeof res);
        lt_finish(&r, NULL, -10, (double)b.n + 5, &res);
        ST_CHECK(res.ok && res.tokens == 3 && res.ttft == (double)first_end + 10 &&
                 res.tpot == (double)(last_end - first_end) / 2 && res.e2e == (double)b.n + 15 && !res.mismatch);
        r.details_tokens = 4;
        lt_finish(&r, NULL, -10, (double)b.n + 5, &res);
        ST_CHECK(res.ok && res.mismatch);
        lt_finish(&r, "timeout", 0, 7, &res);
        ST_CHECK(!res.ok && !strcmp(res.key, "timeout") && res.e2e == 7 && res.ttft < 0 && res.tpot < 0);
        r.final_seen = 0;
        lt_finish(&r, NULL, 0, 7, &res);
        ST_CHECK(!res.ok && !strcmp(res.key, "incomplete"));
    }
    resp_free(&r);
    sb_add(&b, "H", 1);   // a byte past the response: the connection is not reused
    ST_CHECK(st_feed(&r, 1, b.p, b.n, 0, 0) == R_DONE && r.extra);
    resp_free(&r);
    ST_CHECK(st_feed(&r, 1, b.p, b.n - 30, 0, 0) != R_DONE && resp_eof(&r, 0) == R_FAIL && !strcmp(r.fail, "closed"));
    resp_free(&r);
    sb_printf(&json_resp, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
              strlen(json_body), json_body);
    n = json_resp.n;
    for (cut = 0, all = 1; cut < n; cut++) {
        all &= st_feed(&r, 0, json_resp.p, n, cut, 0) == R_DONE && r.tokens == 4 && r.final_seen && !r.bad_events &&
               !strcmp(r.finish, "length") && !r.extra;
        resp_free(&r);
    }
    ST_CHECK(all);
    json_resp.n = 0;   // no generated_tokens: the token list counts
    sb_printf(&json_resp, "HTTP/1.1 200 OK\r\ncontent-length:%zu\r\n\r\n%s", strlen(json_body2), json_body2);
    ST_CHECK(st_feed(&r, 0, json_resp.p, json_resp.n, 0, 1) == R_DONE && r.tokens == 2 && r.final_seen);
    resp_free(&r);
    sb_printf(&busy, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
              "Content-Length: %zu\r\n\r\n%s", strlen(busy_body), busy_body);
    ST_CHECK(st_feed(&r, 1, busy.p, busy.n, 0, 1) == R_DONE && r.status == 503 && !r.sse &&
             !strcmp(r.message, "queue full"));
    resp_free(&r);
    {   // HTTP/1.0 closes unless kept alive; HTTP/1.1 keeps unless closed
        static const char *const heads[] = {"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
                                            "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                                            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                                            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"};
        for (n = 0; n < 4; n++) {
            ST_CHECK(st_feed(&r, 0, heads[n], strlen(heads[n]), 0, 0) == R_DONE && r.conn_close == (n == 0 || n == 2));
            resp_free(&r);
        }
    }
    free(json_resp.p);
    free(busy.p);
    ST_CHECK(st_feed(&r, 1, sse10, strlen(sse10), 0, 1) == R_CLOSE && r.conn_close && r.tokens == 1 &&
             resp_eof(&r, 1000) == R_DONE && r.tokens == 2 && r.final_seen && r.t_last == 1000);
    resp_free(&r);
    {
        static const char bad_chunk[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ssh[] = "SSH-2.0-OpenSSH\r\n\r\n";
        ST_CHECK(st_feed(&r, 1, bad_chunk, strlen(bad_chunk), 0, 0) == R_FAIL);
        resp_free(&r);
        ST_CHECK(st_feed(&r, 0, ssh, strlen(ssh), 0, 0) == R_FAIL);
    }
    resp_free(&r);
    free(b.p);
}

// percentiles by nearest rank, and the length distributions
static void st_stats(void) {
    double x[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, one = 42, sum = 0, sum2 = 0;
    lt_stat s = lt_stats(x, 10);
    lt_dist d;
    const char *why;
    uint64_t rng = 1;
    int k, lo = 1 << 30, hi = 0;
    ST_CHECK(s.p50 == 5 && s.p90 == 9 && s.p99 == 10 && s.max == 10 && s.min == 1 && s.mean == 5.5);
    s = lt_stats(&one, 1);
    ST_CHECK(s.p50 == 42 && s.p99 == 42 && s.mean == 42);
    ST_CHECK(lt_dist_parse("uniform:3:5", &d, &why));
    for (k = 0; k < 3000; k++) {
        int v = lt_dist_draw(&d, &rng);
        lo = v < lo ? v : lo, hi = v > hi ? v : hi;
    }
    ST_CHECK(lo == 3 && hi == 5);
    ST_CHECK(lt_dist_parse("normal:100:10", &d, &why));
    for (k = 0; k < 4000; k++) {
        double v = lt_dist_draw(&d, &rng);
        sum += v, sum2 += v * v;
    }
    ST_CHECK(fabs(sum / 4000 - 100) < 1.0 && fabs(sqrt(sum2 / 4000 - (sum / 4000) * (sum / 4000)) - 10) < 1.0);
    ST_CHECK(lt_dist_parse("normal:-50:1", &d, &why) && lt_dist_draw(&d, &rng) == 1);   // clamped to 1
    ST_CHECK(lt_dist_parse("exp:20", &d, &why));
    for (k = 0, sum = 0; k < 4000; k++) sum += lt_dist_draw(&d, &rng);
    ST_CHECK(fabs(sum / 4000 - 20) < 1.5);
    ST_CHECK(!lt_dist_parse("uniform:5:3", &d, &why) && !lt_dist_parse("0", &d, &why) &&
             !lt_dist_parse("exp:0", &d, &why) && !lt_dist_parse("gauss:1:2", &d, &why) && !lt_dist_parse("12x", &d, &why));
}

// the generator against the fake server; returns 0 when the fake could not start
static int st_end_to_end(void) {
    static fake f;   // static: its connection threads never outlive it
    lt_config c;
    lt_summary s;
    lt_outcome o;
    double t, last_arrival, when[8];
    uint64_t arng;
    int k, refused_fd, refused_port;
    const char *why;
    memset(&f, 0, sizeof f);
    f.vocab = 500;

    // 1. streaming, closed loop, 4 clients, kept-alive chunked streams, 2 warmup requests
    f.mode = FAKE_OK, f.chunked = 1, f.first_delay = 0.020, f.token_delay = 0.004;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    c.clients = 4, c.requests = 16, c.warmup = 2;
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    ST_CHECK(s.requests == 16 && s.ok == 16 && s.errors == 0);
    ST_CHECK(s.gen_tokens == 16 * 8 && f.tokens_sent == 18 * 8 && f.requests == 18 && f.bad_requests == 0);
    ST_CHECK(s.prompt_tokens >= 16 * 4 && s.prompt_tokens <= 16 * 40);
    ST_CHECK(f.max_inflight == 4 && s.stopped_early == 0 && s.mismatch == 0);
    ST_CHECK(s.ttft.n == 16 && s.tpot.n == 16 && s.e2e.n == 16);
    ST_CHECK(s.ttft.min >= 0.020 && s.ttft.p50 <= s.ttft.p90 && s.ttft.p90 <= s.ttft.p99 && s.ttft.p99 <= s.ttft.max);
    ST_CHECK(s.ttft.mean >= s.ttft.min && s.ttft.mean <= s.ttft.max && s.ttft.max < 0.020 + 1.0);
    ST_CHECK(s.tpot.mean >= 0.5 * 0.004 && s.tpot.p50 <= s.tpot.p90 && s.tpot.p90 <= s.tpot.p99 &&
             s.tpot.p99 <= s.tpot.max && s.tpot.max < 0.004 + 0.25);
    for (k = 0; k < (int)o.n; k++)   // the last token came at ttft + 7 gaps, after the fake's delays
        ST_CHECK(o.res[k].ttft + 7 * o.res[k].tpot >= 0.020 + 7 * 0.004 - 1e-9);
    ST_CHECK(s.e2e.min >= 0.020 + 7 * 0.004 && s.e2e.p50 <= s.e2e.p99 && s.e2e.max < 0.048 + 1.5);
    ST_CHECK(s.wall >= 4 * (0.020 + 7 * 0.004) && s.tok_s > 0 && fabs(s.tok_s * s.wall - 128) < 1e-6);
    fprintf(stderr, "load_test: self-test: streaming, closed loop: 16 requests, 128 tokens, ttft p50 %.1f ms (fake 20), "
            "per token p50 %.2f ms (fake 4), e2e p50 %.1f ms (fake >= 48), wall %.3f s\n",
            s.ttft.p50 * 1e3, s.tpot.p50 * 1e3, s.e2e.p50 * 1e3, s.wall);
    free(o.res);
    {   // the same requests again: the same prompts (the fake counts the same prompt tokens)
        long long p1 = f.prompt_tokens;
        ST_CHECK(fake_start(&f));
        st_config(&c, f.port);   // the new fake's port, the same requests
        c.clients = 4, c.requests = 16, c.warmup = 2;
        st_run(&c, &s, &o);
        fake_stop(&f);
        ST_CHECK(f.prompt_tokens == p1 && s.ok == 16);
        free(o.res);
    }

    // 2. /generate, one connection a request, lengths drawn, Content-Length answers
    f.first_delay = 0.010, f.token_delay = 0.002;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    c.stream = 0, c.keep_alive = 0, c.requests = 6;
    lt_dist_parse("uniform:2:6", &c.new_tokens, &why);
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    ST_CHECK(s.ok == 6 && s.gen_tokens == f.tokens_sent && f.requests == 6 && f.bad_requests == 0 && f.prompt_tokens == s.prompt_tokens);
    ST_CHECK(s.gen_tokens >= 12 && s.gen_tokens <= 36 && s.tpot.n == 0 && s.ttft.n == 6);
    for (k = 0; k < (int)o.n; k++) ST_CHECK(o.res[k].ttft == o.res[k].e2e && o.res[k].e2e >= 0.010 + (o.res[k].max_new - 1) * 0.002);
    free(o.res);

    // 2b. kept-alive connections that the server closes after each answer: each request is sent
    // again, once, on a new connection (and reaches the server once)
    f.hang_up = 1;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    c.stream = 0, c.requests = 6;
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    f.hang_up = 0;
    ST_CHECK(s.ok == 6 && f.requests == 6 && f.bad_requests == 0);
    free(o.res);

    // 3. Poisson arrivals (rate 100/s, 8 requests, 2 clients), streams that end with the connection
    f.chunked = 0, f.first_delay = 0.002, f.token_delay = 0.001;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    c.poisson = 1, c.rate = 100, c.requests = 8, c.clients = 2;
    lt_dist_parse("4", &c.new_tokens, &why);
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    arng = lt_arrival_rng(c.seed);
    for (k = 0, last_arrival = 0; k < 8; k++) when[k] = (last_arrival += lt_arrival_gap(&arng, c.rate));
    ST_CHECK(s.ok == 8 && s.gen_tokens == 32 && f.requests == 8 && f.max_inflight <= 2 && s.delay.n == 8);
    ST_CHECK(s.wall >= last_arrival && s.delay.min >= 0);
    {   // no request reaches the server before its arrival time
        double got[8];
        for (k = 0; k < 8; k++) got[k] = f.arrivals[k] - o.t_start;
        qsort(got, 8, sizeof got[0], lt_cmp_double);
        for (k = 0; k < 8; k++) ST_CHECK(got[k] >= when[k]);
    }
    fprintf(stderr, "load_test: self-test: Poisson arrivals: 8 requests over %.3f s (last arrival at %.3f s), dispatch delay max %.2f ms\n",
            s.wall, last_arrival, s.delay.max * 1e3);
    free(o.res);

    // 3b. --duration 0.15 s, closed loop, 2 clients: requests start until the window ends; each
    // client's last one ends after it
    f.first_delay = 0.010, f.token_delay = 0.002;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    c.requests = -1, c.duration = 0.15;
    lt_dist_parse("4", &c.new_tokens, &why);
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    ST_CHECK(s.ok == s.requests && s.requests == f.requests && s.gen_tokens == 4 * s.requests);
    ST_CHECK(s.requests >= 2 && s.requests <= 2 * ((long long)(0.15 / (0.010 + 3 * 0.002)) + 1) && s.wall >= 0.15);
    free(o.res);

    // 4. a full queue: 503 with its error text
    f.mode = FAKE_BUSY;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    ST_CHECK(s.ok == 0 && s.errors == 4 && st_err(&s, "503") == 4 && s.n_err == 1 && !strcmp(s.err[0].message, "queue full"));
    free(o.res);

    // 5. a stream cut off after 3 of 8 tokens
    f.mode = FAKE_DROP, f.chunked = 1;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    ST_CHECK(st_run(&c, &s, &o));
    fake_stop(&f);
    ST_CHECK(s.ok == 0 && st_err(&s, "closed") == 4);
    free(o.res);

    // 6. a server that never answers: timeouts, on time
    f.mode = FAKE_STALL;
    if (!fake_start(&f)) return 0;
    st_config(&c, f.port);
    c.timeout = 0.25;
    t = lt_now();
    ST_CHECK(st_run(&c, &s, &o));
    t = lt_now() - t;
    fake_stop(&f);
    ST_CHECK(s.ok == 0 && st_err(&s, "timeout") == 4 && t >= 2 * 0.25 && t < 2.0);
    free(o.res);

    // 7. nothing listening: refused
    refused_fd = fake_socket(0, &refused_port);
    ST_CHECK(refused_fd >= 0);
    st_config(&c, refused_port);
    c.requests = 3;
    ST_CHECK(st_run(&c, &s, &o));
    if (refused_fd >= 0) close(refused_fd);
    ST_CHECK(s.ok == 0 && st_err(&s, "refused") == 3);
    fprintf(stderr, "load_test: self-test: errors: 503 x4 (\"queue full\"), cut stream x4 (closed), silent server x4 "
            "(timeout in %.2f s), no listener x3 (refused)\n", t);
    free(o.res);
    return 1;
}

static int self_test(void) {
    double t = lt_now();
    st_parsers();
    st_stats();
    if (!st_end_to_end()) {
        fprintf(stderr, "load_test: self-test: cannot start the fake server on 127.0.0.1\n");
        return 1;
    }
    fprintf(stderr, "load_test: self-test: %d checks, %d failed (%.2f s)\n", st_checks, st_failed, lt_now() - t);
    if (!st_failed) printf("load_test: self-test: ok\n");
    return st_failed ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// the command line

enum {
    O_URL = 1, O_CLIENTS, O_REQUESTS, O_DURATION, O_ARRIVAL, O_RATE, O_PROMPT, O_NEW, O_VOCAB, O_SEED, O_STREAM,
    O_IGNORE_EOS, O_SAMPLE, O_KEEP_ALIVE, O_WARMUP, O_TIMEOUT, O_JSON, O_SELF_TEST
};
static const cli_opt opts[] = {
    {.id = O_URL, .name = "url", .kind = CLI_STR, .meta = "URL", .def = "http://127.0.0.1:8080",
     .help = "the server: http://HOST[:PORT][/PATH]"},
    {.id = O_CLIENTS, .name = "clients", .kind = CLI_INT, .def = "4",
     .help = "clients: requests in flight at most", .lo = 1, .hi = 4096},
    {.id = O_REQUESTS, .name = "requests", .kind = CLI_INT, .meta = "M", .def = "100, or none with --duration",
     .help = "measured requests", .lo = 1, .hi = 1e12},
    {.id = O_DURATION, .name = "duration", .kind = CLI_NUM, .meta = "S",
     .help = "seconds in which measured requests start\n(with --requests: whichever ends first)", .lo = 0, .hi = 1e7,
     .lo_open = 1},
    {.id = O_ARRIVAL, .name = "arrival", .kind = CLI_CHOICE, .choices = "closed|poisson", .def = "closed",
     .help = "closed: each client sends on when its request ends;\npoisson: --rate R a second, at most --clients in flight"},
    {.id = O_RATE, .name = "rate", .kind = CLI_NUM, .meta = "R",
     .help = "Poisson arrivals: requests a second (implies\n--arrival poisson)", .lo = 0, .hi = 1e6, .lo_open = 1},
    {.id = O_PROMPT, .name = "prompt-tokens", .kind = CLI_STR, .meta = "DIST", .def = "128",
     .help = "prompt lengths in tokens, EOS included"},
    {.id = O_NEW, .name = "new-tokens", .alias = "max-new-tokens", .kind = CLI_STR, .meta = "DIST", .def = "64",
     .help = "max_new_tokens of each request"},
    {.id = O_VOCAB, .name = "vocab", .kind = CLI_INT, .meta = "V", .def = "32000",
     .help = "prompt ids are uniform in [3, V)", .lo = 4, .hi = 1e9},
    {.id = O_SEED, .name = "seed", .kind = CLI_INT, .def = "0",
     .help = "seeds the prompts, lengths, sampling seeds, arrivals", .lo = 0, .hi = 9e15},
    {.id = O_STREAM, .name = "stream", .kind = CLI_STR, .meta = "1|0", .def = "1",
     .help = "1: POST /generate_stream (server-sent events);\n0: POST /generate"},
    {.id = O_IGNORE_EOS, .name = "ignore-eos", .kind = CLI_STR, .meta = "1|0", .def = "1",
     .help = "parameters.ignore_eos: run to max_new_tokens"},
    {.id = O_SAMPLE, .name = "sample", .alias = "do-sample", .kind = CLI_STR, .meta = "1|0", .def = "0",
     .help = "parameters.do_sample (with a seed a request)"},
    {.id = O_KEEP_ALIVE, .name = "keep-alive", .kind = CLI_STR, .meta = "1|0", .def = "1",
     .help = "reuse each client's connection"},
    {.id = O_WARMUP, .name = "warmup", .kind = CLI_INT, .meta = "K", .def = "0",
     .help = "requests sent first, not counted", .lo = 0, .hi = 1e9},
    {.id = O_TIMEOUT, .name = "timeout", .kind = CLI_NUM, .meta = "S", .def = "300",
     .help = "seconds a request may take, connecting included", .lo = 0, .hi = 1e7, .lo_open = 1},
    {.id = O_JSON, .name = "json", .kind = CLI_FLAG, .help = "also the report as one JSON line on standard output"},
    {.id = O_SELF_TEST, .name = "self-test", .kind = CLI_FLAG,
     .help = "check the parsers and the generator against an\nin-process fake server, exit 0 when all pass"},
};

// a 1|0 option's value: 1 or 0, -1 (a message printed) when it is neither
static int lt_bool_opt(cli *c) {
    int b = cli_bool_word(c->val);
    if (b < 0) cli_bad(c, "expected 1 or 0");
    return b;
}

int main(int argc, char **argv) {
    lt_config c;
    cli cl;
    int o, self = 0, json = 0, arrival_given = 0, req_given = 0;
    char err[256];
    const char *url = "http://127.0.0.1:8080", *prompt = "128", *newt = "64", *why;
    lt_outcome warm, meas;
    lt_summary s;
    memset(&c, 0, sizeof c);
    c.clients = 4, c.requests = 100, c.vocab = 32000, c.stream = 1, c.ignore_eos = 1, c.keep_alive = 1, c.timeout = 300;
    cli_init(&cl, "load_test",
             "usage: load_test [--url URL] [--clients N] [--requests M | --duration S] [--arrival closed|poisson --rate R]\n"
             "                 [--prompt-tokens DIST] [--new-tokens DIST] [--json] [options]\n"
             "       load_test --self-test\n"
             "Load for a Text Generation Inference server (examples/serve): prompts of random token ids sent as\n"
             "input_ids; time to first token, per-token and end-to-end latency, throughput, errors.\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    cl.notes = "DIST: N (fixed), uniform:A:B (whole numbers, A..B), normal:MEAN:SD (rounded, at least 1), exp:MEAN\n"
               "(rounded, at least 1). Percentiles are nearest-rank: the p-th is the sample of rank ceil(p/100 * n)\n"
               "of the n sorted. Per-token latency (streaming only): (last token event - first) / (tokens - 1).\n"
               "The report goes to standard error; --json adds one JSON line on standard output (docs/load_test.md).\n"
               "Exit status: 0 when a request succeeded, 1 when none did, 2 on a usage error.\n";
    while ((o = cli_next(&cl)) != CLI_END) {
        int b = 0;
        if (o < 0) return cli_status(o);
        if (o == O_STREAM || o == O_IGNORE_EOS || o == O_SAMPLE || o == O_KEEP_ALIVE)
            if ((b = lt_bool_opt(&cl)) < 0) return 2;
        switch (o) {
        case O_URL: url = cl.val; break;
        case O_CLIENTS: c.clients = (int)cl.ival; break;
        case O_REQUESTS: c.requests = cl.ival, req_given = 1; break;
        case O_DURATION: c.duration = cl.dval; break;
        case O_ARRIVAL: c.poisson = (int)cl.ival, arrival_given = 1; break;
        case O_RATE: c.rate = cl.dval; break;
        case O_PROMPT: prompt = cl.val; break;
        case O_NEW: newt = cl.val; break;
        case O_VOCAB: c.vocab = (long)cl.ival; break;
        case O_SEED: c.seed = (unsigned long long)cl.ival; break;
        case O_STREAM: c.stream = b; break;
        case O_IGNORE_EOS: c.ignore_eos = b; break;
        case O_SAMPLE: c.sample = b; break;
        case O_KEEP_ALIVE: c.keep_alive = b; break;
        case O_WARMUP: c.warmup = cl.ival; break;
        case O_TIMEOUT: c.timeout = cl.dval; break;
        case O_JSON: json = (int)cl.ival; break;
        case O_SELF_TEST: self = (int)cl.ival; break;
        default: return cli_status(cli_fail(&cl, "'%s': no positional arguments (--help lists the options)", cl.val));
        }
    }
    signal(SIGPIPE, SIG_IGN);
    if (self) return self_test();
    if (c.rate > 0 && !arrival_given) c.poisson = 1;
    if (c.poisson && c.rate <= 0) return cli_status(cli_fail(&cl, "--arrival poisson needs --rate R"));
    if (!c.poisson && c.rate > 0) return cli_status(cli_fail(&cl, "--rate goes with --arrival poisson"));
    if (c.duration > 0 && !req_given) c.requests = -1;
    if (!lt_dist_parse(prompt, &c.prompt, &why)) return cli_status(cli_fail(&cl, "--prompt-tokens %s: %s", prompt, why));
    if (!lt_dist_parse(newt, &c.new_tokens, &why)) return cli_status(cli_fail(&cl, "--new-tokens %s: %s", newt, why));
    if ((o = lt_parse_url(&c, url, err, sizeof err)) <= 0) {
        fprintf(stderr, "load_test: --url %s: %s\n", url, err);
        return o == 0 ? 2 : 1;
    }
    if (!lt_run(&c, &warm, &meas)) return 1;
    s = lt_summarize(&meas);
    lt_print_table(stderr, &c, &s, &warm);
    if (json) lt_print_json(stdout, &c, &s, c.warmup);
    free(warm.res);
    free(meas.res);
    return s.ok > 0 ? 0 : 1;
}
