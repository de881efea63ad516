// The whole model on the GPU: against the CPU reference (random models of every family, packed
// batches of very different lengths) and against the Hugging Face fixtures, in fp32 and in bf16.

static fat5_ctx *tgm_ctx(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_status st;
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = dtype;
    char why[512];
    st = fat5_ctx_create(&cc, &ctx, why, sizeof why);
    if (st == FAT5_OK) return ctx;
    if (st == FAT5_ERR_NO_DEVICE) {
        snprintf(T->skip_reason, sizeof T->skip_reason, "no CUDA device: %.200s", why);
        T->skipped = 1;
    } else {
        FAT5_CHECK_MSG(T, 0, "GPU context: %s: %s", fat5_status_string(st), why);
    }
    return NULL;
}

// relative L2 error of got against ref
static double tgm_rel_l2(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// Runs the same model (same weights) and batch on the CPU and on a GPU context, then compares
// logits, loss and every gradient. fp32: elementwise 1e-4 / 1e-3 as for the fixtures. bf16: see
// the tolerance note below. xent_rows > 0: the GPU's training forward takes the loss in chunks of
// that many rows (its logits are then not kept: the loss and gradients are compared).
static void tgm_compare_rows(fat5_test *T, fat5_ctx *gctx, fat5_model *cpu, const fat5_batch *b,
                             const fat5_loss_config *lc, const char *what, int64_t xent_rows) {
    fat5_model *gpu = NULL;
    fat5_forward_result rc, rg;
    int bf16 = gctx->cfg.dtype == FAT5_DTYPE_BF16, i;
    int64_t n = b->dec_cu_seqlens[b->n_seq] * cpu->cfg.vocab_size;
    float *lc_ = (float *)malloc((size_t)n * sizeof(float)), *lg = (float *)malloc((size_t)n * sizeof(float));
    float *gc = (float *)malloc(cpu->n_floats * sizeof(float)), *gg = (float *)malloc(cpu->n_floats * sizeof(float));
    char name[200];
    // bf16 tolerance: every matmul input is rounded to bf16 (unit roundoff u = 2^-9), about six
    // roundings per layer on any path to the logits, and errors of independent roundings add in
    // quadrature; with L layers the relative error of logits and gradients is ~ u sqrt(6 L).
    // We allow 4x that as a relative L2 error over each tensor, and 1e-2 relative on the loss.
    // ReLU is not smooth: a unit whose input lies within the rounding error of 0 switches on or
    // off, which changes its gradient by O(1) rather than O(u) (the forward stays continuous).
    // About a fraction 2u of the units sit that close to 0 (inputs of unit scale), so gradients
    // behind a ReLU carry a relative L2 error ~ sqrt(2u) = 0.063; we allow 2x that for them.
    double u = 1.0 / 512.0, layers = (double)(cpu->cfg.num_layers + cpu->cfg.num_decoder_layers);
    double bf16_tol = 4.0 * u * sqrt(6.0 * layers);
    double bf16_grad_tol = cpu->cfg.act == FAT5_ACT_RELU ? 2.0 * sqrt(2.0 * u) : bf16_tol;
    if (!lc_ || !lg || !gc || !gg) goto done;
    if (fat5_model_create(gctx, &cpu->cfg, 0, &gpu) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: GPU model: %s", what, fat5_last_error(gctx));
        goto done;
    }
    if (xent_rows > 0) gpu->xent_rows = xent_rows;
    for (i = 0; i < cpu->n_params; i++) {
        const fat5__param *p = &cpu->params[i];
        if (fat5_model_set_param(gpu, p->name, cpu->w + p->offset, (int64_t)p->numel) != FAT5_OK)
            FAT5_CHECK_MSG(T, 0, "set_param %s: %s", p->name, fat5_last_error(gctx));
    }
    fat5_model_zero_grad(cpu);
    fat5_model_zero_grad(gpu);
    if (fat5_model_forward(cpu, b, lc, &rc) != FAT5_OK || fat5_model_backward(cpu, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: CPU: %s", what, fat5_last_error(cpu->ctx));
        goto done;
    }
    if (fat5_model_forward(gpu, b, lc, &rg) != FAT5_OK || fat5_model_backward(gpu, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: GPU: %s", what, fat5_last_error(gctx));
        goto done;
    }
    fat5_model_get_logits(cpu, lc_, n);
    if (xent_rows > 0 && b->n_dec_tokens > xent_rows) {
        FAT5_CHECK(T, fat5_model_get_logits(gpu, lg, n) == FAT5_ERR_STATE);
        memcpy(lg, lc_, (size_t)n * sizeof(float));  // not kept: the loss and gradients are compared
    } else {
        fat5_model_get_logits(gpu, lg, n);
    }
    FAT5_CHECK(T, rc.n_tokens == rg.n_tokens);
    if (!bf16) {
        snprintf(name, sizeof name, "%s logits", what);
        fat5_check_close(T, name, lg, lc_, (size_t)n, 1e-5, 1e-4);
        FAT5_CHECK_MSG(T, fabs(rg.loss - rc.loss) <= 1e-4 * fabs(rc.loss), "%s: loss GPU %.9g CPU %.9g", what, rg.loss,
                       rc.loss);
    } else {
        double e = tgm_rel_l2(lg, lc_, (size_t)n);
        FAT5_CHECK_MSG(T, e <= bf16_tol, "%s: bf16 logits relative L2 error %.3g > %.3g", what, e, bf16_tol);
        FAT5_CHECK_MSG(T, fabs(rg.loss - rc.loss) <= 1e-2 * fabs(rc.loss), "%s: bf16 loss GPU %.6g CPU %.6g", what,
                       rg.loss, rc.loss);
    }
    for (i = 0; i < cpu->n_params; i++) {
        const fat5__param *p = &cpu->params[i];
        fat5_model_get_grad(cpu, p->name, gc, (int64_t)p->numel);
        if (fat5_model_get_grad(gpu, p->name, gg, (int64_t)p->numel) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "get_grad %s: %s", p->name, fat5_last_error(gctx));
            continue;
        }
        snprintf(name, sizeof name, "%s grad %s", what, p->name);
        if (strstr(p->name, "pe_encoding.mlp.2.bias")) {
            // FIRE's output bias: its exact gradient is 0 (every softmax row sums its gradients to
            // zero), so both sides hold rounding noise. fp32: both must be negligible (1e-5) next
            // to the largest gradient of mlp.2.weight (the tensor before it). bf16: the backward's
            // row term delta = dout . o reads the bf16-rounded o, so each row's sum is off by
            // ~u |dout| |o| and the head's total by their sum over rows; the bound is the bf16
            // tolerance times the head's row of mlp.2.weight's gradient in L1 (sums of the same
            // ds against MLP activations of order 1).
            size_t e;
            int W = (int)cpu->params[i - 1].shape[1];
            double wmax;
            fat5_model_get_grad(cpu, cpu->params[i - 1].name, gc, (int64_t)cpu->params[i - 1].numel);
            wmax = tm_max_abs(gc, (int64_t)cpu->params[i - 1].numel);
            for (e = 0; e < p->numel; e++) {
                double l1 = 0, bound;
                int w;
                for (w = 0; w < W; w++) l1 += fabs(gc[e * (size_t)W + (size_t)w]);
                bound = bf16 ? bf16_tol * l1 : 1e-5 * wmax;
                FAT5_CHECK_MSG(T, fabs(gg[e]) <= bound, "%s[%d]: GPU %g, bound %g", name, (int)e, (double)gg[e], bound);
            }
            fat5_model_get_grad(cpu, p->name, gc, (int64_t)p->numel);
            for (e = 0; e < p->numel; e++)
                FAT5_CHECK_MSG(T, fabs(gc[e]) <= 1e-5 * wmax, "%s[%d]: CPU %g, expected ~0", name, (int)e, (double)gc[e]);
        } else if (!bf16) {
            fat5_check_close(T, name, gg, gc, p->numel, 1e-5 * tm_max_abs(gc, (int64_t)p->numel) + 1e-9, 1e-3);
        } else if (strstr(p->name, "pe_encoding.") && !strstr(p->name, "relative_attention_bias")) {
            // FIRE's parameters: every score contributes ds times an MLP term, and ds sums to zero
            // along each row, so these sums cancel heavily and the bf16 error of the terms is
            // amplified in the result (the fp32 test checks them at 1e-3); the MLP tensors get the
            // ReLU bound, the two scalars (L_multiplier sums over the queries below its threshold
            // only) must agree in sign and within half their size. The tensor-core forward (bf16)
            // rounds P to bf16 before P V, a second rounding on o's way into delta = dout . o next
            // to o's own, and each such error passes whole into these cancelling sums: with two the
            // scalars must agree in sign and within their size (the decoder's causal L_multiplier
            // measured 0.25 with the FMA forward, 0.51 on tensor cores, on an H100)
            const int tc = gctx->gpu && gctx->gpu->attn_tc;
            double e = tgm_rel_l2(gg, gc, p->numel), tol = p->ndim == 0 ? (tc ? 1.0 : 0.5) : 2.0 * sqrt(2.0 * u);
            if (p->ndim == 0)
                FAT5_CHECK_MSG(T, (double)gg[0] * gc[0] > 0, "%s: GPU %g and CPU %g differ in sign", name,
                               (double)gg[0], (double)gc[0]);
            FAT5_CHECK_MSG(T, e <= tol, "%s: relative L2 error %.3g > %.3g", name, e, tol);
        } else {
            double e = tgm_rel_l2(gg, gc, p->numel);
            FAT5_CHECK_MSG(T, e <= bf16_grad_tol, "%s: relative L2 error %.3g > %.3g", name, e, bf16_grad_tol);
        }
    }
done:
    fat5_model_destroy(gpu);
    free(lc_);
    free(lg);
    free(gc);
    free(gg);
}

static void tgm_compare(fat5_test *T, fat5_ctx *gctx, fat5_model *cpu, const fat5_batch *b, const fat5_loss_config *lc,
                        const char *what) {
    tgm_compare_rows(T, gctx, cpu, b, lc, what, 0);
}

// packed sequences of very different lengths: 1, 300 (past every bucket), 7, 64 encoder tokens
typedef struct tgm_batch {
    int32_t enc[372], lab[200], ecu[5], dcu[5];
    fat5_batch b;
} tgm_batch;

static void tgm_make_batch(tgm_batch *t, int64_t vocab, uint64_t seed) {
    static const int el[4] = {1, 300, 7, 64}, dl[4] = {5, 1, 130, 64};
    fat5_rng r = fat5_rng_init(seed);
    int s, i, e = 0, d = 0;
    t->ecu[0] = t->dcu[0] = 0;
    for (s = 0; s < 4; s++) {
        for (i = 0; i < el[s]; i++) t->enc[e++] = (int32_t)fat5_rng_below(&r, (uint64_t)vocab);
        for (i = 0; i < dl[s]; i++) t->lab[d++] = (i % 11 == 3) ? -100 : (int32_t)fat5_rng_below(&r, (uint64_t)vocab);
        t->ecu[s + 1] = e;
        t->dcu[s + 1] = d;
    }
    memset(&t->b, 0, sizeof t->b);
    t->b.n_seq = 4;
    t->b.n_enc_tokens = e;
    t->b.n_dec_tokens = d;
    t->b.enc_tokens = t->enc;
    t->b.enc_cu_seqlens = t->ecu;
    t->b.labels = t->lab;
    t->b.dec_cu_seqlens = t->dcu;
}

// The random models of gpu_model_*_vs_cpu and their losses: 0: gated-gelu untied, H*d_kv != d_model,
// d_kv 64, z-loss and label smoothing; 1: v1.0 ReLU tied; 2: UMT5 gated-silu; 3: exact GELU, 32
// buckets / 128, d_kv 100
static fat5_model_config tgm_config(int k, fat5_loss_config *lc) {
    fat5_model_config c = tm_tiny_config(k != 1, k == 1, k == 2);
    c.vocab_size = 97;
    c.d_model = 48;
    c.num_heads = 3;
    c.d_kv = k == 0 ? 64 : k == 3 ? 100 : 16;
    c.d_ff = 72;
    c.num_decoder_layers = 3;
    if (k == 2) c.act = FAT5_ACT_SILU;
    if (k == 3) {
        c.act = FAT5_ACT_GELU;
        c.gated = 0;
        c.rel_buckets = 32;
        c.rel_max_distance = 128;
    }
    *lc = fat5_loss_config_default();
    lc->z_loss = k == 0 ? 1e-3 : 0.0;
    lc->label_smoothing = k == 0 ? 0.1 : 0.0;
    return c;
}

static void tgm_random_models(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx *g = tgm_ctx(T, dtype);
    int k;
    if (!g) return;
    for (k = 0; k < 4; k++) {
        fat5_loss_config lc;
        fat5_model_config c = tgm_config(k, &lc);
        fat5_model *cpu = NULL;
        tgm_batch tb;
        char what[64];
        if (fat5_model_create(fat5_test_ctx(T), &c, (uint64_t)(100 + k), &cpu) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "CPU model: %s", fat5_last_error(fat5_test_ctx(T)));
            continue;
        }
        tgm_make_batch(&tb, c.vocab_size, (uint64_t)k);
        snprintf(what, sizeof what, "model %d (%s)", k, dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32");
        tgm_compare(T, g, cpu, &tb.b, &lc, what);
        fat5_model_destroy(cpu);
    }
    fat5_ctx_destroy(g);
}
static void t_gpu_model_fp32_vs_cpu(fat5_test *T) { tgm_random_models(T, FAT5_DTYPE_FP32); }

// The training forward's loss in chunks of rows on the GPU (here 48 of the batch's 200 decoder rows:
// five chunks, borders inside sequences) against the CPU in one chunk, with z-loss and label
// smoothing (gpu_model_*_vs_cpu's model 0), fp32 and bf16: the loss and every gradient as there.
static void t_gpu_xent_chunks(fat5_test *T) {
    int mode;
    for (mode = 0; mode < 2; mode++) {
        fat5_ctx *g = tgm_ctx(T, mode ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32);
        fat5_loss_config lc;
        fat5_model_config c = tgm_config(0, &lc);
        fat5_model *cpu = NULL;
        tgm_batch tb;
        if (!g) return;
        if (fat5_model_create(fat5_test_ctx(T), &c, 100, &cpu) == FAT5_OK) {
            tgm_make_batch(&tb, c.vocab_size, 0);
            tgm_compare_rows(T, g, cpu, &tb.b, &lc, mode ? "chunks of 48 rows (bf16)" : "chunks of 48 rows (fp32)", 48);
        } else {
            FAT5_CHECK_MSG(T, 0, "CPU model: %s", fat5_last_error(fat5_test_ctx(T)));
        }
        fat5_model_destroy(cpu);
        fat5_ctx_destroy(g);
    }
}
static void t_gpu_model_bf16_vs_cpu(fat5_test *T) { tgm_random_models(T, FAT5_DTYPE_BF16); }

// Every position encoding (test_posenc.c's tp_config) at a GPU-sized head dim (d_kv 64, 4 heads;
// RoPE over half of it, or all of it interleaved with xPos gamma 512; FIRE of width 32), on the
// batch of very different lengths (300 encoder tokens: 2.3x FIRE's L0 128), against the CPU.
static void tgm_posenc_models(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx *g = tgm_ctx(T, dtype);
    int k;
    if (!g) return;
    for (k = 0; k < TP_N_ENC; k++) {
        fat5_model_config c = tp_config(k);
        fat5_model *cpu = NULL;
        tgm_batch tb;
        fat5_loss_config lc = fat5_loss_config_default();
        char what[96];
        c.vocab_size = 97;
        c.d_model = 48;
        c.num_heads = k == 2 ? 3 : 4;
        c.d_kv = 64;
        c.d_ff = 72;
        c.rel_buckets = 32;
        c.rel_max_distance = 128;
        c.rotary_scale_base = k == 5 ? 512.0 : 0.0;
        c.fire_mlp_width = 32;
        if (fat5_model_create(fat5_test_ctx(T), &c, (uint64_t)(200 + k), &cpu) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "CPU model: %s", fat5_last_error(fat5_test_ctx(T)));
            continue;
        }
        tgm_make_batch(&tb, c.vocab_size, (uint64_t)(10 + k));
        snprintf(what, sizeof what, "%s (%s)", tp_enc_name[k], dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32");
        tgm_compare(T, g, cpu, &tb.b, &lc, what);
        fat5_model_destroy(cpu);
    }
    fat5_ctx_destroy(g);
}
static void t_gpu_posenc_fp32_vs_cpu(fat5_test *T) { tgm_posenc_models(T, FAT5_DTYPE_FP32); }
static void t_gpu_posenc_bf16_vs_cpu(fat5_test *T) { tgm_posenc_models(T, FAT5_DTYPE_BF16); }

// the Hugging Face fixtures and the position-encoding ones, loaded straight onto the GPU
static void tgm_fixtures(fat5_test *T, fat5_dtype dtype) {
    const char *const *names = td_fixtures;
    fat5_ctx *g = tgm_ctx(T, dtype);
    int k;
    if (!g) return;
    // bf16: the Hugging Face fixtures only. The posenc ones (d_model 8, d_kv 4) are too narrow for
    // the bf16 bound (its errors average over few terms: posenc_t5, on the T5 kernels, reaches 1.2x
    // the bound); their encodings run in bf16 at d_kv 64 in gpu_posenc_bf16_vs_cpu.
    for (k = 0; k < (dtype == FAT5_DTYPE_BF16 ? 3 : TD_N_FIXTURES); k++) {
        char dir[512];
        fat5_model *cpu = NULL;
        fat5_batch b;
        fat5_loss_config lc = fat5_loss_config_default();
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, names[k]);
        memset(&b, 0, sizeof b);
        if (fat5_model_load(fat5_test_ctx(T), dir, &cpu) != FAT5_OK || tm_load_batch(T, dir, &b) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s: %s", names[k], fat5_last_error(fat5_test_ctx(T)));
        } else {
            tgm_compare(T, g, cpu, &b, &lc, names[k]);
        }
        fat5_batch_destroy(fat5_test_ctx(T), &b);
        fat5_model_destroy(cpu);
    }
    // and fat5_model_load on a GPU context gives the fixture's logits and loss directly
    if (dtype == FAT5_DTYPE_FP32) {
        fat5_model *m = NULL;
        fat5_batch b;
        fat5_st_file *ref = NULL;
        fat5_forward_result r;
        int64_t n = 0, nl = 0;
        float *want = NULL, *got = NULL, *loss = NULL;
        char dir[512], path[600];
        snprintf(dir, sizeof dir, "%s/t5_v11_gated_gelu_untied", FAT5_TEST_DATA);
        snprintf(path, sizeof path, "%s/reference.safetensors", dir);
        memset(&b, 0, sizeof b);
        if (fat5_model_load(g, dir, &m) == FAT5_OK && tm_load_batch(T, dir, &b) == FAT5_OK &&
            fat5_st_load(fat5_test_ctx(T), path, &ref) == FAT5_OK && fat5_model_forward(m, &b, NULL, &r) == FAT5_OK &&
            (want = tm_read_tensor(T, ref, "logits", &n)) != NULL && (loss = tm_read_tensor(T, ref, "loss", &nl)) != NULL) {
            got = (float *)malloc((size_t)n * sizeof(float));
            if (got && fat5_model_get_logits(m, got, n) == FAT5_OK)
                fat5_check_close(T, "GPU-loaded fixture logits", got, want, (size_t)n, 1e-5, 1e-4);
            FAT5_CHECK_MSG(T, fabs(r.loss - loss[0]) <= 1e-4 * fabs(loss[0]), "loss %.9g, transformers %.9g", r.loss,
                           (double)loss[0]);
        } else {
            FAT5_CHECK_MSG(T, 0, "GPU-loaded fixture: %s", fat5_last_error(g));
        }
        free(want);
        free(got);
        free(loss);
        fat5_st_destroy(ref);
        fat5_batch_destroy(fat5_test_ctx(T), &b);
        fat5_model_destroy(m);
    }
    fat5_ctx_destroy(g);
}
static void t_gpu_fixtures_fp32(fat5_test *T) { tgm_fixtures(T, FAT5_DTYPE_FP32); }
static void t_gpu_fixtures_bf16(fat5_test *T) { tgm_fixtures(T, FAT5_DTYPE_BF16); }

// save from a GPU model (weights come back from the device) and reload on the CPU
static void t_gpu_save_reload(fat5_test *T) {
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_BF16);
    fat5_model *gm = NULL, *cm = NULL;
    char dir[600];
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    float *w;
    if (!g) return;
    snprintf(dir, sizeof dir, "%s/gpu_saved", fat5_test_tmpdir(T));
    if (fat5_model_create(g, &c, 9, &gm) == FAT5_OK && fat5_model_save(gm, dir) == FAT5_OK &&
        fat5_model_load(fat5_test_ctx(T), dir, &cm) == FAT5_OK) {
        w = (float *)malloc(gm->params[3].numel * sizeof(float));
        FAT5_CHECK(T, memcmp(gm->w, cm->w, gm->n_floats * sizeof(float)) == 0);
        if (w && fat5_model_get_param(gm, gm->params[3].name, w, (int64_t)gm->params[3].numel) == FAT5_OK)
            FAT5_CHECK(T, memcmp(w, cm->w + cm->params[3].offset, gm->params[3].numel * sizeof(float)) == 0);
        free(w);
    } else {
        FAT5_CHECK_MSG(T, 0, "GPU save/reload: %s / %s", fat5_last_error(g), fat5_last_error(fat5_test_ctx(T)));
    }
    fat5_model_destroy(gm);
    fat5_model_destroy(cm);
    fat5_ctx_destroy(g);
}

