// Op tests from one table (as ggml's test-backend-ops): for every op of FAT5__OPS a case generator
// (to_gens below, built from FAT5__OPS itself: an op without a generator to_gen_<op> does not
// compile). A generator builds random inputs on the host for several shapes (odd and edge sizes:
// lengths no multiple of any tile or warp, 1, one-token sequences, packs of very different
// sequence lengths, head dims 1..256, rows wider than the shared-memory caches) and runs the op
// once through each backend, `r->be-><op>(r->ctx, ...)` in the TO_SIDES loop: the CPU backend on
// a CPU context, then the GPU backend on a GPU context; the harness uploads every buffer, downloads
// every buffer, and compares the GPU's outputs with the CPU's.
//
// Tests: gpu_op_<op> (one per op, fp32 then bf16 context; they skip without a CUDA device) and
// ops_table_cpu_a and _b, which run every generator on the CPU backend alone and checks what can be
// checked without a second backend: each case's arguments are accepted (FAT5_OK), every output
// declared written whole (TO_OUT, which starts as NaN / a poison integer) is written, no output
// holds a NaN the generator did not ask for, inputs are left unchanged, and nothing is written past
// any buffer (every buffer has a 64-byte guard band that must keep its pattern; checked on the GPU
// too); every generator yields at least 3 cases per context dtype, and the table matches
// fat5__op_names. (Included by test_main.c; without CUDA only ops_table_cpu_a and _b.)
//
// Tolerances: those of test_gpu_ops.c's header (TG_A, TG_R32, TG_R16, TG_RDB), by buffer:
// - fp32 outputs: rtol TG_R32; outputs in the activation dtype: TG_R16 in a bf16 context (the
//   final rounding to bf16), TG_R32 in fp32; atol TG_A * scale, scale = max|ref| unless the
//   generator sets the size of the terms that cancel (the reasoning is at each generator);
// - sums of products whose per-element bound is proportional to sum |terms| (mm, mm_batched,
//   norm_mm): a magnitude pass runs the CPU op once more on |inputs|, and mag_i of that run
//   scales the per-element atol, as test_gpu_dev.c's mm bound does;
// - copies and conversions (TO_SAME): bit for bit; an activation-dtype output compared bit for bit
//   in a bf16 context is compared with the CPU's value rounded to bf16 (RNE, as to_act rounds);
// - integer buffers: equal.
// In a bf16 context every activation-dtype input is rounded to bf16 on the host first, so both
// backends read identical inputs. The GPU context runs attention on the FMA kernels (attn_tc = 0):
// the tensor-core paths, with their own tolerances, are test_gpu_ops.c's gpu_attn_tc.

#ifndef TG_A  // without CUDA (test_gpu_ops.c, which defines them, is not included): the same values
#define TG_A 1e-5
#define TG_R32 1e-5
#define TG_R16 (1.0 / 256 + TG_R32)
#define TG_RDB 1e-4
#endif

#ifndef FAT5_NO_CUDA  // rows of the GPU's scratch buffers (rmsnorm_bwd's dw partials, attn_bwd_dq's dbias)
#define TO_NORM_ROWS FAT5__GPU_NORM_BWD_BLOCKS
#define TO_DBIAS_ROWS FAT5__GPU_DBIAS_BLOCKS
#else  // the CPU ignores them
#define TO_NORM_ROWS 1
#define TO_DBIAS_ROWS 1
#endif

typedef enum { TO_F32, TO_ACT, TO_I32, TO_I64, TO_F64, TO_BF16 } to_type;
enum { TO_IN = 1, TO_OUT = 2, TO_INOUT = 3, TO_SCRATCH = 4 };  // roles
enum { TO_CLOSE = 0, TO_SAME = 1, TO_SKIP = 2 };              // comparisons of written buffers
#define TO_PADB 64                                            // guard band after every buffer, bytes
#define TO_MAXB 24

typedef struct to_buf {
    char name[24];
    to_type type;
    int role, cmp;
    size_t n;          // elements
    void *init;        // host values (float for F32 / ACT, int32, int64, double, uint16 bits)
    void *res[2];      // downloaded values: [0] CPU, [1] GPU
    float *mag;        // the magnitude pass's output (mrel > 0)
    double scale;      // atol = arel * scale (scale 0: max|ref|) + mrel * mag_i
    double arel, mrel;
    double rtol;       // used when has_rtol, else TG_R16 / TG_R32 by type and context
    int has_rtol;
    int nan_ok;        // NaNs are legitimate values of this output (NaN inputs); NaN == NaN
    fat5__addr addr;   // on the current side
} to_buf;

typedef struct to_run {
    fat5_test *T;
    const char *op;
    int bf16, gpu;     // context dtype; 1: the GPU side runs too
    fat5_ctx *cpu, *gctx;
    const fat5__backend *be;  // the current side's backend and context
    fat5_ctx *ctx;
    int side, last, mag_pass;  // side -1: the magnitude pass, 0: CPU, 1: GPU
    to_buf b[TO_MAXB];
    int nb;
    // per buffer: its inputs, then on each side (magnitudes, CPU, GPU) the upload's and the
    // download's staging and the values read back: at most 1 + 3 x 3
    void *host[10 * TO_MAXB + 16];
    int nhost;
    char what[200];
    fat5_rng rng;
    int err, cases;
} to_run;

static const char *to_mode(const to_run *r) { return r->bf16 ? "bf16" : "fp32"; }
static size_t to_hsz(to_type t) { return t == TO_I64 || t == TO_F64 ? 8 : t == TO_BF16 ? 2 : 4; }
static size_t to_dsz(const to_run *r, to_type t) {
    return t == TO_ACT && r->side == 1 && r->bf16 ? 2 : to_hsz(t);
}
static int to_isf(to_type t) { return t == TO_F32 || t == TO_ACT || t == TO_F64; }

static void *to_mem(to_run *r, size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p || r->nhost == (int)(sizeof r->host / sizeof r->host[0])) {
        fprintf(stderr, "test_ops_table: %s: %s\n", r->op, p ? "more host buffers than to_run.host holds" : "out of memory");
        abort();
    }
    r->host[r->nhost++] = p;
    return p;
}
static float *to_hf(to_run *r, size_t n) { return (float *)to_mem(r, n * sizeof(float)); }

static void to_case_free(to_run *r) {
    while (r->nhost) free(r->host[--r->nhost]);
    r->nb = 0;
}

// Starts a case (its description for messages); 0 when an earlier case failed a call: stop.
static int to_case(to_run *r, const char *fmt, ...) {
    va_list ap;
    to_case_free(r);
    if (r->err) return 0;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
    r->cases++;
    return 1;
}

// A buffer of n elements; TO_OUT starts as NaN (floats) or a poison integer, others as zeros.
static int to_buf_new(to_run *r, const char *name, to_type t, int role, size_t n) {
    to_buf *b;
    size_t i;
    if (r->nb == TO_MAXB) {
        fprintf(stderr, "test_ops_table: %s: more than TO_MAXB buffers in a case\n", r->op);
        abort();
    }
    b = &r->b[r->nb];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->type = t;
    b->role = role;
    b->n = n;
    b->arel = TG_A;
    b->init = to_mem(r, n * to_hsz(t));
    if (role == TO_OUT)
        for (i = 0; i < n; i++) switch (t) {
            case TO_F32: case TO_ACT: ((float *)b->init)[i] = NAN; break;
            case TO_F64: ((double *)b->init)[i] = NAN; break;
            case TO_I32: ((int32_t *)b->init)[i] = 0x5eadbeef; break;
            case TO_I64: ((int64_t *)b->init)[i] = 0x5eadbeef5eadbeefLL; break;
            case TO_BF16: ((uint16_t *)b->init)[i] = 0x7fc1; break;
        }
    return r->nb++;
}
#define TO_F(r, i) ((float *)(r)->b[i].init)
#define TO_I(r, i) ((int32_t *)(r)->b[i].init)
#define TO_L(r, i) ((int64_t *)(r)->b[i].init)
#define TO_D(r, i) ((double *)(r)->b[i].init)
#define TO_RES(r, i, side) ((float *)(r)->b[i].res[side])

static float to_round1(const to_run *r, float x) { return r->bf16 ? fat5__bf16_to_f32(fat5__f32_to_bf16(x)) : x; }
// rounds an activation-dtype buffer's host values to bf16 in a bf16 context (both backends read them)
static void to_round(to_run *r, int i) {
    size_t k;
    if (r->b[i].type == TO_ACT)
        for (k = 0; k < r->b[i].n; k++) TO_F(r, i)[k] = to_round1(r, TO_F(r, i)[k]);
}
static void to_fill(to_run *r, float *x, size_t n, double scale) {
    size_t i;
    for (i = 0; i < n; i++) x[i] = (float)((2.0 * fat5_rng_uniform(&r->rng) - 1.0) * scale);
}
// a float buffer uniform in [-scale, scale] (rounded when of the activation dtype)
static int to_rnd(to_run *r, const char *name, to_type t, int role, size_t n, double scale) {
    int i = to_buf_new(r, name, t, role, n);
    to_fill(r, TO_F(r, i), n, scale);
    to_round(r, i);
    return i;
}
// an int32 input buffer with the given values
static int to_ints(to_run *r, const char *name, int role, const int32_t *v, size_t n) {
    int i = to_buf_new(r, name, TO_I32, role, n);
    if (n) memcpy(TO_I(r, i), v, n * 4);
    return i;
}
static double to_maxabs(const float *x, size_t n) {
    double m = 0;
    size_t i;
    for (i = 0; i < n; i++)
        if (fabs((double)x[i]) > m) m = fabs((double)x[i]);
    return m;
}
static double to_maxnorm(const float *x, size_t rows, size_t n) {
    double m = 0;
    size_t q, j;
    for (q = 0; q < rows; q++) {
        double s = 0;
        for (j = 0; j < n; j++) s += (double)x[q * n + j] * x[q * n + j];
        if (s > m) m = s;
    }
    return sqrt(m);
}

static fat5__addr to_a(const to_run *r, int i) { return i < 0 ? 0 : r->b[i].addr; }
// the address of element e of buffer i on the current side
static fat5__addr to_ae(const to_run *r, int i, size_t e) { return r->b[i].addr + e * to_dsz(r, r->b[i].type); }

static int to_call_at(to_run *r, int line, fat5_status st, const char *call) {
    if (st == FAT5_OK) return 1;
    fat5_test_fail(r->T, __FILE__, line, "[%s] %s %s on the %s: %s -> %s: %s", to_mode(r), r->op, r->what,
                   r->side == 1 ? "GPU" : "CPU", call, fat5_status_string(st), fat5_last_error(r->ctx));
    r->err = 1;
    return 0;
}
#define TO_CALL(r, call) do { if (!(r)->err) to_call_at((r), __LINE__, (call), #call); } while (0)

// ----- the sides: upload, run (the loop's body), download -----

static void to_side_free(to_run *r) {
    int i;
    for (i = 0; i < r->nb; i++)
        if (r->b[i].addr) r->be->free(r->ctx, r->b[i].addr), r->b[i].addr = 0;
}

static int to_side_more(to_run *r) {
    int i;
    if (r->err || r->side > r->last) return 0;
    r->ctx = r->side == 1 ? r->gctx : r->cpu;
#ifndef FAT5_NO_CUDA
    r->be = r->side == 1 ? &fat5__gpu_backend : &fat5__cpu_backend;
#else
    r->be = &fat5__cpu_backend;
#endif
    for (i = 0; i < r->nb; i++) {
        to_buf *b = &r->b[i];
        size_t d = to_dsz(r, b->type), k, bytes = b->n * d;
        unsigned char *st = (unsigned char *)to_mem(r, bytes + TO_PADB);
        if (b->type == TO_ACT && d == 2) {
            for (k = 0; k < b->n; k++) ((uint16_t *)st)[k] = fat5__f32_to_bf16(((float *)b->init)[k]);
        } else if (r->side < 0 && (b->type == TO_F32 || b->type == TO_ACT)) {
            for (k = 0; k < b->n; k++) ((float *)st)[k] = fabsf(((float *)b->init)[k]);  // |inputs|
        } else if (bytes) {
            memcpy(st, b->init, bytes);
        }
        memset(st + bytes, 0xa5, TO_PADB);
        if (!to_call_at(r, __LINE__, r->be->alloc(r->ctx, bytes + TO_PADB, &b->addr), "alloc") ||
            !to_call_at(r, __LINE__, r->be->upload(r->ctx, b->addr, st, bytes + TO_PADB), "upload"))
            return 0;
    }
    return 1;
}

static void to_side_next(to_run *r) {
    int i;
    if (!r->err) to_call_at(r, __LINE__, r->be->sync(r->ctx), "sync (the op's kernels)");
    for (i = 0; i < r->nb && !r->err; i++) {
        to_buf *b = &r->b[i];
        size_t d = to_dsz(r, b->type), k, bytes = b->n * d;
        unsigned char *st = (unsigned char *)to_mem(r, bytes + TO_PADB);
        void *h;
        if (!to_call_at(r, __LINE__, r->be->download(r->ctx, st, b->addr, bytes + TO_PADB), "download")) break;
        for (k = 0; k < TO_PADB && r->side >= 0; k++)
            if (st[bytes + k] != 0xa5) {
                fat5_test_fail(r->T, __FILE__, __LINE__, "[%s] %s %s on the %s: written past %s (%zu elements), byte %zu",
                               to_mode(r), r->op, r->what, r->side ? "GPU" : "CPU", b->name, b->n, k);
                break;
            }
        h = to_mem(r, b->n * to_hsz(b->type));
        if (b->type == TO_ACT && d == 2)
            for (k = 0; k < b->n; k++) ((float *)h)[k] = fat5__bf16_to_f32(((uint16_t *)st)[k]);
        else if (bytes)
            memcpy(h, st, bytes);
        if (r->side < 0)
            b->mag = (float *)h;
        else
            b->res[r->side] = h;
    }
    to_side_free(r);
    r->side++;
}

static void to_side_first(to_run *r) {
    int i, mag = 0;
    for (i = 0; i < r->nb; i++) {
        to_round(r, i);
        mag |= r->b[i].mrel > 0;
    }
    r->last = r->gpu ? 1 : 0;
    r->side = mag && r->gpu ? -1 : 0;  // the magnitudes serve the GPU comparison only
}

// for (each side) { the op's calls through r->be on r->ctx }
#define TO_SIDES(r) for (to_side_first(r); to_side_more(r); to_side_next(r))
// the magnitude pass runs the body on |inputs|: a generator may pick its arguments by it
#define TO_MAG_PASS(r) ((r)->side < 0)

// ----- comparisons -----

static double to_get(const to_buf *b, const void *p, size_t k) {
    switch (b->type) {
    case TO_F32: case TO_ACT: return ((const float *)p)[k];
    case TO_F64: return ((const double *)p)[k];
    case TO_I32: return ((const int32_t *)p)[k];
    case TO_I64: return (double)((const int64_t *)p)[k];
    default: return ((const uint16_t *)p)[k];
    }
}

// elements k of got and ref compare equal bit for bit (NaN == NaN when nan_ok)
static int to_same1(const to_buf *b, const void *got, const void *ref, size_t k) {
    size_t h = to_hsz(b->type);
    if (!memcmp((const char *)got + k * h, (const char *)ref + k * h, h)) return 1;
    return b->nan_ok && to_isf(b->type) && isnan(to_get(b, got, k)) && isnan(to_get(b, ref, k));
}

// got vs ref (n elements of buffer b) as b says; what names the comparison
static void to_cmp_at(to_run *r, int line, const to_buf *b, const void *got, const void *ref, int same,
                      const char *what) {
    size_t k, bad = 0, worst = 0, n = b->n;
    double maxd = 0, worst_ratio = 0, rtol, atol;
    if (r->err) return;
    rtol = b->has_rtol ? b->rtol : b->type == TO_ACT && r->bf16 ? TG_R16 : TG_R32;
    atol = 0;
    if (!same) {
        double sc = b->scale;
        if (sc <= 0)
            for (k = 0; k < n; k++)
                if (fabs(to_get(b, ref, k)) > sc && !isinf(to_get(b, ref, k))) sc = fabs(to_get(b, ref, k));
        atol = b->arel * sc;
    }
    for (k = 0; k < n; k++) {
        double gv = to_get(b, got, k), rv = to_get(b, ref, k), d, tol;
        int ok;
        if (same || !to_isf(b->type)) {
            ok = to_same1(b, got, ref, k);
            d = ok ? 0 : 1, tol = 0;
        } else {
            d = gv == rv ? 0.0 : fabs(gv - rv);
            tol = isinf(rv) ? 0.0 : atol + rtol * fabs(rv) + (b->mag ? b->mrel * b->mag[k] : 0.0);
            ok = d <= tol || (b->nan_ok && isnan(gv) && isnan(rv));
            if (d > maxd) maxd = d;
            if (d > 0 && !(d / tol <= worst_ratio)) worst_ratio = d / tol, worst = k;
        }
        if (!ok) {
            if (bad < 5) printf("  [%s] %s %s: %s[%zu]: got %.9g, want %.9g (tol %.3g)\n", to_mode(r), r->op, r->what,
                                what, k, gv, rv, tol);
            bad++;
        }
    }
    if (bad)
        fat5_test_fail(r->T, __FILE__, line, "[%s] %s %s: %s: %zu of %zu elements differ%s; max |diff| %.3g, worst at [%zu]",
                       to_mode(r), r->op, r->what, what, bad, n, same ? " (bit for bit)" : "", maxd, worst);
}

