// =============================================================================================
// ==[7.1] generate: decoders, the KV cache and inference mode ==
// A fat5_decoder runs the encoder once per request, keeps each layer's cross-attention keys and
// values of the encoder output, and one self-attention cache per layer, [max_rows, max_len, H*d_kv]
// for keys and the same for values, written in place at the current position. Every decode step
// is written once over the backend's ops, like the training graph; on the GPU it can be captured
// into a CUDA graph and replayed (fat5__decoder_step_dev reads its tokens and rows from device
// memory and never synchronises with the host).
//
// Each row has its own position (tokens consumed): the backend keeps them in the int32 array
// d->pos_d [max_rows], which the step's last op advances for the rows of the step (a replayed graph
// reads them there). A request started with fat5_decoder_start advances in lock step (d->pos, the
// host's copy of its rows' common position); rows that join a running decoder (fat5_decoder_join,
// continuous batching) each own a slot of the encoder memory, max_te / max_rows positions at
// r * slot, and stand at their own positions (d->pos_h, the host's copies).

struct fat5_decoder {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    int64_t max_rows, max_te, max_len;   // capacities fixed at create
    int64_t n_inputs, rows_per_input;    // of the current request (fat5_decoder_start)
    int64_t n_rows;                      // n_inputs * rows_per_input
    int64_t te;                          // encoder tokens of the request
    int64_t pos;                         // tokens consumed by each live row (fat5_decoder_start's lock step)
    int64_t n_live;                      // rows live (started: named by the last step; rows only leave)
    unsigned char *live;                 // [max_rows] 1 while a row takes part in the steps
    int32_t *pos_h;                      // [max_rows] each row's position (the host's copy of pos_d)
    int32_t *xoff_h, *xlen_h;            // [max_rows] each row's encoder keys (start, count): the host's copies
    int32_t *stage;                      // staging of the one-copy uploads (fat5__decoder_upload_*)
    size_t stage_bytes;
    int started;                         // 1: fat5_decoder_start's request, 2: rows joined (fat5_decoder_join)
    int64_t slot;                        // encoder positions of a row's slot (joined rows): max_te / max_rows
    // on the backend
    fat5__addr tok;                      // int32 [max_rows]: the tokens of the next step
    fat5__addr rows;                     // int32 [max_rows]: the row of each entry of the next step
    fat5__addr logits;                   // fp32 [max_rows, vocab]: the last step's logits, by entry
    fat5__addr pos_d;                    // int32 [max_rows]: the position each row's next step writes
    fat5__addr self_off;                 // int32 [max_rows]: first cache row of each row (r * max_len)
    fat5__addr cross_off, cross_len;     // int32 [max_rows]: encoder keys of each row (start, count)
    fat5__addr iota;                     // int32 [max_rows]: 0 .. max_rows-1
    fat5__addr *kc, *vc;                 // per decoder layer: self-attention cache [max_rows * max_len, I]
    fat5__addr *ck, *cv;                 // per decoder layer: cross keys / values [max_te, I]
    fat5__addr ws_base;                  // everything else of the step and of the encoder
    size_t ws_bytes;
    int32_t *host_i32;                   // staging [max(max_rows, max_te, max_distance) + 1]
    // step buffers ([max_rows, .]) and scratch, laid out by fat5__decoder_layout
    fat5__addr h, r, n_act, q, k, v, att, ff_a, ff_b, ff_h, out_act, attn_scratch;
    fat5__addr tmp_cache;                // one layer's cache: the reorder goes through it
    // the encoder (one layer's buffers; enc.h_sa / h_ff / h_ca stay 0: nothing is kept for a backward)
    fat5__layer_acts enc;
    fat5__addr enc_h, enc_out, enc_tok, enc_cu, enc_seq, lut_bidir, lut_causal;
    fat5__enc_attn ea;                   // the model's encoder attention when the decoder was made
    int32_t *host_cu_g;                  // staging [max_rows + 1] of the globals' rows (transient-global)
    fat5__graph graph;                   // the recorded step (fat5__decoder_graph_step; GPU), or none
};

#define FAT5__TRY(call)                          \
    do {                                         \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)

// ---- internal interface of the decoding strategies ([7.2]) ----
// fat5__decoder_step_dev: one step for entries 0 .. n-1 of d->tok / d->rows (device int32, rows
// strictly increasing, all live): embeds the tokens, runs the decoder layers against the cache,
// writes the next-token logits to d->logits [n, vocab] fp32, and advances the position (host and
// device). Enqueues work only: no host synchronisation and no host-to-device copy, so it can be
// captured into a CUDA graph.
static fat5_status fat5__decoder_step_dev(fat5_decoder *d, int64_t n);
// fat5__decoder_reorder_dev: row r of the cache continues from row src[r] (device int32
// [d->n_rows]) for every position written so far. Enqueues work only.
static fat5_status fat5__decoder_reorder_dev(fat5_decoder *d, fat5__addr src);

