// kernels/attention_tc_bwd.cu — the attention backward on tensor cores (bf16 mma.sync m16n8k16,
// fp32 accumulation): dq with the T5 bias-table gradient, and dk, dv, from the forward's
// log-sum-exp and delta = rowsum(dout o) (fat5_attn_bwd_delta). Every mask, pattern and packed
// batch the tensor-core forward takes; T5 buckets, no bias, ALiBi (both kernels) and FIRE (dk, dv
// only: FIRE's parameter gradient stays on the FMA kernels of attention.cu, which are also these
// kernels' oracle on the GPU). Only the bf16 program has bodies; the launchers
// (fat5__gpu_attn_bwd_dq, fat5__gpu_attn_bwd_dkv) take them for bf16 activations when dk is a
// multiple of 8 up to 128 and the rows are 16-byte aligned.
//
// Structure (FlashAttention-2's, without atomics): two kernels, each a block of 4 warps owning 64
// rows (16 a warp), walking the other side in tiles of 64 double-buffered by cp.async, exactly the
// tiles the forward walks (fat5_attn_tile_keys; dk/dv: the queries that see the block's keys):
//   - attn_bwd_dq_tc: rows are queries. S = Q K^T and dP = dO V^T (Q, dO fragments in registers),
//     the bias and masks as in the forward, P = 2^(S log2 e - lse log2 e), dS = P (dP - delta),
//     dQ += dS K (dS rounded to bf16, K by ldmatrix.trans);
//   - attn_bwd_dkv_tc: rows are keys. S^T = K Q^T and dP^T = V dO^T (K, V fragments in registers
//     for dk <= 64, else from shared memory), P^T, dS^T per query column (its lse and delta staged
//     with the tile), dV += P^T dO and dK += dS^T Q.
// With the forward's dropout (training, dr.thresh > 0; multipliers m of the query and key rows,
// regenerated here): dS = P (m dP - delta) in both, and dV += (P m)^T dO.
// dq and dk/dv recompute S and dP each (7 products of the tile against FlashAttention-2's 5): the
// price of sums that never meet in atomics. Head dims up to 128 take 32-wide half tiles for the
// score products so that the accumulators stay in registers.
//
// The bias-table gradient, exact and deterministic: a score's gradient dS belongs to the bucket of
// its distance rel, and every distance beyond +-M (M = max(max_distance, 1)) has the bucket of
// +-M. Each warp keeps a gradient by distance, dd[rel + M] for rel in [-M, M], in shared memory
// (a second one for transient-global keys), and each lane two registers a table, for rel >= M and
// rel <= -M:
//   - a tile that lies wholly beyond +-M for every row of the warp (the forward folds one bias
//     into its exponent there) adds the lane's dS to one register: no shared memory at all;
//   - any other tile stages its dS [16 rows][64] in shared memory. When the warp's 16 rows are
//     consecutive queries of one sequence, distance is constant along a diagonal: lane l sums the
//     diagonals l, l + 32, l + 64 (79 of them) down the rows and adds each sum to its own dd entry
//     (no two lanes share an entry). Rows from several sequences, or global keys, go row by row
//     (lanes over the 64 columns, each column its own distance).
// Every entry is thus a sum in a fixed order. At the end of the block the warps' dd are summed per
// distance in warp order, then per bucket in distance order into the block's row of partials
// [gridDim.x][nbt][H] (fat5_attn_dbias_store's layout), which fat5_colsum_f32 adds over the blocks
// in a fixed order: the same inputs give the same bits.
//
// Rounding against the FMA kernels: P (in dV) and dS (in dQ, dK) are rounded to bf16 before their
// products (2^-8 of each term), exp is ex2.approx, and the fp32 products sum in another order.

#define FAT5_TCB_ST 72  // row stride (floats) of a warp's staged dS: conflict-free float2 stores and diagonals

#if FAT5_ACT_BF16

// dd[x + M] += s, or for |x| >= M the lane's register of that side
__device__ __forceinline__ void fat5_tcb_dd_add(float *dd, int x, int M, float s, float &hi, float &lo)
{
    if (x >= M)
        hi += s;
    else if (x <= -M)
        lo += s;
    else
        dd[x + M] += s;
}

// A warp's staged dS tile into its gradient by distance: columns are keys kt0 + c. diag: row r's
// distance origin is b0 + r (one sequence) and the tile is folded (R = 8: row r holds rows r and
// r + 8 of the warp, which share a diagonal 8 columns apart, at columns c' + 8, c' = c - 8 for the
// second: 72 columns) or not (R = 16, 64 columns); else (R = 16) each row its own origin org (held
// by lane 4 (r & 7), register r >> 3). dd is the table to add to, hi / lo its registers.
template <int R>
__device__ __forceinline__ void fat5_tcb_dd_tile(const float *st, float *dd, int M, int kt0, bool diag, int b0,
                                                 const int org[2], float &hi, float &lo)
{
    const int lane = threadIdx.x & 31, SH = R == 8 ? 7 : 15, NC = R == 8 ? 72 : 64;
    __syncwarp();
    if (diag) {
        // diagonal e = c - r + 15 (0..78) has distance kt0 - b0 - 15 + e: its R loads issued at once
        // (a row the diagonal misses reads a clamped column and adds 0), summed down the rows
        // (diagonals 32 .. 63 meet every row: no clamps)
        float s[3];
#pragma unroll
        for (int i = 0; i < 3; i++) {
            const int e = lane + 32 * i;
            float x[R];
#pragma unroll
            for (int r = 0; r < R; r++)
                x[r] = st[r * FAT5_TCB_ST + (i == 1 ? r + e - SH : min(max(r + e - SH, 0), NC - 1))];
            s[i] = 0.0f;
#pragma unroll
            for (int r = 0; r < R; r++) s[i] += i == 1 || (r + e - SH >= 0 && r + e - SH < NC) ? x[r] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < 3; i++)
            if (lane + 32 * i < 79) fat5_tcb_dd_add(dd, kt0 - b0 - 15 + lane + 32 * i, M, s[i], hi, lo);
    } else {
#pragma unroll 1
        for (int r = 0; r < 16; r++) {
            const int o = __shfl_sync(FAT5_FULL_MASK, r < 8 ? org[0] : org[1], (r & 7) * 4);
            fat5_tcb_dd_add(dd, kt0 + lane - o, M, st[r * FAT5_TCB_ST + lane], hi, lo);
            fat5_tcb_dd_add(dd, kt0 + lane + 32 - o, M, st[r * FAT5_TCB_ST + lane + 32], hi, lo);
            __syncwarp();
        }
    }
    __syncwarp();
}

