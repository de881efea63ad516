// kernels/mm.cu — matrix products of a few rows (decoding): C = A W^T with W read once per group of
// up to FAT5_MM_ROWS rows, and the decoder's fused "normalise, then project" step.
//
// A decode step multiplies 1..64 rows by every weight of the layer; cuBLAS tiles are built for
// hundreds of rows, so at one row each product costs a few microseconds of fixed overhead and reads
// the weight no faster. Here a warp computes two outputs (two rows of W) for a group of up to
// FAT5_MM_ROWS input rows: lanes walk K in 16-byte vectors of W (8 bf16 or 4 fp32), every vector
// of W multiplied into all rows of the group, and the lanes' partial sums are added by the fixed
// butterfly of fat5_warp_sum: deterministic, fp32 accumulation like cuBLAS's CUBLAS_COMPUTE_32F.
// Blocks of FAT5_MM_WARPS warps; grid x over the outputs, y over row groups (grid-stride both).
// Without 16-byte alignment (K not a multiple of 16 / sizeof(act_t), or an unaligned buffer) the
// same kernels read one element at a time (vec = 0).

#define FAT5_MM_ROWS 16  // FAT5__MM_ROWS in fat5.h: input rows per group
#define FAT5_MM_WARPS 4  // warps per block; each warp two outputs (norm_mm gated: one)

// E elements of act_t from p (E = FAT5_VEC_E, 16 bytes, when VEC; one element otherwise) into f
template <bool VEC>
__device__ __forceinline__ void fat5_mm_load(const act_t *p, float *f)
{
    if (VEC)
        fat5_ld16(p, f);
    else
        f[0] = fat5_ld(p[0]);
}

// E floats from p (E = FAT5_VEC_E in 16-byte loads when VEC, p 16-byte aligned; one float otherwise)
template <bool VEC>
__device__ __forceinline__ void fat5_mm_ldf(const float *p, float *f)
{
    if (VEC) {
#pragma unroll
        for (int i = 0; i < FAT5_VEC_E; i += 4) {
            const float4 v = *(const float4 *)(p + i);
            f[i] = v.x;
            f[i + 1] = v.y;
            f[i + 2] = v.z;
            f[i + 3] = v.w;
        }
    } else {
        f[0] = p[0];
    }
}

// One warp: acc[m][o] = sum_k a(m, k) W_o[k] for the rows m < mg (<= R) of the group and the weight
// rows wa, wb (wb may be 0: acc[.][1] stays 0), then summed over the lanes (every lane holds every
// sum). a(m, k) is A[m k] (NORM false: A rows of K act_t) or the normalised act_t value
// act(g[k] (x[m k] r_m)) of rmsnorm_fwd (NORM true: x rows of K floats; the warp finds
// r_m = 1 / sqrt(mean(x_m^2) + eps) itself first, no block barrier). The loops over K are unrolled
// so that a lane's loads of several vectors are in flight together: at one row the product is
// bound by memory latency, not bandwidth.
template <int R, bool VEC, bool NORM>
__device__ __forceinline__ void fat5_mm_warp(float (&acc)[R][2], const act_t *A, const float *x, const float *g,
                                             float eps, int mg, const act_t *wa, const act_t *wb, int K)
{
    const int lane = threadIdx.x & 31;
    const int E = VEC ? FAT5_VEC_E : 1;
    float rt[R];
#pragma unroll
    for (int m = 0; m < R; m++) {
        acc[m][0] = acc[m][1] = 0.0f;
        rt[m] = 0.0f;
        if (NORM && m < mg) {
            const float *xr = x + (long long)m * K;
            float ss = 0.0f;
            if (VEC) {
#pragma unroll 4
                for (int k = lane * 4; k < K; k += 128) {
                    const float4 v = *(const float4 *)(xr + k);
                    ss = fmaf(v.x, v.x, ss);
                    ss = fmaf(v.y, v.y, ss);
                    ss = fmaf(v.z, v.z, ss);
                    ss = fmaf(v.w, v.w, ss);
                }
            } else {
#pragma unroll 4
                for (int k = lane; k < K; k += 32) ss = fmaf(xr[k], xr[k], ss);
            }
            ss = fat5_warp_sum(ss);
            rt[m] = 1.0f / sqrtf(ss / (float)K + eps);
        }
    }
#pragma unroll 4
    for (int k = lane * E; k < K; k += 32 * E) {
        float fa[E], fb[E], gv[E];
        fat5_mm_load<VEC>(wa + k, fa);
        if (wb) {
            fat5_mm_load<VEC>(wb + k, fb);
        } else {
#pragma unroll
            for (int e = 0; e < E; e++) fb[e] = 0.0f;
        }
        if (NORM) fat5_mm_ldf<VEC>(g + k, gv);
#pragma unroll
        for (int m = 0; m < R; m++) {
            if (m < mg) {
                float av[E];
                if (NORM) {
                    fat5_mm_ldf<VEC>(x + (long long)m * K + k, av);
#pragma unroll
                    for (int e = 0; e < E; e++) av[e] = fat5_ld(fat5_st(gv[e] * (av[e] * rt[m])));
                } else {
                    fat5_mm_load<VEC>(A + (long long)m * K + k, av);
                }
#pragma unroll
                for (int e = 0; e < E; e++) {
                    acc[m][0] = fmaf(av[e], fa[e], acc[m][0]);
                    acc[m][1] = fmaf(av[e], fb[e], acc[m][1]);
                }
            }
        }
    }
#pragma unroll
    for (int m = 0; m < R; m++) {
        if (m < mg) {
            acc[m][0] = fat5_warp_sum(acc[m][0]);
            acc[m][1] = fat5_warp_sum(acc[m][1]);
        }
    }
}

