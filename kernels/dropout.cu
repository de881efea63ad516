// kernels/dropout.cu — dropout at the elementwise sites of training (token embeddings, sub-layer
// outputs before the residual add, the stacks' final norms), and the raw draws of the generator.
//
// The masks come from fat5_drop_block / fat5_drop_lane (kernels/00_common.cu), the device twin of
// fat5.h's generator: a pure function of (seed, stream, index), so that the backward regenerates
// its forward's mask. Element i of a buffer is index i (its flat position). The FFN's hidden
// activation is dropped inside fat5_act_fwd / fat5_act_bwd (ffn.cu), the same way.

// fat5_dropout(void *y[n], const void *x[n], long long n, int mode, unsigned long long seed,
// unsigned long long stream, unsigned thresh, float scale): y = x * m, m = scale where element i is
// kept (draw >= thresh), else 0, with the buffers' types by mode:
//   0: float y = drop(float x)     1: float y += drop(float x) (the residual add)
//   2: act_t y = drop(float x)     3: act_t y = drop(act_t x)
// y may alias x (each element is read before it is written). One thread per block of 8 elements:
// one Philox block each, read and written by 16-byte accesses when the block is whole and the
// buffers aligned (else element by element). The product x * m is rounded before the add (no FMA),
// as the CPU twin fat5__cpu_dropout computes it.
template <int mode>
__device__ __forceinline__ void fat5_dropout_t(void *y, const void *x, long long n, unsigned long long seed,
                                               unsigned long long stream, unsigned int thresh, float scale)
{
    const long long nb = (n + 7) >> 3, stride = (long long)blockDim.x * gridDim.x;
    // 16-byte accesses (both buffers 16-byte aligned): a block is two float4 of fp32, or one
    // uint4 of bf16
    const int ysz = mode <= 1 ? 4 : (int)sizeof(act_t), xsz = mode == 3 ? (int)sizeof(act_t) : 4;
    const bool vec = (((unsigned long long)y | (unsigned long long)x) & 15ull) == 0;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        const uint4 w = fat5_drop_block(seed, stream, (unsigned long long)b);
        if (vec && 8 * b + 8 <= n) {
            float xv[8], yv[8];
            if (xsz == 4) {
                const float4 a = ((const float4 *)x)[2 * b], c = ((const float4 *)x)[2 * b + 1];
                xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w, xv[4] = c.x, xv[5] = c.y, xv[6] = c.z, xv[7] = c.w;
            } else {
                fat5_ld16((const act_t *)x + 8 * b, xv);
            }
            if (mode == 1) {
                const float4 a = ((const float4 *)y)[2 * b], c = ((const float4 *)y)[2 * b + 1];
                yv[0] = a.x, yv[1] = a.y, yv[2] = a.z, yv[3] = a.w, yv[4] = c.x, yv[5] = c.y, yv[6] = c.z, yv[7] = c.w;
            }
#pragma unroll
            for (int e = 0; e < 8; e++) {
                const float v = __fmul_rn(xv[e], fat5_drop_mul(w, e, thresh, scale));
                yv[e] = mode == 1 ? yv[e] + v : v;
            }
            if (ysz == 4) {
                ((float4 *)y)[2 * b] = make_float4(yv[0], yv[1], yv[2], yv[3]);
                ((float4 *)y)[2 * b + 1] = make_float4(yv[4], yv[5], yv[6], yv[7]);
            } else {
                fat5_st16((act_t *)y + 8 * b, yv);
            }
            continue;
        }
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const long long i = 8 * b + e;
            if (i >= n) break;
            const float xv = mode == 3 ? fat5_ld(((const act_t *)x)[i]) : ((const float *)x)[i];
            const float v = __fmul_rn(xv, fat5_drop_mul(w, e, thresh, scale));
            if (mode == 0) ((float *)y)[i] = v;
            else if (mode == 1) ((float *)y)[i] = ((float *)y)[i] + v;
            else ((act_t *)y)[i] = fat5_st(v);
        }
    }
}

#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_dropout(void *y, const void *x, long long n, int mode, unsigned long long seed,
                                        unsigned long long stream, unsigned int thresh, float scale)
{
    switch (mode) {
    case 0: fat5_dropout_t<0>(y, x, n, seed, stream, thresh, scale); break;
    case 1: fat5_dropout_t<1>(y, x, n, seed, stream, thresh, scale); break;
    case 2: fat5_dropout_t<2>(y, x, n, seed, stream, thresh, scale); break;
    default: fat5_dropout_t<3>(y, x, n, seed, stream, thresh, scale); break;
    }
}
#endif

// fat5_drop_draws(int *out[n], const long long *stream[n], const long long *index[n], long long n,
// unsigned long long seed): out[i] = the 16-bit draw of element index[i] of mask (seed, stream[i]).
// The generator alone, for tests that compare it with the C one. CPU twin: fat5__cpu_drop_draws.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_drop_draws(int *out, const long long *stream, const long long *index, long long n,
                                           unsigned long long seed)
{
    const long long st = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += st) {
        const unsigned long long ix = (unsigned long long)index[i];
        out[i] = (int)fat5_drop_lane(fat5_drop_block(seed, (unsigned long long)stream[i], ix >> 3), (int)(ix & 7));
    }
}
#endif
