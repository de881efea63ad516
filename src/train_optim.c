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
//
// Adafactor (FAT5_OPTIM_ADAFACTOR) is transformers.optimization.Adafactor's step, per tensor p of
// shape R x C (2-D: factored second moments) or n (1-D: a full one), with t = step + 1:
//   norm, skip, c and g' = c g as above (HF's Trainer clips before the optimizer as well)
//   lr    = min(1e-2, 1/sqrt(t)) with relative_step (min(1e-6 t, 1/sqrt(t)) with warmup_init), else
//           fat5_sched_lr(cfg, step); times max(1e-3, RMS(p)) with scale_parameter (RMS before the update)
//   b2    = 1 - t^decay_rate;  e = g'^2 + 1e-30
//   2-D:  row = b2 row + (1 - b2) mean over columns of e;  col = b2 col + (1 - b2) mean over rows of e
//         u = g' / sqrt(row / mean(row)) / sqrt(col)
//   1-D:  v = b2 v + (1 - b2) e;  u = g' / sqrt(v)
//   u     = lr u / max(1, RMS(u) / clip_threshold)
//   beta1 > 0: m = beta1 m + (1 - beta1) u;  u = m
//   p     = p - wd lr p   (the same exclusions as AdamW's decay; HF's Trainer groups them so)
//   p     = p - u
// The step count is the optimizer's (skipped steps included), as for AdamW's bias correction.
// The moments are fp32 arrays on the backend: m1 (numel floats, only with beta1 > 0) and m2, every
// tensor's second moments packed (R + C or n floats), described by the table af (kernels/optim.cu).
//
// Frozen parameters (fat5_model_freeze) are left out of everything above: the optimizer's tensors
// are the trainable ones, the norm is theirs, and they alone have moments. Gradients and moments
// lie in the gradient arena's layout (fat5__param.goffset: the trainable tensors one after
// another), the weights in the parameters'; so the update runs once per run of consecutive
// trainable tensors (one run when nothing is frozen), the arenas' bases moved to the run's first
// tensor, where one index reaches a weight, its gradient and its moments.

// One run of consecutive trainable tensors: the optimizer's segments seg0 .. seg0 + n_seg - 1,
// from float wlo of the weights and glo of the gradients and moments.
typedef struct fat5__optim_run {
    int seg0, n_seg;
    size_t wlo, glo;
    int64_t n_chunks;                 // its chunks (FAT5__OPTIM_CHUNK elements, per tensor)
    int64_t n_rows, n_cols;           // Adafactor: its rows, and the columns of its factored tensors
} fat5__optim_run;

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
    // Adafactor: m1 holds the first moment (0 without beta1), m2 the packed second moments
    size_t n_v;                       // floats of m2 (AdamW: n_floats)
    int64_t n_rows, n_cols;           // rows of all tensors, columns of the factored ones
    fat5__addr af;                    // int64 [8 n_seg]: the layout tables of fat5_adafactor_seg, run by
                                      // run (offsets, rows and columns counted from the run's start)
    fat5__addr af_scr;                // double [n_rows + 2 n_seg]: its scratch
    // the trainable tensors (n_seg of them; segs above: gradient offset, numel) and their runs
    size_t n_g;                       // floats of the gradients and of m1 (the model's n_gfloats)
    fat5__addr segs_w;                // int64 [2 n_seg]: weight offset, numel (the weights' RMS)
    int n_runs;
    fat5__optim_run *runs;            // [n_runs] host
    fat5__addr run_segs;              // int64 [2 n_seg]: offset from its run's first tensor, numel
    fat5__addr run_coff;              // int64 [n_seg + n_runs]: each run's chunk table, from 0
    unsigned freeze_gen;              // the model's frozen set it was made for
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
    c.adafactor_relative_step = 0;   // HF Trainer's optim "adafactor": the external rate and schedule
    c.adafactor_scale_parameter = 0;
    c.adafactor_warmup_init = 0;
    c.adafactor_clip_threshold = 1.0;
    c.adafactor_decay_rate = -0.8;
    c.adafactor_beta1 = 0.0;         // no first moment
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
    if (c->kind != FAT5_OPTIM_ADAMW && c->kind != FAT5_OPTIM_ADAMW_SCALE && c->kind != FAT5_OPTIM_ADAFACTOR)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind = %d, expected FAT5_OPTIM_ADAMW (0), "
                         "FAT5_OPTIM_ADAMW_SCALE (1) or FAT5_OPTIM_ADAFACTOR (2)", E, (int)c->kind);
    if (c->kind == FAT5_OPTIM_ADAFACTOR) {
        if (c->adafactor_relative_step != 0 && c->adafactor_relative_step != 1)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: adafactor_relative_step = %d, expected 0 or 1", E,
                             c->adafactor_relative_step);
        if (c->adafactor_scale_parameter != 0 && c->adafactor_scale_parameter != 1)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: adafactor_scale_parameter = %d, expected 0 or 1", E,
                             c->adafactor_scale_parameter);
        if (c->adafactor_warmup_init != 0 && !(c->adafactor_warmup_init == 1 && c->adafactor_relative_step))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: adafactor_warmup_init = %d, expected 0, or 1 with "
                             "adafactor_relative_step 1", E, c->adafactor_warmup_init);
        if (!(isfinite(c->adafactor_clip_threshold) && c->adafactor_clip_threshold > 0))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: adafactor_clip_threshold = %g, expected a finite value > 0",
                             E, c->adafactor_clip_threshold);
        if (!(isfinite(c->adafactor_decay_rate) && c->adafactor_decay_rate < 0))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: adafactor_decay_rate = %g, expected a finite value < 0", E,
                             c->adafactor_decay_rate);
        if (!(c->adafactor_beta1 >= 0 && c->adafactor_beta1 < 1))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: adafactor_beta1 = %g, expected a value in [0, 1) (0 = none)",
                             E, c->adafactor_beta1);
    }
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
    be->free(ctx, o->af);
    be->free(ctx, o->af_scr);
    be->free(ctx, o->segs_w);
    be->free(ctx, o->run_segs);
    be->free(ctx, o->run_coff);
    fat5__free(ctx, o->runs);
    fat5__free(ctx, o);
}