template <int DKP, int PE, bool PAT, bool DROP>
__device__ __forceinline__ void fat5_attn_bwd_dq_tc_impl(act_t *dq, float *dbias, const act_t *dout,
                                                         const float *lse, const float *delta, const act_t *q,
                                                         const act_t *k, const act_t *v, const float *bias,
                                                         const int *lut, const int *cu_q, const int *cu_k,
                                                         const int *q_seq, long long Tq, int H, int dk, int kind,
                                                         int nb, int md, int g, const int *cu_g, const fat5_dropp &dr)
{
    const int SR = DKP + 8, KS = DKP / 16, NO = DKP / 8, QW = DKP == 128 ? 32 : 64, NW = QW / 8;
    const float LOG2E = 1.4426950408889634f;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gr = lane >> 2, tq = lane & 3;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    act_t *Qs = (act_t *)fat5_smem;  // [64][SR], then dout's; once in registers, the warps' staged dS
    act_t *Os = Qs + 64 * SR;
    act_t *Ks = Os + 64 * SR;      // [2][64][SR]
    act_t *Vs = Ks + 2 * 64 * SR;  // [2][64][SR]
    float *dtab = (float *)(Vs + 2 * 64 * SR);
    float *st = (float *)fat5_smem + w * 16 * FAT5_TCB_ST;
    const bool TG = PAT && PE == FAT5_PE_TABLE;
    const bool DB = PE == FAT5_PE_TABLE && dbias != 0;
    const int M = md > 0 ? md : 1, tabn = PE == FAT5_PE_TABLE && bias ? 2 * M + 1 : 0;
    const int ddn = DB ? (TG ? 2 : 1) * (2 * M + 1) : 0;  // a warp's gradient by distance (T5's, the globals')
    float *ddw = dtab + tabn + w * ddn;
    int *bk = (int *)(dtab + tabn + 4 * ddn);  // the bucket of each entry of a warp's gradient by distance
    fat5_pb pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, 6 * 64 * SR / 2 + tabn + 5 * ddn, 0);
    if (TG) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    for (int x = threadIdx.x; x < tabn; x += blockDim.x)
        dtab[x] = pb.bias[fat5_attn_bucket(x - M, pb.kind, pb.lut, nb, md) * pb.bstride];
    for (int x = threadIdx.x; x < 4 * ddn; x += blockDim.x) dtab[tabn + x] = 0.0f;
    for (int x = threadIdx.x; x < ddn; x += blockDim.x)  // T5's distances, then the global table's
        bk[x] = x <= 2 * M ? fat5_attn_bucket(x - M, pb.kind, pb.lut, nb, md)
                           : fat5_attn_bucket(x - 2 * M - 1 - M, 1, pb.lut, nb, md) + pt.goff;
    __syncthreads();  // the tables are zero before any warp adds to them (whatever tiles the block gets)
    float fhi = 0.0f, flo = 0.0f, ghi = 0.0f, glo = 0.0f;  // this lane's gradient at distances >= M, <= -M

    const unsigned sq = fat5_tc_saddr(Qs), so = fat5_tc_saddr(Os), sk = fat5_tc_saddr(Ks), sv = fat5_tc_saddr(Vs);
    const unsigned tileb = 64u * SR * 2u;
    const unsigned koff = (unsigned)(((lane & 7) + (lane >> 4) * 8) * SR + ((lane >> 3) & 1) * 8) * 2u;
    const unsigned voff = (unsigned)(((lane & 7) + ((lane >> 3) & 1) * 8) * SR + (lane >> 4) * 8) * 2u;
    // the query tiles in reverse order (the longest tiles of a causal sequence first); with fewer
    // blocks than tiles (a bias gradient: fat5__gpu_attn_bwd_dq), in mirror pairs: a block takes
    // tile i with tile n - 1 - i, whose causal key counts add up alike
    const long long ntile = (Tq + 63) / 64, nslot = (long long)gridDim.x < ntile ? (ntile + 1) / 2 : ntile;
    for (long long ti = blockIdx.x, pk = 0; ti < nslot || (pk == 1 && ti < ntile); ) {
        const long long t0 = (ntile - 1 - ti) * 64;
        const int nrow = (int)min(64LL, Tq - t0);
        // this thread's rows rr: packed row t0 + 16 w + 8 rr + gr, as in the forward
        int klo[2], khi[2], ip[2], gklo[2], gkhi[2], gip[2];
        float L2[2], Dl[2];
        bool valid[2];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            const long long t = t0 + w * 16 + 8 * rr + gr;
            klo[rr] = khi[rr] = ip[rr] = gklo[rr] = gkhi[rr] = gip[rr] = 0;
            L2[rr] = FAT5_INF;  // no keys: every p is 0
            Dl[rr] = 0.0f;
            valid[rr] = t < Tq;
            if (t < Tq) {
                const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
                klo[rr] = k0;
                khi[rr] = k0 + (vis == 1 ? min(i + 1, nk) : nk);
                ip[rr] = i;
                const float L = lse[t * H + h];
                if (L > -FAT5_INF) L2[rr] = L * LOG2E;
                Dl[rr] = delta[t * H + h];
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

        __syncthreads();  // the previous tile is done with every buffer (the staged dS alias Q, dout)
        fat5_tc_load<64, DKP>(sq, q + t0 * ld + (long long)h * dk, ld, nrow, dk, q);
        fat5_tc_load<64, DKP>(so, dout + t0 * ld + (long long)h * dk, ld, nrow, dk, dout);
        if (ph < 3) {
            const int ke = ph == 0 ? pe : ph == 1 ? kend : ge;
            fat5_tc_load<64, DKP>(sk, k + (long long)kt * ld + (long long)h * dk, ld, min(64, ke - kt), dk, k);
            fat5_tc_load<64, DKP>(sv, v + (long long)kt * ld + (long long)h * dk, ld, min(64, ke - kt), dk, v);
        }
        fat5_tc_commit();
        fat5_tc_wait_all();
        __syncthreads();
        unsigned qf[KS][4], of[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ks++) {
            const unsigned a = (unsigned)((w * 16 + (lane & 15)) * SR + ks * 16 + (lane >> 4) * 8) * 2u;
            fat5_tc_ldsm4(sq + a, qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3]);
            fat5_tc_ldsm4(so + a, of[ks][0], of[ks][1], of[ks][2], of[ks][3]);
        }
        __syncthreads();  // Q and dout are in registers: their shared memory takes the staged dS
        float acc[NO][4];
#pragma unroll
        for (int n = 0; n < NO; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

        int buf = 0;
        bool first = true;
        while (ph < 3) {
            const int ke = ph == 0 ? pe : ph == 1 ? kend : ge, kt0 = kt, cph = ph;
            const bool glob = TG && cph == 2;
            if (!first) {
                fat5_tc_wait_all();
                __syncthreads();
            }
            first = false;
            fat5_tc_next(ph, kt, true, ps, pe, kstart, kend, gs, ge, nph);
            if (ph < 3) {
                const int ne = ph == 0 ? pe : ph == 1 ? kend : ge;
                const unsigned off = (unsigned)(buf ^ 1) * tileb;
                fat5_tc_load<64, DKP>(sk + off, k + (long long)kt * ld + (long long)h * dk, ld, min(64, ne - kt), dk,
                                      k);
                fat5_tc_load<64, DKP>(sv + off, v + (long long)kt * ld + (long long)h * dk, ld, min(64, ne - kt), dk,
                                      v);
            }
            fat5_tc_commit();
            const unsigned kb = sk + (unsigned)buf * tileb, vb = sv + (unsigned)buf * tileb;
            buf ^= 1;

            bool rnone = true;
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                int wl = glob ? gklo[rr] : klo[rr] + (vis == 2 ? ip[rr] : 0), wh = glob ? gkhi[rr] : khi[rr];
                if (PAT && !glob && pt.pre == 0) {
                    wl = max(wl, klo[rr] + ip[rr] - pt.rad);
                    wh = min(wh, klo[rr] + ip[rr] + pt.rad + 1);
                }
                rnone = rnone && (wh <= kt0 || wl >= kt0 + 64 || wl >= wh);
            }
            if (__all_sync(FAT5_FULL_MASK, rnone)) continue;

            int lo[2], hi[2], base[2];  // keys [lo, hi) visible; key u's distance u - base
            bool rfull = true, far_hi = true, far_lo = true;
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
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
            bool chi = false, clo = false;  // the whole tile beyond +M / -M for every row of the warp
            float cadd = 0.0f;
            if (wfull && PE == FAT5_PE_TABLE && tabn) {
                chi = __all_sync(FAT5_FULL_MASK, far_hi);
                clo = !chi && __all_sync(FAT5_FULL_MASK, far_lo);
                if (chi || clo) cadd = dtab[chi ? 2 * M : 0];
            }
            const bool stage = DB && !chi && !clo;
            // staged tiles: one sequence over the warp's rows (rows past Tq do not count: their dS are
            // 0) sums by diagonals, folded (rows r and r + 8 added in registers) with 64-key halves
            int org0 = 0;  // the warp's first row's distance origin
            bool diag = false;
            if (stage) {
                org0 = __shfl_sync(FAT5_FULL_MASK, base[0], 0);
                const bool one =
                    !glob && (!valid[0] || base[0] == org0 + gr) && (!valid[1] || base[1] == org0 + 8 + gr);
                diag = __all_sync(FAT5_FULL_MASK, one);
            }
            const bool fold = QW == 64 && diag;
            float dsum = 0.0f;  // a far tile's dS, this lane's

#pragma unroll
            for (int hq = 0; hq < 64 / QW; hq++) {
                const int c0 = kt0 + hq * QW;  // this half's first key
                float s[NW][4], dp[NW][4];
#pragma unroll
                for (int n = 0; n < NW; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = dp[n][0] = dp[n][1] = dp[n][2] =
                    dp[n][3] = 0.0f;
#pragma unroll
                for (int ks = 0; ks < KS; ks++)
#pragma unroll
                    for (int np = 0; np < NW / 2; np++) {
                        const unsigned o = koff + (unsigned)((hq * QW + np * 16) * SR + ks * 16) * 2u;
                        unsigned b0, b1, b2, b3;
                        fat5_tc_ldsm4(kb + o, b0, b1, b2, b3);
                        fat5_tc_mma(s[2 * np], qf[ks], b0, b1);
                        fat5_tc_mma(s[2 * np + 1], qf[ks], b2, b3);
                        fat5_tc_ldsm4(vb + o, b0, b1, b2, b3);
                        fat5_tc_mma(dp[2 * np], of[ks], b0, b1);
                        fat5_tc_mma(dp[2 * np + 1], of[ks], b2, b3);
                    }
                // bias and mask, as in the forward
                if (wfull && !chi && !clo && (PE == FAT5_PE_TABLE || PE == FAT5_PE_ALIBI)) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++) {
                        const int r0 = c0 + 2 * tq - base[rr];
#pragma unroll
                        for (int n = 0; n < NW; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                if (PE == FAT5_PE_TABLE) {
                                    if (tabn) s[n][2 * rr + e] += dtab[min(max(r0 + n * 8 + e, -M), M) + M];
                                } else {
                                    s[n][2 * rr + e] -= pb.slope * fabsf((float)(r0 + n * 8 + e));
                                }
                            }
                    }
                } else if (!wfull) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++)
#pragma unroll
                        for (int n = 0; n < NW; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                float &x = s[n][2 * rr + e];
                                const int u = c0 + 2 * tq + n * 8 + e, rel = u - base[rr];
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
                } else if (PE == FAT5_PE_FIRE) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++)
