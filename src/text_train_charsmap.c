// =============================================================================================
// ==[8.9] text: tokenizer training — the normalisation charsmap ==
//
// fat5__tt_charsmap makes the precompiled charsmap of a normalisation rule, the rules SentencePiece
// compiles for the same names:
//   nfkc: each code point c (1..U+10FFFF less surrogates and noncharacters) whose NFKC differs from
//     c maps to NFKC(c). Then, for each code point whose NFKD is a sequence D of two or more code
//     points with NFKC(D) != D, every sequence whose code points decompose one by one into D's
//     (e.g. "e" U+0301, fullwidth "ｅ" U+0301, U+3131 U+314F for U+1100 U+1161) maps to NFKC(D)
//     (U+00E9; U+AC00), unless it is NFKC(D) itself. Last, a rule of n code points goes when the
//     rules shorter than n, applied longest match first, already give its replacement.
//   nmt_nfkc: nfkc's rules, then TAB, LF, FF, CR, U+061C, U+1680, U+200B, U+200C, U+200E, U+200F,
//     U+2028, U+2029, U+2581, U+FEFF and U+FFFD map to " " (U+061C, the Arabic letter mark, as in
//     the nmt_nfkc charsmap sentencepiece 0.2 writes); U+0001..U+0008, U+000B, U+000E..U+001F,
//     U+007F, U+008F and U+009F map to nothing; U+FF5E (fullwidth tilde) keeps itself; then the
//     redundant rules go again.
// The rules come from the Unicode data of text_unicode.c (Unicode FAT5__UNICODE_VERSION), computed
// at each call (some 0.4 s). They are the rules of the charsmaps sentencepiece 0.2 writes for these
// names, less those (360) holding a code point Unicode 16.0 added (ref/check_charsmap.py).
//
// The blob: a uint32 (little-endian) byte size of a darts-clone double array, the array's 32-bit
// units (little-endian), then the replacement strings, each NUL-terminated, sorted and each once.
// A key is the UTF-8 of a rule's sequence; its value the offset of its replacement in the strings.
// The double array (what fat5__charsmap_search walks): unit 0 is the root. A node's unit holds its
// label (bits 0-7), whether it ends a key (bit 8) and the XOR distance to its children's base
// (bits 10-31, times 256 when bit 9 is set). The child labelled b sits at base ^ b; a key's end is
// the child labelled 0, a unit holding the value in bits 0-30 with bit 31 set. The array is built
// from the keys' minimal automaton (suffixes shared, as darts-clone does when keys have values):
// two nodes whose subtrees are equal point to one base. Units no node uses hold a label that no
// walk reaching them could match (darts-clone's choice: id ^ a base unused in the 256-unit block).

// ---------------------------------------------------------------------------------------------
// the rules: code point sequences (as UTF-8) to replacements

typedef struct fat5__cmr {
    uint32_t key, klen;   // the key's bytes: arena + key
    uint32_t val, vlen;   // the replacement's bytes: arena + val
    uint32_t ncp;         // the key's code points
    int live;             // 0: erased
} fat5__cmr;

typedef struct fat5__cmap {
    fat5_ctx *ctx;
    char *arena;
    size_t n_arena, cap_arena;
    fat5__cmr *r;
    size_t n, cap;
    uint32_t *slot;       // open addressing: rule index + 1, 0 when empty
    size_t n_slot;        // a power of two
} fat5__cmap;

static void fat5__cm_free(fat5__cmap *m) {
    fat5__free(m->ctx, m->arena);
    fat5__free(m->ctx, m->r);
    fat5__free(m->ctx, m->slot);
    memset(m, 0, sizeof *m);
}

static uint32_t fat5__cm_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

// the index of the rule keyed s[0..n) (erased or not), -1 when there is none
static long fat5__cm_find(const fat5__cmap *m, const char *s, size_t n) {
    size_t i;
    if (!m->n_slot) return -1;
    for (i = fat5__cm_hash(s, n) & (m->n_slot - 1); m->slot[i]; i = (i + 1) & (m->n_slot - 1)) {
        const fat5__cmr *r = &m->r[m->slot[i] - 1];
        if (r->klen == n && !memcmp(m->arena + r->key, s, n)) return (long)(m->slot[i] - 1);
    }
    return -1;
}

// the offset in the arena of a copy of s[0..n); -1 when out of memory
static long fat5__cm_keep(fat5__cmap *m, const char *s, size_t n) {
    size_t at = m->n_arena;
    if (m->n_arena + n > 0x7fffffffu ||
        !fat5__grow(m->ctx, (void **)&m->arena, &m->cap_arena, m->n_arena + n + 1, 1))
        return -1;
    if (n) memcpy(m->arena + at, s, n);
    m->n_arena += n;
    return (long)at;
}

