// CPU reference ops: the relative-position buckets against the tables transformers produces,
// and every backward against central finite differences.

// Fills x with values uniform in [-scale, scale], away from 0 by at least gap (for ReLU kinks).
static void tc_fill(fat5_rng *r, float *x, size_t n, double scale, double gap) {
    size_t i;
    for (i = 0; i < n; i++) {
        double u = (2.0 * fat5_rng_uniform(r) - 1.0) * scale;
        if (fabs(u) < gap) u = u < 0 ? u - gap : u + gap;
        x[i] = (float)u;
    }
}

#define A_(p) FAT5__ADDR(p)

// a CPU context for the ops (they take their scratch from it)
static fat5_ctx *tc_ctx(void) {
    fat5_ctx *ctx = NULL;
    fat5_ctx_config cc = fat5_ctx_config_default();
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) abort();
    return ctx;
}

static float *tc_alloc(size_t n) {
    float *p = (float *)calloc(n ? n : 1, sizeof(float));
    if (!p) abort();
    return p;
}

// bucket tables for 32 buckets / max distance 128, as transformers computes them in float32
static void t_rel_bucket_tables(fat5_test *T) {
    // bidirectional, per side: first n of each bucket from 8 on (n 0..7 map to themselves)
    static const int bi_start[] = {8, 12, 16, 23, 32, 46, 64, 91};
    // causal: first n of each bucket from 16 on
    static const int ca_start[] = {16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113};
    int n;
    for (n = 0; n <= 1000; n++) {
        int want_bi = n < 8 ? n : 0, want_ca = n < 16 ? n : 0, b;
        for (b = 0; b < 8; b++) if (n >= bi_start[b]) want_bi = 8 + b;
        for (b = 0; b < 16; b++) if (n >= ca_start[b]) want_ca = 16 + b;
        FAT5_CHECK_MSG(T, fat5__rel_bucket(-n, 1, 32, 128) == want_bi, "bidir rel %d: got %d want %d", -n,
                       fat5__rel_bucket(-n, 1, 32, 128), want_bi);
        if (n > 0)
            FAT5_CHECK_MSG(T, fat5__rel_bucket(n, 1, 32, 128) == 16 + want_bi, "bidir rel +%d: got %d want %d", n,
                           fat5__rel_bucket(n, 1, 32, 128), 16 + want_bi);
        FAT5_CHECK_MSG(T, fat5__rel_bucket(-n, 0, 32, 128) == want_ca, "causal rel %d: got %d want %d", -n,
                       fat5__rel_bucket(-n, 0, 32, 128), want_ca);
        FAT5_CHECK_MSG(T, fat5__rel_bucket(n, 0, 32, 128) == 0, "causal future key %d must be bucket 0", n);
    }
    // spot values quoted in the FAT5 reference
    FAT5_CHECK(T, fat5__rel_bucket(-16, 1, 32, 128) == 10);
    FAT5_CHECK(T, fat5__rel_bucket(-32, 1, 32, 128) == 12);
    FAT5_CHECK(T, fat5__rel_bucket(-64, 1, 32, 128) == 14);
    FAT5_CHECK(T, fat5__rel_bucket(64, 1, 32, 128) == 30);
    FAT5_CHECK(T, fat5__rel_bucket(127, 1, 32, 128) == 31);
    FAT5_CHECK(T, fat5__rel_bucket(-20, 0, 32, 128) == 17);
    FAT5_CHECK(T, fat5__rel_bucket(-32, 0, 32, 128) == 21);
    FAT5_CHECK(T, fat5__rel_bucket(-64, 0, 32, 128) == 26);
}

