// Training data: token files (writer -> reader round trips, a corpus of bad files, each rejected
// with the file and the byte offset named) and the UL2 sampler (its examples rebuilt into the
// corpus, span statistics against the exact distribution of T5's random segmentation, the
// prefix-LM split point by a chi-square test, sentinels, determinism, saved state, splits, config
// errors). All on the CPU.

#include <sys/stat.h>
#include <sys/types.h>

#define TD_PATH_CAP 1024
#define TD_EOS 1
#define TD_V 1024            // vocabulary of the test corpora
#define TD_SENT_FIRST 1023   // sentinels 924 .. 1023
#define TD_N_SENT 100
#define TD_MODE0 910         // mode tokens 910 .. 916, one per denoiser

static void td_path(fat5_test *T, char *buf, const char *name) {
    snprintf(buf, TD_PATH_CAP, "%s/%s", fat5_test_tmpdir(T), name);
}

static int td_write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    int ok;
    if (!fp) return 0;
    ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

static int td_file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int td_err_has(fat5_test *T, const char *word) {
    return strstr(fat5_last_error(fat5_test_ctx(T)), word) != NULL;
}

// A corpus of n_docs documents with lengths from len_of(i, rng): content ids uniform in
// [3, 900), each document followed by eos. The caller frees ids.
typedef struct td_corpus {
    int32_t *ids;
    int64_t n, n_docs, n_content;
} td_corpus;

static int td_make_corpus(td_corpus *c, int64_t n_docs, int64_t min_len, int64_t max_len, uint64_t seed) {
    fat5_rng r = fat5_rng_init(seed);
    int64_t i, j, cap = n_docs * (max_len + 1);
    c->ids = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    if (!c->ids) return 0;
    c->n = c->n_content = 0;
    c->n_docs = n_docs;
    for (i = 0; i < n_docs; i++) {
        int64_t len = min_len + (int64_t)fat5_rng_below(&r, (uint64_t)(max_len - min_len + 1));
        for (j = 0; j < len; j++) c->ids[c->n++] = 3 + (int32_t)fat5_rng_below(&r, 897);
        c->ids[c->n++] = TD_EOS;
        c->n_content += len;
    }
    return 1;
}

// writes the corpus to name in the test directory and opens it
static fat5_status td_open_corpus(fat5_test *T, const td_corpus *c, const char *name, int width,
                                  fat5_tokens **out) {
    char p[TD_PATH_CAP];
    const char *paths[1];
    fat5_status st;
    td_path(T, p, name);
    st = fat5_tokens_write(fat5_test_ctx(T), p, c->ids, c->n, TD_V, TD_EOS, width);
    if (st != FAT5_OK) return st;
    paths[0] = p;
    return fat5_tokens_load(fat5_test_ctx(T), paths, 1, out);
}

static fat5_ul2_config td_config(void) {
    fat5_ul2_config c = fat5_ul2_config_default();
    int k;
    c.sentinel_first = TD_SENT_FIRST;
    c.n_sentinels = TD_N_SENT;
    c.max_enc_len = 64;
    c.max_dec_len = 64;
    c.enc_tokens = 64 * 6;
    c.dec_tokens = 64 * 5;
    for (k = 0; k < c.n_denoisers; k++) c.denoisers[k].mode_token = TD_MODE0 + k;
    c.seed = 1234;
    return c;
}

static int td_is_sentinel(const fat5_ul2_config *c, int32_t id) {
    return id <= c->sentinel_first && id > c->sentinel_first - c->n_sentinels;
}

// Rebuilds the piece an example was made from: the input's ids with each sentinel replaced by the
// ids that follow the same sentinel in the target. Checks the layout: a mode token when the
// denoiser has one (which identifies it: *den, else -1), sentinels sentinel_first - j in order in
// both, eos last in both, nothing left over. Returns the piece's length, -1 when malformed.
static int64_t td_rebuild(fat5_test *T, const fat5_ul2_config *c, const int32_t *in, int64_t ni,
                          const int32_t *tg, int64_t nt, int32_t *piece, int *den, int64_t *spans) {
    int64_t i = 0, j = 0, n = 0, k = 0;
    int d, has_sent = 0, bad = 0;
    *den = -1;
    *spans = 0;
    for (d = 0; d < c->n_denoisers; d++)
        if (c->denoisers[d].mode_token >= 0 && ni > 0 && in[0] == c->denoisers[d].mode_token) *den = d;
    if (*den >= 0) i = 1;
    if (ni < 1 || nt < 1 || in[ni - 1] != TD_EOS || tg[nt - 1] != TD_EOS) {
        FAT5_CHECK_MSG(T, 0, "example does not end with eos in input and target");
        return -1;
    }
    for (j = i; j < ni - 1; j++) has_sent |= td_is_sentinel(c, in[j]);
    j = 0;
    if (!has_sent) {   // prefix LM
        for (; i < ni - 1; i++) piece[n++] = in[i];
        for (; j < nt - 1; j++) {
            bad |= td_is_sentinel(c, tg[j]) || tg[j] == TD_EOS;
            piece[n++] = tg[j];
        }
        FAT5_CHECK_MSG(T, !bad, "prefix example: a sentinel or eos inside the target");
        return bad ? -1 : n;
    }
    for (; i < ni - 1; i++) {
        if (td_is_sentinel(c, in[i])) {
            int32_t want = c->sentinel_first - (int32_t)k;
            if (in[i] != want || j >= nt - 1 || tg[j] != want) {
                FAT5_CHECK_MSG(T, 0, "span %lld: input sentinel %ld, target %ld, want %ld", (long long)k,
                               (long)in[i], j < nt ? (long)tg[j] : -1L, (long)want);
                return -1;
            }
            j++;
            k++;
            while (j < nt - 1 && !td_is_sentinel(c, tg[j])) piece[n++] = tg[j++];
        } else {
            if (in[i] == TD_EOS) bad = 1;
            piece[n++] = in[i];
        }
    }
    if (j != nt - 1 || bad) {
        FAT5_CHECK_MSG(T, 0, "target has %lld ids left after the last input sentinel", (long long)(nt - 1 - j));
        return -1;
    }
    *spans = k;
    return n;
}

// ---------------------------------------------------------------------------------------------
// token files

