// Tokenizers against the libraries they mirror: tests/data/tokenizers/cases.json holds, for 89
// texts in many scripts (and invalid UTF-8), the ids and texts that `tokenizers` and
// `sentencepiece` give on the fixture models (made by ref/make_tokenizers.py); real.json the
// same for the published T5 / mT5 files, checked when FAT5_REAL_TOKENIZERS names their directory
// (ref/make_tokenizers.py --real-dir DIR lays it out).

#define FAT5_TESTS_TOKENIZER(X) X(tokenizer_parity) X(tokenizer_parity_real) X(tokenizer_bad_files) \
    X(tokenizer_api) X(tokenizer_batch) X(tokenizer_edge_cases) X(tokenizer_dir_fifo) X(tokenizer_long_pieces) \
    X(tokenizer_automata_cut) X(tokenizer_long_texts) X(tokenizer_offsets) \
    X(tokenizer_unigram_ties)

static int tk_hard;   // tk_check_entry: automata forced, parts of one byte (tokenizer_automata_cut)

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

// the ids of a JSON array to out (at most cap), their count
static int64_t tk_ids(const fat5__json *arr, int32_t *out, int64_t cap) {
    const fat5__json *x;
    int64_t n = 0, v;
    for (x = arr->child; x && n < cap; x = x->next) {
        fat5__json_as_i64(x, &v);
        out[n++] = (int32_t)v;
    }
    return n;
}

// decodes ids with special tokens skipped and kept against the two expected texts (hex); returns
// the number of mismatches
static int tk_check_decode(fat5_test *T, fat5_tokenizer *tok, const char *what, const int32_t *ids, int64_t n,
                           const char *want_skip, const char *want_keep, char *buf) {
    int w, bad = 0;
    for (w = 0; w < 2; w++) {
        char *out = NULL;
        size_t ol = 0, wl = tk_unhex(w ? want_keep : want_skip, buf);
        if (fat5_detokenize(tok, ids, n, w ? 0 : FAT5_DETOKENIZE_SKIP_SPECIAL, &out, &ol) || ol != wl ||
            memcmp(out, buf, wl) != 0) {
            FAT5_CHECK_MSG(T, 0, "%s: decode%s differs: got '%s' want '%s'", what, w ? " (special kept)" : "",
                           out ? out : fat5_last_error(fat5_test_ctx(T)), buf);
            tk_print_ids("ids", ids, n);
            bad++;
        }
        fat5_free(fat5_test_ctx(T), out);
    }
    return bad;
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
    if (tk_hard) {   // every key search through an automaton, and texts cut wherever they may be
        FAT5_CHECK_MSG(T, fat5__tok_automata(tok, 1) == FAT5_OK, "%s: %s", file, fat5_last_error(ctx));
        tok->chunk = 1;
    }
    enc = fat5__json_get(ent, "encode");
    encp = fat5__json_get(ent, "encode_plain");
    dec = fat5__json_get(ent, "decode");
    decs = fat5__json_get(ent, "decode_special");
    for (k = 0, tx = texts->child; tx; tx = tx->next, k++) {
        size_t n = tk_unhex(tx->str, buf);
        int32_t *ids = NULL, *plain = NULL;
        int64_t m = 0, mp = 0;
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
        {   // decode of the library's ids, special tokens skipped or kept
            int32_t lib[4096];
            int64_t nl = tk_ids(we, lib, 4096);
            char what[256];
            snprintf(what, sizeof what, "%s text %d", path->str, k);
            bad += tk_check_decode(T, tok, what, lib, nl, wd->str, ws->str, buf2);
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
        int32_t lib[4096];
        int64_t nl = tk_ids(e->child, lib, 4096);
        char what[256];
        snprintf(what, sizeof what, "%s decode_ids", path->str);
        bad += tk_check_decode(T, tok, what, lib, nl, e->child->next->str, e->child->next->next->str, buf2);
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
    if (!dir || !dir[0]) FAT5_SKIP(T, "FAT5_REAL_TOKENIZERS is not set (ref/make_tokenizers.py --real-dir DIR)");
    tk_check_file(T, "tests/data/tokenizers/real.json", dir);
}

// a JSON tokenizer from text: the status, and the message must hold want
static void tk_bad_json(fat5_test *T, const char *json, fat5_status want_st, const char *want) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer *tok = NULL;
    fat5_status st = fat5_tokenizer_from_memory(ctx, json, strlen(json), 1, &tok);
    FAT5_CHECK_MSG(T, st == want_st && !tok && strstr(fat5_last_error(ctx), want),
                   "%s -> %s '%s' (want %s, '%s')", json, fat5_status_string(st), fat5_last_error(ctx),
                   fat5_status_string(want_st), want);
    fat5_tokenizer_destroy(tok);
}

// loads a (damaged) file; when it loads, it must tokenize and decode without fault
static void tk_load_any(fat5_test *T, const char *data, size_t len, int is_json) {
    static const char *texts[] = {"Hello world", " a  b\t\xc3\xa9\xe2\x80\x8d\xf0\x9f\x98\x80 ", "\xff\xc3", ""};
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer *tok = NULL;
    fat5_status st = fat5_tokenizer_from_memory(ctx, data, len, is_json, &tok);
    size_t i;
    if (st != FAT5_OK) {
        FAT5_CHECK_MSG(T, (st == FAT5_ERR_FORMAT || st == FAT5_ERR_UNSUPPORTED) && fat5_last_error(ctx)[0] && !tok,
                       "a damaged file: %s '%s'", fat5_status_string(st), fat5_last_error(ctx));
        return;
    }
    for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        char *out = NULL;
        if (fat5_tokenize(tok, texts[i], strlen(texts[i]), NULL, 0, 0, &ids, &n) == FAT5_OK) {
            fat5_status d = fat5_detokenize(tok, ids, n, 0, &out, NULL);
            FAT5_CHECK_MSG(T, d == FAT5_OK, "decode of its own ids: %s", fat5_last_error(ctx));
        }
        fat5_free(ctx, ids);
        fat5_free(ctx, out);
    }
    fat5_tokenizer_destroy(tok);
}

