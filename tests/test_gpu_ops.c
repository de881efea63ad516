// GPU ops, what the op table (test_ops_table.c: every op of FAT5__OPS, GPU against CPU, on its
// generators' shapes) does not check: the attention kernels with their properties (tensor cores
// against the CPU and the FMA kernels, with the tensor cores' tolerances: gpu_attn_tc; the bias
// gradients of T5 (accumulated, and their increments), FIRE (through fire_reduce) and ALiBi (left
// untouched), transient-global keys, windows and prefixes, the same bits on a second run of dq,
// dk, dv and the bias gradient, the launchers' checks: gpu_attn, gpu_attn_edge, gpu_attn_posenc,
// gpu_attn_patterns), norm_mm's gated outputs with their own bound (gpu_norm_mm), and what the
// other launchers refuse (gpu_op_refusals). Odd sizes throughout: lengths that are no multiple of
// any tile or warp, one-token sequences, packs of sequences of very different lengths,
// cross-attention with other key lengths, head dims 1..256, bucket tables too large for shared
// memory (their global-memory fallbacks). Each test skips when no CUDA device can be opened.
//
// (Included by test_main.c unless FAT5_NO_CUDA; test_ops_table.c reuses its tolerances and tg_open.)
//
// Tolerances. Every comparison is |got - ref| <= atol + rtol |ref| elementwise, with
//   rtol = TG_R32 for a result kept in fp32, TG_R16 for a result stored in the activation dtype
//   of a bf16 context;  atol = TG_A * scale, scale = the size of the terms whose rounding errors
//   the result carries: max|ref| over the tensor, or more where the result is a difference of
//   larger terms that can cancel to ~0 (below).
// - fp32 (TG_R32 = TG_A = 1e-5, ~170 ulps of fp32, u = 2^-24 = 6e-8): the CPU oracle works on the
//   same fp32 inputs with double accumulation, so the difference is the GPU's own fp32 rounding:
//   a few ulps per math function (expf, logf, erfcf, sqrtf: <= 4 ulps) plus reduction error
//   ~ sqrt(n) u relative to the sum of |terms| for the random-sign sums here (n <= ~10^4 terms:
//   <= 100 u = 6e-6). A difference carries that error relative to its terms, not to itself, so:
//     rmsnorm dx = r w dy - x r^3 mean(w dy x): scale max(|dx|, |r w dy|) (the terms cancel
//       exactly when D = 1);
//     attention ds = p (dout.v - delta) with |dout.v|, |delta| <= |dout| |v| (2-norms of head
//       rows; exact cancellation when a query sees a single key, e.g. one-token sequences):
//       dq scale max(|dq|, |dout| |v| max|k|), dk likewise with max|q|; o and dv are weighted
//       sums of v and dout rows: max|v|, max|dout|; delta = dout.o: |dout| |o|;
//     row cross-entropy lse - (1-s) x_y - (s/V) sum x: max|lse|;
//     activation derivatives near their roots, the label entry of dlogits: max|ref| (the
//       largest result is of the order of the terms there).
// - bf16 context: the host rounds every activation-dtype input to bf16 first, so oracle and GPU
//   read identical inputs and the GPU still computes in fp32; the only new error is the final
//   rounding of an act_t output to bf16: at most 2^-8 relative (8 significant bits, round to
//   nearest: half an ulp of 2^-7). So TG_R16 = 2^-8 + TG_R32 (this bound is attained: worst
//   ratios ~0.99 of the tolerance are expected) and atol as in fp32; fp32 outputs (lse, delta,
//   dbias, r, dw, embeddings, cross-entropy rows) keep the fp32 tolerances.
// - dbias: the oracle itself adds each ds to a float (dbias[b] += (float)ds, sequentially), over
//   up to N = 2.2e4 (query, key) pairs per bucket here (the 300-token sequence's far buckets);
//   its rounding error grows like u sqrt(N) |partial sum| (random walk), ~ 1e-5 of the result,
//   with a worst case far above. TG_RDB = 1e-4 covers the oracle's error, not the GPU's.
// - Copies and conversions (embed_fwd, to_act, f32_to_bf16, fill, scale, and dw reruns) must
//   match bit for bit.

#define TG_A 1e-5
#define TG_R32 1e-5
#define TG_R16 (1.0 / 256 + TG_R32)
#define TG_RDB 1e-4

// A GPU context and everything a case allocated, freed together by tg_end.
typedef struct tg {
    fat5_test *T;
    fat5_ctx *ctx;
    int bf16;          // activation dtype of ctx is bf16
    const char *mode;  // "fp32" or "bf16", for messages
    fat5__dptr dev[64];
    int ndev;
    void *host[64];
    int nhost;
    int err;  // a call failed (already reported): stop the case
    int tc_cases;      // attention cases whose forward ran on tensor cores
    int tc_bwd_cases;  // attention backward kernels (dq, dkv) that ran on tensor cores
    int wg_cases;      // attention cases whose forward ran on the sm_90a kernels (attention_wg.cu)
    int wg_bwd_cases;  // attention cases whose dk, dv ran on the sm_90a kernel (attention_wg_bwd.cu)
    fat5__drop drop;   // the attention cases' dropout of the probabilities (tg_begin: none)
} tg;

// Opens a GPU context of the given dtype into *out; on FAT5_ERR_NO_DEVICE marks the test skipped,
// on any other failure fails it; *out stays NULL in both cases.
static void tg_open(fat5_test *T, fat5_dtype dtype, fat5_ctx **out) {
    fat5_ctx_config c = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_status st;
    char msg[sizeof T->skip_reason];
    c.device = FAT5_DEVICE_GPU;
    c.dtype = dtype;
    *out = NULL;
    char why[512];
    st = fat5_ctx_create(&c, &ctx, why, sizeof why);
    if (st == FAT5_OK) {
        *out = ctx;
        return;
    }
    snprintf(msg, sizeof msg, "no CUDA device: %.200s", why);
    if (st == FAT5_ERR_NO_DEVICE) FAT5_SKIP(T, msg);
    FAT5_CHECK_MSG(T, 0, "GPU context (%s): %s -> %s", dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32",
                   fat5_status_string(st), msg + strlen("no CUDA device: "));
}

// A GPU context of the given dtype, or NULL (the test is then skipped or failed).
static fat5_ctx *tg_ctx(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx *ctx;
    tg_open(T, dtype, &ctx);
    return ctx;
}

// Starts a case in mode 0 (fp32 context) or 1 (bf16); 0 when there is no context.
static int tg_begin(tg *g, fat5_test *T, int mode) {
    memset(g, 0, sizeof *g);
    g->drop = fat5__drop_none();
    g->T = T;
    g->bf16 = mode == 1;
    g->mode = g->bf16 ? "bf16" : "fp32";
    g->ctx = tg_ctx(T, g->bf16 ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32);
    return g->ctx != NULL;
}

// Frees the buffers allocated since the counts were (ndev, nhost).
static void tg_release(tg *g, int ndev, int nhost) {
    while (g->ndev > ndev) fat5__dev_free(g->ctx, g->dev[--g->ndev]);
    while (g->nhost > nhost) free(g->host[--g->nhost]);
}

static void tg_end(tg *g) {
    tg_release(g, 0, 0);
    fat5_ctx_destroy(g->ctx);
    g->ctx = NULL;
}

// Checks a status; on failure reports the call and the context's message. Returns 1 when ok.
static int tg_ok_at(tg *g, int line, fat5_status st, const char *what) {
    if (st == FAT5_OK) return 1;
    if (!g->err)
        fat5_test_fail(g->T, __FILE__, line, "[%s] %s -> %s: %s", g->mode, what, fat5_status_string(st),
                       fat5_last_error(g->ctx));
    g->err = 1;
    return 0;
}
#define tg_ok(g, call) tg_ok_at((g), __LINE__, (call), #call)

static void *tg_hmem(tg *g, size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p || g->nhost == (int)(sizeof g->host / sizeof g->host[0])) abort();
    g->host[g->nhost++] = p;
    return p;
}
static float *tg_f(tg *g, size_t n) { return (float *)tg_hmem(g, n * sizeof(float)); }
static int32_t *tg_i(tg *g, size_t n) { return (int32_t *)tg_hmem(g, n * sizeof(int32_t)); }

// Device buffer of `bytes`, zero-filled (0 after a failure).
static fat5__dptr tg_dev(tg *g, size_t bytes) {
    fat5__dptr p = 0;
    if (g->err || g->ndev == (int)(sizeof g->dev / sizeof g->dev[0])) {
        if (!g->err) FAT5_CHECK_MSG(g->T, 0, "too many device buffers in one case");
        g->err = 1;
        return 0;
    }
    if (!tg_ok(g, fat5__dev_alloc(g->ctx, bytes ? bytes : 1, &p))) return 0;
    g->dev[g->ndev++] = p;
    return p;
}

static size_t tg_act(const tg *g) { return g->bf16 ? 2 : 4; }

// Upload n floats as fp32 / n int32 / n values in the activation dtype (bf16 bits in a bf16
// context: x must already be bf16 values, see tg_round).
static fat5__dptr tg_up_f32(tg *g, const float *x, size_t n) {
    fat5__dptr p = tg_dev(g, n * 4);
    if (p && n) tg_ok(g, fat5__dev_upload(g->ctx, p, x, n * 4));
    return g->err ? 0 : p;
}
static fat5__dptr tg_up_i32(tg *g, const int32_t *x, size_t n) {
    fat5__dptr p = tg_dev(g, n * 4);
    if (p && n) tg_ok(g, fat5__dev_upload(g->ctx, p, x, n * 4));
    return g->err ? 0 : p;
}
static fat5__dptr tg_up_act(tg *g, const float *x, size_t n) {
    fat5__dptr p;
    size_t i;
    uint16_t *h;
    if (!g->bf16) return tg_up_f32(g, x, n);
    p = tg_dev(g, n * 2);
    h = (uint16_t *)tg_hmem(g, n * 2);
    for (i = 0; i < n; i++) h[i] = fat5__f32_to_bf16(x[i]);
    if (p && n) tg_ok(g, fat5__dev_upload(g->ctx, p, h, n * 2));
    return g->err ? 0 : p;
}

