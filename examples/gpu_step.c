// gpu_step — load a checkpoint directory and time forward + backward on the GPU.
//     cc -O2 -o examples/gpu_step examples/gpu_step.c -lm -ldl -lpthread
//     examples/gpu_step DIR [batch=8] [encoder_len=512] [decoder_len=128] [steps=10] [fp32|bf16]
// Each step is one forward and one backward over a packed batch of `batch` sequences of random
// tokens; it prints the loss of every step and the mean time per step after the first (warm-up).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    int B = argc > 2 ? atoi(argv[2]) : 8, Le = argc > 3 ? atoi(argv[3]) : 512, Ld = argc > 4 ? atoi(argv[4]) : 128;
    int steps = argc > 5 ? atoi(argv[5]) : 10, s, i;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    char why[512];  // why a context could not be made
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_rng rng = fat5_rng_init(1);
    int32_t *enc, *lab, *ecu, *dcu;
    double t0 = 0, total = 0;
    int rc = 1;
    if (argc < 2 || B < 1 || Le < 1 || Ld < 1 || steps < 1) {
        fprintf(stderr, "usage: %s DIR [batch] [encoder_len] [decoder_len] [steps] [fp32|bf16]\n", argv[0]);
        return 2;
    }
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = argc > 6 && strcmp(argv[6], "fp32") == 0 ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
    enc = (int32_t *)malloc((size_t)B * (size_t)Le * sizeof(int32_t));
    lab = (int32_t *)malloc((size_t)B * (size_t)Ld * sizeof(int32_t));
    ecu = (int32_t *)malloc((size_t)(B + 1) * sizeof(int32_t));
    dcu = (int32_t *)malloc((size_t)(B + 1) * sizeof(int32_t));
    if (!enc || !lab || !ecu || !dcu) return 1;
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK || fat5_model_load(ctx, argv[1], &m) != FAT5_OK) {
        fprintf(stderr, "gpu_step: %s\n", ctx ? fat5_last_error(ctx) : why);
        goto done;
    }
    for (i = 0; i < B * Le; i++) enc[i] = (int32_t)fat5_rng_below(&rng, 1000) + 2;
    for (i = 0; i < B * Ld; i++) lab[i] = (int32_t)fat5_rng_below(&rng, 1000) + 2;
    for (i = 0; i <= B; i++) {
        ecu[i] = i * Le;
        dcu[i] = i * Ld;
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
    printf("%s, %s, batch %d x (%d encoder + %d decoder tokens)\n", argv[1],
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
