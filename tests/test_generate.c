// test_generate.c — fat5_generate and the decoding-strategy ops (gen_process, gen_select,
// gen_beam): token-identical to Hugging Face's generate on the reference fixtures
// (tests/data/*/generate.json, written by ref/make_reference.py --generate), sampling checked
// statistically, option errors, generation_config.json, and the GPU against the CPU (skipped
// without a device).

static const char *const tgen_fixtures[] = {"t5_v10_relu_tied", "t5_v11_gated_gelu_untied", "umt5_gated_silu"};

static int tgen_contains(fat5_test *T, const char *needle) {
    return strstr(fat5_last_error(fat5_test_ctx(T)), needle) != NULL;
}
#define TGEN_EXPECT_ERR(T, call, status, needle)                                                    \
    do {                                                                                            \
        fat5_status s_ = (call);                                                                    \
        FAT5_CHECK_MSG(T, s_ == (status), "%s -> %s, want %s (%s)", #call, fat5_status_string(s_), \
                       fat5_status_string(status), fat5_last_error(fat5_test_ctx(T)));              \
        FAT5_CHECK_MSG(T, tgen_contains(T, needle), "message '%s' does not mention '%s'",          \
                       fat5_last_error(fat5_test_ctx(T)), needle);                                  \
    } while (0)

// A JSON file of a fixture directory, parsed; NULL (failure reported) when it cannot be read.
// Decoding-op options with every processor off: prompt of one token, the stop tokens eos [n_eos]
// (host arrays: the CPU ops read them in place), max_new tokens at most.
static fat5__gen_opts tgen_opts(const int32_t *eos, int n_eos, int max_new) {
    fat5__gen_opts o;
    memset(&o, 0, sizeof o);
    o.eos = FAT5__ADDR(eos), o.n_eos = n_eos;
    o.P = 1, o.rows_per_input = 1, o.max_new = max_new;
    o.rep = 1.0f, o.enc_rep = 1.0f, o.forced_bos = -1, o.begin_index = -1, o.decay_start = -1, o.decay_factor = 1.0f;
    o.temperature = 1.0f, o.top_p = 1.0f, o.typical_p = 1.0f, o.min_keep = 1, o.K = 1, o.length_penalty = 1.0f;
    return o;
}

static fat5__jdoc *tgen_json(fat5_test *T, fat5_ctx *ctx, const char *fixture, const char *file) {
    char path[600], *text = NULL;
    size_t len = 0;
    fat5__jdoc *doc = NULL;
    snprintf(path, sizeof path, "%s/%s/%s", FAT5_TEST_DATA, fixture, file);
    if (fat5__read_file(ctx, path, (size_t)16 << 20, &text, &len) != FAT5_OK ||
        fat5__json_parse(ctx, path, text, len, 16, &doc) != FAT5_OK)
        FAT5_CHECK_MSG(T, 0, "%s: %s", path, fat5_last_error(ctx));
    fat5__free(ctx, text);
    return doc;
}

// batch.json's inputs, packed: *n inputs, tokens and cu (caller frees both)
static int tgen_inputs(fat5_test *T, fat5_ctx *ctx, const char *fixture, int32_t **tok, int32_t **cu, int64_t *n) {
    fat5__jdoc *doc = tgen_json(T, ctx, fixture, "batch.json");
    const fat5__json *in, *row, *v;
    int64_t total = 0, i = 0, q = 0;
    if (!doc) return 0;
    in = fat5__json_get(fat5__json_root(doc), "inputs");
    for (row = in->child; row; row = row->next) total += (int64_t)row->n;
    *tok = (int32_t *)malloc((size_t)total * sizeof(int32_t));
    *cu = (int32_t *)malloc((in->n + 1) * sizeof(int32_t));
    (*cu)[0] = 0;
    for (row = in->child; row; row = row->next, i++) {
        for (v = row->child; v; v = v->next) {
            int64_t x = 0;
            fat5__json_as_i64(v, &x);
            (*tok)[q++] = (int32_t)x;
        }
        (*cu)[i + 1] = (int32_t)q;
    }
    *n = (int64_t)in->n;
    fat5__json_free(ctx, doc);
    return 1;
}

// Applies one options object of generate.json member by member through
// fat5_generate_config_from_json (so the reader of Hugging Face's names is exercised too).
static int tgen_options(fat5_test *T, fat5_ctx *ctx, const fat5__json *opts, fat5_generate_config *g) {
    const fat5__json *o;
    for (o = opts->child; o; o = o->next) {
        char buf[256];
        const char *val = o->type == FAT5__J_TRUE ? "true" : o->type == FAT5__J_FALSE ? "false" : o->str;
        if (o->type == FAT5__J_STRING) snprintf(buf, sizeof buf, "{\"%s\": \"%s\"}", o->key, val);
        else snprintf(buf, sizeof buf, "{\"%s\": %s}", o->key, val);
        if (fat5_generate_config_from_json(ctx, buf, strlen(buf), g) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "option %s: %s", buf, fat5_last_error(ctx));
            return 0;
        }
    }
    return 1;
}

// Runs every case of a fixture's generate.json on model m (on its context) and compares the tokens
// exactly and the scores to atol + rtol |score|. Returns the number of cases run.
static int tgen_run_fixture(fat5_test *T, fat5_model *m, const char *fixture, int use_graph, double atol,
                            double rtol) {
    fat5_ctx *tctx = fat5_test_ctx(T), *ctx = m->ctx;
    fat5__jdoc *doc = tgen_json(T, tctx, fixture, "generate.json");
    const fat5__json *c;
    int32_t *tok = NULL, *cu = NULL;
    int64_t n = 0;
    int cases = 0;
    if (!doc || !tgen_inputs(T, tctx, fixture, &tok, &cu, &n)) {
        fat5__json_free(tctx, doc);
        return 0;
    }
    for (c = fat5__json_get(fat5__json_root(doc), "cases")->child; c; c = c->next) {
        const char *name = fat5__json_get(c, "name")->str;
        const fat5__json *outs = fat5__json_get(c, "outputs"), *scores = fat5__json_get(c, "scores"), *row, *v, *sc;
        fat5_generate_config g = fat5_generate_config_from_model(m);
        fat5_generate_result r;
        int64_t s = 0, longest = 0;
        g.use_graph = use_graph;
        if (!tgen_options(T, tctx, fat5__json_get(c, "options"), &g)) continue;
        if (fat5_generate(m, tok, cu, n, &g, &r) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s %s: %s", fixture, name, fat5_last_error(ctx));
            continue;
        }
        cases++;
        FAT5_CHECK_MSG(T, r.n_seq == (int64_t)outs->n, "%s %s: %lld sequences, HF %zu", fixture, name,
                       (long long)r.n_seq, outs->n);
        for (row = outs->child, sc = scores->child; row && sc && s < r.n_seq; row = row->next, sc = sc->next, s++) {
            int64_t len = r.cu_seqlens[s + 1] - r.cu_seqlens[s], j = 0, bad = -1;
            double ref = 0;
            fat5__json_as_double(sc, &ref);
            if (len > longest) longest = len;
            for (v = row->child; v; v = v->next, j++) {
                int64_t x = 0;
                fat5__json_as_i64(v, &x);
                if (bad < 0 && (j >= len || r.tokens[r.cu_seqlens[s] + j] != x)) bad = j;
            }
            if (bad < 0 && len != (int64_t)row->n) bad = (int64_t)row->n;
            FAT5_CHECK_MSG(T, bad < 0, "%s %s: sequence %lld differs from HF at token %lld (length %lld, HF %zu)",
                           fixture, name, (long long)s, (long long)bad, (long long)len, row->n);
            FAT5_CHECK_MSG(T, fabs(r.scores[s] - ref) <= atol + rtol * fabs(ref),
                           "%s %s: sequence %lld score %.7f, HF %.7f", fixture, name, (long long)s, r.scores[s], ref);
        }
        // greedy: one step per generated token of the longest row, and no more (rows that finish stop
        // the loop once all have); beam search runs at least as long as its longest hypothesis
        if (g.num_beams == 1)
            FAT5_CHECK_MSG(T, r.steps == longest, "%s %s: %lld steps for a longest output of %lld", fixture, name,
                           (long long)r.steps, (long long)longest);
        else
            FAT5_CHECK_MSG(T, r.steps >= longest && r.steps <= g.max_new_tokens, "%s %s: %lld steps", fixture, name,
                           (long long)r.steps);
        fat5_generate_result_destroy(ctx, &r);
    }
    free(tok);
    free(cu);
    fat5__json_free(tctx, doc);
    return cases;
}

