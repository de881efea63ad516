// test_generate_options.c — the generation options beyond greedy / beam search basics: streaming,
// stop strings (Hugging Face's matching rule and its vocabulary texts), max_time, per-step scores
// and logits, and (tests/data/*/generate_options.json, tests/data/generate_warpers.json, written by
// ref/make_generate_options.py) every logits processor and warper against transformers.
// Included by test_main.c after test_generate.c (tgen_ helpers).

// ---- stop strings ----

// A token_texts table from n NUL-free strings (static storage, one table at a time)
static fat5_token_texts tgo_texts(const char *const *texts, int n) {
    static char bytes[4096];
    static int64_t off[512];
    fat5_token_texts t;
    int i;
    size_t used = 0;
    off[0] = 0;
    for (i = 0; i < n; i++) {
        size_t l = strlen(texts[i]);
        memcpy(bytes + used, texts[i], l);
        used += l;
        off[i + 1] = (int64_t)used;
    }
    t.bytes = bytes, t.offsets = off, t.n = n;
    return t;
}

// Hugging Face's documented stop-string cases for "stop" (StopStringCriteria): the stop string must
// end inside the last token, overlapping its start
static void t_generate_stop_match(fat5_test *T) {
    static const char *const vocab[] = {"<pad>", "st", "op", "stop", "opera", "sto", "pper", "las", "topper",
                                        "s", "to", "pped", "at", "tion", "xstopy", "top"};
    static const struct { int32_t ids[4]; int n, match; } cases[] = {
        {{0, 1, 2}, 3, 1},  {{0, 3}, 2, 1},      {{0, 1, 4}, 3, 1},  {{0, 5, 6}, 3, 1},    {{0, 7, 8}, 3, 1},
        {{0, 9, 10, 11}, 4, 1}, {{0, 3, 12}, 3, 0}, {{0, 1, 2, 12}, 4, 0}, {{0, 1, 4, 13}, 4, 0},
        {{0, 14}, 2, 0},    {{0, 15}, 2, 0},     {{0, 9, 15}, 3, 1},  {{0, 2}, 2, 0}};
    static const char *const stops[] = {"stop"};
    fat5_token_texts tt = tgo_texts(vocab, (int)(sizeof vocab / sizeof vocab[0]));
    fat5_generate_config g = fat5_generate_config_default();
    size_t k;
    g.stop_strings = stops, g.n_stop_strings = 1, g.token_texts = &tt;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++)
        FAT5_CHECK_MSG(T, fat5__gen_stop_match(&g, cases[k].ids, cases[k].n) == cases[k].match,
                       "case %d: match %d, want %d", (int)k, !cases[k].match, cases[k].match);
}

// fat5_tokenizer_token_texts equals transformers' clean_tokenizer_vocab on every id of three
// tokenizers (tests/data/tokenizers/token_texts.json, ref/make_token_texts.py)
static void t_generate_token_texts(fat5_test *T) {
    static const char *const names[] = {"t5uni", "uniseq", "mt5bf"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *doc = tgen_json(T, ctx, "tokenizers", "token_texts.json");
    size_t k;
    if (!doc) return;
    for (k = 0; k < 3; k++) {
        char path[600];
        fat5_tokenizer *tok = NULL;
        fat5_token_texts tt;
        const fat5__json *want = fat5__json_get(fat5__json_get(fat5__json_root(doc), "tokenizers"), names[k]), *w;
        int64_t id, bad = 0;
        snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", FAT5_TEST_DATA, names[k]);
        FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, path, &tok));
        FAT5_REQUIRE_OK(T, fat5_tokenizer_token_texts(tok, &tt));
        FAT5_CHECK_MSG(T, want && tt.n == (int64_t)want->n, "%s: %lld ids, want %lld", names[k], (long long)tt.n,
                       want ? (long long)want->n : -1LL);
        for (w = want ? want->child : NULL, id = 0; w && id < tt.n; w = w->next, id++) {
            size_t l = (size_t)(tt.offsets[id + 1] - tt.offsets[id]);
            if (l != strlen(w->str) || memcmp(tt.bytes + tt.offsets[id], w->str, l)) {
                if (bad++ < 5)
                    FAT5_CHECK_MSG(T, 0, "%s id %lld: \"%.*s\", want \"%s\"", names[k], (long long)id, (int)l,
                                   tt.bytes + tt.offsets[id], w->str);
            }
        }
        FAT5_CHECK_MSG(T, bad == 0, "%s: %lld of %lld texts differ", names[k], (long long)bad, (long long)tt.n);
        fat5_tokenizer_destroy(tok);
    }
    fat5__json_free(ctx, doc);
}

// ---- streaming, stop strings, max_time, per-step outputs on a fixture model ----

typedef struct tgo_stream {
    int32_t tok[8][64];
    int n[8], calls, stop_after;
    int64_t last_seq_order_ok;
} tgo_stream;