// <r, f(x)> for a projection r: the scalar whose gradient the backward computes
static double tc_dot(const float *a, const float *b, size_t n) {
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// Central differences of a scalar function of x, element by element, against analytic grad g.
typedef double (*tc_scalar_fn)(void *user);
static void tc_fd_check(fat5_test *T, const char *what, float *x, size_t n, const float *g, tc_scalar_fn f,
                        void *user, double h, double atol, double rtol) {
    float *num = tc_alloc(n);
    size_t i;
    for (i = 0; i < n; i++) {
        float x0 = x[i];
        double lp, lm;
        x[i] = (float)(x0 + h);
        lp = f(user);
        x[i] = (float)(x0 - h);
        lm = f(user);
        x[i] = x0;
        num[i] = (float)((lp - lm) / (2 * h));
    }
    fat5_check_close(T, what, g, num, n, atol, rtol);
    free(num);
}

// As tc_fd_check, for piecewise-smooth functions (ReLU): an element whose central differences at
// h and h/4 disagree has a kink within h and is skipped; the caller bounds how many were.
static void tc_fd_check_kinks(fat5_test *T, const char *what, float *x, size_t n, const float *g, tc_scalar_fn f,
                              void *user, double h, double atol, double rtol, int *kinks, int *checked) {
    size_t i, bad = 0;
    for (i = 0; i < n; i++) {
        float x0 = x[i];
        double d1, d2, tol;
        x[i] = (float)(x0 + h); d1 = f(user);
        x[i] = (float)(x0 - h); d1 = (d1 - f(user)) / (2 * h);
        x[i] = (float)(x0 + h / 4); d2 = f(user);
        x[i] = (float)(x0 - h / 4); d2 = (d2 - f(user)) / (h / 2);
        x[i] = x0;
        tol = atol + rtol * fabs(d2);
        (*checked)++;
        if (fabs(d1 - d2) > tol) { (*kinks)++; continue; }
        if (!(fabs(g[i] - d1) <= tol)) {
            if (bad < 5) printf("  %s[%zu]: got %.9g, want %.9g\n", what, i, (double)g[i], d1);
            bad++;
        }
    }
    FAT5_CHECK_MSG(T, bad == 0, "%s: %zu of %zu elements differ from finite differences", what, bad, n);
}

typedef struct tc_norm { fat5_ctx *ctx; float *x, *w, *r, *y, *rs; int64_t T; int D; } tc_norm;
static double tc_norm_loss(void *u) {
    tc_norm *a = (tc_norm *)u;
    fat5__cpu_rmsnorm_fwd(a->ctx, A_(a->y), A_(a->rs), A_(a->x), A_(a->w), a->T, a->D, 1e-6f, 0);
    return tc_dot(a->y, a->r, (size_t)(a->T * a->D));
}
static void t_rmsnorm_bwd(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(1);
    tc_norm a;
    float *dx, *dw, *dxa;
    a.ctx = tc_ctx();
    a.T = 5;
    a.D = 7;
    a.x = tc_alloc(35); a.w = tc_alloc(7); a.r = tc_alloc(35); a.y = tc_alloc(35); a.rs = tc_alloc(5);
    dx = tc_alloc(35);
    dw = tc_alloc(7);
    dxa = tc_alloc(35);
    tc_fill(&rng, a.x, 35, 2.0, 0);
    tc_fill(&rng, a.w, 7, 1.5, 0);
    tc_fill(&rng, a.r, 35, 1.0, 0);
    tc_norm_loss(&a);
    FAT5_CHECK(T, fat5__cpu_rmsnorm_bwd(a.ctx, A_(dx), A_(dw), A_(a.r), A_(a.x), A_(a.w), A_(a.rs), a.T, a.D, 0, 0,
                                        A_(dxa)) == FAT5_OK);
    // the activation-dtype copy of dx (fp32 on the CPU): the same bits
    FAT5_CHECK(T, memcmp(dxa, dx, 35 * sizeof(float)) == 0);
    tc_fd_check(T, "rmsnorm dx", a.x, 35, dx, tc_norm_loss, &a, 1e-2, 2e-4, 1e-2);
    tc_fd_check(T, "rmsnorm dw", a.w, 7, dw, tc_norm_loss, &a, 1e-2, 2e-4, 1e-2);
    // forward against the definition: y = w x / sqrt(mean(x^2) + eps)
    {
        double ss = 0;
        int j;
        for (j = 0; j < 7; j++) ss += (double)a.x[7 + j] * a.x[7 + j];
        FAT5_CHECK(T, fabs(a.y[7 + 3] - a.w[3] * a.x[7 + 3] / sqrt(ss / 7 + 1e-6)) < 1e-5);
    }
    free(a.x); free(a.w); free(a.r); free(a.y); free(a.rs); free(dx); free(dw); free(dxa);
    fat5_ctx_destroy(a.ctx);
}

typedef struct tc_act { fat5_ctx *ctx; float *a, *b, *h, *r; int64_t n; fat5_act act; } tc_act;
static double tc_act_loss(void *u) {
    tc_act *p = (tc_act *)u;
    fat5__cpu_act_fwd(p->ctx, A_(p->h), A_(p->a), A_(p->b), p->n, (int)p->act, fat5__drop_none());
    return tc_dot(p->h, p->r, (size_t)p->n);
}
static void t_act_bwd(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(2);
    fat5_ctx *ctx = tc_ctx();
    int act, gated;
    for (act = FAT5_ACT_RELU; act <= FAT5__ACT_TANH; act++)
        for (gated = 0; gated < 2; gated++) {
            tc_act p;
            float *da = tc_alloc(40), *db = tc_alloc(40);
            char what[64];
            p.ctx = ctx;
            p.n = 40;
            p.act = (fat5_act)act;
            p.a = tc_alloc(40); p.b = gated ? tc_alloc(40) : NULL; p.h = tc_alloc(40); p.r = tc_alloc(40);
            tc_fill(&rng, p.a, 40, 3.0, 0.05);
            if (p.b) tc_fill(&rng, p.b, 40, 2.0, 0);
            tc_fill(&rng, p.r, 40, 1.0, 0);
            fat5__cpu_act_bwd(ctx, A_(da), A_(p.b ? db : NULL), A_(p.r), A_(p.a), A_(p.b), p.n, (int)p.act, fat5__drop_none());
            snprintf(what, sizeof what, "%s%s da", gated ? "gated " : "", (p.act == FAT5__ACT_TANH ? "tanh" : fat5__act_name(p.act)));
            tc_fd_check(T, what, p.a, 40, da, tc_act_loss, &p, 1e-3, 1e-4, 1e-3);
            if (p.b) {
                snprintf(what, sizeof what, "gated %s db", (p.act == FAT5__ACT_TANH ? "tanh" : fat5__act_name(p.act)));
                tc_fd_check(T, what, p.b, 40, db, tc_act_loss, &p, 1e-3, 1e-4, 1e-3);
            }
            free(p.a); free(p.b); free(p.h); free(p.r); free(da); free(db);
        }
    // the tanh GELU of "gated-gelu" is not the erf GELU
    FAT5_CHECK(T, fabsf(fat5__act_f(FAT5_ACT_GELU_TANH, 1.0f) - 0.841191990f) < 1e-6f);
    FAT5_CHECK(T, fabsf(fat5__act_f(FAT5_ACT_GELU, 1.0f) - 0.841344746f) < 1e-6f);
    // an unknown activation is an error, not a silent zero
    FAT5_CHECK(T, fat5__cpu_act_fwd(ctx, 0, 0, 0, 1, 7, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
    fat5_ctx_destroy(ctx);
}

typedef struct tc_attn {
    fat5_ctx *ctx;
    float *q, *k, *v, *bias, *o, *lse, *r;
    const int32_t *cu_q, *cu_k;
    int32_t *q_seq, *k_seq;
    int64_t tq, tk;
    int H, dk, kind, nb, max_distance;
} tc_attn;

// token -> sequence map of n_seq sequences with offsets cu
static int32_t *tc_seq_map(const int32_t *cu, int n_seq) {
    int32_t *m = (int32_t *)calloc((size_t)cu[n_seq] + 1, sizeof(int32_t));
    int s, t;
    if (!m) abort();
    for (s = 0; s < n_seq; s++)
        for (t = cu[s]; t < cu[s + 1]; t++) m[t] = s;
    return m;
}

static fat5_status tc_attn_fwd(tc_attn *a, float *o) {
    return fat5__cpu_attn_fwd(a->ctx, A_(o), A_(a->lse), A_(a->q), A_(a->k), A_(a->v), A_(a->bias), 0, A_(a->cu_q),
                              A_(a->cu_k), A_(a->q_seq), a->tq, a->H, a->dk, a->kind, a->nb, a->max_distance, 0, 0, fat5__drop_none());
}
static double tc_attn_loss(void *u) {
    tc_attn *a = (tc_attn *)u;
    tc_attn_fwd(a, a->o);
    return tc_dot(a->o, a->r, (size_t)(a->tq * a->H * a->dk));
}

// Packed sequences of very different lengths, a one-token sequence included; every kind of
// attention; the backward as the model runs it (delta, then dq with the bias gradient, then dk and
// dv key by key) against finite differences.
static void t_attn_bwd(fat5_test *T) {
    static const int32_t cu_q[] = {0, 1, 14, 17, 40};
    static const int32_t cu_k_cross[] = {0, 5, 6, 25, 31};
    fat5_rng rng = fat5_rng_init(3);
    int kind;
    for (kind = 0; kind < 3; kind++) {
        tc_attn a;
        int64_t H = 2, dk = 3, nb = 8, tq = 40, tk;
        float *dq, *dk_, *dv, *dbias, *delta;
        char what[64];
        const char *kn = kind == 0 ? "cross" : kind == 1 ? "bidir" : "causal";
        fat5_ctx *ctx = tc_ctx();
        a.ctx = ctx;
        a.H = (int)H;
        a.dk = (int)dk;
        a.cu_q = cu_q;
        a.cu_k = kind == 0 ? cu_k_cross : cu_q;
        a.kind = kind;
        a.nb = (int)nb;
        a.max_distance = 12;  // sequences of 23 tokens reach the saturated buckets
        a.tq = tq;
        a.tk = tk = a.cu_k[4];
        a.q_seq = tc_seq_map(a.cu_q, 4);
        a.k_seq = tc_seq_map(a.cu_k, 4);
        a.q = tc_alloc((size_t)(tq * H * dk)); a.k = tc_alloc((size_t)(tk * H * dk)); a.v = tc_alloc((size_t)(tk * H * dk));
        a.o = tc_alloc((size_t)(tq * H * dk)); a.r = tc_alloc((size_t)(tq * H * dk)); a.lse = tc_alloc((size_t)(tq * H));
        a.bias = kind ? tc_alloc((size_t)(nb * H)) : NULL;
        dq = tc_alloc((size_t)(tq * H * dk)); dk_ = tc_alloc((size_t)(tk * H * dk)); dv = tc_alloc((size_t)(tk * H * dk));
        dbias = tc_alloc((size_t)(nb * H));
        delta = tc_alloc((size_t)(tq * H));
        tc_fill(&rng, a.q, (size_t)(tq * H * dk), 1.0, 0);
        tc_fill(&rng, a.k, (size_t)(tk * H * dk), 1.0, 0);
        tc_fill(&rng, a.v, (size_t)(tk * H * dk), 1.0, 0);
        tc_fill(&rng, a.r, (size_t)(tq * H * dk), 1.0, 0);
        if (a.bias) tc_fill(&rng, a.bias, (size_t)(nb * H), 1.0, 0);
        tc_attn_loss(&a);
        FAT5_CHECK(T, fat5__cpu_attn_bwd_delta(ctx, A_(delta), A_(a.o), A_(a.r), tq, a.H, a.dk) == FAT5_OK);
        FAT5_CHECK(T, fat5__cpu_attn_bwd_dq(ctx, A_(dq), A_(a.bias ? dbias : NULL), A_(a.r), A_(a.lse), A_(delta),
                                            A_(a.q), A_(a.k), A_(a.v), A_(a.bias), 0, A_(a.cu_q), A_(a.cu_k),
                                            A_(a.q_seq), tq, a.H, a.dk, kind, a.nb, a.max_distance, 0, 0, 0, fat5__drop_none()) == FAT5_OK);
        FAT5_CHECK(T, fat5__cpu_attn_bwd_dkv(ctx, A_(dk_), A_(dv), A_(a.r), A_(a.lse), A_(delta), A_(a.q), A_(a.k),
                                             A_(a.v), A_(a.bias), 0, A_(a.cu_q), A_(a.cu_k), A_(a.k_seq), tk, a.H,
                                             a.dk, kind, a.nb, a.max_distance, 0, 0, fat5__drop_none()) == FAT5_OK);
        snprintf(what, sizeof what, "%s dq", kn);
        tc_fd_check(T, what, a.q, (size_t)(tq * H * dk), dq, tc_attn_loss, &a, 1e-3, 1e-4, 1e-3);
        snprintf(what, sizeof what, "%s dk", kn);
        tc_fd_check(T, what, a.k, (size_t)(tk * H * dk), dk_, tc_attn_loss, &a, 1e-3, 1e-4, 1e-3);
        snprintf(what, sizeof what, "%s dv", kn);
        tc_fd_check(T, what, a.v, (size_t)(tk * H * dk), dv, tc_attn_loss, &a, 1e-3, 1e-4, 1e-3);
        if (a.bias) {
            snprintf(what, sizeof what, "%s dbias", kn);
            tc_fd_check(T, what, a.bias, (size_t)(nb * H), dbias, tc_attn_loss, &a, 1e-3, 1e-4, 1e-3);
        }
        // a one-token causal or bidirectional sequence attends to itself only: o = v
        if (kind) {
            FAT5_CHECK(T, fabsf(a.o[0] - a.v[0]) < 1e-6f && fabsf(a.o[5] - a.v[5]) < 1e-6f);
        }
        free(a.q); free(a.k); free(a.v); free(a.o); free(a.r); free(a.lse); free(a.bias);
        free(a.q_seq); free(a.k_seq);
        free(dq); free(dk_); free(dv); free(dbias); free(delta);
        fat5_ctx_destroy(ctx);
    }
}

// Causal attention: the output of query i does not depend on keys after i, nor on any other
// sequence of the pack.
static void t_attn_masking(fat5_test *T) {
    static const int32_t cu[] = {0, 6, 15};
    fat5_rng rng = fat5_rng_init(4);
    float q[15 * 4], k[15 * 4], v[15 * 4], o1[15 * 4], o2[15 * 4], lse[15 * 2], bias[8 * 2];
    tc_attn a;
    int i;
    memset(&a, 0, sizeof a);
    a.ctx = tc_ctx();
    a.q = q; a.k = k; a.v = v; a.lse = lse; a.bias = bias;
    a.cu_q = a.cu_k = cu;
    a.q_seq = tc_seq_map(cu, 2);
    a.tq = 15; a.H = 2; a.dk = 2; a.kind = FAT5__ATTN_CAUSAL; a.nb = 8; a.max_distance = 12;
    tc_fill(&rng, q, 60, 1, 0); tc_fill(&rng, k, 60, 1, 0); tc_fill(&rng, v, 60, 1, 0); tc_fill(&rng, bias, 16, 1, 0);
    FAT5_CHECK(T, tc_attn_fwd(&a, o1) == FAT5_OK);
    // change the keys and values of sequence 1 from its position 4 (token 10) on
    for (i = 10 * 4; i < 60; i++) { k[i] += 1.0f; v[i] -= 2.0f; }
    FAT5_CHECK(T, tc_attn_fwd(&a, o2) == FAT5_OK);
    for (i = 0; i < 10 * 4; i++)
        FAT5_CHECK_MSG(T, o1[i] == o2[i], "causal output %d changed when later keys changed", i);
    FAT5_CHECK(T, o1[10 * 4] != o2[10 * 4]);
    free(a.q_seq);
    fat5_ctx_destroy(a.ctx);
}

typedef struct tc_xent { fat5_ctx *ctx; float *x, *lse, *ce, *zr; int32_t *y; int64_t T; int V; float z, s; } tc_xent;
// the loss written out in double, independently of the op: mean over counted rows of
// lse - (1-s) x_y - (s/V) sum_j x_j + z lse^2
static double tc_xent_loss(void *u) {
    tc_xent *a = (tc_xent *)u;
    double sum = 0;
    int64_t n = 0, t;
    int j;
    for (t = 0; t < a->T; t++) {
        const float *x = a->x + t * a->V;
        double mx = -1e300, se = 0, sx = 0, L;
        if (a->y[t] == -100) continue;
        for (j = 0; j < a->V; j++) mx = x[j] > mx ? x[j] : mx;
        for (j = 0; j < a->V; j++) {
            se += exp((double)x[j] - mx);
            sx += x[j];
        }
        L = mx + log(se);
        sum += L - (1.0 - a->s) * x[a->y[t]] - a->s / a->V * sx + a->z * L * L;
        n++;
    }
    return sum / (double)n;
}
// loss_total: the fixed-order sums against plain sums in row order (to double rounding), means over
// the counted rows, 0 with none counted, a NaN row reaching both results
static void t_loss_total(fat5_test *T) {
    static const int64_t rows[] = {1, 255, 256, 257, 5000};
    static float ce[5000], z[5000];
    fat5_rng rng = fat5_rng_init(12);
    size_t ri;
    double out[2];
    for (ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
        int64_t n = rows[ri], i;
        double sc = 0, sz = 0;
        for (i = 0; i < n; i++) {
            ce[i] = (float)(4.0 + fat5_rng_normal(&rng));
            z[i] = (float)(1e-3 * fat5_rng_uniform(&rng));
            sc += ce[i];
            sz += z[i];
        }
        FAT5_CHECK(T, fat5__cpu_loss_total(NULL, FAT5__ADDR(out), FAT5__ADDR(ce), FAT5__ADDR(z), n, n - 1 + !(n - 1)) ==
                          FAT5_OK);
        FAT5_CHECK_MSG(T, fabs(out[0] - sc / (double)(n - 1 + !(n - 1))) <= 1e-12 * fabs(out[0]) &&
                              fabs(out[1] - (sc + sz) / (double)(n - 1 + !(n - 1))) <= 1e-12 * fabs(out[1]),
                       "%lld rows: %.17g %.17g", (long long)n, out[0], out[1]);
    }
    fat5__cpu_loss_total(NULL, FAT5__ADDR(out), FAT5__ADDR(ce), FAT5__ADDR(z), 300, 0);
    FAT5_CHECK(T, out[0] == 0 && out[1] == 0);
    z[17] = NAN;
    fat5__cpu_loss_total(NULL, FAT5__ADDR(out), FAT5__ADDR(ce), FAT5__ADDR(z), 300, 300);
    FAT5_CHECK(T, isfinite(out[0]) && isnan(out[1]));
}

static void t_xent_bwd(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(5);
    int32_t y[6] = {3, -100, 0, 10, -100, 7};
    tc_xent a;
    float *dx = tc_alloc(66);
    int cfg;
    a.ctx = tc_ctx();
    a.T = 6; a.V = 11; a.x = tc_alloc(66); a.lse = tc_alloc(6); a.ce = tc_alloc(6); a.zr = tc_alloc(6); a.y = y;
    tc_fill(&rng, a.x, 66, 3.0, 0);
    for (cfg = 0; cfg < 4; cfg++) {
        char what[64];
        double rows = 0;
        int64_t t;
        a.z = cfg & 1 ? 0.01f : 0.0f;
        a.s = cfg & 2 ? 0.1f : 0.0f;
        // the op's rows add up to the loss
        FAT5_CHECK(T, fat5__cpu_xent_fwd(a.ctx, A_(a.lse), A_(a.ce), A_(a.zr), A_(a.x), A_(a.y), a.T, a.V, a.z, a.s) ==
                          FAT5_OK);
        for (t = 0; t < a.T; t++) rows += (double)a.ce[t] + a.zr[t];
        FAT5_CHECK_MSG(T, fabs(rows / 4 - tc_xent_loss(&a)) < 1e-6, "xent rows %.9g, loss %.9g", rows / 4,
                       tc_xent_loss(&a));
        fat5__cpu_xent_bwd(a.ctx, A_(dx), A_(a.x), A_(a.lse), A_(a.y), a.T, a.V, a.z, a.s, 1.0f / 4);
        snprintf(what, sizeof what, "xent dlogits z=%g s=%g", a.z, a.s);
        tc_fd_check(T, what, a.x, 66, dx, tc_xent_loss, &a, 1e-3, 1e-5, 1e-3);
        // ignored rows: no loss and no gradient
        FAT5_CHECK(T, a.ce[1] == 0 && a.zr[4] == 0 && dx[11 + 5] == 0);
    }
    // plain CE of a row equals -log softmax at the label
    {
        double mx = -1e30, se = 0;
        int j;
        fat5__cpu_xent_fwd(a.ctx, A_(a.lse), A_(a.ce), A_(a.zr), A_(a.x), A_(y), 1, 11, 0, 0);
        for (j = 0; j < 11; j++) if (a.x[j] > mx) mx = a.x[j];
        for (j = 0; j < 11; j++) se += exp(a.x[j] - mx);
        FAT5_CHECK(T, fabs(a.ce[0] - (mx + log(se) - a.x[3])) < 1e-5 && a.zr[0] == 0);
    }
    free(a.x); free(a.lse); free(a.ce); free(a.zr); free(dx);
    fat5_ctx_destroy(a.ctx);
}

// matrix products: the three layouts agree with each other on the same data; alpha and beta
static void t_matmul_layouts(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(6);
    fat5_ctx *ctx = tc_ctx();
    int64_t M = 5, N = 7, K = 3, i, j;
    float A[15], B[21], At[15], Bt[21], c1[35], c2[35], c3[35];
    tc_fill(&rng, A, 15, 1, 0);
    tc_fill(&rng, B, 21, 1, 0);
    for (i = 0; i < M; i++) for (j = 0; j < K; j++) At[j * M + i] = A[i * K + j];
    for (i = 0; i < N; i++) for (j = 0; j < K; j++) Bt[j * N + i] = B[i * K + j];
    for (i = 0; i < 35; i++) c1[i] = c2[i] = c3[i] = NAN;  // beta = 0 must not read C
    fat5__cpu_mm(ctx, FAT5__MM_NT, A_(c1), 1, A_(A), A_(B), M, N, K, 1.0f, 0.0f);   // A B^T with B [N,K]
    fat5__cpu_mm(ctx, FAT5__MM_NN, A_(c2), 1, A_(A), A_(Bt), M, N, K, 1.0f, 0.0f);  // A Bt with Bt [K,N]
    fat5__cpu_mm(ctx, FAT5__MM_TN, A_(c3), 1, A_(At), A_(Bt), M, N, K, 1.0f, 0.0f); // At^T Bt
    fat5_check_close(T, "mm NN vs NT", c2, c1, 35, 1e-6, 1e-6);
    fat5_check_close(T, "mm TN vs NT", c3, c1, 35, 1e-6, 1e-6);
    FAT5_CHECK(T, fabs(c1[2 * N + 4] - (A[6] * B[12] + A[7] * B[13] + A[8] * B[14])) < 1e-6);
    // C = 0.5 A B^T + 2 C: 2.5 times A B^T
    fat5__cpu_mm(ctx, FAT5__MM_NT, A_(c1), 1, A_(A), A_(B), M, N, K, 0.5f, 2.0f);
    for (i = 0; i < 35; i++) c2[i] *= 2.5f;
    fat5_check_close(T, "mm NT alpha beta", c1, c2, 35, 1e-6, 1e-6);
    fat5_ctx_destroy(ctx);
}

// Matrix products on several threads: for every layout, odd and tile-crossing shapes, and
// alpha/beta, the result of 2, 3 and 5 threads is bitwise the 1-thread result, which is bitwise
// the plain double sum in k order (fat5__cpu_mm's contract), and within fp32 rounding
// (|d| <= 1e-6 + 1e-6 |ref|) of an oracle summed in long double in reverse order.
static fat5_ctx *tc_ctx_threads(int n) {
    fat5_ctx *ctx = NULL;
    fat5_ctx_config cc = fat5_ctx_config_default();
    cc.n_threads = n;
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) abort();
    return ctx;
}
static void t_matmul_threads(fat5_test *T) {
    static const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 33},   {7, 1, 129},  {33, 129, 7}, {129, 33, 1},
                                        {7, 7, 0},   {65, 300, 2}, {200, 257, 300}, {385, 70, 513}, {3, 600, 40}};
    static const int threads[] = {2, 3, 5};
    fat5_ctx *one = tc_ctx_threads(1), *many[3];
    fat5_rng rng = fat5_rng_init(17);
    size_t si;
    int l, ti, bad_thr = 0, bad_plain = 0;
    for (ti = 0; ti < 3; ti++) many[ti] = tc_ctx_threads(threads[ti]);
    FAT5_CHECK(T, one->n_threads == 1 && many[2]->n_threads == (FAT5__THREADS ? 5 : 1));
    for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (l = 0; l < 3; l++) {
            fat5__mm_layout lay = l == 0 ? FAT5__MM_NT : l == 1 ? FAT5__MM_NN : FAT5__MM_TN;
            int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], i, j, k;
            int beta_on = (int)((si + (size_t)l) % 2);
            float alpha = beta_on ? 0.5f : 1.0f, beta = beta_on ? 2.0f : 0.0f;
            float *A = tc_alloc((size_t)(M * K)), *B = tc_alloc((size_t)(K * N)), *C0 = tc_alloc((size_t)(M * N));
            float *c1 = tc_alloc((size_t)(M * N)), *cn = tc_alloc((size_t)(M * N));
            float *plain = tc_alloc((size_t)(M * N)), *ref = tc_alloc((size_t)(M * N));
            tc_fill(&rng, A, (size_t)(M * K), 1, 0);
            tc_fill(&rng, B, (size_t)(K * N), 1, 0);
            tc_fill(&rng, C0, (size_t)(M * N), 1, 0);
            for (i = 0; i < M; i++)
                for (j = 0; j < N; j++) {
                    double s = 0;
                    long double r = 0;
                    for (k = 0; k < K; k++) {
                        float a = lay == FAT5__MM_TN ? A[k * M + i] : A[i * K + k];
                        float b = lay == FAT5__MM_NT ? B[j * K + k] : B[k * N + j];
                        s += (double)a * b;
                    }
                    for (k = K - 1; k >= 0; k--) {
                        float a = lay == FAT5__MM_TN ? A[k * M + i] : A[i * K + k];
                        float b = lay == FAT5__MM_NT ? B[j * K + k] : B[k * N + j];
                        r += (long double)a * b;
                    }
                    plain[i * N + j] = (float)(alpha * s + (beta != 0 ? (double)beta * C0[i * N + j] : 0.0));
                    ref[i * N + j] = (float)((long double)alpha * r + (long double)beta * C0[i * N + j]);
                }
            for (i = 0; i < M * N; i++) c1[i] = beta_on ? C0[i] : NAN;  // beta = 0 must not read C
            FAT5_REQUIRE_OK(T, fat5__cpu_mm(one, lay, A_(c1), 1, A_(A), A_(B), M, N, K, alpha, beta));
            if (memcmp(c1, plain, (size_t)(M * N) * sizeof(float))) {
                if (bad_plain++ < 3) printf("  mm %d x %d x %d layout %d: 1 thread != plain double sum\n", (int)M,
                                            (int)N, (int)K, l);
            }
            fat5_check_close(T, "mm vs long double oracle", c1, ref, (size_t)(M * N), 1e-6, 1e-6);
            for (ti = 0; ti < 3; ti++) {
                for (i = 0; i < M * N; i++) cn[i] = beta_on ? C0[i] : NAN;
                FAT5_REQUIRE_OK(T, fat5__cpu_mm(many[ti], lay, A_(cn), 1, A_(A), A_(B), M, N, K, alpha, beta));
                if (memcmp(c1, cn, (size_t)(M * N) * sizeof(float))) {
                    if (bad_thr++ < 3) printf("  mm %d x %d x %d layout %d: %d threads != 1 thread\n", (int)M,
                                              (int)N, (int)K, l, threads[ti]);
                }
            }
            free(A); free(B); free(C0); free(c1); free(cn); free(plain); free(ref);
        }
    FAT5_CHECK_MSG(T, bad_plain == 0, "%d products differ from the plain double sum", bad_plain);
    FAT5_CHECK_MSG(T, bad_thr == 0, "%d threaded products differ from the 1-thread one", bad_thr);
    for (ti = 0; ti < 3; ti++) fat5_ctx_destroy(many[ti]);
    fat5_ctx_destroy(one);
    {   // n_threads: negative is an error naming the field; 0 resolves to at least one thread
        fat5_ctx *ctx = NULL;
        fat5_ctx_config cc = fat5_ctx_config_default();
        cc.n_threads = -1;
        char why[256];
        FAT5_CHECK(T, fat5_ctx_create(&cc, &ctx, why, sizeof why) == FAT5_ERR_INVALID_ARG && !ctx && strstr(why, "n_threads"));
        cc.n_threads = 0;
        FAT5_REQUIRE_OK(T, fat5_ctx_create(&cc, &ctx, NULL, 0));
        FAT5_CHECK(T, ctx->n_threads >= 1 && ctx->pool == NULL);  // the pool starts at the first large product
        fat5_ctx_destroy(ctx);
    }
}