#pragma unroll
                        for (int n = 0; n < NW; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++)
                                s[n][2 * rr + e] +=
                                    fat5_pb_bias<PE>(pb, ip[rr], c0 + 2 * tq + n * 8 + e - klo[rr]);
                }
                // dropout (training): the forward's P m met V, so dS = P (m dP - delta)
                if (DROP && dr.thresh) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++)
                        fat5_attn_drop_row_quad<NW>(dr, dr.stream + h, t0 + w * 16 + 8 * rr + gr, c0, &dp[0][0], 2 * rr);
                }
                // P and dS (in s)
#pragma unroll
                for (int rr = 0; rr < 2; rr++) {
                    const float off = fmaf(cadd, LOG2E, -L2[rr]);
#pragma unroll
                    for (int n = 0; n < NW; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float &x = s[n][2 * rr + e];
                            const float p = fat5_tc_ex2(fmaf(x, LOG2E, off));
                            x = p * (dp[n][2 * rr + e] - Dl[rr]);
                            if (DB && !stage) dsum += x;
                        }
                }
                if (fold) {
                    // row gr, column 8 m + 2 tq + e, and row gr + 8, column 8 (m + 1) + 2 tq + e, for m = -1 .. 7
#pragma unroll
                    for (int m = -1; m < NW; m++) {
                        float v0 = 0.0f, v1 = 0.0f;
                        if (m >= 0) {
                            v0 = s[m][0];
                            v1 = s[m][1];
                        }
                        if (m + 1 < NW) {
                            v0 += s[m + 1][2];
                            v1 += s[m + 1][3];
                        }
                        *(float2 *)(st + gr * FAT5_TCB_ST + 8 + m * 8 + 2 * tq) = make_float2(v0, v1);
                    }
                } else if (stage) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++)
