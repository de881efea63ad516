// =============================================================================================
// ==[8.3] text: tokenizers ==
//
// Two file kinds, one tokenizer object. A tokenizer.json is interpreted as the `tokenizers`
// library does (added tokens split off the raw text, then normalizers, pre-tokenizers, the model,
// the post-processor; decoders on the way back); a SentencePiece model as the `sentencepiece`
// library does (its own normaliser and whitespace rules, Unigram or BPE, byte fallback). The two
// share the vocabulary, the byte trie and the Unigram lattice, and differ where the libraries
// differ: sentencepiece adds in float, tokenizers in double; sentencepiece takes the longest
// charsmap rule at each byte, tokenizers the first one per grapheme cluster.
//
// Everything read from a file is bounded and checked: piece and vocabulary sizes, the protobuf's
// wire types and lengths, the charsmap's double array (each unit's target inside the array, as
// darts-clone's validate), JSON member types. Errors name the field.

#define FAT5__TOK_MAX_FILE ((size_t)1 << 30)    // a tokenizer file larger than 1 GiB is refused
#define FAT5__TOK_MAX_PIECE 8000                // bytes of one piece (sentencepiece's limit)
#define FAT5__TOK_MAX_VOCAB ((int64_t)1 << 24)  // pieces + added tokens

// ---------------------------------------------------------------------------------------------
// growable scratch buffers, kept by the tokenizer between calls

typedef struct fat5__tbuf { char *p; size_t n, cap; } fat5__tbuf;        // bytes
typedef struct fat5__ubuf { uint32_t *p; size_t n, cap; } fat5__ubuf;    // 32-bit values

static int fat5__grow(fat5_ctx *ctx, void **p, size_t *cap, size_t need, size_t elem) {
    size_t c = *cap ? *cap : 64, bytes;
    void *q;
    if (need <= *cap) return 1;
    while (c < need) {
        if (c > SIZE_MAX / 2) return 0;
        c *= 2;
    }
    if (!fat5__mul_ok(c, elem, &bytes)) return 0;
    q = fat5__realloc(ctx, *p, bytes);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}
static int fat5__tbuf_put(fat5_ctx *ctx, fat5__tbuf *b, const char *s, size_t n) {
    size_t need;
    if (!fat5__add_ok(b->n, n + 1, &need) || !fat5__grow(ctx, (void **)&b->p, &b->cap, need, 1)) return 0;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 1;
}
static int fat5__ubuf_push(fat5_ctx *ctx, fat5__ubuf *b, uint32_t v) {
    if (!fat5__grow(ctx, (void **)&b->p, &b->cap, b->n + 1, sizeof(uint32_t))) return 0;
    b->p[b->n++] = v;
    return 1;
}
static int fat5__ubuf_append(fat5_ctx *ctx, fat5__ubuf *b, const uint32_t *v, size_t n) {
    if (!fat5__grow(ctx, (void **)&b->p, &b->cap, b->n + n, sizeof(uint32_t))) return 0;
    if (n) memcpy(b->p + b->n, v, n * sizeof *v);
    b->n += n;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// A byte trie over a set of keys (the vocabulary, the user-defined pieces, the added tokens).
// Node 0 is the root; a node's children are contiguous and sorted by label; value is the key's
// id or -1. Built from the keys sorted bytewise, in breadth-first order.

typedef struct fat5__tnode {
    int32_t value;
    uint32_t first;    // first child
    uint16_t n;        // children
    uint8_t label;     // the byte leading here
} fat5__tnode;

typedef struct fat5__trie {
    fat5__tnode *node;
    size_t n_nodes;
    size_t max_len;    // the longest key
    uint32_t root[256];   // the root's children by byte (0: none), the step every search starts with
} fat5__trie;

typedef struct fat5__tkeys {   // keys for a trie: key i is s + off[i], len[i] bytes, id[i]
    const char *s;
    const uint32_t *off, *len;
    const int32_t *id;
} fat5__tkeys;

static int fat5__tkey_cmp(const fat5__tkeys *k, uint32_t a, uint32_t b) {
    uint32_t la = k->len[a], lb = k->len[b];
    int c = memcmp(k->s + k->off[a], k->s + k->off[b], la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return k->id[a] < k->id[b] ? -1 : k->id[a] > k->id[b];
}

// stable bottom-up merge sort of idx[0..n) by the keys
static void fat5__tkey_sort(const fat5__tkeys *k, uint32_t *idx, uint32_t *tmp, size_t n) {
    size_t w, i;
    uint32_t *a = idx, *b = tmp;
    for (w = 1; w < n; w *= 2) {
        for (i = 0; i < n; i += 2 * w) {
            size_t lo = i, mid = i + w < n ? i + w : n, hi = i + 2 * w < n ? i + 2 * w : n, p = lo, q = mid, o = lo;
            while (p < mid && q < hi) b[o++] = fat5__tkey_cmp(k, a[q], a[p]) < 0 ? a[q++] : a[p++];
            while (p < mid) b[o++] = a[p++];
            while (q < hi) b[o++] = a[q++];
        }
        { uint32_t *t = a; a = b; b = t; }
    }
    if (a != idx) memcpy(idx, a, n * sizeof *idx);
}

static void fat5__trie_free(fat5_ctx *ctx, fat5__trie *t) {
    fat5__free(ctx, t->node);
    memset(t, 0, sizeof *t);
}

// Builds the trie of keys[0..n); equal keys keep the last id (a later entry of a vocabulary wins,
// as in a hash map filled in order).
static fat5_status fat5__trie_build(fat5_ctx *ctx, const fat5__tkeys *k, size_t n, fat5__trie *t) {
    uint32_t *idx = NULL, *tmp = NULL, *lo = NULL, *hi = NULL, *depth = NULL;
    size_t total = 1, i, used = 1;
    fat5_status st = FAT5_OK;
    memset(t, 0, sizeof *t);
    for (i = 0; i < n; i++) {
        if (!fat5__add_ok(total, k->len[i], &total)) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: trie too large");
        if (k->len[i] > t->max_len) t->max_len = k->len[i];
    }
    if (total > UINT32_MAX) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "tokenizer: the vocabulary holds more than 4 GiB of text");
    idx = FAT5__CAST(uint32_t *, fat5__calloc(ctx, n + 1, sizeof *idx));
    tmp = FAT5__CAST(uint32_t *, fat5__calloc(ctx, n + 1, sizeof *tmp));
    lo = FAT5__CAST(uint32_t *, fat5__calloc(ctx, total, sizeof *lo));
    hi = FAT5__CAST(uint32_t *, fat5__calloc(ctx, total, sizeof *hi));
    depth = FAT5__CAST(uint32_t *, fat5__calloc(ctx, total, sizeof *depth));
    t->node = FAT5__CAST(fat5__tnode *, fat5__calloc(ctx, total, sizeof *t->node));
    if (!idx || !tmp || !lo || !hi || !depth || !t->node) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory building the trie");
        goto done;
    }
    for (i = 0; i < n; i++) idx[i] = (uint32_t)i;
    fat5__tkey_sort(k, idx, tmp, n);
    t->node[0].value = -1;
    lo[0] = 0;
    hi[0] = (uint32_t)n;
    depth[0] = 0;
    for (i = 0; i < used; i++) {   // breadth-first: a node's children are appended together
        uint32_t a = lo[i], b = hi[i], d = depth[i];
        while (a < b && k->len[idx[a]] == d) t->node[i].value = k->id[idx[a++]];
        t->node[i].first = (uint32_t)used;
        while (a < b) {
            uint8_t c = (uint8_t)k->s[k->off[idx[a]] + d];
            uint32_t e = a;
            while (e < b && (uint8_t)k->s[k->off[idx[e]] + d] == c) e++;
            t->node[used].value = -1;
            t->node[used].label = c;
            lo[used] = a;
            hi[used] = e;
            depth[used] = d + 1;
            used++;
            t->node[i].n++;
            a = e;
        }
    }
    t->n_nodes = used;
    for (i = 0; i < t->node[0].n; i++) t->root[t->node[t->node[0].first + i].label] = t->node[0].first + (uint32_t)i;
done:
    fat5__free(ctx, idx);
    fat5__free(ctx, tmp);
    fat5__free(ctx, lo);
    fat5__free(ctx, hi);
    fat5__free(ctx, depth);
    if (st != FAT5_OK) fat5__trie_free(ctx, t);
    return st;
}

// the child of node labelled c, 0 when none (the root is nobody's child)
static uint32_t fat5__trie_next(const fat5__trie *t, uint32_t node, uint8_t c) {
    const fat5__tnode *nd;
    uint32_t a, b;
    if (!t->node) return 0;
    if (node == 0) return t->root[c];
    nd = &t->node[node];
    a = nd->first;
    b = nd->first + nd->n;
    while (a < b) {
        uint32_t m = a + (b - a) / 2;
        if (t->node[m].label < c) a = m + 1;
        else b = m;
    }
    return a < nd->first + nd->n && t->node[a].label == c ? a : 0;
}

// the id of exactly s[0..n), -1 when it is not a key
static int32_t fat5__trie_find(const fat5__trie *t, const char *s, size_t n) {
    uint32_t node = 0;
    size_t i;
    if (!t->node) return -1;
    for (i = 0; i < n; i++)
        if ((node = fat5__trie_next(t, node, (uint8_t)s[i])) == 0) return -1;
    return t->node[node].value;
}

// the longest key that is a prefix of s[0..n): its length (0: none) and *id
static size_t fat5__trie_longest(const fat5__trie *t, const char *s, size_t n, int32_t *id) {
    uint32_t node = 0;
    size_t i, best = 0;
    if (!t->node) return 0;
    for (i = 0; i < n; i++) {
        if ((node = fat5__trie_next(t, node, (uint8_t)s[i])) == 0) break;
        if (t->node[node].value >= 0) {
            best = i + 1;
            *id = t->node[node].value;
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// SentencePiece's precompiled charsmap: a uint32 (little-endian) byte size of a darts-clone
// double array, the array, then a pool of NUL-terminated replacement strings.

typedef struct fat5__charsmap {
    uint32_t *unit;
    size_t n_units;
    char *pool;        // ends with a NUL (added when the file's pool does not)
    size_t pool_len;
} fat5__charsmap;

#define FAT5__DA_LEAF(u) (((u) >> 8) & 1u)
#define FAT5__DA_VALUE(u) ((u) & 0x7fffffffu)
#define FAT5__DA_LABEL(u) ((u) & 0x800000ffu)
#define FAT5__DA_OFFSET(u) (((u) >> 10) << (((u) & 0x200u) >> 6))

static void fat5__charsmap_free(fat5_ctx *ctx, fat5__charsmap *m) {
    fat5__free(ctx, m->unit);
    fat5__free(ctx, m->pool);
    memset(m, 0, sizeof *m);
}

static fat5_status fat5__charsmap_load(fat5_ctx *ctx, const char *what, const unsigned char *b, size_t len,
                                       fat5__charsmap *m) {
    uint32_t size;
    size_t i;
    memset(m, 0, sizeof *m);
    if (len <= 4) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: precompiled charsmap of %zu bytes (truncated)", what, len);
    size = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (size >= len - 4 || size < 1024 || (size & 0x3ff) != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT,
                         "%s: precompiled charsmap: trie of %u bytes in a blob of %zu (want a multiple of 1024 "
                         "smaller than the blob)", what, (unsigned)size, len);
    m->n_units = size / 4;
    m->pool_len = len - 4 - size;
    m->unit = FAT5__CAST(uint32_t *, fat5__calloc(ctx, m->n_units, sizeof *m->unit));
    m->pool = FAT5__CAST(char *, fat5__malloc(ctx, m->pool_len + 1));
    if (!m->unit || !m->pool) {
        fat5__charsmap_free(ctx, m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    for (i = 0; i < m->n_units; i++) {
        const unsigned char *p = b + 4 + 4 * i;
        m->unit[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    memcpy(m->pool, b + 4 + size, m->pool_len);
    m->pool[m->pool_len] = 0;
    // darts-clone's validate: every transition stays inside the array, every value inside the pool
    if (FAT5__DA_LABEL(m->unit[0]) != 0 || FAT5__DA_LEAF(m->unit[0]) || FAT5__DA_OFFSET(m->unit[0]) == 0 ||
        ((size_t)FAT5__DA_OFFSET(m->unit[0]) | 0xff) >= m->n_units)
        goto bad;
    for (i = 1; i < m->n_units; i++) {
        uint32_t u = m->unit[i];
        if (FAT5__DA_LABEL(u) <= 0xff) {
            if (((i ^ FAT5__DA_OFFSET(u)) | 0xff) >= m->n_units) goto bad;
            if (FAT5__DA_LEAF(u) && FAT5__DA_LABEL(m->unit[i ^ FAT5__DA_OFFSET(u)]) <= 0xff) goto bad;
        } else if (FAT5__DA_VALUE(u) >= m->pool_len) {
            goto bad;
        }
    }
    return FAT5_OK;
bad:
    fat5__charsmap_free(ctx, m);
    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: precompiled charsmap: the double array is invalid", what);
}

// The rules matching a prefix of s[0..n) (stopping at a NUL byte), shortest first. Calls back
// with (length, replacement); returns how many matched.
typedef struct fat5__cm_match { size_t len; const char *repl; } fat5__cm_match;

static size_t fat5__charsmap_search(const fat5__charsmap *m, const char *s, size_t n, fat5__cm_match *out,
                                    size_t cap) {
    size_t pos, i, k = 0;
    uint32_t u;
    if (!m->unit) return 0;
    u = m->unit[0];
    pos = FAT5__DA_OFFSET(u);
    for (i = 0; i < n && s[i]; i++) {
        pos ^= (uint8_t)s[i];
        u = m->unit[pos];
        if (FAT5__DA_LABEL(u) != (uint8_t)s[i]) break;
        pos ^= FAT5__DA_OFFSET(u);
        if (FAT5__DA_LEAF(u)) {
            if (k < cap) {
                out[k].len = i + 1;
                out[k].repl = m->pool + FAT5__DA_VALUE(m->unit[pos]);
            }
            k++;
        }
    }
    return k;
}

// ---------------------------------------------------------------------------------------------
// UTF-8 as each library takes it. sentencepiece: an invalid byte is U+FFFD and one byte consumed.
// tokenizers (through Python's decode with errors="replace"): one U+FFFD per maximal subpart of an
// ill-formed sequence, i.e. the longest prefix of a valid sequence's shape.

static const char fat5__ufffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

// 1 when s[0..n) is valid UTF-8
static int fat5__utf8_valid_n(const char *s, size_t n) {
    size_t i = 0, k;
    for (; i < n; i += k)
        if ((k = fat5__utf8_len(s + i, n - i)) == 0) return 0;
    return 1;
}

// a byte piece's name, "<0xXX>" with upper-case hex as both libraries write it: 1 and *b its byte
static int fat5__byte_piece(const char *s, size_t n, unsigned *b) {
    static const char hex[] = "0123456789ABCDEF";
    const char *h, *l;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>' || !s[3] || !s[4] || !(h = strchr(hex, s[3])) ||
        !(l = strchr(hex, s[4])))
        return 0;
    if (b) *b = (unsigned)((h - hex) * 16 + (l - hex));
    return 1;
}

// bytes of the maximal subpart at s (n >= 1 bytes, s not valid there): at least 1
static size_t fat5__utf8_subpart(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0], lo = 0x80, hi = 0xBF;
    size_t k, j;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 1;
    for (j = 1; j < k && j < n; j++) {
        unsigned char t = (unsigned char)s[j];
        if (t < lo || t > hi) return j;
        lo = 0x80;
        hi = 0xBF;
    }
    return j;
}

// s[0..n) made valid UTF-8 into out (tokenizers' rule); original offsets per output byte in orig
// (when not NULL)
static int fat5__utf8_sanitize(fat5_ctx *ctx, const char *s, size_t n, fat5__tbuf *out, fat5__ubuf *orig) {
    size_t i = 0;
    out->n = 0;
    if (orig) orig->n = 0;
    if (!fat5__tbuf_put(ctx, out, "", 0)) return 0;
    while (i < n) {
        size_t k = fat5__utf8_len(s + i, n - i), j;
        const char *p = s + i;
        size_t w = k;
        if (k == 0) {
            k = fat5__utf8_subpart(s + i, n - i);
            p = fat5__ufffd;
            w = 3;
        }
        if (!fat5__tbuf_put(ctx, out, p, w)) return 0;
        if (orig)
            for (j = 0; j < w; j++)
                if (!fat5__ubuf_push(ctx, orig, (uint32_t)i)) return 0;
        i += k;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// the tokenizer object

enum { FAT5__TM_UNIGRAM = 1, FAT5__TM_BPE = 2 };
// sentencepiece piece types (ModelProto.SentencePiece.Type)
enum { FAT5__SP_NORMAL = 1, FAT5__SP_UNKNOWN = 2, FAT5__SP_CONTROL = 3, FAT5__SP_USER = 4, FAT5__SP_UNUSED = 5,
       FAT5__SP_BYTE = 6 };

// normalizers, pre-tokenizers and decoders of a tokenizer.json, each a flat list (a Sequence
// inside a Sequence is spliced in order)
enum { FAT5__N_PRECOMPILED = 1, FAT5__N_REPLACE, FAT5__N_STRIP, FAT5__N_PREPEND, FAT5__N_NFC,
       FAT5__N_NFD, FAT5__N_NFKC, FAT5__N_NFKD };
enum { FAT5__P_METASPACE = 1, FAT5__P_WHITESPACE_SPLIT, FAT5__P_BYTELEVEL };
enum { FAT5__D_METASPACE = 1, FAT5__D_BYTELEVEL, FAT5__D_BYTEFALLBACK, FAT5__D_FUSE, FAT5__D_STRIP, FAT5__D_REPLACE };

#define FAT5__RE_MAX 16   // atoms of a Replace pattern
typedef struct fat5__re_atom { uint32_t cp; uint32_t min, max; } fat5__re_atom;   // a literal with {min,max}

typedef struct fat5__tstep {
    int kind;
    char *a, *b;            // Replace: pattern / content; Prepend, Metaspace: the string; Strip: content
    size_t a_len, b_len;
    int f1, f2;             // Strip: left/right (normalizer) or start/stop counts (decoder); Metaspace:
                            // prepend scheme (0 always, 1 first, 2 never) and split; ByteLevel:
                            // add_prefix_space and use_regex
    int n_atoms;            // Replace with a regex: its atoms (0: a plain string)
    fat5__re_atom atom[FAT5__RE_MAX];
    fat5__charsmap cm;      // Precompiled
} fat5__tstep;

typedef struct fat5__added {
    uint32_t off, len;      // content in the tokenizer's pool
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
} fat5__added;

typedef struct fat5__titem { int seq; uint32_t first, n; } fat5__titem;   // template: sequence 0/1, or ids

typedef struct fat5__merge { uint64_t key; uint32_t rank, id; } fat5__merge;   // BPE: (a, b) -> rank, new id

struct fat5_tokenizer {
    fat5_ctx *ctx;
    int is_json;
    int model;                 // FAT5__TM_*
    // the model's pieces
    int32_t n_pieces;
    fat5__tbuf pool;           // all strings of the tokenizer, NUL-separated
    uint32_t *off, *len;       // piece i
    double *score;             // Unigram scores
    uint8_t *type;             // sentencepiece types (tokenizer.json: all NORMAL)
    fat5__trie vocab;          // piece -> id
    int32_t unk_id, eos_id, pad_id;
    int byte_fallback;
    int32_t byte_id[256];      // <0xXX> -> id, -1 when absent
    double min_score;
    // sentencepiece
    fat5__trie user;           // user-defined pieces (matched before normalisation, never split)
    fat5__charsmap cm;
    int add_dummy_prefix, remove_extra_ws, escape_ws, ws_suffix;
    uint32_t unk_surface;      // offset in pool
    // tokenizer.json
    fat5__added *added;
    int32_t n_added;
    fat5__trie added_raw, added_norm;   // contents -> index into added (raw text / normalised text)
    int32_t vocab_size;        // max id + 1 over pieces and added tokens
    uint32_t *id_off;          // [vocab_size] piece text of every id (added tokens included), offset in pool
    uint8_t *id_special;       // [vocab_size] 1 for special added tokens
    fat5__tstep *norm, *pre, *dec;
    int n_norm, n_pre, n_dec, has_decoder;
    int fuse_unk, ignore_merges;
    uint32_t cs_prefix, eow_suffix;     // BPE continuing_subword_prefix / end_of_word_suffix (0: none)
    uint32_t cs_prefix_len, eow_suffix_len;
    fat5__merge *merges;       // open-addressing table
    size_t merge_cap;
    fat5__titem *tmpl[2];      // single / pair template
    int n_tmpl[2];
    fat5__ubuf tmpl_ids;
    // scratch, reused by every call
    fat5__tbuf s0, s1, s2, s3, sn;
    fat5__ubuf o0, o1, o2, o3, on, ids, spl, spl2;
    void *lat;                 // lattice: best scores, starts and ids
    size_t lat_cap;
};

static void fat5__steps_free(fat5_ctx *ctx, fat5__tstep *s, int n) {
    int i;
    for (i = 0; s && i < n; i++) {
        fat5__free(ctx, s[i].a);
        fat5__free(ctx, s[i].b);
        fat5__charsmap_free(ctx, &s[i].cm);
    }
    fat5__free(ctx, s);
}

FAT5_API void fat5_tokenizer_destroy(fat5_tokenizer *t) {
    fat5_ctx *ctx;
    if (!t) return;
    ctx = t->ctx;
    fat5__free(ctx, t->pool.p);
    fat5__free(ctx, t->off);
    fat5__free(ctx, t->len);
    fat5__free(ctx, t->score);
    fat5__free(ctx, t->type);
    fat5__trie_free(ctx, &t->vocab);
    fat5__trie_free(ctx, &t->user);
    fat5__charsmap_free(ctx, &t->cm);
    fat5__free(ctx, t->added);
    fat5__trie_free(ctx, &t->added_raw);
    fat5__trie_free(ctx, &t->added_norm);
    fat5__free(ctx, t->id_off);
    fat5__free(ctx, t->id_special);
    fat5__steps_free(ctx, t->norm, t->n_norm);
    fat5__steps_free(ctx, t->pre, t->n_pre);
    fat5__steps_free(ctx, t->dec, t->n_dec);
    fat5__free(ctx, t->merges);
    fat5__free(ctx, t->tmpl[0]);
    fat5__free(ctx, t->tmpl[1]);
    fat5__free(ctx, t->tmpl_ids.p);
    fat5__free(ctx, t->s0.p);
    fat5__free(ctx, t->s1.p);
    fat5__free(ctx, t->s2.p);
    fat5__free(ctx, t->s3.p);
    fat5__free(ctx, t->sn.p);
    fat5__free(ctx, t->on.p);
    fat5__free(ctx, t->o0.p);
    fat5__free(ctx, t->o1.p);
    fat5__free(ctx, t->o2.p);
    fat5__free(ctx, t->o3.p);
    fat5__free(ctx, t->ids.p);
    fat5__free(ctx, t->spl.p);
    fat5__free(ctx, t->spl2.p);
    fat5__free(ctx, t->lat);
    fat5__free(ctx, t);
}

static const char *fat5__piece(const fat5_tokenizer *t, int32_t id) { return t->pool.p + t->off[id]; }

// appends s[0..n) and a NUL to the pool; *off gets where it starts
static int fat5__pool_add(fat5_tokenizer *t, const char *s, size_t n, uint32_t *off) {
    size_t at = t->pool.n;
    if (at > UINT32_MAX - n - 1) return 0;
    if (!fat5__tbuf_put(t->ctx, &t->pool, s, n) || !fat5__tbuf_put(t->ctx, &t->pool, "", 0)) return 0;
    t->pool.n++;   // keep the NUL inside the pool
    *off = (uint32_t)at;
    return 1;
}

// allocates the per-piece arrays for n pieces
static fat5_status fat5__pieces_alloc(fat5_tokenizer *t, const char *what, int64_t n) {
    if (n <= 0 || n > FAT5__TOK_MAX_VOCAB)
        return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: %lld pieces (want 1 .. %lld)", what, (long long)n,
                         (long long)FAT5__TOK_MAX_VOCAB);
    t->n_pieces = (int32_t)n;
    t->off = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)n, sizeof *t->off));
    t->len = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)n, sizeof *t->len));
    t->score = FAT5__CAST(double *, fat5__calloc(t->ctx, (size_t)n, sizeof *t->score));
    t->type = FAT5__CAST(uint8_t *, fat5__calloc(t->ctx, (size_t)n, 1));
    if (!t->off || !t->len || !t->score || !t->type) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    return FAT5_OK;
}

