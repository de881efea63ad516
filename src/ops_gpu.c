// =============================================================================================
// ==[3.4] ops: the GPU launchers ==
#ifndef FAT5_NO_CUDA
// One launcher fat5__gpu_<op> per kernel fat5_<op> of kernels/*.cu (and cuBLAS for mm). Each takes
// the kernel's arguments (device pointers as fat5__dptr, 0 for
// NULL; counts as int64_t), checks what the kernel relies on, picks grid and block, and launches on
// the context's stream (asynchronous: errors of the run itself surface at fat5__dev_sync). The CPU
// twin fat5__cpu_<op> in the ops section is the oracle; tests/test_gpu_ops.c pairs them.
//
// Grids: every kernel loops (grid-stride) over its rows or elements, so grids are clamped to
// FAT5__GPU_MAX_BLOCKS in x; y is only ever the head count (<= 65535, checked).
// Kernel arguments: `void *args[]` holds the addresses of variables of the exact parameter types
// (fat5__dptr for pointers, long long, int, float).

// Row-major GEMM through cuBLAS (column-major), same semantics as the CPU ops:
//   NT: C[M,N] = alpha * A[M,K] B[N,K]^T + beta * C
//   NN: C[M,N] = alpha * A[M,K] B[K,N]   + beta * C
//   TN: C[M,N] = alpha * A[K,M]^T B[K,N] + beta * C
// A row-major X[r,c] is the column-major X^T, so each computes C^T = op(B) op(A) with m = N, n = M.
// A and B are in the activation dtype; C is fp32 when c_f32, else the activation dtype. fp32
// compute (CUBLAS_COMPUTE_32F, default math mode: never TF32). beta == 0 does not read C.
// NT products of at most ctx->gpu->mm_rows rows (decoding) run fat5_mm instead (kernels/mm.cu:
// each row of B read once for all rows of A, fp32 accumulation, one launch, no cuBLAS heuristics).
#define FAT5__GPU_MM_WARPS 4  // FAT5_MM_WARPS in kernels/mm.cu: warps a block, two outputs each

static const char *const fat5__mm_layout_names[3] = {"NT", "NN", "TN"};

// Closes a product's profile slot under its shape: "gemm NT MxNxK", " xB" for a batch, " +C" when
// it accumulates
static void fat5__gpu_mm_prof_end(fat5_ctx *ctx, int slot, fat5__mm_layout layout, int64_t M, int64_t N, int64_t K,
                                  int batch, float beta) {
    char key[FAT5__PROF_KEY], nb[16] = "";
    if (slot < 0) return;
    if (batch > 1) snprintf(nb, sizeof nb, " x%d", batch);
    snprintf(key, sizeof key, "gemm %s %lldx%lldx%lld%s%s", fat5__mm_layout_names[layout], (long long)M, (long long)N,
             (long long)K, nb, beta != 0 ? " +C" : "");
    fat5__dev_prof_end(ctx, slot, key);
}

// cuBLAS's operations and leading dimensions of a row-major product of `layout`
static void fat5__gpu_mm_ops(fat5__mm_layout layout, int64_t M, int64_t N, int64_t K, fat5__cublasOperation_t *op_a,
                             int64_t *ld_a, fat5__cublasOperation_t *op_b, int64_t *ld_b) {
    switch (layout) {
    case FAT5__MM_NT:  // B[N,K] is col-major K x N: op T; A[M,K] is col-major K x M: op N
        *op_b = FAT5__CUBLAS_OP_T, *ld_b = K, *op_a = FAT5__CUBLAS_OP_N, *ld_a = K;
        break;
    case FAT5__MM_NN:  // B[K,N] is col-major N x K; A[M,K] is col-major K x M
        *op_b = FAT5__CUBLAS_OP_N, *ld_b = N, *op_a = FAT5__CUBLAS_OP_N, *ld_a = K;
        break;
    default:           // TN: B[K,N] is col-major N x K; A[K,M] is col-major M x K: op T
        *op_b = FAT5__CUBLAS_OP_N, *ld_b = N, *op_a = FAT5__CUBLAS_OP_T, *ld_a = M;
        break;
    }
}

// ---- products on cuBLASLt (see "cuBLASLt" in [2]) ----
// log2 of a pointer's alignment, at most 8 (256 bytes)
static unsigned fat5__lt_align(fat5__dptr p) {
    unsigned a = 0;
    while (a < 8 && !(p & ((fat5__dptr)1 << a))) a++;
    return a;
}

// The size class of a free dimension: itself up to 64, else rounded up to a multiple of a quarter
// of the power of two below it (4 classes an octave: 4093 -> 4096, 11512 -> 12288).
static int64_t fat5__lt_class(int64_t x) {
    int64_t p = 64, step, c;
    if (x <= 64) return x;
    while (p * 2 < x) p *= 2;
    step = p / 4;
    c = (x + step - 1) / step * step;
    return c <= INT_MAX ? c : x;
}

static int fat5__lt_same(const fat5__lt_algo *a, const fat5__lt_algo *b) {
    return a->m == b->m && a->n == b->n && a->k == b->k && a->batch == b->batch && a->layout == b->layout &&
           a->bf16 == b->bf16 && a->c_f32 == b->c_f32 && a->beta == b->beta && a->al_a == b->al_a &&
           a->al_b == b->al_b && a->al_c == b->al_c && a->shared == b->shared;
}

static uint32_t fat5__lt_hash(const fat5__lt_algo *k) {
    uint64_t v[3];
    uint32_t h = 2166136261u;
    size_t i;
    v[0] = (uint64_t)(uint32_t)k->m << 32 | (uint32_t)k->n;
    v[1] = (uint64_t)(uint32_t)k->k << 32 | (uint64_t)k->layout << 24 | (uint64_t)k->bf16 << 16 |
           (uint64_t)k->c_f32 << 8 | k->beta;
    v[2] = (uint64_t)(uint32_t)k->batch << 32 | (uint64_t)k->shared << 24 | (uint64_t)k->al_a << 16 |
           (uint64_t)k->al_b << 8 | k->al_c;
    for (i = 0; i < sizeof v; i++) h = (h ^ ((const unsigned char *)v)[i]) * 16777619u;
    return h;
}

// The three matrix layouts of a row-major product, in cuBLAS's column-major view (as fat5__gpu_mm
// passes cublasGemmEx): C^T [N x M] = op(B^T) [N x K] op(A^T) [K x M]. l[0] is B's, l[1] A's, l[2]
// C's. A batch of `batch` products steps through each matrix by its stride s[] (elements: B's, A's,
// C's; 0: one matrix for all). Returns 0 when one cannot be made (those made are destroyed).
static int fat5__lt_layouts(struct fat5__gpu *g, fat5__mm_layout layout, fat5__cudaDataType ab_t,
                            fat5__cudaDataType c_t, int64_t M, int64_t N, int64_t K, int batch, const int64_t s[3],
                            fat5__cublasLtMatrixLayout_t l[3]) {
    fat5__cublasOperation_t op_a, op_b;
    int64_t ld_a, ld_b;
    int32_t nb = batch;
    int i, ok;
    fat5__gpu_mm_ops(layout, M, N, K, &op_a, &ld_a, &op_b, &ld_b);
    l[0] = l[1] = l[2] = NULL;
    ok = g->lt.cublasLtMatrixLayoutCreate(&l[0], ab_t, (uint64_t)(op_b == FAT5__CUBLAS_OP_N ? N : K),
                                          (uint64_t)(op_b == FAT5__CUBLAS_OP_N ? K : N), ld_b) ==
             FAT5__CUBLAS_STATUS_SUCCESS &&
         g->lt.cublasLtMatrixLayoutCreate(&l[1], ab_t, (uint64_t)(op_a == FAT5__CUBLAS_OP_N ? K : M),
                                          (uint64_t)(op_a == FAT5__CUBLAS_OP_N ? M : K), ld_a) ==
             FAT5__CUBLAS_STATUS_SUCCESS &&
         g->lt.cublasLtMatrixLayoutCreate(&l[2], c_t, (uint64_t)N, (uint64_t)M, N) == FAT5__CUBLAS_STATUS_SUCCESS;
    for (i = 0; i < 3 && ok && batch > 1; i++)
        ok = g->lt.cublasLtMatrixLayoutSetAttribute(l[i], FAT5__CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &nb, sizeof nb) ==
                 FAT5__CUBLAS_STATUS_SUCCESS &&
             g->lt.cublasLtMatrixLayoutSetAttribute(l[i], FAT5__CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s[i],
                                                    sizeof s[i]) == FAT5__CUBLAS_STATUS_SUCCESS;
    if (!ok)
        for (i = 0; i < 3; i++) {
            if (l[i]) g->lt.cublasLtMatrixLayoutDestroy(l[i]);
            l[i] = NULL;
        }
    return ok;
}

// The kept algorithm of a product's size class, asking the heuristic the first time (every time
// once the table is full); NULL when cublasGemmEx must run the product (no algorithm for the
// class, or the question could not be asked).
static const fat5__cublasLtMatmulAlgo_t *fat5__lt_algo_of(struct fat5__gpu *g, const fat5__lt_algo *key,
                                                          fat5__cudaDataType ab_t, fat5__cudaDataType c_t) {
    uint32_t h = fat5__lt_hash(key) & (FAT5__LT_SLOTS - 1), i;
    fat5__lt_algo *e;
    fat5__cublasLtMatrixLayout_t l[3];
    fat5__cublasLtMatmulHeuristicResult_t res;
    // split-K partial sums in fp32 only (as cuBLAS's handle with DISALLOW_REDUCED_PRECISION_REDUCTION):
    // in a workspace, or in place in an fp32 output, never in a bf16 one
    uint32_t al[4], schemes = (uint32_t)FAT5__CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                              (key->c_f32 ? (uint32_t)FAT5__CUBLASLT_REDUCTION_SCHEME_INPLACE : 0u);
    int64_t cs[3];
    int n = 0;
    for (i = 0; i < FAT5__LT_SLOTS; i++, h = (h + 1) & (FAT5__LT_SLOTS - 1)) {
        e = &g->lt_cache[h];
        if (!e->state) break;
        if (fat5__lt_same(e, key)) return e->state == 1 ? &e->algo : NULL;
    }
    // a new class: kept in the empty slot that ended the search, or, with the table full, asked
    // for at every product (the same answer: the algorithm still depends on the size only)
    e = i < FAT5__LT_SLOTS && g->lt_n < FAT5__LT_SLOTS / 4 * 3 ? &g->lt_cache[h] : &g->lt_spare;
    *e = *key;
    e->state = 2;
    if (e != &g->lt_spare) g->lt_n++;
    g->lt_queries++;
    // the class's largest product, with the pointers' alignments (B is cuBLAS's A, A its B)
    al[0] = 1u << key->al_b, al[1] = 1u << key->al_a, al[2] = al[3] = 1u << key->al_c;
    if (g->lt.cublasLtMatmulPreferenceSetAttribute(g->lt_pref, FAT5__CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                   sizeof schemes) != FAT5__CUBLAS_STATUS_SUCCESS ||
        g->lt.cublasLtMatmulPreferenceSetAttribute(g->lt_pref, FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0],
                                                   4) != FAT5__CUBLAS_STATUS_SUCCESS ||
        g->lt.cublasLtMatmulPreferenceSetAttribute(g->lt_pref, FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1],
                                                   4) != FAT5__CUBLAS_STATUS_SUCCESS ||
        g->lt.cublasLtMatmulPreferenceSetAttribute(g->lt_pref, FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2],
                                                   4) != FAT5__CUBLAS_STATUS_SUCCESS ||
        g->lt.cublasLtMatmulPreferenceSetAttribute(g->lt_pref, FAT5__CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3],
                                                   4) != FAT5__CUBLAS_STATUS_SUCCESS)
        goto undo;
    // a batch of the class's size: strides at least the class's matrices (the heuristic reads no memory)
    cs[0] = key->shared & 2 ? 0 : (int64_t)key->n * key->k;
    cs[1] = key->shared & 1 ? 0 : (int64_t)key->m * key->k;
    cs[2] = key->shared & 4 ? 0 : (int64_t)key->m * key->n;
    if (!fat5__lt_layouts(g, (fat5__mm_layout)key->layout, ab_t, c_t, key->m, key->n, key->k, key->batch, cs, l))
        goto undo;
    if (g->lt.cublasLtMatmulAlgoGetHeuristic(g->lt_handle, g->lt_desc[key->layout], l[0], l[1], l[2], l[2],
                                             g->lt_pref, 1, &res, &n) == FAT5__CUBLAS_STATUS_SUCCESS &&
        n > 0 && res.state == FAT5__CUBLAS_STATUS_SUCCESS) {
        e->algo = res.algo;
        e->state = 1;
    }
    for (i = 0; i < 3; i++) g->lt.cublasLtMatrixLayoutDestroy(l[i]);
    return e->state == 1 ? &e->algo : NULL;
undo:   // the question could not be asked (no memory for a descriptor): nothing kept, asked again next time
    if (e != &g->lt_spare) e->state = 0, g->lt_n--;   // the slot ended its search: emptying it breaks no chain
    return NULL;
}

