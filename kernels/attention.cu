// kernels/attention.cu — T5 attention over packed variable-length sequences: forward and the three
// backward kernels (delta, dq + bias-table gradient, dk/dv).
//
// Simple, exact-arithmetic version (a tiled tensor-core kernel is a later issue): one warp per
// (token, head), fp32 throughout, online softmax in the forward.
//   - Scores: lanes over keys (or queries in dk/dv): lane l takes keys l, l+32, ...; each computes
//     its full dot product against the warp's own row, which is cached as fp32 in shared memory
//     (a broadcast read), reading its key row with vector loads when dk and alignment allow.
//   - Outputs: lanes over dims (d = lane + 32 r, r < R, dk <= 32 R), so each key's value row is read
//     coalesced while p (or ds) is broadcast from the lane that computed it with a shuffle.
//   - A block holds W = blockDim.x / 32 warps of one head (blockIdx.y = head) on consecutive
//     tokens (grid-stride over tokens in x), so the bias column [nb] of the head and the bucket
//     lookup table are cached in shared memory once per block when the launcher gave room for them
//     (else read from global memory). Any W works; the launcher uses 4.
// The lookup table must hold lut[n] = fat5__rel_bucket(-n, kind == 1, nb, md) for n < md; this
// equals fat5__rel_bucket everywhere when md >= the exact-bucket count (nb/4 bidirectional, nb/2
// causal), as in every T5 configuration.
//
// Layout: q, k, v, o, dout rows have stride H*dk; head h is columns h*dk .. h*dk+dk-1.
// Sequences: cu_q / cu_k [n_seq+1] offsets; q_seq[t] (k_seq[j]) = sequence of query t (key j).
// Positions are relative to the sequence starts; rel = key position - query position.
// kind 0 cross (no bias, every key of the sequence), 1 bidirectional, 2 causal (keys j <= i).
// No 1/sqrt(dk) scale (T5). bias is [nb, H] fp32 (NULL: no bias, e.g. cross-attention).
// lut[n] (n < max_distance) is the host-computed bucket of distance n (fat5__rel_bucket), so the
// GPU and CPU agree bit for bit:
//   kind 1: n = |rel|,         bucket = (n < md ? lut[n] : nb/2 - 1) + (rel > 0 ? nb/2 : 0)
//   else:   n = max(-rel, 0),  bucket = n < md ? lut[n] : nb - 1
// A query with no keys gets o = 0 and lse = -inf (cannot happen in valid batches).

#define FAT5_ATTN_MAX_DK 256

__device__ __forceinline__ int fat5_attn_bucket(int rel, int kind, const int *lut, int nb, int md)
{
    if (kind == 1) {
        const int n = rel < 0 ? -rel : rel;
        return (n < md ? lut[n] : nb / 2 - 1) + (rel > 0 ? nb / 2 : 0);
    }
    const int n = rel < 0 ? -rel : 0;
    return n < md ? lut[n] : nb - 1;
}

// Width (elements) of the vector loads usable for rows of dk act_t elements starting at multiples
// of dk elements from the given base pointers: 8 or 4 (bf16) / 4 or 2 (fp32), else 1.
__device__ __forceinline__ int fat5_attn_vec_width(int dk, const void *p0, const void *p1)
{
    const unsigned long long a = (unsigned long long)p0 | (unsigned long long)p1;
#if FAT5_ACT_BF16
    if ((dk & 7) == 0 && (a & 15) == 0) return 8;
    if ((dk & 3) == 0 && (a & 7) == 0) return 4;
#else
    if ((dk & 3) == 0 && (a & 15) == 0) return 4;
    if ((dk & 1) == 0 && (a & 7) == 0) return 2;
#endif
    return 1;
}

