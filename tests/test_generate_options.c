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

// Hugging Face's documented stop-string cases for "stop" (StopStringCriteria), and its matcher's
// answers on tokens that hold the whole stop string ("xstopy", "abstop": a match): the stop string
// must end inside the last token
static void t_generate_stop_match(fat5_test *T) {
    static const char *const vocab[] = {"<pad>", "st", "op", "stop", "opera", "sto", "pper", "las", "topper",
                                        "s", "to", "pped", "at", "tion", "xstopy", "top", "abstop"};
    static const struct { int32_t ids[4]; int n, match; } cases[] = {
        {{0, 1, 2}, 3, 1},  {{0, 3}, 2, 1},      {{0, 1, 4}, 3, 1},  {{0, 5, 6}, 3, 1},    {{0, 7, 8}, 3, 1},
        {{0, 9, 10, 11}, 4, 1}, {{0, 3, 12}, 3, 0}, {{0, 1, 2, 12}, 4, 0}, {{0, 1, 4, 13}, 4, 0},
        {{0, 14}, 2, 1},    {{0, 15}, 2, 0},     {{0, 9, 15}, 3, 1},  {{0, 2}, 2, 0},      {{0, 16}, 2, 1},
        {{0, 16, 12}, 3, 0}};
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

// fat5_detok_stream: pushed one token at a time, the pieces join into fat5_detokenize's text of the
// whole sequence, each piece whole UTF-8 characters (no continuation byte first, none cut at the
// end), and no U+FFFD given out that the whole text does not hold (byte-fallback characters arrive
// byte by byte); on a tokenizer.json and on SentencePiece models with and without byte fallback
static void t_generate_detok_stream(fat5_test *T) {
    static const char *const files[] = {"t5uni/tokenizer.json", "t5uni/spiece.model", "mt5bf/spiece.model",
                                        "bytebpe/tokenizer.json"};
    static const char text[] = "Caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 na\xc3\xafve  ok, \xce\xb1\xce\xb2!";
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t k;
    for (k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[600], *whole = NULL, joined[512];
        size_t wlen = 0, jlen = 0;
        fat5_tokenizer *tok = NULL;
        fat5_detok_stream *st = NULL;
        int32_t *ids = NULL;
        int64_t n = 0, i;
        snprintf(path, sizeof path, "%s/tokenizers/%s", FAT5_TEST_DATA, files[k]);
        FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, path, &tok));
        FAT5_REQUIRE_OK(T, fat5_tokenize(tok, text, sizeof text - 1, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &n));
        FAT5_REQUIRE_OK(T, fat5_detokenize(tok, ids, n, FAT5_DETOKENIZE_SKIP_SPECIAL, &whole, &wlen));
        FAT5_REQUIRE_OK(T, fat5_detok_stream_create(tok, FAT5_DETOKENIZE_SKIP_SPECIAL, &st));
        for (i = 0; i <= n; i++) {
            const char *piece = NULL;
            size_t plen = 0;
            FAT5_REQUIRE_OK(T, fat5_detok_stream_push(st, ids + (i < n ? i : 0), i < n, i == n, &piece, &plen));
            if (plen == 0) continue;
            FAT5_CHECK_MSG(T, ((unsigned char)piece[0] & 0xC0) != 0x80, "%s: a piece starts inside a character",
                           files[k]);
            FAT5_CHECK_MSG(T, jlen + plen < sizeof joined, "%s: too long", files[k]);
            if (jlen + plen >= sizeof joined) break;
            memcpy(joined + jlen, piece, plen), jlen += plen;
        }
        FAT5_CHECK_MSG(T, jlen == wlen && !memcmp(joined, whole, wlen), "%s: streamed \"%.*s\", whole \"%.*s\"", files[k],
                       (int)jlen, joined, (int)wlen, whole);
        fat5_detok_stream_destroy(st);
        fat5_free(ctx, ids);
        fat5_free(ctx, whole);
        fat5_tokenizer_destroy(tok);
    }
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

// ---- transformers' generate on every option (generate_options.json) ----

