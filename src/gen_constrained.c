// =============================================================================================
// ==[7.3] generate: constrained beam search ==
// force_words_ids: beam search whose outputs contain given phrases, as transformers 4's constrained
// beam search runs it (its ConstrainedBeamSearchScorer with PhrasalConstraint / DisjunctiveConstraint).
// Each step runs on the backend as beam search's does (the decoder step, gen_process with
// log_softmax); the processed scores [n, V] then come to the host, where the scorer picks each
// input's next beams, and the histories, the next tokens and the cache reorder go back.
//
// Per input and step (t tokens generated, K beams, acc = beam score + processed score):
//  1. the C = max(2, 1 + stop tokens) K largest acc over K x V (first flat index on ties);
//  2. in that order: a stop token among the first K candidates ends its beam as a finished
//     hypothesis when the beam's sequence (the prompt included) meets every constraint; other stop
//     tokens are skipped; the first K other candidates are the "top-k" beams;
//  3. banks: a sequence's progress through the constraints, bank = done constraints x M + (the
//     constraint in progress: M - its tokens left), M the longest constraint. Each running beam that
//     has not met them all also proposes its sequence plus each token that advances it (the
//     in-progress constraint's next tokens, else the first tokens of the pending ones), unless that
//     sequence is already a candidate; all candidates are sorted by bank x 100 + acc (fp32),
//     ranked within runs of one bank, and the K with the lowest rank (ties: that order) are kept;
//  4. the input is done when its K finished slots are full and none can improve
//     (transformers' BeamHypotheses: early_stopping, length_penalty on the generated length).
// At the end (max_new_tokens, all inputs done, or every row ending in a stop token) each running
// input adds its beams that meet the constraints, and all its beams when fewer than
// num_return_sequences do. An output is the hypothesis's generated tokens, then the first stop token
// when it is shorter than the length limit; it ends at its first stop token.
// Outputs as transformers 4 gives them: step_scores are the processed scores plus the beam's score
// (acc, not the processed scores alone as in beam search); step_logits the raw logits; beam_indices
// the row (input x K + beam) each token's beam came from, -1 past a hypothesis's recorded indices
// and on every token of one added only because too few beams met the constraints (transformers
// records none for those: it returns no beam_indices when the first output is one, and fails in
// finalize when a later one is).
//
// The constraint state follows transformers' ConstraintListState, quirks included: a constraint
// whose progress breaks goes back to the end of the pending list, the breaking token is not tried
// on the others, and a disjunctive constraint's progress is shared between a beam and the proposals
// made from it within one step.

// One constraint-list state: the pending constraints in order, the one in progress (-1: none) with
// the tokens matched so far (cur [depth]), the count of completed ones.
typedef struct fat5__cons_state {
    int completed, n_done, inprog, depth, n_pend;
    int32_t *pend;   // [constraints]
    int32_t *cur;    // [longest sequence]
} fat5__cons_state;

// The constraints: sequence k (force_words_ids) belongs to constraint con[k]; constraint c is
// sequences first[c] .. first[c + 1] - 1, its length len[c] (its longest sequence); M the longest.
typedef struct fat5__cons {
    const fat5_token_seqs *w;
    int32_t *first, *len;
    int nc, M, n_seq;
} fat5__cons;

// The distinct tokens that extend cur [d] within constraint c, in the order transformers' trie keeps
// them (first appearance over the constraint's sequences); returns their count.
static int fat5__cons_next(const fat5__cons *C, int c, const int32_t *cur, int d, int32_t *out) {
    int k, j, n = 0;
    for (k = C->first[c]; k < C->first[c + 1]; k++) {
        const int32_t *w = C->w->ids + C->w->cu[k];
        int len = C->w->cu[k + 1] - C->w->cu[k], dup = 0;
        if (len <= d) continue;
        for (j = 0; j < d; j++)
            if (w[j] != cur[j]) break;
        if (j < d) continue;
        for (j = 0; j < n && !dup; j++) dup = out[j] == w[d];
        if (!dup) out[n++] = w[d];
    }
    return n;
}

static int fat5__cons_in(const int32_t *l, int n, int32_t v) {
    int i;
    for (i = 0; i < n; i++)
        if (l[i] == v) return 1;
    return 0;
}

