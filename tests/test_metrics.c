// test_metrics.c — section [8.5]: exact match / F1, ROUGE, BLEU and the Porter stemmer against
// the values of the SQuAD v1.1 evaluation logic, rouge_score, sacrebleu and nltk on fixed strings
// (tests/data/metrics/metrics.json, written by ref/make_metrics_fixture.py). Every value must
// agree to 1e-9 relative (zero exactly): these are exact computations on the same token counts.

#define TM_FIXTURE "tests/data/metrics/metrics.json"

// a == b to 1e-9 relative
static int tm_close(double a, double b) { return a == b || fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

static double tm_num(const fat5__json *v) {
    double d = NAN;
    if (!fat5__json_as_double(v, &d)) d = NAN;
    return d;
}

// the fixture's root (parsed into *doc, text in *text); NULL when it cannot be read
static const fat5__json *tm_load(fat5_test *T, fat5__jdoc **doc, char **text) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t len = 0;
    *doc = NULL;
    *text = NULL;
    if (fat5__read_file(ctx, TM_FIXTURE, (size_t)16 << 20, text, &len) != FAT5_OK ||
        fat5__json_parse(ctx, TM_FIXTURE, *text, len, 16, doc) != FAT5_OK) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: %s", TM_FIXTURE, fat5_last_error(ctx));
        return NULL;
    }
    return fat5__json_root(*doc);
}

static void tm_unload(fat5_test *T, fat5__jdoc *doc, char *text) {
    fat5__json_free(fat5_test_ctx(T), doc);
    fat5__free(fat5_test_ctx(T), text);
}

// the strings of a JSON array in a malloc'ed array
static const char **tm_strings(const fat5__json *a) {
    const char **s = (const char **)calloc(a->n ? a->n : 1, sizeof *s);
    const fat5__json *e;
    size_t i = 0;
    for (e = a->child; e; e = e->next) s[i++] = e->str;
    return s;
}

// an array of arrays of strings, flattened: *refs (malloc'ed) and offsets[0..n] (malloc'ed)
static void tm_ref_lists(const fat5__json *lists, const char ***refs, int64_t **offsets) {
    const fat5__json *l, *e;
    size_t total = 0, i = 0, k = 0;
    for (l = lists->child; l; l = l->next) total += l->n;
    *refs = (const char **)calloc(total ? total : 1, sizeof **refs);
    *offsets = (int64_t *)calloc(lists->n + 1, sizeof **offsets);
    for (l = lists->child; l; l = l->next) {
        for (e = l->child; e; e = e->next) (*refs)[i++] = e->str;
        (*offsets)[++k] = (int64_t)i;
    }
}

// checks a fat5_rouge_score against a fixture's [precision, recall, fmeasure]
static int tm_check_score(fat5_test *T, const char *what, int idx, const char *kind, const fat5_rouge_score *s,
                          const fat5__json *want) {
    double w[3];
    const fat5__json *e = want ? want->child : NULL;
    int i;
    for (i = 0; i < 3; i++, e = e ? e->next : NULL) w[i] = tm_num(e);
    if (tm_close(s->precision, w[0]) && tm_close(s->recall, w[1]) && tm_close(s->fmeasure, w[2])) return 0;
    fat5_test_fail(T, __FILE__, __LINE__, "%s %d %s: got P %.17g R %.17g F %.17g, want %.17g %.17g %.17g", what, idx,
                   kind, s->precision, s->recall, s->fmeasure, w[0], w[1], w[2]);
    return 1;
}

static int tm_check_rouge(fat5_test *T, const char *what, int idx, const fat5_rouge *r, const fat5__json *e) {
    return tm_check_score(T, what, idx, "rouge1", &r->rouge1, fat5__json_get(e, "rouge1")) +
           tm_check_score(T, what, idx, "rouge2", &r->rouge2, fat5__json_get(e, "rouge2")) +
           tm_check_score(T, what, idx, "rougeL", &r->rougeL, fat5__json_get(e, "rougeL")) +
           tm_check_score(T, what, idx, "rougeLsum", &r->rougeLsum, fat5__json_get(e, "rougeLsum"));
}

