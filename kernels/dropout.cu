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
// one Philox block each. The product x * m is rounded before the add (no FMA), as the CPU twin
// fat5__cpu_dropout computes it.
template <int mode>
__device__ __forceinline__ void fat5_dropout_t(void *y, const void *x, long long n, unsigned long long seed,
                                               unsigned long long stream, unsigned int thresh, float scale)
{
    const long long nb = (n + 7) >> 3, stride = (long long)blockDim.x * gridDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        const uint4 w = fat5_drop_block(seed, stream, (unsigned long long)b);
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
