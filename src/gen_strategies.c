// =============================================================================================
// ==[7.2] generate: decoding strategies ==
// greedy, sampling and beam search over fat5__decoder_step_dev, with Hugging Face's logits
// processors; fat5_generate.
//
// A step for n live entries is one function (fat5__gen_step): the decoder step, gen_process (the
// processors: repetition penalty, no-repeat n-grams, min_new_tokens; beam search first turns the
// logits into log-probabilities, as Hugging Face does), then gen_select (greedy / sampling) or
// gen_beam + the cache reorder (beam search). All of it works on backend buffers and needs no host
// synchronisation, so on the GPU it is captured once per n and replayed from a CUDA graph.
// Between steps the host reads the per-row (per-input for beam search) done flags; when some are
// set it drops their entries from d->tok / d->rows, so finished rows cost nothing afterwards.
// Semantics follow transformers 5's generate: processor order, finished greedy rows padded (here:
// left out), beam search keeping 2K candidates, its finished-hypothesis merge, length
// normalisation by the generated length (EOS included) and its early-stopping heuristic.

// ---- options ----

FAT5_API fat5_generate_config fat5_generate_config_default(const fat5_model *m) {
    fat5_generate_config g;
    memset(&g, 0, sizeof g);
    g.max_new_tokens = 20;
    g.min_new_tokens = 0;
    g.do_sample = 0;
    g.temperature = 1.0;
    g.top_k = 50;
    g.top_p = 1.0;
    g.seed = 0;
    g.num_beams = 1;
    g.length_penalty = 1.0;
    g.early_stopping = 0;
    g.num_return_sequences = 1;
    g.repetition_penalty = 1.0;
    g.no_repeat_ngram_size = 0;
    g.eos_token_id = m ? m->cfg.eos_token_id : 1;
    g.pad_token_id = m ? m->cfg.pad_token_id : 0;
    g.decoder_start_token_id = m ? m->cfg.decoder_start_token_id : 0;
    g.use_graph = 1;
    // checked by fat5_model_load, so this cannot fail
    if (m && m->gen_json) (void)fat5_generate_config_from_json(m->ctx, m->gen_json, m->gen_json_len, &g);
    return g;
}

// The range checks that need no model (fat5_generate_config_from_json and fat5_generate).
static fat5_status fat5__gen_check(fat5_ctx *ctx, const char *what, const fat5_generate_config *g) {
#define FAT5__GEN_BAD(cond, ...) \
    if (cond) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, __VA_ARGS__)
    FAT5__GEN_BAD(g->max_new_tokens < 1 || g->max_new_tokens > INT32_MAX / 2,
                  "%s: max_new_tokens = %lld; expected at least 1", what, (long long)g->max_new_tokens);
    FAT5__GEN_BAD(g->min_new_tokens < 0 || g->min_new_tokens > INT32_MAX,
                  "%s: min_new_tokens = %lld is negative", what, (long long)g->min_new_tokens);
    FAT5__GEN_BAD(g->num_beams < 1 || g->num_beams > FAT5__BEAM_MAX, "%s: num_beams = %lld; expected 1 .. %d", what,
                  (long long)g->num_beams, FAT5__BEAM_MAX);
    FAT5__GEN_BAD(g->num_return_sequences < 1 || g->num_return_sequences > INT32_MAX,
                  "%s: num_return_sequences = %lld; expected at least 1", what, (long long)g->num_return_sequences);
    FAT5__GEN_BAD(!(g->temperature > 0.0) || !isfinite(g->temperature),
                  "%s: temperature = %g; expected a finite value > 0", what, g->temperature);
    FAT5__GEN_BAD(!(g->top_p > 0.0 && g->top_p <= 1.0), "%s: top_p = %g; expected a value in (0, 1]", what, g->top_p);
    FAT5__GEN_BAD(g->top_k < 0 || g->top_k > INT32_MAX, "%s: top_k = %lld; expected >= 0 (0 = off)", what,
                  (long long)g->top_k);
    FAT5__GEN_BAD(!(g->repetition_penalty > 0.0) || !isfinite(g->repetition_penalty),
                  "%s: repetition_penalty = %g; expected a finite value > 0 (1 = off)", what, g->repetition_penalty);
    FAT5__GEN_BAD(g->no_repeat_ngram_size < 0 || g->no_repeat_ngram_size > INT32_MAX,
                  "%s: no_repeat_ngram_size = %lld is negative", what, (long long)g->no_repeat_ngram_size);
    FAT5__GEN_BAD(!isfinite(g->length_penalty), "%s: length_penalty = %g is not finite", what, g->length_penalty);
    FAT5__GEN_BAD(g->early_stopping < 0 || g->early_stopping > 2,
                  "%s: early_stopping = %d; expected 0 (false), 1 (true) or 2 (\"never\")", what, g->early_stopping);
    FAT5__GEN_BAD(g->eos_token_id < -1 || g->eos_token_id > INT32_MAX,
                  "%s: eos_token_id = %lld; expected an id (or -1: none)", what, (long long)g->eos_token_id);
    FAT5__GEN_BAD(g->pad_token_id < 0 || g->pad_token_id > INT32_MAX, "%s: pad_token_id = %lld is not an id", what,
                  (long long)g->pad_token_id);
    FAT5__GEN_BAD(g->decoder_start_token_id < 0 || g->decoder_start_token_id > INT32_MAX,
                  "%s: decoder_start_token_id = %lld is not an id", what, (long long)g->decoder_start_token_id);
    return FAT5_OK;
