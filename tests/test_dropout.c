// Dropout at Hugging Face T5's sites, in training forwards only. The mask generator (base: RNG):
// Philox4x32-10 against its published vectors, keep rate and scale, uniformity and independence
// statistics, a pure function of (seed, stream, index); the CPU ops that apply it (attention
// probabilities against a dense reference and finite differences); the whole CPU model's gradient
// with dropout on and the masks held fixed against finite differences; every site has an effect;
// rate 0 is bitwise the path without dropout; evaluation, inference, encode and generation ignore
// it; a training run with dropout resumed from a checkpoint ends on the same weights bit for bit.
// On a GPU (skipped without one): the whole model with dropout at the elementwise sites, and with
// attention-probability dropout too, against the CPU (the same masks, else the losses would differ
// by O(p)); test_gpu_ops.c's gpu_attn_dropout checks every attention kernel. The ops table's gpu_op_dropout, gpu_op_drop_draws and gpu_op_act_* compare the
// generator and the dropout ops bit for bit (or to rounding) between the CPU and the GPU.
// (Included by test_main.c after the files whose helpers it uses: tc_*, tm_*, ttr_*, tgm_*.)

// ---- the generator ----

// Philox4x32-10's known-answer vectors (Random123's kat_vectors: counter, key, output), and the
// mask's block is that Philox block: key = seed, counter = (block low, high; stream low, high)
static void t_dropout_philox_kat(fat5_test *T) {
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x408f276du, 0x41c83b0eu,
         0xa20bc7c6u, 0x6d5451fdu},
        {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, 0xd16cfe09u, 0x94fdccebu,
         0x5001e420u, 0x24126ea1u}};
    int v, l;
    for (v = 0; v < 3; v++) {
        uint32_t out[4], d[8];
        uint64_t seed = (uint64_t)kat[v][5] << 32 | kat[v][4], blk = (uint64_t)kat[v][1] << 32 | kat[v][0];
        uint64_t stream = (uint64_t)kat[v][3] << 32 | kat[v][2];
        fat5__philox4x32(kat[v][4], kat[v][5], kat[v], out);
        for (l = 0; l < 4; l++)
            FAT5_CHECK_MSG(T, out[l] == kat[v][6 + l], "vector %d word %d: %08x, want %08x", v, l, out[l], kat[v][6 + l]);
        fat5__drop_block(seed, stream, blk, d);
        for (l = 0; l < 8; l++) {   // (an index's block is below 2^61: the draw of vector 0's only)
            uint32_t want = (kat[v][6 + l / 2] >> (16 * (l & 1))) & 0xFFFFu;
            FAT5_CHECK_MSG(T, d[l] == want, "vector %d lane %d: %04x, want %04x", v, l, d[l], want);
            if (!(blk >> 61))
                FAT5_CHECK_MSG(T, fat5__drop_draw(seed, stream, blk * 8 + (uint64_t)l) == want, "vector %d index %d", v, l);
        }
    }
    // fat5_rng's stream is the same function with the counter's high words 0
    {
        fat5_rng r = fat5_rng_init(0xa4093822ull | (uint64_t)0x299f31d0 << 32);
        uint32_t c[4] = {0, 0, 0, 0}, out[4];
        fat5__philox4x32(0xa4093822u, 0x299f31d0u, c, out);
        FAT5_CHECK(T, fat5_rng_u32(&r) == out[0] && fat5_rng_u32(&r) == out[1]);
    }
}

// The rounding of rates: thresh = round(65536 p), kept with probability 1 - thresh / 65536 exactly,
// scale = 65536 / (65536 - thresh) to fp32 (scale q within fp32's rounding of 1); below 2^-17 no
// dropout, near 1 at most 65535
static void t_dropout_rates(fat5_test *T) {
    static const struct { double p; uint32_t thresh; } c[] = {
        {0.1, 6554}, {0.5, 32768}, {0.9, 58982}, {0.01, 655}, {1e-6, 0}, {0.999999, 65535}, {0, 0}, {0.3, 19661}};
    size_t i;
    for (i = 0; i < sizeof c / sizeof c[0]; i++) {
        fat5__drop d = fat5__drop_make(1, 2, c[i].p);
        double q = 1.0 - d.thresh / 65536.0;
        FAT5_CHECK_MSG(T, d.thresh == c[i].thresh, "p %g: thresh %u, want %u", c[i].p, d.thresh, c[i].thresh);
        FAT5_CHECK_MSG(T, fabs((double)d.scale * q - 1.0) <= ldexp(1.0, -24), "p %g: scale %.9g, keep %.9g", c[i].p,
                       (double)d.scale, q);
    }
}

// The kept count of n draws of d over indices index(i), i < n
typedef uint64_t (*td_index_fn)(uint64_t i);
static uint64_t td_flat(uint64_t i) { return i; }
static uint64_t td_attn_index(uint64_t i) { return (i >> 11) << 32 | (i & 2047); }   // 2048 keys a query row

// Keep rate and mean multiplier. For each rate, N = 2^22 elements of one mask, flat and in the
// attention's layout (query row << 32 | key row): the kept count K is binomial (N, q), q = 1 -
// thresh / 65536, so |K - N q| <= 6 sqrt(N q (1 - q)) (a false alarm ~2e-9 under the normal
// approximation, accurate at these counts); the mean multiplier (scale kept, else 0) is scale K / N,
// within 6 scale sqrt(q (1 - q) / N) + 2^-23 of 1 (the last term: scale's fp32 rounding).
static void t_dropout_keep_rate(fat5_test *T) {
    static const double rates[] = {0.1, 0.5, 0.01, 0.9};
    static const td_index_fn layout[2] = {td_flat, td_attn_index};
    const uint64_t N = (uint64_t)1 << 22;
    size_t r;
    int lay;
    for (r = 0; r < sizeof rates / sizeof rates[0]; r++)
        for (lay = 0; lay < 2; lay++) {
            fat5__drop d = fat5__drop_make(0x5eed0000ull + r, ((uint64_t)r << 26) | ((uint64_t)lay << 12), rates[r]);
            fat5__drop_cursor cur;
            double q = 1.0 - d.thresh / 65536.0, sd = sqrt((double)N * q * (1 - q)), mean_m = 0;
            uint64_t i, kept = 0;
            fat5__drop_cursor_init(&cur);
            for (i = 0; i < N; i++) {
                float m = fat5__drop_at(&d, &cur, layout[lay](i));
                FAT5_REQUIRE(T, m == 0.0f || m == d.scale);
                kept += m != 0.0f;
                mean_m += m;
            }
            mean_m /= (double)N;
            FAT5_CHECK_MSG(T, fabs((double)kept - (double)N * q) <= 6 * sd, "p %g (%s): kept %llu of %llu, expected %.1f +- %.1f",
                           rates[r], lay ? "attention" : "flat", (unsigned long long)kept, (unsigned long long)N,
                           (double)N * q, sd);
            FAT5_CHECK_MSG(T, fabs(mean_m - 1.0) <= 6 * d.scale * sd / (double)N + ldexp(1.0, -23),
                           "p %g (%s): mean multiplier %.8f", rates[r], lay ? "attention" : "flat", mean_m);
        }
}

