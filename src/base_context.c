// =============================================================================================
// ==[1.1] base: status, context, errors, allocation, checked size math ==

#define FAT5__ERRMSG_CAP 4096

struct fat5_ctx {
    fat5_ctx_config cfg;      // cfg.attention points at `attention` below, or is NULL
    char err[FAT5__ERRMSG_CAP];
    struct fat5__gpu *gpu;    // NULL on the CPU
    void *scratch;            // the CPU ops' scratch arena (fat5__host_scratch)
    size_t scratch_bytes;
    int n_threads;            // CPU matrix-product threads, resolved from cfg.n_threads (>= 1)
    struct fat5__pool *pool;  // their workers (n_threads - 1), started at the first use; NULL before
    fat5_attention attention;  // the copy cfg.attention points at
    char **kept;              // strings the context keeps for configs (fat5__ctx_keep), freed with it
    size_t n_kept, cap_kept;
};

FAT5_API const char *fat5_status_string(fat5_status s) {
    switch (s) {
    case FAT5_OK: return "FAT5_OK";
    case FAT5_ERR_INVALID_ARG: return "FAT5_ERR_INVALID_ARG";
    case FAT5_ERR_OUT_OF_MEMORY: return "FAT5_ERR_OUT_OF_MEMORY";
    case FAT5_ERR_IO: return "FAT5_ERR_IO";
    case FAT5_ERR_FORMAT: return "FAT5_ERR_FORMAT";
    case FAT5_ERR_UNSUPPORTED: return "FAT5_ERR_UNSUPPORTED";
    case FAT5_ERR_NO_DEVICE: return "FAT5_ERR_NO_DEVICE";
    case FAT5_ERR_CUDA: return "FAT5_ERR_CUDA";
    case FAT5_ERR_NVRTC: return "FAT5_ERR_NVRTC";
    case FAT5_ERR_CUBLAS: return "FAT5_ERR_CUBLAS";
    case FAT5_ERR_STATE: return "FAT5_ERR_STATE";
    case FAT5_ERR_BUSY: return "FAT5_ERR_BUSY";
    }
    return "FAT5_ERR_UNKNOWN";
}

FAT5_API const char *fat5_version(void) { return FAT5_VERSION_STRING; }

// Records a message in the context and returns the status, so errors read
//     return fat5__err(ctx, FAT5_ERR_FORMAT, "tensor %s: ...", name);
static FAT5__PRINTF(3, 4) fat5_status fat5__err(fat5_ctx *ctx, fat5_status s, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
        va_end(ap);
    }
    return s;
}

// Prefixes the current message with more context ("loading X: " + old message).
static FAT5__PRINTF(3, 4) fat5_status fat5__err_prefix(fat5_ctx *ctx, fat5_status s, const char *fmt, ...) {
    if (ctx) {
        char head[512], old[FAT5__ERRMSG_CAP];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(head, sizeof head, fmt, ap);
        va_end(ap);
        size_t hl = strlen(head), ol;
        memcpy(old, ctx->err, sizeof old);
        ol = strlen(old);
        if (hl > sizeof ctx->err - 1) hl = sizeof ctx->err - 1;
        if (ol > sizeof ctx->err - 1 - hl) ol = sizeof ctx->err - 1 - hl;
        memcpy(ctx->err, head, hl);
        memcpy(ctx->err + hl, old, ol);
        ctx->err[hl + ol] = 0;
    }
    return s;
}

static FAT5__UNUSED FAT5__PRINTF(3, 4) void fat5__log(fat5_ctx *ctx, fat5_log_level lvl, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    if (!ctx || !ctx->cfg.log) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->cfg.log(ctx->cfg.log_user, lvl, msg);
}

static void *fat5__malloc(fat5_ctx *ctx, size_t n) {
    if (n == 0) n = 1;
    if (ctx && ctx->cfg.alloc) return ctx->cfg.alloc(ctx->cfg.alloc_user, n);
    return FAT5_MALLOC(n);
}
static void *fat5__realloc(fat5_ctx *ctx, void *p, size_t n) {
    if (n == 0) n = 1;
    if (ctx && ctx->cfg.realloc) return ctx->cfg.realloc(ctx->cfg.alloc_user, p, n);
    return FAT5_REALLOC(p, n);
}
static void fat5__free(fat5_ctx *ctx, void *p) {
    if (!p) return;
    if (ctx && ctx->cfg.free) ctx->cfg.free(ctx->cfg.alloc_user, p);
    else FAT5_FREE(p);
}
FAT5_API void fat5_free(fat5_ctx *ctx, void *p) { fat5__free(ctx, p); }

// checked size arithmetic: return 1 when the result fits
static int fat5__mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}
static int fat5__add_ok(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return 0;
    *out = a + b;
    return 1;
}
// a * b * sizeof-element with overflow check; 0 on overflow
static FAT5__UNUSED int fat5__mul3_ok(size_t a, size_t b, size_t c, size_t *out) {
    size_t t;
    return fat5__mul_ok(a, b, &t) && fat5__mul_ok(t, c, out);
}

