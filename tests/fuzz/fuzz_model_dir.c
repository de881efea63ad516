// libFuzzer target: whole checkpoint directories. The input is config.json, the separator
// FUZZ_SPLIT, then model.safetensors; both are written into a directory that fat5_model_load
// loads. A model that loads runs fat5_model_forward on a tiny two-sequence batch (with its head's
// targets for a classifier, QA or encoder-only model).
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

// A language model runs a tiny two-sequence batch with labels: four counted tokens.
static void lm_forward(fat5_ctx *ctx, fat5_model *m) {
    int64_t v = fat5_model_get_config(m)->vocab_size;
    char json[256];
    fat5_batch b;
    fat5_forward_result r;
    fat5_loss_config lc = fat5_loss_config_default();
    snprintf(json, sizeof json,
             "{\"inputs\": [[%lld, %lld, %lld], [%lld]], \"labels\": [[%lld, -100], [%lld, %lld, %lld]]}",
             (long long)(3 % v), (long long)(5 % v), (long long)(1 % v), (long long)(7 % v),
             (long long)(2 % v), (long long)(4 % v), (long long)(6 % v), (long long)(1 % v));
    if (fat5_batch_from_json(ctx, json, strlen(json), &b) != FAT5_OK) fuzz_die("tiny batch");
    if (fat5_model_forward(m, &b, &lc, &r) != FAT5_OK) fuzz_die("forward failed on a model that loaded");
    if (r.n_tokens != 4) fuzz_die("token count");
    fat5_batch_destroy(ctx, &b);
}

// Any other head runs the same two inputs, each ending in one EOS ([[a, b, eos], [a, eos]]), with the
// targets its head takes (head_labels / head_targets, as fat5_batch documents them).
static void head_forward(fat5_model *m) {
    const fat5_model_config *c = fat5_model_get_config(m);
    int64_t v = c->vocab_size, eos = c->eos_token_id, L = c->num_labels, i, n_t;
    int32_t labels[5];
    float *targets;
    fat5_batch b;
    fat5_forward_result r;
    int32_t tokens[5];
    int32_t cu[3] = {0, 3, 5};
    if (v < 3 || eos < 0 || eos >= v) return;   // no two tokens besides a real EOS: no such batch
    tokens[0] = tokens[3] = (int32_t)((eos + 1) % v), tokens[1] = (int32_t)((eos + 2) % v);
    tokens[2] = tokens[4] = (int32_t)eos;
    memset(&b, 0, sizeof b);
    b.n_seq = 2, b.n_enc_tokens = 5, b.enc_tokens = tokens, b.enc_cu_seqlens = cu;
    n_t = c->head == FAT5_HEAD_ENCODER ? 5 * c->d_model : 2 * (L > 0 ? L : 1);
    targets = (float *)malloc((size_t)n_t * sizeof *targets);
    if (!targets) fuzz_die("out of memory");
    for (i = 0; i < n_t; i++) targets[i] = (float)(i % 2);
    for (i = 0; i < 5; i++) labels[i] = i == 1 ? -100 : (int32_t)((L > 0 ? L - 1 : 0) * (i % 2 == 0));
    if (c->head == FAT5_HEAD_QA) {   // start and end of each input's answer
        labels[0] = 0, labels[1] = 1, labels[2] = 1, labels[3] = 1;
    }
    b.head_labels = labels;
    if (c->head == FAT5_HEAD_ENCODER || ((c->head == FAT5_HEAD_SEQ_CLS || c->head == FAT5_HEAD_ENC_SEQ_CLS) &&
                                         (c->problem_type == FAT5_PROBLEM_REGRESSION ||
                                          c->problem_type == FAT5_PROBLEM_MULTI_LABEL ||
                                          (c->problem_type == FAT5_PROBLEM_AUTO && L == 1)))) {
        b.head_labels = NULL;
        b.head_targets = targets;
    }
    if (fat5_model_forward(m, &b, NULL, &r) != FAT5_OK) fuzz_die("head forward failed on a model that loaded");
    if (r.n_tokens < 0 || r.n_tokens > 5) fuzz_die("head token count");
    free(targets);
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
        if (c->head == FAT5_HEAD_LM) lm_forward(ctx, m);
        else head_forward(m);
        fat5_model_destroy(m);
    }
    return 0;
}
