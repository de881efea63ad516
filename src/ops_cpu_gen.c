// =============================================================================================
// ==[3.3] ops: generation on the CPU (logits processors and warpers, token selection, beam search) ==
// The CPU twins of kernels/generate.cu, and the reference of their semantics: Hugging Face's
// logits processors and warpers in the order transformers 5's generate applies them, greedy and
// sampled token selection, and one step of (sampled) beam search. The options are one
// fat5__gen_opts (ops_interface.c).
//
// The decoding state lives on the backend, indexed by decoder row r (or by input i = r / K with K
// beams): hist int32 [R, Lh] is the decoder input of each row (hist[r][0 .. P) its prompt, the
// start token or decoder_input_ids; hist[r][P + j] the j-th generated token), lens int32 [R] the
// tokens generated so far. An op works on n entries whose rows are rows[0 .. n) (the live rows of
// the step, in the order of the decoder's logits [n, V]).

#define FAT5__BEAM_MAX 32        // beams per input of fat5__cpu_gen_beam / fat5_gen_beam
#define FAT5__BEAM_CAND_MAX 64   // candidates per input and step: max(2, stop tokens + 1) x beams at most

// The Gumbel noise of token v for row `row` at generated length `len`: -log(-log(u)) with u the
// Philox word of counter (len << 44) + (row << 24) + v / 4, word v % 4, key seed, mapped to (0, 1).
// One word per token, so a draw depends on (seed, row, length, token) only: the CPU and the GPU
// (fat5_gen_select mirrors it) agree, and dropping finished rows changes nothing.
static double fat5__gen_gumbel(uint64_t seed, int64_t row, int64_t len, int64_t v) {
    uint32_t w[4];
    double u;
    fat5__philox(seed, ((uint64_t)len << 44) + ((uint64_t)row << 24) + (uint64_t)(v >> 2), w);
    u = ((double)w[v & 3] + 0.5) * (1.0 / 4294967296.0);
    return -log(-log(u));
}

static int fat5__cpu_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

static int fat5__gen_in(const int32_t *ids, int n, int v) {
    int i;
    for (i = 0; i < n; i++)
        if (ids[i] == v) return 1;
    return 0;
}

