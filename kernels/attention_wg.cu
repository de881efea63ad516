// kernels/attention_wg.cu — the attention forward on Hopper's own path (sm_90a): warpgroup MMA
// (wgmma) fed by the tensor memory accelerator (TMA), a producer warpgroup and two consumer
// warpgroups. bf16 q, k, v; head dims 64 and 128; self-attention (the keys are the queries' rows,
// packed sequences cu); T5 buckets, no bias and ALiBi (both), bidirectional and causal. The same
// results as attention_tc.cu's kernels (o, and the log-sum-exp the backward reads), which stay the
// path of every other case and of every other GPU.
//
// A block: 384 threads, BM = 128 packed query rows (they may span sequences), BN = 128 keys a tile.
//   - warpgroup 0, the producer (its registers given up with setmaxnreg): one thread loads the
//     block's queries once and the K and V tiles into a ring of FAT5_WG_STAGES stages, each a TMA
//     copy of 64-column chunks ([rows][64] bf16, 128-byte rows, 128-byte swizzle: the layout wgmma
//     reads) completing on the stage's "full" mbarrier; it reuses a stage once all 8 consumer warps
//     have arrived on its "empty" mbarrier;
//   - warpgroups 1 and 2, the consumers, 64 query rows each: S = Q K^T by wgmma (Q and K from
//     shared memory, fp32 accumulators), the bias and masks of attention_tc.cu on the accumulators
//     (T5: the head's bias by distance dtab, one shared load a score; one constant for a tile whose
//     distances all lie beyond +-max_distance), the online softmax in base 2, P rounded to bf16 in
//     registers as wgmma's A operand, O += P V by wgmma (V from shared memory, transposed). A
//     consumer skips a tile none of its rows sees (it still releases the stage). With dropout
//     (training, dr.thresh > 0) P is multiplied by its mask after l has summed it.
// The tiles walked are those of attention_tc.cu: from the block's first row's first key to its last
// row's last. Rows of other sequences and rows past the end (TMA fills them with zeros) are masked.
// Rounding: as attention_tc.cu (fp32 products summed in another order, P rounded to bf16, l sums
// the unrounded values, ex2.approx); a query with no keys gets o = 0 and lse = -inf.
//
// The kernels exist in every program (the module must hold every entry point); their bodies only
// where NVRTC compiles for sm_90a with bf16 activations (the launcher takes them only then).

#define FAT5_WG_THREADS 384
#define FAT5_WG_BM 128     // query rows a block
#define FAT5_WG_BN 128     // keys a tile
#define FAT5_WG_STAGES 2   // K/V tiles in flight

// A TMA tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned), made by the host
// (cuTensorMapEncodeTiled) and passed by value as a __grid_constant__ parameter.
struct __align__(64) fat5_tmap {
    unsigned long long w[16];
};

#if FAT5_ACT_BF16 && defined(__CUDA_ARCH_FEAT_SM90_ALL)

