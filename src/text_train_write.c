// =============================================================================================
// ==[8.12] text: tokenizer training — writing the tokenizer files ==
//
// A trained vocabulary (fat5__tt_vocab) becomes a checkpoint's tokenizer directory:
//   - tokenizer.json, laid out as transformers' converters lay out T5's: for Unigram the
//     Precompiled charsmap (unless "identity") and Replace(" {2,}" -> " ") normalizers,
//     WhitespaceSplit + Metaspace("\u2581", prepend always) pre-tokenizers, the Metaspace decoder;
//     for BPE the same Metaspace words (or GPT-2's ByteLevel with byte_level), the NFKC normalizer
//     for the nfkc rules, the merges by rank; both with the template "$A </s>" and the special
//     pieces and T5's <extra_id_N> sentinels (the highest ids, <extra_id_0> last) as added tokens;
//   - spiece.model (Unigram): SentencePiece's ModelProto (pieces, trainer_spec, normalizer_spec
//     with the charsmap), as spm_train writes it, without the sentinels (T5Tokenizer adds them from
//     tokenizer_config.json's extra_ids);
//   - tokenizer_config.json and special_tokens_map.json for transformers' AutoTokenizer
//     (T5Tokenizer / T5TokenizerFast).
// Every file is written to a temporary name and renamed (fat5_write_file_atomic).

// ---- protobuf encoding (the subset ModelProto needs)