// Sets the rule key[0..klen) (ncp code points) -> val[0..vlen), replacing one with the same key.
// 0 when out of memory.
static int fat5__cm_put(fat5__cmap *m, const char *key, size_t klen, size_t ncp, const char *val, size_t vlen) {
    long at = fat5__cm_find(m, key, klen), k, v;
    size_t i;
    if (at >= 0) {
        fat5__cmr *r = &m->r[at];
        if (!(r->live && r->vlen == vlen && !memcmp(m->arena + r->val, val, vlen))) {
            if ((v = fat5__cm_keep(m, val, vlen)) < 0) return 0;
            r->val = (uint32_t)v, r->vlen = (uint32_t)vlen;
        }
        r->live = 1;
        return 1;
    }
    if (2 * (m->n + 1) > m->n_slot) {   // load at most 1/2
        size_t ns = m->n_slot ? 2 * m->n_slot : 1024;
        uint32_t *s = FAT5__CAST(uint32_t *, fat5__calloc(m->ctx, ns, sizeof *s));
        if (!s) return 0;
        for (i = 0; i < m->n; i++) {
            size_t j = fat5__cm_hash(m->arena + m->r[i].key, m->r[i].klen) & (ns - 1);
            while (s[j]) j = (j + 1) & (ns - 1);
            s[j] = (uint32_t)(i + 1);
        }
        fat5__free(m->ctx, m->slot);
        m->slot = s;
        m->n_slot = ns;
    }
    if (!fat5__grow(m->ctx, (void **)&m->r, &m->cap, m->n + 1, sizeof *m->r)) return 0;
    if ((k = fat5__cm_keep(m, key, klen)) < 0 || (v = fat5__cm_keep(m, val, vlen)) < 0) return 0;
    m->r[m->n].key = (uint32_t)k, m->r[m->n].klen = (uint32_t)klen;
    m->r[m->n].val = (uint32_t)v, m->r[m->n].vlen = (uint32_t)vlen;
    m->r[m->n].ncp = (uint32_t)ncp;
    m->r[m->n].live = 1;
    for (i = fat5__cm_hash(key, klen) & (m->n_slot - 1); m->slot[i]; i = (i + 1) & (m->n_slot - 1)) {}
    m->slot[i] = (uint32_t)(++m->n);
    return 1;
}

// the number of code points of the valid UTF-8 s[0..n)
static size_t fat5__cm_ncp(const char *s, size_t n) {
    size_t i, k = 0;
    for (i = 0; i < n; i++) k += ((uint8_t)s[i] & 0xC0) != 0x80;
    return k;
}

// Normalises the key of rule r with the live rules of at most maxl code points (the longest
// matching one at each position; a code point without a rule stays) and says whether the result
// is r's replacement.
static int fat5__cm_gives(const fat5__cmap *m, const fat5__cmr *r, size_t maxl) {
    const char *key = m->arena + r->key, *val = m->arena + r->val;
    size_t off[FAT5__UC_MAXDEC + 1], n = 0, i, o = 0, l, p;
    char out[FAT5__UC_MAXDEC * FAT5__UC_MAXDEC * 4];
    if (r->ncp > FAT5__UC_MAXDEC) return 0;
    for (i = 0; i < r->klen; i++)
        if (((uint8_t)key[i] & 0xC0) != 0x80) off[n++] = i;
    off[n] = r->klen;
    for (i = 0; i < n;) {
        for (l = maxl < n - i ? maxl : n - i; l > 0; l--) {
            long k = fat5__cm_find(m, key + off[i], off[i + l] - off[i]);
            if (k >= 0 && m->r[k].live) {
                if (o + m->r[k].vlen > sizeof out) return 0;
                memcpy(out + o, m->arena + m->r[k].val, m->r[k].vlen);
                o += m->r[k].vlen;
                i += l;
                break;
            }
        }
        if (l == 0) {
            p = off[i + 1] - off[i];
            if (o + p > sizeof out) return 0;
            memcpy(out + o, key + off[i], p);
            o += p;
            i++;
        }
    }
    return o == r->vlen && !memcmp(out, val, o);
}

// Erases the rules of two or more code points that the shorter ones give, shortest first.
static void fat5__cm_prune(fat5__cmap *m) {
    size_t i, len, max_len = 1;
    for (i = 0; i < m->n; i++)
        if (m->r[i].live && m->r[i].ncp > max_len) max_len = m->r[i].ncp;
    for (len = 2; len <= max_len; len++)
        for (i = 0; i < m->n; i++)
            if (m->r[i].live && m->r[i].ncp == len && fat5__cm_gives(m, &m->r[i], len - 1)) m->r[i].live = 0;
}

