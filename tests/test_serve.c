// tests/test_serve.c — examples/serve end to end, over loopback HTTP (make test-serve):
//     tests/test_serve [SERVE_BINARY]        (default examples/serve; CPU only, a few seconds)
// Starts the server four times on tests/data/hf_export_spiece (--host 127.0.0.1 --port 0, the
// port read from its "listening on" line) and checks, against fat5 itself as the oracle
// (fat5_generate, fat5_model_encode on the same checkpoint):
//   A (no delay): /health, /info, /metrics; greedy and beam search outputs equal fat5_generate's;
//     sampling with a seed repeats, and an unseeded request's reported seed reproduces it; the
//     stream's events (token ids, texts, last event) equal /generate's; stop sequences, max_time,
//     return_full_text; /embed equals fat5_model_encode (identical inputs, identical vectors);
//     every limit (413, 422 input and new tokens, 431) and malformed request (bad JSON, bad HTTP,
//     unknown parameter, wrong type, 404, 405, 411) answered with a JSON error; chunked bodies,
//     Expect: 100-continue, pipelining, keep-alive; a slow client gets 408 within --read-timeout,
//     an idle keep-alive connection is closed after --idle-timeout.
//   B (--debug-step-delay): 8 concurrent requests get exactly the tokens each gets alone (from
//     A), in fewer engine steps than tokens (they shared batches).
//   C (--max-concurrent-requests 2, --debug-step-delay): a stream client that closes after two
//     events is cancelled (0 running within a second, far fewer tokens than asked) and a later
//     request works; a third request while two run gets 503 with Retry-After; SIGTERM during
//     two requests: the short one completes, the long one is answered 503 after
//     --shutdown-timeout, the listener is closed and the server exits 0 within the bound.
//   D (--max-batch-rows 1 --max-queue 1): with one request decoding and one waiting, a third is
//     refused by the engine's full queue: 503 with Retry-After.
// Every wait is bounded (an alarm kills the servers and fails the test after 150 s).
#define _POSIX_C_SOURCE 200809L
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "../examples/serve_request.h"   // its JSON parser reads the responses

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MODEL "tests/data/hf_export_spiece"

static int failures, checks;
static const char *serve_bin = "examples/serve";
static char tmpdir[256];

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        checks++;                                                                \
        if (!(cond)) {                                                           \
            failures++;                                                          \
            fprintf(stderr, "test_serve: FAILED (%s:%d): ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

// ---------------------------------------------------------------------------------------------
// servers

typedef struct server {
    pid_t pid;
    int port;
    char log[300];
} server;

static server *servers[4];

// kills the servers and exits with a failure (why: a line for stderr)
static void abort_all(const char *why) {
    int k;
    for (k = 0; k < 4; k++)
        if (servers[k] && servers[k]->pid > 0) kill(servers[k]->pid, SIGKILL);
    if (write(2, why, strlen(why)) < 0) {}
    _exit(1);
}

static void on_alarm(int sig) {
    (void)sig;
    abort_all("test_serve: FAILED: timed out (150 s)\n");
}

// Starts examples/serve with the options given (NULL-terminated) and waits for its port.
static int server_start(server *s, const char *name, const char *const *extra) {
    const char *argv[48];
    int n = 0, k;
    double t0 = now_s();
    memset(s, 0, sizeof *s);
    snprintf(s->log, sizeof s->log, "%s/%s.log", tmpdir, name);
    argv[n++] = serve_bin;
    argv[n++] = MODEL;
    argv[n++] = "--device";
    argv[n++] = "cpu";
    argv[n++] = "--host";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--threads";
    argv[n++] = "1";
    for (k = 0; extra[k] && n < 46; k++) argv[n++] = extra[k];
    argv[n] = NULL;
    if ((s->pid = fork()) == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        execv(serve_bin, (char *const *)argv);
        _exit(127);
    }
    while (now_s() - t0 < 30) {   // the "listening on" line
        FILE *f = fopen(s->log, "r");
        char line[512];
        int status;
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "serve: listening on http://127.0.0.1:");
            if (p) {
                s->port = atoi(p + strlen("serve: listening on http://127.0.0.1:"));
                fclose(f);
                return s->port > 0;
            }
        }
        if (f) fclose(f);
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "test_serve: %s exited before listening (see %s)\n", serve_bin, s->log);
            s->pid = 0;
            return 0;
        }
        sleep_s(0.02);
    }
    return 0;
}

// Waits for the server to exit: its status, or -1 after `timeout` seconds.
static int server_wait(server *s, double timeout) {
    double t0 = now_s();
    int status;
    while (now_s() - t0 < timeout) {
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        sleep_s(0.01);
    }
    return -1;
}

static int server_log_has(const server *s, const char *what) {
    FILE *f = fopen(s->log, "r");
    char line[1024];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, what) != NULL;
    if (f) fclose(f);
    return found;
}

// ---------------------------------------------------------------------------------------------
// an HTTP client

typedef struct client {
    int fd;
    char buf[65536];
    size_t n;   // bytes read and not yet used
} client;

typedef struct resp {
    int status;
    int saw_continue;    // a 100 Continue came first
    char head[8192];     // the header lines
    sv_buf body;
    sj_doc doc;          // the body as JSON (when it parses)
    const sj_val *json;
} resp;

static int client_open(client *c, int port) {
    struct sockaddr_in a;
    struct timeval tv = {10, 0};
    memset(c, 0, sizeof *c);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if ((c->fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) return 0;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(c->fd);
        c->fd = -1;
        return 0;
    }
    return 1;
}

static void client_close(client *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        p += k, n -= (size_t)k;
    }
    return 1;
}

// more bytes into c->buf; 0 at EOF, an error or the receive timeout
static int client_fill(client *c) {
    ssize_t k;
    if (c->n == sizeof c->buf) return 0;
    do k = recv(c->fd, c->buf + c->n, sizeof c->buf - c->n, 0);
    while (k < 0 && errno == EINTR);
    if (k <= 0) return 0;
    c->n += (size_t)k;
    return 1;
}

static void client_take(client *c, size_t k) {
    memmove(c->buf, c->buf + k, c->n - k);
    c->n -= k;
}

// a line (without its CRLF) into out; 0 at EOF
static int client_line(client *c, char *out, size_t cap) {
    for (;;) {
        char *nl = (char *)memchr(c->buf, '\n', c->n);
        if (nl) {
            size_t k = (size_t)(nl - c->buf), m = k && c->buf[k - 1] == '\r' ? k - 1 : k;
            if (m >= cap) m = cap - 1;
            memcpy(out, c->buf, m);
            out[m] = 0;
            client_take(c, k + 1);
            return 1;
        }
        if (!client_fill(c)) return 0;
    }
}

