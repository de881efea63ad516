// =============================================================================================
// ==[9.5] run: the developer interface, what the benchmarks and checks of dev/ reach beyond the API ==
//
// dev/bench and dev/dist_check link the one compiled implementation (build/fat5_impl.o) like every
// other program; the library's own helpers are static there, so what they need beyond the public
// API is this small set of wrappers, declared (one comment each) in dev/fat5_internal.h. Nothing
// here is public API: the names may change with the library. It is the run layer's, and keeps the
// layer rules like every other file: the device only through the context's backend (its memory,
// ops, recording, profile), one backend branch (the kernel benchmarks need the GPU's kernels).
// Without a GPU context the GPU-only wrappers return FAT5_ERR_NO_DEVICE and the rest works on the
// CPU. Compiled only with FAT5_DEV_INTERFACE (make's build/fat5_impl.o): a user's build carries
// none of it.
#ifdef FAT5_DEV_INTERFACE

// The interface's types, as dev/fat5_internal.h has them (it skips its copy when these came first).
#ifndef FAT5__INTERNAL_TYPES
#define FAT5__INTERNAL_TYPES
typedef unsigned long long fat5_internal_addr;
typedef struct fat5_internal_attn fat5_internal_attn;
typedef struct fat5_internal_comm fat5_internal_comm;
typedef struct fat5_internal_prof_entry {
    const char *key;      // kernel name, "gemm NT MxNxK", "copy", ... (valid until the next collect)
    long long calls;
    double ms;            // summed over the collected calls
} fat5_internal_prof_entry;
#endif

// The kernel benchmarks (attention alone, a decode step's ops in CUDA graphs) time the GPU's kernels.
// backend branch: the CPU reference has no kernels to time
static int fat5__internal_on_gpu(const fat5_ctx *ctx) { return ctx && ctx->gpu; }

static fat5_status fat5__internal_no_gpu(fat5_ctx *ctx, const char *what) {
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s: needs a GPU context", what);
}

// ---- the context's device ----

FAT5_API fat5_status fat5_internal_sync(fat5_ctx *ctx) {
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    return fat5__backend_of(ctx)->sync(ctx);
}

FAT5_API fat5_status fat5_internal_mem_info(fat5_ctx *ctx, size_t *free_b, size_t *total_b) {
    *free_b = *total_b = 0;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    return fat5__backend_of(ctx)->mem_info(ctx, free_b, total_b);
}

FAT5_API int fat5_internal_act_size(const fat5_ctx *ctx) { return (int)fat5__backend_of(ctx)->act_size(ctx); }

FAT5_API double fat5_internal_batch_flops(const fat5_model_config *c, const fat5_batch *b) {
    return fat5__batch_flops(c, b);
}

// buffers on the context's backend (device memory on a GPU context, host memory on the CPU)
FAT5_API fat5_status fat5_internal_alloc(fat5_ctx *ctx, size_t bytes, fat5_internal_addr *out) {
    fat5__addr a = 0;
    fat5_status st = fat5__backend_of(ctx)->alloc(ctx, bytes, &a);
    *out = a;
    return st;
}
FAT5_API void fat5_internal_free(fat5_ctx *ctx, fat5_internal_addr p) { fat5__backend_of(ctx)->free(ctx, p); }
FAT5_API fat5_status fat5_internal_upload(fat5_ctx *ctx, fat5_internal_addr dst, const void *src, size_t bytes) {
    return fat5__backend_of(ctx)->upload(ctx, dst, src, bytes);
}
FAT5_API fat5_status fat5_internal_download(fat5_ctx *ctx, void *dst, fat5_internal_addr src, size_t bytes) {
    return fat5__backend_of(ctx)->download(ctx, dst, src, bytes);
}

// ---- the per-kernel profile ----

FAT5_API fat5_status fat5_internal_profile(fat5_ctx *ctx, int on) {
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    return fat5__backend_of(ctx)->profile(ctx, on);
}

FAT5_API fat5_status fat5_internal_profile_collect(fat5_ctx *ctx) {
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    return fat5__backend_of(ctx)->profile_collect(ctx);
}

