// Whole model on the CPU: config parsing, Hugging Face parity (fixtures from
// ref/make_reference.py), finite differences of every parameter gradient, packing, round trips
// and bad input.

#ifndef FAT5_TEST_DATA
#define FAT5_TEST_DATA "tests/data"
#endif

static char *tm_read(fat5_test *T, const char *path, size_t *len) {
    char *buf = NULL;
    if (fat5__read_file(fat5_test_ctx(T), path, (size_t)64 << 20, &buf, len) != FAT5_OK) return NULL;
    return buf;
}

static int tm_contains(fat5_test *T, const char *needle) {
    return strstr(fat5_last_error(fat5_test_ctx(T)), needle) != NULL;
}

#define TM_EXPECT_ERR(T, call, status, needle)                                                        \
    do {                                                                                              \
        fat5_status s_ = (call);                                                                      \
        FAT5_CHECK_MSG(T, s_ == (status), "%s -> %s, want %s (%s)", #call, fat5_status_string(s_),   \
                       fat5_status_string(status), fat5_last_error(fat5_test_ctx(T)));                \
        FAT5_CHECK_MSG(T, tm_contains(T, needle), "message '%s' does not mention '%s'",              \
                       fat5_last_error(fat5_test_ctx(T)), needle);                                    \
    } while (0)

static fat5_status tm_cfg(fat5_test *T, const char *json, fat5_model_config *c) {
    return fat5_model_config_from_json(fat5_test_ctx(T), json, strlen(json), c);
}

static void t_config_defaults(fat5_test *T) {
    fat5_model_config c;
    // a t5-small style file: no feed_forward_proj, no relative_attention_max_distance
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"d_model\": 512, \"num_heads\": 8, \"model_type\": \"t5\"}", &c));
    FAT5_CHECK(T, c.vocab_size == 32128 && c.d_kv == 64 && c.d_ff == 2048 && c.num_layers == 6);
    FAT5_CHECK(T, c.num_decoder_layers == 6 && c.rel_buckets == 32 && c.rel_max_distance == 128);
    FAT5_CHECK(T, c.act == FAT5_ACT_RELU && !c.gated && c.tie_word_embeddings && c.scale_decoder_outputs);
    FAT5_CHECK(T, c.layer_norm_eps == 1e-6 && c.pad_token_id == 0 && c.eos_token_id == 1);
    // FLAN / v1.1: gated-gelu is the tanh GELU, untied, unscaled
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"feed_forward_proj\": \"gated-gelu\", \"tie_word_embeddings\": false,"
                                 "\"num_decoder_layers\": null, \"num_layers\": 8}", &c));
    FAT5_CHECK(T, c.act == FAT5_ACT_GELU_TANH && c.gated && !c.tie_word_embeddings && !c.scale_decoder_outputs);
    FAT5_CHECK(T, c.num_decoder_layers == 8);
    // ByT5-small shape: 12 encoder, 4 decoder layers
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"d_model\": 1472, \"d_ff\": 3584, \"num_heads\": 6, \"num_layers\": 12,"
                                 "\"num_decoder_layers\": 4, \"vocab_size\": 384, \"feed_forward_proj\": \"gated-gelu\","
                                 "\"tie_word_embeddings\": false}", &c));
    FAT5_CHECK(T, c.num_layers == 12 && c.num_decoder_layers == 4 && c.vocab_size == 384);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"feed_forward_proj\": \"gated-silu\"}", &c));
    FAT5_CHECK(T, c.act == FAT5_ACT_SILU && c.gated);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"feed_forward_proj\": \"gelu\"}", &c));
    FAT5_CHECK(T, c.act == FAT5_ACT_GELU && !c.gated);
    // UMT5: a table in every layer; mT5 vocabulary
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"model_type\": \"umt5\", \"tie_word_embeddings\": false}", &c));
    FAT5_CHECK(T, c.bias_every_layer && c.vocab_size == 250112 && c.gated && c.act == FAT5_ACT_GELU_TANH);
    FAT5_CHECK(T, c.d_ff == 1024 && c.num_layers == 8 && c.num_decoder_layers == 8 && c.num_heads == 6);
    FAT5_CHECK(T, !c.tie_word_embeddings && !c.scale_decoder_outputs);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"model_type\": \"mt5\"}", &c));
    FAT5_CHECK(T, !c.bias_every_layer && c.vocab_size == 250112 && c.d_ff == 1024 && !c.tie_word_embeddings);
    // transformers 5.x: scale_decoder_outputs wins over tie_word_embeddings
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"tie_word_embeddings\": true, \"scale_decoder_outputs\": false}", &c));
    FAT5_CHECK(T, c.tie_word_embeddings && !c.scale_decoder_outputs);
    // H * d_kv != d_model and odd bucket settings are fine
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"d_model\": 1024, \"d_kv\": 128, \"num_heads\": 32,"
                                 "\"relative_attention_num_buckets\": 64, \"relative_attention_max_distance\": 256}", &c));
    FAT5_CHECK(T, c.num_heads * c.d_kv == 4096 && c.rel_buckets == 64 && c.rel_max_distance == 256);
}

static void t_config_rejects(fat5_test *T) {
    fat5_model_config c;
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"num_experts\": 8}", &c), FAT5_ERR_UNSUPPORTED, "num_experts");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"bart\"}", &c), FAT5_ERR_UNSUPPORTED, "bart");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"feed_forward_proj\": \"gated-gelu\", \"is_gated_act\": false}", &c),
                  FAT5_ERR_FORMAT, "is_gated_act");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"feed_forward_proj\": \"relu\", \"dense_act_fn\": \"gelu_new\"}", &c),
                  FAT5_ERR_FORMAT, "dense_act_fn");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"feed_forward_proj\": \"gated-mish\"}", &c), FAT5_ERR_UNSUPPORTED, "mish");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"feed_forward_proj\": \"double-gated-gelu\"}", &c), FAT5_ERR_FORMAT,
                  "feed_forward_proj");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"d_model\": 0}", &c), FAT5_ERR_UNSUPPORTED, "d_model");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"d_model\": \"512\"}", &c), FAT5_ERR_FORMAT, "d_model");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"num_heads\": 2.5}", &c), FAT5_ERR_FORMAT, "num_heads");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"relative_attention_num_buckets\": 32, \"relative_attention_max_distance\": 8}", &c),
                  FAT5_ERR_UNSUPPORTED, "relative_attention_max_distance");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"is_encoder_decoder\": false}", &c), FAT5_ERR_UNSUPPORTED, "is_encoder_decoder");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"architectures\": [\"LongT5EncoderModel\"]}", &c),
                  FAT5_ERR_UNSUPPORTED, "LongT5EncoderModel is not supported");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"vocab_size\": 10, \"pad_token_id\": 10}", &c), FAT5_ERR_UNSUPPORTED, "pad_token_id");
    TM_EXPECT_ERR(T, tm_cfg(T, "[1, 2]", &c), FAT5_ERR_FORMAT, "object");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"d_model\": 512,}", &c), FAT5_ERR_FORMAT, "config.json");
}

