// =============================================================================================
// ==[4.4] model: the task heads (classification, token classification, question answering, encoder) ==
// What a model whose head is not LM computes after its stacks (fat5_model_config.head), forward and
// backward, over the ops of its backend: the products on the backend, the losses on the host in
// double (their logits are small: a few per sequence or per token), as Hugging Face computes them.
//
//   SEQ_CLS      decoder output [Td, D] --pool: each input's last EOS--> [B, D] --classification_head
//   ENC_SEQ_CLS  encoder output [Te, D] --pool: last EOS, mean or first--> [B, D] --classification_head
//                classification_head: dropout, dense [D, D] + bias, tanh, dropout, out_proj [L, D] + bias
//   TOKEN_CLS    encoder output [Te, D] --dropout--> classifier [L, D] + bias: [Te, L]
//   QA           decoder output [Td, D] --> qa_outputs [2, D] + bias: [Td, 2] (start, end logits)
//   ENCODER      encoder output [Te, D]: the caller's loss sum(hidden * G), G from the batch
// SEQ_CLS and QA run the decoder on shift_right(input) (Td = Te). Pooling is a product with a
// [B, T] matrix of weights (one 1 per row for EOS and first, 1/n for mean); a bias is added by a
// rank-one product with a column of ones, and its gradient is a product with the same column.
// The head's dropouts (classifier_dropout) draw from two streams no other site uses: those of
// cross-attention's sites on the encoder's layer 0, which has no cross-attention.

#define FAT5__DS_HEAD_IN FAT5__DS_CA_PROBS   // the head's first dropout (pooled or token states)
#define FAT5__DS_HEAD_MID FAT5__DS_CA_OUT    // the classification head's second (after tanh)

static fat5__drop fat5__head_drop(const fat5_model *m, int site) {
    if (!(m->fd.head_rate > 0) || (m->drop_skip >> site & 1u)) return fat5__drop_none();
    return fat5__drop_make(m->fd.seed, m->fd.draw << 26 | (uint64_t)fat5__drop_layer(0, 0) << 15 | (uint64_t)site << 12,
                           m->fd.head_rate);
}

static int fat5__head_is_cls(const fat5_model_config *c) {
    return c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_ENC_SEQ_CLS;
}

// the loss of a sequence classifier (problem_type AUTO resolved as Hugging Face does)
static fat5_problem fat5__head_problem(const fat5_model_config *c) {
    if (c->problem_type != FAT5_PROBLEM_AUTO) return c->problem_type;
    return c->num_labels == 1 ? FAT5_PROBLEM_REGRESSION : FAT5_PROBLEM_SINGLE_LABEL;
}

// logits per row: num_labels, 2 for QA, d_model for ENCODER (its "logits" are the hidden states)
static int64_t fat5__head_cols(const fat5_model_config *c) {
    return c->head == FAT5_HEAD_QA ? 2 : c->head == FAT5_HEAD_ENCODER ? c->d_model : c->num_labels;
}

static const char *fat5__head_what(const fat5_model_config *c) {
    switch (c->head) {
    case FAT5_HEAD_ENCODER: return "an encoder model";
    case FAT5_HEAD_SEQ_CLS: return "a sequence classifier";
    case FAT5_HEAD_TOKEN_CLS: return "a token classifier";
    case FAT5_HEAD_QA: return "a question-answering model";
    case FAT5_HEAD_ENC_SEQ_CLS: return "an encoder-only sequence classifier";
    default: return "a language model";
    }
}

// a host array of at least n elements of `size` bytes (kept, grown on demand)
static int fat5__head_grow(fat5_ctx *ctx, void **p, int64_t *cap, int64_t n, size_t size) {
    void *q;
    if (n <= *cap) return 1;
    if (!(q = fat5__malloc(ctx, (size_t)n * size))) return 0;
    fat5__free(ctx, *p);
    *p = q;
    *cap = n;
    return 1;
}