FAT5_API int fat5_internal_profile_entry(fat5_ctx *ctx, int i, fat5_internal_prof_entry *out) {
    fat5_internal_prof_entry e = {NULL, 0, 0};
    int n;
    if (!ctx) return 0;
    n = fat5__backend_of(ctx)->profile_entry(ctx, i, &e.key, &e.calls, &e.ms);
    if (out && i >= 0 && i < n) *out = e;
    return n;
}

// ---- the attention kernels alone ----

struct fat5_internal_attn {
    fat5_ctx *ctx;
    int64_t T;
    int H, max_dk, nb, md, L, dk, kind;
    fat5__addr q, k, v, o, dout, dq, dkk, dv, lse, delta, bias, dbias, dbs, cu, seq, lut;
};

FAT5_API void fat5_internal_attn_destroy(fat5_internal_attn *a) {
    if (!a) return;
    {
        fat5__addr *bufs[16];
        int i;
        bufs[0] = &a->q, bufs[1] = &a->k, bufs[2] = &a->v, bufs[3] = &a->o, bufs[4] = &a->dout, bufs[5] = &a->dq;
        bufs[6] = &a->dkk, bufs[7] = &a->dv, bufs[8] = &a->lse, bufs[9] = &a->delta, bufs[10] = &a->bias;
        bufs[11] = &a->dbias, bufs[12] = &a->dbs, bufs[13] = &a->cu, bufs[14] = &a->seq, bufs[15] = &a->lut;
        for (i = 0; i < 16; i++) fat5__backend_of(a->ctx)->free(a->ctx, *bufs[i]);
    }
    fat5__free(a->ctx, a);
}

// n normal values times scale, as activations (bf16 or fp32) at dst
static fat5_status fat5__internal_fill(fat5_ctx *ctx, fat5__addr dst, size_t n, fat5_rng *r, double scale) {
    float *h = FAT5__CAST(float *, fat5__calloc(ctx, n, sizeof(float)));
    fat5__addr tmp = 0;
    fat5_status st;
    size_t i;
    if (!h) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_internal_attn_create: out of memory");
    for (i = 0; i < n; i++) h[i] = (float)(scale * fat5_rng_normal(r));
    st = fat5__backend_of(ctx)->alloc(ctx, n * 4, &tmp);
    if (!st) st = fat5__backend_of(ctx)->upload(ctx, tmp, h, n * 4);
    if (!st) st = fat5__backend_of(ctx)->to_act(ctx, dst, tmp, (int64_t)n);
    if (!st) st = fat5__backend_of(ctx)->sync(ctx);
    fat5__backend_of(ctx)->free(ctx, tmp);
    fat5__free(ctx, h);
    return st;
}

