// kernels/optim.cu — the optimizer: per-tensor sums of squares (gradient norm, weight RMS) and the
// AdamW / AdamWScale update, over every parameter tensor of the model in one launch each; the
// Adafactor update (factored second moments) in six launches of one kernel.
//
// The tensors are segments of one fp32 arena: segs[2 s] = element offset, segs[2 s + 1] = numel of
// segment s. Each segment is cut into chunks of `chunk` elements (the last one shorter); chunk_off
// [n_seg + 1] holds the first chunk of each segment (chunk_off[s + 1] - chunk_off[s] =
// ceil(numel / chunk)), so chunk c belongs to the segment s with chunk_off[s] <= c < chunk_off[s+1].
// The host builds both tables once (fat5_optim_create).
//
// Determinism: no atomics. A sum of squares is accumulated in double by each thread over a fixed
// stride of its chunk, reduced over the block in a fixed shuffle order, written per chunk, then
// summed over the chunks of each segment by one warp in a fixed order. Same inputs and chunk
// tables, same bits, on any GPU and grid.

// the segment of chunk c (binary search; chunk_off is non-decreasing, chunk_off[0] = 0)
__device__ __forceinline__ int fat5_optim_seg_of(const long long *chunk_off, int n_seg, long long c)
{
    int lo = 0, hi = n_seg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (chunk_off[mid] <= c) lo = mid; else hi = mid - 1;
    }
    return lo;
}

__device__ __forceinline__ double fat5_warp_sum_f64(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FAT5_FULL_MASK, v, o);
    return v;
}

// fat5_sumsq_seg(double *out[n_seg], double *part[n_chunks], const float *x,
// const long long *segs[2 n_seg], const long long *chunk_off[n_seg+1], int n_seg, long long n_chunks,
// int chunk, int phase): launched twice (blockDim a multiple of 32, at most 1024):
//   phase 0: part[c] = sum over the elements of chunk c of x^2 in double; one block per chunk
//            (grid-stride), each thread over a fixed stride (of float4 groups when the chunk's ends
//            are multiples of 4 and x is 16-byte aligned, else of elements), then a fixed-order block
//            reduction;
//   phase 1: out[s] = sum of part over the chunks of segment s; one warp per segment (lane l takes
//            chunks l, l + 32, ... in order, then a fixed butterfly).
// CPU twin: fat5__cpu_sumsq_seg.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_sumsq_seg(double *out, double *part, const float *x, const long long *segs,
                                          const long long *chunk_off, int n_seg, long long n_chunks, int chunk,
                                          int phase)
{
    __shared__ double red[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (phase == 1) {
        for (long long s = (long long)blockIdx.x * nwarps + warp; s < n_seg; s += (long long)gridDim.x * nwarps) {
            double acc = 0.0;
            for (long long c = chunk_off[s] + lane; c < chunk_off[s + 1]; c += 32) acc += part[c];
            acc = fat5_warp_sum_f64(acc);
            if (lane == 0) out[s] = acc;
        }
        return;
    }
    for (long long c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        const int s = fat5_optim_seg_of(chunk_off, n_seg, c);
        const long long seg_end = segs[2 * s] + segs[2 * s + 1];
        const long long lo = segs[2 * s] + (c - chunk_off[s]) * (long long)chunk;
        const long long hi = min(lo + (long long)chunk, seg_end);
        double acc = 0.0;
        if (((lo | hi) & 3) == 0 && fat5_al16(x, 0, 0, 0)) {   // 16-byte loads
            for (long long i = (lo >> 2) + threadIdx.x; i < hi >> 2; i += blockDim.x) {
                const float4 v = ((const float4 *)x)[i];
                acc = fma((double)v.x, (double)v.x, acc);
                acc = fma((double)v.y, (double)v.y, acc);
                acc = fma((double)v.z, (double)v.z, acc);
                acc = fma((double)v.w, (double)v.w, acc);
            }
        } else {
            for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
                const double v = (double)x[i];
                acc = fma(v, v, acc);
            }
        }
        acc = fat5_warp_sum_f64(acc);
        __syncthreads();  // red is reused from the previous chunk
        if (lane == 0) red[warp] = acc;
        __syncthreads();
        if (warp == 0) {
            double v = lane < nwarps ? red[lane] : 0.0;
            v = fat5_warp_sum_f64(v);
            if (lane == 0) part[c] = v;
        }
    }
}
#endif

