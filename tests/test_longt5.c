// test_longt5.c — LongT5 (model_type longt5, transformers' LongT5ForConditionalGeneration): its
// config fields and checkpoint names against the fixtures of ref/make_reference.py --longt5, and
// the attention patterns for long inputs. Parity of both LongT5 encoders with transformers is
// longt5_local_parity / longt5_tglobal_parity (test_model.c), their cached decoding test_decode.c.
// Uses the helpers of test_model.c, test_posenc.c and test_decode.c (tm_cfg, tm_read, TM_EXPECT_ERR,
// tp_roundtrip, tm_model_fd_check, td_inputs, td_forward_logits).

static void t_longt5_config(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c;
    char path[600], *text;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/longt5_tglobal/config.json", FAT5_TEST_DATA);
    text = tm_read(T, path, &len);
    FAT5_REQUIRE(T, text != NULL);
    FAT5_REQUIRE_OK(T, fat5_model_config_from_json(ctx, text, len, &c));
    fat5__free(ctx, text);
    FAT5_CHECK(T, c.enc_attention == FAT5_ENC_ATTN_TGLOBAL && c.local_radius == 4 && c.global_block_size == 4);
    FAT5_CHECK(T, strcmp(c.model_type, "longt5") == 0 && c.gated && c.act == FAT5_ACT_GELU_TANH);
    tp_roundtrip(T, &c);
    FAT5_REQUIRE_OK(T, tm_cfg(T, "{\"model_type\": \"longt5\"}", &c));   // LongT5Config's defaults
    FAT5_CHECK(T, c.enc_attention == FAT5_ENC_ATTN_LOCAL && c.local_radius == 127 && c.global_block_size == 16);
    tp_roundtrip(T, &c);
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"local_radius\": 0}", &c), FAT5_ERR_FORMAT,
                  "local_radius = 0");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"global_block_size\": 0}", &c), FAT5_ERR_FORMAT,
                  "global_block_size = 0");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"encoder_attention_type\": \"global\"}", &c),
                  FAT5_ERR_UNSUPPORTED, "encoder_attention_type 'global' is unknown");
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"model_type\": \"longt5\", \"encoder_attention_type\": 1}", &c),
                  FAT5_ERR_FORMAT, "encoder_attention_type");
    // LongT5's fields belong to model_type longt5
    TM_EXPECT_ERR(T, tm_cfg(T, "{\"local_radius\": 8}", &c), FAT5_ERR_UNSUPPORTED, "unknown field 'local_radius'");
    c = fat5_model_config_default();
    c.enc_attention = FAT5_ENC_ATTN_LOCAL;
    TM_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_UNSUPPORTED, "model_type longt5");
}

// Both LongT5 fixtures (transformers' LongT5ForConditionalGeneration) load with their own names
// (LocalSelfAttention / TransientGlobalSelfAttention, the global bias table and the per-layer
// global norm) and save back with the same tensor entries and bytes; the transient-global model
// refuses to compute, with the reason.
static void t_longt5_checkpoint(fat5_test *T) {
    static const char *const fx[2] = {"longt5_local", "longt5_tglobal"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < 2; k++) {
        char src[512], dst[600], p1[700], p2[700];
        fat5_model *a = NULL, *b = NULL;
        fat5_st_file *f1 = NULL, *f2 = NULL;
        int i, n_model = 0;
        snprintf(src, sizeof src, "%s/%s", FAT5_TEST_DATA, fx[k]);
        snprintf(dst, sizeof dst, "%s/rt_%s", fat5_test_tmpdir(T), fx[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &a));
        FAT5_CHECK(T, a->cfg.enc_attention == (k ? FAT5_ENC_ATTN_TGLOBAL : FAT5_ENC_ATTN_LOCAL));
        FAT5_CHECK(T, fat5_model_find_tensor(a, k ? "encoder.block.1.layer.0.TransientGlobalSelfAttention.q.weight"
                                                  : "encoder.block.1.layer.0.LocalSelfAttention.q.weight") >= 0);
        FAT5_CHECK(T, (fat5_model_find_tensor(
                           a, "encoder.block.0.layer.0.TransientGlobalSelfAttention.global_relative_attention_bias.weight")
                       >= 0) == k);
        FAT5_REQUIRE_OK(T, fat5_model_save(a, dst));
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dst, &b));
        FAT5_CHECK(T, a->n_floats == b->n_floats && !memcmp(a->w, b->w, a->n_floats * sizeof(float)));
        FAT5_CHECK(T, !memcmp(&a->cfg, &b->cfg, sizeof a->cfg));
        snprintf(p1, sizeof p1, "%s/model.safetensors", src);
        snprintf(p2, sizeof p2, "%s/model.safetensors", dst);
        FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p1, &f1));
        FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p2, &f2));
        // every tensor of the fixture but the embed_tokens aliases of shared.weight is saved back
        for (i = 0; i < fat5_st_tensor_count(f1); i++) {
            const char *nm = fat5_st_get(f1, i)->name;
            int j = fat5_st_find(f2, nm);
            if (strstr(nm, "embed_tokens")) continue;
            n_model++;
            FAT5_CHECK_MSG(T, j >= 0, "%s: '%s' not saved", fx[k], nm);
            if (j >= 0) {
                int64_t e, numel = (int64_t)((fat5_st_get(f1, i)->end - fat5_st_get(f1, i)->begin) / 4);
                float *x = (float *)malloc((size_t)numel * sizeof(float)), *y = (float *)malloc((size_t)numel * sizeof(float));
                FAT5_REQUIRE(T, x && y);
                FAT5_CHECK(T, fat5_st_read_f32(f1, i, x, numel) == FAT5_OK && fat5_st_read_f32(f2, j, y, numel) == FAT5_OK);
                for (e = 0; e < numel && x[e] == y[e]; e++) {}
                FAT5_CHECK_MSG(T, e == numel, "%s: '%s' differs at %lld", fx[k], nm, (long long)e);
                free(x);
                free(y);
            }
        }
        FAT5_CHECK_MSG(T, fat5_st_tensor_count(f2) == n_model, "%s: saved %d tensors, the fixture has %d", fx[k],
                       fat5_st_tensor_count(f2), n_model);
        fat5_st_destroy(f1);
        fat5_st_destroy(f2);
        fat5_model_destroy(a);
        fat5_model_destroy(b);
    }
}

// A window at least as long as every sequence is full attention, bit for bit (forward, dq with the
// bias gradient, dk / dv); a window of r changes exactly the queries that have keys beyond r.
static void t_attn_window(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    enum { H = 2, DK = 4, NB = 8, MD = 8 };
    int32_t cu[4] = {0, 13, 14, 23}, seq[23];
    float q[23 * H * DK], k[23 * H * DK], v[23 * H * DK], dout[23 * H * DK], bias[NB * H];
    float o[2][23 * H * DK], lse[2][23 * H], delta[23 * H], dq[2][23 * H * DK], dk[2][23 * H * DK],
        dv[2][23 * H * DK], db[2][NB * H];
    fat5_rng r = fat5_rng_init(9);
    int i, w, s;
    for (s = 0; s < 3; s++)
        for (i = cu[s]; i < cu[s + 1]; i++) seq[i] = s;
    for (i = 0; i < 23 * H * DK; i++)
        q[i] = (float)fat5_rng_normal(&r), k[i] = (float)fat5_rng_normal(&r), v[i] = (float)fat5_rng_normal(&r),
        dout[i] = (float)fat5_rng_normal(&r);
    for (i = 0; i < NB * H; i++) bias[i] = (float)fat5_rng_normal(&r);
    for (w = 0; w < 2; w++) {   // 0: full; 1: window 12 (every sequence is at most 13 long)
        int kind = FAT5__ATTN_BIDIR | (w ? FAT5__ATTN_WINDOW(12) : 0);
#define A(x) FAT5__ADDR(x)
        memset(db[w], 0, sizeof db[w]);
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_fwd(ctx, A(o[w]), A(lse[w]), A(q), A(k), A(v), A(bias), 0, A(cu), A(cu),
                                              A(seq), 23, H, DK, kind, NB, MD, 0, 0, fat5__drop_none()));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_delta(ctx, A(delta), A(o[w]), A(dout), 23, H, DK));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_dq(ctx, A(dq[w]), A(db[w]), A(dout), A(lse[w]), A(delta), A(q), A(k),
                                                 A(v), A(bias), 0, A(cu), A(cu), A(seq), 23, H, DK, kind, NB, MD, 0, 0, 0, fat5__drop_none()));
        FAT5_REQUIRE_OK(T, fat5__cpu_attn_bwd_dkv(ctx, A(dk[w]), A(dv[w]), A(dout), A(lse[w]), A(delta), A(q), A(k),
                                                  A(v), A(bias), 0, A(cu), A(cu), A(seq), 23, H, DK, kind, NB, MD, 0, 0, fat5__drop_none()));
    }
    FAT5_CHECK(T, !memcmp(o[0], o[1], sizeof o[0]) && !memcmp(lse[0], lse[1], sizeof lse[0]));
    FAT5_CHECK(T, !memcmp(dq[0], dq[1], sizeof dq[0]) && !memcmp(db[0], db[1], sizeof db[0]));
    FAT5_CHECK(T, !memcmp(dk[0], dk[1], sizeof dk[0]) && !memcmp(dv[0], dv[1], sizeof dv[0]));
    // radius 3: in the 13-token sequence, query 0 sees keys 0..3 only; its output is the softmax
    // over those four keys, computed here directly
    FAT5_REQUIRE_OK(T, fat5__cpu_attn_fwd(ctx, A(o[1]), A(lse[1]), A(q), A(k), A(v), A(bias), 0, A(cu), A(cu), A(seq),
                                          23, H, DK, FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(3), NB, MD, 0, 0, fat5__drop_none()));