// GPU buffer i against the GPU's buffer j, bit for bit (reruns, aligned vs unaligned paths),
// elements [from, n) of i against [from + dj, ...) of j
static void to_same_gpu_at(to_run *r, int line, int i, int j, size_t from, const char *what) {
    const to_buf *b = &r->b[i];
    size_t k, bad = 0, h = to_hsz(b->type);
    if (r->err || !r->gpu) return;
    for (k = from; k < b->n; k++)
        if (memcmp((char *)b->res[1] + k * h, (char *)r->b[j].res[1] + k * h, h)) {
            if (bad < 5) printf("  [%s] %s %s: %s[%zu] differs\n", to_mode(r), r->op, r->what, what, k);
            bad++;
        }
    if (bad)
        fat5_test_fail(r->T, __FILE__, line, "[%s] %s %s: %s: %zu elements differ", to_mode(r), r->op, r->what, what, bad);
}
#define to_same_gpu(r, i, j, from, what) to_same_gpu_at((r), __LINE__, (i), (j), (from), (what))

// After the sides: inputs unchanged on every side; on the CPU alone, TO_OUT written whole and no
// NaN in any output unless nan_ok; GPU vs CPU for every written buffer.
static void to_check_at(to_run *r, int line) {
    int i, s;
    char what[64];
    for (i = 0; i < r->nb && !r->err; i++) {
        to_buf *b = &r->b[i];
        size_t k;
        if (b->role == TO_SCRATCH) continue;
        if (b->role == TO_IN) {
            for (s = 0; s <= r->last; s++) {
                snprintf(what, sizeof what, "input %s changed on the %s", b->name, s ? "GPU" : "CPU");
                to_cmp_at(r, line, b, b->res[s], b->init, 1, what);
            }
            continue;
        }
        for (k = 0; k < b->n; k++) {
            int bad = to_isf(b->type) ? isnan(to_get(b, b->res[0], k)) && !b->nan_ok
                                      : b->role == TO_OUT && to_same1(b, b->res[0], b->init, k);
            if (bad) {
                fat5_test_fail(r->T, __FILE__, line, "[%s] %s %s: the CPU left %s[%zu] %s", to_mode(r), r->op, r->what,
                               b->name, k, to_isf(b->type) ? "NaN" : "unwritten");
                break;
            }
        }
        if (r->gpu && b->cmp != TO_SKIP) {
            const void *ref = b->res[0];
            if (b->cmp == TO_SAME && b->type == TO_ACT && r->bf16) {  // the CPU's fp32 value, as to_act rounds it
                float *rr = to_hf(r, b->n);
                for (k = 0; k < b->n; k++) rr[k] = to_round1(r, ((const float *)ref)[k]);
                ref = rr;
            }
            to_cmp_at(r, line, b, b->res[1], ref, b->cmp == TO_SAME, b->name);
        }
    }
}
#define to_check(r) to_check_at((r), __LINE__)

#define TO_BUF(r, i) (&(r)->b[i])

// ----- util.cu: fill_f32, scale_f32, f32_to_bf16, to_act (copies and conversions: bit for bit) -----

static const int64_t to_util_n[] = {1, 13, 257, 1000003};
#define TO_NUTIL (sizeof to_util_n / sizeof to_util_n[0])

// x uniform in [-100, 100] with the conversion corner cases first: ties (both parities), NaN,
// infinities, overflow to inf, subnormals
static int to_util_src(to_run *r, int role, int64_t n) {
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xffc00000u, 0x7f800000u, 0xff800000u,
                                       0x7f7fffffu, 0x00000001u, 0x807fffffu, 0x00000000u, 0x80000000u, 0x3f80ffffu};
    int x = to_rnd(r, "x", TO_F32, role, (size_t)n, 100.0);
    int64_t i;
    for (i = 0; i < n && i < (int64_t)(sizeof special / sizeof special[0]); i++) memcpy(&TO_F(r, x)[i], &special[i], 4);
    TO_BUF(r, x)->nan_ok = 1;
    return x;
}

// x[i] = -2.5 on a prefix of 2/3 (the rest keeps its values); n = 0 launches nothing
static void to_gen_fill_f32(to_run *r) {
    size_t s;
    for (s = 0; s <= TO_NUTIL; s++) {
        int64_t n = s < TO_NUTIL ? to_util_n[s] : 0;
        int x;
        if (!to_case(r, "n=%lld", (long long)n)) return;
        x = to_rnd(r, "x", TO_F32, TO_INOUT, (size_t)n, 1.0);
        TO_BUF(r, x)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->fill_f32(r->ctx, to_a(r, x), -2.5f, n - n / 3));
        to_check(r);
    }
}

// x *= 0.375 over the corner cases (a NaN stays a NaN: IEEE 754 leaves its payload to the hardware)
static void to_gen_scale_f32(to_run *r) {
    size_t s;
    for (s = 0; s < TO_NUTIL; s++) {
        int x;
        if (!to_case(r, "n=%lld", (long long)to_util_n[s])) return;
        x = to_util_src(r, TO_INOUT, to_util_n[s]);
        TO_BUF(r, x)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->scale_f32(r->ctx, to_a(r, x), 0.375f, to_util_n[s]));
        to_check(r);
    }
}

// bf16 words, RNE as the host's fat5__f32_to_bf16, NaNs and infinities included
static void to_gen_f32_to_bf16(to_run *r) {
    size_t s;
    for (s = 0; s < TO_NUTIL; s++) {
        int x, y;
        if (!to_case(r, "n=%lld", (long long)to_util_n[s])) return;
        x = to_util_src(r, TO_IN, to_util_n[s]);
        y = to_buf_new(r, "dst", TO_BF16, TO_OUT, (size_t)to_util_n[s]);
        TO_BUF(r, y)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->f32_to_bf16(r->ctx, to_a(r, y), to_a(r, x), to_util_n[s]));
        to_check(r);
    }
}

// a copy in fp32, the same rounding in bf16
static void to_gen_to_act(to_run *r) {
    size_t s;
    for (s = 0; s < TO_NUTIL; s++) {
        int x, y;
        if (!to_case(r, "n=%lld", (long long)to_util_n[s])) return;
        x = to_util_src(r, TO_IN, to_util_n[s]);
        y = to_buf_new(r, "dst", TO_ACT, TO_OUT, (size_t)to_util_n[s]);
        TO_BUF(r, y)->cmp = TO_SAME;
        TO_BUF(r, y)->nan_ok = 1;
        TO_SIDES(r) TO_CALL(r, r->be->to_act(r->ctx, to_a(r, y), to_a(r, x), to_util_n[s]));
        to_check(r);
    }
}

// out[j] += column sums (fp32 result: the reduction error ~ sqrt(rows) u of the terms, within TG_A
// of max|ref|, as gpu_colsum had it)
static void to_gen_colsum_f32(to_run *r) {
    static const int shapes[][2] = {{1, 1}, {1024, 70}, {33, 1000}, {3000, 5}};
    size_t s;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], D = shapes[s][1], in, out;
        if (!to_case(r, "rows=%d D=%d", rows, D)) return;
        in = to_rnd(r, "in", TO_F32, TO_IN, (size_t)rows * (size_t)D, 1.0);
        out = to_rnd(r, "out", TO_F32, TO_INOUT, (size_t)D, 1.0);  // out accumulates
        TO_SIDES(r) TO_CALL(r, r->be->colsum_f32(r->ctx, to_a(r, out), to_a(r, in), rows, D));
        to_check(r);
    }
}

// ----- mm (cuBLAS / fat5_mm): |got - ref| <= 1e-5 (|alpha| sum_k |a_k b_k| + |beta c0|) + 2^-8 |ref|
// for a bf16 output (test_gpu_dev.c's bound: fp32 accumulation of K terms, the output's rounding).
// The magnitude pass gives the first sum (alpha, beta >= 0 here). -----

static void to_mm_tol(to_run *r, int C, int c_f32) {
    TO_BUF(r, C)->arel = 0;
    TO_BUF(r, C)->mrel = 1e-5;
    TO_BUF(r, C)->has_rtol = 1;
    TO_BUF(r, C)->rtol = r->bf16 && !c_f32 ? 1.0 / 256 : 0.0;
}

// every layout, C in fp32 and in the activation dtype; alpha 1, beta 0 over a NaN C (beta 0 must
// not read C), alpha 0.75, beta 0.5 over C0; M = 1, 5, 16 (NT: fat5_mm's rows), 37, 300
static void to_gen_mm(to_run *r) {
    static const int shapes[][3] = {{37, 19, 45}, {1, 19, 64}, {5, 19, 45}, {16, 19, 64}, {300, 257, 129}};
    static const char *const ln[3] = {"NT", "NN", "TN"};
    int l, c_f32, pass;
    size_t s;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (l = 0; l < 3; l++)
            for (c_f32 = 0; c_f32 < 2; c_f32++)
                for (pass = 0; pass < 2; pass++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], A, B, C;
                    float alpha = pass ? 0.75f : 1.0f, beta = pass ? 0.5f : 0.0f;
                    if (!to_case(r, "%s M=%d N=%d K=%d c_f32=%d alpha=%g beta=%g", ln[l], M, N, K, c_f32,
                                 (double)alpha, (double)beta))
                        return;
                    A = to_rnd(r, "A", TO_ACT, TO_IN, (size_t)M * K, 2.0);
                    B = to_rnd(r, "B", TO_ACT, TO_IN, (size_t)N * K, 2.0);
                    if (pass)
                        C = to_rnd(r, "C", c_f32 ? TO_F32 : TO_ACT, TO_INOUT, (size_t)M * N, 2.0);
                    else
                        C = to_buf_new(r, "C", c_f32 ? TO_F32 : TO_ACT, TO_OUT, (size_t)M * N);
                    to_mm_tol(r, C, c_f32);
                    TO_SIDES(r) TO_CALL(r, r->be->mm(r->ctx, (fat5__mm_layout)l, to_a(r, C), c_f32, to_a(r, A), to_a(r, B),
                                                     M, N, K, alpha, beta));
                    to_check(r);
                }
}

// 3 products of every layout, A shared (stride 0) or not, over C0 (beta 1)
static void to_gen_mm_batched(to_run *r) {
    static const int shapes[][3] = {{5, 19, 45}, {37, 19, 64}, {1, 7, 3}, {130, 33, 17}};
    const int NB = 3;
    int l, c_f32, shared;
    size_t s;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (l = 0; l < 3; l++)
            for (c_f32 = 0; c_f32 < 2; c_f32++)
                for (shared = 0; shared < 2; shared++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], A, B, C;
                    int64_t sA = shared ? 0 : (int64_t)M * K, sB = (int64_t)N * K, sC = (int64_t)M * N;
                    if (!to_case(r, "layout %d M=%d N=%d K=%d c_f32=%d sA=%lld batch %d", l, M, N, K, c_f32,
                                 (long long)sA, NB))
                        return;
                    A = to_rnd(r, "A", TO_ACT, TO_IN, (size_t)((NB - 1) * sA + (int64_t)M * K), 2.0);
                    B = to_rnd(r, "B", TO_ACT, TO_IN, (size_t)(NB * sB), 2.0);
                    C = to_rnd(r, "C", c_f32 ? TO_F32 : TO_ACT, TO_INOUT, (size_t)(NB * sC), 2.0);
                    to_mm_tol(r, C, c_f32);
                    TO_SIDES(r) TO_CALL(r, r->be->mm_batched(r->ctx, (fat5__mm_layout)l, to_a(r, C), c_f32, to_a(r, A),
                                                             to_a(r, B), M, N, K, 0.75f, 1.0f, NB, sA, sB, sC));
                    to_check(r);
                }
}

// ----- embed.cu: copies (bit for bit); embed_bwd adds in token order on both sides -----

// (V, T, D): repeated tokens (T > V), odd widths, a single element, many rows, runs of one token
static const int64_t to_embed_shapes[][3] = {{13, 50, 37}, {1, 1, 1}, {97, 300, 300}, {5, 2000, 8}, {7, 5000, 300}};

static int to_embed_tok(to_run *r, int64_t V, int64_t T) {
    int i = to_buf_new(r, "tok", TO_I32, TO_IN, (size_t)T);
    int64_t t;
    for (t = 0; t < T; t++) TO_I(r, i)[t] = (int32_t)fat5_rng_below(&r->rng, (uint64_t)V);
    if (V == 7)  // runs of one token (100 in a row, a third of the time), as EOS or a sentinel repeats
        for (t = 0; t < T; t++) TO_I(r, i)[t] = (t / 100) % 3 == 0 ? 2 : TO_I(r, i)[t];
    TO_I(r, i)[T - 1] = (int32_t)(V - 1);
    return i;
}

static void to_gen_embed_fwd(to_run *r) {
    size_t s;
    for (s = 0; s < sizeof to_embed_shapes / sizeof to_embed_shapes[0]; s++) {
        int64_t V = to_embed_shapes[s][0], T = to_embed_shapes[s][1];
        int D = (int)to_embed_shapes[s][2], tab, tok, out;
        if (!to_case(r, "V=%lld T=%lld D=%d", (long long)V, (long long)T, D)) return;
        tab = to_rnd(r, "table", TO_F32, TO_IN, (size_t)(V * D), 1.0);
        tok = to_embed_tok(r, V, T);
        out = to_buf_new(r, "out", TO_F32, TO_OUT, (size_t)(T * D));
        TO_BUF(r, out)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->embed_fwd(r->ctx, to_a(r, out), to_a(r, tab), to_a(r, tok), T, D));
        to_check(r);
    }
}

static void to_gen_embed_bwd(to_run *r) {
    size_t s;
    for (s = 0; s < sizeof to_embed_shapes / sizeof to_embed_shapes[0]; s++) {
        int64_t V = to_embed_shapes[s][0], T = to_embed_shapes[s][1];
        int D = (int)to_embed_shapes[s][2], dt, dout, tok;
        if (!to_case(r, "V=%lld T=%lld D=%d", (long long)V, (long long)T, D)) return;
        dt = to_rnd(r, "dtable", TO_F32, TO_INOUT, (size_t)(V * D), 0.5);  // accumulates onto existing values
        dout = to_rnd(r, "dout", TO_F32, TO_IN, (size_t)(T * D), 1.0);
        tok = to_embed_tok(r, V, T);
        TO_BUF(r, dt)->cmp = TO_SAME;  // the CPU's float additions, in the same (token) order
        TO_SIDES(r) TO_CALL(r, r->be->embed_bwd(r->ctx, to_a(r, dt), to_a(r, dout), to_a(r, tok), T, D));
        to_check(r);
    }
}

// ----- norm.cu -----

// (T, D): single element; odd widths; rows held in registers (D % 4 == 0, D <= 512: 512, 64, 96,
// 256) and not; more rows than warps (9000 x 96 and 12000 x 256 with the dw rows in shared memory,
// 2500 x 1600 with them in the scratch, 8 x 1600 floats > 48 KiB); wide rows (4096; 13000: scratch)
static const int64_t to_norm_shapes[][2] = {{1, 1},    {5, 7},     {37, 512},  {1500, 64},  {9000, 96},
                                            {12000, 256}, {2, 4096}, {3, 13000}, {1029, 33}, {2500, 1600}};
#define TO_NNORM (sizeof to_norm_shapes / sizeof to_norm_shapes[0])

// y (act) and r (fp32); xs, the residual saved in the same pass, a copy of x (bit for bit); the
// odd widths also without xs
static void to_gen_rmsnorm_fwd(to_run *r) {
    size_t s;
    int with;
    for (s = 0; s < TO_NNORM; s++)
        for (with = 1; with >= (to_norm_shapes[s][1] % 2 && to_norm_shapes[s][1] > 1 ? 0 : 1); with--) {
            int64_t T = to_norm_shapes[s][0];
            int D = (int)to_norm_shapes[s][1], x, w, y, rr, xs = -1;
            size_t n = (size_t)(T * D);
            if (!to_case(r, "T=%lld D=%d xs=%d", (long long)T, D, with)) return;
            x = to_rnd(r, "x", TO_F32, TO_IN, n, 2.0);
            w = to_rnd(r, "w", TO_F32, TO_IN, (size_t)D, 1.5);
            y = to_buf_new(r, "y", TO_ACT, TO_OUT, n);
            rr = to_buf_new(r, "r", TO_F32, TO_OUT, (size_t)T);
            if (with) {
                xs = to_buf_new(r, "xs", TO_F32, TO_OUT, n);
                TO_BUF(r, xs)->cmp = TO_SAME;
            }
            TO_SIDES(r) TO_CALL(r, r->be->rmsnorm_fwd(r->ctx, to_a(r, y), to_a(r, rr), to_a(r, x), to_a(r, w), T, D, 1e-6f,
                                                      to_a(r, xs)));
            to_check(r);
        }
}