FAT5_API fat5_status fat5_internal_attn_create(fat5_ctx *ctx, int64_t tokens, int heads, int max_head_dim, int buckets,
                                               int max_distance, uint64_t seed, fat5_internal_attn **out) {
    fat5_internal_attn *a;
    fat5_rng r = fat5_rng_init(seed);
    size_t A, T = (size_t)tokens, I = (size_t)heads * (size_t)max_head_dim;
    float *hb;
    fat5_status st = FAT5_OK;
    int i;
    *out = NULL;
    if (!fat5__internal_on_gpu(ctx)) return fat5__internal_no_gpu(ctx, "fat5_internal_attn_create");
    if (tokens < 1 || heads < 1 || max_head_dim < 1 || buckets < 1 || max_distance < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_internal_attn_create: sizes must be positive");
    a = FAT5__CAST(fat5_internal_attn *, fat5__calloc(ctx, 1, sizeof *a));
    if (!a) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_internal_attn_create: out of memory");
    a->ctx = ctx, a->T = tokens, a->H = heads, a->max_dk = max_head_dim, a->nb = buckets, a->md = max_distance;
    A = fat5__backend_of(ctx)->act_size(ctx);
    if ((st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->q)) || (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->k)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->v)) || (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->o)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->dout)) || (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->dq)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->dkk)) || (st = fat5__backend_of(ctx)->alloc(ctx, T * I * A, &a->dv)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, T * (size_t)heads * 4, &a->lse)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, T * (size_t)heads * 4, &a->delta)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, (size_t)buckets * (size_t)heads * 4, &a->bias)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, (size_t)buckets * (size_t)heads * 4, &a->dbias)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, (size_t)FAT5__GPU_DBIAS_ROWS * (size_t)buckets * (size_t)heads * 4, &a->dbs)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, (T + 1) * 4, &a->cu)) || (st = fat5__backend_of(ctx)->alloc(ctx, T * 4, &a->seq)) ||
        (st = fat5__backend_of(ctx)->alloc(ctx, (size_t)max_distance * 4, &a->lut)) ||
        (st = fat5__internal_fill(ctx, a->q, T * I, &r, 0.3)) || (st = fat5__internal_fill(ctx, a->k, T * I, &r, 0.3)) ||
        (st = fat5__internal_fill(ctx, a->v, T * I, &r, 1.0)) || (st = fat5__internal_fill(ctx, a->dout, T * I, &r, 1.0))) {
        fat5_internal_attn_destroy(a);
        return st;
    }
    hb = FAT5__CAST(float *, fat5__calloc(ctx, (size_t)buckets * (size_t)heads, sizeof(float)));
    if (!hb) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_internal_attn_create: out of memory");
    for (i = 0; hb && i < buckets * heads; i++) hb[i] = (float)(0.5 * fat5_rng_normal(&r));
    if (!st) st = fat5__backend_of(ctx)->upload(ctx, a->bias, hb, (size_t)buckets * (size_t)heads * 4);
    fat5__free(ctx, hb);
    if (st) {
        fat5_internal_attn_destroy(a);
        return st;
    }
    *out = a;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_internal_attn_shape(fat5_internal_attn *a, int seq_len, int head_dim, int causal,
                                              int tensor_cores) {
    fat5_ctx *ctx = a->ctx;
    int64_t i, n_seq = a->T / (seq_len > 0 ? seq_len : 1);
    int32_t *h;
    fat5_status st;
    if (seq_len < 1 || a->T % seq_len || head_dim < 1 || head_dim > a->max_dk)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_internal_attn_shape: length %d or head dim %d does not fit",
                         seq_len, head_dim);
    h = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)a->T + 1, sizeof(int32_t)));
    if (!h) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_internal_attn_shape: out of memory");
    a->L = seq_len, a->dk = head_dim, a->kind = causal ? FAT5__ATTN_CAUSAL : FAT5__ATTN_BIDIR;
    for (i = 0; i <= n_seq; i++) h[i] = (int32_t)(i * seq_len);
    st = fat5__backend_of(ctx)->upload(ctx, a->cu, h, (size_t)(n_seq + 1) * 4);
    for (i = 0; i < a->T; i++) h[i] = (int32_t)(i / seq_len);
    if (!st) st = fat5__backend_of(ctx)->upload(ctx, a->seq, h, (size_t)a->T * 4);
    for (i = 0; i < a->md; i++) h[i] = fat5__rel_bucket(-i, !causal, a->nb, a->md);
    if (!st) st = fat5__backend_of(ctx)->upload(ctx, a->lut, h, (size_t)a->md * 4);
    fat5__free(ctx, h);
    fat5__backend_of(ctx)->set_attn_tc(ctx, tensor_cores);
    return st;
}