#undef A
    {
        double sc[4], mx = -1e300, sum = 0, want[DK];
        int j, d;
        for (j = 0; j < 4; j++) {
            sc[j] = fat5__cpu_attn_score(q, k + j * H * DK, bias, 0, j, 0, H, DK, FAT5__ATTN_BIDIR, NB, MD);
            if (sc[j] > mx) mx = sc[j];
        }
        for (d = 0; d < DK; d++) want[d] = 0;
        for (j = 0; j < 4; j++) {
            double e = exp(sc[j] - mx);
            sum += e;
            for (d = 0; d < DK; d++) want[d] += e * v[j * H * DK + d];
        }
        for (d = 0; d < DK; d++)
            FAT5_CHECK_MSG(T, fabs(o[1][d] - want[d] / sum) <= 1e-6, "radius 3, query 0, dim %d: %g vs %g", d,
                           (double)o[1][d], want[d] / sum);
        FAT5_CHECK(T, memcmp(o[0], o[1], sizeof o[0]) != 0);
    }
}

// ---- the pattern ops against a dense reference ----

// A packed attention problem: 4 sequences of 13, 1, 7 and 22 tokens, H = 4 heads of dk = 4; q
// and o rows are the tokens (cu), k and v rows the tokens (cu_k) and, with TGLOBAL, the globals
// (cu_g: after the tokens, or before them with `globals_first`). bias: T5's two tables [2, nb, H]
// (bidirectional, then the transient-global one), FIRE's block, or none.
enum { TL_NS = 4, TL_T = 43, TL_H = 4, TL_DK = 4, TL_NB = 8, TL_MD = 12, TL_W = 5, TL_L0 = 10, TL_MAXG = 43 };
static const int32_t tl_cu[TL_NS + 1] = {0, 13, 14, 21, 43};

typedef struct tl_prob {
    int kind, g, globals_first, no_bias;
    int32_t cu_k[TL_NS + 1], cu_g[TL_NS + 1], q_seq[TL_T], k_seq[TL_T + TL_MAXG];
    int64_t Tk, n_bias;
    float q[TL_T * TL_H * TL_DK], k[(TL_T + TL_MAXG) * TL_H * TL_DK], v[(TL_T + TL_MAXG) * TL_H * TL_DK];
    float dout[TL_T * TL_H * TL_DK], bias[2 * TL_NB * TL_H + FAT5__FIRE_NUMEL(TL_H, TL_W)];
} tl_prob;

// what the four ops give, and what the reference gives (rounded to fp32 for the comparison)
typedef struct tl_out {
    float o[TL_T * TL_H * TL_DK], lse[TL_T * TL_H], delta[TL_T * TL_H], dq[TL_T * TL_H * TL_DK];
    float dk[(TL_T + TL_MAXG) * TL_H * TL_DK], dv[(TL_T + TL_MAXG) * TL_H * TL_DK];
    float dbias[2 * TL_NB * TL_H + FAT5__FIRE_NUMEL(TL_H, TL_W)];
} tl_out;

// Sets up the problem of `kind` (a block size or prefix g) with values from seed: the globals'
// rows, the maps, q, k, v, dout and the bias (T5 tables in N(0, 1); FIRE's MLP in N(0, 1), c and
// L_multiplier away from their initial values).
static void tl_setup(tl_prob *P, int kind, int g, int globals_first, int no_bias, uint64_t seed) {
    fat5_rng r = fat5_rng_init(seed);
    int64_t s, t, G = 0, n;
    memset(P, 0, sizeof *P);
    P->kind = kind, P->g = g, P->globals_first = globals_first, P->no_bias = no_bias;
    for (s = 0; s < TL_NS; s++) G += (kind & FAT5__ATTN_TGLOBAL) ? (tl_cu[s + 1] - tl_cu[s]) / g : 0;
    P->Tk = TL_T + G;
    for (s = 0, n = 0; s <= TL_NS; s++) {
        P->cu_k[s] = tl_cu[s] + (int32_t)(globals_first ? G : 0);
        P->cu_g[s] = (int32_t)((globals_first ? 0 : TL_T) + n);
        if (s < TL_NS) n += (kind & FAT5__ATTN_TGLOBAL) ? (tl_cu[s + 1] - tl_cu[s]) / g : 0;
    }
    for (s = 0; s < TL_NS; s++) {
        for (t = tl_cu[s]; t < tl_cu[s + 1]; t++) P->q_seq[t] = (int32_t)s;
        for (t = P->cu_k[s]; t < P->cu_k[s + 1]; t++) P->k_seq[t] = (int32_t)s;
        for (t = P->cu_g[s]; t < P->cu_g[s + 1]; t++) P->k_seq[t] = (int32_t)s;
    }
    for (t = 0; t < TL_T * TL_H * TL_DK; t++)
        P->q[t] = (float)fat5_rng_normal(&r), P->dout[t] = (float)fat5_rng_normal(&r);
    for (t = 0; t < P->Tk * TL_H * TL_DK; t++) P->k[t] = (float)fat5_rng_normal(&r), P->v[t] = (float)fat5_rng_normal(&r);
    if (kind & FAT5__ATTN_FIRE) {
        P->n_bias = FAT5__FIRE_NUMEL(TL_H, TL_W);
        for (t = 0; t < P->n_bias; t++) P->bias[t] = (float)fat5_rng_normal(&r);
        P->bias[FAT5__FIRE_C(TL_H, TL_W)] = 0.137f;
        P->bias[FAT5__FIRE_LM(TL_H, TL_W)] = 0.931f;
    } else if (!(kind & FAT5__ATTN_ALIBI)) {
        P->n_bias = 2 * TL_NB * TL_H;   // both tables, whatever the kind: the unused one's gradient stays 0
        for (t = 0; t < P->n_bias; t++) P->bias[t] = (float)fat5_rng_normal(&r);
    }
}

// The pattern written out: may query i see token key j (head h of H)? A window sees |j - i| <=
// r; block-global adds the pairs where either token is among the first g; asymmetric ALiBi hides
// the keys after i from the first half of the heads, the keys before i from the others.
static int tl_sees(int kind, int g, int h, int64_t i, int64_t j) {
    int64_t rad = FAT5__ATTN_RADIUS(kind);
    if ((kind & FAT5__ATTN_ALIBI_ASYM) && (h < TL_H / 2 ? j > i : j < i)) return 0;
    if (rad < 0 || (j - i <= rad && i - j <= rad)) return 1;
    return (kind & FAT5__ATTN_PREFIX) && (i < g || j < g);
}

// the position bias of a token pair (no pattern): T5's bucket, ALiBi's slope times the distance,
// FIRE's MLP; 0 without one
static double tl_pair_bias(const tl_prob *P, int h, int64_t i, int64_t j) {
    int kind = P->kind;
    if (kind & FAT5__ATTN_FIRE)
        return fat5__fire_mlp(P->bias, TL_H, TL_W, h, fat5__fire_u(P->bias, TL_H, TL_W, TL_L0, i, j, NULL));
    if (kind & FAT5__ATTN_ALIBI) {
        double slope = (kind & FAT5__ATTN_ALIBI_ASYM) ? fat5__alibi_slope(h % (TL_H / 2), TL_H / 2)
                                                      : fat5__alibi_slope(h, TL_H);
        return -slope * (double)(j > i ? j - i : i - j);
    }
    return P->no_bias ? 0.0 : P->bias[fat5__rel_bucket(j - i, 1, TL_NB, TL_MD) * TL_H + h];
}

