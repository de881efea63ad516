// test_decode.c — the decoder session (KV cache), inference mode and the encoder-only call, on
// the CPU, against the training forward: a cached step must give the logits that a full
// teacher-forced forward gives at the same position.

// the Hugging Face fixtures, then one model of every position encoding (FAT5 names)
static const char *const td_fixtures[] = {"t5_v10_relu_tied",      "t5_v11_gated_gelu_untied", "umt5_gated_silu",
                                          "posenc_t5",             "posenc_none",              "posenc_alibi_sym",
                                          "posenc_alibi_asym",     "posenc_rope_neox",         "posenc_rope_gptj_xpos",
                                          "posenc_fire",           "longt5_local",
                                          "longt5_tglobal"};
#define TD_N_FIXTURES ((int)(sizeof td_fixtures / sizeof td_fixtures[0]))

// three inputs of different lengths (5, 11, 2 tokens) and, per row, a decoder token sequence
#define TD_STEPS 30   // beyond every fixture's relative_attention_max_distance (24; posenc: 16)
static void td_inputs(int64_t V, int32_t enc[18], int32_t cu[4], int32_t dec[3][TD_STEPS]) {
    fat5_rng r = fat5_rng_init(7);
    int i, t;
    cu[0] = 0, cu[1] = 5, cu[2] = 16, cu[3] = 18;
    for (i = 0; i < 18; i++) enc[i] = 2 + (int32_t)fat5_rng_below(&r, (uint64_t)(V - 2));
    for (i = 0; i < 3; i++)
        for (t = 0; t < TD_STEPS; t++) dec[i][t] = t == 0 ? 0 : 2 + (int32_t)fat5_rng_below(&r, (uint64_t)(V - 2));
}

// logits of the teacher-forced forward for the three rows: [3 * TD_STEPS, V], row-major by row
static float *td_forward_logits(fat5_test *T, fat5_model *m, const int32_t *enc, const int32_t *cu,
                                int32_t dec[3][TD_STEPS]) {
    int64_t V = m->cfg.vocab_size;
    int32_t dcu[4] = {0, TD_STEPS, 2 * TD_STEPS, 3 * TD_STEPS};
    fat5_batch b;
    float *lg = (float *)malloc((size_t)(3 * TD_STEPS * V) * sizeof(float));
    memset(&b, 0, sizeof b);
    b.n_seq = 3;
    b.n_enc_tokens = 18;
    b.n_dec_tokens = 3 * TD_STEPS;
    b.enc_tokens = enc;
    b.enc_cu_seqlens = cu;
    b.dec_tokens = &dec[0][0];
    b.dec_cu_seqlens = dcu;
    if (!lg || fat5_model_forward(m, &b, NULL, NULL) != FAT5_OK ||
        fat5_model_get_logits(m, lg, 3 * TD_STEPS * V) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "forward: %s", fat5_last_error(fat5_test_ctx(T)));
        free(lg);
        return NULL;
    }
    return lg;
}

static double td_maxdiff(const float *a, const float *b, int64_t n) {
    double mx = 0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= mx)) mx = d;   // NaN propagates as a failure
    }
    return mx;
}