// ---------------------------------------------------------------------------------------------
// Hugging Face fixtures

static fat5_status tm_load_batch(fat5_test *T, const char *dir, fat5_batch *b) {
    char path[1024];
    size_t len;
    char *text;
    fat5_status st;
    snprintf(path, sizeof path, "%s/batch.json", dir);
    text = tm_read(T, path, &len);
    if (!text) return FAT5_ERR_IO;
    st = fat5_batch_from_json(fat5_test_ctx(T), text, len, b);
    fat5__free(fat5_test_ctx(T), text);
    return st;
}

static float *tm_read_tensor(fat5_test *T, fat5_st_file *f, const char *name, int64_t *numel) {
    int i = fat5_st_find(f, name), d;
    const fat5_st_tensor *t;
    int64_t n = 1;
    float *p;
    if (i < 0) return NULL;
    t = fat5_st_get(f, i);
    for (d = 0; d < t->ndim; d++) n *= t->shape[d];
    p = (float *)malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!p || fat5_st_read_f32(f, i, p, n) != FAT5_OK) {
        free(p);
        FAT5_CHECK_MSG(T, 0, "cannot read %s", name);
        return NULL;
    }
    *numel = n;
    return p;
}

static double tm_max_abs(const float *x, int64_t n) {
    double m = 0;
    int64_t i;
    for (i = 0; i < n; i++) if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

// Loads fixture `name`, runs forward + backward, and compares logits, losses and every gradient.
static void tm_hf_parity(fat5_test *T, const char *name) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512], path[600];
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_st_file *ref = NULL;
    fat5_forward_result r;
    fat5_loss_config lc = fat5_loss_config_default();
    float *logits = NULL, *want = NULL, *g = NULL, *lref;
    int64_t n = 0, nl = 0;
    int i;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, name);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    memset(&b, 0, sizeof b);
    if (tm_load_batch(T, dir, &b) != FAT5_OK || fat5_st_load(ctx, path, &ref) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "fixture %s: %s", name, fat5_last_error(ctx));
        goto done;
    }
    if (fat5_model_forward(m, &b, &lc, &r) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "forward: %s", fat5_last_error(ctx));
        goto done;
    }
    want = tm_read_tensor(T, ref, "logits", &n);
    if (!want) goto done;
    FAT5_CHECK(T, n == b.dec_cu_seqlens[b.n_seq] * m->cfg.vocab_size);
    logits = (float *)malloc((size_t)n * sizeof(float));
    if (logits && fat5_model_get_logits(m, logits, n) == FAT5_OK)
        fat5_check_close(T, "logits", logits, want, (size_t)n, 1e-5, 1e-4);
    lref = tm_read_tensor(T, ref, "loss", &nl);
    if (lref) {
        FAT5_CHECK_MSG(T, fabs(r.loss - lref[0]) <= 1e-4 * fabs(lref[0]), "loss %.9g, transformers %.9g", r.loss,
                       (double)lref[0]);
        free(lref);
    }
    // gradients of the plain loss
    fat5_model_zero_grad(m);
    if (fat5_model_backward(m, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "backward: %s", fat5_last_error(ctx));
        goto done;
    }
    for (i = 0; i < m->n_params; i++) {
        char gname[160];
        int64_t gn = 0;
        float *mine;
        // a fixture stores its gradients under its checkpoint's names (FAT5's, LongT5's)
        snprintf(gname, sizeof gname, "grad.%s", m->params[i].io_name);
        free(g);
        g = tm_read_tensor(T, ref, gname, &gn);
        FAT5_CHECK_MSG(T, g != NULL, "fixture has no %s", gname);
        if (!g) continue;
        mine = (float *)malloc((size_t)gn * sizeof(float));
        if (!mine) break;
        fat5_model_get_grad(m, m->params[i].name, mine, gn);
        if (strstr(gname, "pe_encoding.mlp.2.bias")) {
            // FIRE's output bias adds the same value to every score of a head: the softmax rows
            // sum their gradients to zero, so the exact gradient is 0 and both sides hold rounding
            // noise. Check that both are negligible next to the MLP's weight gradient instead.
            int64_t wn = 0, e;
            float *gw;
            char wname[160];
            snprintf(wname, sizeof wname, "%.*smlp.2.weight", (int)(strstr(gname, "mlp.2.bias") - gname), gname);
            gw = tm_read_tensor(T, ref, wname, &wn);
            if (gw)
                for (e = 0; e < gn; e++)
                    FAT5_CHECK_MSG(T, fabs(mine[e]) <= 1e-5 * tm_max_abs(gw, wn) && fabs(g[e]) <= 1e-5 * tm_max_abs(gw, wn),
                                   "%s[%lld]: %g and %g, expected ~0 next to max |%s| %g", gname, (long long)e,
                                   (double)mine[e], (double)g[e], wname, tm_max_abs(gw, wn));
            free(gw);
        } else {
            // 1e-3 relative per element, with a floor at 1e-5 of the tensor's largest gradient
            fat5_check_close(T, gname, mine, g, (size_t)gn, 1e-5 * tm_max_abs(g, gn) + 1e-9, 1e-3);
        }
        free(mine);
    }
    // z-loss and label smoothing, checked against torch's own label-smoothed cross-entropy
    lc.z_loss = 1e-3;
    lc.label_smoothing = 0.1;
    if (fat5_model_forward(m, &b, &lc, &r) == FAT5_OK && (lref = tm_read_tensor(T, ref, "loss_zs", &nl)) != NULL) {
        FAT5_CHECK_MSG(T, fabs(r.loss - lref[0]) <= 1e-4 * fabs(lref[0]), "loss_zs %.9g, torch %.9g", r.loss,
                       (double)lref[0]);
        free(lref);
    }