#undef FAT5__GEN_BAD
}

// one integer member (null: left as it is); *set tells whether it was there
static fat5_status fat5__gen_int(fat5_ctx *ctx, const fat5__json *root, const char *key, int64_t *out, int *set) {
    const fat5__json *v = fat5__json_get(root, key);
    if (set) *set = 0;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type == FAT5__J_ARRAY && v->n >= 1) v = v->child;   // eos_token_id: [id, ...] -> the first
    if (v->type != FAT5__J_NUMBER || !fat5__json_as_i64(v, out))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be an integer, got %s", key,
                         fat5__json_type_name(v->type));
    if (set) *set = 1;
    return FAT5_OK;
}
static fat5_status fat5__gen_num(fat5_ctx *ctx, const fat5__json *root, const char *key, double *out) {
    const fat5__json *v = fat5__json_get(root, key);
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_NUMBER || !fat5__json_as_double(v, out))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be a number, got %s", key,
                         fat5__json_type_name(v->type));
    return FAT5_OK;
}
static fat5_status fat5__gen_bool(fat5_ctx *ctx, const fat5__json *root, const char *key, int *out) {
    const fat5__json *v = fat5__json_get(root, key);
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_TRUE && v->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be true or false, got %s", key,
                         fat5__json_type_name(v->type));
    *out = v->type == FAT5__J_TRUE;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_generate_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                    fat5_generate_config *inout) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *es;
    fat5_generate_config g;
    fat5_status st;
    int64_t seed = 0, max_length = 0, min_length = 0;
    int has_max_new = 0, has_min_new = 0, has_max_len = 0, has_min_len = 0, has_seed = 0;
    if (!ctx || !inout) return FAT5_ERR_INVALID_ARG;
    if ((st = fat5__json_parse(ctx, "generation config", json, len, 16, &doc))) return st;
    root = fat5__json_root(doc);
    g = *inout;
    if (root->type != FAT5__J_OBJECT) {
        fat5__json_free(ctx, doc);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: expected a JSON object");
    }
    es = fat5__json_get(root, "early_stopping");
    if ((st = fat5__gen_int(ctx, root, "max_new_tokens", &g.max_new_tokens, &has_max_new)) ||
        (st = fat5__gen_int(ctx, root, "min_new_tokens", &g.min_new_tokens, &has_min_new)) ||
        (st = fat5__gen_int(ctx, root, "max_length", &max_length, &has_max_len)) ||
        (st = fat5__gen_int(ctx, root, "min_length", &min_length, &has_min_len)) ||
        (st = fat5__gen_bool(ctx, root, "do_sample", &g.do_sample)) ||
        (st = fat5__gen_num(ctx, root, "temperature", &g.temperature)) ||
        (st = fat5__gen_int(ctx, root, "top_k", &g.top_k, NULL)) ||
        (st = fat5__gen_num(ctx, root, "top_p", &g.top_p)) ||
        (st = fat5__gen_int(ctx, root, "seed", &seed, &has_seed)) ||
        (st = fat5__gen_int(ctx, root, "num_beams", &g.num_beams, NULL)) ||
        (st = fat5__gen_num(ctx, root, "length_penalty", &g.length_penalty)) ||
        (st = fat5__gen_int(ctx, root, "num_return_sequences", &g.num_return_sequences, NULL)) ||
        (st = fat5__gen_num(ctx, root, "repetition_penalty", &g.repetition_penalty)) ||
        (st = fat5__gen_int(ctx, root, "no_repeat_ngram_size", &g.no_repeat_ngram_size, NULL)) ||
        (st = fat5__gen_int(ctx, root, "eos_token_id", &g.eos_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "pad_token_id", &g.pad_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "decoder_start_token_id", &g.decoder_start_token_id, NULL)) ||
        (st = fat5__gen_bool(ctx, root, "use_graph", &g.use_graph)))
        goto done;
    if (es && es->type == FAT5__J_STRING) {
        if (strcmp(es->str, "never") != 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                           "generation config: early_stopping must be true, false or \"never\", got \"%s\"", es->str);
            goto done;
        }
        g.early_stopping = 2;
    } else if (es && es->type != FAT5__J_NULL) {
        if ((st = fat5__gen_bool(ctx, root, "early_stopping", &g.early_stopping))) goto done;
    }
    if (has_seed) {
        if (seed < 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: seed = %lld is negative", (long long)seed);
            goto done;
        }
        g.seed = (uint64_t)seed;
    }
    // Hugging Face's max_length / min_length count the decoder start token; max_new_tokens and
    // min_new_tokens win when both are given
    if (has_max_len && !has_max_new) g.max_new_tokens = max_length - 1;
    if (has_min_len && !has_min_new) g.min_new_tokens = min_length > 1 ? min_length - 1 : 0;
    if ((st = fat5__gen_check(ctx, "generation config", &g))) goto done;
    *inout = g;
