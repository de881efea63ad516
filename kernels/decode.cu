// kernels/decode.cu — incremental decoding with a key/value cache: attention of one new query per
// row against that row's cache (or its encoder keys), the cache write of the new key and value, the
// cache reorder between rows (beam search), and the position counter.
//
// The decode positions are ints in device memory (pos[row], one per cache row: rows that joined at
// different steps stand at different positions) that the kernels read and the host never does, so a decode step can be captured into a CUDA graph and replayed: grids depend only on sizes
// the host knows (entries, heads, the split count from an upper bound of the keys), and every
// kernel loops over whatever the counts turn out to be at run time.
//
// Uses fat5_attn_warp_keys, fat5_attn_vec_width and the position schemes (fat5_attn_pos) of
// attention.cu (the kernel files are joined in sorted name order, so attention.cu is defined above
// this file).
//
// Layout: rows of q, k, v, o and of the caches are H*dk act_t elements (head h is columns
// h*dk .. h*dk+dk-1); entry i (0 <= i < n) is cache row rows[i], whose keys j are the rows
// kv_off[rows[i]] + j of k and v.

#define FAT5_DECODE_MAX_SPLITS 32  // FAT5__DECODE_MAX_SPLITS in fat5.h

// Keys of one (entry, head) per split: the keys [0, cnt) are cut into pieces of `per` keys, per a
// multiple of 32 and at least cnt / splits; split s takes [s per, min((s + 1) per, cnt)), so only
// the first fat5_decode_used() splits have keys. Both phases derive the cut from cnt alike.
__device__ __forceinline__ int fat5_decode_per(int cnt, int splits)
{
    const int per = (cnt + splits - 1) / splits;
    return (per + 31) / 32 * 32;
}

__device__ __forceinline__ int fat5_decode_used(int cnt, int per) { return per ? (cnt + per - 1) / per : 0; }

// the number of keys of entry row `row`: p + 1 (causal self-attention, p = pos[row]) or kv_len[row] (cross)
__device__ __forceinline__ int fat5_decode_count(int kind, const int *kv_len, int row, int p)
{
    const int c = (kind & FAT5_ATTN_MASK) == 2 ? p + 1 : kv_len[row];
    return c > 0 ? c : 0;
}

// The position bias of head h for a decode warp: T5, bucket b at bias[b * H + h] read from global
// memory (causal only; cross-attention has none); ALiBi, the slope; FIRE, the MLP rows in shared
// memory at float offset smem_off (after the warps' queries).
template <int PE>
__device__ __forceinline__ fat5_pb fat5_decode_pb(const float *bias, const int *lut, int h, int H, int kind, int nb,
                                                  int md, int smem_off)
{
    fat5_pb pb;
    if (PE == FAT5_PE_TABLE) {
        pb.bias = (kind & FAT5_ATTN_MASK) == 2 && bias ? bias + h : 0;
        pb.bstride = H;
        pb.lut = lut;
        pb.kind = 2;
        pb.nb = nb;
        pb.md = md;
    } else {
        pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, smem_off, 0);
    }
    return pb;
}

