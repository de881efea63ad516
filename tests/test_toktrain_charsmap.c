// Tokenizer training: the precompiled charsmaps fat5__tt_charsmap builds ("nfkc", "nmt_nfkc").
// The expected normalisation of a code point is computed here from fat5's NFKC (fat5__unorm) and
// nmt_nfkc's own rules, written out again below; sequences are checked against NFKC of the
// sequence. ref/check_charsmap.py checks the same blobs against sentencepiece and tokenizers.

// nmt_nfkc's rules over NFKC: these become " ", these nothing, and U+FF5E stays itself
static const uint32_t ttc_nmt_space[] = {0x0009, 0x000A, 0x000C, 0x000D, 0x061C, 0x1680, 0x200B, 0x200C,
                                         0x200E, 0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD};
static const uint32_t ttc_nmt_gone[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0B, 0x0E,
                                        0x0F, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,
                                        0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E, 0x1F, 0x7F, 0x8F, 0x9F};

static int ttc_in(const uint32_t *a, size_t n, uint32_t cp) {
    size_t i;
    for (i = 0; i < n; i++)
        if (a[i] == cp) return 1;
    return 0;
}

// What rule `nmt` (1: nmt_nfkc, 0: nfkc) makes of the one code point cp (not a surrogate): out
// gets the UTF-8, the length is returned.
static size_t ttc_expect(int nmt, uint32_t cp, char *out, size_t cap) {
    char s[4];
    size_t n = fat5__utf8_put(s, cp);
    if (nmt && ttc_in(ttc_nmt_space, FAT5__UC_COUNT(ttc_nmt_space), cp)) return out[0] = ' ', 1;
    if (nmt && ttc_in(ttc_nmt_gone, FAT5__UC_COUNT(ttc_nmt_gone), cp)) return 0;
    if ((nmt && cp == 0xFF5E) || (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) {
        memcpy(out, s, n);
        return n;
    }
    return fat5__unorm(FAT5__NFKC, s, n, out, cap);
}

// The charsmap applied to s[0..n) as sentencepiece applies it (at each position the longest of
// the first 32 matching rules, else one character); the output's length (at most cap written).
static size_t ttc_apply(const fat5__charsmap *cm, const char *s, size_t n, char *out, size_t cap) {
    size_t i = 0, o = 0;
    while (i < n) {
        fat5__cm_match m[32];
        size_t k = fat5__charsmap_search(cm, s + i, n - i, m, 32), j, best = 0, step;
        const char *src = NULL;
        for (j = 0; j < k && j < 32; j++)
            if (m[j].len > best) best = m[j].len, src = m[j].repl;
        if (best) step = best, k = strlen(src);
        else src = s + i, step = k = fat5__utf8_len(s + i, n - i) ? fat5__utf8_len(s + i, n - i) : 1;
        if (o + k <= cap) memcpy(out + o, src, k);
        o += k;
        i += step;
    }
    return o;
}

// rule's blob (built once per run, kept for the other tests: the build takes some 0.4 s), loaded
// into cm; NULL (the failure recorded) when it cannot be built or loaded
static const unsigned char *ttc_build(fat5_test *T, const char *rule, size_t *len, fat5__charsmap *cm) {
    static unsigned char *kept[2];
    static size_t kept_len[2];
    fat5_ctx *ctx = fat5_test_ctx(T);
    int r = !strcmp(rule, "nmt_nfkc");
    fat5_status st;
    memset(cm, 0, sizeof *cm);
    if (!kept[r]) {
        unsigned char *blob = NULL;
        st = fat5__tt_charsmap(ctx, rule, &blob, len);
        FAT5_CHECK_MSG(T, st == FAT5_OK, "%s: %s", rule, fat5_last_error(ctx));
        if (st != FAT5_OK) return NULL;
        kept[r] = (unsigned char *)malloc(*len);
        if (kept[r]) memcpy(kept[r], blob, *len), kept_len[r] = *len;
        fat5_free(ctx, blob);
        FAT5_CHECK(T, kept[r] != NULL);
        if (!kept[r]) return NULL;
    }
    *len = kept_len[r];
    st = fat5__charsmap_load(ctx, rule, kept[r], *len, cm);
    FAT5_CHECK_MSG(T, st == FAT5_OK, "%s: the blob does not load: %s", rule, fat5_last_error(ctx));
    return st == FAT5_OK ? kept[r] : NULL;
}

// Every code point but the surrogates, alone, through the charsmap: the rule's expected output.
static void t_toktrain_charsmap_codepoints(fat5_test *T) {
    static const char *const rules[2] = {"nfkc", "nmt_nfkc"};
    int r;
    for (r = 0; r < 2; r++) {
        fat5__charsmap cm;
        size_t len, bad = 0, changed = 0;
        const unsigned char *blob = ttc_build(T, rules[r], &len, &cm);
        uint32_t cp;
        if (!blob) return;
        for (cp = 1; cp <= 0x10FFFF; cp++) {
            char s[4], want[256], got[256];
            size_t n, wn, gn;
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            n = fat5__utf8_put(s, cp);
            wn = ttc_expect(r, cp, want, sizeof want);
            gn = ttc_apply(&cm, s, n, got, sizeof got);
            changed += wn != n || memcmp(want, s, n);
            if ((gn != wn || memcmp(got, want, wn)) && bad++ < 5)
                FAT5_CHECK_MSG(T, 0, "%s: U+%04X becomes %.*s (%zu bytes), expected %.*s (%zu bytes)", rules[r],
                               (unsigned)cp, (int)gn, got, gn, (int)wn, want, wn);
        }
        FAT5_CHECK_MSG(T, bad == 0, "%s: %zu code points normalise wrongly", rules[r], bad);
        FAT5_CHECK(T, changed > 4900);   // NFKC changes some 4,900 code points of Unicode 15.0
        fat5__charsmap_free(fat5_test_ctx(T), &cm);
    }
}

// Sequences: each multi-code-point NFKD decomposition that NFKC composes becomes NFKC of it; the
// sequences whose code points decompose one by one to one (fullwidth letters, compatibility
// jamo); whole NFD texts become their NFKC.
static void t_toktrain_charsmap_sequences(fat5_test *T) {
    static const struct { const char *in, *out; } hand[] = {
        {"e\xCC\x81", "\xC3\xA9"},                                     // e U+0301 -> U+00E9
        {"\xEF\xBD\x85\xCC\x81", "\xC3\xA9"},                           // fullwidth e U+0301 -> U+00E9
        {"e\xCD\x81", "\xC3\xA9"},                                      // e U+0341 (acute tone mark)
        {"e\xCC\x81\xCC\x81", "\xC3\xA9\xCC\x81"},                      // one mark composes, the next stays
        {"A\xCC\x8A", "\xC3\x85"},                                      // A U+030A -> U+00C5
        {"e\xCC\xA3\xCC\x82", "\xE1\xBB\x87"},                          // e U+0323 U+0302 -> U+1EC7
        {"\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80"},                   // U+1100 U+1161 -> U+AC00
        {"\xE3\x84\xB1\xE3\x85\x8F", "\xEA\xB0\x80"},                   // U+3131 U+314F -> U+AC00
        {"\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"},       // U+1100 U+1161 U+11A8 -> U+AC01
        {("\xEF\xAC\x81" "e\xCC\x81"), "fi\xC3\xA9"},                     // U+FB01 then e U+0301
    };
    static const char *const texts[] = {("Fran\xC3\xA7" "ais \xC3\xA9t\xC3\xA9"),
                                        "\xCE\x95\xCE\xBB\xCE\xBB\xCE\xB7\xCE\xBD\xCE\xB9\xCE\xBA\xCE\xAC",
                                        "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xEC\x95\x88\xEB\x85\x95",
                                        "Vi\xE1\xBB\x87t Nam \xE1\xBB\xA9ng d\xE1\xBB\xA5ng"};
    fat5__charsmap cm;
    size_t len, i, bad = 0, seqs = 0;
    const unsigned char *blob = ttc_build(T, "nmt_nfkc", &len, &cm);
    uint32_t cp;
    char got[1024], want[1024], d[256];
    if (!blob) return;
    for (i = 0; i < FAT5__UC_COUNT(hand); i++) {
        size_t gn = ttc_apply(&cm, hand[i].in, strlen(hand[i].in), got, sizeof got);
        FAT5_CHECK_MSG(T, gn == strlen(hand[i].out) && !memcmp(got, hand[i].out, gn), "hand case %zu: got %.*s",
                       i, (int)gn, got);
    }
    for (cp = 0xA0; cp <= 0x10FFFF; cp++) {
        char s[4];
        size_t n, dn, wn, gn;
        if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) continue;
        n = fat5__utf8_put(s, cp);
        dn = fat5__unorm(FAT5__NFKD, s, n, d, sizeof d);
        if (fat5__cm_ncp(d, dn) < 2) continue;
        wn = fat5__unorm(FAT5__NFKC, d, dn, want, sizeof want);
        if (wn == dn && !memcmp(want, d, dn)) continue;
        seqs++;
        gn = ttc_apply(&cm, d, dn, got, sizeof got);
        if ((gn != wn || memcmp(got, want, wn)) && bad++ < 5)
            FAT5_CHECK_MSG(T, 0, "NFKD(U+%04X) becomes %.*s, expected %.*s", (unsigned)cp, (int)gn, got, (int)wn, want);
    }
    FAT5_CHECK_MSG(T, bad == 0, "%zu of %zu decompositions normalise wrongly", bad, seqs);
    FAT5_CHECK_MSG(T, seqs > 12000, "%zu decompositions", seqs);   // the precomposed letters, 11,172 Hangul syllables
    for (i = 0; i < FAT5__UC_COUNT(texts); i++) {
        size_t n = strlen(texts[i]), dn = fat5__unorm(FAT5__NFD, texts[i], n, d, sizeof d);
        size_t wn = fat5__unorm(FAT5__NFKC, texts[i], n, want, sizeof want);
        size_t gn = ttc_apply(&cm, d, dn, got, sizeof got);
        FAT5_CHECK_MSG(T, gn == wn && !memcmp(got, want, wn), "NFD of text %zu becomes %.*s", i, (int)gn, got);
    }
    fat5__charsmap_free(fat5_test_ctx(T), &cm);
}