// dx (written, then accumulated onto dx0) and dw (+= onto dw0) from the CPU's r; dxa, dx's final
// value in the activation dtype, is the GPU's dx rounded as to_act rounds (bit for bit); a second
// run gives the same dw bits; without a weight gradient only dx is written. dx = r w dy - x r^3
// mean(w dy x): its two terms, each of the size of r w dy, cancel exactly when D = 1 (x r = +-1):
// their size, not that of dx, sets dx's atol.
static void to_gen_rmsnorm_bwd(to_run *r) {
    size_t s;
    int acc;
    for (s = 0; s < TO_NNORM; s++)
        for (acc = 0; acc < 2; acc++) {
            int64_t T = to_norm_shapes[s][0], t, j;
            int D = (int)to_norm_shapes[s][1], x, w, rr, dy, dx, dw, dx2, dw2, dx3, dxa, scr;
            size_t n = (size_t)(T * D);
            double dxs = 0;
            float *y;
            if (!to_case(r, "T=%lld D=%d accumulate=%d", (long long)T, D, acc)) return;
            x = to_rnd(r, "x", TO_F32, TO_IN, n, 2.0);
            w = to_rnd(r, "w", TO_F32, TO_IN, (size_t)D, 1.5);
            dy = to_rnd(r, "dy", TO_F32, TO_IN, n, 1.0);
            rr = to_buf_new(r, "r", TO_F32, TO_IN, (size_t)T);
            y = to_hf(r, n);
            fat5__cpu_rmsnorm_fwd(r->cpu, FAT5__ADDR(y), FAT5__ADDR(TO_F(r, rr)), FAT5__ADDR(TO_F(r, x)),
                                  FAT5__ADDR(TO_F(r, w)), T, D, 1e-6f, 0);
            for (t = 0; t < T; t++)
                for (j = 0; j < D; j++) {
                    double m = fabs((double)TO_F(r, rr)[t] * TO_F(r, w)[j] * TO_F(r, dy)[t * D + j]);
                    if (m > dxs) dxs = m;
                }
            dx = to_rnd(r, "dx", TO_F32, TO_INOUT, n, 1.0);
            dw = to_rnd(r, "dw", TO_F32, TO_INOUT, (size_t)D, 1.0);
            dx2 = to_buf_new(r, "dx (rerun)", TO_F32, TO_INOUT, n);
            dw2 = to_buf_new(r, "dw (rerun)", TO_F32, TO_INOUT, (size_t)D);
            dx3 = to_buf_new(r, "dx (no dw)", TO_F32, TO_INOUT, n);
            memcpy(TO_F(r, dx2), TO_F(r, dx), n * 4);
            memcpy(TO_F(r, dx3), TO_F(r, dx), n * 4);
            memcpy(TO_F(r, dw2), TO_F(r, dw), (size_t)D * 4);
            dxa = to_buf_new(r, "dxa", TO_ACT, TO_OUT, n);
            scr = to_buf_new(r, "scratch", TO_F32, TO_SCRATCH, (size_t)TO_NORM_ROWS * (size_t)D);
            TO_SIDES(r) {
                TO_CALL(r, r->be->rmsnorm_bwd(r->ctx, to_a(r, dx), to_a(r, dw), to_a(r, dy), to_a(r, x), to_a(r, w),
                                              to_a(r, rr), T, D, acc, to_a(r, scr), to_a(r, dxa)));
                TO_CALL(r, r->be->rmsnorm_bwd(r->ctx, to_a(r, dx2), to_a(r, dw2), to_a(r, dy), to_a(r, x), to_a(r, w),
                                              to_a(r, rr), T, D, acc, to_a(r, scr), 0));
                TO_CALL(r, r->be->rmsnorm_bwd(r->ctx, to_a(r, dx3), 0, to_a(r, dy), to_a(r, x), to_a(r, w),
                                              to_a(r, rr), T, D, 0, 0, 0));
            }
            if (r->err) return;
            dxs = fmax(dxs, to_maxabs(TO_RES(r, dx, 0), n));
            TO_BUF(r, dx)->scale = TO_BUF(r, dx2)->scale = TO_BUF(r, dx3)->scale = TO_BUF(r, dxa)->scale = dxs;
            to_check(r);
            to_same_gpu(r, dw2, dw, 0, "dw rerun");
            if (r->gpu && !r->err) {  // dxa: the GPU's dx in the activation dtype, as to_act rounds it
                float *rd = to_hf(r, n);
                size_t k;
                for (k = 0; k < n; k++) rd[k] = to_round1(r, TO_RES(r, dx, 1)[k]);
                to_cmp_at(r, __LINE__, TO_BUF(r, dxa), TO_RES(r, dxa, 1), rd, 1, "dxa vs the GPU's dx rounded");
            }
        }
}

// ----- ffn.cu: the activations, plain and gated, over both tails, the kinks and the derivative
// roots (a = 0, +-30); each op also runs on the arrays one element in (not 16-byte aligned: the
// one-per-thread path), which must give the same bits as the aligned run -----

static const int64_t to_act_n[] = {1, 1001, 100003};

static void to_act_inputs(to_run *r, int gated, int64_t n, int *a, int *b) {
    *a = to_rnd(r, "a", TO_ACT, TO_IN, (size_t)n, 6.0);
    TO_F(r, *a)[0] = 0.0f;
    if (n > 2) TO_F(r, *a)[1] = -30.0f, TO_F(r, *a)[2] = 30.0f;
    *b = gated ? to_rnd(r, "b", TO_ACT, TO_IN, (size_t)n, 2.0) : -1;
}

// dropout of the hidden activation (drop 1: T5's, rate 0.3): the same mask on both sides. The
// unaligned run starts at element 1, so its mask differs from the aligned one's: compared with the
// CPU only.
static fat5__drop to_act_drop(int act, int gated, size_t s) {
    return fat5__drop_make(0x9e3779b97f4a7c15ull + (uint64_t)s, (uint64_t)(act * 2 + gated) << 12, 0.3);
}

static void to_gen_act_fwd(to_run *r) {
    int act, gated, drop;
    size_t s;
    for (drop = 0; drop < 2; drop++)
        for (act = FAT5_ACT_RELU; act <= FAT5__ACT_TANH; act++)
            for (gated = 0; gated < 2; gated++)
                for (s = 0; s < sizeof to_act_n / sizeof to_act_n[0]; s++) {
                    int64_t n = to_act_n[s];
                    int a, b, h, h2;
                    fat5__drop d = drop ? to_act_drop(act, gated, s) : fat5__drop_none();
                    if (!to_case(r, "%s%s n=%lld%s", gated ? "gated " : "", (act == FAT5__ACT_TANH ? "tanh" : fat5__act_name((fat5_act)act)), (long long)n,
                                 drop ? " dropout 0.3" : ""))
                        return;
                    to_act_inputs(r, gated, n, &a, &b);
                    h = to_buf_new(r, "h", TO_ACT, TO_OUT, (size_t)n);
                    h2 = to_buf_new(r, "h (unaligned)", TO_ACT, TO_INOUT, (size_t)n);
                    TO_SIDES(r) {
                        TO_CALL(r, r->be->act_fwd(r->ctx, to_a(r, h), to_a(r, a), to_a(r, b), n, act, d));
                        if (n > 1)
                            TO_CALL(r, r->be->act_fwd(r->ctx, to_ae(r, h2, 1), to_ae(r, a, 1), b < 0 ? 0 : to_ae(r, b, 1),
                                                      n - 1, act, d));
                    }
                    to_check(r);
                    if (n > 1 && !drop) to_same_gpu(r, h2, h, 1, "h unaligned vs aligned");
                }
}

// gated: db written in place over dh, as the model does
static void to_gen_act_bwd(to_run *r) {
    int act, gated, drop;
    size_t s;
    for (drop = 0; drop < 2; drop++)
        for (act = FAT5_ACT_RELU; act <= FAT5__ACT_TANH; act++)
            for (gated = 0; gated < 2; gated++)
                for (s = 0; s < sizeof to_act_n / sizeof to_act_n[0]; s++) {
                    int64_t n = to_act_n[s];
                    int a, b, dh, da, dh2, da2;
                    fat5__drop d = drop ? to_act_drop(act, gated, s) : fat5__drop_none();
                    if (!to_case(r, "%s%s n=%lld%s", gated ? "gated " : "", (act == FAT5__ACT_TANH ? "tanh" : fat5__act_name((fat5_act)act)), (long long)n,
                                 drop ? " dropout 0.3" : ""))
                        return;
                    to_act_inputs(r, gated, n, &a, &b);
                    dh = to_rnd(r, gated ? "dh -> db" : "dh", TO_ACT, gated ? TO_INOUT : TO_IN, (size_t)n, 1.0);
                    dh2 = to_buf_new(r, gated ? "dh -> db (unaligned)" : "dh (unaligned)", TO_ACT,
                                     gated ? TO_INOUT : TO_IN, (size_t)n);
                    memcpy(TO_F(r, dh2), TO_F(r, dh), (size_t)n * 4);
                    da = to_buf_new(r, "da", TO_ACT, TO_OUT, (size_t)n);
                    da2 = to_buf_new(r, "da (unaligned)", TO_ACT, TO_INOUT, (size_t)n);
                    TO_SIDES(r) {
                        TO_CALL(r, r->be->act_bwd(r->ctx, to_a(r, da), b < 0 ? 0 : to_a(r, dh), to_a(r, dh), to_a(r, a),
                                                  to_a(r, b), n, act, d));
                        if (n > 1)
                            TO_CALL(r, r->be->act_bwd(r->ctx, to_ae(r, da2, 1), b < 0 ? 0 : to_ae(r, dh2, 1),
                                                      to_ae(r, dh2, 1), to_ae(r, a, 1), b < 0 ? 0 : to_ae(r, b, 1), n - 1,
                                                      act, d));
                    }
                    to_check(r);
                    if (n > 1 && !drop) {
                        to_same_gpu(r, da2, da, 1, "da unaligned vs aligned");
                        if (gated) to_same_gpu(r, dh2, dh, 1, "db unaligned vs aligned");
                    }
                }
}

// ----- dropout.cu: dropout in every mode, in place too (y = x m, the product rounded once and, in
// ADD, added after: bit for bit on both sides, an activation-dtype output as the CPU's value rounded
// to bf16), and drop_draws, the generator alone (equal integers) -----

static const int64_t to_drop_n[] = {1, 13, 1001, 100003};

static void to_gen_dropout(to_run *r) {
    static const double rates[] = {0.1, 0.5, 0.9};
    int mode, inplace;
    size_t s;
    for (inplace = 0; inplace < 2; inplace++)
        for (mode = FAT5__DROP_F32; mode <= FAT5__DROP_ACT; mode++)
            for (s = 0; s < sizeof to_drop_n / sizeof to_drop_n[0]; s++) {
                int64_t n = to_drop_n[s];
                double p = rates[s % 3];
                fat5__drop d = fat5__drop_make(0x0123456789abcdefull * (s + 1), ((uint64_t)(mode + 1) << 40) | 4097u, p);
                int x, y;
                if (inplace && mode != FAT5__DROP_F32 && mode != FAT5__DROP_ACT) continue;
                if (!to_case(r, "mode %d%s n=%lld p=%g", mode, inplace ? " in place" : "", (long long)n, p)) return;
                x = to_rnd(r, inplace ? "x -> y" : "x", mode == FAT5__DROP_ACT ? TO_ACT : TO_F32,
                           inplace ? TO_INOUT : TO_IN, (size_t)n, 3.0);
                y = inplace ? x
                    : mode == FAT5__DROP_ADD ? to_rnd(r, "y (+=)", TO_F32, TO_INOUT, (size_t)n, 1.0)
                                             : to_buf_new(r, "y", mode == FAT5__DROP_F32 ? TO_F32 : TO_ACT, TO_OUT, (size_t)n);
                TO_BUF(r, y)->cmp = TO_SAME;
                TO_SIDES(r) TO_CALL(r, r->be->dropout(r->ctx, to_a(r, y), to_a(r, x), n, mode, d));
                to_check(r);
            }
}

// streams and indices over their whole 64 bits: consecutive indices (one Philox block after
// another), an attention probability's (query row << 32 | key row), random words
static void to_gen_drop_draws(to_run *r) {
    static const int64_t ns[] = {1, 1000, 65537};
    size_t s;
    for (s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        int64_t n = ns[s], i;
        int st, ix, out;
        fat5_rng g = fat5_rng_init(77 + s);
        if (!to_case(r, "n=%lld", (long long)n)) return;
        st = to_buf_new(r, "stream", TO_I64, TO_IN, (size_t)n);
        ix = to_buf_new(r, "index", TO_I64, TO_IN, (size_t)n);
        out = to_buf_new(r, "out", TO_I32, TO_OUT, (size_t)n);
        for (i = 0; i < n; i++) {
            switch (i % 3) {
            case 0: TO_L(r, st)[i] = i / 3, TO_L(r, ix)[i] = i; break;
            case 1:
                TO_L(r, st)[i] = (int64_t)(fat5_rng_u64(&g) >> 1);
                TO_L(r, ix)[i] = (int64_t)((uint64_t)(i % 977) << 32 | (uint64_t)i);
                break;
            default: TO_L(r, st)[i] = (int64_t)fat5_rng_u64(&g), TO_L(r, ix)[i] = (int64_t)fat5_rng_u64(&g); break;
            }
        }
        TO_SIDES(r) TO_CALL(r, r->be->drop_draws(r->ctx, to_a(r, out), to_a(r, st), to_a(r, ix), n,
                                                 0xfedcba9876543210ull + s));
        to_check(r);
    }
}

// ----- attention.cu (the FMA kernels; tensor cores, FIRE, patterns and reruns of the bias
// gradient are test_gpu_ops.c's) -----

// FIRE's parameter block with weights that make the bias matter (scores of order 1..10)
static void to_fire_params(to_run *r, float *P, int H, int W, float c, float lm) {
    to_fill(r, P, (size_t)FAT5__FIRE_NUMEL(H, W), 1.0);
    to_fill(r, P, (size_t)W, 3.0);  // w1: kinks inside u's range
    to_fill(r, P + FAT5__FIRE_W2(W), (size_t)H * (size_t)W, 4.0 / sqrt((double)W));
    P[FAT5__FIRE_C(H, W)] = c;
    P[FAT5__FIRE_LM(H, W)] = lm;
}

typedef struct to_attn_cfg {
    int n_seq;
    const int *len_q, *len_k;  // len_k: cross-attention's keys
    int H, dk, nb, md;         // T5's bucket count and max distance
} to_attn_cfg;

// packed sequences of very different lengths, a one-token one among them, cross keys of other
// lengths (head dims 8, 64, 100, 128); head dims 1, 33 (no vector loads), 256 (the largest); bucket
// tables too large for shared memory (max_distance 20000: the global-memory fallback); odd bucket
// counts and a short lookup table (max_distance 9: most distances saturate); a cross sequence with
// no keys at all (o = 0, lse = -inf on both sides); 64 sequences of one token
static const int to_lq[] = {1, 300, 7, 64}, to_lk[] = {5, 129, 1, 33};
static const int to_lq1[] = {1, 40, 3}, to_lk1[] = {17, 1, 2}, to_lq2[] = {2, 130, 1}, to_lk2[] = {0, 70, 9};
static const int to_ones[64] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
static const to_attn_cfg to_attn_cfgs[] = {
    {4, to_lq, to_lk, 2, 8, 32, 128},    {4, to_lq, to_lk, 2, 64, 32, 128},    {4, to_lq, to_lk, 2, 100, 32, 128},
    {4, to_lq, to_lk, 2, 128, 32, 128},  {3, to_lq1, to_lk1, 3, 1, 32, 128},   {3, to_lq1, to_lk1, 3, 33, 7, 20},
    {3, to_lq1, to_lk1, 1, 256, 32, 128}, {3, to_lq2, to_lk2, 2, 64, 32, 20000}, {3, to_lq2, to_lk2, 2, 100, 16, 9},
    {64, to_ones, to_ones, 5, 64, 32, 128}};
// (mask | scheme, t5): cross (no bias), T5's bidirectional and causal buckets, causal without a
// bias, bidirectional ALiBi (no parameters: no bias gradient)
static const int to_attn_kinds[][2] = {{FAT5__ATTN_CROSS, 0},
                                       {FAT5__ATTN_BIDIR, 1},
                                       {FAT5__ATTN_CAUSAL, 1},
                                       {FAT5__ATTN_CAUSAL, 0},
                                       {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI, 0}};

typedef struct to_attn {
    int q, k, v, bias, lut, cuq, cuk, qseq, kseq, dout, o, lse, delta;  // buffers (-1: none)
    int64_t Tq, Tk;
    size_t nq, nk, nbias;
    float *oref;
    double nd, nv, no;  // largest 2-norms of dout, v, o head rows
} to_attn;