// ---- optimizer and determinism ----

// A model on the GPU context g with the CPU model cm's weights, and an optimizer of config c on
// each of the two (*co the CPU's, *go the GPU's); 0 after reporting a failure (what was made is
// the caller's to destroy).
static int tgm_optim_twins(fat5_test *T, fat5_ctx *g, fat5_model *cm, const fat5_optim_config *c, fat5_model **gm,
                           fat5_optim **co, fat5_optim **go) {
    int p;
    if (fat5_model_create(g, &cm->cfg, 0, gm) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(g));
        return 0;
    }
    for (p = 0; p < cm->n_params && !T->failed; p++)
        FAT5_CHECK(T, fat5_model_set_param(*gm, cm->params[p].name, cm->w + cm->params[p].offset,
                                           (int64_t)cm->params[p].numel) == FAT5_OK);
    if (fat5_optim_create(cm, c, co) != FAT5_OK || fat5_optim_create(*gm, c, go) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "optim_create: %s / %s", fat5_last_error(fat5_test_ctx(T)), fat5_last_error(g));
        return 0;
    }
    return 1;
}

// The optimizer on the GPU (fp32 context) against the CPU one: the same weights and gradients,
// three steps of each kind with weight decay (and exclusions) and clipping active. The GPU works
// in fp32 (the CPU in double, rounded to fp32 per element), so each step differs by a few ulps of
// each value: the per-tensor tolerance of test_optim.c (1e-6 of the largest |value|, ~17 ulps,
// plus 1e-6 relative) covers three steps. The gradient norms (double sums on both) agree to 1e-12.
static void t_gpu_optim_vs_cpu(fat5_test *T) {
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_FP32);
    int kind;
    if (!g) return;
    for (kind = 0; kind < 2; kind++) {
        fat5_model *cm = to_model(T, 30), *gm = NULL;
        fat5_optim *co = NULL, *go = NULL;
        fat5_optim_config c = to_config((fat5_optim_kind)kind, 0.1);
        size_t n = cm ? cm->n_floats : 0;
        float *w = (float *)malloc(n * 4 + 4), *m1 = (float *)malloc(n * 4 + 4), *m2 = (float *)malloc(n * 4 + 4);
        double *r = (double *)malloc(n * 8 + 8);
        int s;
        size_t i;
        char what[64];
        c.clip_norm = 1.0;
        if (!cm || !w || !m1 || !m2 || !r || !tgm_optim_twins(T, g, cm, &c, &gm, &co, &go)) goto next;
        for (s = 0; s < 3; s++) {
            fat5_optim_result rc, rg;
            to_fill_grads(FAT5__HOST(float, cm->gd), n, 40 + (uint64_t)s, 0.5);
            if (fat5__dev_upload(g, gm->gd, FAT5__HOST(const float, cm->gd), n * 4) || fat5_optim_step(co, &rc) ||
                fat5_optim_step(go, &rg) || fat5__dev_download(g, w, gm->wd, n * 4) ||
                fat5__dev_download(g, m1, go->m1, n * 4) || fat5__dev_download(g, m2, go->m2, n * 4) ||
                fat5__dev_sync(g)) {
                FAT5_CHECK_MSG(T, 0, "step %d: %s", s, fat5_last_error(g));
                break;
            }
            FAT5_CHECK_MSG(T, fabs(rc.grad_norm - rg.grad_norm) <= 1e-12 * rc.grad_norm && rg.skipped == 0,
                           "grad norm cpu %.17g gpu %.17g", rc.grad_norm, rg.grad_norm);
            for (i = 0; i < n; i++) r[i] = cm->w[i];
            snprintf(what, sizeof what, "gpu kind %d step %d w", kind, s);
            to_compare(T, cm, what, w, r);
            for (i = 0; i < n; i++) r[i] = FAT5__HOST(float, co->m1)[i];
            snprintf(what, sizeof what, "gpu kind %d step %d m1", kind, s);
            to_compare(T, cm, what, m1, r);
            for (i = 0; i < n; i++) r[i] = FAT5__HOST(float, co->m2)[i];
            snprintf(what, sizeof what, "gpu kind %d step %d m2", kind, s);
            to_compare(T, cm, what, m2, r);
        }
    next:
        fat5_optim_destroy(co);
        fat5_optim_destroy(go);
        fat5_model_destroy(gm);
        fat5_model_destroy(cm);
        free(w);
        free(m1);
        free(m2);
        free(r);
    }
    fat5_ctx_destroy(g);
}

