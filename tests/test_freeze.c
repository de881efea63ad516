// Frozen parameters (fat5_model_freeze, the training option freeze): the patterns and their errors;
// frozen tensors bitwise unchanged by optimizer steps; the trainable ones updated bitwise as by a
// run that computed every gradient and discarded the frozen ones before the optimizer (so freezing
// changes nothing else: the gradient norm, clipping, moments and updates of the others); the
// backward skipping the encoder when it and the embedding are frozen; the trainer's checkpoints
// recording the frozen set, and resumes with another set refused. The same comparison runs on a
// GPU in fp32 and bf16 when there is one (skipped otherwise).
// Uses tm_tiny_config / tm_batch (test_model.c) and ttr_corpus / ttr_config / ttr_weights
// (test_train.c).

// the tensors of m a pattern set froze, by name, as a comma-separated list (for messages)
static void tfz_frozen_list(const fat5_model *m, char *buf, size_t cap) {
    size_t o = 0;
    int i;
    buf[0] = 0;
    for (i = 0; i < m->n_params && o < cap; i++)
        if (m->params[i].frozen) o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? "," : "", m->params[i].name);
}

static void t_freeze_patterns(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0), ct = tm_tiny_config(0, 1, 0);
    fat5_model *m = NULL, *tied = NULL;
    int i, n_enc = 0, n_ln = 0;
    int64_t enc_elems = 0;
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 3, &m));
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &ct, 3, &tied));
    for (i = 0; i < m->n_params; i++) {
        if (strncmp(m->params[i].name, "encoder.", 8) == 0) n_enc++, enc_elems += (int64_t)m->params[i].numel;
        n_ln += strstr(m->params[i].name, ".layer_norm.weight") != NULL;   // not the final_layer_norm
    }
    FAT5_REQUIRE(T, n_enc > 0 && n_ln > 0);
    // "encoder.*": exactly the encoder's tensors; '*' crosses dots; the gradient arena shrinks
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "encoder.*"));
    for (i = 0; i < m->n_params; i++)
        FAT5_CHECK_MSG(T, fat5_model_tensor_frozen(m, i) == (strncmp(m->params[i].name, "encoder.", 8) == 0), "%s",
                       m->params[i].name);
    FAT5_CHECK(T, m->n_frozen == n_enc && fat5_model_trainable_count(m) == fat5_model_param_count(m) - enc_elems);
    FAT5_CHECK(T, fat5_model_tensor_frozen(m, -1) == -1 && fat5_model_tensor_frozen(m, m->n_params) == -1);
    // several patterns, spaces and empty items; a star in the middle and at both ends
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, " shared.weight , *.layer_norm.weight,, "));
    FAT5_CHECK(T, m->n_frozen == 1 + n_ln && m->params[m->shared].frozen);
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "decoder.block.*.DenseReluDense.wi_*.weight"));
    FAT5_CHECK(T, m->n_frozen == 4 && m->params[m->dec[0].wi0].frozen && m->params[m->dec[1].wi1].frozen);
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "*"));   // everything: the model may, the optimizer refuses
    FAT5_CHECK(T, m->n_frozen == m->n_params && fat5_model_trainable_count(m) == 0);
    {
        fat5_optim *o = NULL;
        fat5_optim_config oc = fat5_optim_config_default();
        FAT5_CHECK(T, fat5_optim_create(m, &oc, &o) == FAT5_ERR_INVALID_ARG && o == NULL &&
                          strstr(fat5_last_error(ctx), "every parameter of the model is frozen"));
    }
    // NULL and "" unfreeze
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, NULL));
    FAT5_CHECK(T, m->n_frozen == 0 && m->n_gfloats == m->n_floats);
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "encoder.*"));
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, ""));
    FAT5_CHECK(T, m->n_frozen == 0);
    // a pattern that matches nothing: an error naming it, and the set stays as it was
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "shared.weight"));
    FAT5_CHECK(T, fat5_model_freeze(m, "encoder.*, encoder.block.7.*") == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "pattern 'encoder.block.7.*' matches no parameter"));
    FAT5_CHECK(T, m->n_frozen == 1 && m->params[m->shared].frozen);
    FAT5_CHECK(T, fat5_model_freeze(m, "Shared.weight") == FAT5_ERR_INVALID_ARG);   // names are case-sensitive
    FAT5_CHECK(T, fat5_model_freeze(m, "encoder") == FAT5_ERR_INVALID_ARG);         // whole names only
    // a tied model has no lm_head.weight of its own: the message says to freeze shared.weight
    FAT5_CHECK(T, fat5_model_freeze(tied, "lm_head.weight") == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "ties lm_head to shared.weight"));
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "lm_head.weight"));   // the untied one has
    FAT5_CHECK(T, m->n_frozen == 1 && m->params[m->lm_head].frozen);
    fat5_model_destroy(tied);
    fat5_model_destroy(m);
    {   // FIRE's block (one gradient op) is frozen whole or not at all
        fat5_model_config f = tm_tiny_config(1, 0, 0);
        f.pos_kind = FAT5_POS_FIRE;
        f.fire_mlp_width = 4;
        memcpy(f.model_type, "flash_t5", 9);
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &f, 3, &m));
        FAT5_CHECK(T, fat5_model_freeze(m, "encoder.*.pe_encoding.c") == FAT5_ERR_INVALID_ARG &&
                          strstr(fat5_last_error(ctx), "FIRE block"));
        FAT5_CHECK(T, m->n_frozen == 0);
        FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "encoder.*.pe_encoding.*"));
        FAT5_CHECK(T, m->n_frozen == 6);
        fat5_model_destroy(m);
    }
}