// nltk's PorterStemmer().stem on every fixture word
static void t_metrics_porter(fat5_test *T) {
    fat5__jdoc *doc;
    char *text, out[256];
    const fat5__json *root = tm_load(T, &doc, &text), *e;
    int n = 0, bad = 0;
    if (!root) return;
    for (e = fat5__json_get(root, "porter")->child; e; e = e->next, n++) {
        const char *w = e->child->str, *want = e->child->next->str;
        size_t k;
        FAT5_REQUIRE(T, strlen(w) < sizeof out);
        k = fat5_porter_stem(w, strlen(w), out);
        if (k != strlen(want) || strcmp(out, want) != 0) {
            if (bad++ < 20) fat5_test_fail(T, __FILE__, __LINE__, "stem(%s) = %s, nltk: %s", w, out, want);
        }
    }
    FAT5_CHECK(T, n > 1000);
    // capitals are lowered first, as nltk's stem does
    FAT5_CHECK(T, fat5_porter_stem("Running", 7, out) == 3 && strcmp(out, "run") == 0);
    printf("  %d words, %d differ from nltk %s\n", n, bad, fat5__json_get(fat5__json_get(root, "versions"), "nltk")->str);
    tm_unload(T, doc, text);
}

// Python's str.lower() on every code point it changes (the first step of SQuAD's and ROUGE's
// normalisation); the final sigma in context is in the SQuAD cases
static void t_metrics_lower(fat5_test *T) {
    fat5__jdoc *doc;
    char *text;
    const fat5__json *root = tm_load(T, &doc, &text), *e;
    int n = 0, bad = 0;
    if (!root) return;
    for (e = fat5__json_get(root, "lower")->child; e; e = e->next, n++) {
        char in[4];
        size_t len = fat5__utf8_put(in, (uint32_t)tm_num(e->child));
        fat5__sb b;
        fat5__sb_init(&b, fat5_test_ctx(T));
        fat5__sb_putn(&b, "", 0);
        fat5__tm_py_lower(&b, in, len);
        if (b.oom || b.len != e->child->next->len || memcmp(b.buf, e->child->next->str, b.len) != 0) {
            if (bad++ < 20)
                fat5_test_fail(T, __FILE__, __LINE__, "lower(U+%04X): %zu bytes, Python: %zu bytes", (unsigned)tm_num(e->child),
                               b.len, e->child->next->len);
        }
        fat5__sb_free(&b);
    }
    FAT5_CHECK(T, n > 1000);
    printf("  %d code points, %d differ from Python\n", n, bad);
    tm_unload(T, doc, text);
}

// SQuAD v1.1: every pair's exact match and F1, each case as a corpus of one, and the whole corpus
static void t_metrics_squad(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *doc;
    char *text;
    const fat5__json *root = tm_load(T, &doc, &text), *e, *sc;
    const char **preds, **refs;
    int64_t *offsets, n = 0;
    double em, f1;
    int idx = 0;
    if (!root) return;
    sc = fat5__json_get(root, "squad");
    FAT5_REQUIRE(T, sc && sc->n >= 30);
    preds = (const char **)calloc(sc->n, sizeof *preds);
    for (e = sc->child; e; e = e->next, idx++) {
        const fat5__json *r = fat5__json_get(e, "refs")->child, *we = fat5__json_get(e, "em")->child,
                         *wf = fat5__json_get(e, "f1")->child;
        const char *pred = fat5__json_get(e, "pred")->str;
        const char **one;
        double best_em = 0, best_f1 = 0, cem, cf1;
        int j = 0;
        preds[n++] = pred;
        for (; r; r = r->next, we = we->next, wf = wf->next, j++) {
            FAT5_REQUIRE_OK(T, fat5_metric_squad(ctx, pred, r->str, &em, &f1));
            FAT5_CHECK_MSG(T, tm_close(em, tm_num(we)) && tm_close(f1, tm_num(wf)),
                           "squad %d ref %d: em %g f1 %.17g, want %g %.17g", idx, j, em, f1, tm_num(we), tm_num(wf));
            if (j == 0 || tm_num(we) > best_em) best_em = tm_num(we);
            if (j == 0 || tm_num(wf) > best_f1) best_f1 = tm_num(wf);
        }
        // this case alone as a corpus: the best over its references, in percent
        one = tm_strings(fat5__json_get(e, "refs"));
        {
            int64_t off[2];
            off[0] = 0;
            off[1] = (int64_t)fat5__json_get(e, "refs")->n;
            FAT5_REQUIRE_OK(T, fat5_metric_squad_corpus(ctx, &pred, 1, one, off, &cem, &cf1));
        }
        FAT5_CHECK_MSG(T, tm_close(cem, 100.0 * best_em) && tm_close(cf1, 100.0 * best_f1),
                       "squad %d as a corpus: %.17g %.17g, want %.17g %.17g", idx, cem, cf1, 100.0 * best_em,
                       100.0 * best_f1);
        free(one);
    }
    {
        // the whole corpus: references gathered per case
        size_t total = 0, i = 0;
        int64_t k = 0;
        for (e = sc->child; e; e = e->next) total += fat5__json_get(e, "refs")->n;
        refs = (const char **)calloc(total, sizeof *refs);
        offsets = (int64_t *)calloc((size_t)n + 1, sizeof *offsets);
        for (e = sc->child; e; e = e->next) {
            const fat5__json *r;
            for (r = fat5__json_get(e, "refs")->child; r; r = r->next) refs[i++] = r->str;
            offsets[++k] = (int64_t)i;
        }
    }
    FAT5_REQUIRE_OK(T, fat5_metric_squad_corpus(ctx, preds, n, refs, offsets, &em, &f1));
    {
        const fat5__json *want = fat5__json_get(root, "squad_corpus");
        FAT5_CHECK_MSG(T, tm_close(em, tm_num(fat5__json_get(want, "em"))) &&
                              tm_close(f1, tm_num(fat5__json_get(want, "f1"))),
                       "squad corpus: em %.17g f1 %.17g, want %.17g %.17g", em, f1,
                       tm_num(fat5__json_get(want, "em")), tm_num(fat5__json_get(want, "f1")));
        printf("  %lld cases; corpus em %.6f f1 %.6f\n", (long long)n, em, f1);
    }
    free(preds);
    free(refs);
    free(offsets);
    tm_unload(T, doc, text);
}