// Lays out the decoder's backend buffers (every one on a 256-byte boundary); base == 0 measures.
// Returns 0 when the size overflows. max_len == 0 (fat5_model_encode) leaves out the caches.
// The encoder keeps one layer's buffers, all of them O(tokens): with a pattern of linear cost
// (local, block-global) a long input costs memory and time linear in its length. Its FFN runs
// over FAT5__ENC_FFN_ROWS tokens at a time, so its d_ff-wide buffers stay bounded.
#ifndef FAT5__ENC_FFN_ROWS
#define FAT5__ENC_FFN_ROWS 8192  // (the tests make it small, so that their inputs take several chunks)
#endif
static int fat5__decoder_layout(fat5_decoder *d, fat5__addr base, size_t *total) {
    const fat5_model_config *c = &d->m->cfg;
    size_t A = d->m->act_size, D = (size_t)c->d_model, I = (size_t)(c->num_heads * c->d_kv), F = (size_t)c->d_ff;
    size_t H = (size_t)c->num_heads, V = (size_t)c->vocab_size, md = (size_t)c->rel_max_distance;
    size_t N = (size_t)d->max_rows, Te = (size_t)d->max_te, L = (size_t)d->max_len, NL = 0, off = 0;
    size_t Gx = (size_t)fat5__globals_max(&d->ea.at, d->max_te);  // transient-global rows after the tokens
    size_t Tf = Te < FAT5__ENC_FFN_ROWS ? Te : FAT5__ENC_FFN_ROWS;  // the encoder's FFN rows at a time
    fat5__layer_acts *a = &d->enc;
    int ok = fat5__mul_ok(N, L, &NL), l;
    // the step
    // (tok, rows, and pos_d .. cross_len, are neighbours in this order: one copy uploads each group)
    FAT5__WS(d->tok, N, 1, 4);
    FAT5__WS(d->rows, N, 1, 4);
    FAT5__WS(d->pos_d, N, 1, 4);
    FAT5__WS(d->self_off, N, 1, 4);
    FAT5__WS(d->cross_off, N, 1, 4);
    FAT5__WS(d->cross_len, N, 1, 4);
    FAT5__WS(d->iota, N, 1, 4);
    FAT5__WS(d->logits, L ? N : 0, V, 4);
    FAT5__WS(d->h, L ? N : 0, D, 4);
    FAT5__WS(d->r, L ? N : 0, 1, 4);
    FAT5__WS(d->n_act, L ? N : 0, D, A);
    FAT5__WS(d->q, L ? N : 0, I, A);
    FAT5__WS(d->k, L ? N : 0, I, A);
    FAT5__WS(d->v, L ? N : 0, I, A);
    FAT5__WS(d->att, L ? N : 0, I, A);
    FAT5__WS(d->ff_a, L ? N : 0, F, A);
    if (c->gated) FAT5__WS(d->ff_b, L ? N : 0, F, A);  // act_fwd gates when ff_b is not 0
    FAT5__WS(d->ff_h, L ? N : 0, F, A);
    FAT5__WS(d->out_act, L ? N : 0, D, A);
    FAT5__WS(d->attn_scratch, L ? N : 0, FAT5__DECODE_SCRATCH(H, c->d_kv), 4);
    // the caches: self-attention [N * L, I] and cross-attention [Te, I] per decoder layer
    for (l = 0; l < c->num_decoder_layers; l++) {
        FAT5__WS(d->kc[l], NL, I, A);
        FAT5__WS(d->vc[l], NL, I, A);
        FAT5__WS(d->ck[l], L ? Te : 0, I, A);
        FAT5__WS(d->cv[l], L ? Te : 0, I, A);
    }
    FAT5__WS(d->tmp_cache, c->num_decoder_layers ? NL : 0, I, A);
    // the encoder, one layer's buffers for all layers (nothing is kept for a backward)
    memset(a, 0, sizeof *a);
    FAT5__WS(d->enc_h, Te, D, 4);
    FAT5__WS(a->rs_sa, Te, 1, 4);
    FAT5__WS(a->n_sa, Te + Gx, D, A);
    FAT5__WS_BLOCKS(a->q, 3, Te + Gx, I, A, a->qkv_stride);  // q | k | v as the model lays them out
    a->k = fat5__ws_block(a->q, a->qkv_stride, A, 1);
    a->v = fat5__ws_block(a->q, a->qkv_stride, A, 2);
    FAT5__WS(a->att, Te, I, A);
    FAT5__WS(a->lse, Te, H, 4);
    FAT5__WS(a->gsum, Gx, D, 4);
    FAT5__WS(a->rs_g, Gx, 1, 4);
    FAT5__WS(d->ea.cu_g, d->ea.at.type == FAT5_ENC_ATTN_TGLOBAL ? N + 1 : 0, 1, 4);
    FAT5__WS(d->ea.ones, d->ea.at.type == FAT5_ENC_ATTN_TGLOBAL ? D : 0, 1, 4);
    // the FFN runs FAT5__ENC_FFN_ROWS tokens at a time (fat5__decoder_encode)
    FAT5__WS(a->rs_ff, Tf, 1, 4);
    FAT5__WS(a->n_ff, Tf, D, A);
    FAT5__WS_BLOCKS(a->ff_a, c->gated ? 2 : 1, Tf, F, A, a->ff_stride);  // ff_a | ff_b
    a->ff_b = c->gated ? fat5__ws_block(a->ff_a, a->ff_stride, A, 1) : 0;
    FAT5__WS(a->ff_h, Tf, F, A);
    FAT5__WS(d->enc_out, Te, D, A);
    FAT5__WS(d->enc_tok, Te, 1, 4);
    FAT5__WS(d->enc_cu, N + 1, 1, 4);
    FAT5__WS(d->enc_seq, Te + Gx, 1, 4);
    FAT5__WS(d->lut_bidir, md, 1, 4);
    FAT5__WS(d->lut_causal, md, 1, 4);
    *total = off;
    return ok;
}

FAT5_API void fat5_decoder_destroy(fat5_decoder *d) {
    if (!d) return;
    d->be->graph_destroy(d->ctx, d->graph.exec);
    if (d->ws_base) d->be->free(d->ctx, d->ws_base);
    fat5__free(d->ctx, d->kc);
    fat5__free(d->ctx, d->host_i32);
    fat5__free(d->ctx, d->host_cu_g);
    fat5__free(d->ctx, d->live);
    fat5__free(d->ctx, d->pos_h);
    fat5__free(d->ctx, d->stage);
    fat5__free(d->ctx, d);
}

