// =============================================================================================
// ==[4.2] model: parameters ==
// One fp32 arena in a fixed order, with the Hugging Face name of every tensor

typedef struct fat5__param {
    char name[128];      // the Hugging Face T5 name (the model's own code looks parameters up by it)
    char io_name[128];   // the name in the model's checkpoint scheme: name itself, or FAT5's (flash_t5)
    int ndim;
    int64_t shape[2];
    size_t offset;   // in floats, into the parameter arena
    size_t numel;
    size_t goffset;  // in floats, into the gradient arena (trainable tensors only, in parameter order;
                     // a frozen tensor has none: its goffset is where the next trainable one's starts)
    int frozen;      // 1: not trained (fat5_model_freeze): no gradient, no update, no optimizer state
} fat5__param;

// indices (into the parameter table) of one layer's tensors; -1 where absent
typedef struct fat5__layer {
    int ln_sa, q, k, v, o, rel;       // self-attention: rel = this layer's bias table (maybe shared)
    int ln_ca, cq, ck, cv, co;        // cross-attention (decoder)
    int ln_ff, wi0, wi1, wo;          // wi0 = wi when not gated; wi1 = -1 then
    int grel, gln;                    // LongT5 transient-global encoder: the global bias table (block 0's,
                                      // shared) and this layer's norm of the global tokens; -1 otherwise
} fat5__layer;

// activations the backward pass needs, per layer, on the model's backend; all [tokens, dim]
// row-major. fp32 unless marked act (the backend's activation dtype: bf16 in a GPU bf16 context).
typedef struct fat5__layer_acts {
    fat5__addr h_sa, rs_sa, n_sa;       // stream before self-attention, its inverse RMS [T], normed input (act)
    fat5__addr q, k, v, att, lse;       // act [T, I]; att = attention output before o; lse [T, H]
                                        // transient-global encoder: n_sa, k, v have G more rows, the globals'
    fat5__addr gsum, rs_g;              // ... the block sums [G, D] before their norm, its inverse RMS [G]
    fat5__addr h_ca, rs_ca, n_ca;       // decoder: the same before cross-attention
    fat5__addr cq, ck, cv, catt, clse;  // act; ck, cv [Te, I]
    fat5__addr h_ff, rs_ff, n_ff;       // the same before the FFN
    fat5__addr ff_a, ff_b, ff_h;        // act [T, F]: wi0 x (pre-activation), wi1 x (gated), input of wo
    // q, k, v (and ck, cv; ff_a, ff_b) lie this many elements apart, so that one batched product
    // computes them from their weights, which lie one after the other in the parameters
    int64_t qkv_stride, ckv_stride, ff_stride;
} fat5__layer_acts;

// The activation workspace: one allocation on the backend, carved by fat5__ws_layout.
// The encoder attention of a forward (fat5_model_set_attention) and, for transient-global, the
// batch's global rows: G of them after the T token rows of n_sa, k and v, sequence s's from row
// cu_g[s] (int32 [n_seq + 1] on the backend); the seq map covers them; ones: a weight of 1 [D] to
// norm the globals when the checkpoint has no global_input_layer_norm.
typedef struct fat5__enc_attn {
    fat5_attention at;
    int64_t G;
    fat5__addr cu_g, ones;
} fat5__enc_attn;

typedef struct fat5__ws {
    fat5__layer_acts *enc, *dec;                 // [num_layers], [num_decoder_layers] (host array)
    fat5__enc_attn ea;                           // the encoder's attention pattern and its globals
    fat5__addr enc_hf, enc_rsf, enc_out;         // encoder final norm: stream [Te, D], inverse RMS, output (act)
    fat5__addr dec_hf, dec_rsf, dec_out;         // decoder final norm, as above
    fat5__addr logits, tok_lse, row_ce, row_z;   // [Td, V], [Td] x 3
    fat5__addr loss2;                            // double [2]: the last forward's mean ce and loss
    fat5__addr enc_tok, dec_tok, labels;         // int32 [Te], [Td], [Td]
    fat5__addr enc_cu, dec_cu;                   // int32 [n_seq + 1]
    fat5__addr enc_seq, dec_seq;                 // int32 token -> sequence maps [Te], [Td]
    fat5__addr lut_bidir, lut_causal;            // int32 [max_distance] buckets by distance
    // backward
    fat5__addr dlogits;                          // act [Td, V]
    fat5__addr dh_dec, dh_enc, d_enc_out;        // gradients of the streams and of the encoder output
    fat5__addr dh_act;                           // act [T, D]: a stream gradient as a matmul operand
    fat5__addr dn;                               // [T, D]: gradient of a norm's output
    fat5__addr dgsum;                            // [G, D]: gradient of the globals' block sums
    fat5__addr datt, dq, dk, dv;                 // act [T, I]; dq, dk, dv dqkv_stride elements apart
    fat5__addr delta;                            // [T, H]
    fat5__addr dffh, da;                         // act [T, F]; dffh dff_stride elements after da
    int64_t dqkv_stride, dff_stride;
    fat5__addr norm_scratch;                     // [FAT5__GPU_NORM_ROWS, D] partial norm-weight gradients
    fat5__addr dbias_scratch;                    // [FAT5__GPU_DBIAS_ROWS, nb, H] partial bias-table gradients (GPU)
    // a head other than LM (model_heads.c); R = the head's rows: n_seq (sequence classifiers) or
    // the input tokens (TOKEN_CLS, QA), L = num_labels, B = n_seq, T = the pooled stack's tokens
    fat5__addr hd_pool_f, hd_pool;               // fp32 [B, T] pooling weights, and as act (the product's operand)
    fat5__addr hd_x;                             // act [B, D] pooled (then dropped out) states; TOKEN_CLS [T, D]
    fat5__addr hd_z, hd_h;                       // act [B, D]: dense's output, tanh's (dropped out)
    fat5__addr hd_logits;                        // fp32 [R, L] the head's logits
    fat5__addr hd_dlog_f, hd_dlog;               // fp32 [R, L] d loss / d logits, and as act
    fat5__addr hd_ones_f, hd_ones;               // fp32 and act [max(R, T)] of ones (the biases' products)
    fat5__addr hd_dh, hd_dz;                     // act [B, D]: gradients of tanh's output and input
    fat5__addr hd_dx;                            // fp32 [B, D] gradient of the pooled states
    fat5__addr hd_dx_act;                        // act [B, D] ... after the head's first dropout
    fat5__addr hd_g;                             // ENCODER: fp32 [T, D] the caller's gradient of the hidden states
} fat5__ws;