// Phase 0: one warp per (split, head, entry): online softmax over the split's keys exactly as the
// forward's per-token warp (lanes over keys for the scores, lanes over dims for the values; the
// position bias of scheme PE for the causal kinds, the query at the row's position pos[row]). With a single
// split holding keys, split 0 writes o itself; otherwise each split with keys writes its partial
// (max m, sum l of exp(score - m), acc[dk] = sum exp(score - m) v) to scratch.
template <int R, int PE>
__device__ __forceinline__ void fat5_attn_decode_split(act_t *o, float *scratch, const act_t *q, const act_t *k,
                                                       const act_t *v, const float *bias, const int *lut,
                                                       const int *rows, const int *kv_off, const int *kv_len,
                                                       const int *pos, long long n, int H, int dk, int kind, int nb,
                                                       int md, int splits)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int h = blockIdx.y, s = blockIdx.x * nwarps + warp;
    const long long ld = (long long)H * dk;
    const fat5_pb pb = fat5_decode_pb<PE>(bias, lut, h, H, kind, nb, md, nwarps * dk);
    float *sq = (float *)fat5_smem + warp * dk;
    const int vw = fat5_attn_vec_width(dk, k, v);
    if (s >= splits) return;  // whole warps only: nothing below synchronises the block
    for (long long i = blockIdx.z; i < n; i += gridDim.z) {
        const int row = rows[i], p = pos[row];
        const int cnt = fat5_decode_count(kind, kv_len, row, p);
        const int per = fat5_decode_per(cnt, splits), used = fat5_decode_used(cnt, per);
        if (used <= 1 ? s != 0 : s >= used) continue;
        const int j0 = s * per, j1 = min(j0 + per, cnt);
        const act_t *kbase = k + (long long)kv_off[row] * ld + (long long)h * dk;
        const act_t *vbase = v + (long long)kv_off[row] * ld + (long long)h * dk;
        const act_t *qrow = q + i * ld + (long long)h * dk;
        float acc[R];
        float m = -FAT5_INF, lsum = 0.0f;
        for (int d = lane; d < dk; d += 32) sq[d] = fat5_ld(qrow[d]);
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = 0.0f;
        __syncwarp();
        fat5_attn_warp_keys<R, PE>(sq, kbase, vbase, ld, dk, vw, pb, p, j0, j1, m, lsum, acc);
        if (used <= 1) {
            act_t *orow = o + i * ld + (long long)h * dk;
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int d = lane + 32 * r;
                if (d < dk) orow[d] = fat5_st(cnt ? acc[r] / lsum : 0.0f);
            }
        } else {
            float *part = scratch + ((i * H + h) * FAT5_DECODE_MAX_SPLITS + s) * (long long)(dk + 2);
            if (lane == 0) {
                part[0] = m;
                part[1] = lsum;
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                const int d = lane + 32 * r;
                if (d < dk) part[2 + d] = acc[r];
            }
        }
        __syncwarp();  // sq is rewritten by the next entry
    }
}

