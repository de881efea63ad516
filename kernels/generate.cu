// kernels/generate.cu — decoding strategies on the device: Hugging Face's logits processors and
// sampling warpers, greedy and sampled token selection, and one step of (sampled) beam search with
// its hypothesis bookkeeping.
//
// The CPU twins are fat5__cpu_gen_process, fat5__cpu_gen_select and fat5__cpu_gen_beam in fat5.h
// (ops section), which document the semantics; these kernels compute the same thing. State is
// indexed by decoder row r: hist int [R, Lh] (hist[r][0 .. P) the prompt, then the generated
// tokens), lens int [R] (tokens generated). An op runs on n entries whose rows are rows[0 .. n).
// The options come by value as one fat5_gen_opts (below). Nothing here synchronises with the host,
// so a decode step can be captured in a CUDA graph. Every kernel runs blocks of 256 threads
// (FAT5_GEN_THREADS), one block per entry (per input for beam search), grid-stride over them.
// Where the CPU sorts a row (the warpers), the kernels find the same threshold by bisection over
// the order-preserving keys of the floats (fat5_gen_key), one block-wide count or sum per step.

#define FAT5_GEN_THREADS 256
#define FAT5_BEAM_MAX 32        // FAT5__BEAM_MAX in fat5.h
#define FAT5_BEAM_CAND_MAX 64   // FAT5__BEAM_CAND_MAX in fat5.h

// fat5__gen_opts of fat5.h (ops_interface.c), field for field in the same order and types (the
// addresses as 64-bit integers): the launchers pass that struct by value as the kernels' last
// parameter. Its size, FAT5_GEN_OPTS_BYTES, is checked here and, with the same number (and the
// offset of `seed`, 216, of `G`, 224, of `bidx`, 240, and of `row0`, 256), next to the launchers in fat5.h; a field added on one side must be added
// on the other.
struct fat5_gen_opts {
    unsigned long long eos, forced_eos, suppress, begin_suppress;   // int [n_eos] ... int [n_begin_suppress]
    unsigned long long seq_ids, seq_cu, seq_bias;   // int [seq_cu[n_seq]], int [n_seq + 1], float [n_seq]
    unsigned long long enc_tok, enc_cu;             // int [enc_cu[inputs]], int [inputs + 1]
    int n_eos, n_forced_eos, n_suppress, n_begin_suppress, n_seq, n_seq_bias;
    int P, rows_per_input, enc_max, pad, max_new, min_new, min_len, ngram, enc_ngram;
    float rep, enc_rep;
    int forced_bos, begin_index, decay_start;
    float decay_factor;
    int remove_invalid, log_softmax, renormalize, do_sample;
    float temperature;
    int top_k;
    float top_p, min_p, typical_p, epsilon, eta;
    int min_keep, K;
    float length_penalty;
    int early_stopping;
    unsigned long long seed;
    int G, group;   // group beam search: G groups of K beams; the ops touch group `group` alone
    float diversity;
    unsigned long long bidx, fin_bidx;   // 0, or int [R, Lh - P]: the beams' beam indices (gen_beam)
    int row0;   // the request's first decoder row: inputs, sampling draws and beam units count from it
};
#define FAT5_GEN_OPTS_BYTES 264
static_assert(sizeof(fat5_gen_opts) == FAT5_GEN_OPTS_BYTES, "fat5_gen_opts must match fat5__gen_opts");

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

// float -> unsigned key with the same order (NaN aside); -0 and +0 get one key (+0's), as the
// CPU's comparisons see them equal. fat5_gen_unkey is its inverse.
__device__ __forceinline__ unsigned int fat5_gen_key(float f)
{
    unsigned int u = __float_as_uint(f + 0.0f);   // -0 + 0 = +0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float fat5_gen_unkey(unsigned int k)
{
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
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

// ---- helpers of the processors and warpers (every thread of the block calls; all get the result) ----

// log-sum-exp of x [V] as fat5__gen_lse: max over the non-NaN values, then the sum of exp(x - max)
// in double (-inf: every value -inf)
__device__ double fat5_gen_lse(const float *x, int V, float *redf, double *redd)
{
    float m = -FAT5_INF;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, x[v]);
    m = fat5_gen_block_max(m, redf);
    if (m == -FAT5_INF) return -(double)FAT5_INF;
    double s = 0.0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += exp((double)x[v] - (double)m);
    s = fat5_gen_block_sum_d(s, redd);
    return (double)m + log(s);
}

// the entropy -sum p log p of softmax(x) over the values > -inf, lse = fat5_gen_lse(x)
__device__ double fat5_gen_entropy(const float *x, int V, double lse, double *redd)
{
    double s = 0.0;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        if (x[v] > -FAT5_INF) {
            const double lp = (double)x[v] - lse;
            s += lp * exp(lp);
        }
    return -fat5_gen_block_sum_d(s, redd);
}

// The k-th largest of x [V] (1 <= k <= V; what the CPU's descending sort puts at k - 1): the
// smallest key with fewer than k values above it, by bisection over the 32-bit keys.
__device__ float fat5_gen_kth(const float *x, int V, int k, float *redf, int *redc)
{
    if (k <= 1) {
        float m = -FAT5_INF;
        for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, x[v]);
        return fat5_gen_block_max(m, redf);
    }
    unsigned int lo = 0u, hi = 0xffffffffu;
    while (lo < hi) {
        const unsigned int mid = lo + (hi - lo) / 2u;
        int c = 0;
        for (int v = threadIdx.x; v < V; v += blockDim.x) c += fat5_gen_key(x[v]) > mid;
        c = fat5_gen_block_count(c, redc);
        if (c < k) hi = mid; else lo = mid + 1u;
    }
    return fat5_gen_unkey(lo);
}

