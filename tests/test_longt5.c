// test_longt5.c — LongT5 (model_type longt5, transformers' LongT5ForConditionalGeneration): its
// config fields and checkpoint names against the fixtures of tools/make_reference.py --longt5.
// Computing with local or transient-global encoders is not implemented yet and is refused.
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
// global norm) and save back with the same tensor entries and bytes; forward, encode and decoding
// are refused with the reason.
static void t_longt5_checkpoint(fat5_test *T) {
    static const char *const fx[2] = {"longt5_local", "longt5_tglobal"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < 2; k++) {
        char src[512], dst[600], p1[700], p2[700];
        fat5_model *a = NULL, *b = NULL;
        fat5_st_file *f1 = NULL, *f2 = NULL;
        fat5_decoder *d = NULL;
        fat5_batch bt;
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
        memset(&bt, 0, sizeof bt);
        FAT5_REQUIRE_OK(T, tm_load_batch(T, src, &bt));
        TM_EXPECT_ERR(T, fat5_model_forward(a, &bt, NULL, NULL), FAT5_ERR_UNSUPPORTED,
                      k ? "encoder_attention_type transient-global (LongT5) is not implemented yet"
                        : "encoder_attention_type local (LongT5) is not implemented yet");
        TM_EXPECT_ERR(T, fat5_decoder_create(a, 1, 8, 4, &d), FAT5_ERR_UNSUPPORTED, "not implemented yet");
        FAT5_CHECK(T, d == NULL);
        fat5_batch_free(ctx, &bt);
        fat5_st_close(f1);
        fat5_st_close(f2);
        fat5_model_destroy(a);
        fat5_model_destroy(b);
    }
}

#define FAT5_TESTS_LONGT5(X) X(longt5_config) X(longt5_checkpoint)
