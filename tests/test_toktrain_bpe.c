// Tokenizer training, BPE: fat5_tokenizer_train's vocabulary and merges against `tokenizers`'
// BpeTrainer (tests/data/tokenizers/toktrain_bpe.json, written by ref/make_toktrain_bpe.py: the
// corpora, and each case's settings, pieces by id and merges by rank), the same result for every
// thread count, min_frequency / limit_alphabet / max_token_length as BpeTrainer reads them, the
// written directory loaded back and round-tripping text, and the errors.

#define FAT5_TESTS_TOKTRAIN_BPE(X) X(toktrain_bpe_fixture) X(toktrain_bpe_threads) X(toktrain_bpe_limits) \
    X(toktrain_bpe_roundtrip) X(toktrain_bpe_errors)

typedef struct ttb_fix {
    char *text;
    fat5__jdoc *doc;
} ttb_fix;

static int ttb_load(fat5_test *T, ttb_fix *f) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t len = 0;
    memset(f, 0, sizeof *f);
    if (fat5__read_file(ctx, "tests/data/tokenizers/toktrain_bpe.json", (size_t)1 << 24, &f->text, &len) ||
        fat5__json_parse(ctx, "toktrain_bpe.json", f->text, len, 16, &f->doc)) {
        fat5_test_fail(T, __FILE__, __LINE__, "toktrain_bpe.json: %s", fat5_last_error(ctx));
        return 0;
    }
    return 1;
}
static void ttb_unload(fat5_test *T, ttb_fix *f) {
    fat5__json_free(fat5_test_ctx(T), f->doc);
    fat5__free(fat5_test_ctx(T), f->text);
}

static const fat5__json *ttb_case(const ttb_fix *f, const char *name) {
    const fat5__json *c;
    for (c = fat5__json_get(fat5__json_root(f->doc), "cases")->child; c; c = c->next)
        if (!strcmp(fat5__json_get(c, "name")->str, name)) return c;
    return NULL;
}
static int64_t ttb_int(const fat5__json *o, const char *key) { return atoll(fat5__json_get(o, key)->str); }

// The corpus ("fortunes": the fortunes sentences then the multilingual ones; "multi": those alone)
// written one sentence a line to name in the test's directory; its path (static storage, 2 slots)
static const char *ttb_corpus(fat5_test *T, const ttb_fix *f, const char *corpus, const char *name) {
    static char path[2][600];
    static int slot;
    const fat5__json *s;
    FILE *fp;
    int k;
    char *p = path[slot++ & 1];
    snprintf(p, 600, "%s/%s", fat5_test_tmpdir(T), name);
    fp = fopen(p, "wb");
    if (!fp) return NULL;
    for (k = strcmp(corpus, "fortunes") ? 1 : 0; k < 2; k++)
        for (s = fat5__json_get(fat5__json_root(f->doc), k ? "multi" : "fortunes")->child; s; s = s->next)
            fprintf(fp, "%s\n", s->str);
    fclose(fp);
    return p;
}

// a case's settings (its symbols: pointers into the fixture, kept in static storage)
static fat5_tokenizer_train_config ttb_config(const fat5__json *c) {
    static const char *sym[2][8];
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    int k;
    cfg.model_type = "bpe";
    cfg.input_format = "text";
    cfg.verbose = 0;
    cfg.extra_ids = 0;
    cfg.num_threads = 1;
    if (c) {
        cfg.vocab_size = ttb_int(c, "vocab_size");
        cfg.byte_level = (int)ttb_int(c, "byte_level");
        cfg.normalization_rule_name = fat5__json_get(c, "normalization_rule_name")->str;
        cfg.min_frequency = ttb_int(c, "min_frequency");
        cfg.limit_alphabet = ttb_int(c, "limit_alphabet");
        cfg.max_token_length = (int)ttb_int(c, "max_token_length");
        cfg.control_symbols = sym[0];
        cfg.user_defined_symbols = sym[1];
        for (k = 0; k < 2; k++) {
            const fat5__json *e = fat5__json_get(c, k ? "user_defined_symbols" : "control_symbols");
            int n = 0;
            for (e = e ? e->child : NULL; e && n < 8; e = e->next) sym[k][n++] = e->str;
            if (k) cfg.n_user_defined_symbols = n;
            else cfg.n_control_symbols = n;
        }
    }
    return cfg;
}