// Queues C = alpha op(A) op(B) + beta C (as fat5__gpu_mm), or a batch of them with strides sA, sB,
// sC in elements (as fat5__gpu_mm_batched; batch 1: one product), on cuBLASLt with its class's
// algorithm. Returns 1 when queued, 0 when cuBLAS's own call must run it instead (no class
// algorithm, or cublasLtMatmul refused it for this size before running anything), -1 with *st set
// on any other failure (an error is not retried elsewhere: part of C may have been written).
static int fat5__gpu_mm_lt(fat5_ctx *ctx, fat5__mm_layout layout, fat5__dptr C, fat5__cudaDataType c_t,
                           fat5__dptr A, fat5__dptr B, fat5__cudaDataType ab_t, int64_t M, int64_t N, int64_t K,
                           float alpha, float beta, int batch, int64_t sA, int64_t sB, int64_t sC, fat5_status *st) {
    struct fat5__gpu *g = ctx->gpu;
    const fat5__cublasLtMatmulAlgo_t *algo;
    fat5__cublasLtMatrixLayout_t l[3];
    fat5__lt_algo key;
    fat5__cublasStatus_t s;
    const int64_t strides[3] = {sB, sA, sC};
    fat5__dptr ab_sz = ab_t == FAT5__CUDA_R_16BF ? 2 : 4, c_sz = c_t == FAT5__CUDA_R_16BF ? 2 : 4;
    fat5__dptr al_a = A, al_b = B, al_c = C;
    int i;
    if (!g->lt_handle || K == 0 || batch < 1) return 0;
    memset(&key, 0, sizeof key);
    key.layout = (uint8_t)layout;
    key.bf16 = ab_t == FAT5__CUDA_R_16BF;
    key.c_f32 = c_t == FAT5__CUDA_R_32F;
    key.beta = beta != 0.0f;
    key.m = (int32_t)(layout == FAT5__MM_TN ? M : fat5__lt_class(M));
    key.n = (int32_t)N;
    key.k = (int32_t)(layout == FAT5__MM_TN ? fat5__lt_class(K) : K);
    key.batch = batch;
    if (batch > 1) {   // every matrix of the batch: its pointer's alignment, and its stride's
        key.shared = (uint8_t)((sA == 0) | (sB == 0) << 1 | (sC == 0) << 2);
        al_a |= (fat5__dptr)sA * ab_sz, al_b |= (fat5__dptr)sB * ab_sz, al_c |= (fat5__dptr)sC * c_sz;
    }
    key.al_a = (uint8_t)fat5__lt_align(al_a);
    key.al_b = (uint8_t)fat5__lt_align(al_b);
    key.al_c = (uint8_t)fat5__lt_align(al_c);
    if (!(algo = fat5__lt_algo_of(g, &key, ab_t, c_t)) ||
        !fat5__lt_layouts(g, layout, ab_t, c_t, M, N, K, batch, strides, l)) {
        g->lt_fallbacks++;
        return 0;
    }
    s = g->lt.cublasLtMatmul(g->lt_handle, g->lt_desc[layout], &alpha, (const void *)(uintptr_t)B, l[0],
                             (const void *)(uintptr_t)A, l[1], &beta, (const void *)(uintptr_t)C, l[2],
                             (void *)(uintptr_t)C, l[2], algo, (void *)(uintptr_t)g->lt_ws, FAT5__LT_WS, g->stream);
    for (i = 0; i < 3; i++) g->lt.cublasLtMatrixLayoutDestroy(l[i]);
    if (s == FAT5__CUBLAS_STATUS_NOT_SUPPORTED || s == FAT5__CUBLAS_STATUS_INVALID_VALUE ||
        s == FAT5__CUBLAS_STATUS_ARCH_MISMATCH) {   // refused up front: cuBLAS's own call runs it
        if (!g->lt_refusal_logged)
            fat5__log(ctx, FAT5_LOG_INFO, "products: cuBLASLt refused its class's algorithm for %s M=%lld N=%lld "
                      "K=%lld (status %u); cuBLAS's own call runs such products (said once)",
                      fat5__mm_layout_names[layout], (long long)M, (long long)N, (long long)K, (unsigned)s);
        g->lt_refusal_logged = 1;
        g->lt_fallbacks++;
        return 0;
    }
    if (s != FAT5__CUBLAS_STATUS_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "cublasLtMatmul (%s, M=%lld N=%lld K=%lld, batch %d)", fat5__mm_layout_names[layout],
                 (long long)M, (long long)N, (long long)K, batch);
        *st = fat5__dev_blas_check(ctx, s, what);
        return -1;
    }
    g->lt_calls++;
    return 1;
}