// Download after synchronising (so that errors of the kernels show up here, by name).
static void tg_down_f32(tg *g, float *x, fat5__dptr p, size_t n) {
    if (g->err || !tg_ok(g, fat5__dev_sync(g->ctx))) return;
    if (n) tg_ok(g, fat5__dev_download(g->ctx, x, p, n * 4));
}
static void tg_down_act(tg *g, float *x, fat5__dptr p, size_t n) {
    uint16_t *h;
    size_t i;
    if (!g->bf16) {
        tg_down_f32(g, x, p, n);
        return;
    }
    if (g->err || !tg_ok(g, fat5__dev_sync(g->ctx))) return;
    h = (uint16_t *)tg_hmem(g, n * 2);
    if (n && !tg_ok(g, fat5__dev_download(g->ctx, h, p, n * 2))) return;
    for (i = 0; i < n; i++) x[i] = fat5__bf16_to_f32(h[i]);
}

// In a bf16 context, round host inputs of the activation dtype to bf16 so that the CPU oracle
// reads exactly what the GPU reads.
static void tg_round(const tg *g, float *x, size_t n) {
    size_t i;
    if (g->bf16)
        for (i = 0; i < n; i++) x[i] = fat5__bf16_to_f32(fat5__f32_to_bf16(x[i]));
}

// uniform in [-scale, scale]
static void tg_fill(fat5_rng *r, float *x, size_t n, double scale) {
    size_t i;
    for (i = 0; i < n; i++) x[i] = (float)((2.0 * fat5_rng_uniform(r) - 1.0) * scale);
}

static double tg_maxabs(const float *x, size_t n) {
    double m = 0;
    size_t i;
    for (i = 0; i < n; i++)
        if (fabs((double)x[i]) > m) m = fabs((double)x[i]);
    return m;
}

// largest 2-norm of `rows` rows of n floats
static double tg_maxnorm(const float *x, int64_t rows, int n) {
    double m = 0;
    int64_t r;
    int j;
    for (r = 0; r < rows; r++) {
        double s = 0;
        for (j = 0; j < n; j++) s += (double)x[r * n + j] * x[r * n + j];
        if (s > m) m = s;
    }
    return sqrt(m);
}

// got vs ref with the tolerances of the header comment: act != 0 for an activation-dtype output;
// rtol 0 for the default; scale 0 for max|ref| (else the size of the terms that cancel in ref)
static void tg_close_at(tg *g, int line, const char *what, const float *got, const float *ref, size_t n,
                        int act, double rtol, double scale) {
    char name[240];
    if (g->err) return;
    snprintf(name, sizeof name, "[%s] %s", g->mode, what);
    if (rtol <= 0) rtol = act && g->bf16 ? TG_R16 : TG_R32;
    if (scale <= 0) scale = tg_maxabs(ref, n);
    fat5_check_close_at(g->T, __FILE__, line, name, got, ref, n, TG_A * scale, rtol);
}
#define tg_close(g, what, got, ref, n, act) tg_close_at((g), __LINE__, (what), (got), (ref), (n), (act), 0, 0)

// The attention output of the tensor-core forward (bf16, fat5__gpu_attn_fwd_tc_smem): P is rounded
// to bf16 before P V, each weight by at most 2^-8 of itself (8 significant bits), so o moves by at
// most 2^-8 max|v| (the weights sum to 1; l sums the unrounded weights) before its own rounding
// (TG_R16); ex2.approx and the fp32 sums of q.k in another order add ~1e-6 relative to the weights
// (within TG_A). Against the FMA kernel's o, both outputs are rounded: rtol 2 TG_R16 (rounds 2).
#define TG_ATC (1.0 / 256)
static void tg_close_tc_at(tg *g, int line, const char *what, const float *got, const float *ref, size_t n,
                           double vmax, double scale, int rounds) {
    char name[240];
    if (g->err) return;
    snprintf(name, sizeof name, "[%s] %s", g->mode, what);
    fat5_check_close_at(g->T, __FILE__, line, name, got, ref, n, TG_ATC * vmax + TG_A * scale, rounds * TG_R16);
}

// bit-for-bit equality (copies and conversions; NaNs compare by bits)
static void tg_same_at(tg *g, int line, const char *what, const float *got, const float *ref, size_t n) {
    size_t i, bad = 0;
    if (g->err) return;
    for (i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
            if (bad < 5) printf("  [%s] %s[%zu]: got %.9g, want %.9g\n", g->mode, what, i, got[i], ref[i]);
            bad++;
        }
    if (bad)
        fat5_test_fail(g->T, __FILE__, line, "[%s] %s: %zu of %zu elements differ", g->mode, what, bad, n);
}
#define tg_same(g, what, got, ref, n) tg_same_at((g), __LINE__, (what), (got), (ref), (n))

// ----- attention.cu -----

// FIRE's parameter block with weights that make the bias matter (scores of order 1..10) and the
// given c, L_multiplier
static void tg_fire_params(fat5_rng *rng, float *P, int H, int W, float c, float lm) {
    tg_fill(rng, P, (size_t)FAT5__FIRE_NUMEL(H, W), 1.0);
    tg_fill(rng, P, (size_t)W, 3.0);                                           // w1: kinks inside u's range
    tg_fill(rng, P + FAT5__FIRE_W2(W), (size_t)H * (size_t)W, 4.0 / sqrt((double)W));
    P[FAT5__FIRE_C(H, W)] = c;
    P[FAT5__FIRE_LM(H, W)] = lm;
}

// A packed batch for the attention ops: n_seq sequences of len_q[s] queries (and as many keys in
// self-attention), H heads of head dim dk, and the parameters of every position scheme a case may
// run it with.
typedef struct tg_attn_cfg {
    int n_seq;
    const int *len_q, *len_k;  // len_k: cross-attention's keys (NULL: the same lengths)
    int H, dk;
    int nb, md;  // T5's bucket count and max distance
    int W;       // FIRE's MLP width (FIRE's L0 is 16)
    float lm;    // FIRE's L_multiplier: 0.931 (threshold 14.896), 0.75 (12: a tie at i = 12)
    int db_inc;  // bias gradient check: 0: the accumulated gradient, rtol TG_RDB (atol TG_A of its
                 // largest); 1: the increments against the CPU's, TG_RDB of the largest (atol and rtol)
} tg_attn_cfg;

static const char *tg_scheme_name(int kind, int t5) {
    return kind & FAT5__ATTN_FIRE ? "fire"
           : kind & FAT5__ATTN_ALIBI_ASYM ? "alibi-asym"
           : kind & FAT5__ATTN_ALIBI ? "alibi"
           : t5 ? "t5" : "none";
}

// "mask scheme" of an attention kind, for messages
static const char *tg_kind_name(char *buf, size_t n, int kind, int t5) {
    static const char *const masks[] = {"cross", "bidir", "causal", "?"};
    snprintf(buf, n, "%s %s", masks[kind & FAT5__ATTN_MASK], tg_scheme_name(kind, t5));
    return buf;
}