done:
    free(g);
    free(logits);
    free(want);
    fat5_st_destroy(ref);
    fat5_batch_destroy(ctx, &b);
    fat5_model_destroy(m);
}

static void t_hf_t5_v10_relu_tied(fat5_test *T) { tm_hf_parity(T, "t5_v10_relu_tied"); }
static void t_hf_t5_v11_gated_gelu_untied(fat5_test *T) { tm_hf_parity(T, "t5_v11_gated_gelu_untied"); }
static void t_hf_umt5_gated_silu(fat5_test *T) { tm_hf_parity(T, "umt5_gated_silu"); }
// flash_t5 (FAT5 names) with T5 buckets: the PyTorch reference of make_reference.py --posenc
static void t_posenc_t5_parity(fat5_test *T) { tm_hf_parity(T, "posenc_t5"); }
// the other encodings, against the same reference written from their formulas (docs/posenc_notes.md);
// each batch packs three sequences, and the reference ran them one by one
static void t_posenc_none_parity(fat5_test *T) { tm_hf_parity(T, "posenc_none"); }
static void t_posenc_alibi_sym_parity(fat5_test *T) { tm_hf_parity(T, "posenc_alibi_sym"); }
static void t_posenc_alibi_asym_parity(fat5_test *T) { tm_hf_parity(T, "posenc_alibi_asym"); }
static void t_posenc_rope_neox_parity(fat5_test *T) { tm_hf_parity(T, "posenc_rope_neox"); }
static void t_posenc_rope_gptj_xpos_parity(fat5_test *T) { tm_hf_parity(T, "posenc_rope_gptj_xpos"); }
static void t_posenc_fire_parity(fat5_test *T) { tm_hf_parity(T, "posenc_fire"); }
// LongT5 with a local encoder (transformers' LongT5ForConditionalGeneration, rows run alone)
static void t_longt5_local_parity(fat5_test *T) { tm_hf_parity(T, "longt5_local"); }
static void t_longt5_tglobal_parity(fat5_test *T) { tm_hf_parity(T, "longt5_tglobal"); }

// ---------------------------------------------------------------------------------------------
// tiny random models

static fat5_model_config tm_tiny_config(int gated, int tied, int umt5) {
    fat5_model_config c = fat5_model_config_default();
    c.vocab_size = 13;
    c.d_model = 8;
    c.d_kv = 3;
    c.num_heads = 2;
    c.d_ff = 10;
    c.num_layers = 2;
    c.num_decoder_layers = 2;
    c.rel_buckets = 8;
    c.rel_max_distance = 10;
    c.gated = gated;
    c.act = gated ? FAT5_ACT_GELU_TANH : FAT5_ACT_RELU;
    c.tie_word_embeddings = tied;
    c.scale_decoder_outputs = tied;
    c.bias_every_layer = umt5;
    if (umt5) memcpy(c.model_type, "umt5", 5);
    return c;
}

// three sequences of different lengths, one with a single decoder token, -100 inside
static const int32_t tm_enc_tok[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 1, 5, 7, 9, 11, 3, 1, 4};
static const int32_t tm_enc_cu[] = {0, 12, 13, 19};
static const int32_t tm_labels[] = {5, 6, -100, 8, 9, 10, 11, 12, 1, 4, 3, 2, -100, 1};
static const int32_t tm_dec_cu[] = {0, 9, 10, 14};

static fat5_batch tm_batch(void) {
    fat5_batch b;
    memset(&b, 0, sizeof b);
    b.n_seq = 3;
    b.n_enc_tokens = 19;
    b.n_dec_tokens = 14;
    b.enc_tokens = tm_enc_tok;
    b.enc_cu_seqlens = tm_enc_cu;
    b.labels = tm_labels;
    b.dec_cu_seqlens = tm_dec_cu;
    return b;
}

typedef struct tm_fd { fat5_model *m; fat5_batch b; fat5_loss_config lc; } tm_fd;
static double tm_fd_loss(void *u) {
    tm_fd *a = (tm_fd *)u;
    fat5_forward_result r;
    if (fat5_model_forward(a->m, &a->b, &a->lc, &r) != FAT5_OK) return NAN;
    return r.loss;
}

// norms away from 1, so that their gradients matter (tensor i draws from stream i + offset)
static void tm_perturb_norms(fat5_model *m, uint64_t offset) {
    int i;
    for (i = 0; i < m->n_params; i++)
        if (strstr(m->params[i].name, "layer_norm")) {
            fat5_rng r = fat5_rng_init((uint64_t)i + offset);
            size_t j;
            for (j = 0; j < m->params[i].numel; j++) m->w[m->params[i].offset + j] += (float)(0.3 * fat5_rng_normal(&r));
        }
}

// Every parameter's gradient of m against central differences of its loss on tm_batch() (z-loss
// and label smoothing on). Tensors behind a ReLU (all of them when relu_all; FIRE's MLP and
// scalars, "pe_encoding.", always) skip an element whose step crosses a kink, and at most one in
// kink_share may; FIRE's tensors must not have an all-zero gradient (but mlp.2.bias's, which is 0).
static void tm_model_fd_check(fat5_test *T, fat5_model *m, const char *what, int relu_all, int kink_share) {
    tm_fd a;
    float *g;
    int i, kinks = 0, checked = 0;
    a.m = m;
    a.b = tm_batch();
    a.lc.z_loss = 1e-2;
    a.lc.label_smoothing = 0.1;
    tm_fd_loss(&a);
    fat5_model_zero_grad(m);
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
    g = (float *)malloc(m->n_floats * sizeof(float));
    FAT5_REQUIRE(T, g != NULL);
    memcpy(g, FAT5__HOST(const float, m->gd), m->n_floats * sizeof(float));
    for (i = 0; i < m->n_params; i++) {
        const fat5__param *p = &m->params[i];
        int fire = strstr(p->name, "pe_encoding.") != NULL;
        char name[200];
        snprintf(name, sizeof name, "%s%s%s", what, what[0] ? ": " : "", p->name);
        if (relu_all || fire)
            tc_fd_check_kinks(T, name, m->w + p->offset, p->numel, g + p->offset, tm_fd_loss, &a, 1e-3, 2e-4, 2e-3,
                              &kinks, &checked);
        else
            tc_fd_check(T, name, m->w + p->offset, p->numel, g + p->offset, tm_fd_loss, &a, 1e-3, 2e-4, 2e-3);
        if (fire)
            FAT5_CHECK_MSG(T, tm_max_abs(g + p->offset, (int64_t)p->numel) > 0 || strstr(p->name, "mlp.2.bias"),
                           "%s: the gradient is all zero", name);
    }
    FAT5_CHECK_MSG(T, kinks * kink_share <= checked, "%s: %d of %d elements sat on a ReLU kink", what, kinks, checked);
    free(g);
}

