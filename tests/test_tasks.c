// Fine-tuning the task heads (run_tasks.c): the evaluation scores against seqeval and scikit-learn
// (tests/data/tasks/metrics.json, ref/make_task_metrics_fixture.py), the rows (classes, the
// first-piece tags of words, answer spans), runs of each task that learn, save, and resume, and
// the errors that name the file and line.

// metrics.json's cases: seqeval's entity scores and scikit-learn's accuracy and macro-F1
static void t_tasks_metrics(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t len;
    char *text = tm_read(T, FAT5_TEST_DATA "/tasks/metrics.json", &len);
    fat5__jdoc *d = NULL;
    const fat5__json *c, *x, *y;
    int n_cases = 0, k;
    FAT5_REQUIRE(T, text != NULL);
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "metrics.json", text, len, 16, &d));
    for (c = fat5__json_get(d->root, "seqeval")->child; c; c = c->next, n_cases++) {
        const char *tags[2][512];
        int64_t cu[64], scratch[6 * 600], nw[2] = {0, 0}, ns = 0;
        double p, r, f, want[3];
        for (k = 0; k < 2; k++) {
            ns = 0;
            cu[0] = 0;
            for (x = fat5__json_get(c, k ? "gold" : "pred")->child; x; x = x->next) {
                for (y = x->child; y; y = y->next) tags[k][nw[k]++] = y->str;
                cu[++ns] = nw[k];
            }
        }
        FAT5_REQUIRE(T, nw[0] == nw[1]);
        fat5__task_seqeval(tags[0], tags[1], cu, ns, scratch, &p, &r, &f);
        fat5__json_as_double(fat5__json_get(c, "precision"), &want[0]);
        fat5__json_as_double(fat5__json_get(c, "recall"), &want[1]);
        fat5__json_as_double(fat5__json_get(c, "f1"), &want[2]);
        FAT5_CHECK_MSG(T, fabs(p - want[0]) < 1e-12 && fabs(r - want[1]) < 1e-12 && fabs(f - want[2]) < 1e-12,
                       "seqeval case %d: precision %.6f recall %.6f f1 %.6f, seqeval %.6f %.6f %.6f", n_cases, p, r, f,
                       want[0], want[1], want[2]);
    }
    for (k = 0; k < 2; k++) {
        int multi = k == 1, i_case = 0;
        for (c = fat5__json_get(d->root, multi ? "multi" : "single")->child; c; c = c->next, i_case++) {
            int64_t tp[16] = {0}, fp[16] = {0}, fn[16] = {0}, L = 0, right = 0, rows = 0, l;
            double acc, f1;
            const fat5__json *pr = fat5__json_get(c, "pred")->child, *g = fat5__json_get(c, "gold")->child;
            if (!multi) {
                double dl = 0;
                fat5__json_as_double(fat5__json_get(c, "n_classes"), &dl);
                L = (int64_t)dl;
            }
            for (; pr && g; pr = pr->next, g = g->next, rows++) {
                if (!multi) {
                    double a = 0, b = 0;
                    fat5__json_as_double(pr, &a);
                    fat5__json_as_double(g, &b);
                    right += a == b;
                    tp[(int)a] += a == b;
                    fp[(int)a] += a != b;
                    fn[(int)b] += a != b;
                } else {
                    const fat5__json *a = pr->child, *b = g->child;
                    int all = 1;
                    for (l = 0; a && b; a = a->next, b = b->next, l++) {
                        double u = 0, v = 0;
                        fat5__json_as_double(a, &u);
                        fat5__json_as_double(b, &v);
                        all &= u == v;
                        tp[l] += u && v;
                        fp[l] += u && !v;
                        fn[l] += !u && v;
                    }
                    L = l;
                    right += all;
                }
            }
            fat5__json_as_double(fat5__json_get(c, "accuracy"), &acc);
            fat5__json_as_double(fat5__json_get(c, "macro_f1"), &f1);
            FAT5_CHECK_MSG(T, fabs((double)right / (double)rows - acc) < 1e-12, "%s case %d: accuracy",
                           multi ? "multi" : "single", i_case);
            FAT5_CHECK_MSG(T, fabs(fat5__task_macro_f1(tp, fp, fn, L, multi) - f1) < 1e-12,
                           "%s case %d: macro-F1 %.6f, scikit-learn %.6f", multi ? "multi" : "single", i_case,
                           fat5__task_macro_f1(tp, fp, fn, L, multi), f1);
        }
    }
    FAT5_CHECK(T, n_cases == 60);
    fat5__json_free(ctx, d);
    fat5__free(ctx, text);
}

