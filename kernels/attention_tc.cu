// kernels/attention_tc.cu — the attention forward on tensor cores: bf16 q, k, v (mma.sync
// m16n8k16, fp32 accumulation), every case fat5_attn_fwd has (masks, position schemes, patterns,
// packed sequences), the same arguments and results (o, and the log-sum-exp the backward reads).
//
// Only the bf16 program has a body (the fp32 one keeps the exact FMA kernels of attention.cu,
// which are also this kernel's oracle on the GPU); the launcher takes it for bf16 activations when
// dk is a multiple of 8 up to 128 and q, k, v, o are 16-byte aligned (fat5__gpu_attn_fwd).
//
// A block: 4 warps, BM = 64 MT query rows (packed; they may span sequences, as in the tiled FMA
// kernel), each warp MT m-tiles of 16 rows. It walks the same key tiles as fat5_attn_fwd_tiled (the
// range from its first row's first key to its last row's last; PAT: the prefix, the window hull,
// the transient-global rows), 64 keys a tile, double-buffered in shared memory by cp.async:
//   - S = Q K^T: Q's fragments stay in registers for the whole block (ldmatrix once); K's come
//     from shared memory with ldmatrix (rows padded by 16 bytes: conflict-free);
//   - bias and mask per score in fp32 on the accumulators, on branches uniform over a warp: a tile
//     every row of the warp sees whole (no pattern) takes its bias without masks. T5 buckets: the
//     head's bias by distance rel in [-M, M], dtab[rel + M] (M = max(max_distance, 1)), built once
//     per block from the bucket table (a distance beyond M has the bucket of +-M), so a score costs
//     one shared load, and a tile whose distances all lie beyond +-M for every row of the warp has
//     one bias for all its scores, folded into the exponent below. Any other tile (sequence
//     boundaries, causal diagonals, patterns, global keys) masks every score;
//   - online softmax in base 2 (ex2.approx on s log2(e) - m log2(e)), the rescaling of the
//     accumulators skipped when no row of the warp has a new maximum; P rounded to bf16 straight
//     from the accumulators into the A fragments of P V (V by ldmatrix.trans);
//   - with dropout (training, dr.thresh > 0) P is multiplied by the mask (fat5_attn_drop_row_quad:
//     query row, key row of the packed buffers) after l has summed it, so that o = (P m) V / l.
// The log-sum-exp stored is m + ln(l), natural log, as the FMA kernels store it. A query with no
// keys gets o = 0 and lse = -inf.
// Rounding against the fp32 kernels: q k^T is summed in another order (fp32), P is rounded to bf16
// before P V (relative 2^-8 per probability, the row's maximum, 1, exactly; l sums the unrounded
// values), exp is ex2.approx (2 ulp); o is rounded to bf16 as before.

#define FAT5_TC_THREADS 128

#if FAT5_ACT_BF16

__device__ __forceinline__ unsigned fat5_tc_saddr(const void *p)
{
    unsigned r;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
    return r;
}