// Checks a head's batch: no decoder fields, the kind of targets the head takes (then, after the
// tokens' checks, fat5__head_stage: the EOS its pooling needs, the targets in range, staged on the
// host). Messages name the sequence.
static fat5_status fat5__head_stage_check(fat5_model *m, const fat5_batch *b) {
    fat5_ctx *ctx = m->ctx;
    const fat5_model_config *c = &m->cfg;
    const char *what = fat5__head_what(c);
    int64_t L = fat5__head_cols(c);
    fat5_problem pr = fat5__head_problem(c);
    if (b->n_dec_tokens || b->dec_tokens || b->labels || b->dec_cu_seqlens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: %s (%s) takes no decoder tokens or labels: its targets are "
                         "head_labels / head_targets (n_dec_tokens 0, dec_tokens, labels and dec_cu_seqlens NULL)",
                         what, fat5_model_architecture(m));
    if (c->head == FAT5_HEAD_ENCODER && b->head_labels)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: an encoder model takes head_targets (the gradient of the "
                         "hidden states), not head_labels");
    if (c->head != FAT5_HEAD_ENCODER && b->head_targets && !(fat5__head_is_cls(c) && pr != FAT5_PROBLEM_SINGLE_LABEL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: %s takes head_labels (classes or positions), not "
                         "head_targets", what);
    if (fat5__head_is_cls(c) && pr != FAT5_PROBLEM_SINGLE_LABEL && b->head_labels)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: a %s classifier takes head_targets (%lld floats per "
                         "sequence), not head_labels", pr == FAT5_PROBLEM_REGRESSION ? "regression" : "multi-label",
                         (long long)L);
    return FAT5_OK;
}

static fat5_status fat5__head_stage(fat5_model *m, const fat5_batch *b) {
    fat5_ctx *ctx = m->ctx;
    const fat5_model_config *c = &m->cfg;
    const char *what = fat5__head_what(c);
    int64_t B = b->n_seq, te = b->n_enc_tokens, L = fat5__head_cols(c), s, t, eos0 = -1;
    for (s = 0; s < B; s++) {   // the EOS of each input: SEQ_CLS needs as many in every input, EOS pooling one
        int64_t n_eos = 0;
        int need = c->head == FAT5_HEAD_SEQ_CLS || (c->head == FAT5_HEAD_ENC_SEQ_CLS && c->pooling == FAT5_POOL_EOS);
        if (!need) break;
        for (t = b->enc_cu_seqlens[s]; t < b->enc_cu_seqlens[s + 1]; t++) n_eos += b->enc_tokens[t] == c->eos_token_id;
        if (!n_eos)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld has no EOS token (id %lld): %s takes the "
                             "state at each input's last EOS", (long long)s, (long long)c->eos_token_id, what);
        if (c->head == FAT5_HEAD_SEQ_CLS && s && n_eos != eos0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld holds %lld EOS tokens, sequence 0 holds "
                             "%lld: %s needs the same number in every input (as Hugging Face's)", (long long)s,
                             (long long)n_eos, (long long)eos0, fat5_model_architecture(m));
        eos0 = n_eos;
    }
    if (b->head_labels) {
        int64_t n = c->head == FAT5_HEAD_TOKEN_CLS ? te : c->head == FAT5_HEAD_QA ? 2 * B : B;
        if (!fat5__head_grow(ctx, (void **)&m->hd_lab, &m->hd_cap_lab, n, sizeof(int32_t)))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "batch: out of memory");
        for (t = 0; t < n; t++) {
            int32_t y = b->head_labels[t];
            if (c->head != FAT5_HEAD_QA && y != -100 && (y < 0 || y >= L)) {
                int64_t sq = 0;
                if (c->head == FAT5_HEAD_TOKEN_CLS)
                    while (b->enc_cu_seqlens[sq + 1] <= t) sq++;
                if (c->head == FAT5_HEAD_TOKEN_CLS)
                    return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld, position %lld: label %d is "
                                     "outside [0, num_labels %lld) and not -100", (long long)sq,
                                     (long long)(t - b->enc_cu_seqlens[sq]), (int)y, (long long)L);
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld: label %d is outside [0, num_labels "
                                 "%lld) and not -100", (long long)t, (int)y, (long long)L);
            }
            m->hd_lab[t] = y;
        }
    }
    if (b->head_targets) {
        int64_t n = c->head == FAT5_HEAD_ENCODER ? te * L : B * L;
        if (!fat5__head_grow(ctx, (void **)&m->hd_tgt, &m->hd_cap_tgt, n, sizeof(float)))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "batch: out of memory");
        for (t = 0; t < n; t++) {
            if (!isfinite(b->head_targets[t]))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: head_targets[%lld] (%s %lld) is not finite",
                                 (long long)t, c->head == FAT5_HEAD_ENCODER ? "token" : "sequence", (long long)(t / L));
            m->hd_tgt[t] = b->head_targets[t];
        }
    }
    return FAT5_OK;
}