// rouge_score: every pair, with and without the stemmer, and the corpus means
static void t_metrics_rouge(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *doc;
    char *text;
    const fat5__json *root = tm_load(T, &doc, &text), *e;
    int idx = 0, bad = 0;
    fat5_rouge r;
    if (!root) return;
    FAT5_REQUIRE(T, fat5__json_get(root, "rouge")->n >= 80);
    for (e = fat5__json_get(root, "rouge")->child; e; e = e->next, idx++) {
        int stem = (int)tm_num(fat5__json_get(e, "stem"));
        FAT5_REQUIRE_OK(T, fat5_metric_rouge(ctx, fat5__json_get(e, "pred")->str, fat5__json_get(e, "ref")->str,
                                             stem, &r));
        bad += tm_check_rouge(T, "rouge pair", idx, &r, e);
    }
    idx = 0;
    for (e = fat5__json_get(root, "rouge_corpus")->child; e; e = e->next, idx++) {
        const fat5__json *pj = fat5__json_get(e, "preds");
        const char **preds = tm_strings(pj), **refs;
        int64_t *offsets;
        tm_ref_lists(fat5__json_get(e, "refs"), &refs, &offsets);
        if (fat5_metric_rouge_corpus(ctx, preds, (int64_t)pj->n, refs, offsets,
                                     (int)tm_num(fat5__json_get(e, "stem")), &r) != FAT5_OK)
            fat5_test_fail(T, __FILE__, __LINE__, "rouge corpus %d: %s", idx, fat5_last_error(ctx));
        else bad += tm_check_rouge(T, "rouge corpus", idx, &r, e);
        free(preds);
        free(refs);
        free(offsets);
    }
    FAT5_CHECK(T, idx == 4);
    printf("  %d pairs, %d corpora, %d mismatches (rouge_score %s)\n", (int)fat5__json_get(root, "rouge")->n, idx,
           bad, fat5__json_get(fat5__json_get(root, "versions"), "rouge_score")->str);
    tm_unload(T, doc, text);
}

