// =============================================================================================
// ==[4.3] model: workspace, forward, backward ==
// Written once, over the ops of the model's backend.
//
// Precision (DESIGN §5): fp32 master weights, gradients, residual stream, logits and loss;
// matmul inputs and saved activations in the backend's activation dtype (bf16 in a GPU bf16
// context, fp32 otherwise); accumulation in fp32 (double in the CPU ops).

FAT5_API fat5_loss_config fat5_loss_config_default(void) {
    fat5_loss_config l;
    l.z_loss = 0.0;
    l.label_smoothing = 0.0;
    return l;
}

#define FAT5__TRY(call)                     \
    do {                                    \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)

// the task heads (model_heads.c)
static fat5_status fat5__head_forward_batch(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                            fat5_forward_result *out, fat5__addr loss_dst);
static fat5_status fat5__head_forward(fat5_model *m, fat5_forward_result *out, fat5__addr loss_dst);
static fat5_status fat5__head_backward(fat5_model *m, float grad_scale, int below);

// backend addresses of parameter idx: fp32 master, gradient, and matmul operand
static fat5__addr fat5__pw(const fat5_model *m, int idx) { return m->wd + 4 * (fat5__addr)m->params[idx].offset; }
static fat5__addr fat5__pg(const fat5_model *m, int idx) { return m->gd + 4 * (fat5__addr)m->params[idx].goffset; }
// whether parameter idx gets a gradient (training mode and not frozen)
static int fat5__trains(const fat5_model *m, int idx) { return m->gd && idx >= 0 && !m->params[idx].frozen; }
// the gradient of parameter idx for an op that takes 0 for "not wanted" (a frozen one's)
static fat5__addr fat5__pg_or0(const fat5_model *m, int idx) { return fat5__trains(m, idx) ? fat5__pg(m, idx) : 0; }
static fat5__addr fat5__pa(const fat5_model *m, int idx) {
    return m->wa == m->wd ? fat5__pw(m, idx) : m->wa + 2 * (fat5__addr)m->params[idx].offset;
}

// ---- dropout: Hugging Face T5's sites, in training forwards with dropout on ----
// On the token embeddings (both stacks), each sub-layer's output before the residual add, the FFN's
// hidden activation (after act(wi_0 x) * wi_1 x, before wo), the attention probabilities (after the
// softmax, before v) and each stack's final norm's output. Each site of a forward has its own mask
// (fat5__drop in base: RNG), of stream
//     draw << 26 | layer code << 15 | site << 12 (| head, for the attention probabilities)
// with the layer code decoder << 10 | layer (layers < 1024, heads < 4096, draws < 2^38): a pure
// function of (seed, draw, stack, layer, site, head, element), so that the backward regenerates
// its forward's masks.
enum {
    FAT5__DS_EMBED = 0,     // the token embeddings (layer 0's code)
    FAT5__DS_SA_PROBS = 1,  // the self-attention's probabilities
    FAT5__DS_SA_OUT = 2,    // the self-attention's output, before the residual add
    FAT5__DS_CA_PROBS = 3,  // the cross-attention's probabilities
    FAT5__DS_CA_OUT = 4,    // the cross-attention's output
    FAT5__DS_FF_HIDDEN = 5, // the FFN's hidden activation
    FAT5__DS_FF_OUT = 6,    // the FFN's output
    FAT5__DS_FINAL = 7      // the stack's final norm's output (layer 0's code)
};
#define FAT5__DROP_DRAW_BITS 38

// the code of layer l of a stack (dec: 0 encoder, 1 decoder) in the masks' streams
static int fat5__drop_layer(int dec, int64_t l) { return dec << 10 | (int)l; }

// The dropout of site `site` of layer code `code` in the last forward and its backward: none for
// code < 0 (the encoder of fat5_model_encode and generation), outside a training forward with
// dropout on, where the site's rate rounds to 0, and at the sites of m->drop_skip (tests).
static fat5__drop fat5__model_drop(const fat5_model *m, int code, int site) {
    int probs = site == FAT5__DS_SA_PROBS || site == FAT5__DS_CA_PROBS;
    double rate = probs ? m->fd.attn_rate : m->fd.rate;
    if (code < 0 || !(rate > 0) || (m->drop_skip >> site & 1u)) return fat5__drop_none();
    return fat5__drop_make(m->fd.seed, m->fd.draw << 26 | (uint64_t)code << 15 | (uint64_t)site << 12, rate);
}

// The dropout of the forward about to run (and of its backward): the rates of the config when
// dropout is on (fat5_model_set_dropout) in a training forward that keeps its gradient, else none.
static void fat5__model_drop_begin(fat5_model *m) {
    const fat5_model_config *c = &m->cfg;
    memset(&m->fd, 0, sizeof m->fd);
    if (!m->drop_on || !m->training || m->no_grad) return;
    m->fd.seed = m->drop_seed;
    m->fd.draw = m->drop_draw;
    m->fd.rate = c->dropout_rate;
    m->fd.attn_rate = c->attention_dropout_rate < 0 ? c->dropout_rate : c->attention_dropout_rate;
    m->fd.head_rate = c->classifier_dropout;
}

// h (fp32 [T, D]) += drop(x W^T), x [T, K] act, W [D, K]: a sub-layer's output projection into the
// residual stream. Without dropout the product adds into h itself; with, it goes to the workspace's
// dn (fp32, free during a forward) and the dropout adds it.
static fat5_status fat5__model_out_proj(fat5_model *m, fat5__addr h, fat5__addr x, int w, int64_t T, int64_t D,
                                        int64_t K, fat5__drop od) {
    fat5_status st;
    if (!od.thresh) return m->be->mm(m->ctx, FAT5__MM_NT, h, 1, x, fat5__pa(m, w), T, D, K, 1.0f, 1.0f);
    if ((st = m->be->mm(m->ctx, FAT5__MM_NT, m->ws.dn, 1, x, fat5__pa(m, w), T, D, K, 1.0f, 0.0f))) return st;
    return m->be->dropout(m->ctx, h, m->ws.dn, T * D, FAT5__DROP_ADD, od);
}

// The backward of a sub-layer output's dropout: w->dh_act (act [T, D]) = drop(dh) (fp32), the
// gradient of the sub-layer's output; without dropout dh_act already holds dh.
static fat5_status fat5__model_out_grad(fat5_model *m, fat5__addr dh, int64_t T, fat5__drop od) {
    if (!od.thresh) return FAT5_OK;
    return m->be->dropout(m->ctx, m->ws.dh_act, dh, T * m->cfg.d_model, FAT5__DROP_TO_ACT, od);
}

// the dropout of a stack-wide site (FAT5__DS_EMBED, FAT5__DS_FINAL) of the encoder (dec 0) or decoder
static fat5__drop fat5__stack_drop(const fat5_model *m, int dec, int site) {
    return fat5__model_drop(m, fat5__drop_layer(dec, 0), site);
}

// x (fp32 [n], or the activation dtype with act) = drop(x) in place; nothing without dropout
static fat5_status fat5__model_drop_inplace(fat5_model *m, fat5__addr x, int64_t n, int act, fat5__drop d) {
    if (!d.thresh) return FAT5_OK;
    return m->be->dropout(m->ctx, x, x, n, act ? FAT5__DROP_ACT : FAT5__DROP_F32, d);
}

// ---- position encodings: what the attention ops and rope get from the config ----

// The position and pattern arguments of an attention op: kind (mask | scheme | pattern,
// fat5__attn_kind), the `bias` parameter (T5's table or FIRE's block, 0 for none), nb and
// max_distance, g and cu_g as the ops read them.
typedef struct fat5__pos_args {
    int kind, nb, md, g;
    fat5__addr bias, dbias;   // weights and gradient of the layer's position parameters, or 0
    fat5__addr cu_g;          // transient-global: the globals' first rows
} fat5__pos_args;

// for a self-attention (mask BIDIR or CAUSAL) of layer y, or cross-attention (CROSS, no position
// term); ea: the encoder's attention pattern (BIDIR)
static fat5__pos_args fat5__model_pos(const fat5_model *m, const fat5__layer *y, int mask, const fat5__enc_attn *ea) {
    const fat5_model_config *c = &m->cfg;
    fat5__pos_args p;
    p.kind = mask;
    p.nb = (int)c->rel_buckets;
    p.md = (int)c->rel_max_distance;
    p.g = 0;
    p.bias = p.dbias = p.cu_g = 0;
    if (mask == FAT5__ATTN_CROSS) return p;
    if (mask == FAT5__ATTN_BIDIR && ea && ea->at.type != FAT5_ENC_ATTN_FULL) {
        p.kind |= FAT5__ATTN_WINDOW(ea->at.radius);
        p.g = (int)ea->at.global;
        if (ea->at.type == FAT5_ENC_ATTN_BLOCK_GLOBAL) p.kind |= FAT5__ATTN_PREFIX;
        if (ea->at.type == FAT5_ENC_ATTN_TGLOBAL)
            p.kind |= FAT5__ATTN_TGLOBAL | (y->grel < 0 ? FAT5__ATTN_GSHARED : 0);
        p.cu_g = ea->cu_g;
    }
    if (c->pos_kind == FAT5_POS_ALIBI)
        p.kind |= FAT5__ATTN_ALIBI | (mask == FAT5__ATTN_BIDIR && c->alibi_asymmetric ? FAT5__ATTN_ALIBI_ASYM : 0);
    if (c->pos_kind == FAT5_POS_FIRE) {
        p.kind |= FAT5__ATTN_FIRE;
        p.nb = c->fire_mlp_width;   // md stays relative_attention_max_distance: FIRE's L0 (init_L)
    }
    if (y->rel >= 0) {
        p.bias = fat5__pw(m, y->rel);
        p.dbias = fat5__pg_or0(m, y->rel);
    }
    return p;
}

