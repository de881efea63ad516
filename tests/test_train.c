// The training loop: options, learning, checkpoints, bit-identical resume, a save killed by
// SIGKILL, bad inputs, skipped non-finite steps.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static void ttr_sleep_us(long us) {
    struct timespec ts;
    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    nanosleep(&ts, NULL);
}

// A small English text as a token file (byte ids, one document per paragraph); returns its path.
static const char *ttr_corpus(fat5_test *T, int copies) {
    static char path[600];
    static const char *const para[] = {
        "The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun.",
        "A journey of a thousand miles begins with a single step, and ends with a cup of tea.",
        "Time flies like an arrow; fruit flies like a banana, said the old man by the river.",
        "All that glitters is not gold, and not all those who wander are lost in the woods.",
        "She sells sea shells by the sea shore, and the shells she sells are surely seashells.",
        "To be or not to be, that is the question the student asked before the exam began.",
    };
    int32_t *ids;
    int64_t n = 0, cap = 0;
    int c, p;
    size_t k;
    for (p = 0; p < 6; p++) cap += (int64_t)strlen(para[p]) + 1;
    cap *= copies;
    ids = (int32_t *)malloc((size_t)cap * sizeof *ids);
    if (!ids) return NULL;
    for (c = 0; c < copies; c++)
        for (p = 0; p < 6; p++) {
            for (k = 0; para[p][k]; k++) ids[n++] = (unsigned char)para[p][k] + 3;
            ids[n++] = 1;
        }
    snprintf(path, sizeof path, "%s/corpus.tok", fat5_test_tmpdir(T));
    if (fat5_tokens_write(fat5_test_ctx(T), path, ids, n, 384, 1, 2) != FAT5_OK) {
        free(ids);
        return NULL;
    }
    free(ids);
    return path;
}

// a tiny, fast run on the CPU
static fat5_train_config ttr_config(fat5_test *T, const char *data, const char *out) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c = fat5_train_config_default();
    static const char *const o[][2] = {
        {"model", "tiny"}, {"d_model", "32"}, {"d_ff", "64"}, {"num_heads", "2"}, {"d_kv", "16"},
        {"num_layers", "1"}, {"num_decoder_layers", "1"}, {"max_steps", "8"}, {"warmup_steps", "2"},
        {"learning_rate", "1e-2"}, {"max_length", "48"}, {"max_labels_length", "48"},
        {"batch_tokens", "192"}, {"batch_labels_tokens", "192"}, {"eval_fraction", "0.2"},
        {"eval_steps", "4"}, {"eval_batches", "2"}, {"save_steps", "4"}, {"save_total_limit", "2"},
        {"denoisers", "t5"}};
    size_t i;
    for (i = 0; i < sizeof o / sizeof o[0]; i++)
        if (fat5_train_config_set(ctx, &c, o[i][0], o[i][1]) != FAT5_OK) fat5_test_fail(T, __FILE__, __LINE__, "%s", fat5_last_error(ctx));
    c.data = data;
    c.output_dir = out;
    return c;
}

static void t_train_options(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c = fat5_train_config_default();
    const char *json = "{\"learning_rate\": 2e-3, \"lr_scheduler_type\": \"wsd\", \"data\": [\"a.tok\", \"b.tok\"],"
                       " \"model\": \"tiny\", \"d_model\": 64, \"gradient_accumulation_steps\": 3}";
    FAT5_REQUIRE_OK(T, fat5_train_config_from_json(ctx, json, strlen(json), &c));
    FAT5_CHECK(T, c.optim.lr == 2e-3 && c.optim.sched == FAT5_SCHED_WSD && c.grad_accum == 3);
    FAT5_CHECK(T, strcmp(c.data, "a.tok,b.tok") == 0 && c.model.d_model == 64 && c.model.num_layers == 2);
    {   // a string set by name is a copy: the caller's buffer may change or go
        char v[32] = "x.tok";
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "data", v));
        v[0] = 'y';
        FAT5_CHECK(T, strcmp(c.data, "x.tok") == 0 && c.data != v);
    }
    // options of the example program, not of the library
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "logging_steps", "10") == FAT5_ERR_INVALID_ARG &&
                  fat5_train_config_set(ctx, &c, "device", "gpu") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "learnig_rate", "1") == FAT5_ERR_INVALID_ARG &&
                  strstr(fat5_last_error(ctx), "unknown training option 'learnig_rate'"));
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "learning_rate", "-1") == FAT5_ERR_INVALID_ARG &&
                  strstr(fat5_last_error(ctx), "learning_rate: bad value '-1'"));
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "max_steps", "2.5") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "lr_scheduler_type", "cosinus") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "model", "/no/such/config.json") != FAT5_OK &&
                  strstr(fat5_last_error(ctx), "not a preset"));
    FAT5_CHECK(T, fat5_train_config_from_json(ctx, "{\"seed\": [1]}", 13, &c) == FAT5_ERR_FORMAT);
    FAT5_CHECK(T, strstr(fat5_train_option_names(), "gradient_accumulation_steps") != NULL);
}

// a tiny model learns a small text: the loss falls by more than half
static void t_train_learns(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600];
    const char *data = ttr_corpus(T, 20);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    double first = 0, last = 0;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/run", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "60"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_model", "64"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_ff", "128"));
    c.eval_steps = 0;
    c.save_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    while (!fat5_train_done(t)) {
        if (fat5_train_step(t, &r) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s", fat5_last_error(ctx));
            break;
        }
        if (r.step == 1) first = r.loss;
        last = r.loss;
        FAT5_CHECK(T, !r.skipped && r.tokens > 0 && r.lr > 0);
    }
    FAT5_CHECK_MSG(T, r.has_eval && r.saved, "the last step evaluates and saves");
    FAT5_CHECK_MSG(T, last < 0.5 * first, "loss %.4f -> %.4f: expected to fall below half", first, last);
    FAT5_CHECK_MSG(T, r.eval_loss < 0.6 * first, "eval loss %.4f vs first %.4f", r.eval_loss, first);
    fat5_train_destroy(t);
}

// A metrics.jsonl the trainer cannot append to (a full disk: /dev/full): the step fails with the
// file, the step and the system's reason, not a bare "write failed".
static void t_train_metrics_full_disk(fat5_test *T) {
#ifdef _WIN32
    FAT5_SKIP(T, "no /dev/full");
#else
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], log[700];
    const char *data = ttr_corpus(T, 2);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_status st;
    FAT5_REQUIRE(T, data != NULL);
    if (access("/dev/full", W_OK) != 0) FAT5_SKIP(T, "no writable /dev/full");
    snprintf(out, sizeof out, "%s/full", fat5_test_tmpdir(T));
    snprintf(log, sizeof log, "%s/metrics.jsonl", out);
    FAT5_REQUIRE(T, mkdir(out, 0755) == 0 && symlink("/dev/full", log) == 0);
    c = ttr_config(T, data, out);
    c.eval_steps = 0;
    c.save_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    st = fat5_train_step(t, NULL);
    FAT5_CHECK_MSG(T, st == FAT5_ERR_IO && strstr(fat5_last_error(ctx), "metrics.jsonl") &&
                          strstr(fat5_last_error(ctx), "step 1") && strstr(fat5_last_error(ctx), strerror(ENOSPC)),
                   "%s: %s", fat5_status_string(st), fat5_last_error(ctx));
    fat5_train_destroy(t);
#endif
}

// A save of a step that has a checkpoint keeps the earlier one whole until the new one has its
// name: the states a crash can leave between the two renames resume from the step.
static void t_train_resave_crash(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], fin[700], old[700], cmd[1600];
    const char *data = ttr_corpus(T, 2);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    int crash, i;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/resave", fat5_test_tmpdir(T));
    snprintf(fin, sizeof fin, "%s/step-00000002", out);
    snprintf(old, sizeof old, "%s/.old-step-00000002", out);
    c = ttr_config(T, data, out);
    c.eval_steps = 0;
    c.save_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));
    FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));   // the same step again (Ctrl-C right after a save)
    FAT5_CHECK(T, fat5__is_dir(fin) && !fat5__is_dir(old));
    fat5_train_destroy(t);
    t = NULL;
    // crash 0: the earlier one moved aside, the new one not yet renamed; crash 1: both in place
    for (crash = 0; crash < 2; crash++) {
        if (crash == 0) FAT5_REQUIRE(T, rename(fin, old) == 0);
        snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", fin, old);
        if (crash == 1) FAT5_REQUIRE(T, system(cmd) == 0);
        c.resume = out;
        FAT5_CHECK_MSG(T, fat5_train_create(ctx, &c, &t) == FAT5_OK, "crash %d: %s", crash, fat5_last_error(ctx));
        FAT5_CHECK_MSG(T, t && fat5_optim_get_step(t->o) == 2 && fat5__is_dir(fin) && !fat5__is_dir(old),
                       "crash %d: the checkpoint of step 2 is not back whole", crash);
        fat5_train_destroy(t);
        t = NULL;
    }
    // what a killed save or prune leaves (a checkpoint being written, one being deleted, a latest
    // being replaced) is removed at the next start; the checkpoint itself stays
    {
        static const char *const stale[] = {".tmp-step-00000009", ".del-step-00000001"};
        char p[800];
        FILE *f;
        for (i = 0; i < 2; i++) {
            snprintf(p, sizeof p, "%s/%s", out, stale[i]);
            FAT5_REQUIRE(T, mkdir(p, 0755) == 0);
            snprintf(p, sizeof p, "%s/%s/model.safetensors", out, stale[i]);
            FAT5_REQUIRE(T, (f = fopen(p, "wb")) != NULL && fputs("partial", f) >= 0 && fclose(f) == 0);
        }
        snprintf(p, sizeof p, "%s/latest.tmp.Ab12Cd", out);
        FAT5_REQUIRE(T, (f = fopen(p, "wb")) != NULL && fputs("step-0000", f) >= 0 && fclose(f) == 0);
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
        for (i = 0; i < 2; i++) {
            snprintf(p, sizeof p, "%s/%s", out, stale[i]);
            FAT5_CHECK_MSG(T, !fat5__is_dir(p), "%s left", stale[i]);
        }
        snprintf(p, sizeof p, "%s/latest.tmp.Ab12Cd", out);
        FAT5_CHECK_MSG(T, access(p, F_OK) != 0, "latest.tmp.Ab12Cd left");
        FAT5_CHECK(T, fat5__is_dir(fin));
        fat5_train_destroy(t);
    }
}

// One trainer per output directory: a second is refused, naming the process that holds it, and
// touches nothing; a lock left by a process that ended (killed) does not block the next.
static void t_train_one_per_dir(fat5_test *T) {
#ifdef _WIN32
    FAT5_SKIP(T, "no flock");
#else
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], lock[700], mypid[32];
    const char *data = ttr_corpus(T, 2);
    fat5_train_config c;
    fat5_trainer *a = NULL, *b = NULL;
    pid_t child;
    int status = 0;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/one", fat5_test_tmpdir(T));
    snprintf(lock, sizeof lock, "%s/.lock", out);
    snprintf(mypid, sizeof mypid, "process %ld", (long)getpid());
    c = ttr_config(T, data, out);
    c.eval_steps = 0;
    c.save_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &a));
    FAT5_REQUIRE_OK(T, fat5_train_step(a, NULL));
    FAT5_CHECK_MSG(T, fat5_train_create(ctx, &c, &b) == FAT5_ERR_STATE && b == NULL &&
                          strstr(fat5_last_error(ctx), "in use by another trainer") &&
                          strstr(fat5_last_error(ctx), mypid),
                   "%s", fat5_last_error(ctx));
    FAT5_REQUIRE_OK(T, fat5_train_step(a, NULL));   // the first goes on undisturbed
    fat5_train_destroy(a);
    // a process that took the lock and ended without letting it go (as a killed trainer does)
    fflush(NULL);
    child = fork();
    if (child == 0) {
        int fd = open(lock, O_RDWR | O_CREAT, 0644);
        _exit(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0 && write(fd, "1\n", 2) == 2 ? 0 : 1);
    }
    FAT5_REQUIRE(T, child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FAT5_CHECK_MSG(T, fat5_train_create(ctx, &c, &b) == FAT5_OK, "after a holder ended: %s", fat5_last_error(ctx));
    fat5_train_destroy(b);
#endif
}