// sacrebleu's corpus BLEU: score, precisions, brevity penalty, lengths and counts of every corpus
static void t_metrics_bleu(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *doc;
    char *text;
    const fat5__json *root = tm_load(T, &doc, &text), *e;
    int idx = 0;
    if (!root) return;
    FAT5_REQUIRE(T, fat5__json_get(root, "bleu")->n >= 40);
    for (e = fat5__json_get(root, "bleu")->child; e; e = e->next, idx++) {
        const fat5__json *pj = fat5__json_get(e, "preds"), *pr = fat5__json_get(e, "precisions")->child,
                         *cj = fat5__json_get(e, "counts")->child, *tj = fat5__json_get(e, "totals")->child;
        const char **preds = tm_strings(pj), **refs;
        int64_t *offsets;
        fat5_bleu b;
        int k, ok;
        tm_ref_lists(fat5__json_get(e, "refs"), &refs, &offsets);
        if (fat5_metric_bleu(ctx, preds, (int64_t)pj->n, refs, offsets, &b) != FAT5_OK) {
            fat5_test_fail(T, __FILE__, __LINE__, "bleu %d: %s", idx, fat5_last_error(ctx));
        } else {
            ok = tm_close(b.score, tm_num(fat5__json_get(e, "score"))) && tm_close(b.bp, tm_num(fat5__json_get(e, "bp"))) &&
                 b.sys_len == (int64_t)tm_num(fat5__json_get(e, "sys_len")) &&
                 b.ref_len == (int64_t)tm_num(fat5__json_get(e, "ref_len"));
            for (k = 0; k < 4; k++, pr = pr->next, cj = cj->next, tj = tj->next)
                ok = ok && tm_close(b.precisions[k], tm_num(pr)) && b.correct[k] == (int64_t)tm_num(cj) &&
                     b.total[k] == (int64_t)tm_num(tj);
            FAT5_CHECK_MSG(T, ok, "bleu %d: score %.17g bp %.17g len %lld / %lld, want %.17g %.17g %lld / %lld", idx,
                           b.score, b.bp, (long long)b.sys_len, (long long)b.ref_len,
                           tm_num(fat5__json_get(e, "score")), tm_num(fat5__json_get(e, "bp")),
                           (long long)tm_num(fat5__json_get(e, "sys_len")), (long long)tm_num(fat5__json_get(e, "ref_len")));
        }
        free(preds);
        free(refs);
        free(offsets);
    }
    printf("  %d corpora (sacrebleu %s)\n", idx, fat5__json_get(fat5__json_get(root, "versions"), "sacrebleu")->str);
    tm_unload(T, doc, text);
}