// the trie of the pieces whose type passes keep (a bit set of types; 0: all)
static fat5_status fat5__pieces_trie(fat5_tokenizer *t, unsigned keep, fat5__trie *out) {
    fat5__tkeys k;
    uint32_t *off = NULL, *len = NULL;
    int32_t *id = NULL;
    size_t n = 0;
    int32_t i;
    fat5_status st;
    off = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)t->n_pieces, sizeof *off));
    len = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)t->n_pieces, sizeof *len));
    id = FAT5__CAST(int32_t *, fat5__calloc(t->ctx, (size_t)t->n_pieces, sizeof *id));
    if (!off || !len || !id) {
        st = fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < t->n_pieces; i++) {
        if (keep && !(keep & (1u << t->type[i]))) continue;
        off[n] = t->off[i];
        len[n] = t->len[i];
        id[n++] = i;
    }
    k.s = t->pool.p;
    k.off = off;
    k.len = len;
    k.id = id;
    st = fat5__trie_build(t->ctx, &k, n, out);
done:
    fat5__free(t->ctx, off);
    fat5__free(t->ctx, len);
    fat5__free(t->ctx, id);
    return st;
}

// 1 when every byte of s[0..n) has its byte piece (byte fallback can spell it)
static int fat5__has_byte_pieces(const fat5_tokenizer *t, const char *s, size_t n) {
    size_t j;
    for (j = 0; j < n; j++)
        if (t->byte_id[(unsigned char)s[j]] < 0) return 0;
    return 1;
}
// the byte pieces of s[0..n) appended to out; 0 when out of memory
static int fat5__push_byte_pieces(const fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    size_t j;
    for (j = 0; j < n; j++)
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)t->byte_id[(unsigned char)s[j]])) return 0;
    return 1;
}

// byte pieces "<0xXX>" (upper-case hex, as both libraries write them)
static void fat5__find_byte_pieces(fat5_tokenizer *t) {
    int b;
    for (b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = fat5__trie_find(&t->vocab, name, 6);
    }
}

// ---------------------------------------------------------------------------------------------
// SentencePiece model files: a protobuf ModelProto. Only the fields that change encoding or
// decoding are read; every other field is skipped by its wire type.

typedef struct fat5__pb {
    const unsigned char *p, *end;
} fat5__pb;

typedef struct fat5__pbf {       // one field
    uint32_t num;
    int wire;                    // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
    uint64_t v;                  // varint / fixed value
    const unsigned char *data;   // length-delimited payload
    size_t len;
} fat5__pbf;

static int fat5__pb_varint(fat5__pb *r, uint64_t *v) {
    int shift = 0;
    *v = 0;
    while (r->p < r->end && shift < 64) {
        unsigned char c = *r->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 1;
        shift += 7;
    }
    return 0;
}

// next field: 1, 0 at the end, -1 on a malformed field (*why says what)
static int fat5__pb_next(fat5__pb *r, fat5__pbf *f, const char **why) {
    uint64_t key, n;
    if (r->p >= r->end) return 0;
    if (!fat5__pb_varint(r, &key)) { *why = "truncated field key"; return -1; }
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff) { *why = "field number out of range"; return -1; }
    switch (f->wire) {
    case 0:
        if (!fat5__pb_varint(r, &f->v)) { *why = "truncated varint"; return -1; }
        return 1;
    case 1: case 5: {
        size_t k = f->wire == 1 ? 8 : 4, i;
        if ((size_t)(r->end - r->p) < k) { *why = "truncated fixed-width value"; return -1; }
        f->v = 0;
        for (i = 0; i < k; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += k;
        return 1;
    }
    case 2:
        if (!fat5__pb_varint(r, &n)) { *why = "truncated length"; return -1; }
        if (n > (uint64_t)(r->end - r->p)) { *why = "length past the end of the message"; return -1; }
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return 1;
    default:
        *why = "unsupported wire type (groups are not used by ModelProto)";
        return -1;
    }
}

static fat5_status fat5__pb_type(fat5_ctx *ctx, const char *what, const char *field, const fat5__pbf *f, int want) {
    static const char *names[] = {"varint", "fixed64", "length-delimited", "?", "?", "fixed32"};
    if (f->wire == want) return FAT5_OK;
    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto %s (field %u): wire type %s, expected %s", what, field,
                     (unsigned)f->num, names[f->wire], names[want]);
}

static float fat5__pb_float(uint64_t v) {
    uint32_t u = (uint32_t)v;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

typedef struct fat5__spm_spec {
    int model_type, byte_fallback, ws_suffix;
    const unsigned char *unk_surface, *eos_piece, *pad_piece;
    size_t unk_surface_len, eos_piece_len, pad_piece_len;
    int has_unk_surface;
    const unsigned char *charsmap;
    size_t charsmap_len;
    int add_dummy_prefix, remove_extra_ws, escape_ws;
    int has_denorm;
} fat5__spm_spec;

#define FAT5__PB_WANT(field, wt) \
    do { if ((st = fat5__pb_type(ctx, what, field, &f, wt)) != FAT5_OK) return st; } while (0)

static fat5_status fat5__pb_fail(fat5_ctx *ctx, const char *what, const char *msg, const char *why) {
    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto %s: %s (truncated or not a SentencePiece model)", what, msg, why);
}

// One of ModelProto's settings messages, msg its field number: 2 trainer_spec, 3 normalizer_spec,
// 5 denormalizer_spec (a denormalizer with rules would rewrite decoded text: not supported, and
// none of the T5 family has one).
static fat5_status fat5__spm_spec_msg(fat5_ctx *ctx, const char *what, int msg, const unsigned char *d, size_t n,
                                      fat5__spm_spec *sp) {
    fat5__pb r;
    fat5__pbf f = {0, 0, 0, NULL, 0};
    const char *why = "";
    int k;
    fat5_status st;
    r.p = d;
    r.end = d + n;
    while ((k = fat5__pb_next(&r, &f, &why)) > 0) {
        if (msg == 2) {
            switch (f.num) {
            case 3: FAT5__PB_WANT("trainer_spec.model_type", 0); sp->model_type = (int)f.v; break;
            case 24: FAT5__PB_WANT("trainer_spec.treat_whitespace_as_suffix", 0); sp->ws_suffix = f.v != 0; break;
            case 35: FAT5__PB_WANT("trainer_spec.byte_fallback", 0); sp->byte_fallback = f.v != 0; break;
            case 44:
                FAT5__PB_WANT("trainer_spec.unk_surface", 2);
                sp->unk_surface = f.data;
                sp->unk_surface_len = f.len;
                sp->has_unk_surface = 1;
                break;
            case 47: FAT5__PB_WANT("trainer_spec.eos_piece", 2); sp->eos_piece = f.data; sp->eos_piece_len = f.len; break;
            case 48: FAT5__PB_WANT("trainer_spec.pad_piece", 2); sp->pad_piece = f.data; sp->pad_piece_len = f.len; break;
            default: break;
            }
        } else if (msg == 3) {
            switch (f.num) {
            case 2:
                FAT5__PB_WANT("normalizer_spec.precompiled_charsmap", 2);
                sp->charsmap = f.data;
                sp->charsmap_len = f.len;
                break;
            case 3: FAT5__PB_WANT("normalizer_spec.add_dummy_prefix", 0); sp->add_dummy_prefix = f.v != 0; break;
            case 4: FAT5__PB_WANT("normalizer_spec.remove_extra_whitespaces", 0); sp->remove_extra_ws = f.v != 0; break;
            case 5: FAT5__PB_WANT("normalizer_spec.escape_whitespaces", 0); sp->escape_ws = f.v != 0; break;
            default: break;
            }
        } else if (f.num == 2 && f.wire == 2 && f.len > 0) {
            sp->has_denorm = 1;
        }
    }
    return k < 0 ? fat5__pb_fail(ctx, what, msg == 2 ? "trainer_spec" : msg == 3 ? "normalizer_spec" : "denormalizer_spec", why)
                 : FAT5_OK;
}

static fat5_status fat5__spm_load(fat5_tokenizer *t, const char *what, const unsigned char *d, size_t n) {
    fat5_ctx *ctx = t->ctx;
    fat5__pb r;
    fat5__pbf f = {0, 0, 0, NULL, 0};
    fat5__spm_spec sp;
    const char *why = "";
    int64_t count = 0, i;
    int k;
    fat5_status st;
    memset(&sp, 0, sizeof sp);
    sp.model_type = 1;
    sp.add_dummy_prefix = sp.remove_extra_ws = sp.escape_ws = 1;
    // pass 1: count the pieces, read the specs
    r.p = d;
    r.end = d + n;
    while ((k = fat5__pb_next(&r, &f, &why)) > 0) {
        if (f.num == 1) { FAT5__PB_WANT("pieces", 2); count++; }
        else if (f.num == 2 || f.num == 3 || f.num == 5) {
            FAT5__PB_WANT(f.num == 2 ? "trainer_spec" : f.num == 3 ? "normalizer_spec" : "denormalizer_spec", 2);
            if ((st = fat5__spm_spec_msg(ctx, what, (int)f.num, f.data, f.len, &sp))) return st;
        }
    }
    if (k < 0) return fat5__pb_fail(ctx, what, "", why);
    if (count == 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto has no pieces (not a SentencePiece model?)", what);
    if (sp.model_type != 1 && sp.model_type != 2)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: SentencePiece model type %s", what,
                         sp.model_type == 3 ? "WORD" : sp.model_type == 4 ? "CHAR" : "(unknown)");
    if (sp.has_denorm) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: denormalizer_spec rules", what);
    if ((st = fat5__pieces_alloc(t, what, count))) return st;
    t->model = sp.model_type == 1 ? FAT5__TM_UNIGRAM : FAT5__TM_BPE;
    t->byte_fallback = sp.byte_fallback;
    t->ws_suffix = sp.ws_suffix;
    t->add_dummy_prefix = sp.add_dummy_prefix;
    t->remove_extra_ws = sp.remove_extra_ws;
    t->escape_ws = sp.escape_ws;
    // pass 2: the pieces
    r.p = d;
    i = 0;
    t->unk_id = -1;
    t->min_score = FLT_MAX;
    while (fat5__pb_next(&r, &f, &why) > 0) {
        fat5__pb q;
        fat5__pbf g = {0, 0, 0, NULL, 0};
        const unsigned char *piece = NULL;
        size_t plen = 0;
        int type = FAT5__SP_NORMAL, has_piece = 0;
        float score = 0;
        char field[64];
        if (f.num != 1) continue;
        q.p = f.data;
        q.end = f.data + f.len;
        while ((k = fat5__pb_next(&q, &g, &why)) > 0) {
            snprintf(field, sizeof field, "pieces[%lld]", (long long)i);
            if (g.num == 1) {
                if ((st = fat5__pb_type(ctx, what, field, &g, 2))) return st;
                piece = g.data;
                plen = g.len;
                has_piece = 1;
            } else if (g.num == 2) {
                if ((st = fat5__pb_type(ctx, what, field, &g, 5))) return st;
                score = fat5__pb_float(g.v);
            } else if (g.num == 3) {
                if ((st = fat5__pb_type(ctx, what, field, &g, 0))) return st;
                type = (int)g.v;
            }
        }
        if (k < 0) {
            snprintf(field, sizeof field, "pieces[%lld]", (long long)i);
            return fat5__pb_fail(ctx, what, field, why);
        }
        if (!has_piece || plen == 0)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: empty piece", what, (long long)i);
        if (plen >= FAT5__TOK_MAX_PIECE || memchr(piece, 0, plen))
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: %s", what, (long long)i,
                             plen >= FAT5__TOK_MAX_PIECE ? "longer than 8000 bytes" : "holds a NUL byte");
        if (!fat5__utf8_valid_n((const char *)piece, plen) || !(type >= 1 && type <= 6))
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: %s", what, (long long)i,
                             type >= 1 && type <= 6 ? "not UTF-8" : "unknown type");
        if (type == FAT5__SP_BYTE && !fat5__byte_piece((const char *)piece, plen, NULL))
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: a BYTE piece not named <0xXX>", what,
                             (long long)i);
        if (score != score || score > FLT_MAX || score < -FLT_MAX)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: score is NaN or infinite", what, (long long)i);
        if (!fat5__pool_add(t, (const char *)piece, plen, &t->off[i]))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        t->len[i] = (uint32_t)plen;
        t->score[i] = score;
        t->type[i] = (uint8_t)type;
        if (type == FAT5__SP_UNKNOWN) {
            if (t->unk_id >= 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto: more than one unknown piece", what);
            t->unk_id = (int32_t)i;
        }
        if (type == FAT5__SP_NORMAL && score < t->min_score) t->min_score = score;
        i++;
    }
    if (t->unk_id < 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto: no piece of type UNKNOWN", what);
    for (i = 0; t->model == FAT5__TM_BPE && i < t->n_pieces; i++)   // sentencepiece splits them back by merge history
        if (t->type[i] == FAT5__SP_UNUSED)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: UNUSED pieces in a BPE model", what);
    if (!fat5__pool_add(t, sp.has_unk_surface ? (const char *)sp.unk_surface : " \xE2\x81\x87 ",
                        sp.has_unk_surface ? sp.unk_surface_len : 5, &t->unk_surface))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    // every piece once (sentencepiece refuses a model that defines one twice)
    if ((st = fat5__pieces_trie(t, 0, &t->vocab))) return st;
    for (i = 0; i < t->n_pieces; i++)
        if (fat5__trie_find(&t->vocab, fat5__piece(t, (int32_t)i), t->len[i]) != i) {
            char buf[64];
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto: piece '%s' is defined twice", what,
                             fat5__msg_name(buf, sizeof buf, fat5__piece(t, (int32_t)i)));
        }
    fat5__trie_free(ctx, &t->vocab);
    // the pieces the model matches in text: normal, user-defined, unused (skipped by Unigram)
    if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_NORMAL | 1u << FAT5__SP_USER | 1u << FAT5__SP_UNUSED, &t->vocab)))
        return st;
    if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_USER, &t->user))) return st;
    {   // byte pieces are BYTE-typed pieces "<0xXX>"
        fat5__trie bytes;
        int b;
        if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_BYTE, &bytes))) return st;
        for (b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_id[b] = fat5__trie_find(&bytes, name, 6);
        }
        fat5__trie_free(ctx, &bytes);
    }
    if (t->byte_fallback)
        for (i = 0; i < 256; i++)
            if (t->byte_id[i] < 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte_fallback is on but the byte piece <0x%02X> is missing",
                                 what, (unsigned)i);
    if (sp.charsmap_len && (st = fat5__charsmap_load(ctx, what, sp.charsmap, sp.charsmap_len, &t->cm))) return st;
    {   // EOS and padding: the trainer's pieces ("</s>", "<pad>" by default) when they are control pieces
        fat5__trie all;
        int32_t e, p;
        if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_CONTROL, &all))) return st;
        e = fat5__trie_find(&all, sp.eos_piece ? (const char *)sp.eos_piece : "</s>", sp.eos_piece ? sp.eos_piece_len : 4);
        p = fat5__trie_find(&all, sp.pad_piece ? (const char *)sp.pad_piece : "<pad>", sp.pad_piece ? sp.pad_piece_len : 5);
        fat5__trie_free(ctx, &all);
        t->eos_id = e;
        t->pad_id = p;
    }
    t->vocab_size = t->n_pieces;
    return FAT5_OK;
}
#undef FAT5__PB_WANT