static int fat5__cm_is_char(uint32_t cp) {   // a Unicode scalar value that is not a noncharacter
    return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF) && !(cp >= 0xFDD0 && cp <= 0xFDEF) &&
           (cp & 0xFFFE) != 0xFFFE;
}

// a code point and one whose NFKD is that code point alone (another one)
typedef struct fat5__cm_orig { uint32_t norm, orig; } fat5__cm_orig;

static int fat5__cm_orig_cmp(const void *a, const void *b) {
    const fat5__cm_orig *x = (const fat5__cm_orig *)a, *y = (const fat5__cm_orig *)b;
    if (x->norm != y->norm) return x->norm < y->norm ? -1 : 1;
    return x->orig < y->orig ? -1 : x->orig > y->orig;
}

// The code points whose NFKD is cp alone: cp, then o[lo..hi) of the sorted table o[0..n).
static void fat5__cm_orig_range(const fat5__cm_orig *o, size_t n, uint32_t cp, size_t *lo, size_t *hi) {
    size_t a = 0, b = n;
    while (a < b) {
        size_t c = a + (b - a) / 2;
        if (o[c].norm < cp) a = c + 1;
        else b = c;
    }
    *lo = a;
    while (a < n && o[a].norm == cp) a++;
    *hi = a;
}

#define FAT5__CM_MAX_EXPAND 1000000   // sequences one decomposition may expand to (Hangul LVT: 27)

// Adds the rules of NFKC (the rule "nfkc") to m, empty on entry. 0 when out of memory, -1 when a
// decomposition expands to more than FAT5__CM_MAX_EXPAND sequences.
static int fat5__cm_nfkc(fat5__cmap *m) {
    fat5__cmap dec;             // the distinct NFKD decompositions of two or more code points (keys)
    fat5__cm_orig *orig = NULL;
    size_t n_orig = 0, cap_orig = 0, i, j;
    uint32_t cp, d[FAT5__UC_MAXDEC];
    char k[4], kd[FAT5__UC_MAXDEC * 4], kc[FAT5__UC_MAXDEC * 4 * 3 + 4];
    int ok = 0;
    memset(&dec, 0, sizeof dec);
    dec.ctx = m->ctx;
    for (cp = 1; cp <= 0x10FFFF; cp++) {
        size_t kl, dl, cl, nd;
        if (!fat5__cm_is_char(cp)) continue;
        nd = fat5__uc_decompose(cp, 1, d);
        if (nd == 1 && d[0] == cp) continue;   // NFKD and NFKC are cp itself
        kl = fat5__utf8_put(k, cp);
        dl = fat5__unorm(FAT5__NFKD, k, kl, kd, sizeof kd);
        cl = fat5__unorm(FAT5__NFKC, k, kl, kc, sizeof kc);
        if (dl > sizeof kd || cl > sizeof kc) goto done;   // not within FAT5__UC_MAXDEC: cannot happen
        if ((cl != kl || memcmp(kc, k, kl)) && !fat5__cm_put(m, k, kl, 1, kc, cl)) goto done;
        if (fat5__cm_ncp(kd, dl) == 1) {
            size_t len;
            if (!fat5__grow(m->ctx, (void **)&orig, &cap_orig, n_orig + 1, sizeof *orig)) goto done;
            orig[n_orig].norm = fat5__utf8_cp(kd, dl, &len);
            orig[n_orig++].orig = cp;
        } else if (!fat5__cm_put(&dec, kd, dl, fat5__cm_ncp(kd, dl), "", 0)) {
            goto done;
        }
    }
    if (n_orig) qsort(orig, n_orig, sizeof *orig, fat5__cm_orig_cmp);
    for (i = 0; i < dec.n; i++) {
        const char *s = dec.arena + dec.r[i].key;
        size_t sl = dec.r[i].klen, n = dec.r[i].ncp, cl, total = 1, len, p;
        size_t lo[FAT5__UC_MAXDEC], cnt[FAT5__UC_MAXDEC], at[FAT5__UC_MAXDEC];
        uint32_t c[FAT5__UC_MAXDEC];
        if (n > FAT5__UC_MAXDEC) goto done;
        cl = fat5__unorm(FAT5__NFKC, s, sl, kc, sizeof kc);
        if (cl > sizeof kc) goto done;
        if (cl == sl && !memcmp(kc, s, sl)) continue;   // nothing composes: no rule
        for (j = 0, p = 0; j < n; j++) {
            size_t hi;
            c[j] = fat5__utf8_cp(s + p, sl - p, &len);
            p += len;
            fat5__cm_orig_range(orig, n_orig, c[j], &lo[j], &hi);
            cnt[j] = 1 + (hi - lo[j]);   // c[j] itself and the others
            at[j] = 0;
            total *= cnt[j];
            if (total > FAT5__CM_MAX_EXPAND) {
                ok = -1;
                goto done;
            }
        }
        for (;;) {   // every choice of one original per code point (an odometer over at[])
            char key[FAT5__UC_MAXDEC * 4];
            size_t kl = 0;
            for (j = 0; j < n; j++) kl += fat5__utf8_put(key + kl, at[j] == 0 ? c[j] : orig[lo[j] + at[j] - 1].orig);
            if (!(kl == cl && !memcmp(key, kc, cl)) && !fat5__cm_put(m, key, kl, n, kc, cl)) goto done;
            for (j = n; j-- > 0;) {
                if (++at[j] < cnt[j]) break;
                at[j] = 0;
            }
            if (j == (size_t)-1) break;
        }
    }
    fat5__cm_prune(m);
    ok = 1;
done:
    fat5__cm_free(&dec);
    fat5__free(m->ctx, orig);
    return ok;
}