// Adafactor on the GPU against the CPU's (first moment, parameter scale, weight decay, global
// clipping active), three steps on the to_model tensors (2-D factored, 1-D full). Both do the same
// fp32 element-wise operations in the same order (kernels/optim.cu); only the double sums (row and
// column means, the RMS of the update and of the weights, the gradient norm) add in another order,
// which can move an fp32 rounding of a mean or a scale by one ulp: a few ulps per step, within
// test_optim.c's per-tensor tolerance (1e-6 of the largest |value| plus 1e-6 relative) for w and
// m1, and 1e-6 relative for the packed second moments (positive: no cancellation). In a bf16
// context the bf16 matrix operands refreshed by the update are the new weights rounded (RNE),
// bit for bit.
static void tgm_optim_adafactor(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx *g = tgm_ctx(T, dtype);
    uint16_t *wa = NULL;
    fat5_model *cm, *gm = NULL;
    fat5_optim *co = NULL, *go = NULL;
    fat5_optim_config c = to_config(FAT5_OPTIM_ADAFACTOR, 0.1);
    size_t n, i;
    float *w = NULL, *m1 = NULL, *v = NULL;
    double *r = NULL;
    int s;
    char what[64];
    if (!g) return;
    cm = to_model(T, 31);
    n = cm ? cm->n_floats : 0;
    c.clip_norm = 1.0;
    c.adafactor_beta1 = 0.9;
    c.adafactor_scale_parameter = 1;
    w = (float *)malloc(n * 4 + 4), m1 = (float *)malloc(n * 4 + 4), r = (double *)malloc(n * 8 + 8);
    if (!cm || !w || !m1 || !r || !tgm_optim_twins(T, g, cm, &c, &gm, &co, &go)) goto done;
    v = (float *)malloc(co->n_v * 4 + 4);
    if (!v || co->n_v != go->n_v || co->n_v >= n) {
        FAT5_CHECK_MSG(T, 0, "second moments: %zu floats on the CPU, %zu on the GPU", co->n_v, go->n_v);
        goto done;
    }
    for (s = 0; s < 3; s++) {
        fat5_optim_result rc, rg;
        to_fill_grads(FAT5__HOST(float, cm->gd), n, 50 + (uint64_t)s, s == 1 ? 5.0 : 0.5);
        if (fat5__dev_upload(g, gm->gd, FAT5__HOST(const float, cm->gd), n * 4) || fat5_optim_step(co, &rc) ||
            fat5_optim_step(go, &rg) || fat5__dev_download(g, w, gm->wd, n * 4) ||
            fat5__dev_download(g, m1, go->m1, n * 4) || fat5__dev_download(g, v, go->m2, co->n_v * 4) ||
            fat5__dev_sync(g)) {
            FAT5_CHECK_MSG(T, 0, "step %d: %s", s, fat5_last_error(g));
            break;
        }
        FAT5_CHECK_MSG(T, fabs(rc.grad_norm - rg.grad_norm) <= 1e-12 * rc.grad_norm && rg.skipped == 0 &&
                              rc.lr == rg.lr,
                       "grad norm cpu %.17g gpu %.17g", rc.grad_norm, rg.grad_norm);
        for (i = 0; i < n; i++) r[i] = cm->w[i];
        snprintf(what, sizeof what, "gpu adafactor step %d w", s);
        to_compare(T, cm, what, w, r);
        for (i = 0; i < n; i++) r[i] = FAT5__HOST(float, co->m1)[i];
        snprintf(what, sizeof what, "gpu adafactor step %d m1", s);
        to_compare(T, cm, what, m1, r);
        snprintf(what, sizeof what, "gpu adafactor step %d second moments", s);
        fat5_check_close(T, what, v, FAT5__HOST(const float, co->m2), co->n_v, 0.0, 1e-6);
        if (gm->wa != gm->wd) {   // the bf16 operands: every element of every tensor
            size_t bad = 0;
            if (!wa) wa = (uint16_t *)malloc(n * 2 + 2);
            if (!wa || fat5__dev_download(g, wa, gm->wa, n * 2) || fat5__dev_sync(g)) {
                FAT5_CHECK_MSG(T, 0, "bf16 operands: %s", fat5_last_error(g));
                break;
            }
            for (i = 0; i < n; i++) bad += wa[i] != fat5__f32_to_bf16(w[i]);
            FAT5_CHECK_MSG(T, bad == 0, "step %d: %zu of %zu bf16 operands are not the new weights rounded", s, bad, n);
        }
    }
done:
    free(wa);
    fat5_optim_destroy(co);
    fat5_optim_destroy(go);
    fat5_model_destroy(gm);
    fat5_model_destroy(cm);
    free(w);
    free(m1);
    free(v);
    free(r);
    fat5_ctx_destroy(g);
}
static void t_gpu_optim_adafactor_vs_cpu(fat5_test *T) {
    tgm_optim_adafactor(T, FAT5_DTYPE_FP32);
    tgm_optim_adafactor(T, FAT5_DTYPE_BF16);
}