#if FAT5_ACT_BF16
__device__ __forceinline__ float fat5_bf16_lo(unsigned int u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float fat5_bf16_hi(unsigned int u) { return __uint_as_float(u & 0xffff0000u); }
#endif

// sum over d < dk of s[d] * row[d]: s is fp32 in shared memory (16-byte aligned when vw > 1: its
// offset is a multiple of dk floats), row is act_t in global memory; vw from fat5_attn_vec_width.
__device__ __forceinline__ float fat5_attn_dot(const float *s, const act_t *row, int dk, int vw)
{
    float a0 = 0.0f, a1 = 0.0f;
#if FAT5_ACT_BF16
    if (vw == 8) {
        const uint4 *r8 = (const uint4 *)row;
        const float4 *s4 = (const float4 *)s;
        for (int c = 0; c < (dk >> 3); c++) {
            const uint4 u = r8[c];
            const float4 x = s4[2 * c], y = s4[2 * c + 1];
            a0 = fmaf(x.x, fat5_bf16_lo(u.x), a0);
            a1 = fmaf(x.y, fat5_bf16_hi(u.x), a1);
            a0 = fmaf(x.z, fat5_bf16_lo(u.y), a0);
            a1 = fmaf(x.w, fat5_bf16_hi(u.y), a1);
            a0 = fmaf(y.x, fat5_bf16_lo(u.z), a0);
            a1 = fmaf(y.y, fat5_bf16_hi(u.z), a1);
            a0 = fmaf(y.z, fat5_bf16_lo(u.w), a0);
            a1 = fmaf(y.w, fat5_bf16_hi(u.w), a1);
        }
        return a0 + a1;
    }
    if (vw == 4) {
        const uint2 *r4 = (const uint2 *)row;
        const float4 *s4 = (const float4 *)s;
        for (int c = 0; c < (dk >> 2); c++) {
            const uint2 u = r4[c];
            const float4 x = s4[c];
            a0 = fmaf(x.x, fat5_bf16_lo(u.x), a0);
            a1 = fmaf(x.y, fat5_bf16_hi(u.x), a1);
            a0 = fmaf(x.z, fat5_bf16_lo(u.y), a0);
            a1 = fmaf(x.w, fat5_bf16_hi(u.y), a1);
        }
        return a0 + a1;
    }
#else
    if (vw == 4) {
        const float4 *r4 = (const float4 *)row;
        const float4 *s4 = (const float4 *)s;
        for (int c = 0; c < (dk >> 2); c++) {
            const float4 u = r4[c], x = s4[c];
            a0 = fmaf(x.x, u.x, a0);
            a1 = fmaf(x.y, u.y, a1);
            a0 = fmaf(x.z, u.z, a0);
            a1 = fmaf(x.w, u.w, a1);
        }
        return a0 + a1;
    }
    if (vw == 2) {
        const float2 *r2 = (const float2 *)row;
        const float2 *s2 = (const float2 *)s;
        for (int c = 0; c < (dk >> 1); c++) {
            const float2 u = r2[c], x = s2[c];
            a0 = fmaf(x.x, u.x, a0);
            a1 = fmaf(x.y, u.y, a1);
        }
        return a0 + a1;
    }
#endif
    for (int d = 0; d < dk; d++) a0 = fmaf(s[d], fat5_ld(row[d]), a0);
    return a0;
}

// Bias column and bucket table of head h: shared-memory copies when the launch has room for them
// after `base_bytes` of per-warp rows (layout: [nb] floats, then [md] ints, then `extra` more floats),
// else the global arrays. Every thread of the block must call (it may synchronise the block).
struct fat5_attn_tables {
    const float *bias;  // bias of bucket b is bias[b * bstride]
    int bstride;
    const int *lut;
    float *extra;       // the `extra` floats after the tables (NULL when not cached)
};

__device__ __forceinline__ fat5_attn_tables fat5_attn_load_tables(const float *bias, const int *lut, int h, int H,
                                                                  int nb, int md, int base_floats, int extra)
{
    fat5_attn_tables t;
    t.bias = bias ? bias + h : 0;
    t.bstride = H;
    t.lut = lut;
    t.extra = 0;
    if (bias && 4LL * ((long long)base_floats + nb + md + extra) <= (long long)fat5_dyn_smem_bytes()) {
        float *sb = (float *)fat5_smem + base_floats;
        int *sl = (int *)(sb + nb);
        for (int b = threadIdx.x; b < nb; b += blockDim.x) sb[b] = bias[(long long)b * H + h];
        for (int n = threadIdx.x; n < md; n += blockDim.x) sl[n] = lut[n];
        t.bias = sb;
        t.bstride = 1;
        t.lut = sl;
        t.extra = (float *)(sl + md);
        for (int b = threadIdx.x; b < extra; b += blockDim.x) t.extra[b] = 0.0f;
        __syncthreads();
    }
    return t;
}

// ----- forward -----------------------------------------------------------------------------------

// One warp's online softmax over keys [j0, j1) of a query at position qpos (sq: the query in
// shared memory, fp32): lanes over keys for the scores (with the bucket bias when bias is not 0,
// bucket b at bias[b * bstride]), lanes over dims for the values. Updates the running max m, the
// sum lsum of exp(score - m) (summed over the warp on return) and acc[r] = sum exp(score - m) v
// for dims lane + 32 r. Shared by the forward's per-token warp and the decode splits.
template <int R>
__device__ __forceinline__ void fat5_attn_warp_keys(const float *sq, const act_t *kbase, const act_t *vbase,
                                                    long long ld, int dk, int vw, const float *bias, int bstride,
                                                    const int *lut, int kind, int nb, int md, int qpos, int j0,
                                                    int j1, float &m, float &lsum, float (&acc)[R])
{
    const int lane = threadIdx.x & 31;
    for (int jb = j0; jb < j1; jb += 32) {
        const int j = jb + lane;
        float sc = -FAT5_INF;
        if (j < j1) {
            sc = fat5_attn_dot(sq, kbase + (long long)j * ld, dk, vw);
            if (bias) sc += bias[fat5_attn_bucket(j - qpos, kind, lut, nb, md) * bstride];
        }
        const float mnew = fmaxf(m, fat5_warp_max(sc));  // finite: key jb is valid
        const float corr = expf(m - mnew);                // 0 on the first chunk
        const float p = j < j1 ? expf(sc - mnew) : 0.0f;
        lsum = lsum * corr + p;                           // per lane; summed at the end
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] *= corr;
        const int cnt = min(32, j1 - jb);
        for (int jj = 0; jj < cnt; jj++) {
            const float pj = __shfl_sync(FAT5_FULL_MASK, p, jj);
            const act_t *vrow = vbase + (long long)(jb + jj) * ld;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int d = lane + 32 * r;
                if (d < dk) acc[r] = fmaf(pj, fat5_ld(vrow[d]), acc[r]);
            }
        }
        m = mnew;
    }
    lsum = fat5_warp_sum(lsum);
}


template <int R>
__device__ __forceinline__ void fat5_attn_fwd_impl(act_t *o, float *lse, const act_t *q, const act_t *k,
                                                   const act_t *v, const float *bias, const int *lut,
                                                   const int *cu_q, const int *cu_k, const int *q_seq, long long Tq,
                                                   int H, int dk, int kind, int nb, int md)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    const fat5_attn_tables tab = fat5_attn_load_tables(bias, lut, h, H, nb, md, nwarps * dk, 0);
    float *sq = (float *)fat5_smem + warp * dk;
    const int vw = fat5_attn_vec_width(dk, k, k);
    for (long long t = (long long)blockIdx.x * nwarps + warp; t < Tq; t += (long long)gridDim.x * nwarps) {
        const int s = q_seq[t], q0 = cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0;
        const int i = (int)(t - q0);
        const int nkeys = kind == 2 ? min(i + 1, nk) : nk;
        const act_t *qrow = q + t * ld + (long long)h * dk;
        const act_t *kbase = k + (long long)k0 * ld + (long long)h * dk;
        const act_t *vbase = v + (long long)k0 * ld + (long long)h * dk;
        float acc[R];
        float m = -FAT5_INF, lsum = 0.0f;
        for (int d = lane; d < dk; d += 32) sq[d] = fat5_ld(qrow[d]);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        __syncwarp();
        fat5_attn_warp_keys<R>(sq, kbase, vbase, ld, dk, vw, tab.bias, tab.bstride, tab.lut, kind, nb, md, i, 0, nkeys,
                               m, lsum, acc);
        act_t *orow = o + t * ld + (long long)h * dk;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int d = lane + 32 * r;
            if (d < dk) orow[d] = fat5_st(nkeys ? acc[r] / lsum : 0.0f);
        }
        if (lane == 0) lse[t * H + h] = nkeys ? m + logf(lsum) : -FAT5_INF;
        __syncwarp();  // sq is rewritten by the next token
    }
}


// ----- backward ----------------------------------------------------------------------------------

// fat5_attn_bwd_delta(float *delta[Tq,H], const act_t *o[Tq,H*dk], const act_t *dout[Tq,H*dk],
// long long Tq, int H, int dk): delta[t*H+h] = sum_d dout[t,h,d] o[t,h,d]. One warp per (t, h)
// row (row t*H+h starts at element (t*H+h)*dk), lanes over d, grid-stride over rows.
extern "C" __global__ void fat5_attn_bwd_delta(float *delta, const act_t *o, const act_t *dout, long long Tq, int H,
                                               int dk)
{
    const int lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    const long long rows = Tq * H;
    for (long long row = (long long)blockIdx.x * nwarps + (threadIdx.x >> 5); row < rows;
         row += (long long)gridDim.x * nwarps) {
        const act_t *a = o + row * dk, *b = dout + row * dk;
        float s = 0.0f;
        for (int d = lane; d < dk; d += 32) s = fmaf(fat5_ld(a[d]), fat5_ld(b[d]), s);
        s = fat5_warp_sum(s);
        if (lane == 0) delta[row] = s;
    }
}

