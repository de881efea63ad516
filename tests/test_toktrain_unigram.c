// test_toktrain_unigram.c — section [8.10]: the Unigram tokenizer trainer (SentencePiece's
// algorithm): its suffix array against a sort, the piece rules and script table, determinism over
// runs and thread counts, pieces a corpus makes obvious, the EM objective, the alphabet kept
// through pruning, the written tokenizer read back (tokenizer.json and spiece.model), and errors.
// Corpora are made here; normalisation "identity" (no charsmap).

// A seeded corpus of n lines: words drawn from a small list, some numbers and punctuation.
static void tug_corpus(fat5_rng *r, int n, char *out, size_t cap) {
    static const char *words[] = {"the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "from",
                                  "home", "quickly", "and", "then", "slept", "under", "a", "tree", "zebra",
                                  "quartz", "jumped", "over", "lazy", "fox", "über", "naïve", "café"};
    size_t len = 0;
    int i, k;
    out[0] = 0;
    for (i = 0; i < n; i++) {
        int nw = 3 + (int)fat5_rng_below(r, 8);
        for (k = 0; k < nw; k++) {
            const char *w = words[fat5_rng_below(r, sizeof words / sizeof words[0])];
            len += (size_t)snprintf(out + len, cap - len, "%s%s", k ? " " : "", w);
            if (fat5_rng_below(r, 10) == 0) len += (size_t)snprintf(out + len, cap - len, " %d", (int)fat5_rng_below(r, 1000));
        }
        len += (size_t)snprintf(out + len, cap - len, "%s\n", fat5_rng_below(r, 3) ? "." : "!");
    }
}

static fat5_tokenizer_train_config tug_config(int64_t vocab, int threads) {
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    cfg.vocab_size = vocab;
    cfg.normalization_rule_name = "identity";
    cfg.num_threads = threads;
    cfg.verbose = 0;
    cfg.extra_ids = 0;
    return cfg;
}

// The trainer on text (lines), as fat5_tokenizer_train runs it: read, normalised, trained.
static fat5_status tug_train(fat5_test *T, const fat5_tokenizer_train_config *cfg, const char *text,
                             fat5__tt_vocab *v, fat5_tokenizer_train_report *rep) {
    char path[600];
    const char *files[1];
    fat5__tt_corpus c;
    fat5_status st;
    FILE *f;
    snprintf(path, sizeof path, "%s/corpus.txt", fat5_test_tmpdir(T));
    f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    files[0] = path;
    memset(&c, 0, sizeof c);
    memset(v, 0, sizeof *v);
    memset(rep, 0, sizeof *rep);
    st = fat5__tt_read(T->ctx, cfg, files, 1, &c, rep);
    if (!st) st = fat5__tt_normalize(T->ctx, cfg, NULL, 0, &c);
    if (!st) st = fat5__tt_unigram(T->ctx, cfg, &c, v, rep);
    fat5__tt_corpus_free(T->ctx, &c);
    return st;
}

static int tug_same(const fat5__tt_vocab *a, const fat5__tt_vocab *b) {
    int64_t i;
    if (a->n != b->n) return 0;
    for (i = 0; i < a->n; i++)
        if (strcmp(a->piece[i], b->piece[i]) || memcmp(&a->score[i], &b->score[i], sizeof(float)) || a->type[i] != b->type[i])
            return 0;
    return 1;
}

static int64_t tug_find(const fat5__tt_vocab *v, const char *s) {
    int64_t i;
    for (i = 0; i < v->n; i++)
        if (!strcmp(v->piece[i], s)) return i;
    return -1;
}