// Two identical forward + backward passes on the GPU give bit-identical gradients (the embedding
// and relative-bias gradients have no atomics), in fp32 and in bf16, on a model and packed batch
// large enough for many blocks: 4 sequences of 300, 7, 129 and 64 encoder tokens, rel_buckets 32.
// A batch of n packed sequences of encoder / decoder lengths len_e / len_d over the caller's
// buffers (offsets written here; the tokens and labels are the caller's to fill, ecu[n] and dcu[n]
// of them).
static void tgm_batch_of(fat5_batch *b, int n, const int *len_e, const int *len_d, int32_t *ecu, int32_t *dcu,
                         int32_t *enc, int32_t *lab) {
    int s;
    ecu[0] = dcu[0] = 0;
    for (s = 0; s < n; s++) {
        ecu[s + 1] = ecu[s] + len_e[s];
        dcu[s + 1] = dcu[s] + len_d[s];
    }
    memset(b, 0, sizeof *b);
    b->n_seq = n;
    b->n_enc_tokens = ecu[n];
    b->n_dec_tokens = dcu[n];
    b->enc_tokens = enc;
    b->enc_cu_seqlens = ecu;
    b->labels = lab;
    b->dec_cu_seqlens = dcu;
}

static void t_gpu_backward_deterministic(fat5_test *T) {
    static const int len_e[] = {300, 7, 129, 64}, len_d[] = {100, 3, 60, 1};
    int mode;
    for (mode = 0; mode < 2; mode++) {
        fat5_ctx *g = tgm_ctx(T, mode ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32);
        fat5_model_config c = tm_tiny_config(1, 0, 1);
        fat5_model *m = NULL;
        fat5_batch b;
        fat5_loss_config lc = fat5_loss_config_default();
        fat5_forward_result fr;
        int32_t enc[500], lab[164], ecu[5], dcu[5];
        float *g1 = NULL, *g2 = NULL;
        fat5_rng rng = fat5_rng_init(77);
        int i, run;
        if (!g) return;
        c.vocab_size = 50;
        c.d_model = 64;
        c.num_heads = 4;
        c.d_kv = 16;
        c.d_ff = 96;
        c.rel_buckets = 32;
        c.rel_max_distance = 128;
        tgm_batch_of(&b, 4, len_e, len_d, ecu, dcu, enc, lab);
        for (i = 0; i < ecu[4]; i++) enc[i] = (int32_t)fat5_rng_below(&rng, 50);
        for (i = 0; i < dcu[4]; i++) lab[i] = i % 17 == 5 ? -100 : (int32_t)fat5_rng_below(&rng, 50);
        enc[3] = enc[4] = enc[5] = enc[6] = 7;  // repeated tokens
        lc.z_loss = 1e-4;
        if (fat5_model_create(g, &c, 5, &m) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "model: %s", fat5_last_error(g));
            fat5_ctx_destroy(g);
            return;
        }
        g1 = (float *)malloc(m->n_floats * 4);
        g2 = (float *)malloc(m->n_floats * 4);
        for (run = 0; run < 2 && g1 && g2; run++) {
            if (fat5_model_zero_grad(m) || fat5_model_forward(m, &b, &lc, &fr) || fat5_model_backward(m, 1.0f) ||
                fat5__dev_download(g, run ? g2 : g1, m->gd, m->n_floats * 4) || fat5__dev_sync(g)) {
                FAT5_CHECK_MSG(T, 0, "run %d: %s", run, fat5_last_error(g));
                break;
            }
        }
        if (g1 && g2 && !T->failed)
            for (i = 0; i < m->n_params; i++) {
                const fat5__param *p = &m->params[i];
                FAT5_CHECK_MSG(T, memcmp(g1 + p->offset, g2 + p->offset, p->numel * 4) == 0,
                               "[%s] %s: the gradients of two identical steps differ", mode ? "bf16" : "fp32",
                               p->name);
            }
        free(g1);
        free(g2);
        fat5_model_destroy(m);
        fat5_ctx_destroy(g);
    }
}