// the trainer on file's sentences as fat5_tokenizer_train runs it (read, deduplicated, trained)
static fat5_status ttb_train(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, const char *file, fat5__tt_vocab *v,
                             fat5_tokenizer_train_report *rep) {
    fat5__tt_corpus c;
    fat5_status st;
    memset(&c, 0, sizeof c);
    memset(rep, 0, sizeof *rep);
    memset(v, 0, sizeof *v);
    if (!(st = fat5__tt_read(ctx, cfg, &file, 1, &c, rep)) && !(st = fat5__tt_corpus_dedup(ctx, &c)))
        st = fat5__tt_bpe(ctx, cfg, &c, v, rep);
    fat5__tt_corpus_free(ctx, &c);
    return st;
}

// v equals the case's pieces (by id) and merges (by rank); the first difference is printed
static int ttb_same_as_case(fat5_test *T, const char *what, const fat5__tt_vocab *v, const fat5__json *c) {
    const fat5__json *vo = fat5__json_get(c, "vocab"), *me = fat5__json_get(c, "merges"), *e;
    int64_t i;
    if (v->n != (int64_t)vo->n || v->n_merges != (int64_t)me->n) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: %lld pieces, %lld merges; tokenizers: %zu, %zu", what,
                       (long long)v->n, (long long)v->n_merges, vo->n, me->n);
        return 0;
    }
    int64_t nctl = (int64_t)fat5__json_get(c, "control_symbols")->n, nusr = (int64_t)fat5__json_get(c, "user_defined_symbols")->n;
    for (i = 0, e = vo->child; e; e = e->next, i++) {
        int want_type = i < 2 ? FAT5__PT_CONTROL : i == 2 ? FAT5__PT_UNKNOWN : i < 3 + nctl ? FAT5__PT_CONTROL
                      : i < 3 + nctl + nusr ? FAT5__PT_USER : FAT5__PT_NORMAL;
        if (strcmp(v->piece[i], e->str) || v->type[i] != want_type) {
            fat5_test_fail(T, __FILE__, __LINE__, "%s: piece %lld is \"%s\" (type %d); tokenizers: \"%s\"", what,
                           (long long)i, v->piece[i], v->type[i], e->str);
            return 0;
        }
    }
    for (i = 0, e = me->child; e; e = e->next, i++) {
        int64_t a = atoll(e->child->str), b = atoll(e->child->next->str);
        if (v->merges[2 * i] != a || v->merges[2 * i + 1] != b) {
            fat5_test_fail(T, __FILE__, __LINE__, "%s: merge %lld is (%d, %d) \"%s\" + \"%s\"; tokenizers: (%lld, %lld)",
                           what, (long long)i, v->merges[2 * i], v->merges[2 * i + 1], v->piece[v->merges[2 * i]],
                           v->piece[v->merges[2 * i + 1]], (long long)a, (long long)b);
            return 0;
        }
    }
    return 1;
}

static int ttb_same(const fat5__tt_vocab *a, const fat5__tt_vocab *b) {
    int64_t i;
    if (a->n != b->n || a->n_merges != b->n_merges) return 0;
    for (i = 0; i < a->n; i++)
        if (strcmp(a->piece[i], b->piece[i]) || a->type[i] != b->type[i]) return 0;
    return !memcmp(a->merges, b->merges, (size_t)a->n_merges * 2 * sizeof(int32_t));
}

