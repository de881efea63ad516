// kernels/00_common.cu — helpers shared by every kernel file: bf16 conversion, the activation
// type, warp and block reductions.
//
// All kernels/*.cu files are joined, in sorted file-name order, into ONE NVRTC program (each file
// preceded by `#line 1 "kernels/<file>"`). This file's name sorts first so that everything below
// is defined before any other file uses it; nothing here is defined anywhere else.
//
// The program is compiled twice over: -DFAT5_ACT_BF16=1 for a bf16 context (activations carried
// as bf16 bits in `unsigned short`) and -DFAT5_ACT_BF16=0 for an fp32 context. No toolkit header
// is included; bf16 is handled as raw bits. Arithmetic is fp32 everywhere.
//
// Conventions of the kernel files: every entry point is extern "C" __global__ and named
// fat5_<op> (the host's FAT5__KERNELS list); a comment above each gives its arguments and its CPU
// twin in fat5.h's "ops" section; element counts and any index that can pass 2^31 are
// `long long`; block sizes are multiples of 32 (the reductions below rely on whole warps).

// FAT5_PART: the program is compiled whole (the default, -1: what make check-kernels compiles),
// or as parts that the runtime compiles in parallel and loads as one module each: part 0 holds
// the light kernels, each part above it one heavy entry (the attention kernels of training and
// decoding, the fused products: their template instances are most of the compile time). A part compiles only its own entry
// points; the helpers above them are in every part.
#ifndef FAT5_PART
#define FAT5_PART -1
#endif
#define FAT5_IN_PART(k) (FAT5_PART < 0 || FAT5_PART == (k))

#ifndef FAT5_ACT_BF16
#error "compile with -DFAT5_ACT_BF16=0 (fp32 activations) or -DFAT5_ACT_BF16=1 (bf16 activations)"
#endif

// bf16 bits -> float: exact (every bf16 value is a float).
__device__ __forceinline__ float fat5_bf16_to_f32(unsigned short h)
{
    return __uint_as_float(((unsigned int)h) << 16);
}

// float -> bf16 bits, round to nearest, ties to even. NaN stays NaN (quiet, sign kept); +-Inf stays
// +-Inf; finite values too large for bf16 round to +-Inf, as in IEEE-754 RNE.
// (Named _rne so that it is not confused with the kernel fat5_f32_to_bf16 in util.cu.)
__device__ __forceinline__ unsigned short fat5_f32_to_bf16_rne(float f)
{
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)              // NaN: rounding could carry into Inf,
        return (unsigned short)((u >> 16) | 0x0040u);  // so truncate and set the quiet bit
    u += 0x7fffu + ((u >> 16) & 1u);                  // RNE: below half rounds down, above up,
    return (unsigned short)(u >> 16);                  // a tie goes to the even (lsb 0) result
}

// The activation dtype: what the matmuls read and write (q, k, v, attention output, FFN hidden,
// normalised rows, logit gradients). fat5_ld widens to float (exact); fat5_st rounds (RNE).
#if FAT5_ACT_BF16
typedef unsigned short act_t;
__device__ __forceinline__ float fat5_ld(act_t x) { return fat5_bf16_to_f32(x); }
__device__ __forceinline__ act_t fat5_st(float x) { return fat5_f32_to_bf16_rne(x); }
#else
typedef float act_t;
__device__ __forceinline__ float fat5_ld(act_t x) { return x; }
__device__ __forceinline__ act_t fat5_st(float x) { return x; }
#endif

#define FAT5_FULL_MASK 0xffffffffu

