// kernels/attention_wg_bwd.cu — the attention backward's dk and dv on Hopper's own path (sm_90a):
// warpgroup MMA (wgmma) on tiles the tensor memory accelerator (TMA) loads. The cases of
// attention_wg.cu's forward (bf16, head dims 64 and 128, self-attention over packed sequences, T5
// buckets / no bias and ALiBi, bidirectional and causal); dq and the bias-table gradient stay on
// attention_tc_bwd.cu's kernel, which is also this one's oracle on the GPU with the CPU's.
//
// A block: 256 threads, FAT5_WGB_NWG = 2 warpgroups of 64 keys (3 warpgroups of 168 registers, 32
// queries a pass, ran 13% slower at head dim 64 on an H200), walking the queries that see the
// block's keys (fat5_attn_key_tile_queries) in tiles of BM = 64.
//   - warp 0 loads the block's K and V once and each query tile's Q and dO into a ring of stages
//     (4 for head dim 64, 3 for 128): TMA copies of [rows][64] bf16 chunks, 128-byte swizzle, and
//     the tile's lse and delta by cp.async, all completing on the stage's "full" mbarrier; it
//     refills a stage once every thread has arrived on its "empty" mbarrier;
//   - each warpgroup, per tile, in passes of QW queries (64; 32 for head dim 128, so that dK and dV
//     stay in registers: 254 registers): S^T = K Q^T and dP^T = V dO^T by wgmma from shared memory
//     (fp32), the bias and masks of attention_tc_bwd.cu's dkv kernel on the accumulators, P^T =
//     2^(S^T log2 e - lse log2 e) and dS^T = P^T (dP^T - delta), then dV += P^T dO and dK += dS^T Q
//     by wgmma with P^T and dS^T rounded to bf16 in registers as the A operand (dO and Q read
//     transposed from shared memory). A warpgroup skips a tile none of its keys is seen by (it still
//     releases the stage). Under the forward's dropout (training, dr.thresh > 0; the multipliers m
//     regenerated per score): dS^T = P^T (m dP^T - delta) and dV += (P m)^T dO.
// Four products a tile; dq recomputes S and dP in its own kernel (no atomics: the same bits every
// run).
// Rounding: as attention_tc_bwd.cu (P and dS rounded to bf16 before their products, ex2.approx,
// fp32 sums in another order).
//
// The kernels exist in every program; their bodies only where NVRTC compiles for sm_90a with bf16
// activations (the launcher takes them only then).

#define FAT5_WGB_NWG 2  // warpgroups a block, 64 keys each
#define FAT5_WGB_BM 64  // queries a tile

#if FAT5_ACT_BF16 && defined(__CUDA_ARCH_FEAT_SM90_ALL)

// d (64 x 64, fp32) = (acc ? d : 0) + A B: A 64 x 16 and B 64 x 16, both K-major in shared memory
__device__ __forceinline__ void fat5_wg_mma_ss64(float *d, unsigned long long da, unsigned long long db, int acc)
{
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, 0, 0; }\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 , "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 , "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 , "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
}

// d (64 x 32, fp32) = (acc ? d : 0) + A B: A 64 x 16 and B 32 x 16, both K-major in shared memory
__device__ __forceinline__ void fat5_wg_mma_ss32(float *d, unsigned long long da, unsigned long long db, int acc)
{
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
                 "}, %16, %17, p, 1, 1, 0, 0; }\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 , "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(acc));
}

template <int QW>
__device__ __forceinline__ void fat5_wg_mma_ss(float *d, unsigned long long da, unsigned long long db, int acc)
{
    if (QW == 64)
        fat5_wg_mma_ss64(d, da, db, acc);
    else
        fat5_wg_mma_ss32(d, da, db, acc);
}

template <int DK>
__device__ __forceinline__ void fat5_wg_mma_rs(float *d, const unsigned *a, unsigned long long db)
{
    if (DK == 64)
        fat5_wg_mma_rs64(d, a, db);
    else
        fat5_wg_mma_rs128(d, a, db);
}