// RoPE of a self-attention's q and k [T, H*d_kv] in place (nothing for other encodings); positions
// from cu / seq (per packed sequence) or pos[0] (a decode step). transpose: the backward of dq, dk.
static fat5_status fat5__model_rope(fat5_model *m, fat5__addr q, fat5__addr k, fat5__addr cu, fat5__addr seq,
                                    fat5__addr pos, int64_t T, int transpose) {
    const fat5_model_config *c = &m->cfg;
    int rd = (int)((double)c->d_kv * c->rotary_fraction), H = (int)c->num_heads, dk = (int)c->d_kv;
    int f = (c->rotary_interleaved ? FAT5__ROPE_INTERLEAVED : 0) | (transpose ? FAT5__ROPE_TRANSPOSE : 0);
    float base = (float)c->rotary_base, xpos = (float)c->rotary_scale_base;
    fat5_status st;
    if (c->pos_kind != FAT5_POS_ROPE) return FAT5_OK;
    FAT5__TRY(m->be->rope(m->ctx, q, cu, seq, pos, T, H, dk, rd, base, xpos, f));
    return m->be->rope(m->ctx, k, cu, seq, pos, T, H, dk, rd, base, xpos, f | FAT5__ROPE_KEY);
}

// Carves the next buffer of rows x cols elements of esize bytes out of a workspace at `base`, on a
// 256-byte boundary (an empty buffer is 0: absent, as the ops and the model read it): the layout functions keep `off` (bytes so far), `ok` (0 once a size
// overflows) and `base` (0: measure only) in scope. Used by fat5__ws_layout and the decoder's.
#define FAT5__WS(field, rows, cols, esize)                                                                    \
    do {                                                                                                    \
        size_t n_;                                                                                          \
        off = (off + 255) & ~(size_t)255;                                                                   \
        if (!fat5__mul3_ok((size_t)(rows), (size_t)(cols), (size_t)(esize), &n_) || !fat5__add_ok(off, n_, &off)) \
            ok = 0;                                                                                         \
        (field) = base && ok && n_ ? base + (fat5__addr)(off - n_) : 0;                                     \
    } while (0)

// transient-global tokens of te encoder tokens at most (a sequence of n has n / g), for attention at
static int64_t fat5__globals_max(const fat5_attention *at, int64_t te) {
    return at->type == FAT5_ENC_ATTN_TGLOBAL ? te / at->global : 0;
}
// rows of the encoder's keys and values for te tokens: the tokens', then the globals'
static int64_t fat5__enc_kv_rows(const fat5_attention *at, int64_t te) { return te + fat5__globals_max(at, te); }

// n buffers of rows x cols elements of esize bytes, one after another, `stride` (rows x cols)
// elements apart: the first's address is `first`, the others' fat5__ws_block(first, stride, esize, i)
#define FAT5__WS_BLOCKS(first, n, rows, cols, esize, stride)                                              \
    do {                                                                                                \
        (stride) = (int64_t)(rows) * (int64_t)(cols);                                                   \
        FAT5__WS(first, (size_t)(n) * (size_t)(rows), cols, esize);                                     \
    } while (0)
static fat5__addr fat5__ws_block(fat5__addr first, int64_t stride, size_t esize, int i) {
    return first ? first + (fat5__addr)((int64_t)i * stride) * esize : 0;
}

static size_t fat5__xent_rows(const fat5_model *m, size_t td) {
    return td < (size_t)m->xent_rows ? td : (size_t)m->xent_rows;
}

// Lays out the workspace for n_seq sequences, te encoder and td decoder tokens: every buffer on a
// 256-byte boundary, fp32 (4 bytes), int32 (4) or activation (m->act_size) elements. With base == 0
// it only measures. Returns 0 when the size overflows.
static int fat5__ws_layout(fat5_model *m, fat5__addr base, int64_t n_seq, int64_t te, int64_t td, size_t *total) {
    const fat5_model_config *c = &m->cfg;
    fat5__ws *w = &m->ws;
    size_t A = m->act_size, D = (size_t)c->d_model, I = (size_t)(c->num_heads * c->d_kv), F = (size_t)c->d_ff;
    size_t H = (size_t)c->num_heads, V = (size_t)c->vocab_size, T = (size_t)(te > td ? te : td), off = 0;
    size_t Te = (size_t)te, Td = (size_t)td, md = (size_t)c->rel_max_distance;
    size_t Gx = (size_t)fat5__globals_max(&m->attn, te), Tkv = Te + Gx > T ? Te + Gx : T;  // globals: after the tokens
    size_t Tb = m->training ? T : 0, Teb = m->training ? Te : 0, Tdb = m->training ? Td : 0;  // backward only
    int ok = 1, l, own_gtable = m->attn.type == FAT5_ENC_ATTN_TGLOBAL && c->num_layers && m->enc[0].grel >= 0;
    int lm = c->head == FAT5_HEAD_LM;
    w->ea.at = m->attn;
    for (l = 0; l < c->num_layers + m->n_dec && ok; l++) {
        int dec = l >= c->num_layers;
        fat5__layer_acts *a = dec ? &w->dec[l - c->num_layers] : &w->enc[l];
        size_t Tl = dec ? Td : Te, Tlb = m->training ? Tl : 0;
        if (!m->training && l != 0 && l != c->num_layers) {  // inference: every layer reuses the first's buffers
            *a = dec ? w->dec[0] : w->enc[0];
            continue;
        }
        memset(a, 0, sizeof *a);
        FAT5__WS(a->h_sa, Tlb, D, 4);
        FAT5__WS(a->rs_sa, Tl, 1, 4);
        FAT5__WS(a->n_sa, Tl + (dec ? 0 : Gx), D, A);
        // q | k | v: three blocks of the rows of k and v (q's extra rows unused), one batched product
        FAT5__WS_BLOCKS(a->q, 3, Tl + (dec ? 0 : Gx), I, A, a->qkv_stride);
        a->k = fat5__ws_block(a->q, a->qkv_stride, A, 1);
        a->v = fat5__ws_block(a->q, a->qkv_stride, A, 2);
        FAT5__WS(a->att, Tl, I, A);
        FAT5__WS(a->lse, Tl, H, 4);
        if (!dec) FAT5__WS(a->gsum, Gx, D, 4);
        if (!dec) FAT5__WS(a->rs_g, Gx, 1, 4);
        if (dec) {
            FAT5__WS(a->h_ca, Tlb, D, 4);
            FAT5__WS(a->rs_ca, Tl, 1, 4);
            FAT5__WS(a->n_ca, Tl, D, A);
            FAT5__WS(a->cq, Tl, I, A);
            FAT5__WS_BLOCKS(a->ck, 2, Te, I, A, a->ckv_stride);
            a->cv = fat5__ws_block(a->ck, a->ckv_stride, A, 1);
            FAT5__WS(a->catt, Tl, I, A);
            FAT5__WS(a->clse, Tl, H, 4);
        }
        FAT5__WS(a->h_ff, Tlb, D, 4);
        FAT5__WS(a->rs_ff, Tl, 1, 4);
        FAT5__WS(a->n_ff, Tl, D, A);
        FAT5__WS_BLOCKS(a->ff_a, c->gated ? 2 : 1, Tl, F, A, a->ff_stride);
        a->ff_b = c->gated ? fat5__ws_block(a->ff_a, a->ff_stride, A, 1) : 0;
        FAT5__WS(a->ff_h, Tl, F, A);
    }
    FAT5__WS(w->enc_hf, Te, D, 4);
    FAT5__WS(w->enc_rsf, Te, 1, 4);
    FAT5__WS(w->enc_out, Te, D, A);
    FAT5__WS(w->dec_hf, Td, D, 4);
    FAT5__WS(w->dec_rsf, Td, 1, 4);
    FAT5__WS(w->dec_out, Td, D, A);
    FAT5__WS(w->logits, !lm ? 0 : m->training ? fat5__xent_rows(m, Td) : Td, V, 4);  // training: one chunk of rows at a time
    FAT5__WS(w->tok_lse, Td, 1, 4);
    FAT5__WS(w->loss2, 2, 1, 8);
    FAT5__WS(w->row_ce, Td, 1, 4);
    FAT5__WS(w->row_z, Td, 1, 4);
    FAT5__WS(w->enc_tok, Te, 1, 4);
    FAT5__WS(w->dec_tok, Td, 1, 4);
    FAT5__WS(w->labels, Td, 1, 4);
    FAT5__WS(w->enc_cu, (size_t)n_seq + 1, 1, 4);
    FAT5__WS(w->dec_cu, (size_t)n_seq + 1, 1, 4);
    FAT5__WS(w->enc_seq, Te + Gx, 1, 4);
    FAT5__WS(w->dec_seq, Td, 1, 4);
    FAT5__WS(w->ea.cu_g, m->attn.type == FAT5_ENC_ATTN_TGLOBAL ? (size_t)n_seq + 1 : 0, 1, 4);
    FAT5__WS(w->ea.ones, m->attn.type == FAT5_ENC_ATTN_TGLOBAL ? D : 0, 1, 4);
    FAT5__WS(w->lut_bidir, md, 1, 4);
    FAT5__WS(w->lut_causal, md, 1, 4);
    FAT5__WS(w->dlogits, lm ? Tdb : 0, V, A);
    FAT5__WS(w->dh_dec, Tdb, D, 4);
    FAT5__WS(w->dh_enc, Teb, D, 4);
    FAT5__WS(w->d_enc_out, Teb, D, 4);
    FAT5__WS(w->dh_act, Tb, D, A);
    FAT5__WS(w->dn, m->training ? Tkv : 0, D, 4);
    FAT5__WS(w->dgsum, m->training ? Gx : 0, D, 4);
    FAT5__WS(w->datt, Tb, I, A);
    FAT5__WS_BLOCKS(w->dq, 3, m->training ? Tkv : 0, I, A, w->dqkv_stride);
    w->dk = fat5__ws_block(w->dq, w->dqkv_stride, A, 1);
    w->dv = fat5__ws_block(w->dq, w->dqkv_stride, A, 2);
    FAT5__WS(w->delta, Tb, H, 4);
    FAT5__WS_BLOCKS(w->da, 2, Tb, F, A, w->dff_stride);
    w->dffh = fat5__ws_block(w->da, w->dff_stride, A, 1);
    FAT5__WS(w->norm_scratch, m->training ? FAT5__GPU_NORM_ROWS : 0, D, 4);
    // the CPU ops need no bias-gradient partials
    // the GPU's per-block partial sums of the position gradient: T5's table, or FIRE's per-head
    // shares with one more row for their sum over the blocks (fat5__gpu_attn_bwd_dq)
    FAT5__WS(w->dbias_scratch,
             !m->be->dbias_partials || !m->training ? 0
             : c->pos_kind == FAT5_POS_FIRE ? FAT5__GPU_DBIAS_ROWS + 1
             : c->pos_kind == FAT5_POS_T5 ? FAT5__GPU_DBIAS_ROWS : 0,
             c->pos_kind == FAT5_POS_FIRE ? (size_t)FAT5__FIRE_SHARES(c->fire_mlp_width) * H
                                          : (size_t)c->rel_buckets * H * (own_gtable ? 2 : 1),
             4);
    {   // a head other than LM (model_heads.c): R rows of L logits; the sequence classifiers pool Tp
        // tokens of B = n_seq sequences
        int cls = c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_ENC_SEQ_CLS, tr = m->training;
        size_t L = c->head == FAT5_HEAD_QA ? 2 : lm || c->head == FAT5_HEAD_ENCODER ? 0 : (size_t)c->num_labels;
        size_t B = (size_t)n_seq, Tp = c->head == FAT5_HEAD_SEQ_CLS ? Td : Te;
        size_t R = cls ? B : c->head == FAT5_HEAD_TOKEN_CLS ? Te : c->head == FAT5_HEAD_QA ? Td : 0;
        FAT5__WS(w->hd_pool_f, cls ? B : 0, Tp, 4);
        FAT5__WS(w->hd_pool, cls ? B : 0, Tp, A);
        FAT5__WS(w->hd_x, cls ? B : c->head == FAT5_HEAD_TOKEN_CLS ? Te : 0, D, A);
        FAT5__WS(w->hd_z, cls ? B : 0, D, A);
        FAT5__WS(w->hd_h, cls ? B : 0, D, A);
        FAT5__WS(w->hd_logits, R, L, 4);
        FAT5__WS(w->hd_dlog_f, tr ? R : 0, L, 4);
        FAT5__WS(w->hd_dlog, tr ? R : 0, L, A);
        FAT5__WS(w->hd_ones_f, L ? R : 0, 1, 4);
        FAT5__WS(w->hd_ones, L ? R : 0, 1, A);
        FAT5__WS(w->hd_dh, cls && tr ? B : 0, D, A);
        FAT5__WS(w->hd_dz, cls && tr ? B : 0, D, A);
        FAT5__WS(w->hd_dx, cls && tr ? B : 0, D, 4);
        FAT5__WS(w->hd_dx_act, cls && tr ? B : 0, D, A);
        FAT5__WS(w->hd_g, c->head == FAT5_HEAD_ENCODER && tr ? Te : 0, D, 4);
    }
    *total = off;
    return ok;
}