FAT5_API fat5_status fat5_decoder_create(fat5_model *m, int64_t max_rows, int64_t max_te, int64_t max_len,
                                         fat5_decoder **out) {
    fat5_ctx *ctx;
    fat5_decoder *d;
    const fat5_model_config *c;
    size_t total = 0, nl, stage, i;
    int64_t md;
    fat5_status st;
    if (!out) return m ? fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_decoder_create: out is NULL") : FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    c = &m->cfg;
    md = c->rel_max_distance;
    if (max_rows < 1 || max_rows > INT32_MAX / 2 || max_te < 1 || max_te > INT32_MAX || max_len < 0 ||
        max_len > INT32_MAX || max_rows * (max_len > 0 ? max_len : 1) > INT32_MAX ||
        fat5__enc_kv_rows(&m->attn, max_te) > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_decoder_create: max_rows %lld, max_enc_tokens %lld, max_len %lld: rows and encoder "
                         "tokens must be >= 1, max_len >= 0, and rows * max_len below 2^31",
                         (long long)max_rows, (long long)max_te, (long long)max_len);
    if (max_len > 0 && c->head != FAT5_HEAD_LM)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_decoder_create: generation needs a language model "
                         "(T5ForConditionalGeneration); this model is %s (fat5_model_load_head turns a checkpoint's "
                         "stacks into another head)", fat5_model_architecture(m));
    d = FAT5__CAST(fat5_decoder *, fat5__calloc(ctx, 1, sizeof *d));
    if (!d) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: out of memory");
    d->m = m;
    d->ctx = ctx;
    d->be = m->be;
    d->max_rows = max_rows;
    d->max_te = max_te;
    d->max_len = max_len;
    d->ea.at = m->attn;
    nl = (size_t)c->num_decoder_layers;
    stage = (size_t)fat5__enc_kv_rows(&m->attn, max_te);
    if ((size_t)max_rows > stage) stage = (size_t)max_rows;
    if ((size_t)md > stage) stage = (size_t)md;
    stage++;
    d->kc = FAT5__CAST(fat5__addr *, fat5__calloc(ctx, 4 * (nl ? nl : 1), sizeof(fat5__addr)));
    d->host_i32 = FAT5__CAST(int32_t *, fat5__calloc(ctx, stage, sizeof(int32_t)));
    d->host_cu_g = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)max_rows + 1, sizeof(int32_t)));
    d->live = FAT5__CAST(unsigned char *, fat5__calloc(ctx, (size_t)max_rows, 1));
    d->pos_h = FAT5__CAST(int32_t *, fat5__calloc(ctx, 3 * (size_t)max_rows, sizeof(int32_t)));
    d->xoff_h = d->pos_h ? d->pos_h + max_rows : NULL;
    d->xlen_h = d->pos_h ? d->xoff_h + max_rows : NULL;
    d->slot = max_te / max_rows;
    if (!d->kc || !d->host_i32 || !d->host_cu_g || !d->live || !d->pos_h) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: out of memory");
    }
    d->vc = d->kc + nl;
    d->ck = d->vc + nl;
    d->cv = d->ck + nl;
    if (!fat5__decoder_layout(d, 0, &total)) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: the buffer size overflows");
    }
    if ((st = d->be->alloc(ctx, total, &d->ws_base))) {
        fat5_decoder_destroy(d);
        return fat5__err_prefix(ctx, st,
                                "fat5_decoder_create: %.1f MiB for %lld rows x %lld positions and %lld encoder tokens: ",
                                (double)total / 1048576.0, (long long)max_rows, (long long)max_len, (long long)max_te);
    }
    d->ws_bytes = total;
    fat5__decoder_layout(d, d->ws_base, &total);
    // the staging of the one-copy uploads: the entries (tok .. rows) and the rows' state (pos_d .. cross_len)
    d->stage_bytes = (size_t)(d->rows - d->tok) + (size_t)max_rows * 4;
    if ((size_t)(d->cross_len - d->pos_d) + (size_t)max_rows * 4 > d->stage_bytes)
        d->stage_bytes = (size_t)(d->cross_len - d->pos_d) + (size_t)max_rows * 4;
    d->stage = FAT5__CAST(int32_t *, fat5__calloc(ctx, d->stage_bytes / 4 + 1, sizeof(int32_t)));
    if (!d->stage) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: out of memory");
    }
    // constant tables: bucket of each distance (both kinds), each row's first cache row, 0 .. N-1
    for (i = 0; i < (size_t)md; i++) d->host_i32[i] = fat5__rel_bucket(-(int64_t)i, 1, (int)c->rel_buckets, (int)md);
    st = d->be->upload(ctx, d->lut_bidir, d->host_i32, (size_t)md * 4);
    for (i = 0; i < (size_t)md && !st; i++)
        d->host_i32[i] = fat5__rel_bucket(-(int64_t)i, 0, (int)c->rel_buckets, (int)md);
    if (!st) st = d->be->upload(ctx, d->lut_causal, d->host_i32, (size_t)md * 4);
    for (i = 0; i < (size_t)max_rows && !st; i++) d->host_i32[i] = (int32_t)(i * (size_t)max_len);
    if (!st) st = d->be->upload(ctx, d->self_off, d->host_i32, (size_t)max_rows * 4);
    for (i = 0; i < (size_t)max_rows && !st; i++) d->host_i32[i] = (int32_t)i;
    if (!st) st = d->be->upload(ctx, d->iota, d->host_i32, (size_t)max_rows * 4);
    if (!st && d->ea.ones) st = d->be->fill_f32(ctx, d->ea.ones, 1.0f, c->d_model);
    if (!st) st = d->be->memset0(ctx, d->pos_d, (size_t)max_rows * 4);
    if (!st) st = d->be->sync(ctx);
    if (st) {
        fat5_decoder_destroy(d);
        return st;
    }
    *out = d;
    return FAT5_OK;
}

