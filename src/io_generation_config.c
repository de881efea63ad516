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
    return FAT5_OK;
#undef FAT5__GEN_BAD
}

// one integer member (null: left as it is); *set tells whether it was there
static fat5_status fat5__gen_int(fat5_ctx *ctx, const fat5__json *root, const char *key, int64_t *out, int *set) {
    const fat5__json *v = fat5__json_get(root, key);
    if (set) *set = 0;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type == FAT5__J_ARRAY && v->n >= 1) v = v->child;   // eos_token_id: [id, ...] -> the first
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

FAT5_API fat5_status fat5_generate_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                    fat5_generate_config *inout) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *es;
    fat5_generate_config g;
    fat5_status st;
    int64_t seed = 0, max_length = 0, min_length = 0;
    int has_max_new = 0, has_min_new = 0, has_max_len = 0, has_min_len = 0, has_seed = 0;
    if (!ctx || !inout) return FAT5_ERR_INVALID_ARG;
    if ((st = fat5__json_parse(ctx, "generation config", json, len, 16, &doc))) return st;
    root = fat5__json_root(doc);
    g = *inout;
    if (root->type != FAT5__J_OBJECT) {
        fat5__json_free(ctx, doc);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: expected a JSON object");
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
        (st = fat5__gen_int(ctx, root, "eos_token_id", &g.eos_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "pad_token_id", &g.pad_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "decoder_start_token_id", &g.decoder_start_token_id, NULL)) ||
        (st = fat5__gen_bool(ctx, root, "use_graph", &g.use_graph)))
        goto done;
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
    // Hugging Face's max_length / min_length count the decoder start token; max_new_tokens and
    // min_new_tokens win when both are given
    if (has_max_len && !has_max_new) g.max_new_tokens = max_length - 1;
    if (has_min_len && !has_min_new) g.min_new_tokens = min_length > 1 ? min_length - 1 : 0;
    if ((st = fat5__gen_check(ctx, "generation config", &g))) goto done;
    *inout = g;
done:
    fat5__json_free(ctx, doc);
    return st;
}