// every parameter's gradient against central differences of the whole model's loss
static void tm_model_fd(fat5_test *T, int gated, int tied, int umt5) {
    fat5_model_config c = tm_tiny_config(gated, tied, umt5);
    fat5_model *m = NULL;
    FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &c, 11, &m));
    tm_perturb_norms(m, 0);
    tm_model_fd_check(T, m, "", !gated, 20);
    fat5_model_destroy(m);
}
static void t_model_fd_gated(fat5_test *T) { tm_model_fd(T, 1, 0, 0); }
static void t_model_fd_relu_tied(fat5_test *T) { tm_model_fd(T, 0, 1, 0); }
static void t_model_fd_umt5(fat5_test *T) { tm_model_fd(T, 1, 0, 1); }

// m's logits for tm_batch() packed equal those of each sequence run alone: nothing crosses a
// boundary and positions restart at every sequence
static void tm_check_packing(fat5_test *T, fat5_model *m, const char *what) {
    fat5_batch b = tm_batch();
    int64_t V = m->cfg.vocab_size, s;
    float *all = (float *)malloc(14 * (size_t)V * sizeof(float)), *one = (float *)malloc(14 * (size_t)V * sizeof(float));
    FAT5_REQUIRE(T, all && one);
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, all, 14 * V));
    for (s = 0; s < 3; s++) {
        fat5_batch bs;
        int32_t ecu[2], dcu[2];
        int64_t nd = tm_dec_cu[s + 1] - tm_dec_cu[s];
        char name[96];
        ecu[0] = 0; ecu[1] = tm_enc_cu[s + 1] - tm_enc_cu[s];
        dcu[0] = 0; dcu[1] = (int32_t)nd;
        memset(&bs, 0, sizeof bs);
        bs.n_seq = 1;
        bs.n_enc_tokens = ecu[1];
        bs.n_dec_tokens = nd;
        bs.enc_tokens = tm_enc_tok + tm_enc_cu[s];
        bs.enc_cu_seqlens = ecu;
        bs.labels = tm_labels + tm_dec_cu[s];
        bs.dec_cu_seqlens = dcu;
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &bs, NULL, NULL));
        FAT5_REQUIRE_OK(T, fat5_model_get_logits(m, one, nd * V));
        snprintf(name, sizeof name, "%s, sequence %d", what, (int)s);
        fat5_check_close(T, name, one, all + tm_dec_cu[s] * V, (size_t)(nd * V), 1e-6, 1e-5);
    }
    free(all);
    free(one);
}

static void t_packing_isolation(fat5_test *T) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &c, 5, &m));
    tm_check_packing(T, m, "T5 buckets");
    fat5_model_destroy(m);
}

static int tm_files_equal(fat5_test *T, const char *a, const char *b) {
    size_t la, lb;
    char *x = tm_read(T, a, &la), *y = tm_read(T, b, &lb);
    int eq = x && y && la == lb && memcmp(x, y, la) == 0;
    fat5__free(fat5_test_ctx(T), x);
    fat5__free(fat5_test_ctx(T), y);
    return eq;
}

// save -> load gives identical parameters and logits; saving twice gives identical bytes
static void t_save_load_roundtrip(fat5_test *T) {
    static const char *const fixtures[] = {"t5_v10_relu_tied", "t5_v11_gated_gelu_untied", "umt5_gated_silu"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < 3; k++) {
        char src[512], d1[600], d2[600], p1[700], p2[700];
        fat5_model *a = NULL, *b = NULL, *c = NULL;
        fat5_batch bt;
        int64_t n;
        float *la, *lb;
        snprintf(src, sizeof src, "%s/%s", FAT5_TEST_DATA, fixtures[k]);
        snprintf(d1, sizeof d1, "%s/a%d", fat5_test_tmpdir(T), k);
        snprintf(d2, sizeof d2, "%s/b%d", fat5_test_tmpdir(T), k);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &a));
        FAT5_REQUIRE_OK(T, fat5_model_save(a, d1));
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, d1, &b));
        FAT5_REQUIRE_OK(T, fat5_model_save(b, d2));
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, d2, &c));
        FAT5_CHECK(T, a->n_floats == b->n_floats && memcmp(a->w, b->w, a->n_floats * sizeof(float)) == 0);
        FAT5_CHECK(T, memcmp(&a->cfg, &b->cfg, sizeof a->cfg) == 0 && memcmp(&a->cfg, &c->cfg, sizeof a->cfg) == 0);
        snprintf(p1, sizeof p1, "%s/model.safetensors", d1);
        snprintf(p2, sizeof p2, "%s/model.safetensors", d2);
        FAT5_CHECK_MSG(T, tm_files_equal(T, p1, p2), "%s: model.safetensors differs after a second save", fixtures[k]);
        snprintf(p1, sizeof p1, "%s/config.json", d1);
        snprintf(p2, sizeof p2, "%s/config.json", d2);
        FAT5_CHECK_MSG(T, tm_files_equal(T, p1, p2), "%s: config.json differs after a second save", fixtures[k]);
        memset(&bt, 0, sizeof bt);
        if (tm_load_batch(T, src, &bt) == FAT5_OK) {
            n = bt.dec_cu_seqlens[bt.n_seq] * a->cfg.vocab_size;
            la = (float *)malloc((size_t)n * sizeof(float));
            lb = (float *)malloc((size_t)n * sizeof(float));
            if (la && lb && fat5_model_forward(a, &bt, NULL, NULL) == FAT5_OK && fat5_model_get_logits(a, la, n) == 0 &&
                fat5_model_forward(c, &bt, NULL, NULL) == FAT5_OK && fat5_model_get_logits(c, lb, n) == 0)
                FAT5_CHECK_MSG(T, memcmp(la, lb, (size_t)n * sizeof(float)) == 0, "%s: logits differ after reload",
                               fixtures[k]);
            else
                FAT5_CHECK_MSG(T, 0, "forward failed: %s", fat5_last_error(ctx));
            free(la);
            free(lb);
            fat5_batch_destroy(ctx, &bt);
        }
        fat5_model_destroy(a);
        fat5_model_destroy(b);
        fat5_model_destroy(c);
    }
}

