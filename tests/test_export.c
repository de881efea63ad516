// Hugging Face checkpoints written back (fat5_model_save_hf, fat5_model_set_tokenizer, the trainer's
// checkpoints): F16 rounding; the weights' dtypes, the starting dtype kept through an F32 save;
// sharded weights; the tokenizer a checkpoint carries (a resumed run's too, after the checkpoint it
// came from was pruned; ByT5's for a byte-level model trained from scratch); and two directories
// transformers loaded and generated from (ref/check_hf_export.py wrote their hf_generate.json):
//   tests/data/hf_export_spiece  tests/data/t5_spiece saved by fat5 (T5 v1.1 shape, SentencePiece)
//   tests/data/hf_export_byte    a byte-level model fat5 trained from scratch, its checkpoint as written
// fat5 must generate transformers' tokens from them, tokenize the texts to transformers' ids, and
// write them again byte for byte (so the directories transformers checked are what fat5 writes).
// How the fixtures were made: tests/data/hf_export_byte/README.txt.

#define TEX_DATA "tests/data"

// the whole file at path (NUL-terminated; fat5_free), NULL when it cannot be read
static char *tex_read(fat5_test *T, const char *path, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    if (fat5__read_file(fat5_test_ctx(T), path, (size_t)1 << 26, &buf, &n) != FAT5_OK) return NULL;
    if (len) *len = n;
    return buf;
}

// whether a/name and b/name hold the same bytes (both readable)
static int tex_same(fat5_test *T, const char *a, const char *b, const char *name) {
    char p[1200], q[1200], *x, *y;
    size_t nx = 0, ny = 0;
    int ok;
    snprintf(p, sizeof p, "%s/%s", a, name);
    snprintf(q, sizeof q, "%s/%s", b, name);
    x = tex_read(T, p, &nx);
    y = tex_read(T, q, &ny);
    ok = x && y && nx == ny && memcmp(x, y, nx) == 0;
    fat5_free(fat5_test_ctx(T), x);
    fat5_free(fat5_test_ctx(T), y);
    return ok;
}

static int tex_exists(const char *dir, const char *name) {
    char p[2100];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return fat5__is_file(p);
}

// the float dtype of every tensor of dir/name (-1 if they differ or the file cannot be read)
static int tex_file_dtype(fat5_test *T, const char *dir, const char *name) {
    char p[1200];
    fat5_st_file *f = NULL;
    int i, d = -1;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fat5_st_load(fat5_test_ctx(T), p, &f) != FAT5_OK) return -1;
    for (i = 0; i < fat5_st_tensor_count(f); i++) {
        int k = (int)fat5_st_get(f, i)->dtype;
        if (k == FAT5_ST_I64) continue;   // FIRE's init_L
        if (d >= 0 && d != k) d = -2;
        if (d != -2) d = k;
    }
    fat5_st_destroy(f);
    return d < 0 ? -1 : d;
}

// Every half value converts back to itself; a value between two halves goes to the nearer, a tie to
// the even one; past the largest finite half (65504) from 65520 on: infinity; NaN stays NaN.
static void t_export_f16_rounding(fat5_test *T) {
    uint32_t h;
    int bad = 0;
    for (h = 0; h < 65536 && bad < 5; h++) {
        uint16_t x = (uint16_t)h, y;
        float f = fat5__f16_to_f32(x);
        if ((x & 0x7c00u) == 0x7c00u && (x & 0x3ffu)) {   // NaN
            y = fat5__f32_to_f16(f);
            if ((y & 0x7c00u) != 0x7c00u || !(y & 0x3ffu) || (y & 0x8000u) != (x & 0x8000u)) bad++;
            continue;
        }
        if ((y = fat5__f32_to_f16(f)) != x) {
            FAT5_CHECK_MSG(T, 0, "f16 0x%04x = %.9g comes back as 0x%04x", (unsigned)x, (double)f, (unsigned)y);
            bad++;
        }
        if ((x & 0x7fffu) < 0x7bffu) {   // the midpoint to the next larger magnitude: to the even one
            float g = fat5__f16_to_f32((uint16_t)(x + 1)), mid = (float)(((double)f + (double)g) / 2);
            float below = nextafterf(mid, f), above = nextafterf(mid, g);
            uint16_t even = (x & 1u) ? (uint16_t)(x + 1) : x;
            if (fat5__f32_to_f16(mid) != even || fat5__f32_to_f16(below) != x || fat5__f32_to_f16(above) != x + 1) {
                FAT5_CHECK_MSG(T, 0, "between 0x%04x and 0x%04x: the midpoint gives 0x%04x, just below 0x%04x, just "
                               "above 0x%04x", (unsigned)x, (unsigned)(x + 1), (unsigned)fat5__f32_to_f16(mid),
                               (unsigned)fat5__f32_to_f16(below), (unsigned)fat5__f32_to_f16(above));
                bad++;
            }
        }
    }
    FAT5_CHECK(T, fat5__f32_to_f16(65519.99f) == 0x7bffu && fat5__f32_to_f16(65520.0f) == 0x7c00u &&
                      fat5__f32_to_f16(-1e30f) == 0xfc00u && fat5__f32_to_f16(1e-30f) == 0 &&
                      fat5__f32_to_f16(-2.98023224e-08f) == 0x8000u);   // -2^-25: a tie, to the even zero
}