// One 16-byte load of act_t elements (8 bf16 or 4 fp32, p 16-byte aligned) widened into f[0 ..).
#define FAT5_VEC_E (16 / (int)sizeof(act_t))
__device__ __forceinline__ void fat5_ld16(const act_t *p, float *f)
{
    const uint4 u = *(const uint4 *)p;
#if FAT5_ACT_BF16
    f[0] = __uint_as_float(u.x << 16);
    f[1] = __uint_as_float(u.x & 0xffff0000u);
    f[2] = __uint_as_float(u.y << 16);
    f[3] = __uint_as_float(u.y & 0xffff0000u);
    f[4] = __uint_as_float(u.z << 16);
    f[5] = __uint_as_float(u.z & 0xffff0000u);
    f[6] = __uint_as_float(u.w << 16);
    f[7] = __uint_as_float(u.w & 0xffff0000u);
#else
    f[0] = __uint_as_float(u.x);
    f[1] = __uint_as_float(u.y);
    f[2] = __uint_as_float(u.z);
    f[3] = __uint_as_float(u.w);
#endif
}

// One 16-byte store of FAT5_VEC_E act_t elements (p 16-byte aligned), each rounded as fat5_st.
__device__ __forceinline__ void fat5_st16(act_t *p, const float *f)
{
#if FAT5_ACT_BF16
    uint4 u;
    u.x = (unsigned)fat5_st(f[0]) | ((unsigned)fat5_st(f[1]) << 16);
    u.y = (unsigned)fat5_st(f[2]) | ((unsigned)fat5_st(f[3]) << 16);
    u.z = (unsigned)fat5_st(f[4]) | ((unsigned)fat5_st(f[5]) << 16);
    u.w = (unsigned)fat5_st(f[6]) | ((unsigned)fat5_st(f[7]) << 16);
    *(uint4 *)p = u;
#else
    *(float4 *)p = make_float4(f[0], f[1], f[2], f[3]);
#endif
}

// Four act_t elements, each rounded as fat5_st, in one store (p aligned to 4 elements).
__device__ __forceinline__ void fat5_st4(act_t *p, float a, float b, float c, float d)
{
#if FAT5_ACT_BF16
    uint2 u;
    u.x = (unsigned)fat5_st(a) | ((unsigned)fat5_st(b) << 16);
    u.y = (unsigned)fat5_st(c) | ((unsigned)fat5_st(d) << 16);
    *(uint2 *)p = u;
#else
    *(float4 *)p = make_float4(a, b, c, d);
#endif
}

// True when every pointer given is 16-byte aligned (NULL counts as aligned).
__device__ __forceinline__ bool fat5_al16(const void *a, const void *b, const void *c, const void *d)
{
    return (((unsigned long long)a | (unsigned long long)b | (unsigned long long)c | (unsigned long long)d) & 15) == 0;
}

// Sum / max over the 32 lanes of a warp; every lane gets the result. All 32 lanes must call.
// The butterfly order is fixed, so results are deterministic.
__device__ __forceinline__ float fat5_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FAT5_FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float fat5_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FAT5_FULL_MASK, v, o));
    return v;
}

// Sum over a 1-D block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `red` is a __shared__ float[32] scratch; it may be reused by the next call right away (the
// leading barrier protects it). Every thread of the block must call. Fixed order: deterministic.
__device__ __forceinline__ float fat5_block_sum(float v, float *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = fat5_warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nwarps ? red[lane] : 0.0f;
    return fat5_warp_sum(v);
}