// m's gradient of parameter p (fp32, numel) by name; frozen ones read as zeros
static float *tfz_grad(fat5_model *m, int p) {
    float *g = (float *)malloc(m->params[p].numel * sizeof(float));
    if (g && fat5_model_get_grad(m, m->params[p].io_name, g, (int64_t)m->params[p].numel) != FAT5_OK) {
        free(g);
        return NULL;
    }
    return g;
}

// The comparison at the heart of the tests, on ctx's device: model A frozen with `patterns`, B the
// same weights unfrozen; `steps` optimizer steps on the same batch, B's frozen gradients set to zero
// after each backward (computed, then discarded). Asserts: A's gradients of its trainable tensors
// equal B's bitwise and its frozen ones read zero; A's gradient norm equals B's after the discard
// (and is below B's full norm, when the frozen gradients are not all zero); A's trainable weights
// equal B's after every step, bitwise; A's frozen weights never change, bitwise. A clipping norm
// below the gradient norm makes the clipping factor part of the comparison.
static void tfz_compare(fat5_test *T, fat5_ctx *ctx, const fat5_model_config *cfg, const char *patterns,
                        const fat5_optim_config *oc, int steps, const char *what) {
    fat5_model *a = NULL, *b = NULL;
    fat5_optim *oa = NULL, *ob = NULL;
    fat5_batch bt = tm_batch();
    float *w0 = NULL, *wa = NULL, *wb = NULL;
    size_t n;
    int s, p, bad = 0;
    char frozen[4096];
    if (fat5_model_create(ctx, cfg, 21, &a) != FAT5_OK || fat5_model_create(ctx, cfg, 21, &b) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: %s", what, fat5_last_error(ctx));
        goto done;
    }
    n = a->n_floats;
    w0 = (float *)malloc(n * 4), wa = (float *)malloc(n * 4), wb = (float *)malloc(n * 4);
    FAT5_REQUIRE(T, w0 && wa && wb);
    if (fat5_model_freeze(a, patterns) != FAT5_OK || fat5_optim_create(a, oc, &oa) != FAT5_OK ||
        fat5_optim_create(b, oc, &ob) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: %s", what, fat5_last_error(ctx));
        goto done;
    }
    tfz_frozen_list(a, frozen, sizeof frozen);
    FAT5_CHECK_MSG(T, a->n_frozen > 0 && a->n_frozen < a->n_params, "%s: froze %d of %d", what, a->n_frozen, a->n_params);
    FAT5_REQUIRE_OK(T, ttr_weights(a, w0));
    for (s = 0; s < steps && !bad; s++) {
        fat5_optim_result ra, rb;
        double full2 = 0;
        if (fat5_model_zero_grad(a) || fat5_model_zero_grad(b) || fat5_model_forward(a, &bt, NULL, NULL) ||
            fat5_model_forward(b, &bt, NULL, NULL) || fat5_model_backward(a, 1.0f) || fat5_model_backward(b, 1.0f)) {
            FAT5_CHECK_MSG(T, 0, "%s: step %d: %s", what, s, fat5_last_error(ctx));
            goto done;
        }
        for (p = 0; p < a->n_params; p++) {   // the gradients; B's frozen ones discarded
            const fat5__param *P = &a->params[p];
            float *ga = tfz_grad(a, p), *gb = tfz_grad(b, p);
            size_t i;
            FAT5_REQUIRE(T, ga && gb);
            for (i = 0; i < P->numel; i++) full2 += (double)gb[i] * gb[i];
            if (P->frozen) {
                for (i = 0; i < P->numel && ga[i] == 0.0f; i++) {}
                FAT5_CHECK_MSG(T, i == P->numel, "%s: frozen %s: its gradient reads %g, not 0", what, P->name,
                               (double)ga[i < P->numel ? i : 0]);
                FAT5_REQUIRE_OK(T, b->be->memset0(b->ctx, b->gd + 4 * (fat5__addr)b->params[p].goffset, P->numel * 4));
            } else if (memcmp(ga, gb, P->numel * 4) != 0) {
                FAT5_CHECK_MSG(T, 0, "%s: step %d: the gradient of %s differs from the unfrozen model's", what, s,
                               P->name);
                bad = 1;
            }
            free(ga);
            free(gb);
        }
        FAT5_REQUIRE_OK(T, fat5_optim_step(oa, &ra));
        FAT5_REQUIRE_OK(T, fat5_optim_step(ob, &rb));
        FAT5_CHECK_MSG(T, ra.grad_norm == rb.grad_norm && !ra.skipped && !rb.skipped,
                       "%s: step %d: gradient norm %.17g (frozen) vs %.17g (discarded)", what, s, ra.grad_norm,
                       rb.grad_norm);
        FAT5_CHECK_MSG(T, ra.grad_norm < sqrt(full2), "%s: step %d: norm %.9g is not below the full norm %.9g", what, s,
                       ra.grad_norm, sqrt(full2));
        FAT5_REQUIRE_OK(T, ttr_weights(a, wa));
        FAT5_REQUIRE_OK(T, ttr_weights(b, wb));
        for (p = 0; p < a->n_params; p++) {
            const fat5__param *P = &a->params[p];
            size_t o = P->offset;
            if (P->frozen && memcmp(wa + o, w0 + o, P->numel * 4) != 0) {
                FAT5_CHECK_MSG(T, 0, "%s: step %d: frozen %s changed", what, s, P->name);
                bad = 1;
            } else if (!P->frozen && memcmp(wa + o, wb + o, P->numel * 4) != 0) {
                FAT5_CHECK_MSG(T, 0, "%s: step %d: %s differs from the run with discarded gradients", what, s, P->name);
                bad = 1;
            } else if (!P->frozen && memcmp(wa + o, w0 + o, P->numel * 4) == 0) {
                FAT5_CHECK_MSG(T, 0, "%s: step %d: trainable %s did not change", what, s, P->name);
                bad = 1;
            }
        }
    }
    if (bad) printf("  %s: frozen: %s\n", what, frozen);
done:
    fat5_optim_destroy(oa);
    fat5_optim_destroy(ob);
    fat5_model_destroy(a);
    fat5_model_destroy(b);
    free(w0);
    free(wa);
    free(wb);
}

