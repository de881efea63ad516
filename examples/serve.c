// An HTTP/1.1 inference server for a T5 checkpoint, with Text Generation Inference's endpoints, over
// fat5's continuous-batching engine (fat5_engine_*): requests join the running batch at the next
// decoding step and leave when they finish.
//     cc -std=c99 -O2 -o examples/serve examples/serve.c -lm -ldl -lpthread
//
//     examples/serve path/to/model                          # http://127.0.0.1:8080, the GPU when there is one
//     examples/serve path/to/model --port 0 --device cpu    # an ephemeral port, printed on stderr
//     curl -s localhost:8080/generate -H 'Content-Type: application/json' -d '{"inputs": "Hi"}'
//
// Endpoints (docs/serving.md): POST /generate, POST /generate_stream (server-sent events, one per
// token), POST / (TGI's {"stream": bool} form), POST /embed (mean-pooled encoder states),
// GET /health, GET /info, GET /metrics (Prometheus). Request parsing: examples/serve_request.h.
//
// Threads: one engine thread owns the fat5 context, the model and the engine (a context is used by
// one thread at a time): it takes new requests and cancellations from a queue, submits them, runs
// fat5_engine_step, and hands each request's tokens to the thread of its connection (condition
// variables); /embed runs fat5_model_encode there between steps. The tokenizer lives in a second
// context (CPU) under its own lock, used by the connection threads to tokenize inputs and to turn
// tokens into text as they come (fat5_detok_stream: whole characters). An acceptor thread starts
// one thread per connection (at most --max-connections; beyond: 503). The main thread waits for
// SIGINT / SIGTERM: then the listener closes, in-flight requests get --shutdown-timeout seconds
// to finish, the rest are cancelled and answered, and the program exits 0.
#define _POSIX_C_SOURCE 200809L
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "../tools/cli.h"   // the command line every fat5 program shares (docs/cli.md)
#include "serve_request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// the command line

enum {
    O_HOST = 1, O_PORT, O_DEVICE, O_DTYPE, O_THREADS, O_TOKENIZER, O_BYTES, O_ROWS, O_MAX_IN, O_MAX_NEW, O_QUEUE, O_JOIN,
    O_CONC, O_CONNS, O_BODY, O_HEADER, O_READ_TO, O_IDLE_TO, O_WRITE_TO, O_SHUT_TO, O_STOPS, O_EMBED_N, O_STEP_DELAY
};
static const cli_opt opts[] = {
    {.kind = CLI_SECTION, .help = "network:"},
    {.id = O_HOST, .name = "host", .kind = CLI_STR, .meta = "ADDR", .def = "127.0.0.1",
     .help = "the address to listen on (anything but loopback exposes the server,\nwhich has no authentication)"},
    {.id = O_PORT, .name = "port", .kind = CLI_INT, .def = "8080", .help = "the TCP port (0: an ephemeral one, printed)", .lo = 0,
     .hi = 65535},
    {.kind = CLI_SECTION, .help = "model:"},
    {.id = O_DEVICE, .name = "device", .kind = CLI_CHOICE, .choices = "auto|cpu|gpu", .def = "auto",
     .help = "auto: the GPU when there is one, else the CPU"},
    {.id = O_DTYPE, .name = "dtype", .kind = CLI_CHOICE, .choices = "fp32|bf16", .def = "bf16 on a GPU",
     .help = "GPU compute precision (the CPU computes in fp32)"},
    {.id = O_THREADS, .name = "threads", .kind = CLI_INT, .def = "0: one per CPU", .help = "CPU threads of the model", .lo = 0,
     .hi = 4096},
    {.id = O_TOKENIZER, .name = "tokenizer", .kind = CLI_STR, .meta = "PATH", .def = "the checkpoint's own, else byte-level",
     .help = "tokenizer.json / spiece.model (a file or a directory)"},
    {.id = O_BYTES, .name = "bytes", .kind = CLI_FLAG, .help = "byte-level ids (ByT5: byte + 3) even when the checkpoint has a tokenizer"},
    {.kind = CLI_SECTION, .help = "engine:"},
    {.id = O_ROWS, .name = "max-batch-rows", .kind = CLI_INT, .def = "64",
     .help = "decoder rows decoded at once (requests x their beams)", .lo = 1, .hi = 1 << 20},
    {.id = O_MAX_IN, .name = "max-input-tokens", .kind = CLI_INT, .def = "1024", .help = "a request's input tokens at most (422)",
     .lo = 1, .hi = 1 << 24},
    {.id = O_MAX_NEW, .name = "max-new-tokens", .kind = CLI_INT, .def = "256",
     .help = "a request's max_new_tokens at most (422); also the default cap", .lo = 1, .hi = 1 << 24},
    {.id = O_QUEUE, .name = "max-queue", .kind = CLI_INT, .def = "1024", .help = "requests waiting for rows at most (503)",
     .lo = 1, .hi = 1 << 24},
    {.id = O_JOIN, .name = "join-interval", .kind = CLI_INT, .def = "4",
     .help = "while requests run, new ones join every N steps (their encoders\nrun together: more throughput, up to N - 1 steps more latency)",
     .lo = 1, .hi = 1 << 20},
    {.kind = CLI_SECTION, .help = "limits and timeouts:"},
    {.id = O_CONC, .name = "max-concurrent-requests", .kind = CLI_INT, .def = "128",
     .help = "generation and embedding requests at once, queued or running\n(503 with Retry-After beyond)", .lo = 1,
     .hi = 1 << 24},
    {.id = O_CONNS, .name = "max-connections", .kind = CLI_INT, .def = "256", .help = "open connections (503 and close beyond)",
     .lo = 1, .hi = 1 << 20},
    {.id = O_BODY, .name = "max-body-bytes", .kind = CLI_INT, .def = "2000000", .help = "a request body at most (413)", .lo = 16,
     .hi = 1 << 30},
    {.id = O_HEADER, .name = "max-header-bytes", .kind = CLI_INT, .def = "16384", .help = "request line and headers at most (431)",
     .lo = 256, .hi = 1 << 24},
    {.id = O_STOPS, .name = "max-stop-sequences", .kind = CLI_INT, .def = "4", .help = "stop sequences of a request at most",
     .lo = 0, .hi = 1024},
    {.id = O_EMBED_N, .name = "max-embed-inputs", .kind = CLI_INT, .def = "32", .help = "inputs of one /embed request at most",
     .lo = 1, .hi = 1 << 16},
    {.id = O_READ_TO, .name = "read-timeout", .kind = CLI_NUM, .meta = "S", .def = "10",
     .help = "seconds to receive a whole request (408 and close beyond)", .lo = 0, .hi = 1e6, .lo_open = 1},
    {.id = O_IDLE_TO, .name = "idle-timeout", .kind = CLI_NUM, .meta = "S", .def = "60",
     .help = "a keep-alive connection idle longer is closed", .lo = 0, .hi = 1e6, .lo_open = 1},
    {.id = O_WRITE_TO, .name = "write-timeout", .kind = CLI_NUM, .meta = "S", .def = "30",
     .help = "a client that reads nothing for this long is dropped (its request\ncancelled)", .lo = 0, .hi = 1e6,
     .lo_open = 1},
    {.id = O_SHUT_TO, .name = "shutdown-timeout", .kind = CLI_NUM, .meta = "S", .def = "10",
     .help = "on SIGTERM / SIGINT: seconds for in-flight requests to finish", .lo = 0, .hi = 1e6},
    {.kind = CLI_SECTION, .help = "testing:"},
    {.id = O_STEP_DELAY, .name = "debug-step-delay", .kind = CLI_NUM, .meta = "MS", .def = "0",
     .help = "sleep this many milliseconds after every decoding step (slow\nrequests, for tests of timeouts and shutdown)",
     .lo = 0, .hi = 60000},
};

static const char usage[] =
    "usage: serve CHECKPOINT_DIR [options]\n"
    "Serves a T5 checkpoint over HTTP with Text Generation Inference's endpoints (POST /generate,\n"
    "/generate_stream, /embed; GET /health, /info, /metrics): requests are decoded together by\n"
    "fat5's continuous-batching engine. docs/serving.md describes the requests and responses.\n";

typedef struct sv_config {
    const char *model_dir, *host, *tokenizer;
    int bytes, device, dtype, threads;
    long long port, max_rows, max_input, max_new, max_queue, join_interval, max_concurrent, max_connections, max_body, max_header,
        max_stops, max_embed;
    double read_timeout, idle_timeout, write_timeout, shutdown_timeout, step_delay_ms;
} sv_config;

// ---------------------------------------------------------------------------------------------
// time

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// the absolute CLOCK_MONOTONIC time `dt` seconds from now, for pthread_cond_timedwait
static struct timespec sv_after(double dt) {
    struct timespec ts;
    double t = now_s() + (dt > 0 ? dt : 0);
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    return ts;
}

static void sv_sleep(double s) {
    struct timespec ts;
    if (s <= 0) return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

// ---------------------------------------------------------------------------------------------
// metrics

#define SV_HIST_MAX 16
typedef struct sv_hist {
    const double *bounds;   // bucket upper bounds, increasing
    int nb;
    uint64_t counts[SV_HIST_MAX];   // per bucket (not cumulative); counts[nb]: above the last bound
    double sum;
    uint64_t n;
} sv_hist;

static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double tpot_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
static const double dur_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

static void hist_observe(sv_hist *h, double v) {
    int k = 0;
    while (k < h->nb && v > h->bounds[k]) k++;
    h->counts[k]++;
    h->sum += v;
    h->n++;
}

static void hist_write(sv_buf *b, const char *name, const char *help, const sv_hist *h) {
    uint64_t cum = 0;
    int k;
    sv_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (k = 0; k < h->nb; k++) {
        cum += h->counts[k];
        sv_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[k], (unsigned long long)cum);
    }
    sv_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)h->n, name,
                  h->sum, name, (unsigned long long)h->n);
}

// the endpoints requests are counted under
static const char *const ep_names[] = {"other", "/generate", "/generate_stream", "/", "/embed", "/health", "/info", "/metrics"};
#define SV_N_EP 8
#define SV_MAX_STATUS 32

// ---------------------------------------------------------------------------------------------
// the server's state

enum { JOB_GENERATE = 1, JOB_EMBED };
enum { JS_QUEUED = 0, JS_RUNNING, JS_DONE, JS_FAILED };
enum { WHY_NONE = 0, WHY_CLIENT, WHY_STOP, WHY_SHUTDOWN };

// A request on its way through the engine thread. The connection thread makes it, queues it,
// and frees it once its state is DONE or FAILED (the engine thread no longer refers to it then).
// Every field after `state` is guarded by S.mu.
typedef struct sv_job {
    int kind;
    // generation: the input and options (the connection's memory, valid until the job is freed)
    const int32_t *ids;
    int64_t n_ids;
    fat5_generate_config g;
    // embedding: packed inputs, and the [n_seq, d_model] output
    const int32_t *tok, *cu;
    int64_t n_seq;
    float *out;
    double t_start;           // when the request arrived
    // ---- S.mu
    int state;
    uint64_t eid;             // the engine's id
    int cancel;               // WHY_*: cancel it (the engine thread does, at its next turn)
    int cancel_sent;
    int32_t *tokens;          // the output so far
    int64_t n_tokens, cap_tokens;
    fat5_finish finish;
    float score;
    int err_status;
    const char *err_type;
    char err[512];
    double t_last;            // when its last token came (0: none yet)
    pthread_cond_t cv;        // signalled when tokens come or the state changes
    struct sv_job *next;
} sv_job;