// Bytes of dynamic shared memory this launch was given (the launcher's `smem`). Kernels whose
// shared caches are optional check it, so the launcher alone decides whether a cache fits.
__device__ __forceinline__ unsigned int fat5_dyn_smem_bytes(void)
{
    unsigned int r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

// Dynamic shared memory of every kernel that uses it (declared once for the whole program; 16-byte
// aligned, so float4 views of it are valid).
extern __shared__ float4 fat5_smem[];

// +infinity and the largest finite float (no <math.h> or <float.h> in NVRTC programs).
#define FAT5_INF __int_as_float(0x7f800000)
#define FAT5_FLT_MAX 3.402823466e38f

// First statement of the kernels the host may launch as programmatic dependents (sm_90+, the
// decode step's: fat5__dev_pdl_kernel): wait until the kernel before has completed and its writes
// are visible, then let the next one start launching. Without that launch attribute, or before
// sm_90, both are no-ops.
__device__ __forceinline__ void fat5_pdl_begin(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Ceiling division for non-negative ints.
__device__ __forceinline__ int fat5_cdiv(int a, int b) { return (a + b - 1) / b; }

// ---- dropout masks ----
// The device twin of fat5.h's dropout generator (base: RNG, fat5__drop_block; the definition is
// there): the draw of element `index` of mask (seed, stream) is 16-bit lane index & 7 of the
// Philox4x32-10 block with key seed and counter (index >> 3 low, high word; stream low, high word),
// lane l being bits 16 (l & 1) .. +15 of word l >> 1; the element is kept when its draw is >=
// thresh, and then multiplied by scale (thresh 0: no dropout). Must stay bit for bit the same as
// the C code (tests/test_dropout.c compares them on a device).

// One Philox4x32-10 block (Salmon et al., SC'11): counter (c0, c1, c2, c3) under key (k0, k1).
__device__ __forceinline__ uint4 fat5_philox4x32(unsigned int k0, unsigned int k1, unsigned int c0, unsigned int c1,
                                                 unsigned int c2, unsigned int c3)
{
#pragma unroll
    for (int r = 0; r < 10; r++) {
        const unsigned int lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        const unsigned int lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0;
        c2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return make_uint4(c0, c1, c2, c3);
}

// The eight 16-bit draws of block blk of mask (seed, stream): indices 8 blk .. 8 blk + 7.
__device__ __forceinline__ uint4 fat5_drop_block(unsigned long long seed, unsigned long long stream,
                                                 unsigned long long blk)
{
    return fat5_philox4x32((unsigned int)seed, (unsigned int)(seed >> 32), (unsigned int)blk,
                           (unsigned int)(blk >> 32), (unsigned int)stream, (unsigned int)(stream >> 32));
}

// Lane l (0 .. 7) of a block: the draw of index 8 blk + l.
__device__ __forceinline__ unsigned int fat5_drop_lane(uint4 w, int l)
{
    const unsigned int x = l < 4 ? (l < 2 ? w.x : w.y) : (l < 6 ? w.z : w.w);
    return (l & 1) ? x >> 16 : x & 0xFFFFu;
}

// The multiplier of lane l: scale when kept, else 0.
__device__ __forceinline__ float fat5_drop_mul(uint4 w, int l, unsigned int thresh, float scale)
{
    return fat5_drop_lane(w, l) >= thresh ? scale : 0.0f;
}

// ---- attention-probability dropout ----
// The mask of an attention call (fat5__drop in fat5.h, passed by value: the same 24 bytes): the
// probability of query row qr and key row kr (rows of the packed q and k buffers) in head h is kept
// when draw(seed, stream + h, qr << 32 | kr) >= thresh, and then multiplied by scale; thresh 0: no
// dropout (every kernel's path without it is unchanged).
struct fat5_dropp {
    unsigned long long seed, stream;
    unsigned int thresh;
    float scale;
};

// The multiplier of one probability (one Philox block per call).
__device__ __forceinline__ float fat5_attn_drop1(const fat5_dropp &d, unsigned long long stream, long long qr,
                                                 long long kr)
{
    const unsigned long long i = (unsigned long long)qr << 32 | (unsigned long long)kr;
    return fat5_drop_mul(fat5_drop_block(d.seed, stream, i >> 3), (int)(i & 7), d.thresh, d.scale);
}

// The words of Philox block `mine` of lane src (of the warp), to every lane that asks.
__device__ __forceinline__ uint4 fat5_shfl_u4(uint4 mine, int src)
{
    uint4 r;
    r.x = __shfl_sync(FAT5_FULL_MASK, mine.x, src);
    r.y = __shfl_sync(FAT5_FULL_MASK, mine.y, src);
    r.z = __shfl_sync(FAT5_FULL_MASK, mine.z, src);
    r.w = __shfl_sync(FAT5_FULL_MASK, mine.w, src);
    return r;
}

// The multipliers of a fragment row of the tensor-core kernels (mma / wgmma accumulators with rows
// = queries): x[4 n + X + e] *= the multiplier of query row qr and key kt0 + 8 n + 2 (lane & 3) + e
// (n < NW, e < 2; X, 0 or 2, the row's half of the n-tile). The row's keys span NW + 1 Philox
// blocks (a pair may straddle two); the four lanes of a quad (lanes 4 g .. 4 g + 3, which hold the
// same row) share them: lane tq draws blocks tq, tq + 4, ... and the quad passes each round (a
// quarter of the draws). kt0: the tile's first key, the same for the quad. Every lane of the warp
// must call it (shuffles).
template <int NW>
__device__ __forceinline__ void fat5_attn_drop_row_quad(const fat5_dropp &d, unsigned long long stream, long long qr,
                                                        long long kt0, float *x, int X)
{
    const int lane = threadIdx.x & 31, tq = lane & 3, qb = lane & ~3;
    const unsigned long long i0 = (unsigned long long)qr << 32 | (unsigned long long)kt0, b0 = i0 >> 3;
    // this lane's key pair, from block b0's start: offsets o, o + 1 (0 .. 14), in blocks n + s_e
    const int o = (int)(i0 & 7) + 2 * tq, s0 = o >> 3, l0 = o & 7, s1 = (o + 1) >> 3, l1 = (o + 1) & 7;
    const int NB = (NW + 4) / 4;  // blocks a lane draws: j = tq + 4 m, m < NB (covers j <= NW)
    uint4 mine[NB];
#pragma unroll
    for (int m = 0; m < NB; m++) mine[m] = fat5_drop_block(d.seed, stream, b0 + (unsigned long long)(tq + 4 * m));
    uint4 prev = fat5_shfl_u4(mine[0], qb);  // block 0: lane 0 of the quad
#pragma unroll
    for (int n = 0; n < NW; n++) {
        const uint4 cur = fat5_shfl_u4(mine[(n + 1) >> 2], qb | ((n + 1) & 3));  // block n + 1
        x[4 * n + X] *= fat5_drop_mul(s0 ? cur : prev, l0, d.thresh, d.scale);
        x[4 * n + X + 1] *= fat5_drop_mul(s1 ? cur : prev, l1, d.thresh, d.scale);
        prev = cur;
    }
}

// The keep bits of a thread's scores in the key-row layout of the dk, dv kernels (mma / wgmma
// accumulators with rows = keys): bit 4 n + 2 rr + e is set when the probability of query column
// c0 + 8 n + 2 (lane & 3) + e and key row kr0 + 8 rr + (lane >> 2) is kept (n < NW <= 8). kr0:
// the warp's first key row, a multiple of 8, so that the 8 keys of rows kr0 + 8 rr .. + 7 are one
// Philox block per query: the 8 lanes of a column (lane & 3 alike) draw each block once between
// them (lane gr the bits z = gr + 8 m) and pass them round. Every lane must call it (shuffles).
template <int NW>
__device__ __forceinline__ unsigned int fat5_attn_drop_bits_keys(const fat5_dropp &d, unsigned long long stream,
                                                                 long long c0, long long kr0)
{
    const int lane = threadIdx.x & 31, tq = lane & 3, gr = lane >> 2;
    const int NM = (4 * NW + 7) / 8;
    uint4 mine[NM];
#pragma unroll
    for (int m = 0; m < NM; m++) {
        const int z = gr + 8 * m, n = z >> 2, rr = (z >> 1) & 1, e = z & 1;  // bit z's score
        const unsigned long long qi = (unsigned long long)(c0 + 8 * n + 2 * tq + e);
        mine[m] = fat5_drop_block(d.seed, stream, (qi << 29) + ((unsigned long long)kr0 >> 3) + (unsigned long long)rr);
    }
    unsigned int bits = 0;
#pragma unroll
    for (int z = 0; z < 4 * NW; z++) {
        const uint4 w = fat5_shfl_u4(mine[z >> 3], ((z & 7) << 2) | tq);  // drawn by lane gr = z & 7
        if (fat5_drop_lane(w, gr) >= d.thresh) bits |= 1u << z;
    }
    return bits;
}
