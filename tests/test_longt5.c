// test_longt5.c — LongT5 (model_type longt5, transformers' LongT5ForConditionalGeneration): its
// config fields and checkpoint names against the fixtures of tools/make_reference.py --longt5, and
// the attention patterns for long inputs. Parity of both LongT5 encoders with transformers is
// longt5_local_parity / longt5_tglobal_parity (test_model.c), their cached decoding test_decode.c.
// Uses the helpers of test_model.c and test_posenc.c (tm_cfg, tm_read, TM_EXPECT_ERR, tp_roundtrip).

static void t_longt5_config(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c;
    char path[600], *text;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/longt5_tglobal/config.json", FAT5_TEST_DATA);
    text = tm_read(T, path, &len);
    FAT5_REQUIRE(T, text != NULL);
    FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, text, len, &c));
    fat5__free(ctx, text);
    FAT5_CHECK(T, c.enc_attention == FAT5_ENC_ATTN_TGLOBAL && c.local_radius == 4 && c.global_block_size == 4);
    FAT5_CHECK(T, strcmp(c.model_type, "longt5") == 0 && c.gated && c.act == FAT5_ACT_GELU_TANH);
    tp_roundtrip(T, &c);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"model_type\": \"longt5\"}", &c));   // LongT5Config's defaults
    FAT5_CHECK(T, c.enc_attention == FAT5_ENC_ATTN_LOCAL && c.local_radius == 127 && c.global_block_size == 16);
    tp_roundtrip(T, &c);
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"local_radius\": 0}", &c), FAT5_ERR_FORMAT,
                  "local_radius = 0");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"global_block_size\": 0}", &c), FAT5_ERR_FORMAT,
                  "global_block_size = 0");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"encoder_attention_type\": \"global\"}", &c),
                  FAT5_ERR_UNSUPPORTED, "encoder_attention_type 'global' is unknown");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"encoder_attention_type\": 1}", &c),
                  FAT5_ERR_FORMAT, "encoder_attention_type");
    // LongT5's fields belong to model_type longt5
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"local_radius\": 8}", &c), FAT5_ERR_UNSUPPORTED, "unknown field 'local_radius'");
    c = fat5_model_config_default();
    c.enc_attention = FAT5_ENC_ATTN_LOCAL;
    TM_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_UNSUPPORTED, "model_type longt5");
}

// Both LongT5 fixtures (transformers' LongT5ForConditionalGeneration) load with their own names
// (LocalSelfAttention / TransientGlobalSelfAttention, the global bias table and the per-layer
// global norm) and save back with the same tensor entries and bytes; the transient-global model
// refuses to compute, with the reason.
static void t_longt5_checkpoint(fat5_test *T) {
    static const char *const fx[2] = {"longt5_local", "longt5_tglobal"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < 2; k++) {
        char src[512], dst[600], p1[700], p2[700];
        fat5_model *a = NULL, *b = NULL;
        fat5_st_file *f1 = NULL, *f2 = NULL;
        int i, n_model = 0;
        snprintf(src, sizeof src, "%s/%s", FAT5_TEST_DATA, fx[k]);
        snprintf(dst, sizeof dst, "%s/rt_%s", fat5_test_tmpdir(T), fx[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &a));
        FAT5_CHECK(T, a->cfg.enc_attention == (k ? FAT5_ENC_ATTN_TGLOBAL : FAT5_ENC_ATTN_LOCAL));
        FAT5_CHECK(T, fat5_model_find_tensor(a, k ? "encoder.block.1.layer.0.TransientGlobalSelfAttention.q.weight"
                                                  : "encoder.block.1.layer.0.LocalSelfAttention.q.weight") >= 0);
        FAT5_CHECK(T, (fat5_model_find_tensor(
                           a, "encoder.block.0.layer.0.TransientGlobalSelfAttention.global_relative_attention_bias.weight")
                       >= 0) == k);
        FAT5_REQUIRE_OK(T, fat5_model_save(a, dst));
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dst, &b));
        FAT5_CHECK(T, a->n_floats == b->n_floats && !memcmp(a->w, b->w, a->n_floats * sizeof(float)));
        FAT5_CHECK(T, !memcmp(&a->cfg, &b->cfg, sizeof a->cfg));
        snprintf(p1, sizeof p1, "%s/model.safetensors", src);
        snprintf(p2, sizeof p2, "%s/model.safetensors", dst);
        FAT5_REQUIRE_OK(T, fat5_st_open(ctx, p1, &f1));
        FAT5_REQUIRE_OK(T, fat5_st_open(ctx, p2, &f2));
        // every tensor of the fixture but the embed_tokens aliases of shared.weight is saved back
        for (i = 0; i < fat5_st_count(f1); i++) {
            const char *nm = fat5_st_get(f1, i)->name;
            int j = fat5_st_find(f2, nm);
            if (strstr(nm, "embed_tokens")) continue;
            n_model++;
            FAT5_CHECK_MSG(T, j >= 0, "%s: '%s' not saved", fx[k], nm);
            if (j >= 0) {
                int64_t e, numel = (int64_t)((fat5_st_get(f1, i)->end - fat5_st_get(f1, i)->begin) / 4);
                float *x = (float *)malloc((size_t)numel * sizeof(float)), *y = (float *)malloc((size_t)numel * sizeof(float));
                FAT5_REQUIRE(T, x && y);
                FAT5_CHECK(T, fat5_st_read_f32(f1, i, x, numel) == FAT5_OK && fat5_st_read_f32(f2, j, y, numel) == FAT5_OK);
                for (e = 0; e < numel && x[e] == y[e]; e++) {}
                FAT5_CHECK_MSG(T, e == numel, "%s: '%s' differs at %lld", fx[k], nm, (long long)e);
                free(x);
                free(y);
            }
        }
        FAT5_CHECK_MSG(T, fat5_st_count(f2) == n_model, "%s: saved %d tensors, the fixture has %d", fx[k],
                       fat5_st_count(f2), n_model);
        fat5_st_close(f1);
        fat5_st_close(f2);
        fat5_model_destroy(a);
        fat5_model_destroy(b);
    }
}