#pragma unroll
                        for (int n = 0; n < NW; n++)
                            *(float2 *)(st + (8 * rr + gr) * FAT5_TCB_ST + hq * QW + n * 8 + 2 * tq) =
                                make_float2(s[n][2 * rr], s[n][2 * rr + 1]);
                }
                // dQ += dS K, 16 keys a step (K by ldmatrix.trans: its rows are the reduction)
#pragma unroll
                for (int kk = 0; kk < QW / 16; kk++) {
                    unsigned a[4];
                    a[0] = fat5_tc_pack(s[2 * kk][0], s[2 * kk][1]);
                    a[1] = fat5_tc_pack(s[2 * kk][2], s[2 * kk][3]);
                    a[2] = fat5_tc_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                    a[3] = fat5_tc_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
                    for (int d2 = 0; d2 < NO / 2; d2++) {
                        unsigned b0, b1, b2, b3;
                        fat5_tc_ldsm4t(kb + voff + (unsigned)((hq * QW + kk * 16) * SR + d2 * 16) * 2u, b0, b1, b2, b3);
                        fat5_tc_mma(acc[2 * d2], a, b0, b1);
                        fat5_tc_mma(acc[2 * d2 + 1], a, b2, b3);
                    }
                }
            }
            if (DB) {
                if (chi)
                    fhi += dsum;
                else if (clo)
                    flo += dsum;
                else if (glob)
                    fat5_tcb_dd_tile<16>(st, ddw + 2 * M + 1, M, kt0, false, org0, base, ghi, glo);
                else if (fold)
                    fat5_tcb_dd_tile<8>(st, ddw, M, kt0, true, org0, base, fhi, flo);
                else
                    fat5_tcb_dd_tile<16>(st, ddw, M, kt0, diag, org0, base, fhi, flo);
            }
        }

#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            const long long t = t0 + w * 16 + 8 * rr + gr;
            if (t < Tq) {
                act_t *row = dq + t * ld + (long long)h * dk;
#pragma unroll
                for (int n = 0; n < NO; n++) {
                    const int d = n * 8 + 2 * tq;
                    if (d < dk) *(unsigned *)(row + d) = fat5_tc_pack(acc[n][2 * rr], acc[n][2 * rr + 1]);
                }
            }
        }
        // the next tile: the mirror of this slot's, then the next slot
        if (nslot < ntile && pk == 0 && ntile - 1 - ti != ti) {
            ti = ntile - 1 - ti;
            pk = 1;
        } else {
            ti = (pk ? ntile - 1 - ti : ti) + gridDim.x;
            pk = 0;
        }
    }
    if (DB) {
        // the lanes' far registers into the warp's end entries (butterfly sums: a fixed order)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            fhi += __shfl_xor_sync(FAT5_FULL_MASK, fhi, o);
            flo += __shfl_xor_sync(FAT5_FULL_MASK, flo, o);
            ghi += __shfl_xor_sync(FAT5_FULL_MASK, ghi, o);
            glo += __shfl_xor_sync(FAT5_FULL_MASK, glo, o);
        }
        __syncwarp();
        if (lane == 0) {
            ddw[2 * M] += fhi;
            ddw[0] += flo;
            if (TG) {
                ddw[2 * M + 1 + 2 * M] += ghi;
                ddw[2 * M + 1] += glo;
            }
        }
        __syncthreads();
        // per distance, the warps' tables in warp order; per bucket, warp w sums its quarter of the
        // distances in order (lane l the buckets l, l + 32, ...) into the staging space (free now),
        // then the four quarters in order
        const int nbt = PAT ? nb + pt.goff : nb, q4 = (ddn + 3) / 4;
        float *dd0 = dtab + tabn;
        float *part = (float *)fat5_smem;  // [4][nbt], nbt <= 1024 (the launcher's bound)
        for (int x = threadIdx.x; x < ddn; x += blockDim.x)  // in place: warp 0's table
            dd0[x] = ((dd0[x] + dd0[ddn + x]) + dd0[2 * ddn + x]) + dd0[3 * ddn + x];
        __syncthreads();
        for (int bb = 0; bb < nbt; bb += 32) {
            const int b = bb + lane, xe = min(ddn, (w + 1) * q4);
            float s = 0.0f;
#pragma unroll 4
            for (int x = w * q4; x < xe; x++) s += bk[x] == b ? dd0[x] : 0.0f;
            if (b < nbt) part[w * nbt + b] = s;
        }
        __syncthreads();
        for (int b = threadIdx.x; b < nbt; b += blockDim.x)
            dbias[((long long)blockIdx.x * nbt + b) * H + h] = ((part[b] + part[nbt + b]) + part[2 * nbt + b]) + part[3 * nbt + b];
    }
}