#define FAT5__GPU_NORM_ROWS 1024  // rows of norm_scratch: FAT5__GPU_NORM_BWD_BLOCKS on the GPU
#define FAT5__GPU_DBIAS_ROWS 1024 // rows of dbias_scratch: FAT5__GPU_DBIAS_BLOCKS on the GPU

// Rows of fp32 logits a training forward keeps at once: the loss and its gradient (dlogits, in the
// activation dtype, for the backward) are computed chunk by chunk, so that no [td, V] fp32 logits
// stay in memory (512 MiB for 4,096 rows of a 32,768 vocabulary).
#define FAT5__XENT_ROWS 1024

#define FAT5__TOK_FILES 5              // the tokenizer files a model carries (io: fat5__tokenizer_files)

// The dropout a training forward ran with, which its backward regenerates (model_graph.c:
// fat5__model_drop): the masks' key and the forward's draw (fat5_model_set_dropout), the rates of
// the sites (0: none there).
typedef struct fat5__fwd_drop {
    uint64_t seed, draw;
    double rate;        // embeddings, sub-layer outputs, the FFN's hidden activation, the final norms
    double attn_rate;   // the attention probabilities
    double head_rate;   // the task heads' dropouts (classifier_dropout)
} fat5__fwd_drop;

struct fat5_model {
    fat5_ctx *ctx;
    const fat5__backend *be;          // where the model computes, fixed at creation
    fat5_model_config cfg;
    int lm_head_tied;                 // lm_head is shared.weight
    int flash_names;                  // 1: checkpoints use FAT5's parameter names (model_type flash_t5)
    fat5__param *params;
    int n_params;
    size_t n_floats;
    float *w;                         // [n_floats] host copy of the parameters (load, save, set)
    int shared, enc_final_ln, dec_final_ln, lm_head;   // lm_head -1 without the LM head
    fat5__layer *enc, *dec;
    int64_t n_dec;                    // decoder layers the model has: cfg.num_decoder_layers, 0 for the
                                      // encoder-only heads (ENCODER, TOKEN_CLS, ENC_SEQ_CLS)
    int hd_w, hd_b;                   // classification_head.dense weight [D, D] and bias [D]; -1 none
    int ho_w, ho_b;                   // the head's output layer: classification_head.out_proj, classifier or
                                      // qa_outputs, weight [L, D] and bias [L]; -1 none (LM, ENCODER)
    char **label_names;               // [num_labels] id2label (one allocation), NULL: "LABEL_i"
    // the head's batch and results, staged on the host (model_heads.c)
    float *hd_host;                   // [max(R * L, B * T)] logits, d logits and pooling weights in turn
    int32_t *hd_lab;                  // [max(R, 2 B)] the batch's head_labels
    float *hd_tgt;                    // [B * L] the batch's head_targets (regression, multi-label)
    int64_t hd_cap_host, hd_cap_lab, hd_cap_tgt;
    int64_t hd_rows;                  // R of the last forward
    int hd_has_targets;               // the last forward had head_labels or head_targets (a loss)
    // parameters on the backend
    size_t act_size;                  // bytes per activation element (4, or 2 in bf16)
    fat5__addr wd;                    // fp32 [n_floats] master weights (on the CPU: m->w itself)
    fat5__addr wa;                    // matmul operands: a bf16 copy in bf16, else wd
    fat5__addr gd;                    // fp32 [n_gfloats] gradients of the trainable tensors (goffset)
    size_t n_gfloats;                 // floats of the gradient arena: n_floats less the frozen tensors'
    int n_frozen;                     // frozen tensors (fat5_model_freeze)
    unsigned freeze_gen;              // counts the changes of the frozen set (an optimizer made before
                                      // one refuses to step: its state is laid out for the old set)
    // workspace for batches up to cap_* (fat5_model_reserve)
    int64_t cap_seq, cap_te, cap_td;
    int64_t xent_rows;                // fp32 logit rows a training forward keeps (FAT5__XENT_ROWS)
    int no_grad;                      // 1: forwards for the loss alone (evaluation): no dlogits, no backward
    int fwd_no_grad;                  // the last forward ran so
    fat5__addr ws_base;
    size_t ws_bytes;
    fat5__ws ws;
    int32_t *enc_cu, *dec_cu, *enc_tok, *dec_tok, *labels;  // the batch, staged on the host
    int32_t *seq_map;                 // [max(cap_te + globals, cap_td, max_distance)] host staging of maps and tables
    int32_t *enc_cu_g;                // [cap_seq + 1] host staging of the globals' rows (transient-global)
    fat5_attention attn;              // the encoder attention of the next forward (fat5_model_set_attention)
    int drop_on;                      // dropout in the training forwards that follow (fat5_model_set_dropout)
    uint64_t drop_seed, drop_draw;    // ... their masks' key and draw
    fat5__fwd_drop fd;                // the dropout of the last forward (rates 0: none)
    unsigned drop_skip;               // sites (bit 1 << FAT5__DS_*) kept without dropout: the tests' switch; 0
    // state of the last forward
    int have_fwd;                     // a forward ran on the current workspace
    int fwd_labels;                   // ... with labels (so backward has a loss to differentiate)
    int have_bwd;                     // backward already ran for it
    int training;                     // 0: inference mode (no gradients, one layer's workspace)
    int bwd_enc;                      // the last backward ran the encoder (some encoder parameter or the
                                      // shared embedding trains)
    int64_t bwd_layers[2];            // encoder and decoder layers the last backward went through
    int64_t n_seq, te, td, n_count;
    fat5_loss_config loss;
    fat5_generate_config gen;         // the generation_config.json beside the checkpoint (io), when
    int has_gen;                      // has_gen (fat5_generate_config_from_model returns it)
    char *gen_json;                   // ... its text as read, written back by fat5_model_save; NULL none
    size_t gen_json_len;
    fat5_st_dtype src_dtype;          // the weights' dtype in the checkpoint it was loaded from (F32, F16 or
                                      // BF16; F32 for a model made from a config): saves' FAT5_WEIGHTS_SOURCE
    char *tok_file[FAT5__TOK_FILES];  // the tokenizer files every save carries (fat5__tokenizer_files[k],
    size_t tok_len[FAT5__TOK_FILES];  // as read from the checkpoint, or fat5_model_set_tokenizer's); NULL none
    // told by the backward as it goes that every gradient at float offset >= lo is final (the
    // parameters lie lm_head-last and the backward finishes them from the top down), so that they
    // can be summed across ranks while it runs; NULL none
    fat5_status (*grad_ready)(void *user, size_t lo);
    void *grad_ready_user;
};

