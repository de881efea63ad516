// ---------------------------------------------------------------------------------------------
// model: workspace, forward, backward (CPU reference path)

FAT5_API fat5_loss_config fat5_loss_config_default(void) {
    fat5_loss_config l;
    l.z_loss = 0.0;
    l.label_smoothing = 0.0;
    return l;
}

// Lays out the activation workspace for Te encoder and Td decoder tokens. With base == NULL it only
// counts; returns 0 when the size overflows.
static int fat5__ws_layout(fat5_model *m, float *base, int64_t Te, int64_t Td, size_t *total) {
    const fat5_model_config *c = &m->cfg;
    size_t D = (size_t)c->d_model, I = (size_t)(c->num_heads * c->d_kv), F = (size_t)c->d_ff;
    size_t H = (size_t)c->num_heads, V = (size_t)c->vocab_size, off = 0;
    int ok = 1, l;
#define FAT5__WS(ptr, rows, cols)                                                              \
    do {                                                                                       \
        size_t n_;                                                                             \
        if (!fat5__mul_ok((size_t)(rows), (size_t)(cols), &n_) || !fat5__add_ok(off, n_, &off)) \
            ok = 0;                                                                            \
        else if (base)                                                                         \
            (ptr) = base + off - n_;                                                           \
    } while (0)
    for (l = 0; l < c->num_layers + c->num_decoder_layers && ok; l++) {
        int dec = l >= c->num_layers;
        fat5__layer_acts *a = dec ? &m->dec_a[l - c->num_layers] : &m->enc_a[l];
        size_t T = (size_t)(dec ? Td : Te);
        FAT5__WS(a->h_sa, T, D);
        FAT5__WS(a->rs_sa, T, 1);
        FAT5__WS(a->n_sa, T, D);
        FAT5__WS(a->q, T, I);
        FAT5__WS(a->k, T, I);
        FAT5__WS(a->v, T, I);
        FAT5__WS(a->att, T, I);
        FAT5__WS(a->lse, T, H);
        if (dec) {
            FAT5__WS(a->h_ca, T, D);
            FAT5__WS(a->rs_ca, T, 1);
            FAT5__WS(a->n_ca, T, D);
            FAT5__WS(a->cq, T, I);
            FAT5__WS(a->ck, Te, I);
            FAT5__WS(a->cv, Te, I);
            FAT5__WS(a->catt, T, I);
            FAT5__WS(a->clse, T, H);
        }
        FAT5__WS(a->h_ff, T, D);
        FAT5__WS(a->rs_ff, T, 1);
        FAT5__WS(a->n_ff, T, D);
        FAT5__WS(a->ff_a, T, F);
        if (c->gated) FAT5__WS(a->ff_b, T, F);
        FAT5__WS(a->ff_h, T, F);
    }
    FAT5__WS(m->enc_hf, Te, D);
    FAT5__WS(m->enc_rsf, Te, 1);
    FAT5__WS(m->enc_out, Te, D);
    FAT5__WS(m->dec_hf, Td, D);
    FAT5__WS(m->dec_rsf, Td, 1);
    FAT5__WS(m->dec_out, Td, D);
    FAT5__WS(m->logits, Td, V);
    FAT5__WS(m->tok_lse, Td, 1);
#undef FAT5__WS
    *total = off;
    return ok;
}

#ifndef FAT5_NO_CUDA
static fat5_status fat5__gpu_reserve(fat5_model *m, int64_t n_seq, int64_t te, int64_t td);
static fat5_status fat5__gpu_forward(fat5_model *m, fat5_forward_result *out);
static fat5_status fat5__gpu_backward(fat5_model *m, float grad_scale);
static fat5_status fat5__gpu_get_logits(fat5_model *m, float *dst, int64_t n);
#endif