// One configuration and kind (mask | scheme bits | pattern; t5: T5's bucket table when no scheme
// bit, else no bias; gsz: the pattern's g, the prefix length or the global block size): forward,
// then the backward from the CPU's o and lse: delta, dq with the bias gradient (T5: the table's,
// [2, nb, H] with transient-global keys and their own table; FIRE: its parameter block's, through
// fire_reduce; ALiBi: a dbias that must stay untouched), dk, dv; dq and the bias gradient again
// (the same bits: no atomics). Transient-global keys: sequence s gets len_q[s] / gsz random global
// rows of k and v after the token rows (cu_g), which dk/dv covers through the extended k_seq.
static void tg_attn_case_g(tg *g, const tg_attn_cfg *c, int kind, int t5, int gsz, fat5_rng *rng) {
    const int H = c->H, dk = c->dk, mask = kind & FAT5__ATTN_MASK;
    const int fire = (kind & FAT5__ATTN_FIRE) != 0, alibi = (kind & FAT5__ATTN_ALIBI) != 0;
    const int tglob = (kind & FAT5__ATTN_TGLOBAL) != 0, own = tglob && !(kind & FAT5__ATTN_GSHARED);
    const int nb = fire ? c->W : c->nb, md = fire ? 16 : c->md;
    const size_t nbias = fire ? (size_t)FAT5__FIRE_NUMEL(H, nb) : (size_t)nb * (size_t)H * (own ? 2u : 1u);
    const size_t nscr = fire ? (size_t)(FAT5__GPU_DBIAS_BLOCKS + 1) * (size_t)H * (size_t)FAT5__FIRE_SHARES(nb)
                             : (size_t)FAT5__GPU_DBIAS_BLOCKS * nbias;
    const size_t nlut = (size_t)(md > 0 ? md : 1);
    int s, i, tc, wg, pass, has_bias = fire || t5, has_grad = fire || t5 || alibi;
    int32_t *cu_q = tg_i(g, (size_t)c->n_seq + 1), *cu_k = tg_i(g, (size_t)c->n_seq + 1);
    int32_t *q_seq, *k_seq, *lut = tg_i(g, nlut), *cu_g = tg_i(g, (size_t)c->n_seq + 1);
    int64_t Tq, Tk;  // Tk: the key rows, transient-global rows included
    size_t nq, nk;
    float *q, *k, *v, *bias = NULL, *o, *oref, *lse, *lseref, *dout, *dq, *dqref, *dkk, *dkref, *dv, *dvref;
    float *g0, *gref, *ggot, *delta, *deltaref;
    fat5__dptr qd, kd, vd, biasd = 0, lutd = 0, cuqd, cukd, qsd, ksd, od, lsed, doutd, deltad, dqd, dkd, dvd;
    fat5__dptr gd = 0, gd2 = 0, scd = 0, dq2d = 0, dk2d = 0, dv2d = 0, cugd = 0;
    int tcq, tckv, wgkv;
    // a kept probability's multiplier (1 without dropout): o, dv and dS terms grow by it at most
    const double ds_ = g->drop.thresh ? (double)g->drop.scale : 1.0;
    char what[200], tag[128], kn[32];
    cu_q[0] = cu_k[0] = 0;
    for (s = 0; s < c->n_seq; s++) {
        cu_q[s + 1] = cu_q[s] + c->len_q[s];
        cu_k[s + 1] = cu_k[s] + (mask == FAT5__ATTN_CROSS && c->len_k ? c->len_k[s] : c->len_q[s]);
    }
    Tq = cu_q[c->n_seq];
    cu_g[0] = cu_k[c->n_seq];  // the global rows follow the token rows
    for (s = 0; s < c->n_seq; s++) cu_g[s + 1] = cu_g[s] + (tglob ? c->len_q[s] / gsz : 0);
    Tk = cu_g[c->n_seq];
    nq = (size_t)(Tq * H * dk);
    nk = (size_t)(Tk * H * dk);
    q_seq = tg_i(g, (size_t)Tq);
    k_seq = tg_i(g, (size_t)(Tk ? Tk : 1));
    for (s = 0; s < c->n_seq; s++) {
        for (i = cu_q[s]; i < cu_q[s + 1]; i++) q_seq[i] = s;
        for (i = cu_k[s]; i < cu_k[s + 1]; i++) k_seq[i] = s;
        for (i = cu_g[s]; i < cu_g[s + 1]; i++) k_seq[i] = s;
    }
    for (i = 0; i < md; i++) lut[i] = fat5__rel_bucket(-(int64_t)i, mask == FAT5__ATTN_BIDIR, nb, md);
    q = tg_f(g, nq);
    k = tg_f(g, nk);
    v = tg_f(g, nk);
    o = tg_f(g, nq);
    oref = tg_f(g, nq);
    lse = tg_f(g, (size_t)(Tq * H));
    lseref = tg_f(g, (size_t)(Tq * H));
    dout = tg_f(g, nq);
    dq = tg_f(g, nq);
    dqref = tg_f(g, nq);
    dkk = tg_f(g, nk);
    dkref = tg_f(g, nk);
    dv = tg_f(g, nk);
    dvref = tg_f(g, nk);
    g0 = tg_f(g, nbias);
    gref = tg_f(g, nbias);
    ggot = tg_f(g, nbias);
    delta = tg_f(g, (size_t)(Tq * H));
    deltaref = tg_f(g, (size_t)(Tq * H));
    // scores of order 1..10 (no 1/sqrt(dk) in T5): entries ~ 1.5/dk^(1/4) give q.k with std ~ 1
    tg_fill(rng, q, nq, 1.7 / sqrt(sqrt((double)dk)));
    tg_fill(rng, k, nk, 1.7 / sqrt(sqrt((double)dk)));
    tg_fill(rng, v, nk, 1.0);
    tg_fill(rng, dout, nq, 1.0);
    tg_round(g, q, nq);
    tg_round(g, k, nk);
    tg_round(g, v, nk);
    tg_round(g, dout, nq);
    if (has_bias) {
        bias = tg_f(g, nbias);
        if (fire)
            tg_fire_params(rng, bias, H, nb, 0.137f, c->lm);
        else
            tg_fill(rng, bias, nbias, 2.0);
    }
    tg_fill(rng, g0, nbias, 1.0);  // the bias gradient accumulates
    memcpy(gref, g0, nbias * sizeof(float));
    snprintf(tag, sizeof tag, "kind %d (%s) g=%d H=%d dk=%d nb=%d md=%d Tq=%lld Tk=%lld", kind,
             tg_kind_name(kn, sizeof kn, kind, t5), gsz, H, dk, nb, md, (long long)Tq, (long long)Tk);

    // forward
    fat5__cpu_attn_fwd(g->ctx, A_(oref), A_(lseref), A_(q), A_(k), A_(v), A_(bias), A_(lut), A_(cu_q), A_(cu_k),
                       A_(q_seq), Tq, H, dk, kind, nb, md, gsz, tglob ? A_(cu_g) : 0, g->drop);
    qd = tg_up_act(g, q, nq);
    kd = tg_up_act(g, k, nk);
    vd = tg_up_act(g, v, nk);
    if (bias) biasd = tg_up_f32(g, bias, nbias);
    if (t5) lutd = tg_up_i32(g, lut, nlut);  // read with T5's table only
    cuqd = tg_up_i32(g, cu_q, (size_t)c->n_seq + 1);
    // self-attention passes one buffer for both, as the model does (the sm_90a kernels need it)
    cukd = mask != FAT5__ATTN_CROSS && !tglob ? cuqd : tg_up_i32(g, cu_k, (size_t)c->n_seq + 1);
    qsd = tg_up_i32(g, q_seq, (size_t)Tq);
    ksd = tg_up_i32(g, k_seq, (size_t)(Tk ? Tk : 1));
    if (tglob) cugd = tg_up_i32(g, cu_g, (size_t)c->n_seq + 1);
    od = tg_dev(g, nq * tg_act(g));
    lsed = tg_dev(g, (size_t)(Tq * H) * 4);
    if (g->err) return;
    if (!tg_ok(g, fat5__gpu_attn_fwd(g->ctx, od, lsed, qd, kd, vd, biasd, lutd, cuqd, cukd, qsd, Tq, H, dk, kind, nb,
                                     md, gsz, cugd, g->drop)))
        return;
    tg_down_act(g, o, od, nq);
    tg_down_f32(g, lse, lsed, (size_t)(Tq * H));
    // queries without keys (a cross sequence with no keys): o = 0 and lse = -inf on both sides
    for (i = 0; i < Tq * H; i++)
        if (isinf(lseref[i]) && lseref[i] < 0) {
            FAT5_CHECK_MSG(g->T, isinf(lse[i]) && lse[i] < 0, "[%s] attn_fwd %s: lse[%d] = %g, want -inf", g->mode,
                           tag, i, lse[i]);
            lse[i] = lseref[i] = 0.0f;
        }
    // with dropout a pattern or FIRE takes the FMA kernels (fat5__gpu_attn_tc_drop_ok)
    tc = fat5__gpu_attn_fwd_tc_smem(g->ctx, od, qd, kd, vd, Tq, dk, kind, biasd, nb, md) > 0 &&
         fat5__gpu_attn_tc_drop_ok(kind, g->drop);
    wg = fat5__gpu_attn_fwd_wg_smem(g->ctx, od, qd, kd, vd, cuqd, cukd, Tq, dk, kind, biasd, md) > 0;
    g->tc_cases += tc;
    g->wg_cases += wg;
    snprintf(what, sizeof what, "attn_fwd%s o %s", wg ? " (sm_90a)" : tc ? " (tensor cores)" : "", tag);
    if (tc)
        tg_close_tc_at(g, __LINE__, what, o, oref, nq, ds_ * tg_maxabs(v, nk), fmax(tg_maxabs(oref, nq), ds_ * tg_maxabs(v, nk)), 1);
    else
        tg_close_at(g, __LINE__, what, o, oref, nq, 1, 0, fmax(tg_maxabs(oref, nq), ds_ * tg_maxabs(v, nk)));
    snprintf(what, sizeof what, "attn_fwd%s lse %s", wg ? " (sm_90a)" : tc ? " (tensor cores)" : "", tag);
    tg_close(g, what, lse, lseref, (size_t)(Tq * H), 0);
    // The kernel beneath on the same inputs, this one against it (both rounded: twice the tensor
    // cores' bound): pass 0 the mma.sync kernel under the sm_90a one (FAT5_ATTN_WG=0's path), pass 1
    // the FMA kernel under the tensor-core ones (FAT5_ATTN_TC=0's)
    for (pass = 0; pass < 2; pass++) {
        int *sw = pass == 0 ? &g->ctx->gpu->attn_wg : &g->ctx->gpu->attn_tc;
        const char *vs = pass == 0 ? "sm_90a vs mma.sync" : "tensor cores vs FMA";
        float *o2, *lse2;
        int ok;
        if (!(pass == 0 ? wg : tc)) continue;
        o2 = tg_f(g, nq);
        lse2 = tg_f(g, (size_t)(Tq * H));
        if (g->err) return;
        *sw = 0;
        ok = tg_ok(g, fat5__gpu_attn_fwd(g->ctx, od, lsed, qd, kd, vd, biasd, lutd, cuqd, cukd, qsd, Tq, H, dk, kind,
                                         nb, md, gsz, cugd, g->drop));
        *sw = 1;
        if (!ok) return;
        tg_down_act(g, o2, od, nq);
        tg_down_f32(g, lse2, lsed, (size_t)(Tq * H));
        for (i = 0; i < Tq * H; i++)
            if (isinf(lse2[i]) && lse2[i] < 0) lse2[i] = 0.0f;  // as lse's above
        snprintf(what, sizeof what, "attn_fwd o, %s %s", vs, tag);
        tg_close_tc_at(g, __LINE__, what, o, o2, nq, ds_ * tg_maxabs(v, nk), fmax(tg_maxabs(o2, nq), ds_ * tg_maxabs(v, nk)), 2);
        snprintf(what, sizeof what, "attn_fwd lse, %s %s", vs, tag);
        tg_close(g, what, lse, lse2, (size_t)(Tq * H), 0);
    }
    for (i = 0; i < Tq * H; i++) lse[i] = lseref[i];  // restore the -inf entries for the backward

    // backward, from the CPU's o (rounded like a bf16 activation) and lse
    tg_round(g, oref, nq);
    fat5__cpu_attn_bwd_delta(g->ctx, A_(deltaref), A_(oref), A_(dout), Tq, H, dk);
    fat5__cpu_attn_bwd_dq(g->ctx, A_(dqref), A_(has_grad ? gref : NULL), A_(dout), A_(lse), A_(deltaref), A_(q),
                          A_(k), A_(v), A_(bias), A_(lut), A_(cu_q), A_(cu_k), A_(q_seq), Tq, H, dk, kind, nb, md,
                          gsz, tglob ? A_(cu_g) : 0, 0, g->drop);
    fat5__cpu_attn_bwd_dkv(g->ctx, A_(dkref), A_(dvref), A_(dout), A_(lse), A_(deltaref), A_(q), A_(k), A_(v),
                           A_(bias), A_(lut), A_(cu_q), A_(cu_k), A_(k_seq), Tk, H, dk, kind, nb, md, gsz,
                           tglob ? A_(cu_g) : 0, g->drop);
    od = tg_up_act(g, oref, nq);
    if (!g->err) tg_ok(g, fat5__dev_upload(g->ctx, lsed, lse, (size_t)(Tq * H) * 4));
    doutd = tg_up_act(g, dout, nq);
    deltad = tg_dev(g, (size_t)(Tq * H) * 4);
    dqd = tg_dev(g, nq * tg_act(g));
    dq2d = tg_dev(g, nq * tg_act(g));  // for the determinism rerun
    dkd = tg_dev(g, nk * tg_act(g));
    dvd = tg_dev(g, nk * tg_act(g));
    if (has_grad) {
        gd = tg_up_f32(g, g0, nbias);
        gd2 = tg_up_f32(g, g0, nbias);
        scd = tg_dev(g, nscr * 4);
    }
    dk2d = tg_dev(g, nk * tg_act(g));  // dk, dv of the determinism rerun
    dv2d = tg_dev(g, nk * tg_act(g));
    if (g->err) return;
    // the tensor-core backward (bf16; dq with FIRE stays on the FMA kernel)
    tcq = fat5__gpu_attn_bwd_tc_smem(g->ctx, 0, dqd, 0, qd, kd, vd, doutd, Tq, dk, kind, biasd, nb, md,
                                     gd != 0 && !alibi) > 0 && fat5__gpu_attn_tc_drop_ok(kind, g->drop);
    tckv = fat5__gpu_attn_bwd_tc_smem(g->ctx, 1, dkd, dvd, qd, kd, vd, doutd, Tk, dk, kind, biasd, nb, md, 0) > 0 &&
           fat5__gpu_attn_tc_drop_ok(kind, g->drop);
    wgkv = fat5__gpu_attn_bwd_dkv_wg_smem(g->ctx, dkd, dvd, qd, kd, vd, doutd, cuqd, cukd, Tk, dk, kind, biasd, md) > 0;
    g->tc_bwd_cases += tcq + tckv;
    g->wg_bwd_cases += wgkv;
    if (!tg_ok(g, fat5__gpu_attn_bwd_delta(g->ctx, deltad, od, doutd, Tq, H, dk)) ||
        !tg_ok(g, fat5__gpu_attn_bwd_dq(g->ctx, dqd, gd, doutd, lsed, deltad, qd, kd, vd, biasd, lutd, cuqd, cukd,
                                        qsd, Tq, H, dk, kind, nb, md, gsz, cugd, scd, g->drop)) ||
        !tg_ok(g, fat5__gpu_attn_bwd_dkv(g->ctx, dkd, dvd, doutd, lsed, deltad, qd, kd, vd, biasd, lutd, cuqd, cukd,
                                         ksd, Tk, H, dk, kind, nb, md, gsz, cugd, g->drop)) ||
        !tg_ok(g, fat5__gpu_attn_bwd_dq(g->ctx, dq2d, gd2, doutd, lsed, deltad, qd, kd, vd, biasd, lutd, cuqd, cukd,
                                        qsd, Tq, H, dk, kind, nb, md, gsz, cugd, scd, g->drop)) ||
        !tg_ok(g, fat5__gpu_attn_bwd_dkv(g->ctx, dk2d, dv2d, doutd, lsed, deltad, qd, kd, vd, biasd, lutd, cuqd,
                                         cukd, ksd, Tk, H, dk, kind, nb, md, gsz, cugd, g->drop)))
        return;
    tg_down_f32(g, delta, deltad, (size_t)(Tq * H));
    tg_down_act(g, dq, dqd, nq);
    tg_down_act(g, dkk, dkd, nk);
    tg_down_act(g, dv, dvd, nk);
    // scales of the terms that cancel (see the header): ds = p (dout.v - delta) with |dout.v|,
    // |delta| <= |dout| |v| (2-norms of head rows); o and dv are weighted sums of v and dout rows.
    // On tensor cores dS (in dq and dk) and P (in dv) are rounded to bf16 before their products,
    // each term by at most 2^-8 (TG_ATC) of itself: dq_i moves by at most TG_ATC max|k| sum_j
    // |ds_ij| <= TG_ATC max|k| 2 |dout| |v|; dk_j by TG_ATC max|q| 2 |dout| |v| c_j and dv_j by
    // TG_ATC max|dout| c_j, c_j = sum_i p_ij the key's column sum (the CPU's dv for dout = 1).
    // Under dropout of scale ds_ (kept terms multiplied by it): |m dout.v| <= ds_ |dout| |v|, so 2
    // becomes 1 + ds_, o's and dv's terms grow by ds_ (c_j from the CPU with the same masks).
    {
        double nd = tg_maxnorm(dout, Tq * H, dk), nv = tg_maxnorm(v, Tk * H, dk), no = tg_maxnorm(oref, Tq * H, dk);
        double sq = fmax(tg_maxabs(dqref, nq), ds_ * nd * nv * tg_maxabs(k, nk));
        double sk = fmax(tg_maxabs(dkref, nk), ds_ * nd * nv * tg_maxabs(q, nq));
        double sv = fmax(tg_maxabs(dvref, nk), tg_maxabs(dout, nq)), cmax = 0, eq = 0, ek = 0, ev = 0;
        float *dq2 = tg_f(g, nq), *dk2 = tg_f(g, nk), *dv2 = tg_f(g, nk);
        if (g->err) return;
        if (tcq || tckv) {
            float *ones = tg_f(g, nq), *csum = tg_f(g, nk), *junk = tg_f(g, nk);
            size_t e;
            if (g->err) return;
            for (e = 0; e < nq; e++) ones[e] = 1.0f;
            fat5__cpu_attn_bwd_dkv(g->ctx, A_(junk), A_(csum), A_(ones), A_(lse), A_(deltaref), A_(q), A_(k), A_(v),
                                   A_(bias), A_(lut), A_(cu_q), A_(cu_k), A_(k_seq), Tk, H, dk, kind, nb, md, gsz,
                                   tglob ? A_(cu_g) : 0, g->drop);
            cmax = tg_maxabs(csum, nk);
            eq = tcq ? TG_ATC * tg_maxabs(k, nk) * (1.0 + ds_) * nd * nv : 0;
            ek = tckv ? TG_ATC * tg_maxabs(q, nq) * (1.0 + ds_) * nd * nv * cmax : 0;
            ev = tckv ? TG_ATC * tg_maxabs(dout, nq) * cmax : 0;
        }
        snprintf(what, sizeof what, "attn_bwd_delta %s", tag);
        tg_close_at(g, __LINE__, what, delta, deltaref, (size_t)(Tq * H), 0, 0,
                    fmax(tg_maxabs(deltaref, (size_t)(Tq * H)), nd * no));
        snprintf(what, sizeof what, "[%s] attn_bwd_dq%s %s", g->mode, tcq ? " (tensor cores)" : "", tag);
        fat5_check_close_at(g->T, __FILE__, __LINE__, what, dq, dqref, nq, eq + TG_A * sq, g->bf16 ? TG_R16 : TG_R32);
        snprintf(what, sizeof what, "[%s] attn_bwd_dkv%s dk %s", g->mode,
                 wgkv ? " (sm_90a)" : tckv ? " (tensor cores)" : "", tag);
        fat5_check_close_at(g->T, __FILE__, __LINE__, what, dkk, dkref, nk, ek + TG_A * sk, g->bf16 ? TG_R16 : TG_R32);
        snprintf(what, sizeof what, "[%s] attn_bwd_dkv%s dv %s", g->mode,
                 wgkv ? " (sm_90a)" : tckv ? " (tensor cores)" : "", tag);
        fat5_check_close_at(g->T, __FILE__, __LINE__, what, dv, dvref, nk, ev + TG_A * sv, g->bf16 ? TG_R16 : TG_R32);
        // the same bits on a second run (no atomics anywhere)
        tg_down_act(g, dq2, dq2d, nq);
        tg_down_act(g, dk2, dk2d, nk);
        tg_down_act(g, dv2, dv2d, nk);
        snprintf(what, sizeof what, "attn_bwd_dq rerun dq %s", tag);
        tg_same(g, what, dq2, dq, nq);
        snprintf(what, sizeof what, "attn_bwd_dkv rerun dk %s", tag);
        tg_same(g, what, dk2, dkk, nk);
        snprintf(what, sizeof what, "attn_bwd_dkv rerun dv %s", tag);
        tg_same(g, what, dv2, dv, nk);
        if ((tcq || tckv) && !g->err) {
            // the FMA kernels on the same inputs (FAT5_ATTN_TC=0's path), the tensor-core ones
            // against them: both outputs rounded (rtol 2 TG_R16), the tensor cores' own bound
            fat5__dptr gd3 = has_grad ? tg_up_f32(g, g0, nbias) : 0;
            float *g3 = tg_f(g, nbias);
            int ok;
            if (g->err) return;
            g->ctx->gpu->attn_tc = 0;
            ok = tg_ok(g, fat5__gpu_attn_bwd_dq(g->ctx, dq2d, gd3, doutd, lsed, deltad, qd, kd, vd, biasd, lutd, cuqd,
                                                cukd, qsd, Tq, H, dk, kind, nb, md, gsz, cugd, scd, g->drop)) &&
                 tg_ok(g, fat5__gpu_attn_bwd_dkv(g->ctx, dk2d, dv2d, doutd, lsed, deltad, qd, kd, vd, biasd, lutd,
                                                 cuqd, cukd, ksd, Tk, H, dk, kind, nb, md, gsz, cugd, g->drop));
            g->ctx->gpu->attn_tc = 1;
            if (!ok) return;
            tg_down_act(g, dq2, dq2d, nq);
            tg_down_act(g, dk2, dk2d, nk);
            tg_down_act(g, dv2, dv2d, nk);
            snprintf(what, sizeof what, "[%s] attn_bwd_dq, tensor cores vs FMA %s", g->mode, tag);
            fat5_check_close_at(g->T, __FILE__, __LINE__, what, dq, dq2, nq, eq + TG_A * sq, 2 * TG_R16);
            snprintf(what, sizeof what, "[%s] attn_bwd_dkv dk, tensor cores vs FMA %s", g->mode, tag);
            fat5_check_close_at(g->T, __FILE__, __LINE__, what, dkk, dk2, nk, ek + TG_A * sk, 2 * TG_R16);
            snprintf(what, sizeof what, "[%s] attn_bwd_dkv dv, tensor cores vs FMA %s", g->mode, tag);
            fat5_check_close_at(g->T, __FILE__, __LINE__, what, dv, dv2, nk, ev + TG_A * sv, 2 * TG_R16);
            if (wgkv && !g->err) {
                // the mma.sync kernel under the sm_90a one (FAT5_ATTN_WG=0's path) on the same inputs
                g->ctx->gpu->attn_wg = 0;
                ok = tg_ok(g, fat5__gpu_attn_bwd_dkv(g->ctx, dk2d, dv2d, doutd, lsed, deltad, qd, kd, vd, biasd, lutd,
                                                     cuqd, cukd, ksd, Tk, H, dk, kind, nb, md, gsz, cugd,
                                                     g->drop));
                g->ctx->gpu->attn_wg = 1;
                if (!ok) return;
                tg_down_act(g, dk2, dk2d, nk);
                tg_down_act(g, dv2, dv2d, nk);
                snprintf(what, sizeof what, "[%s] attn_bwd_dkv dk, sm_90a vs mma.sync %s", g->mode, tag);
                fat5_check_close_at(g->T, __FILE__, __LINE__, what, dkk, dk2, nk, 2 * ek + TG_A * sk, 2 * TG_R16);
                snprintf(what, sizeof what, "[%s] attn_bwd_dkv dv, sm_90a vs mma.sync %s", g->mode, tag);
                fat5_check_close_at(g->T, __FILE__, __LINE__, what, dv, dv2, nk, 2 * ev + TG_A * sv, 2 * TG_R16);
            }
            if (gd3 && tcq && !alibi) {
                // both sum fp32 dS per bucket (no bf16 rounding on this path): the CPU's tolerance
                tg_down_f32(g, g3, gd3, nbias);
                tg_down_f32(g, ggot, gd, nbias);
                snprintf(what, sizeof what, "[%s] attn_bwd_dq bias gradient, tensor cores vs FMA %s", g->mode, tag);
                fat5_check_close_at(g->T, __FILE__, __LINE__, what, ggot, g3, nbias,
                                    TG_RDB * tg_maxabs(g3, nbias) + TG_A, TG_RDB);
            }
        }
    }
    if (has_grad) {
        float *g2 = tg_f(g, nbias), *inc = tg_f(g, nbias), *incref = tg_f(g, nbias);
        size_t e;
        tg_down_f32(g, ggot, gd, nbias);
        tg_down_f32(g, g2, gd2, nbias);
        snprintf(what, sizeof what, "attn_bwd_dq rerun bias gradient %s", tag);
        tg_same(g, what, g2, ggot, nbias);  // deterministic: the same bits
        if (alibi) {  // no parameters: the gradient buffer is left alone on both backends
            snprintf(what, sizeof what, "attn_bwd_dq ALiBi dbias untouched %s", tag);
            tg_same(g, what, ggot, g0, nbias);
            tg_same(g, what, gref, g0, nbias);
        } else if (!c->db_inc) {
            snprintf(what, sizeof what, "attn_bwd_dq dbias %s", tag);
            tg_close_at(g, __LINE__, what, ggot, gref, nbias, 0, TG_RDB, 0);
        } else if (!g->err) {
            // the increments against the CPU's: TG_RDB of the largest (the oracle sums ~10^4..10^5
            // scores per entry; db2 cancels to ~0 exactly, as every row's ds sum to 0)
            for (e = 0; e < nbias; e++) {
                inc[e] = ggot[e] - g0[e];
                incref[e] = gref[e] - g0[e];
            }
            snprintf(what, sizeof what, "[%s] attn_bwd_dq bias gradient %s", g->mode, tag);
            if (FAT5__ATTN_RADIUS(kind) == 0) {
                // a window of radius 0: every query's one key is itself, p = 1, o = v and ds = dout.v
                // - dout.o = 0: the gradient is zero, the GPU's the rounding of Tq such differences of
                // two fp32 dot products, at most Tq 2 dk eps |dout| |v| (the CPU's, in double, ~0)
                double bound = (double)Tq * 2.0 * dk * 0x1p-23 * tg_maxabs(dout, nq) * ds_ * tg_maxabs(v, nk);
                FAT5_CHECK_MSG(g->T, tg_maxabs(inc, nbias) <= bound && tg_maxabs(incref, nbias) <= bound,
                               "%s: radius 0 gives |%g| (CPU |%g|), above fp32 rounding %g", what,
                               tg_maxabs(inc, nbias), tg_maxabs(incref, nbias), bound);
            } else {
                fat5_check_close_at(g->T, __FILE__, __LINE__, what, inc, incref, nbias,
                                    TG_RDB * tg_maxabs(incref, nbias), TG_RDB);
            }
        }
    }
}

