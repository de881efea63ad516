// ---------------------------------------------------------------------------------------------
// model config

FAT5_API fat5_model_config fat5_model_config_default(void) {
    fat5_model_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 32128;
    c.d_model = 512;
    c.d_kv = 64;
    c.d_ff = 2048;
    c.num_layers = 6;
    c.num_decoder_layers = 6;
    c.num_heads = 8;
    c.rel_buckets = 32;
    c.rel_max_distance = 128;
    c.layer_norm_eps = 1e-6;
    c.act = FAT5_ACT_RELU;
    c.gated = 0;
    c.tie_word_embeddings = 1;
    c.scale_decoder_outputs = 1;
    c.bias_every_layer = 0;
    c.pad_token_id = 0;
    c.eos_token_id = 1;
    c.decoder_start_token_id = 0;
    c.dropout_rate = 0.1;
    memcpy(c.model_type, "t5", 3);
    return c;
}

#define FAT5__MAX_DIM ((int64_t)1 << 24)    // no single dimension beyond 16M
#define FAT5__MAX_LAYERS 1024

FAT5_API fat5_status fat5_model_config_validate(fat5_ctx *ctx, const fat5_model_config *c) {
    struct { const char *name; int64_t v, lo, hi; } f[9];
    int i;
    f[0].name = "vocab_size"; f[0].v = c->vocab_size; f[0].lo = 1; f[0].hi = INT32_MAX;
    f[1].name = "d_model"; f[1].v = c->d_model; f[1].lo = 1; f[1].hi = FAT5__MAX_DIM;
    f[2].name = "d_kv"; f[2].v = c->d_kv; f[2].lo = 1; f[2].hi = FAT5__MAX_DIM;
    f[3].name = "d_ff"; f[3].v = c->d_ff; f[3].lo = 1; f[3].hi = FAT5__MAX_DIM;
    f[4].name = "num_layers"; f[4].v = c->num_layers; f[4].lo = 1; f[4].hi = FAT5__MAX_LAYERS;
    f[5].name = "num_decoder_layers"; f[5].v = c->num_decoder_layers; f[5].lo = 1; f[5].hi = FAT5__MAX_LAYERS;
    f[6].name = "num_heads"; f[6].v = c->num_heads; f[6].lo = 1; f[6].hi = 4096;
    f[7].name = "relative_attention_num_buckets"; f[7].v = c->rel_buckets; f[7].lo = 4; f[7].hi = 1 << 16;
    f[8].name = "relative_attention_max_distance"; f[8].v = c->rel_max_distance; f[8].lo = 1; f[8].hi = 1 << 30;
    for (i = 0; i < 9; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: %s = %lld, expected %lld..%lld",
                             f[i].name, (long long)f[i].v, (long long)f[i].lo, (long long)f[i].hi);
    if (c->num_heads * c->d_kv > FAT5__MAX_DIM)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: num_heads * d_kv = %lld is too large",
                         (long long)(c->num_heads * c->d_kv));
    // the log-spaced buckets start at nb/4 (encoder) and nb/2 (decoder); both need max_distance above
    if (c->rel_max_distance <= c->rel_buckets / 2)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: relative_attention_max_distance = %lld must exceed "
                         "relative_attention_num_buckets / 2 = %lld (the log-spaced buckets start there)",
                         (long long)c->rel_max_distance, (long long)(c->rel_buckets / 2));
    if (!(c->layer_norm_eps > 0 && c->layer_norm_eps < 1))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: layer_norm_epsilon = %g, expected 0 < eps < 1",
                         c->layer_norm_eps);
    if (c->act < FAT5_ACT_RELU || c->act > FAT5_ACT_SILU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: unknown activation %d", (int)c->act);
    if (c->pad_token_id < 0 || c->pad_token_id >= c->vocab_size || c->decoder_start_token_id < 0 ||
        c->decoder_start_token_id >= c->vocab_size)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: pad_token_id %lld and decoder_start_token_id %lld must be in [0, vocab_size %lld)",
                         (long long)c->pad_token_id, (long long)c->decoder_start_token_id,
                         (long long)c->vocab_size);
    return FAT5_OK;
}

