// test_unicode.c — section [8.2]: Unicode properties, extended grapheme clusters (every case of
// GraphemeBreakTest.txt) and the four normalization forms (NormalizationTest.txt: parts 0, 2 and 3
// and a sample of part 1), from the fixtures in tests/data/unicode (dev/gen_unicode.py --fixtures).

#ifndef FAT5_TEST_DATA
#define FAT5_TEST_DATA "tests/data"
#endif

// UTF-8 of the hex code points in p up to a byte of `stop` (or the end); returns the end of the
// field, 0 on a malformed one
static const char *tu_hex_utf8(const char *p, const char *stop, char *out, size_t cap, size_t *len) {
    *len = 0;
    for (;;) {
        char *e;
        unsigned long cp;
        while (*p == ' ') p++;
        if (!*p || *p == '\n' || strchr(stop, *p)) return p;
        cp = strtoul(p, &e, 16);
        if (e == p || cp > 0x10FFFF || *len + 4 > cap) return NULL;
        *len += fat5__utf8_put(out + *len, (uint32_t)cp);
        p = e;
    }
}

static void t_unicode_properties(fat5_test *T) {
    size_t len;
    FAT5_CHECK(T, strcmp(FAT5__UNICODE_VERSION, "15.0.0") == 0);
    // letters and numbers at the edges of their ranges
    FAT5_CHECK(T, fat5__uc_is_letter(0x41) && fat5__uc_is_letter(0x5A) && !fat5__uc_is_letter(0x40) &&
                      !fat5__uc_is_letter(0x5B));
    FAT5_CHECK(T, fat5__uc_is_letter(0xAA) && fat5__uc_is_letter(0x4E00) && fat5__uc_is_letter(0x9FFF) &&
                      !fat5__uc_is_letter(0xA48D) && !fat5__uc_is_letter(0xD7));
    FAT5_CHECK(T, fat5__uc_is_letter(0xAC00) && fat5__uc_is_letter(0xD7A3) && !fat5__uc_is_letter(0xD7A4));
    FAT5_CHECK(T, fat5__uc_is_letter(0x20000) && fat5__uc_is_letter(0x2A6DF) && !fat5__uc_is_letter(0x2A6E0));
    FAT5_CHECK(T, !fat5__uc_is_letter(0x300) && !fat5__uc_is_letter(0x660) && !fat5__uc_is_letter(0x10FFFF));
    FAT5_CHECK(T, fat5__uc_is_number(0x30) && fat5__uc_is_number(0x39) && !fat5__uc_is_number(0x2F) &&
                      !fat5__uc_is_number(0x3A));
    FAT5_CHECK(T, fat5__uc_is_number(0x660) && fat5__uc_is_number(0x669) && !fat5__uc_is_number(0x66A));
    FAT5_CHECK(T, fat5__uc_is_number(0xB2) && fat5__uc_is_number(0x2160) && fat5__uc_is_number(0x1F10C) &&
                      !fat5__uc_is_number(0x41));
    FAT5_CHECK(T, fat5__uc_is_white_space(0x20) && fat5__uc_is_white_space(0x9) && fat5__uc_is_white_space(0xD) &&
                      !fat5__uc_is_white_space(0xE) && fat5__uc_is_white_space(0x85) &&
                      fat5__uc_is_white_space(0xA0) && fat5__uc_is_white_space(0x3000) &&
                      fat5__uc_is_white_space(0x200A) && !fat5__uc_is_white_space(0x200B) &&
                      !fat5__uc_is_white_space(0x3001) && !fat5__uc_is_white_space(0x21));
    FAT5_CHECK(T, fat5__uc_extpict(0x1F600) && fat5__uc_extpict(0xA9) && fat5__uc_extpict(0x1FFFD) &&
                      !fat5__uc_extpict(0x1F1E6) && !fat5__uc_extpict(0x41) && !fat5__uc_extpict(0x1F3FB));
    FAT5_CHECK(T, fat5__uc_gcb(0x0D) == FAT5__GB_CR && fat5__uc_gcb(0x0A) == FAT5__GB_LF &&
                      fat5__uc_gcb(0x00) == FAT5__GB_CONTROL && fat5__uc_gcb(0x300) == FAT5__GB_EXTEND &&
                      fat5__uc_gcb(0x200D) == FAT5__GB_ZWJ && fat5__uc_gcb(0x1F1E6) == FAT5__GB_RI &&
                      fat5__uc_gcb(0x1F1FF) == FAT5__GB_RI && fat5__uc_gcb(0x600) == FAT5__GB_PREPEND &&
                      fat5__uc_gcb(0x903) == FAT5__GB_SPACINGMARK && fat5__uc_gcb(0x1100) == FAT5__GB_L &&
                      fat5__uc_gcb(0x1160) == FAT5__GB_V && fat5__uc_gcb(0x11A8) == FAT5__GB_T &&
                      fat5__uc_gcb(0xAC00) == FAT5__GB_LV && fat5__uc_gcb(0xAC01) == FAT5__GB_LVT &&
                      fat5__uc_gcb(0x41) == FAT5__GB_OTHER && fat5__uc_gcb(0x1F3FB) == FAT5__GB_EXTEND &&
                      fat5__uc_gcb(0xE0001) == FAT5__GB_CONTROL && fat5__uc_gcb(0x10FFFF) == FAT5__GB_OTHER);
    // decoding
    FAT5_CHECK(T, fat5__utf8_cp("A", 1, &len) == 0x41 && len == 1);
    FAT5_CHECK(T, fat5__utf8_cp("\xC3\xA9x", 3, &len) == 0xE9 && len == 2);
    FAT5_CHECK(T, fat5__utf8_cp("\xE2\x82\xAC", 3, &len) == 0x20AC && len == 3);
    FAT5_CHECK(T, fat5__utf8_cp("\xF4\x8F\xBF\xBF", 4, &len) == 0x10FFFF && len == 4);
    FAT5_CHECK(T, fat5__utf8_cp("\xF0\x9F\x98\x80", 4, &len) == 0x1F600 && len == 4);
    FAT5_CHECK(T, fat5__utf8_cp("\xE2\x82", 2, &len) == 0xFFFD && len == 1);   // cut: not valid
}

