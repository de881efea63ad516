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
    fat5__free(ctx, r->step_scores);
    fat5__free(ctx, r->step_logits);
    fat5__free(ctx, r->beam_indices);
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
    int beam, V, Lh, K, G;              // K: the beams of a unit (an input, or a group of G); G: groups
    int64_t R, N;                       // rows and inputs
    int64_t P, max_new;                 // the decoder prompt's length; tokens generated at most
    int64_t n_seq_tok, n_enc_tok;       // the option sequences' and the inputs' tokens
    fat5__addr base;
    fat5__addr hist, lens, done, score; // [R, Lh], [R], [max(R, N)], [R]
    fat5__addr bscore, fin_score, fin_tok, fin_len, fin_flag, unsat, src, scratch;
    fat5__gen_opts o;                   // the options the ops read (their lists live after `scratch`)
    fat5__addr raw;                     // output_logits: the step's logits before the processors [R, V]
    // the host side of a step (outputs, streaming, stop strings): histories hh [R, Lh] of lengths hl
    // [R], the step's tokens htok [R] and their sequences hseq [R], a [R, V] staging hx
    int32_t *hh, *hl, *htok;
    int64_t *hseq;
    float *hx;
    int64_t cap_steps;                  // steps out->step_scores / step_logits hold
    // group beam search's beam_indices (fat5__gen_group_bidx): per step t and row r, the row whose
    // index history row r's extends (gb_par) and the index it appends (gb_val), [max_new, R] each
    int32_t *gb_par, *gb_val;
    fat5__graph graph;                  // the recorded step (GPU), or none
} fat5__gen;

// Constrained beam search (gen_constrained.c): runs every step from the state fat5_generate set up
// and leaves each input's best hypotheses in fin_tok / fin_len / fin_score (and their beam indices
// in o.fin_bidx), the steps' scores and logits in out; *steps: the steps run.
static fat5_status fat5__gen_constrained(fat5__gen *s, fat5_generate_result *out, int64_t *steps);

// One decoding step for the first n entries of d->tok / d->rows: the decoder, the processors and
// the strategy. Enqueues work only (no host synchronisation or copy), so it can be captured.
static fat5_status fat5__gen_step(fat5__gen *s, int64_t n) {
    const fat5__backend *be = s->be;
    fat5_decoder *d = s->d;
    fat5_status st;
    FAT5__TRY(fat5__decoder_step_dev(d, n));
    if (s->raw) FAT5__TRY(be->copy(s->ctx, s->raw, d->logits, (size_t)(n * s->V) * 4));
    if (s->G > 1) {   // group beam search: each group after the earlier ones (their tokens make its diversity penalty)
        int grp;
        for (grp = 0; grp < s->G; grp++) {
            s->o.group = grp;
            FAT5__TRY(be->gen_process(s->ctx, d->logits, s->hist, s->lens, d->rows, n, s->V, s->Lh, &s->o));
            FAT5__TRY(be->gen_beam(s->ctx, d->logits, d->tok, s->src, s->hist, s->lens, s->bscore, s->fin_score,
                                   s->fin_tok, s->fin_len, s->fin_flag, s->unsat, s->done, d->rows, s->scratch, n, s->V,
                                   s->Lh, &s->o));
        }
        s->o.group = 0;
        return fat5__decoder_reorder_dev(d, s->src);
    }
    FAT5__TRY(be->gen_process(s->ctx, d->logits, s->hist, s->lens, d->rows, n, s->V, s->Lh, &s->o));
    if (!s->beam)
        return be->gen_select(s->ctx, d->logits, d->tok, s->hist, s->lens, s->done, s->score, d->rows, n, s->V, s->Lh,
                              &s->o);
    FAT5__TRY(be->gen_beam(s->ctx, d->logits, d->tok, s->src, s->hist, s->lens, s->bscore, s->fin_score, s->fin_tok,
                           s->fin_len, s->fin_flag, s->unsat, s->done, d->rows, s->scratch, n, s->V, s->Lh, &s->o));
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
    FAT5__GWS(unsat, N * (size_t)s->G);
    FAT5__GWS(src, R);
    FAT5__GWS(scratch, R * Lh);
    // the options' lists (fat5__gen_opts)
    FAT5__GWS(o.eos, s->o.n_eos);
    FAT5__GWS(o.forced_eos, s->o.n_forced_eos);
    FAT5__GWS(o.suppress, s->o.n_suppress);
    FAT5__GWS(o.begin_suppress, s->o.n_begin_suppress);
    FAT5__GWS(o.seq_ids, s->n_seq_tok);
    FAT5__GWS(o.seq_cu, s->o.n_seq + 1);
    FAT5__GWS(o.seq_bias, s->o.n_seq);
    FAT5__GWS(o.enc_tok, s->n_enc_tok);
    FAT5__GWS(o.enc_cu, N + 1);
    if (s->g->output_logits) FAT5__GWS(raw, R * (size_t)s->V);
    if (s->g->output_scores && s->beam) {   // beam_indices
        FAT5__GWS(o.bidx, R * (size_t)(s->Lh - s->P));
        FAT5__GWS(o.fin_bidx, R * (size_t)(s->Lh - s->P));
    }
#undef FAT5__GWS
    *total = off;
    return ok;
}