// the optimizers of the comparison: clipping active (the norms are ~1e-1 .. 1 here)
static fat5_optim_config tfz_optim(fat5_optim_kind kind) {
    fat5_optim_config c = fat5_optim_config_default();
    c.kind = kind;
    c.lr = 1e-2;
    c.clip_norm = 0.05;
    c.sched = FAT5_SCHED_CONSTANT;
    c.warmup_steps = 0;
    c.total_steps = 0;
    if (kind == FAT5_OPTIM_ADAFACTOR) {   // every state array: the first moment and the parameter scale
        c.adafactor_beta1 = 0.9;
        c.adafactor_scale_parameter = 1;
    }
    return c;
}

// Patterns of the comparison: a frozen encoder and embedding (the encoder's backward skipped), the
// norms (many runs of trainable tensors), the lower decoder layer with the output projection, and
// tensors that are batched with trainable ones in one product (q beside k and v; wi_1 beside wi_0).
static const char *const tfz_patterns[] = {"encoder.*,shared.weight", "*.layer_norm.weight",
                                           "decoder.block.0.*,lm_head.weight", "*.SelfAttention.q.weight,*.wi_1.weight",
                                           "shared.weight,*.relative_attention_bias.weight", "*.SelfAttention.v.weight"};

static void t_freeze_updates_bitwise(fat5_test *T) {
    static const fat5_optim_kind kinds[3] = {FAT5_OPTIM_ADAMW, FAT5_OPTIM_ADAMW_SCALE, FAT5_OPTIM_ADAFACTOR};
    fat5_model_config cfg[2];
    int k, p, c;
    cfg[0] = tm_tiny_config(1, 0, 0);   // gated, untied (v1.1)
    cfg[1] = tm_tiny_config(0, 1, 1);   // ReLU, tied, a bias table in every layer (UMT5-like)
    for (c = 0; c < 2; c++)
        for (k = 0; k < 3; k++)
            for (p = 0; p < (int)(sizeof tfz_patterns / sizeof tfz_patterns[0]); p++) {
                fat5_optim_config oc = tfz_optim(kinds[k]);
                char what[200];
                if (c == 1 && strstr(tfz_patterns[p], "lm_head")) continue;   // tied: no lm_head.weight
                if (c == 1 && strstr(tfz_patterns[p], "wi_1")) continue;      // not gated: no wi_1
                snprintf(what, sizeof what, "%s, %s, freeze %s", c ? "relu tied umt5" : "gated untied",
                         fat5__optim_kind_name(kinds[k]), tfz_patterns[p]);
                tfz_compare(T, fat5_test_ctx(T), &cfg[c], tfz_patterns[p], &oc, 3, what);
            }
}