static void fat5__ws_free(fat5_model *m) {
    fat5_ctx *ctx = m->ctx;
    if (m->ws_base) m->be->free(ctx, m->ws_base);
    fat5__free(ctx, m->ws.enc);
    fat5__free(ctx, m->ws.dec);
    fat5__free(ctx, m->enc_cu);
    fat5__free(ctx, m->dec_cu);
    fat5__free(ctx, m->enc_tok);
    fat5__free(ctx, m->dec_tok);
    fat5__free(ctx, m->labels);
    fat5__free(ctx, m->seq_map);
    memset(&m->ws, 0, sizeof m->ws);
    m->ws_base = 0;
    m->ws_bytes = 0;
    fat5__free(ctx, m->enc_cu_g);
    m->enc_cu = m->dec_cu = m->enc_tok = m->dec_tok = m->labels = m->seq_map = m->enc_cu_g = NULL;
    m->cap_seq = m->cap_te = m->cap_td = 0;
    m->have_fwd = m->fwd_labels = m->have_bwd = 0;
}

// Scratch the CPU ops take from the context's arena for batches of te / td tokens, in bytes:
// the matrix products' packed blocks, or one query's scores and output in attention, for each of
// the context's threads.
static size_t fat5__cpu_scratch_need(const fat5_model *m, int64_t te, int64_t td) {
    const fat5_model_config *c = &m->cfg;
    int64_t tk = fat5__enc_kv_rows(&m->attn, te);
    size_t n = (size_t)((tk > td ? tk : td) + c->d_kv) * sizeof(double) * (size_t)m->ctx->n_threads;
    size_t mm = fat5__cpu_mm_scratch(m->ctx);
    return n > mm ? n : mm;
}

FAT5_API fat5_status fat5_model_reserve(fat5_model *m, int64_t n_seq, int64_t te, int64_t td) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    size_t total = 0, md = (size_t)m->cfg.rel_max_distance, maps, i;
    fat5_status st;
    if (n_seq < 1 || te < 1 || td < 1 || te > INT32_MAX || td > INT32_MAX || n_seq > te)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_model_reserve: n_seq %lld, encoder tokens %lld, decoder tokens %lld: each must be "
                         "in [1, 2^31) and n_seq <= encoder tokens",
                         (long long)n_seq, (long long)te, (long long)td);
    if (fat5__enc_kv_rows(&m->attn, te) > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_reserve: %lld encoder tokens and their %lld "
                         "transient-global tokens exceed 2^31 - 1 rows", (long long)te,
                         (long long)fat5__globals_max(&m->attn, te));
    if (n_seq <= m->cap_seq && te <= m->cap_te && td <= m->cap_td) return FAT5_OK;
    if (n_seq < m->cap_seq) n_seq = m->cap_seq;
    if (te < m->cap_te) te = m->cap_te;
    if (td < m->cap_td) td = m->cap_td;
    fat5__ws_free(m);
    maps = (size_t)(fat5__enc_kv_rows(&m->attn, te) > td ? fat5__enc_kv_rows(&m->attn, te) : td);
    if (md > maps) maps = md;
    m->ws.enc = FAT5__CAST(fat5__layer_acts *, fat5__calloc(ctx, (size_t)m->cfg.num_layers, sizeof(fat5__layer_acts)));
    m->ws.dec = FAT5__CAST(fat5__layer_acts *,
                           fat5__calloc(ctx, (size_t)(m->n_dec ? m->n_dec : 1), sizeof(fat5__layer_acts)));
    m->enc_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    m->dec_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    m->enc_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)te, sizeof(int32_t)));
    m->dec_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)td, sizeof(int32_t)));
    m->labels = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)td, sizeof(int32_t)));
    m->seq_map = FAT5__CAST(int32_t *, fat5__calloc(ctx, maps, sizeof(int32_t)));
    m->enc_cu_g = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    if (!m->ws.enc || !m->ws.dec || !m->enc_cu || !m->dec_cu || !m->enc_tok || !m->dec_tok || !m->labels ||
        !m->seq_map || !m->enc_cu_g) {
        fat5__ws_free(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: out of memory");
    }
    if (!fat5__ws_layout(m, 0, n_seq, te, td, &total)) {
        fat5__ws_free(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: workspace size overflows");
    }
    if ((st = be->alloc(ctx, total, &m->ws_base))) {
        fat5__ws_free(m);
        return fat5__err_prefix(ctx, st, "fat5_model_reserve: %.1f MiB of activations for %lld + %lld tokens: ",
                                (double)total / 1048576.0, (long long)te, (long long)td);
    }
    m->ws_bytes = total;
    fat5__ws_layout(m, m->ws_base, n_seq, te, td, &total);
    if (be->host_memory && !fat5__host_scratch(ctx, fat5__cpu_scratch_need(m, te, td), "fat5_model_reserve")) {
        fat5__ws_free(m);
        return FAT5_ERR_OUT_OF_MEMORY;
    }
    // relative-position bucket of each distance, computed here so that both backends agree exactly
    for (i = 0; i < md; i++) m->seq_map[i] = fat5__rel_bucket(-(int64_t)i, 1, (int)m->cfg.rel_buckets, (int)md);
    st = be->upload(ctx, m->ws.lut_bidir, m->seq_map, md * 4);
    for (i = 0; i < md && !st; i++) m->seq_map[i] = fat5__rel_bucket(-(int64_t)i, 0, (int)m->cfg.rel_buckets, (int)md);
    if (!st) st = be->upload(ctx, m->ws.lut_causal, m->seq_map, md * 4);
    if (!st && m->ws.ea.ones) st = be->fill_f32(ctx, m->ws.ea.ones, 1.0f, m->cfg.d_model);
    if (!st) st = be->sync(ctx);
    if (st) {
        fat5__ws_free(m);
        return st;
    }
    m->cap_seq = n_seq;
    m->cap_te = te;
    m->cap_td = td;
    return FAT5_OK;
}

static fat5_status fat5__check_loss(fat5_ctx *ctx, const fat5_loss_config *l) {
    if (!(l->z_loss >= 0 && l->z_loss <= 1e30))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "loss: z_loss = %g, expected a finite value >= 0", l->z_loss);
    if (!(l->label_smoothing >= 0 && l->label_smoothing < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "loss: label_smoothing = %g, expected a value in [0, 1)",
                         l->label_smoothing);
    return FAT5_OK;
}

// Checks a batch against the token counts of its buffers: offsets, token ids, labels. Messages
// name the sequence and the position inside it.
// A block-global prefix longer than every sequence of the input leaves nothing local (it is full
// attention): refused. A sequence shorter than the prefix among longer ones attends fully.
static fat5_status fat5__check_prefix(fat5_ctx *ctx, const fat5_attention *at, const int32_t *cu, int64_t n_seq,
                                      const char *what) {
    int64_t s, longest = 0;
    if (at->type != FAT5_ENC_ATTN_BLOCK_GLOBAL) return FAT5_OK;
    for (s = 0; s < n_seq; s++)
        if (cu[s + 1] - cu[s] > longest) longest = cu[s + 1] - cu[s];
    if (longest < at->global)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: the longest encoder sequence has %lld tokens, fewer than the %lld global tokens of "
                         "block-global attention (a global block larger than the sequence)",
                         what, (long long)longest, (long long)at->global);
    return FAT5_OK;
}

