// Optimizers and schedules on the CPU backend: AdamW / AdamWScale against steps computed
// independently in double here, learning-rate schedules against their closed forms, clipping,
// the non-finite skip, gradient accumulation, and a few steps that lower a tiny model's loss;
// Adafactor against transformers' numbers (the fixture tests/data/adafactor, tolerance below).
// (The GPU optimizer is checked against this CPU one in test_gpu_model.c.)
//
// Tolerances of the optimizer checks. The library keeps weights and moments in fp32 and applies
// beta1, beta2, eps, the per-tensor step size alpha and the decay factor as fp32 numbers (the
// reference below rounds betas and eps the same way); everything else in the reference is exact
// double arithmetic. Each step adds an fp32 rounding of w, m1, m2 (2^-24 relative each) and the
// rounding of alpha and of the decay (2^-24 relative of the update and of w), so after three
// steps the error is ~ 10 ulps at most: we allow 1e-6 of the largest |value| of each tensor
// (~ 17 ulps of it) plus 1e-6 relative. Tensors are compared one at a time, so a tensor of tiny
// weights (the RMS floor below) gets a tolerance of its own scale.

#define TO_LR 1e-2

// name-based exclusions, written independently of the library's rule
static int to_excluded(const char *name) {
    return strstr(name, "layer_norm") != NULL || strstr(name, "relative_attention_bias") != NULL;
}

// a tiny CPU model (gated, untied: norms, bias tables and an lm_head) with random weights of scale
// 0.5, one tensor (the first q projection) scaled to 1e-5 so that its RMS is under the 1e-3 floor
static fat5_model *to_model(fat5_test *T, uint64_t seed) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    fat5_rng r = fat5_rng_init(seed);
    size_t i;
    if (fat5_model_create(fat5_test_ctx(T), &c, seed, &m) != FAT5_OK) return NULL;
    for (i = 0; i < m->n_floats; i++) m->w[i] = (float)(0.5 * fat5_rng_normal(&r));
    for (i = 0; i < m->params[m->enc[0].q].numel; i++) m->w[m->params[m->enc[0].q].offset + i] *= 2e-5f;
    return m;
}

static void to_fill_grads(float *g, size_t n, uint64_t seed, double scale) {
    fat5_rng r = fat5_rng_init(seed);
    size_t i;
    for (i = 0; i < n; i++) g[i] = (float)(scale * fat5_rng_normal(&r));
}

// the optimizer state computed independently, in double
typedef struct to_ref {
    double *w, *m1, *m2;
} to_ref;

static int to_ref_init(to_ref *r, const fat5_model *m) {
    size_t i;
    r->w = (double *)calloc(m->n_floats, sizeof(double));
    r->m1 = (double *)calloc(m->n_floats, sizeof(double));
    r->m2 = (double *)calloc(m->n_floats, sizeof(double));
    if (!r->w || !r->m1 || !r->m2) return 0;
    for (i = 0; i < m->n_floats; i++) r->w[i] = m->w[i];
    return 1;
}
static void to_ref_free(to_ref *r) {
    free(r->w);
    free(r->m1);
    free(r->m2);
}

// one update number `step` (0-based) at rate lr with clip factor gscale
static void to_ref_step(to_ref *r, const fat5_model *m, const float *g, const fat5_optim_config *c, int64_t step,
                        double lr, double gscale) {
    double b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps, t = (double)(step + 1);
    double bc = sqrt(1.0 - pow(c->beta2, t)) / (1.0 - pow(c->beta1, t));
    int p;
    for (p = 0; p < m->n_params; p++) {
        const fat5__param *P = &m->params[p];
        double ss = 0, alpha, decay = 1.0 - lr * (to_excluded(P->name) ? 0.0 : c->weight_decay);
        size_t i, o = P->offset;
        for (i = 0; i < P->numel; i++) ss += r->w[o + i] * r->w[o + i];
        alpha = lr * bc;
        if (c->kind == FAT5_OPTIM_ADAMW_SCALE) alpha *= fmax(1e-3, sqrt(ss / (double)P->numel));
        for (i = o; i < o + P->numel; i++) {
            double gi = gscale * g[i];
            r->m1[i] = b1 * r->m1[i] + (1 - b1) * gi;
            r->m2[i] = b2 * r->m2[i] + (1 - b2) * gi * gi;
            r->w[i] = (r->w[i] - alpha * r->m1[i] / (sqrt(r->m2[i]) + eps)) * decay;
        }
    }
}