// x[v] = -inf where x[v] < thr (every thread its own v; a barrier after)
__device__ __forceinline__ void fat5_gen_cut_below(float *x, int V, float thr)
{
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        if (x[v] < thr) x[v] = -FAT5_INF;
    __syncthreads();
}

// fat5__gen_enc_tok: token j of input i in the right-padded batch of the inputs
__device__ __forceinline__ int fat5_gen_enc_tok(const int *et, const int *ec, int pad, int i, int j)
{
    return j < ec[i + 1] - ec[i] ? et[ec[i] + j] : pad;
}

// fat5__gen_seq_bias: the sequence_bias sum for token v after h[0 .. cur), the same float
// additions in the same order (the single-token entry of v, the last one when repeated, then each
// distinct multi-token entry ending in v whose prefix ends h); *hit: some entry applies
__device__ float fat5_gen_seq_bias(int n_seq_bias, const int *ids, const int *cu, const float *bias, const int *h,
                                   int cur, int v, int *hit)
{
    float b = 0.0f;
    *hit = 0;
    for (int k = 0; k < n_seq_bias; k++) {
        if (cu[k + 1] - cu[k] != 1 || ids[cu[k]] != v) continue;
        b = bias[k], *hit = 1;
    }
    for (int k = 0; k < n_seq_bias; k++) {
        const int len = cu[k + 1] - cu[k];
        int dup = 0, match = 1;
        if (len < 2 || ids[cu[k + 1] - 1] != v || len - 1 > cur) continue;
        for (int k2 = k + 1; k2 < n_seq_bias && !dup; k2++) {
            if (cu[k2 + 1] - cu[k2] != len) continue;
            int same = 1;
            for (int j = 0; j < len && same; j++) same = ids[cu[k] + j] == ids[cu[k2] + j];
            dup = same;
        }
        if (dup) continue;
        for (int j = 0; j < len - 1 && match; j++) match = h[cur - (len - 1) + j] == ids[cu[k] + j];
        if (match) b = b + bias[k], *hit = 1;
    }
    return b;
}

__device__ __forceinline__ int fat5_gen_in(const int *ids, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == v) return 1;
    return 0;
}

