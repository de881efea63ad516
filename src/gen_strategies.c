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

FAT5_API fat5_generate_config fat5_generate_config_from_model(const fat5_model *m) {
    if (!m) return fat5_generate_config_default();
    return m->has_gen ? m->gen : fat5__generate_config_for(&m->cfg);   // gen: its generation_config.json
}

FAT5_API void fat5_generate_result_destroy(fat5_ctx *ctx, fat5_generate_result *r) {
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
    fat5__graph graph;                  // the recorded step (GPU), or none
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
static fat5_status fat5__gen_step_rec(void *arg, int64_t n) { return fat5__gen_step((fat5__gen *)arg, n); }
static fat5_status fat5__gen_graph_step(fat5__gen *s, int64_t n) {
    return fat5__graph_step(s->be, s->ctx, &s->graph, n, fat5__gen_step_rec, s, &s->d->pos);
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
    use_graph = g->use_graph;   // a backend that records nothing answers FAT5_ERR_UNSUPPORTED
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
    fat5_generate_result_destroy(ctx, out);
cleanup:
    s.be->graph_destroy(ctx, s.graph.exec);
    if (s.base) s.be->free(ctx, s.base);
    fat5__free(ctx, h);
    fat5__free(ctx, hs);
    fat5_decoder_destroy(s.d);
    return st;
}
#undef FAT5__TRY