// every tensor of got (fp32) against ref (double), atol 1e-6 of the tensor's largest |ref|
static void to_compare(fat5_test *T, const fat5_model *m, const char *what, const float *got, const double *ref) {
    int p;
    float *tmp = (float *)malloc(m->n_floats * sizeof(float));
    char nm[200];
    size_t i;
    if (!tmp) return;
    for (i = 0; i < m->n_floats; i++) tmp[i] = (float)ref[i];
    for (p = 0; p < m->n_params; p++) {
        const fat5__param *P = &m->params[p];
        double mx = 0;
        for (i = 0; i < P->numel; i++) mx = fmax(mx, fabs(ref[P->offset + i]));
        snprintf(nm, sizeof nm, "%s %s", what, P->name);
        fat5_check_close(T, nm, got + P->offset, tmp + P->offset, P->numel, 1e-6 * mx, 1e-6);
    }
    free(tmp);
}

static fat5_optim_config to_config(fat5_optim_kind kind, double wd) {
    fat5_optim_config c = fat5_optim_config_default();
    c.kind = kind;
    c.lr = TO_LR;
    c.weight_decay = wd;
    c.clip_norm = 0;
    c.sched = FAT5_SCHED_CONSTANT;
    c.warmup_steps = 0;
    c.total_steps = 0;
    return c;
}

// three updates with different gradients against the double reference
static void to_steps_case(fat5_test *T, fat5_optim_kind kind, double wd) {
    fat5_model *m = to_model(T, 5);
    fat5_optim *o = NULL;
    fat5_optim_config c = to_config(kind, wd);
    to_ref r;
    int s;
    char what[64];
    FAT5_REQUIRE(T, m != NULL);
    FAT5_REQUIRE(T, to_ref_init(&r, m));
    FAT5_REQUIRE_OK(T, fat5_optim_create(m, &c, &o));
    for (s = 0; s < 3; s++) {
        float *g = FAT5__HOST(float, m->gd);
        fat5_optim_result res;
        to_fill_grads(g, m->n_floats, 100 + (uint64_t)s, s == 1 ? 3.0 : 0.2);
        to_ref_step(&r, m, g, &c, s, TO_LR, 1.0);
        FAT5_REQUIRE_OK(T, fat5_optim_step(o, &res));
        FAT5_CHECK(T, res.skipped == 0 && res.lr == TO_LR);
        snprintf(what, sizeof what, "%s wd=%g step %d w", kind ? "adamw_scale" : "adamw", wd, s);
        to_compare(T, m, what, m->w, r.w);
        snprintf(what, sizeof what, "%s wd=%g step %d m1", kind ? "adamw_scale" : "adamw", wd, s);
        to_compare(T, m, what, FAT5__HOST(const float, o->m1), r.m1);
        snprintf(what, sizeof what, "%s wd=%g step %d m2", kind ? "adamw_scale" : "adamw", wd, s);
        to_compare(T, m, what, FAT5__HOST(const float, o->m2), r.m2);
    }
    FAT5_CHECK(T, fat5_optim_get_step(o) == 3);
    // the excluded tensors are those the library found (a norm weight and a bias table); the others
    // decay by the config's weight decay (the reference steps above check its value)
    {
        const int32_t *decayed = FAT5__HOST(const int32_t, o->decayed);
        FAT5_CHECK(T, decayed[m->enc[0].ln_sa] == 0 && decayed[m->enc[0].rel] == 0 && decayed[m->enc_final_ln] == 0 &&
                          decayed[m->enc[0].q] == (wd != 0) && decayed[m->shared] == (wd != 0));
    }
    fat5_optim_destroy(o);
    to_ref_free(&r);
    fat5_model_destroy(m);
}

static void t_optim_adamw_steps(fat5_test *T) {
    to_steps_case(T, FAT5_OPTIM_ADAMW, 0.0);
    to_steps_case(T, FAT5_OPTIM_ADAMW, 0.1);
}
static void t_optim_adamw_scale_steps(fat5_test *T) {
    to_steps_case(T, FAT5_OPTIM_ADAMW_SCALE, 0.0);
    to_steps_case(T, FAT5_OPTIM_ADAMW_SCALE, 0.1);
}