// ---------------------------------------------------------------------------------------------
// Unigram: the best segmentation of a normalised string (Viterbi over the pieces that start at
// each character). sentencepiece sums float scores (and rebases them past 1e5, as it does);
// tokenizers sums doubles. A character no piece covers is the unknown piece at min_score - 10;
// user-defined pieces score 0.1 * (bytes - 1) (sentencepiece). Ties keep the first candidate.
// Output: the pieces as (start, end, id) triples in t->ids.

typedef struct fat5__lat { double score; int32_t start, id; } fat5__lat;

static fat5_status fat5__unigram(fat5_tokenizer *t, const char *s, size_t n) {
    fat5__lat *L;
    size_t pos, i, frontier = 0;
    const int spm = !t->is_json;
    const double unk_score = spm ? (double)((float)t->min_score - 10.0f) : t->min_score - 10.0;
    if (!fat5__grow(t->ctx, &t->lat, &t->lat_cap, n + 1, sizeof(fat5__lat)))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    L = FAT5__CAST(fat5__lat *, t->lat);
    for (i = 0; i <= n; i++) {
        L[i].score = 0;
        L[i].start = -1;
        L[i].id = -1;
    }
    t->ids.n = 0;
    for (pos = 0; pos < n;) {
        double here = L[pos].score;
        uint32_t node = 0;
        size_t mb, k;
        int single = 0;
        if (spm && (here < -100000.0 || here > 100000.0)) {   // sentencepiece's rebase of large scores
            for (i = pos; i <= frontier; i++)
                if (i == pos || L[i].start != -1) L[i].score = (double)((float)L[i].score - (float)here);
            here = 0;
        }
        mb = spm ? (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(unsigned char)s[pos] >> 4]
                 : fat5__utf8_len(s + pos, n - pos);
        if (mb == 0) mb = 1;
        if (mb > n - pos) mb = n - pos;
        for (k = pos; k < n; k++) {
            int32_t id;
            double sc, cand;
            if ((node = fat5__trie_next(&t->vocab, node, (uint8_t)s[k])) == 0) break;
            if ((id = t->vocab.node[node].value) < 0) continue;
            if (spm && t->type[id] == FAT5__SP_UNUSED) continue;
            if (k + 1 > frontier) frontier = k + 1;
            sc = spm && t->type[id] == FAT5__SP_USER ? (double)(float)(0.1 * (double)(k - pos)) : t->score[id];
            cand = spm ? (double)((float)sc + (float)here) : sc + here;
            if (L[k + 1].start == -1 || cand > L[k + 1].score) {
                L[k + 1].score = cand;
                L[k + 1].start = (int32_t)pos;
                L[k + 1].id = id;
            }
            if (k + 1 - pos == mb) single = 1;
        }
        if (!single) {
            double cand = spm ? (double)((float)unk_score + (float)here) : unk_score + here;
            if (pos + mb > frontier) frontier = pos + mb;
            if (L[pos + mb].start == -1 || cand > L[pos + mb].score) {
                if (t->unk_id < 0)   // tokenizers fails here (only where the unknown would be taken)
                    return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG,
                                     "tokenize: a character has no piece and the Unigram model has no unk_id");
                L[pos + mb].score = cand;
                L[pos + mb].start = (int32_t)pos;
                L[pos + mb].id = t->unk_id;
            }
        }
        pos += mb;
    }
    // backtrack, then reverse into (start, end, id) triples
    for (i = n; i > 0; i = (size_t)L[i].start)
        if (!fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)L[i].id) || !fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)i) ||
            !fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)L[i].start))
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (i = 0; i < t->ids.n / 2; i++) {
        uint32_t x = t->ids.p[i];
        t->ids.p[i] = t->ids.p[t->ids.n - 1 - i];
        t->ids.p[t->ids.n - 1 - i] = x;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// sentencepiece BPE: adjacent symbols merge while the concatenation is a piece, best score first
// (ties: leftmost); user-defined pieces are never merged. Triples in t->ids as for Unigram.

typedef struct fat5__bsym { int32_t prev, next; uint32_t start, len; uint8_t freeze; } fat5__bsym;
typedef struct fat5__bpair { float score; uint32_t left, right, size; } fat5__bpair;

// A binary heap of T whose top is the element BEFORE(a, b) (on values) puts first: NAME_push adds
// x, NAME_pop removes and returns the top (*n > 0); it serves both BPE agendas below.
#define FAT5__HEAP(NAME, T, BEFORE)                                   \
    static void NAME##_push(T *h, size_t *n, T x) {                   \
        size_t i = (*n)++;                                            \
        while (i > 0 && BEFORE(x, h[(i - 1) / 2])) {                  \
            h[i] = h[(i - 1) / 2];                                    \
            i = (i - 1) / 2;                                          \
        }                                                             \
        h[i] = x;                                                     \
    }                                                                 \
    static T NAME##_pop(T *h, size_t *n) {                            \
        T top = h[0], x = h[--*n];                                    \
        size_t i = 0;                                                 \
        for (;;) {                                                    \
            size_t c = 2 * i + 1;                                     \
            if (c >= *n) break;                                       \
            if (c + 1 < *n && BEFORE(h[c + 1], h[c])) c++;            \
            if (!BEFORE(h[c], x)) break;                              \
            h[i] = h[c];                                              \
            i = c;                                                    \
        }                                                             \
        if (*n) h[i] = x;                                             \
        return top;                                                   \
    }

// pair a comes out of the agenda before b: the higher score, then the leftmost
#define FAT5__BPAIR_BEFORE(a, b) ((a).score != (b).score ? (a).score > (b).score : (a).left < (b).left)
FAT5__HEAP(fat5__bheap, fat5__bpair, FAT5__BPAIR_BEFORE)
#undef FAT5__BPAIR_BEFORE

static void fat5__spm_bpe_pair(const fat5_tokenizer *t, const char *s, const fat5__bsym *y, int32_t l, int32_t r,
                               fat5__bpair *h, size_t *nh) {
    fat5__bpair p;
    int32_t id;
    if (l < 0 || r < 0 || y[l].freeze || y[r].freeze) return;
    id = fat5__trie_find(&t->vocab, s + y[l].start, y[l].len + y[r].len);
    if (id < 0) return;
    p.score = (float)t->score[id];
    p.left = (uint32_t)l;
    p.right = (uint32_t)r;
    p.size = y[l].len + y[r].len;
    fat5__bheap_push(h, nh, p);
}

static fat5_status fat5__spm_bpe(fat5_tokenizer *t, const char *s, size_t n) {
    fat5__bsym *y;
    fat5__bpair *h;
    size_t ny = 0, nh = 0, pos, bytes;
    int32_t i;
    // symbols and the agenda share the lattice scratch (n symbols, at most 2n live pairs)
    if (!fat5__mul_ok(n + 1, sizeof(fat5__bsym) + 3 * sizeof(fat5__bpair), &bytes) ||
        !fat5__grow(t->ctx, &t->lat, &t->lat_cap, bytes, 1))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    y = FAT5__CAST(fat5__bsym *, t->lat);
    h = FAT5__CAST(fat5__bpair *, (void *)((char *)t->lat + (n + 1) * sizeof(fat5__bsym)));
    for (pos = 0; pos < n; ny++) {
        int32_t uid;
        size_t k = fat5__trie_longest(&t->user, s + pos, n - pos, &uid);
        y[ny].freeze = k > 0;
        if (!k) {
            k = (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(unsigned char)s[pos] >> 4];
            if (k > n - pos) k = n - pos;
        }
        y[ny].start = (uint32_t)pos;
        y[ny].len = (uint32_t)k;
        y[ny].prev = (int32_t)ny - 1;
        y[ny].next = pos + k < n ? (int32_t)ny + 1 : -1;
        pos += k;
    }
    for (i = 0; i + 1 < (int32_t)ny; i++) fat5__spm_bpe_pair(t, s, y, i, i + 1, h, &nh);
    while (nh) {
        fat5__bpair top = fat5__bheap_pop(h, &nh);
        fat5__bsym *l = &y[top.left], *r = &y[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) y[r->next].prev = (int32_t)top.left;
        r->len = 0;
        fat5__spm_bpe_pair(t, s, y, l->prev, (int32_t)top.left, h, &nh);
        fat5__spm_bpe_pair(t, s, y, (int32_t)top.left, l->next, h, &nh);
    }
    t->ids.n = 0;
    for (i = ny ? 0 : -1; i >= 0; i = y[i].next) {
        int32_t id = fat5__trie_find(&t->vocab, s + y[i].start, y[i].len);
        if (id < 0) id = t->unk_id;
        if (!fat5__ubuf_push(t->ctx, &t->ids, y[i].start) || !fat5__ubuf_push(t->ctx, &t->ids, y[i].start + y[i].len) ||
            !fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)id))
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// sentencepiece's normaliser: user-defined pieces pass as they are; else the longest charsmap rule
// (among the first 32 matches) or one character (an invalid byte: U+FFFD); spaces become U+2581;
// leading, trailing and repeated spaces go (remove_extra_whitespaces); U+2581 before the text
// (add_dummy_prefix) or after it (treat_whitespace_as_suffix).

static size_t fat5__spm_prefix(const fat5_tokenizer *t, const char *s, size_t n, const char **out, size_t *out_len) {
    fat5__cm_match m[32];
    size_t k, i, best = 0;
    int32_t id;
    const char *repl = NULL;
    if ((k = fat5__trie_longest(&t->user, s, n, &id)) > 0) {
        *out = s;
        *out_len = k;
        return k;
    }
    k = fat5__charsmap_search(&t->cm, s, n, m, 32);
    if (k > 32) k = 32;
    for (i = 0; i < k; i++)
        if (best == 0 || m[i].len > best) {
            best = m[i].len;
            repl = m[i].repl;
        }
    if (best) {
        *out = repl;
        *out_len = strlen(repl);
        return best;
    }
    if ((k = fat5__utf8_len(s, n)) == 0) {
        *out = fat5__ufffd;
        *out_len = 3;
        return 1;
    }
    *out = s;
    *out_len = k;
    return k;
}

