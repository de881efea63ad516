// Position-encoding configuration (FAT5's position_encoding_type and its fields): parsing, checks,
// config.json round trips; each encoding run (packing, finite differences, length, checkpoints).
// Uses the helpers of test_model.c (tm_cfg, TM_EXPECT_ERR, tm_tiny_config).

// from_json(to_json(c)) gives c back, field for field
static void tp_roundtrip(fat5_test *T, const fat5_model_config *c) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config back;
    char *json = NULL;
    size_t len = 0;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, c, &json, &len));
    FAT5_CHECK_MSG(T, fat5_model_config_from_json(ctx, json, len, &back) == FAT5_OK, "%s", fat5_last_error(ctx));
    FAT5_CHECK_MSG(T, memcmp(&back, c, sizeof back) == 0, "config changed through config.json:\n%s", json);
    fat5_free(ctx, json);
}

static void t_posenc_config_parse(fat5_test *T) {
    fat5_model_config c = fat5_model_config_default();
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_T5 && !c.alibi_asymmetric && !c.rotary_interleaved);
    FAT5_CHECK(T, c.rotary_fraction == 1.0 && c.rotary_base == 10000.0 && c.rotary_scale_base == 0.0);
    FAT5_CHECK(T, c.fire_mlp_width == 32);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"t5\"}", &c));
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_T5);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"none\"}", &c));
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_NONE);
    tp_roundtrip(T, &c);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"RoPE\", \"rotary_emb_fraction\": 0.5,"
                                 "\"rotary_base\": 500, \"rotary_interleaved\": true, \"rotary_scale_base\": 512}", &c));
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_ROPE && c.rotary_fraction == 0.5 && c.rotary_base == 500.0);
    FAT5_CHECK(T, c.rotary_interleaved && c.rotary_scale_base == 512.0);
    tp_roundtrip(T, &c);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"RoPE\", \"rotary_scale_base\": null}", &c));
    FAT5_CHECK(T, c.rotary_scale_base == 0.0 && c.rotary_fraction == 1.0);
    tp_roundtrip(T, &c);
    // FAT5's spelling and the dictionary's
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"ALiBi\", \"alibi_mode\": \"asymetric\"}", &c));
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_ALIBI && c.alibi_asymmetric);
    tp_roundtrip(T, &c);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"ALiBi\", \"alibi_mode\": \"asymmetric\"}", &c));
    FAT5_CHECK(T, c.alibi_asymmetric);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"ALiBi\", \"alibi_mode\": \"symmetric\"}", &c));
    FAT5_CHECK(T, !c.alibi_asymmetric);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"alibi_mode\": \"symetric\", \"num_heads\": 3}", &c));
    FAT5_CHECK(T, !c.alibi_asymmetric && c.pos_kind == FAT5_POS_T5);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"position_encoding_type\": \"FIRE\", \"fire_mlp_width\": 16,"
                                 "\"use_randomized_position_encoding\": false}", &c));
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_FIRE && c.fire_mlp_width == 16);
    tp_roundtrip(T, &c);
    // T5 buckets with a non-default field of another encoding: still written, still read back
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"rotary_base\": 20000}", &c));
    FAT5_CHECK(T, c.pos_kind == FAT5_POS_T5 && c.rotary_base == 20000.0);
    tp_roundtrip(T, &c);
}

static void t_posenc_config_rejects(fat5_test *T) {
    fat5_model_config c;
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"rope\"}", &c), FAT5_ERR_UNSUPPORTED,
                  "position_encoding_type 'rope' is unknown");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"xpos\"}", &c), FAT5_ERR_UNSUPPORTED,
                  "\"t5\", \"RoPE\", \"ALiBi\", \"FIRE\" or \"none\"");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": 1}", &c), FAT5_ERR_FORMAT, "position_encoding_type");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"alibi_mode\": \"left\"}", &c), FAT5_ERR_UNSUPPORTED, "alibi_mode 'left'");
    // d_kv 64: 0.3 gives 19 rotary dims, 0.01 gives 0
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"RoPE\", \"rotary_emb_fraction\": 0.3}", &c),
                  FAT5_ERR_FORMAT, "= 19 rotary dims");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"RoPE\", \"rotary_emb_fraction\": 0.01}", &c),
                  FAT5_ERR_FORMAT, "rotary_emb_fraction");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"RoPE\", \"d_kv\": 15}", &c), FAT5_ERR_FORMAT,
                  "= 15 rotary dims");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_emb_fraction\": 0}", &c), FAT5_ERR_FORMAT, "rotary_emb_fraction");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_emb_fraction\": 1.5}", &c), FAT5_ERR_FORMAT, "rotary_emb_fraction");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"ALiBi\", \"alibi_mode\": \"asymetric\","
                               "\"num_heads\": 3}", &c), FAT5_ERR_FORMAT, "num_heads = 3 is odd");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_base\": 0}", &c), FAT5_ERR_FORMAT, "rotary_base");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_base\": -10000}", &c), FAT5_ERR_FORMAT, "rotary_base");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_base\": \"10000\"}", &c), FAT5_ERR_FORMAT, "rotary_base");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_scale_base\": 0}", &c), FAT5_ERR_FORMAT, "rotary_scale_base");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"rotary_interleaved\": 1}", &c), FAT5_ERR_FORMAT, "rotary_interleaved");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"position_encoding_type\": \"FIRE\", \"fire_mlp_width\": 0}", &c), FAT5_ERR_FORMAT,
                  "fire_mlp_width");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"fire_mlp_width\": 2.5}", &c), FAT5_ERR_FORMAT, "fire_mlp_width");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"use_randomized_position_encoding\": true}", &c), FAT5_ERR_UNSUPPORTED,
                  "use_randomized_position_encoding");
    // the same checks on a config built in code
    c = fat5_model_config_default();
    c.pos_kind = FAT5_POS_ROPE;
    c.rotary_fraction = 0.3;
    TM_EXPECT_ERR(T, fat5_model_config_validate(fat5_test_ctx(T), &c), FAT5_ERR_INVALID_ARG, "rotary_emb_fraction");
    c = fat5_model_config_default();
    c.fire_mlp_width = 0;
    TM_EXPECT_ERR(T, fat5_model_config_validate(fat5_test_ctx(T), &c), FAT5_ERR_INVALID_ARG, "fire_mlp_width");
    c = fat5_model_config_default();
    c.pos_kind = (fat5_pos_kind)7;
    TM_EXPECT_ERR(T, fat5_model_config_validate(fat5_test_ctx(T), &c), FAT5_ERR_INVALID_ARG, "position_encoding_type");
}