// Keys of Hugging Face configs that never change the T5 forward pass (generation settings,
// bookkeeping); anything neither here nor handled below is refused.
static const char *const fat5__cfg_ignored[] = {
    "transformers_version", "torch_dtype", "dtype", "use_cache", "n_positions", "output_past",
    "task_specific_params", "gradient_checkpointing", "classifier_dropout", "tokenizer_class",
    "bos_token_id", "sep_token_id", "id2label", "label2id", "num_labels", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "pruned_heads",
    "chunk_size_feed_forward", "is_decoder", "add_cross_attention", "tie_encoder_decoder",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "finetuning_task", "prefix", "problem_type",
    "cross_attention_hidden_size", "initializer_factor", "dropout_rate", "tf_legacy_loss",
    "decoder_start_token_id", "output_router_logits", "architectures", "is_encoder_decoder",
    "model_type", "feed_forward_proj", "dense_act_fn", "is_gated_act", "scale_decoder_outputs",
    NULL};

static int fat5__cfg_known(const char *key) {
    int i;
    if (key[0] == '_') return 1;  // private bookkeeping such as _name_or_path
    for (i = 0; fat5__cfg_ignored[i]; i++)
        if (strcmp(key, fat5__cfg_ignored[i]) == 0) return 1;
    return 0;
}

// integer field: absent keeps the default; null is allowed only where HF allows it (allow_null)
static fat5_status fat5__cfg_int(fat5_ctx *ctx, const fat5__json *root, const char *key, int allow_null,
                                 int64_t *v, int *present) {
    const fat5__json *j = fat5__json_get(root, key);
    if (present) *present = 0;
    if (!j || (allow_null && j->type == FAT5__J_NULL)) return FAT5_OK;
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_i64(j, v))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: '%s' must be an integer", key);
    if (present) *present = 1;
    return FAT5_OK;
}