static fat5_status fat5__spm_normalize(fat5_tokenizer *t, const char *s, size_t n, fat5__tbuf *o) {
    const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
    size_t wl = t->escape_ws ? 3 : 1, i;
    int prev_space;
    o->n = 0;
    if (!fat5__tbuf_put(t->ctx, o, "", 0)) goto oom;
    if (n == 0) return FAT5_OK;
    if (t->remove_extra_ws)
        while (n) {
            const char *p;
            size_t pl, k = fat5__spm_prefix(t, s, n, &p, &pl);
            if (!(pl == 1 && p[0] == ' ')) break;
            s += k;
            n -= k;
        }
    if (n == 0) return FAT5_OK;
    if (!t->ws_suffix && t->add_dummy_prefix && !fat5__tbuf_put(t->ctx, o, ws, wl)) goto oom;
    prev_space = t->remove_extra_ws;
    while (n) {
        const char *p;
        size_t pl, k = fat5__spm_prefix(t, s, n, &p, &pl);
        while (prev_space && pl && p[0] == ' ') {
            p++;
            pl--;
        }
        if (pl) {
            for (i = 0; i < pl; i++)
                if (!(p[i] == ' ' ? fat5__tbuf_put(t->ctx, o, ws, wl) : fat5__tbuf_put(t->ctx, o, p + i, 1))) goto oom;
            prev_space = p[pl - 1] == ' ';
        }
        s += k;
        n -= k;
        if (!t->remove_extra_ws) prev_space = 0;
    }
    if (t->remove_extra_ws)
        while (o->n >= wl && memcmp(o->p + o->n - wl, ws, wl) == 0) o->p[o->n -= wl] = 0;
    if (t->ws_suffix && t->add_dummy_prefix && !fat5__tbuf_put(t->ctx, o, ws, wl)) goto oom;
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// sentencepiece: text -> ids appended to out (unknown runs merged, or bytes with byte fallback)
static fat5_status fat5__spm_encode(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5_status st;
    size_t i;
    int prev_unk = 0;
    if ((st = fat5__spm_normalize(t, s, n, &t->s0))) return st;
    if (t->s0.n == 0) return FAT5_OK;
    st = t->model == FAT5__TM_UNIGRAM ? fat5__unigram(t, t->s0.p, t->s0.n) : fat5__spm_bpe(t, t->s0.p, t->s0.n);
    if (st) return st;
    for (i = 0; i + 3 <= t->ids.n; i += 3) {
        uint32_t a = t->ids.p[i], b = t->ids.p[i + 1];
        int32_t id = (int32_t)t->ids.p[i + 2];
        int unk;
        unk = id == t->unk_id;
        if (unk && t->byte_fallback) {   // the load made sure all 256 byte pieces exist
            if (!fat5__push_byte_pieces(t, t->s0.p + a, b - a, out)) goto oom;
        } else if (!(prev_unk && unk) && !fat5__ubuf_push(t->ctx, out, (uint32_t)id)) {
            goto oom;
        }
        prev_unk = unk;
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// sentencepiece: ids -> text. Byte pieces gather into bytes (each invalid byte U+FFFD); control
// pieces vanish (or show as their text when keep_special); unknown pieces are the unknown surface
// (" \u2047 "); U+2581 is a space, and the first piece's leading one goes.
static fat5_status fat5__spm_decode(fat5_tokenizer *t, const int32_t *ids, int64_t n, int keep_special, fat5__tbuf *o) {
    int64_t i;
    size_t q0 = 0;   // start of the pending bytes in t->s1
    int bos_ws = 1;
    size_t base = 0;   // where the current run starts (kept control pieces start a new one)
    o->n = 0;
    t->s1.n = 0;
    if (!fat5__tbuf_put(t->ctx, o, "", 0)) goto oom;
    for (i = 0; i <= n; i++) {
        int32_t id = i < n ? ids[i] : -1;
        const char *p;
        size_t pl;
        if (i < n && t->type[id] == FAT5__SP_BYTE) {
            unsigned v = 0;
            if (fat5__byte_piece(fat5__piece(t, id), t->len[id], &v)) {
                char c = (char)v;
                if (!fat5__tbuf_put(t->ctx, &t->s1, &c, 1)) goto oom;
                continue;
            }
        }
        while (q0 < t->s1.n) {   // flush the pending bytes
            size_t k = fat5__utf8_len(t->s1.p + q0, t->s1.n - q0);
            if (!(k ? fat5__tbuf_put(t->ctx, o, t->s1.p + q0, k) : fat5__tbuf_put(t->ctx, o, fat5__ufffd, 3))) goto oom;
            q0 += k ? k : 1;
        }
        t->s1.n = q0 = 0;
        if (i == n) break;
        if (o->n > base) bos_ws = 0;
        if (t->type[id] == FAT5__SP_CONTROL) {
            if (keep_special) {   // the piece's text, then the rest decoded as a text of its own
                if (!fat5__tbuf_put(t->ctx, o, fat5__piece(t, id), t->len[id])) goto oom;
                base = o->n;
                bos_ws = 1;
            }
            continue;
        }
        p = fat5__piece(t, id);
        pl = t->len[id];
        if (t->type[id] == FAT5__SP_UNKNOWN) {
            if (!fat5__tbuf_put(t->ctx, o, t->pool.p + t->unk_surface, strlen(t->pool.p + t->unk_surface))) goto oom;
        } else {
            size_t j = 0;
            int has_bos_ws = 0;
            if (bos_ws && (t->add_dummy_prefix || t->remove_extra_ws) && pl >= 3 && memcmp(p, "\xE2\x96\x81", 3) == 0) {
                j = 3;
                has_bos_ws = !t->remove_extra_ws;
            }
            for (; j < pl; j++) {
                if (j + 3 <= pl && memcmp(p + j, "\xE2\x96\x81", 3) == 0) {
                    if (!fat5__tbuf_put(t->ctx, o, " ", 1)) goto oom;
                    j += 2;
                } else if (!fat5__tbuf_put(t->ctx, o, p + j, 1)) {
                    goto oom;
                }
            }
            if (has_bos_ws) bos_ws = 0;
        }
        if (o->n > base) bos_ws = 0;
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "detokenize: out of memory");
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json: loading

static const char fat5__b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// standard base64 with padding; *out allocated (fat5__free); 0 when malformed
static int fat5__b64_decode(fat5_ctx *ctx, const char *s, size_t n, unsigned char **out, size_t *out_len) {
    size_t i, o = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    unsigned char *b;
    *out = NULL;
    if (n % 4) return 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=') pad++;
    b = FAT5__CAST(unsigned char *, fat5__malloc(ctx, n / 4 * 3 + 1));
    if (!b) return 0;
    for (i = 0; i < n - pad; i++) {
        const char *c = s[i] ? strchr(fat5__b64, s[i]) : NULL;
        if (!c) {
            fat5__free(ctx, b);
            return 0;
        }
        acc = acc << 6 | (uint32_t)(c - fat5__b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out = b;
    *out_len = o;
    return 1;
}

#define FAT5__TJ_FAIL(...) do { st = fat5__err(ctx, FAT5_ERR_FORMAT, __VA_ARGS__); goto done; } while (0)

// a member that must be a string (or absent when optional): NULL when absent
static fat5_status fat5__tj_str(fat5_ctx *ctx, const char *what, const fat5__json *o, const char *key, int required,
                                const fat5__json **out) {
    const fat5__json *j = fat5__json_get(o, key);
    *out = NULL;
    if (!j || j->type == FAT5__J_NULL) {
        if (required) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' is missing", what, key);
        return FAT5_OK;
    }
    if (j->type != FAT5__J_STRING) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' must be a string", what, key);
    *out = j;
    return FAT5_OK;
}
static fat5_status fat5__tj_bool(fat5_ctx *ctx, const char *what, const fat5__json *o, const char *key, int dflt, int *out) {
    const fat5__json *j = fat5__json_get(o, key);
    *out = dflt;
    if (!j || j->type == FAT5__J_NULL) return FAT5_OK;
    if (j->type != FAT5__J_TRUE && j->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' must be true or false", what, key);
    *out = j->type == FAT5__J_TRUE;
    return FAT5_OK;
}
static fat5_status fat5__tj_int(fat5_ctx *ctx, const char *what, const fat5__json *o, const char *key, int64_t lo,
                                int64_t hi, int64_t dflt, int64_t *out) {
    const fat5__json *j = fat5__json_get(o, key);
    *out = dflt;
    if (!j || j->type == FAT5__J_NULL) return FAT5_OK;
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_i64(j, out) || *out < lo || *out > hi)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' must be an integer in %lld .. %lld", what, key, (long long)lo,
                         (long long)hi);
    return FAT5_OK;
}

static char *fat5__memdup(fat5_ctx *ctx, const char *s, size_t n) {
    char *p = FAT5__CAST(char *, fat5__malloc(ctx, n + 1));
    if (p) {
        if (n) memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static const char *fat5__tj_type(const fat5__json *o) {
    const fat5__json *ty = fat5__json_get(o, "type");
    return ty && ty->type == FAT5__J_STRING ? ty->str : NULL;
}

// A Replace pattern {"String": s} or {"Regex": r}. A regex is taken when it is a sequence of
// literal characters (escaped or not), each with an optional quantifier ? * + {n} {n,} {n,m};
// any other construct is refused.
static fat5_status fat5__tj_pattern(fat5_ctx *ctx, const char *what, const fat5__json *pat, fat5__tstep *s) {
    const fat5__json *str = fat5__json_get(pat, "String"), *re = fat5__json_get(pat, "Regex");
    const char *p, *e;
    char buf[64];
    if (pat && pat->type == FAT5__J_STRING) str = pat;
    if (str && str->type == FAT5__J_STRING) {
        if (str->len == 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: an empty Replace pattern", what);
        s->a = fat5__memdup(ctx, str->str, str->len);
        s->a_len = str->len;
        return s->a ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    if (!re || re->type != FAT5__J_STRING)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: a Replace pattern must be {\"String\": ...} or {\"Regex\": ...}", what);
    p = re->str;
    e = re->str + re->len;
    while (p < e) {
        fat5__re_atom *a;
        size_t k;
        if (s->n_atoms == FAT5__RE_MAX) goto unsupported;
        a = &s->atom[s->n_atoms++];
        if (*p == '\\') {
            p++;
            if (p >= e || !strchr("\\.^$|?*+()[]{}/ -", *p)) goto unsupported;
        } else if (strchr(".^$|?*+()[]{}", *p)) {
            goto unsupported;
        }
        k = fat5__utf8_len(p, (size_t)(e - p));
        a->cp = fat5__utf8_cp(p, (size_t)(e - p), &k);
        p += k;
        a->min = a->max = 1;
        if (p < e && (*p == '?' || *p == '*' || *p == '+')) {
            a->min = *p == '+';
            a->max = *p == '?' ? 1 : UINT32_MAX;
            p++;
        } else if (p < e && *p == '{') {
            char *q;
            unsigned long lo, hi;
            lo = strtoul(p + 1, &q, 10);
            if (q == p + 1 || lo > 100000) goto unsupported;
            hi = lo;
            if (*q == ',') {
                const char *r = q + 1;
                hi = *r == '}' ? (unsigned long)UINT32_MAX : strtoul(r, &q, 10);
                if (*r == '}') q = (char *)(uintptr_t)r;
                else if (q == r || hi < lo) goto unsupported;
            }
            if (*q != '}') goto unsupported;
            a->min = (uint32_t)lo;
            a->max = (uint32_t)hi;
            p = q + 1;
        }
        if (a->max == 0) goto unsupported;
    }
    if (s->n_atoms == 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: an empty Replace pattern", what);
    {   // neighbours with the same character are one atom (a{1,2}a* is a{1,}); then at most one atom
        // may have a variable count, and the pattern must not match the empty string
        int i, k = 0, var = 0;
        uint32_t lo = 0;
        for (i = 0; i < s->n_atoms; i++) {
            if (k > 0 && s->atom[k - 1].cp == s->atom[i].cp) {
                fat5__re_atom *p = &s->atom[k - 1];
                p->min += s->atom[i].min;
                p->max = p->max > UINT32_MAX - s->atom[i].max ? UINT32_MAX : p->max + s->atom[i].max;
            } else {
                s->atom[k++] = s->atom[i];
            }
        }
        s->n_atoms = k;
        for (i = 0; i < k; i++) {
            var += s->atom[i].min != s->atom[i].max;
            lo += s->atom[i].min;
        }
        if (var > 1 || lo == 0) goto unsupported;
    }
    return FAT5_OK;
unsupported:
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: Replace regex '%s' (only literal characters with "
                     "quantifiers are implemented)", what, fat5__msg_name(buf, sizeof buf, re->str));
}

// Metaspace's fields (the pre-tokenizer's and the decoder's): replacement, prepend_scheme (or the
// older add_prefix_space), split
static fat5_status fat5__tj_metaspace(fat5_ctx *ctx, const char *what, const fat5__json *o, fat5__tstep *s) {
    const fat5__json *rep, *sch;
    int aps;
    fat5_status st;
    char buf[64];
    if ((st = fat5__tj_str(ctx, what, o, "replacement", 1, &rep))) return st;
    if (rep->len == 0 || fat5__utf8_len(rep->str, rep->len) != rep->len)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Metaspace: 'replacement' must be one character", what);
    s->a = fat5__memdup(ctx, rep->str, rep->len);
    s->a_len = rep->len;
    if (!s->a) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    if ((st = fat5__tj_str(ctx, what, o, "prepend_scheme", 0, &sch))) return st;
    if (sch) {
        if (!strcmp(sch->str, "always")) s->f1 = 0;
        else if (!strcmp(sch->str, "first")) s->f1 = 1;
        else if (!strcmp(sch->str, "never")) s->f1 = 2;
        else return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: Metaspace prepend_scheme '%s'", what,
                              fat5__msg_name(buf, sizeof buf, sch->str));
    } else {
        if ((st = fat5__tj_bool(ctx, what, o, "add_prefix_space", 1, &aps))) return st;
        s->f1 = aps ? 0 : 2;
    }
    return fat5__tj_bool(ctx, what, o, "split", 1, &s->f2);
}

// appends the steps of one normalizer / pre-tokenizer / decoder (a Sequence recursively)
static fat5_status fat5__tj_steps(fat5_tokenizer *t, const char *what, const fat5__json *o, int which, int depth,
                                  fat5__tstep **list, int *n) {
    fat5_ctx *ctx = t->ctx;
    const char *ty;
    fat5__tstep *s;
    fat5_status st = FAT5_OK;
    const char *seqkey = which == 0 ? "normalizers" : which == 1 ? "pretokenizers" : "decoders";
    char buf[64];
    if (!o || o->type == FAT5__J_NULL) return FAT5_OK;
    if (o->type != FAT5__J_OBJECT || !(ty = fat5__tj_type(o)))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: must be an object with a \"type\"", what);
    if (strcmp(ty, "Sequence") == 0) {
        const fat5__json *arr = fat5__json_get(o, seqkey), *c;
        if (!arr || arr->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Sequence without a '%s' array", what, seqkey);
        if (depth > 8) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Sequences nested more than 8 deep", what);
        for (c = arr->child; c; c = c->next)
            if ((st = fat5__tj_steps(t, what, c, which, depth + 1, list, n))) return st;
        return FAT5_OK;
    }
    if (*n >= 64) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: more than 64 steps", what);
    {
        fat5__tstep *nl = FAT5__CAST(fat5__tstep *, fat5__realloc(ctx, *list, (size_t)(*n + 1) * sizeof **list));
        if (!nl) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        *list = nl;
    }
    s = &(*list)[(*n)++];
    memset(s, 0, sizeof *s);
    if (which == 0) {   // normalizers
        if (strcmp(ty, "Precompiled") == 0) {
            const fat5__json *cm;
            unsigned char *blob = NULL;
            size_t blen = 0;
            s->kind = FAT5__N_PRECOMPILED;
            if ((st = fat5__tj_str(ctx, what, o, "precompiled_charsmap", 1, &cm))) return st;
            if (!fat5__b64_decode(ctx, cm->str, cm->len, &blob, &blen))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Precompiled: precompiled_charsmap is not base64", what);
            st = fat5__charsmap_load(ctx, what, blob, blen, &s->cm);
            fat5__free(ctx, blob);
            return st;
        }
        if (strcmp(ty, "Replace") == 0) {
            const fat5__json *c;
            s->kind = FAT5__N_REPLACE;
            if ((st = fat5__tj_pattern(ctx, what, fat5__json_get(o, "pattern"), s))) return st;
            if ((st = fat5__tj_str(ctx, what, o, "content", 1, &c))) return st;
            s->b = fat5__memdup(ctx, c->str, c->len);
            s->b_len = c->len;
            return s->b ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        }
        if (strcmp(ty, "Strip") == 0) {
            s->kind = FAT5__N_STRIP;
            if ((st = fat5__tj_bool(ctx, what, o, "strip_left", 1, &s->f1))) return st;
            return fat5__tj_bool(ctx, what, o, "strip_right", 1, &s->f2);
        }
        if (strcmp(ty, "Prepend") == 0) {
            const fat5__json *c;
            s->kind = FAT5__N_PREPEND;
            if ((st = fat5__tj_str(ctx, what, o, "prepend", 1, &c))) return st;
            s->a = fat5__memdup(ctx, c->str, c->len);
            s->a_len = c->len;
            return s->a ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        }
        if (strcmp(ty, "NFC") == 0) { s->kind = FAT5__N_NFC; return FAT5_OK; }
        if (strcmp(ty, "NFD") == 0) { s->kind = FAT5__N_NFD; return FAT5_OK; }
        if (strcmp(ty, "NFKC") == 0) { s->kind = FAT5__N_NFKC; return FAT5_OK; }
        if (strcmp(ty, "NFKD") == 0) { s->kind = FAT5__N_NFKD; return FAT5_OK; }
    } else if (which == 1) {   // pre-tokenizers
        if (strcmp(ty, "Metaspace") == 0) {
            s->kind = FAT5__P_METASPACE;
            return fat5__tj_metaspace(ctx, what, o, s);
        }
        if (strcmp(ty, "WhitespaceSplit") == 0) { s->kind = FAT5__P_WHITESPACE_SPLIT; return FAT5_OK; }
        if (strcmp(ty, "ByteLevel") == 0) {
            s->kind = FAT5__P_BYTELEVEL;
            if ((st = fat5__tj_bool(ctx, what, o, "add_prefix_space", 1, &s->f1))) return st;
            return fat5__tj_bool(ctx, what, o, "use_regex", 1, &s->f2);
        }
    } else {   // decoders
        if (strcmp(ty, "Metaspace") == 0) {
            s->kind = FAT5__D_METASPACE;
            return fat5__tj_metaspace(ctx, what, o, s);
        }
        if (strcmp(ty, "ByteLevel") == 0) { s->kind = FAT5__D_BYTELEVEL; return FAT5_OK; }
        if (strcmp(ty, "ByteFallback") == 0) { s->kind = FAT5__D_BYTEFALLBACK; return FAT5_OK; }
        if (strcmp(ty, "Fuse") == 0) { s->kind = FAT5__D_FUSE; return FAT5_OK; }
        if (strcmp(ty, "Strip") == 0) {
            const fat5__json *c;
            int64_t a, b;
            s->kind = FAT5__D_STRIP;
            if ((st = fat5__tj_str(ctx, what, o, "content", 1, &c))) return st;
            if (fat5__utf8_len(c->str, c->len) != c->len || c->len == 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Strip: 'content' must be one character", what);
            s->a = fat5__memdup(ctx, c->str, c->len);
            s->a_len = c->len;
            if (!s->a) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            if ((st = fat5__tj_int(ctx, what, o, "start", 0, 1 << 20, 0, &a))) return st;
            if ((st = fat5__tj_int(ctx, what, o, "stop", 0, 1 << 20, 0, &b))) return st;
            s->f1 = (int)a;
            s->f2 = (int)b;
            return FAT5_OK;
        }
        if (strcmp(ty, "Replace") == 0) {
            const fat5__json *c;
            s->kind = FAT5__D_REPLACE;
            if ((st = fat5__tj_pattern(ctx, what, fat5__json_get(o, "pattern"), s))) return st;
            if ((st = fat5__tj_str(ctx, what, o, "content", 1, &c))) return st;
            s->b = fat5__memdup(ctx, c->str, c->len);
            s->b_len = c->len;
            return s->b ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        }
    }
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: %s", what, fat5__msg_name(buf, sizeof buf, ty));
}

static fat5_status fat5__hf_normalize(fat5_tokenizer *t, const char *s, size_t n, uint32_t orig0, fat5__tbuf *out,
                                      fat5__ubuf *orig);
static int32_t fat5__tokenizer_text_id(const fat5_tokenizer *t, const char *text);

// BPE merges: an open-addressing table from (a, b) to (rank, merged id)
static uint64_t fat5__merge_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}
static fat5__merge *fat5__merge_find(const fat5_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i;
    if (!t->merge_cap) return NULL;
    for (i = (size_t)fat5__merge_hash(key) & (t->merge_cap - 1);; i = (i + 1) & (t->merge_cap - 1)) {
        if (t->merges[i].key == key && t->merges[i].id != UINT32_MAX) return &t->merges[i];
        if (t->merges[i].id == UINT32_MAX) return NULL;
    }
}

static fat5_status fat5__tj_model(fat5_tokenizer *t, const char *what, const fat5__json *m) {
    fat5_ctx *ctx = t->ctx;
    const char *ty = fat5__tj_type(m);
    const fat5__json *vocab, *e;
    fat5_status st = FAT5_OK;
    char buf[64];
    int64_t i;
    if (!m || m->type != FAT5__J_OBJECT) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: no \"model\" object", what);
    vocab = fat5__json_get(m, "vocab");
    if (!ty) ty = fat5__json_get(m, "merges") ? "BPE" : vocab && vocab->type == FAT5__J_ARRAY ? "Unigram" : "?";
    if (!vocab) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model: no 'vocab'", what);
    if (strcmp(ty, "Unigram") == 0) {
        int64_t unk;
        t->model = FAT5__TM_UNIGRAM;
        if (vocab->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab must be an array of [piece, score]", what);
        if ((st = fat5__pieces_alloc(t, what, (int64_t)vocab->n))) return st;
        t->min_score = HUGE_VAL;
        for (i = 0, e = vocab->child; e; e = e->next, i++) {
            const fat5__json *p = e->type == FAT5__J_ARRAY ? e->child : NULL, *sc = p ? p->next : NULL;
            double v;
            if (!p || p->type != FAT5__J_STRING || !sc || sc->type != FAT5__J_NUMBER || sc->next ||
                !fat5__json_as_double(sc, &v))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab[%lld] must be [piece, score]", what, (long long)i);
            if (p->len >= FAT5__TOK_MAX_PIECE)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab[%lld]: piece longer than 8000 bytes", what, (long long)i);
            if (!fat5__pool_add(t, p->str, p->len, &t->off[i])) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            t->len[i] = (uint32_t)p->len;
            t->score[i] = v;
            t->type[i] = FAT5__SP_NORMAL;
            if (v < t->min_score) t->min_score = v;
        }
        if ((st = fat5__tj_int(ctx, what, m, "unk_id", 0, t->n_pieces - 1, -1, &unk))) return st;
        t->unk_id = (int32_t)unk;
        if ((st = fat5__tj_bool(ctx, what, m, "byte_fallback", 0, &t->byte_fallback))) return st;
        if ((st = fat5__pieces_trie(t, 0, &t->vocab))) return st;
        fat5__find_byte_pieces(t);
        return FAT5_OK;
    }
    if (strcmp(ty, "BPE") == 0) {
        const fat5__json *merges = fat5__json_get(m, "merges"), *unk, *csp, *eow, *drop;
        int64_t n = 0;
        size_t cap;
        t->model = FAT5__TM_BPE;
        if (vocab->type != FAT5__J_OBJECT)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab must be an object {piece: id}", what);
        for (e = vocab->child; e; e = e->next) {
            int64_t id;
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &id) || id < 0 || id >= FAT5__TOK_MAX_VOCAB)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab['%s'] must be an id in 0 .. 2^24", what,
                                 fat5__msg_name(buf, sizeof buf, e->key));
            if (id + 1 > n) n = id + 1;
        }
        if (n > 2 * (int64_t)vocab->n + 65536)   // a few entries cannot ask for 2^24 ids' worth of memory
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab: ids up to %lld for %zu pieces (too sparse)", what,
                             (long long)n - 1, vocab->n);
        if ((st = fat5__pieces_alloc(t, what, n))) return st;
        for (e = vocab->child; e; e = e->next) {
            int64_t id;
            size_t kl = strlen(e->key);
            fat5__json_as_i64(e, &id);
            if (kl >= FAT5__TOK_MAX_PIECE) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab: piece longer than 8000 bytes", what);
            if (!fat5__pool_add(t, e->key, kl, &t->off[id])) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            t->len[id] = (uint32_t)kl;
            t->type[id] = FAT5__SP_NORMAL;   // ids no piece names keep type 0: they decode to nothing
        }
        if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_NORMAL, &t->vocab))) return st;
        fat5__find_byte_pieces(t);
        if ((st = fat5__tj_bool(ctx, what, m, "byte_fallback", 0, &t->byte_fallback))) return st;
        if ((st = fat5__tj_bool(ctx, what, m, "fuse_unk", 0, &t->fuse_unk))) return st;
        if ((st = fat5__tj_bool(ctx, what, m, "ignore_merges", 0, &t->ignore_merges))) return st;
        drop = fat5__json_get(m, "dropout");
        if (drop && drop->type != FAT5__J_NULL) {
            double d;
            if (drop->type != FAT5__J_NUMBER || !fat5__json_as_double(drop, &d))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.dropout must be a number or null", what);
            if (d != 0) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: BPE dropout (random merges)", what);
        }
        t->unk_id = -1;
        if ((st = fat5__tj_str(ctx, what, m, "unk_token", 0, &unk))) return st;
        if (unk && (t->unk_id = fat5__trie_find(&t->vocab, unk->str, unk->len)) < 0)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.unk_token '%s' is not in the vocabulary", what,
                             fat5__msg_name(buf, sizeof buf, unk->str));
        if ((st = fat5__tj_str(ctx, what, m, "continuing_subword_prefix", 0, &csp))) return st;
        if ((st = fat5__tj_str(ctx, what, m, "end_of_word_suffix", 0, &eow))) return st;
        if ((csp && csp->len && !fat5__pool_add(t, csp->str, csp->len, &t->cs_prefix)) ||
            (eow && eow->len && !fat5__pool_add(t, eow->str, eow->len, &t->eow_suffix)))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        t->cs_prefix_len = csp ? (uint32_t)csp->len : 0;
        t->eow_suffix_len = eow ? (uint32_t)eow->len : 0;
        if (!merges || merges->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges must be an array", what);
        for (cap = 16; cap < 2 * merges->n + 2; cap *= 2) {}
        t->merges = FAT5__CAST(fat5__merge *, fat5__calloc(ctx, cap, sizeof *t->merges));
        if (!t->merges) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        t->merge_cap = cap;
        for (i = 0; i < (int64_t)cap; i++) t->merges[i].id = UINT32_MAX;
        for (i = 0, e = merges->child; e; e = e->next, i++) {
            const char *a, *b;
            size_t al, bl;
            int32_t ia, ib, inew;
            uint64_t key;
            size_t j;
            if (e->type == FAT5__J_STRING) {
                const char *sp = strchr(e->str, ' ');
                if (!sp || strchr(sp + 1, ' '))
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld] is not \"a b\"", what, (long long)i);
                a = e->str;
                al = (size_t)(sp - e->str);
                b = sp + 1;
                bl = e->len - al - 1;
            } else if (e->type == FAT5__J_ARRAY && e->n == 2 && e->child->type == FAT5__J_STRING &&
                       e->child->next->type == FAT5__J_STRING) {
                a = e->child->str;
                al = e->child->len;
                b = e->child->next->str;
                bl = e->child->next->len;
            } else {
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld] is not \"a b\" or [a, b]", what, (long long)i);
            }
            ia = fat5__trie_find(&t->vocab, a, al);
            ib = fat5__trie_find(&t->vocab, b, bl);
            if (ia < 0 || ib < 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld]: a part is not in the vocabulary", what,
                                 (long long)i);
            if (t->cs_prefix_len && bl >= t->cs_prefix_len && memcmp(b, t->pool.p + t->cs_prefix, t->cs_prefix_len) == 0) {
                b += t->cs_prefix_len;
                bl -= t->cs_prefix_len;
            }
            t->s0.n = 0;
            if (!fat5__tbuf_put(ctx, &t->s0, a, al) || !fat5__tbuf_put(ctx, &t->s0, b, bl))
                return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            if ((inew = fat5__trie_find(&t->vocab, t->s0.p, t->s0.n)) < 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld]: the merged piece is not in the vocabulary",
                                 what, (long long)i);
            key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
            for (j = (size_t)fat5__merge_hash(key) & (cap - 1); t->merges[j].id != UINT32_MAX && t->merges[j].key != key;
                 j = (j + 1) & (cap - 1)) {}
            t->merges[j].key = key;   // a repeated pair takes the later rank, as a map filled in order
            t->merges[j].rank = (uint32_t)i;
            t->merges[j].id = (uint32_t)inew;
        }
        return FAT5_OK;
    }
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: model type %s", what, fat5__msg_name(buf, sizeof buf, ty));
}

