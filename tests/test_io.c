// I/O: the strict JSON reader and the string builder, atomic writes, fp16 / bf16 conversions, and
// safetensors: writer -> reader round trips and a corpus of malformed files, one test per defect.
// Every rejection is checked for its status and for a word naming the problem in the message.

#include <dirent.h>
#include <locale.h>
#include <sys/stat.h>

#ifndef FAT5_TEST_DATA
#define FAT5_TEST_DATA "tests/data"
#endif

#define TIO_PATH_CAP 1024

static void tio_path(fat5_test *T, char *buf, const char *name) {
    snprintf(buf, TIO_PATH_CAP, "%s/%s", fat5_test_tmpdir(T), name);
}

static int tio_write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    int ok;
    if (!fp) return 0;
    ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

// A raw safetensors file: hlen as 8 little-endian bytes, the header text, data_len zero bytes.
static int tio_write_st_raw(const char *path, uint64_t hlen, const char *header, size_t data_len) {
    size_t hl = strlen(header), n = 8 + hl + data_len, i;
    unsigned char *b = (unsigned char *)calloc(n, 1);
    int ok;
    if (!b) return 0;
    for (i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, header, hl);
    ok = tio_write_bytes(path, b, n);
    free(b);
    return ok;
}

static int tio_write_st(const char *path, const char *header, size_t data_len) {
    return tio_write_st_raw(path, strlen(header), header, data_len);
}

static int tio_err_has(fat5_test *T, const char *word) {
    return strstr(fat5_last_error(fat5_test_ctx(T)), word) != NULL;
}

// fat5_st_load(path) must fail with status, leave *out NULL, and report a message that starts
// with the path and contains word.
static void tio_open_bad_at(fat5_test *T, int line, const char *path, fat5_status want,
                            const char *word) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_st_file *f = NULL;
    fat5_status s = fat5_st_load(ctx, path, &f);
    const char *e = fat5_last_error(ctx);
    FAT5_CHECK_MSG(T, s == want, "line %d: fat5_st_load -> %s, want %s (%s)", line,
                   fat5_status_string(s), fat5_status_string(want), e);
    FAT5_CHECK_MSG(T, f == NULL, "line %d: *out is not NULL after a failure", line);
    FAT5_CHECK_MSG(T, strncmp(e, path, strlen(path)) == 0,
                   "line %d: message '%s' does not start with the path", line, e);
    FAT5_CHECK_MSG(T, strstr(e, word) != NULL, "line %d: message '%s' does not mention '%s'", line,
                   e, word);
    fat5_st_destroy(f);
}
#define TIO_OPEN_BAD(T, path, want, word) tio_open_bad_at((T), __LINE__, (path), (want), (word))

// writes header + data_len zero bytes to <tmpdir>/name and expects FAT5_ERR_FORMAT mentioning word
static void tio_bad_header_at(fat5_test *T, int line, const char *name, const char *header,
                              size_t data_len, const char *word) {
    char path[TIO_PATH_CAP];
    tio_path(T, path, name);
    if (!tio_write_st(path, header, data_len)) {
        FAT5_CHECK_MSG(T, 0, "line %d: cannot write %s", line, path);
        return;
    }
    tio_open_bad_at(T, line, path, FAT5_ERR_FORMAT, word);
}
#define TIO_BAD_HEADER(T, name, header, data_len, word) \
    tio_bad_header_at((T), __LINE__, (name), (header), (data_len), (word))

static fat5_status tio_open(fat5_test *T, const char *path, fat5_st_file **f) {
    return fat5_st_load(fat5_test_ctx(T), path, f);
}

static uint32_t tio_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float tio_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---------------------------------------------------------------------------------------------
// JSON

// canonical text of a DOM (no whitespace), written with the library's string builder
static void tio_json_dump(fat5__sb *b, const fat5__json *v) {
    const fat5__json *c;
    switch (v->type) {
    case FAT5__J_NULL: fat5__sb_puts(b, "null"); break;
    case FAT5__J_FALSE: fat5__sb_puts(b, "false"); break;
    case FAT5__J_TRUE: fat5__sb_puts(b, "true"); break;
    case FAT5__J_NUMBER: fat5__sb_puts(b, v->str); break;
    case FAT5__J_STRING: fat5__sb_json_string(b, v->str); break;
    case FAT5__J_ARRAY:
    case FAT5__J_OBJECT:
        fat5__sb_puts(b, v->type == FAT5__J_ARRAY ? "[" : "{");
        for (c = v->child; c; c = c->next) {
            if (c != v->child) fat5__sb_puts(b, ",");
            if (v->type == FAT5__J_OBJECT) {
                fat5__sb_json_string(b, c->key);
                fat5__sb_puts(b, ":");
            }
            tio_json_dump(b, c);
        }
        fat5__sb_puts(b, v->type == FAT5__J_ARRAY ? "]" : "}");
        break;
    }
}

static void t_io_json_valid(fat5_test *T) {
    static const char src[] =
        " \r\n\t{\"a\": [1, -0, 0.5, -1.25e+10, 3E-2, 0, 123456789012345678901234567890],\n"
        "  \"s\": \"q\\\"b\\\\s\\/n\\n t\\t u\\u00e9 \\ud83d\\ude00 \\u20AC\\b\\f\\r\",\n"
        "  \"nested\": {\"x\": {\"y\": [[], {}, [null, true, false]]}},\n"
        "  \"empty\": \"\", \"utf8\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"} \n";
    static const char canon[] =
        "{\"a\":[1,-0,0.5,-1.25e+10,3E-2,0,123456789012345678901234567890],"
        "\"s\":\"q\\\"b\\\\s/n\\u000A t\\u0009 u\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac"
        "\\u0008\\u000C\\u000D\","
        "\"nested\":{\"x\":{\"y\":[[],{},[null,true,false]]}},"
        "\"empty\":\"\",\"utf8\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}";
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *d = NULL, *d2 = NULL;
    const fat5__json *root, *a, *s, *y;
    fat5__sb b, b2;
    int64_t i64;
    double x;
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "t.json", src, strlen(src), 8, &d));
    root = fat5__json_root(d);
    FAT5_REQUIRE(T, root && root->type == FAT5__J_OBJECT && root->n == 5);
    a = fat5__json_get(root, "a");
    FAT5_REQUIRE(T, a && a->type == FAT5__J_ARRAY && a->n == 7);
    FAT5_CHECK(T, fat5__json_as_i64(a->child, &i64) && i64 == 1);
    FAT5_CHECK(T, fat5__json_as_double(a->child->next->next->next, &x) && x == -1.25e10);
    FAT5_CHECK(T, strcmp(a->child->next->next->next->next->str, "3E-2") == 0);
    s = fat5__json_get(root, "s");
    FAT5_REQUIRE(T, s && s->type == FAT5__J_STRING);
    FAT5_CHECK(T, s->len == strlen(s->str));
    FAT5_CHECK(T, strstr(s->str, "\xf0\x9f\x98\x80") != NULL);   // the surrogate pair, as UTF-8
    FAT5_CHECK(T, strncmp(s->str, "q\"b\\s/n\n t\t u\xc3\xa9 ", 16) == 0);
    FAT5_CHECK(T, fat5__json_get(root, "empty")->len == 0);
    FAT5_CHECK(T, fat5__json_get(root, "missing") == NULL);
    FAT5_CHECK(T, fat5__json_get(a, "a") == NULL);   // not an object
    y = fat5__json_get(fat5__json_get(fat5__json_get(root, "nested"), "x"), "y");
    FAT5_REQUIRE(T, y && y->type == FAT5__J_ARRAY && y->n == 3);
    FAT5_CHECK(T, y->child->n == 0 && y->child->next->type == FAT5__J_OBJECT);
    FAT5_CHECK(T, y->child->next->next->child->type == FAT5__J_NULL);
    FAT5_CHECK(T, y->child->next->next->child->next->type == FAT5__J_TRUE);
    FAT5_CHECK(T, y->child->next->next->child->next->next->type == FAT5__J_FALSE);
    // round trip: dump -> the canonical text; parse the dump -> the same dump
    fat5__sb_init(&b, ctx);
    tio_json_dump(&b, root);
    FAT5_REQUIRE(T, !b.oom);
    FAT5_CHECK_MSG(T, strcmp(b.buf, canon) == 0, "dump:\n%s\nwant:\n%s", b.buf, canon);
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "t.json", b.buf, b.len, 8, &d2));
    fat5__sb_init(&b2, ctx);
    tio_json_dump(&b2, fat5__json_root(d2));
    FAT5_CHECK(T, !b2.oom && strcmp(b.buf, b2.buf) == 0);
    fat5__sb_free(&b);
    fat5__sb_free(&b2);
    fat5__json_free(ctx, d);
    fat5__json_free(ctx, d2);
    // scalars at the top level, and a long string that needs an arena block of its own
    {
        static const char *ok[] = {"0", "-0.0e-0", "\"x\"", "null", "  true  ", "[]", "{}"};
        char *big = (char *)malloc(100003);
        size_t i;
        for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
            fat5_status st = fat5__json_parse(ctx, NULL, ok[i], strlen(ok[i]), 1, &d);
            FAT5_CHECK_MSG(T, st == FAT5_OK, "'%s' -> %s", ok[i], fat5_last_error(ctx));
            fat5__json_free(ctx, d);
        }
        FAT5_REQUIRE(T, big != NULL);
        big[0] = '"';
        memset(big + 1, 'z', 100000);
        big[100001] = '"';
        big[100002] = 0;
        FAT5_CHECK(T, fat5__json_parse(ctx, NULL, big, 100002, 1, &d) == FAT5_OK &&
                          fat5__json_root(d)->len == 100000);
        fat5__json_free(ctx, d);
        free(big);
    }
}

static void tio_json_reject_at(fat5_test *T, int line, const char *src, size_t len, int max_depth,
                               const char *word) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *d = NULL;
    fat5_status s = fat5__json_parse(ctx, "test.json", src, len, max_depth, &d);
    const char *e = fat5_last_error(ctx);
    FAT5_CHECK_MSG(T, s == FAT5_ERR_FORMAT, "line %d: parse -> %s, want FAT5_ERR_FORMAT", line,
                   fat5_status_string(s));
    FAT5_CHECK_MSG(T, d == NULL, "line %d: a document was returned", line);
    FAT5_CHECK_MSG(T, strncmp(e, "test.json: JSON: line ", 22) == 0 && strstr(e, word),
                   "line %d: message '%s' does not mention '%s'", line, e, word);
    fat5__json_free(ctx, d);
}
#define TIO_JSON_REJECT(T, src, word) \
    tio_json_reject_at((T), __LINE__, (src), strlen(src), 16, (word))

static void t_io_json_error_position(fat5_test *T) {
    TIO_JSON_REJECT(T, "{\n  \"a\": 1,\n  \"key_name\" 2\n}",
                    "line 3 column 14: expected ':' after object key");
    TIO_JSON_REJECT(T, "", "line 1 column 1: unexpected end of input");
    TIO_JSON_REJECT(T, "[1,\n2,\n]", "line 3 column 1: trailing comma");
    TIO_JSON_REJECT(T, "{\"a\":1,}", "trailing comma");
    TIO_JSON_REJECT(T, "[1 2]", "expected ',' or ']'");
    TIO_JSON_REJECT(T, "{\"a\" 1}", "expected ':'");
    TIO_JSON_REJECT(T, "{1:2}", "expected a string key");
    TIO_JSON_REJECT(T, "[1,", "end of input");
}

static void t_io_json_trailing_garbage(fat5_test *T) {
    TIO_JSON_REJECT(T, "{} x", "trailing data");
    TIO_JSON_REJECT(T, "[1]]", "trailing data");
    TIO_JSON_REJECT(T, "1 2", "trailing data");
    TIO_JSON_REJECT(T, "truex", "trailing data");
    tio_json_reject_at(T, __LINE__, "{}\0", 3, 16, "trailing data");   // a NUL inside len
}

static void t_io_json_depth_limit(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *d = NULL;
    size_t n = 200000;
    char *deep = (char *)malloc(n + 1);
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, NULL, "[[[[1]]]]", 9, 4, &d));
    fat5__json_free(ctx, d);
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, NULL, "{\"a\":{\"b\":[{}]}}", 16, 4, &d));
    fat5__json_free(ctx, d);
    tio_json_reject_at(T, __LINE__, "[[[[[1]]]]]", 11, 4, "nesting deeper than 4");
    tio_json_reject_at(T, __LINE__, "{\"a\":{\"b\":[{\"c\":[]}]}}", 22, 4, "nesting");
    tio_json_reject_at(T, __LINE__, "[]", 2, 0, "nesting");
    // 200000 open brackets: rejected at the limit, without recursing that deep
    FAT5_REQUIRE(T, deep != NULL);
    memset(deep, '[', n);
    deep[n] = 0;
    tio_json_reject_at(T, __LINE__, deep, n, 64, "nesting deeper than 64");
    free(deep);
}

static void t_io_json_duplicate_key(fat5_test *T) {
    TIO_JSON_REJECT(T, "{\"a\": 1, \"b\": 2, \"a\": 3}", "duplicate key \"a\"");
    TIO_JSON_REJECT(T, "{\"x\": {\"k\": 1, \"k\": 1}}", "duplicate key \"k\"");
    // the same key after escaping (\u0061 is 'a')
    TIO_JSON_REJECT(T, "{\"ab\": 1, \"\\u0061b\": 2}", "duplicate key");
    // reported at the second occurrence, line 2
    TIO_JSON_REJECT(T, "{\"z\":0,\"y\":0,\n\"z\":0}", "line 2 column 1: duplicate key");
    {   // the same key in different objects is fine
        fat5__jdoc *d = NULL;
        const char *ok = "[{\"a\":1},{\"a\":2},{\"b\":{\"a\":3},\"a\":4}]";
        FAT5_REQUIRE_OK(T, fat5__json_parse(fat5_test_ctx(T), NULL, ok, strlen(ok), 8, &d));
        fat5__json_free(fat5_test_ctx(T), d);
    }
}