// 4 bytes global -> shared, asynchronously; bytes 0 writes zeros and reads nothing
__device__ __forceinline__ void fat5_tc_cp4(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

template <int DKP, int PE, bool PAT, bool DROP>
__device__ __forceinline__ void fat5_attn_bwd_dkv_tc_impl(act_t *dk_, act_t *dv, const act_t *dout,
                                                          const float *lse, const float *delta, const act_t *q,
                                                          const act_t *k, const act_t *v, const float *bias,
                                                          const int *lut, const int *cu_q, const int *cu_k,
                                                          const int *k_seq, long long Tk, int H, int dk, int kind,
                                                          int nb, int md, int g, const int *cu_g, const fat5_dropp &dr)
{
    const int SR = DKP + 8, KS = DKP / 16, NO = DKP / 8, QW = DKP == 128 ? 32 : 64, NW = QW / 8;
    const bool KREG = DKP <= 64;  // K and V fragments in registers (else read from shared memory per use)
    const float LOG2E = 1.4426950408889634f;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, gr = lane >> 2, tq = lane & 3;
    const int h = blockIdx.y;
    const long long ld = (long long)H * dk;
    act_t *Ks = (act_t *)fat5_smem;  // [64][SR] the block's keys, values
    act_t *Vs = Ks + 64 * SR;
    act_t *Qs = Vs + 64 * SR;      // [2][64][SR] query tiles
    act_t *Os = Qs + 2 * 64 * SR;  // [2][64][SR] their dout
    float *Ls = (float *)(Os + 2 * 64 * SR);  // [2][64] their lse, then [2][64] their delta
    float *dtab = Ls + 256;
    const bool TG = PAT && PE == FAT5_PE_TABLE;
    const int M = md > 0 ? md : 1, tabn = PE == FAT5_PE_TABLE && bias ? 2 * M + 1 : 0;
    int *red = (int *)(dtab + tabn);  // PAT: the block's query ranges
    fat5_pb pb = fat5_attn_pos<PE>(bias, lut, h, H, kind, nb, md, 6 * 64 * SR / 2 + 256 + tabn + 8, 0);
    if (TG) fat5_attn_gtable(pb, bias, kind, h, H, nb);
    const fat5_pat pt = fat5_attn_pat(kind, g, nb);
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    for (int x = threadIdx.x; x < tabn; x += blockDim.x)
        dtab[x] = pb.bias[fat5_attn_bucket(x - M, pb.kind, pb.lut, nb, md) * pb.bstride];

    const long long u0 = (long long)blockIdx.x * 64;  // causal: the first keys have the most queries
    const int nrow = (int)min(64LL, Tk - u0);
    // this thread's key rows rr = u0 + 16 w + 8 rr + gr: seen by queries [qlo, qhi); jp its position
    // (a global key: its index among its sequence's G = gG globals), qb its sequence's first query
    int qlo[2], qhi[2], jp[2], qb[2], gG[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const long long u = u0 + w * 16 + 8 * rr + gr;
        qlo[rr] = qhi[rr] = jp[rr] = qb[rr] = gG[rr] = 0;
        if (u < Tk) {
            const int s = k_seq[u], q0 = cu_q[s], nq = cu_q[s + 1] - q0;
            int j = (int)(u - cu_k[s]);
            if (TG && pt.tg && u >= cu_g[s] && u < cu_g[s + 1]) {
                gG[rr] = cu_g[s + 1] - cu_g[s];
                j = (int)(u - cu_g[s]);
            }
            qlo[rr] = q0 + (vis == 1 ? min(j, nq) : 0);
            qhi[rr] = q0 + (vis == 2 ? min(j + 1, nq) : nq);
            jp[rr] = j;
            qb[rr] = q0;
        }
    }
    int qstart = 0, qend = 0, pa = 0, pz = 0, ga = 0, gz = 0;
    if (PAT) {
        // as fat5_attn_bwd_dkv_tiled: the hull of the rows' windows (a prefix key: its whole
        // sequence), the hull of the prefixes the other rows need, the hull of the global rows'
        // sequences; then their union
        fat5_pat_red_init(red);
        __syncthreads();
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            const long long u = u0 + w * 16 + 8 * rr + gr;
            if (u < Tk) fat5_pat_key_queries(red, pt, qb[rr], jp[rr], cu_q[k_seq[u] + 1] - qb[rr], TG && gG[rr] > 0);
        }
        __syncthreads();
        fat5_pat_tile_queries(red, pa, pz, qstart, qend, ga, gz);
    } else {
        fat5_attn_key_tile_queries(vis, cu_q, cu_k, k_seq, u0, nrow, qstart, qend);
    }
    const int nph = PAT ? 3 : 2;
    int ph = PAT ? 0 : 1, qt = PAT ? pa : qstart;
    fat5_tc_next(ph, qt, false, pa, pz, qstart, qend, ga, gz, nph);

    const unsigned sk = fat5_tc_saddr(Ks), sv = fat5_tc_saddr(Vs), sq = fat5_tc_saddr(Qs), so = fat5_tc_saddr(Os);
    const unsigned sl = fat5_tc_saddr(Ls);
    const unsigned tileb = 64u * SR * 2u;
    // a query tile [qt, qt + 64) of a range ending at qe into buffer b: rows, dout, lse, delta
#define FAT5_TCB_LOAD_Q(b, qt, qe)                                                                               \
    do {                                                                                                         \
        const int n_ = min(64, (qe) - (qt));                                                                     \
        fat5_tc_load<64, DKP>(sq + (unsigned)(b) * tileb, q + (long long)(qt) * ld + (long long)h * dk, ld, n_, dk, \
                              q);                                                                                \
        fat5_tc_load<64, DKP>(so + (unsigned)(b) * tileb, dout + (long long)(qt) * ld + (long long)h * dk, ld, n_, \
                              dk, dout);                                                                         \
        const int i_ = threadIdx.x & 63;                                                                         \
        const bool ok_ = i_ < n_;                                                                                \
        const long long e_ = ok_ ? (long long)((qt) + i_) * H + h : 0;                                           \
        fat5_tc_cp4(sl + (unsigned)((threadIdx.x >> 6) * 128 + (b) * 64 + i_) * 4u,                             \
                    threadIdx.x < 64 ? (const void *)(lse + e_) : (const void *)(delta + e_), ok_ ? 4 : 0);     \
    } while (0)
    fat5_tc_load<64, DKP>(sk, k + u0 * ld + (long long)h * dk, ld, nrow, dk, k);
    fat5_tc_load<64, DKP>(sv, v + u0 * ld + (long long)h * dk, ld, nrow, dk, v);
    if (ph < 3) FAT5_TCB_LOAD_Q(0, qt, ph == 0 ? pz : ph == 1 ? qend : gz);
    fat5_tc_commit();
    fat5_tc_wait_all();
    __syncthreads();
    const unsigned aoff = (unsigned)((w * 16 + (lane & 15)) * SR + (lane >> 4) * 8) * 2u;  // A fragments
    unsigned kf[KREG ? KS : 1][4], vf[KREG ? KS : 1][4];
    if (KREG) {
#pragma unroll
        for (int ks = 0; ks < (KREG ? KS : 1); ks++) {
            fat5_tc_ldsm4(sk + aoff + ks * 32u, kf[ks][0], kf[ks][1], kf[ks][2], kf[ks][3]);
            fat5_tc_ldsm4(sv + aoff + ks * 32u, vf[ks][0], vf[ks][1], vf[ks][2], vf[ks][3]);
        }
    }
    float ak[NO][4], av[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) ak[n][0] = ak[n][1] = ak[n][2] = ak[n][3] = av[n][0] = av[n][1] = av[n][2] =
        av[n][3] = 0.0f;

    const unsigned koff = (unsigned)(((lane & 7) + (lane >> 4) * 8) * SR + ((lane >> 3) & 1) * 8) * 2u;
    const unsigned voff = (unsigned)(((lane & 7) + ((lane >> 3) & 1) * 8) * SR + (lane >> 4) * 8) * 2u;
    int buf = 0;
    bool first = true;
    while (ph < 3) {
        const int qe = ph == 0 ? pz : ph == 1 ? qend : gz, qt0 = qt;
        if (!first) {
            fat5_tc_wait_all();
            __syncthreads();
        }
        first = false;
        fat5_tc_next(ph, qt, true, pa, pz, qstart, qend, ga, gz, nph);
        if (ph < 3) FAT5_TCB_LOAD_Q(buf ^ 1, qt, ph == 0 ? pz : ph == 1 ? qend : gz);
        fat5_tc_commit();
        const unsigned qb_ = sq + (unsigned)buf * tileb, ob = so + (unsigned)buf * tileb;
        const float *Lt = Ls + buf * 64, *Dt = Ls + 128 + buf * 64;
        buf ^= 1;

        // a tile no row of the warp is seen by is skipped
        bool rnone = true;
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            int wl = qlo[rr], wh = qhi[rr];
            if (PAT && !(TG && gG[rr] > 0) && pt.pre == 0) {
                wl = max(wl, qb[rr] + jp[rr] - pt.rad);
                wh = min(wh, qb[rr] + jp[rr] + pt.rad + 1);
            }
            rnone = rnone && (wh <= qt0 || wl >= qt0 + 64 || wl >= wh);
        }
        if (__all_sync(FAT5_FULL_MASK, rnone)) continue;
        bool rfull = true, far_hi = true, far_lo = true;
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            const int kbase = qb[rr] + jp[rr];  // query qi's distance to this key: kbase - qi
            rfull = rfull && qt0 >= qlo[rr] && qt0 + 64 <= qhi[rr];
            far_hi = far_hi && kbase - (qt0 + 63) >= M;
            far_lo = far_lo && kbase - qt0 <= -M;
        }
        const bool wfull = !PAT && __all_sync(FAT5_FULL_MASK, rfull);
        bool chi = false, clo = false;
        float cadd = 0.0f;
        if (wfull && PE == FAT5_PE_TABLE && tabn) {
            chi = __all_sync(FAT5_FULL_MASK, far_hi);
            clo = !chi && __all_sync(FAT5_FULL_MASK, far_lo);
            if (chi || clo) cadd = dtab[chi ? 2 * M : 0];
        }
        const float cl = cadd * LOG2E;

