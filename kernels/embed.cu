// kernels/embed.cu — token embedding lookup and its gradient.
//
// One block per row (grid-stride over rows), threads over the D columns: coalesced reads and
// writes. Token ids must be valid rows of the table (the host checks them).

// fat5_embed_fwd(float *out[T,D], const float *table[V,D], const int *tok[T], long long T, int D):
// out[t] = table[tok[t]]. CPU twin: fat5__cpu_embed_fwd.
extern "C" __global__ void fat5_embed_fwd(float *out, const float *table, const int *tok, long long T, int D)
{
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        const float *src = table + (long long)tok[t] * D;
        float *dst = out + t * D;
        for (int j = threadIdx.x; j < D; j += blockDim.x) dst[j] = src[j];
    }
}

// fat5_embed_bwd(float *dtable[V,D], const float *dout[T,D], const int *tok[T], long long T, int D):
// dtable[tok[t]] += dout[t] (atomicAdd: a token may repeat; the summation order is not fixed).
// CPU twin: fat5__cpu_embed_bwd.
extern "C" __global__ void fat5_embed_bwd(float *dtable, const float *dout, const int *tok, long long T, int D)
{
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        float *dst = dtable + (long long)tok[t] * D;
        const float *src = dout + t * D;
        for (int j = threadIdx.x; j < D; j += blockDim.x) atomicAdd(dst + j, src[j]);
    }
}