// n floats of an activation-dtype buffer of the backend into dst (fp32; bf16 widened), waited for
// (the heads' outputs, fat5_model_encode's hidden states)
static fat5_status fat5__model_download_act(fat5_model *m, float *dst, fat5__addr src, int64_t n) {
    fat5_status st;
    int64_t i;
    if (m->act_size == 4) {
        if ((st = m->be->download(m->ctx, dst, src, (size_t)n * 4))) return st;
        return m->be->sync(m->ctx);
    }
    // bf16: into the upper half of dst, then widened from the front (each read before its write)
    if ((st = m->be->download(m->ctx, (uint16_t *)(void *)dst + n, src, (size_t)n * 2)) || (st = m->be->sync(m->ctx)))
        return st;
    for (i = 0; i < n; i++) dst[i] = fat5__bf16_to_f32(((const uint16_t *)(const void *)dst)[n + i]);
    return FAT5_OK;
}

// Whether the head's loss takes the loss options: label smoothing and z-loss apply to the
// cross-entropy over classes (single-label sequence classifiers, token classifiers), as Hugging
// Face's Trainer smooths a model's `labels` against its `logits`; the other losses take neither
// (QA's start and end positions are no `labels` to the Trainer's smoother, regression and
// multi-label targets are not classes, the encoder's loss is the caller's). An error names them.
static fat5_status fat5__head_check_loss(fat5_ctx *ctx, const fat5_model_config *c, const fat5_loss_config *l) {
    fat5_status st;
    if ((st = fat5__check_loss(ctx, l))) return st;
    if (!(l->label_smoothing > 0 || l->z_loss > 0)) return FAT5_OK;
    if (c->head == FAT5_HEAD_TOKEN_CLS || (fat5__head_is_cls(c) && fat5__head_problem(c) == FAT5_PROBLEM_SINGLE_LABEL))
        return FAT5_OK;
    return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "loss: %s%s%s apply to a cross-entropy over classes (a single-label "
                     "sequence classifier, a token classifier); %s (%s%s) takes neither: set them to 0",
                     l->label_smoothing > 0 ? "label_smoothing" : "", l->label_smoothing > 0 && l->z_loss > 0 ? " and " : "",
                     l->z_loss > 0 ? "z_loss" : "", fat5__head_what(c), fat5__cfg_arch_name(c),
                     c->head == FAT5_HEAD_QA ? ": its start and end positions are not smoothed, as in Hugging Face's "
                     "Trainer" : fat5__head_is_cls(c) ? fat5__head_problem(c) == FAT5_PROBLEM_REGRESSION ? ", regression"
                     : ", multi-label" : "");
}

// fat5_model_forward for a head other than LM: checks and stages the batch (the decoder's input
// shift_right(input) for SEQ_CLS and QA), sizes the workspace and the host buffers, runs the
// forward with the loss options (fat5__head_check_loss).
static fat5_status fat5__head_forward_batch(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                            fat5_forward_result *out, fat5__addr loss_dst) {
    fat5_ctx *ctx = m->ctx;
    const fat5_model_config *c = &m->cfg;
    fat5_batch sb;
    int64_t te, td, s, t, need;
    fat5_status st;
    if (!b) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: NULL");
    if ((st = fat5__head_check_loss(ctx, c, loss))) return st;
    if ((st = fat5__head_stage_check(m, b))) return st;
    // the encoder's checks are the LM's with a decoder input of the same lengths
    sb = *b;
    sb.n_dec_tokens = b->n_enc_tokens;
    sb.dec_tokens = b->enc_tokens;
    sb.dec_cu_seqlens = b->enc_cu_seqlens;
    sb.labels = NULL;
    if ((st = fat5__check_batch(m, &sb))) return st;
    if ((st = fat5__head_stage(m, b))) return st;
    te = b->n_enc_tokens;
    td = m->n_dec ? te : 0;
    if ((st = fat5_model_reserve(m, b->n_seq, te, td ? td : 1))) return st;
    need = fat5__head_is_cls(c) ? b->n_seq * (c->head == FAT5_HEAD_SEQ_CLS ? td : te) : 0;
    if (!fat5__head_grow(ctx, (void **)&m->hd_host, &m->hd_cap_host, need, sizeof(float)))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "forward: out of memory for the pooling weights");
    m->n_seq = b->n_seq;
    m->te = te;
    m->td = td;
    m->loss = *loss;
    memcpy(m->enc_cu, b->enc_cu_seqlens, (size_t)(b->n_seq + 1) * sizeof(int32_t));
    memcpy(m->enc_tok, b->enc_tokens, (size_t)te * sizeof(int32_t));
    if (td) {   // shift_right(input), sequence by sequence
        memcpy(m->dec_cu, b->enc_cu_seqlens, (size_t)(b->n_seq + 1) * sizeof(int32_t));
        for (s = 0; s < b->n_seq; s++)
            for (t = m->dec_cu[s]; t < m->dec_cu[s + 1]; t++) {
                m->dec_tok[t] = t == m->dec_cu[s] ? (int32_t)c->decoder_start_token_id : b->enc_tokens[t - 1];
                m->labels[t] = -100;
            }
    }
    m->hd_has_targets = b->head_labels || b->head_targets;
    fat5__model_drop_begin(m);
    if ((st = fat5__model_forward(m, out, loss_dst))) return st;
    m->have_fwd = 1;
    m->fwd_labels = m->hd_has_targets;
    m->fwd_no_grad = m->no_grad;
    return FAT5_OK;
}