FAT5_API const fat5_model_config *fat5_model_get_config(const fat5_model *m) { return &m->cfg; }

// whether a head runs the decoder (LM, SEQ_CLS and QA; the others are encoder-only)
static int fat5__head_has_decoder(fat5_head h) {
    return h == FAT5_HEAD_LM || h == FAT5_HEAD_SEQ_CLS || h == FAT5_HEAD_QA;
}

// a tensor [d0, d1] (d1 <= 0: [d0]; d0 < 0: a 0-d scalar) at the end of the arena
static int fat5__add_param(fat5_model *m, int cap, const char *name, int64_t d0, int64_t d1) {
    fat5__param *p;
    FAT5_ASSERT(m->n_params < cap);
    (void)cap;
    p = &m->params[m->n_params];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = d0 < 0 ? 0 : d1 > 0 ? 2 : 1;   // d0 < 0: a scalar (0-d), one element
    p->shape[0] = d0 < 0 ? 0 : d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = d0 < 0 ? 1 : (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    p->offset = m->n_floats;
    p->goffset = m->n_gfloats;
    p->frozen = 0;
    m->n_floats += p->numel;
    m->n_gfloats += p->numel;
    return m->n_params++;
}

// The FAT5 (flashT5) name of a Hugging Face T5 parameter name, as FAT5's conversion script maps
// them: inside a block, layer.0 is self_attention_layer (q, k, v become Wq, Wk, Wv; the bias table
// moves under pe_encoding), the decoder's layer.1 is cross_attention_layer, the last layer is
// ff_layer (wi_0, wi_1 under act). Names outside the blocks are the same in both schemes.
static void fat5__flash_name(const char *hf, char *out, size_t n) {
    static const char *const map[][2] = {
        {"layer.0.SelfAttention.q.weight", "self_attention_layer.self_attention.Wq.weight"},
        {"layer.0.SelfAttention.k.weight", "self_attention_layer.self_attention.Wk.weight"},
        {"layer.0.SelfAttention.v.weight", "self_attention_layer.self_attention.Wv.weight"},
        {"layer.0.SelfAttention.o.weight", "self_attention_layer.self_attention.o.weight"},
        {"layer.0.SelfAttention.relative_attention_bias.weight",
         "self_attention_layer.self_attention.pe_encoding.relative_attention_bias.weight"},
        {"layer.0.layer_norm.weight", "self_attention_layer.layer_norm.weight"},
        {"layer.1.EncDecAttention.q.weight", "cross_attention_layer.cross_attention.Wq.weight"},
        {"layer.1.EncDecAttention.k.weight", "cross_attention_layer.cross_attention.Wk.weight"},
        {"layer.1.EncDecAttention.v.weight", "cross_attention_layer.cross_attention.Wv.weight"},
        {"layer.1.EncDecAttention.o.weight", "cross_attention_layer.cross_attention.o.weight"},
        {"DenseReluDense.wi_0.weight", "ff_layer.act.wi_0.weight"},
        {"DenseReluDense.wi_1.weight", "ff_layer.act.wi_1.weight"},
        {"DenseReluDense.wo.weight", "ff_layer.wo.weight"},
        {"layer.2.layer_norm.weight", "ff_layer.layer_norm.weight"}};
    const char *rest;
    size_t i, digits;
    int dec = strncmp(hf, "decoder.block.", 14) == 0;
    snprintf(out, n, "%s", hf);
    if (!dec && strncmp(hf, "encoder.block.", 14) != 0) return;
    digits = strspn(hf + 14, "0123456789");
    if (!digits || hf[14 + digits] != '.') return;
    rest = hf + 15 + digits;   // after "encoder.block.N."
    if (strcmp(rest, "layer.1.layer_norm.weight") == 0) {
        snprintf(out, n, "%.*s%s", (int)(rest - hf), hf,
                 dec ? "cross_attention_layer.layer_norm.weight" : "ff_layer.layer_norm.weight");
        return;
    }
    for (i = 0; i < sizeof map / sizeof map[0]; i++) {
        // the feed-forward entries match after "layer.1." (encoder) or "layer.2." (decoder)
        const char *r = rest;
        if (strncmp(map[i][0], "DenseReluDense.", 15) == 0) {
            if (strncmp(r, dec ? "layer.2." : "layer.1.", 8) != 0) continue;
            r += 8;
        }
        if (strcmp(r, map[i][0]) == 0) {
            snprintf(out, n, "%.*s%s", (int)(rest - hf), hf, map[i][1]);
            return;
        }
    }
}

// Builds the parameter table for cfg (no allocation of weights). Sizes were bounded by validate:
// every dimension < 2^24 and layers <= 1024, so the products below cannot overflow 64 bits.
static fat5_status fat5__build_params(fat5_model *m) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size, L = c->num_labels;
    int cap, l, n_body;
    char nm[128];
    m->n_dec = fat5__head_has_decoder(c->head) ? c->num_decoder_layers : 0;
    cap = (int)(16 + (c->num_layers + m->n_dec) * 16);
    m->params = FAT5__CAST(fat5__param *, fat5__calloc(m->ctx, (size_t)cap, sizeof(fat5__param)));
    m->enc = FAT5__CAST(fat5__layer *, fat5__calloc(m->ctx, (size_t)c->num_layers, sizeof(fat5__layer)));
    m->dec = FAT5__CAST(fat5__layer *, fat5__calloc(m->ctx, (size_t)(m->n_dec ? m->n_dec : 1), sizeof(fat5__layer)));
    if (!m->params || !m->enc || !m->dec) return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->shared = fat5__add_param(m, cap, "shared.weight", V, D);
    m->dec_final_ln = -1;
    for (l = 0; l < 2; l++) {
        const char *stack = l == 0 ? "encoder" : "decoder";
        int64_t nl = l == 0 ? c->num_layers : m->n_dec, b;
        if (l == 1 && !m->n_dec) break;   // an encoder-only head
        fat5__layer *L = l == 0 ? m->enc : m->dec;
        for (b = 0; b < nl; b++) {
            fat5__layer *y = &L[b];
            const char *ffl = l == 0 ? "1" : "2";
#define FAT5__P(field, fmt, d0, d1) \
    (snprintf(nm, sizeof nm, "%s.block.%lld." fmt, stack, (long long)b), y->field = fat5__add_param(m, cap, nm, d0, d1))
            FAT5__P(q, "layer.0.SelfAttention.q.weight", I, D);
            FAT5__P(k, "layer.0.SelfAttention.k.weight", I, D);
            FAT5__P(v, "layer.0.SelfAttention.v.weight", I, D);
            FAT5__P(o, "layer.0.SelfAttention.o.weight", D, I);
            // the position parameters: T5's bias table, or FIRE's block (its MLP and scalars, one
            // contiguous run in the order of fat5__attn_kind's FAT5__FIRE_* layout; FAT5's names);
            // ALiBi, RoPE and none have none (rel = -1)
            y->grel = y->gln = -1;
            if (b > 0 && !c->bias_every_layer) {
                y->rel = L[0].rel;
            } else if (c->pos_kind == FAT5_POS_T5) {
                FAT5__P(rel, "layer.0.SelfAttention.relative_attention_bias.weight", c->rel_buckets, c->num_heads);
                // LongT5's global table right after T5's: the attention ops read them as one [2, nb, H]
                if (l == 0 && c->enc_attention == FAT5_ENC_ATTN_TGLOBAL) {
                    FAT5__P(grel, "layer.0.TransientGlobalSelfAttention.global_relative_attention_bias.weight",
                            c->rel_buckets, c->num_heads);
                    FAT5_ASSERT(m->params[y->grel].offset == m->params[y->rel].offset + m->params[y->rel].numel);
                }
            } else if (c->pos_kind == FAT5_POS_FIRE) {
                static const char *const fire[6] = {"mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "c",
                                                    "L_multiplier"};
                int64_t W = c->fire_mlp_width, H = c->num_heads;
                int64_t d0[6] = {W, W, H, H, -1, -1}, d1[6] = {1, 0, W, 0, 0, 0};
                int e, last = -1;
                for (e = 0; e < 6; e++) {
                    snprintf(nm, sizeof nm, "%s.block.%lld.self_attention_layer.self_attention.pe_encoding.%s", stack,
                             (long long)b, fire[e]);
                    last = fat5__add_param(m, cap, nm, d0[e], d1[e]);
                    if (e == 0) y->rel = last;
                }
                FAT5_ASSERT(m->params[last].offset - m->params[y->rel].offset == (size_t)FAT5__FIRE_LM(H, W));
            } else {
                y->rel = -1;
            }
            FAT5__P(ln_sa, "layer.0.layer_norm.weight", D, 0);
            if (l == 0 && c->enc_attention == FAT5_ENC_ATTN_TGLOBAL) {
                if (b > 0) y->grel = L[0].grel;
                FAT5__P(gln, "layer.0.TransientGlobalSelfAttention.global_input_layer_norm.weight", D, 0);
            }
            y->ln_ca = y->cq = y->ck = y->cv = y->co = -1;
            if (l == 1) {
                FAT5__P(cq, "layer.1.EncDecAttention.q.weight", I, D);
                FAT5__P(ck, "layer.1.EncDecAttention.k.weight", I, D);
                FAT5__P(cv, "layer.1.EncDecAttention.v.weight", I, D);
                FAT5__P(co, "layer.1.EncDecAttention.o.weight", D, I);
                FAT5__P(ln_ca, "layer.1.layer_norm.weight", D, 0);
            }
            snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.DenseReluDense.%s.weight", stack, (long long)b, ffl,
                     c->gated ? "wi_0" : "wi");
            y->wi0 = fat5__add_param(m, cap, nm, F, D);
            y->wi1 = -1;
            if (c->gated) {
                snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.DenseReluDense.wi_1.weight", stack, (long long)b, ffl);
                y->wi1 = fat5__add_param(m, cap, nm, F, D);
            }
            snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.DenseReluDense.wo.weight", stack, (long long)b, ffl);
            y->wo = fat5__add_param(m, cap, nm, D, F);
            snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.layer_norm.weight", stack, (long long)b, ffl);
            y->ln_ff = fat5__add_param(m, cap, nm, D, 0);
#undef FAT5__P
        }
        snprintf(nm, sizeof nm, "%s.final_layer_norm.weight", stack);
        if (l == 0) m->enc_final_ln = fat5__add_param(m, cap, nm, D, 0);
        else m->dec_final_ln = fat5__add_param(m, cap, nm, D, 0);
    }
    // the head's tensors, last (the backward finishes the gradients from the top down)
    n_body = m->n_params;
    m->lm_head = m->hd_w = m->hd_b = m->ho_w = m->ho_b = -1;
    if (c->head == FAT5_HEAD_LM) m->lm_head = m->lm_head_tied ? m->shared : fat5__add_param(m, cap, "lm_head.weight", V, D);
    if (c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_ENC_SEQ_CLS) {
        m->hd_w = fat5__add_param(m, cap, "classification_head.dense.weight", D, D);
        m->hd_b = fat5__add_param(m, cap, "classification_head.dense.bias", D, 0);
        m->ho_w = fat5__add_param(m, cap, "classification_head.out_proj.weight", L, D);
        m->ho_b = fat5__add_param(m, cap, "classification_head.out_proj.bias", L, 0);
    } else if (c->head == FAT5_HEAD_TOKEN_CLS) {
        m->ho_w = fat5__add_param(m, cap, "classifier.weight", L, D);
        m->ho_b = fat5__add_param(m, cap, "classifier.bias", L, 0);
    } else if (c->head == FAT5_HEAD_QA) {
        m->ho_w = fat5__add_param(m, cap, "qa_outputs.weight", 2, D);
        m->ho_b = fat5__add_param(m, cap, "qa_outputs.bias", 2, 0);
    }
    m->flash_names = strcmp(c->model_type, "flash_t5") == 0;
    for (l = 0; l < m->n_params; l++) {
        fat5__param *p = &m->params[l];
        const char *sa = strstr(p->name, ".layer.0.SelfAttention.");
        // T5ForSequenceClassification and T5ForTokenClassification keep their stacks under
        // "transformer." (a T5Model, a T5EncoderModel), the head's tensors at the top
        int under = (c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_TOKEN_CLS) && l < n_body;
        if (under)
            snprintf(p->io_name, sizeof p->io_name, "transformer.%.115s", p->name);
        else if (m->flash_names)
            fat5__flash_name(p->name, p->io_name, sizeof p->io_name);
        else if (c->enc_attention != FAT5_ENC_ATTN_FULL && sa && strncmp(p->name, "encoder.", 8) == 0)
            // LongT5 names its encoder's self-attention after the attention type
            snprintf(p->io_name, sizeof p->io_name, "%.*s.layer.0.%s.%s", (int)(sa - p->name), p->name,
                     c->enc_attention == FAT5_ENC_ATTN_LOCAL ? "LocalSelfAttention" : "TransientGlobalSelfAttention",
                     sa + strlen(".layer.0.SelfAttention."));
        else
            snprintf(p->io_name, sizeof p->io_name, "%s", p->name);
    }
    return FAT5_OK;
}