FAT5_API fat5_status fat5_optim_create(fat5_model *m, const fat5_optim_config *cfg, fat5_optim **out) {
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_optim *o;
    int64_t *segs = NULL, *coff = NULL, *af = NULL, *segs_w = NULL, *rsegs = NULL, *rcoff = NULL;
    int32_t *decayed = NULL;
    size_t ns;
    int s, i, r;
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
    if (m->n_frozen == m->n_params)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_optim_create: every parameter of the model is frozen "
                         "(fat5_model_freeze): nothing to train");
    o = FAT5__CAST(fat5_optim *, fat5__calloc(ctx, 1, sizeof *o));
    if (!o) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_optim_create: out of memory");
    o->m = m;
    o->cfg = *cfg;
    o->n_seg = m->n_params - m->n_frozen;
    o->n_g = m->n_gfloats;
    o->freeze_gen = m->freeze_gen;
    ns = (size_t)o->n_seg;
    for (i = 0; i < m->n_params; i++)   // the runs of consecutive trainable tensors
        if (!m->params[i].frozen && (i == 0 || m->params[i - 1].frozen)) o->n_runs++;
    // the tables, staged on the host: offset and numel of each trainable tensor, its first chunk, its
    // decay; the same per run
    segs = FAT5__CAST(int64_t *, fat5__calloc(ctx, 2 * ns, sizeof(int64_t)));
    segs_w = FAT5__CAST(int64_t *, fat5__calloc(ctx, 2 * ns, sizeof(int64_t)));
    rsegs = FAT5__CAST(int64_t *, fat5__calloc(ctx, 2 * ns, sizeof(int64_t)));
    coff = FAT5__CAST(int64_t *, fat5__calloc(ctx, ns + 1, sizeof(int64_t)));
    rcoff = FAT5__CAST(int64_t *, fat5__calloc(ctx, ns + (size_t)o->n_runs, sizeof(int64_t)));
    decayed = FAT5__CAST(int32_t *, fat5__calloc(ctx, ns + 1, sizeof(int32_t)));
    af = FAT5__CAST(int64_t *, fat5__calloc(ctx, 8 * ns + 1, sizeof(int64_t)));
    o->runs = FAT5__CAST(fat5__optim_run *, fat5__calloc(ctx, (size_t)o->n_runs, sizeof *o->runs));
    if (!segs || !segs_w || !rsegs || !coff || !rcoff || !decayed || !af || !o->runs) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_optim_create: out of memory");
        goto done;
    }
    o->n_v = cfg->kind == FAT5_OPTIM_ADAFACTOR ? 0 : o->n_g;
    for (i = 0, s = 0, r = -1; i < m->n_params; i++) {
        const fat5__param *p = &m->params[i];
        fat5__optim_run *R;
        int64_t nch = (int64_t)((p->numel + FAT5__OPTIM_CHUNK - 1) / FAT5__OPTIM_CHUNK);
        if (p->frozen) continue;
        if (i == 0 || m->params[i - 1].frozen) {   // a new run
            R = &o->runs[++r];
            R->seg0 = s;
            R->wlo = p->offset;
            R->glo = p->goffset;
        }
        R = &o->runs[r];
        segs[2 * s] = (int64_t)p->goffset;
        segs[2 * s + 1] = segs_w[2 * s + 1] = rsegs[2 * s + 1] = (int64_t)p->numel;
        segs_w[2 * s] = (int64_t)p->offset;
        rsegs[2 * s] = (int64_t)(p->offset - R->wlo);
        FAT5_ASSERT(p->offset - R->wlo == p->goffset - R->glo);
        coff[s + 1] = coff[s] + nch;
        rcoff[s + r + 1] = R->n_chunks + nch;   // the run's table: R->seg0 + r .. s + r + 1
        R->n_chunks += nch;
        decayed[s] = cfg->weight_decay != 0 && !fat5__optim_no_decay(p->name);
        if (cfg->kind == FAT5_OPTIM_ADAFACTOR) {   // the layout: 2-D tensors factored, 1-D ones full
            int fac = p->ndim >= 2;
            int64_t Rw = fac ? p->shape[0] : 1, C = fac ? (int64_t)p->numel / Rw : (int64_t)p->numel;
            int64_t *e = af + 8 * s;
            e[0] = rsegs[2 * s], e[1] = (int64_t)p->numel, e[2] = Rw, e[3] = C, e[4] = fac;
            e[5] = (int64_t)o->n_v, e[6] = R->n_rows, e[7] = R->n_cols;
            o->n_v += fac ? (size_t)(Rw + C) : p->numel;
            o->n_rows += Rw;
            R->n_rows += Rw;
            R->n_cols += fac ? C : 0;
            o->n_cols += fac ? C : 0;
        }
        R->n_seg++;
        s++;
    }
    o->n_chunks = coff[ns];
    st = FAT5_OK;   // the first moment (none for Adafactor without beta1), Adafactor's table and scratch
    if (cfg->kind != FAT5_OPTIM_ADAFACTOR || cfg->adafactor_beta1 > 0) st = be->alloc(ctx, o->n_g * 4, &o->m1);
    if (!st && cfg->kind == FAT5_OPTIM_ADAFACTOR && !(st = be->alloc(ctx, 8 * ns * 8, &o->af)))
        st = be->alloc(ctx, ((size_t)o->n_rows + 2 * ns) * 8, &o->af_scr);
    if (st || (st = be->alloc(ctx, o->n_v * 4, &o->m2)) ||
        (st = be->alloc(ctx, 2 * ns * 8, &o->segs)) || (st = be->alloc(ctx, (ns + 1) * 8, &o->chunk_off)) ||
        (st = be->alloc(ctx, 2 * ns * 8, &o->segs_w)) || (st = be->alloc(ctx, 2 * ns * 8, &o->run_segs)) ||
        (st = be->alloc(ctx, (ns + (size_t)o->n_runs) * 8, &o->run_coff)) ||
        (st = be->alloc(ctx, (size_t)o->n_chunks * 8, &o->part)) || (st = be->alloc(ctx, 2 * ns * 8, &o->ss)) ||
        (st = be->alloc(ctx, 2 * ns * 4, &o->coef)) || (st = be->alloc(ctx, (ns + 1) * 4, &o->decayed)) ||
        (st = be->alloc(ctx, 2 * 8, &o->stats))) {
        st = fat5__err_prefix(ctx, st, "fat5_optim_create: moments of %zu parameters on the %s: ", o->n_g, be->name);
        goto done;
    }
    st = be->upload(ctx, o->segs, segs, 2 * ns * 8);
    if (!st) st = be->upload(ctx, o->chunk_off, coff, (ns + 1) * 8);
    if (!st) st = be->upload(ctx, o->segs_w, segs_w, 2 * ns * 8);
    if (!st) st = be->upload(ctx, o->run_segs, rsegs, 2 * ns * 8);
    if (!st) st = be->upload(ctx, o->run_coff, rcoff, (ns + (size_t)o->n_runs) * 8);
    if (!st) st = be->upload(ctx, o->decayed, decayed, (ns + 1) * 4);
    if (!st && o->af) st = be->upload(ctx, o->af, af, 8 * ns * 8);
    if (!st) st = be->sync(ctx);