// The text of the k-th "options" object of a fixture file (no nested objects in it), or NULL
static const char *tgo_options_text(const char *text, int k, size_t *len) {
    const char *at = text;
    int i;
    for (i = 0; at; i++) {
        at = strstr(at, "\"options\": {");
        if (!at) return NULL;
        at = strchr(at, '{');
        if (i == k) {
            const char *close = strchr(at, '}');
            if (!close) return NULL;
            *len = (size_t)(close - at + 1);
            return at;
        }
    }
    return NULL;
}

static double tgo_num(const fat5__json *v) {
    double x = 0;
    if (v->type == FAT5__J_STRING) return strcmp(v->str, "-inf") == 0 ? -INFINITY : strcmp(v->str, "inf") == 0 ? INFINITY : NAN;
    fat5__json_as_double(v, &x);
    return x;
}

// Compares a result's per-step values (step_scores or step_logits, [steps, rows, V]) with the
// fixture's [steps][rows][V] on the rows still running at each step (fat5 leaves finished rows NaN
// where transformers pads them). Returns the number of values compared.
static int64_t tgo_cmp_steps(fat5_test *T, const char *what, const float *got, const fat5__json *want, int64_t rows,
                             int64_t V, int64_t steps, double atol, double rtol) {
    const fat5__json *st, *row, *v;
    int64_t t, r, k, n = 0, bad = 0;
    for (st = want->child, t = 0; st && t < steps; st = st->next, t++)
        for (row = st->child, r = 0; row && r < rows; row = row->next, r++) {
            const float *g = got + (t * rows + r) * V;
            if (isnan(g[0])) continue;   // finished here
            for (v = row->child, k = 0; v && k < V; v = v->next, k++) {
                double w = tgo_num(v), x = (double)g[k];
                int ok = (isinf(w) || isinf(x)) ? w == x : fabs(x - w) <= atol + rtol * fabs(w);
                n++;
                if (!ok && bad++ < 3)
                    FAT5_CHECK_MSG(T, 0, "%s step %lld row %lld token %lld: %.7g, transformers %.7g", what, (long long)t,
                                   (long long)r, (long long)k, x, w);
            }
        }
    FAT5_CHECK_MSG(T, bad == 0, "%s: %lld of %lld values differ", what, (long long)bad, (long long)n);
    return n;
}