// The weights' dtypes: SOURCE is the loaded checkpoint's; an F32 save keeps the starting dtype in
// its metadata, so SOURCE from it writes the same BF16 file again; F16 holds every weight rounded
// to nearest even and refuses one beyond 65504, naming it.
static void t_export_dtypes(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *src = TEX_DATA "/t5_spiece";
    char a[700], b[700], c[700], d[700], e[700];
    fat5_model *m = NULL, *r = NULL;
    fat5_save_config sc = fat5_save_config_default();
    size_t i, n_bad = 0;
    snprintf(a, sizeof a, "%s/x_source", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/x_bf16", fat5_test_tmpdir(T));
    snprintf(c, sizeof c, "%s/x_bf16_f32", fat5_test_tmpdir(T));
    snprintf(d, sizeof d, "%s/x_bf16_again", fat5_test_tmpdir(T));
    snprintf(e, sizeof e, "%s/x_f16", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &m));
    FAT5_CHECK(T, m->src_dtype == FAT5_ST_F32);
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, a, NULL));   // NULL: the defaults, SOURCE in one file
    FAT5_CHECK(T, tex_file_dtype(T, a, "model.safetensors") == FAT5_ST_F32 && !tex_exists(a, "model.safetensors.index.json"));
    sc.dtype = FAT5_WEIGHTS_BF16;
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, b, &sc));
    FAT5_CHECK(T, tex_file_dtype(T, b, "model.safetensors") == FAT5_ST_BF16);
    fat5_model_destroy(m);
    m = NULL;
    // BF16 -> F32 (fat5_model_save, as a training checkpoint) -> SOURCE: BF16 again, the same bytes
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, b, &m));
    FAT5_CHECK(T, m->src_dtype == FAT5_ST_BF16);
    FAT5_REQUIRE_OK(T, fat5_model_save(m, c));
    FAT5_CHECK(T, tex_file_dtype(T, c, "model.safetensors") == FAT5_ST_F32);
    {
        char *cfg = NULL, p[800];
        snprintf(p, sizeof p, "%s/config.json", c);
        cfg = tex_read(T, p, NULL);
        FAT5_CHECK(T, cfg && strstr(cfg, "\"torch_dtype\": \"float32\""));
        fat5_free(ctx, cfg);
    }
    fat5_model_destroy(m);
    m = NULL;
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, c, &m));
    FAT5_CHECK(T, m->src_dtype == FAT5_ST_BF16);
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, d, NULL));
    FAT5_CHECK_MSG(T, tex_same(T, b, d, "model.safetensors") && tex_same(T, b, d, "config.json"),
                   "a BF16 checkpoint through an F32 save and back is not the same BF16 file");
    fat5_model_destroy(m);
    m = NULL;
    // F16: nearest even of every weight, torch_dtype float16
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &m));
    sc.dtype = FAT5_WEIGHTS_F16;
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, e, &sc));
    FAT5_CHECK(T, tex_file_dtype(T, e, "model.safetensors") == FAT5_ST_F16);
    {
        char *cfg = NULL, p[800];
        snprintf(p, sizeof p, "%s/config.json", e);
        cfg = tex_read(T, p, NULL);
        FAT5_CHECK(T, cfg && strstr(cfg, "\"torch_dtype\": \"float16\""));
        fat5_free(ctx, cfg);
    }
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, e, &r));
    FAT5_CHECK(T, r->src_dtype == FAT5_ST_F16);
    for (i = 0; i < m->n_floats; i++) n_bad += r->w[i] != fat5__f16_to_f32(fat5__f32_to_f16(m->w[i]));
    FAT5_CHECK_MSG(T, n_bad == 0, "%zu of %zu weights are not their nearest f16", n_bad, m->n_floats);
    fat5_model_destroy(r);
    {   // a weight beyond F16's range: refused, naming it
        float *w = (float *)malloc(16 * sizeof(float));
        FAT5_REQUIRE(T, w != NULL);
        FAT5_REQUIRE_OK(T, fat5_model_get_param(m, "decoder.final_layer_norm.weight", w, 16));
        w[3] = 70000.0f;
        FAT5_REQUIRE_OK(T, fat5_model_set_param(m, "decoder.final_layer_norm.weight", w, 16));
        free(w);
    }
    FAT5_CHECK(T, fat5_model_save_hf(m, e, &sc) == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "decoder.final_layer_norm.weight[3] = 70000"));
    sc.dtype = (fat5_weights_dtype)9;
    FAT5_CHECK(T, fat5_model_save_hf(m, e, &sc) == FAT5_ERR_INVALID_ARG);
    sc = fat5_save_config_default();
    sc.max_shard_bytes = -1;
    FAT5_CHECK(T, fat5_model_save_hf(m, e, &sc) == FAT5_ERR_INVALID_ARG);
    fat5_model_destroy(m);
}