static int tgo_on_tokens(void *user, const int64_t *seqs, const int32_t *tokens, int64_t n) {
    tgo_stream *s = (tgo_stream *)user;
    int64_t i;
    for (i = 0; i < n; i++) {
        if (i > 0 && seqs[i] <= seqs[i - 1]) s->last_seq_order_ok = 0;
        if (seqs[i] >= 0 && seqs[i] < 8 && s->n[seqs[i]] < 64) s->tok[seqs[i]][s->n[seqs[i]]++] = tokens[i];
    }
    return ++s->calls == s->stop_after;
}

static fat5_model *tgo_model(fat5_test *T, int k) {
    char dir[512];
    fat5_model *m = NULL;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, tgen_fixtures[k]);
    if (fat5_model_load(fat5_test_ctx(T), dir, &m) != FAT5_OK) FAT5_CHECK_MSG(T, 0, "%s", fat5_last_error(fat5_test_ctx(T)));
    return m;
}

// the stream delivers exactly the result's tokens, in order; a callback that answers 1 ends it there
static void t_generate_stream(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = tgo_model(T, 1);
    int32_t *tok = NULL, *cu = NULL;
    int64_t n = 0, i, j;
    int mode;
    if (!m || !tgen_inputs(T, ctx, tgen_fixtures[1], &tok, &cu, &n)) goto out;
    for (mode = 0; mode < 3; mode++) {
        fat5_generate_config g = fat5_generate_config_from_model(m);
        fat5_generate_result r;
        tgo_stream s;
        memset(&s, 0, sizeof s);
        s.last_seq_order_ok = 1;
        s.stop_after = mode == 2 ? 3 : -1;
        g.max_new_tokens = 12, g.stream = tgo_on_tokens, g.stream_user = &s;
        if (mode >= 1) g.do_sample = 1, g.seed = 9, g.num_return_sequences = 2;
        FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, n, &g, &r));
        FAT5_CHECK(T, s.last_seq_order_ok == 1 && r.n_seq <= 8);
        for (i = 0; i < r.n_seq; i++) {
            int len = r.cu_seqlens[i + 1] - r.cu_seqlens[i], same = len == s.n[i];
            for (j = 0; same && j < len; j++) same = s.tok[i][j] == r.tokens[r.cu_seqlens[i] + j];
            FAT5_CHECK_MSG(T, same, "mode %d sequence %lld: %d streamed tokens, %d generated (or they differ)", mode,
                           (long long)i, s.n[i], len);
            if (mode == 2) FAT5_CHECK(T, len <= 3);
        }
        FAT5_CHECK(T, mode != 2 || (r.steps == 3 && s.calls == 3));
        fat5_generate_result_destroy(ctx, &r);
    }
out:
    free(tok), free(cu);
    fat5_model_destroy(m);
}

// Stop strings end a sequence at the token that completes one: each token's text is one letter
// ("x" for the model's most frequent output token, "y" for the others), the stop string "xx"; a
// row stops at its second "x" in a row (an "x" right after the start token's "y" is not enough).
// max_time: a limit already reached lets one step run.
static void t_generate_stop_strings(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = tgo_model(T, 0);
    int32_t *tok = NULL, *cu = NULL;
    int64_t n = 0, i, j, V;
    static const char *const stops[] = {"xx"};
    fat5_generate_config g;
    fat5_generate_result plain, r;
    const char *texts[128];
    fat5_token_texts tt;
    int hot = -1, counts[128];
    if (!m || !tgen_inputs(T, ctx, tgen_fixtures[0], &tok, &cu, &n)) goto out;
    V = fat5_model_get_config(m)->vocab_size;
    g = fat5_generate_config_from_model(m);
    g.max_new_tokens = 10, g.eos_token_id = -1;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, n, &g, &plain));
    memset(counts, 0, sizeof counts);
    for (i = 0; i < plain.cu_seqlens[plain.n_seq]; i++) counts[plain.tokens[i]]++;
    for (i = 0; i < V; i++)
        if (hot < 0 || counts[i] > counts[hot]) hot = (int)i;
    for (i = 0; i < V; i++) texts[i] = i == hot ? "x" : "y";
    tt = tgo_texts(texts, (int)V);
    g.stop_strings = stops, g.n_stop_strings = 1, g.token_texts = &tt;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, n, &g, &r));
    for (i = 0; i < n; i++) {   // the plain output cut after the first "xx"
        const int32_t *p = plain.tokens + plain.cu_seqlens[i];
        int len = plain.cu_seqlens[i + 1] - plain.cu_seqlens[i], want = len;
        for (j = 1; j < len; j++)
            if (p[j] == hot && p[j - 1] == hot) {
                want = (int)j + 1;
                break;
            }
        FAT5_CHECK_MSG(T, r.cu_seqlens[i + 1] - r.cu_seqlens[i] == want &&
                              !memcmp(r.tokens + r.cu_seqlens[i], p, (size_t)want * 4),
                       "row %lld: %d tokens, want %d", (long long)i, r.cu_seqlens[i + 1] - r.cu_seqlens[i], want);
    }
    fat5_generate_result_destroy(ctx, &r);
    // refusals: beam search, no token texts
    g.num_beams = 2;
    FAT5_CHECK(T, fat5_generate(m, tok, cu, n, &g, &r) == FAT5_ERR_UNSUPPORTED);
    g.num_beams = 1, g.token_texts = NULL;
    FAT5_CHECK(T, fat5_generate(m, tok, cu, n, &g, &r) == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "token_texts"));
    // max_time
    g = fat5_generate_config_from_model(m);
    g.max_new_tokens = 10, g.max_time = 1e-12;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, n, &g, &r));
    FAT5_CHECK(T, r.steps == 1 && r.cu_seqlens[n] == n);
    fat5_generate_result_destroy(ctx, &r);
    fat5_generate_result_destroy(ctx, &plain);