// The decoder prompt's length (decoder_input_ids' rows, else the start token) and the tokens to
// generate at most (max_length, when set, counts the prompt as Hugging Face counts it).
static void fat5__gen_lengths(const fat5_generate_config *g, int64_t *P, int64_t *max_new) {
    *P = g->decoder_input_ids.n > 0 ? g->decoder_input_ids.cu[1] : 1;
    *max_new = g->max_length > 0 ? g->max_length - *P : g->max_new_tokens;
}

// The stop tokens: eos_token_ids when given, else eos_token_id (none when -1)
static fat5_token_list fat5__gen_eos(const fat5_generate_config *g, const int32_t *one) {
    fat5_token_list l;
    if (g->eos_token_ids.n > 0) return g->eos_token_ids;
    l.ids = one, l.n = g->eos_token_id >= 0;
    return l;
}

static fat5_status fat5__gen_list_in_vocab(fat5_ctx *ctx, const char *name, const int32_t *ids, int64_t n, int64_t V) {
    int64_t i;
    for (i = 0; i < n; i++)
        if (ids[i] >= V)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_generate: %s holds %d, outside [0, vocab_size %lld)", name,
                             (int)ids[i], (long long)V);
    return FAT5_OK;
}

// Checks the request against the model; messages name the option.
static fat5_status fat5__gen_check_request(fat5_model *m, const int32_t *tokens, const int32_t *cu, int64_t n_inputs,
                                           const fat5_generate_config *g) {
    fat5_ctx *ctx = m->ctx;
    int64_t V = m->cfg.vocab_size, rows, P, max_new, n_eos;
    int32_t one = (int32_t)g->eos_token_id;
    fat5_status st;
    if ((st = fat5__gen_check(ctx, "fat5_generate", g))) return st;
    if ((st = fat5__check_enc_input(m, "fat5_generate", tokens, cu, n_inputs, INT32_MAX, &m->attn))) return st;
    if (g->eos_token_id >= V || g->pad_token_id >= V || g->decoder_start_token_id >= V || g->forced_bos_token_id >= V)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: %s = %lld is outside [0, vocab_size %lld)",
                         g->eos_token_id >= V ? "eos_token_id" : g->pad_token_id >= V ? "pad_token_id"
                         : g->decoder_start_token_id >= V ? "decoder_start_token_id" : "forced_bos_token_id",
                         (long long)(g->eos_token_id >= V ? g->eos_token_id
                                     : g->pad_token_id >= V ? g->pad_token_id
                                     : g->decoder_start_token_id >= V ? g->decoder_start_token_id
                                     : g->forced_bos_token_id),
                         (long long)V);
    if ((st = fat5__gen_list_in_vocab(ctx, "eos_token_id", g->eos_token_ids.ids, g->eos_token_ids.n, V)) ||
        (st = fat5__gen_list_in_vocab(ctx, "forced_eos_token_id", g->forced_eos_token_id.ids, g->forced_eos_token_id.n,
                                      V)) ||
        (st = fat5__gen_list_in_vocab(ctx, "suppress_tokens", g->suppress_tokens.ids, g->suppress_tokens.n, V)) ||
        (st = fat5__gen_list_in_vocab(ctx, "begin_suppress_tokens", g->begin_suppress_tokens.ids,
                                      g->begin_suppress_tokens.n, V)) ||
        (g->bad_words_ids.n && (st = fat5__gen_list_in_vocab(ctx, "bad_words_ids", g->bad_words_ids.ids,
                                                             g->bad_words_ids.cu[g->bad_words_ids.n], V))) ||
        (g->sequence_bias.n && (st = fat5__gen_list_in_vocab(ctx, "sequence_bias", g->sequence_bias.ids,
                                                             g->sequence_bias.cu[g->sequence_bias.n], V))) ||
        (g->decoder_input_ids.n && (st = fat5__gen_list_in_vocab(ctx, "decoder_input_ids", g->decoder_input_ids.ids,
                                                                 g->decoder_input_ids.cu[g->decoder_input_ids.n], V))) ||
        (g->force_words_ids.n && (st = fat5__gen_list_in_vocab(ctx, "force_words_ids", g->force_words_ids.ids,
                                                               g->force_words_ids.cu[g->force_words_ids.n], V))))
        return st;
    if (g->decoder_input_ids.n > 1 && g->decoder_input_ids.n != n_inputs)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: decoder_input_ids has %lld rows for %lld inputs (expected 1 or one per input)",
                         (long long)g->decoder_input_ids.n, (long long)n_inputs);
    fat5__gen_lengths(g, &P, &max_new);
    if (max_new < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: max_length = %lld leaves no token to generate after the %lld-token prompt",
                         (long long)g->max_length, (long long)P);
    n_eos = fat5__gen_eos(g, &one).n;
    if (g->num_beams > 1 &&
        (n_eos > 1 ? n_eos + 1 : 2) * (g->num_beams / g->num_beam_groups) > FAT5__BEAM_CAND_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_beams = %lld (%lld a group) with %lld stop tokens keeps %lld candidates a "
                         "step; at most %d", (long long)g->num_beams, (long long)(g->num_beams / g->num_beam_groups),
                         (long long)n_eos,
                         (long long)((n_eos > 1 ? n_eos + 1 : 2) * (g->num_beams / g->num_beam_groups)),
                         FAT5__BEAM_CAND_MAX);
    if (g->num_beams > 1 && (g->stream || g->n_stop_strings))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_generate: %s with num_beams = %lld: streaming and stop "
                         "strings run with greedy decoding and sampling", g->stream ? "stream" : "stop_strings",
                         (long long)g->num_beams);
    if (g->n_stop_strings && (!g->token_texts || g->token_texts->n < V))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_generate: stop_strings need token_texts for the %lld ids of the "
                         "vocabulary (fat5_tokenizer_token_texts), got %s", (long long)V,
                         g->token_texts ? "fewer" : "none");
    if (g->num_beams > 1 && g->num_return_sequences > g->num_beams)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_return_sequences = %lld exceeds num_beams = %lld",
                         (long long)g->num_return_sequences, (long long)g->num_beams);
    if (g->num_beams == 1 && !g->do_sample && g->num_return_sequences != 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_return_sequences = %lld with greedy decoding (only 1 is possible)",
                         (long long)g->num_return_sequences);
    rows = g->num_beams > 1 ? g->num_beams : g->num_return_sequences;
    if (n_inputs > INT32_MAX / 2 / rows || n_inputs * rows > INT32_MAX / 2 / (P + max_new + 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: %lld inputs x %lld rows x %lld positions: the output does not fit the "
                         "cache (2^30 positions)",
                         (long long)n_inputs, (long long)rows, (long long)(P + max_new));
    return FAT5_OK;
}

