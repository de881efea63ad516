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

typedef struct tc_norm { float *x, *w, *r, *y, *rs; int64_t T, D; } tc_norm;
static double tc_norm_loss(void *u) {
    tc_norm *a = (tc_norm *)u;
    fat5__cpu_rmsnorm_fwd(a->y, a->rs, a->x, a->w, a->T, a->D, 1e-6f);
    return tc_dot(a->y, a->r, (size_t)(a->T * a->D));
}
static void t_rmsnorm_bwd(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(1);
    tc_norm a;
    float *dx, *dw;
    a.T = 5;
    a.D = 7;
    a.x = tc_alloc(35); a.w = tc_alloc(7); a.r = tc_alloc(35); a.y = tc_alloc(35); a.rs = tc_alloc(5);
    dx = tc_alloc(35);
    dw = tc_alloc(7);
    tc_fill(&rng, a.x, 35, 2.0, 0);
    tc_fill(&rng, a.w, 7, 1.5, 0);
    tc_fill(&rng, a.r, 35, 1.0, 0);
    tc_norm_loss(&a);
    fat5__cpu_rmsnorm_bwd(dx, dw, a.r, a.x, a.w, a.rs, a.T, a.D, 0);
    tc_fd_check(T, "rmsnorm dx", a.x, 35, dx, tc_norm_loss, &a, 1e-2, 2e-4, 1e-2);
    tc_fd_check(T, "rmsnorm dw", a.w, 7, dw, tc_norm_loss, &a, 1e-2, 2e-4, 1e-2);
    // forward against the definition: y = w x / sqrt(mean(x^2) + eps)
    {
        double ss = 0;
        int j;
        for (j = 0; j < 7; j++) ss += (double)a.x[7 + j] * a.x[7 + j];
        FAT5_CHECK(T, fabs(a.y[7 + 3] - a.w[3] * a.x[7 + 3] / sqrt(ss / 7 + 1e-6)) < 1e-5);
    }
    free(a.x); free(a.w); free(a.r); free(a.y); free(a.rs); free(dx); free(dw);
}

typedef struct tc_act { float *a, *b, *h, *r; int64_t n; fat5_act act; } tc_act;
static double tc_act_loss(void *u) {
    tc_act *p = (tc_act *)u;
    fat5__cpu_act_fwd(p->h, p->a, p->b, p->n, p->act);
    return tc_dot(p->h, p->r, (size_t)p->n);
}
static void t_act_bwd(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(2);
    int act, gated;
    for (act = FAT5_ACT_RELU; act <= FAT5_ACT_SILU; act++)
        for (gated = 0; gated < 2; gated++) {
            tc_act p;
            float *da = tc_alloc(40), *db = tc_alloc(40);
            char what[64];
            p.n = 40;
            p.act = (fat5_act)act;
            p.a = tc_alloc(40); p.b = gated ? tc_alloc(40) : NULL; p.h = tc_alloc(40); p.r = tc_alloc(40);
            tc_fill(&rng, p.a, 40, 3.0, 0.05);
            if (p.b) tc_fill(&rng, p.b, 40, 2.0, 0);
            tc_fill(&rng, p.r, 40, 1.0, 0);
            fat5__cpu_act_bwd(da, p.b ? db : NULL, p.r, p.a, p.b, p.n, p.act);
            snprintf(what, sizeof what, "%s%s da", gated ? "gated " : "", fat5__act_name(p.act));
            tc_fd_check(T, what, p.a, 40, da, tc_act_loss, &p, 1e-3, 1e-4, 1e-3);
            if (p.b) {
                snprintf(what, sizeof what, "gated %s db", fat5__act_name(p.act));
                tc_fd_check(T, what, p.b, 40, db, tc_act_loss, &p, 1e-3, 1e-4, 1e-3);
            }
            free(p.a); free(p.b); free(p.h); free(p.r); free(da); free(db);
        }
    // the tanh GELU of "gated-gelu" is not the erf GELU
    FAT5_CHECK(T, fabsf(fat5__act_f(FAT5_ACT_GELU_TANH, 1.0f) - 0.841191990f) < 1e-6f);
    FAT5_CHECK(T, fabsf(fat5__act_f(FAT5_ACT_GELU, 1.0f) - 0.841344746f) < 1e-6f);
}