// Cached decoding equals uncached recomputation (every fixture and position encoding, 30 positions,
// inputs of three lengths, rows leaving part way).
static void t_decode_cached_equals_uncached(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < TD_N_FIXTURES; k++) {
        char dir[512];
        fat5_model *m = NULL;
        fat5_decoder *d = NULL;
        int32_t enc[18], cu[4], dec[3][TD_STEPS], tok[3], rows[3];
        float *ref, *lg;
        int64_t V, t, i;
        double worst = 0;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
        V = m->cfg.vocab_size;
        td_inputs(V, enc, cu, dec);
        ref = td_forward_logits(T, m, enc, cu, dec);
        lg = (float *)malloc((size_t)(3 * V) * sizeof(float));
        FAT5_REQUIRE(T, ref && lg);
        FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 3, 18, TD_STEPS, &d));
        FAT5_REQUIRE_OK(T, fat5_decoder_start(d, enc, cu, 3, 1));
        for (t = 0; t < TD_STEPS; t++) {
            // row 1 leaves after 20 steps: the others continue unchanged
            int64_t n = 0;
            for (i = 0; i < 3; i++)
                if (i != 1 || t < 20) {
                    rows[n] = (int32_t)i;
                    tok[n++] = dec[i][t];
                }
            FAT5_REQUIRE_OK(T, fat5_decoder_step(d, tok, rows, n, lg));
            FAT5_CHECK(T, fat5_decoder_position(d) == t + 1);
            for (i = 0; i < n; i++) {
                double e = td_maxdiff(lg + i * V, ref + ((int64_t)rows[i] * TD_STEPS + t) * V, V);
                if (!(e <= worst)) worst = e;
            }
        }
        FAT5_CHECK_MSG(T, worst <= 1e-4, "%s: cached logits differ from the forward's by %g", td_fixtures[k], worst);
        // the cache is full now
        tok[0] = 3;
        TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, NULL, 1, NULL), FAT5_ERR_INVALID_ARG, "cache is full");
        free(ref);
        free(lg);
        fat5_decoder_destroy(d);
        fat5_model_destroy(m);
    }
}

// Continuous batching: rows join a running decoder at different steps (two inputs packed in one
// join, one later, one that leaves and joins again from the start in its old row) and each row's
// logits at its own position equal the teacher-forced forward's at that position (every fixture
// and position encoding: T5 buckets, ALiBi, RoPE's per-row angles, FIRE, LongT5 encoders).
static void t_decode_join(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < TD_N_FIXTURES; k++) {
        char dir[512];
        fat5_model *m = NULL;
        fat5_decoder *d = NULL;
        int32_t enc[18], cu[4], dec[3][TD_STEPS], tok[3], rows[3], jt[16], jcu[3], jrows[2];
        int32_t row_of[3] = {2, 0, 1}, start[3] = {-1, -1, -1}, user[3] = {-1, -1, -1};
        float *ref, *lg;
        int64_t V, t, i, j;
        double worst = 0;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
        V = m->cfg.vocab_size;
        td_inputs(V, enc, cu, dec);
        ref = td_forward_logits(T, m, enc, cu, dec);
        lg = (float *)malloc((size_t)(3 * V) * sizeof(float));
        FAT5_REQUIRE(T, ref && lg);
        FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 3, 33, TD_STEPS, &d));   // encoder slots of 11 tokens
        for (t = 0; t < 40; t++) {
            int64_t n = 0, nj = 0;
            jcu[0] = 0;
            // joins: inputs 0 and 2 together at step 0, input 1 at step 5, input 2 again at step 14
            for (i = 0; i < 3; i++) {
                int join = (t == 0 && i != 1) || (t == 5 && i == 1) || (t == 14 && i == 2);
                if (!join) continue;
                for (j = cu[i]; j < cu[i + 1]; j++) jt[jcu[nj] + j - cu[i]] = enc[j];
                jcu[nj + 1] = jcu[nj] + cu[i + 1] - cu[i];
                jrows[nj++] = row_of[i];
                start[i] = (int32_t)t;
                user[row_of[i]] = (int32_t)i;
            }
            if (nj) FAT5_REQUIRE_OK(T, fat5_decoder_join(d, jt, jcu, nj, 1, jrows));
            // input 2 leaves after step 11 (its row is free until it joins again); every row stops at
            // TD_STEPS positions
            for (j = 0; j < 3; j++) {
                int in = user[j];
                if (in < 0 || (in == 2 && t >= 12 && t < 14) || t - start[in] >= TD_STEPS) continue;
                rows[n] = (int32_t)j;
                tok[n++] = dec[in][t - start[in]];
            }
            if (n == 0) break;
            FAT5_REQUIRE_OK(T, fat5_decoder_step(d, tok, rows, n, lg));
            for (i = 0; i < n; i++) {
                int in = user[rows[i]];
                int64_t p = t - start[in];
                double e = td_maxdiff(lg + i * V, ref + ((int64_t)in * TD_STEPS + p) * V, V);
                FAT5_CHECK(T, fat5_decoder_row_position(d, rows[i]) == p + 1);
                if (!(e <= worst)) worst = e;
            }
        }
        FAT5_CHECK_MSG(T, worst <= 1e-4, "%s: joined rows' logits differ from the forward's by %g", td_fixtures[k],
                       worst);
        // a live row cannot be joined again, an input longer than a slot is refused
        jcu[0] = 0, jcu[1] = 3, jrows[0] = 1, jt[0] = jt[1] = jt[2] = 3;
        FAT5_CHECK(T, fat5_decoder_row_position(d, 1) > 0);
        TM_EXPECT_ERR(T, fat5_decoder_join(d, jt, jcu, 1, 1, jrows), FAT5_ERR_INVALID_ARG, "is live");
        free(ref);
        free(lg);
        fat5_decoder_destroy(d);
        fat5_model_destroy(m);
    }
}

