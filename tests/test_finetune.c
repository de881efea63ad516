// test_finetune.c — section [9.3]: fine-tuning on (input, target) pairs, the training loop's task
// mode. The batches (every row once an epoch, budgets, length buckets, the order by seed and
// epoch), a resume mid-epoch against the uninterrupted run (weights bit for bit and the batches
// after), the held-out split, a tiny byte-level model learning a toy mapping to an exact match of
// 0.9, the best checkpoint against save_total_limit, the predictions file, bad inputs, and a
// pretokenized pairs file streamed from disk training exactly as its text file does.

#define FAT5_TESTS_FINETUNE(X) X(finetune_batches) X(finetune_resume_bitwise) X(finetune_split) \
    X(finetune_learns) X(finetune_best) X(finetune_errors) X(finetune_pretokenized)

// a toy row: a word of 2 to 4 letters a..f and its target (the word reversed, or copied)
static void tft_word(uint64_t *s, char *w) {
    int n, i;
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    n = 2 + (int)((*s >> 33) % 3);
    for (i = 0; i < n; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (char)('a' + (*s >> 33) % 6);
    }
    w[n] = 0;
}

// n JSONL rows {"input": w, "target": reverse(w)} (copy instead of reverse when copy); the path
static const char *tft_toy(fat5_test *T, const char *name, int n, uint64_t seed, int copy) {
    static char paths[4][600];
    static int slot;
    char *path = paths[slot++ % 4];
    FILE *fp;
    int i;
    snprintf(path, 600, "%s/%s", fat5_test_tmpdir(T), name);
    if (!(fp = fopen(path, "wb"))) return NULL;
    for (i = 0; i < n; i++) {
        char w[16], r[16];
        size_t k, m;
        tft_word(&seed, w);
        m = strlen(w);
        for (k = 0; k < m; k++) r[k] = copy ? w[k] : w[m - 1 - k];
        r[m] = 0;
        fprintf(fp, "{\"input\": \"%s\", \"target\": \"%s\", \"id\": %d}\n", w, r, i);
    }
    return fclose(fp) == 0 ? path : NULL;
}

// a tiny byte-level fine-tuning run from a new model on the CPU
static fat5_train_config tft_config(fat5_test *T, const char *train, const char *val, const char *out) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c = fat5_train_config_default();
    static const char *const o[][2] = {
        {"model", "tiny"}, {"d_model", "32"}, {"d_ff", "64"}, {"num_heads", "2"}, {"d_kv", "16"},
        {"num_layers", "1"}, {"num_decoder_layers", "1"}, {"max_steps", "8"}, {"warmup_steps", "0"},
        {"optim", "adamw"}, {"lr_scheduler_type", "constant"}, {"learning_rate", "3e-3"},
        {"max_length", "32"}, {"max_labels_length", "32"}, {"batch_tokens", "256"}, {"batch_labels_tokens", "256"},
        {"per_device_train_batch_size", "16"}, {"eval_steps", "4"}, {"save_steps", "4"}, {"save_total_limit", "2"}};
    size_t i;
    for (i = 0; i < sizeof o / sizeof o[0]; i++)
        if (fat5_train_config_set(ctx, &c, o[i][0], o[i][1]) != FAT5_OK)
            fat5_test_fail(T, __FILE__, __LINE__, "%s", fat5_last_error(ctx));
    c.train_file = train;
    c.validation_file = val;
    c.output_dir = out;
    return c;
}

// the rows of a batch as their input texts (byte ids back to letters), for comparisons
static void tft_batch_rows(const fat5_batch *b, char rows[][16], int *n) {
    int64_t s, j;
    for (s = 0; s < b->n_seq; s++) {
        int64_t a = b->enc_cu_seqlens[s], e = b->enc_cu_seqlens[s + 1] - a - 1;   // less the EOS
        for (j = 0; j < e && j < 15; j++) rows[*n][j] = (char)(b->enc_tokens[a + j] - 3);
        rows[*n][j] = 0;
        (*n)++;
    }
}