// 16 bytes global -> shared, asynchronously; bytes 0 writes zeros and reads nothing
__device__ __forceinline__ void fat5_tc_cp16(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void fat5_tc_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void fat5_tc_wait_all(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void fat5_tc_ldsm4(unsigned a, unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}
__device__ __forceinline__ void fat5_tc_ldsm4t(unsigned a, unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}

// c += a b (m16 n8 k16, bf16 in, fp32 accumulate)
__device__ __forceinline__ void fat5_tc_mma(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// two floats -> bf16x2 (lo in the low half), round to nearest even
__device__ __forceinline__ unsigned fat5_tc_pack(float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

__device__ __forceinline__ float fat5_tc_ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Rows [0, R) of a shared tile (row stride DKP + 8 elements) from n rows at src (row stride ld
// elements, dk <= DKP columns, dk % 8 == 0, 16-byte aligned); the rest zero. `safe` is any valid
// address (the source of the zero copies, never read).
template <int R, int DKP>
__device__ __forceinline__ void fat5_tc_load(unsigned dst, const act_t *src, long long ld, int n, int dk,
                                             const act_t *safe)
{
    const int C = DKP / 8, RS = FAT5_TC_THREADS / C;  // chunks of a row; rows a pass
    const int c = threadIdx.x % C, r0 = threadIdx.x / C;  // this thread's chunk, first row
    const bool cok = c * 8 < dk;
    const act_t *p = src + r0 * ld + c * 8;
    dst += (unsigned)(r0 * (DKP + 8) + c * 8) * 2u;
#pragma unroll
    for (int it = 0; it < R / RS; it++) {
        const bool ok = cok && r0 + it * RS < n;
        fat5_tc_cp16(dst + (unsigned)(it * RS * (DKP + 8)) * 2u, ok ? (const void *)(p + it * RS * ld) : safe,
                     ok ? 16 : 0);
    }
}

// The key tiles of a block: phase 0 the prefix [ra0, rb0), 1 the hull (or all of the keys without
// a pattern) [ra1, rb1), 2 the global rows [ra2, rb2); (ph, kt) moves to the next tile start,
// skipping empty phases. ph == 3: done.
__device__ __forceinline__ void fat5_tc_next(int &ph, int &kt, bool step, int ra0, int rb0, int ra1, int rb1,
                                             int ra2, int rb2, int nph)
{
    if (step) kt += 64;
    while (ph < nph && kt >= (ph == 0 ? rb0 : ph == 1 ? rb1 : rb2)) {
        ph++;
        kt = ph == 1 ? ra1 : ra2;
    }
    if (ph >= nph) ph = 3;
}

template <int DKP, int MT, int PE, bool PAT, bool DROP>
__device__ __forceinline__ void fat5_attn_fwd_tc_impl(act_t *o, float *lse, const act_t *q, const act_t *k,
                                                      const act_t *v, const float *bias, const int *lut,
                                                      const int *cu_q, const int *cu_k, const int *q_seq,
                                                      long long Tq, int H, int dk, int kind, int nb, int md, int g,
                                                      const int *cu_g, const fat5_dropp &dr)
{
    const int BM = 64 * MT, SR = DKP + 8, KS = DKP / 16, NO = DKP / 8;
    const float LOG2E = 1.4426950408889634f;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gr = lane >> 2, tq = lane & 3;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    act_t *Qs = (act_t *)fat5_smem;     // [BM][SR]
    act_t *Ks = Qs + BM * SR;           // [2][64][SR]
    act_t *Vs = Ks + 2 * 64 * SR;       // [2][64][SR]
    float *dtab = (float *)(Vs + 2 * 64 * SR);
    const bool TG = PAT && PE == FAT5_PE_TABLE;  // transient-global keys possible
    // T5's bias by distance, dtab[rel + M] for rel in [-M, M] with M = max(md, 1): every distance
    // beyond has the bucket of +-M (with md 0 the bidirectional buckets still tell rel > 0 apart)
    const int M = md > 0 ? md : 1, tabn = PE == FAT5_PE_TABLE && bias ? 2 * M + 1 : 0;
    fat5_pb pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, (BM + 4 * 64) * SR / 2 + tabn, 0);
    if (TG) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    for (int x = threadIdx.x; x < tabn; x += blockDim.x)
        dtab[x] = pb.bias[fat5_attn_bucket(x - M, pb.kind, pb.lut, nb, md) * pb.bstride];

    const long long t0 = (long long)(gridDim.x - 1 - blockIdx.x) * BM;  // the longest tiles of a causal
    const int nrow = (int)min((long long)BM, Tq - t0);                  // sequence first
    // this thread's rows rr = 2 mt + half: packed row t0 + w 16 MT + 16 mt + 8 half + gr; it sees keys
    // [klo + (vis == 2 ? ip : 0), khi) (klo its sequence's first key, ip its position); in the
    // global phase [gklo, gkhi) with bucket origin gip
    int klo[2 * MT], khi[2 * MT], ip[2 * MT], gklo[2 * MT], gkhi[2 * MT], gip[2 * MT];
    float m[2 * MT], l[2 * MT];
#pragma unroll
    for (int rr = 0; rr < 2 * MT; rr++) {
        const long long t = t0 + w * 16 * MT + 8 * rr + gr;
        klo[rr] = khi[rr] = ip[rr] = gklo[rr] = gkhi[rr] = gip[rr] = 0;
        m[rr] = -FAT5_INF;
        l[rr] = 0.0f;
        if (t < Tq) {
            const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
            klo[rr] = k0;
            khi[rr] = k0 + (vis == 1 ? min(i + 1, nk) : nk);
            ip[rr] = i;
            if (TG && pt.tg) {
                const int g0 = cu_g[s], G = cu_g[s + 1] - g0;
                gklo[rr] = g0;
                gkhi[rr] = g0 + G;
                gip[rr] = G > 0 ? g0 + fat5_pat_block(pt, i, G) : 0;
            }
        }
    }
    int kstart, kend, ps, pe, gs, ge;
    fat5_attn_tile_keys<PAT>(pt, vis, cu_q, cu_k, q_seq, cu_g, t0, nrow, ps, pe, kstart, kend, gs, ge);
    const int nph = TG && pt.tg ? 3 : 2;
    int ph = PAT ? 0 : 1, kt = PAT ? ps : kstart;
    fat5_tc_next(ph, kt, false, ps, pe, kstart, kend, gs, ge, nph);

    const unsigned sq = fat5_tc_saddr(Qs), sk = fat5_tc_saddr(Ks), sv = fat5_tc_saddr(Vs);
    const unsigned tileb = 64u * SR * 2u;  // bytes of one K or V buffer
    fat5_tc_load<BM, DKP>(sq, q + t0 * ld + (long long)h * dk, ld, nrow, dk, q);
    if (ph < 3) {
        const int ke = ph == 0 ? pe : ph == 1 ? kend : ge;
        fat5_tc_load<64, DKP>(sk, k + (long long)kt * ld + (long long)h * dk, ld, min(64, ke - kt), dk, k);
        fat5_tc_load<64, DKP>(sv, v + (long long)kt * ld + (long long)h * dk, ld, min(64, ke - kt), dk, v);
    }
    fat5_tc_commit();
    fat5_tc_wait_all();
    __syncthreads();  // Q, the first K/V tile and dtab are in shared memory
    unsigned qf[MT][KS][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
            fat5_tc_ldsm4(sq + (unsigned)((w * 16 * MT + mt * 16 + (lane & 15)) * SR + ks * 16 + (lane >> 4) * 8) * 2u,
                          qf[mt][ks][0], qf[mt][ks][1], qf[mt][ks][2], qf[mt][ks][3]);
    float acc[MT][NO][4];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < NO; n++) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;

    // this lane's row and column in the ldmatrix tiles of K (keys x dims) and V (transposed)
    const unsigned koff = (unsigned)(((lane & 7) + (lane >> 4) * 8) * SR + ((lane >> 3) & 1) * 8) * 2u;
    const unsigned voff = (unsigned)(((lane & 7) + ((lane >> 3) & 1) * 8) * SR + (lane >> 4) * 8) * 2u;
    int buf = 0;
    bool first = true;
    while (ph < 3) {
        const int ke = ph == 0 ? pe : ph == 1 ? kend : ge, kt0 = kt, cph = ph;
        const bool glob = TG && cph == 2;
        if (!first) {
            fat5_tc_wait_all();
            __syncthreads();  // this tile has landed; everyone is done with the other buffer
        }
        first = false;
        fat5_tc_next(ph, kt, true, ps, pe, kstart, kend, gs, ge, nph);
        if (ph < 3) {  // the next tile, into the other buffer, while this one is computed
            const int ne = ph == 0 ? pe : ph == 1 ? kend : ge;
            const unsigned off = (unsigned)(buf ^ 1) * tileb;
            fat5_tc_load<64, DKP>(sk + off, k + (long long)kt * ld + (long long)h * dk, ld, min(64, ne - kt), dk, k);
            fat5_tc_load<64, DKP>(sv + off, v + (long long)kt * ld + (long long)h * dk, ld, min(64, ne - kt), dk, v);
        }
        fat5_tc_commit();
        const unsigned kb = sk + (unsigned)buf * tileb, vb = sv + (unsigned)buf * tileb;

        // a tile no row of the warp sees is skipped (m, l and acc stay as they are): every row's keys
        // [lo, hi) miss it, or (a window without a prefix) its window does
        bool rnone = true;
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) {
            int wl = glob ? gklo[rr] : klo[rr] + (vis == 2 ? ip[rr] : 0), wh = glob ? gkhi[rr] : khi[rr];
            if (PAT && !glob && pt.pre == 0) {
                wl = max(wl, klo[rr] + ip[rr] - pt.rad);
                wh = min(wh, klo[rr] + ip[rr] + pt.rad + 1);
            }
            rnone = rnone && (wh <= kt0 || wl >= kt0 + 64 || wl >= wh);
        }
        if (__all_sync(FAT5_FULL_MASK, rnone)) {
            buf ^= 1;
            continue;
        }
        float s[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int n = 0; n < 8; n++) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int np = 0; np < 4; np++) {
                unsigned b0, b1, b2, b3;
                fat5_tc_ldsm4(kb + koff + (unsigned)(np * 16 * SR + ks * 16) * 2u, b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    fat5_tc_mma(s[mt][2 * np], qf[mt][ks], b0, b1);
                    fat5_tc_mma(s[mt][2 * np + 1], qf[mt][ks], b2, b3);
                }
            }

        // bias and mask. Per warp (uniform branches): a tile every row of the warp sees whole
        // (no pattern) takes the bias without masks: T5's as one constant when every distance lies
        // beyond +-md for every row (one value per head), else from dtab; ALiBi in closed form.
        // Any other tile masks each score.
        int lo[2 * MT], hi[2 * MT], base[2 * MT];  // keys [lo, hi) visible; key u's distance u - base
        bool rfull = true, far_hi = true, far_lo = true;
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) {
            if (glob) {
                lo[rr] = gklo[rr];
                hi[rr] = gkhi[rr];
                base[rr] = gip[rr];
            } else {
                lo[rr] = klo[rr] + (vis == 2 ? ip[rr] : 0);
                hi[rr] = khi[rr];
                base[rr] = klo[rr] + ip[rr];
            }
            rfull = rfull && kt0 >= lo[rr] && kt0 + 64 <= hi[rr];
            far_hi = far_hi && kt0 - base[rr] >= M;
            far_lo = far_lo && kt0 + 63 - base[rr] <= -M;
        }
        const bool wfull = !PAT && __all_sync(FAT5_FULL_MASK, rfull);
        float cadd = 0.0f;  // a bias common to every score of the tile (T5's beyond max distance)
        if (wfull && (PE == FAT5_PE_TABLE || PE == FAT5_PE_ALIBI)) {
            if (PE == FAT5_PE_TABLE && tabn) {
                const bool chi = __all_sync(FAT5_FULL_MASK, far_hi), clo = __all_sync(FAT5_FULL_MASK, far_lo);
                if (chi || clo) {
                    cadd = dtab[chi ? 2 * M : 0];  // added in the softmax below
                } else {
#pragma unroll
                    for (int rr = 0; rr < 2 * MT; rr++) {
                        const float *dt = dtab + M;
                        const int r0 = kt0 + 2 * tq - base[rr];  // distance of this thread's first key
#pragma unroll
                        for (int n = 0; n < 8; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++)
                                s[rr >> 1][n][2 * (rr & 1) + e] += dt[min(max(r0 + n * 8 + e, -M), M)];
                    }
                }
            } else if (PE == FAT5_PE_ALIBI) {
#pragma unroll
                for (int rr = 0; rr < 2 * MT; rr++) {
                    const int r0 = kt0 + 2 * tq - base[rr];
#pragma unroll
                    for (int n = 0; n < 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++)
                            s[rr >> 1][n][2 * (rr & 1) + e] -= pb.slope * fabsf((float)(r0 + n * 8 + e));
                }
            }
        } else {
#pragma unroll
            for (int rr = 0; rr < 2 * MT; rr++) {
                const int mt = rr >> 1, hf = rr & 1;
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        float &x = s[mt][n][2 * hf + e];
                        const int u = kt0 + 2 * tq + n * 8 + e, rel = u - base[rr];
                        bool ok = u >= lo[rr] && u < hi[rr];
                        if (PAT && !glob) ok = ok && u < ke && fat5_pat_sees(pt, ip[rr], u - klo[rr]);
                        if (!ok) {
                            x = -FAT5_INF;
                        } else if (glob) {
                            if (pb.gbias) x += pb.gbias[fat5_attn_bucket(rel, 1, pb.lut, nb, md) * pb.gstride];
                        } else if (PE == FAT5_PE_TABLE) {
                            if (tabn) x += dtab[min(max(rel, -M), M) + M];
                        } else if (PE == FAT5_PE_ALIBI) {
                            x -= pb.slope * fabsf((float)rel);
                        } else {
                            x += fat5_pb_bias<PE>(pb, ip[rr], u - klo[rr]);
                        }
                    }
            }
        }

        // the online softmax: every row's maximum first (independent chains), then the weights
        float mx[2 * MT];
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) {
            const int mt = rr >> 1, hf = rr & 1;
            float a = fmaxf(s[mt][0][2 * hf], s[mt][0][2 * hf + 1]), b = fmaxf(s[mt][1][2 * hf], s[mt][1][2 * hf + 1]);
#pragma unroll
            for (int n = 2; n < 8; n += 2) {
                a = fmaxf(a, fmaxf(s[mt][n][2 * hf], s[mt][n][2 * hf + 1]));
                b = fmaxf(b, fmaxf(s[mt][n + 1][2 * hf], s[mt][n + 1][2 * hf + 1]));
            }
            mx[rr] = fmaxf(a, b);
        }
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(FAT5_FULL_MASK, mx[rr], 1));
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(FAT5_FULL_MASK, mx[rr], 2)) + cadd;
        // the rescaling of acc and l is skipped when no row of the warp has a new maximum (corr = 1)
        bool grow = false;
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) grow = grow || mx[rr] > m[rr];
        grow = __any_sync(FAT5_FULL_MASK, grow);