// fat5_optim_coef(float *coef[2 n_seg], double *stats[2], const double *ss_g[n_seg],
// const double *ss_w[n_seg] or NULL, const long long *segs, const int *decayed[n_seg], int n_seg,
// double lr_bc, float decay, double clip, const double *gate[n_gate], int n_gate): the step's
// coefficients on the device, so that the host
// waits for nothing between the gradient norm and the update. One block:
//   stats[0] = grad_norm = sqrt(sum of ss_g in segment order) (thread 0, in double);
//   stats[1] = gscale = min(1, clip / (grad_norm + 1e-6)) when clip > 0, else 1;
//   coef[2 s] = alpha = lr_bc (x max(sqrt(ss_w[s] / numel), 1e-3): AdamWScale, when ss_w);
//   coef[2 s + 1] = decay when decayed[s], else 1;
// a non-finite value among gate (the step's losses) sets stats[0] to NaN: adamw_seg skips the step.
// Double arithmetic without contractions (IEEE sqrt and division), so the host's formulas give
// the same bits. CPU twin: fat5__cpu_optim_coef.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_optim_coef(float *coef, double *stats, const double *ss_g, const double *ss_w,
                                           const long long *segs, const int *decayed, int n_seg, double lr_bc,
                                           float decay, double clip, const double *gate, int n_gate)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        double norm2 = 0.0, gs = 1.0;
        for (int s = 0; s < n_seg; s++) norm2 += ss_g[s];
        const double gn = sqrt(norm2);
        if (clip > 0) {
            const double k = clip / (gn + 1e-6);
            if (k < 1) gs = k;
        }
        stats[0] = gn;
        stats[1] = gs;
        for (int j = 0; j < n_gate; j++)
            if (!isfinite(gate[j])) stats[0] = __longlong_as_double(0x7ff8000000000000LL);
    }
    for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < n_seg; s += blockDim.x * gridDim.x) {
        double alpha = lr_bc;
        if (ss_w) {
            const double rms = sqrt(ss_w[s] / (double)segs[2 * s + 1]);
            alpha = __dmul_rn(alpha, rms > 1e-3 ? rms : 1e-3);
        }
        coef[2 * s] = (float)alpha;
        coef[2 * s + 1] = decayed[s] ? decay : 1.0f;
    }
}
#endif

