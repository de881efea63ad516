// libFuzzer target: resuming training from a checkpoint (fat5_train_create with resume set). Once,
// a tiny run (fuzz_run_train: a one-layer model on the CPU, two steps) writes its output directory:
// out/latest, out/metrics.jsonl and the checkpoint out/step-00000002 (config.json,
// model.safetensors, generation_config.json, training_state.safetensors with the optimizer moments,
// the step, token and skip counters, elapsed time, sampler state, data fingerprint and model
// config in its metadata). Every input starts from that directory as it was written; its first
// byte picks what the rest replaces (fuzz_resume_files: one of those files, whole or from its start
// on, or the sampler state or all the metadata of training_state.safetensors, rewritten with the
// same moments), then the run resumes from out. Any error is fine; a trainer that resumes must then
// train a step.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FILES 32
#define MAX_META 64

static int ready;
static char run_dir[1024], out_dir[1100], ckpt_dir[1100], corpus[1100], state_path[1200];
static char *snap_name[MAX_FILES], *snap_data[MAX_FILES];   // the output directory as written
static size_t snap_len[MAX_FILES];
static int n_snap;
static float *moments[2];                                  // training_state.safetensors' tensors
static int64_t n_moments;
static char *meta_kv[2 * MAX_META];                        // ... and its metadata, key then value
static int n_meta;