// the AdamWScale factor is taken per tensor: the same gradients move a tensor of RMS ~ 0.5 about
// 500 times further than the tensor under the 1e-3 floor (RMS ~ 1e-5)
static void t_optim_scale_factor(fat5_test *T) {
    fat5_model *m = to_model(T, 6);
    fat5_optim *o = NULL;
    fat5_optim_config c = to_config(FAT5_OPTIM_ADAMW_SCALE, 0.0);
    const fat5__param *pq = NULL, *pk = NULL;
    float *before;
    double dq = 0, dk = 0, rk = 0;
    size_t i;
    FAT5_REQUIRE(T, m != NULL);
    pq = &m->params[m->enc[0].q];
    pk = &m->params[m->enc[0].k];
    before = (float *)malloc(m->n_floats * sizeof(float));
    FAT5_REQUIRE(T, before != NULL);
    memcpy(before, m->w, m->n_floats * sizeof(float));
    for (i = 0; i < m->n_floats; i++) FAT5__HOST(float, m->gd)[i] = 1.0f;  // every |update| = alpha (1 / (1 + eps))
    FAT5_REQUIRE_OK(T, fat5_optim_create(m, &c, &o));
    FAT5_REQUIRE_OK(T, fat5_optim_step(o, NULL));
    for (i = 0; i < pq->numel; i++) dq = fmax(dq, fabs((double)m->w[pq->offset + i] - before[pq->offset + i]));
    for (i = 0; i < pk->numel; i++) {
        dk = fmax(dk, fabs((double)m->w[pk->offset + i] - before[pk->offset + i]));
        rk += (double)before[pk->offset + i] * before[pk->offset + i];
    }
    rk = sqrt(rk / (double)pk->numel);
    // first step from zero moments with g = 1: m1 = 1 - b1, m2 = 1 - b2 (fp32 betas), so
    // |update| = lr sqrt(1 - b2) / (1 - b1) * (1 - b1) / (sqrt(1 - b2) + eps) * factor ~ lr * factor
    {
        double b1 = (float)0.9, b2 = (float)0.999, eps = (float)1e-6;
        double a0 = TO_LR * sqrt(1 - 0.999) / (1 - 0.9) * (1 - b1) / (sqrt(1 - b2) + eps);
        FAT5_CHECK_MSG(T, fabs(dq - a0 * 1e-3) <= 1e-3 * a0 * 1e-3, "floor: moved %g, want %g", dq, a0 * 1e-3);
        FAT5_CHECK_MSG(T, fabs(dk - a0 * rk) <= 1e-3 * a0 * rk, "rms %g: moved %g, want %g", rk, dk, a0 * rk);
    }
    free(before);
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
}

// ---- schedules ----

static void to_lr_is(fat5_test *T, const fat5_optim_config *c, int64_t step, double want) {
    double got = fat5_sched_lr(c, step);
    FAT5_CHECK_MSG(T, fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want)), "sched %d step %lld: lr %.15g, want %.15g",
                   (int)c->sched, (long long)step, got, want);
}

static void t_sched_closed_forms(fat5_test *T) {
    fat5_optim_config c = fat5_optim_config_default();
    const double pi = 3.14159265358979323846;
    c.lr = 2.0;
    c.min_lr = 0.1;
    c.warmup_steps = 10;
    c.total_steps = 110;
    // constant: 0 at step 0, linear to lr at W, then lr
    c.sched = FAT5_SCHED_CONSTANT;
    to_lr_is(T, &c, 0, 0.0);
    to_lr_is(T, &c, 4, 2.0 * 4 / 10);
    to_lr_is(T, &c, 10, 2.0);
    to_lr_is(T, &c, 1000, 2.0);
    // linear: then down to 0 at T
    c.sched = FAT5_SCHED_LINEAR;
    to_lr_is(T, &c, 0, 0.0);
    to_lr_is(T, &c, 5, 1.0);
    to_lr_is(T, &c, 10, 2.0);
    to_lr_is(T, &c, 60, 1.0);
    to_lr_is(T, &c, 110, 0.0);
    to_lr_is(T, &c, 500, 0.0);
    // cosine (FAT5): lr/2 -> lr over W, then cosine to min_lr at T, min_lr after
    c.sched = FAT5_SCHED_COSINE;
    to_lr_is(T, &c, 0, 1.0);
    to_lr_is(T, &c, 5, 1.5);
    to_lr_is(T, &c, 10, 2.0);
    to_lr_is(T, &c, 35, 0.1 + 1.9 * 0.5 * (1 + cos(pi * 0.25)));
    to_lr_is(T, &c, 60, 0.1 + 1.9 * 0.5);
    to_lr_is(T, &c, 110, 0.1);
    to_lr_is(T, &c, 10000, 0.1);
    c.warmup_steps = 0;  // cosine only
    to_lr_is(T, &c, 0, 2.0);
    to_lr_is(T, &c, 55, 0.1 + 1.9 * 0.5);
    c.warmup_steps = 10;
    // wsd: lr/2 -> lr over W, stable, lr -> lr/2 over the last D steps (D = W when 0)
    c.sched = FAT5_SCHED_WSD;
    to_lr_is(T, &c, 0, 1.0);
    to_lr_is(T, &c, 5, 1.5);
    to_lr_is(T, &c, 10, 2.0);
    to_lr_is(T, &c, 100, 2.0);
    to_lr_is(T, &c, 105, 1.5);
    to_lr_is(T, &c, 110, 1.0);
    to_lr_is(T, &c, 200, 1.0);
    c.decay_steps = 40;
    to_lr_is(T, &c, 70, 2.0);
    to_lr_is(T, &c, 90, 1.5);
    c.decay_steps = 0;
    // inverse square root, relative to lr (not nanoT5's absolute 1e-2)
    c.sched = FAT5_SCHED_INV_SQRT;
    to_lr_is(T, &c, 0, 0.0);
    to_lr_is(T, &c, 5, 1.0);
    to_lr_is(T, &c, 10, 2.0);
    to_lr_is(T, &c, 40, 1.0);
    to_lr_is(T, &c, 1000, 2.0 * sqrt(10.0 / 1000.0));
    c.total_steps = 0;  // needs no horizon
    to_lr_is(T, &c, 40, 1.0);
}