// the shards of dir's index, their count (0 when dir has none)
static int tex_shards(fat5_test *T, const char *dir) {
    char *names = NULL;
    size_t len = 0;
    int n = 0;
    char p[1200];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (!fat5__is_file(p) || fat5_model_weight_files(fat5_test_ctx(T), dir, &names, &len, &n) != FAT5_OK) return 0;
    fat5_free(fat5_test_ctx(T), names);
    return n;
}

// Sharded weights: shards of at most the size asked (in bytes of data), the index naming every
// tensor once with the total; loaded back exactly; a save in the other layout into the same
// directory leaves only its own files (no index beside a model.safetensors, no stale shard).
static void t_export_sharded(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[700], p[800];
    fat5_model *m = NULL, *r = NULL;
    fat5_save_config sc = fat5_save_config_default();
    int n, k, s;
    snprintf(dir, sizeof dir, "%s/x_sharded", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, TEX_DATA "/t5_spiece", &m));
    sc.max_shard_bytes = 40000;   // 178 KB of F32 weights; shared.weight and lm_head (64 KB) alone in theirs
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, dir, &sc));
    n = tex_shards(T, dir);
    FAT5_CHECK_MSG(T, n >= 3 && !tex_exists(dir, "model.safetensors"), "%d shards", n);
    {   // every shard: its tensors' bytes at most 40000 unless it holds one tensor; every tensor once
        int seen = 0;
        uint64_t total = 0;
        char *idx;
        for (s = 1; s <= n; s++) {
            fat5_st_file *f = NULL;
            uint64_t bytes = 0;
            snprintf(p, sizeof p, "%s/model-%05d-of-%05d.safetensors", dir, s, n);
            FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p, &f));
            for (k = 0; k < fat5_st_tensor_count(f); k++) bytes += fat5_st_get(f, k)->end - fat5_st_get(f, k)->begin;
            FAT5_CHECK_MSG(T, bytes <= 40000 || fat5_st_tensor_count(f) == 1, "shard %d: %llu bytes in %d tensors", s,
                           (unsigned long long)bytes, fat5_st_tensor_count(f));
            seen += fat5_st_tensor_count(f);
            total += bytes;
            fat5_st_destroy(f);
        }
        FAT5_CHECK(T, seen == m->n_params);
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        idx = tex_read(T, p, NULL);
        {
            char want[64];
            snprintf(want, sizeof want, "\"total_size\": %llu", (unsigned long long)total);
            FAT5_CHECK_MSG(T, idx && strstr(idx, want) && strstr(idx, "\"lm_head.weight\": \"model-"), "%s", idx ? idx : "");
        }
        fat5_free(ctx, idx);
    }
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &r));
    FAT5_CHECK(T, r->n_floats == m->n_floats && memcmp(r->w, m->w, m->n_floats * 4) == 0);
    FAT5_CHECK(T, tex_same(T, TEX_DATA "/t5_spiece", dir, "spiece.model"));
    fat5_model_destroy(r);
    r = NULL;
    // fewer, larger shards over it: the shards of the first save that this one does not name go
    sc.max_shard_bytes = 110000;
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, dir, &sc));
    k = tex_shards(T, dir);
    FAT5_CHECK_MSG(T, k >= 2 && k < n, "%d shards after %d", k, n);
    for (s = 1; s <= n; s++) {
        snprintf(p, sizeof p, "model-%05d-of-%05d.safetensors", s, n);
        FAT5_CHECK_MSG(T, !tex_exists(dir, p), "%s is left over", p);
    }
    // one file over it: the index and the shards go
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, dir, NULL));
    FAT5_CHECK(T, tex_exists(dir, "model.safetensors") && !tex_exists(dir, "model.safetensors.index.json"));
    snprintf(p, sizeof p, "model-00001-of-%05d.safetensors", k);
    FAT5_CHECK(T, !tex_exists(dir, p));
    // and shards over one file: model.safetensors goes (a reader would prefer it)
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, dir, &sc));
    FAT5_CHECK(T, !tex_exists(dir, "model.safetensors") && tex_shards(T, dir) == k);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &r));
    FAT5_CHECK(T, memcmp(r->w, m->w, m->n_floats * 4) == 0);
    fat5_model_destroy(r);
    fat5_model_destroy(m);
}