// The dense reference, in double: for every query, a score for every token of its sequence (the
// pattern's mask -inf outside) and every global of its sequence, softmax, o and lse; then the
// backward of the loss sum(dout * o) taken directly: ds = p (dout . v - dout . o), dq = sum ds k,
// dk += ds q, dv += p dout, and ds added to the bias entry (or FIRE's parameters) each score read.
static void tl_reference(const tl_prob *P, tl_out *R) {
    enum { LD = TL_H * TL_DK, SH = FAT5__FIRE_SHARES(TL_W) };
    static double o[TL_T * LD], dq[TL_T * LD], dk[(TL_T + TL_MAXG) * LD], dv[(TL_T + TL_MAXG) * LD];
    static double db[2 * TL_NB * TL_H], shares[TL_H * SH];
    int tglobal = (P->kind & FAT5__ATTN_TGLOBAL) != 0, shared = (P->kind & FAT5__ATTN_GSHARED) != 0;
    int64_t s, i, j, e, n_k = P->Tk * LD;
    int h, d;
    memset(o, 0, sizeof o), memset(dq, 0, sizeof dq), memset(dk, 0, sizeof dk), memset(dv, 0, sizeof dv);
    memset(db, 0, sizeof db), memset(shares, 0, sizeof shares);
    memset(R, 0, sizeof *R);
    for (s = 0; s < TL_NS; s++) {
        int64_t n = tl_cu[s + 1] - tl_cu[s], G = tglobal ? P->cu_g[s + 1] - P->cu_g[s] : 0;
        for (i = 0; i < n; i++)
            for (h = 0; h < TL_H; h++) {
                double sc[64], p[64], mx = -INFINITY, sum = 0, dot_o = 0;
                int64_t row[64], b = G ? (i / P->g < G - 1 ? i / P->g : G - 1) : 0, qr = tl_cu[s] + i;
                const float *qi = P->q + qr * LD + h * TL_DK, *doi = P->dout + qr * LD + h * TL_DK;
                for (j = 0; j < n + G; j++) {  // keys: the n tokens, then the G globals
                    const float *kj;
                    row[j] = j < n ? P->cu_k[s] + j : P->cu_g[s] + (j - n);
                    kj = P->k + row[j] * LD + h * TL_DK;
                    sc[j] = 0;
                    for (d = 0; d < TL_DK; d++) sc[j] += (double)qi[d] * kj[d];
                    if (j < n)
                        sc[j] = tl_sees(P->kind, P->g, h, i, j) ? sc[j] + tl_pair_bias(P, h, i, j) : -INFINITY;
                    else if (!P->no_bias)
                        sc[j] += P->bias[(shared ? 0 : TL_NB * TL_H) + fat5__rel_bucket(j - n - b, 1, TL_NB, TL_MD) * TL_H + h];
                    if (sc[j] > mx) mx = sc[j];
                }
                for (j = 0; j < n + G; j++) sum += (p[j] = sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx));
                for (j = 0; j < n + G; j++) {
                    p[j] /= sum;
                    for (d = 0; d < TL_DK; d++) o[qr * LD + h * TL_DK + d] += p[j] * P->v[row[j] * LD + h * TL_DK + d];
                }
                R->lse[qr * TL_H + h] = (float)(mx + log(sum));
                for (d = 0; d < TL_DK; d++) dot_o += (double)doi[d] * o[qr * LD + h * TL_DK + d];
                for (j = 0; j < n + G; j++) {
                    double dp = 0, ds;
                    if (p[j] == 0) continue;
                    for (d = 0; d < TL_DK; d++) dp += (double)doi[d] * P->v[row[j] * LD + h * TL_DK + d];
                    ds = p[j] * (dp - dot_o);
                    for (d = 0; d < TL_DK; d++) {
                        dq[qr * LD + h * TL_DK + d] += ds * P->k[row[j] * LD + h * TL_DK + d];
                        dk[row[j] * LD + h * TL_DK + d] += ds * qi[d];
                        dv[row[j] * LD + h * TL_DK + d] += p[j] * doi[d];
                    }
                    if (j >= n) {
                        if (!P->no_bias)
                            db[(shared ? 0 : TL_NB * TL_H) + fat5__rel_bucket(j - n - b, 1, TL_NB, TL_MD) * TL_H + h] += ds;
                    } else if (P->kind & FAT5__ATTN_FIRE) {
                        fat5__fire_grad(P->bias, TL_H, TL_W, TL_L0, h, i, j, ds, shares + h * SH);
                    } else if (!(P->kind & FAT5__ATTN_ALIBI) && !P->no_bias) {
                        db[fat5__rel_bucket(j - i, 1, TL_NB, TL_MD) * TL_H + h] += ds;
                    }
                }
            }
    }
    for (e = 0; e < TL_T * LD; e++) R->o[e] = (float)o[e], R->dq[e] = (float)dq[e];
    for (e = 0; e < n_k; e++) R->dk[e] = (float)dk[e], R->dv[e] = (float)dv[e];
    if (P->kind & FAT5__ATTN_FIRE) FAT5__FIRE_REDUCE(R->dbias, shares, TL_H, TL_W);
    else for (e = 0; e < P->n_bias; e++) R->dbias[e] = (float)db[e];
}

// the four ops as the model runs them: attn_fwd, bwd_delta, bwd_dq (with the bias gradient) and
// bwd_dkv over every key row
static fat5_status tl_ops(fat5_ctx *ctx, const tl_prob *P, tl_out *X) {
    fat5__addr bias = P->no_bias || (P->kind & FAT5__ATTN_ALIBI) ? 0 : A_(P->bias);
    fat5__addr cu_g = (P->kind & FAT5__ATTN_TGLOBAL) ? A_(P->cu_g) : 0;
    fat5_status st;
    int nb = (P->kind & FAT5__ATTN_FIRE) ? TL_W : TL_NB, md = (P->kind & FAT5__ATTN_FIRE) ? TL_L0 : TL_MD;
    memset(X, 0, sizeof *X);
    if ((st = fat5__cpu_attn_fwd(ctx, A_(X->o), A_(X->lse), A_(P->q), A_(P->k), A_(P->v), bias, 0, A_(tl_cu),
                                 A_(P->cu_k), A_(P->q_seq), TL_T, TL_H, TL_DK, P->kind, nb, md, P->g, cu_g, fat5__drop_none())))
        return st;
    if ((st = fat5__cpu_attn_bwd_delta(ctx, A_(X->delta), A_(X->o), A_(P->dout), TL_T, TL_H, TL_DK))) return st;
    if ((st = fat5__cpu_attn_bwd_dq(ctx, A_(X->dq), bias ? A_(X->dbias) : 0, A_(P->dout), A_(X->lse), A_(X->delta),
                                    A_(P->q), A_(P->k), A_(P->v), bias, 0, A_(tl_cu), A_(P->cu_k), A_(P->q_seq), TL_T,
                                    TL_H, TL_DK, P->kind, nb, md, P->g, cu_g, 0, fat5__drop_none())))
        return st;
    return fat5__cpu_attn_bwd_dkv(ctx, A_(X->dk), A_(X->dv), A_(P->dout), A_(X->lse), A_(X->delta), A_(P->q),
                                  A_(P->k), A_(P->v), bias, 0, A_(tl_cu), A_(P->cu_k), A_(P->k_seq), P->Tk, TL_H,
                                  TL_DK, P->kind, nb, md, P->g, cu_g, fat5__drop_none());
}