static void t_optim_config_rejects(fat5_test *T) {
    fat5_model *m = to_model(T, 7);
    fat5_optim *o = NULL;
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_optim_config c;
    FAT5_REQUIRE(T, m != NULL);
#define TO_REJECT(field_change, needle)                                                                       \
    do {                                                                                                    \
        c = fat5_optim_config_default();                                                                    \
        field_change;                                                                                       \
        FAT5_CHECK(T, fat5_optim_create(m, &c, &o) == FAT5_ERR_INVALID_ARG && o == NULL);                   \
        FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), needle) != NULL, "%s: message '%s'", needle,         \
                       fat5_last_error(ctx));                                                               \
    } while (0)
    TO_REJECT(c.lr = 0, "lr");
    TO_REJECT(c.lr = NAN, "lr");
    TO_REJECT(c.beta1 = 1.0, "beta1");
    TO_REJECT(c.beta2 = -0.1, "beta2");
    TO_REJECT(c.eps = 0, "eps");
    TO_REJECT(c.weight_decay = -1, "weight_decay");
    TO_REJECT(c.clip_norm = -1, "clip_norm");
    TO_REJECT(c.warmup_steps = -1, "warmup_steps");
    TO_REJECT((c.warmup_steps = 100, c.total_steps = 50), "warmup_steps 100 > total_steps 50");
    TO_REJECT(c.total_steps = 0, "cosine schedule needs total_steps");
    TO_REJECT(c.min_lr = 1.0, "min_lr");
    TO_REJECT(c.sched = (fat5_sched_kind)9, "sched");
    TO_REJECT(c.kind = (fat5_optim_kind)3, "kind");
    TO_REJECT((c.sched = FAT5_SCHED_WSD, c.warmup_steps = 10, c.total_steps = 30, c.decay_steps = 25), "wsd");
    // Adafactor's options (checked only for that kind, as transformers' constructor checks them)
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_warmup_init = 1), "adafactor_warmup_init");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_relative_step = 2), "adafactor_relative_step");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_scale_parameter = -1), "adafactor_scale_parameter");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_clip_threshold = 0), "adafactor_clip_threshold");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_decay_rate = 0), "adafactor_decay_rate");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_decay_rate = NAN), "adafactor_decay_rate");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_beta1 = 1.0), "adafactor_beta1");
    TO_REJECT((c.kind = FAT5_OPTIM_ADAFACTOR, c.adafactor_beta1 = -0.5), "adafactor_beta1");
#undef TO_REJECT
    c = fat5_optim_config_default();   // warmup_init with relative_step is accepted
    c.kind = FAT5_OPTIM_ADAFACTOR;
    c.adafactor_relative_step = c.adafactor_warmup_init = 1;
    FAT5_CHECK(T, fat5_optim_create(m, &c, &o) == FAT5_OK);
    fat5_optim_destroy(o);
    o = NULL;
    c = fat5_optim_config_default();
    FAT5_CHECK(T, fat5_optim_create(m, &c, &o) == FAT5_OK);
    fat5_optim_destroy(o);
    fat5_optim_destroy(NULL);
    fat5_model_destroy(m);
}

// ---- clipping and the non-finite skip ----

// the first moment after one step from zero is (1 - b1) c g: it shows the clip factor c
static void to_clip_case(fat5_test *T, double clip, double gnorm_target, int expect_clip) {
    fat5_model *m = to_model(T, 8);
    fat5_optim *o = NULL;
    fat5_optim_config c = to_config(FAT5_OPTIM_ADAMW, 0.0);
    fat5_optim_result res;
    float *g, *want;
    double n2 = 0, norm, k;
    size_t i;
    FAT5_REQUIRE(T, m != NULL);
    g = FAT5__HOST(float, m->gd);
    to_fill_grads(g, m->n_floats, 9, 1.0);
    for (i = 0; i < m->n_floats; i++) n2 += (double)g[i] * g[i];
    for (i = 0; i < m->n_floats; i++) g[i] = (float)(g[i] * gnorm_target / sqrt(n2));
    for (n2 = 0, i = 0; i < m->n_floats; i++) n2 += (double)g[i] * g[i];
    norm = sqrt(n2);
    k = expect_clip ? clip / (norm + 1e-6) : 1.0;
    c.clip_norm = clip;
    FAT5_REQUIRE_OK(T, fat5_optim_create(m, &c, &o));
    FAT5_REQUIRE_OK(T, fat5_optim_step(o, &res));
    FAT5_CHECK_MSG(T, fabs(res.grad_norm - norm) <= 1e-12 * norm, "grad_norm %.15g, want %.15g", res.grad_norm, norm);
    want = (float *)malloc(m->n_floats * sizeof(float));
    FAT5_REQUIRE(T, want != NULL);
    for (i = 0; i < m->n_floats; i++) want[i] = (float)((1.0 - (double)(float)0.9) * k * g[i]);
    // m1 = fp32 of (1 - b1) (c g): two roundings
    fat5_check_close(T, "m1 = (1 - b1) c g", FAT5__HOST(const float, o->m1), want, m->n_floats, 0, 3e-7);
    free(want);
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
}

