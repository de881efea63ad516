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
    snprintf(c.data, sizeof c.data, "%s", data);
    snprintf(c.output_dir, sizeof c.output_dir, "%s", out);
    return c;
}

static void t_train_options(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c = fat5_train_config_default();
    const char *json = "{\"learning_rate\": 2e-3, \"lr_scheduler_type\": \"wsd\", \"data\": [\"a.tok\", \"b.tok\"],"
                       " \"model\": \"tiny\", \"d_model\": 64, \"gradient_accumulation_steps\": 3}";
    FAT5_REQUIRE_OK(T, fat5_train_config_from_json(ctx, &c, json, strlen(json)));
    FAT5_CHECK(T, c.optim.lr == 2e-3 && c.optim.sched == FAT5_SCHED_WSD && c.grad_accum == 3);
    FAT5_CHECK(T, strcmp(c.data, "a.tok,b.tok") == 0 && c.model.d_model == 64 && c.model.num_layers == 2);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "learnig_rate", "1") == FAT5_ERR_INVALID_ARG &&
                  strstr(fat5_last_error(ctx), "unknown training option 'learnig_rate'"));
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "learning_rate", "-1") == FAT5_ERR_INVALID_ARG &&
                  strstr(fat5_last_error(ctx), "learning_rate: bad value '-1'"));
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "max_steps", "2.5") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "lr_scheduler_type", "cosinus") == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "model", "/no/such/config.json") != FAT5_OK &&
                  strstr(fat5_last_error(ctx), "not a preset"));
    FAT5_CHECK(T, fat5_train_config_from_json(ctx, &c, "{\"seed\": [1]}", 13) == FAT5_ERR_FORMAT);
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

// every parameter, in table order, into w (fat5_model_num_params floats)
static fat5_status ttr_weights(fat5_model *m, float *w) {
    int64_t off = 0;
    int k;
    fat5_status st = FAT5_OK;
    for (k = 0; k < fat5_model_num_tensors(m) && st == FAT5_OK; k++) {
        fat5_tensor_info ti = {0};
        if ((st = fat5_model_tensor_info(m, k, &ti)) == FAT5_OK) st = fat5_model_get_param(m, ti.name, w + off, ti.numel);
        off += ti.numel;
    }
    return st;
}

// N steps, a checkpoint, a new process-like trainer resuming, M steps == N + M steps straight;
// on ctx's device (the GPU: deterministic backward, and batches drawn on the host thread)
static void ttr_resume_bitwise(fat5_test *T, fat5_ctx *ctx) {
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
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 8; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        straight[i] = r.loss;
    }
    n = fat5_model_num_params(fat5_train_model(t));
    wa = (float *)malloc((size_t)n * 4);
    wb = (float *)malloc((size_t)n * 4);
    FAT5_REQUIRE(T, wa && wb);
    FAT5_REQUIRE_OK(T, ttr_weights(fat5_train_model(t), wa));
    fat5_train_destroy(t);
    t = NULL;

    // the same run, stopped after step 5 (a checkpoint written on demand), then resumed
    snprintf(c.output_dir, sizeof c.output_dir, "%s", b);
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
    snprintf(c.resume, sizeof c.resume, "%s", b);
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

static void t_train_resume_bitwise(fat5_test *T) { ttr_resume_bitwise(T, fat5_test_ctx(T)); }

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
            if (round > 0) snprintf(cr.resume, sizeof cr.resume, "%s", out);
            if (fat5_ctx_create(&cc, &cx) != FAT5_OK || fat5_train_create(cx, &cr, &t) != FAT5_OK) {
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
            FAT5_CHECK_MSG(T, fat5_st_open(ctx, p, &f) == FAT5_OK, "round %d: %s", round, fat5_last_error(ctx));
            fat5_st_close(f);
        }
    }
    printf("  %d of 6 kills interrupted a save\n", kills_mid_save);
    FAT5_CHECK_MSG(T, kills_mid_save > 0, "no kill landed inside a save: the test did not test it");
}