// TemplateProcessing: single / pair lists of {"Sequence": {"id": "A"|"B"}} and
// {"SpecialToken": {"id": NAME}}, NAME's ids from "special_tokens"
static fat5_status fat5__tj_template(fat5_tokenizer *t, const char *what, const fat5__json *pp) {
    fat5_ctx *ctx = t->ctx;
    const fat5__json *specials = fat5__json_get(pp, "special_tokens");
    int w;
    char buf[64];
    for (w = 0; w < 2; w++) {
        const fat5__json *list = fat5__json_get(pp, w ? "pair" : "single"), *e;
        int k = 0;
        if (!list || list->type == FAT5__J_NULL) {
            t->n_tmpl[w] = -1;
            continue;
        }
        if (list->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: '%s' must be an array", what, w ? "pair" : "single");
        t->tmpl[w] = FAT5__CAST(fat5__titem *, fat5__calloc(ctx, list->n + 1, sizeof(fat5__titem)));
        if (!t->tmpl[w]) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        for (e = list->child; e; e = e->next, k++) {
            const fat5__json *sq = fat5__json_get(e, "Sequence"), *sp = fat5__json_get(e, "SpecialToken"), *id;
            fat5__titem *it = &t->tmpl[w][k];
            if (sq && (id = fat5__json_get(sq, "id")) && id->type == FAT5__J_STRING &&
                (!strcmp(id->str, "A") || !strcmp(id->str, "B"))) {
                it->seq = id->str[0] - 'A';
            } else if (sp && (id = fat5__json_get(sp, "id")) && id->type == FAT5__J_STRING) {
                const fat5__json *def = fat5__json_get(specials, id->str), *ids = fat5__json_get(def, "ids"), *x;
                if (!ids || ids->type != FAT5__J_ARRAY)
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: special token '%s' has no 'ids' in "
                                     "special_tokens", what, fat5__msg_name(buf, sizeof buf, id->str));
                it->seq = -1;
                it->first = (uint32_t)t->tmpl_ids.n;
                for (x = ids->child; x; x = x->next) {
                    int64_t v;
                    if (x->type != FAT5__J_NUMBER || !fat5__json_as_i64(x, &v) || v < 0 || v >= FAT5__TOK_MAX_VOCAB)
                        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: special token '%s': bad id", what,
                                         fat5__msg_name(buf, sizeof buf, id->str));
                    if (!fat5__ubuf_push(ctx, &t->tmpl_ids, (uint32_t)v))
                        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
                    it->n++;
                }
            } else {
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: '%s'[%d] is not a Sequence (A or B) or a "
                                 "SpecialToken", what, w ? "pair" : "single", k);
            }
        }
        t->n_tmpl[w] = k;
    }
    return FAT5_OK;
}

static fat5_status fat5__tj_post(fat5_tokenizer *t, const char *what, const fat5__json *pp, int depth) {
    const char *ty;
    char buf[64];
    if (!pp || pp->type == FAT5__J_NULL) return FAT5_OK;
    if (!(ty = fat5__tj_type(pp))) return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: post_processor without a type", what);
    if (!strcmp(ty, "ByteLevel")) return FAT5_OK;   // offsets only; ids unchanged
    if (!strcmp(ty, "TemplateProcessing")) {
        if (t->tmpl[0] || t->tmpl[1]) return fat5__err(t->ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: two TemplateProcessing", what);
        return fat5__tj_template(t, what, pp);
    }
    if (!strcmp(ty, "Sequence") && depth < 8) {
        const fat5__json *arr = fat5__json_get(pp, "processors"), *c;
        fat5_status st;
        if (!arr || arr->type != FAT5__J_ARRAY)
            return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: post_processor Sequence without 'processors'", what);
        for (c = arr->child; c; c = c->next)
            if ((st = fat5__tj_post(t, what, c, depth + 1))) return st;
        return FAT5_OK;
    }
    return fat5__err(t->ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: post_processor %s", what, fat5__msg_name(buf, sizeof buf, ty));
}

// The trie of some added tokens' contents, values their indices in t->added. which: 0 those
// matched in the raw text (normalized: false), 1 those matched in normalised text (normalized:
// true; their contents normalised as the text will be), 2 the special ones.
static fat5_status fat5__added_trie(fat5_tokenizer *t, const char *what, int which, fat5__trie *out) {
    fat5_ctx *ctx = t->ctx;
    uint32_t *off = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)t->n_added + 1, sizeof *off));
    uint32_t *len = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)t->n_added + 1, sizeof *len));
    int32_t *idx = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)t->n_added + 1, sizeof *idx));
    fat5__tkeys k;
    fat5_status st = FAT5_OK;
    size_t n = 0;
    int32_t i;
    memset(out, 0, sizeof *out);
    if (!off || !len || !idx) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    for (i = 0; !st && i < t->n_added; i++) {
        const fat5__added *a = &t->added[i];
        if (which == 2 ? !a->special : a->normalized != which) continue;
        off[n] = a->off;
        len[n] = a->len;
        if (which == 1) {   // the normalised content, added to the pool
            st = fat5__hf_normalize(t, t->pool.p + a->off, a->len, 0, &t->s2, &t->o2);
            if (!st && !fat5__pool_add(t, t->s2.p, t->s2.n, &off[n]))
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            len[n] = (uint32_t)t->s2.n;
        }
        idx[n++] = i;
    }
    k.s = t->pool.p;
    k.off = off;
    k.len = len;
    k.id = idx;
    if (!st) st = fat5__trie_build(ctx, &k, n, out);
    fat5__free(ctx, off);
    fat5__free(ctx, len);
    fat5__free(ctx, idx);
    return st;
}