// The inputs of one configuration and kind; bwd: also dout and, from the CPU's forward on them,
// o (rounded as a bf16 activation), lse and delta, as inputs of the backward ops.
static void to_attn_setup(to_run *r, const to_attn_cfg *c, int kind, int t5, int bwd, to_attn *a) {
    const int H = c->H, dk = c->dk, mask = kind & FAT5__ATTN_MASK, ns = c->n_seq;
    int32_t cu_q[65], cu_k[65];
    int s, i;
    memset(a, -1, sizeof *a);
    cu_q[0] = cu_k[0] = 0;
    for (s = 0; s < ns; s++) {
        cu_q[s + 1] = cu_q[s] + c->len_q[s];
        cu_k[s + 1] = cu_k[s] + (mask == FAT5__ATTN_CROSS ? c->len_k[s] : c->len_q[s]);
    }
    a->Tq = cu_q[ns];
    a->Tk = cu_k[ns];
    a->nq = (size_t)(a->Tq * H * dk);
    a->nk = (size_t)(a->Tk * H * dk);
    a->nbias = (size_t)c->nb * (size_t)H;
    a->cuq = to_ints(r, "cu_q", TO_IN, cu_q, (size_t)ns + 1);
    a->cuk = to_ints(r, "cu_k", TO_IN, cu_k, (size_t)ns + 1);
    a->qseq = to_buf_new(r, "q_seq", TO_I32, TO_IN, (size_t)a->Tq);
    a->kseq = to_buf_new(r, "k_seq", TO_I32, TO_IN, (size_t)a->Tk);
    for (s = 0; s < ns; s++) {
        for (i = cu_q[s]; i < cu_q[s + 1]; i++) TO_I(r, a->qseq)[i] = s;
        for (i = cu_k[s]; i < cu_k[s + 1]; i++) TO_I(r, a->kseq)[i] = s;
    }
    // scores of order 1..10 (no 1/sqrt(dk) in T5): entries ~ 1.7/dk^(1/4) give q.k with std ~ 1
    a->q = to_rnd(r, "q", TO_ACT, TO_IN, a->nq, 1.7 / sqrt(sqrt((double)dk)));
    a->k = to_rnd(r, "k", TO_ACT, TO_IN, a->nk, 1.7 / sqrt(sqrt((double)dk)));
    a->v = to_rnd(r, "v", TO_ACT, TO_IN, a->nk, 1.0);
    if (t5) {
        a->bias = to_rnd(r, "bias", TO_F32, TO_IN, a->nbias, 2.0);
        a->lut = to_buf_new(r, "lut", TO_I32, TO_IN, (size_t)c->md);
        for (i = 0; i < c->md; i++) TO_I(r, a->lut)[i] = fat5__rel_bucket(-(int64_t)i, mask == FAT5__ATTN_BIDIR, c->nb, c->md);
    }
    a->nv = to_maxnorm(TO_F(r, a->v), (size_t)(a->Tk * H), (size_t)dk);
    if (!bwd) return;
    a->dout = to_rnd(r, "dout", TO_ACT, TO_IN, a->nq, 1.0);
    a->o = to_buf_new(r, "o", TO_ACT, TO_IN, a->nq);
    a->lse = to_buf_new(r, "lse", TO_F32, TO_IN, (size_t)(a->Tq * H));
    a->delta = to_buf_new(r, "delta", TO_F32, TO_IN, (size_t)(a->Tq * H));
#define TO_H(i) (i < 0 ? 0 : FAT5__ADDR(r->b[i].init))
    fat5__cpu_attn_fwd(r->cpu, TO_H(a->o), TO_H(a->lse), TO_H(a->q), TO_H(a->k), TO_H(a->v), TO_H(a->bias), TO_H(a->lut),
                       TO_H(a->cuq), TO_H(a->cuk), TO_H(a->qseq), a->Tq, H, dk, kind, c->nb, c->md, 0, 0, fat5__drop_none());
    to_round(r, a->o);
    fat5__cpu_attn_bwd_delta(r->cpu, TO_H(a->delta), TO_H(a->o), TO_H(a->dout), a->Tq, H, dk);
#undef TO_H
    a->nd = to_maxnorm(TO_F(r, a->dout), (size_t)(a->Tq * H), (size_t)dk);
    a->no = to_maxnorm(TO_F(r, a->o), (size_t)(a->Tq * H), (size_t)dk);
}

// Loops over every configuration and kind; declares c, kind, t5, A (the inputs) for the body.
#define TO_ATTN_CASES(r, bwd)                                                                                      \
    for (ci = 0; ci < sizeof to_attn_cfgs / sizeof to_attn_cfgs[0]; ci++)                                          \
        for (ki = 0; ki < sizeof to_attn_kinds / sizeof to_attn_kinds[0]; ki++)                                    \
            if (c = &to_attn_cfgs[ci], kind = to_attn_kinds[ki][0], t5 = to_attn_kinds[ki][1],                     \
                !to_case(r, "kind %d t5 %d n_seq=%d H=%d dk=%d nb=%d md=%d", kind, t5, c->n_seq, c->H, c->dk, c->nb, \
                         c->md))                                                                                   \
                return;                                                                                            \
            else if (to_attn_setup(r, c, kind, t5, bwd, &A), 0) {                                                  \
            } else

// o (act): a weighted sum of v rows, atol TG_A max(|o|, |v|); lse (fp32)
static void to_gen_attn_fwd(to_run *r) {
    const to_attn_cfg *c;
    int kind, t5, o, lse;
    size_t ci, ki;
    to_attn A;
    TO_ATTN_CASES(r, 0) {
        o = to_buf_new(r, "o", TO_ACT, TO_OUT, A.nq);
        lse = to_buf_new(r, "lse", TO_F32, TO_OUT, (size_t)(A.Tq * c->H));
        TO_SIDES(r) TO_CALL(r, r->be->attn_fwd(r->ctx, to_a(r, o), to_a(r, lse), to_a(r, A.q), to_a(r, A.k), to_a(r, A.v),
                                               to_a(r, A.bias), to_a(r, A.lut), to_a(r, A.cuq), to_a(r, A.cuk),
                                               to_a(r, A.qseq), A.Tq, c->H, c->dk, kind, c->nb, c->md, 0, 0, fat5__drop_none()));
        if (r->err) return;
        TO_BUF(r, o)->scale = fmax(to_maxabs(TO_RES(r, o, 0), A.nq), to_maxabs(TO_F(r, A.v), A.nk));
        to_check(r);
    }
}

// delta = dout.o (fp32) carries the error of terms of size |dout| |o|
static void to_gen_attn_bwd_delta(to_run *r) {
    const to_attn_cfg *c;
    int kind, t5, d;
    size_t ci, ki;
    to_attn A;
    TO_ATTN_CASES(r, 1) {
        d = to_buf_new(r, "delta", TO_F32, TO_OUT, (size_t)(A.Tq * c->H));
        TO_SIDES(r) TO_CALL(r, r->be->attn_bwd_delta(r->ctx, to_a(r, d), to_a(r, A.o), to_a(r, A.dout), A.Tq, c->H, c->dk));
        if (r->err) return;
        TO_BUF(r, d)->scale = fmax(to_maxabs(TO_RES(r, d, 0), (size_t)(A.Tq * c->H)), A.nd * A.no);
        to_check(r);
    }
}

// dq (act) with T5's bias gradient (fp32, accumulated: rtol TG_RDB for the oracle's own float
// sums, atol TG_A of its largest); ds = p (dout.v - delta) with |dout.v|, |delta| <= |dout| |v|
// cancel exactly when a query sees one key: dq's atol TG_A max(|dq|, |dout| |v| max|k|). A second
// run gives the same bits (no atomics).
static void to_gen_attn_bwd_dq(to_run *r) {
    const to_attn_cfg *c;
    int kind, t5, dq, dq2, db = -1, db2 = -1, scr;
    size_t ci, ki;
    to_attn A;
    TO_ATTN_CASES(r, 1) {
        dq = to_buf_new(r, "dq", TO_ACT, TO_OUT, A.nq);
        dq2 = to_buf_new(r, "dq (rerun)", TO_ACT, TO_OUT, A.nq);
        db = db2 = -1;
        if (t5) {
            db = to_rnd(r, "dbias", TO_F32, TO_INOUT, A.nbias, 1.0);
            db2 = to_buf_new(r, "dbias (rerun)", TO_F32, TO_INOUT, A.nbias);
            memcpy(TO_F(r, db2), TO_F(r, db), A.nbias * 4);
            TO_BUF(r, db)->has_rtol = TO_BUF(r, db2)->has_rtol = 1;
            TO_BUF(r, db)->rtol = TO_BUF(r, db2)->rtol = TG_RDB;
        }
        scr = to_buf_new(r, "scratch", TO_F32, TO_SCRATCH, (size_t)TO_DBIAS_ROWS * (A.nbias ? A.nbias : 1));
        TO_SIDES(r) {
            TO_CALL(r, r->be->attn_bwd_dq(r->ctx, to_a(r, dq), to_a(r, db), to_a(r, A.dout), to_a(r, A.lse),
                                          to_a(r, A.delta), to_a(r, A.q), to_a(r, A.k), to_a(r, A.v), to_a(r, A.bias),
                                          to_a(r, A.lut), to_a(r, A.cuq), to_a(r, A.cuk), to_a(r, A.qseq), A.Tq, c->H,
                                          c->dk, kind, c->nb, c->md, 0, 0, to_a(r, scr), fat5__drop_none()));
            TO_CALL(r, r->be->attn_bwd_dq(r->ctx, to_a(r, dq2), to_a(r, db2), to_a(r, A.dout), to_a(r, A.lse),
                                          to_a(r, A.delta), to_a(r, A.q), to_a(r, A.k), to_a(r, A.v), to_a(r, A.bias),
                                          to_a(r, A.lut), to_a(r, A.cuq), to_a(r, A.cuk), to_a(r, A.qseq), A.Tq, c->H,
                                          c->dk, kind, c->nb, c->md, 0, 0, to_a(r, scr), fat5__drop_none()));
        }
        if (r->err) return;
        TO_BUF(r, dq)->scale = TO_BUF(r, dq2)->scale =
            fmax(to_maxabs(TO_RES(r, dq, 0), A.nq), A.nd * A.nv * to_maxabs(TO_F(r, A.k), A.nk));
        to_check(r);
        to_same_gpu(r, dq2, dq, 0, "dq rerun");
        if (db >= 0) to_same_gpu(r, db2, db, 0, "dbias rerun");
    }
}

// dk (act): atol TG_A max(|dk|, |dout| |v| max|q|) (ds cancels as in dq); dv (act): a weighted sum
// of dout rows, TG_A max(|dv|, |dout|); the same bits on a second run. Cross-attention's keys
// include those of the sequence that has no queries' keys (a query sequence of 2 tokens, 0 keys).
static void to_gen_attn_bwd_dkv(to_run *r) {
    const to_attn_cfg *c;
    int kind, t5, dk, dv, dk2, dv2;
    size_t ci, ki;
    to_attn A;
    TO_ATTN_CASES(r, 1) {
        dk = to_buf_new(r, "dk", TO_ACT, TO_OUT, A.nk);
        dv = to_buf_new(r, "dv", TO_ACT, TO_OUT, A.nk);
        dk2 = to_buf_new(r, "dk (rerun)", TO_ACT, TO_OUT, A.nk);
        dv2 = to_buf_new(r, "dv (rerun)", TO_ACT, TO_OUT, A.nk);
        TO_SIDES(r) {
            TO_CALL(r, r->be->attn_bwd_dkv(r->ctx, to_a(r, dk), to_a(r, dv), to_a(r, A.dout), to_a(r, A.lse),
                                           to_a(r, A.delta), to_a(r, A.q), to_a(r, A.k), to_a(r, A.v), to_a(r, A.bias),
                                           to_a(r, A.lut), to_a(r, A.cuq), to_a(r, A.cuk), to_a(r, A.kseq), A.Tk, c->H,
                                           c->dk, kind, c->nb, c->md, 0, 0, fat5__drop_none()));
            TO_CALL(r, r->be->attn_bwd_dkv(r->ctx, to_a(r, dk2), to_a(r, dv2), to_a(r, A.dout), to_a(r, A.lse),
                                           to_a(r, A.delta), to_a(r, A.q), to_a(r, A.k), to_a(r, A.v), to_a(r, A.bias),
                                           to_a(r, A.lut), to_a(r, A.cuq), to_a(r, A.cuk), to_a(r, A.kseq), A.Tk, c->H,
                                           c->dk, kind, c->nb, c->md, 0, 0, fat5__drop_none()));
        }
        if (r->err) return;
        TO_BUF(r, dk)->scale = TO_BUF(r, dk2)->scale =
            fmax(to_maxabs(TO_RES(r, dk, 0), A.nk), A.nd * A.nv * to_maxabs(TO_F(r, A.q), A.nq));
        TO_BUF(r, dv)->scale = TO_BUF(r, dv2)->scale =
            fmax(to_maxabs(TO_RES(r, dv, 0), A.nk), to_maxabs(TO_F(r, A.dout), A.nq));
        to_check(r);
        to_same_gpu(r, dk2, dk, 0, "dk rerun");
        to_same_gpu(r, dv2, dv, 0, "dv rerun");
    }
}

// g += the per-head shares summed in head order: the same arithmetic, bit for bit
static void to_gen_fire_reduce(to_run *r) {
    static const int shapes[][2] = {{3, 8}, {1, 1}, {16, 33}, {12, 256}};
    size_t s;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int H = shapes[s][0], W = shapes[s][1], g, sh;
        if (!to_case(r, "H=%d W=%d", H, W)) return;
        g = to_rnd(r, "g", TO_F32, TO_INOUT, (size_t)FAT5__FIRE_NUMEL(H, W), 1.0);
        sh = to_rnd(r, "shares", TO_F32, TO_IN, (size_t)H * (size_t)FAT5__FIRE_SHARES(W), 100.0);
        TO_BUF(r, g)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->fire_reduce(r->ctx, to_a(r, g), to_a(r, sh), H, W));
        to_check(r);
    }
}

// ----- global.cu: transient-global block sums -----

// packed sequences (one of one token, one of exactly a tile), D = 33; blocks of 16 (sequences
// shorter than a block have no globals), of 5, and of 200 (one global of the 300-token sequence,
// its block running to the end); *longest: the most tokens of one block
static void to_blocks(to_run *r, int gsz, int *cu, int *cug, int *seq, int64_t *Tt, int64_t *G, int *longest) {
    static const int lens[] = {1, 300, 7, 64, 129};
    const int n_seq = 5;
    int32_t c[6], cg[6];
    int s, i;
    c[0] = 0;
    for (s = 0; s < n_seq; s++) c[s + 1] = c[s] + lens[s];
    *Tt = c[n_seq];
    cg[0] = (int32_t)*Tt;  // the global rows after the tokens', as in the model
    for (s = 0; s < n_seq; s++) cg[s + 1] = cg[s] + lens[s] / gsz;
    *G = cg[n_seq] - *Tt;
    *cu = to_ints(r, "cu", TO_IN, c, (size_t)n_seq + 1);
    *cug = to_ints(r, "cu_g", TO_IN, cg, (size_t)n_seq + 1);
    *seq = to_buf_new(r, "seq", TO_I32, TO_IN, (size_t)(*Tt + *G));
    *longest = 0;
    for (s = 0; s < n_seq; s++) {
        for (i = c[s]; i < c[s + 1]; i++) TO_I(r, *seq)[i] = s;
        for (i = cg[s]; i < cg[s + 1]; i++) TO_I(r, *seq)[i] = s;
        if (lens[s] / gsz && lens[s] - (lens[s] / gsz - 1) * gsz > *longest) *longest = lens[s] - (lens[s] / gsz - 1) * gsz;
    }
}

static const int to_block_g[] = {16, 5, 200};
#define TO_NBLOCK (sizeof to_block_g / sizeof to_block_g[0])

// fp32 sums of up to `longest` terms of at most max|x|: their size bounds the error
static void to_gen_block_sum(to_run *r) {
    const int D = 33;
    size_t gi;
    for (gi = 0; gi < TO_NBLOCK; gi++) {
        int gsz = to_block_g[gi], cu, cug, seq, longest, x, out;
        int64_t Tt, G;
        if (!to_case(r, "g=%d D=%d", gsz, D)) return;
        to_blocks(r, gsz, &cu, &cug, &seq, &Tt, &G, &longest);
        x = to_rnd(r, "x", TO_ACT, TO_IN, (size_t)(Tt * D), 2.0);
        out = to_buf_new(r, "out", TO_F32, TO_OUT, (size_t)(G * D));
        TO_SIDES(r) TO_CALL(r, r->be->block_sum(r->ctx, to_a(r, out), to_a(r, x), to_a(r, cu), to_a(r, cug), to_a(r, seq),
                                                G, D, gsz));
        if (r->err) return;
        TO_BUF(r, out)->scale = fmax(to_maxabs(TO_RES(r, out, 0), (size_t)(G * D)),
                                     to_maxabs(TO_F(r, x), (size_t)(Tt * D)) * longest);
        to_check(r);
    }
}

// dx += its global's gradient: one fp32 addition per element on both sides, bit for bit
static void to_gen_block_sum_bwd(to_run *r) {
    const int D = 33;
    size_t gi;
    for (gi = 0; gi < TO_NBLOCK; gi++) {
        int gsz = to_block_g[gi], cu, cug, seq, longest, dx, dout;
        int64_t Tt, G;
        if (!to_case(r, "g=%d D=%d", gsz, D)) return;
        to_blocks(r, gsz, &cu, &cug, &seq, &Tt, &G, &longest);
        dx = to_rnd(r, "dx", TO_F32, TO_INOUT, (size_t)(Tt * D), 1.0);
        dout = to_rnd(r, "dout", TO_F32, TO_IN, (size_t)(G * D), 1.0);
        TO_BUF(r, dx)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->block_sum_bwd(r->ctx, to_a(r, dx), to_a(r, dout), to_a(r, cu), to_a(r, cug),
                                                    to_a(r, seq), Tt, D, gsz));
        to_check(r);
    }
}