static void t_io_json_bad_literal(fat5_test *T) {
    TIO_JSON_REJECT(T, "tru", "invalid literal");
    TIO_JSON_REJECT(T, "[nul]", "invalid literal");
    TIO_JSON_REJECT(T, "{\"a\": fals}", "invalid literal");
    TIO_JSON_REJECT(T, "True", "unexpected 'T'");
    TIO_JSON_REJECT(T, "NaN", "unexpected 'N'");
    TIO_JSON_REJECT(T, "[undefined]", "unexpected 'u'");
    TIO_JSON_REJECT(T, "'a'", "unexpected");
}

static void t_io_json_control_char(fat5_test *T) {
    TIO_JSON_REJECT(T, "\"a\tb\"", "control character 0x09");
    TIO_JSON_REJECT(T, "\"a\nb\"", "control character 0x0A");
    TIO_JSON_REJECT(T, "{\"k\x01\": 1}", "control character 0x01");
    tio_json_reject_at(T, __LINE__, "\"a\0b\"", 5, 16, "control character 0x00");
    TIO_JSON_REJECT(T, "\"\\x41\"", "invalid escape");
    TIO_JSON_REJECT(T, "\"\\u12G4\"", "invalid \\u escape");
    TIO_JSON_REJECT(T, "\"\\u0000\"", "\\u0000");
    TIO_JSON_REJECT(T, "\"\xff\"", "invalid UTF-8");
    TIO_JSON_REJECT(T, "\"\xc0\xaf\"", "invalid UTF-8");           // overlong '/'
    TIO_JSON_REJECT(T, "\"\xed\xa0\x80\"", "invalid UTF-8");       // an encoded surrogate
    TIO_JSON_REJECT(T, "\"\xf4\x90\x80\x80\"", "invalid UTF-8");   // above U+10FFFF
    TIO_JSON_REJECT(T, "\"\xe2\x82\"", "invalid UTF-8");           // cut short
}

static void t_io_json_lone_surrogate(fat5_test *T) {
    TIO_JSON_REJECT(T, "\"\\ud83d\"", "lone surrogate \\uD83D");
    TIO_JSON_REJECT(T, "\"\\ud83dx\"", "lone surrogate");
    TIO_JSON_REJECT(T, "\"\\ud83d\\u0041\"", "lone surrogate");
    TIO_JSON_REJECT(T, "\"\\ud83d\\ud83d\"", "lone surrogate");
    TIO_JSON_REJECT(T, "\"\\ude00\"", "lone surrogate \\uDE00");
    TIO_JSON_REJECT(T, "\"\\ude00\\ud83d\"", "lone surrogate");
}

static void t_io_json_leading_zero(fat5_test *T) {
    TIO_JSON_REJECT(T, "01", "leading zero");
    TIO_JSON_REJECT(T, "[-007]", "leading zero");
    TIO_JSON_REJECT(T, "+1", "unexpected '+'");
    TIO_JSON_REJECT(T, "1.", "digit after '.'");
    TIO_JSON_REJECT(T, ".5", "unexpected '.'");
    TIO_JSON_REJECT(T, "1e", "exponent");
    TIO_JSON_REJECT(T, "1e+", "exponent");
    TIO_JSON_REJECT(T, "-", "expected a digit");
    TIO_JSON_REJECT(T, "-Infinity", "expected a digit");
    TIO_JSON_REJECT(T, "0x10", "trailing data");
}

static void t_io_json_unterminated_string(fat5_test *T) {
    TIO_JSON_REJECT(T, "\"abc", "line 1 column 1: unterminated string");
    TIO_JSON_REJECT(T, "[\"abc\\\"]", "unterminated string");
    TIO_JSON_REJECT(T, "{\"a\": \"b", "unterminated string");
    TIO_JSON_REJECT(T, "\"\\", "unterminated string");
    TIO_JSON_REJECT(T, "{\"a", "unterminated string");
}

static void t_io_json_u64_limits(fat5_test *T) {
    const char *src = "[18446744073709551615, 18446744073709551616, -1, 1.0, 1e3, 0,"
                      " 99999999999999999999999]";
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *d = NULL;
    const fat5__json *v;
    uint64_t u = 0;
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, NULL, src, strlen(src), 4, &d));
    v = fat5__json_root(d)->child;
    FAT5_CHECK(T, fat5__json_as_u64(v, &u) && u == UINT64_MAX);
    u = 7;
    FAT5_CHECK(T, !fat5__json_as_u64(v->next, &u) && u == 7);   // 2^64: overflow, untouched
    FAT5_CHECK(T, !fat5__json_as_u64(v->next->next, &u));       // negative
    FAT5_CHECK(T, !fat5__json_as_u64(v->next->next->next, &u)); // 1.0
    FAT5_CHECK(T, !fat5__json_as_u64(v->next->next->next->next, &u));   // 1e3
    FAT5_CHECK(T, fat5__json_as_u64(v->next->next->next->next->next, &u) && u == 0);
    FAT5_CHECK(T, !fat5__json_as_u64(v->next->next->next->next->next->next, &u));
    FAT5_CHECK(T, !fat5__json_as_u64(fat5__json_root(d), &u));   // not a number
    fat5__json_free(ctx, d);
}

static void t_io_json_i64_limits(fat5_test *T) {
    const char *src = "[1.5, -9223372036854775808, 9223372036854775807, 9223372036854775808,"
                      " -9223372036854775809, -0, 2e0, \"5\"]";
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *d = NULL;
    const fat5__json *v;
    int64_t i = 7;
    double x = 0;
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, NULL, src, strlen(src), 4, &d));
    v = fat5__json_root(d)->child;
    FAT5_CHECK(T, !fat5__json_as_i64(v, &i) && i == 7);   // 1.5
    FAT5_CHECK(T, fat5__json_as_double(v, &x) && x == 1.5);
    v = v->next;
    FAT5_CHECK(T, fat5__json_as_i64(v, &i) && i == INT64_MIN);
    v = v->next;
    FAT5_CHECK(T, fat5__json_as_i64(v, &i) && i == INT64_MAX);
    v = v->next;
    FAT5_CHECK(T, !fat5__json_as_i64(v, &i));
    v = v->next;
    FAT5_CHECK(T, !fat5__json_as_i64(v, &i));
    v = v->next;
    FAT5_CHECK(T, fat5__json_as_i64(v, &i) && i == 0);
    v = v->next;
    FAT5_CHECK(T, !fat5__json_as_i64(v, &i));   // 2e0: not an integer literal
    FAT5_CHECK(T, fat5__json_as_double(v, &x) && x == 2.0);
    v = v->next;
    FAT5_CHECK(T, !fat5__json_as_i64(v, &i) && !fat5__json_as_double(v, &x));   // a string
    fat5__json_free(ctx, d);
}

static void t_io_json_double(fat5_test *T) {
    const char *src = "[1e-6, 0.1, -2.5E+3, 1e400, 1e-400]";
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5__jdoc *d = NULL;
    const fat5__json *v;
    double x = 0;
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, NULL, src, strlen(src), 4, &d));
    v = fat5__json_root(d)->child;
    FAT5_CHECK(T, fat5__json_as_double(v, &x) && x == 1e-6);
    FAT5_CHECK(T, fat5__json_as_double(v->next, &x) && x == 0.1);
    FAT5_CHECK(T, fat5__json_as_double(v->next->next, &x) && x == -2500.0);
    FAT5_CHECK(T, !fat5__json_as_double(v->next->next->next, &x));   // overflows a double
    FAT5_CHECK(T, fat5__json_as_double(v->next->next->next->next, &x) && x == 0.0);
    fat5__json_free(ctx, d);
}

static void t_io_read_file(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[TIO_PATH_CAP], *buf = NULL, *big;
    size_t len = 99, n = 100000, i;
    tio_path(T, path, "f.txt");
    FAT5_REQUIRE(T, tio_write_bytes(path, "hello", 5));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 5, &buf, &len));
    FAT5_CHECK(T, len == 5 && memcmp(buf, "hello", 6) == 0);   // NUL-terminated
    fat5__free(ctx, buf);
    FAT5_CHECK(T, fat5__read_file(ctx, path, 4, &buf, &len) == FAT5_ERR_FORMAT && buf == NULL);
    FAT5_CHECK(T, tio_err_has(T, "larger than the limit of 4 bytes"));
    FAT5_CHECK(T, fat5__read_file(ctx, path, 0, &buf, &len) == FAT5_ERR_FORMAT);
    // empty file
    FAT5_REQUIRE(T, tio_write_bytes(path, "", 0));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 0, &buf, &len));
    FAT5_CHECK(T, len == 0 && buf[0] == 0);
    fat5__free(ctx, buf);
    // a file larger than the first buffer
    big = (char *)malloc(n);
    FAT5_REQUIRE(T, big != NULL);
    for (i = 0; i < n; i++) big[i] = (char)('a' + i % 26);
    FAT5_REQUIRE(T, tio_write_bytes(path, big, n));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, n, &buf, &len));
    FAT5_CHECK(T, len == n && memcmp(buf, big, n) == 0 && buf[n] == 0);
    fat5__free(ctx, buf);
    FAT5_CHECK(T, fat5__read_file(ctx, path, n - 1, &buf, &len) == FAT5_ERR_FORMAT);
    free(big);
    // missing file, and a directory
    tio_path(T, path, "missing.txt");
    FAT5_CHECK(T, fat5__read_file(ctx, path, 100, &buf, &len) == FAT5_ERR_IO);
    FAT5_CHECK(T, tio_err_has(T, path) && tio_err_has(T, "cannot open"));
    FAT5_CHECK(T, fat5__read_file(ctx, fat5_test_tmpdir(T), 100, &buf, &len) == FAT5_ERR_IO);
}

// an allocator that refuses requests above a limit and records the largest request
typedef struct tio_alloc { size_t limit, largest; } tio_alloc;
static void *tio_alloc_fn(void *user, size_t n) {
    tio_alloc *a = (tio_alloc *)user;
    if (n > a->largest) a->largest = n;
    return n > a->limit ? NULL : malloc(n);
}
static void *tio_realloc_fn(void *user, void *p, size_t n) {
    tio_alloc *a = (tio_alloc *)user;
    if (n > a->largest) a->largest = n;
    return n > a->limit ? NULL : realloc(p, n);
}
static void tio_free_fn(void *user, void *p) {
    (void)user;
    free(p);
}
static fat5_ctx *tio_ctx_with_alloc(tio_alloc *a) {
    fat5_ctx_config c = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    c.alloc = tio_alloc_fn;
    c.realloc = tio_realloc_fn;
    c.free = tio_free_fn;
    c.alloc_user = a;
    return fat5_ctx_create(&c, &ctx, NULL, 0) == FAT5_OK ? ctx : NULL;
}

static void t_io_sb_builder(fat5_test *T) {
    fat5__sb b;
    tio_alloc lim;
    fat5_ctx *small;
    int i;
    fat5__sb_init(&b, fat5_test_ctx(T));
    for (i = 0; i < 1000; i++) fat5__sb_printf(&b, "%d,", i);
    fat5__sb_puts(&b, "end");
    FAT5_REQUIRE(T, !b.oom && b.buf && b.len == strlen(b.buf));
    FAT5_CHECK(T, strncmp(b.buf, "0,1,2,", 6) == 0 && strcmp(b.buf + b.len - 7, "999,end") == 0);
    fat5__sb_free(&b);
    fat5__sb_init(&b, fat5_test_ctx(T));
    fat5__sb_json_string(&b, "a\"b\\c\x01\n\x1f\x7f\xc3\xa9/");
    FAT5_CHECK_MSG(T, strcmp(b.buf, "\"a\\\"b\\\\c\\u0001\\u000A\\u001F\x7f\xc3\xa9/\"") == 0, "%s",
                   b.buf);
    fat5__sb_free(&b);
    fat5__sb_init(&b, fat5_test_ctx(T));
    fat5__sb_json_string(&b, "");
    FAT5_CHECK(T, strcmp(b.buf, "\"\"") == 0);
    fat5__sb_free(&b);
    // out of memory latches; later writes are ignored
    lim.limit = 8192;   // the context itself takes about 4 KiB
    lim.largest = 0;
    small = tio_ctx_with_alloc(&lim);
    FAT5_REQUIRE(T, small != NULL);
    fat5__sb_init(&b, small);
    for (i = 0; i < 1000; i++) fat5__sb_puts(&b, "0123456789");
    FAT5_CHECK(T, b.oom == 1 && b.len < 8192 && b.len == strlen(b.buf));
    fat5__sb_puts(&b, "x");
    fat5__sb_printf(&b, "%d", 5);
    FAT5_CHECK(T, b.oom == 1 && b.len < 8192 && b.len == strlen(b.buf));
    fat5__sb_free(&b);
    fat5_ctx_destroy(small);
}

// ---------------------------------------------------------------------------------------------
// fp16 / bf16