// Wald-Wolfowitz runs test on n bits: with n1 ones and n0 zeros the number of runs R has mean
// mu = 1 + 2 n1 n0 / n and variance (mu - 1)(mu - 2) / (n - 1); |R - mu| <= 6 sd
static void td_runs_check(fat5_test *T, const char *what, const unsigned char *bits, size_t n) {
    size_t i, n1 = 0, runs = 1;
    double mu, sd;
    for (i = 0; i < n; i++) {
        n1 += bits[i];
        if (i && bits[i] != bits[i - 1]) runs++;
    }
    mu = 1.0 + 2.0 * (double)n1 * (double)(n - n1) / (double)n;
    sd = sqrt((mu - 1) * (mu - 2) / (double)(n - 1));
    FAT5_CHECK_MSG(T, fabs((double)runs - mu) <= 6 * sd, "%s: %zu runs, expected %.1f +- %.1f", what, runs, mu, sd);
}

// Uniformity and independence of the draws.
// - Chi-square of the 16-bit draws' high byte and low byte over N = 2^20 draws (256 bins of 4096
//   expected): X is chi2 with 255 degrees of freedom, mean 255, sd sqrt(510) = 22.6; accepted in
//   255 +- 6 sd = [119.5, 390.5] (the right tail at 390.5 is ~1e-7 by Wilson-Hilferty).
// - Runs tests on the keep bits at p = 0.5 along consecutive indices, along consecutive streams (the
//   heads and sites of one forward) at a fixed index, and along query rows of the attention's layout.
// - Neighbouring streams (head h and h + 1, a site and the next, a draw and the next) and seeds:
//   both kept at p = 0.5 is binomial (N, 1/4) if independent: 6 sd; equal 16-bit draws at a given
//   index, Poisson of mean N / 65536 = 1: at most 12 (a false alarm ~1e-9).
static void t_dropout_uniformity(fat5_test *T) {
    const size_t N = (size_t)1 << 20;
    unsigned char *bits = (unsigned char *)malloc(N);
    double hi[256], lo[256];
    size_t i;
    int b, k;
    FAT5_REQUIRE(T, bits != NULL);
    for (b = 0; b < 256; b++) hi[b] = lo[b] = 0;
    for (i = 0; i < N; i++) {
        uint32_t v = fat5__drop_draw(12345, 678, (uint64_t)i);
        hi[v >> 8] += 1;
        lo[v & 255] += 1;
    }
    for (k = 0; k < 2; k++) {
        double x = 0, e = (double)N / 256;
        for (b = 0; b < 256; b++) x += ((k ? lo[b] : hi[b]) - e) * ((k ? lo[b] : hi[b]) - e) / e;
        FAT5_CHECK_MSG(T, x >= 119.5 && x <= 390.5, "chi-square of the draws' %s byte: %.1f (255 +- 135.5)",
                       k ? "low" : "high", x);
    }
    for (i = 0; i < N; i++) bits[i] = fat5__drop_draw(99, 5u << 12, (uint64_t)i) >= 32768;
    td_runs_check(T, "keep bits along indices", bits, N);
    for (i = 0; i < N; i++) bits[i] = fat5__drop_draw(99, (uint64_t)i, 12345) >= 32768;
    td_runs_check(T, "keep bits along streams", bits, N);
    for (i = 0; i < N; i++) bits[i] = fat5__drop_draw(99, 1u << 12, (uint64_t)i << 32 | 17) >= 32768;
    td_runs_check(T, "keep bits along query rows", bits, N);
    {
        static const struct { uint64_t ds, dseed; const char *what; } nb[] = {
            {1, 0, "head h and h + 1"}, {1u << 12, 0, "a site and the next"}, {(uint64_t)1 << 15, 0, "a layer and the next"},
            {(uint64_t)1 << 26, 0, "a draw and the next"}, {0, 1, "a seed and the next"}};
        const size_t M = (size_t)1 << 18;
        size_t j;
        for (j = 0; j < sizeof nb / sizeof nb[0]; j++) {
            uint64_t s0 = (uint64_t)3 << 26 | 2u << 12, both = 0, same = 0;
            double sd = sqrt((double)M * 0.25 * 0.75);
            for (i = 0; i < M; i++) {
                uint32_t a = fat5__drop_draw(777, s0, (uint64_t)i);
                uint32_t c = fat5__drop_draw(777 + nb[j].dseed, s0 + nb[j].ds, (uint64_t)i);
                both += a >= 32768 && c >= 32768;
                if (i < 65536) same += a == c;
            }
            FAT5_CHECK_MSG(T, fabs((double)both - (double)M / 4) <= 6 * sd, "%s: both kept %llu of %zu", nb[j].what,
                           (unsigned long long)both, M);
            FAT5_CHECK_MSG(T, same <= 12, "%s: %llu equal draws of 65536", nb[j].what, (unsigned long long)same);
        }
    }
    free(bits);
}