typedef struct tc_attn {
    float *q, *k, *v, *bias, *o, *lse, *r;
    fat5__attn_shape s;
} tc_attn;
static double tc_attn_loss(void *u) {
    tc_attn *a = (tc_attn *)u;
    fat5__cpu_attn_fwd(a->o, a->lse, a->q, a->k, a->v, a->bias, &a->s);
    return tc_dot(a->o, a->r, (size_t)(a->s.cu_q[a->s.n_seq] * a->s.H * a->s.dk));
}

// Packed sequences of very different lengths, a one-token sequence included; every kind of
// attention; dq, dk, dv and the bias-table gradient against finite differences.
static void t_attn_bwd(fat5_test *T) {
    static const int32_t cu_q[] = {0, 1, 14, 17, 40};
    static const int32_t cu_k_cross[] = {0, 5, 6, 25, 31};
    fat5_rng rng = fat5_rng_init(3);
    int kind;
    for (kind = 0; kind < 3; kind++) {
        tc_attn a;
        int64_t H = 2, dk = 3, nb = 8, tq = 40, tk;
        float *dq, *dk_, *dv, *dbias;
        char what[64];
        const char *kn = kind == 0 ? "cross" : kind == 1 ? "bidir" : "causal";
        a.s.n_seq = 4;
        a.s.H = H;
        a.s.dk = dk;
        a.s.cu_q = cu_q;
        a.s.cu_k = kind == 0 ? cu_k_cross : cu_q;
        a.s.kind = (fat5__attn_kind)kind;
        a.s.nb = (int)nb;
        a.s.max_distance = 12;  // sequences of 23 tokens reach the saturated buckets
        tk = a.s.cu_k[4];
        a.q = tc_alloc((size_t)(tq * H * dk)); a.k = tc_alloc((size_t)(tk * H * dk)); a.v = tc_alloc((size_t)(tk * H * dk));
        a.o = tc_alloc((size_t)(tq * H * dk)); a.r = tc_alloc((size_t)(tq * H * dk)); a.lse = tc_alloc((size_t)(tq * H));
        a.bias = kind ? tc_alloc((size_t)(nb * H)) : NULL;
        dq = tc_alloc((size_t)(tq * H * dk)); dk_ = tc_alloc((size_t)(tk * H * dk)); dv = tc_alloc((size_t)(tk * H * dk));
        dbias = tc_alloc((size_t)(nb * H));
        tc_fill(&rng, a.q, (size_t)(tq * H * dk), 1.0, 0);
        tc_fill(&rng, a.k, (size_t)(tk * H * dk), 1.0, 0);
        tc_fill(&rng, a.v, (size_t)(tk * H * dk), 1.0, 0);
        tc_fill(&rng, a.r, (size_t)(tq * H * dk), 1.0, 0);
        if (a.bias) tc_fill(&rng, a.bias, (size_t)(nb * H), 1.0, 0);
        tc_attn_loss(&a);
        fat5__cpu_attn_bwd(dq, dk_, dv, dbias, a.r, a.o, a.lse, a.q, a.k, a.v, a.bias, &a.s);
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
        free(dq); free(dk_); free(dv); free(dbias);
    }
}

// Causal attention: the output of query i does not depend on keys after i, nor on any other
// sequence of the pack.
static void t_attn_masking(fat5_test *T) {
    static const int32_t cu[] = {0, 6, 15};
    fat5_rng rng = fat5_rng_init(4);
    float q[15 * 4], k[15 * 4], v[15 * 4], o1[15 * 4], o2[15 * 4], lse[15 * 2], bias[8 * 2];
    fat5__attn_shape s;
    int i;
    s.n_seq = 2; s.H = 2; s.dk = 2; s.cu_q = cu; s.cu_k = cu; s.kind = FAT5__ATTN_CAUSAL; s.nb = 8; s.max_distance = 12;
    tc_fill(&rng, q, 60, 1, 0); tc_fill(&rng, k, 60, 1, 0); tc_fill(&rng, v, 60, 1, 0); tc_fill(&rng, bias, 16, 1, 0);
    fat5__cpu_attn_fwd(o1, lse, q, k, v, bias, &s);
    // change the keys and values of sequence 1 from its position 4 (token 10) on
    for (i = 10 * 4; i < 60; i++) { k[i] += 1.0f; v[i] -= 2.0f; }
    fat5__cpu_attn_fwd(o2, lse, q, k, v, bias, &s);
    for (i = 0; i < 10 * 4; i++)
        FAT5_CHECK_MSG(T, o1[i] == o2[i], "causal output %d changed when later keys changed", i);
    FAT5_CHECK(T, o1[10 * 4] != o2[10 * 4]);
}