static fat5_status fat5__model_alloc(fat5_ctx *ctx, const fat5_model_config *cfg, int lm_head_tied,
                                     fat5_model **out) {
    fat5_model *m;
    fat5_status st;
    *out = NULL;
    if ((st = fat5_model_config_validate(ctx, cfg))) return st;
    m = FAT5__CAST(fat5_model *, fat5__calloc(ctx, 1, sizeof *m));
    if (!m) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->ctx = ctx;
    m->cfg = *cfg;
    m->lm_head_tied = lm_head_tied;
    m->src_dtype = FAT5_ST_F32;
    m->training = 1;
    m->xent_rows = FAT5__XENT_ROWS;
    m->attn.type = cfg->enc_attention;
    m->attn.radius = m->attn.type == FAT5_ENC_ATTN_FULL ? 0 : cfg->local_radius;
    m->attn.global = m->attn.type == FAT5_ENC_ATTN_TGLOBAL ? cfg->global_block_size : 0;
    if (ctx->cfg.attention && (st = fat5_model_set_attention(m, ctx->cfg.attention))) {
        fat5__err_prefix(ctx, st, "the context's attention: ");
        fat5_model_destroy(m);
        return st;
    }
    if ((st = fat5__build_params(m))) {
        fat5_model_destroy(m);
        return st;
    }
    m->be = fat5__backend_of(ctx);
    m->act_size = m->be->act_size(ctx);
    m->w = FAT5__CAST(float *, fat5__calloc(ctx, m->n_floats, sizeof(float)));
    if (!m->w) {
        fat5_model_destroy(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: cannot allocate %zu parameters (%.1f MiB)",
                         m->n_floats, (double)m->n_floats * 4.0 / 1048576.0);
    }
    *out = m;
    return FAT5_OK;
}