// A pure function of (seed, stream, index): the same draws in any order, through every entry
// point (draw, block, cursor, the dropout op), and the model's streams all distinct: every
// (draw, stack, layer, site, head) of a forward, a draw past 2^38 refused
static void t_dropout_pure(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const int64_t n = 4099;
    float *x = tc_alloc((size_t)n), *y = tc_alloc((size_t)n);
    uint32_t *fwd = (uint32_t *)malloc((size_t)n * 4);
    fat5__drop d = fat5__drop_make(0xabcdef, (uint64_t)7 << 26 | 3u << 15 | 2u << 12, 0.25);
    fat5__drop_cursor cur;
    fat5_rng rng = fat5_rng_init(8);
    int64_t i;
    FAT5_REQUIRE(T, fwd != NULL);
    for (i = 0; i < n; i++) fwd[i] = fat5__drop_draw(d.seed, d.stream, (uint64_t)i);
    fat5__drop_cursor_init(&cur);
    for (i = n - 1; i >= 0; i--) {   // backwards, through the cursor
        float m = fat5__drop_at(&d, &cur, (uint64_t)i);
        FAT5_CHECK_MSG(T, m == (fwd[i] >= d.thresh ? d.scale : 0.0f), "index %lld: multiplier %g", (long long)i, (double)m);
    }
    tc_fill(&rng, x, (size_t)n, 1.0, 0);
    FAT5_REQUIRE_OK(T, fat5__cpu_dropout(ctx, A_(y), A_(x), n, FAT5__DROP_F32, d));
    for (i = 0; i < n; i++) {
        float want = x[i] * (fwd[i] >= d.thresh ? d.scale : 0.0f);
        FAT5_CHECK_MSG(T, y[i] == want, "dropout[%lld] = %g, want %g", (long long)i, (double)y[i], (double)want);
    }
    {   // ADD into y, then in place
        float *y0 = tc_alloc((size_t)n);
        memcpy(y0, y, (size_t)n * 4);
        FAT5_REQUIRE_OK(T, fat5__cpu_dropout(ctx, A_(y), A_(x), n, FAT5__DROP_ADD, d));
        for (i = 0; i < n; i++) FAT5_CHECK(T, y[i] == y0[i] + y0[i]);
        FAT5_REQUIRE_OK(T, fat5__cpu_dropout(ctx, A_(x), A_(x), n, FAT5__DROP_ACT, d));
        FAT5_CHECK(T, memcmp(x, y0, (size_t)n * 4) == 0);
        free(y0);
    }
    {   // every stream of a forward of a 2 + 3 layer model with 5 heads, three draws: all distinct
        fat5_model_config c = tm_tiny_config(1, 0, 0);
        fat5_model *m = NULL;
        uint64_t *all;
        size_t cnt = 0, a, b, dup = 0;
        int draw, dec, l, site, h;
        c.num_layers = 2;
        c.num_decoder_layers = 3;
        c.num_heads = 5;
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));
        all = (uint64_t *)malloc(3 * 2 * 3 * 8 * 5 * sizeof *all);
        FAT5_REQUIRE(T, all != NULL);
        m->fd.rate = m->fd.attn_rate = 0.1;
        for (draw = 0; draw < 3; draw++)
            for (dec = 0; dec < 2; dec++)
                for (l = 0; l < (dec ? 3 : 2); l++)
                    for (site = 0; site < 8; site++) {
                        fat5__drop s;
                        m->fd.draw = (uint64_t)draw * 1000003;
                        s = fat5__model_drop(m, fat5__drop_layer(dec, l), site);
                        FAT5_CHECK(T, s.thresh == 6554);
                        for (h = 0; h < (site == FAT5__DS_SA_PROBS || site == FAT5__DS_CA_PROBS ? 5 : 1); h++)
                            all[cnt++] = s.stream + (uint64_t)h;
                    }
        for (a = 0; a < cnt; a++)
            for (b = a + 1; b < cnt; b++) dup += all[a] == all[b];
        FAT5_CHECK_MSG(T, dup == 0, "%zu of %zu streams repeat", dup, cnt);
        FAT5_CHECK(T, fat5__model_drop(m, -1, FAT5__DS_FF_OUT).thresh == 0);   // the encode path's
        FAT5_CHECK(T, fat5_model_set_dropout(m, 1, 5, ((uint64_t)1 << 38) - 1) == FAT5_OK);
        FAT5_CHECK(T, fat5_model_set_dropout(m, 1, 5, (uint64_t)1 << 38) == FAT5_ERR_INVALID_ARG &&
                          strstr(fat5_last_error(ctx), "below 2^38"));
        FAT5_CHECK(T, fat5_model_set_dropout_rate(m, 1.0, -1) == FAT5_ERR_INVALID_ARG &&
                          strstr(fat5_last_error(ctx), "dropout_rate = 1"));
        FAT5_CHECK(T, fat5_model_set_dropout_rate(m, 0.1, NAN) == FAT5_ERR_INVALID_ARG &&
                          strstr(fat5_last_error(ctx), "attention_dropout_rate = nan"));
        free(all);
        fat5_model_destroy(m);
    }
    free(x);
    free(y);
    free(fwd);
}

// config.json's attention_dropout_rate (FAT5's key, read for any model type): a number in [0, 1),
// or null / absent for dropout_rate's; written back when set, and only then
static void t_dropout_config(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const char *const bad[][2] = {
        {"{\"attention_dropout_rate\": \"x\"}", "'attention_dropout_rate' must be a number >= 0 or null"},
        {"{\"attention_dropout_rate\": -0.5}", "'attention_dropout_rate' must be a number >= 0 or null"},
        {"{\"attention_dropout_rate\": 1}", "attention_dropout_rate = 1,"}};
    const char *j = "{\"dropout_rate\": 0.1, \"attention_dropout_rate\": 0.05}";
    fat5_model_config c, back;
    char *text = NULL;
    size_t len = 0, i;
    FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, j, strlen(j), &c));
    FAT5_CHECK(T, c.dropout_rate == 0.1 && c.attention_dropout_rate == 0.05);
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &text, &len));
    FAT5_CHECK_MSG(T, strstr(text, "\"attention_dropout_rate\": 0.05,") != NULL, "%s", text);
    FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, text, len, &back));
    FAT5_CHECK(T, back.attention_dropout_rate == 0.05 && back.dropout_rate == 0.1);
    fat5_free(ctx, text);
    j = "{\"dropout_rate\": 0.2, \"attention_dropout_rate\": null}";
    FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, j, strlen(j), &c));
    FAT5_CHECK(T, c.attention_dropout_rate < 0 && fat5_model_config_default().attention_dropout_rate < 0);
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &text, &len));
    FAT5_CHECK_MSG(T, strstr(text, "attention_dropout_rate") == NULL, "%s", text);
    fat5_free(ctx, text);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        FAT5_CHECK_MSG(T, fat5_model_config_from_json(ctx, bad[i][0], strlen(bad[i][0]), &c) == FAT5_ERR_FORMAT &&
                              strstr(fat5_last_error(ctx), bad[i][1]),
                       "%s: %s", bad[i][0], fat5_last_error(ctx));
}