FAT5_API fat5_status fat5_internal_attn_run(fat5_internal_attn *a, int pass) {
    fat5_ctx *ctx = a->ctx;
    int H = a->H, dk = a->dk, kind = a->kind, nb = a->nb, md = a->md;
    int64_t T = a->T;
    fat5_status st;
    if (!a->L) return fat5__err(ctx, FAT5_ERR_STATE, "fat5_internal_attn_run: no shape (fat5_internal_attn_shape)");
    switch (pass) {
    case 0:   // FAT5_INTERNAL_ATTN_FWD
        return fat5__backend_of(ctx)->attn_fwd(ctx, a->o, a->lse, a->q, a->k, a->v, a->bias, a->lut, a->cu, a->cu, a->seq, T, H, dk,
                                  kind, nb, md, 0, 0, fat5__drop_none());
    case 1:   // FAT5_INTERNAL_ATTN_BWD: delta, dq with the bias-table gradient, dk / dv
        if ((st = fat5__backend_of(ctx)->attn_bwd_delta(ctx, a->delta, a->o, a->dout, T, H, dk))) return st;
        if ((st = fat5__backend_of(ctx)->attn_bwd_dq(ctx, a->dq, a->dbias, a->dout, a->lse, a->delta, a->q, a->k, a->v, a->bias,
                                        a->lut, a->cu, a->cu, a->seq, T, H, dk, kind, nb, md, 0, 0, a->dbs,
                                        fat5__drop_none())))
            return st;
        return fat5__backend_of(ctx)->attn_bwd_dkv(ctx, a->dkk, a->dv, a->dout, a->lse, a->delta, a->q, a->k, a->v, a->bias, a->lut,
                                      a->cu, a->cu, a->seq, T, H, dk, kind, nb, md, 0, 0, fat5__drop_none());
    case 2:   // FAT5_INTERNAL_ATTN_DQ
    case 3:   // FAT5_INTERNAL_ATTN_DQ_NO_DBIAS
        return fat5__backend_of(ctx)->attn_bwd_dq(ctx, a->dq, pass == 2 ? a->dbias : 0, a->dout, a->lse, a->delta, a->q, a->k, a->v,
                                     a->bias, a->lut, a->cu, a->cu, a->seq, T, H, dk, kind, nb, md, 0, 0, a->dbs,
                                     fat5__drop_none());
    case 4:   // FAT5_INTERNAL_ATTN_DKV
        return fat5__backend_of(ctx)->attn_bwd_dkv(ctx, a->dkk, a->dv, a->dout, a->lse, a->delta, a->q, a->k, a->v, a->bias, a->lut,
                                      a->cu, a->cu, a->seq, T, H, dk, kind, nb, md, 0, 0, fat5__drop_none());
    default: return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_internal_attn_run: unknown pass %d", pass);
    }
}

// ---- the decoder: its encoder pass, and the ops of one step timed in CUDA graphs ----

FAT5_API fat5_status fat5_internal_decoder_encode(fat5_decoder *d, const int32_t *tokens, const int32_t *cu_seqlens,
                                                  int64_t n_seq) {
    if (!d) return FAT5_ERR_INVALID_ARG;
    return fat5__decoder_encode(d, tokens, cu_seqlens, n_seq);
}