// Rewrites dir/training_state.safetensors with one value changed: a moment (which 0: exp_avg_sq[5]
// = -1, 1: exp_avg[3] = NaN, 2: exp_avg_sq[0] = inf), a counter (3: skipped_steps past step, 4:
// step "0x1", 5: step " 2", 6: elapsed_s -1e300) or the sampler's position (7: its document index
// one off, the position kept: "ul2v1:seed:counter:epoch:doc:pos:off:ids").
static int ttr_spoil_state(fat5_test *T, const char *dir, int which) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[800];
    fat5_st_file *f = NULL;
    fat5_st_write_tensor w[2];
    const char *meta[40];
    float *mom = NULL;
    int64_t n;
    int i, nm, ok = 0;
    static char sampler[FAT5_UL2_STATE_CAP];
    snprintf(path, sizeof path, "%s/training_state.safetensors", dir);
    if (fat5_st_load(ctx, path, &f) != FAT5_OK) return 0;
    n = fat5_st_get(f, fat5_st_find(f, "optimizer.exp_avg"))->shape[0];
    mom = (float *)malloc((size_t)n * 2 * sizeof(float));
    if (!mom || fat5_st_read_f32(f, fat5_st_find(f, "optimizer.exp_avg"), mom, n) != FAT5_OK ||
        fat5_st_read_f32(f, fat5_st_find(f, "optimizer.exp_avg_sq"), mom + n, n) != FAT5_OK)
        goto done;
    if (which == 0) mom[n + 5] = -1.0f;
    if (which == 1) mom[3] = (float)NAN;
    if (which == 2) mom[n] = (float)INFINITY;
    nm = fat5_st_metadata_count(f);
    for (i = 0; i < nm && i < 20; i++) {
        fat5_st_metadata_get(f, i, &meta[2 * i], &meta[2 * i + 1]);
        if (which == 3 && !strcmp(meta[2 * i], "skipped_steps")) meta[2 * i + 1] = "9";
        if (which == 4 && !strcmp(meta[2 * i], "step")) meta[2 * i + 1] = "0x1";
        if (which == 5 && !strcmp(meta[2 * i], "step")) meta[2 * i + 1] = " 2";
        if (which == 6 && !strcmp(meta[2 * i], "elapsed_s")) meta[2 * i + 1] = "-1e300";
        if (which == 7 && !strcmp(meta[2 * i], "sampler")) {
            unsigned long long seed, counter;
            long long epoch, doc, pos, off, ids;
            if (sscanf(meta[2 * i + 1], "ul2v1:%llu:%llu:%lld:%lld:%lld:%lld:%lld", &seed, &counter, &epoch, &doc, &pos,
                       &off, &ids) != 7)
                goto done;
            snprintf(sampler, sizeof sampler, "ul2v1:%llu:%llu:%lld:%lld:%lld:%lld:%lld", seed, counter, epoch,
                     doc > 0 ? doc - 1 : doc + 1, pos, off, ids);
            meta[2 * i + 1] = sampler;
        }
    }
    memset(w, 0, sizeof w);
    w[0].name = "optimizer.exp_avg";
    w[1].name = "optimizer.exp_avg_sq";
    w[0].ndim = w[1].ndim = 1;
    w[0].shape[0] = w[1].shape[0] = n;
    w[0].data = mom;
    w[1].data = mom + n;
    ok = fat5_st_write(ctx, path, w, 2, meta, nm) == FAT5_OK;
done:
    free(mom);
    fat5_st_destroy(f);
    return ok;
}

// Resume checks the values it takes: moments the optimizer can go on from, counters as fat5
// writes them, a sampler position whose document index is the one the token files give it (the
// index decides which documents are held out); each spoiled state is refused naming what is wrong,
// and the good one resumes.
static void t_train_resume_checks(fat5_test *T) {
    static const char *const want[] = {"exp_avg_sq[5]", "exp_avg[3]", "exp_avg_sq[0]", "skipped_steps 9 of 2",
                                       "incomplete", "incomplete", "elapsed_s", "document index (doc, field 5)"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], ck[700], keep[800], cmd[2400];
    const char *data = ttr_corpus(T, 2);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    int which;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/checks", fat5_test_tmpdir(T));
    snprintf(ck, sizeof ck, "%s/step-00000002", out);
    snprintf(keep, sizeof keep, "%s/good", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    c.eval_steps = 0;
    c.save_steps = 0;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", ck, keep);
    FAT5_REQUIRE(T, system(cmd) == 0);
    c.resume = ck;
    for (which = 0; which < 8; which++) {
        FAT5_REQUIRE(T, ttr_spoil_state(T, ck, which));
        FAT5_CHECK_MSG(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_FORMAT && t == NULL &&
                              strstr(fat5_last_error(ctx), want[which]),
                       "spoiled state %d: %s", which, fat5_last_error(ctx));
        fat5_train_destroy(t);
        t = NULL;
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", ck, keep, ck);
        FAT5_REQUIRE(T, system(cmd) == 0);
    }
    FAT5_CHECK_MSG(T, fat5_train_create(ctx, &c, &t) == FAT5_OK && fat5_optim_get_step(t->o) == 2, "%s",
                   fat5_last_error(ctx));
    fat5_train_destroy(t);
}

// every parameter, in table order, into w (fat5_model_param_count floats)
static fat5_status ttr_weights(fat5_model *m, float *w) {
    int64_t off = 0;
    int k;
    fat5_status st = FAT5_OK;
    for (k = 0; k < fat5_model_tensor_count(m) && st == FAT5_OK; k++) {
        fat5_tensor_info ti = {0};
        if ((st = fat5_model_tensor_info(m, k, &ti)) == FAT5_OK) st = fat5_model_get_param(m, ti.name, w + off, ti.numel);
        off += ti.numel;
    }
    return st;
}

// N steps, a checkpoint, a new process-like trainer resuming, M steps == N + M steps straight;
// on ctx's device (the GPU: deterministic backward, and batches drawn on the host thread).
// adafactor: with Adafactor (first moment, parameter scale and weight decay: every state array it
// keeps crosses the checkpoint) instead of the default AdamWScale.
static void ttr_resume_bitwise(fat5_test *T, fat5_ctx *ctx, int adafactor) {
    char a[600], b[600], p[700];
    const char *data = ttr_corpus(T, 8);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    double straight[8], resumed[8];
    float *wa = NULL, *wb = NULL;
    int64_t n, i;
    int ok;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(a, sizeof a, "%s/straight", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/resumed", fat5_test_tmpdir(T));
    c = ttr_config(T, data, a);
    c.grad_accum = 2;   // accumulation and the sampler state both cross the checkpoint
    c.save_total_limit = 1;
    if (adafactor) {
        static const char *const o[][2] = {{"optim", "adafactor"}, {"adafactor_beta1", "0.9"},
                                           {"adafactor_scale_parameter", "true"}, {"weight_decay", "0.01"}};
        for (i = 0; i < (int64_t)(sizeof o / sizeof o[0]); i++)
            FAT5_REQUIRE_OK(T, fat5_train_config_set(fat5_test_ctx(T), &c, o[i][0], o[i][1]));
    }
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, (t->o->af != 0) == (adafactor != 0) && (t->o->m1 != 0));
    for (i = 0; i < 8; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        straight[i] = r.loss;
    }
    n = fat5_model_param_count(fat5_train_model(t));
    wa = (float *)malloc((size_t)n * 4);
    wb = (float *)malloc((size_t)n * 4);
    FAT5_REQUIRE(T, wa && wb);
    FAT5_REQUIRE_OK(T, ttr_weights(fat5_train_model(t), wa));
    fat5_train_destroy(t);
    t = NULL;

    // the same run, stopped after step 5 (a checkpoint written on demand), then resumed
    c.output_dir = b;
    c.save_steps = 0;
    c.save_total_limit = 2;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 5; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        resumed[i] = r.loss;
    }
    FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));   // a step past the checkpoint, lost with the "crash"
    fat5_train_destroy(t);
    t = NULL;
    c.resume = b;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, fat5_optim_get_step(t->o) == 5);
    for (i = 5; i < 8; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        resumed[i] = r.loss;
    }
    ok = memcmp(straight, resumed, sizeof straight) == 0;
    for (i = 0; i < 8 && !ok; i++)
        if (straight[i] != resumed[i]) printf("  step %lld: %.17g vs %.17g\n", (long long)i + 1, straight[i], resumed[i]);
    FAT5_CHECK_MSG(T, ok, "resumed losses differ from the straight run");
    FAT5_REQUIRE_OK(T, ttr_weights(fat5_train_model(t), wb));
    FAT5_CHECK_MSG(T, memcmp(wa, wb, (size_t)n * 4) == 0, "resumed weights differ from the straight run");
    fat5_train_destroy(t);
    // the metrics log reads as one run: steps 1..8, once each (step 6 of the stopped run dropped)
    {
        char *text = NULL;
        size_t len = 0, lines = 0;
        const char *s;
        snprintf(p, sizeof p, "%s/metrics.jsonl", b);
        FAT5_REQUIRE_OK(T, fat5__read_file(ctx, p, 1 << 20, &text, &len));
        for (s = text; *s; s++) lines += *s == '\n';
        FAT5_CHECK_MSG(T, lines == 8 && strstr(text, "{\"step\": 8,") != NULL, "%zu lines:\n%s", lines, text);
        {   // every row has the wall time: ISO 8601 UTC and Unix seconds, of this run's day
            const char *tm = strstr(text, "\"time\": \""), *ut = strstr(text, "\"unix_time\": ");
            FAT5_CHECK_MSG(T, tm && ut && tm[19] == 'T' && tm[28] == '.' && tm[32] == 'Z' &&
                                  fabs(strtod(ut + 13, NULL) - (double)time(NULL)) < 600,
                           "%s", text);
        }
        fat5__free(ctx, text);
    }
    // only the newest save_total_limit (2) checkpoints are kept, the loadable final one among them
    snprintf(p, sizeof p, "%s/step-00000008", b);
    {
        fat5_model *m = NULL;
        FAT5_CHECK_MSG(T, fat5_model_load(ctx, p, &m) == FAT5_OK, "%s", fat5_last_error(ctx));
        fat5_model_destroy(m);
    }
    snprintf(p, sizeof p, "%s/step-00000004", a);
    FAT5_CHECK_MSG(T, !fat5__is_dir(p), "step 4 of the straight run should be pruned (save_total_limit 1)");
    free(wa);
    free(wb);
}

static void t_train_resume_bitwise(fat5_test *T) { ttr_resume_bitwise(T, fat5_test_ctx(T), 0); }
static void t_optim_adafactor_resume(fat5_test *T) { ttr_resume_bitwise(T, fat5_test_ctx(T), 1); }