static fat5_status fat5__check_batch(fat5_model *m, const fat5_batch *b) {
    fat5_ctx *ctx = m->ctx;
    int64_t s, t, V = m->cfg.vocab_size;
    if (!b) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: NULL");
    if (b->n_seq < 1 || b->n_seq > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: %s (n_seq = %lld, expected 1 .. 2^31-1)",
                         b->n_seq < 1 ? "empty" : "too many sequences", (long long)b->n_seq);
    if (b->n_enc_tokens < 1 || b->n_enc_tokens > INT32_MAX || b->n_dec_tokens < 1 || b->n_dec_tokens > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "batch: n_enc_tokens = %lld, n_dec_tokens = %lld: each must be in [1, 2^31) (the number of "
                         "tokens in the encoder and decoder buffers)",
                         (long long)b->n_enc_tokens, (long long)b->n_dec_tokens);
    if (!b->enc_tokens || !b->enc_cu_seqlens || !b->dec_cu_seqlens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: enc_tokens, enc_cu_seqlens and dec_cu_seqlens are required");
    if (!b->labels && !b->dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: give labels, dec_tokens or both");
    if (b->enc_cu_seqlens[0] != 0 || b->dec_cu_seqlens[0] != 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: cu_seqlens must start at 0");
    for (s = 0; s < b->n_seq; s++) {
        int64_t e1 = b->enc_cu_seqlens[s + 1], d1 = b->dec_cu_seqlens[s + 1];
        int64_t le = e1 - b->enc_cu_seqlens[s], ld = d1 - b->dec_cu_seqlens[s];
        if (le < 0 || ld < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld has a negative %s length (%lld)",
                             (long long)s, le < 0 ? "encoder" : "decoder", (long long)(le < 0 ? le : ld));
        if (le == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "batch: sequence %lld has no encoder tokens (cross-attention needs at least one)",
                             (long long)s);
        if (e1 > b->n_enc_tokens || d1 > b->n_dec_tokens)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "batch: sequence %lld ends at %s token %lld, past the %lld tokens of the buffer",
                             (long long)s, e1 > b->n_enc_tokens ? "encoder" : "decoder",
                             (long long)(e1 > b->n_enc_tokens ? e1 : d1),
                             (long long)(e1 > b->n_enc_tokens ? b->n_enc_tokens : b->n_dec_tokens));
    }
    if (fat5__check_prefix(ctx, &m->attn, b->enc_cu_seqlens, b->n_seq, "batch")) return FAT5_ERR_INVALID_ARG;
    if (b->enc_cu_seqlens[b->n_seq] != b->n_enc_tokens || b->dec_cu_seqlens[b->n_seq] != b->n_dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "batch: the sequences cover %lld encoder and %lld decoder tokens, the buffers hold %lld and "
                         "%lld",
                         (long long)b->enc_cu_seqlens[b->n_seq], (long long)b->dec_cu_seqlens[b->n_seq],
                         (long long)b->n_enc_tokens, (long long)b->n_dec_tokens);
    for (s = 0; s < b->n_seq; s++) {
        for (t = b->enc_cu_seqlens[s]; t < b->enc_cu_seqlens[s + 1]; t++)
            if (b->enc_tokens[t] < 0 || b->enc_tokens[t] >= V)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "batch: sequence %lld, encoder position %lld: token id %d is outside [0, vocab_size "
                                 "%lld)",
                                 (long long)s, (long long)(t - b->enc_cu_seqlens[s]), (int)b->enc_tokens[t],
                                 (long long)V);
        for (t = b->dec_cu_seqlens[s]; t < b->dec_cu_seqlens[s + 1]; t++) {
            int64_t pos = t - b->dec_cu_seqlens[s];
            if (b->dec_tokens && (b->dec_tokens[t] < 0 || b->dec_tokens[t] >= V))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "batch: sequence %lld, decoder position %lld: token id %d is outside [0, vocab_size "
                                 "%lld)",
                                 (long long)s, (long long)pos, (int)b->dec_tokens[t], (long long)V);
            if (b->labels && b->labels[t] != -100 && (b->labels[t] < 0 || b->labels[t] >= V))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "batch: sequence %lld, decoder position %lld: label %d is outside [0, vocab_size "
                                 "%lld) and not -100",
                                 (long long)s, (long long)pos, (int)b->labels[t], (long long)V);
        }
    }
    return FAT5_OK;
}

// seq[t] = the sequence of token t, for offsets cu of n_seq sequences
static void fat5__seq_map(const int32_t *cu, int64_t n_seq, int32_t *seq) {
    int64_t s, t;
    for (s = 0; s < n_seq; s++)
        for (t = cu[s]; t < cu[s + 1]; t++) seq[t] = (int32_t)s;
}

// token -> sequence map of offsets cu for tokens [0, cu[n_seq]), to the backend
static fat5_status fat5__model_upload_seq(fat5_model *m, fat5__addr dst, const int32_t *cu) {
    fat5__seq_map(cu, m->n_seq, m->seq_map);
    return m->be->upload(m->ctx, dst, m->seq_map, (size_t)cu[m->n_seq] * 4);
}

// The encoder's token -> sequence map and, for transient-global attention, its globals: n_s / g
// for a sequence of n_s tokens, in rows te.. after the tokens (ea->cu_g), mapped to their
// sequences too. Staged in seq (te + globals entries) and cu_g (n_seq + 1) on the host, then
// uploaded; ea->G counts the globals.
static fat5_status fat5__enc_maps(fat5_ctx *ctx, const fat5__backend *be, fat5__enc_attn *ea, const int32_t *cu,
                                  int64_t n_seq, int32_t *seq, int32_t *cu_g, fat5__addr seq_d) {
    int64_t s, t, te = cu[n_seq], r = te;
    fat5_status st;
    fat5__seq_map(cu, n_seq, seq);
    ea->G = 0;
    if (ea->at.type == FAT5_ENC_ATTN_TGLOBAL) {
        for (s = 0; s < n_seq; s++) {
            int64_t G = (cu[s + 1] - cu[s]) / ea->at.global;
            cu_g[s] = (int32_t)r;
            for (t = 0; t < G; t++) seq[r++] = (int32_t)s;
        }
        cu_g[n_seq] = (int32_t)r;
        ea->G = r - te;
        if ((st = be->upload(ctx, ea->cu_g, cu_g, (size_t)(n_seq + 1) * 4))) return st;
    }
    return be->upload(ctx, seq_d, seq, (size_t)r * 4);
}

// the weight that norms layer y's transient-global tokens: its global_input_layer_norm, or 1
static fat5__addr fat5__gln(const fat5_model *m, const fat5__layer *y, const fat5__enc_attn *ea) {
    return y->gln >= 0 ? fat5__pw(m, y->gln) : ea->ones;
}

// out_i = x W_i^T (x [rows, K], W_i [N, K]) for the n weights w[0..n), which lie one after another in
// the parameters (q | k | v, ck | cv, wi_0 | wi_1), into outputs `stride` elements apart: one batched
// product (products one by one if the weights are not adjacent).
static fat5_status fat5__model_proj(fat5_model *m, fat5__addr out, int64_t stride, fat5__addr x, const int *w, int n,
                                    int64_t rows, int64_t N, int64_t K) {
    int i, adjacent = 1;
    fat5_status st = FAT5_OK;
    // the matmul operands are in the activation dtype (bf16 copies, or the fp32 masters themselves)
    for (i = 1; i < n; i++) adjacent &= fat5__pa(m, w[i]) == fat5__ws_block(fat5__pa(m, w[0]), N * K, m->act_size, i);
    if (adjacent) return m->be->mm_batched(m->ctx, FAT5__MM_NT, out, 0, x, fat5__pa(m, w[0]), rows, N, K, 1.0f, 0.0f,
                                           n, 0, N * K, stride);
    for (i = 0; i < n && !st; i++)
        st = m->be->mm(m->ctx, FAT5__MM_NT, fat5__ws_block(out, stride, m->act_size, i), 0, x, fat5__pa(m, w[i]),
                       rows, N, K, 1.0f, 0.0f);
    return st;
}