// ---- the CPU ops ----

typedef struct td_attn { tc_attn a; fat5__drop drop; } td_attn;
static double td_attn_loss(void *u) {
    td_attn *t = (td_attn *)u;
    tc_attn *a = &t->a;
    fat5__cpu_attn_fwd(a->ctx, A_(a->o), A_(a->lse), A_(a->q), A_(a->k), A_(a->v), A_(a->bias), 0, A_(a->cu_q),
                       A_(a->cu_k), A_(a->q_seq), a->tq, a->H, a->dk, a->kind, a->nb, a->max_distance, 0, 0, t->drop);
    return tc_dot(a->o, a->r, (size_t)(a->tq * a->H * a->dk));
}

// Attention-probability dropout (p = 0.3) on packed sequences, cross, bidirectional (T5 bias) and
// causal: the forward against a dense reference o = sum_j softmax_j m_j v_j (m: the multiplier of
// query row, key row and head), lse unchanged (the softmax's, every key); dq, dk, dv (delta =
// rowsum(dout o), as the model runs it) against finite differences with the masks held fixed, at
// test_cpu_ops.c's attention tolerances.
static void t_dropout_cpu_attn(fat5_test *T) {
    static const int32_t cu_q[] = {0, 1, 9, 12, 20};
    static const int32_t cu_k_cross[] = {0, 5, 6, 17, 20};
    fat5_rng rng = fat5_rng_init(31);
    int kind;
    for (kind = 0; kind < 3; kind++) {
        td_attn t;
        tc_attn *a = &t.a;
        int64_t H = 2, dk = 3, nb = 8, tq = 20, tk, s, i, j;
        int h, dd, dropped = 0;
        float *dq, *dkk, *dv, *delta, *lse0;
        char what[64];
        const char *kn = kind == 0 ? "cross" : kind == 1 ? "bidir" : "causal";
        fat5_ctx *ctx = tc_ctx();
        memset(&t, 0, sizeof t);
        a->ctx = ctx;
        a->H = (int)H, a->dk = (int)dk, a->kind = kind, a->nb = (int)nb, a->max_distance = 12;
        a->cu_q = cu_q;
        a->cu_k = kind == 0 ? cu_k_cross : cu_q;
        a->tq = tq;
        a->tk = tk = a->cu_k[4];
        a->q_seq = tc_seq_map(a->cu_q, 4);
        a->k_seq = tc_seq_map(a->cu_k, 4);
        a->q = tc_alloc((size_t)(tq * H * dk)), a->k = tc_alloc((size_t)(tk * H * dk)), a->v = tc_alloc((size_t)(tk * H * dk));
        a->o = tc_alloc((size_t)(tq * H * dk)), a->r = tc_alloc((size_t)(tq * H * dk)), a->lse = tc_alloc((size_t)(tq * H));
        a->bias = kind == 1 ? tc_alloc((size_t)(nb * H)) : NULL;
        dq = tc_alloc((size_t)(tq * H * dk)), dkk = tc_alloc((size_t)(tk * H * dk)), dv = tc_alloc((size_t)(tk * H * dk));
        delta = tc_alloc((size_t)(tq * H)), lse0 = tc_alloc((size_t)(tq * H));
        tc_fill(&rng, a->q, (size_t)(tq * H * dk), 1.0, 0);
        tc_fill(&rng, a->k, (size_t)(tk * H * dk), 1.0, 0);
        tc_fill(&rng, a->v, (size_t)(tk * H * dk), 1.0, 0);
        tc_fill(&rng, a->r, (size_t)(tq * H * dk), 1.0, 0);
        if (a->bias) tc_fill(&rng, a->bias, (size_t)(nb * H), 1.0, 0);
        t.drop = fat5__drop_none();
        td_attn_loss(&t);
        memcpy(lse0, a->lse, (size_t)(tq * H) * 4);
        t.drop = fat5__drop_make(4242, (uint64_t)9 << 26 | 1u << 12, 0.3);
        td_attn_loss(&t);
        FAT5_CHECK_MSG(T, memcmp(lse0, a->lse, (size_t)(tq * H) * 4) == 0, "%s: dropout changed lse", kn);
        for (s = 0; s < 4; s++)   // the dense reference
            for (i = cu_q[s]; i < cu_q[s + 1]; i++)
                for (h = 0; h < a->H; h++) {
                    double sc[32], mx = -INFINITY, sum = 0, o[3] = {0, 0, 0};
                    int64_t k0 = a->cu_k[s], nk = a->cu_k[s + 1] - k0, hi = kind == 2 ? i - cu_q[s] + 1 : nk;
                    for (j = 0; j < hi; j++) {
                        const float *qi = a->q + (i * H + h) * dk, *kj = a->k + ((k0 + j) * H + h) * dk;
                        sc[j] = 0;
                        for (dd = 0; dd < dk; dd++) sc[j] += (double)qi[dd] * kj[dd];
                        if (a->bias) sc[j] += a->bias[(int64_t)fat5__rel_bucket(j - (i - cu_q[s]), 1, (int)nb, 12) * H + h];
                        if (sc[j] > mx) mx = sc[j];
                    }
                    for (j = 0; j < hi; j++) sum += exp(sc[j] - mx);
                    for (j = 0; j < hi; j++) {
                        uint64_t index = (uint64_t)i << 32 | (uint64_t)(k0 + j);
                        double m = fat5__drop_draw(t.drop.seed, t.drop.stream + (uint64_t)h, index) >= t.drop.thresh
                                       ? t.drop.scale : 0.0;
                        dropped += m == 0;
                        for (dd = 0; dd < dk; dd++) o[dd] += exp(sc[j] - mx) / sum * m * a->v[((k0 + j) * H + h) * dk + dd];
                    }
                    for (dd = 0; dd < dk; dd++)
                        FAT5_CHECK_MSG(T, fabs(a->o[(i * H + h) * dk + dd] - o[dd]) <= 1e-5 * (1 + fabs(o[dd])),
                                       "%s: o[%lld, %d, %d] = %g, want %g", kn, (long long)i, h, dd,
                                       (double)a->o[(i * H + h) * dk + dd], o[dd]);
                }
        FAT5_CHECK_MSG(T, dropped > 5, "%s: only %d probabilities dropped", kn, dropped);
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_delta(ctx, A_(delta), A_(a->o), A_(a->r), tq, a->H, a->dk));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_dq(ctx, A_(dq), 0, A_(a->r), A_(a->lse), A_(delta), A_(a->q), A_(a->k),
                                                 A_(a->v), A_(a->bias), 0, A_(a->cu_q), A_(a->cu_k), A_(a->q_seq), tq,
                                                 a->H, a->dk, kind, a->nb, a->max_distance, 0, 0, 0, t.drop));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_dkv(ctx, A_(dkk), A_(dv), A_(a->r), A_(a->lse), A_(delta), A_(a->q),
                                                  A_(a->k), A_(a->v), A_(a->bias), 0, A_(a->cu_q), A_(a->cu_k),
                                                  A_(a->k_seq), tk, a->H, a->dk, kind, a->nb, a->max_distance, 0, 0,
                                                  t.drop));
        snprintf(what, sizeof what, "%s dq (dropout)", kn);
        tc_fd_check(T, what, a->q, (size_t)(tq * H * dk), dq, td_attn_loss, &t, 1e-3, 1e-4, 1e-3);
        snprintf(what, sizeof what, "%s dk (dropout)", kn);
        tc_fd_check(T, what, a->k, (size_t)(tk * H * dk), dkk, td_attn_loss, &t, 1e-3, 1e-4, 1e-3);
        snprintf(what, sizeof what, "%s dv (dropout)", kn);
        tc_fd_check(T, what, a->v, (size_t)(tk * H * dk), dv, td_attn_loss, &t, 1e-3, 1e-4, 1e-3);
        free(a->q); free(a->k); free(a->v); free(a->o); free(a->r); free(a->lse); free(a->bias);
        free(a->q_seq); free(a->k_seq);
        free(dq); free(dkk); free(dv); free(delta); free(lse0);
        fat5_ctx_destroy(ctx);
    }
}

