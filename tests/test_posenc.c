// Position-encoding configuration (FAT5's position_encoding_type and its fields): parsing, checks,
// config.json round trips, and the refusal to run an encoding that has no forward pass yet.
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

// Until their forward pass exists, the other encodings are refused by create and load (never run
// as T5 buckets).
static void t_posenc_not_runnable(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const char *const want[4] = {"position_encoding_type none: not implemented yet",
                                        "position_encoding_type ALiBi: not implemented yet",
                                        "position_encoding_type RoPE: not implemented yet",
                                        "position_encoding_type FIRE: not implemented yet"};
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    char d[600], path[700], *json = NULL;
    size_t len = 0;
    int k;
    c.rotary_fraction = 0.7;  // d_kv 3: two rotary dims, so the config itself is valid
    for (k = FAT5_POS_NONE; k <= FAT5_POS_FIRE; k++) {
        c.pos_kind = (fat5_pos_kind)k;
        TM_EXPECT_ERR(T, fat5_model_create(ctx, &c, 1, &m), FAT5_ERR_UNSUPPORTED, want[k - 1]);
        FAT5_CHECK(T, m == NULL);
    }
    // a saved T5 model whose config.json is then switched to ALiBi
    c.pos_kind = FAT5_POS_T5;
    snprintf(d, sizeof d, "%s/alibi", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, d));
    fat5_model_destroy(m);
    m = NULL;
    c.pos_kind = FAT5_POS_ALIBI;
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &c, &json, &len));
    snprintf(path, sizeof path, "%s/config.json", d);
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, json, len));
    fat5_free(ctx, json);
    TM_EXPECT_ERR(T, fat5_model_load(ctx, d, &m), FAT5_ERR_UNSUPPORTED, want[1]);
    FAT5_CHECK(T, m == NULL);
}

#define FAT5_TESTS_POSENC(X) X(posenc_config_parse) X(posenc_config_rejects) X(posenc_config_t5_json) \
    X(posenc_not_runnable)