// Every row exactly once an epoch within the budgets; rows of similar lengths together; the same
// seed the same order, another epoch another order.
static void t_finetune_batches(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600];
    const char *data = tft_toy(T, "b.jsonl", 300, 7, 0);
    fat5_train_config c;
    fat5_trainer *t = NULL, *t2 = NULL;
    fat5_batch b;
    static char rows[3][400][16];
    int n[3] = {0, 0, 0}, e, i, same = 1, differ = 0, sorted = 0, pairs = 0;
    int64_t per_epoch[3] = {0, 0, 0}, max_seq = 0;
    int budget_bound = 0;   // batches of fewer than 5 rows closed by the input budget (no row of 3 ids would fit)
    FAT5_REQUIRE(T, data != NULL);
    snprintf(out, sizeof out, "%s/batches", fat5_test_tmpdir(T));
    c = tft_config(T, data, NULL, out);
    c.eval_fraction = 0;
    c.group_by_length = 1;
    c.per_device_train_batch_size = 5;   // group_by_length's windows: ~50 batches of ~4-5 rows, two of them
    c.ul2.enc_tokens = 16;   // budgets that bind before the row count does for long words
    c.ul2.dec_tokens = 18;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_REQUIRE(T, t->ft && t->ft->train.n == 300);
    // three epochs: every row once in each
    for (e = 0; e < 3; e++) {
        int64_t start = t->ft->epoch;
        FAT5_REQUIRE(T, start == e && t->ft->pos == 0);
        while (t->ft->epoch == start) {
            int before = n[e];
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t, &b));
            per_epoch[e]++;
            FAT5_CHECK(T, b.n_seq >= 1 && b.n_seq <= 5 && b.n_enc_tokens <= 16 && b.n_dec_tokens <= 18 &&
                          b.enc_cu_seqlens[b.n_seq] == b.n_enc_tokens && b.dec_cu_seqlens[b.n_seq] == b.n_dec_tokens &&
                          b.dec_tokens == NULL);
            if (b.n_seq > max_seq) max_seq = b.n_seq;
            budget_bound += b.n_seq < 5 && b.n_enc_tokens + 3 > 16;
            tft_batch_rows(&b, rows[e], &n[e]);
            for (i = before; i + 1 < n[e]; i++) {   // within a batch: longest first (group_by_length)
                pairs++;
                sorted += strlen(rows[e][i]) >= strlen(rows[e][i + 1]);
            }
            {   // labels: the reversed input, then EOS
                int64_t s, j;
                for (s = 0; s < b.n_seq; s++) {
                    int64_t a = b.enc_cu_seqlens[s], d0 = b.dec_cu_seqlens[s], m = b.enc_cu_seqlens[s + 1] - a - 1;
                    int ok = b.dec_cu_seqlens[s + 1] - d0 == m + 1 && b.labels[d0 + m] == 1;
                    for (j = 0; ok && j < m; j++) ok = b.labels[d0 + j] == b.enc_tokens[a + m - 1 - j];
                    if (!ok) same = 0;
                }
            }
        }
    }
    FAT5_CHECK_MSG(T, same, "a batch's labels are not its inputs' targets");
    same = 1;
    for (e = 0; e < 3; e++) {   // a permutation of the file's rows: sorted, the same multiset
        FAT5_CHECK_MSG(T, n[e] == 300, "epoch %d: %d rows", e, n[e]);
        qsort(rows[e], (size_t)n[e], 16, (int (*)(const void *, const void *))strcmp);
    }
    FAT5_CHECK(T, memcmp(rows[0], rows[1], sizeof rows[0]) == 0 && memcmp(rows[0], rows[2], sizeof rows[0]) == 0);
    FAT5_CHECK_MSG(T, max_seq == 5 && budget_bound > 0, "the row cap is reached (%lld), the token budget binds (%d)",
                   (long long)max_seq, budget_bound);
    FAT5_CHECK_MSG(T, t->ft->window >= 100 && t->ft->window < 300, "window %lld: two or more",
                   (long long)t->ft->window);
    FAT5_CHECK_MSG(T, pairs > 0 && sorted == pairs, "%d of %d neighbours in a batch by length", sorted, pairs);
    // epoch 0's batches from a second trainer of the same seed: the same; of epochs 0 and 1: others
    {
        char out2[600];
        fat5_train_config c2 = c;
        int m = 0, m1 = 0;
        static char r2[400][16], r1[400][16];
        snprintf(out2, sizeof out2, "%s/batches2", fat5_test_tmpdir(T));
        c2.output_dir = out2;
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c2, &t2));
        fat5__ft_plan(t->ft, 0);
        t->ft->epoch = 0, t->ft->pos = 0;
        while (t2->ft->epoch == 0) {
            fat5_batch b2;
            int k0 = m;
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t2, &b2));
            tft_batch_rows(&b2, r2, &m);
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t, &b));
            tft_batch_rows(&b, r1, &m1);
            for (i = k0; i < m; i++) same &= i < m1 && strcmp(r1[i], r2[i]) == 0;
        }
        FAT5_CHECK_MSG(T, same && m == m1, "the same seed gave another order");
        // epoch 1 of the same seed: another order of the batches
        m1 = 0;
        while (t2->ft->epoch == 1) {
            fat5_batch b2;
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t2, &b2));
            tft_batch_rows(&b2, r1, &m1);
        }
        for (i = 0; i < 300; i++) differ += strcmp(r1[i], r2[i]) != 0;
        FAT5_CHECK_MSG(T, differ > 150, "epochs 0 and 1 differ at %d of 300 places", differ);
    }
    // another seed: another order
    fat5_train_destroy(t2);
    t2 = NULL;
    {
        char out3[600];
        fat5_train_config c3 = c;
        static char r3[400][16], r0[400][16];
        int m = 0, m0 = 0;
        snprintf(out3, sizeof out3, "%s/batches3", fat5_test_tmpdir(T));
        c3.output_dir = out3;
        c3.seed = 43;
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c3, &t2));
        fat5__ft_plan(t->ft, 0);
        t->ft->epoch = 0, t->ft->pos = 0;
        while (t2->ft->epoch == 0) {
            fat5_batch b2;
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t2, &b2));
            tft_batch_rows(&b2, r3, &m);
        }
        while (t->ft->epoch == 0) {
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t, &b));
            tft_batch_rows(&b, r0, &m0);
        }
        for (differ = 0, i = 0; i < 300; i++) differ += strcmp(r0[i], r3[i]) != 0;
        FAT5_CHECK_MSG(T, m == 300 && m0 == 300 && differ > 150, "seeds 42 and 43 differ at %d of 300 places", differ);
    }
    // without group_by_length: no sorting inside a batch beyond chance
    fat5_train_destroy(t2);
    t2 = NULL;
    {
        char out4[600];
        fat5_train_config c4 = c;
        int m = 0, k0;
        static char r4[400][16];
        sorted = pairs = 0;
        snprintf(out4, sizeof out4, "%s/batches4", fat5_test_tmpdir(T));
        c4.output_dir = out4;
        c4.group_by_length = 0;
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c4, &t2));
        while (t2->ft->epoch == 0) {
            fat5_batch b2;
            k0 = m;
            FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t2, &b2));
            tft_batch_rows(&b2, r4, &m);
            for (i = k0; i + 1 < m; i++) pairs++, sorted += strlen(r4[i]) >= strlen(r4[i + 1]);
        }
        FAT5_CHECK_MSG(T, m == 300 && sorted < pairs * 9 / 10, "unsorted: %d of %d neighbours by length", sorted, pairs);
    }
    fat5_train_destroy(t2);
    fat5_train_destroy(t);
}

