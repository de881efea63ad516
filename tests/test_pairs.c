// test_pairs.c — section [8.6]: the pairs reader on small files written by each test. Formats
// (JSONL, TSV with and without a header, CSV with RFC 4180 quoting, parallel files), line endings,
// the prefix, truncation at the boundary lengths against Hugging Face's rule (the text's ids cut to
// max_length - 1, then EOS), and the error of every kind of bad row, with its file and line.
// Oracles: ByT5's ids (byte + 3, EOS 1) written out; for the fixture tokenizer tests/data/t5_spiece,
// fat5_tokenize itself (checked against sentencepiece by test_tokenizer.c) plus the rule, and the
// ids sentencepiece gives for one sentence (tests/data/tokenizers/cases.json, mt5bf: the same
// model) truncated by hand.

#define FAT5_TESTS_PAIRS(X) X(pairs_formats) X(pairs_line_endings) X(pairs_prefix) X(pairs_truncation) \
    X(pairs_bad_rows) X(pairs_field_names)

#define TP_MAX_ROWS 8

typedef struct tp_row {
    char in[256], tgt[256];
    int32_t in_ids[64], tgt_ids[64];
    int64_t n_in, n_tgt, line, in_cut, tgt_cut;
} tp_row;

// writes n bytes to name in the test's directory; returns the path (static storage, 4 slots)
static const char *tp_write(fat5_test *T, const char *name, const char *data, size_t n) {
    static char paths[4][600];
    static int slot;
    char *path = paths[slot++ % 4];
    FILE *fp;
    snprintf(path, 600, "%s/%s", fat5_test_tmpdir(T), name);
    fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, n, fp) != n || fclose(fp) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    return path;
}
#define TP_WRITE(T, name, lit) tp_write((T), (name), (lit), sizeof(lit) - 1)

// Reads every row of path (and target_path) into rows; returns the row count, or -1 after an error
// (the message is in the test context).
static int tp_read(fat5_test *T, const char *path, const char *target_path, const fat5_pairs_config *cfg,
                   fat5_tokenizer *tok, tp_row *rows) {
    fat5_pairs *p = NULL;
    fat5_pairs_row r;
    int n = 0, has = 1;
    if (fat5_pairs_open(fat5_test_ctx(T), path, target_path, cfg, &p) != FAT5_OK) return -1;
    while (has) {
        if (fat5_pairs_next(p, tok, &r, &has) != FAT5_OK) {
            fat5_pairs_close(p);
            return -1;
        }
        if (!has) break;
        if (n == TP_MAX_ROWS || r.n_input > 64 || r.n_target > 64 || r.input_len >= 256 || r.target_len >= 256 ||
            r.index != n) {
            fat5_test_fail(T, __FILE__, __LINE__, "%s: row %d too long or misnumbered (index %lld)", path, n,
                           (long long)r.index);
            fat5_pairs_close(p);
            return -1;
        }
        memcpy(rows[n].in, r.input_text, r.input_len + 1);
        memcpy(rows[n].tgt, r.target_text, r.target_len + 1);
        memcpy(rows[n].in_ids, r.input_ids, (size_t)r.n_input * sizeof(int32_t));
        memcpy(rows[n].tgt_ids, r.target_ids, (size_t)r.n_target * sizeof(int32_t));
        rows[n].n_in = r.n_input;
        rows[n].n_tgt = r.n_target;
        rows[n].line = r.line;
        rows[n].in_cut = r.input_cut;
        rows[n].tgt_cut = r.target_cut;
        n++;
    }
    fat5_pairs_close(p);
    return n;
}

// ids == ByT5's ids of s (byte + 3, then EOS 1)
static int tp_is_bytes(const int32_t *ids, int64_t n, const char *s) {
    size_t i, m = strlen(s);
    if (n != (int64_t)m + 1 || ids[m] != 1) return 0;
    for (i = 0; i < m; i++)
        if (ids[i] != (int32_t)(unsigned char)s[i] + 3) return 0;
    return 1;
}

