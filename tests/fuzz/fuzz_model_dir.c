// libFuzzer target: whole checkpoint directories. The input is config.json, the separator
// FUZZ_SPLIT, then model.safetensors; both are written into a directory that fat5_model_load
// loads. A model that loads runs fat5_model_forward on a tiny two-sequence batch.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Parameter count the config implies (roughly, in double): configs far beyond what the input can
// hold are skipped, so that the fuzzer spends its time on loads rather than on huge allocations
// that fail later on a missing tensor.
static double approx_params(const fat5_model_config *c) {
    double d = (double)c->d_model, hk = (double)c->num_heads * (double)c->d_kv, f = (double)c->d_ff;
    double ffn = (c->gated ? 3.0 : 2.0) * d * f;
    double enc = 4.0 * d * hk + ffn + 2.0 * d, dec = 8.0 * d * hk + ffn + 3.0 * d;
    double bias = (double)c->rel_buckets * (double)c->num_heads *
                  (c->bias_every_layer ? (double)(c->num_layers + c->num_decoder_layers) : 2.0);
    return (double)c->num_layers * enc + (double)c->num_decoder_layers * dec + bias +
           2.0 * (double)c->vocab_size * d + 2.0 * d;
}

static const uint8_t *find_split(const uint8_t *data, size_t size) {
    size_t n = sizeof FUZZ_SPLIT - 1, i;
    for (i = 0; i + n <= size; i++)
        if (data[i] == (uint8_t)FUZZ_SPLIT[0] && memcmp(data + i, FUZZ_SPLIT, n) == 0) return data + i;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    const uint8_t *split = find_split(data, size);
    size_t clen, n = sizeof FUZZ_SPLIT - 1;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    fat5_status st;
    char path[1024];
    if (!split) return 0;
    clen = (size_t)(split - data);
    if (fat5_model_config_from_json(ctx, (const char *)data, clen, &cfg) == FAT5_OK &&
        approx_params(&cfg) > (double)(1 << 22))
        return 0;
    fuzz_path(path, sizeof path, "config.json");
    fuzz_write(path, data, clen);
    fuzz_path(path, sizeof path, "model.safetensors");
    fuzz_write(path, split + n, size - clen - n);
    st = fat5_model_load(ctx, fuzz_dir, &m);
    if ((st == FAT5_OK) != (m != NULL)) fuzz_die("status and model disagree");
    if (m) {
        const fat5_model_config *c = fat5_model_get_config(m);
        int64_t v = c->vocab_size;
        char json[256];
        fat5_batch b;
        fat5_forward_result r;
        fat5_loss_config lc = fat5_loss_config_default();
        snprintf(json, sizeof json,
                 "{\"inputs\": [[%lld, %lld, %lld], [%lld]], \"labels\": [[%lld, -100], [%lld, %lld, %lld]]}",
                 (long long)(3 % v), (long long)(5 % v), (long long)(1 % v), (long long)(7 % v),
                 (long long)(2 % v), (long long)(4 % v), (long long)(6 % v), (long long)(1 % v));
        if (fat5_batch_from_json(ctx, json, strlen(json), &b) != FAT5_OK) fuzz_die("tiny batch");
        st = fat5_model_forward(m, &b, &lc, &r);
        if (st != FAT5_OK) fuzz_die("forward failed on a model that loaded");
        if (r.n_tokens != 4) fuzz_die("token count");
        fat5_batch_destroy(ctx, &b);
        fat5_model_destroy(m);
    }
    return 0;
}