// reads path's bytes into a buffer of the test (NULL when it cannot)
static char *tft_read(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!fp) return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
        (buf = (char *)malloc((size_t)n + 1)) != NULL) {
        *len = fread(buf, 1, (size_t)n, fp);
        buf[*len] = 0;
    }
    fclose(fp);
    return buf;
}

// The weights of a trainer's model (fp32, host), malloc'd
static float *tft_weights(fat5_test *T, fat5_trainer *t, size_t *n) {
    fat5_model *m = fat5_train_model(t);
    float *w = (float *)malloc(m->n_floats * sizeof(float));
    *n = m->n_floats;
    if (w && m->be->download(m->ctx, w, m->wd, m->n_floats * 4) != FAT5_OK) {
        fat5_test_fail(T, __FILE__, __LINE__, "download: %s", fat5_last_error(m->ctx));
        free(w);
        return NULL;
    }
    return w;
}

// A run stopped mid-epoch and resumed from its checkpoint ends with the weights of the run that
// never stopped, bit for bit, and draws the same batches after the checkpoint; its metrics.jsonl
// reads as the uninterrupted one's (the losses of every step the same).
static void t_finetune_resume_bitwise(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char a[600], b[600], p[700];
    const char *data = tft_toy(T, "r.jsonl", 120, 11, 0);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    float *wa = NULL, *wb = NULL;
    size_t na = 0, nb = 0, la = 0, lb = 0;
    double loss_a[16], loss_b[16];
    char state_a[64], state_b[64];
    int i;
    FAT5_REQUIRE(T, data != NULL);
    snprintf(a, sizeof a, "%s/ra", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/rb", fat5_test_tmpdir(T));
    c = tft_config(T, data, NULL, a);
    c.eval_fraction = 0.1;
    c.max_eval_samples = 8;
    c.optim.total_steps = 12;
    c.save_steps = 5;           // a checkpoint at step 5, mid-epoch (120 rows x 0.9 in batches of <= 16)
    c.eval_steps = 6;
    c.save_total_limit = 0;
    // the uninterrupted run
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 12; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        loss_a[i] = r.loss;
        if (i == 4) FAT5_CHECK_MSG(T, r.epoch_f > 0.2 && r.epoch_f < 0.9, "step 5 at epoch %.3f", r.epoch_f);
    }
    FAT5_CHECK(T, r.epoch_f > 1.0);
    FAT5_REQUIRE_OK(T, fat5__ft_get_state(t, state_a, sizeof state_a));
    wa = tft_weights(T, t, &na);
    fat5_train_destroy(t);
    t = NULL;
    // the run to step 7, then resumed from step 5's checkpoint (the steps 6, 7 it did are redone)
    c.output_dir = b;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 7; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        loss_b[i] = r.loss;
    }
    fat5_train_destroy(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/step-00000005", b);
    c.resume = p;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, fat5_optim_get_step(t->o) == 5);
    for (i = 5; i < 12; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        loss_b[i] = r.loss;
    }
    FAT5_REQUIRE_OK(T, fat5__ft_get_state(t, state_b, sizeof state_b));
    wb = tft_weights(T, t, &nb);
    fat5_train_destroy(t);
    FAT5_REQUIRE(T, wa && wb && na == nb);
    FAT5_CHECK_MSG(T, memcmp(wa, wb, na * sizeof(float)) == 0, "the resumed run's weights differ");
    for (i = 0; i < 12; i++) FAT5_CHECK_MSG(T, loss_a[i] == loss_b[i], "step %d: loss %.9g vs %.9g", i + 1, loss_a[i], loss_b[i]);
    FAT5_CHECK_MSG(T, strcmp(state_a, state_b) == 0, "sampler %s vs %s", state_a, state_b);
    {   // the logs: the same losses line by line (times differ)
        char pa[700], pb[700], *ta, *tb;
        snprintf(pa, sizeof pa, "%s/metrics.jsonl", a);
        snprintf(pb, sizeof pb, "%s/metrics.jsonl", b);
        ta = tft_read(pa, &la);
        tb = tft_read(pb, &lb);
        FAT5_REQUIRE(T, ta && tb);
        {
            int lines_a = 0, lines_b = 0;
            const char *x;
            for (x = ta; *x; x++) lines_a += *x == '\n';
            for (x = tb; *x; x++) lines_b += *x == '\n';
            FAT5_CHECK_MSG(T, lines_a == 12 && lines_b == 12, "%d and %d lines", lines_a, lines_b);
            FAT5_CHECK(T, strstr(ta, "\"eval_loss\"") && strstr(ta, "\"epoch\""));
        }
        free(ta);
        free(tb);
    }
    free(wa);
    free(wb);
}