// the ids of a byte-level text: byte b -> b + 3, then EOS (1)
static int64_t tex_byte_ids(const char *s, int32_t *out) {
    int64_t n = 0;
    for (; *s; s++) out[n++] = (int32_t)(unsigned char)*s + 3;
    out[n++] = 1;
    return n;
}

// The fixture of dir: transformers' tokenization of its texts is fat5's (byte-level when the
// directory has only a tokenizer_config.json: ByT5's), and fat5's greedy generation from those ids
// is transformers', token for token.
static void tex_fixture_generate(fat5_test *T, const char *dir, int byte_level) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char p[800], *text = NULL;
    size_t len = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *texts, *ids, *gen, *mx, *sc, *t, *e, *g, *y;
    fat5_model *m = NULL;
    fat5_tokenizer *tok = NULL;
    fat5_generate_config gc;
    int row = 0;
    snprintf(p, sizeof p, "%s/hf_generate.json", dir);
    FAT5_REQUIRE(T, (text = tex_read(T, p, &len)) != NULL);
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "hf_generate.json", text, len, 8, &doc));
    root = fat5__json_root(doc);
    texts = fat5__json_get(root, "texts"), ids = fat5__json_get(root, "input_ids");
    gen = fat5__json_get(root, "generated"), mx = fat5__json_get(root, "max_new_tokens");
    sc = fat5__json_get(root, "scores");
    FAT5_REQUIRE(T, texts && ids && gen && mx && sc && texts->n == ids->n && ids->n == gen->n && gen->n == sc->n &&
                        texts->n >= 3);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    if (!byte_level) FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, dir, &tok));
    gc = fat5_generate_config_from_model(m);
    gc.max_new_tokens = strtol(mx->str, NULL, 10);
    for (t = texts->child, e = ids->child, g = gen->child, y = sc->child; t && e && g && y;
         t = t->next, e = e->next, g = g->next, y = y->next, row++) {
        int32_t *mine = NULL, buf[1024], want[1024], cu[2];
        int64_t n = 0, nw = 0, j;
        const fat5__json *x;
        fat5_generate_result r;
        int same;
        if (byte_level) {
            FAT5_REQUIRE(T, t->len < 1000);
            n = tex_byte_ids(t->str, buf);
            mine = buf;
        } else {
            FAT5_REQUIRE_OK(T, fat5_tokenize(tok, t->str, t->len, NULL, 0, 0, &mine, &n));
        }
        for (x = e->child, j = 0; x && j < 1024; x = x->next, j++) want[j] = (int32_t)strtol(x->str, NULL, 10);
        same = (int64_t)e->n == n && memcmp(want, mine, (size_t)n * 4) == 0;
        FAT5_CHECK_MSG(T, same, "%s, text %d ('%s'): fat5's %lld ids are not transformers' %zu", dir, row, t->str,
                       (long long)n, e->n);
        if (mine != buf) fat5_free(ctx, mine);
        cu[0] = 0, cu[1] = (int32_t)e->n;
        memset(&r, 0, sizeof r);
        FAT5_REQUIRE_OK(T, fat5_generate(m, want, cu, 1, &gc, &r));
        for (x = g->child, nw = 0; x && nw < 1024; x = x->next, nw++) want[nw] = (int32_t)strtol(x->str, NULL, 10);
        same = r.cu_seqlens[1] == nw && memcmp(r.tokens, want, (size_t)nw * 4) == 0;
        if (!same) {
            printf("  transformers:");
            for (j = 0; j < nw; j++) printf(" %d", want[j]);
            printf("\n  fat5:        ");
            for (j = 0; j < r.cu_seqlens[1]; j++) printf(" %d", r.tokens[j]);
            printf("\n");
        }
        FAT5_CHECK_MSG(T, same, "%s, text %d: fat5 generates other tokens than transformers", dir, row);
        {   // the sum of the tokens' log-probabilities: fp32 on both sides, summed in another order
            double want_s = strtod(y->str, NULL);
            FAT5_CHECK_MSG(T, fabs((double)r.scores[0] - want_s) <= 1e-4 * fmax(1.0, fabs(want_s)),
                           "%s, text %d: score %.9g, transformers' %.9g", dir, row, (double)r.scores[0], want_s);
        }
        FAT5_CHECK(T, nw >= 2);
        fat5_generate_result_destroy(ctx, &r);
    }
    fat5_tokenizer_destroy(tok);
    fat5_model_destroy(m);
    fat5__json_free(ctx, doc);
    fat5_free(ctx, text);
}