static FAT5__UNUSED fat5_status fat5__gpu_mm(fat5_ctx *ctx, fat5__mm_layout layout, fat5__dptr C,
                                             int c_f32, fat5__dptr A, fat5__dptr B, int64_t M,
                                             int64_t N, int64_t K, float alpha, float beta) {
    const char *const *names = fat5__mm_layout_names;
    fat5_status st = fat5__dev_enter(ctx, "fat5__gpu_mm");
    fat5__cublasOperation_t op_b, op_a;
    fat5__cudaDataType ab_t, c_t;
    fat5__cublasStatus_t s;
    int64_t ld_b, ld_a;
    int bf16, slot, lt;
    char what[160];
    if (st) return st;
    if ((int)layout < 0 || (int)layout > 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm: unknown layout %d", (int)layout);
    if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5__gpu_mm %s: M=%lld N=%lld K=%lld outside [0, INT_MAX]", names[layout],
                         (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) return FAT5_OK;
    if (!C || (K > 0 && (!A || !B)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm %s: NULL %s", names[layout],
                         !C ? "C" : !A ? "A" : "B");
    bf16 = ctx->cfg.dtype == FAT5_DTYPE_BF16;
    if (layout == FAT5__MM_NT && M <= ctx->gpu->mm_rows && K > 0) {
        // a few rows (decoding): fat5_mm reads each row of B once for all of them
        long long M_ = M;
        int N_ = (int)N, K_ = (int)K, vec = K % (bf16 ? 8 : 4) == 0 && !((A | B) & 15);
        void *args[] = {&C, &c_f32, &A, &B, &M_, &N_, &K_, &alpha, &beta, &vec};
        int64_t blocks = (N + 2 * FAT5__GPU_MM_WARPS - 1) / (2 * FAT5__GPU_MM_WARPS);
        return fat5__dev_launch(ctx, FAT5__K_mm, (unsigned)(blocks < 1048576 ? blocks : 1048576), 1, 1,
                                32 * FAT5__GPU_MM_WARPS, 1, 1, 0, args);
    }
    ab_t = bf16 ? FAT5__CUDA_R_16BF : FAT5__CUDA_R_32F;
    c_t = (c_f32 || !bf16) ? FAT5__CUDA_R_32F : FAT5__CUDA_R_16BF;
    slot = fat5__dev_prof_begin(ctx);
    if ((lt = fat5__gpu_mm_lt(ctx, layout, C, c_t, A, B, ab_t, M, N, K, alpha, beta, 1, 0, 0, 0, &st)) != 0) {
        if (lt > 0) fat5__gpu_mm_prof_end(ctx, slot, layout, M, N, K, 1, beta);
        return lt > 0 ? FAT5_OK : st;
    }
    fat5__gpu_mm_ops(layout, M, N, K, &op_a, &ld_a, &op_b, &ld_b);
    s = ctx->gpu->cublas.cublasGemmEx(ctx->gpu->blas, op_b, op_a, (int)N, (int)M, (int)K, &alpha,
                                      (const void *)(uintptr_t)B, ab_t, (int)(ld_b > 0 ? ld_b : 1),
                                      (const void *)(uintptr_t)A, ab_t, (int)(ld_a > 0 ? ld_a : 1),
                                      &beta, (void *)(uintptr_t)C, c_t, (int)N,
                                      FAT5__CUBLAS_COMPUTE_32F, FAT5__CUBLAS_GEMM_DEFAULT);
    if (s == FAT5__CUBLAS_STATUS_SUCCESS) {
        fat5__gpu_mm_prof_end(ctx, slot, layout, M, N, K, 1, beta);
        return FAT5_OK;
    }
    snprintf(what, sizeof what, "cublasGemmEx (%s, M=%lld N=%lld K=%lld, %s inputs, %s output)",
             names[layout], (long long)M, (long long)N, (long long)K, bf16 ? "bf16" : "fp32",
             c_t == FAT5__CUDA_R_32F ? "fp32" : "bf16");
    return fat5__dev_blas_check(ctx, s, what);
}

// batch products of one shape in one cuBLASLt call (else cublasGemmStridedBatchedEx): C + b sC = op(A + b sA,
// B + b sB), strides in elements of each matrix's type (0: one matrix for all), as fat5__gpu_mm
// computes each (the q | k | v projections, wi_0 | wi_1, and their weight gradients). Products of a
// few rows go to fat5__gpu_mm one by one.
static FAT5__UNUSED fat5_status fat5__gpu_mm_batched(fat5_ctx *ctx, fat5__mm_layout layout, fat5__dptr C, int c_f32,
                                                     fat5__dptr A, fat5__dptr B, int64_t M, int64_t N, int64_t K,
                                                     float alpha, float beta, int batch, int64_t sA, int64_t sB,
                                                     int64_t sC) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__gpu_mm_batched");
    fat5__cublasOperation_t op_b, op_a;
    fat5__cudaDataType ab_t, c_t;
    fat5__cublasStatus_t s;
    int64_t ld_b, ld_a;
    size_t ab_sz, c_sz;
    int bf16, slot, b, lt;
    char what[160];
    if (st) return st;
    if (batch < 0 || sA < 0 || sB < 0 || sC < 0 || (int)layout < 0 || (int)layout > 2 || M < 0 || N < 0 || K < 0 ||
        M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm_batched: layout %d, M=%lld N=%lld K=%lld, batch %d, "
                         "strides %lld %lld %lld", (int)layout, (long long)M, (long long)N, (long long)K, batch,
                         (long long)sA, (long long)sB, (long long)sC);
    if (batch == 0 || M == 0 || N == 0) return FAT5_OK;
    bf16 = ctx->cfg.dtype == FAT5_DTYPE_BF16;
    ab_sz = bf16 ? 2 : 4;
    c_sz = (c_f32 || !bf16) ? 4 : 2;
    if (batch == 1 || K == 0 || (layout == FAT5__MM_NT && M <= ctx->gpu->mm_rows)) {
        for (b = 0; b < batch && !st; b++)
            st = fat5__gpu_mm(ctx, layout, C + (fat5__dptr)(b * sC) * c_sz, c_f32, A + (fat5__dptr)(b * sA) * ab_sz,
                              B + (fat5__dptr)(b * sB) * ab_sz, M, N, K, alpha, beta);
        return st;
    }
    if (!C || !A || !B) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm_batched: NULL matrix");
    ab_t = bf16 ? FAT5__CUDA_R_16BF : FAT5__CUDA_R_32F;
    c_t = c_sz == 4 ? FAT5__CUDA_R_32F : FAT5__CUDA_R_16BF;
    slot = fat5__dev_prof_begin(ctx);
    if ((lt = fat5__gpu_mm_lt(ctx, layout, C, c_t, A, B, ab_t, M, N, K, alpha, beta, batch, sA, sB, sC, &st)) != 0) {
        if (lt > 0) fat5__gpu_mm_prof_end(ctx, slot, layout, M, N, K, batch, beta);
        return lt > 0 ? FAT5_OK : st;
    }
    fat5__gpu_mm_ops(layout, M, N, K, &op_a, &ld_a, &op_b, &ld_b);
    s = ctx->gpu->cublas.cublasGemmStridedBatchedEx(
        ctx->gpu->blas, op_b, op_a, (int)N, (int)M, (int)K, &alpha, (const void *)(uintptr_t)B, ab_t,
        (int)(ld_b > 0 ? ld_b : 1), (long long)sB, (const void *)(uintptr_t)A, ab_t, (int)(ld_a > 0 ? ld_a : 1),
        (long long)sA, &beta, (void *)(uintptr_t)C, c_t, (int)N, (long long)sC, batch, FAT5__CUBLAS_COMPUTE_32F,
        FAT5__CUBLAS_GEMM_DEFAULT);
    if (s == FAT5__CUBLAS_STATUS_SUCCESS) {
        fat5__gpu_mm_prof_end(ctx, slot, layout, M, N, K, batch, beta);
        return FAT5_OK;
    }
    snprintf(what, sizeof what, "cublasGemmStridedBatchedEx (M=%lld N=%lld K=%lld, batch %d)", (long long)M,
             (long long)N, (long long)K, batch);
    return fat5__dev_blas_check(ctx, s, what);
}

#define FAT5__GPU_MAX_BLOCKS 1048576    // grid.x clamp; the kernels' grid-stride loops do the rest
#define FAT5__GPU_SMEM_DEFAULT 49152    // dynamic shared memory usable without an opt-in
#define FAT5__GPU_ATTN_WARPS 4          // tokens (warps) per attention block; must be <= 32
#define FAT5__GPU_ATTN_MAX_DK 256       // FAT5_ATTN_MAX_DK in kernels/attention.cu
#define FAT5__GPU_NORM_BWD_BLOCKS 1024  // rows of the rmsnorm_bwd scratch: the dw partials
#define FAT5__GPU_NORM_WARPS 8          // rows (one per warp) an rmsnorm block works on at once
#define FAT5__GPU_NORM_BWD_PER_SM 3     // rmsnorm_bwd blocks resident per multiprocessor
// fat5_rmsnorm_bwd is compiled for FAT5__GPU_NORM_BWD_PER_SM blocks of 256 threads per
// multiprocessor (__launch_bounds__(256, 3) in kernels/norm.cu)
typedef char
    fat5__norm_bwd_matches_launch_bounds[FAT5__GPU_NORM_WARPS == 8 && FAT5__GPU_NORM_BWD_PER_SM == 3 ? 1 : -1];
#define FAT5__GPU_DBIAS_BLOCKS 1024     // grid.x clamp of attn_bwd_dq with a bias gradient: rows of its scratch

// ceil(work / per_block) blocks, at least 1, at most FAT5__GPU_MAX_BLOCKS
static unsigned fat5__gpu_blocks(int64_t work, int64_t per_block) {
    int64_t b = work / per_block + (work % per_block != 0);
    if (b < 1) b = 1;
    if (b > FAT5__GPU_MAX_BLOCKS) b = FAT5__GPU_MAX_BLOCKS;
    return (unsigned)b;
}

// threads for a block that walks a row of D elements: a multiple of 32 covering D, within [32, max]
static unsigned fat5__gpu_row_threads(int64_t D, unsigned max) {
    int64_t t = (D + 31) / 32 * 32;
    if (t < 32) t = 32;
    if (t > (int64_t)max) t = (int64_t)max;
    return (unsigned)t;
}

static fat5_status fat5__gpu_bad_count(fat5_ctx *ctx, const char *op, const char *what, int64_t v) {
    return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s = %lld is negative", op, what, (long long)v);
}

// an elementwise kernel over n elements: blocks of 256 threads, grid-stride
static fat5_status fat5__gpu_launch_1d(fat5_ctx *ctx, int kernel, const char *op, int64_t n, void **args) {
    if (n < 0) return fat5__gpu_bad_count(ctx, op, "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(n, 256), 1, 1, 256, 1, 1, 0, args);
}

// An elementwise kernel that takes FAT5_VEC_E act_t elements per thread (16-byte loads): threads
// for n / E vectors, grid-stride, at least one block (the n % E left over go one per thread).
static fat5_status fat5__gpu_launch_vec(fat5_ctx *ctx, int kernel, const char *op, int64_t n, void **args) {
    int64_t e = 16 / (int64_t)fat5__dev_act_size(ctx);
    if (n < 0) return fat5__gpu_bad_count(ctx, op, "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks((n + e - 1) / e, 256), 1, 1, 256, 1, 1, 0, args);
}

// ----- util.cu -----

// x[i] = v for i < n (fp32)
static FAT5__UNUSED fat5_status fat5__gpu_fill_f32(fat5_ctx *ctx, fat5__dptr x, float v, int64_t n) {
    long long n_ = n;
    void *args[] = {&x, &v, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_fill_f32, "fat5__gpu_fill_f32", n, args);
}

// x[i] *= s for i < n (fp32)
static FAT5__UNUSED fat5_status fat5__gpu_scale_f32(fat5_ctx *ctx, fat5__dptr x, float s, int64_t n) {
    long long n_ = n;
    void *args[] = {&x, &s, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_scale_f32, "fat5__gpu_scale_f32", n, args);
}

// dst[i] = bf16(src[i]) (round to nearest even), whatever the activation dtype; no overlap
static FAT5__UNUSED fat5_status fat5__gpu_f32_to_bf16(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src,
                                                      int64_t n) {
    long long n_ = n;
    void *args[] = {&dst, &src, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_f32_to_bf16, "fat5__gpu_f32_to_bf16", n, args);
}

// dst[i] = src[i] in the activation dtype (fp32 copy, or bf16 rounding); no overlap
static FAT5__UNUSED fat5_status fat5__gpu_to_act(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src, int64_t n) {
    long long n_ = n;
    void *args[] = {&dst, &src, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_to_act, "fat5__gpu_to_act", n, args);
}

// ----- embed.cu: one block per row, threads over D -----

static fat5_status fat5__gpu_embed_launch(fat5_ctx *ctx, int kernel, const char *op, fat5__dptr out,
                                          fat5__dptr table, fat5__dptr tok, int64_t T, int D) {
    long long T_ = T;
    void *args[] = {&out, &table, &tok, &T_, &D};
    if (T < 0) return fat5__gpu_bad_count(ctx, op, "T", T);
    if (D < 0) return fat5__gpu_bad_count(ctx, op, "D", D);
    if (T == 0 || D == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(T, 1), 1, 1, fat5__gpu_row_threads(D, 256), 1, 1, 0,
                            args);
}

// out[t] = table[tok[t]] (rows of D fp32); token ids must be valid rows
static FAT5__UNUSED fat5_status fat5__gpu_embed_fwd(fat5_ctx *ctx, fat5__dptr out, fat5__dptr table,
                                                    fat5__dptr tok, int64_t T, int D) {
    return fat5__gpu_embed_launch(ctx, FAT5__K_embed_fwd, "fat5__gpu_embed_fwd", out, table, tok, T, D);
}

// dtable[tok[t]] += dout[t], deterministic and bit-identical to the CPU twin: block b of G owns the
// rows v = b (mod G) and adds its tokens' rows in token order (no atomics). G = ceil(T / 32),
// clamped to [1, 512]; 256 threads.
static FAT5__UNUSED fat5_status fat5__gpu_embed_bwd(fat5_ctx *ctx, fat5__dptr dtable, fat5__dptr dout,
                                                    fat5__dptr tok, int64_t T, int D) {
    long long T_ = T;
    void *args[] = {&dtable, &dout, &tok, &T_, &D};
    unsigned G = fat5__gpu_blocks(T, 32);
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_embed_bwd", "T", T);
    if (D < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_embed_bwd", "D", D);
    if (T == 0 || D == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_embed_bwd, G < 512 ? G : 512, 1, 1, 256, 1, 1, 0, args);
}

// ----- norm.cu -----

// y = w * x * r with r = 1/sqrt(mean(x^2) + eps) saved per row; x fp32 [T, D], y activation dtype;
// xs (0: none) a copy of x. One warp per row, 8 warps per block.
static FAT5__UNUSED fat5_status fat5__gpu_rmsnorm_fwd(fat5_ctx *ctx, fat5__dptr y, fat5__dptr r, fat5__dptr x,
                                                      fat5__dptr w, int64_t T, int D, float eps, fat5__dptr xs) {
    long long T_ = T;
    void *args[] = {&y, &r, &x, &w, &T_, &D, &eps, &xs};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_rmsnorm_fwd", "T", T);
    if (D < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rmsnorm_fwd: D = %d", D);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_rmsnorm_fwd, fat5__gpu_blocks(T, FAT5__GPU_NORM_WARPS), 1, 1,
                            32 * FAT5__GPU_NORM_WARPS, 1, 1, 0, args);
}

// out[j] += sum over r < rows of in[r*D + j], in a fixed order (deterministic). Block 32x32
// (columns x row stride), one block per 32 columns.
static FAT5__UNUSED fat5_status fat5__gpu_colsum_f32(fat5_ctx *ctx, fat5__dptr out, fat5__dptr in, int rows,
                                                     int D) {
    void *args[] = {&out, &in, &rows, &D};
    if (rows < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_colsum_f32", "rows", rows);
    if (D < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_colsum_f32", "D", D);
    if (rows == 0 || D == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_colsum_f32, fat5__gpu_blocks(D, 32), 1, 1, 32, 32, 1, 0, args);
}

// dx (+)= r g - x r^3 mean(g x) with g = w dy (accumulate: added to dx); dw += sum_t dy x r;
// dxa (0: none) dx's final value in the activation dtype. dy, x, dx fp32 [T, D]. One warp per row,
// FAT5__GPU_NORM_WARPS per block. dw may be 0 (no weight gradient); else scratch holds at least
// FAT5__GPU_NORM_BWD_BLOCKS * D floats for the partial column sums: one row per block when the
// block's warps' rows fit in shared memory (FAT5__GPU_NORM_BWD_PER_SM blocks per multiprocessor,
// what the kernel's registers let run at once; at most 1024), else one
// per warp (at most 1024 warps); fat5__gpu_colsum_f32 then adds them into dw in a fixed order, so
// dw is deterministic.
static FAT5__UNUSED fat5_status fat5__gpu_rmsnorm_bwd(fat5_ctx *ctx, fat5__dptr dx, fat5__dptr dw,
                                                      fat5__dptr dy, fat5__dptr x, fat5__dptr w, fat5__dptr r,
                                                      int64_t T, int D, int accumulate, fat5__dptr scratch,
                                                      fat5__dptr dxa) {
    long long T_ = T;
    fat5__dptr part = dw ? scratch : 0;
    int64_t need = T / FAT5__GPU_NORM_WARPS + (T % FAT5__GPU_NORM_WARPS != 0), cap, rows;
    int in_smem = dw && (int64_t)D * 4 * FAT5__GPU_NORM_WARPS <= FAT5__GPU_SMEM_DEFAULT;
    unsigned smem = in_smem ? (unsigned)D * 4u * FAT5__GPU_NORM_WARPS : 0u;
    void *args[] = {&dx, &part, &dy, &x, &w, &r, &T_, &D, &accumulate, &dxa};
    fat5_status st;
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_rmsnorm_bwd", "T", T);
    if (D < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rmsnorm_bwd: D = %d", D);
    if (dw && !scratch)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rmsnorm_bwd: dw without scratch");
    if (T == 0) return FAT5_OK;
    if (!dw) cap = FAT5__GPU_MAX_BLOCKS;
    else if (in_smem)
        cap = FAT5__GPU_NORM_BWD_PER_SM * (int64_t)(ctx->gpu && ctx->gpu->sm_count > 0 ? ctx->gpu->sm_count : 132);
    else cap = FAT5__GPU_NORM_BWD_BLOCKS / FAT5__GPU_NORM_WARPS;
    if (cap > FAT5__GPU_NORM_BWD_BLOCKS) cap = FAT5__GPU_NORM_BWD_BLOCKS;
    if (need > cap) need = cap;
    st = fat5__dev_launch(ctx, FAT5__K_rmsnorm_bwd, (unsigned)need, 1, 1, 32 * FAT5__GPU_NORM_WARPS, 1, 1, smem,
                          args);
    if (st || !dw) return st;
    rows = in_smem ? need : need * FAT5__GPU_NORM_WARPS;
    return fat5__gpu_colsum_f32(ctx, dw, scratch, (int)rows, D);
}

// ----- ffn.cu -----

static fat5_status fat5__gpu_check_act(fat5_ctx *ctx, const char *op, int act) {
    if (act < FAT5_ACT_RELU || act > FAT5__ACT_TANH)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: unknown activation %d", op, act);
    return FAT5_OK;
}

// h = act(a) * b (gated) or act(a) (b == 0), then h *= m under drop (thresh > 0; element i of the
// mask); activation dtype; act a fat5_act value
static FAT5__UNUSED fat5_status fat5__gpu_act_fwd(fat5_ctx *ctx, fat5__dptr h, fat5__dptr a, fat5__dptr b,
                                                  int64_t n, int act, fat5__drop drop) {
    long long n_ = n;
    unsigned long long seed = drop.seed, stream = drop.stream;
    unsigned int thresh = drop.thresh;
    float scale = drop.scale;
    void *args[] = {&h, &a, &b, &n_, &act, &seed, &stream, &thresh, &scale};
    fat5_status st = fat5__gpu_check_act(ctx, "fat5__gpu_act_fwd", act);
    return st ? st : fat5__gpu_launch_vec(ctx, FAT5__K_act_fwd, "fat5__gpu_act_fwd", n, args);
}

// g = dh, or dh m under the forward's drop; da = g * b * act'(a), db = g * act(a) (gated);
// da = g * act'(a) (b == db == 0). db == dh works.
static FAT5__UNUSED fat5_status fat5__gpu_act_bwd(fat5_ctx *ctx, fat5__dptr da, fat5__dptr db, fat5__dptr dh,
                                                  fat5__dptr a, fat5__dptr b, int64_t n, int act, fat5__drop drop) {
    long long n_ = n;
    unsigned long long seed = drop.seed, stream = drop.stream;
    unsigned int thresh = drop.thresh;
    float scale = drop.scale;
    void *args[] = {&da, &db, &dh, &a, &b, &n_, &act, &seed, &stream, &thresh, &scale};
    fat5_status st = fat5__gpu_check_act(ctx, "fat5__gpu_act_bwd", act);
    return st ? st : fat5__gpu_launch_vec(ctx, FAT5__K_act_bwd, "fat5__gpu_act_bwd", n, args);
}

// ----- dropout.cu -----

// y = x m (mode FAT5__DROP_*: fp32 or activation-dtype buffers, or y += x m into fp32), m = scale
// where element i of drop's mask is kept, else 0; one thread per block of 8 elements
static FAT5__UNUSED fat5_status fat5__gpu_dropout(fat5_ctx *ctx, fat5__dptr y, fat5__dptr x, int64_t n, int mode,
                                                  fat5__drop drop) {
    long long n_ = n;
    unsigned long long seed = drop.seed, stream = drop.stream;
    unsigned int thresh = drop.thresh;
    float scale = drop.scale;
    void *args[] = {&y, &x, &n_, &mode, &seed, &stream, &thresh, &scale};
    if (mode < FAT5__DROP_F32 || mode > FAT5__DROP_ACT)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_dropout: mode %d", mode);
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_dropout", "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_dropout, fat5__gpu_blocks((n + 7) / 8, 256), 1, 1, 256, 1, 1, 0, args);
}

// out[i] (int32) = the 16-bit draw of element index[i] (int64) of mask (seed, stream[i] (int64))
static FAT5__UNUSED fat5_status fat5__gpu_drop_draws(fat5_ctx *ctx, fat5__dptr out, fat5__dptr stream,
                                                     fat5__dptr index, int64_t n, unsigned long long seed) {
    long long n_ = n;
    void *args[] = {&out, &stream, &index, &n_, &seed};
    return fat5__gpu_launch_1d(ctx, FAT5__K_drop_draws, "fat5__gpu_drop_draws", n, args);
}

// ----- attention.cu -----
// Grid (ceil(T / W) clamped, H), block 32 W (W = FAT5__GPU_ATTN_WARPS tokens of one head per
// block), or 256 threads (the tiled path: 64 tokens of one head per block). Dynamic shared memory:
// `rows` fp32 rows of dk per warp (tiled: the kernels' tiles), plus the position scheme's part:
// T5, the head's bias column, the bucket table and (dq) the bias-gradient accumulator when they fit
// (the kernels read the size they were given and fall back to global memory otherwise); FIRE, the
// head's MLP rows (16 W bytes, always) and (dq) the gradient accumulators; ALiBi, nothing.
// Each scheme has its own kernels (fat5_attn_*_alibi, fat5_attn_*_fire), picked from the kind,
// and so has each scheme with an encoder pattern (fat5_attn_*_pat: a window, maybe block-global or
// transient-global keys; g and cu_g reach only these). The pattern kernels visit the window's,
// the prefix's and the global rows' tiles only: O(T (2 r + 1 + globals)) scores, O(T) memory;
// with transient-global keys and their own table, dq's bias-gradient partial rows are 2 nb H wide
// (the global table's after T5's, as dbias [2, nb, H]).

// the scheme of an attention kind: 0 T5 buckets (or no bias), 1 ALiBi, 2 FIRE
static int fat5__gpu_attn_scheme(int kind) {
    return (kind & FAT5__ATTN_FIRE) ? 2 : (kind & FAT5__ATTN_ALIBI) ? 1 : 0;
}

// whether a kind has an encoder pattern (a window, with or without global keys)
static int fat5__gpu_attn_pattern(int kind) {
    return FAT5__ATTN_RADIUS(kind) >= 0 || (kind & (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED));
}

// the kernel of op kernel `k0` (the T5 one, e.g. FAT5__K_attn_fwd) for the kind's scheme and pattern
static int fat5__gpu_attn_kernel(int k0, int kind) {
    static const int alibi[] = {FAT5__K_attn_fwd_alibi, FAT5__K_attn_bwd_dq_alibi, FAT5__K_attn_bwd_dkv_alibi,
                                FAT5__K_attn_decode_alibi};
    static const int fire[] = {FAT5__K_attn_fwd_fire, FAT5__K_attn_bwd_dq_fire, FAT5__K_attn_bwd_dkv_fire,
                               FAT5__K_attn_decode_fire};
    static const int pat[3][3] = {{FAT5__K_attn_fwd_pat, FAT5__K_attn_bwd_dq_pat, FAT5__K_attn_bwd_dkv_pat},
                                  {FAT5__K_attn_fwd_alibi_pat, FAT5__K_attn_bwd_dq_alibi_pat,
                                   FAT5__K_attn_bwd_dkv_alibi_pat},
                                  {FAT5__K_attn_fwd_fire_pat, FAT5__K_attn_bwd_dq_fire_pat,
                                   FAT5__K_attn_bwd_dkv_fire_pat}};
    int i = k0 == FAT5__K_attn_fwd ? 0 : k0 == FAT5__K_attn_bwd_dq ? 1 : k0 == FAT5__K_attn_bwd_dkv ? 2 : 3;
    int s = fat5__gpu_attn_scheme(kind);
    if (i < 3 && fat5__gpu_attn_pattern(kind)) return pat[s][i];
    return s == 2 ? fire[i] : s == 1 ? alibi[i] : k0;
}

// The kind (mask | scheme bits | pattern, fat5__attn_kind) and what it needs. T5 (no scheme bit):
// bias the [nb, H] table ([2, nb, H] with transient-global keys and their own table) or 0, lut the
// buckets of distances < max_distance. ALiBi: bias and lut unused; asymmetric only with the
// bidirectional mask and an even head count. FIRE: bias its parameter block, nb its MLP width
// W >= 1, max_distance its L0 >= 0. Cross-attention has no position scheme. The pattern (g, cu_g)
// as fat5__attn_pattern_check says; cu_g is device memory.
static fat5_status fat5__gpu_attn_check(fat5_ctx *ctx, const char *op, int64_t T, int H, int dk, int kind,
                                        fat5__dptr bias, fat5__dptr lut, int nb, int max_distance, int g,
                                        fat5__dptr cu_g) {
    int mask = kind & FAT5__ATTN_MASK;
    int scheme = kind & ((1 << FAT5__ATTN_WINDOW_SHIFT) - 1) &
                 ~(FAT5__ATTN_MASK | FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED);
    fat5_status st = fat5__attn_pattern_check(ctx, op, kind, g, cu_g);
    if (st) return st;
    if (FAT5__ATTN_RADIUS(kind) > FAT5__ATTN_MAX_RADIUS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: a window of radius %d (at most %d)", op, kind,
                         FAT5__ATTN_RADIUS(kind), FAT5__ATTN_MAX_RADIUS);
    if (T < 0) return fat5__gpu_bad_count(ctx, op, "T", T);
    if (H < 1 || H > 65535) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %d heads (1..65535)", op, H);
    if (dk < 1 || dk > FAT5__GPU_ATTN_MAX_DK)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: head dim %d (1..%d)", op, dk, FAT5__GPU_ATTN_MAX_DK);
    if (kind < 0 || mask == FAT5__ATTN_MASK ||
        (scheme & ~(FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM | FAT5__ATTN_FIRE)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: attention kind %d", op, kind);
    if (scheme && mask == FAT5__ATTN_CROSS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: cross-attention has no position scheme", op, kind);
    if ((kind & FAT5__ATTN_ALIBI) && (kind & FAT5__ATTN_FIRE))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: ALiBi and FIRE at once", op, kind);
    if ((kind & FAT5__ATTN_ALIBI_ASYM) && (!(kind & FAT5__ATTN_ALIBI) || mask != FAT5__ATTN_BIDIR || H % 2))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: kind %d: asymmetric ALiBi needs ALiBi, the bidirectional mask and an even head count "
                         "(H = %d)",
                         op, kind, H);
    if (kind & FAT5__ATTN_FIRE) {
        if (!bias || nb < 1 || max_distance < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: FIRE with parameters %s, MLP width %d, L0 %d", op,
                             bias ? "given" : "missing", nb, max_distance);
        return FAT5_OK;
    }
    if (kind & FAT5__ATTN_ALIBI) return FAT5_OK;
    if (bias && (nb < (mask == FAT5__ATTN_BIDIR ? 2 : 1) || max_distance < 0 || (max_distance > 0 && !lut)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: bias with %d buckets, max distance %d, lut %s", op,
                         nb, max_distance, lut ? "given" : "missing");
    // the kernels' bucket of a distance n >= max_distance is the last one: fat5__rel_bucket's only
    // when max_distance covers its exact buckets (n < nb/4 bidirectional, nb/2 otherwise)
    if (bias && max_distance < (mask == FAT5__ATTN_BIDIR ? nb / 2 / 2 : nb / 2))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "%s: %d buckets with max distance %d: the GPU kernels need a max distance of at least "
                         "%d (the exact buckets)",
                         op, nb, max_distance, mask == FAT5__ATTN_BIDIR ? nb / 2 / 2 : nb / 2);
    return FAT5_OK;
}

// dynamic shared memory of a per-warp T5 attention launch (bytes)
static unsigned fat5__gpu_attn_smem(int rows, int dk, fat5__dptr bias, int nb, int max_distance, int extra) {
    int64_t base = (int64_t)rows * FAT5__GPU_ATTN_WARPS * dk * 4;
    int64_t tables = bias ? ((int64_t)nb + max_distance + extra) * 4 : 0;
    return (unsigned)(base + tables <= FAT5__GPU_SMEM_DEFAULT ? base + tables : base);
}

// FIRE's part of an attention launch's dynamic shared memory after `base` bytes of the kernel's own
// rows (fat5_attn_pos): base rounded up to 16, the head's MLP rows (16 W bytes), then for dq's
// gradient `groups` [W][3] accumulators and 32 floats (0 groups: no gradient). Total bytes.
static int64_t fat5__gpu_fire_smem(int64_t base, int W, int64_t groups) {
    int64_t b = (base + 15) / 16 * 16 + 16 * (int64_t)W;
    return groups ? b + (3 * groups * W + 32) * 4 : b;
}

static fat5_status fat5__gpu_fire_too_big(fat5_ctx *ctx, const char *op, int W, int64_t need, int64_t optin) {
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                     "%s: FIRE's MLP width %d needs %lld bytes of shared memory, the device allows %lld", op, W,
                     (long long)need, (long long)optin);
}

// Whether attn_fwd runs on tensor cores (attention_tc.cu), and then its shared memory (bytes,
// without the optional table cache); 0: the FMA kernels. Needs bf16 activations, FAT5_ATTN_TC not
// 0, dk a multiple of 8 up to 128, 16-byte aligned rows, a T5 max_distance up to 4096 (the bias
// by distance is rebuilt in every block), and room: BM (128 for dk <= 64, else 64) query rows and
// two K/V buffers of 64 rows, rows of dkp + 8 bf16 (dkp 64 or 128); T5's bias by distance
// (2 max(max_distance, 1) + 1 floats); then fat5_attn_pos's part (FIRE's rows).
static FAT5__UNUSED int64_t fat5__gpu_attn_fwd_tc_smem(const fat5_ctx *ctx, fat5__dptr o, fat5__dptr q, fat5__dptr k,
                                                       fat5__dptr v, int64_t Tq, int dk, int kind, fat5__dptr bias,
                                                       int nb, int max_distance) {
    int scheme = fat5__gpu_attn_scheme(kind);
    int64_t bm = dk <= 64 ? 128 : 64, dkp = dk <= 64 ? 64 : 128, base;
    if (!ctx->gpu || !ctx->gpu->attn_tc || fat5__dev_act_size(ctx) != 2 || dk % 8 || dk > 128 ||
        ((o | q | k | v) & 15) || (Tq + bm - 1) / bm > FAT5__GPU_MAX_BLOCKS)
        return 0;
    if (scheme == 0 && bias && max_distance > 4096) return 0;
    base = (bm + 256) * (dkp + 8) * 2;
    if (scheme == 0 && bias) base += (2 * (int64_t)(max_distance > 0 ? max_distance : 1) + 1) * 4;
    if (scheme == 2) base = fat5__gpu_fire_smem(base, nb, 0);
    return base <= ctx->gpu->smem_optin ? base : 0;
}

// Whether attn_fwd runs on Hopper's kernels (attention_wg.cu: wgmma fed by TMA, sm_90a), and then
// their shared memory (bytes); 0: not (the tensor-core or FMA kernels above take it). Needs the
// sm_90a program and a driver with tensor maps (attn_wg), FAT5_ATTN_TC not 0, bf16 activations,
// head dim 64 or 128, self-attention (cu_q and cu_k the same buffer: the keys are the queries'
// Tq rows, which the tensor maps of k and v span), T5 buckets / no bias or ALiBi without a pattern,
// q, k, v 16-byte aligned (TMA), fewer than 2^31 rows (its coordinates), a T5 max_distance up to
// 4096. Then: 1024 bytes of alignment slack, Q (128 rows) and two stages of K and V (128 keys),
// rows of dk bf16, 40 bytes of barriers, T5's bias by distance (2 max(max_distance, 1) + 1 floats).
static FAT5__UNUSED int64_t fat5__gpu_attn_fwd_wg_smem(const fat5_ctx *ctx, fat5__dptr o, fat5__dptr q, fat5__dptr k,
                                                       fat5__dptr v, fat5__dptr cu_q, fat5__dptr cu_k, int64_t Tq,
                                                       int dk, int kind, fat5__dptr bias, int max_distance) {
    int scheme = fat5__gpu_attn_scheme(kind);
    int64_t base;
    if (!ctx->gpu || !ctx->gpu->attn_wg || !ctx->gpu->attn_tc || fat5__dev_act_size(ctx) != 2 ||
        (dk != 64 && dk != 128) || scheme == 2 || fat5__gpu_attn_pattern(kind) || cu_q != cu_k || !cu_q ||
        ((q | k | v) & 15) || (o & 3) || Tq < 1 || Tq > INT32_MAX || (Tq + 127) / 128 > FAT5__GPU_MAX_BLOCKS)
        return 0;
    if (scheme == 0 && bias && max_distance > 4096) return 0;
    base = 1024 + (int64_t)(dk / 64) * 16384 * (1 + 2 * 2) + 40;
    if (scheme == 0 && bias) base += (2 * (int64_t)(max_distance > 0 ? max_distance : 1) + 1) * 4;
    return base <= ctx->gpu->smem_optin ? base : 0;
}

// Whether attn_bwd_dkv runs on Hopper's kernel (attention_wg_bwd.cu), and then its shared memory
// (bytes); 0: not. The forward's conditions (fat5__gpu_attn_fwd_wg_smem: sm_90a, bf16, head dim 64
// or 128, self-attention, no pattern, no FIRE) on q, k, v and dout, dk and dv 4-byte aligned. Then:
// 1024 bytes of alignment slack, K and V (128 keys) and the stages of Q and dO (64 queries; 4
// stages for head dim 64, 3 for 128), rows of dk bf16, 16 (stages + 1) bytes of barriers, each
// stage's lse and delta (128 floats), T5's bias by distance (2 max(max_distance, 1) + 1 floats).
static FAT5__UNUSED int64_t fat5__gpu_attn_bwd_dkv_wg_smem(const fat5_ctx *ctx, fat5__dptr dk_, fat5__dptr dv,
                                                           fat5__dptr q, fat5__dptr k, fat5__dptr v, fat5__dptr dout,
                                                           fat5__dptr cu_q, fat5__dptr cu_k, int64_t Tk, int dk,
                                                           int kind, fat5__dptr bias, int max_distance) {
    int scheme = fat5__gpu_attn_scheme(kind);
    int64_t stages = dk == 64 ? 4 : 3, base;
    if (!ctx->gpu || !ctx->gpu->attn_wg || !ctx->gpu->attn_tc || fat5__dev_act_size(ctx) != 2 ||
        (dk != 64 && dk != 128) || scheme == 2 || fat5__gpu_attn_pattern(kind) || cu_q != cu_k || !cu_q ||
        ((q | k | v | dout) & 15) || ((dk_ | dv) & 3) || Tk < 1 || Tk > INT32_MAX ||
        (Tk + 127) / 128 > FAT5__GPU_MAX_BLOCKS)
        return 0;
    if (scheme == 0 && bias && max_distance > 4096) return 0;
    base = 1024 + (int64_t)(dk / 64) * 8192 * (2 * 2 + 2 * stages) + 16 * (stages + 1) + stages * 128 * 4;
    if (scheme == 0 && bias) base += (2 * (int64_t)(max_distance > 0 ? max_distance : 1) + 1) * 4;
    return base <= ctx->gpu->smem_optin ? base : 0;
}

// A TMA tensor map of rows [0, T) of a [T][H dk] bf16 activation, read in boxes of box_rows rows x
// 64 columns with 128-byte swizzle (the layout wgmma reads), rows past T filled with zeros.
static FAT5__UNUSED fat5_status fat5__gpu_attn_tmap(fat5_ctx *ctx, fat5__CUtensorMap *map, fat5__dptr rows,
                                                    int64_t T, int H, int dk, unsigned box_rows) {
    unsigned long long dims[2], strides[1];
    unsigned box[2], es[2] = {1, 1};
    fat5__CUresult r;
    dims[0] = (unsigned long long)H * (unsigned long long)dk;
    dims[1] = (unsigned long long)T;
    strides[0] = dims[0] * 2;
    box[0] = 64, box[1] = box_rows;
    r = ctx->gpu->tmap_encode(map, FAT5__CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)(uintptr_t)rows, dims, strides,
                              box, es, FAT5__CU_TENSOR_MAP_INTERLEAVE_NONE, FAT5__CU_TENSOR_MAP_SWIZZLE_128B,
                              FAT5__CU_TENSOR_MAP_L2_PROMOTION_L2_128B, FAT5__CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == FAT5__CUDA_SUCCESS ? FAT5_OK : fat5__dev_check(ctx, r, "cuTensorMapEncodeTiled (attention)");
}

// Whether attn_bwd_dq (dkv 0) or attn_bwd_dkv (dkv 1) runs on tensor cores (attention_tc_bwd.cu),
// and then its shared memory (bytes, without the optional table cache); 0: the FMA kernels. The
// forward's conditions (fat5__gpu_attn_fwd_tc_smem) on every row pointer; dq not with FIRE (its
// parameter gradient stays on the FMA kernel), nor with a T5 bias gradient of more than 512
// buckets. Both: six tiles of 64 rows of dkp + 8 bf16 (dkp 64
// or 128), T5's bias by distance (2 M + 1 floats, M = max(max_distance, 1)); dq with a T5 bias
// gradient, the 4 warps' gradients by distance and their buckets (5 (2 M + 1) floats, twice in the
// pattern kernels);
// dkv the tiles' lse and delta (256 floats) and 8 ints; then fat5_attn_pos's part (FIRE's rows).
static FAT5__UNUSED int64_t fat5__gpu_attn_bwd_tc_smem(const fat5_ctx *ctx, int dkv, fat5__dptr a, fat5__dptr b,
                                                       fat5__dptr q, fat5__dptr k, fat5__dptr v, fat5__dptr dout,
                                                       int64_t T, int dk, int kind, fat5__dptr bias, int nb,
                                                       int max_distance, int dbias) {
    int scheme = fat5__gpu_attn_scheme(kind);
    int64_t dkp = dk <= 64 ? 64 : 128, M = max_distance > 0 ? max_distance : 1, base;
    if (!ctx->gpu || !ctx->gpu->attn_tc || fat5__dev_act_size(ctx) != 2 || dk % 8 || dk > 128 ||
        ((a | b | q | k | v | dout) & 15) || (T + 63) / 64 > FAT5__GPU_MAX_BLOCKS || (!dkv && scheme == 2))
        return 0;
    if (scheme == 0 && bias && max_distance > 4096) return 0;
    if (!dkv && scheme == 0 && bias && dbias && nb > 512) return 0;  // the block's bucket sums in its tiles' space
    base = 6 * 64 * (dkp + 8) * 2;
    if (scheme == 0 && bias) base += (2 * M + 1) * 4;
    if (dkv) base += (256 + 8) * 4;
    if (!dkv && scheme == 0 && bias && dbias) base += 5 * (2 * M + 1) * 4 * (fat5__gpu_attn_pattern(kind) ? 2 : 1);
    if (scheme == 2) base = fat5__gpu_fire_smem(base, nb, 0);
    return base <= ctx->gpu->smem_optin ? base : 0;
}

// The attention kernels take the dropout of the probabilities as their last argument, a
// fat5__drop by value (kernels/00_common.cu's fat5_dropp: the same 24 bytes)
typedef char fat5__attn_drop_layout[sizeof(fat5__drop) == 24 && offsetof(fat5__drop, thresh) == 16 &&
                                            offsetof(fat5__drop, scale) == 20 ? 1 : -1];

// With dropout the tensor-core kernels are their _drop instances, which exist for T5 or no bias
// and ALiBi without a pattern; a pattern or FIRE with dropout takes the FMA kernels. 1: the tensor
// cores may take the call.
static int fat5__gpu_attn_tc_drop_ok(int kind, fat5__drop drop) {
    return !drop.thresh || (!fat5__gpu_attn_pattern(kind) && fat5__gpu_attn_scheme(kind) != 2);
}
// The tensor-core kernel: family `plain` (the T5 kernel of the head-dim family, e.g.
// FAT5__K_attn_fwd_tc64) indexed by scheme and pattern as the kernel list orders it, or under
// dropout the family's _drop pair (`dropk`: its T5 kernel) indexed by scheme
static int fat5__gpu_attn_tc_kernel(int plain, int dropk, int kind, fat5__drop drop) {
    return drop.thresh ? dropk + fat5__gpu_attn_scheme(kind)
                       : plain + 2 * fat5__gpu_attn_scheme(kind) + (fat5__gpu_attn_pattern(kind) ? 1 : 0);
}

// o = softmax(q k^T + bias) v per sequence and head (T5: no 1/sqrt(dk)); lse [Tq, H] saved.
// drop: dropout of the probabilities (thresh 0: none), o = (P m) v with m fat5__cpu_attn_fwd's
// multipliers; lse stays the softmax's.
// T5: bias [nb, H] or 0 (cross), lut [max_distance] from fat5__rel_bucket for this kind; ALiBi and
// FIRE: the bias of each score computed in the kernel (fat5__gpu_attn_check). A pattern in the
// kind (window, block-global prefix of g tokens, or transient-global keys in k, v rows cu_g[s] ..
// cu_g[s + 1] with their table after T5's in bias unless GSHARED) takes the _pat kernels, the
// same launch; each query visits its window, the prefix and its sequence's globals only.
static FAT5__UNUSED fat5_status fat5__gpu_attn_fwd(fat5_ctx *ctx, fat5__dptr o, fat5__dptr lse, fat5__dptr q,
                                                   fat5__dptr k, fat5__dptr v, fat5__dptr bias,
                                                   fat5__dptr lut, fat5__dptr cu_q, fat5__dptr cu_k,
                                                   fat5__dptr q_seq, int64_t Tq, int H, int dk, int kind,
                                                   int nb, int max_distance, int g, fat5__dptr cu_g,
                                                   fat5__drop drop) {
    long long Tq_ = Tq;
    void *args[] = {&o,    &lse,   &q,   &k, &v,  &bias, &lut,          &cu_q,
                    &cu_k, &q_seq, &Tq_, &H, &dk, &kind, &nb,  &max_distance, &g, &cu_g, &drop};
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_fwd, kind);
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT, base, need;
    fat5_status st =
        fat5__gpu_attn_check(ctx, "fat5__gpu_attn_fwd", Tq, H, dk, kind, bias, lut, nb, max_distance, g, cu_g);
    if (st || Tq == 0) return st;
    if ((need = fat5__gpu_attn_fwd_wg_smem(ctx, o, q, k, v, cu_q, cu_k, Tq, dk, kind, bias, max_distance)) > 0) {
        // q, k, v as 2D tensors [Tq][H dk] of bf16, read in boxes of 128 rows x 64 columns
        unsigned char raw[4 * sizeof(fat5__CUtensorMap)];  // three maps, 64-byte aligned (as CUtensorMap)
        fat5__CUtensorMap *tm = (fat5__CUtensorMap *)(void *)(raw + (64 - (uintptr_t)raw % 64) % 64);
        void *wargs[16];
        if ((st = fat5__gpu_attn_tmap(ctx, &tm[0], q, Tq, H, dk, 128)) != FAT5_OK ||
            (st = fat5__gpu_attn_tmap(ctx, &tm[1], k, Tq, H, dk, 128)) != FAT5_OK ||
            (st = fat5__gpu_attn_tmap(ctx, &tm[2], v, Tq, H, dk, 128)) != FAT5_OK)
            return st;
        wargs[0] = &o, wargs[1] = &lse, wargs[2] = &tm[0], wargs[3] = &tm[1], wargs[4] = &tm[2], wargs[5] = &bias;
        wargs[6] = &lut, wargs[7] = &cu_q, wargs[8] = &cu_k, wargs[9] = &q_seq, wargs[10] = &Tq_, wargs[11] = &H;
        wargs[12] = &kind, wargs[13] = &nb, wargs[14] = &max_distance, wargs[15] = &drop;
        return fat5__dev_launch(ctx, (dk == 64 ? FAT5__K_attn_fwd_wg64 : FAT5__K_attn_fwd_wg128) + scheme,
                                (unsigned)((Tq + 127) / 128), (unsigned)H, 1, 384, 1, 1, (unsigned)need, wargs);
    }
    if (fat5__gpu_attn_tc_drop_ok(kind, drop) &&
        (need = fat5__gpu_attn_fwd_tc_smem(ctx, o, q, k, v, Tq, dk, kind, bias, nb, max_distance)) > 0) {
        int tk = dk <= 64 ? fat5__gpu_attn_tc_kernel(FAT5__K_attn_fwd_tc64, FAT5__K_attn_fwd_tc64_drop, kind, drop)
                          : fat5__gpu_attn_tc_kernel(FAT5__K_attn_fwd_tc128, FAT5__K_attn_fwd_tc128_drop, kind, drop);
        int64_t bm = dk <= 64 ? 128 : 64, tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0;
        return fat5__dev_launch(ctx, tk, (unsigned)((Tq + bm - 1) / bm), (unsigned)H, 1, 128, 1, 1,
                                (unsigned)(need + tab <= optin ? need + tab : need), args);
    }
    if (dk <= 128) {  // tiled: 64 queries x 256 threads a block; Qt [dkp][68], P [64][68], K, V [dkp][65]
        int64_t dkp = dk <= 16 ? 16 : dk <= 32 ? 32 : dk <= 64 ? 64 : 128;
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0, need;
        base = (dkp * (68 + 2 * 65) + 64 * 68) * 4;
        need = scheme == 2 ? fat5__gpu_fire_smem(base, nb, 0) : base;
        if (need <= optin)
            return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tq, 64), (unsigned)H, 1, 256, 1, 1,
                                    (unsigned)(need + tab <= optin ? need + tab : need), args);
    }
    base = (int64_t)FAT5__GPU_ATTN_WARPS * dk * 4;
    if (scheme == 2 && fat5__gpu_fire_smem(base, nb, 0) > optin)
        return fat5__gpu_fire_too_big(ctx, "fat5__gpu_attn_fwd", nb, fat5__gpu_fire_smem(base, nb, 0), optin);
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tq, FAT5__GPU_ATTN_WARPS), (unsigned)H, 1,
                            32 * FAT5__GPU_ATTN_WARPS, 1, 1,
                            scheme == 2   ? (unsigned)fat5__gpu_fire_smem(base, nb, 0)
                            : scheme == 1 ? (unsigned)base
                                          : fat5__gpu_attn_smem(1, dk, bias, nb, max_distance, 0),
                            args);
}

// delta[t*H+h] = sum_d dout o over head h's columns; one warp per (token, head), 8 warps a block
static FAT5__UNUSED fat5_status fat5__gpu_attn_bwd_delta(fat5_ctx *ctx, fat5__dptr delta, fat5__dptr o,
                                                         fat5__dptr dout, int64_t Tq, int H, int dk) {
    long long Tq_ = Tq;
    void *args[] = {&delta, &o, &dout, &Tq_, &H, &dk};
    if (Tq < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_attn_bwd_delta", "T", Tq);
    if (H < 1 || dk < 1 || Tq > INT64_MAX / H)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_attn_bwd_delta: H = %d, dk = %d", H, dk);
    if (Tq == 0) return FAT5_OK;
    {   // one thread per 16-byte group when a row is a power of two of them up to 32 (as the kernel's
        // fat5_attn_delta_groups; unaligned pointers take its warp-per-row loop, grid-stride), else a
        // warp per row
        int e = 16 / (int)fat5__dev_act_size(ctx), G = dk / e;
        int64_t per_block = dk % e == 0 && G <= 32 && (G & (G - 1)) == 0 ? 256 / G : 8;
        return fat5__dev_launch(ctx, FAT5__K_attn_bwd_delta, fat5__gpu_blocks(Tq * H, per_block), 1, 1, 256, 1, 1,
                                0, args);
    }
}

// FIRE's gradient block g (FAT5__FIRE_NUMEL(H, W) floats) += per-head shares [H, FAT5__FIRE_SHARES(W)],
// the shared parts summed in head order (in double, as fat5__cpu_fire_reduce: the same bits); one
// thread per element of g, 256 a block
static FAT5__UNUSED fat5_status fat5__gpu_fire_reduce(fat5_ctx *ctx, fat5__dptr g, fat5__dptr shares, int H, int W) {
    void *args[] = {&g, &shares, &H, &W};
    if (H < 1 || W < 1 || (int64_t)H * FAT5__FIRE_SHARES(W) > INT_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_fire_reduce: %d heads, MLP width %d", H, W);
    if (!g || !shares) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_fire_reduce: a NULL buffer");
    return fat5__dev_launch(ctx, FAT5__K_fire_reduce, fat5__gpu_blocks(FAT5__FIRE_NUMEL(H, W), 256), 1, 1, 256, 1, 1,
                            0, args);
}

// dq (written) and the bias gradient, deterministic (same inputs, same bits; no atomics); delta from
// fat5__gpu_attn_bwd_delta, lse from the forward.
// T5: dbias [nb, H] += ds per (bucket, head) (dbias 0: not wanted; it needs a bias). scratch holds
// at least FAT5__GPU_DBIAS_BLOCKS * nb * H floats: the grid (x clamped to FAT5__GPU_DBIAS_BLOCKS)
// writes one row of per-bucket partial sums per block there, then fat5__gpu_colsum_f32 adds the
// rows into dbias in a fixed order. Transient-global keys with their own table: dbias is
// [2, nb, H] (T5's gradient, then the global table's) and the rows are 2 nb H wide (scratch
// FAT5__GPU_DBIAS_BLOCKS * 2 nb H floats); with GSHARED the global keys add to T5's buckets.
// FIRE: dbias is FIRE's gradient block (FAT5__FIRE_NUMEL(H, W) floats, +=). scratch holds
// (FAT5__GPU_DBIAS_BLOCKS + 1) H FAT5__FIRE_SHARES(W) floats: block b writes its per-head shares
// to row b ([H][3 W + 3], fat5__fire_grad's layout), fat5__gpu_colsum_f32 sums the rows in a fixed
// order into the last row (zeroed first), and fat5__gpu_fire_reduce adds those [H, 3 W + 3] shares
// into dbias (in head order).
// ALiBi has no parameters: dbias is ignored (as on the CPU).
static FAT5__UNUSED fat5_status fat5__gpu_attn_bwd_dq(fat5_ctx *ctx, fat5__dptr dq, fat5__dptr dbias,
                                                      fat5__dptr dout, fat5__dptr lse, fat5__dptr delta,
                                                      fat5__dptr q, fat5__dptr k, fat5__dptr v,
                                                      fat5__dptr bias, fat5__dptr lut, fat5__dptr cu_q,
                                                      fat5__dptr cu_k, fat5__dptr q_seq, int64_t Tq, int H,
                                                      int dk, int kind, int nb, int max_distance, int g,
                                                      fat5__dptr cu_g, fat5__dptr scratch, fat5__drop drop) {
    static const char *const op = "fat5__gpu_attn_bwd_dq";
    long long Tq_ = Tq;
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_bwd_dq, kind);
    fat5__dptr dbias_ = scheme == 1 ? 0 : dbias, part = dbias_ ? scratch : 0;
    void *args[] = {&dq,   &part, &dout,  &lse, &delta, &q,  &k,    &v,  &bias,        &lut,
                    &cu_q, &cu_k, &q_seq, &Tq_, &H,     &dk, &kind, &nb, &max_distance, &g, &cu_g, &drop};
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT;
    // buckets of T5's gradient rows: nb, or 2 nb with transient-global keys and their own table
    int64_t nbt = (int64_t)nb * ((kind & FAT5__ATTN_TGLOBAL) && !(kind & FAT5__ATTN_GSHARED) ? 2 : 1);
    unsigned gx = 0, smem;
    int kernel_done = 0;
    int64_t need;
    fat5_status st = fat5__gpu_attn_check(ctx, op, Tq, H, dk, kind, bias, lut, nb, max_distance, g, cu_g);
    if (st || Tq == 0) return st;
    if (dbias_ && !bias) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a bias gradient without a bias", op);
    if (dbias_ && !scratch) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a bias gradient without scratch", op);
    if (fat5__gpu_attn_tc_drop_ok(kind, drop) &&
        (need = fat5__gpu_attn_bwd_tc_smem(ctx, 0, dq, 0, q, k, v, dout, Tq, dk, kind, bias, nb, max_distance,
                                           dbias_ != 0)) > 0) {
        // tensor cores: 64 queries x 128 threads a block, grid-stride over the tiles with a gradient
        int tk = dk <= 64
                     ? fat5__gpu_attn_tc_kernel(FAT5__K_attn_bwd_dq_tc64, FAT5__K_attn_bwd_dq_tc64_drop, kind, drop)
                     : fat5__gpu_attn_tc_kernel(FAT5__K_attn_bwd_dq_tc128, FAT5__K_attn_bwd_dq_tc128_drop, kind, drop);
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0;
        gx = fat5__gpu_blocks(Tq, 64);
        if (dbias_) {
            // a block sums its bias gradient once, at its end: half as many blocks as tiles, each
            // taking a tile and its mirror (balanced under a causal mask)
            gx = (gx + 1) / 2;
            if (gx > FAT5__GPU_DBIAS_BLOCKS) gx = FAT5__GPU_DBIAS_BLOCKS;
        }
        st = fat5__dev_launch(ctx, tk, gx, (unsigned)H, 1, 128, 1, 1,
                              (unsigned)(need + tab <= optin ? need + tab : need), args);
        kernel_done = 1;
    }
    if (!kernel_done && dk <= 64) {  // tiled: 64 queries x 256 threads; Q, dout [dkp][68], ds [64][68], K, V [dkp][65]
        int64_t dkp = dk <= 16 ? 16 : dk <= 32 ? 32 : 64;
        int64_t base = (dkp * (2 * 68 + 2 * 65) + 64 * 68) * 4, tab = 0;
        if (scheme == 2) {  // FIRE: the MLP rows; with the gradient, a u tile [64][68] and G = 256 / W groups
            int64_t groups = dbias_ ? (nb < 256 ? 256 / nb : 1) : 0;
            need = fat5__gpu_fire_smem(base + (dbias_ ? 64 * 68 * 4 : 0), nb, groups);
        } else {
            tab = scheme == 0 && bias ? ((int64_t)nb + max_distance + (dbias_ ? 8 * nbt : 0)) * 4 : 0;
            // T5 with dbias: the tables and the 8 warps' accumulators must be in shared memory
            need = scheme == 0 && dbias_ ? base + tab : base;
            if (need == base + tab) tab = 0;
        }
        if (need <= optin) {
            gx = fat5__gpu_blocks(Tq, 64);
            if (dbias_ && gx > FAT5__GPU_DBIAS_BLOCKS) gx = FAT5__GPU_DBIAS_BLOCKS;
            st = fat5__dev_launch(ctx, kernel, gx, (unsigned)H, 1, 256, 1, 1,
                                  (unsigned)(need + tab <= optin ? need + tab : need), args);
            kernel_done = 1;
        }
    }
    if (!kernel_done) {
        int64_t base = (int64_t)2 * FAT5__GPU_ATTN_WARPS * dk * 4;
        gx = fat5__gpu_blocks(Tq, FAT5__GPU_ATTN_WARPS);
        if (dbias_ && gx > FAT5__GPU_DBIAS_BLOCKS) gx = FAT5__GPU_DBIAS_BLOCKS;
        if (scheme == 2) {
            need = fat5__gpu_fire_smem(base, nb, dbias_ ? FAT5__GPU_ATTN_WARPS : 0);
            if (need > optin) return fat5__gpu_fire_too_big(ctx, op, nb, need, optin);
            smem = (unsigned)need;
        } else if (scheme == 1) {
            smem = (unsigned)base;
        } else if (dbias_) {
            need = base + ((int64_t)nb + max_distance + (int64_t)FAT5__GPU_ATTN_WARPS * nbt) * 4;
            if (need > optin)
                return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                                 "%s: %d buckets and max distance %d need %lld bytes of shared memory for the bias "
                                 "gradient, the device allows %lld",
                                 op, nb, max_distance, (long long)need, (long long)optin);
            smem = (unsigned)need;
        } else {
            smem = fat5__gpu_attn_smem(2, dk, bias, nb, max_distance, 0);
        }
        st = fat5__dev_launch(ctx, kernel, gx, (unsigned)H, 1, 32 * FAT5__GPU_ATTN_WARPS, 1, 1, smem, args);
    }
    if (st || !dbias_) return st;
    if (scheme == 2) {  // the blocks' rows summed into the last row, then the heads into dbias
        int64_t row = (int64_t)H * FAT5__FIRE_SHARES(nb);
        fat5__dptr sum = scratch + (fat5__dptr)((int64_t)FAT5__GPU_DBIAS_BLOCKS * row * 4);
        if (row > INT_MAX) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: FIRE's shares of %d heads", op, H);
        if ((st = fat5__gpu_fill_f32(ctx, sum, 0.0f, row)) != FAT5_OK ||
            (st = fat5__gpu_colsum_f32(ctx, sum, scratch, (int)gx, (int)row)) != FAT5_OK)
            return st;
        return fat5__gpu_fire_reduce(ctx, dbias_, sum, H, nb);
    }
    if (nbt * H > INT_MAX) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %lld buckets of %d heads", op,
                                            (long long)nbt, H);
    return fat5__gpu_colsum_f32(ctx, dbias_, scratch, (int)gx, (int)(nbt * H));
}

// dk, dv (written): one warp per (key, head) or a tile of 64 keys, over the queries that see the
// key; k_seq[j] is the sequence of key row j. With transient-global keys, Tk counts their rows too
// (k_seq maps them to their sequence; row j of s is a global iff cu_g[s] <= j < cu_g[s + 1]): a
// global's dk, dv sum over every query of its sequence.
static FAT5__UNUSED fat5_status fat5__gpu_attn_bwd_dkv(fat5_ctx *ctx, fat5__dptr dk_, fat5__dptr dv,
                                                       fat5__dptr dout, fat5__dptr lse, fat5__dptr delta,
                                                       fat5__dptr q, fat5__dptr k, fat5__dptr v,
                                                       fat5__dptr bias, fat5__dptr lut, fat5__dptr cu_q,
                                                       fat5__dptr cu_k, fat5__dptr k_seq, int64_t Tk, int H,
                                                       int dk, int kind, int nb, int max_distance, int g,
                                                       fat5__dptr cu_g, fat5__drop drop) {
    long long Tk_ = Tk;
    void *args[] = {&dk_,  &dv,   &dout,  &lse, &delta, &q,  &k,    &v,  &bias,        &lut,
                    &cu_q, &cu_k, &k_seq, &Tk_, &H,     &dk, &kind, &nb, &max_distance, &g, &cu_g, &drop};
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_bwd_dkv, kind);
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT, base;
    fat5_status st = fat5__gpu_attn_check(ctx, "fat5__gpu_attn_bwd_dkv", Tk, H, dk, kind, bias, lut, nb,
                                          max_distance, g, cu_g);
    if (st || Tk == 0) return st;
    if ((base = fat5__gpu_attn_bwd_dkv_wg_smem(ctx, dk_, dv, q, k, v, dout, cu_q, cu_k, Tk, dk, kind, bias,
                                               max_distance)) > 0) {
        // Hopper: 128 keys x 256 threads a block (2 warpgroups); q and dout read in boxes of 64
        // rows, k and v of 128
        unsigned char raw[5 * sizeof(fat5__CUtensorMap)];  // four maps, 64-byte aligned (as CUtensorMap)
        fat5__CUtensorMap *tm = (fat5__CUtensorMap *)(void *)(raw + (64 - (uintptr_t)raw % 64) % 64);
        void *wargs[19];
        if ((st = fat5__gpu_attn_tmap(ctx, &tm[0], q, Tk, H, dk, 64)) != FAT5_OK ||
            (st = fat5__gpu_attn_tmap(ctx, &tm[1], dout, Tk, H, dk, 64)) != FAT5_OK ||
            (st = fat5__gpu_attn_tmap(ctx, &tm[2], k, Tk, H, dk, 128)) != FAT5_OK ||
            (st = fat5__gpu_attn_tmap(ctx, &tm[3], v, Tk, H, dk, 128)) != FAT5_OK)
            return st;
        wargs[0] = &dk_, wargs[1] = &dv, wargs[2] = &tm[0], wargs[3] = &tm[1], wargs[4] = &tm[2], wargs[5] = &tm[3];
        wargs[6] = &lse, wargs[7] = &delta, wargs[8] = &bias, wargs[9] = &lut, wargs[10] = &cu_q, wargs[11] = &cu_k;
        wargs[12] = &k_seq, wargs[13] = &Tk_, wargs[14] = &H, wargs[15] = &kind, wargs[16] = &nb;
        wargs[17] = &max_distance, wargs[18] = &drop;
        return fat5__dev_launch(ctx, (dk == 64 ? FAT5__K_attn_bwd_dkv_wg64 : FAT5__K_attn_bwd_dkv_wg128) + scheme,
                                (unsigned)((Tk + 127) / 128), (unsigned)H, 1, 256, 1, 1, (unsigned)base, wargs);
    }
    if (fat5__gpu_attn_tc_drop_ok(kind, drop) &&
        (base = fat5__gpu_attn_bwd_tc_smem(ctx, 1, dk_, dv, q, k, v, dout, Tk, dk, kind, bias, nb, max_distance,
                                           0)) > 0) {
        // tensor cores: 64 keys x 128 threads a block
        int tk = dk <= 64
                     ? fat5__gpu_attn_tc_kernel(FAT5__K_attn_bwd_dkv_tc64, FAT5__K_attn_bwd_dkv_tc64_drop, kind, drop)
                     : fat5__gpu_attn_tc_kernel(FAT5__K_attn_bwd_dkv_tc128, FAT5__K_attn_bwd_dkv_tc128_drop, kind,
                                                drop);
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0;
        return fat5__dev_launch(ctx, tk, fat5__gpu_blocks(Tk, 64), (unsigned)H, 1, 128, 1, 1,
                                (unsigned)(base + tab <= optin ? base + tab : base), args);
    }
    if (dk <= 64) {  // tiled: 64 keys x 256 threads; K, V [dkp][68], p, ds [64][68], Q, dout [dkp][65]
        int64_t dkp = dk <= 16 ? 16 : dk <= 32 ? 32 : 64;
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0, need;
        base = (dkp * (2 * 68 + 2 * 65) + 128 * 68) * 4;
        need = scheme == 2 ? fat5__gpu_fire_smem(base, nb, 0) : base;
        if (need <= optin)
            return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tk, 64), (unsigned)H, 1, 256, 1, 1,
                                    (unsigned)(need + tab <= optin ? need + tab : need), args);
    }
    base = (int64_t)2 * FAT5__GPU_ATTN_WARPS * dk * 4;
    if (scheme == 2 && fat5__gpu_fire_smem(base, nb, 0) > optin)
        return fat5__gpu_fire_too_big(ctx, "fat5__gpu_attn_bwd_dkv", nb, fat5__gpu_fire_smem(base, nb, 0), optin);
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tk, FAT5__GPU_ATTN_WARPS), (unsigned)H, 1,
                            32 * FAT5__GPU_ATTN_WARPS, 1, 1,
                            scheme == 2   ? (unsigned)fat5__gpu_fire_smem(base, nb, 0)
                            : scheme == 1 ? (unsigned)base
                                          : fat5__gpu_attn_smem(2, dk, bias, nb, max_distance, 0),
                            args);
}