// loss_total on the GPU gives the CPU twin's bits (the same fixed order of double sums) for row
// counts around the block's 256 threads, a large batch, no counted rows, and a NaN row (which
// reaches the loss); the training loop and fat5_model_forward read their losses from it.
static void t_gpu_loss_total(fat5_test *T) {
    static const int64_t rows[] = {1, 37, 255, 256, 257, 4096, 100003};
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_FP32);
    fat5_rng rng = fat5_rng_init(31);
    float *ce = NULL, *z = NULL;
    fat5__dptr dce = 0, dz = 0, dout = 0;
    size_t ri;
    if (!g) return;
    ce = (float *)malloc(100003 * sizeof(float));
    z = (float *)malloc(100003 * sizeof(float));
    if (!ce || !z || fat5__dev_alloc(g, 100003 * 4, &dce) || fat5__dev_alloc(g, 100003 * 4, &dz) ||
        fat5__dev_alloc(g, 16, &dout)) {
        FAT5_CHECK_MSG(T, 0, "alloc: %s", fat5_last_error(g));
        goto done;
    }
    for (ri = 0; ri < sizeof rows / sizeof rows[0] + 2; ri++) {
        int64_t n = ri < sizeof rows / sizeof rows[0] ? rows[ri] : 300, cnt = ri == sizeof rows / sizeof rows[0] ? 0 : n, i;
        double want[2], got[2];
        for (i = 0; i < n; i++) {
            ce[i] = (float)(5.0 + fat5_rng_normal(&rng));
            z[i] = (float)(1e-4 * fat5_rng_uniform(&rng));
        }
        if (ri == sizeof rows / sizeof rows[0] + 1) ce[123] = NAN;
        fat5__cpu_loss_total(NULL, FAT5__ADDR(want), FAT5__ADDR(ce), FAT5__ADDR(z), n, cnt);
        if (fat5__dev_upload(g, dce, ce, (size_t)n * 4) || fat5__dev_upload(g, dz, z, (size_t)n * 4) ||
            fat5__gpu_loss_total(g, dout, dce, dz, n, cnt) || fat5__dev_download(g, got, dout, 16)) {
            FAT5_CHECK_MSG(T, 0, "%lld rows: %s", (long long)n, fat5_last_error(g));
            break;
        }
        FAT5_CHECK_MSG(T, memcmp(want, got, sizeof want) == 0 || (isnan(want[1]) && isnan(got[1]) && isnan(want[0]) &&
                                                                  isnan(got[0])),
                       "%lld rows, %lld counted: GPU %.17g %.17g, CPU %.17g %.17g", (long long)n, (long long)cnt,
                       got[0], got[1], want[0], want[1]);
    }