// One op of a decode step (layer 0 of the decoder, for entries 0 .. n-1); op as the
// FAT5_INTERNAL_DEC_* of dev/fat5_internal.h
static fat5_status fat5__internal_decode_op(fat5_ctx *ctx, fat5_decoder *d, int op, int64_t n) {
    fat5_model *m = d->m;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__layer *y = &m->dec[0];
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size;
    int H = (int)c->num_heads, dk = (int)c->d_kv;
    fat5__pos_args p = fat5__model_pos(m, y, FAT5__ATTN_CAUSAL, NULL);
    float eps = (float)c->layer_norm_eps;
    switch (op) {
    case 0: return be->embed_fwd(ctx, d->h, fat5__pw(m, m->shared), d->tok, n, (int)D);
    case 1:
        return be->norm_mm(ctx, d->q, d->kc[0], d->vc[0], d->h, fat5__pw(m, y->ln_sa), fat5__pa(m, y->q),
                           fat5__pa(m, y->k), fat5__pa(m, y->v), n, (int)I, (int)D, eps, -1, d->rows, d->self_off,
                           d->pos_d);
    case 2:
        return be->attn_decode(ctx, d->att, d->q, d->kc[0], d->vc[0], p.bias, d->lut_causal, d->rows, d->self_off, 0,
                               d->pos_d, n, H, dk, p.kind, p.nb, p.md, (int)d->max_len, d->attn_scratch);
    case 3: return be->mm(ctx, FAT5__MM_NT, d->h, 1, d->att, fat5__pa(m, y->o), n, D, I, 1.0f, 1.0f);
    case 4:
        return be->norm_mm(ctx, d->q, 0, 0, d->h, fat5__pw(m, y->ln_ca), fat5__pa(m, y->cq), 0, 0, n, (int)I, (int)D,
                           eps, -1, 0, 0, 0);
    case 5:
        return be->attn_decode(ctx, d->att, d->q, d->ck[0], d->cv[0], 0, d->lut_causal, d->rows, d->cross_off,
                               d->cross_len, d->pos_d, n, H, dk, FAT5__ATTN_CROSS, 0, 0, (int)d->max_te, d->attn_scratch);
    case 6:
        return be->norm_mm(ctx, d->ff_h, 0, 0, d->h, fat5__pw(m, y->ln_ff), fat5__pa(m, y->wi0), fat5__pa(m, y->wi1),
                           0, n, (int)F, (int)D, eps, (int)c->act, 0, 0, 0);
    case 7: return be->mm(ctx, FAT5__MM_NT, d->h, 1, d->ff_h, fat5__pa(m, y->wo), n, D, F, 1.0f, 1.0f);
    case 8: return be->rmsnorm_fwd(ctx, d->out_act, d->r, d->h, fat5__pw(m, m->dec_final_ln), n, (int)D, eps, 0);
    case 9:
        return be->mm(ctx, FAT5__MM_NT, d->logits, 1, d->out_act, fat5__pa(m, m->lm_head), n, V, D, 1.0f, 0.0f);
    case 10: return fat5__decoder_step_dev(d, n);
    default: return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_internal_decode_time: unknown op %d", op);
    }
}

FAT5_API fat5_status fat5_internal_decode_time(fat5_decoder *d, int op, int64_t n, int read, double *us) {
    fat5_ctx *ctx;
    void *exec = NULL;
    int32_t *h32, pos, flag = 0;
    int64_t i;
    int step = op == 10, reps = step ? 1 : 20, runs = step ? 32 : 10;
    double t0;
    fat5_status st = FAT5_OK;
    *us = 0;
    if (!d) return FAT5_ERR_INVALID_ARG;
    ctx = d->ctx;
    if (!fat5__internal_on_gpu(ctx)) return fat5__internal_no_gpu(ctx, "fat5_internal_decode_time");
    if (!d->started || n < 1 || n > d->max_rows || d->max_len < 65)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_internal_decode_time: a started decoder of %lld rows or more and "
                         "65 positions or more is needed", (long long)n);
    // the step's entries are rows 0 .. n-1 fed tokens 0 .. n-1 (in the vocabulary), at cache
    // position 64 (40 for the whole step: it advances)
    h32 = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n, sizeof(int32_t)));
    if (!h32) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_internal_decode_time: out of memory");
    for (i = 0; i < n; i++) h32[i] = (int32_t)i;
    pos = step ? 40 : 64;
    st = fat5__backend_of(ctx)->upload(ctx, d->rows, h32, (size_t)n * 4);
    if (!st) st = fat5__backend_of(ctx)->upload(ctx, d->tok, h32, (size_t)n * 4);
    for (i = 0; i < n; i++) h32[i] = pos;   // every row of the step at that position
    if (!st) st = fat5__backend_of(ctx)->upload(ctx, d->pos_d, h32, (size_t)n * 4);
    fat5__free(ctx, h32);
    if (!st) st = fat5__backend_of(ctx)->sync(ctx);
    if (!st) st = fat5__backend_of(ctx)->capture_begin(ctx);
    if (st) return st;
    for (i = 0; i < reps && !st; i++) st = fat5__internal_decode_op(ctx, d, op, n);
    if (st) {
        fat5__backend_of(ctx)->capture_end(ctx, 0, &exec);
        return st;
    }
    if ((st = fat5__backend_of(ctx)->capture_end(ctx, 1, &exec)) || (st = fat5__backend_of(ctx)->graph_launch(ctx, exec)) ||
        (st = fat5__backend_of(ctx)->sync(ctx))) {
        fat5__backend_of(ctx)->graph_destroy(ctx, exec);
        return st;
    }
    t0 = fat5__now_s();
    for (i = 0; i < runs && !st; i++) {
        st = fat5__backend_of(ctx)->graph_launch(ctx, exec);
        if (read && !st) st = fat5__backend_of(ctx)->download(ctx, &flag, d->pos_d, 4);
        if (read && !st) st = fat5__backend_of(ctx)->sync(ctx);
    }
    if (!st) st = fat5__backend_of(ctx)->sync(ctx);
    *us = (fat5__now_s() - t0) * 1e6 / ((double)runs * reps);
    fat5__backend_of(ctx)->graph_destroy(ctx, exec);
    return st;
}

