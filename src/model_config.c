// =============================================================================================
// ==[4.1] model: configuration ==

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
    c.attention_dropout_rate = -1;
    memcpy(c.model_type, "t5", 3);
    c.pos_kind = FAT5_POS_T5;
    c.alibi_asymmetric = 0;
    c.rotary_interleaved = 0;
    c.fire_mlp_width = 32;
    c.rotary_fraction = 1.0;
    c.rotary_base = 10000.0;
    c.rotary_scale_base = 0.0;
    c.enc_attention = FAT5_ENC_ATTN_FULL;
    c.local_radius = 127;
    c.global_block_size = 16;
    c.head = FAT5_HEAD_LM;
    c.num_labels = 2;
    c.problem_type = FAT5_PROBLEM_AUTO;
    c.classifier_dropout = 0.0;
    c.pooling = FAT5_POOL_EOS;
    return c;
}

// position_encoding_type values, spelled as FAT5 spells them (case-sensitive)
static const char *fat5__pos_name(fat5_pos_kind k) {
    switch (k) {
    case FAT5_POS_T5: return "t5";
    case FAT5_POS_NONE: return "none";
    case FAT5_POS_ALIBI: return "ALiBi";
    case FAT5_POS_ROPE: return "RoPE";
    case FAT5_POS_FIRE: return "FIRE";
    }
    return "?";
}

// LongT5's encoder attention: a model_type longt5 field, with a window and block of at least 1
static fat5_status fat5__validate_enc_attention(fat5_ctx *ctx, const fat5_model_config *c) {
    int longt5 = strcmp(c->model_type, "longt5") == 0;
    if ((int)c->enc_attention < (int)FAT5_ENC_ATTN_FULL || (int)c->enc_attention > (int)FAT5_ENC_ATTN_TGLOBAL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: encoder_attention_type %d is not a fat5_enc_attention",
                         (int)c->enc_attention);
    if (longt5 != (c->enc_attention != FAT5_ENC_ATTN_FULL))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: %s", longt5 ? "model_type longt5 needs "
                         "encoder_attention_type local or transient-global" : "local and transient-global encoder "
                         "attention are model_type longt5");
    if (c->local_radius < 1 || c->local_radius > FAT5__ATTN_MAX_RADIUS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: local_radius = %lld, expected 1..%d (a window of at "
                         "least one neighbour)", (long long)c->local_radius, FAT5__ATTN_MAX_RADIUS);
    if (c->global_block_size < 1 || c->global_block_size > ((int64_t)1 << 30))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: global_block_size = %lld, expected 1..%lld",
                         (long long)c->global_block_size, (long long)1 << 30);
    if (longt5 && (c->bias_every_layer || c->pos_kind != FAT5_POS_T5))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type longt5 has T5 buckets in block 0 only");
    return FAT5_OK;
}