// A T5 config with every position field at its default is written exactly as before the fields
// existed: none of them appears.
static void t_posenc_config_t5_json(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    char *json = NULL;
    size_t len = 0;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &json, &len));
    FAT5_CHECK_MSG(T, !strstr(json, "position_encoding") && !strstr(json, "rotary") && !strstr(json, "alibi") &&
                      !strstr(json, "fire"), "%s", json);
    fat5_free(ctx, json);
    c.pos_kind = FAT5_POS_FIRE;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &json, &len));
    FAT5_CHECK_MSG(T, strstr(json, "\"position_encoding_type\": \"FIRE\"") && strstr(json, "\"fire_mlp_width\": 32"),
                   "%s", json);
    fat5_free(ctx, json);
}

// ---------------------------------------------------------------------------------------------
// every encoding runs: tiny models of each, checked for packing, gradients and length

#define TP_N_ENC 7
static const char *const tp_enc_name[TP_N_ENC] = {"t5",         "none",       "ALiBi sym (3 heads)", "ALiBi asym",
                                                  "RoPE neox",  "RoPE gptj+xPos", "FIRE"};

// tm_tiny_config (gated, untied, d_kv 4) with encoding k of tp_enc_name; "trained" length N = 10
// (relative_attention_max_distance, FIRE's L0)
static fat5_model_config tp_config(int k) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    c.d_kv = 4;
    c.pos_kind = k == 0 ? FAT5_POS_T5 : k == 1 ? FAT5_POS_NONE : k <= 3 ? FAT5_POS_ALIBI : k <= 5 ? FAT5_POS_ROPE
                                                                                                  : FAT5_POS_FIRE;
    if (k == 2) c.num_heads = 3;  // slopes of a head count that is not a power of two
    c.alibi_asymmetric = k == 3;
    c.rotary_fraction = k == 4 ? 0.5 : 1.0;
    c.rotary_interleaved = k == 5;
    c.rotary_base = k == 5 ? 100.0 : 10000.0;
    c.rotary_scale_base = k == 5 ? 16.0 : 0.0;
    c.fire_mlp_width = 5;
    return c;
}

// a model of encoding k whose parameters are all away from their neat initial values (FIRE's c
// and L_multiplier off 0.1 and 1; norms off 1)
static fat5_model *tp_model(fat5_test *T, int k, uint64_t seed) {
    fat5_model_config c = tp_config(k);
    fat5_model *m = NULL;
    int i;
    if (fat5_model_create(fat5_test_ctx(T), &c, seed, &m) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: %s", tp_enc_name[k], fat5_last_error(fat5_test_ctx(T)));
        return NULL;
    }
    tm_perturb_norms(m, 100 * seed);
    for (i = 0; i < m->n_params; i++) {
        float *w = m->w + m->params[i].offset;
        if (strstr(m->params[i].name, "pe_encoding.c")) w[0] = 0.137f;
        if (strstr(m->params[i].name, "pe_encoding.L_multiplier")) w[0] = 0.931f;  // thr 9.31: no tie
    }
    return m;
}

// A packed batch gives each sequence the logits it gets alone, for every encoding: positions
// restart at each sequence and nothing crosses a boundary.
static void t_posenc_packed(fat5_test *T) {
    int k;
    for (k = 0; k < TP_N_ENC; k++) {
        fat5_model *m = tp_model(T, k, 3);
        if (!m) continue;
        tm_check_packing(T, m, tp_enc_name[k]);
        fat5_model_destroy(m);
    }
}

// Every parameter's gradient (FIRE's MLP, c and L_multiplier included; q and k through RoPE's
// rotation) against central differences of the whole model's loss, for every encoding.
static void t_posenc_fd(fat5_test *T) {
    int k;
    for (k = 0; k < TP_N_ENC; k++) {
        fat5_model *m = tp_model(T, k, 11);
        if (!m) continue;
        tm_model_fd_check(T, m, tp_enc_name[k], 0, 10);
        fat5_model_destroy(m);
    }
}