// ----- xent.cu: one block of 256 threads per row over the vocabulary -----

// ---- decoding (kernels/decode.cu) ----
// The decode position pos and the cross lengths kv_len are device memory that only the kernels
// read: nothing here reads device data, synchronises, or allocates, and every grid depends on host
// sizes alone, so these launches can be captured into a CUDA graph and replayed as pos advances.

// the split count of fat5__gpu_attn_decode for a key count bounded by max_keys (1..32)
static int fat5__gpu_decode_splits(int max_keys) {
    int64_t s = ((int64_t)max_keys + FAT5__DECODE_SPLIT_KEYS - 1) / FAT5__DECODE_SPLIT_KEYS;
    return s < 1 ? 1 : s > FAT5__DECODE_MAX_SPLITS ? FAT5__DECODE_MAX_SPLITS : (int)s;
}

// o[i] = softmax_j(q_i . k_j + bias) v_j per head against entry i's cache row (see
// fat5__cpu_attn_decode); the causal kinds may carry ALiBi or FIRE (never asymmetric ALiBi), whose
// bias of key j is that of a query at the row's position pos[rows[i]]. Flash-decoding: the keys of each (entry, head) are cut into S =
// ceil(max_keys / FAT5__DECODE_SPLIT_KEYS) splits (at most 32), one warp each (phase 0, grid
// (ceil(S / W), H, n clamped to 65535), W = min(S, 4) warps a block); with S > 1 each warp writes its
// partial (max, sum, acc[dk]) to scratch and phase 1 (one warp per (entry, head), 4 warps a block)
// combines the partials in split order: deterministic, the same bits every run. Where only one split
// has keys at run time, phase 0 writes o directly. Head dims of 8 or 16 16-byte vectors (bf16 64 and
// 128, fp32 32 and 64) with 16-byte aligned caches and T5 buckets, no bias or ALiBi take phase 2
// instead: one launch, a block per (entry, head) of min(S, 16) warps (one split each), the partials
// merged in shared memory in the same split order; no scratch.
static FAT5__UNUSED fat5_status fat5__gpu_attn_decode(fat5_ctx *ctx, fat5__dptr o, fat5__dptr q, fat5__dptr k,
                                                      fat5__dptr v, fat5__dptr bias, fat5__dptr lut, fat5__dptr rows,
                                                      fat5__dptr kv_off, fat5__dptr kv_len, fat5__dptr pos, int64_t n,
                                                      int H, int dk, int kind, int nb, int max_distance, int max_keys,
                                                      fat5__dptr scratch) {
    static const char *const op = "fat5__gpu_attn_decode";
    long long n_ = n;
    int splits = fat5__gpu_decode_splits(max_keys), phase0 = 0, phase1 = 1;
    int warps = splits < 4 ? splits : 4, mask = kind & FAT5__ATTN_MASK, vec_e = 16 / (int)fat5__dev_act_size(ctx);
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_decode, kind);
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT;
    int64_t smem = scheme == 2 ? fat5__gpu_fire_smem((int64_t)warps * dk * 4, nb, 0) : (int64_t)warps * dk * 4;
    fat5__dptr bias_ = mask == FAT5__ATTN_CAUSAL ? bias : 0;
    void *a0[] = {&o,      &scratch, &q,  &k,  &v,    &bias_, &lut,          &rows,   &kv_off, &kv_len,
                  &pos,    &n_,      &H,  &dk, &kind, &nb,    &max_distance, &splits, &phase0};
    void *a1[] = {&o,      &scratch, &q,  &k,  &v,    &bias_, &lut,          &rows,   &kv_off, &kv_len,
                  &pos,    &n_,      &H,  &dk, &kind, &nb,    &max_distance, &splits, &phase1};
    fat5_status st = fat5__gpu_attn_check(ctx, op, n, H, dk, kind, bias_, lut, nb, max_distance, 0, 0);
    if (st || n == 0) return st;
    if (fat5__gpu_attn_pattern(kind))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: decoding takes no attention pattern", op, kind);
    if (mask == FAT5__ATTN_BIDIR || (kind & FAT5__ATTN_ALIBI_ASYM))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d (cross or causal only, never asymmetric ALiBi)", op,
                         kind);
    if (scheme == 2 && smem > optin) return fat5__gpu_fire_too_big(ctx, op, nb, smem, optin);
    if (n > INT64_MAX / ((int64_t)H * FAT5__DECODE_MAX_SPLITS * (dk + 2)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %lld entries", op, (long long)n);
    if (!o || !q || !k || !v || !rows || !kv_off || !pos || (kind == FAT5__ATTN_CROSS && !kv_len))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a NULL buffer", op);
    if (scheme != 2 && (dk == 8 * vec_e || dk == 16 * vec_e) && !((k | v) & 15)) {
        // one launch: a block per (entry, head), a warp per split (at most 16), merged in shared memory
        int bs = splits < FAT5__DECODE_BLOCK_SPLITS ? splits : FAT5__DECODE_BLOCK_SPLITS, phase2 = 2;
        int lim = fat5__dev_max_threads(ctx, kernel) / 32;   // the kernel's registers may allow fewer
        if (lim >= 1 && bs > lim) bs = lim;
        void *a2[] = {&o,   &scratch, &q,  &k,  &v,    &bias_, &lut,          &rows, &kv_off, &kv_len,
                      &pos, &n_,      &H,  &dk, &kind, &nb,    &max_distance, &bs,   &phase2};
        return fat5__dev_launch(ctx, kernel, 1, (unsigned)H, (unsigned)(n < 65535 ? n : 65535), 32 * (unsigned)bs, 1, 1,
                                (unsigned)((int64_t)bs * (2 * dk + 2) * 4), a2);
    }
    if (splits > 1 && !scratch)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %d splits for max_keys = %d need scratch", op, splits,
                         max_keys);
    st = fat5__dev_launch(ctx, kernel, (unsigned)((splits + warps - 1) / warps), (unsigned)H,
                          (unsigned)(n < 65535 ? n : 65535), 32 * (unsigned)warps, 1, 1, (unsigned)smem, a0);
    if (st || splits == 1) return st;
    return fat5__dev_launch(ctx, FAT5__K_attn_decode, fat5__gpu_blocks(n * H, 4), 1, 1, 128, 1, 1, 0, a1);
}