// One warp merges `used` partials (part[s stride] = max m_s, part[.. + 1] = sum l_s, part[.. + 2 + d] =
// acc_s[d]) in split order into o's row (dims lane + 32 r): lane s holds split s's max and sum; the
// sums over lanes are the fixed butterfly. o = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
template <int R>
__device__ __forceinline__ void fat5_decode_merge(act_t *orow, const float *part, long long stride, int used, int dk)
{
    const int lane = threadIdx.x & 31;
    const float ms = lane < used ? part[lane * stride] : -FAT5_INF;
    const float M = fat5_warp_max(ms);
    const float ws = lane < used ? expf(ms - M) : 0.0f;
    const float L = fat5_warp_sum(lane < used ? ws * part[lane * stride + 1] : 0.0f);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    for (int sp = 0; sp < used; sp++) {
        const float w = __shfl_sync(FAT5_FULL_MASK, ws, sp);
        const float *a = part + sp * stride + 2;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int d = lane + 32 * r;
            if (d < dk) acc[r] = fmaf(w, a[d], acc[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int d = lane + 32 * r;
        if (d < dk) orow[d] = fat5_st(acc[r] / L);
    }
}

// Phase 0 for rows of G 16-byte vectors (dk = G E, E = FAT5_VEC_E: bf16 head dims 64 and 128, fp32
// 32 and 64) whose cache rows are 16-byte aligned: the same online softmax and output as
// fat5_attn_decode_split, but P V reads whole vectors. Lane l holds vector l % G of the row for the
// keys l / G, l / G + 32 / G, ... of each chunk of 32 keys, so each lane issues all of a chunk's
// loads at once (instead of one key after another); the 32 / G key slots are added by a fixed
// butterfly at the end. Deterministic; the sums are in another order than the generic warp's.
// BLOCK (phase 2): one block per (entry, head) whose `splits` warps are its splits; the partials go
// to shared memory after the warps' queries and warp 0 merges them (fat5_decode_merge): one launch,
// no scratch, no phase 1.
template <int G, int PE, bool BLOCK>
__device__ __forceinline__ void fat5_attn_decode_split_v(act_t *o, float *scratch, const act_t *q, const act_t *k,
                                                         const act_t *v, const float *bias, const int *lut,
                                                         const int *rows, const int *kv_off, const int *kv_len,
                                                         const int *pos, long long n, int H, int dk, int kind, int nb,
                                                         int md, int splits)
{
    const int E = FAT5_VEC_E, KG = 32 / G;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int dg = lane % G, ks = lane / G;
    const int h = blockIdx.y, s = blockIdx.x * nwarps + warp;
    const long long ld = (long long)H * dk;
    const fat5_pb pb = fat5_decode_pb<PE>(bias, lut, h, H, kind, nb, md, nwarps * dk);
    float *sq = (float *)fat5_smem + warp * dk;
    float *spart = (float *)fat5_smem + nwarps * dk;  // BLOCK: the warps' partials, dk + 2 floats each
    if (s >= splits) return;  // BLOCK: never (nwarps == splits)
    for (long long i = blockIdx.z; i < n; i += gridDim.z) {
        const int row = rows[i], p = pos[row];
        const int cnt = fat5_decode_count(kind, kv_len, row, p);
        const int per = fat5_decode_per(cnt, splits), used = fat5_decode_used(cnt, per);
        if (!BLOCK && (used <= 1 ? s != 0 : s >= used)) continue;
        if (used <= 1 ? s == 0 : s < used) {  // this warp's split has keys (or is the only one)
            const int j0 = s * per, j1 = min(j0 + per, cnt);
            const act_t *kbase = k + (long long)kv_off[row] * ld + (long long)h * dk;
            const act_t *vbase = v + (long long)kv_off[row] * ld + (long long)h * dk + dg * E;
            const act_t *qrow = q + i * ld + (long long)h * dk;
            float acc[E];
            float m = -FAT5_INF, lsum = 0.0f;
            for (int d = lane; d < dk; d += 32) sq[d] = fat5_ld(qrow[d]);
#pragma unroll
            for (int e = 0; e < E; e++) acc[e] = 0.0f;
            __syncwarp();
            for (int jb = j0; jb < j1; jb += 32) {
                const int j = jb + lane;
                float sc = -FAT5_INF;
                if (j < j1) {
                    const act_t *kr = kbase + (long long)j * ld;
                    float a0 = 0.0f, a1 = 0.0f;  // the pairing of fat5_attn_dot, all G loads at once
#pragma unroll
                    for (int c2 = 0; c2 < G; c2++) {
                        float f[E];
                        fat5_ld16(kr + c2 * E, f);
#pragma unroll
                        for (int e = 0; e < E; e += 2) {
                            a0 = fmaf(sq[c2 * E + e], f[e], a0);
                            a1 = fmaf(sq[c2 * E + e + 1], f[e + 1], a1);
                        }
                    }
                    sc = a0 + a1;
                    if (PE != FAT5_PE_TABLE || pb.bias) sc += fat5_pb_bias<PE>(pb, p, j);
                }
                const float mnew = fmaxf(m, fat5_warp_max(sc));  // finite: key jb is valid
                const float corr = expf(m - mnew);                // 0 on the first chunk
                const float pl = j < j1 ? expf(sc - mnew) : 0.0f;
                const int c = min(32, j1 - jb);
                lsum = lsum * corr + pl;
#pragma unroll
                for (int e = 0; e < E; e++) acc[e] *= corr;
#pragma unroll
                for (int t = 0; t < G; t++) {
                    const int jj = ks + KG * t;
                    const float pj = __shfl_sync(FAT5_FULL_MASK, pl, jj);
                    if (jj < c) {
                        float f[E];
                        fat5_ld16(vbase + (long long)(jb + jj) * ld, f);
#pragma unroll
                        for (int e = 0; e < E; e++) acc[e] = fmaf(pj, f[e], acc[e]);
                    }
                }
                m = mnew;
            }
            lsum = fat5_warp_sum(lsum);
#pragma unroll
            for (int off = G; off < 32; off <<= 1)
#pragma unroll
                for (int e = 0; e < E; e++) acc[e] += __shfl_xor_sync(FAT5_FULL_MASK, acc[e], off);
            if (used <= 1) {
                act_t *orow = o + i * ld + (long long)h * dk + dg * E;
                if (ks == 0)
#pragma unroll
                    for (int e = 0; e < E; e++) orow[e] = fat5_st(cnt ? acc[e] / lsum : 0.0f);
            } else {
                float *part = BLOCK ? spart + s * (dk + 2)
                                    : scratch + ((i * H + h) * FAT5_DECODE_MAX_SPLITS + s) * (long long)(dk + 2);
                if (lane == 0) {
                    part[0] = m;
                    part[1] = lsum;
                }
                if (ks == 0)
#pragma unroll
                    for (int e = 0; e < E; e++) part[2 + dg * E + e] = acc[e];
            }
        }
        if (BLOCK) {
            __syncthreads();
            if (warp == 0 && used > 1)
                fat5_decode_merge<(G * FAT5_VEC_E + 31) / 32>(o + i * ld + (long long)h * dk, spart, dk + 2, used, dk);
            __syncthreads();  // spart and sq are rewritten by the next entry
        } else {
            __syncwarp();  // sq is rewritten by the next entry
        }
    }
}

// Phase 1: one warp per (entry, head) with more than one split of keys: the partials of splits
// 0 .. used-1 in scratch merged in that fixed order (fat5_decode_merge). Deterministic.
template <int R>
__device__ __forceinline__ void fat5_attn_decode_combine(act_t *o, const float *scratch, const int *rows,
                                                         const int *kv_len, const int *pos, long long n, int H,
                                                         int dk, int kind, int splits)
{
    const int nwarps = blockDim.x >> 5;
    const long long pairs = n * H, stride = (long long)dk + 2;
    for (long long t = (long long)blockIdx.x * nwarps + (threadIdx.x >> 5); t < pairs;
         t += (long long)gridDim.x * nwarps) {
        const long long i = t / H;
        const int h = (int)(t - i * H);
        const int cnt = fat5_decode_count(kind, kv_len, rows[i], pos[rows[i]]);
        const int used = fat5_decode_used(cnt, fat5_decode_per(cnt, splits));
        if (used <= 1) continue;  // phase 0 wrote o
        fat5_decode_merge<R>(o + i * (long long)H * dk + (long long)h * dk, scratch + t * FAT5_DECODE_MAX_SPLITS * stride,
                             stride, used, dk);
    }
}

#define FAT5_DECODE_ARGS o, scratch, q, k, v, bias, lut, rows, kv_off, kv_len, pos, n, H, dk, kind, nb, max_distance, \
                         splits

template <int PE>
__device__ __forceinline__ void fat5_attn_decode_split_pe(act_t *o, float *scratch, const act_t *q, const act_t *k,
                                                          const act_t *v, const float *bias, const int *lut,
                                                          const int *rows, const int *kv_off, const int *kv_len,
                                                          const int *pos, long long n, int H, int dk, int kind,
                                                          int nb, int max_distance, int splits)
{
    const int vw = fat5_attn_vec_width(dk, k, v);
    if (vw == FAT5_VEC_E && dk == 8 * FAT5_VEC_E)
        fat5_attn_decode_split_v<8, PE, false>(FAT5_DECODE_ARGS);
    else if (vw == FAT5_VEC_E && dk == 16 * FAT5_VEC_E)
        fat5_attn_decode_split_v<16, PE, false>(FAT5_DECODE_ARGS);
    else if (dk <= 32)
        fat5_attn_decode_split<1, PE>(FAT5_DECODE_ARGS);
    else if (dk <= 64)
        fat5_attn_decode_split<2, PE>(FAT5_DECODE_ARGS);
    else if (dk <= 128)
        fat5_attn_decode_split<4, PE>(FAT5_DECODE_ARGS);
    else
        fat5_attn_decode_split<8, PE>(FAT5_DECODE_ARGS);
}


// Phase 2 (the launcher's choice for head dims of 8 or 16 16-byte vectors with 16-byte aligned
// caches, T5 buckets, no bias or ALiBi): a block per (entry, head), blockDim.x / 32 == splits.
template <int PE>
__device__ __forceinline__ void fat5_attn_decode_block_pe(act_t *o, float *scratch, const act_t *q, const act_t *k,
                                                          const act_t *v, const float *bias, const int *lut,
                                                          const int *rows, const int *kv_off, const int *kv_len,
                                                          const int *pos, long long n, int H, int dk, int kind,
                                                          int nb, int max_distance, int splits)
{
    if (dk == 8 * FAT5_VEC_E)
        fat5_attn_decode_split_v<8, PE, true>(FAT5_DECODE_ARGS);
    else
        fat5_attn_decode_split_v<16, PE, true>(FAT5_DECODE_ARGS);
}

// fat5_attn_decode(act_t *o[n, H*dk], float *scratch[n, H, 32, dk+2], const act_t *q[n, H*dk],
// const act_t *k, const act_t *v (cache rows), const float *bias (causal T5: [nb, H], NULL: none;
// FIRE: its parameter block), const int *lut[max_distance], const int *rows[n], const int *kv_off[rows],
// const int *kv_len[rows] (cross), const int *pos[rows], long long n, int H, int dk (<= 256), int kind
// (0 cross, 2 causal, the latter with FAT5_ATTN_ALIBI or FAT5_ATTN_FIRE or neither; never
// asymmetric), int nb, int max_distance, int splits (1..32), int phase): o[i] = softmax_j(q_i . k_j +
// bias) v_j per head; CPU twin fat5__cpu_attn_decode. Phase 0: grid (ceil(splits / W), H, entries,
// clamped), W = blockDim.x / 32 warps, split s = blockIdx.x W + warp, dynamic shared memory W dk
// floats (the warps' queries; FIRE: then, rounded up to 16 bytes, 16 W bytes for the head's MLP
// rows). Phase 1 (only when splits > 1): warps over the n H (entry, head) pairs. Phase 2 (head
// rows of 8 or 16 16-byte vectors, no FIRE; replaces phases 0 and 1): grid (1, H, entries clamped),
// blockDim.x / 32 == splits (<= 16, and within the entry point's limit of threads a block) warps,
// dynamic shared memory splits (2 dk + 2) floats.
// The bias of key j is that of the causal forward for query position pos = pos[rows[i]]: T5, the bucket
// lut[pos - j] below max_distance, else the last bucket; ALiBi -slope_h (pos - j); FIRE's MLP of
// u(pos, j).
#if FAT5_IN_PART(23)
extern "C" __global__ void fat5_attn_decode(act_t *o, float *scratch, const act_t *q, const act_t *k, const act_t *v,
                                            const float *bias, const int *lut, const int *rows, const int *kv_off,
                                            const int *kv_len, const int *pos, long long n, int H, int dk, int kind,
                                            int nb, int max_distance, int splits, int phase)
{
    fat5_pdl_begin();
    if (phase == 0) {
        fat5_attn_decode_split_pe<FAT5_PE_TABLE>(FAT5_DECODE_ARGS);
    } else if (phase == 2) {
        fat5_attn_decode_block_pe<FAT5_PE_TABLE>(FAT5_DECODE_ARGS);
    } else {
        if (dk <= 32)
            fat5_attn_decode_combine<1>(o, scratch, rows, kv_len, pos, n, H, dk, kind, splits);
        else if (dk <= 64)
            fat5_attn_decode_combine<2>(o, scratch, rows, kv_len, pos, n, H, dk, kind, splits);
        else if (dk <= 128)
            fat5_attn_decode_combine<4>(o, scratch, rows, kv_len, pos, n, H, dk, kind, splits);
        else
            fat5_attn_decode_combine<8>(o, scratch, rows, kv_len, pos, n, H, dk, kind, splits);
    }
}
#endif

// fat5_attn_decode_alibi, fat5_attn_decode_fire: phase 0 (ALiBi also phase 2) of fat5_attn_decode
// for the causal kinds with FAT5_ATTN_ALIBI and with FAT5_ATTN_FIRE (the same arguments and
// launches; FIRE ignores `phase`): the launcher picks the entry point by kind, and phase 1 (no bias
// there) is fat5_attn_decode's.
#if FAT5_IN_PART(24)
extern "C" __global__ void fat5_attn_decode_alibi(act_t *o, float *scratch, const act_t *q, const act_t *k, const act_t *v,
                                                  const float *bias, const int *lut, const int *rows, const int *kv_off,
                                                  const int *kv_len, const int *pos, long long n, int H, int dk, int kind,
                                                  int nb, int max_distance, int splits, int phase)
{
    fat5_pdl_begin();
    if (phase == 2)
        fat5_attn_decode_block_pe<FAT5_PE_ALIBI>(FAT5_DECODE_ARGS);
    else
        fat5_attn_decode_split_pe<FAT5_PE_ALIBI>(FAT5_DECODE_ARGS);
}
#endif

#if FAT5_IN_PART(25)
extern "C" __global__ void fat5_attn_decode_fire(act_t *o, float *scratch, const act_t *q, const act_t *k, const act_t *v,
                                                 const float *bias, const int *lut, const int *rows, const int *kv_off,
                                                 const int *kv_len, const int *pos, long long n, int H, int dk, int kind,
                                                 int nb, int max_distance, int splits, int phase)
{
    fat5_pdl_begin();
    (void)phase;
    fat5_attn_decode_split_pe<FAT5_PE_FIRE>(FAT5_DECODE_ARGS);
}
#endif

// fat5_cache_write(act_t *kc, act_t *vc (cache rows of I), const act_t *k[n, I], const act_t *v[n, I],
// const int *rows[n], const int *kv_off[rows], const int *pos[rows], long long n, int I):
// kc[(kv_off[rows[i]] + pos[rows[i]]) I + c] = k[i I + c], vc likewise. Grid-stride over the n I elements.
// CPU twin fat5__cpu_cache_write.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_cache_write(act_t *kc, act_t *vc, const act_t *k, const act_t *v, const int *rows,
                                            const int *kv_off, const int *pos, long long n, int I)
{
    fat5_pdl_begin();
    const long long total = n * I, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const long long i = e / I;
        const int row = rows[i];
        const long long dst = ((long long)kv_off[row] + pos[row]) * I + (e - i * I);
        kc[dst] = k[e];
        vc[dst] = v[e];
    }
}
#endif