// fat5_adamw_seg(float *w, const float *g, float *m1, float *m2, const long long *segs,
// const long long *chunk_off, int n_seg, long long n_chunks, int chunk, const float *coef[2 n_seg],
// const double *stats[2], float beta1, float beta2, float eps, unsigned short *wa): for every
// element of segment s, with alpha = coef[2 s] (lr x bias correction x the AdamWScale factor),
// decay = coef[2 s + 1] (1 - lr wd, 1 when no decay) and gscale = (float)stats[1] (clipping),
// nothing at all when the gradient norm stats[0] is not finite (a skipped step):
//   g' = gscale g;  m1 = b1 m1 + (1 - b1) g';  m2 = b2 m2 + (1 - b2) g'^2;
//   w = (w - alpha m1 / (sqrt(m2) + eps)) * decay
// fp32 throughout (IEEE sqrt and division); four elements a thread on 16-byte loads when the chunk
// and the arrays allow, else one. g is read only. wa, when not NULL: the bf16 matrix
// operands, refreshed from the new w (RNE, as fat5_f32_to_bf16). CPU twin: fat5__cpu_adamw_seg.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_adamw_seg(float *w, const float *g, float *m1, float *m2, const long long *segs,
                                          const long long *chunk_off, int n_seg, long long n_chunks, int chunk,
                                          const float *coef, const double *stats, float beta1, float beta2,
                                          float eps, unsigned short *wa)
{
    const float ob1 = 1.0f - beta1, ob2 = 1.0f - beta2;
    const double gn = stats[0];
    const float gscale = (float)stats[1];
    if (!isfinite(gn)) return;
    for (long long c = blockIdx.x; c < n_chunks; c += gridDim.x) {
        const int s = fat5_optim_seg_of(chunk_off, n_seg, c);
        const long long seg_end = segs[2 * s] + segs[2 * s + 1];
        const long long lo = segs[2 * s] + (c - chunk_off[s]) * (long long)chunk;
        const long long hi = min(lo + (long long)chunk, seg_end);
        const float alpha = coef[2 * s], decay = coef[2 * s + 1];
        // 16-byte loads (four elements a thread) when the chunk's ends are multiples of 4 and the
        // arrays aligned, else one element a thread (the other three lanes of the group idle)
        const bool vec = ((lo | hi) & 3) == 0 && fat5_al16(w, g, m1, m2) && ((unsigned long long)wa & 7) == 0;
        const int E = vec ? 4 : 1;
        for (long long i = lo + (long long)threadIdx.x * E; i < hi; i += (long long)blockDim.x * E) {
            float gv[4] = {0.0f, 0.0f, 0.0f, 0.0f}, a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, b[4] = {0.0f, 0.0f, 0.0f, 0.0f},
                  wv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if (vec) {
                const float4 g4 = *(const float4 *)(g + i), a4 = *(const float4 *)(m1 + i),
                             b4 = *(const float4 *)(m2 + i), w4 = *(const float4 *)(w + i);
                gv[0] = g4.x, gv[1] = g4.y, gv[2] = g4.z, gv[3] = g4.w;
                a[0] = a4.x, a[1] = a4.y, a[2] = a4.z, a[3] = a4.w;
                b[0] = b4.x, b[1] = b4.y, b[2] = b4.z, b[3] = b4.w;
                wv[0] = w4.x, wv[1] = w4.y, wv[2] = w4.z, wv[3] = w4.w;
            } else {
                gv[0] = g[i], a[0] = m1[i], b[0] = m2[i], wv[0] = w[i];
            }
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float gi = gv[e] * gscale;
                a[e] = beta1 * a[e] + ob1 * gi;
                b[e] = beta2 * b[e] + ob2 * (gi * gi);
                wv[e] = (wv[e] - alpha * (a[e] / (sqrtf(b[e]) + eps))) * decay;
            }
            if (vec) {
                *(float4 *)(m1 + i) = make_float4(a[0], a[1], a[2], a[3]);
                *(float4 *)(m2 + i) = make_float4(b[0], b[1], b[2], b[3]);
                *(float4 *)(w + i) = make_float4(wv[0], wv[1], wv[2], wv[3]);
                if (wa) {
                    uint2 u;
                    u.x = (unsigned)fat5_f32_to_bf16_rne(wv[0]) | ((unsigned)fat5_f32_to_bf16_rne(wv[1]) << 16);
                    u.y = (unsigned)fat5_f32_to_bf16_rne(wv[2]) | ((unsigned)fat5_f32_to_bf16_rne(wv[3]) << 16);
                    *(uint2 *)(wa + i) = u;
                }
            } else {
                m1[i] = a[0];
                m2[i] = b[0];
                w[i] = wv[0];
                if (wa) wa[i] = fat5_f32_to_bf16_rne(wv[0]);
            }
        }
    }
}
#endif

