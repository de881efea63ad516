// =============================================================================================
// ==[9.2] run: training options, checkpoints and the training loop ==
#ifndef _WIN32
#include <sys/file.h>   // flock: one trainer per output directory
#endif

// The fine-tuning task (train_file: batches of (input, target) pairs, evaluation with generation,
// the best checkpoint): [9.3], src/run_finetune.c, after this file.
typedef struct fat5__ft fat5__ft;
static void fat5__ft_config_defaults(fat5_train_config *c);
static int fat5__ft_config_set(fat5_ctx *ctx, fat5_train_config *c, const char *key, const char *v, int *ok);

// ---------------------------------------------------------------------------------------------
// training options

#define FAT5__PRESET_VOCAB 384   // the presets' vocabulary: ByT5's byte ids with room for sentinels

// the model shapes a run can name instead of a config.json
static int fat5__model_preset(const char *name, fat5_model_config *c) {
    fat5_model_config d = fat5_model_config_default();
    // byte vocabulary (ByT5 ids: 0 pad, 1 eos, 2 unk, byte + 3, sentinels from the top), v1.1 style;
    // a new model on data of a larger vocabulary takes the data's (fat5_train_create)
    d.vocab_size = FAT5__PRESET_VOCAB;
    d.act = FAT5_ACT_GELU_TANH;
    d.gated = 1;
    d.tie_word_embeddings = 0;
    d.scale_decoder_outputs = 0;
    d.dropout_rate = 0.0;
    if (strcmp(name, "fat5-small") == 0) {        // FAT5-small: 512 / 2048, 8 heads, 12 + 12 layers
        d.d_model = 512, d.d_ff = 2048, d.num_heads = 8, d.d_kv = 64, d.num_layers = 12, d.num_decoder_layers = 12;
    } else if (strcmp(name, "small") == 0) {      // T5 v1.1-small's widths, 8 + 8 layers
        d.d_model = 512, d.d_ff = 1024, d.num_heads = 6, d.d_kv = 64, d.num_layers = 8, d.num_decoder_layers = 8;
    } else if (strcmp(name, "tiny") == 0) {       // for the CPU: 128 / 512, 4 heads of 32, 2 + 2 layers
        d.d_model = 128, d.d_ff = 512, d.num_heads = 4, d.d_kv = 32, d.num_layers = 2, d.num_decoder_layers = 2;
    } else {
        return 0;
    }
    *c = d;
    return 1;
}

FAT5_API fat5_train_config fat5_train_config_default(void) {
    fat5_train_config c;
    memset(&c, 0, sizeof c);
    c.eval_fraction = 0.01;
    c.ul2 = fat5_ul2_config_default();
    (void)fat5__model_preset("fat5-small", &c.model);
    c.seed = 42;
    c.optim = fat5_optim_config_default();
    c.optim.total_steps = 1000;
    c.optim.warmup_steps = 100;
    c.loss = fat5_loss_config_default();
    c.grad_accum = 1;
    c.prefetch = 1;
    c.output_dir = "train-out";
    c.eval_steps = 100;
    c.eval_batches = 8;
    c.save_steps = 500;
    c.save_total_limit = 3;
    c.world_size = 1;
    c.dist_timeout_s = 900;
    c.bucket_mb = 100;
    c.balance_ranks = 1;
    c.dropout_rate = -1;
    c.attention_dropout_rate = -1;
    fat5__ft_config_defaults(&c);
    return c;
}

static const char fat5__train_options[] =
    "data: token files, comma-separated (tools/pretokenize writes them)\n"
    "eval_fraction: share of documents held out for evaluation (0.01; 0 = none); fine-tuning without a\n"
    "  validation_file: of the training rows\n"
    "model: a preset (fat5-small, small, tiny) or a config.json path\n"
    "d_model, d_ff, d_kv, num_heads, num_layers, num_decoder_layers, vocab_size: model shape\n"
    "feed_forward_proj: relu, gelu, gated-gelu, gated-silu\n"
    "position_encoding_type: t5 (relative buckets), none, ALiBi, RoPE or FIRE (FAT5's names; any but t5\n"
    "  makes a FAT5 model, model_type flash_t5)\n"
    "relative_attention_num_buckets, relative_attention_max_distance: T5's buckets (max distance: FIRE's L0)\n"
    "alibi_mode: symetric or asymetric (half the encoder's heads look back, half forward)\n"
    "rotary_emb_fraction, rotary_base, rotary_interleaved, rotary_scale_base: RoPE (scale base: xPos)\n"
    "fire_mlp_width: FIRE's hidden width (32)\n"
    "init: start from this Hugging Face checkpoint directory instead of random weights\n"
    "attention: the encoder's attention for the run: full, local:R, block-global:R:G or transient-global:R:G\n"
    "  (any checkpoint, no retraining; default the model's own)\n"
    "freeze: parameters left as they are, comma-separated names with * wildcards (encoder.*, shared.weight,\n"
    "  *.layer_norm.weight, decoder.block.0.*); no gradient, update or optimizer state for them\n"
    "save_tokenizer: the tokenizer files checkpoints carry for transformers: a directory holding them, byte\n"
    "  (ByT5's) or none (default: init's; byte for a new model on a byte vocabulary of 260 .. 1024 ids)\n"
    "seed: initialisation and data order (42)\n"
    "optim: adamwscale (FAT5), adamw or adafactor (transformers' Adafactor)\n"
    "adafactor_relative_step, adafactor_scale_parameter, adafactor_warmup_init: Adafactor's switches\n"
    "  (true or false; false by default, as HF's Trainer; relative_step ignores learning_rate and the schedule)\n"
    "adafactor_clip_threshold (1), adafactor_decay_rate (-0.8), adafactor_beta1 (none: no first moment)\n"
    "learning_rate, adam_beta1, adam_beta2, adam_epsilon, weight_decay: the optimizer\n"
    "max_grad_norm: global gradient-norm clipping (0 = off)\n"
    "lr_scheduler_type: cosine (FAT5), wsd, inverse_sqrt, linear, constant\n"
    "warmup_steps, decay_steps (wsd), min_lr (cosine floor): the schedule\n"
    "max_steps: optimizer steps of the run\n"
    "gradient_accumulation_steps: micro-batches per step\n"
    "prefetch: 1 draws the next step's batches on a host thread while the GPU works (default), 0 on the\n"
    "  calling thread (to measure what the sampler costs; metrics.jsonl's data_s is the wait)\n"
    "z_loss, label_smoothing: the loss\n"
    "denoisers: fat5 (the seven-denoiser UL2 mixture) or t5 (span corruption r .15, mu 3)\n"
    "max_length, max_labels_length: most input / target tokens of one example\n"
    "sentinel_first, n_sentinels: the sentinel ids, counting down (default: the top of the data's\n"
    "  vocabulary; every id above the bytes for a byte vocabulary, else 100 as T5's <extra_id_N>)\n"
    "batch_tokens, batch_labels_tokens: input / target token budget of one micro-batch\n"
    "output_dir: checkpoints and metrics.jsonl\n"
    "resume: a checkpoint directory, or an output directory (its latest checkpoint)\n"
    "eval_steps, eval_batches, save_steps, save_total_limit: evaluation and checkpoints\n"
    "peak_tflops: the device's peak for MFU (0 = 989 on a GPU in bf16, else none)\n"
    "world_size, rank: data parallel ranks (one process each; examples/train --gpus N starts them)\n"
    "rendezvous: where the ranks meet: a file path every rank names (rank 0 creates it), NCCL_COMM_ID (GPU:\n"
    "  that variable's host:port, set on every rank), or fat5_launch's\n"
    "dist_timeout: seconds a rank waits for the others before it stops the run (900)\n"
    "bucket_mb: gradients are summed across ranks in buckets of this many MiB during the backward (100)\n"
    "balance_ranks: 1 exchanges examples between the ranks' micro-batches so that each has about the\n"
    "  same FLOPs (default), 0 trains each rank on its micro-batches as drawn\n"
    "dropout_rate: training dropout at T5's sites, replacing the config's (presets 0, --init: its own)\n"
    "attention_dropout_rate: on the attention probabilities (default dropout_rate)\n";

FAT5_API const char *fat5_train_option_names(void) { return fat5__train_options; }

static int fat5__opt_f64(const char *v, double lo, double hi, double *out) {
    double d;
    if (!fat5__strtod_c(v, &d) || !(d >= lo && d <= hi)) return 0;
    *out = d;
    return 1;
}
static int fat5__opt_i64(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    double d;
    if (!fat5__strtod_c(v, &d) || d != floor(d) || d < (double)lo || d > (double)hi) return 0;
    *out = (int64_t)d;
    return 1;
}
// a string option: a copy the context keeps (-1 when out of memory, with the message set)
static int fat5__opt_str(fat5_ctx *ctx, const char *v, const char **dst) {
    const char *k = fat5__ctx_keep(ctx, v);
    if (!k) return -1;
    *dst = k;
    return 1;
}