// the rows hold the three pairs of the format tests, each at its line; tgt1: the second target
// ("two\nlines" where the format can hold a newline, else "two")
static void tp_check_three(fat5_test *T, const char *what, const tp_row *rows, int n, const int64_t lines[3],
                           const char *tgt1) {
    static const char *const in[3] = {"Hello, world", "say \"hi\"", "caf\xc3\xa9"};
    const char *tgt[3];
    int i;
    tgt[0] = "Bonjour";
    tgt[1] = tgt1;
    tgt[2] = "x";
    FAT5_CHECK_MSG(T, n == 3, "%s: %d rows, want 3 (%s)", what, n, fat5_last_error(fat5_test_ctx(T)));
    for (i = 0; i < n && i < 3; i++) {
        FAT5_CHECK_MSG(T, strcmp(rows[i].in, in[i]) == 0, "%s: row %d input \"%s\"", what, i, rows[i].in);
        FAT5_CHECK_MSG(T, strcmp(rows[i].tgt, tgt[i]) == 0, "%s: row %d target \"%s\"", what, i, rows[i].tgt);
        FAT5_CHECK_MSG(T, tp_is_bytes(rows[i].in_ids, rows[i].n_in, in[i]), "%s: row %d input ids", what, i);
        FAT5_CHECK_MSG(T, tp_is_bytes(rows[i].tgt_ids, rows[i].n_tgt, tgt[i]), "%s: row %d target ids", what, i);
        FAT5_CHECK_MSG(T, rows[i].line == lines[i], "%s: row %d at line %lld, want %lld", what, i,
                       (long long)rows[i].line, (long long)lines[i]);
    }
}

static void t_pairs_formats(fat5_test *T) {
    tp_row rows[TP_MAX_ROWS];
    const char *path, *path2;
    int n;
    // JSONL: blank lines skipped, other fields ignored, escapes decoded
    static const int64_t jl_lines[3] = {1, 3, 4};
    path = TP_WRITE(T, "a.jsonl", "{\"input\": \"Hello, world\", \"target\": \"Bonjour\", \"id\": 7}\n\n"
                                  "{\"target\": \"two\\nlines\", \"input\": \"say \\\"hi\\\"\"}\n"
                                  "{\"input\": \"caf\\u00e9\", \"target\": \"x\"}\n");
    n = tp_read(T, path, NULL, NULL, NULL, rows);
    tp_check_three(T, "jsonl", rows, n, jl_lines, "two\nlines");
    // TSV with a header, columns swapped and an extra one
    {
        static const int64_t lines[3] = {2, 3, 4};
        path = TP_WRITE(T, "h.tsv", "target\tid\tinput\nBonjour\t1\tHello, world\ntwo\t2\tsay \"hi\"\nx\t3\tcaf\xc3\xa9\n");
        n = tp_read(T, path, NULL, NULL, NULL, rows);
        tp_check_three(T, "tsv", rows, n, lines, "two");
    }
    // TSV without a header: two columns
    {
        static const int64_t lines[3] = {1, 2, 3};
        path = TP_WRITE(T, "n.tsv", "Hello, world\tBonjour\nsay \"hi\"\ttwo\ncaf\xc3\xa9\tx\n");
        n = tp_read(T, path, NULL, NULL, NULL, rows);
        tp_check_three(T, "tsv", rows, n, lines, "two");
    }
    // CSV: a quoted comma, doubled quotes, a newline inside quotes (the next row starts a line later),
    // an unquoted field
    {
        static const int64_t lines[3] = {2, 3, 5};
        path = TP_WRITE(T, "a.csv", "input,target\n\"Hello, world\",Bonjour\n\"say \"\"hi\"\"\",\"two\nlines\"\n"
                                    "caf\xc3\xa9,\"x\"\n");
        n = tp_read(T, path, NULL, NULL, NULL, rows);
        tp_check_three(T, "csv", rows, n, lines, "two\nlines");
    }
    // parallel files
    {
        static const int64_t lines[3] = {1, 2, 3};
        fat5_pairs_config c = fat5_pairs_config_default();
        path = TP_WRITE(T, "src.txt", "Hello, world\nsay \"hi\"\ncaf\xc3\xa9\n");
        path2 = TP_WRITE(T, "tgt.txt", "Bonjour\ntwo\nx\n");
        n = tp_read(T, path, path2, NULL, NULL, rows);
        tp_check_three(T, "parallel", rows, n, lines, "two");
        // the format set in the configuration wins over the name
        c.format = FAT5_PAIRS_TSV;
        path = TP_WRITE(T, "tab.txt", "Hello, world\tBonjour\nsay \"hi\"\ttwo\ncaf\xc3\xa9\tx\n");
        n = tp_read(T, path, NULL, &c, NULL, rows);
        tp_check_three(T, "tsv", rows, n, lines, "two");
        FAT5_CHECK(T, tp_read(T, path, NULL, NULL, NULL, rows) == -1 &&
                      strstr(fat5_last_error(fat5_test_ctx(T)), "tab.txt") != NULL);
    }
    // rewind: the same rows again
    {
        fat5_pairs *p = NULL;
        fat5_pairs_row r;
        int has = 0, k;
        path = TP_WRITE(T, "r.jsonl", "{\"input\": \"a\", \"target\": \"b\"}\n{\"input\": \"c\", \"target\": \"d\"}");
        FAT5_REQUIRE_OK(T, fat5_pairs_open(fat5_test_ctx(T), path, NULL, NULL, &p));
        for (k = 0; k < 2; k++) {
            FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && has && r.line == 1 && r.input_text[0] == 'a');
            FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && has && r.line == 2 && r.input_text[0] == 'c');
            FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && !has);
            FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && !has);   // the end stays the end
            FAT5_CHECK(T, fat5_pairs_rewind(p) == FAT5_OK);
        }
        fat5_pairs_close(p);
    }
}