// A whole forward and backward on 1, 2 and 3 threads (products and attention large enough to be
// split): loss, logits and every gradient bitwise equal.
static void t_threads_model_bitwise(fat5_test *T) {
    enum { S = 2, TE = 150, TD = 70 };
    static int32_t enc[S * TE], lab[S * TD], ecu[S + 1], dcu[S + 1];
    static const int nts[3] = {1, 2, 3};
    fat5_model_config c = fat5_model_config_default();
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_rng g = fat5_rng_init(5);
    fat5_batch b;
    float *ref_l = NULL, *ref_g = NULL;
    double ref_loss = 0;
    size_t nl = (size_t)S * TD * 50, ng = 0;
    int i, r;
    c.vocab_size = 50; c.d_model = 64; c.d_kv = 32; c.num_heads = 2; c.d_ff = 128;
    c.num_layers = 1; c.num_decoder_layers = 1;
    c.act = FAT5_ACT_GELU_TANH; c.gated = 1; c.tie_word_embeddings = 0; c.scale_decoder_outputs = 0;
    for (i = 0; i < S * TE; i++) enc[i] = 2 + (int32_t)fat5_rng_below(&g, 48);
    for (i = 0; i < S * TD; i++) lab[i] = 2 + (int32_t)fat5_rng_below(&g, 48);
    for (i = 0; i <= S; i++) { ecu[i] = i * TE; dcu[i] = i * TD; }
    memset(&b, 0, sizeof b);
    b.n_seq = S; b.n_enc_tokens = S * TE; b.n_dec_tokens = S * TD;
    b.enc_tokens = enc; b.enc_cu_seqlens = ecu; b.labels = lab; b.dec_cu_seqlens = dcu;
    for (r = 0; r < 3; r++) {
        fat5_ctx *ctx = tc_ctx_threads(nts[r]);
        fat5_model *m = NULL;
        fat5_forward_result fr;
        float *l = tc_alloc(nl), *gr;
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 3, &m));
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, &lc, &fr));
        FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
        FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, l, (int64_t)nl));
        ng = m->n_floats;
        gr = tc_alloc(ng);
        memcpy(gr, FAT5__HOST(const float, m->gd), ng * sizeof(float));
        if (r == 0) {
            ref_l = l; ref_g = gr; ref_loss = fr.loss;
        } else {
            FAT5_CHECK_MSG(T, fr.loss == ref_loss, "%d threads: loss %.17g, 1 thread %.17g", nts[r], fr.loss, ref_loss);
            FAT5_CHECK_MSG(T, !memcmp(l, ref_l, nl * sizeof(float)), "%d threads: logits differ", nts[r]);
            FAT5_CHECK_MSG(T, !memcmp(gr, ref_g, ng * sizeof(float)), "%d threads: gradients differ", nts[r]);
            free(l); free(gr);
        }
        FAT5_CHECK(T, nts[r] == 1 || !FAT5__THREADS || ctx->pool != NULL);  // the threads did run
        fat5_model_destroy(m);
        fat5_ctx_destroy(ctx);
    }
    free(ref_l); free(ref_g);
}