FAT5_API fat5_status fat5_train_config_set(fat5_ctx *ctx, fat5_train_config *c, const char *key, const char *v) {
    const double big = 1e300;
    const int64_t imax = (int64_t)1 << 52;
    int64_t i = 0;
    int ok = 1;
    fat5_model_config *mc;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    if (!c || !key || !v) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_train_config_set: NULL argument");
    mc = &c->model;
#define FAT5__IS(name) (strcmp(key, name) == 0)
    if (FAT5__IS("data")) ok = fat5__opt_str(ctx, v, &c->data);
    else if (FAT5__IS("eval_fraction")) ok = fat5__opt_f64(v, 0, 0.5, &c->eval_fraction);
    else if (FAT5__IS("init")) ok = fat5__opt_str(ctx, v, &c->init);
    else if (FAT5__IS("attention")) {  // "": the model's own
        fat5_attention a;
        fat5_status st = v[0] ? fat5_attention_parse(ctx, v, &a) : FAT5_OK;
        if (st) return fat5__err_prefix(ctx, st, "option attention: ");
        ok = fat5__opt_str(ctx, v, &c->attention);
    }
    else if (FAT5__IS("save_tokenizer")) ok = fat5__opt_str(ctx, v, &c->save_tokenizer);
    else if (FAT5__IS("freeze")) ok = fat5__opt_str(ctx, v, &c->freeze);   // checked against the model at create
    else if (FAT5__IS("output_dir")) ok = v[0] ? fat5__opt_str(ctx, v, &c->output_dir) : 0;
    else if (FAT5__IS("resume")) ok = fat5__opt_str(ctx, v, &c->resume);
    else if (FAT5__IS("seed")) { ok = fat5__opt_i64(v, 0, imax, &i); c->seed = (uint64_t)i; }
    else if (FAT5__IS("dropout_rate") || FAT5__IS("attention_dropout_rate")) {   // [0, 1)
        double d = 0;
        ok = fat5__opt_f64(v, 0, 1, &d) && d < 1;
        if (ok) *(FAT5__IS("dropout_rate") ? &c->dropout_rate : &c->attention_dropout_rate) = d;
    }
    else if (FAT5__IS("model")) {
        if (!fat5__model_preset(v, mc)) {
            char *text = NULL;
            size_t len = 0;
            fat5_status st = fat5__read_file(ctx, v, (size_t)1 << 20, &text, &len);
            if (st) return fat5__err_prefix(ctx, st, "option model: not a preset (fat5-small, small, tiny) and: ");
            st = fat5_model_config_from_json(ctx, text, len, mc);
            fat5__free(ctx, text);
            if (st) return st;
        }
    }
    else if (FAT5__IS("position_encoding_type")) {   // FAT5's names and values; a FAT5 model then
        int k;                                        // (model_type flash_t5: saved under FAT5's names)
        for (k = FAT5_POS_T5; k <= FAT5_POS_FIRE && strcmp(v, fat5__pos_name((fat5_pos_kind)k)) != 0; k++) {}
        ok = k <= FAT5_POS_FIRE;
        if (ok) mc->pos_kind = (fat5_pos_kind)k;
        if (ok && k != FAT5_POS_T5 && strcmp(mc->model_type, "t5") == 0) memcpy(mc->model_type, "flash_t5", 9);
    }
    else if (FAT5__IS("alibi_mode")) {
        ok = strcmp(v, "symetric") == 0 || strcmp(v, "symmetric") == 0 || strcmp(v, "asymetric") == 0 ||
             strcmp(v, "asymmetric") == 0;
        mc->alibi_asymmetric = v[0] == 'a';
    }
    else if (FAT5__IS("rotary_emb_fraction")) ok = fat5__opt_f64(v, 1e-9, 1, &mc->rotary_fraction);
    else if (FAT5__IS("rotary_base")) ok = fat5__opt_f64(v, 1e-9, big, &mc->rotary_base);
    else if (FAT5__IS("rotary_scale_base")) ok = fat5__opt_f64(v, 0, big, &mc->rotary_scale_base);
    else if (FAT5__IS("rotary_interleaved")) {
        ok = strcmp(v, "true") == 0 || strcmp(v, "false") == 0 || strcmp(v, "1") == 0 || strcmp(v, "0") == 0;
        mc->rotary_interleaved = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
    }
    else if (FAT5__IS("fire_mlp_width")) {
        ok = fat5__opt_i64(v, 1, 1 << 20, &i);
        mc->fire_mlp_width = (int)i;
    }
    else if (FAT5__IS("relative_attention_max_distance")) ok = fat5__opt_i64(v, 1, 1 << 30, &mc->rel_max_distance);
    else if (FAT5__IS("relative_attention_num_buckets")) ok = fat5__opt_i64(v, 4, 1 << 16, &mc->rel_buckets);
    else if (FAT5__IS("d_model")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->d_model);
    else if (FAT5__IS("d_ff")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->d_ff);
    else if (FAT5__IS("d_kv")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->d_kv);
    else if (FAT5__IS("num_heads")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->num_heads);
    else if (FAT5__IS("num_layers")) ok = fat5__opt_i64(v, 1, 1024, &mc->num_layers);
    else if (FAT5__IS("num_decoder_layers")) ok = fat5__opt_i64(v, 1, 1024, &mc->num_decoder_layers);
    else if (FAT5__IS("vocab_size")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->vocab_size);
    else if (FAT5__IS("feed_forward_proj")) {
        const char *a = strncmp(v, "gated-", 6) == 0 ? v + 6 : v;
        mc->gated = a != v;
        if (strcmp(a, "relu") == 0) mc->act = FAT5_ACT_RELU;
        else if (strcmp(a, "gelu") == 0) mc->act = mc->gated ? FAT5_ACT_GELU_TANH : FAT5_ACT_GELU;
        else if (strcmp(a, "gelu_new") == 0) mc->act = FAT5_ACT_GELU_TANH;
        else if (strcmp(a, "silu") == 0) mc->act = FAT5_ACT_SILU;
        else ok = 0;
    }
    else if (FAT5__IS("optim")) {
        if (strcmp(v, "adamwscale") == 0) c->optim.kind = FAT5_OPTIM_ADAMW_SCALE;
        else if (strcmp(v, "adamw") == 0) c->optim.kind = FAT5_OPTIM_ADAMW;
        else if (strcmp(v, "adafactor") == 0) c->optim.kind = FAT5_OPTIM_ADAFACTOR;
        else ok = 0;
    }
    else if (FAT5__IS("adafactor_relative_step") || FAT5__IS("adafactor_scale_parameter") ||
             FAT5__IS("adafactor_warmup_init")) {
        int *dst = FAT5__IS("adafactor_relative_step") ? &c->optim.adafactor_relative_step
                   : FAT5__IS("adafactor_scale_parameter") ? &c->optim.adafactor_scale_parameter
                                                           : &c->optim.adafactor_warmup_init;
        ok = strcmp(v, "true") == 0 || strcmp(v, "false") == 0 || strcmp(v, "1") == 0 || strcmp(v, "0") == 0;
        *dst = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
    }
    else if (FAT5__IS("adafactor_clip_threshold"))
        ok = fat5__opt_f64(v, 0, big, &c->optim.adafactor_clip_threshold) && c->optim.adafactor_clip_threshold > 0;
    else if (FAT5__IS("adafactor_decay_rate"))
        ok = fat5__opt_f64(v, -1e6, 0, &c->optim.adafactor_decay_rate) && c->optim.adafactor_decay_rate < 0;
    else if (FAT5__IS("adafactor_beta1")) {
        if (strcmp(v, "none") == 0 || strcmp(v, "None") == 0) c->optim.adafactor_beta1 = 0;
        else ok = fat5__opt_f64(v, 0, 0.999999, &c->optim.adafactor_beta1);
    }
    else if (FAT5__IS("learning_rate")) ok = fat5__opt_f64(v, 0, big, &c->optim.lr) && c->optim.lr > 0;
    else if (FAT5__IS("adam_beta1")) ok = fat5__opt_f64(v, 0, 0.999999, &c->optim.beta1);
    else if (FAT5__IS("adam_beta2")) ok = fat5__opt_f64(v, 0, 0.999999999, &c->optim.beta2);
    else if (FAT5__IS("adam_epsilon")) ok = fat5__opt_f64(v, 0, 1, &c->optim.eps) && c->optim.eps > 0;
    else if (FAT5__IS("weight_decay")) ok = fat5__opt_f64(v, 0, 1e6, &c->optim.weight_decay);
    else if (FAT5__IS("max_grad_norm")) ok = fat5__opt_f64(v, 0, big, &c->optim.clip_norm);
    else if (FAT5__IS("lr_scheduler_type")) {
        if (strcmp(v, "cosine") == 0) c->optim.sched = FAT5_SCHED_COSINE;
        else if (strcmp(v, "wsd") == 0) c->optim.sched = FAT5_SCHED_WSD;
        else if (strcmp(v, "inverse_sqrt") == 0) c->optim.sched = FAT5_SCHED_INV_SQRT;
        else if (strcmp(v, "linear") == 0) c->optim.sched = FAT5_SCHED_LINEAR;
        else if (strcmp(v, "constant") == 0) c->optim.sched = FAT5_SCHED_CONSTANT;
        else ok = 0;
    }
    else if (FAT5__IS("warmup_steps")) ok = fat5__opt_i64(v, 0, imax, &c->optim.warmup_steps);
    else if (FAT5__IS("decay_steps")) ok = fat5__opt_i64(v, 0, imax, &c->optim.decay_steps);
    else if (FAT5__IS("min_lr")) ok = fat5__opt_f64(v, 0, big, &c->optim.min_lr);
    else if (FAT5__IS("max_steps")) ok = fat5__opt_i64(v, 1, imax, &c->optim.total_steps);
    else if (FAT5__IS("prefetch")) {
        ok = fat5__opt_i64(v, 0, 1, &i);
        c->prefetch = (int)i;
    }
    else if (FAT5__IS("gradient_accumulation_steps")) {
        ok = fat5__opt_i64(v, 1, 1 << 20, &i);
        c->grad_accum = (int)i;
    }
    else if (FAT5__IS("z_loss")) ok = fat5__opt_f64(v, 0, 1e6, &c->loss.z_loss);
    else if (FAT5__IS("label_smoothing")) ok = fat5__opt_f64(v, 0, 0.999999, &c->loss.label_smoothing);
    else if (FAT5__IS("denoisers")) {
        fat5_ul2_config u = strcmp(v, "fat5") == 0 ? fat5_ul2_config_default() : fat5_ul2_config_t5();
        if (strcmp(v, "fat5") != 0 && strcmp(v, "t5") != 0) ok = 0;
        else {
            c->ul2.n_denoisers = u.n_denoisers;
            memcpy(c->ul2.denoisers, u.denoisers, sizeof u.denoisers);
        }
    }
    else if (FAT5__IS("sentinel_first")) { ok = fat5__opt_i64(v, 0, INT32_MAX, &i); c->ul2.sentinel_first = (int32_t)i; }
    else if (FAT5__IS("n_sentinels")) { ok = fat5__opt_i64(v, 0, INT32_MAX, &i); c->ul2.n_sentinels = (int32_t)i; }
    else if (FAT5__IS("max_length")) ok = fat5__opt_i64(v, 1, 1 << 24, &c->ul2.max_enc_len);
    else if (FAT5__IS("max_labels_length")) ok = fat5__opt_i64(v, 1, 1 << 24, &c->ul2.max_dec_len);
    else if (FAT5__IS("batch_tokens")) ok = fat5__opt_i64(v, 1, (int64_t)1 << 31, &c->ul2.enc_tokens);
    else if (FAT5__IS("batch_labels_tokens")) ok = fat5__opt_i64(v, 1, (int64_t)1 << 31, &c->ul2.dec_tokens);
    else if (FAT5__IS("eval_steps")) ok = fat5__opt_i64(v, 0, imax, &c->eval_steps);
    else if (FAT5__IS("eval_batches")) ok = fat5__opt_i64(v, 1, 1 << 20, &c->eval_batches);
    else if (FAT5__IS("save_steps")) ok = fat5__opt_i64(v, 0, imax, &c->save_steps);
    else if (FAT5__IS("save_total_limit")) {
        ok = fat5__opt_i64(v, 0, 1 << 20, &i);
        c->save_total_limit = (int)i;
    }
    else if (FAT5__IS("peak_tflops")) ok = fat5__opt_f64(v, 0, 1e9, &c->peak_tflops);
    else if (FAT5__IS("world_size")) {
        ok = fat5__opt_i64(v, 1, 1 << 20, &i);
        c->world_size = (int)i;
    }
    else if (FAT5__IS("rank")) {
        ok = fat5__opt_i64(v, 0, 1 << 20, &i);
        c->rank = (int)i;
    }
    else if (FAT5__IS("rendezvous")) ok = fat5__opt_str(ctx, v, &c->rendezvous);
    else if (FAT5__IS("dist_timeout")) ok = fat5__opt_f64(v, 1, 1e9, &c->dist_timeout_s);
    else if (FAT5__IS("bucket_mb")) ok = fat5__opt_f64(v, 0.01, 1e6, &c->bucket_mb);
    else if (FAT5__IS("balance_ranks")) {
        ok = fat5__opt_i64(v, 0, 1, &i);
        c->balance_ranks = (int)i;
    }
    else if (fat5__ft_config_set(ctx, c, key, v, &ok)) {}
    else {
        char nm[96];
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "unknown training option '%s' (fat5_train_option_names lists them)",
                         fat5__msg_name(nm, sizeof nm, key));
    }
#undef FAT5__IS
    if (ok < 0) return FAT5_ERR_OUT_OF_MEMORY;   // fat5__opt_str: the message is set
    if (!ok) {
        char nm[96], val[96];
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training option %s: bad value '%s'", fat5__msg_name(nm, sizeof nm, key),
                         fat5__msg_name(val, sizeof val, v));
    }
    return FAT5_OK;
}

FAT5_API fat5_status fat5_train_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                 fat5_train_config *cfg) {
    fat5__jdoc *d = NULL;
    const fat5__json *root, *j;
    fat5_status st;
    if (!cfg || !json) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_train_config_from_json: NULL argument");
    if ((st = fat5__json_parse(ctx, "training config", json, len, 8, &d))) return st;
    root = fat5__json_root(d);
    if (root->type != FAT5__J_OBJECT) {
        fat5__json_free(ctx, d);
        return fat5__err(ctx, FAT5_ERR_FORMAT, "training config: not a JSON object");
    }
    for (j = root->child; j && st == FAT5_OK; j = j->next) {
        char buf[4096];
        const char *v = buf;
        if (j->type == FAT5__J_STRING || j->type == FAT5__J_NUMBER) {
            v = j->str;
        } else if (j->type == FAT5__J_ARRAY && strcmp(j->key, "data") == 0) {   // a list of files
            const fat5__json *e;
            size_t o = 0;
            buf[0] = 0;
            for (e = j->child; e; e = e->next) {
                if (e->type != FAT5__J_STRING || o + e->len + 2 > sizeof buf) {
                    st = fat5__err(ctx, FAT5_ERR_FORMAT, "training config: 'data' must be file names (at most %zu bytes)",
                                   sizeof buf - 1);
                    break;
                }
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", o ? "," : "", e->str);
            }
        } else if (j->type == FAT5__J_TRUE || j->type == FAT5__J_FALSE) {
            v = j->type == FAT5__J_TRUE ? "1" : "0";
        } else {
            char nm[96];
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "training config: '%s' is %s", fat5__msg_name(nm, sizeof nm, j->key),
                           fat5__json_type_name(j->type));
        }
        if (st == FAT5_OK) st = fat5_train_config_set(ctx, cfg, j->key, v);
    }
    fat5__json_free(ctx, d);
    return st;
}

// ---------------------------------------------------------------------------------------------
// the trainer

#define FAT5__TRAIN_MAX_FILES 256

typedef struct fat5__tbatch {          // a copy of one sampler batch
    fat5_batch b;
    int32_t *buf;
    size_t cap;                        // int32 elements in buf
} fat5__tbatch;

// The micro-batches of one step, drawn together; state is the sampler's state before them.
typedef struct fat5__tgroup {
    fat5__tbatch *mb;                  // [grad_accum]: this rank's share
    int64_t *n_labels;                 // [world_size x grad_accum]: every rank's micro-batches' labels
    int64_t tokens;                    // encoder + decoder tokens of every rank's micro-batches
    double flops;                      // their training FLOPs
    double balance;                    // the busiest rank's FLOPs over the ranks' mean (1: even)
    char state[512];
    double epoch_f;                    // fine-tuning: the sampler's epoch after them, fractional
    fat5_status st;                    // of the drawing
} fat5__tgroup;

// One example (a packed sequence) of a step's micro-batches, while they are balanced across ranks.
typedef struct fat5__tex {
    int64_t at;                        // its ids in the pool: ne inputs, then nd labels
    int32_t ne, nd, n_lab;
    int32_t bin;                       // its micro-batch: rank r's are r k .. r k + k - 1
    double cost;                       // its forward FLOPs (fat5__seq_flops)
} fat5__tex;

typedef struct fat5__tsort { double cost; int32_t i; } fat5__tsort;   // an example or a rank, to sort

typedef struct fat5__tpool {           // every rank's micro-batches of one step, as examples
    int32_t *ids;
    fat5__tex *ex;
    size_t n_ids, cap_ids, n_ex, cap_ex;
    int32_t *by_rank;                  // [cap_ex] scratch: the examples grouped by rank
    fat5__tsort *keys;                 // [cap_ex] scratch: one rank's examples by cost
    int64_t *bin_e, *bin_d, *bin_n;    // [world k]: each micro-batch's inputs, labels, examples
    double *rank_cost;                 // [world]
    int32_t *rank_at;                  // [2 world + 1] scratch: where each rank's examples start in by_rank
    fat5__tsort *ranks;                // [world] scratch: the ranks by cost
} fat5__tpool;

struct fat5_trainer {
    char *strs;                  // the config's strings (cfg.data, ...): the trainer's copies
    int lock_fd;                 // rank 0: OUTPUT_DIR/.lock, locked while the trainer lives; -1 none
    fat5_ctx *ctx;
    fat5_ctx *dctx;                    // the data's own context: the sampler may run on a host thread
    fat5_train_config cfg;
    fat5_tokens *tokens;
    fat5_ul2 *sampler;
    fat5_model *m;
    fat5_optim *o;
    fat5__addr losses;                 // double [2 grad_accum] on the backend: each micro-batch's ce, loss
    double *h_losses;                  // their host copy, read once per step
    fat5__tgroup grp[2];
    fat5__tpool pool;                  // balancing's, used by the drawing (one at a time)
    int ahead;                         // index of a group drawn ahead and not yet used, -1 = none
    int prefetch;                      // draw the next step's group on a host thread (GPU models)
#ifndef FAT5_NO_THREADS
    pthread_t thread;
    int thread_running;
#endif
    int64_t tokens_seen, n_skipped, step_at_start;
    double elapsed_before, t_start, flops_per_s_peak;
    char ckpt[4200];
    FILE *log;                         // metrics.jsonl (rank 0), else NULL
    fat5__comm *comm;                  // the other ranks (world_size > 1), else NULL
    int world, rank;
    int stop_asked;                    // fat5_train_request_stop since the last step
    fat5__ft *ft;                      // fine-tuning on pairs (train_file), else NULL: UL2 over `data`
};