// The sampling warpers of fat5__gen_warp on one row xe [V] in place (temperature, top_k, top_p,
// min_p, typical_p, epsilon, eta), each cut found without sorting:
//  top_k    the k-th largest by bisection (fat5_gen_kth), values below it removed;
//  top_p    the CPU keeps value u iff fewer than min_keep values exceed u or the mass of the values
//           above u is < top_p of the total: the smallest key with that property, by bisection;
//  min_p, epsilon, eta: the min_keep-th largest by bisection, then the probability test;
//  typical_p the CPU's cut is the shift |-log p - H| of the first token, in (shift, id) order,
//           where the running mass reaches typical_p, i.e. the smallest shift whose mass of shifts
//           <= it reaches typical_p (bisection); the first min_keep tokens of that order stay, found
//           (only when fewer than min_keep tokens are within the cut) by a bisection on the shift,
//           then one on the id among the ties.
__device__ __forceinline__ void fat5_gen_warp(float *xe, int V, const fat5_gen_opts &o, float *redf, double *redd,
                                              int *redc)
{
    const int keep = o.min_keep < V ? (o.min_keep > 1 ? o.min_keep : 1) : V;
    if (o.temperature != 1.0f) {
        for (int v = threadIdx.x; v < V; v += blockDim.x) xe[v] = xe[v] / o.temperature;
        __syncthreads();
    }
    if (o.top_k > 0) {
        const int k = o.top_k > keep ? o.top_k : keep;
        if (k < V) fat5_gen_cut_below(xe, V, fat5_gen_kth(xe, V, k, redf, redc));
    }
    if (o.top_p < 1.0f) {
        float m = -FAT5_INF;
        for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, xe[v]);
        m = fat5_gen_block_max(m, redf);
        double z = 0.0;
        for (int v = threadIdx.x; v < V; v += blockDim.x) z += exp((double)xe[v] - (double)m);
        z = fat5_gen_block_sum_d(z, redd);
        const double lim = (double)o.top_p * z;
        unsigned int lo = 0u, hi = 0xffffffffu;
        while (lo < hi) {   // smallest key u with count(> u) < keep or mass(> u) < top_p z
            const unsigned int mid = lo + (hi - lo) / 2u;
            int c = 0;
            double mass = 0.0;
            for (int v = threadIdx.x; v < V; v += blockDim.x)
                if (fat5_gen_key(xe[v]) > mid) c++, mass += exp((double)xe[v] - (double)m);
            c = fat5_gen_block_count(c, redc);
            mass = fat5_gen_block_sum_d(mass, redd);
            if (c < keep || mass < lim) hi = mid; else lo = mid + 1u;
        }
        fat5_gen_cut_below(xe, V, fat5_gen_unkey(lo));
    }
    if (o.min_p > 0.0f) {
        const double lse = fat5_gen_lse(xe, V, redf, redd);
        float mx = -FAT5_INF;
        for (int v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, xe[v]);
        mx = fat5_gen_block_max(mx, redf);
        const double lim = (double)o.min_p * exp((double)mx - lse);
        const float kth = fat5_gen_kth(xe, V, keep, redf, redc);
        for (int v = threadIdx.x; v < V; v += blockDim.x)
            if (exp((double)xe[v] - lse) < lim && xe[v] < kth) xe[v] = -FAT5_INF;
        __syncthreads();
    }
    if (o.typical_p < 1.0f) {
        const double lse = fat5_gen_lse(xe, V, redf, redd), ent = fat5_gen_entropy(xe, V, lse, redd);
#define FAT5_GEN_SHIFT(v) (xe[v] > -FAT5_INF ? (float)fabs(-((double)xe[v] - lse) - ent) : FAT5_INF)
        unsigned int lo = 0u, hi = fat5_gen_key(FAT5_INF);
        while (lo < hi) {   // smallest shift key whose mass of shifts <= it is not < typical_p
            const unsigned int mid = lo + (hi - lo) / 2u;
            double mass = 0.0;
            for (int v = threadIdx.x; v < V; v += blockDim.x)
                if (fat5_gen_key(FAT5_GEN_SHIFT(v)) <= mid) mass += exp((double)xe[v] - lse);
            mass = fat5_gen_block_sum_d(mass, redd);
            if (!(mass < (double)o.typical_p)) hi = mid; else lo = mid + 1u;
        }
        const float thr = fat5_gen_unkey(lo);   // +inf when the mass never reaches typical_p: no cut
        int within = 0;
        for (int v = threadIdx.x; v < V; v += blockDim.x) within += !(FAT5_GEN_SHIFT(v) > thr);
        within = fat5_gen_block_count(within, redc);
        unsigned int wk = 0u;   // the first `keep` tokens in (shift, id) order: key < wk, or = wk and id <= idk
        int idk = -1;           // (none when enough tokens are within the cut)
        if (within < keep) {
            unsigned int a = 0u, z = 0xffffffffu;
            while (a < z) {   // smallest shift key with at least keep shifts <= it
                const unsigned int mid = a + (z - a) / 2u;
                int c = 0;
                for (int v = threadIdx.x; v < V; v += blockDim.x) c += fat5_gen_key(FAT5_GEN_SHIFT(v)) <= mid;
                c = fat5_gen_block_count(c, redc);
                if (c >= keep) z = mid; else a = mid + 1u;
            }
            wk = a;
            int below = 0;
            for (int v = threadIdx.x; v < V; v += blockDim.x) below += fat5_gen_key(FAT5_GEN_SHIFT(v)) < wk;
            below = fat5_gen_block_count(below, redc);
            const int need = keep - below;
            int ia = 0, iz = V - 1;
            while (ia < iz) {   // smallest id with `need` ties at wk up to it
                const int mid = ia + (iz - ia) / 2;
                int c = 0;
                for (int v = threadIdx.x; v <= mid; v += blockDim.x) c += fat5_gen_key(FAT5_GEN_SHIFT(v)) == wk;
                c = fat5_gen_block_count(c, redc);
                if (c >= need) iz = mid; else ia = mid + 1;
            }
            idk = ia;
        }
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            const float s = FAT5_GEN_SHIFT(v);
            const unsigned int ks = fat5_gen_key(s);
            if (s > thr && !(ks < wk || (ks == wk && v <= idk))) xe[v] = -FAT5_INF;
        }
#undef FAT5_GEN_SHIFT
        __syncthreads();
    }
    for (int pass = 0; pass < 2; pass++) {   // epsilon, then eta
        if ((pass == 0 && !(o.epsilon > 0.0f)) || (pass == 1 && !(o.eta > 0.0f))) continue;
        const double lse = fat5_gen_lse(xe, V, redf, redd);
        double cut = (double)o.epsilon;
        if (pass == 1) {
            const double ent = fat5_gen_entropy(xe, V, lse, redd);
            cut = sqrt((double)o.eta) * exp(-ent);
            cut = cut < (double)o.eta ? cut : (double)o.eta;
        }
        const float kth = fat5_gen_kth(xe, V, keep, redf, redc);
        for (int v = threadIdx.x; v < V; v += blockDim.x)
            if (exp((double)xe[v] - lse) < cut && xe[v] < kth) xe[v] = -FAT5_INF;
        __syncthreads();
    }
}