done:
    fat5__json_free(ctx, doc);
    return st;
}

FAT5_API void fat5_generate_result_free(fat5_ctx *ctx, fat5_generate_result *r) {
    if (!r) return;
    fat5__free(ctx, r->tokens);
    fat5__free(ctx, r->cu_seqlens);
    fat5__free(ctx, r->scores);
    memset(r, 0, sizeof *r);
}

// ---- the decoding loop ----
#define FAT5__TRY(call)                          \
    do {                                         \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)
// State of one fat5_generate call: the decoder, the strategy's buffers on the backend (see the
// gen_* ops for their meaning) and the option values the ops take.
typedef struct fat5__gen {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_decoder *d;
    const fat5_generate_config *g;
    int beam, V, Lh, K;                 // K: beams (1 without beam search)
    int64_t R, N;                       // rows and inputs
    fat5__addr base;
    fat5__addr hist, lens, done, score; // [R, Lh], [R], [max(R, N)], [R]
    fat5__addr bscore, fin_score, fin_tok, fin_len, fin_flag, unsat, src, scratch;
    void *graph;                        // GPU: the captured step, for graph_n entries
    int64_t graph_n;
} fat5__gen;

// One decoding step for the first n entries of d->tok / d->rows: the decoder, the processors and
// the strategy. Enqueues work only (no host synchronisation or copy), so it can be captured.
static fat5_status fat5__gen_step(fat5__gen *s, int64_t n) {
    const fat5__backend *be = s->be;
    const fat5_generate_config *g = s->g;
    fat5_decoder *d = s->d;
    fat5_status st;
    int eos = (int)g->eos_token_id;
    FAT5__TRY(fat5__decoder_step_dev(d, n));
    FAT5__TRY(be->gen_process(s->ctx, d->logits, s->hist, s->lens, d->rows, n, s->V, s->Lh,
                              (float)g->repetition_penalty, (int)g->no_repeat_ngram_size, (int)g->min_new_tokens,
                              eos, s->beam));
    if (!s->beam)
        return be->gen_select(s->ctx, d->logits, d->tok, s->hist, s->lens, s->done, s->score, d->rows, n, s->V, s->Lh,
                              (int)g->max_new_tokens, eos, (int)g->pad_token_id, g->do_sample, (float)g->temperature,
                              (int)g->top_k, (float)g->top_p, (unsigned long long)g->seed);
    FAT5__TRY(be->gen_beam(s->ctx, d->logits, d->tok, s->src, s->hist, s->lens, s->bscore, s->fin_score, s->fin_tok,
                           s->fin_len, s->fin_flag, s->unsat, s->done, d->rows, s->scratch, n, s->V, s->Lh, s->K,
                           (int)g->max_new_tokens, eos, (float)g->length_penalty, g->early_stopping));
    return fat5__decoder_reorder_dev(d, s->src);
}