typedef struct sv_server {
    sv_config cfg;
    sv_http_limits http_lim;
    sv_req_limits req_lim;
    // the engine thread's (only it calls fat5 on them once started)
    fat5_ctx *ctx;
    fat5_model *model;
    fat5_engine *engine;
    pthread_t engine_thread;
    // read-only once the engine thread says it is ready
    fat5_generate_config gen_defaults;   // the checkpoint's (its lists are the model's)
    int can_generate;
    int64_t vocab_size, d_model, model_eos;
    char model_type[16], arch[96], device_name[48], dtype_name[16];
    double param_millions;
    // the tokenizer, in a CPU context of its own, under tok_mu
    pthread_mutex_t tok_mu;
    fat5_ctx *tok_ctx;
    fat5_tokenizer *tok;
    const char *tok_path;
    int64_t tok_vocab;
    int32_t eos_id, pad_id;
    // shared state, under mu
    pthread_mutex_t mu;
    pthread_cond_t engine_cv;   // wakes the engine thread
    pthread_cond_t idle_cv;     // signalled when requests or connections end, and when the engine is ready
    sv_job *qhead, *qtail;      // jobs not yet taken by the engine thread
    int64_t n_queued;
    sv_job **active;            // jobs the engine runs (submitted generations)
    int64_t n_active, cap_active;
    int64_t inflight;           // generation and embedding requests admitted and not yet answered
    int64_t connections;
    int stopping;               // no new requests (SIGTERM / SIGINT)
    int cancel_all;             // shutdown: cancel every request
    int engine_exit;
    int engine_ready, engine_failed;
    char engine_error[512];
    int broken;                 // a decoding step failed: /health answers 503
    char broken_msg[512];
    fat5_engine_stats stats;
    uint64_t seed_state;
    // metrics (mu)
    uint64_t req_counts[SV_N_EP][SV_MAX_STATUS];
    int req_status[SV_MAX_STATUS];
    int n_status;
    uint64_t tokens_total, gen_requests, embed_inputs;
    sv_hist ttft, tpot, duration;
    uint64_t rate_tokens[10];
    int64_t rate_sec[10];
    double t_boot;
    // network
    int listen_fd;
    int wake_pipe[2];
    char url[1100];
} sv_server;

static sv_server S;
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t sig_count;

static void sv_lock(void) { pthread_mutex_lock(&S.mu); }
static void sv_unlock(void) { pthread_mutex_unlock(&S.mu); }

// waits on cv (mu held) for at most dt seconds
static void sv_timedwait(pthread_cond_t *cv, double dt) {
    struct timespec ts = sv_after(dt);
    pthread_cond_timedwait(cv, &S.mu, &ts);
}

// counts an answered request (mu held)
static void count_request(int ep, int status) {
    int k;
    if (ep < 0 || ep >= SV_N_EP) ep = 0;
    for (k = 0; k < S.n_status; k++)
        if (S.req_status[k] == status) break;
    if (k == S.n_status) {
        if (S.n_status == SV_MAX_STATUS) return;
        S.req_status[S.n_status++] = status;
    }
    S.req_counts[ep][k]++;
}

// tokens emitted now, for the tokens/s gauge (mu held): a ring of one-second buckets
static void rate_add(uint64_t n) {
    int64_t sec = (int64_t)(now_s() - S.t_boot);
    int k = (int)(sec % 10);
    if (S.rate_sec[k] != sec) S.rate_sec[k] = sec, S.rate_tokens[k] = 0;
    S.rate_tokens[k] += n;
}

// tokens per second over the last ten whole seconds (mu held)
static double rate_get(void) {
    int64_t sec = (int64_t)(now_s() - S.t_boot);
    uint64_t sum = 0;
    int k;
    for (k = 0; k < 10; k++)
        if (S.rate_sec[k] < sec && S.rate_sec[k] >= sec - 10) sum += S.rate_tokens[k];
    return (double)sum / 10.0;
}