// The position-encoding fields. Fields of encodings other than cfg's own are checked for range
// only (their defaults always pass), so a file may carry FAT5's defaults whatever it selects.
static fat5_status fat5__validate_pos(fat5_ctx *ctx, const fat5_model_config *c) {
    if ((int)c->pos_kind < (int)FAT5_POS_T5 || (int)c->pos_kind > (int)FAT5_POS_FIRE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: position_encoding_type %d is not a fat5_pos_kind",
                         (int)c->pos_kind);
    if (!(c->rotary_fraction > 0 && c->rotary_fraction <= 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: rotary_emb_fraction = %g, expected 0 < fraction <= 1",
                         c->rotary_fraction);
    if (!(c->rotary_base > 0 && c->rotary_base < HUGE_VAL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: rotary_base = %g, expected a finite value above 0",
                         c->rotary_base);
    if (!(c->rotary_scale_base >= 0 && c->rotary_scale_base < HUGE_VAL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "config: rotary_scale_base = %g, expected a finite value above 0 (or 0/null: no xPos)",
                         c->rotary_scale_base);
    if (c->fire_mlp_width < 1 || c->fire_mlp_width > (1 << 20))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: fire_mlp_width = %d, expected 1..%d", c->fire_mlp_width,
                         1 << 20);
    if (c->pos_kind == FAT5_POS_ROPE) {
        // FAT5 rotates int(d_kv * fraction) dims in pairs
        int64_t rd = (int64_t)((double)c->d_kv * c->rotary_fraction);
        if (rd < 2 || rd % 2)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "config: rotary_emb_fraction = %g gives int(d_kv %lld * fraction) = %lld rotary dims; "
                             "RoPE needs an even number of at least 2", c->rotary_fraction, (long long)c->d_kv,
                             (long long)rd);
    }
    if (c->pos_kind == FAT5_POS_ALIBI && c->alibi_asymmetric && c->num_heads % 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "config: alibi_mode asymetric splits the heads in two halves; num_heads = %lld is odd",
                         (long long)c->num_heads);
    return FAT5_OK;
}

#define FAT5__MAX_DIM ((int64_t)1 << 24)    // no single dimension beyond 16M
#define FAT5__MAX_LAYERS 1024
#define FAT5__MAX_LABELS ((int64_t)1 << 24)  // num_labels below 16M

// The heads' architecture names (config.json's architectures[0]) by model_type (t5, mt5, umt5) and
// head (fat5_head order). Fat5EncoderForSequenceClassification is fat5's own name, the same for
// the three model types; flash_t5 and longt5 models have the LM head only.
static const char *const fat5__cfg_arch_names[3][6] = {
    {"T5ForConditionalGeneration", "T5EncoderModel", "T5ForSequenceClassification", "T5ForTokenClassification",
     "T5ForQuestionAnswering", "Fat5EncoderForSequenceClassification"},
    {"MT5ForConditionalGeneration", "MT5EncoderModel", "MT5ForSequenceClassification", "MT5ForTokenClassification",
     "MT5ForQuestionAnswering", "Fat5EncoderForSequenceClassification"},
    {"UMT5ForConditionalGeneration", "UMT5EncoderModel", "UMT5ForSequenceClassification",
     "UMT5ForTokenClassification", "UMT5ForQuestionAnswering", "Fat5EncoderForSequenceClassification"}};

// Row of fat5__cfg_arch_names for a model_type: 0 t5, 1 mt5, 2 umt5; -1 flash_t5, longt5 (LM only)
static int fat5__cfg_arch_row(const char *model_type) {
    if (strcmp(model_type, "t5") == 0) return 0;
    if (strcmp(model_type, "mt5") == 0) return 1;
    if (strcmp(model_type, "umt5") == 0) return 2;
    return -1;
}

// The architecture name of a config (e.g. "MT5ForTokenClassification"); NULL for a head its
// model_type does not have (flash_t5 and longt5 have only their ForConditionalGeneration) or a head
// out of range.
static const char *fat5__cfg_arch_name(const fat5_model_config *c) {
    int row = fat5__cfg_arch_row(c->model_type);
    if ((int)c->head < (int)FAT5_HEAD_LM || (int)c->head > (int)FAT5_HEAD_ENC_SEQ_CLS) return NULL;
    if (row >= 0) return fat5__cfg_arch_names[row][c->head];
    if (c->head != FAT5_HEAD_LM) return NULL;
    return strcmp(c->model_type, "flash_t5") == 0 ? "FlashT5ForConditionalGeneration"
                                                  : "LongT5ForConditionalGeneration";
}

// The heads without a decoder: T5EncoderModel, T5ForTokenClassification and fat5's encoder-only
// sequence classifier
static int fat5__head_encoder_only(fat5_head h) {
    return h == FAT5_HEAD_ENCODER || h == FAT5_HEAD_TOKEN_CLS || h == FAT5_HEAD_ENC_SEQ_CLS;
}

// The heads with labels (num_labels outputs per sequence or token; QA's two)
static int fat5__head_has_labels(fat5_head h) {
    return h == FAT5_HEAD_SEQ_CLS || h == FAT5_HEAD_TOKEN_CLS || h == FAT5_HEAD_QA || h == FAT5_HEAD_ENC_SEQ_CLS;
}

// config.json's problem_type strings (FAT5_PROBLEM_AUTO is null)
static const char *fat5__problem_name(fat5_problem p) {
    switch (p) {
    case FAT5_PROBLEM_AUTO: return "null";
    case FAT5_PROBLEM_REGRESSION: return "regression";
    case FAT5_PROBLEM_SINGLE_LABEL: return "single_label_classification";
    case FAT5_PROBLEM_MULTI_LABEL: return "multi_label_classification";
    }
    return "?";
}

// classifier_pooling's strings (fat5's key of Fat5EncoderForSequenceClassification)
static const char *fat5__pool_name(fat5_pool p) {
    switch (p) {
    case FAT5_POOL_NONE: return "none";
    case FAT5_POOL_MEAN: return "mean";
    case FAT5_POOL_EOS: return "eos";
    case FAT5_POOL_FIRST: return "first";
    }
    return "?";
}

// The head fields: the head exists for the model_type; num_labels in [1, 2^24) for the heads with
// labels (exactly 2 for QA: a start and an end logit), [0, 2^24) otherwise; problem_type (other
// than AUTO) only for the sequence classifiers, where every loss works with any num_labels >= 1;
// pooling other than EOS only for ENC_SEQ_CLS (and never NONE there); classifier_dropout in
// [0, 1); a decoder layer at least for the heads with a decoder.
static fat5_status fat5__validate_head(fat5_ctx *ctx, const fat5_model_config *c) {
    const char *arch;
    int seq_cls = c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_ENC_SEQ_CLS;
    if ((int)c->head < (int)FAT5_HEAD_LM || (int)c->head > (int)FAT5_HEAD_ENC_SEQ_CLS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: head %d is not a fat5_head", (int)c->head);
    if (!(arch = fat5__cfg_arch_name(c)))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type %s has the LM head only (%s), not head %d",
                         c->model_type, strcmp(c->model_type, "flash_t5") == 0 ? "FlashT5ForConditionalGeneration"
                                                                               : "LongT5ForConditionalGeneration",
                         (int)c->head);
    if (c->num_labels < (fat5__head_has_labels(c->head) ? 1 : 0) || c->num_labels >= FAT5__MAX_LABELS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: num_labels = %lld, expected %d..%lld (%s)",
                         (long long)c->num_labels, fat5__head_has_labels(c->head) ? 1 : 0,
                         (long long)(FAT5__MAX_LABELS - 1), arch);
    if (c->head == FAT5_HEAD_QA && c->num_labels != 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: num_labels = %lld, expected 2 for %s (a start and an "
                         "end logit per token)", (long long)c->num_labels, arch);
    if ((int)c->problem_type < (int)FAT5_PROBLEM_AUTO || (int)c->problem_type > (int)FAT5_PROBLEM_MULTI_LABEL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: problem_type %d is not a fat5_problem",
                         (int)c->problem_type);
    if (c->problem_type != FAT5_PROBLEM_AUTO && !seq_cls)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: problem_type %s is a sequence classifier's loss; %s has "
                         "none (null)", fat5__problem_name(c->problem_type), arch);
    if ((int)c->pooling < (int)FAT5_POOL_NONE || (int)c->pooling > (int)FAT5_POOL_FIRST)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: pooling %d is not a fat5_pool", (int)c->pooling);
    if (c->head == FAT5_HEAD_ENC_SEQ_CLS && c->pooling == FAT5_POOL_NONE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: classifier_pooling none: %s pools each sequence "
                         "(eos, mean or first)", arch);
    if (c->head != FAT5_HEAD_ENC_SEQ_CLS && c->pooling != FAT5_POOL_EOS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: classifier_pooling %s is "
                         "Fat5EncoderForSequenceClassification's; %s has none", fat5__pool_name(c->pooling), arch);
    if (!(c->classifier_dropout >= 0 && c->classifier_dropout < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: classifier_dropout = %g, expected 0 <= rate < 1",
                         c->classifier_dropout);
    if (!fat5__head_encoder_only(c->head) && c->num_decoder_layers < 1)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: num_decoder_layers = %lld, expected 1..%d (%s has a "
                         "decoder)", (long long)c->num_decoder_layers, FAT5__MAX_LAYERS, arch);
    return FAT5_OK;
}

static const char *fat5__act_name(fat5_act a);

FAT5_API fat5_status fat5_model_config_validate(fat5_ctx *ctx, const fat5_model_config *c) {
    struct { const char *name; int64_t v, lo, hi; } f[9];
    int i;
    f[0].name = "vocab_size"; f[0].v = c->vocab_size; f[0].lo = 1; f[0].hi = INT32_MAX;
    f[1].name = "d_model"; f[1].v = c->d_model; f[1].lo = 1; f[1].hi = FAT5__MAX_DIM;
    f[2].name = "d_kv"; f[2].v = c->d_kv; f[2].lo = 1; f[2].hi = FAT5__MAX_DIM;
    f[3].name = "d_ff"; f[3].v = c->d_ff; f[3].lo = 1; f[3].hi = FAT5__MAX_DIM;
    f[4].name = "num_layers"; f[4].v = c->num_layers; f[4].lo = 1; f[4].hi = FAT5__MAX_LAYERS;
    // num_decoder_layers 0: the encoder-only heads (fat5__validate_head asks a decoder of the others)
    f[5].name = "num_decoder_layers"; f[5].v = c->num_decoder_layers; f[5].lo = 0; f[5].hi = FAT5__MAX_LAYERS;
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
    // the norm runs in fp32: an epsilon that rounds to 0 there would divide by zero on a zero row
    if (!(c->layer_norm_eps > 0 && c->layer_norm_eps < HUGE_VAL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: layer_norm_epsilon = %g, expected a finite value "
                         "above 0", c->layer_norm_eps);
    if (c->layer_norm_eps >= 1)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: layer_norm_epsilon = %g, expected 0 < eps < 1",
                         c->layer_norm_eps);
    if ((float)c->layer_norm_eps == 0.0f)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: layer_norm_epsilon = %g rounds to 0 in fp32 "
                         "(the smallest usable value is about 1.4e-45)", c->layer_norm_eps);
    if (!(c->dropout_rate >= 0 && c->dropout_rate < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: dropout_rate = %g, expected 0 <= rate < 1",
                         c->dropout_rate);
    if (!(c->attention_dropout_rate < 1) || isinf(c->attention_dropout_rate))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: attention_dropout_rate = %g, expected 0 <= rate < 1 "
                         "(or negative: dropout_rate)", c->attention_dropout_rate);
    if (c->act < FAT5_ACT_RELU || c->act > FAT5_ACT_SILU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: unknown activation %d", (int)c->act);
    {
        fat5_status st = fat5__validate_head(ctx, c);
        if (!st) st = fat5__validate_pos(ctx, c);
        if (!st) st = fat5__validate_enc_attention(ctx, c);
        if (st) return st;
    }
    if (strcmp(c->model_type, "flash_t5") == 0) {
        // what FlashT5ForConditionalGeneration can express, with the parameter names fat5 maps
        if (c->tie_word_embeddings || c->scale_decoder_outputs)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 needs tie_word_embeddings false "
                             "(FlashT5ForConditionalGeneration asserts untied embeddings) and no decoder-output scaling");
        if (c->bias_every_layer)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 has one bias table per stack, "
                             "not one per layer");
        if (!c->gated)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 with use_glu_mlp false is not "
                             "supported (the names of FlashT5's non-gated MLP parameters are not mapped)");
        if (c->act != FAT5_ACT_GELU_TANH && c->act != FAT5_ACT_RELU)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 has a tanh-GELU or a ReLU MLP "
                             "(use_gelu_act), not %s", fat5__act_name(c->act));
    }
    {
        const char *name[3] = {"pad_token_id", "eos_token_id", "decoder_start_token_id"};
        int64_t id[3];
        id[0] = c->pad_token_id;
        id[1] = c->eos_token_id;
        id[2] = c->decoder_start_token_id;
        for (i = 0; i < 3; i++) {
            if (id[i] < 0)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: %s = %lld is negative; token ids are in "
                                 "[0, vocab_size %lld)", name[i], (long long)id[i], (long long)c->vocab_size);
            if (id[i] >= c->vocab_size)
                return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: %s = %lld must be in [0, vocab_size %lld)",
                                 name[i], (long long)id[i], (long long)c->vocab_size);
        }
    }
    return FAT5_OK;
}