// CPU activations for te encoder and td decoder tokens
static fat5_status fat5__cpu_reserve(fat5_model *m, int64_t te, int64_t td) {
    fat5_ctx *ctx = m->ctx;
    size_t total = 0, bytes;
    if (!fat5__ws_layout(m, NULL, te, td, &total) || !fat5__mul_ok(total, sizeof(float), &bytes))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: workspace size overflows");
    m->enc_a = FAT5__CAST(fat5__layer_acts *, fat5__calloc(ctx, (size_t)m->cfg.num_layers, sizeof(fat5__layer_acts)));
    m->dec_a = FAT5__CAST(fat5__layer_acts *,
                          fat5__calloc(ctx, (size_t)m->cfg.num_decoder_layers, sizeof(fat5__layer_acts)));
    m->ws = FAT5__CAST(float *, fat5__malloc(ctx, bytes));
    if (!m->enc_a || !m->dec_a || !m->ws)
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: cannot allocate %.1f MiB of activations",
                         (double)bytes / 1048576.0);
    fat5__ws_layout(m, m->ws, te, td, &total);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_reserve(fat5_model *m, int64_t n_seq, int64_t te, int64_t td) {
    fat5_ctx *ctx = m->ctx;
    fat5_status st;
    int64_t i;
    if (n_seq < 1 || te < 1 || td < 1 || te > INT32_MAX || td > INT32_MAX || n_seq > te)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_model_reserve: n_seq %lld, encoder tokens %lld, decoder tokens %lld: each must be "
                         "in [1, 2^31) and n_seq <= encoder tokens",
                         (long long)n_seq, (long long)te, (long long)td);
    if (n_seq <= m->cap_seq && te <= m->cap_te && td <= m->cap_td) return FAT5_OK;
    if (n_seq < m->cap_seq) n_seq = m->cap_seq;
    if (te < m->cap_te) te = m->cap_te;
    if (td < m->cap_td) td = m->cap_td;
    fat5__ws_free(m);
    m->enc_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    m->dec_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    m->enc_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)te, sizeof(int32_t)));
    m->dec_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)td, sizeof(int32_t)));
    m->labels = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)td, sizeof(int32_t)));
    if (!m->enc_cu || !m->dec_cu || !m->enc_tok || !m->dec_tok || !m->labels) {
        fat5__ws_free(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: out of memory");
    }
#ifndef FAT5_NO_CUDA
    if (m->gm) st = fat5__gpu_reserve(m, n_seq, te, td);
    else
#endif
        st = fat5__cpu_reserve(m, te, td);
    if (st) {
        fat5__ws_free(m);
        return st;
    }
    for (i = 0; i < td; i++) m->labels[i] = -100;
    m->cap_seq = n_seq;
    m->cap_te = te;
    m->cap_td = td;
    return FAT5_OK;
}

