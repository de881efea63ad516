// fuzz_util.h — helpers shared by the libFuzzer targets in tests/fuzz/ and by make_seeds.c.
// Include it after fat5.h. It uses POSIX: the targets are compiled with -D_POSIX_C_SOURCE=200809L
// (they see only fat5.h's declarations; the library is fat5_impl.c, built once), make_seeds defines
// FAT5_IMPLEMENTATION, which sets it. A failed check or a harness failure (not a library error) prints
// what failed to stderr and aborts; nothing else prints.
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
// Separates the files of one input in fuzz_tokens (token files) and fuzz_tokenizer_dir (a
// directory's files, each behind the byte that names it: fuzz_tokdir_names).
#define FUZZ_FILE_SPLIT "\n@@next-file@@\n"
// fuzz_tokenizer_dir: the name a file's first byte picks (its low 3 bits; bits 3-4 pick the kind:
// 0 or 1 a regular file, 2 a directory, 3 a FIFO). The first three are the ones
// fat5_tokenizer_load looks for, in its order; the others a Hugging Face directory holds too.
static const char *const fuzz_tokdir_names[8] = {
    "tokenizer.json", "spiece.model", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt"};

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

// A failed check (or harness failure): says which, with the library's last message, then aborts.
static FUZZ_UNUSED void fuzz_die(const char *what) {
    fprintf(stderr, "fuzz: %s (last error: %s)\n", what, fuzz_ctx_ptr ? fat5_last_error(fuzz_ctx_ptr) : "none");
    abort();
}

// Removes path: a directory with everything under it, anything else (a file, a FIFO, a symbolic
// link, which is not followed) by unlink.
static FUZZ_UNUSED void fuzz_rmtree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char p[1024];
        if (d) {
            while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                if ((size_t)snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= sizeof p) continue;
                fuzz_rmtree(p);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static FUZZ_UNUSED void fuzz_cleanup(void) {
    fat5_ctx_destroy(fuzz_ctx_ptr);
    fuzz_ctx_ptr = NULL;
    if (fuzz_dir[0]) fuzz_rmtree(fuzz_dir);
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

// The parts of an input cut at every occurrence of sep, one per call (as Python's split: "a|" is
// "a" and ""): returns the next one's start and sets *len, or returns NULL when none is left. *pos
// is 0 at first; it moves past the part and its separator.
static FUZZ_UNUSED const uint8_t *fuzz_next_part(const uint8_t *data, size_t size, const char *sep, size_t *pos,
                                                 size_t *len) {
    size_t n = strlen(sep), i, start = *pos;
    if (start > size) return NULL;
    for (i = start; i + n <= size; i++)
        if (data[i] == (uint8_t)sep[0] && memcmp(data + i, sep, n) == 0) {
            *len = i - start;
            *pos = i + n;
            return data + start;
        }
    *len = size - start;
    *pos = size + 1;
    return data + start;
}

// ---------------------------------------------------------------------------------------------
// The tiny training run that fuzz_resume resumes (and make_seeds writes its seeds from).

#define FUZZ_RUN_VOCAB 384                   // ByT5's byte ids: 0 pad, 1 eos, 2 unk, byte + 3
#define FUZZ_RUN_STEPS 2                     // steps trained before the checkpoint
#define FUZZ_RUN_CKPT "out/step-00000002"    // the checkpoint, under the run's directory

// What fuzz_resume's first byte picks with its low 3 bits: a file of the run's directory that the
// rest of the input replaces (bit 3 set: overwrites from its first byte on, the rest of the file
// kept), or (NULL) a rewrite of training_state.safetensors with the same moments and either its
// "sampler" metadata value (FUZZ_RESUME_SAMPLER) or all of its metadata, as NUL-separated key and
// value strings (FUZZ_RESUME_META).
#define FUZZ_RESUME_STATE 0
#define FUZZ_RESUME_SAMPLER 1
#define FUZZ_RESUME_META 2
#define FUZZ_RESUME_MODEL 5
#define FUZZ_RESUME_N 8
#define FUZZ_RESUME_OVERLAY 8
static const char *const fuzz_resume_files[FUZZ_RESUME_N] = {
    FUZZ_RUN_CKPT "/training_state.safetensors", NULL, NULL, "out/latest", FUZZ_RUN_CKPT "/config.json",
    FUZZ_RUN_CKPT "/model.safetensors", FUZZ_RUN_CKPT "/generation_config.json", "out/metrics.jsonl"};

// Writes the run's corpus to path: every line of a fixture's text (tests/data/t5_spiece/README.txt)
// that is not empty as one document of byte ids, each ended by the eos id 1. Returns 0 on success.
static FUZZ_UNUSED int fuzz_run_corpus(fat5_ctx *ctx, const char *path) {
    char src[1024], *text;
    size_t len = 0, i;
    int32_t *ids;
    int64_t n = 0;
    int rc;
    snprintf(src, sizeof src, "%s/../t5_spiece/README.txt", FUZZ_DATA_DIR);
    if (!(text = fuzz_read(src, &len))) return 1;
    if (!(ids = (int32_t *)malloc((len + 1) * sizeof *ids))) {
        free(text);
        return 1;
    }
    for (i = 0; i < len; i++) {
        if (text[i] != '\n') ids[n++] = (unsigned char)text[i] + 3;
        else if (n > 0 && ids[n - 1] != 1) ids[n++] = 1;
    }
    if (n > 0 && ids[n - 1] != 1) ids[n++] = 1;
    rc = fat5_tokens_write(ctx, path, ids, n, FUZZ_RUN_VOCAB, 1, 2) != FAT5_OK;
    free(ids);
    free(text);
    return rc;
}

// The run's options (a one-layer model of width 32 on the CPU), reading data and writing to out;
// the caller sets optim.total_steps. Returns 0 on success.
static FUZZ_UNUSED int fuzz_run_config(fat5_ctx *ctx, const char *data, const char *out, fat5_train_config *c) {
    static const char *const o[][2] = {
        {"model", "tiny"}, {"d_model", "32"}, {"d_ff", "64"}, {"num_heads", "2"}, {"d_kv", "16"},
        {"num_layers", "1"}, {"num_decoder_layers", "1"}, {"warmup_steps", "1"}, {"learning_rate", "1e-2"},
        {"max_length", "48"}, {"max_labels_length", "48"}, {"batch_tokens", "96"}, {"batch_labels_tokens", "96"},
        {"eval_fraction", "0.2"}, {"eval_steps", "0"}, {"eval_batches", "1"}, {"save_steps", "0"},
        {"save_total_limit", "0"}, {"denoisers", "fat5"}, {"prefetch", "0"}};
    size_t i;
    *c = fat5_train_config_default();
    for (i = 0; i < sizeof o / sizeof o[0]; i++)
        if (fat5_train_config_set(ctx, c, o[i][0], o[i][1]) != FAT5_OK) return 1;
    c->data = data;
    c->output_dir = out;
    return 0;
}

// Trains the run in dir (dir/corpus.tok, output in dir/out) for FUZZ_RUN_STEPS steps and saves its
// checkpoint, dir/FUZZ_RUN_CKPT, which dir/out/latest names. Returns 0 on success.
static FUZZ_UNUSED int fuzz_run_train(fat5_ctx *ctx, const char *dir) {
    char data[1024], out[1024];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    int i, rc = 1;
    if ((size_t)snprintf(data, sizeof data, "%s/corpus.tok", dir) >= sizeof data ||
        (size_t)snprintf(out, sizeof out, "%s/out", dir) >= sizeof out)
        return 1;
    if (fuzz_run_corpus(ctx, data) || fuzz_run_config(ctx, data, out, &c)) return 1;
    c.optim.total_steps = 100;
    if (fat5_train_create(ctx, &c, &t) != FAT5_OK) return 1;
    for (i = 0; i < FUZZ_RUN_STEPS; i++)
        if (fat5_train_step(t, NULL) != FAT5_OK) goto done;
    rc = fat5_train_save(t, NULL) != FAT5_OK;
done:
    fat5_train_destroy(t);
    return rc;
}

#endif // FAT5_FUZZ_UTIL_H
