// =============================================================================================
// ==[6.3] io: generation_config.json ==
// Hugging Face's generation settings: their defaults (fat5_generate_config_default) and a
// generation_config.json read over them (fat5_generate_config_from_json), checked. A plain struct:
// fat5_model_load keeps the one beside a checkpoint, and the generate layer uses it.


FAT5_API fat5_generate_config fat5_generate_config_default(void) {
    fat5_generate_config g;
    memset(&g, 0, sizeof g);
    g.max_new_tokens = 20;
    g.min_new_tokens = 0;
    g.do_sample = 0;
    g.temperature = 1.0;
    g.top_k = 50;
    g.top_p = 1.0;
    g.seed = 0;
    g.num_beams = 1;
    g.length_penalty = 1.0;
    g.early_stopping = 0;
    g.num_return_sequences = 1;
    g.repetition_penalty = 1.0;
    g.no_repeat_ngram_size = 0;
    g.eos_token_id = 1;   // T5's ids
    g.pad_token_id = 0;
    g.decoder_start_token_id = 0;
    g.use_graph = 1;
    g.forced_bos_token_id = -1;
    g.encoder_repetition_penalty = 1.0;
    g.exponential_decay_start = -1;
    g.exponential_decay_factor = 1.0;
    g.typical_p = 1.0;
    g.num_beam_groups = 1;
    return g;
}

// The defaults with a model's ids (what generation_config.json, when there is one, is read over).
static fat5_generate_config fat5__generate_config_for(const fat5_model_config *c) {
    fat5_generate_config g = fat5_generate_config_default();
    g.eos_token_id = c->eos_token_id;
    g.pad_token_id = c->pad_token_id;
    g.decoder_start_token_id = c->decoder_start_token_id;
    return g;
}

// A token list of an option: n >= 0, ids given when n > 0, every id >= 0.
static fat5_status fat5__gen_check_list(fat5_ctx *ctx, const char *what, const char *name, const fat5_token_list *l) {
    int64_t i;
    if (l->n < 0 || l->n > INT32_MAX || (l->n > 0 && !l->ids))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s has n = %lld%s", what, name, (long long)l->n,
                         l->n > 0 ? " and no ids" : "");
    for (i = 0; i < l->n; i++)
        if (l->ids[i] < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s[%lld] = %d is not a token id", what, name, (long long)i,
                             (int)l->ids[i]);
    return FAT5_OK;
}

// Packed token sequences of an option: cu[0] = 0, every sequence non-empty, every id >= 0.
static fat5_status fat5__gen_check_seqs(fat5_ctx *ctx, const char *what, const char *name, const fat5_token_seqs *q) {
    int64_t i, j;
    if (q->n < 0 || q->n > INT32_MAX || (q->n > 0 && (!q->ids || !q->cu)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s has n = %lld%s", what, name, (long long)q->n,
                         q->n > 0 ? " and no ids or cu" : "");
    if (q->n > 0 && q->cu[0] != 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s cu[0] = %d; expected 0", what, name, (int)q->cu[0]);
    for (i = 0; i < q->n; i++) {
        if (q->cu[i + 1] <= q->cu[i])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s sequence %lld is empty (cu %d .. %d)", what, name,
                             (long long)i, (int)q->cu[i], (int)q->cu[i + 1]);
        for (j = q->cu[i]; j < q->cu[i + 1]; j++)
            if (q->ids[j] < 0)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s sequence %lld holds %d, not a token id", what, name,
                                 (long long)i, (int)q->ids[j]);
    }
    return FAT5_OK;
}