// Greedy (32+ tokens with min_new_tokens, and plain), repetition penalty, no-repeat n-grams, beam
// search (4 beams, length penalties 0.6 / 2 / 1.5 / -0.5, early_stopping false / true / "never",
// num_return_sequences 2-3), and frequent-token EOS cases where rows and beams end at different
// steps: tokens identical to Hugging Face, scores within 1e-4, on a batch of inputs of different
// lengths, fp32 on the CPU.
static void t_generate_hf_fixtures(fat5_test *T) {
    int k;
    for (k = 0; k < 3; k++) {
        char dir[512];
        fat5_model *m = NULL;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(fat5_test_ctx(T), dir, &m));
        FAT5_CHECK_MSG(T, tgen_run_fixture(T, m, tgen_fixtures[k], 1, 1e-4, 1e-4) == 14, "%s: not every case ran",
                       tgen_fixtures[k]);
        fat5_model_destroy(m);
    }
}

// ---- the select op, fed crafted distributions ----

// Draws `draws` tokens from one row of logits x [V] with the CPU select op (each draw another
// row id, so another Philox counter); counts[v] += 1 per draw.
static void tgen_draws(fat5_test *T, const float *x, int V, int draws, int top_k, float top_p, float temp,
                       uint64_t seed, int64_t *counts) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int chunk = 500, done_draws = 0, e, Lh = draws / chunk + 2;
    float *xs = (float *)malloc((size_t)chunk * V * sizeof(float)), *score = (float *)calloc((size_t)chunk, 4);
    int32_t *tok = (int32_t *)calloc((size_t)chunk, 4), *hist = (int32_t *)calloc((size_t)chunk * Lh, 4);
    int32_t *lens = (int32_t *)calloc((size_t)chunk, 4), *done = (int32_t *)calloc((size_t)chunk, 4);
    int32_t *rows = (int32_t *)calloc((size_t)chunk, 4);
    fat5__gen_opts o = tgen_opts(NULL, 0, 1 << 30);
    o.do_sample = 1, o.temperature = temp, o.top_k = top_k, o.top_p = top_p, o.seed = seed;
    while (done_draws < draws) {
        int n = draws - done_draws < chunk ? draws - done_draws : chunk;
        for (e = 0; e < n; e++) memcpy(xs + (size_t)e * V, x, (size_t)V * sizeof(float));
        for (e = 0; e < n; e++) rows[e] = e, lens[e] = done_draws / chunk, done[e] = 0;   // (row, len) unique
        if (fat5__cpu_gen_process(ctx, FAT5__ADDR(xs), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows), n, V, Lh,
                                  &o) != FAT5_OK ||
            fat5__cpu_gen_select(ctx, FAT5__ADDR(xs), FAT5__ADDR(tok), FAT5__ADDR(hist), FAT5__ADDR(lens),
                                 FAT5__ADDR(done), FAT5__ADDR(score), FAT5__ADDR(rows), n, V, Lh, &o) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "gen_select: %s", fat5_last_error(ctx));
            break;
        }
        for (e = 0; e < n; e++) counts[tok[e]]++;
        done_draws += n;
    }
    free(xs), free(score), free(tok), free(hist), free(lens), free(done), free(rows);
}

// top-k and top-p never emit a token outside their set, and every token of the set appears
static void t_generate_sample_filters(fat5_test *T) {
    // probabilities 0.30 0.25 0.20 0.10 0.08 0.04 0.02 0.01 (as logits, shuffled)
    static const float p[8] = {0.10f, 0.30f, 0.02f, 0.20f, 0.01f, 0.25f, 0.08f, 0.04f};
    float x[8];
    int64_t counts[8];
    int v;
    for (v = 0; v < 8; v++) x[v] = logf(p[v]);
    // top_k 3: {1, 5, 3}
    memset(counts, 0, sizeof counts);
    tgen_draws(T, x, 8, 5000, 3, 1.0f, 1.0f, 11, counts);
    for (v = 0; v < 8; v++)
        FAT5_CHECK_MSG(T, (v == 1 || v == 5 || v == 3) ? counts[v] > 0 : counts[v] == 0, "top_k 3: token %d drawn %lld times",
                       v, (long long)counts[v]);
    // top_p 0.7: 0.30 + 0.25 = 0.55 < 0.7, so 0.20 is kept too (mass before it < top_p), 0.10 is not
    memset(counts, 0, sizeof counts);
    tgen_draws(T, x, 8, 5000, 0, 0.7f, 1.0f, 12, counts);
    for (v = 0; v < 8; v++)
        FAT5_CHECK_MSG(T, (v == 1 || v == 5 || v == 3) ? counts[v] > 0 : counts[v] == 0, "top_p 0.7: token %d drawn %lld times",
                       v, (long long)counts[v]);
    // top_p 0.28: only the most likely token (the mass before the second, 0.30, is not below 0.28)
    memset(counts, 0, sizeof counts);
    tgen_draws(T, x, 8, 2000, 0, 0.28f, 1.0f, 13, counts);
    FAT5_CHECK_MSG(T, counts[1] == 2000, "top_p 0.28: the top token drawn %lld of 2000 times", (long long)counts[1]);
    // top_k 4 then top_p 0.8 of the renormalised four (0.30 0.25 0.20 0.10 / 0.85): 0.353 + 0.294 =
    // 0.647 < 0.8 keeps the third, 0.647 + 0.235 = 0.882 >= 0.8 drops the fourth
    memset(counts, 0, sizeof counts);
    tgen_draws(T, x, 8, 5000, 4, 0.8f, 1.0f, 14, counts);
    for (v = 0; v < 8; v++)
        FAT5_CHECK_MSG(T, (v == 1 || v == 5 || v == 3) ? counts[v] > 0 : counts[v] == 0,
                       "top_k 4 + top_p 0.8: token %d drawn %lld times", v, (long long)counts[v]);
}

// Pearson's chi-square of counts against probabilities q (df = bins - 1)
static double tgen_chi2(const int64_t *counts, const double *q, int bins, int64_t n) {
    double c = 0;
    int v;
    for (v = 0; v < bins; v++) {
        double e = q[v] * (double)n;
        c += ((double)counts[v] - e) * ((double)counts[v] - e) / e;
    }
    return c;
}

// The empirical distribution of 40000 draws matches the softmax of the (scaled, filtered) logits:
// chi-square below the p = 1e-6 critical value (df 7: 40.52; df 4: 33.38), so a correct sampler
// fails about once in a million runs, while a sampler off by 2 % of a bin's mass is caught with
// near certainty at this n. Seeds are fixed, so the outcome is the same on every run.
static void t_generate_sample_chi2(fat5_test *T) {
    float x[8];
    double q[8], z = 0;
    int64_t counts[8];
    int v, n = 40000;
    fat5_rng r = fat5_rng_init(99);
    for (v = 0; v < 8; v++) x[v] = (float)(2.0 * fat5_rng_normal(&r));
    // temperature 1.5, no filter
    for (v = 0; v < 8; v++) z += exp((double)(x[v] / 1.5f));
    for (v = 0; v < 8; v++) q[v] = exp((double)(x[v] / 1.5f)) / z;
    memset(counts, 0, sizeof counts);
    tgen_draws(T, x, 8, n, 0, 1.0f, 1.5f, 2024, counts);
    {
        double c = tgen_chi2(counts, q, 8, n);
        FAT5_CHECK_MSG(T, c < 40.52, "chi-square %.2f >= 40.52 (df 7, p = 1e-6)", c);
    }
    // top_k 5 at temperature 0.8: the softmax over the five largest
    {
        int idx[8], i, j, kept[8] = {0};
        double qq[5], zz = 0;
        int64_t c5[5];
        for (i = 0; i < 8; i++) idx[i] = i;
        for (i = 0; i < 8; i++)
            for (j = i + 1; j < 8; j++)
                if (x[idx[j]] > x[idx[i]]) {
                    int t = idx[i];
                    idx[i] = idx[j], idx[j] = t;
                }
        for (i = 0; i < 5; i++) kept[idx[i]] = 1, zz += exp((double)(x[idx[i]] / 0.8f));
        for (i = 0; i < 5; i++) qq[i] = exp((double)(x[idx[i]] / 0.8f)) / zz;
        memset(counts, 0, sizeof counts);
        tgen_draws(T, x, 8, n, 5, 1.0f, 0.8f, 7, counts);
        for (i = 0; i < 5; i++) c5[i] = counts[idx[i]];
        for (v = 0; v < 8; v++)
            if (!kept[v]) FAT5_CHECK_MSG(T, counts[v] == 0, "top_k 5: excluded token %d drawn", v);
        {
            double c = tgen_chi2(c5, qq, 5, n);
            FAT5_CHECK_MSG(T, c < 33.38, "top_k 5: chi-square %.2f >= 33.38 (df 4, p = 1e-6)", c);
        }
    }
}