// Checks a packed encoder batch: n_seq >= 1 sequences, each at least one token, ids in the
// vocabulary, at most max_te tokens in all. Messages name `what` and the sequence.
static fat5_status fat5__check_enc_input(fat5_model *m, const char *what, const int32_t *tokens,
                                         const int32_t *cu, int64_t n_seq, int64_t max_te, const fat5_attention *at) {
    fat5_ctx *ctx = m->ctx;
    int64_t s, t;
    if (n_seq < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: no input (n = %lld)", what, (long long)n_seq);
    if (!tokens || !cu) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tokens and cu_seqlens are required", what);
    if (cu[0] != 0) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: cu_seqlens[0] = %d, expected 0", what, (int)cu[0]);
    for (s = 0; s < n_seq; s++) {
        if (cu[s + 1] <= cu[s])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: input %lld is empty (cu_seqlens %d .. %d)", what,
                             (long long)s, (int)cu[s], (int)cu[s + 1]);
        if (cu[s + 1] > max_te)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: the inputs hold more than %lld tokens (input %lld ends at %d)", what,
                             (long long)max_te, (long long)s, (int)cu[s + 1]);
        for (t = cu[s]; t < cu[s + 1]; t++)
            if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "%s: input %lld, position %lld: token id %d is outside [0, vocab_size %lld)", what,
                                 (long long)s, (long long)(t - cu[s]), (int)tokens[t], (long long)m->cfg.vocab_size);
    }
    return fat5__check_prefix(ctx, at, cu, n_seq, what);
}

// The encoder on n_seq packed inputs (already checked): the final-norm output in d->enc_out (act).
static fat5_status fat5__decoder_encode(fat5_decoder *d, const int32_t *tokens, const int32_t *cu, int64_t n_seq) {
    fat5_model *m = d->m;
    fat5_ctx *ctx = d->ctx;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &m->cfg;
    int64_t te = cu[n_seq], l, t, D = c->d_model;
    fat5_status st;
    FAT5__TRY(be->upload(ctx, d->enc_tok, tokens, (size_t)te * 4));
    FAT5__TRY(be->upload(ctx, d->enc_cu, cu, (size_t)(n_seq + 1) * 4));
    FAT5__TRY(fat5__enc_maps(ctx, be, &d->ea, cu, n_seq, d->host_i32, d->host_cu_g, d->enc_seq));
    FAT5__TRY(be->embed_fwd(ctx, d->enc_h, fat5__pw(m, m->shared), d->enc_tok, te, (int)D));
    for (l = 0; l < c->num_layers; l++) {
        FAT5__TRY(fat5__model_self_attn_fwd(m, &m->enc[l], &d->enc, d->enc_h, te, d->enc_cu, d->enc_seq,
                                            FAT5__ATTN_BIDIR, d->lut_bidir, &d->ea, -1));
        for (t = 0; t < te; t += FAT5__ENC_FFN_ROWS)  // token by token: chunks of the stream
            FAT5__TRY(fat5__model_ffn_fwd(m, &m->enc[l], &d->enc, d->enc_h + (fat5__addr)(t * D) * 4,
                                          te - t < FAT5__ENC_FFN_ROWS ? te - t : FAT5__ENC_FFN_ROWS, -1));
    }
    // the staging buffer is read by the uploads above before it is reused (the CPU copies at once;
    // the GPU's uploads are synchronous copies from pageable memory)
    return be->rmsnorm_fwd(ctx, d->enc_out, d->enc.rs_sa, d->enc_h, fat5__pw(m, m->enc_final_ln), te, (int)D,
                           (float)c->layer_norm_eps, 0);
}

// Every decoder layer's cross-attention keys and values of len encoder outputs from d->enc_out
// (token offset `from`), written at token offset `at` of the layer's ck / cv. Enqueues work only.
static fat5_status fat5__decoder_cross_kv(fat5_decoder *d, int64_t at, int64_t from, int64_t len) {
    fat5_model *m = d->m;
    const fat5_model_config *c = &m->cfg;
    size_t I = (size_t)(c->num_heads * c->d_kv), D = (size_t)c->d_model, A = m->act_size;
    fat5__addr dst = (fat5__addr)((size_t)at * I * A), src = d->enc_out + (fat5__addr)((size_t)from * D * A);
    int64_t l;
    fat5_status st;
    for (l = 0; l < c->num_decoder_layers; l++) {
        const fat5__layer *y = &m->dec[l];
        FAT5__TRY(d->be->mm(d->ctx, FAT5__MM_NT, d->ck[l] + dst, 0, src, fat5__pa(m, y->ck), len, (int64_t)I,
                            (int64_t)D, 1.0f, 0.0f));
        FAT5__TRY(d->be->mm(d->ctx, FAT5__MM_NT, d->cv[l] + dst, 0, src, fat5__pa(m, y->cv), len, (int64_t)I,
                            (int64_t)D, 1.0f, 0.0f));
    }
    return FAT5_OK;
}

static fat5_status fat5__decoder_upload_rows(fat5_decoder *d);