// nmt_nfkc's rules over nfkc's: the spaces and controls (see the top of the file). 0 when out of memory.
static int fat5__cm_nmt(fat5__cmap *m) {
    static const uint32_t space[] = {0x0009, 0x000A, 0x000C, 0x000D, 0x061C, 0x1680, 0x200B, 0x200C,
                                     0x200E, 0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD};
    static const uint32_t gone[] = {0x0001, 0x0002, 0x0003, 0x0004, 0x0005, 0x0006, 0x0007, 0x0008,
                                    0x000B, 0x000E, 0x000F, 0x0010, 0x0011, 0x0012, 0x0013, 0x0014,
                                    0x0015, 0x0016, 0x0017, 0x0018, 0x0019, 0x001A, 0x001B, 0x001C,
                                    0x001D, 0x001E, 0x001F, 0x007F, 0x008F, 0x009F};
    char k[4];
    size_t i, kl;
    long at;
    for (i = 0; i < FAT5__UC_COUNT(space); i++)
        if (kl = fat5__utf8_put(k, space[i]), !fat5__cm_put(m, k, kl, 1, " ", 1)) return 0;
    for (i = 0; i < FAT5__UC_COUNT(gone); i++)
        if (kl = fat5__utf8_put(k, gone[i]), !fat5__cm_put(m, k, kl, 1, "", 0)) return 0;
    kl = fat5__utf8_put(k, 0xFF5E);
    if ((at = fat5__cm_find(m, k, kl)) >= 0) m->r[at].live = 0;
    fat5__cm_prune(m);
    return 1;
}

// ---------------------------------------------------------------------------------------------
// the keys' minimal automaton (a DAWG), built from the keys in byte order: the states of the last
// key's path are kept open and each is closed, merged with an equal closed state when there is one,
// when the next key leaves it

typedef struct fat5__dawg {
    fat5_ctx *ctx;
    uint8_t *lab;          // closed states' transitions: labels
    uint32_t *dst;         //   targets (the value for label 0: a key's end)
    size_t n_tr, cap_lab, cap_dst;
    uint32_t *first, *cnt; // state s: transitions first[s] .. first[s] + cnt[s]
    size_t n_st, cap_first, cap_cnt;
    uint32_t *slot;        // the closed states by content: state + 1, 0 when empty
    size_t n_slot;
    uint8_t *plab;         // the open path: depth d's state has transitions [d * 256, d * 256 + pn[d])
    uint32_t *pdst;
    uint32_t *pn;
    size_t depth_cap;      // depths the path has room for (the longest key + 1)
    size_t prev_len;       // the last key's length
    const char *prev;
} fat5__dawg;

static uint32_t fat5__dawg_hash(const uint8_t *lab, const uint32_t *dst, size_t n) {
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) {
        h = (h ^ lab[i]) * 16777619u;
        h = (h ^ dst[i]) * 16777619u;
    }
    return h ^ (uint32_t)n;
}