static void t_export_fixture_generate(fat5_test *T) {
    tex_fixture_generate(T, TEX_DATA "/hf_export_spiece", 0);
    tex_fixture_generate(T, TEX_DATA "/hf_export_byte", 1);
}

// config.json holds the fields transformers' T5Config reads (fat5's values), and parses back to the
// same model config; generation_config.json parses with the model's ids
static void tex_check_configs(fat5_test *T, const char *dir, const char *dtype) {
    static const char *const keys[] = {"architectures", "d_ff", "d_kv", "d_model", "decoder_start_token_id",
                                       "dense_act_fn", "dropout_rate", "eos_token_id", "feed_forward_proj",
                                       "is_encoder_decoder", "is_gated_act", "layer_norm_epsilon", "model_type",
                                       "num_decoder_layers", "num_heads", "num_layers", "pad_token_id",
                                       "relative_attention_max_distance", "relative_attention_num_buckets",
                                       "tie_word_embeddings", "torch_dtype", "use_cache", "vocab_size"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    char p[800], *text;
    size_t len = 0, i;
    fat5__jdoc *doc = NULL;
    fat5_model_config c;
    fat5_generate_config g = fat5_generate_config_default();
    snprintf(p, sizeof p, "%s/config.json", dir);
    FAT5_REQUIRE(T, (text = tex_read(T, p, &len)) != NULL);
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "config.json", text, len, 8, &doc));
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
        FAT5_CHECK_MSG(T, fat5__json_get(fat5__json_root(doc), keys[i]) != NULL, "%s: no '%s'", p, keys[i]);
    FAT5_CHECK(T, strcmp(fat5__json_get(fat5__json_root(doc), "torch_dtype")->str, dtype) == 0);
    FAT5_CHECK(T, strcmp(fat5__json_get(fat5__json_root(doc), "architectures")->child->str,
                         "T5ForConditionalGeneration") == 0);
    fat5__json_free(ctx, doc);
    FAT5_CHECK_MSG(T, fat5_model_config_from_json(ctx, text, len, &c) == FAT5_OK, "%s", fat5_last_error(ctx));
    fat5_free(ctx, text);
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    FAT5_REQUIRE(T, (text = tex_read(T, p, &len)) != NULL);
    FAT5_CHECK(T, fat5_generate_config_from_json(ctx, text, len, &g) == FAT5_OK && g.decoder_start_token_id == 0 &&
                      g.eos_token_id == 1 && g.pad_token_id == 0 && strstr(text, "\"decoder_start_token_id\""));
    fat5_free(ctx, text);
}

