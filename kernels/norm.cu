// kernels/norm.cu — T5 RMSNorm forward and backward, and the deterministic column sum that
// finishes the weight gradient.
//
// One warp per row (grid-stride over rows), lanes over the D columns. The residual stream x is
// fp32; the normalised output y is in the activation dtype; r = 1 / sqrt(mean(x^2) + eps) is saved
// per row for the backward.

// Rows of D % 4 == 0 floats, D <= 128 * FAT5_NORM_VMAX (512), with 16-byte aligned arrays (the model's) are
// held in registers, lane l holding the float4 chunks at 4 l + 128 c: one read of each row, every
// load of a row issued at once. Other rows go one column per lane (j = l mod 32). Either way the
// order of every sum is fixed by D and the pointers' alignment.
#define FAT5_NORM_VMAX 4

// fat5_rmsnorm_fwd(act_t *y[T,D], float *r[T], const float *x[T,D], const float *w[D], long long T,
// int D, float eps, float *xs[T,D]): y = w * (x * r); xs, when not NULL, a copy of x (the residual
// stream saved for the backward: one pass over x instead of a copy and a norm). One warp per row
// (grid-stride over rows by warp); the row's sum of squares in a fixed order (lane partials, then
// the butterfly). CPU twin: fat5__cpu_rmsnorm_fwd.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_rmsnorm_fwd(act_t *y, float *r, const float *x, const float *w, long long T,
                                            int D, float eps, float *xs)
{
    fat5_pdl_begin();
    const int lane = threadIdx.x & 31;
    const long long nw = (long long)gridDim.x * (blockDim.x >> 5);
    const bool vec = (D & 3) == 0 && D <= 128 * FAT5_NORM_VMAX && fat5_al16(x, w, xs, y);
    for (long long t = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); t < T; t += nw) {
        const float *xr = x + t * D;
        act_t *yr = y + t * D;
        float ss = 0.0f;
        if (vec) {
            float4 xv[FAT5_NORM_VMAX];
#pragma unroll
            for (int c = 0; c < FAT5_NORM_VMAX; c++) {
                const int j = 4 * lane + 128 * c;
                if (j < D) {
                    xv[c] = *(const float4 *)(xr + j);
                    ss = fmaf(xv[c].x, xv[c].x, ss);
                    ss = fmaf(xv[c].y, xv[c].y, ss);
                    ss = fmaf(xv[c].z, xv[c].z, ss);
                    ss = fmaf(xv[c].w, xv[c].w, ss);
                    if (xs) *(float4 *)(xs + t * D + j) = xv[c];
                }
            }
            ss = fat5_warp_sum(ss);
            const float rt = 1.0f / sqrtf(ss / (float)D + eps);
            if (lane == 0) r[t] = rt;
#pragma unroll
            for (int c = 0; c < FAT5_NORM_VMAX; c++) {
                const int j = 4 * lane + 128 * c;
                if (j < D) {
                    const float4 wv = *(const float4 *)(w + j);
                    fat5_st4(yr + j, wv.x * (xv[c].x * rt), wv.y * (xv[c].y * rt), wv.z * (xv[c].z * rt),
                             wv.w * (xv[c].w * rt));
                }
            }
            continue;
        }
        for (int j = lane; j < D; j += 32) {
            const float v = xr[j];
            ss = fmaf(v, v, ss);
            if (xs) xs[t * D + j] = v;
        }
        ss = fat5_warp_sum(ss);
        const float rt = 1.0f / sqrtf(ss / (float)D + eps);
        if (lane == 0) r[t] = rt;
        for (int j = lane; j < D; j += 32) yr[j] = fat5_st(w[j] * (xr[j] * rt));
    }
}
#endif

