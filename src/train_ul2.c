// =============================================================================================
// ==[5.2] train: UL2 sampler ==

// The stream: documents in order (those of the configured split), each cut into consecutive pieces;
// every piece gets a denoiser drawn from the mixture and becomes one example (one packed sequence).
// The state is a counter-based RNG plus a position, so it saves to a short string; an example that
// does not fit the batch is carried to the next one, and get_state reports the position from
// before it was drawn, so a restored sampler draws it again, identically.

typedef struct fat5__ul2_pos {
    fat5_rng rng;
    int64_t epoch;        // completed passes over the documents
    int64_t doc;          // index of the current document
    int64_t pos;          // stream index of its first id (< the stream's length)
    int64_t off;          // its ids already used by earlier pieces
} fat5__ul2_pos;

struct fat5_ul2 {
    fat5_ctx *ctx;
    fat5_tokens *src;
    fat5_ul2_config cfg;
    double cum[FAT5_UL2_MAX_DENOISERS];         // cumulative mixture weights, the last exactly 1
    int64_t piece_len[FAT5_UL2_MAX_DENOISERS];  // the longest piece each denoiser takes
    int64_t max_piece;
    fat5__ul2_pos cur;        // after the last example drawn
    fat5__ul2_pos pend_from;  // before the carried example (when has_pend)
    int has_pend;
    int idle_wraps;           // passes over the corpus without an example (all its documents empty)
    int32_t *piece;           // [max_piece] the ids of the current piece
    int32_t *seg;             // [2 * (max_piece + 1)] noise and kept span lengths
    int32_t *pin, *ptgt;      // the carried example: [max_enc_len] input, [max_dec_len] target
    int64_t pin_n, ptgt_n;
    int32_t *enc, *lab;       // the batch: [enc_tokens], [dec_tokens]
    int32_t *enc_cu, *dec_cu; // [enc_tokens + 1]
};

// round half to even, as numpy and T5's helpers round
static double fat5__round_even(double x) {
    double f = floor(x), d = x - f;
    if (d > 0.5) return f + 1;
    if (d < 0.5) return f;
    return fmod(f, 2.0) == 0 ? f : f + 1;
}

// SPAN on a piece of L ids: how many are noise and in how many spans. noise = round(L r) within
// [1, L-1], spans = round(noise / mu) within [1, min(noise, L - noise, sentinels)]. A piece of one
// id is all noise, one span (its kept part empty).
static void fat5__ul2_span_counts(const fat5_denoiser *d, int64_t L, int64_t n_sent, int64_t *noise,
                                  int64_t *spans) {
    double nz, k;
    if (L <= 1) {
        *noise = L;
        *spans = L;
        return;
    }
    nz = fat5__round_even((double)L * d->r);
    if (nz > (double)(L - 1)) nz = (double)(L - 1);
    if (nz < 1) nz = 1;
    k = fat5__round_even(nz / d->mu);
    if (k > nz) k = nz;
    if (k > (double)L - nz) k = (double)L - nz;
    if (k > (double)n_sent) k = (double)n_sent;
    if (k < 1) k = 1;
    *noise = (int64_t)nz;
    *spans = (int64_t)k;
}

// the input and target lengths of an example made from a piece of L ids (mode token included)
static void fat5__ul2_lengths(const fat5_ul2_config *c, const fat5_denoiser *d, int64_t L,
                              int64_t *in_len, int64_t *tgt_len) {
    int64_t m = d->mode_token >= 0, noise, spans;
    if (d->kind == FAT5_DENOISE_PREFIX) {   // the longest of each over the split points
        *in_len = m + (L >= 2 ? L - 1 : 0) + 1;
        *tgt_len = L + 1 - (L >= 2);
        return;
    }
    fat5__ul2_span_counts(d, L, c->n_sentinels, &noise, &spans);
    *in_len = m + L - noise + spans + 1;
    *tgt_len = noise + spans + 1;
}