// Keys of Hugging Face configs that never change the T5 forward pass (generation settings,
// bookkeeping); anything neither here nor handled below is refused.
static const char *const fat5__cfg_ignored[] = {
    "transformers_version", "torch_dtype", "dtype", "use_cache", "n_positions", "output_past",
    "task_specific_params", "gradient_checkpointing", "tokenizer_class",
    "bos_token_id", "sep_token_id", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "pruned_heads",
    "chunk_size_feed_forward", "is_decoder", "add_cross_attention", "tie_encoder_decoder",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "finetuning_task", "prefix",
    "cross_attention_hidden_size", "initializer_factor", "dropout_rate", "tf_legacy_loss",
    "decoder_start_token_id", "output_router_logits", "architectures", "is_encoder_decoder",
    "model_type", "feed_forward_proj", "dense_act_fn", "is_gated_act", "scale_decoder_outputs",
    NULL};

// Keys of FAT5's FlashT5Config that never change the forward pass of a model fat5 accepts: loss
// and training settings, kernel choices, dropout and bookkeeping (model_type flash_t5 only).
// attention_scale, use_glu_mlp, use_gelu_act and use_masking are read, not ignored.
static const char *const fat5__cfg_flash_ignored[] = {
    "z_loss", "label_smoothing", "max_sequence_length", "attention_type",
    "use_triton_layernorm", "use_triton_crossentropy", "crossentropy_inplace_backward",
    "use_full_bias_size", "auto_map", NULL};

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

// number field: absent keeps the default; null gives null_value where allow_null
static fat5_status fat5__cfg_double(fat5_ctx *ctx, const fat5__json *root, const char *key, int allow_null,
                                    double null_value, double *v) {
    const fat5__json *j = fat5__json_get(root, key);
    if (!j) return FAT5_OK;
    if (allow_null && j->type == FAT5__J_NULL) {
        *v = null_value;
        return FAT5_OK;
    }
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, v))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: '%s' must be a number", key);
    return FAT5_OK;
}

// FAT5's position-encoding fields. FAT5 reads any position_encoding_type it does not know as "no
// encoding"; here "none" says so explicitly and any other unknown name is an error.
static fat5_status fat5__cfg_pos(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j;
    char val[128];
    int64_t width = c->fire_mlp_width, randomized = 0;
    fat5_status st;
    if ((j = fat5__json_get(root, "position_encoding_type")) != NULL) {
        int k;
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'position_encoding_type' must be a string");
        for (k = FAT5_POS_T5; k <= FAT5_POS_FIRE; k++)
            if (strcmp(j->str, fat5__pos_name((fat5_pos_kind)k)) == 0) break;
        if (k > FAT5_POS_FIRE)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                             "config.json: position_encoding_type '%s' is unknown; expected \"t5\", \"RoPE\", "
                             "\"ALiBi\", \"FIRE\" or \"none\" (case-sensitive)", fat5__msg_name(val, sizeof val, j->str));
        c->pos_kind = (fat5_pos_kind)k;
    }
    if ((j = fat5__json_get(root, "alibi_mode")) != NULL) {
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'alibi_mode' must be a string");
        if (strcmp(j->str, "symetric") == 0 || strcmp(j->str, "symmetric") == 0) c->alibi_asymmetric = 0;
        else if (strcmp(j->str, "asymetric") == 0 || strcmp(j->str, "asymmetric") == 0) c->alibi_asymmetric = 1;
        else
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                             "config.json: alibi_mode '%s' is unknown; expected \"symetric\" or \"asymetric\" "
                             "(or \"symmetric\", \"asymmetric\")", fat5__msg_name(val, sizeof val, j->str));
    }
    if ((st = fat5__cfg_double(ctx, root, "rotary_emb_fraction", 0, 0, &c->rotary_fraction)) ||
        (st = fat5__cfg_double(ctx, root, "rotary_base", 0, 0, &c->rotary_base)) ||
        (st = fat5__cfg_double(ctx, root, "rotary_scale_base", 1, 0.0, &c->rotary_scale_base)) ||
        (st = fat5__cfg_bool(ctx, root, "rotary_interleaved", &c->rotary_interleaved, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "fire_mlp_width", 0, &width, NULL)))
        return st;
    // a zero scale base would divide positions by zero; FAT5 writes None for "off"
    if (fat5__json_get(root, "rotary_scale_base") && fat5__json_get(root, "rotary_scale_base")->type != FAT5__J_NULL &&
        !(c->rotary_scale_base > 0))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: rotary_scale_base = %g, expected a value above 0 or null "
                         "(no xPos)", c->rotary_scale_base);
    if (width < 1 || width > (1 << 20))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: fire_mlp_width = %lld, expected 1..%d", (long long)width,
                         1 << 20);
    c->fire_mlp_width = (int)width;
    {
        int r = 0, present = 0;
        if ((st = fat5__cfg_bool(ctx, root, "use_randomized_position_encoding", &r, &present))) return st;
        randomized = present && r;
    }
    if (randomized)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: use_randomized_position_encoding true (random positions at every forward) "
                         "is not supported");
    return FAT5_OK;
}