typedef struct tc_xent { float *x, *lse; int32_t *y; int64_t T, V; double z, s; } tc_xent;
static double tc_xent_loss(void *u) {
    tc_xent *a = (tc_xent *)u;
    double ce, zs;
    int64_t n;
    fat5__cpu_xent_fwd(a->lse, &ce, &zs, &n, a->x, a->y, a->T, a->V, a->z, a->s);
    return (ce + zs) / (double)n;
}
static void t_xent_bwd(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(5);
    int32_t y[6] = {3, -100, 0, 10, -100, 7};
    tc_xent a;
    float *dx = tc_alloc(66);
    int cfg;
    a.T = 6; a.V = 11; a.x = tc_alloc(66); a.lse = tc_alloc(6); a.y = y;
    tc_fill(&rng, a.x, 66, 3.0, 0);
    for (cfg = 0; cfg < 4; cfg++) {
        char what[64];
        a.z = cfg & 1 ? 0.01 : 0.0;
        a.s = cfg & 2 ? 0.1 : 0.0;
        tc_xent_loss(&a);
        fat5__cpu_xent_bwd(dx, a.x, a.lse, a.y, a.T, a.V, a.z, a.s, 1.0 / 4);
        snprintf(what, sizeof what, "xent dlogits z=%g s=%g", a.z, a.s);
        tc_fd_check(T, what, a.x, 66, dx, tc_xent_loss, &a, 1e-3, 1e-5, 1e-3);
    }
    // plain CE of a row equals -log softmax at the label
    {
        double ce, zs, mx = -1e30, se = 0;
        int64_t n;
        int j;
        fat5__cpu_xent_fwd(a.lse, &ce, &zs, &n, a.x, y, 1, 11, 0, 0);
        for (j = 0; j < 11; j++) if (a.x[j] > mx) mx = a.x[j];
        for (j = 0; j < 11; j++) se += exp(a.x[j] - mx);
        FAT5_CHECK(T, n == 1 && fabs(ce - (mx + log(se) - a.x[3])) < 1e-9);
    }
    free(a.x); free(a.lse); free(dx);
}

// matrix products: the three layouts agree with each other on the same data
static void t_matmul_layouts(fat5_test *T) {
    fat5_rng rng = fat5_rng_init(6);
    int64_t M = 5, N = 7, K = 3, i, j;
    float A[15], B[21], At[15], Bt[21], c1[35], c2[35], c3[35];
    tc_fill(&rng, A, 15, 1, 0);
    tc_fill(&rng, B, 21, 1, 0);
    for (i = 0; i < M; i++) for (j = 0; j < K; j++) At[j * M + i] = A[i * K + j];
    for (i = 0; i < N; i++) for (j = 0; j < K; j++) Bt[j * N + i] = B[i * K + j];
    fat5__cpu_mm_nt(c1, A, B, M, N, K, 0);   // A B^T with B [N,K]
    fat5__cpu_mm_nn(c2, A, Bt, M, N, K, 0);  // A Bt with Bt [K,N]
    fat5__cpu_mm_tn(c3, At, Bt, M, N, K, 0); // At^T Bt
    fat5_check_close(T, "mm_nn vs mm_nt", c2, c1, 35, 1e-6, 1e-6);
    fat5_check_close(T, "mm_tn vs mm_nt", c3, c1, 35, 1e-6, 1e-6);
    FAT5_CHECK(T, fabs(c1[2 * N + 4] - (A[6] * B[12] + A[7] * B[13] + A[8] * B[14])) < 1e-6);
    fat5__cpu_mm_nt(c1, A, B, M, N, K, 1);   // accumulating onto A B^T doubles it
    for (i = 0; i < 35; i++) c2[i] *= 2.0f;
    fat5_check_close(T, "mm_nt accumulate", c1, c2, 35, 1e-6, 1e-6);
}

#define FAT5_TESTS_CPU_OPS(X) X(rel_bucket_tables) X(rmsnorm_bwd) X(act_bwd) X(attn_bwd) X(attn_masking) \
    X(xent_bwd) X(matmul_layouts)