done:
    fat5__dev_free(g, dce);
    fat5__dev_free(g, dz);
    fat5__dev_free(g, dout);
    free(ce);
    free(z);
    fat5_ctx_destroy(g);
}

// The per-kernel profile (dev/bench step): a training step under it counts each attention kernel
// once per attention of the graph (the encoder's self-attention, the decoder's self- and
// cross-attention), keys the lm_head's product by its shape, times every call, and starts empty
// when turned on again; off, the context has no table.
static void t_gpu_profile(fat5_test *T) {
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_BF16);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_forward_result fr;
    struct fat5__prof *p;
    static const int len_e[] = {300, 7, 129, 64}, len_d[] = {100, 3, 60, 1};  // products of > 16 rows: cuBLAS
    int32_t enc[500], lab[164], ecu[5], dcu[5];
    long long fwd = 0, dq = 0, dkv = 0, calls = 0;
    int i, lm_head = 0, n_attn;
    double ms = 0;
    char key[FAT5__PROF_KEY];
    if (!g) return;
    tgm_batch_of(&b, 4, len_e, len_d, ecu, dcu, enc, lab);
    for (i = 0; i < ecu[4]; i++) enc[i] = (int32_t)(i * 7 % (int)c.vocab_size);
    for (i = 0; i < dcu[4]; i++) lab[i] = (int32_t)(i * 5 % (int)c.vocab_size);
    if (fat5_model_create(g, &c, 5, &m) || fat5_model_forward(m, &b, NULL, &fr) || fat5_model_backward(m, 1.0f)) {
        FAT5_CHECK_MSG(T, 0, "warm-up: %s", fat5_last_error(g));
        goto done;
    }
    FAT5_CHECK(T, g->gpu->prof == NULL);
    if (fat5__dev_prof_enable(g, 1) || fat5_model_zero_grad(m) || fat5_model_forward(m, &b, NULL, &fr) ||
        fat5_model_backward(m, 1.0f) || fat5__dev_prof_collect(g)) {
        FAT5_CHECK_MSG(T, 0, "profiled step: %s", fat5_last_error(g));
        goto done;
    }
    p = g->gpu->prof;
    FAT5_CHECK(T, p != NULL && p->n_e > 0 && p->n_pending == 0);
    snprintf(key, sizeof key, "gemm NT %lldx%lldx%lld", (long long)b.n_dec_tokens, (long long)c.vocab_size,
             (long long)c.d_model);
    for (i = 0; p && i < p->n_e; i++) {
        const fat5__prof_entry *e = &p->e[i];
        FAT5_CHECK_MSG(T, e->calls > 0 && e->ms >= 0, "%s: %lld calls, %g ms", e->key, e->calls, e->ms);
        if (!strncmp(e->key, "attn_fwd", 8)) fwd += e->calls;
        if (!strncmp(e->key, "attn_bwd_dq", 11)) dq += e->calls;
        if (!strncmp(e->key, "attn_bwd_dkv", 12)) dkv += e->calls;
        lm_head += !strcmp(e->key, key);
        calls += e->calls;
        ms += e->ms;
    }
    n_attn = c.num_layers + 2 * c.num_decoder_layers;
    FAT5_CHECK_MSG(T, fwd == n_attn && dq == n_attn && dkv == n_attn,
                   "attention calls: forward %lld, dq %lld, dk/dv %lld; the graph has %d attentions", fwd, dq, dkv,
                   n_attn);
    FAT5_CHECK_MSG(T, lm_head == 1, "no entry \"%s\" (the lm_head's product)", key);
    FAT5_CHECK(T, calls > 3 * n_attn && ms > 0);
    // again: an empty table; off: none
    FAT5_CHECK(T, fat5__dev_prof_enable(g, 1) == FAT5_OK && g->gpu->prof && g->gpu->prof->n_e == 0);
    FAT5_CHECK(T, fat5__dev_prof_enable(g, 0) == FAT5_OK && g->gpu->prof == NULL);
done:
    fat5_model_destroy(m);
    fat5_ctx_destroy(g);
}

// training on the GPU resumes bit-identically (fp32 and bf16)
static void tgm_train_resume(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx *ctx = tgm_ctx(T, dtype);
    if (!ctx) return;
    ttr_resume_bitwise(T, ctx, 0);
    if (T->failed) printf("  GPU: %s\n", fat5_last_error(ctx));
    fat5_ctx_destroy(ctx);
}
static void t_gpu_train_resume_fp32(fat5_test *T) { tgm_train_resume(T, FAT5_DTYPE_FP32); }
static void t_gpu_train_resume_bf16(fat5_test *T) { tgm_train_resume(T, FAT5_DTYPE_BF16); }

// ---- decoding with the KV cache on the GPU ----

