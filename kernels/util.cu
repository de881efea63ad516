// kernels/util.cu — fills, scaling, fp32 -> bf16 conversion and fp32 -> activation dtype.
//
// Plain CUDA compiled at run time by NVRTC: no #include, every entry point extern "C" __global__.
// Embedded into fat5_kernels.cuh by dev/embed_kernels.c (`make embed`). The bf16 helpers
// (fat5_bf16_to_f32, fat5_f32_to_bf16_rne) and act_t live in kernels/00_common.cu.
//
// bf16 is carried as `unsigned short` (the upper 16 bits of an IEEE-754 binary32), so no toolkit
// header is needed. All kernels use grid-stride loops over a 64-bit element count: any 1-D grid
// covers any n.

// fat5_fill_f32(float *dst[n], float value, long long n): dst[i] = value for i in [0, n).
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_fill_f32(float *dst, float value, long long n)
{
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = value;
}
#endif

// fat5_scale_f32(float *x[n], float s, long long n): x[i] *= s in place for i in [0, n).
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_scale_f32(float *x, float s, long long n)
{
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = x[i] * s;
}
#endif

// fat5_f32_to_bf16(unsigned short *dst[n], const float *src[n], long long n):
// dst[i] = bf16(src[i]), round to nearest even. dst and src must not overlap. (bf16 working copies
// of the fp32 master weights; independent of the activation dtype.)
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_f32_to_bf16(unsigned short *dst, const float *src, long long n)
{
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = fat5_f32_to_bf16_rne(src[i]);
}
#endif

// fat5_to_act(act_t *dst[n], const float *src[n], long long n): dst[i] = src[i] in the activation
// dtype (a copy in fp32 mode, RNE rounding in bf16 mode). dst and src must not overlap.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_to_act(act_t *dst, const float *src, long long n)
{
    long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = fat5_st(src[i]);
}
#endif