static void t_unicode_grapheme_break_test(fat5_test *T) {
    FILE *f = fopen(FAT5_TEST_DATA "/unicode/grapheme_break.txt", "r");
    char line[1024], text[512];
    int cases = 0, bad = 0;
    FAT5_REQUIRE(T, f != NULL);
    while (fgets(line, sizeof line, f)) {
        size_t n = 0, nb = 0, breaks[128], pos = 0, k = 0;
        const char *p = line;
        if (line[0] == '#' || line[0] == '\n') continue;
        for (;;) {   // code points, each followed by '.', '|' or the end
            size_t len;
            p = tu_hex_utf8(p, ".|", text + n, sizeof text - n, &len);
            FAT5_REQUIRE(T, p != NULL && len > 0 && nb < 128);
            n += len;
            if (*p == '|') breaks[nb++] = n;
            if (*p != '.' && *p != '|') break;
            p++;
        }
        breaks[nb++] = n;
        cases++;
        while (pos < n) {
            size_t g = fat5__grapheme_len(text + pos, n - pos);
            if (g < 1 || pos + g > n || k >= nb || pos + g != breaks[k]) {
                if (bad++ < 10) fat5_test_fail(T, __FILE__, __LINE__, "clusters of %s: one of %zu bytes at %zu",
                                               strtok(line, "\n"), g, pos);
                break;
            }
            pos += g;
            k++;
        }
    }
    fclose(f);
    FAT5_CHECK_MSG(T, cases >= 600, "only %d cases read", cases);
    FAT5_CHECK_MSG(T, bad == 0, "%d of %d cases differ", bad, cases);
}

static const char *tu_form_name(int form) {
    return form == FAT5__NFC ? "NFC" : form == FAT5__NFD ? "NFD" : form == FAT5__NFKC ? "NFKC" : "NFKD";
}

// form(src) == want, by the returned length, into a buffer of exactly that size and into one too short
static int tu_norm_is(const char *src, size_t n, int form, const char *want, size_t wn) {
    char out[1024];
    size_t got = fat5__unorm(form, src, n, out, sizeof out), cut;
    if (got != wn || memcmp(out, want, wn) != 0) return 0;
    if (fat5__unorm(form, src, n, NULL, 0) != wn) return 0;
    cut = wn / 2;
    memset(out, 0x55, sizeof out);
    if (fat5__unorm(form, src, n, out, cut) != wn) return 0;
    // whole code points of the result, then nothing
    {
        size_t w = 0;
        while (w < wn && w + fat5__utf8_len(want + w, wn - w) <= cut) w += fat5__utf8_len(want + w, wn - w);
        if (memcmp(out, want, w) != 0 || (w < sizeof out && (unsigned char)out[w] != 0x55)) return 0;
    }
    return 1;
}