// The bias gradient, deterministically (no atomics). Each lane sums the ds of consecutive elements
// that share a bucket (a "run", in its fixed element order); when its bucket changes it flushes the
// run into its warp's accumulator acc[nb] in shared memory. A flush is warp-uniform: every lane of
// the warp calls with its pending run (b < 0: none), and lane 0 adds the runs in lane order. At the
// end of the block the warps' accumulators are summed in warp order into the block's row of the
// partials [gridDim.x, nb, H], which fat5_colsum_f32 then sums over the blocks in a fixed order.
__device__ __forceinline__ void fat5_attn_dbias_flush(float *acc, int b, float s)
{
    unsigned pend = __ballot_sync(FAT5_FULL_MASK, b >= 0);
    while (pend) {
        const int l = __ffs(pend) - 1;
        const int bl = __shfl_sync(FAT5_FULL_MASK, b, l);
        const float sl = __shfl_sync(FAT5_FULL_MASK, s, l);
        if ((threadIdx.x & 31) == 0) acc[bl] += sl;
        pend &= pend - 1u;
    }
    __syncwarp();
}

// block end: part[(blockIdx.x nb + b) H + h] = sum over warps of acc[warp][b]. Every thread calls.
__device__ __forceinline__ void fat5_attn_dbias_store(float *part, const float *acc, int nb, int h, int H)
{
    const int nwarps = blockDim.x >> 5;
    __syncthreads();
    for (int b = threadIdx.x; b < nb; b += blockDim.x) {
        float s = 0.0f;
        for (int w = 0; w < nwarps; w++) s += acc[w * nb + b];
        part[((long long)blockIdx.x * nb + b) * H + h] = s;
    }
}

template <int R>
__device__ __forceinline__ void fat5_attn_bwd_dq_impl(act_t *dq, float *dbias, const act_t *dout, const float *lse,
                                                      const float *delta, const act_t *q, const act_t *k,
                                                      const act_t *v, const float *bias, const int *lut,
                                                      const int *cu_q, const int *cu_k, const int *q_seq,
                                                      long long Tq, int H, int dk, int kind, int nb, int md)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    const fat5_attn_tables tab =
        fat5_attn_load_tables(bias, lut, h, H, nb, md, 2 * nwarps * dk, dbias ? nwarps * nb : 0);
    float *sdb = dbias ? tab.extra + warp * nb : 0;  // this warp's dbias accumulator (head h)
    const int need_bucket = tab.bias != 0 || dbias != 0;
    float *sq = (float *)fat5_smem + warp * dk;
    float *sdo = (float *)fat5_smem + (nwarps + warp) * dk;
    const int vw = fat5_attn_vec_width(dk, k, v);
    for (long long t = (long long)blockIdx.x * nwarps + warp; t < Tq; t += (long long)gridDim.x * nwarps) {
        const int s = q_seq[t], q0 = cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0;
        const int i = (int)(t - q0);
        const int nkeys = kind == 2 ? min(i + 1, nk) : nk;
        const long long off = t * ld + (long long)h * dk;
        const act_t *kbase = k + (long long)k0 * ld + (long long)h * dk;
        const act_t *vbase = v + (long long)k0 * ld + (long long)h * dk;
        const float L = lse[t * H + h], dl = delta[t * H + h];
        float acc[R];
        int run_b = -1;      // this lane's current bucket run and its ds sum (keys j, j+32, ...
        float run_s = 0.0f;  // of one query mostly share a bucket once far away)
        for (int d = lane; d < dk; d += 32) {
            sq[d] = fat5_ld(q[off + d]);
            sdo[d] = fat5_ld(dout[off + d]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        __syncwarp();
        for (int jb = 0; jb < nkeys; jb += 32) {
            const int j = jb + lane;
            float ds = 0.0f;
            int fb = -1;      // a finished run to flush
            float fs = 0.0f;
            if (j < nkeys) {
                const int b = need_bucket ? fat5_attn_bucket(j - i, kind, tab.lut, nb, md) : 0;
                float sc = fat5_attn_dot(sq, kbase + (long long)j * ld, dk, vw);
                if (tab.bias) sc += tab.bias[b * tab.bstride];
                const float p = expf(sc - L);
                const float dp = fat5_attn_dot(sdo, vbase + (long long)j * ld, dk, vw);
                ds = p * (dp - dl);
                if (dbias && b != run_b) {
                    fb = run_b;
                    fs = run_s;
                    run_b = b;
                    run_s = 0.0f;
                }
                run_s += ds;
            }
            if (dbias) fat5_attn_dbias_flush(sdb, fb, fs);
            const int cnt = min(32, nkeys - jb);
            for (int jj = 0; jj < cnt; jj++) {
                const float dsj = __shfl_sync(FAT5_FULL_MASK, ds, jj);
                const act_t *krow = kbase + (long long)(jb + jj) * ld;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const int d = lane + 32 * r;
                    if (d < dk) acc[r] = fmaf(dsj, fat5_ld(krow[d]), acc[r]);
                }
            }
        }
        if (dbias) fat5_attn_dbias_flush(sdb, run_b, run_s);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int d = lane + 32 * r;
            if (d < dk) dq[off + d] = fat5_st(acc[r]);
        }
        __syncwarp();  // sq, sdo are rewritten by the next token
    }
    if (dbias) fat5_attn_dbias_store(dbias, tab.extra, nb, h, H);
}


