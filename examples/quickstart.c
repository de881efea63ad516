// quickstart — load a Hugging Face T5 checkpoint directory, run one forward, print the loss.
//     cc -O2 -o examples/quickstart examples/quickstart.c -lm -ldl -lpthread
//     examples/quickstart tests/data/t5_v11_gated_gelu_untied
//     examples/quickstart --help | --version
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "../tools/cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <stdio.h>

int main(int argc, char **argv) {
    // two sequences, packed: encoder tokens back to back, cu_seqlens marks where each starts
    static const int32_t enc[] = {13, 7, 22, 9, 1, 31, 4, 1};
    static const int32_t enc_cu[] = {0, 5, 8};
    static const int32_t labels[] = {5, 17, 1, 8, 1};  // the targets; the decoder input is shifted right
    static const int32_t dec_cu[] = {0, 3, 5};
    fat5_ctx_config cc = fat5_ctx_config_default();  // CPU; set cc.device = FAT5_DEVICE_GPU for the GPU
    fat5_ctx *ctx = NULL;
    char why[512];  // why a context could not be made
    fat5_model *model = NULL;
    fat5_batch batch = {
        .n_seq = 2,
        .n_enc_tokens = 8,     // enc holds 8 tokens: enc_cu[2] must say the same
        .n_dec_tokens = 5,     // labels holds 5
        .enc_tokens = enc,
        .enc_cu_seqlens = enc_cu,
        .labels = labels,      // dec_tokens left NULL: labels shifted right
        .dec_cu_seqlens = dec_cu,
    };
    fat5_forward_result out;
    const char *dir = NULL;
    cli c;
    int rc = 1, o;
    cli_init(&c, "quickstart", "usage: quickstart CHECKPOINT_DIR\n"
             "Loads a Hugging Face T5 checkpoint directory, runs one forward pass over two sequences on\n"
             "the CPU and prints the loss.\n", NULL, 0, argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (dir) return cli_status(cli_fail(&c, "one CHECKPOINT_DIR only (--help for the usage)"));
        dir = c.val;
    }
    if (!dir) return cli_status(cli_fail(&c, "no CHECKPOINT_DIR (usage: quickstart CHECKPOINT_DIR)"));
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
        fprintf(stderr, "%s\n", why);
        goto done;
    }
    if (fat5_model_load(ctx, dir, &model) != FAT5_OK ||
        fat5_model_forward(model, &batch, NULL, &out) != FAT5_OK) {
        fprintf(stderr, "%s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("loss %.6f over %lld tokens\n", out.loss, (long long)out.n_tokens);
    rc = 0;
done:
    fat5_model_destroy(model);
    fat5_ctx_destroy(ctx);
    return rc;
}