static int fat5__task_of(const fat5_train_config *c);         // the task heads ([9.4])
static fat5_status fat5__task_model(fat5_trainer *t);
static fat5_status fat5__ft_next_batch(fat5_trainer *t, fat5_batch *b);
static fat5_status fat5__ft_get_state(const fat5_trainer *t, char *buf, size_t cap);
static fat5_status fat5__ft_set_state(fat5_trainer *t, const char *state);
static double fat5__ft_epoch(const fat5_trainer *t);
static fat5_status fat5__ft_open(fat5_trainer *t);
static void fat5__ft_destroy(fat5_trainer *t);
static void fat5__ft_fingerprint(const fat5_trainer *t, char *buf, size_t cap);
static int fat5__ft_has_eval(const fat5_trainer *t);
static fat5_status fat5__ft_eval_loss(fat5_trainer *t, double *loss);
static fat5_status fat5__ft_evaluate(fat5_trainer *t, int64_t step, fat5_train_metrics *r);
static void fat5__ft_log(fat5_trainer *t, fat5__sb *b, const fat5_train_metrics *r);
static fat5_status fat5__ft_save_files(fat5_trainer *t, const char *tmp, int64_t step);
static int fat5__ft_save_meta(const fat5_trainer *t, int64_t step, const char **meta, char (*buf)[40]);
static fat5_status fat5__ft_after_save(fat5_trainer *t, int64_t step);
static int64_t fat5__ft_best_step(const fat5_trainer *t);
static fat5_status fat5__ft_resume(fat5_trainer *t, const fat5_st_file *f, const char *path);

// The task's batches: the pairs sampler's (fine-tuning) or the UL2 sampler's, and its state.
static fat5_status fat5__train_src_next(fat5_trainer *t, fat5_batch *b) {
    return t->ft ? fat5__ft_next_batch(t, b) : fat5_ul2_next_batch(t->sampler, b);
}
static fat5_status fat5__train_src_state(const fat5_trainer *t, char *buf, size_t cap) {
    return t->ft ? fat5__ft_get_state(t, buf, cap) : fat5_ul2_get_state(t->sampler, buf, cap);
}

FAT5_API void fat5_train_request_stop(fat5_trainer *t) {
    if (t) t->stop_asked = 1;
}

FAT5_API fat5_model *fat5_train_model(fat5_trainer *t) { return t ? t->m : NULL; }
FAT5_API const fat5_train_config *fat5_train_get_config(const fat5_trainer *t) { return t ? &t->cfg : NULL; }
FAT5_API int fat5_train_done(const fat5_trainer *t) {
    return !t || fat5_optim_get_step(t->o) >= t->cfg.optim.total_steps;
}

// a copy of batch s into d's buffer (its head's targets too: c, the model's config)
static fat5_status fat5__tbatch_copy(fat5_ctx *ctx, const fat5_model_config *c, fat5__tbatch *d, const fat5_batch *s) {
    size_t ns = (size_t)s->n_seq + 1, te = (size_t)s->n_enc_tokens, td = (size_t)s->n_dec_tokens;
    int64_t nl, nt;
    size_t need;
    fat5__batch_head_len(c, s, &nl, &nt);
    need = 2 * ns + te + 2 * td + (size_t)nl + (size_t)nt;
    if (need > d->cap) {
        int32_t *nb = FAT5__CAST(int32_t *, fat5__realloc(ctx, d->buf, need * sizeof *nb));
        if (!nb) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory for a batch");
        d->buf = nb;
        d->cap = need;
    }
    d->b = *s;
    memcpy(d->buf, s->enc_cu_seqlens, ns * 4);
    memcpy(d->buf + 2 * ns, s->enc_tokens, te * 4);
    d->b.enc_cu_seqlens = d->buf;
    d->b.enc_tokens = d->buf + 2 * ns;
    if (s->dec_cu_seqlens) {
        memcpy(d->buf + ns, s->dec_cu_seqlens, ns * 4);
        d->b.dec_cu_seqlens = d->buf + ns;
    }
    if (s->labels) {
        memcpy(d->buf + 2 * ns + te, s->labels, td * 4);
        d->b.labels = d->buf + 2 * ns + te;
    }
    if (nl) {   // a task head's targets, after everything else
        memcpy(d->buf + 2 * ns + te + 2 * td, s->head_labels, (size_t)nl * 4);
        d->b.head_labels = d->buf + 2 * ns + te + 2 * td;
    }
    if (nt) {
        memcpy(d->buf + 2 * ns + te + 2 * td + nl, s->head_targets, (size_t)nt * 4);
        d->b.head_targets = (const float *)(const void *)(d->buf + 2 * ns + te + 2 * td + nl);
    }
    d->b.dec_tokens = NULL;
    if (s->dec_tokens) {
        memcpy(d->buf + 2 * ns + te + td, s->dec_tokens, td * 4);
        d->b.dec_tokens = d->buf + 2 * ns + te + td;
    }
    return FAT5_OK;
}

static double fat5__batch_flops(const fat5_model_config *c, const fat5_batch *b);
static double fat5__seq_flops(const fat5_model_config *c, double le, double ld);