// ---- toy tasks on byte-level ids (the tiny model of the fine-tuning tests) ----

// writes text to DIR/name, returns the path (a static buffer per slot)
static const char *tk_file(fat5_test *T, int slot, const char *name, const char *text) {
    static char paths[8][600];
    FILE *f;
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fat5_test_tmpdir(T), name);
    f = fopen(paths[slot], "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return paths[slot];
}

// n rows of a classify task: a word of colour or of animal, and the class it is
static const char *tk_classify_rows(fat5_test *T, int slot, const char *name, int n, uint64_t seed) {
    static const char *const colours[] = {"red", "blue", "green", "black", "white", "pink"};
    static const char *const animals[] = {"cat", "dog", "horse", "mouse", "bird", "fish"};
    fat5__sb b;
    fat5_rng r = fat5_rng_init(seed);
    const char *path;
    int i;
    fat5__sb_init(&b, fat5_test_ctx(T));
    for (i = 0; i < n; i++) {
        int c = (int)fat5_rng_below(&r, 2), w = (int)fat5_rng_below(&r, 6);
        fat5__sb_printf(&b, "{\"text\": \"the %s one\", \"label\": \"%s\"}\n", c ? animals[w] : colours[w],
                        c ? "animal" : "colour");
    }
    path = tk_file(T, slot, name, b.buf);
    fat5__sb_free(&b);
    return path;
}

// a classify run learns the toy task (validation accuracy), saves a head checkpoint that loads
// with its names, and a resumed run continues from it
static void tk_classify(fat5_test *T, fat5_ctx *run_ctx, double min_acc) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char out[600], ck[700];
    const char *train = tk_classify_rows(T, 0, "train.jsonl", 400, 1), *val = tk_classify_rows(T, 1, "val.jsonl", 40, 2);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    fat5_model *m = NULL;
    int classifier;
    static int calls;   // each call its own directories
    calls++;
    for (classifier = 0; classifier < 2; classifier++) {
        snprintf(out, sizeof out, "%s/run%d_%d", fat5_test_tmpdir(T), classifier, calls);
        c = tft_config(T, train, val, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "classifier", classifier ? "t5" : "encoder"));
        // mean pooling: the toy task's word reaches the state directly (a 1-layer model's EOS state
        // needs more steps to gather it: 75-87% after 100 steps, depending on the rounding)
        if (!classifier) FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "pooling", "mean"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "100"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "eval_steps", "100"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "save_steps", "100"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "accuracy"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_kv", "32"));
        FAT5_REQUIRE_OK(T, fat5_train_create(run_ctx, &c, &t));
        FAT5_CHECK(T, fat5_train_model(t)->cfg.head == (classifier ? FAT5_HEAD_SEQ_CLS : FAT5_HEAD_ENC_SEQ_CLS));
        memset(&r, 0, sizeof r);
        while (!fat5_train_done(t)) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        FAT5_CHECK_MSG(T, r.has_predict && r.eval_accuracy >= min_acc, "%s: validation accuracy %.1f%% after 100 "
                       "steps (expected >= %.0f%%)", classifier ? "t5" : "encoder", r.eval_accuracy, min_acc);
        fat5_train_destroy(t);
        t = NULL;
        snprintf(ck, sizeof ck, "%s/step-00000100", out);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, ck, &m));
        FAT5_CHECK(T, m->cfg.num_labels == 2 && strcmp(fat5_model_label_name(m, 0), "animal") == 0 &&
                      strcmp(fat5_model_label_name(m, 1), "colour") == 0);
        fat5_model_destroy(m);
        m = NULL;
    }
    {   // the run resumed for 4 more steps
        c = tft_config(T, train, val, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "classifier", "t5"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "104"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_kv", "32"));
        c.resume = out;
        FAT5_REQUIRE_OK(T, fat5_train_create(run_ctx, &c, &t));
        FAT5_CHECK(T, fat5_optim_get_step(t->o) == 100);
        while (!fat5_train_done(t)) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        FAT5_CHECK(T, r.step == 104);
        fat5_train_destroy(t);
    }
}
static void t_tasks_classify(fat5_test *T) { tk_classify(T, fat5_test_ctx(T), 90.0); }

