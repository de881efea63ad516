// =============================================================================================
// ==[3.5] ops: the op table and the two backends ==
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
    X(act_fwd, (fat5_ctx * ctx, fat5__addr h, fat5__addr a, fat5__addr b, int64_t n, int act, fat5__drop drop)) \
    X(act_bwd, (fat5_ctx * ctx, fat5__addr da, fat5__addr db, fat5__addr dh, fat5__addr a, fat5__addr b,       \
                int64_t n, int act, fat5__drop drop))                                                          \
    X(dropout, (fat5_ctx * ctx, fat5__addr y, fat5__addr x, int64_t n, int mode, fat5__drop drop))            \
    X(drop_draws, (fat5_ctx * ctx, fat5__addr out, fat5__addr stream, fat5__addr index, int64_t n,             \
                   unsigned long long seed))                                                                   \
    X(attn_fwd, (fat5_ctx * ctx, fat5__addr o, fat5__addr lse, fat5__addr q, fat5__addr k, fat5__addr v,       \
                 fat5__addr bias, fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr q_seq,          \
                 int64_t Tq, int H, int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g,        \
                 fat5__drop drop))                                                                             \
    X(attn_bwd_delta, (fat5_ctx * ctx, fat5__addr delta, fat5__addr o, fat5__addr dout, int64_t Tq, int H,     \
                       int dk))                                                                                \
    X(attn_bwd_dq, (fat5_ctx * ctx, fat5__addr dq, fat5__addr dbias, fat5__addr dout, fat5__addr lse,          \
                    fat5__addr delta, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,               \
                    fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr q_seq, int64_t Tq, int H,     \
                    int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g, fat5__addr scratch,    \
                    fat5__drop drop))                                                                          \
    X(attn_bwd_dkv, (fat5_ctx * ctx, fat5__addr dk_out, fat5__addr dv, fat5__addr dout, fat5__addr lse,       \
                     fat5__addr delta, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,              \
                     fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr k_seq, int64_t Tk, int H,    \
                     int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g, fat5__drop drop))     \
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
    X(cache_gather, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, fat5__addr idx, fat5__addr rows,          \
                     fat5__addr kv_off, fat5__addr pos, int64_t n, int I))                                     \
    X(add_i32, (fat5_ctx * ctx, fat5__addr x, fat5__addr idx, int v, int64_t n))                               \
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
    X(adafactor_seg, (fat5_ctx * ctx, fat5__addr w, fat5__addr g, fat5__addr m1, fat5__addr v, fat5__addr tab, \
                      int n_seg, int64_t n_rows, int64_t n_cols, fat5__addr coef, fat5__addr stats,            \
                      fat5__addr decayed, float beta2t, float omb2t, float eps1, float clip, float beta1,      \
                      float wd, fat5__addr scratch, fat5__addr wa))                                            \
    X(gen_process, (fat5_ctx * ctx, fat5__addr x, fat5__addr hist, fat5__addr lens, fat5__addr rows, int64_t n, \
                    int V, int Lh, const fat5__gen_opts *o))                                                 \
    X(gen_select, (fat5_ctx * ctx, fat5__addr x, fat5__addr tok, fat5__addr hist, fat5__addr lens,             \
                   fat5__addr done, fat5__addr score, fat5__addr rows, int64_t n, int V, int Lh,               \
                   const fat5__gen_opts *o))                                                                   \
    X(gen_beam, (fat5_ctx * ctx, fat5__addr x, fat5__addr tok, fat5__addr src, fat5__addr hist,                \
                 fat5__addr lens, fat5__addr bscore, fat5__addr fin_score, fat5__addr fin_tok,                 \
                 fat5__addr fin_len, fat5__addr fin_flag, fat5__addr unsat, fat5__addr done, fat5__addr rows,  \
                 fat5__addr scratch, int64_t n, int V, int Lh, const fat5__gen_opts *o))

// the op names in table order (messages and tests name ops by them)
static const char *const fat5__op_names[] = {
#define FAT5__OP_NAME(name, params) #name,
    FAT5__OPS(FAT5__OP_NAME)
#undef FAT5__OP_NAME
};

// The collectives' transports; the communicator and the collectives are section [3.6]'s.
enum { FAT5__DIST_HOST = 1, FAT5__DIST_NCCL = 2 };
struct fat5__comm;