static void t_pairs_line_endings(fat5_test *T) {
    tp_row rows[TP_MAX_ROWS];
    const char *path, *path2, *msg;
    int n;
    // CRLF everywhere; the last line without a newline
    path = TP_WRITE(T, "crlf.jsonl", "{\"input\": \"a\", \"target\": \"b\"}\r\n{\"input\": \"c\", \"target\": \"d\"}");
    n = tp_read(T, path, NULL, NULL, NULL, rows);
    FAT5_CHECK(T, n == 2 && strcmp(rows[1].in, "c") == 0 && strcmp(rows[1].tgt, "d") == 0 && rows[1].line == 2);
    path = TP_WRITE(T, "crlf.tsv", "input\ttarget\r\na\tb\r\nc\td");
    n = tp_read(T, path, NULL, NULL, NULL, rows);
    FAT5_CHECK(T, n == 2 && strcmp(rows[0].tgt, "b") == 0 && strcmp(rows[1].tgt, "d") == 0 && rows[1].line == 3);
    path = TP_WRITE(T, "crlf.csv", "input,target\r\na,\"b\r\nb\"\r\nc,d");
    n = tp_read(T, path, NULL, NULL, NULL, rows);
    FAT5_CHECK(T, n == 2 && strcmp(rows[0].tgt, "b\r\nb") == 0 && strcmp(rows[1].tgt, "d") == 0 && rows[1].line == 4);
    FAT5_CHECK(T, n == 2 && tp_is_bytes(rows[0].tgt_ids, rows[0].n_tgt, "b\r\nb"));
    path = TP_WRITE(T, "crlf_src.txt", "a\r\nc");
    path2 = TP_WRITE(T, "crlf_tgt.txt", "b\r\nd\r\n");
    n = tp_read(T, path, path2, NULL, NULL, rows);
    FAT5_CHECK(T, n == 2 && strcmp(rows[0].in, "a") == 0 && strcmp(rows[0].tgt, "b") == 0 &&
                  strcmp(rows[1].in, "c") == 0 && strcmp(rows[1].tgt, "d") == 0);
    // an empty file, and a header alone, are errors that name the file
    path = TP_WRITE(T, "empty.jsonl", "");
    FAT5_CHECK(T, tp_read(T, path, NULL, NULL, NULL, rows) == -1);
    msg = fat5_last_error(fat5_test_ctx(T));
    FAT5_CHECK_MSG(T, strstr(msg, "empty.jsonl: no pairs: an empty file") != NULL, "message: %s", msg);
    path = TP_WRITE(T, "empty.csv", "");
    FAT5_CHECK(T, tp_read(T, path, NULL, NULL, NULL, rows) == -1);
    msg = fat5_last_error(fat5_test_ctx(T));
    FAT5_CHECK_MSG(T, strstr(msg, "empty.csv: no pairs: an empty file") != NULL, "message: %s", msg);
    path = TP_WRITE(T, "header.csv", "input,target\r\n");
    FAT5_CHECK(T, tp_read(T, path, NULL, NULL, NULL, rows) == -1);
    msg = fat5_last_error(fat5_test_ctx(T));
    FAT5_CHECK_MSG(T, strstr(msg, "header.csv: no pairs: only a header") != NULL, "message: %s", msg);
    path = TP_WRITE(T, "empty_src.txt", "");
    path2 = TP_WRITE(T, "empty_tgt.txt", "");
    FAT5_CHECK(T, tp_read(T, path, path2, NULL, NULL, rows) == -1);
    msg = fat5_last_error(fat5_test_ctx(T));
    FAT5_CHECK_MSG(T, strstr(msg, "empty_src.txt: no pairs") != NULL, "message: %s", msg);
}