// a fresh sampling seed for a request that gives none (mu held): splitmix64
static uint64_t next_seed(void) {
    uint64_t z = (S.seed_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// a library message without the function name in front ("fat5_engine_submit: x" -> "x")
static const char *plain_error(const char *msg) {
    const char *c = msg && !strncmp(msg, "fat5_", 5) ? strstr(msg, ": ") : NULL;
    if (!msg) return "unknown error";
    if (c && !memchr(msg, ' ', (size_t)(c - msg))) return c + 2;
    return msg;
}

// ---------------------------------------------------------------------------------------------
// the engine thread

static void job_signal(sv_job *j) { pthread_cond_broadcast(&j->cv); }

// (mu held) the job failed: state, status and message
static void job_fail(sv_job *j, int status, const char *type, const char *msg) {
    j->state = JS_FAILED;
    j->err_status = status;
    j->err_type = type;
    snprintf(j->err, sizeof j->err, "%s", msg);
    job_signal(j);
}

// (mu held) appends an output token
static int job_push(sv_job *j, int32_t t) {
    if (j->n_tokens == j->cap_tokens) {
        int64_t nc = j->cap_tokens ? 2 * j->cap_tokens : 64;
        int32_t *p = (int32_t *)realloc(j->tokens, (size_t)nc * sizeof *p);
        if (!p) return 0;
        j->tokens = p, j->cap_tokens = nc;
    }
    j->tokens[j->n_tokens++] = t;
    return 1;
}

static void active_remove(int64_t k) { S.active[k] = S.active[--S.n_active]; }

static int active_add(sv_job *j) {
    if (S.n_active == S.cap_active) {
        int64_t nc = S.cap_active ? 2 * S.cap_active : 64;
        sv_job **p = (sv_job **)realloc(S.active, (size_t)nc * sizeof *p);
        if (!p) return 0;
        S.active = p, S.cap_active = nc;
    }
    S.active[S.n_active++] = j;
    return 1;
}

// (mu held) applies one engine event to its job
static void apply_event(const fat5_engine_event *ev, double now) {
    int64_t k, before;
    sv_job *j = NULL;
    for (k = 0; k < S.n_active; k++)
        if (S.active[k]->eid == ev->id) {
            j = S.active[k];
            break;
        }
    if (!j) return;
    before = j->n_tokens;
    if (ev->finish != FAT5_FINISH_NONE) {   // the whole output (beam search: the best hypothesis)
        int64_t i;
        if (ev->n_tokens >= j->n_tokens && ev->tokens) {
            j->n_tokens = 0;
            for (i = 0; i < ev->n_tokens; i++)
                if (!job_push(j, ev->tokens[i])) break;
        } else if (ev->token >= 0) {
            job_push(j, ev->token);
        }
        j->finish = ev->finish;
        j->score = ev->score;
        j->state = JS_DONE;
        active_remove(k);
    } else if (ev->token >= 0) {
        job_push(j, ev->token);
        j->score = ev->score;
    }
    if (j->n_tokens > before) {
        uint64_t fresh = (uint64_t)(j->n_tokens - before);
        if (j->t_last == 0) hist_observe(&S.ttft, now - j->t_start);
        else if (fresh == 1) hist_observe(&S.tpot, now - j->t_last);
        j->t_last = now;
        S.tokens_total += fresh;
        rate_add(fresh);
    }
    job_signal(j);
}

// Creates the context, loads the model and creates the engine (the engine thread's first work).
// 0 with S.engine_error on failure.
static int engine_open(void) {
    const sv_config *c = &S.cfg;
    fat5_ctx_config cc = fat5_ctx_config_default();
    char why[512], no_gpu[200] = "";
    const fat5_model_config *mc;
    int gpu = 0;
    if (c->device != FAT5_DEVICE_CPU) {   // the GPU when there is one, unless --device says
        cc.device = FAT5_DEVICE_GPU;
        cc.dtype = c->dtype == FAT5_DTYPE_FP32 ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
        if (fat5_ctx_create(&cc, &S.ctx, why, sizeof why) != FAT5_OK) {
            if (c->device == FAT5_DEVICE_GPU || c->dtype == FAT5_DTYPE_BF16) {
                snprintf(S.engine_error, sizeof S.engine_error, "GPU: %.400s", why);
                return 0;
            }
            snprintf(no_gpu, sizeof no_gpu, " (no GPU: %.160s)", why);
            S.ctx = NULL;
        } else {
            gpu = 1;
        }
    }
    if (!S.ctx) {
        cc = fat5_ctx_config_default();
        if (c->threads >= 0) cc.n_threads = c->threads;
        if (fat5_ctx_create(&cc, &S.ctx, why, sizeof why) != FAT5_OK) {
            snprintf(S.engine_error, sizeof S.engine_error, "context: %.400s", why);
            return 0;
        }
    }
    if (fat5_model_load(S.ctx, c->model_dir, &S.model) != FAT5_OK || fat5_model_set_training(S.model, 0) != FAT5_OK) {
        snprintf(S.engine_error, sizeof S.engine_error, "%s", fat5_last_error(S.ctx));
        return 0;
    }
    mc = fat5_model_get_config(S.model);
    S.vocab_size = mc->vocab_size;
    S.d_model = mc->d_model;
    S.model_eos = mc->eos_token_id;
    snprintf(S.model_type, sizeof S.model_type, "%s", mc->model_type);
    snprintf(S.arch, sizeof S.arch, "%s", fat5_model_architecture(S.model));
    snprintf(S.device_name, sizeof S.device_name, "%s", gpu ? "cuda" : "cpu");
    snprintf(S.dtype_name, sizeof S.dtype_name, "%s", gpu && cc.dtype == FAT5_DTYPE_BF16 ? "bfloat16" : "float32");
    S.param_millions = (double)fat5_model_param_count(S.model) / 1e6;
    S.gen_defaults = fat5_generate_config_from_model(S.model);
    S.can_generate = mc->head == FAT5_HEAD_LM;
    if (S.can_generate) {
        fat5_engine_config ec = fat5_engine_config_default();
        ec.max_rows = c->max_rows;
        ec.max_input_tokens = c->max_input;
        ec.max_new_tokens = c->max_new;
        ec.max_waiting = c->max_queue;
        ec.join_interval = c->join_interval;
        if (fat5_engine_create(S.model, &ec, &S.engine) != FAT5_OK) {
            snprintf(S.engine_error, sizeof S.engine_error, "engine: %s", plain_error(fat5_last_error(S.ctx)));
            return 0;
        }
    }
    fprintf(stderr, "serve: loaded %s (%s, %.1fM parameters) on the %s%s%s\n", c->model_dir, S.arch, S.param_millions,
            gpu ? "GPU" : "CPU", gpu ? (cc.dtype == FAT5_DTYPE_BF16 ? " (bf16)" : " (fp32)") : "", no_gpu);
    return 1;
}

static void engine_close(void) {
    fat5_engine_destroy(S.engine);
    fat5_model_destroy(S.model);
    fat5_ctx_destroy(S.ctx);
    S.engine = NULL, S.model = NULL, S.ctx = NULL;
}

// Runs an embedding job (mu not held).
static void run_embed(sv_job *j) {
    fat5_status st = fat5_model_encode(S.model, j->tok, j->cu, j->n_seq, FAT5_POOL_MEAN, j->out, j->n_seq * S.d_model);
    char msg[512];
    if (st != FAT5_OK) snprintf(msg, sizeof msg, "%s", plain_error(fat5_last_error(S.ctx)));
    sv_lock();
    if (st == FAT5_OK) {
        j->state = JS_DONE;
        job_signal(j);
    } else {
        job_fail(j, st == FAT5_ERR_INVALID_ARG ? 422 : 500, st == FAT5_ERR_INVALID_ARG ? "validation" : "internal", msg);
    }
    sv_unlock();
}

// Submits a generation job (mu not held).
static void run_submit(sv_job *j) {
    uint64_t id = 0;
    fat5_status st = fat5_engine_submit(S.engine, j->ids, j->n_ids, &j->g, &id);
    char msg[512];
    if (st != FAT5_OK) snprintf(msg, sizeof msg, "%s", plain_error(fat5_last_error(S.ctx)));
    sv_lock();
    if (st == FAT5_OK && active_add(j)) {
        j->eid = id;
        j->state = JS_RUNNING;
        job_signal(j);
    } else if (st == FAT5_OK) {   // no memory to track it: take it back
        sv_unlock();
        fat5_engine_cancel(S.engine, id);
        sv_lock();
        job_fail(j, 500, "internal", "out of memory");
        // its cancellation event names an id no job has: apply_event drops it
    } else if (st == FAT5_ERR_BUSY) {
        job_fail(j, 503, "overloaded", "the queue is full (--max-queue); try again later");
    } else if (st == FAT5_ERR_INVALID_ARG || st == FAT5_ERR_UNSUPPORTED) {
        job_fail(j, 422, "validation", msg);
    } else {
        job_fail(j, 500, "internal", msg);
    }
    sv_unlock();
}

// The engine thread: opens the model, then admits, cancels and steps until told to exit.
static void *engine_main(void *arg) {
    (void)arg;
    if (!engine_open()) {
        engine_close();
        sv_lock();
        S.engine_failed = 1;
        pthread_cond_broadcast(&S.idle_cv);
        sv_unlock();
        return NULL;
    }
    sv_lock();
    S.engine_ready = 1;
    pthread_cond_broadcast(&S.idle_cv);
    for (;;) {
        sv_job *batch, *j, *next;
        uint64_t *cancels = NULL;
        int64_t n_cancel = 0, k, n_ev = 0;
        const fat5_engine_event *ev = NULL;
        fat5_status st;
        int busy = S.engine && !S.broken && (S.stats.running + S.stats.waiting > 0);
        while (!S.qhead && S.n_active == 0 && !busy && !S.engine_exit) pthread_cond_wait(&S.engine_cv, &S.mu);
        if (S.engine_exit && !S.qhead && S.n_active == 0) break;
        batch = S.qhead;
        S.qhead = S.qtail = NULL;
        S.n_queued = 0;
        sv_unlock();
        for (j = batch; j; j = next) {   // admit the new requests (in arrival order)
            int skip;
            next = j->next;
            j->next = NULL;
            sv_lock();
            skip = j->cancel != WHY_NONE || S.cancel_all || S.broken;
            if (S.broken && j->cancel == WHY_NONE && !S.cancel_all) {   // the engine failed: nothing runs any more
                job_fail(j, 503, "unavailable", S.broken_msg);
            } else if (skip) {
                j->state = JS_DONE;
                j->finish = FAT5_FINISH_CANCELLED;
                job_signal(j);
            }
            sv_unlock();
            if (skip) continue;
            if (j->kind == JOB_EMBED) run_embed(j);
            else run_submit(j);
        }
        sv_lock();   // the cancellations asked for
        if (S.n_active) cancels = (uint64_t *)malloc((size_t)S.n_active * sizeof *cancels);
        for (k = 0; k < S.n_active && cancels; k++) {
            j = S.active[k];
            if (S.cancel_all && j->cancel == WHY_NONE) j->cancel = WHY_SHUTDOWN;
            if (j->cancel != WHY_NONE && !j->cancel_sent) {
                j->cancel_sent = 1;
                cancels[n_cancel++] = j->eid;
            }
        }
        sv_unlock();
        for (k = 0; k < n_cancel; k++) fat5_engine_cancel(S.engine, cancels[k]);   // a finished one: refused, harmless
        free(cancels);
        if (!S.engine || S.broken) {   // a model without a decoder runs embeddings only; a failed engine nothing
            sv_lock();
            continue;
        }
        st = fat5_engine_step(S.engine, &ev, &n_ev);
        if (st != FAT5_OK) {   // every running request fails; the server reports itself unhealthy
            char msg[512];
            snprintf(msg, sizeof msg, "decoding failed: %s", plain_error(fat5_last_error(S.ctx)));
            fprintf(stderr, "serve: %s\n", msg);
            sv_lock();
            S.broken = 1;
            snprintf(S.broken_msg, sizeof S.broken_msg, "%s", msg);
            while (S.n_active > 0) {   // (the engine is not stepped again: its requests stay with it)
                j = S.active[0];
                active_remove(0);
                job_fail(j, 500, "internal", msg);
            }
            continue;
        }
        {
            double now = now_s();
            fat5_engine_stats stats;
            fat5_engine_stats_get(S.engine, &stats);
            sv_lock();
            for (k = 0; k < n_ev; k++) apply_event(&ev[k], now);
            S.stats = stats;
            if (stats.running + stats.waiting == 0 && S.n_active > 0) {   // the engine has none of them: never expected
                while (S.n_active > 0) {
                    j = S.active[0];
                    active_remove(0);
                    job_fail(j, 500, "internal", "the engine lost the request");
                }
            }
            sv_unlock();
        }
        if (S.cfg.step_delay_ms > 0 && n_ev > 0) sv_sleep(S.cfg.step_delay_ms / 1000.0);
        sv_lock();
    }
    sv_unlock();
    engine_close();
    return NULL;
}

// (mu held) queues a job for the engine thread
static void job_queue(sv_job *j) {
    j->next = NULL;
    if (S.qtail) S.qtail->next = j;
    else S.qhead = j;
    S.qtail = j;
    S.n_queued++;
    pthread_cond_signal(&S.engine_cv);
}

static sv_job *job_new(int kind, double t_start) {
    sv_job *j = (sv_job *)calloc(1, sizeof *j);
    pthread_condattr_t ca;
    if (!j) return NULL;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (pthread_cond_init(&j->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        free(j);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    j->kind = kind;
    j->t_start = t_start;
    return j;
}

static void job_free(sv_job *j) {
    if (!j) return;
    pthread_cond_destroy(&j->cv);
    free(j->tokens);
    free(j);
}

// (mu held) asks for the job's cancellation
static void job_cancel(sv_job *j, int why) {
    if (j->cancel == WHY_NONE) j->cancel = why;
    pthread_cond_signal(&S.engine_cv);
}

// ---------------------------------------------------------------------------------------------
// connections: reading requests, writing responses

typedef struct sv_conn {
    int fd;
    sv_http http;
    char rbuf[16384];
    size_t rpos, rlen;        // bytes read and not yet parsed (a pipelined request's)
    int close_after;          // close once the response is written
    int linger;               // an error answered before the request was read whole: drain, then close
    int dead;                 // the client is gone (a write failed): close without more
    int ep;                   // the endpoint of the request being answered (metrics)
    double t_req;             // when its first byte came
} sv_conn;

static const char *sv_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

// Writes all n bytes (each send bounded by --write-timeout through SO_SNDTIMEO). 0 when the
// client is gone or stopped reading: the connection is then dead.
static int conn_send(sv_conn *c, const char *p, size_t n) {
    while (n > 0 && !c->dead) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            c->dead = 1;
            break;
        }
        p += k;
        n -= (size_t)k;
    }
    return !c->dead;
}

// A whole response with a body. extra: more header lines ("Retry-After: 1\r\n"), or NULL.
static int conn_respond(sv_conn *c, int status, const char *ctype, const char *body, size_t n, const char *extra) {
    char head[512];
    int k;
    if (S.stopping) c->close_after = 1;
    k = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: %s\r\n%s\r\n",
                 status, sv_reason(status), ctype, n, c->close_after ? "close" : "keep-alive", extra ? extra : "");
    sv_lock();
    count_request(c->ep, status);
    sv_unlock();
    return conn_send(c, head, (size_t)k) && conn_send(c, body, n);
}

// A JSON error response: {"error": msg, "error_type": type}
static int conn_error(sv_conn *c, int status, const char *type, const char *msg, const char *extra) {
    sv_buf b = {NULL, 0, 0, 0};
    int ok;
    sv_buf_puts(&b, "{\"error\": ");
    sv_buf_json_str(&b, msg, strlen(msg));
    sv_buf_puts(&b, ", \"error_type\": ");
    sv_buf_json_str(&b, type, strlen(type));
    sv_buf_puts(&b, "}");
    ok = !b.oom ? conn_respond(c, status, "application/json", b.p, b.n, extra)
                : conn_respond(c, 500, "application/json", "{\"error\": \"out of memory\", \"error_type\": \"internal\"}", 53, NULL);
    sv_buf_free(&b);
    return ok;
}

static int conn_fail(sv_conn *c, const sv_error *e) {
    const char *extra = e->status == 503 ? "Retry-After: 1\r\n" : NULL;
    return conn_error(c, e->status, e->type ? e->type : "bad_request", e->msg, extra);
}

// 1 when the client closed its side or the connection broke (a request it no longer waits for)
static int client_gone(sv_conn *c, int *pipelined) {
    struct pollfd p;
    char ch;
    ssize_t k;
    if (c->dead) return 1;
    if (*pipelined || c->rpos < c->rlen) return 0;
    p.fd = c->fd, p.events = POLLIN, p.revents = 0;
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLERR | POLLNVAL)) return 1;
    if (!(p.revents & (POLLIN | POLLHUP))) return 0;
    k = recv(c->fd, &ch, 1, MSG_PEEK);
    if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) return 1;
    if (k > 0) *pipelined = 1;   // the next request's bytes: hang-ups can no longer be seen by peeking
    return 0;
}

// Closes a connection after an error response: the write side first, then what the client still
// sends is read and dropped for a moment, so that the response is not lost to a reset.
static void lingering_close(sv_conn *c) {
    double t_end = now_s() + 1.0;
    size_t drained = 0;
    if (!c->dead) {
        shutdown(c->fd, SHUT_WR);
        while (drained < (8u << 20)) {
            struct pollfd p;
            double left = t_end - now_s();
            char buf[4096];
            ssize_t k;
            if (left <= 0) break;
            p.fd = c->fd, p.events = POLLIN, p.revents = 0;
            if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) break;
            k = recv(c->fd, buf, sizeof buf, 0);
            if (k <= 0) break;
            drained += (size_t)k;
        }
    }
    close(c->fd);
}