static void fat5__pbw_varint(fat5__sb *b, uint64_t v) {
    char t[10];
    size_t n = 0;
    do {
        t[n++] = (char)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    fat5__sb_putn(b, t, n);
}
static void fat5__pbw_tag(fat5__sb *b, int field, int wire) { fat5__pbw_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }
static void fat5__pbw_int(fat5__sb *b, int field, int64_t v) {   // int32 / int64 / bool / enum (negative: 10 bytes)
    fat5__pbw_tag(b, field, 0);
    fat5__pbw_varint(b, (uint64_t)v);
}
static void fat5__pbw_bytes(fat5__sb *b, int field, const void *p, size_t n) {
    fat5__pbw_tag(b, field, 2);
    fat5__pbw_varint(b, n);
    fat5__sb_putn(b, FAT5__CAST(const char *, p), n);
}
static void fat5__pbw_str(fat5__sb *b, int field, const char *s) { fat5__pbw_bytes(b, field, s, strlen(s)); }
static void fat5__pbw_float(fat5__sb *b, int field, float f) {
    uint32_t u;
    char t[4];
    memcpy(&u, &f, 4);
    t[0] = (char)(u & 0xff), t[1] = (char)(u >> 8 & 0xff), t[2] = (char)(u >> 16 & 0xff), t[3] = (char)(u >> 24);
    fat5__pbw_tag(b, field, 5);
    fat5__sb_putn(b, t, 4);
}

static int fat5__tt_is_bpe(const fat5_tokenizer_train_config *cfg) { return !strcmp(cfg->model_type, "bpe"); }

// The id of a special piece by its text, -1 when absent
static int64_t fat5__tt_find(const fat5__tt_vocab *v, const char *s) {
    int64_t i;
    for (i = 0; i < v->n; i++)
        if (v->type[i] != FAT5__PT_NORMAL && !strcmp(v->piece[i], s)) return i;
    return -1;
}

// SentencePiece's ModelProto for v (Unigram, or BPE without byte-level for the normaliser only).
static fat5_status fat5__tt_spm_bytes(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                      const fat5__tt_vocab *v, const unsigned char *charsmap, size_t charsmap_len,
                                      fat5__sb *out) {
    fat5__sb m, s;
    int64_t i;
    int k;
    fat5__sb_init(&m, ctx);
    fat5__sb_init(&s, ctx);
    for (i = 0; i < v->n; i++) {   // 1: pieces
        m.len = 0;
        fat5__pbw_str(&m, 1, v->piece[i]);
        fat5__pbw_float(&m, 2, v->score[i]);
        if (v->type[i] != FAT5__PT_NORMAL) fat5__pbw_int(&m, 3, v->type[i]);
        fat5__pbw_bytes(out, 1, m.buf, m.len);
    }
    // 2: trainer_spec (the settings it was trained with, as spm_train records them)
    fat5__pbw_str(&s, 2, "spiece");
    fat5__pbw_int(&s, 3, fat5__tt_is_bpe(cfg) ? 2 : 1);
    fat5__pbw_int(&s, 4, v->n);
    fat5__pbw_float(&s, 10, (float)cfg->character_coverage);
    fat5__pbw_int(&s, 11, cfg->input_sentence_size);
    fat5__pbw_int(&s, 14, cfg->seed_sentencepiece_size);
    fat5__pbw_float(&s, 15, (float)cfg->shrinking_factor);
    fat5__pbw_int(&s, 16, cfg->num_threads);
    fat5__pbw_int(&s, 17, cfg->num_sub_iterations);
    fat5__pbw_int(&s, 18, cfg->max_sentence_length);
    fat5__pbw_int(&s, 19, cfg->shuffle_input_sentence != 0);
    fat5__pbw_int(&s, 20, cfg->max_sentencepiece_length);
    fat5__pbw_int(&s, 21, cfg->split_by_unicode_script != 0);
    fat5__pbw_int(&s, 22, cfg->split_by_whitespace != 0);
    fat5__pbw_int(&s, 23, cfg->split_by_number != 0);
    fat5__pbw_int(&s, 24, 0);
    fat5__pbw_int(&s, 25, cfg->split_digits != 0);
    for (k = 0; k < cfg->n_control_symbols; k++) fat5__pbw_str(&s, 30, cfg->control_symbols[k]);
    for (k = 0; k < cfg->n_user_defined_symbols; k++) fat5__pbw_str(&s, 31, cfg->user_defined_symbols[k]);
    fat5__pbw_int(&s, 32, 1);
    fat5__pbw_int(&s, 33, 1);
    fat5__pbw_int(&s, 35, cfg->byte_fallback != 0);
    fat5__pbw_int(&s, 40, cfg->unk_id);
    fat5__pbw_int(&s, 41, cfg->bos_id);
    fat5__pbw_int(&s, 42, cfg->eos_id);
    fat5__pbw_int(&s, 43, cfg->pad_id);
    fat5__pbw_str(&s, 44, " \xE2\x81\x87 ");
    fat5__pbw_str(&s, 45, "<unk>");
    fat5__pbw_str(&s, 46, "<s>");
    fat5__pbw_str(&s, 47, "</s>");
    fat5__pbw_str(&s, 48, "<pad>");
    fat5__pbw_bytes(out, 2, s.buf, s.len);
    // 3: normalizer_spec
    s.len = 0;
    fat5__pbw_str(&s, 1, cfg->normalization_rule_name);
    if (charsmap_len) fat5__pbw_bytes(&s, 2, charsmap, charsmap_len);
    fat5__pbw_int(&s, 3, cfg->add_dummy_prefix != 0);
    fat5__pbw_int(&s, 4, cfg->remove_extra_whitespaces != 0);
    fat5__pbw_int(&s, 5, 1);
    fat5__pbw_bytes(out, 3, s.buf, s.len);
    // 5: denormalizer_spec (identity, as spm_train writes it)
    s.len = 0;
    fat5__pbw_str(&s, 1, "identity");
    fat5__pbw_int(&s, 3, 1);
    fat5__pbw_int(&s, 4, 1);
    fat5__pbw_int(&s, 5, 1);
    fat5__pbw_bytes(out, 5, s.buf, s.len);
    k = m.oom || s.oom || out->oom;
    fat5__sb_free(&m);
    fat5__sb_free(&s);
    return k ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory writing spiece.model") : FAT5_OK;
}

// ---- tokenizer.json

static void fat5__tt_base64(fat5__sb *b, const unsigned char *p, size_t n) {
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t i;
    char q[4];
    for (i = 0; i + 2 < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        q[0] = al[x >> 18], q[1] = al[x >> 12 & 63], q[2] = al[x >> 6 & 63], q[3] = al[x & 63];
        fat5__sb_putn(b, q, 4);
    }
    if (n - i == 1) {
        uint32_t x = (uint32_t)p[i] << 16;
        q[0] = al[x >> 18], q[1] = al[x >> 12 & 63], q[2] = '=', q[3] = '=';
        fat5__sb_putn(b, q, 4);
    } else if (n - i == 2) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        q[0] = al[x >> 18], q[1] = al[x >> 12 & 63], q[2] = al[x >> 6 & 63], q[3] = '=';
        fat5__sb_putn(b, q, 4);
    }
}

// One added token: special unless it is a user-defined piece (those are matched in the text too)
static void fat5__tt_json_added(fat5__sb *b, int64_t id, const char *content, int special, int first) {
    fat5__sb_printf(b, "%s\n    {\"id\": %lld, \"content\": ", first ? "" : ",", (long long)id);
    fat5__sb_json_string(b, content);
    fat5__sb_printf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": %s, "
                       "\"special\": %s}", special ? "false" : "true", special ? "true" : "false");
}

