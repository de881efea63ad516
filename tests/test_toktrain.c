// Tokenizer training, the frame (src/text_train_corpus.c, src/text_train_write.c): the corpus
// reader's formats, sample and errors; the writers, checked by reading their files back with
// fat5's own loaders (tokenizer.json and spiece.model must give the same pieces, scores and ids).
// The trainers have their own files (test_toktrain_unigram.c, test_toktrain_bpe.c).

#define FAT5_TESTS_TOKTRAIN(X) X(toktrain_corpus_formats) X(toktrain_corpus_sample) X(toktrain_corpus_errors) \
    X(toktrain_write_unigram) X(toktrain_write_bpe)

static void ttc_write(fat5_test *T, const char *path, const char *text) {
    FILE *fp = fopen(path, "wb");
    FAT5_REQUIRE(T, fp != NULL);
    fputs(text, fp);
    fclose(fp);
}

static const char *ttc_path(fat5_test *T, char *buf, const char *name) {
    snprintf(buf, 1024, "%s/%s", fat5_test_tmpdir(T), name);
    return buf;
}

// sentence i of c equals s
static int ttc_is(const fat5__tt_corpus *c, int64_t i, const char *s) {
    return i < c->n && strlen(c->bytes + c->off[i]) == strlen(s) && !strcmp(c->bytes + c->off[i], s) &&
           c->off[i + 1] - c->off[i] - 1 == (int64_t)strlen(s);
}

static void t_toktrain_corpus_formats(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    fat5_tokenizer_train_report rep;
    fat5__tt_corpus c;
    char a[1024], b[1024], d[1024];
    const char *files[3];
    memset(&c, 0, sizeof c);
    memset(&rep, 0, sizeof rep);
    cfg.input_sentence_size = 0;
    cfg.verbose = 0;
    files[0] = ttc_path(T, a, "one.txt");
    files[1] = ttc_path(T, b, "two.fortune");
    files[2] = ttc_path(T, d, "three.jsonl");
    ttc_write(T, a, "first line\r\n\nsecond \xC3\xA9t\xC3\xA9\nno newline at the end");
    ttc_write(T, b, "%\nfortune one\nits second line\n%\nfortune two\n%\n");
    ttc_write(T, d, "{\"id\": 1, \"text\": \"json one\\nand two\"}\n\n{\"text\": \"tab\\there\", \"x\": [1, {\"y\": 2}]}\n");
    FAT5_REQUIRE_OK(T, fat5__tt_read(ctx, &cfg, files, 3, &c, &rep));
    // the blank line and the empty fortune separators are skipped (counted), the rest in order
    FAT5_CHECK_MSG(T, c.n == 9, "%lld sentences", (long long)c.n);
    FAT5_CHECK(T, ttc_is(&c, 0, "first line"));
    FAT5_CHECK(T, ttc_is(&c, 1, "second \xC3\xA9t\xC3\xA9"));
    FAT5_CHECK(T, ttc_is(&c, 2, "no newline at the end"));
    FAT5_CHECK(T, ttc_is(&c, 3, "fortune one"));
    FAT5_CHECK(T, ttc_is(&c, 4, "its second line"));
    FAT5_CHECK(T, ttc_is(&c, 5, "fortune two"));
    FAT5_CHECK(T, ttc_is(&c, 6, "json one"));
    FAT5_CHECK(T, ttc_is(&c, 7, "and two"));
    FAT5_CHECK(T, ttc_is(&c, 8, "tab\there"));
    FAT5_CHECK_MSG(T, rep.sentences_used == 9 && rep.sentences_skipped == 1 && rep.sentences_read == 10,
                   "used %lld skipped %lld read %lld", (long long)rep.sentences_used,
                   (long long)rep.sentences_skipped, (long long)rep.sentences_read);
    fat5__tt_corpus_free(ctx, &c);
    // the same sentence twice: merged, counts added, first-occurrence order
    FAT5_REQUIRE(T, fat5__tt_corpus_add(ctx, &c, "x", 1, 1) && fat5__tt_corpus_add(ctx, &c, "yy", 2, 2) &&
                        fat5__tt_corpus_add(ctx, &c, "x", 1, 3) && fat5__tt_corpus_add(ctx, &c, "", 0, 1));
    FAT5_REQUIRE_OK(T, fat5__tt_corpus_dedup(ctx, &c));
    FAT5_CHECK(T, c.n == 3 && ttc_is(&c, 0, "x") && c.freq[0] == 4 && ttc_is(&c, 1, "yy") && c.freq[1] == 2 &&
                      ttc_is(&c, 2, "") && c.freq[2] == 1);
    fat5__tt_corpus_free(ctx, &c);
}