// act_fwd / act_bwd with the hidden activation's dropout: act_fwd's output is the plain one times
// the multipliers, act_bwd's is the plain one of dh times the multipliers (the same floats)
static void t_dropout_cpu_act(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const int64_t n = 1003;
    float *a = tc_alloc((size_t)n), *b = tc_alloc((size_t)n), *h0 = tc_alloc((size_t)n), *h1 = tc_alloc((size_t)n);
    float *dh = tc_alloc((size_t)n), *dhm = tc_alloc((size_t)n), *da0 = tc_alloc((size_t)n), *db0 = tc_alloc((size_t)n);
    float *da1 = tc_alloc((size_t)n), *db1 = tc_alloc((size_t)n);
    fat5__drop d = fat5__drop_make(11, 5u << 12, 0.4);
    fat5_rng rng = fat5_rng_init(12);
    int64_t i;
    int zeros = 0;
    tc_fill(&rng, a, (size_t)n, 2.0, 0);
    tc_fill(&rng, b, (size_t)n, 2.0, 0);
    tc_fill(&rng, dh, (size_t)n, 1.0, 0);
    FAT5_REQUIRE_OK(T, fat5__cpu_act_fwd(ctx, A_(h0), A_(a), A_(b), n, FAT5_ACT_GELU_TANH, fat5__drop_none()));
    FAT5_REQUIRE_OK(T, fat5__cpu_act_fwd(ctx, A_(h1), A_(a), A_(b), n, FAT5_ACT_GELU_TANH, d));
    for (i = 0; i < n; i++) {
        float m = fat5__drop_draw(d.seed, d.stream, (uint64_t)i) >= d.thresh ? d.scale : 0.0f;
        FAT5_CHECK(T, h1[i] == h0[i] * m);
        dhm[i] = dh[i] * m;
        zeros += m == 0;
    }
    FAT5_CHECK_MSG(T, zeros > n / 4 && zeros < n / 2, "%d of %lld dropped at p = 0.4", zeros, (long long)n);
    FAT5_REQUIRE_OK(T, fat5__cpu_act_bwd(ctx, A_(da0), A_(db0), A_(dhm), A_(a), A_(b), n, FAT5_ACT_GELU_TANH,
                                         fat5__drop_none()));
    FAT5_REQUIRE_OK(T, fat5__cpu_act_bwd(ctx, A_(da1), A_(db1), A_(dh), A_(a), A_(b), n, FAT5_ACT_GELU_TANH, d));
    FAT5_CHECK(T, memcmp(da0, da1, (size_t)n * 4) == 0 && memcmp(db0, db1, (size_t)n * 4) == 0);
    free(a); free(b); free(h0); free(h1); free(dh); free(dhm); free(da0); free(db0); free(da1); free(db1);
}

// ---- the whole model on the CPU ----