// ----- rope.cu: half-split and interleaved pairs, partial rotation (rd < dk), xPos on queries and
// keys, the transposed rotation, positions per packed sequence and decode positions pos[seq[t]]. The
// angles and scales are computed in double on both sides and rounded to fp32, and the rotation is
// the same fp32 arithmetic: fp32 agrees to ~1 ulp (rtol 1e-6); bf16 adds its rounding (TG_R16);
// atol TG_A of a tenth of the largest |x| scaled by xPos. -----
static void to_gen_rope(to_run *r) {
    static const int lens[] = {1, 37, 300, 5};
    static const struct { int H, dk, rd; float base, xpos; int flags, pos; } cs[] = {
        {3, 64, 64, 10000.0f, 0.0f, 0, -1},
        {2, 33, 16, 10000.0f, 0.0f, FAT5__ROPE_INTERLEAVED, -1},
        {4, 32, 32, 100.0f, 16.0f, FAT5__ROPE_INTERLEAVED, -1},
        {4, 32, 32, 100.0f, 16.0f, FAT5__ROPE_INTERLEAVED | FAT5__ROPE_KEY, -1},
        {2, 8, 4, 10000.0f, 512.0f, FAT5__ROPE_TRANSPOSE, -1},
        {2, 8, 8, 10000.0f, 512.0f, FAT5__ROPE_KEY | FAT5__ROPE_TRANSPOSE, -1},
        {3, 16, 8, 500.0f, 32.0f, FAT5__ROPE_INTERLEAVED, 41},
        {1, 128, 128, 10000.0f, 0.0f, FAT5__ROPE_TRANSPOSE, 2999}};
    size_t ci;
    for (ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        int s, i, n_seq = 4, x, cu, seq, pos = -1;
        int32_t c[5], p = cs[ci].pos, pv[4];
        int64_t Tt;
        size_t n;
        if (!to_case(r, "H=%d dk=%d rd=%d base=%g xpos=%g flags=%d pos=%d", cs[ci].H, cs[ci].dk, cs[ci].rd,
                     (double)cs[ci].base, (double)cs[ci].xpos, cs[ci].flags, cs[ci].pos))
            return;
        c[0] = 0;
        for (s = 0; s < n_seq; s++) c[s + 1] = c[s] + lens[s];
        Tt = c[n_seq];
        n = (size_t)Tt * (size_t)cs[ci].H * (size_t)cs[ci].dk;
        cu = to_ints(r, "cu", TO_IN, c, (size_t)n_seq + 1);
        seq = to_buf_new(r, "seq", TO_I32, TO_IN, (size_t)Tt);
        for (s = 0; s < n_seq; s++)
            for (i = c[s]; i < c[s + 1]; i++) TO_I(r, seq)[i] = s;
        pv[0] = p, pv[1] = p / 2, pv[2] = p + 7, pv[3] = 0;   // each sequence's decode row at its own position
        if (p >= 0) pos = to_ints(r, "pos", TO_IN, pv, 4);
        x = to_rnd(r, "x", TO_ACT, TO_INOUT, n, 2.0);
        TO_BUF(r, x)->scale = 0.1 * to_maxabs(TO_F(r, x), n);
        TO_BUF(r, x)->has_rtol = !r->bf16;
        TO_BUF(r, x)->rtol = 1e-6;
        TO_SIDES(r) TO_CALL(r, r->be->rope(r->ctx, to_a(r, x), to_a(r, cu), to_a(r, seq), to_a(r, pos), Tt, cs[ci].H,
                                           cs[ci].dk, cs[ci].rd, cs[ci].base, cs[ci].xpos, cs[ci].flags));
        if (r->err) return;
        TO_BUF(r, x)->scale = fmax(TO_BUF(r, x)->scale, 0.1 * to_maxabs(TO_RES(r, x, 0), n));
        to_check(r);
    }
}

// ----- decode.cu -----

// kind, cache rows, entries (entry i is row (3 i + 1) mod rows), H, dk, nb (FIRE: W), md (FIRE:
// L0), positions per row (rows stored in reverse order, a gap between), query position (causal:
// pos + 1 keys for the even rows, pos - pos / 3 + 1 for the odd ones), keys per row (cross), the launcher's bound max_keys (below the real counts in
// one case: still exact). Split paths, dk odd, 1 and 256, 16-byte rows (bf16 64 and 128, fp32 32
// and 64), one key, many splits with few keys; cross key counts 3000 (24 splits), 1, 0, odd;
// ALiBi and FIRE (the cut inside the rows).
typedef struct to_dec_cfg {
    int kind, n_rows, n, H, dk, nb, md, cap, pos, cross, max_keys;
} to_dec_cfg;

// attn_decode (act o: weighted sums of v rows, atol TG_A max(|o|, |v|)); a rerun gives the same
// bits; then every row's position advanced on the backend by add_i32 (causal) and the decode run
// again.
static void to_gen_attn_decode(to_run *r) {
    static const int32_t lens[5] = {3000, 1, 0, 1777, 33};
    static const to_dec_cfg cfgs[] = {
        {FAT5__ATTN_CAUSAL, 3, 4, 3, 37, 32, 128, 3001, 2998, 0, 3001},
        {FAT5__ATTN_CAUSAL, 2, 2, 2, 64, 32, 128, 3001, 2998, 0, 3001},
        {FAT5__ATTN_CAUSAL, 2, 3, 1, 256, 32, 128, 700, 698, 0, 700},
        {FAT5__ATTN_CAUSAL, 3, 2, 4, 1, 7, 9, 500, 300, 0, 500},
        {FAT5__ATTN_CAUSAL, 2, 2, 2, 100, 32, 128, 64, 0, 0, 64},
        {FAT5__ATTN_CAUSAL, 2, 3, 2, 100, 32, 128, 200, 150, 0, 100},
        {FAT5__ATTN_CAUSAL, 2, 2, 2, 48, 32, 128, 3001, 40, 0, 3001},
        {FAT5__ATTN_CROSS, 5, 7, 3, 37, 32, 128, 3000, 0, 1, 3000},
        {FAT5__ATTN_CROSS, 5, 5, 2, 130, 32, 128, 3000, 0, 1, 128},
        {FAT5__ATTN_CAUSAL, 2, 3, 2, 128, 32, 128, 300, 257, 0, 300},
        {FAT5__ATTN_CAUSAL, 3, 2, 3, 32, 32, 128, 130, 100, 0, 130},
        {FAT5__ATTN_CAUSAL, 2, 2, 2, 64, 32, 128, 129, 5, 0, 129},
        {FAT5__ATTN_CROSS, 5, 7, 2, 64, 32, 128, 3000, 0, 1, 3000},
        {FAT5__ATTN_CROSS, 5, 6, 3, 128, 32, 128, 3000, 0, 1, 512},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_FIRE, 2, 3, 2, 64, 8, 16, 200, 140, 0, 200},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI, 2, 2, 4, 32, 0, 0, 90, 60, 0, 90},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI, 3, 4, 3, 37, 0, 0, 3001, 2998, 0, 3001},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI, 2, 3, 4, 64, 0, 0, 64, 20, 0, 64},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_FIRE, 3, 4, 3, 37, 8, 16, 3001, 2998, 0, 3001},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_FIRE, 2, 3, 2, 256, 33, 16, 200, 140, 0, 200},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_FIRE, 2, 2, 2, 16, 8, 16, 64, 0, 0, 64},
    };
    size_t ci;
    for (ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        const to_dec_cfg *c = &cfgs[ci];
        const int64_t ld = (int64_t)c->H * c->dk, nrow = (int64_t)c->n_rows * (c->cap + 3);
        const size_t nc = (size_t)(nrow * ld), nq = (size_t)(c->n * ld);
        const int fire = (c->kind & FAT5__ATTN_FIRE) != 0, t5 = !(c->kind & (FAT5__ATTN_FIRE | FAT5__ATTN_ALIBI));
        const int causal = (c->kind & FAT5__ATTN_MASK) == FAT5__ATTN_CAUSAL, next = causal && c->pos + 1 < c->cap;
        const size_t nbh = fire ? (size_t)FAT5__FIRE_NUMEL(c->H, c->nb) : (size_t)c->nb * (size_t)c->H;
        int q, k, v, bias = -1, lut = -1, rows, off, len, pos, o, o2, o3, scr, i;
        int32_t pv[5];
        double vmax;
        if (!to_case(r, "kind %d rows=%d n=%d H=%d dk=%d pos=%d max_keys=%d", c->kind, c->n_rows, c->n, c->H, c->dk,
                     c->pos, c->max_keys))
            return;
        rows = to_buf_new(r, "rows", TO_I32, TO_IN, (size_t)c->n);
        off = to_buf_new(r, "kv_off", TO_I32, TO_IN, (size_t)c->n_rows);
        len = to_buf_new(r, "kv_len", TO_I32, TO_IN, (size_t)c->n_rows);
        for (i = 0; i < c->n; i++) TO_I(r, rows)[i] = (3 * i + 1) % c->n_rows;
        for (i = 0; i < c->n_rows; i++) {
            TO_I(r, off)[i] = (c->n_rows - 1 - i) * (c->cap + 3) + 1;
            TO_I(r, len)[i] = c->cross ? lens[i] : 0;
        }
        for (i = 0; i < c->n_rows; i++) pv[i] = c->pos - (i % 2) * (c->pos / 3);   // rows at their own positions
        pos = to_ints(r, "pos", next ? TO_INOUT : TO_IN, pv, (size_t)c->n_rows);
        q = to_rnd(r, "q", TO_ACT, TO_IN, nq, 1.7 / sqrt(sqrt((double)c->dk)));
        k = to_rnd(r, "k", TO_ACT, TO_IN, nc, 1.7 / sqrt(sqrt((double)c->dk)));
        v = to_rnd(r, "v", TO_ACT, TO_IN, nc, 1.0);
        if (fire) {
            bias = to_buf_new(r, "bias", TO_F32, TO_IN, nbh);
            to_fire_params(r, TO_F(r, bias), c->H, c->nb, -0.2f, 9.37f);  // threshold 149.92: the cut inside the rows
        } else if (t5) {
            bias = to_rnd(r, "bias", TO_F32, TO_IN, nbh, 2.0);
            lut = to_buf_new(r, "lut", TO_I32, TO_IN, (size_t)c->md);
            for (i = 0; i < c->md; i++) TO_I(r, lut)[i] = fat5__rel_bucket(-(int64_t)i, 0, c->nb, c->md);
        }
        o = to_buf_new(r, "o", TO_ACT, TO_OUT, nq);
        o2 = to_buf_new(r, "o (rerun)", TO_ACT, TO_OUT, nq);
        o3 = to_buf_new(r, "o (next position)", TO_ACT, TO_OUT, nq);
        scr = to_buf_new(r, "scratch", TO_F32, TO_SCRATCH, (size_t)c->n * FAT5__DECODE_SCRATCH(c->H, c->dk));
        TO_SIDES(r) {
            int j;
            for (j = 0; j < 3; j++) {
                if (j == 2 && next) TO_CALL(r, r->be->add_i32(r->ctx, to_a(r, pos), 0, 1, c->n_rows));
                TO_CALL(r, r->be->attn_decode(r->ctx, to_a(r, j == 0 ? o : j == 1 ? o2 : o3), to_a(r, q), to_a(r, k),
                                              to_a(r, v), to_a(r, bias), to_a(r, lut), to_a(r, rows), to_a(r, off),
                                              to_a(r, len), to_a(r, pos), c->n, c->H, c->dk, c->kind, c->nb, c->md,
                                              c->max_keys, to_a(r, scr)));
            }
        }
        if (r->err) return;
        vmax = to_maxabs(TO_F(r, v), nc);
        TO_BUF(r, o)->scale = TO_BUF(r, o2)->scale = fmax(to_maxabs(TO_RES(r, o, 0), nq), vmax);
        TO_BUF(r, o3)->scale = fmax(to_maxabs(TO_RES(r, o3, 0), nq), vmax);
        to_check(r);
        to_same_gpu(r, o2, o, 0, "o rerun");
    }
}

// (rows, cap, I, steps): odd widths, one element, long rows, many rows; n_rows - 1 entries in
// another order than the rows, each row at its own position (row i starts at i % 2), advanced for
// the rows of the step (add_i32 with their indices, on the backend): copies, bit for bit (cache rows
// not written keep their values)
static const int to_cache_shapes[][4] = {{5, 9, 37, 6}, {2, 3, 1, 3}, {3, 40, 1536, 33}, {70, 4, 96, 2}};

static void to_cache_rows(to_run *r, int n_rows, int cap, int *rows, int *off) {
    int i;
    *rows = to_buf_new(r, "rows", TO_I32, TO_IN, (size_t)n_rows);
    *off = to_buf_new(r, "kv_off", TO_I32, TO_IN, (size_t)n_rows);
    for (i = 0; i < n_rows; i++) {
        TO_I(r, *rows)[i] = (n_rows - 1 - i + 2) % n_rows;
        TO_I(r, *off)[i] = (n_rows - 1 - i) * cap;
    }
}

static void to_gen_cache_write(to_run *r) {
    size_t s;
    for (s = 0; s < sizeof to_cache_shapes / sizeof to_cache_shapes[0]; s++) {
        int n_rows = to_cache_shapes[s][0], cap = to_cache_shapes[s][1], I = to_cache_shapes[s][2];
        int steps = to_cache_shapes[s][3], rows, off, kc, vc, k, v, pos, i;
        size_t nc = (size_t)n_rows * (size_t)cap * (size_t)I, ne = (size_t)(n_rows - 1) * (size_t)I;
        if (!to_case(r, "rows=%d cap=%d I=%d steps=%d", n_rows, cap, I, steps)) return;
        to_cache_rows(r, n_rows, cap, &rows, &off);
        kc = to_rnd(r, "kc", TO_ACT, TO_INOUT, nc, 1.0);
        vc = to_rnd(r, "vc", TO_ACT, TO_INOUT, nc, 1.0);
        k = to_rnd(r, "k", TO_ACT, TO_IN, ne * (size_t)steps, 1.0);
        v = to_rnd(r, "v", TO_ACT, TO_IN, ne * (size_t)steps, 1.0);
        pos = to_buf_new(r, "pos", TO_I32, TO_INOUT, (size_t)n_rows);
        for (i = 0; i < n_rows; i++) TO_I(r, pos)[i] = i % 2 && cap > steps ? 1 : 0;
        TO_BUF(r, kc)->cmp = TO_BUF(r, vc)->cmp = TO_SAME;
        TO_SIDES(r) {
            int st;
            for (st = 0; st < steps; st++) {
                TO_CALL(r, r->be->cache_write(r->ctx, to_a(r, kc), to_a(r, vc), to_ae(r, k, (size_t)st * ne),
                                              to_ae(r, v, (size_t)st * ne), to_a(r, rows), to_a(r, off), to_a(r, pos),
                                              n_rows - 1, I));
                TO_CALL(r, r->be->add_i32(r->ctx, to_a(r, pos), to_a(r, rows), 1, n_rows - 1));
            }
        }
        to_check(r);
    }
}

// positions [0, pos[r]) of dst row r from src row idx[r] (a source row taken twice; rows at their own
// positions), for the rows named (all but one, in another order): bit for bit
static void to_gen_cache_gather(to_run *r) {
    size_t s;
    for (s = 0; s < sizeof to_cache_shapes / sizeof to_cache_shapes[0]; s++) {
        int n_rows = to_cache_shapes[s][0], cap = to_cache_shapes[s][1], I = to_cache_shapes[s][2];
        int rows, off, idx, dst, src, pos, i;
        int32_t p = cap - 1 > 0 ? cap - 1 : 1;
        size_t nc = (size_t)n_rows * (size_t)cap * (size_t)I;
        if (!to_case(r, "rows=%d cap=%d I=%d pos=%d", n_rows, cap, I, p)) return;
        to_cache_rows(r, n_rows, cap, &rows, &off);
        idx = to_buf_new(r, "idx", TO_I32, TO_IN, (size_t)n_rows);
        for (i = 0; i < n_rows; i++) TO_I(r, idx)[i] = (i * 7 + 3) % n_rows;
        TO_I(r, idx)[0] = TO_I(r, idx)[n_rows - 1];
        pos = to_buf_new(r, "pos", TO_I32, TO_IN, (size_t)n_rows);
        for (i = 0; i < n_rows; i++) TO_I(r, pos)[i] = p - (i % 3 == 1 ? p / 2 : 0);
        src = to_rnd(r, "src", TO_ACT, TO_IN, nc, 1.0);
        dst = to_rnd(r, "dst", TO_ACT, TO_INOUT, nc, 1.0);
        TO_BUF(r, dst)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->cache_gather(r->ctx, to_a(r, dst), to_a(r, src), to_a(r, idx), to_a(r, rows),
                                                   to_a(r, off), to_a(r, pos), n_rows - 1, I));
        to_check(r);
    }
}

// x += v over many counters (the tail untouched), one counter, and n = 0 (launches nothing); then
// over the counters an index list names (every third, in reverse)
static void to_gen_add_i32(to_run *r) {
    static const int64_t ns[][2] = {{1000, 999}, {1, 1}, {5, 0}, {100003, 100003}};
    size_t s;
    for (s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        int x, idx;
        int64_t i;
        if (!to_case(r, "n=%lld of %lld", (long long)ns[s][1], (long long)ns[s][0])) return;
        x = to_buf_new(r, "x", TO_I32, TO_INOUT, (size_t)ns[s][0]);
        idx = to_buf_new(r, "idx", TO_I32, TO_IN, (size_t)(ns[s][1] / 3 + 1));
        for (i = 0; i < ns[s][1] / 3; i++) TO_I(r, idx)[i] = (int32_t)(ns[s][1] - 1 - 3 * i);
        for (i = 0; i < ns[s][0]; i++) TO_I(r, x)[i] = (int32_t)(i * 37 - 5000);
        TO_SIDES(r) {
            TO_CALL(r, r->be->add_i32(r->ctx, to_a(r, x), 0, -3, ns[s][1]));
            TO_CALL(r, r->be->add_i32(r->ctx, to_a(r, x), 0, 5, ns[s][1] / 2));
            TO_CALL(r, r->be->add_i32(r->ctx, to_a(r, x), to_a(r, idx), 11, ns[s][1] / 3));
        }
        to_check(r);
    }
}