// fat5_rmsnorm_bwd(float *dx[T,D], float *dw_part[.., D], const float *dy[T,D], const float *x[T,D],
// const float *w[D], const float *r[T], long long T, int D, int accumulate, act_t *dxa[T,D]):
//   dx (+)= r g - x r^3 mean(g x) with g = w dy   (accumulate != 0: added to dx, else written)
//   dxa, when not NULL: dx's final value in the activation dtype (what the next products read: no
//        separate conversion pass)
//   dw partials: sum over the rows of each warp of dy x r. One warp per row (grid-stride over rows
//   by warp), registers as the forward. When the launch gave (warps per block) x D floats of
//   dynamic shared memory, each warp adds into its own shared row and the block then sums its
//   warps' rows in warp order into dw_part[blockIdx.x] (gridDim.x rows); else each warp adds into
//   its own dw_part row, blockIdx.x * warps + warp (gridDim.x * warps rows). No atomics:
//   fat5_colsum_f32 sums the rows in a fixed order. dw_part may be NULL (no weight gradient).
// Blocks of 256 threads (FAT5__GPU_NORM_WARPS warps), three per multiprocessor (80 registers).
// CPU twin: fat5__cpu_rmsnorm_bwd.
#if FAT5_IN_PART(0)
extern "C" __global__ void __launch_bounds__(256, 3) fat5_rmsnorm_bwd(float *dx, float *dw_part, const float *dy, const float *x,
                                            const float *w, const float *r, long long T, int D, int accumulate,
                                            act_t *dxa)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwb = blockDim.x >> 5;
    const long long nw = (long long)gridDim.x * nwb;
    const bool in_smem = dw_part && (long long)fat5_dyn_smem_bytes() >= 4LL * nwb * D;
    const bool vec = (D & 3) == 0 && D <= 128 * FAT5_NORM_VMAX && fat5_al16(dx, dy, x, w) &&
                     fat5_al16(dxa, in_smem ? 0 : dw_part, 0, 0);
    float *acc = !dw_part ? 0 : in_smem ? (float *)fat5_smem + (long long)warp * D
                                        : dw_part + ((long long)blockIdx.x * nwb + warp) * D;
    if (acc) {
        for (int j = lane; j < D; j += 32) acc[j] = 0.0f;
        __syncwarp();   // the vector path's lanes own other columns of the warp's row
    }
    for (long long t = (long long)blockIdx.x * nwb + warp; t < T; t += nw) {
        const float *xr = x + t * D, *dyr = dy + t * D;
        float *dxr = dx + t * D;
        const float rt = r[t];
        float gx = 0.0f;
        if (vec) {
            float4 xv[FAT5_NORM_VMAX], gv[FAT5_NORM_VMAX];
#pragma unroll
            for (int c = 0; c < FAT5_NORM_VMAX; c++) {
                const int j = 4 * lane + 128 * c;
                if (j < D) {
                    const float4 wv = *(const float4 *)(w + j);
                    gv[c] = *(const float4 *)(dyr + j);
                    xv[c] = *(const float4 *)(xr + j);
                    gx = fmaf(wv.x * gv[c].x, xv[c].x, gx);
                    gx = fmaf(wv.y * gv[c].y, xv[c].y, gx);
                    gx = fmaf(wv.z * gv[c].z, xv[c].z, gx);
                    gx = fmaf(wv.w * gv[c].w, xv[c].w, gx);
                }
            }
            gx = fat5_warp_sum(gx) / (float)D;
            const float cc = rt * rt * rt * gx;
#pragma unroll
            for (int c = 0; c < FAT5_NORM_VMAX; c++) {
                const int j = 4 * lane + 128 * c;
                if (j < D) {
                    const float4 wv = *(const float4 *)(w + j);
                    float4 o = make_float4(rt * (wv.x * gv[c].x) - xv[c].x * cc, rt * (wv.y * gv[c].y) - xv[c].y * cc,
                                           rt * (wv.z * gv[c].z) - xv[c].z * cc, rt * (wv.w * gv[c].w) - xv[c].w * cc);
                    if (accumulate) {
                        const float4 d0 = *(const float4 *)(dxr + j);
                        o.x = d0.x + o.x, o.y = d0.y + o.y, o.z = d0.z + o.z, o.w = d0.w + o.w;
                    }
                    *(float4 *)(dxr + j) = o;
                    if (dxa) fat5_st4(dxa + t * D + j, o.x, o.y, o.z, o.w);
                    if (acc) {
                        acc[j] += gv[c].x * xv[c].x * rt;
                        acc[j + 1] += gv[c].y * xv[c].y * rt;
                        acc[j + 2] += gv[c].z * xv[c].z * rt;
                        acc[j + 3] += gv[c].w * xv[c].w * rt;
                    }
                }
            }
            continue;
        }
        for (int j = lane; j < D; j += 32) gx = fmaf(w[j] * dyr[j], xr[j], gx);
        gx = fat5_warp_sum(gx) / (float)D;
        const float c = rt * rt * rt * gx;
        for (int j = lane; j < D; j += 32) {
            const float g = dyr[j], xv = xr[j];
            const float v = rt * (w[j] * g) - xv * c;
            const float o = accumulate ? dxr[j] + v : v;
            dxr[j] = o;
            if (dxa) dxa[t * D + j] = fat5_st(o);
            if (acc) acc[j] += g * xv * rt;
        }
    }
    if (in_smem) {   // the block's warps' rows, summed in warp order, into its dw_part row
        __syncthreads();
        const float *sdw = (const float *)fat5_smem;
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            float s = 0.0f;
            for (int k = 0; k < nwb; k++) s += sdw[(long long)k * D + j];
            dw_part[(long long)blockIdx.x * D + j] = s;
        }
    }
}
#endif

// fat5_colsum_f32(float *out[D], const float *in[rows,D], int rows, int D):
// out[j] += sum over r of in[r*D + j]. Block (32, 32): threadIdx.x picks the column, threadIdx.y
// strides the rows; the 32 partial sums are then added in a fixed order, so the result does not
// depend on scheduling (deterministic). Grid-stride over column tiles.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_colsum_f32(float *out, const float *in, int rows, int D)
{
    __shared__ float part[32][33];
    for (long long c0 = (long long)blockIdx.x * 32; c0 < D; c0 += (long long)gridDim.x * 32) {
        const long long j = c0 + threadIdx.x;
        float s = 0.0f;
        if (j < D)
#pragma unroll 4
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
#endif
