// cc -std=c99 -O2 -o dev/cpu_step dev/cpu_step.c -lm -ldl -lpthread
// CPU step time of a small T5 (d_model 256, d_ff 1024, 4 heads x 64, 4+4 layers, byte vocab 384,
// gated-gelu) on a packed batch of 8 sequences x 256 encoder / 128 decoder tokens: forward +
// backward, median of the timed steps. Usage: dev/cpu_step [n_threads] [steps]
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    enum { S = 8, TE = 256, TD = 128 };
    static int32_t enc[S * TE], lab[S * TD], ecu[S + 1], dcu[S + 1];
    double t[64], loss0 = 0;
    int nt = argc > 1 ? atoi(argv[1]) : 1, steps = argc > 2 ? atoi(argv[2]) : 5, i;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_model_config mc = fat5_model_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_forward_result r;
    fat5_loss_config lc = fat5_loss_config_default();
    fat5_rng g = fat5_rng_init(1);
    if (steps < 1 || steps > 64) steps = 5;
    cc.n_threads = nt;
    mc.d_model = 256; mc.d_ff = 1024; mc.d_kv = 64; mc.num_heads = 4;
    mc.num_layers = 4; mc.num_decoder_layers = 4; mc.vocab_size = 384;
    mc.act = FAT5_ACT_GELU_TANH; mc.gated = 1; mc.tie_word_embeddings = 0; mc.scale_decoder_outputs = 0;
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK || fat5_model_create(ctx, &mc, 7, &m) != FAT5_OK) {
        fprintf(stderr, "setup: %s\n", ctx ? fat5_last_error(ctx) : "out of memory");
        return 1;
    }
    for (i = 0; i < S * TE; i++) enc[i] = 3 + (int32_t)fat5_rng_below(&g, 380);
    for (i = 0; i < S * TD; i++) lab[i] = 3 + (int32_t)fat5_rng_below(&g, 380);
    for (i = 0; i <= S; i++) { ecu[i] = i * TE; dcu[i] = i * TD; }
    memset(&b, 0, sizeof b);
    b.n_seq = S; b.n_enc_tokens = S * TE; b.n_dec_tokens = S * TD;
    b.enc_tokens = enc; b.enc_cu_seqlens = ecu; b.labels = lab; b.dec_cu_seqlens = dcu;
    for (i = -1; i < steps; i++) {  // step -1 warms up
        double t0 = now_s();
        if (fat5_model_forward(m, &b, &lc, &r) != FAT5_OK || fat5_model_backward(m, 1.0f) != FAT5_OK) {
            fprintf(stderr, "step: %s\n", fat5_last_error(ctx));
            return 1;
        }
        if (i >= 0) t[i] = now_s() - t0;
        else loss0 = r.loss;
    }
    qsort(t, (size_t)steps, sizeof t[0], cmp_d);
    printf("{\"threads\": %d, \"step_ms\": %.1f, \"tokens_per_s\": %.0f, \"loss\": %.9g}\n", nt,
           1e3 * t[steps / 2], (double)(S * (TE + TD)) / t[steps / 2], loss0);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return 0;
}