// rope: the backward (FAT5__ROPE_TRANSPOSE) is the adjoint of the forward, checked by finite
// differences of f(x) = <rope(x), y>; without xPos the rotation keeps every head's norm and leaves
// dims rd.. alone; q.k of a query rotated at position i and a key at j depends on i - j only
// (xPos included: its scales cancel to zeta^((i-j)/gamma)); per-sequence positions restart.
typedef struct tc_rope { fat5_ctx *ctx; float *x, *y, *tmp; int32_t *cu, *seq; int64_t T; int H, dk, rd, flags;
                         float xpos; } tc_rope;
static double tc_rope_f(void *u) {
    tc_rope *a = (tc_rope *)u;
    int64_t n = a->T * a->H * a->dk, i;
    double s = 0;
    memcpy(a->tmp, a->x, (size_t)n * sizeof(float));
    fat5__cpu_rope(a->ctx, A_(a->tmp), A_(a->cu), A_(a->seq), 0, a->T, a->H, a->dk, a->rd, 100.0f, a->xpos, a->flags);
    for (i = 0; i < n; i++) s += (double)a->tmp[i] * a->y[i];
    return s;
}
static void t_rope(fat5_test *T) {
    fat5_ctx *ctx = tc_ctx();
    fat5_rng r = fat5_rng_init(5);
    int32_t cu[3] = {0, 5, 9}, seq[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1}, pos[1];
    int v;
    for (v = 0; v < 4; v++) {
        tc_rope a;
        int64_t n, i;
        float *g;
        char what[64];
        a.ctx = ctx, a.T = 9, a.H = 2, a.dk = 6, a.rd = v == 1 ? 4 : 6, a.cu = cu, a.seq = seq;
        a.flags = (v & 1 ? FAT5__ROPE_INTERLEAVED : 0) | (v == 3 ? FAT5__ROPE_KEY : 0);
        a.xpos = v >= 2 ? 4.0f : 0.0f;
        n = a.T * a.H * a.dk;
        a.x = tc_alloc((size_t)n), a.y = tc_alloc((size_t)n), a.tmp = tc_alloc((size_t)n), g = tc_alloc((size_t)n);
        for (i = 0; i < n; i++) a.x[i] = (float)fat5_rng_normal(&r), a.y[i] = (float)fat5_rng_normal(&r);
        // gradient of <rope(x), y> with respect to x: the transposed map applied to y
        memcpy(g, a.y, (size_t)n * sizeof(float));
        fat5__cpu_rope(ctx, A_(g), A_(cu), A_(seq), 0, a.T, a.H, a.dk, a.rd, 100.0f, a.xpos, a.flags | FAT5__ROPE_TRANSPOSE);
        snprintf(what, sizeof what, "rope variant %d: transpose", v);
        tc_fd_check(T, what, a.x, (size_t)n, g, tc_rope_f, &a, 1e-2, 1e-4, 1e-4);
        // norms and pass-through dims (no xPos), positions restarting: token 5 is position 0
        memcpy(a.tmp, a.x, (size_t)n * sizeof(float));
        fat5__cpu_rope(ctx, A_(a.tmp), A_(cu), A_(seq), 0, a.T, a.H, a.dk, a.rd, 100.0f, a.xpos, a.flags);
        FAT5_CHECK(T, memcmp(a.tmp + 5 * a.H * a.dk, a.x + 5 * a.H * a.dk, (size_t)(a.H * a.dk) * sizeof(float)) == 0 ||
                          a.xpos > 0);
        for (i = 0; i < a.T * a.H && a.xpos == 0; i++) {
            double n0 = 0, n1 = 0;
            int d;
            for (d = 0; d < a.dk; d++) n0 += (double)a.x[i * a.dk + d] * a.x[i * a.dk + d],
                                     n1 += (double)a.tmp[i * a.dk + d] * a.tmp[i * a.dk + d];
            FAT5_CHECK_MSG(T, fabs(n0 - n1) <= 1e-5 * n0, "rope variant %d: norm %g -> %g", v, n0, n1);
            for (d = a.rd; d < a.dk; d++) FAT5_CHECK(T, a.tmp[i * a.dk + d] == a.x[i * a.dk + d]);
        }
        free(a.x), free(a.y), free(a.tmp), free(g);
    }
    {   // relative: q at 3, k at 1 scores as q at 12, k at 10 (pos[0] form, xPos on)
        float q[6], k[6], q1[6], k1[6], q2[6], k2[6];
        double s1 = 0, s2 = 0;
        int d;
        for (d = 0; d < 6; d++) q[d] = (float)fat5_rng_normal(&r), k[d] = (float)fat5_rng_normal(&r);
        memcpy(q1, q, sizeof q), memcpy(k1, k, sizeof k), memcpy(q2, q, sizeof q), memcpy(k2, k, sizeof k);
        pos[0] = 3, fat5__cpu_rope(ctx, A_(q1), 0, 0, A_(pos), 1, 1, 6, 6, 100.0f, 4.0f, 0);
        pos[0] = 1, fat5__cpu_rope(ctx, A_(k1), 0, 0, A_(pos), 1, 1, 6, 6, 100.0f, 4.0f, FAT5__ROPE_KEY);
        pos[0] = 12, fat5__cpu_rope(ctx, A_(q2), 0, 0, A_(pos), 1, 1, 6, 6, 100.0f, 4.0f, 0);
        pos[0] = 10, fat5__cpu_rope(ctx, A_(k2), 0, 0, A_(pos), 1, 1, 6, 6, 100.0f, 4.0f, FAT5__ROPE_KEY);
        for (d = 0; d < 6; d++) s1 += (double)q1[d] * k1[d], s2 += (double)q2[d] * k2[d];
        FAT5_CHECK_MSG(T, fabs(s1 - s2) <= 1e-5 * (fabs(s1) + 1e-3), "q.k at (3, 1) %g, at (12, 10) %g", s1, s2);
    }
    fat5_ctx_destroy(ctx);
}