// Every case of the fixture: the same pieces, ids, merges and alphabet as tokenizers' BpeTrainer
// (Metaspace and ByteLevel, NFKC and identity, min_frequency, limit_alphabet, max_token_length,
// control and user-defined symbols, one of them a character and one a merge's text)
static void t_toktrain_bpe_fixture(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    ttb_fix f;
    const fat5__json *c;
    int n = 0;
    if (!ttb_load(T, &f)) return;
    for (c = fat5__json_get(fat5__json_root(f.doc), "cases")->child; c; c = c->next, n++) {
        fat5_tokenizer_train_config cfg = ttb_config(c);
        fat5_tokenizer_train_report rep;
        fat5__tt_vocab v;
        const char *name = fat5__json_get(c, "name")->str;
        const char *file = ttb_corpus(T, &f, fat5__json_get(c, "corpus")->str, "corpus.txt");
        fat5_status st = ttb_train(ctx, &cfg, file, &v, &rep);
        FAT5_CHECK_MSG(T, st == FAT5_OK, "%s: %s", name, fat5_last_error(ctx));
        if (!st) {
            ttb_same_as_case(T, name, &v, c);
            FAT5_CHECK_MSG(T, rep.alphabet_size == ttb_int(c, "alphabet_size"), "%s: alphabet %lld, tokenizers %lld",
                           name, (long long)rep.alphabet_size, (long long)ttb_int(c, "alphabet_size"));
            FAT5_CHECK_MSG(T, rep.rounds == (int)v.n_merges, "%s: %d rounds, %lld merges", name, rep.rounds,
                           (long long)v.n_merges);
        }
        fat5__tt_vocab_free(ctx, &v);
    }
    FAT5_CHECK(T, n == 8);
    ttb_unload(T, &f);
}

// The same vocabulary for 1, 2, 3 and 5 threads (the words split among them, and, the tests
// setting FAT5__BPE_PAR_MIN low, every merge's words too)
static void t_toktrain_bpe_threads(fat5_test *T) {
    static const char *names[] = {"fortunes_metaspace", "multi_bytelevel", "fortunes_limits"};
    static const int threads[] = {2, 3, 5};
    fat5_ctx *ctx = fat5_test_ctx(T);
    ttb_fix f;
    int k, j;
    if (!ttb_load(T, &f)) return;
    for (k = 0; k < 3; k++) {
        const fat5__json *c = ttb_case(&f, names[k]);
        fat5_tokenizer_train_config cfg = ttb_config(c);
        fat5_tokenizer_train_report rep;
        fat5__tt_vocab one, v;
        const char *file = ttb_corpus(T, &f, fat5__json_get(c, "corpus")->str, "corpus.txt");
        FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &one, &rep));
        FAT5_CHECK(T, ttb_same_as_case(T, names[k], &one, c));
        for (j = 0; j < 3; j++) {
            cfg.num_threads = threads[j];
            FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &v, &rep));
            FAT5_CHECK_MSG(T, ttb_same(&one, &v), "%s: %d threads give another vocabulary", names[k], threads[j]);
            fat5__tt_vocab_free(ctx, &v);
        }
        fat5__tt_vocab_free(ctx, &one);
    }
    ttb_unload(T, &f);
}

static int32_t ttb_nchars(const char *s) {
    int32_t k = 0;
    for (; *s; s++) k += ((unsigned char)*s & 0xC0) != 0x80;
    return k;
}