// Length extrapolation: a model "trained" at N = 10 (relative_attention_max_distance, FIRE's L0)
// runs at 8N = 80 with every encoding (nothing is sized by a maximum length): every logit is
// finite, and the first N decoder positions get the same logits as a decoder sequence of N alone
// (causal attention: later positions cannot change them, whatever their distance).
static void t_posenc_extrapolate(fat5_test *T) {
    enum { N = 10, L = 8 * N };
    int32_t enc[L], lab[L], ecu[2] = {0, L}, dcu[2] = {0, L}, dcu_short[2] = {0, N};
    int k, i;
    for (i = 0; i < L; i++) {
        enc[i] = 2 + (i * 7) % 11;
        lab[i] = 1 + (i * 5) % 12;
    }
    for (k = 0; k < TP_N_ENC; k++) {
        fat5_model *m = tp_model(T, k, 5);
        fat5_batch b;
        int64_t V, e, bad = 0;
        float *lg, *sh;
        char what[64];
        if (!m) continue;
        V = m->cfg.vocab_size;
        lg = (float *)malloc((size_t)(L * V) * sizeof(float));
        sh = (float *)malloc((size_t)(N * V) * sizeof(float));
        FAT5_REQUIRE(T, lg && sh);
        memset(&b, 0, sizeof b);
        b.n_seq = 1;
        b.n_enc_tokens = L;
        b.n_dec_tokens = L;
        b.enc_tokens = enc;
        b.enc_cu_seqlens = ecu;
        b.labels = lab;
        b.dec_cu_seqlens = dcu;
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
        FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, lg, L * V));
        for (e = 0; e < L * V; e++) bad += !isfinite(lg[e]);
        FAT5_CHECK_MSG(T, bad == 0, "%s: %lld logits are not finite at length %d", tp_enc_name[k], (long long)bad, L);
        b.n_dec_tokens = N;
        b.dec_cu_seqlens = dcu_short;
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
        FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, sh, N * V));
        snprintf(what, sizeof what, "%s: first %d positions", tp_enc_name[k], N);
        fat5_check_close(T, what, lg, sh, (size_t)(N * V), 1e-6, 1e-5);
        free(lg);
        free(sh);
        fat5_model_destroy(m);
    }
}

// Encodings change the model: the same weights under another encoding give other logits (so no
// encoding silently runs as another), and ALiBi's slopes, RoPE's rotation and FIRE's MLP each act.
static void t_posenc_distinct(fat5_test *T) {
    fat5_batch b = tm_batch();
    float *lg[TP_N_ENC];
    int k, j;
    int64_t n = 0;
    for (k = 0; k < TP_N_ENC; k++) {
        fat5_model_config c = tp_config(k);
        fat5_model *m;
        lg[k] = NULL;
        c.num_heads = 2;
        if (fat5_model_create(fat5_test_ctx(T), &c, 7, &m) != FAT5_OK) continue;
        n = 14 * m->cfg.vocab_size;
        lg[k] = (float *)malloc((size_t)n * sizeof(float));
        if (lg[k] && fat5_model_forward(m, &b, NULL, NULL) == FAT5_OK) fat5_model_get_logits(m, lg[k], n);
        fat5_model_destroy(m);
    }
    for (k = 0; k < TP_N_ENC; k++)
        for (j = k + 1; j < TP_N_ENC; j++) {
            double d = 0;
            int64_t e;
            if (!lg[k] || !lg[j]) continue;
            for (e = 0; e < n; e++) d = fmax(d, fabs((double)lg[k][e] - lg[j][e]));
            FAT5_CHECK_MSG(T, d > 1e-4, "%s and %s give the same logits (max diff %g)", tp_enc_name[k],
                           tp_enc_name[j], d);
        }
    for (k = 0; k < TP_N_ENC; k++) free(lg[k]);
}

// A checkpoint must carry what its encoding needs, and nothing else: a T5 checkpoint relabelled
// ALiBi has an unexpected bias table; relabelled FIRE it lacks FIRE's MLP; a FIRE checkpoint whose
// init_L differs from config.json's relative_attention_max_distance is refused.
static void t_posenc_checkpoint_mismatch(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    char d[600], path[700], *json = NULL;
    size_t len = 0;
    snprintf(d, sizeof d, "%s/relabel", fat5_test_tmpdir(T));
    snprintf(path, sizeof path, "%s/config.json", d);
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, d));
    fat5_model_destroy(m);
    m = NULL;
    c.pos_kind = FAT5_POS_ALIBI;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &json, &len));
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, json, len));
    fat5_free(ctx, json);
    TM_EXPECT_ERR(T, fat5_model_load(ctx, d, &m), FAT5_ERR_FORMAT,
                  "unexpected tensor 'decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight'");
    c.pos_kind = FAT5_POS_FIRE;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &json, &len));
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, json, len));
    fat5_free(ctx, json);
    TM_EXPECT_ERR(T, fat5_model_load(ctx, d, &m), FAT5_ERR_FORMAT,
                  "missing tensor 'encoder.block.0.self_attention_layer.self_attention.pe_encoding.mlp.0.weight'");
    // a FIRE model saved, then its config's L0 changed
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, d));
    fat5_model_destroy(m);
    m = NULL;
    c.rel_max_distance = 12;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &json, &len));
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, json, len));
    fat5_free(ctx, json);
    TM_EXPECT_ERR(T, fat5_model_load(ctx, d, &m), FAT5_ERR_FORMAT,
                  "init_L' = 10 differs from config.json's relative_attention_max_distance 12");
    FAT5_CHECK(T, m == NULL);
    // FIRE's c stored as [1] instead of a scalar
    c.rel_max_distance = 10;
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, d));
    {
        fat5_st_write_tensor t[200];
        int i, n = m->n_params;
        FAT5_REQUIRE(T, n <= 200);
        memset(t, 0, sizeof t);
        for (i = 0; i < n; i++) {
            t[i].name = m->params[i].io_name;
            t[i].ndim = m->params[i].ndim;
            t[i].shape[0] = m->params[i].shape[0];
            t[i].shape[1] = m->params[i].shape[1];
            t[i].data = m->w + m->params[i].offset;
            if (strstr(t[i].name, "encoder.block.0.self_attention_layer.self_attention.pe_encoding.c")) {
                t[i].ndim = 1;
                t[i].shape[0] = 1;
            }
        }
        snprintf(path, sizeof path, "%s/model.safetensors", d);
        FAT5_REQUIRE_OK(T, fat5_st_write(ctx, path, t, n, NULL, 0));
    }
    fat5_model_destroy(m);
    m = NULL;
    TM_EXPECT_ERR(T, fat5_model_load(ctx, d, &m), FAT5_ERR_FORMAT,
                  "pe_encoding.c' has shape [1]; expected a scalar (shape [])");
    FAT5_CHECK(T, m == NULL);
}

