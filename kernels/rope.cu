// kernels/rope.cu — rotary position embedding of q or k, in place (RoPE, with optional xPos).
//
// fat5_rope(act_t *x[T, H*dk], const int *cu, const int *seq, const int *pos, long long T, int H,
// int dk, int rd, float base, float xpos, int flags): CPU twin fat5__cpu_rope. Token t's position
// is pos[seq[t]] (seq: each entry's decoder row) or pos[0] (seq NULL) when pos is not NULL (a
// decode step), else t - cu[seq[t]] (its place in its packed sequence). Pair k < rd/2 of every head is (k, k + rd/2), or (2k, 2k+1) with flags & 1
// (interleaved), turned by theta = p base^(-2k/rd); xpos > 0 scales cos and sin by
// zeta_k^(+-p/xpos), zeta_k = (2k + 0.4 rd) / (1.4 rd), the minus sign with flags & 2 (keys);
// flags & 4 applies the transposed rotation (the backward). Angle and scale are computed in double
// from the exact integer position, then rounded to fp32 as on the CPU: no table, no length limit.
// One thread per (token, pair), looping over the heads (so cos and sin are computed once);
// grid-stride over T * rd/2.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_rope(act_t *x, const int *cu, const int *seq, const int *pos, long long T, int H,
                                     int dk, int rd, float base, float xpos, int flags)
{
    int half = rd / 2;
    long long n = T * half, stride = (long long)blockDim.x * gridDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += stride) {
        long long t = e / half;
        int k = (int)(e - t * half);
        double p = pos ? (double)pos[seq ? seq[t] : 0] : (double)(t - cu[seq[t]]);
        double ang = p * pow((double)base, -2.0 * k / rd), sc = 1.0, sd, cd;
        int ia = (flags & 1) ? 2 * k : k, ib = (flags & 1) ? 2 * k + 1 : k + half;
        if (xpos > 0.0f) sc = pow((2.0 * k + 0.4 * rd) / (1.4 * rd), ((flags & 2) ? -p : p) / (double)xpos);
        sincos(ang, &sd, &cd);
        float cs = (float)(cd * sc), sn = (float)(sd * sc);
        if (flags & 4) sn = -sn;
        for (int h = 0; h < H; h++) {
            act_t *r = x + t * (long long)H * dk + (long long)h * dk;
            float a = fat5_ld(r[ia]), b = fat5_ld(r[ib]);
            r[ia] = fat5_st(__fmul_rn(a, cs) - __fmul_rn(b, sn));
            r[ib] = fat5_st(__fmul_rn(b, cs) + __fmul_rn(a, sn));
        }
    }
}
#endif