// Checks a batch: offsets, token ids, labels. Messages name the sequence and position.
static fat5_status fat5__check_batch(fat5_model *m, const fat5_batch *b) {
    fat5_ctx *ctx = m->ctx;
    int64_t s, t, V = m->cfg.vocab_size, te, td;
    if (!b) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: NULL");
    if (b->n_seq < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: empty (n_seq = %lld)", (long long)b->n_seq);
    if (!b->enc_tokens || !b->enc_cu_seqlens || !b->dec_cu_seqlens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: enc_tokens, enc_cu_seqlens and dec_cu_seqlens are required");
    if (!b->labels && !b->dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: give labels, dec_tokens or both");
    if (b->enc_cu_seqlens[0] != 0 || b->dec_cu_seqlens[0] != 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: cu_seqlens must start at 0");
    for (s = 0; s < b->n_seq; s++) {
        int64_t le = (int64_t)b->enc_cu_seqlens[s + 1] - b->enc_cu_seqlens[s];
        int64_t ld = (int64_t)b->dec_cu_seqlens[s + 1] - b->dec_cu_seqlens[s];
        if (le < 0 || ld < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld has a negative %s length (%lld)",
                             (long long)s, le < 0 ? "encoder" : "decoder", (long long)(le < 0 ? le : ld));
        if (le == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "batch: sequence %lld has no encoder tokens (cross-attention needs at least one)",
                             (long long)s);
    }
    te = b->enc_cu_seqlens[b->n_seq];
    td = b->dec_cu_seqlens[b->n_seq];
    if (td < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: no decoder tokens");
    for (t = 0; t < te; t++)
        if (b->enc_tokens[t] < 0 || b->enc_tokens[t] >= V)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: encoder token %lld is id %d, outside [0, vocab_size %lld)",
                             (long long)t, (int)b->enc_tokens[t], (long long)V);
    for (t = 0; t < td; t++) {
        if (b->dec_tokens && (b->dec_tokens[t] < 0 || b->dec_tokens[t] >= V))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: decoder token %lld is id %d, outside [0, vocab_size %lld)",
                             (long long)t, (int)b->dec_tokens[t], (long long)V);
        if (b->labels && b->labels[t] != -100 && (b->labels[t] < 0 || b->labels[t] >= V))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "batch: label %lld is id %d, outside [0, vocab_size %lld) and not -100",
                             (long long)t, (int)b->labels[t], (long long)V);
    }
    return FAT5_OK;
}

static void fat5__attn_shape_set(fat5__attn_shape *s, const fat5_model *m, const int32_t *cu_q, const int32_t *cu_k,
                                 fat5__attn_kind kind) {
    s->n_seq = m->n_seq;
    s->H = m->cfg.num_heads;
    s->dk = m->cfg.d_kv;
    s->cu_q = cu_q;
    s->cu_k = cu_k;
    s->kind = kind;
    s->nb = (int)m->cfg.rel_buckets;
    s->max_distance = (int)m->cfg.rel_max_distance;
}

#define FAT5__W(m, idx) ((m)->w + (m)->params[idx].offset)
#define FAT5__G(m, idx) ((m)->g + (m)->params[idx].offset)

// One FFN sublayer forward: stream h [T,D] += wo(act(wi0 n) [* wi1 n]), n = rmsnorm(h)
static void fat5__cpu_ffn_fwd(fat5_model *m, const fat5__layer *y, fat5__layer_acts *a, float *h, int64_t T) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, F = c->d_ff, i;
    memcpy(a->h_ff, h, (size_t)(T * D) * sizeof(float));
    fat5__cpu_rmsnorm_fwd(a->n_ff, a->rs_ff, h, FAT5__W(m, y->ln_ff), T, D, (float)c->layer_norm_eps);
    fat5__cpu_mm_nt(a->ff_a, a->n_ff, FAT5__W(m, y->wi0), T, F, D, 0);
    if (c->gated) fat5__cpu_mm_nt(a->ff_b, a->n_ff, FAT5__W(m, y->wi1), T, F, D, 0);
    fat5__cpu_act_fwd(a->ff_h, a->ff_a, c->gated ? a->ff_b : NULL, T * F, c->act);
    fat5__cpu_mm_nt(h, a->ff_h, FAT5__W(m, y->wo), T, D, F, 1);
    (void)i;
}

// Self-attention sublayer forward: h += o(attn(q, k, v)) on n = rmsnorm(h)
static void fat5__cpu_self_attn_fwd(fat5_model *m, const fat5__layer *y, fat5__layer_acts *a, float *h, int64_t T,
                                    const int32_t *cu, fat5__attn_kind kind) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv;
    fat5__attn_shape s;
    memcpy(a->h_sa, h, (size_t)(T * D) * sizeof(float));
    fat5__cpu_rmsnorm_fwd(a->n_sa, a->rs_sa, h, FAT5__W(m, y->ln_sa), T, D, (float)c->layer_norm_eps);
    fat5__cpu_mm_nt(a->q, a->n_sa, FAT5__W(m, y->q), T, I, D, 0);
    fat5__cpu_mm_nt(a->k, a->n_sa, FAT5__W(m, y->k), T, I, D, 0);
    fat5__cpu_mm_nt(a->v, a->n_sa, FAT5__W(m, y->v), T, I, D, 0);
    fat5__attn_shape_set(&s, m, cu, cu, kind);
    fat5__cpu_attn_fwd(a->att, a->lse, a->q, a->k, a->v, FAT5__W(m, y->rel), &s);
    fat5__cpu_mm_nt(h, a->att, FAT5__W(m, y->o), T, D, I, 1);
}