// The posenc fixtures (FAT5 names, written by the safetensors library) load and save back with the
// same tensors: names, dtypes (init_L I64), shapes, data offsets and bytes; the reload runs the
// same logits.
static void t_posenc_fixture_roundtrip(fat5_test *T) {
    static const char *const fx[] = {"posenc_t5", "posenc_none", "posenc_alibi_asym", "posenc_rope_gptj_xpos",
                                     "posenc_fire"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t k;
    for (k = 0; k < sizeof fx / sizeof fx[0]; k++) {
        char src[512], dst[600], p1[700], p2[700];
        fat5_model *a = NULL, *b = NULL;
        fat5_st_file *f1 = NULL, *f2 = NULL;
        size_t l1 = 0, l2 = 0;
        char *x1, *x2;
        int i;
        snprintf(src, sizeof src, "%s/%s", FAT5_TEST_DATA, fx[k]);
        snprintf(dst, sizeof dst, "%s/rt_%s", fat5_test_tmpdir(T), fx[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &a));
        FAT5_REQUIRE_OK(T, fat5_model_save(a, dst));
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dst, &b));
        FAT5_CHECK(T, a->n_floats == b->n_floats && !memcmp(a->w, b->w, a->n_floats * sizeof(float)));
        snprintf(p1, sizeof p1, "%s/model.safetensors", src);
        snprintf(p2, sizeof p2, "%s/model.safetensors", dst);
        FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p1, &f1));
        FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p2, &f2));
        FAT5_CHECK_MSG(T, fat5_st_tensor_count(f1) == fat5_st_tensor_count(f2), "%s: %d tensors, saved %d", fx[k], fat5_st_tensor_count(f1),
                       fat5_st_tensor_count(f2));
        for (i = 0; i < fat5_st_tensor_count(f1) && i < fat5_st_tensor_count(f2); i++) {
            const fat5_st_tensor *t1 = fat5_st_get(f1, i), *t2 = fat5_st_get(f2, fat5_st_find(f2, t1->name));
            FAT5_CHECK_MSG(T, fat5_st_find(f2, t1->name) >= 0, "%s: '%s' not saved", fx[k], t1->name);
            if (fat5_st_find(f2, t1->name) < 0) continue;
            FAT5_CHECK_MSG(T, t1->dtype == t2->dtype && t1->ndim == t2->ndim &&
                              !memcmp(t1->shape, t2->shape, sizeof t1->shape) && t1->begin == t2->begin &&
                              t1->end == t2->end, "%s: '%s' saved as %s [%d dims] at %llu, was %s at %llu", fx[k],
                           t1->name, fat5_st_dtype_name(t2->dtype), t2->ndim, (unsigned long long)t2->begin,
                           fat5_st_dtype_name(t1->dtype), (unsigned long long)t1->begin);
        }
        // the data regions are the same bytes
        x1 = tm_read(T, p1, &l1);
        x2 = tm_read(T, p2, &l2);
        if (x1 && x2 && l1 >= 8 && l2 >= 8) {
            uint64_t h1 = 0, h2 = 0;
            int e;
            for (e = 0; e < 8; e++) h1 |= (uint64_t)(unsigned char)x1[e] << (8 * e), h2 |= (uint64_t)(unsigned char)x2[e] << (8 * e);
            FAT5_CHECK_MSG(T, l1 - 8 - h1 == l2 - 8 - h2 && !memcmp(x1 + 8 + h1, x2 + 8 + h2, l1 - 8 - h1),
                           "%s: the saved data differs", fx[k]);
        }
        fat5__free(ctx, x1);
        fat5__free(ctx, x2);
        fat5_st_destroy(f1);
        fat5_st_destroy(f2);
        fat5_model_destroy(a);
        fat5_model_destroy(b);
    }
}

// ---------------------------------------------------------------------------------------------
// flash_t5 (FAT5) checkpoints with T5 buckets

