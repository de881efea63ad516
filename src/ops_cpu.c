// =============================================================================================
// ==[3.2] ops: the CPU reference (fp32, simple, obviously right) ==

// ---- util ----

// x[i] = v for i < n
static fat5_status fat5__cpu_fill_f32(fat5_ctx *ctx, fat5__addr x_, float v, int64_t n) {
    float *x = FAT5__HOST(float, x_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) x[i] = v;
    return FAT5_OK;
}

// x[i] *= s for i < n
static fat5_status fat5__cpu_scale_f32(fat5_ctx *ctx, fat5__addr x_, float s, int64_t n) {
    float *x = FAT5__HOST(float, x_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) x[i] *= s;
    return FAT5_OK;
}

// dst[i] = bf16(src[i]) (16-bit words, round to nearest even)
static fat5_status fat5__cpu_f32_to_bf16(fat5_ctx *ctx, fat5__addr dst_, fat5__addr src_, int64_t n) {
    uint16_t *dst = FAT5__HOST(uint16_t, dst_);
    const float *src = FAT5__HOST(const float, src_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) dst[i] = fat5__f32_to_bf16(src[i]);
    return FAT5_OK;
}

// dst[i] = src[i] in the activation dtype: fp32 on the CPU, so a copy
static fat5_status fat5__cpu_to_act(fat5_ctx *ctx, fat5__addr dst, fat5__addr src, int64_t n) {
    return fat5__host_copy(ctx, dst, src, (size_t)(n > 0 ? n : 0) * sizeof(float));
}

// out[j] += sum over r < rows of in[r*D + j]
static fat5_status fat5__cpu_colsum_f32(fat5_ctx *ctx, fat5__addr out_, fat5__addr in_, int rows, int D) {
    float *out = FAT5__HOST(float, out_);
    const float *in = FAT5__HOST(const float, in_);
    int r, j;
    (void)ctx;
    for (j = 0; j < D; j++) {
        double s = 0;
        for (r = 0; r < rows; r++) s += in[(int64_t)r * D + j];
        out[j] = (float)(out[j] + s);
    }
    return FAT5_OK;
}

// ---- matrix products ----
//   NT: C[M,N] = alpha A[M,K] B[N,K]^T + beta C      (y = x W^T)
//   NN: C[M,N] = alpha A[M,K] B[K,N]   + beta C      (dx = dy W)
//   TN: C[M,N] = alpha A[K,M]^T B[K,N] + beta C      (dW += dy^T x)
// beta == 0 does not read C. c_f32 (C kept in fp32 rather than the activation dtype) only matters
// on the GPU.
//
// Every element is s = sum over k = 0, 1, ..., K-1 of a(i,k) b(k,j), accumulated in double in that
// order (each product of two floats is exact in double; one rounding per addition), then
// C = (float)(alpha s + beta C). The blocking below only decides where and when an element is
// computed, never the order of its sum: a running sum that leaves the registers between blocks of
// k is stored as the same double. The result is therefore bitwise the same for every thread count
// and block size, with or without FMA contraction (the products are exact), and equal to the plain
//     double s = 0; for (k = 0; k < K; k++) s += (double)a(i,k) * b(k,j);
// Double rather than fp32 sums: the finite-difference tests of the whole model need the lower
// noise, and the products are then the same bits as fat5's earlier one-row-at-a-time reference.
//
// Blocking (the classic packed GEMM): C is cut into tiles that the threads share out (whole tiles,
// never a sum). For each tile and each block of FAT5__MM_KC values of k, the tile's columns of B
// are packed (as doubles) into panels of NR columns and, FAT5__MM_MC rows at a time, its rows of A
// into panels of MR rows, zero-padded at the edges; a micro-kernel keeps an MR x NR block of sums
// in registers and runs over the block of k. Sums between blocks of k live in a per-thread tile.
#define FAT5__MM_MR 4      // rows of the micro-kernel
#define FAT5__MM_KC 256    // k per packed block
#define FAT5__MM_MC 48     // rows of A packed at a time (a multiple of MR)
#define FAT5__MM_TILE_M 192  // largest tile: rows (a multiple of MC)
#define FAT5__MM_TILE_N 256  // and columns (a multiple of 8)
// per-thread scratch in doubles: the tile's sums, a packed block of B and one of A
#define FAT5__MM_SCRATCH ((size_t)FAT5__MM_TILE_M * FAT5__MM_TILE_N + (size_t)FAT5__MM_KC * FAT5__MM_TILE_N + \
                          (size_t)FAT5__MM_MC * FAT5__MM_KC + 8)

// s[MR][NR] (+)= sum over k < kc of pa[k][MR] x pb[k][NR] (outer products, in k order); s is the
// running sum (first: start from 0). Vector lanes are independent double operations, so every
// form below gives the same bits: a 4-column kernel (GNU vectors, or plain C elsewhere) and an
// 8-column one (GNU vectors; on x86 compiled for AVX2 and chosen at run time unless the build
// already targets AVX2).
#if (defined(__GNUC__) || defined(__clang__)) && !defined(FAT5_MM_SCALAR)
#define FAT5__MM_VEC 1
typedef double fat5__v4d __attribute__((vector_size(32)));
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__AVX2__)
#define FAT5__MM_WIDE_ATTR __attribute__((target("avx2")))
#define FAT5__MM_WIDE_CHECK 1
#else
#define FAT5__MM_WIDE_ATTR
#define FAT5__MM_WIDE_CHECK 0
#endif
// Written out (no loops over rows and lanes) so that the sums stay in registers.
#define FAT5__MM_LD(v, p) memcpy(&(v), (p), sizeof(fat5__v4d))
#define FAT5__MM_ST(p, v) memcpy((p), &(v), sizeof(fat5__v4d))
#define FAT5__MM_SPLAT(x) {x, x, x, x}
static void fat5__mm_kernel4(int64_t kc, const double *pa, const double *pb, double *s, int first) {
    fat5__v4d c0, c1, c2, c3, b;
    int64_t k;
    if (first) {
        memset(&c0, 0, sizeof c0);
        c1 = c2 = c3 = c0;
    } else {
        FAT5__MM_LD(c0, s), FAT5__MM_LD(c1, s + 4), FAT5__MM_LD(c2, s + 8), FAT5__MM_LD(c3, s + 12);
    }
    for (k = 0; k < kc; k++, pa += FAT5__MM_MR, pb += 4) {
        fat5__v4d a0 = FAT5__MM_SPLAT(pa[0]), a1 = FAT5__MM_SPLAT(pa[1]);
        fat5__v4d a2 = FAT5__MM_SPLAT(pa[2]), a3 = FAT5__MM_SPLAT(pa[3]);
        FAT5__MM_LD(b, pb);
        c0 = c0 + a0 * b, c1 = c1 + a1 * b, c2 = c2 + a2 * b, c3 = c3 + a3 * b;
    }
    FAT5__MM_ST(s, c0), FAT5__MM_ST(s + 4, c1), FAT5__MM_ST(s + 8, c2), FAT5__MM_ST(s + 12, c3);
}
FAT5__MM_WIDE_ATTR static void fat5__mm_kernel8(int64_t kc, const double *pa, const double *pb, double *s,
                                                int first) {
    fat5__v4d c0, c1, c2, c3, d0, d1, d2, d3, b, e;
    int64_t k;
    if (first) {
        memset(&c0, 0, sizeof c0);
        c1 = c2 = c3 = d0 = d1 = d2 = d3 = c0;
    } else {
        FAT5__MM_LD(c0, s), FAT5__MM_LD(d0, s + 4), FAT5__MM_LD(c1, s + 8), FAT5__MM_LD(d1, s + 12);
        FAT5__MM_LD(c2, s + 16), FAT5__MM_LD(d2, s + 20), FAT5__MM_LD(c3, s + 24), FAT5__MM_LD(d3, s + 28);
    }
    for (k = 0; k < kc; k++, pa += FAT5__MM_MR, pb += 8) {
        fat5__v4d a0 = FAT5__MM_SPLAT(pa[0]), a1 = FAT5__MM_SPLAT(pa[1]);
        fat5__v4d a2 = FAT5__MM_SPLAT(pa[2]), a3 = FAT5__MM_SPLAT(pa[3]);
        FAT5__MM_LD(b, pb);
        FAT5__MM_LD(e, pb + 4);
        c0 = c0 + a0 * b, d0 = d0 + a0 * e, c1 = c1 + a1 * b, d1 = d1 + a1 * e;
        c2 = c2 + a2 * b, d2 = d2 + a2 * e, c3 = c3 + a3 * b, d3 = d3 + a3 * e;
    }
    FAT5__MM_ST(s, c0), FAT5__MM_ST(s + 4, d0), FAT5__MM_ST(s + 8, c1), FAT5__MM_ST(s + 12, d1);
    FAT5__MM_ST(s + 16, c2), FAT5__MM_ST(s + 20, d2), FAT5__MM_ST(s + 24, c3), FAT5__MM_ST(s + 28, d3);
}
#else
#define FAT5__MM_VEC 0
static void fat5__mm_kernel4(int64_t kc, const double *pa, const double *pb, double *s, int first) {
    int64_t k;
    int r, j;
    if (first) memset(s, 0, FAT5__MM_MR * 4 * sizeof(double));
    for (k = 0; k < kc; k++)
        for (r = 0; r < FAT5__MM_MR; r++)
            for (j = 0; j < 4; j++) s[r * 4 + j] = s[r * 4 + j] + pa[k * FAT5__MM_MR + r] * pb[k * 4 + j];
}
#endif

// the micro-kernel's columns: 8 where the wide kernel runs, else 4
static int fat5__mm_nr(void) {
#if FAT5__MM_VEC && FAT5__MM_WIDE_CHECK
    return __builtin_cpu_supports("avx2") ? 8 : 4;
#elif FAT5__MM_VEC
    return 8;
#else
    return 4;
#endif
}

typedef struct fat5__mm_job {
    fat5__mm_layout layout;
    float *C;
    const float *A, *B;
    int64_t M, N, K, tm, tn, tiles_n, tiles;  // tiles of tm x tn, tiles_n per row of tiles
    float alpha, beta;
    double *scratch;                          // FAT5__MM_SCRATCH doubles per part
    int nr;
} fat5__mm_job;

// Tiles [part * tiles / parts, (part + 1) * tiles / parts), in the part's own scratch.
static void fat5__mm_part(void *arg, int part, int parts) {
    const fat5__mm_job *J = FAT5__CAST(const fat5__mm_job *, arg);
    const int MR = FAT5__MM_MR, NR = J->nr;
    const int64_t M = J->M, N = J->N, K = J->K;
    double *base = J->scratch + (size_t)part * FAT5__MM_SCRATCH;
    // 64-byte aligned blocks (the scratch itself is malloc-aligned)
    double *acc = base + ((8 - (size_t)((uintptr_t)base / sizeof(double) % 8)) % 8);
    double *pb = acc + (size_t)FAT5__MM_TILE_M * FAT5__MM_TILE_N, *pa = pb + (size_t)FAT5__MM_KC * FAT5__MM_TILE_N;
    int64_t t, t0 = J->tiles * part / parts, t1 = J->tiles * (part + 1) / parts;
    for (t = t0; t < t1; t++) {
        int64_t i0 = t / J->tiles_n * J->tm, j0 = t % J->tiles_n * J->tn;
        int64_t mt = M - i0 < J->tm ? M - i0 : J->tm, nt = N - j0 < J->tn ? N - j0 : J->tn;
        int64_t npan = (nt + NR - 1) / NR, mpan = (mt + MR - 1) / MR, pc, i, j, k;
        if (K <= 0) memset(acc, 0, (size_t)(mpan * MR * npan * NR) * sizeof(double));
        for (pc = 0; pc < K; pc += FAT5__MM_KC) {
            int64_t kc = K - pc < FAT5__MM_KC ? K - pc : FAT5__MM_KC, ic, jp, ip;
            // B[pc.., j0..] -> pb[jp][k][NR]
            for (jp = 0; jp < npan; jp++) {
                double *d = pb + jp * kc * NR;
                for (j = 0; j < NR; j++) {
                    int64_t jj = j0 + jp * NR + j;
                    if (jj >= N)
                        for (k = 0; k < kc; k++) d[k * NR + j] = 0;
                    else if (J->layout == FAT5__MM_NT)
                        for (k = 0; k < kc; k++) d[k * NR + j] = J->B[jj * K + pc + k];
                    else
                        for (k = 0; k < kc; k++) d[k * NR + j] = J->B[(pc + k) * N + jj];
                }
            }
            for (ic = 0; ic < mpan; ic += FAT5__MM_MC / MR) {
                int64_t ipn = mpan - ic < FAT5__MM_MC / MR ? mpan - ic : FAT5__MM_MC / MR;
                // A[i0 + ic*MR.., pc..] -> pa[ip][k][MR]
                for (ip = 0; ip < ipn; ip++) {
                    double *d = pa + ip * kc * MR;
                    for (i = 0; i < MR; i++) {
                        int64_t ii = i0 + (ic + ip) * MR + i;
                        if (ii >= M)
                            for (k = 0; k < kc; k++) d[k * MR + i] = 0;
                        else if (J->layout == FAT5__MM_TN)
                            for (k = 0; k < kc; k++) d[k * MR + i] = J->A[(pc + k) * M + ii];
                        else
                            for (k = 0; k < kc; k++) d[k * MR + i] = J->A[ii * K + pc + k];
                    }
                }
                for (jp = 0; jp < npan; jp++)
                    for (ip = 0; ip < ipn; ip++) {
                        double *s = acc + ((ic + ip) * npan + jp) * MR * NR;
#if FAT5__MM_VEC
                        if (NR == 8) {
                            fat5__mm_kernel8(kc, pa + ip * kc * MR, pb + jp * kc * NR, s, pc == 0);
                            continue;
                        }
#endif
                        fat5__mm_kernel4(kc, pa + ip * kc * MR, pb + jp * kc * NR, s, pc == 0);
                    }
            }
        }
        // C = alpha s + beta C
        for (i = 0; i < mt; i++) {
            const double *s = acc + (i / MR) * npan * MR * NR + (i % MR) * NR;
            float *c = J->C + (i0 + i) * N + j0;
            for (j = 0; j < nt; j++) {
                double v = s[j / NR * MR * NR + j % NR];
                c[j] = (float)(J->alpha * v + (J->beta != 0 ? (double)J->beta * c[j] : 0.0));
            }
        }
    }
}