static void fat5__cons_init(const fat5__cons *C, fat5__cons_state *s) {
    int c;
    s->completed = 0, s->n_done = 0, s->inprog = -1, s->depth = 0, s->n_pend = C->nc;
    for (c = 0; c < C->nc; c++) s->pend[c] = c;
}

static void fat5__cons_copy(const fat5__cons *C, fat5__cons_state *dst, const fat5__cons_state *src) {
    dst->completed = src->completed, dst->n_done = src->n_done, dst->inprog = src->inprog;
    dst->depth = src->depth, dst->n_pend = src->n_pend;
    memcpy(dst->pend, src->pend, (size_t)C->nc * sizeof(int32_t));
    memcpy(dst->cur, src->cur, (size_t)C->M * sizeof(int32_t));
}

// The bank: completed constraints x M, plus M minus the tokens the one in progress still needs
static int fat5__cons_bank(const fat5__cons *C, const fat5__cons_state *s) {
    return s->n_done * C->M + (s->inprog >= 0 ? C->M - (C->len[s->inprog] - s->depth) : 0);
}

// ConstraintListState.add: token v steps the constraint in progress (or breaks it: back to the end
// of the pending list), else steps the first pending constraint it starts.
static void fat5__cons_add(const fat5__cons *C, fat5__cons_state *s, int32_t v, int32_t *tmp) {
    int n, i, c;
    if (s->completed) return;
    if (s->inprog >= 0) {
        c = s->inprog;
        n = fat5__cons_next(C, c, s->cur, s->depth, tmp);
        if (!fat5__cons_in(tmp, n, v)) {   // broken: pending again, from its start
            s->pend[s->n_pend++] = c;
            s->inprog = -1, s->depth = 0;
            return;
        }
        s->cur[s->depth++] = v;
        if (fat5__cons_next(C, c, s->cur, s->depth, tmp) == 0) {   // a whole sequence: completed
            s->n_done++, s->inprog = -1, s->depth = 0;
            if (s->n_pend == 0) s->completed = 1;
        }
        return;
    }
    for (i = 0; i < s->n_pend; i++) {
        c = s->pend[i];
        n = fat5__cons_next(C, c, s->cur, 0, tmp);
        if (!fat5__cons_in(tmp, n, v)) continue;
        s->cur[0] = v, s->depth = 1;
        if (fat5__cons_next(C, c, s->cur, 1, tmp) == 0) s->n_done++, s->inprog = -1, s->depth = 0;
        else s->inprog = c;
        memmove(s->pend + i, s->pend + i + 1, (size_t)(s->n_pend - i - 1) * sizeof(int32_t));
        s->n_pend--;
        if (s->n_pend == 0 && s->inprog < 0) s->completed = 1;
        return;
    }
}

// The state after the tokens seq [L] (transformers' reset: stops once every constraint is met)
static void fat5__cons_reset(const fat5__cons *C, fat5__cons_state *s, const int32_t *seq, int64_t L, int32_t *tmp) {
    int64_t i;
    fat5__cons_init(C, s);
    for (i = 0; i < L && !s->completed; i++) fat5__cons_add(C, s, seq[i], tmp);
}

// An input's finished hypotheses (transformers' BeamHypotheses): up to K, in insertion order.
typedef struct fat5__cons_hyps {
    int n;
    double worst;
    double *score;   // [K + 1]
    int32_t *len;    // [K + 1]: tokens, the prompt included
    int32_t *tok;    // [K + 1, Lh]
    int32_t *nbi;    // [K + 1]: beam indices recorded (output_scores; 0: none)
    int32_t *bi;     // [K + 1, Lh]: the beam indices, or NULL without output_scores
} fat5__cons_hyps;