// Every pattern, on 4 packed sequences (13, 1, 7, 22 tokens), against the dense reference: o,
// lse, dq, dk, dv (global rows included) and the bias gradient (both T5 tables: the one a kind
// does not read must stay 0; FIRE's parameter block). Windows of 1, 3, 21 (the longest sequence
// less one: full) and 100; block-global prefixes of 1, 5, 22 (a whole sequence) and 40 (longer
// than every sequence); transient-global blocks of 2 .. 30 (sequences shorter than a block,
// lengths not multiples of it, globals before or after the tokens), with their own table, T5's
// (GSHARED) or no bias; windows and block-global with ALiBi (sym, asym) and FIRE. fp32 ops
// summing in double against a double reference: 1e-5.
static void t_longt5_attn_dense(fat5_test *T) {
    static const struct { int kind, g, first, no_bias; const char *what; } cs[] = {
        {FAT5__ATTN_BIDIR, 0, 0, 0, "full"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(1), 0, 0, 0, "local r 1"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(3), 0, 0, 0, "local r 3"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(21), 0, 0, 0, "local r 21"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(100), 0, 0, 0, "local r 100"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2), 0, 0, 1, "local r 2, no bias"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_PREFIX, 1, 0, 0, "block-global r 1 g 1"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_PREFIX, 5, 0, 0, "block-global r 2 g 5"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_PREFIX, 22, 0, 0, "block-global r 1 g 22"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(3) | FAT5__ATTN_PREFIX, 40, 0, 0, "block-global r 3 g 40"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_TGLOBAL, 2, 0, 0, "tglobal r 1 g 2"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(3) | FAT5__ATTN_TGLOBAL, 5, 1, 0, "tglobal r 3 g 5, globals first"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL, 8, 0, 0, "tglobal r 2 g 8"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_TGLOBAL, 30, 0, 0, "tglobal r 1 g 30 (no globals)"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED, 3, 0, 0, "tglobal shared r 2 g 3"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED, 4, 1, 0,
         "tglobal shared r 1 g 4, globals first"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL, 3, 0, 1, "tglobal r 2 g 3, no bias"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_WINDOW(2), 0, 0, 0, "ALiBi local r 2"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_PREFIX, 3, 0, 0,
         "ALiBi block-global r 2 g 3"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM | FAT5__ATTN_WINDOW(3), 0, 0, 0,
         "ALiBi asym local r 3"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_PREFIX, 4, 0, 0,
         "ALiBi asym block-global r 1 g 4"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_FIRE | FAT5__ATTN_WINDOW(3), 0, 0, 0, "FIRE local r 3"},
        {FAT5__ATTN_BIDIR | FAT5__ATTN_FIRE | FAT5__ATTN_WINDOW(1) | FAT5__ATTN_PREFIX, 4, 0, 0,
         "FIRE block-global r 1 g 4"},
    };
    static tl_prob P;
    static tl_out X, R;
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t c;
    for (c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        char w[160];
        int64_t nk;
        tl_setup(&P, cs[c].kind, cs[c].g, cs[c].first, cs[c].no_bias, 100 + c);
        nk = P.Tk * TL_H * TL_DK;
        tl_reference(&P, &R);
        FAT5_REQUIRE_OK(T, tl_ops(ctx, &P, &X));
#define TL_CLOSE(f, n) (snprintf(w, sizeof w, "%s: " #f, cs[c].what), fat5_check_close(T, w, X.f, R.f, (size_t)(n), 1e-5, 1e-5))
        TL_CLOSE(o, TL_T * TL_H * TL_DK);
        TL_CLOSE(lse, TL_T * TL_H);
        TL_CLOSE(dq, TL_T * TL_H * TL_DK);
        TL_CLOSE(dk, nk);
        TL_CLOSE(dv, nk);
        TL_CLOSE(dbias, P.n_bias);
#undef TL_CLOSE
    }
}

// Block-global with a window at least as long as every sequence (r 21 or more: the longest has
// 22 tokens), or with a prefix covering every sequence (g 40, r 1), is full attention bit for bit
// (o, lse, dq with the bias gradient, dk, dv), whatever g; T5 buckets, asymmetric ALiBi, FIRE. A
// prefix that does not cover the sequences, with a short window, differs.
static void t_longt5_prefix_full(fat5_test *T) {
    static const int scheme[3] = {0, FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM, FAT5__ATTN_FIRE};
    static const struct { int r, g; } rg[6] = {{21, 1}, {21, 5}, {22, 13}, {1000, 22}, {21, 40}, {1, 40}};
    static tl_prob P;
    static tl_out F, X;
    fat5_ctx *ctx = fat5_test_ctx(T);
    int sc, c;
    for (sc = 0; sc < 3; sc++) {
        tl_setup(&P, FAT5__ATTN_BIDIR | scheme[sc], 0, 0, 0, 7);
        FAT5_REQUIRE_OK(T, tl_ops(ctx, &P, &F));
        for (c = 0; c < 7; c++) {
            int diff;
            P.kind = FAT5__ATTN_BIDIR | scheme[sc] | FAT5__ATTN_PREFIX | FAT5__ATTN_WINDOW(c < 6 ? rg[c].r : 2);
            P.g = c < 6 ? rg[c].g : 3;
            FAT5_REQUIRE_OK(T, tl_ops(ctx, &P, &X));
            diff = memcmp(F.o, X.o, sizeof F.o) || memcmp(F.lse, X.lse, sizeof F.lse) || memcmp(F.dq, X.dq, sizeof F.dq) ||
                   memcmp(F.dk, X.dk, sizeof F.dk) || memcmp(F.dv, X.dv, sizeof F.dv) ||
                   memcmp(F.dbias, X.dbias, sizeof F.dbias);
            if (c < 6)
                FAT5_CHECK_MSG(T, !diff, "scheme %d, block-global r %d g %d differs from full attention", sc, rg[c].r,
                               rg[c].g);
            else
                FAT5_CHECK_MSG(T, diff, "scheme %d: block-global r 2 g 3 equals full attention", sc);
        }
    }
}

// block_sum against a direct sum (every token added to the global of its block, min(i / g, G - 1):
// the orphans of a sequence whose length is not a multiple of g join its last block; a sequence
// shorter than g has none), and block_sum_bwd as its transpose: <block_sum(x), y> = <x,
// block_sum_bwd(y)>, the tokens of a sequence without globals left as they were. Small whole
// numbers, so that every sum is exact and the checks are equalities.
static void t_longt5_block_sum(fat5_test *T) {
    enum { NS = 5, TT = 33, D = 5 };
    static const int32_t cu[NS + 1] = {0, 7, 9, 18, 21, 33};   // 7, 2, 9, 3, 12 tokens
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_rng r = fat5_rng_init(5);
    int g;
    for (g = 1; g <= 13; g += (g < 4 ? 1 : 9)) {  // g 1, 2, 3, 4, 13
        int32_t cu_g[NS + 1], seq[TT + TT];
        float x[TT * D], dx[TT * D], dx0[TT * D], out[TT * D], ref[TT * D], y[TT * D];
        int64_t s, t, j, G = 0, n;
        double xy = 0, yx = 0;
        for (s = 0; s < NS; s++) {
            cu_g[s] = (int32_t)(TT + G);
            for (t = cu[s]; t < cu[s + 1]; t++) seq[t] = (int32_t)s;
            for (t = 0; t < (cu[s + 1] - cu[s]) / g; t++) seq[TT + G++] = (int32_t)s;
        }
        cu_g[NS] = (int32_t)(TT + G);
        for (t = 0; t < TT * D; t++) {
            x[t] = (float)((int)fat5_rng_below(&r, 17) - 8);
            y[t] = (float)((int)fat5_rng_below(&r, 17) - 8);
            dx0[t] = dx[t] = (float)((int)fat5_rng_below(&r, 17) - 8);
            ref[t] = 0;
        }
        for (s = 0; s < NS; s++) {
            int64_t Gs = cu_g[s + 1] - cu_g[s];
            for (t = cu[s], n = 0; t < cu[s + 1]; t++, n++)
                if (Gs) {
                    int64_t b = n / g < Gs - 1 ? n / g : Gs - 1;
                    for (j = 0; j < D; j++) ref[(cu_g[s] - TT + b) * D + j] += x[t * D + j];
                }
        }
        FAT5_REQUIRE_OK(T, fat5__cpu_block_sum(ctx, A_(out), A_(x), A_(cu), A_(cu_g), A_(seq), G, D, g));
        FAT5_CHECK_MSG(T, G == 0 || !memcmp(out, ref, (size_t)(G * D) * sizeof(float)), "g %d: block sums differ", g);
        FAT5_REQUIRE_OK(T, fat5__cpu_block_sum_bwd(ctx, A_(dx), A_(y), A_(cu), A_(cu_g), A_(seq), TT, D, g));
        for (t = 0; t < G * D; t++) xy += (double)out[t] * y[t];
        for (t = 0; t < TT * D; t++) yx += (double)x[t] * (dx[t] - dx0[t]);
        FAT5_CHECK_MSG(T, xy == yx, "g %d: <block_sum(x), y> = %.17g, <x, block_sum_bwd(y)> = %.17g", g, xy, yx);
        for (s = 0; s < NS; s++)
            if (cu_g[s + 1] == cu_g[s])
                FAT5_CHECK_MSG(T, !memcmp(dx + cu[s] * D, dx0 + cu[s] * D, (size_t)((cu[s + 1] - cu[s]) * D) * sizeof(float)),
                               "g %d: sequence %d has no globals but its gradient changed", g, (int)s);
        FAT5_CHECK(T, g != 3 || G == 2 + 0 + 3 + 1 + 4);
    }
}