// FAT5's name for a Hugging Face T5 name, from the table of FAT5's conversion script (written out
// here independently of the library's mapping)
static void tp_fat5_name(const char *hf, char *out, size_t n) {
    static const char *const enc[][2] = {
        {"layer.0.SelfAttention.q.", "self_attention_layer.self_attention.Wq."},
        {"layer.0.SelfAttention.k.", "self_attention_layer.self_attention.Wk."},
        {"layer.0.SelfAttention.v.", "self_attention_layer.self_attention.Wv."},
        {"layer.0.SelfAttention.o.", "self_attention_layer.self_attention.o."},
        {"layer.0.SelfAttention.relative_attention_bias.",
         "self_attention_layer.self_attention.pe_encoding.relative_attention_bias."},
        {"layer.0.layer_norm.", "self_attention_layer.layer_norm."},
        {"layer.1.layer_norm.", "ff_layer.layer_norm."},
        {"layer.1.DenseReluDense.wi_0.", "ff_layer.act.wi_0."},
        {"layer.1.DenseReluDense.wi_1.", "ff_layer.act.wi_1."},
        {"layer.1.DenseReluDense.wo.", "ff_layer.wo."}};
    static const char *const dec[][2] = {
        {"layer.0.SelfAttention.q.", "self_attention_layer.self_attention.Wq."},
        {"layer.0.SelfAttention.k.", "self_attention_layer.self_attention.Wk."},
        {"layer.0.SelfAttention.v.", "self_attention_layer.self_attention.Wv."},
        {"layer.0.SelfAttention.o.", "self_attention_layer.self_attention.o."},
        {"layer.0.SelfAttention.relative_attention_bias.",
         "self_attention_layer.self_attention.pe_encoding.relative_attention_bias."},
        {"layer.0.layer_norm.", "self_attention_layer.layer_norm."},
        {"layer.1.EncDecAttention.q.", "cross_attention_layer.cross_attention.Wq."},
        {"layer.1.EncDecAttention.k.", "cross_attention_layer.cross_attention.Wk."},
        {"layer.1.EncDecAttention.v.", "cross_attention_layer.cross_attention.Wv."},
        {"layer.1.EncDecAttention.o.", "cross_attention_layer.cross_attention.o."},
        {"layer.1.layer_norm.", "cross_attention_layer.layer_norm."},
        {"layer.2.layer_norm.", "ff_layer.layer_norm."},
        {"layer.2.DenseReluDense.wi_0.", "ff_layer.act.wi_0."},
        {"layer.2.DenseReluDense.wi_1.", "ff_layer.act.wi_1."},
        {"layer.2.DenseReluDense.wo.", "ff_layer.wo."}};
    const char *dot;
    size_t i;
    snprintf(out, n, "%s", hf);
    if (strncmp(hf, "encoder.block.", 14) != 0 && strncmp(hf, "decoder.block.", 14) != 0) return;
    dot = strchr(hf + 14, '.') + 1;
    if (hf[0] == 'e') {
        for (i = 0; i < sizeof enc / sizeof enc[0]; i++)
            if (strncmp(dot, enc[i][0], strlen(enc[i][0])) == 0)
                snprintf(out, n, "%.*s%s%s", (int)(dot - hf), hf, enc[i][1], dot + strlen(enc[i][0]));
    } else {
        for (i = 0; i < sizeof dec / sizeof dec[0]; i++)
            if (strncmp(dot, dec[i][0], strlen(dec[i][0])) == 0)
                snprintf(out, n, "%.*s%s%s", (int)(dot - hf), hf, dec[i][1], dot + strlen(dec[i][0]));
    }
}

// FlashT5Config for the shape of tests/data/t5_v11_gated_gelu_untied, with FAT5's own fields; %s
// is spliced in before the closing brace.
static const char tp_flash_config[] =
    "{\"architectures\": [\"FlashT5ForConditionalGeneration\"], \"model_type\": \"flash_t5\","
    " \"auto_map\": {\"AutoConfig\": \"configuration_flash_t5.FlashT5Config\"},"
    " \"vocab_size\": 80, \"d_model\": 32, \"d_kv\": 16, \"d_ff\": 40, \"num_layers\": 3,"
    " \"num_decoder_layers\": 2, \"num_heads\": 3, \"relative_attention_num_buckets\": 16,"
    " \"relative_attention_max_distance\": 24, \"layer_norm_epsilon\": 1e-06, \"dropout_rate\": 0.0,"
    " \"feed_forward_proj\": \"relu\", \"use_glu_mlp\": true, \"use_gelu_act\": true,"
    " \"position_encoding_type\": \"t5\", \"use_randomized_position_encoding\": false,"
    " \"alibi_mode\": \"symetric\", \"rotary_emb_fraction\": 1.0, \"rotary_base\": 10000,"
    " \"rotary_interleaved\": false, \"rotary_scale_base\": null, \"fire_mlp_width\": 32,"
    " \"z_loss\": 0.0001, \"label_smoothing\": 0.1, \"max_sequence_length\": 1024, \"attention_type\": \"ref\","
    " \"attention_dropout_rate\": 0.0, \"use_triton_layernorm\": false, \"use_triton_crossentropy\": false,"
    " \"crossentropy_inplace_backward\": false, \"use_full_bias_size\": false, \"use_masking\": false,"
    " \"decoder_start_token_id\": 0, \"eos_token_id\": 1, \"is_encoder_decoder\": true%s}";