static void fat5__ws_free(fat5_model *m);  // the workspace (model section)

// the backend's parameter arenas (wd is m->w itself on the CPU)
static void fat5__model_free_params(fat5_model *m) {
    if (m->wa && m->wa != m->wd) m->be->free(m->ctx, m->wa);
    if (m->wd && m->wd != FAT5__ADDR(m->w)) m->be->free(m->ctx, m->wd);
    if (m->gd) m->be->free(m->ctx, m->gd);
    m->wa = m->wd = m->gd = 0;
}

FAT5_API void fat5_model_destroy(fat5_model *m) {
    fat5_ctx *ctx;
    int i;
    if (!m) return;
    ctx = m->ctx;
    if (m->be) {
        fat5__ws_free(m);
        fat5__model_free_params(m);
    }
    fat5__free(ctx, m->params);
    fat5__free(ctx, m->gen_json);
    for (i = 0; i < FAT5__TOK_FILES; i++) fat5__free(ctx, m->tok_file[i]);
    fat5__free(ctx, m->enc);
    fat5__free(ctx, m->dec);
    fat5__free(ctx, m->label_names);
    fat5__free(ctx, m->hd_host);
    fat5__free(ctx, m->hd_lab);
    fat5__free(ctx, m->hd_tgt);
    fat5__free(ctx, m->w);
    fat5__free(ctx, m);
}