static void tg_attn_case(tg *g, const tg_attn_cfg *c, int kind, int t5, fat5_rng *rng) {
    tg_attn_case_g(g, c, kind, t5, 0, rng);
}

// Every configuration with every kind (mask | scheme, t5), one case's buffers at a time.
static void tg_attn_cases(tg *g, const tg_attn_cfg *cfgs, size_t ncfg, const int (*kinds)[2], size_t nkind,
                          fat5_rng *rng) {
    size_t ci, ki;
    for (ci = 0; ci < ncfg; ci++)
        for (ki = 0; ki < nkind && !g->err; ki++) {
            int ndev = g->ndev, nhost = g->nhost;
            tg_attn_case(g, &cfgs[ci], kinds[ki][0], kinds[ki][1], rng);
            tg_release(g, ndev, nhost);
        }
}

// T5's kinds: cross-attention (no bias), bidirectional and causal self-attention with the buckets
static const int tg_t5_kinds[][2] = {{FAT5__ATTN_CROSS, 0}, {FAT5__ATTN_BIDIR, 1}, {FAT5__ATTN_CAUSAL, 1}};
#define TG_NT5 (sizeof tg_t5_kinds / sizeof tg_t5_kinds[0])

static void t_gpu_attn(fat5_test *T) {
    // packed sequences of very different lengths, a one-token one among them; for cross-attention
    // other key lengths; the head dims the brief names (8, 64, 100, 128)
    static const int lq[] = {1, 300, 7, 64}, lk[] = {5, 129, 1, 33};
    // n_seq, len_q, len_k, H, dk, nb, md, W, lm, db_inc
    static const tg_attn_cfg cfgs[] = {{4, lq, lk, 2, 8, 32, 128, 0, 0.0f, 0},
                                       {4, lq, lk, 2, 64, 32, 128, 0, 0.0f, 0},
                                       {4, lq, lk, 2, 100, 32, 128, 0, 0.0f, 0},
                                       {4, lq, lk, 2, 128, 32, 128, 0, 0.0f, 0}};
    // FAT5_TEST_ATTN_MODE=0 / 1: fp32 / bf16 alone (e.g. under racecheck, which is slow)
    const char *only_mode = getenv("FAT5_TEST_ATTN_MODE");
    int mode;
    for (mode = 0; mode < 2; mode++) {
        if (only_mode && atoi(only_mode) != mode) continue;
        fat5_rng rng = fat5_rng_init(600 + (uint64_t)mode);
        tg g;
        if (!tg_begin(&g, T, mode)) return;
        tg_attn_cases(&g, cfgs, sizeof cfgs / sizeof cfgs[0], tg_t5_kinds, TG_NT5, &rng);
        tg_end(&g);
    }
}