// The double array's structure: the size field, the strings (sorted, each once, NUL-terminated),
// and a walk over every transition from the root: each node reached leads to a key, each key is
// valid UTF-8 of a rule the rule set holds (one code point: the expected output; more: NFKC of the
// sequence), and the one-code-point keys are exactly the code points the rule changes.
typedef struct ttc_walk {
    fat5__charsmap *cm;
    int nmt;
    size_t keys, singles, bad, dead, nul;
    char key[64];
} ttc_walk;

// walks the node whose children's base is `base` (key[0..depth) leads there); returns the keys below
static size_t ttc_walk_node(fat5_test *T, ttc_walk *w, size_t base, size_t depth) {
    size_t c, below = 0;
    // a NUL byte (sentencepiece searches it when the text holds one) leads nowhere: the unit at
    // base ^ 0 is a value (a key ends here) or carries another label
    w->nul += FAT5__DA_LABEL(w->cm->unit[base]) == 0;
    for (c = 1; c < 256; c++) {
        size_t p = base ^ c, nb;
        uint32_t u;
        if (p >= w->cm->n_units) continue;
        u = w->cm->unit[p];
        if (FAT5__DA_LABEL(u) != c) continue;
        nb = p ^ FAT5__DA_OFFSET(u);
        w->key[depth] = (char)c;
        if (depth + 1 >= sizeof w->key) {
            w->bad++;
            continue;
        }
        if (FAT5__DA_LEAF(u)) {
            const char *repl = w->cm->pool + FAT5__DA_VALUE(w->cm->unit[nb]);
            char want[256];
            size_t n = depth + 1, wn, k, was = w->bad;
            below++;
            w->keys++;
            w->key[n] = 0;
            if (!fat5__utf8_valid(w->key) || (k = fat5__cm_ncp(w->key, n)) == 0) {
                w->bad++;
            } else if (k == 1) {
                size_t len;
                uint32_t cp = fat5__utf8_cp(w->key, n, &len);
                w->singles++;
                wn = ttc_expect(w->nmt, cp, want, sizeof want);
                if ((wn == n && !memcmp(want, w->key, n)) || strlen(repl) != wn || memcmp(repl, want, wn)) w->bad++;
            } else {
                wn = fat5__unorm(FAT5__NFKC, w->key, n, want, sizeof want);
                if (strlen(repl) != wn || memcmp(repl, want, wn)) w->bad++;
            }
            if (w->bad > was && w->bad <= 3)
                FAT5_CHECK_MSG(T, 0, "key %.*s -> %s is not the rule's", (int)n, w->key, repl);
        }
        {
            size_t sub = ttc_walk_node(T, w, nb, depth + 1);
            if (!sub && !FAT5__DA_LEAF(u)) w->dead++;
            below += sub;
        }
    }
    return below;
}

