// =============================================================================================
// ==[8.2] text: Unicode properties, grapheme clusters and normalization forms ==
// Grapheme_Cluster_Break values (bits 0-3 of fat5__uc_prop)
enum { FAT5__GB_OTHER, FAT5__GB_CR, FAT5__GB_LF, FAT5__GB_CONTROL, FAT5__GB_EXTEND, FAT5__GB_ZWJ,
       FAT5__GB_RI, FAT5__GB_PREPEND, FAT5__GB_SPACINGMARK, FAT5__GB_L, FAT5__GB_V, FAT5__GB_T,
       FAT5__GB_LV, FAT5__GB_LVT };
// normalization forms (UAX #15) for fat5__unorm
enum { FAT5__NFC, FAT5__NFD, FAT5__NFKC, FAT5__NFKD };
#define FAT5__UC_COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FAT5__UC_MAXDEC 18   // the longest full decomposition (U+FDFA); dev/gen_unicode.py checks it

// the index of the last entry of the sorted t[0..n) whose key (t[i] >> shift) is <= key; 0 when
// there is none (the caller checks t[0])
static size_t fat5__uc_floor(const uint32_t *t, size_t n, uint32_t key, int shift) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((t[mid] >> shift) <= key) lo = mid;
        else hi = mid;
    }
    return lo;
}

// the low byte of the entry of a start << 8 | value range table that covers cp
static unsigned fat5__uc_range(const uint32_t *t, size_t n, uint32_t cp) {
    return (unsigned)(t[fat5__uc_floor(t, n, cp, 8)] & 0xFF);
}

static unsigned fat5__uc_props(uint32_t cp) {
    if (cp < 128) return fat5__uc_prop_ascii[cp];
    return fat5__uc_range(fat5__uc_prop, FAT5__UC_COUNT(fat5__uc_prop), cp);
}
static FAT5__UNUSED int fat5__uc_gcb(uint32_t cp) { return (int)(fat5__uc_props(cp) & 15); }
static FAT5__UNUSED int fat5__uc_extpict(uint32_t cp) { return (fat5__uc_props(cp) & 16) != 0; }
static FAT5__UNUSED int fat5__uc_is_letter(uint32_t cp) { return (fat5__uc_props(cp) & 32) != 0; }
static FAT5__UNUSED int fat5__uc_is_number(uint32_t cp) { return (fat5__uc_props(cp) & 64) != 0; }
static FAT5__UNUSED int fat5__uc_is_white_space(uint32_t cp) { return (fat5__uc_props(cp) & 128) != 0; }
// a word character of regular expressions (\w: Alphabetic, marks, decimal digits, connector
// punctuation, Join_Control)
static FAT5__UNUSED int fat5__uc_is_word(uint32_t cp) {
    return fat5__uc_range(fat5__uc_word, FAT5__UC_COUNT(fat5__uc_word), cp) != 0;
}

// Canonical_Combining_Class (0 below U+0300)
static unsigned fat5__uc_cc(uint32_t cp) {
    return cp < 0x300 ? 0 : fat5__uc_range(fat5__uc_ccc, FAT5__UC_COUNT(fat5__uc_ccc), cp);
}