// Appends batch b's examples to the pool, in micro-batch `bin`.
static fat5_status fat5__tpool_add(fat5_trainer *t, const fat5_batch *b, int bin) {
    fat5__tpool *p = &t->pool;
    size_t ns = (size_t)b->n_seq, need = p->n_ids + (size_t)(b->n_enc_tokens + b->n_dec_tokens), s;
    if (need > p->cap_ids) {
        size_t cap = need + need / 2;
        int32_t *n = FAT5__CAST(int32_t *, fat5__realloc(t->dctx, p->ids, cap * sizeof *n));
        if (!n) return fat5__err(t->dctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory for a step's batches");
        p->ids = n;
        p->cap_ids = cap;
    }
    if (p->n_ex + ns > p->cap_ex) {
        size_t cap = (p->n_ex + ns) * 3 / 2;
        fat5__tex *n = FAT5__CAST(fat5__tex *, fat5__realloc(t->dctx, p->ex, cap * sizeof *n));
        int32_t *h = FAT5__CAST(int32_t *, fat5__realloc(t->dctx, p->by_rank, cap * sizeof *h));
        fat5__tsort *l = FAT5__CAST(fat5__tsort *, fat5__realloc(t->dctx, p->keys, cap * sizeof *l));
        if (n) p->ex = n;
        if (h) p->by_rank = h;
        if (l) p->keys = l;
        if (!n || !h || !l) return fat5__err(t->dctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory for a step's batches");
        p->cap_ex = cap;
    }
    for (s = 0; s < ns; s++) {
        fat5__tex *x = &p->ex[p->n_ex++];
        int32_t e0 = b->enc_cu_seqlens[s], d0 = b->dec_cu_seqlens[s], j;
        x->ne = b->enc_cu_seqlens[s + 1] - e0;
        x->nd = b->dec_cu_seqlens[s + 1] - d0;
        x->at = (int64_t)p->n_ids;
        x->bin = bin;
        x->cost = fat5__seq_flops(&t->m->cfg, x->ne, x->nd);
        memcpy(p->ids + p->n_ids, b->enc_tokens + e0, (size_t)x->ne * 4);
        memcpy(p->ids + p->n_ids + x->ne, b->labels + d0, (size_t)x->nd * 4);
        p->n_ids += (size_t)(x->ne + x->nd);
        for (x->n_lab = 0, j = 0; j < x->nd; j++) x->n_lab += b->labels[d0 + j] != -100;
        p->bin_e[bin] += x->ne;
        p->bin_d[bin] += x->nd;
        p->bin_n[bin]++;
        p->rank_cost[bin / t->cfg.grad_accum] += x->cost;
    }
    return FAT5_OK;
}

// The busiest rank's cost over the ranks' mean.
static double fat5__tpool_spread(const fat5__tpool *p, int world) {
    double mx = 0, sum = 0;
    int r;
    for (r = 0; r < world; r++) {
        sum += p->rank_cost[r];
        if (p->rank_cost[r] > mx) mx = p->rank_cost[r];
    }
    return sum > 0 ? mx * world / sum : 1;
}

// cost, then index: a total order, so qsort's result is the same on every rank
static int fat5__tsort_cmp(const void *a, const void *b) {
    const fat5__tsort *x = (const fat5__tsort *)a, *y = (const fat5__tsort *)b;
    if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

#define FAT5__BALANCE_WORK 2e7   // examples and pairs looked at in one step's balancing, at most

// Evens the ranks' FLOPs, one exchange a round: the busiest rank H gives an example to one of
// rank L's micro-batches, or swaps one for a cheaper one of L, whichever brings the two closest;
// L is the idlest rank with such an exchange. Every micro-batch stays within the token budgets and
// non-empty. For each example of H, L's examples are searched by cost from the ideal partner
// outwards, so a round costs about |H| log |L|. Stops when the gap to the idlest rank is under
// 0.1% of the mean, when H has no exchange left, or after FAT5__BALANCE_WORK. Deterministic: every
// rank computes the same exchanges.
static void fat5__tpool_balance(fat5__tpool *p, int world, int k, int64_t max_e, int64_t max_d) {
    int32_t *at = p->rank_at, *fill = p->rank_at + world + 1;
    double mean = 0, work = 0;
    int found = 1, r, j;
    size_t i;
    if (p->n_ex > INT32_MAX) return;
    for (r = 0; r < world; r++) mean += p->rank_cost[r] / world;
    while (found && work < FAT5__BALANCE_WORK) {
        int H;
        found = 0;
        work += (double)(p->n_ex + (size_t)world);
        // the examples grouped by rank (in order), the ranks idlest first
        memset(at, 0, (size_t)(world + 1) * sizeof *at);
        for (i = 0; i < p->n_ex; i++) at[p->ex[i].bin / k + 1]++;
        for (r = 0; r < world; r++) at[r + 1] += at[r];
        for (r = 0; r < world; r++) fill[r] = at[r];
        for (i = 0; i < p->n_ex; i++) p->by_rank[fill[p->ex[i].bin / k]++] = (int32_t)i;
        for (r = 0; r < world; r++) p->ranks[r].cost = p->rank_cost[r], p->ranks[r].i = r;
        qsort(p->ranks, (size_t)world, sizeof *p->ranks, fat5__tsort_cmp);
        H = p->ranks[world - 1].i;
        for (j = 0; j < world - 1 && !found && work < FAT5__BALANCE_WORK; j++) {
            int L = p->ranks[j].i, a, bl = -1, nl = at[L + 1] - at[L];
            int32_t bx = -1, by = -1;
            double gap = p->rank_cost[H] - p->rank_cost[L], best = gap;   // best: |gap - 2 moved|
            if (gap <= 1e-3 * mean) break;   // and the next ranks are closer still
            for (a = 0; a < nl; a++) {
                int32_t e = p->by_rank[at[L] + a];
                p->keys[a].cost = p->ex[e].cost;
                p->keys[a].i = e;
            }
            qsort(p->keys, (size_t)nl, sizeof *p->keys, fat5__tsort_cmp);
            work += (double)nl * 4;
            for (a = at[H]; a < at[H + 1] && work < FAT5__BALANCE_WORK; a++) {
                const fat5__tex *x = &p->ex[p->by_rank[a]];
                double target = x->cost - gap / 2;   // the partner's cost that evens H and L
                int hb = x->bin, lb, lo = 0, hi = nl, b, dir;
                work += k + 16;
                if (p->bin_n[hb] > 1)
                    for (lb = L * k; lb < L * k + k; lb++) {   // x moved to one of L's micro-batches
                        double v = fabs(gap - 2 * x->cost);
                        if (v < best && p->bin_e[lb] + x->ne <= max_e && p->bin_d[lb] + x->nd <= max_d) {
                            best = v;
                            bx = p->by_rank[a], by = -1, bl = lb;
                        }
                    }
                while (lo < hi) {   // the first of L's examples that costs target or more
                    int mid = lo + (hi - lo) / 2;
                    if (p->keys[mid].cost < target) lo = mid + 1;
                    else hi = mid;
                }
                for (dir = 0; dir < 2; dir++)   // x swapped with y: upwards from target, then downwards;
                    for (b = dir ? lo - 1 : lo; b >= 0 && b < nl; b += dir ? -1 : 1) {   // |gap - 2 moved| grows
                        const fat5__tex *y = &p->ex[p->keys[b].i];
                        double v = fabs(gap - 2 * (x->cost - y->cost));
                        if (v >= best || y->cost >= x->cost) break;
                        work += 1;
                        lb = y->bin;
                        if (p->bin_e[lb] - y->ne + x->ne > max_e || p->bin_d[lb] - y->nd + x->nd > max_d ||
                            p->bin_e[hb] - x->ne + y->ne > max_e || p->bin_d[hb] - x->nd + y->nd > max_d)
                            continue;
                        best = v;
                        bx = p->by_rank[a], by = p->keys[b].i, bl = lb;
                        break;
                    }
            }
            if (bx < 0) continue;   // none with L: the next idlest
            {
                fat5__tex *x = &p->ex[bx];
                int hb = x->bin;
                double moved = x->cost;
                p->bin_e[hb] -= x->ne, p->bin_d[hb] -= x->nd, p->bin_n[hb]--;
                p->bin_e[bl] += x->ne, p->bin_d[bl] += x->nd, p->bin_n[bl]++;
                x->bin = bl;
                if (by >= 0) {
                    fat5__tex *y = &p->ex[by];
                    moved -= y->cost;
                    p->bin_e[bl] -= y->ne, p->bin_d[bl] -= y->nd, p->bin_n[bl]--;
                    p->bin_e[hb] += y->ne, p->bin_d[hb] += y->nd, p->bin_n[hb]++;
                    y->bin = hb;
                }
                p->rank_cost[H] -= moved;
                p->rank_cost[L] += moved;
                found = 1;
            }
        }
    }
}

// This rank's k micro-batches, bins first .. first + k - 1 of the pool, in one pass over the pool's
// examples (each bin's in pool order).
static fat5_status fat5__tbatches_from_pool(fat5_ctx *ctx, fat5__tbatch *d, int k, const fat5__tpool *p,
                                            int first) {
    size_t i;
    int j;
    for (j = 0; j < k; j++) {
        fat5__tbatch *b = &d[j];
        size_t ns = (size_t)p->bin_n[first + j] + 1, te = (size_t)p->bin_e[first + j], td = (size_t)p->bin_d[first + j];
        if (2 * ns + te + td > b->cap) {
            int32_t *nb = FAT5__CAST(int32_t *, fat5__realloc(ctx, b->buf, (2 * ns + te + td) * sizeof *nb));
            if (!nb) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory for a batch");
            b->buf = nb;
            b->cap = 2 * ns + te + td;
        }
        memset(&b->b, 0, sizeof b->b);
        b->b.n_enc_tokens = (int64_t)te;
        b->b.n_dec_tokens = (int64_t)td;
        b->b.enc_cu_seqlens = b->buf;
        b->b.dec_cu_seqlens = b->buf + ns;
        b->b.enc_tokens = b->buf + 2 * ns;
        b->b.labels = b->buf + 2 * ns + te;
        b->buf[0] = b->buf[ns] = 0;
    }
    for (i = 0; i < p->n_ex; i++) {   // buf: enc cu [ns] | dec cu [ns] | enc tokens [te] | labels [td]
        const fat5__tex *x = &p->ex[i];
        fat5__tbatch *b;
        size_t ns, te;
        int32_t *ecu, *dcu;
        int64_t n;
        if (x->bin < first || x->bin >= first + k) continue;
        b = &d[x->bin - first];
        ns = (size_t)p->bin_n[x->bin] + 1, te = (size_t)p->bin_e[x->bin];
        ecu = b->buf, dcu = b->buf + ns;
        n = b->b.n_seq++;
        memcpy(b->buf + 2 * ns + ecu[n], p->ids + x->at, (size_t)x->ne * 4);
        memcpy(b->buf + 2 * ns + te + dcu[n], p->ids + x->at + x->ne, (size_t)x->nd * 4);
        ecu[n + 1] = ecu[n] + x->ne;
        dcu[n + 1] = dcu[n] + x->nd;
    }
    return FAT5_OK;
}

// Draws the next step's micro-batches into g: every rank's, in rank order, keeping this rank's
// and the label counts of all. With several ranks and balance_ranks, the examples of all are
// first exchanged between the ranks' micro-batches to even their FLOPs (fat5__tpool_balance): the
// step's batch, its tokens and its labels are the same, only which rank trains which example
// changes. Uses only the data context.
static void fat5__tgroup_draw(fat5_trainer *t, fat5__tgroup *g) {
    fat5_batch b;
    fat5__tpool *p = &t->pool;
    int k = t->cfg.grad_accum, i, pool = t->world > 1 && t->m->cfg.head == FAT5_HEAD_LM;   // (a head's batches: as drawn)
    int64_t j;
    memset(&b, 0, sizeof b);
    g->tokens = 0;
    g->flops = 0;
    g->balance = 1;
    if (pool) {
        p->n_ids = p->n_ex = 0;
        memset(p->bin_e, 0, (size_t)(t->world * k) * sizeof *p->bin_e);
        memset(p->bin_d, 0, (size_t)(t->world * k) * sizeof *p->bin_d);
        memset(p->bin_n, 0, (size_t)(t->world * k) * sizeof *p->bin_n);
        memset(p->rank_cost, 0, (size_t)t->world * sizeof *p->rank_cost);
    }
    g->st = fat5__train_src_state(t, g->state, sizeof g->state);
    for (i = 0; i < t->world * k && g->st == FAT5_OK; i++) {
        if ((g->st = fat5__train_src_next(t, &b)) != FAT5_OK) break;
        g->tokens += b.n_enc_tokens + b.n_dec_tokens;
        if (pool) {   // FLOPs and labels counted per example
            g->st = fat5__tpool_add(t, &b, i);
            continue;
        }
        g->flops += 3 * fat5__batch_flops(&t->m->cfg, &b);
        g->n_labels[i] = fat5__batch_targets(t->m, &b);
        g->st = fat5__tbatch_copy(t->dctx, &t->m->cfg, &g->mb[i], &b);
    }
    g->epoch_f = t->ft ? fat5__ft_epoch(t) : 0;
    if (!pool || g->st) return;
    for (i = 0; i < t->world; i++) g->flops += 3 * p->rank_cost[i];
    if (t->cfg.balance_ranks)
        fat5__tpool_balance(p, t->world, k, t->cfg.ul2.enc_tokens, t->cfg.ul2.dec_tokens);
    g->balance = fat5__tpool_spread(p, t->world);
    memset(g->n_labels, 0, (size_t)(t->world * k) * sizeof *g->n_labels);
    for (j = 0; j < (int64_t)p->n_ex; j++) g->n_labels[p->ex[j].bin] += p->ex[j].n_lab;
    if (g->st == FAT5_OK) g->st = fat5__tbatches_from_pool(t->dctx, g->mb, k, p, t->rank * k);
}

#ifndef FAT5_NO_THREADS
static void *fat5__tgroup_thread(void *arg) {
    fat5_trainer *t = FAT5__CAST(fat5_trainer *, arg);
    fat5__tgroup_draw(t, &t->grp[t->ahead]);
    return NULL;
}
#endif

// Waits for a drawing under way on the host thread.
static void fat5__train_join(fat5_trainer *t) {
#ifndef FAT5_NO_THREADS
    if (t->thread_running) {
        pthread_join(t->thread, NULL);
        t->thread_running = 0;
    }
#else
    (void)t;
#endif
}

// The group for this step: the one drawn ahead, or one drawn now. Starts drawing the next one on
// the host thread when prefetching.
static fat5_status fat5__train_next_group(fat5_trainer *t, int more, fat5__tgroup **out) {
    fat5__tgroup *g;
    fat5__train_join(t);
    if (t->ahead < 0) {
        t->ahead = 0;
        fat5__tgroup_draw(t, &t->grp[0]);
    }
    g = &t->grp[t->ahead];
    t->ahead = -1;
    *out = g;
    if (g->st) return fat5__err(t->ctx, g->st, "%s", fat5_last_error(t->dctx));
#ifndef FAT5_NO_THREADS
    if (t->prefetch && more) {
        t->ahead = g == &t->grp[0] ? 1 : 0;
        if (pthread_create(&t->thread, NULL, fat5__tgroup_thread, t) == 0) t->thread_running = 1;
        else fat5__tgroup_draw(t, &t->grp[t->ahead]);   // no thread: draw it now
    }
#else
    (void)more;
#endif
    return FAT5_OK;
}

// Forward FLOPs of one sequence of le inputs and ld targets, the usual convention (2 per
// multiply-add, attention scores and values counted in full); a training step is 3 times this.
static double fat5__seq_flops(const fat5_model_config *c, double le, double ld) {
    double D = (double)c->d_model, I = (double)(c->num_heads * c->d_kv), F = (double)c->d_ff,
           V = (double)c->vocab_size, ffn = 2.0 * D * F * (c->gated ? 3 : 2), qkvo = 8.0 * D * I;
    double f = (double)c->num_layers * (le * (qkvo + ffn) + 4.0 * I * le * le);
    f += (double)c->num_decoder_layers * (ld * (qkvo + ffn + 4.0 * D * I) + le * 4.0 * D * I + 4.0 * I * ld * ld +
                                          4.0 * I * le * ld);
    return f + 2.0 * ld * D * V;
}

// ... and of a packed batch: the sum over its sequences.
// (a task head: the decoder's input is the input's when it has a decoder; its own products, a few
// outputs per row or token, are left out, as is the lm_head of the LM's formula)
static double fat5__batch_flops(const fat5_model_config *c, const fat5_batch *b) {
    double f = 0, D = (double)c->d_model, V = (double)c->vocab_size;
    int64_t s;
    int lm = c->head == FAT5_HEAD_LM, dec = fat5__head_has_decoder(c->head);
    fat5_model_config e = *c;
    if (!dec) e.num_decoder_layers = 0;   // an encoder-only head
    for (s = 0; s < b->n_seq; s++) {
        double le = (double)(b->enc_cu_seqlens[s + 1] - b->enc_cu_seqlens[s]);
        double ld = lm ? (double)(b->dec_cu_seqlens[s + 1] - b->dec_cu_seqlens[s]) : dec ? le : 0;
        f += fat5__seq_flops(&e, le, ld) - (lm ? 0 : 2.0 * ld * D * V);
    }
    return f;
}

static fat5_status fat5__train_sampler(fat5_trainer *t, int split, uint64_t seed, fat5_ul2 **out) {
    fat5_ul2_config u = t->cfg.ul2;
    int64_t V = fat5_tokens_vocab_size(t->tokens);
    fat5_status st;
    u.split = split;
    u.eval_fraction = t->cfg.eval_fraction;
    u.seed = seed;
    if (u.n_sentinels <= 0) {
        // from the top of the vocabulary: every id above the bytes for byte vocabularies (ByT5),
        // else 100 (T5's <extra_id_0> .. <extra_id_99>) or a quarter of a smaller vocabulary
        int64_t n = V > 259 && V <= 1024 ? V - 259 : (V / 4 < 100 ? V / 4 : 100);
        u.sentinel_first = (int32_t)(V - 1);
        u.n_sentinels = (int32_t)n;
    }
    if ((st = fat5_ul2_create(t->dctx, &u, t->tokens, out))) return fat5__err(t->ctx, st, "%s", fat5_last_error(t->dctx));
    return FAT5_OK;
}

// "a.tok,b.tok" opened as one stream
static fat5_status fat5__train_open_data(fat5_trainer *t) {
    char *buf, *p, *paths[FAT5__TRAIN_MAX_FILES];
    int n = 0;
    fat5_status st;
    if (!t->cfg.data[0]) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "training: no data (option data: token files)");
    if (!(buf = FAT5__CAST(char *, fat5__malloc(t->ctx, strlen(t->cfg.data) + 1))))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "training: out of memory");
    memcpy(buf, t->cfg.data, strlen(t->cfg.data) + 1);
    for (p = buf; p && *p;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (*p) {
            if (n == FAT5__TRAIN_MAX_FILES) {
                fat5__free(t->ctx, buf);
                return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "training: more than %d data files", FAT5__TRAIN_MAX_FILES);
            }
            paths[n++] = p;
        }
        p = comma ? comma + 1 : NULL;
    }
    st = fat5_tokens_load(t->dctx, (const char *const *)paths, n, &t->tokens);
    fat5__free(t->ctx, buf);
    if (st) return fat5__err(t->ctx, st, "%s", fat5_last_error(t->dctx));
    return FAT5_OK;
}

// the first line where two texts differ, for messages
static void fat5__first_diff(const char *a, const char *b, char *out, size_t cap) {
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') la = a + 1, lb = b + 1;
        a++, b++;
    }
    {
        size_t na = strcspn(la, "\n"), nb = strcspn(lb, "\n");
        snprintf(out, cap, "%.*s (here) vs %.*s (checkpoint)", (int)(na < 80 ? na : 80), la, (int)(nb < 80 ? nb : 80), lb);
    }
}

// --- checkpoint directories

// Makes the entries of dir (files created, renamed or removed in it) durable.
static fat5_status fat5__fsync_dir(fat5_ctx *ctx, const char *dir) {
    int fd = fat5__fs_open_dir(dir), rc, e;
    if (fd < 0) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    rc = fat5__fs_fsync(fd, dir);
    e = errno;
    (void)fat5__fs_close(fd, dir);
    if (rc != 0 && e != EINVAL) return fat5__err(ctx, FAT5_ERR_IO, "%s: fsync failed: %s", dir, strerror(e));
    return FAT5_OK;
}

// Removes a checkpoint directory that fat5 wrote: its files (none are directories), then itself.
static void fat5__rm_ckpt(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4400];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        (void)fat5__fs_unlink(p);
    }
    closedir(d);
    (void)fat5__fs_rmdir(dir);
}

static int fat5__is_step_name(const char *s, int64_t *step) {
    int64_t v = 0;
    int n = 0;
    if (strncmp(s, "step-", 5) != 0) return 0;
    for (s += 5; *s >= '0' && *s <= '9' && n < 18; s++, n++) v = v * 10 + (*s - '0');
    if (*s || n == 0) return 0;
    *step = v;
    return 1;
}

// Deletes the checkpoint directory `dir` (out's step-N, or its .old-step-N, of step `step`) so that
// it goes whole or not at all: it is renamed .del-step-N, the rename is made durable (a power loss
// cannot bring the name back with files missing), then its files are removed. A crash or a failed
// removal leaves a .del-step-N, which the next start removes; a directory that cannot be renamed
// stays whole.
static void fat5__ckpt_discard(const char *out, const char *dir, int64_t step) {
    char del[4400];
    snprintf(del, sizeof del, "%s/.del-step-%08lld", out, (long long)step);
    fat5__rm_ckpt(del);
    if (fat5__fs_rename(dir, del) != 0 || fat5__fsync_dir(NULL, out) != FAT5_OK) return;
    fat5__rm_ckpt(del);
}

// A save of a step that has a checkpoint already moves the old one aside (".old-step-N") before the
// new one takes its name, and discards it after: a crash in between leaves the old one whole (an
// .old-step-N is whole whenever it exists). This puts step `step`'s back where no step-N is (the
// crash came before the new one's rename) and discards it where one is (after).
static void fat5__ckpt_recover_step(const char *out, int64_t step) {
    char old[4400], fin[4400];
    snprintf(old, sizeof old, "%s/.old-step-%08lld", out, (long long)step);
    snprintf(fin, sizeof fin, "%s/step-%08lld", out, (long long)step);
    if (!fat5__is_dir(old)) return;
    if (fat5__is_dir(fin)) fat5__ckpt_discard(out, old, step);
    else if (fat5__fs_rename(old, fin) == 0) (void)fat5__fsync_dir(NULL, out);
}