// A bad word that is one stop token is left out (Hugging Face's NoBadWordsLogitsProcessor)
static int fat5__gen_bad_word_kept(const fat5_token_list *eos, const int32_t *w, int64_t l) {
    return !(l == 1 && fat5__gen_in(eos->ids, (int)eos->n, w[0]));
}

// The ops' options (fat5__gen_opts) from g, and their lists in host memory (list: the staging
// buffer; its layout follows the order of fat5__gen_layout's list areas). Counts first (list NULL),
// then the values.
static void fat5__gen_fill(fat5__gen *s, const fat5_generate_config *g, const int32_t *enc_tok, const int32_t *enc_cu,
                           int32_t *list, float *bias) {
    fat5__gen_opts *o = &s->o;
    int32_t one = (int32_t)g->eos_token_id;
    fat5_token_list eos = fat5__gen_eos(g, &one);
    int64_t k, q = 0, nq = 0, i;
    o->n_eos = (int)eos.n;
    o->n_forced_eos = (int)g->forced_eos_token_id.n;
    o->n_suppress = (int)g->suppress_tokens.n;
    o->n_begin_suppress = (int)g->begin_suppress_tokens.n;
    // sequence_bias, then bad words (a bad word that is one stop token is left out)
    o->n_seq_bias = (int)g->sequence_bias.n;
    o->n_seq = o->n_seq_bias;
    s->n_seq_tok = g->sequence_bias.n ? g->sequence_bias.cu[g->sequence_bias.n] : 0;
    for (k = 0; k < g->bad_words_ids.n; k++) {
        const int32_t *w = g->bad_words_ids.ids + g->bad_words_ids.cu[k];
        int64_t l = g->bad_words_ids.cu[k + 1] - g->bad_words_ids.cu[k];
        if (fat5__gen_bad_word_kept(&eos, w, l)) o->n_seq++, s->n_seq_tok += l;
    }
    s->n_enc_tok = enc_cu[s->N];
    if (list) {
        int32_t *cu;
        memcpy(list + q, eos.ids, (size_t)eos.n * 4), q += eos.n;
        if (g->forced_eos_token_id.n) memcpy(list + q, g->forced_eos_token_id.ids, (size_t)o->n_forced_eos * 4);
        q += o->n_forced_eos;
        if (g->suppress_tokens.n) memcpy(list + q, g->suppress_tokens.ids, (size_t)o->n_suppress * 4);
        q += o->n_suppress;
        if (g->begin_suppress_tokens.n) memcpy(list + q, g->begin_suppress_tokens.ids, (size_t)o->n_begin_suppress * 4);
        q += o->n_begin_suppress;
        cu = list + q + s->n_seq_tok;
        cu[0] = 0;
        for (k = 0; k < g->sequence_bias.n; k++) {
            int32_t l = g->sequence_bias.cu[k + 1] - g->sequence_bias.cu[k];
            memcpy(list + q + cu[nq], g->sequence_bias.ids + g->sequence_bias.cu[k], (size_t)l * 4);
            cu[nq + 1] = cu[nq] + l;
            bias[nq] = g->sequence_bias_values[k];
            nq++;
        }
        for (k = 0; k < g->bad_words_ids.n; k++) {
            const int32_t *w = g->bad_words_ids.ids + g->bad_words_ids.cu[k];
            int64_t l = g->bad_words_ids.cu[k + 1] - g->bad_words_ids.cu[k];
            if (!fat5__gen_bad_word_kept(&eos, w, l)) continue;
            memcpy(list + q + cu[nq], w, (size_t)l * 4);
            cu[nq + 1] = cu[nq] + (int32_t)l;
            bias[nq] = -INFINITY;
            nq++;
        }
        q += s->n_seq_tok + o->n_seq + 1;
        memcpy(list + q, enc_tok, (size_t)s->n_enc_tok * 4), q += s->n_enc_tok;
        memcpy(list + q, enc_cu, (size_t)(s->N + 1) * 4);
    }
    o->P = (int)s->P;
    o->rows_per_input = s->beam ? (int)g->num_beams : (int)g->num_return_sequences;
    for (i = 0, o->enc_max = 0; i < s->N; i++)
        if (enc_cu[i + 1] - enc_cu[i] > o->enc_max) o->enc_max = enc_cu[i + 1] - enc_cu[i];
    o->pad = (int)g->pad_token_id;
    o->max_new = (int)s->max_new;
    o->min_new = (int)g->min_new_tokens;
    o->min_len = (int)g->min_length;
    o->ngram = (int)g->no_repeat_ngram_size;
    o->enc_ngram = (int)g->encoder_no_repeat_ngram_size;
    o->rep = (float)g->repetition_penalty;
    o->enc_rep = (float)g->encoder_repetition_penalty;
    o->forced_bos = (int)g->forced_bos_token_id;
    o->begin_index = (int)s->P + (s->P == 1 && g->forced_bos_token_id >= 0);
    o->decay_start = g->exponential_decay_start >= 0 ? (int)(g->exponential_decay_start + s->P) : -1;
    o->decay_factor = (float)g->exponential_decay_factor;
    o->remove_invalid = g->remove_invalid_values != 0;
    o->log_softmax = s->beam;
    o->renormalize = g->renormalize_logits != 0;
    o->do_sample = g->do_sample != 0;
    o->temperature = (float)g->temperature;
    o->top_k = (int)g->top_k;
    o->top_p = (float)g->top_p;
    o->min_p = (float)g->min_p;
    o->typical_p = (float)g->typical_p;
    o->epsilon = (float)g->epsilon_cutoff;
    o->eta = (float)g->eta_cutoff;
    o->min_keep = s->beam ? (o->n_eos > 1 ? o->n_eos + 1 : 2) : 1;
    o->K = s->K;
    o->G = s->G, o->group = 0;
    o->diversity = (float)g->diversity_penalty;
    o->length_penalty = (float)g->length_penalty;
    o->early_stopping = g->early_stopping;
    o->seed = (unsigned long long)g->seed;
}