// A seed gives the same tokens on every run (and another seed other tokens); the scores are the
// log-probabilities of the drawn tokens under the processed distribution.
static void t_generate_sample_seeded(fat5_test *T) {
    char dir[512];
    fat5_model *m = NULL;
    fat5_generate_config g;
    fat5_generate_result a, b, c;
    int32_t tok[9] = {5, 9, 13, 1, 7, 8, 22, 4, 1}, cu[3] = {0, 4, 9};
    int64_t i;
    int same_ab = 1, same_ac = 1;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[1]);
    FAT5_REQUIRE_OK(T, fat5_model_load(fat5_test_ctx(T), dir, &m));
    g = fat5_generate_config_from_model(m);
    g.do_sample = 1, g.temperature = 1.5, g.top_k = 20, g.top_p = 0.95, g.max_new_tokens = 24, g.seed = 1234;
    g.num_return_sequences = 3;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, 2, &g, &a));
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, 2, &g, &b));
    g.seed = 1235;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, 2, &g, &c));
    FAT5_CHECK(T, a.n_seq == 6 && b.n_seq == 6 && c.n_seq == 6);
    same_ab = a.cu_seqlens[6] == b.cu_seqlens[6];
    for (i = 0; same_ab && i < a.cu_seqlens[6]; i++) same_ab = a.tokens[i] == b.tokens[i];
    for (i = 0; same_ab && i < 6; i++) same_ab = a.scores[i] == b.scores[i];
    same_ac = a.cu_seqlens[6] == c.cu_seqlens[6];
    for (i = 0; same_ac && i < a.cu_seqlens[6]; i++) same_ac = a.tokens[i] == c.tokens[i];
    FAT5_CHECK_MSG(T, same_ab, "the same seed gave different tokens or scores");
    FAT5_CHECK_MSG(T, !same_ac, "seeds 1234 and 1235 gave the same %d tokens", (int)a.cu_seqlens[6]);
    // the three samples of an input differ (independent rows)
    FAT5_CHECK(T, a.cu_seqlens[1] != a.cu_seqlens[2] - a.cu_seqlens[1] ||
                      memcmp(a.tokens, a.tokens + a.cu_seqlens[1], (size_t)a.cu_seqlens[1] * 4) != 0);
    for (i = 0; i < 6; i++) FAT5_CHECK(T, a.scores[i] < 0 && isfinite(a.scores[i]));
    fat5_generate_result_destroy(fat5_test_ctx(T), &a);
    fat5_generate_result_destroy(fat5_test_ctx(T), &b);
    fat5_generate_result_destroy(fat5_test_ctx(T), &c);
    // sampling with top_k 1 is greedy decoding (and its kept set has probability 1: scores 0)
    g = fat5_generate_config_from_model(m);
    g.max_new_tokens = 16;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, 2, &g, &a));
    g.do_sample = 1, g.top_k = 1, g.temperature = 0.7, g.seed = 5;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, 2, &g, &b));
    FAT5_CHECK(T, a.n_seq == 2 && b.n_seq == 2 && a.cu_seqlens[2] == b.cu_seqlens[2] &&
                      memcmp(a.tokens, b.tokens, (size_t)a.cu_seqlens[2] * 4) == 0);
    FAT5_CHECK(T, b.scores[0] == 0.0f && b.scores[1] == 0.0f && a.scores[0] < 0.0f);
    fat5_generate_result_destroy(fat5_test_ctx(T), &a);
    fat5_generate_result_destroy(fat5_test_ctx(T), &b);
    fat5_model_destroy(m);
}