// ---- mbarriers (shared-memory addresses) ----
__device__ __forceinline__ void fat5_wg_bar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// arrive, expecting `bytes` of TMA copies to complete on the barrier's current phase
__device__ __forceinline__ void fat5_wg_bar_expect(unsigned bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void fat5_wg_bar_arrive(unsigned bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// waits until the phase of parity `parity` has completed
__device__ __forceinline__ void fat5_wg_bar_wait(unsigned bar, unsigned parity)
{
    unsigned done = 0;
    while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
}

// ---- TMA: a [rows][64] box of a 2D tensor map at (column c0, row c1) into shared memory ----
__device__ __forceinline__ void fat5_wg_tma(unsigned dst, const fat5_tmap *map, int c0, int c1, unsigned bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

// ---- wgmma ----
// The descriptor of a shared-memory operand with 128-byte swizzle: start address, leading and
// stride byte offsets (the matrix-descriptor format of the PTX ISA; tiles 1024-byte aligned).
// K-major ([rows][64] chunks): the 8-row groups `sbo` = 1024 bytes apart; MN-major (V, read
// transposed): the 64-column chunks `lbo` bytes apart, the 8-row groups `sbo` = 1024.
__device__ __forceinline__ unsigned long long fat5_wg_desc(unsigned saddr, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
           ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void fat5_wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void fat5_wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void fat5_wg_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// keeps the compiler from moving accesses of accumulator registers across the asynchronous MMAs
template <int N>
__device__ __forceinline__ void fat5_wg_hold(float *d)
{
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}

// d (64 x 128, fp32, the accumulator layout) = (acc ? d : 0) + A B: A 64 x 16 and B 128 x 16, both
// K-major in shared memory (descriptors da, db)
__device__ __forceinline__ void fat5_wg_mma_ss128(float *d, unsigned long long da, unsigned long long db, int acc)
{
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1, 0, 0; }\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 , "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 , "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 , "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 , "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
                 , "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
                 , "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
                 , "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
}

// d (64 x 64, fp32) += A B: A 64 x 16 bf16 in registers (a[4], the m16n8k16 A fragment of this
// warp's 16 rows), B 16 x 64 MN-major in shared memory (descriptor db, transposed)
__device__ __forceinline__ void fat5_wg_mma_rs64(float *d, const unsigned *a, unsigned long long db)
{
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1; }\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 , "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 , "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 , "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

// d (64 x 128, fp32) += A B: A 64 x 16 bf16 in registers (a[4], the m16n8k16 A fragment of this
// warp's 16 rows), B 16 x 128 MN-major in shared memory (descriptor db, transposed)
__device__ __forceinline__ void fat5_wg_mma_rs128(float *d, const unsigned *a, unsigned long long db)
{
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1; }\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 , "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 , "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 , "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 , "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
                 , "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
                 , "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
                 , "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}


// The head's T5 bias by distance, for the block's threads to fill (dtab[x] = the bias of distance
// x - M, x < tabn; tabn 0: no table), and its ALiBi slope (0 for the other schemes)
template <int PE>
__device__ __forceinline__ float fat5_wg_head_bias(float *dtab, int tabn, int M, const float *bias, const int *lut,
                                                   int kind, int nb, int md, int h, int H)
{
    for (int x = threadIdx.x; x < tabn; x += blockDim.x)
        dtab[x] = bias[(long long)fat5_attn_bucket(x - M, kind & FAT5_ATTN_MASK, lut, nb, md) * H + h];
    if (PE != FAT5_PE_ALIBI) return 0.0f;
    const int asym = (kind & FAT5_ATTN_ALIBI_ASYM) != 0;
    return fat5_alibi_slope(asym ? h % (H / 2) : h, asym ? H / 2 : H);
}

template <int DK, int PE>
__device__ __forceinline__ void fat5_attn_fwd_wg_impl(act_t *o, float *lse, const fat5_tmap *tmq,
                                                      const fat5_tmap *tmk, const fat5_tmap *tmv, const float *bias,
                                                      const int *lut, const int *cu_q, const int *cu_k,
                                                      const int *q_seq, long long Tq, int H, int kind, int nb, int md,
                                                      const fat5_dropp &dr)
{
    const int NC = DK / 64, NS = FAT5_WG_STAGES, BM = FAT5_WG_BM, BN = FAT5_WG_BN;
    const unsigned QB = 128u * 128u;         // bytes of a [BM rows][64] chunk of Q
    const unsigned KB = (unsigned)BN * 128u; // bytes of a [BN keys][64] chunk of K or V
    const float LOG2E = 1.4426950408889634f;
    const int h = blockIdx.y;
    const long long ld = (long long)H * DK;
    // shared memory, from the first 1024-byte boundary: Q [NC][BM][64], K and V [NS][NC][BN][64],
    // the barriers (full[NS], empty[NS], the queries'), then T5's bias by distance dtab
    char *sm = (char *)fat5_smem;
    const unsigned s0 = fat5_tc_saddr(sm), sQ = (s0 + 1023u) & ~1023u;
    const unsigned sK = sQ + NC * QB, sV = sK + NS * NC * KB, sB = sV + NS * NC * KB, qbar = sB + 16 * NS;
    float *dtab = (float *)(sm + (qbar + 8 - s0));
    const int M = md > 0 ? md : 1, tabn = PE == FAT5_PE_TABLE && bias ? 2 * M + 1 : 0;
    const int vis = fat5_attn_vis<PE>(kind, h, H);
    const float slope = fat5_wg_head_bias<PE>(dtab, tabn, M, bias, lut, kind, nb, md, h, H);
    if (threadIdx.x == 0) {
        for (int s = 0; s < NS; s++) {
            fat5_wg_bar_init(sB + 8 * s, 1);          // full: the producer's arrive + the bytes
            fat5_wg_bar_init(sB + 8 * (NS + s), 8);   // empty: the 8 consumer warps
        }
        fat5_wg_bar_init(qbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    const long long t0 = (long long)(gridDim.x - 1 - blockIdx.x) * BM;  // the longest tiles of a causal
    const int nrow = (int)min((long long)BM, Tq - t0);                  // sequence first
    int kstart, kend;
    const fat5_pat pt = fat5_attn_pat(kind, 0, nb);  // no pattern: fat5_attn_tile_keys<false> ignores it
    int ps, pe, gs, ge;                                // the pattern phases' ranges (unused here)
    fat5_attn_tile_keys<false>(pt, vis, cu_q, cu_k, q_seq, 0, t0, nrow, ps, pe, kstart, kend, gs, ge);
    const int ntile = kend > kstart ? (kend - kstart + BN - 1) / BN : 0;
    __syncthreads();  // barriers initialised, dtab written

    if (threadIdx.x < 128) {  // the producer warpgroup
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            const int hc = h * DK;
            fat5_wg_bar_expect(qbar, NC * QB);
            for (int c = 0; c < NC; c++) fat5_wg_tma(sQ + c * QB, tmq, hc + 64 * c, (int)t0, qbar);
            for (int j = 0; j < ntile; j++) {
                const int s = j % NS, kt = kstart + j * BN;
                const unsigned full = sB + 8 * s;
                if (j >= NS) fat5_wg_bar_wait(sB + 8 * (NS + s), (unsigned)((j / NS - 1) & 1));
                fat5_wg_bar_expect(full, 2 * NC * KB);
                for (int c = 0; c < NC; c++) {
                    fat5_wg_tma(sK + (s * NC + c) * KB, tmk, hc + 64 * c, kt, full);
                    fat5_wg_tma(sV + (s * NC + c) * KB, tmv, hc + 64 * c, kt, full);
                }
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");

    // a consumer: warpgroup cw (0, 1) of rows t0 + 64 cw ..; this thread's rows rr = 0, 1: packed
    // row t0 + 64 cw + 16 w + 8 rr + gr; it sees keys [klo + (vis == 2 ? ip : 0), khi)
    const int cw = (threadIdx.x >> 7) - 1, tid = threadIdx.x & 127, w = tid >> 5, lane = tid & 31;
    const int gr = lane >> 2, tq = lane & 3;
    int klo[2], khi[2], ip[2];
    float m[2], l[2];
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        const long long t = t0 + 64 * cw + 16 * w + 8 * rr + gr;
        klo[rr] = khi[rr] = ip[rr] = 0;
        m[rr] = -FAT5_INF;
        l[rr] = 0.0f;
        if (t < Tq) {
            const int s = q_seq[t], k0 = cu_k[s], nk = cu_k[s + 1] - k0, i = (int)(t - cu_q[s]);
            klo[rr] = k0;
            khi[rr] = k0 + (vis == 1 ? min(i + 1, nk) : nk);
            ip[rr] = i;
        }
    }
    int wks = 0, wke = 0;  // the keys this warpgroup's rows see (uniform over the warpgroup)
    if (nrow > 64 * cw)
        fat5_attn_tile_keys<false>(pt, vis, cu_q, cu_k, q_seq, 0, t0 + 64 * cw, min(64, nrow - 64 * cw), ps, pe, wks,
                                   wke, gs, ge);
    float acc[DK / 2];  // O, 64 x DK: acc[4 n + 2 rr + e] = row 8 rr + gr, column 8 n + 2 tq + e
#pragma unroll
    for (int i = 0; i < DK / 2; i++) acc[i] = 0.0f;
    const unsigned qoff = sQ + (unsigned)cw * 64u * 128u;  // this warpgroup's 64 rows of each Q chunk
    fat5_wg_bar_wait(qbar, 0);

    for (int j = 0; j < ntile; j++) {
        const int s = j % NS, kt0 = kstart + j * BN;
        fat5_wg_bar_wait(sB + 8 * s, (unsigned)((j / NS) & 1));
        if (kt0 < wke && kt0 + BN > wks) {
            float sc[BN / 2];  // S, 64 x BN: sc[4 n + 2 rr + e] = row 8 rr + gr, key kt0 + 8 n + 2 tq + e
            fat5_wg_hold<BN / 2>(sc);
            fat5_wg_fence();
#pragma unroll
            for (int ks = 0; ks < DK / 16; ks++) {
                const unsigned qa = qoff + (unsigned)(ks >> 2) * QB + (unsigned)(ks & 3) * 32u;
                const unsigned ka = sK + (unsigned)(s * NC + (ks >> 2)) * KB + (unsigned)(ks & 3) * 32u;
                fat5_wg_mma_ss128(sc, fat5_wg_desc(qa, 16, 1024), fat5_wg_desc(ka, 16, 1024), ks > 0);
            }
            fat5_wg_commit();
            fat5_wg_wait0();
            fat5_wg_hold<BN / 2>(sc);

            // bias and mask, per warp (uniform branches), as attention_tc.cu
            int lo[2], hi[2], base[2];  // keys [lo, hi) visible; key u's distance u - base
            bool rfull = true, far_hi = true, far_lo = true;
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                lo[rr] = klo[rr] + (vis == 2 ? ip[rr] : 0);
                hi[rr] = khi[rr];
                base[rr] = klo[rr] + ip[rr];
                rfull = rfull && kt0 >= lo[rr] && kt0 + BN <= hi[rr];
                far_hi = far_hi && kt0 - base[rr] >= M;
                far_lo = far_lo && kt0 + BN - 1 - base[rr] <= -M;
            }
            const bool wfull = __all_sync(FAT5_FULL_MASK, rfull);
            float cadd = 0.0f;  // a bias common to every score of the tile (T5's beyond max distance)
            if (wfull) {
                if (PE == FAT5_PE_TABLE && tabn) {
                    const bool chi = __all_sync(FAT5_FULL_MASK, far_hi), clo = __all_sync(FAT5_FULL_MASK, far_lo);
                    if (chi || clo) {
                        cadd = dtab[chi ? 2 * M : 0];
                    } else {
                        const float *dt = dtab + M;
#pragma unroll
                        for (int rr = 0; rr < 2; rr++) {
                            const int r0 = kt0 + 2 * tq - base[rr];
#pragma unroll
                            for (int n = 0; n < BN / 8; n++)
#pragma unroll
                                for (int e = 0; e < 2; e++) sc[4 * n + 2 * rr + e] += dt[min(max(r0 + 8 * n + e, -M), M)];
                        }
                    }
                } else if (PE == FAT5_PE_ALIBI) {
#pragma unroll
                    for (int rr = 0; rr < 2; rr++) {
                        const int r0 = kt0 + 2 * tq - base[rr];
#pragma unroll
                        for (int n = 0; n < BN / 8; n++)
#pragma unroll
                            for (int e = 0; e < 2; e++) sc[4 * n + 2 * rr + e] -= slope * fabsf((float)(r0 + 8 * n + e));
                    }
                }
            } else {
#pragma unroll
                for (int rr = 0; rr < 2; rr++)
#pragma unroll
                    for (int n = 0; n < BN / 8; n++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float &x = sc[4 * n + 2 * rr + e];
                            const int u = kt0 + 8 * n + 2 * tq + e, rel = u - base[rr];
                            if (u < lo[rr] || u >= hi[rr]) {
                                x = -FAT5_INF;
                            } else if (PE == FAT5_PE_TABLE) {
                                if (tabn) x += dtab[min(max(rel, -M), M) + M];
                            } else if (PE == FAT5_PE_ALIBI) {
                                x -= slope * fabsf((float)rel);
                            }
                        }
            }

            // the online softmax (base 2)
            float mx[2];
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                float a = fmaxf(sc[2 * rr], sc[2 * rr + 1]), b = fmaxf(sc[4 + 2 * rr], sc[4 + 2 * rr + 1]);
#pragma unroll
                for (int n = 2; n < BN / 8; n += 2) {
                    a = fmaxf(a, fmaxf(sc[4 * n + 2 * rr], sc[4 * n + 2 * rr + 1]));
                    b = fmaxf(b, fmaxf(sc[4 * n + 4 + 2 * rr], sc[4 * n + 4 + 2 * rr + 1]));
                }
                mx[rr] = fmaxf(a, b);
            }
#pragma unroll
            for (int rr = 0; rr < 2; rr++) mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(FAT5_FULL_MASK, mx[rr], 1));
#pragma unroll
            for (int rr = 0; rr < 2; rr++) mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(FAT5_FULL_MASK, mx[rr], 2)) + cadd;
            bool grow = false;
#pragma unroll
            for (int rr = 0; rr < 2; rr++) grow = grow || mx[rr] > m[rr];
            grow = __any_sync(FAT5_FULL_MASK, grow);
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                const float mnew = fmaxf(m[rr], mx[rr]);
                const float ms = mnew == -FAT5_INF ? 0.0f : mnew * LOG2E, off = fmaf(cadd, LOG2E, -ms);
                if (grow) {
                    const float corr = mnew == -FAT5_INF ? 1.0f : fat5_tc_ex2(m[rr] * LOG2E - ms);
                    l[rr] *= corr;
#pragma unroll
                    for (int n = 0; n < DK / 8; n++) {
                        acc[4 * n + 2 * rr] *= corr;
                        acc[4 * n + 2 * rr + 1] *= corr;
                    }
                }
                m[rr] = mnew;
                float ls0 = 0.0f, ls1 = 0.0f;
#pragma unroll
                for (int n = 0; n < BN / 8; n++) {
                    float &x0 = sc[4 * n + 2 * rr], &x1 = sc[4 * n + 2 * rr + 1];
                    x0 = fat5_tc_ex2(fmaf(x0, LOG2E, off));
                    x1 = fat5_tc_ex2(fmaf(x1, LOG2E, off));
                    ls0 += x0;
                    ls1 += x1;
                }
                l[rr] += ls0 + ls1;
            }
            // dropout (training): what reaches V is P m; l keeps the softmax's
            if (dr.thresh) {
#pragma unroll
                for (int rr = 0; rr < 2; rr++)
                    fat5_attn_drop_row_quad<BN / 8>(dr, dr.stream + h, t0 + 64 * cw + 16 * w + 8 * rr + gr, kt0, sc,
                                                    2 * rr);
            }

            // O += P V: P as wgmma's A fragments (16 keys a step), V transposed from shared memory
            unsigned pa[BN / 16][4];
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                pa[kk][0] = fat5_tc_pack(sc[8 * kk + 0], sc[8 * kk + 1]);
                pa[kk][1] = fat5_tc_pack(sc[8 * kk + 2], sc[8 * kk + 3]);
                pa[kk][2] = fat5_tc_pack(sc[8 * kk + 4], sc[8 * kk + 5]);
                pa[kk][3] = fat5_tc_pack(sc[8 * kk + 6], sc[8 * kk + 7]);
            }
            fat5_wg_hold<DK / 2>(acc);
            fat5_wg_fence();
#pragma unroll
            for (int kk = 0; kk < BN / 16; kk++) {
                const unsigned va = sV + (unsigned)(s * NC) * KB + (unsigned)kk * 2048u;
                if (DK == 64)
                    fat5_wg_mma_rs64(acc, pa[kk], fat5_wg_desc(va, KB, 1024));
                else
                    fat5_wg_mma_rs128(acc, pa[kk], fat5_wg_desc(va, KB, 1024));
            }
            fat5_wg_commit();
            fat5_wg_wait0();
            fat5_wg_hold<DK / 2>(acc);
        }
        __syncwarp();
        if (lane == 0) fat5_wg_bar_arrive(sB + 8 * (NS + s));  // this warp is done with stage s
    }

#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        float ls = l[rr];
        ls += __shfl_xor_sync(FAT5_FULL_MASK, ls, 1);
        ls += __shfl_xor_sync(FAT5_FULL_MASK, ls, 2);
        const long long t = t0 + 64 * cw + 16 * w + 8 * rr + gr;
        if (t < Tq) {
            const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
            act_t *orow = o + t * ld + (long long)h * DK;
#pragma unroll
            for (int n = 0; n < DK / 8; n++)
                *(unsigned *)(orow + 8 * n + 2 * tq) = fat5_tc_pack(acc[4 * n + 2 * rr] * inv, acc[4 * n + 2 * rr + 1] * inv);
            if (tq == 0) lse[t * H + h] = ls > 0.0f ? m[rr] + logf(ls) : -FAT5_INF;
        }
    }
}