// Reads the next request into c->http. 1: a request; 0: close the connection (the client closed
// it, was idle too long, sent a malformed request (answered) or took too long (408), or the server
// is stopping).
static int conn_read_request(sv_conn *c, int first) {
    double t0 = now_s();
    int sent_continue = 0;
    c->t_req = 0;
    sv_http_reset(&c->http);
    for (;;) {
        double deadline, left;
        struct pollfd p;
        ssize_t k;
        if (c->rpos < c->rlen) {
            size_t used;
            if (c->t_req == 0) c->t_req = now_s();
            used = sv_http_feed(&c->http, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rpos += used;
            if (c->http.state == SV_HTTP_DONE) return 1;
            if (c->http.state == SV_HTTP_ERROR) {   // counted under its endpoint when the path was read
                const char *allow;
                c->close_after = 1;
                c->ep = c->http.path[0] ? sv_route(c->http.method, c->http.path, &allow, NULL) : 0;
                c->linger = 1;
                conn_fail(c, &c->http.err);
                return 0;
            }
            if (c->http.head_done && c->http.expect_continue && !sent_continue) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                sent_continue = 1;
                if (!conn_send(c, cont, sizeof cont - 1)) return 0;
            }
            continue;
        }
        deadline = c->t_req ? c->t_req + S.cfg.read_timeout : t0 + (first ? S.cfg.read_timeout : S.cfg.idle_timeout);
        left = deadline - now_s();
        if (S.stopping) {
            if (c->t_req) {
                c->close_after = 1;
                c->linger = 1;
                conn_error(c, 503, "unavailable", "the server is shutting down", NULL);
            }
            return 0;
        }
        if (left <= 0) {
            if (c->t_req) {   // a request started and did not come whole in time
                char msg[200];
                snprintf(msg, sizeof msg, "the request did not arrive within %g s (--read-timeout)", S.cfg.read_timeout);
                const char *allow;
                c->close_after = 1;
                c->ep = c->http.path[0] ? sv_route(c->http.method, c->http.path, &allow, NULL) : 0;
                c->linger = 1;
                conn_error(c, 408, "timeout", msg, NULL);
            }
            return 0;
        }
        p.fd = c->fd, p.events = POLLIN, p.revents = 0;
        if (poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1000) + 1) <= 0) continue;
        k = recv(c->fd, c->rbuf, sizeof c->rbuf, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (k <= 0) {
            c->dead = 1;
            return 0;
        }
        c->rpos = 0;
        c->rlen = (size_t)k;
    }
}

// ---------------------------------------------------------------------------------------------
// tokens and text

// The ids of a text: the tokenizer's (its post-processor appends EOS; appended here when its
// template has none), or byte-level (byte + 3, then EOS). *ids is malloc'd. 0 with *e on failure.
static int text_ids(const char *text, size_t len, int32_t **ids, int64_t *n, sv_error *e) {
    int32_t *t = NULL, eos;
    int64_t k, nt = 0;
    *ids = NULL, *n = 0;
    if (S.tok) {
        int32_t *out;
        pthread_mutex_lock(&S.tok_mu);
        if (fat5_tokenize(S.tok, text, len, NULL, 0, 0, &t, &nt) != FAT5_OK) {
            sv_fail(e, 422, "validation", "the input cannot be tokenized: %s", plain_error(fat5_last_error(S.tok_ctx)));
            pthread_mutex_unlock(&S.tok_mu);
            return 0;
        }
        eos = S.eos_id >= 0 ? S.eos_id : (int32_t)S.model_eos;
        out = (int32_t *)malloc((size_t)(nt + 1) * sizeof *out);
        if (out) {
            if (nt) memcpy(out, t, (size_t)nt * sizeof *out);
            if (nt == 0 || out[nt - 1] != eos) out[nt++] = eos;
        }
        fat5_free(S.tok_ctx, t);
        pthread_mutex_unlock(&S.tok_mu);
        if (!out) return sv_fail(e, 500, "internal", "out of memory");
        *ids = out, *n = nt;
        return 1;
    }
    if (!(t = (int32_t *)malloc((len + 1) * sizeof *t))) return sv_fail(e, 500, "internal", "out of memory");
    for (k = 0; k < (int64_t)len; k++) t[k] = (int32_t)(unsigned char)text[k] + 3;
    t[len] = (int32_t)S.model_eos;
    *ids = t, *n = (int64_t)len + 1;
    return 1;
}

// The ids of input row i of a request (tokenized, or as given): malloc'd.
static int request_ids(const sv_req *r, int64_t i, int32_t **ids, int64_t *n, sv_error *e) {
    int64_t k;
    if (r->texts) {
        if (!text_ids(r->texts[i], r->text_lens[i], ids, n, e)) return 0;
    } else {
        if (!(*ids = (int32_t *)malloc((size_t)r->n_ids[i] * sizeof **ids))) return sv_fail(e, 500, "internal", "out of memory");
        memcpy(*ids, r->ids[i], (size_t)r->n_ids[i] * sizeof **ids);
        *n = r->n_ids[i];
    }
    for (k = 0; k < *n; k++)
        if ((*ids)[k] >= S.vocab_size)
            return sv_fail(e, 422, "validation", "input token %lld is id %d, not below the vocabulary size %lld", (long long)k,
                           (int)(*ids)[k], (long long)S.vocab_size);
    return 1;
}

// The text of one generated sequence as it comes: each token's part, whole characters only.
typedef struct sv_detok {
    fat5_detok_stream *ds;    // the tokenizer's (NULL: byte-level)
    sv_utf8_stream us;
} sv_detok;

static int detok_open(sv_detok *d) {
    memset(d, 0, sizeof *d);
    if (!S.tok) return 1;
    pthread_mutex_lock(&S.tok_mu);
    if (fat5_detok_stream_create(S.tok, FAT5_DETOKENIZE_SKIP_SPECIAL, &d->ds) != FAT5_OK) d->ds = NULL;
    pthread_mutex_unlock(&S.tok_mu);
    return d->ds != NULL;
}

static void detok_close(sv_detok *d) {
    if (!d->ds) return;
    pthread_mutex_lock(&S.tok_mu);
    fat5_detok_stream_destroy(d->ds);
    pthread_mutex_unlock(&S.tok_mu);
    d->ds = NULL;
}

// Pushes token id (id < 0: none) and appends the text that became final to out; last: the rest.
// *special (when not NULL) says whether the token is a special one (no text of its own: EOS, pad,
// sentinels). A token the tokenizer does not know (a vocabulary padded past it) gives no text.
static void detok_push(sv_detok *d, int32_t id, int last, sv_buf *out, int *special) {
    if (special) *special = 0;
    if (!d->ds) {   // byte-level: ids 3 .. 258 are bytes
        char ch = (char)(id - 3);
        int byte = id >= 3 && id < 259;
        if (special) *special = id >= 0 && !byte;
        sv_utf8_stream_push(&d->us, &ch, byte ? 1 : 0, last, out);
        return;
    }
    pthread_mutex_lock(&S.tok_mu);
    {
        const char *text = NULL;
        size_t len = 0;
        int known = id >= 0 && id < S.tok_vocab;
        if (special && id >= 0) {
            char *a = NULL, *b = NULL;
            size_t la = 0, lb = 0;
            if (!known) *special = 1;
            else if (id == S.eos_id || id == S.pad_id) *special = 1;
            else if (fat5_detokenize(S.tok, &id, 1, FAT5_DETOKENIZE_SKIP_SPECIAL, &a, &la) == FAT5_OK &&
                     fat5_detokenize(S.tok, &id, 1, 0, &b, &lb) == FAT5_OK)
                *special = la == 0 && lb > 0;
            fat5_free(S.tok_ctx, a);
            fat5_free(S.tok_ctx, b);
        }
        if (fat5_detok_stream_push(d->ds, &id, known ? 1 : 0, last, &text, &len) == FAT5_OK && len) sv_buf_put(out, text, len);
    }
    pthread_mutex_unlock(&S.tok_mu);
}

// The text of ids (special tokens left out), for return_full_text with input_ids.
static void ids_text(const int32_t *ids, int64_t n, sv_buf *out) {
    sv_detok d;
    int64_t k;
    if (!detok_open(&d)) return;
    for (k = 0; k < n; k++) detok_push(&d, ids[k], 0, out, NULL);
    detok_push(&d, -1, 1, out, NULL);
    detok_close(&d);
}

// ---------------------------------------------------------------------------------------------
// generation requests

// One generation request being answered: its tokens turned into text as they come.
typedef struct sv_gen {
    sv_conn *c;
    sv_job *j;
    const sv_req *r;
    int stream;                // server-sent events
    int chunked;               // the stream's body is chunked (HTTP/1.1)
    sv_detok dt;
    sv_buf text;               // the generated text so far
    sv_buf prefix;             // return_full_text: the input's text
    int32_t *ids;              // the tokens processed, each one's text end in `text`, special or not
    size_t *ends;
    unsigned char *special;
    int64_t n, cap;
    int stopped;               // a stop sequence or max_time ended it here (the job is cancelled)
    const char *reason;        // the finish reason given
    int final_sent;            // the stream's last event is out
    int pipelined;
    double deadline;           // max_time: a token after it is the last (0: none)
    int64_t n_input;
    uint64_t seed;
    int sampled;
} sv_gen;

static int gen_grow(sv_gen *q) {
    int64_t nc;
    int32_t *ids;
    size_t *ends;
    unsigned char *sp;
    if (q->n < q->cap) return 1;
    nc = q->cap ? 2 * q->cap : 64;
    ids = (int32_t *)realloc(q->ids, (size_t)nc * sizeof *ids);
    if (ids) q->ids = ids;
    ends = (size_t *)realloc(q->ends, (size_t)nc * sizeof *ends);
    if (ends) q->ends = ends;
    sp = (unsigned char *)realloc(q->special, (size_t)nc);
    if (sp) q->special = sp;
    if (!ids || !ends || !sp) return 0;
    q->cap = nc;
    return 1;
}

static const char *finish_name(fat5_finish f) {
    return f == FAT5_FINISH_EOS ? "eos_token" : f == FAT5_FINISH_LENGTH ? "length" : "cancelled";
}

// writes the bytes of one stream event (chunked when HTTP/1.1)
static int gen_send_event(sv_gen *q, const sv_buf *ev) {
    char head[32];
    int k;
    if (!q->chunked) return conn_send(q->c, ev->p, ev->n);
    k = snprintf(head, sizeof head, "%zx\r\n", ev->n);
    return conn_send(q->c, head, (size_t)k) && conn_send(q->c, ev->p, ev->n) && conn_send(q->c, "\r\n", 2);
}