static void t_io_f16_to_f32(fat5_test *T) {
    uint32_t h;
    int bad = 0;
    FAT5_CHECK(T, fat5__f16_to_f32(0x3C00) == 1.0f);
    FAT5_CHECK(T, fat5__f16_to_f32(0x7BFF) == 65504.0f);
    FAT5_CHECK(T, fat5__f16_to_f32(0x0001) == (float)ldexp(1.0, -24));
    FAT5_CHECK(T, fat5__f16_to_f32(0x03FF) == (float)ldexp(1023.0, -24));
    FAT5_CHECK(T, fat5__f16_to_f32(0xC000) == -2.0f);
    FAT5_CHECK(T, tio_bits(fat5__f16_to_f32(0x8000)) == 0x80000000u);
    FAT5_CHECK(T, fat5__f16_to_f32(0x7C00) > 3e38f && fat5__f16_to_f32(0xFC00) < -3e38f);
    FAT5_CHECK(T, fat5__f16_to_f32(0x7E00) != fat5__f16_to_f32(0x7E00));   // NaN
    for (h = 0; h < 65536; h++) {   // every value against ldexp
        unsigned e = (h >> 10) & 31, m = h & 1023;
        double want = e == 0 ? ldexp((double)m, -24) : ldexp((double)(1024 + m), (int)e - 25);
        float got = fat5__f16_to_f32((uint16_t)h);
        if (h & 0x8000) want = -want;
        if (e == 31) {
            if (m ? got == got : !(got == (h & 0x8000 ? -HUGE_VALF : HUGE_VALF))) bad++;
        } else if (got != (float)want || ((h & 0x8000) != 0) != ((tio_bits(got) >> 31) != 0)) {
            bad++;
        }
    }
    FAT5_CHECK_MSG(T, bad == 0, "%d of 65536 fp16 values convert wrongly", bad);
}

static void t_io_bf16_rounding(fat5_test *T) {
    struct { uint32_t in; uint16_t out; } c[] = {
        {0x3F800000u, 0x3F80}, {0xC0400000u, 0xC040},
        {0x3F808000u, 0x3F80},   // halfway, even below: down
        {0x3F818000u, 0x3F82},   // halfway, odd below: up to even
        {0x3F808001u, 0x3F81},   // just above halfway: up
        {0x3F807FFFu, 0x3F80},   // just below halfway: down
        {0xBF818000u, 0xBF82},   // negative halfway: away from the odd neighbour
        {0x7F7FFFFFu, 0x7F80},   // FLT_MAX rounds to +inf
        {0x7F800000u, 0x7F80}, {0xFF800000u, 0xFF80},
        {0x80000000u, 0x8000}, {0x00000001u, 0x0000}, {0x00008000u, 0x0000},
        {0x00018000u, 0x0002},
    };
    uint32_t nans[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu,
                       0x7F80FFFFu};
    size_t i;
    uint32_t h;
    int bad = 0;
    for (i = 0; i < sizeof c / sizeof c[0]; i++) {
        uint16_t got = fat5__f32_to_bf16(tio_float(c[i].in));
        FAT5_CHECK_MSG(T, got == c[i].out, "f32 0x%08X -> bf16 0x%04X, want 0x%04X",
                       (unsigned)c[i].in, (unsigned)got, (unsigned)c[i].out);
    }
    for (i = 0; i < sizeof nans / sizeof nans[0]; i++) {   // NaN stays NaN, sign kept
        uint16_t got = fat5__f32_to_bf16(tio_float(nans[i]));
        FAT5_CHECK_MSG(T, (got & 0x7F80) == 0x7F80 && (got & 0x7F) != 0 &&
                              (got >> 15) == (nans[i] >> 31),
                       "NaN 0x%08X -> 0x%04X", (unsigned)nans[i], (unsigned)got);
        FAT5_CHECK(T, fat5__bf16_to_f32(got) != fat5__bf16_to_f32(got));
    }
    for (h = 0; h < 65536; h++) {   // bf16 -> f32 -> bf16 is the identity off NaN
        float f = fat5__bf16_to_f32((uint16_t)h);
        if (tio_bits(f) != h << 16) bad++;
        if (f == f && fat5__f32_to_bf16(f) != h) bad++;
    }
    FAT5_CHECK_MSG(T, bad == 0, "%d bf16 round trips failed", bad);
}

// ---------------------------------------------------------------------------------------------
// atomic writes

// number of entries of dir (without . and ..); *tmp counts the names containing ".tmp."
static int tio_count_dir(const char *dir, int *tmp) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    *tmp = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        if (strstr(e->d_name, ".tmp.")) (*tmp)++;
    }
    closedir(d);
    return n;
}

static void t_io_atomic_write(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[TIO_PATH_CAP], *buf = NULL;
    size_t len = 0;
    int tmp = 0;
    tio_path(T, path, "out.txt");
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, "first version, long", 19));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1000, &buf, &len));
    FAT5_CHECK(T, len == 19 && strcmp(buf, "first version, long") == 0);
    fat5__free(ctx, buf);
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, "second", 6));   // replaces, shorter
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1000, &buf, &len));
    FAT5_CHECK(T, len == 6 && strcmp(buf, "second") == 0);
    fat5__free(ctx, buf);
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, NULL, 0));   // empty
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, path, 1000, &buf, &len));
    FAT5_CHECK(T, len == 0);
    fat5__free(ctx, buf);
    FAT5_CHECK(T, tio_count_dir(fat5_test_tmpdir(T), &tmp) == 1 && tmp == 0);
    FAT5_CHECK(T, fat5_write_file_atomic(ctx, NULL, "x", 1) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_write_file_atomic(ctx, path, NULL, 1) == FAT5_ERR_INVALID_ARG);
}

static void t_io_atomic_missing_dir(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[TIO_PATH_CAP];
    int tmp = 0;
    tio_path(T, path, "no_such_dir/out.txt");
    FAT5_CHECK(T, fat5_write_file_atomic(ctx, path, "x", 1) == FAT5_ERR_IO);
    FAT5_CHECK_MSG(T, tio_err_has(T, path) && tio_err_has(T, strerror(ENOENT)), "%s",
                   fat5_last_error(ctx));
    // the target is a directory: the rename fails and the temporary file is removed
    tio_path(T, path, "a_dir");
    FAT5_REQUIRE(T, mkdir(path, 0755) == 0);
    FAT5_CHECK(T, fat5_write_file_atomic(ctx, path, "x", 1) == FAT5_ERR_IO);
    FAT5_CHECK_MSG(T, tio_err_has(T, path) && tio_err_has(T, "rename"), "%s", fat5_last_error(ctx));
    FAT5_CHECK(T, tio_count_dir(fat5_test_tmpdir(T), &tmp) == 1 && tmp == 0);
}

static void t_io_atomic_keeps_mode(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[TIO_PATH_CAP];
    struct stat st;
    tio_path(T, path, "m.txt");
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, "a", 1));
    FAT5_REQUIRE(T, stat(path, &st) == 0);
    FAT5_CHECK_MSG(T, (st.st_mode & 0777) == 0644, "new file mode %o",
                   (unsigned)(st.st_mode & 0777));
    FAT5_REQUIRE(T, chmod(path, 0640) == 0);
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, "b", 1));
    FAT5_REQUIRE(T, stat(path, &st) == 0);
    FAT5_CHECK_MSG(T, (st.st_mode & 0777) == 0640, "replaced file mode %o",
                   (unsigned)(st.st_mode & 0777));
}

// ---------------------------------------------------------------------------------------------
// safetensors: writer and reader

static void t_io_st_roundtrip(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[TIO_PATH_CAP];
    float w[6], bias[3] = {0.5f, -1.0f, 3.25f}, scalar = 42.0f, z[2] = {7.0f, -8.0f}, got[6];
    fat5_st_write_tensor t[5];
    const char *meta[] = {"format", "pt", "note", "h\xc3\xa9llo \"quoted\"\nline\\"};
    const char *names[] = {"a.bias", "empty", "encoder.w", "scalar", "zeta"};
    fat5_st_file *f = NULL;
    const fat5_st_tensor *info;
    const char *k = NULL, *v = NULL;
    int i;
    w[0] = 1.0f; w[1] = -0.0f; w[2] = tio_float(0x00000001u);   // denormal
    w[3] = tio_float(0x7FC00123u); w[4] = tio_float(0xFF800000u); w[5] = 1e30f;
    memset(t, 0, sizeof t);
    t[0].name = "encoder.w"; t[0].ndim = 2; t[0].shape[0] = 2; t[0].shape[1] = 3; t[0].data = w;
    t[1].name = "zeta"; t[1].ndim = 8; t[1].data = z;
    for (i = 0; i < 8; i++) t[1].shape[i] = i == 7 ? 2 : 1;
    t[2].name = "scalar"; t[2].ndim = 0; t[2].data = &scalar;
    t[3].name = "a.bias"; t[3].ndim = 1; t[3].shape[0] = 3; t[3].data = bias;
    t[4].name = "empty"; t[4].ndim = 2; t[4].shape[0] = 0; t[4].shape[1] = 5; t[4].data = NULL;
    tio_path(T, path, "model.safetensors");
    FAT5_REQUIRE_OK(T, fat5_st_write(ctx, path, t, 5, meta, 2));
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    FAT5_REQUIRE(T, fat5_st_tensor_count(f) == 5);
    for (i = 0; i < 5; i++) {   // sorted by name
        info = fat5_st_get(f, i);
        FAT5_CHECK_MSG(T, strcmp(info->name, names[i]) == 0, "tensor %d is '%s'", i, info->name);
        FAT5_CHECK(T, fat5_st_find(f, names[i]) == i && info->dtype == FAT5_ST_F32);
    }
    FAT5_CHECK(T, fat5_st_find(f, "nope") == -1 && fat5_st_find(f, "") == -1);
    FAT5_CHECK(T, fat5_st_get(f, 5) == NULL && fat5_st_get(f, -1) == NULL);
    info = fat5_st_get(f, fat5_st_find(f, "encoder.w"));
    FAT5_CHECK(T, info->ndim == 2 && info->shape[0] == 2 && info->shape[1] == 3);
    FAT5_CHECK(T, info->end - info->begin == 24);
    info = fat5_st_get(f, fat5_st_find(f, "zeta"));
    FAT5_CHECK(T, info->ndim == 8 && info->shape[7] == 2 && info->shape[0] == 1);
    info = fat5_st_get(f, fat5_st_find(f, "scalar"));
    FAT5_CHECK(T, info->ndim == 0 && info->end - info->begin == 4);
    info = fat5_st_get(f, fat5_st_find(f, "empty"));
    FAT5_CHECK(T, info->ndim == 2 && info->shape[0] == 0 && info->begin == info->end);
    // values, bit for bit (-0, a denormal, a NaN payload, -inf)
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "encoder.w"), got, 6));
    for (i = 0; i < 6; i++)
        FAT5_CHECK_MSG(T, tio_bits(got[i]) == tio_bits(w[i]), "w[%d]: 0x%08X, want 0x%08X", i,
                       (unsigned)tio_bits(got[i]), (unsigned)tio_bits(w[i]));
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "a.bias"), got, 3));
    FAT5_CHECK(T, memcmp(got, bias, sizeof bias) == 0);
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "scalar"), got, 1));
    FAT5_CHECK(T, got[0] == 42.0f);
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "zeta"), got, 2));
    FAT5_CHECK(T, got[0] == 7.0f && got[1] == -8.0f);
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "empty"), NULL, 0));
    // metadata, sorted by key
    FAT5_CHECK(T, fat5_st_metadata_count(f) == 2);
    fat5_st_metadata_get(f, 0, &k, &v);
    FAT5_CHECK(T, k && v && strcmp(k, "format") == 0 && strcmp(v, "pt") == 0);
    k = fat5_st_metadata_find(f, "note");
    FAT5_CHECK(T, k && strcmp(k, meta[3]) == 0);
    FAT5_CHECK(T, fat5_st_metadata_find(f, "nope") == NULL);
    fat5_st_metadata_get(f, 2, &k, &v);
    FAT5_CHECK(T, k == NULL && v == NULL);
    fat5_st_destroy(f);
    // no metadata, no tensors
    FAT5_REQUIRE_OK(T, fat5_st_write(ctx, path, NULL, 0, NULL, 0));
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    FAT5_CHECK(T, fat5_st_tensor_count(f) == 0 && fat5_st_metadata_count(f) == 0);
    fat5_st_destroy(f);
}

static void t_io_st_deterministic(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char p1[TIO_PATH_CAP], p2[TIO_PATH_CAP], *a = NULL, *b = NULL;
    size_t la = 0, lb = 0, i;
    uint64_t hlen = 0;
    float data[100];
    fat5_st_write_tensor t[3];
    const char *meta[] = {"format", "pt"};
    int tmp = 0;
    for (i = 0; i < 100; i++) data[i] = (float)i * 0.25f - 3.0f;
    memset(t, 0, sizeof t);
    t[0].name = "b"; t[0].ndim = 2; t[0].shape[0] = 10; t[0].shape[1] = 7; t[0].data = data;
    t[1].name = "a"; t[1].ndim = 1; t[1].shape[0] = 30; t[1].data = data + 70;
    t[2].name = "c"; t[2].ndim = 1; t[2].shape[0] = 0; t[2].data = NULL;
    tio_path(T, p1, "one.safetensors");
    tio_path(T, p2, "two.safetensors");
    FAT5_REQUIRE_OK(T, fat5_st_write(ctx, p1, t, 3, meta, 1));
    FAT5_REQUIRE_OK(T, fat5_st_write(ctx, p2, t, 3, meta, 1));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, p1, 1 << 20, &a, &la));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, p2, 1 << 20, &b, &lb));
    FAT5_CHECK(T, la == lb && memcmp(a, b, la) == 0);
    for (i = 0; i < 8; i++) hlen |= (uint64_t)(unsigned char)a[i] << (8 * i);
    FAT5_CHECK_MSG(T, hlen % 8 == 0 && 8 + hlen + 400 == la, "header length %llu, file %zu",
                   (unsigned long long)hlen, la);
    FAT5_CHECK(T, strncmp(a + 8, "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\","
                                 "\"shape\":[30],\"data_offsets\":[0,120]},\"b\":", 86) == 0);
    FAT5_CHECK(T, a[8 + hlen - 1] == ' ' || a[8 + hlen - 1] == '}');
    // data little-endian: "a" (data[70]) first
    FAT5_CHECK(T, (uint32_t)(unsigned char)a[8 + hlen] == (tio_bits(data[70]) & 0xFF) &&
                      (uint32_t)(unsigned char)a[8 + hlen + 3] == tio_bits(data[70]) >> 24);
    fat5__free(ctx, a);
    fat5__free(ctx, b);
    FAT5_CHECK(T, tio_count_dir(fat5_test_tmpdir(T), &tmp) == 2 && tmp == 0);
}

