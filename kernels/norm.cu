// kernels/norm.cu — T5 RMSNorm forward and backward, and the deterministic column sum that
// finishes the weight gradient.
//
// One block per row (grid-stride over rows), threads over the D columns. The residual stream x is
// fp32; the normalised output y is in the activation dtype; r = 1 / sqrt(mean(x^2) + eps) is saved
// per row for the backward.

// fat5_rmsnorm_fwd(act_t *y[T,D], float *r[T], const float *x[T,D], const float *w[D], long long T,
// int D, float eps, float *xs[T,D]): y = w * (x * r); xs, when not NULL, a copy of x (the residual
// stream saved for the backward: one pass over x instead of a copy and a norm). CPU twin:
// fat5__cpu_rmsnorm_fwd.
extern "C" __global__ void fat5_rmsnorm_fwd(act_t *y, float *r, const float *x, const float *w, long long T,
                                            int D, float eps, float *xs)
{
    fat5_pdl_begin();
    __shared__ float red[32];
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + t * D;
        act_t *yr = y + t * D;
        float ss = 0.0f;
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            const float v = xr[j];
            ss = fmaf(v, v, ss);
            if (xs) xs[t * D + j] = v;
        }
        ss = fat5_block_sum(ss, red);
        const float rt = 1.0f / sqrtf(ss / (float)D + eps);
        if (threadIdx.x == 0) r[t] = rt;
        for (int j = threadIdx.x; j < D; j += blockDim.x) yr[j] = fat5_st(w[j] * (xr[j] * rt));
    }
}

// fat5_rmsnorm_bwd(float *dx[T,D], float *dw_part[gridDim.x,D], const float *dy[T,D],
// const float *x[T,D], const float *w[D], const float *r[T], long long T, int D, int accumulate):
//   dx (+)= r g - x r^3 mean(g x) with g = w dy   (accumulate != 0: added to dx, else written)
//   dw_part[b] = sum over the rows t of block b of dy x r   (no atomics; every block writes its
//                row of dw_part, zeros when it had no rows; fat5_colsum_f32 then sums the rows)
// dw_part may be NULL (no weight gradient). The partial sums live in dynamic shared memory when the
// launch gave D floats of it, else directly in dw_part. CPU twin: fat5__cpu_rmsnorm_bwd.
extern "C" __global__ void fat5_rmsnorm_bwd(float *dx, float *dw_part, const float *dy, const float *x,
                                            const float *w, const float *r, long long T, int D, int accumulate)
{
    __shared__ float red[32];
    float *sdw = (float *)fat5_smem;
    float *pdw = dw_part ? dw_part + (long long)blockIdx.x * D : 0;
    float *acc = dw_part && (long long)fat5_dyn_smem_bytes() >= 4LL * D ? sdw : pdw;
    // each thread only ever touches its own columns j = threadIdx.x (mod blockDim.x) of acc, so no
    // barrier is needed around these accesses
    if (acc)
        for (int j = threadIdx.x; j < D; j += blockDim.x) acc[j] = 0.0f;
    for (long long t = blockIdx.x; t < T; t += gridDim.x) {
        const float *xr = x + t * D, *dyr = dy + t * D;
        float *dxr = dx + t * D;
        const float rt = r[t];
        float gx = 0.0f;
        for (int j = threadIdx.x; j < D; j += blockDim.x) gx = fmaf(w[j] * dyr[j], xr[j], gx);
        gx = fat5_block_sum(gx, red) / (float)D;
        const float c = rt * rt * rt * gx;
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            const float g = dyr[j], xv = xr[j];
            const float v = rt * (w[j] * g) - xv * c;
            dxr[j] = accumulate ? dxr[j] + v : v;
            if (acc) acc[j] += g * xv * rt;
        }
    }
    if (acc == sdw && pdw)
        for (int j = threadIdx.x; j < D; j += blockDim.x) pdw[j] = sdw[j];
}

// fat5_colsum_f32(float *out[D], const float *in[rows,D], int rows, int D):
// out[j] += sum over r of in[r*D + j]. Block (32, 32): threadIdx.x picks the column, threadIdx.y
// strides the rows; the 32 partial sums are then added in a fixed order, so the result does not
// depend on scheduling (deterministic). Grid-stride over column tiles.
extern "C" __global__ void fat5_colsum_f32(float *out, const float *in, int rows, int D)
{
    __shared__ float part[32][33];
    for (long long c0 = (long long)blockIdx.x * 32; c0 < D; c0 += (long long)gridDim.x * 32) {
        const long long j = c0 + threadIdx.x;
        float s = 0.0f;
        if (j < D)
            for (int rr = threadIdx.y; rr < rows; rr += blockDim.y) s += in[(long long)rr * D + j];
        part[threadIdx.y][threadIdx.x] = s;
        __syncthreads();
        if (threadIdx.y == 0 && j < D) {
            float tot = 0.0f;
            for (int k = 0; k < (int)blockDim.y; k++) tot += part[k][threadIdx.x];
            out[j] += tot;
        }
        __syncthreads();
    }
}