// SA-IS against sorting the suffixes
static void t_toktrain_unigram_suffix_array(fat5_test *T) {
    fat5_rng r = fat5_rng_init(7);
    int trial;
    fat5_test_ctx(T);
    for (trial = 0; trial < 20; trial++) {
        int32_t n = trial == 0 ? 1 : trial == 1 ? 2 : 1 + (int32_t)fat5_rng_below(&r, 400), K = 2 + (int32_t)fat5_rng_below(&r, trial < 10 ? 3 : 60);
        int32_t *t = (int32_t *)malloc((size_t)n * sizeof(int32_t)), *sa = (int32_t *)malloc((size_t)n * sizeof(int32_t));
        int32_t i, bad = 0;
        for (i = 0; i + 1 < n; i++) t[i] = 1 + (int32_t)fat5_rng_below(&r, (uint64_t)K - 1);
        t[n - 1] = 0;
        FAT5_CHECK(T, fat5__ug_sais(T->ctx, t, sa, n, K));
        {   // a permutation of 0 .. n-1
            char *seen = (char *)calloc((size_t)n, 1);
            for (i = 0; i < n; i++) {
                bad += sa[i] < 0 || sa[i] >= n || seen[sa[i]];
                if (sa[i] >= 0 && sa[i] < n) seen[sa[i]] = 1;
            }
            free(seen);
        }
        FAT5_REQUIRE(T, bad == 0);
        for (i = 1; i < n; i++) {   // every pair in order: the suffix at sa[i-1] is smaller
            int32_t a = sa[i - 1], b = sa[i];
            while (t[a] == t[b]) a++, b++;   // the unique terminator stops it
            bad += t[a] > t[b];
        }
        FAT5_CHECK(T, bad == 0);
        free(t);
        free(sa);
    }
}

// The piece rules (SentencePiece's IsValidSentencePiece) and the script table under them
static void t_toktrain_unigram_piece_rules(fat5_test *T) {
    fat5_tokenizer_train_config cfg = tug_config(100, 1);
    const uint32_t ws_ab[] = {0x2581, 'a', 'b'}, a_ws_b[] = {'a', 0x2581, 'b'}, ab1[] = {'a', 'b', '1'},
                   d12[] = {'1', '2'}, lat_cyr[] = {'a', 0x0431}, kana_han[] = {0x304B, 0x30AB, 0x6F22, 0x30FC},
                   e_acute[] = {'e', 0x0301, 'x'}, ws_only[] = {0x2581}, punct[] = {'.', ','}, a_ws[] = {'a', 0x2581};
    FAT5_CHECK(T, fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), 'A') ==
                      fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), 0x1E9E));   // Latin
    FAT5_CHECK(T, fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), 0x4E00) == FAT5__SC_HAN);
    FAT5_CHECK(T, fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), 0x3042) == FAT5__SC_HIRAGANA);
    FAT5_CHECK(T, fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), 0x0301) == FAT5__SC_INHERITED);
    FAT5_CHECK(T, fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), '1') == FAT5__SC_COMMON);
    FAT5_CHECK(T, fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), 0x10FFFF) == FAT5__SC_COMMON);
    FAT5_CHECK(T, fat5__ug_valid(&cfg, ws_ab, 3));
    FAT5_CHECK(T, fat5__ug_valid(&cfg, ws_only, 1));
    FAT5_CHECK(T, !fat5__ug_valid(&cfg, a_ws_b, 3));      // "\u2581" only first
    FAT5_CHECK(T, !fat5__ug_valid(&cfg, ab1, 3));         // letters then a digit (split_by_number)
    FAT5_CHECK(T, fat5__ug_valid(&cfg, d12, 2));
    FAT5_CHECK(T, fat5__ug_valid(&cfg, punct, 2));
    FAT5_CHECK(T, !fat5__ug_valid(&cfg, lat_cyr, 2));     // two scripts
    FAT5_CHECK(T, fat5__ug_valid(&cfg, kana_han, 4));     // kana and U+30FC count as Han
    FAT5_CHECK(T, fat5__ug_valid(&cfg, e_acute, 3));      // a combining mark takes the letter's script
    cfg.split_by_number = 0;
    FAT5_CHECK(T, fat5__ug_valid(&cfg, ab1, 3));
    cfg.split_digits = 1;
    FAT5_CHECK(T, !fat5__ug_valid(&cfg, d12, 2) && !fat5__ug_valid(&cfg, ab1, 3) && fat5__ug_valid(&cfg, d12, 1));
    cfg.split_by_unicode_script = 0;
    FAT5_CHECK(T, fat5__ug_valid(&cfg, lat_cyr, 2));
    cfg.split_by_whitespace = 0;   // then "\u2581" may come inside, not last
    FAT5_CHECK(T, fat5__ug_valid(&cfg, a_ws_b, 3) && !fat5__ug_valid(&cfg, a_ws, 2));
    cfg.max_sentencepiece_length = 2;
    FAT5_CHECK(T, !fat5__ug_valid(&cfg, ws_ab, 3) && fat5__ug_valid(&cfg, ws_ab, 2));
}