// n body bytes into out
static int client_bytes(client *c, size_t n, sv_buf *out) {
    while (n > 0) {
        size_t k;
        if (c->n == 0 && !client_fill(c)) return 0;
        k = c->n < n ? c->n : n;
        sv_buf_put(out, c->buf, k);
        client_take(c, k);
        n -= k;
    }
    return 1;
}

static const char *header_get(const resp *r, const char *name) {
    const char *p = r->head;
    size_t n = strlen(name);
    while (*p) {
        if (!strncasecmp(p, name, n) && p[n] == ':') {
            p += n + 1;
            while (*p == ' ') p++;
            return p;
        }
        p = strchr(p, '\n');
        if (!p) break;
        p++;
    }
    return NULL;
}

// one chunk of a chunked body into out: its size (0: the last), -1 on an error
static long client_chunk(client *c, sv_buf *out) {
    char line[128];
    long size;
    if (!client_line(c, line, sizeof line)) return -1;
    size = strtol(line, NULL, 16);
    if (size < 0) return -1;
    if (size == 0) {
        while (client_line(c, line, sizeof line) && line[0]) {}   // trailers, until the empty line
        return 0;
    }
    if (!client_bytes(c, (size_t)size, out) || !client_line(c, line, sizeof line)) return -1;
    return size;
}

static void resp_free(resp *r) {
    sv_buf_free(&r->body);
    sj_free(&r->doc);
    memset(r, 0, sizeof *r);
}

// Reads the status line and headers of a response (a 100 Continue skipped). 0 on failure.
static int read_head(client *c, resp *r) {
    char line[4096];
    size_t hn = 0;
    memset(r, 0, sizeof *r);
    for (;;) {
        if (!client_line(c, line, sizeof line)) return 0;
        if (sscanf(line, "HTTP/1.%*d %d", &r->status) != 1) return 0;
        hn = 0;
        while (client_line(c, line, sizeof line) && line[0]) {
            size_t k = strlen(line);
            if (hn + k + 2 < sizeof r->head) memcpy(r->head + hn, line, k), hn += k, r->head[hn++] = '\n';
        }
        r->head[hn] = 0;
        if (r->status != 100) return 1;
        r->saw_continue = 1;
    }
}

// Reads a whole response: Content-Length, chunked or to EOF; the body parsed as JSON when it is.
static int read_response(client *c, resp *r) {
    const char *cl, *te;
    sj_limits lim = {64, 1 << 22};
    sv_error e;
    if (!read_head(c, r)) return 0;
    cl = header_get(r, "content-length");
    te = header_get(r, "transfer-encoding");
    if (te && !strncasecmp(te, "chunked", 7)) {
        long k;
        while ((k = client_chunk(c, &r->body)) > 0) {}
        if (k < 0) return 0;
    } else if (cl) {
        if (!client_bytes(c, (size_t)strtoul(cl, NULL, 10), &r->body)) return 0;
    } else {
        while (client_fill(c)) {}
        sv_buf_put(&r->body, c->buf, c->n);
        c->n = 0;
    }
    sv_buf_put(&r->body, "", 0);
    if (r->body.n && sj_parse(r->body.p, r->body.n, &lim, &r->doc, &e)) r->json = r->doc.root;
    return 1;
}

// One request on a new connection; *r gets the response. 0 when none came.
static int http(int port, const char *method, const char *path, const char *body, const char *extra, resp *r) {
    client c;
    sv_buf req = {NULL, 0, 0, 0};
    int ok;
    memset(r, 0, sizeof *r);
    if (!client_open(&c, port)) return 0;
    sv_buf_printf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path, extra ? extra : "");
    if (body) sv_buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    else sv_buf_puts(&req, "\r\n");
    ok = send_all(c.fd, req.p, req.n) && read_response(&c, r);
    sv_buf_free(&req);
    client_close(&c);
    return ok;
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

static const sj_val *jget(const sj_val *o, const char *key) {
    const sj_val *m;
    if (!o || o->type != SJ_OBJECT) return NULL;
    for (m = o->child; m; m = m->next)
        if (m->key_len == strlen(key) && !memcmp(m->key, key, m->key_len)) return m;
    return NULL;
}

// a member by a dotted path ("details.finish_reason")
static const sj_val *jpath(const sj_val *o, const char *path) {
    char key[64];
    while (o && *path) {
        size_t k = strcspn(path, ".");
        if (k >= sizeof key) return NULL;
        memcpy(key, path, k);
        key[k] = 0;
        o = jget(o, key);
        path += k + (path[k] == '.');
    }
    return o;
}

static const char *jstr(const sj_val *o, const char *path) {
    const sj_val *v = jpath(o, path);
    return v && v->type == SJ_STRING ? v->s : NULL;
}

static int64_t jint(const sj_val *o, const char *path, int64_t dflt) {
    const sj_val *v = jpath(o, path);
    return v && v->type == SJ_NUMBER && v->is_int ? v->i : dflt;
}

// the ids of details.tokens into ids (at most cap); their count, -1 when absent
static int64_t token_ids(const sj_val *root, int32_t *ids, int64_t cap) {
    const sj_val *t = jpath(root, "details.tokens"), *x;
    int64_t n = 0;
    if (!t || t->type != SJ_ARRAY) return -1;
    for (x = t->child; x; x = x->next, n++)
        if (n < cap) ids[n] = (int32_t)jint(x, "id", -1);
    return n;
}

static int error_body_ok(const resp *r, const char *type) {
    const char *e = jstr(r->json, "error"), *t = jstr(r->json, "error_type");
    return e && e[0] && t && (!type || !strcmp(t, type));
}

// a metric's value in a /metrics text ("fat5_running_requests"), or -1
static double metric(int port, const char *name) {
    resp r;
    double v = -1;
    if (http(port, "GET", "/metrics", NULL, NULL, &r) && r.status == 200) {
        const char *p = r.body.p;
        size_t n = strlen(name);
        while (p && *p) {
            if (!strncmp(p, name, n) && p[n] == ' ') {
                v = atof(p + n + 1);
                break;
            }
            p = strchr(p, '\n');
            if (p) p++;
        }
    }
    resp_free(&r);
    return v;
}

// ---------------------------------------------------------------------------------------------
// the oracle: fat5 on the same checkpoint

