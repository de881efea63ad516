// Tokenizers against the libraries they mirror: tests/data/tokenizers/cases.json holds, for 89
// texts in many scripts (and invalid UTF-8), the ids and texts that `tokenizers` and
// `sentencepiece` give on the fixture models (made by tools/make_tokenizers.py); real.json the
// same for the published T5 / mT5 files, checked when FAT5_REAL_TOKENIZERS names their directory
// (tools/make_tokenizers.py --real-dir DIR lays it out).

#define FAT5_TESTS_TOKENIZER(X) X(tokenizer_parity) X(tokenizer_parity_real) X(tokenizer_bad_files) \
    X(tokenizer_api) X(tokenizer_batch)

static size_t tk_unhex(const char *h, char *out) {
    size_t n = strlen(h) / 2, i;
    for (i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[n] = 0;
    return n;
}

// ids of a JSON array against got[0..n)
static int tk_same_ids(const fat5__json *want, const int32_t *got, int64_t n) {
    const fat5__json *e;
    int64_t i = 0, v;
    if (!want || want->type != FAT5__J_ARRAY || (int64_t)want->n != n) return 0;
    for (e = want->child; e; e = e->next, i++)
        if (!fat5__json_as_i64(e, &v) || v != got[i]) return 0;
    return 1;
}

static void tk_print_ids(const char *what, const int32_t *ids, int64_t n) {
    int64_t i;
    printf("    %s:", what);
    for (i = 0; i < n && i < 40; i++) printf(" %d", (int)ids[i]);
    printf("%s\n", n > 40 ? " ..." : "");
}

// checks one tokenizer entry of a cases file; returns the number of mismatches
static int tk_check_entry(fat5_test *T, const char *dir, const fat5__json *texts, const fat5__json *ent) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const fat5__json *path = fat5__json_get(ent, "path"), *tx, *enc, *encp, *dec, *decs, *pairs, *p, *e;
    char file[1024], *buf = FAT5__CAST(char *, malloc(1 << 20)), *buf2 = FAT5__CAST(char *, malloc(1 << 20));
    fat5_tokenizer *tok = NULL;
    int bad = 0, k;
    fat5_status st;
    snprintf(file, sizeof file, "%s/%s", dir, path->str);
    st = fat5_tokenizer_load(ctx, file, &tok);
    FAT5_CHECK_MSG(T, st == FAT5_OK, "%s: %s", file, fat5_last_error(ctx));
    if (st) {
        free(buf);
        free(buf2);
        return 1;
    }
    enc = fat5__json_get(ent, "encode");
    encp = fat5__json_get(ent, "encode_plain");
    dec = fat5__json_get(ent, "decode");
    decs = fat5__json_get(ent, "decode_special");
    for (k = 0, tx = texts->child; tx; tx = tx->next, k++) {
        size_t n = tk_unhex(tx->str, buf);
        int32_t *ids = NULL, *plain = NULL;
        int64_t m = 0, mp = 0;
        int w;
        const fat5__json *we = enc->child, *wp = encp->child, *wd = dec->child, *ws = decs->child;
        int j;
        for (j = 0; j < k; j++) { we = we->next; wp = wp->next; wd = wd->next; ws = ws->next; }
        if (fat5_tokenize(tok, buf, n, NULL, 0, 0, &ids, &m) || fat5_tokenize(tok, buf, n, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &plain, &mp)) {
            FAT5_CHECK_MSG(T, 0, "%s text %d: %s", path->str, k, fat5_last_error(ctx));
            bad++;
            continue;
        }
        if (!tk_same_ids(we, ids, m) || !tk_same_ids(wp, plain, mp)) {
            FAT5_CHECK_MSG(T, 0, "%s text %d (%s): ids differ", path->str, k, tx->str);
            tk_print_ids("got", ids, m);
            bad++;
        }
        for (w = 0; w < 2; w++) {   // decode of the library's ids, special tokens skipped or kept
            const fat5__json *want = w ? ws : wd, *x;
            int32_t lib[4096];
            int64_t nl = 0, v;
            char *out = NULL;
            size_t ol = 0, wl = tk_unhex(want->str, buf2);
            for (x = we->child; x && nl < 4096; x = x->next) {
                fat5__json_as_i64(x, &v);
                lib[nl++] = (int32_t)v;
            }
            if (fat5_detokenize(tok, lib, nl, w ? 0 : FAT5_DETOKENIZE_SKIP_SPECIAL, &out, &ol) || ol != wl ||
                memcmp(out, buf2, wl) != 0) {
                FAT5_CHECK_MSG(T, 0, "%s text %d: decode%s differs: got '%s' want '%s'", path->str, k,
                               w ? " (special kept)" : "", out ? out : fat5_last_error(ctx), buf2);
                bad++;
            }
            fat5_free(ctx, out);
        }
        fat5_free(ctx, ids);
        fat5_free(ctx, plain);
    }
    pairs = fat5__json_get(ent, "pairs");
    for (p = pairs ? pairs->child : NULL; p; p = p->next) {
        int64_t i, j, m = 0;
        int32_t *ids = NULL;
        const fat5__json *ta = texts->child, *tb = texts->child;
        size_t na, nb;
        fat5__json_as_i64(p->child, &i);
        fat5__json_as_i64(p->child->next, &j);
        while (i--) ta = ta->next;
        while (j--) tb = tb->next;
        na = tk_unhex(ta->str, buf);
        nb = tk_unhex(tb->str, buf2);
        if (fat5_tokenize(tok, buf, na, buf2, nb, 0, &ids, &m) || !tk_same_ids(p->child->next->next, ids, m)) {
            FAT5_CHECK_MSG(T, 0, "%s: pair (%s, %s) differs", path->str, ta->str, tb->str);
            bad++;
        }
        fat5_free(ctx, ids);
    }
    for (e = fat5__json_get(ent, "decode_ids") ? fat5__json_get(ent, "decode_ids")->child : NULL; e; e = e->next) {
        const fat5__json *x;
        int32_t lib[4096];
        int64_t nl = 0, v;
        int w;
        for (x = e->child->child; x && nl < 4096; x = x->next) {
            fat5__json_as_i64(x, &v);
            lib[nl++] = (int32_t)v;
        }
        for (w = 0; w < 2; w++) {
            char *out = NULL;
            size_t ol = 0, wl = tk_unhex(w ? e->child->next->next->str : e->child->next->str, buf2);
            if (fat5_detokenize(tok, lib, nl, w ? 0 : FAT5_DETOKENIZE_SKIP_SPECIAL, &out, &ol) || ol != wl ||
                memcmp(out, buf2, wl) != 0) {
                FAT5_CHECK_MSG(T, 0, "%s: decode_ids%s differs: got '%s' want '%s'", path->str, w ? " (special kept)" : "",
                               out ? out : fat5_last_error(ctx), buf2);
                tk_print_ids("ids", lib, nl);
                bad++;
            }
            fat5_free(ctx, out);
        }
    }
    fat5_tokenizer_destroy(tok);
    free(buf);
    free(buf2);
    return bad;
}