static fat5_status tp_write_config(fat5_test *T, const char *dir, const char *extra) {
    char path[700], json[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(json, sizeof json, tp_flash_config, extra);
    return fat5_write_file_atomic(fat5_test_ctx(T), path, json, strlen(json));
}

// Writes dir/model.safetensors: the HF fixture's tensors under FAT5's names, plus both
// embed_tokens aliases (a copy of shared; the encoder's with one value changed when bad_alias).
static fat5_status tp_write_flash_weights(fat5_test *T, const char *dir, int bad_alias) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[700];
    fat5_st_file *f = NULL;
    fat5_st_write_tensor t[64];
    char names[64][128];
    float *data[64];
    int n, i, k = 0, sh = -1;
    fat5_status st;
    snprintf(path, sizeof path, "%s/t5_v11_gated_gelu_untied/model.safetensors", FAT5_TEST_DATA);
    if ((st = fat5_st_load(ctx, path, &f))) return st;
    n = fat5_st_tensor_count(f);
    if (n + 2 > 64) {
        fat5_st_destroy(f);
        return FAT5_ERR_INVALID_ARG;
    }
    for (i = 0; i < n; i++) {
        const fat5_st_tensor *x = fat5_st_get(f, i);
        int64_t numel = 0;
        tp_fat5_name(x->name, names[k], sizeof names[k]);
        data[k] = tm_read_tensor(T, f, x->name, &numel);
        if (!data[k]) break;
        t[k].name = names[k];
        t[k].ndim = x->ndim;
        t[k].shape[0] = x->shape[0];
        t[k].shape[1] = x->ndim > 1 ? x->shape[1] : 0;
        t[k].data = data[k];
        if (strcmp(x->name, "shared.weight") == 0) sh = k;
        k++;
    }
    fat5_st_destroy(f);
    if (k != n || sh < 0) {
        for (i = 0; i < k; i++) free(data[i]);
        return FAT5_ERR_IO;
    }
    for (i = 0; i < 2; i++) {
        int64_t numel = t[sh].shape[0] * t[sh].shape[1];
        snprintf(names[k], sizeof names[k], "%s.embed_tokens.weight", i ? "decoder" : "encoder");
        data[k] = (float *)malloc((size_t)numel * sizeof(float));
        if (!data[k]) break;
        memcpy(data[k], data[sh], (size_t)numel * sizeof(float));
        if (i == 0 && bad_alias) data[k][5] += 1.0f;
        t[k] = t[sh];
        t[k].name = names[k];
        t[k].data = data[k];
        k++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st = i == 2 ? fat5_st_write(ctx, path, t, k, NULL, 0) : FAT5_ERR_OUT_OF_MEMORY;
    for (i = 0; i < k; i++) free(data[i]);
    return st;
}

static void t_flash_t5_checkpoint(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[600], out[600], path[700], *text = NULL;
    fat5_model *m = NULL, *m2 = NULL;
    fat5_st_file *ref = NULL, *saved = NULL;
    fat5_batch b;
    fat5_forward_result r;
    fat5_tensor_info ti = {0};
    fat5_model_config c;
    float *want = NULL, *logits = NULL, *q1 = NULL, *q2 = NULL;
    int64_t n = 0, nq;
    size_t len = 0;
    int i, n_fat5 = 0;
    memset(&b, 0, sizeof b);
    snprintf(dir, sizeof dir, "%s/flash", fat5_test_tmpdir(T));
    snprintf(out, sizeof out, "%s/flash_saved", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5__mkdir(ctx, dir));
    FAT5_REQUIRE_OK(T, tp_write_flash_weights(T, dir, 0));
    // pad_token_id -100 (FlashT5Config's default) reads as 0; the fixture's labels hold -100
    FAT5_REQUIRE_OK(T, tp_write_config(T, dir, ", \"attention_scale\": 1.0, \"tie_word_embeddings\": false,"
                                               " \"pad_token_id\": -100"));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    c = *fat5_model_get_config(m);
    FAT5_CHECK(T, strcmp(c.model_type, "flash_t5") == 0 && c.gated && c.act == FAT5_ACT_GELU_TANH);
    FAT5_CHECK(T, !c.tie_word_embeddings && !c.scale_decoder_outputs && c.pad_token_id == 0 && c.pos_kind == FAT5_POS_T5);
    // names of the FAT5 scheme in the tensor API; the Hugging Face names are accepted too
    for (i = 0; i < fat5_model_tensor_count(m); i++) {
        FAT5_REQUIRE_OK(T, fat5_model_tensor_info(m, i, &ti));
        FAT5_CHECK_MSG(T, !strstr(ti.name, "SelfAttention") && !strstr(ti.name, "DenseReluDense") &&
                          !strstr(ti.name, ".layer."), "tensor %d is named %s", i, ti.name);
        n_fat5 += strstr(ti.name, "_layer.") != NULL;
    }
    FAT5_CHECK_MSG(T, n_fat5 == fat5_model_tensor_count(m) - 4, "%d of %d", n_fat5,
                   fat5_model_tensor_count(m));   // all but shared, 2 final norms, lm_head
    i = fat5_model_find_tensor(m, "decoder.block.1.cross_attention_layer.cross_attention.Wq.weight");
    FAT5_CHECK(T, i >= 0 && i == fat5_model_find_tensor(m, "decoder.block.1.layer.1.EncDecAttention.q.weight"));
    FAT5_CHECK(T, fat5_model_find_tensor(m, "encoder.block.0.self_attention_layer.self_attention.pe_encoding."
                                            "relative_attention_bias.weight") >= 0);
    FAT5_CHECK(T, fat5_model_find_tensor(m, "encoder.block.2.ff_layer.act.wi_1.weight") >= 0);
    FAT5_CHECK(T, fat5_model_find_tensor(m, "decoder.block.0.cross_attention_layer.layer_norm.weight") >= 0);
    FAT5_CHECK(T, fat5_model_find_tensor(m, "encoder.block.0.ff_layer.layer_norm.weight") >= 0);
    // the same logits as transformers on the Hugging Face original
    snprintf(path, sizeof path, "%s/t5_v11_gated_gelu_untied", FAT5_TEST_DATA);
    FAT5_REQUIRE_OK(T, tm_load_batch(T, path, &b));
    snprintf(path, sizeof path, "%s/t5_v11_gated_gelu_untied/reference.safetensors", FAT5_TEST_DATA);
    FAT5_REQUIRE_OK(T, fat5_st_load(ctx, path, &ref));
    if (fat5_model_forward(m, &b, NULL, &r) == FAT5_OK && (want = tm_read_tensor(T, ref, "logits", &n)) != NULL &&
        (logits = (float *)malloc((size_t)n * sizeof(float))) != NULL &&
        fat5_model_get_logits(m, logits, n) == FAT5_OK)
        fat5_check_close(T, "logits", logits, want, (size_t)n, 1e-5, 1e-4);
    else
        FAT5_CHECK_MSG(T, 0, "forward: %s", fat5_last_error(ctx));
    // saved back with FAT5's names and model_type, and loaded again unchanged
    FAT5_REQUIRE_OK(T, fat5_model_save(m, out));
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    FAT5_REQUIRE_OK(T, fat5_st_load(ctx, path, &saved));
    FAT5_CHECK(T, fat5_st_tensor_count(saved) == fat5_model_tensor_count(m));
    for (i = 0; i < fat5_st_tensor_count(saved); i++) {
        const char *nm = fat5_st_get(saved, i)->name;
        char hf_as_fat5[128];
        FAT5_CHECK_MSG(T, fat5_model_find_tensor(m, nm) >= 0 && fat5_model_tensor_info(m, fat5_model_find_tensor(m, nm),
                          &ti) == FAT5_OK && strcmp(ti.name, nm) == 0, "saved tensor %s", nm);
        tp_fat5_name(nm, hf_as_fat5, sizeof hf_as_fat5);
        FAT5_CHECK_MSG(T, strcmp(hf_as_fat5, nm) == 0 && !strstr(nm, "SelfAttention"), "saved tensor %s", nm);
    }
    FAT5_CHECK(T, fat5_st_find(saved, "decoder.block.1.self_attention_layer.self_attention.Wv.weight") >= 0);
    snprintf(path, sizeof path, "%s/config.json", out);
    text = tm_read(T, path, &len);
    FAT5_REQUIRE(T, text != NULL);
    FAT5_CHECK_MSG(T, strstr(text, "\"model_type\": \"flash_t5\"") && strstr(text, "FlashT5ForConditionalGeneration") &&
                      strstr(text, "\"attention_scale\": 1.0") && strstr(text, "\"use_glu_mlp\": true") &&
                      strstr(text, "\"position_encoding_type\": \"t5\"") && !strstr(text, "feed_forward_proj"),
                   "%s", text);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, out, &m2));
    FAT5_CHECK(T, memcmp(&m->cfg, &m2->cfg, sizeof m->cfg) == 0 && m2->flash_names);
    FAT5_CHECK(T, m->n_floats == m2->n_floats && memcmp(m->w, m2->w, m->n_floats * sizeof(float)) == 0);
    // get_param by either name
    nq = 3 * 16 * 32;
    q1 = (float *)malloc((size_t)nq * sizeof(float));
    q2 = (float *)malloc((size_t)nq * sizeof(float));
    FAT5_REQUIRE(T, q1 && q2);
    FAT5_CHECK(T, (fat5_model_get_param(m2, "encoder.block.1.self_attention_layer.self_attention.Wk.weight", q1, nq)) == FAT5_OK);
    FAT5_CHECK(T, (fat5_model_get_param(m2, "encoder.block.1.layer.0.SelfAttention.k.weight", q2, nq)) == FAT5_OK);
    FAT5_CHECK(T, memcmp(q1, q2, (size_t)nq * sizeof(float)) == 0);
    free(q1);
    free(q2);
    free(want);
    free(logits);
    fat5__free(ctx, text);
    fat5_st_destroy(ref);
    fat5_st_destroy(saved);
    fat5_batch_destroy(ctx, &b);
    fat5_model_destroy(m);
    fat5_model_destroy(m2);
}