static fat5_status fat5__cfg_bool(fat5_ctx *ctx, const fat5__json *root, const char *key, int *v,
                                  int *present) {
    const fat5__json *j = fat5__json_get(root, key);
    if (present) *present = 0;
    if (!j) return FAT5_OK;
    if (j->type != FAT5__J_TRUE && j->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: '%s' must be true or false", key);
    *v = j->type == FAT5__J_TRUE;
    if (present) *present = 1;
    return FAT5_OK;
}

static const char *fat5__act_name(fat5_act a) {
    switch (a) {
    case FAT5_ACT_RELU: return "relu";
    case FAT5_ACT_GELU: return "gelu";
    case FAT5_ACT_GELU_TANH: return "gelu_new";
    case FAT5_ACT_SILU: return "silu";
    }
    return "?";
}

static int fat5__act_from_name(const char *s, fat5_act *out) {
    if (strcmp(s, "relu") == 0) *out = FAT5_ACT_RELU;
    else if (strcmp(s, "gelu") == 0) *out = FAT5_ACT_GELU;
    else if (strcmp(s, "gelu_new") == 0 || strcmp(s, "gelu_pytorch_tanh") == 0) *out = FAT5_ACT_GELU_TANH;
    else if (strcmp(s, "silu") == 0 || strcmp(s, "swish") == 0) *out = FAT5_ACT_SILU;
    else return 0;
    return 1;
}

FAT5_API fat5_status fat5_model_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                 fat5_model_config *out) {
    fat5_model_config c = fat5_model_config_default();
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *j;
    fat5_status st;
    int has_dec_layers = 0, has_scale = 0, has_gated = 0, is_gated_act = 0;
    int64_t dec_layers = 0;

    st = fat5__json_parse(ctx, "config.json", json, len, 16, &doc);
    if (st) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: the top level must be an object");
        goto done;
    }
    // model_type first: it sets UMT5's defaults
    if ((j = fat5__json_get(root, "model_type")) != NULL) {
        if (j->type != FAT5__J_STRING) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'model_type' must be a string");
            goto done;
        }
        if (strcmp(j->str, "t5") != 0 && strcmp(j->str, "mt5") != 0 && strcmp(j->str, "umt5") != 0) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: model_type '%s' is not a T5 model (fat5 runs t5, mt5, umt5)", j->str);
            goto done;
        }
        snprintf(c.model_type, sizeof c.model_type, "%s", j->str);
        if (strcmp(j->str, "umt5") == 0) {
            c.bias_every_layer = 1;
            c.vocab_size = 250112;
            c.act = FAT5_ACT_GELU_TANH;
            c.gated = 1;
        } else if (strcmp(j->str, "mt5") == 0) {
            c.vocab_size = 250112;
            c.d_ff = 1024;
            c.d_kv = 64;
            c.num_layers = 8;
            c.num_heads = 6;
            c.act = FAT5_ACT_GELU_TANH;
            c.gated = 1;
            c.tie_word_embeddings = 0;
        }
    }
    for (j = root->child; j; j = j->next) {
        static const char *const handled[] = {
            "vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
            "relative_attention_num_buckets", "relative_attention_max_distance", "layer_norm_epsilon",
            "tie_word_embeddings", "pad_token_id", "eos_token_id", NULL};
        int k, ok = fat5__cfg_known(j->key);
        for (k = 0; !ok && handled[k]; k++) ok = strcmp(j->key, handled[k]) == 0;
        if (!ok) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: unknown field '%s'; fat5 cannot tell whether it changes the model, "
                           "so it refuses to guess (remove the field if it is harmless)", j->key);
            goto done;
        }
    }
    if ((st = fat5__cfg_int(ctx, root, "vocab_size", 0, &c.vocab_size, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "d_model", 0, &c.d_model, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "d_kv", 0, &c.d_kv, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "d_ff", 0, &c.d_ff, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "num_layers", 0, &c.num_layers, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "num_decoder_layers", 1, &dec_layers, &has_dec_layers)) ||
        (st = fat5__cfg_int(ctx, root, "num_heads", 0, &c.num_heads, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "relative_attention_num_buckets", 0, &c.rel_buckets, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "relative_attention_max_distance", 0, &c.rel_max_distance, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "pad_token_id", 1, &c.pad_token_id, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "eos_token_id", 1, &c.eos_token_id, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "decoder_start_token_id", 1, &c.decoder_start_token_id, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "tie_word_embeddings", &c.tie_word_embeddings, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "scale_decoder_outputs", &c.scale_decoder_outputs, &has_scale)) ||
        (st = fat5__cfg_bool(ctx, root, "is_gated_act", &is_gated_act, &has_gated)))
        goto done;
    c.num_decoder_layers = has_dec_layers ? dec_layers : c.num_layers;
    if (!has_scale) c.scale_decoder_outputs = c.tie_word_embeddings;
    if ((j = fat5__json_get(root, "layer_norm_epsilon")) != NULL &&
        (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &c.layer_norm_eps))) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'layer_norm_epsilon' must be a number");
        goto done;
    }
    if ((j = fat5__json_get(root, "dropout_rate")) != NULL &&
        (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &c.dropout_rate))) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'dropout_rate' must be a number");
        goto done;
    }
    if ((j = fat5__json_get(root, "is_encoder_decoder")) != NULL && j->type != FAT5__J_TRUE) {
        st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config.json: is_encoder_decoder must be true for a T5 model");
        goto done;
    }
    if ((j = fat5__json_get(root, "architectures")) != NULL && j->type != FAT5__J_NULL) {
        const fat5__json *a;
        if (j->type != FAT5__J_ARRAY) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'architectures' must be an array");
            goto done;
        }
        for (a = j->child; a; a = a->next) {
            if (a->type != FAT5__J_STRING) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'architectures' must hold strings");
                goto done;
            }
            if (strstr(a->str, "EncoderModel")) {
                st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                               "config.json: architecture %s has no decoder; fat5 runs encoder-decoder models",
                               a->str);
                goto done;
            }
        }
    }
    // feed_forward_proj: "relu", "gelu", "gated-gelu" (tanh GELU), "gated-silu", ...
    if ((j = fat5__json_get(root, "feed_forward_proj")) != NULL) {
        const char *s, *dash;
        if (j->type != FAT5__J_STRING) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'feed_forward_proj' must be a string");
            goto done;
        }
        s = j->str;
        dash = strchr(s, '-');
        if (dash && (strncmp(s, "gated-", 6) != 0 || strchr(dash + 1, '-'))) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT,
                           "config.json: feed_forward_proj '%s' is not 'ACT' or 'gated-ACT'", s);
            goto done;
        }
        c.gated = dash != NULL;
        if (strcmp(s, "gated-gelu") == 0) c.act = FAT5_ACT_GELU_TANH;  // HF maps gated-gelu to gelu_new
        else if (!fat5__act_from_name(dash ? dash + 1 : s, &c.act)) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: feed_forward_proj '%s': unknown activation (relu, gelu, gelu_new, silu)", s);
            goto done;
        }
    }
    if (has_gated && is_gated_act != c.gated) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: is_gated_act = %s contradicts feed_forward_proj",
                       is_gated_act ? "true" : "false");
        goto done;
    }
    if ((j = fat5__json_get(root, "dense_act_fn")) != NULL) {
        fat5_act a;
        if (j->type != FAT5__J_STRING || !fat5__act_from_name(j->str, &a) || a != c.act) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: dense_act_fn '%s' contradicts feed_forward_proj",
                           j->type == FAT5__J_STRING ? j->str : "(not a string)");
            goto done;
        }
    }
    st = fat5_model_config_validate(ctx, &c);
    if (st == FAT5_OK) *out = c;