template <int R>
__device__ __forceinline__ void fat5_attn_bwd_dkv_impl(act_t *dk_, act_t *dv, const act_t *dout, const float *lse,
                                                       const float *delta, const act_t *q, const act_t *k,
                                                       const act_t *v, const float *bias, const int *lut,
                                                       const int *cu_q, const int *cu_k, const int *k_seq,
                                                       long long Tk, int H, int dk, int kind, int nb, int md)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    const fat5_attn_tables tab = fat5_attn_load_tables(bias, lut, h, H, nb, md, 2 * nwarps * dk, 0);
    float *sk = (float *)fat5_smem + warp * dk;
    float *sv = (float *)fat5_smem + (nwarps + warp) * dk;
    const int vw = fat5_attn_vec_width(dk, q, dout);
    for (long long u = (long long)blockIdx.x * nwarps + warp; u < Tk; u += (long long)gridDim.x * nwarps) {
        const int s = k_seq[u], k0 = cu_k[s], q0 = cu_q[s], nq = cu_q[s + 1] - q0;
        const int j = (int)(u - k0);
        const int i0 = kind == 2 ? j : 0;  // causal: key j is seen by queries i >= j
        const long long off = u * ld + (long long)h * dk;
        const act_t *qbase = q + (long long)q0 * ld + (long long)h * dk;
        const act_t *dobase = dout + (long long)q0 * ld + (long long)h * dk;
        const float *lse_s = lse + (long long)q0 * H + h, *delta_s = delta + (long long)q0 * H + h;
        float acck[R], accv[R];
        for (int d = lane; d < dk; d += 32) {
            sk[d] = fat5_ld(k[off + d]);
            sv[d] = fat5_ld(v[off + d]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            acck[r] = 0.0f;
            accv[r] = 0.0f;
        }
        __syncwarp();
        for (int ib = i0; ib < nq; ib += 32) {
            const int i = ib + lane;
            float p = 0.0f, ds = 0.0f;
            if (i < nq) {
                float sc = fat5_attn_dot(sk, qbase + (long long)i * ld, dk, vw);
                if (tab.bias) sc += tab.bias[fat5_attn_bucket(j - i, kind, tab.lut, nb, md) * tab.bstride];
                p = expf(sc - lse_s[(long long)i * H]);
                const float dp = fat5_attn_dot(sv, dobase + (long long)i * ld, dk, vw);
                ds = p * (dp - delta_s[(long long)i * H]);
            }
            const int cnt = min(32, nq - ib);
            for (int ii = 0; ii < cnt; ii++) {
                const float pi = __shfl_sync(FAT5_FULL_MASK, p, ii);
                const float dsi = __shfl_sync(FAT5_FULL_MASK, ds, ii);
                const act_t *qrow = qbase + (long long)(ib + ii) * ld;
                const act_t *dorow = dobase + (long long)(ib + ii) * ld;
#pragma unroll
                for (int r = 0; r < R; r++) {
                    const int d = lane + 32 * r;
                    if (d < dk) {
                        accv[r] = fmaf(pi, fat5_ld(dorow[d]), accv[r]);
                        acck[r] = fmaf(dsi, fat5_ld(qrow[d]), acck[r]);
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int d = lane + 32 * r;
            if (d < dk) {
                dk_[off + d] = fat5_st(acck[r]);
                dv[off + d] = fat5_st(accv[r]);
            }
        }
        __syncwarp();  // sk, sv are rewritten by the next key
    }
}


// ----- tiled kernels (the launchers' 256-thread blocks) --------------------------------------------
// FlashAttention-2 style, SIMT fp32: a block of 256 threads (16 x 16: tx = tid & 15, ty = tid >> 4)
// takes a tile of 64 consecutive query (dkv: key) tokens of one head. A tile may straddle sequence
// boundaries: each row keeps its own key (query) window [lo, hi) in packed token indices, and the
// block walks the union of the windows in tiles of 64. Thread (ty, tx) owns rows 4 ty .. 4 ty + 3
// and columns tx + 16 c (c < 4) of each 64 x 64 score tile, and columns tx + 16 c (c < DC) of the
// head dim for the outputs (DC = ceil(dk / 16), dk <= 16 DC). Tiles are staged in shared memory
// as fp32, transposed ([dim][token]): stride FAT5_AT_V (a multiple of 4: float4 reads of 4 rows)
// for the operand read by rows, FAT5_AT_S (odd: conflict-free scalar reads) for the one read by
// columns. The entry points take this path when blockDim.x == 256, else the per-warp one above.

#define FAT5_AT_V 68
#define FAT5_AT_S 65

// The backward kernels' inner product: two 4x4 register tiles at once over the head dim,
// sc[r][c] = sum_d A[d][4 ty + r] B[d][tx + 16 c] and dp[r][c] = sum_d G[d][4 ty + r] W[d][tx + 16 c].
// A and G are laid out [d][FAT5_AT_V], B and W [d][FAT5_AT_S], all in shared memory.
__device__ __forceinline__ void fat5_at_two_tiles(float sc[4][4], float dp[4][4], const float *A, const float *G,
                                                  const float *B, const float *W, int ty, int tx, int dk) {
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) sc[r][c] = dp[r][c] = 0.0f;
#pragma unroll 2
    for (int d = 0; d < dk; d++) {
        const float4 a = *(const float4 *)(A + d * FAT5_AT_V + ty * 4);
        const float4 g = *(const float4 *)(G + d * FAT5_AT_V + ty * 4);
        const float *br = B + d * FAT5_AT_S + tx, *wr = W + d * FAT5_AT_S + tx;
        float b[4], w[4];
#pragma unroll
        for (int c = 0; c < 4; c++) {
            b[c] = br[16 * c];
            w[c] = wr[16 * c];
        }
#pragma unroll
        for (int c = 0; c < 4; c++) {
            sc[0][c] = fmaf(a.x, b[c], sc[0][c]);
            sc[1][c] = fmaf(a.y, b[c], sc[1][c]);
            sc[2][c] = fmaf(a.z, b[c], sc[2][c]);
            sc[3][c] = fmaf(a.w, b[c], sc[3][c]);
            dp[0][c] = fmaf(g.x, w[c], dp[0][c]);
            dp[1][c] = fmaf(g.y, w[c], dp[1][c]);
            dp[2][c] = fmaf(g.z, w[c], dp[2][c]);
            dp[3][c] = fmaf(g.w, w[c], dp[3][c]);
        }
    }
}

// Stores a thread's 4x4 register tile t (rows 4 ty + r, columns tx + 16 c) transposed into the
// staging array S laid out [column][FAT5_AT_V], one float4 per column.
__device__ __forceinline__ void fat5_at_stage(float *S, const float t[4][4], int tx, int ty) {
#pragma unroll
    for (int c = 0; c < 4; c++)
        *(float4 *)(S + (tx + 16 * c) * FAT5_AT_V + ty * 4) = make_float4(t[0][c], t[1][c], t[2][c], t[3][c]);
}

// acc[r][c] += sum over j < n of S[j][4 ty + r] X[tx + 16 c][j]: a staged tile (probabilities or
// dS) times a [dim][FAT5_AT_S] operand, for the thread's 4 rows and DC output dims.
template <int DC>
__device__ __forceinline__ void fat5_at_accum(float acc[4][DC], const float *S, const float *X, int n, int tx, int ty) {
#pragma unroll 4
    for (int j = 0; j < n; j++) {
        const float4 p = *(const float4 *)(S + j * FAT5_AT_V + ty * 4);
#pragma unroll
        for (int c = 0; c < DC; c++) {
            const float x = X[(tx + 16 * c) * FAT5_AT_S + j];
            acc[0][c] = fmaf(p.x, x, acc[0][c]);
            acc[1][c] = fmaf(p.y, x, acc[1][c]);
            acc[2][c] = fmaf(p.z, x, acc[2][c]);
            acc[3][c] = fmaf(p.w, x, acc[3][c]);
        }
    }
}

// dst[d * stride + r] = src row r (rows row0 .. row0 + nv - 1 of ld elements; zero for r >= nv) at
// dim d (< dk; zero for dk <= d < DKP), r < 64.
// Rows of whole 16-byte vectors (dk a multiple of 8 bf16 / 4 fp32 values, 16-byte aligned start; ld
// = H dk is then a multiple too) are read a vector per thread, rows fastest (conflict-free stores).
template <int DKP>
__device__ __forceinline__ void fat5_at_load(float *__restrict__ dst, int stride, const act_t *__restrict__ src,
                                             long long ld, int nv, int dk)
{
#if FAT5_ACT_BF16
    const int VW = 8;
#else
    const int VW = 4;
#endif
    if (dk % VW == 0 && ((unsigned long long)src & 15) == 0) {
        for (int e = threadIdx.x; e < 64 * (DKP / VW); e += blockDim.x) {
            const int r = e & 63, d0 = (e >> 6) * VW;
            float x[VW];
            if (r < nv && d0 < dk) {
#if FAT5_ACT_BF16
                const uint4 u = *(const uint4 *)(src + (long long)r * ld + d0);
                x[0] = fat5_bf16_lo(u.x);
                x[1] = fat5_bf16_hi(u.x);
                x[2] = fat5_bf16_lo(u.y);
                x[3] = fat5_bf16_hi(u.y);
                x[4] = fat5_bf16_lo(u.z);
                x[5] = fat5_bf16_hi(u.z);
                x[6] = fat5_bf16_lo(u.w);
                x[7] = fat5_bf16_hi(u.w);
#else
                const float4 u = *(const float4 *)(src + (long long)r * ld + d0);
                x[0] = u.x;
                x[1] = u.y;
                x[2] = u.z;
                x[3] = u.w;
#endif
            } else {
#pragma unroll
                for (int i = 0; i < VW; i++) x[i] = 0.0f;
            }
#pragma unroll
            for (int i = 0; i < VW; i++) dst[(d0 + i) * stride + r] = x[i];
        }
        return;
    }
    for (int e = threadIdx.x; e < 64 * DKP; e += blockDim.x) {
        const int r = e / DKP, d = e - r * DKP;
        float x = 0.0f;
        if (r < nv && d < dk) x = fat5_ld(src[(long long)r * ld + d]);
        dst[d * stride + r] = x;
    }
}

__device__ __forceinline__ float fat5_at_rowmax(float v)
{
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FAT5_FULL_MASK, v, o));
    return v;
}

