// =============================================================================================
// ==[5.3] train: optimizers and schedules ==

// The update, for every parameter tensor p with gradient g (fp32 master weights and moments on the
// model's backend, written once over the op interface):
//   norm  = global L2 norm of all gradients (per-tensor sums of squares in double, summed on the
//           host in tensor order: deterministic on both backends)
//   not finite -> the step is skipped: weights and moments untouched, result.skipped = 1; the step
//           counter still advances (the schedule moves on, and the bias correction below counts it)
//   c     = clip_norm / (norm + 1e-6) when clip_norm > 0 and that is < 1, else 1 (torch's
//           clip_grad_norm_); g' = c g (on the fly: the gradients are neither scaled nor zeroed)
//   t     = step + 1;  lr = fat5_sched_lr(cfg, step)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   alpha = lr sqrt(1 - b2^t) / (1 - b1^t), times max(1e-3, RMS(p)) for ADAMW_SCALE, RMS taken
//           before the update (RMS = |p|_2 / sqrt(numel))
//   p = p - alpha m / (sqrt(v) + eps)        (eps on the uncorrected sqrt(v), as in HF's AdamW)
//   p = p (1 - lr wd)                        (decoupled, after the update; wd = 0 for excluded tensors)
// then the bf16 matmul operands are refreshed from the new master weights. Both kinds place eps
// and the decay this way (torch.optim.AdamW puts eps on the corrected sqrt(v) and decays first;
// the difference is O(eps) and O(lr^2 wd)).
// Weight-decay exclusions: every tensor whose name contains "norm" or "bias" (case-insensitive):
// the RMSNorm weights and the relative_attention_bias tables.

#define FAT5__OPTIM_CHUNK 8192  // elements per chunk of the GPU reductions and update

struct fat5_optim {
    fat5_model *m;
    fat5_optim_config cfg;
    int64_t step;                     // updates taken (skipped ones included)
    fat5__addr m1, m2;                // fp32 [n_floats] first and second moments on the model's backend
    // fixed at creation
    int n_seg;                        // parameter tensors (m->n_params)
    int64_t n_chunks;
    fat5__addr segs, chunk_off;       // int64 [2 n_seg], [n_seg + 1] on the backend
    fat5__addr part;                  // double [n_chunks]: the GPU's per-chunk partial sums
    fat5__addr ss;                    // double [2 n_seg]: per-tensor sums of squares of gradients, weights
    fat5__addr coef;                  // fp32 [2 n_seg]: alpha, decay of each tensor this step
    fat5__addr decayed;               // int32 [n_seg]: 1 where the tensor has weight decay
    fat5__addr stats;                 // double [2]: this step's gradient norm and clipping factor
};

FAT5_API fat5_optim_config fat5_optim_config_default(void) {
    fat5_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = FAT5_OPTIM_ADAMW_SCALE;
    c.lr = 5e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-6;
    c.weight_decay = 0.0;
    c.clip_norm = 1.0;
    c.sched = FAT5_SCHED_COSINE;
    c.warmup_steps = 10000;   // placeholders (nanoT5's pre-training run): set both for your run
    c.total_steps = 65536;
    c.decay_steps = 0;
    c.min_lr = 1e-5;
    return c;
}

static const char *fat5__sched_name(fat5_sched_kind k) {
    switch (k) {
    case FAT5_SCHED_CONSTANT: return "constant";
    case FAT5_SCHED_LINEAR: return "linear";
    case FAT5_SCHED_COSINE: return "cosine";
    case FAT5_SCHED_WSD: return "wsd";
    case FAT5_SCHED_INV_SQRT: return "inv_sqrt";
    }
    return "?";
}