// A backend: its memory (host or device), its activation element size, what the layers above
// need to know of it (so that none of them asks which backend it is), CUDA-graph-style recording
// of queued work, and one function per op.
typedef struct fat5__backend {
    const char *name;                                                       // "cpu" or "gpu"
    int host_memory;   // its buffers are host pointers (fat5__HOST): a model's master weights are
                       // its host weights, and the CPU ops take scratch from the context's arena
    int queued;        // ops are queued and run while the host goes on: the host may prepare the
                       // next batch meanwhile (the trainer's prefetch)
    int dbias_partials;  // attn_bwd_dq writes per-block partial sums of the bias gradient into its
                         // scratch (the model reserves them), else adds into the table directly
    size_t (*act_size)(const fat5_ctx *ctx);                                // 4, or 2 for bf16
    fat5_status (*alloc)(fat5_ctx *ctx, size_t bytes, fat5__addr *out);    // zero-filled
    void (*free)(fat5_ctx *ctx, fat5__addr p);
    fat5_status (*upload)(fat5_ctx *ctx, fat5__addr dst, const void *src, size_t bytes);
    fat5_status (*download)(fat5_ctx *ctx, void *dst, fat5__addr src, size_t bytes);
    fat5_status (*copy)(fat5_ctx *ctx, fat5__addr dst, fat5__addr src, size_t bytes);
    fat5_status (*memset0)(fat5_ctx *ctx, fat5__addr p, size_t bytes);
    fat5_status (*sync)(fat5_ctx *ctx);                                    // waits for queued work
    // Products of at most this many rows may run the fused row kernels (norm_mm; the context's
    // mm_rows switch on the GPU), 0: never.
    int64_t (*fused_rows)(const fat5_ctx *ctx);
    // The dense bf16 peak the MFU of a run is measured against, flop/s; 0: not measured.
    double (*peak_flops)(const fat5_ctx *ctx);
    // The memory the backend allocates from: free and total bytes (the device's; the host's
    // physical memory on the CPU).
    fat5_status (*mem_info)(fat5_ctx *ctx, size_t *free_b, size_t *total_b);
    // The per-kernel profile (dev/bench step): on or off, the calls since collected, entry i of it
    // (its key, calls, milliseconds; returns the count). FAT5_ERR_UNSUPPORTED / 0 where none.
    fat5_status (*profile)(fat5_ctx *ctx, int on);
    fat5_status (*profile_collect)(fat5_ctx *ctx);
    int (*profile_entry)(fat5_ctx *ctx, int i, const char **key, long long *calls, double *ms);
    // Which bf16 attention kernels run (the tensor cores' or the exact FMA ones), for a benchmark
    // that compares them on one context; the CPU has one.
    void (*set_attn_tc)(fat5_ctx *ctx, int on);
    // Recording: the work queued between capture_begin and capture_end is recorded into *exec
    // instead of run (keep 0 discards it), graph_launch runs it again, graph_destroy frees it
    // (NULL: nothing). A backend that cannot record answers FAT5_ERR_UNSUPPORTED at capture_begin
    // (the CPU's without a message; the GPU's with sync_launches says so), and the caller runs the
    // work plainly.
    fat5_status (*capture_begin)(fat5_ctx *ctx);
    fat5_status (*capture_end)(fat5_ctx *ctx, int keep, void **exec);
    fat5_status (*graph_launch)(fat5_ctx *ctx, void *exec);
    void (*graph_destroy)(fat5_ctx *ctx, void *exec);
    // Collectives across the ranks of data parallel training, on the communicator c (section
    // [3.6]) over the backend's transport: the CPU's shared memory, the GPU's NCCL. All fp32 but
    // sum's fp64 (f64 1). comm_sum: in place over n elements at p; comm_reduce_scatter: send
    // [world * n], recv [n] = the sum over the ranks of their send's chunk [rank n, (rank + 1) n);
    // comm_all_gather: send [n], recv [world * n] = every rank's send in rank order. The GPU's are
    // queued on the collectives' stream after the work queued so far (fat5__comm_wait waits for
    // them); the CPU's are done when they return. Every rank calls them in the same order.
    int comm_transport;   // FAT5__DIST_HOST or FAT5__DIST_NCCL
    fat5_status (*comm_sum)(struct fat5__comm *c, fat5__addr p, size_t n, int f64);
    fat5_status (*comm_reduce_scatter)(struct fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n);
    fat5_status (*comm_all_gather)(struct fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n);
    const char *const *op_names;                                            // fat5__op_names
#define FAT5__OP_FIELD(name, params) fat5_status(*name) params;
    FAT5__OPS(FAT5__OP_FIELD)
#undef FAT5__OP_FIELD
} fat5__backend;