static void t_io_st_write_rejects(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[TIO_PATH_CAP];
    float x[2] = {1, 2};
    fat5_st_write_tensor t[2];
    const char *meta[] = {"k", "v", "k", "w"};
    const char *meta_null[] = {"k", NULL};
    struct stat st;
    memset(t, 0, sizeof t);
    t[0].name = "w"; t[0].ndim = 1; t[0].shape[0] = 2; t[0].data = x;
    t[1] = t[0];
    tio_path(T, path, "w.safetensors");
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "duplicate tensor name 'w'"));
    t[1].name = "";
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "empty"));
    t[1].name = NULL;
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "NULL"));
    t[1].name = "__metadata__";
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "reserved"));
    t[1].name = "bad\xff";
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "UTF-8"));
    t[1].name = "v";
    t[1].shape[0] = -1;
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "negative"));
    t[1].shape[0] = 2;
    t[1].ndim = 9;
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "ndim"));
    t[1].ndim = 1;
    t[1].data = NULL;
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "data is NULL"));
    t[1].data = x;
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, meta, 2) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "duplicate metadata key 'k'"));
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, meta_null, 1) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "value is NULL"));
    FAT5_CHECK(T, stat(path, &st) != 0);   // nothing was written
    FAT5_REQUIRE_OK(T, fat5_st_write(ctx, path, t, 2, meta, 1));
    // a missing directory: FAT5_ERR_IO naming the path
    tio_path(T, path, "missing/w.safetensors");
    FAT5_CHECK(T, fat5_st_write(ctx, path, t, 2, NULL, 0) == FAT5_ERR_IO);
    FAT5_CHECK(T, tio_err_has(T, path));
}

// a Hugging Face file written by the Python safetensors library
static void t_io_st_hf_fixture(fat5_test *T) {
    const char *path = FAT5_TEST_DATA "/t5_v10_relu_tied/model.safetensors";
    fat5_st_file *f = NULL;
    float *buf;
    int i, n;
    FILE *fp = fopen(path, "rb");
    if (!fp) FAT5_SKIP(T, "fixture " FAT5_TEST_DATA "/t5_v10_relu_tied not found");
    fclose(fp);
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    n = fat5_st_tensor_count(f);
    FAT5_CHECK(T, n > 10);
    FAT5_CHECK(T, fat5_st_find(f, "shared.weight") >= 0);
    FAT5_CHECK(T, fat5_st_metadata_find(f, "format") &&
                      strcmp(fat5_st_metadata_find(f, "format"), "pt") == 0);
    for (i = 0; i < n; i++) {
        const fat5_st_tensor *t = fat5_st_get(f, i);
        int64_t numel = 1;
        int d;
        if (i) FAT5_CHECK(T, strcmp(fat5_st_get(f, i - 1)->name, t->name) < 0);
        for (d = 0; d < t->ndim; d++) numel *= t->shape[d];
        buf = (float *)malloc((size_t)(numel ? numel : 1) * sizeof *buf);
        FAT5_REQUIRE(T, buf != NULL);
        FAT5_CHECK_MSG(T, fat5_st_read_f32(f, i, buf, numel) == FAT5_OK, "%s",
                       fat5_last_error(fat5_test_ctx(T)));
        free(buf);
    }
    fat5_st_destroy(f);
}

// ---------------------------------------------------------------------------------------------
// safetensors: malformed files

static const char *tio_small_st =
    "{\"a\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,64]}}";

static void t_io_st_truncated_data(fat5_test *T) {
    char path[TIO_PATH_CAP];
    tio_path(T, path, "cut.safetensors");
    FAT5_REQUIRE(T, tio_write_st(path, tio_small_st, 64));
    {   // the intact file opens
        fat5_st_file *f = NULL;
        FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
        fat5_st_destroy(f);
    }
    FAT5_REQUIRE(T, tio_write_st(path, tio_small_st, 59));   // cut 5 bytes into the data
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "past the end of the file");
    FAT5_REQUIRE(T, tio_write_st(path, tio_small_st, 0));    // no data at all
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "past the end of the file");
    FAT5_CHECK(T, tio_err_has(T, "tensor 'a'"));
}

static void t_io_st_truncated_header(fat5_test *T) {
    char path[TIO_PATH_CAP], *full;
    size_t hl = strlen(tio_small_st);
    tio_path(T, path, "cut.safetensors");
    full = (char *)calloc(8 + hl, 1);
    FAT5_REQUIRE(T, full != NULL);
    full[0] = (char)hl;
    memcpy(full + 8, tio_small_st, hl);
    FAT5_REQUIRE(T, tio_write_bytes(path, full, 8 + hl / 2));   // cut in the middle of the header
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "runs past the end of the file");
    FAT5_REQUIRE(T, tio_write_bytes(path, full, 9));
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "runs past the end of the file");
    FAT5_REQUIRE(T, tio_write_bytes(path, full, 8));
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "runs past the end of the file");
    free(full);
}

static void t_io_st_header_past_end(fat5_test *T) {
    char path[TIO_PATH_CAP];
    tio_path(T, path, "long.safetensors");
    FAT5_REQUIRE(T, tio_write_st_raw(path, 1000, "{}      ", 0));
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "header length 1000 runs past the end");
    FAT5_REQUIRE(T, tio_write_st_raw(path, 9, "{}      ", 0));   // one byte too long
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "runs past the end");
    FAT5_REQUIRE(T, tio_write_st_raw(path, 0, "{}      ", 0));
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "empty");
}

static void t_io_st_header_huge(fat5_test *T) {
    static const uint64_t lens[] = {(uint64_t)1 << 63, UINT64_MAX, UINT64_MAX - 7,
                                    ((uint64_t)100 << 20) + 1, (uint64_t)1 << 32};
    char path[TIO_PATH_CAP];
    tio_alloc counter;
    fat5_ctx *ctx;
    size_t i;
    counter.limit = SIZE_MAX;
    counter.largest = 0;
    ctx = tio_ctx_with_alloc(&counter);
    FAT5_REQUIRE(T, ctx != NULL);
    tio_path(T, path, "huge.safetensors");
    for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        fat5_st_file *f = NULL;
        fat5_status s;
        FAT5_REQUIRE(T, tio_write_st_raw(path, lens[i], "{}", 64));
        s = fat5_st_load(ctx, path, &f);
        FAT5_CHECK_MSG(T, s == FAT5_ERR_FORMAT && f == NULL, "length %llu -> %s",
                       (unsigned long long)lens[i], fat5_status_string(s));
        FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "exceeds the limit of 100 MiB") &&
                              strncmp(fat5_last_error(ctx), path, strlen(path)) == 0,
                       "%s", fat5_last_error(ctx));
        fat5_st_destroy(f);
    }
    // never allocated anything near the claimed length
    FAT5_CHECK_MSG(T, counter.largest < 65536, "largest allocation %zu", counter.largest);
    fat5_ctx_destroy(ctx);
}

static void t_io_st_overlap(fat5_test *T) {
    TIO_BAD_HEADER(T, "ov.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}", 24,
                   "tensor 'b': data range [8, 24) overlaps tensor 'a'");
    // full aliasing: two tensors on the same bytes
    TIO_BAD_HEADER(T, "alias.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                   "\"b\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16,
                   "overlaps");
    // a zero-sized tensor inside another one
    TIO_BAD_HEADER(T, "zin.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                   "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}", 16,
                   "tensor 'z': data range [8, 8) overlaps tensor 'a'");
}

static void t_io_st_out_of_range(fat5_test *T) {
    TIO_BAD_HEADER(T, "oor.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
                   "tensor 'a': data range [0, 16) is past the end of the file");
    // offsets near 2^64: data_offset + end must not wrap
    TIO_BAD_HEADER(T, "wrap.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
                   "\"data_offsets\":[18446744073709551599,18446744073709551615]}}", 16,
                   "past the end of the file");
    TIO_BAD_HEADER(T, "big.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
                   "\"data_offsets\":[18446744073709551600,18446744073709551616]}}", 16,
                   "data_offsets must be an array of 2 non-negative integers");
}

static void t_io_st_gap(fat5_test *T) {
    TIO_BAD_HEADER(T, "gap.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[20,36]}}", 36,
                   "gap before tensor 'b': data bytes [16, 20)");
    TIO_BAD_HEADER(T, "gap0.safetensors",
                   "{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 8,
                   "gap before tensor 'b'");
}

static void t_io_st_trailing_bytes(fat5_test *T) {
    TIO_BAD_HEADER(T, "tr.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 20,
                   "4 trailing bytes after the last tensor");
    TIO_BAD_HEADER(T, "tr0.safetensors", "{}", 1, "trailing bytes");
}

static void t_io_st_shape_overflow(fat5_test *T) {
    TIO_BAD_HEADER(T, "ovf.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                   "\"data_offsets\":[0,0]}}", 0,
                   "shape [4294967296, 4294967296, 16] overflows");
    // 9223372036854775807 * 3 fits in no 64-bit count
    TIO_BAD_HEADER(T, "ovf2.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[3,9223372036854775807],"
                   "\"data_offsets\":[0,0]}}", 0, "overflows");
    // a dimension above INT64_MAX
    TIO_BAD_HEADER(T, "ovf3.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],"
                   "\"data_offsets\":[0,0]}}", 0, "shape[0] = 9223372036854775808 is too large");
}

static void t_io_st_shape_wraps(fat5_test *T) {
    // (2^62 + 1) * 4 = 2^64 + 4 wraps to 4, which would match the 4 data bytes
    TIO_BAD_HEADER(T, "wrap4.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[4611686018427387905,4],"
                   "\"data_offsets\":[0,4]}}", 4, "overflows");
    // numel 2^62 fits, but 2^62 * 4 bytes wraps to 0, which would match an empty range
    TIO_BAD_HEADER(T, "wrap0.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                   "\"data_offsets\":[0,0]}}", 0, "overflows");
    {   // a zero dimension makes any shape empty: valid
        char path[TIO_PATH_CAP];
        fat5_st_file *f = NULL;
        tio_path(T, path, "zero.safetensors");
        FAT5_REQUIRE(T, tio_write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,"
                                           "4294967296,0],\"data_offsets\":[0,0]}}", 0));
        FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
        fat5_st_destroy(f);
    }
}

static void t_io_st_nbytes_mismatch(fat5_test *T) {
    TIO_BAD_HEADER(T, "nb.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 12,
                   "data_offsets [0, 12] hold 12 bytes, but dtype F32 and shape [2, 2] need 16");
    TIO_BAD_HEADER(T, "nb2.safetensors",
                   "{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,12]}}", 12,
                   "need 6");
    TIO_BAD_HEADER(T, "rev.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[16,0]}}", 16,
                   "reversed");
}

static void t_io_st_duplicate_tensor(fat5_test *T) {
    TIO_BAD_HEADER(T, "dup.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                   "duplicate key \"a\"");
    TIO_BAD_HEADER(T, "dupmeta.safetensors",
                   "{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate key");
    TIO_BAD_HEADER(T, "dupfield.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],"
                   "\"data_offsets\":[0,4]}}", 4, "duplicate key \"dtype\"");
}