// Hugging Face's stop-string rule on a decoder input h [L] (the prompt and the generated tokens)
// whose last token just came: some stop string ends inside the last token's text (at any of its
// positions), and what of it lies before the token's start ends the texts before it.
static int fat5__gen_stop_match(const fat5_generate_config *g, const int32_t *h, int64_t L) {
    const fat5_token_texts *tt = g->token_texts;
    const char *last = tt->bytes + tt->offsets[h[L - 1]];
    int64_t lf = tt->offsets[h[L - 1] + 1] - tt->offsets[h[L - 1]], k, e;
    for (k = 0; k < g->n_stop_strings; k++) {
        const char *stop = g->stop_strings[k];
        int64_t ls = (int64_t)strlen(stop);
        for (e = 1; e <= lf; e++) {   // the stop string ends after byte e - 1 of the last token
            int64_t ov = e < ls ? e : ls, need = ls - ov, j = L - 2;
            if (memcmp(last + e - ov, stop + ls - ov, (size_t)ov)) continue;
            if (need == 0) return 1;
            while (need > 0 && j >= 0) {   // the rest, stop[0 .. need), must end the earlier texts
                int64_t lt = tt->offsets[h[j] + 1] - tt->offsets[h[j]], c = lt < need ? lt : need;
                if (memcmp(stop + need - c, tt->bytes + tt->offsets[h[j]] + lt - c, (size_t)c)) break;
                need -= c, j--;
            }
            if (need == 0) return 1;
        }
    }
    return 0;
}

// Appends one step of [n, V] values (src, entries in ent_row's order) to *dst [steps, R, V]: rows
// that did not run hold NaN.
static fat5_status fat5__gen_keep_step(fat5__gen *s, float **dst, fat5__addr src, int64_t n, const int32_t *ent_row,
                                       int64_t step) {
    int64_t V = s->V, R = s->R, e, v;
    float *row0;
    fat5_status st;
    if (step >= s->cap_steps) return FAT5_ERR_STATE;
    if ((st = s->be->download(s->ctx, s->hx, src, (size_t)(n * V) * 4)) || (st = s->be->sync(s->ctx))) return st;
    row0 = *dst + step * R * V;
    for (e = 0; e < R * V; e++) row0[e] = NAN;
    for (e = 0; e < n; e++)
        for (v = 0; v < V; v++) row0[(int64_t)ent_row[e] * V + v] = s->hx[e * V + v];
    return FAT5_OK;
}