// A model made here with fat5_model_create survives save -> load too (tied and UMT5 layouts).
static void t_create_save_load(fat5_test *T) {
    int k;
    for (k = 0; k < 3; k++) {
        fat5_model_config c = tm_tiny_config(k != 1, k == 1, k == 2);
        fat5_model *a = NULL, *b = NULL;
        char d[600];
        snprintf(d, sizeof d, "%s/m%d", fat5_test_tmpdir(T), k);
        FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &c, 3, &a));
        FAT5_REQUIRE_OK(T, fat5_model_save(a, d));
        FAT5_REQUIRE_OK(T, fat5_model_load(fat5_test_ctx(T), d, &b));
        FAT5_CHECK(T, memcmp(&a->cfg, &b->cfg, sizeof a->cfg) == 0);
        FAT5_CHECK(T, a->n_floats == b->n_floats && memcmp(a->w, b->w, a->n_floats * sizeof(float)) == 0);
        fat5_model_destroy(a);
        fat5_model_destroy(b);
    }
}

// ---------------------------------------------------------------------------------------------
// bad batches, one test each

static fat5_model *tm_tiny(fat5_test *T) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    if (fat5_model_create(fat5_test_ctx(T), &c, 1, &m) != FAT5_OK) return NULL;
    return m;
}

static void t_batch_token_out_of_vocab(fat5_test *T) {
    fat5_model *m = tm_tiny(T);
    fat5_batch b = tm_batch();
    int32_t tok[19];
    FAT5_REQUIRE(T, m != NULL);
    memcpy(tok, tm_enc_tok, sizeof tok);
    tok[4] = 13;  // vocab_size
    b.enc_tokens = tok;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG, "vocab_size");
    tok[4] = 2;
    tok[14] = -1;  // sequence 2 starts at token 13
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG,
                  "sequence 2, encoder position 1: token id -1");
    b = tm_batch();
    {
        int32_t lab[14];
        memcpy(lab, tm_labels, sizeof lab);
        lab[11] = 99;  // sequence 2 starts at decoder token 10
        b.labels = lab;
        TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG,
                      "sequence 2, decoder position 1: label 99");
    }
    fat5_model_destroy(m);
}

static void t_batch_negative_length(fat5_test *T) {
    fat5_model *m = tm_tiny(T);
    fat5_batch b = tm_batch();
    static const int32_t bad_cu[] = {0, 12, 10, 19};
    FAT5_REQUIRE(T, m != NULL);
    b.enc_cu_seqlens = bad_cu;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG, "negative");
    fat5_model_destroy(m);
}

static void t_batch_empty(fat5_test *T) {
    fat5_model *m = tm_tiny(T);
    fat5_batch b = tm_batch();
    fat5_batch e;
    FAT5_REQUIRE(T, m != NULL);
    b.n_seq = 0;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG, "empty");
    {
        const char *js = "{\"inputs\": [], \"labels\": []}";
        FAT5_REQUIRE_OK(T, fat5_batch_from_json(fat5_test_ctx(T), js, strlen(js), &e));
    }
    TM_EXPECT_ERR(T, fat5_model_forward(m, &e, NULL, NULL), FAT5_ERR_INVALID_ARG, "empty");
    fat5_batch_destroy(fat5_test_ctx(T), &e);
    // a sequence with no encoder tokens has nothing to cross-attend to
    {
        static const int32_t cu[] = {0, 12, 12, 19};
        b = tm_batch();
        b.enc_cu_seqlens = cu;
        TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG, "no encoder tokens");
    }
    TM_EXPECT_ERR(T, fat5_model_backward(m, 1.0f), FAT5_ERR_STATE, "no forward");
    fat5_model_destroy(m);
}

// The buffers' token counts bound cu_seqlens: an offset past the end is an error, not a read past
// the caller's array.
static int tm_nonzero(const float *x, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (x[i] != 0) return 1;
    return 0;
}

static void t_batch_token_counts(fat5_test *T) {
    fat5_model *m = tm_tiny(T);
    fat5_batch b = tm_batch();
    fat5_forward_result r;
    static const int32_t long_cu[] = {0, 12, 13, 40};
    FAT5_REQUIRE(T, m != NULL);
    b.n_enc_tokens = 18;  // enc_cu_seqlens ends at 19
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG,
                  "sequence 2 ends at encoder token 19, past the 18 tokens");
    b.n_enc_tokens = 20;  // tokens the sequences do not cover: a miscounted batch
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG, "cover 19 encoder");
    b = tm_batch();
    b.enc_cu_seqlens = long_cu;  // sequence 2 runs to 40, the buffer holds 19
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG,
                  "sequence 2 ends at encoder token 40, past the 19 tokens");
    b = tm_batch();
    b.n_dec_tokens = 0;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, NULL, NULL), FAT5_ERR_INVALID_ARG, "n_dec_tokens = 0");
    b = tm_batch();
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, &r));
    FAT5_CHECK(T, r.n_dec_tokens == 14 && r.n_tokens == 12);
    fat5_model_destroy(m);
}

// Loss settings out of range are errors, not NaN losses.
static void t_loss_config_rejects(fat5_test *T) {
    fat5_model *m = tm_tiny(T);
    fat5_batch b = tm_batch();
    fat5_loss_config lc = fat5_loss_config_default();
    FAT5_REQUIRE(T, m != NULL);
    lc.z_loss = -1e-4;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, &lc, NULL), FAT5_ERR_INVALID_ARG, "z_loss");
    lc.z_loss = NAN;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, &lc, NULL), FAT5_ERR_INVALID_ARG, "z_loss");
    lc.z_loss = INFINITY;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, &lc, NULL), FAT5_ERR_INVALID_ARG, "z_loss");
    lc = fat5_loss_config_default();
    lc.label_smoothing = 1.0;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, &lc, NULL), FAT5_ERR_INVALID_ARG, "label_smoothing");
    lc.label_smoothing = -0.1;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, &lc, NULL), FAT5_ERR_INVALID_ARG, "label_smoothing");
    lc.label_smoothing = NAN;
    TM_EXPECT_ERR(T, fat5_model_forward(m, &b, &lc, NULL), FAT5_ERR_INVALID_ARG, "label_smoothing");
    lc.label_smoothing = 0.999;
    FAT5_CHECK_MSG(T, fat5_model_forward(m, &b, &lc, NULL) == FAT5_OK, "%s", fat5_last_error(fat5_test_ctx(T)));
    fat5_model_destroy(m);
}