// Bad requests are refused with FAT5_ERR_INVALID_ARG and a message naming the field.
static void t_generate_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_generate_config g0, g;
    fat5_generate_result r;
    int32_t tok[4] = {5, 9, 13, 1}, cu[3] = {0, 3, 4}, cu_empty[3] = {0, 4, 4}, bad_tok[4] = {5, 9, 4000, 1};
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[0]);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    g0 = fat5_generate_config_from_model(m);
    g0.max_new_tokens = 4;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 0, &g0, &r), FAT5_ERR_INVALID_ARG, "no input");
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu_empty, 2, &g0, &r), FAT5_ERR_INVALID_ARG, "empty");
    TGEN_EXPECT_ERR(T, fat5_generate(m, bad_tok, cu, 2, &g0, &r), FAT5_ERR_INVALID_ARG, "vocab_size");
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, NULL, &r), FAT5_ERR_INVALID_ARG, "config");
    g = g0, g.max_new_tokens = 0;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "max_new_tokens");
    g = g0, g.max_new_tokens = (int64_t)1 << 40;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "max_new_tokens");
    g = g0, g.max_new_tokens = 1 << 28, g.num_beams = 8;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "cache");
    g = g0, g.min_new_tokens = -1;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "min_new_tokens");
    g = g0, g.num_beams = 0;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "num_beams");
    g = g0, g.num_beams = 1000;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "num_beams");
    g = g0, g.do_sample = 1, g.top_p = 0;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "top_p");
    g = g0, g.do_sample = 1, g.top_p = 1.5;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "top_p");
    g = g0, g.do_sample = 1, g.temperature = 0;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "temperature");
    g = g0, g.temperature = -1;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "temperature");
    g = g0, g.top_k = -2;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "top_k");
    g = g0, g.num_beams = 2, g.num_return_sequences = 3;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "num_return_sequences");
    g = g0, g.num_return_sequences = 2;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "num_return_sequences");
    g = g0, g.num_return_sequences = 0;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "num_return_sequences");
    g = g0, g.repetition_penalty = 0;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "repetition_penalty");
    g = g0, g.no_repeat_ngram_size = -1;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "no_repeat_ngram_size");
    g = g0, g.early_stopping = 3;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "early_stopping");
    g = g0, g.eos_token_id = 96;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "eos_token_id");
    g = g0, g.decoder_start_token_id = 500;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "decoder_start_token_id");
    g = g0, g.forced_bos_token_id = 96;
    TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "forced_bos_token_id");
    {   // the lists: ids in the vocabulary, sequences non-empty, prompts of one length, one per input
        static const int32_t big[2] = {3, 96}, cu3[3] = {0, 1, 3}, cu_empty[2] = {0, 0}, ids3[3] = {0, 4, 5};
        static const int32_t eos5[5] = {1, 2, 3, 4, 5};
        g = g0, g.suppress_tokens.ids = big, g.suppress_tokens.n = 2;
        TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "suppress_tokens holds 96");
        g = g0, g.bad_words_ids.ids = ids3, g.bad_words_ids.cu = cu_empty, g.bad_words_ids.n = 1;
        TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "bad_words_ids sequence 0 is empty");
        g = g0, g.decoder_input_ids.ids = ids3, g.decoder_input_ids.cu = cu3, g.decoder_input_ids.n = 2;
        TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "decoder_input_ids row 1");
        g = g0, g.sequence_bias.ids = ids3, g.sequence_bias.cu = cu3, g.sequence_bias.n = 2;
        TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "sequence_bias_values");
        g = g0, g.num_beams = 16, g.eos_token_ids.ids = eos5, g.eos_token_ids.n = 5;
        TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "96 candidates");
        g = g0, g.max_length = 1;
        TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG, "max_length = 1");
    }
    // JSON options
    g = g0;
    TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"top_p\": 2}", 12, &g), FAT5_ERR_INVALID_ARG, "top_p");
    TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"num_beams\": \"4\"}", 18, &g), FAT5_ERR_INVALID_ARG,
                    "num_beams");
    TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"early_stopping\": \"sometimes\"}", 31, &g),
                    FAT5_ERR_INVALID_ARG, "early_stopping");
    TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"do_sample\": 1}", 16, &g), FAT5_ERR_INVALID_ARG,
                    "do_sample");
    {   // transformers' keys for modes fat5 does not run are refused by name, unless at their off value
        static const char *const refused[] = {"{\"constraints\": [1]}",
                                              "{\"guidance_scale\": 1.5}",
                                              "{\"penalty_alpha\": 0.6}", "{\"dola_layers\": \"low\"}",
                                              "{\"watermarking_config\": {\"greenlist_ratio\": 0.25}}",
                                              "{\"top_h\": 0.4}", "{\"token_healing\": true}",
                                              "{\"prompt_lookup_num_tokens\": 3}", "{\"use_mtp\": true}"};
        static const char *const off = "{\"num_beam_groups\": 1, \"diversity_penalty\": 0.0, \"force_words_ids\": null, "
                                       "\"stop_strings\": [], \"guidance_scale\": 1, \"token_healing\": false, "
                                       "\"use_cache\": true, \"output_scores\": false, \"my_own_key\": 3}";
        size_t i;
        for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
            char key[64];
            const char *q = strchr(refused[i] + 2, '"');
            snprintf(key, sizeof key, "%.*s is not supported", (int)(q - refused[i] - 2), refused[i] + 2);
            TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, refused[i], strlen(refused[i]), &g),
                            FAT5_ERR_UNSUPPORTED, key);
        }
        FAT5_CHECK(T, memcmp(&g, &g0, sizeof g) == 0);
        FAT5_CHECK_MSG(T, fat5_generate_config_from_json(ctx, off, strlen(off), &g) == FAT5_OK, "%s", fat5_last_error(ctx));
        g = g0;
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"sequence_bias\": [[3, 1.0]]}", 29, &g),
                        FAT5_ERR_INVALID_ARG, "sequence_bias[0] must be a pair");
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"bad_words_ids\": [3]}", 22, &g), FAT5_ERR_INVALID_ARG,
                        "bad_words_ids[0] must be a non-empty list");
        {   // force_words_ids: transformers 4's checks of its two nestings and of the mode
            static const char *const bad[][2] = {
                {"{\"force_words_ids\": [[3]]}", "needs num_beams > 1"},
                {"{\"force_words_ids\": [], \"num_beams\": 2}", "force_words_ids must be a non-empty list"},
                {"{\"force_words_ids\": [3], \"num_beams\": 2}", "force_words_ids[0] must be a non-empty list"},
                {"{\"force_words_ids\": [[3], []], \"num_beams\": 2}", "force_words_ids[1] must be a non-empty list"},
                {"{\"force_words_ids\": [[[3], 4]], \"num_beams\": 2}", "force_words_ids[0] mixes lists and ids"},
                {"{\"force_words_ids\": [[3, [4]]], \"num_beams\": 2}", "force_words_ids[0] holds a list among ids"},
                {"{\"force_words_ids\": [[3, -1]], \"num_beams\": 2}", "force_words_ids[0] holds a value"},
                {"{\"force_words_ids\": [[[3, 4], [3]]], \"num_beams\": 2}", "one is a prefix of the other"},
                {"{\"force_words_ids\": [[[3], [3]]], \"num_beams\": 2}", "one is a prefix of the other"},
                {"{\"force_words_ids\": [[3]], \"num_beams\": 2, \"do_sample\": true}", "with do_sample"},
                {"{\"force_words_ids\": [[3]], \"num_beams\": 4, \"num_beam_groups\": 2, \"diversity_penalty\": 0.5}",
                 "with num_beam_groups = 2"}};
            static const char *const good = "{\"force_words_ids\": [[3, 4], [[5], [6, 7]]], \"num_beams\": 2}";
            static const int32_t want_ids[] = {3, 4, 5, 6, 7}, want_cu[] = {0, 2, 3, 5}, want_con[] = {0, 1, 1};
            size_t i;
            for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                g = g0;
                TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, bad[i][0], strlen(bad[i][0]), &g),
                                FAT5_ERR_INVALID_ARG, bad[i][1]);
            }
            g = g0;
            FAT5_CHECK_MSG(T, fat5_generate_config_from_json(ctx, good, strlen(good), &g) == FAT5_OK, "%s",
                           fat5_last_error(ctx));
            FAT5_CHECK(T, g.force_words_ids.n == 3 && g.force_words_constraint &&
                              !memcmp(g.force_words_ids.ids, want_ids, sizeof want_ids) &&
                              !memcmp(g.force_words_ids.cu, want_cu, sizeof want_cu) &&
                              !memcmp(g.force_words_constraint, want_con, sizeof want_con));
            // the C fields: a constraint numbering out of order, an id outside the vocabulary
            {
                static const int32_t skip[] = {0, 2, 2};
                g.force_words_constraint = skip;
                TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG,
                                "force_words_constraint[1] = 2");
                g.force_words_constraint = want_con;
                g.force_words_ids.ids = (const int32_t[]){3, 4, 5, 6, 100000};
                TGEN_EXPECT_ERR(T, fat5_generate(m, tok, cu, 2, &g, &r), FAT5_ERR_INVALID_ARG,
                                "force_words_ids holds 100000");
                g.force_words_ids.ids = want_ids;
            }
            g = g0;
        }
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"suppress_tokens\": [1, -2]}", 28, &g),
                        FAT5_ERR_INVALID_ARG, "suppress_tokens[1] is not a token id");
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"exponential_decay_length_penalty\": [3]}", 41, &g),
                        FAT5_ERR_INVALID_ARG, "exponential_decay_length_penalty");
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"typical_p\": 0}", 16, &g), FAT5_ERR_INVALID_ARG,
                        "typical_p");
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"num_beams\": 4, \"num_beam_groups\": 3}", 38, &g),
                        FAT5_ERR_INVALID_ARG, "num_beam_groups = 3 must divide num_beams = 4");
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"num_beams\": 4, \"num_beam_groups\": 2, \"do_sample\": true}",
                                                          57, &g),
                        FAT5_ERR_INVALID_ARG, "group beam search does not sample");
        TGEN_EXPECT_ERR(T, fat5_generate_config_from_json(ctx, "{\"diversity_penalty\": -1}", 25, &g), FAT5_ERR_INVALID_ARG,
                        "diversity_penalty");
    }
    FAT5_CHECK(T, memcmp(&g, &g0, sizeof g) == 0);   // failed overlays change nothing
    fat5_model_destroy(m);
}