// Weight decay does not reach frozen tensors either (nor do Adafactor's or AdamWScale's updates of
// a zero gradient); an optimizer made before the set changed refuses to step.
static void t_freeze_decay_and_stale_optimizer(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    fat5_optim *o = NULL;
    fat5_optim_config oc = tfz_optim(FAT5_OPTIM_ADAMW_SCALE);
    fat5_batch b = tm_batch();
    float *w0, *w1;
    int p, s;
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 5, &m));
    oc.weight_decay = 0.5;
    w0 = (float *)malloc(m->n_floats * 4), w1 = (float *)malloc(m->n_floats * 4);
    FAT5_REQUIRE(T, w0 && w1);
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "decoder.*"));
    FAT5_REQUIRE_OK(T, fat5_optim_create(m, &oc, &o));
    FAT5_REQUIRE_OK(T, ttr_weights(m, w0));
    for (s = 0; s < 2; s++) {
        FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
        FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
        FAT5_REQUIRE_OK(T, fat5_optim_step(o, NULL));
    }
    FAT5_REQUIRE_OK(T, ttr_weights(m, w1));
    for (p = 0; p < m->n_params; p++) {
        const fat5__param *P = &m->params[p];
        int same = memcmp(w0 + P->offset, w1 + P->offset, P->numel * 4) == 0;
        FAT5_CHECK_MSG(T, same == P->frozen, "%s: %s", P->name, same ? "unchanged" : "changed");
    }
    // the optimizer's state is laid out for the set it was made with
    FAT5_CHECK(T, o->n_g == m->n_gfloats && m->n_gfloats < m->n_floats);
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "encoder.*"));
    FAT5_CHECK(T, fat5_optim_step(o, NULL) == FAT5_ERR_STATE && strstr(fat5_last_error(ctx), "frozen parameters changed"));
    fat5_optim_destroy(o);
    free(w0);
    free(w1);
    fat5_model_destroy(m);
}

// The backward's extent: a frozen encoder and embedding run no encoder layer and leave the encoder
// side's gradient buffers as they were (a sentinel in them survives); freezing the decoder's lower
// layer too stops the decoder above it; with the embedding trainable everything runs again.
static void tfz_extent(fat5_test *T, fat5_ctx *ctx, const char *patterns, int enc_layers, int dec_layers) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    fat5_model *m = NULL;
    fat5_batch b = tm_batch();
    int64_t i, te = b.n_enc_tokens * c.d_model;
    float *s = (float *)malloc((size_t)te * 4);
    int bad = 0;
    FAT5_REQUIRE(T, s != NULL);
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 9, &m));
    FAT5_REQUIRE_OK(T, fat5_model_freeze(m, patterns));
    FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, NULL));
    for (i = 0; i < te; i++) s[i] = 12345.0f;
    FAT5_REQUIRE_OK(T, m->be->upload(ctx, m->ws.d_enc_out, s, (size_t)te * 4));
    FAT5_REQUIRE_OK(T, m->be->upload(ctx, m->ws.dh_enc, s, (size_t)te * 4));
    FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
    FAT5_CHECK_MSG(T, m->bwd_layers[0] == enc_layers && m->bwd_layers[1] == dec_layers && m->bwd_enc == (enc_layers > 0),
                   "freeze %s: the backward went through %lld encoder and %lld decoder layers (encoder %d), expected "
                   "%d and %d", patterns, (long long)m->bwd_layers[0], (long long)m->bwd_layers[1], m->bwd_enc,
                   enc_layers, dec_layers);
    if (enc_layers == 0) {   // nothing of the encoder side was written
        int k;
        for (k = 0; k < 2; k++) {
            FAT5_REQUIRE_OK(T, m->be->download(ctx, s, k ? m->ws.dh_enc : m->ws.d_enc_out, (size_t)te * 4));
            FAT5_REQUIRE_OK(T, m->be->sync(ctx));
            for (i = 0; i < te; i++) bad += s[i] != 12345.0f;
        }
        FAT5_CHECK_MSG(T, bad == 0, "freeze %s: the encoder's gradient buffers were written (%d values)", patterns, bad);
    }
    free(s);
    fat5_model_destroy(m);
}