// fat5_adafactor_seg(float *w, const float *g, float *m1 or NULL, float *v, const long long *tab,
// int n_seg, long long n_rows, long long n_cols, const float *coef[2 n_seg], const double *stats[2],
// const int *decayed[n_seg], float beta2t, float omb2t, float eps1, float clip, float beta1, float wd,
// double *scratch[n_rows + 2 n_seg], unsigned short *wa, int phase): Adafactor (transformers'
// Adafactor.step) over every segment, launched six times, phase 0 .. 5, blockDim 256.
// tab[8 s ..]: offset, numel, R, C, factored, voff, row0, col0 of segment s: an R x C row-major
// tensor (a 1-D one: R = 1, C = numel), its second moments at v + voff (factored: the R row
// averages then the C column averages; else numel of them), its first row among all segments'
// rows (row0, non-decreasing) and first column among the factored segments' columns (col0). With
// g' = (float)stats[1] g (clipping) and e = g' g' + eps1 (fp32):
//   phase 0 (one block per row): factored: row_i = beta2t row_i + omb2t (float)(sum_c e / C);
//            else v = beta2t v + omb2t e, element-wise;
//   phase 1 (one thread per factored column, rows in order): col_c = beta2t col_c + omb2t
//            (float)(sum_r e / R);
//   phase 2 (one warp per segment): scratch[n_rows + n_seg + s] = (float)(sum_i row_i / R) (factored);
//   phase 3 (one block per row): scratch[row] = sum over the row of u^2, u = g' / sqrt(row_i / mean) /
//            sqrt(col_c) (factored: rsqrt(row_i / mean) rsqrt(col_c) g', in that order), or
//            g' / sqrt(v) (rsqrt(v) g');
//   phase 4 (one warp per segment): scratch[n_rows + s] = the sum of its rows' scratch, in order;
//   phase 5 (one block per row): u = (u / max(1, (float)sqrt(ss / numel) / clip)) lr, lr = coef[2 s];
//            with m1: m1 = beta1 m1 + (1 - beta1) u, u = m1; decayed[s]: w = w + (-wd lr) w;
//            w = w - u; wa (bf16 operands) refreshed when not NULL.
// Nothing at all when stats[0] (the gradient norm) is not finite. Sums in double, each in a fixed
// order (per-thread strides, then a fixed butterfly); element-wise arithmetic in fp32 with
// explicit roundings (no contraction): the CPU twin's operations, fat5__cpu_adafactor_seg.
#if FAT5_IN_PART(0)
__device__ __forceinline__ int fat5_af_seg_of(const long long *tab, int n_seg, int field, long long x)
{
    int lo = 0, hi = n_seg - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tab[8 * mid + field] <= x) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// the update direction of one element (before the RMS clipping and the rate)
__device__ __forceinline__ float fat5_af_dir(float gi, const float *vs, int fac, long long R, long long i,
                                             long long c, float rmean)
{
    if (fac) {
        const float rf = __fdiv_rn(1.0f, __fsqrt_rn(__fdiv_rn(vs[i], rmean)));
        const float cf = __fdiv_rn(1.0f, __fsqrt_rn(vs[R + c]));
        return __fmul_rn(__fmul_rn(rf, cf), gi);
    }
    return __fmul_rn(__fdiv_rn(1.0f, __fsqrt_rn(vs[c])), gi);   // a 1-D tensor: its one row
}

// the sum of v over the block in a fixed order (every thread gets it); red: 32 doubles of shared memory
__device__ __forceinline__ double fat5_af_block_sum(double v, double *red)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = fat5_warp_sum_f64(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nwarps ? red[lane] : 0.0;
    return fat5_warp_sum_f64(v);
}