// the details object of the last stream event / the /generate response
static void gen_details(sv_gen *q, sv_buf *b, int with_tokens) {
    int64_t k;
    sv_buf_printf(b, "{\"finish_reason\": \"%s\", \"generated_tokens\": %lld, \"input_length\": %lld, \"seed\": ", q->reason,
                  (long long)q->n, (long long)q->n_input);
    if (q->sampled) sv_buf_printf(b, "%llu", (unsigned long long)q->seed);
    else sv_buf_puts(b, "null");
    if (isfinite(q->j->score) && q->j->state == JS_DONE && !q->stopped) sv_buf_printf(b, ", \"score\": %.9g", q->j->score);
    if (with_tokens) {
        sv_buf_puts(b, ", \"prefill\": [], \"tokens\": [");
        for (k = 0; k < q->n; k++) {
            size_t a = k ? q->ends[k - 1] : 0;
            sv_buf_printf(b, "%s{\"id\": %d, \"text\": ", k ? ", " : "", (int)q->ids[k]);
            sv_buf_json_str(b, q->text.p + a, q->ends[k] - a);
            sv_buf_printf(b, ", \"logprob\": null, \"special\": %s}", q->special[k] ? "true" : "false");
        }
        sv_buf_puts(b, "], \"top_tokens\": null, \"best_of_sequences\": null");
    }
    sv_buf_puts(b, "}");
}

// generated_text: the input's text first with return_full_text
static void gen_text(sv_gen *q, sv_buf *b) {
    sv_buf all = {NULL, 0, 0, 0};
    sv_buf_put(&all, q->prefix.p ? q->prefix.p : "", q->prefix.n);
    sv_buf_put(&all, q->text.p ? q->text.p : "", q->text.n);
    sv_buf_json_str(b, all.p ? all.p : "", all.n);
    sv_buf_free(&all);
}

// A stream event for token k (the last one: with generated_text and details).
static int gen_event(sv_gen *q, int64_t k, int last) {
    sv_buf ev = {NULL, 0, 0, 0};
    int ok;
    sv_buf_printf(&ev, "data: {\"index\": %lld, \"token\": ", (long long)(k + 1));
    if (k >= 0) {
        size_t a = k ? q->ends[k - 1] : 0;
        sv_buf_printf(&ev, "{\"id\": %d, \"text\": ", (int)q->ids[k]);
        sv_buf_json_str(&ev, q->text.p + a, q->ends[k] - a);
        sv_buf_printf(&ev, ", \"logprob\": null, \"special\": %s}", q->special[k] ? "true" : "false");
    } else {
        sv_buf_puts(&ev, "null");
    }
    sv_buf_puts(&ev, ", \"generated_text\": ");
    if (last) gen_text(q, &ev);
    else sv_buf_puts(&ev, "null");
    sv_buf_puts(&ev, ", \"details\": ");
    if (last) gen_details(q, &ev, 0);
    else sv_buf_puts(&ev, "null");
    sv_buf_puts(&ev, "}\n\n");
    ok = !ev.oom && gen_send_event(q, &ev);
    sv_buf_free(&ev);
    if (last) q->final_sent = 1;
    return ok;
}

// an error event in a stream that has begun (TGI's form)
static void gen_error_event(sv_gen *q, const char *type, const char *msg) {
    sv_buf ev = {NULL, 0, 0, 0};
    sv_buf_puts(&ev, "data: {\"error\": ");
    sv_buf_json_str(&ev, msg, strlen(msg));
    sv_buf_puts(&ev, ", \"error_type\": ");
    sv_buf_json_str(&ev, type, strlen(type));
    sv_buf_puts(&ev, "}\n\n");
    if (!ev.oom) gen_send_event(q, &ev);
    sv_buf_free(&ev);
    q->final_sent = 1;
}

// 1 when the text ends with one of the request's stop sequences
static int gen_stop_hit(const sv_gen *q) {
    int64_t s;
    for (s = 0; s < q->r->n_stops; s++) {
        size_t l = q->r->stop_lens[s];
        if (q->text.n >= l && !memcmp(q->text.p + q->text.n - l, q->r->stops[s], l)) return 1;
    }
    return 0;
}

// Processes one new token: its text, the stop conditions, its stream event. done: the job has
// finished and this is its last token.
static void gen_token(sv_gen *q, int32_t id, int done, fat5_finish finish) {
    int special = 0, last = done;
    if (!gen_grow(q)) {
        q->c->dead = 1;
        return;
    }
    detok_push(&q->dt, id, 0, &q->text, &special);
    q->ids[q->n] = id;
    q->special[q->n] = (unsigned char)special;
    if (!done && gen_stop_hit(q)) q->stopped = 1, q->reason = "stop_sequence", last = 1;
    else if (!done && q->deadline > 0 && now_s() >= q->deadline) q->stopped = 1, q->reason = "max_time", last = 1;
    else if (done) q->reason = gen_stop_hit(q) ? "stop_sequence" : finish_name(finish);
    if (last) detok_push(&q->dt, -1, 1, &q->text, NULL);   // the text held back
    q->ends[q->n] = q->text.n;
    q->n++;
    if (q->stopped) {
        sv_lock();
        job_cancel(q->j, WHY_STOP);
        sv_unlock();
    }
    if (q->stream && !q->c->dead) gen_event(q, q->n - 1, last);
}

// (mu held) every tenth of a second: a client that went away gets its job cancelled
static void gen_check_client(sv_gen *q, double *next) {
    int gone;
    if (now_s() < *next || q->j->cancel != WHY_NONE || (q->j->state != JS_RUNNING && q->j->state != JS_QUEUED)) return;
    *next = now_s() + 0.1;
    sv_unlock();
    gone = client_gone(q->c, &q->pipelined);
    sv_lock();
    if (gone) q->c->dead = 1;
    if (q->c->dead) job_cancel(q->j, WHY_CLIENT);
}

// Follows the job until it is done: each token as it comes (events when streaming). Returns with
// the job DONE or FAILED.
static void gen_follow(sv_gen *q) {
    sv_job *j = q->j;
    int32_t *fresh = NULL;
    int64_t seen = 0, cap = 0;
    double next = now_s() + 0.1;
    sv_lock();
    for (;;) {
        int64_t k, nf;
        int done;
        fat5_finish finish;
        gen_check_client(q, &next);
        while (j->state == JS_RUNNING && (j->n_tokens == seen || q->stopped || q->c->dead)) {
            sv_timedwait(&j->cv, 0.1);
            gen_check_client(q, &next);
        }
        if (q->stopped || q->c->dead || j->state == JS_FAILED) break;
        nf = j->n_tokens - seen;
        if (nf > cap) {
            int32_t *p = (int32_t *)realloc(fresh, (size_t)nf * sizeof *p);
            if (!p) {
                q->c->dead = 1;
                job_cancel(j, WHY_CLIENT);
                continue;
            }
            fresh = p, cap = nf;
        }
        if (nf) memcpy(fresh, j->tokens + seen, (size_t)nf * sizeof *fresh);
        seen = j->n_tokens;
        done = j->state == JS_DONE;
        finish = j->finish;
        sv_unlock();
        for (k = 0; k < nf && !q->stopped; k++) gen_token(q, fresh[k], done && k == nf - 1, finish);
        if (q->c->dead) {
            sv_lock();
            job_cancel(j, WHY_CLIENT);
            continue;
        }
        sv_lock();
        if (done) break;
    }
    while (j->state == JS_RUNNING || j->state == JS_QUEUED) sv_timedwait(&j->cv, 0.1);   // the cancellation done
    sv_unlock();
    free(fresh);
}

// Answers a generation request: POST /generate, /generate_stream, and POST / (TGI's form).
static void handle_generate(sv_conn *c, int ep) {
    sv_req r;
    sv_error e;
    sv_gen q;
    sv_job *j = NULL;
    int32_t *ids = NULL;
    int64_t n_ids = 0, eff;
    int admitted = 0;
    double t_start = c->t_req ? c->t_req : now_s();
    memset(&q, 0, sizeof q);
    memset(&e, 0, sizeof e);
    if (!sv_req_parse(ep, c->http.body, c->http.body_len, &S.req_lim, &S.gen_defaults, &r, &e)) {
        conn_fail(c, &e);
        goto done;
    }
    if (!S.can_generate) {
        char msg[200];
        snprintf(msg, sizeof msg, "this checkpoint (%s) has no language-model head: it serves /embed only", S.arch);
        conn_error(c, 422, "validation", msg, NULL);
        goto done;
    }
    sv_lock();   // admission
    if (S.stopping || S.broken) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", S.stopping ? "the server is shutting down" : S.broken_msg);
        sv_unlock();
        conn_error(c, 503, "unavailable", msg, NULL);
        goto done;
    }
    if (S.inflight >= S.cfg.max_concurrent) {
        char msg[200];
        snprintf(msg, sizeof msg, "the server is at its limit of %lld concurrent requests (--max-concurrent-requests); "
                 "try again later", S.cfg.max_concurrent);
        sv_unlock();
        conn_error(c, 503, "overloaded", msg, "Retry-After: 1\r\n");
        goto done;
    }
    S.inflight++;
    admitted = 1;
    sv_unlock();
    if (!request_ids(&r, 0, &ids, &n_ids, &e)) {
        conn_fail(c, &e);
        goto done;
    }
    if (r.truncate > 0 && n_ids > r.truncate) {   // TGI's truncate: the last N tokens
        memmove(ids, ids + (n_ids - r.truncate), (size_t)r.truncate * sizeof *ids);
        n_ids = r.truncate;
    }
    if (n_ids > S.cfg.max_input) {
        char msg[256];
        snprintf(msg, sizeof msg, "the input has %lld tokens, more than the limit of %lld (--max-input-tokens); "
                 "parameters.truncate keeps the last N", (long long)n_ids, S.cfg.max_input);
        conn_error(c, 422, "validation", msg, NULL);
        goto done;
    }
    // max_new_tokens: the client's within the server's limit; the checkpoint's default capped to it
    eff = r.g.max_length > 0 ? r.g.max_length - 1 : r.g.max_new_tokens;
    if (eff > S.cfg.max_new) {
        if (r.has_max_new_tokens) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s = %lld is more than the limit of %lld new tokens (--max-new-tokens)",
                     r.g.max_length > 0 ? "max_length" : "max_new_tokens",
                     (long long)(r.g.max_length > 0 ? r.g.max_length : r.g.max_new_tokens), S.cfg.max_new);
            conn_error(c, 422, "validation", msg, NULL);
            goto done;
        }
        r.g.max_new_tokens = S.cfg.max_new, r.g.max_length = 0;
        eff = S.cfg.max_new;
    }
    q.sampled = r.g.do_sample;
    if (r.g.do_sample && !r.has_seed) {
        sv_lock();
        r.g.seed = next_seed();
        sv_unlock();
    }
    q.seed = r.g.seed;
    r.g.max_time = 0, r.g.n_stop_strings = 0, r.g.stop_strings = NULL;   // the server's own
    r.g.stream = NULL;
    if (!(j = job_new(JOB_GENERATE, t_start)) || !detok_open(&q.dt)) {
        conn_error(c, 500, "internal", "out of memory", NULL);
        goto done;
    }
    j->ids = ids, j->n_ids = n_ids;
    j->g = r.g;
    j->cap_tokens = eff + 1;
    if (!(j->tokens = (int32_t *)malloc((size_t)j->cap_tokens * sizeof *j->tokens))) {
        conn_error(c, 500, "internal", "out of memory", NULL);
        goto done;
    }
    q.c = c, q.j = j, q.r = &r, q.stream = r.endpoint == SV_EP_STREAM, q.n_input = n_ids;
    q.chunked = c->http.minor >= 1;
    if (r.max_time > 0) q.deadline = t_start + r.max_time;
    if (r.return_full_text) {
        if (r.texts) sv_buf_put(&q.prefix, r.texts[0], r.text_lens[0]);
        else ids_text(ids, n_ids, &q.prefix);
    }
    sv_lock();
    S.gen_requests++;
    job_queue(j);
    while (j->state == JS_QUEUED) {   // until the engine takes it (or refuses it)
        sv_timedwait(&j->cv, 0.1);
        if (j->state == JS_QUEUED && j->cancel == WHY_NONE) {
            int gone;
            sv_unlock();
            gone = client_gone(c, &q.pipelined);
            sv_lock();
            if (gone) c->dead = 1, job_cancel(j, WHY_CLIENT);
        }
    }
    sv_unlock();
    if (j->state == JS_FAILED) {
        conn_error(c, j->err_status, j->err_type, j->err, j->err_status == 503 ? "Retry-After: 1\r\n" : NULL);
        goto done;
    }
    if (j->state == JS_DONE && j->n_tokens == 0 && j->finish == FAT5_FINISH_CANCELLED) {   // cancelled while queued
        if (!c->dead) conn_error(c, 503, "unavailable", "the server is shutting down: the request was cancelled", NULL);
        goto done;
    }
    if (q.stream) {
        char head[400];
        int k;
        if (!q.chunked) c->close_after = 1;
        if (S.stopping) c->close_after = 1;
        k = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n%s"
                     "Connection: %s\r\n\r\n", q.chunked ? "Transfer-Encoding: chunked\r\n" : "",
                     c->close_after ? "close" : "keep-alive");
        sv_lock();
        count_request(c->ep, 200);
        sv_unlock();
        conn_send(c, head, (size_t)k);
    }
    gen_follow(&q);
    if (c->dead) goto done;
    if (!q.stopped && (j->state == JS_FAILED || (j->finish == FAT5_FINISH_CANCELLED))) {   // shutdown or a failed step
        const char *msg = j->state == JS_FAILED ? j->err : "the server is shutting down: the request was cancelled";
        const char *type = j->state == JS_FAILED ? j->err_type : "unavailable";
        if (q.stream) gen_error_event(&q, type, msg);
        else conn_error(c, j->state == JS_FAILED ? j->err_status : 503, type, msg, NULL);
    } else if (q.stream) {
        if (!q.final_sent) {   // finished without a token this side saw last (an empty output)
            if (!q.reason) q.reason = finish_name(j->finish);
            detok_push(&q.dt, -1, 1, &q.text, NULL);
            gen_event(&q, -1, 1);
        }
    } else {
        sv_buf b = {NULL, 0, 0, 0};
        if (!q.reason) q.reason = finish_name(j->finish);
        if (q.n == 0) detok_push(&q.dt, -1, 1, &q.text, NULL);
        sv_buf_puts(&b, "{\"generated_text\": ");
        gen_text(&q, &b);
        if (r.details) {
            sv_buf_puts(&b, ", \"details\": ");
            gen_details(&q, &b, 1);
        }
        sv_buf_puts(&b, "}");
        if (b.oom) conn_error(c, 500, "internal", "out of memory", NULL);
        else conn_respond(c, 200, "application/json", b.p, b.n, NULL);
        sv_buf_free(&b);
    }
    if (q.stream && q.chunked && !c->dead) conn_send(c, "0\r\n\r\n", 5);