// input_sentence_size: a sample of that many distinct lines, the same for a seed, another for
// another seed; each line's inclusion rate over many seeds near size / lines (uniform).
static void t_toktrain_corpus_sample(fat5_test *T) {
    enum { LINES = 400, KEEP = 40, SEEDS = 150 };
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    fat5_tokenizer_train_report rep;
    fat5__tt_corpus c, c2;
    char p[1024];
    const char *files[1];
    int hits[LINES], s, i, same = 1, maxh = 0, minh = SEEDS;
    FILE *fp;
    memset(hits, 0, sizeof hits);
    files[0] = ttc_path(T, p, "lines.txt");
    fp = fopen(p, "wb");
    FAT5_REQUIRE(T, fp != NULL);
    for (i = 0; i < LINES; i++) fprintf(fp, "line %d\n", i);
    fclose(fp);
    cfg.input_sentence_size = KEEP;
    cfg.verbose = 0;
    for (s = 0; s < SEEDS; s++) {
        memset(&c, 0, sizeof c);
        memset(&rep, 0, sizeof rep);
        cfg.seed = (uint64_t)s;
        FAT5_REQUIRE_OK(T, fat5__tt_read(ctx, &cfg, files, 1, &c, &rep));
        FAT5_REQUIRE(T, c.n == KEEP && rep.sentences_used == KEEP && rep.sentences_read == LINES);
        FAT5_REQUIRE_OK(T, fat5__tt_corpus_dedup(ctx, &c));
        FAT5_CHECK(T, c.n == KEEP);   // distinct lines
        for (i = 0; i < c.n; i++) {
            int k = -1;
            sscanf(c.bytes + c.off[i], "line %d", &k);
            FAT5_REQUIRE(T, k >= 0 && k < LINES);
            hits[k]++;
        }
        if (s == 0) {   // the same seed again: the same sample
            memset(&c2, 0, sizeof c2);
            FAT5_REQUIRE_OK(T, fat5__tt_read(ctx, &cfg, files, 1, &c2, &rep));
            FAT5_REQUIRE_OK(T, fat5__tt_corpus_dedup(ctx, &c2));
            FAT5_CHECK(T, c2.nbytes == c.nbytes && !memcmp(c2.bytes, c.bytes, (size_t)c.nbytes));
            fat5__tt_corpus_free(ctx, &c2);
            cfg.seed = 1;
            memset(&c2, 0, sizeof c2);
            FAT5_REQUIRE_OK(T, fat5__tt_read(ctx, &cfg, files, 1, &c2, &rep));
            same = c2.nbytes == c.nbytes && !memcmp(c2.bytes, c.bytes, (size_t)c.nbytes);
            FAT5_CHECK_MSG(T, !same, "seeds 0 and 1 gave the same sample");
            fat5__tt_corpus_free(ctx, &c2);
        }
        fat5__tt_corpus_free(ctx, &c);
    }
    // each line is in a sample with p = 0.1: hits ~ Binomial(150, 0.1), mean 15, sd 3.67; over 400
    // lines the extremes stay within mean -+ 4.5 sd (probability of failing < 0.3%)
    for (i = 0; i < LINES; i++) maxh = hits[i] > maxh ? hits[i] : maxh, minh = hits[i] < minh ? hits[i] : minh;
    FAT5_CHECK_MSG(T, maxh <= 32 && minh >= 0, "inclusion counts in [%d, %d]", minh, maxh);
    {   // the first and second halves of the file equally sampled (a reservoir biased to either end fails)
        int h0 = 0, h1 = 0;
        for (i = 0; i < LINES / 2; i++) h0 += hits[i], h1 += hits[LINES / 2 + i];
        // each half: mean 3000 (of 6000 draws), sd about sqrt(6000 * 0.25) = 38.7 (less: without replacement)
        FAT5_CHECK_MSG(T, abs(h0 - h1) < 2 * 4 * 39, "halves %d / %d", h0, h1);
    }
    // without shuffling: the first KEEP lines
    cfg.shuffle_input_sentence = 0;
    memset(&c, 0, sizeof c);
    FAT5_REQUIRE_OK(T, fat5__tt_read(ctx, &cfg, files, 1, &c, &rep));
    FAT5_CHECK(T, c.n == KEEP && ttc_is(&c, 0, "line 0") && ttc_is(&c, KEEP - 1, "line 39"));
    fat5__tt_corpus_free(ctx, &c);
}