// ---- patterns of a run on a plain T5 model ----

// The three patterns on tm_batch() (12, 1 and 6 tokens; a prefix of 1 fits every sequence; blocks
// of 5 leave orphans and a sequence without globals) and on td_inputs() (5, 11 and 2 tokens).
static const char *const tl_specs[3] = {"local:2", "block-global:2:1", "transient-global:2:5"};
static const char *const tl_specs_td[3] = {"local:2", "block-global:1:2", "transient-global:2:3"};

// a random T5 (tm_tiny_config, gated) with norms away from 1
static fat5_model *tl_t5(fat5_test *T) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    if (fat5_model_create(fat5_test_ctx(T), &c, 11, &m) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "create: %s", fat5_last_error(fat5_test_ctx(T)));
        return NULL;
    }
    tm_perturb_norms(m, 0);
    return m;
}

static fat5_status tl_set(fat5_test *T, fat5_model *m, const char *spec) {
    fat5_attention a;
    fat5_status st = fat5_attention_parse(fat5_test_ctx(T), spec, &a);
    return st ? st : fat5_model_set_attention(m, &a);
}

// Every parameter's gradient under each pattern against central differences of the whole
// model's loss (transient-global: the globals' bias from T5's table, their norm of weight 1);
// block-global also with asymmetric ALiBi, RoPE and FIRE (test_posenc.c's models).
static void t_longt5_pattern_fd(fat5_test *T) {
    static const int enc[3] = {3, 4, 6};
    fat5_model *m = tl_t5(T);
    int k;
    FAT5_REQUIRE(T, m != NULL);
    for (k = 0; k < 3; k++) {
        FAT5_REQUIRE_OK(T, tl_set(T, m, tl_specs[k]));
        tm_model_fd_check(T, m, tl_specs[k], 0, 20);
    }
    fat5_model_destroy(m);
    for (k = 0; k < 3; k++) {
        char what[100];
        m = tp_model(T, enc[k], 11);
        if (!m) continue;
        snprintf(what, sizeof what, "%s, block-global:2:1", tp_enc_name[enc[k]]);
        FAT5_REQUIRE_OK(T, tl_set(T, m, "block-global:2:1"));
        tm_model_fd_check(T, m, what, 0, 10);
        fat5_model_destroy(m);
    }
}

// logits [n_dec, V] and every gradient of m on tm_batch() (z-loss, label smoothing)
static int tl_fwd_bwd(fat5_test *T, fat5_model *m, float *logits, float *grads) {
    fat5_batch b = tm_batch();
    fat5_loss_config lc;
    memset(&lc, 0, sizeof lc);
    lc.z_loss = 1e-2;
    lc.label_smoothing = 0.1;
    if (fat5_model_forward(m, &b, &lc, NULL) || fat5_model_get_logits(m, logits, b.n_dec_tokens * m->cfg.vocab_size) ||
        fat5_model_zero_grad(m) || fat5_model_backward(m, 1.0f)) {
        FAT5_CHECK_MSG(T, 0, "forward / backward: %s", fat5_last_error(fat5_test_ctx(T)));
        return 0;
    }
    memcpy(grads, FAT5__HOST(const float, m->gd), m->n_floats * sizeof(float));
    return 1;
}

// A window at least as long as the longest sequence (12 tokens: radius 11 and more), local or
// block-global, gives full attention's logits and gradients bit for bit; each pattern of
// tl_specs changes both (the patterns act).
static void t_longt5_pattern_full(fat5_test *T) {
    static const char *const same[4] = {"local:11", "local:1000", "block-global:11:1", "block-global:12:1"};
    fat5_model *m = tl_t5(T);
    int64_t nl;
    float *lf, *gf, *lx, *gx;
    int k;
    FAT5_REQUIRE(T, m != NULL);
    nl = 14 * m->cfg.vocab_size;
    lf = (float *)malloc((size_t)nl * sizeof(float)), lx = (float *)malloc((size_t)nl * sizeof(float));
    gf = (float *)malloc(m->n_floats * sizeof(float)), gx = (float *)malloc(m->n_floats * sizeof(float));
    FAT5_REQUIRE(T, lf && lx && gf && gx);
    if (tl_fwd_bwd(T, m, lf, gf))
        for (k = 0; k < 7; k++) {
            const char *spec = k < 4 ? same[k] : tl_specs[k - 4];
            int dl, dg;
            FAT5_REQUIRE_OK(T, tl_set(T, m, spec));
            if (!tl_fwd_bwd(T, m, lx, gx)) break;
            dl = memcmp(lf, lx, (size_t)nl * sizeof(float)) != 0;
            dg = memcmp(gf, gx, m->n_floats * sizeof(float)) != 0;
            if (k < 4) FAT5_CHECK_MSG(T, !dl && !dg, "%s: logits %s, gradients %s full attention's", spec,
                                      dl ? "differ from" : "equal", dg ? "differ from" : "equal");
            else FAT5_CHECK_MSG(T, dl && dg, "%s: the same logits (%d) or gradients (%d) as full attention", spec, !dl, !dg);
        }
    free(lf), free(lx), free(gf), free(gx);
    fat5_model_destroy(m);
}

