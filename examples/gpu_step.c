// gpu_step — load a checkpoint directory and time forward + backward on the GPU.
//     cc -O2 -o examples/gpu_step examples/gpu_step.c -lm -ldl -lpthread
//     examples/gpu_step DIR [--batch-size 8] [--encoder-length 512] [--decoder-length 128] [--steps 10]
//                       [--dtype fp32|bf16]
//     examples/gpu_step DIR [batch] [encoder_len] [decoder_len] [steps] [fp32|bf16]   (the same, by position)
// Each step is one forward and one backward over a packed batch of `batch` sequences of random
// tokens; it prints the loss of every step and the mean time per step after the first (warm-up).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "../tools/cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

enum { O_BATCH = 1, O_ENC, O_DEC, O_STEPS, O_DTYPE, O_BF16 };
static const cli_opt opts[] = {
    {.id = O_BATCH, .name = "batch-size", .alias = "per_device_train_batch_size", .kind = CLI_INT, .def = "8",
     .help = "sequences per step", .lo = 1, .hi = 1 << 20},
    {.id = O_ENC, .name = "encoder-length", .kind = CLI_INT, .def = "512", .help = "encoder tokens per sequence",
     .lo = 1, .hi = 1 << 24},
    {.id = O_DEC, .name = "decoder-length", .kind = CLI_INT, .def = "128", .help = "decoder tokens per sequence",
     .lo = 1, .hi = 1 << 24},
    {.id = O_STEPS, .name = "steps", .kind = CLI_INT, .def = "10", .help = "forward + backward steps (the first is a warm-up)",
     .lo = 1, .hi = 1 << 30},
    {.id = O_DTYPE, .name = "dtype", .kind = CLI_CHOICE, .choices = "fp32|bf16", .def = "bf16", .help = "compute precision"},
    {.id = O_BF16, .name = "bf16", .kind = CLI_FLAG, .help = "the same as --dtype bf16 (--bf16 false: fp32)"},
};

int main(int argc, char **argv) {
    static const char *const pos_name[] = {"DIR", "batch", "encoder_len", "decoder_len", "steps"};
    const char *dir = NULL;
    long long B = 8, Le = 512, Ld = 128, steps = 10, v;
    int s, i, o, n_pos = 0;
    cli c;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    char why[512];  // why a context could not be made
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_rng rng = fat5_rng_init(1);
    int32_t *enc, *lab, *ecu, *dcu;
    double t0 = 0, total = 0;
    int rc = 1;
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = FAT5_DTYPE_BF16;
    cli_init(&c, "gpu_step", "usage: gpu_step DIR [options]\n"
             "       gpu_step DIR [batch] [encoder_len] [decoder_len] [steps] [fp32|bf16]\n"
             "Times forward + backward of the model in DIR on the GPU over a packed batch of random tokens;\n"
             "prints the loss of every step and the mean time per step after the first (a warm-up).\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == O_BATCH) B = c.ival;
        else if (o == O_ENC) Le = c.ival;
        else if (o == O_DEC) Ld = c.ival;
        else if (o == O_STEPS) steps = c.ival;
        else if (o == O_DTYPE || o == O_BF16) cc.dtype = c.ival ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32;
        else if (n_pos == 0) dir = c.val, n_pos++;
        else if (n_pos < 5) {   // the positional form
            long long hi = n_pos == 1 ? 1 << 20 : 1 << 24;
            if (!cli_pos_int(&c, pos_name[n_pos], c.val, 1, n_pos == 4 ? 1 << 30 : hi, &v)) return 2;
            if (n_pos == 1) B = v;
            else if (n_pos == 2) Le = v;
            else if (n_pos == 3) Ld = v;
            else steps = v;
            n_pos++;
        } else if (n_pos == 5 && (!strcmp(c.val, "fp32") || !strcmp(c.val, "bf16"))) {
            cc.dtype = strcmp(c.val, "fp32") == 0 ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
            n_pos++;
        } else {
            return cli_status(cli_fail(&c, "'%s': unexpected argument (usage: gpu_step DIR [options])", c.val));
        }
    }
    if (!dir) return cli_status(cli_fail(&c, "no DIR (usage: gpu_step DIR [options])"));
    if (B * Le > INT32_MAX || B * Ld > INT32_MAX)
        return cli_status(cli_fail(&c, "a batch of %lld x (%lld + %lld) tokens is too large", B, Le, Ld));
    enc = (int32_t *)malloc((size_t)B * (size_t)Le * sizeof(int32_t));
    lab = (int32_t *)malloc((size_t)B * (size_t)Ld * sizeof(int32_t));
    ecu = (int32_t *)malloc((size_t)(B + 1) * sizeof(int32_t));
    dcu = (int32_t *)malloc((size_t)(B + 1) * sizeof(int32_t));
    if (!enc || !lab || !ecu || !dcu) return 1;
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK || fat5_model_load(ctx, dir, &m) != FAT5_OK) {
        fprintf(stderr, "gpu_step: %s\n", ctx ? fat5_last_error(ctx) : why);
        goto done;
    }
    for (i = 0; i < B * Le; i++) enc[i] = (int32_t)fat5_rng_below(&rng, 1000) + 2;
    for (i = 0; i < B * Ld; i++) lab[i] = (int32_t)fat5_rng_below(&rng, 1000) + 2;
    for (i = 0; i <= B; i++) {
        ecu[i] = (int32_t)(i * Le);
        dcu[i] = (int32_t)(i * Ld);
    }
    memset(&b, 0, sizeof b);
    b.n_seq = B;
    b.n_enc_tokens = (int64_t)B * Le;
    b.n_dec_tokens = (int64_t)B * Ld;
    b.enc_tokens = enc;
    b.enc_cu_seqlens = ecu;
    b.labels = lab;
    b.dec_cu_seqlens = dcu;
    if (fat5_model_reserve(m, B, (int64_t)B * Le, (int64_t)B * Ld) != FAT5_OK) {
        fprintf(stderr, "gpu_step: %s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("%s, %s, batch %lld x (%lld encoder + %lld decoder tokens)\n", dir,
           cc.dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32", B, Le, Ld);
    for (s = 0; s < steps; s++) {
        fat5_forward_result r;
        double t;
        t0 = now_ms();
        if (fat5_model_zero_grad(m) != FAT5_OK || fat5_model_forward(m, &b, NULL, &r) != FAT5_OK ||
            fat5_model_backward(m, 1.0f) != FAT5_OK) {
            fprintf(stderr, "gpu_step: %s\n", fat5_last_error(ctx));
            goto done;
        }
        t = now_ms() - t0;  // backward ends with a stream synchronize
        if (s > 0) total += t;
        printf("step %d: loss %.4f, %.1f ms\n", s, r.loss, t);
    }
    if (steps > 1)
        printf("mean %.2f ms per step (forward + backward), %.0f tokens/s\n", total / (steps - 1),
               (double)B * (Le + Ld) * (steps - 1) / (total / 1e3));
    rc = 0;
done:
    free(enc);
    free(lab);
    free(ecu);
    free(dcu);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