// A directory whose tokenizer.json is a FIFO: refused at once, naming it (the candidates are looked
// up, not opened: opening a FIFO blocks until a writer comes, so an alarm bounds the call).
static void t_tokenizer_dir_fifo(fat5_test *T) {
#ifdef _WIN32
    FAT5_SKIP(T, "no FIFOs");
#else
    char dir[1024], fifo[1100];
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer *tok = NULL;
    struct sigaction sa, old;
    fat5_status st;
    snprintf(dir, sizeof dir, "%s/tokdir", fat5_test_tmpdir(T));
    snprintf(fifo, sizeof fifo, "%s/tokenizer.json", dir);
    FAT5_REQUIRE(T, mkdir(dir, 0755) == 0 && mkfifo(fifo, 0600) == 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tio_on_alarm;   // test_io.c's: it only interrupts the call
    sigemptyset(&sa.sa_mask);
    FAT5_REQUIRE(T, sigaction(SIGALRM, &sa, &old) == 0);
    alarm(5);
    st = fat5_tokenizer_load(ctx, dir, &tok);
    alarm(0);
    sigaction(SIGALRM, &old, NULL);
    FAT5_CHECK_MSG(T, st == FAT5_ERR_IO && tok == NULL && strstr(fat5_last_error(ctx), "tokenizer.json") &&
                          strstr(fat5_last_error(ctx), "not a regular file"),
                   "%s: %s", fat5_status_string(st), fat5_last_error(ctx));
#endif
}

static void t_tokenizer_bad_files(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char *spm = NULL, *js = NULL;
    size_t spm_len = 0, js_len = 0, cut;
    uint64_t r = 88172645463325252ull;
    int i;
    // tokenizer.json: a missing model, unknown types (named), bad members
    tk_bad_json(T, "{}", FAT5_ERR_FORMAT, "no \"model\"");
    tk_bad_json(T, "[1, 2]", FAT5_ERR_FORMAT, "not a JSON object");
    tk_bad_json(T, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", FAT5_ERR_UNSUPPORTED, "unsupported: model type WordPiece");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"BertNormalizer\"}}",
                FAT5_ERR_UNSUPPORTED, "unsupported: BertNormalizer");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"pre_tokenizer\": {\"type\": \"Digits\"}}",
                FAT5_ERR_UNSUPPORTED, "unsupported: Digits");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"decoder\": {\"type\": \"CTC\"}}",
                FAT5_ERR_UNSUPPORTED, "unsupported: CTC");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"post_processor\": {\"type\": \"BertProcessing\"}}",
                FAT5_ERR_UNSUPPORTED, "unsupported: post_processor BertProcessing");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"Replace\", "
                "\"pattern\": {\"Regex\": \"[a-z]+\"}, \"content\": \"x\"}}", FAT5_ERR_UNSUPPORTED, "unsupported: Replace regex");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"zero\"]]}}", FAT5_ERR_FORMAT, "model.vocab[0] must be [piece, score]");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]], \"unk_id\": 5}}", FAT5_ERR_FORMAT, "'unk_id' must be an integer in 0 .. 0");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"Precompiled\", "
                "\"precompiled_charsmap\": \"####\"}}", FAT5_ERR_FORMAT, "not base64");
    tk_bad_json(T, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}", FAT5_ERR_FORMAT,
                "model.merges[0]: the merged piece is not in the vocabulary");
    tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"truncation\": {\"max_length\": 8}}",
                FAT5_ERR_UNSUPPORTED, "unsupported: truncation");
    // a SentencePiece ModelProto: wrong wire types name the field; not a model at all
    {
        static const unsigned char bad_score[] = {0x0a, 0x05, 0x0a, 0x01, 'a', 0x10, 0x01};   // pieces[0].score as a varint
        static const unsigned char trunc[] = {0x0a, 0x09, 0x0a, 0x01};                        // a length past the end
        fat5_tokenizer *tok = NULL;
        FAT5_CHECK(T, fat5_tokenizer_from_memory(ctx, bad_score, sizeof bad_score, 0, &tok) == FAT5_ERR_FORMAT &&
                          strstr(fat5_last_error(ctx), "pieces[0]") && strstr(fat5_last_error(ctx), "expected fixed32"));
        FAT5_CHECK(T, fat5_tokenizer_from_memory(ctx, trunc, sizeof trunc, 0, &tok) == FAT5_ERR_FORMAT &&
                          strstr(fat5_last_error(ctx), "length past the end"));
        FAT5_CHECK(T, fat5_tokenizer_from_memory(ctx, "hello", 5, 0, &tok) == FAT5_ERR_FORMAT && !tok);
        FAT5_CHECK(T, fat5_tokenizer_load(ctx, "tests/data/tokenizers/nonexistent", &tok) == FAT5_ERR_IO && !tok);
    }
    // every prefix (in steps) and random byte flips of two real files: a clear error or a tokenizer that works
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, "tests/data/tokenizers/mt5bf/spiece.model", (size_t)1 << 24, &spm, &spm_len));
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, "tests/data/tokenizers/bytebpe/tokenizer.json", (size_t)1 << 24, &js, &js_len));
    for (cut = 0; cut < spm_len; cut += 61) tk_load_any(T, spm, cut, 0);
    for (cut = 0; cut < js_len; cut += 997) tk_load_any(T, js, cut, 1);
    for (i = 0; i < 300; i++) {
        size_t at;
        unsigned char old;
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        at = (size_t)(r % spm_len);
        old = (unsigned char)spm[at];
        spm[at] = (char)(old ^ (1u << (r >> 40 & 7)));
        tk_load_any(T, spm, spm_len, 0);
        spm[at] = (char)old;
    }
    fat5__free(ctx, spm);
    fat5__free(ctx, js);
}

static void t_tokenizer_api(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer *js = NULL, *sp = NULL;
    int32_t *ids = NULL, bad = 5000;
    int64_t n = 0;
    char *text = NULL;
    size_t len = 0;
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, "tests/data/tokenizers/t5uni", &js));   // the directory: tokenizer.json
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, "tests/data/tokenizers/t5uni/spiece.model", &sp));
    FAT5_CHECK(T, fat5_tokenizer_vocab_size(js) == 1100 && fat5_tokenizer_vocab_size(sp) == 1000);   // 100 sentinels
    FAT5_CHECK(T, fat5_tokenizer_eos_id(js) == 1 && fat5_tokenizer_eos_id(sp) == 1);
    FAT5_CHECK(T, fat5_tokenizer_pad_id(js) == 0 && fat5_tokenizer_pad_id(sp) == 0);
    FAT5_CHECK(T, fat5_tokenizer_piece_to_id(js, "<extra_id_0>") == 1099 && fat5_tokenizer_piece_to_id(sp, "<unk>") == 2);
    FAT5_CHECK(T, fat5_tokenizer_id_to_piece(js, 1099) && strcmp(fat5_tokenizer_id_to_piece(js, 1099), "<extra_id_0>") == 0);
    FAT5_CHECK(T, fat5_tokenizer_id_to_piece(js, 1100) == NULL && fat5_tokenizer_id_to_piece(sp, -1) == NULL);
    FAT5_CHECK(T, fat5_tokenizer_piece_to_id(sp, "no such piece") == -1);
    // single_word's word characters: regex's \w (Alphabetic, marks, Nd, Pc, Join_Control)
    FAT5_CHECK(T, fat5__uc_is_word('a') && fat5__uc_is_word('_') && fat5__uc_is_word(0x0301) && fat5__uc_is_word(0x0660) &&
                      fat5__uc_is_word(0x200D) && fat5__uc_is_word(0x2160) && !fat5__uc_is_word('-') &&
                      !fat5__uc_is_word(0x00BD) && !fat5__uc_is_word(' '));
    // an empty text is EOS alone (with the post-processor) or nothing
    FAT5_REQUIRE_OK(T, fat5_tokenize(js, "", 0, NULL, 0, 0, &ids, &n));
    FAT5_CHECK(T, n == 1 && ids[0] == 1);
    fat5_free(ctx, ids);
    FAT5_REQUIRE_OK(T, fat5_tokenize(sp, "", 0, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &n));
    FAT5_CHECK(T, n == 0 && ids != NULL);
    fat5_free(ctx, ids);
    // a round trip of plain text, and a sentinel kept or skipped
    FAT5_REQUIRE_OK(T, fat5_tokenize(js, "The cat sat <extra_id_0>.", 25, NULL, 0, 0, &ids, &n));
    FAT5_REQUIRE_OK(T, fat5_detokenize(js, ids, n, FAT5_DETOKENIZE_SKIP_SPECIAL, &text, &len));
    FAT5_CHECK_MSG(T, strcmp(text, "The cat sat .") == 0 && len == strlen(text), "got '%s'", text);
    fat5_free(ctx, text);
    FAT5_REQUIRE_OK(T, fat5_detokenize(js, ids, n, 0, &text, &len));
    // as tokenizers decodes it: the text after the sentinel was its own segment, with its own U+2581
    FAT5_CHECK_MSG(T, strcmp(text, "The cat sat<extra_id_0> .</s>") == 0, "got '%s'", text);
    fat5_free(ctx, text);
    fat5_free(ctx, ids);
    // errors: ids outside the vocabulary, NULL arguments
    FAT5_CHECK(T, fat5_detokenize(sp, &bad, 1, 0, &text, &len) == FAT5_ERR_INVALID_ARG && text == NULL &&
                      strstr(fat5_last_error(ctx), "outside the vocabulary"));
    FAT5_CHECK(T, fat5_tokenize(sp, NULL, 3, NULL, 0, 0, &ids, &n) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_tokenize(NULL, "a", 1, NULL, 0, 0, &ids, &n) == FAT5_ERR_INVALID_ARG);
    fat5_tokenizer_destroy(js);
    {   // a Unigram model without unk_id fails on a character no piece covers, as tokenizers does
        static const char uni[] = "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", -1.0], [\"ab\", -1.5]]}}";
        FAT5_REQUIRE_OK(T, fat5_tokenizer_from_memory(ctx, uni, sizeof uni - 1, 1, &js));
        FAT5_REQUIRE_OK(T, fat5_tokenize(js, "aab", 3, NULL, 0, 0, &ids, &n));
        FAT5_CHECK(T, n == 2 && ids[0] == 0 && ids[1] == 1);
        fat5_free(ctx, ids);
        FAT5_CHECK(T, fat5_tokenize(js, "ba", 2, NULL, 0, 0, &ids, &n) == FAT5_ERR_INVALID_ARG && ids == NULL &&
                          strstr(fat5_last_error(ctx), "no unk_id"));
        fat5_tokenizer_destroy(js);
    }
    FAT5_CHECK(T, fat5_tokenizer_load(ctx, NULL, &js) == FAT5_ERR_INVALID_ARG && js == NULL);
    fat5_tokenizer_destroy(NULL);
    fat5_tokenizer_destroy(sp);
}

