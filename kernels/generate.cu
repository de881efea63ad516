// kernels/generate.cu — decoding strategies on the device: Hugging Face's logits processors, greedy
// and sampled token selection, and one step of beam search with its hypothesis bookkeeping.
//
// The CPU twins are fat5__cpu_gen_process, fat5__cpu_gen_select and fat5__cpu_gen_beam in fat5.h
// (ops section), which document the semantics; these kernels compute the same thing. State is
// indexed by decoder row r: hist int [R, Lh] (hist[r][0] the start token, then the generated
// tokens), lens int [R] (tokens generated). An op runs on n entries whose rows are rows[0 .. n).
// Nothing here synchronises with the host, so a decode step can be captured in a CUDA graph.
// Every kernel runs blocks of 256 threads (FAT5_GEN_THREADS), one block per entry (per input for
// beam search), grid-stride over them.

#define FAT5_GEN_THREADS 256
#define FAT5_BEAM_MAX 32   // FAT5__BEAM_MAX in fat5.h

// Block reductions over FAT5_GEN_THREADS threads; every thread gets the result. The scratch arrays
// are __shared__ [32]; the leading barrier lets a caller reuse them at once.
__device__ double fat5_gen_block_sum_d(double v, double *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FAT5_FULL_MASK, v, o);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FAT5_FULL_MASK, v, o);
    return v;
}

__device__ float fat5_gen_block_max(float v, float *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = fat5_warp_max(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -FAT5_INF;
    return fat5_warp_max(v);
}

// arg-max of (v, i): the larger v, the smaller i on ties (i < 0: nothing); every thread gets it
__device__ void fat5_gen_block_argmax(double *v, long long *i, double *redv, long long *redi)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    double bv = *v;
    long long bi = *i;
    for (int pass = 0; pass < 2; pass++) {
        for (int o = 16; o > 0; o >>= 1) {
            double ov = __shfl_xor_sync(FAT5_FULL_MASK, bv, o);
            long long oi = __shfl_xor_sync(FAT5_FULL_MASK, bi, o);
            if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
        }
        if (pass == 1) break;
        __syncthreads();
        if (lane == 0) redv[warp] = bv, redi[warp] = bi;
        __syncthreads();
        bv = lane < nw ? redv[lane] : 0.0;
        bi = lane < nw ? redi[lane] : -1;
    }
    *v = bv;
    *i = bi;
}