FAT5_API fat5_status fat5_decoder_start(fat5_decoder *d, const int32_t *tokens, const int32_t *cu, int64_t n_inputs,
                                        int64_t rows_per_input) {
    fat5_model *m;
    fat5_ctx *ctx;
    int64_t r, te;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    m = d->m, ctx = d->ctx;
    d->started = 0;
    if (d->max_len < 1)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_decoder_start: this decoder has no cache (max_len 0)");
    if (rows_per_input < 1 || n_inputs < 1 || n_inputs > d->max_rows || rows_per_input > d->max_rows / n_inputs)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_decoder_start: %lld inputs x %lld rows each: need at least one of each and at most "
                         "%lld rows (the decoder's max_rows)",
                         (long long)n_inputs, (long long)rows_per_input, (long long)d->max_rows);
    if ((st = fat5__check_enc_input(m, "fat5_decoder_start", tokens, cu, n_inputs, d->max_te, &d->ea.at))) return st;
    te = cu[n_inputs];
    FAT5__TRY(fat5__decoder_encode(d, tokens, cu, n_inputs));
    FAT5__TRY(fat5__decoder_cross_kv(d, 0, 0, te));   // packed: input i's keys at cu[i]
    // row r reads input r / rows_per_input; every row is live and at position 0
    d->n_inputs = n_inputs;
    d->rows_per_input = rows_per_input;
    d->n_rows = n_inputs * rows_per_input;
    d->te = te;
    memset(d->xoff_h, 0, (size_t)d->max_rows * sizeof(int32_t));
    memset(d->xlen_h, 0, (size_t)d->max_rows * sizeof(int32_t));
    memset(d->pos_h, 0, (size_t)d->max_rows * sizeof(int32_t));
    for (r = 0; r < d->n_rows; r++) {
        d->xoff_h[r] = cu[r / rows_per_input];
        d->xlen_h[r] = cu[r / rows_per_input + 1] - cu[r / rows_per_input];
    }
    FAT5__TRY(fat5__decoder_upload_rows(d));   // (a copy returns when it is done, the encoder's work before it)
    memset(d->live, 0, (size_t)d->max_rows);
    memset(d->live, 1, (size_t)d->n_rows);
    d->n_live = d->n_rows;
    d->pos = 0;
    d->started = 1;
    return FAT5_OK;
}

// RMSNorm of the residual stream d->h (weight ln), then the products with w0 (w1, w2) as norm_mm:
// for a few entries one norm_mm (one launch, each weight read once for all of them); for more,
// rmsnorm_fwd, mm (on the GPU's matrix units) and act_fwd, the cache rows by cache_write (so too
// on a GPU context with FAT5_MM_ROWS=0).
#define FAT5__DEC_FUSED_ROWS 8
static fat5_status fat5__dec_norm_mm(fat5_decoder *d, fat5__addr y0, fat5__addr y1, fat5__addr y2, fat5__addr ln,
                                     fat5__addr w0, fat5__addr w1, fat5__addr w2, int64_t n, int64_t N, int act,
                                     fat5__addr rows) {
    fat5_ctx *ctx = d->ctx;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &d->m->cfg;
    int D = (int)c->d_model;
    float eps = (float)c->layer_norm_eps;
    fat5_status st;
    int fused = n <= FAT5__DEC_FUSED_ROWS && n <= be->fused_rows(ctx);  // mm_rows 0: every product on cuBLAS
    if (fused)
        return be->norm_mm(ctx, y0, y1, y2, d->h, ln, w0, w1, w2, n, (int)N, D, eps, act, rows, d->self_off, d->pos_d);
    FAT5__TRY(be->rmsnorm_fwd(ctx, d->n_act, d->r, d->h, ln, n, D, eps, 0));
    if (act >= 0) {
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->ff_a, 0, d->n_act, w0, n, N, D, 1.0f, 0.0f));
        if (w1) FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->ff_b, 0, d->n_act, w1, n, N, D, 1.0f, 0.0f));
        return be->act_fwd(ctx, y0, d->ff_a, w1 ? d->ff_b : 0, n * N, act, fat5__drop_none());
    }
    FAT5__TRY(be->mm(ctx, FAT5__MM_NT, y0, 0, d->n_act, w0, n, N, D, 1.0f, 0.0f));
    if (w1) FAT5__TRY(be->mm(ctx, FAT5__MM_NT, rows ? d->k : y1, 0, d->n_act, w1, n, N, D, 1.0f, 0.0f));
    if (w2) FAT5__TRY(be->mm(ctx, FAT5__MM_NT, rows ? d->v : y2, 0, d->n_act, w2, n, N, D, 1.0f, 0.0f));
    return rows ? be->cache_write(ctx, y1, y2, d->k, d->v, rows, d->self_off, d->pos_d, n, (int)N) : FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__decoder_step_dev(fat5_decoder *d, int64_t n) {
    fat5_model *m = d->m;
    fat5_ctx *ctx = d->ctx;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size, l;
    int H = (int)c->num_heads, dk = (int)c->d_kv, nb = (int)c->rel_buckets, md = (int)c->rel_max_distance;
    fat5__pos_args p;
    float eps = (float)c->layer_norm_eps, head_scale = c->scale_decoder_outputs ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    fat5_status st;
    FAT5__TRY(be->embed_fwd(ctx, d->h, fat5__pw(m, m->shared), d->tok, n, (int)D));
    for (l = 0; l < c->num_decoder_layers; l++) {
        const fat5__layer *y = &m->dec[l];
        // self-attention: this position's key and value go into the cache (straight from the
        // projection, or after the rotation: the cache keeps rotated keys), the query reads it all
        if (c->pos_kind != FAT5_POS_ROPE) {
            FAT5__TRY(fat5__dec_norm_mm(d, d->q, d->kc[l], d->vc[l], fat5__pw(m, y->ln_sa), fat5__pa(m, y->q),
                                        fat5__pa(m, y->k), fat5__pa(m, y->v), n, I, -1, d->rows));
        } else {
            FAT5__TRY(fat5__dec_norm_mm(d, d->q, d->k, d->v, fat5__pw(m, y->ln_sa), fat5__pa(m, y->q),
                                        fat5__pa(m, y->k), fat5__pa(m, y->v), n, I, -1, 0));
            FAT5__TRY(fat5__model_rope(m, d->q, d->k, 0, d->rows, d->pos_d, n, 0));
            FAT5__TRY(be->cache_write(ctx, d->kc[l], d->vc[l], d->k, d->v, d->rows, d->self_off, d->pos_d, n, (int)I));
        }
        p = fat5__model_pos(m, y, FAT5__ATTN_CAUSAL, NULL);
        FAT5__TRY(be->attn_decode(ctx, d->att, d->q, d->kc[l], d->vc[l], p.bias, d->lut_causal, d->rows, d->self_off, 0,
                                  d->pos_d, n, H, dk, p.kind, p.nb, p.md, (int)d->max_len, d->attn_scratch));
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->h, 1, d->att, fat5__pa(m, y->o), n, D, I, 1.0f, 1.0f));
        // cross-attention against the row's encoder keys and values
        FAT5__TRY(fat5__dec_norm_mm(d, d->q, 0, 0, fat5__pw(m, y->ln_ca), fat5__pa(m, y->cq), 0, 0, n, I, -1, 0));
        FAT5__TRY(be->attn_decode(ctx, d->att, d->q, d->ck[l], d->cv[l], 0, d->lut_causal, d->rows, d->cross_off,
                                  d->cross_len, d->pos_d, n, H, dk, FAT5__ATTN_CROSS, nb, md, (int)d->max_te,
                                  d->attn_scratch));  // max_te: a replayed graph serves any request
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->h, 1, d->att, fat5__pa(m, y->co), n, D, I, 1.0f, 1.0f));
        // FFN
        FAT5__TRY(fat5__dec_norm_mm(d, d->ff_h, 0, 0, fat5__pw(m, y->ln_ff), fat5__pa(m, y->wi0),
                                    c->gated ? fat5__pa(m, y->wi1) : 0, 0, n, F, (int)c->act, 0));
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->h, 1, d->ff_h, fat5__pa(m, y->wo), n, D, F, 1.0f, 1.0f));
    }
    FAT5__TRY(be->rmsnorm_fwd(ctx, d->out_act, d->r, d->h, fat5__pw(m, m->dec_final_ln), n, (int)D, eps, 0));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->logits, 1, d->out_act, fat5__pa(m, m->lm_head), n, V, D, head_scale, 0.0f));
    FAT5__TRY(be->add_i32(ctx, d->pos_d, d->rows, 1, n));
    d->pos++;
    return FAT5_OK;
}