// fire_reduce against a naive sum over the heads: each part of the shares lands in its place of
// FIRE's gradient block (dw1, db1, dc, dL_multiplier summed over the heads; each head's dw2 row
// and db2 to that head), added to what the block held
static void t_fire_reduce(fat5_test *T) {
    static const int shapes[][2] = {{3, 8}, {1, 1}, {4, 5}};
    fat5_ctx *ctx = tc_ctx();
    fat5_rng rng = fat5_rng_init(77);
    size_t si;
    for (si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int H = shapes[si][0], W = shapes[si][1], h, w, S = (int)FAT5__FIRE_SHARES(W);
        int n = (int)FAT5__FIRE_NUMEL(H, W), e;
        float *g = (float *)calloc((size_t)n, sizeof(float)), *want = (float *)calloc((size_t)n, sizeof(float));
        float *sh = (float *)calloc((size_t)H * (size_t)S, sizeof(float));
        if (!g || !want || !sh) abort();
        for (e = 0; e < n; e++) g[e] = want[e] = (float)(fat5_rng_uniform(&rng) - 0.5);
        for (e = 0; e < H * S; e++) sh[e] = (float)(4.0 * fat5_rng_uniform(&rng) - 2.0);
        for (h = 0; h < H; h++) {
            for (w = 0; w < W; w++) {
                want[w] += sh[h * S + w];
                want[W + w] += sh[h * S + W + w];
                want[2 * W + h * W + w] += sh[h * S + 2 * W + w];
            }
            want[FAT5__FIRE_B2(H, W) + h] += sh[h * S + 3 * W];
            want[FAT5__FIRE_C(H, W)] += sh[h * S + 3 * W + 1];
            want[FAT5__FIRE_LM(H, W)] += sh[h * S + 3 * W + 2];
        }
        FAT5_CHECK(T, fat5__cpu_fire_reduce(ctx, A_(g), A_(sh), H, W) == FAT5_OK);
        fat5_check_close(T, "fire_reduce vs naive sum", g, want, (size_t)n, 1e-6, 1e-6);
        free(g);
        free(want);
        free(sh);
    }
    fat5_ctx_destroy(ctx);
}