// The range checks that need no model (fat5_generate_config_from_json and fat5_generate).
static fat5_status fat5__gen_check(fat5_ctx *ctx, const char *what, const fat5_generate_config *g) {
#define FAT5__GEN_BAD(cond, ...) \
    if (cond) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, __VA_ARGS__)
    FAT5__GEN_BAD(g->max_new_tokens < 1 || g->max_new_tokens > INT32_MAX / 2,
                  "%s: max_new_tokens = %lld; expected at least 1", what, (long long)g->max_new_tokens);
    FAT5__GEN_BAD(g->min_new_tokens < 0 || g->min_new_tokens > INT32_MAX,
                  "%s: min_new_tokens = %lld is negative", what, (long long)g->min_new_tokens);
    FAT5__GEN_BAD(g->num_beams < 1 || g->num_beams > FAT5__BEAM_MAX, "%s: num_beams = %lld; expected 1 .. %d", what,
                  (long long)g->num_beams, FAT5__BEAM_MAX);
    FAT5__GEN_BAD(g->num_return_sequences < 1 || g->num_return_sequences > INT32_MAX,
                  "%s: num_return_sequences = %lld; expected at least 1", what, (long long)g->num_return_sequences);
    FAT5__GEN_BAD(!(g->temperature > 0.0) || !isfinite(g->temperature),
                  "%s: temperature = %g; expected a finite value > 0", what, g->temperature);
    FAT5__GEN_BAD(!(g->top_p > 0.0 && g->top_p <= 1.0), "%s: top_p = %g; expected a value in (0, 1]", what, g->top_p);
    FAT5__GEN_BAD(g->top_k < 0 || g->top_k > INT32_MAX, "%s: top_k = %lld; expected >= 0 (0 = off)", what,
                  (long long)g->top_k);
    FAT5__GEN_BAD(!(g->repetition_penalty > 0.0) || !isfinite(g->repetition_penalty),
                  "%s: repetition_penalty = %g; expected a finite value > 0 (1 = off)", what, g->repetition_penalty);
    FAT5__GEN_BAD(g->no_repeat_ngram_size < 0 || g->no_repeat_ngram_size > INT32_MAX,
                  "%s: no_repeat_ngram_size = %lld is negative", what, (long long)g->no_repeat_ngram_size);
    FAT5__GEN_BAD(!isfinite(g->length_penalty), "%s: length_penalty = %g is not finite", what, g->length_penalty);
    FAT5__GEN_BAD(g->early_stopping < 0 || g->early_stopping > 2,
                  "%s: early_stopping = %d; expected 0 (false), 1 (true) or 2 (\"never\")", what, g->early_stopping);
    FAT5__GEN_BAD(g->eos_token_id < -1 || g->eos_token_id > INT32_MAX,
                  "%s: eos_token_id = %lld; expected an id (or -1: none)", what, (long long)g->eos_token_id);
    FAT5__GEN_BAD(g->pad_token_id < 0 || g->pad_token_id > INT32_MAX, "%s: pad_token_id = %lld is not an id", what,
                  (long long)g->pad_token_id);
    FAT5__GEN_BAD(g->decoder_start_token_id < 0 || g->decoder_start_token_id > INT32_MAX,
                  "%s: decoder_start_token_id = %lld is not an id", what, (long long)g->decoder_start_token_id);
    FAT5__GEN_BAD(g->max_length < 0 || g->max_length > INT32_MAX / 2, "%s: max_length = %lld; expected >= 0 (0: unset)",
                  what, (long long)g->max_length);
    FAT5__GEN_BAD(g->min_length < 0 || g->min_length > INT32_MAX, "%s: min_length = %lld is negative", what,
                  (long long)g->min_length);
    FAT5__GEN_BAD(g->forced_bos_token_id < -1 || g->forced_bos_token_id > INT32_MAX,
                  "%s: forced_bos_token_id = %lld; expected an id (or -1: off)", what, (long long)g->forced_bos_token_id);
    FAT5__GEN_BAD(!(g->encoder_repetition_penalty > 0.0) || !isfinite(g->encoder_repetition_penalty),
                  "%s: encoder_repetition_penalty = %g; expected a finite value > 0 (1 = off)", what,
                  g->encoder_repetition_penalty);
    FAT5__GEN_BAD(g->encoder_no_repeat_ngram_size < 0 || g->encoder_no_repeat_ngram_size > INT32_MAX,
                  "%s: encoder_no_repeat_ngram_size = %lld is negative", what, (long long)g->encoder_no_repeat_ngram_size);
    FAT5__GEN_BAD(g->exponential_decay_start < -1 || g->exponential_decay_start > INT32_MAX,
                  "%s: exponential_decay_start = %lld; expected >= 0 (or -1: off)", what,
                  (long long)g->exponential_decay_start);
    FAT5__GEN_BAD(!isfinite(g->exponential_decay_factor), "%s: exponential_decay_factor = %g is not finite", what,
                  g->exponential_decay_factor);
    FAT5__GEN_BAD(!(g->min_p >= 0.0 && g->min_p <= 1.0), "%s: min_p = %g; expected a value in [0, 1] (0 = off)", what,
                  g->min_p);
    FAT5__GEN_BAD(!(g->typical_p > 0.0 && g->typical_p <= 1.0), "%s: typical_p = %g; expected a value in (0, 1]", what,
                  g->typical_p);
    FAT5__GEN_BAD(!(g->epsilon_cutoff >= 0.0 && g->epsilon_cutoff < 1.0),
                  "%s: epsilon_cutoff = %g; expected a value in [0, 1) (0 = off)", what, g->epsilon_cutoff);
    FAT5__GEN_BAD(!(g->eta_cutoff >= 0.0 && g->eta_cutoff < 1.0),
                  "%s: eta_cutoff = %g; expected a value in [0, 1) (0 = off)", what, g->eta_cutoff);
    FAT5__GEN_BAD(g->num_beam_groups < 1 || g->num_beam_groups > g->num_beams || g->num_beams % g->num_beam_groups,
                  "%s: num_beam_groups = %lld must divide num_beams = %lld", what, (long long)g->num_beam_groups,
                  (long long)g->num_beams);
    FAT5__GEN_BAD(!(g->diversity_penalty >= 0.0) || !isfinite(g->diversity_penalty),
                  "%s: diversity_penalty = %g; expected a finite value >= 0", what, g->diversity_penalty);
    FAT5__GEN_BAD(g->num_beam_groups > 1 && g->do_sample,
                  "%s: num_beam_groups = %lld with do_sample: group beam search does not sample", what,
                  (long long)g->num_beam_groups);
    if (g->force_words_ids.n) {   // constrained beam search: transformers 4's conditions
        fat5_status st;
        int64_t i, j, k;
        if ((st = fat5__gen_check_seqs(ctx, what, "force_words_ids", &g->force_words_ids))) return st;
        FAT5__GEN_BAD(!g->force_words_constraint, "%s: force_words_ids has %lld sequences and no "
                      "force_words_constraint", what, (long long)g->force_words_ids.n);
        for (i = 0; i < g->force_words_ids.n; i++) {
            int32_t c = g->force_words_constraint[i], prev = i ? g->force_words_constraint[i - 1] : -1;
            FAT5__GEN_BAD(c != prev && c != prev + 1, "%s: force_words_constraint[%lld] = %d; expected %d or %d (the "
                          "constraints numbered 0, 1, ... in order)", what, (long long)i, (int)c, (int)prev,
                          (int)prev + 1);
            // a disjunctive constraint's sequences: none a prefix of another (transformers' trie)
            for (j = 0; j < i; j++) {
                int64_t li = g->force_words_ids.cu[i + 1] - g->force_words_ids.cu[i];
                int64_t lj = g->force_words_ids.cu[j + 1] - g->force_words_ids.cu[j];
                if (g->force_words_constraint[j] != c) continue;
                for (k = 0; k < li && k < lj; k++)
                    if (g->force_words_ids.ids[g->force_words_ids.cu[i] + k] !=
                        g->force_words_ids.ids[g->force_words_ids.cu[j] + k]) break;
                FAT5__GEN_BAD(k == li || k == lj, "%s: force_words_ids sequences %lld and %lld of constraint %d: one is "
                              "a prefix of the other", what, (long long)j, (long long)i, (int)c);
            }
        }
        FAT5__GEN_BAD(g->num_beams < 2, "%s: force_words_ids (constrained beam search) needs num_beams > 1, got %lld",
                      what, (long long)g->num_beams);
        FAT5__GEN_BAD(g->do_sample, "%s: force_words_ids (constrained beam search) with do_sample: it does not sample",
                      what);
        FAT5__GEN_BAD(g->num_beam_groups > 1, "%s: force_words_ids (constrained beam search) with num_beam_groups = "
                      "%lld", what, (long long)g->num_beam_groups);
        FAT5__GEN_BAD(g->diversity_penalty > 0.0, "%s: force_words_ids (constrained beam search) with "
                      "diversity_penalty = %g (a group beam search option)", what, g->diversity_penalty);
    }
    FAT5__GEN_BAD(!(g->max_time >= 0.0) || !isfinite(g->max_time), "%s: max_time = %g; expected seconds >= 0 (0 = off)",
                  what, g->max_time);
    {
        fat5_status st;
        if ((st = fat5__gen_check_list(ctx, what, "eos_token_id", &g->eos_token_ids)) ||
            (st = fat5__gen_check_list(ctx, what, "forced_eos_token_id", &g->forced_eos_token_id)) ||
            (st = fat5__gen_check_list(ctx, what, "suppress_tokens", &g->suppress_tokens)) ||
            (st = fat5__gen_check_list(ctx, what, "begin_suppress_tokens", &g->begin_suppress_tokens)) ||
            (st = fat5__gen_check_seqs(ctx, what, "bad_words_ids", &g->bad_words_ids)) ||
            (st = fat5__gen_check_seqs(ctx, what, "sequence_bias", &g->sequence_bias)) ||
            (st = fat5__gen_check_seqs(ctx, what, "decoder_input_ids", &g->decoder_input_ids)))
            return st;
    }
    FAT5__GEN_BAD(g->n_stop_strings < 0 || (g->n_stop_strings > 0 && !g->stop_strings),
                  "%s: stop_strings has n = %lld", what, (long long)g->n_stop_strings);
    if (g->n_stop_strings > 0) {
        int64_t i;
        for (i = 0; i < g->n_stop_strings; i++)
            FAT5__GEN_BAD(!g->stop_strings[i] || !g->stop_strings[i][0], "%s: stop_strings[%lld] is empty", what,
                          (long long)i);
    }
    FAT5__GEN_BAD(g->sequence_bias.n > 0 && !g->sequence_bias_values, "%s: sequence_bias has %lld sequences and no "
                  "sequence_bias_values", what, (long long)g->sequence_bias.n);
    if (g->sequence_bias.n > 0) {
        int64_t i;
        for (i = 0; i < g->sequence_bias.n; i++)
            FAT5__GEN_BAD(g->sequence_bias_values[i] != g->sequence_bias_values[i],
                          "%s: sequence_bias_values[%lld] is NaN", what, (long long)i);
    }
    if (g->decoder_input_ids.n > 1) {
        int64_t i, len = g->decoder_input_ids.cu[1];
        for (i = 1; i < g->decoder_input_ids.n; i++)
            FAT5__GEN_BAD(g->decoder_input_ids.cu[i + 1] - g->decoder_input_ids.cu[i] != len,
                          "%s: decoder_input_ids row %lld has %lld tokens, row 0 has %lld: every prompt must have "
                          "one length", what, (long long)i,
                          (long long)(g->decoder_input_ids.cu[i + 1] - g->decoder_input_ids.cu[i]), (long long)len);
    }
    return FAT5_OK;