static fat5_ctx *octx;
static fat5_model *omodel;
static fat5_tokenizer *otok;

// the checkpoint's tokenizer ids of a text (EOS appended)
static int64_t oracle_ids(const char *text, int32_t *ids, int64_t cap) {
    int32_t *t = NULL;
    int64_t n = 0;
    if (fat5_tokenize(otok, text, strlen(text), NULL, 0, 0, &t, &n) != FAT5_OK) return -1;
    if (n > cap) n = cap;
    memcpy(ids, t, (size_t)n * sizeof *ids);
    fat5_free(octx, t);
    return n;
}

// fat5_generate of one text alone: its tokens into out (at most cap), their count
static int64_t oracle_generate(const char *text, int64_t max_new, int ignore_eos, int64_t beams, int32_t *out, int64_t cap) {
    int32_t ids[512], cu[2];
    fat5_generate_config g = fat5_generate_config_from_model(omodel);
    fat5_generate_result res;
    int64_t n = oracle_ids(text, ids, 512), k;
    if (n < 1) return -1;
    cu[0] = 0, cu[1] = (int32_t)n;
    g.max_new_tokens = max_new, g.max_length = 0;
    g.num_beams = beams;
    if (ignore_eos) g.eos_token_id = -1, g.eos_token_ids.n = 0;
    if (fat5_generate(omodel, ids, cu, 1, &g, &res) != FAT5_OK) return -1;
    k = res.cu_seqlens[1];
    if (k > cap) k = cap;
    memcpy(out, res.tokens, (size_t)k * sizeof *out);
    fat5_generate_result_destroy(octx, &res);
    return k;
}

static const char *const prompts[8] = {
    "translate English to German: The house is wonderful.", "Hello world", "summarize: a b c d e f g", "x",
    "The quick brown fox jumps over the lazy dog", "question: what is two plus two? context: four", "Un, deux, trois",
    "12345 67890"};

static int32_t alone_ids[8][64];
static int64_t alone_n[8];

static void gen_body(char *buf, size_t cap, int i, int64_t max_new) {
    snprintf(buf, cap, "{\"inputs\": \"%s\", \"parameters\": {\"max_new_tokens\": %lld, \"details\": true%s}}", prompts[i],
             (long long)max_new, i % 2 ? ", \"ignore_eos\": true" : "");
}

// ---------------------------------------------------------------------------------------------
// server A: outputs, streams, embeddings, limits, malformed requests, HTTP features

static void test_basics(int port) {
    resp r;
    CHECK(http(port, "GET", "/health", NULL, NULL, &r) && r.status == 200, "/health: %d", r.status);
    resp_free(&r);
    CHECK(http(port, "GET", "/info", NULL, NULL, &r) && r.status == 200, "/info: %d", r.status);
    CHECK(jstr(r.json, "model_id") && strstr(jstr(r.json, "model_id"), "hf_export_spiece"), "/info model_id");
    CHECK(jint(r.json, "max_input_tokens", -1) == 64 && jint(r.json, "max_new_tokens", -1) == 64,
          "/info limits: %s", r.body.p);
    CHECK(jint(r.json, "d_model", -1) == 16 && jint(r.json, "vocab_size", -1) == 1000, "/info model: %s", r.body.p);
    CHECK(jstr(r.json, "version") && !strcmp(jstr(r.json, "version"), FAT5_VERSION_STRING), "/info version");
    CHECK(jstr(r.json, "model_device_type") && !strcmp(jstr(r.json, "model_device_type"), "cpu"), "/info device");
    resp_free(&r);
}

// each prompt alone: the oracle's tokens (greedy; half of them with ignore_eos)
static void test_alone(int port) {
    int i;
    for (i = 0; i < 8; i++) {
        char body[512];
        int32_t want[64];
        int64_t nw = oracle_generate(prompts[i], 24, i % 2, 1, want, 64);
        resp r;
        gen_body(body, sizeof body, i, 24);
        CHECK(http(port, "POST", "/generate", body, NULL, &r) && r.status == 200, "prompt %d: %d %s", i, r.status,
              r.body.p ? r.body.p : "");
        alone_n[i] = token_ids(r.json, alone_ids[i], 64);
        CHECK(alone_n[i] == nw && nw > 0 && !memcmp(alone_ids[i], want, (size_t)nw * 4),
              "prompt %d: the server's %lld tokens differ from fat5_generate's %lld", i, (long long)alone_n[i], (long long)nw);
        CHECK(jint(r.json, "details.generated_tokens", -1) == alone_n[i], "prompt %d: generated_tokens", i);
        if (i % 2) CHECK(alone_n[i] == 24 && !strcmp(jstr(r.json, "details.finish_reason"), "length"),
                         "prompt %d: ignore_eos ran %lld tokens", i, (long long)alone_n[i]);
        else CHECK(jstr(r.json, "details.finish_reason") &&
                   !strcmp(jstr(r.json, "details.finish_reason"), alone_n[i] < 24 ? "eos_token" : "length"),
                   "prompt %d: finish_reason %s", i, jstr(r.json, "details.finish_reason"));
        resp_free(&r);
    }
    {   // beam search: fat5_generate's best hypothesis
        int32_t want[64], got[64];
        int64_t nw = oracle_generate(prompts[0], 12, 0, 3, want, 64), ng;
        resp r;
        CHECK(http(port, "POST", "/generate", "{\"inputs\": \"translate English to German: The house is wonderful.\", "
                   "\"parameters\": {\"max_new_tokens\": 12, \"num_beams\": 3, \"details\": true}}", NULL, &r) && r.status == 200,
              "beam search: %d %s", r.status, r.body.p);
        ng = token_ids(r.json, got, 64);
        CHECK(ng == nw && ng > 0 && !memcmp(got, want, (size_t)ng * 4), "beam search: %lld tokens, fat5_generate %lld",
              (long long)ng, (long long)nw);
        resp_free(&r);
    }
}