done:
    fat5__json_free(ctx, doc);
    return st;
}

FAT5_API fat5_status fat5_model_config_to_json(fat5_ctx *ctx, const fat5_model_config *c, char **out,
                                               size_t *out_len) {
    fat5__sb b;
    const char *arch = strcmp(c->model_type, "umt5") == 0 ? "UMT5ForConditionalGeneration"
                       : strcmp(c->model_type, "mt5") == 0 ? "MT5ForConditionalGeneration"
                                                           : "T5ForConditionalGeneration";
    fat5_status st = fat5_model_config_validate(ctx, c);
    if (st) return st;
    if (c->bias_every_layer != (strcmp(c->model_type, "umt5") == 0))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: a bias table in every layer is model_type umt5 and nothing else");
    if (c->scale_decoder_outputs != c->tie_word_embeddings)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: scale_decoder_outputs != tie_word_embeddings cannot be written so that every "
                         "transformers version reads it back the same");
    fat5__sb_init(&b, ctx);
    fat5__sb_printf(&b, "{\n  \"architectures\": [\"%s\"],\n", arch);
    fat5__sb_printf(&b, "  \"d_ff\": %lld,\n  \"d_kv\": %lld,\n  \"d_model\": %lld,\n", (long long)c->d_ff,
                    (long long)c->d_kv, (long long)c->d_model);
    fat5__sb_printf(&b, "  \"decoder_start_token_id\": %lld,\n", (long long)c->decoder_start_token_id);
    fat5__sb_printf(&b, "  \"dense_act_fn\": \"%s\",\n", fat5__act_name(c->act));
    fat5__sb_printf(&b, "  \"dropout_rate\": %.17g,\n  \"eos_token_id\": %lld,\n", c->dropout_rate,
                    (long long)c->eos_token_id);
    fat5__sb_printf(&b, "  \"feed_forward_proj\": \"%s%s\",\n", c->gated ? "gated-" : "",
                    c->gated && c->act == FAT5_ACT_GELU_TANH ? "gelu" : fat5__act_name(c->act));
    fat5__sb_printf(&b, "  \"initializer_factor\": 1.0,\n  \"is_encoder_decoder\": true,\n");
    fat5__sb_printf(&b, "  \"is_gated_act\": %s,\n", c->gated ? "true" : "false");
    fat5__sb_printf(&b, "  \"layer_norm_epsilon\": %.17g,\n", c->layer_norm_eps);
    fat5__sb_printf(&b, "  \"model_type\": ");
    fat5__sb_json_string(&b, c->model_type);
    fat5__sb_printf(&b, ",\n  \"num_decoder_layers\": %lld,\n  \"num_heads\": %lld,\n  \"num_layers\": %lld,\n",
                    (long long)c->num_decoder_layers, (long long)c->num_heads, (long long)c->num_layers);
    fat5__sb_printf(&b, "  \"pad_token_id\": %lld,\n", (long long)c->pad_token_id);
    fat5__sb_printf(&b, "  \"relative_attention_max_distance\": %lld,\n  \"relative_attention_num_buckets\": %lld,\n",
                    (long long)c->rel_max_distance, (long long)c->rel_buckets);
    fat5__sb_printf(&b, "  \"scale_decoder_outputs\": %s,\n", c->scale_decoder_outputs ? "true" : "false");
    fat5__sb_printf(&b, "  \"tie_word_embeddings\": %s,\n", c->tie_word_embeddings ? "true" : "false");
    fat5__sb_printf(&b, "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n", (long long)c->vocab_size);
    if (b.oom) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "config.json: out of memory");
    }
    *out = b.buf;
    *out_len = b.len;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// parameters: one fp32 arena in a fixed order, with the Hugging Face name of every tensor

