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

// The multipliers of a fragment row of the tensor-core kernels: query row qr, keys kc + 8 n + e
// (n < NW, e < 2; kc = the tile's first key + 2 (lane & 3)), applied to x[4 n + X + e]: n-tiles
// of m16n8 accumulators, X (0 or 2) the row's half. The keys of a pair lie in one Philox block, or (kc + 8 n
// = 7 mod 8) in two neighbouring ones: the row walks NW + 1 blocks, each drawn once.
template <int NW>
__device__ __forceinline__ void fat5_attn_drop_row(const fat5_dropp &d, unsigned long long stream, long long qr,
                                                   long long kc, float *x, int X)
{
    const unsigned long long i0 = (unsigned long long)qr << 32 | (unsigned long long)kc, b0 = i0 >> 3;
    const int l0 = (int)(i0 & 7), l1 = (l0 + 1) & 7;
    uint4 cur = fat5_drop_block(d.seed, stream, b0);
#pragma unroll
    for (int n = 0; n < NW; n++) {
        const uint4 nxt = fat5_drop_block(d.seed, stream, b0 + (unsigned long long)(n + 1));
        x[4 * n + X] *= fat5_drop_mul(cur, l0, d.thresh, d.scale);
        x[4 * n + X + 1] *= fat5_drop_mul(l0 == 7 ? nxt : cur, l1, d.thresh, d.scale);
        cur = nxt;
    }
}
