// fat5_convert — re-save a checkpoint directory: its weights in bf16 or fp32, as a complete
// directory (config.json with torch_dtype, model.safetensors, generation_config.json, and the
// tokenizer files it had).
//     tools/fat5_convert IN_DIR OUT_DIR [--dtype bf16|fp32]
// Sharded or single-file input; the output is one model.safetensors under the model's own names
// (Hugging Face's, or FAT5's for flash_t5). bf16 rounds every weight to nearest even: half the size,
// as Hugging Face's T5 checkpoints usually are.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <stdio.h>

enum { O_DTYPE = 1 };
static const cli_opt opts[] = {
    {.id = O_DTYPE, .name = "dtype", .alias = "torch_dtype", .kind = CLI_CHOICE, .meta = "bf16|fp32", .def = "bf16",
     .help = "the weights' dtype in the output", .choices = "bf16|fp32"},
};

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    const char *pos[2] = {NULL, NULL};
    fat5_dtype dtype = FAT5_DTYPE_BF16;
    int rc = 1, o, n_pos = 0;
    cli c;
    cli_init(&c, "fat5_convert", "usage: fat5_convert IN_DIR OUT_DIR [--dtype bf16|fp32]\n"
             "Re-saves a checkpoint directory as a complete one: config.json (with torch_dtype), model.safetensors,\n"
             "generation_config.json and the tokenizer files IN_DIR had.\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == O_DTYPE) dtype = c.ival == 0 ? FAT5_DTYPE_BF16 : FAT5_DTYPE_FP32;
        else if (n_pos == 2) return cli_status(cli_fail(&c, "'%s': only IN_DIR and OUT_DIR are taken", c.val));
        else pos[n_pos++] = c.val;
    }
    if (n_pos < 2) return cli_status(cli_fail(&c, "%s (usage: fat5_convert IN_DIR OUT_DIR)",
                                              n_pos ? "no OUT_DIR" : "no IN_DIR"));
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    if (fat5_model_load(ctx, pos[0], &m) != FAT5_OK || fat5_model_save_as(m, pos[1], dtype) != FAT5_OK) {
        fprintf(stderr, "fat5_convert: %s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("%s: %lld parameters in %s\n", pos[1], (long long)fat5_model_param_count(m),
           dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32");
    rc = 0;
done:
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