// Head dims 1, 33 (no vector loads) and 256 (the largest); bucket tables too large for shared
// memory (max_distance 20000: the global-memory fallback); odd bucket counts and a short lookup
// table (max_distance 9, so most distances saturate); a cross sequence with no keys at all; many
// sequences of one token.
static void t_gpu_attn_edge(fat5_test *T) {
    static const int lq1[] = {1, 40, 3}, lk1[] = {17, 1, 2};
    static const int lq2[] = {2, 130, 1}, lk2[] = {0, 70, 9};
    static int ones[64];
    // n_seq, len_q, len_k, H, dk, nb, md, W, lm, db_inc
    static const tg_attn_cfg cfgs[] = {{3, lq1, lk1, 3, 1, 32, 128, 0, 0.0f, 0},
                                       {3, lq1, lk1, 3, 33, 7, 20, 0, 0.0f, 0},
                                       {3, lq1, lk1, 1, 256, 32, 128, 0, 0.0f, 0},
                                       {3, lq2, lk2, 2, 64, 32, 20000, 0, 0.0f, 0},
                                       {3, lq2, lk2, 2, 100, 16, 9, 0, 0.0f, 0},
                                       {64, ones, ones, 5, 64, 32, 128, 0, 0.0f, 0}};
    int mode, i;
    for (i = 0; i < 64; i++) ones[i] = 1;
    for (mode = 0; mode < 2; mode++) {
        fat5_rng rng = fat5_rng_init(700 + (uint64_t)mode);
        tg g;
        if (!tg_begin(&g, T, mode)) return;
        tg_attn_cases(&g, cfgs, sizeof cfgs / sizeof cfgs[0], tg_t5_kinds, TG_NT5, &rng);
        // the launcher refuses head dims above 256 and bad head counts
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 257, 0, 32, 128, 0, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 64, 0, 32, 128, 0, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        tg_end(&g);
    }
}

// ----- mm.cu: norm_mm -----

typedef struct tg_nmm_cfg {
    int T, N, K, S;  // rows, outputs per weight, inputs, weights (act < 0)
    int act;         // -1: plain products; else the activation (gated when S == 2)
    int cache;       // act < 0, S == 3: the second and third outputs go to cache rows
} tg_nmm_cfg;