// A checkpoint of one optimizer resumed with the other (AdamW's moments into Adafactor's factors,
// and back): refused at creation, the message naming the state file, the optimizer asked for and
// the checkpoint's.
static void t_optim_resume_other_optimizer(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 8);
    static const char *const kinds[2] = {"adamw", "adafactor"};
    int from;
    FAT5_REQUIRE(T, data != NULL);
    for (from = 0; from < 2; from++) {
        char out[600], latest[700];
        fat5_train_config c;
        fat5_trainer *t = NULL;
        fat5_status st;
        int i;
        snprintf(out, sizeof out, "%s/from_%s", fat5_test_tmpdir(T), kinds[from]);
        c = ttr_config(T, data, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "optim", kinds[from]));
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
        for (i = 0; i < 2; i++) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
        FAT5_REQUIRE_OK(T, fat5_train_save(t, NULL));
        fat5_train_destroy(t);
        t = NULL;
        snprintf(latest, sizeof latest, "%s/latest", out);
        FAT5_REQUIRE(T, fat5__is_file(latest));
        c.resume = out;
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "optim", kinds[1 - from]));
        st = fat5_train_create(ctx, &c, &t);
        FAT5_CHECK_MSG(T, st != FAT5_OK && t == NULL, "resuming a %s checkpoint with %s: %s", kinds[from],
                       kinds[1 - from], fat5_status_string(st));
        FAT5_CHECK_MSG(T, st == FAT5_OK || (strstr(fat5_last_error(ctx), "adafactor") && strstr(fat5_last_error(ctx), "adamw") &&
                                            strstr(fat5_last_error(ctx), "training_state.safetensors")),
                       "the refusal does not name the file and both optimizers: %s", fat5_last_error(ctx));
        if (t) fat5_train_destroy(t);
    }
}

static int ttr_has_tmp(const char *out) {
    DIR *d = opendir(out);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) n += strncmp(e->d_name, ".tmp-step-", 10) == 0;
    if (d) closedir(d);
    return n;
}

// A checkpoint save killed by SIGKILL at varying moments: the previous checkpoint stays loadable
// and a resume from the output directory works.
static void t_train_kill9_during_save(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], p[800];
    const char *data = ttr_corpus(T, 8);
    fat5_train_config c;
    int round, kills_mid_save = 0;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/killed", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    // a wider model: a save takes long enough to be interrupted
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_model", "256"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_ff", "1024"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "vocab_size", "4096"));
    c.save_steps = 1;
    c.eval_fraction = 0;
    c.save_total_limit = 2;
    c.optim.total_steps = 1000000;
    for (round = 0; round < 6; round++) {
        pid_t pid;
        int status;
        fflush(stdout);
        pid = fork();
        FAT5_REQUIRE(T, pid >= 0);
        if (pid == 0) {   // the child trains (and saves after every step) until it is killed
            fat5_ctx *cx = NULL;
            fat5_ctx_config cc = fat5_ctx_config_default();
            fat5_trainer *t = NULL;
            fat5_train_config cr = c;
            if (round > 0) cr.resume = out;
            if (fat5_ctx_create(&cc, &cx, NULL, 0) != FAT5_OK || fat5_train_create(cx, &cr, &t) != FAT5_OK) {
                fprintf(stderr, "child: %s\n", cx ? fat5_last_error(cx) : "no context");
                _exit(3);
            }
            for (;;)
                if (fat5_train_step(t, NULL) != FAT5_OK) _exit(4);
        }
        {   // wait for a first checkpoint, then kill at a moment that moves through the save
            char latest[700];
            int waited = 0;
            snprintf(latest, sizeof latest, "%s/latest", out);
            while (!fat5__is_file(latest) && waited < 30000) {
                ttr_sleep_us(1000);
                waited++;
                if (waitpid(pid, &status, WNOHANG) == pid) break;
            }
            // then for a save to begin (its temporary directory appears), and a moment into it
            for (waited = 0; waited < 20000 && !ttr_has_tmp(out); waited++) ttr_sleep_us(200);
            ttr_sleep_us(round * 4000L);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            FAT5_CHECK_MSG(T, WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child stopped on its own (%d)",
                           status);
        }
        kills_mid_save += ttr_has_tmp(out) > 0;   // a save was under way: its temporary directory is left
        {   // the checkpoint 'latest' names loads, model and training state
            char dir[700], *text = NULL;
            size_t len = 0;
            fat5_model *m = NULL;
            fat5_st_file *f = NULL;
            snprintf(p, sizeof p, "%s/latest", out);
            FAT5_REQUIRE_OK(T, fat5__read_file(ctx, p, 64, &text, &len));
            if (len && text[len - 1] == '\n') text[len - 1] = 0;
            snprintf(dir, sizeof dir, "%s/%s", out, text);
            fat5__free(ctx, text);
            FAT5_CHECK_MSG(T, fat5_model_load(ctx, dir, &m) == FAT5_OK, "round %d: %s", round, fat5_last_error(ctx));
            fat5_model_destroy(m);
            snprintf(p, sizeof p, "%s/training_state.safetensors", dir);
            FAT5_CHECK_MSG(T, fat5_st_load(ctx, p, &f) == FAT5_OK, "round %d: %s", round, fat5_last_error(ctx));
            fat5_st_destroy(f);
        }
    }
    printf("  %d of 6 kills interrupted a save\n", kills_mid_save);
    FAT5_CHECK_MSG(T, kills_mid_save > 0, "no kill landed inside a save: the test did not test it");
}

// Bad inputs: clear errors, and a good checkpoint is never written over.
static void t_train_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], p[700], missing[700];
    const char *data = ttr_corpus(T, 8);
    fat5_train_config c, d;
    fat5_trainer *t = NULL;
    struct stat before, after;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/good", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    c.optim.total_steps = 2;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    while (!fat5_train_done(t)) FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    FAT5_CHECK(T, fat5_train_step(t, NULL) == FAT5_ERR_STATE);
    fat5_train_destroy(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/step-00000002/model.safetensors", out);
    FAT5_REQUIRE(T, stat(p, &before) == 0);

    // resuming with another model
    d = c;
    d.resume = out;
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &d, "d_model", "48"));
    d.optim.total_steps = 4;
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_INVALID_ARG && t == NULL);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "another model") && strstr(fat5_last_error(ctx), "d_model"), "%s",
                   fat5_last_error(ctx));
    // resuming on other data
    {
        const char *other;
        other = ttr_corpus(T, 9);   // rewrites corpus.tok with more documents
        d = c;
        d.resume = out;
        d.data = other;
        FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "other data"), "%s", fat5_last_error(ctx));
    }
    FAT5_REQUIRE(T, stat(p, &after) == 0);
    FAT5_CHECK_MSG(T, before.st_mtime == after.st_mtime && before.st_size == after.st_size && before.st_ino == after.st_ino,
                   "the good checkpoint was rewritten");
    // not a checkpoint
    d = c;
    d.resume = fat5_test_tmpdir(T);
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_IO && strstr(fat5_last_error(ctx), "neither a checkpoint"));
    // no data, missing data, a budget too small for one example, a model the config cannot make
    d = c;
    d.data = NULL;
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(ctx), "no data"));
    d = c;
    snprintf(missing, sizeof missing, "%s/missing.tok", fat5_test_tmpdir(T));
    d.data = missing;
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_IO && strstr(fat5_last_error(ctx), "missing.tok"));
    d = c;
    d.ul2.enc_tokens = 4;
    FAT5_CHECK_MSG(T, fat5_train_create(ctx, &d, &t) != FAT5_OK && t == NULL, "a 4-token budget was accepted");
    d = c;
    d.model.num_heads = 0;
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) != FAT5_OK && t == NULL);
    d = c;
    d.model.vocab_size = 100;   // the data's ids reach 383
    FAT5_CHECK_MSG(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(ctx), "vocabulary"),
                   "%s", fat5_last_error(ctx));
}

// A non-finite loss is reported with its step, skipped (counted), and never reaches the weights.
static void t_train_skips_nonfinite(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600];
    const char *data = ttr_corpus(T, 8);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    float *w0 = NULL, *w1 = NULL, saved;
    int64_t n;
    const char *name = "encoder.final_layer_norm.weight";
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/nan", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    n = fat5_model_param_count(fat5_train_model(t));
    {
        int k = fat5_model_find_tensor(fat5_train_model(t), name);
        fat5_tensor_info ti = {0};
        FAT5_REQUIRE(T, k >= 0 && fat5_model_tensor_info(fat5_train_model(t), k, &ti) == FAT5_OK);
        w0 = (float *)malloc((size_t)ti.numel * 4);
        w1 = (float *)malloc((size_t)ti.numel * 4);
        FAT5_REQUIRE(T, w0 && w1);
        FAT5_REQUIRE_OK(T, fat5_model_get_param(fat5_train_model(t), name, w0, ti.numel));
        saved = w0[0];
        w0[0] = NAN;
        FAT5_REQUIRE_OK(T, fat5_model_set_param(fat5_train_model(t), name, w0, ti.numel));
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        FAT5_CHECK(T, r.skipped == 1 && r.n_skipped == 1 && r.step == 2 && !(r.loss == r.loss));
        FAT5_REQUIRE_OK(T, fat5_model_get_param(fat5_train_model(t), name, w1, ti.numel));
        FAT5_CHECK(T, memcmp(w0 + 1, w1 + 1, (size_t)(ti.numel - 1) * 4) == 0);
        w0[0] = saved;
        FAT5_REQUIRE_OK(T, fat5_model_set_param(fat5_train_model(t), name, w0, ti.numel));
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        FAT5_CHECK(T, r.skipped == 0 && r.n_skipped == 1 && r.loss == r.loss);
    }
    (void)n;
    free(w0);
    free(w1);
    fat5_train_destroy(t);
}

// --init: continued pre-training of a Hugging Face checkpoint (a fixture, vocabulary 96)
static void t_train_init_from_hf(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], path[600];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    fat5_model *hf = NULL;
    int32_t ids[3000];
    int64_t i, n = 0;
    float w0[4], w1[4];
    fat5_rng g = fat5_rng_init(7);
    for (i = 0; i < 60; i++) {   // 60 documents of 10..49 ids in 3..71 (72..95: sentinels)
        int64_t k, len = 10 + (int64_t)fat5_rng_below(&g, 40);
        for (k = 0; k < len; k++) ids[n++] = 3 + (int32_t)((i * 7 + k * k) % 69);
        ids[n++] = 1;
    }
    snprintf(path, sizeof path, "%s/small.tok", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, path, ids, n, 96, 1, 2));
    snprintf(out, sizeof out, "%s/init", fat5_test_tmpdir(T));
    c = ttr_config(T, path, out);
    c.init = "tests/data/t5_v10_relu_tied";
    c.optim.total_steps = 3;
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, c.init, &hf));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, fat5_train_model(t)->cfg.vocab_size == 96 && fat5_train_model(t)->cfg.d_model == hf->cfg.d_model &&
                  fat5_train_model(t)->lm_head_tied);
    // it starts from the checkpoint's weights ...
    memcpy(w0, hf->w + hf->params[hf->shared].offset, sizeof w0);
    memcpy(w1, fat5_train_model(t)->w + fat5_train_model(t)->params[fat5_train_model(t)->shared].offset, sizeof w1);
    FAT5_CHECK(T, memcmp(w0, w1, sizeof w0) == 0);
    while (!fat5_train_done(t)) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    // ... trains it, and saves the same architecture (tied v1.0) back
    FAT5_CHECK(T, r.saved && r.loss == r.loss);
    {
        fat5_model *back = NULL;
        FAT5_CHECK_MSG(T, fat5_model_load(ctx, r.checkpoint, &back) == FAT5_OK && back->lm_head_tied &&
                              back->cfg.act == FAT5_ACT_RELU, "%s", fat5_last_error(ctx));
        fat5_model_destroy(back);
    }
    fat5_model_destroy(hf);
    fat5_train_destroy(t);
}

