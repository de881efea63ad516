// libFuzzer target: the safetensors reader on hostile files. The input is written to a file,
// opened with fat5_st_load, its table and metadata walked, and every tensor whose dtype converts
// to fp32 (F32, F16, BF16) read with fat5_st_read_f32.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    fat5_st_file *f = NULL;
    char path[1024];
    int i, n;
    fuzz_path(path, sizeof path, "input.safetensors");
    fuzz_write(path, data, size);
    if (fat5_st_load(ctx, path, &f) != FAT5_OK) {
        if (f) fuzz_die("fat5_st_load failed but returned a file");
        return 0;
    }
    n = fat5_st_tensor_count(f);
    for (i = 0; i < fat5_st_metadata_count(f); i++) {
        const char *k = NULL, *v = NULL;
        fat5_st_metadata_get(f, i, &k, &v);
        if (!k || !v || fat5_st_metadata_find(f, k) == NULL) fuzz_die("metadata");
    }
    for (i = 0; i < n; i++) {
        const fat5_st_tensor *t = fat5_st_get(f, i);
        int64_t numel = 1;
        float *buf;
        int d;
        if (!t || fat5_st_find(f, t->name) != i) fuzz_die("fat5_st_find");
        if (t->ndim < 0 || t->ndim > FAT5_ST_MAX_DIMS || t->begin > t->end) fuzz_die("tensor table");
        for (d = 0; d < t->ndim; d++) numel *= t->shape[d];
        if ((uint64_t)numel * fat5_st_dtype_size(t->dtype) != t->end - t->begin) fuzz_die("byte range");
        if (t->dtype != FAT5_ST_F32 && t->dtype != FAT5_ST_F16 && t->dtype != FAT5_ST_BF16) {
            if (fat5_st_read_f32(f, i, NULL, numel) == FAT5_OK) fuzz_die("read of a non-float dtype");
            continue;
        }
        buf = (float *)malloc((size_t)(numel ? numel : 1) * sizeof(float));
        if (!buf) fuzz_die("malloc");
        if (fat5_st_read_f32(f, i, buf, numel) != FAT5_OK) fuzz_die("read of a listed tensor failed");
        if (numel > 0 && fat5_st_read_f32(f, i, buf, numel - 1) == FAT5_OK) fuzz_die("wrong count accepted");
        free(buf);
    }
    fat5_st_destroy(f);
    return 0;
}