// Rows row0 .. row0 + n - 1 of decoder layer l's caches continue from rows src[r] (device int32,
// indexed by row) for the positions each has written, through the spare buffer: gathered into it,
// then copied back (identity indices). Enqueues work only.
static fat5_status fat5__decoder_gather(fat5_decoder *d, int64_t l, fat5__addr src, int64_t row0, int64_t n) {
    const fat5__backend *be = d->be;
    int I = (int)(d->m->cfg.num_heads * d->m->cfg.d_kv);
    fat5__addr rows = d->iota + (fat5__addr)(row0 * 4);
    fat5_status st;
    FAT5__TRY(be->cache_gather(d->ctx, d->tmp_cache, d->kc[l], src, rows, d->self_off, d->pos_d, n, I));
    FAT5__TRY(be->cache_gather(d->ctx, d->kc[l], d->tmp_cache, d->iota, rows, d->self_off, d->pos_d, n, I));
    FAT5__TRY(be->cache_gather(d->ctx, d->tmp_cache, d->vc[l], src, rows, d->self_off, d->pos_d, n, I));
    return be->cache_gather(d->ctx, d->vc[l], d->tmp_cache, d->iota, rows, d->self_off, d->pos_d, n, I);
}

static FAT5__UNUSED fat5_status fat5__decoder_reorder_dev(fat5_decoder *d, fat5__addr src) {
    int64_t l;
    fat5_status st;
    for (l = 0; l < d->m->cfg.num_decoder_layers; l++) FAT5__TRY(fat5__decoder_gather(d, l, src, 0, d->n_rows));
    return FAT5_OK;
}

// The step for n entries replayed from a recording (fat5__graph_step; GPU decoders): recorded at
// the first call for this n, replayed afterwards. fat5__decoder_step_dev advances the host position
// when it is recorded, so a replay advances it there. A recording that fails leaves the decoder as
// it was and returns the error (callers fall back to plain launches). Callers that record more
// than the step (a strategy's ops after it) follow the same rule.
static fat5_status fat5__decoder_step_rec(void *arg, int64_t n) { return fat5__decoder_step_dev((fat5_decoder *)arg, n); }
static FAT5__UNUSED fat5_status fat5__decoder_graph_step(fat5_decoder *d, int64_t n) {
    return fat5__graph_step(d->be, d->ctx, &d->graph, n, fat5__decoder_step_rec, d, &d->pos);
}

// The step's entries, tokens tok [n] and rows [n], in one copy (d->tok and d->rows are neighbours in
// the workspace: the staging holds both at their distance). A copy waits for the queued work, so
// one instead of two saves a round trip per step where the entries change.
static fat5_status fat5__decoder_upload_entries(fat5_decoder *d, const int32_t *tok, const int32_t *rows, int64_t n) {
    size_t gap = (size_t)(d->rows - d->tok) / 4;
    memcpy(d->stage, tok, (size_t)n * 4);
    memcpy(d->stage + gap, rows, (size_t)n * 4);
    return d->be->upload(d->ctx, d->tok, d->stage, gap * 4 + (size_t)n * 4);
}