// Cached decoding of m under each of n patterns gives the teacher-forced forward's logits (30
// positions, inputs of 5, 11, 2 tokens) and the decoder's encoder output is the forward's, bit for
// bit; a decoder created before set_attention keeps the model's pattern then (`own`); greedy
// fat5_generate picks, at every step, the argmax of the forward's logits for its own tokens.
static void tl_decode_patterns(fat5_test *T, fat5_model *m, const char *what, const char *const *specs, int n) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_decoder *d = NULL, *d_own = NULL;
    int32_t enc[18], cu[4], dec[3][TD_STEPS];
    float *ref = NULL, *ref_own = NULL, *lg = NULL;
    int64_t V, D;
    int k, t, i;
    V = m->cfg.vocab_size, D = m->cfg.d_model;
    td_inputs(V, enc, cu, dec);
    lg = (float *)malloc((size_t)(3 * V) * sizeof(float));
    ref_own = td_forward_logits(T, m, enc, cu, dec);
    FAT5_REQUIRE(T, lg && ref_own);
    FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 3, 18, TD_STEPS, &d_own));
    for (k = 0; k < n; k++) {
        fat5_generate_config gc = fat5_generate_config_from_model(m);
        fat5_generate_result gr;
        double worst = 0, worst_own = 0;
        FAT5_REQUIRE_OK(T, tl_set(T, m, specs[k]));
        ref = td_forward_logits(T, m, enc, cu, dec);
        FAT5_REQUIRE(T, ref != NULL);
        FAT5_CHECK_MSG(T, td_maxdiff(ref, ref_own, 3 * TD_STEPS * V) > 1e-3, "%s, %s: the logits of the model's own pattern",
                       what, specs[k]);
        FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 3, 18, TD_STEPS, &d));
        FAT5_REQUIRE_OK(T, fat5_decoder_start(d, enc, cu, 3, 1));
        FAT5_REQUIRE_OK(T, fat5_decoder_start(d_own, enc, cu, 3, 1));
        FAT5_CHECK_MSG(T, !memcmp(FAT5__HOST(float, d->enc_out), FAT5__HOST(float, m->ws.enc_out),
                                  (size_t)(18 * D) * sizeof(float)),
                       "%s, %s: the decoder's encoder output differs from the forward's", what, specs[k]);
        for (t = 0; t < TD_STEPS; t++) {
            int32_t tok[3] = {dec[0][t], dec[1][t], dec[2][t]};
            FAT5_REQUIRE_OK(T, fat5_decoder_step(d, tok, NULL, 3, lg));
            for (i = 0; i < 3; i++) {
                double e = td_maxdiff(lg + i * V, ref + ((int64_t)i * TD_STEPS + t) * V, V);
                if (!(e <= worst)) worst = e;
            }
            FAT5_REQUIRE_OK(T, fat5_decoder_step(d_own, tok, NULL, 3, lg));
            for (i = 0; i < 3; i++) {
                double e = td_maxdiff(lg + i * V, ref_own + ((int64_t)i * TD_STEPS + t) * V, V);
                if (!(e <= worst_own)) worst_own = e;
            }
        }
        FAT5_CHECK_MSG(T, worst <= 1e-6, "%s, %s: cached logits differ from the forward's by %g", what, specs[k], worst);
        FAT5_CHECK_MSG(T, worst_own <= 1e-6, "%s, %s: a decoder made before set_attention is off the model's pattern by %g",
                       specs[k], worst_own);
        fat5_decoder_destroy(d);
        d = NULL;
        // greedy generation: 8 tokens (EOS held back), then the forward on them
        gc.max_new_tokens = gc.min_new_tokens = 8;
        FAT5_REQUIRE_OK(T, fat5_generate(m, enc, cu, 3, &gc, &gr));
        {
            int32_t gdec[3][TD_STEPS];
            float *fl;
            int bad = 0;
            FAT5_CHECK(T, gr.n_seq == 3);
            for (i = 0; i < 3 && gr.n_seq == 3; i++) {
                FAT5_REQUIRE(T, gr.cu_seqlens[i + 1] - gr.cu_seqlens[i] == 8);
                for (t = 0; t < TD_STEPS; t++)
                    gdec[i][t] = t == 0 ? (int32_t)gc.decoder_start_token_id : t <= 8 ? gr.tokens[gr.cu_seqlens[i] + t - 1] : 2;
            }
            fl = td_forward_logits(T, m, enc, cu, gdec);
            for (i = 0; fl && i < 3; i++)
                for (t = 0; t < 8; t++) {
                    const float *row = fl + ((int64_t)i * TD_STEPS + t) * V;
                    int64_t j, best = -1;
                    for (j = 0; j < V; j++)
                        if (j != gc.eos_token_id && (best < 0 || row[j] > row[best])) best = j;
                    if (best != gdec[i][t + 1]) bad++;
                }
            FAT5_CHECK_MSG(T, fl && !bad, "%s, %s: %d greedy tokens are not the argmax of the forward's logits", what, specs[k],
                           bad);
            free(fl);
            fat5_generate_result_destroy(ctx, &gr);
        }
        free(ref);
        ref = NULL;
    }
    fat5_decoder_destroy(d_own);
    free(ref_own);
    free(lg);
}

// tl_decode_patterns on a random T5 (from full attention), on the local LongT5 fixture run
// transient-global (T5's table for the globals, a norm of weight 1) or block-global, and on the
// transient-global one run with other blocks (its own global table), block-global or local.
static void t_longt5_pattern_decode(fat5_test *T) {
    static const char *const local_specs[2] = {"transient-global:2:3", "block-global:1:2"};
    static const char *const tglobal_specs[3] = {"transient-global:3:2", "block-global:1:2", "local:1"};
    fat5_model *m = tl_t5(T);
    char dir[512];
    FAT5_REQUIRE(T, m != NULL);
    tl_decode_patterns(T, m, "t5", tl_specs_td, 3);
    fat5_model_destroy(m);
    m = NULL;
    snprintf(dir, sizeof dir, "%s/longt5_local", FAT5_TEST_DATA);
    FAT5_REQUIRE_OK(T, fat5_model_load(fat5_test_ctx(T), dir, &m));
    tl_decode_patterns(T, m, "longt5_local", local_specs, 2);
    fat5_model_destroy(m);
    m = NULL;
    snprintf(dir, sizeof dir, "%s/longt5_tglobal", FAT5_TEST_DATA);
    FAT5_REQUIRE_OK(T, fat5_model_load(fat5_test_ctx(T), dir, &m));
    tl_decode_patterns(T, m, "longt5_tglobal", tglobal_specs, 3);
    fat5_model_destroy(m);
}

// The run's pattern is not the model's: config.json saved under any pattern is the one saved
// before (a plain T5, and the transient-global LongT5 fixture, whose own pattern stays in its
// config), and a saved model loads with its config's pattern.
static void t_longt5_pattern_save(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int f, k;
    for (f = 0; f < 2; f++) {
        fat5_model *m = NULL, *b = NULL;
        char dir[700], p0[800], p1[800], src[512];
        fat5_attention own;
        if (f == 0) m = tl_t5(T);
        else {
            snprintf(src, sizeof src, "%s/longt5_tglobal", FAT5_TEST_DATA);
            FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &m));
        }
        FAT5_REQUIRE(T, m != NULL);
        own = fat5_model_get_attention(m);
        FAT5_CHECK(T, own.type == (f ? FAT5_ENC_ATTN_TGLOBAL : FAT5_ENC_ATTN_FULL));
        snprintf(dir, sizeof dir, "%s/m%d_before", fat5_test_tmpdir(T), f);
        FAT5_REQUIRE_OK(T, fat5_model_save(m, dir));
        snprintf(p0, sizeof p0, "%s/config.json", dir);
        for (k = 0; k < 4; k++) {
            const char *spec = k < 3 ? tl_specs[k] : "full";
            fat5_attention a;
            FAT5_REQUIRE_OK(T, tl_set(T, m, spec));
            snprintf(dir, sizeof dir, "%s/m%d_%d", fat5_test_tmpdir(T), f, k);
            FAT5_REQUIRE_OK(T, fat5_model_save(m, dir));
            snprintf(p1, sizeof p1, "%s/config.json", dir);
            FAT5_CHECK_MSG(T, tm_files_equal(T, p0, p1), "model %d, %s: config.json differs from the one saved before", f,
                           spec);
            a = fat5_model_get_attention(m);
            FAT5_CHECK_MSG(T, fat5_attention_parse(ctx, spec, &own) == FAT5_OK && a.type == own.type &&
                                  a.radius == own.radius && a.global == own.global,
                           "model %d: the pattern after saving is not %s", f, spec);
            FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &b));
            a = fat5_model_get_attention(b);
            FAT5_CHECK_MSG(T, a.type == (f ? FAT5_ENC_ATTN_TGLOBAL : FAT5_ENC_ATTN_FULL) && (!f || (a.radius == 4 && a.global == 4)),
                           "model %d saved under %s loads with pattern type %d", f, spec, (int)a.type);
            fat5_model_destroy(b);
            b = NULL;
        }
        fat5_model_destroy(m);
    }
}

// fat5_model_encode under each pattern (td_inputs: 5, 11, 2 tokens) equals the encoder output of
// a forward under it, bit for bit, and differs from full attention's.
static void t_longt5_pattern_encode(fat5_test *T) {
    fat5_model *m = tl_t5(T);
    int32_t enc[18], cu[4], dec[3][TD_STEPS];
    float full[18 * 8], hid[18 * 8];
    int64_t D;
    int k;
    FAT5_REQUIRE(T, m != NULL);
    D = m->cfg.d_model;
    FAT5_REQUIRE(T, D == 8);
    td_inputs(m->cfg.vocab_size, enc, cu, dec);
    FAT5_REQUIRE_OK(T, fat5_model_encode(m, enc, cu, 3, FAT5_POOL_NONE, full, 18 * D));
    for (k = 0; k < 3; k++) {
        FAT5_REQUIRE_OK(T, tl_set(T, m, tl_specs_td[k]));
        free(td_forward_logits(T, m, enc, cu, dec));  // leaves the encoder output in the workspace
        FAT5_REQUIRE_OK(T, fat5_model_encode(m, enc, cu, 3, FAT5_POOL_NONE, hid, 18 * D));
        FAT5_CHECK_MSG(T, !memcmp(hid, FAT5__HOST(float, m->ws.enc_out), sizeof hid),
                       "%s: fat5_model_encode differs from the forward's encoder output (max %g)", tl_specs_td[k],
                       td_maxdiff(hid, FAT5__HOST(float, m->ws.enc_out), 18 * D));
        FAT5_CHECK_MSG(T, td_maxdiff(hid, full, 18 * D) > 1e-3, "%s: the encoder output of full attention",
                       tl_specs_td[k]);
    }
    fat5_model_destroy(m);
}

// ---- bad settings ----