// norm_mm against the CPU twin. The GPU rounds the normalised rows to the activation dtype before
// the products (as rmsnorm_fwd + mm do), the CPU twin does not, so the bound per output is
// u (sum_k |xn_k w_k|) for that rounding plus the output's own rounding, u = 2^-8 in bf16 (1e-5 in
// fp32: fp32 sums); the magnitudes come from the twin run on |x|, |g|, |W| (the norm of |x| is the
// norm of x). Gated: a = xn W0, b = xn W1 each within 2u mag (its rounding and the inputs'), so
// |act(a) b - ref| <= 2u (1.13 |b| mag_a + (|a| + 2u mag_a) mag_b) + u |ref| (1.13 bounds the
// activations' slopes). Cache rows start at a sentinel that every row not written must keep.
static void tg_nmm_case(tg *g, const tg_nmm_cfg *c, fat5_rng *rng) {
    const int T = c->T, N = c->N, K = c->K, S = c->act >= 0 ? (c->S == 2 ? 2 : 1) : c->S, cap = 9;
    const int rows_n = T + 3, nc = rows_n * cap;   // cache rows: T + 3 sequences of cap positions
    const double u = g->bf16 ? 1.0 / 256 : 1e-5, ur = g->bf16 ? 1.0 / 256 : 1e-6;
    float *x = tg_f(g, (size_t)T * K), *gw = tg_f(g, (size_t)K), *w = tg_f(g, (size_t)3 * N * K);
    float *xa = tg_f(g, (size_t)T * K), *ga = tg_f(g, (size_t)K), *wa = tg_f(g, (size_t)3 * N * K);
    float *ref[3], *got = tg_f(g, (size_t)nc * N), *mag[3], *ab[2];
    int32_t *rows = tg_i(g, (size_t)T), *kv_off = tg_i(g, (size_t)rows_n), *pos = tg_i(g, (size_t)rows_n);
    fat5__dptr xd, gd, wd[3] = {0, 0, 0}, yd[3] = {0, 0, 0}, rd = 0, od = 0, pd = 0;
    size_t i, ny[3];
    int s, bad = 0, first = -1;
    double worst = 0;
    char what[160];
    for (s = 0; s < 3; s++) {
        ny[s] = (size_t)(c->cache && s > 0 ? nc : T) * N;
        ref[s] = tg_f(g, ny[s]);
        mag[s] = tg_f(g, ny[s]);
    }
    ab[0] = tg_f(g, (size_t)T * N);
    ab[1] = tg_f(g, (size_t)T * N);
    tg_fill(rng, x, (size_t)T * K, 3.0);
    tg_fill(rng, gw, (size_t)K, 1.5);
    tg_fill(rng, w, (size_t)3 * N * K, 1.0 / sqrt((double)K));
    tg_round(g, w, (size_t)3 * N * K);
    for (i = 0; i < (size_t)T * K; i++) xa[i] = fabsf(x[i]);
    for (i = 0; i < (size_t)K; i++) ga[i] = fabsf(gw[i]);
    for (i = 0; i < (size_t)3 * N * K; i++) wa[i] = fabsf(w[i]);
    for (i = 0; i < (size_t)T; i++) rows[i] = (int32_t)((size_t)T - 1 - i);  // a permutation of 0 .. T-1
    for (i = 0; i < (size_t)rows_n; i++) kv_off[i] = (int32_t)((rows_n - 1 - i) * cap);
    for (i = 0; i < (size_t)rows_n; i++) pos[i] = (int32_t)(4 - i % 3);   // rows at their own positions
    for (s = 0; s < 3; s++)
        for (i = 0; i < ny[s]; i++) ref[s][i] = 7.0f;   // the sentinel (cache rows not written keep it)
    xd = tg_up_f32(g, x, (size_t)T * K);
    gd = tg_up_f32(g, gw, (size_t)K);
    for (s = 0; s < S; s++) {
        wd[s] = tg_up_act(g, w + (size_t)s * N * K, (size_t)N * K);
        yd[s] = tg_up_act(g, ref[s], ny[s]);
    }
    if (c->cache) {
        rd = tg_up_i32(g, rows, (size_t)T);
        od = tg_up_i32(g, kv_off, (size_t)rows_n);
        pd = tg_up_i32(g, pos, (size_t)rows_n);
    }
    if (g->err) return;
#define TG_W(a, s) (s < S ? A_((a) + (size_t)(s) * N * K) : 0)
    if (c->act < 0) {
        fat5__cpu_norm_mm(g->ctx, A_(ref[0]), A_(ref[1]), A_(ref[2]), A_(x), A_(gw), TG_W(w, 0), TG_W(w, 1), TG_W(w, 2),
                          T, N, K, 1e-6f, -1, c->cache ? A_(rows) : 0, A_(kv_off), A_(pos));
        fat5__cpu_norm_mm(g->ctx, A_(mag[0]), A_(mag[1]), A_(mag[2]), A_(xa), A_(ga), TG_W(wa, 0), TG_W(wa, 1),
                          TG_W(wa, 2), T, N, K, 1e-6f, -1, c->cache ? A_(rows) : 0, A_(kv_off), A_(pos));
    } else {
        fat5__cpu_norm_mm(g->ctx, A_(ref[0]), 0, 0, A_(x), A_(gw), TG_W(w, 0), TG_W(w, 1), 0, T, N, K, 1e-6f, c->act,
                          0, 0, 0);
        fat5__cpu_norm_mm(g->ctx, A_(ab[0]), A_(ab[1]), 0, A_(x), A_(gw), TG_W(w, 0), TG_W(w, 1), 0, T, N, K, 1e-6f,
                          -1, 0, 0, 0);
        fat5__cpu_norm_mm(g->ctx, A_(mag[0]), A_(mag[1]), 0, A_(xa), A_(ga), TG_W(wa, 0), TG_W(wa, 1), 0, T, N, K,
                          1e-6f, -1, 0, 0, 0);
    }
#undef TG_W
    if (!tg_ok(g, fat5__gpu_norm_mm(g->ctx, yd[0], yd[1], yd[2], xd, gd, wd[0], wd[1], wd[2], T, N, K, 1e-6f, c->act,
                                    rd, od, pd)))
        return;
    for (s = 0; s < (c->act >= 0 ? 1 : S) && !g->err; s++) {
        tg_down_act(g, got, yd[s], ny[s]);
        for (i = 0; i < ny[s] && !g->err; i++) {
            double want = ref[s][i], e = fabs((double)got[i] - want), bound;
            if (c->act < 0) {
                bound = u * mag[s][i] + ur * fabs(want) + 1e-30;
            } else {
                double a = ab[0][i], b = ab[1][i], ma = mag[0][i], mb = mag[1][i];
                bound = S == 2 ? 2 * u * (1.13 * fabs(b) * ma + (fabs(a) + 2 * u * ma) * mb) : 2.26 * u * ma;
                bound += (u + 1e-5) * fabs(want) + 1e-30;
            }
            if (!(e <= bound)) {
                if (first < 0) first = (int)i;
                bad++;
            }
            if (e / bound > worst || e != e) worst = e != e ? INFINITY : e / bound;
        }
        snprintf(what, sizeof what, "norm_mm T=%d N=%d K=%d S=%d act=%d cache=%d output %d", T, N, K, c->S, c->act,
                 c->cache, s);
        FAT5_CHECK_MSG(g->T, bad == 0, "[%s] %s: %d of %zu off (first %d: got %.9g, want %.9g); worst err/bound %.3g",
                       g->mode, what, bad, ny[s], first, first < 0 ? 0.0 : (double)got[first],
                       first < 0 ? 0.0 : (double)ref[s][first], worst);
        bad = 0, first = -1, worst = 0;
    }
}

static void t_gpu_norm_mm(fat5_test *T) {
    // T, N, K, S, act, cache: one row with the cache write (the decoder's q | k | v); row groups of
    // 16 (5, 16, 37 rows); N odd (a warp's two outputs in two weights); K = 36 and 40 (bf16: one
    // element at a time / 16-byte loads), 38 (both dtypes element-wise); gated GELU and plain ReLU;
    // the FAT5-small width
    static const tg_nmm_cfg cfgs[] = {
        {1, 24, 64, 3, -1, 1}, {5, 40, 64, 3, -1, 1},  {16, 8, 40, 1, -1, 0},  {37, 19, 36, 2, -1, 0},
        {3, 33, 64, 2, 2, 0},  {17, 16, 72, 1, 0, 0},  {2, 64, 512, 3, -1, 0}, {1, 96, 512, 2, 3, 0},
        {3, 21, 64, 3, -1, 1}, {4, 11, 38, 3, -1, 0},  // odd N across both weight boundaries, with the
                                                       // cache rows; K = 38: element-wise in fp32 too
    };
    int mode;
    size_t ci;
    for (mode = 0; mode < 2; mode++) {
        fat5_rng rng = fat5_rng_init(1700 + (uint64_t)mode);
        tg g;
        if (!tg_begin(&g, T, mode)) return;
        for (ci = 0; ci < sizeof cfgs / sizeof cfgs[0] && !g.err; ci++) {
            int nd = g.ndev, nh = g.nhost;
            tg_nmm_case(&g, &cfgs[ci], &rng);
            tg_release(&g, nd, nh);
        }
        // what the op refuses
        if (!g.err) {
            FAT5_CHECK(T, fat5__gpu_norm_mm(g.ctx, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8, 8, 1e-6f, 2, 0, 0, 0) ==
                              FAT5_ERR_INVALID_ARG);   // an activation with three weights
            FAT5_CHECK(T, fat5__gpu_norm_mm(g.ctx, 1, 0, 0, 1, 1, 1, 1, 0, 1, 8, 8, 1e-6f, -1, 0, 0, 0) ==
                              FAT5_ERR_INVALID_ARG);   // w1 without y1
            FAT5_CHECK(T, fat5__gpu_norm_mm(g.ctx, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8, 8, 1e-6f, -1, 1, 0, 0) ==
                              FAT5_ERR_INVALID_ARG);   // cache rows without kv_off and pos
            FAT5_CHECK(T, fat5__gpu_norm_mm(g.ctx, 1, 0, 0, 1, 1, 1, 0, 0, -1, 8, 8, 1e-6f, -1, 0, 0, 0) ==
                              FAT5_ERR_INVALID_ARG);   // negative T
        }
        tg_end(&g);
    }
}

// ----- attention with the position schemes (attention.cu, decode.cu; fire_reduce; rope.cu) -----