#pragma unroll
        for (int hq = 0; hq < 64 / QW; hq++) {
            const int c0 = qt0 + hq * QW;
            float s[NW][4], dp[NW][4];
#pragma unroll
            for (int n = 0; n < NW; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = dp[n][0] = dp[n][1] = dp[n][2] =
                dp[n][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                unsigned ka[4], va[4];
                if (KREG) {
#pragma unroll
                    for (int x = 0; x < 4; x++) {
                        ka[x] = kf[KREG ? ks : 0][x];
                        va[x] = vf[KREG ? ks : 0][x];
                    }
                } else {
                    fat5_tc_ldsm4(sk + aoff + ks * 32u, ka[0], ka[1], ka[2], ka[3]);
                    fat5_tc_ldsm4(sv + aoff + ks * 32u, va[0], va[1], va[2], va[3]);
                }
#pragma unroll
                for (int np = 0; np < NW / 2; np++) {
                    const unsigned o = koff + (unsigned)((hq * QW + np * 16) * SR + ks * 16) * 2u;
                    unsigned b0, b1, b2, b3;
                    fat5_tc_ldsm4(qb_ + o, b0, b1, b2, b3);
                    fat5_tc_mma(s[2 * np], ka, b0, b1);
                    fat5_tc_mma(s[2 * np + 1], ka, b2, b3);
                    fat5_tc_ldsm4(ob + o, b0, b1, b2, b3);
                    fat5_tc_mma(dp[2 * np], va, b0, b1);
                    fat5_tc_mma(dp[2 * np + 1], va, b2, b3);
                }
            }
            // bias and mask on uniform branches (as in dq; a masked score becomes -inf), then P (in s)
            // and dS (in dp)
            if (wfull) {
                if (PE != FAT5_PE_TABLE || (tabn && !chi && !clo)) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++) {
                        const int r0 = qb[rr] + jp[rr] - c0 - 2 * tq;  // the distance of this thread's first column
#pragma unroll
                        for (int n = 0; n < NW; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                float &x = s[n][2 * rr + e];
                                if (PE == FAT5_PE_TABLE)
                                    x += dtab[min(max(r0 - n * 8 - e, -M), M) + M];
                                else if (PE == FAT5_PE_ALIBI)
                                    x -= pb.slope * fabsf((float)(r0 - n * 8 - e));
                                else
                                    x += fat5_pb_bias<PE>(pb, c0 + n * 8 + 2 * tq + e - qb[rr], jp[rr]);
                            }
                    }
                }
            } else {
#pragma unroll
                for (int rr = 0; rr < 2; rr++)
#pragma unroll
                    for (int n = 0; n < NW; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float &x = s[n][2 * rr + e];
                            const int qi = c0 + n * 8 + 2 * tq + e, rel = qb[rr] + jp[rr] - qi;
                            bool ok = qi >= qlo[rr] && qi < qhi[rr];
                            if (PAT) ok = ok && qi < qe && ((TG && gG[rr] > 0) || fat5_pat_sees(pt, qi - qb[rr], jp[rr]));
                            if (!ok) {
                                x = -FAT5_INF;
                            } else if (TG && gG[rr] > 0) {
                                if (pb.gbias)
                                    x += pb.gbias[fat5_attn_bucket(jp[rr] - fat5_pat_block(pt, qi - qb[rr], gG[rr]), 1,
                                                                   pb.lut, nb, md) * pb.gstride];
                            } else if (PE == FAT5_PE_TABLE) {
                                if (tabn) x += dtab[min(max(rel, -M), M) + M];
                            } else if (PE == FAT5_PE_ALIBI) {
                                x -= pb.slope * fabsf((float)rel);
                            } else {
                                x += fat5_pb_bias<PE>(pb, qi - qb[rr], jp[rr]);
                            }
                        }
            }
            // dropout (training): the forward's keep bits of this thread's scores (shared draws)
            const unsigned int keep =
                DROP && dr.thresh ? fat5_attn_drop_bits_keys<NW>(dr, dr.stream + h, c0, u0 + w * 16) : 0u;