static void t_unicode_normalization_test(fat5_test *T) {
    // UAX #15: c2 == NFC(c1..c3), c4 == NFC(c4,c5), c3 == NFD(c1..c3), c5 == NFD(c4,c5),
    // c4 == NFKC(c1..c5), c5 == NFKD(c1..c5)
    static const int want_of[4][5] = {{2, 2, 2, 4, 4}, {3, 3, 3, 5, 5}, {4, 4, 4, 4, 4}, {5, 5, 5, 5, 5}};
    static const int forms[4] = {FAT5__NFC, FAT5__NFD, FAT5__NFKC, FAT5__NFKD};
    FILE *f = fopen(FAT5_TEST_DATA "/unicode/normalization.txt", "r");
    char line[1024], c[5][256];
    size_t cn[5];
    int lines = 0, bad = 0, parts[4] = {0, 0, 0, 0}, part = -1, checks = 0;
    FAT5_REQUIRE(T, f != NULL);
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        int i, j;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (line[0] == '@') {
            part = atoi(line + 1);
            FAT5_REQUIRE(T, part >= 0 && part < 4);
            continue;
        }
        for (i = 0; i < 5; i++) {
            if (p[0] >= '1' && p[0] <= '5' && (p[1] == ';' || p[1] == '\n' || !p[1])) {
                int r = p[0] - '1';
                FAT5_REQUIRE(T, r < i);
                memcpy(c[i], c[r], cn[r]);
                cn[i] = cn[r];
                p++;
            } else {
                p = tu_hex_utf8(p, ";", c[i], sizeof c[i], &cn[i]);
                FAT5_REQUIRE(T, p != NULL && cn[i] > 0);
            }
            if (i < 4) {
                FAT5_REQUIRE(T, *p == ';');
                p++;
            }
        }
        FAT5_REQUIRE(T, part >= 0);
        lines++;
        parts[part]++;
        for (j = 0; j < 4; j++)
            for (i = 0; i < 5; i++) {
                int w = want_of[j][i] - 1;
                checks++;
                if (!tu_norm_is(c[i], cn[i], forms[j], c[w], cn[w]) && bad++ < 10)
                    fat5_test_fail(T, __FILE__, __LINE__, "part %d line %d: %s(c%d) is not c%d: %s", part,
                                   parts[part], tu_form_name(forms[j]), i + 1, w + 1, strtok(line, "\n"));
            }
    }
    fclose(f);
    FAT5_CHECK_MSG(T, parts[0] >= 20 && parts[1] >= 200 && parts[2] >= 1800 && parts[3] >= 100,
                   "parts read: %d %d %d %d", parts[0], parts[1], parts[2], parts[3]);
    FAT5_CHECK_MSG(T, bad == 0, "%d of %d checks (%d lines) differ", bad, checks, lines);
}

static size_t tu_put(char *o, const uint32_t *cps, size_t n) {
    size_t i, k = 0;
    for (i = 0; i < n; i++) k += fat5__utf8_put(o + k, cps[i]);
    return k;
}