// The fields of FAT5's FlashT5Config that shape the model (model_type flash_t5). Rules where FAT5
// itself misbehaves:
//   - attention_scale must be 1.0 (T5's unscaled attention, what every released FAT5 checkpoint
//     sets). FlashT5Config's default None means 1/sqrt(num_heads), so an absent or null
//     attention_scale is refused rather than read as either scale.
//   - pad_token_id -100 (FlashT5Config's default) is read as 0, T5's pad id. FAT5 embeds the pad id
//     only where shift-right replaces a -100 label, which crashes with -100 itself; wherever FAT5
//     runs, the pad id therefore never reaches its embedding and 0 gives the same outputs. A saved
//     config.json then says 0. Other negative ids stay errors.
//   - tie_word_embeddings must be present and false (FAT5 asserts untied embeddings; T5Config's
//     default is true).
//   - use_masking true (FAT5 masks query rows of padding, not key columns) is refused.
static fat5_status fat5__cfg_flash(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j;
    int glu = 0, gelu = 1, masking = 0;
    double scale = 0;
    fat5_status st;
    if ((st = fat5__cfg_bool(ctx, root, "use_glu_mlp", &glu, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "use_gelu_act", &gelu, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "use_masking", &masking, NULL)))
        return st;
    c->gated = glu;
    c->act = gelu ? FAT5_ACT_GELU_TANH : FAT5_ACT_RELU;
    j = fat5__json_get(root, "attention_scale");
    if (!j || j->type == FAT5__J_NULL)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: flash_t5 without attention_scale: FlashT5Config's default (None) scales "
                         "attention by 1/sqrt(num_heads); fat5 runs T5's unscaled attention only (set "
                         "\"attention_scale\": 1.0, as released FAT5 checkpoints do)");
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &scale))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'attention_scale' must be a number or null");
    if (scale != 1.0)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: attention_scale = %g is not supported; fat5 runs T5's unscaled attention "
                         "(attention_scale 1.0)", scale);
    if (masking)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: use_masking true (FAT5's padding mask over query rows) is not supported");
    j = fat5__json_get(root, "tie_word_embeddings");
    if (!j || j->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: flash_t5 needs \"tie_word_embeddings\": false (FlashT5ForConditionalGeneration "
                         "asserts untied embeddings; the T5Config default is true)");
    if (c->pad_token_id == -100) c->pad_token_id = 0;
    return FAT5_OK;
}

// LongT5's encoder fields (model_type longt5): encoder_attention_type "local" or
// "transient-global", local_radius, global_block_size
static fat5_status fat5__cfg_long(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j = fat5__json_get(root, "encoder_attention_type");
    char val[128];
    fat5_status st;
    if (j) {
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'encoder_attention_type' must be a string");
        if (strcmp(j->str, "local") == 0) c->enc_attention = FAT5_ENC_ATTN_LOCAL;
        else if (strcmp(j->str, "transient-global") == 0) c->enc_attention = FAT5_ENC_ATTN_TGLOBAL;
        else
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                             "config.json: encoder_attention_type '%s' is unknown; expected \"local\" or "
                             "\"transient-global\"", fat5__msg_name(val, sizeof val, j->str));
    }
    if ((st = fat5__cfg_int(ctx, root, "local_radius", 0, &c->local_radius, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "global_block_size", 0, &c->global_block_size, NULL)))
        return st;
    return FAT5_OK;
}

// A label name and its id, sorted by name to find a name given twice
typedef struct fat5__cfg_label {
    const char *name;
    int64_t id;
} fat5__cfg_label;

static int fat5__cfg_label_cmp(const void *a, const void *b) {
    const fat5__cfg_label *x = (const fat5__cfg_label *)a, *y = (const fat5__cfg_label *)b;
    int r = strcmp(x->name, y->name);
    return r ? r : (x->id > y->id) - (x->id < y->id);
}

// names[0..n) (none NULL) given to one label each; else an error naming the name and both labels
// (label2id, name -> id, could not be inverted). what: where the names come from, for the message.
static fat5_status fat5__cfg_labels_distinct(fat5_ctx *ctx, const char *const *names, int64_t n, const char *what) {
    fat5__cfg_label *l;
    char val[128];
    int64_t i;
    fat5_status st = FAT5_OK;
    if (n < 2) return FAT5_OK;
    l = FAT5__CAST(fat5__cfg_label *, fat5__calloc(ctx, (size_t)n, sizeof *l));
    if (!l) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld label names", what, (long long)n);
    for (i = 0; i < n; i++) {
        l[i].name = names[i];
        l[i].id = i;
    }
    qsort(l, (size_t)n, sizeof *l, fat5__cfg_label_cmp);
    for (i = 1; i < n && !st; i++)
        if (strcmp(l[i - 1].name, l[i].name) == 0)
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: the name '%s' is given to labels %lld and %lld (label2id could "
                           "not be inverted)", what, fat5__msg_name(val, sizeof val, l[i].name),
                           (long long)l[i - 1].id, (long long)l[i].id);
    fat5__free(ctx, l);
    return st;
}

// id2label's key of label i: "0", "1", ... (decimal, no sign, no leading zero); -1 for anything else
static int64_t fat5__cfg_label_key(const char *key) {
    int64_t v = 0;
    if (!key[0] || (key[0] == '0' && key[1])) return -1;
    for (; *key; key++) {
        if (*key < '0' || *key > '9' || v >= FAT5__MAX_LABELS) return -1;
        v = v * 10 + (*key - '0');
    }
    return v;
}