#pragma unroll
        for (int rr = 0; rr < 2 * MT; rr++) {
            const int mt = rr >> 1, hf = rr & 1;
            const float mnew = fmaxf(m[rr], mx[rr]);
            const float ms = mnew == -FAT5_INF ? 0.0f : mnew * LOG2E, off = fmaf(cadd, LOG2E, -ms);
            if (grow) {
                const float corr = mnew == -FAT5_INF ? 1.0f : fat5_tc_ex2(m[rr] * LOG2E - ms);  // 0 while m is -inf
                l[rr] *= corr;
#pragma unroll
                for (int n = 0; n < NO; n++) {
                    acc[mt][n][2 * hf] *= corr;
                    acc[mt][n][2 * hf + 1] *= corr;
                }
            }
            m[rr] = mnew;
            float ls0 = 0.0f, ls1 = 0.0f;
#pragma unroll
            for (int n = 0; n < 8; n++) {
                float &x0 = s[mt][n][2 * hf], &x1 = s[mt][n][2 * hf + 1];
                x0 = fat5_tc_ex2(fmaf(x0, LOG2E, off));
                x1 = fat5_tc_ex2(fmaf(x1, LOG2E, off));
                ls0 += x0;
                ls1 += x1;
            }
            l[rr] += ls0 + ls1;
        }
        // dropout of the probabilities (training): what reaches V is P m; l keeps the softmax's
        if (DROP && dr.thresh) {
#pragma unroll
            for (int rr = 0; rr < 2 * MT; rr++)
                fat5_attn_drop_row_quad<8>(dr, dr.stream + h, t0 + w * 16 * MT + 8 * rr + gr, kt0, &s[rr >> 1][0][0],
                                           2 * (rr & 1));
        }

        // acc += P V, 16 keys a step
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            unsigned a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                a[mt][0] = fat5_tc_pack(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = fat5_tc_pack(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = fat5_tc_pack(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = fat5_tc_pack(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < NO / 2; dp++) {
                unsigned b0, b1, b2, b3;
                fat5_tc_ldsm4t(vb + voff + (unsigned)(kk * 16 * SR + dp * 16) * 2u, b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    fat5_tc_mma(acc[mt][2 * dp], a[mt], b0, b1);
                    fat5_tc_mma(acc[mt][2 * dp + 1], a[mt], b2, b3);
                }
            }
        }
        buf ^= 1;
    }

#pragma unroll
    for (int rr = 0; rr < 2 * MT; rr++) {
        const int mt = rr >> 1, hf = rr & 1;
        float ls = l[rr];
        ls += __shfl_xor_sync(FAT5_FULL_MASK, ls, 1);
        ls += __shfl_xor_sync(FAT5_FULL_MASK, ls, 2);
        const long long t = t0 + w * 16 * MT + 8 * rr + gr;
        if (t < Tq) {
            const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
            act_t *orow = o + t * ld + (long long)h * dk;
#pragma unroll
            for (int n = 0; n < NO; n++) {
                const int d = n * 8 + 2 * tq;
                if (d < dk)
                    *(unsigned *)(orow + d) = fat5_tc_pack(acc[mt][n][2 * hf] * inv, acc[mt][n][2 * hf + 1] * inv);
            }
            if (tq == 0) lse[t * H + h] = ls > 0.0f ? m[rr] + logf(ls) : -FAT5_INF;
        }
    }
}

