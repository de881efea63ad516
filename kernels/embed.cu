// kernels/embed.cu — token embedding lookup and its gradient.
//
// One block per row (grid-stride over rows), threads over the D columns: coalesced reads and
// writes. Token ids must be valid rows of the table (the host checks them).

// fat5_embed_fwd(float *out[T,D], const float *table[V,D], const int *tok[T], long long T, int D):
// out[t] = table[tok[t]]. CPU twin: fat5__cpu_embed_fwd.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_embed_fwd(float *out, const float *table, const int *tok, long long T, int D)
{
    fat5_pdl_begin();
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        const float *src = table + (long long)tok[t] * D;
        float *dst = out + t * D;
        for (int j = threadIdx.x; j < D; j += blockDim.x) dst[j] = src[j];
    }
}
#endif

// fat5_embed_bwd(float *dtable[V,D], const float *dout[T,D], const int *tok[T], long long T, int D):
// dtable[tok[t]] += dout[t], deterministically: block b of G = gridDim.x owns the table rows
// v = b (mod G). It scans all tokens in order, chunk by chunk (blockDim.x tokens, at most 1024,
// a multiple of 32), compacts the positions of its own tokens in token order (warp ballots), then
// adds their dout rows one after the other, threads over the D columns. Each element of the table
// is thus written by one thread, which adds the rows of its token in token order: the same float
// additions, in the same order, as the CPU twin, so the result is bit-identical to it and to
// itself (no atomics). Cost: every block reads the T token ids (T G int reads, from L2); a token
// that repeats n times costs its block n sequential row additions, in registers while the block's
// tokens repeat one after another (a frequent token: EOS, a sentinel, a space), through the table
// otherwise. CPU twin: fat5__cpu_embed_bwd.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_embed_bwd(float *dtable, const float *dout, const int *tok, long long T, int D)
{
    __shared__ int list[1024];
    __shared__ int wcount[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const unsigned G = gridDim.x, b = blockIdx.x;
    for (long long c0 = 0; c0 < T; c0 += blockDim.x) {
        const long long t = c0 + threadIdx.x;
        const int mine = t < T && (unsigned)tok[t] % G == b;
        const unsigned bal = __ballot_sync(FAT5_FULL_MASK, mine);
        if (lane == 0) wcount[warp] = __popc(bal);
        __syncthreads();
        int base = 0, total = 0;
        for (int w = 0; w < nwarps; w++) {
            const int n = wcount[w];
            base += w < warp ? n : 0;
            total += n;
        }
        if (mine) list[base + __popc(bal & ((1u << lane) - 1u))] = threadIdx.x;
        __syncthreads();
        // each thread over its columns; a run of one token's rows is summed in a register (loaded
        // from the table at the run's start, stored at its end): the same additions in the same order
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            int cur = -1;
            float acc = 0.0f;
            for (int k = 0; k < total; k++) {
                const long long tt = c0 + list[k];
                const int id = tok[tt];
                if (id != cur) {
                    if (cur >= 0) dtable[(long long)cur * D + j] = acc;
                    cur = id;
                    acc = dtable[(long long)id * D + j];
                }
                acc += dout[tt * D + j];
            }
            if (cur >= 0) dtable[(long long)cur * D + j] = acc;
        }
        __syncthreads();  // list and wcount are rewritten by the next chunk
    }
}
#endif