// Runs every case of a fixture's generate_options.json on m: tokens identical, scores within
// atol + rtol |score|, per-step scores and logits where the case has them. *rows_same / *rows_all
// count the output rows; returns the cases run.
static int tgo_run_options(fat5_test *T, fat5_model *m, const char *fixture, int use_graph, double atol, double rtol,
                           int64_t *rows_same, int64_t *rows_all) {
    fat5_ctx *tctx = fat5_test_ctx(T), *ctx = m->ctx;
    char path[600], *text = NULL;
    size_t tlen = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *c;
    int32_t *tok = NULL, *cu = NULL;
    int64_t n = 0;
    int cases = 0, k;
    snprintf(path, sizeof path, "%s/%s/generate_options.json", FAT5_TEST_DATA, fixture);
    if (fat5__read_file(tctx, path, (size_t)64 << 20, &text, &tlen) != FAT5_OK ||
        fat5__json_parse(tctx, path, text, tlen, 16, &doc) != FAT5_OK || !tgen_inputs(T, tctx, fixture, &tok, &cu, &n)) {
        FAT5_CHECK_MSG(T, 0, "%s: %s", path, fat5_last_error(tctx));
        goto out;
    }
    for (c = fat5__json_get(fat5__json_root(doc), "cases")->child, k = 0; c; c = c->next, k++) {
        const char *name = fat5__json_get(c, "name")->str, *opt;
        const fat5__json *outs = fat5__json_get(c, "outputs"), *scores = fat5__json_get(c, "scores"), *row, *v, *sc;
        fat5_generate_config g = fat5_generate_config_from_model(m);
        fat5_generate_result r;
        fat5_status st;
        size_t olen = 0;
        int64_t s = 0;
        g.use_graph = use_graph;
        opt = tgo_options_text(text, k, &olen);
        if (!opt) {
            FAT5_CHECK_MSG(T, 0, "%s %s: no options text", fixture, name);
            break;
        }
        st = fat5_generate_config_from_json(tctx, opt, olen, &g);
        if (st != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s %s: options: %s", fixture, name, fat5_last_error(tctx));
            continue;
        }
        g.output_scores = fat5__json_get(c, "step_scores") != NULL;
        g.output_logits = fat5__json_get(c, "step_logits") != NULL;
        if (fat5_generate(m, tok, cu, n, &g, &r) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s %s: %s", fixture, name, fat5_last_error(ctx));
            continue;
        }
        cases++;
        FAT5_CHECK_MSG(T, r.n_seq == (int64_t)outs->n, "%s %s: %lld sequences, transformers %zu", fixture, name,
                       (long long)r.n_seq, outs->n);
        for (row = outs->child, sc = scores->child; row && sc && s < r.n_seq; row = row->next, sc = sc->next, s++) {
            int64_t len = r.cu_seqlens[s + 1] - r.cu_seqlens[s], j = 0, bad = -1;
            double ref = tgo_num(sc);
            for (v = row->child; v; v = v->next, j++) {
                int64_t x = 0;
                fat5__json_as_i64(v, &x);
                if (bad < 0 && (j >= len || r.tokens[r.cu_seqlens[s] + j] != x)) bad = j;
            }
            if (bad < 0 && len != (int64_t)row->n) bad = (int64_t)row->n;
            (*rows_all)++;
            *rows_same += bad < 0;
            FAT5_CHECK_MSG(T, bad < 0, "%s %s: sequence %lld differs from transformers at token %lld (length %lld, "
                           "transformers %zu)", fixture, name, (long long)s, (long long)bad, (long long)len, row->n);
            FAT5_CHECK_MSG(T, (isinf(ref) && r.scores[s] == ref) || fabs(r.scores[s] - ref) <= atol + rtol * fabs(ref),
                           "%s %s: sequence %lld score %.7f, transformers %.7f", fixture, name, (long long)s,
                           r.scores[s], ref);
        }
        if (g.output_scores)
            tgo_cmp_steps(T, name, r.step_scores, fat5__json_get(c, "step_scores"), r.n_rows, r.vocab_size, r.steps,
                          atol, rtol);
        if (fat5__json_get(c, "beam_indices")) {   // the beam each token extended, row by row
            const fat5__json *bi = fat5__json_get(c, "beam_indices"), *br;
            FAT5_CHECK_MSG(T, r.beam_indices != NULL, "%s %s: no beam_indices", fixture, name);
            for (br = bi->child, s = 0; r.beam_indices && br && s < r.n_seq; br = br->next, s++) {
                int64_t j = 0, same = (int64_t)br->n == r.cu_seqlens[s + 1] - r.cu_seqlens[s];
                for (v = br->child; same && v; v = v->next, j++) {
                    int64_t x = 0;
                    fat5__json_as_i64(v, &x);
                    same = r.beam_indices[r.cu_seqlens[s] + j] == x;
                }
                FAT5_CHECK_MSG(T, same, "%s %s: sequence %lld: beam_indices differ from transformers'", fixture, name,
                               (long long)s);
            }
        }
        if (g.output_logits)
            tgo_cmp_steps(T, name, r.step_logits, fat5__json_get(c, "step_logits"), r.n_rows, r.vocab_size, r.steps,
                          atol, rtol);
        fat5_generate_result_destroy(ctx, &r);
    }
out:
    free(tok), free(cu);
    fat5__free(tctx, text);
    fat5__json_free(tctx, doc);
    return cases;
}

// Every processor alone and in combinations, greedy and beam search, with decoder prompts and
// length limits, on the three fixture models: tokens identical to transformers 5, scores within
// 1e-5 (+ 1e-5 relative); per-step scores and logits too; group beam search (its cases made by
// transformers 4.56, the last to run it in core), and constrained beam search (force_words_ids, also
// made by transformers 4.56).
static void t_generate_hf_options(fat5_test *T) {
    int k, cases = 0;
    int64_t same = 0, all = 0;
    for (k = 0; k < 3; k++) {
        fat5_model *m = tgo_model(T, k);
        if (!m) continue;
        cases += tgo_run_options(T, m, tgen_fixtures[k], 1, 1e-5, 1e-5, &same, &all);
        fat5_model_destroy(m);
    }
    FAT5_CHECK_MSG(T, same == all && all > 0 && cases == 213,
                   "%d cases run (213 expected), %lld of %lld rows identical", cases,
                   (long long)same, (long long)all);
}

