// kernels/ffn.cu — FFN activations: h = act(a) (* b when gated), and the backward.
//
// act is a fat5_act value: 0 ReLU, 1 exact-erf GELU ("gelu"), 2 tanh GELU ("gelu_new", what
// "gated-gelu" means), 3 SiLU; or 4, tanh (FAT5__ACT_TANH: the classification head's). Elementwise, grid-stride over a 64-bit count, fp32 math.
// The logistic function is evaluated so that both s and 1 - s keep full relative accuracy in the
// tails; so are Phi via erfc and the derivatives, which then match the CPU's double evaluation to a
// few ulps everywhere in an fp32 build (no 1 + tanh or 1 - tanh^2 cancellation); a bf16 build's
// logistic is looser (see fat5_sigmoid2), far below the rounding of its bf16 outputs.

// s = 1 / (1 + exp(-u)) and sm = 1 - s, each to a few ulps. In a bf16 build, whose outputs keep 8
// bits, with the hardware's exponential and division (a few ulps of fp32 more, far below bf16's
// rounding).
#if FAT5_ACT_BF16
#define FAT5_ACT_EXP __expf
#define FAT5_ACT_RCP(y) __fdividef(1.0f, (y))
#else
#define FAT5_ACT_EXP expf
#define FAT5_ACT_RCP(y) (1.0f / (y))
#endif
__device__ __forceinline__ void fat5_sigmoid2(float u, float *s, float *sm)
{
    if (u >= 0.0f) {
        const float e = FAT5_ACT_EXP(-u);
        *s = FAT5_ACT_RCP(1.0f + e);
        *sm = e * *s;
    } else {
        const float e = FAT5_ACT_EXP(u);
        *sm = FAT5_ACT_RCP(1.0f + e);
        *s = e * *sm;
    }
}

#define FAT5_SQRT_HALF 0.7071067811865476f    // 1 / sqrt(2)
#define FAT5_INV_SQRT_2PI 0.3989422804014327f // 1 / sqrt(2 pi)
#define FAT5_GELU_K 0.7978845608028654f       // sqrt(2 / pi)
#define FAT5_GELU_C 0.044715f

// act(x); when df is non-NULL also act'(x). The formulas are those of fat5__act_f / fat5__act_df:
//   gelu:      x Phi(x),             Phi + x exp(-x^2/2) / sqrt(2 pi),      Phi = erfc(-x/sqrt2)/2
//   gelu_tanh: 0.5 x (1 + tanh(u)) = x s with s = sigmoid(2u), u = k (x + c x^3);
//              derivative 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 c x^2)
//                       = s + 2 x s (1 - s) k (1 + 3 c x^2)
//   silu:      x s with s = sigmoid(x), derivative s (1 + x (1 - s))
__device__ __forceinline__ float fat5_act_eval(int act, float x, float *df)
{
    float f, d, s, sm;
    switch (act) {
    case 0:
        f = x > 0.0f ? x : 0.0f;
        d = x > 0.0f ? 1.0f : 0.0f;
        break;
    case 1: {
        // phi rounded on its own (no fused 0.5 erfc + ... in d): the same bits whether or not f is
        // used, so the vector and per-element loops agree
        const float phi = __fmul_rn(0.5f, erfcf(-x * FAT5_SQRT_HALF));
        f = x * phi;
        d = df ? phi + x * expf(-0.5f * x * x) * FAT5_INV_SQRT_2PI : 0.0f;
        break;
    }
    case 2: {
        const float u = FAT5_GELU_K * (x + FAT5_GELU_C * x * x * x);
        fat5_sigmoid2(2.0f * u, &s, &sm);
        f = x * s;
        d = s + 2.0f * x * s * sm * FAT5_GELU_K * (1.0f + 3.0f * FAT5_GELU_C * x * x);
        break;
    }
    case 4:   // tanh; derivative 1 - tanh^2 = 4 s (1 - s) with s = sigmoid(2x), no cancellation in the tails
        f = tanhf(x);
        fat5_sigmoid2(2.0f * x, &s, &sm);
        d = 4.0f * s * sm;
        break;
    default:
        fat5_sigmoid2(x, &s, &sm);
        f = x * s;
        d = s * (1.0f + x * sm);
        break;
    }
    if (df) *df = d;
    return f;
}