// The held-out share: the same rows for the same seed, others for another; none of them trains.
static void t_finetune_split(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600];
    const char *data = tft_toy(T, "s.jsonl", 400, 3, 1);
    fat5_train_config c;
    fat5_trainer *t[3] = {NULL, NULL, NULL};
    int k, same = 1, other = 0;
    int64_t i;
    FAT5_REQUIRE(T, data != NULL);
    for (k = 0; k < 3; k++) {
        snprintf(out, sizeof out, "%s/split%d", fat5_test_tmpdir(T), k);
        c = tft_config(T, data, NULL, out);
        c.eval_fraction = 0.2;
        c.seed = k == 2 ? 5 : 42;
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t[k]));
        FAT5_CHECK(T, t[k]->ft->train.n + t[k]->ft->val.n == 400);
        FAT5_CHECK_MSG(T, t[k]->ft->val.n > 50 && t[k]->ft->val.n < 110, "%lld held out of 400 at 0.2",
                       (long long)t[k]->ft->val.n);
    }
    FAT5_REQUIRE(T, t[0]->ft->val.n == t[1]->ft->val.n);
    for (i = 0; i < t[0]->ft->val.n; i++)
        same &= strcmp(t[0]->ft->val.text + t[0]->ft->val.text_at[i], t[1]->ft->val.text + t[1]->ft->val.text_at[i]) == 0;
    FAT5_CHECK_MSG(T, same, "the same seed held out other rows");
    for (i = 0; i < t[0]->ft->val.n && i < t[2]->ft->val.n; i++)
        other += strcmp(t[0]->ft->val.text + t[0]->ft->val.text_at[i], t[2]->ft->val.text + t[2]->ft->val.text_at[i]) != 0;
    FAT5_CHECK_MSG(T, other > 10, "seeds 42 and 5 held out nearly the same rows (%d differ)", other);
    // max_eval_samples keeps the first held-out rows; the others are not trained on either
    fat5_train_destroy(t[1]);
    t[1] = NULL;
    snprintf(out, sizeof out, "%s/split_cap", fat5_test_tmpdir(T));
    c = tft_config(T, data, NULL, out);
    c.eval_fraction = 0.2;
    c.max_eval_samples = 10;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t[1]));
    FAT5_CHECK(T, t[1]->ft->val.n == 10 && t[1]->ft->train.n == t[0]->ft->train.n);
    for (i = 0, same = 1; i < 10; i++)
        same &= strcmp(t[0]->ft->val.text + t[0]->ft->val.text_at[i], t[1]->ft->val.text + t[1]->ft->val.text_at[i]) == 0;
    FAT5_CHECK(T, same);
    for (k = 0; k < 3; k++) fat5_train_destroy(t[k]);
}