// The label keys of a parsed config.json object, checked together: num_labels (an integer, or
// absent / null), id2label (an object "0".."n-1" -> name string, or absent / null) and label2id
// (an object name -> id agreeing with id2label entry by entry, or absent / null; with id2label
// absent it must map "LABEL_i" to i, Hugging Face's default names). *n gets the number of labels:
// id2label's size, else num_labels, else 2 (Hugging Face's default). by_id, when not NULL, gets an
// array of *n pointers (fat5_free) to id2label's names inside the parsed document, or NULL when
// the config has no id2label. Errors (FAT5_ERR_FORMAT) name the key, label or name: a num_labels
// that contradicts id2label (transformers would drop the names and warn), a key that is not a label
// index, a name that is not a string or holds a NUL, a name given to two labels, a label2id entry
// that contradicts id2label or is missing.
static fat5_status fat5__cfg_labels(fat5_ctx *ctx, const fat5__json *root, int64_t *n, const char ***by_id) {
    const fat5__json *jn = fat5__json_get(root, "num_labels"), *jl = fat5__json_get(root, "id2label");
    const fat5__json *jr = fat5__json_get(root, "label2id"), *e;
    const char **names = NULL;
    unsigned char *seen = NULL;
    char val[128], def[32];
    int64_t num = -1, count = 2, i;
    fat5_status st = FAT5_OK;
    if (by_id) *by_id = NULL;
    if (jn && jn->type != FAT5__J_NULL) {
        if (!fat5__json_as_i64(jn, &num) || num < 0 || num >= FAT5__MAX_LABELS)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'num_labels' must be an integer in 0..%lld",
                             (long long)(FAT5__MAX_LABELS - 1));
        count = num;
    }
    if (jl && jl->type == FAT5__J_NULL) jl = NULL;
    if (jr && jr->type == FAT5__J_NULL) jr = NULL;
    if (jl) {
        if (jl->type != FAT5__J_OBJECT)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'id2label' must be an object (\"0\": name, ...)");
        if ((int64_t)jl->n >= FAT5__MAX_LABELS)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: id2label has %lld labels, expected at most %lld",
                             (long long)jl->n, (long long)(FAT5__MAX_LABELS - 1));
        if (num >= 0 && num != (int64_t)jl->n)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: num_labels = %lld contradicts id2label's %lld labels",
                             (long long)num, (long long)jl->n);
        count = (int64_t)jl->n;
    }
    if (jl || jr) {
        names = FAT5__CAST(const char **, fat5__calloc(ctx, (size_t)(count ? count : 1), sizeof *names));
        seen = FAT5__CAST(unsigned char *, fat5__calloc(ctx, (size_t)(count ? count : 1), 1));
        if (!names || !seen) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "config.json: out of memory for %lld labels", (long long)count);
            goto done;
        }
    }
    if (jl) {
        for (e = jl->child; e; e = e->next) {
            int64_t id = fat5__cfg_label_key(e->key);
            if (id < 0 || id >= count || names[id]) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: id2label key '%s' is not a label index 0..%lld "
                               "given once", fat5__msg_name(val, sizeof val, e->key), (long long)(count - 1));
                goto done;
            }
            if (e->type != FAT5__J_STRING || strlen(e->str) != e->len) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: id2label['%s'] must be a string without NUL "
                               "characters", fat5__msg_name(val, sizeof val, e->key));
                goto done;
            }
            names[id] = e->str;
        }
        if ((st = fat5__cfg_labels_distinct(ctx, names, count, "config.json: id2label"))) goto done;
    }
    if (jr) {
        if (jr->type != FAT5__J_OBJECT) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'label2id' must be an object (name: id, ...)");
            goto done;
        }
        for (e = jr->child; e; e = e->next) {
            int64_t id = -1;
            const char *want;
            if (!fat5__json_as_i64(e, &id) || id < 0 || id >= count) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: label2id['%s'] must be a label id 0..%lld",
                               fat5__msg_name(val, sizeof val, e->key), (long long)(count - 1));
                goto done;
            }
            if (jl) {
                want = names[id];
            } else {
                snprintf(def, sizeof def, "LABEL_%lld", (long long)id);
                want = def;
            }
            if (strcmp(e->key, want) != 0 || seen[id]) {
                char val2[128];
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: label2id['%s'] = %lld contradicts id2label (label "
                               "%lld is '%s'%s)", fat5__msg_name(val, sizeof val, e->key), (long long)id, (long long)id,
                               fat5__msg_name(val2, sizeof val2, want), seen[id] ? ", already mapped" : "");
                goto done;
            }
            seen[id] = 1;
        }
        for (i = 0; i < count; i++)
            if (!seen[i]) {
                if (!jl) snprintf(def, sizeof def, "LABEL_%lld", (long long)i);
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: label2id lacks label %lld ('%s')", (long long)i,
                               fat5__msg_name(val, sizeof val, jl ? names[i] : def));
                goto done;
            }
    }
    *n = count;
    if (by_id && jl) {
        *by_id = names;
        names = NULL;
    }
done:
    fat5__free(ctx, names);
    fat5__free(ctx, seen);
    return st;
}

// id2label of config.json text: names[i] for i < n (n: the model's num_labels), "LABEL_i" where
// id2label has no label i (or no id2label). The label keys are checked as the config's parser
// checks them (fat5__cfg_labels); the rest of the file is not looked at. *names is one allocation
// (fat5_free) holding the n pointers followed by the strings.
static FAT5__UNUSED fat5_status fat5__cfg_label_names(fat5_ctx *ctx, const char *json, size_t len, int64_t n,
                                                      char ***names) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root;
    const char **by_id = NULL;
    int64_t count = 0, i;
    size_t total, k;
    char **out;
    char *p, def[32];
    fat5_status st;
    *names = NULL;
    if (n < 0 || n >= FAT5__MAX_LABELS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "label names: n = %lld, expected 0..%lld", (long long)n,
                         (long long)(FAT5__MAX_LABELS - 1));
    if ((st = fat5__json_parse(ctx, "config.json", json, len, 16, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: the top level must be an object");
        goto done;
    }
    if ((st = fat5__cfg_labels(ctx, root, &count, &by_id))) goto done;
    total = (size_t)n * sizeof(char *);
    for (i = 0; i < n; i++) {
        k = by_id && i < count ? strlen(by_id[i]) : (size_t)snprintf(def, sizeof def, "LABEL_%lld", (long long)i);
        if (!fat5__add_ok(total, k + 1, &total)) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "config.json: label names too large");
            goto done;
        }
    }
    if (!(out = FAT5__CAST(char **, fat5__malloc(ctx, total)))) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "config.json: out of memory for %lld label names", (long long)n);
        goto done;
    }
    p = (char *)(out + n);
    for (i = 0; i < n; i++) {
        const char *s = by_id && i < count ? by_id[i] : def;
        if (s == def) snprintf(def, sizeof def, "LABEL_%lld", (long long)i);
        k = strlen(s) + 1;
        memcpy(p, s, k);
        out[i] = p;
        p += k;
    }
    *names = out;
done:
    fat5__free(ctx, (void *)by_id);
    fat5__json_free(ctx, doc);
    return st;
}

// The head of config.json's architectures[0] for the config's model_type (c->model_type, already
// read): "<P>ForConditionalGeneration" LM, "<P>EncoderModel" ENCODER, "<P>ForSequenceClassification"
// SEQ_CLS, "<P>ForTokenClassification" TOKEN_CLS, "<P>ForQuestionAnswering" QA with <P> T5, MT5 or
// UMT5 as model_type t5, mt5 or umt5; "Fat5EncoderForSequenceClassification" ENC_SEQ_CLS (t5, mt5,
// umt5); "FlashT5ForConditionalGeneration" and "LongT5ForConditionalGeneration" the LM of flash_t5
// and longt5; "T5WithLMHeadModel" (T5ForConditionalGeneration's name before transformers 3) the LM
// of t5. Absent, null or []: LM. Anything else is an error naming the value.
static fat5_status fat5__cfg_head(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j = fat5__json_get(root, "architectures"), *a;
    const char *s;
    char val[128];
    int row = fat5__cfg_arch_row(c->model_type), r, h;
    c->head = FAT5_HEAD_LM;
    if (!j || j->type == FAT5__J_NULL) return FAT5_OK;
    if (j->type != FAT5__J_ARRAY) return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'architectures' must be an array");
    for (a = j->child; a; a = a->next)
        if (a->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'architectures' must hold strings");
    if (!j->child) return FAT5_OK;
    s = j->child->str;
    if (strcmp(s, "Fat5EncoderForSequenceClassification") == 0) {
        if (row < 0)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config.json: architecture %s needs model_type t5, mt5 or "
                             "umt5, not %s", s, c->model_type);
        c->head = FAT5_HEAD_ENC_SEQ_CLS;
        return FAT5_OK;
    }
    if ((strcmp(s, "FlashT5ForConditionalGeneration") == 0 && strcmp(c->model_type, "flash_t5") == 0) ||
        (strcmp(s, "LongT5ForConditionalGeneration") == 0 && strcmp(c->model_type, "longt5") == 0) ||
        (strcmp(s, "T5WithLMHeadModel") == 0 && row == 0))
        return FAT5_OK;
    for (r = 0; r < 3; r++)
        for (h = FAT5_HEAD_LM; h < FAT5_HEAD_ENC_SEQ_CLS; h++)
            if (strcmp(s, fat5__cfg_arch_names[r][h]) == 0) {
                if (r != row)
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: architecture %s contradicts model_type %s",
                                     s, c->model_type);
                c->head = (fat5_head)h;
                return FAT5_OK;
            }
    if (strcmp(s, "LongT5EncoderModel") == 0)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config.json: architecture LongT5EncoderModel is not supported "
                         "(fat5 runs LongT5ForConditionalGeneration only)");
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config.json: architecture '%s' is unknown; fat5 reads "
                     "T5/MT5/UMT5 ForConditionalGeneration, EncoderModel, ForSequenceClassification, "
                     "ForTokenClassification, ForQuestionAnswering, Fat5EncoderForSequenceClassification, "
                     "FlashT5ForConditionalGeneration (flash_t5) and LongT5ForConditionalGeneration (longt5)",
                     fat5__msg_name(val, sizeof val, s));
}