#undef FAT5__GEN_BAD
}

// one integer member (null: left as it is); *set tells whether it was there
static fat5_status fat5__gen_int(fat5_ctx *ctx, const fat5__json *root, const char *key, int64_t *out, int *set) {
    const fat5__json *v = fat5__json_get(root, key);
    if (set) *set = 0;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_NUMBER || !fat5__json_as_i64(v, out))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be an integer, got %s", key,
                         fat5__json_type_name(v->type));
    if (set) *set = 1;
    return FAT5_OK;
}
static fat5_status fat5__gen_num(fat5_ctx *ctx, const fat5__json *root, const char *key, double *out) {
    const fat5__json *v = fat5__json_get(root, key);
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_NUMBER || !fat5__json_as_double(v, out))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be a number, got %s", key,
                         fat5__json_type_name(v->type));
    return FAT5_OK;
}
static fat5_status fat5__gen_bool(fat5_ctx *ctx, const fat5__json *root, const char *key, int *out) {
    const fat5__json *v = fat5__json_get(root, key);
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_TRUE && v->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be true or false, got %s", key,
                         fat5__json_type_name(v->type));
    *out = v->type == FAT5__J_TRUE;
    return FAT5_OK;
}

// The members of a generation_config.json that transformers defines and that change nothing fat5
// generates (caching, compilation, what generate returns, an assistant model's settings, file
// metadata): accepted whatever their value.
static const char *const fat5__gen_keys_inert[] = {
    "use_cache", "cache_implementation", "cache_config", "max_cache_len", "output_attentions",
    "output_hidden_states", "return_dict_in_generate", "bos_token_id",
    "compile_config", "disable_compile", "prefill_chunk_size", "low_memory", "continuous_batching_config",
    "is_assistant", "num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
    "assistant_lookbehind", "target_lookbehind", "max_matching_ngram_size", "_from_model_config",
    "transformers_version", "_commit_hash", NULL};