// Two runs give the same vocabulary, bit for bit, and so do 1, 2 and 3 threads.
static void t_toktrain_unigram_determinism(fat5_test *T) {
    static char text[1 << 16];
    fat5_rng r = fat5_rng_init(11);
    fat5__tt_vocab a, b, c, d;
    fat5_tokenizer_train_report rep;
    fat5_tokenizer_train_config cfg = tug_config(120, 1);
    fat5_test_ctx(T);
    tug_corpus(&r, 600, text, sizeof text);
    FAT5_CHECK(T, tug_train(T, &cfg, text, &a, &rep) == FAT5_OK);
    FAT5_CHECK(T, a.n == 120 && rep.rounds >= 2);
    FAT5_CHECK(T, tug_train(T, &cfg, text, &b, &rep) == FAT5_OK);
    cfg.num_threads = 2;
    FAT5_CHECK(T, tug_train(T, &cfg, text, &c, &rep) == FAT5_OK);
    cfg.num_threads = 3;
    FAT5_CHECK(T, tug_train(T, &cfg, text, &d, &rep) == FAT5_OK);
    FAT5_CHECK(T, tug_same(&a, &b));
    FAT5_CHECK(T, tug_same(&a, &c));
    FAT5_CHECK(T, tug_same(&a, &d));
    fat5__tt_vocab_free(T->ctx, &a);
    fat5__tt_vocab_free(T->ctx, &b);
    fat5__tt_vocab_free(T->ctx, &c);
    fat5__tt_vocab_free(T->ctx, &d);
}

// Words that repeat become pieces of their own, ranked by frequency; the output is ordered as
// SentencePiece orders it: the special pieces, then by score.
static void t_toktrain_unigram_obvious(fat5_test *T) {
    static char text[1 << 16];
    static const char *w[] = {"banana", "tokenizer", "xylophone", "quickly"};
    fat5_rng r = fat5_rng_init(3);
    fat5__tt_vocab v;
    fat5_tokenizer_train_report rep;
    fat5_tokenizer_train_config cfg = tug_config(80, 2);
    size_t len = 0;
    int i, k;
    int64_t id[4];
    fat5_test_ctx(T);
    for (i = 0; i < 400; i++) {   // banana most often, then tokenizer, xylophone, quickly; a random filler word
        int n = 2 + (int)fat5_rng_below(&r, 4), f = 3 + (int)fat5_rng_below(&r, 4);
        for (k = 0; k < f; k++) text[len++] = (char)('a' + fat5_rng_below(&r, 26));
        for (k = 0; k < n; k++) {
            uint64_t x = fat5_rng_below(&r, 10);
            len += (size_t)snprintf(text + len, sizeof text - len, " %s", w[x < 4 ? 0 : x < 7 ? 1 : x < 9 ? 2 : 3]);
        }
        text[len++] = '\n';
        text[len] = 0;
    }
    FAT5_REQUIRE_OK(T, tug_train(T, &cfg, text, &v, &rep));
    FAT5_CHECK(T, v.n == 80 && !strcmp(v.piece[0], "<pad>") && !strcmp(v.piece[1], "</s>") && !strcmp(v.piece[2], "<unk>"));
    FAT5_CHECK(T, v.type[0] == FAT5__PT_CONTROL && v.type[2] == FAT5__PT_UNKNOWN && v.type[3] == FAT5__PT_NORMAL);
    for (k = 0; k < 4; k++) {
        char p[32];
        snprintf(p, sizeof p, "\xE2\x96\x81%s", w[k]);
        id[k] = tug_find(&v, p);
        FAT5_CHECK(T, id[k] >= 3);
    }
    FAT5_CHECK(T, id[0] < id[1] && id[1] < id[2] && id[2] < id[3]);   // by frequency
    for (i = 4; i < v.n; i++)   // scores descending, ties by bytes
        FAT5_CHECK(T, v.score[i] < v.score[i - 1] || (v.score[i] == v.score[i - 1] && strcmp(v.piece[i - 1], v.piece[i]) < 0));
    FAT5_CHECK(T, v.score[id[0]] < 0.0f && v.score[id[0]] > -2.0f);   // a log-probability: about 0.4 of the words
    FAT5_CHECK(T, rep.alphabet_size == 27);   // "\u2581" and the letters
    fat5__tt_vocab_free(T->ctx, &v);
}