__device__ __forceinline__ float fat5_at_rowsum(float v)
{
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(FAT5_FULL_MASK, v, o);
    return v;
}

template <int DC>
__device__ __forceinline__ void fat5_attn_fwd_tiled(act_t *o, float *lse, const act_t *q, const act_t *k,
                                                    const act_t *v, const float *bias, const int *lut,
                                                    const int *cu_q, const int *cu_k, const int *q_seq, long long Tq,
                                                    int H, int dk, int kind, int nb, int md)
{
    const int DKP = 16 * DC;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    float *Qt = (float *)fat5_smem;    // [DKP][V]  queries
    float *Pt = Qt + DKP * FAT5_AT_V;  // [64 keys][V] probabilities
    float *Kt = Pt + 64 * FAT5_AT_V;   // [DKP][S]
    float *Vt = Kt + DKP * FAT5_AT_S;  // [DKP][S]
    const fat5_attn_tables tab =
        fat5_attn_load_tables(bias, lut, h, H, nb, md, DKP * (FAT5_AT_V + 2 * FAT5_AT_S) + 64 * FAT5_AT_V, 0);
    for (long long tile = blockIdx.x; tile * 64 < Tq; tile += gridDim.x) {
        const long long t0 = tile * 64;
        const int nrow = (int)min(64LL, Tq - t0);
        int klo[4], khi[4], ip[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long t = t0 + ty * 4 + r;
            klo[r] = khi[r] = ip[r] = 0;
            if (t < Tq) {
                const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
                klo[r] = k0;
                khi[r] = k0 + (kind == 2 ? min(i + 1, nk) : nk);
                ip[r] = i;
            }
        }
        const int kstart = cu_k[q_seq[t0]];
        int kend;
        {
            const long long tl = t0 + nrow - 1;
            const int s = q_seq[tl], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(tl - cu_q[s]);
            kend = k0 + (kind == 2 ? min(i + 1, nk) : nk);
        }
        __syncthreads();  // the previous tile is done with Qt
        fat5_at_load<DKP>(Qt, FAT5_AT_V, q + t0 * ld + (long long)h * dk, ld, nrow, dk);
        float m[4], l[4], acc[4][DC];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            m[r] = -FAT5_INF;
            l[r] = 0.0f;
#pragma unroll
            for (int c = 0; c < DC; c++) acc[r][c] = 0.0f;
        }
        for (int kt0 = kstart; kt0 < kend; kt0 += 64) {
            const int nkr = min(64, kend - kt0);
            __syncthreads();  // readers of Kt, Vt, Pt are done
            fat5_at_load<DKP>(Kt, FAT5_AT_S, k + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
            fat5_at_load<DKP>(Vt, FAT5_AT_S, v + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
            __syncthreads();
            float sc[4][4];
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) sc[r][c] = 0.0f;
#pragma unroll 4
            for (int d = 0; d < dk; d++) {
                const float4 a = *(const float4 *)(Qt + d * FAT5_AT_V + ty * 4);
                const float *kr = Kt + d * FAT5_AT_S + tx;
                const float b0 = kr[0], b1 = kr[16], b2 = kr[32], b3 = kr[48];
                sc[0][0] = fmaf(a.x, b0, sc[0][0]); sc[0][1] = fmaf(a.x, b1, sc[0][1]);
                sc[0][2] = fmaf(a.x, b2, sc[0][2]); sc[0][3] = fmaf(a.x, b3, sc[0][3]);
                sc[1][0] = fmaf(a.y, b0, sc[1][0]); sc[1][1] = fmaf(a.y, b1, sc[1][1]);
                sc[1][2] = fmaf(a.y, b2, sc[1][2]); sc[1][3] = fmaf(a.y, b3, sc[1][3]);
                sc[2][0] = fmaf(a.z, b0, sc[2][0]); sc[2][1] = fmaf(a.z, b1, sc[2][1]);
                sc[2][2] = fmaf(a.z, b2, sc[2][2]); sc[2][3] = fmaf(a.z, b3, sc[2][3]);
                sc[3][0] = fmaf(a.w, b0, sc[3][0]); sc[3][1] = fmaf(a.w, b1, sc[3][1]);
                sc[3][2] = fmaf(a.w, b2, sc[3][2]); sc[3][3] = fmaf(a.w, b3, sc[3][3]);
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
                float mx = -FAT5_INF;
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int u = kt0 + tx + 16 * c;
                    if (u >= klo[r] && u < khi[r]) {
                        if (tab.bias)
                            sc[r][c] += tab.bias[fat5_attn_bucket(u - klo[r] - ip[r], kind, tab.lut, nb, md) *
                                                 tab.bstride];
                    } else {
                        sc[r][c] = -FAT5_INF;
                    }
                    mx = fmaxf(mx, sc[r][c]);
                }
                mx = fat5_at_rowmax(mx);
                const float mnew = fmaxf(m[r], mx);
                float corr = 1.0f, ps = 0.0f;
                if (mnew == -FAT5_INF) {
#pragma unroll
                    for (int c = 0; c < 4; c++) sc[r][c] = 0.0f;
                } else {
                    corr = expf(m[r] - mnew);  // 0 while m is -inf
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        sc[r][c] = expf(sc[r][c] - mnew);
                        ps += sc[r][c];
                    }
                }
                l[r] = l[r] * corr + ps;
                m[r] = mnew;
#pragma unroll
                for (int c = 0; c < DC; c++) acc[r][c] *= corr;
            }
            fat5_at_stage(Pt, sc, tx, ty);
            __syncthreads();
            fat5_at_accum<DC>(acc, Pt, Vt, nkr, tx, ty);  // acc += P V
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const float lsum = fat5_at_rowsum(l[r]);
            const long long t = t0 + ty * 4 + r;
            if (t < Tq) {
                act_t *orow = o + t * ld + (long long)h * dk;
#pragma unroll
                for (int c = 0; c < DC; c++) {
                    const int d = tx + 16 * c;
                    if (d < dk) orow[d] = fat5_st(lsum > 0.0f ? acc[r][c] / lsum : 0.0f);
                }
                if (tx == 0) lse[t * H + h] = lsum > 0.0f ? m[r] + logf(lsum) : -FAT5_INF;
            }
        }
    }
}