// scratch bytes fat5__cpu_mm takes from the context's arena
static size_t fat5__cpu_mm_scratch(const fat5_ctx *ctx) {
    return (size_t)ctx->n_threads * FAT5__MM_SCRATCH * sizeof(double);
}

// Products of a few rows in the NT layout (decoding: one token per row, y = x W^T) skip the
// packing, which would cost more than the product: each element is the same sequential double
// sum straight from the row-major operands, eight columns at a time for independent chains.
// Threads split the columns.
#define FAT5__MM_FEW_ROWS 4
static void fat5__mm_few_part(void *arg, int part, int parts) {
    const fat5__mm_job *J = FAT5__CAST(const fat5__mm_job *, arg);
    int64_t K = J->K, N = J->N, j0 = N * part / parts, j1 = N * (part + 1) / parts, i, j, k, c;
    for (i = 0; i < J->M; i++) {
        const float *a = J->A + i * K;
        float *crow = J->C + i * N;
        for (j = j0; j < j1; j += 8) {
            double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            const float *b[8];
            int nc = j1 - j < 8 ? (int)(j1 - j) : 8;
            for (c = 0; c < 8; c++) b[c] = J->B + (j + (c < nc ? c : 0)) * K;
            for (k = 0; k < K; k++) {
                double x = a[k];
                s[0] += x * b[0][k], s[1] += x * b[1][k], s[2] += x * b[2][k], s[3] += x * b[3][k];
                s[4] += x * b[4][k], s[5] += x * b[5][k], s[6] += x * b[6][k], s[7] += x * b[7][k];
            }
            for (c = 0; c < nc; c++)
                crow[j + c] = (float)(J->alpha * s[c] + (J->beta != 0 ? (double)J->beta * crow[j + c] : 0.0));
        }
    }
}

static fat5_status fat5__cpu_mm(fat5_ctx *ctx, fat5__mm_layout layout, fat5__addr C_, int c_f32, fat5__addr A_,
                                fat5__addr B_, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    fat5__mm_job J;
    int parts = ctx->n_threads;
    (void)c_f32;
    if (M <= 0 || N <= 0) return FAT5_OK;
    if (layout == FAT5__MM_NT && M <= FAT5__MM_FEW_ROWS) {
        memset(&J, 0, sizeof J);
        J.C = FAT5__HOST(float, C_);
        J.A = FAT5__HOST(const float, A_);
        J.B = FAT5__HOST(const float, B_);
        J.M = M, J.N = N, J.K = K, J.alpha = alpha, J.beta = beta;
        if ((double)M * (double)N * (double)(K > 0 ? K : 1) < 5e5 || N < 16 * (int64_t)parts) parts = 1;
        fat5__pool_run(ctx, fat5__mm_few_part, &J, parts);
        return FAT5_OK;
    }
    J.layout = layout;
    J.C = FAT5__HOST(float, C_);
    J.A = FAT5__HOST(const float, A_);
    J.B = FAT5__HOST(const float, B_);
    J.M = M;
    J.N = N;
    J.K = K;
    J.alpha = alpha;
    J.beta = beta;
    J.nr = fat5__mm_nr();
    // Tiles: the largest, halved (rows or columns, whichever is longer) until every thread has a
    // few; small products (under ~1 MFLOP) run on the calling thread alone.
    J.tm = FAT5__MM_TILE_M;
    J.tn = FAT5__MM_TILE_N;
    if ((double)M * (double)N * (double)(K > 0 ? K : 1) < 5e5) parts = 1;
    for (;;) {
        J.tiles_n = (N + J.tn - 1) / J.tn;
        J.tiles = (M + J.tm - 1) / J.tm * J.tiles_n;
        if (parts == 1 || J.tiles >= 4 * (int64_t)parts) break;
        if (J.tm >= J.tn && J.tm > FAT5__MM_MC && J.tm / 2 < M) J.tm /= 2;          // 192 -> 96 -> 48
        else if (J.tn > 32 && J.tn / 2 < N) J.tn /= 2;                              // 256 -> ... -> 32
        else if (J.tm > FAT5__MM_MC && J.tm / 2 < M) J.tm /= 2;
        else break;
    }
    if (J.tiles < parts) parts = (int)J.tiles;
    J.scratch = FAT5__CAST(double *, fat5__host_scratch(ctx, (size_t)parts * FAT5__MM_SCRATCH * sizeof(double),
                                                       "fat5__cpu_mm"));
    if (!J.scratch) return FAT5_ERR_OUT_OF_MEMORY;
    fat5__pool_run(ctx, fat5__mm_part, &J, parts);
    return FAT5_OK;
}

// batch products of the same shape: C + b sC = op(A + b sA, B + b sB) for b < batch, strides in
// elements (0: the same matrix for every product), as mm computes each one
static fat5_status fat5__cpu_mm_batched(fat5_ctx *ctx, fat5__mm_layout layout, fat5__addr C, int c_f32, fat5__addr A,
                                        fat5__addr B, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                                        int batch, int64_t sA, int64_t sB, int64_t sC) {
    fat5_status st = FAT5_OK;
    int b;
    for (b = 0; b < batch && !st; b++)
        st = fat5__cpu_mm(ctx, layout, C + (fat5__addr)(b * sC) * 4, c_f32, A + (fat5__addr)(b * sA) * 4,
                          B + (fat5__addr)(b * sB) * 4, M, N, K, alpha, beta);
    return st;
}

// ---- embedding ----

// out[t] = table[tok[t]] (rows of width D)
static fat5_status fat5__cpu_embed_fwd(fat5_ctx *ctx, fat5__addr out, fat5__addr table, fat5__addr tok_, int64_t T,
                                       int D) {
    const int32_t *tok = FAT5__HOST(const int32_t, tok_);
    int64_t t;
    (void)ctx;
    for (t = 0; t < T; t++)
        memcpy(FAT5__HOST(float, out) + t * D, FAT5__HOST(const float, table) + (int64_t)tok[t] * D,
               (size_t)D * sizeof(float));
    return FAT5_OK;
}
// dtable[tok[t]] += dout[t]
static fat5_status fat5__cpu_embed_bwd(fat5_ctx *ctx, fat5__addr dtable, fat5__addr dout_, fat5__addr tok_,
                                       int64_t T, int D) {
    const int32_t *tok = FAT5__HOST(const int32_t, tok_);
    const float *dout = FAT5__HOST(const float, dout_);
    int64_t t, j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        float *d = FAT5__HOST(float, dtable) + (int64_t)tok[t] * D;
        for (j = 0; j < D; j++) d[j] += dout[t * D + j];
    }
    return FAT5_OK;
}

// ---- RMSNorm ----

// T5 RMSNorm: y = w * x * r, r = 1 / sqrt(mean(x^2) + eps) (no mean subtraction). Saves r [T].
// xs, when not 0: a copy of x (the residual stream saved for the backward, in the same pass).
static fat5_status fat5__cpu_rmsnorm_fwd(fat5_ctx *ctx, fat5__addr y_, fat5__addr r_, fat5__addr x_, fat5__addr w_,
                                         int64_t T, int D, float eps, fat5__addr xs) {
    float *y = FAT5__HOST(float, y_), *r = FAT5__HOST(float, r_);
    const float *x = FAT5__HOST(const float, x_), *w = FAT5__HOST(const float, w_);
    int64_t t, j;
    (void)ctx;
    if (xs) memcpy(FAT5__HOST(float, xs), x, (size_t)T * (size_t)D * sizeof(float));
    for (t = 0; t < T; t++) {
        const float *xr = x + t * D;
        double ss = 0;
        float rt;
        for (j = 0; j < D; j++) ss += (double)xr[j] * xr[j];
        rt = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
        r[t] = rt;
        for (j = 0; j < D; j++) y[t * D + j] = w[j] * (xr[j] * rt);
    }
    return FAT5_OK;
}
// dx (+)= r g - x r^3 mean(g x) with g = w dy;  dw += sum_t dy x r (dw may be 0: no weight
// gradient); dxa (0: none) a copy of dx's final value in the activation dtype (fp32 on the CPU).
// scratch is the GPU's; the CPU needs none.
static fat5_status fat5__cpu_rmsnorm_bwd(fat5_ctx *ctx, fat5__addr dx_, fat5__addr dw_, fat5__addr dy_,
                                         fat5__addr x_, fat5__addr w_, fat5__addr r_, int64_t T, int D,
                                         int accumulate, fat5__addr scratch, fat5__addr dxa_) {
    float *dx = FAT5__HOST(float, dx_), *dw = FAT5__HOST(float, dw_), *dxa = FAT5__HOST(float, dxa_);
    const float *dy = FAT5__HOST(const float, dy_), *x = FAT5__HOST(const float, x_);
    const float *w = FAT5__HOST(const float, w_), *r = FAT5__HOST(const float, r_);
    int64_t t, j;
    (void)ctx;
    (void)scratch;
    for (t = 0; t < T; t++) {
        const float *xr = x + t * D, *dyr = dy + t * D;
        double rt = r[t], gx = 0;
        for (j = 0; j < D; j++) gx += (double)w[j] * dyr[j] * xr[j];
        gx /= (double)D;
        for (j = 0; j < D; j++) {
            double v = rt * w[j] * dyr[j] - xr[j] * rt * rt * rt * gx;
            dx[t * D + j] = (float)(accumulate ? dx[t * D + j] + v : v);
            if (dxa) dxa[t * D + j] = dx[t * D + j];
            if (dw) dw[j] += (float)(dyr[j] * xr[j] * rt);
        }
    }
    return FAT5_OK;
}

// ---- FFN activations ----