static void t_flash_t5_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c;
    fat5_model *m = NULL;
    char dir[600], json[4096];
    static const char ok[] = ", \"attention_scale\": 1.0, \"tie_word_embeddings\": false";
#define TP_CFG(extra) (snprintf(json, sizeof json, tp_flash_config, extra), tm_cfg(T, json, &c))
    FAT5_REQUIRE_OK(T, TP_CFG(ok));
    FAT5_CHECK(T, c.pad_token_id == 0);   // absent: FlashT5Config's -100, read as 0
    TM_EXPECT_ERR(T, TP_CFG(", \"tie_word_embeddings\": false"), FAT5_ERR_UNSUPPORTED, "1/sqrt(num_heads)");
    TM_EXPECT_ERR(T, TP_CFG(", \"tie_word_embeddings\": false, \"attention_scale\": null"), FAT5_ERR_UNSUPPORTED,
                  "attention_scale");
    TM_EXPECT_ERR(T, TP_CFG(", \"tie_word_embeddings\": false, \"attention_scale\": 0.25"), FAT5_ERR_UNSUPPORTED,
                  "attention_scale = 0.25");
    TM_EXPECT_ERR(T, TP_CFG(", \"attention_scale\": 1.0"), FAT5_ERR_UNSUPPORTED, "tie_word_embeddings");
    TM_EXPECT_ERR(T, TP_CFG(", \"attention_scale\": 1.0, \"tie_word_embeddings\": true"), FAT5_ERR_UNSUPPORTED,
                  "tie_word_embeddings");
    TM_EXPECT_ERR(T, TP_CFG(", \"attention_scale\": 1.0, \"tie_word_embeddings\": false, \"pad_token_id\": -1"),
                  FAT5_ERR_FORMAT, "pad_token_id = -1");
    // variants of one field, edited in place
    {
        char body[4096], *at;
        snprintf(body, sizeof body, tp_flash_config, ok);
        at = strstr(body, "\"use_glu_mlp\": true");
        FAT5_REQUIRE(T, at != NULL);
        memcpy(at, "\"use_glu_mlp\": 0   ", 19);
        TM_EXPECT_ERR(T, tm_cfg(T, body, &c), FAT5_ERR_FORMAT, "use_glu_mlp");
        memcpy(at, "\"use_glu_mlp\":false", 19);
        TM_EXPECT_ERR(T, tm_cfg(T, body, &c), FAT5_ERR_UNSUPPORTED, "use_glu_mlp false");
        snprintf(body, sizeof body, tp_flash_config, ok);
        at = strstr(body, "\"use_masking\": false");
        FAT5_REQUIRE(T, at != NULL);
        memcpy(at, "\"use_masking\": true ", 20);
        TM_EXPECT_ERR(T, tm_cfg(T, body, &c), FAT5_ERR_UNSUPPORTED, "use_masking");
        snprintf(body, sizeof body, tp_flash_config, ok);
        at = strstr(body, "\"use_gelu_act\": true");
        FAT5_REQUIRE(T, at != NULL);
        memcpy(at, "\"use_gelu_act\":false", 20);
        FAT5_REQUIRE_OK(T, tm_cfg(T, body, &c));
        FAT5_CHECK(T, c.act == FAT5_ACT_RELU && c.gated);
    }