template <int DC>
__device__ __forceinline__ void fat5_attn_bwd_dq_tiled(act_t *dq, float *dbias, const act_t *dout, const float *lse,
                                                       const float *delta, const act_t *q, const act_t *k,
                                                       const act_t *v, const float *bias, const int *lut,
                                                       const int *cu_q, const int *cu_k, const int *q_seq,
                                                       long long Tq, int H, int dk, int kind, int nb, int md)
{
    const int DKP = 16 * DC;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    float *Qt = (float *)fat5_smem;      // [DKP][V]
    float *Ot = Qt + DKP * FAT5_AT_V;    // [DKP][V] dout
    float *St = Ot + DKP * FAT5_AT_V;    // [64 keys][V] ds
    float *Kt = St + 64 * FAT5_AT_V;     // [DKP][S]
    float *Vt = Kt + DKP * FAT5_AT_S;    // [DKP][S]
    const fat5_attn_tables tab = fat5_attn_load_tables(
        bias, lut, h, H, nb, md, DKP * (2 * FAT5_AT_V + 2 * FAT5_AT_S) + 64 * FAT5_AT_V, dbias ? 8 * nb : 0);
    float *sdb = dbias ? tab.extra + (threadIdx.x >> 5) * nb : 0;  // this warp's accumulator
    const int need_bucket = tab.bias != 0 || dbias != 0;
    int run_b = -1;
    float run_s = 0.0f;
    for (long long tile = blockIdx.x; tile * 64 < Tq; tile += gridDim.x) {
        const long long t0 = tile * 64;
        const int nrow = (int)min(64LL, Tq - t0);
        int klo[4], khi[4], ip[4];
        float L[4], Dl[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long t = t0 + ty * 4 + r;
            klo[r] = khi[r] = ip[r] = 0;
            L[r] = Dl[r] = 0.0f;
            if (t < Tq) {
                const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
                klo[r] = k0;
                khi[r] = k0 + (kind == 2 ? min(i + 1, nk) : nk);
                ip[r] = i;
                L[r] = lse[t * H + h];
                Dl[r] = delta[t * H + h];
            }
        }
        const int kstart = cu_k[q_seq[t0]];
        int kend;
        {
            const long long tl = t0 + nrow - 1;
            const int s = q_seq[tl], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(tl - cu_q[s]);
            kend = k0 + (kind == 2 ? min(i + 1, nk) : nk);
        }
        __syncthreads();
        fat5_at_load<DKP>(Qt, FAT5_AT_V, q + t0 * ld + (long long)h * dk, ld, nrow, dk);
        fat5_at_load<DKP>(Ot, FAT5_AT_V, dout + t0 * ld + (long long)h * dk, ld, nrow, dk);
        float acc[4][DC];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < DC; c++) acc[r][c] = 0.0f;
        for (int kt0 = kstart; kt0 < kend; kt0 += 64) {
            const int nkr = min(64, kend - kt0);
            __syncthreads();
            fat5_at_load<DKP>(Kt, FAT5_AT_S, k + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
            fat5_at_load<DKP>(Vt, FAT5_AT_S, v + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
            __syncthreads();
            float sc[4][4], dp[4][4];
            fat5_at_two_tiles(sc, dp, Qt, Ot, Kt, Vt, ty, tx, dk);  // scores q.k and dp = dout.v
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int u = kt0 + tx + 16 * c;
                    float ds = 0.0f;
                    int fb = -1;      // a finished run to flush
                    float fs = 0.0f;
                    if (u >= klo[r] && u < khi[r]) {
                        const int b =
                            need_bucket ? fat5_attn_bucket(u - klo[r] - ip[r], kind, tab.lut, nb, md) : 0;
                        float s = sc[r][c];
                        if (tab.bias) s += tab.bias[b * tab.bstride];
                        const float p = expf(s - L[r]);
                        ds = p * (dp[r][c] - Dl[r]);
                        if (dbias && b != run_b) {
                            fb = run_b;
                            fs = run_s;
                            run_b = b;
                            run_s = 0.0f;
                        }
                        run_s += ds;
                    }
                    if (dbias) fat5_attn_dbias_flush(sdb, fb, fs);
                    sc[r][c] = ds;
                }
            fat5_at_stage(St, sc, tx, ty);
            __syncthreads();
            fat5_at_accum<DC>(acc, St, Kt, nkr, tx, ty);  // dq += dS K
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long t = t0 + ty * 4 + r;
            if (t < Tq) {
                act_t *row = dq + t * ld + (long long)h * dk;
#pragma unroll
                for (int c = 0; c < DC; c++) {
                    const int d = tx + 16 * c;
                    if (d < dk) row[d] = fat5_st(acc[r][c]);
                }
            }
        }
    }
    if (dbias) {
        fat5_attn_dbias_flush(sdb, run_b, run_s);
        fat5_attn_dbias_store(dbias, tab.extra, nb, h, H);
    }
}