// Decodes one code point of valid UTF-8 (n >= 1 bytes at s); *len gets its length. A byte that does
// not start a valid sequence reads as U+FFFD of length 1, so that a caller always advances.
static FAT5__UNUSED uint32_t fat5__utf8_cp(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = fat5__utf8_len(s, n);
    *len = k ? k : 1;
    switch (k) {
    case 1: return u[0];
    case 2: return (uint32_t)(u[0] & 0x1F) << 6 | (uint32_t)(u[1] & 0x3F);
    case 3: return (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (uint32_t)(u[2] & 0x3F);
    case 4:
        return (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 | (uint32_t)(u[2] & 0x3F) << 6 |
               (uint32_t)(u[3] & 0x3F);
    default: return 0xFFFD;
    }
}

// Extended grapheme clusters (UAX #29, Unicode FAT5__UNICODE_VERSION): the byte length of the cluster
// at s (1..n), as unicode-segmentation's graphemes(true). Rules GB3-GB13 and GB999; GB9c (Indic
// conjunct breaks, Unicode 15.1, which unicode-segmentation 1.12 implements) needs the
// Indic_Conjunct_Break property that the Unicode 15.0 data does not have, so it is not applied.
static FAT5__UNUSED size_t fat5__grapheme_len(const char *s, size_t n) {
    size_t len, i;
    uint32_t cp;
    // an ASCII character before another one (CR LF aside) is a cluster of its own: no ASCII
    // character extends, prepends or joins
    if ((unsigned char)s[0] < 0x80 && (n == 1 || ((unsigned char)s[1] < 0x80 && !(s[0] == '\r' && s[1] == '\n')))) return 1;
    cp = fat5__utf8_cp(s, n, &len);
    unsigned p = fat5__uc_props(cp), prev = p & 15;
    int ri = prev == FAT5__GB_RI;            // regional indicators so far in a row (GB12/GB13)
    int emoji = (p & 16) ? 1 : 0;            // 1: ExtPict Extend*, 2: ExtPict Extend* ZWJ (GB11)
    for (i = len; i < n; i += len, prev = p & 15) {
        unsigned g;
        int join;
        cp = fat5__utf8_cp(s + i, n - i, &len);
        p = fat5__uc_props(cp);
        g = p & 15;
        if (prev == FAT5__GB_CR && g == FAT5__GB_LF) join = 1;                                    // GB3
        else if (prev == FAT5__GB_CR || prev == FAT5__GB_LF || prev == FAT5__GB_CONTROL) join = 0;  // GB4
        else if (g == FAT5__GB_CR || g == FAT5__GB_LF || g == FAT5__GB_CONTROL) join = 0;           // GB5
        else if (prev == FAT5__GB_L && (g == FAT5__GB_L || g == FAT5__GB_V || g == FAT5__GB_LV || g == FAT5__GB_LVT))
            join = 1;                                                                               // GB6
        else if ((prev == FAT5__GB_LV || prev == FAT5__GB_V) && (g == FAT5__GB_V || g == FAT5__GB_T)) join = 1;  // GB7
        else if ((prev == FAT5__GB_LVT || prev == FAT5__GB_T) && g == FAT5__GB_T) join = 1;      // GB8
        else if (g == FAT5__GB_EXTEND || g == FAT5__GB_ZWJ || g == FAT5__GB_SPACINGMARK) join = 1;  // GB9, GB9a
        else if (prev == FAT5__GB_PREPEND) join = 1;                                               // GB9b
        else if (emoji == 2 && (p & 16)) join = 1;                                                 // GB11
        else if (prev == FAT5__GB_RI && g == FAT5__GB_RI && (ri & 1)) join = 1;                    // GB12, GB13
        else join = 0;                                                                             // GB999
        if (!join) return i;
        ri = g == FAT5__GB_RI ? ri + 1 : 0;
        if (p & 16) emoji = 1;
        else if (emoji == 1 && g == FAT5__GB_EXTEND) emoji = 1;
        else if (emoji == 1 && g == FAT5__GB_ZWJ) emoji = 2;
        else emoji = 0;
    }
    return n;
}

// ---- normalization (UAX #15) ----

// The one-level mapping of cp in a decomposition table (code points to m), its length; 0 when none.
static size_t fat5__uc_map(const uint32_t *key, const uint32_t *val, size_t n, uint32_t cp, uint32_t *m) {
    size_t lo, j, len;
    uint32_t k, v;
    if (n == 0 || (key[0] >> 8) > cp) return 0;
    lo = fat5__uc_floor(key, n, cp, 8);
    k = cp - (key[lo] >> 8);
    if (k > (key[lo] & 0xFF)) return 0;
    len = val[lo] & 31;
    v = val[lo] >> 5;
    if (len == 1) {
        m[0] = v + k;
        return 1;
    }
    for (j = 0; j < len; j++) m[j] = fat5__uc_dec_pool[v + k * len + j];
    return len;
}

// The full canonical (compat 0) or compatibility decomposition of cp to out (room for
// FAT5__UC_MAXDEC), its length; not yet in canonical order.
static size_t fat5__uc_decompose(uint32_t cp, int compat, uint32_t *out) {
    uint32_t m[FAT5__UC_MAXDEC];
    size_t n = 0, i, k = 0;
    if (cp < 0xA0) {
        out[0] = cp;
        return 1;
    }
    if (cp - 0xAC00u < 11172u) {   // Hangul syllable: L V or L V T
        uint32_t s = cp - 0xAC00u;
        out[0] = 0x1100u + s / 588u;
        out[1] = 0x1161u + s % 588u / 28u;
        if (s % 28u == 0) return 2;
        out[2] = 0x11A7u + s % 28u;
        return 3;
    }
    if (compat) n = fat5__uc_map(fat5__uc_kdec_key, fat5__uc_kdec_val, FAT5__UC_COUNT(fat5__uc_kdec_key), cp, m);
    if (!n) n = fat5__uc_map(fat5__uc_dec_key, fat5__uc_dec_val, FAT5__UC_COUNT(fat5__uc_dec_key), cp, m);
    if (!n) {
        out[0] = cp;
        return 1;
    }
    for (i = 0; i < n; i++) k += fat5__uc_decompose(m[i], compat, out + k);
    return k;
}

// The primary composite of the pair a b, 0 when there is none.
static uint32_t fat5__uc_compose(uint32_t a, uint32_t b) {
    size_t lo;
    uint32_t key;
    if (a - 0x1100u < 19u && b - 0x1161u < 21u) return 0xAC00u + ((a - 0x1100u) * 21u + (b - 0x1161u)) * 28u;
    if (a - 0xAC00u < 11172u && (a - 0xAC00u) % 28u == 0 && b - 0x11A8u < 27u) return a + (b - 0x11A7u);
    if (b < fat5__uc_comp_second[0]) return 0;
    lo = fat5__uc_floor(fat5__uc_comp_second, FAT5__UC_COUNT(fat5__uc_comp_second), b, 0);
    if (fat5__uc_comp_second[lo] != b) return 0;
    key = a << 8 | (uint32_t)lo;
    lo = fat5__uc_floor(fat5__uc_comp_key, FAT5__UC_COUNT(fat5__uc_comp_key), key, 0);
    return fat5__uc_comp_key[lo] == key ? fat5__uc_comp_val[lo] : 0;
}

// The decomposed text as a stream of code points: the input, and the decomposition of the code point
// being read. A copy of the struct is a saved position.
typedef struct fat5__udec {
    const char *s;
    size_t n, i;                     // the input, the offset of the next code point to decompose
    uint32_t d[FAT5__UC_MAXDEC];
    unsigned dn, di;                 // the current decomposition, the index of the next in it
    int compat;
} fat5__udec;

// the next code point of the stream without taking it; 0 at the end
static int fat5__udec_peek(fat5__udec *D, uint32_t *cp) {
    if (D->di == D->dn) {
        size_t len;
        uint32_t c;
        if (D->i >= D->n) return 0;
        c = fat5__utf8_cp(D->s + D->i, D->n - D->i, &len);
        D->i += len;
        D->dn = (unsigned)fat5__uc_decompose(c, D->compat, D->d);
        D->di = 0;
    }
    *cp = D->d[D->di];
    return 1;
}

// A run of non-starters (combining class > 0) of the stream, read in canonical order (stable by
// class). Up to FAT5__UC_RUN marks are sorted in buf; a longer run is read in one pass over the
// stream per class in it (O(marks x classes), no memory).
#define FAT5__UC_RUN 32
typedef struct fat5__urun {
    fat5__udec start, cur;           // the stream at the run's first mark; the pass reading it
    size_t k, pos;                   // marks in the run; the next index (buffered) or in the pass
    unsigned cls, next, first;       // class of this pass, least class above it seen, least class
    uint32_t buf[FAT5__UC_RUN];
    unsigned char cc[FAT5__UC_RUN];
} fat5__urun;

static void fat5__urun_rewind(fat5__urun *R) {
    R->pos = 0;
    R->cur = R->start;
    R->cls = R->first;
    R->next = 256;
}

// reads the run at D (whose next code point is a non-starter); D is left after it
static void fat5__urun_open(fat5__urun *R, fat5__udec *D) {
    uint32_t c;
    R->start = *D;
    R->k = 0;
    R->first = 256;
    while (fat5__udec_peek(D, &c)) {
        unsigned x = fat5__uc_cc(c);
        if (!x) break;
        if (R->k < FAT5__UC_RUN) {
            size_t j = R->k;   // insertion sort, stable
            while (j > 0 && R->cc[j - 1] > x) {
                R->buf[j] = R->buf[j - 1];
                R->cc[j] = R->cc[j - 1];
                j--;
            }
            R->buf[j] = c;
            R->cc[j] = (unsigned char)x;
        }
        if (x < R->first) R->first = x;
        R->k++;
        D->di++;
    }
    fat5__urun_rewind(R);
}

static int fat5__urun_next(fat5__urun *R, uint32_t *cp, unsigned *cls) {
    if (R->k <= FAT5__UC_RUN) {
        if (R->pos == R->k) return 0;
        *cp = R->buf[R->pos];
        *cls = R->cc[R->pos++];
        return 1;
    }
    for (;;) {
        uint32_t c = 0;
        unsigned x;
        if (R->pos == R->k) {   // the pass is over: the next class
            if (R->next > 255) return 0;
            R->cls = R->next;
            R->next = 256;
            R->cur = R->start;
            R->pos = 0;
        }
        fat5__udec_peek(&R->cur, &c);
        R->cur.di++;
        R->pos++;
        x = fat5__uc_cc(c);
        if (x == R->cls) {
            *cp = c;
            *cls = x;
            return 1;
        }
        if (x > R->cls && x < R->next) R->next = x;
    }
}

// the output: bytes go to out while they fit whole code points; len counts them all
typedef struct fat5__uout {
    char *out;
    size_t cap, len, w;
} fat5__uout;

static void fat5__uout_put(fat5__uout *O, uint32_t cp) {
    char b[4];
    size_t k = fat5__utf8_put(b, cp);
    if (O->w == O->len && O->len + k <= O->cap) {
        memcpy(O->out + O->w, b, k);
        O->w += k;
    }
    O->len += k;
}

// Normalization form `form` (FAT5__NFC, FAT5__NFD, FAT5__NFKC, FAT5__NFKD) of the valid UTF-8 s[0..n):
// writes at most cap bytes to out (whole code points, no NUL) and returns the length of the whole
// result, like snprintf. No allocation; any length of combining marks is handled.
static FAT5__UNUSED size_t fat5__unorm(int form, const char *s, size_t n, char *out, size_t cap) {
    fat5__udec D;
    fat5__urun R;
    fat5__uout O;
    int compose = form == FAT5__NFC || form == FAT5__NFKC, hasL = 0;
    uint32_t L = 0, c, x;
    unsigned cl;
    D.s = s;
    D.n = n;
    D.i = 0;
    D.dn = D.di = 0;
    D.compat = form == FAT5__NFKC || form == FAT5__NFKD;
    O.out = out;
    O.cap = out ? cap : 0;
    O.len = O.w = 0;
    for (;;) {
        // ASCII followed by ASCII (or the end): its own normalization, and it composes with nothing
        if (D.di == D.dn && D.i < n && (unsigned char)s[D.i] < 0x80 &&
            (D.i + 1 == n || (unsigned char)s[D.i + 1] < 0x80)) {
            if (hasL) fat5__uout_put(&O, L);
            hasL = 0;
            fat5__uout_put(&O, (unsigned char)s[D.i++]);
            continue;
        }
        if (!fat5__udec_peek(&D, &c)) break;
        if (fat5__uc_cc(c) == 0) {   // a starter
            D.di++;
            if (!compose) {
                fat5__uout_put(&O, c);
            } else if (hasL && (x = fat5__uc_compose(L, c)) != 0) {
                L = x;   // no mark stands between: the last starter takes it
            } else {
                if (hasL) fat5__uout_put(&O, L);
                L = c;
                hasL = 1;
            }
            continue;
        }
        fat5__urun_open(&R, &D);
        if (!compose || !hasL) {
            while (fat5__urun_next(&R, &c, &cl)) fat5__uout_put(&O, c);
            continue;
        }
        // Composition with the last starter: a mark is blocked when a mark of its class (the run is
        // in order) stayed before it. One pass finds the final starter, a second writes the marks
        // that stay; the starter stays open for a following starter when no mark stayed.
        {
            uint32_t L2 = L;
            unsigned last = 0;
            while (fat5__urun_next(&R, &c, &cl)) {
                if (last < cl && (x = fat5__uc_compose(L2, c)) != 0) L2 = x;
                else last = cl;
            }
            if (last == 0) {
                L = L2;
                continue;
            }
            fat5__uout_put(&O, L2);
            fat5__urun_rewind(&R);
            L2 = L;
            last = 0;
            while (fat5__urun_next(&R, &c, &cl)) {
                if (last < cl && (x = fat5__uc_compose(L2, c)) != 0) {
                    L2 = x;
                } else {
                    last = cl;
                    fat5__uout_put(&O, c);
                }
            }
            hasL = 0;
        }
    }
    if (hasL) fat5__uout_put(&O, L);
    return O.len;
}