done:
    if (j) {   // the engine thread is done with it
        sv_lock();
        if (j->state == JS_QUEUED || j->state == JS_RUNNING) {
            job_cancel(j, WHY_CLIENT);
            while (j->state == JS_QUEUED || j->state == JS_RUNNING) sv_timedwait(&j->cv, 0.1);
        }
        sv_unlock();
    }
    if (admitted) {
        sv_lock();
        S.inflight--;
        hist_observe(&S.duration, now_s() - t_start);
        pthread_cond_broadcast(&S.idle_cv);
        sv_unlock();
    }
    job_free(j);
    detok_close(&q.dt);
    sv_buf_free(&q.text);
    sv_buf_free(&q.prefix);
    free(q.ids);
    free(q.ends);
    free(q.special);
    free(ids);
    sv_req_free(&r);
}

// ---------------------------------------------------------------------------------------------
// embeddings, health, info, metrics

// POST /embed: {"inputs": "text" | ["a", "b"]} -> [[floats]] (the encoder's mean-pooled states)
static void handle_embed(sv_conn *c) {
    sv_req r;
    sv_error e;
    sv_job *j = NULL;
    int32_t *tok = NULL, *cu = NULL;
    float *out = NULL;
    int64_t i, k, n_tok = 0, cap = 0;
    int admitted = 0, pipelined = 0;
    sv_buf b = {NULL, 0, 0, 0};
    memset(&e, 0, sizeof e);
    if (!sv_req_parse(SV_EP_EMBED, c->http.body, c->http.body_len, &S.req_lim, &S.gen_defaults, &r, &e)) {
        conn_fail(c, &e);
        goto done;
    }
    sv_lock();
    if (S.stopping || S.inflight >= S.cfg.max_concurrent) {
        int stopping = S.stopping;
        sv_unlock();
        conn_error(c, 503, stopping ? "unavailable" : "overloaded",
                   stopping ? "the server is shutting down" : "the server is at its limit of concurrent requests "
                                                              "(--max-concurrent-requests); try again later",
                   stopping ? NULL : "Retry-After: 1\r\n");
        goto done;
    }
    S.inflight++;
    admitted = 1;
    sv_unlock();
    if (!(cu = (int32_t *)malloc((size_t)(r.n_inputs + 1) * sizeof *cu))) {
        conn_error(c, 500, "internal", "out of memory", NULL);
        goto done;
    }
    cu[0] = 0;
    for (i = 0; i < r.n_inputs; i++) {   // every input's ids, packed
        int32_t *ids = NULL;
        int64_t n = 0;
        if (!request_ids(&r, i, &ids, &n, &e)) {
            free(ids);
            conn_fail(c, &e);
            goto done;
        }
        if (n > S.cfg.max_input) {
            if (!r.truncate_embed) {
                char msg[256];
                free(ids);
                snprintf(msg, sizeof msg, "input %lld has %lld tokens, more than the limit of %lld (--max-input-tokens); "
                         "\"truncate\": true cuts it", (long long)i, (long long)n, S.cfg.max_input);
                conn_error(c, 422, "validation", msg, NULL);
                goto done;
            }
            if (ids[n - 1] == (S.eos_id >= 0 ? S.eos_id : (int32_t)S.model_eos)) ids[S.cfg.max_input - 1] = ids[n - 1];
            n = S.cfg.max_input;
        }
        if (n_tok + n > cap) {
            int64_t nc = (n_tok + n) * 2;
            int32_t *p = (int32_t *)realloc(tok, (size_t)nc * sizeof *p);
            if (!p) {
                free(ids);
                conn_error(c, 500, "internal", "out of memory", NULL);
                goto done;
            }
            tok = p, cap = nc;
        }
        memcpy(tok + n_tok, ids, (size_t)n * sizeof *ids);
        free(ids);
        n_tok += n;
        cu[i + 1] = (int32_t)n_tok;
    }
    if (!(out = (float *)malloc((size_t)(r.n_inputs * S.d_model) * sizeof *out)) ||
        !(j = job_new(JOB_EMBED, c->t_req ? c->t_req : now_s()))) {
        conn_error(c, 500, "internal", "out of memory", NULL);
        goto done;
    }
    j->tok = tok, j->cu = cu, j->n_seq = r.n_inputs, j->out = out;
    sv_lock();
    S.embed_inputs += (uint64_t)r.n_inputs;
    job_queue(j);
    while (j->state == JS_QUEUED) {
        sv_timedwait(&j->cv, 0.1);
        if (j->state == JS_QUEUED && j->cancel == WHY_NONE) {
            int gone;
            sv_unlock();
            gone = client_gone(c, &pipelined);
            sv_lock();
            if (gone) c->dead = 1, job_cancel(j, WHY_CLIENT);
        }
    }
    sv_unlock();
    if (c->dead) goto done;
    if (j->state == JS_FAILED) {
        conn_error(c, j->err_status, j->err_type, j->err, NULL);
        goto done;
    }
    if (j->finish == FAT5_FINISH_CANCELLED) {
        conn_error(c, 503, "unavailable", "the server is shutting down: the request was cancelled", NULL);
        goto done;
    }
    sv_buf_puts(&b, "[");
    for (i = 0; i < r.n_inputs; i++) {
        const float *v = out + i * S.d_model;
        double norm = 0;
        if (r.normalize) {
            for (k = 0; k < S.d_model; k++) norm += (double)v[k] * v[k];
            norm = norm > 0 ? 1.0 / sqrt(norm) : 1.0;
        }
        sv_buf_puts(&b, i ? ", [" : "[");
        for (k = 0; k < S.d_model; k++) {
            double x = r.normalize ? (double)v[k] * norm : (double)v[k];
            if (isfinite(x)) sv_buf_printf(&b, "%s%.9g", k ? ", " : "", r.normalize ? (double)(float)x : x);
            else sv_buf_printf(&b, "%snull", k ? ", " : "");
        }
        sv_buf_puts(&b, "]");
    }
    sv_buf_puts(&b, "]");
    if (b.oom) conn_error(c, 500, "internal", "out of memory", NULL);
    else conn_respond(c, 200, "application/json", b.p, b.n, NULL);
done:
    if (admitted) {
        sv_lock();
        S.inflight--;
        pthread_cond_broadcast(&S.idle_cv);
        sv_unlock();
    }
    job_free(j);
    free(tok);
    free(cu);
    free(out);
    sv_buf_free(&b);
    sv_req_free(&r);
}

static void handle_info(sv_conn *c) {
    sv_buf b = {NULL, 0, 0, 0};
    sv_buf_puts(&b, "{\"model_id\": ");
    sv_buf_json_str(&b, S.cfg.model_dir, strlen(S.cfg.model_dir));
    sv_buf_puts(&b, ", \"model_type\": ");
    sv_buf_json_str(&b, S.model_type, strlen(S.model_type));
    sv_buf_puts(&b, ", \"architecture\": ");
    sv_buf_json_str(&b, S.arch, strlen(S.arch));
    sv_buf_printf(&b, ", \"model_dtype\": \"%s\", \"model_device_type\": \"%s\", \"model_pipeline_tag\": \"%s\"",
                  S.dtype_name, S.device_name, S.can_generate ? "text2text-generation" : "feature-extraction");
    sv_buf_printf(&b, ", \"parameters\": %.0f, \"vocab_size\": %lld, \"d_model\": %lld, \"tokenizer\": ",
                  S.param_millions * 1e6, (long long)S.vocab_size, (long long)S.d_model);
    if (S.tok) sv_buf_json_str(&b, S.tok_path, strlen(S.tok_path));
    else sv_buf_puts(&b, "\"byte-level\"");
    sv_buf_printf(&b, ", \"max_concurrent_requests\": %lld, \"max_input_tokens\": %lld, \"max_new_tokens\": %lld"
                  ", \"max_total_tokens\": %lld, \"max_batch_size\": %lld, \"max_batch_rows\": %lld, \"max_queue\": %lld"
                  ", \"max_stop_sequences\": %lld, \"max_client_batch_size\": %lld, \"max_best_of\": 1"
                  ", \"router\": \"fat5-serve\", \"version\": \"%s\"}",
                  S.cfg.max_concurrent, S.cfg.max_input, S.cfg.max_new, S.cfg.max_input + S.cfg.max_new, S.cfg.max_rows,
                  S.cfg.max_rows, S.cfg.max_queue, S.cfg.max_stops, S.cfg.max_embed, fat5_version());
    if (b.oom) conn_error(c, 500, "internal", "out of memory", NULL);
    else conn_respond(c, 200, "application/json", b.p, b.n, NULL);
    sv_buf_free(&b);
}