// zeroed array of count elements of size bytes, NULL on overflow or out of memory
static void *fat5__calloc(fat5_ctx *ctx, size_t count, size_t size) {
    size_t n;
    void *p;
    if (!fat5__mul_ok(count, size, &n)) return NULL;
    p = fat5__malloc(ctx, n);
    if (p) memset(p, 0, n);
    return p;
}

static char *fat5__strdup(fat5_ctx *ctx, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = FAT5__CAST(char *, fat5__malloc(ctx, n));
    if (p) memcpy(p, s, n);
    return p;
}

FAT5_API fat5_ctx_config fat5_ctx_config_default(void) {
    fat5_ctx_config c;
    memset(&c, 0, sizeof c);
    c.device = FAT5_DEVICE_CPU;
    c.dtype = FAT5_DTYPE_FP32;
    return c;
}

// ---- worker threads ----
// A pool of n_threads - 1 workers per context. fat5__pool_run(ctx, fn, arg, parts) calls
// fn(arg, p, parts) once for each p < parts, p = 0 on the calling thread and p = 1.. on the
// workers, and returns when all are done. What a part computes must depend only on p (never on
// which thread runs it or when), and parts write disjoint memory: that is what keeps results
// identical for every thread count. With FAT5_NO_THREADS (or no pool) every part runs in turn on
// the caller.
typedef void (*fat5__pool_fn)(void *arg, int part, int parts);

#if FAT5__THREADS
typedef struct fat5__pool_worker {
    pthread_t thread;
    struct fat5__pool *pool;
    int index;                // runs part index + 1
} fat5__pool_worker;
struct fat5__pool {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    fat5__pool_worker *workers;
    int n_workers;            // threads started
    int stop;                 // set once, by fat5__pool_destroy
    unsigned long job;        // incremented for every fat5__pool_run
    int pending;              // workers still inside the current job
    fat5__pool_fn fn;         // the current job
    void *arg;
    int parts;
};

static void *fat5__pool_main(void *p) {
    fat5__pool_worker *w = FAT5__CAST(fat5__pool_worker *, p);
    struct fat5__pool *pl = w->pool;
    int part = w->index + 1;
    unsigned long seen = 0;
    for (;;) {
        fat5__pool_fn fn;
        void *arg;
        int parts;
        pthread_mutex_lock(&pl->mu);
        while (!pl->stop && pl->job == seen) pthread_cond_wait(&pl->wake, &pl->mu);
        if (pl->stop) {
            pthread_mutex_unlock(&pl->mu);
            return NULL;
        }
        seen = pl->job;
        fn = pl->fn;
        arg = pl->arg;
        parts = pl->parts;
        pthread_mutex_unlock(&pl->mu);
        if (part < parts) fn(arg, part, parts);
        pthread_mutex_lock(&pl->mu);
        if (--pl->pending == 0) pthread_cond_signal(&pl->done);
        pthread_mutex_unlock(&pl->mu);
    }
}

static void fat5__pool_destroy(fat5_ctx *ctx) {
    struct fat5__pool *pl = ctx->pool;
    int i;
    if (!pl) return;
    pthread_mutex_lock(&pl->mu);
    pl->stop = 1;
    pthread_cond_broadcast(&pl->wake);
    pthread_mutex_unlock(&pl->mu);
    for (i = 0; i < pl->n_workers; i++) pthread_join(pl->workers[i].thread, NULL);
    pthread_cond_destroy(&pl->done);
    pthread_cond_destroy(&pl->wake);
    pthread_mutex_destroy(&pl->mu);
    fat5__free(ctx, pl->workers);
    fat5__free(ctx, pl);
    ctx->pool = NULL;
}

// Starts the workers; on any failure the context keeps the workers that did start (or none), so a
// product still runs, on fewer threads, with the same result.
static void fat5__pool_start(fat5_ctx *ctx) {
    struct fat5__pool *pl;
    int i, n = ctx->n_threads - 1, ok = 0;
    if (ctx->pool || n < 1) return;
    pl = FAT5__CAST(struct fat5__pool *, fat5__calloc(ctx, 1, sizeof *pl));
    if (!pl) return;
    pl->workers = FAT5__CAST(fat5__pool_worker *, fat5__calloc(ctx, (size_t)n, sizeof(fat5__pool_worker)));
    if (pl->workers && !pthread_mutex_init(&pl->mu, NULL)) {
        ok = 1;
        if (!pthread_cond_init(&pl->wake, NULL)) {
            ok = 2;
            if (!pthread_cond_init(&pl->done, NULL)) ok = 3;
        }
    }
    if (ok < 3) {
        if (ok >= 2) pthread_cond_destroy(&pl->wake);
        if (ok >= 1) pthread_mutex_destroy(&pl->mu);
        fat5__free(ctx, pl->workers);
        fat5__free(ctx, pl);
        return;
    }
    ctx->pool = pl;
    for (i = 0; i < n; i++) {
        pl->workers[i].pool = pl;
        pl->workers[i].index = i;
        if (pthread_create(&pl->workers[i].thread, NULL, fat5__pool_main, &pl->workers[i])) break;
        pl->n_workers++;
    }
}