// kc, vc row kv_off[rows[i]] + pos[rows[i]] = k, v row i (rows of I activation elements); 256 threads a
// block over the n I elements
static FAT5__UNUSED fat5_status fat5__gpu_cache_write(fat5_ctx *ctx, fat5__dptr kc, fat5__dptr vc, fat5__dptr k,
                                                      fat5__dptr v, fat5__dptr rows, fat5__dptr kv_off, fat5__dptr pos,
                                                      int64_t n, int I) {
    long long n_ = n;
    void *args[] = {&kc, &vc, &k, &v, &rows, &kv_off, &pos, &n_, &I};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_cache_write", "n", n);
    if (I < 1 || n > INT64_MAX / I)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_cache_write: rows of %d elements", I);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_cache_write, fat5__gpu_blocks(n * I, 256), 1, 1, 256, 1, 1, 0, args);
}

// rmsnorm, then the products with up to three weights (or the gated activation), optionally
// writing the second and third outputs into cache rows: see fat5__cpu_norm_mm. One launch of
// fat5_norm_mm: blocks of FAT5__GPU_MM_WARPS warps, two outputs a warp (one when gated), grid x over
// the outputs, y over groups of FAT5__MM_ROWS rows (clamped to 65535; the kernel strides).
static FAT5__UNUSED fat5_status fat5__gpu_norm_mm(fat5_ctx *ctx, fat5__dptr y0, fat5__dptr y1, fat5__dptr y2,
                                                  fat5__dptr x, fat5__dptr g, fat5__dptr w0, fat5__dptr w1,
                                                  fat5__dptr w2, int64_t T, int N, int K, float eps, int act,
                                                  fat5__dptr rows, fat5__dptr kv_off, fat5__dptr pos) {
    long long T_ = T;
    int vec = K % (fat5__dev_act_size(ctx) == 2 ? 8 : 4) == 0 && !((w0 | w1 | w2 | x | g) & 15);
    int64_t outs = act >= 0 ? N : (int64_t)N * (w2 ? 3 : w1 ? 2 : 1), groups = (T + FAT5__MM_ROWS - 1) / FAT5__MM_ROWS;
    void *args[] = {&y0, &y1, &y2, &x, &g, &w0, &w1, &w2, &T_, &N, &K, &eps, &act, &rows, &kv_off, &pos, &vec};
    fat5_status st = fat5__norm_mm_check(ctx, "fat5__gpu_norm_mm", y0, y1, y2, x, g, w0, w1, w2, T, N, K, act, rows,
                                         kv_off, pos);
    if (st || T == 0) return st;
    return fat5__dev_launch(ctx, FAT5__K_norm_mm, fat5__gpu_blocks(outs, (act >= 0 ? 1 : 2) * FAT5__GPU_MM_WARPS),
                            (unsigned)(groups < 65535 ? groups : 65535), 1, 32 * FAT5__GPU_MM_WARPS, 1, 1, 0, args);
}