// Refreshes the matmul operands of parameters [off, off + n) from the fp32 master weights (bf16).
static fat5_status fat5__model_refresh_operands(fat5_model *m, size_t off, size_t n) {
    if (m->wa == m->wd || n == 0) return FAT5_OK;
    return m->be->f32_to_bf16(m->ctx, m->wa + 2 * (fat5__addr)off, m->wd + 4 * (fat5__addr)off, (int64_t)n);
}

// Puts the host weights (m->w) where the context computes: master weights, matmul operands and
// zeroed gradients on the backend. On the CPU the master weights are m->w itself.
static fat5_status fat5__model_place(fat5_model *m) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    size_t n = m->n_floats;
    fat5_status st;
    if (be->host_memory) {
        m->wd = m->wa = FAT5__ADDR(m->w);
        if ((st = be->alloc(ctx, m->n_gfloats * 4, &m->gd))) return fat5__err_prefix(ctx, st, "model gradients: ");
        return FAT5_OK;
    }
    if ((st = be->alloc(ctx, n * 4, &m->wd)) || (st = be->alloc(ctx, m->n_gfloats * 4, &m->gd)) ||
        (m->act_size == 2 && (st = be->alloc(ctx, n * 2, &m->wa))))
        return fat5__err_prefix(ctx, st, "model weights (%zu parameters) on the %s: ", n, be->name);
    if (!m->wa) m->wa = m->wd;
    if ((st = be->upload(ctx, m->wd, m->w, n * 4)) || (st = fat5__model_refresh_operands(m, 0, n))) return st;
    return be->sync(ctx);
}

// The backend's master weights back into m->w (before a save).
static fat5_status fat5__model_pull_params(fat5_model *m) {
    return m->be->download(m->ctx, m->w, m->wd, m->n_floats * 4);
}

// Parameter i as Hugging Face's T5 initialises it (factor 1), with lm_head at std d_model^-0.5
// (the heads: classification_head's and qa_outputs' weights d_model^-0.5, the token classifier's
// 1, biases 0); FIRE as FAT5: c = 0.1, L_multiplier = 1, its MLP with PyTorch's Linear default,
// uniform +-1/sqrt(fan_in). Draws from r.
static void fat5__param_init(fat5_model *m, int i, fat5_rng *r) {
    const fat5_model_config *cfg = &m->cfg;
    const fat5__param *p = &m->params[i];
    const char *n = p->name, *pe = strstr(n, ".pe_encoding.");
    float *w = m->w + p->offset;
    double std, D = (double)cfg->d_model;
    size_t j;
    if (pe && cfg->pos_kind == FAT5_POS_FIRE) {
        double bound = strstr(pe, ".mlp.2.") ? 1.0 / sqrt((double)cfg->fire_mlp_width) : 1.0;
        if (strcmp(pe, ".pe_encoding.c") == 0) w[0] = 0.1f;
        else if (strcmp(pe, ".pe_encoding.L_multiplier") == 0) w[0] = 1.0f;
        else
            for (j = 0; j < p->numel; j++) w[j] = (float)(bound * (2.0 * fat5_rng_uniform(r) - 1.0));
        return;
    }
    if (strstr(n, "layer_norm")) {
        for (j = 0; j < p->numel; j++) w[j] = 1.0f;
        return;
    }
    if (i == m->hd_b || i == m->ho_b) {   // the heads' biases
        for (j = 0; j < p->numel; j++) w[j] = 0.0f;
        return;
    }
    if (strcmp(n, "shared.weight") == 0 || (i == m->ho_w && cfg->head == FAT5_HEAD_TOKEN_CLS)) std = 1.0;
    else if (strstr(n, ".q.weight")) std = 1.0 / sqrt(D * (double)cfg->d_kv);
    else if (strstr(n, ".o.weight")) std = 1.0 / sqrt((double)(cfg->num_heads * cfg->d_kv));
    else if (strstr(n, ".wo.weight")) std = 1.0 / sqrt((double)cfg->d_ff);
    else std = 1.0 / sqrt(D);  // k, v, wi*, relative_attention_bias, lm_head, the other heads' weights
    for (j = 0; j < p->numel; j++) w[j] = (float)(std * fat5_rng_normal(r));
}