typedef struct { int n; int round[64], step[64]; double obj[64]; } tug_trace;
static void tug_hook(void *arg, int round, int step, int64_t size, double objective) {
    tug_trace *t = (tug_trace *)arg;
    (void)size;
    if (t->n < 64) t->round[t->n] = round, t->step[t->n] = step, t->obj[t->n++] = objective;
}

// The EM objective (words' negative log-likelihood) falls at the second step of every round (the
// M step's digamma prior and threshold make it no exact EM: a third step may rise by 1e-5).
static void t_toktrain_unigram_em_falls(fat5_test *T) {
    static char text[1 << 16];
    fat5_rng r = fat5_rng_init(5);
    fat5__tt_vocab v;
    fat5_tokenizer_train_report rep;
    fat5_tokenizer_train_config cfg = tug_config(100, 1);
    tug_trace tr;
    int i, falls = 0;
    fat5_test_ctx(T);
    tug_corpus(&r, 500, text, sizeof text);
    memset(&tr, 0, sizeof tr);
    fat5__ug_em_hook = tug_hook, fat5__ug_em_hook_arg = &tr;
    FAT5_REQUIRE_OK(T, tug_train(T, &cfg, text, &v, &rep));
    fat5__ug_em_hook = NULL, fat5__ug_em_hook_arg = NULL;
    FAT5_CHECK(T, tr.n == 2 * rep.rounds && rep.rounds >= 3);
    for (i = 1; i < tr.n; i++)
        if (tr.round[i] == tr.round[i - 1]) {
            FAT5_CHECK_MSG(T, tr.obj[i] < tr.obj[i - 1], "round %d step %d: objective %.9f after %.9f", tr.round[i],
                           tr.step[i], tr.obj[i], tr.obj[i - 1]);
            falls++;
        }
    FAT5_CHECK(T, falls == rep.rounds);
    FAT5_CHECK(T, tr.obj[0] > 0.0 && tr.obj[0] < 100.0);
    fat5__tt_vocab_free(T->ctx, &v);
}