static void t_io_st_unknown_dtype(fat5_test *T) {
    TIO_BAD_HEADER(T, "f33.safetensors",
                   "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "tensor 'a': unknown dtype 'F33'");
    TIO_BAD_HEADER(T, "lower.safetensors",
                   "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "unknown dtype");
    TIO_BAD_HEADER(T, "num.safetensors",
                   "{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "dtype is a number");
}

static void t_io_st_metadata_not_string(fat5_test *T) {
    TIO_BAD_HEADER(T, "m1.safetensors", "{\"__metadata__\":{\"format\":\"pt\",\"step\":1}}", 0,
                   "__metadata__ value of 'step' is a number; metadata values must be strings");
    TIO_BAD_HEADER(T, "m2.safetensors", "{\"__metadata__\":{\"k\":null}}", 0, "strings");
    TIO_BAD_HEADER(T, "m3.safetensors", "{\"__metadata__\":[\"a\"]}", 0,
                   "__metadata__ is an array");
    TIO_BAD_HEADER(T, "m4.safetensors", "{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0,
                   "metadata values must be strings");
}

static void t_io_st_tiny_file(fat5_test *T) {
    char path[TIO_PATH_CAP];
    static const unsigned char bytes[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    size_t n;
    tio_path(T, path, "tiny.safetensors");
    for (n = 0; n < 8; n++) {
        FAT5_REQUIRE(T, tio_write_bytes(path, bytes, n));
        TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "too small");
    }
    // not a file at all
    TIO_OPEN_BAD(T, fat5_test_tmpdir(T), FAT5_ERR_IO, "not a regular file");
    tio_path(T, path, "missing.safetensors");
    TIO_OPEN_BAD(T, path, FAT5_ERR_IO, "cannot open");
}

static void t_io_st_not_brace(fat5_test *T) {
    TIO_BAD_HEADER(T, "sp.safetensors", " {}     ", 0, "does not start with '{'");
    TIO_BAD_HEADER(T, "arr.safetensors", "[]      ", 0, "does not start with '{'");
    TIO_BAD_HEADER(T, "nul.safetensors", "\x01{}     ", 0, "'{'");
}

static void t_io_st_bad_entries(fat5_test *T) {
    TIO_BAD_HEADER(T, "e1.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                   "\"extra\":1}}", 4,
                   "tensor 'a': unknown key 'extra'");
    TIO_BAD_HEADER(T, "e2.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4,
                   "missing key 'data_offsets'");
    TIO_BAD_HEADER(T, "e3.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                   "shape[0] is not a non-negative integer");
    TIO_BAD_HEADER(T, "e4.safetensors",
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
                   "shape[0] is not a non-negative integer");
    TIO_BAD_HEADER(T, "e5.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,1]}}", 1,
                   "shape has 9 dimensions");
    TIO_BAD_HEADER(T, "e6.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,1]}}", 1,
                   "data_offsets must be an array of 2");
    TIO_BAD_HEADER(T, "e7.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1e0]}}", 1,
                   "data_offsets must be an array of 2");
    TIO_BAD_HEADER(T, "e8.safetensors", "{\"a\":[1,2]}", 0,
                   "tensor 'a': expected an object");
    TIO_BAD_HEADER(T, "e9.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":{},\"data_offsets\":[0,0]}}", 0,
                   "shape is an object");
    TIO_BAD_HEADER(T, "e10.safetensors", "{\"a\":{\"dtype\":\"U8\" \"shape\":[]}}", 0,
                   "JSON: line 1 column 20: expected ',' or '}'");
    TIO_BAD_HEADER(T, "e11.safetensors", "{\"a\":1} x", 0, "trailing data");
    // a control character in a tensor name is not printed raw
    TIO_BAD_HEADER(T, "e12.safetensors",
                   "{\"a\\u001b[31m\":{\"dtype\":\"F33\",\"shape\":[],\"data_offsets\":[0,0]}}", 0,
                   "tensor 'a?[31m': unknown dtype");
}

static void t_io_st_header_depth(fat5_test *T) {
    TIO_BAD_HEADER(T, "deep.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[[[1]]],\"data_offsets\":[0,1]}}", 1,
                   "nesting deeper than 4 levels");
    TIO_BAD_HEADER(T, "deep2.safetensors",
                   "{\"a\":{\"dtype\":\"U8\",\"shape\":[[1]],\"data_offsets\":[0,1]}}", 1,
                   "shape[0] is not a non-negative integer");
}

static void t_io_st_valid_edge_cases(fat5_test *T) {
    static const char *ok[] = {
        "{}",
        "{}      ",
        "{\"__metadata__\":{}}",
        "{ \"__metadata__\" : { \"a\" : \"\\u00e9\" } }\t\r\n ",
        // zero-sized tensors at the start, between two tensors and at the end
        "{\"z0\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
        "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
        "\"z1\":{\"dtype\":\"I64\",\"shape\":[3,0],\"data_offsets\":[4,4]},"
        "\"c\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[4,5]},"
        "\"z2\":{\"dtype\":\"BOOL\",\"shape\":[0],\"data_offsets\":[5,5]}}",
    };
    static const size_t data[] = {0, 0, 0, 0, 5};
    char path[TIO_PATH_CAP];
    size_t i;
    int k;
    tio_path(T, path, "ok.safetensors");
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        fat5_st_file *f = NULL;
        FAT5_REQUIRE(T, tio_write_st(path, ok[i], data[i]));
        FAT5_CHECK_MSG(T, tio_open(T, path, &f) == FAT5_OK, "case %zu: %s", i,
                       fat5_last_error(fat5_test_ctx(T)));
        if (i == 3) FAT5_CHECK(T, strcmp(fat5_st_metadata_find(f, "a"), "\xc3\xa9") == 0);
        if (i == 4) {
            FAT5_CHECK(T, fat5_st_tensor_count(f) == 5);
            k = fat5_st_find(f, "c");
            FAT5_CHECK(T, k >= 0 && fat5_st_get(f, k)->ndim == 0 &&
                              fat5_st_get(f, k)->dtype == FAT5_ST_U8);
            FAT5_CHECK(T, fat5_st_get(f, fat5_st_find(f, "z1"))->begin == 4);
        }
        fat5_st_destroy(f);
    }
    for (k = 0; k < (int)FAT5_ST_DTYPE_COUNT; k++)
        FAT5_CHECK(T, fat5_st_dtype_size((fat5_st_dtype)k) >= 1 &&
                          strcmp(fat5_st_dtype_name((fat5_st_dtype)k), "?") != 0);
    FAT5_CHECK(T, fat5_st_dtype_size(FAT5_ST_DTYPE_COUNT) == 0);
    FAT5_CHECK(T, strcmp(fat5_st_dtype_name(FAT5_ST_BF16), "BF16") == 0);
    FAT5_CHECK(T, fat5_st_dtype_size(FAT5_ST_F8_E5M2) == 1 && fat5_st_dtype_size(FAT5_ST_I64) == 8);
    fat5_st_destroy(NULL);
    FAT5_CHECK(T, fat5_st_tensor_count(NULL) == 0 && fat5_st_find(NULL, "a") == -1);
}

// ---------------------------------------------------------------------------------------------
// safetensors: reading F32 / F16 / BF16

// bf16 [5] at [0,10), f16 [7] at [10,24), f32 [2] at [24,32), i64 [1] at [32,40)
static int tio_write_mixed(fat5_test *T, char *path) {
    static const char *hdr =
        "{\"bf\":{\"dtype\":\"BF16\",\"shape\":[5],\"data_offsets\":[0,10]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[7],\"data_offsets\":[10,24]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
        "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[32,40]}}";
    static const uint16_t bf[5] = {0x3F80, 0xC040, 0x7FC0, 0x8000, 0x0001};
    static const uint16_t h[7] = {0x3C00, 0x7BFF, 0x0001, 0x8400, 0x7C00, 0x7E00, 0x3555};
    static const uint32_t f[2] = {0x3FC00000u, 0xC0000000u};
    size_t hl = strlen(hdr), n = 8 + hl + 40, i, o;
    unsigned char *b = (unsigned char *)calloc(n, 1);
    int ok;
    if (!b) return 0;
    b[0] = (unsigned char)hl;
    b[1] = (unsigned char)(hl >> 8);
    memcpy(b + 8, hdr, hl);
    o = 8 + hl;
    for (i = 0; i < 12; i++, o += 2) {   // the 16-bit values, little-endian
        uint16_t u = i < 5 ? bf[i] : h[i - 5];
        b[o] = (unsigned char)u;
        b[o + 1] = (unsigned char)(u >> 8);
    }
    for (i = 0; i < 2; i++, o += 4) {
        b[o] = (unsigned char)f[i];
        b[o + 1] = (unsigned char)(f[i] >> 8);
        b[o + 2] = (unsigned char)(f[i] >> 16);
        b[o + 3] = (unsigned char)(f[i] >> 24);
    }
    b[o] = 0xFF;   // i64 -1
    tio_path(T, path, "mixed.safetensors");
    ok = tio_write_bytes(path, b, n);
    free(b);
    return ok;
}

static void t_io_st_read_f16_bf16(fat5_test *T) {
    char path[TIO_PATH_CAP];
    fat5_st_file *f = NULL;
    float v[7];
    FAT5_REQUIRE(T, tio_write_mixed(T, path));
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    FAT5_REQUIRE(T, fat5_st_find(f, "bf") >= 0);
    FAT5_CHECK(T, fat5_st_get(f, fat5_st_find(f, "bf"))->dtype == FAT5_ST_BF16);
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "bf"), v, 5));
    FAT5_CHECK(T, v[0] == 1.0f && v[1] == -3.0f && v[2] != v[2]);
    FAT5_CHECK(T, tio_bits(v[3]) == 0x80000000u && v[4] == (float)ldexp(1.0, -133));
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "h"), v, 7));
    FAT5_CHECK(T, v[0] == 1.0f && v[1] == 65504.0f && v[2] == (float)ldexp(1.0, -24));
    FAT5_CHECK(T, v[3] == -(float)ldexp(1.0, -14) && v[4] == HUGE_VALF && v[5] != v[5]);
    FAT5_CHECK(T, v[6] == (float)ldexp(0x555, -12));   // 0x3555: 1365 / 4096
    FAT5_REQUIRE_OK(T, fat5_st_read_f32(f, fat5_st_find(f, "f"), v, 2));
    FAT5_CHECK(T, v[0] == 1.5f && v[1] == -2.0f);
    fat5_st_destroy(f);
}

static void t_io_st_read_unsupported(fat5_test *T) {
    char path[TIO_PATH_CAP];
    fat5_st_file *f = NULL;
    float v[2];
    FAT5_REQUIRE(T, tio_write_mixed(T, path));
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    FAT5_CHECK(T, fat5_st_read_f32(f, fat5_st_find(f, "i"), v, 1) == FAT5_ERR_UNSUPPORTED);
    FAT5_CHECK_MSG(T, tio_err_has(T, "tensor 'i' has dtype I64; fat5 reads F32, F16 and BF16"),
                   "%s", fat5_last_error(fat5_test_ctx(T)));
    fat5_st_destroy(f);
}

static void t_io_st_read_bad_args(fat5_test *T) {
    char path[TIO_PATH_CAP];
    fat5_st_file *f = NULL;
    float v[8];
    FAT5_REQUIRE(T, tio_write_mixed(T, path));
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    FAT5_CHECK(T, fat5_st_read_f32(f, fat5_st_find(f, "f"), v, 3) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "tensor 'f' has 2 elements"));
    FAT5_CHECK(T, fat5_st_read_f32(f, fat5_st_find(f, "f"), v, -1) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_st_read_f32(f, fat5_st_find(f, "f"), NULL, 2) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_st_read_f32(f, 4, v, 1) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, tio_err_has(T, "out of range"));
    FAT5_CHECK(T, fat5_st_read_f32(f, -1, v, 1) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_st_read_f32(NULL, 0, v, 1) == FAT5_ERR_INVALID_ARG);
    fat5_st_destroy(f);
}

static void t_io_st_read_truncated_later(fat5_test *T) {
    char path[TIO_PATH_CAP];
    fat5_st_file *f = NULL;
    float *v = (float *)malloc(10000 * sizeof *v);
    fat5_st_write_tensor t;
    struct stat st;
    int i;
    FAT5_REQUIRE(T, v != NULL);
    for (i = 0; i < 10000; i++) v[i] = (float)i;
    memset(&t, 0, sizeof t);
    t.name = "big"; t.ndim = 1; t.shape[0] = 10000; t.data = v;
    tio_path(T, path, "t.safetensors");
    FAT5_REQUIRE_OK(T, fat5_st_write(fat5_test_ctx(T), path, &t, 1, NULL, 0));
    FAT5_REQUIRE_OK(T, tio_open(T, path, &f));
    FAT5_REQUIRE(T, stat(path, &st) == 0 && st.st_size > 20000);
    FAT5_REQUIRE(T, truncate(path, st.st_size - 20000) == 0);   // the file shrinks after open
    FAT5_CHECK(T, fat5_st_read_f32(f, 0, v, 10000) == FAT5_ERR_IO);
    FAT5_CHECK_MSG(T, tio_err_has(T, "tensor 'big'") && tio_err_has(T, "truncated"), "%s",
                   fat5_last_error(fat5_test_ctx(T)));
    fat5_st_destroy(f);
    free(v);
}

// A document of millions of tiny values is refused at the tree-size bound, not by exhausting
// memory (the shape of a hostile 100 MiB safetensors header).
static void t_io_json_dom_cap(fat5_test *T) {
    size_t n = 6u << 20, i;   // 6M zeros: 12 MiB of text, ~340 MiB of tree without the bound
    char *s = (char *)malloc(2 * n + 2);
    fat5__jdoc *d = NULL;
    fat5_status st;
    FAT5_REQUIRE(T, s != NULL);
    s[0] = '[';
    for (i = 0; i < n; i++) {
        s[1 + 2 * i] = '0';
        s[2 + 2 * i] = ',';
    }
    s[2 * n] = ']';
    st = fat5__json_parse(fat5_test_ctx(T), "big", s, 2 * n + 1, 4, &d);
    FAT5_CHECK(T, st == FAT5_ERR_FORMAT && d == NULL);
    FAT5_CHECK(T, tio_err_has(T, "too large"));
    fat5__json_free(fat5_test_ctx(T), d);
    // a large but reasonable document still parses
    s[2 * 100000] = ']';
    st = fat5__json_parse(fat5_test_ctx(T), "ok", s, 2 * 100000 + 1, 4, &d);
    FAT5_CHECK(T, st == FAT5_OK && d && fat5__json_root(d)->n == 100000);
    fat5__json_free(fat5_test_ctx(T), d);
    free(s);
}

// ---------------------------------------------------------------------------------------------
// Sizes that once took quadratic time: sorting and duplicate checks are O(n log n).

// call must return status with a message containing needle
#define TIO_EXPECT_ERR(T, call, status, needle)                                                     \
    do {                                                                                            \
        fat5_status s_ = (call);                                                                    \
        const char *e_ = fat5_last_error(fat5_test_ctx(T));                                         \
        FAT5_CHECK_MSG(T, s_ == (status), "%s -> %s, want %s (%s)", #call, fat5_status_string(s_), \
                       fat5_status_string(status), e_);                                             \
        FAT5_CHECK_MSG(T, strstr(e_, needle) != NULL, "message '%s' does not mention '%s'", e_,    \
                       needle);                                                                     \
    } while (0)