// the ids fat5_tokenize gives for text without special tokens (at most 64), their count
static int64_t tp_plain_ids(fat5_test *T, fat5_tokenizer *tok, const char *text, int32_t *out) {
    int32_t *ids = NULL;
    int64_t n = 0;
    if (fat5_tokenize(tok, text, strlen(text), NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &n) != FAT5_OK || n > 64) {
        fat5_test_fail(T, __FILE__, __LINE__, "tokenize \"%s\" failed", text);
        fat5_free(fat5_test_ctx(T), ids);
        return -1;
    }
    memcpy(out, ids, (size_t)n * sizeof *out);
    fat5_free(fat5_test_ctx(T), ids);
    return n;
}

// got == Hugging Face's truncate-then-EOS of the plain ids: plain[0 .. min(n, max - 1)) + [eos]
static int tp_is_truncated(const int32_t *got, int64_t n_got, const int32_t *plain, int64_t n_plain, int64_t max_len,
                           int32_t eos) {
    int64_t keep = max_len > 0 && n_plain > max_len - 1 ? max_len - 1 : n_plain, i;
    if (n_got != keep + 1 || got[keep] != eos) return 0;
    for (i = 0; i < keep; i++)
        if (got[i] != plain[i]) return 0;
    return 1;
}

static void t_pairs_prefix(fat5_test *T) {
    fat5_tokenizer *tok = NULL;
    fat5_pairs_config c = fat5_pairs_config_default();
    tp_row rows[TP_MAX_ROWS];
    int32_t plain[64];
    int64_t n_plain;
    const char *path;
    int n;
    path = TP_WRITE(T, "p.jsonl", "{\"input\": \"Hello world\", \"target\": \"hello\"}\n");
    c.prefix = "summarize: ";
    // byte-level: the prefix's bytes first
    n = tp_read(T, path, NULL, &c, NULL, rows);
    FAT5_REQUIRE(T, n == 1);
    FAT5_CHECK(T, tp_is_bytes(rows[0].in_ids, rows[0].n_in, "summarize: Hello world"));
    FAT5_CHECK(T, strcmp(rows[0].in, "Hello world") == 0);   // the text is the row's, without the prefix
    FAT5_CHECK(T, tp_is_bytes(rows[0].tgt_ids, rows[0].n_tgt, "hello"));   // the target has no prefix
    // the fixture tokenizer: the ids of prefix + input, tokenized as one text
    if (fat5_tokenizer_load(fat5_test_ctx(T), FAT5_TEST_DATA "/t5_spiece/spiece.model", &tok) != FAT5_OK)
        FAT5_SKIP(T, "fixture tests/data/t5_spiece not found");
    n = tp_read(T, path, NULL, &c, tok, rows);
    n_plain = tp_plain_ids(T, tok, "summarize: Hello world", plain);
    FAT5_CHECK(T, n == 1 && tp_is_truncated(rows[0].in_ids, rows[0].n_in, plain, n_plain, 0, 1));
    // sentencepiece's ids for "hello" (cases.json, mt5bf) and EOS
    FAT5_CHECK(T, n == 1 && rows[0].n_tgt == 4 && rows[0].tgt_ids[0] == 346 && rows[0].tgt_ids[1] == 381 &&
                  rows[0].tgt_ids[2] == 282 && rows[0].tgt_ids[3] == 1);
    // and truncation applies to prefix + input: max 3 keeps the first two ids of the whole
    c.max_source_length = 3;
    n = tp_read(T, path, NULL, &c, tok, rows);
    FAT5_CHECK(T, n == 1 && rows[0].n_in == 3 && rows[0].in_ids[0] == plain[0] && rows[0].in_ids[1] == plain[1] &&
                  rows[0].in_ids[2] == 1 && rows[0].in_cut == n_plain - 2);
    fat5_tokenizer_destroy(tok);
}