static void t_toktrain_corpus_errors(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    fat5_tokenizer_train_report rep;
    fat5__tt_corpus c;
    char a[1024], out[1024];
    const char *files[1];
    char *big;
    FILE *fp;
    size_t i;
    cfg.verbose = 0;
    files[0] = ttc_path(T, a, "bad.txt");
    ttc_write(T, a, "good\nstill good\nbad \xC3\x28 here\n");
    memset(&c, 0, sizeof c);
    FAT5_CHECK(T, fat5__tt_read(ctx, &cfg, files, 1, &c, &rep) == FAT5_ERR_FORMAT);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "bad.txt:3: not valid UTF-8") != NULL, "%s", fat5_last_error(ctx));
    fat5__tt_corpus_free(ctx, &c);
    ttc_write(T, a, "{\"text\": \"fine\"}\n{\"body\": \"no text\"}\n");
    cfg.input_format = "jsonl";
    FAT5_CHECK(T, fat5__tt_read(ctx, &cfg, files, 1, &c, &rep) == FAT5_ERR_FORMAT);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "bad.txt:2: no string field \"text\"") != NULL, "%s",
                   fat5_last_error(ctx));
    fat5__tt_corpus_free(ctx, &c);
    ttc_write(T, a, "{\"text\": \"fine\"}\n{\"text\": \"unterminated}\n");
    FAT5_CHECK(T, fat5__tt_read(ctx, &cfg, files, 1, &c, &rep) == FAT5_ERR_FORMAT);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "bad.txt:2:") != NULL, "%s", fat5_last_error(ctx));
    fat5__tt_corpus_free(ctx, &c);
    cfg.input_format = NULL;
    // an empty corpus, and one whose only line is longer than max_sentence_length (1 MB, skipped)
    ttc_write(T, a, "\n\n");
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, files, 1, ttc_path(T, out, "o"), NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "no sentence") != NULL, "%s", fat5_last_error(ctx));
    big = (char *)malloc(1 << 20);
    FAT5_REQUIRE(T, big != NULL);
    for (i = 0; i < (1 << 20) - 1; i++) big[i] = (char)('a' + i % 26);
    big[(1 << 20) - 1] = 0;
    fp = fopen(a, "wb");
    FAT5_REQUIRE(T, fp != NULL);
    fputs(big, fp);
    fputs("\nshort\n", fp);
    fclose(fp);
    free(big);
    memset(&c, 0, sizeof c);
    memset(&rep, 0, sizeof rep);
    FAT5_REQUIRE_OK(T, fat5__tt_read(ctx, &cfg, files, 1, &c, &rep));
    FAT5_CHECK(T, c.n == 1 && ttc_is(&c, 0, "short") && rep.sentences_skipped == 1);
    fat5__tt_corpus_free(ctx, &c);
    // settings out of range are named
    cfg.vocab_size = 0;
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, files, 1, out, NULL) == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "vocab_size") != NULL);
    cfg = fat5_tokenizer_train_config_default();
    cfg.model_type = "wordpiece";
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, files, 1, out, NULL) == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "wordpiece") != NULL);
    cfg = fat5_tokenizer_train_config_default();
    cfg.pad_id = 5;
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, files, 1, out, NULL) == FAT5_ERR_INVALID_ARG);
    cfg = fat5_tokenizer_train_config_default();
    cfg.model_type = "bpe", cfg.byte_fallback = 1;
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, files, 1, out, NULL) == FAT5_ERR_INVALID_ARG &&
                      strstr(fat5_last_error(ctx), "byte_level") != NULL);
    files[0] = ttc_path(T, a, "missing.txt");
    cfg = fat5_tokenizer_train_config_default();
    FAT5_CHECK(T, fat5_tokenizer_train(ctx, &cfg, files, 1, out, NULL) == FAT5_ERR_IO &&
                      strstr(fat5_last_error(ctx), "missing.txt") != NULL);
}