template <int DC>
__device__ __forceinline__ void fat5_attn_bwd_dkv_tiled(act_t *dk_, act_t *dv, const act_t *dout, const float *lse,
                                                        const float *delta, const act_t *q, const act_t *k,
                                                        const act_t *v, const float *bias, const int *lut,
                                                        const int *cu_q, const int *cu_k, const int *k_seq,
                                                        long long Tk, int H, int dk, int kind, int nb, int md)
{
    const int DKP = 16 * DC;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    float *Kt = (float *)fat5_smem;      // [DKP][V] keys (rows of the tile)
    float *Vt = Kt + DKP * FAT5_AT_V;    // [DKP][V]
    float *Ps = Vt + DKP * FAT5_AT_V;    // [64 queries][V] p
    float *Ss = Ps + 64 * FAT5_AT_V;     // [64 queries][V] ds
    float *Qt = Ss + 64 * FAT5_AT_V;     // [DKP][S]
    float *Ot = Qt + DKP * FAT5_AT_S;    // [DKP][S] dout
    const fat5_attn_tables tab = fat5_attn_load_tables(
        bias, lut, h, H, nb, md, DKP * (2 * FAT5_AT_V + 2 * FAT5_AT_S) + 128 * FAT5_AT_V, 0);
    for (long long tile = blockIdx.x; tile * 64 < Tk; tile += gridDim.x) {
        const long long u0 = tile * 64;
        const int nrow = (int)min(64LL, Tk - u0);
        int qlo[4], qhi[4], jp[4], qb[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long u = u0 + ty * 4 + r;
            qlo[r] = qhi[r] = jp[r] = qb[r] = 0;
            if (u < Tk) {
                const int s = k_seq[u], q0 = cu_q[s], nq = cu_q[s + 1] - q0, j = (int)(u - cu_k[s]);
                qlo[r] = q0 + (kind == 2 ? min(j, nq) : 0);
                qhi[r] = q0 + nq;
                jp[r] = j;
                qb[r] = q0;
            }
        }
        int qstart, qend;
        {
            const int s = k_seq[u0], q0 = cu_q[s], nq = cu_q[s + 1] - q0, j = (int)(u0 - cu_k[s]);
            qstart = q0 + (kind == 2 ? min(j, nq) : 0);
            qend = cu_q[k_seq[u0 + nrow - 1] + 1];
        }
        __syncthreads();
        fat5_at_load<DKP>(Kt, FAT5_AT_V, k + u0 * ld + (long long)h * dk, ld, nrow, dk);
        fat5_at_load<DKP>(Vt, FAT5_AT_V, v + u0 * ld + (long long)h * dk, ld, nrow, dk);
        float ak[4][DC], av[4][DC];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < DC; c++) ak[r][c] = av[r][c] = 0.0f;
        for (int qt0 = qstart; qt0 < qend; qt0 += 64) {
            const int nqr = min(64, qend - qt0);
            __syncthreads();
            fat5_at_load<DKP>(Qt, FAT5_AT_S, q + (long long)qt0 * ld + (long long)h * dk, ld, nqr, dk);
            fat5_at_load<DKP>(Ot, FAT5_AT_S, dout + (long long)qt0 * ld + (long long)h * dk, ld, nqr, dk);
            float Lc[4], Dc[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int qi = qt0 + tx + 16 * c;
                Lc[c] = qi < qend ? lse[(long long)qi * H + h] : 0.0f;
                Dc[c] = qi < qend ? delta[(long long)qi * H + h] : 0.0f;
            }
            __syncthreads();
            float sc[4][4], dp[4][4];
            fat5_at_two_tiles(sc, dp, Kt, Vt, Qt, Ot, ty, tx, dk);  // scores k.q and dp = v.dout
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int qi = qt0 + tx + 16 * c;
                    float p = 0.0f, ds = 0.0f;
                    if (qi >= qlo[r] && qi < qhi[r]) {
                        float s = sc[r][c];
                        if (tab.bias)
                            s += tab.bias[fat5_attn_bucket(jp[r] - (qi - qb[r]), kind, tab.lut, nb, md) * tab.bstride];
                        p = expf(s - Lc[c]);
                        ds = p * (dp[r][c] - Dc[c]);
                    }
                    sc[r][c] = p;
                    dp[r][c] = ds;
                }
            fat5_at_stage(Ps, sc, tx, ty);
            fat5_at_stage(Ss, dp, tx, ty);
            __syncthreads();
#pragma unroll 2
            for (int i = 0; i < nqr; i++) {
                const float4 p = *(const float4 *)(Ps + i * FAT5_AT_V + ty * 4);
                const float4 s = *(const float4 *)(Ss + i * FAT5_AT_V + ty * 4);
#pragma unroll
                for (int c = 0; c < DC; c++) {
                    const float go = Ot[(tx + 16 * c) * FAT5_AT_S + i];
                    const float x = Qt[(tx + 16 * c) * FAT5_AT_S + i];
                    av[0][c] = fmaf(p.x, go, av[0][c]);
                    av[1][c] = fmaf(p.y, go, av[1][c]);
                    av[2][c] = fmaf(p.z, go, av[2][c]);
                    av[3][c] = fmaf(p.w, go, av[3][c]);
                    ak[0][c] = fmaf(s.x, x, ak[0][c]);
                    ak[1][c] = fmaf(s.y, x, ak[1][c]);
                    ak[2][c] = fmaf(s.z, x, ak[2][c]);
                    ak[3][c] = fmaf(s.w, x, ak[3][c]);
                }
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long u = u0 + ty * 4 + r;
            if (u < Tk) {
                const long long off = u * ld + (long long)h * dk;
#pragma unroll
                for (int c = 0; c < DC; c++) {
                    const int d = tx + 16 * c;
                    if (d < dk) {
                        dk_[off + d] = fat5_st(ak[r][c]);
                        dv[off + d] = fat5_st(av[r][c]);
                    }
                }
            }
        }
    }
}

// ----- entry points ------------------------------------------------------------------------------