static void t_tokenizer_batch(fat5_test *T) {
    static const char *in[] = {"translate: a cat", "", "The quick brown fox"}, *tg[] = {"un chat", "x", ""};
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer *tok = NULL;
    fat5_batch b, nb;
    int i;
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, "tests/data/tokenizers/t5uni/spiece.model", &tok));
    FAT5_REQUIRE_OK(T, fat5_batch_from_texts(tok, in, tg, 3, &b));
    FAT5_CHECK(T, b.n_seq == 3 && b.enc_cu_seqlens[0] == 0 && b.dec_cu_seqlens[0] == 0 && b.labels && !b.dec_tokens);
    for (i = 0; i < 3; i++) {   // each row is the text's own tokenization, EOS last
        int w;
        for (w = 0; w < 2; w++) {
            int32_t *ids = NULL;
            int64_t n = 0;
            const int32_t *cu = w ? b.dec_cu_seqlens : b.enc_cu_seqlens, *t = w ? b.labels : b.enc_tokens;
            const char *s = w ? tg[i] : in[i];
            FAT5_REQUIRE_OK(T, fat5_tokenize(tok, s, strlen(s), NULL, 0, 0, &ids, &n));
            FAT5_CHECK(T, cu[i + 1] - cu[i] == n && memcmp(t + cu[i], ids, (size_t)n * sizeof *ids) == 0 && ids[n - 1] == 1);
            fat5_free(ctx, ids);
        }
    }
    FAT5_CHECK(T, b.n_enc_tokens == b.enc_cu_seqlens[3] && b.n_dec_tokens == b.dec_cu_seqlens[3]);
    fat5_batch_destroy(ctx, &b);
    FAT5_REQUIRE_OK(T, fat5_batch_from_texts(tok, in, NULL, 3, &nb));   // inputs only
    FAT5_CHECK(T, nb.n_seq == 3 && !nb.labels && nb.n_dec_tokens == 0 && nb.dec_cu_seqlens[3] == 0);
    fat5_batch_destroy(ctx, &nb);
    FAT5_CHECK(T, fat5_batch_from_texts(tok, in, NULL, -1, &nb) == FAT5_ERR_INVALID_ARG);
    fat5_tokenizer_destroy(tok);
}

// ids of text under a tokenizer given as JSON text, against want (n ids)
static void tk_expect(fat5_test *T, const char *json, const char *text, size_t len, const int32_t *want, int64_t n) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int64_t m = 0;
    FAT5_REQUIRE_OK(T, fat5_tokenizer_from_memory(ctx, json, strlen(json), 1, &tok));
    FAT5_REQUIRE_OK(T, fat5_tokenize(tok, text, len, NULL, 0, 0, &ids, &m));
    FAT5_CHECK_MSG(T, m == n && memcmp(ids, want, (size_t)n * sizeof *ids) == 0, "'%.40s': %lld ids", text, (long long)m);
    if (m != n || memcmp(ids, want, (size_t)n * sizeof *ids) != 0) tk_print_ids("got", ids, m);
    fat5_free(ctx, ids);
    fat5_tokenizer_destroy(tok);
}