// Hugging Face's names in generation_config.json: overlay, max_length / min_length, eos lists, nulls
// and unknown keys; and the file beside a checkpoint is read by fat5_model_load.
static void t_generate_config_json(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *js = "{\"max_length\": 33, \"min_length\": 5, \"num_beams\": 4, \"early_stopping\": \"never\", "
                     "\"eos_token_id\": [7, 8], \"pad_token_id\": 2, \"decoder_start_token_id\": 3, "
                     "\"length_penalty\": 0.5, \"no_repeat_ngram_size\": 3, \"top_p\": null, "
                     "\"transformers_version\": \"5.23.0\", \"do_sample\": false, \"seed\": 42}";
    fat5_generate_config g = fat5_generate_config_default();
    char src[512], dst[600], path[700];
    fat5_model *m = NULL, *m2 = NULL;
    FILE *f;
    FAT5_REQUIRE_OK(T, fat5_generate_config_from_json(ctx, js, strlen(js), &g));
    FAT5_CHECK(T, g.max_length == 33 && g.max_new_tokens == 20 && g.min_length == 5 && g.min_new_tokens == 0);
    FAT5_CHECK(T, g.num_beams == 4 && g.early_stopping == 2);
    FAT5_CHECK(T, g.eos_token_id == 7 && g.pad_token_id == 2 && g.decoder_start_token_id == 3);
    FAT5_CHECK(T, g.eos_token_ids.n == 2 && g.eos_token_ids.ids[0] == 7 && g.eos_token_ids.ids[1] == 8);
    FAT5_CHECK(T, g.length_penalty == 0.5 && g.no_repeat_ngram_size == 3 && g.top_p == 1.0 && g.seed == 42);
    snprintf(src, sizeof src, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[0]);
    snprintf(dst, sizeof dst, "%s/genconfig", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &m));
    g = fat5_generate_config_from_model(m);
    FAT5_CHECK(T, g.max_new_tokens == 20 && g.eos_token_id == 1 && g.decoder_start_token_id == 0 && g.top_k == 50);
    FAT5_REQUIRE_OK(T, fat5_model_save(m, dst));
    snprintf(path, sizeof path, "%s/generation_config.json", dst);
    f = fopen(path, "w");
    FAT5_REQUIRE(T, f != NULL);
    fputs("{\"max_new_tokens\": 7, \"eos_token_id\": 5, \"num_beams\": 2}", f);
    fclose(f);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dst, &m2));
    g = fat5_generate_config_from_model(m2);
    FAT5_CHECK(T, g.max_new_tokens == 7 && g.eos_token_id == 5 && g.num_beams == 2 && g.pad_token_id == 0);
    fat5_model_destroy(m2);
    m2 = NULL;
    f = fopen(path, "w");
    FAT5_REQUIRE(T, f != NULL);
    fputs("{\"num_beams\": -3}", f);
    fclose(f);
    TGEN_EXPECT_ERR(T, fat5_model_load(ctx, dst, &m2), FAT5_ERR_INVALID_ARG, "num_beams");
    FAT5_CHECK(T, tgen_contains(T, "generation_config.json"));
    fat5_model_destroy(m2);
    fat5_model_destroy(m);
    remove(path);
    snprintf(path, sizeof path, "%s/config.json", dst);
    remove(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    remove(path);
    rmdir(dst);
}

// The beam op keeps Hugging Face's invariants on random log-probabilities: finished slots sorted
// best first, histories consistent with src, scores = sums of the chosen log-probabilities.
static void t_generate_beam_op(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    enum { K = 3, V = 11, N = 2, R = N * K, MAXN = 6, LH = MAXN + 1 };
    float x[R * V], bscore[R], fin_score[R];
    int32_t tok[R], src[R], hist[R * LH], lens[R] = {0}, fin_tok[R * (LH - 1)], fin_len[R] = {0}, fin_flag[R] = {0};
    int32_t unsat[N] = {1, 1}, done[R] = {0}, rows[R], scratch[R * LH];
    double sums[R] = {0};
    fat5_rng rng = fat5_rng_init(5);
    int t, r, v, k;
    static const int32_t eos[1] = {2};
    fat5__gen_opts o = tgen_opts(eos, 1, MAXN);
    o.log_softmax = 1, o.K = K, o.rows_per_input = K, o.min_keep = 2;
    for (r = 0; r < R; r++) rows[r] = r, bscore[r] = r % K ? -1.0e9f : 0.0f, fin_score[r] = -1.0e9f, hist[r * LH] = 0;
    for (t = 0; t < MAXN; t++) {
        double prev[R];
        int32_t prevhist[R * LH];
        for (r = 0; r < R; r++) prev[r] = sums[r];
        memcpy(prevhist, hist, sizeof hist);
        for (r = 0; r < R * V; r++) x[r] = (float)fat5_rng_normal(&rng);
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(x), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                                 R, V, LH, &o));
        {
            float xl[R * V];
            memcpy(xl, x, sizeof x);
            FAT5_REQUIRE_OK(T, fat5__cpu_gen_beam(ctx, FAT5__ADDR(x), FAT5__ADDR(tok), FAT5__ADDR(src), FAT5__ADDR(hist),
                                                  FAT5__ADDR(lens), FAT5__ADDR(bscore), FAT5__ADDR(fin_score),
                                                  FAT5__ADDR(fin_tok), FAT5__ADDR(fin_len), FAT5__ADDR(fin_flag),
                                                  FAT5__ADDR(unsat), FAT5__ADDR(done), FAT5__ADDR(rows),
                                                  FAT5__ADDR(scratch), R, V, LH, &o));
            for (r = 0; r < R; r++) {
                int s = src[r], j;
                FAT5_CHECK(T, s / K == r / K && lens[r] == t + 1 && hist[r * LH + t + 1] == tok[r]);
                for (j = 0; j <= t; j++) FAT5_CHECK(T, hist[r * LH + j] == prevhist[s * LH + j]);
                sums[r] = (t == 0 ? 0.0 : prev[s]) + (double)xl[(size_t)s * V + tok[r]];
                if (bscore[r] > -1.0e8f) FAT5_CHECK_MSG(T, fabs(bscore[r] - sums[r]) < 1e-4, "beam score %g vs %g",
                                                        bscore[r], sums[r]);
                FAT5_CHECK(T, tok[r] != 2 || t + 1 >= MAXN);   // running beams never end in EOS
            }
        }
        for (r = 0; r < N; r++)
            for (k = 1; k < K; k++) FAT5_CHECK(T, fin_score[r * K + k - 1] >= fin_score[r * K + k]);
        for (v = 0; v < N; v++)
            if (done[v]) break;
    }
    // after max_new steps every input holds K finished hypotheses
    for (r = 0; r < R; r++) FAT5_CHECK(T, fin_flag[r] == 1 && fin_len[r] >= 1 && fin_len[r] <= MAXN);
    FAT5_CHECK(T, done[0] == 1 && done[1] == 1);
}

// The processors on a crafted history: repetition penalty on each distinct token once, n-gram
// bans, min_new_tokens.
static void t_generate_process_op(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    enum { V = 8, LH = 8 };
    float x[V] = {1.0f, -1.0f, 2.0f, -2.0f, 0.5f, 3.0f, -0.5f, 0.0f}, y[V];
    int32_t hist[LH] = {0, 2, 3, 2, 3, 2, 0, 0}, lens[1] = {5}, rows[1] = {0};
    static const int32_t eos[1] = {1};
    fat5__gen_opts o = tgen_opts(eos, 1, 100);
    int v;
    // history 0 2 3 2 3 2: penalty 2 on 0, 2, 3; 2-grams ending after "2": (2,3) -> 3 banned;
    // 3-grams after "3 2": (3,2,3) -> 3 banned
    memcpy(y, x, sizeof x);
    o.rep = 2.0f;
    FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(y), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                             1, V, LH, &o));
    for (v = 0; v < V; v++) {
        float want = (v == 0 || v == 2 || v == 3) ? (x[v] < 0 ? x[v] * 2.0f : x[v] / 2.0f) : x[v];
        FAT5_CHECK_MSG(T, y[v] == want, "repetition penalty: token %d: %g, want %g", v, y[v], want);
    }
    memcpy(y, x, sizeof x);
    o.rep = 1.0f, o.ngram = 2, o.min_new = 6;
    FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(y), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                             1, V, LH, &o));
    for (v = 0; v < V; v++)
        FAT5_CHECK_MSG(T, (v == 3 || v == 1) ? isinf(y[v]) && y[v] < 0 : y[v] == x[v], "2-gram / min_new: token %d: %g", v,
                       y[v]);
    memcpy(y, x, sizeof x);
    o.ngram = 3, o.min_new = 5, o.log_softmax = 1;
    FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(y), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                             1, V, LH, &o));
    {
        double z = 0;
        for (v = 0; v < V; v++) z += exp((double)x[v]);
        for (v = 0; v < V; v++)
            FAT5_CHECK_MSG(T, v == 3 ? isinf(y[v]) : fabs(y[v] - (x[v] - log(z))) < 1e-6, "3-gram: token %d: %g", v, y[v]);
    }
}

#ifndef FAT5_NO_CUDA
// ---- GPU ----

static fat5_ctx *tgen_gpu_ctx(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_status st;
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = dtype;
    char why[512];
    st = fat5_ctx_create(&cc, &ctx, why, sizeof why);
    if (st == FAT5_OK) return ctx;
    if (st == FAT5_ERR_NO_DEVICE) {
        snprintf(T->skip_reason, sizeof T->skip_reason, "no CUDA device: %.200s", why);
        T->skipped = 1;
    } else {
        FAT5_CHECK_MSG(T, 0, "GPU context: %s: %s", fat5_status_string(st), why);
    }
    fat5_ctx_destroy(ctx);
    return NULL;
}