// counts the lines of a file (-1 when it cannot be read)
static int tft_lines(const char *path) {
    size_t len = 0;
    char *s = tft_read(path, &len), *p;
    int n = 0;
    if (!s) return -1;
    for (p = s; *p; p++) n += *p == '\n';
    free(s);
    return n;
}

// A tiny byte-level model learns to reverse short words: exact match >= 90% on held-out words by
// greedy generation; the predictions file has a row per validation row with its three fields.
static void t_finetune_learns(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], p[700];
    const char *train = tft_toy(T, "learn_train.jsonl", 2000, 1, 0), *val = tft_toy(T, "learn_val.jsonl", 64, 2, 0);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    FAT5_REQUIRE(T, train && val);
    snprintf(out, sizeof out, "%s/learn", fat5_test_tmpdir(T));
    c = tft_config(T, train, val, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_model", "64"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_ff", "128"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "num_layers", "2"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "num_decoder_layers", "2"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "num_heads", "4"));
    c.optim.total_steps = 400;
    c.optim.lr = 3e-3;
    c.optim.sched = FAT5_SCHED_WSD;   // lr / 2 at the end: a steadier end point than a constant rate
    c.optim.decay_steps = 150;
    c.per_device_train_batch_size = 32;
    c.eval_steps = 0;
    c.save_steps = 0;
    c.predict_with_generate = 1;
    c.generation_max_length = 12;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    while (!fat5_train_done(t)) {
        if (fat5_train_step(t, &r) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s", fat5_last_error(ctx));
            break;
        }
    }
    FAT5_CHECK(T, r.has_eval && r.has_generate && r.saved && r.eval_samples == 64);
    FAT5_CHECK_MSG(T, r.eval_exact_match >= 90, "exact match %.1f%% (loss %.4f, eval loss %.4f)", r.eval_exact_match,
                   r.loss, r.eval_loss);
    FAT5_CHECK(T, r.eval_f1 >= r.eval_exact_match && r.eval_rouge1 > 0 && r.eval_gen_len > 2);
    snprintf(p, sizeof p, "%s/eval_predictions.jsonl", out);
    FAT5_CHECK(T, tft_lines(p) == 64);
    snprintf(p, sizeof p, "%s/step-00000400/predictions.jsonl", out);
    FAT5_CHECK(T, tft_lines(p) == 64);
    fat5_train_destroy(t);
}

// reads a small text file whole into buf (NUL-terminated); "" when it cannot
static const char *tft_text(const char *path, char *buf, size_t cap) {
    FILE *fp = fopen(path, "rb");
    size_t n = 0;
    buf[0] = 0;
    if (!fp) return buf;
    n = fread(buf, 1, cap - 1, fp);
    buf[n] = 0;
    fclose(fp);
    return buf;
}