// min_frequency only stops the merges earlier (its merges are the first ones of a run without
// it); limit_alphabet keeps the most frequent characters (counted here from the sentences as
// Metaspace words them, no normaliser); with max_token_length 3 no piece is longer than 2
// characters (a pair next to a new piece is counted only below the limit)
static void t_toktrain_bpe_limits(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    ttb_fix f;
    fat5_tokenizer_train_config cfg;
    fat5_tokenizer_train_report rep, rep2;
    fat5__tt_vocab a, b;
    const char *file;
    const fat5__json *s;
    int64_t i;
    if (!ttb_load(T, &f)) return;
    file = ttb_corpus(T, &f, "fortunes", "corpus.txt");
    // min_frequency
    cfg = ttb_config(NULL);
    cfg.vocab_size = 1500;
    FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &a, &rep));
    cfg.min_frequency = 25;
    FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &b, &rep2));
    FAT5_CHECK(T, a.n == 1500 && b.n < a.n && b.n_merges > 0 && b.n_merges < a.n_merges);
    FAT5_CHECK(T, !memcmp(a.merges, b.merges, (size_t)b.n_merges * 2 * sizeof(int32_t)));
    for (i = 0; i < b.n; i++) FAT5_CHECK(T, !strcmp(a.piece[i], b.piece[i]));
    fat5__tt_vocab_free(ctx, &a);
    fat5__tt_vocab_free(ctx, &b);
    // limit_alphabet: the kept characters are the most frequent
    cfg = ttb_config(NULL);
    cfg.vocab_size = 400;
    cfg.normalization_rule_name = "identity";
    cfg.limit_alphabet = 60;
    FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &a, &rep));
    FAT5_CHECK(T, rep.alphabet_size == 60);
    {
        // code point -> count over the words (a space as U+2581, one more before a sentence
        // that does not start with a space)
        int64_t *cnt = FAT5__CAST(int64_t *, calloc(0x110000, sizeof(int64_t)));
        int64_t min_kept = INT64_MAX, max_dropped = 0;
        uint32_t cp;
        int k;
        FAT5_REQUIRE(T, cnt != NULL);
        for (k = 0; k < 2; k++)
            for (s = fat5__json_get(fat5__json_root(f.doc), k ? "multi" : "fortunes")->child; s; s = s->next) {
                size_t j, l;
                if (s->str[0] != ' ') cnt[0x2581]++;
                for (j = 0; j < s->len; j += l) {
                    cp = fat5__utf8_cp(s->str + j, s->len - j, &l);
                    cnt[cp == ' ' ? 0x2581 : cp]++;
                }
            }
        for (i = 3; i < 63; i++) {
            size_t l;
            FAT5_CHECK(T, ttb_nchars(a.piece[i]) == 1);
            cp = fat5__utf8_cp(a.piece[i], strlen(a.piece[i]), &l);
            if (cnt[cp] < min_kept) min_kept = cnt[cp];
            cnt[cp] = -cnt[cp];   // kept
        }
        for (cp = 0; cp < 0x110000; cp++)
            if (cnt[cp] > max_dropped) max_dropped = cnt[cp];
        FAT5_CHECK_MSG(T, max_dropped > 0 && min_kept > max_dropped, "kept characters seen %lld times or more, a dropped "
                       "one %lld times", (long long)min_kept, (long long)max_dropped);
        free(cnt);
    }
    fat5__tt_vocab_free(ctx, &a);
    // max_token_length 3: pieces of 1 or 2 characters only, yet merges go on
    cfg = ttb_config(NULL);
    cfg.vocab_size = 900;
    cfg.max_token_length = 3;
    FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &a, &rep));
    FAT5_CHECK(T, a.n_merges > 300);
    for (i = 3; i < a.n; i++) FAT5_CHECK_MSG(T, ttb_nchars(a.piece[i]) <= 2, "piece %lld \"%s\"", (long long)i, a.piece[i]);
    fat5__tt_vocab_free(ctx, &a);
    ttb_unload(T, &f);
}

// The written directory (fat5_tokenizer_train) loaded with fat5_tokenizer_load: the trained ids,
// no unknown piece on the corpus, under one token per two bytes, and ASCII sentences decoded back
// (Metaspace: those that do not start with a space, whose leading "\u2581" the decoder strips)
static void t_toktrain_bpe_roundtrip(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    ttb_fix f;
    int bl;
    if (!ttb_load(T, &f)) return;
    for (bl = 0; bl < 2; bl++) {
        fat5_tokenizer_train_config cfg = ttb_config(NULL);
        fat5_tokenizer_train_report rep;
        fat5_tokenizer *t = NULL;
        const char *file = ttb_corpus(T, &f, "fortunes", "corpus.txt");
        const fat5__json *s;
        char dir[700];
        int64_t tokens = 0, bytes = 0, checked = 0, unk;
        snprintf(dir, sizeof dir, "%s/tok%d", fat5_test_tmpdir(T), bl);
        cfg.vocab_size = 1000;
        cfg.byte_level = bl;
        cfg.extra_ids = 10;
        FAT5_REQUIRE_OK(T, fat5_tokenizer_train(ctx, &cfg, &file, 1, dir, &rep));
        FAT5_CHECK(T, rep.vocab_size == 1010 && rep.sentences_used == 3000 + 30);
        FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, dir, &t));
        FAT5_CHECK(T, fat5_tokenizer_vocab_size(t) == 1010);
        FAT5_CHECK(T, !strcmp(fat5_tokenizer_id_to_piece(t, 1009), "<extra_id_0>"));
        unk = fat5_tokenizer_piece_to_id(t, "<unk>");
        FAT5_CHECK(T, unk == 2);
        for (s = fat5__json_get(fat5__json_root(f.doc), "fortunes")->child; s; s = s->next) {
            int32_t *ids = NULL;
            int64_t n = 0, j;
            char *back = NULL;
            size_t blen = 0, k;
            int ascii = 1;
            FAT5_REQUIRE_OK(T, fat5_tokenize(t, s->str, s->len, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &n));
            for (j = 0; j < n; j++) FAT5_CHECK(T, ids[j] >= 3 && ids[j] < 1000);
            tokens += n;
            bytes += (int64_t)s->len;
            for (k = 0; k < s->len; k++) ascii &= (unsigned char)s->str[k] < 0x80;
            if (ascii && (bl || s->str[0] != ' ')) {
                FAT5_REQUIRE_OK(T, fat5_detokenize(t, ids, n, 0, &back, &blen));
                FAT5_CHECK_MSG(T, blen == s->len && !memcmp(back, s->str, blen), "\"%s\" decodes to \"%s\"", s->str, back);
                checked++;
                fat5_free(ctx, back);
            }
            fat5_free(ctx, ids);
        }
        FAT5_CHECK(T, checked > 2500);
        FAT5_CHECK_MSG(T, tokens * 2 < bytes, "%lld tokens for %lld bytes", (long long)tokens, (long long)bytes);
        fat5_tokenizer_destroy(t);
    }
    ttb_unload(T, &f);
}