static void t_pairs_truncation(fat5_test *T) {
    static const char *const sentence = "The quick brown fox jumps over the lazy dog.";
    // sentencepiece's ids for the sentence (tests/data/tokenizers/cases.json, mt5bf, plain): 21
    static const int32_t sp_ids[21] = {325, 896, 360, 336, 799, 273, 304, 282, 407, 705, 452,
                                       303, 262, 590, 265, 676, 432, 276, 341, 297, 263};
    // tokenizer(sentence, truncation=True, max_length=5), by hand: four ids, then </s>
    static const int32_t want5[5] = {325, 896, 360, 336, 1};
    static const char *const files[2] = {"spiece.model", "tokenizer.json"};
    char data[512];
    const char *path;
    tp_row rows[TP_MAX_ROWS];
    int f, n;
    snprintf(data, sizeof data, "{\"input\": \"%s\", \"target\": \"%s\"}\n", sentence, sentence);
    path = tp_write(T, "t.jsonl", data, strlen(data));
    for (f = 0; f < 2; f++) {   // both files of the fixture tokenizer (no template / a template)
        fat5_tokenizer *tok = NULL;
        char tp[256];
        int32_t plain[64];
        int64_t n_plain, L, d;
        snprintf(tp, sizeof tp, FAT5_TEST_DATA "/t5_spiece/%s", files[f]);
        if (fat5_tokenizer_load(fat5_test_ctx(T), tp, &tok) != FAT5_OK) FAT5_SKIP(T, "fixture tests/data/t5_spiece not found");
        n_plain = tp_plain_ids(T, tok, sentence, plain);
        FAT5_CHECK_MSG(T, n_plain == 21 && memcmp(plain, sp_ids, sizeof sp_ids) == 0, "%s: not sentencepiece's ids", files[f]);
        L = n_plain + 1;   // the full sequence with </s>
        for (d = -1; d <= 1; d++) {   // max_length L - 1, L, L + 1; the target with the other bounds
            fat5_pairs_config c = fat5_pairs_config_default();
            c.max_source_length = L + d;
            c.max_target_length = L - d;
            n = tp_read(T, path, NULL, &c, tok, rows);
            FAT5_REQUIRE(T, n == 1);
            FAT5_CHECK_MSG(T, tp_is_truncated(rows[0].in_ids, rows[0].n_in, plain, n_plain, L + d, 1),
                           "%s: max_source_length %lld: %lld ids", files[f], (long long)(L + d), (long long)rows[0].n_in);
            FAT5_CHECK_MSG(T, tp_is_truncated(rows[0].tgt_ids, rows[0].n_tgt, plain, n_plain, L - d, 1),
                           "%s: max_target_length %lld: %lld ids", files[f], (long long)(L - d), (long long)rows[0].n_tgt);
            FAT5_CHECK(T, rows[0].n_in == (d < 0 ? L - 1 : L) && rows[0].in_cut == (d < 0 ? 1 : 0));
            FAT5_CHECK(T, rows[0].n_tgt == (d > 0 ? L - 1 : L) && rows[0].tgt_cut == (d > 0 ? 1 : 0));
        }
        {   // the hand-checked list; no limit; a limit of 1 keeps </s> alone
            fat5_pairs_config c = fat5_pairs_config_default();
            c.max_source_length = 5;
            c.max_target_length = 1;
            n = tp_read(T, path, NULL, &c, tok, rows);
            FAT5_REQUIRE(T, n == 1);
            FAT5_CHECK_MSG(T, rows[0].n_in == 5 && memcmp(rows[0].in_ids, want5, sizeof want5) == 0, "%s: max 5", files[f]);
            FAT5_CHECK(T, rows[0].n_tgt == 1 && rows[0].tgt_ids[0] == 1 && rows[0].tgt_cut == 21);
            c.max_source_length = c.max_target_length = 0;
            n = tp_read(T, path, NULL, &c, tok, rows);
            FAT5_CHECK(T, n == 1 && rows[0].n_in == 22 && memcmp(rows[0].in_ids, sp_ids, sizeof sp_ids) == 0 &&
                          rows[0].in_ids[21] == 1 && rows[0].in_cut == 0);
        }
        fat5_tokenizer_destroy(tok);
    }
    {   // byte-level: "abcd" is 5 ids with EOS; bounds 4, 5, 6
        static const int32_t want4[4] = {'a' + 3, 'b' + 3, 'c' + 3, 1};
        fat5_pairs_config c = fat5_pairs_config_default();
        int64_t m;
        path = TP_WRITE(T, "b.tsv", "abcd\tabcd\n");
        for (m = 4; m <= 6; m++) {
            c.max_source_length = c.max_target_length = m;
            n = tp_read(T, path, NULL, &c, NULL, rows);
            FAT5_REQUIRE(T, n == 1);
            if (m == 4) FAT5_CHECK(T, rows[0].n_in == 4 && memcmp(rows[0].in_ids, want4, sizeof want4) == 0 && rows[0].in_cut == 1);
            else FAT5_CHECK(T, tp_is_bytes(rows[0].in_ids, rows[0].n_in, "abcd") && rows[0].in_cut == 0);
            FAT5_CHECK(T, rows[0].n_tgt == rows[0].n_in && memcmp(rows[0].tgt_ids, rows[0].in_ids, (size_t)rows[0].n_in * 4) == 0);
        }
    }
}