// fat5_gen_process(float *x[n, V], const int *hist[R, Lh], const int *lens[R], const int *rows[n],
// long long n, int V, int Lh, fat5_gen_opts o): fat5__cpu_gen_process — Hugging Face's logits
// processors in transformers 5's order, the warpers when o.do_sample, then renormalize, in place.
// One block per entry; each processor is one parallel pass (over the vocabulary, or over the
// tokens, n-grams or list entries it reads: the writes of one pass go to distinct tokens or all
// write -inf), a barrier between passes.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_gen_process(float *x, const int *hist, const int *lens, const int *rows, long long n,
                                            int V, int Lh, fat5_gen_opts o)
{
    fat5_pdl_begin();
    __shared__ float redf[32];
    __shared__ double redd[32];
    __shared__ int redc[32];
    const int *eos = (const int *)o.eos, *feos = (const int *)o.forced_eos;
    const int *sup = (const int *)o.suppress, *bsup = (const int *)o.begin_suppress;
    const int *sq = (const int *)o.seq_ids, *sc = (const int *)o.seq_cu;
    const float *sb = (const float *)o.seq_bias;
    const int *et = (const int *)o.enc_tok, *ec = (const int *)o.enc_cu;
    const int tid = threadIdx.x, nt = blockDim.x;
    for (long long e = blockIdx.x; e < n; e += gridDim.x) {
        float *xe = x + e * (long long)V;
        const int r = rows[e], len = lens[r], cur = o.P + len, in = (r - o.row0) / o.rows_per_input;
        const int *h = hist + (long long)r * Lh;
        if (o.G > 1 && ((r - o.row0) / o.K) % o.G != o.group) continue;   // another group's row (the whole block skips)
        if (o.log_softmax) {
            const double lse = fat5_gen_lse(xe, V, redf, redd);
            for (int v = tid; v < V; v += nt) xe[v] = (float)((double)xe[v] - lse);
            __syncthreads();
        }
        if (o.n_seq_bias > 0) {   // sequence_bias: one thread per distinct last token
            for (int k = tid; k < o.n_seq_bias; k += nt) {
                const int last = sq[sc[k + 1] - 1];
                int first = 1, hit;
                for (int j = 0; j < k && first; j++) first = sq[sc[j + 1] - 1] != last;
                if (!first) continue;
                const float b = fat5_gen_seq_bias(o.n_seq_bias, sq, sc, sb, h, cur, last, &hit);
                if (hit && last >= 0 && last < V) xe[last] = xe[last] + b;
            }
            __syncthreads();
        }
        if (o.G > 1 && o.group > 0 && o.diversity != 0.0f) {   // Hamming diversity: one thread per earlier-group row
            const int first = o.row0 + ((r - o.row0) / (o.K * o.G)) * o.K * o.G, last = first + o.group * o.K;
#define FAT5_GEN_GROUP_TOK(q) (lens[q] == len + 1 ? hist[(long long)(q) * Lh + o.P + len] : o.pad)
            for (int r2 = first + tid; r2 < last; r2 += nt) {
                const int t = FAT5_GEN_GROUP_TOK(r2);
                int seen = 0, count = 0;
                for (int r3 = first; r3 < r2 && !seen; r3++) seen = FAT5_GEN_GROUP_TOK(r3) == t;
                if (seen || t < 0 || t >= V) continue;
                for (int r3 = r2; r3 < last; r3++) count += FAT5_GEN_GROUP_TOK(r3) == t;
                xe[t] = __fsub_rn(xe[t], __fmul_rn((float)count, o.diversity));
            }
#undef FAT5_GEN_GROUP_TOK
            __syncthreads();
        }
        if (o.enc_rep != 1.0f) {   // encoder_repetition_penalty: one thread per distinct padded input token
            const float p = (float)(1.0 / (double)o.enc_rep);
            for (int j = tid; j < o.enc_max; j += nt) {
                const int t = fat5_gen_enc_tok(et, ec, o.pad, in, j);
                int seen = 0;
                for (int i = 0; i < j && !seen; i++) seen = fat5_gen_enc_tok(et, ec, o.pad, in, i) == t;
                if (!seen && t >= 0 && t < V) xe[t] = xe[t] < 0.0f ? __fmul_rn(xe[t], p) : __fdiv_rn(xe[t], p);
            }
            __syncthreads();
        }
        if (o.rep != 1.0f) {   // repetition_penalty: one thread per distinct decoder-input token
            for (int i = tid; i < cur; i += nt) {
                const int t = h[i];
                int seen = 0;
                for (int j = 0; j < i && !seen; j++) seen = h[j] == t;
                if (!seen && t >= 0 && t < V) xe[t] = xe[t] < 0.0f ? __fmul_rn(xe[t], o.rep) : __fdiv_rn(xe[t], o.rep);
            }
            __syncthreads();
        }
        if (o.ngram > 0 && cur + 1 >= o.ngram) {   // no_repeat_ngram_size
            for (int i = tid; i + o.ngram <= cur; i += nt) {
                int match = 1;
                for (int j = 0; j < o.ngram - 1 && match; j++) match = h[i + j] == h[cur - o.ngram + 1 + j];
                const int t = h[i + o.ngram - 1];
                if (match && t >= 0 && t < V) xe[t] = -FAT5_INF;
            }
            __syncthreads();
        }
        if (o.enc_ngram > 0 && cur >= o.enc_ngram - 1) {   // encoder_no_repeat_ngram_size
            for (int i = tid; i + o.enc_ngram <= o.enc_max; i += nt) {
                int match = 1;
                for (int j = 0; j < o.enc_ngram - 1 && match; j++)
                    match = fat5_gen_enc_tok(et, ec, o.pad, in, i + j) == h[cur - o.enc_ngram + 1 + j];
                const int t = fat5_gen_enc_tok(et, ec, o.pad, in, i + o.enc_ngram - 1);
                if (match && t >= 0 && t < V) xe[t] = -FAT5_INF;
            }
            __syncthreads();
        }
        if (o.n_seq > o.n_seq_bias) {   // bad_words_ids: one thread per word
            for (int k = o.n_seq_bias + tid; k < o.n_seq; k += nt) {
                const int l = sc[k + 1] - sc[k], last = sq[sc[k + 1] - 1];
                int match = l - 1 <= cur;
                for (int j = 0; j < l - 1 && match; j++) match = h[cur - (l - 1) + j] == sq[sc[k] + j];
                if (match && last >= 0 && last < V) xe[last] = -FAT5_INF;
            }
            __syncthreads();
        }
        if (cur < o.min_len || len < o.min_new) {   // min_length, min_new_tokens: every stop token
            for (int k = tid; k < o.n_eos; k += nt)
                if (eos[k] >= 0 && eos[k] < V) xe[eos[k]] = -FAT5_INF;
            __syncthreads();
        }
        if (o.forced_bos >= 0 && cur == 1) {
            for (int v = tid; v < V; v += nt) xe[v] = v == o.forced_bos ? 0.0f : -FAT5_INF;
            __syncthreads();
        }
        if (o.n_forced_eos > 0 && len == o.max_new - 1) {
            for (int v = tid; v < V; v += nt) xe[v] = fat5_gen_in(feos, o.n_forced_eos, v) ? 0.0f : -FAT5_INF;
            __syncthreads();
        }
        if (o.remove_invalid) {
            for (int v = tid; v < V; v += nt) {
                const float a = xe[v];
                xe[v] = a != a ? 0.0f : a == FAT5_INF ? FAT5_FLT_MAX : a == -FAT5_INF ? -FAT5_FLT_MAX : a;
            }
            __syncthreads();
        }
        if (o.decay_start >= 0 && cur > o.decay_start) {   // exponential decay: one thread per distinct stop token
            const float f = (float)(pow((double)o.decay_factor, (double)(cur - o.decay_start)) - 1.0);
            for (int k = tid; k < o.n_eos; k += nt) {
                const int t = eos[k];
                int dup = 0;
                for (int j = 0; j < k && !dup; j++) dup = eos[j] == t;
                if (!dup && t >= 0 && t < V && isfinite(xe[t])) xe[t] = __fadd_rn(xe[t], __fmul_rn(fabsf(xe[t]), f));
            }
            __syncthreads();
        }
        if (o.n_suppress > 0) {
            for (int k = tid; k < o.n_suppress; k += nt)
                if (sup[k] >= 0 && sup[k] < V) xe[sup[k]] = -FAT5_INF;
            __syncthreads();
        }
        if (cur == o.begin_index && o.n_begin_suppress > 0) {
            for (int k = tid; k < o.n_begin_suppress; k += nt)
                if (bsup[k] >= 0 && bsup[k] < V) xe[bsup[k]] = -FAT5_INF;
            __syncthreads();
        }
        if (o.do_sample) fat5_gen_warp(xe, V, o, redf, redd, redc);
        if (o.renormalize) {
            const double lse = fat5_gen_lse(xe, V, redf, redd);
            for (int v = tid; v < V; v += nt) xe[v] = (float)((double)xe[v] - lse);
        }
        __syncthreads();
    }
}
#endif

