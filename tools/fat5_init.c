// fat5_init — write a randomly initialised model (Hugging Face T5 initialisation) to a directory.
//     cc -O2 -o tools/fat5_init tools/fat5_init.c -lm -ldl -lpthread
//     tools/fat5_init CONFIG.json OUT_DIR [SEED]        (or --seed N; default 0)
// CONFIG.json is a Hugging Face T5 config (model_type t5, mt5, umt5) or a FAT5 FlashT5Config
// (model_type flash_t5: the model is saved under FAT5's parameter names), with any of FAT5's
// position encodings (position_encoding_type t5, none, ALiBi, RoPE, FIRE and their fields).
// OUT_DIR gets config.json + model.safetensors.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_SEED = 1 };
static const cli_opt opts[] = {
    {.id = O_SEED, .name = "seed", .kind = CLI_INT, .meta = "N", .def = "0",
     .help = "the initialisation's seed (or a third argument)", .lo = 0, .hi = 9.2e18},
};

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    char *text = NULL;
    size_t len = 0;
    const char *pos[3] = {NULL, NULL, NULL};
    long long seed = 0;
    int rc = 1, o, n_pos = 0, seed_opt = 0;
    cli c;
    cli_init(&c, "fat5_init", "usage: fat5_init CONFIG.json OUT_DIR [SEED]\n"
             "Writes a randomly initialised model (Hugging Face's T5 initialisation) to OUT_DIR: config.json and\n"
             "model.safetensors. CONFIG.json is a Hugging Face T5 config (t5, mt5, umt5) or a FAT5 one (flash_t5).\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == O_SEED) seed = c.ival, seed_opt = 1;
        else if (n_pos == 3) return cli_status(cli_fail(&c, "'%s': at most CONFIG.json OUT_DIR SEED", c.val));
        else pos[n_pos++] = c.val;
    }
    if (n_pos < 2) return cli_status(cli_fail(&c, "%s (usage: fat5_init CONFIG.json OUT_DIR [SEED])",
                                              n_pos ? "no OUT_DIR" : "no CONFIG.json"));
    if (n_pos == 3) {
        if (seed_opt) return cli_status(cli_fail(&c, "the seed twice: --seed and a third argument"));
        if (!cli_pos_int(&c, "seed", pos[2], 0, (long long)9.2e18, &seed)) return 2;
    }
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    if (fat5_read_file(ctx, pos[0], (size_t)1 << 20, &text, &len) != FAT5_OK ||
        fat5_model_config_from_json(ctx, text, len, &cfg) != FAT5_OK ||
        fat5_model_create(ctx, &cfg, (uint64_t)seed, &m) != FAT5_OK ||
        fat5_model_save(m, pos[1]) != FAT5_OK) {
        fprintf(stderr, "fat5_init: %s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("%s: %lld parameters\n", pos[1], (long long)fat5_model_param_count(m));
    rc = 0;
done:
    fat5_free(ctx, text);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