// Beam-style use: two rows per input; after a reorder, a row continues exactly as its source.
static void t_decode_reorder(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_decoder *d = NULL;
    int32_t enc[18], cu[4], dec[3][TD_STEPS];
    int32_t tok[6], src[6] = {1, 1, 2, 3, 4, 4};
    float *lg;
    int64_t V, t, i;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[2]);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    V = m->cfg.vocab_size;
    td_inputs(V, enc, cu, dec);
    lg = (float *)malloc((size_t)(6 * V) * sizeof(float));
    FAT5_REQUIRE(T, lg != NULL);
    FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 6, 18, 8, &d));
    FAT5_REQUIRE_OK(T, fat5_decoder_start(d, enc, cu, 3, 2));
    for (t = 0; t < 4; t++) {  // rows differ: row r gets token 2 + r + t
        for (i = 0; i < 6; i++) tok[i] = t == 0 ? 0 : (int32_t)(2 + i + t);
        FAT5_REQUIRE_OK(T, fat5_decoder_step(d, tok, NULL, 6, lg));
    }
    FAT5_CHECK(T, td_maxdiff(lg, lg + V, V) > 1e-3);  // rows 0 and 1 have different histories
    FAT5_REQUIRE_OK(T, fat5_decoder_reorder(d, src));
    for (i = 0; i < 6; i++) tok[i] = 5;
    FAT5_REQUIRE_OK(T, fat5_decoder_step(d, tok, NULL, 6, lg));
    FAT5_CHECK_MSG(T, td_maxdiff(lg, lg + V, V) == 0, "row 0 took row 1's cache but its logits differ");
    FAT5_CHECK_MSG(T, td_maxdiff(lg + 4 * V, lg + 5 * V, V) == 0, "row 4 -> 5");
    FAT5_CHECK(T, td_maxdiff(lg + 2 * V, lg + 3 * V, V) > 1e-3);
    // a source outside the rows is refused
    src[0] = 6;
    TM_EXPECT_ERR(T, fat5_decoder_reorder(d, src), FAT5_ERR_INVALID_ARG, "not a live row");
    free(lg);
    fat5_decoder_destroy(d);
    fat5_model_destroy(m);
}

