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

// The whole of a file in memory (NUL-terminated, free with free), at most max bytes; 0 with the
// reason on stderr.
static int read_whole(const char *tool, const char *path, size_t max, char **out, size_t *len) {
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    *out = NULL;
    if (!fp) {
        fprintf(stderr, "%s: %s: cannot open: %s\n", tool, path, strerror(errno));
        return 0;
    }
    do {
        if (n + 65536 + 1 > cap) {
            char *nb;
            cap = (n + 65536 + 1) * 2;
            nb = (char *)realloc(buf, cap);
            if (!nb) {
                fprintf(stderr, "%s: %s: out of memory\n", tool, path);
                free(buf);
                fclose(fp);
                return 0;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, 65536, fp);
        n += got;
    } while (got > 0 && n <= max);
    if (ferror(fp) || n > max) {
        fprintf(stderr, "%s: %s: %s\n", tool, path, n > max ? "file too large" : "read error");
        free(buf);
        fclose(fp);
        return 0;
    }
    fclose(fp);
    buf[n] = 0;
    *out = buf;
    *len = n;
    return 1;
}

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
    if (!read_whole("fat5_init", argv[1], (size_t)1 << 20, &text, &len)) goto done;
    if (fat5_model_config_from_json(ctx, text, len, &cfg) != FAT5_OK ||
        fat5_model_create(ctx, &cfg, argc > 3 ? strtoull(argv[3], NULL, 10) : 0, &m) != FAT5_OK ||
        fat5_model_save(m, argv[2]) != FAT5_OK) {
        fprintf(stderr, "fat5_init: %s\n", fat5_last_error(ctx));
        goto done;
    }
    printf("%s: %lld parameters\n", argv[2], (long long)fat5_model_param_count(m));
    rc = 0;
done:
    free(text);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return rc;
}