// The members transformers defines for decoding modes fat5 does not run: refused unless absent, null
// or at the value that turns them off (a string the reader checks: "false", "1", "0", "[]" or ""
// for null alone).
static const char *const fat5__gen_keys_refused[][2] = {
    {"use_mtp", "false"}, {"top_h", ""}, {"token_healing", "false"},
    {"guidance_scale", "1"}, {"watermarking_config", ""}, {"prompt_lookup_num_tokens", ""},
    {"assistant_early_exit", ""}, {"assistant_ensemble_weight", ""}, {"speculation_type", ""},
    {"penalty_alpha", "0"}, {"dola_layers", ""}, {"constraints", "[]"}, {NULL, NULL}};
// The members fat5 reads (the rest of transformers' names, and fat5's own seed / use_graph /
// decoder_input_ids).
static const char *const fat5__gen_keys_read[] = {
    "max_new_tokens", "min_new_tokens", "max_length", "min_length", "do_sample", "temperature", "top_k", "top_p",
    "seed", "num_beams", "length_penalty", "num_return_sequences", "repetition_penalty", "no_repeat_ngram_size",
    "eos_token_id", "pad_token_id", "decoder_start_token_id", "use_graph", "early_stopping", "forced_bos_token_id",
    "forced_eos_token_id", "suppress_tokens", "begin_suppress_tokens", "bad_words_ids", "sequence_bias",
    "encoder_repetition_penalty", "encoder_no_repeat_ngram_size", "exponential_decay_length_penalty",
    "renormalize_logits", "remove_invalid_values", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff",
    "decoder_input_ids", "max_time", "output_scores", "output_logits", "stop_strings", "num_beam_groups", "diversity_penalty",
    "force_words_ids", NULL};