// Cases the fixtures do not reach; the expected ids are what tokenizers 0.23.3 gives.
static void t_tokenizer_edge_cases(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char *json = FAT5__CAST(char *, malloc(1 << 16)), text[400];
    size_t k = 0;
    int b;
    // BPE byte fallback with a subword prefix: every byte of "##q" (3 + 2 per later character)
    k += (size_t)sprintf(json + k, "{\"model\": {\"type\": \"BPE\", \"byte_fallback\": true, \"continuing_subword_prefix\": "
                                   "\"##\", \"merges\": [], \"vocab\": {");
    for (b = 0; b < 256; b++) k += (size_t)sprintf(json + k, "\"<0x%02X>\": %d, ", b, b);
    sprintf(json + k, "\"a\": 256}}}");
    {
        static const int32_t want[] = {113, 35, 35, 113, 35, 35, 113};
        tk_expect(T, json, "qqq", 3, want, 7);
    }
    // T5's " {2,}" -> U+2581 on runs longer than any fixed buffer: 65 and 300 spaces are one replacement
    {
        fat5_tokenizer *tok = NULL;
        char *file = NULL;
        size_t len = 0, i, n;
        int32_t *ids = NULL;
        int64_t m = 0;
        static const int32_t want[] = {9, 66, 1};
        FAT5_REQUIRE_OK(T, fat5__read_file(ctx, "tests/data/tokenizers/t5uni/tokenizer.json", (size_t)1 << 24, &file, &len));
        FAT5_REQUIRE_OK(T, fat5_tokenizer_from_memory(ctx, file, len, 1, &tok));
        for (n = 65; n <= 300; n += 235) {
            text[0] = 'a';
            for (i = 1; i <= n; i++) text[i] = ' ';
            text[n + 1] = 'b';
            FAT5_REQUIRE_OK(T, fat5_tokenize(tok, text, n + 2, NULL, 0, 0, &ids, &m));
            FAT5_CHECK_MSG(T, m == 3 && memcmp(ids, want, sizeof want) == 0, "%zu spaces", n);
            fat5_free(ctx, ids);
        }
        fat5_tokenizer_destroy(tok);
        fat5__free(ctx, file);
    }
    // a Replace regex with many quantified atoms runs in linear time (neighbours merge: a*a*...a*b is a*b)
    {
        static const int32_t want[] = {0};
        int i;
        k = (size_t)sprintf(json, "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], [\"x\", -1]]}, "
                                  "\"normalizer\": {\"type\": \"Replace\", \"content\": \"x\", \"pattern\": {\"Regex\": \"");
        for (i = 0; i < 15; i++) k += (size_t)sprintf(json + k, "a*");
        sprintf(json + k, "b\"}}}");
        memset(text, 'a', 300);
        tk_expect(T, json, text, 300, want, 1);   // 300 a's and no b: one unknown run
        tk_bad_json(T, "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0]]}, \"normalizer\": {\"type\": \"Replace\", "
                    "\"pattern\": {\"Regex\": \"a*b*\"}, \"content\": \"x\"}}", FAT5_ERR_UNSUPPORTED, "unsupported: Replace regex");
    }
    // ids far beyond the pieces are refused, not allocated
    tk_bad_json(T, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 16777215}, \"merges\": []}}", FAT5_ERR_FORMAT, "too sparse");
    free(json);
}

// ---------------------------------------------------------------------------------------------
// Long pieces: a model whose pieces are runs of 'a' up to 7,999 bytes costs a trie walk of up to
// 7,999 steps at every position (the old cost: 100 KB of 'a' took 5 s, 1 MB 90 s; sentencepiece
// 0.2.3 takes 27 s a MB, tokenizers 0.23.3 4 min). The expected ids are those two libraries' on
// the same models (ref: the generator's models, rebuilt here byte for byte).