// The best checkpoint by metric_for_best_model (here the greatest eval loss, which need not be the
// last): OUTPUT_DIR/best names it, save_total_limit keeps it beside the newest, and a resumed run
// keeps it as the best to beat. Every checkpoint saved after an evaluation holds its predictions.
static void t_finetune_best(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], p[4400], buf[256];
    const char *train = tft_toy(T, "best_train.jsonl", 200, 5, 0), *val = tft_toy(T, "best_val.jsonl", 12, 6, 0);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    double worst = -1;
    int64_t worst_step = -1, s;
    int i, n_best = 0;
    FAT5_REQUIRE(T, train && val);
    snprintf(out, sizeof out, "%s/best", fat5_test_tmpdir(T));
    c = tft_config(T, train, val, out);
    c.optim.total_steps = 8;
    c.eval_steps = 2;
    c.save_steps = 2;
    c.save_total_limit = 1;
    c.predict_with_generate = 1;
    c.generation_max_length = 6;
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "eval_loss"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "greater_is_better", "true"));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    for (i = 0; i < 8; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        FAT5_CHECK(T, r.has_eval == (r.step % 2 == 0) && r.saved == r.has_eval && r.has_generate == r.has_eval);
        if (r.has_eval && r.eval_loss > worst) worst = r.eval_loss, worst_step = r.step;
        n_best += r.is_best;
        if (r.saved) {   // this step's predictions are in its checkpoint
            snprintf(p, sizeof p, "%s/predictions.jsonl", r.checkpoint);
            FAT5_CHECK_MSG(T, tft_lines(p) == 12, "%s: %d lines", p, tft_lines(p));
            snprintf(p, sizeof p, "%s/step-%08lld", out, (long long)worst_step);
            FAT5_CHECK_MSG(T, fat5__is_dir(p), "step %lld: the best checkpoint %s was pruned", (long long)r.step, p);
        }
    }
    FAT5_CHECK(T, n_best >= 1 && worst_step > 0);
    fat5_train_destroy(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/best", out);
    snprintf(buf, sizeof buf, "step-%08lld\n", (long long)worst_step);
    {
        char got[64];
        FAT5_CHECK_MSG(T, strcmp(tft_text(p, got, sizeof got), buf) == 0, "best names '%s', want '%s'", got, buf);
    }
    // save_total_limit 1: the newest and the best, nothing else
    for (s = 2; s <= 8; s += 2) {
        snprintf(p, sizeof p, "%s/step-%08lld", out, (long long)s);
        FAT5_CHECK_MSG(T, fat5__is_dir(p) == (s == 8 || s == worst_step), "step %lld kept: %d", (long long)s,
                       fat5__is_dir(p));
    }
    // the metrics of the evaluations, with Hugging Face's names
    snprintf(p, sizeof p, "%s/metrics.jsonl", out);
    {
        size_t len = 0;
        char *log = tft_read(p, &len);
        FAT5_REQUIRE(T, log != NULL);
        FAT5_CHECK(T, strstr(log, "\"eval_rougeL\"") && strstr(log, "\"eval_bleu\"") && strstr(log, "\"eval_exact_match\"") &&
                      strstr(log, "\"eval_f1\"") && strstr(log, "\"eval_rouge1\"") && strstr(log, "\"eval_rougeLsum\"") &&
                      strstr(log, "\"eval_gen_len\"") && strstr(log, "\"eval_samples\": 12"));
        free(log);
    }
    // the best checkpoint's own training state names itself as the best
    snprintf(p, sizeof p, "%s/step-%08lld", out, (long long)worst_step);
    c.resume = p;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK_MSG(T, t->ft->best_step == worst_step && t->ft->best_value == worst, "best %lld (%g), want %lld (%g)",
                   (long long)t->ft->best_step, t->ft->best_value, (long long)worst_step, worst);
    fat5_train_destroy(t);
    t = NULL;
    // resumed to step 10: the best to beat is the restored one (a lower eval loss does not replace it)
    c.resume = out;
    c.optim.total_steps = 10;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, t->ft->best_step == worst_step && t->ft->best_value == worst);
    FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
    FAT5_CHECK(T, r.step == 10 && r.saved && r.is_best == (r.eval_loss > worst));
    if (r.eval_loss <= worst) {
        snprintf(p, sizeof p, "%s/step-%08lld", out, (long long)worst_step);
        FAT5_CHECK(T, fat5__is_dir(p));
    }
    fat5_train_destroy(t);
}

// Bad inputs, each named: a bad row (file and line), a missing validation file, two tasks at
// once, a metric that needs generation, a row over the budget, a split that holds nothing out,
// another data set on resume.
static void t_finetune_errors(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], nope[700];
    const char *good = tft_toy(T, "err_good.jsonl", 40, 9, 0), *other = tft_toy(T, "err_other.jsonl", 40, 10, 0);
    const char *bad = TP_WRITE(T, "err_bad.jsonl", "{\"input\": \"ab\", \"target\": \"ba\"}\n\n{\"input\": \"cd\"}\n");
    const char *longrow = TP_WRITE(T, "err_long.jsonl", "{\"input\": \"ab\", \"target\": \"ba\"}\n"
                                                        "{\"input\": \"abcdefghijklmnopqrstuvwxyz\", \"target\": \"x\"}\n");
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_status st;
    FAT5_REQUIRE(T, good && other);
    snprintf(out, sizeof out, "%s/err", fat5_test_tmpdir(T));
    snprintf(nope, sizeof nope, "%s/no_such.jsonl", fat5_test_tmpdir(T));