// grad(W_i) += d_i^T x for the same weights, d_i [rows, N] `stride` elements apart, x [rows, K]: one
// batched product (the gradients lie as the parameters do); frozen weights get none (the others
// then one product each)
static fat5_status fat5__model_proj_grad(fat5_model *m, const int *w, int n, fat5__addr d, int64_t stride,
                                         fat5__addr x, int64_t rows, int64_t N, int64_t K) {
    int i, adjacent = fat5__trains(m, w[0]);
    fat5_status st = FAT5_OK;
    for (i = 1; i < n && adjacent; i++)
        adjacent &= fat5__trains(m, w[i]) && fat5__pg(m, w[i]) == fat5__ws_block(fat5__pg(m, w[0]), N * K, 4, i);
    if (adjacent) return m->be->mm_batched(m->ctx, FAT5__MM_TN, fat5__pg(m, w[0]), 1, d, x, N, K, rows, 1.0f, 1.0f,
                                           n, stride, 0, N * K);
    for (i = 0; i < n && !st; i++)
        if (fat5__trains(m, w[i]))
            st = m->be->mm(m->ctx, FAT5__MM_TN, fat5__pg(m, w[i]), 1, fat5__ws_block(d, stride, m->act_size, i), x, N,
                           K, rows, 1.0f, 1.0f);
    return st;
}

// Self-attention sublayer: h += o(attn(q, k, v)) with q, k, v from n = rmsnorm(h). ea: the
// encoder's attention pattern (NULL in the decoder); transient-global adds its globals to k and v:
// the block sums of n, normed by the layer's global_input_layer_norm (or a weight of 1). dl: the
// layer's dropout code (fat5__drop_layer; -1: no dropout).
static fat5_status fat5__model_self_attn_fwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a,
                                             fat5__addr h, int64_t T, fat5__addr cu, fat5__addr seq, int kind,
                                             fat5__addr lut, const fat5__enc_attn *ea, int dl) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, G = ea ? ea->G : 0;
    fat5__pos_args p = fat5__model_pos(m, y, kind, ea);
    float eps = (float)c->layer_norm_eps;
    fat5_status st;
    // the residual stream saved for the backward (h_sa: 0 in inference layout) by the norm's pass
    FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_sa, a->rs_sa, h, fat5__pw(m, y->ln_sa), T, (int)D, eps, a->h_sa));
    if (G) {
        FAT5__TRY(be->block_sum(ctx, a->gsum, a->n_sa, cu, ea->cu_g, seq, G, (int)D, p.g));
        FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_sa + (fat5__addr)(T * D) * m->act_size, a->rs_g, a->gsum,
                                  fat5__gln(m, y, ea), G, (int)D, eps, 0));
    }
    {   // q | k | v in one product (the globals' rows of q are computed and unused)
        const int wqkv[3] = {y->q, y->k, y->v};
        FAT5__TRY(fat5__model_proj(m, a->q, a->qkv_stride, a->n_sa, wqkv, 3, T + G, I, D));
    }
    FAT5__TRY(fat5__model_rope(m, a->q, a->k, cu, seq, 0, T, 0));
    FAT5__TRY(be->attn_fwd(ctx, a->att, a->lse, a->q, a->k, a->v, p.bias, lut, cu, cu, seq, T, (int)c->num_heads,
                           (int)c->d_kv, p.kind, p.nb, p.md, p.g, p.cu_g, fat5__model_drop(m, dl, FAT5__DS_SA_PROBS)));
    return fat5__model_out_proj(m, h, a->att, y->o, T, D, I, fat5__model_drop(m, dl, FAT5__DS_SA_OUT));
}

// Cross-attention sublayer (decoder): h += o(attn(q, k, v)), q from rmsnorm(h), k and v from the
// encoder output; dl: the layer's dropout code
static fat5_status fat5__model_cross_attn_fwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a,
                                              int dl) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, te = m->te, td = m->td;
    fat5_status st;
    FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_ca, a->rs_ca, w->dec_hf, fat5__pw(m, y->ln_ca), td, (int)D,
                              (float)c->layer_norm_eps, a->h_ca));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NT, a->cq, 0, a->n_ca, fat5__pa(m, y->cq), td, I, D, 1.0f, 0.0f));
    {   // ck | cv in one product
        const int wkv[2] = {y->ck, y->cv};
        FAT5__TRY(fat5__model_proj(m, a->ck, a->ckv_stride, w->enc_out, wkv, 2, te, I, D));
    }
    FAT5__TRY(be->attn_fwd(ctx, a->catt, a->clse, a->cq, a->ck, a->cv, 0, w->lut_causal, w->dec_cu, w->enc_cu,
                           w->dec_seq, td, (int)c->num_heads, (int)c->d_kv, FAT5__ATTN_CROSS, (int)c->rel_buckets,
                           (int)c->rel_max_distance, 0, 0, fat5__model_drop(m, dl, FAT5__DS_CA_PROBS)));
    return fat5__model_out_proj(m, w->dec_hf, a->catt, y->co, td, D, I, fat5__model_drop(m, dl, FAT5__DS_CA_OUT));
}

// FFN sublayer: h += wo(act(wi0 n) [* wi1 n]), n = rmsnorm(h); dl: the layer's dropout code
static fat5_status fat5__model_ffn_fwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, fat5__addr h,
                                       int64_t T, int dl) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, F = c->d_ff;
    fat5_status st;
    FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_ff, a->rs_ff, h, fat5__pw(m, y->ln_ff), T, (int)D, (float)c->layer_norm_eps,
                              a->h_ff));
    {   // wi_0 | wi_1 in one product
        const int wi[2] = {y->wi0, y->wi1};
        FAT5__TRY(fat5__model_proj(m, a->ff_a, a->ff_stride, a->n_ff, wi, c->gated ? 2 : 1, T, F, D));
    }
    FAT5__TRY(be->act_fwd(ctx, a->ff_h, a->ff_a, a->ff_b, T * F, (int)c->act,
                          fat5__model_drop(m, dl, FAT5__DS_FF_HIDDEN)));
    return fat5__model_out_proj(m, h, a->ff_h, y->wo, T, D, F, fat5__model_drop(m, dl, FAT5__DS_FF_OUT));
}

// The forward graph on the staged batch: encoder, decoder, lm_head, loss. The loss (mean cross
// entropy, mean loss: double [2]) goes to loss_dst on the backend, 0 for the workspace's slot; with
// out == NULL nothing is waited for (the training loop reads its micro-batches' losses at the end
// of the step).
static fat5_status fat5__model_forward(fat5_model *m, fat5_forward_result *out, fat5__addr loss_dst) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, V = c->vocab_size, te = m->te, td = m->td, l, r0, chunk;
    float eps = (float)c->layer_norm_eps, head_scale = c->scale_decoder_outputs ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    double ls[2];
    fat5_status st;
    // the batch (an encoder-only head has no decoder tokens: td 0)
    FAT5__TRY(be->upload(ctx, w->enc_tok, m->enc_tok, (size_t)te * 4));
    FAT5__TRY(be->upload(ctx, w->enc_cu, m->enc_cu, (size_t)(m->n_seq + 1) * 4));
    FAT5__TRY(fat5__enc_maps(ctx, be, &m->ws.ea, m->enc_cu, m->n_seq, m->seq_map, m->enc_cu_g, w->enc_seq));
    if (td) {
        FAT5__TRY(be->upload(ctx, w->dec_tok, m->dec_tok, (size_t)td * 4));
        FAT5__TRY(be->upload(ctx, w->labels, m->labels, (size_t)td * 4));
        FAT5__TRY(be->upload(ctx, w->dec_cu, m->dec_cu, (size_t)(m->n_seq + 1) * 4));
        FAT5__TRY(fat5__model_upload_seq(m, w->dec_seq, m->dec_cu));
    }
    // encoder; the residual stream lives in the final norm's input buffer (dropout, when on: after
    // the embeddings, in each sub-layer and after the final norm, fat5__model_drop)
    FAT5__TRY(be->embed_fwd(ctx, w->enc_hf, fat5__pw(m, m->shared), w->enc_tok, te, (int)D));
    FAT5__TRY(fat5__model_drop_inplace(m, w->enc_hf, te * D, 0, fat5__stack_drop(m, 0, FAT5__DS_EMBED)));
    for (l = 0; l < c->num_layers; l++) {
        FAT5__TRY(fat5__model_self_attn_fwd(m, &m->enc[l], &w->enc[l], w->enc_hf, te, w->enc_cu, w->enc_seq,
                                            FAT5__ATTN_BIDIR, w->lut_bidir, &w->ea, fat5__drop_layer(0, l)));
        FAT5__TRY(fat5__model_ffn_fwd(m, &m->enc[l], &w->enc[l], w->enc_hf, te, fat5__drop_layer(0, l)));
    }
    FAT5__TRY(be->rmsnorm_fwd(ctx, w->enc_out, w->enc_rsf, w->enc_hf, fat5__pw(m, m->enc_final_ln), te, (int)D, eps, 0));
    FAT5__TRY(fat5__model_drop_inplace(m, w->enc_out, te * D, 1, fat5__stack_drop(m, 0, FAT5__DS_FINAL)));
    if (!m->n_dec) return fat5__head_forward(m, out, loss_dst);
    // decoder
    FAT5__TRY(be->embed_fwd(ctx, w->dec_hf, fat5__pw(m, m->shared), w->dec_tok, td, (int)D));
    FAT5__TRY(fat5__model_drop_inplace(m, w->dec_hf, td * D, 0, fat5__stack_drop(m, 1, FAT5__DS_EMBED)));
    for (l = 0; l < m->n_dec; l++) {
        FAT5__TRY(fat5__model_self_attn_fwd(m, &m->dec[l], &w->dec[l], w->dec_hf, td, w->dec_cu, w->dec_seq,
                                            FAT5__ATTN_CAUSAL, w->lut_causal, NULL, fat5__drop_layer(1, l)));
        FAT5__TRY(fat5__model_cross_attn_fwd(m, &m->dec[l], &w->dec[l], fat5__drop_layer(1, l)));
        FAT5__TRY(fat5__model_ffn_fwd(m, &m->dec[l], &w->dec[l], w->dec_hf, td, fat5__drop_layer(1, l)));
    }
    FAT5__TRY(be->rmsnorm_fwd(ctx, w->dec_out, w->dec_rsf, w->dec_hf, fat5__pw(m, m->dec_final_ln), td, (int)D, eps, 0));
    FAT5__TRY(fat5__model_drop_inplace(m, w->dec_out, td * D, 1, fat5__stack_drop(m, 1, FAT5__DS_FINAL)));
    if (c->head != FAT5_HEAD_LM) return fat5__head_forward(m, out, loss_dst);
    // lm_head (the d_model^-0.5 of tied models folded into the product), then the loss
    // (training: chunk by chunk, each chunk's dlogits = softmax-gradient of the loss terms, unscaled:
    // the backward scales it in its products)
    chunk = m->training ? (int64_t)fat5__xent_rows(m, (size_t)td) : td;
    for (r0 = 0; r0 < td; r0 += chunk) {
        int64_t n = td - r0 < chunk ? td - r0 : chunk;
        fat5__addr lse = w->tok_lse + 4 * (fat5__addr)r0, lab = w->labels + 4 * (fat5__addr)r0;
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, w->logits, 1, w->dec_out + (fat5__addr)(r0 * D) * m->act_size,
                         fat5__pa(m, m->lm_head), n, V, D, head_scale, 0.0f));
        FAT5__TRY(be->xent_fwd(ctx, lse, w->row_ce + 4 * (fat5__addr)r0, w->row_z + 4 * (fat5__addr)r0, w->logits,
                               lab, n, (int)V, (float)m->loss.z_loss, (float)m->loss.label_smoothing));
        if (m->training && !m->no_grad)
            FAT5__TRY(be->xent_bwd(ctx, w->dlogits + (fat5__addr)(r0 * V) * m->act_size, w->logits, lse, lab, n,
                                   (int)V, (float)m->loss.z_loss, (float)m->loss.label_smoothing, 1.0f));
    }
    // the loss, summed on the backend into loss_dst (or the workspace's slot); read back only for `out`
    FAT5__TRY(be->loss_total(ctx, loss_dst ? loss_dst : w->loss2, w->row_ce, w->row_z, td, m->n_count));
    if (out) {
        FAT5__TRY(be->download(ctx, ls, loss_dst ? loss_dst : w->loss2, sizeof ls));
        FAT5__TRY(be->sync(ctx));
        out->n_tokens = m->n_count;
        out->n_dec_tokens = td;
        out->ce = ls[0];
        out->loss = ls[1];
    }
    return FAT5_OK;
}