// backward needs a forward with labels, runs once per forward, and takes a finite scale.
static void t_backward_state(fat5_test *T) {
    fat5_model *m = tm_tiny(T);
    fat5_batch b = tm_batch();
    float *g1, *g2;
    int64_t n;
    FAT5_REQUIRE(T, m != NULL);
    n = m->params[m->shared].numel;
    g1 = (float *)calloc((size_t)n, sizeof(float));
    g2 = (float *)calloc((size_t)n, sizeof(float));
    FAT5_REQUIRE(T, g1 && g2);
    // a forward without labels (decoder tokens only) has no loss to differentiate
    b.dec_tokens = tm_labels;
    b.labels = NULL;
    {
        static const int32_t dec_tok[] = {5, 6, 7, 8, 9, 10, 11, 12, 1, 4, 3, 2, 0, 1};
        b.dec_tokens = dec_tok;
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    }
    TM_EXPECT_ERR(T, fat5_model_backward(m, 1.0f), FAT5_ERR_STATE, "no labels");
    // one backward per forward: a second would double the gradients
    b = tm_batch();
    FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    TM_EXPECT_ERR(T, fat5_model_backward(m, NAN), FAT5_ERR_INVALID_ARG, "grad_scale");
    TM_EXPECT_ERR(T, fat5_model_backward(m, INFINITY), FAT5_ERR_INVALID_ARG, "grad_scale");
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
    FAT5_REQUIRE_OK(T, fat5_model_get_grad(m, "shared.weight", g1, n));
    TM_EXPECT_ERR(T, fat5_model_backward(m, 1.0f), FAT5_ERR_STATE, "already");
    FAT5_REQUIRE_OK(T, fat5_model_get_grad(m, "shared.weight", g2, n));
    FAT5_CHECK(T, memcmp(g1, g2, (size_t)n * sizeof(float)) == 0 && tm_nonzero(g1, n));
    // a new forward allows a new backward: gradients accumulate (twice the first)
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
    FAT5_REQUIRE_OK(T, fat5_model_get_grad(m, "shared.weight", g2, n));
    {
        int64_t i, bad = 0;
        for (i = 0; i < n; i++) bad += fabsf(g2[i] - 2 * g1[i]) > 1e-6f * (1 + fabsf(g1[i]));
        FAT5_CHECK_MSG(T, bad == 0, "%lld gradients are not twice the first backward's", (long long)bad);
    }
    free(g1);
    free(g2);
    fat5_model_destroy(m);
}

static void t_batch_json_rejects(fat5_test *T) {
    fat5_batch b;
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *s;
    s = "{\"inputs\": [[1, 2]], \"labels\": [[3], [4]]}";
    TM_EXPECT_ERR(T, fat5_batch_from_json(ctx, s, strlen(s), &b), FAT5_ERR_FORMAT, "rows");
    s = "{\"inputs\": [[1, -100]], \"labels\": [[3]]}";
    TM_EXPECT_ERR(T, fat5_batch_from_json(ctx, s, strlen(s), &b), FAT5_ERR_FORMAT, "inputs");
    s = "{\"inputs\": [[1, 2.5]], \"labels\": [[3]]}";
    TM_EXPECT_ERR(T, fat5_batch_from_json(ctx, s, strlen(s), &b), FAT5_ERR_FORMAT, "token id");
    s = "{\"inputs\": [[1]], \"labelz\": [[3]]}";
    TM_EXPECT_ERR(T, fat5_batch_from_json(ctx, s, strlen(s), &b), FAT5_ERR_FORMAT, "labelz");
    s = "{\"inputs\": [[1]], \"labels\": [[3, -7]]}";
    TM_EXPECT_ERR(T, fat5_batch_from_json(ctx, s, strlen(s), &b), FAT5_ERR_FORMAT, "labels");
    s = "{\"inputs\": [[1, 2]], \"labels\": [[-100, 3]]}";
    FAT5_REQUIRE_OK(T, fat5_batch_from_json(ctx, s, strlen(s), &b));
    FAT5_CHECK(T, b.n_seq == 1 && b.enc_cu_seqlens[1] == 2 && b.labels[0] == -100 && b.dec_cu_seqlens[1] == 2);
    fat5_batch_destroy(ctx, &b);
}

// ---------------------------------------------------------------------------------------------
// bad checkpoints: each writes a directory that differs from a good one in one way