static void t_decode_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_decoder *d = NULL;
    int32_t enc[4] = {5, 6, 7, 1}, cu[3] = {0, 3, 4}, cu_empty[3] = {0, 0, 4}, tok[2] = {0, 0}, rows[2] = {1, 0};
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[1]);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    TM_EXPECT_ERR(T, fat5_decoder_create(m, 0, 4, 4, &d), FAT5_ERR_INVALID_ARG, "max_rows");
    FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 2, 3, 4, &d));
    TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, NULL, 1, NULL), FAT5_ERR_STATE, "no request (fat5_decoder_start");
    TM_EXPECT_ERR(T, fat5_decoder_start(d, enc, cu, 0, 1), FAT5_ERR_INVALID_ARG, "inputs");
    TM_EXPECT_ERR(T, fat5_decoder_start(d, enc, cu_empty, 2, 1), FAT5_ERR_INVALID_ARG, "input 0 is empty");
    TM_EXPECT_ERR(T, fat5_decoder_start(d, enc, cu, 2, 1), FAT5_ERR_INVALID_ARG, "more than 3 tokens");
    TM_EXPECT_ERR(T, fat5_decoder_start(d, enc, cu, 1, 3), FAT5_ERR_INVALID_ARG, "max_rows");
    enc[1] = 80;
    TM_EXPECT_ERR(T, fat5_decoder_start(d, enc, cu, 1, 2), FAT5_ERR_INVALID_ARG, "token id 80");
    enc[1] = 6;
    FAT5_REQUIRE_OK(T, fat5_decoder_start(d, enc, cu, 1, 2));
    TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, rows, 2, NULL), FAT5_ERR_INVALID_ARG, "strictly increasing");
    tok[0] = 80;
    TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, NULL, 2, NULL), FAT5_ERR_INVALID_ARG, "vocab_size");
    tok[0] = 0;
    TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, NULL, 0, NULL), FAT5_ERR_INVALID_ARG, "entries");
    FAT5_REQUIRE_OK(T, fat5_decoder_step(d, tok, rows + 1, 1, NULL));  // row 1 leaves
    rows[0] = 0;
    rows[1] = 1;
    TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, rows, 2, NULL), FAT5_ERR_INVALID_ARG, "entries");
    TM_EXPECT_ERR(T, fat5_decoder_step(d, tok, rows + 1, 1, NULL), FAT5_ERR_INVALID_ARG, "row 1 is not live");
    fat5_decoder_destroy(d);
    fat5_decoder_destroy(NULL);
    fat5_model_destroy(m);
}

// Inference mode: the same logits as training mode, no gradients, less memory; back again.
static void t_inference_mode(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_optim *o = NULL;
    fat5_optim_config oc = fat5_optim_config_default();
    float *la, *lb;
    int64_t n;
    size_t ws_train;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[1]);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    memset(&b, 0, sizeof b);
    FAT5_REQUIRE_OK(T, tm_load_batch(T, dir, &b));
    n = b.n_dec_tokens * m->cfg.vocab_size;
    la = (float *)malloc((size_t)n * sizeof(float));
    lb = (float *)malloc((size_t)n * sizeof(float));
    FAT5_REQUIRE(T, la && lb);
    FAT5_CHECK(T, fat5_model_is_training(m) == 1);
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, la, n));
    ws_train = m->ws_bytes;
    FAT5_REQUIRE_OK(T, fat5_model_set_training(m, 0));
    FAT5_CHECK(T, fat5_model_is_training(m) == 0 && m->gd == 0);
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, lb, n));
    FAT5_CHECK_MSG(T, memcmp(la, lb, (size_t)n * sizeof(float)) == 0, "inference logits differ from training mode's");
    FAT5_CHECK_MSG(T, m->ws_bytes * 2 < ws_train, "inference workspace %zu bytes, training %zu", m->ws_bytes, ws_train);
    TM_EXPECT_ERR(T, fat5_model_backward(m, 1.0f), FAT5_ERR_STATE, "inference mode");
    TM_EXPECT_ERR(T, fat5_model_zero_grad(m), FAT5_ERR_STATE, "inference mode");
    TM_EXPECT_ERR(T, fat5_optim_create(m, &oc, &o), FAT5_ERR_STATE, "inference mode");
    FAT5_REQUIRE_OK(T, fat5_model_set_training(m, 1));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    FAT5_CHECK(T, fat5_model_backward(m, 1.0f) == FAT5_OK);
    free(la);
    free(lb);
    fat5_batch_destroy(ctx, &b);
    fat5_model_destroy(m);
}