// The CPU backend's answers: every product may run fused, no peak, no recording.
static int64_t fat5__host_fused_rows(const fat5_ctx *ctx) {
    (void)ctx;
    return INT64_MAX;
}
static double fat5__host_peak_flops(const fat5_ctx *ctx) {
    (void)ctx;
    return 0;
}
static fat5_status fat5__host_mem_info(fat5_ctx *ctx, size_t *free_b, size_t *total_b) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
#else
    long pages = 0, avail = 0, size = 0;
#endif
    *free_b = *total_b = 0;
    if (pages <= 0 || avail < 0 || size <= 0)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "mem_info: the host's memory size is not known here");
    *total_b = (size_t)pages * (size_t)size;
    *free_b = (size_t)avail * (size_t)size;
    return FAT5_OK;
}
static fat5_status fat5__host_profile(fat5_ctx *ctx, int on) {
    (void)on;
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "the per-kernel profile needs the GPU backend");
}
static fat5_status fat5__host_profile_collect(fat5_ctx *ctx) { return fat5__host_profile(ctx, 0); }
static int fat5__host_profile_entry(fat5_ctx *ctx, int i, const char **key, long long *calls, double *ms) {
    (void)ctx, (void)i, (void)key, (void)calls, (void)ms;
    return 0;
}
static void fat5__host_set_attn_tc(fat5_ctx *ctx, int on) { (void)ctx, (void)on; }
static fat5_status fat5__host_capture_begin(fat5_ctx *ctx) {
    (void)ctx;
    return FAT5_ERR_UNSUPPORTED;
}
static fat5_status fat5__host_capture_end(fat5_ctx *ctx, int keep, void **exec) {
    (void)keep;
    *exec = NULL;
    return fat5__err(ctx, FAT5_ERR_STATE, "capture_end: the CPU backend records nothing");
}
static fat5_status fat5__host_graph_launch(fat5_ctx *ctx, void *exec) {
    (void)exec;
    return fat5__err(ctx, FAT5_ERR_STATE, "graph_launch: the CPU backend records nothing");
}
static void fat5__host_graph_destroy(fat5_ctx *ctx, void *exec) {
    (void)ctx;
    (void)exec;
}

#define FAT5__OP_COUNT ((int)(sizeof fat5__op_names / sizeof fat5__op_names[0]))

// the collectives of each backend (section [3.6])
static fat5_status fat5__host_comm_sum(struct fat5__comm *c, fat5__addr p, size_t n, int f64);
static fat5_status fat5__host_comm_reduce_scatter(struct fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n);
static fat5_status fat5__host_comm_all_gather(struct fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n);
#ifndef FAT5_NO_CUDA
static fat5_status fat5__nccl_comm_sum(struct fat5__comm *c, fat5__addr p, size_t n, int f64);
static fat5_status fat5__nccl_comm_reduce_scatter(struct fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n);
static fat5_status fat5__nccl_comm_all_gather(struct fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n);
#endif

static const fat5__backend fat5__cpu_backend = {
    "cpu", 1, 0, 0, fat5__host_act_size, fat5__host_alloc, fat5__host_free, fat5__host_upload,
    fat5__host_download, fat5__host_copy, fat5__host_memset0, fat5__host_sync, fat5__host_fused_rows,
    fat5__host_peak_flops, fat5__host_mem_info, fat5__host_profile, fat5__host_profile_collect,
    fat5__host_profile_entry, fat5__host_set_attn_tc, fat5__host_capture_begin, fat5__host_capture_end, fat5__host_graph_launch,
    fat5__host_graph_destroy, FAT5__DIST_HOST, fat5__host_comm_sum, fat5__host_comm_reduce_scatter,
    fat5__host_comm_all_gather, fat5__op_names,
#define FAT5__OP_CPU(name, params) fat5__cpu_##name,
    FAT5__OPS(FAT5__OP_CPU)
#undef FAT5__OP_CPU
};

