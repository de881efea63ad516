// ---------------------------------------------------------------------------------------------
// ops: the CPU reference (fp32, simple, obviously right). Each op fat5__cpu_<op> has a GPU twin
// fat5__gpu_<op> with the same arguments; the tests pair them.
//
// Shapes: row-major; a Linear weight W is [out, in] as in PyTorch, so y = x W^T.

// C[M,N] (+)= A[M,K] B[N,K]^T          (y = x W^T)
static void fat5__cpu_mm_nt(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                            int accumulate) {
    int64_t i, j, k;
    for (i = 0; i < M; i++) {
        const float *a = A + i * K;
        for (j = 0; j < N; j++) {
            const float *b = B + j * K;
            double s = 0;
            for (k = 0; k < K; k++) s += (double)a[k] * b[k];
            C[i * N + j] = (float)(accumulate ? C[i * N + j] + s : s);
        }
    }
}

// C[M,N] (+)= A[M,K] B[K,N]             (dx = dy W)
static void fat5__cpu_mm_nn(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                            int accumulate) {
    int64_t i, j, k;
    double *row = FAT5__CAST(double *, malloc((size_t)(N > 0 ? N : 1) * sizeof(double)));
    FAT5_ASSERT(row);
    for (i = 0; i < M; i++) {
        for (j = 0; j < N; j++) row[j] = accumulate ? C[i * N + j] : 0.0;
        for (k = 0; k < K; k++) {
            double a = A[i * K + k];
            const float *b = B + k * N;
            if (a == 0) continue;
            for (j = 0; j < N; j++) row[j] += a * b[j];
        }
        for (j = 0; j < N; j++) C[i * N + j] = (float)row[j];
    }
    free(row);
}

// C[M,N] (+)= A[K,M]^T B[K,N]           (dW += dy^T x)
static void fat5__cpu_mm_tn(float *C, const float *A, const float *B, int64_t M, int64_t N, int64_t K,
                            int accumulate) {
    int64_t i, j, k;
    double *acc = FAT5__CAST(double *, calloc((size_t)(M * N > 0 ? M * N : 1), sizeof(double)));
    FAT5_ASSERT(acc);
    for (k = 0; k < K; k++) {
        const float *a = A + k * M, *b = B + k * N;
        for (i = 0; i < M; i++) {
            double ai = a[i];
            double *c = acc + i * N;
            if (ai == 0) continue;
            for (j = 0; j < N; j++) c[j] += ai * b[j];
        }
    }
    for (i = 0; i < M * N; i++) C[i] = (float)(accumulate ? C[i] + acc[i] : acc[i]);
    free(acc);
}

// out[t] = table[tok[t]]  (rows of width D)
static void fat5__cpu_embed_fwd(float *out, const float *table, const int32_t *tok, int64_t T, int64_t D) {
    int64_t t;
    for (t = 0; t < T; t++) memcpy(out + t * D, table + (int64_t)tok[t] * D, (size_t)D * sizeof(float));
}
// dtable[tok[t]] += dout[t]
static void fat5__cpu_embed_bwd(float *dtable, const float *dout, const int32_t *tok, int64_t T, int64_t D) {
    int64_t t, j;
    for (t = 0; t < T; t++) {
        float *d = dtable + (int64_t)tok[t] * D;
        for (j = 0; j < D; j++) d[j] += dout[t * D + j];
    }
}