// fat5__ckpt_recover_step for every .old-step-N of out.
static void fat5__ckpt_recover(const char *out) {
    DIR *d = opendir(out);
    struct dirent *e;
    int64_t steps[256], s;
    int n = 0, i;
    if (!d) return;
    while ((e = readdir(d)) != NULL && n < 256)   // collected first: recovering renames entries
        if (strncmp(e->d_name, ".old-", 5) == 0 && fat5__is_step_name(e->d_name + 5, &s)) steps[n++] = s;
    closedir(d);
    for (i = 0; i < n; i++) fat5__ckpt_recover_step(out, steps[i]);
}

// Deletes what a killed save or prune left (.tmp-step-N being written, .del-step-N being deleted,
// latest.tmp.* being written) and all but the newest `keep` checkpoints, each discarded whole
// (fat5__ckpt_discard), except step `spare` (the best one of a fine-tuning run; -1: none). A
// .del-step-N's rename is made durable before its files go.
static void fat5__ckpt_prune(const char *out, int keep, int64_t spare) {
    DIR *d = opendir(out);
    struct dirent *e;
    int64_t steps[4096], s;
    int n = 0, i, j, synced = 0;
    char p[4400];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        int del = strncmp(e->d_name, ".del-step-", 10) == 0;
        if (del || strncmp(e->d_name, ".tmp-step-", 10) == 0) {
            if (del && !synced) synced = fat5__fsync_dir(NULL, out) == FAT5_OK;
            snprintf(p, sizeof p, "%s/%s", out, e->d_name);
            if (!del || synced) fat5__rm_ckpt(p);
        } else if (strncmp(e->d_name, "latest.tmp.", 11) == 0 || strncmp(e->d_name, "best.tmp.", 9) == 0) {
            snprintf(p, sizeof p, "%s/%s", out, e->d_name);
            (void)fat5__fs_unlink(p);
        } else if (fat5__is_step_name(e->d_name, &s) && n < 4096) {
            steps[n++] = s;
        }
    }
    closedir(d);
    if (keep <= 0 || n <= keep) return;
    for (i = 1; i < n; i++)   // insertion sort: a handful of entries
        for (j = i; j > 0 && steps[j - 1] > steps[j]; j--) s = steps[j], steps[j] = steps[j - 1], steps[j - 1] = s;
    for (i = 0; i < n - keep; i++) {
        if (steps[i] == spare) continue;
        snprintf(p, sizeof p, "%s/step-%08lld", out, (long long)steps[i]);
        fat5__ckpt_discard(out, p, steps[i]);
    }
}

// One trainer per output directory: rank 0 holds an advisory lock on OUTPUT_DIR/.lock while its
// trainer lives (flock: the system drops it when the process ends, however it ends, so a killed run
// never blocks the next) and writes its pid there, which a trainer refused names. Two trainers
// appending to one metrics.jsonl and pruning each other's checkpoints would lose both runs.
static fat5_status fat5__train_lock(fat5_trainer *t) {
#ifdef _WIN32
    (void)t;
    return FAT5_OK;
#else
    fat5_ctx *ctx = t->ctx;
    char p[4400], pid[32];
    ssize_t k;
    int fd, e;
    snprintf(p, sizeof p, "%s/.lock", t->cfg.output_dir);
    if ((fd = open(p, O_RDWR | O_CREAT, 0644)) < 0)
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", p, strerror(errno));
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);   // not for programs the caller starts
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        e = errno;
        k = read(fd, pid, sizeof pid - 1);
        pid[k > 0 ? k : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(fd);
        if (e == EWOULDBLOCK)
            return fat5__err(ctx, FAT5_ERR_STATE, "output_dir %s is in use by another trainer (process %s holds %s): "
                             "one trainer per output directory", t->cfg.output_dir, pid[0] ? pid : "unknown", p);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot lock: %s", p, strerror(e));
    }
    snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, strlen(pid), 0) != (ssize_t)strlen(pid)) {
        e = errno;
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot write: %s", p, strerror(e));
    }
    t->lock_fd = fd;
    return FAT5_OK;
#endif
}

// The data set's identity, recorded in a checkpoint and checked on resume.
static void fat5__data_fingerprint(const fat5_trainer *t, char *buf, size_t cap) {
    if (t->ft) {
        fat5__ft_fingerprint(t, buf, cap);
        return;
    }
    snprintf(buf, cap, "tokens=%lld docs=%lld vocab=%lld eos=%d eval_fraction=%.17g",
             (long long)fat5_tokens_count(t->tokens), (long long)fat5_tokens_doc_count(t->tokens),
             (long long)fat5_tokens_vocab_size(t->tokens), (int)fat5_tokens_eos_id(t->tokens), t->cfg.eval_fraction);
}

// The frozen tensors of m, their names (the checkpoint scheme's) joined by commas in parameter
// order ("" when none), as a training checkpoint records them; *out is freed with fat5__free.
static fat5_status fat5__frozen_names(fat5_model *m, char **out) {
    fat5__sb b;
    int i, n = 0;
    fat5__sb_init(&b, m->ctx);
    fat5__sb_puts(&b, "");
    for (i = 0; i < m->n_params; i++)
        if (m->params[i].frozen) fat5__sb_printf(&b, "%s%s", n++ ? "," : "", m->params[i].io_name);
    if (b.oom || !b.buf) {
        fat5__sb_free(&b);
        return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "checkpoint: out of memory for the frozen tensors' names");
    }
    *out = b.buf;
    return FAT5_OK;
}

// The first name of the comma-separated list a that the list b lacks, into out ("" when none).
static void fat5__frozen_missing(const char *a, const char *b, char *out, size_t cap) {
    out[0] = 0;
    while (*a) {
        size_t k = strcspn(a, ",");
        const char *e = b;
        int found = 0;
        while (*e && !found) {   // b's names, one at a time
            size_t n = strcspn(e, ",");
            found = n == k && strncmp(e, a, k) == 0;
            e += n + (e[n] == ',');
        }
        if (!found) {
            snprintf(out, cap, "%.*s", (int)(k < 150 ? k : 150), a);
            return;
        }
        a += k + (a[k] == ',');
    }
}

FAT5_API fat5_status fat5_train_save(fat5_trainer *t, const char **dir_out) {
    fat5_ctx *ctx = t->ctx;
    fat5_model *m = t->m;
    char tmp[4200], fin[4200], old[4200], path[4400], latest[64], sampler[512], data[256], num[6][40], *json = NULL;
    char *frozen = NULL;
    const char *meta[30];
    fat5_st_write_tensor w[FAT5__OPTIM_ARRAYS];
    fat5__optim_array arr[FAT5__OPTIM_ARRAYS];
    float *mom = NULL;
    size_t n = 0, json_len = 0;
    int64_t step = fat5_optim_get_step(t->o);
    int n_arr = fat5__optim_arrays(t->o, arr), k;
    fat5_status st;
    if (dir_out) *dir_out = NULL;
    if (t->comm && t->comm->failed) {   // a step may have updated the weights from incomplete sums
        char why[300];
        snprintf(why, sizeof why, "%.290s", fat5_last_error(ctx));
        return fat5__err(ctx, FAT5_ERR_STATE, "save: this rank failed (%s); its weights and moments may hold an "
                         "incomplete update, so no checkpoint is written", why);
    }
    if (t->rank != 0) {   // rank 0 writes it (every rank holds the same weights and moments)
        snprintf(t->ckpt, sizeof t->ckpt, "%s/step-%08lld", t->cfg.output_dir, (long long)step);
        if (dir_out) *dir_out = t->ckpt;
        return FAT5_OK;
    }
    if ((st = fat5__mkdir(ctx, t->cfg.output_dir))) return st;
    snprintf(fin, sizeof fin, "%s/step-%08lld", t->cfg.output_dir, (long long)step);
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%08lld", t->cfg.output_dir, (long long)step);
    fat5__rm_ckpt(tmp);
    if ((st = fat5__mkdir(ctx, tmp))) return st;
    if ((st = fat5_model_save(m, tmp))) goto fail;
    if (t->ft && (st = fat5__ft_save_files(t, tmp, step))) goto fail;   // the step's predictions
    // the sampler where the next step starts: before a group drawn ahead, if there is one
    fat5__train_join(t);
    if (t->ahead >= 0) snprintf(sampler, sizeof sampler, "%s", t->grp[t->ahead].state);
    else if ((st = fat5__train_src_state(t, sampler, sizeof sampler))) goto fail;
    if ((st = fat5_model_config_to_json(ctx, &m->cfg, &json, &json_len))) goto fail;
    for (k = 0; k < n_arr; k++) n += arr[k].n;   // the optimizer's state arrays (fat5__optim_arrays)
    mom = FAT5__CAST(float *, fat5__malloc(ctx, (n ? n : 1) * sizeof(float)));
    if (!mom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "checkpoint: out of memory for the optimizer state");
        goto fail;
    }
    memset(w, 0, sizeof w);
    for (n = 0, k = 0; k < n_arr; n += arr[k].n, k++) {
        if ((st = m->be->download(ctx, mom + n, arr[k].addr, arr[k].n * 4))) goto fail;
        w[k].name = arr[k].name;
        w[k].ndim = 1;
        w[k].shape[0] = (int64_t)arr[k].n;
        w[k].data = mom + n;
    }
    fat5__data_fingerprint(t, data, sizeof data);
    snprintf(num[0], sizeof num[0], "%lld", (long long)step);
    snprintf(num[1], sizeof num[1], "%lld", (long long)t->tokens_seen);
    snprintf(num[2], sizeof num[2], "%lld", (long long)t->n_skipped);
    fat5__fmt_g(num[3], sizeof num[3], 17, t->elapsed_before + (fat5__now_s() - t->t_start));
    meta[0] = "format", meta[1] = "fat5-training-state";
    meta[2] = "version", meta[3] = "1";
    meta[4] = "step", meta[5] = num[0];
    meta[6] = "tokens_seen", meta[7] = num[1];
    meta[8] = "skipped_steps", meta[9] = num[2];
    meta[10] = "elapsed_s", meta[11] = num[3];
    meta[12] = "sampler", meta[13] = sampler;
    meta[14] = "data", meta[15] = data;
    meta[16] = "model_config", meta[17] = json;
    meta[18] = "fat5_version", meta[19] = FAT5_VERSION_STRING;
    meta[20] = "optimizer", meta[21] = fat5__optim_kind_name(t->cfg.optim.kind);
    if ((st = fat5__frozen_names(m, &frozen))) goto fail;
    meta[22] = "frozen", meta[23] = frozen;
    k = t->ft ? fat5__ft_save_meta(t, step, meta + 24, num + 4) : 0;   // the best checkpoint, this one included
    snprintf(path, sizeof path, "%s/training_state.safetensors", tmp);
    if ((st = fat5_st_write(ctx, path, w, n_arr, meta, 12 + k))) goto fail;
    if ((st = fat5__fsync_dir(ctx, tmp))) goto fail;
    // the complete directory takes its name in one rename; an older one of the same step is moved
    // aside first and discarded only after (fat5__ckpt_recover_step): at every instant one of them
    // is whole. The rename is durable before latest names it, and latest's before anything older goes.
    snprintf(old, sizeof old, "%s/.old-step-%08lld", t->cfg.output_dir, (long long)step);
    fat5__ckpt_recover_step(t->cfg.output_dir, step);   // what an earlier save of this step left aside
    if (fat5__is_dir(fin) && fat5__fs_rename(fin, old) != 0) {
        st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot move the step's earlier checkpoint aside to %s: %s", fin, old,
                       strerror(errno));
        goto fail;
    }
    if (fat5__fs_rename(tmp, fin) != 0) {
        st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot rename to %s: %s", tmp, fin, strerror(errno));
        fat5__ckpt_recover_step(t->cfg.output_dir, step);   // the earlier one back under its name
        goto fail;
    }
    if ((st = fat5__fsync_dir(ctx, t->cfg.output_dir))) goto fail;
    if (fat5__is_dir(old)) fat5__ckpt_discard(t->cfg.output_dir, old, step);
    snprintf(latest, sizeof latest, "step-%08lld\n", (long long)step);
    snprintf(path, sizeof path, "%s/latest", t->cfg.output_dir);
    if ((st = fat5_write_file_atomic(ctx, path, latest, strlen(latest))) ||
        (st = fat5__fsync_dir(ctx, t->cfg.output_dir)))
        goto fail;
    if (t->ft && (st = fat5__ft_after_save(t, step))) goto fail;   // OUT/best
    fat5__ckpt_prune(t->cfg.output_dir, t->cfg.save_total_limit, fat5__ft_best_step(t));
    fat5__free(ctx, mom);
    fat5__free(ctx, json);
    fat5__free(ctx, frozen);
    snprintf(t->ckpt, sizeof t->ckpt, "%s", fin);
    if (dir_out) *dir_out = t->ckpt;
    return FAT5_OK;
fail:
    fat5__free(ctx, mom);
    fat5__free(ctx, json);
    fat5__free(ctx, frozen);
    fat5__rm_ckpt(tmp);
    return st;
}

// The checkpoint directory a resume path names: itself, or an output directory's latest.
static fat5_status fat5__resume_dir(fat5_ctx *ctx, const char *path, char *out, size_t cap) {
    char p[4400], *text = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/training_state.safetensors", path);
    if (fat5__is_file(p)) {
        snprintf(out, cap, "%s", path);
        return FAT5_OK;
    }
    fat5__ckpt_recover(path);   // a save of a step again that a crash cut short
    snprintf(p, sizeof p, "%s/latest", path);
    if (!fat5__is_file(p))
        return fat5__err(ctx, FAT5_ERR_IO, "resume %s: neither a checkpoint (no training_state.safetensors) nor an "
                         "output directory with a checkpoint (no 'latest')", path);
    if (fat5__read_file(ctx, p, 64, &text, &len)) return fat5__err_prefix(ctx, FAT5_ERR_IO, "resume: ");
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = 0;
    {
        int64_t s;
        int ok = fat5__is_step_name(text, &s);
        if (ok) snprintf(out, cap, "%s/%s", path, text);
        fat5__free(ctx, text);
        if (!ok) return fat5__err(ctx, FAT5_ERR_FORMAT, "resume %s: 'latest' does not name a step-N checkpoint", path);
    }
    return FAT5_OK;
}