// The op table: each op exists on both backends, and every GPU kernel is the GPU side of an op of
// the same name, or of an attention op with a position scheme's suffix (_alibi, _fire) or a
// pattern's (_pat), the tensor-core families (_tc64, _tc128) and the sm_90a ones of the forward
// and dk, dv (_wg64, _wg128) before them, so no kernel lacks its CPU oracle.
#ifndef FAT5_NO_CUDA
static int to_kernel_of_op(const char *kernel, const char *op) {
    size_t n = strlen(op);
    const char *x = kernel + n;  // an attention op's kernels: per scheme, per scheme with a pattern or dropout
    if (strncmp(kernel, op, n)) return 0;
    if ((!strcmp(op, "attn_fwd") || !strcmp(op, "attn_bwd_dq") || !strcmp(op, "attn_bwd_dkv")) && !strncmp(x, "_tc", 3))
        x += !strncmp(x, "_tc64", 5) ? 5 : !strncmp(x, "_tc128", 6) ? 6 : 0;  // the tensor-core families
    if ((!strcmp(op, "attn_fwd") || !strcmp(op, "attn_bwd_dkv")) && !strncmp(x, "_wg", 3))  // the sm_90a families
        x += !strncmp(x, "_wg64", 5) ? 5 : !strncmp(x, "_wg128", 6) ? 6 : 0;
    return !*x || (!strncmp(op, "attn_", 5) && (!strcmp(x, "_alibi") || !strcmp(x, "_fire") || !strcmp(x, "_pat") ||
                                                !strcmp(x, "_alibi_pat") || !strcmp(x, "_fire_pat") ||
                                                !strcmp(x, "_drop") || !strcmp(x, "_alibi_drop")));
}
#endif

static void t_op_table(fat5_test *T) {
    int i, j;
    const fat5__backend *be = &fat5__cpu_backend;
    // the 21 training ops (mm and mm_batched included), rope, fire_reduce, block_sum and block_sum_bwd, then the 5 decode ops
    // (attn_decode, cache_write, norm_mm, cache_gather, add_i32), then the 3 decoding-strategy ops (gen_process,
    // gen_select, gen_beam), optim_coef (the optimizer's step sizes on the backend, beside adamw_seg) and
    // loss_total (the batch's loss on the backend, beside xent_bwd), adafactor_seg (the Adafactor update),
    // dropout and drop_draws (the elementwise dropout sites, the mask generator alone)
    FAT5_CHECK(T, FAT5__OP_COUNT == 38);
    FAT5_CHECK(T, be->dropout == fat5__cpu_dropout && be->drop_draws == fat5__cpu_drop_draws);
    FAT5_CHECK(T, be->adafactor_seg == fat5__cpu_adafactor_seg);
    FAT5_CHECK(T, be->optim_coef == fat5__cpu_optim_coef && be->loss_total == fat5__cpu_loss_total);
    FAT5_CHECK(T, be->mm_batched == fat5__cpu_mm_batched);
    FAT5_CHECK(T, be->block_sum == fat5__cpu_block_sum && be->block_sum_bwd == fat5__cpu_block_sum_bwd);
    FAT5_CHECK(T, be->rope == fat5__cpu_rope);
    FAT5_CHECK(T, be->attn_decode == fat5__cpu_attn_decode && be->add_i32 == fat5__cpu_add_i32);
    FAT5_CHECK(T, be->gen_beam == fat5__cpu_gen_beam);
    FAT5_CHECK(T, be->mm == fat5__cpu_mm && be->attn_bwd_dkv == fat5__cpu_attn_bwd_dkv);
#ifndef FAT5_NO_CUDA
    FAT5_CHECK(T, fat5__gpu_backend.mm == fat5__gpu_mm && fat5__gpu_backend.xent_fwd == fat5__gpu_xent_fwd);
    for (i = 0; i < FAT5__K_COUNT; i++) {
        int found = 0;
        for (j = 0; j < FAT5__OP_COUNT; j++) found |= to_kernel_of_op(fat5__kernel_names[i] + 5, fat5__op_names[j]);
        FAT5_CHECK_MSG(T, found, "kernel %s has no op in FAT5__OPS", fat5__kernel_names[i]);
    }
    // every op but mm and mm_batched (cuBLAS) has a kernel
    for (j = 0; j < FAT5__OP_COUNT; j++) {
        int found = !strcmp(fat5__op_names[j], "mm") || !strcmp(fat5__op_names[j], "mm_batched");
        for (i = 0; i < FAT5__K_COUNT; i++) found |= !strcmp(fat5__kernel_names[i] + 5, fat5__op_names[j]);
        FAT5_CHECK_MSG(T, found, "op %s has no kernel", fat5__op_names[j]);
    }
    // the kernel files name exactly the parts 0 .. FAT5__K_PARTS - 1 the runtime compiles
    // (FAT5_IN_PART(k) guards), each at least once
    {
        int seen[FAT5__K_PARTS + 1], k, bad = 0;
        size_t li;
        memset(seen, 0, sizeof seen);
        for (k = 0; fat5__kernel_files[k].name; k++)
            for (li = 0; fat5__kernel_files[k].lines[li]; li++) {
                const char *at = strstr(fat5__kernel_files[k].lines[li], "#if FAT5_IN_PART(");
                if (at) {
                    int part = atoi(at + strlen("#if FAT5_IN_PART("));
                    if (part >= 0 && part < FAT5__K_PARTS) seen[part]++;
                    else bad++, seen[FAT5__K_PARTS]++;
                }
            }
        for (k = 0; k < FAT5__K_PARTS; k++) FAT5_CHECK_MSG(T, seen[k] > 0, "no kernel file has part %d", k);
        FAT5_CHECK_MSG(T, bad == 0, "%d FAT5_IN_PART guards name parts outside 0 .. %d", bad, FAT5__K_PARTS - 1);
    }
#else
    (void)i;
    (void)j;
#endif
}