// T5 RMSNorm: y = w * x * r, r = 1 / sqrt(mean(x^2) + eps) (no mean subtraction). Saves r [T].
static void fat5__cpu_rmsnorm_fwd(float *y, float *r, const float *x, const float *w, int64_t T, int64_t D,
                                  float eps) {
    int64_t t, j;
    for (t = 0; t < T; t++) {
        const float *xr = x + t * D;
        double ss = 0;
        float rt;
        for (j = 0; j < D; j++) ss += (double)xr[j] * xr[j];
        rt = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
        r[t] = rt;
        for (j = 0; j < D; j++) y[t * D + j] = w[j] * (xr[j] * rt);
    }
}
// dx (+)= r g - x r^3 mean(g x) with g = w dy;  dw += sum_t dy x r
static void fat5__cpu_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                  const float *r, int64_t T, int64_t D, int accumulate) {
    int64_t t, j;
    for (t = 0; t < T; t++) {
        const float *xr = x + t * D, *dyr = dy + t * D;
        double rt = r[t], gx = 0;
        for (j = 0; j < D; j++) gx += (double)w[j] * dyr[j] * xr[j];
        gx /= (double)D;
        for (j = 0; j < D; j++) {
            double v = rt * w[j] * dyr[j] - xr[j] * rt * rt * rt * gx;
            dx[t * D + j] = (float)(accumulate ? dx[t * D + j] + v : v);
            dw[j] += (float)(dyr[j] * xr[j] * rt);
        }
    }
}

