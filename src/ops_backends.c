// =============================================================================================
// ==[3.4] ops: the op table and the two backends ==
// X(name, parameters): fat5__cpu_<name> and
// fat5__gpu_<name> both take exactly these parameters (the initialisers of the backend tables
// below make the compiler check it), and kernel fat5_<name> in kernels/ is the GPU side of every
// op but mm (cuBLAS). The model calls ops only as m->be-><name>(...).
#define FAT5__OPS(X)                                                                                           \
    X(fill_f32, (fat5_ctx * ctx, fat5__addr x, float v, int64_t n))                                            \
    X(scale_f32, (fat5_ctx * ctx, fat5__addr x, float s, int64_t n))                                           \
    X(f32_to_bf16, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, int64_t n))                                \
    X(to_act, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, int64_t n))                                     \
    X(colsum_f32, (fat5_ctx * ctx, fat5__addr out, fat5__addr in, int rows, int D))                            \
    X(mm, (fat5_ctx * ctx, fat5__mm_layout layout, fat5__addr C, int c_f32, fat5__addr A, fat5__addr B,        \
           int64_t M, int64_t N, int64_t K, float alpha, float beta))                                          \
    X(mm_batched, (fat5_ctx * ctx, fat5__mm_layout layout, fat5__addr C, int c_f32, fat5__addr A, fat5__addr B, \
                   int64_t M, int64_t N, int64_t K, float alpha, float beta, int batch, int64_t sA, int64_t sB, \
                   int64_t sC))                                                                                \
    X(embed_fwd, (fat5_ctx * ctx, fat5__addr out, fat5__addr table, fat5__addr tok, int64_t T, int D))         \
    X(embed_bwd, (fat5_ctx * ctx, fat5__addr dtable, fat5__addr dout, fat5__addr tok, int64_t T, int D))       \
    X(rmsnorm_fwd, (fat5_ctx * ctx, fat5__addr y, fat5__addr r, fat5__addr x, fat5__addr w, int64_t T, int D,  \
                    float eps, fat5__addr xs))                                                                 \
    X(rmsnorm_bwd, (fat5_ctx * ctx, fat5__addr dx, fat5__addr dw, fat5__addr dy, fat5__addr x, fat5__addr w,   \
                    fat5__addr r, int64_t T, int D, int accumulate, fat5__addr scratch, fat5__addr dxa))       \
    X(act_fwd, (fat5_ctx * ctx, fat5__addr h, fat5__addr a, fat5__addr b, int64_t n, int act))                 \
    X(act_bwd, (fat5_ctx * ctx, fat5__addr da, fat5__addr db, fat5__addr dh, fat5__addr a, fat5__addr b,       \
                int64_t n, int act))                                                                           \
    X(attn_fwd, (fat5_ctx * ctx, fat5__addr o, fat5__addr lse, fat5__addr q, fat5__addr k, fat5__addr v,       \
                 fat5__addr bias, fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr q_seq,          \
                 int64_t Tq, int H, int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g))       \
    X(attn_bwd_delta, (fat5_ctx * ctx, fat5__addr delta, fat5__addr o, fat5__addr dout, int64_t Tq, int H,     \
                       int dk))                                                                                \
    X(attn_bwd_dq, (fat5_ctx * ctx, fat5__addr dq, fat5__addr dbias, fat5__addr dout, fat5__addr lse,          \
                    fat5__addr delta, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,               \
                    fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr q_seq, int64_t Tq, int H,     \
                    int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g, fat5__addr scratch))   \
    X(attn_bwd_dkv, (fat5_ctx * ctx, fat5__addr dk_out, fat5__addr dv, fat5__addr dout, fat5__addr lse,       \
                     fat5__addr delta, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,              \
                     fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr k_seq, int64_t Tk, int H,    \
                     int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g))                      \
    X(fire_reduce, (fat5_ctx * ctx, fat5__addr g, fat5__addr shares, int H, int W))                          \
    X(block_sum, (fat5_ctx * ctx, fat5__addr out, fat5__addr x, fat5__addr cu, fat5__addr cu_g,                \
                  fat5__addr seq, int64_t G, int D, int g))                                                    \
    X(block_sum_bwd, (fat5_ctx * ctx, fat5__addr dx, fat5__addr dout, fat5__addr cu, fat5__addr cu_g,          \
                      fat5__addr seq, int64_t T, int D, int g))                                                \
    X(rope, (fat5_ctx * ctx, fat5__addr x, fat5__addr cu, fat5__addr seq, fat5__addr pos, int64_t T, int H,    \
             int dk, int rd, float base, float xpos, int flags))                                               \
    X(attn_decode, (fat5_ctx * ctx, fat5__addr o, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,  \
                    fat5__addr lut, fat5__addr rows, fat5__addr kv_off, fat5__addr kv_len, fat5__addr pos,     \
                    int64_t n, int H, int dk, int kind, int nb, int max_distance, int max_keys,                \
                    fat5__addr scratch))                                                                       \
    X(cache_write, (fat5_ctx * ctx, fat5__addr kc, fat5__addr vc, fat5__addr k, fat5__addr v, fat5__addr rows, \
                    fat5__addr kv_off, fat5__addr pos, int64_t n, int I))                                      \
    X(norm_mm, (fat5_ctx * ctx, fat5__addr y0, fat5__addr y1, fat5__addr y2, fat5__addr x, fat5__addr g,       \
                fat5__addr w0, fat5__addr w1, fat5__addr w2, int64_t T, int N, int K, float eps, int act,      \
                fat5__addr rows, fat5__addr kv_off, fat5__addr pos))                                           \
    X(cache_gather, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, fat5__addr idx, fat5__addr kv_off,        \
                     fat5__addr pos, int64_t n, int I))                                                        \
    X(add_i32, (fat5_ctx * ctx, fat5__addr x, int v, int64_t n))                                               \
    X(xent_fwd, (fat5_ctx * ctx, fat5__addr lse, fat5__addr row_ce, fat5__addr row_z, fat5__addr logits,      \
                 fat5__addr labels, int64_t T, int V, float z, float smooth))                                  \
    X(xent_bwd, (fat5_ctx * ctx, fat5__addr dlogits, fat5__addr logits, fat5__addr lse, fat5__addr labels,     \
                 int64_t T, int V, float z, float smooth, float scale))                                        \
    X(loss_total, (fat5_ctx * ctx, fat5__addr out, fat5__addr row_ce, fat5__addr row_z, int64_t T, int64_t n)) \
    X(sumsq_seg, (fat5_ctx * ctx, fat5__addr out, fat5__addr x, fat5__addr segs, fat5__addr chunk_off,         \
                  int n_seg, int64_t n_chunks, int chunk, fat5__addr scratch))                                 \
    X(adamw_seg, (fat5_ctx * ctx, fat5__addr w, fat5__addr g, fat5__addr m1, fat5__addr m2, fat5__addr segs,   \
                  fat5__addr chunk_off, int n_seg, int64_t n_chunks, int chunk, fat5__addr coef,              \
                  fat5__addr stats, float beta1, float beta2, float eps, fat5__addr wa))                      \
    X(optim_coef, (fat5_ctx * ctx, fat5__addr coef, fat5__addr stats, fat5__addr ss_g, fat5__addr ss_w,         \
                   fat5__addr segs, fat5__addr decayed, int n_seg, double lr_bc, float decay, double clip,    \
                   fat5__addr gate, int n_gate))                                                              \
    X(gen_process, (fat5_ctx * ctx, fat5__addr x, fat5__addr hist, fat5__addr lens, fat5__addr rows, int64_t n, \
                    int V, int Lh, float rep, int ngram, int min_new, int eos, int log_softmax))               \
    X(gen_select, (fat5_ctx * ctx, fat5__addr x, fat5__addr tok, fat5__addr hist, fat5__addr lens,             \
                   fat5__addr done, fat5__addr score, fat5__addr rows, int64_t n, int V, int Lh, int max_new,  \
                   int eos, int pad, int do_sample, float temperature, int top_k, float top_p,                 \
                   unsigned long long seed))                                                                   \
    X(gen_beam, (fat5_ctx * ctx, fat5__addr x, fat5__addr tok, fat5__addr src, fat5__addr hist,                \
                 fat5__addr lens, fat5__addr bscore, fat5__addr fin_score, fat5__addr fin_tok,                 \
                 fat5__addr fin_len, fat5__addr fin_flag, fat5__addr unsat, fat5__addr done, fat5__addr rows,  \
                 fat5__addr scratch, int64_t n, int V, int Lh, int K, int max_new, int eos,                    \
                 float length_penalty, int early_stopping))