// fat5_act_fwd(act_t *h[n], const act_t *a[n], const act_t *b[n] or NULL, long long n, int act,
// unsigned long long seed, unsigned long long stream, unsigned thresh, float scale):
// h = act(a) * b (gated) or act(a), then dropout (T5's on the FFN's hidden activation) when thresh
// > 0: h *= m, m = scale where element i (index i) of mask (seed, stream) is kept, else 0
// (kernels/00_common.cu). h may alias a or b. With every pointer 16-byte aligned a thread takes
// FAT5_VEC_E elements per 16-byte load (the launch covers n / FAT5_VEC_E threads), then the
// n % FAT5_VEC_E left one each; the same values either way. CPU twin: fat5__cpu_act_fwd.
template <int act>
__device__ __forceinline__ void fat5_act_fwd_t(act_t *h, const act_t *a, const act_t *b, long long n,
                                               unsigned long long seed, unsigned long long stream,
                                               unsigned int thresh, float scale)
{
    const long long stride = (long long)blockDim.x * gridDim.x, i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nv = fat5_al16(h, a, b, 0) ? n / FAT5_VEC_E : 0;
    for (long long v = i0; v < nv; v += stride) {
        float fa[FAT5_VEC_E], fb[FAT5_VEC_E];
        fat5_ld16(a + v * FAT5_VEC_E, fa);
        if (b) fat5_ld16(b + v * FAT5_VEC_E, fb);
#pragma unroll
        for (int e = 0; e < FAT5_VEC_E; e++) {
            fa[e] = fat5_act_eval(act, fa[e], 0);
            if (b) fa[e] *= fb[e];
        }
        if (thresh) {   // the vector lies in one Philox block (FAT5_VEC_E divides 8)
            const long long i = v * FAT5_VEC_E;
            const uint4 w = fat5_drop_block(seed, stream, (unsigned long long)i >> 3);
#pragma unroll
            for (int e = 0; e < FAT5_VEC_E; e++) fa[e] = __fmul_rn(fa[e], fat5_drop_mul(w, (int)(i & 7) + e, thresh, scale));
        }
        fat5_st16(h + v * FAT5_VEC_E, fa);
    }
    for (long long i = nv * FAT5_VEC_E + i0; i < n; i += stride) {
        float f = fat5_act_eval(act, fat5_ld(a[i]), 0);
        if (b) f *= fat5_ld(b[i]);
        if (thresh)
            f = __fmul_rn(f, fat5_drop_mul(fat5_drop_block(seed, stream, (unsigned long long)i >> 3), (int)(i & 7), thresh,
                                           scale));
        h[i] = fat5_st(f);
    }
}