// Adds seq [L] with summed log-probability sum and gen generated tokens; bi [nbi]: its beam indices
// (NULL: none recorded)
static void fat5__cons_hyp_add(fat5__cons_hyps *h, int K, int Lh, double lp, const int32_t *seq, int L, double sum,
                               int gen, const int32_t *bi, int nbi) {
    double sc = sum / pow((double)gen, lp);
    int i, lo, lo2;
    if (!(h->n < K || sc > h->worst)) return;
    h->score[h->n] = sc, h->len[h->n] = L;
    memcpy(h->tok + (int64_t)h->n * Lh, seq, (size_t)L * sizeof(int32_t));
    if (h->bi) {
        h->nbi[h->n] = bi ? nbi : 0;
        if (bi) memcpy(h->bi + (int64_t)h->n * Lh, bi, (size_t)nbi * sizeof(int32_t));
    }
    h->n++;
    if (h->n <= K) {
        h->worst = sc < h->worst ? sc : h->worst;
        return;
    }
    // one too many: drop the lowest (first on ties); the worst is the next lowest
    for (i = 1, lo = 0; i < h->n; i++)
        if (h->score[i] < h->score[lo]) lo = i;
    for (i = 0, lo2 = -1; i < h->n; i++)
        if (i != lo && (lo2 < 0 || h->score[i] < h->score[lo2])) lo2 = i;
    h->worst = h->score[lo2];
    for (i = lo; i + 1 < h->n; i++) {
        h->score[i] = h->score[i + 1], h->len[i] = h->len[i + 1];
        memcpy(h->tok + (int64_t)i * Lh, h->tok + (int64_t)(i + 1) * Lh, (size_t)h->len[i] * sizeof(int32_t));
        if (h->bi) {
            h->nbi[i] = h->nbi[i + 1];
            memcpy(h->bi + (int64_t)i * Lh, h->bi + (int64_t)(i + 1) * Lh, (size_t)h->nbi[i] * sizeof(int32_t));
        }
    }
    h->n--;
}

// BeamHypotheses.is_done: K hypotheses and none of the running beams can do better
static int fat5__cons_hyp_done(const fat5__cons_hyps *h, int K, const fat5_generate_config *g, double best, int64_t gen,
                               int64_t max_new) {
    double L;
    if (h->n < K) return 0;
    if (g->early_stopping == 1) return 1;
    L = g->early_stopping == 2 && g->length_penalty > 0.0 ? (double)max_new : (double)gen;
    return h->worst >= best / pow(L, g->length_penalty);
}