#define FAT5_ATTN_WG_BODY(DK, PE) \
    fat5_attn_fwd_wg_impl<DK, PE>(o, lse, &tmq, &tmk, &tmv, bias, lut, cu_q, cu_k, q_seq, Tq, H, kind, nb, max_distance, \
                                  dr);
#else
#define FAT5_ATTN_WG_BODY(DK, PE)  // not sm_90a, or fp32 activations: never launched
#endif

// fat5_attn_fwd_wg64, _wg64_alibi, _wg128, _wg128_alibi: attention_tc.cu's forward for head dim 64 or
// 128 exactly, self-attention (cu_q = cu_k, Tk = Tq), no pattern, T5 buckets / no bias or ALiBi;
// q, k, v read through the tensor maps tmq, tmk, tmv: 2D, bf16, dims (H dk, Tq), row stride
// H dk 2 bytes, box (64, 128), 128-byte swizzle, zero fill. Grid (ceil(Tq / 128), H), 384 threads,
// dynamic shared memory fat5__gpu_attn_fwd_wg_smem. CPU twin: fat5__cpu_attn_fwd.
#define FAT5_ATTN_WG_ENTRY(name, DK, PE)                                                                          \
    extern "C" __global__ void __launch_bounds__(FAT5_WG_THREADS, 1)                                               \
        name(act_t *o, float *lse, const __grid_constant__ fat5_tmap tmq, const __grid_constant__ fat5_tmap tmk,  \
             const __grid_constant__ fat5_tmap tmv, const float *bias, const int *lut, const int *cu_q,           \
             const int *cu_k, const int *q_seq, long long Tq, int H, int kind, int nb, int max_distance,           \
             const fat5_dropp dr)                                                                                  \
    {                                                                                                              \
        FAT5_ATTN_WG_BODY(DK, PE)                                                                                  \
    }
#if FAT5_IN_PART(28)
FAT5_ATTN_WG_ENTRY(fat5_attn_fwd_wg64, 64, FAT5_PE_TABLE)
FAT5_ATTN_WG_ENTRY(fat5_attn_fwd_wg64_alibi, 64, FAT5_PE_ALIBI)
#endif
#if FAT5_IN_PART(29)
FAT5_ATTN_WG_ENTRY(fat5_attn_fwd_wg128, 128, FAT5_PE_TABLE)
FAT5_ATTN_WG_ENTRY(fat5_attn_fwd_wg128_alibi, 128, FAT5_PE_ALIBI)
#endif