static void fat5__cpu_forward(fat5_model *m, fat5_forward_result *out);

FAT5_API fat5_status fat5_model_forward(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                        fat5_forward_result *out) {
    const fat5_model_config *c = &m->cfg;
    fat5_status st;
    int64_t te, td, s, t;
    m->have_fwd = 0;
    if ((st = fat5__check_batch(m, b))) return st;
    te = b->enc_cu_seqlens[b->n_seq];
    td = b->dec_cu_seqlens[b->n_seq];
    if ((st = fat5_model_reserve(m, b->n_seq, te, td))) return st;
    m->n_seq = b->n_seq;
    m->te = te;
    m->td = td;
    m->loss = loss ? *loss : fat5_loss_config_default();
    memcpy(m->enc_cu, b->enc_cu_seqlens, (size_t)(b->n_seq + 1) * sizeof(int32_t));
    memcpy(m->dec_cu, b->dec_cu_seqlens, (size_t)(b->n_seq + 1) * sizeof(int32_t));
    memcpy(m->enc_tok, b->enc_tokens, (size_t)te * sizeof(int32_t));
    for (t = 0; t < td; t++) m->labels[t] = b->labels ? b->labels[t] : -100;
    if (b->dec_tokens) {
        memcpy(m->dec_tok, b->dec_tokens, (size_t)td * sizeof(int32_t));
    } else {  // shift_right per sequence
        for (s = 0; s < b->n_seq; s++)
            for (t = m->dec_cu[s]; t < m->dec_cu[s + 1]; t++) {
                int32_t prev = t == m->dec_cu[s] ? (int32_t)c->decoder_start_token_id : b->labels[t - 1];
                m->dec_tok[t] = prev == -100 ? (int32_t)c->pad_token_id : prev;
            }
    }
    m->n_count = 0;
    for (t = 0; t < td; t++) m->n_count += m->labels[t] != -100;
#ifndef FAT5_NO_CUDA
    if (m->gm) {
        if ((st = fat5__gpu_forward(m, out))) return st;
        m->have_fwd = 1;
        return FAT5_OK;
    }
#endif
    fat5__cpu_forward(m, out);
    m->have_fwd = 1;
    return FAT5_OK;
}

static void fat5__cpu_forward(fat5_model *m, fat5_forward_result *out) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, V = c->vocab_size, te = m->te, td = m->td, t, l;
    float *h;
    fat5__attn_shape sh;

    // encoder
    h = m->enc_hf;  // the residual stream lives in the final-norm input buffer
    fat5__cpu_embed_fwd(h, FAT5__W(m, m->shared), m->enc_tok, te, D);
    for (l = 0; l < c->num_layers; l++) {
        fat5__cpu_self_attn_fwd(m, &m->enc[l], &m->enc_a[l], h, te, m->enc_cu, FAT5__ATTN_BIDIR);
        fat5__cpu_ffn_fwd(m, &m->enc[l], &m->enc_a[l], h, te);
    }
    fat5__cpu_rmsnorm_fwd(m->enc_out, m->enc_rsf, h, FAT5__W(m, m->enc_final_ln), te, D, (float)c->layer_norm_eps);

    // decoder
    h = m->dec_hf;
    fat5__cpu_embed_fwd(h, FAT5__W(m, m->shared), m->dec_tok, td, D);
    for (l = 0; l < c->num_decoder_layers; l++) {
        const fat5__layer *y = &m->dec[l];
        fat5__layer_acts *a = &m->dec_a[l];
        fat5__cpu_self_attn_fwd(m, y, a, h, td, m->dec_cu, FAT5__ATTN_CAUSAL);
        memcpy(a->h_ca, h, (size_t)(td * D) * sizeof(float));
        fat5__cpu_rmsnorm_fwd(a->n_ca, a->rs_ca, h, FAT5__W(m, y->ln_ca), td, D, (float)c->layer_norm_eps);
        fat5__cpu_mm_nt(a->cq, a->n_ca, FAT5__W(m, y->cq), td, I, D, 0);
        fat5__cpu_mm_nt(a->ck, m->enc_out, FAT5__W(m, y->ck), te, I, D, 0);
        fat5__cpu_mm_nt(a->cv, m->enc_out, FAT5__W(m, y->cv), te, I, D, 0);
        fat5__attn_shape_set(&sh, m, m->dec_cu, m->enc_cu, FAT5__ATTN_CROSS);
        fat5__cpu_attn_fwd(a->catt, a->clse, a->cq, a->ck, a->cv, NULL, &sh);
        fat5__cpu_mm_nt(h, a->catt, FAT5__W(m, y->co), td, D, I, 1);
        fat5__cpu_ffn_fwd(m, y, a, h, td);
    }
    fat5__cpu_rmsnorm_fwd(m->dec_out, m->dec_rsf, h, FAT5__W(m, m->dec_final_ln), td, D, (float)c->layer_norm_eps);
    if (c->scale_decoder_outputs) {
        float sc = (float)(1.0 / sqrt((double)D));
        for (t = 0; t < td * D; t++) m->dec_out[t] *= sc;
    }
    fat5__cpu_mm_nt(m->logits, m->dec_out, FAT5__W(m, m->lm_head), td, V, D, 0);

    {
        double ce = 0, zs = 0;
        int64_t n = 0;
        fat5__cpu_xent_fwd(m->tok_lse, &ce, &zs, &n, m->logits, m->labels, td, V, m->loss.z_loss,
                           m->loss.label_smoothing);
        if (out) {
            out->n_tokens = n;
            out->ce = n ? ce / (double)n : 0.0;
            out->loss = n ? (ce + zs) / (double)n : 0.0;
        }
    }
}