// The fixtures' files: complete and parseable, the tokenizer files of the source byte for byte, the
// source's dropout_rate kept; and fat5 writes them again today byte for byte: the spiece one from
// tests/data/t5_spiece, the byte one from itself (a load and a save in its own dtype), so what
// transformers was checked on is what fat5 writes.
static void t_export_fixture_files(fat5_test *T) {
    static const char *const spiece[] = {"config.json", "generation_config.json", "model.safetensors", "spiece.model",
                                         "tokenizer.json", "tokenizer_config.json"};
    static const char *const byte[] = {"config.json", "generation_config.json", "model.safetensors",
                                       "tokenizer_config.json"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *fs = TEX_DATA "/hf_export_spiece", *fb = TEX_DATA "/hf_export_byte", *src = TEX_DATA "/t5_spiece";
    char a[700], b[700], p[800], *text;
    fat5_model *m = NULL;
    size_t i;
    for (i = 0; i < sizeof spiece / sizeof spiece[0]; i++) FAT5_CHECK_MSG(T, tex_exists(fs, spiece[i]), "%s/%s", fs, spiece[i]);
    for (i = 0; i < sizeof byte / sizeof byte[0]; i++) FAT5_CHECK_MSG(T, tex_exists(fb, byte[i]), "%s/%s", fb, byte[i]);
    tex_check_configs(T, fs, "float32");
    tex_check_configs(T, fb, "float32");
    for (i = 3; i < 6; i++) FAT5_CHECK_MSG(T, tex_same(T, src, fs, spiece[i]), "%s differs from the source's", spiece[i]);
    snprintf(p, sizeof p, "%s/config.json", fs);
    text = tex_read(T, p, NULL);
    FAT5_CHECK(T, text && strstr(text, "\"dropout_rate\": 0.1,"));   // the source's, kept
    fat5_free(ctx, text);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", fb);
    text = tex_read(T, p, NULL);
    FAT5_CHECK_MSG(T, text && strstr(text, "\"tokenizer_class\": \"ByT5Tokenizer\"") && strstr(text, "\"extra_ids\": 125"),
                   "%s", text ? text : "(none)");
    fat5_free(ctx, text);
    // written again
    snprintf(a, sizeof a, "%s/again_spiece", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/again_byte", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, a, NULL));
    fat5_model_destroy(m);
    m = NULL;
    for (i = 0; i < sizeof spiece / sizeof spiece[0]; i++)
        FAT5_CHECK_MSG(T, tex_same(T, fs, a, spiece[i]), "a save of %s: %s differs from %s's", src, spiece[i], fs);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, fb, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, b, NULL));
    for (i = 0; i < sizeof byte / sizeof byte[0]; i++)
        FAT5_CHECK_MSG(T, tex_same(T, fb, b, byte[i]), "a save of %s: %s differs", fb, byte[i]);
    // ByT5's tokenizer as fat5_model_set_tokenizer(NULL) writes it for this vocabulary
    FAT5_REQUIRE_OK(T, fat5_model_set_tokenizer(m, ""));
    snprintf(b, sizeof b, "%s/again_byte2", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, b, NULL));
    FAT5_CHECK(T, !tex_exists(b, "tokenizer_config.json"));
    FAT5_REQUIRE_OK(T, fat5_model_set_tokenizer(m, NULL));
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, b, NULL));
    FAT5_CHECK(T, tex_same(T, fb, b, "tokenizer_config.json"));
    fat5_model_destroy(m);
}