// Pattern specs, patterns and inputs that cannot run are refused with the status and a message
// that names the problem; a refused pattern leaves the model's as it was.
static void t_longt5_pattern_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_attention a, b;
    fat5_model *m = tl_t5(T);
    fat5_decoder *d = NULL;
    fat5_batch bt = tm_batch();
    int32_t enc[18], cu[4], dec[3][TD_STEPS];
    float hid[18 * 8];
    int k;
    FAT5_REQUIRE(T, m != NULL);
    // specs
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:0", &a), FAT5_ERR_INVALID_ARG, "radius 0");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:-3", &a), FAT5_ERR_INVALID_ARG, "radius -3");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:x", &a), FAT5_ERR_INVALID_ARG, "'local:x'");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:x", &a), FAT5_ERR_INVALID_ARG, "whole numbers");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:", &a), FAT5_ERR_INVALID_ARG, "'local:'");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:3:4", &a), FAT5_ERR_INVALID_ARG, "'local:3:4'");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:3:4", &a), FAT5_ERR_INVALID_ARG, "local takes one number");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "block-global:3:4:5", &a), FAT5_ERR_INVALID_ARG, "two numbers");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:5x", &a), FAT5_ERR_INVALID_ARG, "'local:5x'");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "block-global:8", &a), FAT5_ERR_INVALID_ARG, "block-global:R:G");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "block-global:8", &a), FAT5_ERR_INVALID_ARG, "needs its radius and global");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "block-global", &a), FAT5_ERR_INVALID_ARG, "block-global:R:G");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "transient-global:4:0", &a), FAT5_ERR_INVALID_ARG, "0 global tokens per block");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "block-global:4:-1", &a), FAT5_ERR_INVALID_ARG, "-1 global tokens");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "nonsense", &a), FAT5_ERR_INVALID_ARG, "'nonsense'");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "", &a), FAT5_ERR_INVALID_ARG, "attention ''");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "full:3", &a), FAT5_ERR_INVALID_ARG, "'full:3': full takes no numbers");
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, NULL, &a), FAT5_ERR_INVALID_ARG, "NULL");
    // patterns
    FAT5_REQUIRE_OK(T, tl_set(T, m, "local:3"));
    memset(&a, 0, sizeof a);
    a.type = FAT5_ENC_ATTN_LOCAL;
    TM_EXPECT_ERR(T, fat5_model_set_attention(m, &a), FAT5_ERR_INVALID_ARG, "radius 0");
    a.type = FAT5_ENC_ATTN_BLOCK_GLOBAL, a.radius = 2;
    TM_EXPECT_ERR(T, fat5_model_set_attention(m, &a), FAT5_ERR_INVALID_ARG, "0 global tokens");
    a.type = (fat5_enc_attention)7;
    TM_EXPECT_ERR(T, fat5_model_set_attention(m, &a), FAT5_ERR_INVALID_ARG, "type 7");
    TM_EXPECT_ERR(T, fat5_model_set_attention(m, NULL), FAT5_ERR_INVALID_ARG, "NULL");
    b = fat5_model_get_attention(m);
    FAT5_CHECK_MSG(T, b.type == FAT5_ENC_ATTN_LOCAL && b.radius == 3, "a refused pattern changed the model's");
    // transient-global takes T5's buckets: refused on ALiBi, FIRE and RoPE models (the others run)
    for (k = 2; k <= 6; k += 2) {
        fat5_model_config c = tp_config(k);
        fat5_model *p = NULL;
        const char *enc_name = k == 2 ? "ALiBi" : k == 4 ? "RoPE" : "FIRE";
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 3, &p));
        TM_EXPECT_ERR(T, tl_set(T, p, "transient-global:4:2"), FAT5_ERR_UNSUPPORTED, enc_name);
        TM_EXPECT_ERR(T, tl_set(T, p, "transient-global:4:2"), FAT5_ERR_UNSUPPORTED, "transient-global");
        FAT5_CHECK_MSG(T, tl_set(T, p, "block-global:4:2") == FAT5_OK && tl_set(T, p, "local:4") == FAT5_OK,
                       "%s: %s", enc_name, fat5_last_error(ctx));
        fat5_model_destroy(p);
    }
    // a block-global prefix longer than every sequence of an input (full attention): refused at the
    // forward (tm_batch's sequences have 12, 1 and 6 tokens), fat5_model_encode and
    // fat5_decoder_start (td_inputs': 5, 11 and 2); a shorter sequence among longer ones attends
    // fully; a decoder keeps the pattern it was made with
    FAT5_REQUIRE_OK(T, tl_set(T, m, "block-global:2:13"));
    TM_EXPECT_ERR(T, fat5_model_forward(m, &bt, NULL, NULL), FAT5_ERR_INVALID_ARG,
                  "the longest encoder sequence has 12 tokens, fewer than the 13 global tokens of block-global");
    FAT5_REQUIRE_OK(T, tl_set(T, m, "block-global:2:2"));
    FAT5_CHECK_MSG(T, fat5_model_forward(m, &bt, NULL, NULL) == FAT5_OK, "%s", fat5_last_error(ctx));
    td_inputs(m->cfg.vocab_size, enc, cu, dec);
    FAT5_REQUIRE_OK(T, tl_set(T, m, "block-global:2:12"));
    TM_EXPECT_ERR(T, fat5_model_encode(m, enc, cu, 3, FAT5_POOL_NONE, hid, 18 * 8), FAT5_ERR_INVALID_ARG,
                  "fat5_model_encode: the longest encoder sequence has 11 tokens, fewer than the 12 global tokens");
    FAT5_REQUIRE_OK(T, tl_set(T, m, "block-global:2:6"));
    FAT5_REQUIRE_OK(T, fat5_decoder_create(m, 3, 18, 4, &d));
    FAT5_REQUIRE_OK(T, tl_set(T, m, "full"));
    TM_EXPECT_ERR(T, fat5_decoder_start(d, enc, cu, 1, 1), FAT5_ERR_INVALID_ARG,
                  "fat5_decoder_start: the longest encoder sequence has 5 tokens, fewer than the 6 global tokens");
    FAT5_CHECK_MSG(T, fat5_decoder_start(d, enc, cu, 3, 1) == FAT5_OK, "%s", fat5_last_error(ctx));
    fat5_decoder_destroy(d);
    // a transient-global block longer than a sequence is not an error: that sequence has no global
    FAT5_REQUIRE_OK(T, tl_set(T, m, "transient-global:2:20"));
    FAT5_CHECK_MSG(T, fat5_model_forward(m, &bt, NULL, NULL) == FAT5_OK, "%s", fat5_last_error(ctx));
    // another pattern between a forward and its backward: that forward is gone (setting the same
    // pattern again keeps it)
    FAT5_REQUIRE_OK(T, tl_set(T, m, "transient-global:2:20"));
    FAT5_CHECK_MSG(T, fat5_model_backward(m, 1.0f) == FAT5_OK, "%s", fat5_last_error(ctx));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &bt, NULL, NULL));
    FAT5_REQUIRE_OK(T, tl_set(T, m, "local:3"));
    TM_EXPECT_ERR(T, fat5_model_backward(m, 1.0f), FAT5_ERR_STATE, "no forward has run");
    fat5_model_destroy(m);
    // the ops: global keys are for the encoder's self-attention with a window; no window on
    // cross-attention
    {
        static tl_prob P;
        static tl_out X;
        static const struct { int kind, g; const char *needle; } bad[] = {
            {FAT5__ATTN_CAUSAL | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL, 3, "transient-global attention is for the encoder"},
            {FAT5__ATTN_CAUSAL | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED, 3, "transient-global attention is for the encoder"},
            {FAT5__ATTN_CAUSAL | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_PREFIX, 3, "block-global attention is for the encoder"},
            {FAT5__ATTN_CROSS | FAT5__ATTN_PREFIX, 3, "block-global attention is for the encoder"},
            {FAT5__ATTN_CROSS | FAT5__ATTN_WINDOW(2), 0, "a local window on cross-attention"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_PREFIX, 3, "global keys need a local window"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_PREFIX, 0, "a global prefix of 0 tokens"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL, -1, "a global block of -1 tokens"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL | FAT5__ATTN_PREFIX, 3, "at once"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_GSHARED, 3, "shared global table"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL | FAT5__ATTN_ALIBI, 3, "not ALiBi or FIRE"},
            {FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL | FAT5__ATTN_FIRE, 3, "not ALiBi or FIRE"},
        };
        size_t c;
        ctx = fat5_test_ctx(T);
        tl_setup(&P, FAT5__ATTN_BIDIR | FAT5__ATTN_WINDOW(2) | FAT5__ATTN_TGLOBAL, 3, 0, 0, 1);
        for (c = 0; c < sizeof bad / sizeof bad[0]; c++) {
            fat5__addr bias = A_(P.bias), cu_g = A_(P.cu_g);
            int kind = bad[c].kind, g = bad[c].g;
            TM_EXPECT_ERR(T, fat5__cpu_attn_fwd(ctx, A_(X.o), A_(X.lse), A_(P.q), A_(P.k), A_(P.v), bias, 0, A_(tl_cu),
                                                A_(P.cu_k), A_(P.q_seq), TL_T, TL_H, TL_DK, kind, TL_NB, TL_MD, g, cu_g, fat5__drop_none()),
                          FAT5_ERR_INVALID_ARG, bad[c].needle);
            TM_EXPECT_ERR(T, fat5__cpu_attn_bwd_dq(ctx, A_(X.dq), A_(X.dbias), A_(P.dout), A_(X.lse), A_(X.delta), A_(P.q),
                                                   A_(P.k), A_(P.v), bias, 0, A_(tl_cu), A_(P.cu_k), A_(P.q_seq), TL_T,
                                                   TL_H, TL_DK, kind, TL_NB, TL_MD, g, cu_g, 0, fat5__drop_none()),
                          FAT5_ERR_INVALID_ARG, bad[c].needle);
            TM_EXPECT_ERR(T, fat5__cpu_attn_bwd_dkv(ctx, A_(X.dk), A_(X.dv), A_(P.dout), A_(X.lse), A_(X.delta), A_(P.q),
                                                    A_(P.k), A_(P.v), bias, 0, A_(tl_cu), A_(P.cu_k), A_(P.k_seq), P.Tk,
                                                    TL_H, TL_DK, kind, TL_NB, TL_MD, g, cu_g, fat5__drop_none()),
                          FAT5_ERR_INVALID_ARG, bad[c].needle);
        }
        // transient-global keys without their rows
        TM_EXPECT_ERR(T, fat5__cpu_attn_fwd(ctx, A_(X.o), A_(X.lse), A_(P.q), A_(P.k), A_(P.v), A_(P.bias), 0, A_(tl_cu),
                                            A_(P.cu_k), A_(P.q_seq), TL_T, TL_H, TL_DK, P.kind, TL_NB, TL_MD, 3, 0, fat5__drop_none()),
                      FAT5_ERR_INVALID_ARG, "cu_g");
    }
}