// ----- mm.cu: norm_mm, plain products and the decoder's q | k | v with the cache write. The GPU
// rounds the normalised rows to the activation dtype before the products (as rmsnorm_fwd + mm
// do), the CPU twin does not: per output u sum_k |xn_k w_k| (the magnitude pass) for that rounding
// plus the output's own rounding ur |ref|, u = ur = 2^-8 in bf16, u = 1e-5 (fp32 sums), ur = 1e-6
// in fp32. Cache rows start at a sentinel that every row not written keeps. The gated outputs, with
// their own bound, are test_gpu_ops.c's gpu_norm_mm. -----
static void to_gen_norm_mm(to_run *r) {
    // T, N, K, S (weights), cache: one row with the cache write; row groups of 16 (5, 16, 37 rows);
    // N odd; K = 36 and 40 (bf16: one element at a time / 16-byte loads), 38 (element-wise in both
    // dtypes); the FAT5-small width
    static const int cfgs[][5] = {{1, 24, 64, 3, 1},  {5, 40, 64, 3, 1}, {16, 8, 40, 1, 0}, {37, 19, 36, 2, 0},
                                  {2, 64, 512, 3, 0}, {3, 21, 64, 3, 1}, {4, 11, 38, 3, 0}};
    const double u = r->bf16 ? 1.0 / 256 : 1e-5, ur = r->bf16 ? 1.0 / 256 : 1e-6;
    size_t ci;
    for (ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        int T = cfgs[ci][0], N = cfgs[ci][1], K = cfgs[ci][2], S = cfgs[ci][3], cache = cfgs[ci][4], cap = 9;
        int rows_n = T + 3, x, g, w[3] = {-1, -1, -1}, y[3] = {-1, -1, -1}, rows = -1, off = -1, pos = -1, s, i;
        int32_t p = 4;
        if (!to_case(r, "T=%d N=%d K=%d weights=%d cache=%d", T, N, K, S, cache)) return;
        x = to_rnd(r, "x", TO_F32, TO_IN, (size_t)T * K, 3.0);
        g = to_rnd(r, "g", TO_F32, TO_IN, (size_t)K, 1.5);
        for (s = 0; s < S; s++) {
            size_t ny = (size_t)(cache && s > 0 ? rows_n * cap : T) * N;
            w[s] = to_rnd(r, "w", TO_ACT, TO_IN, (size_t)N * K, 1.0 / sqrt((double)K));
            y[s] = to_buf_new(r, s == 0 ? "y0" : s == 1 ? "y1" : "y2", TO_ACT, TO_INOUT, ny);
            for (i = 0; i < (int)ny; i++) TO_F(r, y[s])[i] = 7.0f;  // the sentinel
            TO_BUF(r, y[s])->arel = 0;
            TO_BUF(r, y[s])->mrel = u;
            TO_BUF(r, y[s])->has_rtol = 1;
            TO_BUF(r, y[s])->rtol = ur;
        }
        if (cache) {
            rows = to_buf_new(r, "rows", TO_I32, TO_IN, (size_t)T);
            off = to_buf_new(r, "kv_off", TO_I32, TO_IN, (size_t)rows_n);
            for (i = 0; i < T; i++) TO_I(r, rows)[i] = T - 1 - i;  // a permutation of 0 .. T-1
            for (i = 0; i < rows_n; i++) TO_I(r, off)[i] = (rows_n - 1 - i) * cap;
            pos = to_buf_new(r, "pos", TO_I32, TO_IN, (size_t)rows_n);
            for (i = 0; i < rows_n; i++) TO_I(r, pos)[i] = p - i % 3;   // rows at their own positions
        }
        TO_SIDES(r) TO_CALL(r, r->be->norm_mm(r->ctx, to_a(r, y[0]), to_a(r, y[1]), to_a(r, y[2]), to_a(r, x), to_a(r, g),
                                              to_a(r, w[0]), to_a(r, w[1]), to_a(r, w[2]), T, N, K, 1e-6f, -1,
                                              to_a(r, rows), to_a(r, off), to_a(r, pos)));
        to_check(r);
    }
}

// ----- xent.cu -----

// (T, V) x (z, smoothing) on and off; one row of one class; large vocabularies. Labels -100 every
// fifth row; a confident row (ce near 0: cancellation, hence row_ce's atol TG_A max|lse|, the
// largest term of lse - (1-s) x_y - (s/V) sum x).
static const int to_xent_shapes[][2] = {{37, 11}, {9, 5003}, {1, 1}, {6, 32771}};
static const double to_xent_zs[][2] = {{0, 0}, {1e-4, 0}, {0, 0.1}, {1e-4, 0.1}};

static void to_xent_inputs(to_run *r, int T, int V, int *x, int *y) {
    int t;
    *x = to_rnd(r, "logits", TO_F32, TO_IN, (size_t)T * (size_t)V, 8.0);
    *y = to_buf_new(r, "labels", TO_I32, TO_IN, (size_t)T);
    for (t = 0; t < T; t++) TO_I(r, *y)[t] = t % 5 == 2 ? -100 : (int32_t)fat5_rng_below(&r->rng, (uint64_t)V);
    if (T > 3) TO_F(r, *x)[3 * (size_t)V + (size_t)TO_I(r, *y)[3]] = 40.0f;
}

static void to_gen_xent_fwd(to_run *r) {
    size_t s, zi;
    for (s = 0; s < sizeof to_xent_shapes / sizeof to_xent_shapes[0]; s++)
        for (zi = 0; zi < sizeof to_xent_zs / sizeof to_xent_zs[0]; zi++) {
            int T = to_xent_shapes[s][0], V = to_xent_shapes[s][1], x, y, lse, ce, z;
            float zz = (float)to_xent_zs[zi][0], sm = (float)to_xent_zs[zi][1];
            if (!to_case(r, "T=%d V=%d z=%g s=%g", T, V, (double)zz, (double)sm)) return;
            to_xent_inputs(r, T, V, &x, &y);
            lse = to_buf_new(r, "lse", TO_F32, TO_OUT, (size_t)T);
            ce = to_buf_new(r, "row_ce", TO_F32, TO_OUT, (size_t)T);
            z = to_buf_new(r, "row_z", TO_F32, TO_OUT, (size_t)T);
            TO_SIDES(r) TO_CALL(r, r->be->xent_fwd(r->ctx, to_a(r, lse), to_a(r, ce), to_a(r, z), to_a(r, x), to_a(r, y),
                                                   T, V, zz, sm));
            if (r->err) return;
            TO_BUF(r, ce)->scale = to_maxabs(TO_RES(r, lse, 0), (size_t)T);
            to_check(r);
        }
}

// dlogits (act) from the CPU's lse. Entry v is g (p_v - t_v) plus the z-loss's g 2z lse p_v, with
// g = 1/3 the gradient scale, p_v <= 1 and the target t_v <= 1: terms of size up to g that cancel
// where p_v ~ t_v (exactly, in exact arithmetic, when V = 1: p = 1 = (1 - s) + s / V), so the
// scale is max(max|ref|, g), as for the other differences of larger terms.
static void to_gen_xent_bwd(to_run *r) {
    size_t s, zi;
    for (s = 0; s < sizeof to_xent_shapes / sizeof to_xent_shapes[0]; s++)
        for (zi = 0; zi < sizeof to_xent_zs / sizeof to_xent_zs[0]; zi++) {
            int T = to_xent_shapes[s][0], V = to_xent_shapes[s][1], x, y, lse, dx;
            float zz = (float)to_xent_zs[zi][0], sm = (float)to_xent_zs[zi][1];
            float *ce, *zr;
            if (!to_case(r, "T=%d V=%d z=%g s=%g", T, V, (double)zz, (double)sm)) return;
            ce = to_hf(r, (size_t)T), zr = to_hf(r, (size_t)T);
            to_xent_inputs(r, T, V, &x, &y);
            lse = to_buf_new(r, "lse", TO_F32, TO_IN, (size_t)T);
            fat5__cpu_xent_fwd(r->cpu, FAT5__ADDR(TO_F(r, lse)), FAT5__ADDR(ce), FAT5__ADDR(zr), FAT5__ADDR(TO_F(r, x)),
                               FAT5__ADDR(TO_I(r, y)), T, V, zz, sm);
            dx = to_buf_new(r, "dlogits", TO_ACT, TO_OUT, (size_t)T * (size_t)V);
            TO_SIDES(r) TO_CALL(r, r->be->xent_bwd(r->ctx, to_a(r, dx), to_a(r, x), to_a(r, lse), to_a(r, y), T, V, zz, sm,
                                                   1.0f / 3));
            if (r->err) return;
            TO_BUF(r, dx)->scale = fmax(to_maxabs(TO_RES(r, dx, 0), (size_t)T * (size_t)V), 1.0 / 3);
            to_check(r);
        }
}

// out = (ce / n, (ce + zs) / n) in double, summed in the GPU kernel's order on both sides: the
// same bits. T around the kernel's 256 threads; n = 0 gives 0, 0
static void to_gen_loss_total(to_run *r) {
    static const int64_t Ts[][2] = {{1, 1}, {255, 200}, {256, 256}, {257, 3}, {3000, 2999}, {0, 0}, {10, 0}};
    size_t s;
    for (s = 0; s < sizeof Ts / sizeof Ts[0]; s++) {
        int out, ce, z;
        if (!to_case(r, "T=%lld n=%lld", (long long)Ts[s][0], (long long)Ts[s][1])) return;
        ce = to_rnd(r, "row_ce", TO_F32, TO_IN, (size_t)Ts[s][0], 10.0);
        z = to_rnd(r, "row_z", TO_F32, TO_IN, (size_t)Ts[s][0], 1e-3);
        out = to_buf_new(r, "out", TO_F64, TO_OUT, 2);
        TO_BUF(r, out)->cmp = TO_SAME;
        TO_SIDES(r) TO_CALL(r, r->be->loss_total(r->ctx, to_a(r, out), to_a(r, ce), to_a(r, z), Ts[s][0], Ts[s][1]));
        to_check(r);
    }
}

// ----- optim.cu: segments of one fp32 arena cut into chunks -----

// segment lists (numels; packed one after another, so most start unaligned) with chunk sizes:
// one element, chunk - 1, chunk, chunk + 1, several chunks; a chunk of 1
static const int to_seg_numel[][7] = {{1, 255, 256, 257, 1000, 4, 3}, {5000, 1, 2, 63, 64, 65, 7}, {9, 1, 1, 1, 1, 1, 20}};
static const int to_seg_chunk[] = {256, 64, 1};
#define TO_NSEG 7

// segs (int64 [2 n_seg]: offset, numel), chunk_off (int64 [n_seg + 1]); returns the elements
static int64_t to_segs(to_run *r, int li, int *segs, int *coff, int64_t *n_chunks) {
    int s, chunk = to_seg_chunk[li];
    int64_t total = 0;
    *segs = to_buf_new(r, "segs", TO_I64, TO_IN, 2 * TO_NSEG);
    *coff = to_buf_new(r, "chunk_off", TO_I64, TO_IN, TO_NSEG + 1);
    for (s = 0; s < TO_NSEG; s++) {
        TO_L(r, *segs)[2 * s] = total;
        TO_L(r, *segs)[2 * s + 1] = to_seg_numel[li][s];
        total += to_seg_numel[li][s];
        TO_L(r, *coff)[s + 1] = TO_L(r, *coff)[s] + (to_seg_numel[li][s] + chunk - 1) / chunk;
    }
    *n_chunks = TO_L(r, *coff)[TO_NSEG];
    return total;
}

// sums of squares in double (products of floats exact): n terms >= 0 summed in another order,
// relative error <= n 2^-53 < 1e-10 for the n <= 6000 here
static void to_gen_sumsq_seg(to_run *r) {
    size_t li;
    for (li = 0; li < sizeof to_seg_chunk / sizeof to_seg_chunk[0]; li++) {
        int segs, coff, x, out, scr;
        int64_t nch, n;
        if (!to_case(r, "list %d chunk=%d", (int)li, to_seg_chunk[li])) return;
        n = to_segs(r, (int)li, &segs, &coff, &nch);
        x = to_rnd(r, "x", TO_F32, TO_IN, (size_t)n, 3.0);
        out = to_buf_new(r, "out", TO_F64, TO_OUT, TO_NSEG);
        TO_BUF(r, out)->arel = 0;
        TO_BUF(r, out)->has_rtol = 1;
        TO_BUF(r, out)->rtol = 1e-10;
        scr = to_buf_new(r, "scratch", TO_F64, TO_SCRATCH, (size_t)nch);
        TO_SIDES(r) TO_CALL(r, r->be->sumsq_seg(r->ctx, to_a(r, out), to_a(r, x), to_a(r, segs), to_a(r, coff), TO_NSEG, nch,
                                                to_seg_chunk[li], to_a(r, scr)));
        to_check(r);
    }
}

// AdamW in fp32 on the GPU, double on the CPU: each of w, m1, m2 is a sum of two terms of at most
// its inputs' size, each computed within a few ulps (TG_A of max|ref|); a non-finite gradient norm
// (stats[0]) skips the step: nothing changes
static void to_gen_adamw_seg(to_run *r) {
    static const double stats[][2] = {{1.5, 1.0}, {20.0, 0.7}, {NAN, 1.0}};
    size_t li, si;
    for (li = 0; li < sizeof to_seg_chunk / sizeof to_seg_chunk[0]; li++)
        for (si = 0; si < sizeof stats / sizeof stats[0]; si++) {
            int segs, coff, w, g, m1, m2, coef, st, s;
            int64_t nch, n, i;
            if (!to_case(r, "list %d chunk=%d stats %g %g", (int)li, to_seg_chunk[li], stats[si][0], stats[si][1])) return;
            n = to_segs(r, (int)li, &segs, &coff, &nch);
            w = to_rnd(r, "w", TO_F32, TO_INOUT, (size_t)n, 1.0);
            g = to_rnd(r, "g", TO_F32, TO_IN, (size_t)n, 1.0);
            m1 = to_rnd(r, "m1", TO_F32, TO_INOUT, (size_t)n, 0.3);
            m2 = to_rnd(r, "m2", TO_F32, TO_INOUT, (size_t)n, 0.5);
            for (i = 0; i < n; i++) TO_F(r, m2)[i] = 0.01f + fabsf(TO_F(r, m2)[i]);
            coef = to_buf_new(r, "coef", TO_F32, TO_IN, 2 * TO_NSEG);
            for (s = 0; s < TO_NSEG; s++) {
                TO_F(r, coef)[2 * s] = 1e-3f * (float)(s + 1);
                TO_F(r, coef)[2 * s + 1] = s % 2 ? 1.0f : 0.999f;
            }
            st = to_buf_new(r, "stats", TO_F64, TO_IN, 2);
            TO_D(r, st)[0] = stats[si][0];
            TO_D(r, st)[1] = stats[si][1];
            TO_SIDES(r) TO_CALL(r, r->be->adamw_seg(r->ctx, to_a(r, w), to_a(r, g), to_a(r, m1), to_a(r, m2), to_a(r, segs),
                                                    to_a(r, coff), TO_NSEG, nch, to_seg_chunk[li], to_a(r, coef),
                                                    to_a(r, st), 0.9f, 0.999f, 1e-8f, 0));
            to_check(r);
        }
}

// the step's coefficients: the same double operations in the same (segment) order on both sides,
// rounded once to fp32: bit for bit. Segments 1, 7, 300 (more than the block's 256 threads);
// clipping off, active, inactive; AdamWScale's ss_w or not; gates finite or not
static void to_gen_optim_coef(to_run *r) {
    static const int nsegs[] = {1, 7, 300};
    static const double clips[] = {0.0, 1.0, 1e9};
    size_t a, b;
    int c;
    for (a = 0; a < sizeof nsegs / sizeof nsegs[0]; a++)
        for (b = 0; b < sizeof clips / sizeof clips[0]; b++)
            for (c = 0; c < 3; c++) {
                int ns = nsegs[a], coef, st, ssg, ssw = -1, segs, dec, gate = -1, s, n_gate = c == 0 ? 0 : 3;
                if (!to_case(r, "n_seg=%d clip=%g ss_w=%d gates=%d%s", ns, clips[b], c != 1, n_gate,
                             c == 2 ? " (one infinite)" : ""))
                    return;
                coef = to_buf_new(r, "coef", TO_F32, TO_OUT, 2 * (size_t)ns);
                st = to_buf_new(r, "stats", TO_F64, TO_OUT, 2);
                ssg = to_buf_new(r, "ss_g", TO_F64, TO_IN, (size_t)ns);
                segs = to_buf_new(r, "segs", TO_I64, TO_IN, 2 * (size_t)ns);
                dec = to_buf_new(r, "decayed", TO_I32, TO_IN, (size_t)ns);
                if (c != 1) ssw = to_buf_new(r, "ss_w", TO_F64, TO_IN, (size_t)ns);
                for (s = 0; s < ns; s++) {
                    TO_D(r, ssg)[s] = fat5_rng_uniform(&r->rng) * 0.3;
                    TO_L(r, segs)[2 * s] = 100 * s;
                    TO_L(r, segs)[2 * s + 1] = 1 + s % 97;
                    TO_I(r, dec)[s] = s % 3 != 0;
                    if (ssw >= 0) TO_D(r, ssw)[s] = s % 5 == 0 ? 1e-12 : fat5_rng_uniform(&r->rng) * (1 + s % 97);
                }
                if (n_gate) {
                    gate = to_buf_new(r, "gate", TO_F64, TO_IN, (size_t)n_gate);
                    TO_D(r, gate)[0] = 2.5, TO_D(r, gate)[1] = 0.25, TO_D(r, gate)[2] = c == 2 ? INFINITY : 1.0;
                }
                TO_BUF(r, coef)->cmp = TO_BUF(r, st)->cmp = TO_SAME;
                TO_BUF(r, st)->nan_ok = c == 2;  // the gate makes the norm NaN
                TO_SIDES(r) TO_CALL(r, r->be->optim_coef(r->ctx, to_a(r, coef), to_a(r, st), to_a(r, ssg), to_a(r, ssw),
                                                         to_a(r, segs), to_a(r, dec), ns, 3e-4, 0.99f, clips[b],
                                                         to_a(r, gate), n_gate));
                to_check(r);
            }
}