static void t_gpu_attn_posenc(fat5_test *T) {
    // packed sequences of odd lengths (one of one token, one past FIRE's threshold and L0 = 16, one
    // past the 64-token tiles); cross keys of other lengths
    static const int lq[] = {1, 150, 7, 33}, lk[] = {5, 70, 1, 40};
    // n_seq, len_q, len_k, H, dk, nb, md, W, lm, db_inc: dk 32 (tiled paths), 100 (per-warp dq /
    // dkv), 256 (per-warp forward); W 8 with a threshold tie at i = 12 (lm 0.75), W 33 odd; the
    // bias gradients checked by their increments
    static const tg_attn_cfg cfgs[] = {{4, lq, lk, 4, 32, 32, 128, 8, 0.931f, 1},
                                       {4, lq, lk, 2, 100, 32, 128, 33, 0.75f, 1},
                                       {4, lq, lk, 2, 256, 32, 128, 8, 0.75f, 1},
                                       {4, lq, lk, 6, 16, 32, 128, 8, 0.931f, 1}};
    // (mask | scheme, t5)
    static const int kinds[][2] = {{FAT5__ATTN_CROSS, 0},
                                   {FAT5__ATTN_BIDIR, 0},
                                   {FAT5__ATTN_CAUSAL, 0},
                                   {FAT5__ATTN_BIDIR, 1},
                                   {FAT5__ATTN_CAUSAL, 1},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI, 0},
                                   {FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI, 0},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM, 0},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_FIRE, 0},
                                   {FAT5__ATTN_CAUSAL | FAT5__ATTN_FIRE, 0}};
    int mode;
    for (mode = 0; mode < 2; mode++) {
        fat5_rng rng = fat5_rng_init(1000 + (uint64_t)mode);
        tg g;
        if (!tg_begin(&g, T, mode)) return;
        tg_attn_cases(&g, cfgs, sizeof cfgs / sizeof cfgs[0], kinds, sizeof kinds / sizeof kinds[0], &rng);
        // the launchers' checks: a scheme in cross-attention, ALiBi with FIRE, asymmetric ALiBi
        // without the bidirectional mask or with an odd head count, FIRE without its parameters,
        // bit 64 alone (transient-global keys without a window); asymmetric ALiBi in decoding
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8,
                                         FAT5__ATTN_CROSS | FAT5__ATTN_ALIBI, 0, 0, 0, 0, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 2, 8,
                                         FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_FIRE, 8, 16, 0, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8,
                                         FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM, 0, 0, 0, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_bwd_dkv(g.ctx, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 3, 8,
                                             FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM, 0, 0, 0, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8,
                                         FAT5__ATTN_BIDIR | FAT5__ATTN_FIRE, 8, 16, 0, 0, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8, 64 | FAT5__ATTN_BIDIR, 0, 0, 0, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_decode(g.ctx, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 2, 8,
                                            FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM, 0, 0, 10,
                                            1) == FAT5_ERR_INVALID_ARG);
        tg_end(&g);
    }
}

// ----- attention patterns (attention.cu's _pat kernels; global.cu) -----

static void t_gpu_attn_patterns(fat5_test *T) {
    // packed sequences shorter and longer than the 64-token tiles (one of one token, one of
    // exactly a tile), in different lengths; self-attention only
    static const int lq[] = {1, 300, 7, 64, 129};
    // n_seq, len_q, len_k, H, dk, nb, md, W, lm, db_inc: dk 32 (every tiled path), 100 (tiled
    // forward, per-warp dq and dk/dv), 256 (per-warp forward); the bias gradients checked by their
    // increments (FIRE's as in gpu_attn_posenc)
    static const tg_attn_cfg cfgs[] = {{5, lq, NULL, 4, 32, 32, 128, 8, 0.931f, 1},
                                       {5, lq, NULL, 2, 100, 32, 128, 8, 0.75f, 1},
                                       {5, lq, NULL, 2, 256, 32, 128, 8, 0.931f, 1}};
#define TG_B FAT5__ATTN_BIDIR
#define TG_W(r) FAT5__ATTN_WINDOW(r)
#define TG_AL (FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI)
#define TG_AS (FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM)
#define TG_FI (FAT5__ATTN_BIDIR | FAT5__ATTN_FIRE)
#define TG_P FAT5__ATTN_PREFIX
#define TG_TG FAT5__ATTN_TGLOBAL
#define TG_GS (FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED)
    // (kind, t5, g): windows of radius 0, under a tile, about a tile, over two tiles and longer
    // than every sequence (full attention); without a bias; block-global prefixes shorter and
    // longer than a tile (and than some sequences); transient-global keys with their own table and
    // with T5's (blocks of 16: the 1- and 7-token sequences have none; of 70 and 100: few, with
    // orphans), and without a bias; ALiBi (symmetric, asymmetric) and FIRE with a window and with
    // a prefix
    static const int kinds[][3] = {{TG_B | TG_W(0), 1, 0},          {TG_B | TG_W(5), 1, 0},
                                   {TG_B | TG_W(40), 1, 0},         {TG_B | TG_W(70), 1, 0},
                                   {TG_B | TG_W(150), 1, 0},        {TG_B | TG_W(1000), 1, 0},
                                   {TG_B | TG_W(3), 0, 0},          {TG_B | TG_W(3) | TG_P, 1, 5},
                                   {TG_B | TG_W(20) | TG_P, 1, 100}, {TG_B | TG_W(70) | TG_P, 1, 16},
                                   {TG_B | TG_W(8) | TG_TG, 1, 16}, {TG_B | TG_W(8) | TG_GS, 1, 16},
                                   {TG_B | TG_W(30) | TG_TG, 1, 70}, {TG_B | TG_W(2) | TG_GS, 1, 100},
                                   {TG_B | TG_W(8) | TG_TG, 0, 16}, {TG_AL | TG_W(9), 0, 0},
                                   {TG_AS | TG_W(9), 0, 0},          {TG_AL | TG_W(9) | TG_P, 0, 5},
                                   {TG_AS | TG_W(40) | TG_P, 0, 70}, {TG_FI | TG_W(9), 0, 0},
                                   {TG_FI | TG_W(40) | TG_P, 0, 5}};
    // FAT5_TEST_ATTN_CFG=n runs configuration n alone, FAT5_TEST_ATTN_MODE=0 / 1 fp32 / bf16 alone
    // (e.g. under racecheck, which is slow)
    const char *only = getenv("FAT5_TEST_ATTN_CFG"), *only_mode = getenv("FAT5_TEST_ATTN_MODE");
    int mode;
    size_t ci, ki;
    for (mode = 0; mode < 2; mode++) {
        if (only_mode && atoi(only_mode) != mode) continue;
        fat5_rng rng = fat5_rng_init(1300 + (uint64_t)mode);
        tg g;
        if (!tg_begin(&g, T, mode)) return;
        for (ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
            if (!only || (size_t)atoi(only) == ci)
            for (ki = 0; ki < sizeof kinds / sizeof kinds[0] && !g.err; ki++) {
                int ndev = g.ndev, nhost = g.nhost;
                tg_attn_case_g(&g, &cfgs[ci], kinds[ki][0], kinds[ki][1], kinds[ki][2], &rng);
                if (g.err)   // the case that broke the context: later cases cannot run
                    fprintf(stderr, "  gpu_attn_patterns: stopped at %s, head dim %d, kind %d (radius %d), t5 %d, g %d\n",
                            mode ? "bf16" : "fp32", cfgs[ci].dk, kinds[ki][0], FAT5__ATTN_RADIUS(kinds[ki][0]),
                            kinds[ki][1], kinds[ki][2]);
                tg_release(&g, ndev, nhost);
            }
        // the checks: a window on cross-attention, transient-global keys with ALiBi or without
        // their offsets, global keys without a window, a pattern in decoding
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8,
                                         FAT5__ATTN_CROSS | TG_W(4), 0, 0, 0, 0, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8, TG_AL | TG_W(4) | TG_TG, 0, 0,
                                         16, 1, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_bwd_dkv(g.ctx, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8,
                                             TG_B | TG_W(4) | TG_TG, 0, 0, 16, 0, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_fwd(g.ctx, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 2, 8, TG_B | TG_P, 0, 0, 4, 0, fat5__drop_none()) ==
                          FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5__gpu_attn_decode(g.ctx, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 2, 8,
                                            FAT5__ATTN_CAUSAL | TG_W(4), 0, 0, 10, 1) == FAT5_ERR_INVALID_ARG);
        tg_end(&g);
    }
#undef TG_B
#undef TG_W
#undef TG_AL
#undef TG_AS
#undef TG_FI
#undef TG_P
#undef TG_TG
#undef TG_GS
}

// The tensor-core forward (bf16) on sequences of many tiles: packed lengths far apart (one token,
// 1100, 37, 300: none a multiple of a tile), cross-attention to other lengths, one sequence of
// 2048, bidirectional and causal (blocks launched longest first); head dims 64 and 128, 40 and
// 96 (padded to 64 and 128); a T5 table of 4 buckets with max distance 2 (the smallest the GPU's
// bucket lookup supports for both masks: nb / 2 exact buckets when causal); T5 buckets,
// no bias, ALiBi (both), FIRE, a window of radius 127 with transient-global keys and with a prefix.
// tg_attn_case_g checks o and lse against the CPU and against the FMA kernel on the same inputs,
// and so the tensor-core backward: dq, dk, dv and the bias-table gradient, and their bits on a
// second run.
static void t_gpu_attn_tc(fat5_test *T) {
    static const int lq[] = {1, 1100, 37, 300}, lk[] = {700, 3, 65, 1}, l1[] = {2048};
    // n_seq, len_q, len_k, H, dk, nb, md, W, lm, db_inc
    static const tg_attn_cfg cfgs[] = {{4, lq, lk, 2, 64, 32, 128, 8, 0.931f, 1},
                                       {4, lq, lk, 2, 128, 32, 128, 8, 0.931f, 1},
                                       {4, lq, lk, 3, 40, 16, 50, 8, 0.75f, 1},
                                       {4, lq, lk, 2, 96, 4, 2, 8, 0.931f, 1}};
    static const tg_attn_cfg causal = {1, l1, NULL, 2, 64, 32, 128, 8, 0.931f, 1};
    static const int kinds[][3] = {
        {FAT5__ATTN_CROSS, 0, 0}, {FAT5__ATTN_BIDIR, 1, 0}, {FAT5__ATTN_CAUSAL, 1, 0}, {FAT5__ATTN_BIDIR, 0, 0},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI, 0, 0}, {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM, 0, 0},
        {FAT5__ATTN_CAUSAL | FAT5__ATTN_FIRE, 0, 0}, {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(127) | FAT5__ATTN_TGLOBAL, 1, 16},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(127) | FAT5__ATTN_PREFIX, 1, 70}};
    // FAT5_TEST_ATTN_CFG=n runs configuration n alone (4: the long sequence), e.g. under racecheck
    const char *only = getenv("FAT5_TEST_ATTN_CFG");
    int runs = 0, bwd = 0;  // bwd: the backward kernels that must run on tensor cores (dq with FIRE does not)
    int wg = 0;             // the cases the sm_90a kernels take where they exist
    fat5_rng rng = fat5_rng_init(1500);
    size_t ci, ki;
    tg g;
    if (!tg_begin(&g, T, 1)) return;
    for (ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
        for (ki = 0; ki < sizeof kinds / sizeof kinds[0] && !g.err && (!only || (size_t)atoi(only) == ci); ki++) {
            int ndev = g.ndev, nhost = g.nhost;
            if (cfgs[ci].H % 2 && (kinds[ki][0] & FAT5__ATTN_ALIBI_ASYM)) continue;  // needs an even head count
            tg_attn_case_g(&g, &cfgs[ci], kinds[ki][0], kinds[ki][1], kinds[ki][2], &rng);
            runs++;
            bwd += kinds[ki][0] & FAT5__ATTN_FIRE ? 1 : 2;
            wg += (cfgs[ci].dk == 64 || cfgs[ci].dk == 128) && kinds[ki][2] == 0 &&
                  (kinds[ki][0] & FAT5__ATTN_MASK) != FAT5__ATTN_CROSS && !(kinds[ki][0] & FAT5__ATTN_FIRE);
            tg_release(&g, ndev, nhost);
        }
    for (ki = 1; ki <= 2 && !g.err && (!only || atoi(only) == 4); ki++) {
        int ndev = g.ndev, nhost = g.nhost;
        tg_attn_case_g(&g, &causal, kinds[ki][0], kinds[ki][1], kinds[ki][2], &rng);
        runs++;
        bwd += 2;
        wg++;
        tg_release(&g, ndev, nhost);
    }
    // every case here must have taken the tensor-core kernel (bf16, sm_80+, head dims that fit)
    FAT5_CHECK_MSG(T, g.err || g.tc_cases == runs, "%d of %d cases ran on tensor cores", g.tc_cases, runs);
    FAT5_CHECK_MSG(T, g.err || g.tc_bwd_cases == bwd, "%d of %d backward kernels ran on tensor cores",
                   g.tc_bwd_cases, bwd);
    // and on H100 / H200 (the sm_90a program) every self-attention case of head dim 64 or 128
    // without FIRE or a pattern on attention_wg.cu's kernels; none anywhere else
    FAT5_CHECK_MSG(T, g.err || g.wg_cases == (g.ctx->gpu->attn_wg ? wg : 0), "%d of %d cases ran on the sm_90a kernels",
                   g.wg_cases, g.ctx->gpu->attn_wg ? wg : 0);
    // and their dk, dv on attention_wg_bwd.cu's kernel
    FAT5_CHECK_MSG(T, g.err || g.wg_bwd_cases == (g.ctx->gpu->attn_wg ? wg : 0),
                   "%d of %d cases ran dk, dv on the sm_90a kernel", g.wg_bwd_cases, g.ctx->gpu->attn_wg ? wg : 0);
    tg_end(&g);
}