// A counter of the training state: decimal digits only ("0x1", " 1", "+1", "1e3" are not the
// numbers fat5 writes), at most 18 of them.
static int fat5__meta_i64(const fat5_st_file *f, const char *key, int64_t *out) {
    const char *v = fat5_st_metadata_find(f, key);
    int64_t x = 0;
    int n = 0;
    if (!v || !*v) return 0;
    for (; *v >= '0' && *v <= '9' && n < 18; v++, n++) x = x * 10 + (*v - '0');
    if (*v) return 0;
    *out = x;
    return 1;
}

// Restores weights (already loaded from dir by the caller), moments, step, sampler and counters.
static fat5_status fat5__train_resume(fat5_trainer *t, const char *dir) {
    fat5_ctx *ctx = t->ctx;
    fat5_model *m = t->m;
    fat5_st_file *f = NULL;
    char path[4400], data[256], *json = NULL;
    const char *v;
    float *mom = NULL;
    size_t n = 0, json_len = 0;
    int64_t step, seen, skipped;
    double el;
    fat5__optim_array arr[FAT5__OPTIM_ARRAYS];
    int idx[FAT5__OPTIM_ARRAYS], n_arr = fat5__optim_arrays(t->o, arr), k, have = 1;
    fat5_status st;
    snprintf(path, sizeof path, "%s/training_state.safetensors", dir);
    if ((st = fat5_st_load(ctx, path, &f))) return st;
    v = fat5_st_metadata_find(f, "format");
    if (!v || strcmp(v, "fat5-training-state") != 0 || !(v = fat5_st_metadata_find(f, "version")) || strcmp(v, "1") != 0) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: not a fat5 training state (format 1)", path);
        goto done;
    }
    if ((st = fat5_model_config_to_json(ctx, &m->cfg, &json, &json_len))) goto done;
    if (!(v = fat5_st_metadata_find(f, "model_config")) || strcmp(v, json) != 0) {
        char diff[256];
        fat5__first_diff(json, v ? v : "", diff, sizeof diff);
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint holds another model: %s", dir, diff);
        goto done;
    }
    fat5__data_fingerprint(t, data, sizeof data);
    if (!(v = fat5_st_metadata_find(f, "data")) || strcmp(v, data) != 0) {
        char a[96], b[96];
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint was trained on other data: %s (here) vs %s",
                       dir, fat5__msg_name(a, sizeof a, data), fat5__msg_name(b, sizeof b, v ? v : "nothing"));
        goto done;
    }
    {   // the frozen tensors: the checkpoint's ("frozen"; none before freezing existed) and this run's
        char *here = NULL, a[160], b[160];
        const char *there = fat5_st_metadata_find(f, "frozen");
        if (!there) there = "";
        if ((st = fat5__frozen_names(m, &here))) goto done;
        if (strcmp(here, there) != 0) {
            char why[400], na[160], nb[160];
            size_t o = 0;
            fat5__frozen_missing(there, here, a, sizeof a);
            fat5__frozen_missing(here, there, b, sizeof b);
            why[0] = 0;
            if (a[0])
                o += (size_t)snprintf(why, sizeof why, "'%s' is frozen in the checkpoint and would train here",
                                      fat5__msg_name(na, sizeof na, a));
            if (b[0] && o < sizeof why)
                snprintf(why + o, sizeof why - o, "%s'%s' would be frozen here and trained in the checkpoint",
                         o ? "; " : "", fat5__msg_name(nb, sizeof nb, b));
            if (!why[0]) snprintf(why, sizeof why, "the same tensors in another order");
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint was trained with other frozen "
                           "parameters than this run's freeze '%.200s': %s. Its optimizer state holds the trainable "
                           "ones only: freeze must select the same tensors as the run that wrote it", dir,
                           t->cfg.freeze, why);
        }
        fat5__free(ctx, here);
        if (st) goto done;
    }
    // the arrays this optimizer keeps (fat5__optim_arrays), each 1-D of its length; a checkpoint
    // of another optimizer (its "optimizer" entry; none before Adafactor: AdamW's) lacks them
    for (k = 0; k < n_arr; k++) {
        idx[k] = fat5_st_find(f, arr[k].name);
        if (idx[k] < 0 || fat5_st_get(f, idx[k])->ndim != 1 || fat5_st_get(f, idx[k])->shape[0] != (int64_t)arr[k].n)
            have = 0;
        n += arr[k].n;
    }
    if (!have) {
        const char *kind = fat5_st_metadata_find(f, "optimizer");
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: no optimizer state for %s (%s%s%s of %zu elements) in this "
                       "checkpoint (its optimizer: %.40s)", path, fat5__optim_kind_name(t->cfg.optim.kind), arr[0].name,
                       n_arr > 1 ? ", " : "", n_arr > 1 ? arr[1].name : "", arr[n_arr - 1].n,
                       kind ? kind : "adamw or adamwscale");
        goto done;
    }
    if (!fat5__meta_i64(f, "step", &step) || !fat5__meta_i64(f, "tokens_seen", &seen) ||
        !fat5__meta_i64(f, "skipped_steps", &skipped) || !(v = fat5_st_metadata_find(f, "elapsed_s")) ||
        !fat5__strtod_c(v, &el) || !fat5_st_metadata_find(f, "sampler")) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: incomplete training state (step, counters or sampler)", path);
        goto done;
    }
    if (skipped > step || !(el >= 0 && el < 1e12) || !(v[0] >= '0' && v[0] <= '9')) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: inconsistent counters: skipped_steps %lld of %lld steps, elapsed_s "
                       "'%.40s'", path, (long long)skipped, (long long)step, v);
        goto done;
    }
    if (step > t->cfg.optim.total_steps) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint is at step %lld, past max_steps %lld", dir,
                       (long long)step, (long long)t->cfg.optim.total_steps);
        goto done;
    }
    mom = FAT5__CAST(float *, fat5__malloc(ctx, (n ? n : 1) * sizeof(float)));
    if (!mom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "resume: out of memory for the optimizer state");
        goto done;
    }
    for (n = 0, k = 0; k < n_arr; n += arr[k].n, k++) {
        // moments the optimizer can go on from: finite, the second ones non-negative (a NaN or a
        // negative one would turn every weight it touches into NaN at the next step, and every step
        // after it would be skipped)
        size_t i;
        const float *a = mom + n;
        if ((st = fat5_st_read_f32(f, idx[k], mom + n, (int64_t)arr[k].n))) goto done;
        for (i = 0; i < arr[k].n; i++)
            if (!isfinite(a[i]) || (arr[k].nonneg && a[i] < 0)) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: %s[%zu] = %g: the moments must be finite%s", path,
                               arr[k].name, i, (double)a[i], arr[k].nonneg ? " and non-negative" : "");
                goto done;
            }
    }
    if ((st = t->ft ? fat5__ft_set_state(t, fat5_st_metadata_find(f, "sampler"))
                    : fat5_ul2_set_state(t->sampler, fat5_st_metadata_find(f, "sampler")))) {
        st = fat5__err(ctx, st, "resume %s: %s", dir, fat5_last_error(t->dctx));
        goto done;
    }
    if (t->ft && (st = fat5__ft_resume(t, f, path))) goto done;
    for (n = 0, k = 0; k < n_arr; n += arr[k].n, k++)
        if ((st = m->be->upload(ctx, arr[k].addr, mom + n, arr[k].n * 4))) goto done;
    t->o->step = step;
    t->tokens_seen = seen;
    t->n_skipped = skipped;
    t->elapsed_before = el;
done:
    fat5__free(ctx, mom);
    fat5__free(ctx, json);
    fat5_st_destroy(f);
    return st;
}

// metrics.jsonl after a resume: the lines of steps past the checkpoint (written by the run that
// stopped) are dropped, so the log reads as one uninterrupted run.
static fat5_status fat5__log_truncate(fat5_ctx *ctx, const char *path, int64_t step) {
    char *text = NULL, *p, *line;
    size_t len = 0;
    fat5__sb b;
    fat5_status st;
    if (!fat5__is_file(path)) return FAT5_OK;
    if ((st = fat5__read_file(ctx, path, (size_t)1 << 34, &text, &len))) return st;
    fat5__sb_init(&b, ctx);
    for (line = text; *line; line = p) {
        const char *k = strstr(line, "\"step\": ");
        char *nl = strchr(line, '\n');
        p = nl ? nl + 1 : line + strlen(line);
        if (!nl) break;   // a torn last line
        if (k && k < nl && strtoll(k + 8, NULL, 10) > step) continue;
        fat5__sb_putn(&b, line, (size_t)(p - line));
    }
    if (b.oom) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    else st = fat5_write_file_atomic(ctx, path, b.buf ? b.buf : "", b.len);
    fat5__free(ctx, b.buf);
    fat5__free(ctx, text);
    return st;
}

// Every rank must train the same model on the same stream, so the settings that decide the
// weights, the batches and the updates, and the starting point (a checkpoint's step and sampler
// state), are hashed on each rank. Each rank's hash (52 bits, in two doubles) is summed into its own
// slot, so every rank sees them all; ranks whose hash differs from rank 0's stop the run, named.
static fat5_status fat5__train_agree(fat5_trainer *t) {
    fat5_ctx *ctx = t->ctx;
    const fat5_train_config *c = &t->cfg;
    const fat5_ul2_config *u = &c->ul2;
    const fat5_optim_config *o = &c->optim;
    char state[FAT5_UL2_STATE_CAP], *json = NULL, bad[160];
    size_t len = 0, nb = 0;
    fat5__sb b;
    uint64_t d;
    double *v;
    int r, i, n_bad = 0;
    fat5_status st;
    if (t->world < 2) return FAT5_OK;
    if ((st = fat5_model_config_to_json(ctx, &t->m->cfg, &json, &len)) ||
        (st = fat5__train_src_state(t, state, sizeof state)))
        return st;
    fat5__sb_init(&b, ctx);
    fat5__sb_printf(&b, "world %d accum %d balance %d seed %llu act %d floats %zu attention %s step %lld state %s\n",
                    t->world, c->grad_accum, c->balance_ranks, (unsigned long long)c->seed, (int)t->m->act_size,
                    t->m->n_floats, c->attention, (long long)fat5_optim_get_step(t->o), state);
    fat5__sb_printf(&b, "trainable %zu freeze %s\n", t->m->n_gfloats, c->freeze);
    {
        char data[256];
        fat5__data_fingerprint(t, data, sizeof data);
        fat5__sb_printf(&b, "data %s ", data);
    }
    fat5__sb_printf(&b, "eval %.17g ul2 %lld %lld %lld %lld %ld %ld",
                    c->eval_fraction, (long long)u->enc_tokens, (long long)u->dec_tokens, (long long)u->max_enc_len,
                    (long long)u->max_dec_len, (long)u->sentinel_first, (long)u->n_sentinels);
    for (i = 0; i < u->n_denoisers; i++)
        fat5__sb_printf(&b, " [%d %.17g %.17g %ld %.17g]", (int)u->denoisers[i].kind, u->denoisers[i].mu,
                        u->denoisers[i].r, (long)u->denoisers[i].mode_token, u->denoisers[i].weight);
    fat5__sb_printf(&b, "\noptim %d %.17g %.17g %.17g %.17g %.17g %.17g %d %lld %lld %lld %.17g loss %.17g %.17g\n",
                    (int)o->kind, o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->clip_norm, (int)o->sched,
                    (long long)o->warmup_steps, (long long)o->total_steps, (long long)o->decay_steps, o->min_lr,
                    c->loss.z_loss, c->loss.label_smoothing);
    fat5__sb_printf(&b, "adafactor %d %d %d %.17g %.17g %.17g\n", o->adafactor_relative_step,
                    o->adafactor_scale_parameter, o->adafactor_warmup_init, o->adafactor_clip_threshold,
                    o->adafactor_decay_rate, o->adafactor_beta1);
    fat5__sb_putn(&b, json, len);
    fat5__free(ctx, json);
    if (b.oom) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    }
    d = fat5__h128_of(b.buf, b.len).a;
    fat5__sb_free(&b);
    if (!(v = FAT5__CAST(double *, fat5__calloc(ctx, (size_t)(2 * t->world), sizeof(double)))))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    v[2 * t->rank] = (double)(d >> 38);                   // 26 bits each: exact in a double, and in
    v[2 * t->rank + 1] = (double)((d >> 12) & 0x3ffffff);   // any sum of zeros and one of them
    if ((st = fat5__comm_sum_host(t->comm, v, (size_t)(2 * t->world), t->losses))) {
        fat5__free(ctx, v);
        return st;
    }
    bad[0] = 0;
    for (r = 1; r < t->world; r++) {
        if (v[2 * r] == v[0] && v[2 * r + 1] == v[1]) continue;
        if (n_bad++ < 8 && nb < sizeof bad) nb += (size_t)snprintf(bad + nb, sizeof bad - nb, "%s%d", n_bad > 1 ? ", " : "", r);
    }
    fat5__free(ctx, v);
    if (n_bad)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "rank %d: %d rank%s (%s%s) run with other settings than rank 0: data, "
                         "model, seed, batch, optimizer, precision or checkpoint must be the same on every rank", t->rank,
                         n_bad, n_bad > 1 ? "s" : "", bad, n_bad > 8 ? ", ..." : "");
    return FAT5_OK;
}

