// =============================================================================================
// ==[8.11] text: tokenizer training — BPE (tokenizers' BpeTrainer) ==

static fat5_status fat5__tt_bpe(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, const fat5__tt_corpus *c,
                                fat5__tt_vocab *out, fat5_tokenizer_train_report *rep) {
    (void)cfg, (void)c, (void)out, (void)rep;
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_tokenizer_train: bpe is not built yet");
}