done:
    fat5__free(ctx, segs);
    fat5__free(ctx, segs_w);
    fat5__free(ctx, rsegs);
    fat5__free(ctx, coff);
    fat5__free(ctx, rcoff);
    fat5__free(ctx, decayed);
    fat5__free(ctx, af);
    if (st) {
        fat5_optim_destroy(o);
        return st;
    }
    *out = o;
    return FAT5_OK;
}

FAT5_API int64_t fat5_optim_get_step(const fat5_optim *o) { return o ? o->step : 0; }

// The optimizer's state arrays, as a training checkpoint names them: fp32 on the model's backend.
// AdamW / AdamWScale: optimizer.exp_avg and optimizer.exp_avg_sq (n_floats each). Adafactor:
// optimizer.exp_avg (n_floats, with beta1 only) and optimizer.adafactor_exp_avg_sq (every tensor's
// second moments packed in parameter order: a 2-D tensor's R row averages then its C column
// averages, a 1-D tensor's numel values).
typedef struct fat5__optim_array {
    const char *name;
    fat5__addr addr;
    size_t n;        // floats
    int nonneg;      // a second moment: >= 0
} fat5__optim_array;
#define FAT5__OPTIM_ARRAYS 2
static int fat5__optim_arrays(const fat5_optim *o, fat5__optim_array out[FAT5__OPTIM_ARRAYS]) {
    int k = 0;
    if (o->m1) {
        out[k].name = "optimizer.exp_avg", out[k].addr = o->m1, out[k].n = o->n_g, out[k].nonneg = 0;
        k++;
    }
    out[k].name = o->cfg.kind == FAT5_OPTIM_ADAFACTOR ? "optimizer.adafactor_exp_avg_sq" : "optimizer.exp_avg_sq";
    out[k].addr = o->m2, out[k].n = o->n_v, out[k].nonneg = 1;
    return k + 1;
}