// Runs the decode steps of tests/test_decode.c (30 positions, three inputs, row 1 leaving after 20)
// on model m; logits [TD_STEPS][3][V] (entries of a step in row order; a left row's stay 0).
// graph: steps after the first replay a CUDA graph.
static int tgm_decode_run(fat5_test *T, fat5_model *m, int graph, float *out) {
    fat5_decoder *d = NULL;
    int32_t enc[18], cu[4], dec[3][TD_STEPS], tok[3], rows[3];
    int64_t V = m->cfg.vocab_size, t, i;
    int ok = 1;
    td_inputs(V, enc, cu, dec);
    memset(out, 0, (size_t)(TD_STEPS * 3 * V) * sizeof(float));
    if (fat5_decoder_create(m, 3, 18, TD_STEPS, &d) || fat5_decoder_start(d, enc, cu, 3, 1)) {
        FAT5_CHECK_MSG(T, 0, "decoder: %s", fat5_last_error(m->ctx));
        fat5_decoder_destroy(d);
        return 0;
    }
    for (t = 0; t < TD_STEPS && ok; t++) {
        int64_t n = 0;
        for (i = 0; i < 3; i++)
            if (i != 1 || t < 20) {
                rows[n] = (int32_t)i;
                tok[n++] = dec[i][t];
            }
        if (!graph || t == 0) {
            ok = fat5_decoder_step(d, tok, rows, n, NULL) == FAT5_OK;
        } else {
            // the public step's bookkeeping (row 1 leaves), then the device work from the graph
            if (t >= 20) d->live[1] = 0;
            d->n_live = n;
            ok = m->be->upload(m->ctx, d->rows, rows, (size_t)n * 4) == FAT5_OK &&
                 m->be->upload(m->ctx, d->tok, tok, (size_t)n * 4) == FAT5_OK &&
                 fat5__decoder_graph_step(d, n) == FAT5_OK && m->be->sync(m->ctx) == FAT5_OK;
        }
        for (i = 0; i < n && ok; i++)
            ok = m->be->download(m->ctx, out + ((size_t)t * 3 + (size_t)rows[i]) * (size_t)V,
                                 d->logits + (fat5__addr)(i * V * 4), (size_t)V * 4) == FAT5_OK;
        ok = ok && m->be->sync(m->ctx) == FAT5_OK && fat5_decoder_position(d) == t + 1;
    }
    FAT5_CHECK_MSG(T, ok, "decode step: %s", fat5_last_error(m->ctx));
    fat5_decoder_destroy(d);
    return ok;
}

// The GPU decoder against the CPU decoder on every fixture: fp32 within 1e-4 (as the forward),
// bf16 within the forward's relative L2 bound (see tgm_compare).
static void tgm_decode_vs_cpu(fat5_test *T, fat5_dtype dtype) {
    fat5_ctx *gctx = tgm_ctx(T, dtype), *ctx = fat5_test_ctx(T);
    int k;
    if (!gctx) return;
    for (k = 0; k < TD_N_FIXTURES; k++) {
        char dir[512];
        fat5_model *c = NULL, *g = NULL;
        float *lc, *lg;
        size_t n;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[k]);
        if (fat5_model_load(ctx, dir, &c) || fat5_model_load(gctx, dir, &g)) {
            FAT5_CHECK_MSG(T, 0, "load %s: %s / %s", dir, fat5_last_error(ctx), fat5_last_error(gctx));
            fat5_model_destroy(c);
            fat5_model_destroy(g);
            break;
        }
        n = (size_t)(TD_STEPS * 3 * c->cfg.vocab_size);
        lc = (float *)malloc(n * sizeof(float));
        lg = (float *)malloc(n * sizeof(float));
        fat5_model_set_training(g, 0);
        if (lc && lg && tgm_decode_run(T, c, 0, lc) && tgm_decode_run(T, g, 0, lg)) {
            if (dtype == FAT5_DTYPE_FP32) {
                double e = td_maxdiff(lg, lc, (int64_t)n);
                FAT5_CHECK_MSG(T, e <= 1e-4, "%s: GPU fp32 decode logits differ from the CPU's by %g", td_fixtures[k], e);
            } else {
                double u = 1.0 / 512.0, layers = (double)(c->cfg.num_layers + c->cfg.num_decoder_layers);
                double e = tgm_rel_l2(lg, lc, n), tol = 4.0 * u * sqrt(6.0 * layers);
                FAT5_CHECK_MSG(T, e <= tol, "%s: GPU bf16 decode logits: relative L2 error %g > %g", td_fixtures[k], e,
                               tol);
            }
        }
        free(lc);
        free(lg);
        fat5_model_destroy(c);
        fat5_model_destroy(g);
    }
    fat5_ctx_destroy(gctx);
}
static void t_gpu_decode_fp32_vs_cpu(fat5_test *T) { tgm_decode_vs_cpu(T, FAT5_DTYPE_FP32); }
static void t_gpu_decode_bf16_vs_cpu(fat5_test *T) { tgm_decode_vs_cpu(T, FAT5_DTYPE_BF16); }

// A step replayed from a CUDA graph gives bitwise the logits of plain launches (bf16, the serving
// configuration; the graph is re-captured when the number of live rows changes).
static void t_gpu_decode_graph_replay(fat5_test *T) {
    fat5_ctx *gctx = tgm_ctx(T, FAT5_DTYPE_BF16);
    char dir[512];
    fat5_model *g = NULL;
    float *a, *b;
    size_t n;
    if (!gctx) return;
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, td_fixtures[1]);
    if (fat5_model_load(gctx, dir, &g)) {
        FAT5_CHECK_MSG(T, 0, "load: %s", fat5_last_error(gctx));
        fat5_ctx_destroy(gctx);
        return;
    }
    n = (size_t)(TD_STEPS * 3 * g->cfg.vocab_size);
    a = (float *)malloc(n * sizeof(float));
    b = (float *)malloc(n * sizeof(float));
    if (a && b && tgm_decode_run(T, g, 0, a) && tgm_decode_run(T, g, 1, b))
        FAT5_CHECK_MSG(T, memcmp(a, b, n * sizeof(float)) == 0, "graph replay changed the logits (max diff %g)",
                       td_maxdiff(a, b, (int64_t)n));
    free(a);
    free(b);
    fat5_model_destroy(g);
    fat5_ctx_destroy(gctx);
}