// ---- the sums across ranks of data parallel training ----
// A fat5_internal_comm is the library's communicator itself (fat5__comm), under another name.

#define FAT5__ICOMM(c) FAT5__CAST(fat5__comm *, FAT5__CAST(void *, c))

FAT5_API fat5_status fat5_internal_comm_open(fat5_ctx *ctx, int rank, int world, const char *rendezvous,
                                             double timeout_s, double bucket_mb, fat5_internal_comm **out) {
    fat5__comm *c = NULL;
    fat5_status st;
    *out = NULL;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    st = fat5__comm_open(ctx, fat5__backend_of(ctx), rank, world, rendezvous, timeout_s, bucket_mb, fat5__run_held_exit, &c);
    if (!st) *out = FAT5__CAST(fat5_internal_comm *, FAT5__CAST(void *, c));
    return st;
}

FAT5_API void fat5_internal_comm_close(fat5_internal_comm *c) {
    if (c) fat5__comm_close(FAT5__ICOMM(c));
}

FAT5_API size_t fat5_internal_comm_chunk_bytes(void) { return FAT5__DIST_SLOT; }

FAT5_API void fat5_internal_comm_fail(fat5_internal_comm *c, int rank, const char *msg) {
    fat5__board_fail(FAT5__ICOMM(c)->board, rank, msg);
}

FAT5_API fat5_status fat5_internal_comm_sum(fat5_internal_comm *c, fat5_internal_addr p, size_t n, int f64) {
    return fat5__comm_sum(FAT5__ICOMM(c), p, n, f64);
}

FAT5_API fat5_status fat5_internal_comm_wait(fat5_internal_comm *c) { return fat5__comm_wait(FAT5__ICOMM(c)); }

FAT5_API fat5_status fat5_internal_comm_reduce_scatter(fat5_internal_comm *c, fat5_internal_addr send,
                                                       fat5_internal_addr recv, size_t n) {
    return fat5__comm_reduce_scatter(FAT5__ICOMM(c), send, recv, n);
}

FAT5_API fat5_status fat5_internal_comm_all_gather(fat5_internal_comm *c, fat5_internal_addr send,
                                                   fat5_internal_addr recv, size_t n) {
    return fat5__comm_all_gather(FAT5__ICOMM(c), send, recv, n);
}

FAT5_API void fat5_internal_comm_grads_begin(fat5_internal_comm *c, fat5_internal_addr grads, size_t n) {
    fat5__comm_grads_begin(FAT5__ICOMM(c), grads, n);
}

FAT5_API fat5_status fat5_internal_comm_grads_ready(fat5_internal_comm *c, size_t lo) {
    return fat5__comm_grads_ready(FAT5__ICOMM(c), lo);
}

FAT5_API fat5_status fat5_internal_comm_grads_end(fat5_internal_comm *c, fat5_internal_addr extra, size_t n_extra) {
    return fat5__comm_grads_end(FAT5__ICOMM(c), extra, n_extra);
}

FAT5_API fat5_status fat5_internal_comm_grads_landed(fat5_internal_comm *c) {
    return fat5__comm_grads_landed(FAT5__ICOMM(c));
}

FAT5_API int fat5_internal_comm_clock(const fat5_internal_comm *c, int *watchdog) {
    return fat5__comm_clock(FAT5__CAST(const fat5__comm *, FAT5__CAST(const void *, c)), watchdog);
}

#endif  // FAT5_DEV_INTERFACE