static int tio_write_sb(const char *path, const fat5__sb *b) {
    return !b->oom && b->buf && tio_write_bytes(path, b->buf, b->len);
}

// 200k metadata keys in descending order (the worst case of an insertion sort: 30 s for 100k)
static void t_io_st_metadata_many_keys(fat5_test *T) {
    const int n = 200000;
    char path[TIO_PATH_CAP], key[32];
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_st_file *f = NULL;
    fat5__sb h;
    int i, sorted = 1;
    const char *k0, *k1, *v;
    fat5__sb_init(&h, ctx);
    fat5__sb_puts(&h, "{\"__metadata__\":{");
    for (i = 0; i < n; i++) fat5__sb_printf(&h, "%s\"k%07d\":\"v%d\"", i ? "," : "", n - 1 - i, n - 1 - i);
    fat5__sb_puts(&h, "}}");
    FAT5_REQUIRE(T, !h.oom);
    tio_path(T, path, "many.safetensors");
    FAT5_REQUIRE(T, tio_write_st(path, h.buf, 0));
    FAT5_REQUIRE_OK(T, fat5_st_load(ctx, path, &f));
    FAT5_CHECK(T, fat5_st_metadata_count(f) == n && fat5_st_tensor_count(f) == 0);
    for (i = 1; i < n && sorted; i++) {
        fat5_st_metadata_get(f, i - 1, &k0, NULL);
        fat5_st_metadata_get(f, i, &k1, NULL);
        sorted = strcmp(k0, k1) < 0;
    }
    FAT5_CHECK_MSG(T, sorted, "metadata not in key order at %d", i - 1);
    fat5_st_metadata_get(f, 0, &k0, &v);
    FAT5_CHECK(T, k0 && strcmp(k0, "k0000000") == 0 && strcmp(v, "v0") == 0);
    for (i = 0; i < n; i += 9973) {
        snprintf(key, sizeof key, "k%07d", i);
        v = fat5_st_metadata_find(f, key);
        FAT5_CHECK_MSG(T, v && atoi(v + 1) == i, "%s -> %s", key, v ? v : "(none)");
    }
    FAT5_CHECK(T, fat5_st_metadata_find(f, "k9999999") == NULL);
    fat5_st_destroy(f);
    f = NULL;
    // one repeated key among them all: found by the sort, reported at its second occurrence
    h.len -= 2;
    h.buf[h.len] = 0;
    fat5__sb_puts(&h, ",\"k0123456\":\"again\"}}");
    FAT5_REQUIRE(T, !h.oom && tio_write_st(path, h.buf, 0));
    TIO_OPEN_BAD(T, path, FAT5_ERR_FORMAT, "duplicate key \"k0123456\"");
    fat5__sb_free(&h);
}

// a checkpoint directory: config.json "{}" (the t5-small defaults) and a tiny valid shard file
static void tio_index_dir(fat5_test *T, char *dir, const char *name) {
    char path[TIO_PATH_CAP + 64];
    tio_path(T, dir, name);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/config.json", dir);
    tio_write_bytes(path, "{}", 2);
}

// index.json with n entries; shard(i) names the file of entry i
static void tio_index_write(fat5_test *T, const char *dir, int n, int distinct) {
    char path[TIO_PATH_CAP + 64];
    fat5__sb b;
    int i;
    fat5__sb_init(&b, fat5_test_ctx(T));
    fat5__sb_puts(&b, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (i = 0; i < n; i++)
        fat5__sb_printf(&b, "%s\"encoder.block.%d.layer.0.SelfAttention.q.weight\": \"model-%05d.safetensors\"",
                        i ? ",\n" : "", i, distinct ? i : i < n / 2 ? 1 : 2);
    fat5__sb_puts(&b, "}}");
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FAT5_CHECK(T, tio_write_sb(path, &b));
    fat5__sb_free(&b);
}

static int tio_copy_fixture(fat5_test *T, const char *name, const char *as, char *dir);

// An index with very many entries: the distinct shards are found by sorting (the old check
// compared every entry with all before it: 12 s for 100k entries over two shards).
static void t_io_index_many_entries(fat5_test *T) {
    const int n = 300000;
    char dir[TIO_PATH_CAP], path[TIO_PATH_CAP + 64];
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = NULL;
    int s;
    tio_index_dir(T, dir, "two_shards");
    for (s = 1; s <= 2; s++) {
        snprintf(path, sizeof path, "%s/model-%05d.safetensors", dir, s);
        FAT5_REQUIRE(T, tio_write_st(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4));
    }
    tio_index_write(T, dir, n, 0);
    {   // the weight files as the loader reads them: each distinct shard once, in name order
        static const char want[] = "model-00001.safetensors\0model-00002.safetensors";
        char *names = NULL;
        size_t len = 0;
        int n_files = 0;
        FAT5_REQUIRE_OK(T, fat5_model_weight_files(ctx, dir, &names, &len, &n_files));
        FAT5_CHECK(T, n_files == 2 && len == sizeof want && memcmp(names, want, len) == 0);
        fat5_free(ctx, names);
        TIO_EXPECT_ERR(T, fat5_model_weight_files(ctx, path, &names, &len, &n_files), FAT5_ERR_IO, "not a directory");
        FAT5_CHECK(T, names == NULL && n_files == 0);
    }
    TIO_EXPECT_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT,
                  "tensor 'encoder.block.0.layer.0.SelfAttention.q.weight' is listed in the index but absent "
                  "from 'model-00001.safetensors'");
    FAT5_CHECK(T, m == NULL);
    // as many shard files as entries: refused by count before any file is opened
    tio_index_dir(T, dir, "many_shards");
    tio_index_write(T, dir, n, 1);
    TIO_EXPECT_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_UNSUPPORTED,
                  "the index names 300000 shard files; at most 1024 are supported");
    FAT5_CHECK(T, m == NULL);
    {
        char *names = NULL;
        size_t len = 0;
        int n_files = 0;
        TIO_EXPECT_ERR(T, fat5_model_weight_files(ctx, dir, &names, &len, &n_files), FAT5_ERR_UNSUPPORTED,
                       "at most 1024 are supported");
        // a checkpoint of one file: that file
        FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_v10_relu_tied", "one_file", dir));
        FAT5_REQUIRE_OK(T, fat5_model_weight_files(ctx, dir, &names, &len, &n_files));
        FAT5_CHECK(T, n_files == 1 && len == sizeof "model.safetensors" && !strcmp(names, "model.safetensors"));
        fat5_free(ctx, names);
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoint directories

// an allocator that counts every byte it hands out (realloc counts the new size) and refuses
// single requests above a limit
typedef struct tio_count { size_t limit, total, largest; } tio_count;
static void *tio_count_alloc(void *user, size_t n) {
    tio_count *a = (tio_count *)user;
    a->total += n;
    if (n > a->largest) a->largest = n;
    return n > a->limit ? NULL : malloc(n);
}
static void *tio_count_realloc(void *user, void *p, size_t n) {
    tio_count *a = (tio_count *)user;
    a->total += n;
    if (n > a->largest) a->largest = n;
    return n > a->limit ? NULL : realloc(p, n);
}
static fat5_ctx *tio_ctx_counting(tio_count *a) {
    fat5_ctx_config c = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    memset(a, 0, sizeof *a);
    a->limit = (size_t)256 << 20;
    c.alloc = tio_count_alloc;
    c.realloc = tio_count_realloc;
    c.free = tio_free_fn;
    c.alloc_user = a;
    return fat5_ctx_create(&c, &ctx, NULL, 0) == FAT5_OK ? ctx : NULL;
}

static int tio_copy_file(fat5_test *T, const char *src, const char *dst) {
    char *buf;
    size_t len;
    int ok;
    if (fat5__read_file(fat5_test_ctx(T), src, (size_t)64 << 20, &buf, &len) != FAT5_OK) return 0;
    ok = tio_write_bytes(dst, buf, len);
    fat5__free(fat5_test_ctx(T), buf);
    return ok;
}

// copies fixture `name` (config.json, model.safetensors) to <tmpdir>/<as>; dir receives the path
static int tio_copy_fixture(fat5_test *T, const char *name, const char *as, char *dir) {
    static const char *const files[] = {"config.json", "model.safetensors"};
    char src[TIO_PATH_CAP + 64], dst[TIO_PATH_CAP + 64];
    size_t i;
    tio_path(T, dir, as);
    mkdir(dir, 0777);
    for (i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/%s/%s", FAT5_TEST_DATA, name, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        if (!tio_copy_file(T, src, dst)) return 0;
    }
    return 1;
}

// replaces the first `from` in dir/config.json by `to`
static int tio_edit_config(fat5_test *T, const char *dir, const char *from, const char *to) {
    char path[TIO_PATH_CAP + 64], *buf, *at;
    size_t len;
    fat5__sb b;
    int ok;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (fat5__read_file(fat5_test_ctx(T), path, (size_t)1 << 20, &buf, &len) != FAT5_OK) return 0;
    at = strstr(buf, from);
    if (!at) {
        fat5__free(fat5_test_ctx(T), buf);
        return 0;
    }
    fat5__sb_init(&b, fat5_test_ctx(T));
    fat5__sb_putn(&b, buf, (size_t)(at - buf));
    fat5__sb_puts(&b, to);
    fat5__sb_puts(&b, at + strlen(from));
    ok = tio_write_sb(path, &b);
    fat5__sb_free(&b);
    fat5__free(fat5_test_ctx(T), buf);
    return ok;
}

// A config that disagrees with the tensors is refused before any weight is allocated: vocab_size
// 10000000 against a 96-row embedding once cost 2.5 GB and 6 s before the shape check.
static void t_io_load_checks_before_alloc(fat5_test *T) {
    char dir[TIO_PATH_CAP];
    tio_count count;
    fat5_ctx *ctx = tio_ctx_counting(&count);
    fat5_model *m = NULL;
    fat5_status s;
    const char *e;
    FAT5_REQUIRE(T, ctx != NULL);
    FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_v10_relu_tied", "big_vocab", dir));
    FAT5_REQUIRE(T, tio_edit_config(T, dir, "\"vocab_size\": 96", "\"vocab_size\": 10000000"));
    s = fat5_model_load(ctx, dir, &m);
    e = fat5_last_error(ctx);
    FAT5_CHECK_MSG(T, s == FAT5_ERR_FORMAT && m == NULL, "load -> %s: %s", fat5_status_string(s), e);
    FAT5_CHECK_MSG(T, strstr(e, "tensor 'shared.weight' has shape [96, 32]; config.json implies [10000000, 32]"),
                   "message: %s", e);
    FAT5_CHECK_MSG(T, count.total < ((size_t)4 << 20) && count.largest < ((size_t)1 << 20),
                   "allocated %zu bytes in all, %zu at most at once", count.total, count.largest);
    // the same directory with the right vocabulary loads (the check refuses only what is wrong)
    FAT5_REQUIRE(T, tio_edit_config(T, dir, "\"vocab_size\": 10000000", "\"vocab_size\": 96"));
    s = fat5_model_load(ctx, dir, &m);
    FAT5_CHECK_MSG(T, s == FAT5_OK && m, "load -> %s: %s", fat5_status_string(s), fat5_last_error(ctx));
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
}

#ifndef _WIN32
#include <signal.h>
static void tio_on_alarm(int sig) { (void)sig; }
#endif

// A FIFO as config.json, as a shard named by the index, or given to fat5_st_load is refused at
// once (it used to block forever in open(2) waiting for a writer). An alarm without SA_RESTART
// interrupts a blocking open after 5 s, so a regression fails instead of hanging.
static void t_io_fifo_refused(fat5_test *T) {
#ifdef _WIN32
    FAT5_SKIP(T, "no FIFOs on Windows");
#else
    char dir1[TIO_PATH_CAP], dir2[TIO_PATH_CAP], cfg[TIO_PATH_CAP + 64], shard[TIO_PATH_CAP + 64];
    char path[TIO_PATH_CAP + 64], *buf = NULL;
    const char *idx = "{\"weight_map\": {\"shared.weight\": \"model-00001-of-00001.safetensors\"}}";
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = NULL;
    struct sigaction sa, old;
    size_t len;
    // config.json is a FIFO in dir1; the one shard of dir2's index is a FIFO
    FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_v10_relu_tied", "fifo_cfg", dir1));
    snprintf(cfg, sizeof cfg, "%s/config.json", dir1);
    FAT5_REQUIRE(T, remove(cfg) == 0 && mkfifo(cfg, 0600) == 0);
    FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_v10_relu_tied", "fifo_shard", dir2));
    snprintf(path, sizeof path, "%s/model.safetensors", dir2);
    FAT5_REQUIRE(T, remove(path) == 0);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir2);
    FAT5_REQUIRE(T, tio_write_bytes(path, idx, strlen(idx)));
    snprintf(shard, sizeof shard, "%s/model-00001-of-00001.safetensors", dir2);
    FAT5_REQUIRE(T, mkfifo(shard, 0600) == 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tio_on_alarm;
    sigemptyset(&sa.sa_mask);
    FAT5_REQUIRE(T, sigaction(SIGALRM, &sa, &old) == 0);
    alarm(5);
    TIO_EXPECT_ERR(T, fat5_model_load(ctx, dir1, &m), FAT5_ERR_IO, "config.json: not a regular file (a FIFO)");
    FAT5_CHECK(T, m == NULL);
    alarm(5);
    TIO_EXPECT_ERR(T, fat5__read_file(ctx, cfg, 100, &buf, &len), FAT5_ERR_IO, "not a regular file (a FIFO)");
    FAT5_CHECK(T, buf == NULL);
    alarm(5);
    TIO_EXPECT_ERR(T, fat5_model_load(ctx, dir2, &m), FAT5_ERR_IO,
                   "model-00001-of-00001.safetensors: not a regular file (a FIFO)");
    FAT5_CHECK(T, m == NULL);
    alarm(5);
    TIO_OPEN_BAD(T, shard, FAT5_ERR_IO, "not a regular file (a FIFO)");
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
#endif
}

// Switches LC_NUMERIC to an installed locale whose decimal point is not '.'; the previous name
// is copied to saved. 0 when there is none.
static int tio_comma_locale(char *saved, size_t cap, const char **name) {
    static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8",
                                        "de_DE", "fr_FR", "nl_NL.UTF-8", "es_ES.UTF-8", "it_IT.UTF-8",
                                        "ru_RU.UTF-8", "pt_BR.UTF-8", "de_DE.ISO8859-1", NULL};
    const char *cur = setlocale(LC_NUMERIC, NULL);
    int i;
    snprintf(saved, cap, "%s", cur ? cur : "C");
    for (i = 0; names[i]; i++) {
        if (setlocale(LC_NUMERIC, names[i]) && strcmp(localeconv()->decimal_point, ".") != 0) {
            *name = names[i];
            return 1;
        }
    }
    setlocale(LC_NUMERIC, saved);
    return 0;
}