// Closes the open state at depth d: the id of an equal closed state, or of a new one; the open
// state is emptied. -1 when out of memory.
static long fat5__dawg_close(fat5__dawg *g, size_t d) {
    const uint8_t *lab = g->plab + d * 256;
    const uint32_t *dst = g->pdst + d * 256;
    size_t n = g->pn[d], i, j;
    uint32_t h = fat5__dawg_hash(lab, dst, n);
    if (g->n_slot) {
        for (j = h & (g->n_slot - 1); g->slot[j]; j = (j + 1) & (g->n_slot - 1)) {
            uint32_t s = g->slot[j] - 1;
            if (g->cnt[s] == n && !memcmp(g->lab + g->first[s], lab, n) &&
                !memcmp(g->dst + g->first[s], dst, n * sizeof *dst)) {
                g->pn[d] = 0;
                return (long)s;
            }
        }
    }
    if (2 * (g->n_st + 1) > g->n_slot) {
        size_t ns = g->n_slot ? 2 * g->n_slot : 1024;
        uint32_t *sl = FAT5__CAST(uint32_t *, fat5__calloc(g->ctx, ns, sizeof *sl));
        if (!sl) return -1;
        for (i = 0; i < g->n_st; i++) {
            j = fat5__dawg_hash(g->lab + g->first[i], g->dst + g->first[i], g->cnt[i]) & (ns - 1);
            while (sl[j]) j = (j + 1) & (ns - 1);
            sl[j] = (uint32_t)(i + 1);
        }
        fat5__free(g->ctx, g->slot);
        g->slot = sl;
        g->n_slot = ns;
    }
    if (!fat5__grow(g->ctx, (void **)&g->lab, &g->cap_lab, g->n_tr + n, 1) ||
        !fat5__grow(g->ctx, (void **)&g->dst, &g->cap_dst, g->n_tr + n, sizeof *g->dst) ||
        !fat5__grow(g->ctx, (void **)&g->first, &g->cap_first, g->n_st + 1, sizeof *g->first) ||
        !fat5__grow(g->ctx, (void **)&g->cnt, &g->cap_cnt, g->n_st + 1, sizeof *g->cnt))
        return -1;
    memcpy(g->lab + g->n_tr, lab, n);
    memcpy(g->dst + g->n_tr, dst, n * sizeof *dst);
    g->first[g->n_st] = (uint32_t)g->n_tr;
    g->cnt[g->n_st] = (uint32_t)n;
    g->n_tr += n;
    for (j = h & (g->n_slot - 1); g->slot[j]; j = (j + 1) & (g->n_slot - 1)) {}
    g->slot[j] = (uint32_t)(++g->n_st);
    g->pn[d] = 0;
    return (long)(g->n_st - 1);
}

// Closes the open states deeper than depth d, linking each to its parent. 0 when out of memory.
static int fat5__dawg_close_to(fat5__dawg *g, size_t d) {
    size_t e;
    for (e = g->prev_len; e > d; e--) {
        long s = fat5__dawg_close(g, e);
        if (s < 0) return 0;
        g->pdst[(e - 1) * 256 + g->pn[e - 1] - 1] = (uint32_t)s;
    }
    return 1;
}

// Adds key[0..n) (no NUL; after the previous key in byte order, which stays readable) with value v.
// 0 when out of memory.
static int fat5__dawg_add(fat5__dawg *g, const char *key, size_t n, uint32_t v) {
    size_t p = 0, d;
    while (g->prev && p < n && p < g->prev_len && key[p] == g->prev[p]) p++;
    if (!fat5__dawg_close_to(g, p)) return 0;
    for (d = p; d < n; d++) {
        g->plab[d * 256 + g->pn[d]] = (uint8_t)key[d];
        g->pdst[d * 256 + g->pn[d]++] = 0;   // the state at depth d + 1, when it closes
    }
    g->plab[n * 256 + g->pn[n]] = 0;
    g->pdst[n * 256 + g->pn[n]++] = v;
    g->prev = key;
    g->prev_len = n;
    return 1;
}

static void fat5__dawg_free(fat5__dawg *g) {
    fat5__free(g->ctx, g->lab);
    fat5__free(g->ctx, g->dst);
    fat5__free(g->ctx, g->first);
    fat5__free(g->ctx, g->cnt);
    fat5__free(g->ctx, g->slot);
    fat5__free(g->ctx, g->plab);
    fat5__free(g->ctx, g->pdst);
    fat5__free(g->ctx, g->pn);
    memset(g, 0, sizeof *g);
}

// ---------------------------------------------------------------------------------------------
// the double array, placed from the automaton: a state's children go at the first base (scanning
// the unused units of the last 16 blocks of 256) where all their units are free; the blocks that
// leave that window are closed (their unused units labelled)

enum { FAT5__DA_FIXED = 1, FAT5__DA_BASE = 2 };   // a unit taken; a base used by a state
#define FAT5__DA_NONE 0xffffffffu
#define FAT5__DA_WINDOW 16   // blocks of 256 units searched for free ones

typedef struct fat5__dab {
    fat5_ctx *ctx;
    uint32_t *unit;
    uint32_t *next, *prev;   // the free units: a ring
    uint8_t *flag;           // FAT5__DA_*
    size_t n, cap_unit, cap_next, cap_prev, cap_flag;
    uint32_t head;           // a free unit, FAT5__DA_NONE when none is
    uint32_t *base;          // per automaton state: its children's base once placed, 0 before
    const fat5__dawg *g;
    int err;                 // 1: out of memory, 2: too large for the unit's offset field
} fat5__dab;