// appends a protobuf varint / a key with its wire type
static size_t tk_pb_varint(unsigned char *b, size_t k, uint64_t v) {
    while (v >= 0x80) {
        b[k++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b[k++] = (unsigned char)v;
    return k;
}
static size_t tk_pb_bytes(unsigned char *b, size_t k, unsigned field, const void *p, size_t n) {
    k = tk_pb_varint(b, k, (uint64_t)field << 3 | 2);
    k = tk_pb_varint(b, k, n);
    memcpy(b + k, p, n);
    return k + n;
}

// The model: <pad> </s> (control), <unk>, "▁" (-2), "b" (-3), a^L for L = 1 .. 8 (-1 - L/4), then
// seven long pieces: user 0: a^L for L = 7993 .. 7999 (-L/200); user 1: a^L b for L = 7992 .. 7998,
// user-defined pieces (SentencePiece) or added tokens (tokenizer.json: not in the Unigram
// vocabulary, ids 13 .. 19). tokenizer.json: Metaspace (always, split), unk_id 2.
static fat5_tokenizer *tk_long_model(fat5_test *T, int json, int user) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    unsigned char *b = FAT5__CAST(unsigned char *, malloc(1 << 18)), *piece = FAT5__CAST(unsigned char *, malloc(8192));
    char *j = FAT5__CAST(char *, b);
    size_t k = 0;
    int i;
    fat5_tokenizer *tok = NULL;
    for (i = 0; i < 20; i++) {
        static const char *head[5] = {"<pad>", "</s>", "<unk>", "\xe2\x96\x81", "b"};
        static const int type[5] = {3, 3, 2, 1, 1};
        size_t n = i < 5 ? strlen(head[i]) : i < 13 ? (size_t)(i - 4) : (size_t)(7980 + i - (user ? 1 : 0));
        double score = i < 3 ? 0 : i == 3 ? -2 : i == 4 ? -3 : i < 13 ? -1 - 0.25 * (double)n : user ? 0 : -0.5 * (double)n / 100;
        if (i < 5) memcpy(piece, head[i], n);
        else memset(piece, 'a', n);
        if (i >= 13 && user) piece[n++] = 'b';
        if (json) {
            if (i >= 13 && user) continue;
            k += (size_t)sprintf(j + k, "%s[\"", i ? ", " : "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 2, \"vocab\": [");
            memcpy(j + k, piece, n);
            k += n;
            k += (size_t)sprintf(j + k, "\", %.17g]", score);
        } else {   // ModelProto.pieces: piece, score (float), type
            unsigned char m[8200];
            size_t mk = tk_pb_bytes(m, 0, 1, piece, n);
            float f = (float)score;
            uint32_t bits;
            int by;
            memcpy(&bits, &f, 4);
            m[mk++] = 2 << 3 | 5;   // fixed32, little-endian
            for (by = 0; by < 4; by++) m[mk++] = (unsigned char)(bits >> (8 * by));
            mk = tk_pb_varint(m, mk, 3 << 3);
            mk = tk_pb_varint(m, mk, (uint64_t)(i >= 13 && user ? 4 : i < 5 ? type[i] : 1));
            k = tk_pb_bytes(b, k, 1, m, mk);
        }
    }
    if (json) {
        k += (size_t)sprintf(j + k, "]}, \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", "
                                    "\"prepend_scheme\": \"always\", \"split\": true}, \"added_tokens\": [");
        for (i = 13; user && i < 20; i++) {
            k += (size_t)sprintf(j + k, "%s{\"id\": %d, \"content\": \"", i > 13 ? ", " : "", i);
            memset(j + k, 'a', (size_t)(7979 + i));
            k += (size_t)(7979 + i);
            k += (size_t)sprintf(j + k, "b\", \"special\": false, \"normalized\": false}");
        }
        k += (size_t)sprintf(j + k, "]}");
    } else {
        static const unsigned char trainer[] = {3 << 3, 1};   // model_type UNIGRAM
        static const unsigned char norm[] = {0x0a, 8, 'i', 'd', 'e', 'n', 't', 'i', 't', 'y', 3 << 3, 1, 4 << 3, 1, 5 << 3, 1};
        k = tk_pb_bytes(b, k, 2, trainer, sizeof trainer);
        k = tk_pb_bytes(b, k, 3, norm, sizeof norm);
    }
    if (fat5_tokenizer_from_memory(ctx, b, k, json, &tok) != FAT5_OK)
        FAT5_CHECK_MSG(T, 0, "long-piece model (json %d, user %d): %s", json, user, fat5_last_error(ctx));
    free(b);
    free(piece);
    return tok;
}

// ids of text against a run-length list (id, count, ..., -1)
static int tk_same_rle(const int32_t *ids, int64_t n, const int *rle) {
    int64_t at = 0;
    for (; rle[0] >= 0; rle += 2) {
        int c;
        for (c = 0; c < rle[1]; c++, at++)
            if (at >= n || ids[at] != rle[0]) return 0;
    }
    return at == n;
}

static void t_tokenizer_long_pieces(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    // texts A: a^100000; B: a^8005 " " a^7999 "baaa " a^16000 " ab"; C: a^50000;
    // D: a^7995 "baaa " a^7992 "bb" a^20. Expected: sentencepiece 0.2.3 (spm), tokenizers 0.23.3
    // (json); C differs between them (float and double sums).
    static const int want[4][4][40] = {
        {{3, 1, 8, 1, 12, 501, 19, 12, -1}, {3, 1, 8, 1, 12, 501, 19, 12, -1}, {3, 1, 12, 12500, -1}, {3, 1, 12, 12500, -1}},
        {{3, 1, 10, 1, 19, 1, 3, 1, 19, 1, 4, 1, 7, 1, 3, 1, 6, 1, 19, 2, 3, 1, 5, 1, 4, 1, -1},
         {3, 1, 10, 1, 19, 1, 3, 1, 19, 1, 4, 1, 7, 1, 3, 1, 6, 1, 19, 2, 3, 1, 5, 1, 4, 1, -1},
         {3, 1, 9, 1, 12, 1000, 3, 1, 5, 1, 19, 1, 7, 1, 3, 1, 12, 2000, 3, 1, 5, 1, 4, 1, -1},
         {3, 1, 9, 1, 12, 1000, 3, 1, 5, 1, 19, 1, 3, 1, 7, 1, 3, 1, 12, 2000, 3, 1, 5, 1, 4, 1, -1}},
        {{3, 1, 10, 1, 12, 250, 19, 6, -1},
         {3, 1, 10, 1, 12, 6, 19, 2, 12, 8, 19, 1, 12, 29, 19, 1, 12, 72, 19, 1, 12, 135, 19, 1, -1},
         {3, 1, 12, 6250, -1}, {3, 1, 12, 6250, -1}},
        {{3, 1, 15, 1, 4, 1, 7, 1, 3, 1, 12, 999, 4, 2, 8, 1, 12, 2, -1}, {3, 1, 15, 1, 4, 1, 7, 1, 3, 1, 12, 999, 4, 2, 8, 1, 12, 2, -1},
         {3, 1, 16, 1, 7, 1, 3, 1, 13, 1, 4, 1, 8, 1, 12, 2, -1}, {16, 1, 3, 1, 7, 1, 3, 1, 13, 1, 3, 1, 4, 1, 8, 1, 12, 2, -1}}};
    char *text = FAT5__CAST(char *, malloc(100000));
    int v, x;
    for (v = 0; v < 4; v++) {   // spm, json, spm with user pieces, json with added tokens
        fat5_tokenizer *tok = tk_long_model(T, v & 1, v >> 1);
        size_t bytes = 0;
        if (!tok) continue;
        FAT5_CHECK(T, v >> 1 ? (v & 1 ? tok->added_rac[0].trie.node : tok->user_rac.trie.node) != NULL : tok->rac.trie.node != NULL);
        tok->work = 0;
        for (x = 0; x < 4; x++) {
            size_t n = 0;
            int32_t *ids = NULL;
            int64_t m = 0;
            if (x == 0 || x == 2) {
                n = x ? 50000 : 100000;
                memset(text, 'a', n);
            } else if (x == 1) {
                memset(text, 'a', 8005), n = 8005;
                text[n++] = ' ';
                memset(text + n, 'a', 7999), n += 7999;
                memcpy(text + n, "baaa ", 5), n += 5;
                memset(text + n, 'a', 16000), n += 16000;
                memcpy(text + n, " ab", 3), n += 3;
            } else {
                memset(text, 'a', 7995), n = 7995;
                memcpy(text + n, "baaa ", 5), n += 5;
                memset(text + n, 'a', 7992), n += 7992;
                memcpy(text + n, "bb", 2), n += 2;
                memset(text + n, 'a', 20), n += 20;
            }
            bytes += n;
            if (fat5_tokenize(tok, text, n, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &m) != FAT5_OK) {
                FAT5_CHECK_MSG(T, 0, "model %d text %d: %s", v, x, fat5_last_error(ctx));
                continue;
            }
            FAT5_CHECK_MSG(T, tk_same_rle(ids, m, want[x][v]), "model %d (%s%s) text %c: ids differ from the library's", v,
                           v & 1 ? "tokenizer.json" : "spiece.model", v >> 1 ? ", long user pieces / added tokens" : "", 'A' + x);
            if (!tk_same_rle(ids, m, want[x][v])) tk_print_ids("got", ids, m);
            fat5_free(ctx, ids);
        }
        // the searches for pieces cost a few steps a byte (a trie walk: up to 7,999)
        FAT5_CHECK_MSG(T, tok->work <= 40 * (uint64_t)bytes, "model %d: %llu steps for %zu bytes", v,
                       (unsigned long long)tok->work, bytes);
        printf("  model %d: %.1f steps a byte\n", v, (double)tok->work / (double)bytes);
        fat5_tokenizer_destroy(tok);
    }
    free(text);
}

// The fixtures' parity (cases.json: the libraries' ids, pairs and decoding) with every search for
// keys made through an automaton (the fixtures' pieces are short: they walk the trie otherwise)
// and texts cut into parts wherever they may be (each sentencepiece lattice at every articulation
// point, each tokenizer.json text at every cut the load allows).
static void t_tokenizer_automata_cut(fat5_test *T) {
    tk_hard = 1;
    tk_check_file(T, "tests/data/tokenizers/cases.json", "tests/data/tokenizers");
    tk_hard = 0;
}

// checks a call returns FAT5_OK (the library's message otherwise) and goes on
#define TK_CHECK_OK(T, call) \
    do { fat5_status s_ = (call); FAT5_CHECK_MSG(T, s_ == FAT5_OK, "%s -> %s: %s", #call, fat5_status_string(s_), \
                                                 fat5_last_error(fat5_test_ctx(T))); } while (0)

// the scratch bytes a tokenizer holds (its buffers' capacities)
static size_t tk_scratch(const fat5_tokenizer *t) {
    return t->lat_cap + t->s0.cap + t->s1.cap + t->s2.cap + t->s3.cap + t->sn.cap +
           4 * (t->o0.cap + t->o1.cap + t->o2.cap + t->o3.cap + t->on.cap + t->ids.cap + t->spl.cap + t->spl2.cap +
                t->ustate.cap + t->nstate.cap);
}

typedef struct tk_sink { int32_t *ids; int64_t n, cap, runs; } tk_sink;
static fat5_status tk_take(void *user, const int32_t *ids, int64_t n) {
    tk_sink *k = (tk_sink *)user;
    if (k->n + n > k->cap) return FAT5_ERR_OUT_OF_MEMORY;
    memcpy(k->ids + k->n, ids, (size_t)n * sizeof *ids);
    k->n += n;
    k->runs++;
    return FAT5_OK;
}

// Long texts are tokenized in parts with the ids of the whole text: for every fixture, a document
// of 150 KB made of the 89 test texts (many scripts, invalid UTF-8, sentinels and user pieces)
// joined by separators (spaces, newlines, "x", added tokens), tokenized whole (one part), in parts
// of the default size and of 61 bytes, and streamed (fat5_tokenize_stream, with and without the
// post-processor); the parts' scratch stays within a bound that does not grow with the text.
static void t_tokenizer_long_texts(fat5_test *T) {
    static const char *files[] = {"tokenizers/t5uni/spiece.model", "tokenizers/t5uni/tokenizer.json", "tokenizers/mt5bf/spiece.model",
                                  "tokenizers/mt5bf/tokenizer.json", "tokenizers/spmbpe/spiece.model", "tokenizers/spmbpe/tokenizer.json",
                                  "tokenizers/bytebpe/tokenizer.json", "tokenizers/uniseq/tokenizer.json", "tokenizers/legacy/tokenizer.json",
                                  "t5_spiece/spiece.model", "t5_spiece/tokenizer.json"};
    static const char *seps[] = {" ", "  ", "\n", "", " x ", "\t", " <extra_id_0> ", "<sep>", " of the ", "   ", " a b c ", "</s>",
                                 "\xe2\x96\x81", " <mask> "};
    fat5_ctx *ctx = fat5_test_ctx(T);
    const size_t doc_len = 150000;
    char *doc = FAT5__CAST(char *, malloc(2 * (doc_len + 4096))), *text = NULL, path[256];
    size_t n = 0, len = 0, f;
    fat5__jdoc *cases = NULL;
    const fat5__json *texts, *e;
    uint64_t r = 0x9E3779B97F4A7C15ull;
    tk_sink sink;
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, "tests/data/tokenizers/cases.json", (size_t)64 << 20, &text, &len));
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "cases.json", text, len, 64, &cases));
    texts = fat5__json_get(fat5__json_root(cases), "texts");
    while (n < doc_len) {
        size_t k, i;
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        for (k = (size_t)(r % texts->n), e = texts->child; k--; e = e->next) {}
        n += tk_unhex(e->str, doc + n);
        i = (size_t)(r >> 32) % (sizeof seps / sizeof seps[0]);
        memcpy(doc + n, seps[i], strlen(seps[i]));
        n += strlen(seps[i]);
    }
    memcpy(doc + n, doc, n);   // the document twice: doc[0 .. 2n)
    sink.cap = 2 * (int64_t)n + 16;
    sink.ids = FAT5__CAST(int32_t *, malloc((size_t)sink.cap * sizeof *sink.ids));
    for (f = 0; f < sizeof files / sizeof files[0]; f++) {
        fat5_tokenizer *tok = NULL;
        int32_t *whole[2] = {NULL, NULL};
        int64_t nw[2] = {0, 0};
        uint64_t cuts61;
        int w, c;
        snprintf(path, sizeof path, "tests/data/%s", files[f]);
        if (fat5_tokenizer_load(ctx, path, &tok) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s: %s", path, fat5_last_error(ctx));
            continue;
        }
        tok->chunk = SIZE_MAX;   // the whole text in one part
        for (w = 0; w < 2; w++) TK_CHECK_OK(T, fat5_tokenize(tok, doc, n, NULL, 0, w ? 0 : FAT5_TOKENIZE_NO_SPECIAL, &whole[w], &nw[w]));
        FAT5_CHECK_MSG(T, tok->cuts == 0, "%s: cut with parts of SIZE_MAX bytes", files[f]);
        for (c = 0; c < 2; c++) {
            int32_t *ids = NULL;
            int64_t m = 0;
            tok->chunk = c ? 61 : FAT5__TOK_CHUNK;
            tok->cuts = 0;
            TK_CHECK_OK(T, fat5_tokenize(tok, doc, n, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &m));
            FAT5_CHECK_MSG(T, m == nw[0] && !memcmp(ids, whole[0], (size_t)m * sizeof *ids), "%s: parts of %zu bytes: ids differ",
                           files[f], tok->chunk);
            FAT5_CHECK_MSG(T, tok->cuts >= (c ? 1000u : 2u), "%s: parts of %zu bytes: only %llu cuts", files[f], tok->chunk,
                           (unsigned long long)tok->cuts);
            fat5_free(ctx, ids);
            for (w = 0; w < 2; w++) {   // streamed, the post-processor's ids around the text's
                sink.n = sink.runs = 0;
                TK_CHECK_OK(T, fat5_tokenize_stream(tok, doc, n, w ? 0 : FAT5_TOKENIZE_NO_SPECIAL, tk_take, &sink));
                FAT5_CHECK_MSG(T, sink.n == nw[w] && !memcmp(sink.ids, whole[w], (size_t)sink.n * sizeof *sink.ids) &&
                                      sink.runs >= 2,
                               "%s: streamed%s, parts of %zu bytes: %lld ids in %lld runs, want %lld", files[f],
                               w ? " with the post-processor" : "", tok->chunk, (long long)sink.n, (long long)sink.runs,
                               (long long)nw[w]);
            }
        }
        cuts61 = tok->cuts;
        fat5_free(ctx, whole[0]);
        fat5_free(ctx, whole[1]);
        fat5_tokenizer_destroy(tok);
        {   // scratch: bounded by the part size, not the text's (whole: 20 to 60 bytes a byte of text):
            // about the same for the document and for it twice, and under 256 parts
            size_t sc[2] = {0, 0};
            int d;
            for (d = 0; d < 2; d++) {
                if (fat5_tokenizer_load(ctx, path, &tok) != FAT5_OK) break;
                tok->chunk = 4096;
                sink.n = 0;
                TK_CHECK_OK(T, fat5_tokenize_stream(tok, doc, d ? 2 * n : n, 0, tk_take, &sink));
                sc[d] = tk_scratch(tok);
                fat5_tokenizer_destroy(tok);
            }
            FAT5_CHECK_MSG(T, sc[0] > 0 && sc[1] <= sc[0] + sc[0] / 4 && sc[1] <= 256 * 4096,
                           "%s: scratch of %zu bytes for %zu bytes of text, %zu for %zu", files[f], sc[0], n, sc[1], 2 * n);
            printf("  %-34s %lld ids, %llu cuts in parts of 61 bytes; scratch %zu / %zu bytes for %zu / %zu bytes\n",
                   files[f], (long long)nw[0], (unsigned long long)cuts61, sc[0], sc[1], n, 2 * n);
        }
    }
    free(sink.ids);
    free(doc);
    fat5__json_free(ctx, cases);
    fat5__free(ctx, text);
}