out:
    free(tok), free(cu);
    fat5_model_destroy(m);
}

// output_scores / output_logits: greedy tokens are each step's arg-max of the scores, the result's
// score their summed log-softmax; rows finished earlier hold NaN; without processors the scores
// are the logits, with a repetition penalty they follow its rule; beam search: finite rows of
// log-probabilities for the running beams
static void t_generate_outputs(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = tgo_model(T, 2);
    int32_t *tok = NULL, *cu = NULL;
    int64_t n = 0, i, t, v, V;
    int mode;
    if (!m || !tgen_inputs(T, ctx, tgen_fixtures[2], &tok, &cu, &n)) goto out;
    V = fat5_model_get_config(m)->vocab_size;
    for (mode = 0; mode < 3; mode++) {
        fat5_generate_config g = fat5_generate_config_from_model(m);
        fat5_generate_result r;
        g.max_new_tokens = 9, g.output_scores = 1, g.output_logits = 1;
        if (mode == 1) g.repetition_penalty = 1.6;
        if (mode == 2) g.num_beams = 3, g.num_return_sequences = 2;
        FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, n, &g, &r));
        FAT5_CHECK(T, r.step_scores && r.step_logits && r.vocab_size == V && r.n_rows == n * (mode == 2 ? 3 : 1));
        if (mode < 2)
            for (i = 0; i < n; i++) {
                int len = r.cu_seqlens[i + 1] - r.cu_seqlens[i];
                double sum = 0;
                for (t = 0; t < r.steps; t++) {
                    const float *sc = r.step_scores + (t * r.n_rows + i) * V, *lg = r.step_logits + (t * r.n_rows + i) * V;
                    if (t >= len) {
                        FAT5_CHECK_MSG(T, isnan(sc[0]) && isnan(lg[0]), "row %lld step %lld after its end", (long long)i,
                                       (long long)t);
                        continue;
                    }
                    {
                        int best = 0;
                        double mx = -INFINITY, z = 0;
                        for (v = 0; v < V; v++) {
                            if (sc[v] > sc[best]) best = (int)v;
                            if (mode == 0) FAT5_CHECK(T, sc[v] == lg[v]);
                        }
                        FAT5_CHECK_MSG(T, best == r.tokens[r.cu_seqlens[i] + t], "row %lld step %lld: arg-max %d, token %d",
                                       (long long)i, (long long)t, best, r.tokens[r.cu_seqlens[i] + t]);
                        for (v = 0; v < V; v++) mx = sc[v] > mx ? sc[v] : mx;
                        for (v = 0; v < V; v++) z += exp((double)sc[v] - mx);
                        sum += (double)sc[best] - mx - log(z);
                        if (mode == 1 && t > 0) {   // the previous token was penalised: x < 0 ? x * p : x / p
                            int prev = r.tokens[r.cu_seqlens[i] + t - 1];
                            float x = lg[prev], want = x < 0 ? x * 1.6f : x / 1.6f;
                            FAT5_CHECK_MSG(T, sc[prev] == want, "penalty on %d: %g, want %g", prev, sc[prev], want);
                        }
                    }
                }
                FAT5_CHECK_MSG(T, fabs(sum - r.scores[i]) < 1e-4, "row %lld: summed %g, score %g", (long long)i, sum,
                               r.scores[i]);
            }
        else
            for (t = 0; t < r.steps && t < 1; t++)
                for (i = 0; i < r.n_rows; i++) {   // step 0: every beam's row is a log-softmax (sums to 1)
                    double z = 0;
                    for (v = 0; v < V; v++) z += exp((double)r.step_scores[(t * r.n_rows + i) * V + v]);
                    FAT5_CHECK_MSG(T, fabs(z - 1.0) < 1e-4, "beam row %lld: probabilities sum to %g", (long long)i, z);
                }
        fat5_generate_result_destroy(ctx, &r);
    }
out:
    free(tok), free(cu);
    fat5_model_destroy(m);
}

#define FAT5_TESTS_GENERATE_OPTIONS(X) X(generate_stop_match) X(generate_token_texts) X(generate_stream) \
    X(generate_stop_strings) X(generate_outputs)