// Sets unit id's distance to its children's base (bits 10-31, or with bit 9: times 256).
static void fat5__dab_offset(fat5__dab *a, uint32_t id, uint32_t rel) {
    uint32_t u = a->unit[id] & (0x80000000u | 0x100u | 0xffu);
    if (rel >= (1u << 29)) {
        a->err = 2;
        return;
    }
    a->unit[id] = rel < (1u << 21) ? u | rel << 10 : u | rel << 2 | 0x200u;
}

static void fat5__dab_take(fat5__dab *a, uint32_t id);

// Closes block b: each unit not taken gets the label id ^ (a base of the block no state uses).
static void fat5__dab_close_block(fat5__dab *a, size_t b) {
    uint32_t id, unused = 0;
    for (id = (uint32_t)(b * 256); id < (b + 1) * 256; id++)
        if (!(a->flag[id] & FAT5__DA_BASE)) {
            unused = id;
            break;
        }
    for (id = (uint32_t)(b * 256); id < (b + 1) * 256; id++)
        if (!(a->flag[id] & FAT5__DA_FIXED)) {
            fat5__dab_take(a, id);
            a->unit[id] = (id ^ unused) & 0xffu;
        }
}

// Adds a block of 256 free units (closing the block that leaves the window).
static void fat5__dab_grow(fat5__dab *a) {
    size_t old = a->n, i;
    if (a->err) return;
    if (old / 256 + 1 > FAT5__DA_WINDOW) fat5__dab_close_block(a, old / 256 - FAT5__DA_WINDOW);
    if (old + 256 > (1u << 29)) {
        a->err = 2;
        return;
    }
    if (!fat5__grow(a->ctx, (void **)&a->unit, &a->cap_unit, old + 256, sizeof *a->unit) ||
        !fat5__grow(a->ctx, (void **)&a->next, &a->cap_next, old + 256, sizeof *a->next) ||
        !fat5__grow(a->ctx, (void **)&a->prev, &a->cap_prev, old + 256, sizeof *a->prev) ||
        !fat5__grow(a->ctx, (void **)&a->flag, &a->cap_flag, old + 256, 1)) {
        a->err = 1;
        return;
    }
    a->n = old + 256;
    for (i = old; i < a->n; i++) {
        a->unit[i] = 0;
        a->flag[i] = 0;
        a->next[i] = (uint32_t)(i + 1);
        a->prev[i] = (uint32_t)(i - 1);
    }
    if (a->head == FAT5__DA_NONE) {   // the new units alone
        a->prev[old] = (uint32_t)(a->n - 1);
        a->next[a->n - 1] = (uint32_t)old;
        a->head = (uint32_t)old;
    } else {                          // before the head: at the ring's end
        uint32_t last = a->prev[a->head];
        a->prev[old] = last;
        a->next[last] = (uint32_t)old;
        a->next[a->n - 1] = a->head;
        a->prev[a->head] = (uint32_t)(a->n - 1);
    }
}

// Takes unit id (growing the array when id is past its end): off the free ring.
static void fat5__dab_take(fat5__dab *a, uint32_t id) {
    if (id >= a->n) fat5__dab_grow(a);
    if (a->err || (a->flag[id] & FAT5__DA_FIXED)) return;
    if (id == a->head) a->head = a->next[id] == id ? FAT5__DA_NONE : a->next[id];
    a->next[a->prev[id]] = a->next[id];
    a->prev[a->next[id]] = a->prev[id];
    a->flag[id] |= FAT5__DA_FIXED;
}

// whether base x suits unit id's children (labels lab[0..n)): not used as a base, its distance
// from id encodable, the units of lab[1..n) free (lab[0]'s is, by the choice of x)
static int fat5__dab_fits(const fat5__dab *a, uint32_t id, uint32_t x, const uint8_t *lab, size_t n) {
    uint32_t rel = id ^ x;
    size_t i;
    if (a->flag[x] & FAT5__DA_BASE) return 0;
    if ((rel & 0xffu) && (rel & (0xffu << 21))) return 0;
    for (i = 1; i < n; i++)
        if (a->flag[x ^ lab[i]] & FAT5__DA_FIXED) return 0;
    return 1;
}