template <int DK, int PE>
__device__ __forceinline__ void fat5_attn_bwd_dkv_wg_impl(act_t *dk_, act_t *dv, const fat5_tmap *tmq,
                                                          const fat5_tmap *tmo, const fat5_tmap *tmk,
                                                          const fat5_tmap *tmv, const float *lse, const float *delta,
                                                          const float *bias, const int *lut, const int *cu_q,
                                                          const int *cu_k, const int *k_seq, long long Tk, int H,
                                                          int kind, int nb, int md, const fat5_dropp &dr)
{
    const int NC = DK / 64, NS = DK == 64 ? 4 : 3, NWG = FAT5_WGB_NWG, BN = 64 * NWG, BM = FAT5_WGB_BM;
    const int QW = DK == 128 ? 32 : 64;       // query columns a pass
    const unsigned KB = (unsigned)BN * 128u;  // bytes of a [BN keys][64] chunk of K or V
    const unsigned QB = (unsigned)BM * 128u;  // bytes of a [BM queries][64] chunk of Q or dO
    const float LOG2E = 1.4426950408889634f;
    const int h = blockIdx.y, hc = h * DK;
    const long long ld = (long long)H * DK;
    // shared memory, from the first 1024-byte boundary: K and V [NC][BN][64], Q and dO
    // [NS][NC][BM][64], the barriers (full[NS], empty[NS], K and V's, one spare), the tiles' lse
    // and delta [NS][2][BM], then T5's bias by distance
    char *sm = (char *)fat5_smem;
    const unsigned s0 = fat5_tc_saddr(sm), sK = (s0 + 1023u) & ~1023u;
    const unsigned sV = sK + NC * KB, sQ = sV + NC * KB, sO = sQ + NS * NC * QB, sB = sO + NS * NC * QB;
    const unsigned kvbar = sB + 16 * NS, sL = kvbar + 16;
    const float *Ls = (const float *)(sm + (sL - s0));
    float *dtab = (float *)(sm + (sL + NS * 2 * BM * 4 - s0));
    const int M = md > 0 ? md : 1, tabn = PE == FAT5_PE_TABLE && bias ? 2 * M + 1 : 0;
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    const float slope = fat5_wg_head_bias<PE>(dtab, tabn, M, bias, lut, kind, nb, md, h, H);
    if (threadIdx.x == 0) {
        for (int s = 0; s < NS; s++) {
            fat5_wg_bar_init(sB + 8 * s, 33);        // full: thread 0's arrive + the bytes, warp 0's cp.async
            fat5_wg_bar_init(sB + 8 * (NS + s), 128 * NWG);  // empty: every thread
        }
        fat5_wg_bar_init(kvbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    const long long u0 = (long long)blockIdx.x * BN;  // causal: the first keys have the most queries
    const int nrow = (int)min((long long)BN, Tk - u0);
    int qstart, qend;
    fat5_attn_key_tile_queries(vis, cu_q, cu_k, k_seq, u0, nrow, qstart, qend);
    const int ntile = qend > qstart ? (qend - qstart + BM - 1) / BM : 0;
    __syncthreads();  // barriers initialised, dtab written

    // warp 0: query tile j into stage j % NS, its Q and dO chunks by TMA (lane 0) and its lse and
    // delta by cp.async (each lane 2 queries; past qend zeros), every lane's arrival on the stage's
    // full barrier deferred until its copies land
#define FAT5_WGB_LOAD(j)                                                                                       \
    do {                                                                                                       \
        const int s_ = (j) % NS, qt_ = qstart + (j) * BM;                                                      \
        const unsigned full_ = sB + 8 * s_;                                                                    \
        if (threadIdx.x == 0) {                                                                                \
            fat5_wg_bar_expect(full_, 2 * NC * QB);                                                            \
            for (int c_ = 0; c_ < NC; c_++) {                                                                  \
                fat5_wg_tma(sQ + (s_ * NC + c_) * QB, tmq, hc + 64 * c_, qt_, full_);                          \
                fat5_wg_tma(sO + (s_ * NC + c_) * QB, tmo, hc + 64 * c_, qt_, full_);                          \
            }                                                                                                  \
        }                                                                                                      \
        for (int i_ = threadIdx.x; i_ < BM; i_ += 32) {                                                        \
            const int qi_ = qt_ + i_, n_ = qi_ < qend ? 4 : 0;                                                 \
            const long long e_ = qi_ < qend ? (long long)qi_ * H + h : 0;                                      \
            fat5_tc_cp4(sL + (unsigned)((s_ * 2 * BM + i_) * 4), lse + e_, n_);                                \
            fat5_tc_cp4(sL + (unsigned)((s_ * 2 * BM + BM + i_) * 4), delta + e_, n_);                         \
        }                                                                                                      \
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full_) : "memory");        \
    } while (0)
    if (threadIdx.x < 32) {
        if (threadIdx.x == 0) {
            fat5_wg_bar_expect(kvbar, 2 * NC * KB);
            for (int c = 0; c < NC; c++) {
                fat5_wg_tma(sK + c * KB, tmk, hc + 64 * c, (int)u0, kvbar);
                fat5_wg_tma(sV + c * KB, tmv, hc + 64 * c, (int)u0, kvbar);
            }
        }
        for (int j = 0; j < NS && j < ntile; j++) FAT5_WGB_LOAD(j);
    }

    // warpgroup cw (0, 1) holds keys u0 + 64 cw ..; this thread's rows rr = 0, 1: key u0 + 64 cw + 16 w
    // + 8 rr + gr, seen by queries [qlo, qhi); jp its position, qb its sequence's first query
    const int cw = threadIdx.x >> 7, tid = threadIdx.x & 127, w = tid >> 5, lane = tid & 31;
    const int gr = lane >> 2, tq = lane & 3;
    int qlo[2], qhi[2], jp[2], qb[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const long long u = u0 + 64 * cw + 16 * w + 8 * rr + gr;
        qlo[rr] = qhi[rr] = jp[rr] = qb[rr] = 0;
        if (u < Tk) {
            const int s = k_seq[u], q0 = cu_q[s], nq = cu_q[s + 1] - q0, j = (int)(u - cu_k[s]);
            qlo[rr] = q0 + (vis == 1 ? min(j, nq) : 0);
            qhi[rr] = q0 + (vis == 2 ? min(j + 1, nq) : nq);
            jp[rr] = j;
            qb[rr] = q0;
        }
    }
    int wqs = 0, wqe = 0;  // the queries that see this warpgroup's keys (uniform over the warpgroup)
    if (nrow > 64 * cw)
        fat5_attn_key_tile_queries(vis, cu_q, cu_k, k_seq, u0 + 64 * cw, min(64, nrow - 64 * cw), wqs, wqe);
    float ak[DK / 2], av[DK / 2];  // dK, dV, 64 x DK: [4 n + 2 rr + e] = row 8 rr + gr, column 8 n + 2 tq + e
#pragma unroll
    for (int i = 0; i < DK / 2; i++) ak[i] = av[i] = 0.0f;
    const unsigned koff = sK + (unsigned)cw * 64u * 128u, voff = sV + (unsigned)cw * 64u * 128u;
    fat5_wg_bar_wait(kvbar, 0);

    for (int j = 0; j < ntile; j++) {
        const int s = j % NS, qt0 = qstart + j * BM;
        fat5_wg_bar_wait(sB + 8 * s, (unsigned)((j / NS) & 1));
        if (qt0 < wqe && qt0 + BM > wqs) {
#pragma unroll
            for (int hq = 0; hq < BM / QW; hq++) {
                const int c0 = qt0 + hq * QW;
                const unsigned qrow = (unsigned)(hq * QW) * 128u;  // the pass's first row in a Q / dO chunk
                // S^T, dP^T, 64 x QW: [4 n + 2 rr + e] = key row 8 rr + gr, query c0 + 8 n + 2 tq + e
                float sc[QW / 2], dp[QW / 2];
                fat5_wg_hold<QW / 2>(sc);
                fat5_wg_hold<QW / 2>(dp);
                fat5_wg_fence();
#pragma unroll
                for (int ks = 0; ks < DK / 16; ks++) {
                    const unsigned ko = (unsigned)(ks >> 2) * KB + (unsigned)(ks & 3) * 32u;
                    const unsigned qo = (unsigned)(s * NC + (ks >> 2)) * QB + qrow + (unsigned)(ks & 3) * 32u;
                    fat5_wg_mma_ss<QW>(sc, fat5_wg_desc(koff + ko, 16, 1024), fat5_wg_desc(sQ + qo, 16, 1024), ks > 0);
                }
#pragma unroll
                for (int ks = 0; ks < DK / 16; ks++) {
                    const unsigned ko = (unsigned)(ks >> 2) * KB + (unsigned)(ks & 3) * 32u;
                    const unsigned qo = (unsigned)(s * NC + (ks >> 2)) * QB + qrow + (unsigned)(ks & 3) * 32u;
                    fat5_wg_mma_ss<QW>(dp, fat5_wg_desc(voff + ko, 16, 1024), fat5_wg_desc(sO + qo, 16, 1024), ks > 0);
                }
                fat5_wg_commit();
                fat5_wg_wait0();
                fat5_wg_hold<QW / 2>(sc);
                fat5_wg_hold<QW / 2>(dp);

                // bias and mask on uniform branches (as attention_tc_bwd.cu's dkv; a masked score is -inf)
                bool rfull = true, far_hi = true, far_lo = true;
#pragma unroll
                for (int rr = 0; rr < 2; rr++) {
                    const int kbase = qb[rr] + jp[rr];  // query qi's distance to this key: kbase - qi
                    rfull = rfull && c0 >= qlo[rr] && c0 + QW <= qhi[rr];
                    far_hi = far_hi && kbase - (c0 + QW - 1) >= M;
                    far_lo = far_lo && kbase - c0 <= -M;
                }
                const bool wfull = __all_sync(FAT5_FULL_MASK, rfull);
                bool chi = false, clo = false;
                float cadd = 0.0f;
                if (wfull && PE == FAT5_PE_TABLE && tabn) {
                    chi = __all_sync(FAT5_FULL_MASK, far_hi);
                    clo = !chi && __all_sync(FAT5_FULL_MASK, far_lo);
                    if (chi || clo) cadd = dtab[chi ? 2 * M : 0];
                }
                const float cl = cadd * LOG2E;
                if (wfull) {
                    if (PE == FAT5_PE_ALIBI || (PE == FAT5_PE_TABLE && tabn && !chi && !clo)) {
#pragma unroll
                        for (int rr = 0; rr < 2; rr++) {
                            const int r0 = qb[rr] + jp[rr] - c0 - 2 * tq;  // the distance of this thread's first column
#pragma unroll
                            for (int n = 0; n < QW / 8; n++)
#pragma unroll
                                for (int e = 0; e < 2; e++) {
                                    float &x = sc[4 * n + 2 * rr + e];
                                    if (PE == FAT5_PE_TABLE)
                                        x += dtab[min(max(r0 - n * 8 - e, -M), M) + M];
                                    else
                                        x -= slope * fabsf((float)(r0 - n * 8 - e));
                                }
                        }
                    }
                } else {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++)
#pragma unroll
                        for (int n = 0; n < QW / 8; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                float &x = sc[4 * n + 2 * rr + e];
                                const int qi = c0 + n * 8 + 2 * tq + e, rel = qb[rr] + jp[rr] - qi;
                                if (qi < qlo[rr] || qi >= qhi[rr])
                                    x = -FAT5_INF;
                                else if (PE == FAT5_PE_TABLE) {
                                    if (tabn) x += dtab[min(max(rel, -M), M) + M];
                                } else if (PE == FAT5_PE_ALIBI)
                                    x -= slope * fabsf((float)rel);
                            }
                }
                // P^T (in sc) and dS^T (in dp); a query without keys (lse -inf) is masked for every key
                const float *Lt = Ls + s * 2 * BM + hq * QW + 2 * tq, *Dt = Lt + BM;  // the stage's lse, delta
                // dropout (training): the forward's keep bits of this thread's scores (shared draws)
                const unsigned int keep =
                    dr.thresh ? fat5_attn_drop_bits_keys<QW / 8>(dr, dr.stream + h, c0, u0 + 64 * cw + 16 * w) : 0u;
#pragma unroll
                for (int n = 0; n < QW / 8; n++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float L = Lt[8 * n + e], D = Dt[8 * n + e];
                        const float nl = L > -FAT5_INF ? fmaf(-L, LOG2E, cl) : 0.0f;
#pragma unroll
                        for (int rr = 0; rr < 2; rr++) {
                            const float p = fat5_tc_ex2(fmaf(sc[4 * n + 2 * rr + e], LOG2E, nl));
                            if (dr.thresh) {
                                // dropout (training): dV takes P m, dS = P (m dP - D)
                                const float m = (keep >> (4 * n + 2 * rr + e)) & 1u ? dr.scale : 0.0f;
                                sc[4 * n + 2 * rr + e] = p * m;
                                dp[4 * n + 2 * rr + e] = p * fmaf(m, dp[4 * n + 2 * rr + e], -D);
                            } else {
                                sc[4 * n + 2 * rr + e] = p;
                                dp[4 * n + 2 * rr + e] = p * (dp[4 * n + 2 * rr + e] - D);
                            }
                        }
                    }
                // dV += P^T dO, dK += dS^T Q: P^T, dS^T as wgmma's A fragments (16 queries a step), dO and Q
                // transposed from shared memory
                unsigned pa[QW / 16][4], da[QW / 16][4];
#pragma unroll
                for (int kk = 0; kk < QW / 16; kk++)
#pragma unroll
                    for (int x = 0; x < 4; x++) {
                        pa[kk][x] = fat5_tc_pack(sc[8 * kk + 2 * x], sc[8 * kk + 2 * x + 1]);
                        da[kk][x] = fat5_tc_pack(dp[8 * kk + 2 * x], dp[8 * kk + 2 * x + 1]);
                    }
                fat5_wg_hold<DK / 2>(av);
                fat5_wg_hold<DK / 2>(ak);
                fat5_wg_fence();
#pragma unroll
                for (int kk = 0; kk < QW / 16; kk++) {
                    const unsigned ro = (unsigned)(s * NC) * QB + qrow + (unsigned)kk * 2048u;
                    fat5_wg_mma_rs<DK>(av, pa[kk], fat5_wg_desc(sO + ro, QB, 1024));
                    fat5_wg_mma_rs<DK>(ak, da[kk], fat5_wg_desc(sQ + ro, QB, 1024));
                }
                fat5_wg_commit();
                fat5_wg_wait0();
                fat5_wg_hold<DK / 2>(av);
                fat5_wg_hold<DK / 2>(ak);
            }
        }
        // this thread is done with stage s (every thread arrives: an arrive releases its own reads of
        // the stage's lse and delta only, which warp 0's cp.async then overwrite)
        fat5_wg_bar_arrive(sB + 8 * (NS + s));
        if (threadIdx.x < 32 && j + NS < ntile) {
            fat5_wg_bar_wait(sB + 8 * (NS + s), (unsigned)((j / NS) & 1));  // every thread is done with it
            FAT5_WGB_LOAD(j + NS);
        }
    }