FAT5_API fat5_status fat5_model_create(fat5_ctx *ctx, const fat5_model_config *cfg, uint64_t seed,
                                       fat5_model **out) {
    fat5_model *m;
    fat5_rng r = fat5_rng_init(seed);
    fat5_status st;
    int i;
    if (!out || !cfg) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_create: NULL argument");
    if ((st = fat5__model_alloc(ctx, cfg, cfg->tie_word_embeddings, &m))) return st;
    for (i = 0; i < m->n_params; i++) fat5__param_init(m, i, &r);
    if ((st = fat5__model_place(m))) {
        fat5_model_destroy(m);
        return st;
    }
    *out = m;
    return FAT5_OK;
}

FAT5_API int64_t fat5_model_param_count(const fat5_model *m) { return (int64_t)m->n_floats; }
FAT5_API int fat5_model_tensor_count(const fat5_model *m) { return m->n_params; }

FAT5_API fat5_status fat5_model_tensor_info(const fat5_model *m, int index, fat5_tensor_info *out) {
    const fat5__param *p;
    if (index < 0 || index >= m->n_params)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "tensor index %d out of range [0, %d)", index, m->n_params);
    p = &m->params[index];
    out->name = p->io_name;
    out->ndim = p->ndim;
    out->shape[0] = p->shape[0];
    out->shape[1] = p->shape[1];
    out->numel = (int64_t)p->numel;
    return FAT5_OK;
}

FAT5_API int fat5_model_find_tensor(const fat5_model *m, const char *name) {
    int i;
    for (i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].io_name, name) == 0) return i;
    for (i = 0; i < m->n_params; i++)   // the T5 name of a FAT5 or LongT5 tensor
        if (strcmp(m->params[i].name, name) == 0) return i;
    return -1;
}