// ---- decoding ----

// attn_decode CAUSAL against attn_fwd: entry i at position p = pos[rows[i]] (cache row rows[i])
// gives the causal forward's output for the last query of the sequence of the row's first p + 1
// tokens. Three cache rows with gaps between them, two entries in another order than the rows, each
// row at its own position (rows that joined at different steps); positions below, at and beyond
// max_distance (the saturated buckets).
static void t_attn_decode_causal(fat5_test *T) {
    enum { R = 3, L = 40, CAP = 45, H = 3, DK = 5, NB = 8, MD = 12 };
    static const int32_t kv_off[R] = {50, 0, 100};  // row 1 first, gaps in between
    static const int32_t rows[2] = {2, 0};
    static const int pos_list[] = {0, 1, 5, 11, 12, 13, 25, 39};
    const int ld = H * DK;
    fat5_rng rng = fat5_rng_init(21);
    fat5_ctx *ctx = tc_ctx();
    float *qs = tc_alloc((size_t)R * L * ld), *k = tc_alloc((size_t)150 * ld), *v = tc_alloc((size_t)150 * ld);
    float bias[NB * H], qd[2 * H * DK], od[2 * H * DK], of[L * H * DK], lse[L * H];
    int32_t pos[R] = {0, 0, 0}, cu[2], qseq[L];
    size_t pi, np = sizeof pos_list / sizeof pos_list[0];
    int i, t;
    tc_fill(&rng, qs, (size_t)R * L * ld, 1.0, 0);
    tc_fill(&rng, k, (size_t)150 * ld, 1.0, 0);
    tc_fill(&rng, v, (size_t)150 * ld, 1.0, 0);
    tc_fill(&rng, bias, NB * H, 2.0, 0);
    for (t = 0; t < L; t++) qseq[t] = 0;
    for (pi = 0; pi < np; pi++) {
        pos[rows[0]] = pos_list[pi];
        pos[rows[1]] = pos_list[(pi + 3) % np];   // another position
        pos[1] = 7;                               // a row not in the step
        for (i = 0; i < 2; i++)
            memcpy(qd + i * ld, qs + ((size_t)rows[i] * L + (size_t)pos[rows[i]]) * ld, ld * sizeof(float));
        FAT5_CHECK(T, fat5__cpu_attn_decode(ctx, A_(od), A_(qd), A_(k), A_(v), A_(bias), 0, A_(rows), A_(kv_off), 0,
                                            A_(pos), 2, H, DK, FAT5__ATTN_CAUSAL, NB, MD, CAP, 0) == FAT5_OK);
        for (i = 0; i < 2; i++) {
            const float *kr = k + (size_t)kv_off[rows[i]] * ld, *vr = v + (size_t)kv_off[rows[i]] * ld;
            int p = pos[rows[i]];
            cu[0] = 0;
            cu[1] = p + 1;
            FAT5_CHECK(T, fat5__cpu_attn_fwd(ctx, A_(of), A_(lse), A_(qs + (size_t)rows[i] * L * ld), A_(kr), A_(vr),
                                             A_(bias), 0, A_(cu), A_(cu), A_(qseq), p + 1, H, DK,
                                             FAT5__ATTN_CAUSAL, NB, MD, 0, 0, fat5__drop_none()) == FAT5_OK);
            for (t = 0; t < ld; t++)
                FAT5_CHECK_MSG(T, od[i * ld + t] == of[(size_t)p * ld + t],
                               "causal decode pos %d entry %d element %d: %.9g vs forward %.9g", p, i, t,
                               od[i * ld + t], of[(size_t)p * ld + t]);
        }
    }
    // the bias matters beyond max_distance too: the saturated bucket differs from bucket 0
    FAT5_CHECK(T, fat5__rel_bucket(-39, 0, NB, MD) == NB - 1 && fat5__rel_bucket(0, 0, NB, MD) == 0);
    free(qs); free(k); free(v);
    fat5_ctx_destroy(ctx);
}

// attn_decode CROSS against attn_fwd CROSS of a one-query sequence over the row's kv_len keys
// (no bias even when one is passed; a row without keys gives o = 0); max_keys below the longest
// row changes nothing on the CPU.
static void t_attn_decode_cross(fat5_test *T) {
    enum { R = 4, H = 2, DK = 7 };
    static const int32_t kv_off[R] = {0, 13, 14, 30};
    static const int32_t kv_len[R] = {13, 1, 16, 0};
    static const int32_t rows[3] = {2, 1, 0}, rows0[1] = {3};
    const int ld = H * DK;
    fat5_rng rng = fat5_rng_init(22);
    fat5_ctx *ctx = tc_ctx();
    float q[3 * H * DK], k[30 * H * DK], v[30 * H * DK], bias[4 * H], od[3 * H * DK], of[H * DK], lse[H];
    int32_t pos[R] = {5, 5, 5, 5}, cu_q[2] = {0, 1}, cu_k[2], qseq[1] = {0};
    int i, t;
    tc_fill(&rng, q, sizeof q / sizeof q[0], 1.0, 0);
    tc_fill(&rng, k, sizeof k / sizeof k[0], 1.0, 0);
    tc_fill(&rng, v, sizeof v / sizeof v[0], 1.0, 0);
    tc_fill(&rng, bias, sizeof bias / sizeof bias[0], 5.0, 0);
    FAT5_CHECK(T, fat5__cpu_attn_decode(ctx, A_(od), A_(q), A_(k), A_(v), A_(bias), 0, A_(rows), A_(kv_off),
                                        A_(kv_len), A_(pos), 3, H, DK, FAT5__ATTN_CROSS, 4, 3, 8, 0) == FAT5_OK);
    for (i = 0; i < 3; i++) {
        cu_k[0] = 0;
        cu_k[1] = kv_len[rows[i]];
        FAT5_CHECK(T, fat5__cpu_attn_fwd(ctx, A_(of), A_(lse), A_(q + i * ld), A_(k + kv_off[rows[i]] * ld),
                                         A_(v + kv_off[rows[i]] * ld), 0, 0, A_(cu_q), A_(cu_k), A_(qseq), 1, H, DK,
                                         FAT5__ATTN_CROSS, 0, 0, 0, 0, fat5__drop_none()) == FAT5_OK);
        for (t = 0; t < ld; t++)
            FAT5_CHECK_MSG(T, od[i * ld + t] == of[t], "cross decode entry %d element %d: %.9g vs forward %.9g", i, t,
                           od[i * ld + t], of[t]);
    }
    // a single key: o = v of that key
    for (t = 0; t < ld; t++) FAT5_CHECK(T, od[ld + t] == v[13 * ld + t]);
    // a row without keys: o = 0
    for (t = 0; t < ld; t++) od[t] = 1.0f;
    FAT5_CHECK(T, fat5__cpu_attn_decode(ctx, A_(od), A_(q), A_(k), A_(v), 0, 0, A_(rows0), A_(kv_off), A_(kv_len),
                                        A_(pos), 1, H, DK, FAT5__ATTN_CROSS, 0, 0, 16, 0) == FAT5_OK);
    for (t = 0; t < ld; t++) FAT5_CHECK(T, od[t] == 0.0f);
    fat5_ctx_destroy(ctx);
}