// fat5_attention_parse and fat5_attention_to_string read each other's text: every type, LongT5's
// defaults when the numbers are left out ("local": 127; "transient-global": 127, 16), the largest
// radius.
static void t_longt5_pattern_parse(fat5_test *T) {
    static const struct { const char *spec, *text; int type; int64_t r, g; } cs[] = {
        {"full", "full", FAT5_ENC_ATTN_FULL, 0, 0},
        {"local", "local:127", FAT5_ENC_ATTN_LOCAL, 127, 0},
        {"local:1", "local:1", FAT5_ENC_ATTN_LOCAL, 1, 0},
        {"local:4194303", "local:4194303", FAT5_ENC_ATTN_LOCAL, 4194303, 0},
        {"block-global:3:1", "block-global:3:1", FAT5_ENC_ATTN_BLOCK_GLOBAL, 3, 1},
        {"block-global:64:16", "block-global:64:16", FAT5_ENC_ATTN_BLOCK_GLOBAL, 64, 16},
        {"transient-global", "transient-global:127:16", FAT5_ENC_ATTN_TGLOBAL, 127, 16},
        {"transient-global:5", "transient-global:5:16", FAT5_ENC_ATTN_TGLOBAL, 5, 16},
        {"transient-global:4:2", "transient-global:4:2", FAT5_ENC_ATTN_TGLOBAL, 4, 2},
    };
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t c;
    for (c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        fat5_attention a, b;
        char text[64], again[64];
        FAT5_REQUIRE_OK(T, fat5_attention_parse(ctx, cs[c].spec, &a));
        FAT5_CHECK_MSG(T, (int)a.type == cs[c].type && a.radius == cs[c].r && a.global == cs[c].g,
                       "'%s' -> type %d, radius %lld, global %lld", cs[c].spec, (int)a.type, (long long)a.radius,
                       (long long)a.global);
        fat5_attention_to_string(&a, text);
        FAT5_CHECK_MSG(T, !strcmp(text, cs[c].text), "'%s' -> '%s', want '%s'", cs[c].spec, text, cs[c].text);
        FAT5_REQUIRE_OK(T, fat5_attention_parse(ctx, text, &b));
        fat5_attention_to_string(&b, again);
        FAT5_CHECK_MSG(T, !memcmp(&a, &b, sizeof a) && !strcmp(text, again), "'%s' does not read back", text);
    }
    TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:4194304", NULL), FAT5_ERR_INVALID_ARG, "NULL");
    {
        fat5_attention a;
        TM_EXPECT_ERR(T, fat5_attention_parse(ctx, "local:4194304", &a), FAT5_ERR_INVALID_ARG, "radius 4194304");
    }
}

// A context's attention: every model made or loaded with it starts with that pattern (NULL: the
// model's own, LongT5's from its config); one it cannot run fails the model's creation, by name.
static void t_longt5_ctx_attention(fat5_test *T) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_attention a, got;
    char dir[512];
    memset(&a, 0, sizeof a);
    a.type = FAT5_ENC_ATTN_BLOCK_GLOBAL;
    a.radius = 3;
    a.global = 2;
    cc.attention = &a;
    FAT5_REQUIRE_OK(T, fat5_ctx_create(&cc, &ctx, NULL, 0));
    a.radius = 9;  // the context keeps its own copy
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 1, &m));
    got = fat5_model_get_attention(m);
    FAT5_CHECK(T, got.type == FAT5_ENC_ATTN_BLOCK_GLOBAL && got.radius == 3 && got.global == 2);
    fat5_model_destroy(m);
    m = NULL;
    snprintf(dir, sizeof dir, "%s/longt5_tglobal", FAT5_TEST_DATA);  // a checkpoint's own pattern yields too
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    got = fat5_model_get_attention(m);
    FAT5_CHECK(T, got.type == FAT5_ENC_ATTN_BLOCK_GLOBAL && got.radius == 3);
    fat5_model_destroy(m);
    m = NULL;
    fat5_ctx_destroy(ctx);
    a.type = FAT5_ENC_ATTN_TGLOBAL;  // transient-global cannot run with ALiBi
    a.global = 4;
    FAT5_REQUIRE_OK(T, fat5_ctx_create(&cc, &ctx, NULL, 0));
    c = tp_config(2);
    FAT5_CHECK(T, fat5_model_create(ctx, &c, 1, &m) == FAT5_ERR_UNSUPPORTED);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "the context's attention: attention transient-global") != NULL,
                   "%s", fat5_last_error(ctx));
    FAT5_CHECK(T, m == NULL);
    fat5_ctx_destroy(ctx);
    a.radius = 0;  // a window of 0
    FAT5_REQUIRE_OK(T, fat5_ctx_create(&cc, &ctx, NULL, 0));
    c = tm_tiny_config(1, 0, 0);
    FAT5_CHECK(T, fat5_model_create(ctx, &c, 1, &m) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "a window of radius 0") != NULL, "%s", fat5_last_error(ctx));
    fat5_ctx_destroy(ctx);
    cc.attention = NULL;  // each model's own
    FAT5_REQUIRE_OK(T, fat5_ctx_create(&cc, &ctx, NULL, 0));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    got = fat5_model_get_attention(m);
    FAT5_CHECK(T, got.type == FAT5_ENC_ATTN_TGLOBAL && got.radius == 4 && got.global == 4);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
}

#define FAT5_TESTS_LONGT5(X) X(longt5_config) X(longt5_checkpoint) X(attn_window) X(longt5_attn_dense) X(longt5_prefix_full) \
    X(longt5_block_sum) X(longt5_pattern_fd) X(longt5_pattern_full) X(longt5_pattern_decode) \
    X(longt5_pattern_save) X(longt5_pattern_encode) X(longt5_pattern_rejects) X(longt5_pattern_parse) \
    X(longt5_ctx_attention)