// what: 0 read the parameter, 1 write it, 2 read its gradient
static fat5_status fat5__param_io(fat5_model *m, const char *name, float *buf, int64_t n, int what) {
    int i = name ? fat5_model_find_tensor(m, name) : -1;
    const fat5__param *p;
    const fat5__backend *be = m->be;
    size_t bytes;
    fat5_status st;
    if (i < 0) return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "no parameter named '%s'", name ? name : "(null)");
    p = &m->params[i];
    bytes = p->numel * sizeof(float);
    if (n != (int64_t)p->numel || !buf)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "parameter '%s' has %zu elements, buffer has %lld", name,
                         p->numel, buf ? (long long)n : 0LL);
    if (what == 0) return be->download(m->ctx, buf, m->wd + 4 * (fat5__addr)p->offset, bytes);
    if (what == 2 && p->frozen) {   // a frozen tensor has no gradient: it reads as zeros
        memset(buf, 0, bytes);
        return FAT5_OK;
    }
    if (what == 2) return be->download(m->ctx, buf, m->gd + 4 * (fat5__addr)p->goffset, bytes);
    memcpy(m->w + p->offset, buf, bytes);  // the host copy, then the backend's
    if ((st = be->upload(m->ctx, m->wd + 4 * (fat5__addr)p->offset, m->w + p->offset, bytes)) ||
        (st = fat5__model_refresh_operands(m, p->offset, p->numel)))
        return st;
    return be->sync(m->ctx);
}
FAT5_API fat5_status fat5_model_get_param(fat5_model *m, const char *name, float *dst, int64_t n) {
    return fat5__param_io(m, name, dst, n, 0);
}
FAT5_API fat5_status fat5_model_set_param(fat5_model *m, const char *name, const float *src, int64_t n) {
    return fat5__param_io(m, name, FAT5__CAST(float *, (void *)(uintptr_t)src), n, 1);
}
FAT5_API fat5_status fat5_model_get_grad(fat5_model *m, const char *name, float *dst, int64_t n) {
    if (m && !m->gd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_grad: the model is in inference mode");
    return fat5__param_io(m, name, dst, n, 2);
}
FAT5_API fat5_status fat5_model_zero_grad(fat5_model *m) {
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!m->gd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_zero_grad: the model is in inference mode");
    st = m->be->memset0(m->ctx, m->gd, m->n_gfloats * sizeof(float));
    return st ? st : m->be->sync(m->ctx);
}


// ---- frozen parameters ----

// Whether name matches pattern p[0 .. pn): '*' stands for any run of characters (dots included,
// none at all too), every other character for itself.
static int fat5__glob(const char *p, size_t pn, const char *name) {
    size_t i = 0, star = 0;
    const char *s = name, *retry = NULL;
    while (*s) {
        if (i < pn && p[i] == '*') {   // remember where the star's run may grow from
            star = ++i;
            retry = s;
        } else if (i < pn && p[i] == *s) {
            i++;
            s++;
        } else if (retry) {            // let the last star take one more character
            i = star;
            s = ++retry;
        } else {
            return 0;
        }
    }
    while (i < pn && p[i] == '*') i++;
    return i == pn;
}

// Lays the gradient arena out for the frozen set: every trainable tensor's goffset, in parameter
// order, and n_gfloats; in training mode the arena is allocated again, zeroed (the gradients
// accumulated so far are dropped).
static fat5_status fat5__model_layout_grads(fat5_model *m) {
    size_t at = 0;
    fat5_status st;
    int i;
    m->n_frozen = 0;
    for (i = 0; i < m->n_params; i++) {
        m->params[i].goffset = at;
        if (m->params[i].frozen) m->n_frozen++;
        else at += m->params[i].numel;
    }
    m->n_gfloats = at;
    m->freeze_gen++;
    if (!m->gd) return FAT5_OK;   // inference mode: set_training(m, 1) allocates it
    m->be->free(m->ctx, m->gd);
    m->gd = 0;
    if ((st = m->be->alloc(m->ctx, (at ? at : 1) * 4, &m->gd)))   // zero-filled
        return fat5__err_prefix(m->ctx, st, "fat5_model_freeze: gradients of %zu trainable parameters: ", at);
    return FAT5_OK;
}

// Tensors whose gradient one op computes together must be frozen together: FIRE's block of six
// (its MLP and scalars) and LongT5's global bias table with the relative one it lies after.
static fat5_status fat5__freeze_check_groups(fat5_model *m) {
    const fat5_model_config *c = &m->cfg;
    int s, b, e;
    for (s = 0; s < 2; s++) {
        const fat5__layer *L = s ? m->dec : m->enc;
        int64_t nl = s ? m->n_dec : c->num_layers;
        for (b = 0; b < nl; b++) {
            int first = L[b].rel, n = c->pos_kind == FAT5_POS_FIRE ? 6 : 1;
            if (first < 0) continue;
            for (e = 1; e < n; e++)
                if (m->params[first + e].frozen != m->params[first].frozen)
                    return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "freeze: '%s' and '%s' are one FIRE block (one "
                                     "gradient op): freeze all of %s...pe_encoding.* or none", m->params[first].io_name,
                                     m->params[first + e].io_name, s ? "decoder" : "encoder");
            if (L[b].grel >= 0 && m->params[L[b].grel].frozen != m->params[first].frozen)
                return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "freeze: '%s' and '%s' share one gradient op: freeze "
                                 "both or neither", m->params[first].io_name, m->params[L[b].grel].io_name);
        }
    }
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_freeze(fat5_model *m, const char *patterns) {
    const char *p = patterns ? patterns : "";
    char *was;
    fat5_status st = FAT5_OK;
    int i;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!(was = FAT5__CAST(char *, fat5__malloc(m->ctx, (size_t)m->n_params + 1))))
        return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_freeze: out of memory");
    for (i = 0; i < m->n_params; i++) {
        was[i] = (char)m->params[i].frozen;
        m->params[i].frozen = 0;
    }
    while (*p && st == FAT5_OK) {   // one pattern a time, between commas, spaces around it dropped
        const char *end = strchr(p, ','), *a = p, *z;
        char nm[160];
        int hits = 0;
        if (!end) end = p + strlen(p);
        while (a < end && (*a == ' ' || *a == '\t')) a++;
        for (z = end; z > a && (z[-1] == ' ' || z[-1] == '\t'); z--) {}
        p = *end ? end + 1 : end;
        if (z == a) continue;   // an empty item ("a,,b", a trailing comma)
        snprintf(nm, sizeof nm, "%.*s", (int)(z - a > 150 ? 150 : z - a), a);
        for (i = 0; i < m->n_params; i++)
            if (fat5__glob(a, (size_t)(z - a), m->params[i].name) ||
                fat5__glob(a, (size_t)(z - a), m->params[i].io_name)) {
                m->params[i].frozen = 1;
                hits++;
            }
        if (!hits) {
            char safe[160];
            st = fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "freeze: pattern '%s' matches no parameter of this model (names "
                           "as fat5_model_tensor_info lists them, e.g. 'shared.weight', 'encoder.*', "
                           "'*.layer_norm.weight'; '*' matches any characters)%s", fat5__msg_name(safe, sizeof safe, nm),
                           m->lm_head_tied && fat5__glob(a, (size_t)(z - a), "lm_head.weight")
                               ? ": this model ties lm_head to shared.weight, freeze that" : "");
        }
    }
    if (st == FAT5_OK) st = fat5__freeze_check_groups(m);
    if (st != FAT5_OK) {   // the set as it was
        for (i = 0; i < m->n_params; i++) m->params[i].frozen = was[i];
        fat5__free(m->ctx, was);
        return st;
    }
    for (i = 0; i < m->n_params && m->params[i].frozen == was[i]; i++) {}
    fat5__free(m->ctx, was);
    if (i == m->n_params) return FAT5_OK;   // the same set: gradients and optimizers stay as they are
    return fat5__model_layout_grads(m);
}

FAT5_API int fat5_model_tensor_frozen(const fat5_model *m, int index) {
    if (!m || index < 0 || index >= m->n_params) return -1;
    return m->params[index].frozen;
}

FAT5_API int64_t fat5_model_trainable_count(const fat5_model *m) { return m ? (int64_t)m->n_gfloats : 0; }