// m's loss on tm_batch(), and (grad: not NULL) its gradients, n_floats floats
static double td_loss_grads(fat5_test *T, fat5_model *m, float *grad) {
    fat5_batch b = tm_batch();
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_forward_result r;
    lc.z_loss = 1e-2;
    if (fat5_model_forward(m, &b, &lc, &r) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "forward: %s", fat5_last_error(m->ctx));
        return NAN;
    }
    if (grad) {
        fat5_model_zero_grad(m);
        if (fat5_model_backward(m, 1.0f) != FAT5_OK) FAT5_CHECK_MSG(T, 0, "backward: %s", fat5_last_error(m->ctx));
        memcpy(grad, FAT5__HOST(const float, m->gd), m->n_floats * 4);
    }
    return r.loss;
}

// Every parameter's gradient against central differences of the whole model's loss, dropout on at
// 0.1 (attention probabilities 0.2) with one seed and draw, so that every forward draws the same
// masks; test_model.c's check and tolerances. First: each site alone changes the loss (it is
// applied), and another draw gives other masks.
static void td_model_fd(fat5_test *T, int gated, int tied, int umt5) {
    fat5_model_config c = tm_tiny_config(gated, tied, umt5);
    fat5_model *m = NULL;
    double off, on, other;
    int site;
    c.dropout_rate = 0.1;
    c.attention_dropout_rate = 0.2;
    FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &c, 11, &m));
    tm_perturb_norms(m, 0);
    off = td_loss_grads(T, m, NULL);
    FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, 1, 2024, 3));
    for (site = FAT5__DS_EMBED; site <= FAT5__DS_FINAL; site++) {
        double l;
        m->drop_skip = ~(1u << site);
        l = td_loss_grads(T, m, NULL);
        FAT5_CHECK_MSG(T, fabs(l - off) > 1e-6, "site %d alone leaves the loss at %.9g", site, l);
    }
    m->drop_skip = 0;
    on = td_loss_grads(T, m, NULL);
    FAT5_CHECK_MSG(T, td_loss_grads(T, m, NULL) == on, "the same seed and draw gave another loss");
    FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, 1, 2024, 4));
    other = td_loss_grads(T, m, NULL);
    FAT5_CHECK_MSG(T, fabs(on - off) > 1e-4 && fabs(other - on) > 1e-5, "losses: off %.9g, draw 3 %.9g, draw 4 %.9g",
                   off, on, other);
    FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, 1, 2024, 3));
    tm_model_fd_check(T, m, "dropout", !gated, 20);
    fat5_model_destroy(m);
}
static void t_dropout_model_fd_gated(fat5_test *T) { td_model_fd(T, 1, 0, 0); }
static void t_dropout_model_fd_relu_tied(fat5_test *T) { td_model_fd(T, 0, 1, 0); }

// Rate 0 is the path without dropout, bit for bit: dropout on at rate 0, at a rate that rounds to 0
// (1e-6 < 2^-17) and a model whose dropout was never turned on (at 0.1) give the same loss and
// gradients as dropout off at 0; on at 0.1 with the attention probabilities at 0 only differs
// where it should (the loss)
static void t_dropout_zero_bitwise(fat5_test *T) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    float *g0, *g1;
    double l0, l1;
    int k;
    c.dropout_rate = 0;
    FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &c, 21, &m));
    g0 = (float *)malloc(m->n_floats * 4);
    g1 = (float *)malloc(m->n_floats * 4);
    FAT5_REQUIRE(T, g0 && g1);
    l0 = td_loss_grads(T, m, g0);
    for (k = 0; k < 3; k++) {
        static const char *const what[3] = {"on at rate 0", "on at rate 1e-6", "never on, rate 0.1"};
        FAT5_REQUIRE_OK(T, fat5_model_set_dropout_rate(m, k == 0 ? 0.0 : k == 1 ? 1e-6 : 0.1, -1));
        FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, k < 2, 99, 7));
        l1 = td_loss_grads(T, m, g1);
        FAT5_CHECK_MSG(T, l1 == l0 && memcmp(g0, g1, m->n_floats * 4) == 0, "%s: loss %.17g vs %.17g, gradients %s",
                       what[k], l1, l0, memcmp(g0, g1, m->n_floats * 4) ? "differ" : "equal");
    }
    FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, 1, 99, 7));
    l1 = td_loss_grads(T, m, g1);
    FAT5_CHECK_MSG(T, l1 != l0, "dropout 0.1 on: the loss did not change");
    FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, 0, 0, 0));
    l1 = td_loss_grads(T, m, g1);
    FAT5_CHECK_MSG(T, l1 == l0 && memcmp(g0, g1, m->n_floats * 4) == 0, "turned off again: loss %.17g vs %.17g", l1, l0);
    free(g0);
    free(g1);
    fat5_model_destroy(m);
}

// With dropout on at 0.5 (a forward in training mode would change): an evaluation forward (no
// gradient, as the trainer's), an inference-mode forward, fat5_model_encode and greedy generation
// give bitwise what they give with dropout off
static void t_dropout_eval_unaffected(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    fat5_batch b = tm_batch();
    fat5_forward_result train[2], eval[2], inf[2];
    float enc[2][19 * 8];
    fat5_generate_config gc = fat5_generate_config_default();
    fat5_generate_result g[2];
    int on;
    c.dropout_rate = 0.5;
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 3, &m));
    gc.max_new_tokens = 6;
    for (on = 0; on < 2; on++) {
        FAT5_REQUIRE_OK(T, fat5_model_set_training(m, 1));
        FAT5_REQUIRE_OK(T, fat5_model_set_dropout(m, on, 5, 1));
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, &train[on]));
        m->no_grad = 1;   // the trainer's evaluation
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, &eval[on]));
        m->no_grad = 0;
        FAT5_REQUIRE_OK(T, fat5_model_encode(m, tm_enc_tok, tm_enc_cu, 3, FAT5_POOL_NONE, enc[on], 19 * 8));
        FAT5_REQUIRE_OK(T, fat5_generate(m, tm_enc_tok, tm_enc_cu, 3, &gc, &g[on]));
        FAT5_REQUIRE_OK(T, fat5_model_set_training(m, 0));
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, &inf[on]));
    }
    FAT5_CHECK_MSG(T, train[1].loss != train[0].loss, "the training forward with dropout 0.5 did not change");
    FAT5_CHECK_MSG(T, eval[1].loss == eval[0].loss, "evaluation forward: %.17g vs %.17g", eval[1].loss, eval[0].loss);
    FAT5_CHECK_MSG(T, inf[1].loss == inf[0].loss, "inference forward: %.17g vs %.17g", inf[1].loss, inf[0].loss);
    FAT5_CHECK(T, memcmp(enc[0], enc[1], sizeof enc[0]) == 0);
    FAT5_CHECK(T, g[0].n_seq == g[1].n_seq && g[0].cu_seqlens[g[0].n_seq] == g[1].cu_seqlens[g[1].n_seq] &&
                      memcmp(g[0].tokens, g[1].tokens, (size_t)g[0].cu_seqlens[g[0].n_seq] * 4) == 0);
    fat5_generate_result_destroy(ctx, &g[0]);
    fat5_generate_result_destroy(ctx, &g[1]);
    fat5_model_destroy(m);
}