static void t_freeze_encoder_backward_skipped(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    tfz_extent(T, ctx, "encoder.*,shared.weight", 0, 2);
    tfz_extent(T, ctx, "encoder.*,shared.weight,decoder.block.0.*", 0, 1);
    tfz_extent(T, ctx, "encoder.*", 2, 2);                    // the embedding trains: the encoder runs
    tfz_extent(T, ctx, "shared.weight,encoder.block.0.*", 1, 2);   // down to the lowest trainable layer
    tfz_extent(T, ctx, "shared.weight", 2, 2);
}

// The trainer: the freeze option freezes before the optimizer; frozen weights stay as the model
// began; the checkpoint records the set ("frozen" in training_state.safetensors) and holds moments
// of the trainable tensors only; a resume with the same set continues bitwise as a straight run; a
// resume with another set, or none, is refused naming a tensor; a bad pattern fails the creation.
static void t_freeze_train_resume(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 8);
    char a[600], b[600], p[700];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    double straight[6], resumed[6];
    float *w0 = NULL, *wa = NULL, *wb = NULL;
    int64_t n, i;
    int k;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(a, sizeof a, "%s/fz_straight", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/fz_resumed", fat5_test_tmpdir(T));
    c = ttr_config(T, data, a);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "freeze", "encoder.*, shared.weight"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "6"));
    c.save_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    n = fat5_model_param_count(fat5_train_model(t));
    w0 = (float *)malloc((size_t)n * 4), wa = (float *)malloc((size_t)n * 4), wb = (float *)malloc((size_t)n * 4);
    FAT5_REQUIRE(T, w0 && wa && wb);
    FAT5_REQUIRE_OK(T, ttr_weights(t->m, w0));
    FAT5_CHECK(T, t->m->n_frozen > 0 && t->o->n_seg == t->m->n_params - t->m->n_frozen);
    for (i = 0; i < 6; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        straight[i] = r.loss;
    }
    FAT5_REQUIRE_OK(T, ttr_weights(t->m, wa));
    for (k = 0; k < t->m->n_params; k++) {
        const fat5__param *P = &t->m->params[k];
        int same = memcmp(w0 + P->offset, wa + P->offset, P->numel * 4) == 0;
        FAT5_CHECK_MSG(T, same == P->frozen, "trainer, %s: %s", P->name, same ? "unchanged" : "changed");
    }
    fat5_train_destroy(t);
    t = NULL;
    {   // the final checkpoint: the frozen names in order, and moments of the trainable tensors only
        fat5_st_file *f = NULL;
        const char *v;
        fat5_model *m = NULL;
        char want[4096];
        snprintf(p, sizeof p, "%s/step-00000006/training_state.safetensors", a);
        FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p, &f));
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c.model, 1, &m));
        FAT5_REQUIRE_OK(T, fat5_model_freeze(m, "encoder.*,shared.weight"));
        tfz_frozen_list(m, want, sizeof want);
        v = fat5_st_metadata_find(f, "frozen");
        FAT5_CHECK_MSG(T, v && strcmp(v, want) == 0, "frozen: '%s', expected '%s'", v ? v : "(none)", want);
        k = fat5_st_find(f, "optimizer.exp_avg");
        FAT5_CHECK(T, k >= 0 && fat5_st_get(f, k)->shape[0] == (int64_t)m->n_gfloats && m->n_gfloats < m->n_floats);
        fat5_model_destroy(m);
        fat5_st_destroy(f);
    }
    // the same run stopped at step 3 and resumed
    c.output_dir = b;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 3; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        resumed[i] = r.loss;
    }
    FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    c.resume = b;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 3; i < 6; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        resumed[i] = r.loss;
    }
    FAT5_CHECK_MSG(T, memcmp(straight, resumed, sizeof straight) == 0, "resumed losses differ from the straight run");
    FAT5_REQUIRE_OK(T, ttr_weights(t->m, wb));
    FAT5_CHECK_MSG(T, memcmp(wa, wb, (size_t)n * 4) == 0, "resumed weights differ from the straight run");
    fat5_train_destroy(t);
    t = NULL;
    // another set, or none: refused, naming a tensor that differs
    snprintf(p, sizeof p, "%s/step-00000003", b);
    c.resume = p;
    {
        static const char *const other[3][2] = {{"encoder.*", "'shared.weight' is frozen in the checkpoint"},
                                                {"", "'shared.weight' is frozen in the checkpoint"},
                                                {"encoder.*,shared.weight,lm_head.weight",
                                                 "'lm_head.weight' would be frozen here"}};
        for (k = 0; k < 3; k++) {
            fat5_status st;
            FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "freeze", other[k][0]));
            st = fat5_train_create(ctx, &c, &t);
            FAT5_CHECK_MSG(T, st == FAT5_ERR_INVALID_ARG && t == NULL && strstr(fat5_last_error(ctx), other[k][1]) &&
                                  strstr(fat5_last_error(ctx), "other frozen parameters"),
                           "resume with freeze '%s': %s: %s", other[k][0], fat5_status_string(st), fat5_last_error(ctx));
            fat5_train_destroy(t);
            t = NULL;
        }
    }
    // a pattern that matches nothing fails the creation, naming it
    c.resume = "";
    snprintf(p, sizeof p, "%s/fz_bad", fat5_test_tmpdir(T));
    c.output_dir = p;
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "freeze", "encoder.*,decoder.blocks.*"));
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && t == NULL &&
                      strstr(fat5_last_error(ctx), "'decoder.blocks.*' matches no parameter"));
    FAT5_CHECK(T, strstr(fat5_train_option_names(), "freeze:") != NULL);
    free(w0);
    free(wa);
    free(wb);
}