static void handle_metrics(sv_conn *c) {
    sv_buf b = {NULL, 0, 0, 0};
    int ep, k;
    sv_lock();
    sv_buf_puts(&b, "# HELP fat5_requests_total Requests answered, by endpoint and HTTP status.\n"
                    "# TYPE fat5_requests_total counter\n");
    for (ep = 0; ep < SV_N_EP; ep++)
        for (k = 0; k < S.n_status; k++)
            if (S.req_counts[ep][k])
                sv_buf_printf(&b, "fat5_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n", ep_names[ep], S.req_status[k],
                              (unsigned long long)S.req_counts[ep][k]);
    sv_buf_printf(&b, "# HELP fat5_requests_in_flight Generation and embedding requests admitted and not yet answered.\n"
                  "# TYPE fat5_requests_in_flight gauge\nfat5_requests_in_flight %lld\n", (long long)S.inflight);
    sv_buf_printf(&b, "# HELP fat5_queue_depth Requests waiting for decoder rows (the server's queue and the engine's).\n"
                  "# TYPE fat5_queue_depth gauge\nfat5_queue_depth %lld\n", (long long)(S.n_queued + S.stats.waiting));
    sv_buf_printf(&b, "# HELP fat5_running_requests Requests in the decoding batch.\n"
                  "# TYPE fat5_running_requests gauge\nfat5_running_requests %lld\n", (long long)S.stats.running);
    sv_buf_printf(&b, "# HELP fat5_batch_rows Decoder rows in use (requests x beams).\n"
                  "# TYPE fat5_batch_rows gauge\nfat5_batch_rows %lld\n", (long long)S.stats.rows_used);
    sv_buf_printf(&b, "# HELP fat5_batch_rows_max Decoder rows at most (--max-batch-rows).\n"
                  "# TYPE fat5_batch_rows_max gauge\nfat5_batch_rows_max %lld\n", S.cfg.max_rows);
    sv_buf_printf(&b, "# HELP fat5_connections Open client connections.\n"
                  "# TYPE fat5_connections gauge\nfat5_connections %lld\n", (long long)S.connections);
    sv_buf_printf(&b, "# HELP fat5_generated_tokens_total Tokens generated, all requests.\n"
                  "# TYPE fat5_generated_tokens_total counter\nfat5_generated_tokens_total %llu\n",
                  (unsigned long long)S.tokens_total);
    sv_buf_printf(&b, "# HELP fat5_generation_requests_total Generation requests given to the engine.\n"
                  "# TYPE fat5_generation_requests_total counter\nfat5_generation_requests_total %llu\n",
                  (unsigned long long)S.gen_requests);
    sv_buf_printf(&b, "# HELP fat5_embedded_inputs_total Inputs embedded by /embed.\n"
                  "# TYPE fat5_embedded_inputs_total counter\nfat5_embedded_inputs_total %llu\n",
                  (unsigned long long)S.embed_inputs);
    sv_buf_printf(&b, "# HELP fat5_engine_steps_total Decoding steps run.\n"
                  "# TYPE fat5_engine_steps_total counter\nfat5_engine_steps_total %lld\n", (long long)S.stats.steps);
    sv_buf_printf(&b, "# HELP fat5_tokens_per_second Tokens generated per second over the last 10 s.\n"
                  "# TYPE fat5_tokens_per_second gauge\nfat5_tokens_per_second %.6g\n", rate_get());
    hist_write(&b, "fat5_time_to_first_token_seconds", "From a request's arrival to its first token.", &S.ttft);
    hist_write(&b, "fat5_time_per_output_token_seconds", "Between two tokens of a request (greedy and sampling).", &S.tpot);
    hist_write(&b, "fat5_request_duration_seconds", "From a generation request's arrival to its answer.", &S.duration);
    sv_buf_printf(&b, "# HELP fat5_healthy 1 while the server answers requests.\n# TYPE fat5_healthy gauge\nfat5_healthy %d\n",
                  !S.broken && !S.stopping);
    sv_unlock();
    if (b.oom) conn_error(c, 500, "internal", "out of memory", NULL);
    else conn_respond(c, 200, "text/plain; version=0.0.4", b.p, b.n, NULL);
    sv_buf_free(&b);
}

// One request: routed to its handler.
static void handle(sv_conn *c) {
    const char *allow = NULL;
    sv_error e;
    int ep;
    memset(&e, 0, sizeof e);
    ep = sv_route(c->http.method, c->http.path, &allow, &e);
    c->ep = ep;
    if (!ep) {
        char extra[64];
        if (allow) snprintf(extra, sizeof extra, "Allow: %s\r\n", allow);
        conn_error(c, e.status, e.type, e.msg, allow ? extra : NULL);
        return;
    }
    switch (ep) {
    case SV_EP_HEALTH: {
        int broken, stopping;
        char msg[512];
        sv_lock();
        broken = S.broken, stopping = S.stopping;
        snprintf(msg, sizeof msg, "%s", stopping ? "the server is shutting down" : S.broken_msg);
        sv_unlock();
        if (broken || stopping) conn_error(c, 503, "unavailable", msg, NULL);
        else conn_respond(c, 200, "application/json", "", 0, NULL);
        break;
    }
    case SV_EP_INFO: handle_info(c); break;
    case SV_EP_METRICS: handle_metrics(c); break;
    case SV_EP_EMBED: handle_embed(c); break;
    default: handle_generate(c, ep); break;
    }
}

// A connection's thread: requests one after the other until the client or the server closes it.
static void *conn_main(void *arg) {
    sv_conn *c = (sv_conn *)arg;
    int first = 1, one = 1;
    struct timeval tv;
    tv.tv_sec = (time_t)S.cfg.write_timeout;
    tv.tv_usec = (long)((S.cfg.write_timeout - (double)tv.tv_sec) * 1e6);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sv_http_init(&c->http, &S.http_lim);
    while (conn_read_request(c, first)) {
        first = 0;
        c->close_after = !c->http.keep_alive;
        handle(c);
        if (c->close_after || c->dead) break;
    }
    if ((c->linger || c->rpos < c->rlen) && !c->dead) lingering_close(c);   // unread bytes: no reset over the answer
    else close(c->fd);
    sv_http_free(&c->http);
    free(c);
    sv_lock();
    S.connections--;
    pthread_cond_broadcast(&S.idle_cv);
    sv_unlock();
    return NULL;
}

// ---------------------------------------------------------------------------------------------
// accepting connections

// 503 to a connection that cannot be served (too many connections), then close
static void refuse(int fd, const char *msg) {
    char buf[512];
    struct timeval tv = {1, 0};
    int k = snprintf(buf, sizeof buf, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                     "Connection: close\r\nContent-Length: %zu\r\n\r\n{\"error\": \"%s\", \"error_type\": \"overloaded\"}",
                     strlen(msg) + 40, msg);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (send(fd, buf, (size_t)k, MSG_NOSIGNAL) < 0) {}
    close(fd);
}

static void *acceptor_main(void *arg) {
    pthread_attr_t at;
    (void)arg;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, (size_t)1 << 20);
    for (;;) {
        struct pollfd p[2];
        sv_conn *c;
        pthread_t th;
        int fd, full;
        p[0].fd = S.listen_fd, p[0].events = POLLIN, p[0].revents = 0;
        p[1].fd = S.wake_pipe[0], p[1].events = POLLIN, p[1].revents = 0;
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents) break;
        fd = accept(S.listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) sv_sleep(0.05);
            continue;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);   // blocking (some systems pass the listener's flag on)
        sv_lock();
        full = S.connections >= S.cfg.max_connections || S.stopping;
        if (!full) S.connections++;
        if (full) count_request(0, 503);
        sv_unlock();
        if (full) {
            refuse(fd, "too many connections (--max-connections)");
            continue;
        }
        if ((c = (sv_conn *)calloc(1, sizeof *c)) != NULL) c->fd = fd;
        if (!c || pthread_create(&th, &at, conn_main, c) != 0) {
            free(c);
            refuse(fd, "out of threads or memory");
            sv_lock();
            S.connections--;
            sv_unlock();
        }
    }
    pthread_attr_destroy(&at);
    close(S.listen_fd);
    S.listen_fd = -1;
    return NULL;
}

// Binds and listens on host:port; prints the address. 0 on failure (reported).
static int listen_on(const char *host, int port) {
    struct addrinfo hints, *res = NULL, *a;
    char ps[16], hostbuf[1025];
    int rc, fd = -1, one = 1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(ps, sizeof ps, "%d", port);
    if ((rc = getaddrinfo(host, ps, &hints, &res)) != 0) {
        fprintf(stderr, "serve: --host %s: %s\n", host, gai_strerror(rc));
        return 0;
    }
    for (a = res; a; a = a->ai_next) {
        if ((fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol)) < 0) continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) break;
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        fprintf(stderr, "serve: cannot listen on %s port %d: %s\n", host, port, strerror(errno));
        freeaddrinfo(res);
        return 0;
    }
    freeaddrinfo(res);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, hostbuf, sizeof hostbuf, ps, sizeof ps, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        fprintf(stderr, "serve: getsockname: %s\n", strerror(errno));
        close(fd);
        return 0;
    }
    S.listen_fd = fd;
    snprintf(S.url, sizeof S.url, "http://%s%s%s:%s", ss.ss_family == AF_INET6 ? "[" : "", hostbuf,
             ss.ss_family == AF_INET6 ? "]" : "", ps);
    return 1;
}