// The longest piece whose example fits max_enc_len and max_dec_len (T5's random_spans_helper;
// both lengths grow with L, so a binary search finds it). 0 when not even one id fits.
static int64_t fat5__ul2_piece_len(const fat5_ul2_config *c, const fat5_denoiser *d) {
    int64_t lo = 0, hi = c->max_enc_len + c->max_dec_len;   // input + target > L
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2, a, b;
        fat5__ul2_lengths(c, d, mid, &a, &b);
        if (a <= c->max_enc_len && b <= c->max_dec_len) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

FAT5_API fat5_ul2_config fat5_ul2_config_default(void) {
    static const double mu[7] = {3, 8, 0, 3, 8, 64, 64}, r[7] = {.15, .15, 0, .5, .15, .15, .5};
    static const double w[7] = {.165, .165, .34, .0825, .0825, .0825, .0825};
    fat5_ul2_config c;
    int i;
    memset(&c, 0, sizeof c);
    c.n_denoisers = 7;
    for (i = 0; i < 7; i++) {
        c.denoisers[i].kind = i == 2 ? FAT5_DENOISE_PREFIX : FAT5_DENOISE_SPAN;
        c.denoisers[i].mu = mu[i];
        c.denoisers[i].r = r[i];
        c.denoisers[i].mode_token = -1;
        c.denoisers[i].weight = w[i];
    }
    c.enc_tokens = 512 * 16;
    c.dec_tokens = 512 * 16;
    c.max_enc_len = 512;
    c.max_dec_len = 512;
    c.sentinel_first = -1;
    c.n_sentinels = 0;
    return c;
}

FAT5_API fat5_ul2_config fat5_ul2_config_t5(void) {
    fat5_ul2_config c = fat5_ul2_config_default();
    c.n_denoisers = 1;
    c.denoisers[0].kind = FAT5_DENOISE_SPAN;
    c.denoisers[0].mu = 3;
    c.denoisers[0].r = .15;
    c.denoisers[0].weight = 1;
    c.max_enc_len = 512;   // a 568-id piece: 512 input ids, 114 target ids
    c.max_dec_len = 114;
    c.enc_tokens = 512 * 16;
    c.dec_tokens = 114 * 16;
    return c;
}

// whether document `doc` belongs to the held-out share: splitmix64 of its index against eval_fraction
static int fat5__ul2_held_out(int64_t doc, double eval_fraction) {
    uint64_t z = (uint64_t)doc ^ 0x6A09E667F3BCC908ull;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0) < eval_fraction;
}

static int fat5__ul2_in_split(const fat5_ul2 *s, int64_t doc) {
    return s->cfg.split == 0 || (s->cfg.split == 2) == fat5__ul2_held_out(doc, s->cfg.eval_fraction);
}