// fat5_model_set_tokenizer: a directory's files (at least one), ByT5's for a vocabulary of 259 or
// more, errors that say why
static void t_export_set_tokenizer(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    char dir[700];
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));   // vocabulary 13
    FAT5_CHECK(T, fat5_model_set_tokenizer(m, NULL) == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(ctx), "259"));
    FAT5_CHECK(T, fat5_model_set_tokenizer(m, "/no/such/dir") == FAT5_ERR_IO);
    FAT5_CHECK(T, fat5_model_set_tokenizer(m, TEX_DATA "/posenc_t5") == FAT5_ERR_IO &&
                  strstr(fat5_last_error(ctx), "no tokenizer file"));
    FAT5_REQUIRE_OK(T, fat5_model_set_tokenizer(m, TEX_DATA "/t5_spiece"));
    snprintf(dir, sizeof dir, "%s/x_settok", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_save_hf(m, dir, NULL));
    FAT5_CHECK(T, tex_same(T, TEX_DATA "/t5_spiece", dir, "spiece.model") &&
                  tex_same(T, TEX_DATA "/t5_spiece", dir, "tokenizer.json") && !tex_exists(dir, "special_tokens_map.json"));
    fat5_model_destroy(m);
}

// The trainer's checkpoints carry a tokenizer: a new model on byte data ByT5's, unless
// save_tokenizer says none; an init checkpoint's files, also in the checkpoints of a run resumed
// after the checkpoint it resumed from was pruned.
static void t_export_train_tokenizer(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 4);
    char out[700], p[800], want[256];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    int i, n;
    FAT5_REQUIRE(T, data != NULL);
    n = snprintf(want, sizeof want, "{\n  \"tokenizer_class\": \"ByT5Tokenizer\",\n  \"eos_token\": \"</s>\",\n"
                 "  \"pad_token\": \"<pad>\",\n  \"unk_token\": \"<unk>\",\n  \"extra_ids\": 125\n}\n");
    snprintf(out, sizeof out, "%s/tk_byte", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "2"));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/step-00000002/tokenizer_config.json", out);
    {
        size_t len = 0;
        char *text = tex_read(T, p, &len);
        FAT5_CHECK_MSG(T, text && len == (size_t)n && memcmp(text, want, len) == 0, "%s: %s", p, text ? text : "(none)");
        fat5_free(ctx, text);
    }
    snprintf(out, sizeof out, "%s/tk_none", fat5_test_tmpdir(T));
    c.output_dir = out;
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "save_tokenizer", "none"));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/step-00000002", out);
    FAT5_CHECK(T, fat5__is_dir(p) && !tex_exists(p, "tokenizer_config.json"));
    // from t5_spiece (vocabulary 1000 holds the byte data): its tokenizer files, through a resume
    // whose checkpoint is pruned before the run's next save
    snprintf(out, sizeof out, "%s/tk_init", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    c.init = TEX_DATA "/t5_spiece";
    c.save_steps = 1;
    c.save_total_limit = 1;
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "4"));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    c.resume = out;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    fat5_train_destroy(t);
    snprintf(p, sizeof p, "%s/step-00000002", out);
    FAT5_CHECK(T, !fat5__is_dir(p));   // pruned
    snprintf(p, sizeof p, "%s/step-00000004", out);
    FAT5_CHECK(T, tex_same(T, TEX_DATA "/t5_spiece", p, "spiece.model") &&
                  tex_same(T, TEX_DATA "/t5_spiece", p, "tokenizer.json") &&
                  tex_same(T, TEX_DATA "/t5_spiece", p, "tokenizer_config.json"));
}

#define FAT5_TESTS_EXPORT(X) X(export_f16_rounding) X(export_dtypes) X(export_sharded) X(export_fixture_generate) \
    X(export_fixture_files) X(export_set_tokenizer) X(export_train_tokenizer)