// Every row's position and encoder keys (pos_d, self_off, cross_off, cross_len: neighbours in the
// workspace) from the host's copies, in one copy.
static fat5_status fat5__decoder_upload_rows(fat5_decoder *d) {
    size_t N = (size_t)d->max_rows, i, span = (size_t)(d->cross_len - d->pos_d) + N * 4;
    int32_t *pos = d->stage, *self = d->stage + (d->self_off - d->pos_d) / 4;
    int32_t *xoff = d->stage + (d->cross_off - d->pos_d) / 4, *xlen = d->stage + (d->cross_len - d->pos_d) / 4;
    memset(d->stage, 0, span);
    for (i = 0; i < N; i++) {
        pos[i] = d->pos_h[i];
        self[i] = (int32_t)(i * (size_t)d->max_len);
        xoff[i] = d->xoff_h[i];
        xlen[i] = d->xlen_h[i];
    }
    return d->be->upload(d->ctx, d->pos_d, d->stage, span);
}

// Checks the entries of a step (rows strictly increasing, live, with room in the cache; tokens in
// the vocabulary), then marks the rows left out as finished. Messages name `what`.
static fat5_status fat5__decoder_take_entries(fat5_decoder *d, const char *what, const int32_t *tokens,
                                              const int32_t *rows, int64_t n) {
    fat5_ctx *ctx = d->ctx;
    int64_t i, j = 0, r, V = d->m->cfg.vocab_size;
    if (!d->started) return fat5__err(ctx, FAT5_ERR_STATE, "%s: no request (fat5_decoder_start or fat5_decoder_join first)", what);
    if (n < 1 || n > d->n_live || !tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: %lld entries%s; expected 1 .. %lld (the live rows) and a token each", what,
                         (long long)n, tokens ? "" : " without tokens", (long long)d->n_live);
    for (i = 0; i < n; i++) {
        int32_t row = rows ? rows[i] : (int32_t)i;
        if (row < 0 || row >= d->n_rows || (i > 0 && rows && row <= rows[i - 1]))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: rows[%lld] = %d: rows must be strictly increasing and in [0, %lld)", what,
                             (long long)i, (int)row, (long long)d->n_rows);
        if (!d->live[row])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: row %d is not live (a row left out of a step has finished; fat5_decoder_join "
                             "gives it a new request)", what, (int)row);
        if (d->pos_h[row] >= d->max_len)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: the cache is full: row %d has %d positions written, max_len is %lld", what, (int)row,
                             (int)d->pos_h[row], (long long)d->max_len);
        if (tokens[i] < 0 || tokens[i] >= V)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tokens[%lld] = %d is outside [0, vocab_size %lld)", what,
                             (long long)i, (int)tokens[i], (long long)V);
    }
    // rows left out of this step finish
    for (i = 0; i < n; i++) d->host_i32[i] = rows ? rows[i] : (int32_t)i;
    for (r = 0; r < d->n_rows; r++) {
        int keep = j < n && d->host_i32[j] == r;
        if (keep) j++;
        else d->live[r] = 0;
    }
    d->n_live = n;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_decoder_step(fat5_decoder *d, const int32_t *tokens, const int32_t *rows, int64_t n,
                                       float *logits) {
    fat5_ctx *ctx;
    int64_t i, V;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    ctx = d->ctx;
    V = d->m->cfg.vocab_size;
    FAT5__TRY(fat5__decoder_take_entries(d, "fat5_decoder_step", tokens, rows, n));
    FAT5__TRY(fat5__decoder_upload_entries(d, tokens, d->host_i32, n));
    FAT5__TRY(fat5__decoder_step_dev(d, n));
    for (i = 0; i < n; i++) d->pos_h[d->host_i32[i]]++;
    if (logits) FAT5__TRY(d->be->download(ctx, logits, d->logits, (size_t)(n * V) * 4));
    return d->be->sync(ctx);
}

FAT5_API fat5_status fat5_decoder_reorder(fat5_decoder *d, const int32_t *src) {
    fat5_ctx *ctx;
    int64_t r;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    ctx = d->ctx;
    if (!d->started)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_decoder_reorder: no request (fat5_decoder_start or fat5_decoder_join "
                         "first)");
    if (!src) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_decoder_reorder: src is NULL");
    for (r = 0; r < d->n_rows; r++)
        if (d->live[r] && (src[r] < 0 || src[r] >= d->n_rows || !d->live[src[r]] || d->pos_h[src[r]] != d->pos_h[r]))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "fat5_decoder_reorder: src[%lld] = %d is not a live row at row %lld's position (%lld rows)",
                             (long long)r, (int)src[r], (long long)r, (long long)d->n_rows);
    for (r = 0; r < d->n_rows; r++) d->host_i32[r] = d->live[r] ? src[r] : (int32_t)r;
    FAT5__TRY(d->be->upload(ctx, d->tok, d->host_i32, (size_t)d->n_rows * 4));  // d->tok is free between steps
    FAT5__TRY(fat5__decoder_reorder_dev(d, d->tok));
    return d->be->sync(ctx);
}

FAT5_API int64_t fat5_decoder_position(const fat5_decoder *d) { return d ? d->pos : 0; }

FAT5_API int64_t fat5_decoder_row_position(const fat5_decoder *d, int64_t row) {
    return d && d->started && row >= 0 && row < d->n_rows && d->live[row] ? d->pos_h[row] : 0;
}