// A fixture model on the GPU context
static fat5_model *tgen_gpu_model(fat5_test *T, fat5_ctx *g, int k) {
    char dir[512];
    fat5_model *m = NULL;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[k]);
    if (fat5_model_load(g, dir, &m) != FAT5_OK) FAT5_CHECK_MSG(T, 0, "GPU load: %s", fat5_last_error(g));
    return m;
}

// GPU fp32 == Hugging Face (and so == the CPU): every fixture case, tokens identical, scores within
// 2e-4 (cuBLAS sums in another order than the CPU reference), with and without CUDA graphs.
static void t_gpu_generate_fp32_hf(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32);
    int k;
    if (!g) return;
    for (k = 0; k < 3; k++) {
        fat5_model *m = tgen_gpu_model(T, g, k);
        if (!m) continue;
        FAT5_CHECK(T, tgen_run_fixture(T, m, tgen_fixtures[k], 1, 2e-4, 2e-4) == 14);
        FAT5_CHECK(T, tgen_run_fixture(T, m, tgen_fixtures[k], 0, 2e-4, 2e-4) == 14);
        fat5_model_destroy(m);
    }
    fat5_ctx_destroy(g);
}

// Runs one request on model m; 0 on failure (reported)
static int tgen_generate(fat5_test *T, fat5_model *m, const fat5_generate_config *g, fat5_generate_result *r) {
    static const int32_t tok[12] = {5, 9, 13, 17, 1, 7, 8, 1, 22, 4, 30, 1}, cu[4] = {0, 5, 8, 12};
    if (fat5_generate(m, tok, cu, 3, g, r) == FAT5_OK) return 1;
    FAT5_CHECK_MSG(T, 0, "generate: %s", fat5_last_error(m->ctx));
    return 0;
}

// bf16: the activations and matmul inputs are rounded to 8 bits of mantissa, so logits move by
// about 1e-2 relative and a near-tie between the two best tokens can flip, after which the rows
// continue from different prefixes. The first generated token of every row must match the fp32
// CPU result (its margin on these fixtures is far above bf16's error), and at least 60 % of all
// positions must agree over 24 greedy tokens (a wrong kernel gives chance level, ~1/V).
static void t_gpu_generate_bf16(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_BF16);
    int k;
    if (!g) return;
    for (k = 0; k < 3; k++) {
        char dir[512];
        fat5_model *gm = tgen_gpu_model(T, g, k), *cm = NULL;
        fat5_generate_config c;
        fat5_generate_result a, b;
        int64_t s, agree = 0, total = 0;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[k]);
        if (!gm || fat5_model_load(fat5_test_ctx(T), dir, &cm) != FAT5_OK) {
            fat5_model_destroy(gm);
            continue;
        }
        c = fat5_generate_config_from_model(cm);
        c.max_new_tokens = 24, c.min_new_tokens = 24;
        if (tgen_generate(T, gm, &c, &a) && tgen_generate(T, cm, &c, &b)) {
            for (s = 0; s < 3; s++) {
                int64_t j;
                FAT5_CHECK_MSG(T, a.tokens[a.cu_seqlens[s]] == b.tokens[b.cu_seqlens[s]], "%s row %lld: first token",
                               tgen_fixtures[k], (long long)s);
                for (j = 0; j < 24; j++, total++) agree += a.tokens[a.cu_seqlens[s] + j] == b.tokens[b.cu_seqlens[s] + j];
            }
            FAT5_CHECK_MSG(T, agree * 10 >= total * 6, "%s: bf16 agrees on %lld of %lld tokens", tgen_fixtures[k],
                           (long long)agree, (long long)total);
            fat5_generate_result_destroy(g, &a);
            fat5_generate_result_destroy(fat5_test_ctx(T), &b);
        }
        fat5_model_destroy(gm);
        fat5_model_destroy(cm);
    }
    fat5_ctx_destroy(g);
}

// Graph replay gives the tokens and scores of plain launches, bit for bit (the same kernels on the
// same inputs), for greedy, sampling and beam search.
static void t_gpu_generate_graph_replay(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32);
    fat5_model *m;
    int mode;
    if (!g) return;
    m = tgen_gpu_model(T, g, 1);
    for (mode = 0; m && mode < 3; mode++) {
        fat5_generate_config c = fat5_generate_config_from_model(m);
        fat5_generate_result a, b;
        c.max_new_tokens = 20, c.eos_token_id = 3;
        if (mode == 1) c.do_sample = 1, c.seed = 77, c.num_return_sequences = 2;
        if (mode == 2) c.num_beams = 4, c.num_return_sequences = 2, c.length_penalty = 0.6;
        c.use_graph = 1;
        if (!tgen_generate(T, m, &c, &a)) continue;
        c.use_graph = 0;
        if (tgen_generate(T, m, &c, &b)) {
            FAT5_CHECK(T, a.n_seq == b.n_seq && a.cu_seqlens[a.n_seq] == b.cu_seqlens[b.n_seq]);
            FAT5_CHECK_MSG(T, memcmp(a.tokens, b.tokens, (size_t)a.cu_seqlens[a.n_seq] * 4) == 0 &&
                                  memcmp(a.scores, b.scores, (size_t)a.n_seq * 4) == 0,
                           "mode %d: graph replay differs from plain launches", mode);
            fat5_generate_result_destroy(g, &b);
        }
        fat5_generate_result_destroy(g, &a);
    }
    fat5_model_destroy(m);
    fat5_ctx_destroy(g);
}

// device buffer with the given host contents (0 on failure)
static fat5__addr tgen_dev(fat5_ctx *g, const void *src, size_t bytes) {
    fat5__addr p = 0;
    if (fat5__gpu_backend.alloc(g, bytes, &p) != FAT5_OK) return 0;
    if (src && fat5__gpu_backend.upload(g, p, src, bytes) != FAT5_OK) return 0;
    return p;
}