// bad arguments: each refused with FAT5_ERR_INVALID_ARG and a message, nothing written
static void t_metrics_errors(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *bad_utf8[] = {"caf\xC3", "\xFF", "a\xC0\xAF", "\xED\xA0\x80"};
    const char *good[] = {"a b c d e", "f g h i j"};
    int64_t offs_empty[3] = {0, 1, 1}, offs_start[3] = {1, 2, 3};
    double em = -1, f1 = -1;
    fat5_rouge r;
    fat5_bleu b;
    size_t i;
    for (i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
        const char *p[1];
        p[0] = bad_utf8[i];
        FAT5_CHECK(T, fat5_metric_squad(ctx, bad_utf8[i], "x", &em, &f1) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, strstr(fat5_last_error(ctx), "not valid UTF-8") != NULL);
        FAT5_CHECK(T, em == -1 && f1 == -1);
        FAT5_CHECK(T, fat5_metric_squad(ctx, "x", bad_utf8[i], &em, &f1) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5_metric_rouge(ctx, bad_utf8[i], "x", 1, &r) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5_metric_rouge(ctx, "x", bad_utf8[i], 0, &r) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5_metric_bleu(ctx, p, 1, good, NULL, &b) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5_metric_bleu(ctx, good, 1, p, NULL, &b) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5_metric_squad_corpus(ctx, good, 1, p, NULL, &em, &f1) == FAT5_ERR_INVALID_ARG);
        FAT5_CHECK(T, fat5_metric_rouge_corpus(ctx, p, 1, good, NULL, 0, &r) == FAT5_ERR_INVALID_ARG);
    }
    FAT5_CHECK(T, fat5_metric_squad(ctx, NULL, "x", &em, &f1) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_metric_rouge(ctx, "x", "y", 0, NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_metric_bleu(ctx, good, 0, good, NULL, &b) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_metric_bleu(ctx, good, 2, good, offs_empty, &b) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, strstr(fat5_last_error(ctx), "prediction 1 has no reference") != NULL);
    FAT5_CHECK(T, fat5_metric_rouge_corpus(ctx, good, 2, good, offs_start, 0, &r) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_metric_squad_corpus(ctx, good, 2, NULL, NULL, &em, &f1) == FAT5_ERR_INVALID_ARG);
    // the good inputs still work after the refusals
    FAT5_REQUIRE_OK(T, fat5_metric_bleu(ctx, good, 2, good, NULL, &b));
    FAT5_CHECK(T, tm_close(b.score, 100.0) && b.bp == 1.0 && b.sys_len == 10 && b.correct[3] == 4);
}

// allocator hooks that fail from the fail_at-th call on and count what is live
typedef struct tm_alloc { long live, calls, fail_at; } tm_alloc;
static void *tm_malloc(void *u, size_t n) {
    tm_alloc *a = (tm_alloc *)u;
    if (a->fail_at >= 0 && a->calls++ >= a->fail_at) return NULL;
    a->live++;
    return malloc(n);
}
static void *tm_realloc(void *u, void *p, size_t n) {
    tm_alloc *a = (tm_alloc *)u;
    void *q;
    if (a->fail_at >= 0 && a->calls++ >= a->fail_at) return NULL;
    q = realloc(p, n);
    if (!p && q) a->live++;
    return q;
}
static void tm_free(void *u, void *p) {
    tm_alloc *a = (tm_alloc *)u;
    if (p) a->live--;
    free(p);
}

// every allocation of each metric failing in turn: FAT5_ERR_OUT_OF_MEMORY, nothing left allocated,
// and once none fails, the same figures as with a plain context
static void t_metrics_out_of_memory(fat5_test *T) {
    const char *preds[] = {"The cats sat on the mat.\nIt was 3.14 -- or so.", "\u00c9T\u00c9 \u039f\u0394\u039f\u03a3 a b",
                           "running runners ran"};
    const char *refs[] = {"A cat sat on a mat.\nIt is 3.14.", "the cat\nsat", "\u00e9t\u00e9 \u03bf\u03b4\u03bf\u03c2",
                          "runner running\nran", "ran"};
    const int64_t offs[] = {0, 2, 3, 5};
    tm_alloc a = {0, 0, -1};
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    double want[3][2], got[2];
    fat5_rouge want_r, r;
    fat5_bleu want_b, b;
    int which;
    cc.alloc = tm_malloc;
    cc.realloc = tm_realloc;
    cc.free = tm_free;
    cc.alloc_user = &a;
    FAT5_REQUIRE(T, fat5_ctx_create(&cc, &ctx, NULL, 0) == FAT5_OK);
    FAT5_REQUIRE_OK(T, fat5_metric_squad_corpus(fat5_test_ctx(T), preds, 3, refs, offs, &want[0][0], &want[0][1]));
    FAT5_REQUIRE_OK(T, fat5_metric_rouge_corpus(fat5_test_ctx(T), preds, 3, refs, offs, 1, &want_r));
    FAT5_REQUIRE_OK(T, fat5_metric_bleu(fat5_test_ctx(T), preds, 3, refs, offs, &want_b));
    for (which = 0; which < 3; which++) {
        long k, base = a.live;
        fat5_status st = FAT5_ERR_OUT_OF_MEMORY;
        for (k = 0; st == FAT5_ERR_OUT_OF_MEMORY && k < 100000; k++) {
            a.calls = 0;
            a.fail_at = k;
            if (which == 0) st = fat5_metric_squad_corpus(ctx, preds, 3, refs, offs, &got[0], &got[1]);
            else if (which == 1) st = fat5_metric_rouge_corpus(ctx, preds, 3, refs, offs, 1, &r);
            else st = fat5_metric_bleu(ctx, preds, 3, refs, offs, &b);
            FAT5_CHECK_MSG(T, a.live == base, "metric %d, allocation %ld failing: %ld blocks left", which, k, a.live - base);
            if (st == FAT5_ERR_OUT_OF_MEMORY)
                FAT5_CHECK(T, strstr(fat5_last_error(ctx), "out of memory") != NULL);
        }
        FAT5_CHECK_MSG(T, st == FAT5_OK && k > 3, "metric %d: %s after %ld failures", which, fat5_status_string(st), k);
        printf("  metric %d: %ld allocations, each failing in turn\n", which, k - 1);
    }
    a.fail_at = -1;
    FAT5_CHECK(T, got[0] == want[0][0] && got[1] == want[0][1]);
    FAT5_CHECK(T, memcmp(&r, &want_r, sizeof r) == 0 && memcmp(&b, &want_b, sizeof b) == 0);
    fat5_ctx_destroy(ctx);
    FAT5_CHECK(T, a.live == 0);
}

#define FAT5_TESTS_METRICS(X) X(metrics_porter) X(metrics_lower) X(metrics_squad) X(metrics_rouge) X(metrics_bleu) X(metrics_errors) X(metrics_out_of_memory)
