// fat5_convert — re-save a checkpoint directory as a complete Hugging Face one (config.json with
// torch_dtype, the weights, generation_config.json, and the tokenizer files it had), its weights in
// bf16, fp32, f16 or the dtype the checkpoint started in, in one file or in shards.
//     tools/fat5_convert IN_DIR OUT_DIR [--dtype bf16|fp32|f16|source] [--max-shard-size SIZE]
//                        [--tokenizer DIR|byte]
// Sharded or single-file input; the output is model.safetensors, or shards with
// model.safetensors.index.json (--max-shard-size, e.g. 5GB or 500MB, as transformers'
// max_shard_size), under the model's own names (Hugging Face's, or FAT5's for flash_t5). bf16 and
// f16 round every weight to nearest even: half the size, as Hugging Face's T5 checkpoints usually
// are. source: the dtype of the checkpoint the weights came from (a training checkpoint, written in
// fp32, records its starting checkpoint's). --tokenizer: the tokenizer files of DIR go with the
// output instead of IN_DIR's, or byte: ByT5's byte-level tokenizer (a model pre-trained on
// tools/pretokenize's byte ids).
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { O_DTYPE = 1, O_SHARD, O_TOKENIZER };
static const cli_opt opts[] = {
    {.id = O_DTYPE, .name = "dtype", .alias = "torch_dtype", .kind = CLI_CHOICE, .meta = "bf16|fp32|f16|source",
     .def = "bf16", .help = "the weights' dtype in the output (source: the checkpoint's starting dtype)",
     .choices = "bf16|fp32|f16|source"},
    {.id = O_SHARD, .name = "max-shard-size", .alias = "max_shard_size", .kind = CLI_STR, .meta = "SIZE",
     .def = "one file", .help = "shards of at most SIZE bytes (5GB, 500MB, 100KB or a number of bytes)"},
    {.id = O_TOKENIZER, .name = "tokenizer", .kind = CLI_STR, .meta = "DIR|byte", .def = "IN_DIR's",
     .help = "the tokenizer files of DIR, or ByT5's byte-level tokenizer (byte)"},
};

// "5GB", "500MB", "100KB" (powers of 1000, as transformers reads them; GiB, MiB, KiB: of 1024) or
// bytes; 0 when malformed
static long long parse_size(const char *s) {
    static const struct { const char *unit; double mul; } u[] = {{"GiB", 1073741824.0}, {"MiB", 1048576.0},
                                                                 {"KiB", 1024.0}, {"GB", 1e9}, {"MB", 1e6},
                                                                 {"KB", 1e3}, {"B", 1.0}, {"", 1.0}};
    char *end;
    double v = strtod(s, &end);
    size_t i;
    if (end == s || !(v > 0)) return 0;
    for (i = 0; i < sizeof u / sizeof u[0]; i++)
        if (strcmp(end, u[i].unit) == 0) return v * u[i].mul < 9e18 ? (long long)(v * u[i].mul) : 0;
    return 0;
}

int main(int argc, char **argv) {
    static const fat5_weights_dtype dt[4] = {FAT5_WEIGHTS_BF16, FAT5_WEIGHTS_F32, FAT5_WEIGHTS_F16, FAT5_WEIGHTS_SOURCE};
    static const char *const dt_name[4] = {"bf16", "fp32", "f16", "its source dtype"};
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    fat5_save_config sc = fat5_save_config_default();
    const char *pos[2] = {NULL, NULL}, *tok = NULL;
    int rc = 1, o, n_pos = 0, d = 0;
    cli c;
    cli_init(&c, "fat5_convert", "usage: fat5_convert IN_DIR OUT_DIR [--dtype bf16|fp32|f16|source] [--max-shard-size SIZE]\n"
             "                    [--tokenizer DIR|byte]\n"
             "Re-saves a checkpoint directory as a complete one: config.json (with torch_dtype), the weights,\n"
             "generation_config.json and the tokenizer files IN_DIR had.\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (o == O_DTYPE) d = (int)c.ival;
        else if (o == O_SHARD && !(sc.max_shard_bytes = parse_size(c.val)))
            return cli_status(cli_fail(&c, "--max-shard-size '%s': expected a size such as 5GB, 500MB or 100KB", c.val));
        else if (o == O_TOKENIZER) tok = c.val;
        else if (o == CLI_POS && n_pos == 2) return cli_status(cli_fail(&c, "'%s': only IN_DIR and OUT_DIR are taken", c.val));
        else if (o == CLI_POS) pos[n_pos++] = c.val;
    }
    if (n_pos < 2) return cli_status(cli_fail(&c, "%s (usage: fat5_convert IN_DIR OUT_DIR)",
                                              n_pos ? "no OUT_DIR" : "no IN_DIR"));
    sc.dtype = dt[d];
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    if (fat5_model_load(ctx, pos[0], &m) != FAT5_OK ||
        (tok && fat5_model_set_tokenizer(m, strcmp(tok, "byte") == 0 ? NULL : tok) != FAT5_OK) ||
        fat5_model_save_hf(m, pos[1], &sc) != FAT5_OK) {
        fprintf(stderr, "fat5_convert: %s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("%s: %lld parameters in %s\n", pos[1], (long long)fat5_model_param_count(m), dt_name[d]);
    rc = 0;
done:
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