static fat5_status fat5__ul2_check(fat5_ctx *ctx, const fat5_ul2_config *c, const fat5_tokens *src) {
    int64_t V = src->vocab, lo = (int64_t)c->sentinel_first - c->n_sentinels + 1, d_in = 0, i;
    int any_span = 0, k;
    if (c->n_denoisers < 1 || c->n_denoisers > FAT5_UL2_MAX_DENOISERS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: n_denoisers %d, want 1 .. %d", c->n_denoisers,
                         FAT5_UL2_MAX_DENOISERS);
    for (k = 0; k < c->n_denoisers; k++) {
        const fat5_denoiser *d = &c->denoisers[k];
        if (d->kind != FAT5_DENOISE_SPAN && d->kind != FAT5_DENOISE_PREFIX)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: unknown kind %d", k, (int)d->kind);
        if (!(d->weight > 0) || !isfinite(d->weight))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: weight %g, want a positive finite number",
                             k, d->weight);
        if (d->kind == FAT5_DENOISE_SPAN) {
            any_span = 1;
            if (!(d->mu > 0) || !isfinite(d->mu))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mean span length mu %g, want > 0", k, d->mu);
            if (!(d->r > 0 && d->r < 1))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: corruption rate r %g, want 0 < r < 1", k, d->r);
        }
        if (d->mode_token != -1) {
            if (d->mode_token < 0 || d->mode_token >= V)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mode token %ld outside the vocabulary "
                                 "of %lld (-1 for none)", k, (long)d->mode_token, (long long)V);
            if (d->mode_token == src->eos)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mode token %ld is the eos id", k,
                                 (long)d->mode_token);
            if (c->n_sentinels > 0 && d->mode_token >= lo && d->mode_token <= c->sentinel_first)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mode token %ld is a sentinel (%lld .. %ld)",
                                 k, (long)d->mode_token, (long long)lo, (long)c->sentinel_first);
        }
    }
    if (c->n_sentinels < 0 || (any_span && c->n_sentinels == 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: n_sentinels %ld: set sentinel_first and n_sentinels for the "
                         "vocabulary (ByT5 / pretokenize: %lld and %lld)", (long)c->n_sentinels,
                         (long long)(V - 1), (long long)(V > 259 ? V - 259 : 0));
    if (c->n_sentinels > 0) {
        if (c->sentinel_first < 0 || c->sentinel_first >= V || lo < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: sentinels %lld .. %ld are not inside the vocabulary "
                             "0 .. %lld", (long long)lo, (long)c->sentinel_first, (long long)(V - 1));
        if (src->eos >= lo && src->eos <= c->sentinel_first)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: the eos id %ld is inside the sentinels %lld .. %ld",
                             (long)src->eos, (long long)lo, (long)c->sentinel_first);
    }
    if (c->enc_tokens < 1 || c->dec_tokens < 1 || c->enc_tokens >= INT32_MAX || c->dec_tokens >= INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: token budgets %lld / %lld, want 1 .. %d", (long long)c->enc_tokens,
                         (long long)c->dec_tokens, INT32_MAX - 1);
    if (c->max_enc_len < 0 || c->max_enc_len > c->enc_tokens || c->max_dec_len < 0 || c->max_dec_len > c->dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: max_enc_len %lld / max_dec_len %lld must lie within the "
                         "batch budgets %lld / %lld", (long long)c->max_enc_len, (long long)c->max_dec_len,
                         (long long)c->enc_tokens, (long long)c->dec_tokens);
    if (c->split < 0 || c->split > 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: split %d, want 0 (all), 1 (train) or 2 (held out)", c->split);
    if (!(c->eval_fraction >= 0 && c->eval_fraction <= 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: eval_fraction %g, want 0 .. 1", c->eval_fraction);
    if (src->n_ids - src->n_docs <= 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: empty corpus: %lld documents and no id besides eos",
                         (long long)src->n_docs);
    if (c->split != 0) {
        for (i = 0; i < src->n_docs && d_in == 0; i++)
            d_in += (c->split == 2) == fat5__ul2_held_out(i, c->eval_fraction);
        if (d_in == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: the %s split is empty: eval_fraction %g of %lld documents",
                             c->split == 2 ? "held-out" : "training", c->eval_fraction, (long long)src->n_docs);
    }
    return FAT5_OK;
}

FAT5_API void fat5_ul2_destroy(fat5_ul2 *s) {
    if (!s) return;
    fat5__free(s->ctx, s->piece);
    fat5__free(s->ctx, s->seg);
    fat5__free(s->ctx, s->pin);
    fat5__free(s->ctx, s->ptgt);
    fat5__free(s->ctx, s->enc);
    fat5__free(s->ctx, s->lab);
    fat5__free(s->ctx, s->enc_cu);
    fat5__free(s->ctx, s->dec_cu);
    fat5__free(s->ctx, s);
}

FAT5_API fat5_status fat5_ul2_create(fat5_ctx *ctx, const fat5_ul2_config *cfg, fat5_tokens *src,
                                     fat5_ul2 **out) {
    fat5_ul2_config c;
    fat5_ul2 *s;
    fat5_status st;
    double total = 0, acc = 0;
    size_t seg_n;
    int k;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ul2_create: out is NULL");
    *out = NULL;
    if (!cfg || !src) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ul2_create: %s is NULL", cfg ? "src" : "cfg");
    c = *cfg;
    if (c.max_enc_len == 0) c.max_enc_len = c.enc_tokens;
    if (c.max_dec_len == 0) c.max_dec_len = c.dec_tokens;
    if ((st = fat5__ul2_check(ctx, &c, src)) != FAT5_OK) return st;
    s = FAT5__CAST(fat5_ul2 *, fat5__calloc(ctx, 1, sizeof *s));
    if (!s) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_ul2_create: out of memory");
    s->ctx = ctx;
    s->src = src;
    s->cfg = c;
    for (k = 0; k < c.n_denoisers; k++) total += c.denoisers[k].weight;
    for (k = 0; k < c.n_denoisers; k++) {
        int64_t a, b;
        acc += c.denoisers[k].weight;
        s->cum[k] = k == c.n_denoisers - 1 ? 1.0 : acc / total;
        s->piece_len[k] = fat5__ul2_piece_len(&c, &c.denoisers[k]);
        if (s->piece_len[k] < 2) {
            fat5__ul2_lengths(&c, &c.denoisers[k], 2, &a, &b);
            fat5_ul2_destroy(s);
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: max_enc_len %lld / max_dec_len %lld are too "
                             "small for an example of two ids (it needs %lld input and %lld target tokens)", k,
                             (long long)c.max_enc_len, (long long)c.max_dec_len, (long long)a, (long long)b);
        }
        if (s->piece_len[k] > s->max_piece) s->max_piece = s->piece_len[k];
    }
    s->cur.rng = fat5_rng_init(c.seed);
    seg_n = 2 * ((size_t)s->max_piece + 1);
    s->piece = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)s->max_piece, sizeof(int32_t)));
    s->seg = FAT5__CAST(int32_t *, fat5__calloc(ctx, seg_n, sizeof(int32_t)));
    s->pin = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.max_enc_len, sizeof(int32_t)));
    s->ptgt = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.max_dec_len, sizeof(int32_t)));
    s->enc = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.enc_tokens, sizeof(int32_t)));
    s->lab = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.dec_tokens, sizeof(int32_t)));
    s->enc_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.enc_tokens + 1, sizeof(int32_t)));
    s->dec_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.enc_tokens + 1, sizeof(int32_t)));
    if (!s->piece || !s->seg || !s->pin || !s->ptgt || !s->enc || !s->lab || !s->enc_cu || !s->dec_cu) {
        fat5_ul2_destroy(s);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_ul2_create: out of memory for the batch buffers");
    }
    *out = s;
    return FAT5_OK;
}