// fat5_model_forward, with the loss written to loss_dst on the backend (0: the workspace's slot)
// and read back only for `out`
static fat5_status fat5__model_forward_batch(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                             fat5_forward_result *out, fat5__addr loss_dst) {
    const fat5_model_config *c;
    fat5_loss_config lc = loss ? *loss : fat5_loss_config_default();
    fat5_status st;
    int64_t te, td, s, t;
    if (!m) return FAT5_ERR_INVALID_ARG;
    c = &m->cfg;
    m->have_fwd = m->fwd_labels = m->have_bwd = 0;
    if (c->head != FAT5_HEAD_LM) return fat5__head_forward_batch(m, b, &lc, out, loss_dst);
    if ((st = fat5__check_loss(m->ctx, &lc)) || (st = fat5__check_batch(m, b))) return st;
    te = b->n_enc_tokens;
    td = b->n_dec_tokens;
    if ((st = fat5_model_reserve(m, b->n_seq, te, td))) return st;
    m->n_seq = b->n_seq;
    m->te = te;
    m->td = td;
    m->loss = lc;
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
    fat5__model_drop_begin(m);
    if ((st = fat5__model_forward(m, out, loss_dst))) return st;
    m->have_fwd = 1;
    m->fwd_labels = b->labels != NULL;
    m->fwd_no_grad = m->no_grad;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_forward(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                        fat5_forward_result *out) {
    fat5_forward_result r;
    return fat5__model_forward_batch(m, b, loss, out ? out : &r, 0);
}

FAT5_API fat5_status fat5_model_get_logits(fat5_model *m, float *dst, int64_t n) {
    if (m->cfg.head != FAT5_HEAD_LM)
        return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_logits: the model's head is %s (no vocabulary "
                         "logits): read its outputs with fat5_model_get_head_output", fat5_model_architecture(m));
    if (!m->have_fwd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_logits: no forward has run");
    if (m->training && (size_t)m->td > fat5__xent_rows(m, (size_t)m->td))
        return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_logits: a training forward keeps the logits of %d "
                         "decoder tokens at most (this batch has %lld); run it in inference mode "
                         "(fat5_model_set_training(m, 0)) to read them", (int)m->xent_rows, (long long)m->td);
    if (!dst || n != m->td * m->cfg.vocab_size)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_get_logits: buffer holds %lld floats, logits are %lld",
                         dst ? (long long)n : 0LL, (long long)(m->td * m->cfg.vocab_size));
    return m->be->download(m->ctx, dst, m->ws.logits, (size_t)n * 4);
}

// FFN backward: dh (fp32 [T, D]) holds the gradient after the sublayer and, on return, before it;
// w->dh_act holds dh in the activation dtype on entry (the RMSNorm backward that last wrote dh wrote
// it too) and on return (this sublayer's norm backward writes both). dl: the layer's dropout code.
static fat5_status fat5__model_ffn_bwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, fat5__addr dh,
                                       int64_t T, int dl) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, F = c->d_ff;
    fat5_status st;
    FAT5__TRY(fat5__model_out_grad(m, dh, T, fat5__model_drop(m, dl, FAT5__DS_FF_OUT)));
    if (fat5__trains(m, y->wo))
        FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, y->wo), 1, w->dh_act, a->ff_h, D, F, T, 1.0f, 1.0f));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dffh, 0, w->dh_act, fat5__pa(m, y->wo), T, F, D, 1.0f, 0.0f));
    // gated: db overwrites dffh in place (each element is read before it is written)
    FAT5__TRY(be->act_bwd(ctx, w->da, c->gated ? w->dffh : 0, w->dffh, a->ff_a, a->ff_b, T * F, (int)c->act,
                          fat5__model_drop(m, dl, FAT5__DS_FF_HIDDEN)));
    {   // the weight gradients of wi_0 | wi_1 in one product (da, then db in dffh)
        const int wi[2] = {y->wi0, y->wi1};
        FAT5__TRY(fat5__model_proj_grad(m, wi, c->gated ? 2 : 1, w->da, w->dff_stride, a->n_ff, T, F, D));
    }
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->da, fat5__pa(m, y->wi0), T, D, F, 1.0f, 0.0f));
    if (c->gated) FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->dffh, fat5__pa(m, y->wi1), T, D, F, 1.0f, 1.0f));
    return be->rmsnorm_bwd(ctx, dh, fat5__pg_or0(m, y->ln_ff), w->dn, a->h_ff, fat5__pw(m, y->ln_ff), a->rs_ff, T, (int)D,
                           1, w->norm_scratch, w->dh_act);
}