// Checks a join's rows (free, distinct, in range) and its inputs (each within a row's encoder
// slot); messages name the row or input.
static fat5_status fat5__decoder_check_join(fat5_decoder *d, const int32_t *tokens, const int32_t *cu,
                                            int64_t n_inputs, int64_t rpi, const int32_t *rows) {
    static const char *const what = "fat5_decoder_join";
    fat5_ctx *ctx = d->ctx;
    int64_t i, n;
    fat5_status st;
    if (d->max_len < 1) return fat5__err(ctx, FAT5_ERR_STATE, "%s: this decoder has no cache (max_len 0)", what);
    if (d->started == 1 && d->n_live > 0)
        return fat5__err(ctx, FAT5_ERR_STATE, "%s: %lld rows of fat5_decoder_start's request are still live", what,
                         (long long)d->n_live);
    if (d->slot < 1)
        return fat5__err(ctx, FAT5_ERR_STATE, "%s: max_enc_tokens %lld below max_rows %lld leaves no encoder slot", what,
                         (long long)d->max_te, (long long)d->max_rows);
    if (rpi < 1 || n_inputs < 1 || n_inputs > d->max_rows || rpi > d->max_rows / n_inputs || !rows)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: %lld inputs x %lld rows each%s: need at least one of each and at most %lld rows", what,
                         (long long)n_inputs, (long long)rpi, rows ? "" : " without rows", (long long)d->max_rows);
    if ((st = fat5__check_enc_input(d->m, what, tokens, cu, n_inputs, d->max_te, &d->ea.at))) return st;
    for (i = 0; i < n_inputs; i++)
        if (cu[i + 1] - cu[i] > d->slot)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: input %lld has %d tokens; a row's encoder slot holds %lld (max_enc_tokens / max_rows)",
                             what, (long long)i, (int)(cu[i + 1] - cu[i]), (long long)d->slot);
    n = n_inputs * rpi;
    memset(d->host_cu_g, 0, (size_t)d->max_rows * sizeof(int32_t));   // marks the rows seen
    for (i = 0; i < n; i++) {
        int32_t r = rows[i];
        if (r < 0 || r >= d->max_rows || (d->started == 2 && d->live[r]) || d->host_cu_g[r])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: rows[%lld] = %d is %s", what, (long long)i, (int)r,
                             r < 0 || r >= d->max_rows ? "outside the decoder's rows" : d->host_cu_g[r] ? "given twice"
                                                                                                     : "live");
        d->host_cu_g[r] = 1;
    }
    return FAT5_OK;
}

FAT5_API fat5_status fat5_decoder_join(fat5_decoder *d, const int32_t *tokens, const int32_t *cu, int64_t n_inputs,
                                       int64_t rows_per_input, const int32_t *rows) {
    int64_t i, b;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    FAT5__TRY(fat5__decoder_check_join(d, tokens, cu, n_inputs, rows_per_input, rows));
    if (d->started != 2) {   // from a fresh or finished decoder: every row free
        memset(d->live, 0, (size_t)d->max_rows);
        d->n_live = 0;
        d->n_rows = d->max_rows;
        d->started = 2;
    }
    FAT5__TRY(fat5__decoder_encode(d, tokens, cu, n_inputs));
    // each input's cross-attention keys and values go to the slot of its first row
    for (i = 0; i < n_inputs; i++) {
        int64_t len = cu[i + 1] - cu[i];
        FAT5__TRY(fat5__decoder_cross_kv(d, rows[i * rows_per_input] * d->slot, cu[i], len));
        for (b = 0; b < rows_per_input; b++) {
            int32_t r = rows[i * rows_per_input + b];
            d->xoff_h[r] = (int32_t)(rows[i * rows_per_input] * d->slot);
            d->xlen_h[r] = (int32_t)len;
            d->pos_h[r] = 0;
            d->live[r] = 1;
            d->n_live++;
        }
    }
    return fat5__decoder_upload_rows(d);   // (a copy returns when it is done, the encoder's work before it)
}

// ---- the encoder alone ----

FAT5_API fat5_status fat5_model_encode(fat5_model *m, const int32_t *tokens, const int32_t *cu, int64_t n_seq,
                                       fat5_pool pool, float *out, int64_t n) {
    fat5_ctx *ctx;
    fat5_decoder *d = NULL;
    int64_t te, D, want, s, t, j;
    float *hid = NULL;
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    D = m->cfg.d_model;
    if (pool != FAT5_POOL_NONE && pool != FAT5_POOL_MEAN)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_encode: pool = %d, expected FAT5_POOL_NONE or "
                                                    "FAT5_POOL_MEAN", (int)pool);
    if ((st = fat5__check_enc_input(m, "fat5_model_encode", tokens, cu, n_seq, INT32_MAX, &m->attn))) return st;
    te = cu[n_seq];
    want = (pool == FAT5_POOL_MEAN ? n_seq : te) * D;
    if (!out || n != want)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_encode: out holds %lld floats, the result is %lld",
                         out ? (long long)n : 0LL, (long long)want);
    if ((st = fat5_decoder_create(m, n_seq, te, 0, &d))) return st;
    hid = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)(te * D) * 4));
    if (!hid) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_encode: out of memory");
    }
    st = fat5__decoder_encode(d, tokens, cu, n_seq);
    if (!st) st = fat5__model_download_act(m, hid, d->enc_out, te * D);
    if (!st) {
        for (s = 0; s < n_seq; s++) {
            int64_t len = cu[s + 1] - cu[s];
            for (j = 0; j < D; j++) {
                double acc = 0;
                for (t = cu[s]; t < cu[s + 1]; t++) {
                    float x = hid[t * D + j];
                    if (pool == FAT5_POOL_MEAN) acc += x;
                    else out[t * D + j] = x;
                }
                if (pool == FAT5_POOL_MEAN) out[s * D + j] = (float)(acc / (double)len);
            }
        }
    }
    fat5__free(ctx, hid);
    fat5_decoder_destroy(d);
    return st;
}
#undef FAT5__TRY

