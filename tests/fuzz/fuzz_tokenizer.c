// libFuzzer target: tokenizer files (fat5_tokenizer_from_memory). The first byte picks the kind
// (even: a SentencePiece model, odd: tokenizer.json), the rest is the file. A file that loads must
// tokenize texts (the input's own bytes among them; a Unigram model without unk_id may refuse a
// character, as tokenizers does) and decode the ids it gave, and give the same ids with spans
// (fat5_tokenize_offsets), each inside the text.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *texts[] = {"Hello world", "  a\t b  \xc3\xa9\xe2\x80\x8d\xf0\x9f\x98\x80 <extra_id_0>x", "\xff\xc3\x28", ""};
    fat5_ctx *ctx = fuzz_ctx();
    fat5_tokenizer *tok = NULL;
    size_t i;
    if (size < 1) return 0;
    if (fat5_tokenizer_from_memory(ctx, data + 1, size - 1, data[0] & 1, &tok) != FAT5_OK) {
        if (tok) fuzz_die("a failed load returned a tokenizer");
        return 0;
    }
    for (i = 0; i < 5; i++) {
        const char *s = i < 4 ? texts[i] : (const char *)data + 1;
        size_t n = i < 4 ? strlen(texts[i]) : (size - 1 < 256 ? size - 1 : 256);
        int32_t *ids = NULL;
        int64_t m = 0, k;
        char *out = NULL;
        size_t ol = 0;
        fat5_status st = fat5_tokenize(tok, s, n, i == 1 ? "pair" : NULL, i == 1 ? 4 : 0, 0, &ids, &m);
        if (st == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(ctx), "no unk_id")) continue;   // as tokenizers fails
        if (st != FAT5_OK) fuzz_die("tokenize failed");
        for (k = 0; k < m; k++)
            if (ids[k] < 0 || ids[k] >= fat5_tokenizer_vocab_size(tok)) fuzz_die("an id outside the vocabulary");
        if (fat5_detokenize(tok, ids, m, (int)(i & 1) * FAT5_DETOKENIZE_SKIP_SPECIAL, &out, &ol) != FAT5_OK)
            fuzz_die("decode of its own ids failed");
        if (!out || out[ol] != 0) fuzz_die("decode not terminated");   // <0x00> pieces decode to NUL bytes
        if (i != 1) {   // the spans: the same ids, each span inside the text
            int32_t *ids2 = NULL;
            int64_t *off = NULL, m2 = 0;
            if (fat5_tokenize_offsets(tok, s, n, 0, &ids2, &off, &m2) != FAT5_OK)
                fuzz_die("tokenize_offsets failed where tokenize did not");
            if (m2 != m || (m && memcmp(ids2, ids, (size_t)m * sizeof *ids))) fuzz_die("tokenize_offsets: other ids");
            for (k = 0; k < m2; k++)
                if (off[2 * k] < 0 || off[2 * k] > off[2 * k + 1] || off[2 * k + 1] > (int64_t)n)
                    fuzz_die("tokenize_offsets: a span outside the text");
            fat5_free(ctx, ids2);
            fat5_free(ctx, off);
        }
        fat5_free(ctx, ids);
        fat5_free(ctx, out);
    }
    fat5_tokenizer_destroy(tok);
    return 0;
}