// Attention sublayer backward (self or cross), same convention. For cross-attention the keys and
// values come from the encoder output: their gradient is added to d_enc_out.
static fat5_status fat5__model_attn_bwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, fat5__addr dh,
                                        int64_t T, int kind, int dl) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int cross = kind == FAT5__ATTN_CROSS, enc_side = kind == FAT5__ATTN_BIDIR;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, G = enc_side ? w->ea.G : 0, Tk = (cross ? m->te : T) + G;
    int H = (int)c->num_heads, dk = (int)c->d_kv;
    fat5__pos_args p = fat5__model_pos(m, y, kind, enc_side ? &w->ea : NULL);
    fat5__addr att = cross ? a->catt : a->att, lse = cross ? a->clse : a->lse, q = cross ? a->cq : a->q;
    fat5__addr k = cross ? a->ck : a->k, v = cross ? a->cv : a->v, nrm = cross ? a->n_ca : a->n_sa;
    fat5__addr hin = cross ? a->h_ca : a->h_sa, rs = cross ? a->rs_ca : a->rs_sa;
    int wq = cross ? y->cq : y->q, wk = cross ? y->ck : y->k, wv = cross ? y->cv : y->v, wo = cross ? y->co : y->o;
    int ln = cross ? y->ln_ca : y->ln_sa;
    fat5__addr lut = enc_side ? w->lut_bidir : w->lut_causal;
    fat5__addr cu_q = enc_side ? w->enc_cu : w->dec_cu, cu_k = (enc_side || cross) ? w->enc_cu : w->dec_cu;
    fat5__addr q_seq = enc_side ? w->enc_seq : w->dec_seq, k_seq = (enc_side || cross) ? w->enc_seq : w->dec_seq;
    fat5__addr kv_src = cross ? w->enc_out : nrm, dkv_dst = cross ? w->d_enc_out : w->dn;
    fat5__drop pd = fat5__model_drop(m, dl, cross ? FAT5__DS_CA_PROBS : FAT5__DS_SA_PROBS);
    fat5_status st;
    FAT5__TRY(fat5__model_out_grad(m, dh, T, fat5__model_drop(m, dl, cross ? FAT5__DS_CA_OUT : FAT5__DS_SA_OUT)));
    if (fat5__trains(m, wo)) FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, wo), 1, w->dh_act, att, D, I, T, 1.0f, 1.0f));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->datt, 0, w->dh_act, fat5__pa(m, wo), T, I, D, 1.0f, 0.0f));
    FAT5__TRY(be->attn_bwd_delta(ctx, w->delta, att, w->datt, T, H, dk));
    FAT5__TRY(be->attn_bwd_dq(ctx, w->dq, p.dbias, w->datt, lse, w->delta, q, k, v, p.bias, lut, cu_q, cu_k, q_seq, T,
                              H, dk, p.kind, p.nb, p.md, p.g, p.cu_g, w->dbias_scratch, pd));
    FAT5__TRY(be->attn_bwd_dkv(ctx, w->dk, w->dv, w->datt, lse, w->delta, q, k, v, p.bias, lut, cu_q, cu_k, k_seq, Tk,
                               H, dk, p.kind, p.nb, p.md, p.g, p.cu_g, pd));
    if (!cross) FAT5__TRY(fat5__model_rope(m, w->dq, w->dk, cu_q, q_seq, 0, T, 1));  // back through the rotation
    {   // weight gradients: q | k | v in one product (self-attention without globals), else q, then k | v
        const int wqkv[3] = {wq, wk, wv};
        if (!cross && Tk == T) {
            FAT5__TRY(fat5__model_proj_grad(m, wqkv, 3, w->dq, w->dqkv_stride, nrm, T, I, D));
        } else {
            if (fat5__trains(m, wq))
                FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, wq), 1, w->dq, nrm, I, D, T, 1.0f, 1.0f));
            FAT5__TRY(fat5__model_proj_grad(m, wqkv + 1, 2, w->dk, w->dqkv_stride, kv_src, Tk, I, D));
        }
    }
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->dq, fat5__pa(m, wq), T, D, I, 1.0f, 0.0f));
    if (G) FAT5__TRY(be->memset0(ctx, w->dn + (fat5__addr)(T * D) * 4, (size_t)(G * D) * 4));
    if (!cross || m->bwd_enc) {   // cross-attention: the encoder output's gradient, when the encoder trains
        FAT5__TRY(be->mm(ctx, FAT5__MM_NN, dkv_dst, 1, w->dk, fat5__pa(m, wk), Tk, D, I, 1.0f, 1.0f));
        FAT5__TRY(be->mm(ctx, FAT5__MM_NN, dkv_dst, 1, w->dv, fat5__pa(m, wv), Tk, D, I, 1.0f, 1.0f));
    }
    if (G) {  // the globals: back through their norm, then to the tokens of their blocks
        FAT5__TRY(be->rmsnorm_bwd(ctx, w->dgsum, fat5__pg_or0(m, y->gln), w->dn + (fat5__addr)(T * D) * 4,
                                  a->gsum, fat5__gln(m, y, &w->ea), a->rs_g, G, (int)D, 0,
                                  w->norm_scratch, 0));
        FAT5__TRY(be->block_sum_bwd(ctx, w->dn, w->dgsum, cu_q, w->ea.cu_g, q_seq, T, (int)D, p.g));
    }
    return be->rmsnorm_bwd(ctx, dh, fat5__pg_or0(m, ln), w->dn, hin, fat5__pw(m, ln), rs, T, (int)D, 1,
                           w->norm_scratch, w->dh_act);
}

// m->grad_ready of parameter p's place in the gradients: it and every gradient above it are final
static fat5_status fat5__grads_final(fat5_model *m, int p) {
    return m->grad_ready ? m->grad_ready(m->grad_ready_user, m->params[p].goffset) : FAT5_OK;
}

// whether any parameter of layer y trains
static int fat5__layer_trains(const fat5_model *m, const fat5__layer *y) {
    const int idx[17] = {y->ln_sa, y->q, y->k, y->v, y->o, y->rel, y->ln_ca, y->cq, y->ck,
                         y->cv, y->co, y->ln_ff, y->wi0, y->wi1, y->wo, y->grel, y->gln};
    int i, n = m->cfg.pos_kind == FAT5_POS_FIRE && y->rel >= 0 ? 6 : 1;   // FIRE: its block of six from rel
    for (i = 0; i < 17; i++)
        if (fat5__trains(m, idx[i])) return 1;
    for (i = 1; i < n; i++)
        if (fat5__trains(m, y->rel + i)) return 1;
    return 0;
}

// What the backward must go through for the frozen set: the lowest layer of each stack to run
// (*enc_lo, *dec_lo: that stack's layer count for none), whether the encoder runs at all (its
// output's gradient: m->bwd_enc) and whether anything below the lm_head trains (*below). A stack
// runs from its top down to the lowest layer with a trainable parameter, or to its embedding when
// the shared embedding trains; the decoder down to its first layer when the encoder runs (every
// cross-attention feeds the encoder output's gradient).
static void fat5__bwd_plan(fat5_model *m, int64_t *enc_lo, int64_t *dec_lo, int *below) {
    const fat5_model_config *c = &m->cfg;
    int shared = fat5__trains(m, m->shared);
    int64_t l;
    *enc_lo = shared ? 0 : c->num_layers;
    for (l = 0; l < *enc_lo; l++)
        if (fat5__layer_trains(m, &m->enc[l])) *enc_lo = l;
    m->bwd_enc = shared || *enc_lo < c->num_layers || fat5__trains(m, m->enc_final_ln);
    *dec_lo = shared || m->bwd_enc ? 0 : m->n_dec;
    for (l = 0; l < *dec_lo; l++)
        if (fat5__layer_trains(m, &m->dec[l])) *dec_lo = l;
    *below = m->bwd_enc || *dec_lo < m->n_dec || fat5__trains(m, m->dec_final_ln);
}

// The backward graph of the last forward: gradients added to m->gd.
static fat5_status fat5__model_backward(fat5_model *m, float grad_scale) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, V = c->vocab_size, te = m->te, td = m->td, l;
    float head_scale = c->scale_decoder_outputs ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    float scale = m->n_count ? (float)((double)grad_scale / (double)m->n_count) : 0.0f;
    int64_t enc_lo, dec_lo;
    int below;
    fat5_status st;
    // frozen parameters get no gradient, and the layers below the lowest one that trains none of theirs
    fat5__bwd_plan(m, &enc_lo, &dec_lo, &below);
    m->bwd_layers[0] = m->bwd_layers[1] = 0;
    // loss -> logits -> decoder output -> decoder final norm
    if (m->bwd_enc) FAT5__TRY(be->memset0(ctx, w->d_enc_out, (size_t)(te * D) * 4));
    if (c->head != FAT5_HEAD_LM) {   // the head: its gradients, and dn (or d_enc_out, encoder-only heads)
        FAT5__TRY(fat5__head_backward(m, grad_scale, below));
    } else {
        // dlogits (from the forward, unscaled) scaled in the products: head_scale x grad_scale / labels
        if (fat5__trains(m, m->lm_head))
            FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, m->lm_head), 1, w->dlogits, w->dec_out, V, D, td,
                             head_scale * scale, 1.0f));
        if (below && m->n_dec)
            FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->dlogits, fat5__pa(m, m->lm_head), td, D, V,
                             head_scale * scale, 0.0f));
    }
    if (below && m->n_dec) {
        FAT5__TRY(fat5__model_drop_inplace(m, w->dn, td * D, 0, fat5__stack_drop(m, 1, FAT5__DS_FINAL)));
        FAT5__TRY(be->rmsnorm_bwd(ctx, w->dh_dec, fat5__pg_or0(m, m->dec_final_ln), w->dn, w->dec_hf,
                                  fat5__pw(m, m->dec_final_ln), w->dec_rsf, td, (int)D, 0, w->norm_scratch, w->dh_act));
    }
    if (m->n_dec) FAT5__TRY(fat5__grads_final(m, m->dec_final_ln));
    // decoder layers, last to first (a layer's parameters start at its q; a table shared by the
    // layers lies in layer 0, the last one done)
    for (l = m->n_dec - 1; l >= dec_lo; l--) {
        int dl = fat5__drop_layer(1, l);
        FAT5__TRY(fat5__model_ffn_bwd(m, &m->dec[l], &w->dec[l], w->dh_dec, td, dl));
        FAT5__TRY(fat5__model_attn_bwd(m, &m->dec[l], &w->dec[l], w->dh_dec, td, FAT5__ATTN_CROSS, dl));
        FAT5__TRY(fat5__model_attn_bwd(m, &m->dec[l], &w->dec[l], w->dh_dec, td, FAT5__ATTN_CAUSAL, dl));
        FAT5__TRY(fat5__grads_final(m, m->dec[l].q));
        m->bwd_layers[1]++;
    }
    if (fat5__trains(m, m->shared) && m->n_dec) {
        FAT5__TRY(fat5__model_drop_inplace(m, w->dh_dec, td * D, 0, fat5__stack_drop(m, 1, FAT5__DS_EMBED)));
        FAT5__TRY(be->embed_bwd(ctx, fat5__pg(m, m->shared), w->dh_dec, w->dec_tok, td, (int)D));
    }
    // encoder (nothing when none of its parameters trains, nor the shared embedding)
    if (m->bwd_enc) {
        FAT5__TRY(fat5__model_drop_inplace(m, w->d_enc_out, te * D, 0, fat5__stack_drop(m, 0, FAT5__DS_FINAL)));
        FAT5__TRY(be->rmsnorm_bwd(ctx, w->dh_enc, fat5__pg_or0(m, m->enc_final_ln), w->d_enc_out, w->enc_hf,
                                  fat5__pw(m, m->enc_final_ln), w->enc_rsf, te, (int)D, 0, w->norm_scratch, w->dh_act));
        FAT5__TRY(fat5__grads_final(m, m->enc_final_ln));
        for (l = c->num_layers - 1; l >= enc_lo; l--) {
            int dl = fat5__drop_layer(0, l);
            FAT5__TRY(fat5__model_ffn_bwd(m, &m->enc[l], &w->enc[l], w->dh_enc, te, dl));
            FAT5__TRY(fat5__model_attn_bwd(m, &m->enc[l], &w->enc[l], w->dh_enc, te, FAT5__ATTN_BIDIR, dl));
            FAT5__TRY(fat5__grads_final(m, m->enc[l].q));
            m->bwd_layers[0]++;
        }
        if (fat5__trains(m, m->shared)) {
            FAT5__TRY(fat5__model_drop_inplace(m, w->dh_enc, te * D, 0, fat5__stack_drop(m, 0, FAT5__DS_EMBED)));
            FAT5__TRY(be->embed_bwd(ctx, fat5__pg(m, m->shared), w->dh_enc, w->enc_tok, te, (int)D));
        }
    }
    return m->grad_ready ? m->grad_ready(m->grad_ready_user, 0) : FAT5_OK;
}

