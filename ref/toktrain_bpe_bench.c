// The fat5 side of ref/bench_toktrain_bpe.py: trains a BPE tokenizer with fat5_tokenizer_train
// and counts the tokens it gives on held-out sentences.
//     cc -std=c99 -O2 -DFAT5_NO_CUDA -I. -o build/toktrain_bpe_bench ref/toktrain_bpe_bench.c -lm -lpthread
//     build/toktrain_bpe_bench TRAIN.txt HELDOUT.txt OUT_DIR VOCAB THREADS BYTE_LEVEL
// prints one JSON line: train_s (fat5_tokenizer_train's wall time: reading, training, writing),
// heldout_tokens and heldout_bytes (every line of HELDOUT.txt, without the EOS)
#define _POSIX_C_SOURCE 200809L
#define FAT5_IMPLEMENTATION
#include "fat5.h"

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_tokenizer_train_config c = fat5_tokenizer_train_config_default();
    fat5_tokenizer_train_report r;
    fat5_ctx *ctx = NULL;
    fat5_tokenizer *t = NULL;
    const char *files[1];
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long long tokens = 0, bytes = 0;
    FILE *fp;
    if (argc != 7) {
        fprintf(stderr, "usage: %s TRAIN.txt HELDOUT.txt OUT_DIR VOCAB THREADS BYTE_LEVEL\n", argv[0]);
        return 2;
    }
    cc.n_threads = atoi(argv[5]);
    if (fat5_ctx_create(&cc, &ctx, NULL, 0)) return 1;
    c.model_type = "bpe";
    c.vocab_size = atoll(argv[4]);
    c.num_threads = atoi(argv[5]);
    c.byte_level = atoi(argv[6]);
    c.extra_ids = 0;
    c.input_format = "text";
    c.verbose = 0;
    files[0] = argv[1];
    if (fat5_tokenizer_train(ctx, &c, files, 1, argv[3], &r) || fat5_tokenizer_load(ctx, argv[3], &t)) {
        fprintf(stderr, "%s\n", fat5_last_error(ctx));
        return 1;
    }
    fp = fopen(argv[2], "rb");
    if (!fp) return 1;
    while ((n = getline(&line, &cap, fp)) > 0) {
        int32_t *ids = NULL;
        int64_t k = 0;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        if (fat5_tokenize(t, line, (size_t)n, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &k)) {
            fprintf(stderr, "%s\n", fat5_last_error(ctx));
            return 1;
        }
        tokens += k;
        bytes += n;
        fat5_free(ctx, ids);
    }
    fclose(fp);
    free(line);
    printf("{\"train_s\": %.4f, \"alphabet\": %lld, \"merges\": %d, \"heldout_tokens\": %lld, \"heldout_bytes\": %lld}\n",
           r.seconds, (long long)r.alphabet_size, r.rounds, tokens, bytes);
    fat5_tokenizer_destroy(t);
    fat5_ctx_destroy(ctx);
    return 0;
}