static const char fat5__tt_metaspace[] =
    "{\"type\": \"Metaspace\", \"replacement\": \"\xE2\x96\x81\", \"prepend_scheme\": \"always\", \"split\": true}";

// tokenizer.json for v with cfg's pipeline and extra_ids sentinels.
static fat5_status fat5__tt_json_bytes(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                       const fat5__tt_vocab *v, const unsigned char *charsmap, size_t charsmap_len,
                                       fat5__sb *b) {
    int bpe = fat5__tt_is_bpe(cfg), first = 1, k;
    int64_t i, eos = fat5__tt_find(v, "</s>"), unk = fat5__tt_find(v, "<unk>");
    char num[40];
    fat5__sb_puts(b, "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [");
    for (i = 0; i < v->n; i++)
        if (v->type[i] == FAT5__PT_CONTROL || v->type[i] == FAT5__PT_UNKNOWN || v->type[i] == FAT5__PT_USER) {
            fat5__tt_json_added(b, i, v->piece[i], v->type[i] != FAT5__PT_USER, first);
            first = 0;
        }
    for (k = 0; k < cfg->extra_ids; k++) {
        char s[32];
        snprintf(s, sizeof s, "<extra_id_%d>", cfg->extra_ids - 1 - k);
        fat5__tt_json_added(b, v->n + k, s, 1, first);
        first = 0;
    }
    fat5__sb_puts(b, "\n  ],\n  \"normalizer\": ");
    if (!bpe) {
        fat5__sb_puts(b, "{\"type\": \"Sequence\", \"normalizers\": [");
        if (charsmap_len) {
            fat5__sb_puts(b, "{\"type\": \"Precompiled\", \"precompiled_charsmap\": \"");
            fat5__tt_base64(b, charsmap, charsmap_len);
            fat5__sb_puts(b, "\"}");
            if (cfg->remove_extra_whitespaces) fat5__sb_puts(b, ", ");
        }
        if (cfg->remove_extra_whitespaces)
            fat5__sb_puts(b, "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" {2,}\"}, \"content\": \" \"}");
        fat5__sb_puts(b, "]}");
    } else {
        fat5__sb_puts(b, strcmp(cfg->normalization_rule_name, "identity") ? "{\"type\": \"NFKC\"}" : "null");
    }
    fat5__sb_puts(b, ",\n  \"pre_tokenizer\": ");
    if (bpe && cfg->byte_level) {
        fat5__sb_puts(b, "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true}");
    } else if (bpe) {
        fat5__sb_puts(b, fat5__tt_metaspace);
    } else {
        fat5__sb_puts(b, "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"WhitespaceSplit\"}, ");
        fat5__sb_puts(b, fat5__tt_metaspace);
        fat5__sb_puts(b, "]}");
    }
    fat5__sb_puts(b, ",\n  \"post_processor\": ");
    if (eos >= 0) {
        fat5__sb_puts(b, "{\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, "
                         "{\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], \"pair\": [{\"Sequence\": {\"id\": \"A\", "
                         "\"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": "
                         "\"B\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], "
                         "\"special_tokens\": {\"</s>\": {\"id\": \"</s>\", \"ids\": [");
        fat5__sb_printf(b, "%lld], \"tokens\": [\"</s>\"]}}}", (long long)eos);
    } else {
        fat5__sb_puts(b, "null");
    }
    fat5__sb_puts(b, ",\n  \"decoder\": ");
    if (bpe && cfg->byte_level)
        fat5__sb_puts(b, "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true}");
    else if (cfg->byte_fallback)
        fat5__sb_puts(b, "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
                         "\"\xE2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, "
                         "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}");
    else
        fat5__sb_puts(b, fat5__tt_metaspace);
    fat5__sb_puts(b, ",\n  \"model\": {");
    if (!bpe) {
        fat5__sb_printf(b, "\"type\": \"Unigram\", \"unk_id\": %lld, \"vocab\": [", (long long)unk);
        for (i = 0; i < v->n; i++) {
            fat5__sb_puts(b, i ? ",\n    [" : "\n    [");
            fat5__sb_json_string(b, v->piece[i]);
            fat5__fmt_double(num, (double)v->score[i]);
            fat5__sb_printf(b, ", %s]", num);
        }
        fat5__sb_printf(b, "\n  ], \"byte_fallback\": %s}\n}\n", cfg->byte_fallback ? "true" : "false");
    } else {
        fat5__sb_puts(b, "\"type\": \"BPE\", \"dropout\": null, \"unk_token\": ");
        if (cfg->byte_level || unk < 0) fat5__sb_puts(b, "null");
        else fat5__sb_json_string(b, v->piece[unk]);
        fat5__sb_printf(b, ", \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": %s, "
                           "\"byte_fallback\": %s, \"ignore_merges\": false, \"vocab\": {",
                        cfg->byte_level ? "false" : "true", cfg->byte_fallback ? "true" : "false");
        for (i = 0; i < v->n; i++) {
            fat5__sb_puts(b, i ? ",\n    " : "\n    ");
            fat5__sb_json_string(b, v->piece[i]);
            fat5__sb_printf(b, ": %lld", (long long)i);
        }
        fat5__sb_puts(b, "\n  }, \"merges\": [");
        for (i = 0; i < v->n_merges; i++) {
            fat5__sb_puts(b, i ? ",\n    [" : "\n    [");
            fat5__sb_json_string(b, v->piece[v->merges[2 * i]]);
            fat5__sb_puts(b, ", ");
            fat5__sb_json_string(b, v->piece[v->merges[2 * i + 1]]);
            fat5__sb_puts(b, "]");
        }
        fat5__sb_puts(b, "\n  ]}\n}\n");
    }
    return b->oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory writing tokenizer.json") : FAT5_OK;
}