// Every character of the corpus (coverage 1) is a piece at the end, rare ones included; with a
// lower coverage the rarest go, and the alphabet is what is kept.
static void t_toktrain_unigram_required_chars(fat5_test *T) {
    static char text[1 << 16];
    fat5_rng r = fat5_rng_init(9);
    fat5__tt_vocab v;
    fat5_tokenizer_train_report rep;
    fat5_tokenizer_train_config cfg = tug_config(120, 1);
    const char *rare[] = {"\xC3\xB8", "\xE6\xBC\xA2", "\xE5\xAD\x97", "\xD0\xB1", "\xD0\xB6"};   // ø 漢 字 б ж
    static char seen[0x110000];
    int64_t distinct = 1;   // "\u2581"
    size_t len, k, cl;
    fat5_test_ctx(T);
    tug_corpus(&r, 500, text, sizeof text);
    len = strlen(text);
    for (k = 0; k < 2; k++) len += (size_t)snprintf(text + len, sizeof text - len, "\xC3\xB8\xE6\xBC\xA2\xE5\xAD\x97 \xD0\xB1\xD0\xB6\n");
    memset(seen, 0, sizeof seen);
    for (k = 0; k < len; k += cl) {
        uint32_t cp = fat5__utf8_cp(text + k, len - k, &cl);
        if (cp != ' ' && cp != '\n' && !seen[cp]) seen[cp] = 1, distinct++;
    }
    cfg.character_coverage = 1.0;
    FAT5_REQUIRE_OK(T, tug_train(T, &cfg, text, &v, &rep));
    for (k = 0; k < 5; k++) FAT5_CHECK(T, tug_find(&v, rare[k]) >= 3);
    FAT5_CHECK(T, rep.alphabet_size == distinct && v.n == 120);
    fat5__tt_vocab_free(T->ctx, &v);
    cfg.character_coverage = 0.999;   // the rare line's characters (about 1 in 10,000) are left out
    FAT5_REQUIRE_OK(T, tug_train(T, &cfg, text, &v, &rep));
    for (k = 0; k < 5; k++) FAT5_CHECK(T, tug_find(&v, rare[k]) < 0);
    FAT5_CHECK(T, rep.alphabet_size < distinct - 4 && tug_find(&v, "a") >= 3);
    fat5__tt_vocab_free(T->ctx, &v);
}

// fat5_tokenizer_train's directory read back: tokenizer.json and spiece.model have the trainer's
// pieces and scores, and every corpus line encodes and decodes back to itself.
static void t_toktrain_unigram_roundtrip(fat5_test *T) {
    static char text[1 << 16];
    fat5_rng r = fat5_rng_init(13);
    fat5__tt_vocab v;
    fat5_tokenizer_train_report rep, rep2;
    fat5_tokenizer_train_config cfg = tug_config(150, 2);
    const char *user[] = {"<sep>"};
    char path[600], dir[600], file[700];
    const char *files[1];
    int kind;
    fat5_test_ctx(T);
    tug_corpus(&r, 500, text, sizeof text);
    strcat(text, "one <sep> two\n");
    cfg.user_defined_symbols = user, cfg.n_user_defined_symbols = 1;
    cfg.byte_fallback = 1;
    cfg.vocab_size = 150 + 256;
    FAT5_REQUIRE_OK(T, tug_train(T, &cfg, text, &v, &rep));
    FAT5_CHECK(T, v.n == cfg.vocab_size && !strcmp(v.piece[3], "<sep>") && v.type[3] == FAT5__PT_USER);
    FAT5_CHECK(T, !strcmp(v.piece[4], "<0x00>") && v.type[4] == FAT5__PT_BYTE && !strcmp(v.piece[259], "<0xFF>"));
    {   // no piece holds the user-defined symbol's text
        int64_t i, bad = 0;
        for (i = 260; i < v.n; i++) bad += strstr(v.piece[i], "sep>") != NULL || strstr(v.piece[i], "<s") != NULL;
        FAT5_CHECK(T, bad == 0);
    }
    snprintf(path, sizeof path, "%s/corpus.txt", fat5_test_tmpdir(T));
    snprintf(dir, sizeof dir, "%s/tok", fat5_test_tmpdir(T));
    files[0] = path;
    FAT5_CHECK(T, fat5_tokenizer_train(T->ctx, &cfg, files, 1, dir, &rep2) == FAT5_OK);
    FAT5_CHECK(T, rep2.vocab_size == v.n && rep2.alphabet_size == rep.alphabet_size && rep2.rounds == rep.rounds);
    for (kind = 0; kind < 2; kind++) {
        fat5_tokenizer *t = NULL;
        int64_t i, mism = 0, lines = 0, bad = 0;
        const char *s = text;
        snprintf(file, sizeof file, "%s/%s", dir, kind ? "spiece.model" : "tokenizer.json");
        FAT5_CHECK(T, fat5_tokenizer_load(T->ctx, file, &t) == FAT5_OK);
        if (!t) continue;
        FAT5_CHECK(T, t->n_pieces == v.n);
        for (i = 0; i < v.n && i < t->n_pieces; i++)
            mism += strcmp(fat5_tokenizer_id_to_piece(t, (int32_t)i), v.piece[i]) != 0 || (float)t->score[i] != v.score[i];
        FAT5_CHECK(T, mism == 0);
        while (*s) {   // every line back to itself
            const char *e = strchr(s, '\n');
            int32_t *ids = NULL;
            int64_t n = 0, j;
            char *back = NULL;
            size_t blen = 0;
            // tokenizers' rule for an added token: the space before it is the pre-tokenizer's and goes
            const char *want = kind == 0 && !strncmp(s, "one <sep>", 9) ? "one<sep> two" : s;
            size_t wlen = want == s ? (size_t)(e - s) : strlen(want);
            if (fat5_tokenize(t, s, (size_t)(e - s), NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &n) ||
                fat5_detokenize(t, ids, n, 0, &back, &blen) || blen != wlen || memcmp(back, want, blen))
                bad++;
            for (j = 0; j < n; j++) bad += ids[j] == 2;   // no <unk>: every character is in the vocabulary
            fat5_free(T->ctx, ids);
            fat5_free(T->ctx, back);
            lines++;
            s = e + 1;
        }
        FAT5_CHECK_MSG(T, lines == 501 && bad == 0, "%s: %lld lines, %lld bad", file, (long long)lines, (long long)bad);
        fat5_tokenizer_destroy(t);
    }
    fat5__tt_vocab_free(T->ctx, &v);
}