// Adafactor: shapes [R, C] (C = 0: a 1-D tensor of R elements) with a 1 x n and an n x 1 factored
// tensor, rows wider than the block (300), a single element; with and without the first moment and
// weight decay; clipping by the global factor; a non-finite gradient norm (nothing changes). Both
// sides do the same fp32 operations in the same order; only the double sums (row and column means,
// the RMS of the update) are added in another order, which can move their fp32 rounding by one ulp
// (2^-24 relative): every output stays within a few ulps of its own size (rtol TG_R32 and atol
// TG_A of the buffer's max|ref|).
static void to_gen_adafactor_seg(to_run *r) {
    static const int shapes[][6][2] = {{{5, 7}, {13, 0}, {1, 300}, {33, 1}, {40, 300}, {1, 0}},
                                       {{2, 2}, {300, 0}, {7, 3}, {1, 1}, {64, 65}, {3, 0}}};
    static const double stats[][2] = {{1.5, 1.0}, {20.0, 0.7}, {NAN, 1.0}};
    size_t li, si;
    for (li = 0; li < sizeof shapes / sizeof shapes[0]; li++)
        for (si = 0; si < sizeof stats / sizeof stats[0]; si++) {
            int tab, w, g, m1 = -1, v, coef, st, dec, scr, s, ns = 6, with_m1 = (int)((li + si) % 2);
            int64_t n = 0, nv = 0, nrows = 0, ncols = 0, i;
            if (!to_case(r, "shapes %d stats %g %g m1 %d", (int)li, stats[si][0], stats[si][1], with_m1)) return;
            tab = to_buf_new(r, "tab", TO_I64, TO_IN, 8 * (size_t)ns);
            for (s = 0; s < ns; s++) {
                int64_t R = shapes[li][s][1] ? shapes[li][s][0] : 1;
                int64_t C = shapes[li][s][1] ? shapes[li][s][1] : shapes[li][s][0];
                int fac = shapes[li][s][1] != 0;
                int64_t *e = TO_L(r, tab) + 8 * s;
                e[0] = n, e[1] = R * C, e[2] = R, e[3] = C, e[4] = fac, e[5] = nv, e[6] = nrows, e[7] = ncols;
                n += R * C;
                nv += fac ? R + C : R * C;
                nrows += R;
                ncols += fac ? C : 0;
            }
            w = to_rnd(r, "w", TO_F32, TO_INOUT, (size_t)n, 1.0);
            g = to_rnd(r, "g", TO_F32, TO_IN, (size_t)n, 1.0);
            if (with_m1) m1 = to_rnd(r, "m1", TO_F32, TO_INOUT, (size_t)n, 0.01);
            v = to_rnd(r, "v", TO_F32, TO_INOUT, (size_t)nv, 1.0);
            for (i = 0; i < nv; i++) TO_F(r, v)[i] = 0.01f + fabsf(TO_F(r, v)[i]);
            coef = to_buf_new(r, "coef", TO_F32, TO_IN, 2 * (size_t)ns);
            dec = to_buf_new(r, "decayed", TO_I32, TO_IN, (size_t)ns);
            for (s = 0; s < ns; s++) {
                TO_F(r, coef)[2 * s] = 1e-3f * (float)(s + 1);
                TO_F(r, coef)[2 * s + 1] = 1.0f;
                TO_I(r, dec)[s] = s % 2;
            }
            st = to_buf_new(r, "stats", TO_F64, TO_IN, 2);
            TO_D(r, st)[0] = stats[si][0];
            TO_D(r, st)[1] = stats[si][1];
            scr = to_buf_new(r, "scratch", TO_F64, TO_SCRATCH, (size_t)(nrows + 2 * ns));
            TO_SIDES(r) TO_CALL(r, r->be->adafactor_seg(r->ctx, to_a(r, w), to_a(r, g), to_a(r, m1), to_a(r, v),
                                                        to_a(r, tab), ns, nrows, ncols, to_a(r, coef), to_a(r, st),
                                                        to_a(r, dec), 0.6f, 0.4f, 1e-30f, 1.0f, 0.9f, 0.1f,
                                                        to_a(r, scr), 0));
            to_check(r);
        }
}

// ----- generate.cu: the decoding-strategy ops (test_generate.c's gpu_generate_ops compares them
// on one shape; here several). The processed scores in fp32 within 1e-5 absolute and relative (as
// there: lse and the penalties in fp32), tokens and bookkeeping equal. -----

// the decoding state of R rows: histories of tokens < 40 (repeats: the penalties and n-grams bite),
// lens[r] tokens generated, rows[e] = a permutation (n = R) or every other row (n < R)
static void to_gen_state(to_run *r, int R, int n, int LH, int len0, int *hist, int *lens, int *rows, int role) {
    int i;
    *hist = to_buf_new(r, "hist", TO_I32, role, (size_t)R * LH);
    *lens = to_buf_new(r, "lens", TO_I32, role, (size_t)R);
    *rows = to_buf_new(r, "rows", TO_I32, TO_IN, (size_t)n);
    for (i = 0; i < R * LH; i++) TO_I(r, *hist)[i] = (int32_t)fat5_rng_below(&r->rng, 40);
    for (i = 0; i < R; i++) TO_I(r, *lens)[i] = len0 + i % 2;
    for (i = 0; i < n; i++) TO_I(r, *rows)[i] = n == R ? (int32_t)((i * 5 + 3) % R) : 2 * i;
}

static void to_gen_x(to_run *r, int x) {
    size_t i;
    for (i = 0; i < TO_BUF(r, x)->n; i++) TO_F(r, x)[i] = (float)(3.0 * fat5_rng_normal(&r->rng));
    TO_BUF(r, x)->scale = 1.0;
}

// Decoding-op options with every processor off (one-token prompt) and the stop token 1.
static fat5__gen_opts to_gen_opts(int max_new) {
    fat5__gen_opts o;
    memset(&o, 0, sizeof o);
    o.n_eos = 1, o.P = 1, o.rows_per_input = 1, o.max_new = max_new, o.pad = 0;
    o.rep = 1.0f, o.enc_rep = 1.0f, o.forced_bos = -1, o.begin_index = -1, o.decay_start = -1, o.decay_factor = 1.0f;
    o.temperature = 1.0f, o.top_p = 1.0f, o.typical_p = 1.0f, o.min_keep = 1, o.K = 1, o.length_penalty = 1.0f;
    return o;
}

// The list buffers of a fat5__gen_opts (buffer ids, -1: none), uploaded to both sides
typedef struct to_gen_lists {
    int eos, feos, sup, bsup, sq, sc, sb, et, ec, bx, fbx;   // bx, fbx: gen_beam's beam indices
} to_gen_lists;
static int to_gen_ibuf(to_run *r, const char *name, const int32_t *v, int n) {
    int b;
    if (n <= 0) return -1;
    b = to_buf_new(r, name, TO_I32, TO_IN, (size_t)n);
    memcpy(TO_I(r, b), v, (size_t)n * sizeof(int32_t));
    return b;
}
// the eos list {eos[0 .. n_eos)} alone (o->n_eos set)
static to_gen_lists to_gen_eos_list(to_run *r, fat5__gen_opts *o, const int32_t *eos, int n_eos) {
    to_gen_lists l = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    l.eos = to_gen_ibuf(r, "eos", eos, n_eos);
    o->n_eos = n_eos;
    return l;
}
// o with its list addresses on the side being run
static const fat5__gen_opts *to_gen_side(to_run *r, fat5__gen_opts *o, const to_gen_lists *l) {
    o->eos = to_a(r, l->eos), o->forced_eos = to_a(r, l->feos), o->suppress = to_a(r, l->sup);
    o->begin_suppress = to_a(r, l->bsup), o->seq_ids = to_a(r, l->sq), o->seq_cu = to_a(r, l->sc);
    o->seq_bias = to_a(r, l->sb), o->enc_tok = to_a(r, l->et), o->enc_cu = to_a(r, l->ec);
    o->bidx = to_a(r, l->bx), o->fin_bidx = to_a(r, l->fbx);
    return o;
}

// Every processor and warper, one feature per case, on (R, n, V) = (12, 12, 1000) and (6, 3, 37)
// (two rows per input, inputs of unequal lengths: the encoder processors see the pads). On the
// CPU, each case also checks the feature's effect on the processed scores.
enum { TO_GEN_FEATURES = 23 };
static const char *const to_gen_feature_names[TO_GEN_FEATURES] = {
    "eos3+min_new", "eos3+min_length", "suppress+begin_suppress", "forced_bos", "forced_eos", "bad_words",
    "sequence_bias", "encoder_rep+encoder_ngram", "exp_decay", "remove_invalid+renormalize", "renormalize+penalties",
    "top_k", "top_p", "min_p", "typical_p", "epsilon", "eta", "all_warpers", "top_p_tiny", "typical_tiny",
    "temperature+top_k+top_p", "log_softmax+all_processors", "group_diversity"};
static void to_gen_gen_process_features(to_run *r) {
    static const int shapes[][3] = {{12, 12, 1000}, {6, 3, 37}};
    static const int32_t eos3[3] = {1, 4, 4}, sup[3] = {2, 3, 9}, bsup[2] = {5, 6}, feos[2] = {1, 3};
    enum { LH = 12, P = 3 };
    size_t s;
    int f, keep;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (f = 0; f < TO_GEN_FEATURES; f++)
            for (keep = 1; keep <= (f >= 11 && f <= 19 ? 2 : 1); keep++) {
                int R = shapes[s][0], n = shapes[s][1], V = shapes[s][2], x, hist, lens, rows, e, v, i;
                int len0 = f == 3 ? 0 : 5, nin = R / 2;
                fat5__gen_opts o = to_gen_opts(7);
                to_gen_lists l;
                const float *xr;
                if (!to_case(r, "R=%d n=%d V=%d %s min_keep=%d", R, n, V, to_gen_feature_names[f], keep)) return;
                to_gen_state(r, R, n, LH, len0, &hist, &lens, &rows, TO_IN);
                x = to_buf_new(r, "x", TO_F32, TO_INOUT, (size_t)n * V);
                to_gen_x(r, x);
                l = to_gen_eos_list(r, &o, eos3, 3);
                o.P = f == 3 ? 1 : P, o.rows_per_input = 2, o.min_keep = keep;
                if (f == 0) o.min_new = 6;
                if (f == 1) o.min_len = P + 6;
                if (f == 2) {
                    l.sup = to_gen_ibuf(r, "suppress", sup, 3), o.n_suppress = 3;
                    l.bsup = to_gen_ibuf(r, "begin_suppress", bsup, 2), o.n_begin_suppress = 2;
                    o.begin_index = P + 6;   // the rows with lens 6
                }
                if (f == 3) o.forced_bos = 7;   // cur == 1: the rows with lens 0
                if (f == 4) l.feos = to_gen_ibuf(r, "forced_eos", feos, 2), o.n_forced_eos = 2;   // lens 6 == max_new - 1
                if (f == 5 || f == 6) {   // entries built from rows[0]'s history, so that some match
                    const int32_t *h = TO_I(r, hist) + TO_I(r, rows)[0] * LH;
                    int cur = P + TO_I(r, lens)[TO_I(r, rows)[0]];
                    int32_t ids[16], cu[8] = {0};
                    float bias[7] = {1.5f, -2.0f, 0.5f, 2.5f, 0.25f, 0.75f, 0};
                    int ns = 0, ni = 0;
#define TO_GEN_SEQ(...) do { int32_t w_[] = {__VA_ARGS__}; memcpy(ids + ni, w_, sizeof w_); ni += (int)(sizeof w_ / 4); cu[++ns] = ni; } while (0)
                    if (f == 6) {   // sequence_bias: single, multi (two ending in 9, one repeated), single repeated
                        TO_GEN_SEQ(7);
                        TO_GEN_SEQ(h[cur - 1], 9);
                        TO_GEN_SEQ(h[cur - 2], h[cur - 1], 9);
                        TO_GEN_SEQ(7);
                        TO_GEN_SEQ(h[cur - 1], 9);
                        TO_GEN_SEQ(h[cur - 1], 11);
                        o.n_seq_bias = ns;
                    } else {   // bad words of 1 and 3 tokens, one matching rows[0], one matching nothing
                        TO_GEN_SEQ(5);
                        TO_GEN_SEQ(h[cur - 2], h[cur - 1], 17);
                        TO_GEN_SEQ(h[cur - 2], 41, 19);
                        o.n_seq_bias = 0;
                    }
#undef TO_GEN_SEQ
                    o.n_seq = ns;
                    l.sq = to_gen_ibuf(r, "seq_ids", ids, ni), l.sc = to_gen_ibuf(r, "seq_cu", cu, ns + 1);
                    if (o.n_seq_bias) {
                        l.sb = to_buf_new(r, "seq_bias", TO_F32, TO_IN, (size_t)ns);
                        memcpy(TO_F(r, l.sb), bias, (size_t)ns * sizeof(float));
                        TO_BUF(r, l.sb)->scale = 1.0;
                    }
                }
                if (f == 7 || f == 21) {   // inputs of 3 .. 8 tokens, right-padded with pad 0 to the longest
                    int32_t et[6 * 8], ec[7];
                    ec[0] = 0;
                    for (i = 0; i < nin; i++) ec[i + 1] = ec[i] + 3 + (i * 5) % 6;
                    for (i = 0; i < ec[nin]; i++) et[i] = (int32_t)fat5_rng_below(&r->rng, 40);
                    for (i = 0, o.enc_max = 0; i < nin; i++) o.enc_max = ec[i + 1] - ec[i] > o.enc_max ? ec[i + 1] - ec[i] : o.enc_max;
                    l.et = to_gen_ibuf(r, "enc_tok", et, ec[nin]), l.ec = to_gen_ibuf(r, "enc_cu", ec, nin + 1);
                    o.enc_rep = 1.4f, o.enc_ngram = 2;
                }
                if (f == 8) o.decay_start = P + 2, o.decay_factor = 1.3f;
                if (f == 22) {   // group beam search, groups of 2 rows (an input's 2 rows are 1 group of
                    // 2 G = 2 x 2 rows): group 1 is penalised by the tokens group 0's rows chose at this step
                    // (the rows one token ahead; the other earlier rows count as a finished group's pad)
                    o.K = 1, o.G = 2, o.group = 1, o.diversity = 0.75f, o.log_softmax = 1;
                    for (i = 0; i < R; i++)
                        if (i % 2 == 0) TO_I(r, lens)[i] = len0 + (i % 4 == 0);
                }
                if (f == 9) {
                    for (e = 0; e < n; e++) {   // NaN, +inf, -inf in every row
                        TO_F(r, x)[e * V + (e % V)] = NAN;
                        TO_F(r, x)[e * V + ((e + 3) % V)] = INFINITY;
                        TO_F(r, x)[e * V + ((e + 5) % V)] = -INFINITY;
                    }
                    TO_BUF(r, x)->nan_ok = 1;
                    o.remove_invalid = 1, o.renormalize = 1;
                }
                if (f == 10) o.renormalize = 1, o.rep = 1.3f, o.ngram = 2;
                if (f >= 11 && f <= 20) o.do_sample = 1;
                if (f == 11) o.top_k = 5;
                if (f == 12) o.top_p = 0.8f;
                if (f == 13) o.min_p = 0.05f;
                if (f == 14) o.typical_p = 0.7f;
                if (f == 15) o.epsilon = 3e-3f;
                if (f == 16) o.eta = 3e-3f;
                if (f == 17) o.top_k = 40, o.top_p = 0.9f, o.min_p = 0.01f, o.typical_p = 0.95f, o.epsilon = 1e-4f, o.eta = 1e-4f;
                if (f == 18) o.top_p = 0.01f;
                if (f == 19) o.typical_p = 0.01f;
                if (f == 20) o.temperature = 0.7f, o.top_k = 20, o.top_p = 0.85f;
                if (f == 21) {
                    o.log_softmax = 1, o.rep = 1.2f, o.ngram = 3, o.min_new = 6, o.decay_start = P, o.decay_factor = 1.1f;
                    o.renormalize = 1;
                }
                TO_SIDES(r) TO_CALL(r, r->be->gen_process(r->ctx, to_a(r, x), to_a(r, hist), to_a(r, lens), to_a(r, rows), n,
                                                          V, LH, to_gen_side(r, &o, &l)));
                to_check(r);
                if (r->err || !TO_BUF(r, x)->res[0]) continue;
                xr = (const float *)TO_BUF(r, x)->res[0];   // the CPU's result: the feature's effect
                for (e = 0; e < n; e++) {
                    const float *xe = xr + (size_t)e * V;
                    int row = TO_I(r, rows)[e], len = TO_I(r, lens)[row], finite = 0;
                    double z = 0;
                    for (v = 0; v < V; v++) finite += isfinite(xe[v]) != 0, z += exp((double)xe[v]);
                    if ((f == 0 || f == 1) && len < 6)
                        FAT5_CHECK(r->T, V < 5 || (xe[1] == -INFINITY && xe[4] == -INFINITY));
                    if (f == 2)
                        FAT5_CHECK(r->T, V < 10 || (xe[2] == -INFINITY && xe[9] == -INFINITY &&
                                                    (len == 6) == (xe[5] == -INFINITY && xe[6] == -INFINITY)));
                    if (f == 3) FAT5_CHECK(r->T, V < 8 || (len == 0) == (xe[7] == 0.0f && finite == 1));
                    if (f == 4) FAT5_CHECK(r->T, V < 4 || (len == 6) == (xe[1] == 0.0f && xe[3] == 0.0f && finite == 2));
                    if (f == 5) FAT5_CHECK(r->T, V < 6 || xe[5] == -INFINITY);
                    if (f == 5 && e == 0) FAT5_CHECK(r->T, V < 18 || xe[17] == -INFINITY);
                    if (f == 9) {   // no NaN left; the +inf (now FLT_MAX) holds all the mass after renormalize
                        int nans = 0;
                        for (v = 0; v < V; v++) nans += isnan(xe[v]) != 0;
                        FAT5_CHECK(r->T, nans == 0 && fabs(xe[(e + 3) % V]) < 1e-3);
                    }
                    if (f == 10 || f == 21) FAT5_CHECK(r->T, fabs(z - 1.0) < 1e-4);
                    if (f == 11) FAT5_CHECK(r->T, finite == (V < 5 ? V : 5));
                    if (f >= 11 && f <= 20) FAT5_CHECK(r->T, finite >= (keep < V ? keep : V) && (V < 40 || finite < V));
                    if (f == 18) FAT5_CHECK(r->T, finite == keep);
                }
            }
}