static void t_optim_clip(fat5_test *T) {
    to_clip_case(T, 1.0, 7.0, 1);    // above the threshold: scaled to norm 1
    to_clip_case(T, 1.0, 0.25, 0);   // below: untouched
    to_clip_case(T, 0.0, 1e3, 0);    // 0 = off
}

static void t_optim_nonfinite_skipped(fat5_test *T) {
    fat5_model *m = to_model(T, 10);
    fat5_optim *o = NULL;
    fat5_optim_config c = to_config(FAT5_OPTIM_ADAMW_SCALE, 0.1);
    fat5_optim_result res;
    float *w0, *m10, *m20, *g;
    size_t n, bytes;
    int k;
    FAT5_REQUIRE(T, m != NULL);
    n = m->n_floats;
    bytes = n * sizeof(float);
    g = FAT5__HOST(float, m->gd);
    w0 = (float *)malloc(bytes);
    m10 = (float *)malloc(bytes);
    m20 = (float *)malloc(bytes);
    FAT5_REQUIRE(T, w0 && m10 && m20);
    c.clip_norm = 1.0;
    FAT5_REQUIRE_OK(T, fat5_optim_create(m, &c, &o));
    to_fill_grads(g, n, 11, 1.0);
    FAT5_REQUIRE_OK(T, fat5_optim_step(o, &res));  // non-zero moments first
    for (k = 0; k < 3; k++) {
        memcpy(w0, m->w, bytes);
        memcpy(m10, FAT5__HOST(float, o->m1), bytes);
        memcpy(m20, FAT5__HOST(float, o->m2), bytes);
        to_fill_grads(g, n, 12, 1.0);
        g[n / 2] = k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY;
        FAT5_REQUIRE_OK(T, fat5_optim_step(o, &res));
        FAT5_CHECK_MSG(T, res.skipped == 1 && !isfinite(res.grad_norm), "case %d: skipped %d, norm %g", k, res.skipped,
                       res.grad_norm);
        FAT5_CHECK(T, memcmp(w0, m->w, bytes) == 0);
        FAT5_CHECK(T, memcmp(m10, FAT5__HOST(float, o->m1), bytes) == 0);
        FAT5_CHECK(T, memcmp(m20, FAT5__HOST(float, o->m2), bytes) == 0);
        FAT5_CHECK(T, fat5_optim_get_step(o) == 2 + k);  // counted
    }
    // a huge but finite gradient is clipped, not skipped
    to_fill_grads(g, n, 13, 1e30);
    FAT5_REQUIRE_OK(T, fat5_optim_step(o, &res));
    FAT5_CHECK(T, res.skipped == 0 && isfinite(res.grad_norm) && memcmp(w0, m->w, bytes) != 0);
    free(w0);
    free(m10);
    free(m20);
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
}

// ---- gradient accumulation and training ----