// fat5_act_bwd(act_t *da[n], act_t *db[n] or NULL, const act_t *dh[n], const act_t *a[n],
// const act_t *b[n] or NULL, long long n, int act, unsigned long long seed, unsigned long long stream,
// unsigned thresh, float scale): with g = dh, or g = dh * m under the forward's dropout (thresh > 0,
// the multipliers of fat5_act_fwd),
//   gated (b != NULL): da = g * b * act'(a), db = g * act(a)   (db written only when non-NULL)
//   plain:             da = g * act'(a)
// Each element is read before it is written, so db == dh (or da == dh) in place works. Vector
// loads as fat5_act_fwd. CPU twin: fat5__cpu_act_bwd.
template <int act>
__device__ __forceinline__ void fat5_act_bwd_t(act_t *da, act_t *db, const act_t *dh, const act_t *a, const act_t *b,
                                               long long n, unsigned long long seed, unsigned long long stream,
                                               unsigned int thresh, float scale)
{
    const long long stride = (long long)blockDim.x * gridDim.x, i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long nv = fat5_al16(da, db, dh, a) && fat5_al16(b, 0, 0, 0) ? n / FAT5_VEC_E : 0;
    for (long long v = i0; v < nv; v += stride) {
        float g[FAT5_VEC_E], fa[FAT5_VEC_E], fb[FAT5_VEC_E], o[FAT5_VEC_E];
        fat5_ld16(dh + v * FAT5_VEC_E, g);
        fat5_ld16(a + v * FAT5_VEC_E, fa);
        if (b) fat5_ld16(b + v * FAT5_VEC_E, fb);
        if (thresh) {
            const long long i = v * FAT5_VEC_E;
            const uint4 w = fat5_drop_block(seed, stream, (unsigned long long)i >> 3);
#pragma unroll
            for (int e = 0; e < FAT5_VEC_E; e++) g[e] = __fmul_rn(g[e], fat5_drop_mul(w, (int)(i & 7) + e, thresh, scale));
        }
#pragma unroll
        for (int e = 0; e < FAT5_VEC_E; e++) {
            float d;
            const float f = fat5_act_eval(act, fa[e], &d);
            o[e] = b ? g[e] * fb[e] * d : g[e] * d;
            fa[e] = g[e] * f;   // db's value, written below
        }
        fat5_st16(da + v * FAT5_VEC_E, o);
        if (b && db) fat5_st16(db + v * FAT5_VEC_E, fa);
    }
    for (long long i = nv * FAT5_VEC_E + i0; i < n; i += stride) {
        float g = fat5_ld(dh[i]);
        float d;
        const float f = fat5_act_eval(act, fat5_ld(a[i]), &d);
        if (thresh)
            g = __fmul_rn(g, fat5_drop_mul(fat5_drop_block(seed, stream, (unsigned long long)i >> 3), (int)(i & 7), thresh,
                                           scale));
        if (b) {
            const float bv = fat5_ld(b[i]);
            da[i] = fat5_st(g * bv * d);
            if (db) db[i] = fat5_st(g * f);
        } else {
            da[i] = fat5_st(g * d);
        }
    }
}

// One body per activation (the activation a constant inside each loop).
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_act_fwd(act_t *h, const act_t *a, const act_t *b, long long n, int act,
                                        unsigned long long seed, unsigned long long stream, unsigned int thresh,
                                        float scale)
{
    switch (act) {
    case 0: fat5_act_fwd_t<0>(h, a, b, n, seed, stream, thresh, scale); break;
    case 1: fat5_act_fwd_t<1>(h, a, b, n, seed, stream, thresh, scale); break;
    case 2: fat5_act_fwd_t<2>(h, a, b, n, seed, stream, thresh, scale); break;
    case 4: fat5_act_fwd_t<4>(h, a, b, n, seed, stream, thresh, scale); break;
    default: fat5_act_fwd_t<3>(h, a, b, n, seed, stream, thresh, scale); break;
    }
}
#endif

#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_act_bwd(act_t *da, act_t *db, const act_t *dh, const act_t *a, const act_t *b,
                                        long long n, int act, unsigned long long seed, unsigned long long stream,
                                        unsigned int thresh, float scale)
{
    switch (act) {
    case 0: fat5_act_bwd_t<0>(da, db, dh, a, b, n, seed, stream, thresh, scale); break;
    case 1: fat5_act_bwd_t<1>(da, db, dh, a, b, n, seed, stream, thresh, scale); break;
    case 2: fat5_act_bwd_t<2>(da, db, dh, a, b, n, seed, stream, thresh, scale); break;
    case 4: fat5_act_bwd_t<4>(da, db, dh, a, b, n, seed, stream, thresh, scale); break;
    default: fat5_act_bwd_t<3>(da, db, dh, a, b, n, seed, stream, thresh, scale); break;
    }
}
#endif