static void t_unicode_normalization_hand(fat5_test *T) {
    // U+FDFA: 18 code points under NFKC/NFKD (33 bytes); the needed length when cap is short
    static const uint32_t fdfa[18] = {0x635, 0x644, 0x649, 0x20, 0x627, 0x644, 0x644, 0x647, 0x20,
                                      0x639, 0x644, 0x64A, 0x647, 0x20, 0x648, 0x633, 0x644, 0x645};
    char want[4096], out[4096], src[4096];
    size_t wn = tu_put(want, fdfa, 18), n, i, k;
    FAT5_CHECK(T, wn == 33);
    memset(out, 0x55, sizeof out);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFKC, "\xEF\xB7\xBA", 3, out, 5) == 33);
    FAT5_CHECK(T, memcmp(out, want, 4) == 0 && (unsigned char)out[4] == 0x55);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFKD, "\xEF\xB7\xBA", 3, NULL, 0) == 33);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFKC, "\xEF\xB7\xBA", 3, out, sizeof out) == 33 && memcmp(out, want, 33) == 0);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFC, "\xEF\xB7\xBA", 3, out, sizeof out) == 3);
    // Hangul both ways; an empty input
    FAT5_CHECK(T, fat5__unorm(FAT5__NFD, "\xEA\xB0\x81", 3, out, sizeof out) == 9 &&   // U+AC01
                      memcmp(out, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", 9) == 0);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFC, "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", 9, out, sizeof out) == 3 &&
                      memcmp(out, "\xEA\xB0\x81", 3) == 0);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFC, "", 0, out, sizeof out) == 0);
    FAT5_CHECK(T, fat5__unorm(FAT5__NFKC, "e\xCC\x81 ok", 6, out, sizeof out) == 5 && memcmp(out, "\xC3\xA9 ok", 5) == 0);
    // A run of marks longer than the sort buffer (FAT5__UC_RUN): 'a', then 150 marks cycling through
    // classes 230 (U+0301), 220 (U+0316), 216 (U+031B), 202 (U+0327). NFD sorts them stably by class;
    // under NFC, a takes the first U+0301 (U+00E1: only marks of lower classes stay before it; a has
    // no composite with the others) and every other mark stays.
    {
        static const uint32_t marks[4] = {0x301, 0x316, 0x31B, 0x327};
        static const uint32_t order[4] = {0x327, 0x31B, 0x316, 0x301};   // by class
        size_t counts[4] = {0, 0, 0, 0}, total = 150;
        uint32_t cps[200];
        cps[0] = 'a';
        for (i = 0; i < total; i++) {
            cps[1 + i] = marks[i % 4];
            counts[i % 4]++;
        }
        n = tu_put(src, cps, 1 + total);
        src[n++] = 'b';
        k = 0;
        cps[k++] = 'a';
        for (i = 0; i < 4; i++) {
            size_t j, m = counts[3 - i];
            for (j = 0; j < m; j++) cps[k++] = order[i];
        }
        wn = tu_put(want, cps, k);
        want[wn++] = 'b';
        FAT5_CHECK(T, fat5__unorm(FAT5__NFD, src, n, out, sizeof out) == wn && memcmp(out, want, wn) == 0);
        FAT5_CHECK(T, fat5__unorm(FAT5__NFKD, src, n, NULL, 0) == wn);
        k = 0;
        cps[k++] = 0xE1;
        for (i = 0; i < 4; i++) {
            size_t j, m = counts[3 - i] - (order[i] == 0x301);
            for (j = 0; j < m; j++) cps[k++] = order[i];
        }
        wn = tu_put(want, cps, k);
        want[wn++] = 'b';
        FAT5_CHECK(T, fat5__unorm(FAT5__NFC, src, n, out, sizeof out) == wn && memcmp(out, want, wn) == 0);
        FAT5_CHECK(T, fat5__unorm(FAT5__NFC, src, n, out, 7) == wn);
        // the same with 20 marks (sorted in the buffer): U+00E1, 5 of each other mark, 4 x U+0301
        cps[0] = 'a';
        for (i = 0; i < 20; i++) cps[1 + i] = marks[i % 4];
        n = tu_put(src, cps, 21);
        FAT5_CHECK(T, fat5__unorm(FAT5__NFC, src, n, out, sizeof out) == 2 + 19 * 2);
        FAT5_CHECK(T, memcmp(out, "\xC3\xA1\xCC\xA7", 4) == 0 && memcmp(out + 38, "\xCC\x81", 2) == 0);
    }
}

static void t_unicode_grapheme_hand(fat5_test *T) {
    // CR LF; a flag pair then a lone indicator; a ZWJ emoji sequence; a Hangul syllable block
    FAT5_CHECK(T, fat5__grapheme_len("\r\nx", 3) == 2);
    FAT5_CHECK(T, fat5__grapheme_len("\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7\xF0\x9F\x87\xAB", 12) == 8);
    FAT5_CHECK(T, fat5__grapheme_len("\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9x", 12) == 11);
    FAT5_CHECK(T, fat5__grapheme_len("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8\xE1\x84\x80", 12) == 9);
    FAT5_CHECK(T, fat5__grapheme_len("e\xCC\x81\xCC\xA7!", 6) == 5);
    FAT5_CHECK(T, fat5__grapheme_len("a", 1) == 1);
}

#define FAT5_TESTS_UNICODE(X) X(unicode_properties) X(unicode_grapheme_break_test) X(unicode_grapheme_hand) \
    X(unicode_normalization_test) X(unicode_normalization_hand)