// the op names in table order (messages and tests name ops by them)
static const char *const fat5__op_names[] = {
#define FAT5__OP_NAME(name, params) #name,
    FAT5__OPS(FAT5__OP_NAME)
#undef FAT5__OP_NAME
};

// A backend: its memory (host or device), its activation element size, and one function per op.
typedef struct fat5__backend {
    const char *name;                                                       // "cpu" or "gpu"
    size_t (*act_size)(const fat5_ctx *ctx);                                // 4, or 2 for bf16
    fat5_status (*alloc)(fat5_ctx *ctx, size_t bytes, fat5__addr *out);    // zero-filled
    void (*free)(fat5_ctx *ctx, fat5__addr p);
    fat5_status (*upload)(fat5_ctx *ctx, fat5__addr dst, const void *src, size_t bytes);
    fat5_status (*download)(fat5_ctx *ctx, void *dst, fat5__addr src, size_t bytes);
    fat5_status (*copy)(fat5_ctx *ctx, fat5__addr dst, fat5__addr src, size_t bytes);
    fat5_status (*memset0)(fat5_ctx *ctx, fat5__addr p, size_t bytes);
    fat5_status (*sync)(fat5_ctx *ctx);                                    // waits for queued work
    const char *const *op_names;                                            // fat5__op_names
#define FAT5__OP_FIELD(name, params) fat5_status(*name) params;
    FAT5__OPS(FAT5__OP_FIELD)
#undef FAT5__OP_FIELD
} fat5__backend;