// The tiny batch (3 sequences) as two micro-batches: sequence 0, then sequences 1 and 2. Backward
// with grad_scale n_i / N (n_i labels counted in micro-batch i, N in the whole batch) sums to the
// gradient of the whole batch. Both are the same per-token terms summed in another grouping: the
// CPU ops sum in double and round once per op output, and the accumulation adds one more fp32
// rounding, so elements differ by a few ulps of partial sums no larger (here) than the largest
// gradient: we allow 2e-6 of max|g| (~30 ulps of it) and 1e-6 relative.
static void t_optim_grad_accumulation(fat5_test *T) {
    static const int32_t enc_a[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2, 1}, enc_a_cu[] = {0, 12};
    static const int32_t lab_a[] = {5, 6, -100, 8, 9, 10, 11, 12, 1}, dec_a_cu[] = {0, 9};
    static const int32_t enc_b[] = {5, 7, 9, 11, 3, 1, 4}, enc_b_cu[] = {0, 1, 7};
    static const int32_t lab_b[] = {4, 3, 2, -100, 1}, dec_b_cu[] = {0, 1, 5};
    fat5_model_config cfg = tm_tiny_config(1, 0, 1);
    fat5_model *m = NULL;
    fat5_batch full = tm_batch(), a, b;
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_forward_result r;
    float *g_full;
    double N, mx = 0;
    size_t i;
    FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &cfg, 21, &m));
    g_full = (float *)malloc(m->n_floats * sizeof(float));
    FAT5_REQUIRE(T, g_full != NULL);
    memset(&a, 0, sizeof a);
    a.n_seq = 1;
    a.n_enc_tokens = 12;
    a.n_dec_tokens = 9;
    a.enc_tokens = enc_a;
    a.enc_cu_seqlens = enc_a_cu;
    a.labels = lab_a;
    a.dec_cu_seqlens = dec_a_cu;
    b = a;
    b.n_seq = 2;
    b.n_enc_tokens = 7;
    b.n_dec_tokens = 5;
    b.enc_tokens = enc_b;
    b.enc_cu_seqlens = enc_b_cu;
    b.labels = lab_b;
    b.dec_cu_seqlens = dec_b_cu;
    lc.z_loss = 1e-3;
    FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &full, &lc, &r));
    N = (double)r.n_tokens;
    FAT5_CHECK(T, r.n_tokens == 12);
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
    memcpy(g_full, FAT5__HOST(const float, m->gd), m->n_floats * sizeof(float));
    FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &a, &lc, &r));
    FAT5_CHECK(T, r.n_tokens == 8);
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, (float)(8.0 / N)));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, &lc, &r));
    FAT5_CHECK(T, r.n_tokens == 4);
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, (float)(4.0 / N)));
    for (i = 0; i < m->n_floats; i++) mx = fmax(mx, fabs(g_full[i]));
    FAT5_CHECK(T, mx > 0);
    fat5_check_close(T, "accumulated gradient", FAT5__HOST(const float, m->gd), g_full, m->n_floats, 2e-6 * mx, 1e-6);
    free(g_full);
    fat5_model_destroy(m);
}

// a few steps of either optimizer on a fixed batch lower the loss, and each step's loss is
// finite; deterministic: the same run twice gives the same bits
static double to_train(fat5_test *T, fat5_optim_kind kind, int steps, double *first) {
    fat5_model_config cfg = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    fat5_optim *o = NULL;
    fat5_optim_config c = fat5_optim_config_default();
    fat5_batch b = tm_batch();
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_forward_result r;
    double loss = NAN;
    int s;
    c.kind = kind;
    c.lr = kind == FAT5_OPTIM_ADAMW_SCALE ? 2e-2 : 1e-2;
    c.warmup_steps = 2;
    c.total_steps = steps;
    c.weight_decay = 0.01;
    if (fat5_model_create(fat5_test_ctx(T), &cfg, 3, &m) != FAT5_OK || fat5_optim_create(m, &c, &o) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "create: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    for (s = 0; s <= steps; s++) {
        if (fat5_model_zero_grad(m) || fat5_model_forward(m, &b, &lc, &r)) break;
        loss = r.loss;
        if (s == 0) *first = loss;
        if (s == steps) break;
        if (fat5_model_backward(m, 1.0f) || fat5_optim_step(o, NULL)) {
            loss = NAN;
            break;
        }
    }
done:
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
    return loss;
}

static void t_optim_lowers_loss(fat5_test *T) {
    int kind;
    for (kind = 0; kind < 3; kind++) {   // AdamW, AdamWScale, Adafactor
        double first = NAN, first2 = NAN, last = to_train(T, (fat5_optim_kind)kind, 20, &first);
        double again = to_train(T, (fat5_optim_kind)kind, 20, &first2);
        FAT5_CHECK_MSG(T, isfinite(last) && last < 0.8 * first, "kind %d: loss %g -> %g after 20 steps", kind, first,
                       last);
        FAT5_CHECK_MSG(T, memcmp(&last, &again, sizeof last) == 0, "kind %d: rerun %.17g vs %.17g", kind, last, again);
    }
}

// ---- Adafactor against transformers.optimization.Adafactor (tests/data/adafactor, written by
// ref/make_adafactor_fixture.py: a tiny T5 whose tensors are 2-D (among them 1 x 8, 8 x 1 and
// 32 x 1) and 1-D, five option sets, five steps each on seeded gradients) ----
//
// Tolerance, from fp32 rounding (u = 2^-24, the relative error of one rounded operation). Both
// sides compute each step in fp32; they differ only in rounding and summation order. Step t's
// change of element i is the update u_t (a product/quotient chain of the gradient, the factored
// second moments, the update's RMS clip and the rate) plus the decay wd lr p; its relative error is
// bounded by the operations on its path, counted at their worst case (a sum of n terms in fp32:
// (n - 1) u):
//   e = g^2 + eps1 (2u); a mean over <= 20 rows or columns (19u + 1u); the running average (3u),
//   whose relative error over the steps grows by at most that per step as a convex combination of
//   the new and old terms: (25 + 3 x 5)u after 5 steps; row / mean(row) (20u + 1u); each rsqrt
//   halves its input's relative error and adds 2u; two products (2u); the RMS of the update and of
//   the parameter (scale_parameter), each a sum of <= 160 squares (159u + 2u, halved by the sqrt:
//   81u each) and a division (1u); the rate (2u); the first moment, again a convex combination (3u).
// The sum is below 250u, so the change is within K = 256 u of its magnitude mag_t (the fixture's
// |update| + |wd lr p|). The parameter is also rounded to fp32 once per step on each side (2u |p|
// for the two), and an error once made is carried forward unchanged (p_t = p_{t-1} - change), so
// the bound after step t is the sum over steps s <= t of (2u |p_s| + K u mag_s), element-wise.
// The second moments and the first moment after the last step: K u relative (rtol 256u = 1.5e-5),
// plus K u of the tensor's largest value (the first moment is a sum of signed updates).
#define TO_AF_U (1.0 / 16777216.0)
#define TO_AF_K 256.0