static void t_toktrain_charsmap_structure(fat5_test *T) {
    static const char *const rules[2] = {"nfkc", "nmt_nfkc"};
    // the rules sentencepiece 0.2's charsmaps hold less the 360 with a code point new in Unicode 16.0
    static const size_t want_keys[2] = {224872, 224916};
    int r;
    for (r = 0; r < 2; r++) {
        fat5__charsmap cm;
        ttc_walk w;
        size_t len, changed = 0, size;
        const unsigned char *blob = ttc_build(T, rules[r], &len, &cm);
        uint32_t cp;
        if (!blob) return;
        size = (size_t)blob[0] | (size_t)blob[1] << 8 | (size_t)blob[2] << 16 | (size_t)blob[3] << 24;
        FAT5_CHECK(T, size % 1024 == 0 && size == 4 * cm.n_units && 4 + size < len);
        FAT5_CHECK(T, blob[len - 1] == 0);   // the last string's NUL
        {   // the strings: sorted (bytewise) and each once
            const char *p = cm.pool, *prev = NULL, *end = cm.pool + cm.pool_len;
            int ordered = 1;
            while (p < end) {
                if (prev && strcmp(prev, p) >= 0) ordered = 0;
                prev = p;
                p += strlen(p) + 1;
            }
            FAT5_CHECK_MSG(T, ordered, "%s: the replacement strings are not sorted and distinct", rules[r]);
        }
        memset(&w, 0, sizeof w);
        w.cm = &cm;
        w.nmt = r;
        ttc_walk_node(T, &w, FAT5__DA_OFFSET(cm.unit[0]), 0);
        for (cp = 1; cp <= 0x10FFFF; cp++) {
            char s[4], want[256];
            size_t n, wn;
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            n = fat5__utf8_put(s, cp);
            wn = ttc_expect(r, cp, want, sizeof want);
            changed += wn != n || memcmp(want, s, n);
        }
        FAT5_CHECK_MSG(T, w.bad == 0, "%s: %zu keys are not the rule's", rules[r], w.bad);
        FAT5_CHECK_MSG(T, w.dead == 0, "%s: %zu nodes lead to no key", rules[r], w.dead);
        FAT5_CHECK_MSG(T, w.nul == 0, "%s: a NUL byte leads on from %zu nodes", rules[r], w.nul);
        FAT5_CHECK_MSG(T, w.singles == changed, "%s: %zu one-code-point keys, %zu code points changed", rules[r],
                       w.singles, changed);
        FAT5_CHECK_MSG(T, w.keys == want_keys[r], "%s: %zu keys, expected %zu", rules[r], w.keys, want_keys[r]);
        fat5__charsmap_free(fat5_test_ctx(T), &cm);
    }
}

