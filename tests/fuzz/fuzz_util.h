// fuzz_util.h — helpers shared by the libFuzzer targets in tests/fuzz/ and by make_seeds.c.
// Include it after fat5.h (with FAT5_IMPLEMENTATION defined, so _POSIX_C_SOURCE is set before the
// first system header). Nothing here prints; a harness failure (not a library failure) aborts.
#ifndef FAT5_FUZZ_UTIL_H
#define FAT5_FUZZ_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__GNUC__)
#define FUZZ_UNUSED __attribute__((unused))  // not every target uses every helper
#else
#define FUZZ_UNUSED
#endif

// Separates config.json from model.safetensors in the input of fuzz_model_dir.
#define FUZZ_SPLIT "\n@@model.safetensors@@\n"

// The fixture the index and model_dir targets start from (make passes an absolute path).
#ifndef FUZZ_DATA_DIR
#define FUZZ_DATA_DIR "tests/data/t5_v10_relu_tied"
#endif

// Which of the two shards tensor i (in the fixture's name order) goes to: 1 or 2.
static FUZZ_UNUSED int fuzz_shard_of(int i) { return 1 + (i & 1); }
static const char *const fuzz_shard_names[3] = {
    "", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};

static char fuzz_dir[512];      // the target's scratch directory, removed at exit
static fat5_ctx *fuzz_ctx_ptr;  // one CPU context for the whole run

static FUZZ_UNUSED void fuzz_die(const char *what) {
    (void)what;  // visible in a debugger; the targets print nothing
    abort();
}

// Removes every file in a flat directory, then the directory.
static FUZZ_UNUSED void fuzz_rmdir_flat(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[1024];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static FUZZ_UNUSED void fuzz_cleanup(void) {
    fat5_ctx_destroy(fuzz_ctx_ptr);
    fuzz_ctx_ptr = NULL;
    if (fuzz_dir[0]) fuzz_rmdir_flat(fuzz_dir);
    fuzz_dir[0] = 0;
}

// Creates the scratch directory under $TMPDIR (once) and the context; removed at exit.
static FUZZ_UNUSED void fuzz_setup(void) {
    const char *base = getenv("TMPDIR");
    fat5_ctx_config cc = fat5_ctx_config_default();
    if (fuzz_dir[0]) return;
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fat5_fuzz_XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(fuzz_dir)) fuzz_die("mkdtemp");
    if (fat5_ctx_create(&cc, &fuzz_ctx_ptr, NULL, 0) != FAT5_OK) fuzz_die("fat5_ctx_create");
    atexit(fuzz_cleanup);
}

static FUZZ_UNUSED fat5_ctx *fuzz_ctx(void) {
    fuzz_setup();
    return fuzz_ctx_ptr;
}

static FUZZ_UNUSED void fuzz_path(char *out, size_t cap, const char *name) {
    fuzz_setup();
    if ((size_t)snprintf(out, cap, "%s/%s", fuzz_dir, name) >= cap) fuzz_die("path too long");
}

static FUZZ_UNUSED void fuzz_write(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) fuzz_die("fopen");
    if (size && fwrite(data, 1, size, f) != size) fuzz_die("fwrite");
    if (fclose(f) != 0) fuzz_die("fclose");
}

// Reads a whole file into malloc'd memory (NULL if it cannot).
static FUZZ_UNUSED char *fuzz_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = (char *)malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = 0;
            *size = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

// Splits the fixture's model.safetensors into the two shards named above, written into dir.
// Returns 0 on success.
static FUZZ_UNUSED int fuzz_write_shards(fat5_ctx *ctx, const char *fixture, const char *dir) {
    fat5_st_file *f = NULL;
    fat5_st_write_tensor *t = NULL;
    float **data = NULL;
    int n, i, s, k, rc = 1;
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors", fixture);
    if (fat5_st_load(ctx, p, &f) != FAT5_OK) return 1;
    n = fat5_st_tensor_count(f);
    t = (fat5_st_write_tensor *)calloc((size_t)n + 1, sizeof *t);
    data = (float **)calloc((size_t)n + 1, sizeof *data);
    if (!t || !data) goto done;
    for (s = 1; s <= 2; s++) {
        for (i = 0, k = 0; i < n; i++) {
            const fat5_st_tensor *ti = fat5_st_get(f, i);
            int64_t numel = 1;
            int d;
            if (fuzz_shard_of(i) != s) continue;
            for (d = 0; d < ti->ndim; d++) numel *= ti->shape[d];
            data[i] = (float *)malloc((size_t)(numel ? numel : 1) * sizeof(float));
            if (!data[i] || fat5_st_read_f32(f, i, data[i], numel) != FAT5_OK) goto done;
            t[k].name = ti->name;
            t[k].ndim = ti->ndim;
            memcpy(t[k].shape, ti->shape, sizeof t[k].shape);
            t[k].data = data[i];
            k++;
        }
        snprintf(p, sizeof p, "%s/%s", dir, fuzz_shard_names[s]);
        if (fat5_st_write(ctx, p, t, k, NULL, 0) != FAT5_OK) goto done;
    }
    rc = 0;
done:
    if (data)
        for (i = 0; i < n; i++) free(data[i]);
    free(data);
    free(t);
    fat5_st_destroy(f);
    return rc;
}

#endif // FAT5_FUZZ_UTIL_H