// a number of the case's JSON options (NULL text or "null": 0, returns 0)
static int to_af_opt(const char *json, const char *key, double *out) {
    char pat[64];
    const char *at;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    *out = 0;
    at = json ? strstr(json, pat) : NULL;
    if (!at) return 0;
    at += strlen(pat);
    if (!strncmp(at, "null", 4)) return 0;
    if (!strncmp(at, "true", 4)) return *out = 1, 1;
    if (!strncmp(at, "false", 5)) return 1;
    *out = strtod(at, NULL);
    return 1;
}

// reads tensor `name` of the fixture (n floats) into dst; 0 if absent or of another size
static int to_af_read(fat5_st_file *f, const char *name, float *dst, size_t n) {
    int i = fat5_st_find(f, name);
    if (i < 0) return 0;
    return fat5_st_read_f32(f, i, dst, (int64_t)n) == FAT5_OK;
}

// max over i of |got - ref| / tol; the index of the worst in *worst
static double to_af_excess(const float *got, const float *ref, const double *tol, size_t n, size_t *worst) {
    double mx = 0;
    size_t i;
    *worst = 0;
    for (i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]) / tol[i];
        if (!(e <= mx)) mx = e, *worst = i;   // NaN counts as the worst
    }
    return mx;
}

static void to_adafactor_case(fat5_test *T, fat5_st_file *f, const char *name) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = NULL;
    fat5_optim *o = NULL;
    fat5_optim_config c = to_config(FAT5_OPTIM_ADAFACTOR, 0.0);
    char key[700], json_key[300];
    const char *json;
    double lr = 0, x = 0, steps = 0;
    double *tol = NULL;
    float *ref = NULL, *mag = NULL;
    int t, s, has_beta1;
    snprintf(json_key, sizeof json_key, "case.%.250s", name);
    json = fat5_st_metadata_find(f, json_key);
    FAT5_REQUIRE(T, json != NULL);
    FAT5_REQUIRE(T, to_af_opt(json, "steps", &steps) && steps >= 1);
    if (to_af_opt(json, "lr", &lr)) c.lr = lr;   // else (relative_step) the config's, unused
    to_af_opt(json, "relative_step", &x), c.adafactor_relative_step = (int)x;
    to_af_opt(json, "scale_parameter", &x), c.adafactor_scale_parameter = (int)x;
    to_af_opt(json, "warmup_init", &x), c.adafactor_warmup_init = (int)x;
    to_af_opt(json, "clip_threshold", &c.adafactor_clip_threshold);
    to_af_opt(json, "decay_rate", &c.adafactor_decay_rate);
    has_beta1 = to_af_opt(json, "beta1", &c.adafactor_beta1);
    to_af_opt(json, "weight_decay", &c.weight_decay);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, FAT5_TEST_DATA "/adafactor", &m));
    FAT5_REQUIRE_OK(T, fat5_model_set_training(m, 1));
    if (fat5_optim_create(m, &c, &o) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: create: %s", name, fat5_last_error(ctx));
        fat5_model_destroy(m);
        return;
    }
    tol = (double *)calloc(m->n_floats, sizeof(double));
    ref = (float *)malloc(m->n_floats * sizeof(float));
    mag = (float *)malloc(m->n_floats * sizeof(float));
    if (!tol || !ref || !mag) {
        FAT5_CHECK_MSG(T, 0, "out of memory");
        goto done;
    }
    for (t = 1; t <= (int)steps; t++) {
        fat5_optim_result res;
        float *g = FAT5__HOST(float, m->gd);
        for (s = 0; s < m->n_params; s++) {
            const fat5__param *P = &m->params[s];
            snprintf(key, sizeof key, "c.%.250s.t%d.grad.%s", name, t, P->name);
            if (!to_af_read(f, key, g + P->offset, P->numel)) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
            snprintf(key, sizeof key, "c.%.250s.t%d.param.%s", name, t, P->name);
            if (!to_af_read(f, key, ref + P->offset, P->numel)) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
            snprintf(key, sizeof key, "c.%.250s.t%d.mag.%s", name, t, P->name);
            if (!to_af_read(f, key, mag + P->offset, P->numel)) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
        }
        FAT5_REQUIRE_OK(T, fat5_optim_step(o, &res));
        FAT5_CHECK(T, res.skipped == 0);
        for (s = 0; s < m->n_params; s++) {
            const fat5__param *P = &m->params[s];
            size_t i, worst;
            double ex;
            for (i = P->offset; i < P->offset + P->numel; i++)
                tol[i] += 2 * TO_AF_U * fabs((double)ref[i]) + TO_AF_K * TO_AF_U * (double)mag[i];
            ex = to_af_excess(m->w + P->offset, ref + P->offset, tol + P->offset, P->numel, &worst);
            FAT5_CHECK_MSG(T, ex <= 1, "%s step %d %s[%zu]: %.9g, transformers %.9g (tolerance %.3g, exceeded %.3gx)",
                           name, t, P->name, worst, (double)m->w[P->offset + worst], (double)ref[P->offset + worst],
                           tol[P->offset + worst], ex);
        }
    }
    {   // the state after the last step: second moments (packed per the layout table), first moment
        const int64_t *af = FAT5__HOST(const int64_t, o->af);
        const float *v = FAT5__HOST(const float, o->m2);
        FAT5_CHECK(T, (o->m1 != 0) == (has_beta1 && c.adafactor_beta1 > 0));
        for (s = 0; s < m->n_params; s++) {
            const fat5__param *P = &m->params[s];
            const int64_t *e = af + 8 * s;
            double mx = 0;
            size_t i;
            FAT5_CHECK(T, e[4] == (P->ndim == 2));
            if (e[4]) {
                snprintf(key, sizeof key, "c.%.250s.row.%s", name, P->name);
                if (!to_af_read(f, key, ref, (size_t)e[2])) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
                snprintf(key, sizeof key, "c.%.250s.col.%s", name, P->name);
                if (!to_af_read(f, key, ref + e[2], (size_t)e[3])) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
                snprintf(key, sizeof key, "%.250s row+col averages %s", name, P->name);
                fat5_check_close(T, key, v + e[5], ref, (size_t)(e[2] + e[3]), 0.0, TO_AF_K * TO_AF_U);
            } else {
                snprintf(key, sizeof key, "c.%.250s.v.%s", name, P->name);
                if (!to_af_read(f, key, ref, P->numel)) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
                snprintf(key, sizeof key, "%.250s second moment %s", name, P->name);
                fat5_check_close(T, key, v + e[5], ref, P->numel, 0.0, TO_AF_K * TO_AF_U);
            }
            if (o->m1) {
                const float *m1 = FAT5__HOST(const float, o->m1) + P->offset;
                snprintf(key, sizeof key, "c.%.250s.m.%s", name, P->name);
                if (!to_af_read(f, key, ref, P->numel)) {
                FAT5_CHECK_MSG(T, 0, "%s: fixture tensor %s missing", name, key);
                goto done;
            }
                for (i = 0; i < P->numel; i++) mx = fmax(mx, fabs(ref[i]));
                snprintf(key, sizeof key, "%.250s first moment %s", name, P->name);
                fat5_check_close(T, key, m1, ref, P->numel, TO_AF_K * TO_AF_U * mx, TO_AF_K * TO_AF_U);
            }
        }
    }
    FAT5_CHECK(T, fat5_optim_get_step(o) == (int64_t)steps);