FAT5_API void fat5_train_destroy(fat5_trainer *t) {
    int i, g;
    if (!t) return;
    fat5__train_join(t);
    if (t->log) fclose(t->log);
#ifndef _WIN32
    if (t->lock_fd >= 0) close(t->lock_fd);   // the lock goes with it; the file stays (no race on it)
#endif
    for (g = 0; g < 2; g++) {
        if (t->grp[g].mb)
            for (i = 0; i < t->cfg.grad_accum; i++) fat5__free(t->dctx, t->grp[g].mb[i].buf);
        fat5__free(t->ctx, t->grp[g].mb);
        fat5__free(t->ctx, t->grp[g].n_labels);
    }
    fat5__free(t->dctx, t->pool.ids);
    fat5__free(t->dctx, t->pool.ex);
    fat5__free(t->dctx, t->pool.by_rank);
    fat5__free(t->dctx, t->pool.keys);
    fat5__free(t->ctx, t->pool.bin_e);
    fat5__free(t->ctx, t->pool.rank_cost);
    fat5__free(t->ctx, t->pool.rank_at);
    fat5__free(t->ctx, t->pool.ranks);
    if (t->m) t->m->grad_ready = NULL;
    fat5__comm_close(t->comm);
    fat5_optim_destroy(t->o);
    if (t->m && t->losses) t->m->be->free(t->ctx, t->losses);
    fat5__free(t->ctx, t->h_losses);
    fat5_model_destroy(t->m);
    fat5__ft_destroy(t);
    fat5_ul2_destroy(t->sampler);
    fat5_tokens_destroy(t->tokens);
    fat5_ctx_destroy(t->dctx);
    fat5__free(t->ctx, t->strs);
    fat5__free(t->ctx, t);
}

// The config's strings made the trainer's own: one block (t->strs, freed with the trainer) holds
// copies of them; none becomes "".
static fat5_status fat5__train_keep_strings(fat5_trainer *t) {
    fat5_train_config *c = &t->cfg;
    const char **s[25];
    size_t n = 0, at = 0;
    int i;
    s[0] = &c->data, s[1] = &c->init, s[2] = &c->attention, s[3] = &c->output_dir, s[4] = &c->resume;
    s[5] = &c->rendezvous, s[6] = &c->freeze, s[7] = &c->save_tokenizer;
    s[8] = &c->train_file, s[9] = &c->validation_file, s[10] = &c->text_column, s[11] = &c->summary_column;
    s[12] = &c->source_prefix, s[13] = &c->tokenizer_name, s[14] = &c->metric_for_best_model;
    s[15] = &c->task, s[16] = &c->classifier, s[17] = &c->text_column_names, s[18] = &c->label_column_name;
    s[19] = &c->label_file, s[20] = &c->question_column_name, s[21] = &c->context_column_name;
    s[22] = &c->answer_column_name, s[23] = &c->pooling, s[24] = &c->problem_type;
    for (i = 0; i < 25; i++) n += (*s[i] ? strlen(*s[i]) : 0) + 1;
    if (!(t->strs = FAT5__CAST(char *, fat5__malloc(t->ctx, n))))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    for (i = 0; i < 25; i++) {
        size_t k = *s[i] ? strlen(*s[i]) : 0;
        if (k) memcpy(t->strs + at, *s[i], k);
        t->strs[at + k] = 0;
        *s[i] = t->strs + at;
        at += k + 1;
    }
    return FAT5_OK;
}

FAT5_API fat5_status fat5_train_create(fat5_ctx *ctx, const fat5_train_config *cfg, fat5_trainer **out) {
    fat5_trainer *t;
    fat5_status st;
    char dir[4200], path[4400], why[512];
    if (!cfg || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_train_create: NULL argument");
    *out = NULL;
    if (cfg->grad_accum < 1 || cfg->optim.total_steps < 1 || !cfg->output_dir || !cfg->output_dir[0] ||
        cfg->eval_batches < 1 || cfg->eval_steps < 0 || cfg->save_steps < 0 || cfg->save_total_limit < 0 ||
        !(cfg->eval_fraction >= 0 && cfg->eval_fraction <= 0.5))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training config: gradient_accumulation_steps and max_steps must be "
                         ">= 1, eval_fraction in [0, 0.5], output_dir set, step counts >= 0");
    if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training config: rank %d of world_size %d (0 <= rank < world_size)",
                         cfg->rank, cfg->world_size);
    if ((int64_t)cfg->world_size * cfg->grad_accum > (1 << 24))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training config: world_size x gradient_accumulation_steps is %lld "
                         "micro-batches a step, more than %d", (long long)cfg->world_size * cfg->grad_accum, 1 << 24);
    t = FAT5__CAST(fat5_trainer *, fat5__calloc(ctx, 1, sizeof *t));
    if (!t) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    t->ctx = ctx;
    t->cfg = *cfg;
    if ((st = fat5__train_keep_strings(t))) {
        fat5__free(ctx, t);
        return st;
    }
    cfg = &t->cfg;   // from here on, the trainer's copy
    t->ahead = -1;
    t->world = cfg->world_size;
    t->rank = cfg->rank;
    t->lock_fd = -1;
    // one trainer per output directory, before anything in it is read or changed; then what a
    // crash left in it: a step's earlier checkpoint moved aside, a save or prune cut short
    if (t->rank == 0) {
        if ((st = fat5__mkdir(ctx, cfg->output_dir)) || (st = fat5__train_lock(t))) goto fail;
        fat5__ckpt_recover(cfg->output_dir);
        fat5__ckpt_prune(cfg->output_dir, 0, -1);
    }
    t->grp[0].mb = FAT5__CAST(fat5__tbatch *, fat5__calloc(ctx, (size_t)cfg->grad_accum, sizeof(fat5__tbatch)));
    t->grp[1].mb = FAT5__CAST(fat5__tbatch *, fat5__calloc(ctx, (size_t)cfg->grad_accum, sizeof(fat5__tbatch)));
    t->grp[0].n_labels = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)(cfg->grad_accum * t->world), sizeof(int64_t)));
    t->grp[1].n_labels = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)(cfg->grad_accum * t->world), sizeof(int64_t)));
    if (t->world > 1) {   // the balancing's per micro-batch and per rank sums
        t->pool.bin_e = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)(3 * cfg->grad_accum * t->world), sizeof(int64_t)));
        t->pool.bin_d = t->pool.bin_e ? t->pool.bin_e + cfg->grad_accum * t->world : NULL;
        t->pool.bin_n = t->pool.bin_e ? t->pool.bin_e + 2 * cfg->grad_accum * t->world : NULL;
        t->pool.rank_cost = FAT5__CAST(double *, fat5__calloc(ctx, (size_t)t->world, sizeof(double)));
        t->pool.rank_at = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)(2 * t->world + 1), sizeof(int32_t)));
        t->pool.ranks = FAT5__CAST(fat5__tsort *, fat5__calloc(ctx, (size_t)t->world, sizeof(fat5__tsort)));
    }
    {   // the data's context: the same allocator and log, on the host
        fat5_ctx_config dc = ctx->cfg;
        dc.device = FAT5_DEVICE_CPU;
        if (!t->grp[0].mb || !t->grp[1].mb || !t->grp[0].n_labels || !t->grp[1].n_labels ||
            (t->world > 1 && (!t->pool.bin_e || !t->pool.rank_cost || !t->pool.rank_at || !t->pool.ranks)) ||
            (st = fat5_ctx_create(&dc, &t->dctx, why, sizeof why)) != FAT5_OK) {
            fat5_train_destroy(t);
            return st && st != FAT5_ERR_OUT_OF_MEMORY ? fat5__err(ctx, st, "trainer: the data's context: %s", why)
                                                      : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
        }
    }
    if (!cfg->train_file[0] && (st = fat5__train_open_data(t))) goto fail;   // fine-tuning: after the model
    // a new model on data of a larger vocabulary than the presets' byte one (a trained tokenizer's
    // ids): the model's vocabulary is the data's
    if (!cfg->train_file[0] && !cfg->init[0] && t->cfg.model.vocab_size == FAT5__PRESET_VOCAB &&
        fat5_tokens_vocab_size(t->tokens) > FAT5__PRESET_VOCAB) {
        t->cfg.model.vocab_size = fat5_tokens_vocab_size(t->tokens);
        fat5__log(ctx, FAT5_LOG_INFO, "training: vocab_size %lld, the data's vocabulary", (long long)t->cfg.model.vocab_size);
    }
    // the model: the checkpoint's when resuming, else --init's, else a new one
    dir[0] = 0;
    if (cfg->resume[0] && (st = fat5__resume_dir(ctx, cfg->resume, dir, sizeof dir))) goto fail;
    if (cfg->init[0]) {
        if ((st = fat5_model_load(ctx, cfg->init, &t->m))) goto fail;
        t->cfg.model = t->m->cfg;
    }
    // the options' dropout rates replace the config's (--init's too), before a resumed checkpoint's
    // config is compared with the run's
    if (cfg->dropout_rate >= 0) t->cfg.model.dropout_rate = cfg->dropout_rate;
    if (cfg->attention_dropout_rate >= 0) t->cfg.model.attention_dropout_rate = cfg->attention_dropout_rate;
    if (t->m &&
        (st = fat5_model_set_dropout_rate(t->m, t->cfg.model.dropout_rate, t->cfg.model.attention_dropout_rate)))
        goto fail;
    if (fat5__task_of(&t->cfg) != 0) {   // a task head ([9.4]): the model under it, before a resume compares
        if (!t->m && (st = fat5_model_create(ctx, &t->cfg.model, cfg->seed, &t->m))) goto fail;
        if ((st = fat5__task_model(t))) goto fail;
    }
    if (dir[0]) {
        fat5_model *r = NULL;
        char *a = NULL, *b = NULL;
        size_t la, lb;
        if ((st = fat5_model_load(ctx, dir, &r))) goto fail;
        st = fat5_model_config_to_json(ctx, &t->cfg.model, &a, &la);
        if (!st) st = fat5_model_config_to_json(ctx, &r->cfg, &b, &lb);
        if (!st && strcmp(a, b) != 0) {
            char diff[256];
            fat5__first_diff(a, b, diff, sizeof diff);
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint holds another model than this run's: %s",
                           dir, diff);
        }
        fat5__free(ctx, a);
        fat5__free(ctx, b);
        fat5_model_destroy(t->m);
        t->m = r;
        if (st) goto fail;
    } else if (!t->m) {
        if ((st = fat5_model_create(ctx, &t->cfg.model, cfg->seed, &t->m))) goto fail;
    }
    if (cfg->attention[0]) {
        fat5_attention a;
        if ((st = fat5_attention_parse(ctx, cfg->attention, &a)) || (st = fat5_model_set_attention(t->m, &a)))
            goto fail;
    }
    if (cfg->freeze[0] && (st = fat5_model_freeze(t->m, cfg->freeze))) goto fail;   // before the optimizer
    {   // the tokenizer its checkpoints carry for transformers (a resumed model has its checkpoint's)
        const char *tk = cfg->save_tokenizer;
        int64_t V = t->tokens ? fat5_tokens_vocab_size(t->tokens) : 0;
        if (!tk[0] && !cfg->init[0] && !dir[0] && V > 259 && V <= 1024) tk = "byte";
        if (strcmp(tk, "byte") == 0) st = fat5_model_set_tokenizer(t->m, NULL);
        else if (strcmp(tk, "none") == 0) st = fat5_model_set_tokenizer(t->m, "");
        else if (tk[0]) st = fat5_model_set_tokenizer(t->m, tk);
        if (st) goto fail;
    }
    if (cfg->train_file[0]) {   // the model's tokenizer, the rows, the sampler; max_steps from num_train_epochs
        if ((st = fat5__ft_open(t))) goto fail;
    } else {
        if (fat5_tokens_vocab_size(t->tokens) > t->m->cfg.vocab_size) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training: the data's vocabulary (%lld) is larger than the model's (%lld)",
                           (long long)fat5_tokens_vocab_size(t->tokens), (long long)t->m->cfg.vocab_size);
            goto fail;
        }
        if ((st = fat5__train_sampler(t, cfg->eval_fraction > 0 ? 1 : 0, cfg->seed * 0x9e3779b97f4a7c15ull + 1,
                                      &t->sampler)))
            goto fail;
    }
    if ((st = fat5_optim_create(t->m, &t->cfg.optim, &t->o))) goto fail;
    // each micro-batch's (ce, loss) of every rank, then the ranks' stop requests
    if ((st = t->m->be->alloc(ctx, (size_t)(2 * cfg->grad_accum * t->world + 1) * 8, &t->losses))) goto fail;
    if (!(t->h_losses = FAT5__CAST(double *, fat5__calloc(ctx, (size_t)(2 * cfg->grad_accum * t->world + 1),
                                                          sizeof(double))))) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_train_create: out of memory");
        goto fail;
    }
    {
        int64_t ne = t->cfg.ul2.enc_tokens, nd = t->cfg.ul2.dec_tokens, ns = ne;
        if (t->m->cfg.head != FAT5_HEAD_LM) {   // a task head: its rows (the pooling weights are rows x tokens)
            int64_t rows = t->cfg.per_device_train_batch_size;
            ns = rows > 0 && rows < ne ? rows : ne < 256 ? ne : 256;   // more rows grow it as they come
            nd = fat5__head_has_decoder(t->m->cfg.head) ? ne : 1;
        }
        if ((st = fat5_model_reserve(t->m, ns, ne, nd))) goto fail;
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->output_dir);
    if (dir[0] && (st = fat5__train_resume(t, dir))) goto fail;
    if (t->rank == 0) {   // rank 0 keeps the output directory and the log
        if (dir[0]) {
            if ((st = fat5__log_truncate(ctx, path, fat5_optim_get_step(t->o)))) goto fail;
        } else if (fat5__is_file(path) && (st = fat5__log_truncate(ctx, path, 0))) {
            goto fail;
        }
        t->log = fopen(path, "ab");
        if (!t->log) {
            st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
            goto fail;
        }
    }
    if (t->world > 1 || cfg->rendezvous[0]) {   // the other ranks, last: each has the same weights by now
        if ((st = fat5__comm_open(ctx, t->m->be, t->rank, t->world, cfg->rendezvous, cfg->dist_timeout_s, cfg->bucket_mb,
                                  fat5__run_held_exit, &t->comm)) ||
            (st = fat5__train_agree(t)))
            goto fail;
    }
    t->prefetch = cfg->prefetch && t->m->be->queued;
    t->step_at_start = fat5_optim_get_step(t->o);
    t->flops_per_s_peak = cfg->peak_tflops > 0 ? cfg->peak_tflops * 1e12
                          : t->m->be->peak_flops(ctx);
    t->t_start = fat5__now_s();
    *out = t;
    return FAT5_OK;