#undef TP_CFG
    // FAT5's own fields stay unknown in a Hugging Face T5 config
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"t5\", \"z_loss\": 0.0001}", &c), FAT5_ERR_UNSUPPORTED, "z_loss");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"use_glu_mlp\": true}", &c), FAT5_ERR_UNSUPPORTED, "use_glu_mlp");
    // a config built in code
    c = fat5_model_config_default();
    memcpy(c.model_type, "flash_t5", 9);
    TM_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_UNSUPPORTED, "tie_word_embeddings");
    c.tie_word_embeddings = c.scale_decoder_outputs = 0;
    TM_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_UNSUPPORTED, "use_glu_mlp");
    c.gated = 1;
    c.act = FAT5_ACT_SILU;
    TM_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_UNSUPPORTED, "silu");
    // an embed_tokens alias that is not shared.weight
    snprintf(dir, sizeof dir, "%s/flash_bad_alias", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5__mkdir(ctx, dir));
    FAT5_REQUIRE_OK(T, tp_write_flash_weights(T, dir, 1));
    FAT5_REQUIRE_OK(T, tp_write_config(T, dir, ok));
    TM_EXPECT_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT, "'encoder.embed_tokens.weight' differs");
    FAT5_CHECK(T, m == NULL);
    // T5 names in a flash_t5 directory are unexpected tensors
    snprintf(dir, sizeof dir, "%s/flash_hf_names", fat5_test_tmpdir(T));
    {
        char src[700], dst[700], *w = NULL;
        size_t wl = 0;
        FAT5_REQUIRE_OK(T, fat5__mkdir(ctx, dir));
        snprintf(src, sizeof src, "%s/t5_v11_gated_gelu_untied/model.safetensors", FAT5_TEST_DATA);
        snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
        w = tm_read(T, src, &wl);
        FAT5_REQUIRE(T, w != NULL);
        FAT5_CHECK(T, (fat5_write_file_atomic(ctx, dst, w, wl)) == FAT5_OK);
        fat5__free(ctx, w);
    }
    FAT5_REQUIRE_OK(T, tp_write_config(T, dir, ok));
    TM_EXPECT_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT,
                  "missing tensor 'encoder.block.0.self_attention_layer.self_attention.Wq.weight'");
}

#define FAT5_TESTS_POSENC(X) X(posenc_config_parse) X(posenc_config_rejects) X(posenc_config_t5_json) \
    X(posenc_packed) X(posenc_fd) X(posenc_extrapolate) X(posenc_distinct) X(posenc_checkpoint_mismatch) \
    X(posenc_fixture_roundtrip) X(flash_t5_checkpoint) X(flash_t5_rejects)