// fat5_gen_select(const float *x[n, V], int *tok[n], int *hist[R, Lh], int *lens[R], int *done[R],
// float *score[R], const int *rows[n], long long n, int V, int Lh, fat5_gen_opts o):
// fat5__cpu_gen_select — the next token of each entry from its processed scores: the first largest
// x (greedy), or with o.do_sample the arg-max of x + gumbel over the finite x (the CPU's Philox
// draws, fat5_gen_gumbel); score[r] += its log_softmax(x), hist[r][P + lens[r]] = it, lens[r]++,
// done[r] when it is a stop token or lens[r] reaches max_new. A done row gets tok = pad.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_gen_select(const float *x, int *tok, int *hist, int *lens, int *done, float *score,
                                           const int *rows, long long n, int V, int Lh, fat5_gen_opts o)
{
    fat5_pdl_begin();
    __shared__ float redf[32];
    __shared__ double redd[32];
    __shared__ long long redi[32];
    const int *eos = (const int *)o.eos;
    for (long long e = blockIdx.x; e < n; e += gridDim.x) {
        const float *xe = x + e * (long long)V;
        const int r = rows[e];
        if (done[r]) {
            if (threadIdx.x == 0) tok[e] = o.pad;
            continue;
        }
        const int len = lens[r];
        const double lse = fat5_gen_lse(xe, V, redf, redd);
        double bv = 0.0;
        long long bi = -1;
        for (int v = threadIdx.x; v < V; v += blockDim.x) {
            const float s = xe[v];
            if (o.do_sample && !(s > -FAT5_INF)) continue;
            const double key = o.do_sample ? (double)s + fat5_gen_gumbel(o.seed, r - o.row0, len, v) : (double)s;
            if (key != key) continue;   // NaN never wins (the CPU keeps a NaN only at v = 0, below)
            if (bi < 0 || key > bv) bv = key, bi = v;
        }
        fat5_gen_block_argmax(&bv, &bi, redd, redi);
        if (threadIdx.x == 0) {
            int best = bi < 0 ? 0 : (int)bi;
            if (!o.do_sample && xe[0] != xe[0]) best = 0;   // the CPU's scan starts from v = 0
            tok[e] = best;
            hist[(long long)r * Lh + o.P + len] = best;
            score[r] += (float)((double)xe[best] - lse);
            lens[r] = len + 1;
            if (fat5_gen_in(eos, o.n_eos, best) || len + 1 >= o.max_new) done[r] = 1;
        }
        __syncthreads();
    }
}
#endif

