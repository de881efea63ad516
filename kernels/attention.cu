// kernels/attention.cu — T5 attention over packed variable-length sequences: forward and the three
// backward kernels (delta, dq + bias-table gradient, dk/dv).
//
// Exact fp32 arithmetic (the oracle of attention_tc.cu's tensor-core forward, which bf16 contexts
// run; FAT5_ATTN_TC=0 keeps these): one warp per (token, head), fp32 throughout, online softmax in
// the forward.
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
// kind = mask (kind & 3: 0 cross, every key of the sequence; 1 bidirectional; 2 causal, keys j <= i)
// | position scheme (fat5__attn_kind in fat5.h; see "position schemes" below): no scheme bit, the
// T5 buckets when bias is the [nb, H] fp32 table, no bias when bias is NULL (e.g. cross-attention);
// FAT5_ATTN_ALIBI (+ _ASYM) and FAT5_ATTN_FIRE compute the bias from (i, j, h) in the kernel.
// No 1/sqrt(dk) scale (T5).
// lut[n] (n < max_distance) is the host-computed bucket of distance n (fat5__rel_bucket), so the
// GPU and CPU agree bit for bit:
//   kind 1: n = |rel|,         bucket = (n < md ? lut[n] : nb/2 - 1) + (rel > 0 ? nb/2 : 0)
//   else:   n = max(-rel, 0),  bucket = n < md ? lut[n] : nb - 1
// A query with no keys gets o = 0 and lse = -inf (cannot happen in valid batches).
// Nothing of size L^2 is stored for any scheme: every bias is recomputed where a score is.
//
// Attention patterns (encoder self-attention, kind & 3 == 1; fat5__attn_kind in fat5.h; the ops'
// arguments g and cu_g): a local window in the kind's bits from 8 up (radius r = (kind >> 8) - 1,
// -1: none): query i sees the keys with |j - i| <= r, under any position scheme; with it,
//   FAT5_ATTN_PREFIX   block-global: the first g tokens of a sequence see all of it and are seen by
//                      all of it (with the scheme's bias of j - i, as any key);
//   FAT5_ATTN_TGLOBAL  transient-global: sequence s (n tokens) also has G = n / g global keys, rows
//                      cu_g[s] .. cu_g[s + 1] of k and v (cu_g int32 [n_seq + 1]), seen by every
//                      query of s; query i is in block b(i) = min(i / g, G - 1) and global key kk
//                      adds T_global[bucket_bidir(kk - b(i)), h], T_global the second [nb, H] table
//                      after T5's in `bias` (its gradient likewise in dbias: the partial rows are
//                      2 nb H wide) or, with FAT5_ATTN_GSHARED, T5's table itself. T5 buckets or
//                      no bias only. In attn_bwd_dkv, a row t of sequence s = k_seq[t] is a global
//                      key iff cu_g[s] <= t < cu_g[s + 1]; its dk, dv sum over every query of s.
// Patterns have their own entry points (fat5_<op>_pat, fat5_<op>_alibi_pat, fat5_<op>_fire_pat;
// template parameter PAT), so the full-attention kernels are compiled as they were. They visit
// only what the pattern needs, O(L (2 r + 1 + globals)) scores: the tiled kernels walk, per tile
// of 64 rows, the key (dk/dv: query) tiles of the window hull of the tile's rows, the prefix
// tiles before it and the global rows as extra tiles, and mask each score exactly; the per-warp
// kernels walk the ranges of their row (fat5_pat_range, as the CPU's fat5__attn_range).
//
// Dropout of the probabilities (training; every op's last argument, fat5_dropp dr, thresh 0: none,
// and then every result is what it is without the argument): with m[i][j] = fat5_attn_drop1(dr,
// dr.stream + h, query row, key row) (scale if kept, else 0; rows of the packed q and k buffers:
// the query's token row t, the key's row in k, cu_k[s] + j for key j of sequence s, cu_g[s] + j for
// its transient-global key j), the forward gives o = (P m) v with P the softmax (its denominator
// and lse the undropped softmax's), and the backward dv = sum_i P m dout_i, ds = P (m dout.v -
// delta) (delta = rowsum(dout o) of the dropped o, as before), dq, dk and the bias gradient from ds
// as before. Each kernel draws m (one Philox block per score, fat5_attn_dropm) for the true (query
// row, key row) pair of each score: the per-warp kernels per lane, the tiled kernels a thread's 16
// scores of a tile as keep bits before computing them (fat5_at_drop_bits). CPU twins:
// fat5__cpu_attn_fwd, _bwd_dq, _bwd_dkv.

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