static fat5_status fat5__gen_constrained(fat5__gen *s, fat5_generate_result *out, int64_t *steps_out) {
    fat5_ctx *ctx = s->ctx;
    const fat5__backend *be = s->be;
    const fat5_generate_config *g = s->g;
    fat5_decoder *d = s->d;
    const int K = s->K, V = s->V, Lh = s->Lh, P = (int)s->P, F = Lh - (int)s->P;
    const int64_t R = s->R, N = s->N;
    const int32_t one = (int32_t)g->eos_token_id;
    const fat5_token_list eos = fat5__gen_eos(g, &one);
    const int C = (eos.n > 1 ? (int)eos.n + 1 : 2) * K;   // candidates per input
    fat5__cons cs;
    fat5__cons_state st[3];   // a top-k beam's, the proposing beam's, a proposal's
    fat5__cons_hyps *hyp = NULL;
    fat5_status ret = FAT5_OK;
    float *x = NULL, *bs, *nbs, *cval, *all_sc, *zip;
    int32_t *hh = NULL, *adv, *nh, *tok, *src, *erow, *ent_row, *ent_tok, *done, *lens, *tmp, *cidx_tok, *csrc;
    int32_t *all_tok, *all_src, *all_bank, *ord, *inc, *ord2, *fin_tok, *fin_len;
    int32_t *rb = NULL, *nrb = NULL, *fin_bi = NULL;   // output_scores: running [R, F], new [R, F], slots' [R, F]
    const int with_bi = s->o.bidx != 0;
    double *hyp_score = NULL;
    int64_t *cflat = NULL;
    void *arena = NULL;
    int64_t n = R, step, r, b, i, k, nw = g->force_words_ids.n, A;
    int stop = 0;
    double t0 = fat5__now_s();
    // the constraints
    memset(&cs, 0, sizeof cs);
    cs.w = &g->force_words_ids, cs.n_seq = (int)nw, cs.nc = g->force_words_constraint[nw - 1] + 1;
    for (k = 0; k < nw; k++) {
        int l = g->force_words_ids.cu[k + 1] - g->force_words_ids.cu[k];
        cs.M = l > cs.M ? l : cs.M;
    }
    A = (int64_t)K + (int64_t)K * nw;   // candidates of step 3: top-k plus proposals
    {
        size_t bytes = 0;
        bytes += (size_t)(2 * cs.nc + 1) * 4;                       // first, len
        bytes += (size_t)3 * (size_t)(cs.nc + cs.M) * 4 + 3 * 32;     // states (pend, cur)
        bytes += (size_t)R * (size_t)V * 4;                         // x
        bytes += (size_t)R * 4 * 2;                                 // bs, nbs
        bytes += (size_t)R * (size_t)Lh * 4 * 2;                    // hh, nh
        bytes += (size_t)R * 4 * 7 + (size_t)N * 4;                 // tok src erow ent_row ent_tok lens fin_len, done
        bytes += (size_t)(nw + 1) * 4 * 2;                          // tmp, adv
        bytes += (size_t)C * (4 * 2 + 4 + 8);                       // cidx_tok, csrc, cval, cflat
        bytes += (size_t)A * 4 * 8;                                 // all_*, zip, ord, inc, ord2
        bytes += (size_t)R * (size_t)F * 4;                         // fin_tok
        bytes += (size_t)N * (size_t)(K + 1) * ((size_t)Lh * 4 + 4 + 8); // hypotheses
        if (with_bi) bytes += (size_t)R * (size_t)F * 4 * 3 + (size_t)N * (size_t)(K + 1) * ((size_t)Lh * 4 + 4) +
                              (size_t)N * 2 * 16 + 3 * 16;   // rb, nrb, fin_bi; the hypotheses' indices
        bytes += (size_t)N * sizeof(fat5__cons_hyps) + 64 * 32;
        bytes += (size_t)N * 2 * 16;                                // each input's two carves rounded up to 16
        arena = fat5__calloc(ctx, bytes, 1);
        if (!arena) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory (force_words_ids)");
    }
    {
        char *p = (char *)arena;
#define FAT5__CARVE(var, T, count) \
    do {                           \
        var = (T *)(void *)p;      \
        p += (((size_t)(count) * sizeof(T)) + 15) & ~(size_t)15; \
    } while (0)
        FAT5__CARVE(hyp, fat5__cons_hyps, N);
        FAT5__CARVE(hyp_score, double, N * (K + 1));
        FAT5__CARVE(cflat, int64_t, C);
        FAT5__CARVE(cs.first, int32_t, cs.nc + 1);
        FAT5__CARVE(cs.len, int32_t, cs.nc);
        FAT5__CARVE(x, float, R * V);
        FAT5__CARVE(bs, float, R);
        FAT5__CARVE(nbs, float, R);
        FAT5__CARVE(hh, int32_t, R * Lh);
        FAT5__CARVE(nh, int32_t, R * Lh);
        FAT5__CARVE(tok, int32_t, R);
        FAT5__CARVE(src, int32_t, R);
        FAT5__CARVE(erow, int32_t, R);
        FAT5__CARVE(ent_row, int32_t, R);
        FAT5__CARVE(ent_tok, int32_t, R);
        FAT5__CARVE(lens, int32_t, R);
        FAT5__CARVE(fin_len, int32_t, R);
        FAT5__CARVE(done, int32_t, N);
        FAT5__CARVE(tmp, int32_t, nw + 1);
        FAT5__CARVE(adv, int32_t, nw + 1);
        FAT5__CARVE(cidx_tok, int32_t, C);
        FAT5__CARVE(csrc, int32_t, C);
        FAT5__CARVE(cval, float, C);
        FAT5__CARVE(all_tok, int32_t, A);
        FAT5__CARVE(all_src, int32_t, A);
        FAT5__CARVE(all_bank, int32_t, A);
        FAT5__CARVE(all_sc, float, A);
        FAT5__CARVE(zip, float, A);
        FAT5__CARVE(ord, int32_t, A);
        FAT5__CARVE(inc, int32_t, A);
        FAT5__CARVE(ord2, int32_t, A);
        FAT5__CARVE(fin_tok, int32_t, R * F);
        for (b = 0; b < N; b++) {
            hyp[b].n = 0, hyp[b].worst = 1e9, hyp[b].score = hyp_score + b * (K + 1);
            FAT5__CARVE(hyp[b].len, int32_t, K + 1);
            FAT5__CARVE(hyp[b].tok, int32_t, (K + 1) * Lh);
            hyp[b].nbi = hyp[b].bi = NULL;
            if (with_bi) {
                FAT5__CARVE(hyp[b].nbi, int32_t, K + 1);
                FAT5__CARVE(hyp[b].bi, int32_t, (K + 1) * Lh);
            }
        }
        if (with_bi) {
            FAT5__CARVE(rb, int32_t, R * F);
            FAT5__CARVE(nrb, int32_t, R * F);
            FAT5__CARVE(fin_bi, int32_t, R * F);
        }
        for (i = 0; i < (int64_t)cs.nc; i++) cs.first[i] = -1;
        for (k = 0; k < nw; k++) {
            int c = g->force_words_constraint[k], l = g->force_words_ids.cu[k + 1] - g->force_words_ids.cu[k];
            if (cs.first[c] < 0) cs.first[c] = (int32_t)k;
            cs.len[c] = l > cs.len[c] ? l : cs.len[c];
        }
        cs.first[cs.nc] = (int32_t)nw;
        for (i = 0; i < 3; i++) {
            FAT5__CARVE(st[i].pend, int32_t, cs.nc);
            FAT5__CARVE(st[i].cur, int32_t, cs.M);
        }
#undef FAT5__CARVE
    }
    // the start: every row's prompt (fat5_generate uploaded it), beam 0 of each input at 0, the
    // others 1e9 down; nothing generated yet
    if ((ret = be->download(ctx, hh, s->hist, (size_t)(R * Lh) * 4)) || (ret = be->sync(ctx))) goto out;
    for (r = 0; r < R; r++) bs[r] = r % K ? -1.0e9f : 0.0f, lens[r] = 0, ent_row[r] = (int32_t)r;
    if ((ret = be->upload(ctx, s->lens, lens, (size_t)R * 4))) goto out;
    for (step = 0; step < s->max_new && !stop; step++) {
        const int64_t t = step, L = P + t;   // tokens generated so far; a row's length
        if (g->max_time > 0 && step > 0 && fat5__now_s() - t0 >= g->max_time) break;
        // the backend's part: the decoder step and the processors (log-probabilities first)
        if ((ret = fat5__decoder_step_dev(d, n)) ||
            (s->raw && (ret = be->copy(ctx, s->raw, d->logits, (size_t)(n * V) * 4))) ||
            (ret = be->gen_process(ctx, d->logits, s->hist, s->lens, d->rows, n, V, Lh, &s->o)) ||
            (ret = be->download(ctx, x, d->logits, (size_t)(n * V) * 4)) || (ret = be->sync(ctx)))
            goto out;
        for (i = 0; i < n; i++) erow[ent_row[i]] = (int32_t)i;
        // the step's outputs: acc = beam score + processed score [R, V], the raw logits; rows not run: NaN
        if ((ret = fat5__gen_out_room(s, out, g, step))) goto out;
        if (g->output_scores) {
            float *row0 = out->step_scores + step * R * V;
            int64_t v;
            for (i = 0; i < R * V; i++) row0[i] = NAN;
            for (i = 0; i < n; i++)
                for (v = 0; v < V; v++) row0[(int64_t)ent_row[i] * V + v] = bs[ent_row[i]] + x[i * V + v];
        }
        if (g->output_logits && (ret = fat5__gen_keep_step(s, &out->step_logits, s->raw, n, ent_row, step))) goto out;
        for (b = 0; b < N; b++) {
            const int64_t r0 = b * K;
            int c, j, nsent = 0, m = 0, a;
            float sent_sc[FAT5__BEAM_MAX];
            int32_t sent_tok[FAT5__BEAM_MAX], sent_src[FAT5__BEAM_MAX];
            if (done[b]) {   // transformers pads a finished input's beams (they are not run any more)
                for (k = 0; k < K; k++) nbs[r0 + k] = 0.0f, tok[r0 + k] = (int32_t)g->pad_token_id, src[r0 + k] = (int32_t)(r0 + k);
                continue;
            }
            // 1. the C best acc over K x V, first flat index on ties (an insertion-kept sorted list)
            for (c = 0; c < C; c++) cflat[c] = -1;
            for (k = 0; k < K; k++) {
                const float *xr = x + (int64_t)erow[r0 + k] * V;
                int64_t v;
                for (v = 0; v < V; v++) {
                    float val = bs[r0 + k] + xr[v];
                    if (cflat[C - 1] >= 0 && !(val > cval[C - 1])) continue;
                    for (c = C - 1; c > 0 && (cflat[c - 1] < 0 || val > cval[c - 1]); c--)
                        cval[c] = cval[c - 1], cflat[c] = cflat[c - 1];
                    cval[c] = val, cflat[c] = k * V + v;
                }
            }
            // 2. stop tokens end beams that met the constraints; the first K others are the top-k beams
            for (c = 0; c < C && nsent < K; c++) {
                int32_t v = (int32_t)(cflat[c] % V);
                int64_t row = r0 + cflat[c] / V;
                cidx_tok[c] = v, csrc[c] = (int32_t)row;
                if (eos.n && fat5__cons_in(eos.ids, (int)eos.n, v)) {
                    if (c >= K) continue;
                    fat5__cons_reset(&cs, &st[0], hh + row * Lh, L, tmp);
                    if (st[0].completed) {   // its beam indices: the beam's, then the beam's row
                        if (with_bi) rb[row * F + t] = (int32_t)row;
                        fat5__cons_hyp_add(&hyp[b], K, Lh, g->length_penalty, hh + row * Lh, (int)L, (double)cval[c],
                                           (int)t + 1, with_bi ? rb + row * F : NULL, (int)t + 1);
                    }
                    continue;
                }
                sent_sc[nsent] = cval[c], sent_tok[nsent] = v, sent_src[nsent] = (int32_t)row, nsent++;
            }
            if (nsent < K) {
                ret = fat5__err(ctx, FAT5_ERR_STATE, "fat5_generate: input %lld has %d running candidates of %d",
                                (long long)b, nsent, K);
                goto out;
            }
            // 3. the banks of the top-k beams, then the proposals of the beams that advance a constraint
            for (j = 0; j < K; j++) {
                fat5__cons_reset(&cs, &st[0], hh + (int64_t)sent_src[j] * Lh, L, tmp);
                fat5__cons_add(&cs, &st[0], sent_tok[j], tmp);
                all_tok[j] = sent_tok[j], all_src[j] = sent_src[j], all_sc[j] = sent_sc[j];
                all_bank[j] = fat5__cons_bank(&cs, &st[0]);
            }
            m = K;
            for (j = 0; j < K; j++) {
                const int64_t row = r0 + j;
                int na = 0, q, c2;
                fat5__cons_reset(&cs, &st[1], hh + row * Lh, L, tmp);
                if (st[1].completed) continue;
                // the tokens that advance it (ConstraintListState.advance); a list of at most nw
                if (st[1].inprog >= 0) {
                    na = fat5__cons_next(&cs, st[1].inprog, st[1].cur, st[1].depth, tmp);
                } else {
                    for (q = 0; q < st[1].n_pend; q++) {
                        int nn = fat5__cons_next(&cs, st[1].pend[q], st[1].cur, 0, tmp + na);
                        na += nn;
                    }
                }
                memcpy(adv, tmp, (size_t)na * sizeof(int32_t));
                for (q = 0; q < na; q++) {
                    int32_t v = adv[q];
                    int dup = 0;
                    int multi = st[1].inprog >= 0 && cs.first[st[1].inprog + 1] - cs.first[st[1].inprog] > 1;
                    int steps_it = multi && fat5__cons_in(tmp, fat5__cons_next(&cs, st[1].inprog, st[1].cur,
                                                                                st[1].depth, tmp), v);
                    fat5__cons_copy(&cs, &st[2], &st[1]);
                    fat5__cons_add(&cs, &st[2], v, tmp);
                    // a disjunctive constraint's matched tokens are shared with the proposing beam
                    if (steps_it) st[1].cur[st[1].depth++] = v;
                    for (c2 = 0; c2 < m && !dup; c2++)
                        dup = all_tok[c2] == v && !memcmp(hh + (int64_t)all_src[c2] * Lh, hh + row * Lh,
                                                          (size_t)L * sizeof(int32_t));
                    if (dup) continue;
                    all_tok[m] = v, all_src[m] = (int32_t)row;
                    all_sc[m] = bs[row] + x[(int64_t)erow[row] * V + v];
                    all_bank[m] = fat5__cons_bank(&cs, &st[2]);
                    m++;
                }
            }
            if (m > K) {
                // sort by bank x 100 + acc in fp32, descending (stable), rank within runs of one bank,
                // then keep the K of lowest rank (stable)
                int cur_bank = 0, cnt = -1;
                for (a = 0; a < m; a++) {
                    volatile float z = (float)((int64_t)all_bank[a] * 100) + all_sc[a];
                    zip[a] = z, ord[a] = a;
                }
                for (a = 1; a < m; a++) {
                    int32_t o = ord[a];
                    for (c = a - 1; c >= 0 && zip[ord[c]] < zip[o]; c--) ord[c + 1] = ord[c];
                    ord[c + 1] = o;
                }
                for (a = 0; a < m; a++) {
                    int bk = all_bank[ord[a]];
                    if (a == 0) cur_bank = bk;
                    if (bk == cur_bank) cnt++;
                    else cnt = 0, cur_bank = bk;
                    inc[a] = cnt, ord2[a] = a;
                }
                for (a = 1; a < m; a++) {
                    int32_t o = ord2[a];
                    for (c = a - 1; c >= 0 && inc[ord2[c]] > inc[o]; c--) ord2[c + 1] = ord2[c];
                    ord2[c + 1] = o;
                }
                for (j = 0; j < K; j++) {
                    int pick = ord[ord2[j]];
                    sent_sc[j] = all_sc[pick], sent_tok[j] = all_tok[pick], sent_src[j] = all_src[pick];
                }
            }
            for (j = 0; j < K; j++) nbs[r0 + j] = sent_sc[j], tok[r0 + j] = sent_tok[j], src[r0 + j] = sent_src[j];
            // 4. done when no running beam can beat the finished ones
            done[b] = fat5__cons_hyp_done(&hyp[b], K, g, (double)cval[0], t + 1, s->max_new);
        }
        // the new histories and beam scores
        for (r = 0; r < R; r++) {
            memcpy(nh + r * Lh, hh + (int64_t)src[r] * Lh, (size_t)L * sizeof(int32_t));
            nh[r * Lh + L] = tok[r];
            bs[r] = nbs[r];
            lens[r] = (int32_t)(t + 1);
        }
        memcpy(hh, nh, (size_t)(R * Lh) * sizeof(int32_t));
        if (with_bi) {   // the running beams' indices: the source beam's, then its row
            for (r = 0; r < R; r++) {
                memcpy(nrb + r * F, rb + (int64_t)src[r] * F, (size_t)t * sizeof(int32_t));
                nrb[r * F + t] = src[r];
            }
            memcpy(rb, nrb, (size_t)(R * F) * sizeof(int32_t));
        }
        *steps_out = step + 1;
        // the end: every input done, or every row ending in a stop token (transformers' criteria)
        stop = 1;
        for (b = 0; b < N && stop; b++) stop = done[b];
        if (!stop && eos.n) {
            int all_eos = 1;
            for (r = 0; r < R && all_eos; r++) all_eos = fat5__cons_in(eos.ids, (int)eos.n, hh[r * Lh + L]);
            stop = all_eos;
        }
        if (stop || step + 1 >= s->max_new) break;
        // the next step: histories, the cache reordered, the running inputs' rows as the entries
        for (r = 0; r < R; r++)
            if (!d->live[r]) src[r] = (int32_t)r;
        if ((ret = be->upload(ctx, s->hist, hh, (size_t)(R * Lh) * 4)) ||
            (ret = be->upload(ctx, s->lens, lens, (size_t)R * 4)) || (ret = be->upload(ctx, s->src, src, (size_t)R * 4)) ||
            (ret = fat5__decoder_reorder_dev(d, s->src)))
            goto out;
        for (r = 0, n = 0; r < R; r++) {
            if (!d->live[r]) continue;
            if (done[r / K]) {
                d->live[r] = 0;
                continue;
            }
            ent_row[n] = (int32_t)r, ent_tok[n] = hh[r * Lh + L], n++;
        }
        d->n_live = n;
        if ((ret = be->upload(ctx, d->tok, ent_tok, (size_t)n * 4)) ||
            (ret = be->upload(ctx, d->rows, ent_row, (size_t)n * 4)) || (ret = be->sync(ctx)))
            goto out;
    }
    // finalize: a running input adds its beams that meet the constraints, all of them when fewer than
    // num_return_sequences do; then its best hypotheses (ties: the later added) become its rows
    {
        const int64_t L = P + *steps_out, keep = g->num_return_sequences;
        for (b = 0; b < N; b++) {
            int j, got = 0, is[FAT5__BEAM_MAX];
            if (done[b]) continue;
            for (j = 0; j < K; j++) {
                const int32_t *seq = hh + (b * K + j) * Lh;
                fat5__cons_reset(&cs, &st[0], seq, L, tmp);
                is[j] = st[0].completed;
                if (is[j]) fat5__cons_hyp_add(&hyp[b], K, Lh, g->length_penalty, seq, (int)L, (double)bs[b * K + j],
                                              (int)(L - P), with_bi ? rb + (b * K + j) * F : NULL, (int)(L - P)), got++;
            }
            if (got < keep)   // (no beam indices for these, as transformers records none)
                for (j = 0; j < K; j++)
                    if (!is[j])
                        fat5__cons_hyp_add(&hyp[b], K, Lh, g->length_penalty, hh + (b * K + j) * Lh, (int)L,
                                           (double)bs[b * K + j], (int)(L - P), NULL, 0);
        }
        for (b = 0; b < N; b++) {
            fat5__cons_hyps *h = &hyp[b];
            int32_t hord[FAT5__BEAM_MAX + 1];
            int a, c;
            for (a = 0; a < h->n; a++) hord[a] = a;
            for (a = 1; a < h->n; a++) {   // best first; on ties the later one first
                int32_t o = hord[a];
                for (c = a - 1; c >= 0 && (h->score[hord[c]] < h->score[o] ||
                                           (h->score[hord[c]] == h->score[o] && hord[c] < o)); c--)
                    hord[c + 1] = hord[c];
                hord[c + 1] = o;
            }
            for (k = 0; k < K; k++) {
                const int64_t row = b * K + k;
                int32_t *dst = fin_tok + row * F;
                int q = 0, j;
                fin_len[row] = 0, nbs[row] = -1.0e9f;
                if (k >= keep || k >= h->n) continue;
                for (j = P; j < h->len[hord[k]]; j++) {
                    dst[q++] = h->tok[(int64_t)hord[k] * Lh + j];
                    if (fat5__cons_in(eos.ids, (int)eos.n, dst[q - 1])) break;
                }
                if (j == h->len[hord[k]] && h->len[hord[k]] < P + s->max_new && eos.n) dst[q++] = eos.ids[0];
                fin_len[row] = q, nbs[row] = (float)h->score[hord[k]];
                for (j = 0; with_bi && j < q; j++)   // -1 past the recorded indices (transformers' fill)
                    fin_bi[row * F + j] = j < h->nbi[hord[k]] ? h->bi[(int64_t)hord[k] * Lh + j] : -1;
            }
        }
        if ((ret = be->upload(ctx, s->fin_tok, fin_tok, (size_t)(R * F) * 4)) ||
            (ret = be->upload(ctx, s->fin_len, fin_len, (size_t)R * 4)) ||
            (ret = be->upload(ctx, s->fin_score, nbs, (size_t)R * 4)) ||
            (with_bi && (ret = be->upload(ctx, s->o.fin_bidx, fin_bi, (size_t)(R * F) * 4))) || (ret = be->sync(ctx)))
            goto out;
    }
out:
    fat5__free(ctx, arena);
    return ret;
}