// The data parallel options, and the errors of a bad rank or a missing rendezvous.
static void t_train_dist_options(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c = fat5_train_config_default();
    fat5_trainer *t = NULL;
    const char *data = ttr_corpus(T, 2);
    char out[600], never[700];
    FAT5_CHECK(T, c.world_size == 1 && c.rank == 0 && c.dist_timeout_s == 900 && c.bucket_mb == 100 &&
                  c.balance_ranks == 1);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "world_size", "4"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "rank", "3"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "rendezvous", "/shared/run.rdv"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "dist_timeout", "60"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "bucket_mb", "0.5"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "balance_ranks", "0"));
    FAT5_CHECK(T, c.world_size == 4 && c.rank == 3 && strcmp(c.rendezvous, "/shared/run.rdv") == 0 &&
                  c.dist_timeout_s == 60 && c.bucket_mb == 0.5 && c.balance_ranks == 0);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "balance_ranks", "2") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "world_size", "0") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "bucket_mb", "0") == FAT5_ERR_INVALID_ARG);
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/dist", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    c.world_size = 2;
    c.rank = 2;
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && !t &&
                  strstr(fat5_last_error(ctx), "rank 2 of world_size 2"));
    c.rank = 1;
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && !t &&
                  strstr(fat5_last_error(ctx), "no rendezvous"));
    c.rendezvous = "launch:x";
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && !t &&
                  strstr(fat5_last_error(ctx), "expected launch:SHM:READ:WRITE"));
    c.rendezvous = "NCCL_COMM_ID";
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && !t &&
                  strstr(fat5_last_error(ctx), "GPU ranks (NCCL) only"));
    // rank 1 alone with a rendezvous file: rank 0 never creates it, and the wait ends
    snprintf(never, sizeof never, "%s/never.rdv", fat5_test_tmpdir(T));
    c.rendezvous = never;
    c.dist_timeout_s = 1;
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_STATE && !t &&
                  strstr(fat5_last_error(ctx), "did not appear"));
}

// A trainer holding only what fat5__tgroup_draw uses: rank r of W, k micro-batches a rank.
static void ttb_open(fat5_test *T, fat5_trainer *t, fat5__tgroup *g, fat5_model *m, fat5_tokens *tok,
                     const fat5_ul2_config *u, int W, int k, int r, int balance) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    memset(t, 0, sizeof *t);
    memset(g, 0, sizeof *g);
    t->dctx = ctx;
    t->m = m;
    t->world = W;
    t->rank = r;
    t->cfg.grad_accum = k;
    t->cfg.balance_ranks = balance;
    t->cfg.ul2 = *u;
    t->pool.bin_e = (int64_t *)calloc((size_t)(3 * W * k), sizeof(int64_t));
    t->pool.bin_d = t->pool.bin_e ? t->pool.bin_e + W * k : NULL;
    t->pool.bin_n = t->pool.bin_e ? t->pool.bin_e + 2 * W * k : NULL;
    t->pool.rank_cost = (double *)calloc((size_t)W, sizeof(double));
    t->pool.rank_at = (int32_t *)calloc((size_t)(2 * W + 1), sizeof(int32_t));
    t->pool.ranks = (fat5__tsort *)calloc((size_t)W, sizeof(fat5__tsort));
    g->mb = (fat5__tbatch *)calloc((size_t)k, sizeof(fat5__tbatch));
    g->n_labels = (int64_t *)calloc((size_t)(W * k), sizeof(int64_t));
    FAT5_REQUIRE(T, t->pool.bin_e && t->pool.rank_cost && t->pool.rank_at && t->pool.ranks && g->mb && g->n_labels);
    FAT5_REQUIRE_OK(T, fat5_ul2_create(ctx, u, tok, &t->sampler));
}

static void ttb_close(fat5_test *T, fat5_trainer *t, fat5__tgroup *g) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int i;
    for (i = 0; i < t->cfg.grad_accum; i++) fat5__free(ctx, g->mb[i].buf);
    free(g->mb);
    free(g->n_labels);
    fat5__free(ctx, t->pool.ids);
    fat5__free(ctx, t->pool.ex);
    fat5__free(ctx, t->pool.by_rank);
    fat5__free(ctx, t->pool.keys);
    free(t->pool.bin_e);
    free(t->pool.rank_cost);
    free(t->pool.rank_at);
    free(t->pool.ranks);
    fat5_ul2_destroy(t->sampler);
}

// The step's examples evened across ranks: each of 3 ranks draws the 3 x 2 micro-batches of a step
// from its own sampler (one seed), as the trainer does, against the same micro-batches drawn
// plainly. As drawn (balance_ranks 0), rank r trains exactly micro-batches 2r and 2r + 1.
// Balanced: every rank makes the same exchanges and label counts, every micro-batch stays within
// the budgets and non-empty, the ranks' micro-batches hold exactly the drawn examples (each once,
// ids and labels intact, in drawn order) with the label counts that weight them, the FLOPs add up,
// and the busiest rank's share shrinks. Then hand-made pools where every improving exchange
// would break a budget or empty a micro-batch: nothing moves.
static void t_train_balance(fat5_test *T) {
    enum { W = 3, K = 2, N = W * K };
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 8);
    fat5_tokens *tok = NULL;
    fat5_ul2 *s = NULL;
    fat5_ul2_config u = fat5_ul2_config_default();
    fat5_model m;
    fat5_trainer tr[W];
    fat5__tgroup grp[W];
    fat5__tbatch drawn[N];
    fat5_batch b;
    double before = 0, after = 0, cost = 0, rebuilt = 0;
    int64_t total = 0, tokens = 0;
    int balance, i, r;
    size_t j;
    FAT5_REQUIRE(T, data != NULL);
    FAT5_REQUIRE_OK(T, fat5_tokens_load(ctx, &data, 1, &tok));
    memset(&m, 0, sizeof m);
    FAT5_REQUIRE(T, fat5__model_preset("fat5-small", &m.cfg));
    memset(drawn, 0, sizeof drawn);
    u.enc_tokens = 400;
    u.dec_tokens = 160;
    u.max_enc_len = 64;
    u.max_dec_len = 48;
    u.sentinel_first = 383;
    u.n_sentinels = 100;
    u.seed = 7;
    FAT5_REQUIRE_OK(T, fat5_ul2_create(ctx, &u, tok, &s));
    for (i = 0; i < N; i++) {
        FAT5_REQUIRE_OK(T, fat5_ul2_next_batch(s, &b));
        FAT5_REQUIRE_OK(T, fat5__tbatch_copy(ctx, &m.cfg, &drawn[i], &b));
        total += b.n_seq;
        tokens += b.n_enc_tokens + b.n_dec_tokens;
        cost += fat5__batch_flops(&m.cfg, &b);
    }
    fat5_ul2_destroy(s);
    for (balance = 0; balance < 2; balance++) {
        for (r = 0; r < W; r++) {
            ttb_open(T, &tr[r], &grp[r], &m, tok, &u, W, K, r, balance);
            fat5__tgroup_draw(&tr[r], &grp[r]);
            FAT5_CHECK_MSG(T, grp[r].st == FAT5_OK, "rank %d: %s", r, fat5_last_error(ctx));
            FAT5_REQUIRE(T, grp[r].st == FAT5_OK);
            FAT5_CHECK(T, grp[r].tokens == tokens && grp[r].balance == grp[0].balance &&
                              memcmp(grp[r].n_labels, grp[0].n_labels, N * sizeof(int64_t)) == 0);
            for (j = 0; j < tr[r].pool.n_ex && tr[r].pool.ex[j].bin == tr[0].pool.ex[j].bin; j++) {}
            FAT5_CHECK_MSG(T, j == tr[0].pool.n_ex && tr[r].pool.n_ex == (size_t)total,
                           "rank %d: example %zu goes elsewhere than on rank 0", r, j);
        }
        if (balance == 0) {   // as drawn
            before = grp[0].balance;
            for (r = 0; r < W; r++)
                for (i = 0; i < K; i++) {
                    const fat5_batch *x = &grp[r].mb[i].b, *y = &drawn[r * K + i].b;
                    FAT5_CHECK_MSG(T, x->n_seq == y->n_seq && x->n_enc_tokens == y->n_enc_tokens &&
                                          x->n_dec_tokens == y->n_dec_tokens &&
                                          memcmp(x->enc_cu_seqlens, y->enc_cu_seqlens, (size_t)(x->n_seq + 1) * 4) == 0 &&
                                          memcmp(x->dec_cu_seqlens, y->dec_cu_seqlens, (size_t)(x->n_seq + 1) * 4) == 0 &&
                                          memcmp(x->enc_tokens, y->enc_tokens, (size_t)x->n_enc_tokens * 4) == 0 &&
                                          memcmp(x->labels, y->labels, (size_t)x->n_dec_tokens * 4) == 0,
                                   "rank %d, micro-batch %d is not the drawn one", r, i);
                }
        } else {
            const fat5__tpool *p = &tr[0].pool;
            int64_t found = 0, e = 0, q;
            after = grp[0].balance;
            for (i = 0; i < N; i++) {
                const fat5_batch *x = &grp[i / K].mb[i % K].b;
                int64_t lab = 0;
                FAT5_CHECK_MSG(T, x->n_seq >= 1 && x->n_seq == p->bin_n[i] && x->n_enc_tokens <= u.enc_tokens &&
                                      x->n_dec_tokens <= u.dec_tokens && x->n_enc_tokens == p->bin_e[i] &&
                                      x->n_dec_tokens == p->bin_d[i] && x->enc_cu_seqlens[x->n_seq] == x->n_enc_tokens &&
                                      x->dec_cu_seqlens[x->n_seq] == x->n_dec_tokens,
                               "micro-batch %d: %lld examples, %lld / %lld tokens", i, (long long)x->n_seq,
                               (long long)x->n_enc_tokens, (long long)x->n_dec_tokens);
                for (q = 0; q < x->n_dec_tokens; q++) lab += x->labels[q] != -100;
                FAT5_CHECK(T, lab == grp[0].n_labels[i]);
                rebuilt += fat5__batch_flops(&m.cfg, x);
            }
            for (i = 0; i < N; i++)   // drawn example e of batch i, sequence q: at its place in its micro-batch
                for (q = 0; q < drawn[i].b.n_seq; q++, e++) {
                    const fat5_batch *a = &drawn[i].b, *c;
                    int32_t ae = a->enc_cu_seqlens[q], ne = a->enc_cu_seqlens[q + 1] - ae;
                    int32_t ad = a->dec_cu_seqlens[q], nd = a->dec_cu_seqlens[q + 1] - ad, ce, cd;
                    int g = p->ex[e].bin;
                    int64_t at = 0, z;
                    for (z = 0; z < e; z++) at += p->ex[z].bin == g;
                    c = &grp[g / K].mb[g % K].b;
                    if (at >= c->n_seq) continue;
                    ce = c->enc_cu_seqlens[at], cd = c->dec_cu_seqlens[at];
                    found += c->enc_cu_seqlens[at + 1] - ce == ne && c->dec_cu_seqlens[at + 1] - cd == nd &&
                             memcmp(c->enc_tokens + ce, a->enc_tokens + ae, (size_t)ne * 4) == 0 &&
                             memcmp(c->labels + cd, a->labels + ad, (size_t)nd * 4) == 0;
                }
            FAT5_CHECK_MSG(T, found == total, "%lld of %lld examples found intact", (long long)found, (long long)total);
        }
        for (r = 0; r < W; r++) ttb_close(T, &tr[r], &grp[r]);
    }
    FAT5_CHECK_MSG(T, after < before && after < 1.05, "the busiest rank's share: %.4f as drawn, %.4f balanced", before,
                   after);
    FAT5_CHECK_MSG(T, fabs(rebuilt - cost) <= 1e-9 * cost, "FLOPs: drawn %.6g, of the balanced micro-batches %.6g", cost,
                   rebuilt);
    for (i = 0; i < N; i++) fat5__free(ctx, drawn[i].buf);
    fat5_tokens_destroy(tok);
    {   // 2 ranks, 1 micro-batch each, budgets 20 / 20. Rank 0: two examples of cost 10 (10 + 10
        // tokens), rank 1: one of cost 1 (1 + 19). Every move and swap that would narrow the gap
        // breaks a budget. Then rank 0 with one example: it cannot be moved away.
        fat5__tex ex[3] = {{0, 10, 10, 0, 0, 10.0}, {0, 10, 10, 0, 0, 10.0}, {0, 1, 19, 0, 1, 1.0}};
        int64_t bins[6];
        double rc[2];
        int32_t ra[5], by[3];
        fat5__tsort keys[3], ranks[2];
        fat5__tpool p;
        int round;
        for (round = 0; round < 2; round++) {
            memset(&p, 0, sizeof p);
            p.ex = round ? ex + 1 : ex;
            p.n_ex = round ? 2 : 3;
            p.by_rank = by, p.keys = keys, p.rank_at = ra, p.ranks = ranks;
            p.bin_e = bins, p.bin_d = bins + 2, p.bin_n = bins + 4, p.rank_cost = rc;
            bins[0] = round ? 10 : 20, bins[1] = 1, bins[2] = round ? 10 : 20, bins[3] = 19, bins[4] = round ? 1 : 2,
            bins[5] = 1;
            rc[0] = round ? 10 : 20, rc[1] = 1;
            fat5__tpool_balance(&p, 2, 1, 20, round ? 100 : 20);
            FAT5_CHECK_MSG(T, ex[0].bin == 0 && ex[1].bin == 0 && ex[2].bin == 1 && rc[0] == (round ? 10 : 20) &&
                                  rc[1] == 1 && bins[4] == (round ? 1 : 2) && bins[5] == 1,
                           "round %d: an exchange was made: bins %d %d %d, costs %g %g", round, ex[0].bin, ex[1].bin,
                           ex[2].bin, rc[0], rc[1]);
        }
    }
}