// The name of the optimizer kind recorded in a checkpoint (and the option optim's value)
static const char *fat5__optim_kind_name(fat5_optim_kind k) {
    return k == FAT5_OPTIM_ADAFACTOR ? "adafactor" : k == FAT5_OPTIM_ADAMW ? "adamw" : "adamwscale";
}

// per-tensor sums of squares of x (the gradients, segs = o->segs, or the master weights, o->segs_w)
// into ss (double [n_seg])
static fat5_status fat5__optim_sumsq(fat5_optim *o, fat5__addr ss, fat5__addr x, fat5__addr segs) {
    fat5_model *m = o->m;
    return m->be->sumsq_seg(m->ctx, ss, x, segs, o->chunk_off, o->n_seg, o->n_chunks, FAT5__OPTIM_CHUNK, o->part);
}

// The rate of the optimizer's next update: the schedule's, or Adafactor's relative step
// (min(1e-2, 1/sqrt(t)), min(1e-6 t, 1/sqrt(t)) with warmup_init; t = step + 1), before
// any per-tensor scale.
static double fat5__optim_lr(const fat5_optim *o) {
    const fat5_optim_config *c = &o->cfg;
    double t = (double)(o->step + 1);
    if (c->kind == FAT5_OPTIM_ADAFACTOR && c->adafactor_relative_step) {
        double min_step = c->adafactor_warmup_init ? 1e-6 * t : 1e-2, rel = 1.0 / sqrt(t);
        return min_step < rel ? min_step : rel;
    }
    return fat5_sched_lr(c, o->step);
}