extern "C" __global__ void fat5_adafactor_seg(float *w, const float *g, float *m1, float *v, const long long *tab,
                                              int n_seg, long long n_rows, long long n_cols, const float *coef,
                                              const double *stats, const int *decayed, float beta2t, float omb2t,
                                              float eps1, float clip, float beta1, float wd, double *scratch,
                                              unsigned short *wa, int phase)
{
    __shared__ double red[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const float gs = (float)stats[1];
    if (!isfinite(stats[0])) return;
    if (phase == 1) {
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n_cols;
             j += (long long)gridDim.x * blockDim.x) {
            const int s = fat5_af_seg_of(tab, n_seg, 7, j);
            const long long off = tab[8 * s], R = tab[8 * s + 2], C = tab[8 * s + 3], c = j - tab[8 * s + 7];
            float *vs = v + tab[8 * s + 5];
            double acc = 0.0;
            for (long long i = 0; i < R; i++) {
                const float gi = __fmul_rn(g[off + i * C + c], gs);
                acc += (double)__fadd_rn(__fmul_rn(gi, gi), eps1);
            }
            vs[R + c] = __fadd_rn(__fmul_rn(beta2t, vs[R + c]), __fmul_rn(omb2t, (float)(acc / (double)R)));
        }
        return;
    }
    if (phase == 2 || phase == 4) {
        for (long long s = (long long)blockIdx.x * nwarps + warp; s < n_seg; s += (long long)gridDim.x * nwarps) {
            double acc = 0.0;
            if (phase == 2) {
                const long long R = tab[8 * s + 2];
                const float *vs = v + tab[8 * s + 5];
                if (!tab[8 * s + 4]) continue;
                for (long long i = lane; i < R; i += 32) acc += (double)vs[i];
                acc = fat5_warp_sum_f64(acc);
                if (lane == 0) scratch[n_rows + n_seg + s] = (double)(float)(acc / (double)R);
            } else {
                const long long r0 = tab[8 * s + 6], nr = tab[8 * s + 4] ? tab[8 * s + 2] : 1;
                for (long long i = lane; i < nr; i += 32) acc += scratch[r0 + i];
                acc = fat5_warp_sum_f64(acc);
                if (lane == 0) scratch[n_rows + s] = acc;
            }
        }
        return;
    }
    // phases 0, 3, 5: one block per row
    for (long long r = blockIdx.x; r < n_rows; r += gridDim.x) {
        const int s = fat5_af_seg_of(tab, n_seg, 6, r);
        const long long off = tab[8 * s], numel = tab[8 * s + 1], R = tab[8 * s + 2], C = tab[8 * s + 3];
        const int fac = (int)tab[8 * s + 4];
        const long long i = r - tab[8 * s + 6], base = off + i * C;
        float *vs = v + tab[8 * s + 5];
        if (phase == 0) {
            double acc = 0.0;
            for (long long c = threadIdx.x; c < C; c += blockDim.x) {
                const float gi = __fmul_rn(g[base + c], gs), e = __fadd_rn(__fmul_rn(gi, gi), eps1);
                if (fac) acc += (double)e;
                else vs[c] = __fadd_rn(__fmul_rn(beta2t, vs[c]), __fmul_rn(omb2t, e));
            }
            if (fac) {
                acc = fat5_af_block_sum(acc, red);
                if (threadIdx.x == 0)
                    vs[i] = __fadd_rn(__fmul_rn(beta2t, vs[i]), __fmul_rn(omb2t, (float)(acc / (double)C)));
            }
        } else if (phase == 3) {
            const float rmean = fac ? (float)scratch[n_rows + n_seg + s] : 1.0f;
            double acc = 0.0;
            for (long long c = threadIdx.x; c < C; c += blockDim.x) {
                const float u = fat5_af_dir(__fmul_rn(g[base + c], gs), vs, fac, R, i, c, rmean);
                acc += (double)u * (double)u;
            }
            acc = fat5_af_block_sum(acc, red);
            if (threadIdx.x == 0) scratch[r] = acc;
        } else {
            const float rmean = fac ? (float)scratch[n_rows + n_seg + s] : 1.0f, lr = coef[2 * s];
            const float dec = decayed[s] ? (float)(-(double)wd * (double)lr) : 0.0f, ob1 = 1.0f - beta1;
            float den = __fdiv_rn((float)sqrt(scratch[n_rows + s] / (double)numel), clip);
            if (den < 1.0f) den = 1.0f;
            for (long long c = threadIdx.x; c < C; c += blockDim.x) {
                const long long k = base + c;
                float u = fat5_af_dir(__fmul_rn(g[k], gs), vs, fac, R, i, c, rmean), wk = w[k];
                u = __fmul_rn(__fdiv_rn(u, den), lr);
                if (m1) {
                    m1[k] = __fadd_rn(__fmul_rn(beta1, m1[k]), __fmul_rn(ob1, u));
                    u = m1[k];
                }
                if (dec != 0.0f) wk = __fadd_rn(wk, __fmul_rn(dec, wk));
                wk = __fsub_rn(wk, u);
                w[k] = wk;
                if (wa) wa[k] = fat5_f32_to_bf16_rne(wk);
            }
        }
    }
}
#endif