// log-sum-exp of x [V] over its finite-or-+inf entries (-inf entries weigh nothing)
static double fat5__gen_lse(const float *x, int V) {
    double mx = -INFINITY, s = 0;
    int v;
    for (v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    if (mx == -INFINITY) return -INFINITY;
    for (v = 0; v < V; v++) s += exp((double)x[v] - mx);
    return mx + log(s);
}

// Token j of input i's encoder tokens as Hugging Face's right-padded batch holds them: its own
// tokens, then pad up to the longest input (enc_max).
static int fat5__gen_enc_tok(const fat5__gen_opts *o, const int32_t *et, const int32_t *ec, int i, int j) {
    return j < ec[i + 1] - ec[i] ? et[ec[i] + j] : o->pad;
}

// The sequence_bias entries' sum for token v of a row whose decoder input is h[0 .. cur), in float
// as Hugging Face accumulates it: the single-token entry of v (the last one when repeated), plus
// every multi-token entry ending in v whose prefix is the end of h (an entry repeated later counts
// once, as the dict of its reader keeps the last).
static float fat5__gen_seq_bias(const fat5__gen_opts *o, const int32_t *ids, const int32_t *cu, const float *bias,
                                const int32_t *h, int cur, int v, int *hit) {
    float b = 0;
    int k, k2, j;
    *hit = 0;
    for (k = 0; k < o->n_seq_bias; k++) {   // single tokens: the last entry wins
        if (cu[k + 1] - cu[k] != 1 || ids[cu[k]] != v) continue;
        b = bias[k], *hit = 1;
    }
    for (k = 0; k < o->n_seq_bias; k++) {
        int len = cu[k + 1] - cu[k], dup = 0, match = 1;
        if (len < 2 || ids[cu[k + 1] - 1] != v || len - 1 > cur) continue;
        for (k2 = k + 1; k2 < o->n_seq_bias && !dup; k2++)
            if (cu[k2 + 1] - cu[k2] == len && !memcmp(ids + cu[k], ids + cu[k2], (size_t)len * sizeof(int32_t))) dup = 1;
        if (dup) continue;
        for (j = 0; j < len - 1 && match; j++) match = h[cur - (len - 1) + j] == ids[cu[k] + j];
        if (match) b += bias[k], *hit = 1;
    }
    return b;
}

// The k-th largest of x [V] (1 <= k <= V), what a descending sort puts at k - 1; s: scratch [V]
static float fat5__gen_kth(const float *x, int V, int k, float *s) {
    memcpy(s, x, (size_t)V * sizeof(float));
    qsort(s, (size_t)V, sizeof(float), fat5__cpu_float_desc);
    return s[k - 1];
}

// A token's typical-sampling shift, ordered by (shift, id)
typedef struct fat5__gen_shift {
    float shift;
    int32_t id;
} fat5__gen_shift;

static int fat5__gen_shift_cmp(const void *a, const void *b) {
    const fat5__gen_shift *x = (const fat5__gen_shift *)a, *y = (const fat5__gen_shift *)b;
    if (x->shift != y->shift) return x->shift < y->shift ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

// The sampling warpers on one row's scores xe [V] in place, in Hugging Face's order (temperature,
// top_k, top_p, min_p, typical_p, epsilon_cutoff, eta_cutoff): removed tokens become -inf. s: scratch
// [2 V] floats.
static void fat5__gen_warp(const fat5__gen_opts *o, float *xe, int V, float *s) {
    int v, i, keep = o->min_keep < 1 ? 1 : o->min_keep < V ? o->min_keep : V;
    if (o->temperature != 1.0f)
        for (v = 0; v < V; v++) xe[v] = xe[v] / o->temperature;
    if (o->top_k > 0) {   // keep the values >= the k-th largest (ties kept)
        int k = o->top_k > keep ? o->top_k : keep;
        if (k < V) {
            float kth = fat5__gen_kth(xe, V, k, s);
            for (v = 0; v < V; v++)
                if (xe[v] < kth) xe[v] = -INFINITY;
        }
    }
    if (o->top_p < 1.0f) {   // kept while the strictly more likely tokens hold < top_p of the mass (ties kept)
        double z = 0, before = 0, m0;
        float thr;
        memcpy(s, xe, (size_t)V * sizeof(float));
        qsort(s, (size_t)V, sizeof(float), fat5__cpu_float_desc);
        m0 = s[0], thr = s[0];
        for (i = 0; i < V; i++) z += exp((double)s[i] - m0);
        for (i = 0; i < V; i++) {
            if (i >= keep && s[i] < s[i - 1] && before >= (double)o->top_p * z) break;
            thr = s[i];
            before += exp((double)s[i] - m0);
        }
        for (v = 0; v < V; v++)
            if (xe[v] < thr) xe[v] = -INFINITY;
    }
    if (o->min_p > 0.0f) {   // probability < min_p x the largest, unless among the min_keep largest
        double lse = fat5__gen_lse(xe, V), pmax = -INFINITY;
        float kth;
        for (v = 0; v < V; v++) pmax = xe[v] > pmax ? xe[v] : pmax;
        pmax = exp(pmax - lse);
        kth = fat5__gen_kth(xe, V, keep, s);
        for (v = 0; v < V; v++)
            if (exp((double)xe[v] - lse) < (double)o->min_p * pmax && xe[v] < kth) xe[v] = -INFINITY;
    }
    if (o->typical_p < 1.0f) {   // locally typical: by |-log p - entropy| ascending until the mass
        double lse = fat5__gen_lse(xe, V), ent = 0, cum = 0;
        fat5__gen_shift *order = (fat5__gen_shift *)(void *)s;   // [V] (s holds 2 V floats)
        float thr;
        int last;
        for (v = 0; v < V; v++) {
            double lp = (double)xe[v] - lse;
            if (xe[v] > -INFINITY) ent -= lp * exp(lp);
        }
        for (v = 0; v < V; v++) {
            order[v].shift = xe[v] > -INFINITY ? (float)fabs(-((double)xe[v] - lse) - ent) : INFINITY;
            order[v].id = v;
        }
        qsort(order, (size_t)V, sizeof *order, fat5__gen_shift_cmp);   // by (shift, id)
        for (last = 0; last < V; last++) {
            cum += exp((double)xe[order[last].id] - lse);
            if (!(cum < (double)o->typical_p)) break;
        }
        if (last > V - 1) last = V - 1;
        thr = order[last].shift;
        for (i = keep; i < V; i++)   // the first min_keep of the order stay whatever their shift
            if (order[i].shift > thr) xe[order[i].id] = -INFINITY;
    }
    if (o->epsilon > 0.0f || o->eta > 0.0f) {   // probability below a cutoff, unless among the min_keep largest
        int pass;
        for (pass = 0; pass < 2; pass++) {
            double lse, cut, ent = 0;
            float kth;
            if ((pass == 0 && !(o->epsilon > 0.0f)) || (pass == 1 && !(o->eta > 0.0f))) continue;
            lse = fat5__gen_lse(xe, V);
            if (pass == 0) {
                cut = (double)o->epsilon;
            } else {
                for (v = 0; v < V; v++) {
                    double lp = (double)xe[v] - lse;
                    if (xe[v] > -INFINITY) ent -= lp * exp(lp);
                }
                cut = sqrt((double)o->eta) * exp(-ent);
                cut = cut < (double)o->eta ? cut : (double)o->eta;
            }
            kth = fat5__gen_kth(xe, V, keep, s);
            for (v = 0; v < V; v++)
                if (exp((double)xe[v] - lse) < cut && xe[v] < kth) xe[v] = -INFINITY;
        }
    }
}

// Hugging Face's logits processors on x [n, V] fp32 in place, entry e for row rows[e] whose decoder
// input is hist[row][0 .. cur), cur = P + lens[row], and input i = row / rows_per_input. In order:
// log_softmax (beam search), sequence_bias, the diversity penalty (group beam search: for group
// `group` > 0, each token's score less diversity x the beams of the input's earlier groups that
// chose it at this step, pad for a finished group's), encoder_repetition_penalty (each distinct input token
// t: x < 0 ? x / p : x * p), repetition_penalty (each distinct decoder-input token: x < 0 ? x * p :
// x / p), no_repeat_ngram_size (a token completing an n-gram already in the decoder input gets
// -inf), encoder_no_repeat_ngram_size (the same against the input's n-grams), bad_words_ids,
// min_length (EOS -inf while cur < min_len), min_new_tokens (while lens < min_new), forced BOS
// (cur == 1: every other token -inf, it 0), forced EOS (lens == max_new - 1), remove_invalid_values,
// exponential decay (cur > decay_start: each finite EOS logit += |x| (factor^(cur - decay_start) - 1)),
// suppress_tokens, begin_suppress_tokens (cur == begin_index); then, when sampling, the warpers
// (fat5__gen_warp); then renormalize (log_softmax). The result is Hugging Face's processed scores.
static fat5_status fat5__cpu_gen_process(fat5_ctx *ctx, fat5__addr x_, fat5__addr hist_, fat5__addr lens_,
                                         fat5__addr rows_, int64_t n, int V, int Lh, const fat5__gen_opts *o) {
    float *x = FAT5__HOST(float, x_), *s;
    const int32_t *hist = FAT5__HOST(const int32_t, hist_), *lens = FAT5__HOST(const int32_t, lens_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_);
    const int32_t *eos = FAT5__HOST(const int32_t, o->eos), *feos = FAT5__HOST(const int32_t, o->forced_eos);
    const int32_t *sup = FAT5__HOST(const int32_t, o->suppress), *bsup = FAT5__HOST(const int32_t, o->begin_suppress);
    const int32_t *sq = FAT5__HOST(const int32_t, o->seq_ids), *sc = FAT5__HOST(const int32_t, o->seq_cu);
    const float *sb = FAT5__HOST(const float, o->seq_bias);
    const int32_t *et = FAT5__HOST(const int32_t, o->enc_tok), *ec = FAT5__HOST(const int32_t, o->enc_cu);
    int64_t e;
    s = (float *)fat5__host_scratch(ctx, (size_t)V * 2 * sizeof(float), "fat5__cpu_gen_process");
    if (!s) return FAT5_ERR_OUT_OF_MEMORY;
    for (e = 0; e < n; e++) {
        float *xe = x + e * (int64_t)V;
        int r = rows[e], len = lens[r], cur = o->P + len, in = (r - o->row0) / o->rows_per_input, i, j, k, v;
        const int32_t *h = hist + (int64_t)r * Lh;
        if (o->G > 1 && ((r - o->row0) / o->K) % o->G != o->group) continue;   // another group's row
        if (o->log_softmax) {
            double lse = fat5__gen_lse(xe, V);
            for (v = 0; v < V; v++) xe[v] = (float)((double)xe[v] - lse);
        }
        for (k = 0; k < o->n_seq_bias; k++) {   // sequence_bias: once per distinct last token
            int last = sq[sc[k + 1] - 1], first = 1, hit;
            float b;
            for (j = 0; j < k && first; j++) first = sq[sc[j + 1] - 1] != last;
            if (!first) continue;
            b = fat5__gen_seq_bias(o, sq, sc, sb, h, cur, last, &hit);
            if (hit && last >= 0 && last < V) xe[last] = xe[last] + b;
        }
        if (o->G > 1 && o->group > 0 && o->diversity != 0.0f) {   // Hamming diversity against the earlier groups
            int first = o->row0 + ((r - o->row0) / (o->K * o->G)) * o->K * o->G, last = first + o->group * o->K, r2, r3;
            for (r2 = first; r2 < last; r2++) {   // each distinct token once, with its count
                int t = lens[r2] == len + 1 ? hist[(int64_t)r2 * Lh + o->P + len] : o->pad, count = 0, seen = 0;
                for (r3 = first; r3 < r2 && !seen; r3++)
                    seen = (lens[r3] == len + 1 ? hist[(int64_t)r3 * Lh + o->P + len] : o->pad) == t;
                if (seen || t < 0 || t >= V) continue;
                for (r3 = r2; r3 < last; r3++) count += (lens[r3] == len + 1 ? hist[(int64_t)r3 * Lh + o->P + len] : o->pad) == t;
                xe[t] = xe[t] - (float)count * o->diversity;
            }
        }
        if (o->enc_rep != 1.0f) {
            float p = (float)(1.0 / (double)o->enc_rep);
            for (j = 0; j < o->enc_max; j++) {
                int t = fat5__gen_enc_tok(o, et, ec, in, j), seen = 0;
                for (i = 0; i < j && !seen; i++) seen = fat5__gen_enc_tok(o, et, ec, in, i) == t;
                if (!seen && t >= 0 && t < V) xe[t] = xe[t] < 0 ? xe[t] * p : xe[t] / p;
            }
        }
        if (o->rep != 1.0f)
            for (i = 0; i < cur; i++) {
                int seen = 0, t = h[i];
                for (j = 0; j < i && !seen; j++) seen = h[j] == t;
                if (!seen && t >= 0 && t < V) xe[t] = xe[t] < 0 ? xe[t] * o->rep : xe[t] / o->rep;
            }
        if (o->ngram > 0 && cur + 1 >= o->ngram)
            for (i = 0; i + o->ngram <= cur; i++) {   // the n-gram h[i .. i + n) vs the last n - 1 tokens
                int match = 1;
                for (j = 0; j < o->ngram - 1 && match; j++) match = h[i + j] == h[cur - o->ngram + 1 + j];
                if (match && h[i + o->ngram - 1] >= 0 && h[i + o->ngram - 1] < V) xe[h[i + o->ngram - 1]] = -INFINITY;
            }
        if (o->enc_ngram > 0 && cur >= o->enc_ngram - 1)
            for (i = 0; i + o->enc_ngram <= o->enc_max; i++) {   // the input's n-grams vs the last n - 1 tokens
                int match = 1, t;
                for (j = 0; j < o->enc_ngram - 1 && match; j++)
                    match = fat5__gen_enc_tok(o, et, ec, in, i + j) == h[cur - o->enc_ngram + 1 + j];
                t = fat5__gen_enc_tok(o, et, ec, in, i + o->enc_ngram - 1);
                if (match && t >= 0 && t < V) xe[t] = -INFINITY;
            }
        for (k = o->n_seq_bias; k < o->n_seq; k++) {   // bad words: the last token after the rest
            int l = sc[k + 1] - sc[k], match = l - 1 <= cur, last = sq[sc[k + 1] - 1];
            for (j = 0; j < l - 1 && match; j++) match = h[cur - (l - 1) + j] == sq[sc[k] + j];
            if (match && last >= 0 && last < V) xe[last] = -INFINITY;
        }
        if (cur < o->min_len || len < o->min_new)
            for (k = 0; k < o->n_eos; k++)
                if (eos[k] >= 0 && eos[k] < V) xe[eos[k]] = -INFINITY;
        if (o->forced_bos >= 0 && cur == 1)
            for (v = 0; v < V; v++) xe[v] = v == o->forced_bos ? 0.0f : -INFINITY;
        if (o->n_forced_eos > 0 && len == o->max_new - 1)
            for (v = 0; v < V; v++) xe[v] = fat5__gen_in(feos, o->n_forced_eos, v) ? 0.0f : -INFINITY;
        if (o->remove_invalid)
            for (v = 0; v < V; v++)
                xe[v] = xe[v] != xe[v] ? 0.0f : xe[v] == INFINITY ? FLT_MAX : xe[v] == -INFINITY ? -FLT_MAX : xe[v];
        if (o->decay_start >= 0 && cur > o->decay_start) {
            float f = (float)(pow((double)o->decay_factor, (double)(cur - o->decay_start)) - 1.0);
            for (k = 0; k < o->n_eos; k++) {
                int t = eos[k], dup = 0;
                for (j = 0; j < k && !dup; j++) dup = eos[j] == t;
                if (!dup && t >= 0 && t < V && isfinite(xe[t])) xe[t] = xe[t] + fabsf(xe[t]) * f;
            }
        }
        for (k = 0; k < o->n_suppress; k++)
            if (sup[k] >= 0 && sup[k] < V) xe[sup[k]] = -INFINITY;
        if (cur == o->begin_index)
            for (k = 0; k < o->n_begin_suppress; k++)
                if (bsup[k] >= 0 && bsup[k] < V) xe[bsup[k]] = -INFINITY;
        if (o->do_sample) fat5__gen_warp(o, xe, V, s);
        if (o->renormalize) {
            double lse = fat5__gen_lse(xe, V);
            for (v = 0; v < V; v++) xe[v] = (float)((double)xe[v] - lse);
        }
    }
    return FAT5_OK;
}

// The next token of entry e (row r = rows[e]) from the processed scores x [n, V], unless done[r]:
// then tok[e] = pad and nothing changes. Greedy takes the first largest x; sampling draws
// argmax(x + gumbel) over the finite x (fat5__gen_gumbel: a categorical draw from softmax(x)).
// Then tok[e] = hist[r][P + lens[r]] = the token, score[r] += its log_softmax(x), lens[r]++, and
// done[r] = 1 when the token is a stop token or lens[r] reaches max_new.
static fat5_status fat5__cpu_gen_select(fat5_ctx *ctx, fat5__addr x_, fat5__addr tok_, fat5__addr hist_,
                                        fat5__addr lens_, fat5__addr done_, fat5__addr score_, fat5__addr rows_,
                                        int64_t n, int V, int Lh, const fat5__gen_opts *o) {
    const float *x = FAT5__HOST(const float, x_);
    int32_t *tok = FAT5__HOST(int32_t, tok_), *hist = FAT5__HOST(int32_t, hist_);
    int32_t *lens = FAT5__HOST(int32_t, lens_), *done = FAT5__HOST(int32_t, done_);
    float *score = FAT5__HOST(float, score_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *eos = FAT5__HOST(const int32_t, o->eos);
    int64_t e;
    (void)ctx;
    for (e = 0; e < n; e++) {
        const float *xe = x + e * (int64_t)V;
        int r = rows[e], v, best = -1;
        double bestkey = -INFINITY, lse;
        if (done[r]) {
            tok[e] = o->pad;
            continue;
        }
        for (v = 0; v < V; v++) {
            double key;
            if (o->do_sample && !(xe[v] > -INFINITY)) continue;
            key = o->do_sample ? (double)xe[v] + fat5__gen_gumbel(o->seed, r - o->row0, lens[r], v) : (double)xe[v];
            if (best < 0 || key > bestkey) best = v, bestkey = key;
        }
        if (best < 0) best = 0;   // every value NaN or -inf
        lse = fat5__gen_lse(xe, V);
        tok[e] = best;
        hist[(int64_t)r * Lh + o->P + lens[r]] = best;
        score[r] += (float)((double)xe[best] - lse);
        lens[r]++;
        if (fat5__gen_in(eos, o->n_eos, best) || lens[r] >= o->max_new) done[r] = 1;
    }
    return FAT5_OK;
}

// One step of Hugging Face's beam search (the vectorised one of transformers 5; beam sampling with
// do_sample) for n / K live inputs: entries b K .. b K + K - 1 are the K beams of input
// i = rows[b K] / K, rows i K .. i K + K - 1, with x the processed log-probabilities [n, V]
// (fat5__cpu_gen_process with log_softmax). t = lens[i K] tokens generated so far; C = max(2, n_eos + 1) K.
// Per input:
//  1. candidates: the C largest acc = bscore[beam] + x[beam][v] over K x V (first flat index on
//     ties); with do_sample, C drawn without replacement from softmax(acc) (the C largest
//     acc + gumbel), then ordered by acc; a candidate "stops" when v is a stop token or t + 1 == max_new;
//  2. the next running beams: the K best candidates, those ending in a stop token moved 1e9 down
//     (at t + 1 == max_new the others too stop, but the running beams, unused then, stay Hugging
//     Face's: group beam search's beam_indices read them); beam k takes the history of its
//     candidate's beam plus v (src[i K + k] = that beam's row, tok = v);
//  3. finished hypotheses: the K slots (fin_score sorted best first, fin_flag, fin_len, fin_tok
//     [R, Lh - P], the generated tokens) merged with the candidates among the first K that stopped,
//     scored sum / (t + 1)^length_penalty, unless unsat[i] is 0 or (early_stopping 1 and all K slots
//     hold one): those add 1e9 penalties as Hugging Face does, so they are never taken;
//  4. unsat[i] &= some slot s has best_running / L^length_penalty > (fin_flag[s] ? min fin_score :
//     -1e9), L = max_new for early_stopping 2 ("never") with length_penalty > 0, else t + 1;
//     done[i] = !unsat[i] || (early_stopping 1 && all slots finished) || t + 1 == max_new.
// With o->bidx, the beam indices follow the tokens: a running beam's bidx [R, Lh - P] and a finished
// slot's fin_bidx hold, per generated token, the row of the beam that token extended (Hugging
// Face's beam_indices). scratch: int32 [n, Lh] (the histories while they are gathered).
static fat5_status fat5__cpu_gen_beam(fat5_ctx *ctx, fat5__addr x_, fat5__addr tok_, fat5__addr src_,
                                      fat5__addr hist_, fat5__addr lens_, fat5__addr bscore_, fat5__addr fin_score_,
                                      fat5__addr fin_tok_, fat5__addr fin_len_, fat5__addr fin_flag_,
                                      fat5__addr unsat_, fat5__addr done_, fat5__addr rows_, fat5__addr scratch_,
                                      int64_t n, int V, int Lh, const fat5__gen_opts *o) {
    const float *x = FAT5__HOST(const float, x_);
    int32_t *tok = FAT5__HOST(int32_t, tok_), *src = FAT5__HOST(int32_t, src_), *hist = FAT5__HOST(int32_t, hist_);
    int32_t *lens = FAT5__HOST(int32_t, lens_), *fin_tok = FAT5__HOST(int32_t, fin_tok_);
    int32_t *fin_len = FAT5__HOST(int32_t, fin_len_), *fin_flag = FAT5__HOST(int32_t, fin_flag_);
    int32_t *unsat = FAT5__HOST(int32_t, unsat_), *done = FAT5__HOST(int32_t, done_);
    int32_t *scratch = FAT5__HOST(int32_t, scratch_);
    float *bscore = FAT5__HOST(float, bscore_), *fin_score = FAT5__HOST(float, fin_score_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *eos = FAT5__HOST(const int32_t, o->eos);
    int32_t *bidx = FAT5__HOST(int32_t, o->bidx), *fin_bidx = FAT5__HOST(int32_t, o->fin_bidx);
    const int K = o->K, C = (o->n_eos > 1 ? o->n_eos + 1 : 2) * o->K, P = o->P, F = Lh - o->P;   // F: fin_tok's row stride
    const float lp = o->length_penalty;
    int64_t b;
    if (K < 1 || K > FAT5__BEAM_MAX || C > FAT5__BEAM_CAND_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_gen_beam: K = %d, %d candidates", K, C);
    for (b = 0; b < n / K; b++) {
        int i = (rows[b * K] - o->row0) / K, r0 = o->row0 + i * K, t = lens[r0], c, k, j, all_fin = 1, any = 0;
        if (o->G > 1 && i % o->G != o->group) continue;   // a unit of another group
        float cval[FAT5__BEAM_CAND_MAX], cnorm[FAT5__BEAM_CAND_MAX], run[FAT5__BEAM_CAND_MAX], worst = INFINITY;
        double ckey[FAT5__BEAM_CAND_MAX];
        int64_t cidx[FAT5__BEAM_CAND_MAX];
        int cstop[FAT5__BEAM_CAND_MAX], next[FAT5__BEAM_MAX], taken[FAT5__BEAM_CAND_MAX];
        float mscore[FAT5__BEAM_MAX + FAT5__BEAM_CAND_MAX];
        int mfrom[FAT5__BEAM_MAX + FAT5__BEAM_CAND_MAX], mused[FAT5__BEAM_MAX + FAT5__BEAM_CAND_MAX];
        int pick[FAT5__BEAM_MAX];
        float ns[FAT5__BEAM_MAX];
        int nf[FAT5__BEAM_MAX], nl[FAT5__BEAM_MAX];
        double denom = pow((double)(t + 1), (double)lp), L;
        for (k = 0; k < K; k++) all_fin &= fin_flag[r0 + k] != 0;
        // 1. the C best candidates by key (acc, or acc + gumbel), by repeated arg-max (first flat
        // index on ties); sampled ones are then ordered by acc
        for (c = 0; c < C; c++) {
            int64_t q, best = -1;
            double bk = -INFINITY;
            for (q = 0; q < (int64_t)K * V; q++) {
                float val = bscore[r0 + q / V] + x[(b * K + q / V) * V + q % V];
                double key = val;
                int dup = 0;
                if (o->do_sample) {
                    if (!(val > -INFINITY)) continue;
                    key = (double)val + fat5__gen_gumbel(o->seed, r0 - o->row0 + q / V, t, q % V);
                }
                for (j = 0; j < c && !dup; j++) dup = cidx[j] == q;
                if (dup) continue;
                if (best < 0 || key > bk) best = q, bk = key;
            }
            if (best < 0) best = 0;
            cidx[c] = best;
            ckey[c] = bk;
            cval[c] = bscore[r0 + best / V] + x[(b * K + best / V) * V + best % V];
        }
        if (o->do_sample)   // ordered by acc, descending (insertion sort: stable)
            for (c = 1; c < C; c++) {
                float v = cval[c];
                int64_t q = cidx[c];
                double kk = ckey[c];
                for (j = c - 1; j >= 0 && cval[j] < v; j--) cval[j + 1] = cval[j], cidx[j + 1] = cidx[j], ckey[j + 1] = ckey[j];
                cval[j + 1] = v, cidx[j + 1] = q, ckey[j + 1] = kk;
            }
        for (c = 0; c < C; c++) cstop[c] = fat5__gen_in(eos, o->n_eos, (int)(cidx[c] % V)) || t + 1 >= o->max_new;
        // 2. the next running beams: the K best of the candidates with stop tokens moved down (at
        // max_new too, when the running beams are no longer used, so that they are Hugging Face's)
        for (c = 0; c < C; c++)
            run[c] = cval[c] + (fat5__gen_in(eos, o->n_eos, (int)(cidx[c] % V)) ? -1.0e9f : 0.0f), taken[c] = 0;
        for (k = 0; k < K; k++) {
            int bc = -1;
            for (c = 0; c < C; c++)
                if (!taken[c] && (bc < 0 || run[c] > run[bc])) bc = c;
            taken[bc] = 1;
            next[k] = bc;
        }
        // 3. merge the finished slots with the candidates that stopped among the first K
        for (c = 0; c < C; c++) {
            float sc = (float)(cval[c] / (float)denom);
            if (all_fin && o->early_stopping == 1) sc += -1.0e9f;
            if (!unsat[i]) sc += -1.0e9f;
            if (!(cstop[c] && c < K)) sc += -1.0e9f;
            cnorm[c] = sc;
        }
        for (k = 0; k < K; k++) mscore[k] = fin_score[r0 + k], mfrom[k] = -1 - k;
        for (c = 0; c < C; c++) mscore[K + c] = cnorm[c], mfrom[K + c] = c;
        for (j = 0; j < K + C; j++) mused[j] = 0;
        for (k = 0; k < K; k++) {
            int bj = -1;
            for (j = 0; j < K + C; j++)
                if (!mused[j] && (bj < 0 || mscore[j] > mscore[bj])) bj = j;
            mused[bj] = 1;
            pick[k] = bj;
        }
        // new slots: copy to temporaries first (a slot may move)
        for (k = 0; k < K; k++) {
            int f = mfrom[pick[k]];
            int32_t *dst = scratch + (b * K + k) * (int64_t)Lh;
            ns[k] = mscore[pick[k]];
            if (f < 0) {
                int sl = -1 - f;
                nf[k] = fin_flag[r0 + sl];
                nl[k] = fin_len[r0 + sl];
                memcpy(dst, fin_tok + (int64_t)(r0 + sl) * F, (size_t)nl[k] * sizeof(int32_t));
            } else {
                int beam = (int)(cidx[f] / V);
                nf[k] = cstop[f] && f < K;
                nl[k] = t + 1;
                memcpy(dst, hist + (int64_t)(r0 + beam) * Lh + P, (size_t)t * sizeof(int32_t));
                dst[t] = (int32_t)(cidx[f] % V);
            }
        }
        for (k = 0; k < K; k++) {
            fin_score[r0 + k] = ns[k];
            fin_flag[r0 + k] = nf[k];
            fin_len[r0 + k] = nl[k];
            memcpy(fin_tok + (int64_t)(r0 + k) * F, scratch + (b * K + k) * (int64_t)Lh, (size_t)nl[k] * sizeof(int32_t));
        }
        if (bidx) {   // the same moves for the slots' beam indices (the beam's row at each step)
            for (k = 0; k < K; k++) {
                int f = mfrom[pick[k]];
                int32_t *dst = scratch + (b * K + k) * (int64_t)Lh;
                if (f < 0) {
                    memcpy(dst, fin_bidx + (int64_t)(r0 - 1 - f) * F, (size_t)nl[k] * sizeof(int32_t));
                } else {
                    int beam = (int)(cidx[f] / V);
                    memcpy(dst, bidx + (int64_t)(r0 + beam) * F, (size_t)t * sizeof(int32_t));
                    dst[t] = r0 + beam;
                }
            }
            for (k = 0; k < K; k++)
                memcpy(fin_bidx + (int64_t)(r0 + k) * F, scratch + (b * K + k) * (int64_t)Lh, (size_t)nl[k] * sizeof(int32_t));
        }
        // 2 (cont.): gather the running histories (prompt and generated tokens), then write them back
        for (k = 0; k < K; k++) {
            int beam = (int)(cidx[next[k]] / V);
            int32_t *dst = scratch + (b * K + k) * (int64_t)Lh;
            memcpy(dst, hist + (int64_t)(r0 + beam) * Lh, (size_t)(P + t) * sizeof(int32_t));
            dst[P + t] = (int32_t)(cidx[next[k]] % V);
            src[r0 + k] = r0 + beam;
            tok[b * K + k] = dst[P + t];
        }
        for (k = 0; k < K; k++) {
            memcpy(hist + (int64_t)(r0 + k) * Lh, scratch + (b * K + k) * (int64_t)Lh, (size_t)(P + t + 1) * sizeof(int32_t));
            bscore[r0 + k] = run[next[k]];
            lens[r0 + k] = t + 1;
        }
        if (bidx) {   // the running beams' beam indices, gathered the same way
            for (k = 0; k < K; k++) {
                int beam = (int)(cidx[next[k]] / V);
                int32_t *dst = scratch + (b * K + k) * (int64_t)Lh;
                memcpy(dst, bidx + (int64_t)(r0 + beam) * F, (size_t)t * sizeof(int32_t));
                dst[t] = r0 + beam;
            }
            for (k = 0; k < K; k++)
                memcpy(bidx + (int64_t)(r0 + k) * F, scratch + (b * K + k) * (int64_t)Lh, (size_t)(t + 1) * sizeof(int32_t));
        }
        // 4. Hugging Face's early-stop heuristic and the input's end
        L = o->early_stopping == 2 && lp > 0.0f ? (double)o->max_new : (double)(t + 1);
        all_fin = 1;
        for (k = 0; k < K; k++) {
            all_fin &= fin_flag[r0 + k] != 0;
            worst = fin_score[r0 + k] < worst ? fin_score[r0 + k] : worst;
        }
        for (k = 0; k < K; k++) {
            float best = (float)(bscore[r0] / (float)pow(L, (double)lp));
            any |= best > (fin_flag[r0 + k] ? worst : -1.0e9f);
        }
        unsat[i] = unsat[i] && any;
        done[i] = !unsat[i] || (o->early_stopping == 1 && all_fin) || t + 1 >= o->max_new;
    }
    return FAT5_OK;
}