static void tk_check_file(fat5_test *T, const char *cases, const char *dir) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char *text = NULL;
    size_t len = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *texts, *e;
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, cases, (size_t)64 << 20, &text, &len));
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, cases, text, len, 64, &doc));
    root = fat5__json_root(doc);
    texts = fat5__json_get(root, "texts");
    FAT5_CHECK(T, texts && texts->n >= 80);
    for (e = fat5__json_get(root, "tokenizers")->child; e; e = e->next) {
        int bad = tk_check_entry(T, dir, texts, e);
        printf("  %-28s %s\n", fat5__json_get(e, "path")->str, bad ? "MISMATCH" : "identical");
    }
    fat5__json_free(ctx, doc);
    fat5__free(ctx, text);
}

static void t_tokenizer_parity(fat5_test *T) {
    tk_check_file(T, "tests/data/tokenizers/cases.json", "tests/data/tokenizers");
}

static void t_tokenizer_parity_real(fat5_test *T) {
    const char *dir = getenv("FAT5_REAL_TOKENIZERS");
    if (!dir || !dir[0]) FAT5_SKIP(T, "FAT5_REAL_TOKENIZERS is not set (tools/make_tokenizers.py --real-dir DIR)");
    tk_check_file(T, "tests/data/tokenizers/real.json", dir);
}

static void t_tokenizer_bad_files(fat5_test *T) { (void)T; }
static void t_tokenizer_api(fat5_test *T) { (void)T; }
static void t_tokenizer_batch(fat5_test *T) { (void)T; }