// Errors: no text, a vocabulary smaller than the special pieces and the alphabet, or larger than
// the corpus gives; each message names the numbers.
static void t_toktrain_unigram_errors(fat5_test *T) {
    fat5__tt_vocab v;
    fat5__tt_corpus c;
    fat5_tokenizer_train_report rep;
    fat5_tokenizer_train_config cfg = tug_config(20, 1);
    fat5_test_ctx(T);
    memset(&c, 0, sizeof c);
    memset(&v, 0, sizeof v);
    FAT5_CHECK(T, fat5__tt_unigram(T->ctx, &cfg, &c, &v, &rep) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, strstr(fat5_last_error(T->ctx), "no sentence") != NULL);
    fat5__tt_vocab_free(T->ctx, &v);
    FAT5_CHECK(T, tug_train(T, &cfg, "\n\n\n", &v, &rep) == FAT5_ERR_INVALID_ARG);   // the reader's error
    fat5__tt_vocab_free(T->ctx, &v);
    // 26 letters and "\u2581" with 3 special pieces need 30
    FAT5_CHECK(T, tug_train(T, &cfg, "abcdefghijklm nopqrstuvwxyz\n", &v, &rep) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, strstr(fat5_last_error(T->ctx), "vocab_size 20") && strstr(fat5_last_error(T->ctx), "3 special") &&
                      strstr(fat5_last_error(T->ctx), "27 characters") && strstr(fat5_last_error(T->ctx), "(30)"));
    fat5__tt_vocab_free(T->ctx, &v);
    cfg.vocab_size = 5000;   // far more than the corpus has substrings
    FAT5_CHECK(T, tug_train(T, &cfg, "abc abd\nabc abe\n", &v, &rep) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, strstr(fat5_last_error(T->ctx), "set vocab_size <=") != NULL);
    fat5__tt_vocab_free(T->ctx, &v);
}

#define FAT5_TESTS_TOKTRAIN_UNIGRAM(X) X(toktrain_unigram_suffix_array) X(toktrain_unigram_piece_rules) \
    X(toktrain_unigram_determinism) X(toktrain_unigram_obvious) X(toktrain_unigram_em_falls) \
    X(toktrain_unigram_required_chars) X(toktrain_unigram_roundtrip) X(toktrain_unigram_errors)