// ---- the trainer ----

// Dropout 0.1 in training: 4 steps straight, and 2 steps, a checkpoint, a new trainer resuming it,
// 2 steps: the same weights bit for bit (the masks are a function of the run's seed, step and
// micro-batch). The run differs from one without dropout (so dropout ran), its evaluation loss
// before any step equals that run's (evaluation has none), and the checkpoint's config.json keeps
// the rates.
static void t_dropout_train_resume(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 8);
    char a[600], b[600], z[600], p[700];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    float *wa = NULL, *wb = NULL, *wz = NULL;
    double eval_drop, eval_zero;
    int64_t n, i;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(a, sizeof a, "%s/straight", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/resumed", fat5_test_tmpdir(T));
    snprintf(z, sizeof z, "%s/nodrop", fat5_test_tmpdir(T));
    c = ttr_config(T, data, a);
    c.grad_accum = 2;
    c.optim.total_steps = 4;
    c.save_steps = 0;
    c.eval_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "dropout_rate", "0.1"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "attention_dropout_rate", "0.05"));
    FAT5_CHECK(T, c.dropout_rate == 0.1 && c.attention_dropout_rate == 0.05);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "dropout_rate", "1") == FAT5_ERR_INVALID_ARG);
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, t->m->cfg.dropout_rate == 0.1 && t->m->cfg.attention_dropout_rate == 0.05);
    FAT5_REQUIRE_OK(T, fat5_train_evaluate(t, &eval_drop));
    for (i = 0; i < 4; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    FAT5_CHECK(T, !t->m->drop_on);   // off between steps
    n = fat5_model_param_count(fat5_train_model(t));
    wa = (float *)malloc((size_t)n * 4);
    wb = (float *)malloc((size_t)n * 4);
    wz = (float *)malloc((size_t)n * 4);
    FAT5_REQUIRE(T, wa && wb && wz);
    FAT5_REQUIRE_OK(T, ttr_weights(fat5_train_model(t), wa));
    fat5_train_destroy(t);
    t = NULL;
    {   // the saved config keeps the rates
        char *text = NULL;
        size_t len = 0;
        snprintf(p, sizeof p, "%s/step-00000004/config.json", a);
        FAT5_REQUIRE_OK(T, fat5__read_file(ctx, p, 1 << 20, &text, &len));
        FAT5_CHECK_MSG(T, strstr(text, "\"dropout_rate\": 0.1,") && strstr(text, "\"attention_dropout_rate\": 0.05,"),
                       "%s", text);
        fat5__free(ctx, text);
    }
    // stopped after step 2, resumed
    c.output_dir = b;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    c.resume = b;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, fat5_optim_get_step(t->o) == 2);
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    FAT5_REQUIRE_OK(T, ttr_weights(fat5_train_model(t), wb));
    FAT5_CHECK_MSG(T, memcmp(wa, wb, (size_t)n * 4) == 0, "resumed weights differ from the straight run's");
    fat5_train_destroy(t);
    t = NULL;
    // the same run without dropout: other weights, the same evaluation before training
    c.resume = "";
    c.output_dir = z;
    c.dropout_rate = 0;
    c.attention_dropout_rate = -1;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, t->m->cfg.dropout_rate == 0);
    FAT5_REQUIRE_OK(T, fat5_train_evaluate(t, &eval_zero));
    FAT5_CHECK_MSG(T, eval_zero == eval_drop, "evaluation: %.17g with dropout, %.17g without", eval_drop, eval_zero);
    for (i = 0; i < 4; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    FAT5_REQUIRE_OK(T, ttr_weights(fat5_train_model(t), wz));
    FAT5_CHECK_MSG(T, memcmp(wa, wz, (size_t)n * 4) != 0, "dropout 0.1 trained the same weights as none");
    fat5_train_destroy(t);
    free(wa);
    free(wb);
    free(wz);
}

// --init keeps the checkpoint's dropout_rate (0.1 here, where the presets say 0), the option
// replaces it
static void t_dropout_train_init(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 4);
    char init[600], out[600];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_model *m = NULL;
    fat5_model_config mc;
    int k;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(init, sizeof init, "%s/init", fat5_test_tmpdir(T));
    snprintf(out, sizeof out, "%s/out", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    mc = c.model;
    FAT5_CHECK(T, mc.dropout_rate == 0);   // the presets'
    mc.dropout_rate = 0.1;
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &mc, 4, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, init));
    fat5_model_destroy(m);
    for (k = 0; k < 2; k++) {
        snprintf(out, sizeof out, "%s/out%d", fat5_test_tmpdir(T), k);
        c.output_dir = out;
        c.init = init;
        if (k) FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "dropout_rate", "0.25"));
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
        FAT5_CHECK_MSG(T, t->m->cfg.dropout_rate == (k ? 0.25 : 0.1) && t->m->cfg.attention_dropout_rate < 0,
                       "run %d: dropout_rate %g", k, t->m->cfg.dropout_rate);
        fat5_train_destroy(t);
        t = NULL;
    }
}