// Two CPU ranks forked by fat5_launch train 4 steps (with an evaluation and checkpoints); one rank
// with twice the accumulation follows the same losses to rounding. In this process, so the
// sanitizer build checks the trainer's data parallel paths.
static void t_train_two_ranks(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c;
    fat5_launch_info li;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    const char *data = ttr_corpus(T, 8);
    char out2[600], out1[600], path[700], *text = NULL;
    double l2[4];
    size_t len = 0;
    int i;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out2, sizeof out2, "%s/two", fat5_test_tmpdir(T));
    snprintf(out1, sizeof out1, "%s/one", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out2);
    c.optim.total_steps = 4;
    c.eval_steps = 2;
    c.save_steps = 2;
    fflush(stdout);
    FAT5_REQUIRE_OK(T, fat5_launch(ctx, 2, 5.0, &li));
    if (li.rank >= 0) {   // a worker: train, then leave without returning into the test runner
        fat5_ctx_config cc = fat5_ctx_config_default();
        fat5_ctx *cx = NULL;
        int rc = 1;
        c.world_size = 2;
        c.rank = li.rank;
        c.rendezvous = li.rendezvous;
        if (fat5_ctx_create(&cc, &cx, NULL, 0) == FAT5_OK && fat5_train_create(cx, &c, &t) == FAT5_OK) {
            rc = 0;
            while (!fat5_train_done(t) && rc == 0) rc = fat5_train_step(t, &r) != FAT5_OK;
            if (rc) printf("  rank %d: %s\n", li.rank, fat5_last_error(cx));
        } else {
            printf("  rank %d: %s\n", li.rank, cx ? fat5_last_error(cx) : "no context");
        }
        fat5_train_destroy(t);
        fat5_ctx_destroy(cx);
        fflush(stdout);
        _exit(rc);
    }
    FAT5_REQUIRE(T, li.exit_code == 0 && li.failed_rank == -1);
    snprintf(path, sizeof path, "%s/metrics.jsonl", out2);
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1 << 20, &text, &len));
    {
        const char *p = text;
        for (i = 0; i < 4 && (p = strstr(p, "\"loss\": ")) != NULL; i++, p++) l2[i] = strtod(p + 8, NULL);
        FAT5_CHECK(T, i == 4 && strstr(text, "\"world_size\": 2") && strstr(text, "\"eval_loss\""));
    }
    fat5__free(ctx, text);
    snprintf(path, sizeof path, "%s/step-00000004/model.safetensors", out2);
    FAT5_CHECK(T, fat5__is_file(path));
    c.output_dir = out1;
    c.grad_accum = 2;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 4 && fat5_train_step(t, &r) == FAT5_OK; i++)
        FAT5_CHECK_MSG(T, fabs(r.loss - l2[i]) <= 1e-5 * l2[i], "step %d: one rank %.7f, two ranks %.7f", i + 1, r.loss,
                       l2[i]);
    FAT5_CHECK(T, i == 4);
    fat5_train_destroy(t);
}

// A rank that fails mid-run (rank 1 leaves after 2 steps): rank 0's next step stops, naming it,
// and rank 0 then refuses fat5_train_save (a failed step may have updated the weights from
// incomplete sums, as a GPU rank whose watchdog aborted NCCL under the optimizer does), so the
// last checkpoint stays the last good one.
static void t_train_save_after_failure(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c;
    fat5_launch_info li;
    const char *data = ttr_corpus(T, 2);
    char out[600], path[700], *text = NULL;
    size_t len = 0;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/failsave", fat5_test_tmpdir(T));
    c = ttr_config(T, data, out);
    c.optim.total_steps = 6;
    c.save_steps = 2;
    c.eval_steps = 0;
    snprintf(path, sizeof path, "%s/failsave_rank0.txt", fat5_test_tmpdir(T));
    fflush(stdout);
    FAT5_REQUIRE_OK(T, fat5_launch(ctx, 2, 5.0, &li));
    if (li.rank >= 0) {   // a worker: leave without returning into the test runner
        fat5_ctx_config cc = fat5_ctx_config_default();
        fat5_ctx *cx = NULL;
        fat5_trainer *t = NULL;
        FILE *f;
        int rc = 1, i;
        c.world_size = 2;
        c.rank = li.rank;
        c.rendezvous = li.rendezvous;
        if (fat5_ctx_create(&cc, &cx, NULL, 0) == FAT5_OK && fat5_train_create(cx, &c, &t) == FAT5_OK) {
            for (i = 0; i < 2 && fat5_train_step(t, NULL) == FAT5_OK; i++) {
            }
            if (i < 2) _exit(2);
            if (li.rank == 1) _exit(5);   // gone, as a crash would leave it
            if (fat5_train_step(t, NULL) != FAT5_OK && (f = fopen(path, "w")) != NULL) {
                fprintf(f, "step: %s\n", fat5_last_error(cx));
                fprintf(f, "save: %s %s\n", fat5_train_save(t, NULL) == FAT5_ERR_STATE ? "refused" : "not refused",
                        fat5_last_error(cx));
                fclose(f);
                rc = 3;
            }
        }
        fat5_train_destroy(t);
        fat5_ctx_destroy(cx);
        fflush(stdout);
        _exit(rc);
    }
    FAT5_CHECK_MSG(T, li.failed_rank == 1 && li.exit_code == 5, "rank %d, exit %d: %s", li.failed_rank, li.exit_code,
                   li.message);
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1 << 16, &text, &len));
    FAT5_CHECK_MSG(T, strstr(text, "step: rank 0 stops: rank 1 failed") != NULL, "%s", text);
    FAT5_CHECK_MSG(T, strstr(text, "save: refused save: this rank failed (rank 0 stops: rank 1 failed") != NULL, "%s", text);
    fat5__free(ctx, text);
    snprintf(path, sizeof path, "%s/step-00000002/model.safetensors", out);
    FAT5_CHECK(T, fat5__is_file(path));
    snprintf(path, sizeof path, "%s/step-00000003", out);
    FAT5_CHECK(T, access(path, F_OK) != 0);
    snprintf(path, sizeof path, "%s/latest", out);
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1 << 10, &text, &len));
    FAT5_CHECK_MSG(T, strncmp(text, "step-00000002", 13) == 0, "latest: %s", text);
    fat5__free(ctx, text);
}

// Two CPU ranks whose settings differ (rank 1 another seed, so other initial weights; then
// another batch budget): fat5_train_create fails on both, naming rank 1, instead of training two
// models that silently drift apart.
static void t_train_ranks_disagree(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 2);
    char out[600], path[700], *text = NULL;
    size_t len = 0;
    int round, r;
    FAT5_REQUIRE(T, data != NULL);
    for (round = 0; round < 2; round++) {
        fat5_launch_info li;
        fat5_train_config c;
        snprintf(out, sizeof out, "%s/disagree%d", fat5_test_tmpdir(T), round);
        c = ttr_config(T, data, out);
        fflush(stdout);
        FAT5_REQUIRE_OK(T, fat5_launch(ctx, 2, 5.0, &li));
        if (li.rank >= 0) {   // a worker: report create's error in a file, leave without returning
            fat5_ctx_config cc = fat5_ctx_config_default();
            fat5_ctx *cx = NULL;
            fat5_trainer *t = NULL;
            FILE *f;
            int rc = 1;
            c.world_size = 2;
            c.rank = li.rank;
            c.rendezvous = li.rendezvous;
            if (li.rank == 1 && round == 0) c.seed += 1;
            if (li.rank == 1 && round == 1) c.ul2.dec_tokens -= 8;
            snprintf(path, sizeof path, "%s/disagree%d_rank%d.txt", fat5_test_tmpdir(T), round, li.rank);
            if (fat5_ctx_create(&cc, &cx, NULL, 0) == FAT5_OK) {
                rc = fat5_train_create(cx, &c, &t) == FAT5_OK ? 0 : 3;
                if ((f = fopen(path, "w")) != NULL) {
                    fputs(rc ? fat5_last_error(cx) : "created", f);
                    fclose(f);
                }
            }
            fat5_train_destroy(t);
            fat5_ctx_destroy(cx);
            _exit(rc);
        }
        FAT5_CHECK_MSG(T, li.exit_code == 3 && li.failed_rank >= 0, "round %d: exit %d, rank %d: %s", round, li.exit_code,
                       li.failed_rank, li.message);
        for (r = 0; r < 2; r++) {
            snprintf(path, sizeof path, "%s/disagree%d_rank%d.txt", fat5_test_tmpdir(T), round, r);
            FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1 << 16, &text, &len));
            FAT5_CHECK_MSG(T, strstr(text, "1 rank (1) run with other settings than rank 0") != NULL, "round %d, rank %d: %s",
                           round, r, text);
            fat5__free(ctx, text);
            text = NULL;
        }
    }
}

