// cold_open.c — times a GPU context's first open (the kernels compiled, or read from the cache),
// every log line of the library stamped with the seconds since the start. "fp32" as an argument
// opens an fp32 context (default bf16). make dev builds it; run it with FAT5_CACHE_DIR naming an
// empty directory to see a cold start, then again for a warm one.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../fat5.h"

static double t0;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void on_log(void *user, fat5_log_level level, const char *msg) {
    (void)user;
    printf("%7.2f s [%s] %s\n", now_s() - t0, level == FAT5_LOG_WARN ? "warn" : level == FAT5_LOG_INFO ? "info" : "debug",
           msg);
    fflush(stdout);
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    char why[2048];
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = argc > 1 && strcmp(argv[1], "fp32") == 0 ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
    cc.log = on_log;
    t0 = now_s();
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
        printf("cold_open: %s\n", why);
        return 1;
    }
    printf("cold_open: %s context open after %.2f s\n", cc.dtype == FAT5_DTYPE_BF16 ? "bf16" : "fp32", now_s() - t0);
    fat5_ctx_destroy(ctx);
    return 0;
}
