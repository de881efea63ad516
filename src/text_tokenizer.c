// =============================================================================================
// ==[8.3] text: tokenizers ==
//
// Two file kinds, one tokenizer object. A tokenizer.json is interpreted as the `tokenizers`
// library does (added tokens split off the raw text, then normalizers, pre-tokenizers, the model,
// the post-processor; decoders on the way back: section [8.4]); a SentencePiece model as the
// `sentencepiece` library does (its own normaliser and whitespace rules, Unigram or BPE, byte
// fallback: here, with the public calls). The two share the vocabulary, the byte trie and the
// Unigram lattice, and differ where the libraries differ: sentencepiece adds in float, tokenizers
// in double; sentencepiece takes the longest charsmap rule at each byte, tokenizers the first one
// per grapheme cluster.
//
// Everything read from a file is bounded and checked: piece and vocabulary sizes, the protobuf's
// wire types and lengths, the charsmap's double array (each unit's target inside the array, as
// darts-clone's validate), JSON member types. Errors name the field.
//
// Time and memory stay in proportion to the text, whatever the model: where keys are long
// (Unigram pieces, user-defined pieces, added tokens over FAT5__UNI_WALK_MAX bytes) the keys at
// each position come from an automaton (fat5__rac) rather than a trie walk as deep as the longest
// key; and a long text is tokenized in parts of about FAT5__TOK_CHUNK bytes, cut only where the
// ids provably come out as for the whole text (sentencepiece: the normaliser streams, the lattice
// is cut where no piece crosses, BPE next to a whitespace mark no piece holds inside;
// tokenizer.json: fat5__hf_cut_setup), so that scratch memory does not grow with the text.

#define FAT5__TOK_MAX_FILE ((size_t)1 << 30)    // a tokenizer file larger than 1 GiB is refused
#define FAT5__TOK_MAX_PIECE 8000                // bytes of one piece (sentencepiece's limit)
#define FAT5__TOK_MAX_VOCAB ((int64_t)1 << 24)  // pieces + added tokens
#define FAT5__TOK_CHUNK ((size_t)1 << 16)       // bytes of text per part of a long text
#define FAT5__UNI_WALK_MAX 64                   // longest piece (bytes) for which Unigram walks the trie

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