// sampling: a seed repeats its tokens; an unseeded request reports the seed that reproduces it
static void test_sampling(int port) {
    resp a, b, c;
    int32_t ia[64], ib[64], ic[64];
    int64_t na, nb, nc;
    char body[400];
    const sj_val *seed;
    http(port, "POST", "/generate", "{\"inputs\": \"Hello\", \"parameters\": {\"do_sample\": true, \"seed\": 7, "
         "\"max_new_tokens\": 16, \"top_k\": 0, \"details\": true, \"ignore_eos\": true}}", NULL, &a);
    http(port, "POST", "/generate", "{\"inputs\": \"Hello\", \"parameters\": {\"do_sample\": true, \"seed\": 7, "
         "\"max_new_tokens\": 16, \"top_k\": 0, \"details\": true, \"ignore_eos\": true}}", NULL, &b);
    na = token_ids(a.json, ia, 64), nb = token_ids(b.json, ib, 64);
    CHECK(a.status == 200 && na == 16 && nb == na && !memcmp(ia, ib, 64), "sampling with seed 7 twice: different tokens");
    CHECK(jint(a.json, "details.seed", -1) == 7, "details.seed: %s", a.body.p);
    resp_free(&a);
    resp_free(&b);
    http(port, "POST", "/generate", "{\"inputs\": \"Hello\", \"parameters\": {\"do_sample\": true, \"max_new_tokens\": 16, "
         "\"top_k\": 0, \"details\": true, \"ignore_eos\": true}}", NULL, &a);
    seed = jpath(a.json, "details.seed");
    CHECK(a.status == 200 && seed && seed->type == SJ_NUMBER, "an unseeded sample reports no seed: %s", a.body.p);
    if (seed && seed->type == SJ_NUMBER) {
        snprintf(body, sizeof body, "{\"inputs\": \"Hello\", \"parameters\": {\"do_sample\": true, \"max_new_tokens\": 16, "
                 "\"top_k\": 0, \"details\": true, \"ignore_eos\": true, \"seed\": %.*s}}", (int)seed->len, seed->s);
        http(port, "POST", "/generate", body, NULL, &c);
        na = token_ids(a.json, ia, 64), nc = token_ids(c.json, ic, 64);
        CHECK(na == 16 && nc == na && !memcmp(ia, ic, 64), "the reported seed does not reproduce the tokens");
        resp_free(&c);
    }
    resp_free(&a);
}