typedef struct fat5__param {
    char name[96];
    int ndim;
    int64_t shape[2];
    size_t offset;   // in floats, into the parameter arena
    size_t numel;
} fat5__param;

// indices (into the parameter table) of one layer's tensors; -1 where absent
typedef struct fat5__layer {
    int ln_sa, q, k, v, o, rel;       // self-attention: rel = this layer's bias table (maybe shared)
    int ln_ca, cq, ck, cv, co;        // cross-attention (decoder)
    int ln_ff, wi0, wi1, wo;          // wi0 = wi when not gated; wi1 = -1 then
} fat5__layer;

// activations the backward pass needs, per layer; all [tokens, dim] row-major
typedef struct fat5__layer_acts {
    float *h_sa, *rs_sa, *n_sa;       // stream before self-attn, its inverse RMS, normed input
    float *q, *k, *v, *att, *lse;     // att = attention output before o; lse [T, H]
    float *h_ca, *rs_ca, *n_ca;       // decoder: stream before cross-attn ...
    float *cq, *ck, *cv, *catt, *clse;// ck/cv: [Te, I]
    float *h_ff, *rs_ff, *n_ff;       // stream before the FFN
    float *ff_a, *ff_b, *ff_h;        // wi0 x (pre-activation), wi1 x (gated), input of wo
} fat5__layer_acts;

struct fat5_model {
    fat5_ctx *ctx;
    fat5_model_config cfg;
    int lm_head_tied;                 // lm_head is shared.weight
    fat5__param *params;
    int n_params;
    size_t n_floats;
    float *w;                         // [n_floats] parameters
    float *g;                         // [n_floats] gradients
    int shared, enc_final_ln, dec_final_ln, lm_head;
    fat5__layer *enc, *dec;
    // workspace
    int64_t cap_seq, cap_te, cap_td;
    float *ws;
    size_t ws_floats;
    fat5__layer_acts *enc_a, *dec_a;
    float *enc_hf, *enc_rsf, *enc_out;  // encoder final norm: input stream, inverse RMS, output
    float *dec_hf, *dec_rsf, *dec_out;
    float *logits, *tok_lse;            // [Td, V], [Td]
    int32_t *enc_cu, *dec_cu, *enc_tok, *dec_tok, *labels;
    // state of the last forward
    int have_fwd;
    int64_t n_seq, te, td, n_count;
    fat5_loss_config loss;
    struct fat5__gmodel *gm;            // GPU state; NULL on the CPU
};

#ifndef FAT5_NO_CUDA
// GPU model state (wip/gpu_model.inc.h): weights, gradients and activations on the device
static fat5_status fat5__gpu_model_init(fat5_model *m);   // uploads m->w
static void fat5__gpu_model_free(fat5_model *m);
static fat5_status fat5__gpu_param_io(fat5_model *m, const fat5__param *p, float *buf, int what);
static fat5_status fat5__gpu_zero_grad(fat5_model *m);
static fat5_status fat5__gpu_pull_params(fat5_model *m);  // device master weights -> m->w
#endif

FAT5_API const fat5_model_config *fat5_model_get_config(const fat5_model *m) { return &m->cfg; }

static int fat5__add_param(fat5_model *m, int cap, const char *name, int64_t d0, int64_t d1) {
    fat5__param *p;
    FAT5_ASSERT(m->n_params < cap);
    (void)cap;
    p = &m->params[m->n_params];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    p->offset = m->n_floats;
    m->n_floats += p->numel;
    return m->n_params++;
}