// A window at least as long as every sequence is full attention, bit for bit (forward, dq with the
// bias gradient, dk / dv); a window of r changes exactly the queries that have keys beyond r.
static void t_attn_window(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    enum { H = 2, DK = 4, NB = 8, MD = 8 };
    int32_t cu[4] = {0, 13, 14, 23}, seq[23];
    float q[23 * H * DK], k[23 * H * DK], v[23 * H * DK], dout[23 * H * DK], bias[NB * H];
    float o[2][23 * H * DK], lse[2][23 * H], delta[23 * H], dq[2][23 * H * DK], dk[2][23 * H * DK],
        dv[2][23 * H * DK], db[2][NB * H];
    fat5_rng r = fat5_rng_init(9);
    int i, w, s;
    for (s = 0; s < 3; s++)
        for (i = cu[s]; i < cu[s + 1]; i++) seq[i] = s;
    for (i = 0; i < 23 * H * DK; i++)
        q[i] = (float)fat5_rng_normal(&r), k[i] = (float)fat5_rng_normal(&r), v[i] = (float)fat5_rng_normal(&r),
        dout[i] = (float)fat5_rng_normal(&r);
    for (i = 0; i < NB * H; i++) bias[i] = (float)fat5_rng_normal(&r);
    for (w = 0; w < 2; w++) {   // 0: full; 1: window 12 (every sequence is at most 13 long)
        int kind = FAT5__ATTN_BIDIR | (w ? FAT5__ATTN_WINDOW(12) : 0);
#define A(x) FAT5__ADDR(x)
        memset(db[w], 0, sizeof db[w]);
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_fwd(ctx, A(o[w]), A(lse[w]), A(q), A(k), A(v), A(bias), 0, A(cu), A(cu),
                                              A(seq), 23, H, DK, kind, NB, MD, 0, 0));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_delta(ctx, A(delta), A(o[w]), A(dout), 23, H, DK));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_dq(ctx, A(dq[w]), A(db[w]), A(dout), A(lse[w]), A(delta), A(q), A(k),
                                                 A(v), A(bias), 0, A(cu), A(cu), A(seq), 23, H, DK, kind, NB, MD, 0, 0, 0));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_dkv(ctx, A(dk[w]), A(dv[w]), A(dout), A(lse[w]), A(delta), A(q), A(k),
                                                  A(v), A(bias), 0, A(cu), A(cu), A(seq), 23, H, DK, kind, NB, MD, 0, 0));
    }
    FAT5_CHECK(T, !memcmp(o[0], o[1], sizeof o[0]) && !memcmp(lse[0], lse[1], sizeof lse[0]));
    FAT5_CHECK(T, !memcmp(dq[0], dq[1], sizeof dq[0]) && !memcmp(db[0], db[1], sizeof db[0]));
    FAT5_CHECK(T, !memcmp(dk[0], dk[1], sizeof dk[0]) && !memcmp(dv[0], dv[1], sizeof dv[0]));
    // radius 3: in the 13-token sequence, query 0 sees keys 0..3 only; its output is the softmax
    // over those four keys, computed here directly
    FAT5_REQUIRE_OK(T, fat5__cpu_attn_fwd(ctx, A(o[1]), A(lse[1]), A(q), A(k), A(v), A(bias), 0, A(cu), A(cu), A(seq),
                                          23, H, DK, FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(3), NB, MD, 0, 0));
#undef A
    {
        double sc[4], mx = -1e300, sum = 0, want[DK];
        int j, d;
        for (j = 0; j < 4; j++) {
            sc[j] = fat5__cpu_attn_score(q, k + j * H * DK, bias, 0, j, 0, H, DK, FAT5__ATTN_BIDIR, NB, MD);
            if (sc[j] > mx) mx = sc[j];
        }
        for (d = 0; d < DK; d++) want[d] = 0;
        for (j = 0; j < 4; j++) {
            double e = exp(sc[j] - mx);
            sum += e;
            for (d = 0; d < DK; d++) want[d] += e * v[j * H * DK + d];
        }
        for (d = 0; d < DK; d++)
            FAT5_CHECK_MSG(T, fabs(o[1][d] - want[d] / sum) <= 1e-6, "radius 3, query 0, dim %d: %g vs %g", d,
                           (double)o[1][d], want[d] / sum);
        FAT5_CHECK(T, memcmp(o[0], o[1], sizeof o[0]) != 0);
    }
}

#define FAT5_TESTS_LONGT5(X) X(longt5_config) X(longt5_checkpoint) X(attn_window)