static char *dup_text(const char *s, size_t n) {
    char *p = (char *)malloc(n + 1);
    if (!p) fuzz_die("malloc");
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

// Records every regular file of dir (relative name rel) and of its subdirectories, one level down.
static void snapshot(const char *dir, const char *rel) {
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d) fuzz_die("opendir");
    while ((e = readdir(d)) != NULL) {
        char p[1400], r[600];
        struct stat sb;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        snprintf(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        if (lstat(p, &sb) != 0) fuzz_die("lstat");
        if (S_ISDIR(sb.st_mode)) {
            if (rel[0]) fuzz_die("a checkpoint holds a directory");
            snapshot(p, r);
        } else if (S_ISREG(sb.st_mode)) {
            if (n_snap == MAX_FILES) fuzz_die("too many files");
            snap_name[n_snap] = dup_text(r, strlen(r));
            if (!(snap_data[n_snap] = fuzz_read(p, &snap_len[n_snap]))) fuzz_die("cannot read the checkpoint");
            n_snap++;
        }
    }
    closedir(d);
}

// Puts the output directory back as the run wrote it (whatever the last input and resume did to it).
static void restore(void) {
    char p[1400];
    int i;
    fuzz_rmtree(out_dir);
    if (mkdir(out_dir, 0755) != 0 || mkdir(ckpt_dir, 0755) != 0) fuzz_die("mkdir");
    for (i = 0; i < n_snap; i++) {
        snprintf(p, sizeof p, "%s/%s", out_dir, snap_name[i]);
        fuzz_write(p, snap_data[i], snap_len[i]);
    }
}

// Rewrites training_state.safetensors with the run's moments and the given metadata; 0 on success.
static int write_state(const char *const *kv, int n) {
    fat5_st_write_tensor w[2];
    memset(w, 0, sizeof w);
    w[0].name = "optimizer.exp_avg";
    w[1].name = "optimizer.exp_avg_sq";
    w[0].ndim = w[1].ndim = 1;
    w[0].shape[0] = w[1].shape[0] = n_moments;
    w[0].data = moments[0];
    w[1].data = moments[1];
    return fat5_st_write(fuzz_ctx(), state_path, w, 2, kv, n) != FAT5_OK;
}

// The resumed run: the tiny run's options, resuming from its output directory, long enough that a
// step never ends it (which would evaluate and save).
static fat5_status resume(fat5_trainer **t) {
    fat5_train_config c;
    if (fuzz_run_config(fuzz_ctx(), corpus, out_dir, &c)) fuzz_die("config");
    c.optim.total_steps = 1000000000000000000LL;   // past any step a checkpoint can name (18 digits)
    c.resume = out_dir;
    return fat5_train_create(fuzz_ctx(), &c, t);
}

static void prepare(void) {
    fat5_ctx *ctx = fuzz_ctx();
    fat5_st_file *f = NULL;
    fat5_trainer *t = NULL;
    int i, k;
    fuzz_path(run_dir, sizeof run_dir, "run");
    snprintf(out_dir, sizeof out_dir, "%s/out", run_dir);
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/%s", run_dir, FUZZ_RUN_CKPT);
    snprintf(corpus, sizeof corpus, "%s/corpus.tok", run_dir);
    snprintf(state_path, sizeof state_path, "%s/%s", run_dir, fuzz_resume_files[FUZZ_RESUME_STATE]);
    if (mkdir(run_dir, 0755) != 0 || fuzz_run_train(ctx, run_dir) != 0) fuzz_die("the tiny run failed");
    snapshot(out_dir, "");
    if (fat5_st_load(ctx, state_path, &f) != FAT5_OK) fuzz_die("training state");
    for (k = 0; k < 2; k++) {
        int j = fat5_st_find(f, k ? "optimizer.exp_avg_sq" : "optimizer.exp_avg");
        if (j < 0) fuzz_die("moments");
        n_moments = fat5_st_get(f, j)->shape[0];
        if (!(moments[k] = (float *)malloc((size_t)n_moments * sizeof(float))) ||
            fat5_st_read_f32(f, j, moments[k], n_moments) != FAT5_OK)
            fuzz_die("moments");
    }
    n_meta = fat5_st_metadata_count(f);
    if (n_meta > MAX_META) fuzz_die("metadata");
    for (i = 0; i < n_meta; i++) {
        const char *key = NULL, *v = NULL;
        fat5_st_metadata_get(f, i, &key, &v);
        meta_kv[2 * i] = dup_text(key, strlen(key));
        meta_kv[2 * i + 1] = dup_text(v, strlen(v));
    }
    fat5_st_destroy(f);
    // the harness's own check: the untouched checkpoint resumes, and the rewrite of its state too
    restore();
    if (write_state((const char *const *)meta_kv, n_meta) || resume(&t) != FAT5_OK) fuzz_die("pristine resume");
    fat5_train_destroy(t);
    ready = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *kv[2 * MAX_META];
    char *text = NULL, path[1400];
    const char *which;
    fat5_trainer *t = NULL;
    fat5_status st;
    int mode, n = 0, i;
    if (!ready) prepare();
    if (size < 1) return 0;
    mode = data[0] % FUZZ_RESUME_N;
    which = fuzz_resume_files[mode];
    restore();
    if (which && (data[0] & FUZZ_RESUME_OVERLAY)) {   // the input over the start of the file
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", run_dir, which);
        if (!(f = fopen(path, "r+b")) || (size > 1 && fwrite(data + 1, 1, size - 1, f) != size - 1) || fclose(f) != 0)
            fuzz_die("overwrite");
    } else if (which) {
        snprintf(path, sizeof path, "%s/%s", run_dir, which);
        fuzz_write(path, data + 1, size - 1);
    } else {
        text = dup_text((const char *)data + 1, size - 1);   // NUL-terminated; an inner NUL ends a string
        if (mode == FUZZ_RESUME_SAMPLER) {
            for (i = 0; i < 2 * n_meta; i++) kv[i] = meta_kv[i];
            for (i = 0; i < n_meta; i++)
                if (!strcmp(meta_kv[2 * i], "sampler")) kv[2 * i + 1] = text;
            n = n_meta;
        } else {   // key NUL value NUL key NUL value ...; an odd last string is dropped
            const char *s = text, *end = text + (size - 1);
            while (s < end && n < MAX_META) {
                const char *v = s + strlen(s) + 1;
                if (v > end) break;   // a key without its NUL: no value follows
                kv[2 * n] = s;
                kv[2 * n + 1] = v;
                n++;
                s = v + strlen(v) + 1;
            }
        }
        if (write_state(kv, n)) {   // the writer refused this metadata: nothing to resume from
            free(text);
            return 0;
        }
    }
    st = resume(&t);
    if ((st == FAT5_OK) != (t != NULL)) fuzz_die("status and trainer disagree");
    if (t) {
        fat5_train_metrics m;
        if (fat5_train_step(t, &m) != FAT5_OK) fuzz_die("a resumed run fails its next step");
        if (m.step < 1 || m.tokens <= 0) fuzz_die("step metrics");
        fat5_train_destroy(t);
    }
    free(text);
    return 0;
}