// Builds the parameter table for cfg (no allocation of weights). Sizes were bounded by validate:
// every dimension < 2^24 and layers <= 1024, so the products below cannot overflow 64 bits.
static fat5_status fat5__build_params(fat5_model *m) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size;
    int cap = (int)(4 + (c->num_layers + c->num_decoder_layers) * 16), l;
    char nm[96];
    m->params = FAT5__CAST(fat5__param *, fat5__calloc(m->ctx, (size_t)cap, sizeof(fat5__param)));
    m->enc = FAT5__CAST(fat5__layer *, fat5__calloc(m->ctx, (size_t)c->num_layers, sizeof(fat5__layer)));
    m->dec = FAT5__CAST(fat5__layer *, fat5__calloc(m->ctx, (size_t)c->num_decoder_layers, sizeof(fat5__layer)));
    if (!m->params || !m->enc || !m->dec) return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->shared = fat5__add_param(m, cap, "shared.weight", V, D);
    for (l = 0; l < 2; l++) {
        const char *stack = l == 0 ? "encoder" : "decoder";
        int64_t nl = l == 0 ? c->num_layers : c->num_decoder_layers, b;
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
            if (b == 0 || c->bias_every_layer)
                FAT5__P(rel, "layer.0.SelfAttention.relative_attention_bias.weight", c->rel_buckets, c->num_heads);
            else
                y->rel = L[0].rel;
            FAT5__P(ln_sa, "layer.0.layer_norm.weight", D, 0);
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
    m->lm_head = m->lm_head_tied ? m->shared : fat5__add_param(m, cap, "lm_head.weight", V, D);
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
    if ((st = fat5__build_params(m))) {
        fat5_model_destroy(m);
        return st;
    }
    m->w = FAT5__CAST(float *, fat5__calloc(ctx, m->n_floats, sizeof(float)));
    m->g = FAT5__CAST(float *, fat5__calloc(ctx, m->n_floats, sizeof(float)));
    if (!m->w || !m->g) {
        fat5_model_destroy(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: cannot allocate %zu parameters (%.1f MiB)",
                         m->n_floats, (double)m->n_floats * 4.0 / 1048576.0);
    }
    *out = m;
    return FAT5_OK;
}

static void fat5__ws_free(fat5_model *m) {
    fat5_ctx *ctx = m->ctx;
    fat5__free(ctx, m->ws);
    fat5__free(ctx, m->enc_a);
    fat5__free(ctx, m->dec_a);
    fat5__free(ctx, m->enc_cu);
    fat5__free(ctx, m->dec_cu);
    fat5__free(ctx, m->enc_tok);
    fat5__free(ctx, m->dec_tok);
    fat5__free(ctx, m->labels);
    m->ws = NULL;
    m->enc_a = m->dec_a = NULL;
    m->enc_cu = m->dec_cu = m->enc_tok = m->dec_tok = m->labels = NULL;
    m->cap_seq = m->cap_te = m->cap_td = 0;
    m->have_fwd = 0;
}

FAT5_API void fat5_model_destroy(fat5_model *m) {
    fat5_ctx *ctx;
    if (!m) return;
    ctx = m->ctx;
    fat5__ws_free(m);
#ifndef FAT5_NO_CUDA
    fat5__gpu_model_free(m);
#endif
    fat5__free(ctx, m->params);
    fat5__free(ctx, m->enc);
    fat5__free(ctx, m->dec);
    fat5__free(ctx, m->w);
    fat5__free(ctx, m->g);
    fat5__free(ctx, m);
}

