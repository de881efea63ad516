// fat5_init — write a randomly initialised model (Hugging Face T5 initialisation) to a directory.
//     cc -O2 -o tools/fat5_init tools/fat5_init.c -lm -ldl -lpthread
//     tools/fat5_init CONFIG.json OUT_DIR [seed]
// CONFIG.json is a Hugging Face T5 config (model_type t5, mt5, umt5) or a FAT5 FlashT5Config
// (model_type flash_t5: the model is saved under FAT5's parameter names), with any of FAT5's
// position encodings (position_encoding_type t5, none, ALiBi, RoPE, FIRE and their fields).
// OUT_DIR gets config.json + model.safetensors.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = 1;
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s CONFIG.json OUT_DIR [seed]\n", argv[0]);
        return 2;
    }
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    if (fat5_read_file(ctx, argv[1], (size_t)1 << 20, &text, &len) != FAT5_OK ||
        fat5_model_config_from_json(ctx, text, len, &cfg) != FAT5_OK ||
        fat5_model_create(ctx, &cfg, argc > 3 ? strtoull(argv[3], NULL, 10) : 0, &m) != FAT5_OK ||
        fat5_model_save(m, argv[2]) != FAT5_OK) {
        fprintf(stderr, "fat5_init: %s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("%s: %lld parameters\n", argv[2], (long long)fat5_model_param_count(m));
    rc = 0;
done:
    fat5_free(ctx, text);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