// Makes room in out->step_scores / step_logits (those asked for) for step `step`, doubling
static fat5_status fat5__gen_out_room(fat5__gen *s, fat5_generate_result *out, const fat5_generate_config *g,
                                      int64_t step) {
    fat5_ctx *ctx = s->ctx;
    if (step >= s->cap_steps && (g->output_scores || g->output_logits)) {   // room for more steps
        int64_t cap = s->cap_steps ? 2 * s->cap_steps : 16;
        size_t bytes;
        cap = cap < s->max_new ? cap : s->max_new;
        bytes = (size_t)cap * (size_t)s->R * (size_t)s->V * sizeof(float);
        if (g->output_scores) {
            float *p = FAT5__CAST(float *, fat5__realloc(ctx, out->step_scores, bytes));
            if (!p) goto oom;
            out->step_scores = p;
        }
        if (g->output_logits) {
            float *p = FAT5__CAST(float *, fat5__realloc(ctx, out->step_logits, bytes));
            if (!p) goto oom;
            out->step_logits = p;
        }
        s->cap_steps = cap;
    }
    return FAT5_OK;
oom:
    return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory for the outputs of %lld steps x %lld "
                     "rows x %d", (long long)step + 1, (long long)s->R, s->V);
}

// Group beam search's beam indices, step `step` (output_scores): records, from the rows the step's
// beams came from (src, downloaded), Hugging Face 4's bookkeeping of that step (its
// _group_beam_search): a running row r of input b, group g (unit i = b G + g) appends the index of
// its source beam numbered within the group, b K + beam, to that beam's history; a row of a unit
// that no longer runs (finished earlier) appends 0 to the history of row g K (input 0's first beam
// of the group), as Hugging Face pads a finished group with index 0.
static fat5_status fat5__gen_group_bidx_step(fat5__gen *s, int64_t n, const int32_t *ent_row, int64_t step) {
    const int64_t R = s->R, K = s->K, G = s->G;
    int32_t *par = s->gb_par + step * R, *val = s->gb_val + step * R, *src = s->htok;   // htok: free here
    fat5_status st;
    int64_t e, r;
    if ((st = s->be->download(s->ctx, src, s->src, (size_t)R * 4)) || (st = s->be->sync(s->ctx))) return st;
    for (r = 0; r < R; r++) par[r] = (int32_t)(((r / K) % G) * K), val[r] = 0;   // not run: padded
    for (e = 0; e < n; e++) {
        int64_t row = ent_row[e], i = row / K;
        par[row] = src[row];
        val[row] = (int32_t)((i / G) * K + src[row] - i * K);
    }
    return FAT5_OK;
}

// dst [t + 1] = the index history of row `row` after step t (fat5__gen_group_bidx_step's records)
static void fat5__gen_group_walk(const fat5__gen *s, int64_t t, int64_t row, int32_t *dst) {
    for (; t >= 0; t--) {
        dst[t] = s->gb_val[t * s->R + row];
        row = s->gb_par[t * s->R + row];
    }
}

// The beam indices transformers 4.56 returns for group beam search, for the finished slot `slot`
// (unit i = slot / K) of len tokens: its tokens tok [len], fb the slot's own beam rows per token
// (gen_beam's fin_bidx), lens / toks / stride the unit's other slots (fin_len, fin_tok). Indices
// number the beams within their group (b K + beam for input b), and follow transformers' reads:
//  - a hypothesis that ended in a stop token at step t in group 0: its beam's history, then the beam;
//  - the same in a later group: transformers reads the history at the hypothesis's row of group 0's
//    list, already extended by step t (row b K + beam of group 0, t + 1 indices);
//  - a hypothesis that was still running at the length limit (non-stop last token), the s-th such
//    running beam of unit i: transformers reads entry i K + s of the groups' lists laid end to end
//    (group-major), i.e. group q / (N K), input (q % (N K)) / K, beam q % K of it.
// dst [len] gets them.
static void fat5__gen_group_bidx(const fat5__gen *s, const fat5_token_list *eos, int64_t slot, int64_t len,
                                 const int32_t *tok, const int32_t *fb, const int32_t *lens, const int32_t *toks,
                                 int64_t stride, int32_t *dst) {
    const int64_t K = s->K, G = s->G, N = s->N, i = slot / K, b = i / G, g = i % G, t = len - 1;
    const int64_t nidx = fb[t] - i * K;
    int64_t k, run = 0, q, row;
    if (len <= 0) return;
    if (fat5__gen_in(eos->ids, (int)eos->n, tok[t])) {   // ended by a stop token
        if (g == 0) {
            if (t > 0) fat5__gen_group_walk(s, t - 1, i * K + nidx, dst);
            dst[t] = (int32_t)(b * K + nidx);
        } else {
            fat5__gen_group_walk(s, t, b * G * K + nidx, dst);
        }
        return;
    }
    for (k = i * K; k < slot; k++)   // the running beams before it at the limit (their order is kept)
        run += lens[k] > 0 && !fat5__gen_in(eos->ids, (int)eos->n, toks[k * stride + lens[k] - 1]);
    q = i * K + run;
    row = (((q % (N * K)) / K) * G + q / (N * K)) * K + q % K;
    fat5__gen_group_walk(s, t, row, dst);
}