// fat5_launch's bookkeeping: workers that all exit 0; status 130 (a stop) that is not a failure;
// the first failure named, with a worker that never ends killed after the grace time; SIGTERM to
// the launcher passed on to every worker.
static void t_dist_launch(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_launch_info li;
    double t0;
    int round;
    for (round = 0; round < 4; round++) {
        fflush(stdout);
        t0 = fat5__now_s();
        FAT5_REQUIRE_OK(T, fat5_launch(ctx, 3, 1.0, &li));
        if (li.rank >= 0) {   // a worker: acts out the round, never returns into the runner
            if (round == 1) _exit(li.rank == 2 ? 130 : 0);
            if (round == 2) {
                if (li.rank == 1) {
                    ttr_sleep_us(100000);
                    _exit(7);
                }
                if (li.rank == 2) for (;;) sleep(1);   // silent: killed after the grace time
                _exit(0);
            }
            if (round == 3) {
                if (li.rank == 0) kill(getppid(), SIGTERM);
                for (;;) sleep(1);   // ends by the SIGTERM passed on
            }
            _exit(0);
        }
        FAT5_CHECK(T, li.world_size == 3 && li.rank == -1);
        if (round == 0) FAT5_CHECK(T, li.exit_code == 0 && li.failed_rank == -1);
        if (round == 1) FAT5_CHECK(T, li.exit_code == 130 && li.failed_rank == -1);
        if (round == 2) {
            FAT5_CHECK_MSG(T, li.exit_code == 7 && li.failed_rank == 1 && strstr(li.message, "exited with status 7"),
                           "exit %d, rank %d: %s", li.exit_code, li.failed_rank, li.message);
            FAT5_CHECK(T, fat5__now_s() - t0 < 10);
        }
        if (round == 3)
            FAT5_CHECK_MSG(T, li.exit_code == 128 + SIGTERM && li.failed_rank >= 0 && strstr(li.message, "signal 15"),
                           "exit %d, rank %d: %s", li.exit_code, li.failed_rank, li.message);
    }
    FAT5_CHECK(T, fat5_launch(ctx, 0, 1.0, &li) == FAT5_ERR_INVALID_ARG);
}

// The NCCL ranks' watchdog against stand-ins for NCCL's abort and error calls: its decisions on a
// board (a peer that failed: acted on only after the grace time, naming the peer; a peer whose
// process is gone: marked on the board; NCCL's asynchronous error; sums queued past
// dist_timeout: at once, marking this rank), its action (abort when the rank's thread is in no
// NCCL call, never inside one; held inside one past the grace time: on_held instead), and its
// thread, started and stopped by the comm as in a run: a held CUDA call freed by the abort, the
// reason reported by the next wait and sum, close joining it before NCCL goes.
#ifndef FAT5_NO_CUDA
static int wd_aborts, wd_destroys, wd_helds, wd_async;
static fat5__ncclComm_t wd_aborted_nc;
#if FAT5__THREADS
static fat5__comm *wd_comm;
static int wd_watch_on_at_abort = -1;
#endif
static char wd_held_msg[640];
static fat5__ncclResult_t wd_abort(fat5__ncclComm_t nc) {
    __atomic_add_fetch(&wd_aborts, 1, __ATOMIC_ACQ_REL);
    wd_aborted_nc = nc;
#if FAT5__THREADS
    if (wd_comm) wd_watch_on_at_abort = wd_comm->watch_on;
#endif
    return FAT5__NCCL_SUCCESS;
}
static fat5__ncclResult_t wd_destroy(fat5__ncclComm_t nc) {
    (void)nc;
    wd_destroys++;
    return FAT5__NCCL_SUCCESS;
}
static fat5__ncclResult_t wd_async_error(fat5__ncclComm_t nc, fat5__ncclResult_t *e) {
    (void)nc;
    *e = (fat5__ncclResult_t)__atomic_load_n(&wd_async, __ATOMIC_ACQUIRE);
    return FAT5__NCCL_SUCCESS;
}
static const char *wd_error_string(fat5__ncclResult_t r) { return r == 6 ? "remote process exited or there was a network error" : "?"; }
static void wd_held(fat5__comm *c, const char *msg) {
    (void)c;
    snprintf(wd_held_msg, sizeof wd_held_msg, "%s", msg);
    __atomic_add_fetch(&wd_helds, 1, __ATOMIC_ACQ_REL);
}
static void wd_reset(fat5__comm *c, fat5__board *b, fat5__ncclComm_t fake) {
    b->failed = b->claim = -1;
    b->why[0] = 0;
    b->pid[0] = b->pid[1] = (int32_t)getpid();
    c->nc = fake;
    c->aborted = c->joining = 0;
    c->abort_why[0] = 0;
    c->call_t0_us = c->queued_t0_us = 0;
    c->pending = 0;
    c->timeout_s = 900;
    wd_aborts = wd_destroys = wd_helds = wd_async = 0;
    wd_aborted_nc = NULL;
    wd_held_msg[0] = 0;
}
#if FAT5__THREADS
static int wd_wait_for(const int *flag, double s) {   // until *flag != 0, at most s seconds
    double t0 = fat5__now_s();
    while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) && fat5__now_s() - t0 < s) ttr_sleep_us(5000);
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}
#endif
#endif

static void t_dist_watchdog(fat5_test *T) {
#ifdef FAT5_NO_CUDA
    FAT5_SKIP(T, "the watchdog belongs to the NCCL transport (built with FAT5_NO_CUDA)");
#else
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__board *b = (fat5__board *)calloc(1, sizeof *b);
    fat5__comm *c = (fat5__comm *)fat5__calloc(ctx, 1, sizeof *c);
    int dummy = 0;
    fat5__ncclComm_t fake = (fat5__ncclComm_t)(void *)&dummy;   // never dereferenced: the calls are stand-ins
    double since = 0, t0;
    char msg[640];
    pid_t gone;
    FAT5_REQUIRE(T, b != NULL && c != NULL);
    c->ctx = ctx;
    c->rank = 0;
    c->world = 2;
    c->mode = FAT5__DIST_NCCL;
    c->be = &fat5__gpu_backend;   // its collectives: NCCL's (the fake one here)
    c->local = 1;
    c->board = b;
    c->timeout_s = 0.5;
    c->fds[0] = c->fds[1] = c->fds[2] = -1;
    c->nccl.f.ncclCommAbort = wd_abort;
    c->nccl.f.ncclCommDestroy = wd_destroy;
    c->nccl.f.ncclCommGetAsyncError = wd_async_error;
    c->nccl.f.ncclGetErrorString = wd_error_string;
    c->on_held = wd_held;
    b->world = 2;
    wd_reset(c, b, fake);
    // all well
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 100.0, &since, msg, sizeof msg) && since == 0);
    c->queued_t0_us = (int64_t)(100.0 * 1e6);   // the step's sums landed: the clock stops
    FAT5_CHECK(T, fat5__comm_grads_landed(c) == FAT5_OK && c->queued_t0_us == 0);
    // a peer failed: seen at once, acted on after the grace time (the rank's thread may act first)
    fat5__board_fail(b, 1, "killed by signal 9");
    fat5__board_fail(b, 0, "a later failure does not replace the first");
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 100.0, &since, msg, sizeof msg) && since == 100.0);
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 100.0 + 0.5 * FAT5__WATCH_GRACE_S, &since, msg, sizeof msg));
    FAT5_CHECK(T, fat5__comm_watch_once(c, 100.0 + FAT5__WATCH_GRACE_S, &since, msg, sizeof msg));
    FAT5_CHECK_MSG(T, strcmp(msg, "rank 0 stops: rank 1 failed: killed by signal 9") == 0, "%s", msg);
    // a peer's process that is gone: the board names it
    wd_reset(c, b, fake);
    since = 0;
    fflush(stdout);
    gone = fork();
    FAT5_REQUIRE(T, gone >= 0);
    if (gone == 0) _exit(0);
    FAT5_REQUIRE(T, waitpid(gone, NULL, 0) == gone);
    b->pid[1] = (int32_t)gone;
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 200.0, &since, msg, sizeof msg) && since == 200.0);
    FAT5_CHECK_MSG(T, b->failed == 1 && strstr(b->why, "is gone"), "failed %d: %s", (int)b->failed, b->why);
    FAT5_CHECK(T, fat5__comm_watch_once(c, 200.0 + FAT5__WATCH_GRACE_S, &since, msg, sizeof msg) &&
                  strstr(msg, "rank 0 stops: rank 1 failed: its process (pid"));
    // NCCL's asynchronous error: this rank fails, after the grace time
    wd_reset(c, b, fake);
    since = 0;
    wd_async = 6;
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 300.0, &since, msg, sizeof msg) && b->failed == 0);
    FAT5_CHECK(T, fat5__comm_watch_once(c, 300.0 + FAT5__WATCH_GRACE_S, &since, msg, sizeof msg) &&
                  strstr(msg, "rank 0 stops: NCCL error 6 (remote process exited"));
    // sums queued past dist_timeout: this rank fails, at once
    wd_reset(c, b, fake);
    since = 0;
    c->timeout_s = 0.5;
    c->queued_t0_us = (int64_t)(50.0 * 1e6);
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 50.4, &since, msg, sizeof msg) && b->failed == -1);
    FAT5_CHECK(T, fat5__comm_watch_once(c, 50.6, &since, msg, sizeof msg) && b->failed == 0 &&
                  strstr(msg, "rank 0 stops: an all-reduce made no progress for 0 s (dist_timeout)"));
    // ... and a join past dist_timeout says so
    wd_reset(c, b, NULL);
    since = 0;
    c->timeout_s = 0.5;
    c->joining = 1;
    c->queued_t0_us = (int64_t)(60.0 * 1e6);
    FAT5_CHECK(T, !fat5__comm_watch_once(c, 60.4, &since, msg, sizeof msg) && b->failed == -1);
    FAT5_CHECK_MSG(T, fat5__comm_watch_once(c, 60.6, &since, msg, sizeof msg) && b->failed == 0 &&
                   strstr(msg, "rank 0 stops: joining NCCL (ncclCommInitRank) took more than 0 s (dist_timeout)"), "%s", msg);
    // acting: never inside an NCCL call; held inside one past the grace time: on_held
    wd_reset(c, b, fake);
    c->call_t0_us = (int64_t)(10.0 * 1e6);
    FAT5_CHECK(T, !fat5__comm_watch_act(c, 10.0 + 0.5 * FAT5__WATCH_GRACE_S, "rank 0 stops: why") && wd_aborts == 0 &&
                  wd_helds == 0 && c->nc == fake && !c->aborted);
    FAT5_CHECK(T, fat5__comm_watch_act(c, 10.0 + FAT5__WATCH_GRACE_S, "rank 0 stops: why") && wd_aborts == 0 &&
                  wd_helds == 1 && strcmp(wd_held_msg, "rank 0 stops: why") == 0 && c->nc == fake);
    c->call_t0_us = 0;   // out of the call: aborted, once
    FAT5_CHECK(T, fat5__comm_watch_act(c, 20.0, "rank 0 stops: why") && wd_aborts == 1 && wd_aborted_nc == fake &&
                  c->nc == NULL && c->aborted && strcmp(c->abort_why, "rank 0 stops: why") == 0);
    FAT5_CHECK(T, fat5__comm_watch_act(c, 20.0, "another reason") && wd_aborts == 1 &&
                  strcmp(c->abort_why, "rank 0 stops: why") == 0);
    FAT5_CHECK(T, fat5__comm_sum(c, 0, 1, 0) == FAT5_ERR_STATE && strcmp(fat5_last_error(ctx), "rank 0 stops: why") == 0);