// fat5_attn_fwd(act_t *o[Tq,H*dk], float *lse[Tq,H], const act_t *q[Tq,H*dk], const act_t *k[Tk,H*dk],
// const act_t *v[Tk,H*dk], const float *bias[nb,H] or NULL, const int *lut[max_distance],
// const int *cu_q, const int *cu_k, const int *q_seq[Tq], long long Tq, int H, int dk, int kind,
// int nb, int max_distance): o = softmax(q k^T + bias) v, lse = log sum exp of the scores.
// Grid (token blocks, H); block 32 * W threads (W warps, one token each); dynamic shared memory
// W*dk floats, plus (nb + max_distance) * 4 bytes to cache the tables. CPU twin: fat5__cpu_attn_fwd.
extern "C" __global__ void __launch_bounds__(256, 2) fat5_attn_fwd(act_t *o, float *lse, const act_t *q, const act_t *k, const act_t *v,
                                         const float *bias, const int *lut, const int *cu_q, const int *cu_k,
                                         const int *q_seq, long long Tq, int H, int dk, int kind, int nb,
                                         int max_distance)
{
    if (blockDim.x == 256) {  // the tiled path (the launcher checked dk <= 128)
        if (dk <= 16)
            fat5_attn_fwd_tiled<1>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
        else if (dk <= 32)
            fat5_attn_fwd_tiled<2>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
        else if (dk <= 64)
            fat5_attn_fwd_tiled<4>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
        else if (dk <= 128)
            fat5_attn_fwd_tiled<8>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
        return;
    }
    if (dk <= 32)
        fat5_attn_fwd_impl<1>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
    else if (dk <= 64)
        fat5_attn_fwd_impl<2>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
    else if (dk <= 128)
        fat5_attn_fwd_impl<4>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
    else if (dk <= FAT5_ATTN_MAX_DK)
        fat5_attn_fwd_impl<8>(o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance);
}

// fat5_attn_bwd_dq(act_t *dq[Tq,H*dk], float *dbias_part[gridDim.x,nb,H] or NULL,
// const act_t *dout[Tq,H*dk], const float *lse[Tq,H], const float *delta[Tq,H], q, k, v, bias, lut,
// cu_q, cu_k, q_seq, long long Tq, int H, int dk, int kind, int nb, int max_distance): with
// p = exp(s - lse), ds = p (dout.v - delta): dq = sum_j ds k_j (written) and, when dbias_part is
// given, dbias_part[blockIdx.x, bucket, h] = the block's sum of ds per bucket (written by every
// block, zeros included; no atomics: per-lane runs of equal buckets, per-warp shared accumulators
// filled in lane order, summed in warp order; see fat5_attn_dbias_flush). The launcher then adds
// the rows into dbias[nb,H] with fat5_colsum_f32 (a fixed order), so dbias is deterministic.
// dbias_part requires the tables and the accumulators in shared memory (the launcher gives them).
// Grid (token blocks, H); block 32 * W; dynamic shared memory 2*W*dk floats (+ (nb + max_distance
// + (dbias_part ? W nb : 0)) * 4 bytes for the tables and the accumulators). CPU twin:
// fat5__cpu_attn_bwd_dq.
extern "C" __global__ void __launch_bounds__(256, 2) fat5_attn_bwd_dq(act_t *dq, float *dbias, const act_t *dout, const float *lse,
                                            const float *delta, const act_t *q, const act_t *k, const act_t *v,
                                            const float *bias, const int *lut, const int *cu_q, const int *cu_k,
                                            const int *q_seq, long long Tq, int H, int dk, int kind, int nb,
                                            int max_distance)
{
    if (blockDim.x == 256) {  // the tiled path (the launcher checked dk <= 64)
        if (dk <= 16)
            fat5_attn_bwd_dq_tiled<1>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk,
                                      kind, nb, max_distance);
        else if (dk <= 32)
            fat5_attn_bwd_dq_tiled<2>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk,
                                      kind, nb, max_distance);
        else if (dk <= 64)
            fat5_attn_bwd_dq_tiled<4>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk,
                                      kind, nb, max_distance);
        return;
    }
    if (dk <= 32)
        fat5_attn_bwd_dq_impl<1>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind,
                                 nb, max_distance);
    else if (dk <= 64)
        fat5_attn_bwd_dq_impl<2>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind,
                                 nb, max_distance);
    else if (dk <= 128)
        fat5_attn_bwd_dq_impl<4>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind,
                                 nb, max_distance);
    else if (dk <= FAT5_ATTN_MAX_DK)
        fat5_attn_bwd_dq_impl<8>(dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind,
                                 nb, max_distance);
}

// fat5_attn_bwd_dkv(act_t *dk[Tk,H*dk], act_t *dv[Tk,H*dk], const act_t *dout[Tq,H*dk],
// const float *lse[Tq,H], const float *delta[Tq,H], q, k, v, bias, lut, cu_q, cu_k, k_seq[Tk],
// long long Tk, int H, int dk, int kind, int nb, int max_distance): one warp per (key, head), lanes
// over the queries that see the key: dv = sum_i p dout_i, dk = sum_i ds q_i (both written).
// Grid (key blocks, H); block 32 * W; dynamic shared memory 2*W*dk floats (+ (nb + max_distance)
// * 4 bytes for the tables). CPU twin: fat5__cpu_attn_bwd.
extern "C" __global__ void __launch_bounds__(256, 2) fat5_attn_bwd_dkv(act_t *dk_, act_t *dv, const act_t *dout, const float *lse,
                                             const float *delta, const act_t *q, const act_t *k, const act_t *v,
                                             const float *bias, const int *lut, const int *cu_q, const int *cu_k,
                                             const int *k_seq, long long Tk, int H, int dk, int kind, int nb,
                                             int max_distance)
{
    if (blockDim.x == 256) {  // the tiled path (the launcher checked dk <= 64)
        if (dk <= 16)
            fat5_attn_bwd_dkv_tiled<1>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk,
                                       kind, nb, max_distance);
        else if (dk <= 32)
            fat5_attn_bwd_dkv_tiled<2>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk,
                                       kind, nb, max_distance);
        else if (dk <= 64)
            fat5_attn_bwd_dkv_tiled<4>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk,
                                       kind, nb, max_distance);
        return;
    }
    if (dk <= 32)
        fat5_attn_bwd_dkv_impl<1>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk, kind, nb,
                                  max_distance);
    else if (dk <= 64)
        fat5_attn_bwd_dkv_impl<2>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk, kind, nb,
                                  max_distance);
    else if (dk <= 128)
        fat5_attn_bwd_dkv_impl<4>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk, kind, nb,
                                  max_distance);
    else if (dk <= FAT5_ATTN_MAX_DK)
        fat5_attn_bwd_dkv_impl<8>(dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk, kind, nb,
                                  max_distance);
}

// fat5_fire_reduce(float *g, const float *shares[H, 3W+3], int H, int W): CPU twin
// fat5__cpu_fire_reduce (placeholder: the FIRE kernels come with the GPU side of FIRE).
extern "C" __global__ void fat5_fire_reduce(float *g, const float *shares, int H, int W)
{
    (void)g; (void)shares; (void)H; (void)W;
}