// Under a decimal-comma locale, JSON numbers still read and write with '.': a config with
// "0.1" parses, and fat5_model_save writes a config.json that fat5_model_load reads back.
static void t_io_locale_numbers(fat5_test *T) {
    static const char cfg_json[] = "{\"layer_norm_epsilon\": 1e-06, \"dropout_rate\": 0.1, \"d_model\": 8}";
    char saved[256], num[40], dir[TIO_PATH_CAP], path[TIO_PATH_CAP + 64], *text = NULL;
    const char *name = NULL;
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = fat5_model_config_default(), back;
    fat5_model *m = NULL, *l = NULL;
    fat5__jdoc *d = NULL;
    double x = 0;
    size_t len;
    if (!tio_comma_locale(saved, sizeof saved, &name))
        FAT5_SKIP(T, "no decimal-comma locale installed (e.g. localedef -i de_DE -f UTF-8 de_DE.UTF-8)");
    // reading
    FAT5_CHECK(T, fat5__json_parse(ctx, "n", "[0.1, 1e-06, -2.5E+3, 7]", 24, 4, &d) == FAT5_OK);
    if (d) {
        const fat5__json *v = fat5__json_root(d)->child;
        FAT5_CHECK(T, fat5__json_as_double(v, &x) && x == 0.1);
        FAT5_CHECK(T, fat5__json_as_double(v->next, &x) && x == 1e-6);
        FAT5_CHECK(T, fat5__json_as_double(v->next->next, &x) && x == -2500.0);
        FAT5_CHECK(T, fat5__json_as_double(v->next->next->next, &x) && x == 7.0);
    }
    fat5__json_free(ctx, d);
    d = NULL;
    {   // a literal too long for the stack copy: "0.1" and 300 zeros
        char lit[310];
        memset(lit, '0', sizeof lit);
        memcpy(lit, "0.1", 3);
        FAT5_CHECK(T, fat5__json_parse(ctx, "n", lit, sizeof lit, 4, &d) == FAT5_OK);
        FAT5_CHECK(T, d && fat5__json_as_double(fat5__json_root(d), &x) && x == 0.1);
        fat5__json_free(ctx, d);
    }
    FAT5_CHECK_MSG(T, fat5_model_config_from_json(ctx, cfg_json, strlen(cfg_json), &back) == FAT5_OK,
                   "%s: %s", name, fat5_last_error(ctx));
    FAT5_CHECK(T, back.layer_norm_eps == 1e-6 && back.dropout_rate == 0.1 && back.d_model == 8);
    // writing
    fat5__fmt_double(num, 0.1);
    FAT5_CHECK_MSG(T, strcmp(num, "0.1") == 0, "0.1 -> %s", num);
    fat5__fmt_double(num, 1e-6);
    FAT5_CHECK_MSG(T, strcmp(num, "1e-06") == 0, "1e-6 -> %s", num);
    fat5__fmt_double(num, 0.3333333333333333);
    FAT5_CHECK_MSG(T, strcmp(num, "0.3333333333333333") == 0, "1/3 -> %s", num);
    // save -> load of a small model: dropout 0.1 and epsilon 1e-5 come back exactly
    c.vocab_size = 16;
    c.d_model = 8;
    c.d_kv = 4;
    c.num_heads = 2;
    c.d_ff = 8;
    c.num_layers = c.num_decoder_layers = 1;
    c.rel_buckets = 4;
    c.rel_max_distance = 8;
    c.dropout_rate = 0.1;
    c.layer_norm_eps = 1.5e-5;
    tio_path(T, dir, "comma");
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (fat5_model_create(ctx, &c, 1, &m) != FAT5_OK || fat5_model_save(m, dir) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "create / save: %s", fat5_last_error(ctx));
    } else if (fat5_model_load(ctx, dir, &l) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: load after save: %s", name, fat5_last_error(ctx));
    } else {
        FAT5_CHECK(T, l->cfg.dropout_rate == 0.1 && l->cfg.layer_norm_eps == 1.5e-5);
    }
    if (fat5__read_file(ctx, path, 1 << 20, &text, &len) == FAT5_OK) {
        FAT5_CHECK_MSG(T, strstr(text, "\"dropout_rate\": 0.1,") && strstr(text, "\"layer_norm_epsilon\": 1.5e-05,"),
                       "%s", text);
        fat5__free(ctx, text);
    }
    fat5_model_destroy(m);
    fat5_model_destroy(l);
    setlocale(LC_NUMERIC, saved);
    FAT5_CHECK(T, strcmp(setlocale(LC_NUMERIC, NULL), saved) == 0);
}

// config.json says untied but the file has no lm_head.weight: refused, not silently tied
static void t_io_load_untied_needs_lm_head(fat5_test *T) {
    char dir[TIO_PATH_CAP];
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = NULL;
    FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_v10_relu_tied", "untied", dir));
    FAT5_REQUIRE(T, tio_edit_config(T, dir, "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false"));
    TIO_EXPECT_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT,
                   "missing tensor 'lm_head.weight': config.json sets tie_word_embeddings false");
    FAT5_CHECK(T, m == NULL);
    fat5_model_destroy(m);
    m = NULL;
    // tied without lm_head (v1.0), and untied with it, still load
    FAT5_REQUIRE(T, tio_edit_config(T, dir, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true"));
    FAT5_CHECK_MSG(T, fat5_model_load(ctx, dir, &m) == FAT5_OK && m->lm_head_tied, "%s", fat5_last_error(ctx));
    fat5_model_destroy(m);
    m = NULL;
    FAT5_CHECK_MSG(T, fat5_model_load(ctx, FAT5_TEST_DATA "/t5_v11_gated_gelu_untied", &m) == FAT5_OK &&
                          !m->lm_head_tied, "%s", fat5_last_error(ctx));
    fat5_model_destroy(m);
}

// ---------------------------------------------------------------------------------------------
// config.json values outside their range are refused, naming the field

static fat5_status tio_cfg(fat5_test *T, const char *json) {
    fat5_model_config c;
    return fat5_model_config_from_json(fat5_test_ctx(T), json, strlen(json), &c);
}

static void t_io_config_ranges(fat5_test *T) {
    static const struct { const char *json; fat5_status want; const char *word; } bad[] = {
        {"{\"dropout_rate\": -0.1}", FAT5_ERR_FORMAT, "dropout_rate = -0.1, expected 0 <= rate < 1"},
        {"{\"dropout_rate\": 1}", FAT5_ERR_FORMAT, "dropout_rate = 1,"},
        {"{\"dropout_rate\": 1.5}", FAT5_ERR_FORMAT, "dropout_rate = 1.5"},
        {"{\"dropout_rate\": 1e999}", FAT5_ERR_FORMAT, "'dropout_rate' must be a number"},
        {"{\"pad_token_id\": -3}", FAT5_ERR_FORMAT, "pad_token_id = -3 is negative"},
        {"{\"eos_token_id\": -1}", FAT5_ERR_FORMAT, "eos_token_id = -1 is negative"},
        {"{\"decoder_start_token_id\": -2}", FAT5_ERR_FORMAT, "decoder_start_token_id = -2 is negative"},
        {"{\"vocab_size\": 10, \"eos_token_id\": 10}", FAT5_ERR_UNSUPPORTED,
         "eos_token_id = 10 must be in [0, vocab_size 10)"},
        {"{\"vocab_size\": 10, \"decoder_start_token_id\": 12}", FAT5_ERR_UNSUPPORTED, "decoder_start_token_id = 12"},
        {"{\"layer_norm_epsilon\": 1e-50}", FAT5_ERR_FORMAT, "layer_norm_epsilon = 1e-50 rounds to 0 in fp32"},
        {"{\"layer_norm_epsilon\": -1e-06}", FAT5_ERR_FORMAT, "layer_norm_epsilon = -1e-06"},
        {"{\"layer_norm_epsilon\": 0}", FAT5_ERR_FORMAT, "layer_norm_epsilon = 0"},
        {"{\"layer_norm_epsilon\": 2}", FAT5_ERR_UNSUPPORTED, "layer_norm_epsilon = 2"},
        {"{\"initializer_factor\": -1.0}", FAT5_ERR_FORMAT, "'initializer_factor' must be a positive number"},
        {"{\"initializer_factor\": 0}", FAT5_ERR_FORMAT, "initializer_factor"},
        {"{\"initializer_factor\": \"1\"}", FAT5_ERR_FORMAT, "initializer_factor"},
        {"{\"relative_attention_num_buckets\": 2}", FAT5_ERR_UNSUPPORTED, "relative_attention_num_buckets = 2"},
        {"{\"relative_attention_max_distance\": 0}", FAT5_ERR_UNSUPPORTED, "relative_attention_max_distance = 0"},
    };
    static const char *const good[] = {
        "{\"dropout_rate\": 0}", "{\"dropout_rate\": 0.999}", "{\"layer_norm_epsilon\": 1e-45}",
        "{\"initializer_factor\": 0.05}", "{\"vocab_size\": 10, \"eos_token_id\": 9, \"pad_token_id\": 9}",
        "{\"pad_token_id\": null, \"eos_token_id\": null, \"decoder_start_token_id\": null}"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c;
    fat5_model *m = NULL;
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fat5_status s = tio_cfg(T, bad[i].json);
        const char *e = fat5_last_error(ctx);
        FAT5_CHECK_MSG(T, s == bad[i].want && strstr(e, bad[i].word), "%s -> %s '%s', want %s '%s'", bad[i].json,
                       fat5_status_string(s), e, fat5_status_string(bad[i].want), bad[i].word);
    }
    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        FAT5_CHECK_MSG(T, tio_cfg(T, good[i]) == FAT5_OK, "%s: %s", good[i], fat5_last_error(ctx));
    // values only a C caller can pass: not finite
    c = fat5_model_config_default();
    c.dropout_rate = NAN;
    TIO_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "dropout_rate = nan");
    c = fat5_model_config_default();
    c.layer_norm_eps = HUGE_VAL;
    TIO_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "layer_norm_epsilon = inf");
    c.layer_norm_eps = NAN;
    TIO_EXPECT_ERR(T, fat5_model_config_validate(ctx, &c), FAT5_ERR_INVALID_ARG, "layer_norm_epsilon = nan");
    c = fat5_model_config_default();
    c.eos_token_id = -1;
    TIO_EXPECT_ERR(T, fat5_model_create(ctx, &c, 1, &m), FAT5_ERR_INVALID_ARG, "eos_token_id = -1 is negative");
    FAT5_CHECK(T, m == NULL);
    fat5_model_destroy(m);
}

// ---------------------------------------------------------------------------------------------
// Strings from files never reach a message raw

// 1 when msg is valid UTF-8 without a control character (C0, DEL, C1)
static int tio_msg_clean(const char *msg) {
    const unsigned char *u = (const unsigned char *)msg;
    size_t i;
    for (i = 0; u[i]; i++)
        if (u[i] < 0x20 || u[i] == 0x7f || (u[i] == 0xC2 && u[i + 1] >= 0x80 && u[i + 1] < 0xA0)) return 0;
    return fat5__utf8_valid(msg);
}