__device__ int fat5_gen_block_count(int c, int *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(FAT5_FULL_MASK, c, o);
    __syncthreads();
    if (lane == 0) red[warp] = c;
    __syncthreads();
    c = lane < nw ? red[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(FAT5_FULL_MASK, c, o);
    return c;
}

// float -> unsigned key with the same order (NaN aside)
__device__ __forceinline__ unsigned int fat5_gen_key(float f)
{
    unsigned int u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Philox4x32-10, as fat5__philox in fat5.h (key = seed, counter = ctr, high words 0)
__device__ void fat5_gen_philox(unsigned long long key64, unsigned long long ctr64, unsigned int out[4])
{
    unsigned int c0 = (unsigned int)ctr64, c1 = (unsigned int)(ctr64 >> 32), c2 = 0, c3 = 0;
    unsigned int k0 = (unsigned int)key64, k1 = (unsigned int)(key64 >> 32);
    for (int r = 0; r < 10; r++) {
        unsigned long long p0 = (unsigned long long)0xD2511F53u * c0, p1 = (unsigned long long)0xCD9E8D57u * c2;
        unsigned int n0 = (unsigned int)(p1 >> 32) ^ c1 ^ k0, n2 = (unsigned int)(p0 >> 32) ^ c3 ^ k1;
        c1 = (unsigned int)p1;
        c3 = (unsigned int)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

// fat5__gen_gumbel of fat5.h: the noise of token v for (row, len)
__device__ double fat5_gen_gumbel(unsigned long long seed, long long row, long long len, long long v)
{
    unsigned int w[4];
    fat5_gen_philox(seed, ((unsigned long long)len << 44) + ((unsigned long long)row << 24) +
                              (unsigned long long)(v >> 2), w);
    double u = ((double)w[v & 3] + 0.5) * (1.0 / 4294967296.0);
    return -log(-log(u));
}

// fat5_gen_process(float *x[n, V], const int *hist[R, Lh], const int *lens[R], const int *rows[n],
// long long n, int V, int Lh, float rep, int ngram, int min_new, int eos, int log_softmax):
// log_softmax (optional), repetition penalty, no-repeat n-grams, min_new_tokens, in place.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_gen_process(float *x, const int *hist, const int *lens, const int *rows,
                                            long long n, int V, int Lh, float rep, int ngram, int min_new,
                                            int eos, int log_softmax)
{
    fat5_pdl_begin();
    __shared__ float redf[32];
    __shared__ double redd[32];
    for (long long e = blockIdx.x; e < n; e += gridDim.x) {
        float *xe = x + e * (long long)V;
        const int r = rows[e];
        const int *h = hist + (long long)r * Lh;
        const int L = lens[r] + 1;
        if (log_softmax) {
            float m = -FAT5_INF;
            for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, xe[v]);
            m = fat5_gen_block_max(m, redf);
            double s = 0.0;
            for (int v = threadIdx.x; v < V; v += blockDim.x) s += exp((double)xe[v] - (double)m);
            s = fat5_gen_block_sum_d(s, redd);
            const double lse = (double)m + log(s);
            for (int v = threadIdx.x; v < V; v += blockDim.x) xe[v] = (float)((double)xe[v] - lse);
            __syncthreads();
        }
        if (rep != 1.0f) {
            for (int i = threadIdx.x; i < L; i += blockDim.x) {   // one thread per distinct token
                const int t = h[i];
                int seen = 0;
                for (int j = 0; j < i && !seen; j++) seen = h[j] == t;
                if (!seen && t >= 0 && t < V) xe[t] = xe[t] < 0.0f ? xe[t] * rep : xe[t] / rep;
            }
            __syncthreads();
        }
        if (ngram > 0 && L + 1 >= ngram) {
            for (int i = threadIdx.x; i + ngram <= L; i += blockDim.x) {
                int match = 1;
                for (int j = 0; j < ngram - 1 && match; j++) match = h[i + j] == h[L - ngram + 1 + j];
                const int t = h[i + ngram - 1];
                if (match && t >= 0 && t < V) xe[t] = -FAT5_INF;
            }
        }
        if (threadIdx.x == 0 && L - 1 < min_new && eos >= 0 && eos < V) xe[eos] = -FAT5_INF;
        __syncthreads();
    }
}
#endif

// fat5_gen_select(const float *x[n, V], int *tok[n], int *hist[R, Lh], int *lens[R], int *done[R],
// float *score[R], const int *rows[n], long long n, int V, int Lh, int max_new, int eos, int pad,
// int do_sample, float temperature, int top_k, float top_p, unsigned long long seed): greedy or
// sampled token per entry. The top-k and top-p cut-offs are found by bisection over the ordered
// keys of the values: the kept set is every value >= the smallest key whose count (top-k) or mass
// (top-p) of strictly larger values is below the limit, which is the CPU op's set.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_gen_select(const float *x, int *tok, int *hist, int *lens, int *done, float *score,
                                           const int *rows, long long n, int V, int Lh, int max_new, int eos,
                                           int pad, int do_sample, float temperature, int top_k, float top_p,
                                           unsigned long long seed)
{
    fat5_pdl_begin();
    __shared__ float redf[32];
    __shared__ double redd[32];
    __shared__ long long redi[32];
    __shared__ int redc[32];
    for (long long e = blockIdx.x; e < n; e += gridDim.x) {
        const float *xe = x + e * (long long)V;
        const int r = rows[e];
        if (done[r]) {
            if (threadIdx.x == 0) tok[e] = pad;
            continue;
        }
        const int len = lens[r];
        unsigned int thr = 0u;   // keys >= thr are kept; key(-inf) = 0x007fffff > 0
        float m = -FAT5_INF;
        for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, do_sample ? xe[v] / temperature : xe[v]);
        m = fat5_gen_block_max(m, redf);
        if (do_sample) {
            const int k = top_k > 0 && top_k < V ? top_k : V;
            unsigned int lo = 0u, hi = fat5_gen_key(FAT5_INF);
            if (k < V) {
                while (lo < hi) {   // smallest key with count(values > key) < k
                    const unsigned int mid = lo + (hi - lo) / 2u;
                    int c = 0;
                    for (int v = threadIdx.x; v < V; v += blockDim.x) c += fat5_gen_key(xe[v] / temperature) > mid;
                    c = fat5_gen_block_count(c, redc);
                    if (c < k) hi = mid; else lo = mid + 1u;
                }
                thr = lo;
            }
            if (top_p < 1.0f) {
                double zk = 0.0;
                for (int v = threadIdx.x; v < V; v += blockDim.x) {
                    const float s = xe[v] / temperature;
                    if (fat5_gen_key(s) >= thr) zk += exp((double)s - (double)m);
                }
                zk = fat5_gen_block_sum_d(zk, redd);
                lo = thr;
                hi = fat5_gen_key(FAT5_INF);
                while (lo < hi) {   // smallest key with mass(kept values > key) < top_p of the kept mass
                    const unsigned int mid = lo + (hi - lo) / 2u;
                    double mass = 0.0;
                    for (int v = threadIdx.x; v < V; v += blockDim.x) {
                        const float s = xe[v] / temperature;
                        const unsigned int ks = fat5_gen_key(s);
                        if (ks >= thr && ks > mid) mass += exp((double)s - (double)m);
                    }
                    mass = fat5_gen_block_sum_d(mass, redd);
                    if (mass < (double)top_p * zk) hi = mid; else lo = mid + 1u;
                }
                thr = lo;
            }
        }
        double z = 0.0, bv = 0.0;
        long long bi = -1;
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            const float s = do_sample ? xe[v] / temperature : xe[v];
            if (fat5_gen_key(s) < thr) continue;
            z += exp((double)s - (double)m);
            const double key = do_sample ? (double)s + fat5_gen_gumbel(seed, r, len, v) : (double)s;
            if (bi < 0 || key > bv) bv = key, bi = v;
        }
        z = fat5_gen_block_sum_d(z, redd);
        fat5_gen_block_argmax(&bv, &bi, redd, redi);
        if (threadIdx.x == 0) {
            const int best = bi < 0 ? 0 : (int)bi;
            const float sb = do_sample ? xe[best] / temperature : xe[best];
            tok[e] = best;
            hist[(long long)r * Lh + 1 + len] = best;
            score[r] += (float)((double)sb - (double)m - log(z));
            lens[r] = len + 1;
            if (best == eos || len + 1 >= max_new) done[r] = 1;
        }
        __syncthreads();
    }
}
#endif