#pragma unroll
            for (int n = 0; n < NW; n++) {
                const int cc = hq * QW + n * 8 + 2 * tq;  // this thread's first column in the tile
                const float2 Lc = *(const float2 *)(Lt + cc), Dc = *(const float2 *)(Dt + cc);
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    // a query without keys (lse -inf) is masked for every key: its p is 2^-inf = 0
                    const float L = e ? Lc.y : Lc.x, D = e ? Dc.y : Dc.x;
                    const float nl = L > -FAT5_INF ? fmaf(-L, LOG2E, cl) : 0.0f;
#pragma unroll
                    for (int rr = 0; rr < 2; rr++) {
                        const float p = fat5_tc_ex2(fmaf(s[n][2 * rr + e], LOG2E, nl));
                        if (DROP && dr.thresh) {
                            // dropout (training): the forward's P m met V; dV takes P m, dS = P (m dP - D)
                            const float m = (keep >> (4 * n + 2 * rr + e)) & 1u ? dr.scale : 0.0f;
                            s[n][2 * rr + e] = p * m;
                            dp[n][2 * rr + e] = p * fmaf(m, dp[n][2 * rr + e], -D);
                        } else {
                            s[n][2 * rr + e] = p;
                            dp[n][2 * rr + e] = p * (dp[n][2 * rr + e] - D);
                        }
                    }
                }
            }
            // dV += P^T dout, dK += dS^T Q, 16 queries a step (dout, Q by ldmatrix.trans)
#pragma unroll
            for (int kk = 0; kk < QW / 16; kk++) {
                unsigned a[4], b[4];
                a[0] = fat5_tc_pack(s[2 * kk][0], s[2 * kk][1]);
                a[1] = fat5_tc_pack(s[2 * kk][2], s[2 * kk][3]);
                a[2] = fat5_tc_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
                a[3] = fat5_tc_pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
                b[0] = fat5_tc_pack(dp[2 * kk][0], dp[2 * kk][1]);
                b[1] = fat5_tc_pack(dp[2 * kk][2], dp[2 * kk][3]);
                b[2] = fat5_tc_pack(dp[2 * kk + 1][0], dp[2 * kk + 1][1]);
                b[3] = fat5_tc_pack(dp[2 * kk + 1][2], dp[2 * kk + 1][3]);
#pragma unroll
                for (int d2 = 0; d2 < NO / 2; d2++) {
                    const unsigned o = voff + (unsigned)((hq * QW + kk * 16) * SR + d2 * 16) * 2u;
                    unsigned b0, b1, b2, b3;
                    fat5_tc_ldsm4t(ob + o, b0, b1, b2, b3);
                    fat5_tc_mma(av[2 * d2], a, b0, b1);
                    fat5_tc_mma(av[2 * d2 + 1], a, b2, b3);
                    fat5_tc_ldsm4t(qb_ + o, b0, b1, b2, b3);
                    fat5_tc_mma(ak[2 * d2], b, b0, b1);
                    fat5_tc_mma(ak[2 * d2 + 1], b, b2, b3);
                }
            }
        }
    }
#undef FAT5_TCB_LOAD_Q

#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const long long u = u0 + w * 16 + 8 * rr + gr;
        if (u < Tk) {
            const long long off = u * ld + (long long)h * dk;
#pragma unroll
            for (int n = 0; n < NO; n++) {
                const int d = n * 8 + 2 * tq;
                if (d < dk) {
                    *(unsigned *)(dk_ + off + d) = fat5_tc_pack(ak[n][2 * rr], ak[n][2 * rr + 1]);
                    *(unsigned *)(dv + off + d) = fat5_tc_pack(av[n][2 * rr], av[n][2 * rr + 1]);
                }
            }
        }
    }
}