// The sampling warpers against transformers' own warper classes on crafted logits
// (tests/data/generate_warpers.json): the kept tokens exactly, their values to 1e-5.
static void t_generate_hf_warpers(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[600], *text = NULL;
    size_t tlen = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *rows, *c, *row;
    int64_t V = 0, n_rows, i, v, bad = 0, compared = 0, ties = 0;
    float *x = NULL;
    int32_t hist[4] = {0}, lens[64] = {0}, rid[64];
    snprintf(path, sizeof path, "%s/generate_warpers.json", FAT5_TEST_DATA);
    if (fat5__read_file(ctx, path, (size_t)16 << 20, &text, &tlen) != FAT5_OK ||
        fat5__json_parse(ctx, path, text, tlen, 16, &doc) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: %s", path, fat5_last_error(ctx));
        goto out;
    }
    fat5__json_as_i64(fat5__json_get(fat5__json_root(doc), "V"), &V);
    rows = fat5__json_get(fat5__json_root(doc), "rows");
    n_rows = (int64_t)rows->n;
    FAT5_REQUIRE(T, n_rows <= 64 && V > 0);
    x = (float *)malloc((size_t)(n_rows * V) * sizeof(float));
    for (i = 0; i < n_rows; i++) rid[i] = 0;
    for (c = fat5__json_get(fat5__json_root(doc), "cases")->child; c; c = c->next) {
        const fat5__json *o = fat5__json_get(c, "options"), *kept = fat5__json_get(c, "kept"), *vals = fat5__json_get(c, "values");
        const fat5__json *mk = fat5__json_get(c, "min_tokens_to_keep"), *f;
        fat5__gen_opts go = tgen_opts(NULL, 0, 100);
        int64_t mk_v = 1;
        double d;
        if (mk) fat5__json_as_i64(mk, &mk_v);
        go.do_sample = 1, go.top_k = 0, go.min_keep = (int)mk_v;
        for (f = o->child; f; f = f->next) {
            fat5__json_as_double(f, &d);
            if (!strcmp(f->key, "temperature")) go.temperature = (float)d;
            else if (!strcmp(f->key, "top_k")) go.top_k = (int)d;
            else if (!strcmp(f->key, "top_p")) go.top_p = (float)d;
            else if (!strcmp(f->key, "min_p")) go.min_p = (float)d;
            else if (!strcmp(f->key, "typical_p")) go.typical_p = (float)d;
            else if (!strcmp(f->key, "epsilon_cutoff")) go.epsilon = (float)d;
            else if (!strcmp(f->key, "eta_cutoff")) go.eta = (float)d;
            else FAT5_CHECK_MSG(T, 0, "warpers fixture: unknown option %s", f->key);
        }
        for (row = rows->child, i = 0; row; row = row->next, i++) {
            const fat5__json *e;
            for (e = row->child, v = 0; e && v < V; e = e->next, v++) x[i * V + v] = (float)tgo_num(e);
        }
        FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(x), FAT5__ADDR(hist), FAT5__ADDR(lens), FAT5__ADDR(rid),
                                                 n_rows, (int)V, 1, &go));
        {
            const fat5__json *kr = kept->child, *vr = vals->child;
            for (i = 0; i < n_rows && kr && vr; i++, kr = kr->next, vr = vr->next) {
                const fat5__json *ki = kr->child, *vi = vr->child;
                int64_t nk = 0;
                for (v = 0; v < V; v++) nk += x[i * V + v] > -INFINITY;
                compared++;
                if (nk != (int64_t)kr->n) {
                    // transformers orders equal values as torch's sort leaves them, so a cut through tied
                    // values keeps some of them; fat5 keeps all: allowed when every extra token ties
                    // with the smallest value transformers kept (and transformers' are all kept)
                    double lo = INFINITY;
                    int64_t in_hf = 0, extra_tied = 1;
                    const fat5__json *e2;
                    for (e2 = ki; e2; e2 = e2->next) {
                        int64_t id = 0;
                        fat5__json_as_i64(e2, &id);
                        in_hf += x[i * V + id] > -INFINITY;
                    }
                    for (e2 = vi; e2; e2 = e2->next) lo = tgo_num(e2) < lo ? tgo_num(e2) : lo;
                    for (v = 0; v < V; v++) {
                        int listed = 0;
                        for (e2 = ki; e2 && !listed; e2 = e2->next) {
                            int64_t id = 0;
                            fat5__json_as_i64(e2, &id);
                            listed = id == v;
                        }
                        if (!listed && x[i * V + v] > -INFINITY && fabs((double)x[i * V + v] - lo) > 1e-6 * (1 + fabs(lo)))
                            extra_tied = 0;
                    }
                    if (in_hf == (int64_t)kr->n && extra_tied && nk > (int64_t)kr->n) {
                        ties++;
                        continue;
                    }
                    if (bad++ < 5)
                        FAT5_CHECK_MSG(T, 0, "warpers %s row %lld: %lld kept, transformers %zu",
                                       fat5__json_get(c, "name") ? fat5__json_get(c, "name")->str : "?", (long long)i,
                                       (long long)nk, kr->n);
                    continue;
                }
                for (; ki && vi; ki = ki->next, vi = vi->next) {
                    int64_t id = 0;
                    double w = tgo_num(vi);
                    fat5__json_as_i64(ki, &id);
                    if (!(x[i * V + id] > -INFINITY) || fabs((double)x[i * V + id] - w) > 1e-5 + 1e-5 * fabs(w)) {
                        if (bad++ < 5) FAT5_CHECK_MSG(T, 0, "warpers row %lld token %lld: %g, transformers %g", (long long)i, (long long)id, x[i * V + id], w);
                        break;
                    }
                }
            }
        }
    }
    FAT5_CHECK_MSG(T, bad == 0 && compared > 0, "warpers: %lld of %lld rows differ", (long long)bad, (long long)compared);
    FAT5_CHECK_MSG(T, ties <= compared / 20, "warpers: %lld of %lld rows differ by tied values", (long long)ties,
                   (long long)compared);