FAT5_API fat5_status fat5_model_get_logits(fat5_model *m, float *dst, int64_t n) {
    if (!m->have_fwd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_logits: no forward has run");
    if (n != m->td * m->cfg.vocab_size)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_get_logits: buffer holds %lld floats, logits are %lld",
                         (long long)n, (long long)(m->td * m->cfg.vocab_size));
#ifndef FAT5_NO_CUDA
    if (m->gm) return fat5__gpu_get_logits(m, dst, n);
#endif
    memcpy(dst, m->logits, (size_t)n * sizeof(float));
    return FAT5_OK;
}

// FFN backward: dh [T,D] is the gradient of the stream after the sublayer; on return it holds the
// gradient of the stream before it. tmp needs 2*T*F + T*D floats.
static void fat5__cpu_ffn_bwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, float *dh, int64_t T,
                              float *tmp) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, F = c->d_ff;
    float *dffh = tmp, *da = tmp + T * F, *dn = tmp + 2 * T * F;
    float *db = dffh;  // act_bwd reads dffh[i] before writing db[i]
    fat5__cpu_mm_tn(FAT5__G(m, y->wo), dh, a->ff_h, D, F, T, 1);
    fat5__cpu_mm_nn(dffh, dh, FAT5__W(m, y->wo), T, F, D, 0);
    fat5__cpu_act_bwd(da, c->gated ? db : NULL, dffh, a->ff_a, c->gated ? a->ff_b : NULL, T * F, c->act);
    fat5__cpu_mm_tn(FAT5__G(m, y->wi0), da, a->n_ff, F, D, T, 1);
    fat5__cpu_mm_nn(dn, da, FAT5__W(m, y->wi0), T, D, F, 0);
    if (c->gated) {
        fat5__cpu_mm_tn(FAT5__G(m, y->wi1), db, a->n_ff, F, D, T, 1);
        fat5__cpu_mm_nn(dn, db, FAT5__W(m, y->wi1), T, D, F, 1);
    }
    fat5__cpu_rmsnorm_bwd(dh, FAT5__G(m, y->ln_ff), dn, a->h_ff, FAT5__W(m, y->ln_ff), a->rs_ff, T, D, 1);
}