static int is_loopback(const char *host) {
    return !strcmp(host, "127.0.0.1") || !strcmp(host, "localhost") || !strcmp(host, "::1") || !strncmp(host, "127.", 4);
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

static void on_signal(int sig) {
    char ch = (char)sig;
    int saved = errno;
    sig_count++;
    if (write(sig_pipe[1], &ch, 1) < 0) {}
    errno = saved;
}

// Waits (mu not held) up to `seconds` for the signal pipe; returns the signal, or 0.
static int wait_signal(double seconds) {
    struct pollfd p;
    char ch = 0;
    p.fd = sig_pipe[0], p.events = POLLIN, p.revents = 0;
    if (poll(&p, 1, seconds < 0 ? -1 : (int)(seconds * 1000)) > 0 && read(sig_pipe[0], &ch, 1) == 1) return ch ? ch : SIGTERM;
    return 0;
}

// Parses the command line into S.cfg. -1: go on; else the exit status.
static int parse_args(int argc, char **argv) {
    sv_config *g = &S.cfg;
    cli c;
    int o;
    memset(g, 0, sizeof *g);
    g->host = "127.0.0.1";
    g->port = 8080;
    g->device = -1, g->dtype = -1, g->threads = -1;
    g->max_rows = 64, g->max_input = 1024, g->max_new = 256, g->max_queue = 1024, g->join_interval = 4;
    g->max_concurrent = 128, g->max_connections = 256, g->max_body = 2000000, g->max_header = 16384;
    g->max_stops = 4, g->max_embed = 32;
    g->read_timeout = 10, g->idle_timeout = 60, g->write_timeout = 30, g->shutdown_timeout = 10;
    cli_init(&c, "serve", usage, opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        switch (o) {
        case CLI_POS:
            if (g->model_dir) {
                cli_fail(&c, "one checkpoint directory (got %s and %s)", g->model_dir, c.val);
                return 2;
            }
            g->model_dir = c.val;
            break;
        case O_HOST: g->host = c.val; break;
        case O_PORT: g->port = c.ival; break;
        case O_DEVICE: g->device = c.ival == 0 ? -1 : c.ival == 1 ? FAT5_DEVICE_CPU : FAT5_DEVICE_GPU; break;
        case O_DTYPE: g->dtype = c.ival ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32; break;
        case O_THREADS: g->threads = (int)c.ival; break;
        case O_TOKENIZER: g->tokenizer = c.val; break;
        case O_BYTES: g->bytes = (int)c.ival; break;
        case O_ROWS: g->max_rows = c.ival; break;
        case O_MAX_IN: g->max_input = c.ival; break;
        case O_MAX_NEW: g->max_new = c.ival; break;
        case O_QUEUE: g->max_queue = c.ival; break;
        case O_JOIN: g->join_interval = c.ival; break;
        case O_CONC: g->max_concurrent = c.ival; break;
        case O_CONNS: g->max_connections = c.ival; break;
        case O_BODY: g->max_body = c.ival; break;
        case O_HEADER: g->max_header = c.ival; break;
        case O_STOPS: g->max_stops = c.ival; break;
        case O_EMBED_N: g->max_embed = c.ival; break;
        case O_READ_TO: g->read_timeout = c.dval; break;
        case O_IDLE_TO: g->idle_timeout = c.dval; break;
        case O_WRITE_TO: g->write_timeout = c.dval; break;
        case O_SHUT_TO: g->shutdown_timeout = c.dval; break;
        case O_STEP_DELAY: g->step_delay_ms = c.dval; break;
        default: break;
        }
    }
    if (!g->model_dir) {
        cli_fail(&c, "no checkpoint directory (usage: serve CHECKPOINT_DIR [options])");
        return 2;
    }
    if (g->bytes && g->tokenizer) {
        cli_fail(&c, "--bytes and --tokenizer: one or the other");
        return 2;
    }
    if (g->dtype == FAT5_DTYPE_BF16 && g->device == FAT5_DEVICE_CPU) {
        cli_fail(&c, "--dtype bf16 needs a GPU (the CPU computes in fp32)");
        return 2;
    }
    return -1;
}

// Loads the tokenizer into its own CPU context. 0 on failure (reported).
static int tokenizer_open(void) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    char why[512];
    const char *path = S.cfg.tokenizer;
    if (!path && !S.cfg.bytes && has_tokenizer(S.cfg.model_dir)) path = S.cfg.model_dir;
    S.eos_id = S.pad_id = -1;
    if (!path) return 1;
    cc.n_threads = 1;
    if (fat5_ctx_create(&cc, &S.tok_ctx, why, sizeof why) != FAT5_OK) {
        fprintf(stderr, "serve: context: %s\n", why);
        return 0;
    }
    if (fat5_tokenizer_load(S.tok_ctx, path, &S.tok) != FAT5_OK) {
        fprintf(stderr, "serve: %s%s\n", fat5_last_error(S.tok_ctx),
                path == S.cfg.model_dir ? " (the checkpoint's tokenizer; --bytes for byte-level ids)" : "");
        return 0;
    }
    S.tok_path = path;
    S.tok_vocab = fat5_tokenizer_vocab_size(S.tok);
    S.eos_id = fat5_tokenizer_eos_id(S.tok);
    S.pad_id = fat5_tokenizer_pad_id(S.tok);
    return 1;
}

int main(int argc, char **argv) {
    pthread_t acceptor;
    pthread_condattr_t ca;
    struct sigaction sa;
    int rc, sig, engine_started = 0, acceptor_started = 0;
    double t_end;
    memset(&S, 0, sizeof S);
    S.listen_fd = -1;
    S.wake_pipe[0] = S.wake_pipe[1] = -1;
    if ((rc = parse_args(argc, argv)) >= 0) return rc;
    rc = 1;
    S.t_boot = now_s();
    S.http_lim.max_head = (size_t)S.cfg.max_header;
    S.http_lim.max_headers = 100;
    S.http_lim.max_body = (size_t)S.cfg.max_body;
    S.req_lim.json.max_depth = 32;
    // the values a request can use: an /embed batch of ids, or one input and the option lists
    S.req_lim.json.max_values = S.cfg.max_input * S.cfg.max_embed + 16384;
    S.req_lim.max_stop = S.cfg.max_stops;
    S.req_lim.max_stop_bytes = 256;
    S.req_lim.max_embed_inputs = S.cfg.max_embed;
    S.ttft.bounds = ttft_bounds, S.ttft.nb = (int)(sizeof ttft_bounds / sizeof ttft_bounds[0]);
    S.tpot.bounds = tpot_bounds, S.tpot.nb = (int)(sizeof tpot_bounds / sizeof tpot_bounds[0]);
    S.duration.bounds = dur_bounds, S.duration.nb = (int)(sizeof dur_bounds / sizeof dur_bounds[0]);
    S.seed_state = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    {   // a better seed where the system has one
        FILE *f = fopen("/dev/urandom", "rb");
        uint64_t x = 0;
        if (f && fread(&x, sizeof x, 1, f) == 1) S.seed_state ^= x;
        if (f) fclose(f);
    }
    pthread_mutex_init(&S.mu, NULL);
    pthread_mutex_init(&S.tok_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&S.engine_cv, &ca);
    pthread_cond_init(&S.idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    // signals: SIGTERM / SIGINT wake the main thread through a pipe; SIGPIPE is ignored (writes
    // to a closed connection fail with EPIPE instead)
    if (pipe(sig_pipe) != 0 || pipe(S.wake_pipe) != 0) {
        fprintf(stderr, "serve: pipe: %s\n", strerror(errno));
        return 1;
    }
    fcntl(sig_pipe[1], F_SETFL, fcntl(sig_pipe[1], F_GETFL) | O_NONBLOCK);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    if (!is_loopback(S.cfg.host))
        fprintf(stderr, "serve: WARNING: listening on %s exposes this server to the network, and it has NO authentication:\n"
                "serve: WARNING: anyone who can reach the port can use the model. Put it behind a proxy that checks clients.\n",
                S.cfg.host);
    if (!tokenizer_open()) goto out;
    // the model, in the engine thread that owns it
    if (pthread_create(&S.engine_thread, NULL, engine_main, NULL) != 0) {
        fprintf(stderr, "serve: cannot start the engine thread\n");
        goto out;
    }
    engine_started = 1;
    sv_lock();
    while (!S.engine_ready && !S.engine_failed) {
        sv_unlock();
        if ((sig = wait_signal(0.05)) != 0) {   // a signal while loading: stop when it is loaded
            sv_lock();
            S.stopping = 1;
            sv_unlock();
        }
        sv_lock();
    }
    sv_unlock();
    if (S.engine_failed) {
        fprintf(stderr, "serve: %s\n", S.engine_error);
        goto out;
    }
    if (S.tok && S.tok_vocab > S.vocab_size) {
        fprintf(stderr, "serve: the tokenizer's vocabulary size %lld (%s) is larger than the model's, %lld: they do not "
                "belong together\n", (long long)S.tok_vocab, S.tok_path, (long long)S.vocab_size);
        goto out;
    }
    if (!S.tok && S.vocab_size < 259) fprintf(stderr, "serve: note: no tokenizer, and byte-level ids need a vocabulary of "
                                                      "259; only input_ids requests will work\n");
    if (S.stopping) {
        rc = 0;
        goto out;
    }
    if (!listen_on(S.cfg.host, (int)S.cfg.port)) goto out;
    if (pthread_create(&acceptor, NULL, acceptor_main, NULL) != 0) {
        fprintf(stderr, "serve: cannot start the acceptor thread\n");
        close(S.listen_fd);
        goto out;
    }
    acceptor_started = 1;
    if (S.tok) fprintf(stderr, "serve: tokenizer %s\n", S.tok_path);
    else fprintf(stderr, "serve: byte-level ids (no tokenizer: byte b is id b + 3, EOS %lld)\n", (long long)S.model_eos);
    fprintf(stderr, "serve: listening on %s\n", S.url);
    fflush(stderr);
    // until SIGTERM / SIGINT
    sig = 0;
    while (!sig) sig = wait_signal(-1);
    fprintf(stderr, "serve: %s: no new connections; in-flight requests have %g s to finish (--shutdown-timeout)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", S.cfg.shutdown_timeout);
    rc = 0;
out:
    sv_lock();
    S.stopping = 1;
    pthread_cond_broadcast(&S.engine_cv);
    sv_unlock();
    if (acceptor_started) {
        if (write(S.wake_pipe[1], "x", 1) < 0) {}
        pthread_join(acceptor, NULL);
    }
    // in-flight requests finish, until the deadline (or a second signal)
    t_end = now_s() + S.cfg.shutdown_timeout;
    sv_lock();
    while (S.inflight > 0 && now_s() < t_end && sig_count < 2) sv_timedwait(&S.idle_cv, 0.05);
    if (S.inflight > 0) {
        fprintf(stderr, "serve: cancelling %lld request%s\n", (long long)S.inflight, S.inflight == 1 ? "" : "s");
        S.cancel_all = 1;
        pthread_cond_broadcast(&S.engine_cv);
    }
    t_end = now_s() + 5 + S.cfg.write_timeout;   // the cancelled requests answered, the connections closed
    while ((S.inflight > 0 || S.connections > 0) && now_s() < t_end) sv_timedwait(&S.idle_cv, 0.05);
    if (S.connections > 0) fprintf(stderr, "serve: %lld connection%s still open at exit\n", (long long)S.connections,
                                   S.connections == 1 ? "" : "s");
    S.engine_exit = 1;
    pthread_cond_broadcast(&S.engine_cv);
    sv_unlock();
    if (engine_started) pthread_join(S.engine_thread, NULL);
    if (S.connections == 0) {   // no thread uses the tokenizer or the shared state any more
        fat5_tokenizer_destroy(S.tok);
        fat5_ctx_destroy(S.tok_ctx);
        free(S.active);
    }
    if (rc == 0) fprintf(stderr, "serve: stopped\n");
    return rc;
}