// ---- on a GPU ----
#ifndef FAT5_NO_CUDA
// The whole model on the GPU with dropout 0.2 at the elementwise sites, and the attention
// probabilities' rate attn (0, or 0.1: the attention kernels' masks), against the CPU with the same
// seed and draw, in fp32 (loss to 1e-5 relative, every gradient to the fixtures' 1e-4 / 1e-3) and
// bf16 (test_gpu_model.c's relative L2 bound): the masks are the same, else the losses would
// differ by O(p).
static void td_gpu_model(fat5_test *T, fat5_dtype dtype, double attn) {
    fat5_ctx *gctx = tgm_ctx(T, dtype), *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *cpu = NULL, *gpu = NULL;
    fat5_batch b = tm_batch();
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_forward_result rc, rg, r0;
    float *gc = NULL, *gg = NULL;
    int i, bf16 = dtype == FAT5_DTYPE_BF16;
    double u = 1.0 / 512.0, bf16_tol = 4.0 * u * sqrt(6.0 * 4.0);
    if (!gctx) return;
    c.dropout_rate = 0.2;
    c.attention_dropout_rate = attn;
    c.d_model = 16, c.d_ff = 24, c.d_kv = 8;
    if (fat5_model_create(ctx, &c, 17, &cpu) != FAT5_OK || fat5_model_create(gctx, &c, 0, &gpu) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "models: %s / %s", fat5_last_error(ctx), fat5_last_error(gctx));
        goto done;
    }
    tm_perturb_norms(cpu, 0);
    for (i = 0; i < cpu->n_params; i++)
        FAT5_CHECK(T, fat5_model_set_param(gpu, cpu->params[i].name, cpu->w + cpu->params[i].offset,
                                           (int64_t)cpu->params[i].numel) == FAT5_OK);
    gc = (float *)malloc(cpu->n_floats * 4);
    gg = (float *)malloc(cpu->n_floats * 4);
    if (!gc || !gg) goto done;
    FAT5_CHECK(T, fat5_model_forward(gpu, &b, &lc, &r0) == FAT5_OK);   // without dropout
    FAT5_CHECK(T, fat5_model_set_dropout(cpu, 1, 31, 5) == FAT5_OK && fat5_model_set_dropout(gpu, 1, 31, 5) == FAT5_OK);
    fat5_model_zero_grad(cpu);
    fat5_model_zero_grad(gpu);
    if (fat5_model_forward(cpu, &b, &lc, &rc) || fat5_model_backward(cpu, 1.0f) || fat5_model_forward(gpu, &b, &lc, &rg) ||
        fat5_model_backward(gpu, 1.0f)) {
        FAT5_CHECK_MSG(T, 0, "%s: %s / %s", bf16 ? "bf16" : "fp32", fat5_last_error(ctx), fat5_last_error(gctx));
        goto done;
    }
    FAT5_CHECK_MSG(T, fabs(rg.loss - r0.loss) > 1e-3 * fabs(r0.loss), "dropout did not change the GPU's loss");
    FAT5_CHECK_MSG(T, fabs(rg.loss - rc.loss) <= (bf16 ? 1e-2 : 1e-5) * fabs(rc.loss), "loss: GPU %.9g, CPU %.9g",
                   rg.loss, rc.loss);
    memcpy(gc, FAT5__HOST(const float, cpu->gd), cpu->n_floats * 4);
    FAT5_CHECK(T, gpu->be->download(gctx, gg, gpu->gd, gpu->n_floats * 4) == FAT5_OK && gpu->be->sync(gctx) == FAT5_OK);
    for (i = 0; i < cpu->n_params; i++) {
        const fat5__param *p = &cpu->params[i];
        char name[200];
        snprintf(name, sizeof name, "%s grad %s", bf16 ? "bf16" : "fp32", p->name);
        if (!bf16) fat5_check_close(T, name, gg + p->offset, gc + p->offset, p->numel, 1e-4, 1e-3);
        else
            FAT5_CHECK_MSG(T, tgm_rel_l2(gg + p->offset, gc + p->offset, p->numel) <= bf16_tol, "%s: relative L2 %.3g > %.3g",
                           name, tgm_rel_l2(gg + p->offset, gc + p->offset, p->numel), bf16_tol);
    }
done:
    free(gc);
    free(gg);
    fat5_model_destroy(cpu);
    fat5_model_destroy(gpu);
    fat5_ctx_destroy(gctx);
}
static void t_gpu_dropout_fp32_vs_cpu(fat5_test *T) { td_gpu_model(T, FAT5_DTYPE_FP32, 0.0); }
static void t_gpu_dropout_bf16_vs_cpu(fat5_test *T) { td_gpu_model(T, FAT5_DTYPE_BF16, 0.0); }
static void t_gpu_dropout_attn_fp32_vs_cpu(fat5_test *T) { td_gpu_model(T, FAT5_DTYPE_FP32, 0.1); }
static void t_gpu_dropout_attn_bf16_vs_cpu(fat5_test *T) { td_gpu_model(T, FAT5_DTYPE_BF16, 0.1); }
#else
static void t_gpu_dropout_fp32_vs_cpu(fat5_test *T) { FAT5_SKIP(T, "built without CUDA"); }
static void t_gpu_dropout_bf16_vs_cpu(fat5_test *T) { FAT5_SKIP(T, "built without CUDA"); }
static void t_gpu_dropout_attn_fp32_vs_cpu(fat5_test *T) { FAT5_SKIP(T, "built without CUDA"); }
static void t_gpu_dropout_attn_bf16_vs_cpu(fat5_test *T) { FAT5_SKIP(T, "built without CUDA"); }
#endif

#define FAT5_TESTS_DROPOUT(X)                                                                           \
    X(dropout_philox_kat) X(dropout_rates) X(dropout_config) X(dropout_keep_rate) X(dropout_uniformity) \
    X(dropout_pure) X(dropout_cpu_attn) X(dropout_cpu_act) X(dropout_model_fd_gated)                    \
    X(dropout_model_fd_relu_tied) X(dropout_zero_bitwise) X(dropout_eval_unaffected)                    \
    X(dropout_train_resume) X(dropout_train_init) X(gpu_dropout_fp32_vs_cpu) X(gpu_dropout_bf16_vs_cpu) \
    X(gpu_dropout_attn_fp32_vs_cpu) X(gpu_dropout_attn_bf16_vs_cpu)