// Places state s's children for unit id: finds a base, takes the children's units, labels them
// (a key's end: the value, and unit id's end bit). Returns the base.
static uint32_t fat5__dab_arrange(fat5__dab *a, uint32_t s, uint32_t id) {
    const uint8_t *lab = a->g->lab + a->g->first[s];
    const uint32_t *dst = a->g->dst + a->g->first[s];
    size_t n = a->g->cnt[s], i;
    uint32_t x = (uint32_t)a->n | (id & 0xffu), e = a->head;
    if (e != FAT5__DA_NONE) {
        do {
            if (fat5__dab_fits(a, id, e ^ lab[0], lab, n)) {
                x = e ^ lab[0];
                break;
            }
            e = a->next[e];
        } while (e != a->head);
    }
    fat5__dab_offset(a, id, id ^ x);
    for (i = 0; i < n && !a->err; i++) {
        uint32_t c = x ^ lab[i];
        fat5__dab_take(a, c);
        if (a->err) break;
        if (lab[i] == 0) {
            a->unit[id] |= 0x100u;
            a->unit[c] = dst[i] | 0x80000000u;
        } else {
            a->unit[c] = (a->unit[c] & ~0xffu) | lab[i];
        }
    }
    if (!a->err) a->flag[x] |= FAT5__DA_BASE;
    return x;
}

// Places state s below unit id, and its descendants (a state placed already: id points to its base).
static void fat5__dab_place(fat5__dab *a, uint32_t s, uint32_t id) {
    const fat5__dawg *g = a->g;
    uint32_t x, i;
    if (a->err) return;
    if (a->base[s]) {
        uint32_t rel = a->base[s] ^ id;
        if (!(rel & (0xffu << 21)) || !(rel & 0xffu)) {
            if (g->cnt[s] && g->lab[g->first[s]] == 0) a->unit[id] |= 0x100u;
            fat5__dab_offset(a, id, rel);
            return;
        }
    }
    x = fat5__dab_arrange(a, s, id);
    if (a->err) return;
    a->base[s] = x;
    for (i = 0; i < g->cnt[s]; i++)
        if (g->lab[g->first[s] + i]) fat5__dab_place(a, g->dst[g->first[s] + i], x ^ g->lab[g->first[s] + i]);
}

static void fat5__dab_free(fat5__dab *a) {
    fat5__free(a->ctx, a->unit);
    fat5__free(a->ctx, a->next);
    fat5__free(a->ctx, a->prev);
    fat5__free(a->ctx, a->flag);
    fat5__free(a->ctx, a->base);
    memset(a, 0, sizeof *a);
}

// ---------------------------------------------------------------------------------------------
// the blob

typedef struct fat5__cm_kv { const char *key, *val; uint32_t klen, vlen, voff; } fat5__cm_kv;

static int fat5__cm_bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn;
}
static int fat5__cm_key_cmp(const void *a, const void *b) {
    const fat5__cm_kv *x = (const fat5__cm_kv *)a, *y = (const fat5__cm_kv *)b;
    return fat5__cm_bytes_cmp(x->key, x->klen, y->key, y->klen);
}
static int fat5__cm_val_cmp(const void *a, const void *b) {
    const fat5__cm_kv *x = (const fat5__cm_kv *)a, *y = (const fat5__cm_kv *)b;
    return fat5__cm_bytes_cmp(x->val, x->vlen, y->val, y->vlen);
}