#define FAT5_ATTN_DQ_TC_BODY(DKP, PE, PAT, DROP) fat5_attn_bwd_dq_tc_impl<DKP, PE, PAT, DROP>(FAT5_ATTN_ARGS_DQ);
#define FAT5_ATTN_DKV_TC_BODY(DKP, PE, PAT, DROP) fat5_attn_bwd_dkv_tc_impl<DKP, PE, PAT, DROP>(FAT5_ATTN_ARGS_DKV);
#else
#define FAT5_ATTN_DQ_TC_BODY(DKP, PE, PAT, DROP)  // fp32 activations: never launched
#define FAT5_ATTN_DKV_TC_BODY(DKP, PE, PAT, DROP)
#endif

// fat5_attn_bwd_dq_tc64{,_pat,_alibi,_alibi_pat} (8 <= dk <= 64) and _tc128... (64 < dk <= 128):
// fat5_attn_bwd_dq's arguments and results (dbias: the per-block partial rows, [gridDim.x][nbt][H],
// or NULL), with dk % 8 == 0, 16-byte aligned rows, bf16 activations. Grid (x, H), x <= the query
// tiles of 64 (grid-stride over them), 128 threads; dynamic shared memory 6 64 (DKP + 8) 2 bytes,
// T5 with a bias: (2 M + 1) floats (M = max(max_distance, 1)), with dbias 5 (2 M + 1) more (10 (2
// M + 1) in the _pat kernels), then what fat5_attn_pos takes (the tables' optional cache).
// fat5_attn_bwd_dkv_tc64{,_pat,_alibi,_alibi_pat,_fire,_fire_pat} and _tc128...: fat5_attn_bwd_dkv's
// arguments and results, one block per 64 keys (grid (ceil(Tk / 64), H)), 128 threads; dynamic
// shared memory 6 64 (DKP + 8) 2 + 256 4 bytes, T5 with a bias (2 M + 1) floats, then 8 ints, then
// fat5_attn_pos's part (FIRE: its rows, fat5__gpu_fire_smem). CPU twins: fat5__cpu_attn_bwd_dq,
// fat5__cpu_attn_bwd_dkv.
#define FAT5_ATTN_DQ_TC_ENTRY(name, DKP, PE, PAT, DROP)                                                                 \
    extern "C" __global__ void __launch_bounds__(FAT5_TC_THREADS, DKP == 128 ? 1 : 2) name(                       \
        act_t *dq, float *dbias, const act_t *dout, const float *lse, const float *delta, const act_t *q,          \
        const act_t *k, const act_t *v, const float *bias, const int *lut, const int *cu_q, const int *cu_k,       \
        const int *q_seq, long long Tq, int H, int dk, int kind, int nb, int max_distance, int g, const int *cu_g, \
        const fat5_dropp dr) \
    {                                                                                                              \
        FAT5_ATTN_DQ_TC_BODY(DKP, PE, PAT, DROP)                                                                      \
    }
#define FAT5_ATTN_DKV_TC_ENTRY(name, DKP, PE, PAT, DROP)                                                                 \
    extern "C" __global__ void __launch_bounds__(FAT5_TC_THREADS, DKP == 128 ? 1 : 2) name(                       \
        act_t *dk_, act_t *dv, const act_t *dout, const float *lse, const float *delta, const act_t *q,            \
        const act_t *k, const act_t *v, const float *bias, const int *lut, const int *cu_q, const int *cu_k,       \
        const int *k_seq, long long Tk, int H, int dk, int kind, int nb, int max_distance, int g, const int *cu_g, \
        const fat5_dropp dr) \
    {                                                                                                              \
        FAT5_ATTN_DKV_TC_BODY(DKP, PE, PAT, DROP)                                                                      \
    }
#define FAT5_ATTN_BWD_TC_FAMILY(D)                                                              \
    FAT5_ATTN_DQ_TC_ENTRY(fat5_attn_bwd_dq_tc##D, D, FAT5_PE_TABLE, false, false)               \
    FAT5_ATTN_DQ_TC_ENTRY(fat5_attn_bwd_dq_tc##D##_pat, D, FAT5_PE_TABLE, true, false)          \
    FAT5_ATTN_DQ_TC_ENTRY(fat5_attn_bwd_dq_tc##D##_alibi, D, FAT5_PE_ALIBI, false, false)       \
    FAT5_ATTN_DQ_TC_ENTRY(fat5_attn_bwd_dq_tc##D##_alibi_pat, D, FAT5_PE_ALIBI, true, false)    \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D, D, FAT5_PE_TABLE, false, false)             \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_pat, D, FAT5_PE_TABLE, true, false)        \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_alibi, D, FAT5_PE_ALIBI, false, false)     \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_alibi_pat, D, FAT5_PE_ALIBI, true, false)  \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_fire, D, FAT5_PE_FIRE, false, false)       \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_fire_pat, D, FAT5_PE_FIRE, true, false)
// with the forward's dropout: T5 or no bias, ALiBi, no pattern (the others take the FMA kernels)
#define FAT5_ATTN_BWD_TC_DROP_FAMILY(D)                                                         \
    FAT5_ATTN_DQ_TC_ENTRY(fat5_attn_bwd_dq_tc##D##_drop, D, FAT5_PE_TABLE, false, true)         \
    FAT5_ATTN_DQ_TC_ENTRY(fat5_attn_bwd_dq_tc##D##_alibi_drop, D, FAT5_PE_ALIBI, false, true)   \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_drop, D, FAT5_PE_TABLE, false, true)       \
    FAT5_ATTN_DKV_TC_ENTRY(fat5_attn_bwd_dkv_tc##D##_alibi_drop, D, FAT5_PE_ALIBI, false, true)
#if FAT5_IN_PART(21)
FAT5_ATTN_BWD_TC_FAMILY(64)
#endif
#if FAT5_IN_PART(22)
FAT5_ATTN_BWD_TC_FAMILY(128)
#endif
#if FAT5_IN_PART(34)
FAT5_ATTN_BWD_TC_DROP_FAMILY(64)
#endif
#if FAT5_IN_PART(35)
FAT5_ATTN_BWD_TC_DROP_FAMILY(128)
#endif