// The step replayed from a CUDA graph (captured again when n changes), as fat5__decoder_graph_step:
// the decoder's host position advances once when the step is recorded and once per later replay.
// Returns FAT5_ERR_UNSUPPORTED when capture is not possible (the caller then launches plainly).
static fat5_status fat5__gen_graph_step(fat5__gen *s, int64_t n) {
#ifndef FAT5_NO_CUDA
    fat5_ctx *ctx = s->ctx;
    fat5_status st;
    void *exec = NULL;
    if (s->graph && s->graph_n == n) {
        if ((st = fat5__dev_graph_launch(ctx, s->graph))) return st;
        s->d->pos++;
        return FAT5_OK;
    }
    fat5__dev_graph_destroy(ctx, s->graph);
    s->graph = NULL;
    if ((st = fat5__dev_capture_begin(ctx))) return st;
    st = fat5__gen_step(s, n);
    if (st) {
        fat5__dev_capture_end(ctx, 0, &exec);
        return st;
    }
    if ((st = fat5__dev_capture_end(ctx, 1, &exec))) {
        s->d->pos--;
        return st;
    }
    s->graph = exec;
    s->graph_n = n;
    return fat5__dev_graph_launch(ctx, s->graph);
#else
    (void)n;
    return fat5__err(s->ctx, FAT5_ERR_UNSUPPORTED, "CUDA graphs need the GPU path");
#endif
}

// Lays out the strategy's buffers from base (0 measures); 0 when the size overflows.
static int fat5__gen_layout(fat5__gen *s, fat5__addr base, size_t *total) {
    size_t off = 0, R = (size_t)s->R, Lh = (size_t)s->Lh, N = (size_t)s->N, RN = R > N ? R : N;
    int ok = 1;
#define FAT5__GWS(field, count)                                                                   \
    do {                                                                                          \
        size_t n_ = 0;                                                                            \
        off = (off + 255) & ~(size_t)255;                                                         \
        if (!fat5__mul_ok((size_t)(count), 4, &n_) || !fat5__add_ok(off, n_, &off)) ok = 0;        \
        s->field = base ? base + (fat5__addr)(off - n_) : 0;                                      \
    } while (0)
    FAT5__GWS(hist, R * Lh);
    FAT5__GWS(lens, R);
    FAT5__GWS(done, RN);
    FAT5__GWS(score, R);
    FAT5__GWS(bscore, R);
    FAT5__GWS(fin_score, R);
    FAT5__GWS(fin_tok, R * Lh);
    FAT5__GWS(fin_len, R);
    FAT5__GWS(fin_flag, R);
    FAT5__GWS(unsat, N);
    FAT5__GWS(src, R);
    FAT5__GWS(scratch, R * Lh);
#undef FAT5__GWS
    *total = off;
    return ok;
}