// fat5_model_backward; with `wait` 0 the backward is only queued (the training loop waits once, at
// the end of its step)
static fat5_status fat5__model_backward_checked(fat5_model *m, float grad_scale, int wait) {
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!m->have_fwd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_backward: no forward has run");
    if (!m->fwd_labels)
        return fat5__err(m->ctx, FAT5_ERR_STATE,
                         "fat5_model_backward: the last forward had no labels, so there is no loss to differentiate");
    if (m->fwd_no_grad)
        return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_backward: the last forward was an evaluation's (no gradient)");
    if (m->have_bwd)
        return fat5__err(m->ctx, FAT5_ERR_STATE,
                         "fat5_model_backward: already ran for the last forward (its gradients were added once)");
    if (!m->training)
        return fat5__err(m->ctx, FAT5_ERR_STATE,
                         "fat5_model_backward: the model is in inference mode (fat5_model_set_training(m, 1) first)");
    if (!isfinite(grad_scale))
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_backward: grad_scale is %g, expected a finite value",
                         (double)grad_scale);
    m->have_bwd = 1;  // set first: a backward that fails half-way has already added to some gradients
    if ((st = fat5__model_backward(m, grad_scale))) return st;
    return wait ? m->be->sync(m->ctx) : FAT5_OK;
}

FAT5_API fat5_status fat5_model_backward(fat5_model *m, float grad_scale) {
    return fat5__model_backward_checked(m, grad_scale, 1);
}

// Inference mode frees the gradients and the workspace (the next forward lays it out again, one
// layer's buffers for all layers, nothing for a backward); training mode allocates zeroed
// gradients again.
FAT5_API fat5_status fat5_model_set_training(fat5_model *m, int training) {
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    training = training != 0;
    if (training == m->training) return FAT5_OK;
    fat5__ws_free(m);
    if (!training) {
        if (m->gd) m->be->free(m->ctx, m->gd);
        m->gd = 0;
    } else if ((st = m->be->alloc(m->ctx, (m->n_gfloats ? m->n_gfloats : 1) * 4, &m->gd))) {
        return fat5__err_prefix(m->ctx, st, "fat5_model_set_training: model gradients: ");
    }
    m->training = training;
    return FAT5_OK;
}

FAT5_API int fat5_model_is_training(const fat5_model *m) { return m ? m->training : 0; }

FAT5_API fat5_status fat5_model_set_dropout(fat5_model *m, int on, uint64_t seed, uint64_t draw) {
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (on && draw >> FAT5__DROP_DRAW_BITS)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_dropout: draw %llu, expected below 2^%d (the "
                         "forwards whose masks differ)", (unsigned long long)draw, FAT5__DROP_DRAW_BITS);
    m->drop_on = on != 0;
    m->drop_seed = on ? seed : 0;
    m->drop_draw = on ? draw : 0;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_set_dropout_rate(fat5_model *m, double rate, double attention_rate) {
    fat5_model_config c;
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    c = m->cfg;
    c.dropout_rate = rate;
    c.attention_dropout_rate = attention_rate < 0 ? -1 : attention_rate;
    if ((st = fat5_model_config_validate(m->ctx, &c)))
        return fat5__err_prefix(m->ctx, st, "fat5_model_set_dropout_rate: ");
    m->cfg = c;
    return FAT5_OK;
}

// ---- encoder attention patterns of a run ----

static const char *const fat5__attn_names[] = {"full", "local", "transient-global", "block-global"};

// the pattern's own limits and what it needs of the model (m may be NULL: the pattern alone)
static fat5_status fat5__check_attention(fat5_ctx *ctx, const fat5_model *m, const fat5_attention *a) {
    const char *name;
    if ((int)a->type < (int)FAT5_ENC_ATTN_FULL || (int)a->type > (int)FAT5_ENC_ATTN_BLOCK_GLOBAL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention: type %d is not a fat5_enc_attention", (int)a->type);
    if (a->type == FAT5_ENC_ATTN_FULL) return FAT5_OK;
    name = fat5__attn_names[a->type];
    if (a->radius < 1 || a->radius > FAT5__ATTN_MAX_RADIUS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention %s: a window of radius %lld, expected 1..%d (a token "
                         "sees the keys within the radius; 0 would leave it only itself)", name, (long long)a->radius,
                         FAT5__ATTN_MAX_RADIUS);
    if (a->type != FAT5_ENC_ATTN_LOCAL && (a->global < 1 || a->global > INT32_MAX))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention %s: %lld global tokens%s, expected 1..2^31-1", name,
                         (long long)a->global, a->type == FAT5_ENC_ATTN_TGLOBAL ? " per block" : "");
    if (m && a->type == FAT5_ENC_ATTN_TGLOBAL &&
        (m->cfg.pos_kind == FAT5_POS_ALIBI || m->cfg.pos_kind == FAT5_POS_FIRE || m->cfg.pos_kind == FAT5_POS_ROPE))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "attention transient-global: the global tokens take T5's bias "
                         "buckets of block distances; this model's position_encoding_type is %s",
                         fat5__pos_name(m->cfg.pos_kind));
    return FAT5_OK;
}

FAT5_API fat5_status fat5_attention_parse(fat5_ctx *ctx, const char *spec, fat5_attention *out) {
    fat5_attention a;
    const char *p;
    size_t len;
    int type, n = 0;
    if (!spec || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_attention_parse: NULL argument");
    p = strchr(spec, ':');
    len = p ? (size_t)(p - spec) : strlen(spec);
    for (type = 0; type < 4; type++)
        if (strlen(fat5__attn_names[type]) == len && strncmp(spec, fat5__attn_names[type], len) == 0) break;
    if (type == 4)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': expected full, local:R, block-global:R:G or "
                         "transient-global:R:G", spec);
    memset(&a, 0, sizeof a);
    a.type = (fat5_enc_attention)type;
    a.radius = type == FAT5_ENC_ATTN_FULL ? 0 : 127;
    a.global = type == FAT5_ENC_ATTN_TGLOBAL ? 16 : 0;
    while (p) {  // the numbers after the name: R, then G
        char *end;
        long long v;
        if (n >= (type == FAT5_ENC_ATTN_FULL ? 0 : type == FAT5_ENC_ATTN_LOCAL ? 1 : 2))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': %s takes %s", spec, fat5__attn_names[type],
                             type == FAT5_ENC_ATTN_FULL ? "no numbers"
                             : type == FAT5_ENC_ATTN_LOCAL ? "one number, its radius (local:R)"
                                                           : "two numbers, its radius and global tokens (R:G)");
        errno = 0;
        v = strtoll(p + 1, &end, 10);
        if (!((p[1] >= '0' && p[1] <= '9') || p[1] == '-') || end == p + 1 || errno || (*end && *end != ':'))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': expected full, local:R, block-global:R:G or "
                             "transient-global:R:G with whole numbers", spec);
        if (n++ == 0) a.radius = v;
        else a.global = v;
        p = *end ? end : NULL;
    }
    if (type == FAT5_ENC_ATTN_BLOCK_GLOBAL && n < 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': block-global needs its radius and global tokens "
                         "(block-global:R:G)", spec);
    if (fat5__check_attention(ctx, NULL, &a)) return FAT5_ERR_INVALID_ARG;
    *out = a;
    return FAT5_OK;
}

FAT5_API void fat5_attention_to_string(const fat5_attention *a, char buf[64]) {
    int t = a && (int)a->type >= 0 && (int)a->type <= 3 ? (int)a->type : 0;
    if (t == FAT5_ENC_ATTN_FULL) snprintf(buf, 64, "full");
    else if (t == FAT5_ENC_ATTN_LOCAL) snprintf(buf, 64, "local:%lld", (long long)a->radius);
    else snprintf(buf, 64, "%s:%lld:%lld", fat5__attn_names[t], (long long)a->radius, (long long)a->global);
}

FAT5_API fat5_status fat5_model_set_attention(fat5_model *m, const fat5_attention *a) {
    fat5_attention n;
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!a) return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_attention: NULL pattern");
    if ((st = fat5__check_attention(m->ctx, m, a))) return st;
    n = *a;
    if (n.type == FAT5_ENC_ATTN_FULL) n.radius = 0;
    if (n.type == FAT5_ENC_ATTN_FULL || n.type == FAT5_ENC_ATTN_LOCAL) n.global = 0;
    if (n.type == m->attn.type && n.radius == m->attn.radius && n.global == m->attn.global) return FAT5_OK;
    fat5__ws_free(m);  // the workspace of transient-global holds the globals: laid out again by the next forward
    m->attn = n;
    return FAT5_OK;
}

FAT5_API fat5_attention fat5_model_get_attention(const fat5_model *m) {
    fat5_attention a;
    memset(&a, 0, sizeof a);
    return m ? m->attn : a;
}