// the rows of token-classify and qa: each word's first piece takes its tag, the others -100;
// an answer's tokens cut out of the input give the answer back
static void t_tasks_rows(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *tok_rows = tk_file(T, 0, "ner.jsonl",
                                   "{\"tokens\": [\"Ann\", \"met\", \"Bob\", \"Lee\"], \"ner_tags\": [\"B-PER\", \"O\", "
                                   "\"B-PER\", \"I-PER\"]}\n");
    const char *qa_rows = tk_file(T, 1, "qa.jsonl",
                                  "{\"question\": \"who?\", \"context\": \"caf\\u00e9 owner Zo\\u00eb ran\", \"answers\": "
                                  "{\"text\": [\"Zo\\u00eb\"], \"answer_start\": [11]}}\n");
    char out[600];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    const fat5__ftrows *r;
    int64_t i;
    snprintf(out, sizeof out, "%s/ner", fat5_test_tmpdir(T));
    c = tft_config(T, tok_rows, tok_rows, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "token-classify"));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, t->m->cfg.head == FAT5_HEAD_TOKEN_CLS && t->m->cfg.num_labels == 3);   // B-PER, I-PER, O
    r = &t->ft->val;
    FAT5_REQUIRE(T, r->n == 1 && fat5__ftrow_in(r, 0) == 16);   // "Ann met Bob Lee" + EOS, bytes
    {
        const int32_t *pay = r->ids + r->at[0] + 16;
        // byte-level ids: the space before a word is its first piece (as SentencePiece's lone "▁")
        static const int32_t want[16] = {0, -100, -100, 2, -100, -100, -100, 0, -100, -100, -100, 1, -100, -100, -100,
                                         -100};
        for (i = 0; i < 16; i++)
            FAT5_CHECK_MSG(T, pay[i] == want[i], "byte %d: label %d, expected %d", (int)i, (int)pay[i], (int)want[i]);
    }
    fat5_train_destroy(t);
    t = NULL;
    snprintf(out, sizeof out, "%s/qa", fat5_test_tmpdir(T));
    c = tft_config(T, qa_rows, qa_rows, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "qa"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_length", "64"));
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    FAT5_CHECK(T, t->m->cfg.head == FAT5_HEAD_QA);
    r = &t->ft->val;
    {
        int64_t e = fat5__ftrow_in(r, 0);
        const int32_t *pay = r->ids + r->at[0] + e;
        const char *input = r->text + r->text_at[0];
        const int64_t *off = t->ft->val_off + t->ft->val_off_at[0];
        char got[32];
        FAT5_REQUIRE(T, pay[0] >= 0 && pay[1] >= pay[0] && pay[1] < e);
        snprintf(got, sizeof got, "%.*s", (int)(off[2 * pay[1] + 1] - off[2 * pay[0]]), input + off[2 * pay[0]]);
        FAT5_CHECK_MSG(T, strcmp(got, "Zo\xc3\xab") == 0, "the answer's tokens hold '%s'", got);
    }
    fat5_train_destroy(t);
}