#define FAT5__OP_COUNT ((int)(sizeof fat5__op_names / sizeof fat5__op_names[0]))

static const fat5__backend fat5__cpu_backend = {
    "cpu", fat5__host_act_size, fat5__host_alloc, fat5__host_free, fat5__host_upload, fat5__host_download,
    fat5__host_copy, fat5__host_memset0, fat5__host_sync, fat5__op_names,
#define FAT5__OP_CPU(name, params) fat5__cpu_##name,
    FAT5__OPS(FAT5__OP_CPU)
#undef FAT5__OP_CPU
};

#ifndef FAT5_NO_CUDA
static const fat5__backend fat5__gpu_backend = {
    "gpu", fat5__dev_act_size, fat5__dev_alloc, fat5__dev_free, fat5__dev_upload, fat5__dev_download,
    fat5__dev_copy, fat5__dev_memset0, fat5__dev_sync, fat5__op_names,
#define FAT5__OP_GPU(name, params) fat5__gpu_##name,
    FAT5__OPS(FAT5__OP_GPU)
#undef FAT5__OP_GPU
};
#endif

// the backend a context computes on
static const fat5__backend *fat5__backend_of(const fat5_ctx *ctx) {
#ifndef FAT5_NO_CUDA
    if (ctx->gpu) return &fat5__gpu_backend;
#endif
    (void)ctx;
    return &fat5__cpu_backend;
}