// fat5_mm(void *C[M, N] (fp32 when c_f32, else act_t), int c_f32, const act_t *A[M, K],
// const act_t *W[N, K], long long M, int N, int K, float alpha, float beta, int vec):
// C = alpha A W^T + beta C (beta == 0 does not read C): the NT product of fat5__gpu_mm when M is
// small (fat5__gpu_mm picks it; CPU twin fat5__cpu_mm). Grid (ceil(N / (2 W)), row groups), W =
// FAT5_MM_WARPS warps a block. vec: 16-byte loads (A, W 16-byte aligned, K a multiple of 16 bytes).
template <int R, bool VEC>
__device__ __forceinline__ void fat5_mm_impl(void *C, int c_f32, const act_t *A, const act_t *W, long long M, int N,
                                             int K, float alpha, float beta)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (long long m0 = (long long)blockIdx.y * R; m0 < M; m0 += (long long)gridDim.y * R) {
        const int mg = (int)min((long long)R, M - m0);
        for (long long j0 = ((long long)blockIdx.x * FAT5_MM_WARPS + warp) * 2; j0 < N;
             j0 += (long long)gridDim.x * FAT5_MM_WARPS * 2) {
            float acc[R][2];
            fat5_mm_warp<R, VEC, false>(acc, A + m0 * K, 0, 0, 0.0f, mg, W + j0 * K, j0 + 1 < N ? W + (j0 + 1) * K : 0, K);
#pragma unroll
            for (int m = 0; m < R; m++)
#pragma unroll
                for (int o = 0; o < 2; o++) {
                    if (m < mg && lane == ((2 * m + o) & 31) && j0 + o < N) {
                        const long long e = (m0 + m) * N + j0 + o;
                        float r = alpha * acc[m][o];
                        if (c_f32) {
                            float *c = (float *)C;
                            if (beta != 0.0f) r = fmaf(beta, c[e], r);
                            c[e] = r;
                        } else {
                            act_t *c = (act_t *)C;
                            if (beta != 0.0f) r = fmaf(beta, fat5_ld(c[e]), r);
                            c[e] = fat5_st(r);
                        }
                    }
                }
        }
    }
}

#if FAT5_IN_PART(26)
extern "C" __global__ void fat5_mm(void *C, int c_f32, const act_t *A, const act_t *W, long long M, int N, int K,
                                   float alpha, float beta, int vec)
{
    fat5_pdl_begin();
    if (M == 1 && vec)  // one row (decoding one sequence): no loops over rows at all
        fat5_mm_impl<1, true>(C, c_f32, A, W, M, N, K, alpha, beta);
    else if (vec)
        fat5_mm_impl<FAT5_MM_ROWS, true>(C, c_f32, A, W, M, N, K, alpha, beta);
    else
        fat5_mm_impl<FAT5_MM_ROWS, false>(C, c_f32, A, W, M, N, K, alpha, beta);
}
#endif