// Self-attention backward, same convention as fat5__cpu_ffn_bwd. tmp needs 5*T*I + T*D floats.
static void fat5__cpu_self_attn_bwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, float *dh,
                                    int64_t T, const int32_t *cu, fat5__attn_kind kind, float *tmp) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv;
    float *datt = tmp, *dq = tmp + T * I, *dk = tmp + 2 * T * I, *dv = tmp + 3 * T * I, *dn = tmp + 4 * T * I;
    fat5__attn_shape s;
    fat5__cpu_mm_tn(FAT5__G(m, y->o), dh, a->att, D, I, T, 1);
    fat5__cpu_mm_nn(datt, dh, FAT5__W(m, y->o), T, I, D, 0);
    fat5__attn_shape_set(&s, m, cu, cu, kind);
    fat5__cpu_attn_bwd(dq, dk, dv, FAT5__G(m, y->rel), datt, a->att, a->lse, a->q, a->k, a->v, FAT5__W(m, y->rel), &s);
    fat5__cpu_mm_tn(FAT5__G(m, y->q), dq, a->n_sa, I, D, T, 1);
    fat5__cpu_mm_tn(FAT5__G(m, y->k), dk, a->n_sa, I, D, T, 1);
    fat5__cpu_mm_tn(FAT5__G(m, y->v), dv, a->n_sa, I, D, T, 1);
    fat5__cpu_mm_nn(dn, dq, FAT5__W(m, y->q), T, D, I, 0);
    fat5__cpu_mm_nn(dn, dk, FAT5__W(m, y->k), T, D, I, 1);
    fat5__cpu_mm_nn(dn, dv, FAT5__W(m, y->v), T, D, I, 1);
    fat5__cpu_rmsnorm_bwd(dh, FAT5__G(m, y->ln_sa), dn, a->h_sa, FAT5__W(m, y->ln_sa), a->rs_sa, T, D, 1);
}

