// =============================================================================================
// ==[8.9] text: tokenizer training — the normalisation charsmap ==

static fat5_status fat5__tt_charsmap(fat5_ctx *ctx, const char *rule, unsigned char **blob, size_t *len) {
    *blob = NULL, *len = 0;
    if (!strcmp(rule, "identity")) return FAT5_OK;
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_tokenizer_train: normalization_rule_name %s is not built yet", rule);
}