// Bad inputs: clear errors, and a good checkpoint is never written over.
static void t_train_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], p[700];
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
    snprintf(d.resume, sizeof d.resume, "%s", out);
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
        snprintf(d.resume, sizeof d.resume, "%s", out);
        snprintf(d.data, sizeof d.data, "%s", other);
        FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "other data"), "%s", fat5_last_error(ctx));
    }
    FAT5_REQUIRE(T, stat(p, &after) == 0);
    FAT5_CHECK_MSG(T, before.st_mtime == after.st_mtime && before.st_size == after.st_size && before.st_ino == after.st_ino,
                   "the good checkpoint was rewritten");
    // not a checkpoint
    d = c;
    snprintf(d.resume, sizeof d.resume, "%s", fat5_test_tmpdir(T));
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_IO && strstr(fat5_last_error(ctx), "neither a checkpoint"));
    // no data, missing data, a budget too small for one example, a model the config cannot make
    d = c;
    d.data[0] = 0;
    FAT5_CHECK(T, fat5_train_create(ctx, &d, &t) == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(ctx), "no data"));
    d = c;
    snprintf(d.data, sizeof d.data, "%s/missing.tok", fat5_test_tmpdir(T));
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
    n = fat5_model_num_params(fat5_train_model(t));
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
    snprintf(c.init, sizeof c.init, "tests/data/t5_v10_relu_tied");
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
    char out[600];
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
    snprintf(c.rendezvous, sizeof c.rendezvous, "launch:x");
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && !t &&
                  strstr(fat5_last_error(ctx), "expected launch:SHM:READ:WRITE"));
    snprintf(c.rendezvous, sizeof c.rendezvous, "NCCL_COMM_ID");
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_INVALID_ARG && !t &&
                  strstr(fat5_last_error(ctx), "GPU ranks (NCCL) only"));
    // rank 1 alone with a rendezvous file: rank 0 never creates it, and the wait ends
    snprintf(c.rendezvous, sizeof c.rendezvous, "%s/never.rdv", fat5_test_tmpdir(T));
    c.dist_timeout_s = 1;
    FAT5_CHECK(T, fat5_train_create(ctx, &c, &t) == FAT5_ERR_STATE && !t &&
                  strstr(fat5_last_error(ctx), "did not appear"));
}