// A hand-made Unigram vocabulary written, then read back from tokenizer.json and from spiece.model:
// the same pieces and scores, the sentinels after them, and the same ids from both files, which are
// the lattice's best path worked out by hand.
static void t_toktrain_write_unigram(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    fat5__tt_vocab v;
    fat5_tokenizer *tj = NULL, *ts = NULL;
    static const char *const pieces[] = {"\xE2\x96\x81", "a", "b", "c", "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab",
                                         "\xC3\xA9", "bc"};
    static const float scores[] = {-2.0f, -3.0f, -3.5f, -4.0f, -2.5f, -3.25f, -1.75f, -5.0f, -6.0f};
    const char *user[1] = {"<sep>"};
    char dir[1024], path[1100];
    int64_t i, n;
    int32_t *ids = NULL;
    memset(&v, 0, sizeof v);
    cfg.extra_ids = 3;
    cfg.normalization_rule_name = "identity";
    cfg.user_defined_symbols = user, cfg.n_user_defined_symbols = 1;
    FAT5_REQUIRE_OK(T, fat5__tt_vocab_specials(ctx, &cfg, &v));
    FAT5_REQUIRE(T, v.n == 4 && !strcmp(v.piece[0], "<pad>") && !strcmp(v.piece[1], "</s>") &&
                        !strcmp(v.piece[2], "<unk>") && !strcmp(v.piece[3], "<sep>"));
    for (i = 0; i < 9; i++) FAT5_REQUIRE(T, fat5__tt_vocab_add(ctx, &v, pieces[i], strlen(pieces[i]), scores[i], FAT5__PT_NORMAL) >= 0);
    ttc_path(T, dir, "uni");
    FAT5_REQUIRE_OK(T, fat5__tt_write_dir(ctx, &cfg, &v, NULL, 0, dir));
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, path, &tj));
    snprintf(path, sizeof path, "%s/spiece.model", dir);
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, path, &ts));
    FAT5_CHECK_MSG(T, fat5_tokenizer_vocab_size(tj) == 16, "%lld", (long long)fat5_tokenizer_vocab_size(tj));
    FAT5_CHECK(T, fat5_tokenizer_vocab_size(ts) == 13);   // spiece.model: no sentinels (T5Tokenizer adds them)
    for (i = 0; i < v.n; i++) {
        FAT5_CHECK(T, !strcmp(fat5_tokenizer_id_to_piece(tj, (int32_t)i), v.piece[i]));
        FAT5_CHECK(T, !strcmp(fat5_tokenizer_id_to_piece(ts, (int32_t)i), v.piece[i]));
    }
    for (i = 0; i < 3; i++) {   // <extra_id_0> has the highest id, as in T5's files
        char s[32];
        snprintf(s, sizeof s, "<extra_id_%d>", (int)(2 - i));
        FAT5_CHECK(T, fat5_tokenizer_piece_to_id(tj, s) == 13 + i);
    }
    FAT5_CHECK(T, tj->score && ts->score);
    for (i = 4; i < v.n; i++) FAT5_CHECK(T, (float)tj->score[i] == v.score[i] && (float)ts->score[i] == v.score[i]);
    FAT5_CHECK(T, fat5_tokenizer_eos_id(tj) == 1 && fat5_tokenizer_pad_id(tj) == 0);
    {   // "ab abc  é x": best paths ▁ab | ▁ab c | ▁ é | ▁ x (<unk>), EOS appended; both files alike
        static const char text[] = "ab abc  \xC3\xA9 x";
        static const int32_t want[] = {10, 10, 7, 4, 11, 4, 2, 1};
        int k;
        for (k = 0; k < 2; k++) {
            FAT5_REQUIRE_OK(T, fat5_tokenize(k ? ts : tj, text, strlen(text), NULL, 0, 0, &ids, &n));
            FAT5_CHECK_MSG(T, n == 8 && !memcmp(ids, want, sizeof want), "%s: %lld ids, first %d %d %d",
                           k ? "spiece.model" : "tokenizer.json", (long long)n, n > 0 ? ids[0] : -1,
                           n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1);
            fat5_free(ctx, ids);
        }
    }
    {   // the user-defined symbol: whole in both; after it, tokenizer.json's Metaspace starts a new
        // word (a "\u2581" prepended, as T5TokenizerFast does), sentencepiece does not
        static const int32_t want_j[] = {8, 3, 4, 6, 1}, want_s[] = {8, 3, 6, 1};
        FAT5_REQUIRE_OK(T, fat5_tokenize(tj, "a<sep>b", 7, NULL, 0, 0, &ids, &n));
        FAT5_CHECK(T, n == 5 && !memcmp(ids, want_j, sizeof want_j));
        fat5_free(ctx, ids);
        FAT5_REQUIRE_OK(T, fat5_tokenize(ts, "a<sep>b", 7, NULL, 0, 0, &ids, &n));
        FAT5_CHECK(T, n == 4 && !memcmp(ids, want_s, sizeof want_s));
        fat5_free(ctx, ids);
    }
    fat5_tokenizer_destroy(tj);
    fat5_tokenizer_destroy(ts);
    fat5__tt_vocab_free(ctx, &v);
}

