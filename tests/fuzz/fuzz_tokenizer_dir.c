// libFuzzer target: tokenizer directories (fat5_tokenizer_load of a directory). The input is the
// directory's entries separated by FUZZ_FILE_SPLIT, each a byte that picks its name and kind
// (fuzz_tokdir_names: a regular file, a directory or a FIFO) followed by the file's bytes; a name
// given twice keeps its first entry. fat5_tokenizer_load must take the first of tokenizer.json,
// spiece.model and tokenizer.model that is there (the others are not read): no candidate, or one
// that is not a regular file, is an error; a file loads exactly when fat5_tokenizer_from_memory
// loads its bytes, to the same tokenizer (vocabulary size, special ids, the ids of a few texts).
// A tokenizer that loads tokenizes texts (the input's own bytes among them) to ids of its
// vocabulary and decodes them.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const texts[] = {"Hello world", "  a\t b  \xc3\xa9\xe2\x80\x8d\xf0\x9f\x98\x80 <extra_id_0>x",
                                    "\xff\xc3\x28", ""};

// Tokenizes one text: 0 ok, 1 refused as tokenizers refuses it (a Unigram model without unk_id and
// a character it lacks); anything else aborts. *ids (free) and *n get the ids.
static int encode(fat5_tokenizer *tok, const char *s, size_t n, int pair, int32_t **ids, int64_t *m) {
    fat5_status st = fat5_tokenize(tok, s, n, pair ? "pair" : NULL, pair ? 4 : 0, 0, ids, m);
    if (st == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(fuzz_ctx()), "no unk_id")) return 1;
    if (st != FAT5_OK) fuzz_die("tokenize failed");
    return 0;
}

// The same tokenizer: sizes, special ids and the ids of the fixed texts.
static void check_same(fat5_tokenizer *a, fat5_tokenizer *b) {
    size_t i;
    if (fat5_tokenizer_vocab_size(a) != fat5_tokenizer_vocab_size(b) ||
        fat5_tokenizer_eos_id(a) != fat5_tokenizer_eos_id(b) || fat5_tokenizer_pad_id(a) != fat5_tokenizer_pad_id(b))
        fuzz_die("the directory's tokenizer differs from its file's");
    for (i = 0; i < 4; i++) {
        int32_t *x = NULL, *y = NULL;
        int64_t nx = 0, ny = 0;
        int rx = encode(a, texts[i], strlen(texts[i]), 0, &x, &nx);
        int ry = encode(b, texts[i], strlen(texts[i]), 0, &y, &ny);
        if (rx != ry || nx != ny || (nx && memcmp(x, y, (size_t)nx * sizeof *x) != 0))
            fuzz_die("the directory's tokenizer gives other ids than its file's");
        fat5_free(fuzz_ctx(), x);
        fat5_free(fuzz_ctx(), y);
    }
}

// Tokenizes the fixed texts and a piece of the input, and decodes the ids.
static void exercise(fat5_tokenizer *tok, const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    size_t i;
    for (i = 0; i < 5; i++) {
        const char *s = i < 4 ? texts[i] : (const char *)data;
        size_t n = i < 4 ? strlen(texts[i]) : (size < 256 ? size : 256);
        int32_t *ids = NULL;
        int64_t m = 0, k;
        char *out = NULL;
        size_t ol = 0;
        if (encode(tok, s, n, i == 1, &ids, &m)) continue;
        for (k = 0; k < m; k++)
            if (ids[k] < 0 || ids[k] >= fat5_tokenizer_vocab_size(tok)) fuzz_die("an id outside the vocabulary");
        if (fat5_detokenize(tok, ids, m, (int)(i & 1) * FAT5_DETOKENIZE_SKIP_SPECIAL, &out, &ol) != FAT5_OK)
            fuzz_die("decode of its own ids failed");
        if (!out || out[ol] != 0) fuzz_die("decode not terminated");
        fat5_free(ctx, ids);
        fat5_free(ctx, out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    char dir[1024], path[1200];
    const uint8_t *part[8], *p;
    size_t len[8], pos = 0, plen;
    int kind[8], i, first = -1;
    fat5_tokenizer *tok = NULL, *ref = NULL;
    fat5_status st, want;
    fuzz_path(dir, sizeof dir, "tok");
    fuzz_rmtree(dir);
    if (mkdir(dir, 0755) != 0) fuzz_die("mkdir");
    for (i = 0; i < 8; i++) kind[i] = -1;
    while ((p = fuzz_next_part(data, size, FUZZ_FILE_SPLIT, &pos, &plen)) != NULL) {
        int name, k;
        if (plen < 1) continue;
        name = p[0] & 7;
        k = (p[0] >> 3) & 3;
        if (kind[name] >= 0) continue;   // the first entry of a name wins
        kind[name] = k < 2 ? 0 : k - 1;  // 0 file, 1 directory, 2 FIFO
        part[name] = p + 1;
        len[name] = plen - 1;
        snprintf(path, sizeof path, "%s/%s", dir, fuzz_tokdir_names[name]);
        if (kind[name] == 0) fuzz_write(path, p + 1, plen - 1);
        else if (kind[name] == 1 ? mkdir(path, 0755) != 0 : mkfifo(path, 0644) != 0) fuzz_die("mkdir/mkfifo");
    }
    for (i = 0; i < 3 && first < 0; i++)
        if (kind[i] >= 0) first = i;
    st = fat5_tokenizer_load(ctx, dir, &tok);
    if ((st == FAT5_OK) != (tok != NULL)) fuzz_die("status and tokenizer disagree");
    if (first < 0 || kind[first] != 0) {
        if (st == FAT5_OK) fuzz_die("a directory without a tokenizer file loaded");
        return 0;
    }
    want = fat5_tokenizer_from_memory(ctx, part[first], len[first], first == 0, &ref);
    if ((st == FAT5_OK) != (want == FAT5_OK)) fuzz_die("the directory and its file load differently");
    if (tok) {
        check_same(tok, ref);
        exercise(tok, part[first], len[first]);
    }
    fat5_tokenizer_destroy(ref);
    fat5_tokenizer_destroy(tok);
    return 0;
}
