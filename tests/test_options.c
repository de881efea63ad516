// Build options of fat5.h, each compiled by make test with -Werror (see the Makefile's
// test-options target); one mode per build:
//   -DOPT_STATIC    FAT5_STATIC: every function static, no unused-function warning, and it runs
//   -DOPT_API       a user FAT5_API (visibility "default" in a -fvisibility=hidden shared object;
//                   make checks with nm that the public functions are exported)
//   -DOPT_SYSFIRST  <stdio.h> before the implementation under -std=c99: works with
//                   _POSIX_C_SOURCE defined first (-DOPT_POSIX); without it, make expects the
//                   #error that names the fix
#if defined(OPT_SYSFIRST)
#ifdef OPT_POSIX
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <string.h>
#endif

#if defined(OPT_STATIC)
#define FAT5_STATIC
#elif defined(OPT_API) && (defined(__GNUC__) || defined(__clang__))
#define FAT5_API __attribute__((visibility("default")))
#endif
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <stdio.h>
#include <string.h>

#ifdef OPT_API
// a shared object: nothing to run; make checks its exports
int fat5_options_probe(void);
int fat5_options_probe(void) { return (int)strlen(fat5_version()); }
#else
int main(void) {
    fat5_ctx *ctx = NULL;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_model_config cfg;
    const char *json = "{\"d_model\": 8, \"d_kv\": 4, \"num_heads\": 2, \"d_ff\": 16, \"vocab_size\": 32, "
                       "\"num_layers\": 1, \"relative_attention_num_buckets\": 8}";
    int ok;
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    ok = strcmp(fat5_version(), FAT5_VERSION_STRING) == 0 &&
         fat5_model_config_from_json(ctx, json, strlen(json), &cfg) == FAT5_OK && cfg.d_model == 8 &&
         cfg.num_decoder_layers == 1 && fat5_model_config_validate(ctx, &cfg) == FAT5_OK &&
         strcmp(fat5_status_string(FAT5_ERR_FORMAT), "FAT5_ERR_FORMAT") == 0;
    if (!ok) printf("options: FAILED: %s\n", fat5_last_error(ctx));
    fat5_ctx_destroy(ctx);
    return ok ? 0 : 1;
}
#endif