out:
    free(x);
    fat5__free(ctx, text);
    fat5__json_free(ctx, doc);
}

// ---- the new warpers' draws ----

// The chi-square critical values at p = 1e-6 for df 1 .. 11
static const double tgo_chi2_crit[12] = {0, 23.93, 27.63, 30.66, 33.38, 35.89, 38.26, 40.52, 42.70, 44.81, 46.86, 48.87};

// min_p, typical_p, epsilon and eta sampling draw from the softmax of the tokens they keep: the
// kept set is the warper's (checked against transformers by generate_hf_warpers), no other token
// is ever drawn, and 40000 draws (each another Philox counter) pass a chi-square at p = 1e-6
static void t_generate_sample_warpers_chi2(fat5_test *T) {
    enum { V = 12, N = 40000, CHUNK = 500, LH = N / CHUNK + 2 };
    fat5_ctx *ctx = fat5_test_ctx(T);
    static float xs[CHUNK * V];
    float x[V], kept[V];
    static int32_t hist[CHUNK * LH];   // each draw writes its token at [P + lens]
    int32_t tok[CHUNK], lens[CHUNK], done[CHUNK], rows[CHUNK];
    float score[CHUNK];
    fat5_rng rng = fat5_rng_init(31);
    int mode, v, e;
    for (v = 0; v < V; v++) x[v] = (float)(1.5 * fat5_rng_normal(&rng));
    for (mode = 0; mode < 4; mode++) {
        fat5__gen_opts o = tgen_opts(NULL, 0, 1 << 30);
        int64_t counts[V], ck[V];
        double q[V], z = 0, c;
        int nk = 0, drawn = 0;
        o.do_sample = 1, o.seed = 500 + (uint64_t)mode, o.temperature = 1.2f;
        if (mode == 0) o.min_p = 0.08f;
        if (mode == 1) o.typical_p = 0.7f;
        if (mode == 2) o.epsilon = 0.04f;
        if (mode == 3) o.eta = 0.05f;
        memcpy(kept, x, sizeof x);   // the warper alone, once, for the kept set
        {
            int32_t h0[4] = {0}, l0[1] = {0}, r0[1] = {0};
            FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(kept), FAT5__ADDR(h0), FAT5__ADDR(l0), FAT5__ADDR(r0), 1,
                                                     V, 4, &o));
        }
        for (v = 0; v < V; v++)
            if (kept[v] > -INFINITY) z += exp((double)kept[v]), nk++;
        FAT5_REQUIRE(T, nk >= 2 && nk < V);   // the warper removes some tokens and keeps several
        for (v = 0; v < V; v++) q[v] = kept[v] > -INFINITY ? exp((double)kept[v]) / z : 0;
        memset(counts, 0, sizeof counts);
        while (drawn < N) {
            for (e = 0; e < CHUNK; e++) memcpy(xs + e * V, x, sizeof x), rows[e] = e, lens[e] = drawn / CHUNK, done[e] = 0;
            FAT5_REQUIRE_OK(T, fat5__cpu_gen_process(ctx, FAT5__ADDR(xs), FAT5__ADDR(hist), FAT5__ADDR(lens),
                                                     FAT5__ADDR(rows), CHUNK, V, LH, &o));
            FAT5_REQUIRE_OK(T, fat5__cpu_gen_select(ctx, FAT5__ADDR(xs), FAT5__ADDR(tok), FAT5__ADDR(hist), FAT5__ADDR(lens),
                                                    FAT5__ADDR(done), FAT5__ADDR(score), FAT5__ADDR(rows), CHUNK, V, LH, &o));
            for (e = 0; e < CHUNK; e++) counts[tok[e]]++;
            drawn += CHUNK;
        }
        for (v = 0, nk = 0; v < V; v++) {
            if (q[v] == 0) {
                FAT5_CHECK_MSG(T, counts[v] == 0, "mode %d: removed token %d drawn %lld times", mode, v, (long long)counts[v]);
                continue;
            }
            ck[nk] = counts[v], q[nk++] = q[v];
        }
        c = tgen_chi2(ck, q, nk, N);
        FAT5_CHECK_MSG(T, c < tgo_chi2_crit[nk - 1], "mode %d: chi-square %.2f >= %.2f (df %d, p = 1e-6)", mode, c,
                       tgo_chi2_crit[nk - 1], nk - 1);
    }
}