// The encoder alone equals the training forward's encoder output; mean pooling averages it.
static void t_encode(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < TD_N_FIXTURES; k++) {
        char dir[512];
        fat5_model *m = NULL;
        int32_t enc[18], cu[4], dec[3][TD_STEPS];
        float *ref = NULL, *hid, pooled[3 * 64];
        int64_t D, s, t, j;
        double worst = 0, pworst = 0;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
        D = m->cfg.d_model;
        FAT5_REQUIRE(T, D <= 64);
        td_inputs(m->cfg.vocab_size, enc, cu, dec);
        free(td_forward_logits(T, m, enc, cu, dec));  // leaves the encoder output in the workspace
        ref = FAT5__HOST(float, m->ws.enc_out);
        hid = (float *)malloc((size_t)(18 * D) * sizeof(float));
        FAT5_REQUIRE(T, hid != NULL);
        FAT5_REQUIRE_OK(T, fat5_model_encode(m, enc, cu, 3, FAT5_POOL_NONE, hid, 18 * D));
        worst = td_maxdiff(hid, ref, 18 * D);
        FAT5_CHECK_MSG(T, worst <= 1e-5, "%s: encoder output differs by %g", td_fixtures[k], worst);
        FAT5_REQUIRE_OK(T, fat5_model_encode(m, enc, cu, 3, FAT5_POOL_MEAN, pooled, 3 * D));
        for (s = 0; s < 3; s++)
            for (j = 0; j < D; j++) {
                double acc = 0, e;
                for (t = cu[s]; t < cu[s + 1]; t++) acc += hid[t * D + j];
                e = fabs(acc / (cu[s + 1] - cu[s]) - pooled[s * D + j]);
                if (!(e <= pworst)) pworst = e;
            }
        FAT5_CHECK_MSG(T, pworst <= 1e-6, "%s: mean pooling differs by %g", td_fixtures[k], pworst);
        TM_EXPECT_ERR(T, fat5_model_encode(m, enc, cu, 3, FAT5_POOL_MEAN, pooled, 18 * D), FAT5_ERR_INVALID_ARG,
                      "out holds");
        TM_EXPECT_ERR(T, fat5_model_encode(m, enc, cu, 0, FAT5_POOL_MEAN, pooled, 0), FAT5_ERR_INVALID_ARG,
                      "no input");
        free(hid);
        fat5_model_destroy(m);
    }
}

// The encoder-only pass keeps O(tokens) buffers for every pattern: its workspace at 1k, 2k and 4k
// tokens grows by equal steps per token (up to the 256-byte alignment of each buffer), and a
// transient-global one by the share of its globals more.
static void t_encode_memory_linear(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const char *const pats[3] = {"full", "local:4", "transient-global:4:8"};
    fat5_model *m = tm_tiny(T);
    int p, k;
    FAT5_REQUIRE(T, m != NULL);
    FAT5_REQUIRE_OK(T, fat5_model_set_training(m, 0));
    for (p = 0; p < 3; p++) {
        fat5_attention a;
        double b[3], step1, step2;
        FAT5_REQUIRE_OK(T, fat5_attention_parse(ctx, pats[p], &a));
        FAT5_REQUIRE_OK(T, fat5_model_set_attention(m, &a));
        for (k = 0; k < 3; k++) {
            fat5_decoder *d = NULL;
            FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 1, (int64_t)1024 << k, 0, &d));
            b[k] = (double)d->ws_bytes;
            fat5_decoder_destroy(d);
        }
        step1 = (b[1] - b[0]) / 1024;  // bytes per token, from 1k to 2k and from 2k to 4k
        step2 = (b[2] - b[1]) / 2048;
        FAT5_CHECK_MSG(T, step1 > 0 && fabs(step2 - step1) <= 64.0 * 256 / 1024,
                       "%s: %.1f then %.1f bytes per token", pats[p], step1, step2);
        FAT5_CHECK_MSG(T, b[2] < 4096.0 * (p == 2 ? 1.125 : 1.0) * (step1 + 1) + 1e6, "%s: %.0f bytes at 4k tokens",
                       pats[p], b[2]);
    }
    fat5_model_destroy(m);
}

#define FAT5_TESTS_DECODE(X) X(decode_cached_equals_uncached) X(decode_join) X(decode_reorder) X(decode_rejects) \
    X(inference_mode) X(encode) X(encode_memory_linear)