// Splits n items into k positive parts (k <= n), every such split equally likely: k - 1 cut
// points among the n - 1 gaps, chosen by selection sampling (Knuth's algorithm S), one draw per
// gap until the cuts are placed. n = 0 (k = 1) gives one empty part.
static void fat5__ul2_segment(fat5_rng *rng, int64_t n, int64_t k, int32_t *parts) {
    int64_t need = k - 1, gap, last = 0, j = 0;
    for (gap = 1; gap < n && need > 0; gap++) {
        int64_t left = n - gap;   // gaps from this one on
        if (need == left || (int64_t)fat5_rng_below(rng, (uint64_t)left) < need) {
            parts[j++] = (int32_t)(gap - last);
            last = gap;
            need--;
        }
    }
    parts[j] = (int32_t)(n - last);
}

// Moves p to the next document (wrapping to the start of the stream after the last one).
static void fat5__ul2_next_doc(fat5_ul2 *s, fat5__ul2_pos *p, int64_t end) {
    p->pos = end + 1;
    p->doc++;
    p->off = 0;
    if (p->pos >= s->src->n_ids) {
        p->pos = 0;
        p->doc = 0;
        p->epoch++;
        s->idle_wraps++;
    }
}

// Draws the next example from s->cur into pin / ptgt, advancing s->cur.
static fat5_status fat5__ul2_make(fat5_ul2 *s) {
    fat5__ul2_pos *p = &s->cur;
    const fat5_ul2_config *c = &s->cfg;
    const fat5_denoiser *d;
    int32_t *in = s->pin, *tg = s->ptgt, eos = s->src->eos;
    int64_t n = 0, ni = 0, nt = 0, j, k;
    double u;
    int at_end = 0, dn;
    fat5_status st;
    for (;;) {
        if (s->idle_wraps > 1)
            return fat5__err(s->ctx, FAT5_ERR_STATE, "ul2: every document of the split is empty");
        if (!fat5__ul2_in_split(s, p->doc)) {   // skip it: find its end
            do {
                if ((st = fat5__tok_read_doc(s->src, p->pos + p->off, s->max_piece, s->piece, &n, &at_end)) != FAT5_OK)
                    return st;
                p->off += n;
            } while (!at_end);
            fat5__ul2_next_doc(s, p, p->pos + p->off);
            continue;
        }
        u = fat5_rng_uniform(&p->rng);
        for (dn = 0; dn < c->n_denoisers - 1 && u >= s->cum[dn]; dn++) {}
        if ((st = fat5__tok_read_doc(s->src, p->pos + p->off, s->piece_len[dn], s->piece, &n, &at_end)) != FAT5_OK)
            return st;
        p->off += n;
        if (at_end) fat5__ul2_next_doc(s, p, p->pos + p->off);
        if (n > 0) break;   // an empty document gives nothing
    }
    s->idle_wraps = 0;
    d = &c->denoisers[dn];
    if (d->mode_token >= 0) in[ni++] = d->mode_token;
    if (d->kind == FAT5_DENOISE_PREFIX) {
        int64_t split = n >= 2 ? 1 + (int64_t)fat5_rng_below(&p->rng, (uint64_t)(n - 1)) : 0;
        memcpy(in + ni, s->piece, (size_t)split * sizeof(int32_t));
        ni += split;
        memcpy(tg, s->piece + split, (size_t)(n - split) * sizeof(int32_t));
        nt = n - split;
    } else {
        int64_t noise, spans, at = 0;
        int32_t *nl = s->seg, *kl = s->seg + s->max_piece + 1;
        fat5__ul2_span_counts(d, n, c->n_sentinels, &noise, &spans);
        fat5__ul2_segment(&p->rng, noise, spans, nl);
        fat5__ul2_segment(&p->rng, n - noise, spans, kl);
        for (k = 0; k < spans; k++) {   // kept_k, then noise span k behind sentinel_first - k
            int32_t sentinel = (int32_t)(c->sentinel_first - k);
            for (j = 0; j < kl[k]; j++) in[ni++] = s->piece[at++];
            in[ni++] = sentinel;
            tg[nt++] = sentinel;
            for (j = 0; j < nl[k]; j++) tg[nt++] = s->piece[at++];
        }
    }
    in[ni++] = eos;
    tg[nt++] = eos;
    s->pin_n = ni;
    s->ptgt_n = nt;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_ul2_next_batch(fat5_ul2 *s, fat5_batch *out) {
    int64_t ne = 0, nd = 0, n_seq = 0;
    fat5_status st;
    if (!s || !out) return fat5__err(s ? s->ctx : NULL, FAT5_ERR_INVALID_ARG, "fat5_ul2_next_batch: NULL argument");
    s->enc_cu[0] = s->dec_cu[0] = 0;
    for (;;) {
        if (!s->has_pend) {
            s->pend_from = s->cur;
            if ((st = fat5__ul2_make(s)) != FAT5_OK) {
                s->cur = s->pend_from;
                return st;
            }
            s->has_pend = 1;
        }
        if (ne + s->pin_n > s->cfg.enc_tokens || nd + s->ptgt_n > s->cfg.dec_tokens) break;   // carried
        memcpy(s->enc + ne, s->pin, (size_t)s->pin_n * sizeof(int32_t));
        memcpy(s->lab + nd, s->ptgt, (size_t)s->ptgt_n * sizeof(int32_t));
        ne += s->pin_n;
        nd += s->ptgt_n;
        n_seq++;
        s->enc_cu[n_seq] = (int32_t)ne;
        s->dec_cu[n_seq] = (int32_t)nd;
        s->has_pend = 0;
        if (ne + 1 > s->cfg.enc_tokens || nd + 2 > s->cfg.dec_tokens) break;   // nothing more fits
    }
    memset(out, 0, sizeof *out);
    out->n_seq = n_seq;
    out->n_enc_tokens = ne;
    out->n_dec_tokens = nd;
    out->enc_tokens = s->enc;
    out->enc_cu_seqlens = s->enc_cu;
    out->dec_tokens = NULL;
    out->labels = s->lab;
    out->dec_cu_seqlens = s->dec_cu;
    return FAT5_OK;
}

FAT5_API int64_t fat5_ul2_epoch(const fat5_ul2 *s) {
    if (!s) return 0;
    return s->has_pend ? s->pend_from.epoch : s->cur.epoch;
}

// "ul2v1:seed:counter:epoch:doc:pos:off:ids", decimal; ids (the stream's length) ties the state to
// the corpus it was taken from.
FAT5_API fat5_status fat5_ul2_get_state(const fat5_ul2 *s, char *buf, size_t cap) {
    const fat5__ul2_pos *p;
    int n;
    if (!s || !buf) return fat5__err(s ? s->ctx : NULL, FAT5_ERR_INVALID_ARG, "fat5_ul2_get_state: NULL argument");
    p = s->has_pend ? &s->pend_from : &s->cur;
    n = snprintf(buf, cap, "ul2v1:%llu:%llu:%lld:%lld:%lld:%lld:%lld", (unsigned long long)p->rng.seed,
                 (unsigned long long)p->rng.counter, (long long)p->epoch, (long long)p->doc, (long long)p->pos,
                 (long long)p->off, (long long)s->src->n_ids);
    if (n < 0 || (size_t)n >= cap)
        return fat5__err(s->ctx, FAT5_ERR_INVALID_ARG, "fat5_ul2_get_state: the buffer of %zu bytes is too small "
                         "(FAT5_UL2_STATE_CAP is enough)", cap);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_ul2_set_state(fat5_ul2 *s, const char *state) {
    uint64_t v[7];
    const char *q;
    fat5__ul2_pos p;
    int i, at_end = 0;
    int64_t seen = 0, n;
    fat5_status st;
    if (!s || !state) return fat5__err(s ? s->ctx : NULL, FAT5_ERR_INVALID_ARG, "fat5_ul2_set_state: NULL argument");
    if (strncmp(state, "ul2v1:", 6) != 0)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: does not start with \"ul2v1:\"");
    q = state + 6;
    for (i = 0; i < 7; i++) {
        const char *e = strchr(q, ':');
        size_t len = e ? (size_t)(e - q) : strlen(q);
        if ((i < 6) != (e != NULL) || !fat5__parse_u64(q, len, &v[i]) || (i >= 2 && v[i] > (uint64_t)INT64_MAX))
            return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: field %d is not a decimal number (want "
                             "ul2v1:seed:counter:epoch:doc:pos:off:ids)", i + 2);
        q += len + (e != NULL);
    }
    p.rng.seed = v[0];
    p.rng.counter = v[1];
    p.epoch = (int64_t)v[2];
    p.doc = (int64_t)v[3];
    p.pos = (int64_t)v[4];
    p.off = (int64_t)v[5];
    if ((int64_t)v[6] != s->src->n_ids)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: taken from a stream of %lld ids, this one has %lld",
                         (long long)v[6], (long long)s->src->n_ids);
    if (p.doc >= s->src->n_docs || p.pos >= s->src->n_ids || p.off >= s->src->n_ids - p.pos)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: document %lld at id %lld + %lld is outside the stream "
                         "(%lld documents, %lld ids)", (long long)p.doc, (long long)p.pos, (long long)p.off,
                         (long long)s->src->n_docs, (long long)s->src->n_ids);
    if (p.pos > 0) {   // a document starts right after an eos
        if ((st = fat5__tok_read_doc(s->src, p.pos - 1, 1, s->piece, &n, &at_end)) != FAT5_OK) return st;
        if (!at_end || n != 0)
            return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: id %lld does not start a document", (long long)p.pos);
    }
    {   // the document index goes with the position (it decides the held-out split)
        int64_t d = 0;
        if ((st = fat5__tok_doc_index(s->src, p.pos, &d)) != FAT5_OK) return st;
        if (d != p.doc)
            return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: the document index (doc, field 5) is %lld, but id "
                             "%lld starts document %lld", (long long)p.doc, (long long)p.pos, (long long)d);
    }
    at_end = 0;
    while (seen < p.off) {   // and holds more than off ids
        int64_t want = p.off - seen < s->max_piece ? p.off - seen : s->max_piece;
        if ((st = fat5__tok_read_doc(s->src, p.pos + seen, want, s->piece, &n, &at_end)) != FAT5_OK) return st;
        seen += n;
        if (at_end) break;
    }
    if (seen < p.off || at_end)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: the document at id %lld is shorter than the offset %lld",
                         (long long)p.pos, (long long)p.off);
    if (v[0] != s->cfg.seed)   // another run's stream: continuing it would give other data
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: drawn with seed %llu, this sampler's seed is %llu",
                         (unsigned long long)v[0], (unsigned long long)s->cfg.seed);
    s->cur = p;
    s->has_pend = 0;
    s->idle_wraps = 0;
    return FAT5_OK;
}