// Puts the weights where the context computes: a no-op on the CPU, an upload on the GPU.
static fat5_status fat5__model_place(fat5_model *m) {
#ifndef FAT5_NO_CUDA
    if (m->ctx->cfg.device == FAT5_DEVICE_GPU) return fat5__gpu_model_init(m);
#endif
    (void)m;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_create(fat5_ctx *ctx, const fat5_model_config *cfg, uint64_t seed,
                                       fat5_model **out) {
    fat5_model *m;
    fat5_rng r = fat5_rng_init(seed);
    fat5_status st;
    int i;
    double D = (double)cfg->d_model;
    if (!out || !cfg) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_create: NULL argument");
    if ((st = fat5__model_alloc(ctx, cfg, cfg->tie_word_embeddings, &m))) return st;
    // Hugging Face's T5 initialisation (factor 1), with lm_head at std d_model^-0.5
    for (i = 0; i < m->n_params; i++) {
        const fat5__param *p = &m->params[i];
        const char *n = p->name;
        float *w = m->w + p->offset;
        double std;
        size_t j;
        if (strstr(n, "layer_norm")) {
            for (j = 0; j < p->numel; j++) w[j] = 1.0f;
            continue;
        }
        if (strcmp(n, "shared.weight") == 0) std = 1.0;
        else if (strstr(n, ".q.weight")) std = 1.0 / sqrt(D * (double)cfg->d_kv);
        else if (strstr(n, ".o.weight")) std = 1.0 / sqrt((double)(cfg->num_heads * cfg->d_kv));
        else if (strstr(n, ".wo.weight")) std = 1.0 / sqrt((double)cfg->d_ff);
        else std = 1.0 / sqrt(D);  // k, v, wi*, relative_attention_bias, lm_head
        for (j = 0; j < p->numel; j++) w[j] = (float)(std * fat5_rng_normal(&r));
    }
    if ((st = fat5__model_place(m))) {
        fat5_model_destroy(m);
        return st;
    }
    *out = m;
    return FAT5_OK;
}

FAT5_API int64_t fat5_model_num_params(const fat5_model *m) { return (int64_t)m->n_floats; }
FAT5_API int fat5_model_num_tensors(const fat5_model *m) { return m->n_params; }

FAT5_API fat5_status fat5_model_tensor_info(const fat5_model *m, int index, fat5_tensor_info *out) {
    const fat5__param *p;
    if (index < 0 || index >= m->n_params)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "tensor index %d out of range [0, %d)", index, m->n_params);
    p = &m->params[index];
    out->name = p->name;
    out->ndim = p->ndim;
    out->shape[0] = p->shape[0];
    out->shape[1] = p->shape[1];
    out->numel = (int64_t)p->numel;
    return FAT5_OK;
}

FAT5_API int fat5_model_find_tensor(const fat5_model *m, const char *name) {
    int i;
    for (i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].name, name) == 0) return i;
    return -1;
}

static fat5_status fat5__param_io(fat5_model *m, const char *name, float *buf, int64_t n, int what) {
    int i = name ? fat5_model_find_tensor(m, name) : -1;
    const fat5__param *p;
    float *base;
    if (i < 0) return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "no parameter named '%s'", name ? name : "(null)");
    p = &m->params[i];
    if (n != (int64_t)p->numel)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "parameter '%s' has %zu elements, buffer has %lld", name,
                         p->numel, (long long)n);
    if (what == 1) memcpy(m->w + p->offset, buf, p->numel * sizeof(float));  // the host copy follows too
#ifndef FAT5_NO_CUDA
    if (m->gm) return fat5__gpu_param_io(m, p, buf, what);
#endif
    base = (what == 2 ? m->g : m->w) + p->offset;
    if (what == 1) return FAT5_OK;
    else memcpy(buf, base, p->numel * sizeof(float));
    return FAT5_OK;
}
FAT5_API fat5_status fat5_model_get_param(fat5_model *m, const char *name, float *dst, int64_t n) {
    return fat5__param_io(m, name, dst, n, 0);
}
FAT5_API fat5_status fat5_model_set_param(fat5_model *m, const char *name, const float *src, int64_t n) {
    return fat5__param_io(m, name, FAT5__CAST(float *, (void *)(uintptr_t)src), n, 1);
}
FAT5_API fat5_status fat5_model_get_grad(fat5_model *m, const char *name, float *dst, int64_t n) {
    return fat5__param_io(m, name, dst, n, 2);
}
FAT5_API fat5_status fat5_model_zero_grad(fat5_model *m) {
#ifndef FAT5_NO_CUDA
    if (m->gm) return fat5__gpu_zero_grad(m);
#endif
    memset(m->g, 0, m->n_floats * sizeof(float));
    return FAT5_OK;
}