static int fat5__gen_key_in(const char *const *keys, const char *k) {
    for (; *keys; keys++)
        if (strcmp(*keys, k) == 0) return 1;
    return 0;
}

// A refused member at its off value ("" : only null is off)
static int fat5__gen_key_off(const fat5__json *v, const char *off) {
    double x;
    if (v->type == FAT5__J_NULL) return 1;
    if (!strcmp(off, "false")) return v->type == FAT5__J_FALSE;
    if (!strcmp(off, "[]")) return (v->type == FAT5__J_ARRAY || v->type == FAT5__J_OBJECT) && v->n == 0;
    if (off[0] && v->type == FAT5__J_NUMBER && fat5__json_as_double(v, &x)) return x == atof(off);
    return 0;
}

// Token ids from a member that is one integer (one_ok) or a list of integers, kept by the context.
// *present: 0 when absent or null.
static fat5_status fat5__gen_ids(fat5_ctx *ctx, const fat5__json *root, const char *key, int one_ok,
                                 fat5_token_list *out, int *present) {
    const fat5__json *v = fat5__json_get(root, key), *e;
    int32_t *ids;
    int64_t n = 0, x;
    *present = 0;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_ARRAY && !(one_ok && v->type == FAT5__J_NUMBER))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be %s of token ids, got %s", key,
                         one_ok ? "an id or a list" : "a list", fat5__json_type_name(v->type));
    n = v->type == FAT5__J_ARRAY ? v->n : 1;
    if (n == 0) {
        ids = (int32_t *)fat5__ctx_keep_bytes(ctx, NULL, 0);
    } else {
        int32_t *tmp = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
        int64_t i = 0;
        if (!tmp) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "generation config: out of memory for %s", key);
        for (e = v->type == FAT5__J_ARRAY ? v->child : v; e && i < n; e = e->next, i++) {
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &x) || x < 0 || x > INT32_MAX) {
                fat5__free(ctx, tmp);
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s[%lld] is not a token id", key,
                                 (long long)i);
            }
            tmp[i] = (int32_t)x;
            if (v->type != FAT5__J_ARRAY) break;
        }
        ids = (int32_t *)fat5__ctx_keep_bytes(ctx, tmp, (size_t)n * sizeof(int32_t));
        fat5__free(ctx, tmp);
    }
    if (!ids) return FAT5_ERR_OUT_OF_MEMORY;
    out->ids = ids, out->n = n;
    *present = 1;
    return FAT5_OK;
}

// Packed token sequences from a list of lists of ids (with_bias: a list of [[ids...], bias] pairs,
// sequence_bias's form, the biases into *bias), kept by the context.
static fat5_status fat5__gen_seqs(fat5_ctx *ctx, const fat5__json *root, const char *key, int with_bias,
                                  fat5_token_seqs *out, const float **bias) {
    const fat5__json *v = fat5__json_get(root, key), *row, *e;
    int64_t n, total = 0, i, j, x;
    int32_t *buf = NULL, *ids, *cu;
    float *b = NULL;
    fat5_status st = FAT5_OK;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_ARRAY)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be a list, got %s", key,
                         fat5__json_type_name(v->type));
    n = v->n;
    for (row = v->child, i = 0; row; row = row->next, i++) {
        const fat5__json *seq = row;
        if (with_bias) {
            double d;
            if (row->type != FAT5__J_ARRAY || row->n != 2 || row->child->type != FAT5__J_ARRAY ||
                row->child->next->type != FAT5__J_NUMBER || !fat5__json_as_double(row->child->next, &d))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s[%lld] must be a pair [[ids...], "
                                 "bias]", key, (long long)i);
            seq = row->child;
        }
        if (seq->type != FAT5__J_ARRAY || seq->n == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s[%lld] must be a non-empty list of "
                             "token ids", key, (long long)i);
        total += seq->n;
    }
    buf = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(total + n + 1) * sizeof(int32_t)));
    if (with_bias) b = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)(n ? n : 1) * sizeof(float)));
    if (!buf || (with_bias && !b)) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "generation config: out of memory for %s", key);
        goto done;
    }
    cu = buf, ids = buf + n + 1;
    cu[0] = 0;
    for (row = v->child, i = 0; row; row = row->next, i++) {
        const fat5__json *seq = with_bias ? row->child : row;
        if (with_bias) {
            double d = 0;
            fat5__json_as_double(row->child->next, &d);
            b[i] = (float)d;
        }
        for (e = seq->child, j = cu[i]; e; e = e->next, j++) {
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &x) || x < 0 || x > INT32_MAX) {
                st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s[%lld][%lld] is not a token id", key,
                               (long long)i, (long long)(j - cu[i]));
                goto done;
            }
            ids[j] = (int32_t)x;
        }
        cu[i + 1] = (int32_t)j;
    }
    {
        int32_t *kept = (int32_t *)fat5__ctx_keep_bytes(ctx, buf, (size_t)(total + n + 1) * sizeof(int32_t));
        if (!kept) {
            st = FAT5_ERR_OUT_OF_MEMORY;
            goto done;
        }
        out->cu = kept, out->ids = kept + n + 1, out->n = n;
        if (with_bias) {
            float *kb = (float *)fat5__ctx_keep_bytes(ctx, b, (size_t)(n ? n : 1) * sizeof(float));
            if (!kb) {
                st = FAT5_ERR_OUT_OF_MEMORY;
                goto done;
            }
            *bias = kb;
        }
    }