// The pooling weights [B, T] of the sequence classifiers, on the host (m->hd_host) then the backend
// (fp32, then the activation dtype: the product's operand).
static fat5_status fat5__head_pool_weights(fat5_model *m, const int32_t *tok, int64_t T) {
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t B = m->n_seq, s, t;
    fat5_pool pool = c->head == FAT5_HEAD_SEQ_CLS ? FAT5_POOL_EOS : c->pooling;
    float *P = m->hd_host;
    fat5_status st;
    memset(P, 0, (size_t)(B * T) * sizeof(float));
    for (s = 0; s < B; s++) {
        int64_t a = m->enc_cu[s], z = m->enc_cu[s + 1];
        if (pool == FAT5_POOL_FIRST) {
            P[s * T + a] = 1.0f;
        } else if (pool == FAT5_POOL_MEAN) {
            for (t = a; t < z; t++) P[s * T + t] = (float)(1.0 / (double)(z - a));
        } else {   // the last EOS (the batch check found one)
            for (t = z - 1; t > a && tok[t] != c->eos_token_id; t--) {}
            P[s * T + t] = 1.0f;
        }
    }
    if ((st = m->be->upload(m->ctx, w->hd_pool_f, P, (size_t)(B * T) * 4))) return st;
    return m->be->to_act(m->ctx, w->hd_pool, w->hd_pool_f, B * T);
}

// The loss of the logits x [R, L] (host, fp32) against the staged targets, in double, as Hugging
// Face computes it; *count: the targets counted (rows, tokens or answers); *ce: the loss less the
// z-loss term; with dx (training) also d loss / d x [R, L]. A loss with nothing counted is 0
// (Hugging Face's is NaN). The cross-entropy over classes takes m->loss: label smoothing s as
// torch's and Hugging Face's LabelSmoother ((1 - s) CE + s mean over the classes of -log p), and
// z-loss z lse^2, each the mean over the counted rows.
static double fat5__head_loss(fat5_model *m, const float *x, float *dx, int64_t R, int64_t L, int64_t *count,
                              double *ce) {
    const fat5_model_config *c = &m->cfg;
    fat5_problem pr = fat5__head_problem(c);
    double loss = 0;
    int64_t r, j, n = 0;
    if (dx) memset(dx, 0, (size_t)(R * L) * sizeof(float));
    if (c->head == FAT5_HEAD_QA) {   // (mean CE of the starts + mean CE of the ends) / 2, over each sequence's tokens
        int col;
        int64_t s, nc[2] = {0, 0};
        double part[2] = {0, 0};
        for (col = 0; col < 2; col++) {
            for (s = 0; s < m->n_seq; s++) {
                int64_t a = m->enc_cu[s], len = m->enc_cu[s + 1] - a, p = m->hd_lab[2 * s + col];
                if (p < 0) p = 0;
                if (p >= len) continue;   // clamped to the length: not counted
                nc[col]++;
            }
            for (s = 0; s < m->n_seq && nc[col]; s++) {
                int64_t a = m->enc_cu[s], len = m->enc_cu[s + 1] - a, p = m->hd_lab[2 * s + col], t;
                double mx = -INFINITY, sum = 0, lse;
                if (p < 0) p = 0;
                if (p >= len) continue;
                for (t = 0; t < len; t++) mx = fmax(mx, (double)x[(a + t) * 2 + col]);
                for (t = 0; t < len; t++) sum += exp((double)x[(a + t) * 2 + col] - mx);
                lse = mx + log(sum);
                part[col] += lse - (double)x[(a + p) * 2 + col];
                if (dx)
                    for (t = 0; t < len; t++)
                        dx[(a + t) * 2 + col] = (float)((exp((double)x[(a + t) * 2 + col] - lse) - (t == p)) /
                                                        (2.0 * (double)nc[col]));
            }
            if (nc[col]) loss += part[col] / (double)nc[col] / 2.0;
        }
        *count = nc[0];
        *ce = loss;
        return loss;
    }
    if (c->head == FAT5_HEAD_TOKEN_CLS || (fat5__head_is_cls(c) && pr == FAT5_PROBLEM_SINGLE_LABEL)) {
        double eps = m->loss.label_smoothing, z = m->loss.z_loss, zsum = 0;
        for (r = 0; r < R; r++) n += m->hd_lab[r] != -100;
        for (r = 0; r < R && n; r++) {
            int32_t y = m->hd_lab[r];
            double mx = -INFINITY, sum = 0, mean = 0, lse;
            if (y == -100) continue;
            for (j = 0; j < L; j++) mx = fmax(mx, (double)x[r * L + j]);
            for (j = 0; j < L; j++) sum += exp((double)x[r * L + j] - mx), mean += (double)x[r * L + j];
            lse = mx + log(sum);
            mean /= (double)L;
            loss += (1 - eps) * (lse - (double)x[r * L + y]) + eps * (lse - mean);
            zsum += z * lse * lse;
            if (dx)
                for (j = 0; j < L; j++) {
                    double p = exp((double)x[r * L + j] - lse);
                    dx[r * L + j] = (float)((p * (1 + 2 * z * lse) - (1 - eps) * (j == y) - eps / (double)L) / (double)n);
                }
        }
        *count = n;
        *ce = n ? loss / (double)n : 0.0;
        return n ? (loss + zsum) / (double)n : 0.0;
    }
    // regression (MSE) and multi-label (BCE with logits): the mean over every element
    for (r = 0; r < R * L; r++) {
        double v = x[r], y = m->hd_tgt[r], d;
        if (pr == FAT5_PROBLEM_REGRESSION) {
            loss += (v - y) * (v - y);
            d = 2.0 * (v - y);
        } else {
            loss += fmax(v, 0.0) - v * y + log1p(exp(-fabs(v)));
            d = (v >= 0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v))) - y;
        }
        if (dx) dx[r] = (float)(d / (double)(R * L));
    }
    *count = R;
    *ce = R ? loss / (double)(R * L) : 0.0;
    return *ce;
}