FAT5_API fat5_status fat5_model_backward(fat5_model *m, float grad_scale) {
    const fat5_model_config *c = &m->cfg;
    fat5_ctx *ctx = m->ctx;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size;
    int64_t te = m->te, td = m->td, T = te > td ? te : td, l;
    size_t n_tmp = 0, n1, n2, n3;
    float *tmp, *dlogits, *dh_dec, *dh_enc, *d_enc_out;
    fat5__attn_shape sh;
    if (!m->have_fwd) return fat5__err(ctx, FAT5_ERR_STATE, "fat5_model_backward: no forward has run");
#ifndef FAT5_NO_CUDA
    if (m->gm) return fat5__gpu_backward(m, grad_scale);
#endif
    // scratch: dlogits [td, V], dh_dec [td, D], dh_enc + d_enc_out [te, D], sublayer temporaries
    n1 = (size_t)(td * V);
    n2 = (size_t)(2 * T * F + T * D);
    n3 = (size_t)(5 * T * I + T * D);
    if (n3 > n2) n2 = n3;
    n3 = (size_t)(2 * te * I + 2 * td * I + td * D);  // cross-attention scratch
    if (n3 > n2) n2 = n3;
    n_tmp = n1 + (size_t)(td * D) + (size_t)(2 * te * D) + n2;
    tmp = FAT5__CAST(float *, fat5__calloc(ctx, n_tmp, sizeof(float)));
    if (!tmp) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_backward: out of memory");
    dlogits = tmp + n2;
    dh_dec = dlogits + n1;
    dh_enc = dh_dec + td * D;
    d_enc_out = dh_enc + te * D;

    // loss -> logits -> decoder output
    fat5__cpu_xent_bwd(dlogits, m->logits, m->tok_lse, m->labels, td, V, m->loss.z_loss, m->loss.label_smoothing,
                       m->n_count ? (double)grad_scale / (double)m->n_count : 0.0);
    fat5__cpu_mm_tn(FAT5__G(m, m->lm_head), dlogits, m->dec_out, V, D, td, 1);
    fat5__cpu_mm_nn(tmp, dlogits, FAT5__W(m, m->lm_head), td, D, V, 0);
    if (c->scale_decoder_outputs) {
        float sc = (float)(1.0 / sqrt((double)D));
        int64_t i;
        for (i = 0; i < td * D; i++) tmp[i] *= sc;
    }
    fat5__cpu_rmsnorm_bwd(dh_dec, FAT5__G(m, m->dec_final_ln), tmp, m->dec_hf, FAT5__W(m, m->dec_final_ln), m->dec_rsf,
                          td, D, 0);
    // decoder layers, last to first
    for (l = c->num_decoder_layers - 1; l >= 0; l--) {
        const fat5__layer *y = &m->dec[l];
        const fat5__layer_acts *a = &m->dec_a[l];
        fat5__cpu_ffn_bwd(m, y, a, dh_dec, td, tmp);
        {   // cross-attention
            float *datt = tmp, *dq = datt + td * I, *dk = dq + td * I, *dv = dk + te * I, *dn = dv + te * I;
            fat5__cpu_mm_tn(FAT5__G(m, y->co), dh_dec, a->catt, D, I, td, 1);
            fat5__cpu_mm_nn(datt, dh_dec, FAT5__W(m, y->co), td, I, D, 0);
            fat5__attn_shape_set(&sh, m, m->dec_cu, m->enc_cu, FAT5__ATTN_CROSS);
            fat5__cpu_attn_bwd(dq, dk, dv, NULL, datt, a->catt, a->clse, a->cq, a->ck, a->cv, NULL, &sh);
            fat5__cpu_mm_tn(FAT5__G(m, y->cq), dq, a->n_ca, I, D, td, 1);
            fat5__cpu_mm_tn(FAT5__G(m, y->ck), dk, m->enc_out, I, D, te, 1);
            fat5__cpu_mm_tn(FAT5__G(m, y->cv), dv, m->enc_out, I, D, te, 1);
            fat5__cpu_mm_nn(d_enc_out, dk, FAT5__W(m, y->ck), te, D, I, 1);
            fat5__cpu_mm_nn(d_enc_out, dv, FAT5__W(m, y->cv), te, D, I, 1);
            fat5__cpu_mm_nn(dn, dq, FAT5__W(m, y->cq), td, D, I, 0);
            fat5__cpu_rmsnorm_bwd(dh_dec, FAT5__G(m, y->ln_ca), dn, a->h_ca, FAT5__W(m, y->ln_ca), a->rs_ca, td, D, 1);
        }
        fat5__cpu_self_attn_bwd(m, y, a, dh_dec, td, m->dec_cu, FAT5__ATTN_CAUSAL, tmp);
    }
    fat5__cpu_embed_bwd(FAT5__G(m, m->shared), dh_dec, m->dec_tok, td, D);
    // encoder
    fat5__cpu_rmsnorm_bwd(dh_enc, FAT5__G(m, m->enc_final_ln), d_enc_out, m->enc_hf, FAT5__W(m, m->enc_final_ln),
                          m->enc_rsf, te, D, 0);
    for (l = c->num_layers - 1; l >= 0; l--) {
        fat5__cpu_ffn_bwd(m, &m->enc[l], &m->enc_a[l], dh_enc, te, tmp);
        fat5__cpu_self_attn_bwd(m, &m->enc[l], &m->enc_a[l], dh_enc, te, m->enc_cu, FAT5__ATTN_BIDIR, tmp);
    }
    fat5__cpu_embed_bwd(FAT5__G(m, m->shared), dh_enc, m->enc_tok, te, D);
    fat5__free(ctx, tmp);
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// batches from JSON rows

static fat5_status fat5__rows_to_packed(fat5_ctx *ctx, const fat5__json *rows, const char *what, int allow_ignore,
                                        int32_t **tok, int32_t **cu, int64_t *n_rows) {
    const fat5__json *r, *e;
    size_t total = 0, i = 0, s = 0;
    *tok = NULL;
    *cu = NULL;
    if (!rows || rows->type != FAT5__J_ARRAY)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' must be an array of arrays of token ids", what);
    for (r = rows->child; r; r = r->next) {
        if (r->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' row %zu is not an array", what, s);
        if (!fat5__add_ok(total, r->n, &total) || total > (size_t)INT32_MAX)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: '%s' has more than 2^31 tokens", what);
        s++;
    }
    *tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, total ? total : 1, sizeof(int32_t)));
    *cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, rows->n + 1, sizeof(int32_t)));
    if (!*tok || !*cu) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "batch: out of memory");
    s = 0;
    for (r = rows->child; r; r = r->next, s++) {
        for (e = r->child; e; e = e->next) {
            int64_t v;
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &v) || v < (allow_ignore ? -100 : 0) ||
                v > INT32_MAX || (v < 0 && v != -100))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' row %zu position %zu: '%s' is not a token id%s",
                                 what, s, (size_t)(i - (size_t)(*cu)[s]), e->type == FAT5__J_NUMBER ? e->str : "value",
                                 allow_ignore ? " or -100" : "");
            (*tok)[i++] = (int32_t)v;
        }
        (*cu)[s + 1] = (int32_t)i;
    }
    *n_rows = (int64_t)rows->n;
    return FAT5_OK;
}