fail:
    fat5_train_destroy(t);
    return st;
}

// An evaluation's mean loss per label token from this rank's sum of loss x tokens and its token
// count, both summed over the ranks first when there are several; NAN without a token. Every rank
// calls it (a collective).
static fat5_status fat5__train_eval_mean(fat5_trainer *t, double sum, int64_t n, double *loss) {
    if (t->comm) {
        double v[2];
        fat5_status st;
        v[0] = sum, v[1] = (double)n;
        if ((st = fat5__comm_sum_host(t->comm, v, 2, t->losses))) return st;
        sum = v[0], n = (int64_t)v[1];
    }
    *loss = n ? sum / (double)n : NAN;
    return FAT5_OK;
}

// Mean loss over the held-out documents: the same eval_batches batches every time. With several
// ranks every rank calls it (the ranks share the batches).
static fat5_status fat5__train_evaluate(fat5_trainer *t, double *loss);
static fat5_status fat5__train_failed(fat5_trainer *t, fat5_status st);
FAT5_API fat5_status fat5_train_evaluate(fat5_trainer *t, double *loss) {
    return fat5__train_failed(t, fat5__train_evaluate(t, loss));
}

static fat5_status fat5__train_evaluate(fat5_trainer *t, double *loss) {
    fat5_ul2 *s = NULL;
    fat5_batch b;
    fat5_forward_result r;
    double sum = 0;
    memset(&b, 0, sizeof b);
    int64_t n = 0, i;
    fat5_status st;
    *loss = NAN;
    if (t->ft) return fat5__ft_eval_loss(t, loss);
    if (t->cfg.eval_fraction <= 0) return fat5__err(t->ctx, FAT5_ERR_STATE, "evaluate: eval_fraction is 0 (no held-out data)");
    fat5__train_join(t);   // the data is read by one thread at a time
    if ((st = fat5__train_sampler(t, 2, 0x5eed0e7a1ull, &s))) return st;
    for (i = 0; i < t->cfg.eval_batches && st == FAT5_OK; i++) {
        if ((st = fat5_ul2_next_batch(s, &b))) {
            st = fat5__err(t->ctx, st, "%s", fat5_last_error(t->dctx));
            break;
        }
        if (i % t->world != t->rank) continue;   // the ranks share the batches, and sum below
        t->m->no_grad = 1;  // the loss alone: no dlogits
        st = fat5_model_forward(t->m, &b, &t->cfg.loss, &r);
        t->m->no_grad = 0;
        if (st) break;
        sum += r.loss * (double)r.n_tokens;
        n += r.n_tokens;
    }
    fat5_ul2_destroy(s);
    return st ? st : fat5__train_eval_mean(t, sum, n, loss);
}

static void fat5__json_num(fat5__sb *b, const char *key, double v) {
    char num[40];
    if (!isfinite(v)) {
        fat5__sb_printf(b, ", \"%s\": null", key);
        return;
    }
    fat5__fmt_g(num, sizeof num, 7, v);
    fat5__sb_printf(b, ", \"%s\": %s", key, num);
}

// A rank's failure, told to the others through the board so that they stop too, naming it.
static fat5_status fat5__train_failed(fat5_trainer *t, fat5_status st) {
    if (t->comm && st) {
        fat5__comm_fail(t->comm, fat5_last_error(t->ctx));
    }
    return st;
}

static fat5_status fat5__train_step(fat5_trainer *t, fat5_train_metrics *out);
FAT5_API fat5_status fat5_train_step(fat5_trainer *t, fat5_train_metrics *out) {
    return fat5__train_failed(t, fat5__train_step(t, out));
}

static fat5_status fat5__train_step(fat5_trainer *t, fat5_train_metrics *out) {
    fat5_ctx *ctx = t->ctx;
    fat5_train_metrics r;
    fat5_optim_result orr;
    fat5__tgroup *g;
    double t0 = fat5__now_s(), loss = 0, flops = 0;
    int64_t n_labels = 0, i, k = t->cfg.grad_accum, step;
    fat5_status st;
    memset(&r, 0, sizeof r);
    if (out) memset(out, 0, sizeof *out);
    if (fat5_train_done(t)) return fat5__err(ctx, FAT5_ERR_STATE, "training: max_steps (%lld) already done",
                                             (long long)t->cfg.optim.total_steps);
    // the micro-batches first: their label counts weight the gradients, so k micro-batches give the
    // gradient of one batch of all of them
    if ((st = fat5__train_next_group(t, fat5_optim_get_step(t->o) + 1 < t->cfg.optim.total_steps, &g))) return st;
    r.data_s = fat5__now_s() - t0;
    for (i = 0; i < k * t->world; i++) n_labels += g->n_labels[i];
    r.tokens = g->tokens;
    r.rank_balance = g->balance;
    flops = g->flops;
    // forward, backward and optimizer are queued without waiting for the device, which the host
    // does once, in the optimizer (and, with accumulation, when the next micro-batch's tokens are
    // uploaded: an upload waits for the stream): each forward leaves its loss on the backend, and a
    // non-finite one makes the optimizer skip the update (the weights are left as they are; the
    // step still counts). With several ranks, each one's micro-batches are weighted by the labels
    // of all, and the last backward sums the gradients across ranks bucket by bucket as it goes;
    // the losses and the stop requests are summed after it, and the optimizer is queued behind the
    // sums on the device (the host still waits once, in the optimizer; on GPU ranks a watchdog
    // thread frees that wait if a peer fails). (fat5_train_step tells the other ranks of any error
    // returned here.)
    if ((st = fat5_model_zero_grad(t->m))) return st;
    if (t->comm) {
        double vote = t->stop_asked ? 1.0 : 0.0;
        if ((st = t->m->be->memset0(ctx, t->losses, (size_t)(2 * k * t->world) * 8)) ||
            (st = t->m->be->upload(ctx, t->losses + 16 * (fat5__addr)(k * t->world), &vote, 8)))
            return st;
    }
    for (i = 0; i < k; i++) {
        float scale = n_labels ? (float)((double)g->n_labels[t->rank * k + i] / (double)n_labels) : 0.0f;
        if (t->comm && i == k - 1) {
            fat5__comm_grads_begin(t->comm, t->m->gd, t->m->n_gfloats);
            t->m->grad_ready = fat5__comm_grads_ready;
            t->m->grad_ready_user = t->comm;
        }
        // dropout at the config's rates, each micro-batch of each rank and step with its own masks, a
        // function of (seed, step, micro-batch): a resumed run draws the same (the draw wraps at 2^38)
        st = fat5_model_set_dropout(t->m, 1, fat5__h128_mix(t->cfg.seed ^ 0x64726f706f7574ull),
                                    ((uint64_t)fat5_optim_get_step(t->o) * (uint64_t)(k * t->world) +
                                     (uint64_t)(t->rank * k + i)) & (((uint64_t)1 << FAT5__DROP_DRAW_BITS) - 1));
        if (!st) st = fat5__model_forward_batch(t->m, &g->mb[i].b, &t->cfg.loss, NULL,
                                                t->losses + 16 * (fat5__addr)(t->rank * k + i));
        if (!st) st = fat5__model_backward_checked(t->m, scale, 0);
        t->m->grad_ready = NULL;
        fat5_model_set_dropout(t->m, 0, 0, 0);   // off: evaluation and anything else between steps
        if (st) return st;
    }
    if (t->comm && (st = fat5__comm_grads_end(t->comm, t->losses, (size_t)(2 * k * t->world + 1))))
        return st;
    k *= t->world;   // from here on: every rank's micro-batches
    if (n_labels == 0) {  // nothing to learn from: no update (the loss is NaN)
        memset(&orr, 0, sizeof orr);
        orr.lr = fat5__optim_lr(t->o);
        orr.grad_norm = NAN;
        orr.skipped = 1;
        t->o->step++;
    } else if ((st = fat5__optim_step_gated(t->o, t->losses, (int)(2 * k), &orr))) {
        return st;
    }
    if ((st = t->m->be->download(ctx, t->h_losses, t->losses, (size_t)(2 * k + (t->comm ? 1 : 0)) * 8)) ||
        (t->comm && (st = fat5__comm_grads_landed(t->comm))))
        return st;
    for (i = 0; i < k; i++) loss += t->h_losses[2 * i + 1] * (double)g->n_labels[i];
    loss = n_labels ? loss / (double)n_labels : NAN;
    r.stop = t->comm ? t->h_losses[2 * k] > 0 : t->stop_asked;
    t->stop_asked = 0;
    r.world_size = t->world;
    if (t->comm) r.comm_s = fat5__comm_exposed_s(t->comm);
    step = fat5_optim_get_step(t->o);
    t->tokens_seen += r.tokens;
    t->n_skipped += orr.skipped;
    r.step = step;
    r.max_steps = t->cfg.optim.total_steps;
    r.loss = loss;
    r.lr = orr.lr;
    r.grad_norm = orr.grad_norm;
    r.skipped = orr.skipped;
    r.n_skipped = t->n_skipped;
    r.tokens_seen = t->tokens_seen;
    r.epoch = t->ft ? (int64_t)g->epoch_f : fat5_ul2_epoch(t->sampler);
    r.epoch_f = g->epoch_f;
    r.step_s = fat5__now_s() - t0;
    r.tokens_per_s = r.step_s > 0 ? (double)r.tokens / r.step_s : 0;
    r.tokens_per_s_gpu = r.tokens_per_s / t->world;
    r.scaling = r.step_s > 0 ? (r.step_s - r.comm_s) / r.step_s : 0;
    r.mfu = t->flops_per_s_peak > 0 && r.step_s > 0 ? flops / r.step_s / t->flops_per_s_peak / t->world : 0;
    // evaluation and checkpoints when due, and at the end
    if ((t->ft ? fat5__ft_has_eval(t) : t->cfg.eval_fraction > 0) &&
        ((t->cfg.eval_steps > 0 && step % t->cfg.eval_steps == 0) || step == t->cfg.optim.total_steps)) {
        if (t->ft) st = fat5__train_failed(t, fat5__ft_evaluate(t, step, &r));   // + generation and scores
        else st = fat5_train_evaluate(t, &r.eval_loss);
        if (st) return st;
        r.has_eval = 1;
    }
    r.elapsed_s = t->elapsed_before + (fat5__now_s() - t->t_start);
    {
        double per = (r.elapsed_s - t->elapsed_before) / (double)(step - t->step_at_start);
        r.eta_s = per * (double)(t->cfg.optim.total_steps - step);
    }
    if (t->log) {   // one JSON line per step (rank 0's)
        fat5__sb b2;
        fat5__sb_init(&b2, ctx);
        fat5__sb_printf(&b2, "{\"step\": %lld", (long long)step);
        fat5__json_num(&b2, "loss", r.loss);
        fat5__json_num(&b2, "lr", r.lr);
        fat5__json_num(&b2, "grad_norm", r.grad_norm);
        fat5__sb_printf(&b2, ", \"skipped\": %d, \"tokens\": %lld, \"tokens_seen\": %lld", r.skipped,
                        (long long)r.tokens, (long long)r.tokens_seen);
        fat5__json_num(&b2, "step_s", r.step_s);
        fat5__json_num(&b2, "tokens_per_s", r.tokens_per_s);
        fat5__json_num(&b2, "data_s", r.data_s);
        if (t->comm) {
            fat5__sb_printf(&b2, ", \"world_size\": %d", t->world);
            fat5__json_num(&b2, "tokens_per_s_gpu", r.tokens_per_s_gpu);
            fat5__json_num(&b2, "comm_s", r.comm_s);
            fat5__json_num(&b2, "scaling", r.scaling);
            fat5__json_num(&b2, "rank_balance", r.rank_balance);
        }
        if (r.mfu > 0) fat5__json_num(&b2, "mfu", r.mfu);
        fat5__json_num(&b2, "elapsed_s", r.elapsed_s);
        {   // when the step ended, by the wall clock
            char iso[32];
            double unix_s;
            fat5__wall_time(iso, &unix_s);
            fat5__sb_printf(&b2, ", \"time\": \"%s\", \"unix_time\": %.3f", iso, unix_s);
        }
        if (r.has_eval) fat5__json_num(&b2, "eval_loss", r.eval_loss);
        if (t->ft) fat5__ft_log(t, &b2, &r);
        fat5__sb_puts(&b2, "}\n");
        errno = 0;
        if (b2.oom || fwrite(b2.buf, 1, b2.len, t->log) != b2.len || fflush(t->log) != 0) {
            int e = errno;
            fat5__free(ctx, b2.buf);
            return fat5__err(ctx, b2.oom ? FAT5_ERR_OUT_OF_MEMORY : FAT5_ERR_IO, "%s/metrics.jsonl: %s of step %lld's "
                             "row failed: %s", t->cfg.output_dir, b2.oom ? "building" : "the append",
                             (long long)step, b2.oom ? "out of memory" : e ? strerror(e) : "short write");
        }
        fat5__free(ctx, b2.buf);
    }
    if ((t->cfg.save_steps > 0 && step % t->cfg.save_steps == 0) || step == t->cfg.optim.total_steps) {
        const char *d;
        if ((st = fat5_train_save(t, &d))) return st;
        r.saved = 1;
        r.is_best = fat5__ft_best_step(t) == step;
        snprintf(r.checkpoint, sizeof r.checkpoint, "%s", d);
    }
    if (out) *out = r;
    return FAT5_OK;
}