done:
    fat5__free(ctx, buf);
    fat5__free(ctx, b);
    return st;
}

// force_words_ids: a list whose items are each a phrase (a list of ids) or a disjunctive constraint
// (a list of lists of ids: any one of them), transformers' two nestings; the sequences packed into
// *out and each one's constraint number into *constraint, kept by the context.
static fat5_status fat5__gen_force_words(fat5_ctx *ctx, const fat5__json *root, fat5_token_seqs *out,
                                         const int32_t **constraint) {
    const fat5__json *v = fat5__json_get(root, "force_words_ids"), *item, *seq, *e;
    int64_t n = 0, total = 0, i, j, c, x;
    int32_t *buf = NULL, *kept;
    fat5_status st = FAT5_OK;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_ARRAY || v->n == 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: force_words_ids must be a non-empty list of "
                         "phrases (lists of ids) or of lists of them");
    for (item = v->child, c = 0; item; item = item->next, c++) {
        int nested;
        if (item->type != FAT5__J_ARRAY || item->n == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: force_words_ids[%lld] must be a non-empty "
                             "list", (long long)c);
        nested = item->child->type == FAT5__J_ARRAY;
        for (seq = nested ? item->child : item; seq; seq = nested ? seq->next : NULL) {
            if (nested && (seq->type != FAT5__J_ARRAY || seq->n == 0))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: force_words_ids[%lld] mixes lists and "
                                 "ids or holds an empty list", (long long)c);
            n++, total += seq->n;
        }
    }
    buf = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(2 * n + 1 + total) * sizeof(int32_t)));
    if (!buf) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "generation config: out of memory for force_words_ids");
    // layout: cu [n + 1], constraint [n], ids [total]
    buf[0] = 0;
    for (item = v->child, c = 0, i = 0; item; item = item->next, c++) {
        int nested = item->child->type == FAT5__J_ARRAY;
        for (seq = nested ? item->child : item; seq; seq = nested ? seq->next : NULL, i++) {
            for (e = seq->child, j = buf[i]; e; e = e->next, j++) {
                if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &x) || x < 0 || x > INT32_MAX) {
                    st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: force_words_ids[%lld] holds %s, not "
                                   "a token id", (long long)c, e->type == FAT5__J_ARRAY ? "a list among ids" : "a value");
                    goto done;
                }
                buf[2 * n + 1 + j] = (int32_t)x;
            }
            buf[i + 1] = (int32_t)j;
            buf[n + 1 + i] = (int32_t)c;
        }
    }
    kept = (int32_t *)fat5__ctx_keep_bytes(ctx, buf, (size_t)(2 * n + 1 + total) * sizeof(int32_t));
    if (!kept) {
        st = FAT5_ERR_OUT_OF_MEMORY;
        goto done;
    }
    out->cu = kept, out->ids = kept + 2 * n + 1, out->n = n;
    *constraint = kept + n + 1;
done:
    fat5__free(ctx, buf);
    return st;
}

