// fat5_forward — run a model on a JSON batch and write the logits of every label position.
//     cc -O2 -o tools/fat5_forward tools/fat5_forward.c -lm -ldl -lpthread
//     tools/fat5_forward DIR BATCH.json OUT.safetensors [--device cpu|gpu] [--dtype fp32|bf16]
//                        [--attention full|local:R|block-global:R:G|transient-global:R:G]
//     tools/fat5_forward --help | --version
// BATCH.json is {"inputs": [[ids]...], "labels": [[ids]...]} with rows of any lengths (-100 in
// labels is ignored by the loss). OUT holds an F32 tensor `logits` [label tokens, vocab], rows in
// batch order, and the loss in its __metadata__. The loss is printed. For comparing fat5 with
// another implementation: ref/make_reference.py --check-logits OUT --model DIR --batch BATCH.
// --attention runs the encoder with another attention pattern than the model's own (long inputs;
// fat5_attention_parse). The device is the CPU unless --device gpu (this is a reference tool: its
// logits are compared with another implementation's); --bf16 is --dtype bf16 (Hugging Face's name).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_DEVICE = 1, O_DTYPE, O_BF16, O_ATTENTION };
static const cli_opt opts[] = {
    {.id = O_DEVICE, .name = "device", .kind = CLI_CHOICE, .choices = "cpu|gpu", .def = "cpu",
     .help = "where the forward runs"},
    {.id = O_DTYPE, .name = "dtype", .kind = CLI_CHOICE, .choices = "fp32|bf16",
     .def = "fp32", .help = "compute precision (the CPU computes in fp32; bf16 needs --device gpu)"},
    {.id = O_BF16, .name = "bf16", .kind = CLI_FLAG, .help = "the same as --dtype bf16 (--bf16 false: fp32)"},
    {.id = O_ATTENTION, .name = "attention", .kind = CLI_STR, .meta = "SPEC", .def = "the model's own",
     .help = "the encoder's attention: full, local:R, block-global:R:G or\ntransient-global:R:G"},
};

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
    int rc = 1;
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0, o;
    cli c;
    memset(&b, 0, sizeof b);
    cli_init(&c, "fat5_forward", "usage: fat5_forward DIR BATCH.json OUT.safetensors [options]\n"
             "Runs the model in DIR on a JSON batch ({\"inputs\": [[ids]...], \"labels\": [[ids]...]}) and writes\n"
             "the logits of every label position to OUT.safetensors (F32 `logits`, the loss in its metadata).\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == CLI_POS) {
            if (n_pos == 3) return cli_status(cli_fail(&c, "'%s': one DIR, BATCH.json and OUT.safetensors only", c.val));
            pos[n_pos++] = c.val;
        } else if (o == O_DEVICE) cc.device = c.ival ? FAT5_DEVICE_GPU : FAT5_DEVICE_CPU;
        else if (o == O_DTYPE) cc.dtype = c.ival ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32;
        else if (o == O_BF16) cc.dtype = c.ival ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32;
        else if (o == O_ATTENTION) attention = c.val;
    }
    if (n_pos < 3)
        return cli_status(cli_fail(&c, "no %s (usage: fat5_forward DIR BATCH.json OUT.safetensors [options])",
                                   n_pos == 0 ? "DIR" : n_pos == 1 ? "BATCH.json" : "OUT.safetensors"));
    if (cc.device == FAT5_DEVICE_CPU && cc.dtype == FAT5_DTYPE_BF16) {
        fprintf(stderr, "fat5_forward: --dtype bf16: the CPU computes in fp32; bf16 needs --device gpu\n");
        return 2;
    }
    {
        char why[512];
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            fprintf(stderr, "fat5_forward: opening the device: %s\n", why);
            return 1;
        }
    }
    if (fat5_model_load(ctx, pos[0], &m) != FAT5_OK) { rc = fail(ctx, "loading the model"); goto done; }
    // inference mode: no gradients, and the logits of every row kept (whatever the batch's size)
    if (fat5_model_set_training(m, 0) != FAT5_OK) { rc = fail(ctx, "inference mode"); goto done; }
    if (attention) {
        fat5_attention a;
        if (fat5_attention_parse(ctx, attention, &a) != FAT5_OK || fat5_model_set_attention(m, &a) != FAT5_OK) {
            rc = fail(ctx, "--attention");
            goto done;
        }
    }
    if (fat5_read_file(ctx, pos[1], (size_t)1 << 30, &text, &len) != FAT5_OK) { rc = fail(ctx, "reading the batch"); goto done; }
    if (fat5_batch_from_json(ctx, text, len, &b) != FAT5_OK) { rc = fail(ctx, pos[1]); goto done; }
    if (!b.labels) { fprintf(stderr, "fat5_forward: %s has no labels\n", pos[1]); goto done; }
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
    if (fat5_st_write(ctx, pos[2], &t, 1, meta, 3) != FAT5_OK) { rc = fail(ctx, "writing the logits"); goto done; }
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