#ifndef FAT5_NO_CUDA
// The comparison of t_freeze_updates_bitwise and the backward's extent on a GPU, fp32 and bf16.
// The patterns keep the batched products whole (a frozen tensor beside trainable ones in one
// q | k | v or wi_0 | wi_1 product turns it into single products for the others, which cuBLAS may
// round differently: same values, not the same bits).
static void t_gpu_freeze(fat5_test *T) {
    static const char *const pats[3] = {"encoder.*,shared.weight", "*.layer_norm.weight",
                                        "decoder.block.0.*,lm_head.weight"};
    static const fat5_optim_kind kinds[2] = {FAT5_OPTIM_ADAMW_SCALE, FAT5_OPTIM_ADAFACTOR};
    fat5_model_config cfg = tm_tiny_config(1, 0, 0);
    int d, k, p;
    for (d = 0; d < 2; d++) {
        fat5_ctx *g = tgm_ctx(T, d ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32);
        if (!g) return;
        for (k = 0; k < 2; k++)
            for (p = 0; p < 3; p++) {
                fat5_optim_config oc = tfz_optim(kinds[k]);
                char what[200];
                snprintf(what, sizeof what, "GPU %s, %s, freeze %s", d ? "bf16" : "fp32", fat5__optim_kind_name(kinds[k]),
                         pats[p]);
                tfz_compare(T, g, &cfg, pats[p], &oc, 3, what);
            }
        tfz_extent(T, g, "encoder.*,shared.weight", 0, 2);
        tfz_extent(T, g, "shared.weight,encoder.block.0.*", 1, 2);
        fat5_ctx_destroy(g);
    }
}
#define FAT5_TESTS_FREEZE_GPU(X) X(gpu_freeze)
#else
#define FAT5_TESTS_FREEZE_GPU(X)
#endif

#define FAT5_TESTS_FREEZE(X) X(freeze_patterns) X(freeze_updates_bitwise) X(freeze_decay_and_stale_optimizer) \
    X(freeze_encoder_backward_skipped) X(freeze_train_resume) FAT5_TESTS_FREEZE_GPU(X)
