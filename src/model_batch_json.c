// =============================================================================================
// ==[4.5] model: batches from JSON rows ==

static fat5_status fat5__rows_to_packed(fat5_ctx *ctx, const fat5__json *rows, const char *what, int allow_ignore,
                                        int32_t **tok, int32_t **cu, int64_t *n_rows) {
    const fat5__json *r, *e;
    size_t total = 0, i = 0, s = 0;
    *tok = NULL;
    *cu = NULL;
    if (!rows || rows->type != FAT5__J_ARRAY)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' must be an array of arrays of token ids", what);
    for (r = rows->child; r; r = r->next) {
        if (r->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' row %zu is not an array", what, s);
        if (!fat5__add_ok(total, r->n, &total) || total > (size_t)INT32_MAX)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: '%s' has more than 2^31 tokens", what);
        s++;
    }
    *tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, total ? total : 1, sizeof(int32_t)));
    *cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, rows->n + 1, sizeof(int32_t)));
    if (!*tok || !*cu) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "batch: out of memory");
    s = 0;
    for (r = rows->child; r; r = r->next, s++) {
        for (e = r->child; e; e = e->next) {
            int64_t v;
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &v) || v < (allow_ignore ? -100 : 0) ||
                v > INT32_MAX || (v < 0 && v != -100))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' row %zu position %zu: '%s' is not a token id%s",
                                 what, s, (size_t)(i - (size_t)(*cu)[s]), e->type == FAT5__J_NUMBER ? e->str : "value",
                                 allow_ignore ? " or -100" : "");
            (*tok)[i++] = (int32_t)v;
        }
        (*cu)[s + 1] = (int32_t)i;
    }
    *n_rows = (int64_t)rows->n;
    return FAT5_OK;
}

FAT5_API void fat5_batch_destroy(fat5_ctx *ctx, fat5_batch *b) {
    if (!b) return;
    fat5__free(ctx, (void *)(uintptr_t)b->enc_tokens);
    fat5__free(ctx, (void *)(uintptr_t)b->enc_cu_seqlens);
    fat5__free(ctx, (void *)(uintptr_t)b->dec_tokens);
    fat5__free(ctx, (void *)(uintptr_t)b->labels);
    fat5__free(ctx, (void *)(uintptr_t)b->dec_cu_seqlens);
    memset(b, 0, sizeof *b);
}

FAT5_API fat5_status fat5_batch_from_json(fat5_ctx *ctx, const char *json, size_t len, fat5_batch *out) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *e;
    int32_t *et = NULL, *ec = NULL, *lt = NULL, *lc = NULL, *dt = NULL, *dc = NULL;
    int64_t ne = 0, nl = 0, nd = 0, s;
    fat5_status st;
    memset(out, 0, sizeof *out);
    if ((st = fat5__json_parse(ctx, "batch", json, len, 8, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: the top level must be an object");
        goto done;
    }
    for (e = root->child; e; e = e->next)
        if (strcmp(e->key, "inputs") && strcmp(e->key, "labels") && strcmp(e->key, "decoder_inputs")) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: unknown key '%s' (expected inputs, labels, decoder_inputs)",
                           e->key);
            goto done;
        }
    if ((st = fat5__rows_to_packed(ctx, fat5__json_get(root, "inputs"), "inputs", 0, &et, &ec, &ne))) goto done;
    if (fat5__json_get(root, "labels") &&
        (st = fat5__rows_to_packed(ctx, fat5__json_get(root, "labels"), "labels", 1, &lt, &lc, &nl)))
        goto done;
    if (fat5__json_get(root, "decoder_inputs") &&
        (st = fat5__rows_to_packed(ctx, fat5__json_get(root, "decoder_inputs"), "decoder_inputs", 0, &dt, &dc, &nd)))
        goto done;
    if (!lt && !dt) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: needs 'labels' or 'decoder_inputs'");
        goto done;
    }
    if ((lt && nl != ne) || (dt && nd != ne)) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: %lld input rows but %lld %s rows", (long long)ne,
                       (long long)(lt && nl != ne ? nl : nd), lt && nl != ne ? "label" : "decoder_inputs");
        goto done;
    }
    if (lt && dt)
        for (s = 0; s <= ne; s++)
            if (lc[s] != dc[s]) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: row %lld: labels and decoder_inputs differ in length",
                               (long long)(s - 1));
                goto done;
            }
    out->n_seq = ne;
    out->n_enc_tokens = ec[ne];
    out->n_dec_tokens = lt ? lc[ne] : dc[ne];
    out->enc_tokens = et;
    out->enc_cu_seqlens = ec;
    out->labels = lt;
    out->dec_tokens = dt;
    out->dec_cu_seqlens = lt ? lc : dc;
    if (lt) fat5__free(ctx, dc);
    et = ec = lt = lc = dt = dc = NULL;
done:
    fat5__free(ctx, et);
    fat5__free(ctx, ec);
    fat5__free(ctx, lt);
    fat5__free(ctx, lc);
    fat5__free(ctx, dt);
    fat5__free(ctx, dc);
    fat5__json_free(ctx, doc);
    return st;
}