// The head's keys once the head is known: is_encoder_decoder (false only for the encoder-only
// heads, as T5EncoderModel and T5ForTokenClassification write it), the labels (fat5__cfg_labels),
// problem_type (stored for the sequence classifiers only), classifier_dropout (a number; null
// only where no classifier reads it) and classifier_pooling (Fat5EncoderForSequenceClassification
// only: "eos", "mean", "first"). An LM config keeps the default label fields whatever its file
// says (the LM has no classifier; its config.json is written without them).
static fat5_status fat5__cfg_head_keys(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j;
    const char *arch = fat5__cfg_arch_name(c);
    char val[128];
    int64_t n = 2;
    double dropout = 0.0;
    fat5_problem problem = FAT5_PROBLEM_AUTO;
    fat5_status st;
    if ((j = fat5__json_get(root, "is_encoder_decoder")) != NULL) {
        if (j->type != FAT5__J_TRUE && j->type != FAT5__J_FALSE)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'is_encoder_decoder' must be true or false");
        if (j->type == FAT5__J_FALSE && !fat5__head_encoder_only(c->head))
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config.json: is_encoder_decoder false contradicts "
                             "architecture %s (a T5 model with a decoder)", arch ? arch : "?");
    }
    if ((st = fat5__cfg_labels(ctx, root, &n, NULL))) return st;
    if ((j = fat5__json_get(root, "problem_type")) != NULL && j->type != FAT5__J_NULL) {
        int k;
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'problem_type' must be a string or null");
        for (k = FAT5_PROBLEM_REGRESSION; k <= FAT5_PROBLEM_MULTI_LABEL; k++)
            if (strcmp(j->str, fat5__problem_name((fat5_problem)k)) == 0) break;
        if (k > FAT5_PROBLEM_MULTI_LABEL)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: problem_type '%s' is unknown; expected null, "
                             "\"regression\", \"single_label_classification\" or \"multi_label_classification\"",
                             fat5__msg_name(val, sizeof val, j->str));
        problem = (fat5_problem)k;
    }
    if ((j = fat5__json_get(root, "classifier_dropout")) != NULL &&
        !(j->type == FAT5__J_NULL && !fat5__head_has_labels(c->head)) &&
        (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &dropout)))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'classifier_dropout' must be a number");
    if ((j = fat5__json_get(root, "classifier_pooling")) != NULL) {
        int k;
        if (c->head != FAT5_HEAD_ENC_SEQ_CLS)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: classifier_pooling is a key of "
                             "Fat5EncoderForSequenceClassification; architecture %s has no pooling", arch ? arch : "?");
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'classifier_pooling' must be a string");
        for (k = FAT5_POOL_MEAN; k <= FAT5_POOL_FIRST; k++)
            if (strcmp(j->str, fat5__pool_name((fat5_pool)k)) == 0) break;
        if (k > FAT5_POOL_FIRST)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: classifier_pooling '%s' is unknown; expected "
                             "\"eos\", \"mean\" or \"first\"", fat5__msg_name(val, sizeof val, j->str));
        c->pooling = (fat5_pool)k;
    }
    if (c->head == FAT5_HEAD_LM) return FAT5_OK;
    c->num_labels = n;
    c->classifier_dropout = dropout;
    if (c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_ENC_SEQ_CLS) c->problem_type = problem;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                 fat5_model_config *out) {
    fat5_model_config c = fat5_model_config_default();
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *j;
    fat5_status st;
    char val[128];   // a key or value from the file, sanitised for a message
    int has_dec_layers = 0, has_scale = 0, has_gated = 0, is_gated_act = 0, is_flash = 0, is_long = 0;
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
        if (strcmp(j->str, "t5") != 0 && strcmp(j->str, "mt5") != 0 && strcmp(j->str, "umt5") != 0 &&
            strcmp(j->str, "flash_t5") != 0 && strcmp(j->str, "longt5") != 0) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: model_type '%s' is not a T5 model (fat5 reads t5, mt5, umt5, flash_t5, "
                           "longt5)", fat5__msg_name(val, sizeof val, j->str));
            goto done;
        }
        snprintf(c.model_type, sizeof c.model_type, "%s", j->str);
        is_flash = strcmp(j->str, "flash_t5") == 0;
        is_long = strcmp(j->str, "longt5") == 0;
        if (is_long) {
            c.enc_attention = FAT5_ENC_ATTN_LOCAL;   // LongT5Config's default
        } else if (is_flash) {
            // FlashT5Config's defaults: a plain tanh-GELU MLP, pad_token_id -100 (see below)
            c.act = FAT5_ACT_GELU_TANH;
            c.gated = 0;
            c.pad_token_id = -100;
        } else if (strcmp(j->str, "t5") != 0) {
            // MT5Config / UMT5Config defaults: the mT5-small shape; mT5 (transformers 4.x) is
            // untied by default, UMT5 tied
            c.vocab_size = 250112;
            c.d_ff = 1024;
            c.num_layers = 8;
            c.num_heads = 6;
            c.act = FAT5_ACT_GELU_TANH;
            c.gated = 1;
            c.tie_word_embeddings = strcmp(j->str, "umt5") == 0;
            c.bias_every_layer = strcmp(j->str, "umt5") == 0;
        }
    }
    for (j = root->child; j; j = j->next) {
        static const char *const handled[] = {
            "vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
            "relative_attention_num_buckets", "relative_attention_max_distance", "layer_norm_epsilon",
            "tie_word_embeddings", "pad_token_id", "eos_token_id", "position_encoding_type", "alibi_mode",
            "rotary_emb_fraction", "rotary_base", "rotary_interleaved", "rotary_scale_base", "fire_mlp_width",
            "use_randomized_position_encoding", "attention_dropout_rate", "num_labels", "id2label", "label2id",
            "problem_type", "classifier_dropout", "classifier_pooling", NULL};
        static const char *const flash_handled[] = {"use_glu_mlp", "use_gelu_act", "attention_scale", "use_masking",
                                                    NULL};
        static const char *const long_handled[] = {"encoder_attention_type", "local_radius", "global_block_size",
                                                   NULL};
        int k, ok = fat5__cfg_known(j->key);
        for (k = 0; !ok && is_long && long_handled[k]; k++) ok = strcmp(j->key, long_handled[k]) == 0;
        for (k = 0; !ok && handled[k]; k++) ok = strcmp(j->key, handled[k]) == 0;
        for (k = 0; !ok && is_flash && flash_handled[k]; k++) ok = strcmp(j->key, flash_handled[k]) == 0;
        for (k = 0; !ok && is_flash && fat5__cfg_flash_ignored[k]; k++)
            ok = strcmp(j->key, fat5__cfg_flash_ignored[k]) == 0;
        if (!ok) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: unknown field '%s'; fat5 cannot tell whether it changes the model, "
                           "so it refuses to guess (remove the field if it is harmless)",
                           fat5__msg_name(val, sizeof val, j->key));
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
    // FAT5's rate of the attention probabilities (null or absent: dropout_rate's, as T5)
    if ((j = fat5__json_get(root, "attention_dropout_rate")) != NULL && j->type != FAT5__J_NULL &&
        (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &c.attention_dropout_rate) ||
         !(c.attention_dropout_rate >= 0))) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'attention_dropout_rate' must be a number >= 0 or null");
        goto done;
    }
    // initializer_factor only scales a fresh initialisation (fat5_model_create uses 1), but a value
    // no initialisation could use marks a broken file
    if ((j = fat5__json_get(root, "initializer_factor")) != NULL) {
        double f = 0;
        if (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &f) || !(f > 0)) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'initializer_factor' must be a positive number");
            goto done;
        }
    }
    // the head (architectures[0]) and its keys
    if ((st = fat5__cfg_head(ctx, root, &c)) || (st = fat5__cfg_head_keys(ctx, root, &c))) goto done;
    if (is_long && (st = fat5__cfg_long(ctx, root, &c))) goto done;
    if (is_flash) {
        if ((st = fat5__cfg_flash(ctx, root, &c))) goto done;
        goto checked;   // FlashT5 ignores feed_forward_proj and what derives from it
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
                           "config.json: feed_forward_proj '%s' is not 'ACT' or 'gated-ACT'",
                           fat5__msg_name(val, sizeof val, s));
            goto done;
        }
        c.gated = dash != NULL;
        if (strcmp(s, "gated-gelu") == 0) c.act = FAT5_ACT_GELU_TANH;  // HF maps gated-gelu to gelu_new
        else if (!fat5__act_from_name(dash ? dash + 1 : s, &c.act)) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: feed_forward_proj '%s': unknown activation (relu, gelu, gelu_new, silu)",
                           fat5__msg_name(val, sizeof val, s));
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
                           j->type == FAT5__J_STRING ? fat5__msg_name(val, sizeof val, j->str) : "(not a string)");
            goto done;
        }
    }
