// kernels/global.cu — LongT5's transient-global tokens: block sums of the normed inputs and their
// backward.
//
// A sequence s of n tokens has G = n / g global tokens, rows cu_g[s] .. cu_g[s+1] of the
// attention's k and v; block b of s is tokens [b g, (b + 1) g), its last block running to the end
// of s (LongT5's orphans). Both kernels are plain loops, one thread per output element, summing in
// token order in fp32 (deterministic; the CPU sums in double).

// fat5_block_sum(float *out[G,D], const act_t *x[T,D], const int *cu, const int *cu_g,
// const int *seq, long long G, int D, int g): out row r = sum of x over the tokens of the block of
// global row cu_g[0] + r (sequence seq[cu_g[0] + r]). CPU twin: fat5__cpu_block_sum.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_block_sum(float *out, const act_t *x, const int *cu, const int *cu_g, const int *seq,
                                          long long G, int D, int g)
{
    long long n = G * D, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        long long r = e / D, row = cu_g[0] + r;
        int j = (int)(e - r * D), s = seq[row];
        long long b = row - cu_g[s], t0 = cu[s] + b * g, t1 = row + 1 == cu_g[s + 1] ? cu[s + 1] : t0 + g;
        float acc = 0.0f;
        for (long long t = t0; t < t1; t++) acc += fat5_ld(x[t * D + j]);
        out[e] = acc;
    }
}
#endif

// fat5_block_sum_bwd(float *dx[T,D], const float *dout[G,D], const int *cu, const int *cu_g,
// const int *seq, long long T, int D, int g): dx[t] += dout[its global's row - cu_g[0]] for every
// token of a sequence with globals (the others are left as they are). CPU twin:
// fat5__cpu_block_sum_bwd.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_block_sum_bwd(float *dx, const float *dout, const int *cu, const int *cu_g,
                                              const int *seq, long long T, int D, int g)
{
    long long n = T * D, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        long long t = e / D;
        int j = (int)(e - t * D), s = seq[t];
        long long G = cu_g[s + 1] - cu_g[s];
        if (G == 0) continue;
        long long b = (t - cu[s]) / g;
        if (b > G - 1) b = G - 1;
        dx[e] += dout[(cu_g[s] - cu_g[0] + b) * D + j];
    }
}
#endif