#if FAT5__THREADS
    // the thread, all well: it runs until stopped and does nothing
    wd_reset(c, b, fake);
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    ttr_sleep_us(100000);
    fat5__comm_watch_stop(c);
    FAT5_CHECK(T, !c->aborted && b->failed == -1 && wd_aborts == 0 && wd_helds == 0 && !c->watch_on);
    pthread_mutex_destroy(&c->nc_mu);
    c->mu_on = 0;
    // the rank's thread held in a CUDA call (not NCCL) while a peer fails: aborted after the grace
    // time, and the rank's next wait reports why
    wd_reset(c, b, fake);
    c->queued_t0_us = (int64_t)(fat5__now_s() * 1e6);
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    t0 = fat5__now_s();
    fat5__board_fail(b, 1, "killed by signal 9");
    FAT5_CHECK(T, wd_wait_for(&c->aborted, 10));
    FAT5_CHECK_MSG(T, fat5__now_s() - t0 >= FAT5__WATCH_GRACE_S && fat5__now_s() - t0 < FAT5__WATCH_GRACE_S + 8,
                   "aborted after %.2f s", fat5__now_s() - t0);
    fat5__comm_watch_stop(c);
    pthread_mutex_destroy(&c->nc_mu);
    c->mu_on = 0;
    FAT5_CHECK(T, wd_aborts == 1 && wd_helds == 0 && c->nc == NULL);
    c->pending = 1;
    FAT5_CHECK(T, fat5__comm_wait(c) == FAT5_ERR_STATE &&
                  strcmp(fat5_last_error(ctx), "rank 0 stops: rank 1 failed: killed by signal 9") == 0);
    // ... and so does the step's check after its sync, where the host did not wait for the sums
    // (fat5__comm_grads_end with a watchdog: the sums are incomplete); the sums' clock stops
    c->queued_t0_us = (int64_t)(fat5__now_s() * 1e6);
    FAT5_CHECK(T, fat5__comm_grads_landed(c) == FAT5_ERR_STATE && c->queued_t0_us == 0 &&
                  strcmp(fat5_last_error(ctx), "rank 0 stops: rank 1 failed: killed by signal 9") == 0);
    // the rank's side, against a running watchdog and a failed peer: inside a call (entered while
    // not aborted) nothing is aborted under it, even past the grace time; once out, the abort
    // comes; a call is then refused. The first call starts the sums' clock, a wait stops it.
    wd_reset(c, b, fake);
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    FAT5_CHECK(T, fat5__comm_call_enter(c) == fake && c->call_t0_us != 0 && c->queued_t0_us == c->call_t0_us);
    {
        int64_t q0 = c->queued_t0_us;
        fat5__comm_call_leave(c);
        FAT5_CHECK(T, c->call_t0_us == 0);
        t0 = fat5__now_s();
        fat5__board_fail(b, 1, "killed by signal 9");
        ttr_sleep_us(600000);   // trouble for 0.6 of the 1 s grace
        FAT5_CHECK(T, wd_aborts == 0 && !c->aborted && fat5__comm_call_enter(c) == fake && c->queued_t0_us == q0);
    }
    ttr_sleep_us(600000);   // trouble for 1.2 s, the call for 0.6 s
    FAT5_CHECK_MSG(T, wd_aborts == 0 && !c->aborted && c->nc == fake && wd_helds == 0,
                   "inside the call after %.2f s: aborts %d, helds %d", fat5__now_s() - t0, wd_aborts, wd_helds);
    fat5__comm_call_leave(c);
    FAT5_CHECK(T, wd_wait_for(&wd_aborts, 10) && c->aborted && c->nc == NULL && wd_helds == 0);
    FAT5_CHECK(T, fat5__comm_call_enter(c) == NULL && c->call_t0_us == 0);
    fat5__comm_watch_stop(c);
    pthread_mutex_destroy(&c->nc_mu);
    c->mu_on = 0;
    c->pending = 0;
    FAT5_CHECK(T, fat5__comm_wait(c) == FAT5_OK && c->queued_t0_us == 0);
    // held inside an NCCL call while the sums outlast dist_timeout (0.2 s): never aborted under
    // the call; on_held after the grace time
    wd_reset(c, b, fake);
    c->timeout_s = 0.2;
    t0 = fat5__now_s();
    c->call_t0_us = c->queued_t0_us = (int64_t)(t0 * 1e6);
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    FAT5_CHECK(T, wd_wait_for(&wd_helds, 10));
    FAT5_CHECK_MSG(T, fat5__now_s() - t0 >= FAT5__WATCH_GRACE_S && fat5__now_s() - t0 < FAT5__WATCH_GRACE_S + 8,
                   "held after %.2f s", fat5__now_s() - t0);
    fat5__comm_watch_stop(c);
    pthread_mutex_destroy(&c->nc_mu);
    c->mu_on = 0;
    FAT5_CHECK_MSG(T, wd_aborts == 0 && wd_helds == 1 && c->nc == fake && b->failed == 0 &&
                   strstr(wd_held_msg, "rank 0 stops: an all-reduce made no progress"),
                   "aborts %d, helds %d, failed %d: %s", wd_aborts, wd_helds, (int)b->failed, wd_held_msg);
    // the join (no communicator yet) held past dist_timeout: on_held after the grace time, no
    // abort; the communicator it then makes becomes the rank's, the join's clock stopped
    wd_reset(c, b, NULL);
    c->timeout_s = 0.2;
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    t0 = fat5__now_s();
    FAT5_CHECK(T, fat5__comm_join_enter(c) && c->joining && c->call_t0_us != 0 && c->queued_t0_us == c->call_t0_us);
    FAT5_CHECK(T, wd_wait_for(&wd_helds, 10));
    FAT5_CHECK_MSG(T, fat5__now_s() - t0 >= FAT5__WATCH_GRACE_S && fat5__now_s() - t0 < FAT5__WATCH_GRACE_S + 8,
                   "held after %.2f s", fat5__now_s() - t0);
    fat5__comm_watch_stop(c);
    FAT5_CHECK_MSG(T, wd_aborts == 0 && wd_helds == 1 && !c->aborted && b->failed == 0 &&
                   strstr(wd_held_msg, "rank 0 stops: joining NCCL (ncclCommInitRank) took more than 0 s"),
                   "aborts %d, helds %d, failed %d: %s", wd_aborts, wd_helds, (int)b->failed, wd_held_msg);
    FAT5_CHECK(T, fat5__comm_join_leave(c, fake) && c->nc == fake && !c->joining && c->call_t0_us == 0 &&
                  c->queued_t0_us == 0 && wd_aborts == 0);
    // a peer that fails during the join: on_held after the grace time, naming it
    wd_reset(c, b, NULL);
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    FAT5_CHECK(T, fat5__comm_join_enter(c));
    t0 = fat5__now_s();
    fat5__board_fail(b, 1, "killed by signal 9");
    FAT5_CHECK(T, wd_wait_for(&wd_helds, 10));
    FAT5_CHECK_MSG(T, fat5__now_s() - t0 >= FAT5__WATCH_GRACE_S && fat5__now_s() - t0 < FAT5__WATCH_GRACE_S + 8,
                   "held after %.2f s", fat5__now_s() - t0);
    fat5__comm_watch_stop(c);
    FAT5_CHECK_MSG(T, wd_aborts == 0 && strcmp(wd_held_msg, "rank 0 stops: rank 1 failed: killed by signal 9") == 0,
                   "aborts %d: %s", wd_aborts, wd_held_msg);
    // between two tries (the first failed) past dist_timeout: the watchdog gives up, the next try
    // is refused with why, and a communicator that a try made anyway is aborted
    wd_reset(c, b, NULL);
    c->timeout_s = 0.2;
    FAT5_CHECK(T, fat5__comm_join_enter(c));
    FAT5_CHECK(T, !fat5__comm_join_leave(c, NULL) && c->joining && c->call_t0_us == 0 && c->queued_t0_us != 0);
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    FAT5_CHECK(T, wd_wait_for(&c->aborted, 10));
    fat5__comm_watch_stop(c);
    FAT5_CHECK(T, wd_aborts == 0 && wd_helds == 0 && c->nc == NULL);
    FAT5_CHECK(T, !fat5__comm_join_enter(c) && c->call_t0_us == 0);
    FAT5_CHECK(T, fat5__comm_aborted_err(c) == FAT5_ERR_STATE &&
                  strstr(fat5_last_error(ctx), "rank 0 stops: joining NCCL (ncclCommInitRank) took more than"));
    FAT5_CHECK(T, !fat5__comm_join_leave(c, fake) && c->nc == NULL && wd_aborts == 1 && wd_aborted_nc == fake);
    pthread_mutex_destroy(&c->nc_mu);
    c->mu_on = 0;
    // close after a failure: the watchdog is joined before NCCL is aborted
    wd_reset(c, b, fake);
    c->timeout_s = 900;
    c->board = NULL;   // the test's board is not mapped; close leaves it
    FAT5_REQUIRE_OK(T, fat5__comm_watch_start(c));
    c->failed = 1;
    wd_comm = c;
    fat5__comm_close(c);   // frees c
    wd_comm = NULL;
    FAT5_CHECK(T, wd_aborts == 1 && wd_destroys == 0 && wd_watch_on_at_abort == 0);
    c = NULL;
#else
    (void)t0;
#endif
    if (c) fat5__free(ctx, c);
    free(b);
#endif
}

// A rendezvous file a failed run left (its board marks a failure): a joining rank waits for rank 0
// to replace it and takes the new one; when the path stays gone for 1 s (the failed run's rank 0
// removed it) it stops, naming the failure; when nothing replaces it, at the timeout. A file is
// told replaced by its NCCL id too (a shared filesystem may reuse an inode number); rank 0 removes
// only its own file; CPU ranks checking in stop at a failure. With NCCL (stand-ins for its
// calls): the join under the watchdog, again after a failed try once rank 0 has replaced the
// file, and a join that outlasts dist_timeout; the watchdog's last resort in rank 0.
static fat5__comm *rv_comm(fat5_ctx *ctx, int rank, double timeout_s) {
    fat5__comm *c = (fat5__comm *)fat5__calloc(ctx, 1, sizeof *c);
    if (!c) return NULL;
    c->ctx = ctx;
    c->rank = rank;
    c->world = 2;
    c->timeout_s = timeout_s;
    c->fds[0] = c->fds[1] = c->fds[2] = -1;
    return c;
}
static void rv_unmap(fat5__comm *c) {
    if (c->board) munmap((void *)c->board, c->board_bytes);
    c->board = NULL;
}
// rank 0 of a new run publishes a board with NCCL id byte `tag` at path (and leaves it there)
static int rv_publish(fat5_ctx *ctx, const char *path, unsigned char tag) {
    unsigned char id[128];
    fat5__comm *c0 = rv_comm(ctx, 0, 5);
    int ok;
    memset(id, tag, sizeof id);
    ok = c0 && fat5__comm_file(c0, path, fat5__board_bytes(2, 0), id) == FAT5_OK;
    if (c0) rv_unmap(c0), fat5__free(ctx, c0);
    return ok;
}
// in a child, after `delay` s: publish a new board (tag != 0) or remove the path (tag 0)
static pid_t rv_later(fat5_ctx *ctx, const char *path, double delay, unsigned char tag) {
    pid_t pid;
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        ttr_sleep_us((long)(delay * 1e6));
        _exit(tag ? !rv_publish(ctx, path, tag) : unlink(path) != 0);
    }
    return pid;
}
// the current board at path marked failed by rank r, as a killed run leaves it
static void rv_fail(fat5_ctx *ctx, const char *path, int r, const char *why) {
    fat5__comm *c = rv_comm(ctx, 1, 5);
    if (c && fat5__comm_file(c, path, fat5__board_bytes(2, 0), NULL) == FAT5_OK) fat5__board_fail(c->board, r, why);
    if (c) rv_unmap(c), fat5__free(ctx, c);
}
#ifndef FAT5_NO_CUDA
static int rv_inits;
static double rv_sleep_s;   // each try of the join takes this long
static const char *rv_path;
static fat5_ctx *rv_ctx;
static int dummy_nc;
// NCCL's join, stood in: id 'A' (the killed run's) fails after rank 0 has replaced the file with
// id 'B', which joins; id 'H' holds the caller until the watchdog has given up
static fat5__ncclResult_t rv_init(fat5__ncclComm_t *comm, int nranks, fat5__ncclUniqueId id, int rank) {
    (void)nranks, (void)rank;
    rv_inits++;
    if (rv_sleep_s > 0) ttr_sleep_us((long)(rv_sleep_s * 1e6));
    if (id.internal[0] == 'A') {
        rv_publish(rv_ctx, rv_path, 'B');
        return (fat5__ncclResult_t)6;
    }
#if FAT5__THREADS
    if (id.internal[0] == 'H') wd_wait_for(&wd_helds, 20);
#endif
    *comm = (fat5__ncclComm_t)(void *)&dummy_nc;
    return FAT5__NCCL_SUCCESS;
}
#endif