// Adafactor's update (see the top of this section) queued after the gradient norm: optim_coef
// gives each tensor its rate (times max(1e-3, RMS(p)) with scale_parameter), adafactor_seg the rest
static fat5_status fat5__optim_adafactor(fat5_optim *o, double lr, fat5__addr gate, int n_gate) {
    fat5_model *m = o->m;
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_optim_config *c = &o->cfg;
    double beta2t = 1.0 - pow((double)(o->step + 1), c->adafactor_decay_rate);
    fat5__addr ss_w = c->adafactor_scale_parameter ? o->ss + 8 * (fat5__addr)o->n_seg : 0;
    fat5_status st;
    int r;
    if ((st = fat5__optim_sumsq(o, o->ss, m->gd, o->segs)) ||
        (ss_w && (st = fat5__optim_sumsq(o, ss_w, m->wd, o->segs_w))) ||
        (st = be->optim_coef(ctx, o->coef, o->stats, o->ss, ss_w, o->segs, o->decayed, o->n_seg, lr, 1.0f,
                             c->clip_norm, gate, n_gate)))
        return st;
    for (r = 0; r < o->n_runs; r++) {   // each run of trainable tensors, from its first one
        const fat5__optim_run *R = &o->runs[r];
        if ((st = be->adafactor_seg(ctx, m->wd + 4 * (fat5__addr)R->wlo, m->gd + 4 * (fat5__addr)R->glo,
                                    o->m1 ? o->m1 + 4 * (fat5__addr)R->glo : 0, o->m2, o->af + 64 * (fat5__addr)R->seg0,
                                    R->n_seg, R->n_rows, R->n_cols, o->coef + 8 * (fat5__addr)R->seg0, o->stats,
                                    o->decayed + 4 * (fat5__addr)R->seg0, (float)beta2t, (float)(1.0 - beta2t), 1e-30f,
                                    (float)c->adafactor_clip_threshold, (float)c->adafactor_beta1,
                                    (float)c->weight_decay, o->af_scr,
                                    m->wa == m->wd ? 0 : m->wa + 2 * (fat5__addr)R->wlo)))
            return st;
    }
    return FAT5_OK;
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
    int k;
    if (!o) return FAT5_ERR_INVALID_ARG;
    m = o->m;
    ctx = m->ctx;
    be = m->be;
    c = &o->cfg;
    if (o->freeze_gen != m->freeze_gen)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_optim_step: the model's frozen parameters changed after the "
                         "optimizer was made (fat5_model_freeze): make a new optimizer");
    memset(&r, 0, sizeof r);
    lr = fat5__optim_lr(o);
    r.lr = lr;
    t = (double)(o->step + 1);
    if (c->kind == FAT5_OPTIM_ADAFACTOR) {
        if ((st = fat5__optim_adafactor(o, lr, gate, n_gate)) || (st = be->download(ctx, stats, o->stats, sizeof stats)) ||
            (st = be->sync(ctx)))
            return st;
        goto done;
    }
    bc = sqrt(1.0 - pow(c->beta2, t)) / (1.0 - pow(c->beta1, t));
    // AdamWScale: the factor from the weights before the update
    ss_w = c->kind == FAT5_OPTIM_ADAMW_SCALE ? o->ss + 8 * (fat5__addr)o->n_seg : 0;
    if ((st = fat5__optim_sumsq(o, o->ss, m->gd, o->segs)) ||
        (ss_w && (st = fat5__optim_sumsq(o, ss_w, m->wd, o->segs_w))) ||
        (st = be->optim_coef(ctx, o->coef, o->stats, o->ss, ss_w, o->segs, o->decayed, o->n_seg, lr * bc,
                             (float)(1.0 - lr * c->weight_decay), c->clip_norm, gate, n_gate)))
        return st;
    for (k = 0; k < o->n_runs; k++) {   // each run of trainable tensors, from its first one
        const fat5__optim_run *R = &o->runs[k];
        fat5__addr g = 4 * (fat5__addr)R->glo;
        if ((st = be->adamw_seg(ctx, m->wd + 4 * (fat5__addr)R->wlo, m->gd + g, o->m1 + g, o->m2 + g,
                                o->run_segs + 16 * (fat5__addr)R->seg0, o->run_coff + 8 * (fat5__addr)(R->seg0 + k),
                                R->n_seg, R->n_chunks, FAT5__OPTIM_CHUNK, o->coef + 8 * (fat5__addr)R->seg0, o->stats,
                                (float)c->beta1, (float)c->beta2, (float)c->eps,
                                m->wa == m->wd ? 0 : m->wa + 2 * (fat5__addr)R->wlo)))
            return st;
    }
    if ((st = be->download(ctx, stats, o->stats, sizeof stats)) || (st = be->sync(ctx))) return st;
done:
    r.grad_norm = stats[0];
    r.skipped = !isfinite(r.grad_norm);
    o->step++;
    if (out) *out = r;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_optim_step(fat5_optim *o, fat5_optim_result *out) {
    return fat5__optim_step_gated(o, 0, 0, out);
}