// Requests past the usual sizes run whole (make test-asan checks their memory): sampling with 40
// return sequences an input (more than the 32 beams beam search allows), and constrained beam search
// over 120 inputs
static void t_generate_large_requests(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = tgo_model(T, 0);
    enum { N = 120 };
    int32_t tok[N * 3], cu[N + 1];
    static const int32_t fw[1] = {9}, fw_cu[2] = {0, 1}, fw_con[1] = {0};
    int64_t i;
    fat5_generate_config g;
    fat5_generate_result r;
    if (!m) return;
    for (i = 0; i < N; i++) tok[3 * i] = (int32_t)(5 + i % 40), tok[3 * i + 1] = (int32_t)(7 + i % 13), tok[3 * i + 2] = 1;
    for (i = 0; i <= N; i++) cu[i] = (int32_t)(3 * i);
    g = fat5_generate_config_from_model(m);
    g.do_sample = 1, g.seed = 3, g.num_return_sequences = 40, g.max_new_tokens = 3;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, 2, &g, &r));
    FAT5_CHECK(T, r.n_seq == 80 && r.cu_seqlens[80] <= 240);
    for (i = 0; i < 80; i++) FAT5_CHECK(T, r.cu_seqlens[i + 1] - r.cu_seqlens[i] >= 1);
    fat5_generate_result_destroy(ctx, &r);
    g = fat5_generate_config_from_model(m);
    g.num_beams = 4, g.max_new_tokens = 4, g.eos_token_id = -1;
    g.force_words_ids.ids = fw, g.force_words_ids.cu = fw_cu, g.force_words_ids.n = 1, g.force_words_constraint = fw_con;
    FAT5_REQUIRE_OK(T, fat5_generate(m, tok, cu, N, &g, &r));
    FAT5_CHECK(T, r.n_seq == N);
    for (i = 0; i < N; i++) {   // every output holds the forced word (4 tokens leave room for it)
        int64_t j, has = 0;
        for (j = r.cu_seqlens[i]; j < r.cu_seqlens[i + 1]; j++) has |= r.tokens[j] == 9;
        FAT5_CHECK_MSG(T, has, "input %lld: no forced token 9", (long long)i);
    }
    fat5_generate_result_destroy(ctx, &r);
    fat5_model_destroy(m);
}