// ---------------------------------------------------------------------------------------------
// Token spans (fat5_tokenize_offsets) against `tokenizers`' Encoding.offsets, in bytes, and
// `sentencepiece`'s pieces' begin / end: tests/data/tokenizers/offsets.json
// (ref/make_tokenizer_offsets.py) holds, for the seven tokenizer.json fixtures (bytetrim: a
// trimming ByteLevel post-processor), the three spiece.model ones and 118 texts (cases.json's and
// more: spaces, NFKC-changed and composed characters, removed characters, CJK, emoji, added
// tokens, invalid UTF-8), the ids and byte spans those libraries give, and for one text of 70 KB
// (longer than a part) their count and FNV-1a digest, checked in parts of 64 KiB, of 61 bytes and
// whole.

// FNV-1a over id, start, end of each token (8 little-endian bytes each), as the script's
static uint64_t tk_off_digest(const int32_t *ids, const int64_t *off, int64_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    int64_t i;
    int w, b;
    for (i = 0; i < n; i++)
        for (w = 0; w < 3; w++) {
            uint64_t v = (uint64_t)(w == 0 ? (int64_t)ids[i] : off[2 * i + w - 1]);
            for (b = 0; b < 8; b++) h = (h ^ ((v >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
        }
    return h;
}

// the spans of one text: the expected ones, fat5_tokenize's ids, the bounds, and the spans
// without the post-processor as the same spans less the template's; returns 1 when all hold
static int tk_off_case(fat5_test *T, fat5_tokenizer *tok, const char *name, int ti, const char *text, size_t len,
                       const fat5__json *want_ids, const fat5__json *want_off) {
    int32_t *ids = NULL, *ref = NULL, *ids2 = NULL, *ref2 = NULL;
    int64_t *off = NULL, *off2 = NULL, n = 0, nr = 0, n2 = 0, nr2 = 0, i, p;
    const fat5__json *e;
    int ok = 1;
    if (fat5_tokenize_offsets(tok, text, len, 0, &ids, &off, &n) != FAT5_OK ||
        fat5_tokenize(tok, text, len, NULL, 0, 0, &ref, &nr) != FAT5_OK ||
        fat5_tokenize_offsets(tok, text, len, FAT5_TOKENIZE_NO_SPECIAL, &ids2, &off2, &n2) != FAT5_OK ||
        fat5_tokenize(tok, text, len, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ref2, &nr2) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s text %d: %s", name, ti, fat5_last_error(fat5_test_ctx(T)));
        ok = 0;
        goto done;
    }
    FAT5_CHECK_MSG(T, n == nr && !memcmp(ids, ref, (size_t)n * sizeof *ids), "%s text %d: ids differ from fat5_tokenize's", name, ti);
    FAT5_CHECK_MSG(T, n2 == nr2 && !memcmp(ids2, ref2, (size_t)n2 * sizeof *ids2),
                   "%s text %d: ids (no special) differ from fat5_tokenize's", name, ti);
    for (i = 0; i < n; i++)
        if (off[2 * i] < 0 || off[2 * i] > off[2 * i + 1] || off[2 * i + 1] > (int64_t)len) {
            FAT5_CHECK_MSG(T, 0, "%s text %d: token %lld span (%lld, %lld) outside [0, %zu]", name, ti, (long long)i,
                           (long long)off[2 * i], (long long)off[2 * i + 1], len);
            ok = 0;
            break;
        }
    for (p = 0; p + n2 <= n; p++)   // without the template: a window of the spans with it
        if (!memcmp(ids + p, ids2, (size_t)n2 * sizeof *ids) && !memcmp(off + 2 * p, off2, (size_t)n2 * 2 * sizeof *off)) break;
    FAT5_CHECK_MSG(T, p + n2 <= n && n - n2 <= 2, "%s text %d: the spans without the post-processor are not those with it", name, ti);
    if (!tk_same_ids(want_ids, ids, n)) {
        FAT5_CHECK_MSG(T, 0, "%s text %d: ids differ from tokenizers'", name, ti);
        ok = 0;
    } else if (want_off->type != FAT5__J_ARRAY || (int64_t)want_off->n != 2 * n) {
        FAT5_CHECK_MSG(T, 0, "%s text %d: %zu span values, want %lld", name, ti, want_off->n, (long long)(2 * n));
        ok = 0;
    } else {
        for (e = want_off->child, i = 0; e; e = e->next, i++) {
            int64_t v = -1;
            fat5__json_as_i64(e, &v);
            if (v != off[i]) {
                FAT5_CHECK_MSG(T, 0, "%s text %d token %lld (id %d): span (%lld, %lld), tokenizers gives %s %lld", name, ti,
                               (long long)(i / 2), (int)ids[i / 2], (long long)off[i & ~(int64_t)1],
                               (long long)off[i | 1], i & 1 ? "end" : "start", (long long)v);
                ok = 0;
                break;
            }
        }
    }
done:
    fat5_free(fat5_test_ctx(T), ids);
    fat5_free(fat5_test_ctx(T), off);
    fat5_free(fat5_test_ctx(T), ref);
    fat5_free(fat5_test_ctx(T), ids2);
    fat5_free(fat5_test_ctx(T), off2);
    fat5_free(fat5_test_ctx(T), ref2);
    return ok;
}

static void t_tokenizer_offsets(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char *json = NULL, *buf = NULL, *lng = NULL, path[256];
    size_t len = 0, nl = 0, lb;
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *texts, *ent, *e;
    fat5_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int64_t *off = NULL, n = 0, k;
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, "tests/data/tokenizers/offsets.json", (size_t)16 << 20, &json, &len));
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "offsets.json", json, len, 64, &doc));
    root = fat5__json_root(doc);
    texts = fat5__json_get(root, "texts");
    FAT5_CHECK(T, texts && texts->n >= 100);
    fat5__json_as_i64(fat5__json_get(fat5__json_get(root, "meta"), "long_bytes"), &k);
    lb = (size_t)k;
    buf = FAT5__CAST(char *, malloc(len));
    lng = FAT5__CAST(char *, malloc(lb + len));
    while (nl < lb)   // the long text's recipe: the texts in order, each followed by a space
        for (e = texts->child; e && nl < lb; e = e->next) {
            size_t m = tk_unhex(e->str, buf);
            memcpy(lng + nl, buf, m);
            nl += m;
            lng[nl++] = ' ';
        }
    for (ent = fat5__json_get(root, "tokenizers")->child; ent; ent = ent->next) {
        const char *name = fat5__json_get(ent, "path")->str;
        const fat5__json *wi = fat5__json_get(ent, "ids")->child, *wo = fat5__json_get(ent, "offsets")->child;
        int ti = 0, good = 0;
        int64_t wn = -1;
        snprintf(path, sizeof path, "tests/data/tokenizers/%s", name);
        if (fat5_tokenizer_load(ctx, path, &tok) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s: %s", path, fat5_last_error(ctx));
            continue;
        }
        for (e = texts->child; e && wi && wo; e = e->next, wi = wi->next, wo = wo->next, ti++) {
            size_t m = tk_unhex(e->str, buf);
            good += tk_off_case(T, tok, name, ti, buf, m, wi, wo);
        }
        FAT5_CHECK_MSG(T, ti == (int)texts->n, "%s: %d texts with expectations, want %zu", name, ti, texts->n);
        {   // the long text: in parts of the default size, of 61 bytes, whole
            const fat5__json *lj = fat5__json_get(ent, "long");
            uint64_t want = strtoull(fat5__json_get(lj, "fnv1a")->str, NULL, 16), got[3] = {0, 0, 0};
            int64_t nn[3] = {0, 0, 0};
            size_t chunks[3] = {FAT5__TOK_CHUNK, 61, SIZE_MAX};
            int c;
            fat5__json_as_i64(fat5__json_get(lj, "n"), &wn);
            for (c = 0; c < 3; c++) {
                tok->chunk = chunks[c];
                tok->cuts = 0;
                TK_CHECK_OK(T, fat5_tokenize_offsets(tok, lng, nl, 0, &ids, &off, &n));
                nn[c] = n;
                got[c] = tk_off_digest(ids, off, n);
                FAT5_CHECK_MSG(T, c == 2 ? tok->cuts == 0 : tok->cuts > 0, "%s: long text, parts of %zu bytes: %llu cuts", name,
                               chunks[c], (unsigned long long)tok->cuts);
                fat5_free(ctx, ids);
                fat5_free(ctx, off);
                ids = NULL;
                off = NULL;
            }
            FAT5_CHECK_MSG(T, nn[0] == wn && got[0] == want, "%s: long text (%zu bytes): %lld ids, digest %016llx; tokenizers: %lld, %016llx",
                           name, nl, (long long)nn[0], (unsigned long long)got[0], (long long)wn, (unsigned long long)want);
            FAT5_CHECK_MSG(T, nn[1] == nn[0] && got[1] == got[0] && nn[2] == nn[0] && got[2] == got[0],
                           "%s: long text: the spans differ between parts of 64 KiB, 61 bytes and the whole", name);
        }
        printf("  %-24s %d / %d texts identical; long text of %zu bytes: %lld ids\n", name, good, ti, nl, (long long)wn);
        fat5_tokenizer_destroy(tok);
        tok = NULL;
    }
    // arguments
    FAT5_REQUIRE_OK(T, fat5_tokenizer_load(ctx, "tests/data/tokenizers/uniseq/tokenizer.json", &tok));
    FAT5_CHECK(T, fat5_tokenize_offsets(tok, NULL, 3, 0, &ids, &off, &n) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_tokenize_offsets(tok, "a", 1, 0, &ids, NULL, &n) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK(T, fat5_tokenize_offsets(NULL, "a", 1, 0, &ids, &off, &n) == FAT5_ERR_INVALID_ARG);
    TK_CHECK_OK(T, fat5_tokenize_offsets(tok, NULL, 0, 0, &ids, &off, &n));   // the empty text: the template's ids
    FAT5_CHECK(T, n == 1 && ids && off && ids[0] == fat5_tokenizer_eos_id(tok) && off[0] == 0 && off[1] == 0);
    fat5_free(ctx, ids);
    fat5_free(ctx, off);
    fat5_tokenizer_destroy(tok);
    free(buf);
    free(lng);
    fat5__json_free(ctx, doc);
    fat5__free(ctx, json);
}