static void t_tokens_roundtrip(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const int32_t a[] = {5, 6, 7, 1, 8, 1, 1, 70000, 1};   // docs: 3 ids, 1 id, empty, 1 id
    static const int32_t b[] = {9, 9, 1};
    char pa[TD_PATH_CAP], pb[TD_PATH_CAP];
    const char *paths[2];
    fat5_tokens *t = NULL;
    int32_t buf[16];
    int64_t n;
    int eos, w;
    unsigned char raw[80];
    FILE *fp;
    td_path(T, pa, "a.tok");
    td_path(T, pb, "b.tok");
    paths[0] = pa;
    paths[1] = pb;
    // width 2 cannot hold 70000: refused; width 4 can
    FAT5_CHECK(T, fat5_tokens_write(ctx, pa, a, 9, 100000, 1, 2) == FAT5_ERR_INVALID_ARG);
    FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, pa, a, 9, 100000, 1, 4));
    // the header byte by byte, as the declarations document it
    fp = fopen(pa, "rb");
    FAT5_REQUIRE(T, fp != NULL);
    FAT5_CHECK(T, fread(raw, 1, sizeof raw, fp) == 32 + 9 * 4);
    fclose(fp);
    FAT5_CHECK(T, memcmp(raw, "FAT5TOK\0", 8) == 0);
    FAT5_CHECK(T, raw[8] == 1 && raw[9] == 0 && raw[12] == 4 && raw[16] == 0xA0 && raw[17] == 0x86 && raw[18] == 1);
    FAT5_CHECK(T, raw[24] == 1 && raw[28] == 0 && raw[31] == 0);
    FAT5_CHECK(T, raw[32 + 7 * 4] == (70000 & 255) && raw[32 + 7 * 4 + 2] == 1);
    FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, pb, b, 3, 100000, 1, 4));
    FAT5_REQUIRE_OK(T, fat5_tokens_load(ctx, paths, 2, &t));
    FAT5_CHECK(T, fat5_tokens_count(t) == 12);
    FAT5_CHECK(T, fat5_tokens_doc_count(t) == 5);
    FAT5_CHECK(T, fat5_tokens_vocab_size(t) == 100000);
    FAT5_CHECK(T, fat5_tokens_eos_id(t) == 1);
    // documents read back across the file boundary
    FAT5_CHECK(T, fat5__tok_read_doc(t, 0, 16, buf, &n, &eos) == FAT5_OK && n == 3 && eos && buf[2] == 7);
    FAT5_CHECK(T, fat5__tok_read_doc(t, 0, 2, buf, &n, &eos) == FAT5_OK && n == 2 && !eos);
    FAT5_CHECK(T, fat5__tok_read_doc(t, 0, 3, buf, &n, &eos) == FAT5_OK && n == 3 && eos);   // peeks
    FAT5_CHECK(T, fat5__tok_read_doc(t, 7, 16, buf, &n, &eos) == FAT5_OK && n == 1 && buf[0] == 70000);
    FAT5_CHECK(T, fat5__tok_read_doc(t, 9, 16, buf, &n, &eos) == FAT5_OK && n == 2 && eos && buf[1] == 9);
    fat5_tokens_destroy(t);
    fat5_tokens_destroy(NULL);
    // a corpus larger than the read window, both widths: every id comes back
    for (w = 2; w <= 4; w += 2) {
        td_corpus c;
        int64_t pos = 0, i, ok = 1;
        int32_t *got;
        FAT5_REQUIRE(T, td_make_corpus(&c, 300, 0, 3000, 5 + (uint64_t)w));
        got = (int32_t *)malloc(4000 * sizeof(int32_t));
        FAT5_REQUIRE(T, got != NULL);
        FAT5_REQUIRE_OK(T, td_open_corpus(T, &c, "big.tok", w, &t));
        FAT5_CHECK(T, fat5_tokens_count(t) == c.n && fat5_tokens_doc_count(t) == 300);
        while (pos < c.n && ok) {
            if (fat5__tok_read_doc(t, pos, 4000, got, &n, &eos) != FAT5_OK || !eos) ok = 0;
            for (i = 0; i < n && ok; i++) ok = got[i] == c.ids[pos + i];
            ok = ok && c.ids[pos + n] == TD_EOS;
            pos += n + 1;
        }
        FAT5_CHECK_MSG(T, ok && pos == c.n, "width %d: ids differ near %lld", w, (long long)pos);
        fat5_tokens_destroy(t);
        t = NULL;
        free(got);
        free(c.ids);
    }
}

// A raw token file: header fields as given, then the ids (little-endian, width bytes each).
static int td_raw_file(const char *path, const char *magic, uint32_t version, uint32_t width, uint64_t vocab,
                       int32_t eos, const uint32_t *ids, int n, int extra_bytes) {
    unsigned char b[256];
    size_t len = 32;
    int i;
    memset(b, 0, sizeof b);
    memcpy(b, magic, 8);
    fat5__tok_put_le(b + 8, version, 4);
    fat5__tok_put_le(b + 12, width, 4);
    fat5__tok_put_le(b + 16, vocab, 8);
    fat5__tok_put_le(b + 24, (uint32_t)eos, 4);
    for (i = 0; i < n; i++) {
        fat5__tok_put_le(b + len, ids[i], width == 4 ? 4 : 2);
        len += width == 4 ? 4 : 2;
    }
    return td_write_bytes(path, b, len + (size_t)extra_bytes);
}

// opening path must fail with want, naming the file and containing word (e.g. "byte 36")
static void td_open_bad_at(fat5_test *T, int line, const char *path, fat5_status want, const char *word,
                           const char *word2) {
    fat5_tokens *t = (fat5_tokens *)&t;
    const char *paths[1];
    fat5_status st;
    const char *msg;
    paths[0] = path;
    st = fat5_tokens_load(fat5_test_ctx(T), paths, 1, &t);
    msg = fat5_last_error(fat5_test_ctx(T));
    if (st != want || t != NULL || strncmp(msg, path, strlen(path)) != 0 || !strstr(msg, word) ||
        (word2 && !strstr(msg, word2)))
        fat5_test_fail(T, __FILE__, line, "%s: got %s (%s), want %s with \"%s\"%s%s", path,
                       fat5_status_string(st), msg, fat5_status_string(want), word, word2 ? " and " : "",
                       word2 ? word2 : "");
    if (st == FAT5_OK) fat5_tokens_destroy(t);
}
#define td_open_bad(T, path, want, word, word2) td_open_bad_at((T), __LINE__, (path), (want), (word), (word2))

static void t_tokens_bad_files(fat5_test *T) {
    static const uint32_t ok_ids[] = {5, 6, 1};
    static const uint32_t big_id[] = {5, 300, 1};
    static const uint32_t no_eos[] = {5, 6, 7};
    char p[TD_PATH_CAP], q[TD_PATH_CAP];
    const char *paths[2];
    fat5_tokens *t = NULL;
    td_path(T, p, "bad.tok");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOX", 1, 2, 256, 1, ok_ids, 3, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 0", "magic");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 2, 2, 256, 1, ok_ids, 3, 0));
    td_open_bad(T, p, FAT5_ERR_UNSUPPORTED, "byte 8", "version");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 3, 256, 1, ok_ids, 3, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 12", "width");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 2, 0, 1, ok_ids, 3, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 16", "vocabulary");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 2, 256, 256, ok_ids, 3, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 24", "eos");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 2, 256, 1, ok_ids, 3, 1));   // a stray byte
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 38", "truncated");
    FAT5_REQUIRE(T, td_write_bytes(p, "FAT5TOK\0\1\0\0\0\2", 13));            // a cut header
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 13", "truncated");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 2, 256, 1, ok_ids, 0, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 32", "empty");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 2, 256, 1, big_id, 3, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 34", "id 300");
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 4, 256, 1, no_eos, 3, 0));
    td_open_bad(T, p, FAT5_ERR_FORMAT, "byte 40", "last id");
    td_path(T, p, "missing.tok");
    td_open_bad(T, p, FAT5_ERR_IO, "cannot open", NULL);
    td_open_bad(T, fat5_test_tmpdir(T), FAT5_ERR_IO, "not a regular file", "directory");
    // a FIFO without a writer: refused at once, never blocking
    td_path(T, p, "fifo.tok");
    FAT5_REQUIRE(T, mkfifo(p, 0600) == 0);
    td_open_bad(T, p, FAT5_ERR_IO, "not a regular file", "FIFO");
    // two good files that disagree on the vocabulary or the eos id: the second is named
    td_path(T, p, "one.tok");
    td_path(T, q, "two.tok");
    paths[0] = p;
    paths[1] = q;
    FAT5_REQUIRE(T, td_raw_file(p, "FAT5TOK", 1, 2, 256, 1, ok_ids, 3, 0));
    FAT5_REQUIRE(T, td_raw_file(q, "FAT5TOK", 1, 2, 512, 1, ok_ids, 3, 0));
    FAT5_CHECK(T, fat5_tokens_load(fat5_test_ctx(T), paths, 2, &t) == FAT5_ERR_FORMAT && t == NULL);
    FAT5_CHECK(T, td_err_has(T, q) && td_err_has(T, "byte 16") && td_err_has(T, "vocabulary"));
    FAT5_REQUIRE(T, td_raw_file(q, "FAT5TOK", 1, 2, 256, 5, ok_ids, 3, 0));
    FAT5_CHECK(T, fat5_tokens_load(fat5_test_ctx(T), paths, 2, &t) == FAT5_ERR_FORMAT && t == NULL);
    FAT5_CHECK(T, td_err_has(T, q) && td_err_has(T, "byte 24") && td_err_has(T, "eos"));
    // bad arguments to the writer
    {
        static const int32_t ids[] = {3, 1};
        static const int32_t tail[] = {3, 4};
        static const int32_t neg[] = {-2, 1};
        fat5_ctx *ctx = fat5_test_ctx(T);
        FAT5_CHECK(T, fat5_tokens_write(ctx, p, ids, 0, 256, 1, 2) == FAT5_ERR_INVALID_ARG && td_err_has(T, "no ids"));
        FAT5_CHECK(T, fat5_tokens_write(ctx, p, tail, 2, 256, 1, 2) == FAT5_ERR_INVALID_ARG && td_err_has(T, "eos"));
        FAT5_CHECK(T, fat5_tokens_write(ctx, p, neg, 2, 256, 1, 2) == FAT5_ERR_INVALID_ARG && td_err_has(T, "ids[0]"));
        FAT5_CHECK(T, fat5_tokens_write(ctx, p, ids, 2, 256, 1, 3) == FAT5_ERR_INVALID_ARG && td_err_has(T, "width"));
        FAT5_CHECK(T, fat5_tokens_write(ctx, p, ids, 2, 2, 2, 2) == FAT5_ERR_INVALID_ARG && td_err_has(T, "eos"));
    }
}