// a token-classify and a qa run train, evaluate (seqeval F1, SQuAD EM / F1) and save their heads
static void tk_token_qa_runs(fat5_test *T, fat5_ctx *run_ctx, double min_score) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const char *const names[] = {"Ann", "Bob", "Eve", "Max", "Kim"};
    static const char *const words[] = {"met", "saw", "and", "the", "cat"};
    fat5__sb ner, qa;
    fat5_rng g = fat5_rng_init(3);
    char out[600], ck[700];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    fat5_model *m = NULL;
    const char *ner_path, *qa_path;
    int i, k;
    fat5__sb_init(&ner, ctx);
    fat5__sb_init(&qa, ctx);
    for (i = 0; i < 200; i++) {
        const char *a = names[fat5_rng_below(&g, 5)], *w = words[fat5_rng_below(&g, 5)];
        const char *b = names[fat5_rng_below(&g, 5)];
        fat5__sb_printf(&ner, "{\"tokens\": [\"%s\", \"%s\", \"%s\"], \"ner_tags\": [\"B-PER\", \"O\", \"B-PER\"]}\n", a, w,
                        b);
        fat5__sb_printf(&qa, "{\"question\": \"who?\", \"context\": \"%s %s %s\", \"answers\": {\"text\": [\"%s\"], "
                        "\"answer_start\": [%d]}}\n", w, a, w, a, (int)strlen(w) + 1);
    }
    ner_path = tk_file(T, 2, "ner_train.jsonl", ner.buf);
    qa_path = tk_file(T, 3, "qa_train.jsonl", qa.buf);
    fat5__sb_free(&ner);
    fat5__sb_free(&qa);
    static int calls;   // each call its own directories
    calls++;
    for (k = 0; k < 2; k++) {
        snprintf(out, sizeof out, "%s/%s%d", fat5_test_tmpdir(T), k ? "qa" : "ner", calls);
        c = tft_config(T, k ? qa_path : ner_path, NULL, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", k ? "qa" : "token-classify"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "eval_fraction", "0.1"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "100"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "eval_steps", "100"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "save_steps", "100"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_length", "64"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "metric_for_best_model", "f1"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "d_kv", "32"));
        FAT5_REQUIRE_OK(T, fat5_train_create(run_ctx, &c, &t));
        memset(&r, 0, sizeof r);
        while (!fat5_train_done(t)) FAT5_REQUIRE_OK(T, fat5_train_step(t, &r));
        FAT5_CHECK_MSG(T, r.has_predict && r.eval_f1 >= min_score, "%s: validation F1 %.1f after 100 steps",
                       k ? "qa" : "token-classify", r.eval_f1);
        if (k) FAT5_CHECK_MSG(T, r.eval_exact_match >= min_score, "qa: exact match %.1f", r.eval_exact_match);
        fat5_train_destroy(t);
        t = NULL;
        snprintf(ck, sizeof ck, "%s/step-00000100", out);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, ck, &m));
        FAT5_CHECK(T, m->cfg.head == (k ? FAT5_HEAD_QA : FAT5_HEAD_TOKEN_CLS));
        fat5_model_destroy(m);
        m = NULL;
    }
}

static void t_tasks_token_qa_runs(fat5_test *T) { tk_token_qa_runs(T, fat5_test_ctx(T), 80.0); }

#ifndef FAT5_NO_CUDA
// the same runs on the GPU: every task head trains, evaluates and saves there. fp32 to the CPU's
// scores; bf16 (the toy model's d_model 32 rounds coarsely: its encoder classifier measured 72.5%
// after 100 steps on an H200) to a score well above chance (50% for two classes)
static void t_gpu_tasks_runs(fat5_test *T) {
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_FP32);
    if (!g) return;
    tk_classify(T, g, 90.0);
    tk_token_qa_runs(T, g, 80.0);
    fat5_ctx_destroy(g);
    if (!(g = tgm_ctx(T, FAT5_DTYPE_BF16))) return;
    tk_classify(T, g, 65.0);
    tk_token_qa_runs(T, g, 65.0);
    fat5_ctx_destroy(g);
}
#define FAT5_TESTS_TASKS_GPU(X) X(gpu_tasks_runs)
#else
#define FAT5_TESTS_TASKS_GPU(X)
#endif