#ifndef FAT5_NO_CUDA
static const fat5__backend fat5__gpu_backend = {
    "gpu", 0, 1, 1, fat5__dev_act_size, fat5__dev_alloc, fat5__dev_free, fat5__dev_upload,
    fat5__dev_download, fat5__dev_copy, fat5__dev_memset0, fat5__dev_sync, fat5__dev_fused_rows,
    fat5__dev_peak_flops, fat5__dev_mem_info, fat5__dev_prof_enable, fat5__dev_prof_collect,
    fat5__dev_prof_entry, fat5__dev_set_attn_tc, fat5__dev_capture_begin, fat5__dev_capture_end, fat5__dev_graph_launch,
    fat5__dev_graph_destroy, FAT5__DIST_NCCL, fat5__nccl_comm_sum, fat5__nccl_comm_reduce_scatter,
    fat5__nccl_comm_all_gather, fat5__op_names,
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

// A recorded step: the work of step(arg, n) recorded at the first call for this n and replayed
// at the next ones (the decoders' steps). *pos is the host-side position a step advances: a step
// advances it when it is recorded, so a replay advances it here, and a recording that fails after
// the step ran moves it back. A failed recording leaves *graph NULL and returns the error
// (FAT5_ERR_UNSUPPORTED where the backend records nothing: the caller then runs plainly).
typedef struct fat5__graph {
    void *exec;     // the recording, NULL none
    int64_t n;      // ... of a step for n entries
} fat5__graph;

static fat5_status fat5__graph_step(const fat5__backend *be, fat5_ctx *ctx, fat5__graph *g, int64_t n,
                                    fat5_status (*step)(void *arg, int64_t n), void *arg, int64_t *pos) {
    fat5_status st;
    void *exec = NULL;
    if (g->exec && g->n == n) {
        if ((st = be->graph_launch(ctx, g->exec))) return st;
        (*pos)++;
        return FAT5_OK;
    }
    be->graph_destroy(ctx, g->exec);
    g->exec = NULL;
    if ((st = be->capture_begin(ctx))) return st;
    if ((st = step(arg, n))) {   // the position did not advance
        be->capture_end(ctx, 0, &exec);
        return st;
    }
    if ((st = be->capture_end(ctx, 1, &exec))) {
        (*pos)--;
        return st;
    }
    g->exec = exec;
    g->n = n;
    return be->graph_launch(ctx, g->exec);
}

// ---- the context: its backend opened with it ----

// The context's checks and its backend; on failure the message is in ctx->err.
static fat5_status fat5__ctx_open(fat5_ctx *ctx) {
    const fat5_ctx_config *c = &ctx->cfg;
    ctx->n_threads = 1;
    if (c->dtype != FAT5_DTYPE_FP32 && c->dtype != FAT5_DTYPE_BF16)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown dtype %d", (int)c->dtype);
    if (c->n_threads < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: n_threads %d (0 = one per CPU, or >= 1)",
                         c->n_threads);
    ctx->n_threads = fat5__resolve_threads(c->n_threads);
    if (c->device == FAT5_DEVICE_GPU) return fat5__dev_open(ctx);
    if (c->device != FAT5_DEVICE_CPU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown device %d", (int)c->device);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_ctx_create(const fat5_ctx_config *cfg, fat5_ctx **out, char *err, size_t err_cap) {
    fat5_ctx_config c = cfg ? *cfg : fat5_ctx_config_default();
    fat5_ctx *ctx;
    fat5_status st;
    if (err && err_cap) err[0] = 0;
    if (!out) {
        if (err && err_cap) snprintf(err, err_cap, "fat5_ctx_create: out is NULL");
        return FAT5_ERR_INVALID_ARG;
    }
    *out = NULL;
    if ((c.alloc != NULL) != (c.free != NULL) || (c.realloc != NULL) != (c.free != NULL)) {
        if (err && err_cap)
            snprintf(err, err_cap, "fat5_ctx_create: the alloc, realloc and free hooks must be given together (all or none)");
        return FAT5_ERR_INVALID_ARG;
    }
    ctx = FAT5__CAST(fat5_ctx *, c.alloc ? c.alloc(c.alloc_user, sizeof *ctx) : FAT5_MALLOC(sizeof *ctx));
    if (!ctx) {
        if (err && err_cap) snprintf(err, err_cap, "fat5_ctx_create: out of memory");
        return FAT5_ERR_OUT_OF_MEMORY;
    }
    memset(ctx, 0, sizeof *ctx);
    ctx->cfg = c;
    if (c.attention) {  // copied: the caller's struct is not kept
        ctx->attention = *c.attention;
        ctx->cfg.attention = &ctx->attention;
    }
    if ((st = fat5__ctx_open(ctx)) != FAT5_OK) {
        if (err && err_cap) snprintf(err, err_cap, "%s", ctx->err);
        fat5_ctx_destroy(ctx);
        return st;
    }
    *out = ctx;
    return FAT5_OK;
}

FAT5_API void fat5_ctx_destroy(fat5_ctx *ctx) {
    if (!ctx) return;
    fat5__pool_destroy(ctx);
    fat5__dev_close(ctx);
    fat5__free(ctx, ctx->scratch);
    fat5__ctx_free_kept(ctx);
    if (ctx->cfg.free) ctx->cfg.free(ctx->cfg.alloc_user, ctx);
    else FAT5_FREE(ctx);
}