static float fat5__act_f(fat5_act a, float x) {
    switch (a) {
    case FAT5_ACT_RELU: return x > 0 ? x : 0.0f;
    case FAT5_ACT_GELU: return (float)(0.5 * x * (1.0 + erf(x / 1.4142135623730951)));
    case FAT5_ACT_GELU_TANH: {
        double u = 0.7978845608028654 * (x + 0.044715 * (double)x * x * x);
        return (float)(0.5 * x * (1.0 + tanh(u)));
    }
    case FAT5_ACT_SILU: return (float)(x / (1.0 + exp(-(double)x)));
    }
    return 0.0f;
}
static double fat5__act_df(fat5_act a, float xf) {
    double x = xf;
    switch (a) {
    case FAT5_ACT_RELU: return x > 0 ? 1.0 : 0.0;
    case FAT5_ACT_GELU:
        return 0.5 * (1.0 + erf(x / 1.4142135623730951)) + x * exp(-0.5 * x * x) * 0.3989422804014327;
    case FAT5_ACT_GELU_TANH: {
        double k = 0.7978845608028654, u = k * (x + 0.044715 * x * x * x), th = tanh(u);
        return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case FAT5_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    }
    return 0.0;
}

// h = act(a) * b  (gated; b may be NULL for the plain FFN: h = act(a))
static void fat5__cpu_act_fwd(float *h, const float *a, const float *b, int64_t n, fat5_act act) {
    int64_t i;
    for (i = 0; i < n; i++) h[i] = b ? fat5__act_f(act, a[i]) * b[i] : fat5__act_f(act, a[i]);
}
// da = dh * b * act'(a); db = dh * act(a)
static void fat5__cpu_act_bwd(float *da, float *db, const float *dh, const float *a, const float *b, int64_t n,
                              fat5_act act) {
    int64_t i;
    for (i = 0; i < n; i++) {
        double d = fat5__act_df(act, a[i]);
        if (b) {
            da[i] = (float)(dh[i] * (double)b[i] * d);
            db[i] = dh[i] * fat5__act_f(act, a[i]);
        } else {
            da[i] = (float)(dh[i] * d);
        }
    }
}

// T5 relative position bucket of rel = key_pos - query_pos, computed with fp32 logs as PyTorch does.
static int fat5__rel_bucket(int64_t rel, int bidirectional, int nb, int max_distance) {
    int offset = 0, me, large;
    int64_t n;
    if (bidirectional) {
        nb /= 2;
        if (rel > 0) offset = nb;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0;
    }
    me = nb / 2;
    if (n < me) return offset + (int)n;
    if (n >= max_distance) return offset + nb - 1;  // the formula below would clamp there too
    {
        float num = logf((float)n / (float)me);
        float den = (float)log((double)max_distance / (double)me);
        float v = num / den * (float)(nb - me);
        large = me + (int)v;
    }
    if (large > nb - 1) large = nb - 1;
    return offset + large;
}

typedef enum fat5__attn_kind {
    FAT5__ATTN_CROSS = 0,    // no bias, every key of the sequence
    FAT5__ATTN_BIDIR = 1,    // encoder self-attention, bidirectional buckets
    FAT5__ATTN_CAUSAL = 2    // decoder self-attention, causal buckets and mask
} fat5__attn_kind;

typedef struct fat5__attn_shape {
    int64_t n_seq, H, dk;        // row stride of q/k/v/o is H*dk
    const int32_t *cu_q, *cu_k;  // [n_seq + 1] offsets of queries and keys
    fat5__attn_kind kind;
    int nb, max_distance;        // bucket parameters (ignored for CROSS)
} fat5__attn_shape;

// o = softmax(q k^T + bias) v per sequence and head, no 1/sqrt(dk) scale (T5). bias[nb, H] is the
// relative-position table (NULL for CROSS). Saves lse [Tq, H].
static void fat5__cpu_attn_fwd(float *o, float *lse, const float *q, const float *k, const float *v,
                               const float *bias, const fat5__attn_shape *s) {
    int64_t sq, h, i, j, d, H = s->H, dk = s->dk, ld = H * dk;
    double *p = NULL, *acc = FAT5__CAST(double *, malloc((size_t)dk * sizeof(double)));
    int64_t maxk = 1;
    for (sq = 0; sq < s->n_seq; sq++)
        if (s->cu_k[sq + 1] - s->cu_k[sq] > maxk) maxk = s->cu_k[sq + 1] - s->cu_k[sq];
    p = FAT5__CAST(double *, malloc((size_t)maxk * sizeof(double)));
    FAT5_ASSERT(p && acc);
    for (sq = 0; sq < s->n_seq; sq++) {
        int64_t q0 = s->cu_q[sq], nq = s->cu_q[sq + 1] - q0, k0 = s->cu_k[sq], nk = s->cu_k[sq + 1] - k0;
        for (h = 0; h < H; h++) {
            for (i = 0; i < nq; i++) {
                const float *qi = q + (q0 + i) * ld + h * dk;
                int64_t jend = s->kind == FAT5__ATTN_CAUSAL ? (i + 1 < nk ? i + 1 : nk) : nk;
                double mx = -INFINITY, sum = 0;
                for (j = 0; j < jend; j++) {
                    const float *kj = k + (k0 + j) * ld + h * dk;
                    double sc = 0;
                    for (d = 0; d < dk; d++) sc += (double)qi[d] * kj[d];
                    if (bias)
                        sc += bias[(int64_t)fat5__rel_bucket(j - i, s->kind == FAT5__ATTN_BIDIR, s->nb,
                                                             s->max_distance) * H + h];
                    p[j] = sc;
                    if (sc > mx) mx = sc;
                }
                for (d = 0; d < dk; d++) acc[d] = 0;
                for (j = 0; j < jend; j++) {
                    const float *vj = v + (k0 + j) * ld + h * dk;
                    double e = exp(p[j] - mx);
                    sum += e;
                    for (d = 0; d < dk; d++) acc[d] += e * vj[d];
                }
                for (d = 0; d < dk; d++) o[(q0 + i) * ld + h * dk + d] = jend ? (float)(acc[d] / sum) : 0.0f;
                lse[(q0 + i) * H + h] = jend ? (float)(mx + log(sum)) : -INFINITY;
            }
        }
    }
    free(p);
    free(acc);
}

// Backward of fat5__cpu_attn_fwd: dq, dk, dv are written (not accumulated); dbias [nb, H] is
// accumulated (it is shared by layers). p is recomputed from lse.
static void fat5__cpu_attn_bwd(float *dq, float *dk_, float *dv, float *dbias, const float *dout,
                               const float *o, const float *lse, const float *q, const float *k, const float *v,
                               const float *bias, const fat5__attn_shape *s) {
    int64_t sq, h, i, j, d, H = s->H, dk = s->dk, ld = H * dk;
    int64_t tq = s->cu_q[s->n_seq], tk = s->cu_k[s->n_seq];
    memset(dq, 0, (size_t)(tq * ld) * sizeof(float));
    memset(dk_, 0, (size_t)(tk * ld) * sizeof(float));
    memset(dv, 0, (size_t)(tk * ld) * sizeof(float));
    for (sq = 0; sq < s->n_seq; sq++) {
        int64_t q0 = s->cu_q[sq], nq = s->cu_q[sq + 1] - q0, k0 = s->cu_k[sq], nk = s->cu_k[sq + 1] - k0;
        for (h = 0; h < H; h++) {
            for (i = 0; i < nq; i++) {
                const float *qi = q + (q0 + i) * ld + h * dk, *doi = dout + (q0 + i) * ld + h * dk;
                const float *oi = o + (q0 + i) * ld + h * dk;
                float *dqi = dq + (q0 + i) * ld + h * dk;
                int64_t jend = s->kind == FAT5__ATTN_CAUSAL ? (i + 1 < nk ? i + 1 : nk) : nk;
                double L = lse[(q0 + i) * H + h], delta = 0;
                for (d = 0; d < dk; d++) delta += (double)doi[d] * oi[d];
                for (j = 0; j < jend; j++) {
                    const float *kj = k + (k0 + j) * ld + h * dk, *vj = v + (k0 + j) * ld + h * dk;
                    float *dkj = dk_ + (k0 + j) * ld + h * dk, *dvj = dv + (k0 + j) * ld + h * dk;
                    double sc = 0, p, dp = 0, ds;
                    int bkt = 0;
                    for (d = 0; d < dk; d++) sc += (double)qi[d] * kj[d];
                    if (bias) {
                        bkt = fat5__rel_bucket(j - i, s->kind == FAT5__ATTN_BIDIR, s->nb, s->max_distance);
                        sc += bias[(int64_t)bkt * H + h];
                    }
                    p = exp(sc - L);
                    for (d = 0; d < dk; d++) dp += (double)doi[d] * vj[d];
                    ds = p * (dp - delta);
                    for (d = 0; d < dk; d++) {
                        dqi[d] += (float)(ds * kj[d]);
                        dkj[d] += (float)(ds * qi[d]);
                        dvj[d] += (float)(p * doi[d]);
                    }
                    if (bias) dbias[(int64_t)bkt * H + h] += (float)ds;
                }
            }
        }
    }
}

// Cross-entropy over rows of logits [T, V] with labels (-100 = ignored), z-loss and label
// smoothing. Per counted token: lse - (1-s) x_y - (s/V) sum_j x_j + z lse^2. Writes lse [T];
// returns the sums (ce, z part) and the count through the out-params.
static void fat5__cpu_xent_fwd(float *lse, double *ce_sum, double *z_sum, int64_t *count, const float *logits,
                               const int32_t *labels, int64_t T, int64_t V, double z, double smooth) {
    int64_t t, j;
    *ce_sum = 0;
    *z_sum = 0;
    *count = 0;
    for (t = 0; t < T; t++) {
        const float *x = logits + t * V;
        double mx = -INFINITY, s = 0, sx = 0, L;
        for (j = 0; j < V; j++) if (x[j] > mx) mx = x[j];
        for (j = 0; j < V; j++) {
            s += exp((double)x[j] - mx);
            sx += x[j];
        }
        L = mx + log(s);
        lse[t] = (float)L;
        if (labels[t] == -100) continue;
        *ce_sum += L - (1.0 - smooth) * x[labels[t]] - smooth / (double)V * sx;
        *z_sum += z * L * L;
        (*count)++;
    }
}
// dlogits = scale * (softmax (1 + 2 z lse) - (1-s) onehot(y) - s/V) for counted rows, 0 otherwise
static void fat5__cpu_xent_bwd(float *dlogits, const float *logits, const float *lse, const int32_t *labels,
                               int64_t T, int64_t V, double z, double smooth, double scale) {
    int64_t t, j;
    for (t = 0; t < T; t++) {
        const float *x = logits + t * V;
        float *dx = dlogits + t * V;
        double L = lse[t];
        if (labels[t] == -100) {
            memset(dx, 0, (size_t)V * sizeof(float));
            continue;
        }
        for (j = 0; j < V; j++) {
            double p = exp((double)x[j] - L);
            dx[j] = (float)(scale * (p * (1.0 + 2.0 * z * L) - smooth / (double)V));
        }
        dx[labels[t]] -= (float)(scale * (1.0 - smooth));
    }
}
