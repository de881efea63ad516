// libFuzzer target: the shard index. The input is written as model.safetensors.index.json into a
// directory that also holds the fixture's config.json and its tensors split into two valid shards
// (model-0000{1,2}-of-00002.safetensors); fat5_model_load then loads the directory.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int ready;

static void prepare(void) {
    fat5_ctx *ctx = fuzz_ctx();
    char src[1024], dst[1024], *text;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/config.json", FUZZ_DATA_DIR);
    if (!(text = fuzz_read(src, &len))) fuzz_die("cannot read the fixture's config.json");
    fuzz_path(dst, sizeof dst, "config.json");
    fuzz_write(dst, text, len);
    free(text);
    if (fuzz_write_shards(ctx, FUZZ_DATA_DIR, fuzz_dir) != 0) fuzz_die("cannot write the shards");
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_model *m = NULL;
    char path[1024];
    fat5_status st;
    if (!ready) prepare();
    fuzz_path(path, sizeof path, "model.safetensors.index.json");
    fuzz_write(path, data, size);
    st = fat5_model_load(fuzz_ctx(), fuzz_dir, &m);
    if ((st == FAT5_OK) != (m != NULL)) fuzz_die("status and model disagree");
    fat5_model_destroy(m);
    return 0;
}