#define TFT_FAILS(cfg, want)                                                                              \
    do {                                                                                                  \
        st = fat5_train_create(ctx, &(cfg), &t);                                                          \
        FAT5_CHECK_MSG(T, st != FAT5_OK && strstr(fat5_last_error(ctx), want), "want '%s', got %s: %s", want, \
                       fat5_status_string(st), fat5_last_error(ctx));                                     \
        fat5_train_destroy(t);                                                                            \
        t = NULL;                                                                                         \
    } while (0)
    c = tft_config(T, bad, NULL, out);
    TFT_FAILS(c, "err_bad.jsonl: line 3: missing field \"target\"");
    c = tft_config(T, good, nope, out);
    TFT_FAILS(c, "no_such.jsonl: no such file");
    c = tft_config(T, good, NULL, out);
    c.data = "corpus.tok";
    TFT_FAILS(c, "data (token files, pre-training) and train_file");
    c = tft_config(T, good, good, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "rougeL"));
    TFT_FAILS(c, "metric_for_best_model rougeL is a score of generated text: it needs predict_with_generate");
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "perplexity") == FAT5_ERR_INVALID_ARG &&
                  strstr(fat5_last_error(ctx), "metric_for_best_model: bad value 'perplexity'"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "accuracy"));
    TFT_FAILS(c, "metric_for_best_model accuracy is a task head's score");
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "loss"));
    FAT5_CHECK(T, fat5_train_config_set(ctx, &c, "predict_with_generate", "yes") == FAT5_ERR_INVALID_ARG);
    {   // the options by name, from JSON too; listed by fat5_finetune_option_names, not the pre-training list
        const char *json = "{\"train_file\": \"a.jsonl\", \"predict_with_generate\": true, \"num_train_epochs\": 2.5,"
                           " \"summary_column\": \"gloss\", \"generation_num_beams\": 4}";
        fat5_train_config j = fat5_train_config_default();
        FAT5_REQUIRE_OK(T, fat5_train_config_from_json(ctx, json, strlen(json), &j));
        FAT5_CHECK(T, !strcmp(j.train_file, "a.jsonl") && j.predict_with_generate == 1 && j.num_train_epochs == 2.5 &&
                      !strcmp(j.summary_column, "gloss") && j.generation_num_beams == 4 && j.group_by_length == 0);
        FAT5_CHECK(T, fat5_train_config_set(ctx, &j, "generation_num_beams", "33") == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, strstr(fat5_finetune_option_names(), "predict_with_generate:") &&
                      !strstr(fat5_train_option_names(), "predict_with_generate"));
    }
    c = tft_config(T, longrow, NULL, out);
    c.eval_fraction = 0;
    c.ul2.max_enc_len = 0;   // no truncation: the 27 ids of line 2 exceed batch_tokens 16
    c.ul2.enc_tokens = 16;
    TFT_FAILS(c, "err_long.jsonl: line 2: the input has 27 tokens, more than batch_tokens 16 holds");
    c = tft_config(T, longrow, NULL, out);
    c.eval_fraction = 0.01;
    TFT_FAILS(c, "eval_fraction 0.01 of its 2 rows holds none out");
    c = tft_config(T, good, NULL, out);
    c.model.vocab_size = 200;
    TFT_FAILS(c, "too few for byte-level ids");
    // a checkpoint resumed on other rows
    c = tft_config(T, good, good, out);
    c.optim.total_steps = 2;
    c.save_steps = 2;
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    FAT5_REQUIRE_OK(T, fat5_train_step(t, NULL));
    fat5_train_destroy(t);
    t = NULL;
    c = tft_config(T, other, good, out);
    c.optim.total_steps = 4;
    c.resume = out;
    TFT_FAILS(c, "the checkpoint was trained on other data");
#undef TFT_FAILS
}