// Local attention keeps the encoder's memory linear in the input length: a random T5 in
// inference mode with local:8 encodes one sequence of L and of 2L tokens on the GPU. The
// workspace fat5_model_encode lays out (its decoder's, measured by creating one for that input)
// and the device memory that workspace takes (cuMemGetInfo) grow by at most 2.2x, and the
// encodings match the CPU's within the fixtures' fp32 tolerance (1e-5 + 1e-4 relative).
static void t_gpu_long_memory(fat5_test *T) {
    const int64_t L = 4096;
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_FP32), *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *cm = NULL, *gm = NULL;
    fat5_attention at;
    int32_t *tok = NULL, cu[2];
    float *hc = NULL, *hg = NULL;
    size_t ws[2] = {0, 0}, used[2] = {0, 0};
    int k, i;
    if (!g) return;
    c.vocab_size = 64;
    c.d_model = 64;
    c.d_kv = 32;
    c.num_heads = 2;
    c.d_ff = 128;
    c.rel_buckets = 32;
    c.rel_max_distance = 128;
    tok = (int32_t *)malloc((size_t)(2 * L) * sizeof(int32_t));
    hc = (float *)malloc((size_t)(2 * L * c.d_model) * sizeof(float));
    hg = (float *)malloc((size_t)(2 * L * c.d_model) * sizeof(float));
    if (!tok || !hc || !hg || fat5_model_create(ctx, &c, 31, &cm) != FAT5_OK ||
        fat5_model_create(g, &c, 0, &gm) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s / %s", fat5_last_error(ctx), fat5_last_error(g));
        goto done;
    }
    for (i = 0; i < cm->n_params; i++) {
        const fat5__param *p = &cm->params[i];
        FAT5_CHECK(T, fat5_model_set_param(gm, p->name, cm->w + p->offset, (int64_t)p->numel) == FAT5_OK);
    }
    FAT5_CHECK(T, fat5_attention_parse(ctx, "local:8", &at) == FAT5_OK);
    FAT5_CHECK(T, fat5_model_set_attention(cm, &at) == FAT5_OK && fat5_model_set_attention(gm, &at) == FAT5_OK);
    FAT5_CHECK(T, fat5_model_set_training(cm, 0) == FAT5_OK && fat5_model_set_training(gm, 0) == FAT5_OK);
    {
        fat5_rng r = fat5_rng_init(77);
        for (i = 0; i < 2 * L; i++) tok[i] = 2 + (int32_t)(fat5_rng_uniform(&r) * (double)(c.vocab_size - 2));
    }
    for (k = 0; k < 2; k++) {
        const int64_t n = (k + 1) * L;
        fat5_decoder *d = NULL;
        size_t fr0 = 0, fr1 = 0, tot = 0;
        char what[80];
        cu[0] = 0;
        cu[1] = (int32_t)n;
        // the workspace of the encode (fat5_model_encode creates this decoder) and its device memory
        if (fat5__dev_mem_info(g, &fr0, &tot) != FAT5_OK || fat5_decoder_create(gm, 1, n, 0, &d) != FAT5_OK ||
            fat5__dev_mem_info(g, &fr1, &tot) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "decoder for %lld tokens: %s", (long long)n, fat5_last_error(g));
            fat5_decoder_destroy(d);
            goto done;
        }
        ws[k] = d->ws_bytes;
        used[k] = fr0 > fr1 ? fr0 - fr1 : 0;
        fat5_decoder_destroy(d);
        if (fat5_model_encode(gm, tok, cu, 1, FAT5_POOL_NONE, hg, n * c.d_model) != FAT5_OK ||
            fat5_model_encode(cm, tok, cu, 1, FAT5_POOL_NONE, hc, n * c.d_model) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "encode %lld tokens: %s / %s", (long long)n, fat5_last_error(g),
                           fat5_last_error(ctx));
            goto done;
        }
        snprintf(what, sizeof what, "local:8 encode of %lld tokens, GPU vs CPU", (long long)n);
        fat5_check_close(T, what, hg, hc, (size_t)(n * c.d_model), 1e-5, 1e-4);
    }
    FAT5_CHECK_MSG(T, ws[0] > 0 && (double)ws[1] <= 2.2 * (double)ws[0],
                   "encode workspace: %zu bytes for %lld tokens, %zu for %lld (more than 2.2x)", ws[0], (long long)L,
                   ws[1], (long long)(2 * L));
    // the driver's pages (2 MiB) blur small differences: 2.2x plus one page
    FAT5_CHECK_MSG(T, (double)used[1] <= 2.2 * (double)used[0] + 2097152.0,
                   "encode device memory: %zu bytes for %lld tokens, %zu for %lld (more than 2.2x)", used[0],
                   (long long)L, used[1], (long long)(2 * L));
done:
    free(tok);
    free(hc);
    free(hg);
    fat5_model_destroy(cm);
    fat5_model_destroy(gm);
    fat5_ctx_destroy(g);
}

// Sums across GPUs: dev/dist_check --gpus N in processes of their own (a CUDA context does not
// survive fork): N = 2 where the machine has two GPUs (then also a rank killed mid-sum, which
// must stop the other with its name), else NCCL with one rank. Skips without a GPU or NCCL.
static void t_gpu_dist_nccl(fat5_test *T) {
    fat5_ctx *ctx = NULL;
    char cmd[1024], path[700], *text = NULL;
    size_t len = 0;
    int n = 0, rc;
    GD_OPEN(T, ctx, FAT5_DTYPE_FP32, NULL, NULL);
    if (ctx->gpu->cu.cuDeviceGetCount(&n) != FAT5__CUDA_SUCCESS) n = 1;
    fat5_ctx_destroy(ctx);
    if (access("dev/dist_check", X_OK) != 0) FAT5_SKIP(T, "dev/dist_check is not built (make dev)");
    n = n >= 2 ? 2 : 1;
    snprintf(path, sizeof path, "%s/dist.txt", fat5_test_tmpdir(T));
    snprintf(cmd, sizeof cmd, "dev/dist_check --gpus %d > %s 2>&1", n, path);
    rc = system(cmd);
    FAT5_REQUIRE(T, fat5__read_file(fat5_test_ctx(T), path, 1 << 20, &text, &len) == FAT5_OK);
    if (strstr(text, "NCCL not found")) {
        char why[256];
        snprintf(why, sizeof why, "no NCCL (libnccl.so.2; set VIRTUAL_ENV or NCCL_HOME): %.150s", strstr(text, "NCCL"));
        fat5__free(fat5_test_ctx(T), text);
        FAT5_SKIP(T, why);
    }
    printf("%s", text);
    FAT5_CHECK(T, rc == 0);
    FAT5_CHECK(T, strstr(text, "rank 0: fp32") && strstr(text, "bit-exact") && !strstr(text, "WRONG"));
    if (n == 2) FAT5_CHECK(T, strstr(text, "rank 1: fp32") != NULL);
    fat5__free(fat5_test_ctx(T), text);
    text = NULL;
    if (n == 2) {   // rank 1 dies while rank 0 waits in an all-reduce: NCCL aborted, rank 0 names it
        snprintf(cmd, sizeof cmd, "dev/dist_check --gpus 2 --kill 1 --timeout 60 > %s 2>&1", path);
        rc = system(cmd);
        FAT5_REQUIRE(T, fat5__read_file(fat5_test_ctx(T), path, 1 << 20, &text, &len) == FAT5_OK);
        printf("%s", text);
        FAT5_CHECK(T, rc == 0 && strstr(text, "rank 0 stops: rank 1 failed") != NULL);
        fat5__free(fat5_test_ctx(T), text);
    }
}

#define FAT5_TESTS_GPU_MODEL(X) X(gpu_model_fp32_vs_cpu) X(gpu_model_bf16_vs_cpu) X(gpu_posenc_fp32_vs_cpu) \
    X(gpu_posenc_bf16_vs_cpu) X(gpu_fixtures_fp32) \
    X(gpu_fixtures_bf16) X(gpu_save_reload) X(gpu_optim_vs_cpu) X(gpu_optim_adafactor_vs_cpu) X(gpu_backward_deterministic) \
    X(gpu_train_resume_fp32) X(gpu_train_resume_bf16) X(gpu_decode_fp32_vs_cpu) X(gpu_decode_bf16_vs_cpu) \
    X(gpu_decode_graph_replay) X(gpu_long_memory) X(gpu_profile) X(gpu_loss_total) X(gpu_xent_chunks) X(gpu_dist_nccl)
