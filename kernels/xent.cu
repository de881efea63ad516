// kernels/xent.cu — cross-entropy with z-loss and label smoothing over rows of fp32 logits.
//
// One block per row (grid-stride over rows), threads over the vocabulary. The forward is a single
// pass: each thread keeps an online (max, sum of exp) pair and the plain sum of the logits; pairs
// are merged across the block in a fixed order. Labels equal to -100 are ignored.

// Merges the online softmax pair (m2, s2) into (m, s). Maxima start at -FLT_MAX rather than -inf so
// that no -inf - -inf = NaN can arise from an empty partial.
__device__ __forceinline__ void fat5_lse_merge(float *m, float *s, float m2, float s2)
{
    const float mm = fmaxf(*m, m2);
    *s = *s * expf(*m - mm) + s2 * expf(m2 - mm);
    *m = mm;
}

// fat5_xent_fwd(float *lse[T], float *row_ce[T], float *row_z[T], const float *logits[T,V],
// const int *labels[T], long long T, int V, float z, float smooth): per row
//   lse = log sum_j exp(x_j);  for labels != -100:
//   row_ce = lse - (1 - smooth) x_y - (smooth / V) sum_j x_j,  row_z = z lse^2;  else both 0.
// A label outside [0, V) other than -100 gives row_ce = NaN. fat5_loss_total sums the rows.
// Block: any multiple of 32 threads. CPU twin: fat5__cpu_xent_fwd (which returns the sums).
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_xent_fwd(float *lse, float *row_ce, float *row_z, const float *logits,
                                         const int *labels, long long T, int V, float z, float smooth)
{
    __shared__ float red_m[32], red_s[32], red_x[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        const float *x = logits + t * V;
        float m = -FAT5_FLT_MAX, s = 0.0f, sx = 0.0f;
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            const float xv = x[j];
            sx += xv;
            if (xv > m) {
                s = s * expf(m - xv) + 1.0f;
                m = xv;
            } else {
                s += expf(xv - m);
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float m2 = __shfl_xor_sync(FAT5_FULL_MASK, m, o);
            const float s2 = __shfl_xor_sync(FAT5_FULL_MASK, s, o);
            fat5_lse_merge(&m, &s, m2, s2);
        }
        sx = fat5_warp_sum(sx);
        __syncthreads();  // the previous row's readers are done with red_*
        if (lane == 0) {
            red_m[warp] = m;
            red_s[warp] = s;
            red_x[warp] = sx;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (int w = 1; w < nwarps; w++) {
                fat5_lse_merge(&m, &s, red_m[w], red_s[w]);
                sx += red_x[w];
            }
            const float L = m + logf(s);
            const int y = labels[t];
            lse[t] = L;
            if (y == -100) {
                row_ce[t] = 0.0f;
                row_z[t] = 0.0f;
            } else {
                const float xy = y >= 0 && y < V ? x[y] : __int_as_float(0x7fc00000);  // NaN
                row_ce[t] = L - (1.0f - smooth) * xy - smooth / (float)V * sx;
                row_z[t] = z * L * L;
            }
        }
    }
}
#endif

// fat5_xent_bwd(act_t *dlogits[T,V], const float *logits[T,V], const float *lse[T],
// const int *labels[T], long long T, int V, float z, float smooth, float scale):
//   counted rows: dlogits = scale * (softmax (1 + 2 z lse) - (1 - smooth) onehot(y) - smooth / V)
//   rows with label -100: 0.
// dlogits may alias logits only in fp32 mode (each element is read before it is written).
// Block: any size. CPU twin: fat5__cpu_xent_bwd.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_xent_bwd(act_t *dlogits, const float *logits, const float *lse, const int *labels,
                                         long long T, int V, float z, float smooth, float scale)
{
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        const float *x = logits + t * V;
        act_t *dx = dlogits + t * V;
        const int y = labels[t];
        if (y == -100) {
            for (int j = threadIdx.x; j < V; j += blockDim.x) dx[j] = fat5_st(0.0f);
            continue;
        }
        const float L = lse[t], c = 1.0f + 2.0f * z * L, sv = smooth / (float)V;
        const float hit = scale * (1.0f - smooth);
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            float g = scale * (expf(x[j] - L) * c - sv);
            if (j == y) g -= hit;
            dx[j] = fat5_st(g);
        }
    }
}
#endif

// fat5_loss_total(double *out[2], const float *row_ce[T], const float *row_z[T], long long T,
// long long n): the batch's loss on the device, so that a training step need not wait for it:
//   ce = sum row_ce, zs = sum row_z (double);  out[0] = ce / n,  out[1] = (ce + zs) / n  (0, 0 if n = 0)
// in a fixed order: thread i of FAT5_LOSS_THREADS adds rows i, i + FAT5_LOSS_THREADS, ... in turn,
// then the threads' sums are halved pairwise (red[i] += red[i + stride], stride = 128, 64, .., 1).
// One block of FAT5_LOSS_THREADS. CPU twin: fat5__cpu_loss_total (the same order, the same bits).
#define FAT5_LOSS_THREADS 256
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_loss_total(double *out, const float *row_ce, const float *row_z, long long T,
                                           long long n)
{
    __shared__ double rc[FAT5_LOSS_THREADS], rz[FAT5_LOSS_THREADS];
    const int i = threadIdx.x;
    double c = 0.0, z = 0.0;
    for (long long t = i; t < T; t += FAT5_LOSS_THREADS) {
        c += (double)row_ce[t];
        z += (double)row_z[t];
    }
    rc[i] = c;
    rz[i] = z;
    __syncthreads();
    for (int stride = FAT5_LOSS_THREADS / 2; stride > 0; stride >>= 1) {
        if (i < stride) {
            rc[i] += rc[i + stride];
            rz[i] += rz[i + stride];
        }
        __syncthreads();
    }
    if (i == 0) {
        out[0] = n ? rc[0] / (double)n : 0.0;
        out[1] = n ? (rc[0] + rz[0]) / (double)n : 0.0;
    }
}
#endif