// The dropout multiplier of the probability of query row qr and key row kr (rows of the packed q
// and k buffers) in head h: dr.scale when kept, else 0 (one Philox block; see the top of this file).
// The key (seed) passes through an empty asm at each draw, so that the compiler derives Philox's
// twenty round keys there instead of hoisting them out of the kernel's loops, where they would
// hold registers through the paths without dropout as well.
__device__ __forceinline__ float fat5_attn_dropm(const fat5_dropp &dr, int h, long long qr, long long kr)
{
    fat5_dropp d = dr;
    asm volatile("" : "+l"(d.seed));
    return fat5_attn_drop1(d, dr.stream + (unsigned long long)h, qr, kr);
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

// ----- position schemes ----------------------------------------------------------------------------
// The scheme bits of `kind` (fat5__attn_kind in fat5.h):
#define FAT5_ATTN_MASK 3
#define FAT5_ATTN_ALIBI 4       // bias -slope_h |j - i| (ALiBi slopes of H heads)
#define FAT5_ATTN_ALIBI_ASYM 8  // with bidirectional ALiBi: slopes of H/2 heads (h and h + H/2 share
                                // slope h mod H/2); heads h < H/2 see keys j <= i, the others j >= i
#define FAT5_ATTN_FIRE 16       // FIRE: bias = MLP(u(i, j)); `bias` is FIRE's parameter block, nb its
                                // MLP width W, max_distance its L0; lut unused
// Each kernel is instantiated once per scheme (template parameter PE) behind its own entry point, so
// that the T5 kernels' code (and register allocation) is what it was before the schemes existed:
#define FAT5_PE_TABLE 0  // T5 buckets from the [nb, H] table, or no bias (bias NULL)
#define FAT5_PE_ALIBI 1  // ALiBi, symmetric or asymmetric
#define FAT5_PE_FIRE 2   // FIRE

// The pattern bits of `kind` (fat5__attn_kind in fat5.h; see the top of this file)
#define FAT5_ATTN_PREFIX 32
#define FAT5_ATTN_TGLOBAL 64
#define FAT5_ATTN_GSHARED 128
#define FAT5_ATTN_WINDOW_SHIFT 8

// A pattern as the kernels use it (only the PAT kernels build one; the kind has a window).
struct fat5_pat {
    int rad;   // window radius (>= 0)
    int pre;   // block-global prefix length (0: none)
    int tg;    // transient-global keys (cu_g)
    int g;     // their block size
    int goff;  // index of the global table's bucket 0 in the bias-gradient accumulators: nb (its own
               // table, [2, nb] accumulators) or 0 (GSHARED, or none)
};

__device__ __forceinline__ fat5_pat fat5_attn_pat(int kind, int g, int nb)
{
    fat5_pat p;
    p.rad = (kind >> FAT5_ATTN_WINDOW_SHIFT) - 1;
    p.pre = (kind & FAT5_ATTN_PREFIX) ? g : 0;
    p.tg = (kind & FAT5_ATTN_TGLOBAL) != 0;
    p.g = g > 0 ? g : 1;
    p.goff = p.tg && !(kind & FAT5_ATTN_GSHARED) ? nb : 0;
    return p;
}

// whether query i sees key j of its sequence under the window and prefix (both positions < n; the
// pattern is symmetric)
__device__ __forceinline__ bool fat5_pat_sees(const fat5_pat &p, int i, int j)
{
    return i < p.pre || j < p.pre || abs(j - i) <= p.rad;
}

// The keys of query i among n: [r[0], r[1]) then [r[2], r[3]) (fat5__attn_range); by symmetry the
// queries of key i as well. Clipped to the scheme's visibility vis (fat5_attn_vis): keys j <= i
// (vis 1) or j >= i (vis 2), read the other way for the queries of a key (queries = true).
__device__ __forceinline__ void fat5_pat_range(const fat5_pat &p, int i, int n, int vis, bool queries, int r[4])
{
    const int pre = min(p.pre, n);
    if (i < pre) {
        r[0] = r[1] = r[2] = 0;
        r[3] = n;
    } else {
        r[0] = 0;
        r[1] = pre;
        r[2] = max(i - p.rad, pre);
        r[3] = min(i + p.rad + 1, n);
    }
    const int v = queries && vis ? 3 - vis : vis;  // the keys' view of the constraint
    if (v == 1) {
        r[1] = min(r[1], i + 1);
        r[3] = min(r[3], i + 1);
    } else if (v == 2) {
        r[0] = max(r[0], i);
        r[2] = max(r[2], i);
    }
}

// the global block of position i among G >= 1 globals (the last takes the rest)
__device__ __forceinline__ int fat5_pat_block(const fat5_pat &p, int i, int G) { return min(i / p.g, G - 1); }

// The union of three ranges [a[x], b[x]) (a >= b: empty) as up to three disjoint ranges, in place
// (an empty one becomes [INT_MAX, INT_MIN)): sorted by start, then each merged into an earlier one
// it meets. Static indices only (registers).
__device__ __forceinline__ void fat5_range_union3(int &a0, int &b0, int &a1, int &b1, int &a2, int &b2)
{
    const int E0 = 0x7fffffff, E1 = (int)0x80000000;
    if (a0 >= b0) a0 = E0, b0 = E1;
    if (a1 >= b1) a1 = E0, b1 = E1;
    if (a2 >= b2) a2 = E0, b2 = E1;
    int t;
#define FAT5_RANGE_SWAP(x, y) \
    if (a##y < a##x) { t = a##x; a##x = a##y; a##y = t; t = b##x; b##x = b##y; b##y = t; }
    FAT5_RANGE_SWAP(0, 1)
    FAT5_RANGE_SWAP(1, 2)
    FAT5_RANGE_SWAP(0, 1)
#undef FAT5_RANGE_SWAP
    if (a1 <= b0) {
        b0 = max(b0, b1);
        a1 = E0, b1 = E1;
    }
    if (a2 <= b0) {
        b0 = max(b0, b2);
        a2 = E0, b2 = E1;
    } else if (a2 <= b1) {
        b1 = max(b1, b2);
        a2 = E0, b2 = E1;
    }
}


// Which keys a query of head h sees: 0 all of its sequence's, 1 those at or before it (j <= i:
// causal, and asymmetric ALiBi's heads h < H/2), 2 those at or after it (j >= i: the other heads).
// Keys outside the range are never visited (a masked tile or chunk is skipped, not computed).
template <int PE>
__device__ __forceinline__ int fat5_attn_vis(int kind, int h, int H)
{
    if ((kind & FAT5_ATTN_MASK) == 2) return 1;
    if (PE == FAT5_PE_ALIBI && (kind & FAT5_ATTN_ALIBI_ASYM)) return h < H / 2 ? 1 : 2;
    return 0;
}

// the keys [lo, hi) that query i sees among nk; the queries [lo, hi) that see key j among nq
__device__ __forceinline__ void fat5_attn_key_range(int vis, int i, int nk, int &lo, int &hi)
{
    lo = vis == 2 ? min(i, nk) : 0;
    hi = vis == 1 ? min(i + 1, nk) : nk;
}
__device__ __forceinline__ void fat5_attn_query_range(int vis, int j, int nq, int &lo, int &hi)
{
    lo = vis == 1 ? min(j, nq) : 0;
    hi = vis == 2 ? min(j + 1, nq) : nq;
}

// ALiBi's slope of head h of n (fat5__alibi_slope): with p the largest power of two <= n,
// 2^(-8 (h + 1) / p) for h < p, else 2^(-4 (2 (h - p) + 1) / p); in double, rounded to fp32.
__device__ __forceinline__ float fat5_alibi_slope(int h, int n)
{
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return (float)exp2(h < p ? -8.0 * (h + 1) / p : -4.0 * (2.0 * (h - p) + 1.0) / p);
}

// The position bias of one head as a kernel sees it (built by fat5_attn_pos).
struct fat5_pb {
    // FAT5_PE_TABLE: bucket b's bias at bias[b * bstride] (NULL: no bias), bucket table lut,
    // kind the mask (1 or 2), nb buckets, md = max_distance
    const float *bias;
    int bstride;
    const int *lut;
    int kind, nb, md;
    float *extra;  // the `extra` floats of shared memory the loader zeroed (NULL when none)
    // transient-global keys (PAT kernels, FAT5_PE_TABLE; fat5_attn_gtable): bucket b of the global
    // table at gbias[b * gstride] (NULL: no bias)
    const float *gbias;
    int gstride;
    // FAT5_PE_ALIBI
    float slope;
    // FAT5_PE_FIRE: fw[w] = (w1[w], b1[w], w2[h, w], w2[h, w] w1[w]) in shared memory, w < W;
    // b2 = mlp.2.bias[h], c and |c|; thr = |L_multiplier L0| (fp32), tc = ceil(thr) (i < thr <=> i <
    // tc for integer i), teq = thr when it is an integer (else -1: no tie), dlm = sign(L_mult) L0
    const float4 *fw;
    int W, tc, teq;
    float b2, c, ac, thr, dlm;
};

// FIRE's normalised distance u(i, j) (fat5__fire_u, in fp32): d = i - j, m = max(i, thr),
// u = sign(d) ln(|c d| + 1) / (ln(|c m| + 1) + 1e-6). With G, also g0 = du/dc and g1 = du/dL_mult
// (the maximum's gradient split evenly at a tie i == thr, as autograd's and the CPU's).
template <bool G>
__device__ __forceinline__ float fat5_fire_u(const fat5_pb &pb, int i, int j, float &g0, float &g1)
{
    const bool below = i < pb.tc;
    const float d = (float)(i - j), ad = fabsf(d);
    const float mx = below ? pb.thr : (float)i;
    const float num = log1pf(pb.ac * ad), den = log1pf(pb.ac * mx) + 1e-6f;
    const float s = d > 0.0f ? 1.0f : d < 0.0f ? -1.0f : 0.0f;
    if (G) {
        const float sc = pb.c > 0.0f ? 1.0f : pb.c < 0.0f ? -1.0f : 0.0f;
        const float em = 1.0f / (pb.ac * mx + 1.0f);
        const float dnum = sc * ad / (pb.ac * ad + 1.0f), dden = sc * mx * em;
        const float dmx = below ? pb.dlm : i == pb.teq ? 0.5f * pb.dlm : 0.0f;
        const float r = s / (den * den);
        g0 = r * (dnum * den - num * dden);
        g1 = -r * num * pb.ac * em * dmx;
    }
    return s * num / den;
}

// FIRE's bias of the head at u: b2 + sum_w w2 relu(w1 u + b1) (fat5__fire_mlp); with D, also
// dm = sum over the units with w1 u + b1 > 0 of w2 w1 (d bias / du).
template <bool D>
__device__ __forceinline__ float fat5_fire_mlp(const fat5_pb &pb, float u, float &dm)
{
    float out = pb.b2, m = 0.0f;
#pragma unroll 4
    for (int w = 0; w < pb.W; w++) {
        const float4 f = pb.fw[w];
        const float a = fmaf(f.x, u, f.y);
        out = fmaf(f.z, fmaxf(a, 0.0f), out);
        if (D) m += a > 0.0f ? f.w : 0.0f;
    }
    if (D) dm = m;
    return out;
}

// The bias of query position i, key position j (PE != FAT5_PE_TABLE, or a table is given).
template <int PE>
__device__ __forceinline__ float fat5_pb_bias(const fat5_pb &pb, int i, int j)
{
    if (PE == FAT5_PE_ALIBI) return -pb.slope * fabsf((float)(j - i));
    if (PE == FAT5_PE_FIRE) {
        float g0, g1, dm;
        return fat5_fire_mlp<false>(pb, fat5_fire_u<false>(pb, i, j, g0, g1), dm);
    }
    return pb.bias[fat5_attn_bucket(j - i, pb.kind, pb.lut, pb.nb, pb.md) * pb.bstride];
}

// Head h's position bias for a block whose own shared rows take `base_floats` floats. T5: the
// tables of fat5_attn_load_tables (cached when the launch has room). ALiBi: the slope. FIRE: the
// head's MLP rows staged as float4 in shared memory at base_floats rounded up to a multiple of 4
// (the launcher always gives 16 W bytes for them there), FIRE's scalars in registers; L0 = md.
// Then `extra` zeroed floats (T5: after the tables, when cached; FIRE: after the rows). Every
// thread of the block must call (it may synchronise the block).
template <int PE>
__device__ __forceinline__ fat5_pb fat5_attn_pos(const float *bias, const int *lut, int h, int H, int kind, int nb,
                                                 int md, int base_floats, int extra)
{
    fat5_pb pb;
    pb.kind = kind & FAT5_ATTN_MASK;
    pb.nb = nb;
    pb.md = md;
    pb.extra = 0;
    pb.bias = 0;
    pb.bstride = 0;
    pb.lut = 0;
    if (PE == FAT5_PE_TABLE) {
        const fat5_attn_tables t = fat5_attn_load_tables(bias, lut, h, H, nb, md, base_floats, extra);
        pb.bias = t.bias;
        pb.bstride = t.bstride;
        pb.lut = t.lut;
        pb.extra = t.extra;
    } else if (PE == FAT5_PE_ALIBI) {
        const int asym = (kind & FAT5_ATTN_ALIBI_ASYM) != 0;
        pb.slope = fat5_alibi_slope(asym ? h % (H / 2) : h, asym ? H / 2 : H);
    } else {
        const int W = nb;
        const long long ob2 = (long long)W * (2 + H);  // FAT5__FIRE_B2(H, W); c, L_mult follow the H b2's
        float4 *fw = (float4 *)((float *)fat5_smem + ((base_floats + 3) & ~3));
        const float *w2 = bias + 2LL * W + (long long)h * W;
        for (int w = threadIdx.x; w < W; w += blockDim.x) {
            const float a = bias[w], z = w2[w];
            fw[w] = make_float4(a, bias[W + w], z, z * a);
        }
        pb.extra = (float *)(fw + W);
        for (int e = threadIdx.x; e < extra; e += blockDim.x) pb.extra[e] = 0.0f;
        pb.fw = fw;
        pb.W = W;
        pb.b2 = bias[ob2 + h];
        pb.c = bias[ob2 + H];
        pb.ac = fabsf(pb.c);
        const float lm = bias[ob2 + H + 1];
        const double thr = fabs((double)lm * (double)md);  // exact: the CPU's comparisons with i
        pb.thr = (float)thr;
        pb.tc = thr < 1e9 ? (int)ceil(thr) : 1000000000;
        pb.teq = thr < 1e9 && floor(thr) == thr ? (int)thr : -1;
        pb.dlm = (lm > 0.0f ? 1.0f : lm < 0.0f ? -1.0f : 0.0f) * (float)md;
        __syncthreads();
    }
    return pb;
}

// The global table of transient-global keys (kind & FAT5_ATTN_TGLOBAL, T5 buckets): its own [nb, H]
// table after T5's in `bias` (read from global memory), or T5's (as fat5_attn_pos cached it) with
// FAT5_ATTN_GSHARED; none without a bias.
__device__ __forceinline__ void fat5_attn_gtable(fat5_pb &pb, const float *bias, int kind, int h, int H, int nb)
{
    pb.gbias = 0;
    pb.gstride = 0;
    if (!bias || !(kind & FAT5_ATTN_TGLOBAL)) return;
    if (kind & FAT5_ATTN_GSHARED) {
        pb.gbias = pb.bias;
        pb.gstride = pb.bstride;
    } else {
        pb.gbias = bias + (long long)nb * H + h;
        pb.gstride = H;
    }
}

// ----- FIRE's gradient (attn_bwd_dq with a bias gradient) ------------------------------------------
// Per score (i, j) of head h with gradient ds, as fat5__fire_grad: for each unit w with
// a = w1 u + b1 > 0: dw2[h, w] += ds a, dw1[w] += ds w2 u, db1[w] += ds w2; db2[h] += ds; and
// du = ds sum_w w2 w1 [a > 0] gives dc += du g0, dL_mult += du g1. Deterministically, no atomics:
//   - the thread that computes a score adds ds, du g0, du g1 to three registers (block sums at the
//     end, fixed order);
//   - the (u, ds) of a chunk or tile are handed over (shuffles or a staged tile) to threads that
//     own units: the accumulator facc[3 (g W + w) + 0..2] (dw1, db1, dw2 of unit w, group g) in
//     shared memory is only ever touched by one thread, over its scores in a fixed order;
//   - fat5_fire_store sums the groups in order into the block's row of shares.
// The launcher then adds the blocks' rows (fat5_colsum_f32) and reduces the heads (fat5_fire_reduce).

// One warp's chunk of cnt keys (lane l holds key l's u and ds; ds = 0 for masked lanes): lane l owns
// units w = l, l + 32, ... of this warp's group (facc = the warp's [W][3] accumulator).
__device__ __forceinline__ void fat5_fire_warp_grad(float *facc, const fat5_pb &pb, float u, float ds, int cnt)
{
    const int lane = threadIdx.x & 31;
    for (int w0 = 0; w0 < pb.W; w0 += 32) {
        const int w = w0 + lane;
        const float4 f = w < pb.W ? pb.fw[w] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f;
        for (int jj = 0; jj < cnt; jj++) {
            const float uj = __shfl_sync(FAT5_FULL_MASK, u, jj), dsj = __shfl_sync(FAT5_FULL_MASK, ds, jj);
            const float a = fmaf(f.x, uj, f.y);
            if (a > 0.0f) {
                const float da = dsj * f.z;
                a0 = fmaf(da, uj, a0);
                a1 += da;
                a2 = fmaf(dsj, a, a2);
            }
        }
        if (w < pb.W) {
            facc[3 * w] += a0;
            facc[3 * w + 1] += a1;
            facc[3 * w + 2] += a2;
        }
    }
}

// Block end: part[(blockIdx.x H + h) S + k], S = 3 W + 3, = the block's share of head h in
// fat5__fire_grad's layout: dw1[W] | db1[W] | dw2 row h [W] (facc's G groups summed in group
// order) | db2[h] | dc | dL_mult (block sums of the threads' s0, s1, s2). facc is pb.extra, and
// 32 more floats after its 3 G W serve the block sums. Every thread of the block must call.
__device__ __forceinline__ void fat5_fire_store(float *part, const fat5_pb &pb, int G, int h, int H, float s0,
                                                float s1, float s2)
{
    const int W = pb.W;
    float *red = pb.extra + 3 * G * W;
    float *row = part + ((long long)blockIdx.x * H + h) * (3LL * W + 3);
    s0 = fat5_block_sum(s0, red);  // its leading barrier also completes facc
    s1 = fat5_block_sum(s1, red);
    s2 = fat5_block_sum(s2, red);
    for (int w = threadIdx.x; w < W; w += blockDim.x) {
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f;
        for (int g = 0; g < G; g++) {
            const float *e = pb.extra + 3 * (g * W + w);
            a0 += e[0];
            a1 += e[1];
            a2 += e[2];
        }
        row[w] = a0;
        row[W + w] = a1;
        row[2 * W + w] = a2;
    }
    if (threadIdx.x == 0) {
        row[3 * W] = s0;
        row[3 * W + 1] = s1;
        row[3 * W + 2] = s2;
    }
}

// ----- forward -----------------------------------------------------------------------------------

// One warp's online softmax over keys [j0, j1) of a query at position qpos (sq: the query in
// shared memory, fp32): lanes over keys for the scores (plus the position bias pb of the scheme
// PE: the bucket bias when pb.bias is not 0, ALiBi, FIRE), lanes over dims for the values. Updates
// the running max m, the sum lsum of exp(score - m) (summed over the warp on return) and acc[r] =
// sum exp(score - m) v for dims lane + 32 r. Shared by the forward's per-token warp and the decode
// splits. fat5_attn_warp_keys_part leaves lsum per lane (several ranges may follow); with GL the
// keys are transient-global keys 0 .. of the query's sequence, qpos its block, the bias from the
// global table (pb.gbias). With dropout (dr.thresh > 0, the forward in training) the probability
// of key j reaching acc is multiplied by fat5_attn_dropm(dr, h, qr, kr0 + j) (h: the head, qr: the
// query's row in the packed q buffer, kr0 + j: the key's in the k buffer); m and lsum stay the
// softmax's.
template <int R, int PE, bool GL>
__device__ __forceinline__ void fat5_attn_warp_keys_part(const float *sq, const act_t *kbase, const act_t *vbase,
                                                         long long ld, int dk, int vw, const fat5_pb &pb, int qpos,
                                                         int j0, int j1, float &m, float &lsum, float (&acc)[R],
                                                         const fat5_dropp &dr, int h, long long qr, long long kr0)
{
    const int lane = threadIdx.x & 31;
    for (int jb = j0; jb < j1; jb += 32) {
        const int j = jb + lane;
        float sc = -FAT5_INF;
        if (j < j1) {
            sc = fat5_attn_dot(sq, kbase + (long long)j * ld, dk, vw);
            if (GL) {
                if (pb.gbias) sc += pb.gbias[fat5_attn_bucket(j - qpos, 1, pb.lut, pb.nb, pb.md) * pb.gstride];
            } else if (PE != FAT5_PE_TABLE || pb.bias) {
                sc += fat5_pb_bias<PE>(pb, qpos, j);
            }
        }
        const float mnew = fmaxf(m, fat5_warp_max(sc));  // finite: key jb is valid
        const float corr = expf(m - mnew);                // 0 on the first chunk
        float p = j < j1 ? expf(sc - mnew) : 0.0f;
        lsum = lsum * corr + p;                           // per lane; summed at the end
        if (dr.thresh && j < j1) p *= fat5_attn_dropm(dr, h, qr, kr0 + j);  // what reaches v
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
}

// The same over one range, lsum summed over the warp; no dropout (the decode splits).
template <int R, int PE>
__device__ __forceinline__ void fat5_attn_warp_keys(const float *sq, const act_t *kbase, const act_t *vbase,
                                                    long long ld, int dk, int vw, const fat5_pb &pb, int qpos,
                                                    int j0, int j1, float &m, float &lsum, float (&acc)[R])
{
    const fat5_dropp none = {0ULL, 0ULL, 0u, 1.0f};
    fat5_attn_warp_keys_part<R, PE, false>(sq, kbase, vbase, ld, dk, vw, pb, qpos, j0, j1, m, lsum, acc, none, 0, 0LL,
                                           0LL);
    lsum = fat5_warp_sum(lsum);
}


// The per-warp forward (fat5_attn_fwd below): one warp per (token, head). Under dropout each lane
// multiplies its key's probability by the multiplier of (token row t, key row) after the softmax's
// sum took it and before it meets v (fat5_attn_warp_keys_part).
template <int R, int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_fwd_impl(act_t *o, float *lse, const act_t *q, const act_t *k,
                                                   const act_t *v, const float *bias, const int *lut,
                                                   const int *cu_q, const int *cu_k, const int *q_seq, long long Tq,
                                                   int H, int dk, int kind, int nb, int md, int g, const int *cu_g, const fat5_dropp &dr)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    fat5_pb pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, nwarps * dk, 0);
    if (PAT && PE == FAT5_PE_TABLE) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    float *sq = (float *)fat5_smem + warp * dk;
    const int vw = fat5_attn_vec_width(dk, k, k);
    for (long long t = (long long)blockIdx.x * nwarps + warp; t < Tq; t += (long long)gridDim.x * nwarps) {
        const int s = q_seq[t], q0 = cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0;
        const int i = (int)(t - q0);
        int jlo, jhi;
        fat5_attn_key_range(vis, i, nk, jlo, jhi);
        int nkeys = jhi > jlo;
        const act_t *qrow = q + t * ld + (long long)h * dk;
        const act_t *kbase = k + (long long)k0 * ld + (long long)h * dk;
        const act_t *vbase = v + (long long)k0 * ld + (long long)h * dk;
        float acc[R];
        float m = -FAT5_INF, lsum = 0.0f;
        for (int d = lane; d < dk; d += 32) sq[d] = fat5_ld(qrow[d]);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        __syncwarp();
        // dropout: key j of the sequence is key row k0 + j, global key j row g0 + j
        if (!PAT) {
            fat5_attn_warp_keys_part<R, PE, false>(sq, kbase, vbase, ld, dk, vw, pb, i, jlo, jhi, m, lsum, acc, dr,
                                                   h, t, k0);
            lsum = fat5_warp_sum(lsum);
        } else {  // the window (and prefix), then the transient-global keys
            int r[4];
            fat5_pat_range(pt, i, nk, vis, false, r);
            fat5_attn_warp_keys_part<R, PE, false>(sq, kbase, vbase, ld, dk, vw, pb, i, r[0], r[1], m, lsum, acc, dr,
                                                   h, t, k0);
            fat5_attn_warp_keys_part<R, PE, false>(sq, kbase, vbase, ld, dk, vw, pb, i, r[2], r[3], m, lsum, acc, dr,
                                                   h, t, k0);
            nkeys = r[1] > r[0] || r[3] > r[2];
            if (PE == FAT5_PE_TABLE && pt.tg) {
                const int g0 = cu_g[s], G = cu_g[s + 1] - g0;
                if (G > 0) {
                    const long long go = (long long)g0 * ld + (long long)h * dk;
                    fat5_attn_warp_keys_part<R, PE, true>(sq, k + go, v + go, ld, dk, vw, pb,
                                                          fat5_pat_block(pt, i, G), 0, G, m, lsum, acc, dr, h, t,
                                                          g0);
                    nkeys = 1;
                }
            }
            lsum = fat5_warp_sum(lsum);
        }
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
// long long Tq, int H, int dk): delta[t*H+h] = sum_d dout[t,h,d] o[t,h,d] (row t*H+h starts at
// element (t*H+h)*dk). When a row is G = dk / FAT5_VEC_E 16-byte groups, G a power of two up to 32,
// and both pointers are 16-byte aligned (fat5_attn_delta_groups), each thread takes one group and
// the G lanes of a row add their sums by a fixed butterfly (grid-stride over groups, the warp's
// loop uniform); else one warp per row, lanes over d (grid-stride over rows).
__device__ __forceinline__ int fat5_attn_delta_groups(int dk)
{
    const int G = dk / FAT5_VEC_E;
    return dk % FAT5_VEC_E == 0 && G <= 32 && (G & (G - 1)) == 0 ? G : 0;
}

#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_attn_bwd_delta(float *delta, const act_t *o, const act_t *dout, long long Tq, int H,
                                               int dk)
{
    const int lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    const long long rows = Tq * H;
    const int G = fat5_attn_delta_groups(dk);
    if (G && fat5_al16(o, dout, 0, 0)) {
        const long long ng = rows * G, stride = (long long)gridDim.x * blockDim.x;
        // a warp's 32 lanes hold whole rows (G divides 32): every lane of it runs each iteration
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i - lane < ng; i += stride) {
            float s = 0.0f;
            if (i < ng) {
                float a[FAT5_VEC_E], b[FAT5_VEC_E];
                fat5_ld16(o + i * FAT5_VEC_E, a);
                fat5_ld16(dout + i * FAT5_VEC_E, b);
#pragma unroll
                for (int e = 0; e < FAT5_VEC_E; e++) s = fmaf(a[e], b[e], s);
            }
            for (int off = G >> 1; off > 0; off >>= 1) s += __shfl_xor_sync(FAT5_FULL_MASK, s, off);
            if (i < ng && (lane & (G - 1)) == 0) delta[i / G] = s;
        }
        return;
    }
    for (long long row = (long long)blockIdx.x * nwarps + (threadIdx.x >> 5); row < rows;
         row += (long long)gridDim.x * nwarps) {
        const act_t *a = o + row * dk, *b = dout + row * dk;
        float s = 0.0f;
        for (int d = lane; d < dk; d += 32) s = fmaf(fat5_ld(a[d]), fat5_ld(b[d]), s);
        s = fat5_warp_sum(s);
        if (lane == 0) delta[row] = s;
    }
}
#endif

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

// The per-warp attn_bwd_dq (fat5_attn_bwd_dq below): one warp per (token, head), lanes over keys.
// Under dropout a lane's dP = dout.v is multiplied by the forward's multiplier of (token row t, key
// row: k0 + j, or cu_g[s] + j for a transient-global key) before ds = p (m dP - delta).
template <int R, int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_bwd_dq_impl(act_t *dq, float *dbias, const act_t *dout, const float *lse,
                                                      const float *delta, const act_t *q, const act_t *k,
                                                      const act_t *v, const float *bias, const int *lut,
                                                      const int *cu_q, const int *cu_k, const int *q_seq,
                                                      long long Tq, int H, int dk, int kind, int nb, int md, int g,
                                                      const int *cu_g, const fat5_dropp &dr)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const int nbt = PAT ? nb + pt.goff : nb;  // accumulated buckets: T5's, then the global table's
    // dbias: T5, the per-bucket partials (a warp accumulator of nbt floats each); FIRE, the shares
    // (a [W][3] accumulator per warp, 32 floats for the block sums); ALiBi has no gradient (NULL)
    fat5_pb pb = fat5_attn_pos<PE>(
        bias, lut, h, H, kind, nb, md, 2 * nwarps * dk,
        !dbias ? 0 : PE == FAT5_PE_TABLE ? nwarps * nbt : PE == FAT5_PE_FIRE ? 3 * nwarps * nb + 32 : 0);
    if (PAT && PE == FAT5_PE_TABLE) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    float *sdb = PE == FAT5_PE_TABLE && dbias ? pb.extra + warp * nbt : 0;  // this warp's dbias accumulator (head h)
    const int need_bucket = PE == FAT5_PE_TABLE && (pb.bias != 0 || dbias != 0);
    const bool fire_grad = PE == FAT5_PE_FIRE && dbias;
    float fs0 = 0.0f, fs1 = 0.0f, fs2 = 0.0f;  // FIRE: this lane's sums of ds, du dc, du dL_mult
    float *sq = (float *)fat5_smem + warp * dk;
    float *sdo = (float *)fat5_smem + (nwarps + warp) * dk;
    const int vw = fat5_attn_vec_width(dk, k, v);
    for (long long t = (long long)blockIdx.x * nwarps + warp; t < Tq; t += (long long)gridDim.x * nwarps) {
        const int s = q_seq[t], q0 = cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0;
        const int i = (int)(t - q0);
        int jlo, jhi;
        fat5_attn_key_range(vis, i, nk, jlo, jhi);
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
        // PAT: the window (and prefix) ranges, then the transient-global keys (segment 2)
        int pr[4] = {0, 0, jlo, jhi}, G = 0, blk = 0, g0 = 0;  // g0: the first global key row
        const act_t *gkbase = kbase, *gvbase = vbase;
        if (PAT) {
            fat5_pat_range(pt, i, nk, vis, false, pr);
            if (PE == FAT5_PE_TABLE && pt.tg) {
                g0 = cu_g[s];
                G = cu_g[s + 1] - g0;
                blk = G > 0 ? fat5_pat_block(pt, i, G) : 0;
                gkbase = k + (long long)g0 * ld + (long long)h * dk;
                gvbase = v + (long long)g0 * ld + (long long)h * dk;
            }
        }
        for (int seg = PAT ? 0 : 1; seg < (PAT && PE == FAT5_PE_TABLE ? 3 : 2); seg++) {
            const bool glob = PAT && PE == FAT5_PE_TABLE && seg == 2;
            const int ja = seg == 0 ? pr[0] : seg == 1 ? pr[2] : 0, je = seg == 0 ? pr[1] : seg == 1 ? pr[3] : G;
            const act_t *kseg = glob ? gkbase : kbase, *vseg = glob ? gvbase : vbase;
            const int krow0 = glob ? g0 : k0;  // dropout: key j is key row krow0 + j
            for (int jb = ja; jb < je; jb += 32) {
                const int j = jb + lane;
                float ds = 0.0f, fu = 0.0f;  // fu: FIRE's u of this lane's key
                int fb = -1;      // a finished run to flush
                float fs = 0.0f;
                if (j < je) {
                    // b: the accumulator's bucket (global keys: the global table's, from pt.goff)
                    const int b = !need_bucket ? 0
                                  : glob       ? fat5_attn_bucket(j - blk, 1, pb.lut, nb, md) + pt.goff
                                               : fat5_attn_bucket(j - i, pb.kind, pb.lut, nb, md);
                    // dropout: the forward's P m met V, so dP is m dP (m of token row t, key row krow0 + j)
                    const float drm = dr.thresh ? fat5_attn_dropm(dr, h, t, krow0 + j) : 1.0f;
                    float sc = fat5_attn_dot(sq, kseg + (long long)j * ld, dk, vw);
                    float g0 = 0.0f, g1 = 0.0f, dm = 0.0f;
                    if (glob) {
                        if (pb.gbias) sc += pb.gbias[(b - pt.goff) * pb.gstride];
                    } else if (PE == FAT5_PE_TABLE) {
                        if (pb.bias) sc += pb.bias[b * pb.bstride];
                    } else if (PE == FAT5_PE_FIRE) {
                        fu = fat5_fire_u<true>(pb, i, j, g0, g1);
                        sc += fat5_fire_mlp<true>(pb, fu, dm);
                    } else {
                        sc += fat5_pb_bias<PE>(pb, i, j);
                    }
                    const float p = expf(sc - L);
                    float dp = fat5_attn_dot(sdo, vseg + (long long)j * ld, dk, vw);
                    if (dr.thresh) dp *= drm;
                    ds = p * (dp - dl);
                    if (PE == FAT5_PE_TABLE && dbias && b != run_b) {
                        fb = run_b;
                        fs = run_s;
                        run_b = b;
                        run_s = 0.0f;
                    }
                    run_s += ds;
                    if (fire_grad) {
                        const float du = ds * dm;
                        fs0 += ds;
                        fs1 = fmaf(du, g0, fs1);
                        fs2 = fmaf(du, g1, fs2);
                    }
                }
                if (PE == FAT5_PE_TABLE && dbias) fat5_attn_dbias_flush(sdb, fb, fs);
                const int cnt = min(32, je - jb);
                if (fire_grad) fat5_fire_warp_grad(pb.extra + 3 * warp * nb, pb, fu, ds, cnt);
                for (int jj = 0; jj < cnt; jj++) {
                    const float dsj = __shfl_sync(FAT5_FULL_MASK, ds, jj);
                    const act_t *krow = kseg + (long long)(jb + jj) * ld;
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const int d = lane + 32 * r;
                        if (d < dk) acc[r] = fmaf(dsj, fat5_ld(krow[d]), acc[r]);
                    }
                }
            }
        }
        if (PE == FAT5_PE_TABLE && dbias) fat5_attn_dbias_flush(sdb, run_b, run_s);
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int d = lane + 32 * r;
            if (d < dk) dq[off + d] = fat5_st(acc[r]);
        }
        __syncwarp();  // sq, sdo are rewritten by the next token
    }
    if (PE == FAT5_PE_TABLE && dbias) fat5_attn_dbias_store(dbias, pb.extra, nbt, h, H);
    if (fire_grad) fat5_fire_store(dbias, pb, nwarps, h, H, fs0, fs1, fs2);
}