#undef FAT5_WGB_LOAD

#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const long long u = u0 + 64 * cw + 16 * w + 8 * rr + gr;
        if (u < Tk) {
            const long long off = u * ld + hc;
#pragma unroll
            for (int n = 0; n < DK / 8; n++) {
                *(unsigned *)(dk_ + off + 8 * n + 2 * tq) = fat5_tc_pack(ak[4 * n + 2 * rr], ak[4 * n + 2 * rr + 1]);
                *(unsigned *)(dv + off + 8 * n + 2 * tq) = fat5_tc_pack(av[4 * n + 2 * rr], av[4 * n + 2 * rr + 1]);
            }
        }
    }
}

#define FAT5_ATTN_DKV_WG_BODY(DK, PE)                                                                              \
    fat5_attn_bwd_dkv_wg_impl<DK, PE>(dk_, dv, &tmq, &tmo, &tmk, &tmv, lse, delta, bias, lut, cu_q, cu_k, k_seq, Tk, \
                                      H, kind, nb, max_distance, dr);
#else
#define FAT5_ATTN_DKV_WG_BODY(DK, PE)  // not sm_90a, or fp32 activations: never launched
#endif

// fat5_attn_bwd_dkv_wg64, _wg64_alibi, _wg128, _wg128_alibi: attention_tc_bwd.cu's dk, dv for head dim
// 64 or 128 exactly, self-attention (cu_q = cu_k, Tq = Tk), no pattern, T5 buckets / no bias or ALiBi;
// q, dout, k, v read through the tensor maps tmq, tmo, tmk, tmv: 2D, bf16, dims (H dk, Tk), row
// stride H dk 2 bytes, box (64, 64) for q and dout and (64, 128) for k and v, 128-byte swizzle,
// zero fill. Grid (ceil(Tk / 128), H), 256 threads, dynamic shared memory
// fat5__gpu_attn_bwd_dkv_wg_smem. CPU twin: fat5__cpu_attn_bwd_dkv.
#define FAT5_ATTN_DKV_WG_ENTRY(name, DK, PE)                                                                       \
    extern "C" __global__ void __launch_bounds__(128 * FAT5_WGB_NWG, 1)                                              \
        name(act_t *dk_, act_t *dv, const __grid_constant__ fat5_tmap tmq, const __grid_constant__ fat5_tmap tmo,  \
             const __grid_constant__ fat5_tmap tmk, const __grid_constant__ fat5_tmap tmv, const float *lse,      \
             const float *delta, const float *bias, const int *lut, const int *cu_q, const int *cu_k,             \
             const int *k_seq, long long Tk, int H, int kind, int nb, int max_distance, const fat5_dropp dr)      \
    {                                                                                                              \
        FAT5_ATTN_DKV_WG_BODY(DK, PE)                                                                              \
    }
#if FAT5_IN_PART(30)
FAT5_ATTN_DKV_WG_ENTRY(fat5_attn_bwd_dkv_wg64, 64, FAT5_PE_TABLE)
FAT5_ATTN_DKV_WG_ENTRY(fat5_attn_bwd_dkv_wg64_alibi, 64, FAT5_PE_ALIBI)
#endif
#if FAT5_IN_PART(31)
FAT5_ATTN_DKV_WG_ENTRY(fat5_attn_bwd_dkv_wg128, 128, FAT5_PE_TABLE)
FAT5_ATTN_DKV_WG_ENTRY(fat5_attn_bwd_dkv_wg128_alibi, 128, FAT5_PE_ALIBI)
#endif