static fat5_status fat5__optim_config_check(fat5_ctx *ctx, const fat5_optim_config *c) {
    const char *E = "optimizer config";
    int sched_needs_total;
    if (c->kind != FAT5_OPTIM_ADAMW && c->kind != FAT5_OPTIM_ADAMW_SCALE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind = %d, expected FAT5_OPTIM_ADAMW (0) or "
                         "FAT5_OPTIM_ADAMW_SCALE (1)", E, (int)c->kind);
    if (!(isfinite(c->lr) && c->lr > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: lr = %g, expected a finite value > 0", E, c->lr);
    if (!(c->beta1 >= 0 && c->beta1 < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: beta1 = %g, expected a value in [0, 1)", E, c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: beta2 = %g, expected a value in [0, 1)", E, c->beta2);
    if (!(isfinite(c->eps) && c->eps > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: eps = %g, expected a finite value > 0", E, c->eps);
    if (!(isfinite(c->weight_decay) && c->weight_decay >= 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: weight_decay = %g, expected a finite value >= 0", E,
                         c->weight_decay);
    if (c->weight_decay * c->lr >= 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: lr x weight_decay = %g, expected < 1 (the decay factor 1 - lr wd must stay positive)",
                         E, c->weight_decay * c->lr);
    if (!(isfinite(c->clip_norm) && c->clip_norm >= 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: clip_norm = %g, expected a finite value >= 0 (0 = off)", E,
                         c->clip_norm);
    if ((int)c->sched < FAT5_SCHED_CONSTANT || (int)c->sched > FAT5_SCHED_INV_SQRT)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: sched = %d, expected a fat5_sched_kind (0..4)", E,
                         (int)c->sched);
    if (c->warmup_steps < 0 || c->total_steps < 0 || c->decay_steps < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: warmup_steps %lld, total_steps %lld, decay_steps %lld: each must be >= 0", E,
                         (long long)c->warmup_steps, (long long)c->total_steps, (long long)c->decay_steps);
    if (!(isfinite(c->min_lr) && c->min_lr >= 0 && c->min_lr <= c->lr))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: min_lr = %g, expected a value in [0, lr = %g]", E, c->min_lr,
                         c->lr);
    sched_needs_total = c->sched == FAT5_SCHED_LINEAR || c->sched == FAT5_SCHED_COSINE || c->sched == FAT5_SCHED_WSD;
    if (sched_needs_total && c->total_steps < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the %s schedule needs total_steps >= 1 (got %lld)", E,
                         fat5__sched_name(c->sched), (long long)c->total_steps);
    if (c->total_steps > 0 && c->warmup_steps > c->total_steps)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: warmup_steps %lld > total_steps %lld", E,
                         (long long)c->warmup_steps, (long long)c->total_steps);
    if (c->sched == FAT5_SCHED_WSD) {
        int64_t dd = c->decay_steps ? c->decay_steps : c->warmup_steps;
        if (c->warmup_steps + dd > c->total_steps)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: wsd: warmup_steps %lld + decay steps %lld > total_steps %lld", E,
                             (long long)c->warmup_steps, (long long)dd, (long long)c->total_steps);
    }
    return FAT5_OK;
}

// The rate of the update taken at `step` (0 = the first). W = warmup_steps, T = total_steps.
//   CONSTANT  lr t/W for t < W, then lr                                         (HF constant_with_warmup)
//   LINEAR    lr t/W for t < W, then lr (T - t)/(T - W), 0 from T on            (HF linear)
//   COSINE    lr (0.5 + 0.5 t/W) for t < W, then min_lr + (lr - min_lr)(1 + cos(pi (t - W)/(T - W)))/2,
//             min_lr from T on (not periodic)                                   (FAT5 / nanoT5)
//   WSD       lr (0.5 + 0.5 t/W) for t < W; lr until T - D; then lr (1 - 0.5 (t - T + D)/D) down to
//             lr/2 at T and after (D = decay_steps, or W when 0)                (FAT5)
//   INV_SQRT  lr t/W for t < W, then lr sqrt(max(W, 1) / max(t, 1))             (relative to lr)
// An invalid config gives 0 (fat5_optim_create reports why).
FAT5_API double fat5_sched_lr(const fat5_optim_config *c, int64_t step) {
    double lr, t, W, T;
    if (!c || !(isfinite(c->lr) && c->lr > 0) || c->warmup_steps < 0 || c->total_steps < 0 || c->decay_steps < 0)
        return 0.0;
    lr = c->lr;
    if (step < 0) step = 0;
    t = (double)step;
    W = (double)c->warmup_steps;
    T = (double)c->total_steps;
    switch (c->sched) {
    case FAT5_SCHED_CONSTANT:
        return step < c->warmup_steps ? lr * t / W : lr;
    case FAT5_SCHED_LINEAR:
        if (step < c->warmup_steps) return lr * t / W;
        if (step >= c->total_steps) return 0.0;
        return lr * (T - t) / (T - W);
    case FAT5_SCHED_COSINE:
        if (step < c->warmup_steps) return lr * (0.5 + 0.5 * t / W);
        if (step >= c->total_steps) return c->min_lr;
        return c->min_lr + (lr - c->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * (t - W) / (T - W)));
    case FAT5_SCHED_WSD: {
        int64_t dd = c->decay_steps ? c->decay_steps : c->warmup_steps, start = c->total_steps - dd;
        if (step < c->warmup_steps) return lr * (0.5 + 0.5 * t / W);
        if (step < start) return lr;
        if (step >= c->total_steps) return 0.5 * lr;
        return lr * (1.0 - 0.5 * (t - (double)start) / (double)dd);
    }
    case FAT5_SCHED_INV_SQRT:
        if (step < c->warmup_steps) return lr * t / W;
        return lr * sqrt((W > 1 ? W : 1.0) / (t > 1 ? t : 1.0));
    }
    return 0.0;
}

// "norm" or "bias" in the name, case-insensitive
static int fat5__optim_no_decay(const char *name) {
    char low[96];
    size_t i;
    for (i = 0; name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    low[i] = 0;
    return strstr(low, "norm") != NULL || strstr(low, "bias") != NULL;
}

FAT5_API void fat5_optim_destroy(fat5_optim *o) {
    fat5_ctx *ctx;
    const fat5__backend *be;
    if (!o) return;
    ctx = o->m->ctx;
    be = o->m->be;
    be->free(ctx, o->m1);
    be->free(ctx, o->m2);
    be->free(ctx, o->segs);
    be->free(ctx, o->chunk_off);
    be->free(ctx, o->part);
    be->free(ctx, o->ss);
    be->free(ctx, o->coef);
    be->free(ctx, o->decayed);
    be->free(ctx, o->stats);
    fat5__free(ctx, o);
}

FAT5_API fat5_status fat5_optim_create(fat5_model *m, const fat5_optim_config *cfg, fat5_optim **out) {
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_optim *o;
    int64_t *segs = NULL, *coff = NULL;
    int32_t *decayed = NULL;
    size_t n, ns;
    int s;
    fat5_status st;
    if (!out) return m ? fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_optim_create: out is NULL")
                       : FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    be = m->be;
    if (!cfg) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_optim_create: cfg is NULL");
    if ((st = fat5__optim_config_check(ctx, cfg))) return st;
    if (!m->training)
        return fat5__err(ctx, FAT5_ERR_STATE,
                         "fat5_optim_create: the model is in inference mode (fat5_model_set_training(m, 1) first)");
    if (!m->gd || !m->wd)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_optim_create: the model has no weights on its backend");
    o = FAT5__CAST(fat5_optim *, fat5__calloc(ctx, 1, sizeof *o));
    if (!o) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_optim_create: out of memory");
    o->m = m;
    o->cfg = *cfg;
    o->n_seg = m->n_params;
    ns = (size_t)o->n_seg;
    n = m->n_floats;
    // the tables, staged on the host: offset and numel of each tensor, its first chunk, its decay
    segs = FAT5__CAST(int64_t *, fat5__calloc(ctx, 2 * ns, sizeof(int64_t)));
    coff = FAT5__CAST(int64_t *, fat5__calloc(ctx, ns + 1, sizeof(int64_t)));
    decayed = FAT5__CAST(int32_t *, fat5__calloc(ctx, ns + 1, sizeof(int32_t)));
    if (!segs || !coff || !decayed) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_optim_create: out of memory");
        goto done;
    }
    for (s = 0; s < o->n_seg; s++) {
        const fat5__param *p = &m->params[s];
        segs[2 * s] = (int64_t)p->offset;
        segs[2 * s + 1] = (int64_t)p->numel;
        coff[s + 1] = coff[s] + (int64_t)((p->numel + FAT5__OPTIM_CHUNK - 1) / FAT5__OPTIM_CHUNK);
        decayed[s] = cfg->weight_decay != 0 && !fat5__optim_no_decay(p->name);
    }
    o->n_chunks = coff[ns];
    if ((st = be->alloc(ctx, n * 4, &o->m1)) || (st = be->alloc(ctx, n * 4, &o->m2)) ||
        (st = be->alloc(ctx, 2 * ns * 8, &o->segs)) || (st = be->alloc(ctx, (ns + 1) * 8, &o->chunk_off)) ||
        (st = be->alloc(ctx, (size_t)o->n_chunks * 8, &o->part)) || (st = be->alloc(ctx, 2 * ns * 8, &o->ss)) ||
        (st = be->alloc(ctx, 2 * ns * 4, &o->coef)) || (st = be->alloc(ctx, (ns + 1) * 4, &o->decayed)) ||
        (st = be->alloc(ctx, 2 * 8, &o->stats))) {
        st = fat5__err_prefix(ctx, st, "fat5_optim_create: moments of %zu parameters on the %s: ", n, be->name);
        goto done;
    }
    st = be->upload(ctx, o->segs, segs, 2 * ns * 8);
    if (!st) st = be->upload(ctx, o->chunk_off, coff, (ns + 1) * 8);
    if (!st) st = be->upload(ctx, o->decayed, decayed, (ns + 1) * 4);
    if (!st) st = be->sync(ctx);
done:
    fat5__free(ctx, segs);
    fat5__free(ctx, coff);
    fat5__free(ctx, decayed);
    if (st) {
        fat5_optim_destroy(o);
        return st;
    }
    *out = o;
    return FAT5_OK;
}

FAT5_API int64_t fat5_optim_get_step(const fat5_optim *o) { return o ? o->step : 0; }

// per-tensor sums of squares of x (the gradients or the master weights) into ss (double [n_seg])
static fat5_status fat5__optim_sumsq(fat5_optim *o, fat5__addr ss, fat5__addr x) {
    fat5_model *m = o->m;
    return m->be->sumsq_seg(m->ctx, ss, x, o->segs, o->chunk_off, o->n_seg, o->n_chunks, FAT5__OPTIM_CHUNK, o->part);
}

// The update is queued whole before the host waits once, at the end: the gradient norm, the clipping
// factor and the per-tensor step sizes are computed on the backend (optim_coef), and the update
// itself skips a step whose gradient norm is not finite (adamw_seg); the bf16 matrix operands of a
// GPU bf16 context are refreshed in the same pass. gate: n_gate doubles on the backend (the training
// loop's losses of the step) that skip the update when one is not finite (grad_norm NaN).
static fat5_status fat5__optim_step_gated(fat5_optim *o, fat5__addr gate, int n_gate, fat5_optim_result *out) {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    const fat5_optim_config *c;
    fat5_optim_result r;
    double lr, bc, t, stats[2];
    fat5__addr ss_w;
    fat5_status st;
    if (!o) return FAT5_ERR_INVALID_ARG;
    m = o->m;
    ctx = m->ctx;
    be = m->be;
    c = &o->cfg;
    memset(&r, 0, sizeof r);
    lr = fat5_sched_lr(c, o->step);
    r.lr = lr;
    t = (double)(o->step + 1);
    bc = sqrt(1.0 - pow(c->beta2, t)) / (1.0 - pow(c->beta1, t));
    // AdamWScale: the factor from the weights before the update
    ss_w = c->kind == FAT5_OPTIM_ADAMW_SCALE ? o->ss + 8 * (fat5__addr)o->n_seg : 0;
    if ((st = fat5__optim_sumsq(o, o->ss, m->gd)) || (ss_w && (st = fat5__optim_sumsq(o, ss_w, m->wd))) ||
        (st = be->optim_coef(ctx, o->coef, o->stats, o->ss, ss_w, o->segs, o->decayed, o->n_seg, lr * bc,
                             (float)(1.0 - lr * c->weight_decay), c->clip_norm, gate, n_gate)) ||
        (st = be->adamw_seg(ctx, m->wd, m->gd, o->m1, o->m2, o->segs, o->chunk_off, o->n_seg, o->n_chunks,
                            FAT5__OPTIM_CHUNK, o->coef, o->stats, (float)c->beta1, (float)c->beta2, (float)c->eps,
                            m->wa == m->wd ? 0 : m->wa)) ||
        (st = be->download(ctx, stats, o->stats, sizeof stats)) || (st = be->sync(ctx)))
        return st;
    r.grad_norm = stats[0];
    r.skipped = !isfinite(r.grad_norm);
    o->step++;
    if (out) *out = r;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_optim_step(fat5_optim *o, fat5_optim_result *out) {
    return fat5__optim_step_gated(o, 0, 0, out);
}