static fat5_status fat5__tj_load(fat5_tokenizer *t, const char *what, const char *text, size_t len) {
    fat5_ctx *ctx = t->ctx;
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *j, *e;
    fat5_status st;
    int64_t i, max_id;
    char buf[64];
    if ((st = fat5__json_parse(ctx, what, text, len, 64, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) FAT5__TJ_FAIL("%s: not a JSON object", what);
    if ((j = fat5__json_get(root, "truncation")) && j->type != FAT5__J_NULL)
        { st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: truncation (set it to null; fat5 never truncates)", what); goto done; }
    if ((j = fat5__json_get(root, "padding")) && j->type != FAT5__J_NULL)
        { st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: padding (set it to null; batches are packed)", what); goto done; }
    if ((st = fat5__tj_model(t, what, fat5__json_get(root, "model")))) goto done;
    if ((st = fat5__tj_steps(t, "tokenizer.json normalizer", fat5__json_get(root, "normalizer"), 0, 0, &t->norm, &t->n_norm))) goto done;
    if ((st = fat5__tj_steps(t, "tokenizer.json pre_tokenizer", fat5__json_get(root, "pre_tokenizer"), 1, 0, &t->pre, &t->n_pre))) goto done;
    j = fat5__json_get(root, "decoder");
    t->has_decoder = j && j->type != FAT5__J_NULL;
    if ((st = fat5__tj_steps(t, "tokenizer.json decoder", j, 2, 0, &t->dec, &t->n_dec))) goto done;
    if ((st = fat5__tj_post(t, "tokenizer.json post_processor", fat5__json_get(root, "post_processor"), 0))) goto done;
    // added tokens
    max_id = t->n_pieces - 1;
    j = fat5__json_get(root, "added_tokens");
    if (j && j->type != FAT5__J_NULL && j->type != FAT5__J_ARRAY) FAT5__TJ_FAIL("%s: 'added_tokens' must be an array", what);
    if (j && j->type == FAT5__J_ARRAY && j->n) {
        t->added = FAT5__CAST(fat5__added *, fat5__calloc(ctx, j->n, sizeof *t->added));
        if (!t->added) { st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
        for (i = 0, e = j->child; e; e = e->next, i++) {
            fat5__added *a = &t->added[i];
            const fat5__json *c;
            int64_t id;
            int f[5];
            snprintf(buf, sizeof buf, "%s: added_tokens[%lld]", what, (long long)i);
            if ((st = fat5__tj_int(ctx, buf, e, "id", 0, FAT5__TOK_MAX_VOCAB - 1, -1, &id))) goto done;
            if (id < 0) FAT5__TJ_FAIL("%s: no 'id'", buf);
            if ((st = fat5__tj_str(ctx, buf, e, "content", 1, &c))) goto done;
            if (c->len == 0 || c->len >= FAT5__TOK_MAX_PIECE) FAT5__TJ_FAIL("%s: 'content' is empty or too long", buf);
            if ((st = fat5__tj_bool(ctx, buf, e, "special", 0, &f[0])) || (st = fat5__tj_bool(ctx, buf, e, "lstrip", 0, &f[1])) ||
                (st = fat5__tj_bool(ctx, buf, e, "rstrip", 0, &f[2])) ||
                (st = fat5__tj_bool(ctx, buf, e, "single_word", 0, &f[3])))
                goto done;
            if ((st = fat5__tj_bool(ctx, buf, e, "normalized", !f[0], &f[4]))) goto done;
            if (!fat5__pool_add(t, c->str, c->len, &a->off)) { st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
            a->len = (uint32_t)c->len;
            a->id = (int32_t)id;
            a->special = (uint8_t)f[0];
            a->lstrip = (uint8_t)f[1];
            a->rstrip = (uint8_t)f[2];
            a->single_word = (uint8_t)f[3];
            a->normalized = (uint8_t)f[4];
            if (id > max_id) max_id = id;
        }
        t->n_added = (int32_t)j->n;
    }
    for (i = 0; i < (int64_t)t->tmpl_ids.n; i++)   // the template's ids count too (they may name no piece)
        if ((int64_t)t->tmpl_ids.p[i] > max_id) max_id = t->tmpl_ids.p[i];
    if (max_id >= 2 * ((int64_t)t->n_pieces + t->n_added) + 65536)
        FAT5__TJ_FAIL("%s: ids up to %lld for %lld pieces and added tokens (too sparse)", what, (long long)max_id,
                      (long long)t->n_pieces + t->n_added);
    t->vocab_size = (int32_t)(max_id + 1);
    t->id_off = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)t->vocab_size, sizeof *t->id_off));
    t->id_special = FAT5__CAST(uint8_t *, fat5__calloc(ctx, (size_t)t->vocab_size, 1));
    if (!t->id_off || !t->id_special) { st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
    for (i = 0; i < t->vocab_size; i++) t->id_off[i] = UINT32_MAX;
    for (i = 0; i < t->n_pieces; i++)
        if (t->type[i]) t->id_off[i] = t->off[i];
    for (i = 0; i < t->n_added; i++) t->id_off[t->added[i].id] = t->added[i].off;   // the added vocabulary first
    {   // special: every id whose text is a special token's (tokenizers' special-token set is by content)
        fat5__trie sp;
        if ((st = fat5__added_trie(t, what, 2, &sp))) goto done;
        for (i = 0; sp.n_nodes > 1 && i < t->vocab_size; i++)
            if (t->id_off[i] != UINT32_MAX) {
                const char *txt = t->pool.p + t->id_off[i];
                t->id_special[i] = fat5__trie_find(&sp, txt, strlen(txt)) >= 0;
            }
        fat5__trie_free(ctx, &sp);
    }
    // the two matchers: raw text (normalized: false) and normalised text (normalized: true)
    if ((st = fat5__added_trie(t, what, 0, &t->added_raw)) || (st = fat5__added_trie(t, what, 1, &t->added_norm)))
        goto done;
    {   // EOS and padding: T5's names, "</s>" and "<pad>" (-1 when the tokenizer has neither)
        int32_t e = fat5__tokenizer_text_id(t, "</s>"), p = fat5__tokenizer_text_id(t, "<pad>");
        t->eos_id = e;
        t->pad_id = p;
    }
done:
    fat5__json_free(ctx, doc);
    return st;
}
#undef FAT5__TJ_FAIL

// ---------------------------------------------------------------------------------------------
// tokenizer.json: encoding. Text moves through the steps as splits: (offset, length, shift, token)
// quadruples over a byte buffer with the original offset of every byte beside it (shift: where
// the split starts in the original text; token: an added token's id, or -1 for text still to
// tokenize). Each step reads one set of buffers and writes the other.

#define FAT5__NOTOK UINT32_MAX

// Rust's char::is_whitespace (White_Space) and regex's \w
static int fat5__hf_space(uint32_t cp) { return fat5__uc_is_white_space(cp); }
static int fat5__hf_word(uint32_t cp) { return fat5__uc_is_word(cp); }
static uint32_t fat5__cp_at(const char *s, size_t n, size_t *len) { return fat5__utf8_cp(s, n, len); }
// the code point ending at s[n] (n > 0)
static uint32_t fat5__cp_before(const char *s, size_t n) {
    size_t i = n - 1, k;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return fat5__utf8_cp(s + i, n - i, &k);
}

// appends bytes with one original offset each (orig[i] when o is not NULL, else o0 for all)
static int fat5__emit(fat5_tokenizer *t, fat5__tbuf *b, fat5__ubuf *ob, const char *s, size_t n, const uint32_t *o,
                      uint32_t o0) {
    size_t i;
    if (!fat5__tbuf_put(t->ctx, b, s, n)) return 0;
    if (o) return fat5__ubuf_append(t->ctx, ob, o, n);
    if (!fat5__grow(t->ctx, (void **)&ob->p, &ob->cap, ob->n + n, sizeof(uint32_t))) return 0;
    for (i = 0; i < n; i++) ob->p[ob->n + i] = o0;
    ob->n += n;
    return 1;
}
static int fat5__split_push(fat5_tokenizer *t, fat5__ubuf *sp, size_t off, size_t len, uint32_t shift, uint32_t tok) {
    return fat5__ubuf_push(t->ctx, sp, (uint32_t)off) && fat5__ubuf_push(t->ctx, sp, (uint32_t)len) &&
           fat5__ubuf_push(t->ctx, sp, shift) && fat5__ubuf_push(t->ctx, sp, tok);
}

// Added tokens in s[0..n): leftmost-longest matches of the trie, filtered as tokenizers does
// (single_word needs non-word characters around; lstrip / rstrip take the spaces beside). Writes
// (start, end, index or FAT5__NOTOK) triples covering s to out.
static int fat5__hf_added_split(fat5_tokenizer *t, const fat5__trie *tr, const char *s, size_t n, fat5__ubuf *out) {
    size_t pos = 0, last = 0;
    out->n = 0;
    while (tr->node && pos < n) {
        int32_t idx;
        size_t k = fat5__trie_longest(tr, s + pos, n - pos, &idx), start = pos, stop;
        const fat5__added *a;
        if (!k) {
            pos++;
            continue;
        }
        stop = pos + k;
        pos = stop;
        a = &t->added[idx];
        if (a->single_word) {
            size_t l;
            int sp0 = start == 0 || !fat5__hf_word(fat5__cp_before(s, start));
            int sp1 = stop == n || !fat5__hf_word(fat5__cp_at(s + stop, n - stop, &l));
            if (!sp0 || !sp1) continue;
        }
        if (a->lstrip) {
            size_t b = start;
            while (b > 0 && fat5__hf_space(fat5__cp_before(s, b))) {
                b--;
                while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
            }
            start = b > last ? b : last;
        }
        if (a->rstrip) {
            size_t l;
            while (stop < n && fat5__hf_space(fat5__cp_at(s + stop, n - stop, &l))) stop += l;
            pos = stop;
        }
        if (last < start && !(fat5__ubuf_push(t->ctx, out, (uint32_t)last) && fat5__ubuf_push(t->ctx, out, (uint32_t)start) &&
                              fat5__ubuf_push(t->ctx, out, FAT5__NOTOK)))
            return 0;
        if (!(fat5__ubuf_push(t->ctx, out, (uint32_t)start) && fat5__ubuf_push(t->ctx, out, (uint32_t)stop) &&
              fat5__ubuf_push(t->ctx, out, (uint32_t)idx)))
            return 0;
        last = stop;
    }
    if (last < n || n == 0)
        return fat5__ubuf_push(t->ctx, out, (uint32_t)last) && fat5__ubuf_push(t->ctx, out, (uint32_t)n) &&
               fat5__ubuf_push(t->ctx, out, FAT5__NOTOK);
    return 1;
}

// a Replace regex at s[0..n): its length, or -1. The atoms are literal characters, neighbours
// distinct, at most one with a variable count (the loader makes sure): then the greedy count is
// the only one that can match, and no backtracking is needed.
static long fat5__re_match(const fat5__re_atom *a, int na, const char *s, size_t n) {
    size_t pos = 0, l;
    int i;
    for (i = 0; i < na; i++) {
        uint32_t cnt = 0;
        while (cnt < a[i].max && pos < n && fat5__cp_at(s + pos, n - pos, &l) == a[i].cp) {
            pos += l;
            cnt++;
        }
        if (cnt < a[i].min) return -1;
    }
    return (long)pos;
}

// a Replace pattern at s[0..n): the match length or 0
static size_t fat5__replace_at(const fat5__tstep *st, const char *s, size_t n) {
    if (st->n_atoms) {
        long r = fat5__re_match(st->atom, st->n_atoms, s, n);
        return r > 0 ? (size_t)r : 0;
    }
    return st->a_len <= n && memcmp(s, st->a, st->a_len) == 0 ? st->a_len : 0;
}

// one normalizer: (s, o)[0..n) -> (b, ob)
static fat5_status fat5__hf_norm_step(fat5_tokenizer *t, const fat5__tstep *st, const char *s, const uint32_t *o, size_t n,
                                      fat5__tbuf *b, fat5__ubuf *ob) {
    size_t i = 0, l;
    b->n = 0;
    ob->n = 0;
    if (!fat5__tbuf_put(t->ctx, b, "", 0)) goto oom;
    if (n == 0) return FAT5_OK;
    switch (st->kind) {
    case FAT5__N_PRECOMPILED:   // per grapheme cluster (under 6 bytes), else per character; first rule
        while (i < n) {
            size_t g = fat5__grapheme_len(s + i, n - i), j;
            fat5__cm_match m;
            if (g < 6 && fat5__charsmap_search(&st->cm, s + i, g, &m, 1)) {
                if (!fat5__emit(t, b, ob, m.repl, strlen(m.repl), NULL, o[i])) goto oom;
            } else {
                for (j = i; j < i + g; j += l) {
                    l = fat5__utf8_len(s + j, n - j);
                    if (fat5__charsmap_search(&st->cm, s + j, l, &m, 1)) {
                        if (!fat5__emit(t, b, ob, m.repl, strlen(m.repl), NULL, o[j])) goto oom;
                    } else if (!fat5__emit(t, b, ob, s + j, l, o + j, 0)) {
                        goto oom;
                    }
                }
            }
            i += g;
        }
        break;
    case FAT5__N_REPLACE:
        while (i < n) {
            size_t k = fat5__replace_at(st, s + i, n - i);
            if (k) {   // the new text is aligned with the match's last character (as tokenizers aligns it)
                size_t lc = i + k - 1;
                while (lc > i && ((unsigned char)s[lc] & 0xC0) == 0x80) lc--;
                if (!fat5__emit(t, b, ob, st->b, st->b_len, NULL, o[lc])) goto oom;
                i += k;
            } else {
                l = fat5__utf8_len(s + i, n - i);
                if (!fat5__emit(t, b, ob, s + i, l, o + i, 0)) goto oom;
                i += l;
            }
        }
        break;
    case FAT5__N_STRIP: {
        size_t a = 0, e = n;
        while (st->f1 && a < e && fat5__hf_space(fat5__cp_at(s + a, e - a, &l))) a += l;
        while (st->f2 && e > a && fat5__hf_space(fat5__cp_before(s, e))) {
            e--;
            while (e > a && ((unsigned char)s[e] & 0xC0) == 0x80) e--;
        }
        if (!fat5__emit(t, b, ob, s + a, e - a, o + a, 0)) goto oom;
        break;
    }
    case FAT5__N_PREPEND:
        if (n && !fat5__emit(t, b, ob, st->a, st->a_len, NULL, o[0])) goto oom;
        if (!fat5__emit(t, b, ob, s, n, o, 0)) goto oom;
        break;
    default: {   // NFC / NFD / NFKC / NFKD, a chunk at a time: a white-space character alone, else a
                 // character and the non-ASCII, non-space ones after it. Nothing composes across
                 // those boundaries, and each chunk's bytes take its first character's offset.

        int form = st->kind == FAT5__N_NFC ? FAT5__NFC : st->kind == FAT5__N_NFD ? FAT5__NFD
                 : st->kind == FAT5__N_NFKC ? FAT5__NFKC : FAT5__NFKD;
        while (i < n) {
            size_t e = i, need;
            int sp = fat5__hf_space(fat5__cp_at(s + i, n - i, &l));
            e = i + l;
            if (!sp)
                while (e < n && (unsigned char)s[e] >= 0x80 && !fat5__hf_space(fat5__cp_at(s + e, n - e, &l))) e += l;
            need = fat5__unorm(form, s + i, e - i, NULL, 0);
            if (!fat5__grow(t->ctx, (void **)&b->p, &b->cap, b->n + need + 1, 1)) goto oom;
            fat5__unorm(form, s + i, e - i, b->p + b->n, need);
            for (l = 0; l < need; l++)
                if (!fat5__ubuf_push(t->ctx, ob, o[i])) goto oom;
            b->n += need;
            b->p[b->n] = 0;
            i = e;
        }
        break;
    }
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// the normalizer chain on s[0..n) (original offsets orig0 + i) -> (out, orig)
static fat5_status fat5__hf_normalize(fat5_tokenizer *t, const char *s, size_t n, uint32_t orig0, fat5__tbuf *out,
                                      fat5__ubuf *orig) {
    fat5__tbuf tb = t->sn;   // the other buffer of the pair, kept by the tokenizer
    fat5__ubuf to = t->on;
    fat5_status st = FAT5_OK;
    size_t i;
    int k;
    out->n = 0;
    orig->n = 0;
    if (!fat5__tbuf_put(t->ctx, out, s, n)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (i = 0; i < n; i++)
        if (!fat5__ubuf_push(t->ctx, orig, orig0 + (uint32_t)i)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (k = 0; k < t->n_norm && !st; k++) {
        fat5__tbuf xb;
        fat5__ubuf xo;
        st = fat5__hf_norm_step(t, &t->norm[k], out->p, orig->p, out->n, &tb, &to);
        xb = *out; *out = tb; tb = xb;
        xo = *orig; *orig = to; to = xo;
    }
    t->sn = tb;
    t->on = to;
    return st;
}

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 for 256 + k in
// byte order (k: 0x00..0x20 -> 0..32, 0x7F..0xA0 -> 33..66, 0xAD -> 67)
#define FAT5__GPT2_PRINTABLE(b) (((b) >= 0x21 && (b) <= 0x7E) || ((b) >= 0xA1 && (b) <= 0xAC) || ((b) >= 0xAE && (b) <= 0xFF))
static uint32_t fat5__gpt2_char(unsigned b) {
    if (FAT5__GPT2_PRINTABLE(b)) return b;
    return 256 + (b <= 0x20 ? b : b <= 0xA0 ? b - 0x7F + 33 : 67);
}
static int fat5__gpt2_byte(uint32_t cp) {
    uint32_t k = cp - 256;
    if (cp < 256) return FAT5__GPT2_PRINTABLE(cp) ? (int)cp : -1;
    return k <= 32 ? (int)k : k <= 66 ? (int)(k - 33 + 0x7F) : k == 67 ? 0xAD : -1;
}
#undef FAT5__GPT2_PRINTABLE

// GPT-2's split at s[0..n): the length of the next piece ('s 't 're 've 'm 'll 'd | ?\p{L}+ |
// ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+)
static size_t fat5__gpt2_piece(const char *s, size_t n) {
    static const char *con[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    size_t i, l, p, k;
    uint32_t c;
    int cls;
    for (i = 0; i < 7; i++) {
        size_t cl = strlen(con[i]);
        if (cl <= n && memcmp(s, con[i], cl) == 0) return cl;
    }
    p = s[0] == ' ' ? 1 : 0;
    if (p < n) {   // ' ?' then a run of one class (letters, numbers, other non-space)
        c = fat5__cp_at(s + p, n - p, &l);
        cls = fat5__uc_is_letter(c) ? 1 : fat5__uc_is_number(c) ? 2 : fat5__hf_space(c) ? 0 : 3;
        if (cls) {
            k = p;
            while (k < n) {
                int d;
                c = fat5__cp_at(s + k, n - k, &l);
                d = fat5__uc_is_letter(c) ? 1 : fat5__uc_is_number(c) ? 2 : fat5__hf_space(c) ? 0 : 3;
                if (d != cls) break;
                k += l;
            }
            return k;
        }
    }
    // white space: the run, less its last character when a non-space follows (and the run is longer)
    k = 0;
    i = 0;
    while (k < n && fat5__hf_space(fat5__cp_at(s + k, n - k, &l))) {
        i = k;
        k += l;
    }
    if (k < n && i > 0) return i;
    return k ? k : fat5__utf8_len(s, n);
}

// one pre-tokenizer over the splits (b0, o0, sp0) -> (b1, o1, sp1)
static fat5_status fat5__hf_pre_step(fat5_tokenizer *t, const fat5__tstep *st, const fat5__tbuf *b0, const fat5__ubuf *o0,
                                     const fat5__ubuf *sp0, fat5__tbuf *b1, fat5__ubuf *o1, fat5__ubuf *sp1) {
    size_t q;
    b1->n = o1->n = sp1->n = 0;
    if (!fat5__tbuf_put(t->ctx, b1, "", 0)) goto oom;
    for (q = 0; q < sp0->n; q += 4) {
        const char *s = b0->p + sp0->p[q];
        const uint32_t *o = o0->p + sp0->p[q];
        size_t n = sp0->p[q + 1], i, l, start = b1->n, a;
        uint32_t shift = sp0->p[q + 2];
        if (sp0->p[q + 3] != FAT5__NOTOK) {   // an added token: as it is
            if (!fat5__emit(t, b1, o1, s, n, o, 0) || !fat5__split_push(t, sp1, start, n, shift, sp0->p[q + 3])) goto oom;
            continue;
        }
        switch (st->kind) {
        case FAT5__P_METASPACE: {
            // the spaces are replaced first, so a leading space counts as a leading replacement
            int pre = n > 0 && s[0] != ' ' && !(n >= st->a_len && memcmp(s, st->a, st->a_len) == 0) &&
                      (st->f1 == 0 || (st->f1 == 1 && shift == 0));
            if (pre && !fat5__emit(t, b1, o1, st->a, st->a_len, NULL, o[0])) goto oom;
            for (i = 0; i < n; i++)
                if (!(s[i] == ' ' ? fat5__emit(t, b1, o1, st->a, st->a_len, NULL, o[i]) : fat5__emit(t, b1, o1, s + i, 1, o + i, 0)))
                    goto oom;
            if (!st->f2) {
                if (!fat5__split_push(t, sp1, start, b1->n - start, o1->p[start], FAT5__NOTOK)) goto oom;
                break;
            }
            for (a = i = start; i < b1->n; i += l) {   // split before each replacement (merged with the next)
                l = fat5__utf8_len(b1->p + i, b1->n - i);
                if (i > a && l == st->a_len && memcmp(b1->p + i, st->a, l) == 0) {
                    if (!fat5__split_push(t, sp1, a, i - a, o1->p[a], FAT5__NOTOK)) goto oom;
                    a = i;
                }
            }
            if (b1->n > a && !fat5__split_push(t, sp1, a, b1->n - a, o1->p[a], FAT5__NOTOK)) goto oom;
            break;
        }
        case FAT5__P_WHITESPACE_SPLIT:
            for (i = 0; i < n;) {
                size_t e;
                if (fat5__hf_space(fat5__cp_at(s + i, n - i, &l))) {
                    i += l;
                    continue;
                }
                for (e = i; e < n && !fat5__hf_space(fat5__cp_at(s + e, n - e, &l)); e += l) {}
                a = b1->n;
                if (!fat5__emit(t, b1, o1, s + i, e - i, o + i, 0) || !fat5__split_push(t, sp1, a, e - i, o[i], FAT5__NOTOK))
                    goto oom;
                i = e;
            }
            break;
        case FAT5__P_BYTELEVEL: {
            // the prefix space and the split work on the text; each piece is then mapped byte by byte
            size_t tn = n;
            const char *ts = s;
            t->s3.n = 0;
            t->o3.n = 0;
            if (st->f1 && n > 0 && s[0] != ' ') {
                if (!fat5__emit(t, &t->s3, &t->o3, " ", 1, NULL, o[0]) || !fat5__emit(t, &t->s3, &t->o3, s, n, o, 0)) goto oom;
                ts = t->s3.p;
                o = t->o3.p;
                tn = n + 1;
            }
            for (i = 0; i < tn;) {
                size_t k = st->f2 ? fat5__gpt2_piece(ts + i, tn - i) : tn - i, j;
                a = b1->n;
                for (j = i; j < i + k; j++) {
                    char u[4];
                    size_t ul = fat5__utf8_put(u, fat5__gpt2_char((unsigned char)ts[j]));
                    if (!fat5__emit(t, b1, o1, u, ul, NULL, o[j])) goto oom;
                }
                if (!fat5__split_push(t, sp1, a, b1->n - a, o[i], FAT5__NOTOK)) goto oom;
                i += k;
            }
            break;
        }
        }
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// tokenizers' BPE on one word s[0..n): ids appended to out. The symbols (one per character, or
// one per byte of an unknown one with byte fallback) live in the lattice scratch, the merge heap
// (at most three entries per symbol: the first pairs, then two per merge) after them.
typedef struct fat5__hsym { int32_t c, prev, next; uint32_t len; } fat5__hsym;
typedef struct fat5__hmrg { uint32_t rank, pos, id; } fat5__hmrg;

static int fat5__hsym_add(fat5_tokenizer *t, size_t *ny, int32_t id, uint32_t len) {
    fat5__hsym *y;
    if (!fat5__grow(t->ctx, &t->lat, &t->lat_cap, (*ny + 1) * sizeof(fat5__hsym), 1)) return 0;
    y = FAT5__CAST(fat5__hsym *, t->lat);
    y[*ny].c = id;
    y[*ny].len = len;
    y[*ny].prev = (int32_t)*ny - 1;
    y[*ny].next = (int32_t)*ny + 1;
    (*ny)++;
    return 1;
}

// merge x is applied before z: the lower rank, then the leftmost
#define FAT5__MLESS(x, z) ((x).rank < (z).rank || ((x).rank == (z).rank && (x).pos < (z).pos))
FAT5__HEAP(fat5__hmrg, fat5__hmrg, FAT5__MLESS)
#undef FAT5__MLESS
static void fat5__hmrg_add(fat5__hmrg *h, size_t *nh, uint32_t rank, uint32_t pos, uint32_t id) {
    fat5__hmrg v;
    v.rank = rank;
    v.pos = pos;
    v.id = id;
    fat5__hmrg_push(h, nh, v);
}

static fat5_status fat5__hf_bpe(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5__hsym *y;
    fat5__hmrg *h;
    size_t ny = 0, nh = 0, i, l, hbytes;
    int32_t unk = -1;
    uint32_t unk_len = 0;
    const fat5__merge *m;
    if (n == 0) return FAT5_OK;
    if (t->ignore_merges) {
        int32_t id = fat5__trie_find(&t->vocab, s, n);
        if (id >= 0) return fat5__ubuf_push(t->ctx, out, (uint32_t)id) ? FAT5_OK : FAT5_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < n; i += l) {
        int32_t id;
        l = fat5__utf8_len(s + i, n - i);
        t->s3.n = 0;
        if ((i > 0 && t->cs_prefix_len && !fat5__tbuf_put(t->ctx, &t->s3, t->pool.p + t->cs_prefix, t->cs_prefix_len)) ||
            !fat5__tbuf_put(t->ctx, &t->s3, s + i, l) ||
            (i + l == n && t->eow_suffix_len && !fat5__tbuf_put(t->ctx, &t->s3, t->pool.p + t->eow_suffix, t->eow_suffix_len)))
            return FAT5_ERR_OUT_OF_MEMORY;
        if ((id = fat5__trie_find(&t->vocab, t->s3.p, t->s3.n)) >= 0) {
            if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
            unk = -1;
            if (!fat5__hsym_add(t, &ny, id, (uint32_t)l)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        if (t->byte_fallback && fat5__has_byte_pieces(t, t->s3.p, t->s3.n)) {   // every byte of the piece
            size_t j;                                                              // (prefix and suffix too)
            for (j = 0; j < t->s3.n; j++)
                if (!fat5__hsym_add(t, &ny, t->byte_id[(unsigned char)t->s3.p[j]], 1)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        if (t->unk_id >= 0) {
            if (unk >= 0 && t->fuse_unk) {
                unk_len += (uint32_t)l;
            } else {
                if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
                unk = t->unk_id;
                unk_len = (uint32_t)l;
            }
        }
    }
    if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
    if (ny == 0) return FAT5_OK;
    // the heap after the symbols
    if (!fat5__mul_ok(3 * ny + 1, sizeof(fat5__hmrg), &hbytes) ||
        !fat5__grow(t->ctx, &t->lat, &t->lat_cap, ny * sizeof(fat5__hsym) + hbytes + sizeof(fat5__hmrg), 1))
        return FAT5_ERR_OUT_OF_MEMORY;
    y = FAT5__CAST(fat5__hsym *, t->lat);
    h = FAT5__CAST(fat5__hmrg *, (void *)((char *)t->lat + (ny * sizeof(fat5__hsym) + sizeof(fat5__hmrg) - 1) /
                                                          sizeof(fat5__hmrg) * sizeof(fat5__hmrg)));
    y[ny - 1].next = -1;
    // merges: lowest rank first, then leftmost
    for (i = 0; i + 1 < ny; i++)
        if ((m = fat5__merge_find(t, y[i].c, y[i + 1].c))) fat5__hmrg_add(h, &nh, m->rank, (uint32_t)i, m->id);
    while (nh) {
        fat5__hmrg top = fat5__hmrg_pop(h, &nh);
        fat5__hsym *cur = &y[top.pos], *right;
        if (cur->len == 0 || cur->next < 0) continue;
        right = &y[cur->next];
        if (!(m = fat5__merge_find(t, cur->c, right->c)) || m->id != top.id) continue;
        cur->c = (int32_t)top.id;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0) y[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && (m = fat5__merge_find(t, y[cur->prev].c, cur->c)))
            fat5__hmrg_add(h, &nh, m->rank, (uint32_t)cur->prev, m->id);
        if (cur->next >= 0 && (m = fat5__merge_find(t, cur->c, y[cur->next].c)))
            fat5__hmrg_add(h, &nh, m->rank, top.pos, m->id);
    }
    for (i = 0; i < ny; i = y[i].next >= 0 ? (size_t)y[i].next : ny)
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)y[i].c)) return FAT5_ERR_OUT_OF_MEMORY;
    return FAT5_OK;
}

// tokenizers' Unigram on one split: fused unknowns looked up as text, then bytes or <unk>
static fat5_status fat5__hf_unigram(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5_status st;
    size_t i;
    if (n == 0) return FAT5_OK;
    if ((st = fat5__unigram(t, s, n))) return st;
    for (i = 0; i < t->ids.n; i += 3) {
        uint32_t a = t->ids.p[i], b = t->ids.p[i + 1];
        int32_t id = (int32_t)t->ids.p[i + 2];
        if (id == t->unk_id) {   // fuse the run of unknowns, then look the text up
            while (i + 3 < t->ids.n && (int32_t)t->ids.p[i + 5] == t->unk_id) {
                b = t->ids.p[i + 4];
                i += 3;
            }
            id = fat5__trie_find(&t->vocab, s + a, b - a);
            if (id < 0 && t->byte_fallback && fat5__has_byte_pieces(t, s + a, b - a)) {
                if (!fat5__push_byte_pieces(t, s + a, b - a, out)) return FAT5_ERR_OUT_OF_MEMORY;
                continue;
            }
            if (id < 0) id = t->unk_id;
        }
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)id)) return FAT5_ERR_OUT_OF_MEMORY;
    }
    return FAT5_OK;
}

// tokenizers: one sequence's ids appended to out
static fat5_status fat5__hf_encode(fat5_tokenizer *t, const char *text, size_t len, fat5__ubuf *out) {
    fat5_status st;
    size_t q, i;
    int k;
    fat5__tbuf *ba = &t->s0, *bb = &t->s1;
    fat5__ubuf *oa = &t->o0, *ob = &t->o1, *sa = &t->spl, *sb = &t->spl2;
    if (len > UINT32_MAX / 2) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "tokenize: text longer than 2 GiB");
    // 1. valid UTF-8 (s2), split on the added tokens matched in the raw text (o2: the triples)
    if (!fat5__utf8_sanitize(t->ctx, text, len, &t->s2, NULL) || !fat5__hf_added_split(t, &t->added_raw, t->s2.p, t->s2.n, &t->o2))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    ba->n = oa->n = sa->n = 0;
    if (!fat5__tbuf_put(t->ctx, ba, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (q = 0; q < t->o2.n; q += 3) {
        uint32_t a = t->o2.p[q], b = t->o2.p[q + 1], idx = t->o2.p[q + 2];
        if (idx != FAT5__NOTOK) {
            if (!fat5__split_push(t, sa, ba->n, 0, a, (uint32_t)t->added[idx].id)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        // 2. normalise the piece (s3, o3), split on the added tokens matched in normalised text
        if ((st = fat5__hf_normalize(t, t->s2.p + a, b - a, a, &t->s3, &t->o3))) return st;
        if (!fat5__hf_added_split(t, &t->added_norm, t->s3.p, t->s3.n, &t->ids)) return FAT5_ERR_OUT_OF_MEMORY;
        for (i = 0; i < t->ids.n; i += 3) {
            uint32_t c = t->ids.p[i], d = t->ids.p[i + 1], id2 = t->ids.p[i + 2];
            size_t at = ba->n;
            if (c == d) continue;   // empty pieces are dropped
            if (!fat5__emit(t, ba, oa, t->s3.p + c, d - c, t->o3.p + c, 0) ||
                !fat5__split_push(t, sa, at, d - c, t->o3.p[c], id2 == FAT5__NOTOK ? FAT5__NOTOK : (uint32_t)t->added[id2].id))
                return FAT5_ERR_OUT_OF_MEMORY;
        }
    }
    // 3. pre-tokenizers
    for (k = 0; k < t->n_pre; k++) {
        fat5__tbuf *xb;
        fat5__ubuf *xo, *xs;
        if ((st = fat5__hf_pre_step(t, &t->pre[k], ba, oa, sa, bb, ob, sb))) return st;
        xb = ba; ba = bb; bb = xb;
        xo = oa; oa = ob; ob = xo;
        xs = sa; sa = sb; sb = xs;
    }
    // 4. the model on each text split
    for (q = 0; q < sa->n; q += 4) {
        if (sa->p[q + 3] != FAT5__NOTOK) {
            if (!fat5__ubuf_push(t->ctx, out, sa->p[q + 3])) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        st = t->model == FAT5__TM_UNIGRAM ? fat5__hf_unigram(t, ba->p + sa->p[q], sa->p[q + 1], out)
                                          : fat5__hf_bpe(t, ba->p + sa->p[q], sa->p[q + 1], out);
        if (st) return st;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json: decoding. The ids' texts (special ones left out on request) pass through the
// decoder chain as a list of strings, then are concatenated (no decoder: joined with spaces).

static int fat5__hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// one decoder over the token list (b0, l0: offset/length pairs) -> (b1, l1)
static fat5_status fat5__hf_dec_step(fat5_tokenizer *t, const fat5__tstep *st, const fat5__tbuf *b0, const fat5__ubuf *l0,
                                     fat5__tbuf *b1, fat5__ubuf *l1) {
    size_t q, i, l;
    b1->n = l1->n = 0;
    if (!fat5__tbuf_put(t->ctx, b1, "", 0)) goto oom;
#define FAT5__TOK_OPEN() size_t at_ = b1->n
#define FAT5__TOK_CLOSE() do { if (!fat5__ubuf_push(t->ctx, l1, (uint32_t)at_) || !fat5__ubuf_push(t->ctx, l1, (uint32_t)(b1->n - at_))) goto oom; } while (0)
    switch (st->kind) {
    case FAT5__D_METASPACE:
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1];
            FAT5__TOK_OPEN();
            for (i = 0; i < n; i += l) {
                l = fat5__utf8_len(s + i, n - i);
                if (l == st->a_len && memcmp(s + i, st->a, l) == 0) {
                    if (!(q == 0 && st->f1 != 2) && !fat5__tbuf_put(t->ctx, b1, " ", 1)) goto oom;
                } else if (!fat5__tbuf_put(t->ctx, b1, s + i, l)) {
                    goto oom;
                }
            }
            FAT5__TOK_CLOSE();
        }
        break;
    case FAT5__D_BYTELEVEL: {   // all tokens to bytes (a token with a character outside the alphabet: its UTF-8)
        FAT5__TOK_OPEN();
        t->s3.n = 0;
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1], start = t->s3.n;
            for (i = 0; i < n; i += l) {
                int by = fat5__gpt2_byte(fat5__cp_at(s + i, n - i, &l));
                char c = (char)by;
                if (by < 0) {
                    t->s3.n = start;
                    if (!fat5__tbuf_put(t->ctx, &t->s3, s, n)) goto oom;
                    break;
                }
                if (!fat5__tbuf_put(t->ctx, &t->s3, &c, 1)) goto oom;
            }
        }
        for (i = 0; i < t->s3.n;) {   // from_utf8_lossy
            size_t k = fat5__utf8_len(t->s3.p + i, t->s3.n - i);
            if (!(k ? fat5__tbuf_put(t->ctx, b1, t->s3.p + i, k) : fat5__tbuf_put(t->ctx, b1, fat5__ufffd, 3))) goto oom;
            i += k ? k : fat5__utf8_subpart(t->s3.p + i, t->s3.n - i);
        }
        FAT5__TOK_CLOSE();
        break;
    }
    case FAT5__D_BYTEFALLBACK:
        t->s3.n = 0;
        for (q = 0; q <= l0->n; q += 2) {
            const char *s = q < l0->n ? b0->p + l0->p[q] : "";
            size_t n = q < l0->n ? l0->p[q + 1] : 0;
            int v = -1;
            if (q < l0->n && n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {   // Rust's u8::from_str_radix(.., 16)
                const char *h = s + 3;
                int d0 = fat5__hexval(h[0]), d1 = fat5__hexval(h[1]);
                if (d0 >= 0 && d1 >= 0) v = d0 * 16 + d1;
                else if (h[0] == '+' && d1 >= 0) v = d1;
            }
            if (v >= 0) {
                char c = (char)v;
                if (!fat5__tbuf_put(t->ctx, &t->s3, &c, 1)) goto oom;
                continue;
            }
            if (t->s3.n) {   // pending bytes: one token when valid UTF-8, else one U+FFFD each
                size_t j, ok = 1;
                for (j = 0; j < t->s3.n && ok; j += ok) ok = fat5__utf8_len(t->s3.p + j, t->s3.n - j);
                if (ok) {
                    FAT5__TOK_OPEN();
                    if (!fat5__tbuf_put(t->ctx, b1, t->s3.p, t->s3.n)) goto oom;
                    FAT5__TOK_CLOSE();
                } else {
                    for (j = 0; j < t->s3.n; j++) {
                        FAT5__TOK_OPEN();
                        if (!fat5__tbuf_put(t->ctx, b1, fat5__ufffd, 3)) goto oom;
                        FAT5__TOK_CLOSE();
                    }
                }
                t->s3.n = 0;
            }
            if (q < l0->n) {
                FAT5__TOK_OPEN();
                if (!fat5__tbuf_put(t->ctx, b1, s, n)) goto oom;
                FAT5__TOK_CLOSE();
            }
        }
        break;
    case FAT5__D_FUSE: {
        FAT5__TOK_OPEN();
        for (q = 0; q < l0->n; q += 2)
            if (!fat5__tbuf_put(t->ctx, b1, b0->p + l0->p[q], l0->p[q + 1])) goto oom;
        FAT5__TOK_CLOSE();
        break;
    }
    case FAT5__D_STRIP:
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1], a = 0, e = n;
            int c;
            FAT5__TOK_OPEN();
            for (c = 0; c < st->f1 && a < e && n - a >= st->a_len && memcmp(s + a, st->a, st->a_len) == 0; c++) a += st->a_len;
            for (c = 0; c < st->f2 && e >= a + st->a_len && memcmp(s + e - st->a_len, st->a, st->a_len) == 0; c++) e -= st->a_len;
            if (!fat5__tbuf_put(t->ctx, b1, s + a, e - a)) goto oom;
            FAT5__TOK_CLOSE();
        }
        break;
    case FAT5__D_REPLACE:
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1];
            FAT5__TOK_OPEN();
            for (i = 0; i < n;) {
                size_t k = fat5__replace_at(st, s + i, n - i);
                if (k) {
                    if (!fat5__tbuf_put(t->ctx, b1, st->b, st->b_len)) goto oom;
                    i += k;
                } else {
                    l = fat5__utf8_len(s + i, n - i);
                    if (!fat5__tbuf_put(t->ctx, b1, s + i, l)) goto oom;
                    i += l;
                }
            }
            FAT5__TOK_CLOSE();
        }
        break;
    }
#undef FAT5__TOK_OPEN
#undef FAT5__TOK_CLOSE
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "detokenize: out of memory");
}

static fat5_status fat5__hf_decode(fat5_tokenizer *t, const int32_t *ids, int64_t n, int skip, fat5__tbuf *out) {
    fat5__tbuf *ba = &t->s0, *bb = &t->s1;
    fat5__ubuf *la = &t->o0, *lb = &t->o1;
    fat5_status st;
    int64_t i;
    int k;
    ba->n = la->n = 0;
    if (!fat5__tbuf_put(t->ctx, ba, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (i = 0; i < n; i++) {
        uint32_t off = t->id_off[ids[i]];
        size_t at = ba->n, len;
        if (off == UINT32_MAX || (skip && t->id_special[ids[i]])) continue;
        len = strlen(t->pool.p + off);
        if (!fat5__tbuf_put(t->ctx, ba, t->pool.p + off, len) || !fat5__ubuf_push(t->ctx, la, (uint32_t)at) ||
            !fat5__ubuf_push(t->ctx, la, (uint32_t)len))
            return FAT5_ERR_OUT_OF_MEMORY;
    }
    for (k = 0; k < t->n_dec; k++) {
        fat5__tbuf *xb;
        fat5__ubuf *xl;
        if ((st = fat5__hf_dec_step(t, &t->dec[k], ba, la, bb, lb))) return st;
        xb = ba; ba = bb; bb = xb;
        xl = la; la = lb; lb = xl;
    }
    out->n = 0;
    if (!fat5__tbuf_put(t->ctx, out, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (i = 0; i < (int64_t)la->n; i += 2)
        if ((i && !t->has_decoder && !fat5__tbuf_put(t->ctx, out, " ", 1)) ||
            !fat5__tbuf_put(t->ctx, out, ba->p + la->p[i], la->p[i + 1]))
            return FAT5_ERR_OUT_OF_MEMORY;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// the public calls

static int32_t fat5__tokenizer_text_id(const fat5_tokenizer *t, const char *text) {
    int32_t i;
    for (i = 0; i < t->n_added; i++)
        if (strcmp(t->pool.p + t->added[i].off, text) == 0) return t->added[i].id;
    return fat5__trie_find(&t->vocab, text, strlen(text));
}

static fat5_status fat5__tokenizer_new(fat5_ctx *ctx, fat5_tokenizer **out) {
    fat5_tokenizer *t;
    int b;
    *out = NULL;
    t = FAT5__CAST(fat5_tokenizer *, fat5__calloc(ctx, 1, sizeof *t));
    if (!t) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    t->ctx = ctx;
    t->unk_id = t->eos_id = t->pad_id = -1;
    t->n_tmpl[0] = t->n_tmpl[1] = -1;
    for (b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (!fat5__pool_add(t, "", 0, &t->cs_prefix)) {   // offset 0: the empty string
        fat5__free(ctx, t);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    *out = t;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_tokenizer_from_memory(fat5_ctx *ctx, const void *data, size_t len, int is_json,
                                                fat5_tokenizer **out) {
    fat5_tokenizer *t;
    fat5_status st;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_from_memory: out is NULL");
    *out = NULL;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    if (!data && len) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_from_memory: data is NULL");
    if (len > FAT5__TOK_MAX_FILE) return fat5__err(ctx, FAT5_ERR_FORMAT, "tokenizer: %zu bytes (more than 1 GiB)", len);
    if ((st = fat5__tokenizer_new(ctx, &t))) return st;
    t->is_json = is_json != 0;
    st = is_json ? fat5__tj_load(t, "tokenizer.json", FAT5__CAST(const char *, data), len)
                 : fat5__spm_load(t, "SentencePiece model", FAT5__CAST(const unsigned char *, data), len);
    if (st) {
        fat5_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_tokenizer_load(fat5_ctx *ctx, const char *path, fat5_tokenizer **out) {
    static const char *names[] = {"tokenizer.json", "spiece.model", "tokenizer.model"};
    char *buf = NULL, *file = NULL;
    size_t len = 0, pl;
    fat5_status st;
    int i, is_json;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_load: out is NULL");
    *out = NULL;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_load: path is NULL");
    pl = strlen(path);
    if (fat5__is_dir(path)) {
        for (i = 0; i < 3; i++) {   // the first name present (looked up, not opened: a FIFO would block)
            struct stat sb;
            fat5__free(ctx, file);
            if (!(file = FAT5__CAST(char *, fat5__malloc(ctx, pl + 20)))) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
            snprintf(file, pl + 20, "%s/%s", path, names[i]);
            if (stat(file, &sb) == 0) break;   // fat5__read_file refuses what is not a regular file
        }
        if (i == 3) {
            fat5__free(ctx, file);
            return fat5__err(ctx, FAT5_ERR_IO, "%s: no tokenizer.json, spiece.model or tokenizer.model in the directory", path);
        }
        is_json = i == 0;
    } else {
        if (!(file = fat5__strdup(ctx, path))) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
        is_json = pl >= 5 && strcmp(path + pl - 5, ".json") == 0;
    }
    st = fat5__read_file(ctx, file, FAT5__TOK_MAX_FILE, &buf, &len);
    if (!st) {
        st = fat5_tokenizer_from_memory(ctx, buf, len, is_json, out);
        if (st) {   // name the file in the message
            char msg[FAT5__ERRMSG_CAP];
            snprintf(msg, sizeof msg, "%s", fat5_last_error(ctx));
            fat5__err(ctx, st, "%s: %s", file, msg);
        }
    }
    fat5__free(ctx, buf);
    fat5__free(ctx, file);
    return st;
}

// one sequence's ids (no post-processor) appended to out
static fat5_status fat5__encode_one(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    return t->is_json ? fat5__hf_encode(t, s, n, out) : fat5__spm_encode(t, s, n, out);
}

FAT5_API fat5_status fat5_tokenize(fat5_tokenizer *t, const char *text, size_t len, const char *pair, size_t pair_len,
                                   int flags, int32_t **ids, int64_t *n_ids) {
    fat5__ubuf seq[2] = {{0, 0, 0}, {0, 0, 0}}, res = {0, 0, 0};
    fat5_status st = FAT5_OK;
    int w, np = pair ? 2 : 1;
    if (!t || !ids || !n_ids) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize: NULL argument") : FAT5_ERR_INVALID_ARG;
    *ids = NULL;
    *n_ids = 0;
    if ((!text && len) || (!pair && pair_len)) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize: text is NULL");
    if (len > UINT32_MAX / 2 || pair_len > UINT32_MAX / 2)
        return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize: text longer than 2 GiB");
    for (w = 0; w < np && !st; w++) st = fat5__encode_one(t, w ? pair : (text ? text : ""), w ? pair_len : len, &seq[w]);
    if (!st) {
        int special = !(flags & FAT5_TOKENIZE_NO_SPECIAL);
        if (!(special && t->is_json && t->n_tmpl[np - 1] >= 0)) {
            // the sequences as they are; sentencepiece: EOS after each (T5's convention)
            for (w = 0; w < np && !st; w++)
                if (!fat5__ubuf_append(t->ctx, &res, seq[w].p, seq[w].n) ||
                    (special && !t->is_json && t->eos_id >= 0 && !fat5__ubuf_push(t->ctx, &res, (uint32_t)t->eos_id)))
                    st = FAT5_ERR_OUT_OF_MEMORY;
        } else {   // the template
            int k;
            for (k = 0; k < t->n_tmpl[np - 1] && !st; k++) {
                const fat5__titem *it = &t->tmpl[np - 1][k];
                if (!(it->seq >= 0 ? fat5__ubuf_append(t->ctx, &res, seq[it->seq].p, seq[it->seq].n)
                                   : fat5__ubuf_append(t->ctx, &res, t->tmpl_ids.p + it->first, it->n)))
                    st = FAT5_ERR_OUT_OF_MEMORY;
            }
        }
    }
    fat5__free(t->ctx, seq[0].p);
    fat5__free(t->ctx, seq[1].p);
    if (st) {
        fat5__free(t->ctx, res.p);
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "tokenize: out of memory") : st;
    }
    if (!res.p && !(res.p = FAT5__CAST(uint32_t *, fat5__malloc(t->ctx, sizeof(uint32_t)))))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    *ids = FAT5__CAST(int32_t *, (void *)res.p);
    *n_ids = (int64_t)res.n;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_detokenize(fat5_tokenizer *t, const int32_t *ids, int64_t n, int flags, char **text, size_t *len) {
    fat5__tbuf out = {0, 0, 0};
    fat5_status st;
    int64_t i;
    if (!t || !text) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_detokenize: NULL argument") : FAT5_ERR_INVALID_ARG;
    *text = NULL;
    if (len) *len = 0;
    if (n < 0 || (!ids && n)) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_detokenize: bad ids");
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_detokenize: ids[%lld] = %d is outside the vocabulary (%d)",
                             (long long)i, (int)ids[i], (int)t->vocab_size);
    st = t->is_json ? fat5__hf_decode(t, ids, n, (flags & FAT5_DETOKENIZE_SKIP_SPECIAL) != 0, &out)
                    : fat5__spm_decode(t, ids, n, !(flags & FAT5_DETOKENIZE_SKIP_SPECIAL), &out);
    if (st) {
        fat5__free(t->ctx, out.p);
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "detokenize: out of memory") : st;
    }
    if (!out.p && !fat5__tbuf_put(t->ctx, &out, "", 0)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "detokenize: out of memory");
    *text = out.p;
    if (len) *len = out.n;
    return FAT5_OK;
}

FAT5_API int64_t fat5_tokenizer_vocab_size(const fat5_tokenizer *t) { return t ? t->vocab_size : 0; }

FAT5_API const char *fat5_tokenizer_id_to_piece(const fat5_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->vocab_size) return NULL;
    if (t->is_json) return t->id_off[id] == UINT32_MAX ? NULL : t->pool.p + t->id_off[id];
    return fat5__piece(t, id);
}

FAT5_API int32_t fat5_tokenizer_piece_to_id(const fat5_tokenizer *t, const char *piece) {
    int32_t i;
    if (!t || !piece) return -1;
    if (t->is_json) return fat5__tokenizer_text_id(t, piece);
    for (i = 0; i < t->n_pieces; i++)   // every piece, control and byte pieces included
        if (strcmp(fat5__piece(t, i), piece) == 0) return i;
    return -1;
}

FAT5_API int32_t fat5_tokenizer_eos_id(const fat5_tokenizer *t) { return t ? t->eos_id : -1; }
FAT5_API int32_t fat5_tokenizer_pad_id(const fat5_tokenizer *t) { return t ? t->pad_id : -1; }

FAT5_API fat5_status fat5_batch_from_texts(fat5_tokenizer *t, const char *const *inputs, const char *const *targets,
                                           int64_t n, fat5_batch *out) {
    fat5__ubuf tok[2] = {{0, 0, 0}, {0, 0, 0}}, cu[2] = {{0, 0, 0}, {0, 0, 0}};
    fat5_status st = FAT5_OK;
    int64_t i;
    int w;
    if (!t || !out) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: out is NULL") : FAT5_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (n < 0 || (n && !inputs)) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: no inputs");
    for (w = 0; w < (targets ? 2 : 1) && !st; w++) {
        if (!fat5__ubuf_push(t->ctx, &cu[w], 0)) st = FAT5_ERR_OUT_OF_MEMORY;
        for (i = 0; i < n && !st; i++) {
            const char *s = w ? targets[i] : inputs[i];
            int32_t *ids = NULL;
            int64_t m = 0;
            if (!s) {
                st = fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: %s[%lld] is NULL", w ? "targets" : "inputs", (long long)i);
                break;
            }
            if ((st = fat5_tokenize(t, s, strlen(s), NULL, 0, 0, &ids, &m))) break;
            if (tok[w].n + (size_t)m > (size_t)INT32_MAX) st = fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: more than 2^31 tokens");
            if (!st && !fat5__ubuf_append(t->ctx, &tok[w], (const uint32_t *)(const void *)ids, (size_t)m))
                st = FAT5_ERR_OUT_OF_MEMORY;
            fat5__free(t->ctx, ids);
            if (!st && !fat5__ubuf_push(t->ctx, &cu[w], (uint32_t)tok[w].n)) st = FAT5_ERR_OUT_OF_MEMORY;
        }
    }
    if (!st && !targets && !fat5__ubuf_push(t->ctx, &tok[1], 0)) st = FAT5_ERR_OUT_OF_MEMORY;
    for (w = 0; w < 2 && !st; w++)   // never a NULL array for a batch of no tokens
        if ((!tok[w].p && !fat5__ubuf_push(t->ctx, &tok[w], 0)) || (!cu[w].p && !fat5__ubuf_push(t->ctx, &cu[w], 0)))
            st = FAT5_ERR_OUT_OF_MEMORY;
    if (!targets && !st) {   // no labels: an empty decoder side
        cu[1].n = 0;
        for (i = 0; i <= n && !st; i++)
            if (!fat5__ubuf_push(t->ctx, &cu[1], 0)) st = FAT5_ERR_OUT_OF_MEMORY;
    }
    if (st) {
        for (w = 0; w < 2; w++) {
            fat5__free(t->ctx, tok[w].p);
            fat5__free(t->ctx, cu[w].p);
        }
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "fat5_batch_from_texts: out of memory") : st;
    }
    out->n_seq = n;
    out->n_enc_tokens = (int64_t)cu[0].p[n];
    out->enc_tokens = FAT5__CAST(const int32_t *, (void *)tok[0].p);
    out->enc_cu_seqlens = FAT5__CAST(const int32_t *, (void *)cu[0].p);
    out->dec_cu_seqlens = FAT5__CAST(const int32_t *, (void *)cu[1].p);
    if (targets) {
        out->labels = FAT5__CAST(const int32_t *, (void *)tok[1].p);
        out->n_dec_tokens = (int64_t)cu[1].p[n];
    } else {
        fat5__free(t->ctx, tok[1].p);
    }
    return FAT5_OK;
}