// A run from a classifier whose config.json names its classes takes them in the checkpoint's order
// (its head's outputs keep their meaning), not the rows' sorted order; a row's name the checkpoint
// lacks is an error naming it; transformers' default names (LABEL_i) leave the rows' order.
static void t_tasks_label_map(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const char *const ck_names[2] = {"colour", "animal"}, *const def_names[2] = {"LABEL_0", "LABEL_1"};
    const char *train = tk_classify_rows(T, 0, "map_train.jsonl", 40, 3);   // (validation: the same rows)
    const char *other = tk_file(T, 1, "map_other.jsonl", "{\"text\": \"a rose\", \"label\": \"plant\"}\n"
                                                         "{\"text\": \"a cat\", \"label\": \"animal\"}\n");
    char ck[600], ck_def[600], out[600];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_model *src = NULL;
    float *head = NULL;
    size_t n_head = 0;
    int64_t i;
    int k;
    snprintf(ck, sizeof ck, "%s/map_ck", fat5_test_tmpdir(T));
    snprintf(ck_def, sizeof ck_def, "%s/map_ck_def", fat5_test_tmpdir(T));
    for (k = 0; k < 2; k++) {   // the checkpoints: a classifier of the rows' two classes, named in another order
        snprintf(out, sizeof out, "%s/map_make%d", fat5_test_tmpdir(T), k);
        c = tft_config(T, train, train, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
        src = fat5_train_model(t);
        FAT5_REQUIRE_OK(T, fat5_model_set_label_names(src, k ? def_names : ck_names, 2));
        FAT5_REQUIRE_OK(T, fat5_model_save(src, k ? ck_def : ck));
        if (!k) {
            n_head = src->params[src->ho_w].numel;
            head = (float *)malloc(n_head * sizeof *head);
            FAT5_REQUIRE(T, head);
            memcpy(head, src->w + src->params[src->ho_w].offset, n_head * sizeof *head);
        }
        fat5_train_destroy(t);
        t = NULL;
    }
    for (k = 0; k < 2; k++) {   // fine-tuned from each: the classes and each row's class
        const fat5__ftrows *r;
        const fat5_model *m;
        snprintf(out, sizeof out, "%s/map_run%d", fat5_test_tmpdir(T), k);
        c = tft_config(T, train, train, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
        c.init = k ? ck_def : ck;
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
        m = fat5_train_model(t);
        FAT5_REQUIRE(T, m->cfg.num_labels == 2);
        // the checkpoint's order; with default names the rows' (sorted: animal, colour)
        FAT5_CHECK_MSG(T, strcmp(fat5_model_label_name(m, 0), k ? "animal" : "colour") == 0 &&
                          strcmp(fat5_model_label_name(m, 1), k ? "colour" : "animal") == 0,
                       "checkpoint %d: classes '%s', '%s'", k, fat5_model_label_name(m, 0), fat5_model_label_name(m, 1));
        if (!k)   // the head kept
            FAT5_CHECK(T, m->params[m->ho_w].numel == n_head &&
                          memcmp(m->w + m->params[m->ho_w].offset, head, n_head * sizeof *head) == 0);
        r = &t->ft->train;
        for (i = 0; i < r->n; i++) {   // an animal's text ("the cat one") is the class named animal
            const int32_t *ids = r->ids + r->at[i];
            int64_t e = fat5__ftrow_in(r, i), j, is_animal = 0;
            char text[64];
            for (j = 0; j < e - 1 && j < 63; j++) text[j] = (char)(ids[j] - 3);
            text[j] = 0;
            is_animal = strstr(text, "cat") || strstr(text, "dog") || strstr(text, "horse") || strstr(text, "mouse") ||
                        strstr(text, "bird") || strstr(text, "fish");
            FAT5_CHECK_MSG(T, strcmp(fat5_model_label_name(m, ids[e]), is_animal ? "animal" : "colour") == 0,
                           "checkpoint %d: '%s' has class %d ('%s')", k, text, (int)ids[e],
                           fat5_model_label_name(m, ids[e]));
        }
        fat5_train_destroy(t);
        t = NULL;
    }
    {   // a name the checkpoint lacks
        fat5_status st;
        snprintf(out, sizeof out, "%s/map_bad", fat5_test_tmpdir(T));
        c = tft_config(T, other, other, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
        c.init = ck;
        st = fat5_train_create(ctx, &c, &t);
        FAT5_CHECK_MSG(T, st == FAT5_ERR_FORMAT && strstr(fat5_last_error(ctx), "label 'plant' is not one of the classes") &&
                          strstr(fat5_last_error(ctx), "'colour', 'animal'"), "%s: %s", fat5_status_string(st),
                       fat5_last_error(ctx));
        fat5_train_destroy(t);
    }
    free(head);
}

// 100,000 rows of 60,000 label names (each name on rows i, i + 60,000): the classes are the names,
// sorted, each row's the name it gives, and reading them takes seconds (sorted and hashed: a
// quadratic search over the names would take about a minute on a 2-core x86; this takes under 2 s)
static void t_tasks_many_labels(fat5_test *T) {
    enum { ROWS = 100000, LABELS = 60000 };
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__sb b;
    const char *train, *val;
    char out[600], want[16];
    fat5_train_config c;
    fat5_trainer *t = NULL;
    const fat5__ftrows *r;
    const fat5_model *m;
    double t0, secs;
    int64_t i;
    fat5__sb_init(&b, ctx);
    for (i = 0; i < ROWS; i++)   // label (i * 7919) mod 60000: 7919 is prime to 60000, so every one comes
        fat5__sb_printf(&b, "{\"text\": \"r%lld\", \"label\": \"c%05lld\"}\n", (long long)i,
                        (long long)(i * 7919 % LABELS));
    FAT5_REQUIRE(T, !b.oom);
    train = tk_file(T, 0, "many_train.jsonl", b.buf);
    fat5__sb_free(&b);
    val = tk_file(T, 1, "many_val.jsonl", "{\"text\": \"v\", \"label\": \"c59999\"}\n");
    snprintf(out, sizeof out, "%s/many", fat5_test_tmpdir(T));
    c = tft_config(T, train, val, out);
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
    FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "batch_tokens", "64"));
    t0 = fat5__now_s();
    FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
    secs = fat5__now_s() - t0;
    m = fat5_train_model(t);
    FAT5_REQUIRE(T, m->cfg.num_labels == LABELS);
    for (i = 0; i < LABELS; i += 997) {
        snprintf(want, sizeof want, "c%05lld", (long long)i);
        FAT5_CHECK_MSG(T, strcmp(fat5_model_label_name(m, i), want) == 0, "class %lld is '%s'", (long long)i,
                       fat5_model_label_name(m, i));
    }
    r = &t->ft->train;
    FAT5_REQUIRE(T, r->n == ROWS);
    for (i = 0; i < ROWS; i += 101) {   // row i ("r<i>") has class (i * 7919) mod 60000 (its name's number)
        const int32_t *ids = r->ids + r->at[i];
        int64_t e = fat5__ftrow_in(r, i), j, row = 0;
        for (j = 1; j < e - 1; j++) row = 10 * row + (ids[j] - 3 - '0');
        FAT5_CHECK_MSG(T, ids[e] == row * 7919 % LABELS, "row %lld: class %d", (long long)row, (int)ids[e]);
    }
    printf("  100,000 rows of 60,000 labels: the trainer made in %.2f s\n", secs);
    FAT5_CHECK_MSG(T, secs < 20, "the trainer took %.1f s to read 100,000 rows of 60,000 labels", secs);
    fat5_train_destroy(t);
}

// Batches at the limits of the sampler's buffers train and evaluate (run under ASan by make
// test-asan): rows of one token (an empty text and its EOS) fill a batch with batch_tokens rows,
// each with a class or num_labels floats; token rows as long as batch_tokens; qa rows. A row
// without tokens (a tokenizer that adds no EOS, an empty text) is refused, naming its line.
static void t_tasks_buffer_limits(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const char *const kinds[] = {"single", "multi", "tokens", "qa"};
    fat5__sb b;
    char out[600];
    int k, i, j;
    fat5__sb_init(&b, ctx);
    for (k = 0; k < 4; k++) {
        fat5_train_config c;
        fat5_trainer *t = NULL;
        fat5_train_metrics r;
        const char *rows;
        b.len = 0;
        for (i = 0; i < 150; i++) {
            if (k == 0) fat5__sb_printf(&b, "{\"text\": \"\", \"label\": \"%s\"}\n", i % 2 ? "a" : "b");
            if (k == 1) fat5__sb_printf(&b, "{\"text\": \"\", \"label\": [\"a\", \"%s\"%s]}\n", i % 2 ? "b" : "c",
                                        i % 3 ? "" : ", \"d\"");
            if (k == 2) {   // 32 one-letter words: 63 bytes and EOS, batch_tokens
                fat5__sb_puts(&b, "{\"tokens\": [");
                for (j = 0; j < 32; j++) fat5__sb_printf(&b, "%s\"%c\"", j ? ", " : "", 'a' + (i + j) % 26);
                fat5__sb_puts(&b, "], \"ner_tags\": [");
                for (j = 0; j < 32; j++) fat5__sb_printf(&b, "%s\"%s\"", j ? ", " : "", (i + j) % 3 ? "O" : "B-X");
                fat5__sb_puts(&b, "]}\n");
            }
            if (k == 3)
                fat5__sb_printf(&b, "{\"question\": \"\", \"context\": \"x%c\", \"answers\": {\"text\": [\"%c\"], "
                                "\"answer_start\": [1]}}\n", 'a' + i % 26, 'a' + i % 26);
        }
        FAT5_REQUIRE(T, !b.oom);
        rows = tk_file(T, 0, "limits.jsonl", b.buf);
        snprintf(out, sizeof out, "%s/limits%d", fat5_test_tmpdir(T), k);
        c = tft_config(T, rows, rows, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", k < 2 ? "classify" : k == 2 ? "token-classify" : "qa"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "batch_tokens", "64"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_length", "64"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "per_device_train_batch_size", "0"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "max_steps", "3"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "eval_steps", "3"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "save_steps", "0"));
        if (k == 0) FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "classifier", "encoder"));
        FAT5_REQUIRE_OK(T, fat5_train_create(ctx, &c, &t));
        if (k < 2) {   // an epoch's batches: the largest holds batch_tokens rows of one token
            fat5_batch mb;
            int64_t most = 0;
            for (j = 0; j < 3; j++) {
                FAT5_REQUIRE_OK(T, fat5__ft_next_batch(t, &mb));
                FAT5_CHECK(T, mb.n_enc_tokens == mb.n_seq);
                if (mb.n_seq > most) most = mb.n_seq;
            }
            FAT5_CHECK_MSG(T, most == 64, "%s: batches of %lld rows at most", kinds[k], (long long)most);
            t->ft->epoch = 0, t->ft->pos = 0;
        }
        if (k == 2) FAT5_CHECK(T, fat5__ftrow_in(&t->ft->train, 0) == 64);
        memset(&r, 0, sizeof r);
        while (!fat5_train_done(t))
            if (fat5_train_step(t, &r) != FAT5_OK) {
                FAT5_CHECK_MSG(T, 0, "%s: %s", kinds[k], fat5_last_error(ctx));
                break;
            }
        FAT5_CHECK_MSG(T, r.has_predict && isfinite(r.loss), "%s: step %lld, loss %g", kinds[k], (long long)r.step, r.loss);
        fat5_train_destroy(t);
    }
    {   // a byte-level BPE tokenizer without its template (no EOS added): an empty text has no tokens
        char src[600], *json = NULL, *pp;
        size_t len = 0;
        fat5_train_config c;
        fat5_trainer *t = NULL;
        fat5_status st;
        snprintf(src, sizeof src, "%s/tokenizers/bytebpe/tokenizer.json", FAT5_TEST_DATA);
        FAT5_REQUIRE_OK(T, fat5_read_file(ctx, src, (size_t)1 << 24, &json, &len));
        b.len = 0;
        pp = strstr(json, "\"post_processor\":{");
        FAT5_REQUIRE(T, pp != NULL);
        fat5__sb_printf(&b, "%.*s\"post_processor\":null,\"unused\":%s", (int)(pp - json), json,
                        pp + strlen("\"post_processor\":"));
        fat5_free(ctx, json);
        FAT5_REQUIRE(T, !b.oom);
        tk_file(T, 1, "tokenizer.json", b.buf);
        snprintf(src, sizeof src, "%s/tokenizer.json", fat5_test_tmpdir(T));
        c = tft_config(T, tk_file(T, 0, "empty.jsonl", "{\"text\": \"ab\", \"label\": \"x\"}\n{\"text\": \"\", "
                                                      "\"label\": \"y\"}\n"), NULL, fat5_test_tmpdir(T));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", "classify"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "vocab_size", "1024"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "eval_fraction", "0"));
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "tokenizer_name", src));
        st = fat5_train_create(ctx, &c, &t);
        FAT5_CHECK_MSG(T, st == FAT5_ERR_FORMAT && strstr(fat5_last_error(ctx), "empty.jsonl: line 2: the input has no tokens"),
                       "%s: %s", fat5_status_string(st), fat5_last_error(ctx));
        fat5_train_destroy(t);
    }
    fat5__sb_free(&b);
}