static void fat5__pool_run(fat5_ctx *ctx, fat5__pool_fn fn, void *arg, int parts) {
    struct fat5__pool *pl;
    int p;
    if (parts > 1 && !ctx->pool) fat5__pool_start(ctx);
    pl = ctx->pool;
    if (parts <= 1 || !pl || pl->n_workers == 0) {
        for (p = 0; p < parts; p++) fn(arg, p, parts);
        return;
    }
    pthread_mutex_lock(&pl->mu);
    pl->fn = fn;
    pl->arg = arg;
    pl->parts = parts;
    pl->pending = pl->n_workers;
    pl->job++;
    pthread_cond_broadcast(&pl->wake);
    pthread_mutex_unlock(&pl->mu);
    fn(arg, 0, parts);
    // parts the workers cannot take (fewer started than asked for) run here
    for (p = pl->n_workers + 1; p < parts; p++) fn(arg, p, parts);
    pthread_mutex_lock(&pl->mu);
    while (pl->pending > 0) pthread_cond_wait(&pl->done, &pl->mu);
    pthread_mutex_unlock(&pl->mu);
}
#else
static void fat5__pool_destroy(fat5_ctx *ctx) { (void)ctx; }
static void fat5__pool_run(fat5_ctx *ctx, fat5__pool_fn fn, void *arg, int parts) {
    int p;
    (void)ctx;
    for (p = 0; p < parts; p++) fn(arg, p, parts);
}
#endif

// cfg.n_threads resolved: 0 = the online CPUs; at most 256
static int fat5__resolve_threads(int n) {
#if FAT5__THREADS
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)(c < 256 ? c : 256) : 1;
    }
    return n < 1 ? 1 : n > 256 ? 256 : n;
#else
    (void)n;
    return 1;
#endif
}

// A copy of n bytes that lives until the context is destroyed (the strings and token lists of a
// config set by name or read from JSON); NULL, with the message set, when out of memory.
static void *fat5__ctx_keep_bytes(fat5_ctx *ctx, const void *src, size_t n) {
    char *p;
    if (ctx->n_kept == ctx->cap_kept) {
        size_t cap = ctx->cap_kept ? 2 * ctx->cap_kept : 16;
        char **k = FAT5__CAST(char **, fat5__realloc(ctx, ctx->kept, cap * sizeof *k));
        if (!k) goto oom;
        ctx->kept = k;
        ctx->cap_kept = cap;
    }
    p = FAT5__CAST(char *, fat5__malloc(ctx, n ? n : 1));
    if (!p) goto oom;
    if (n && src) memcpy(p, src, n);
    else if (n) memset(p, 0, n);
    ctx->kept[ctx->n_kept++] = p;
    return p;
oom:
    fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory keeping %zu bytes", n);
    return NULL;
}

// A copy of the string s, kept as fat5__ctx_keep_bytes keeps bytes.
static const char *fat5__ctx_keep(fat5_ctx *ctx, const char *s) {
    return (const char *)fat5__ctx_keep_bytes(ctx, s, strlen(s) + 1);
}

static void fat5__ctx_free_kept(fat5_ctx *ctx) {
    size_t i;
    for (i = 0; i < ctx->n_kept; i++) fat5__free(ctx, ctx->kept[i]);
    fat5__free(ctx, ctx->kept);
    ctx->kept = NULL;
    ctx->n_kept = ctx->cap_kept = 0;
}

FAT5_API const char *fat5_last_error(const fat5_ctx *ctx) { return ctx ? ctx->err : "no context"; }
FAT5_API fat5_device fat5_ctx_device(const fat5_ctx *ctx) { return ctx->cfg.device; }

// The wall clock, UTC, as ISO 8601 ("2026-11-27T20:31:05.250Z") into buf; *unix_s gets the
// seconds since 1970. The calendar is computed here (gmtime's buffer is shared by the process).
static void fat5__wall_time(char buf[32], double *unix_s) {
    struct timespec ts;
    long long days, secs, y, m, d, era, doe, yoe, doy, mp;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) ts.tv_sec = 0, ts.tv_nsec = 0;
    *unix_s = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    days = (long long)ts.tv_sec / 86400;
    secs = (long long)ts.tv_sec % 86400;
    if (secs < 0) secs += 86400, days--;
    // civil date from days since 1970-01-01 (proleptic Gregorian, eras of 400 years)
    days += 719468;
    era = (days >= 0 ? days : days - 146096) / 146097;
    doe = days - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    d = doy - (153 * mp + 2) / 5 + 1;
    m = mp < 10 ? mp + 3 : mp - 9;
    y = yoe + era * 400 + (m <= 2);
    if (y < 0 || y > 9999) y = 0;   // four digits (the clock would be wrong)
    snprintf(buf, 32, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (int)y, (int)m, (int)d, (int)(secs / 3600),
             (int)(secs / 60 % 60), (int)(secs % 60), (int)(ts.tv_nsec / 1000000) % 1000);
}

// seconds on a monotonic clock (timings and progress)
static double fat5__now_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