// fat5_gen_beam(const float *x[n, V], int *tok[n], int *src[R], int *hist[R, Lh], int *lens[R],
// float *bscore[R], float *fin_score[R], int *fin_tok[R, Lh - P], int *fin_len[R], int *fin_flag[R],
// int *unsat[N], int *done[N], const int *rows[n], int *scratch[n, Lh], long long n, int V, int Lh,
// fat5_gen_opts o): fat5__cpu_gen_beam — one (sampled) beam-search step per live input (block).
// The C = max(2, n_eos + 1) K candidates: each thread keeps its own best C of (key, flat index)
// (key = acc, or acc + gumbel over the finite acc when sampling) in order, then C block arg-max
// rounds over the threads' heads give the CPU's order (larger key, then smaller index); thread 0
// does the bookkeeping in shared memory with the CPU's float operations, and the block copies the
// histories.
#if FAT5_IN_PART(0)
extern "C" __global__ void fat5_gen_beam(const float *x, int *tok, int *src, int *hist, int *lens, float *bscore,
                                         float *fin_score, int *fin_tok, int *fin_len, int *fin_flag, int *unsat,
                                         int *done, const int *rows, int *scratch, long long n, int V, int Lh,
                                         fat5_gen_opts o)
{
    __shared__ double redd[32];
    __shared__ long long redi[32];
    __shared__ long long cidx[FAT5_BEAM_CAND_MAX];
    __shared__ float cval[FAT5_BEAM_CAND_MAX], run[FAT5_BEAM_CAND_MAX], cnorm[FAT5_BEAM_CAND_MAX];
    __shared__ int cstop[FAT5_BEAM_CAND_MAX], taken[FAT5_BEAM_CAND_MAX];
    __shared__ float mscore[FAT5_BEAM_MAX + FAT5_BEAM_CAND_MAX];
    __shared__ int mfrom[FAT5_BEAM_MAX + FAT5_BEAM_CAND_MAX], mused[FAT5_BEAM_MAX + FAT5_BEAM_CAND_MAX];
    __shared__ int next[FAT5_BEAM_MAX], pick[FAT5_BEAM_MAX], nf[FAT5_BEAM_MAX], nl[FAT5_BEAM_MAX];
    __shared__ float ns[FAT5_BEAM_MAX];
    const int *eos = (const int *)o.eos;
    const int K = o.K, C = (o.n_eos > 1 ? o.n_eos + 1 : 2) * o.K, P = o.P, F = Lh - o.P;
    const float lp = o.length_penalty;
    const long long nb = n / K;
    for (long long b = blockIdx.x; b < nb; b += gridDim.x) {
        const int i = (rows[b * K] - o.row0) / K, r0 = o.row0 + i * K, t = lens[r0];
        if (o.G > 1 && i % o.G != o.group) continue;   // a unit of another group (the whole block skips)
        // 1. this thread's best C candidates, (key desc, index asc); its indices ascend, so a tie
        // with a kept one loses
        double lk[FAT5_BEAM_CAND_MAX];
        long long lq[FAT5_BEAM_CAND_MAX];
        int ln = 0, hd = 0;
        for (int k = 0; k < K; k++) {
            const float bs = bscore[r0 + k];
            const float *xk = x + (b * K + k) * (long long)V;
            for (int v = threadIdx.x; v < V; v += blockDim.x) {
                const float val = bs + xk[v];
                double key = (double)val;
                if (o.do_sample) {
                    if (!(val > -FAT5_INF)) continue;
                    key = (double)val + fat5_gen_gumbel(o.seed, r0 - o.row0 + k, t, v);
                }
                if (key != key || (ln == C && !(key > lk[C - 1]))) continue;
                int j = ln < C ? ln++ : C - 1;
                for (; j > 0 && lk[j - 1] < key; j--) lk[j] = lk[j - 1], lq[j] = lq[j - 1];
                lk[j] = key, lq[j] = (long long)k * V + v;
            }
        }
        for (int c = 0; c < C; c++) {   // merge: the block's best remaining head, C times
            double bv = hd < ln ? lk[hd] : 0.0;
            long long bi = hd < ln ? lq[hd] : -1;
            fat5_gen_block_argmax(&bv, &bi, redd, redi);
            if (bi >= 0 && hd < ln && lq[hd] == bi) hd++;
            if (threadIdx.x == 0) {
                const long long q = bi < 0 ? 0 : bi;   // none left (sampling): index 0, as the CPU
                cidx[c] = q;
                cval[c] = bscore[r0 + q / V] + x[(b * K + q / V) * V + q % V];
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int c, k, j, all_fin = 1;
            const double denom = pow((double)(t + 1), (double)lp);
            for (k = 0; k < K; k++) all_fin &= fin_flag[r0 + k] != 0;
            if (o.do_sample)   // ordered by acc, descending (insertion sort: stable)
                for (c = 1; c < C; c++) {
                    const float v = cval[c];
                    const long long q = cidx[c];
                    for (j = c - 1; j >= 0 && cval[j] < v; j--) cval[j + 1] = cval[j], cidx[j + 1] = cidx[j];
                    cval[j + 1] = v, cidx[j + 1] = q;
                }
            for (c = 0; c < C; c++) cstop[c] = fat5_gen_in(eos, o.n_eos, (int)(cidx[c] % V)) || t + 1 >= o.max_new;
            // 2. the next running beams: the K best candidates, those ending in a stop token moved down
            // (at max_new too, when the running beams are no longer used, so that they are Hugging Face's)
            for (c = 0; c < C; c++)
                run[c] = cval[c] + (fat5_gen_in(eos, o.n_eos, (int)(cidx[c] % V)) ? -1.0e9f : 0.0f), taken[c] = 0;
            for (k = 0; k < K; k++) {
                int bc = -1;
                for (c = 0; c < C; c++)
                    if (!taken[c] && (bc < 0 || run[c] > run[bc])) bc = c;
                taken[bc] = 1;
                next[k] = bc;
            }
            // 3. the finished slots merged with the candidates that stopped among the first K
            for (c = 0; c < C; c++) {
                float s = (float)(cval[c] / (float)denom);
                if (all_fin && o.early_stopping == 1) s += -1.0e9f;
                if (!unsat[i]) s += -1.0e9f;
                if (!(cstop[c] && c < K)) s += -1.0e9f;
                cnorm[c] = s;
            }
            for (k = 0; k < K; k++) mscore[k] = fin_score[r0 + k], mfrom[k] = -1 - k;
            for (c = 0; c < C; c++) mscore[K + c] = cnorm[c], mfrom[K + c] = c;
            for (j = 0; j < K + C; j++) mused[j] = 0;
            for (k = 0; k < K; k++) {
                int bj = -1;
                for (j = 0; j < K + C; j++)
                    if (!mused[j] && (bj < 0 || mscore[j] > mscore[bj])) bj = j;
                mused[bj] = 1;
                pick[k] = mfrom[bj];
                ns[k] = mscore[bj];
            }
            for (k = 0; k < K; k++) {
                const int f = pick[k];
                if (f < 0) nf[k] = fin_flag[r0 - 1 - f], nl[k] = fin_len[r0 - 1 - f];
                else nf[k] = cstop[f] && f < K, nl[k] = t + 1;
            }
        }
        __syncthreads();
        // 3 (cont.): the new slots' tokens into scratch, then into fin_tok (a slot may move)
        for (int k = 0; k < K; k++) {
            const int f = pick[k];
            int *dst = scratch + (b * K + k) * (long long)Lh;
            if (f < 0) {
                const int *s = fin_tok + (long long)(r0 - 1 - f) * F;
                for (int j = threadIdx.x; j < nl[k]; j += blockDim.x) dst[j] = s[j];
            } else {
                const int beam = (int)(cidx[f] / V);
                const int *s = hist + (long long)(r0 + beam) * Lh + P;
                for (int j = threadIdx.x; j < t; j += blockDim.x) dst[j] = s[j];
                if (threadIdx.x == 0) dst[t] = (int)(cidx[f] % V);
            }
        }
        __syncthreads();
        for (int k = 0; k < K; k++) {
            const int *s = scratch + (b * K + k) * (long long)Lh;
            int *dst = fin_tok + (long long)(r0 + k) * F;
            for (int j = threadIdx.x; j < nl[k]; j += blockDim.x) dst[j] = s[j];
        }
        if (threadIdx.x == 0)
            for (int k = 0; k < K; k++) fin_score[r0 + k] = ns[k], fin_flag[r0 + k] = nf[k], fin_len[r0 + k] = nl[k];
        __syncthreads();
        if (o.bidx) {   // the same moves for the slots' beam indices (the beam's row at each step)
            const int *bx = (const int *)o.bidx;
            int *fbx = (int *)o.fin_bidx;
            for (int k = 0; k < K; k++) {
                const int f = pick[k];
                int *dst = scratch + (b * K + k) * (long long)Lh;
                if (f < 0) {
                    const int *s = fbx + (long long)(r0 - 1 - f) * F;
                    for (int j = threadIdx.x; j < nl[k]; j += blockDim.x) dst[j] = s[j];
                } else {
                    const int beam = (int)(cidx[f] / V);
                    const int *s = bx + (long long)(r0 + beam) * F;
                    for (int j = threadIdx.x; j < t; j += blockDim.x) dst[j] = s[j];
                    if (threadIdx.x == 0) dst[t] = r0 + beam;
                }
            }
            __syncthreads();
            for (int k = 0; k < K; k++) {
                const int *s = scratch + (b * K + k) * (long long)Lh;
                int *dst = fbx + (long long)(r0 + k) * F;
                for (int j = threadIdx.x; j < nl[k]; j += blockDim.x) dst[j] = s[j];
            }
            __syncthreads();
        }
        // 2 (cont.): gather the running histories (prompt and generated tokens), then write them back
        for (int k = 0; k < K; k++) {
            const int beam = (int)(cidx[next[k]] / V);
            const int *s = hist + (long long)(r0 + beam) * Lh;
            int *dst = scratch + (b * K + k) * (long long)Lh;
            for (int j = threadIdx.x; j < P + t; j += blockDim.x) dst[j] = s[j];
            if (threadIdx.x == 0) {
                dst[P + t] = (int)(cidx[next[k]] % V);
                src[r0 + k] = r0 + beam;
                tok[b * K + k] = dst[P + t];
            }
        }
        __syncthreads();
        for (int k = 0; k < K; k++) {
            const int *s = scratch + (b * K + k) * (long long)Lh;
            int *dst = hist + (long long)(r0 + k) * Lh;
            for (int j = threadIdx.x; j <= P + t; j += blockDim.x) dst[j] = s[j];
        }
        if (o.bidx) {   // the running beams' beam indices, gathered the same way
            int *bx = (int *)o.bidx;
            __syncthreads();
            for (int k = 0; k < K; k++) {
                const int beam = (int)(cidx[next[k]] / V);
                const int *s = bx + (long long)(r0 + beam) * F;
                int *dst = scratch + (b * K + k) * (long long)Lh;
                for (int j = threadIdx.x; j < t; j += blockDim.x) dst[j] = s[j];
                if (threadIdx.x == 0) dst[t] = r0 + beam;
            }
            __syncthreads();
            for (int k = 0; k < K; k++) {
                const int *s = scratch + (b * K + k) * (long long)Lh;
                int *dst = bx + (long long)(r0 + k) * F;
                for (int j = threadIdx.x; j <= t; j += blockDim.x) dst[j] = s[j];
            }
        }
        if (threadIdx.x == 0) {
            for (int k = 0; k < K; k++) bscore[r0 + k] = run[next[k]], lens[r0 + k] = t + 1;
            // 4. Hugging Face's early-stop heuristic and the input's end
            const double L = o.early_stopping == 2 && lp > 0.0f ? (double)o.max_new : (double)(t + 1);
            int all_fin = 1, any = 0;
            float worst = FAT5_INF;
            for (int k = 0; k < K; k++) {
                all_fin &= fin_flag[r0 + k] != 0;
                worst = fin_score[r0 + k] < worst ? fin_score[r0 + k] : worst;
            }
            for (int k = 0; k < K; k++) {
                const float best = (float)(bscore[r0] / (float)pow(L, (double)lp));
                any |= best > (fin_flag[r0 + k] ? worst : -1.0e9f);
            }
            unsat[i] = unsat[i] && any;
            done[i] = !unsat[i] || (o.early_stopping == 1 && all_fin) || t + 1 >= o.max_new;
        }
        __syncthreads();
    }
}
#endif