// reading path (and path2) fails, or its row `bad` (0-based, among the rows read) does; the
// message holds each of the wanted pieces
static void tp_bad(fat5_test *T, int line_of_test, const char *path, const char *path2, const fat5_pairs_config *cfg,
                   const char *want1, const char *want2) {
    fat5_pairs *p = NULL;
    fat5_pairs_row r;
    fat5_status st;
    int has = 1, k = 0;
    const char *msg;
    st = fat5_pairs_open(fat5_test_ctx(T), path, path2, cfg, &p);
    while (st == FAT5_OK && has && k++ < 100) st = fat5_pairs_next(p, NULL, &r, &has);
    msg = fat5_last_error(fat5_test_ctx(T));
    if (st != FAT5_ERR_FORMAT || !strstr(msg, want1) || (want2 && !strstr(msg, want2)))
        fat5_test_fail(T, __FILE__, line_of_test, "%s: status %s, message \"%s\"; want \"%s\"%s%s", path,
                       fat5_status_string(st), msg, want1, want2 ? " and " : "", want2 ? want2 : "");
    fat5_pairs_close(p);
}
#define TP_BAD(T, path, path2, cfg, want1, want2) tp_bad((T), __LINE__, (path), (path2), (cfg), (want1), (want2))

static void t_pairs_bad_rows(fat5_test *T) {
    fat5_pairs_config c = fat5_pairs_config_default();
    const char *path, *path2;
    path = TP_WRITE(T, "m.jsonl", "{\"input\": \"a\", \"target\": \"b\"}\n{\"input\": \"a\"}\n");
    TP_BAD(T, path, NULL, NULL, "m.jsonl: line 2: missing field \"target\"", NULL);
    path = TP_WRITE(T, "s.jsonl", "\n{\"input\": 3, \"target\": \"b\"}\n");
    TP_BAD(T, path, NULL, NULL, "s.jsonl: line 2: field \"input\" is a number, not a string", NULL);
    path = TP_WRITE(T, "o.jsonl", "[\"a\", \"b\"]\n");
    TP_BAD(T, path, NULL, NULL, "o.jsonl: line 1: a JSON array", NULL);
    path = TP_WRITE(T, "j.jsonl", "{\"input\": \"a\", \"target\": \"b\",}\n");
    TP_BAD(T, path, NULL, NULL, "j.jsonl: line 1: JSON: line 1 column", NULL);
    // invalid UTF-8: 0xFF is the 14th byte of line 2, at offset 44 of the file
    path = TP_WRITE(T, "u.jsonl", "{\"input\": \"a\", \"target\": \"bb\"}\n{\"input\": \"ab\xff\", \"target\": \"b\"}\n");
    TP_BAD(T, path, NULL, NULL, "u.jsonl: line 2: invalid UTF-8 at byte offset 44 of the file (column 14 of the line: 0xFF)", NULL);
    path = TP_WRITE(T, "u.tsv", "a\tb\nc\td\xc3\n");   // a truncated two-byte character at the end
    TP_BAD(T, path, NULL, NULL, "u.tsv: line 2: invalid UTF-8 at byte offset 7 of the file (column 4 of the line: 0xC3)", NULL);
    path = TP_WRITE(T, "z.tsv", "a\tb\nc\td\0e\n");
    TP_BAD(T, path, NULL, NULL, "z.tsv: line 2: a NUL byte at byte offset 7 of the file (column 4 of the line)", NULL);
    path = TP_WRITE(T, "e.jsonl", "{\"input\": \"a\", \"target\": \"b\"}\n{\"input\": \"a\", \"target\": \"\"}\n");
    TP_BAD(T, path, NULL, NULL, "e.jsonl: line 2: empty target", NULL);
    path = TP_WRITE(T, "e.tsv", "input\ttarget\na\tb\nc\t\r\n");
    TP_BAD(T, path, NULL, NULL, "e.tsv: line 3: empty target", NULL);
    path = TP_WRITE(T, "c.tsv", "a\tb\nc\td\te\n");
    TP_BAD(T, path, NULL, NULL, "c.tsv: line 2: 3 columns, want 2", NULL);
    path = TP_WRITE(T, "c1.tsv", "a\tb\n\nc\n");
    TP_BAD(T, path, NULL, NULL, "c1.tsv: line 3: 1 column, want 2", NULL);
    path = TP_WRITE(T, "c.csv", "input,target\na,b\nc,d,e\n");
    TP_BAD(T, path, NULL, NULL, "c.csv: line 3: 3 columns, want 2", NULL);
    path = TP_WRITE(T, "q.csv", "input,target\na,b\nc,\"d\ne\nf\n");
    TP_BAD(T, path, NULL, NULL, "q.csv: line 3: unterminated quoted field", "quote at line 3, column 3");
    path = TP_WRITE(T, "q2.csv", "input,target\na,\"b\"c\n");
    TP_BAD(T, path, NULL, NULL, "q2.csv: line 2: column 6: 'c' after a closing quote", NULL);
    path = TP_WRITE(T, "q3.csv", "input,target\na,b\"c\n");
    TP_BAD(T, path, NULL, NULL, "q3.csv: line 2: column 4: a quote inside an unquoted field", NULL);
    path = TP_WRITE(T, "h.csv", "in,out\na,b\n");
    TP_BAD(T, path, NULL, NULL, "h.csv: line 1: the header row has no column \"input\"", NULL);
    // parallel files of different lengths, either way round
    path = TP_WRITE(T, "p_src.txt", "a\nb\nc\n");
    path2 = TP_WRITE(T, "p_tgt.txt", "x\ny");
    TP_BAD(T, path, path2, NULL, "p_src.txt: line 3: no partner line: ", "p_tgt.txt ends after 2 lines");
    TP_BAD(T, path2, path, NULL, "p_src.txt: line 3: no partner line: ", "p_tgt.txt ends after 2 lines");
    path2 = TP_WRITE(T, "p_tgt2.txt", "x\n\nz\n");
    TP_BAD(T, path, path2, NULL, "p_tgt2.txt: line 2: empty target", NULL);
    // an over-long line
    c.max_line_bytes = 8;
    path = TP_WRITE(T, "l.tsv", "a\tb\nabcd\tefgh\n");
    TP_BAD(T, path, NULL, &c, "l.tsv: line 2: longer than the limit of 8 bytes", NULL);
    {   // a bad row is skipped by asking again: the reader stands after it
        fat5_pairs *p = NULL;
        fat5_pairs_row r;
        int has = 0;
        path = TP_WRITE(T, "k.jsonl", "{\"input\": \"a\", \"target\": \"b\"}\n{\"input\": \"a\"}\n{\"input\": \"c\", \"target\": \"d\"}\n");
        FAT5_REQUIRE_OK(T, fat5_pairs_open(fat5_test_ctx(T), path, NULL, NULL, &p));
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && has && r.line == 1);
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_ERR_FORMAT && !has);
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && has && r.line == 3 && r.index == 1 &&
                      strcmp(r.target_text, "d") == 0);
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && !has);
        fat5_pairs_close(p);
    }
    {   // a stopping error stays until rewind
        fat5_pairs *p = NULL;
        fat5_pairs_row r;
        int has = 0;
        path = TP_WRITE(T, "st.csv", "input,target\na,\"b\n");
        FAT5_REQUIRE_OK(T, fat5_pairs_open(fat5_test_ctx(T), path, NULL, NULL, &p));
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_ERR_FORMAT);
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_ERR_FORMAT && !has &&
                      strstr(fat5_last_error(fat5_test_ctx(T)), "an earlier error stopped the reader") != NULL);
        FAT5_CHECK(T, fat5_pairs_rewind(p) == FAT5_OK && fat5_pairs_next(p, NULL, &r, &has) == FAT5_ERR_FORMAT &&
                      strstr(fat5_last_error(fat5_test_ctx(T)), "unterminated") != NULL);
        fat5_pairs_close(p);
    }
    {   // arguments: an unknown extension, a missing file (I/O), a max length below the special tokens
        fat5_pairs *p = NULL;
        fat5_pairs_row r;
        int has = 0;
        FAT5_CHECK(T, fat5_pairs_open(fat5_test_ctx(T), "x.parquet", NULL, NULL, &p) == FAT5_ERR_INVALID_ARG && !p);
        FAT5_CHECK(T, fat5_pairs_open(fat5_test_ctx(T), "/nonexistent/x.jsonl", NULL, NULL, &p) == FAT5_ERR_IO && !p &&
                      strstr(fat5_last_error(fat5_test_ctx(T)), "/nonexistent/x.jsonl") != NULL);
        c = fat5_pairs_config_default();
        c.max_target_length = 0;
        c.format = FAT5_PAIRS_JSONL;
        FAT5_CHECK(T, fat5_pairs_open(fat5_test_ctx(T), path, "y.txt", &c, &p) == FAT5_ERR_INVALID_ARG && !p);
        path = TP_WRITE(T, "ok.jsonl", "{\"input\": \"a\", \"target\": \"b\"}\n");
        c = fat5_pairs_config_default();
        c.max_source_length = 0;
        c.max_target_length = 1;
        FAT5_REQUIRE_OK(T, fat5_pairs_open(fat5_test_ctx(T), path, NULL, &c, &p));
        FAT5_CHECK(T, fat5_pairs_next(p, NULL, &r, &has) == FAT5_OK && has && r.n_target == 1);
        fat5_pairs_close(p);
    }
}

