// libFuzzer target: tokenizer training (fat5_tokenizer_train) on a corpus file the fuzzer writes.
// The first byte picks the trainer (Unigram or BPE; byte-level BPE), the format (text, fortune,
// JSON Lines by the file name, or the jsonl format set in the config with another field) and a small
// vocabulary; the rest (at most 4 KiB, so a run stays fast) is the file. Any refusal is fine; a
// training that succeeds must have written a tokenizer.json (and a spiece.model for Unigram) that
// fat5's own loader accepts, whose vocabulary holds at least the pieces asked for or fewer (a small
// corpus runs out of pieces) plus the sentinels, and with which every line of the corpus encodes
// to ids inside the vocabulary and decodes again.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BYTES 4096

static void check_dir(fat5_ctx *ctx, const char *dir, const char *file, int64_t want_max, const uint8_t *text,
                      size_t len) {
    char path[1100];
    fat5_tokenizer *t = NULL;
    size_t a = 0;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (fat5_tokenizer_load(ctx, path, &t) != FAT5_OK) fuzz_die("a trained tokenizer file does not load");
    if (fat5_tokenizer_vocab_size(t) < 4 || fat5_tokenizer_vocab_size(t) > want_max)
        fuzz_die("a trained tokenizer's vocabulary size is out of range");
    while (a < len) {   // every line
        size_t b = a;
        int32_t *ids = NULL;
        int64_t n = 0, i;
        char *back = NULL;
        while (b < len && text[b] != '\n') b++;
        if (fat5_tokenize(t, (const char *)text + a, b - a, NULL, 0, 0, &ids, &n) != FAT5_OK)
            fuzz_die("a corpus line does not tokenize with the trained tokenizer");
        for (i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= fat5_tokenizer_vocab_size(t)) fuzz_die("an id outside the vocabulary");
        if (fat5_detokenize(t, ids, n, FAT5_DETOKENIZE_SKIP_SPECIAL, &back, NULL) != FAT5_OK)
            fuzz_die("the ids of a corpus line do not detokenize");
        fat5_free(ctx, ids);
        fat5_free(ctx, back);
        a = b + 1;
    }
    fat5_tokenizer_destroy(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"c.txt", "c.fortune", "c.jsonl", "c.data"};
    fat5_ctx *ctx = fuzz_ctx();
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    char path[1024], out[1024];
    const char *files[1];
    int form, kind;
    if (size < 1 || size - 1 > MAX_BYTES) return 0;
    kind = data[0] % 3;   // 0 unigram, 1 bpe, 2 byte-level bpe
    form = (data[0] / 3) % 4;
    cfg.model_type = kind ? "bpe" : "unigram";
    cfg.byte_level = kind == 2;
    cfg.vocab_size = 20 + (data[0] >> 3) * 4 + (kind == 2 ? 256 : 0);
    cfg.extra_ids = data[0] & 1 ? 3 : 0;
    cfg.num_threads = 1;
    cfg.verbose = 0;
    cfg.normalization_rule_name = data[0] & 2 ? "identity" : "nmt_nfkc";
    cfg.max_sentence_length = 512;
    if (form == 3) cfg.input_format = "jsonl", cfg.jsonl_field = "t";
    fuzz_path(path, sizeof path, names[form]);
    fuzz_path(out, sizeof out, "tok");
    fuzz_write(path, data + 1, size - 1);
    files[0] = path;
    if (fat5_tokenizer_train(ctx, &cfg, files, 1, out, NULL) != FAT5_OK) return 0;
    check_dir(ctx, out, "tokenizer.json", cfg.vocab_size + cfg.extra_ids, data + 1, size - 1);
    if (!kind) check_dir(ctx, out, "spiece.model", cfg.vocab_size, data + 1, size - 1);
    return 0;
}