// fat5_cache_gather(act_t *dst, const act_t *src (caches of rows of I, distinct buffers),
// const int *idx[rows], const int *rows[n], const int *kv_off[rows], const int *pos[rows], long long n,
// int I): for r = rows[i], i < n, the pos[r] I elements from row kv_off[r] of dst are those from row
// kv_off[idx[r]] of src.
// Grid (any x, rows in y with a stride); x grid-strides over the row's elements. CPU twin
// fat5__cpu_cache_gather.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_cache_gather(act_t *dst, const act_t *src, const int *idx, const int *rows,
                                             const int *kv_off, const int *pos, long long n, int I)
{
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = blockIdx.y; i < n; i += gridDim.y) {
        const int r = rows[i];
        const long long len = (long long)pos[r] * I;
        const act_t *s = src + (long long)kv_off[idx[r]] * I;
        act_t *d = dst + (long long)kv_off[r] * I;
        for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < len; e += stride) d[e] = s[e];
    }
}
#endif

// fat5_add_i32(int *x, const int *idx[n] (NULL: 0 .. n-1; distinct), int v, long long n):
// x[idx[i]] += v (the decode rows' positions). CPU twin fat5__cpu_add_i32.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_add_i32(int *x, const int *idx, int v, long long n)
{
    fat5_pdl_begin();
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) x[idx ? idx[i] : i] += v;
}
#endif