// fat5_gen_beam(const float *x[n, V], int *tok[n], int *src[R], int *hist[R, Lh], int *lens[R],
// float *bscore[R], float *fin_score[R], int *fin_tok[R, Lh - 1], int *fin_len[R], int *fin_flag[R],
// int *unsat[N], int *done[N], const int *rows[n], int *scratch[n, Lh], long long n, int V, int Lh,
// int K, int max_new, int eos, float length_penalty, int early_stopping): one beam-search step per
// live input (block); the 2K candidates by 2K block arg-max passes (each below the previous in
// (value, -index) order), then thread 0 does the bookkeeping exactly as fat5__cpu_gen_beam.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_gen_beam(const float *x, int *tok, int *src, int *hist, int *lens, float *bscore,
                                         float *fin_score, int *fin_tok, int *fin_len, int *fin_flag, int *unsat,
                                         int *done, const int *rows, int *scratch, long long n, int V, int Lh,
                                         int K, int max_new, int eos, float length_penalty, int early_stopping)
{
    __shared__ double redd[32];
    __shared__ long long redi[32];
    __shared__ long long cidx[2 * FAT5_BEAM_MAX];
    __shared__ float cval[2 * FAT5_BEAM_MAX];
    const long long nb = n / K;
    for (long long b = blockIdx.x; b < nb; b += gridDim.x) {
        const int i = rows[b * K] / K, r0 = i * K, t = lens[r0];
        const long long KV = (long long)K * V;
        for (int c = 0; c < 2 * K; c++) {
            double bv = 0.0;
            long long bi = -1;
            const float pv = c ? cval[c - 1] : 0.0f;
            const long long pi = c ? cidx[c - 1] : -1;
            for (long long q = threadIdx.x; q < KV; q += blockDim.x) {
                const float val = bscore[r0 + q / V] + x[(b * K + q / V) * V + q % V];
                if (c && !(val < pv || (val == pv && q > pi))) continue;   // taken already
                if (bi < 0 || (double)val > bv) bv = val, bi = q;
            }
            fat5_gen_block_argmax(&bv, &bi, redd, redi);
            if (threadIdx.x == 0) cidx[c] = bi, cval[c] = (float)bv;
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            float cnorm[2 * FAT5_BEAM_MAX], run[2 * FAT5_BEAM_MAX], mscore[3 * FAT5_BEAM_MAX];
            float ns[FAT5_BEAM_MAX], worst = FAT5_INF;
            int cstop[2 * FAT5_BEAM_MAX], taken[2 * FAT5_BEAM_MAX], next[FAT5_BEAM_MAX];
            int mfrom[3 * FAT5_BEAM_MAX], mused[3 * FAT5_BEAM_MAX], pick[FAT5_BEAM_MAX];
            int nf[FAT5_BEAM_MAX], nl[FAT5_BEAM_MAX];
            int all_fin = 1, any = 0, c, k, j;
            const double denom = pow((double)(t + 1), (double)length_penalty);
            for (k = 0; k < K; k++) all_fin &= fin_flag[r0 + k] != 0;
            for (c = 0; c < 2 * K; c++) cstop[c] = (int)(cidx[c] % V) == eos || t + 1 >= max_new;
            for (c = 0; c < 2 * K; c++) run[c] = cval[c] + (cstop[c] ? -1.0e9f : 0.0f), taken[c] = 0;
            for (k = 0; k < K; k++) {
                int bc = -1;
                for (c = 0; c < 2 * K; c++)
                    if (!taken[c] && (bc < 0 || run[c] > run[bc])) bc = c;
                taken[bc] = 1;
                next[k] = bc;
            }
            for (c = 0; c < 2 * K; c++) {
                float s = cval[c] / (float)denom;
                if (all_fin && early_stopping == 1) s += -1.0e9f;
                if (!unsat[i]) s += -1.0e9f;
                if (!(cstop[c] && c < K)) s += -1.0e9f;
                cnorm[c] = s;
            }
            for (k = 0; k < K; k++) mscore[k] = fin_score[r0 + k], mfrom[k] = -1 - k;
            for (c = 0; c < 2 * K; c++) mscore[K + c] = cnorm[c], mfrom[K + c] = c;
            for (j = 0; j < 3 * K; j++) mused[j] = 0;
            for (k = 0; k < K; k++) {
                int bj = -1;
                for (j = 0; j < 3 * K; j++)
                    if (!mused[j] && (bj < 0 || mscore[j] > mscore[bj])) bj = j;
                mused[bj] = 1;
                pick[k] = bj;
            }
            for (k = 0; k < K; k++) {
                const int f = mfrom[pick[k]];
                int *dst = scratch + (b * K + k) * (long long)Lh;
                ns[k] = mscore[pick[k]];
                if (f < 0) {
                    const int s = -1 - f;
                    nf[k] = fin_flag[r0 + s];
                    nl[k] = fin_len[r0 + s];
                    for (j = 0; j < nl[k]; j++) dst[j] = fin_tok[(long long)(r0 + s) * (Lh - 1) + j];
                } else {
                    const int beam = (int)(cidx[f] / V);
                    nf[k] = cstop[f] && f < K;
                    nl[k] = t + 1;
                    for (j = 0; j < t; j++) dst[j] = hist[(long long)(r0 + beam) * Lh + 1 + j];
                    dst[t] = (int)(cidx[f] % V);
                }
            }
            for (k = 0; k < K; k++) {
                fin_score[r0 + k] = ns[k];
                fin_flag[r0 + k] = nf[k];
                fin_len[r0 + k] = nl[k];
                for (j = 0; j < nl[k]; j++)
                    fin_tok[(long long)(r0 + k) * (Lh - 1) + j] = scratch[(b * K + k) * (long long)Lh + j];
            }
            for (k = 0; k < K; k++) {
                const int beam = (int)(cidx[next[k]] / V);
                int *dst = scratch + (b * K + k) * (long long)Lh;
                for (j = 0; j <= t; j++) dst[j] = hist[(long long)(r0 + beam) * Lh + j];
                dst[t + 1] = (int)(cidx[next[k]] % V);
                src[r0 + k] = r0 + beam;
                tok[b * K + k] = dst[t + 1];
            }
            for (k = 0; k < K; k++) {
                for (j = 0; j <= t + 1; j++)
                    hist[(long long)(r0 + k) * Lh + j] = scratch[(b * K + k) * (long long)Lh + j];
                bscore[r0 + k] = run[next[k]];
                lens[r0 + k] = t + 1;
            }
            const double L = early_stopping == 2 && length_penalty > 0.0f ? (double)max_new : (double)(t + 1);
            all_fin = 1;
            for (k = 0; k < K; k++) {
                all_fin &= fin_flag[r0 + k] != 0;
                worst = fin_score[r0 + k] < worst ? fin_score[r0 + k] : worst;
            }
            for (k = 0; k < K; k++) {
                const float best = bscore[r0] / (float)pow(L, (double)length_penalty);
                any |= best > (fin_flag[r0 + k] ? worst : -1.0e9f);
            }
            unsat[i] = unsat[i] && any;
            done[i] = !unsat[i] || (early_stopping == 1 && all_fin) || t + 1 >= max_new;
        }
        __syncthreads();
    }
}
#endif