// The blob of m's live rules (allocated with the context).
static fat5_status fat5__cm_compile(fat5__cmap *m, unsigned char **blob, size_t *len) {
    fat5_ctx *ctx = m->ctx;
    fat5__cm_kv *kv = NULL, *uv = NULL;
    fat5__dawg g;
    fat5__dab a;
    size_t n = 0, nu = 0, i, pool = 0, max_klen = 0;
    long root;
    unsigned char *b;
    fat5_status st = FAT5_ERR_OUT_OF_MEMORY;
    memset(&g, 0, sizeof g);
    memset(&a, 0, sizeof a);
    g.ctx = a.ctx = ctx;
    for (i = 0; i < m->n; i++) n += m->r[i].live != 0;
    kv = FAT5__CAST(fat5__cm_kv *, fat5__calloc(ctx, n ? n : 1, sizeof *kv));
    uv = FAT5__CAST(fat5__cm_kv *, fat5__calloc(ctx, n ? n : 1, sizeof *uv));
    if (!kv || !uv) goto done;
    for (i = 0, n = 0; i < m->n; i++)
        if (m->r[i].live) {
            kv[n].key = m->arena + m->r[i].key, kv[n].klen = m->r[i].klen;
            kv[n].val = m->arena + m->r[i].val, kv[n].vlen = m->r[i].vlen;
            if (kv[n].klen > max_klen) max_klen = kv[n].klen;
            n++;
        }
    // the replacement strings: sorted, each once
    memcpy(uv, kv, n * sizeof *kv);
    qsort(uv, n, sizeof *uv, fat5__cm_val_cmp);
    for (i = 0; i < n; i++)
        if (nu == 0 || fat5__cm_val_cmp(&uv[nu - 1], &uv[i])) {
            uv[nu] = uv[i];
            uv[nu++].voff = (uint32_t)pool;
            pool += uv[i].vlen + 1;
        }
    for (i = 0; i < n; i++) {
        size_t lo = 0, hi = nu;
        while (lo < hi) {
            size_t c = lo + (hi - lo) / 2;
            if (fat5__cm_val_cmp(&uv[c], &kv[i]) < 0) lo = c + 1;
            else hi = c;
        }
        kv[i].voff = uv[lo].voff;
    }
    // the automaton of the keys in byte order
    qsort(kv, n, sizeof *kv, fat5__cm_key_cmp);
    g.depth_cap = max_klen + 1;
    g.plab = FAT5__CAST(uint8_t *, fat5__calloc(ctx, g.depth_cap, 256));
    g.pdst = FAT5__CAST(uint32_t *, fat5__calloc(ctx, g.depth_cap * 256, sizeof *g.pdst));
    g.pn = FAT5__CAST(uint32_t *, fat5__calloc(ctx, g.depth_cap, sizeof *g.pn));
    if (!g.plab || !g.pdst || !g.pn) goto done;
    for (i = 0; i < n; i++)
        if (!fat5__dawg_add(&g, kv[i].key, kv[i].klen, kv[i].voff)) goto done;
    if (!fat5__dawg_close_to(&g, 0) || (root = fat5__dawg_close(&g, 0)) < 0) goto done;
    // the double array
    a.g = &g;
    a.head = FAT5__DA_NONE;
    a.base = FAT5__CAST(uint32_t *, fat5__calloc(ctx, g.n_st, sizeof *a.base));
    if (!a.base) goto done;
    fat5__dab_take(&a, 0);
    if (a.err) goto done;
    a.flag[0] |= FAT5__DA_BASE;
    fat5__dab_offset(&a, 0, 1);
    if (g.cnt[root]) fat5__dab_place(&a, (uint32_t)root, 0);
    for (i = a.n / 256 > FAT5__DA_WINDOW ? a.n / 256 - FAT5__DA_WINDOW : 0; i < a.n / 256 && !a.err; i++)
        fat5__dab_close_block(&a, i);
    if (a.err) {
        if (a.err == 2) st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_tokenizer_train: the charsmap's double array is too large");
        goto done;
    }
    *len = 4 + 4 * a.n + pool;
    b = *blob = FAT5__CAST(unsigned char *, fat5__malloc(ctx, *len));
    if (!b) goto done;
    for (i = 0; i < 4; i++) b[i] = (unsigned char)((4 * a.n) >> (8 * i));
    for (i = 0; i < a.n; i++) {
        b[4 + 4 * i] = (unsigned char)a.unit[i];
        b[5 + 4 * i] = (unsigned char)(a.unit[i] >> 8);
        b[6 + 4 * i] = (unsigned char)(a.unit[i] >> 16);
        b[7 + 4 * i] = (unsigned char)(a.unit[i] >> 24);
    }
    b += 4 + 4 * a.n;
    for (i = 0; i < nu; i++) {
        memcpy(b + uv[i].voff, uv[i].val, uv[i].vlen);
        b[uv[i].voff + uv[i].vlen] = 0;
    }
    st = FAT5_OK;
done:
    if (st == FAT5_ERR_OUT_OF_MEMORY) fat5__err(ctx, st, "fat5_tokenizer_train: the charsmap: out of memory");
    fat5__free(ctx, kv);
    fat5__free(ctx, uv);
    fat5__dawg_free(&g);
    fat5__dab_free(&a);
    return st;
}

static fat5_status fat5__tt_charsmap(fat5_ctx *ctx, const char *rule, unsigned char **blob, size_t *len) {
    fat5__cmap m;
    fat5_status st;
    int ok;
    *blob = NULL, *len = 0;
    if (!strcmp(rule, "identity")) return FAT5_OK;
    if (strcmp(rule, "nfkc") && strcmp(rule, "nmt_nfkc"))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: normalization_rule_name \"%s\" has no charsmap", rule);
    memset(&m, 0, sizeof m);
    m.ctx = ctx;
    ok = fat5__cm_nfkc(&m);
    if (ok == 1 && !strcmp(rule, "nmt_nfkc")) ok = fat5__cm_nmt(&m);
    if (ok == 1) st = fat5__cm_compile(&m, blob, len);
    else if (ok < 0) st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_tokenizer_train: the %s charsmap: a decomposition expands to too many sequences", rule);
    else st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: the %s charsmap: out of memory", rule);
    fat5__cm_free(&m);
    return st;
}