// Checks the request against the model; messages name the option.
static fat5_status fat5__gen_check_request(fat5_model *m, const int32_t *tokens, const int32_t *cu, int64_t n_inputs,
                                           const fat5_generate_config *g) {
    fat5_ctx *ctx = m->ctx;
    int64_t V = m->cfg.vocab_size, rows;
    fat5_status st;
    if ((st = fat5__gen_check(ctx, "fat5_generate", g))) return st;
    if ((st = fat5__check_enc_input(m, "fat5_generate", tokens, cu, n_inputs, INT32_MAX, &m->attn))) return st;
    if (g->eos_token_id >= V || g->pad_token_id >= V || g->decoder_start_token_id >= V)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: %s = %lld is outside [0, vocab_size %lld)",
                         g->eos_token_id >= V ? "eos_token_id" : g->pad_token_id >= V ? "pad_token_id"
                                                                                      : "decoder_start_token_id",
                         (long long)(g->eos_token_id >= V ? g->eos_token_id
                                     : g->pad_token_id >= V ? g->pad_token_id : g->decoder_start_token_id),
                         (long long)V);
    if (g->num_beams > 1 && g->do_sample)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_generate: do_sample with num_beams = %lld (beam sampling) "
                         "is not supported", (long long)g->num_beams);
    if (g->num_beams > 1 && g->num_return_sequences > g->num_beams)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_return_sequences = %lld exceeds num_beams = %lld",
                         (long long)g->num_return_sequences, (long long)g->num_beams);
    if (g->num_beams == 1 && !g->do_sample && g->num_return_sequences != 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_return_sequences = %lld with greedy decoding (only 1 is possible)",
                         (long long)g->num_return_sequences);
    rows = g->num_beams > 1 ? g->num_beams : g->num_return_sequences;
    if (n_inputs > INT32_MAX / 2 / rows || n_inputs * rows > INT32_MAX / 2 / (g->max_new_tokens + 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: %lld inputs x %lld rows x max_new_tokens = %lld: the output does not fit the "
                         "cache (2^30 positions)",
                         (long long)n_inputs, (long long)rows, (long long)g->max_new_tokens);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_generate(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens, int64_t n_inputs,
                                   const fat5_generate_config *g, fat5_generate_result *out) {
    fat5__gen s;
    fat5_ctx *ctx;
    fat5_status st;
    int32_t *h = NULL;            // host staging: [R * Lh] histories, then the result
    int32_t *ent_tok, *ent_row, *flags;
    float *hs = NULL;
    size_t total = 0;
    int64_t n, r, e, steps = 0, R, N, Lh, rpi, total_tok = 0, q;
    int use_graph;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    if (!g || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_generate: %s is NULL", g ? "out" : "config");
    memset(out, 0, sizeof *out);
    if ((st = fat5__gen_check_request(m, tokens, cu_seqlens, n_inputs, g))) return st;
    memset(&s, 0, sizeof s);
    s.m = m, s.ctx = ctx, s.be = m->be, s.g = g;
    s.beam = g->num_beams > 1;
    s.K = (int)g->num_beams;
    rpi = s.beam ? g->num_beams : g->num_return_sequences;
    s.N = N = n_inputs;
    s.R = R = n_inputs * rpi;
    s.V = (int)m->cfg.vocab_size;
    s.Lh = (int)(g->max_new_tokens + 1);
    Lh = s.Lh;
    // the decoder: every generated token but the last is fed back, so max_new_tokens positions
    if ((st = fat5_decoder_create(m, R, cu_seqlens[n_inputs], g->max_new_tokens, &s.d))) return st;
    if ((st = fat5_decoder_start(s.d, tokens, cu_seqlens, n_inputs, rpi))) goto fail;
    if (!fat5__gen_layout(&s, 0, &total)) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: the buffer size overflows");
        goto fail;
    }
    if ((st = s.be->alloc(ctx, total, &s.base))) goto fail;
    fat5__gen_layout(&s, s.base, &total);
    h = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(R * Lh + 3 * R + N + 1) * sizeof(int32_t)));
    hs = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)R * sizeof(float)));
    if (!h || !hs) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory");
        goto fail;
    }
    ent_tok = h + R * Lh, ent_row = ent_tok + R, flags = ent_row + R;
    // initial state: every row holds the start token; beams 1 .. K-1 start 1e9 down (Hugging Face),
    // finished slots empty at -1e9, every input may still improve
    for (r = 0; r < R * Lh; r++) h[r] = r % Lh == 0 ? (int32_t)g->decoder_start_token_id : (int32_t)g->pad_token_id;
    if ((st = s.be->upload(ctx, s.hist, h, (size_t)(R * Lh) * 4))) goto fail;
    for (r = 0; r < R; r++) hs[r] = s.beam && r % s.K ? -1.0e9f : 0.0f;
    if ((st = s.be->upload(ctx, s.bscore, hs, (size_t)R * 4))) goto fail;
    for (r = 0; r < R; r++) hs[r] = -1.0e9f;
    if ((st = s.be->upload(ctx, s.fin_score, hs, (size_t)R * 4))) goto fail;
    for (r = 0; r < R; r++) h[r] = (int32_t)r;
    if ((st = s.be->upload(ctx, s.src, h, (size_t)R * 4))) goto fail;
    for (r = 0; r < N; r++) h[r] = 1;
    if ((st = s.be->upload(ctx, s.unsat, h, (size_t)N * 4))) goto fail;
    for (r = 0; r < R; r++) ent_tok[r] = (int32_t)g->decoder_start_token_id, ent_row[r] = (int32_t)r;
    if ((st = s.be->upload(ctx, s.d->tok, ent_tok, (size_t)R * 4)) ||
        (st = s.be->upload(ctx, s.d->rows, ent_row, (size_t)R * 4)) || (st = s.be->sync(ctx)))
        goto fail;
    use_graph = g->use_graph && ctx->gpu != NULL;
    n = R;
    while (n > 0 && steps < g->max_new_tokens) {
        int64_t kept = 0, unit_n = s.beam ? N : R;
        if (use_graph) {
            st = fat5__gen_graph_step(&s, n);
            if (st == FAT5_ERR_UNSUPPORTED) {   // no capture here: plain launches from now on
                use_graph = 0;
                st = fat5__gen_step(&s, n);
            }
        } else {
            st = fat5__gen_step(&s, n);
        }
        if (st) goto fail;
        steps++;
        // the small read between steps: which rows (inputs) are done; then drop their entries
        if ((st = s.be->download(ctx, flags, s.done, (size_t)unit_n * 4)) || (st = s.be->sync(ctx))) goto fail;
        for (e = 0; e < n; e++) {
            int64_t unit = s.beam ? ent_row[e] / s.K : ent_row[e];
            kept += !flags[unit];
        }
        if (kept == n) continue;
        if (kept == 0) break;
        if ((st = s.be->download(ctx, h, s.d->tok, (size_t)n * 4)) || (st = s.be->sync(ctx))) goto fail;
        for (e = 0, q = 0; e < n; e++) {
            int64_t unit = s.beam ? ent_row[e] / s.K : ent_row[e];
            if (flags[unit]) {
                s.d->live[ent_row[e]] = 0;
                continue;
            }
            ent_tok[q] = h[e];
            ent_row[q++] = ent_row[e];
        }
        n = kept;
        s.d->n_live = n;
        if ((st = s.be->upload(ctx, s.d->tok, ent_tok, (size_t)n * 4)) ||
            (st = s.be->upload(ctx, s.d->rows, ent_row, (size_t)n * 4)) || (st = s.be->sync(ctx)))
            goto fail;
    }
    // the result: per input, its rows (greedy / sampling) or its best finished hypotheses
    {
        int64_t nseq = n_inputs * g->num_return_sequences, i, k;
        fat5__addr toks = s.beam ? s.fin_tok : s.hist, lens = s.beam ? s.fin_len : s.lens;
        fat5__addr sc = s.beam ? s.fin_score : s.score;
        int64_t stride = s.beam ? Lh - 1 : Lh, first = s.beam ? 0 : 1;
        if ((st = s.be->download(ctx, h, toks, (size_t)(R * stride) * 4)) ||
            (st = s.be->download(ctx, ent_tok, lens, (size_t)R * 4)) ||
            (st = s.be->download(ctx, hs, sc, (size_t)R * 4)) || (st = s.be->sync(ctx)))
            goto fail;
        out->cu_seqlens = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)nseq + 1, sizeof(int32_t)));
        out->scores = FAT5__CAST(float *, fat5__calloc(ctx, (size_t)nseq, sizeof(float)));
        for (i = 0; i < n_inputs; i++)
            for (k = 0; k < g->num_return_sequences; k++) total_tok += ent_tok[i * rpi + k];
        out->tokens = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)(total_tok > 0 ? total_tok : 1), sizeof(int32_t)));
        if (!out->cu_seqlens || !out->scores || !out->tokens) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory for the result");
            goto fail;
        }
        for (i = 0, q = 0; i < n_inputs; i++)
            for (k = 0; k < g->num_return_sequences; k++) {
                int64_t row = i * rpi + k, j, o = i * g->num_return_sequences + k;
                for (j = 0; j < ent_tok[row]; j++) out->tokens[q++] = h[row * stride + first + j];
                out->cu_seqlens[o + 1] = (int32_t)q;
                out->scores[o] = hs[row];
            }
        out->n_seq = nseq;
        out->steps = steps;
        out->cache_bytes = (size_t)m->cfg.num_decoder_layers * 2 *
                           ((size_t)R * (size_t)g->max_new_tokens + (size_t)cu_seqlens[n_inputs]) *
                           (size_t)(m->cfg.num_heads * m->cfg.d_kv) * m->act_size;
    }
    st = FAT5_OK;
    goto cleanup;
fail:
    fat5_generate_result_free(ctx, out);
cleanup:
#ifndef FAT5_NO_CUDA
    fat5__dev_graph_destroy(ctx, s.graph);
#endif
    if (s.base) s.be->free(ctx, s.base);
    fat5__free(ctx, h);
    fat5__free(ctx, hs);
    fat5_decoder_destroy(s.d);
    return st;
}
#undef FAT5__TRY