static float fat5__act_f(fat5_act a, float x) {
    switch (a) {
    case FAT5_ACT_RELU: return x > 0 ? x : 0.0f;
    case FAT5_ACT_GELU: return (float)(0.5 * x * (1.0 + erf(x / 1.4142135623730951)));
    case FAT5_ACT_GELU_TANH: {
        double u = 0.7978845608028654 * (x + 0.044715 * (double)x * x * x);
        return (float)(0.5 * x * (1.0 + tanh(u)));
    }
    case FAT5_ACT_SILU: return (float)(x / (1.0 + exp(-(double)x)));
    }
    if ((int)a == FAT5__ACT_TANH) return (float)tanh((double)x);
    return 0.0f;
}
static double fat5__act_df(fat5_act a, float xf) {
    double x = xf;
    switch (a) {
    case FAT5_ACT_RELU: return x > 0 ? 1.0 : 0.0;
    case FAT5_ACT_GELU:
        return 0.5 * (1.0 + erf(x / 1.4142135623730951)) + x * exp(-0.5 * x * x) * 0.3989422804014327;
    case FAT5_ACT_GELU_TANH: {
        double k = 0.7978845608028654, u = k * (x + 0.044715 * x * x * x), th = tanh(u);
        return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case FAT5_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    }
    if ((int)a == FAT5__ACT_TANH) {
        double th = tanh(x);
        return (1.0 - th) * (1.0 + th);
    }
    return 0.0;
}

static fat5_status fat5__cpu_check_act(fat5_ctx *ctx, const char *op, int act) {
    if (act < FAT5_ACT_RELU || act > FAT5__ACT_TANH)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: unknown activation %d", op, act);
    return FAT5_OK;
}

// h = act(a) * b (gated), or act(a) when b == 0; act is a fat5_act. Then, when drop.thresh > 0
// (T5's dropout of the FFN's hidden activation, element i of the mask for h[i]): h *= m.
static fat5_status fat5__cpu_act_fwd(fat5_ctx *ctx, fat5__addr h_, fat5__addr a_, fat5__addr b_, int64_t n,
                                     int act, fat5__drop drop) {
    float *h = FAT5__HOST(float, h_);
    const float *a = FAT5__HOST(const float, a_), *b = FAT5__HOST(const float, b_);
    fat5_act f = (fat5_act)act;
    int64_t i;
    fat5__drop_cursor cur;
    fat5_status st = fat5__cpu_check_act(ctx, "fat5__cpu_act_fwd", act);
    if (st) return st;
    fat5__drop_cursor_init(&cur);
    for (i = 0; i < n; i++) {
        float v = b ? fat5__act_f(f, a[i]) * b[i] : fat5__act_f(f, a[i]);
        if (drop.thresh) v = v * fat5__drop_at(&drop, &cur, (uint64_t)i);
        h[i] = v;
    }
    return FAT5_OK;
}
// With g = dh, or g = dh m under the forward's dropout (drop.thresh > 0, act_fwd's multipliers):
// da = g * b * act'(a), db = g * act(a) (gated); da = g * act'(a) when b == db == 0. db == dh
// works (each element is read before it is written).
static fat5_status fat5__cpu_act_bwd(fat5_ctx *ctx, fat5__addr da_, fat5__addr db_, fat5__addr dh_, fat5__addr a_,
                                     fat5__addr b_, int64_t n, int act, fat5__drop drop) {
    float *da = FAT5__HOST(float, da_), *db = FAT5__HOST(float, db_);
    const float *dh = FAT5__HOST(const float, dh_), *a = FAT5__HOST(const float, a_);
    const float *b = FAT5__HOST(const float, b_);
    fat5_act f = (fat5_act)act;
    int64_t i;
    fat5__drop_cursor cur;
    fat5_status st = fat5__cpu_check_act(ctx, "fat5__cpu_act_bwd", act);
    if (st) return st;
    fat5__drop_cursor_init(&cur);
    for (i = 0; i < n; i++) {
        float gf = drop.thresh ? dh[i] * fat5__drop_at(&drop, &cur, (uint64_t)i) : dh[i];
        double d = fat5__act_df(f, a[i]), g = gf;
        if (b) {
            da[i] = (float)(g * (double)b[i] * d);
            db[i] = (float)(g * fat5__act_f(f, a[i]));
        } else {
            da[i] = (float)(g * d);
        }
    }
    return FAT5_OK;
}

// ---- dropout ----

// y = x m at the elementwise sites (element i of the mask for index i; FAT5__DROP_* modes: fp32 y
// and x, y += x m into fp32, or activation-dtype y / x, all fp32 on the CPU). y may alias x. x m
// is rounded to fp32 before an add. drop.thresh 0 leaves y = x (or adds x).
static fat5_status fat5__cpu_dropout(fat5_ctx *ctx, fat5__addr y_, fat5__addr x_, int64_t n, int mode,
                                     fat5__drop drop) {
    float *y = FAT5__HOST(float, y_);
    const float *x = FAT5__HOST(const float, x_);
    int64_t i;
    if (mode < FAT5__DROP_F32 || mode > FAT5__DROP_ACT)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_dropout: mode %d", mode);
    if (n < 0) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_dropout: n = %lld", (long long)n);
    for (i = 0; i < n; i += 8) {
        float m[8];
        int64_t e, ne = n - i < 8 ? n - i : 8;
        if (drop.thresh) fat5__drop_mul8(&drop, (uint64_t)i >> 3, m);
        else for (e = 0; e < 8; e++) m[e] = 1.0f;
        for (e = 0; e < ne; e++) {
            float v = x[i + e] * m[e];
            y[i + e] = mode == FAT5__DROP_ADD ? y[i + e] + v : v;
        }
    }
    return FAT5_OK;
}

// out[i] = the 16-bit draw of element index[i] of mask (seed, stream[i]) (int32 out, int64 stream
// and index): the generator alone, as the tests compare it with the GPU's
static fat5_status fat5__cpu_drop_draws(fat5_ctx *ctx, fat5__addr out_, fat5__addr stream_, fat5__addr index_,
                                        int64_t n, unsigned long long seed) {
    int32_t *out = FAT5__HOST(int32_t, out_);
    const int64_t *stream = FAT5__HOST(const int64_t, stream_), *index = FAT5__HOST(const int64_t, index_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) out[i] = (int32_t)fat5__drop_draw(seed, (uint64_t)stream[i], (uint64_t)index[i]);
    return FAT5_OK;
}

// ---- attention ----

// T5 relative position bucket of rel = key_pos - query_pos, computed with fp32 logs as PyTorch does.
static int fat5__rel_bucket(int64_t rel, int bidirectional, int nb, int max_distance) {
    int offset = 0, me, large;
    int64_t n;
    if (bidirectional) {
        nb /= 2;
        if (rel > 0) offset = nb;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0;
    }
    me = nb / 2;
    if (n < me) return offset + (int)n;
    if (n >= max_distance) return offset + nb - 1;  // the formula below would clamp there too
    {
        float num = logf((float)n / (float)me);
        float den = (float)log((double)max_distance / (double)me);
        float v = num / den * (float)(nb - me);
        large = me + (int)v;
    }
    if (large > nb - 1) large = nb - 1;
    return offset + large;
}

// ALiBi's slope of head h of n: 2^(-8 (h + 1) / n) when n is a power of two; otherwise, with p
// the largest power of two below n, the p slopes of p heads, then the first n - p of the
// even-indexed slopes of 2p heads (2^(-4 (2 (h - p) + 1) / p)).
static double fat5__alibi_slope(int h, int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return h < p ? pow(2.0, -8.0 * (h + 1) / p) : pow(2.0, -4.0 * (2.0 * (h - p) + 1.0) / p);
}

// FIRE's normalised distance of query position i and key position j (P: its parameter block):
// d = i - j, thr = |L_multiplier L0|, u = sign(d) ln(|c d| + 1) / (ln(|c max(i, thr)| + 1) + 1e-6).
// g (unless NULL) gets du/dc and du/dL_multiplier; at i == thr the maximum's gradient is split
// evenly between its two arguments (as autograd's).
static double fat5__fire_u(const float *P, int H, int W, int L0, int64_t i, int64_t j, double g[2]) {
    double c = P[FAT5__FIRE_C(H, W)], lm = P[FAT5__FIRE_LM(H, W)], d = (double)(i - j), x = (double)i;
    double thr = fabs(lm * L0), mx = x > thr ? x : thr, s = d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
    double num = log(fabs(c * d) + 1.0), den = log(fabs(c * mx) + 1.0) + 1e-6, u = s * num / den;
    if (g) {
        double sc = c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0, slm = lm > 0 ? 1.0 : lm < 0 ? -1.0 : 0.0;
        double dnum_dc = sc * fabs(d) / (fabs(c * d) + 1.0), dden_dc = sc * mx / (fabs(c * mx) + 1.0);
        double dden_dmx = fabs(c) / (fabs(c * mx) + 1.0);
        double dmx_dlm = thr > x ? slm * L0 : thr == x ? 0.5 * slm * L0 : 0.0;
        g[0] = s * (dnum_dc * den - num * dden_dc) / (den * den);
        g[1] = -s * num / (den * den) * dden_dmx * dmx_dlm;
    }
    return u;
}

// FIRE's bias of head h at normalised distance u: mlp.2(relu(mlp.0(u)))_h
static double fat5__fire_mlp(const float *P, int H, int W, int h, double u) {
    const float *w1 = P, *b1 = P + FAT5__FIRE_B1(W), *w2 = P + FAT5__FIRE_W2(W) + (int64_t)h * W;
    double out = P[FAT5__FIRE_B2(H, W) + h];
    int w;
    for (w = 0; w < W; w++) {
        double a = (double)w1[w] * u + b1[w];
        if (a > 0) out += (double)w2[w] * a;
    }
    return out;
}

// FIRE's backward for one score of head h with gradient ds: adds to acc[3 W + 3], the head's
// share of the parameter gradient: d mlp.0.weight [W] | d mlp.0.bias [W] | d mlp.2.weight row h [W]
// | d mlp.2.bias[h] | dc | dL_multiplier.
static void fat5__fire_grad(const float *P, int H, int W, int L0, int h, int64_t i, int64_t j, double ds,
                            double *acc) {
    const float *w1 = P, *b1 = P + FAT5__FIRE_B1(W), *w2 = P + FAT5__FIRE_W2(W) + (int64_t)h * W;
    double g[2], u = fat5__fire_u(P, H, W, L0, i, j, g), du = 0;
    int w;
    for (w = 0; w < W; w++) {
        double a = (double)w1[w] * u + b1[w];
        if (a > 0) {
            double da = ds * w2[w];
            acc[2 * W + w] += ds * a;
            acc[w] += da * u;
            acc[W + w] += da;
            du += da * w1[w];
        }
    }
    acc[3 * W] += ds;
    acc[3 * W + 1] += du * g[0];
    acc[3 * W + 2] += du * g[1];
}

// Adds per-head FIRE gradient shares acc[H][FAT5__FIRE_SHARES(W)] (fat5__fire_grad's layout) to
// FIRE's gradient block g: the shared parts summed over the heads in head order, in double.
#define FAT5__FIRE_REDUCE(g, acc, H, W)                                                                   \
    do {                                                                                              \
        int64_t h_, w_, n_ = FAT5__FIRE_SHARES(W);                                                    \
        double sc_ = 0, sl_ = 0;                                                                      \
        for (w_ = 0; w_ < (W); w_++) {                                                                \
            double a_ = 0, b_ = 0;                                                                    \
            for (h_ = 0; h_ < (H); h_++) {                                                            \
                a_ += (double)(acc)[h_ * n_ + w_];                                                    \
                b_ += (double)(acc)[h_ * n_ + (W) + w_];                                              \
            }                                                                                         \
            (g)[w_] += (float)a_;                                                                     \
            (g)[FAT5__FIRE_B1(W) + w_] += (float)b_;                                                  \
        }                                                                                             \
        for (h_ = 0; h_ < (H); h_++) {                                                                \
            for (w_ = 0; w_ < (W); w_++)                                                              \
                (g)[FAT5__FIRE_W2(W) + h_ * (W) + w_] += (float)(acc)[h_ * n_ + 2 * (W) + w_];        \
            (g)[FAT5__FIRE_B2(H, W) + h_] += (float)(acc)[h_ * n_ + 3 * (W)];                         \
            sc_ += (double)(acc)[h_ * n_ + 3 * (W) + 1];                                              \
            sl_ += (double)(acc)[h_ * n_ + 3 * (W) + 2];                                              \
        }                                                                                             \
        (g)[FAT5__FIRE_C(H, W)] += (float)sc_;                                                        \
        (g)[FAT5__FIRE_LM(H, W)] += (float)sl_;                                                       \
    } while (0)

// fire_reduce: g (FIRE's gradient block) += the per-head shares [H, FAT5__FIRE_SHARES(W)] (fp32),
// summed over the heads in head order. The GPU's bias-gradient path of attn_bwd_dq ends with it.
static fat5_status fat5__cpu_fire_reduce(fat5_ctx *ctx, fat5__addr g_, fat5__addr shares_, int H, int W) {
    float *g = FAT5__HOST(float, g_);
    const float *shares = FAT5__HOST(const float, shares_);
    (void)ctx;
    FAT5__FIRE_REDUCE(g, shares, H, W);
    return FAT5_OK;
}

// The position bias of head h for query position i and key position j (see fat5__attn_kind);
// -inf for a key the head may not see (asymmetric ALiBi). bias: the T5 table or FIRE's block.
static double fat5__cpu_pos_bias(const float *bias, int64_t i, int64_t j, int h, int H, int kind, int nb,
                                 int max_distance) {
    if (kind & FAT5__ATTN_FIRE) return fat5__fire_mlp(bias, H, nb, h, fat5__fire_u(bias, H, nb, max_distance, i, j, NULL));
    if (kind & FAT5__ATTN_ALIBI) {
        double dist = (double)(j > i ? j - i : i - j);
        if (kind & FAT5__ATTN_ALIBI_ASYM) {
            int half = H / 2;
            if (h < half ? j > i : j < i) return -INFINITY;
            return -fat5__alibi_slope(h % half, half) * dist;
        }
        return -fat5__alibi_slope(h, H) * dist;
    }
    if (bias)
        return bias[(int64_t)fat5__rel_bucket(j - i, (kind & FAT5__ATTN_MASK) == FAT5__ATTN_BIDIR, nb, max_distance) *
                        H + h];
    return 0;
}

// The attention ops see a packed batch through cu_q / cu_k ([n_seq + 1] offsets of queries and
// keys) and a token -> sequence map (q_seq for queries, k_seq for keys). Query i of a sequence sees
// its keys 0 .. nk-1 (CROSS, BIDIR) or 0 .. i (CAUSAL), less those asymmetric ALiBi hides; q, k,
// v, o rows are H*dk wide. bias is the [nb, H] relative-position table, FIRE's parameter block, or
// 0 (kind says which). lut (bucket of each distance below max_distance, from fat5__rel_bucket)
// serves the GPU; the CPU computes every bucket itself.
static double fat5__cpu_attn_score(const float *q, const float *k, const float *bias, int64_t i, int64_t j,
                                   int h, int H, int dk, int kind, int nb, int max_distance) {
    double sc = 0;
    int d;
    for (d = 0; d < dk; d++) sc += (double)q[d] * k[d];
    if (bias || (kind & (FAT5__ATTN_ALIBI | FAT5__ATTN_FIRE)))
        sc += fat5__cpu_pos_bias(bias, i, j, h, H, kind, nb, max_distance);
    return sc;
}

// The keys of n that query i sees: [r[0], r[1]) then [r[2], r[3]) (causal: j <= i; a window:
// |j - i| <= rad; block-global: the first g tokens besides the window, or every key for a global
// query). The pattern is symmetric, so the same ranges are the queries that see key j (causal:
// read the other way, i >= j). Transient-global keys are not tokens: the ops add them apart.
static void fat5__attn_range(int kind, int g, int64_t i, int64_t n, int queries, int64_t r[4]) {
    int64_t rad = FAT5__ATTN_RADIUS(kind), pre = (kind & FAT5__ATTN_PREFIX) ? (g < n ? g : n) : 0;
    int causal = (kind & FAT5__ATTN_MASK) == FAT5__ATTN_CAUSAL;
    r[0] = r[1] = 0;
    r[2] = causal && queries ? i : 0;
    r[3] = causal && !queries ? i + 1 : n;
    if (rad < 0 || i < pre) return;
    r[1] = pre;
    if (r[2] < i - rad) r[2] = i - rad;
    if (r[2] < pre) r[2] = pre;
    if (r[3] > i + rad + 1) r[3] = i + rad + 1;
}

// the transient-global keys of the sequence of a query or key token: first row, count G (0
// without TGLOBAL), and the block of position i (HF's orphan rule: the last block takes the rest)
static int64_t fat5__attn_globals(int kind, const int32_t *cu_g, int32_t s, int64_t *row0) {
    *row0 = 0;
    if (!(kind & FAT5__ATTN_TGLOBAL)) return 0;
    *row0 = cu_g[s];
    return cu_g[s + 1] - cu_g[s];
}
static int64_t fat5__attn_block(int64_t i, int g, int64_t G) { return i / g < G - 1 ? i / g : G - 1; }

// the bias of a transient-global key k for a token of block b (0 without a table)
static double fat5__cpu_global_bias(const float *bias, int kind, int64_t k, int64_t b, int h, int H, int nb,
                                    int max_distance) {
    const float *tab;
    if (!bias) return 0.0;  // before any arithmetic on the pointer (an offset from NULL is undefined)
    tab = (kind & FAT5__ATTN_GSHARED) ? bias : bias + (int64_t)nb * H;
    return tab[(int64_t)fat5__rel_bucket(k - b, 1, nb, max_distance) * H + h];
}

// the score of query row qi against transient-global key row kj, global k of a token of block b
static double fat5__cpu_global_score(const float *qi, const float *kj, const float *bias, int kind, int64_t k,
                                     int64_t b, int h, int H, int dk, int nb, int max_distance) {
    return fat5__cpu_attn_score(qi, kj, NULL, 0, 0, h, H, dk, 0, 0, 0) +
           fat5__cpu_global_bias(bias, kind, k, b, h, H, nb, max_distance);
}

// The three attention ops below run on the context's threads (fat5__pool_run) like the matrix
// products, each output row computed exactly as on one thread: the forward and dk/dv split the
// query / key tokens, dq splits the heads (so each head's column of dbias is summed by one thread,
// in the one-thread order). Results are bitwise the same for every thread count.
typedef struct fat5__attn_job {
    float *out0, *out1;                       // fwd: o, lse; dq: dq, dbias; dkv: dk, dv
    const float *dout, *lse, *delta, *q, *k, *v, *bias;
    const int32_t *cu_q, *cu_k, *seq, *cu_g;  // seq: q_seq (fwd, dq) or k_seq (dkv)
    int64_t T, maxk;                          // T: the op's Tq or Tk; maxk: keys of a query at most
    int H, dk, kind, nb, max_distance, g;
    double *scratch;                          // fwd: maxk + dk doubles per part; dq (FIRE): H FAT5__FIRE_SHARES(nb)
    fat5__drop drop;                          // dropout of the probabilities (thresh 0: none)
} fat5__attn_job;

// The dropout multiplier of the probability of query row qr and key row kr (rows of the packed
// q and k buffers) in head h: stream drop->stream + h, index qr << 32 | kr (fat5__drop in base: RNG)
static fat5__drop fat5__attn_head_drop(const fat5__drop *drop, int h) {
    fat5__drop d = *drop;
    d.stream += (uint64_t)h;
    return d;
}
static uint64_t fat5__attn_drop_index(int64_t qr, int64_t kr) { return (uint64_t)qr << 32 | (uint64_t)kr; }

// parts for T rows of about `work` multiply-adds each: one below ~1 M in all, else the context's
static int fat5__attn_parts(const fat5_ctx *ctx, double rows, double work) {
    return rows * work < 1e6 ? 1 : ctx->n_threads;
}

// the pattern's checks the two backends share (the GPU adds its own limits)
static fat5_status fat5__attn_pattern_check(fat5_ctx *ctx, const char *op, int kind, int g, fat5__addr cu_g) {
    int pat = kind & (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL);
    if (kind < 0 || (kind & FAT5__ATTN_MASK) == FAT5__ATTN_MASK)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: attention kind %d", op, kind);
    if (FAT5__ATTN_RADIUS(kind) >= 0 && (kind & FAT5__ATTN_MASK) == FAT5__ATTN_CROSS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: a local window on cross-attention", op, kind);
    if (!pat && !(kind & FAT5__ATTN_GSHARED)) return FAT5_OK;
    if (pat == (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL) ||
        ((kind & FAT5__ATTN_GSHARED) && !(kind & FAT5__ATTN_TGLOBAL)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: block-global and transient-global keys at once, "
                         "or a shared global table without transient-global keys", op, kind);
    if ((kind & FAT5__ATTN_MASK) != FAT5__ATTN_BIDIR)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: %s attention is for the encoder (bidirectional "
                         "self-attention), not a decoder or cross-attention", op, kind,
                         pat == FAT5__ATTN_PREFIX ? "block-global" : "transient-global");
    if (FAT5__ATTN_RADIUS(kind) < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: global keys need a local window", op, kind);
    if (g < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s of %d tokens (expected >= 1)", op,
                         pat == FAT5__ATTN_PREFIX ? "a global prefix" : "a global block", g);
    if (pat == FAT5__ATTN_TGLOBAL && (kind & (FAT5__ATTN_ALIBI | FAT5__ATTN_FIRE)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: transient-global keys take T5's bias buckets, "
                         "not ALiBi or FIRE", op, kind);
    if (pat == FAT5__ATTN_TGLOBAL && !cu_g)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: transient-global keys without their offsets (cu_g)", op);
    return FAT5_OK;
}

static void fat5__attn_fwd_part(void *arg, int part, int parts) {
    const fat5__attn_job *J = FAT5__CAST(const fat5__attn_job *, arg);
    float *o = J->out0, *lse = J->out1;
    const float *q = J->q, *k = J->k, *v = J->v, *bias = J->bias;
    const int32_t *cu_q = J->cu_q, *cu_k = J->cu_k, *q_seq = J->seq;
    int64_t t, j, ld = (int64_t)J->H * J->dk, t0 = J->T * part / parts, t1 = J->T * (part + 1) / parts;
    int h, d, H = J->H, dk = J->dk, kind = J->kind, x;
    double *p = J->scratch + (size_t)part * (size_t)(J->maxk + dk), *acc = p + J->maxk;
    for (t = t0; t < t1; t++) {
        int32_t s = q_seq[t];
        int64_t i = t - cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0, r[4], g0, G, np, b;
        fat5__attn_range(kind, J->g, i, nk, 0, r);
        G = fat5__attn_globals(kind, J->cu_g, s, &g0);
        b = G ? fat5__attn_block(i, J->g, G) : 0;
        np = r[1] - r[0] + r[3] - r[2] + G;  // scores, in p: the two ranges, then the globals
        for (h = 0; h < H; h++) {
            const float *qi = q + t * ld + h * dk;
            double mx = -INFINITY, sum = 0;
            int64_t n = 0;
            fat5__drop hd = fat5__attn_head_drop(&J->drop, h);
            fat5__drop_cursor cur;
            fat5__drop_cursor_init(&cur);
            for (x = 0; x < 2; x++)
                for (j = r[2 * x]; j < r[2 * x + 1]; j++, n++)
                    p[n] = fat5__cpu_attn_score(qi, k + (k0 + j) * ld + h * dk, bias, i, j, h, H, dk, kind, J->nb,
                                                J->max_distance);
            for (j = 0; j < G; j++, n++)
                p[n] = fat5__cpu_global_score(qi, k + (g0 + j) * ld + h * dk, bias, kind, j, b, h, H, dk, J->nb,
                                              J->max_distance);
            for (n = 0; n < np; n++)
                if (p[n] > mx) mx = p[n];
            for (d = 0; d < dk; d++) acc[d] = 0;
            for (n = 0, x = 0; x < 3; x++) {
                int64_t lo = x < 2 ? r[2 * x] : 0, hi = x < 2 ? r[2 * x + 1] : G, row0 = x < 2 ? k0 : g0;
                for (j = lo; j < hi; j++, n++) {
                    const float *vj = v + (row0 + j) * ld + h * dk;
                    double e = exp(p[n] - mx);
                    sum += e;   // the softmax's denominator: every key; dropout scales what reaches v
                    if (hd.thresh) e *= fat5__drop_at(&hd, &cur, fat5__attn_drop_index(t, row0 + j));
                    for (d = 0; d < dk; d++) acc[d] += e * vj[d];
                }
            }
            for (d = 0; d < dk; d++) o[t * ld + h * dk + d] = np ? (float)(acc[d] / sum) : 0.0f;
            lse[t * H + h] = np ? (float)(mx + log(sum)) : -INFINITY;
        }
    }
}

// keys at most of one query: its sequence's, or the window and the globals
static int64_t fat5__attn_maxk(const fat5__attn_job *J, int64_t Tq) {
    int64_t t, m = 1, rad = FAT5__ATTN_RADIUS(J->kind);
    for (t = 0; t < Tq; t++) {
        int32_t s = J->seq[t];
        int64_t nk = J->cu_k[s + 1] - J->cu_k[s], g0;
        if (rad >= 0 && !(J->kind & FAT5__ATTN_PREFIX) && 2 * rad + 1 < nk) nk = 2 * rad + 1;
        nk += fat5__attn_globals(J->kind, J->cu_g, s, &g0);
        if (nk > m) m = nk;
    }
    return m;
}

// o = softmax(q k^T + bias) v per sequence and head, no 1/sqrt(dk) scale (T5); lse [Tq, H] saved
// (-inf and o = 0 for a query without keys). The keys of a query: the kind's pattern (above).
// drop.thresh > 0: dropout on the probabilities (T5's, training), o = (P m) v with P the softmax and
// m the multipliers of fat5__attn_drop_index; lse stays the softmax's.
static fat5_status fat5__cpu_attn_fwd(fat5_ctx *ctx, fat5__addr o_, fat5__addr lse_, fat5__addr q_, fat5__addr k_,
                                      fat5__addr v_, fat5__addr bias_, fat5__addr lut, fat5__addr cu_q_,
                                      fat5__addr cu_k_, fat5__addr q_seq_, int64_t Tq, int H, int dk, int kind,
                                      int nb, int max_distance, int g, fat5__addr cu_g, fat5__drop drop) {
    fat5__attn_job J;
    int parts;
    fat5_status st;
    (void)lut;
    if ((st = fat5__attn_pattern_check(ctx, "fat5__cpu_attn_fwd", kind, g, cu_g))) return st;
    memset(&J, 0, sizeof J);
    J.out0 = FAT5__HOST(float, o_);
    J.out1 = FAT5__HOST(float, lse_);
    J.q = FAT5__HOST(const float, q_);
    J.k = FAT5__HOST(const float, k_);
    J.v = FAT5__HOST(const float, v_);
    J.bias = FAT5__HOST(const float, bias_);
    J.cu_q = FAT5__HOST(const int32_t, cu_q_);
    J.cu_k = FAT5__HOST(const int32_t, cu_k_);
    J.seq = FAT5__HOST(const int32_t, q_seq_);
    J.cu_g = FAT5__HOST(const int32_t, cu_g);
    J.T = Tq;
    J.H = H;
    J.dk = dk;
    J.kind = kind;
    J.nb = nb;
    J.max_distance = max_distance;
    J.g = g;
    J.drop = drop;
    J.maxk = fat5__attn_maxk(&J, Tq);
    parts = fat5__attn_parts(ctx, (double)Tq, (double)J.maxk * H * dk * 2);
    J.scratch = FAT5__CAST(double *, fat5__host_scratch(ctx, (size_t)parts * (size_t)(J.maxk + dk) * sizeof(double),
                                                       "fat5__cpu_attn_fwd"));
    if (!J.scratch) return FAT5_ERR_OUT_OF_MEMORY;
    fat5__pool_run(ctx, fat5__attn_fwd_part, &J, parts);
    return FAT5_OK;
}

// delta[t*H + h] = sum over head h's columns of dout * o (the softmax backward's row term)
static fat5_status fat5__cpu_attn_bwd_delta(fat5_ctx *ctx, fat5__addr delta_, fat5__addr o_, fat5__addr dout_,
                                            int64_t Tq, int H, int dk) {
    float *delta = FAT5__HOST(float, delta_);
    const float *o = FAT5__HOST(const float, o_), *dout = FAT5__HOST(const float, dout_);
    int64_t t;
    int h, d;
    (void)ctx;
    for (t = 0; t < Tq; t++)
        for (h = 0; h < H; h++) {
            double s = 0;
            for (d = 0; d < dk; d++) s += (double)dout[(t * H + h) * dk + d] * o[(t * H + h) * dk + d];
            delta[t * H + h] = (float)s;
        }
    return FAT5_OK;
}

// fills the job fields the two backward ops share
static void fat5__attn_bwd_job(fat5__attn_job *J, fat5__addr out0, fat5__addr out1, fat5__addr dout_,
                               fat5__addr lse_, fat5__addr delta_, fat5__addr q_, fat5__addr k_, fat5__addr v_,
                               fat5__addr bias_, fat5__addr cu_q_, fat5__addr cu_k_, fat5__addr seq_, int64_t T,
                               int H, int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g) {
    memset(J, 0, sizeof *J);
    J->out0 = FAT5__HOST(float, out0);
    J->out1 = FAT5__HOST(float, out1);
    J->dout = FAT5__HOST(const float, dout_);
    J->lse = FAT5__HOST(const float, lse_);
    J->delta = FAT5__HOST(const float, delta_);
    J->q = FAT5__HOST(const float, q_);
    J->k = FAT5__HOST(const float, k_);
    J->v = FAT5__HOST(const float, v_);
    J->bias = FAT5__HOST(const float, bias_);
    J->cu_q = FAT5__HOST(const int32_t, cu_q_);
    J->cu_k = FAT5__HOST(const int32_t, cu_k_);
    J->seq = FAT5__HOST(const int32_t, seq_);
    J->cu_g = FAT5__HOST(const int32_t, cu_g);
    J->T = T;
    J->H = H;
    J->dk = dk;
    J->kind = kind;
    J->nb = nb;
    J->max_distance = max_distance;
    J->g = g;
}

// heads [part * H / parts, (part + 1) * H / parts) of every query
static void fat5__attn_dq_part(void *arg, int part, int parts) {
    const fat5__attn_job *J = FAT5__CAST(const fat5__attn_job *, arg);
    float *dq = J->out0, *dbias = J->out1;
    const float *dout = J->dout, *lse = J->lse, *delta = J->delta, *q = J->q, *k = J->k, *v = J->v;
    const int32_t *cu_q = J->cu_q, *cu_k = J->cu_k, *q_seq = J->seq;
    int H = J->H, dk = J->dk, kind = J->kind, h, d, x, h0 = H * part / parts, h1 = H * (part + 1) / parts;
    int64_t t, j, ld = (int64_t)H * dk;
    float *dgbias = dbias && !(kind & FAT5__ATTN_GSHARED) ? dbias + (int64_t)J->nb * H : dbias;
    for (t = 0; t < J->T; t++) {
        int32_t s = q_seq[t];
        int64_t i = t - cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0, r[4], g0, G, b;
        fat5__attn_range(kind, J->g, i, nk, 0, r);
        G = fat5__attn_globals(kind, J->cu_g, s, &g0);
        b = G ? fat5__attn_block(i, J->g, G) : 0;
        for (h = h0; h < h1; h++) {
            const float *qi = q + t * ld + h * dk, *doi = dout + t * ld + h * dk;
            float *dqi = dq + t * ld + h * dk;
            double L = lse[t * H + h];
            fat5__drop hd = fat5__attn_head_drop(&J->drop, h);
            fat5__drop_cursor cur;
            fat5__drop_cursor_init(&cur);
            for (d = 0; d < dk; d++) dqi[d] = 0;
            for (x = 0; x < 3; x++) {
                int64_t lo = x < 2 ? r[2 * x] : 0, hi = x < 2 ? r[2 * x + 1] : G, row0 = x < 2 ? k0 : g0;
                for (j = lo; j < hi; j++) {
                    const float *kj = k + (row0 + j) * ld + h * dk, *vj = v + (row0 + j) * ld + h * dk;
                    double sc = x < 2 ? fat5__cpu_attn_score(qi, kj, J->bias, i, j, h, H, dk, kind, J->nb,
                                                             J->max_distance)
                                      : fat5__cpu_global_score(qi, kj, J->bias, kind, j, b, h, H, dk, J->nb,
                                                               J->max_distance);
                    double p = exp(sc - L), dp = 0, ds;
                    for (d = 0; d < dk; d++) dp += (double)doi[d] * vj[d];
                    if (hd.thresh) dp *= fat5__drop_at(&hd, &cur, fat5__attn_drop_index(t, row0 + j));
                    ds = p * (dp - delta[t * H + h]);
                    for (d = 0; d < dk; d++) dqi[d] += (float)(ds * kj[d]);
                    if (!dbias) continue;
                    if (x == 2)
                        dgbias[(int64_t)fat5__rel_bucket(j - b, 1, J->nb, J->max_distance) * H + h] += (float)ds;
                    else if (kind & FAT5__ATTN_FIRE)
                        fat5__fire_grad(J->bias, H, J->nb, J->max_distance, h, i, j, ds,
                                        J->scratch + (size_t)h * (size_t)FAT5__FIRE_SHARES(J->nb));
                    else if (!(kind & FAT5__ATTN_ALIBI))
                        dbias[(int64_t)fat5__rel_bucket(j - i, (kind & FAT5__ATTN_MASK) == FAT5__ATTN_BIDIR, J->nb,
                                                        J->max_distance) * H + h] += (float)ds;
                }
            }
        }
    }
}

// dq (written) and dbias[bucket, h] += ds (dbias 0: not wanted; ALiBi has no gradient; FIRE adds
// the gradient of its parameter block; transient-global keys add to the global table's). p =
// exp(score - lse) is recomputed; ds = p (dout . v - delta), or under the forward's dropout
// (drop.thresh > 0, its multipliers m) ds = p (m dout . v - delta); delta = rowsum(dout o) either
// way. scratch is the GPU's (its per-block bias-gradient partials); the CPU needs none.
static fat5_status fat5__cpu_attn_bwd_dq(fat5_ctx *ctx, fat5__addr dq_, fat5__addr dbias_, fat5__addr dout_,
                                         fat5__addr lse_, fat5__addr delta_, fat5__addr q_, fat5__addr k_,
                                         fat5__addr v_, fat5__addr bias_, fat5__addr lut, fat5__addr cu_q_,
                                         fat5__addr cu_k_, fat5__addr q_seq_, int64_t Tq, int H, int dk, int kind,
                                         int nb, int max_distance, int g, fat5__addr cu_g, fat5__addr scratch,
                                         fat5__drop drop) {
    fat5__attn_job J;
    int parts;
    fat5_status st;
    (void)lut;
    (void)scratch;
    if ((st = fat5__attn_pattern_check(ctx, "fat5__cpu_attn_bwd_dq", kind, g, cu_g))) return st;
    fat5__attn_bwd_job(&J, dq_, dbias_, dout_, lse_, delta_, q_, k_, v_, bias_, cu_q_, cu_k_, q_seq_, Tq, H, dk, kind,
                       nb, max_distance, g, cu_g);
    J.drop = drop;
    if (dbias_ && (kind & FAT5__ATTN_FIRE)) {  // per-head sums in double, then added in head order
        size_t n = (size_t)H * (size_t)FAT5__FIRE_SHARES(nb), e;
        J.scratch = FAT5__CAST(double *, fat5__host_scratch(ctx, n * sizeof(double), "fat5__cpu_attn_bwd_dq"));
        if (!J.scratch) return FAT5_ERR_OUT_OF_MEMORY;
        for (e = 0; e < n; e++) J.scratch[e] = 0;
    }
    if (!bias_ && !(kind & FAT5__ATTN_FIRE)) J.out1 = NULL;  // no table, no gradient
    parts = fat5__attn_parts(ctx, (double)Tq, (double)H * dk * 64);
    if (parts > H) parts = H;
    fat5__pool_run(ctx, fat5__attn_dq_part, &J, parts);
    if (dbias_ && (kind & FAT5__ATTN_FIRE)) FAT5__FIRE_REDUCE(FAT5__HOST(float, dbias_), J.scratch, H, nb);
    return FAT5_OK;
}

// keys [part * Tk / parts, (part + 1) * Tk / parts): a token key gathers the queries of its
// sequence that see it; a transient-global key, every query of its sequence
static void fat5__attn_dkv_part(void *arg, int part, int parts) {
    const fat5__attn_job *J = FAT5__CAST(const fat5__attn_job *, arg);
    float *dkk = J->out0, *dv = J->out1;
    const float *dout = J->dout, *lse = J->lse, *delta = J->delta, *q = J->q, *k = J->k, *v = J->v;
    const int32_t *cu_q = J->cu_q, *cu_k = J->cu_k, *k_seq = J->seq;
    int H = J->H, dk = J->dk, kind = J->kind, h, d, x;
    int64_t t, i, ld = (int64_t)H * dk, t0 = J->T * part / parts, t1 = J->T * (part + 1) / parts;
    for (t = t0; t < t1; t++) {
        int32_t s = k_seq[t];
        int64_t q0 = cu_q[s], nq = cu_q[s + 1] - q0, g0, G = fat5__attn_globals(kind, J->cu_g, s, &g0), r[4];
        int glob = G && t >= g0 && t < g0 + G;
        int64_t j = glob ? t - g0 : t - cu_k[s];
        if (glob) r[0] = r[1] = 0, r[2] = 0, r[3] = nq;
        else fat5__attn_range(kind, J->g, j, nq, 1, r);
        for (h = 0; h < H; h++) {
            const float *kj = k + t * ld + h * dk, *vj = v + t * ld + h * dk;
            float *dkj = dkk + t * ld + h * dk, *dvj = dv + t * ld + h * dk;
            fat5__drop hd = fat5__attn_head_drop(&J->drop, h);
            fat5__drop_cursor cur;   // (each query is another block: drawn once per probability)
            fat5__drop_cursor_init(&cur);
            for (d = 0; d < dk; d++) dkj[d] = dvj[d] = 0;
            for (x = 0; x < 2; x++)
                for (i = r[2 * x]; i < r[2 * x + 1]; i++) {
                    const float *qi = q + (q0 + i) * ld + h * dk, *doi = dout + (q0 + i) * ld + h * dk;
                    double sc = glob ? fat5__cpu_global_score(qi, kj, J->bias, kind, j, fat5__attn_block(i, J->g, G),
                                                              h, H, dk, J->nb, J->max_distance)
                                     : fat5__cpu_attn_score(qi, kj, J->bias, i, j, h, H, dk, kind, J->nb,
                                                            J->max_distance);
                    double p = exp(sc - lse[(q0 + i) * H + h]), dp = 0, ds, pm = p;
                    for (d = 0; d < dk; d++) dp += (double)doi[d] * vj[d];
                    if (hd.thresh) {   // the forward's multiplier of this probability
                        double m = fat5__drop_at(&hd, &cur, fat5__attn_drop_index(q0 + i, t));
                        dp *= m;
                        pm = p * m;
                    }
                    ds = p * (dp - delta[(q0 + i) * H + h]);
                    for (d = 0; d < dk; d++) {
                        dkj[d] += (float)(ds * qi[d]);
                        dvj[d] += (float)(pm * doi[d]);
                    }
                }
        }
    }
}

// dk, dv (written), key by key: k_seq[t] is the sequence of key row t (token or transient-global).
// Under the forward's dropout (drop.thresh > 0, multipliers m): dv += p m dout, and ds as attn_bwd_dq's.
static fat5_status fat5__cpu_attn_bwd_dkv(fat5_ctx *ctx, fat5__addr dk_, fat5__addr dv_, fat5__addr dout_,
                                          fat5__addr lse_, fat5__addr delta_, fat5__addr q_, fat5__addr k_,
                                          fat5__addr v_, fat5__addr bias_, fat5__addr lut, fat5__addr cu_q_,
                                          fat5__addr cu_k_, fat5__addr k_seq_, int64_t Tk, int H, int dk, int kind,
                                          int nb, int max_distance, int g, fat5__addr cu_g, fat5__drop drop) {
    fat5__attn_job J;
    fat5_status st;
    (void)lut;
    if ((st = fat5__attn_pattern_check(ctx, "fat5__cpu_attn_bwd_dkv", kind, g, cu_g))) return st;
    fat5__attn_bwd_job(&J, dk_, dv_, dout_, lse_, delta_, q_, k_, v_, bias_, cu_q_, cu_k_, k_seq_, Tk, H, dk, kind, nb,
                       max_distance, g, cu_g);
    J.drop = drop;
    fat5__pool_run(ctx, fat5__attn_dkv_part, &J, fat5__attn_parts(ctx, (double)Tk, (double)H * dk * 64));
    return FAT5_OK;
}

// ---- transient-global tokens: block sums ----

// block_sum: out row r (0 <= r < G) = the sum of x's rows (act) of the tokens of its block: the
// global of k and v row cu_g[0] + r, of sequence s = seq[cu_g[0] + r], is block b = cu_g[0] + r -
// cu_g[s] of s, tokens cu[s] + [b g, (b + 1) g), the last block of s to its end (LongT5's
// orphans). Sums in double, token order. out fp32 [G, D].
static fat5_status fat5__cpu_block_sum(fat5_ctx *ctx, fat5__addr out_, fat5__addr x_, fat5__addr cu_, fat5__addr cu_g_,
                                       fat5__addr seq_, int64_t G, int D, int g) {
    float *out = FAT5__HOST(float, out_);
    const float *x = FAT5__HOST(const float, x_);
    const int32_t *cu = FAT5__HOST(const int32_t, cu_), *cu_g = FAT5__HOST(const int32_t, cu_g_);
    const int32_t *seq = FAT5__HOST(const int32_t, seq_);
    int64_t r, t;
    int j;
    (void)ctx;
    for (r = 0; r < G; r++) {
        int64_t row = cu_g[0] + r, s = seq[row], b = row - cu_g[s], last = row + 1 == cu_g[s + 1];
        int64_t t0 = cu[s] + b * g, t1 = last ? cu[s + 1] : t0 + g;
        for (j = 0; j < D; j++) {
            double acc = 0;
            for (t = t0; t < t1; t++) acc += x[t * D + j];
            out[r * D + j] = (float)acc;
        }
    }
    return FAT5_OK;
}

// block_sum_bwd: dx[t] += dout[row of t's global - cu_g[0]] for the T tokens (seq their
// sequences); tokens of a sequence without globals are left as they are. dx, dout fp32.
static fat5_status fat5__cpu_block_sum_bwd(fat5_ctx *ctx, fat5__addr dx_, fat5__addr dout_, fat5__addr cu_,
                                           fat5__addr cu_g_, fat5__addr seq_, int64_t T, int D, int g) {
    float *dx = FAT5__HOST(float, dx_);
    const float *dout = FAT5__HOST(const float, dout_);
    const int32_t *cu = FAT5__HOST(const int32_t, cu_), *cu_g = FAT5__HOST(const int32_t, cu_g_);
    const int32_t *seq = FAT5__HOST(const int32_t, seq_);
    int64_t t;
    int j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        int32_t s = seq[t];
        int64_t G = cu_g[s + 1] - cu_g[s], row;
        if (!G) continue;
        row = cu_g[s] - cu_g[0] + fat5__attn_block(t - cu[s], g, G);
        for (j = 0; j < D; j++) dx[t * D + j] += dout[row * D + j];
    }
    return FAT5_OK;
}

// ---- rotary position embedding ----

// rope: rotates, in place, dims [0, rd) of every head of x [T, H*dk] (act) by its token's
// position t: when pos is given (a decode step), pos[seq[t]] (seq: each entry's decoder row) or pos[0]
// (seq NULL), else its place in its packed sequence, t - cu[seq[t]]. Pair k < rd/2 is (k, k + rd/2), or (2k, 2k + 1) with
// FAT5__ROPE_INTERLEAVED; it turns by theta = t base^(-2k/rd): (a, b) -> (a cos - b sin, b cos + a sin).
// xpos > 0 (xPos, gamma = xpos): cos and sin scale by zeta_k^(t/gamma), zeta_k = (2k + 0.4 rd) /
// (1.4 rd), or zeta_k^(-t/gamma) with FAT5__ROPE_KEY, so q.k scales by zeta^((i - j)/gamma).
// FAT5__ROPE_TRANSPOSE applies the transposed map (the backward of dq, dk). Angles and scales are
// computed in double from the exact integer position and rounded to fp32 (no table, no length
// limit); dims from rd on pass through. xPos scales leave fp32's range past |t| ~ 70 gamma.
static fat5_status fat5__cpu_rope(fat5_ctx *ctx, fat5__addr x_, fat5__addr cu_, fat5__addr seq_, fat5__addr pos_,
                                  int64_t T, int H, int dk, int rd, float base, float xpos, int flags) {
    float *x = FAT5__HOST(float, x_);
    const int32_t *cu = FAT5__HOST(const int32_t, cu_), *seq = FAT5__HOST(const int32_t, seq_);
    const int32_t *pos = FAT5__HOST(const int32_t, pos_);
    int64_t t;
    int h, k, half = rd / 2;
    (void)ctx;
    for (t = 0; t < T; t++) {
        double p = pos ? (double)pos[seq ? seq[t] : 0] : (double)(t - cu[seq[t]]);
        for (k = 0; k < half; k++) {
            double ang = p * pow((double)base, -2.0 * k / rd), sc = 1.0;
            float cs, sn;
            int ia = flags & FAT5__ROPE_INTERLEAVED ? 2 * k : k, ib = flags & FAT5__ROPE_INTERLEAVED ? 2 * k + 1 : k + half;
            if (xpos > 0) sc = pow((2.0 * k + 0.4 * rd) / (1.4 * rd), (flags & FAT5__ROPE_KEY ? -p : p) / xpos);
            cs = (float)(cos(ang) * sc);
            sn = (float)(sin(ang) * sc);
            if (flags & FAT5__ROPE_TRANSPOSE) sn = -sn;
            for (h = 0; h < H; h++) {
                float *r = x + t * (int64_t)H * dk + (int64_t)h * dk, a = r[ia], b = r[ib];
                r[ia] = a * cs - b * sn;
                r[ib] = b * cs + a * sn;
            }
        }
    }
    return FAT5_OK;
}

// ---- cross-entropy ----

// ---- decoding: one query per row against a cache ----

// attn_decode: entry i (0 <= i < n) is row rows[i]; its keys and values are rows kv_off[row] + j of
// k and v for j < count, count = pos[row] + 1 (CAUSAL: the decoder's self-attention cache, the
// query at the row's position pos[row]) or kv_len[row] (CROSS: the encoder output of the row's
// input; bias unused). o[i] = softmax_j(q_i . k_j + b(pos[row], j, h)) v_j, per head; rows of q, k,
// v, o are H*dk wide; o = 0 for an entry without keys. b is the causal forward's position bias for
// a query at position pos[row] (fat5__cpu_pos_bias for this kind: T5 buckets, ALiBi or FIRE; lut is the GPU's bucket
// table, as for attn_fwd); none for CROSS.
// max_keys: an upper bound, known on the host, of the key count of any entry: the decoder's cache
// capacity max_len for CAUSAL, the longest encoder output (max of kv_len) for CROSS. pos and kv_len
// live in device memory on the GPU (a decode step is replayable as a CUDA graph), so the GPU sizes
// its split of the keys from max_keys alone; any count is still computed correctly (a count above
// max_keys only splits less well). The CPU ignores it.
// scratch serves the GPU's split over keys: FAT5__DECODE_SCRATCH(H, dk) floats per entry, n entries
// (it may be 0 when max_keys <= FAT5__DECODE_SPLIT_KEYS: one split, no scratch).
#define FAT5__DECODE_MAX_SPLITS 32
#define FAT5__DECODE_SCRATCH(H, dk) ((size_t)(H) * FAT5__DECODE_MAX_SPLITS * ((size_t)(dk) + 2))
#define FAT5__DECODE_BLOCK_SPLITS 16  // warps (splits) of the GPU's one-launch decode block
#define FAT5__DECODE_SPLIT_KEYS 32   // the GPU's keys per split at max_keys: ceil(max_keys / 32) splits (one chunk of a warp)
static fat5_status fat5__cpu_attn_decode(fat5_ctx *ctx, fat5__addr o_, fat5__addr q_, fat5__addr k_, fat5__addr v_,
                                         fat5__addr bias_, fat5__addr lut, fat5__addr rows_, fat5__addr kv_off_,
                                         fat5__addr kv_len_, fat5__addr pos_, int64_t n, int H, int dk, int kind,
                                         int nb, int max_distance, int max_keys, fat5__addr scratch) {
    float *o = FAT5__HOST(float, o_);
    const float *q = FAT5__HOST(const float, q_), *k = FAT5__HOST(const float, k_), *v = FAT5__HOST(const float, v_);
    int causal = (kind & FAT5__ATTN_MASK) == FAT5__ATTN_CAUSAL;
    const float *bias = causal ? FAT5__HOST(const float, bias_) : NULL;
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
    const int32_t *kv_len = FAT5__HOST(const int32_t, kv_len_);
    const int32_t *pos = FAT5__HOST(const int32_t, pos_);
    int64_t ld = (int64_t)H * dk, i, j, cnt_max = 1;
    double *p, *acc;
    int h, d;
    if (kind >> FAT5__ATTN_WINDOW_SHIFT || (kind & (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_attn_decode: kind %d: decoding takes no attention "
                         "pattern", kind);
    (void)lut;
    (void)max_keys;
    (void)scratch;
    for (i = 0; i < n; i++) {
        int64_t c = causal ? (int64_t)pos[rows[i]] + 1 : kv_len[rows[i]];
        if (c > cnt_max) cnt_max = c;
    }
    p = FAT5__CAST(double *, fat5__host_scratch(ctx, (size_t)(cnt_max + dk) * sizeof(double), "fat5__cpu_attn_decode"));
    if (!p) return FAT5_ERR_OUT_OF_MEMORY;
    acc = p + cnt_max;
    for (i = 0; i < n; i++) {
        int64_t row = rows[i], k0 = kv_off[row], p_row = causal ? pos[row] : 0, cnt = causal ? p_row + 1 : kv_len[row];
        for (h = 0; h < H; h++) {
            const float *qi = q + i * ld + h * dk;
            double mx = -INFINITY, sum = 0;
            for (j = 0; j < cnt; j++) {
                p[j] = fat5__cpu_attn_score(qi, k + (k0 + j) * ld + h * dk, bias, p_row, j, h, H, dk, kind, nb,
                                            max_distance);
                if (p[j] > mx) mx = p[j];
            }
            for (d = 0; d < dk; d++) acc[d] = 0;
            for (j = 0; j < cnt; j++) {
                const float *vj = v + (k0 + j) * ld + h * dk;
                double e = exp(p[j] - mx);
                sum += e;
                for (d = 0; d < dk; d++) acc[d] += e * vj[d];
            }
            for (d = 0; d < dk; d++) o[i * ld + h * dk + d] = cnt ? (float)(acc[d] / sum) : 0.0f;
        }
    }
    return FAT5_OK;
}

// cache_write: row rows[i] of the caches takes entry i's key and value at its position pos[rows[i]]:
// kc[kv_off[rows[i]] + pos[rows[i]]] = k[i], vc[...] = v[i] (rows of I activation elements).
static fat5_status fat5__cpu_cache_write(fat5_ctx *ctx, fat5__addr kc_, fat5__addr vc_, fat5__addr k_, fat5__addr v_,
                                         fat5__addr rows_, fat5__addr kv_off_, fat5__addr pos_, int64_t n, int I) {
    float *kc = FAT5__HOST(float, kc_), *vc = FAT5__HOST(float, vc_);
    const float *k = FAT5__HOST(const float, k_), *v = FAT5__HOST(const float, v_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
    const int32_t *pos = FAT5__HOST(const int32_t, pos_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        int64_t dst = ((int64_t)kv_off[rows[i]] + pos[rows[i]]) * I;
        memcpy(kc + dst, k + i * (int64_t)I, (size_t)I * sizeof(float));
        memcpy(vc + dst, v + i * (int64_t)I, (size_t)I * sizeof(float));
    }
    return FAT5_OK;
}

// norm_mm: the decoder's "normalise, then project" in one op. With xn = rmsnorm_fwd(x, g) (T rows of
// K; x fp32, the normalised rows in the activation dtype):
//   act < 0:  y_s = xn W_s^T ([T, N], activation dtype) for w0 and, when given, w1 and w2;
//   act >= 0: y0 = act_fwd(xn W0^T, xn W1^T) (gated; w1 given, w2 0) or act_fwd(xn W0^T) (w1 0);
//   rows:     (act < 0) rows i of y1 and y2 are the cache rows kv_off[rows[i]] + pos[rows[i]] instead of i
//             (cache_write's addressing: the new key and value go straight into the caches).
// The CPU composes its rmsnorm_fwd, mm, act_fwd and the cache addressing; the GPU runs one kernel.
static fat5_status fat5__norm_mm_check(fat5_ctx *ctx, const char *op, fat5__addr y0, fat5__addr y1, fat5__addr y2,
                                       fat5__addr x, fat5__addr g, fat5__addr w0, fat5__addr w1, fat5__addr w2,
                                       int64_t T, int N, int K, int act, fat5__addr rows, fat5__addr kv_off,
                                       fat5__addr pos) {
    if (T < 0 || N < 1 || K < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: T = %lld, N = %d, K = %d (T >= 0, N and K >= 1)", op,
                         (long long)T, N, K);
    if (act > FAT5_ACT_SILU || act < -1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: act %d (-1: none, else a fat5_act)", op, act);
    if (!y0 || !x || !g || !w0 || (w1 && act < 0 && !y1) || (w2 && (!y2 || !w1)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a NULL buffer (y0, x, g, w0; y1 with w1, y2 and w1 with w2)",
                         op);
    if (act >= 0 && (w2 || rows))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: an activation takes w0 and w1 only, and no cache rows", op);
    if (rows && (!kv_off || !pos))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: cache rows need kv_off and pos", op);
    return FAT5_OK;
}

static fat5_status fat5__cpu_norm_mm(fat5_ctx *ctx, fat5__addr y0, fat5__addr y1, fat5__addr y2, fat5__addr x,
                                     fat5__addr g, fat5__addr w0, fat5__addr w1, fat5__addr w2, int64_t T, int N,
                                     int K, float eps, int act, fat5__addr rows_, fat5__addr kv_off_, fat5__addr pos_) {
    const fat5__addr w[3] = {w0, w1, w2}, y[3] = {y0, y1, y2};
    float *buf, *xn, *r, *ta, *tb;
    size_t nb = 0;
    int s;
    fat5_status st = fat5__norm_mm_check(ctx, "fat5__cpu_norm_mm", y0, y1, y2, x, g, w0, w1, w2, T, N, K, act, rows_,
                                         kv_off_, pos_);
    if (st || T == 0) return st;
    if (!fat5__mul_ok((size_t)T, (size_t)K + 1 + 2 * (size_t)N, &nb) || nb > SIZE_MAX / sizeof(float))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_norm_mm: %lld rows: the size overflows", (long long)T);
    buf = FAT5__CAST(float *, fat5__malloc(ctx, nb * sizeof(float)));
    if (!buf) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5__cpu_norm_mm: out of memory");
    xn = buf, r = xn + T * K, ta = r + T, tb = ta + T * N;
    st = fat5__cpu_rmsnorm_fwd(ctx, FAT5__ADDR(xn), FAT5__ADDR(r), x, g, T, K, eps, 0);
    if (act >= 0) {
        if (!st) st = fat5__cpu_mm(ctx, FAT5__MM_NT, FAT5__ADDR(ta), 0, FAT5__ADDR(xn), w0, T, N, K, 1.0f, 0.0f);
        if (!st && w1) st = fat5__cpu_mm(ctx, FAT5__MM_NT, FAT5__ADDR(tb), 0, FAT5__ADDR(xn), w1, T, N, K, 1.0f, 0.0f);
        if (!st)
            st = fat5__cpu_act_fwd(ctx, y0, FAT5__ADDR(ta), w1 ? FAT5__ADDR(tb) : 0, T * N, act, fat5__drop_none());
    }
    for (s = 0; s < 3 && act < 0 && !st && w[s]; s++) {
        int64_t i;
        if (!rows_ || s == 0) {
            st = fat5__cpu_mm(ctx, FAT5__MM_NT, y[s], 0, FAT5__ADDR(xn), w[s], T, N, K, 1.0f, 0.0f);
            continue;
        }
        st = fat5__cpu_mm(ctx, FAT5__MM_NT, FAT5__ADDR(ta), 0, FAT5__ADDR(xn), w[s], T, N, K, 1.0f, 0.0f);
        for (i = 0; i < T && !st; i++) {
            const int32_t *rows = FAT5__HOST(const int32_t, rows_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
            int64_t dst = (int64_t)kv_off[rows[i]] + FAT5__HOST(const int32_t, pos_)[rows[i]];
            memcpy(FAT5__HOST(float, y[s]) + dst * N, ta + i * N, (size_t)N * sizeof(float));
        }
    }
    fat5__free(ctx, buf);
    return st;
}

// cache_gather: for entries i < n, row r = rows[i]: positions [0, pos[r]) of dst row r are those of
// src row idx[r] (cache rows kv_off[r] + j and kv_off[idx[r]] + j; I activation elements each).
// dst != src.
static fat5_status fat5__cpu_cache_gather(fat5_ctx *ctx, fat5__addr dst_, fat5__addr src_, fat5__addr idx_,
                                          fat5__addr rows_, fat5__addr kv_off_, fat5__addr pos_, int64_t n, int I) {
    float *dst = FAT5__HOST(float, dst_);
    const float *src = FAT5__HOST(const float, src_);
    const int32_t *idx = FAT5__HOST(const int32_t, idx_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *pos = FAT5__HOST(const int32_t, pos_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        int64_t r = rows[i];
        if (pos[r] > 0)
            memcpy(dst + (int64_t)kv_off[r] * I, src + (int64_t)kv_off[idx[r]] * I,
                   (size_t)((int64_t)pos[r] * I) * sizeof(float));
    }
    return FAT5_OK;
}

// add_i32: x[idx[i]] += v for i < n (idx NULL: x[i]; the decoder rows' positions; idx distinct)
static fat5_status fat5__cpu_add_i32(fat5_ctx *ctx, fat5__addr x_, fat5__addr idx_, int v, int64_t n) {
    int32_t *x = FAT5__HOST(int32_t, x_);
    const int32_t *idx = FAT5__HOST(const int32_t, idx_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) x[idx ? idx[i] : i] += v;
    return FAT5_OK;
}

// Over rows of logits [T, V] with labels (-100 = ignored), z-loss and label smoothing. Per row:
// lse; row_ce = lse - (1-s) x_y - (s/V) sum_j x_j and row_z = z lse^2 for counted rows, 0 for
// ignored ones (the caller sums the rows in double).
static fat5_status fat5__cpu_xent_fwd(fat5_ctx *ctx, fat5__addr lse_, fat5__addr row_ce_, fat5__addr row_z_,
                                      fat5__addr logits_, fat5__addr labels_, int64_t T, int V, float z,
                                      float smooth) {
    float *lse = FAT5__HOST(float, lse_), *row_ce = FAT5__HOST(float, row_ce_), *row_z = FAT5__HOST(float, row_z_);
    const float *logits = FAT5__HOST(const float, logits_);
    const int32_t *labels = FAT5__HOST(const int32_t, labels_);
    int64_t t;
    int j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        const float *x = logits + t * V;
        double mx = -INFINITY, s = 0, sx = 0, L;
        for (j = 0; j < V; j++) if (x[j] > mx) mx = x[j];
        for (j = 0; j < V; j++) {
            s += exp((double)x[j] - mx);
            sx += x[j];
        }
        L = mx + log(s);
        lse[t] = (float)L;
        row_ce[t] = row_z[t] = 0;
        if (labels[t] == -100) continue;
        row_ce[t] = (float)(L - (1.0 - smooth) * x[labels[t]] - smooth / (double)V * sx);
        row_z[t] = (float)(z * L * L);
    }
    return FAT5_OK;
}

// out[0] = ce / n, out[1] = (ce + zs) / n (0, 0 when n = 0), ce and zs the double sums of row_ce and
// row_z in the GPU kernel's order (kernels/xent.cu, fat5_loss_total): FAT5__LOSS_THREADS strided
// partial sums, then halved pairwise, so that both backends report the same bits.
#define FAT5__LOSS_THREADS 256  // FAT5_LOSS_THREADS in kernels/xent.cu
static fat5_status fat5__cpu_loss_total(fat5_ctx *ctx, fat5__addr out_, fat5__addr row_ce_, fat5__addr row_z_,
                                        int64_t T, int64_t n) {
    double *out = FAT5__HOST(double, out_), rc[FAT5__LOSS_THREADS], rz[FAT5__LOSS_THREADS];
    const float *row_ce = FAT5__HOST(const float, row_ce_), *row_z = FAT5__HOST(const float, row_z_);
    int64_t t;
    int i, stride;
    (void)ctx;
    for (i = 0; i < FAT5__LOSS_THREADS; i++) {
        rc[i] = rz[i] = 0;
        for (t = i; t < T; t += FAT5__LOSS_THREADS) {
            rc[i] += (double)row_ce[t];
            rz[i] += (double)row_z[t];
        }
    }
    for (stride = FAT5__LOSS_THREADS / 2; stride > 0; stride >>= 1)
        for (i = 0; i < stride; i++) {
            rc[i] += rc[i + stride];
            rz[i] += rz[i + stride];
        }
    out[0] = n ? rc[0] / (double)n : 0.0;
    out[1] = n ? (rc[0] + rz[0]) / (double)n : 0.0;
    return FAT5_OK;
}
// dlogits = scale * (softmax (1 + 2 z lse) - (1-s) onehot(y) - s/V) for counted rows, 0 otherwise
static fat5_status fat5__cpu_xent_bwd(fat5_ctx *ctx, fat5__addr dlogits_, fat5__addr logits_, fat5__addr lse_,
                                      fat5__addr labels_, int64_t T, int V, float z, float smooth, float scale) {
    float *dlogits = FAT5__HOST(float, dlogits_);
    const float *logits = FAT5__HOST(const float, logits_), *lse = FAT5__HOST(const float, lse_);
    const int32_t *labels = FAT5__HOST(const int32_t, labels_);
    int64_t t;
    int j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        const float *x = logits + t * V;
        float *dx = dlogits + t * V;
        double L = lse[t];
        if (labels[t] == -100) {
            memset(dx, 0, (size_t)V * sizeof(float));
            continue;
        }
        for (j = 0; j < V; j++) {
            double p = exp((double)x[j] - L);
            dx[j] = (float)(scale * (p * (1.0 + 2.0 * z * L) - smooth / (double)V));
        }
        dx[labels[t]] -= (float)(scale * (1.0 - smooth));
    }
    return FAT5_OK;
}

// ---- optimizer ----
// The parameter tensors are segments of one fp32 arena: segs (int64 [2 n_seg]) holds the element
// offset and the numel of each. chunk_off (int64 [n_seg + 1]) and chunk cut every segment into
// chunks of `chunk` elements for the GPU (chunk_off[s] = the first chunk of segment s); the CPU
// walks the segments directly and ignores them, and the scratch.

// out[s] = sum over segment s of x^2 (double [n_seg]); scratch: the GPU's per-chunk partials
// (double [n_chunks])
static fat5_status fat5__cpu_sumsq_seg(fat5_ctx *ctx, fat5__addr out_, fat5__addr x_, fat5__addr segs_,
                                       fat5__addr chunk_off, int n_seg, int64_t n_chunks, int chunk,
                                       fat5__addr scratch) {
    double *out = FAT5__HOST(double, out_);
    const float *x = FAT5__HOST(const float, x_);
    const int64_t *segs = FAT5__HOST(const int64_t, segs_);
    int s;
    (void)ctx;
    (void)chunk_off;
    (void)n_chunks;
    (void)chunk;
    (void)scratch;
    for (s = 0; s < n_seg; s++) {
        const float *p = x + segs[2 * s];
        int64_t i, n = segs[2 * s + 1];
        double acc = 0;
        for (i = 0; i < n; i++) acc += (double)p[i] * p[i];
        out[s] = acc;
    }
    return FAT5_OK;
}

// AdamW update of every segment s, with alpha = coef[2 s] (lr x bias correction x the AdamWScale
// factor) and decay = coef[2 s + 1] (1 - lr wd; 1 for no decay), both fp32, and the clipping
// factor gscale = (float)stats[1]; nothing when the gradient norm stats[0] is not finite:
//   g' = gscale g;  m1 = b1 m1 + (1 - b1) g';  m2 = b2 m2 + (1 - b2) g'^2  (stored in fp32);
//   w = (w - alpha m1 / (sqrt(m2) + eps)) decay   (from the stored fp32 moments; double arithmetic)
// g is read only. wa (the GPU's bf16 operands, refreshed in the same pass) is 0 here.
static fat5_status fat5__cpu_adamw_seg(fat5_ctx *ctx, fat5__addr w_, fat5__addr g_, fat5__addr m1_, fat5__addr m2_,
                                       fat5__addr segs_, fat5__addr chunk_off, int n_seg, int64_t n_chunks,
                                       int chunk, fat5__addr coef_, fat5__addr stats_, float beta1, float beta2,
                                       float eps, fat5__addr wa) {
    float *w = FAT5__HOST(float, w_), *m1 = FAT5__HOST(float, m1_), *m2 = FAT5__HOST(float, m2_);
    const float *g = FAT5__HOST(const float, g_), *coef = FAT5__HOST(const float, coef_);
    const double *stats = FAT5__HOST(const double, stats_);
    const int64_t *segs = FAT5__HOST(const int64_t, segs_);
    double b1 = beta1, b2 = beta2;
    float gscale = (float)stats[1];
    int s;
    (void)ctx;
    (void)chunk_off;
    (void)n_chunks;
    (void)chunk;
    if (wa) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_adamw_seg: the CPU has no separate operands");
    if (!isfinite(stats[0])) return FAT5_OK;  // a skipped step
    for (s = 0; s < n_seg; s++) {
        double alpha = coef[2 * s], decay = coef[2 * s + 1];
        int64_t i, lo = segs[2 * s], hi = lo + segs[2 * s + 1];
        for (i = lo; i < hi; i++) {
            double gi = (double)g[i] * gscale;
            float a = (float)(b1 * m1[i] + (1.0 - b1) * gi), b = (float)(b2 * m2[i] + (1.0 - b2) * gi * gi);
            m1[i] = a;
            m2[i] = b;
            w[i] = (float)(((double)w[i] - alpha * ((double)a / (sqrt((double)b) + (double)eps))) * decay);
        }
    }
    return FAT5_OK;
}

// The step's coefficients (fat5_optim_coef): stats[0] = the gradient norm (the per-tensor sums of
// squares ss_g added in tensor order, in double), stats[1] = the clipping factor min(1, clip /
// (norm + 1e-6)) (1 without clipping); coef[2 s] = lr_bc, times max(sqrt(ss_w[s] / numel), 1e-3)
// when ss_w is given (AdamWScale); coef[2 s + 1] = decay when decayed[s], else 1. A non-finite
// value among gate[0 .. n_gate) (the step's losses) makes the norm NaN: adamw_seg skips the step.
static fat5_status fat5__cpu_optim_coef(fat5_ctx *ctx, fat5__addr coef_, fat5__addr stats_, fat5__addr ss_g_,
                                        fat5__addr ss_w_, fat5__addr segs_, fat5__addr decayed_, int n_seg,
                                        double lr_bc, float decay, double clip, fat5__addr gate_, int n_gate) {
    const double *gate = FAT5__HOST(const double, gate_);
    float *coef = FAT5__HOST(float, coef_);
    double *stats = FAT5__HOST(double, stats_), norm2 = 0, gs = 1;
    const double *ss_g = FAT5__HOST(const double, ss_g_), *ss_w = FAT5__HOST(const double, ss_w_);
    const int64_t *segs = FAT5__HOST(const int64_t, segs_);
    const int32_t *decayed = FAT5__HOST(const int32_t, decayed_);
    int s;
    (void)ctx;
    for (s = 0; s < n_seg; s++) norm2 += ss_g[s];
    stats[0] = sqrt(norm2);
    if (clip > 0) {
        double k = clip / (stats[0] + 1e-6);
        if (k < 1) gs = k;
    }
    stats[1] = gs;
    for (s = 0; s < n_gate; s++)  // after the clipping factor, as the kernel orders it
        if (!isfinite(gate[s])) stats[0] = NAN;
    for (s = 0; s < n_seg; s++) {
        double alpha = lr_bc;
        if (ss_w) {
            double rms = sqrt(ss_w[s] / (double)segs[2 * s + 1]);
            alpha *= rms > 1e-3 ? rms : 1e-3;
        }
        coef[2 * s] = (float)alpha;
        coef[2 * s + 1] = decayed[s] ? decay : 1.0f;
    }
    return FAT5_OK;
}

// Adafactor's update direction of element i (row-major) of a segment before the clipping and the
// rate: factored (R x C, row averages vs[0 .. R), column averages vs[R .. R + C), mean row average
// rmean): rsqrt(row / rmean) rsqrt(col) g; else rsqrt(vs[i]) g. fp32 operations, rounded each.
static float fat5__cpu_af_dir(float gi, const float *vs, int fac, int64_t R, int64_t C, int64_t i, float rmean) {
    if (fac) {
        float rf = 1.0f / sqrtf(vs[i / C] / rmean), cf = 1.0f / sqrtf(vs[R + i % C]);
        return (rf * cf) * gi;
    }
    return (1.0f / sqrtf(vs[i])) * gi;
}

// Adafactor (transformers' Adafactor.step) over every segment s, as kernels/optim.cu's
// fat5_adafactor_seg lays it out: tab (int64 [8 n_seg]) holds offset, numel, R, C, factored,
// voff, row0, col0 of each (an R x C row-major tensor, 1-D ones R = 1; row0 / col0 only serve the
// GPU's grid), v + voff its second moments (factored: R row averages then C column averages; else
// numel). With g' = (float)stats[1] g (the global clipping) and e = g' g' + eps1:
//   factored:   row_i = beta2t row_i + omb2t mean_c e;  col_c = beta2t col_c + omb2t mean_i e;
//               u = rsqrt(row_i / mean_i row_i) rsqrt(col_c) g'
//   unfactored: v = beta2t v + omb2t e;  u = rsqrt(v) g'
//   u = (u / max(1, RMS(u) / clip)) lr   (lr = coef[2 s]: the rate times the parameter scale)
//   m1 (when not 0): m1 = beta1 m1 + (1 - beta1) u, u = m1
//   w = w + (-wd lr) w when decayed[s];  w = w - u
// Nothing when the gradient norm stats[0] is not finite. Means and RMS are sums in double (in
// element order) rounded to fp32; every element-wise operation is one fp32 operation, rounded, in
// the order written (rsqrt(x) = 1 / sqrt(x), each IEEE), as the kernel does them. scratch and wa
// are the GPU's (0 here: the CPU has no separate operands).
static fat5_status fat5__cpu_adafactor_seg(fat5_ctx *ctx, fat5__addr w_, fat5__addr g_, fat5__addr m1_,
                                           fat5__addr v_, fat5__addr tab_, int n_seg, int64_t n_rows,
                                           int64_t n_cols, fat5__addr coef_, fat5__addr stats_,
                                           fat5__addr decayed_, float beta2t, float omb2t, float eps1, float clip,
                                           float beta1, float wd, fat5__addr scratch, fat5__addr wa) {
    float *w = FAT5__HOST(float, w_), *m1 = FAT5__HOST(float, m1_), *v = FAT5__HOST(float, v_);
    const float *g = FAT5__HOST(const float, g_), *coef = FAT5__HOST(const float, coef_);
    const double *stats = FAT5__HOST(const double, stats_);
    const int64_t *tab = FAT5__HOST(const int64_t, tab_);
    const int32_t *decayed = FAT5__HOST(const int32_t, decayed_);
    const float gs = (float)stats[1], ob1 = 1.0f - beta1;
    int s;
    (void)n_rows;
    (void)n_cols;
    (void)scratch;
    if (wa) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_adafactor_seg: the CPU has no separate operands");
    if (!isfinite(stats[0])) return FAT5_OK;  // a skipped step
    for (s = 0; s < n_seg; s++) {
        const int64_t off = tab[8 * s], numel = tab[8 * s + 1], R = tab[8 * s + 2], C = tab[8 * s + 3];
        const int fac = tab[8 * s + 4] != 0;
        const float lr = coef[2 * s], dec = decayed[s] ? (float)(-(double)wd * (double)lr) : 0.0f;
        const float *gp = g + off;
        float *vs = v + tab[8 * s + 5], rmean = 1.0f, den;
        double acc;
        int64_t i, c;
        // the second moments
        if (fac) {
            for (i = 0; i < R; i++) {
                for (acc = 0, c = 0; c < C; c++) {
                    float gi = gp[i * C + c] * gs;
                    acc += (double)(gi * gi + eps1);
                }
                vs[i] = beta2t * vs[i] + omb2t * (float)(acc / (double)C);
            }
            for (c = 0; c < C; c++) {
                for (acc = 0, i = 0; i < R; i++) {
                    float gi = gp[i * C + c] * gs;
                    acc += (double)(gi * gi + eps1);
                }
                vs[R + c] = beta2t * vs[R + c] + omb2t * (float)(acc / (double)R);
            }
            for (acc = 0, i = 0; i < R; i++) acc += (double)vs[i];
            rmean = (float)(acc / (double)R);
        } else {
            for (i = 0; i < numel; i++) {
                float gi = gp[i] * gs;
                vs[i] = beta2t * vs[i] + omb2t * (gi * gi + eps1);
            }
        }
        // the RMS of the update direction, then the update
        for (acc = 0, i = 0; i < numel; i++) {
            float u = fat5__cpu_af_dir(gp[i] * gs, vs, fac, R, C, i, rmean);
            acc += (double)u * (double)u;
        }
        den = (float)sqrt(acc / (double)numel) / clip;
        if (den < 1.0f) den = 1.0f;
        for (i = 0; i < numel; i++) {
            const int64_t k = off + i;
            float u = fat5__cpu_af_dir(gp[i] * gs, vs, fac, R, C, i, rmean) / den * lr, wk = w[k];
            if (m1) {
                m1[k] = beta1 * m1[k] + ob1 * u;
                u = m1[k];
            }
            if (dec != 0.0f) wk = wk + dec * wk;
            w[k] = wk - u;
        }
    }
    return FAT5_OK;
}