checked:
    if ((st = fat5__cfg_pos(ctx, root, &c))) goto done;
    // a value no T5 model can have is a defect of the file here (validate says INVALID_ARG)
    st = fat5_model_config_validate(ctx, &c);
    if (st == FAT5_ERR_INVALID_ARG) st = FAT5_ERR_FORMAT;
    if (st == FAT5_OK) *out = c;
done:
    fat5__json_free(ctx, doc);
    return st;
}

// The position-encoding fields, all of them, unless the config is T5 buckets with FAT5's defaults
// everywhere (a Hugging Face T5 config then stays exactly as transformers writes it) and is not
// a flash_t5 config.
static void fat5__cfg_pos_json(fat5__sb *b, const fat5_model_config *c) {
    fat5_model_config d = fat5_model_config_default();
    char num[40];
    if (c->pos_kind == FAT5_POS_T5 && c->alibi_asymmetric == d.alibi_asymmetric &&
        c->rotary_interleaved == d.rotary_interleaved && c->fire_mlp_width == d.fire_mlp_width &&
        c->rotary_fraction == d.rotary_fraction && c->rotary_base == d.rotary_base &&
        c->rotary_scale_base == d.rotary_scale_base && strcmp(c->model_type, "flash_t5") != 0)
        return;
    fat5__sb_printf(b, "  \"position_encoding_type\": \"%s\",\n", fat5__pos_name(c->pos_kind));
    fat5__sb_printf(b, "  \"alibi_mode\": \"%s\",\n", c->alibi_asymmetric ? "asymetric" : "symetric");
    fat5__sb_printf(b, "  \"fire_mlp_width\": %d,\n", c->fire_mlp_width);
    fat5__fmt_double(num, c->rotary_base);
    fat5__sb_printf(b, "  \"rotary_base\": %s,\n", num);
    fat5__fmt_double(num, c->rotary_fraction);
    fat5__sb_printf(b, "  \"rotary_emb_fraction\": %s,\n", num);
    fat5__sb_printf(b, "  \"rotary_interleaved\": %s,\n", c->rotary_interleaved ? "true" : "false");
    if (c->rotary_scale_base > 0) {
        fat5__fmt_double(num, c->rotary_scale_base);
        fat5__sb_printf(b, "  \"rotary_scale_base\": %s,\n", num);
    } else {
        fat5__sb_printf(b, "  \"rotary_scale_base\": null,\n");
    }
}

// id2label and label2id of n labels, indented as transformers writes them; names NULL: "LABEL_i"
static void fat5__cfg_labels_json(fat5__sb *b, const char *const *names, int64_t n) {
    char def[32];
    int64_t i;
    int pass;
    for (pass = 0; pass < 2; pass++) {
        fat5__sb_printf(b, "  \"%s\": {%s", pass ? "label2id" : "id2label", n ? "\n" : "");
        for (i = 0; i < n; i++) {
            const char *name = names ? names[i] : def;
            if (!names) snprintf(def, sizeof def, "LABEL_%lld", (long long)i);
            if (pass) {
                fat5__sb_printf(b, "    ");
                fat5__sb_json_string(b, name);
                fat5__sb_printf(b, ": %lld%s\n", (long long)i, i + 1 < n ? "," : "");
            } else {
                fat5__sb_printf(b, "    \"%lld\": ", (long long)i);
                fat5__sb_json_string(b, name);
                fat5__sb_printf(b, "%s\n", i + 1 < n ? "," : "");
            }
        }
        fat5__sb_printf(b, "%s},\n", n ? "  " : "");
    }
}