// The streamed writer: a file appears whole (equal to fat5_tokens_write's) or not at all.
static int td_dir_has_tmp(fat5_test *T) {
    DIR *d = opendir(fat5_test_tmpdir(T));
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)) != NULL) found |= strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return found;
}

static void t_tokens_writer(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const int32_t doc1[] = {5, 6, 7, 1}, doc2[] = {8, 1}, bad[] = {9, 300, 1};
    char pa[TD_PATH_CAP], pb[TD_PATH_CAP];
    fat5_tokens_writer *w = NULL;
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    td_path(T, pa, "streamed.tok");
    td_path(T, pb, "whole.tok");
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_create(ctx, pa, 256, 1, 2, &w));
    FAT5_CHECK(T, !td_file_exists(pa));   // nothing at the path before the commit
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(w, doc1, 2));   // a document in two appends
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(w, doc1 + 2, 2));
    // an id outside the vocabulary: refused, named by its place in the file, nothing kept
    FAT5_CHECK(T, fat5_tokens_writer_append(w, bad, 3) == FAT5_ERR_INVALID_ARG && td_err_has(T, "ids[5] = 300"));
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(w, doc2, 1));
    FAT5_CHECK(T, fat5_tokens_writer_commit(w) == FAT5_ERR_INVALID_ARG && td_err_has(T, "eos"));   // mid-document
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(w, doc2 + 1, 1));
    FAT5_CHECK(T, fat5_tokens_writer_count(w) == 6 && fat5_tokens_writer_doc_count(w) == 2);
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_commit(w));
    FAT5_CHECK(T, fat5_tokens_writer_append(w, doc2, 2) == FAT5_ERR_INVALID_ARG && td_err_has(T, "committed"));
    fat5_tokens_writer_destroy(w);
    {
        static const int32_t all[] = {5, 6, 7, 1, 8, 1};
        FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, pb, all, 6, 256, 1, 2));
    }
    FAT5_REQUIRE_OK(T, fat5_read_file(ctx, pa, 1 << 20, &x, &nx));
    FAT5_REQUIRE_OK(T, fat5_read_file(ctx, pb, 1 << 20, &y, &ny));
    FAT5_CHECK(T, nx == 32 + 6 * 2 && nx == ny && memcmp(x, y, nx) == 0);
    fat5_free(ctx, x);
    fat5_free(ctx, y);
    // destroyed without a commit: no file at the path, no temporary file beside it
    td_path(T, pa, "abandoned.tok");
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_create(ctx, pa, 256, 1, 2, &w));
    FAT5_REQUIRE_OK(T, fat5_tokens_writer_append(w, doc1, 4));
    fat5_tokens_writer_destroy(w);
    FAT5_CHECK(T, !td_file_exists(pa) && !td_dir_has_tmp(T));
    fat5_tokens_writer_destroy(NULL);
    // bad arguments: no writer made
    w = (fat5_tokens_writer *)&w;
    FAT5_CHECK(T, fat5_tokens_writer_create(ctx, pa, 70000, 1, 2, &w) == FAT5_ERR_INVALID_ARG && w == NULL &&
                      td_err_has(T, "use 4"));
    FAT5_CHECK(T, fat5_tokens_writer_create(ctx, pa, 256, 256, 2, &w) == FAT5_ERR_INVALID_ARG && td_err_has(T, "eos"));
    td_path(T, pa, "no-such-dir/x.tok");
    FAT5_CHECK(T, fat5_tokens_writer_create(ctx, pa, 256, 1, 2, &w) == FAT5_ERR_IO && w == NULL && td_err_has(T, pa));
}

// ---------------------------------------------------------------------------------------------
// UL2 sampler

// Checks one batch's packing (budgets, offsets, example lengths) and appends every example's rebuilt
// piece to out (at *n_out, capacity cap), with the piece lengths in plen. Returns 0 on a failure.
static int td_take_batch(fat5_test *T, const fat5_ul2_config *c, const fat5_batch *b, int32_t *out, int64_t *n_out,
                         int64_t cap, int64_t *plen, int *pden, int64_t *n_pieces, int64_t cap_pieces) {
    int64_t s;
    if (b->n_seq < 1 || b->n_enc_tokens > c->enc_tokens || b->n_dec_tokens > c->dec_tokens || b->dec_tokens ||
        b->enc_cu_seqlens[0] != 0 || b->dec_cu_seqlens[0] != 0 || b->enc_cu_seqlens[b->n_seq] != b->n_enc_tokens ||
        b->dec_cu_seqlens[b->n_seq] != b->n_dec_tokens) {
        FAT5_CHECK_MSG(T, 0, "batch of %lld sequences, %lld / %lld tokens: bad packing", (long long)b->n_seq,
                       (long long)b->n_enc_tokens, (long long)b->n_dec_tokens);
        return 0;
    }
    for (s = 0; s < b->n_seq; s++) {
        int64_t e0 = b->enc_cu_seqlens[s], e1 = b->enc_cu_seqlens[s + 1];
        int64_t d0 = b->dec_cu_seqlens[s], d1 = b->dec_cu_seqlens[s + 1], n, spans;
        int den;
        if (e1 - e0 < 1 || e1 - e0 > c->max_enc_len || d1 - d0 < 2 || d1 - d0 > c->max_dec_len ||
            *n_out + (e1 - e0) + (d1 - d0) > cap || *n_pieces >= cap_pieces) {
            FAT5_CHECK_MSG(T, 0, "sequence %lld: %lld input, %lld target ids", (long long)s, (long long)(e1 - e0),
                           (long long)(d1 - d0));
            return 0;
        }
        n = td_rebuild(T, c, b->enc_tokens + e0, e1 - e0, b->labels + d0, d1 - d0, out + *n_out, &den, &spans);
        if (n < 0) return 0;
        *n_out += n;
        plen[*n_pieces] = n;
        pden[*n_pieces] = den;
        (*n_pieces)++;
    }
    return 1;
}