#define FAT5_ATTN_TC_BODY(DKP, PE, PAT, DROP) \
    fat5_attn_fwd_tc_impl<DKP, DKP == 128 ? 1 : 2, PE, PAT, DROP>(FAT5_ATTN_ARGS_FWD);
#else
#define FAT5_ATTN_TC_BODY(DKP, PE, PAT, DROP)  // fp32 activations: never launched
#endif

// fat5_attn_fwd_tc64{,_alibi,_fire}{,_pat} (8 <= dk <= 64) and fat5_attn_fwd_tc128... (64 < dk <=
// 128): fat5_attn_fwd's arguments and results, with dk % 8 == 0, q, k, v, o 16-byte aligned, bf16
// activations. Grid (ceil(Tq / BM), H) with BM = 128 (tc64) or 64 (tc128), 128 threads; dynamic
// shared memory (BM + 256) (DKP + 8) 2 bytes (DKP = 64 or 128), then (2 max(max_distance, 1) + 1)
// floats with a T5 bias, then what fat5_attn_pos takes (T5: nb + max_distance floats to cache the tables,
// optional; FIRE: its rows, fat5__gpu_fire_smem). CPU twin: fat5__cpu_attn_fwd. The _drop kernels
// (T5 or no bias, ALiBi) apply dr's dropout to the probabilities; the others ignore dr.
#define FAT5_ATTN_TC_ENTRY(name, DKP, PE, PAT, DROP)                                                                \
    extern "C" __global__ void __launch_bounds__(FAT5_TC_THREADS, 2) name(                                         \
        act_t *o, float *lse, const act_t *q, const act_t *k, const act_t *v, const float *bias, const int *lut,   \
        const int *cu_q, const int *cu_k, const int *q_seq, long long Tq, int H, int dk, int kind, int nb,         \
        int max_distance, int g, const int *cu_g, const fat5_dropp dr)                                             \
    {                                                                                                              \
        FAT5_ATTN_TC_BODY(DKP, PE, PAT, DROP)                                                                      \
    }