// The step's examples evened across ranks: 3 ranks x 2 micro-batches drawn from the sampler,
// balanced, and rebuilt. Every micro-batch stays within the budgets and non-empty, the rebuilt
// micro-batches hold exactly the drawn examples (each once, ids and labels intact, in drawn order),
// the label counts and FLOPs add up, the busiest rank's share shrinks, and a second drawing of the
// same stream is exchanged the same way.
static void t_train_balance(fat5_test *T) {
    enum { W = 3, K = 2, N = W * K };
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 8);
    fat5_tokens *tok = NULL;
    fat5_ul2 *s = NULL;
    fat5_ul2_config u = fat5_ul2_config_default();
    fat5_model m;
    fat5_trainer tr[2];
    fat5__tbatch drawn[N], got[N];
    int32_t first_bins[4096];
    double before = 0, after = 0, cost = 0, cost_after = 0, rebuilt = 0;
    int run, i, w;
    size_t j;
    FAT5_REQUIRE(T, data != NULL);
    FAT5_REQUIRE_OK(T, fat5_tokens_open(ctx, &data, 1, &tok));
    memset(&m, 0, sizeof m);
    FAT5_REQUIRE(T, fat5__model_preset("fat5-small", &m.cfg));
    memset(tr, 0, sizeof tr);
    memset(drawn, 0, sizeof drawn);
    memset(got, 0, sizeof got);
    u.enc_tokens = 400;
    u.dec_tokens = 160;
    u.max_enc_len = 64;
    u.max_dec_len = 48;
    u.sentinel_first = 383;
    u.n_sentinels = 100;
    u.seed = 7;
    for (run = 0; run < 2; run++) {
        fat5_trainer *t = &tr[run];
        fat5__tpool *p = &t->pool;
        fat5_batch b;
        t->dctx = ctx;
        t->m = &m;
        t->world = W;
        t->cfg.grad_accum = K;
        p->bin_e = (int64_t *)calloc(3 * N, sizeof(int64_t));
        p->bin_d = p->bin_e + N;
        p->bin_n = p->bin_e + 2 * N;
        p->rank_cost = (double *)calloc(W, sizeof(double));
        FAT5_REQUIRE(T, p->bin_e && p->rank_cost);
        FAT5_REQUIRE_OK(T, fat5_ul2_create(ctx, &u, tok, &s));
        for (i = 0; i < N; i++) {
            FAT5_REQUIRE_OK(T, fat5_ul2_next_batch(s, &b));
            if (run == 0) FAT5_REQUIRE_OK(T, fat5__tbatch_copy(ctx, &drawn[i], &b));
            FAT5_REQUIRE_OK(T, fat5__tpool_add(t, &b, i));
        }
        fat5_ul2_destroy(s);
        s = NULL;
        for (w = 0; w < W; w++) cost += run == 0 ? p->rank_cost[w] : 0;
        if (run == 0) before = fat5__tpool_spread(p, W);
        fat5__tpool_balance(p, W, K, u.enc_tokens, u.dec_tokens);
        FAT5_REQUIRE(T, p->n_ex <= sizeof first_bins / sizeof first_bins[0]);
        if (run == 1) {   // the same exchanges
            for (j = 0; j < p->n_ex && p->ex[j].bin == first_bins[j]; j++) {}
            FAT5_CHECK_MSG(T, j == p->n_ex && p->n_ex == tr[0].pool.n_ex, "example %zu differs", j);
            break;
        }
        for (j = 0; j < p->n_ex; j++) first_bins[j] = p->ex[j].bin;
        after = fat5__tpool_spread(p, W);
        for (w = 0; w < W; w++) cost_after += p->rank_cost[w];
        for (i = 0; i < N; i++) {
            int64_t e = 0, d = 0, n = 0, lab = 0;
            for (j = 0; j < p->n_ex; j++)
                if (p->ex[j].bin == i) e += p->ex[j].ne, d += p->ex[j].nd, n++, lab += p->ex[j].n_lab;
            FAT5_CHECK_MSG(T, n >= 1 && e <= u.enc_tokens && d <= u.dec_tokens && e == p->bin_e[i] &&
                                  d == p->bin_d[i] && n == p->bin_n[i],
                           "micro-batch %d: %lld examples, %lld / %lld tokens", i, (long long)n, (long long)e,
                           (long long)d);
            FAT5_REQUIRE_OK(T, fat5__tbatch_from_pool(ctx, &got[i], p, i));
            FAT5_CHECK(T, got[i].b.n_seq == n && got[i].b.n_enc_tokens == e && got[i].b.n_dec_tokens == d &&
                              got[i].b.enc_cu_seqlens[n] == e && got[i].b.dec_cu_seqlens[n] == d);
            rebuilt += fat5__batch_flops(&m.cfg, &got[i].b);
            {
                int64_t l2 = 0, q;
                for (q = 0; q < d; q++) l2 += got[i].b.labels[q] != -100;
                FAT5_CHECK(T, l2 == lab);
            }
        }
    }
    FAT5_CHECK_MSG(T, after < before && after < 1.05, "the busiest rank's share: %.4f before, %.4f after", before, after);
    FAT5_CHECK_MSG(T, fabs(cost_after - cost) <= 1e-9 * cost && fabs(rebuilt - cost) <= 1e-9 * cost,
                   "FLOPs: drawn %.6g, kept by the exchanges %.6g, of the rebuilt micro-batches %.6g", cost, cost_after,
                   rebuilt);
    {   // every drawn example once in the rebuilt micro-batches, in the order drawn
        int64_t total = 0, found = 0, q;
        int64_t last[N];
        for (i = 0; i < N; i++) last[i] = -1;
        for (i = 0; i < N; i++) total += drawn[i].b.n_seq;
        FAT5_CHECK(T, total == (int64_t)tr[0].pool.n_ex);
        for (i = 0; i < N; i++)
            for (q = 0; q < drawn[i].b.n_seq; q++) {   // example number `order` of the drawing
                const fat5_batch *a = &drawn[i].b;
                int32_t ae = a->enc_cu_seqlens[q], ne = a->enc_cu_seqlens[q + 1] - ae;
                int32_t ad = a->dec_cu_seqlens[q], nd = a->dec_cu_seqlens[q + 1] - ad;
                int64_t order = 0, at = 0, z;
                int g;
                for (g = 0; g < i; g++) order += drawn[g].b.n_seq;
                order += q;
                g = first_bins[order];
                for (z = 0; z < order; z++) at += first_bins[z] == g;   // its place in micro-batch g
                {
                    const fat5_batch *c = &got[g].b;
                    int32_t ce = c->enc_cu_seqlens[at], cd = c->dec_cu_seqlens[at];
                    if (c->enc_cu_seqlens[at + 1] - ce == ne && c->dec_cu_seqlens[at + 1] - cd == nd &&
                        memcmp(c->enc_tokens + ce, a->enc_tokens + ae, (size_t)ne * 4) == 0 &&
                        memcmp(c->labels + cd, a->labels + ad, (size_t)nd * 4) == 0 && at > last[g])
                        found++;
                    last[g] = at;
                }
            }
        FAT5_CHECK_MSG(T, found == total, "%lld of %lld examples found intact", (long long)found, (long long)total);
    }
    for (run = 0; run < 2; run++) {
        fat5__tpool *p = &tr[run].pool;
        fat5__free(ctx, p->ids);
        fat5__free(ctx, p->ex);
        fat5__free(ctx, p->hx);
        fat5__free(ctx, p->ly);
        free(p->bin_e);
        free(p->rank_cost);
    }
    for (i = 0; i < N; i++) {
        fat5__free(ctx, drawn[i].buf);
        fat5__free(ctx, got[i].buf);
    }
    fat5_tokens_close(tok);
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
        snprintf(c.rendezvous, sizeof c.rendezvous, "%s", li.rendezvous);
        if (fat5_ctx_create(&cc, &cx) == FAT5_OK && fat5_train_create(cx, &c, &t) == FAT5_OK) {
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
    snprintf(c.output_dir, sizeof c.output_dir, "%s", out1);
    c.grad_accum = 2;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 4 && fat5_train_step(t, &r) == FAT5_OK; i++)
        FAT5_CHECK_MSG(T, fabs(r.loss - l2[i]) <= 1e-5 * l2[i], "step %d: one rank %.7f, two ranks %.7f", i + 1, r.loss,
                       l2[i]);
    FAT5_CHECK(T, i == 4);
    fat5_train_destroy(t);
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
                    nanosleep(&(struct timespec){0, 100000000}, NULL);
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

#define FAT5_TESTS_TRAIN(X) X(train_options) X(train_learns) X(train_resume_bitwise) X(train_kill9_during_save) \
    X(train_rejects) X(train_skips_nonfinite) X(train_init_from_hf) X(train_dist_options) X(train_balance) X(train_two_ranks) X(dist_launch)