// the longest key that is a prefix of s[0..n): its length (0: none) and *id; *steps (when not NULL)
// counts the nodes visited
static size_t fat5__trie_longest(const fat5__trie *t, const char *s, size_t n, int32_t *id, uint64_t *steps) {
    uint32_t node = 0;
    size_t i, best = 0;
    if (!t->node) return 0;
    for (i = 0; i < n; i++) {
        if (steps) ++*steps;
        if ((node = fat5__trie_next(t, node, (uint8_t)s[i])) == 0) break;
        if (t->node[node].value >= 0) {
            best = i + 1;
            *id = t->node[node].value;
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// The keys that start at each position of a text, in O(1 + matches) a position whatever the
// keys' lengths: an Aho-Corasick automaton over the reversed keys reads the text backwards; its
// state at position i is the longest s[i..j) that is the end of some key (read backwards), and
// its output links lead to exactly the keys s[i..j) equals, longest first. (A forward trie walk
// from every position costs the depth it reaches: up to the longest key, 8,000 bytes, a byte.)

typedef struct fat5__rac {
    fat5__trie trie;     // the reversed keys (empty: no automaton)
    uint32_t *fail;      // node -> the node of its longest proper suffix (0: the root)
    uint32_t *out;       // node -> the nearest node on its fail chain that ends a key (0: none)
    uint32_t *depth;     // node -> its depth, the bytes of the key read so far
} fat5__rac;

static void fat5__rac_free(fat5_ctx *ctx, fat5__rac *a) {
    fat5__trie_free(ctx, &a->trie);
    fat5__free(ctx, a->fail);
    fat5__free(ctx, a->out);
    fat5__free(ctx, a->depth);
    memset(a, 0, sizeof *a);
}

// Builds the automaton of the keys of trie tr (with their ids). A key is read off the trie from its
// node up to the root, which spells it backwards.
static fat5_status fat5__rac_build(fat5_ctx *ctx, const fat5__trie *tr, fat5__rac *a) {
    fat5__tkeys r;
    uint32_t *off = NULL, *len = NULL, *parent = NULL, *dep = NULL;
    int32_t *id = NULL;
    char *rev = NULL;
    size_t total = 0, at = 0, m = 0, u;
    fat5_status st = FAT5_OK;
    memset(a, 0, sizeof *a);
    parent = FAT5__CAST(uint32_t *, fat5__calloc(ctx, tr->n_nodes + 1, sizeof *parent));
    dep = FAT5__CAST(uint32_t *, fat5__calloc(ctx, tr->n_nodes + 1, sizeof *dep));
    if (!parent || !dep) goto oom;
    for (u = 0; u < tr->n_nodes; u++) {
        uint32_t c;
        for (c = tr->node[u].first; c < tr->node[u].first + tr->node[u].n; c++) {
            parent[c] = (uint32_t)u;
            dep[c] = dep[u] + 1;
        }
        if (u > 0 && tr->node[u].value >= 0) {   // a key (the trie's nodes hold at most 4 GiB of keys)
            m++;
            total += dep[u];
        }
    }
    off = FAT5__CAST(uint32_t *, fat5__calloc(ctx, m + 1, sizeof *off));
    len = FAT5__CAST(uint32_t *, fat5__calloc(ctx, m + 1, sizeof *len));
    id = FAT5__CAST(int32_t *, fat5__calloc(ctx, m + 1, sizeof *id));
    rev = FAT5__CAST(char *, fat5__malloc(ctx, total + 1));
    if (!off || !len || !id || !rev) goto oom;
    for (m = 0, u = 1; u < tr->n_nodes; u++) {
        uint32_t x;
        if (tr->node[u].value < 0) continue;
        off[m] = (uint32_t)at;
        len[m] = dep[u];
        id[m++] = tr->node[u].value;
        for (x = (uint32_t)u; x != 0; x = parent[x]) rev[at++] = (char)tr->node[x].label;
    }
    r.s = rev;
    r.off = off;
    r.len = len;
    r.id = id;
    if ((st = fat5__trie_build(ctx, &r, m, &a->trie))) goto done;
    a->fail = FAT5__CAST(uint32_t *, fat5__calloc(ctx, a->trie.n_nodes, sizeof *a->fail));
    a->out = FAT5__CAST(uint32_t *, fat5__calloc(ctx, a->trie.n_nodes, sizeof *a->out));
    a->depth = FAT5__CAST(uint32_t *, fat5__calloc(ctx, a->trie.n_nodes, sizeof *a->depth));
    if (!a->fail || !a->out || !a->depth) goto oom;
    // the nodes are in breadth-first order: a node's fail target (shallower) is done before it
    for (u = 0; u < a->trie.n_nodes; u++) {
        const fat5__tnode *nu = &a->trie.node[u];
        uint32_t c;
        for (c = nu->first; c < nu->first + nu->n; c++) {
            uint32_t f, w = 0;
            a->depth[c] = a->depth[u] + 1;
            if (u != 0)
                for (f = a->fail[u];; f = a->fail[f])
                    if ((w = fat5__trie_next(&a->trie, f, a->trie.node[c].label)) != 0 || f == 0) break;
            a->fail[c] = w;
            a->out[c] = w && a->trie.node[w].value >= 0 ? w : a->out[w];
        }
    }
    goto done;
oom:
    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory building the automaton");
done:
    fat5__free(ctx, parent);
    fat5__free(ctx, dep);
    fat5__free(ctx, off);
    fat5__free(ctx, len);
    fat5__free(ctx, id);
    fat5__free(ctx, rev);
    if (st != FAT5_OK) fat5__rac_free(ctx, a);
    return st;
}

// The automaton's state at each position a .. b-1 of s into state[0 .. b-a), reading s backwards
// from e: exact when e reaches b - 1 + the longest key or the text's end (a state is never deeper
// than the longest key). *steps counts the transitions.
static void fat5__rac_states(const fat5__rac *r, const char *s, size_t a, size_t b, size_t e, uint32_t *state,
                             uint64_t *steps) {
    size_t i;
    uint32_t q = 0;
    for (i = e; i > a;) {
        uint8_t c = (uint8_t)s[--i];
        for (;;) {
            uint32_t w = fat5__trie_next(&r->trie, q, c);
            ++*steps;
            if (w) { q = w; break; }
            if (q == 0) break;
            q = r->fail[q];
        }
        if (i < b) state[i - a] = q;
    }
}

// the longest key at the position whose state is q: its length (0: none) and *id
static size_t fat5__rac_longest(const fat5__rac *r, uint32_t q, int32_t *id) {
    uint32_t v = r->trie.node[q].value >= 0 ? q : r->out[q];
    if (!v) return 0;
    *id = r->trie.node[v].value;
    return r->depth[v];
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
enum { FAT5__SEG_START = 1, FAT5__SEG_END = 2 };   // the edges of a segment a normalizer sees

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
    int bl_trim;               // a ByteLevel post-processor trims spans: 1, 2 with add_prefix_space (0: none)
    uint32_t cs_prefix, eow_suffix;     // BPE continuing_subword_prefix / end_of_word_suffix (0: none)
    uint32_t cs_prefix_len, eow_suffix_len;
    fat5__merge *merges;       // open-addressing table
    size_t merge_cap;
    fat5__titem *tmpl[2];      // single / pair template
    int n_tmpl[2];
    fat5__ubuf tmpl_ids;
    // long texts (see the file's header)
    fat5__rac rac, user_rac, added_rac[2];   // automata of vocab, user, added_raw, added_norm (fat5__tok_automata)
    int spm_cut;               // sentencepiece BPE: parts cut before (1) or after (2) a whitespace mark, or never (0)
    int hf_cut;                // tokenizer.json: parts may be cut at a space (fat5__hf_cut_setup)
    uint8_t cut_left[128];     // ... the ASCII characters that may end a part there
    size_t chunk;              // bytes of text per part (FAT5__TOK_CHUNK)
    uint64_t work;             // steps of the searches for keys at text positions (trie or automaton) and
                               // lattice edges, summed over calls (tests bound it)
    uint64_t cuts;             // places where a long text was cut into parts, summed over calls
    fat5_status (*emit)(void *user, const int32_t *ids, int64_t n);   // fat5_tokenize_stream's receiver
    void *emit_user;
    int emit_failed;           // the receiver returned an error (its message stands)
    int prev_unk;              // sentencepiece: the last piece emitted was unknown
    uint32_t spm_fin;          // sentencepiece with spans: the input offset after the normalised text
    // scratch, reused by every call
    fat5__tbuf s0, s1, s2, s3, sn;
    fat5__ubuf o0, o1, o2, o3, on, ids, spl, spl2, ustate, nstate;   // ustate, nstate: automaton states
    void *lat;                 // lattice: best scores, starts and ids
    size_t lat_cap;
    size_t uni_pos, uni_front, uni_init;   // the lattice in progress (fat5__uni_run)
    // token spans (fat5_tokenize_offsets), carried only while want_off: beside each byte buffer of
    // the tokenizer.json steps, the (start, end) span in the original text that tokenizers'
    // alignments give its character (x0, x1 beside s0, s1; x3 beside s3; xn beside sn; xm beside s2);
    // sentencepiece: x0 the input offset of each byte of the normalised window s0
    int want_off;
    fat5__ubuf x0, x1, x3, xn, xm, om;     // om: s2's byte -> offset of the input byte it comes from
    fat5__ubuf spans;                      // the model's pieces: (start, end) bytes in the split
    const char *span_base;                 // ... relative to this (the split's first byte)
    fat5__ubuf offs;                       // the ids' (start, end) in the text, in step with them
    fat5__ubuf trimc;                      // bl_trim: the ids' leading and trailing spaces (characters)
    fat5__ubuf hspan;                      // BPE: each symbol's (start, end) in its word
};

static fat5_status fat5__tok_automata(fat5_tokenizer *t, int force);

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
    fat5__free(ctx, t->x0.p);
    fat5__free(ctx, t->x1.p);
    fat5__free(ctx, t->x3.p);
    fat5__free(ctx, t->xn.p);
    fat5__free(ctx, t->xm.p);
    fat5__free(ctx, t->om.p);
    fat5__free(ctx, t->spans.p);
    fat5__free(ctx, t->offs.p);
    fat5__free(ctx, t->trimc.p);
    fat5__free(ctx, t->hspan.p);
    fat5__free(ctx, t->ids.p);
    fat5__free(ctx, t->spl.p);
    fat5__free(ctx, t->spl2.p);
    fat5__free(ctx, t->ustate.p);
    fat5__free(ctx, t->nstate.p);
    fat5__rac_free(ctx, &t->rac);
    fat5__rac_free(ctx, &t->user_rac);
    fat5__rac_free(ctx, &t->added_rac[0]);
    fat5__rac_free(ctx, &t->added_rac[1]);
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
    if (t->model == FAT5__TM_UNIGRAM) return fat5__tok_automata(t, 0);
    {   // BPE on a long text: parts cut next to a whitespace mark when no piece holds one elsewhere
        const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
        size_t wl = t->escape_ws ? 3 : 1, j;
        int before = 1, after = 1;
        for (i = 0; i < t->n_pieces; i++) {
            const char *p = fat5__piece(t, (int32_t)i);
            if (t->type[i] != FAT5__SP_NORMAL && t->type[i] != FAT5__SP_USER) continue;
            for (j = 0; j + wl <= t->len[i]; j++)
                if (memcmp(p + j, ws, wl) == 0) {
                    if (j != 0) before = 0;
                    if (j + wl != t->len[i]) after = 0;
                }
        }
        t->spm_cut = before ? 1 : after ? 2 : 0;
    }
    return fat5__tok_automata(t, 0);
}
#undef FAT5__PB_WANT

// ---------------------------------------------------------------------------------------------
// Unigram: the best segmentation of a normalised string (Viterbi over the pieces that start at
// each character). sentencepiece sums float scores (and rebases them past 1e5, as it does);
// tokenizers sums doubles. A character no piece covers is the unknown piece at min_score - 10;
// user-defined pieces score 0.1 * (bytes - 1) (sentencepiece). Both libraries relax the edges start
// by start, left to right, and replace a node's best only on a strictly higher sum: of equal sums
// the first candidate stays, so the last piece that starts earliest wins. The sums tie as the
// libraries' own scores tie: tokenizer.json scores are read as tokenizers reads them
// (fat5__tj_serde_f64), not always the nearest double.
//
// The lattice is expanded start position by start position, in the libraries' order, over a
// window of the text: node 0 is the window's first byte. A position that no edge crosses (an
// articulation point: every path passes there) ends a part: its best path is final, emitted, and
// the window moves there, the node's score carried over, so that the sums and the rebases are
// those of the whole text. A text is thus expanded in parts of about t->chunk bytes, and the
// lattice holds one part (a text that no articulation point cuts is one part). The pieces at a
// position come from the trie walk, or from the automaton (t->rac) when pieces are long.

typedef struct fat5__lat { double score; int32_t start, id; } fat5__lat;

// Builds the automata that stand for trie walks where keys are long (the longest over
// FAT5__UNI_WALK_MAX bytes; always with force, as tests do): the Unigram vocabulary's, the
// user-defined pieces' (sentencepiece's normaliser and BPE), the added tokens' (tokenizer.json).
static fat5_status fat5__tok_automata(fat5_tokenizer *t, int force) {
    const fat5__trie *tr[4] = {&t->vocab, &t->user, &t->added_raw, &t->added_norm};
    fat5__rac *ac[4] = {&t->rac, &t->user_rac, &t->added_rac[0], &t->added_rac[1]};
    fat5_status st;
    int i;
    for (i = 0; i < 4; i++) {
        fat5__rac_free(t->ctx, ac[i]);
        if ((i == 0 && t->model != FAT5__TM_UNIGRAM) || tr[i]->n_nodes < 2 || (!force && tr[i]->max_len <= FAT5__UNI_WALK_MAX))
            continue;
        if ((st = fat5__rac_build(t->ctx, tr[i], ac[i]))) return st;
    }
    return FAT5_OK;
}

// bytes a start position needs to see after it: the longest piece, at least one character
static size_t fat5__uni_look(const fat5_tokenizer *t) { return t->vocab.max_len > 4 ? t->vocab.max_len : 4; }

// a new lattice: node 0 (the window's start) scores base
static fat5_status fat5__uni_begin(fat5_tokenizer *t, double base) {
    fat5__lat *L;
    if (!fat5__grow(t->ctx, &t->lat, &t->lat_cap, sizeof(fat5__lat), 1))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    L = FAT5__CAST(fat5__lat *, t->lat);
    L[0].score = base;
    L[0].start = -1;
    L[0].id = -1;
    t->uni_pos = t->uni_front = 0;
    t->uni_init = 1;
    return FAT5_OK;
}

// relaxes the edge of piece id over s[pos..end) from a path scoring here
static void fat5__uni_edge(fat5_tokenizer *t, fat5__lat *L, size_t pos, size_t end, int32_t id, double here) {
    const int spm = !t->is_json;
    double sc = spm && t->type[id] == FAT5__SP_USER ? (double)(float)(0.1 * (double)(end - 1 - pos)) : t->score[id];
    double cand = spm ? (double)((float)sc + (float)here) : sc + here;
    t->work++;
    if (end > t->uni_front) t->uni_front = end;
    if (L[end].start == -1 || cand > L[end].score) {
        L[end].score = cand;
        L[end].start = (int32_t)pos;
        L[end].id = id;
    }
}

// Expands the start positions from t->uni_pos while they are below limit; s[0..n) is the window's
// text known so far (n >= limit + the longest piece, or the text ends at n). Stops at the first
// articulation point at or past cut_min (keep_unk: not where an unknown piece ends, so that runs of
// unknowns stay whole) with *cut its position; else *cut = 0.
static fat5_status fat5__uni_run(fat5_tokenizer *t, const char *s, size_t n, size_t limit, size_t cut_min,
                                 int keep_unk, size_t *cut) {
    fat5__lat *L;
    size_t pos = t->uni_pos, first = pos, i, bytes;
    const int spm = !t->is_json;
    const double unk_score = spm ? (double)((float)t->min_score - 10.0f) : t->min_score - 10.0;
    *cut = 0;
    if (!fat5__mul_ok(n + 1, sizeof(fat5__lat), &bytes) || !fat5__grow(t->ctx, &t->lat, &t->lat_cap, bytes, 1))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    L = FAT5__CAST(fat5__lat *, t->lat);
    for (i = t->uni_init; i <= n; i++) {
        L[i].score = 0;
        L[i].start = -1;
        L[i].id = -1;
    }
    if (t->uni_init < n + 1) t->uni_init = n + 1;
    if (pos < limit && t->rac.trie.node) {
        size_t e = limit + t->rac.trie.max_len < n ? limit + t->rac.trie.max_len : n;
        if (!fat5__grow(t->ctx, (void **)&t->ustate.p, &t->ustate.cap, limit - pos, sizeof(uint32_t)))
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
        fat5__rac_states(&t->rac, s, pos, limit, e, t->ustate.p, &t->work);
    }
    while (pos < limit) {
        double here;
        size_t mb;
        int single = 0;
        if (pos >= cut_min && t->uni_front <= pos && !(keep_unk && L[pos].id == t->unk_id)) {
            *cut = pos;
            break;
        }
        here = L[pos].score;
        if (spm && (here < -100000.0 || here > 100000.0)) {   // sentencepiece's rebase of large scores
            for (i = pos; i <= t->uni_front; i++)
                if (i == pos || L[i].start != -1) L[i].score = (double)((float)L[i].score - (float)here);
            here = 0;
        }
        mb = spm ? (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(unsigned char)s[pos] >> 4] : fat5__utf8_len(s + pos, n - pos);
        if (mb == 0) mb = 1;
        if (mb > n - pos) mb = n - pos;
        if (t->rac.trie.node) {   // the pieces s[pos..pos+len), longest first
            const fat5__rac *r = &t->rac;
            uint32_t q = t->ustate.p[pos - first], v = r->trie.node[q].value >= 0 ? q : r->out[q];
            for (; v; v = r->out[v]) {
                int32_t id = r->trie.node[v].value;
                if (spm && t->type[id] == FAT5__SP_UNUSED) continue;
                fat5__uni_edge(t, L, pos, pos + r->depth[v], id, here);
                if (r->depth[v] == mb) single = 1;
            }
        } else {   // the trie walk, shortest first
            uint32_t node = 0;
            size_t k;
            for (k = pos; k < n; k++) {
                int32_t id;
                t->work++;
                if ((node = fat5__trie_next(&t->vocab, node, (uint8_t)s[k])) == 0) break;
                if ((id = t->vocab.node[node].value) < 0) continue;
                if (spm && t->type[id] == FAT5__SP_UNUSED) continue;
                fat5__uni_edge(t, L, pos, k + 1, id, here);
                if (k + 1 - pos == mb) single = 1;
            }
        }
        if (!single) {
            double cand = spm ? (double)((float)unk_score + (float)here) : unk_score + here;
            if (pos + mb > t->uni_front) t->uni_front = pos + mb;
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
    t->uni_pos = pos;
    return FAT5_OK;
}

// the best path from node 0 to node end as (start, end, id) triples in t->ids
static fat5_status fat5__uni_path(fat5_tokenizer *t, size_t end) {
    const fat5__lat *L = FAT5__CAST(const fat5__lat *, t->lat);
    size_t i;
    t->ids.n = 0;
    for (i = end; i > 0; i = (size_t)L[i].start)
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

static fat5_status fat5__spm_post(fat5_tokenizer *t, const char *s, fat5__ubuf *out);
static fat5_status fat5__hf_unigram_post(fat5_tokenizer *t, const char *s, fat5__ubuf *out);

// Expands the lattice over s[0..n) (the window's text known so far; fin: the text ends there) as
// far as it may, emitting the ids of each part that ends at an articulation point (past t->chunk
// bytes; all the rest when fin) into out. *used: the bytes emitted, which the caller drops (the
// window then starts after them).
static fat5_status fat5__uni_feed(fat5_tokenizer *t, const char *s, size_t n, int fin, fat5__ubuf *out, size_t *used) {
    const size_t look = fat5__uni_look(t);
    size_t done = 0;
    fat5_status st;
    *used = 0;
    for (;;) {
        size_t avail = n - done, limit = fin ? avail : avail > look ? avail - look : 0, cut;
        if ((st = fat5__uni_run(t, s + done, avail, limit, t->chunk ? t->chunk : 1, t->is_json, &cut))) return st;
        if (!cut && !fin) break;
        if ((st = fat5__uni_path(t, cut ? cut : avail))) return st;
        if ((st = t->is_json ? fat5__hf_unigram_post(t, s + done, out) : fat5__spm_post(t, s + done, out))) return st;
        t->cuts += cut > 0;
        if (!cut) {
            done = n;
            break;
        }
        {   // the window moves to the articulation point, its node's score carried
            fat5__lat *L = FAT5__CAST(fat5__lat *, t->lat);
            L[0].score = L[cut].score;
            L[0].start = L[0].id = -1;
            t->uni_pos -= cut;
            t->uni_front -= cut;
            t->uni_init = 1;
        }
        done += cut;
    }
    *used = done;
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
    if (t->user_rac.trie.node) {   // long user-defined pieces: found through their automaton
        if (!fat5__grow(t->ctx, (void **)&t->ustate.p, &t->ustate.cap, n + 1, sizeof(uint32_t)))
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
        fat5__rac_states(&t->user_rac, s, 0, n, n, t->ustate.p, &t->work);
    }
    for (pos = 0; pos < n; ny++) {
        int32_t uid;
        size_t k = t->user_rac.trie.node ? fat5__rac_longest(&t->user_rac, t->ustate.p[pos], &uid)
                                         : fat5__trie_longest(&t->user, s + pos, n - pos, &uid, &t->work);
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

// The step at s[0..n): bytes read (returned) and the text they become (*out); q: the user pieces'
// automaton state at s (NULL: walk the trie)
static size_t fat5__spm_prefix(fat5_tokenizer *t, const char *s, size_t n, const uint32_t *q, const char **out,
                               size_t *out_len) {
    fat5__cm_match m[32];
    size_t k, i, best = 0;
    int32_t id;
    const char *repl = NULL;
    if ((k = q ? fat5__rac_longest(&t->user_rac, *q, &id) : fat5__trie_longest(&t->user, s, n, &id, &t->work)) > 0) {
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

// The normaliser runs incrementally (fat5__spm_norm_more), a part of the output at a time, with
// the output of the whole text: leading spaces are skipped before anything is written, and the
// trailing ones go, and the suffix comes, when the text's end is reached.
typedef struct fat5__spm_norm {
    size_t r;          // raw bytes read
    int begun;         // the leading spaces skipped and the dummy prefix written
    int done;          // the text's end reached: its output is complete
    int prev_space;
    size_t sa, sb;     // raw positions whose user-piece automaton states t->nstate holds
} fat5__spm_norm;

// the user pieces' automaton state at raw position z->r (NULL when there is no automaton), the
// states computed a window of t->chunk positions at a time; 0 when out of memory
static int fat5__spm_user_state(fat5_tokenizer *t, const char *s, size_t n, fat5__spm_norm *z, const uint32_t **q) {
    *q = NULL;
    if (!t->user_rac.trie.node) return 1;
    if (z->r < z->sa || z->r >= z->sb) {
        size_t w = t->chunk ? t->chunk : 1, b = n - z->r > w ? z->r + w : n;
        size_t e = n - b > t->user_rac.trie.max_len ? b + t->user_rac.trie.max_len : n;
        if (!fat5__grow(t->ctx, (void **)&t->nstate.p, &t->nstate.cap, b - z->r, sizeof(uint32_t))) return 0;
        fat5__rac_states(&t->user_rac, s, z->r, b, e, t->nstate.p, &t->work);
        z->sa = z->r;
        z->sb = b;
    }
    *q = t->nstate.p + (z->r - z->sa);
    return 1;
}

// k copies of v appended to m (when not NULL)
static int fat5__map_put(fat5_tokenizer *t, fat5__ubuf *m, size_t k, size_t v) {
    while (m && k--)
        if (!fat5__ubuf_push(t->ctx, m, (uint32_t)v)) return 0;
    return 1;
}

// Normalises more of s[0..n), appending to o until it grew by want bytes or the text ends. With
// spans wanted (m not NULL), m gets beside each byte of o the input offset of the text it comes
// from (sentencepiece's norm_to_orig), and t->spm_fin the offset after the end once done.
static fat5_status fat5__spm_norm_more(fat5_tokenizer *t, const char *s, size_t n, fat5__spm_norm *z, fat5__tbuf *o,
                                       size_t want, fat5__ubuf *m) {
    const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
    size_t wl = t->escape_ws ? 3 : 1, i, start = o->n, fin = n;
    if (!fat5__tbuf_put(t->ctx, o, "", 0)) goto oom;
    if (z->done) return FAT5_OK;
    if (!z->begun) {
        z->begun = 1;
        if (t->remove_extra_ws)
            while (z->r < n) {
                const char *p;
                const uint32_t *q;
                size_t pl, k;
                if (!fat5__spm_user_state(t, s, n, z, &q)) goto oom;
                k = fat5__spm_prefix(t, s + z->r, n - z->r, q, &p, &pl);
                if (!(pl == 1 && p[0] == ' ')) break;
                z->r += k;
            }
        if (z->r == n) {   // empty, or nothing but spaces: no output at all
            z->done = 1;
            return FAT5_OK;
        }
        if (!t->ws_suffix && t->add_dummy_prefix && (!fat5__tbuf_put(t->ctx, o, ws, wl) || !fat5__map_put(t, m, wl, z->r)))
            goto oom;
        z->prev_space = t->remove_extra_ws;
    }
    while (z->r < n && o->n - start < want) {
        const char *p;
        const uint32_t *q;
        size_t pl, k;
        if (!fat5__spm_user_state(t, s, n, z, &q)) goto oom;
        k = fat5__spm_prefix(t, s + z->r, n - z->r, q, &p, &pl);
        while (z->prev_space && pl && p[0] == ' ') {
            p++;
            pl--;
        }
        if (pl) {
            for (i = 0; i < pl; i++)
                if (!(p[i] == ' ' ? fat5__tbuf_put(t->ctx, o, ws, wl) && fat5__map_put(t, m, wl, z->r)
                                  : fat5__tbuf_put(t->ctx, o, p + i, 1) && fat5__map_put(t, m, 1, z->r)))
                    goto oom;
            z->prev_space = p[pl - 1] == ' ';
        }
        z->r += k;
        if (!t->remove_extra_ws) z->prev_space = 0;
    }
    if (z->r == n) {
        if (t->remove_extra_ws)
            while (o->n >= wl && memcmp(o->p + o->n - wl, ws, wl) == 0) {
                o->p[o->n -= wl] = 0;
                if (m) fin = m->p[m->n = o->n];   // the text ends where the trailing spaces began
            }
        if (t->ws_suffix && t->add_dummy_prefix && (!fat5__tbuf_put(t->ctx, o, ws, wl) || !fat5__map_put(t, m, wl, fin)))
            goto oom;
        t->spm_fin = (uint32_t)fin;
        z->done = 1;
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// Bytes at the end of o that may still change: the whitespace marks there, which go if the text
// ends after them (remove_extra_whitespaces). The model reads up to them only.
static size_t fat5__spm_pending(const fat5_tokenizer *t, const fat5__tbuf *o) {
    const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
    size_t wl = t->escape_ws ? 3 : 1, k = 0;
    if (!t->remove_extra_ws) return 0;
    while (o->n - k >= wl && memcmp(o->p + o->n - k - wl, ws, wl) == 0) k += wl;
    return k;
}

// sentencepiece BPE on a long text: the last place in s[0..n) where a part may end, 0 when none.
// No piece holds a whitespace mark other than at its start (t->spm_cut 1) or its end (2), so
// none crosses the place before (1) or after (2) a mark, and the merges on each side are those of
// the whole text (they never pair symbols across it; each side's order is the whole's).
static size_t fat5__spm_bpe_cut(const fat5_tokenizer *t, const char *s, size_t n) {
    const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
    size_t wl = t->escape_ws ? 3 : 1, i;
    if (!t->spm_cut || n < wl) return 0;
    for (i = n - wl + 1; i-- > 0;)
        if (memcmp(s + i, ws, wl) == 0) {
            size_t q = t->spm_cut == 1 ? i : i + wl;
            if (q > 0) return q;
        }
    return 0;
}

// sentencepiece with spans: the input offset of the normalised window's byte at s + a (t->x0 the
// window's map, t->span_base its start; past its end, the text's end)
static uint32_t fat5__spm_orig(const fat5_tokenizer *t, const char *s, size_t a) {
    size_t k = (size_t)(s - t->span_base) + a;
    return k < t->x0.n ? t->x0.p[k] : t->spm_fin;
}

// the pieces (t->ids triples over s) as ids appended to out: unknown runs merged, or bytes with
// byte fallback (t->prev_unk carries the last piece's kind from one part to the next); with spans
// wanted, their spans appended to t->offs as sentencepiece gives them
static fat5_status fat5__spm_post(fat5_tokenizer *t, const char *s, fat5__ubuf *out) {
    size_t i, j;
    for (i = 0; i + 3 <= t->ids.n; i += 3) {
        uint32_t a = t->ids.p[i], b = t->ids.p[i + 1], oa = 0, ob = 0;
        int32_t id = (int32_t)t->ids.p[i + 2];
        int unk = id == t->unk_id;
        if (t->want_off) {   // sentencepiece's spans: norm_to_orig at the piece's ends
            oa = fat5__spm_orig(t, s, a);
            ob = fat5__spm_orig(t, s, b);
        }
        if (unk && t->byte_fallback) {   // the load made sure all 256 byte pieces exist
            if (!fat5__push_byte_pieces(t, s + a, b - a, out)) goto oom;
            for (j = a; t->want_off && j < b; j++)   // the last byte holds the span, the others (start, start)
                if (!fat5__ubuf_push(t->ctx, &t->offs, oa) || !fat5__ubuf_push(t->ctx, &t->offs, j + 1 == b ? ob : oa)) goto oom;
        } else if (t->prev_unk && unk) {   // a run of unknowns: one piece
            if (t->want_off && t->offs.n >= 2) t->offs.p[t->offs.n - 1] = ob;
        } else if (!fat5__ubuf_push(t->ctx, out, (uint32_t)id) ||
                   (t->want_off && (!fat5__ubuf_push(t->ctx, &t->offs, oa) || !fat5__ubuf_push(t->ctx, &t->offs, ob)))) {
            goto oom;
        }
        t->prev_unk = unk;
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// hands the ids gathered in out to fat5_tokenize_stream's receiver, if any
static fat5_status fat5__emit_ids(fat5_tokenizer *t, fat5__ubuf *out) {
    fat5_status st;
    if (!t->emit || out->n == 0) return FAT5_OK;
    st = t->emit(t->emit_user, FAT5__CAST(const int32_t *, (const void *)out->p), (int64_t)out->n);
    out->n = 0;
    if (st != FAT5_OK) t->emit_failed = 1;
    return st;
}

// sentencepiece: text -> ids appended to out. The normalised text passes through the window
// t->s0: normalised a part at a time, handed to the model up to where it may be cut, and dropped.
static fat5_status fat5__spm_encode(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5__spm_norm z;
    fat5__tbuf *w = &t->s0;
    fat5__ubuf *m = t->want_off ? &t->x0 : NULL;   // with spans: the window's map (fat5__spm_norm_more)
    fat5_status st;
    memset(&z, 0, sizeof z);
    w->n = 0;
    t->x0.n = 0;
    t->spm_fin = (uint32_t)n;
    t->prev_unk = 0;
    if (t->model == FAT5__TM_UNIGRAM && (st = fat5__uni_begin(t, 0))) return st;
    for (;;) {
        size_t avail, used = 0;
        if ((st = fat5__spm_norm_more(t, s, n, &z, w, t->chunk ? t->chunk : 1, m))) return st;
        avail = z.done ? w->n : w->n - fat5__spm_pending(t, w);
        t->span_base = w->p;
        if (t->model == FAT5__TM_UNIGRAM) {
            st = fat5__uni_feed(t, w->p, avail, z.done, out, &used);
        } else {
            size_t q = z.done ? avail : fat5__spm_bpe_cut(t, w->p, avail);
            if (m && !z.done && q && q == w->n) q = fat5__spm_bpe_cut(t, w->p, q - 1);   // the map after q: not known yet
            if (q && !(st = fat5__spm_bpe(t, w->p, q))) st = fat5__spm_post(t, w->p, out);
            t->cuts += q > 0 && !z.done;
            used = q;
        }
        if (st) return st;
        memmove(w->p, w->p + used, w->n - used + 1);
        w->n -= used;
        if (m) {
            memmove(m->p, m->p + used, (m->n - used) * sizeof(uint32_t));
            m->n -= used;
        }
        if ((st = fat5__emit_ids(t, out))) return st;
        if (z.done) return FAT5_OK;
    }
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
// the public calls

// tokenizer.json (section [8.4])
static fat5_status fat5__tj_load(fat5_tokenizer *t, const char *what, const char *text, size_t len);
static fat5_status fat5__hf_encode(fat5_tokenizer *t, const char *text, size_t len, fat5__ubuf *out);
static void fat5__hf_trim_offsets(fat5_tokenizer *t, const char *text, size_t len, uint32_t *off, size_t n);
static fat5_status fat5__hf_decode(fat5_tokenizer *t, const int32_t *ids, int64_t n, int skip, fat5__tbuf *out);

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
    t->chunk = FAT5__TOK_CHUNK;
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

// fat5_tokenize for text alone, with each id's (start, end) byte span in text beside it: the
// sequence's from the encoders (t->want_off: tokenizer.json's alignments, sentencepiece's
// norm_to_orig), the template's own ids and sentencepiece's EOS (0, 0).
FAT5_API fat5_status fat5_tokenize_offsets(fat5_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
                                           int64_t **offsets, int64_t *n) {
    fat5__ubuf seq = {0, 0, 0}, res = {0, 0, 0};
    int64_t *off = NULL;
    size_t i, k = 0;
    fat5_status st = FAT5_OK;
    int special, w;
    if (!t || !ids || !offsets || !n)
        return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize_offsets: NULL argument") : FAT5_ERR_INVALID_ARG;
    *ids = NULL;
    *offsets = NULL;
    *n = 0;
    if (!text && len) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize_offsets: text is NULL");
    if (len > UINT32_MAX / 2) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize_offsets: text longer than 2 GiB");
    special = !(flags & FAT5_TOKENIZE_NO_SPECIAL);
    t->want_off = 1;
    t->offs.n = t->trimc.n = 0;
    st = fat5__encode_one(t, text ? text : "", len, &seq);
    t->want_off = 0;
    if (!st && t->offs.n != 2 * seq.n)
        st = fat5__err(t->ctx, FAT5_ERR_STATE, "fat5_tokenize_offsets: %zu spans for %zu ids (a defect)", t->offs.n / 2, seq.n);
    if (!st && t->is_json) fat5__hf_trim_offsets(t, text ? text : "", len, t->offs.p, seq.n);
    if (!st) {
        int use_tmpl = special && t->is_json && t->n_tmpl[0] >= 0;
        int eos = special && !t->is_json && t->eos_id >= 0;   // sentencepiece: EOS after the text (T5's convention)
        size_t total = use_tmpl ? 0 : seq.n + (size_t)eos;
        for (w = 0; use_tmpl && w < t->n_tmpl[0]; w++) total += t->tmpl[0][w].seq >= 0 ? seq.n : t->tmpl[0][w].n;
        off = FAT5__CAST(int64_t *, fat5__malloc(t->ctx, (2 * total + 2) * sizeof(int64_t)));
        if (!off || !fat5__grow(t->ctx, (void **)&res.p, &res.cap, total + 1, sizeof(uint32_t))) {
            st = FAT5_ERR_OUT_OF_MEMORY;
        } else {
            for (w = 0; w < (use_tmpl ? t->n_tmpl[0] : 1); w++) {
                const fat5__titem *it = use_tmpl ? &t->tmpl[0][w] : NULL;
                if (!it || it->seq >= 0) {   // the text's ids and spans
                    for (i = 0; i < seq.n; i++, k++) {
                        res.p[k] = seq.p[i];
                        off[2 * k] = t->offs.p[2 * i];
                        off[2 * k + 1] = t->offs.p[2 * i + 1];
                    }
                } else {   // the template's own ids
                    for (i = 0; i < it->n; i++, k++) {
                        res.p[k] = t->tmpl_ids.p[it->first + i];
                        off[2 * k] = off[2 * k + 1] = 0;
                    }
                }
            }
            if (eos) {
                res.p[k] = (uint32_t)t->eos_id;
                off[2 * k] = off[2 * k + 1] = 0;
                k++;
            }
            res.n = k;
        }
    }
    fat5__free(t->ctx, seq.p);
    if (st) {
        fat5__free(t->ctx, res.p);
        fat5__free(t->ctx, off);
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "tokenize: out of memory") : st;
    }
    *ids = FAT5__CAST(int32_t *, (void *)res.p);
    *offsets = off;
    *n = (int64_t)res.n;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_tokenize_stream(fat5_tokenizer *t, const char *text, size_t len, int flags,
                                          fat5_status (*emit)(void *user, const int32_t *ids, int64_t n), void *user) {
    fat5__ubuf buf = {0, 0, 0};
    fat5_status st = FAT5_OK;
    int special, k;
    if (!t || !emit) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize_stream: NULL argument") : FAT5_ERR_INVALID_ARG;
    if (!text && len) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize_stream: text is NULL");
    if (len > UINT32_MAX / 2) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize_stream: text longer than 2 GiB");
    special = !(flags & FAT5_TOKENIZE_NO_SPECIAL);
    t->emit = emit;
    t->emit_user = user;
    t->emit_failed = 0;
    if (special && t->is_json && t->n_tmpl[0] >= 0) {   // the single template: its ids around the sequence
        for (k = 0; k < t->n_tmpl[0] && !st; k++) {
            const fat5__titem *it = &t->tmpl[0][k];
            if (it->seq >= 0) st = fat5__encode_one(t, text ? text : "", len, &buf);
            else if (!fat5__ubuf_append(t->ctx, &buf, t->tmpl_ids.p + it->first, it->n)) st = FAT5_ERR_OUT_OF_MEMORY;
            if (!st) st = fat5__emit_ids(t, &buf);
        }
    } else {   // the sequence; sentencepiece: EOS after it
        st = fat5__encode_one(t, text ? text : "", len, &buf);
        if (!st && special && !t->is_json && t->eos_id >= 0 && !fat5__ubuf_push(t->ctx, &buf, (uint32_t)t->eos_id))
            st = FAT5_ERR_OUT_OF_MEMORY;
        if (!st) st = fat5__emit_ids(t, &buf);
    }
    t->emit = NULL;
    t->emit_user = NULL;
    fat5__free(t->ctx, buf.p);
    if (st == FAT5_ERR_OUT_OF_MEMORY && !t->emit_failed) return fat5__err(t->ctx, st, "tokenize: out of memory");
    return st;
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