// A hand-made BPE vocabulary with merges written and read back: the merges apply in rank order.
static void t_toktrain_write_bpe(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    fat5__tt_vocab v;
    fat5_tokenizer *t = NULL;
    static const char *const al[] = {"\xE2\x96\x81", "a", "b", "c"};
    char dir[1024];
    int64_t i, n, id_ab, id_sab, id_sa;
    int32_t *ids = NULL;
    memset(&v, 0, sizeof v);
    cfg.model_type = "bpe";
    cfg.extra_ids = 2;
    cfg.normalization_rule_name = "identity";
    FAT5_REQUIRE_OK(T, fat5__tt_vocab_specials(ctx, &cfg, &v));
    for (i = 0; i < 4; i++) FAT5_REQUIRE(T, fat5__tt_vocab_add(ctx, &v, al[i], strlen(al[i]), 0.0f, FAT5__PT_NORMAL) >= 0);
    // merges: (a, b) first, then (▁, ab), then (▁, a): "▁ab" comes from ▁ + ab, never ▁a + b
    id_ab = fat5__tt_vocab_add(ctx, &v, "ab", 2, 0.0f, FAT5__PT_NORMAL);
    FAT5_REQUIRE(T, id_ab >= 0 && fat5__tt_vocab_merge(ctx, &v, 4, 5));
    id_sab = fat5__tt_vocab_add(ctx, &v, "\xE2\x96\x81" "ab", 5, 0.0f, FAT5__PT_NORMAL);
    FAT5_REQUIRE(T, id_sab >= 0 && fat5__tt_vocab_merge(ctx, &v, 3, (int32_t)id_ab));
    id_sa = fat5__tt_vocab_add(ctx, &v, "\xE2\x96\x81" "a", 4, 0.0f, FAT5__PT_NORMAL);
    FAT5_REQUIRE(T, id_sa >= 0 && fat5__tt_vocab_merge(ctx, &v, 3, 4));
    ttc_path(T, dir, "bpe");
    FAT5_REQUIRE_OK(T, fat5__tt_write_dir(ctx, &cfg, &v, NULL, 0, dir));
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, dir, &t));
    FAT5_CHECK(T, fat5_tokenizer_vocab_size(t) == v.n + 2);
    FAT5_CHECK(T, fat5_tokenizer_piece_to_id(t, "<extra_id_0>") == v.n + 1);
    {   // "ab abc ac z": ▁ab | ▁ab c | ▁a c | ▁ <unk>, EOS
        static const char text[] = "ab abc ac z";
        int32_t want[8];
        want[0] = (int32_t)id_sab, want[1] = (int32_t)id_sab, want[2] = 6, want[3] = (int32_t)id_sa, want[4] = 6;
        want[5] = 3, want[6] = 2, want[7] = 1;
        FAT5_REQUIRE_OK(T, fat5_tokenize(t, text, strlen(text), NULL, 0, 0, &ids, &n));
        FAT5_CHECK_MSG(T, n == 8 && !memcmp(ids, want, sizeof want), "%lld ids: %d %d %d %d %d %d", (long long)n,
                       n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1, n > 3 ? ids[3] : -1,
                       n > 4 ? ids[4] : -1, n > 5 ? ids[5] : -1);
        fat5_free(ctx, ids);
    }
    fat5_tokenizer_destroy(t);
    fat5__tt_vocab_free(ctx, &v);
}