static void t_pairs_field_names(fat5_test *T) {
    fat5_pairs_config c = fat5_pairs_config_default();
    tp_row rows[TP_MAX_ROWS];
    const char *path;
    int n;
    c.input_field = "document";
    c.target_field = "summary";
    path = TP_WRITE(T, "f.jsonl", "{\"summary\": \"s\", \"document\": \"d\", \"input\": 1}\n");
    n = tp_read(T, path, NULL, &c, NULL, rows);
    FAT5_CHECK(T, n == 1 && strcmp(rows[0].in, "d") == 0 && strcmp(rows[0].tgt, "s") == 0);
    path = TP_WRITE(T, "f.csv", "summary,id,document\n\"s, t\",1,d\n");
    n = tp_read(T, path, NULL, &c, NULL, rows);
    FAT5_CHECK(T, n == 1 && strcmp(rows[0].in, "d") == 0 && strcmp(rows[0].tgt, "s, t") == 0 && rows[0].line == 2);
    path = TP_WRITE(T, "f.tsv", "summary\tdocument\ns\td\n");
    n = tp_read(T, path, NULL, &c, NULL, rows);
    FAT5_CHECK(T, n == 1 && strcmp(rows[0].in, "d") == 0 && strcmp(rows[0].tgt, "s") == 0);
    // the two names must differ, given or defaulted
    c.input_field = "target";
    c.target_field = NULL;
    FAT5_CHECK(T, tp_read(T, path, NULL, &c, NULL, rows) == -1 &&
                  strstr(fat5_last_error(fat5_test_ctx(T)), "two different non-empty names") != NULL);
    c.input_field = "document";
    c.target_field = "summary";
    // named columns need a header
    path = TP_WRITE(T, "g.tsv", "d\ts\n");
    TP_BAD(T, path, NULL, &c, "g.tsv: line 1: the header row has no column \"document\"", NULL);
    path = TP_WRITE(T, "g.jsonl", "{\"input\": \"d\", \"target\": \"s\"}\n");
    TP_BAD(T, path, NULL, &c, "g.jsonl: line 1: missing field \"document\"", NULL);
}