// y [R, N] (act, or fp32 with y_f32) = x [R, K] W^T + bias: the product, then the bias's rank-one term
static fat5_status fat5__head_linear(fat5_model *m, fat5__addr y, int y_f32, fat5__addr x, int wi, int bi, int64_t R,
                                     int64_t N, int64_t K) {
    fat5_status st;
    if ((st = m->be->mm(m->ctx, FAT5__MM_NT, y, y_f32, x, fat5__pa(m, wi), R, N, K, 1.0f, 0.0f))) return st;
    return m->be->mm(m->ctx, FAT5__MM_NN, y, y_f32, m->ws.hd_ones, fat5__pa(m, bi), R, N, 1, 1.0f, 1.0f);
}

// The head's forward after the stacks; the loss (double [2]: loss, loss) to loss_dst or the
// workspace's slot, read back for `out`.
static fat5_status fat5__head_forward(fat5_model *m, fat5_forward_result *out, fat5__addr loss_dst) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, L = fat5__head_cols(c), B = m->n_seq, te = m->te, td = m->td, R, count = 0;
    int train = m->training && !m->no_grad, has_t = m->hd_has_targets;
    double ls[2];
    fat5_status st;
    m->hd_rows = R = c->head == FAT5_HEAD_TOKEN_CLS || c->head == FAT5_HEAD_ENCODER ? te : c->head == FAT5_HEAD_QA ? td : B;
    if (w->hd_ones) {
        FAT5__TRY(be->fill_f32(ctx, w->hd_ones_f, 1.0f, R));
        FAT5__TRY(be->to_act(ctx, w->hd_ones, w->hd_ones_f, R));
    }
    if (fat5__head_is_cls(c)) {
        int64_t T = c->head == FAT5_HEAD_SEQ_CLS ? td : te;
        fat5__addr X = c->head == FAT5_HEAD_SEQ_CLS ? w->dec_out : w->enc_out;
        FAT5__TRY(fat5__head_pool_weights(m, m->enc_tok, T));
        // x [B, D] = P [B, T] X [T, D], dropped out; z = dense(x); h = drop(tanh(z)); logits = out_proj(h)
        FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->hd_x, 0, w->hd_pool, X, B, D, T, 1.0f, 0.0f));
        FAT5__TRY(fat5__model_drop_inplace(m, w->hd_x, B * D, 1, fat5__head_drop(m, FAT5__DS_HEAD_IN)));
        FAT5__TRY(fat5__head_linear(m, w->hd_z, 0, w->hd_x, m->hd_w, m->hd_b, B, D, D));
        FAT5__TRY(be->act_fwd(ctx, w->hd_h, w->hd_z, 0, B * D, FAT5__ACT_TANH, fat5__head_drop(m, FAT5__DS_HEAD_MID)));
        FAT5__TRY(fat5__head_linear(m, w->hd_logits, 1, w->hd_h, m->ho_w, m->ho_b, B, L, D));
    } else if (c->head == FAT5_HEAD_TOKEN_CLS) {   // logits [Te, L] = classifier(drop(encoder output))
        fat5__drop d = fat5__head_drop(m, FAT5__DS_HEAD_IN);
        FAT5__TRY(d.thresh ? be->dropout(ctx, w->hd_x, w->enc_out, te * D, FAT5__DROP_ACT, d)
                           : be->copy(ctx, w->hd_x, w->enc_out, (size_t)(te * D) * m->act_size));
        FAT5__TRY(fat5__head_linear(m, w->hd_logits, 1, w->hd_x, m->ho_w, m->ho_b, te, L, D));
    } else if (c->head == FAT5_HEAD_QA) {          // logits [Td, 2] = qa_outputs(decoder output)
        FAT5__TRY(fat5__head_linear(m, w->hd_logits, 1, w->dec_out, m->ho_w, m->ho_b, td, 2, D));
    }
    m->n_count = 0;
    ls[0] = ls[1] = 0;
    if (has_t) {   // the loss on the host
        size_t n = (size_t)(R * L);
        if (!fat5__head_grow(ctx, (void **)&m->hd_host, &m->hd_cap_host, (int64_t)n * 2, sizeof(float)))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "forward: out of memory for the head's logits");
        if (c->head == FAT5_HEAD_ENCODER) {   // sum(hidden * G); its gradient G goes to the backend as it is
            int64_t i;
            double acc = 0;
            FAT5__TRY(fat5__model_download_act(m, m->hd_host, w->enc_out, (int64_t)n));
            for (i = 0; i < (int64_t)n; i++) acc += (double)m->hd_host[i] * (double)m->hd_tgt[i];
            ls[0] = acc;
            m->n_count = te;
            if (train) FAT5__TRY(be->upload(ctx, w->hd_g, m->hd_tgt, n * 4));
        } else {
            float *x = m->hd_host, *dx = m->hd_host + n;
            FAT5__TRY(be->download(ctx, x, w->hd_logits, n * 4));
            FAT5__TRY(be->sync(ctx));
            ls[1] = fat5__head_loss(m, x, train ? dx : NULL, R, L, &count, &ls[0]);
            m->n_count = count;
            if (train) {
                FAT5__TRY(be->upload(ctx, w->hd_dlog_f, dx, n * 4));
                FAT5__TRY(be->to_act(ctx, w->hd_dlog, w->hd_dlog_f, R * L));
            }
        }
        if (c->head == FAT5_HEAD_ENCODER) ls[1] = ls[0];
    }
    FAT5__TRY(be->upload(ctx, loss_dst ? loss_dst : w->loss2, ls, sizeof ls));
    if (out) {
        FAT5__TRY(be->sync(ctx));
        out->n_tokens = m->n_count;
        out->n_dec_tokens = td;
        out->ce = ls[0];
        out->loss = ls[1];
    }
    return FAT5_OK;
}