// The host's part of a step when outputs, streaming or stop strings are asked for: the step's
// scores and logits into out, the chosen tokens appended to the host histories, the stream callback
// (a non-zero answer sets *stop_all), and the stop strings (a matching row's flag set, so that the
// loop drops it as a finished one).
static fat5_status fat5__gen_host_step(fat5__gen *s, fat5_generate_result *out, const fat5_generate_config *g,
                                       int64_t n, const int32_t *ent_row, int64_t step, int32_t *flags, int *stop_all) {
    fat5_ctx *ctx = s->ctx;
    fat5_status st;
    int64_t e;
    if ((st = fat5__gen_out_room(s, out, g, step))) return st;
    if (s->gb_par && (st = fat5__gen_group_bidx_step(s, n, ent_row, step))) return st;
    if (g->output_scores && (st = fat5__gen_keep_step(s, &out->step_scores, s->d->logits, n, ent_row, step))) return st;
    if (g->output_logits && (st = fat5__gen_keep_step(s, &out->step_logits, s->raw, n, ent_row, step))) return st;
    if (!g->stream && !g->n_stop_strings) return FAT5_OK;
    if ((st = s->be->download(ctx, s->htok, s->d->tok, (size_t)n * 4)) || (st = s->be->sync(ctx))) return st;
    for (e = 0; e < n; e++) {
        int64_t r = ent_row[e];
        s->hh[r * s->Lh + s->hl[r]] = s->htok[e];
        s->hl[r]++;
        s->hseq[e] = r;   // greedy and sampling: row r is output sequence r
        if (g->n_stop_strings && !flags[r] && fat5__gen_stop_match(g, s->hh + r * s->Lh, s->hl[r])) flags[r] = 1;
    }
    if (g->stream && g->stream(g->stream_user, s->hseq, s->htok, n)) *stop_all = 1;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_generate(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens, int64_t n_inputs,
                                   const fat5_generate_config *g, fat5_generate_result *out) {
    fat5__gen s;
    fat5_ctx *ctx;
    fat5_status st;
    int32_t *h = NULL;            // host staging: [R * Lh] histories, then the result
    int32_t *ent_tok, *ent_row, *flags, *list = NULL;
    float *hs = NULL, *bias = NULL;
    size_t total = 0, n_list;
    int64_t n, r, e, steps = 0, R, N, Lh, P, rpi, total_tok = 0, q, t;
    int use_graph, host_step = 0;
    double t0 = fat5__now_s();
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    if (!g || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_generate: %s is NULL", g ? "out" : "config");
    memset(out, 0, sizeof *out);
    if ((st = fat5__gen_check_request(m, tokens, cu_seqlens, n_inputs, g))) return st;
    memset(&s, 0, sizeof s);
    s.m = m, s.ctx = ctx, s.be = m->be, s.g = g;
    s.beam = g->num_beams > 1;
    s.G = s.beam ? (int)g->num_beam_groups : 1;
    s.K = (int)(g->num_beams / s.G);   // a unit's beams: the input's, or one group's
    rpi = s.beam ? g->num_beams : g->num_return_sequences;
    s.N = N = n_inputs;
    s.R = R = n_inputs * rpi;
    s.V = (int)m->cfg.vocab_size;
    fat5__gen_lengths(g, &s.P, &s.max_new);
    P = s.P;
    s.Lh = (int)(P + s.max_new);
    Lh = s.Lh;
    fat5__gen_fill(&s, g, tokens, cu_seqlens, NULL, NULL);
    // the decoder: the prompt and every generated token but the last are fed
    if ((st = fat5_decoder_create(m, R, cu_seqlens[n_inputs], P - 1 + s.max_new, &s.d))) return st;
    if ((st = fat5_decoder_start(s.d, tokens, cu_seqlens, n_inputs, rpi))) goto fail;
    if (!fat5__gen_layout(&s, 0, &total)) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: the buffer size overflows");
        goto fail;
    }
    if ((st = s.be->alloc(ctx, total, &s.base))) goto fail;
    fat5__gen_layout(&s, s.base, &total);
    n_list = (size_t)(s.o.n_eos + s.o.n_forced_eos + s.o.n_suppress + s.o.n_begin_suppress + s.n_seq_tok + s.o.n_seq +
                      1 + s.n_enc_tok + N + 1);
    h = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(R * Lh + 3 * R + N + 1) * sizeof(int32_t)));
    hs = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)R * sizeof(float)));
    list = FAT5__CAST(int32_t *, fat5__malloc(ctx, n_list * sizeof(int32_t)));
    bias = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)(s.o.n_seq + 1) * sizeof(float)));
    if (!h || !hs || !list || !bias) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory");
        goto fail;
    }
    // the options' lists, area by area (fat5__gen_layout's order)
    fat5__gen_fill(&s, g, tokens, cu_seqlens, list, bias);
    {
        const fat5__addr dst[] = {s.o.eos, s.o.forced_eos, s.o.suppress, s.o.begin_suppress, s.o.seq_ids,
                                  s.o.seq_cu, s.o.enc_tok, s.o.enc_cu};
        const int64_t cnt[] = {s.o.n_eos, s.o.n_forced_eos, s.o.n_suppress, s.o.n_begin_suppress, s.n_seq_tok,
                               s.o.n_seq + 1, s.n_enc_tok, N + 1};
        int a;
        for (a = 0, q = 0; a < 8; q += cnt[a], a++)
            if (cnt[a] && (st = s.be->upload(ctx, dst[a], list + q, (size_t)cnt[a] * 4))) goto fail;
        if (s.o.n_seq && (st = s.be->upload(ctx, s.o.seq_bias, bias, (size_t)s.o.n_seq * 4))) goto fail;
    }
    ent_tok = h + R * Lh, ent_row = ent_tok + R, flags = ent_row + R;
    // initial state: every row holds its prompt; beams 1 .. K-1 start 1e9 down (Hugging Face),
    // finished slots empty at -1e9, every input may still improve
    for (r = 0; r < R; r++)
        for (t = 0; t < Lh; t++) {
            const fat5_token_seqs *di = &g->decoder_input_ids;
            int64_t row = di->n > 1 ? r / rpi : 0;
            h[r * Lh + t] = t >= P ? (int32_t)g->pad_token_id
                            : di->n ? di->ids[di->cu[row] + t] : (int32_t)g->decoder_start_token_id;
        }
    if ((st = s.be->upload(ctx, s.hist, h, (size_t)(R * Lh) * 4))) goto fail;
    host_step = g->output_scores || g->output_logits || g->stream || g->n_stop_strings;
    if (host_step) {
        s.hh = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(R * Lh + 2 * R) * sizeof(int32_t)));
        s.hseq = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)R * sizeof(int64_t)));
        s.hx = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)R * (size_t)s.V * sizeof(float)));
        if (!s.hh || !s.hseq || !s.hx) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory");
            goto fail;
        }
        s.hl = s.hh + R * Lh, s.htok = s.hl + R;
        if (s.G > 1 && s.o.bidx) {   // group beam search's beam indices: the steps' records
            size_t cells = (size_t)s.max_new * (size_t)R;
            s.gb_par = FAT5__CAST(int32_t *, fat5__malloc(ctx, cells * 2 * sizeof(int32_t)));
            if (!s.gb_par) {
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory for the beam indices");
                goto fail;
            }
            s.gb_val = s.gb_par + cells;
        }
        memcpy(s.hh, h, (size_t)(R * Lh) * sizeof(int32_t));
        for (r = 0; r < R; r++) s.hl[r] = (int32_t)P;
        out->n_rows = R, out->vocab_size = s.V;
    }
    for (r = 0; r < R; r++) hs[r] = s.beam && r % s.K ? -1.0e9f : 0.0f;
    if ((st = s.be->upload(ctx, s.bscore, hs, (size_t)R * 4))) goto fail;
    for (r = 0; r < R; r++) hs[r] = -1.0e9f;
    if ((st = s.be->upload(ctx, s.fin_score, hs, (size_t)R * 4))) goto fail;
    for (r = 0; r < R; r++) h[R * Lh + r] = (int32_t)r;
    if ((st = s.be->upload(ctx, s.src, h + R * Lh, (size_t)R * 4))) goto fail;
    for (r = 0; r < N * s.G; r++) flags[r] = 1;
    if ((st = s.be->upload(ctx, s.unsat, flags, (size_t)(N * s.G) * 4))) goto fail;
    for (r = 0; r < R; r++) ent_row[r] = (int32_t)r;
    if ((st = s.be->upload(ctx, s.d->rows, ent_row, (size_t)R * 4))) goto fail;
    // the prompt but its last token goes through the decoder first (its logits are not used)
    for (t = 0; t + 1 < P; t++) {
        for (r = 0; r < R; r++) ent_tok[r] = h[r * Lh + t];
        if ((st = s.be->upload(ctx, s.d->tok, ent_tok, (size_t)R * 4)) || (st = fat5__decoder_step_dev(s.d, R))) goto fail;
    }
    for (r = 0; r < R; r++) ent_tok[r] = h[r * Lh + P - 1];
    if ((st = s.be->upload(ctx, s.d->tok, ent_tok, (size_t)R * 4)) || (st = s.be->sync(ctx))) goto fail;
    use_graph = g->use_graph;   // a backend that records nothing answers FAT5_ERR_UNSUPPORTED
    n = R;
    if (g->force_words_ids.n) {   // constrained beam search: host-driven steps (gen_constrained.c)
        if ((st = fat5__gen_constrained(&s, out, &steps))) goto fail;
        n = 0;
    }
    while (n > 0 && steps < s.max_new) {
        int64_t kept = 0, unit_n = s.beam ? N * s.G : R;
        if (g->max_time > 0 && steps > 0 && fat5__now_s() - t0 >= g->max_time) break;   // Hugging Face's MaxTimeCriteria
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
        if (host_step) {   // outputs, streaming, stop strings: this step's tokens (and scores) on the host
            int stop_all = 0;
            if ((st = fat5__gen_host_step(&s, out, g, n, ent_row, steps - 1, flags, &stop_all))) goto fail;
            if (stop_all) break;
        }
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
        int64_t stride = s.beam ? Lh - P : Lh, first = s.beam ? 0 : P;
        if ((st = s.be->download(ctx, h, toks, (size_t)(R * stride) * 4)) ||
            (st = s.be->download(ctx, ent_tok, lens, (size_t)R * 4)) ||
            (st = s.be->download(ctx, hs, sc, (size_t)R * 4)) || (st = s.be->sync(ctx)))
            goto fail;
        // the row of output o (in ent_row, free now): input i's k-th row; with groups, the k-th best
        // of its groups' finished hypotheses (Hugging Face's merge: a tie goes to the later group)
        for (i = 0; i < n_inputs; i++) {
            int ord[FAT5__BEAM_MAX], a, b;   // (groups: rpi = num_beams <= FAT5__BEAM_MAX)
            for (a = 0; s.G > 1 && a < (int)rpi; a++) ord[a] = a;
            if (s.G > 1)
                for (a = 1; a < (int)rpi; a++)
                    for (b = a; b > 0; b--) {
                        float x = hs[i * rpi + ord[b]], y = hs[i * rpi + ord[b - 1]];
                        if (!(x > y || (x == y && ord[b] > ord[b - 1]))) break;
                        k = ord[b], ord[b] = ord[b - 1], ord[b - 1] = (int)k;
                    }
            for (k = 0; k < g->num_return_sequences; k++)
                ent_row[i * g->num_return_sequences + k] = (int32_t)(i * rpi + (s.G > 1 ? ord[k] : k));
        }
        out->cu_seqlens = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)nseq + 1, sizeof(int32_t)));
        out->scores = FAT5__CAST(float *, fat5__calloc(ctx, (size_t)nseq, sizeof(float)));
        for (k = 0; k < nseq; k++) total_tok += ent_tok[ent_row[k]];
        out->tokens = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)(total_tok > 0 ? total_tok : 1), sizeof(int32_t)));
        if (!out->cu_seqlens || !out->scores || !out->tokens) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory for the result");
            goto fail;
        }
        for (i = 0, q = 0; i < n_inputs; i++)
            for (k = 0; k < g->num_return_sequences; k++) {
                int64_t o = i * g->num_return_sequences + k, row = ent_row[o], j;
                for (j = 0; j < ent_tok[row]; j++) out->tokens[q++] = h[row * stride + first + j];
                out->cu_seqlens[o + 1] = (int32_t)q;
                out->scores[o] = hs[row];
            }
        if (s.o.bidx) {   // beam_indices, packed as the tokens (fb: the slots' beam rows, [R, stride])
            int32_t one = (int32_t)g->eos_token_id, *fb;
            fat5_token_list eos = fat5__gen_eos(g, &one);
            out->beam_indices = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)(total_tok > 0 ? total_tok : 1),
                                                                   sizeof(int32_t)));
            fb = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(R * stride) * sizeof(int32_t)));
            if (!out->beam_indices || !fb) {
                fat5__free(ctx, fb);
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory for the beam indices");
                goto fail;
            }
            if ((st = s.be->download(ctx, fb, s.o.fin_bidx, (size_t)(R * stride) * 4)) || (st = s.be->sync(ctx))) {
                fat5__free(ctx, fb);
                goto fail;
            }
            for (k = 0; k < nseq; k++) {
                int64_t row = ent_row[k], j, at = out->cu_seqlens[k];
                if (s.G > 1)   // transformers 4's numbering within the group, and its reads
                    fat5__gen_group_bidx(&s, &eos, row, ent_tok[row], h + row * stride, fb + row * stride,
                                         ent_tok, h, stride,
                                         out->beam_indices + at);
                else
                    for (j = 0; j < ent_tok[row]; j++) out->beam_indices[at + j] = fb[row * stride + j];
            }
            fat5__free(ctx, fb);
        }
        out->n_seq = nseq;
        out->steps = steps;
        out->cache_bytes = (size_t)m->cfg.num_decoder_layers * 2 *
                           ((size_t)R * (size_t)(P - 1 + s.max_new) + (size_t)cu_seqlens[n_inputs]) *
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
    fat5__free(ctx, list);
    fat5__free(ctx, bias);
    fat5__free(ctx, s.hh);
    fat5__free(ctx, s.hseq);
    fat5__free(ctx, s.hx);
    fat5__free(ctx, s.gb_par);
    fat5_decoder_destroy(s.d);
    return st;
}
#undef FAT5__TRY