// the stream: events in order, their ids and texts equal /generate's tokens and generated_text
static void test_stream(int port) {
    int i;
    for (i = 0; i < 4; i++) {
        char body[512];
        client c;
        resp h, g;
        sv_buf text = {NULL, 0, 0, 0}, ev = {NULL, 0, 0, 0};
        int32_t ids[80];
        int64_t n = 0, k;
        int last_seen = 0, bad_event = 0;
        gen_body(body, sizeof body, i, 24);
        http(port, "POST", "/generate", body, NULL, &g);
        CHECK(client_open(&c, port), "connect");
        {
            sv_buf req = {NULL, 0, 0, 0};
            sv_buf_printf(&req, "POST /generate_stream HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
            send_all(c.fd, req.p, req.n);
            sv_buf_free(&req);
        }
        CHECK(read_head(&c, &h) && h.status == 200 && header_get(&h, "content-type") &&
              !strncmp(header_get(&h, "content-type"), "text/event-stream", 17), "stream %d: %d", i, h.status);
        for (;;) {   // one event per chunk: "data: {...}\n\n"
            long sz;
            sj_doc d;
            sj_limits lim = {16, 4096};
            sv_error e;
            ev.n = 0;
            if ((sz = client_chunk(&c, &ev)) <= 0) break;
            if (ev.n < 8 || memcmp(ev.p, "data: ", 6) || memcmp(ev.p + ev.n - 2, "\n\n", 2) ||
                !sj_parse(ev.p + 6, ev.n - 8, &lim, &d, &e)) {
                bad_event = 1;
                break;
            }
            if (last_seen) bad_event = 1;   // nothing after the last event
            if (n < 80 && jpath(d.root, "token.id")) ids[n++] = (int32_t)jint(d.root, "token.id", -1);
            if (jstr(d.root, "token.text")) sv_buf_puts(&text, jstr(d.root, "token.text"));
            if (jint(d.root, "index", -1) != n) bad_event = 1;
            if (jstr(d.root, "generated_text")) {
                last_seen = 1;
                CHECK(g.json && !strcmp(jstr(d.root, "generated_text"), jstr(g.json, "generated_text")),
                      "stream %d: its generated_text differs from /generate's", i);
                CHECK(jstr(d.root, "details.finish_reason") && jstr(g.json, "details.finish_reason") &&
                      !strcmp(jstr(d.root, "details.finish_reason"), jstr(g.json, "details.finish_reason")),
                      "stream %d: finish_reason", i);
            } else if (jpath(d.root, "details") && jpath(d.root, "details")->type != SJ_NULL) {
                bad_event = 1;
            }
            sj_free(&d);
        }
        CHECK(!bad_event && last_seen, "stream %d: a malformed event sequence (%.200s)", i, ev.p ? ev.p : "");
        {
            int32_t want[80];
            int64_t nw = token_ids(g.json, want, 80);
            CHECK(nw == n && n > 0, "stream %d: %lld events, /generate %lld tokens", i, (long long)n, (long long)nw);
            for (k = 0; k < n && k < nw; k++) CHECK(ids[k] == want[k], "stream %d: event %lld id %d != %d", i, (long long)k, ids[k], want[k]);
        }
        CHECK(g.json && jstr(g.json, "generated_text") && text.n == strlen(jstr(g.json, "generated_text")) &&
              (!text.n || !memcmp(text.p, jstr(g.json, "generated_text"), text.n)),
              "stream %d: the events' texts do not make generated_text", i);
        resp_free(&h);
        resp_free(&g);
        sv_buf_free(&text);
        sv_buf_free(&ev);
        client_close(&c);
    }
}

// stop sequences, return_full_text, max_time
static void test_text_options(int port) {
    resp g, s;
    const sj_val *toks, *t;
    sv_buf stop = {NULL, 0, 0, 0}, body = {NULL, 0, 0, 0};
    int64_t k = 0, want = -1;
    http(port, "POST", "/generate", "{\"inputs\": \"Hello world\", \"parameters\": {\"max_new_tokens\": 20, \"details\": true, "
         "\"ignore_eos\": true}}", NULL, &g);
    toks = jpath(g.json, "details.tokens");
    CHECK(g.status == 200 && toks && toks->n == 20, "generate for the stop test: %d", g.status);
    // the stop: the text of the first tokens, ending at the third token with text of its own
    for (t = toks ? toks->child : NULL; t; t = t->next, k++) {
        const char *x = jstr(t, "text");
        if (x) sv_buf_puts(&stop, x);
        if (k >= 2 && x && x[0]) {
            want = k + 1;
            break;
        }
    }
    CHECK(want > 0 && stop.n > 0, "no stop text found");
    if (want > 0) {
        sv_buf_puts(&body, "{\"inputs\": \"Hello world\", \"parameters\": {\"max_new_tokens\": 20, \"details\": true, "
                    "\"ignore_eos\": true, \"stop\": [\"zzzz\", ");
        sv_buf_json_str(&body, stop.p, stop.n);
        sv_buf_puts(&body, "]}}");
        http(port, "POST", "/generate", body.p, NULL, &s);
        CHECK(s.status == 200 && jstr(s.json, "details.finish_reason") &&
              !strcmp(jstr(s.json, "details.finish_reason"), "stop_sequence"), "stop: %s", s.body.p);
        CHECK(jint(s.json, "details.generated_tokens", -1) == want, "stop: %lld tokens, expected %lld",
              (long long)jint(s.json, "details.generated_tokens", -1), (long long)want);
        CHECK(jstr(s.json, "generated_text") && strlen(jstr(s.json, "generated_text")) == stop.n &&
              !memcmp(jstr(s.json, "generated_text"), stop.p, stop.n), "stop: the text is not cut at the stop");
        resp_free(&s);
    }
    http(port, "POST", "/generate", "{\"inputs\": \"Hello world\", \"parameters\": {\"max_new_tokens\": 20, "
         "\"ignore_eos\": true, \"return_full_text\": true}}", NULL, &s);
    {
        const char *full = jstr(s.json, "generated_text"), *gen = jstr(g.json, "generated_text");
        CHECK(full && gen && !strncmp(full, "Hello world", 11) && !strcmp(full + 11, gen), "return_full_text: %s", s.body.p);
    }
    resp_free(&s);
    resp_free(&g);
    sv_buf_free(&stop);
    sv_buf_free(&body);
}

// /embed: d_model floats per input, fat5_model_encode's values; identical inputs, identical vectors
static void test_embed(int port) {
    resp r;
    const sj_val *rows, *row, *x;
    float want[16];
    int32_t ids[64], cu[2];
    int64_t n = oracle_ids("Hello world", ids, 64), k;
    int ok = 1;
    cu[0] = 0, cu[1] = (int32_t)n;
    CHECK(fat5_model_encode(omodel, ids, cu, 1, FAT5_POOL_MEAN, want, 16) == FAT5_OK, "fat5_model_encode");
    http(port, "POST", "/embed", "{\"inputs\": [\"Hello world\", \"Hello world\", \"x\"]}", NULL, &r);
    rows = r.json;
    CHECK(r.status == 200 && rows && rows->type == SJ_ARRAY && rows->n == 3, "/embed: %d %s", r.status, r.body.p);
    for (row = rows ? rows->child : NULL, k = 0; row; row = row->next, k++) {
        int64_t j = 0;
        CHECK(row->type == SJ_ARRAY && row->n == 16, "/embed row %lld has %d values", (long long)k, row->n);
        for (x = row->child; x; x = x->next, j++) {
            ok &= x->type == SJ_NUMBER && isfinite(x->d);
            if (k < 2 && j < 16) ok &= fabs(x->d - want[j]) <= 1e-5 * (1 + fabs(want[j]));
        }
    }
    CHECK(ok, "/embed: values differ from fat5_model_encode's or are not finite");
    if (rows && rows->n == 3) {
        const sj_val *a = rows->child->child, *b = rows->child->next->child;
        for (; a && b; a = a->next, b = b->next) ok &= a->len == b->len && !memcmp(a->s, b->s, a->len);
        CHECK(ok, "/embed: two identical inputs, two different vectors");
    }
    resp_free(&r);
    http(port, "POST", "/embed", "{\"inputs\": \"Hello world\", \"normalize\": true}", NULL, &r);
    {
        double norm = 0;
        for (x = r.json && r.json->child ? r.json->child->child : NULL; x; x = x->next) norm += x->d * x->d;
        CHECK(r.status == 200 && fabs(norm - 1.0) < 1e-5, "/embed normalize: |v|^2 = %g", norm);
    }
    resp_free(&r);
}

static void expect_error(int port, const char *method, const char *path, const char *body, const char *extra, int status,
                         const char *type, const char *needle, const char *what) {
    resp r;
    int got = http(port, method, path, body, extra, &r);
    CHECK(got && r.status == status, "%s: status %d, expected %d (%s)", what, r.status, status, r.body.p ? r.body.p : "");
    CHECK(error_body_ok(&r, type), "%s: no JSON error of type %s: %s", what, type ? type : "any", r.body.p ? r.body.p : "");
    if (needle) CHECK(r.body.p && strstr(r.body.p, needle), "%s: the message does not say '%s': %s", what, needle,
                      r.body.p ? r.body.p : "");
    resp_free(&r);
}

// a raw request on its own connection: the response to it
static int raw(int port, const char *bytes, resp *r) {
    size_t n = strlen(bytes);
    client c;
    int ok;
    memset(r, 0, sizeof *r);
    if (!client_open(&c, port)) return 0;
    ok = send_all(c.fd, bytes, n);
    ok = read_response(&c, r) && ok;
    client_close(&c);
    return ok;
}

static void test_limits_and_errors(int port) {
    char big[9000], ids[1200];
    int k, n;
    resp r;
    // limits
    n = snprintf(big, sizeof big, "{\"inputs\": \"");
    for (k = 0; k < 8000; k++) big[n++] = 'a' + (char)(k % 26);
    snprintf(big + n, sizeof big - (size_t)n, "\"}");
    expect_error(port, "POST", "/generate", big, NULL, 413, "too_large", "4096", "an oversized body");
    n = snprintf(ids, sizeof ids, "{\"input_ids\": [");
    for (k = 0; k < 100; k++) n += snprintf(ids + n, sizeof ids - (size_t)n, "%s%d", k ? ", " : "", 5 + k);
    snprintf(ids + n, sizeof ids - (size_t)n, "]}");
    expect_error(port, "POST", "/generate", ids, NULL, 422, "validation", "100 tokens", "too many input tokens");
    expect_error(port, "POST", "/generate", ids, NULL, 422, "validation", "64", "too many input tokens (the limit named)");
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": 65}}", NULL, 422,
                 "validation", "65", "too many new tokens");
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"num_return_sequences\": 2, \"num_beams\": 2}}",
                 NULL, 422, "validation", "num_return_sequences", "an option the engine refuses");
    expect_error(port, "POST", "/generate", "{\"input_ids\": [5, 1], \"parameters\": {\"temperature\": 0, \"do_sample\": true}}",
                 NULL, 422, "validation", "temperature", "temperature 0");
    expect_error(port, "POST", "/generate", "{\"input_ids\": [5, 1000]}", NULL, 422, "validation", "vocabulary",
                 "an id outside the vocabulary");
    // malformed
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\",}", NULL, 400, "bad_request", "invalid JSON", "bad JSON");
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"max_new_token\": 5}}", NULL, 400,
                 "validation", "max_new_token", "an unknown parameter");
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": \"5\"}}", NULL, 400,
                 "validation", "must be an integer", "a parameter of the wrong type");
    expect_error(port, "POST", "/generate", "{\"inputs\": 5}", NULL, 400, "validation", "must be a string", "inputs a number");
    expect_error(port, "POST", "/generate", "{\"parameters\": {}}", NULL, 400, "validation", "inputs", "no inputs");
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"watermark\": true}}", NULL, 400,
                 "validation", "watermark", "watermark");
    expect_error(port, "POST", "/generate", "{\"inputs\": \"x\", \"extra\": 1}", NULL, 400, "validation", "extra",
                 "an unknown key");
    expect_error(port, "POST", "/generate", "[1, 2]", NULL, 400, "validation", "object", "a body that is not an object");
    expect_error(port, "GET", "/nowhere", NULL, NULL, 404, "not_found", "/nowhere", "an unknown path");
    expect_error(port, "GET", "/generate", NULL, NULL, 405, "method_not_allowed", "POST", "GET /generate");
    CHECK(raw(port, "GARBAGE\r\n\r\n", &r) && r.status == 400 && error_body_ok(&r, "bad_request"), "bad HTTP: %d", r.status);
    resp_free(&r);
    CHECK(raw(port, "POST /generate HTTP/1.1\r\nHost: x\r\n\r\n", &r) && r.status == 411, "no Content-Length: %d",
          r.status);
    resp_free(&r);
    {   // headers too large: 431
        sv_buf b = {NULL, 0, 0, 0};
        sv_buf_puts(&b, "GET /health HTTP/1.1\r\nX-Big: ");
        for (k = 0; k < 20000; k++) sv_buf_put(&b, "y", 1);
        sv_buf_puts(&b, "\r\n\r\n");
        CHECK(raw(port, b.p, &r) && r.status == 431 && error_body_ok(&r, "too_large"), "big headers: %d", r.status);
        resp_free(&r);
        sv_buf_free(&b);
    }
    CHECK(raw(port, "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", &r) &&
          r.status == 400, "Content-Length with chunked: %d", r.status);
    resp_free(&r);
    CHECK(http(port, "GET", "/health", NULL, NULL, &r) && r.status == 200, "the server no longer answers after bad requests");
    resp_free(&r);
}