// writes config.json (text) and model.safetensors (the model's tensors minus `drop`, with `reshape`
// given a wrong first dimension) into dir
static void tm_write_ckpt(fat5_test *T, fat5_model *m, const char *dir, const char *config_json, const char *drop,
                          const char *reshape) {
    fat5_st_write_tensor *t = (fat5_st_write_tensor *)calloc((size_t)m->n_params, sizeof *t);
    char path[700];
    int i, n = 0;
    const char *meta[2];
    meta[0] = "format";
    meta[1] = "pt";
    if (!t) return;
    mkdir(dir, 0777);
    for (i = 0; i < m->n_params; i++) {
        if (drop && strcmp(drop, m->params[i].name) == 0) continue;
        t[n].name = m->params[i].name;
        t[n].ndim = m->params[i].ndim;
        t[n].shape[0] = m->params[i].shape[0];
        t[n].shape[1] = m->params[i].shape[1];
        if (reshape && strcmp(reshape, m->params[i].name) == 0) {
            t[n].shape[0] = 1;
            t[n].shape[1] = (int64_t)m->params[i].numel;
            t[n].ndim = 2;
        }
        t[n].data = m->w + m->params[i].offset;
        n++;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FAT5_CHECK(T, fat5_st_write(fat5_test_ctx(T), path, t, n, meta, 1) == FAT5_OK);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FAT5_CHECK(T, fat5_write_file_atomic(fat5_test_ctx(T), path, config_json, strlen(config_json)) == FAT5_OK);
    free(t);
}

static fat5_model *tm_tiny_with_json(fat5_test *T, char **json) {
    fat5_model *m = tm_tiny(T);
    size_t len;
    if (m && fat5_model_config_to_json(fat5_test_ctx(T), &m->cfg, json, &len) != FAT5_OK) {
        fat5_model_destroy(m);
        return NULL;
    }
    return m;
}

static void t_ckpt_missing_tensor(fat5_test *T) {
    char *json = NULL, dir[600];
    fat5_model *m = tm_tiny_with_json(T, &json), *l = NULL;
    FAT5_REQUIRE(T, m != NULL);
    snprintf(dir, sizeof dir, "%s/ck", fat5_test_tmpdir(T));
    tm_write_ckpt(T, m, dir, json, "decoder.block.1.layer.2.DenseReluDense.wi_1.weight", NULL);
    TM_EXPECT_ERR(T, fat5_model_load(fat5_test_ctx(T), dir, &l), FAT5_ERR_FORMAT,
                  "missing tensor 'decoder.block.1.layer.2.DenseReluDense.wi_1.weight'");
    FAT5_CHECK(T, l == NULL);
    fat5__free(fat5_test_ctx(T), json);
    fat5_model_destroy(m);
}

static void t_ckpt_shape_mismatch(fat5_test *T) {
    char *json = NULL, dir[600];
    fat5_model *m = tm_tiny_with_json(T, &json), *l = NULL;
    FAT5_REQUIRE(T, m != NULL);
    snprintf(dir, sizeof dir, "%s/ck", fat5_test_tmpdir(T));
    tm_write_ckpt(T, m, dir, json, NULL, "encoder.block.0.layer.0.SelfAttention.k.weight");
    TM_EXPECT_ERR(T, fat5_model_load(fat5_test_ctx(T), dir, &l), FAT5_ERR_FORMAT, "config.json implies [6, 8]");
    fat5__free(fat5_test_ctx(T), json);
    fat5_model_destroy(m);
}

static void t_ckpt_config_mismatch(fat5_test *T) {
    char *json = NULL, dir[600], *p;
    fat5_model *m = tm_tiny_with_json(T, &json), *l = NULL;
    FAT5_REQUIRE(T, m != NULL);
    p = strstr(json, "\"d_ff\": 10");
    FAT5_REQUIRE(T, p != NULL);
    p[9] = '2';  // d_ff 12 in config.json, 10 in the tensors
    snprintf(dir, sizeof dir, "%s/ck", fat5_test_tmpdir(T));
    tm_write_ckpt(T, m, dir, json, NULL, NULL);
    TM_EXPECT_ERR(T, fat5_model_load(fat5_test_ctx(T), dir, &l), FAT5_ERR_FORMAT, "implies [12, 8]");
    fat5__free(fat5_test_ctx(T), json);
    fat5_model_destroy(m);
}

static void t_ckpt_wrong_dtype(fat5_test *T) {
    // a checkpoint whose shared.weight is stored as I32
    char *json = NULL, dir[600], path[700], header[256];
    fat5_model *m = tm_tiny_with_json(T, &json), *l = NULL;
    FILE *f;
    size_t hl, i;
    unsigned char len8[8];
    FAT5_REQUIRE(T, m != NULL);
    snprintf(dir, sizeof dir, "%s/ck", fat5_test_tmpdir(T));
    tm_write_ckpt(T, m, dir, json, NULL, NULL);  // everything valid first
    // then replace the weights by a one-tensor file with the wrong dtype
    snprintf(header, sizeof header, "{\"shared.weight\":{\"dtype\":\"I32\",\"shape\":[13,8],\"data_offsets\":[0,416]}}");
    hl = strlen(header);
    for (i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    FAT5_REQUIRE(T, f != NULL);
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, hl, f);
    for (i = 0; i < 416; i++) fputc(0, f);
    fclose(f);
    TM_EXPECT_ERR(T, fat5_model_load(fat5_test_ctx(T), dir, &l), FAT5_ERR_UNSUPPORTED, "dtype I32");
    fat5__free(fat5_test_ctx(T), json);
    fat5_model_destroy(m);
}

static void t_ckpt_unexpected_tensor(fat5_test *T) {
    // a config with 1 decoder layer against tensors of 2: the second layer is unexpected
    char *json = NULL, dir[600], *p;
    fat5_model *m = tm_tiny_with_json(T, &json), *l = NULL;
    FAT5_REQUIRE(T, m != NULL);
    p = strstr(json, "\"num_decoder_layers\": 2");
    FAT5_REQUIRE(T, p != NULL);
    p[22] = '1';
    snprintf(dir, sizeof dir, "%s/ck", fat5_test_tmpdir(T));
    tm_write_ckpt(T, m, dir, json, NULL, NULL);
    TM_EXPECT_ERR(T, fat5_model_load(fat5_test_ctx(T), dir, &l), FAT5_ERR_FORMAT, "unexpected tensor 'decoder.block.1");
    fat5__free(fat5_test_ctx(T), json);
    fat5_model_destroy(m);
}

static void t_ckpt_sharded(fat5_test *T) {
    // split a fixture into two shards with an index; it loads to the same weights
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *a = NULL, *b = NULL;
    char dir[600], path[700], *json = NULL;
    size_t len;
    fat5_st_write_tensor *t;
    fat5__sb idx;
    int i, half;
    const char *meta[2];
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, FAT5_TEST_DATA "/t5_v11_gated_gelu_untied", &a));
    FAT5_REQUIRE_OK(T, fat5_model_config_to_json(ctx, &a->cfg, &json, &len));
    snprintf(dir, sizeof dir, "%s/sharded", fat5_test_tmpdir(T));
    mkdir(dir, 0777);
    t = (fat5_st_write_tensor *)calloc((size_t)a->n_params, sizeof *t);
    FAT5_REQUIRE(T, t != NULL);
    meta[0] = "format";
    meta[1] = "pt";
    fat5__sb_init(&idx, ctx);
    fat5__sb_puts(&idx, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    half = a->n_params / 2;
    for (i = 0; i < a->n_params; i++) {
        t[i].name = a->params[i].name;
        t[i].ndim = a->params[i].ndim;
        t[i].shape[0] = a->params[i].shape[0];
        t[i].shape[1] = a->params[i].shape[1];
        t[i].data = a->w + a->params[i].offset;
        fat5__sb_printf(&idx, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "", t[i].name,
                        i < half ? 1 : 2);
    }
    fat5__sb_puts(&idx, "}}");
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, half, meta, 1) == FAT5_OK);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    FAT5_CHECK(T, fat5_st_write(ctx, path, t + half, a->n_params - half, meta, 1) == FAT5_OK);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FAT5_CHECK(T, !idx.oom && fat5_write_file_atomic(ctx, path, idx.buf, idx.len) == FAT5_OK);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FAT5_CHECK(T, fat5_write_file_atomic(ctx, path, json, len) == FAT5_OK);
    if (fat5_model_load(ctx, dir, &b) == FAT5_OK) {
        FAT5_CHECK(T, b->n_floats == a->n_floats && memcmp(a->w, b->w, a->n_floats * sizeof(float)) == 0);
    } else {
        FAT5_CHECK_MSG(T, 0, "sharded load: %s", fat5_last_error(ctx));
    }
    // an index that points outside the directory is refused
    fat5_model_destroy(b);
    b = NULL;
    {
        const char *evil = "{\"weight_map\": {\"shared.weight\": \"../model.safetensors\"}}";
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        FAT5_CHECK(T, fat5_write_file_atomic(ctx, path, evil, strlen(evil)) == FAT5_OK);
        TM_EXPECT_ERR(T, fat5_model_load(ctx, dir, &b), FAT5_ERR_FORMAT, "../model.safetensors");
    }
    fat5__sb_free(&idx);
    free(t);
    fat5__free(ctx, json);
    fat5_model_destroy(a);
    fat5_model_destroy(b);
}