// ---------------------------------------------------------------------------------------------
// Unigram ties (tests/data/tokenizers/ties.json, ref/make_tokenizer_ties.py): the f64 that
// `tokenizers` reads for each score literal (serde_json's parse, not always the nearest double),
// and the ids of both libraries on small models whose paths tie exactly (the first candidate, the
// last piece that starts earliest, wins) or tie only with the nearest doubles (T5's hyphens).

// the ids of one model of ties.json (a tokenizer.json text, or a ModelProto in hex) on its texts,
// with the trie walk in parts of the default size, then the automaton in parts of one byte;
// returns the number of mismatches
static int tk_ties_model(fat5_test *T, const fat5__json *m, int is_json, char *buf) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *name = fat5__json_get(m, "name")->str, *lib = is_json ? "tokenizers" : "sentencepiece";
    const char *src = fat5__json_get(m, is_json ? "json" : "model_hex")->str;
    size_t n = is_json ? strlen(src) : tk_unhex(src, buf);
    int bad = 0, hard;
    for (hard = 0; hard < 2; hard++) {
        fat5_tokenizer *tok = NULL;
        const fat5__json *tx, *want;
        int k = 0;
        if (fat5_tokenizer_from_memory(ctx, is_json ? src : buf, n, is_json, &tok) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "ties %s (%s): %s", name, lib, fat5_last_error(ctx));
            return bad + 1;
        }
        if (hard) {
            FAT5_CHECK_MSG(T, fat5__tok_automata(tok, 1) == FAT5_OK, "ties %s: %s", name, fat5_last_error(ctx));
            tok->chunk = 1;
        }
        for (tx = fat5__json_get(m, "texts")->child, want = fat5__json_get(m, lib)->child; tx && want;
             tx = tx->next, want = want->next, k++) {
            char text[256];
            size_t len = tk_unhex(tx->str, text);
            int32_t *ids = NULL;
            int64_t got = 0;
            if (fat5_tokenize(tok, text, len, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &ids, &got) != FAT5_OK ||
                !tk_same_ids(want, ids, got)) {
                FAT5_CHECK_MSG(T, 0, "ties %s (%s%s) text %d '%s': ids differ", name, lib, hard ? ", automaton, parts of 1 byte" : "",
                               k, text);
                tk_print_ids("got", ids, got);
                bad++;
            }
            fat5_free(ctx, ids);
        }
        FAT5_CHECK_MSG(T, !tx && !want && k > 10, "ties %s (%s): %d texts, as many expectations", name, lib, k);
        fat5_tokenizer_destroy(tok);
    }
    return bad;
}