// the six entry points of one head-dim family, and its two with dropout (T5 or no bias, ALiBi; no
// pattern: a pattern or FIRE with dropout takes the FMA kernels)
#define FAT5_ATTN_TC_FAMILY(D)                                                       \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D, D, FAT5_PE_TABLE, false, false)          \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_pat, D, FAT5_PE_TABLE, true, false)     \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_alibi, D, FAT5_PE_ALIBI, false, false)  \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_alibi_pat, D, FAT5_PE_ALIBI, true, false) \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_fire, D, FAT5_PE_FIRE, false, false)    \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_fire_pat, D, FAT5_PE_FIRE, true, false)
#define FAT5_ATTN_TC_DROP_FAMILY(D)                                                   \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_drop, D, FAT5_PE_TABLE, false, true)     \
    FAT5_ATTN_TC_ENTRY(fat5_attn_fwd_tc##D##_alibi_drop, D, FAT5_PE_ALIBI, false, true)
#if FAT5_IN_PART(19)
FAT5_ATTN_TC_FAMILY(64)
#endif
#if FAT5_IN_PART(20)
FAT5_ATTN_TC_FAMILY(128)
#endif
#if FAT5_IN_PART(32)
FAT5_ATTN_TC_DROP_FAMILY(64)
#endif
#if FAT5_IN_PART(33)
FAT5_ATTN_TC_DROP_FAMILY(128)
#endif