static void t_dist_rendezvous(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[600];
    size_t bytes = fat5__board_bytes(2, 0);
    fat5__comm *c = rv_comm(ctx, 1, 10);
    struct stat sb;
    double t0, took;
    pid_t pid;
    int status = -1;
    FAT5_REQUIRE(T, c != NULL);
    snprintf(path, sizeof path, "%s/run.rdv", fat5_test_tmpdir(T));
    // a fresh board: joined at once
    FAT5_REQUIRE(T, rv_publish(ctx, path, 'A'));
    FAT5_REQUIRE_OK(T, fat5__comm_file(c, path, bytes, NULL));
    FAT5_CHECK(T, c->board->id_ready && c->board->nccl_id[0] == 'A' && c->board->failed == -1);
    rv_unmap(c);
    // a killed run's board, replaced 0.5 s later: the new one, not the old
    rv_fail(ctx, path, 0, "killed by signal 9");
    t0 = fat5__now_s();
    pid = rv_later(ctx, path, 0.5, 'B');
    FAT5_REQUIRE(T, pid > 0);
    FAT5_CHECK_MSG(T, fat5__comm_file(c, path, bytes, NULL) == FAT5_OK, "%s", fat5_last_error(ctx));
    took = fat5__now_s() - t0;
    FAT5_CHECK(T, waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FAT5_CHECK_MSG(T, took >= 0.5 && c->board && c->board->nccl_id[0] == 'B' && c->board->failed == -1,
                   "after %.2f s", took);
    // replaced: another file, or the same inode with another NCCL id; not when unchanged
    FAT5_CHECK(T, !fat5__comm_file_replaced(c));
    {
        int fd = open(path, O_RDWR);
        unsigned char x = 'C';
        FAT5_REQUIRE(T, fd >= 0);
        FAT5_CHECK(T, pwrite(fd, &x, 1, (off_t)offsetof(fat5__board, nccl_id) + 5) == 1);
        close(fd);
        FAT5_CHECK(T, c->board->nccl_id[5] == 'C' && !fat5__comm_file_replaced(c));   // the same mapping sees it
        c->board->nccl_id[5] = 'B';
    }
    {
        fat5__comm *o = rv_comm(ctx, 1, 5);   // a copy of the mapping's id that the file no longer holds
        fat5__board *copy = (fat5__board *)calloc(1, sizeof *copy);
        FAT5_REQUIRE(T, o != NULL && copy != NULL);
        *copy = *c->board;
        copy->nccl_id[7] = 'Z';
        o->board = copy;
        snprintf(o->file, sizeof o->file, "%s", path);
        o->file_ino = c->file_ino;
        o->file_dev = c->file_dev;
        FAT5_CHECK(T, fat5__comm_file_replaced(o));
        copy->nccl_id[7] = c->board->nccl_id[7];
        FAT5_CHECK(T, !fat5__comm_file_replaced(o));
        FAT5_REQUIRE(T, rv_publish(ctx, path, 'D'));
        FAT5_CHECK(T, fat5__comm_file_replaced(o) && fat5__comm_file_replaced(c));
        o->board = NULL;
        free(copy);
        // rank 0 removes its own file only: not one a new run has published since
        o->rank = 0;
        fat5__comm_unlink_own(o);
        FAT5_CHECK(T, stat(path, &sb) == 0 && (unsigned long long)sb.st_ino != c->file_ino);
        o->file_ino = (unsigned long long)sb.st_ino;
        o->file_dev = (unsigned long long)sb.st_dev;
        fat5__comm_unlink_own(o);
        FAT5_CHECK(T, stat(path, &sb) != 0 && errno == ENOENT);
        fat5__free(ctx, o);
    }
    rv_unmap(c);
    // a failed run's board whose rank 0 then removed it: stops, naming the failure, 1 s after
    FAT5_REQUIRE(T, rv_publish(ctx, path, 'A'));
    rv_fail(ctx, path, 0, "out of device memory");
    t0 = fat5__now_s();
    pid = rv_later(ctx, path, 1.0, 0);
    FAT5_REQUIRE(T, pid > 0);
    FAT5_CHECK(T, fat5__comm_file(c, path, bytes, NULL) == FAT5_ERR_STATE);
    took = fat5__now_s() - t0;
    FAT5_CHECK(T, waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "rank 1 stops: the run at rendezvous") &&
                   strstr(fat5_last_error(ctx), "has stopped (rank 0 failed: out of device memory)") && took >= 2.0 &&
                   took < 9, "after %.2f s: %s", took, fat5_last_error(ctx));
    FAT5_CHECK(T, c->board == NULL);
    // CPU ranks checking in: a rank that failed meanwhile stops them
    {
        fat5__comm *h0 = rv_comm(ctx, 0, 10);
        size_t hb = fat5__board_bytes(2, 1);
        FAT5_REQUIRE(T, h0 != NULL);
        h0->mode = FAT5__DIST_HOST;
        FAT5_REQUIRE_OK(T, fat5__comm_file(h0, path, hb, NULL));
        fat5__board_fail(h0->board, 1, "cannot read the data");
        t0 = fat5__now_s();
        FAT5_CHECK(T, fat5__comm_checkin(h0, path, hb) == FAT5_ERR_STATE &&
                      strcmp(fat5_last_error(ctx), "rank 0 stops: rank 1 failed: cannot read the data") == 0 &&
                      fat5__now_s() - t0 < 5);
        rv_unmap(h0);
        (void)unlink(path);
        fat5__free(ctx, h0);
    }
    // ... that nobody replaces: the timeout, saying why
    FAT5_REQUIRE(T, rv_publish(ctx, path, 'A'));
    rv_fail(ctx, path, 1, "killed by signal 9");
    c->timeout_s = 1;
    t0 = fat5__now_s();
    FAT5_CHECK(T, fat5__comm_file(c, path, bytes, NULL) == FAT5_ERR_STATE);
    took = fat5__now_s() - t0;
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "is a failed run's (rank 1 failed: killed by signal 9), and rank 0 "
                             "did not replace it within 1 s") && took >= 1 && took < 8,
                   "after %.2f s: %s", took, fat5_last_error(ctx));
#ifndef FAT5_NO_CUDA
    {
        fat5__ncclUniqueId uid;
        // the join: the killed run's id fails, rank 0 replaces the file, the new id joins. Each
        // try takes 1.2 s against a dist_timeout of 2 s: the new id's join has a clock of its own
        c->mode = FAT5__DIST_NCCL;
    c->be = &fat5__gpu_backend;   // its collectives: NCCL's (the fake one here)
        c->timeout_s = 2;
        rv_sleep_s = 1.2;
        c->nccl.f.ncclCommInitRank = rv_init;
        c->nccl.f.ncclCommAbort = wd_abort;
        c->nccl.f.ncclCommGetAsyncError = wd_async_error;
        c->nccl.f.ncclGetErrorString = wd_error_string;
        c->on_held = wd_held;
        wd_aborts = wd_helds = wd_async = 0;
        rv_path = path;
        rv_ctx = ctx;
        FAT5_REQUIRE(T, rv_publish(ctx, path, 'A'));
        FAT5_REQUIRE_OK(T, fat5__comm_file(c, path, bytes, NULL));
        memcpy(uid.internal, c->board->nccl_id, sizeof uid.internal);
        rv_inits = 0;
        FAT5_CHECK_MSG(T, fat5__comm_join(c, uid, path, bytes) == FAT5_OK, "%s", fat5_last_error(ctx));
        rv_sleep_s = 0;
        FAT5_CHECK_MSG(T, rv_inits == 2 && c->nc == (fat5__ncclComm_t)(void *)&dummy_nc && c->board &&
                       c->board->nccl_id[0] == 'B' && c->board->failed == -1 && !c->joining && c->call_t0_us == 0 &&
                       c->queued_t0_us == 0 && wd_aborts == 0 && wd_helds == 0, "inits %d, helds %d: %s", rv_inits,
                       wd_helds, wd_held_msg);
#if FAT5__THREADS
        FAT5_CHECK(T, c->watch_on);
        fat5__comm_watch_stop(c);
        // a join held past dist_timeout (0.3 s): on_held (here it returns, and the join goes on)
        c->nc = NULL;
        c->timeout_s = 0.3;
        memset(uid.internal, 'H', sizeof uid.internal);
        t0 = fat5__now_s();
        FAT5_CHECK_MSG(T, fat5__comm_join(c, uid, path, bytes) == FAT5_OK, "%s", fat5_last_error(ctx));
        took = fat5__now_s() - t0;
        fat5__comm_watch_stop(c);
        FAT5_CHECK_MSG(T, wd_helds == 1 && wd_aborts == 0 && took >= FAT5__WATCH_GRACE_S && took < FAT5__WATCH_GRACE_S + 10 &&
                       strstr(wd_held_msg, "rank 1 stops: joining NCCL (ncclCommInitRank) took more than 0 s (dist_timeout)"),
                       "after %.2f s, helds %d: %s", took, wd_helds, wd_held_msg);
#endif
#if FAT5__THREADS
        if (c->mu_on) pthread_mutex_destroy(&c->nc_mu);
#endif
        // the watchdog's last resort in rank 0: says why, removes the rendezvous file, status 1
        FAT5_REQUIRE(T, stat(path, &sb) == 0);
        fflush(stdout);
        pid = fork();
        FAT5_REQUIRE(T, pid >= 0);
        if (pid == 0) {
            FILE *quiet = freopen("/dev/null", "w", stderr);
            (void)quiet;
            c->rank = 0;
            snprintf(c->file, sizeof c->file, "%s", path);
            fat5__run_held_exit(c, "rank 0 stops: why");
            _exit(3);
        }
        FAT5_CHECK(T, waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 1);
        FAT5_CHECK(T, stat(path, &sb) != 0 && errno == ENOENT);
    }
#endif
    rv_unmap(c);
    (void)unlink(path);
    fat5__free(ctx, c);
}

#define FAT5_TESTS_TRAIN(X) X(train_options) X(train_learns) X(train_metrics_full_disk) X(train_resave_crash) X(train_one_per_dir) X(train_resume_checks) X(train_resume_bitwise) X(optim_adafactor_resume) X(optim_resume_other_optimizer) X(train_kill9_during_save) \
    X(train_rejects) X(train_skips_nonfinite) X(train_init_from_hf) X(train_dist_options) X(train_balance) X(train_two_ranks) X(train_save_after_failure) X(train_ranks_disagree) X(dist_launch) \
    X(dist_watchdog) X(dist_rendezvous)