static void t_tokenizer_unigram_ties(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char *file = NULL, *buf = FAT5__CAST(char *, malloc(1 << 16)), json[512];
    size_t len = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *e;
    int n = 0, bad = 0, off_nearest = 0;
    FAT5_REQUIRE(T, buf != NULL);
    FAT5_REQUIRE_OK(T, fat5__read_file(ctx, "tests/data/tokenizers/ties.json", (size_t)1 << 24, &file, &len));
    FAT5_REQUIRE_OK(T, fat5__json_parse(ctx, "ties.json", file, len, 64, &doc));
    root = fat5__json_root(doc);
    for (e = fat5__json_get(root, "scores")->child; e; e = e->next, n++) {   // [literal, f64 bits or null]
        const char *lit = e->child->str;
        const fat5__json *bits = e->child->next;
        fat5_tokenizer *tok = NULL;
        fat5_status st;
        snprintf(json, sizeof json, "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"p0\", 0], [\"p1\", %s]]}}", lit);
        st = fat5_tokenizer_from_memory(ctx, json, strlen(json), 1, &tok);
        if (bits->type == FAT5__J_NULL) {
            FAT5_CHECK_MSG(T, st == FAT5_ERR_FORMAT && strstr(fat5_last_error(ctx), "vocab[1]"),
                           "score %s: tokenizers refuses it; fat5: %s", lit, fat5_status_string(st));
            bad += st != FAT5_ERR_FORMAT;
        } else if (st != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "score %s: %s", lit, fat5_last_error(ctx));
            bad++;
        } else {
            uint64_t want = strtoull(bits->str, NULL, 16), got, nearest;
            double d = strtod(lit, NULL);
            memcpy(&got, &tok->score[1], 8);
            memcpy(&nearest, &d, 8);
            off_nearest += want != nearest;
            FAT5_CHECK_MSG(T, got == want, "score %s: read as %016llx, tokenizers reads %016llx", lit,
                           (unsigned long long)got, (unsigned long long)want);
            bad += got != want;
        }
        fat5_tokenizer_destroy(tok);
    }
    FAT5_CHECK_MSG(T, n > 300 && off_nearest > 20, "%d score literals, %d of them not the nearest double", n, off_nearest);
    printf("  %d score literals (%d read off the nearest double by tokenizers): %d differ\n", n, off_nearest, bad);
    for (e = fat5__json_get(root, "models")->child; e; e = e->next) {
        int bj = tk_ties_model(T, e, 1, buf), bs = tk_ties_model(T, e, 0, buf);
        printf("  ties %-8s tokenizers %s, sentencepiece %s\n", fat5__json_get(e, "name")->str, bj ? "MISMATCH" : "identical",
               bs ? "MISMATCH" : "identical");
    }
    fat5__json_free(ctx, doc);
    fat5__free(ctx, file);
    free(buf);
}