// The op pairs: gen_process, gen_select (greedy and sampling: the same draws, as the Philox
// counter and the Gumbel noise are mirrored) and gen_beam, GPU against CPU on random inputs.
static void t_gpu_generate_ops(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32), *c = fat5_test_ctx(T);
    enum { K = 4, NI = 3, R = K * NI, V = 1000, LH = 9 };
    static float x[R * V], xc[R * V], xg[R * V];
    int32_t hist[R * LH], lens[R], rows[R], tok[R], tokg[R], done[R], doneg[R], src[R], srcg[R];
    int32_t histg[R * LH], lensg[R], scratch[R * LH], fin_tok[R * (LH - 1)], fin_tokg[R * (LH - 1)];
    int32_t fin_len[R], fin_leng[R], fin_flag[R], fin_flagg[R], unsat[NI], unsatg[NI];
    float score[R], scoreg[R], bscore[R], bscoreg[R], fin_score[R], fin_scoreg[R];
    fat5_rng rng = fat5_rng_init(3);
    int r, mode, i;
    const fat5__backend *gb = &fat5__gpu_backend;
    static const int32_t eos[1] = {1};
    fat5__gen_opts oc = tgen_opts(eos, 1, 6), og;
    fat5__addr deos;
    if (!g) return;
    deos = tgen_dev(g, eos, sizeof eos);
    oc.rep = 1.3f, oc.ngram = 2, oc.min_new = 6, oc.P = 1;
    og = oc, og.eos = deos;
    for (r = 0; r < R * V; r++) x[r] = (float)(3.0 * fat5_rng_normal(&rng));
    for (r = 0; r < R * LH; r++) hist[r] = (int32_t)fat5_rng_below(&rng, 40);
    for (r = 0; r < R; r++) lens[r] = 5, rows[r] = r, done[r] = r == 7, score[r] = 0, bscore[r] = (float)-r;
    for (r = 0; r < R; r++) fin_score[r] = r % K == 0 ? -2.0f : -1.0e9f, fin_flag[r] = r % K == 0, fin_len[r] = 3;
    for (r = 0; r < R * (LH - 1); r++) fin_tok[r] = r % 17;
    for (i = 0; i < NI; i++) unsat[i] = 1;
    // processors, with and without log_softmax
    for (mode = 0; mode < 2; mode++) {
        fat5__addr dx = tgen_dev(g, x, sizeof x), dh = tgen_dev(g, hist, sizeof hist), dl = tgen_dev(g, lens, sizeof lens);
        fat5__addr dr = tgen_dev(g, rows, sizeof rows);
        memcpy(xc, x, sizeof x);
        oc.log_softmax = og.log_softmax = mode;
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(c, FAT5__ADDR(xc), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                                 R, V, LH, &oc));
        FAT5_REQUIRE_OK(T, gb->gen_process(g, dx, dh, dl, dr, R, V, LH, &og));
        FAT5_REQUIRE_OK(T, gb->download(g, xg, dx, sizeof xg));
        FAT5_REQUIRE_OK(T, gb->sync(g));
        fat5_check_close(T, "gen_process", xg, xc, R * V, 1e-5, 1e-5);
        gb->free(g, dx), gb->free(g, dh), gb->free(g, dl), gb->free(g, dr);
    }
    // select: greedy, sampling with top-k / top-p
    for (mode = 0; mode < 3; mode++) {
        int smp = mode > 0, topk = mode == 1 ? 50 : 0;
        float topp = mode == 2 ? 0.9f : 1.0f;
        int32_t hc[R * LH], lc[R], dc[R];
        float sc[R];
        fat5__addr dx = tgen_dev(g, x, sizeof x), dt = tgen_dev(g, NULL, sizeof tok), dh = tgen_dev(g, hist, sizeof hist);
        fat5__addr dl = tgen_dev(g, lens, sizeof lens), dd = tgen_dev(g, done, sizeof done);
        fat5__addr ds = tgen_dev(g, score, sizeof score), dr = tgen_dev(g, rows, sizeof rows);
        memcpy(hc, hist, sizeof hist), memcpy(lc, lens, sizeof lens), memcpy(dc, done, sizeof done);
        memcpy(sc, score, sizeof score);
        memcpy(xc, x, sizeof x);
        oc = tgen_opts(eos, 1, 6);
        oc.do_sample = smp, oc.temperature = 1.2f, oc.top_k = topk, oc.top_p = topp, oc.seed = 99;
        og = oc, og.eos = deos;
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(c, FAT5__ADDR(xc), FAT5__ADDR(hc), FAT5__ADDR(lc), FAT5__ADDR(rows), R, V,
                                                 LH, &oc));
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_select(c, FAT5__ADDR(xc), FAT5__ADDR(tok), FAT5__ADDR(hc), FAT5__ADDR(lc),
                                                FAT5__ADDR(dc), FAT5__ADDR(sc), FAT5__ADDR(rows), R, V, LH, &oc));
        FAT5_REQUIRE_OK(T, gb->gen_process(g, dx, dh, dl, dr, R, V, LH, &og));
        FAT5_REQUIRE_OK(T, gb->gen_select(g, dx, dt, dh, dl, dd, ds, dr, R, V, LH, &og));
        FAT5_REQUIRE_OK(T, gb->download(g, tokg, dt, sizeof tokg));
        FAT5_REQUIRE_OK(T, gb->download(g, histg, dh, sizeof histg));
        FAT5_REQUIRE_OK(T, gb->download(g, lensg, dl, sizeof lensg));
        FAT5_REQUIRE_OK(T, gb->download(g, doneg, dd, sizeof doneg));
        FAT5_REQUIRE_OK(T, gb->download(g, scoreg, ds, sizeof scoreg));
        FAT5_REQUIRE_OK(T, gb->sync(g));
        FAT5_CHECK_MSG(T, memcmp(tok, tokg, sizeof tok) == 0 && memcmp(hc, histg, sizeof hc) == 0 &&
                              memcmp(lc, lensg, sizeof lc) == 0 && memcmp(dc, doneg, sizeof dc) == 0,
                       "gen_select mode %d: GPU tokens differ from the CPU", mode);
        fat5_check_close(T, "gen_select score", scoreg, sc, R, 1e-5, 1e-5);
        gb->free(g, dx), gb->free(g, dt), gb->free(g, dh), gb->free(g, dl), gb->free(g, dd), gb->free(g, ds);
        gb->free(g, dr);
    }
    // beam step (log-probabilities as input)
    {
        fat5__addr dx, dt, dsrc, dh, dl, db, dfs, dft, dfl, dff, du, dd, dr, dsc;
        memcpy(xc, x, sizeof x);
        oc = tgen_opts(eos, 1, 7);
        oc.log_softmax = 1, oc.K = K, oc.rows_per_input = K, oc.min_keep = 2, oc.length_penalty = 0.7f;
        og = oc, og.eos = deos;
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(c, FAT5__ADDR(xc), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                                 R, V, LH, &oc));
        dx = tgen_dev(g, xc, sizeof xc), dt = tgen_dev(g, NULL, sizeof tok), dsrc = tgen_dev(g, NULL, sizeof src);
        dh = tgen_dev(g, hist, sizeof hist), dl = tgen_dev(g, lens, sizeof lens), db = tgen_dev(g, bscore, sizeof bscore);
        dfs = tgen_dev(g, fin_score, sizeof fin_score), dft = tgen_dev(g, fin_tok, sizeof fin_tok);
        dfl = tgen_dev(g, fin_len, sizeof fin_len), dff = tgen_dev(g, fin_flag, sizeof fin_flag);
        du = tgen_dev(g, unsat, sizeof unsat), dd = tgen_dev(g, NULL, sizeof done), dr = tgen_dev(g, rows, sizeof rows);
        dsc = tgen_dev(g, NULL, sizeof scratch);
        memset(done, 0, sizeof done);
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_beam(c, FAT5__ADDR(xc), FAT5__ADDR(tok), FAT5__ADDR(src), FAT5__ADDR(hist),
                                              FAT5__ADDR(lens), FAT5__ADDR(bscore), FAT5__ADDR(fin_score),
                                              FAT5__ADDR(fin_tok), FAT5__ADDR(fin_len), FAT5__ADDR(fin_flag),
                                              FAT5__ADDR(unsat), FAT5__ADDR(done), FAT5__ADDR(rows), FAT5__ADDR(scratch),
                                              R, V, LH, &oc));
        FAT5_REQUIRE_OK(T, gb->gen_beam(g, dx, dt, dsrc, dh, dl, db, dfs, dft, dfl, dff, du, dd, dr, dsc, R, V, LH, &og));
        FAT5_REQUIRE_OK(T, gb->download(g, tokg, dt, sizeof tokg));
        FAT5_REQUIRE_OK(T, gb->download(g, srcg, dsrc, sizeof srcg));
        FAT5_REQUIRE_OK(T, gb->download(g, histg, dh, sizeof histg));
        FAT5_REQUIRE_OK(T, gb->download(g, bscoreg, db, sizeof bscoreg));
        FAT5_REQUIRE_OK(T, gb->download(g, fin_scoreg, dfs, sizeof fin_scoreg));
        FAT5_REQUIRE_OK(T, gb->download(g, fin_tokg, dft, sizeof fin_tokg));
        FAT5_REQUIRE_OK(T, gb->download(g, fin_leng, dfl, sizeof fin_leng));
        FAT5_REQUIRE_OK(T, gb->download(g, fin_flagg, dff, sizeof fin_flagg));
        FAT5_REQUIRE_OK(T, gb->download(g, unsatg, du, sizeof unsatg));
        FAT5_REQUIRE_OK(T, gb->download(g, doneg, dd, sizeof doneg));
        FAT5_REQUIRE_OK(T, gb->sync(g));
        FAT5_CHECK_MSG(T, memcmp(tok, tokg, sizeof tok) == 0 && memcmp(src, srcg, sizeof src) == 0 &&
                              memcmp(hist, histg, sizeof hist) == 0 && memcmp(fin_len, fin_leng, sizeof fin_len) == 0 &&
                              memcmp(fin_flag, fin_flagg, sizeof fin_flag) == 0 &&
                              memcmp(unsat, unsatg, sizeof unsat) == 0 && memcmp(done, doneg, NI * 4) == 0,
                       "gen_beam: GPU bookkeeping differs from the CPU");
        for (r = 0; r < R; r++)
            FAT5_CHECK(T, memcmp(fin_tok + r * (LH - 1), fin_tokg + r * (LH - 1), (size_t)fin_len[r] * 4) == 0);
        FAT5_CHECK(T, memcmp(bscore, bscoreg, sizeof bscore) == 0 && memcmp(fin_score, fin_scoreg, sizeof fin_score) == 0);
        gb->free(g, dx), gb->free(g, dt), gb->free(g, dsrc), gb->free(g, dh), gb->free(g, dl), gb->free(g, db);
        gb->free(g, dfs), gb->free(g, dft), gb->free(g, dfl), gb->free(g, dff), gb->free(g, du), gb->free(g, dd);
        gb->free(g, dr), gb->free(g, dsc);
    }
    gb->free(g, deos);
    fat5_ctx_destroy(g);
}
// gen_process GPU against CPU with device lists and every warper: 3 stop tokens under min_new,
// suppress and begin_suppress (rows at cur == begin_index), forced EOS (lens 5 = max_new - 1), a bad word of 1 and one of
// 3 tokens, sequence biases (single, and two entries ending in one token), inputs of unequal
// lengths (encoder penalty and n-grams over the pads), exponential decay, renormalize; then the
// warpers one by one with min_keep 1 and 2. Values within 1e-5.
static void t_gpu_generate_ops_lists(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32), *c = fat5_test_ctx(T);
    enum { R = 8, V = 700, LH = 12, P = 3, NL = 9 };
    static float x[R * V], xc[R * V], xg[R * V];
    int32_t hist[R * LH], lens[R], rows[R];
    static const int32_t eos[3] = {1, 4, 6}, sup[2] = {2, 9}, bsup[2] = {5, 7}, feos[1] = {1};
    int32_t sq[16], scu[6], et[4 * 8], ecu[5];
    float sb[3] = {1.5f, -2.0f, 0.75f};
    fat5_rng rng = fat5_rng_init(17);
    const fat5__backend *gb = &fat5__gpu_backend;
    fat5__addr dl[NL] = {0};
    int i, mode, keep;
    if (!g) return;
    for (i = 0; i < R * V; i++) x[i] = (float)(3.0 * fat5_rng_normal(&rng));
    for (i = 0; i < R * LH; i++) hist[i] = (int32_t)fat5_rng_below(&rng, 40);
    for (i = 0; i < R; i++) lens[i] = 4 + i % 3, rows[i] = (i * 3 + 1) % R;
    // sequence_bias {7}, {h[-1] of row 0, 9}, {h[-2], h[-1] of row 0, 9}; bad words {5}, {h[-2], h[-1] of row 0, 17}
    {
        const int32_t *h = hist + 0 * LH;
        int cur = P + lens[0];
        int32_t w[] = {7, h[cur - 1], 9, h[cur - 2], h[cur - 1], 9, 5, h[cur - 2], h[cur - 1], 17};
        int32_t cu[] = {0, 1, 3, 6, 7, 10};
        memcpy(sq, w, sizeof w), memcpy(scu, cu, sizeof cu);
    }
    ecu[0] = 0;
    for (i = 0; i < 4; i++) ecu[i + 1] = ecu[i] + 3 + (i * 3) % 6;
    for (i = 0; i < ecu[4]; i++) et[i] = (int32_t)fat5_rng_below(&rng, 40);
    dl[0] = tgen_dev(g, eos, sizeof eos), dl[1] = tgen_dev(g, sup, sizeof sup), dl[2] = tgen_dev(g, bsup, sizeof bsup);
    dl[3] = tgen_dev(g, feos, sizeof feos), dl[4] = tgen_dev(g, sq, sizeof sq), dl[5] = tgen_dev(g, scu, sizeof scu);
    dl[6] = tgen_dev(g, sb, sizeof sb), dl[7] = tgen_dev(g, et, sizeof et), dl[8] = tgen_dev(g, ecu, sizeof ecu);
    for (mode = 0; mode < 8; mode++)
        for (keep = 1; keep <= (mode ? 2 : 1); keep++) {
            fat5__gen_opts oc = tgen_opts(eos, 3, 6), og;
            fat5__addr dx = tgen_dev(g, x, sizeof x), dh = tgen_dev(g, hist, sizeof hist), dn = tgen_dev(g, lens, sizeof lens);
            fat5__addr dr = tgen_dev(g, rows, sizeof rows);
            int e, v;
            oc.P = P, oc.rows_per_input = 2, oc.min_keep = keep, oc.min_new = 5, oc.renormalize = 1;
            oc.suppress = FAT5__ADDR(sup), oc.n_suppress = 2, oc.begin_suppress = FAT5__ADDR(bsup);
            oc.n_begin_suppress = 2, oc.begin_index = P + 4, oc.forced_eos = FAT5__ADDR(feos), oc.n_forced_eos = 1;
            oc.seq_ids = FAT5__ADDR(sq), oc.seq_cu = FAT5__ADDR(scu), oc.seq_bias = FAT5__ADDR(sb), oc.n_seq = 5;
            oc.n_seq_bias = 3, oc.enc_tok = FAT5__ADDR(et), oc.enc_cu = FAT5__ADDR(ecu), oc.enc_max = 8, oc.pad = 0;
            oc.enc_rep = 1.4f, oc.enc_ngram = 2, oc.rep = 1.2f, oc.ngram = 2, oc.decay_start = P + 4, oc.decay_factor = 1.2f;
            if (mode) oc.do_sample = 1, oc.temperature = 0.9f;
            if (mode == 1) oc.top_k = 10;
            if (mode == 2) oc.top_p = 0.7f;
            if (mode == 3) oc.min_p = 0.05f;
            if (mode == 4) oc.typical_p = 0.6f;
            if (mode == 5) oc.epsilon = 3e-3f;
            if (mode == 6) oc.eta = 3e-3f;
            if (mode == 7) oc.top_k = 50, oc.top_p = 0.9f, oc.min_p = 0.01f, oc.typical_p = 0.9f, oc.epsilon = 1e-4f, oc.eta = 1e-4f;
            og = oc;
            og.eos = dl[0], og.suppress = dl[1], og.begin_suppress = dl[2], og.forced_eos = dl[3], og.seq_ids = dl[4];
            og.seq_cu = dl[5], og.seq_bias = dl[6], og.enc_tok = dl[7], og.enc_cu = dl[8];
            memcpy(xc, x, sizeof x);
            FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(c, FAT5__ADDR(xc), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rows),
                                                     R, V, LH, &oc));
            FAT5_REQUIRE_OK(T, gb->gen_process(g, dx, dh, dn, dr, R, V, LH, &og));
            FAT5_REQUIRE_OK(T, gb->download(g, xg, dx, sizeof xg));
            FAT5_REQUIRE_OK(T, gb->sync(g));
            for (e = 0; e < R; e++) {   // the CPU: suppressed tokens and (below min_new) stop tokens are out
                const float *xe = xc + e * V;
                int len = lens[rows[e]], finite = 0;
                for (v = 0; v < V; v++) finite += isfinite(xe[v]) != 0;
                FAT5_CHECK(T, xe[2] == -INFINITY && xe[9] == -INFINITY && (len >= 5 || xe[4] == -INFINITY));
                FAT5_CHECK(T, len != 4 || (xe[5] == -INFINITY && xe[7] == -INFINITY));   // begin_suppress at cur == P + 4
                FAT5_CHECK(T, len != 5 ? finite >= (mode ? keep : 1) : finite == 1 && xe[1] == 0.0f);   // forced EOS at len 5
            }
            fat5_check_close(T, "gen_process (lists, warpers)", xg, xc, R * V, 1e-5, 1e-5);
            gb->free(g, dx), gb->free(g, dh), gb->free(g, dn), gb->free(g, dr);
        }
    for (i = 0; i < NL; i++) gb->free(g, dl[i]);
    fat5_ctx_destroy(g);
}
#define FAT5_TESTS_GENERATE_GPU(X) X(gpu_generate_fp32_hf) X(gpu_generate_bf16) X(gpu_generate_graph_replay) \
    X(gpu_generate_ops) X(gpu_generate_ops_lists)
#else
#define FAT5_TESTS_GENERATE_GPU(X)
#endif

#define FAT5_TESTS_GENERATE(X) X(generate_hf_fixtures) X(generate_sample_filters) X(generate_sample_chi2) \
    X(generate_sample_seeded) X(generate_rejects) X(generate_config_json) X(generate_beam_op)             \
    X(generate_process_op) FAT5_TESTS_GENERATE_GPU(X)