#define TIO_CLEAN_ERR(T, call, status, needle)                                                       \
    do {                                                                                             \
        TIO_EXPECT_ERR(T, call, status, needle);                                                     \
        FAT5_CHECK_MSG(T, tio_msg_clean(fat5_last_error(fat5_test_ctx(T))), "%s: raw control bytes", \
                       #call);                                                                       \
    } while (0)

// no decimal number of 10 digits or more (a header length made of text bytes has 19 or 20)
static int tio_no_long_number(const char *msg) {
    size_t run = 0;
    for (; *msg; msg++) {
        run = (*msg >= '0' && *msg <= '9') ? run + 1 : 0;
        if (run >= 10) return 0;
    }
    return 1;
}

static void t_io_messages_sanitised(fat5_test *T) {
    static const unsigned char png[24] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                          'I', 'H', 'D', 'R', 0, 0, 0, 1, 0, 0, 0, 1};
    static const char text[] = "Hello, this is a plain text file.\nIt is not a safetensors file.\n";
    static const char idx1[] = "{\"weight_map\": {\"\\u001bq\": \"x\\u001b.safetensors\"}}";
    static const char idx2[] = "{\"weight_map\": {\"\\u001bq\": \"one.safetensors\"}}";
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[TIO_PATH_CAP], path[TIO_PATH_CAP + 64], longkey[400];
    fat5_st_file *f = NULL;
    fat5_model *m = NULL, *a = NULL;
    int i;
    // config.json: keys and string values
    TIO_CLEAN_ERR(T, tio_cfg(T, "{\"\\u001b[31mevil\": 1}"), FAT5_ERR_UNSUPPORTED, "unknown field '?[31mevil'");
    TIO_CLEAN_ERR(T, tio_cfg(T, "{\"model_type\": \"\\u001b]0;t\\u0007\"}"), FAT5_ERR_UNSUPPORTED,
                  "model_type '?]0;t?' is not a T5 model");
    TIO_CLEAN_ERR(T, tio_cfg(T, "{\"architectures\": [\"\\u009b2JEncoderModel\"]}"), FAT5_ERR_UNSUPPORTED,
                  "architecture '?2JEncoderModel' is unknown");
    TIO_CLEAN_ERR(T, tio_cfg(T, "{\"feed_forward_proj\": \"gated-\\u001b[0m\"}"), FAT5_ERR_UNSUPPORTED,
                  "feed_forward_proj 'gated-?[0m': unknown activation");
    TIO_CLEAN_ERR(T, tio_cfg(T, "{\"feed_forward_proj\": \"a-\\u007f-b\"}"), FAT5_ERR_FORMAT,
                  "feed_forward_proj 'a-?-b' is not");
    TIO_CLEAN_ERR(T, tio_cfg(T, "{\"dense_act_fn\": \"\\r\\n\"}"), FAT5_ERR_FORMAT, "dense_act_fn '?" "?' contradicts");
    // a long key of 2-byte characters is cut on a character boundary
    memcpy(longkey, "{\"", 2);
    for (i = 0; i < 150; i++) memcpy(longkey + 2 + 2 * i, "\xc3\xa9", 2);
    memcpy(longkey + 302, "\": 1}", 6);
    TIO_CLEAN_ERR(T, tio_cfg(T, longkey), FAT5_ERR_UNSUPPORTED, "...'; fat5 cannot tell");
    // safetensors headers: metadata keys, tensor names, dtypes
    tio_path(T, path, "esc.safetensors");
    FAT5_REQUIRE(T, tio_write_st(path, "{\"__metadata__\":{\"\\u001b[2J\":1}}", 0));
    TIO_CLEAN_ERR(T, fat5_st_load(ctx, path, &f), FAT5_ERR_FORMAT, "__metadata__ value of '?[2J' is a number");
    FAT5_REQUIRE(T, tio_write_st(path, "{\"\\u001b[2J\":{\"dtype\":\"\\u001bF32\",\"shape\":[1],"
                                       "\"data_offsets\":[0,4]}}", 4));
    TIO_CLEAN_ERR(T, fat5_st_load(ctx, path, &f), FAT5_ERR_FORMAT, "tensor '?[2J': unknown dtype '?F32'");
    // files of another kind: no header length made of their bytes
    tio_path(T, path, "image.png");
    FAT5_REQUIRE(T, tio_write_bytes(path, png, sizeof png));
    TIO_CLEAN_ERR(T, fat5_st_load(ctx, path, &f), FAT5_ERR_FORMAT,
                  "not a safetensors file (the header length in its first 8 bytes exceeds the limit of 100 MiB)");
    FAT5_CHECK_MSG(T, tio_no_long_number(fat5_last_error(ctx)), "%s", fat5_last_error(ctx));
    tio_path(T, path, "notes.txt");
    FAT5_REQUIRE(T, tio_write_bytes(path, text, strlen(text)));
    TIO_CLEAN_ERR(T, fat5_st_load(ctx, path, &f), FAT5_ERR_FORMAT, "not a safetensors file");
    FAT5_CHECK_MSG(T, tio_no_long_number(fat5_last_error(ctx)), "%s", fat5_last_error(ctx));
    FAT5_CHECK(T, f == NULL);
    // an index: tensor names and shard file names
    FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_v10_relu_tied", "esc_index", dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FAT5_REQUIRE(T, remove(path) == 0);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FAT5_REQUIRE(T, tio_write_bytes(path, idx1, strlen(idx1)));
    TIO_CLEAN_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT,
                  "tensor '?q' maps to 'x?.safetensors', not a .safetensors file name");
    FAT5_REQUIRE(T, tio_write_bytes(path, idx2, strlen(idx2)));
    snprintf(path, sizeof path, "%s/one.safetensors", dir);
    FAT5_REQUIRE(T, tio_write_st(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4));
    TIO_CLEAN_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT,
                  "tensor '?q' is listed in the index but absent from 'one.safetensors'");
    FAT5_CHECK(T, m == NULL);
    // a checkpoint with one tensor too many, named with an escape sequence
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, FAT5_TEST_DATA "/t5_v10_relu_tied", &a));
    {
        fat5_st_write_tensor *t = (fat5_st_write_tensor *)calloc((size_t)a->n_params + 1, sizeof *t);
        static const float one = 1.0f;
        FAT5_REQUIRE(T, t != NULL);
        for (i = 0; i < a->n_params; i++) {
            t[i].name = a->params[i].name;
            t[i].ndim = a->params[i].ndim;
            t[i].shape[0] = a->params[i].shape[0];
            t[i].shape[1] = a->params[i].shape[1];
            t[i].data = a->w + a->params[i].offset;
        }
        t[i].name = "\x1b]2;pwned\x07";
        t[i].ndim = 1;
        t[i].shape[0] = 1;
        t[i].data = &one;
        tio_path(T, dir, "esc_extra");
        mkdir(dir, 0777);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        FAT5_CHECK(T, fat5_st_write(ctx, path, t, a->n_params + 1, NULL, 0) == FAT5_OK);
        snprintf(path, sizeof path, "%s/config.json", dir);
        FAT5_CHECK(T, tio_copy_file(T, FAT5_TEST_DATA "/t5_v10_relu_tied/config.json", path));
        free(t);
    }
    TIO_CLEAN_ERR(T, fat5_model_load(ctx, dir, &m), FAT5_ERR_FORMAT, "unexpected tensor '?]2;pwned?'");
    FAT5_CHECK(T, m == NULL);
    fat5_model_destroy(a);
}

// A saved directory is complete: config.json with torch_dtype, generation_config.json (the
// loaded one's text, else the model's ids), the source's tokenizer files, fp32 or bf16 weights.
static int tio_file_has(fat5_test *T, const char *dir, const char *name, const char *word) {
    char path[TIO_PATH_CAP + 64], *buf = NULL;
    size_t len;
    int ok;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fat5__read_file(fat5_test_ctx(T), path, (size_t)1 << 24, &buf, &len) != FAT5_OK) return 0;
    ok = strstr(buf, word) != NULL;
    fat5__free(fat5_test_ctx(T), buf);
    return ok;
}

static int tio_same_file(fat5_test *T, const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int ok;
    if (fat5__read_file(fat5_test_ctx(T), a, (size_t)1 << 24, &x, &nx) != FAT5_OK) return 0;
    if (fat5__read_file(fat5_test_ctx(T), b, (size_t)1 << 24, &y, &ny) != FAT5_OK) {
        fat5__free(fat5_test_ctx(T), x);
        return 0;
    }
    ok = nx == ny && memcmp(x, y, nx) == 0;
    fat5__free(fat5_test_ctx(T), x);
    fat5__free(fat5_test_ctx(T), y);
    return ok;
}

static void t_io_save_complete(fat5_test *T) {
    static const char gen[] = "{\"decoder_start_token_id\": 0, \"eos_token_id\": 1, \"pad_token_id\": 0,\n"
                              " \"num_beams\": 4, \"max_new_tokens\": 7, \"transformers_version\": \"4.46.0\"}\n";
    const char *src = FAT5_TEST_DATA "/t5_spiece";
    char a[TIO_PATH_CAP], b[TIO_PATH_CAP], c[TIO_PATH_CAP], p[TIO_PATH_CAP + 64], q[TIO_PATH_CAP + 64];
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model *m = NULL, *r = NULL;
    fat5_st_file *f = NULL;
    fat5_generate_config g;
    size_t i, n_bad = 0;
    if (!fat5__is_dir(src)) FAT5_SKIP(T, "fixture tests/data/t5_spiece not found");
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &m));
    // fp32: the tokenizer file copied byte for byte, the generation settings from the model's ids
    tio_path(T, a, "saved_f32");
    FAT5_REQUIRE_OK(T, fat5_model_save(m, a));
    snprintf(p, sizeof p, "%s/spiece.model", src);
    snprintf(q, sizeof q, "%s/spiece.model", a);
    FAT5_CHECK(T, tio_same_file(T, p, q));
    FAT5_CHECK(T, tio_file_has(T, a, "config.json", "\"torch_dtype\": \"float32\""));
    FAT5_CHECK(T, tio_file_has(T, a, "generation_config.json", "\"decoder_start_token_id\": 0"));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, a, &r));
    g = fat5_generate_config_from_model(r);
    FAT5_CHECK(T, g.decoder_start_token_id == 0 && g.eos_token_id == 1 && g.pad_token_id == 0);
    FAT5_CHECK(T, r->n_floats == m->n_floats && memcmp(r->w, m->w, m->n_floats * 4) == 0);
    fat5_model_destroy(r);
    r = NULL;
    // bf16: BF16 tensors, half the bytes, every weight its nearest bf16
    tio_path(T, b, "saved_bf16");
    FAT5_REQUIRE_OK(T, fat5_model_save_as(m, b, FAT5_DTYPE_BF16));
    FAT5_CHECK(T, tio_file_has(T, b, "config.json", "\"torch_dtype\": \"bfloat16\""));
    snprintf(p, sizeof p, "%s/model.safetensors", b);
    FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p, &f));
    FAT5_CHECK(T, fat5_st_tensor_count(f) > 0 && fat5_st_get(f, 0)->dtype == FAT5_ST_BF16);
    fat5_st_destroy(f);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, b, &r));
    for (i = 0; i < m->n_floats; i++) n_bad += r->w[i] != fat5__bf16_to_f32(fat5__f32_to_bf16(m->w[i]));
    FAT5_CHECK_MSG(T, n_bad == 0, "%zu of %zu weights are not their nearest bf16", n_bad, m->n_floats);
    fat5_model_destroy(r);
    r = NULL;
    FAT5_CHECK(T, fat5_model_save_as(m, b, (fat5_dtype)7) == FAT5_ERR_INVALID_ARG);
#ifndef _WIN32
    {   // a directory that cannot be made: the reason is mkdir's (a stat after it used to replace it
        // with "No such file or directory"); /sys refuses new entries, as the test's own mkdir shows
        const char *ro = "/sys/fat5_test_cannot_mkdir";
        int e;
        errno = 0;
        e = mkdir(ro, 0755) == 0 ? 0 : errno;
        if (e == 0) rmdir(ro);
        if (e != 0 && e != ENOENT)
            FAT5_CHECK_MSG(T, fat5_model_save(m, ro) == FAT5_ERR_IO && strstr(fat5_last_error(ctx), strerror(e)),
                           "want '%s': %s", strerror(e), fat5_last_error(ctx));
    }
#endif
    fat5_model_destroy(m);
    m = NULL;
    // a checkpoint with its own generation_config.json: written back as it was, also on a save
    // into the directory it came from
    FAT5_REQUIRE(T, tio_copy_fixture(T, "t5_spiece", "with_gen", c));
    snprintf(p, sizeof p, "%s/generation_config.json", c);
    FAT5_REQUIRE(T, tio_write_bytes(p, gen, strlen(gen)));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, c, &m));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, a));
    snprintf(q, sizeof q, "%s/generation_config.json", a);
    FAT5_CHECK(T, tio_same_file(T, p, q));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, c));
    FAT5_CHECK(T, tio_file_has(T, c, "generation_config.json", "\"num_beams\": 4"));
    fat5_model_destroy(m);
}

#define FAT5_TESTS_IO(X) X(io_json_dom_cap) X(io_save_complete)                                                        \
    X(io_json_valid) X(io_json_error_position) X(io_json_trailing_garbage) X(io_json_depth_limit)  \
    X(io_json_duplicate_key) X(io_json_bad_literal) X(io_json_control_char)                        \
    X(io_json_lone_surrogate) X(io_json_leading_zero) X(io_json_unterminated_string)               \
    X(io_json_u64_limits) X(io_json_i64_limits) X(io_json_double) X(io_read_file)                  \
    X(io_sb_builder) X(io_f16_to_f32) X(io_bf16_rounding) X(io_atomic_write)                       \
    X(io_atomic_missing_dir) X(io_atomic_keeps_mode) X(io_st_roundtrip) X(io_st_deterministic)     \
    X(io_st_write_rejects) X(io_st_hf_fixture) X(io_st_truncated_data) X(io_st_truncated_header)   \
    X(io_st_header_past_end) X(io_st_header_huge) X(io_st_overlap) X(io_st_out_of_range)           \
    X(io_st_gap) X(io_st_trailing_bytes) X(io_st_shape_overflow) X(io_st_shape_wraps)              \
    X(io_st_nbytes_mismatch) X(io_st_duplicate_tensor) X(io_st_unknown_dtype)                      \
    X(io_st_metadata_not_string) X(io_st_tiny_file) X(io_st_not_brace) X(io_st_bad_entries)        \
    X(io_st_header_depth) X(io_st_valid_edge_cases) X(io_st_read_f16_bf16)                         \
    X(io_st_read_unsupported) X(io_st_read_bad_args) X(io_st_read_truncated_later)                \
    X(io_st_metadata_many_keys) X(io_index_many_entries) X(io_load_checks_before_alloc)                                                          \
    X(io_fifo_refused) X(io_locale_numbers) X(io_load_untied_needs_lm_head)                    \
    X(io_config_ranges) X(io_messages_sanitised)