// dst rows r = rows[i] (i < n), positions [0, pos[r]) = src rows idx[r]. pos is not known here: the
// grid is (ceil(I / 256) * 4 blocks clamped to 64, n rows clamped to 65535) of 256 threads, and the
// kernel strides over whatever pos[r] I elements each row has.
static FAT5__UNUSED fat5_status fat5__gpu_cache_gather(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src, fat5__dptr idx,
                                                       fat5__dptr rows, fat5__dptr kv_off, fat5__dptr pos, int64_t n,
                                                       int I) {
    long long n_ = n;
    void *args[] = {&dst, &src, &idx, &rows, &kv_off, &pos, &n_, &I};
    unsigned gx;
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_cache_gather", "n", n);
    if (I < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_cache_gather: rows of %d elements", I);
    if (n == 0) return FAT5_OK;
    if (dst == src) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_cache_gather: dst == src");
    gx = fat5__gpu_blocks(I, 256) * 4;
    if (gx > 64) gx = 64;
    return fat5__dev_launch(ctx, FAT5__K_cache_gather, gx, (unsigned)(n < 65535 ? n : 65535), 1, 256, 1, 1, 0,
                            args);
}

// x[idx[i]] += v for i < n (idx 0: x[i]; int32, device memory; idx distinct)
static FAT5__UNUSED fat5_status fat5__gpu_add_i32(fat5_ctx *ctx, fat5__dptr x, fat5__dptr idx, int v, int64_t n) {
    long long n_ = n;
    void *args[] = {&x, &idx, &v, &n_};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_add_i32", "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_add_i32, fat5__gpu_blocks(n, 256), 1, 1, 256, 1, 1, 0, args);
}