// tokenizer_config.json (ext 0) or special_tokens_map.json (1)
static void fat5__tt_config_bytes(const fat5_tokenizer_train_config *cfg, const fat5__tt_vocab *v, int map,
                                  fat5__sb *b) {
    int k;
    fat5__sb_puts(b, "{\n");
    if (!map) fat5__sb_puts(b, "  \"tokenizer_class\": \"T5Tokenizer\",\n  \"model_max_length\": 512,\n");
    if (fat5__tt_find(v, "</s>") >= 0) fat5__sb_puts(b, "  \"eos_token\": \"</s>\",\n");
    if (fat5__tt_find(v, "<s>") >= 0) fat5__sb_puts(b, "  \"bos_token\": \"<s>\",\n");
    if (fat5__tt_find(v, "<pad>") >= 0) fat5__sb_puts(b, "  \"pad_token\": \"<pad>\",\n");
    if (!map) fat5__sb_printf(b, "  \"extra_ids\": %d,\n", cfg->extra_ids);
    fat5__sb_puts(b, "  \"unk_token\": \"<unk>\",\n  \"additional_special_tokens\": [");
    for (k = 0; k < cfg->extra_ids; k++) fat5__sb_printf(b, "%s\"<extra_id_%d>\"", k ? ", " : "", k);
    fat5__sb_puts(b, "]\n}\n");
}

static fat5_status fat5__tt_put(fat5_ctx *ctx, const char *dir, const char *name, fat5__sb *b) {
    char path[4096];
    if (b->oom) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory writing %s", name);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: out_dir is too long");
    return fat5_write_file_atomic(ctx, path, b->buf, b->len);
}

static fat5_status fat5__tt_write_dir(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                      const fat5__tt_vocab *v, const unsigned char *charsmap, size_t charsmap_len,
                                      const char *dir) {
    fat5__sb b;
    fat5_status st;
    if (!fat5__is_dir(dir) && fat5__fs_mkdir(dir) != 0 && !fat5__is_dir(dir))
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
    fat5__sb_init(&b, ctx);
    if ((st = fat5__tt_json_bytes(ctx, cfg, v, charsmap, charsmap_len, &b)) ||
        (st = fat5__tt_put(ctx, dir, "tokenizer.json", &b)))
        goto done;
    if (!fat5__tt_is_bpe(cfg)) {
        b.len = 0;
        if ((st = fat5__tt_spm_bytes(ctx, cfg, v, charsmap, charsmap_len, &b)) || (st = fat5__tt_put(ctx, dir, "spiece.model", &b)))
            goto done;
    }
    b.len = 0;
    fat5__tt_config_bytes(cfg, v, 0, &b);
    if ((st = fat5__tt_put(ctx, dir, "tokenizer_config.json", &b))) goto done;
    b.len = 0;
    fat5__tt_config_bytes(cfg, v, 1, &b);
    st = fat5__tt_put(ctx, dir, "special_tokens_map.json", &b);
done:
    fat5__sb_free(&b);
    return st;
}