// Strings from a member that is one string or a list of strings, kept by the context.
static fat5_status fat5__gen_strings(fat5_ctx *ctx, const fat5__json *root, const char *key,
                                     const char *const **out, int64_t *n_out) {
    const fat5__json *v = fat5__json_get(root, key), *e;
    const char **list;
    int64_t n, i;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_STRING && v->type != FAT5__J_ARRAY)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be a string or a list of strings, got %s",
                         key, fat5__json_type_name(v->type));
    n = v->type == FAT5__J_ARRAY ? v->n : 1;
    list = (const char **)fat5__ctx_keep_bytes(ctx, NULL, (size_t)(n ? n : 1) * sizeof(char *));
    if (!list) return FAT5_ERR_OUT_OF_MEMORY;
    for (e = v->type == FAT5__J_ARRAY ? v->child : v, i = 0; i < n; e = e->next, i++) {
        if (e->type != FAT5__J_STRING || !e->str[0])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s[%lld] must be a non-empty string", key,
                             (long long)i);
        if (!(list[i] = fat5__ctx_keep(ctx, e->str))) return FAT5_ERR_OUT_OF_MEMORY;
    }
    *out = list, *n_out = n;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_generate_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                    fat5_generate_config *inout) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *es, *k, *ed;
    fat5_generate_config g;
    fat5_status st;
    int64_t seed = 0, max_length = 0, min_length = 0;
    int has_max_new = 0, has_min_new = 0, has_max_len = 0, has_min_len = 0, has_seed = 0, has_eos = 0, present = 0;
    if (!ctx || !inout) return FAT5_ERR_INVALID_ARG;
    if ((st = fat5__json_parse(ctx, "generation config", json, len, 16, &doc))) return st;
    root = fat5__json_root(doc);
    g = *inout;
    if (root->type != FAT5__J_OBJECT) {
        fat5__json_free(ctx, doc);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: expected a JSON object");
    }
    // every member is read, known to change nothing, or refused by name; other names (not
    // transformers' either) are kept by transformers as plain attributes and ignored here too
    for (k = root->child; k; k = k->next) {
        int r;
        if (fat5__gen_key_in(fat5__gen_keys_read, k->key) || fat5__gen_key_in(fat5__gen_keys_inert, k->key)) continue;
        for (r = 0; fat5__gen_keys_refused[r][0]; r++)
            if (!strcmp(fat5__gen_keys_refused[r][0], k->key) && !fat5__gen_key_off(k, fat5__gen_keys_refused[r][1])) {
                st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                               "generation config: %s is not supported (fat5 runs greedy, sampling, beam search and "
                               "beam sampling with the logits processors of docs/generation.md); remove it or set it "
                               "to null",
                               k->key);
                goto done;
            }
    }
    es = fat5__json_get(root, "early_stopping");
    if ((st = fat5__gen_int(ctx, root, "max_new_tokens", &g.max_new_tokens, &has_max_new)) ||
        (st = fat5__gen_int(ctx, root, "min_new_tokens", &g.min_new_tokens, &has_min_new)) ||
        (st = fat5__gen_int(ctx, root, "max_length", &max_length, &has_max_len)) ||
        (st = fat5__gen_int(ctx, root, "min_length", &min_length, &has_min_len)) ||
        (st = fat5__gen_bool(ctx, root, "do_sample", &g.do_sample)) ||
        (st = fat5__gen_num(ctx, root, "temperature", &g.temperature)) ||
        (st = fat5__gen_int(ctx, root, "top_k", &g.top_k, NULL)) ||
        (st = fat5__gen_num(ctx, root, "top_p", &g.top_p)) ||
        (st = fat5__gen_int(ctx, root, "seed", &seed, &has_seed)) ||
        (st = fat5__gen_int(ctx, root, "num_beams", &g.num_beams, NULL)) ||
        (st = fat5__gen_num(ctx, root, "length_penalty", &g.length_penalty)) ||
        (st = fat5__gen_int(ctx, root, "num_return_sequences", &g.num_return_sequences, NULL)) ||
        (st = fat5__gen_num(ctx, root, "repetition_penalty", &g.repetition_penalty)) ||
        (st = fat5__gen_int(ctx, root, "no_repeat_ngram_size", &g.no_repeat_ngram_size, NULL)) ||
        (st = fat5__gen_ids(ctx, root, "eos_token_id", 1, &g.eos_token_ids, &has_eos)) ||
        (st = fat5__gen_int(ctx, root, "pad_token_id", &g.pad_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "decoder_start_token_id", &g.decoder_start_token_id, NULL)) ||
        (st = fat5__gen_bool(ctx, root, "use_graph", &g.use_graph)) ||
        (st = fat5__gen_int(ctx, root, "forced_bos_token_id", &g.forced_bos_token_id, NULL)) ||
        (st = fat5__gen_ids(ctx, root, "forced_eos_token_id", 1, &g.forced_eos_token_id, &present)) ||
        (st = fat5__gen_ids(ctx, root, "suppress_tokens", 0, &g.suppress_tokens, &present)) ||
        (st = fat5__gen_ids(ctx, root, "begin_suppress_tokens", 0, &g.begin_suppress_tokens, &present)) ||
        (st = fat5__gen_seqs(ctx, root, "bad_words_ids", 0, &g.bad_words_ids, NULL)) ||
        (st = fat5__gen_seqs(ctx, root, "sequence_bias", 1, &g.sequence_bias, &g.sequence_bias_values)) ||
        (st = fat5__gen_seqs(ctx, root, "decoder_input_ids", 0, &g.decoder_input_ids, NULL)) ||
        (st = fat5__gen_num(ctx, root, "encoder_repetition_penalty", &g.encoder_repetition_penalty)) ||
        (st = fat5__gen_int(ctx, root, "encoder_no_repeat_ngram_size", &g.encoder_no_repeat_ngram_size, NULL)) ||
        (st = fat5__gen_bool(ctx, root, "renormalize_logits", &g.renormalize_logits)) ||
        (st = fat5__gen_bool(ctx, root, "remove_invalid_values", &g.remove_invalid_values)) ||
        (st = fat5__gen_num(ctx, root, "min_p", &g.min_p)) ||
        (st = fat5__gen_num(ctx, root, "typical_p", &g.typical_p)) ||
        (st = fat5__gen_num(ctx, root, "epsilon_cutoff", &g.epsilon_cutoff)) ||
        (st = fat5__gen_num(ctx, root, "eta_cutoff", &g.eta_cutoff)) ||
        (st = fat5__gen_num(ctx, root, "max_time", &g.max_time)) ||
        (st = fat5__gen_int(ctx, root, "num_beam_groups", &g.num_beam_groups, NULL)) ||
        (st = fat5__gen_num(ctx, root, "diversity_penalty", &g.diversity_penalty)) ||
        (st = fat5__gen_force_words(ctx, root, &g.force_words_ids, &g.force_words_constraint)) ||
        (st = fat5__gen_bool(ctx, root, "output_scores", &g.output_scores)) ||
        (st = fat5__gen_bool(ctx, root, "output_logits", &g.output_logits)) ||
        (st = fat5__gen_strings(ctx, root, "stop_strings", &g.stop_strings, &g.n_stop_strings)))
        goto done;
    if (has_eos) {   // one id, or a list: the first is eos_token_id, the list every stop token
        if (g.eos_token_ids.n == 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: eos_token_id is an empty list");
            goto done;
        }
        g.eos_token_id = g.eos_token_ids.ids[0];
        if (fat5__json_get(root, "eos_token_id")->type != FAT5__J_ARRAY) g.eos_token_ids.n = 0;
    }
    ed = fat5__json_get(root, "exponential_decay_length_penalty");
    if (ed && ed->type != FAT5__J_NULL) {
        int64_t start = 0;
        double factor = 0;
        if (ed->type != FAT5__J_ARRAY || ed->n != 2 || ed->child->type != FAT5__J_NUMBER ||
            !fat5__json_as_i64(ed->child, &start) || start < 0 || ed->child->next->type != FAT5__J_NUMBER ||
            !fat5__json_as_double(ed->child->next, &factor)) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: exponential_decay_length_penalty must be "
                           "[start_index >= 0, decay_factor]");
            goto done;
        }
        g.exponential_decay_start = start, g.exponential_decay_factor = factor;
    }
    if (es && es->type == FAT5__J_STRING) {
        if (strcmp(es->str, "never") != 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                           "generation config: early_stopping must be true, false or \"never\", got \"%s\"", es->str);
            goto done;
        }
        g.early_stopping = 2;
    } else if (es && es->type != FAT5__J_NULL) {
        if ((st = fat5__gen_bool(ctx, root, "early_stopping", &g.early_stopping))) goto done;
    }
    if (has_seed) {
        if (seed < 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: seed = %lld is negative", (long long)seed);
            goto done;
        }
        g.seed = (uint64_t)seed;
    }
    // Hugging Face's max_length / min_length count the decoder prompt (the start token); max_new_tokens
    // wins over max_length when both are given; min_length and min_new_tokens both apply
    if (has_max_new) g.max_length = 0;
    else if (has_max_len) g.max_length = max_length;
    if (has_min_len) g.min_length = min_length;
    (void)has_min_new;
    if ((st = fat5__gen_check(ctx, "generation config", &g))) goto done;
    *inout = g;
done:
    fat5__json_free(ctx, doc);
    return st;
}