// The training forward computes the loss and dlogits 1,024 decoder rows at a time. Over three
// sequences of 1000, 900 and 600 decoder tokens (chunk borders inside sequences), with z-loss and
// label smoothing, the loss and every gradient are the bits of the same model run in one chunk
// (each row's logits, loss terms and dlogits depend on that row alone); the logits of a training
// forward over 1,024 rows are refused, and inference mode's give the same loss.
static void t_xent_chunks(fat5_test *T) {
    static const int len_d[] = {1000, 900, 600};
    fat5_ctx *ctx = NULL;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL, *one = NULL;
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_forward_result fr, f1, fi;
    fat5_batch b;
    int32_t enc[15], lab[2500], ecu[4], dcu[4];
    float *logits = NULL;
    int s, i, n_lab = 0;
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK || fat5_model_create(ctx, &c, 9, &m) != FAT5_OK ||
        fat5_model_create(ctx, &c, 9, &one) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", ctx ? fat5_last_error(ctx) : "no context");
        goto done;
    }
    one->xent_rows = 1 << 20;  // every row in one chunk
    lc.z_loss = 1e-3;
    lc.label_smoothing = 0.1;
    ecu[0] = dcu[0] = 0;
    for (s = 0; s < 3; s++) {
        ecu[s + 1] = ecu[s] + 5;
        dcu[s + 1] = dcu[s] + len_d[s];
    }
    for (i = 0; i < 15; i++) enc[i] = (int32_t)(3 + i % 10);
    for (i = 0; i < 2500; i++) {
        lab[i] = i % 13 == 7 ? -100 : (int32_t)((i * 7 + i / 13) % 13);
        n_lab += lab[i] != -100;
    }
    memset(&b, 0, sizeof b);
    b.n_seq = 3;
    b.n_enc_tokens = 15;
    b.n_dec_tokens = 2500;
    b.enc_tokens = enc;
    b.enc_cu_seqlens = ecu;
    b.labels = lab;
    b.dec_cu_seqlens = dcu;
    logits = (float *)malloc((size_t)2500 * 13 * sizeof(float));
    if (!logits) goto done;
    FAT5_CHECK(T, fat5_model_forward(m, &b, &lc, &fr) == FAT5_OK && fat5_model_backward(m, 0.5f) == FAT5_OK);
    FAT5_CHECK(T, fat5_model_forward(one, &b, &lc, &f1) == FAT5_OK && fat5_model_backward(one, 0.5f) == FAT5_OK);
    FAT5_CHECK_MSG(T, fr.loss == f1.loss && fr.ce == f1.ce && fr.n_tokens == n_lab,
                   "loss: chunks %.17g, one chunk %.17g", fr.loss, f1.loss);
    for (s = 0; s < m->n_params; s++) {
        const fat5__param *p = &m->params[s];
        FAT5_CHECK_MSG(T, memcmp(FAT5__HOST(float, m->gd) + p->offset, FAT5__HOST(float, one->gd) + p->offset,
                                 p->numel * sizeof(float)) == 0,
                       "%s: the gradients in chunks and in one chunk differ", p->name);
    }
    FAT5_CHECK(T, fat5_model_get_logits(m, logits, 2500 * 13) == FAT5_ERR_STATE);
    // inference mode: every row's logits at once, the same loss
    FAT5_CHECK(T, fat5_model_set_training(m, 0) == FAT5_OK && fat5_model_forward(m, &b, &lc, &fi) == FAT5_OK &&
                      fat5_model_get_logits(m, logits, 2500 * 13) == FAT5_OK);
    FAT5_CHECK_MSG(T, fi.loss == fr.loss, "loss: training %.17g, inference %.17g", fr.loss, fi.loss);
done:
    free(logits);
    fat5_model_destroy(m);
    fat5_model_destroy(one);
    fat5_ctx_destroy(ctx);
}

#define FAT5_TESTS_MODEL(X) X(config_defaults) X(config_rejects) X(hf_t5_v10_relu_tied) \
    X(hf_t5_v11_gated_gelu_untied) X(hf_umt5_gated_silu) X(posenc_t5_parity) X(posenc_none_parity) X(posenc_alibi_sym_parity) \
    X(posenc_alibi_asym_parity) X(posenc_rope_neox_parity) X(posenc_rope_gptj_xpos_parity) X(posenc_fire_parity) X(longt5_local_parity) X(longt5_tglobal_parity) X(model_fd_gated) X(model_fd_relu_tied) \
    X(model_fd_umt5) X(packing_isolation) X(save_load_roundtrip) X(create_save_load) \
    X(batch_token_out_of_vocab) X(batch_negative_length) X(batch_empty) X(batch_json_rejects) \
    X(batch_token_counts) X(loss_config_rejects) X(backward_state) \
    X(ckpt_missing_tensor) X(ckpt_shape_mismatch) X(ckpt_config_mismatch) X(ckpt_wrong_dtype) \
    X(ckpt_unexpected_tensor) X(ckpt_sharded) X(xent_chunks)