// fat5_model_config_to_json with the label names of a head other than LM: id2label and label2id
// from names[0..num_labels) (NULL: "LABEL_i"; each name valid UTF-8, none given twice). The LM's
// config.json has no label keys (names is not read), as it was before heads existed. Other heads
// add, as transformers writes them: their architecture name, classifier_dropout, id2label and
// label2id (transformers derives num_labels from id2label and writes no num_labels),
// "is_encoder_decoder": false and "use_cache": false for the encoder-only heads of t5 and mt5 (what
// T5EncoderModel and T5ForTokenClassification write; UMT5's classes write true), problem_type
// (null for AUTO), and fat5's
// "classifier_pooling" for ENC_SEQ_CLS.
static fat5_status fat5__cfg_to_json_labels(fat5_ctx *ctx, const fat5_model_config *c, const char *const *names,
                                            char **out, size_t *out_len) {
    fat5__sb b;
    char num[40], val[128];
    int flash = strcmp(c->model_type, "flash_t5") == 0, longt5 = strcmp(c->model_type, "longt5") == 0;
    int head = c->head != FAT5_HEAD_LM;
    // T5 and MT5's encoder-only classes set is_encoder_decoder and use_cache false in their config;
    // UMT5's leave both true
    int enc_only = fat5__head_encoder_only(c->head) && strcmp(c->model_type, "umt5") != 0;
    const char *arch;
    fat5_status st = fat5_model_config_validate(ctx, c);
    if (st) return st;
    arch = fat5__cfg_arch_name(c);
    if (c->bias_every_layer != (strcmp(c->model_type, "umt5") == 0))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: a bias table in every layer is model_type umt5 and nothing else");
    // (no head but the LM's reads either: transformers' head classes force tied embeddings and keep
    // the scale_decoder_outputs they were given)
    if (c->head == FAT5_HEAD_LM && c->scale_decoder_outputs != c->tie_word_embeddings)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: scale_decoder_outputs != tie_word_embeddings cannot be written so that every "
                         "transformers version reads it back the same");
    if (head && names) {
        int64_t i;
        for (i = 0; i < c->num_labels; i++) {
            if (!names[i])
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "label names: name %lld is NULL", (long long)i);
            if (!fat5__utf8_valid(names[i]))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "label names: name %lld '%s' is not valid UTF-8",
                                 (long long)i, fat5__msg_name(val, sizeof val, names[i]));
        }
        if ((st = fat5__cfg_labels_distinct(ctx, names, c->num_labels, "label names"))) {
            if (st == FAT5_ERR_FORMAT) st = FAT5_ERR_INVALID_ARG;
            return st;
        }
    }
    fat5__sb_init(&b, ctx);
    fat5__sb_printf(&b, "{\n  \"architectures\": [\"%s\"],\n", arch);
    if (c->attention_dropout_rate >= 0) {  // FAT5's key; absent: dropout_rate's (T5)
        fat5__fmt_double(num, c->attention_dropout_rate);
        fat5__sb_printf(&b, "  \"attention_dropout_rate\": %s,\n", num);
    }
    if (flash) fat5__sb_printf(&b, "  \"attention_scale\": 1.0,\n");
    if (head) {
        fat5__fmt_double(num, c->classifier_dropout);
        fat5__sb_printf(&b, "  \"classifier_dropout\": %s,\n", num);
    }
    if (c->head == FAT5_HEAD_ENC_SEQ_CLS)
        fat5__sb_printf(&b, "  \"classifier_pooling\": \"%s\",\n", fat5__pool_name(c->pooling));
    fat5__sb_printf(&b, "  \"d_ff\": %lld,\n  \"d_kv\": %lld,\n  \"d_model\": %lld,\n", (long long)c->d_ff,
                    (long long)c->d_kv, (long long)c->d_model);
    fat5__sb_printf(&b, "  \"decoder_start_token_id\": %lld,\n", (long long)c->decoder_start_token_id);
    if (!flash) fat5__sb_printf(&b, "  \"dense_act_fn\": \"%s\",\n", fat5__act_name(c->act));
    fat5__fmt_double(num, c->dropout_rate);
    fat5__sb_printf(&b, "  \"dropout_rate\": %s,\n", num);
    if (longt5)
        fat5__sb_printf(&b, "  \"encoder_attention_type\": \"%s\",\n",
                        c->enc_attention == FAT5_ENC_ATTN_TGLOBAL ? "transient-global" : "local");
    fat5__sb_printf(&b, "  \"eos_token_id\": %lld,\n", (long long)c->eos_token_id);
    if (!flash)
        fat5__sb_printf(&b, "  \"feed_forward_proj\": \"%s%s\",\n", c->gated ? "gated-" : "",
                        c->gated && c->act == FAT5_ACT_GELU_TANH ? "gelu" : fat5__act_name(c->act));
    if (longt5) fat5__sb_printf(&b, "  \"global_block_size\": %lld,\n", (long long)c->global_block_size);
    if (head) fat5__cfg_labels_json(&b, names, c->num_labels);
    fat5__sb_printf(&b, "  \"initializer_factor\": 1.0,\n  \"is_encoder_decoder\": %s,\n", enc_only ? "false" : "true");
    if (!flash) fat5__sb_printf(&b, "  \"is_gated_act\": %s,\n", c->gated ? "true" : "false");
    fat5__fmt_double(num, c->layer_norm_eps);
    fat5__sb_printf(&b, "  \"layer_norm_epsilon\": %s,\n", num);
    if (longt5) fat5__sb_printf(&b, "  \"local_radius\": %lld,\n", (long long)c->local_radius);
    fat5__sb_printf(&b, "  \"model_type\": ");
    fat5__sb_json_string(&b, c->model_type);
    fat5__sb_printf(&b, ",\n  \"num_decoder_layers\": %lld,\n  \"num_heads\": %lld,\n  \"num_layers\": %lld,\n",
                    (long long)c->num_decoder_layers, (long long)c->num_heads, (long long)c->num_layers);
    fat5__sb_printf(&b, "  \"pad_token_id\": %lld,\n", (long long)c->pad_token_id);
    fat5__cfg_pos_json(&b, c);
    if (head) {
        if (c->problem_type == FAT5_PROBLEM_AUTO) fat5__sb_printf(&b, "  \"problem_type\": null,\n");
        else fat5__sb_printf(&b, "  \"problem_type\": \"%s\",\n", fat5__problem_name(c->problem_type));
    }
    fat5__sb_printf(&b, "  \"relative_attention_max_distance\": %lld,\n  \"relative_attention_num_buckets\": %lld,\n",
                    (long long)c->rel_max_distance, (long long)c->rel_buckets);
    if (!flash)
        fat5__sb_printf(&b, "  \"scale_decoder_outputs\": %s,\n", c->scale_decoder_outputs ? "true" : "false");
    fat5__sb_printf(&b, "  \"tie_word_embeddings\": %s,\n", c->tie_word_embeddings ? "true" : "false");
    if (flash)
        fat5__sb_printf(&b, "  \"use_gelu_act\": %s,\n  \"use_glu_mlp\": %s,\n",
                        c->act == FAT5_ACT_GELU_TANH ? "true" : "false", c->gated ? "true" : "false");
    fat5__sb_printf(&b, "  \"use_cache\": %s,\n  \"vocab_size\": %lld\n}\n", enc_only ? "false" : "true",
                    (long long)c->vocab_size);
    if (b.oom) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "config.json: out of memory");
    }
    *out = b.buf;
    *out_len = b.len;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_config_to_json(fat5_ctx *ctx, const fat5_model_config *c, char **out,
                                               size_t *out_len) {
    return fat5__cfg_to_json_labels(ctx, c, NULL, out, out_len);
}