// The head's backward: its parameters' gradients, and d loss / d (the stack's output after its
// final dropout) into dn [Td, D] (SEQ_CLS, QA) or d_enc_out [Te, D] (the encoder-only heads) when
// `below` (a parameter under the head trains). grad_scale multiplies everything (the logits'
// gradient is already the loss's mean).
static fat5_status fat5__head_backward(fat5_model *m, float gs, int below) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, L = fat5__head_cols(c), B = m->n_seq, te = m->te, td = m->td, R = m->hd_rows;
    fat5__addr dst = m->n_dec ? w->dn : w->d_enc_out;
    fat5_status st;
    if (c->head == FAT5_HEAD_ENCODER) {   // d hidden = grad_scale G
        if (!below) return FAT5_OK;
        FAT5__TRY(be->copy(ctx, dst, w->hd_g, (size_t)(te * D) * 4));
        return gs == 1.0f ? FAT5_OK : be->scale_f32(ctx, dst, gs, te * D);
    }
    {   // the output layer: W [L, D] += dlog^T hin, b [L] += dlog^T 1, d hin = dlog W
        fat5__addr hin = fat5__head_is_cls(c) ? w->hd_h : c->head == FAT5_HEAD_TOKEN_CLS ? w->hd_x : w->dec_out;
        if (fat5__trains(m, m->ho_w))
            FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, m->ho_w), 1, w->hd_dlog, hin, L, D, R, gs, 1.0f));
        if (fat5__trains(m, m->ho_b))
            FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, m->ho_b), 1, w->hd_dlog, w->hd_ones, L, 1, R, gs, 1.0f));
        if (!fat5__head_is_cls(c)) {
            if (!below) return FAT5_OK;
            FAT5__TRY(be->mm(ctx, FAT5__MM_NN, dst, 1, w->hd_dlog, fat5__pa(m, m->ho_w), R, D, L, gs, 0.0f));
            // TOKEN_CLS: back through the classifier's dropout
            return c->head == FAT5_HEAD_TOKEN_CLS
                       ? fat5__model_drop_inplace(m, dst, te * D, 0, fat5__head_drop(m, FAT5__DS_HEAD_IN)) : FAT5_OK;
        }
        FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->hd_dh, 0, w->hd_dlog, fat5__pa(m, m->ho_w), B, D, L, gs, 0.0f));
    }
    // tanh (and the dropout after it), dense, the dropout before it, the pooling
    FAT5__TRY(be->act_bwd(ctx, w->hd_dz, 0, w->hd_dh, w->hd_z, 0, B * D, FAT5__ACT_TANH,
                          fat5__head_drop(m, FAT5__DS_HEAD_MID)));
    if (fat5__trains(m, m->hd_w))
        FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, m->hd_w), 1, w->hd_dz, w->hd_x, D, D, B, 1.0f, 1.0f));
    if (fat5__trains(m, m->hd_b))
        FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, m->hd_b), 1, w->hd_dz, w->hd_ones, D, 1, B, 1.0f, 1.0f));
    if (!below) return FAT5_OK;
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->hd_dx, 1, w->hd_dz, fat5__pa(m, m->hd_w), B, D, D, 1.0f, 0.0f));
    FAT5__TRY(be->dropout(ctx, w->hd_dx_act, w->hd_dx, B * D, FAT5__DROP_TO_ACT, fat5__head_drop(m, FAT5__DS_HEAD_IN)));
    // d X [T, D] = P^T [T, B] dx [B, D]
    return be->mm(ctx, FAT5__MM_TN, dst, 1, w->hd_pool, w->hd_dx_act, c->head == FAT5_HEAD_SEQ_CLS ? td : te, D, B,
                  1.0f, 0.0f);
}