// A pretokenized pairs file (what tools/pretokenize --pairs writes: each row's input ids then its
// target ids, as documents of a token file) trains bit for bit as its text file does: the same
// held-out rows (texts decoded from the ids), losses, weights and predictions; its training rows
// stay on disk (no ids in memory); it resumes; a file of an odd number of documents is refused.
static void t_finetune_pretokenized(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[2][600], tok[600], odd[600], p[2][1300];
    const char *text = tft_toy(T, "pt.jsonl", 200, 21, 0);
    fat5_train_config c[2];
    fat5_trainer *t[2] = {NULL, NULL};
    fat5_train_metrics r[2];
    int k, i, same_val = 1;
    size_t na = 0, nb = 0;
    float *w0 = NULL, *w1 = NULL;
    FAT5_REQUIRE(T, text != NULL);
    snprintf(tok, sizeof tok, "%s/pt.tok", fat5_test_tmpdir(T));
    snprintf(odd, sizeof odd, "%s/odd.tok", fat5_test_tmpdir(T));
    {   // the token file, as pretokenize --pairs writes it
        fat5_pairs *pp = NULL;
        fat5_pairs_row row;
        fat5_tokens_writer *wr = NULL;
        int has = 1;
        FAT5_REQUIRE_OK(T, fat5_pairs_open(ctx, text, NULL, NULL, &pp));
        FAT5_REQUIRE_OK(T, fat5_tokens_writer_create(ctx, tok, 384, 1, 2, &wr));
        while (fat5_pairs_next(pp, NULL, &row, &has) == FAT5_OK && has) {
            FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(wr, row.input_ids, row.n_input));
            FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(wr, row.target_ids, row.n_target));
        }
        FAT5_REQUIRE(T, fat5_tokens_writer_doc_count(wr) == 400);
        FAT5_REQUIRE_OK(T, fat5_tokens_writer_commit(wr));
        fat5_tokens_writer_destroy(wr);
        fat5_pairs_close(pp);
    }
    for (k = 0; k < 2; k++) {
        snprintf(out[k], sizeof out[k], "%s/pt%d", fat5_test_tmpdir(T), k);
        c[k] = tft_config(T, k ? tok : text, NULL, out[k]);
        c[k].eval_fraction = 0.1;
        c[k].optim.total_steps = 6;
        c[k].save_steps = 3;
        c[k].eval_steps = 3;
        c[k].predict_with_generate = 1;
        c[k].generation_max_length = 8;
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c[k], &t[k]));
    }
    FAT5_CHECK(T, t[1]->ft->train.src && !t[1]->ft->train.ids && !t[0]->ft->train.src && t[0]->ft->train.ids);
    FAT5_REQUIRE(T, t[0]->ft->train.n == t[1]->ft->train.n && t[0]->ft->val.n == t[1]->ft->val.n && t[0]->ft->val.n > 5);
    FAT5_CHECK(T, t[0]->ft->hash == t[1]->ft->hash);
    for (i = 0; i < t[0]->ft->val.n; i++) {   // the same held-out rows, the same texts
        const char *a = t[0]->ft->val.text + t[0]->ft->val.text_at[i], *b = t[1]->ft->val.text + t[1]->ft->val.text_at[i];
        same_val &= strcmp(a, b) == 0 && strcmp(a + strlen(a) + 1, b + strlen(b) + 1) == 0;
    }
    FAT5_CHECK_MSG(T, same_val, "the held-out rows or their texts differ");
    for (i = 0; i < 6; i++) {
        FAT5_REQUIRE_OK(T, fat5_train_step(t[0], &r[0]));
        FAT5_REQUIRE_OK(T, fat5_train_step(t[1], &r[1]));
        FAT5_CHECK_MSG(T, r[0].loss == r[1].loss && r[0].has_eval == r[1].has_eval &&
                              (!r[0].has_eval || (r[0].eval_loss == r[1].eval_loss && r[0].eval_rouge1 == r[1].eval_rouge1)),
                       "step %d: loss %.9g vs %.9g", i + 1, r[0].loss, r[1].loss);
    }
    w0 = tft_weights(T, t[0], &na);
    w1 = tft_weights(T, t[1], &nb);
    FAT5_CHECK(T, w0 && w1 && na == nb && memcmp(w0, w1, na * sizeof *w0) == 0);
    for (k = 0; k < 2; k++) snprintf(p[k], sizeof p[k], "%s/eval_predictions.jsonl", out[k]);
    {
        size_t la = 0, lb = 0;
        char *a = tft_read(p[0], &la), *b = tft_read(p[1], &lb);
        FAT5_CHECK(T, a && b && la == lb && memcmp(a, b, la) == 0);
        free(a);
        free(b);
    }
    fat5_train_destroy(t[1]);
    t[1] = NULL;
    // the streamed run resumed from step 3: the same weights at step 6
    snprintf(p[1], sizeof p[1], "%s/step-00000003", out[1]);
    c[1].resume = p[1];
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c[1], &t[1]));
    while (!fat5_train_done(t[1])) FAT5_REQUIRE_OK(T, fat5_train_step(t[1], NULL));
    free(w1);
    w1 = tft_weights(T, t[1], &nb);
    FAT5_CHECK_MSG(T, w0 && w1 && memcmp(w0, w1, na * sizeof *w0) == 0, "the resumed streamed run's weights differ");
    free(w0);
    free(w1);
    for (k = 0; k < 2; k++) fat5_train_destroy(t[k]);
    {   // three documents: not pairs
        static const int32_t ids[] = {5, 6, 1, 7, 1, 8, 1};
        fat5_train_config co;
        fat5_trainer *to = NULL;
        fat5_status st;
        FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, odd, ids, 7, 384, 1, 2));
        snprintf(out[0], sizeof out[0], "%s/pt_odd", fat5_test_tmpdir(T));
        co = tft_config(T, odd, text, out[0]);
        st = fat5_train_create(ctx, &co, &to);
        FAT5_CHECK_MSG(T, st != FAT5_OK && strstr(fat5_last_error(ctx), "odd.tok: an odd number of documents"), "%s",
                       fat5_last_error(ctx));
        fat5_train_destroy(to);
    }
}
