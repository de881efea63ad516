// libFuzzer target: a task head's JSON Lines rows (fine-tuning's task option: classify,
// token-classify, qa). The first byte picks the task, the classifier and whether a label_file
// (the text before FUZZ_FILE_SPLIT) is given; the rest is the training file, read byte-level into
// a tiny model's trainer (its labels scanned, its head made, its rows read and aligned). Any
// refusal is fine; a trainer that opens must run a training step and an evaluation.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ok_status(fat5_status st) {
    return st == FAT5_OK || st == FAT5_ERR_FORMAT || st == FAT5_ERR_IO || st == FAT5_ERR_INVALID_ARG ||
           st == FAT5_ERR_OUT_OF_MEMORY || st == FAT5_ERR_UNSUPPORTED || st == FAT5_ERR_STATE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const tasks[] = {"classify", "token-classify", "qa"};
    static const char *const o[][2] = {
        {"model", "tiny"}, {"d_model", "8"}, {"d_ff", "16"}, {"num_heads", "2"}, {"d_kv", "4"}, {"num_layers", "1"},
        {"num_decoder_layers", "1"}, {"max_steps", "1"}, {"warmup_steps", "0"}, {"optim", "adamw"},
        {"max_length", "24"}, {"batch_tokens", "64"}, {"eval_fraction", "0.5"}, {"eval_steps", "1"},
        {"save_steps", "0"}, {"per_device_train_batch_size", "4"}};
    fat5_ctx *ctx = fuzz_ctx();
    fat5_train_config c = fat5_train_config_default();
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    char train[1024], labels[1024], out[1024];
    size_t pos = 1, len = 0, i;
    const uint8_t *part;
    fat5_status st;
    if (size < 1) return 0;
    for (i = 0; i < sizeof o / sizeof o[0]; i++)
        if (fat5_train_config_set(ctx, &c, o[i][0], o[i][1]) != FAT5_OK) fuzz_die("a fixed option is refused");
    if (fat5_train_config_set(ctx, &c, "task", tasks[data[0] % 3]) != FAT5_OK ||
        fat5_train_config_set(ctx, &c, "classifier", data[0] & 8 ? "t5" : "encoder") != FAT5_OK)
        fuzz_die("a task option is refused");
    fuzz_path(train, sizeof train, "train.jsonl");
    fuzz_path(labels, sizeof labels, "labels.txt");
    fuzz_path(out, sizeof out, "out");
    fuzz_rmtree(out);
    if (data[0] & 16) {   // a label file, then the rows
        part = fuzz_next_part(data, size, FUZZ_FILE_SPLIT, &pos, &len);
        fuzz_write(labels, part ? part : data, part ? len : 0);
        c.label_file = labels;
        part = fuzz_next_part(data, size, FUZZ_FILE_SPLIT, &pos, &len);
        fuzz_write(train, part ? part : data, part ? len : 0);
    } else {
        fuzz_write(train, data + 1, size - 1);
    }
    c.train_file = train;
    c.output_dir = out;
    st = fat5_train_create(ctx, &c, &t);
    if (!ok_status(st)) fuzz_die("fat5_train_create: an unexpected status");
    if (st == FAT5_OK) {
        memset(&r, 0, sizeof r);
        st = fat5_train_step(t, &r);
        if (!ok_status(st)) fuzz_die("fat5_train_step: an unexpected status");
        if (st == FAT5_OK && r.has_eval && !r.has_predict) fuzz_die("an evaluation without the head's scores");
    }
    fat5_train_destroy(t);
    return 0;
}