// bad rows: each error names the file and line and what is wrong
static void t_tasks_errors(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const struct { const char *task, *rows, *want; } cases[] = {
        {"classify", "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\", \"label\": \"z\"}\n",
         "line 2: label 'z' in 'label' is not one of the model's 2 classes"},
        {"classify", "{\"text\": \"a\", \"label\": \"x\"}\n{\"label\": \"y\"}\n", "line 2: no field 'text'"},
        {"token-classify", "{\"tokens\": [\"a\", \"b\"], \"ner_tags\": [\"O\"]}\n", "line 1: 2 words and 1 tags"},
        {"qa", "{\"question\": \"q\", \"context\": \"abc\", \"answers\": {\"text\": [\"zz\"], \"answer_start\": [1]}}\n",
         "line 1: the answer 'zz' is not at character 1 of the context"},
        {"classify", "{\"text\": \"a\", \"label\": 1}\n{\"text\": \"b\", \"label\": \"n\"}\n",
         "mix names, integers and numbers"}};
    const char *labels = tk_file(T, 4, "labels.txt", "x\ny\n");
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[600];
        const char *rows = tk_file(T, 5, "bad.jsonl", cases[i].rows);
        fat5_train_config c;
        fat5_trainer *t = NULL;
        fat5_status st;
        snprintf(out, sizeof out, "%s/bad%d", fat5_test_tmpdir(T), (int)i);
        c = tft_config(T, rows, rows, out);
        FAT5_REQUIRE_OK(T, fat5_train_config_set(ctx, &c, "task", cases[i].task));
        if (i == 0) c.label_file = labels;
        st = fat5_train_create(ctx, &c, &t);
        FAT5_CHECK_MSG(T, st != FAT5_OK && strstr(fat5_last_error(ctx), cases[i].want) &&
                          (i == 4 || strstr(fat5_last_error(ctx), "bad.jsonl")),
                       "case %d: %s: %s", (int)i, fat5_status_string(st), fat5_last_error(ctx));
        fat5_train_destroy(t);
    }
}

#define FAT5_TESTS_TASKS(X) X(tasks_metrics) X(tasks_classify) X(tasks_rows) X(tasks_token_qa_runs) X(tasks_errors) X(tasks_label_map) X(tasks_many_labels) X(tasks_buffer_limits) \
    FAT5_TESTS_TASKS_GPU(X)