// The targets a batch's loss counts (they weight its micro-batch in a step): the labels that are
// not -100 (LM, single-label and token classifiers), the answers inside their sequence (QA), the
// sequences (regression, multi-label), the tokens (ENCODER)
static int64_t fat5__batch_targets(const fat5_model *m, const fat5_batch *b) {
    const fat5_model_config *c = &m->cfg;
    int64_t n = 0, i, s;
    if (c->head == FAT5_HEAD_LM) {
        for (i = 0; b->labels && i < b->n_dec_tokens; i++) n += b->labels[i] != -100;
        return n;
    }
    if (c->head == FAT5_HEAD_ENCODER) return b->head_targets ? b->n_enc_tokens : 0;
    if (!b->head_labels) return b->head_targets ? b->n_seq : 0;
    if (c->head == FAT5_HEAD_QA) {
        for (s = 0; s < b->n_seq; s++)
            n += b->head_labels[2 * s] < b->enc_cu_seqlens[s + 1] - b->enc_cu_seqlens[s];
        return n;
    }
    for (i = 0; i < (c->head == FAT5_HEAD_TOKEN_CLS ? b->n_enc_tokens : b->n_seq); i++) n += b->head_labels[i] != -100;
    return n;
}

// elements of a head batch's head_labels and head_targets (4 bytes each; 0 for NULL ones)
static void fat5__batch_head_len(const fat5_model_config *c, const fat5_batch *b, int64_t *n_labels, int64_t *n_targets) {
    *n_labels = !b->head_labels ? 0 : c->head == FAT5_HEAD_TOKEN_CLS ? b->n_enc_tokens
                : c->head == FAT5_HEAD_QA ? 2 * b->n_seq : b->n_seq;
    *n_targets = !b->head_targets ? 0 : c->head == FAT5_HEAD_ENCODER ? b->n_enc_tokens * c->d_model
                 : b->n_seq * c->num_labels;
}