// The per-warp attn_bwd_dkv (fat5_attn_bwd_dkv below): one warp per (key row u, head), lanes over
// queries. Under dropout, with m the forward's multiplier of (query row q0 + i, key row u): ds = p
// (m dP - delta) and dv gathers p m dout.
template <int R, int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_bwd_dkv_impl(act_t *dk_, act_t *dv, const act_t *dout, const float *lse,
                                                       const float *delta, const act_t *q, const act_t *k,
                                                       const act_t *v, const float *bias, const int *lut,
                                                       const int *cu_q, const int *cu_k, const int *k_seq,
                                                       long long Tk, int H, int dk, int kind, int nb, int md, int g,
                                                       const int *cu_g, const fat5_dropp &dr)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    fat5_pb pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, 2 * nwarps * dk, 0);
    if (PAT && PE == FAT5_PE_TABLE) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    float *sk = (float *)fat5_smem + warp * dk;
    float *sv = (float *)fat5_smem + (nwarps + warp) * dk;
    const int vw = fat5_attn_vec_width(dk, q, dout);
    for (long long u = (long long)blockIdx.x * nwarps + warp; u < Tk; u += (long long)gridDim.x * nwarps) {
        const int s = k_seq[u], k0 = cu_k[s], q0 = cu_q[s], nq0 = cu_q[s + 1] - q0;
        int j = (int)(u - k0);
        int i0, nq;  // key j is seen by queries [i0, nq) (causal: i >= j)
        fat5_attn_query_range(vis, j, nq0, i0, nq);
        // PAT: the queries [pr[0], pr[1]) then [pr[2], pr[3]); a transient-global key (G > 0:
        // its sequence's G globals) is seen by every query of its sequence
        int pr[4] = {0, 0, i0, nq}, G = 0;
        if (PAT) {
            if (PE == FAT5_PE_TABLE && pt.tg && u >= cu_g[s] && u < cu_g[s + 1]) {
                G = cu_g[s + 1] - cu_g[s];
                j = (int)(u - cu_g[s]);
                pr[3] = nq0;
            } else {
                fat5_pat_range(pt, j, nq0, vis, true, pr);
            }
        }
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
        for (int seg = PAT ? 0 : 1; seg < 2; seg++) {
            const int ia = seg == 0 ? pr[0] : pr[2], ie = seg == 0 ? pr[1] : pr[3];
            for (int ib = ia; ib < ie; ib += 32) {
                const int i = ib + lane;
                float p = 0.0f, ds = 0.0f;
                if (i < ie) {
                    // dropout: the forward's multiplier of (query row q0 + i, key row u)
                    const float drm = dr.thresh ? fat5_attn_dropm(dr, h, q0 + i, u) : 1.0f;
                    float sc = fat5_attn_dot(sk, qbase + (long long)i * ld, dk, vw);
                    if (PAT && PE == FAT5_PE_TABLE && G > 0) {
                        if (pb.gbias)
                            sc += pb.gbias[fat5_attn_bucket(j - fat5_pat_block(pt, i, G), 1, pb.lut, nb, md) *
                                           pb.gstride];
                    } else if (PE != FAT5_PE_TABLE || pb.bias) {
                        sc += fat5_pb_bias<PE>(pb, i, j);
                    }
                    p = expf(sc - lse_s[(long long)i * H]);
                    float dp = fat5_attn_dot(sv, dobase + (long long)i * ld, dk, vw), pm = p;
                    if (dr.thresh) {  // the forward's P m met V: m dP, and dv gathers P m
                        dp *= drm;
                        pm = p * drm;
                    }
                    ds = p * (dp - delta_s[(long long)i * H]);
                    p = pm;  // dv's weight
                }
                const int cnt = min(32, ie - ib);
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

// FIRE's gradient (see fat5_fire_warp_grad) from one staged tile of the tiled dq: Ut[key][row] (u)
// and St[key][row] (ds), stride FAT5_AT_V, keys < nk, 64 rows;
// G = max(1, blockDim.x / W) groups: entry e = g W + w (e < G W) belongs to thread e mod
// blockDim.x and takes the tile's scores s = g, g + G, ... (key s / 64, row s mod 64) in order.
__device__ __forceinline__ void fat5_fire_tile_grad(float *facc, const fat5_pb &pb, const float *Ut, const float *St,
                                                    int nk, int G)
{
    const int n = nk * 64;
    for (int e = threadIdx.x; e < G * pb.W; e += blockDim.x) {
        const int g = e / pb.W, w = e - g * pb.W;
        const float4 f = pb.fw[w];
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f;
        for (int s = g; s < n; s += G) {
            const int o = (s >> 6) * FAT5_AT_V + (s & 63);
            const float uj = Ut[o], dsj = St[o];
            const float a = fmaf(f.x, uj, f.y);
            if (a > 0.0f) {
                const float da = dsj * f.z;
                a0 = fmaf(da, uj, a0);
                a1 += da;
                a2 = fmaf(dsj, a, a2);
            }
        }
        facc[3 * e] += a0;
        facc[3 * e + 1] += a1;
        facc[3 * e + 2] += a2;
    }
}

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

// Dropout of a thread's 4 x 4 scores of a tile in head h: bit 4 r + c is set when the probability
// of row r, column c is kept (one Philox block per score). The rows are rows row0 + r and the
// columns col0 + 16 c of the packed buffers: query rows and key rows, or with KR (dk/dv's tiles,
// rows of keys) key rows and query rows. Drawn before the tile's scores, so that the draws do not
// add to the registers the scores hold.
template <bool KR>
__device__ __forceinline__ unsigned int fat5_at_drop_bits(const fat5_dropp &dr, int h, long long row0, long long col0)
{
    unsigned int bits = 0;
#pragma unroll 1
    for (int e = 0; e < 16; e++) {
        const long long a = row0 + (e >> 2), b = col0 + 16 * (e & 3);
        if (fat5_attn_dropm(dr, h, KR ? b : a, KR ? a : b) != 0.0f) bits |= 1u << e;
    }
    return bits;
}

// the multiplier of score (r, c) under the bits of fat5_at_drop_bits: dr.scale when kept, else 0
__device__ __forceinline__ float fat5_at_drop_mul(const fat5_dropp &dr, unsigned int bits, int r, int c)
{
    return (bits >> (4 * r + c)) & 1u ? dr.scale : 0.0f;
}

// PAT: the key tiles of a tile of query rows t0 .. tl (packed, in sequence order): [ps, pe) the
// first sequence's prefix before the window hull, [ws, we) the hull (from the first row's first
// key to the last key any row sees; the keys of sequences in between and the later sequences'
// prefixes lie in it), [gs, ge) the transient-global rows of the tile's sequences. Each range is
// walked once; the scores are masked exactly (fat5_pat_sees, the row's global rows).
__device__ __forceinline__ void fat5_pat_tile_keys(const fat5_pat &pt, const int *cu_q, const int *cu_k,
                                                   const int *q_seq, const int *cu_g, long long t0, long long tl,
                                                   int &ps, int &pe, int &ws, int &we, int &gs, int &ge)
{
    const int sf = q_seq[t0], kf = cu_k[sf], nf = cu_k[sf + 1] - kf, i_f = (int)(t0 - cu_q[sf]);
    const int sl = q_seq[tl], kl = cu_k[sl], nl = cu_k[sl + 1] - kl, i_l = (int)(tl - cu_q[sl]);
    const int pref = min(pt.pre, nf), prel = min(pt.pre, nl);
    ws = kf + (i_f < pref ? 0 : max(i_f - pt.rad, 0));
    we = kl + (i_l < prel ? nl : min(i_l + pt.rad + 1, nl));
    if (sl != sf ? prel > 0 : i_f < pref) we = kl + nl;  // a global query of the last sequence sees all of it
    ps = kf;
    pe = min(kf + pref, ws);
    gs = pt.tg ? cu_g[sf] : 0;
    ge = pt.tg ? cu_g[sl + 1] : 0;
}

// The key tiles of a tile of query rows t0 .. t0 + nrow - 1: PAT, fat5_pat_tile_keys's ranges; else
// [ws, we) from the first row's first key (its own position with vis 2) to the last row's last
// (vis 1: up to itself), and no prefix or global ranges.
template <bool PAT>
__device__ __forceinline__ void fat5_attn_tile_keys(const fat5_pat &pt, int vis, const int *cu_q, const int *cu_k,
                                                    const int *q_seq, const int *cu_g, long long t0, int nrow,
                                                    int &ps, int &pe, int &ws, int &we, int &gs, int &ge)
{
    ps = pe = gs = ge = 0;
    if (PAT) {
        fat5_pat_tile_keys(pt, cu_q, cu_k, q_seq, cu_g, t0, t0 + nrow - 1, ps, pe, ws, we, gs, ge);
        return;
    }
    ws = cu_k[q_seq[t0]];
    if (vis == 2) ws += (int)(t0 - cu_q[q_seq[t0]]);
    const long long tl = t0 + nrow - 1;
    const int s = q_seq[tl], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(tl - cu_q[s]);
    we = k0 + (vis == 1 ? min(i + 1, nk) : nk);
}

// The global phase of a tile (transient-global keys): row r's key rows become [klo, khi) = its
// sequence's global rows cu_g[s] .. cu_g[s + 1], and ip its bucket origin: the first global row
// plus the row's block (so that the bucket of key row u is that of u - ip). Rows past Tq see none.
__device__ __forceinline__ void fat5_pat_global_rows(const fat5_pat &pt, const int *cu_q, const int *q_seq,
                                                     const int *cu_g, long long t0, long long Tq, int ty, int klo[4],
                                                     int khi[4], int ip[4])
{
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const long long t = t0 + ty * 4 + r;
        klo[r] = khi[r] = ip[r] = 0;
        if (t < Tq) {
            const int s = q_seq[t], g0 = cu_g[s], G = cu_g[s + 1] - g0;
            klo[r] = g0;
            khi[r] = g0 + G;
            ip[r] = G > 0 ? g0 + fat5_pat_block(pt, (int)(t - cu_q[s]), G) : 0;
        }
    }
}

// The tiled forward (fat5_attn_fwd below): a tile of 64 query rows against key tiles of 64, online
// softmax per row. Under dropout the staged probabilities are P m (query row t0 + 4 ty + r, key row
// kt0 + tx + 16 c), after l summed P.
template <int DC, int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_fwd_tiled(act_t *o, float *lse, const act_t *q, const act_t *k,
                                                    const act_t *v, const float *bias, const int *lut,
                                                    const int *cu_q, const int *cu_k, const int *q_seq, long long Tq,
                                                    int H, int dk, int kind, int nb, int md, int g, const int *cu_g, const fat5_dropp &dr)
{
    const int DKP = 16 * DC;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    float *Qt = (float *)fat5_smem;    // [DKP][V]  queries
    float *Pt = Qt + DKP * FAT5_AT_V;  // [64 keys][V] probabilities
    float *Kt = Pt + 64 * FAT5_AT_V;   // [DKP][S]
    float *Vt = Kt + DKP * FAT5_AT_S;  // [DKP][S]
    fat5_pb pb =
        fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, DKP * (FAT5_AT_V + 2 * FAT5_AT_S) + 64 * FAT5_AT_V, 0);
    if (PAT && PE == FAT5_PE_TABLE) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const bool TG = PAT && PE == FAT5_PE_TABLE;  // transient-global keys possible
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    for (long long tile = blockIdx.x; tile * 64 < Tq; tile += gridDim.x) {
        const long long t0 = tile * 64;
        const int nrow = (int)min(64LL, Tq - t0);
        // row r sees keys [klo + (vis == 2 ? ip : 0), khi) (packed indices); klo is its sequence's first key
        // (PAT: those the pattern shows; in the global phase, fat5_pat_global_rows)
        int klo[4], khi[4], ip[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long t = t0 + ty * 4 + r;
            klo[r] = khi[r] = ip[r] = 0;
            if (t < Tq) {
                const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
                klo[r] = k0;
                khi[r] = k0 + (vis == 1 ? min(i + 1, nk) : nk);
                ip[r] = i;
            }
        }
        // the keys of the tile's rows: from the first row's first to the last row's last
        int kstart, kend, ps, pe, gs, ge;
        fat5_attn_tile_keys<PAT>(pt, vis, cu_q, cu_k, q_seq, cu_g, t0, nrow, ps, pe, kstart, kend, gs, ge);
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
        // PAT: the prefix (phase 0), the hull (1), the global rows (2)
        for (int ph = PAT ? 0 : 1; ph < (TG && pt.tg ? 3 : 2); ph++) {
            const bool glob = TG && ph == 2;
            const int ka = ph == 0 ? ps : ph == 1 ? kstart : gs, ke = ph == 0 ? pe : ph == 1 ? kend : ge;
            if (glob) fat5_pat_global_rows(pt, cu_q, q_seq, cu_g, t0, Tq, ty, klo, khi, ip);
            for (int kt0 = ka; kt0 < ke; kt0 += 64) {
                const int nkr = min(64, ke - kt0);
                __syncthreads();  // readers of Kt, Vt, Pt are done
                fat5_at_load<DKP>(Kt, FAT5_AT_S, k + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
                fat5_at_load<DKP>(Vt, FAT5_AT_S, v + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
                // dropout (training): what reaches V is P m, m of query row t0 + 4 ty + r and key row
                // kt0 + tx + 16 c (the k buffer's row in every phase); l keeps the softmax's
                const unsigned int keep = dr.thresh ? fat5_at_drop_bits<false>(dr, h, t0 + ty * 4, kt0 + tx) : 0u;
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
                        if (glob) {
                            if (u >= klo[r] && u < khi[r]) {
                                if (pb.gbias)
                                    sc[r][c] += pb.gbias[fat5_attn_bucket(u - ip[r], 1, pb.lut, nb, md) * pb.gstride];
                            } else {
                                sc[r][c] = -FAT5_INF;
                            }
                        } else if (u >= klo[r] + (vis == 2 ? ip[r] : 0) && u < khi[r] &&
                                   (!PAT || (u < ke && fat5_pat_sees(pt, ip[r], u - klo[r])))) {
                            // PAT: u < ke, the phase's end: a short phase leaves stale keys in the tile
                            if (PE != FAT5_PE_TABLE || pb.bias) sc[r][c] += fat5_pb_bias<PE>(pb, ip[r], u - klo[r]);
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
                if (dr.thresh) {  // P m after l took P
#pragma unroll
                    for (int r = 0; r < 4; r++)
#pragma unroll
                        for (int c = 0; c < 4; c++) sc[r][c] *= fat5_at_drop_mul(dr, keep, r, c);
                }
                fat5_at_stage(Pt, sc, tx, ty);
                __syncthreads();
                fat5_at_accum<DC>(acc, Pt, Vt, nkr, tx, ty);  // acc += P V
            }
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

// The tiled attn_bwd_dq (fat5_attn_bwd_dq below): a tile of 64 query rows against key tiles of 64.
// Under dropout each score's dP is multiplied by the forward's multiplier of (query row t0 + 4 ty +
// r, key row u) before ds = p (m dP - delta).
template <int DC, int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_bwd_dq_tiled(act_t *dq, float *dbias, const act_t *dout, const float *lse,
                                                       const float *delta, const act_t *q, const act_t *k,
                                                       const act_t *v, const float *bias, const int *lut,
                                                       const int *cu_q, const int *cu_k, const int *q_seq,
                                                       long long Tq, int H, int dk, int kind, int nb, int md, int g,
                                                       const int *cu_g, const fat5_dropp &dr)
{
    const int DKP = 16 * DC;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    const bool fire_grad = PE == FAT5_PE_FIRE && dbias;
    const int fg = nb < 256 ? 256 / nb : 1;  // FIRE's gradient: groups of unit accumulators
    float *Qt = (float *)fat5_smem;      // [DKP][V]
    float *Ot = Qt + DKP * FAT5_AT_V;    // [DKP][V] dout
    float *St = Ot + DKP * FAT5_AT_V;    // [64 keys][V] ds
    float *Kt = St + 64 * FAT5_AT_V;     // [DKP][S]
    float *Vt = Kt + DKP * FAT5_AT_S;    // [DKP][S]
    float *Ut = Vt + DKP * FAT5_AT_S;    // FIRE's gradient: [64 keys][V] u
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const bool TG = PAT && PE == FAT5_PE_TABLE;  // transient-global keys possible
    const int nbt = PAT ? nb + pt.goff : nb;     // accumulated buckets: T5's, then the global table's
    // dbias: T5, the per-bucket partials (8 warps' accumulators of nbt floats); FIRE, the shares
    // (fg groups of [W][3] accumulators and 32 floats for the block sums); ALiBi: NULL
    fat5_pb pb = fat5_attn_pos<PE>(
        bias, lut, h, H, kind, nb, md,
        DKP * (2 * FAT5_AT_V + 2 * FAT5_AT_S) + 64 * FAT5_AT_V + (fire_grad ? 64 * FAT5_AT_V : 0),
        !dbias ? 0 : PE == FAT5_PE_TABLE ? 8 * nbt : PE == FAT5_PE_FIRE ? 3 * fg * nb + 32 : 0);
    if (TG) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    float *sdb = PE == FAT5_PE_TABLE && dbias ? pb.extra + (threadIdx.x >> 5) * nbt : 0;  // this warp's accumulator
    const int need_bucket = PE == FAT5_PE_TABLE && (pb.bias != 0 || dbias != 0);
    int run_b = -1;
    float run_s = 0.0f;
    float fs0 = 0.0f, fs1 = 0.0f, fs2 = 0.0f;  // FIRE: this thread's sums of ds, du dc, du dL_mult
    for (long long tile = blockIdx.x; tile * 64 < Tq; tile += gridDim.x) {
        const long long t0 = tile * 64;
        const int nrow = (int)min(64LL, Tq - t0);
        int klo[4], khi[4], ip[4];  // as in the forward
        float L[4], Dl[4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long t = t0 + ty * 4 + r;
            klo[r] = khi[r] = ip[r] = 0;
            L[r] = Dl[r] = 0.0f;
            if (t < Tq) {
                const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
                klo[r] = k0;
                khi[r] = k0 + (vis == 1 ? min(i + 1, nk) : nk);
                ip[r] = i;
                L[r] = lse[t * H + h];
                Dl[r] = delta[t * H + h];
            }
        }
        int kstart, kend, ps, pe, gs, ge;
        fat5_attn_tile_keys<PAT>(pt, vis, cu_q, cu_k, q_seq, cu_g, t0, nrow, ps, pe, kstart, kend, gs, ge);
        __syncthreads();
        fat5_at_load<DKP>(Qt, FAT5_AT_V, q + t0 * ld + (long long)h * dk, ld, nrow, dk);
        fat5_at_load<DKP>(Ot, FAT5_AT_V, dout + t0 * ld + (long long)h * dk, ld, nrow, dk);
        float acc[4][DC];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < DC; c++) acc[r][c] = 0.0f;
        for (int ph = PAT ? 0 : 1; ph < (TG && pt.tg ? 3 : 2); ph++) {  // as in the forward
            const bool glob = TG && ph == 2;
            const int ka = ph == 0 ? ps : ph == 1 ? kstart : gs, ke = ph == 0 ? pe : ph == 1 ? kend : ge;
            if (glob) fat5_pat_global_rows(pt, cu_q, q_seq, cu_g, t0, Tq, ty, klo, khi, ip);
            for (int kt0 = ka; kt0 < ke; kt0 += 64) {
                const int nkr = min(64, ke - kt0);
                __syncthreads();
                fat5_at_load<DKP>(Kt, FAT5_AT_S, k + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
                fat5_at_load<DKP>(Vt, FAT5_AT_S, v + (long long)kt0 * ld + (long long)h * dk, ld, nkr, dk);
                // dropout: the forward's P m met V, so dP is m dP (m of query row t0 + 4 ty + r, key row u)
                const unsigned int keep = dr.thresh ? fat5_at_drop_bits<false>(dr, h, t0 + ty * 4, kt0 + tx) : 0u;
                __syncthreads();
                float sc[4][4], dp[4][4];
                fat5_at_two_tiles(sc, dp, Qt, Ot, Kt, Vt, ty, tx, dk);  // scores q.k and dp = dout.v
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int u = kt0 + tx + 16 * c;
                        float ds = 0.0f, fu = 0.0f;  // fu: FIRE's u of the score
                        int fb = -1;      // a finished run to flush
                        float fs = 0.0f;
                        if (glob ? u >= klo[r] && u < khi[r]
                                 : u >= klo[r] + (vis == 2 ? ip[r] : 0) && u < khi[r] &&
                                       (!PAT || (u < ke && fat5_pat_sees(pt, ip[r], u - klo[r])))) {
                            // b: the accumulator's bucket (global keys: the global table's, from pt.goff)
                            const int b = !need_bucket ? 0
                                          : glob ? fat5_attn_bucket(u - ip[r], 1, pb.lut, nb, md) + pt.goff
                                                 : fat5_attn_bucket(u - klo[r] - ip[r], pb.kind, pb.lut, nb, md);
                            float s = sc[r][c], g0 = 0.0f, g1 = 0.0f, dm = 0.0f;
                            if (glob) {
                                if (pb.gbias) s += pb.gbias[(b - pt.goff) * pb.gstride];
                            } else if (PE == FAT5_PE_TABLE) {
                                if (pb.bias) s += pb.bias[b * pb.bstride];
                            } else if (PE == FAT5_PE_FIRE) {
                                fu = fat5_fire_u<true>(pb, ip[r], u - klo[r], g0, g1);
                                s += fat5_fire_mlp<true>(pb, fu, dm);
                            } else {
                                s += fat5_pb_bias<PE>(pb, ip[r], u - klo[r]);
                            }
                            const float p = expf(s - L[r]);
                            float dpm = dp[r][c];
                            if (dr.thresh) dpm *= fat5_at_drop_mul(dr, keep, r, c);
                            ds = p * (dpm - Dl[r]);
                            if (PE == FAT5_PE_TABLE && dbias && b != run_b) {
                                fb = run_b;
                                fs = run_s;
                                run_b = b;
                                run_s = 0.0f;
                            }
                            run_s += ds;
                            if (fire_grad) {
                                const float du = ds * dm;
                                fs0 += ds;
                                fs1 = fmaf(du, g0, fs1);
                                fs2 = fmaf(du, g1, fs2);
                            }
                        }
                        if (PE == FAT5_PE_TABLE && dbias) fat5_attn_dbias_flush(sdb, fb, fs);
                        sc[r][c] = ds;
                        dp[r][c] = fu;
                    }
                fat5_at_stage(St, sc, tx, ty);
                if (fire_grad) fat5_at_stage(Ut, dp, tx, ty);
                __syncthreads();
                fat5_at_accum<DC>(acc, St, Kt, nkr, tx, ty);  // dq += dS K
                if (fire_grad) fat5_fire_tile_grad(pb.extra, pb, Ut, St, nkr, fg);
            }
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
    if (PE == FAT5_PE_TABLE && dbias) {
        fat5_attn_dbias_flush(sdb, run_b, run_s);
        fat5_attn_dbias_store(dbias, pb.extra, nbt, h, H);
    }
    if (fire_grad) fat5_fire_store(dbias, pb, fg, h, H, fs0, fs1, fs2);
}

// dk/dv's query tiles for a tile of key rows u0 .. u0 + nrow - 1 (packed, in sequence order), in
// packed query indices. Without a pattern: [qstart, qend) from the first row's first query (vis
// 1: its own position) to the last row's last (vis 2: up to its own). With one, each key row adds
// its queries to the block's int red[6] (fat5_pat_red_init first, then a barrier): slot 0 the
// prefix the row needs, slot 1 its window (a prefix key: its whole sequence), slot 2 a
// transient-global key's sequence; after a barrier fat5_pat_tile_queries reads them as three
// disjoint ranges (fat5_range_union3).
__device__ __forceinline__ void fat5_attn_key_tile_queries(int vis, const int *cu_q, const int *cu_k,
                                                           const int *k_seq, long long u0, int nrow, int &qstart,
                                                           int &qend)
{
    const int s = k_seq[u0], q0 = cu_q[s], nq = cu_q[s + 1] - q0, j = (int)(u0 - cu_k[s]);
    qstart = q0 + (vis == 1 ? min(j, nq) : 0);
    if (vis == 2) {
        const long long ul = u0 + nrow - 1;
        const int sl = k_seq[ul], ql = cu_q[sl], nql = cu_q[sl + 1] - ql;
        qend = ql + min((int)(ul - cu_k[sl]) + 1, nql);
    } else {
        qend = cu_q[k_seq[u0 + nrow - 1] + 1];
    }
}

__device__ __forceinline__ void fat5_pat_red_init(int *red)
{
    if (threadIdx.x < 6) red[threadIdx.x] = threadIdx.x & 1 ? (int)0x80000000 : 0x7fffffff;
}

// key row j of a sequence whose nqs queries start at q0 (global: a transient-global key)
__device__ __forceinline__ void fat5_pat_key_queries(int *red, const fat5_pat &pt, int q0, int j, int nqs, bool global)
{
    int slot = 1, a = q0, z = q0 + nqs;
    if (global) {
        slot = 2;
    } else if (j >= min(pt.pre, nqs)) {
        a = q0 + max(j - pt.rad, 0);
        z = q0 + min(j + pt.rad + 1, nqs);
        if (pt.pre > 0) {
            atomicMin(&red[0], q0);
            atomicMax(&red[1], q0 + min(pt.pre, nqs));
        }
    }
    atomicMin(&red[2 * slot], a);
    atomicMax(&red[2 * slot + 1], z);
}

__device__ __forceinline__ void fat5_pat_tile_queries(const int *red, int &pa, int &pz, int &qstart, int &qend,
                                                      int &ga, int &gz)
{
    pa = red[0];
    pz = red[1];
    qstart = red[2];
    qend = red[3];
    ga = red[4];
    gz = red[5];
    fat5_range_union3(pa, pz, qstart, qend, ga, gz);
}

// The tiled attn_bwd_dkv (fat5_attn_bwd_dkv below): a tile of 64 key rows against query tiles of
// 64. Under dropout, with m the forward's multiplier of (query row qi, key row u0 + 4 ty + r): ds =
// p (m dP - delta) and the staged weights of dv are p m.
template <int DC, int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_bwd_dkv_tiled(act_t *dk_, act_t *dv, const act_t *dout, const float *lse,
                                                        const float *delta, const act_t *q, const act_t *k,
                                                        const act_t *v, const float *bias, const int *lut,
                                                        const int *cu_q, const int *cu_k, const int *k_seq,
                                                        long long Tk, int H, int dk, int kind, int nb, int md, int g,
                                                        const int *cu_g, const fat5_dropp &dr)
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
    fat5_pb pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md,
                                   DKP * (2 * FAT5_AT_V + 2 * FAT5_AT_S) + 128 * FAT5_AT_V, 0);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const bool TG = PAT && PE == FAT5_PE_TABLE;  // transient-global keys possible
    if (TG) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    int *red = (int *)Ss;  // PAT: the tile's query ranges, reduced in shared memory before Ss is used
    for (long long tile = blockIdx.x; tile * 64 < Tk; tile += gridDim.x) {
        const long long u0 = tile * 64;
        const int nrow = (int)min(64LL, Tk - u0);
        int qlo[4], qhi[4], jp[4], qb[4];  // row r (key jp) is seen by queries [qlo, qhi); qb: its sequence's first
        int gG[4];  // TG: the global count of row r's sequence when the row is a transient-global key, else 0
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const long long u = u0 + ty * 4 + r;
            qlo[r] = qhi[r] = jp[r] = qb[r] = 0;
            if (TG) gG[r] = 0;
            if (u < Tk) {
                const int s = k_seq[u], q0 = cu_q[s], nq = cu_q[s + 1] - q0;
                int j = (int)(u - cu_k[s]);
                if (TG && pt.tg && u >= cu_g[s] && u < cu_g[s + 1]) {
                    gG[r] = cu_g[s + 1] - cu_g[s];
                    j = (int)(u - cu_g[s]);
                }
                qlo[r] = q0 + (vis == 1 ? min(j, nq) : 0);
                qhi[r] = q0 + (vis == 2 ? min(j + 1, nq) : nq);
                jp[r] = j;
                qb[r] = q0;
            }
        }
        int qstart = 0, qend = 0;  // from the first row's first query to the last row's last
        int pa = 0, pz = 0, ga = 0, gz = 0;  // PAT: two more disjoint query ranges (fat5_range_union3)
        if (PAT) {
            // the hull of the rows' windows (a prefix key: its whole sequence), the hull of the
            // prefixes the other rows need, the hull of the global rows' sequences; then their union
            __syncthreads();  // the previous tile is done with Ss
            fat5_pat_red_init(red);
            __syncthreads();
            if (tx == 0) {
#pragma unroll
                for (int r = 0; r < 4; r++)
                    if (u0 + ty * 4 + r < Tk)
                        fat5_pat_key_queries(red, pt, qb[r], jp[r], cu_q[k_seq[u0 + ty * 4 + r] + 1] - qb[r],
                                             TG && gG[r] > 0);
            }
            __syncthreads();
            fat5_pat_tile_queries(red, pa, pz, qstart, qend, ga, gz);
        } else {
            fat5_attn_key_tile_queries(vis, cu_q, cu_k, k_seq, u0, nrow, qstart, qend);
        }
        __syncthreads();
        fat5_at_load<DKP>(Kt, FAT5_AT_V, k + u0 * ld + (long long)h * dk, ld, nrow, dk);
        fat5_at_load<DKP>(Vt, FAT5_AT_V, v + u0 * ld + (long long)h * dk, ld, nrow, dk);
        float ak[4][DC], av[4][DC];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < DC; c++) ak[r][c] = av[r][c] = 0.0f;
        for (int ph = PAT ? 0 : 1; ph < (PAT ? 3 : 2); ph++) {  // PAT: three disjoint ranges
            const int qa = ph == 0 ? pa : ph == 1 ? qstart : ga, qe = ph == 0 ? pz : ph == 1 ? qend : gz;
            for (int qt0 = qa; qt0 < qe; qt0 += 64) {
                const int nqr = min(64, qe - qt0);
                __syncthreads();
                fat5_at_load<DKP>(Qt, FAT5_AT_S, q + (long long)qt0 * ld + (long long)h * dk, ld, nqr, dk);
                fat5_at_load<DKP>(Ot, FAT5_AT_S, dout + (long long)qt0 * ld + (long long)h * dk, ld, nqr, dk);
                float Lc[4], Dc[4];
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int qi = qt0 + tx + 16 * c;
                    Lc[c] = qi < qe ? lse[(long long)qi * H + h] : 0.0f;
                    Dc[c] = qi < qe ? delta[(long long)qi * H + h] : 0.0f;
                }
                // dropout: the forward's multipliers m of query row qt0 + tx + 16 c, key row u0 + 4 ty + r
                const unsigned int keep = dr.thresh ? fat5_at_drop_bits<true>(dr, h, u0 + ty * 4, qt0 + tx) : 0u;
                __syncthreads();
                float sc[4][4], dp[4][4];
                fat5_at_two_tiles(sc, dp, Kt, Vt, Qt, Ot, ty, tx, dk);  // scores k.q and dp = v.dout
#pragma unroll
                for (int r = 0; r < 4; r++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int qi = qt0 + tx + 16 * c;
                        float p = 0.0f, ds = 0.0f;
                        if (qi >= qlo[r] && qi < qhi[r] &&
                            (!PAT || (qi < qe && ((TG && gG[r] > 0) || fat5_pat_sees(pt, qi - qb[r], jp[r]))))) {
                            float s = sc[r][c];
                            if (TG && gG[r] > 0) {
                                if (pb.gbias)
                                    s += pb.gbias[fat5_attn_bucket(jp[r] - fat5_pat_block(pt, qi - qb[r], gG[r]), 1,
                                                                   pb.lut, nb, md) * pb.gstride];
                            } else if (PE != FAT5_PE_TABLE || pb.bias) {
                                s += fat5_pb_bias<PE>(pb, qi - qb[r], jp[r]);
                            }
                            p = expf(s - Lc[c]);
                            float dpm = dp[r][c], pm = p;
                            if (dr.thresh) {  // the forward's P m met V: m dP, and dv gathers P m
                                const float dm = fat5_at_drop_mul(dr, keep, r, c);
                                dpm *= dm;
                                pm = p * dm;
                            }
                            ds = p * (dpm - Dc[c]);
                            p = pm;  // dv's weight
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
// Each entry point takes the path: the tiled one when blockDim.x is 256, else the per-warp one,
// instantiated for the head dim's bound. Each scheme has its own entry points (fat5_<op> for T5 or
// no bias, fat5_<op>_alibi, fat5_<op>_fire), and so has each scheme with a pattern (the same names
// ending in _pat); the launcher picks by kind. Each is register-allocated on its own, and the
// full-attention T5 kernels are what they were before the schemes and patterns existed.

#define FAT5_ATTN_ARGS_FWD o, lse, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, max_distance, g, cu_g, dr
#define FAT5_ATTN_ARGS_DQ dq, dbias, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, q_seq, Tq, H, dk, kind, nb, \
                          max_distance, g, cu_g, dr
#define FAT5_ATTN_ARGS_DKV dk_, dv, dout, lse, delta, q, k, v, bias, lut, cu_q, cu_k, k_seq, Tk, H, dk, kind, nb, \
                           max_distance, g, cu_g, dr

// The entry points: one per op, scheme (PE) and pattern (PAT: the kind has a window), all with the
// op's parameters (the comment before each op's group says what they are); the launcher picks one
// by kind.
#define FAT5_ATTN_FWD_ENTRY(name, PE, PAT)                                                                          \
    extern "C" __global__ void __launch_bounds__(256, 2) name(                                                     \
        act_t *o, float *lse, const act_t *q, const act_t *k, const act_t *v, const float *bias, const int *lut,   \
        const int *cu_q, const int *cu_k, const int *q_seq, long long Tq, int H, int dk, int kind, int nb,         \
        int max_distance, int g, const int *cu_g, const fat5_dropp dr)                                             \
    {                                                                                                              \
        fat5_attn_fwd_pe<PE, PAT>(FAT5_ATTN_ARGS_FWD);                                                             \
    }
#define FAT5_ATTN_DQ_ENTRY(name, PE, PAT)                                                                           \
    extern "C" __global__ void __launch_bounds__(256, 2) name(                                                     \
        act_t *dq, float *dbias, const act_t *dout, const float *lse, const float *delta, const act_t *q,          \
        const act_t *k, const act_t *v, const float *bias, const int *lut, const int *cu_q, const int *cu_k,       \
        const int *q_seq, long long Tq, int H, int dk, int kind, int nb, int max_distance, int g, const int *cu_g, \
        const fat5_dropp dr) \
    {                                                                                                              \
        fat5_attn_bwd_dq_pe<PE, PAT>(FAT5_ATTN_ARGS_DQ);                                                           \
    }
#define FAT5_ATTN_DKV_ENTRY(name, PE, PAT)                                                                          \
    extern "C" __global__ void __launch_bounds__(256, 2) name(                                                     \
        act_t *dk_, act_t *dv, const act_t *dout, const float *lse, const float *delta, const act_t *q,            \
        const act_t *k, const act_t *v, const float *bias, const int *lut, const int *cu_q, const int *cu_k,       \
        const int *k_seq, long long Tk, int H, int dk, int kind, int nb, int max_distance, int g, const int *cu_g, \
        const fat5_dropp dr) \
    {                                                                                                              \
        fat5_attn_bwd_dkv_pe<PE, PAT>(FAT5_ATTN_ARGS_DKV);                                                         \
    }

template <int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_fwd_pe(act_t *o, float *lse, const act_t *q, const act_t *k, const act_t *v,
                                                 const float *bias, const int *lut, const int *cu_q, const int *cu_k,
                                                 const int *q_seq, long long Tq, int H, int dk, int kind, int nb,
                                                 int max_distance, int g, const int *cu_g, const fat5_dropp &dr)
{
    if (blockDim.x == 256) {  // the tiled path (the launcher checked dk <= 128)
        if (dk <= 16)
            fat5_attn_fwd_tiled<1, PE, PAT>(FAT5_ATTN_ARGS_FWD);
        else if (dk <= 32)
            fat5_attn_fwd_tiled<2, PE, PAT>(FAT5_ATTN_ARGS_FWD);
        else if (dk <= 64)
            fat5_attn_fwd_tiled<4, PE, PAT>(FAT5_ATTN_ARGS_FWD);
        else if (dk <= 128)
            fat5_attn_fwd_tiled<8, PE, PAT>(FAT5_ATTN_ARGS_FWD);
        return;
    }
    if (dk <= 32)
        fat5_attn_fwd_impl<1, PE, PAT>(FAT5_ATTN_ARGS_FWD);
    else if (dk <= 64)
        fat5_attn_fwd_impl<2, PE, PAT>(FAT5_ATTN_ARGS_FWD);
    else if (dk <= 128)
        fat5_attn_fwd_impl<4, PE, PAT>(FAT5_ATTN_ARGS_FWD);
    else if (dk <= FAT5_ATTN_MAX_DK)
        fat5_attn_fwd_impl<8, PE, PAT>(FAT5_ATTN_ARGS_FWD);
}


// fat5_attn_fwd(act_t *o[Tq,H*dk], float *lse[Tq,H], const act_t *q[Tq,H*dk], const act_t *k[Tk,H*dk],
// const act_t *v[Tk,H*dk], const float *bias (T5: [nb,H] or NULL, [2,nb,H] with transient-global
// keys and their own table; FIRE: its parameter block), const int *lut[max_distance] (T5), const
// int *cu_q, const int *cu_k, const int *q_seq[Tq], long long Tq, int H, int dk, int kind, int nb,
// int max_distance, int g, const int *cu_g, fat5_dropp dr): o = softmax(q k^T + bias) v, lse = log
// sum exp of the scores, over the keys the kind's mask and pattern show (g, cu_g: the pattern's, see
// the top of this file; unused without one); with dropout (dr.thresh > 0) o = (P m) v, P the
// softmax and m its multipliers (see the top of this file), lse the undropped softmax's. Grid
// (token blocks, H); block 32 * W threads (W warps, one token each; W dk floats of dynamic shared
// memory) or 256 threads (tiled, see above). T5: plus (nb +
// max_distance) * 4 bytes to cache the tables; FIRE: plus 16 W bytes (after the rows, rounded up
// to 16 bytes) for the head's MLP rows, always. CPU twin: fat5__cpu_attn_fwd.
// fat5_attn_fwd_alibi, _fire: the kinds with FAT5_ATTN_ALIBI (and _ASYM), with FAT5_ATTN_FIRE;
// fat5_attn_fwd{,_alibi,_fire}_pat: the kinds with a pattern (a window, maybe global keys). The
// same arguments and launch; the launcher picks the entry point by kind.
#if FAT5_IN_PART(1)
FAT5_ATTN_FWD_ENTRY(fat5_attn_fwd, FAT5_PE_TABLE, false)
#endif
#if FAT5_IN_PART(2)
FAT5_ATTN_FWD_ENTRY(fat5_attn_fwd_pat, FAT5_PE_TABLE, true)
#endif
#if FAT5_IN_PART(3)
FAT5_ATTN_FWD_ENTRY(fat5_attn_fwd_alibi, FAT5_PE_ALIBI, false)
#endif
#if FAT5_IN_PART(4)
FAT5_ATTN_FWD_ENTRY(fat5_attn_fwd_alibi_pat, FAT5_PE_ALIBI, true)
#endif
#if FAT5_IN_PART(5)
FAT5_ATTN_FWD_ENTRY(fat5_attn_fwd_fire, FAT5_PE_FIRE, false)
#endif
#if FAT5_IN_PART(6)
FAT5_ATTN_FWD_ENTRY(fat5_attn_fwd_fire_pat, FAT5_PE_FIRE, true)
#endif

template <int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_bwd_dq_pe(act_t *dq, float *dbias, const act_t *dout, const float *lse,
                                                    const float *delta, const act_t *q, const act_t *k, const act_t *v,
                                                    const float *bias, const int *lut, const int *cu_q,
                                                    const int *cu_k, const int *q_seq, long long Tq, int H, int dk,
                                                    int kind, int nb, int max_distance, int g, const int *cu_g, const fat5_dropp &dr)
{
    if (PE == FAT5_PE_ALIBI) dbias = 0;  // ALiBi has no parameters: no gradient
    if (blockDim.x == 256) {  // the tiled path (the launcher checked dk <= 64)
        if (dk <= 16)
            fat5_attn_bwd_dq_tiled<1, PE, PAT>(FAT5_ATTN_ARGS_DQ);
        else if (dk <= 32)
            fat5_attn_bwd_dq_tiled<2, PE, PAT>(FAT5_ATTN_ARGS_DQ);
        else if (dk <= 64)
            fat5_attn_bwd_dq_tiled<4, PE, PAT>(FAT5_ATTN_ARGS_DQ);
        return;
    }
    if (dk <= 32)
        fat5_attn_bwd_dq_impl<1, PE, PAT>(FAT5_ATTN_ARGS_DQ);
    else if (dk <= 64)
        fat5_attn_bwd_dq_impl<2, PE, PAT>(FAT5_ATTN_ARGS_DQ);
    else if (dk <= 128)
        fat5_attn_bwd_dq_impl<4, PE, PAT>(FAT5_ATTN_ARGS_DQ);
    else if (dk <= FAT5_ATTN_MAX_DK)
        fat5_attn_bwd_dq_impl<8, PE, PAT>(FAT5_ATTN_ARGS_DQ);
}


// fat5_attn_bwd_dq(act_t *dq[Tq,H*dk], float *dbias_part or NULL, const act_t *dout[Tq,H*dk],
// const float *lse[Tq,H], const float *delta[Tq,H], q, k, v, bias, lut, cu_q, cu_k, q_seq,
// long long Tq, int H, int dk, int kind, int nb, int max_distance, int g, const int *cu_g,
// fat5_dropp dr): with p = exp(s - lse), ds = p (dout.v - delta), or under the forward's dropout
// (dr.thresh > 0, multipliers m, see the top of this file) ds = p (m dout.v - delta): dq = sum_j
// ds k_j (written) and, when dbias_part is given, the block's share of the bias gradient (from the
// same ds), written by every block (zeros included), no atomics:
//   T5: dbias_part[blockIdx.x, bucket, h] = the block's sum of ds per bucket (per-lane runs of equal
//     buckets, per-warp shared accumulators filled in lane order, summed in warp order; see
//     fat5_attn_dbias_flush); the launcher adds the rows into dbias[nb,H] with fat5_colsum_f32.
//     Transient-global keys with their own table: rows of 2 nb buckets ([blockIdx.x, 2, nb, H]),
//     the global table's after T5's, summed into dbias[2, nb, H]; with GSHARED, T5's rows.
//   FIRE: dbias_part[blockIdx.x, h, 3 W + 3] = the block's share of head h of FIRE's gradient
//     (fat5__fire_grad's layout; see fat5_fire_store); the launcher sums the blocks' rows
//     (fat5_colsum_f32) and adds the heads into the gradient block (fat5_fire_reduce).
//   ALiBi has no gradient: dbias_part must be NULL.
// So the bias gradient is deterministic (same inputs, same bits). dbias_part requires its
// accumulators in shared memory (T5: with the tables; the launcher gives them).
// Grid (token blocks, H); block 32 * W (dynamic shared memory 2*W*dk floats, + (nb + max_distance
// + (dbias_part ? W nbt : 0)) * 4 bytes for T5's tables and accumulators, nbt = nb or 2 nb as the
// rows above) or 256 (tiled; accumulators 8 nbt). FIRE: plus 16 W bytes for the MLP rows (after
// the rows, rounded up to 16 bytes), then with dbias_part (3 G W + 32) * 4 bytes, G = W warps
// (per-warp path) or max(1, 256 / W) (tiled; whose rows then include one more [64][68] tile).
// CPU twin: fat5__cpu_attn_bwd_dq.
// fat5_attn_bwd_dq_alibi, _fire, and the three _pat entry points: as fat5_attn_fwd's (ALiBi:
// dbias_part is ignored, no gradient).
#if FAT5_IN_PART(7)
FAT5_ATTN_DQ_ENTRY(fat5_attn_bwd_dq, FAT5_PE_TABLE, false)
#endif
#if FAT5_IN_PART(8)
FAT5_ATTN_DQ_ENTRY(fat5_attn_bwd_dq_pat, FAT5_PE_TABLE, true)
#endif
#if FAT5_IN_PART(9)
FAT5_ATTN_DQ_ENTRY(fat5_attn_bwd_dq_alibi, FAT5_PE_ALIBI, false)
#endif
#if FAT5_IN_PART(10)
FAT5_ATTN_DQ_ENTRY(fat5_attn_bwd_dq_alibi_pat, FAT5_PE_ALIBI, true)
#endif
#if FAT5_IN_PART(11)
FAT5_ATTN_DQ_ENTRY(fat5_attn_bwd_dq_fire, FAT5_PE_FIRE, false)
#endif
#if FAT5_IN_PART(12)
FAT5_ATTN_DQ_ENTRY(fat5_attn_bwd_dq_fire_pat, FAT5_PE_FIRE, true)
#endif

template <int PE, bool PAT>
__device__ __forceinline__ void fat5_attn_bwd_dkv_pe(act_t *dk_, act_t *dv, const act_t *dout, const float *lse,
                                                     const float *delta, const act_t *q, const act_t *k,
                                                     const act_t *v, const float *bias, const int *lut,
                                                     const int *cu_q, const int *cu_k, const int *k_seq, long long Tk,
                                                     int H, int dk, int kind, int nb, int max_distance, int g,
                                                     const int *cu_g, const fat5_dropp &dr)
{
    if (blockDim.x == 256) {  // the tiled path (the launcher checked dk <= 64)
        if (dk <= 16)
            fat5_attn_bwd_dkv_tiled<1, PE, PAT>(FAT5_ATTN_ARGS_DKV);
        else if (dk <= 32)
            fat5_attn_bwd_dkv_tiled<2, PE, PAT>(FAT5_ATTN_ARGS_DKV);
        else if (dk <= 64)
            fat5_attn_bwd_dkv_tiled<4, PE, PAT>(FAT5_ATTN_ARGS_DKV);
        return;
    }
    if (dk <= 32)
        fat5_attn_bwd_dkv_impl<1, PE, PAT>(FAT5_ATTN_ARGS_DKV);
    else if (dk <= 64)
        fat5_attn_bwd_dkv_impl<2, PE, PAT>(FAT5_ATTN_ARGS_DKV);
    else if (dk <= 128)
        fat5_attn_bwd_dkv_impl<4, PE, PAT>(FAT5_ATTN_ARGS_DKV);
    else if (dk <= FAT5_ATTN_MAX_DK)
        fat5_attn_bwd_dkv_impl<8, PE, PAT>(FAT5_ATTN_ARGS_DKV);
}


// fat5_attn_bwd_dkv(act_t *dk[Tk,H*dk], act_t *dv[Tk,H*dk], const act_t *dout[Tq,H*dk],
// const float *lse[Tq,H], const float *delta[Tq,H], q, k, v, bias, lut, cu_q, cu_k, k_seq[Tk],
// long long Tk, int H, int dk, int kind, int nb, int max_distance, int g, const int *cu_g,
// fat5_dropp dr): over the queries that see each key: dv = sum_i p dout_i, dk = sum_i ds q_i (both
// written), ds as attn_bwd_dq's; under the forward's dropout (dr.thresh > 0, multipliers m of
// query row i and this key row, see the top of this file) dv = sum_i p m dout_i and ds = p (m
// dout.v - delta). With transient-global keys, Tk counts the global rows too and k_seq maps them
// to their sequence.
// Grid (key blocks, H); block 32 * W (one warp per key; dynamic shared memory 2*W*dk floats) or
// 256 (tiled); T5: plus (nb + max_distance) * 4 bytes for the tables; FIRE: plus 16 W bytes for
// the MLP rows (after the rows, rounded up to 16 bytes). CPU twin: fat5__cpu_attn_bwd_dkv.
// fat5_attn_bwd_dkv_alibi, _fire, and the three _pat entry points: as fat5_attn_fwd's.
#if FAT5_IN_PART(13)
FAT5_ATTN_DKV_ENTRY(fat5_attn_bwd_dkv, FAT5_PE_TABLE, false)
#endif
#if FAT5_IN_PART(14)
FAT5_ATTN_DKV_ENTRY(fat5_attn_bwd_dkv_pat, FAT5_PE_TABLE, true)
#endif
#if FAT5_IN_PART(15)
FAT5_ATTN_DKV_ENTRY(fat5_attn_bwd_dkv_alibi, FAT5_PE_ALIBI, false)
#endif
#if FAT5_IN_PART(16)
FAT5_ATTN_DKV_ENTRY(fat5_attn_bwd_dkv_alibi_pat, FAT5_PE_ALIBI, true)
#endif
#if FAT5_IN_PART(17)
FAT5_ATTN_DKV_ENTRY(fat5_attn_bwd_dkv_fire, FAT5_PE_FIRE, false)
#endif
#if FAT5_IN_PART(18)
FAT5_ATTN_DKV_ENTRY(fat5_attn_bwd_dkv_fire_pat, FAT5_PE_FIRE, true)
#endif

// fat5_fire_reduce(float *g, const float *shares[H, 3W+3], int H, int W): FIRE's gradient block g
// (fp32, FAT5__FIRE_NUMEL(H, W) floats: w1[W] | b1[W] | w2[H, W] | b2[H] | c | L_multiplier) +=
// the per-head shares (fat5__fire_grad's layout): dw1, db1, dc and dL_multiplier summed over the
// heads in head order in double, then rounded to fp32 and added; the head's own dw2 row and db2
// added as they are. One thread per element of g, grid-stride. The same arithmetic as its CPU twin
// fat5__cpu_fire_reduce (the macro FAT5__FIRE_REDUCE), so the two agree bit for bit.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_fire_reduce(float *g, const float *shares, int H, int W)
{
    const long long S = 3LL * W + 3, n = (long long)W * (2 + H) + H + 2, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        const long long ob2 = (long long)W * (2 + H);
        if (e < 2LL * W || e >= ob2 + H) {  // dw1, db1 (share column e), dc, dL_mult (columns 3 W + 1, + 2)
            const long long col = e < 2LL * W ? e : 3LL * W + 1 + (e - ob2 - H);
            double a = 0.0;
            for (int h = 0; h < H; h++) a += (double)shares[h * S + col];
            g[e] += (float)a;
        } else if (e < ob2) {  // dw2[h, w]: head h's column 2 W + w
            const long long hw = e - 2LL * W, h = hw / W;
            g[e] += shares[h * S + 2LL * W + (hw - h * W)];
        } else {  // db2[h]: head h's column 3 W
            g[e] += shares[(e - ob2) * S + 3LL * W];
        }
    }
}
#endif