// vocab_size below the special pieces and the alphabet: the numbers named; an empty corpus
static void t_toktrain_bpe_errors(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    ttb_fix f;
    fat5_tokenizer_train_config cfg;
    fat5_tokenizer_train_report rep;
    fat5__tt_vocab v;
    const char *file, *msg;
    char want[200], dir[700];
    int64_t alphabet;
    FILE *fp;
    if (!ttb_load(T, &f)) return;
    file = ttb_corpus(T, &f, "multi", "corpus.txt");
    cfg = ttb_config(NULL);
    cfg.vocab_size = 400;
    FAT5_REQUIRE_OK(T, ttb_train(ctx, &cfg, file, &v, &rep));
    alphabet = rep.alphabet_size;
    fat5__tt_vocab_free(ctx, &v);
    cfg.vocab_size = 100;
    FAT5_CHECK(T, ttb_train(ctx, &cfg, file, &v, &rep) == FAT5_ERR_INVALID_ARG);
    fat5__tt_vocab_free(ctx, &v);
    msg = fat5_last_error(ctx);
    snprintf(want, sizeof want, "vocab_size 100 is smaller than the 3 special pieces and the %lld characters",
             (long long)alphabet);
    FAT5_CHECK_MSG(T, strstr(msg, want) != NULL, "message: %s", msg);
    cfg.byte_level = 1;
    cfg.vocab_size = 258;
    FAT5_CHECK(T, ttb_train(ctx, &cfg, file, &v, &rep) == FAT5_ERR_INVALID_ARG);
    fat5__tt_vocab_free(ctx, &v);
    msg = fat5_last_error(ctx);
    FAT5_CHECK_MSG(T, strstr(msg, "vocab_size 258") && strstr(msg, "the 256 characters"), "message: %s", msg);
    cfg.vocab_size = 259;   // exactly the special pieces and the alphabet: no merge
    FAT5_CHECK(T, ttb_train(ctx, &cfg, file, &v, &rep) == FAT5_OK && v.n == 259 && v.n_merges == 0);
    fat5__tt_vocab_free(ctx, &v);
    // an empty corpus
    snprintf(dir, sizeof dir, "%s/empty.txt", fat5_test_tmpdir(T));
    fp = fopen(dir, "wb");
    FAT5_REQUIRE(T, fp != NULL);
    fputs("\n\n", fp);
    fclose(fp);
    file = dir;
    cfg = ttb_config(NULL);
    snprintf(want, sizeof want, "%s/out", fat5_test_tmpdir(T));
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, &file, 1, want, &rep) == FAT5_ERR_INVALID_ARG);
    msg = fat5_last_error(ctx);
    FAT5_CHECK_MSG(T, strstr(msg, "no sentence") != NULL, "message: %s", msg);
    ttb_unload(T, &f);
}