done:
    free(tol);
    free(ref);
    free(mag);
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
}

static void t_optim_adafactor_fixture(fat5_test *T) {
    fat5_st_file *f = NULL;
    const char *list;
    char names[256], *tok, *end;
    int n = 0;
    FAT5_REQUIRE_OK(T, fat5_st_load(fat5_test_ctx(T), FAT5_TEST_DATA "/adafactor/adafactor.safetensors", &f));
    list = fat5_st_metadata_find(f, "cases");
    FAT5_REQUIRE(T, list != NULL && strlen(list) < sizeof names);
    snprintf(names, sizeof names, "%s", list);
    for (tok = names; *tok; tok = end, n++) {   // the comma-separated names
        end = tok + strcspn(tok, ",");
        if (*end) *end++ = 0;
        to_adafactor_case(T, f, tok);
    }
    FAT5_CHECK_MSG(T, n == 5, "%d cases in the fixture", n);
    fat5_st_destroy(f);
}

#define FAT5_TESTS_OPTIM(X) X(optim_adamw_steps) X(optim_adamw_scale_steps) X(optim_scale_factor) \
    X(sched_closed_forms) X(optim_config_rejects) X(optim_clip) X(optim_nonfinite_skipped)          \
    X(optim_grad_accumulation) X(optim_lowers_loss) X(optim_adafactor_fixture)