// ----- rope.cu -----
// rotary embedding in place (fat5__cpu_rope); one thread per (token, pair), every head
static FAT5__UNUSED fat5_status fat5__gpu_rope(fat5_ctx *ctx, fat5__dptr x, fat5__dptr cu, fat5__dptr seq,
                                               fat5__dptr pos, int64_t T, int H, int dk, int rd, float base,
                                               float xpos, int flags) {
    long long T_ = T;
    void *args[] = {&x, &cu, &seq, &pos, &T_, &H, &dk, &rd, &base, &xpos, &flags};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_rope", "T", T);
    if (H < 1 || dk < 1 || rd < 2 || rd % 2 || rd > dk || !(base > 0) || !(xpos >= 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rope: H %d, dk %d, rd %d, base %g, xpos %g", H, dk, rd,
                         (double)base, (double)xpos);
    if (!x || (!pos && (!cu || !seq))) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rope: missing buffer");
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_rope, fat5__gpu_blocks(T * (rd / 2), 256), 1, 1, 256, 1, 1, 0, args);
}

// block sums of transient-global tokens and their backward (kernels/global.cu; the CPU twins say
// what they compute): one thread per output element, 256 a block
static FAT5__UNUSED fat5_status fat5__gpu_block_sum(fat5_ctx *ctx, fat5__dptr out, fat5__dptr x, fat5__dptr cu,
                                                    fat5__dptr cu_g, fat5__dptr seq, int64_t G, int D, int g) {
    long long G_ = G;
    void *args[] = {&out, &x, &cu, &cu_g, &seq, &G_, &D, &g};
    if (G < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_block_sum", "G", G);
    if (D < 1 || g < 1 || G > INT64_MAX / D)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_block_sum: D %d, block of %d tokens", D, g);
    if (G == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_block_sum, fat5__gpu_blocks(G * D, 256), 1, 1, 256, 1, 1, 0, args);
}
static FAT5__UNUSED fat5_status fat5__gpu_block_sum_bwd(fat5_ctx *ctx, fat5__dptr dx, fat5__dptr dout, fat5__dptr cu,
                                                        fat5__dptr cu_g, fat5__dptr seq, int64_t T, int D, int g) {
    long long T_ = T;
    void *args[] = {&dx, &dout, &cu, &cu_g, &seq, &T_, &D, &g};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_block_sum_bwd", "T", T);
    if (D < 1 || g < 1 || T > INT64_MAX / D)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_block_sum_bwd: D %d, block of %d tokens", D, g);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_block_sum_bwd, fat5__gpu_blocks(T * D, 256), 1, 1, 256, 1, 1, 0, args);
}

// per row: lse; row_ce = lse - (1-s) x_y - (s/V) sum x and row_z = z lse^2 for labels != -100, else
// 0 (the caller sums the rows in double)
static FAT5__UNUSED fat5_status fat5__gpu_xent_fwd(fat5_ctx *ctx, fat5__dptr lse, fat5__dptr row_ce,
                                                   fat5__dptr row_z, fat5__dptr logits, fat5__dptr labels,
                                                   int64_t T, int V, float z, float smooth) {
    long long T_ = T;
    void *args[] = {&lse, &row_ce, &row_z, &logits, &labels, &T_, &V, &z, &smooth};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_xent_fwd", "T", T);
    if (V < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_xent_fwd: vocabulary of %d", V);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_xent_fwd, fat5__gpu_blocks(T, 1), 1, 1, 256, 1, 1, 0, args);
}

// dlogits = scale (softmax (1 + 2 z lse) - (1-s) onehot(y) - s/V) for counted rows, 0 for -100
static FAT5__UNUSED fat5_status fat5__gpu_xent_bwd(fat5_ctx *ctx, fat5__dptr dlogits, fat5__dptr logits,
                                                   fat5__dptr lse, fat5__dptr labels, int64_t T, int V,
                                                   float z, float smooth, float scale) {
    long long T_ = T;
    void *args[] = {&dlogits, &logits, &lse, &labels, &T_, &V, &z, &smooth, &scale};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_xent_bwd", "T", T);
    if (V < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_xent_bwd: vocabulary of %d", V);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_xent_bwd, fat5__gpu_blocks(T, 1), 1, 1, 256, 1, 1, 0, args);
}

// the batch's loss from its rows (fat5_loss_total): one block of FAT5__LOSS_THREADS, fixed order
static FAT5__UNUSED fat5_status fat5__gpu_loss_total(fat5_ctx *ctx, fat5__dptr out, fat5__dptr row_ce,
                                                     fat5__dptr row_z, int64_t T, int64_t n) {
    long long T_ = T, n_ = n;
    void *args[] = {&out, &row_ce, &row_z, &T_, &n_};
    if (!out || T < 0 || (T > 0 && (!row_ce || !row_z)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_loss_total: %lld rows, a NULL buffer", (long long)T);
    return fat5__dev_launch(ctx, FAT5__K_loss_total, 1, 1, 1, FAT5__LOSS_THREADS, 1, 1, 0, args);
}

// ----- optim.cu: segments of the parameter arena cut into chunks (see the CPU ops) -----

static fat5_status fat5__gpu_check_segs(fat5_ctx *ctx, const char *op, int n_seg, int64_t n_chunks, int chunk) {
    if (n_seg < 0 || n_chunks < 0 || chunk < 1 || (n_seg > 0 && n_chunks < n_seg))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %d segments, %lld chunks of %d elements", op, n_seg,
                         (long long)n_chunks, chunk);
    return FAT5_OK;
}

// out[s] = sum over segment s of x^2 (double [n_seg]), deterministic: fat5_sumsq_seg phase 0 (one
// block of 256 per chunk) writes each chunk's sum into scratch (double [n_chunks]), phase 1 (one
// warp per segment) sums the chunks of each segment in a fixed order.
static FAT5__UNUSED fat5_status fat5__gpu_sumsq_seg(fat5_ctx *ctx, fat5__dptr out, fat5__dptr x, fat5__dptr segs,
                                                    fat5__dptr chunk_off, int n_seg, int64_t n_chunks, int chunk,
                                                    fat5__dptr scratch) {
    long long nc = n_chunks;
    int p0 = 0, p1 = 1;
    void *a1[] = {&out, &scratch, &x, &segs, &chunk_off, &n_seg, &nc, &chunk, &p0};
    void *a2[] = {&out, &scratch, &x, &segs, &chunk_off, &n_seg, &nc, &chunk, &p1};
    fat5_status st = fat5__gpu_check_segs(ctx, "fat5__gpu_sumsq_seg", n_seg, n_chunks, chunk);
    if (st || n_seg == 0) return st;
    if (!scratch) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_sumsq_seg: no scratch");
    st = fat5__dev_launch(ctx, FAT5__K_sumsq_seg, fat5__gpu_blocks(n_chunks, 1), 1, 1, 256, 1, 1, 0, a1);
    if (st) return st;
    return fat5__dev_launch(ctx, FAT5__K_sumsq_seg, fat5__gpu_blocks(n_seg, 8), 1, 1, 256, 1, 1, 0, a2);
}

// the AdamW update of every segment (fat5_adamw_seg): one block of 256 per chunk, fp32
static FAT5__UNUSED fat5_status fat5__gpu_adamw_seg(fat5_ctx *ctx, fat5__dptr w, fat5__dptr g, fat5__dptr m1,
                                                    fat5__dptr m2, fat5__dptr segs, fat5__dptr chunk_off, int n_seg,
                                                    int64_t n_chunks, int chunk, fat5__dptr coef, fat5__dptr stats,
                                                    float beta1, float beta2, float eps, fat5__dptr wa) {
    long long nc = n_chunks;
    void *args[] = {&w, &g, &m1, &m2, &segs, &chunk_off, &n_seg, &nc, &chunk, &coef, &stats, &beta1, &beta2, &eps, &wa};
    fat5_status st = fat5__gpu_check_segs(ctx, "fat5__gpu_adamw_seg", n_seg, n_chunks, chunk);
    if (st || n_seg == 0) return st;
    if (!stats) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_adamw_seg: no stats");
    return fat5__dev_launch(ctx, FAT5__K_adamw_seg, fat5__gpu_blocks(n_chunks, 1), 1, 1, 256, 1, 1, 0, args);
}

// the step's coefficients and gradient norm on the device (fat5_optim_coef): one block
static FAT5__UNUSED fat5_status fat5__gpu_optim_coef(fat5_ctx *ctx, fat5__dptr coef, fat5__dptr stats,
                                                     fat5__dptr ss_g, fat5__dptr ss_w, fat5__dptr segs,
                                                     fat5__dptr decayed, int n_seg, double lr_bc, float decay,
                                                     double clip, fat5__dptr gate, int n_gate) {
    void *args[] = {&coef, &stats, &ss_g, &ss_w, &segs, &decayed, &n_seg, &lr_bc, &decay, &clip, &gate, &n_gate};
    if (n_seg < 0 || !coef || !stats || !ss_g || !segs || !decayed)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_optim_coef: %d segments, a NULL table", n_seg);
    return fat5__dev_launch(ctx, FAT5__K_optim_coef, 1, 1, 1, 256, 1, 1, 0, args);
}

// the Adafactor update of every segment (fat5_adafactor_seg): phases 0, 3 and 5 one block of 256
// per row, 1 one thread per factored column, 2 and 4 one warp per segment; scratch: double
// [n_rows + 2 n_seg]
static FAT5__UNUSED fat5_status fat5__gpu_adafactor_seg(fat5_ctx *ctx, fat5__dptr w, fat5__dptr g, fat5__dptr m1,
                                                        fat5__dptr v, fat5__dptr tab, int n_seg, int64_t n_rows,
                                                        int64_t n_cols, fat5__dptr coef, fat5__dptr stats,
                                                        fat5__dptr decayed, float beta2t, float omb2t, float eps1,
                                                        float clip, float beta1, float wd, fat5__dptr scratch,
                                                        fat5__dptr wa) {
    long long nr = n_rows, nc = n_cols;
    int phase;
    void *args[] = {&w,    &g,     &m1,     &v,    &tab,  &n_seg, &nr,      &nc, &coef,  &stats,
                    &decayed, &beta2t, &omb2t, &eps1, &clip, &beta1, &wd, &scratch, &wa, &phase};
    if (n_seg < 0 || n_rows < n_seg || n_cols < 0 || (n_seg > 0 && (!tab || !coef || !stats || !decayed || !scratch)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_adafactor_seg: %d segments, %lld rows, %lld columns, "
                         "a NULL table", n_seg, (long long)n_rows, (long long)n_cols);
    if (n_seg == 0) return FAT5_OK;
    for (phase = 0; phase < 6; phase++) {
        unsigned blocks = phase == 1 ? fat5__gpu_blocks(n_cols, 256) : phase == 2 || phase == 4
                                         ? fat5__gpu_blocks(n_seg, 8) : fat5__gpu_blocks(n_rows, 1);
        fat5_status st;
        if (phase == 1 && n_cols == 0) continue;
        if ((st = fat5__dev_launch(ctx, FAT5__K_adafactor_seg, blocks, 1, 1, 256, 1, 1, 0, args))) return st;
    }
    return FAT5_OK;
}

// ----- generate.cu: one block of 256 threads per entry (per input for beam search) -----

// The kernels take the options by value: fat5_gen_opts in kernels/generate.cu mirrors fat5__gen_opts
// field for field and asserts its size, FAT5_GEN_OPTS_BYTES = 264 there; these two checks fail to
// compile when this side's layout drifts from it (a field added here must be added there).
typedef char fat5__gen_opts_bytes_check[sizeof(fat5__gen_opts) == 264 ? 1 : -1];
typedef char fat5__gen_opts_seed_check[offsetof(fat5__gen_opts, seed) == 216 && offsetof(fat5__gen_opts, G) == 224 &&
                                            offsetof(fat5__gen_opts, bidx) == 240 &&
                                            offsetof(fat5__gen_opts, row0) == 256 ? 1 : -1];

// Hugging Face's processors and warpers in place on x [n, V] fp32 (see fat5__cpu_gen_process)
static FAT5__UNUSED fat5_status fat5__gpu_gen_process(fat5_ctx *ctx, fat5__dptr x, fat5__dptr hist, fat5__dptr lens,
                                                      fat5__dptr rows, int64_t n, int V, int Lh, const fat5__gen_opts *o) {
    long long n_ = n;
    fat5__gen_opts ov = *o;
    void *args[] = {&x, &hist, &lens, &rows, &n_, &V, &Lh, &ov};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_gen_process", "n", n);
    if (V < 1 || Lh < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_gen_process: V = %d, Lh = %d", V, Lh);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_gen_process, fat5__gpu_blocks(n, 1), 1, 1, 256, 1, 1, 0, args);
}

// greedy or sampled next token per entry (see fat5__cpu_gen_select)
static FAT5__UNUSED fat5_status fat5__gpu_gen_select(fat5_ctx *ctx, fat5__dptr x, fat5__dptr tok, fat5__dptr hist,
                                                     fat5__dptr lens, fat5__dptr done, fat5__dptr score,
                                                     fat5__dptr rows, int64_t n, int V, int Lh, const fat5__gen_opts *o) {
    long long n_ = n;
    fat5__gen_opts ov = *o;
    void *args[] = {&x, &tok, &hist, &lens, &done, &score, &rows, &n_, &V, &Lh, &ov};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_gen_select", "n", n);
    if (V < 1 || Lh < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_gen_select: V = %d, Lh = %d", V, Lh);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_gen_select, fat5__gpu_blocks(n, 1), 1, 1, 256, 1, 1, 0, args);
}

// one beam-search step for n / K inputs (see fat5__cpu_gen_beam)
static FAT5__UNUSED fat5_status fat5__gpu_gen_beam(fat5_ctx *ctx, fat5__dptr x, fat5__dptr tok, fat5__dptr src,
                                                   fat5__dptr hist, fat5__dptr lens, fat5__dptr bscore,
                                                   fat5__dptr fin_score, fat5__dptr fin_tok, fat5__dptr fin_len,
                                                   fat5__dptr fin_flag, fat5__dptr unsat, fat5__dptr done,
                                                   fat5__dptr rows, fat5__dptr scratch, int64_t n, int V, int Lh,
                                                   const fat5__gen_opts *o) {
    long long n_ = n;
    int K = o->K, C = (o->n_eos > 1 ? o->n_eos + 1 : 2) * o->K;   // K: the beams of one unit (input or group)
    fat5__gen_opts ov = *o;
    void *args[] = {&x,    &tok,  &src,     &hist, &lens, &bscore, &fin_score, &fin_tok,        &fin_len,
                    &fin_flag, &unsat, &done, &rows, &scratch, &n_, &V, &Lh, &ov};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_gen_beam", "n", n);
    if (K < 1 || K > FAT5__BEAM_MAX || C > FAT5__BEAM_CAND_MAX || n % K || V < 1 || Lh < 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5__gpu_gen_beam: n = %lld, K = %d (1 .. %d), %d candidates (at most %d), V = %d, Lh = %d",
                         (long long)n, K, FAT5__BEAM_MAX, C, FAT5__BEAM_CAND_MAX, V, Lh);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_gen_beam, fat5__gpu_blocks(n / K, 1), 1, 1, 256, 1, 1, 0, args);
}
#endif  // FAT5_NO_CUDA