FAT5_API void fat5_batch_free(fat5_ctx *ctx, fat5_batch *b) {
    if (!b) return;
    fat5__free(ctx, (void *)(uintptr_t)b->enc_tokens);
    fat5__free(ctx, (void *)(uintptr_t)b->enc_cu_seqlens);
    fat5__free(ctx, (void *)(uintptr_t)b->dec_tokens);
    fat5__free(ctx, (void *)(uintptr_t)b->labels);
    fat5__free(ctx, (void *)(uintptr_t)b->dec_cu_seqlens);
    memset(b, 0, sizeof *b);
}

FAT5_API fat5_status fat5_batch_from_json(fat5_ctx *ctx, const char *json, size_t len, fat5_batch *out) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *e;
    int32_t *et = NULL, *ec = NULL, *lt = NULL, *lc = NULL, *dt = NULL, *dc = NULL;
    int64_t ne = 0, nl = 0, nd = 0, s;
    fat5_status st;
    memset(out, 0, sizeof *out);
    if ((st = fat5__json_parse(ctx, "batch", json, len, 8, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: the top level must be an object");
        goto done;
    }
    for (e = root->child; e; e = e->next)
        if (strcmp(e->key, "inputs") && strcmp(e->key, "labels") && strcmp(e->key, "decoder_inputs")) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: unknown key '%s' (expected inputs, labels, decoder_inputs)",
                           e->key);
            goto done;
        }
    if ((st = fat5__rows_to_packed(ctx, fat5__json_get(root, "inputs"), "inputs", 0, &et, &ec, &ne))) goto done;
    if (fat5__json_get(root, "labels") &&
        (st = fat5__rows_to_packed(ctx, fat5__json_get(root, "labels"), "labels", 1, &lt, &lc, &nl)))
        goto done;
    if (fat5__json_get(root, "decoder_inputs") &&
        (st = fat5__rows_to_packed(ctx, fat5__json_get(root, "decoder_inputs"), "decoder_inputs", 0, &dt, &dc, &nd)))
        goto done;
    if (!lt && !dt) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: needs 'labels' or 'decoder_inputs'");
        goto done;
    }
    if ((lt && nl != ne) || (dt && nd != ne)) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: %lld input rows but %lld %s rows", (long long)ne,
                       (long long)(lt && nl != ne ? nl : nd), lt && nl != ne ? "label" : "decoder_inputs");
        goto done;
    }
    if (lt && dt)
        for (s = 0; s <= ne; s++)
            if (lc[s] != dc[s]) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: row %lld: labels and decoder_inputs differ in length",
                               (long long)(s - 1));
                goto done;
            }
    out->n_seq = ne;
    out->enc_tokens = et;
    out->enc_cu_seqlens = ec;
    out->labels = lt;
    out->dec_tokens = dt;
    out->dec_cu_seqlens = lt ? lc : dc;
    if (lt) fat5__free(ctx, dc);
    et = ec = lt = lc = dt = dc = NULL;
done:
    fat5__free(ctx, et);
    fat5__free(ctx, ec);
    fat5__free(ctx, lt);
    fat5__free(ctx, lc);
    fat5__free(ctx, dt);
    fat5__free(ctx, dc);
    fat5__json_free(ctx, doc);
    return st;
}