FAT5_API fat5_status fat5_model_get_head_output(fat5_model *m, float *dst, int64_t n, int64_t *rows, int64_t *cols) {
    const fat5_model_config *c;
    int64_t R, L;
    if (!m) return FAT5_ERR_INVALID_ARG;
    c = &m->cfg;
    if (c->head == FAT5_HEAD_LM)
        return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_head_output: the model is a language model "
                         "(T5ForConditionalGeneration): read its logits with fat5_model_get_logits");
    if (!m->have_fwd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_head_output: no forward has run");
    R = m->hd_rows;
    L = fat5__head_cols(c);
    if (rows) *rows = R;
    if (cols) *cols = L;
    if (!dst && !n) return FAT5_OK;   // the shape alone
    if (!dst || n != R * L)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_get_head_output: buffer holds %lld floats, the "
                         "output is %lld x %lld", dst ? (long long)n : 0LL, (long long)R, (long long)L);
    if (c->head == FAT5_HEAD_ENCODER) return fat5__model_download_act(m, dst, m->ws.enc_out, n);
    return m->be->download(m->ctx, dst, m->ws.hd_logits, (size_t)n * 4);
}

// ---- the heads' names and options ----

FAT5_API fat5_head_config fat5_head_config_default(fat5_head head, int64_t num_labels) {
    fat5_head_config h;
    memset(&h, 0, sizeof h);
    h.head = head;
    h.num_labels = head == FAT5_HEAD_QA ? 2 : num_labels;
    h.problem_type = FAT5_PROBLEM_AUTO;
    h.classifier_dropout = 0.0;
    h.pooling = FAT5_POOL_EOS;
    h.label_names = NULL;
    return h;
}

FAT5_API const char *fat5_model_architecture(const fat5_model *m) { return m ? fat5__cfg_arch_name(&m->cfg) : ""; }

FAT5_API const char *fat5_model_label_name(const fat5_model *m, int64_t i) {
    static const char *const none = "";
    if (!m || i < 0 || i >= m->cfg.num_labels || m->cfg.head == FAT5_HEAD_LM || m->cfg.head == FAT5_HEAD_ENCODER)
        return NULL;
    if (!m->label_names) {   // Hugging Face's default, made on first use
        char **names = NULL;
        fat5_model *mm = FAT5__CAST(fat5_model *, (void *)(uintptr_t)m);
        if (fat5__cfg_label_names(m->ctx, "{}", 2, m->cfg.num_labels, &names)) return none;
        mm->label_names = names;
    }
    return m->label_names[i];
}

FAT5_API fat5_status fat5_model_set_label_names(fat5_model *m, const char *const *names, int64_t n) {
    fat5__sb b;
    int64_t i;
    char **out = NULL;
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (m->cfg.head == FAT5_HEAD_LM || m->cfg.head == FAT5_HEAD_ENCODER || m->cfg.head == FAT5_HEAD_QA)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_label_names: %s has no classes",
                         fat5__head_what(&m->cfg));
    if (!names || n != m->cfg.num_labels)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_label_names: %lld names for %lld labels",
                         names ? (long long)n : 0LL, (long long)m->cfg.num_labels);
    for (i = 0; i < n; i++)
        if (!names[i]) return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_label_names: name %lld is NULL",
                                        (long long)i);
    // distinct (sorted: O(n log n))
    if (fat5__cfg_labels_distinct(m->ctx, names, n, "fat5_model_set_label_names")) return FAT5_ERR_INVALID_ARG;
    // through id2label's JSON, so that the names take the one layout the parser makes
    fat5__sb_init(&b, m->ctx);
    fat5__sb_printf(&b, "{\"id2label\": {");
    for (i = 0; i < n; i++) {
        fat5__sb_printf(&b, "%s\"%lld\": ", i ? ", " : "", (long long)i);
        fat5__sb_json_string(&b, names[i]);
    }
    fat5__sb_printf(&b, "}}");
    if (b.oom) {
        fat5__sb_free(&b);
        return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_set_label_names: out of memory");
    }
    st = fat5__cfg_label_names(m->ctx, b.buf, b.len, n, &out);
    fat5__sb_free(&b);
    if (st) return st;
    fat5__free(m->ctx, m->label_names);
    m->label_names = out;
    return FAT5_OK;
}
#undef FAT5__TRY
