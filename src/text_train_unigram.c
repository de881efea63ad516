// =============================================================================================
// ==[8.10] text: tokenizer training — Unigram (SentencePiece's trainer) ==

static fat5_status fat5__tt_unigram(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                    const fat5__tt_corpus *c, fat5__tt_vocab *out,
                                    fat5_tokenizer_train_report *rep) {
    (void)cfg, (void)c, (void)out, (void)rep;
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_tokenizer_train: unigram is not built yet");
}