#ifndef FAT5_NO_CUDA
// GPU fp32 == transformers on every option case (tokens identical, scores and per-step values within
// 2e-4: cuBLAS sums in another order than the CPU), with and without CUDA graphs
static void t_gpu_generate_hf_options(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32);
    int k, cases = 0, graph;
    int64_t same = 0, all = 0;
    if (!g) return;
    for (k = 0; k < 3; k++) {
        fat5_model *m = tgen_gpu_model(T, g, k);
        if (!m) continue;
        for (graph = 1; graph >= 0; graph--)
            cases += tgo_run_options(T, m, tgen_fixtures[k], graph, 2e-4, 2e-4, &same, &all);
        fat5_model_destroy(m);
    }
    FAT5_CHECK_MSG(T, same == all && all > 0 && cases == 2 * 213,
                   "%d cases run, %lld of %lld rows identical", cases, (long long)same,
                   (long long)all);
    fat5_ctx_destroy(g);
}

// Sampling with every warper, and beam sampling, give the CPU's tokens on the GPU for one seed
// (fp32; the Philox draws are the same on both)
static void t_gpu_generate_sample_same(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32), *c = fat5_test_ctx(T);
    int32_t *tok = NULL, *cu = NULL;
    int64_t n = 0;
    int mode;
    fat5_model *mg = NULL, *mc = NULL;
    if (!g) return;
    mg = tgen_gpu_model(T, g, 1), mc = tgo_model(T, 1);
    if (!mg || !mc || !tgen_inputs(T, c, tgen_fixtures[1], &tok, &cu, &n)) goto out;
    for (mode = 0; mode < 4; mode++) {
        fat5_generate_config o = fat5_generate_config_from_model(mc);
        fat5_generate_result a, b;
        o.do_sample = 1, o.seed = 77 + (uint64_t)mode, o.max_new_tokens = 14, o.top_k = 0;
        if (mode == 0) o.temperature = 1.3, o.top_p = 0.9;
        if (mode == 1) o.min_p = 0.05, o.typical_p = 0.9;
        if (mode == 2) o.epsilon_cutoff = 3e-3, o.eta_cutoff = 1e-3, o.num_return_sequences = 3;
        if (mode == 3) o.num_beams = 3, o.num_return_sequences = 2, o.top_k = 20;
        FAT5_REQUIRE_OK(T, fat5_generate(mc, tok, cu, n, &o, &a));
        if (fat5_generate(mg, tok, cu, n, &o, &b) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "GPU: %s", fat5_last_error(g));
            fat5_generate_result_destroy(c, &a);
            continue;
        }
        FAT5_CHECK_MSG(T, a.n_seq == b.n_seq && a.cu_seqlens[a.n_seq] == b.cu_seqlens[b.n_seq] &&
                              !memcmp(a.cu_seqlens, b.cu_seqlens, (size_t)(a.n_seq + 1) * 4) &&
                              !memcmp(a.tokens, b.tokens, (size_t)a.cu_seqlens[a.n_seq] * 4),
                       "mode %d: the GPU's samples differ from the CPU's", mode);
        fat5_generate_result_destroy(c, &a);
        fat5_generate_result_destroy(g, &b);
    }
out:
    free(tok), free(cu);
    fat5_model_destroy(mg);
    fat5_model_destroy(mc);
    fat5_ctx_destroy(g);
}
#define FAT5_TESTS_GENERATE_OPTIONS_GPU(X) X(gpu_generate_hf_options) X(gpu_generate_sample_same)
#else
#define FAT5_TESTS_GENERATE_OPTIONS_GPU(X)
#endif

#define FAT5_TESTS_GENERATE_OPTIONS(X) X(generate_stop_match) X(generate_token_texts) X(generate_detok_stream) X(generate_stream) \
    X(generate_stop_strings) X(generate_outputs) X(generate_hf_options) X(generate_hf_warpers) X(generate_sample_warpers_chi2) X(generate_large_requests) \
    FAT5_TESTS_GENERATE_OPTIONS_GPU(X)
