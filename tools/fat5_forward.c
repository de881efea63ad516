// fat5_forward — run a model on a JSON batch and write the logits of every label position.
//     cc -O2 -o tools/fat5_forward tools/fat5_forward.c -lm -ldl -lpthread
//     tools/fat5_forward DIR BATCH.json OUT.safetensors [--device cpu|gpu] [--dtype fp32|bf16]
//                        [--attention full|local:R|block-global:R:G|transient-global:R:G]
// BATCH.json is {"inputs": [[ids]...], "labels": [[ids]...]} with rows of any lengths (-100 in
// labels is ignored by the loss). OUT holds an F32 tensor `logits` [label tokens, vocab], rows in
// batch order, and the loss in its __metadata__. The loss is printed. For comparing fat5 with
// another implementation: ref/make_reference.py --check-logits OUT --model DIR --batch BATCH.
// --attention runs the encoder with another attention pattern than the model's own (long inputs;
// fat5_attention_parse).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(fat5_ctx *ctx, const char *what) {
    fprintf(stderr, "fat5_forward: %s: %s\n", what, ctx ? fat5_last_error(ctx) : "out of memory");
    return 1;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_forward_result r;
    fat5_st_write_tensor t;
    char *text = NULL, loss_s[64], ntok_s[32];
    const char *attention = NULL;
    const char *meta[6];
    size_t len = 0;
    float *logits = NULL;
    int64_t V, td;
    int i, rc = 1;
    memset(&b, 0, sizeof b);
    if (argc < 4) {
        fprintf(stderr, "usage: %s DIR BATCH.json OUT.safetensors [--device cpu|gpu] [--dtype fp32|bf16]\n"
                        "       [--attention full|local:R|block-global:R:G|transient-global:R:G]\n", argv[0]);
        return 2;
    }
    for (i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "cpu") == 0) cc.device = FAT5_DEVICE_CPU;
            else if (strcmp(argv[i], "gpu") == 0) cc.device = FAT5_DEVICE_GPU;
            else { fprintf(stderr, "fat5_forward: --device must be cpu or gpu\n"); return 2; }
        } else if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "fp32") == 0) cc.dtype = FAT5_DTYPE_FP32;
            else if (strcmp(argv[i], "bf16") == 0) cc.dtype = FAT5_DTYPE_BF16;
            else { fprintf(stderr, "fat5_forward: --dtype must be fp32 or bf16\n"); return 2; }
        } else if (strcmp(argv[i], "--attention") == 0 && i + 1 < argc) {
            attention = argv[++i];
        } else {
            fprintf(stderr, "fat5_forward: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (cc.device == FAT5_DEVICE_CPU && cc.dtype == FAT5_DTYPE_BF16) {
        fprintf(stderr, "fat5_forward: the CPU reference computes in fp32; bf16 needs --device gpu\n");
        return 2;
    }
    {
        char why[512];
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            fprintf(stderr, "fat5_forward: opening the device: %s\n", why);
            return 1;
        }
    }
    if (fat5_model_load(ctx, argv[1], &m) != FAT5_OK) { rc = fail(ctx, "loading the model"); goto done; }
    // inference mode: no gradients, and the logits of every row kept (whatever the batch's size)
    if (fat5_model_set_training(m, 0) != FAT5_OK) { rc = fail(ctx, "inference mode"); goto done; }
    if (attention) {
        fat5_attention a;
        if (fat5_attention_parse(ctx, attention, &a) != FAT5_OK || fat5_model_set_attention(m, &a) != FAT5_OK) {
            rc = fail(ctx, "--attention");
            goto done;
        }
    }
    if (fat5_read_file(ctx, argv[2], (size_t)1 << 30, &text, &len) != FAT5_OK) { rc = fail(ctx, "reading the batch"); goto done; }
    if (fat5_batch_from_json(ctx, text, len, &b) != FAT5_OK) { rc = fail(ctx, argv[2]); goto done; }
    if (!b.labels) { fprintf(stderr, "fat5_forward: %s has no labels\n", argv[2]); goto done; }
    if (fat5_model_forward(m, &b, NULL, &r) != FAT5_OK) { rc = fail(ctx, "forward"); goto done; }
    V = fat5_model_get_config(m)->vocab_size;
    td = b.dec_cu_seqlens[b.n_seq];
    logits = (float *)malloc((size_t)(td * V) * sizeof(float));
    if (!logits) { fprintf(stderr, "fat5_forward: out of memory\n"); goto done; }
    if (fat5_model_get_logits(m, logits, td * V) != FAT5_OK) { rc = fail(ctx, "logits"); goto done; }
    memset(&t, 0, sizeof t);
    t.name = "logits";
    t.ndim = 2;
    t.shape[0] = td;
    t.shape[1] = V;
    t.data = logits;
    snprintf(loss_s, sizeof loss_s, "%.9g", r.loss);
    snprintf(ntok_s, sizeof ntok_s, "%lld", (long long)r.n_tokens);
    meta[0] = "loss"; meta[1] = loss_s;
    meta[2] = "n_tokens"; meta[3] = ntok_s;
    meta[4] = "device"; meta[5] = cc.device == FAT5_DEVICE_GPU ? (cc.dtype == FAT5_DTYPE_BF16 ? "gpu-bf16" : "gpu-fp32") : "cpu";
    if (fat5_st_write(ctx, argv[3], &t, 1, meta, 3) != FAT5_OK) { rc = fail(ctx, "writing the logits"); goto done; }
    printf("loss %.6f over %lld label tokens (%lld sequences)\n", r.loss, (long long)r.n_tokens, (long long)b.n_seq);
    rc = 0;
done:
    free(logits);
    fat5_free(ctx, text);
    fat5_batch_destroy(ctx, &b);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