// cache_write step by step, each row at its own position (pos[row], advanced for the rows of the
// step by add_i32), then cache_gather into another cache: dst row r holds src row idx[r]'s positions
// [0, pos[r]) for the rows named, and nothing else changes.
static void t_cache_write_gather(fat5_test *T) {
    enum { R = 3, CAP = 6, I = 5, STEPS = 4 };
    static const int32_t kv_off[R] = {12, 0, 6};
    static const int32_t rows[2] = {0, 2}, idx[R] = {2, 2, 0}, all[R] = {0, 1, 2}, some[1] = {2};
    static const int32_t start[R] = {1, 0, 0};   // row 0 joined a step earlier
    fat5_rng rng = fat5_rng_init(23);
    fat5_ctx *ctx = tc_ctx();
    float kc[R * CAP * I], vc[R * CAP * I], kd[R * CAP * I], k[STEPS][2 * I], v[STEPS][2 * I];
    int32_t pos[R];
    int s, i, j, r, c;
    memcpy(pos, start, sizeof pos);
    for (i = 0; i < R * CAP * I; i++) kc[i] = vc[i] = kd[i] = -7.0f;
    tc_fill(&rng, &k[0][0], STEPS * 2 * I, 1.0, 0);
    tc_fill(&rng, &v[0][0], STEPS * 2 * I, 1.0, 0);
    for (s = 0; s < STEPS; s++) {
        FAT5_CHECK(T, fat5__cpu_cache_write(ctx, A_(kc), A_(vc), A_(k[s]), A_(v[s]), A_(rows), A_(kv_off), A_(pos),
                                            2, I) == FAT5_OK);
        FAT5_CHECK(T, fat5__cpu_add_i32(ctx, A_(pos), A_(rows), 1, 2) == FAT5_OK);
    }
    FAT5_CHECK(T, pos[0] == STEPS + 1 && pos[1] == 0 && pos[2] == STEPS);
    for (s = 0; s < STEPS; s++)
        for (i = 0; i < 2; i++)
            for (c = 0; c < I; c++) {
                FAT5_CHECK(T, kc[(kv_off[rows[i]] + start[rows[i]] + s) * I + c] == k[s][i * I + c]);
                FAT5_CHECK(T, vc[(kv_off[rows[i]] + start[rows[i]] + s) * I + c] == v[s][i * I + c]);
            }
    // row 1 was never written, nor row 0 before its start
    for (j = 0; j < CAP * I; j++) FAT5_CHECK(T, kc[kv_off[1] * I + j] == -7.0f);
    for (j = 0; j < I; j++) FAT5_CHECK(T, kc[kv_off[0] * I + j] == -7.0f);
    pos[0] = 2, pos[1] = 3, pos[2] = 1;
    FAT5_CHECK(T, fat5__cpu_cache_gather(ctx, A_(kd), A_(kc), A_(idx), A_(all), A_(kv_off), A_(pos), R, I) == FAT5_OK);
    for (r = 0; r < R; r++)
        for (j = 0; j < CAP; j++)
            for (c = 0; c < I; c++) {
                float want = j < pos[r] ? kc[(kv_off[idx[r]] + j) * I + c] : -7.0f;
                FAT5_CHECK_MSG(T, kd[(kv_off[r] + j) * I + c] == want, "gather row %d position %d", r, j);
            }
    // only the rows named: row 2 alone (its 1 position from row 0)
    for (i = 0; i < R * CAP * I; i++) kd[i] = 3.0f;
    FAT5_CHECK(T, fat5__cpu_cache_gather(ctx, A_(kd), A_(kc), A_(idx), A_(some), A_(kv_off), A_(pos), 1, I) == FAT5_OK);
    for (r = 0; r < R; r++)
        for (j = 0; j < CAP * I; j++)
            FAT5_CHECK(T, kd[kv_off[r] * I + j] == (r == 2 && j < I ? kc[kv_off[0] * I + j] : 3.0f));
    // position 0 copies nothing
    pos[0] = pos[1] = pos[2] = 0;
    for (i = 0; i < R * CAP * I; i++) kd[i] = 3.0f;
    FAT5_CHECK(T, fat5__cpu_cache_gather(ctx, A_(kd), A_(kc), A_(idx), A_(all), A_(kv_off), A_(pos), R, I) == FAT5_OK);
    for (i = 0; i < R * CAP * I; i++) FAT5_CHECK(T, kd[i] == 3.0f);
    fat5_ctx_destroy(ctx);
}

// add_i32 over several counters, negative steps included; with indices, only the counters named
static void t_add_i32(fat5_test *T) {
    fat5_ctx *ctx = tc_ctx();
    int32_t x[5] = {0, -3, 7, 100, 2147483600};
    static const int32_t idx[2] = {4, 1};
    FAT5_CHECK(T, fat5__cpu_add_i32(ctx, A_(x), 0, 5, 4) == FAT5_OK);
    FAT5_CHECK(T, x[0] == 5 && x[1] == 2 && x[2] == 12 && x[3] == 105 && x[4] == 2147483600);
    FAT5_CHECK(T, fat5__cpu_add_i32(ctx, A_(x), 0, -6, 5) == FAT5_OK);
    FAT5_CHECK(T, x[0] == -1 && x[1] == -4 && x[2] == 6 && x[3] == 99 && x[4] == 2147483594);
    FAT5_CHECK(T, fat5__cpu_add_i32(ctx, A_(x), 0, 9, 0) == FAT5_OK && x[0] == -1);
    FAT5_CHECK(T, fat5__cpu_add_i32(ctx, A_(x), A_(idx), 2, 2) == FAT5_OK);
    FAT5_CHECK(T, x[0] == -1 && x[1] == -2 && x[2] == 6 && x[3] == 99 && x[4] == 2147483596);
    fat5_ctx_destroy(ctx);
}

// The GPU attention launchers' argument check (host code, no device needed): a T5 table whose max
// distance does not cover fat5__rel_bucket's exact buckets is refused (the kernels' lookup gives
// every distance from max_distance on the last bucket).
// What the CPU backend answers the layers above (they never ask which backend it is): host
// memory, nothing queued, every product fused, no peak, no recording (refused without a message,
// so the caller runs plainly), and the host's memory.
static void t_backend_answers(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const fat5__backend *be = fat5__backend_of(ctx);
    size_t fr = 0, tot = 0;
    void *exec = &fr;
    FAT5_REQUIRE(T, be == &fat5__cpu_backend);
    FAT5_CHECK(T, be->host_memory && !be->queued && !be->dbias_partials && be->act_size(ctx) == 4);
    FAT5_CHECK(T, be->fused_rows(ctx) >= 8 && be->peak_flops(ctx) == 0);
    ctx->err[0] = 0;
    FAT5_CHECK(T, be->capture_begin(ctx) == FAT5_ERR_UNSUPPORTED && ctx->err[0] == 0);
    FAT5_CHECK(T, be->capture_end(ctx, 1, &exec) == FAT5_ERR_STATE && exec == NULL);
    be->graph_destroy(ctx, NULL);
    FAT5_REQUIRE_OK(T, be->mem_info(ctx, &fr, &tot));
    FAT5_CHECK_MSG(T, tot > ((size_t)64 << 20) && fr <= tot, "host memory: %zu free of %zu", fr, tot);
}

#ifndef FAT5_NO_CUDA
static void t_gpu_attn_bucket_check(fat5_test *T) {
    fat5_ctx *ctx = tc_ctx();
    const fat5__dptr b = 64, l = 128;  // any non-null device addresses: only checked, never read
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_BIDIR, b, l, 32, 128, 0, 0) == FAT5_OK);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_CAUSAL, b, l, 32, 128, 0, 0) == FAT5_OK);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_BIDIR, b, l, 4, 1, 0, 0) == FAT5_OK);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_BIDIR, b, 0, 4, 0, 0, 0) == FAT5_ERR_UNSUPPORTED);
    FAT5_CHECK(T, strstr(fat5_last_error(ctx), "at least 1") != NULL);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_CAUSAL, b, l, 4, 1, 0, 0) == FAT5_ERR_UNSUPPORTED);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_CAUSAL, b, l, 4, 2, 0, 0) == FAT5_OK);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_BIDIR, b, l, 32, 7, 0, 0) == FAT5_ERR_UNSUPPORTED);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_BIDIR, b, l, 32, 8, 0, 0) == FAT5_OK);
    FAT5_CHECK(T, fat5__gpu_attn_check(ctx, "t", 8, 2, 64, FAT5__ATTN_CROSS, 0, 0, 32, 128, 0, 0) == FAT5_OK);
    fat5_ctx_destroy(ctx);
}
#define FAT5_TESTS_CPU_OPS_GPU_CHECK(X) X(gpu_attn_bucket_check)
#else
#define FAT5_TESTS_CPU_OPS_GPU_CHECK(X)
#endif

#define FAT5_TESTS_CPU_OPS(X) FAT5_TESTS_CPU_OPS_GPU_CHECK(X) X(rope) X(fire_reduce) X(rel_bucket_tables) X(rmsnorm_bwd) X(act_bwd) X(attn_bwd) X(attn_masking) \
    X(xent_bwd) X(loss_total) X(matmul_layouts) X(matmul_threads) X(threads_model_bitwise) X(op_table)        \
    X(attn_decode_causal) X(attn_decode_cross) X(cache_write_gather) X(add_i32) X(backend_answers)