static void test_http_features(int port) {
    static const char body[] = "{\"inputs\": \"Hello world\", \"parameters\": {\"max_new_tokens\": 24, \"details\": true}}";
    char req[2048];
    int n, k;
    client c;
    resp r, r2;
    int32_t ids[64];
    int64_t ni;
    // a chunked body: the same tokens as the plain one (prompt 1 alone, with ignore_eos: prompts[1] is "Hello world")
    n = snprintf(req, sizeof req, "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                 "10\r\n%.16s\r\n%zx;ext=1\r\n%s\r\n0\r\n\r\n", body, strlen(body) - 16, body + 16);
    CHECK(raw(port, req, &r) && r.status == 200, "a chunked body: %d %s", r.status, r.body.p ? r.body.p : "");
    ni = token_ids(r.json, ids, 64);
    CHECK(ni > 0 && ni <= 24, "a chunked body: %lld tokens", (long long)ni);
    resp_free(&r);
    // Expect: 100-continue: the 100 first, then the response
    n = snprintf(req, sizeof req, "POST /generate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %zu\r\n\r\n",
                 strlen(body));
    CHECK(client_open(&c, port), "connect");
    send_all(c.fd, req, (size_t)n);
    {
        char line[256];
        CHECK(client_line(&c, line, sizeof line) && !strncmp(line, "HTTP/1.1 100", 12), "no 100 Continue before the body: %s", line);
        client_line(&c, line, sizeof line);
    }
    send_all(c.fd, body, strlen(body));
    CHECK(read_response(&c, &r) && r.status == 200, "after 100 Continue: %d", r.status);
    resp_free(&r);
    // keep-alive and pipelining: two requests in one write on that connection, two responses in order
    n = snprintf(req, sizeof req, "GET /health HTTP/1.1\r\nHost: x\r\n\r\nPOST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 "%zu\r\n\r\n%s", strlen(body), body);
    send_all(c.fd, req, (size_t)n);
    CHECK(read_response(&c, &r) && r.status == 200 && r.body.n == 0, "pipelined /health: %d", r.status);
    CHECK(read_response(&c, &r2) && r2.status == 200 && token_ids(r2.json, ids, 64) > 0, "pipelined /generate: %d", r2.status);
    resp_free(&r);
    resp_free(&r2);
    client_close(&c);
    (void)k;
}

// A slow client: half a request, then nothing: 408 within --read-timeout (1 s), then the close.
static void test_slow_client(int port) {
    client c;
    resp r;
    double t0 = now_s(), dt;
    static const char half[] = "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inp";
    CHECK(client_open(&c, port), "connect");
    send_all(c.fd, half, sizeof half - 1);
    CHECK(read_response(&c, &r) && r.status == 408 && error_body_ok(&r, "timeout"), "a slow client: %d", r.status);
    dt = now_s() - t0;
    CHECK(dt > 0.8 && dt < 3.0, "a slow client was answered after %.2f s (--read-timeout 1)", dt);
    CHECK(!client_fill(&c), "the connection stays open after 408");
    resp_free(&r);
    client_close(&c);
}

// An idle keep-alive connection is closed after --idle-timeout (1 s).
static void test_idle(int port) {
    client c;
    resp r;
    double t0, dt;
    CHECK(client_open(&c, port), "connect");
    send_all(c.fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 33);
    CHECK(read_response(&c, &r) && r.status == 200, "keep-alive /health: %d", r.status);
    resp_free(&r);
    t0 = now_s();
    CHECK(!client_fill(&c), "data on an idle connection");
    dt = now_s() - t0;
    CHECK(dt > 0.8 && dt < 3.0, "an idle connection was closed after %.2f s (--idle-timeout 1)", dt);
    client_close(&c);
}

static void test_metrics(int port) {
    resp r;
    CHECK(http(port, "GET", "/metrics", NULL, NULL, &r) && r.status == 200, "/metrics: %d", r.status);
    CHECK(r.body.p && strstr(r.body.p, "fat5_requests_total{endpoint=\"/generate\",status=\"200\"}") &&
          strstr(r.body.p, "fat5_requests_total{endpoint=\"/generate\",status=\"413\"} 1\n") &&
          strstr(r.body.p, "# TYPE fat5_time_to_first_token_seconds histogram") &&
          strstr(r.body.p, "fat5_time_per_output_token_seconds_bucket{le=\"+Inf\"}") &&
          strstr(r.body.p, "fat5_request_duration_seconds_count") && strstr(r.body.p, "fat5_queue_depth 0") &&
          strstr(r.body.p, "fat5_running_requests 0") && strstr(r.body.p, "fat5_tokens_per_second"),
          "/metrics lacks a metric:\n%s", r.body.p ? r.body.p : "");
    resp_free(&r);
    CHECK(metric(port, "fat5_generated_tokens_total") > 100, "fat5_generated_tokens_total");
}

// ---------------------------------------------------------------------------------------------
// server B: concurrent requests

typedef struct job {
    int port, i;
    int status;
    int32_t ids[64];
    int64_t n;
    pthread_barrier_t *go;
} job;

static void *run_job(void *arg) {
    job *j = (job *)arg;
    char body[512];
    resp r;
    gen_body(body, sizeof body, j->i, 24);
    pthread_barrier_wait(j->go);
    if (http(j->port, "POST", "/generate", body, NULL, &r)) {
        j->status = r.status;
        j->n = token_ids(r.json, j->ids, 64);
    }
    resp_free(&r);
    return NULL;
}

static void test_concurrent(int port) {
    pthread_t th[8];
    job jobs[8];
    pthread_barrier_t go;
    double steps0 = metric(port, "fat5_engine_steps_total"), steps, tokens = 0;
    int i;
    pthread_barrier_init(&go, NULL, 8);
    for (i = 0; i < 8; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].port = port, jobs[i].i = i, jobs[i].go = &go;
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (i = 0; i < 8; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&go);
    for (i = 0; i < 8; i++) {
        CHECK(jobs[i].status == 200, "concurrent request %d: %d", i, jobs[i].status);
        CHECK(jobs[i].n == alone_n[i] && !memcmp(jobs[i].ids, alone_ids[i], (size_t)alone_n[i] * 4),
              "concurrent request %d: %lld tokens differ from the %lld it gets alone", i, (long long)jobs[i].n,
              (long long)alone_n[i]);
        tokens += (double)jobs[i].n;
    }
    steps = metric(port, "fat5_engine_steps_total") - steps0;
    CHECK(steps > 0 && steps < tokens * 0.6, "8 concurrent requests ran %g steps for %g tokens: they did not share batches",
          steps, tokens);
}

// ---------------------------------------------------------------------------------------------
// server C: cancellation, overload, shutdown

// opens a stream of a long generation and reads its first `events` events (0: its headers only)
static int open_stream(client *c, int port, int64_t max_new, int events) {
    char req[512], body[256];
    resp h;
    sv_buf ev = {NULL, 0, 0, 0};
    int k, ok;
    snprintf(body, sizeof body, "{\"inputs\": \"Hello\", \"parameters\": {\"max_new_tokens\": %lld, \"ignore_eos\": true}}",
             (long long)max_new);
    snprintf(req, sizeof req, "POST /generate_stream HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    if (!client_open(c, port) || !send_all(c->fd, req, strlen(req))) return 0;
    ok = read_head(c, &h) && h.status == 200;
    resp_free(&h);
    for (k = 0; ok && k < events; k++) ok = client_chunk(c, &ev) > 0;
    sv_buf_free(&ev);
    return ok;
}

static void test_cancel(int port) {
    client c;
    double t0, tok0 = metric(port, "fat5_generated_tokens_total"), running = -1, flight = -1, used;
    resp r;
    CHECK(open_stream(&c, port, 300, 2), "the stream to cancel");
    client_close(&c);   // after two events: the request must leave the batch
    t0 = now_s();
    while (now_s() - t0 < 2) {
        running = metric(port, "fat5_running_requests");
        flight = metric(port, "fat5_requests_in_flight");
        if (running == 0 && flight == 0) break;
        sleep_s(0.02);
    }
    CHECK(running == 0 && flight == 0 && now_s() - t0 < 1.0, "a closed stream still runs after %.2f s (%g running)",
          now_s() - t0, running);
    used = metric(port, "fat5_generated_tokens_total") - tok0;
    CHECK(used < 150, "the cancelled request generated %g of its 300 tokens", used);
    CHECK(http(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": 3}}", NULL, &r) &&
          r.status == 200, "a request after the cancellation: %d", r.status);
    resp_free(&r);
}

static void test_overload(int port) {
    client a, b;
    resp r;
    CHECK(open_stream(&a, port, 300, 1) && open_stream(&b, port, 300, 1), "two long streams");
    CHECK(http(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": 3}}", NULL, &r) &&
          r.status == 503 && header_get(&r, "retry-after") && error_body_ok(&r, "overloaded"),
          "a third request with --max-concurrent-requests 2: %d", r.status);
    resp_free(&r);
    client_close(&a);
    client_close(&b);
    {   // both cancelled
        double t0 = now_s();
        while (now_s() - t0 < 2 && metric(port, "fat5_requests_in_flight") != 0) sleep_s(0.02);
        CHECK(metric(port, "fat5_requests_in_flight") == 0, "the closed streams are still in flight");
    }
}

// server D (--max-batch-rows 1 --max-queue 1): one request decodes, one waits in the engine's
// queue; a third is refused by the engine (FAT5_ERR_BUSY): 503 with Retry-After
static void test_queue_full(int port) {
    client a, b;
    resp r;
    CHECK(open_stream(&a, port, 300, 1) && open_stream(&b, port, 300, 0), "a running and a waiting stream");
    CHECK(http(port, "POST", "/generate", "{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": 3}}", NULL, &r) &&
          r.status == 503 && header_get(&r, "retry-after") && error_body_ok(&r, "overloaded") && strstr(r.body.p, "queue"),
          "a request beyond --max-queue: %d %s", r.status, r.body.p ? r.body.p : "");
    resp_free(&r);
    CHECK(metric(port, "fat5_queue_depth") == 1 && metric(port, "fat5_running_requests") == 1, "queue depth %g, running %g",
          metric(port, "fat5_queue_depth"), metric(port, "fat5_running_requests"));
    client_close(&a);
    client_close(&b);
}

typedef struct shut_req {
    int port;
    int64_t max_new;
    int status;
    int64_t tokens;
    double t_done;
    char error_type[32];
} shut_req;

static void *run_shut(void *arg) {
    shut_req *s = (shut_req *)arg;
    char body[256];
    resp r;
    snprintf(body, sizeof body, "{\"inputs\": \"Hello\", \"parameters\": {\"max_new_tokens\": %lld, \"ignore_eos\": true, "
             "\"details\": true}}", (long long)s->max_new);
    if (http(s->port, "POST", "/generate", body, NULL, &r)) {
        s->status = r.status;
        s->tokens = jint(r.json, "details.generated_tokens", -1);
        if (jstr(r.json, "error_type")) snprintf(s->error_type, sizeof s->error_type, "%s", jstr(r.json, "error_type"));
    }
    s->t_done = now_s();
    resp_free(&r);
    return NULL;
}

// SIGTERM during two requests (--shutdown-timeout 1, 10 ms a step): the short one (40 tokens,
// ~0.4 s) completes, the long one (300 tokens, ~3 s) is cancelled and answered; exit 0 in bound.
static void test_shutdown(server *s) {
    pthread_t ta, tb;
    shut_req a, b;
    double t0, t_sig;
    int st;
    client c;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.port = b.port = s->port;
    a.max_new = 40, b.max_new = 300;
    pthread_create(&ta, NULL, run_shut, &a);
    pthread_create(&tb, NULL, run_shut, &b);
    t0 = now_s();
    while (now_s() - t0 < 3 && metric(s->port, "fat5_running_requests") < 2) sleep_s(0.005);
    t_sig = now_s();
    kill(s->pid, SIGTERM);
    st = server_wait(s, 5);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(st == 0, "the server exited %d after SIGTERM (expected 0 within 5 s)", st);
    CHECK(now_s() - t_sig < 3.0, "the shutdown took %.2f s (--shutdown-timeout 1)", now_s() - t_sig);
    CHECK(a.status == 200 && a.tokens == 40, "the short request during the shutdown: %d, %lld tokens", a.status,
          (long long)a.tokens);
    CHECK(b.status == 503 && !strcmp(b.error_type, "unavailable"), "the long request cancelled by the shutdown: %d %s",
          b.status, b.error_type);
    CHECK(b.t_done - t_sig > 0.8 && b.t_done - t_sig < 2.5, "the long request was answered %.2f s after SIGTERM",
          b.t_done - t_sig);
    CHECK(!client_open(&c, s->port), "the server still accepts connections after exiting");
    client_close(&c);
    CHECK(server_log_has(s, "serve: stopped"), "the server's log lacks its last line");
}

// ---------------------------------------------------------------------------------------------

int main(int argc, char **argv) {
    static const char *const opts_a[] = {"--max-body-bytes", "4096", "--max-input-tokens", "64", "--max-new-tokens", "64",
                                         "--read-timeout", "1", "--idle-timeout", "1", "--max-batch-rows", "16", NULL};
    static const char *const opts_b[] = {"--debug-step-delay", "10", "--max-batch-rows", "16", "--max-new-tokens", "64", NULL};
    static const char *const opts_d[] = {"--debug-step-delay", "10", "--max-batch-rows", "1", "--max-queue", "1",
                                         "--max-new-tokens", "400", NULL};
    static const char *const opts_c[] = {"--debug-step-delay", "10", "--max-concurrent-requests", "2", "--max-new-tokens",
                                         "400", "--shutdown-timeout", "1", "--max-batch-rows", "4", NULL};
    fat5_ctx_config cc = fat5_ctx_config_default();
    server a, b, c, d;
    double t0 = now_s();
    int st;
    struct sigaction sa;
    if (argc > 1) serve_bin = argv[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    alarm(150);
    snprintf(tmpdir, sizeof tmpdir, "%s/test_serve_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    cc.n_threads = 1;
    if (fat5_ctx_create(&cc, &octx, NULL, 0) != FAT5_OK || fat5_model_load(octx, MODEL, &omodel) != FAT5_OK ||
        fat5_model_set_training(omodel, 0) != FAT5_OK || fat5_tokenizer_load(octx, MODEL, &otok) != FAT5_OK) {
        fprintf(stderr, "test_serve: cannot load %s: %s\n", MODEL, octx ? fat5_last_error(octx) : "no context");
        return 1;
    }
    servers[0] = &a, servers[1] = &b, servers[2] = &c, servers[3] = &d;
    if (!server_start(&a, "a", opts_a) || !server_start(&b, "b", opts_b) || !server_start(&c, "c", opts_c) ||
        !server_start(&d, "d", opts_d)) {
        fprintf(stderr, "test_serve: FAILED: a server did not start (%s)\n", serve_bin);
        abort_all("");
    }
    test_basics(a.port);
    test_alone(a.port);
    test_sampling(a.port);
    test_stream(a.port);
    test_text_options(a.port);
    test_embed(a.port);
    test_limits_and_errors(a.port);
    test_http_features(a.port);
    test_slow_client(a.port);
    test_idle(a.port);
    test_metrics(a.port);
    test_concurrent(b.port);
    test_cancel(c.port);
    test_overload(c.port);
    test_shutdown(&c);
    test_queue_full(d.port);
    // the others: SIGTERM (D with its two streams cancelled or leaving), exit 0
    kill(a.pid, SIGTERM);
    kill(b.pid, SIGTERM);
    kill(d.pid, SIGTERM);
    st = server_wait(&a, 5);
    CHECK(st == 0, "server A exited %d", st);
    st = server_wait(&b, 5);
    CHECK(st == 0, "server B exited %d", st);
    st = server_wait(&d, 5);
    CHECK(st == 0, "server D exited %d", st);
    fat5_tokenizer_destroy(otok);
    fat5_model_destroy(omodel);
    fat5_ctx_destroy(octx);
    if (!failures) {   // the logs are kept when something failed
        char p[400];
        const char *names[] = {"a.log", "b.log", "c.log", "d.log"};
        int k;
        for (k = 0; k < 4; k++) {
            snprintf(p, sizeof p, "%s/%s", tmpdir, names[k]);
            unlink(p);
        }
        rmdir(tmpdir);
    } else {
        fprintf(stderr, "test_serve: the servers' logs are in %s\n", tmpdir);
    }
    printf("test_serve: %d checks, %d failed (%.1f s)\n", checks, failures, now_s() - t0);
    return failures ? 1 : 0;
}