// fat5_norm_mm(act_t *y0, act_t *y1, act_t *y2, const float *x[T, K], const float *g[K],
// const act_t *w0[N, K], const act_t *w1, const act_t *w2, long long T, int N, int K, float eps,
// int act, const int *rows, const int *kv_off, const int *pos, int vec): with xn = rmsnorm_fwd's
// act(g (x r)), r = 1 / sqrt(mean(x^2) + eps) per row,
//   act < 0:  y_s = act(xn W_s^T) for every s with w_s (w0 always; w1, w2 optional): the S N
//             outputs are walked as one list, two per warp;
//   act >= 0: y0 = act(f(act(xn W0^T)) * act(xn W1^T)) (gated; w1 given, w2 0) or act(f(act(xn W0^T)))
//             (w1 0), f the activation of fat5_act_fwd: one output per warp, W0 and W1 as its pair;
//   rows:     (act < 0 only) row i of y1 and y2 goes to row kv_off[rows[i]] + pos[rows[i]] (the cache
//             write of the decoder's new key and value), y0 stays row i.
// CPU twin fat5__cpu_norm_mm. Grid (output groups, row groups); each warp finds r of its rows
// itself. vec: 16-byte loads (x, g, the weights 16-byte aligned, K a multiple of 16 bytes of act_t).
template <int R, bool VEC>
__device__ __forceinline__ void fat5_norm_mm_impl(act_t *y0, act_t *y1, act_t *y2, const float *x, const float *g,
                                                  const act_t *w0, const act_t *w1, const act_t *w2, long long T,
                                                  int N, int K, float eps, int act, const int *rows,
                                                  const int *kv_off, const int *pos)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int S = act >= 0 ? 1 : w2 ? 3 : w1 ? 2 : 1, per = act >= 0 ? 1 : 2;
    const long long outs = (long long)S * N;
    for (long long m0 = (long long)blockIdx.y * R; m0 < T; m0 += (long long)gridDim.y * R) {
        const int mg = (int)min((long long)R, T - m0);
        for (long long j0 = ((long long)blockIdx.x * FAT5_MM_WARPS + warp) * per; j0 < outs;
             j0 += (long long)gridDim.x * FAT5_MM_WARPS * per) {
            float acc[R][2];
            const int s0 = (int)(j0 / N), s1 = (int)((j0 + 1) / N);
            const act_t *wa = (s0 == 0 ? w0 : s0 == 1 ? w1 : w2) + (j0 - (long long)s0 * N) * K;
            const act_t *wb = act >= 0 ? w1 ? w1 + j0 * K : 0
                              : j0 + 1 < outs ? (s1 == 0 ? w0 : s1 == 1 ? w1 : w2) + (j0 + 1 - (long long)s1 * N) * K
                                              : 0;
            fat5_mm_warp<R, VEC, true>(acc, 0, x + m0 * K, g, eps, mg, wa, wb, K);
#pragma unroll
            for (int m = 0; m < R; m++)
#pragma unroll
                for (int o = 0; o < 2; o++) {
                    if (m < mg && lane == ((2 * m + o) & 31) && (act >= 0 ? o == 0 : j0 + o < outs)) {
                        const long long i = m0 + m, jo = j0 + o;
                        const int s = (int)(jo / N);
                        const long long col = jo - (long long)s * N;
                        if (act >= 0) {
                            float f = fat5_act_eval(act, fat5_ld(fat5_st(acc[m][0])), 0);
                            if (w1) f *= fat5_ld(fat5_st(acc[m][1]));
                            y0[i * N + col] = fat5_st(f);
                        } else {
                            const long long r = s > 0 && rows ? (long long)kv_off[rows[i]] + pos[rows[i]] : i;
                            (s == 0 ? y0 : s == 1 ? y1 : y2)[r * N + col] = fat5_st(acc[m][o]);
                        }
                    }
                }
        }
    }
}

#if FAT5_IN_PART(27)
extern "C" __global__ void fat5_norm_mm(act_t *y0, act_t *y1, act_t *y2, const float *x, const float *g,
                                        const act_t *w0, const act_t *w1, const act_t *w2, long long T, int N, int K,
                                        float eps, int act, const int *rows, const int *kv_off, const int *pos,
                                        int vec)
{
    fat5_pdl_begin();
    if (T == 1 && vec)
        fat5_norm_mm_impl<1, true>(y0, y1, y2, x, g, w0, w1, w2, T, N, K, eps, act, rows, kv_off, pos);
    else if (vec)
        fat5_norm_mm_impl<FAT5_MM_ROWS, true>(y0, y1, y2, x, g, w0, w1, w2, T, N, K, eps, act, rows, kv_off, pos);
    else
        fat5_norm_mm_impl<FAT5_MM_ROWS, false>(y0, y1, y2, x, g, w0, w1, w2, T, N, K, eps, act, rows, kv_off, pos);
}
#endif