// The stream over one epoch rebuilds the corpus: the pieces, filled back from inputs and targets,
// concatenate to the corpus's ids (eos removed) in order, each piece inside one document and, unless
// it ends its document, as long as its denoiser's piece length. Long documents, one-id documents
// and empty documents included; batches small enough that examples are carried.
static void t_ul2_rebuild_epoch(fat5_test *T) {
    fat5_ul2_config c = td_config();
    td_corpus k;
    fat5_tokens *src = NULL;
    fat5_ul2 *s = NULL;
    fat5_batch b = {0};
    int32_t *got = NULL;
    int64_t *plen = NULL, n_got = 0, n_pieces = 0, cap, i, p, at, bad_piece = -1, ends_ok = 1, n_batches = 0;
    int *pden = NULL;
    uint8_t *doc_end = NULL;
    FAT5_REQUIRE(T, td_make_corpus(&k, 400, 0, 300, 77));
    k.ids[k.n - 2] = TD_EOS;   // the last document ends early: an empty document follows it
    k.n_content--;
    cap = k.n_content + 4096;
    got = (int32_t *)malloc((size_t)cap * sizeof(int32_t));
    plen = (int64_t *)malloc((size_t)cap * sizeof(int64_t));
    pden = (int *)malloc((size_t)cap * sizeof(int));
    doc_end = (uint8_t *)calloc((size_t)k.n_content + 1, 1);
    if (!got || !plen || !pden || !doc_end) goto done;
    for (i = 0, at = 0; i < k.n; i++) {   // doc_end[x]: a document ends after x content ids
        if (k.ids[i] == TD_EOS) doc_end[at] = 1;
        else at++;
    }
    if (td_open_corpus(T, &k, "c.tok", 2, &src) != FAT5_OK || fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    while (n_got < k.n_content) {   // one epoch, and the rest of the batch that ends it
        if (fat5_ul2_next_batch(s, &b) != FAT5_OK || !td_take_batch(T, &c, &b, got, &n_got, cap, plen, pden,
                                                                   &n_pieces, cap))
            goto done;
        n_batches++;
    }
    FAT5_CHECK(T, fat5_ul2_epoch(s) == 1);
    for (i = 0, at = 0; i < k.n && at < k.n_content; i++)
        if (k.ids[i] != TD_EOS && k.ids[i] != got[at++]) break;
    FAT5_CHECK_MSG(T, at == k.n_content, "rebuilt ids differ from the corpus at %lld", (long long)at);
    // what follows is the second epoch, from the first document on
    for (i = 0, at = k.n_content; i < k.n && at < n_got; i++)
        if (k.ids[i] != TD_EOS && k.ids[i] != got[at++]) break;
    FAT5_CHECK_MSG(T, at == n_got, "the second epoch starts elsewhere (%lld)", (long long)(at - k.n_content));
    for (p = 0, at = 0; p < n_pieces && at < k.n_content; p++) {
        int64_t x;
        for (x = at + 1; x < at + plen[p]; x++)
            if (doc_end[x]) bad_piece = p;
        at += plen[p];
        if (at <= k.n_content && !doc_end[at] && plen[p] != s->piece_len[pden[p]]) ends_ok = 0;
    }
    FAT5_CHECK_MSG(T, at == k.n_content, "the first epoch's pieces end at %lld, not at the corpus's end %lld",
                   (long long)at, (long long)k.n_content);
    FAT5_CHECK_MSG(T, bad_piece < 0, "piece %lld crosses a document boundary", (long long)bad_piece);
    FAT5_CHECK_MSG(T, ends_ok, "a piece that does not end its document is shorter than its denoiser's piece length");
    FAT5_CHECK_MSG(T, n_pieces > n_batches, "%lld pieces in %lld batches: nothing packed", (long long)n_pieces,
                   (long long)n_batches);
done:
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    free(k.ids);
    free(got);
    free(plen);
    free(pden);
    free(doc_end);
}

// Splits of one input / target pair into its kept runs and noise runs (T5's layout: kept_0,
// noise_0, kept_1, ...); *k gets the run count. Assumes no mode token.
static void td_runs(const fat5_ul2_config *c, const int32_t *in, int64_t ni, const int32_t *tg, int64_t nt,
                    int64_t *kept, int64_t *noise, int64_t *k) {
    int64_t i, run = 0, n = 0;
    for (i = 0; i < ni - 1; i++) {
        if (td_is_sentinel(c, in[i])) {
            kept[n++] = run;
            run = 0;
        } else {
            run++;
        }
    }
    *k = n;
    n = -1;
    for (i = 0; i < nt - 1; i++) {
        if (td_is_sentinel(c, tg[i])) noise[++n] = 0;
        else if (n >= 0) noise[n]++;
    }
}

// round half to even, written apart from the library's (the oracle)
static double td_round(double x) {
    double r = floor(x + 0.5);
    if (r - x == 0.5 && fmod(r, 2.0) != 0) r -= 1;
    return r;
}

// Each SPAN denoiser of FAT5's mixture alone, on N documents of exactly L = 400 ids (each one piece):
//   - every example has noise = round(L r) and spans = round(noise / mu) (caps do not bind here):
//     so the corruption rate is round(L r) / L, within 0.5 / L of r, and the mean noise-span length
//     is noise / spans, within 0.5 noise / (spans (spans - 1/2)) of mu -- both exact, checked as such;
//   - the runs are T5's random segmentation: n ids into k positive runs, all C(n-1, k-1) splits
//     equally likely. The first run's length X then has mean n / k and variance
//     (n - k) n (k - 1) / (k^2 (k + 1)) (X - 1 is a Bose-Einstein occupancy of n - k balls in k
//     boxes). Over N = 1500 examples the sample mean must lie within 5 standard errors
//     (5 sqrt(var / N); a false failure has probability < 1e-6), and the sample variance within 30%
//     of var: its relative standard error is sqrt((kurtosis - 1) / N) <= sqrt(8 / 1500) = 0.073 for
//     these geometric-like tails (kurtosis <= 9), so 0.3 is more than 4 standard errors. An equal
//     split (variance 0) or cuts that are not uniform fail it. Checked for the noise and kept runs.
static void t_ul2_span_stats(fat5_test *T) {
    const int64_t N = 1500, L = 400;
    fat5_ul2_config base = fat5_ul2_config_default(), c;
    td_corpus k;
    fat5_tokens *src = NULL;
    int d, i;
    int64_t *kept = NULL, *noise = NULL;
    FAT5_REQUIRE(T, td_make_corpus(&k, N, L, L, 99));
    kept = (int64_t *)malloc(512 * sizeof(int64_t));
    noise = (int64_t *)malloc(512 * sizeof(int64_t));
    if (!kept || !noise || td_open_corpus(T, &k, "s.tok", 2, &src) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    for (d = 0; d < base.n_denoisers; d++) {
        const fat5_denoiser *dn = &base.denoisers[d];
        fat5_ul2 *s = NULL;
        int64_t want_noise = (int64_t)td_round((double)L * dn->r), want_k, ex = 0, tot_noise = 0, tot_spans = 0;
        double sum[2] = {0, 0}, sum2[2] = {0, 0};
        int bad = 0;
        if (dn->kind != FAT5_DENOISE_SPAN) continue;
        want_k = (int64_t)td_round((double)want_noise / dn->mu);
        if (want_k < 1) want_k = 1;
        c = base;
        c.n_denoisers = 1;
        c.denoisers[0] = *dn;
        c.sentinel_first = TD_SENT_FIRST;
        c.n_sentinels = TD_N_SENT;
        c.seed = 42 + (uint64_t)d;
        if (fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "denoiser %d: %s", d, fat5_last_error(fat5_test_ctx(T)));
            continue;
        }
        while (ex < N && !bad) {
            fat5_batch b = {0};
            int64_t q;
            if (fat5_ul2_next_batch(s, &b) != FAT5_OK) { bad = 1; break; }
            for (q = 0; q < b.n_seq && ex < N; q++, ex++) {
                int64_t e0 = b.enc_cu_seqlens[q], d0 = b.dec_cu_seqlens[q], nk, j, nn = 0, kk = 0;
                td_runs(&c, b.enc_tokens + e0, b.enc_cu_seqlens[q + 1] - e0, b.labels + d0,
                        b.dec_cu_seqlens[q + 1] - d0, kept, noise, &nk);
                for (j = 0; j < nk; j++) {
                    nn += noise[j];
                    kk += kept[j];
                    if (noise[j] < 1 || kept[j] < 1) bad = 2;
                }
                if (nk != want_k || nn != want_noise || kk != L - want_noise) bad = 3;
                tot_noise += nn;
                tot_spans += nk;
                sum[0] += (double)noise[0];
                sum2[0] += (double)noise[0] * (double)noise[0];
                sum[1] += (double)kept[0];
                sum2[1] += (double)kept[0] * (double)kept[0];
            }
        }
        FAT5_CHECK_MSG(T, !bad, "denoiser %d (mu %g, r %g): example %lld: bad runs (%d), want %lld noise ids in "
                       "%lld spans", d, dn->mu, dn->r, (long long)ex, bad, (long long)want_noise, (long long)want_k);
        if (!bad) {
            double rate = (double)tot_noise / (double)(ex * L), span = (double)tot_noise / (double)tot_spans;
            FAT5_CHECK_MSG(T, fabs(rate - dn->r) <= 0.5 / (double)L, "denoiser %d: corruption rate %.5f, r %g", d,
                           rate, dn->r);
            FAT5_CHECK_MSG(T, fabs(span - (double)want_noise / (double)want_k) < 1e-12 &&
                           fabs(span - dn->mu) <= 0.5 * span / ((double)want_k - 0.5),
                           "denoiser %d: mean noise span %.4f, mu %g", d, span, dn->mu);
            for (i = 0; i < 2; i++) {
                double n = (double)(i == 0 ? want_noise : L - want_noise), kk = (double)want_k;
                double var = (n - kk) * n * (kk - 1) / (kk * kk * (kk + 1)), mean = sum[i] / (double)N;
                double svar = (sum2[i] - (double)N * mean * mean) / (double)(N - 1);
                FAT5_CHECK_MSG(T, fabs(mean - n / kk) <= 5 * sqrt(var / (double)N) + 1e-9,
                               "denoiser %d: first %s run: mean %.4f, want %.4f +- %.4f", d, i ? "kept" : "noise", mean,
                               n / kk, 5 * sqrt(var / (double)N));
                FAT5_CHECK_MSG(T, var == 0 ? svar < 1e-9 : fabs(svar / var - 1) <= 0.3,
                               "denoiser %d: first %s run: variance %.3f, want %.3f", d, i ? "kept" : "noise", svar, var);
            }
        }
        fat5_ul2_destroy(s);
    }
done:
    fat5_tokens_destroy(src);
    free(k.ids);
    free(kept);
    free(noise);
}

// PREFIX alone on documents of L = 11 ids: the split point P (input length minus the eos) must be
// uniform on 1..10. Pearson's chi-square over N = 5000 examples, 10 cells of 500 expected, 9
// degrees of freedom: the 0.999 quantile is 27.88 (a false failure has probability 0.001; with
// the fixed seed the outcome is fixed). A split always in the middle, FAT5's fixed 25 %, or an
// off-by-one range (P = 0 or L) all fail it.
static void t_ul2_prefix_uniform(fat5_test *T) {
    const int64_t N = 5000, L = 11;
    fat5_ul2_config c = td_config();
    td_corpus k;
    fat5_tokens *src = NULL;
    fat5_ul2 *s = NULL;
    int64_t count[16], ex = 0, q, bad = 0;
    double chi2 = 0, expect = (double)N / (double)(L - 1);
    memset(count, 0, sizeof count);
    FAT5_REQUIRE(T, td_make_corpus(&k, N, L, L, 3));
    c.n_denoisers = 1;
    c.denoisers[0] = fat5_ul2_config_default().denoisers[2];
    FAT5_CHECK(T, c.denoisers[0].kind == FAT5_DENOISE_PREFIX);
    if (td_open_corpus(T, &k, "p.tok", 2, &src) != FAT5_OK || fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    while (ex < N) {
        fat5_batch b = {0};
        if (fat5_ul2_next_batch(s, &b) != FAT5_OK) break;
        for (q = 0; q < b.n_seq && ex < N; q++, ex++) {
            int64_t ni = b.enc_cu_seqlens[q + 1] - b.enc_cu_seqlens[q], nt = b.dec_cu_seqlens[q + 1] - b.dec_cu_seqlens[q];
            int64_t P = ni - 1;   // without the eos (no mode token in this config)
            if (P < 0 || P > L || ni + nt != L + 2) bad++;
            else count[P]++;
        }
    }
    FAT5_CHECK_MSG(T, ex == N && bad == 0, "%lld examples, %lld malformed", (long long)ex, (long long)bad);
    FAT5_CHECK_MSG(T, count[0] == 0 && count[L] == 0, "split at 0 (%lld) or at L (%lld): a side is empty",
                   (long long)count[0], (long long)count[L]);
    for (q = 1; q < L; q++) chi2 += ((double)count[q] - expect) * ((double)count[q] - expect) / expect;
    FAT5_CHECK_MSG(T, chi2 < 27.88, "chi-square %.2f over 9 degrees of freedom >= 27.88 (p < 0.001)", chi2);
done:
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    free(k.ids);
}

// Only 3 sentinels, documents of 200 ids and R 3/.15: 30 noise ids would make 10 spans, the cap
// makes 3, and they must be sentinel_first, sentinel_first - 1, sentinel_first - 2 in both input
// and target (td_rebuild checks the order). Then the smallest pieces, whose examples are fixed:
// one id is one span of noise, two ids are one kept and one noise id.
static void t_ul2_sentinels(fat5_test *T) {
    fat5_ul2_config c = td_config();
    static const int32_t small[] = {7, 1, 8, 9, 1};
    static const int32_t want_in[] = {TD_SENT_FIRST, TD_EOS, 8, TD_SENT_FIRST, TD_EOS};
    static const int32_t want_tg[] = {TD_SENT_FIRST, 7, TD_EOS, TD_SENT_FIRST, 9, TD_EOS};
    static const int32_t want_cu_e[] = {0, 2, 5}, want_cu_d[] = {0, 3, 6};
    char p[TD_PATH_CAP];
    const char *paths[1];
    td_corpus k;
    fat5_tokens *src = NULL, *src2 = NULL;
    fat5_ul2 *s = NULL;
    fat5_batch b = {0};
    int32_t piece[1024];
    int64_t q, spans, ex = 0, n_cap = 0;
    int den;
    FAT5_REQUIRE(T, td_make_corpus(&k, 20, 200, 200, 11));
    c.n_denoisers = 1;
    c.denoisers[0] = fat5_ul2_config_default().denoisers[0];
    c.n_sentinels = 3;
    c.max_enc_len = c.max_dec_len = 512;
    c.enc_tokens = c.dec_tokens = 1024;
    if (td_open_corpus(T, &k, "c.tok", 2, &src) != FAT5_OK || fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    while (ex < 20) {
        if (fat5_ul2_next_batch(s, &b) != FAT5_OK) break;
        for (q = 0; q < b.n_seq && ex < 20; q++, ex++) {
            int64_t e0 = b.enc_cu_seqlens[q], d0 = b.dec_cu_seqlens[q];
            int64_t n = td_rebuild(T, &c, b.enc_tokens + e0, b.enc_cu_seqlens[q + 1] - e0, b.labels + d0,
                                   b.dec_cu_seqlens[q + 1] - d0, piece, &den, &spans);
            FAT5_CHECK(T, n == 200 && den == -1);
            n_cap += spans == 3;
        }
    }
    FAT5_CHECK_MSG(T, ex == 20 && n_cap == 20, "%lld of %lld examples have the 3 spans the cap allows",
                   (long long)n_cap, (long long)ex);
    fat5_ul2_destroy(s);
    s = NULL;
    td_path(T, p, "small.tok");
    paths[0] = p;
    FAT5_REQUIRE_OK(T, fat5_tokens_write(fat5_test_ctx(T), p, small, 5, TD_V, TD_EOS, 2));
    FAT5_REQUIRE_OK(T, fat5_tokens_load(fat5_test_ctx(T), paths, 1, &src2));
    c.denoisers[0].mode_token = -1;
    c.enc_tokens = c.max_enc_len = 5;
    c.dec_tokens = c.max_dec_len = 6;
    FAT5_REQUIRE_OK(T, fat5_ul2_create(fat5_test_ctx(T), &c, src2, &s));
    FAT5_REQUIRE_OK(T, fat5_ul2_next_batch(s, &b));
    FAT5_CHECK(T, b.n_seq == 2 && b.n_enc_tokens == 5 && b.n_dec_tokens == 6);
    if (b.n_seq == 2 && b.n_enc_tokens == 5 && b.n_dec_tokens == 6) {
        FAT5_CHECK(T, memcmp(b.enc_tokens, want_in, sizeof want_in) == 0);
        FAT5_CHECK(T, memcmp(b.labels, want_tg, sizeof want_tg) == 0);
        FAT5_CHECK(T, memcmp(b.enc_cu_seqlens, want_cu_e, sizeof want_cu_e) == 0);
        FAT5_CHECK(T, memcmp(b.dec_cu_seqlens, want_cu_d, sizeof want_cu_d) == 0);
    }
done:
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    fat5_tokens_destroy(src2);
    free(k.ids);
}

// FAT5's mixture with a mode token per denoiser: over N = 6000 examples on short documents (one
// piece each), denoiser d is drawn with probability w_d; its count must lie within 5 binomial
// standard deviations sqrt(N w (1 - w)) of N w (false failure < 1e-6 per denoiser).
static void t_ul2_mixture(fat5_test *T) {
    const int64_t N = 6000;
    fat5_ul2_config c = td_config();
    td_corpus k;
    fat5_tokens *src = NULL;
    fat5_ul2 *s = NULL;
    int64_t count[FAT5_UL2_MAX_DENOISERS], ex = 0, q;
    int32_t piece[128];
    int d;
    memset(count, 0, sizeof count);
    FAT5_REQUIRE(T, td_make_corpus(&k, N, 5, 40, 8));
    if (td_open_corpus(T, &k, "m.tok", 2, &src) != FAT5_OK || fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    while (ex < N) {
        fat5_batch b = {0};
        if (fat5_ul2_next_batch(s, &b) != FAT5_OK) break;
        for (q = 0; q < b.n_seq && ex < N; q++, ex++) {
            int64_t e0 = b.enc_cu_seqlens[q], d0 = b.dec_cu_seqlens[q], spans;
            int den = -1;
            int64_t n = td_rebuild(T, &c, b.enc_tokens + e0, b.enc_cu_seqlens[q + 1] - e0, b.labels + d0,
                                   b.dec_cu_seqlens[q + 1] - d0, piece, &den, &spans);
            if (n < 0 || den < 0) break;
            count[den]++;
            // the kind matches the mode token: PREFIX has no sentinel, SPAN at least one
            FAT5_CHECK(T, (c.denoisers[den].kind == FAT5_DENOISE_SPAN) == (spans > 0));
        }
    }
    FAT5_CHECK(T, ex == N);
    for (d = 0; d < c.n_denoisers; d++) {
        double w = c.denoisers[d].weight, sd = sqrt((double)N * w * (1 - w));
        FAT5_CHECK_MSG(T, fabs((double)count[d] - (double)N * w) <= 5 * sd, "denoiser %d: %lld of %lld, want %.0f +- %.0f",
                       d, (long long)count[d], (long long)N, (double)N * w, 5 * sd);
    }
done:
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    free(k.ids);
}

// Same seed: the same bytes, batch after batch; another seed: another stream.
static int td_batch_eq(const fat5_batch *a, const fat5_batch *b) {
    return a->n_seq == b->n_seq && a->n_enc_tokens == b->n_enc_tokens && a->n_dec_tokens == b->n_dec_tokens &&
           memcmp(a->enc_tokens, b->enc_tokens, (size_t)a->n_enc_tokens * 4) == 0 &&
           memcmp(a->labels, b->labels, (size_t)a->n_dec_tokens * 4) == 0 &&
           memcmp(a->enc_cu_seqlens, b->enc_cu_seqlens, (size_t)(a->n_seq + 1) * 4) == 0 &&
           memcmp(a->dec_cu_seqlens, b->dec_cu_seqlens, (size_t)(a->n_seq + 1) * 4) == 0;
}

static void t_ul2_determinism(fat5_test *T) {
    fat5_ul2_config c = td_config();
    td_corpus k;
    fat5_tokens *src = NULL;
    fat5_ul2 *a = NULL, *b = NULL, *x = NULL;
    int i, same = 1, differ = 0;
    FAT5_REQUIRE(T, td_make_corpus(&k, 50, 0, 200, 21));
    if (td_open_corpus(T, &k, "d.tok", 2, &src) != FAT5_OK || fat5_ul2_create(fat5_test_ctx(T), &c, src, &a) != FAT5_OK ||
        fat5_ul2_create(fat5_test_ctx(T), &c, src, &b) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    c.seed++;
    if (fat5_ul2_create(fat5_test_ctx(T), &c, src, &x) != FAT5_OK) goto done;
    for (i = 0; i < 60; i++) {   // more than an epoch
        fat5_batch ba, bb, bx;
        if (fat5_ul2_next_batch(a, &ba) != FAT5_OK || fat5_ul2_next_batch(b, &bb) != FAT5_OK ||
            fat5_ul2_next_batch(x, &bx) != FAT5_OK) {
            same = 0;
            break;
        }
        same &= td_batch_eq(&ba, &bb);
        differ |= !td_batch_eq(&ba, &bx);
    }
    FAT5_CHECK_MSG(T, same, "two samplers with one seed differ at batch %d", i);
    FAT5_CHECK(T, differ);
    FAT5_CHECK(T, fat5_ul2_epoch(a) >= 1 && fat5_ul2_epoch(a) == fat5_ul2_epoch(b));
done:
    fat5_ul2_destroy(a);
    fat5_ul2_destroy(b);
    fat5_ul2_destroy(x);
    fat5_ul2_destroy(NULL);
    fat5_tokens_destroy(src);
    free(k.ids);
}

// get_state in the middle of the stream (a carried example pending, a long document half used),
// then set_state on a fresh sampler: the next batches are the same bytes as the original's. Then
// malformed and foreign states are refused and leave the sampler as it was.
static void t_ul2_state(fat5_test *T) {
    fat5_ul2_config c = td_config();
    td_corpus k;
    fat5_tokens *src = NULL;
    fat5_ul2 *a = NULL, *b = NULL;
    char st[FAT5_UL2_STATE_CAP], st2[FAT5_UL2_STATE_CAP], small[8];
    int i, j, same = 1, mid_doc = 0, carried = 0;
    static const char *bad[] = {
        "", "ul2v2:1:2:0:0:0:0:5", "ul2v1:1234:0:0:0:0:0", "ul2v1:1234:0:0:0:0:0:12:",
        "ul2v1:1234:x:0:0:0:0:12", "ul2v1:1234:0:0:0:0:0:99999999999999999999999",
        "ul2v1:1234:0:0:0:0:0:-1", "ul2v1:1234:0:0:0:0:0:011", " ul2v1:1234:0:0:0:0:0:12"
    };
    FAT5_REQUIRE(T, td_make_corpus(&k, 40, 0, 400, 31));
    if (td_open_corpus(T, &k, "st.tok", 4, &src) != FAT5_OK || fat5_ul2_create(fat5_test_ctx(T), &c, src, &a) != FAT5_OK ||
        fat5_ul2_create(fat5_test_ctx(T), &c, src, &b) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "setup: %s", fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    for (j = 0; j < 25; j++) {   // several cut points, each checked over the next 8 batches
        fat5_batch ba, bb;
        if (fat5_ul2_get_state(a, st, sizeof st) != FAT5_OK || fat5_ul2_set_state(b, st) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "state %s: %s", st, fat5_last_error(fat5_test_ctx(T)));
            goto done;
        }
        carried += a->has_pend;
        mid_doc += (a->has_pend ? a->pend_from.off : a->cur.off) > 0;
        for (i = 0; i < 8; i++) {
            if (fat5_ul2_next_batch(a, &ba) != FAT5_OK || fat5_ul2_next_batch(b, &bb) != FAT5_OK) goto done;
            same &= td_batch_eq(&ba, &bb);
        }
        // b runs on alone, then is put back where a is
        for (i = 0; i < 3; i++) FAT5_CHECK(T, fat5_ul2_next_batch(b, &bb) == FAT5_OK);
    }
    FAT5_CHECK(T, same);
    FAT5_CHECK_MSG(T, mid_doc > 0 && carried > 0, "states mid-document %d, with a carried example %d", mid_doc,
                   carried);
    FAT5_CHECK(T, fat5_ul2_get_state(a, small, sizeof small) == FAT5_ERR_INVALID_ARG);
    FAT5_REQUIRE_OK(T, fat5_ul2_get_state(a, st, sizeof st));
    for (i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        FAT5_CHECK_MSG(T, fat5_ul2_set_state(a, bad[i]) == FAT5_ERR_FORMAT, "state \"%s\" accepted", bad[i]);
        FAT5_CHECK_MSG(T, td_err_has(T, "ul2 state"), "state \"%s\": %s", bad[i], fat5_last_error(fat5_test_ctx(T)));
    }
    {   // well formed, but not a position of this corpus: a wrong length, a document start that is
        // not one, an offset past the document's end
        char foreign[FAT5_UL2_STATE_CAP];
        long long n = (long long)k.n;
        int64_t first_len = 0;
        while (k.ids[first_len] != TD_EOS) first_len++;
        snprintf(foreign, sizeof foreign, "ul2v1:1:0:0:0:0:0:%lld", n + 1);
        FAT5_CHECK(T, fat5_ul2_set_state(a, foreign) == FAT5_ERR_FORMAT && td_err_has(T, "stream of"));
        snprintf(foreign, sizeof foreign, "ul2v1:1:0:0:1:%lld:0:%lld", (long long)first_len + 2, n);
        FAT5_CHECK(T, first_len == 0 || k.ids[first_len + 1] == TD_EOS ||
                      (fat5_ul2_set_state(a, foreign) == FAT5_ERR_FORMAT && td_err_has(T, "start a document")));
        snprintf(foreign, sizeof foreign, "ul2v1:1:0:0:0:0:%lld:%lld", (long long)first_len + 1, n);
        FAT5_CHECK(T, fat5_ul2_set_state(a, foreign) == FAT5_ERR_FORMAT);
        snprintf(foreign, sizeof foreign, "ul2v1:1:0:0:%lld:0:0:%lld", (long long)k.n_docs, n);
        FAT5_CHECK(T, fat5_ul2_set_state(a, foreign) == FAT5_ERR_FORMAT && td_err_has(T, "outside"));
        // this sampler's own position, drawn with another seed: another run's stream
        {
            const char *rest = strchr(st + 6, ':');
            unsigned long long seed = strtoull(st + 6, NULL, 10);
            FAT5_REQUIRE(T, rest != NULL);
            snprintf(foreign, sizeof foreign, "ul2v1:%llu%s", seed + 1, rest);
            FAT5_CHECK_MSG(T, fat5_ul2_set_state(a, foreign) == FAT5_ERR_FORMAT && td_err_has(T, "seed"), "%s: %s",
                           foreign, fat5_last_error(fat5_test_ctx(T)));
        }
    }
    FAT5_REQUIRE_OK(T, fat5_ul2_get_state(a, st2, sizeof st2));
    FAT5_CHECK_MSG(T, strcmp(st, st2) == 0, "a refused state changed the sampler: %s -> %s", st, st2);
done:
    fat5_ul2_destroy(a);
    fat5_ul2_destroy(b);
    fat5_tokens_destroy(src);
    free(k.ids);
}

// split 1 and split 2 over one epoch each: every document lands in exactly one of them (its ids
// are told apart: document i uses only ids 3 + 7i .. 9 + 7i), and together they are the corpus.
static void t_ul2_splits(fat5_test *T) {
    const int64_t D = 120;
    fat5_ul2_config c = td_config();
    td_corpus k;
    fat5_tokens *src = NULL;
    fat5_ul2 *s = NULL;
    int64_t seen[2][120], i, j, in_eval = 0;
    int32_t *got = NULL;
    int64_t *plen = NULL;
    int *pden = NULL;
    int sp, ok = 1;
    (void)i;
    fat5_rng r = fat5_rng_init(5);
    memset(seen, 0, sizeof seen);
    k.ids = (int32_t *)malloc((size_t)D * 61 * sizeof(int32_t));
    got = (int32_t *)malloc((size_t)D * 61 * sizeof(int32_t));
    plen = (int64_t *)malloc((size_t)D * 61 * sizeof(int64_t));
    pden = (int *)malloc((size_t)D * 61 * sizeof(int));
    if (!k.ids || !got || !plen || !pden) goto done;
    k.n = k.n_content = 0;
    k.n_docs = D;
    for (i = 0; i < D; i++) {
        int64_t len = 1 + (int64_t)fat5_rng_below(&r, 60);
        for (j = 0; j < len; j++) k.ids[k.n++] = 3 + 7 * (int32_t)i + (int32_t)fat5_rng_below(&r, 7);
        k.ids[k.n++] = TD_EOS;
        k.n_content += len;
    }
    if (td_open_corpus(T, &k, "split.tok", 2, &src) != FAT5_OK) goto done;
    c.eval_fraction = 0.25;
    for (sp = 1; sp <= 2; sp++) {
        int64_t n_got = 0, n_pieces = 0;
        c.split = sp;
        if (fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "split %d: %s", sp, fat5_last_error(fat5_test_ctx(T)));
            goto done;
        }
        // every document fits one piece, so each example is a whole document: the epoch ends
        // where a document comes again
        int guard = 0;
        while (ok && guard++ < 10000) {
            fat5_batch b = {0};
            int64_t at = n_got, first = n_pieces, p, done_epoch = 0;
            ok = fat5_ul2_next_batch(s, &b) == FAT5_OK &&
                 td_take_batch(T, &c, &b, got, &n_got, D * 61, plen, pden, &n_pieces, D * 61);
            for (p = first; p < n_pieces && ok; p++) {
                int64_t doc = (got[at] - 3) / 7;
                if (doc < 0 || doc >= D || seen[sp - 1][doc]) { done_epoch = 1; break; }
                for (j = 0; j < plen[p]; j++) ok &= (got[at + j] - 3) / 7 == doc;
                seen[sp - 1][doc] = plen[p];
                at += plen[p];
            }
            if (done_epoch) break;
            n_got = 0;
            n_pieces = 0;
        }
        FAT5_CHECK_MSG(T, ok, "split %d: an example mixes documents", sp);
        fat5_ul2_destroy(s);
        s = NULL;
    }
    for (i = 0, j = 0; i < k.n; j++) {   // document j spans len ids
        int64_t len = 0;
        while (k.ids[i + len] != TD_EOS) len++;
        i += len + 1;
        in_eval += seen[1][j] > 0;
        FAT5_CHECK_MSG(T, (seen[0][j] == len && seen[1][j] == 0) || (seen[0][j] == 0 && seen[1][j] == len),
                       "document %lld (%lld ids): %lld in train, %lld held out", (long long)j, (long long)len,
                       (long long)seen[0][j], (long long)seen[1][j]);
    }
    // 120 documents at 0.25: the held-out count is Binomial(120, .25), 30 +- 4.7; within 5 sd
    FAT5_CHECK_MSG(T, in_eval >= 7 && in_eval <= 53, "%lld of 120 documents held out at 0.25", (long long)in_eval);
    // a split with no documents is an error
    c.split = 2;
    c.eval_fraction = 0;
    FAT5_CHECK(T, fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) == FAT5_ERR_INVALID_ARG && s == NULL &&
                  td_err_has(T, "held-out split is empty"));
    c.split = 1;
    c.eval_fraction = 1;
    FAT5_CHECK(T, fat5_ul2_create(fat5_test_ctx(T), &c, src, &s) == FAT5_ERR_INVALID_ARG && td_err_has(T, "training split"));
done:
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    free(k.ids);
    free(got);
    free(plen);
    free(pden);
}

// Each bad config is refused with a message naming the field; nothing is created.
static void t_ul2_config_errors(fat5_test *T) {
    static const int32_t ids[] = {5, 6, 7, 8, 9, 10, 11, 12, 1, 13, 1};
    static const int32_t only_eos[] = {1, 1};
    char p[TD_PATH_CAP], q[TD_PATH_CAP];
    const char *paths[1];
    fat5_tokens *src = NULL, *empty = NULL;
    fat5_ul2 *s = NULL;
    fat5_ul2_config c;
    fat5_ctx *ctx = fat5_test_ctx(T);
    td_path(T, p, "e.tok");
    td_path(T, q, "only_eos.tok");
    FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, p, ids, 11, TD_V, TD_EOS, 2));
    FAT5_REQUIRE_OK(T, fat5_tokens_write(ctx, q, only_eos, 2, TD_V, TD_EOS, 2));
    paths[0] = p;
    FAT5_REQUIRE_OK(T, fat5_tokens_load(ctx, paths, 1, &src));
    paths[0] = q;
    FAT5_REQUIRE_OK(T, fat5_tokens_load(ctx, paths, 1, &empty));
    FAT5_REQUIRE_OK(T, fat5_ul2_create(ctx, (c = td_config(), &c), src, &s));   // the base is good
    fat5_ul2_destroy(s);
    s = NULL;
#define TD_BAD(edit, word) do { \
        c = td_config(); edit; \
        FAT5_CHECK_MSG(T, fat5_ul2_create(ctx, &c, src, &s) == FAT5_ERR_INVALID_ARG && s == NULL && td_err_has(T, word), \
                       "%s: %s", #edit, fat5_last_error(ctx)); \
        fat5_ul2_destroy(s); s = NULL; } while (0)
    TD_BAD(c.n_denoisers = 0, "n_denoisers");
    TD_BAD(c.n_denoisers = FAT5_UL2_MAX_DENOISERS + 1, "n_denoisers");
    TD_BAD(c.denoisers[1].weight = 0, "weight");
    TD_BAD(c.denoisers[1].weight = -1, "weight");
    TD_BAD(c.denoisers[1].weight = NAN, "weight");
    TD_BAD(c.denoisers[1].weight = INFINITY, "weight");
    TD_BAD(c.denoisers[0].mu = 0, "mu");
    TD_BAD(c.denoisers[0].mu = NAN, "mu");
    TD_BAD(c.denoisers[0].r = 0, "corruption rate");
    TD_BAD(c.denoisers[0].r = 1, "corruption rate");
    TD_BAD(c.denoisers[0].r = NAN, "corruption rate");
    TD_BAD(c.denoisers[0].kind = (fat5_denoiser_kind)7, "kind");
    TD_BAD(c.denoisers[3].mode_token = TD_V, "mode token");
    TD_BAD(c.denoisers[3].mode_token = -2, "mode token");
    TD_BAD(c.denoisers[3].mode_token = TD_EOS, "eos");
    TD_BAD(c.denoisers[3].mode_token = TD_SENT_FIRST - 5, "sentinel");
    TD_BAD(c.n_sentinels = 0, "n_sentinels");
    TD_BAD(c.sentinel_first = TD_V, "sentinels");
    TD_BAD((c.sentinel_first = 50, c.n_sentinels = 60), "not inside the vocabulary");
    TD_BAD((c.sentinel_first = 10, c.n_sentinels = 10), "eos id 1 is inside the sentinels");
    TD_BAD(c.enc_tokens = 0, "budgets");
    TD_BAD(c.max_enc_len = c.enc_tokens + 1, "max_enc_len");
    TD_BAD(c.split = 3, "split");
    TD_BAD(c.eval_fraction = 1.5, "eval_fraction");
    TD_BAD(c.eval_fraction = NAN, "eval_fraction");
    // budgets too small for one example of two ids: span corruption needs 4 input ids with a mode
    // token (M A S eos) and 3 target ids (S N eos)
    TD_BAD(c.max_enc_len = 3, "too small");
    TD_BAD(c.max_dec_len = 2, "too small");
    c = td_config();
    c.max_enc_len = 4;
    c.max_dec_len = 3;
    c.n_denoisers = 1;
    FAT5_CHECK_MSG(T, fat5_ul2_create(ctx, &c, src, &s) == FAT5_OK, "the smallest budget: %s", fat5_last_error(ctx));
    if (s) {   // every example then holds a piece of two ids (one of one id at a document's end)
        fat5_batch b = {0};
        FAT5_CHECK(T, fat5_ul2_next_batch(s, &b) == FAT5_OK && b.n_enc_tokens <= c.enc_tokens);
        FAT5_CHECK(T, s->piece_len[0] == 2);
    }
    fat5_ul2_destroy(s);
    s = NULL;
    c = td_config();
    FAT5_CHECK(T, fat5_ul2_create(ctx, &c, empty, &s) == FAT5_ERR_INVALID_ARG && td_err_has(T, "empty corpus"));
    FAT5_CHECK(T, fat5_ul2_create(ctx, &c, NULL, &s) == FAT5_ERR_INVALID_ARG);
    // the default configs themselves: FAT5's mixture and T5's, once the sentinels are set
    c = fat5_ul2_config_default();
    FAT5_CHECK(T, fat5_ul2_create(ctx, &c, src, &s) == FAT5_ERR_INVALID_ARG && td_err_has(T, "n_sentinels"));
    c.sentinel_first = TD_SENT_FIRST;
    c.n_sentinels = TD_N_SENT;
    FAT5_CHECK(T, fat5_ul2_create(ctx, &c, src, &s) == FAT5_OK);
    fat5_ul2_destroy(s);
    s = NULL;
    c = fat5_ul2_config_t5();
    c.sentinel_first = TD_SENT_FIRST;
    c.n_sentinels = TD_N_SENT;
    FAT5_CHECK(T, fat5_ul2_create(ctx, &c, src, &s) == FAT5_OK);
    if (s) FAT5_CHECK_MSG(T, s->piece_len[0] == 568, "T5's piece length %lld, want 568 (512 + 114)",
                          (long long)s->piece_len[0]);
#undef TD_BAD
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    fat5_tokens_destroy(empty);
}

// FAT5's piece lengths for 512 / 512 with a mode token, as its collator computes them (the
// reference spec lists 565, 585, 762, 597, 1000 for the SPAN denoisers with a 3-token prefix;
// with a 1-token mode the input has 2 more ids of room). Computed here by brute force: the largest
// L whose input and target both fit, the lengths counted from the layout.
static void t_ul2_piece_lengths(fat5_test *T) {
    fat5_ul2_config c = fat5_ul2_config_default();
    int d;
    c.sentinel_first = TD_SENT_FIRST;
    c.n_sentinels = TD_N_SENT;
    for (d = 0; d < c.n_denoisers; d++) {
        const fat5_denoiser *dn = &c.denoisers[d];
        int64_t L, best = 0, got;
        for (L = 1; L < 3000; L++) {
            int64_t in, tg;
            if (dn->kind == FAT5_DENOISE_PREFIX) {
                in = 1 + (L - 1) + 1;   // the longest input: mode, L - 1 ids, eos
                tg = L;                 // the longest target: L - 1 ids, eos
            } else {
                double nz = td_round((double)L * dn->r), k;
                if (nz > (double)(L - 1)) nz = (double)(L - 1);
                if (nz < 1) nz = 1;
                k = td_round(nz / dn->mu);
                if (k > TD_N_SENT) k = TD_N_SENT;   // X 3/.5 would want 127 spans
                if (k < 1) k = 1;
                in = 1 + L - (int64_t)nz + (int64_t)k + 1;
                tg = (int64_t)nz + (int64_t)k + 1;
            }
            if (in <= 512 && tg <= 512) best = L;
        }
        c.denoisers[d].mode_token = 900;
        got = fat5__ul2_piece_len(&c, &c.denoisers[d]);
        FAT5_CHECK_MSG(T, got == best, "denoiser %d: piece length %lld, want %lld", d, (long long)got, (long long)best);
    }
    // the spec's numbers for R 3/.15 with 3 prefix ids: 565 (input 512 = 3 + 565 - 85 + 28 + 1)
    c.max_enc_len = 512 - 2;
    c.denoisers[0].mode_token = 900;
    FAT5_CHECK(T, fat5__ul2_piece_len(&c, &c.denoisers[0]) == 565);
}

#define FAT5_TESTS_DATA(X) \
    X(tokens_roundtrip) X(tokens_writer) X(tokens_bad_files) X(ul2_rebuild_epoch) X(ul2_span_stats) X(ul2_prefix_uniform) \
    X(ul2_sentinels) X(ul2_mixture) X(ul2_determinism) X(ul2_state) X(ul2_splits) X(ul2_config_errors) \
    X(ul2_piece_lengths)