// Attention-probability dropout (rate 0.2) in every attention kernel against the CPU's with the
// same masks, as tg_attn_case_g checks the kernels without it: the forward (o; lse stays the
// softmax's), delta, dq with the bias gradient, dk, dv, each kernel against the one beneath it, and
// the backward's bits on a second run. fp32 takes the FMA kernels, bf16 the tensor-core _drop
// instances (T5 buckets, no bias, ALiBi) and on H100 / H200 the sm_90a ones, patterns and FIRE the
// FMA kernels. A wrong mask moves o by a fifth of its terms, far beyond the tolerances; the masks
// change with the seed (a second seed must change o).
static void t_gpu_attn_dropout(fat5_test *T) {
    static const int lq[] = {1, 300, 7, 64, 129}, lk[] = {5, 129, 1, 33, 70};
    // n_seq, len_q, len_k, H, dk, nb, md, W, lm, db_inc: dk 32 (tiled FMA), 64 and 128 (tensor
    // cores, sm_90a), 100 (per-warp dq, dk/dv on the FMA path), 256 (per-warp forward)
    static const tg_attn_cfg cfgs[] = {{5, lq, lk, 2, 64, 32, 128, 8, 0.931f, 1},
                                       {5, lq, lk, 2, 128, 32, 128, 8, 0.931f, 1},
                                       {5, lq, lk, 3, 32, 32, 128, 8, 0.75f, 1},
                                       {5, lq, lk, 2, 100, 32, 128, 8, 0.931f, 1},
                                       {5, lq, lk, 1, 256, 32, 128, 8, 0.931f, 1}};
    static const int kinds[][3] = {{FAT5__ATTN_CROSS, 0, 0},
                                   {FAT5__ATTN_BIDIR, 1, 0},
                                   {FAT5__ATTN_CAUSAL, 1, 0},
                                   {FAT5__ATTN_BIDIR, 0, 0},
                                   {FAT5__ATTN_CAUSAL | FAT5__ATTN_ALIBI, 0, 0},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_FIRE, 0, 0},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(5), 1, 0},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(20) | FAT5__ATTN_PREFIX, 1, 5},
                                   {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(8) | FAT5__ATTN_TGLOBAL, 1, 16}};
    const char *only_mode = getenv("FAT5_TEST_ATTN_MODE");
    int mode;
    size_t ci, ki;
    for (mode = 0; mode < 2; mode++) {
        fat5_rng rng = fat5_rng_init(1700 + (uint64_t)mode);
        tg g;
        if (only_mode && atoi(only_mode) != mode) continue;
        if (!tg_begin(&g, T, mode)) return;
        g.drop = fat5__drop_make(0x5eedull + (uint64_t)mode, (uint64_t)7 << 12, 0.2);
        for (ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
            for (ki = 0; ki < sizeof kinds / sizeof kinds[0] && !g.err; ki++) {
                int ndev = g.ndev, nhost = g.nhost;
                if (cfgs[ci].dk == 256 && (kinds[ki][0] & FAT5__ATTN_FIRE)) continue;  // FIRE's rows and dk 256: no room
                tg_attn_case_g(&g, &cfgs[ci], kinds[ki][0], kinds[ki][1], kinds[ki][2], &rng);
                tg_release(&g, ndev, nhost);
            }
        if (!g.err) {
            // the seed moves the masks: the same inputs under two seeds give different outputs
            const int64_t T2 = 100, n2 = T2 * 2 * 64;
            float *x = tg_f(&g, (size_t)n2), *o1 = tg_f(&g, (size_t)n2), *o2 = tg_f(&g, (size_t)n2);
            int32_t cu[2] = {0, 100}, *qs = tg_i(&g, (size_t)T2);
            fat5__dptr xd, cud, qsd, od, lsed;
            fat5__drop d2 = g.drop;
            int64_t e, differ = 0;
            if (g.err) return;
            for (e = 0; e < T2; e++) qs[e] = 0;
            tg_fill(&rng, x, (size_t)n2, 0.5);
            tg_round(&g, x, (size_t)n2);
            xd = tg_up_act(&g, x, (size_t)n2);
            cud = tg_up_i32(&g, cu, 2);
            qsd = tg_up_i32(&g, qs, (size_t)T2);
            od = tg_dev(&g, (size_t)n2 * tg_act(&g));
            lsed = tg_dev(&g, (size_t)T2 * 2 * 4);
            d2.seed++;
            if (!g.err && tg_ok(&g, fat5__gpu_attn_fwd(g.ctx, od, lsed, xd, xd, xd, 0, 0, cud, cud, qsd, T2, 2, 64,
                                                       FAT5__ATTN_BIDIR, 0, 0, 0, 0, g.drop))) {
                tg_down_act(&g, o1, od, (size_t)n2);
                if (tg_ok(&g, fat5__gpu_attn_fwd(g.ctx, od, lsed, xd, xd, xd, 0, 0, cud, cud, qsd, T2, 2, 64,
                                                 FAT5__ATTN_BIDIR, 0, 0, 0, 0, d2))) {
                    tg_down_act(&g, o2, od, (size_t)n2);
                    for (e = 0; e < n2; e++) differ += o1[e] != o2[e];
                    FAT5_CHECK_MSG(T, differ > n2 / 2, "[%s] another seed changed %lld of %lld outputs", g.mode,
                                   (long long)differ, (long long)n2);
                }
            }
        }
        tg_end(&g);
    }
}

// What the launchers refuse (the arguments the op table's generators never pass): an unknown
// activation; attn_decode with bidirectional attention, a head dim above 256, splits without
// scratch; fire_reduce of no heads; rope with an odd rotated width; block sums of no width or no
// block size.
static void t_gpu_op_refusals(fat5_test *T) {
    fat5_ctx *ctx = tg_ctx(T, FAT5_DTYPE_FP32);
    if (!ctx) return;
    FAT5_CHECK(T, fat5__gpu_act_fwd(ctx, 0, 0, 0, 1, 7, fat5__drop_none()) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_attn_decode(ctx, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 8, FAT5__ATTN_BIDIR, 0, 0, 10, 1) ==
                      FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_attn_decode(ctx, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 257, 0, 0, 0, 10, 1) ==
                      FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_attn_decode(ctx, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 8, 0, 0, 0, 3000, 0) ==
                      FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_fire_reduce(ctx, 1, 1, 0, 8) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_rope(ctx, 1, 1, 1, 0, 1, 1, 8, 3, 10000.0f, 0.0f, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_block_sum(ctx, 1, 1, 1, 1, 1, 3, 8, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5__gpu_block_sum_bwd(ctx, 1, 1, 1, 1, 1, 3, 0, 16) == FAT5_ERR_INVALID_ARG);
    fat5_ctx_destroy(ctx);
}

#define FAT5_TESTS_GPU_OPS(X)                                                                         \
    X(gpu_attn) X(gpu_attn_edge) X(gpu_attn_posenc) X(gpu_attn_patterns) X(gpu_attn_tc) X(gpu_attn_dropout) X(gpu_norm_mm) \
    X(gpu_op_refusals)