// The blob in a spiece.model (fat5__tt_spm_bytes, as the trainer writes it), loaded as a tokenizer:
// its normaliser (spaces as U+2581, no dummy prefix, no whitespace removal) gives each code point
// the rule's output; "identity" writes no charsmap.
static void t_toktrain_charsmap_spiece(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
    fat5__tt_vocab v;
    fat5__sb sb;
    fat5_tokenizer *t = NULL;
    fat5__charsmap cm;
    unsigned char *none = NULL;
    const unsigned char *blob;
    size_t len = 0, bad = 0;
    uint32_t cp;
    memset(&v, 0, sizeof v);
    fat5__sb_init(&sb, ctx);
    FAT5_REQUIRE_OK(T, fat5__tt_charsmap(ctx, "identity", &none, &len));
    FAT5_CHECK(T, none == NULL && len == 0);
    FAT5_CHECK(T, fat5__tt_charsmap(ctx, "nfkc_cf", &none, &len) != FAT5_OK && none == NULL);
    cfg.normalization_rule_name = "nmt_nfkc";
    cfg.add_dummy_prefix = 0;
    cfg.remove_extra_whitespaces = 0;
    FAT5_REQUIRE(T, (blob = ttc_build(T, cfg.normalization_rule_name, &len, &cm)) != NULL);
    fat5__charsmap_free(ctx, &cm);
    if (fat5__tt_vocab_specials(ctx, &cfg, &v) || fat5__tt_spm_bytes(ctx, &cfg, &v, blob, len, &sb) ||
        fat5_tokenizer_from_memory(ctx, sb.buf, sb.len, 0, &t)) {
        FAT5_CHECK_MSG(T, 0, "the spiece.model: %s", fat5_last_error(ctx));
        goto done;
    }
    for (cp = 1; cp <= 0x10FFFF; cp++) {
        fat5__spm_norm z;
        char s[4], want[256], w2[768];
        size_t n, wn, i, k = 0;
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        n = fat5__utf8_put(s, cp);
        wn = ttc_expect(1, cp, want, sizeof want);
        for (i = 0; i < wn; i++)   // spaces are written U+2581
            if (want[i] == ' ') memcpy(w2 + k, "\xE2\x96\x81", 3), k += 3;
            else w2[k++] = want[i];
        memset(&z, 0, sizeof z);
        t->s0.n = 0;
        if (fat5__spm_norm_more(t, s, n, &z, &t->s0, (size_t)-1, NULL) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "U+%04X: %s", (unsigned)cp, fat5_last_error(ctx));
            break;
        }
        if ((t->s0.n != k || memcmp(t->s0.p, w2, k)) && bad++ < 5)
            FAT5_CHECK_MSG(T, 0, "U+%04X becomes %.*s, expected %.*s", (unsigned)cp, (int)t->s0.n, t->s0.p, (int)k, w2);
    }
    FAT5_CHECK_MSG(T, bad == 0, "%zu code points normalise wrongly through spiece.model", bad);
done:
    fat5_tokenizer_destroy(t);
    fat5__tt_vocab_free(ctx, &v);
    fat5__sb_free(&sb);
}

#define FAT5_TESTS_TOKTRAIN_CHARSMAP(X) X(toktrain_charsmap_codepoints) X(toktrain_charsmap_sequences) \
    X(toktrain_charsmap_structure) X(toktrain_charsmap_spiece)