// (R, n, V): 12 rows of 1000 (R coprime with 5), every other row of 6, one token, a large vocabulary;
// with and without log_softmax, penalties on and off
static void to_gen_gen_process(to_run *r) {
    static const int shapes[][3] = {{12, 12, 1000}, {6, 3, 37}, {1, 1, 1}, {3, 3, 50021}};
    static const int32_t eos1[1] = {1};
    enum { LH = 9 };
    size_t s;
    int mode;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (mode = 0; mode < 4; mode++) {
            int R = shapes[s][0], n = shapes[s][1], V = shapes[s][2], x, hist, lens, rows;
            int ls = mode & 1, pen = mode >> 1;
            fat5__gen_opts o = to_gen_opts(8);
            to_gen_lists l;
            if (!to_case(r, "R=%d n=%d V=%d log_softmax=%d penalties=%d", R, n, V, ls, pen)) return;
            to_gen_state(r, R, n, LH, 5, &hist, &lens, &rows, TO_IN);
            x = to_buf_new(r, "x", TO_F32, TO_INOUT, (size_t)n * V);
            to_gen_x(r, x);
            l = to_gen_eos_list(r, &o, eos1, 1);
            o.rep = pen ? 1.3f : 1.0f, o.ngram = pen ? 2 : 0, o.min_new = 6, o.log_softmax = ls;
            TO_SIDES(r) TO_CALL(r, r->be->gen_process(r->ctx, to_a(r, x), to_a(r, hist), to_a(r, lens), to_a(r, rows), n, V,
                                                      LH, to_gen_side(r, &o, &l)));
            to_check(r);
        }
    to_gen_gen_process_features(r);
}
// greedy, sampling with top-k, with top-p; a finished row (pad, nothing changes); rows reaching
// max_new; a list of 3 stop tokens holding a row's argmax (greedy: that row is done) with a prompt
// of 3 tokens; sampling over rows with -inf entries
static void to_gen_gen_select(to_run *r) {
    static const int shapes[][3] = {{12, 12, 1000}, {6, 3, 37}, {1, 1, 1}, {3, 3, 50021}};
    enum { LH = 12 };
    size_t s;
    int mode;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (mode = 0; mode < 5; mode++) {
            int R = shapes[s][0], n = shapes[s][1], V = shapes[s][2], x, tok, hist, lens, rows, done, score, i, v;
            int smp = mode == 1 || mode == 2 || mode == 4, topk = mode == 1 ? 50 : 0;
            float topp = mode == 2 ? 0.9f : 1.0f;
            int32_t eos[3] = {1, 0, 2};
            fat5__gen_opts o = to_gen_opts(6);
            to_gen_lists l;
            o.do_sample = smp, o.temperature = 1.2f, o.top_k = topk, o.top_p = topp, o.seed = 99;
            if (!to_case(r, "R=%d n=%d V=%d sample=%d top_k=%d top_p=%g eos=%d", R, n, V, smp, topk, (double)topp,
                         mode >= 3 ? 3 : 1))
                return;
            to_gen_state(r, R, n, LH, 5, &hist, &lens, &rows, TO_INOUT);
            x = to_buf_new(r, "x", TO_F32, TO_IN, (size_t)n * V);
            to_gen_x(r, x);
            if (mode >= 3) {
                int best = 0;
                for (v = 1; v < V; v++) best = TO_F(r, x)[v] > TO_F(r, x)[best] ? v : best;
                eos[1] = best, o.P = 3;
                if (mode == 4 && V > 1)
                    for (i = 0; i < n * V; i += 3) TO_F(r, x)[i] = -INFINITY;
            }
            tok = to_buf_new(r, "tok", TO_I32, TO_OUT, (size_t)n);
            done = to_buf_new(r, "done", TO_I32, TO_INOUT, (size_t)R);
            score = to_buf_new(r, "score", TO_F32, TO_INOUT, (size_t)R);
            for (i = 0; i < R; i++) TO_I(r, done)[i] = R > 1 && i == 1, TO_F(r, score)[i] = -0.5f * (float)i;
            TO_BUF(r, score)->scale = 1.0;
            l = to_gen_eos_list(r, &o, eos, mode >= 3 ? 3 : 1);
            TO_SIDES(r) TO_CALL(r, r->be->gen_select(r->ctx, to_a(r, x), to_a(r, tok), to_a(r, hist), to_a(r, lens),
                                                     to_a(r, done), to_a(r, score), to_a(r, rows), n, V, LH,
                                                     to_gen_side(r, &o, &l)));
            to_check(r);
            if (mode == 3 && !r->err && TO_BUF(r, done)->res[0]) {   // the CPU: entry 0 took its argmax, a stop token
                int r0 = TO_I(r, rows)[0];
                FAT5_CHECK(r->T, TO_I(r, done)[r0] || (((int32_t *)TO_BUF(r, tok)->res[0])[0] == eos[1] &&
                                                       ((int32_t *)TO_BUF(r, done)->res[0])[r0] == 1 &&
                                                       ((int32_t *)TO_BUF(r, hist)->res[0])[r0 * LH + 3 + 5 + r0 % 2] ==
                                                           eos[1]));
            }
        }
}

// One beam step from log-probabilities (the CPU's gen_process with log_softmax): K beams of NI
// inputs; early_stopping 0, 1, 2; some finished slots; variants: 1 stop token and a one-token
// prompt, 3 stop tokens (C = 4K; beam 0 of each input made to prefer stop token 2) and a prompt of
// 3, beam sampling with both. Every output equal (the bookkeeping, and the scores: the same float
// additions); fin_tok compared on each slot's fin_len tokens.
static void to_gen_gen_beam(to_run *r) {
    static const int shapes[][3] = {{4, 3, 1000}, {1, 5, 37}, {3, 2, 5}, {8, 1, 3001}, {16, 2, 300}};
    static const int32_t eos3[3] = {1, 2, 3};
    enum { LH = 9 };
    size_t s;
    int es, var;
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (var = 0; var < 5; var++)   // var 4: group beam search, 2 groups of K / 2, group 1
            for (es = 0; es < 3; es++) {
                int K = shapes[s][0], NI = shapes[s][1], V = shapes[s][2], R = K * NI, i, n_eos = var & 1 ? 3 : 1;
                int x, tok, src, hist, lens, rows, bs, fs, ft, fl, ff, un, done, scr, P = var & 1 ? 3 : 1, F = LH - P;
                fat5__gen_opts o = to_gen_opts(7), oh;
                to_gen_lists l;
                int G = var == 4 ? 2 : 1;
                if (s == 4 && var != 1 && var != 3) continue;   // K = 16: 64 candidates with 3 stop tokens
                if (var == 4 && K % 2) continue;
                o.log_softmax = 1, o.K = K / G, o.rows_per_input = K, o.min_keep = 2, o.length_penalty = 0.7f;
                o.early_stopping = es, o.P = P, o.do_sample = var == 2 || var == 3, o.seed = 5;
                o.G = G, o.group = G - 1;
                oh = o, oh.eos = FAT5__ADDR(eos3), oh.n_eos = n_eos;
                if (!to_case(r, "K=%d inputs=%d V=%d early_stopping=%d eos=%d P=%d sample=%d groups=%d", K, NI, V, es,
                             n_eos, P, o.do_sample, G))
                    return;
                to_gen_state(r, R, R, LH, 5, &hist, &lens, &rows, TO_INOUT);
                for (i = 0; i < R; i++) TO_I(r, lens)[i] = 5, TO_I(r, rows)[i] = i;
                x = to_buf_new(r, "x", TO_F32, TO_IN, (size_t)R * V);
                to_gen_x(r, x);
                if (n_eos == 3)
                    for (i = 0; i < NI; i++) TO_F(r, x)[(size_t)i * K * V + 2] = 30.0f;
                fat5__cpu_gen_process(r->cpu, FAT5__ADDR(TO_F(r, x)), FAT5__ADDR(TO_I(r, hist)), FAT5__ADDR(TO_I(r, lens)),
                                      FAT5__ADDR(TO_I(r, rows)), R, V, LH, &oh);
                // (group beam search writes its group's entries alone: the others keep what they hold)
                tok = to_buf_new(r, "tok", TO_I32, var == 4 ? TO_INOUT : TO_OUT, (size_t)R);
                src = to_buf_new(r, "src", TO_I32, var == 4 ? TO_INOUT : TO_OUT, (size_t)R);
                if (var == 4)
                    for (i = 0; i < R; i++) TO_I(r, tok)[i] = -1, TO_I(r, src)[i] = i;
                bs = to_buf_new(r, "bscore", TO_F32, TO_INOUT, (size_t)R);
                fs = to_buf_new(r, "fin_score", TO_F32, TO_INOUT, (size_t)R);
                ft = to_buf_new(r, "fin_tok", TO_I32, TO_INOUT, (size_t)R * F);
                fl = to_buf_new(r, "fin_len", TO_I32, TO_INOUT, (size_t)R);
                ff = to_buf_new(r, "fin_flag", TO_I32, TO_INOUT, (size_t)R);
                un = to_buf_new(r, "unsat", TO_I32, TO_INOUT, (size_t)(NI * G));
                done = to_buf_new(r, "done", TO_I32, TO_INOUT, (size_t)R);
                scr = to_buf_new(r, "scratch", TO_I32, TO_SCRATCH, (size_t)R * LH);
                for (i = 0; i < R; i++) {
                    TO_F(r, bs)[i] = (float)-(i % K);
                    TO_F(r, fs)[i] = i % K == 0 ? -2.0f : -1.0e9f;
                    TO_I(r, ff)[i] = i % K == 0;
                    TO_I(r, fl)[i] = 3;
                }
                for (i = 0; i < R * F; i++) TO_I(r, ft)[i] = i % 17;
                for (i = 0; i < NI * G; i++) TO_I(r, un)[i] = 1;
                l = to_gen_eos_list(r, &o, eos3, n_eos);
                if (var == 0 || var == 2) {   // beam indices kept (running and finished), from a pattern
                    l.bx = to_buf_new(r, "bidx", TO_I32, TO_INOUT, (size_t)R * F);
                    l.fbx = to_buf_new(r, "fin_bidx", TO_I32, TO_INOUT, (size_t)R * F);
                    for (i = 0; i < R * F; i++) TO_I(r, l.bx)[i] = (i * 7) % 13, TO_I(r, l.fbx)[i] = 100 + (i * 5) % 11;
                }
                TO_BUF(r, bs)->cmp = TO_BUF(r, fs)->cmp = TO_SAME;
                TO_BUF(r, ft)->cmp = TO_SKIP;
                TO_SIDES(r) TO_CALL(r, r->be->gen_beam(r->ctx, to_a(r, x), to_a(r, tok), to_a(r, src), to_a(r, hist),
                                                       to_a(r, lens), to_a(r, bs), to_a(r, fs), to_a(r, ft), to_a(r, fl),
                                                       to_a(r, ff), to_a(r, un), to_a(r, done), to_a(r, rows), to_a(r, scr),
                                                       R, V, LH, to_gen_side(r, &o, &l)));
                to_check(r);
                if (r->err) continue;
                if (var == 1 && es != 1 && TO_BUF(r, ft)->res[0])   // the CPU: each input's best slot is the stopped beam 0 + token 2
                    for (i = 0; i < NI; i++)
                        FAT5_CHECK_MSG(r->T, ((int32_t *)TO_BUF(r, fl)->res[0])[i * K] == 6 &&
                                                 ((int32_t *)TO_BUF(r, ft)->res[0])[i * K * F + 5] == 2,
                                       "gen_beam %s: input %d did not finish on its stop token", r->what, i);
                if (var == 4 && TO_BUF(r, lens)->res[0])   // only group 1's beams moved
                    for (i = 0; i < R; i++)
                        FAT5_CHECK_MSG(r->T, ((int32_t *)TO_BUF(r, lens)->res[0])[i] == ((i / (K / 2)) % 2 ? 6 : 5),
                                       "gen_beam %s: row %d of group %d has length %d", r->what, i, (i / (K / 2)) % 2,
                                       ((int32_t *)TO_BUF(r, lens)->res[0])[i]);
                if (r->gpu)
                    for (i = 0; i < R; i++) {
                        int L = ((int32_t *)TO_BUF(r, fl)->res[0])[i];
                        FAT5_CHECK_MSG(r->T, L < 0 || L > F ||
                                                 !memcmp((int32_t *)TO_BUF(r, ft)->res[0] + i * F,
                                                         (int32_t *)TO_BUF(r, ft)->res[1] + i * F, (size_t)L * 4),
                                       "[%s] gen_beam %s: fin_tok of slot %d differs", to_mode(r), r->what, i);
                    }
            }
}

// ----- the table: one generator per op of FAT5__OPS (a missing to_gen_<op> fails to compile) -----

typedef struct to_gen {
    const char *name;
    void (*gen)(to_run *r);
} to_gen;

#define TO_GEN_ENTRY(name, params) {#name, to_gen_##name},
static const to_gen to_gens[] = {FAT5__OPS(TO_GEN_ENTRY)};
#undef TO_GEN_ENTRY

// Runs the generator of `op` in an fp32 then a bf16 context; gpu: against the GPU backend (the
// test skips without a device), else on the CPU alone. Returns the cases run per mode (the last).
static int to_run_op(fat5_test *T, const char *op, void (*gen)(to_run *r), int gpu) {
    int mode, cases = 0;
    for (mode = 0; mode < 2; mode++) {
        to_run *r = (to_run *)calloc(1, sizeof *r);
        if (!r) abort();
        r->T = T;
        r->op = op;
        r->bf16 = mode;
        r->gpu = gpu;
        r->cpu = fat5_test_ctx(T);
        r->rng = fat5_rng_init(5000 + 17 * (uint64_t)mode + (uint64_t)strlen(op));
        r->be = &fat5__cpu_backend;
        r->ctx = r->cpu;
#ifndef FAT5_NO_CUDA
        if (gpu) {
            tg_open(T, mode ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32, &r->gctx);
            if (!r->gctx) {
                free(r);
                return 0;
            }
            r->gctx->gpu->attn_tc = 0;  // the FMA kernels (the tensor cores: gpu_attn_tc)
        }
#endif
        gen(r);
        to_case_free(r);
        cases = r->cases;
        fat5_ctx_destroy(r->gctx);
        free(r);
    }
    return cases;
}

// The table against fat5__op_names, then every generator on the CPU backend alone (see the header):
// the ops of even index in ops_table_cpu_a, the odd ones in ops_table_cpu_b (two tests of about
// the same time, so that the runner's shards share them)
static void to_table_cpu(fat5_test *T, int part) {
    int i;
    FAT5_CHECK_MSG(T, (int)(sizeof to_gens / sizeof to_gens[0]) == FAT5__OP_COUNT, "%d generators for %d ops",
                   (int)(sizeof to_gens / sizeof to_gens[0]), FAT5__OP_COUNT);
    for (i = part; i < FAT5__OP_COUNT; i += 2) {
        int n;
        FAT5_CHECK_MSG(T, !strcmp(to_gens[i].name, fat5__op_names[i]), "generator %d is %s, op %s", i, to_gens[i].name,
                       fat5__op_names[i]);
        n = to_run_op(T, to_gens[i].name, to_gens[i].gen, 0);
        FAT5_CHECK_MSG(T, n >= 3, "op %s: %d cases (at least 3 shapes wanted)", to_gens[i].name, n);
    }
}
static void t_ops_table_cpu_a(fat5_test *T) { to_table_cpu(T, 0); }
static void t_ops_table_cpu_b(fat5_test *T) { to_table_cpu(T, 1); }

#ifndef FAT5_NO_CUDA
#define TO_GPU_TEST(name, params) \
    static void t_gpu_op_##name(fat5_test *T) { to_run_op(T, #name, to_gen_##name, 1); }
FAT5__OPS(TO_GPU_TEST)
#undef TO_GPU_TEST
// one test gpu_op_<op> per op (the list ignores X: its entries are FAT5_TEST_ENTRY's)
#define TO_GPU_ENTRY(name, params) FAT5_TEST_ENTRY(gpu_op_##name)
#define FAT5_TESTS_OPS_TABLE(X) X(ops_table_cpu_a) X(ops_table_cpu_b) FAT5__OPS(TO_GPU_ENTRY)
#else
#define FAT5_TESTS_OPS_TABLE(X) X(ops_table_cpu_a) X(ops_table_cpu_b)
#endif
