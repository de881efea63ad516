// =============================================================================================
// ==[8.11] text: tokenizer training — BPE (tokenizers' BpeTrainer) ==
//
// fat5__tt_bpe trains a BPE vocabulary as `tokenizers`' BpeTrainer (0.22) does on the same
// sentences with the pipeline the written tokenizer.json holds (the NFKC normalizer unless the
// rule is "identity"; Metaspace("\u2581", prepend always, split) or GPT-2's ByteLevel words):
//   1. words: each sentence normalised and pre-tokenized by the steps of that tokenizer.json as
//      fat5's loader runs them (a tokenizer holding the special pieces only), the words counted;
//   2. the vocabulary starts with the special pieces (fat5__tt_vocab_specials), then the alphabet
//      in code point order: every character of the words with its count (with byte_level the 256
//      characters of GPT-2's byte alphabet too, counted as the most frequent); limit_alphabet keeps
//      the most frequent (tokenizers leaves equal counts at the limit to its hash order; here the
//      lower code point is kept). Characters left out are dropped from the words;
//   3. the pairs of adjacent symbols are counted over the words (times each word's count) and a
//      queue holds one entry per pair: its count and the words it occurs in. The entry with the
//      highest count is taken (ties: the lower left id, then the lower right id; then the entry
//      queued first); an entry whose count is no longer the pair's is queued again with the
//      pair's count. The taken pair (count at least 1 and min_frequency) becomes a merge: its
//      text is a new piece unless it is one already; every occurrence in the entry's words is
//      replaced left to right, the counts of the pairs around it move, and the pairs that gained
//      occurrences are queued again with the words where they did (a pair formed next to the new
//      symbol is counted only when their characters together are fewer than max_token_length).
//      Until the vocabulary holds vocab_size pieces or the queue runs dry;
//      A pair's count is not lowered by its own merge, and a count can fall below zero (a pair
//      lost next to a merge where max_token_length kept it from being counted); such a count
//      reads as a huge one when compared, as tokenizers compares it;
//   4. a pair merged twice (a second entry of it taken later) keeps its last rank, as the merges
//      tokenizers writes.
// The sentences are those fat5's corpus reader yields (no line ends), as tokenizers'
// train_from_iterator takes them; its train(files) keeps each line's "\n" in the last word.
// Every step adds integers and orders its queue by the keys above, so the result does not depend
// on the thread count. Memory: the distinct words, their symbols, the pairs and the queue's word
// lists (each merge adds at most two entries per replaced occurrence).

// tokenizer.json for a vocabulary (text_train_write.c)
static fat5_status fat5__tt_json_bytes(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                       const fat5__tt_vocab *v, const unsigned char *charsmap, size_t charsmap_len,
                                       fat5__sb *b);

// words in a merge's entry from which the replacing runs on the threads (the tests make it small)
#ifndef FAT5__BPE_PAR_MIN
#define FAT5__BPE_PAR_MIN 2048
#endif

// ---------------------------------------------------------------------------------------------
// a set of byte strings with counts (the words, the vocabulary's pieces): index = insertion order

typedef struct fat5__bpe_strs {
    char *bytes;         // [nbytes] the strings back to back
    int64_t *off;        // [n + 1] string i is bytes[off[i] .. off[i + 1])
    int64_t *count;      // [n]
    uint64_t *hash;      // [n]
    int32_t *slot;       // [cap_slot] open addressing: an index or -1
    size_t n, cap, nbytes, cap_bytes, cap_slot;
} fat5__bpe_strs;

static void fat5__bpe_strs_free(fat5_ctx *ctx, fat5__bpe_strs *S) {
    fat5__free(ctx, S->bytes);
    fat5__free(ctx, S->off);
    fat5__free(ctx, S->count);
    fat5__free(ctx, S->hash);
    fat5__free(ctx, S->slot);
    memset(S, 0, sizeof *S);
}

static uint64_t fat5__bpe_hash(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

// The index of s[0..n), -1 when absent
static int64_t fat5__bpe_strs_find(const fat5__bpe_strs *S, const char *s, size_t n, uint64_t h) {
    size_t m, k;
    if (!S->cap_slot) return -1;
    m = S->cap_slot - 1;
    for (k = (size_t)h & m;; k = (k + 1) & m) {
        int32_t i = S->slot[k];
        if (i < 0) return -1;
        if (S->hash[i] == h && (size_t)(S->off[i + 1] - S->off[i]) == n && !memcmp(S->bytes + S->off[i], s, n)) return i;
    }
}

// Adds count to s[0..n)'s (inserted when absent); its index, or -1 when out of memory
static int64_t fat5__bpe_strs_add(fat5_ctx *ctx, fat5__bpe_strs *S, const char *s, size_t n, int64_t count) {
    uint64_t h = fat5__bpe_hash(s, n);
    int64_t i = fat5__bpe_strs_find(S, s, n, h);
    size_t k, m;
    if (i >= 0) {
        S->count[i] += count;
        return i;
    }
    if (S->n >= (size_t)INT32_MAX - 1) return -1;
    if (2 * (S->n + 1) > S->cap_slot) {   // rehash at half full
        size_t c = S->cap_slot ? 2 * S->cap_slot : 1024, j;
        int32_t *ns = FAT5__CAST(int32_t *, fat5__malloc(ctx, c * sizeof(int32_t)));
        if (!ns) return -1;
        for (j = 0; j < c; j++) ns[j] = -1;
        for (j = 0; j < S->n; j++) {
            for (k = (size_t)S->hash[j] & (c - 1); ns[k] >= 0; k = (k + 1) & (c - 1)) {}
            ns[k] = (int32_t)j;
        }
        fat5__free(ctx, S->slot);
        S->slot = ns;
        S->cap_slot = c;
    }
    if (!fat5__grow(ctx, (void **)&S->bytes, &S->cap_bytes, S->nbytes + n + 1, 1)) return -1;
    if (S->n + 2 > S->cap) {
        size_t c = S->cap, c2 = S->cap, c3 = S->cap;
        if (!fat5__grow(ctx, (void **)&S->off, &c, S->n + 2, sizeof(int64_t)) ||
            !fat5__grow(ctx, (void **)&S->count, &c2, S->n + 2, sizeof(int64_t)) ||
            !fat5__grow(ctx, (void **)&S->hash, &c3, S->n + 2, sizeof(uint64_t)))
            return -1;
        S->cap = c < c2 ? (c < c3 ? c : c3) : (c2 < c3 ? c2 : c3);
    }
    if (S->n == 0) S->off[0] = 0;
    memcpy(S->bytes + S->nbytes, s, n);
    S->nbytes += n;
    S->off[S->n + 1] = (int64_t)S->nbytes;
    S->count[S->n] = count;
    S->hash[S->n] = h;
    m = S->cap_slot - 1;
    for (k = (size_t)h & m; S->slot[k] >= 0; k = (k + 1) & m) {}
    S->slot[k] = (int32_t)S->n;
    return (int64_t)S->n++;
}

// ---------------------------------------------------------------------------------------------
// 1. the words

// The words of one sentence s[0..n) as the tokenizer t's normalizers and pre-tokenizers make
// them (no added tokens: tokenizers' trainer feeds the text through these steps alone), added to
// W with count freq.
static fat5_status fat5__bpe_split(fat5_tokenizer *t, const char *s, size_t n, int64_t freq, fat5__bpe_strs *W) {
    fat5__tbuf *ba = &t->s0, *bb = &t->s1, *tb;
    fat5__ubuf *oa = &t->o0, *ob = &t->o1, *sa = &t->spl, *sb = &t->spl2, *tu;
    fat5_status st;
    size_t q;
    int k;
    const char *ns = s;
    size_t nn = n, i;
    int ascii = 1;
    for (i = 0; i < n && ascii; i++) ascii = (unsigned char)s[i] < 0x80;
    // NFKC leaves ASCII text as it is (no ASCII character decomposes or composes)
    if (!ascii || t->n_norm > 1 || (t->n_norm == 1 && t->norm[0].kind != FAT5__N_NFKC)) {
        if ((st = fat5__hf_normalize(t, s, n, 0, FAT5__SEG_START | FAT5__SEG_END, &t->s3, &t->o3, NULL, &t->x3)))
            return st;
        ns = t->s3.p, nn = t->s3.n;
    }
    if (nn == 0) return FAT5_OK;
    ba->n = oa->n = sa->n = 0;
    if (!fat5__tbuf_put(t->ctx, ba, "", 0) || !fat5__emit(t, ba, oa, ns, nn, NULL, 0, NULL, NULL, 0, 0) ||
        !fat5__split_push(t, sa, 0, nn, 0, FAT5__NOTOK))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory splitting words");
    for (k = 0; k < t->n_pre; k++) {
        if ((st = fat5__hf_pre_step(t, &t->pre[k], ba, oa, sa, bb, ob, sb, NULL, NULL))) return st;
        tb = ba, ba = bb, bb = tb;
        tu = oa, oa = ob, ob = tu;
        tu = sa, sa = sb, sb = tu;
    }
    for (q = 0; q < sa->n; q += 4)
        if (sa->p[q + 1] > 0 && fat5__bpe_strs_add(t->ctx, W, ba->p + sa->p[q], sa->p[q + 1], freq) < 0)
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory counting words");
    return FAT5_OK;
}

typedef struct fat5__bpe_wpart {
    const fat5__tt_corpus *c;
    fat5_tokenizer **tok;   // [parts] one pre-tokenizer per part
    fat5__bpe_strs *words;  // [parts] the words of each part's sentences
    fat5_status *st;        // [parts]
} fat5__bpe_wpart;

// part p of the sentences (a contiguous range) split into words
static void fat5__bpe_words_part(void *arg, int p, int parts) {
    fat5__bpe_wpart *a = FAT5__CAST(fat5__bpe_wpart *, arg);
    int64_t lo = a->c->n * p / parts, hi = a->c->n * (p + 1) / parts, i;
    for (i = lo; i < hi && !a->st[p]; i++)
        a->st[p] = fat5__bpe_split(a->tok[p], a->c->bytes + a->c->off[i], (size_t)(a->c->off[i + 1] - a->c->off[i] - 1),
                                   a->c->freq[i], &a->words[p]);
}

// The words of the corpus with their counts, in the order of their first occurrence
static fat5_status fat5__bpe_words(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, const fat5__tt_corpus *c,
                                   int parts, fat5__bpe_strs *W) {
    fat5_tokenizer_train_config c2 = *cfg;
    fat5__tt_vocab v;
    fat5__sb sb;
    fat5__bpe_wpart a;
    fat5_status st;
    int p;
    size_t i;
    memset(&v, 0, sizeof v);
    memset(&a, 0, sizeof a);
    fat5__sb_init(&sb, ctx);
    c2.extra_ids = 0;
    if ((st = fat5__tt_vocab_specials(ctx, &c2, &v)) || (st = fat5__tt_json_bytes(ctx, &c2, &v, NULL, 0, &sb))) goto done;
    a.c = c;
    a.tok = FAT5__CAST(fat5_tokenizer **, fat5__calloc(ctx, (size_t)parts, sizeof(fat5_tokenizer *)));
    a.words = FAT5__CAST(fat5__bpe_strs *, fat5__calloc(ctx, (size_t)parts, sizeof(fat5__bpe_strs)));
    a.st = FAT5__CAST(fat5_status *, fat5__calloc(ctx, (size_t)parts, sizeof(fat5_status)));
    if (!a.tok || !a.words || !a.st) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory");
        goto done;
    }
    for (p = 0; p < parts; p++)
        if ((st = fat5_tokenizer_from_memory(ctx, sb.buf, sb.len, 1, &a.tok[p]))) goto done;
    fat5__pool_run(ctx, fat5__bpe_words_part, &a, parts);
    for (p = 0; p < parts && !st; p++) st = a.st[p];
    for (p = 0; p < parts && !st; p++)   // parts in order: the first occurrences stay in corpus order
        for (i = 0; i < a.words[p].n && !st; i++)
            if (fat5__bpe_strs_add(ctx, W, a.words[p].bytes + a.words[p].off[i],
                                   (size_t)(a.words[p].off[i + 1] - a.words[p].off[i]), a.words[p].count[i]) < 0)
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory counting words");
done:
    for (p = 0; p < parts; p++) {
        if (a.tok) fat5_tokenizer_destroy(a.tok[p]);
        if (a.words) fat5__bpe_strs_free(ctx, &a.words[p]);
    }
    fat5__free(ctx, a.tok);
    fat5__free(ctx, a.words);
    fat5__free(ctx, a.st);
    fat5__sb_free(&sb);
    fat5__tt_vocab_free(ctx, &v);
    return st;
}

// ---------------------------------------------------------------------------------------------
// 2. the alphabet

typedef struct fat5__bpe_char { uint32_t cp; uint64_t count; int32_t id; } fat5__bpe_char;

// by count, the rarest first; equal counts: the higher code point first (dropped first)
static int fat5__bpe_char_rarer(const void *x, const void *y) {
    const fat5__bpe_char *a = FAT5__CAST(const fat5__bpe_char *, x), *b = FAT5__CAST(const fat5__bpe_char *, y);
    if (a->count != b->count) return a->count < b->count ? -1 : 1;
    return a->cp > b->cp ? -1 : a->cp < b->cp ? 1 : 0;
}
static int fat5__bpe_char_by_cp(const void *x, const void *y) {
    const fat5__bpe_char *a = FAT5__CAST(const fat5__bpe_char *, x), *b = FAT5__CAST(const fat5__bpe_char *, y);
    return a->cp < b->cp ? -1 : a->cp > b->cp;
}

// The characters of the words (and GPT-2's byte alphabet with byte_level) with their counts;
// *ch [*n] allocated, *slot [*cap] open addressing over it by code point (-1 empty)
typedef struct fat5__bpe_alpha {
    fat5__bpe_char *ch;
    int32_t *slot;
    size_t n, cap_ch, cap;
} fat5__bpe_alpha;

static int64_t fat5__bpe_alpha_find(const fat5__bpe_alpha *A, uint32_t cp) {
    size_t k, m = A->cap - 1;
    for (k = (cp * 0x9E3779B1u) & m;; k = (k + 1) & m) {
        int32_t i = A->slot[k];
        if (i < 0 || A->ch[i].cp == cp) return i;
    }
}
static int fat5__bpe_alpha_add(fat5_ctx *ctx, fat5__bpe_alpha *A, uint32_t cp, uint64_t count) {
    int64_t i;
    size_t k, m;
    if (2 * (A->n + 1) > A->cap) {
        size_t c = A->cap ? 2 * A->cap : 1024, j;
        int32_t *ns = FAT5__CAST(int32_t *, fat5__malloc(ctx, c * sizeof(int32_t)));
        if (!ns) return 0;
        for (j = 0; j < c; j++) ns[j] = -1;
        for (j = 0; j < A->n; j++) {
            for (k = (A->ch[j].cp * 0x9E3779B1u) & (c - 1); ns[k] >= 0; k = (k + 1) & (c - 1)) {}
            ns[k] = (int32_t)j;
        }
        fat5__free(ctx, A->slot);
        A->slot = ns;
        A->cap = c;
    }
    i = fat5__bpe_alpha_find(A, cp);
    if (i >= 0) {
        A->ch[i].count = count == UINT64_MAX || A->ch[i].count > UINT64_MAX - count ? UINT64_MAX : A->ch[i].count + count;
        return 1;
    }
    if (!fat5__grow(ctx, (void **)&A->ch, &A->cap_ch, A->n + 1, sizeof(fat5__bpe_char))) return 0;
    A->ch[A->n].cp = cp, A->ch[A->n].count = count, A->ch[A->n].id = -1;
    m = A->cap - 1;
    for (k = (cp * 0x9E3779B1u) & m; A->slot[k] >= 0; k = (k + 1) & m) {}
    A->slot[k] = (int32_t)A->n++;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// 3. pairs, the queue, merging

typedef struct fat5__bpe_pair {
    int32_t a, b;        // left and right id
    int64_t count;       // occurrences (times the words' counts) now
    int32_t stamp, nw;   // the merge that last gained occurrences of it, in nw words
    int32_t last;        // the last word counted (words come in order)
    int64_t off;         // where its words go in the word lists
} fat5__bpe_pair;

typedef struct fat5__bpe_entry {  // an entry of the queue
    uint64_t count;
    int32_t a, b, pair, nw;   // nw words at the lists' off
    int64_t off;
    uint64_t seq;             // queued at; the earlier of two equal entries comes first
} fat5__bpe_entry;

typedef struct fat5__bpe_change { int32_t a, b, delta, w; } fat5__bpe_change;

typedef struct fat5__bpe {
    fat5_ctx *ctx;
    // words: word w's symbols are sym[wstart[w] .. + wlen[w]), it occurs wcount[w] times
    int32_t *sym, *wlen;
    int64_t *wstart, *wcount;
    size_t nw, nsym;
    int32_t *clen;           // [vocab] characters of each piece
    size_t cap_clen;
    fat5__bpe_pair *pairs;
    size_t npairs, cap_pairs;
    int32_t *pslot;          // [cap_pslot] open addressing over pairs
    size_t cap_pslot;
    int32_t *lists;          // the queue entries' word lists, back to back
    size_t nlists, cap_lists;
    fat5__bpe_entry *heap;
    size_t nheap, cap_heap;
    uint64_t seq;
    int64_t max_len;         // max_token_length, 0: none
    // the merge being applied: its entry's words split among the parts, each part's changes
    int32_t ma, mb, mid;
    const int32_t *mwords;
    int32_t mn;
    fat5__bpe_change **ch;   // [parts]
    size_t *nch, *cap_ch;    // [parts]
    int *oom;                // [parts]
} fat5__bpe;

static size_t fat5__bpe_pair_h(int32_t a, int32_t b) {
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9E3779B97F4A7C15ull;
    return (size_t)(k ^ (k >> 31));
}

// the index of pair (a, b), added with count 0 when absent; -1 when out of memory
static int64_t fat5__bpe_pair_get(fat5__bpe *B, int32_t a, int32_t b) {
    size_t k, m;
    if (B->cap_pslot) {
        m = B->cap_pslot - 1;
        for (k = fat5__bpe_pair_h(a, b) & m;; k = (k + 1) & m) {
            int32_t i = B->pslot[k];
            if (i < 0) break;
            if (B->pairs[i].a == a && B->pairs[i].b == b) return i;
        }
    }
    if (B->npairs >= (size_t)INT32_MAX - 1) return -1;
    if (2 * (B->npairs + 1) > B->cap_pslot) {
        size_t c = B->cap_pslot ? 2 * B->cap_pslot : 1 << 16, j;
        int32_t *ns = FAT5__CAST(int32_t *, fat5__malloc(B->ctx, c * sizeof(int32_t)));
        if (!ns) return -1;
        for (j = 0; j < c; j++) ns[j] = -1;
        for (j = 0; j < B->npairs; j++) {
            for (k = fat5__bpe_pair_h(B->pairs[j].a, B->pairs[j].b) & (c - 1); ns[k] >= 0; k = (k + 1) & (c - 1)) {}
            ns[k] = (int32_t)j;
        }
        fat5__free(B->ctx, B->pslot);
        B->pslot = ns;
        B->cap_pslot = c;
    }
    if (!fat5__grow(B->ctx, (void **)&B->pairs, &B->cap_pairs, B->npairs + 1, sizeof(fat5__bpe_pair))) return -1;
    memset(&B->pairs[B->npairs], 0, sizeof(fat5__bpe_pair));
    B->pairs[B->npairs].a = a, B->pairs[B->npairs].b = b;
    B->pairs[B->npairs].stamp = -1, B->pairs[B->npairs].last = -1;
    m = B->cap_pslot - 1;
    for (k = fat5__bpe_pair_h(a, b) & m; B->pslot[k] >= 0; k = (k + 1) & m) {}
    B->pslot[k] = (int32_t)B->npairs;
    return (int64_t)B->npairs++;
}

// x comes out of the queue before y
static int fat5__bpe_before(const fat5__bpe_entry *x, const fat5__bpe_entry *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    if (x->b != y->b) return x->b < y->b;
    return x->seq < y->seq;
}
static int fat5__bpe_push(fat5__bpe *B, fat5__bpe_entry e) {
    size_t i;
    if (!fat5__grow(B->ctx, (void **)&B->heap, &B->cap_heap, B->nheap + 1, sizeof(fat5__bpe_entry))) return 0;
    e.seq = B->seq++;
    for (i = B->nheap++; i > 0 && fat5__bpe_before(&e, &B->heap[(i - 1) / 2]); i = (i - 1) / 2) B->heap[i] = B->heap[(i - 1) / 2];
    B->heap[i] = e;
    return 1;
}
static fat5__bpe_entry fat5__bpe_pop(fat5__bpe *B) {
    fat5__bpe_entry top = B->heap[0], last = B->heap[--B->nheap];
    size_t i = 0, n = B->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && fat5__bpe_before(&B->heap[c + 1], &B->heap[c])) c++;
        if (!fat5__bpe_before(&B->heap[c], &last)) break;
        B->heap[i] = B->heap[c];
        i = c;
    }
    if (n) B->heap[i] = last;
    return top;
}

static int fat5__bpe_change_add(fat5__bpe *B, int p, int32_t a, int32_t b, int32_t delta, int32_t w) {
    fat5__bpe_change *c;
    if (B->nch[p] == B->cap_ch[p] && !fat5__grow(B->ctx, (void **)&B->ch[p], &B->cap_ch[p], B->nch[p] + 1, sizeof(fat5__bpe_change))) {
        B->oom[p] = 1;
        return 0;
    }
    c = &B->ch[p][B->nch[p]++];
    c->a = a, c->b = b, c->delta = delta, c->w = w;
    return 1;
}

// Replaces every (a, b) of word w by m, left to right (a replaced occurrence is not looked at
// again), recording the pairs lost and gained in part p's changes
static void fat5__bpe_merge_word(fat5__bpe *B, int p, int32_t w) {
    int32_t *s = B->sym + B->wstart[w], n = B->wlen[w], r = 0, j = 0, a = B->ma, b = B->mb, m = B->mid;
    int64_t lm = B->clen[m];
    while (r < n) {
        if (s[r] == a && r + 1 < n && s[r + 1] == b) {
            if (j > 0) {
                fat5__bpe_change_add(B, p, s[j - 1], a, -1, w);
                if (!B->max_len || B->clen[s[j - 1]] + lm < B->max_len) fat5__bpe_change_add(B, p, s[j - 1], m, 1, w);
            }
            if (r + 2 < n) {
                fat5__bpe_change_add(B, p, b, s[r + 2], -1, w);
                if (!B->max_len || B->clen[s[r + 2]] + lm < B->max_len) fat5__bpe_change_add(B, p, m, s[r + 2], 1, w);
            }
            s[j++] = m;
            r += 2;
        } else {
            s[j++] = s[r++];
        }
    }
    B->wlen[w] = j;
}

static void fat5__bpe_merge_part(void *arg, int p, int parts) {
    fat5__bpe *B = FAT5__CAST(fat5__bpe *, arg);
    int32_t lo = (int32_t)((int64_t)B->mn * p / parts), hi = (int32_t)((int64_t)B->mn * (p + 1) / parts), i;
    B->nch[p] = 0;
    for (i = lo; i < hi; i++) fat5__bpe_merge_word(B, p, B->mwords[i]);
}

// Word lists, in two passes over the same changes: the first counts each pair's distinct words
// (nw, last); this reserves nw slots for each pair of touched[0..nt) and resets the counts, then
// fat5__bpe_lists_put fills them in the words' order (each word once per pair)
static int fat5__bpe_lists_reserve(fat5__bpe *B, const int32_t *touched, size_t nt) {
    size_t need = B->nlists, i;
    for (i = 0; i < nt; i++) {
        fat5__bpe_pair *P = &B->pairs[touched[i]];
        P->off = (int64_t)need;
        need += (size_t)P->nw;
        P->nw = 0;
        P->last = -1;
    }
    if (!fat5__grow(B->ctx, (void **)&B->lists, &B->cap_lists, need, sizeof(int32_t))) return 0;
    B->nlists = need;
    return 1;
}
static void fat5__bpe_lists_put(fat5__bpe *B, int64_t p, int32_t w) {
    fat5__bpe_pair *P = &B->pairs[p];
    if (P->last == w) return;
    P->last = w;
    B->lists[P->off + P->nw++] = w;
}

static void fat5__bpe_free(fat5__bpe *B, int parts) {
    fat5_ctx *ctx = B->ctx;
    int p;
    fat5__free(ctx, B->sym);
    fat5__free(ctx, B->wlen);
    fat5__free(ctx, B->wstart);
    fat5__free(ctx, B->wcount);
    fat5__free(ctx, B->clen);
    fat5__free(ctx, B->pairs);
    fat5__free(ctx, B->pslot);
    fat5__free(ctx, B->lists);
    fat5__free(ctx, B->heap);
    for (p = 0; B->ch && p < parts; p++) fat5__free(ctx, B->ch[p]);
    fat5__free(ctx, B->ch);
    fat5__free(ctx, B->nch);
    fat5__free(ctx, B->cap_ch);
    fat5__free(ctx, B->oom);
}

// the number of characters of the UTF-8 text s
static int32_t fat5__bpe_nchars(const char *s) {
    int32_t k = 0;
    for (; *s; s++) k += ((unsigned char)*s & 0xC0) != 0x80;
    return k;
}

// the vocabulary piece s[0..n): its id in v (and V, its lookup), added as a normal piece when new
static int64_t fat5__bpe_piece(fat5__bpe *B, fat5__bpe_strs *V, fat5__tt_vocab *v, const char *s, size_t n) {
    int64_t id = fat5__bpe_strs_find(V, s, n, fat5__bpe_hash(s, n));
    if (id >= 0) return id;
    if (fat5__bpe_strs_add(B->ctx, V, s, n, 0) != v->n) return -1;
    id = fat5__tt_vocab_add(B->ctx, v, s, n, 0.0f, FAT5__PT_NORMAL);
    if (id < 0) return -1;
    if (!fat5__grow(B->ctx, (void **)&B->clen, &B->cap_clen, (size_t)id + 1, sizeof(int32_t))) return -1;
    B->clen[id] = fat5__bpe_nchars(v->piece[id]);
    return id;
}

// ---------------------------------------------------------------------------------------------
// the trainer

static fat5_status fat5__tt_bpe(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, const fat5__tt_corpus *c,
                                fat5__tt_vocab *out, fat5_tokenizer_train_report *rep) {
    fat5__bpe_strs W, V;
    fat5__bpe_alpha A;
    fat5__bpe B;
    fat5_status st = FAT5_OK;
    int parts = cfg->num_threads > 0 ? cfg->num_threads : (ctx->n_threads < 16 ? ctx->n_threads : 16), p;
    int32_t *touched = NULL, *mpair = NULL;
    size_t cap_touched = 0, cap_mpair = 0, nmerge = 0, i, k, nt;
    int64_t id, n_alpha, n_special;
    double t0 = fat5__now_s(), last_print = t0;
    char *buf = NULL;
    size_t cap_buf = 0;
    uint8_t *seen = NULL;
    memset(&W, 0, sizeof W);
    memset(&V, 0, sizeof V);
    memset(&A, 0, sizeof A);
    memset(&B, 0, sizeof B);
    B.ctx = ctx;
    B.max_len = cfg->max_token_length;
    if (parts < 1) parts = 1;
#define FAT5__BPE_OOM(what)                                                                                 \
    do {                                                                                                    \
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: bpe: out of memory (%s)", what); \
        goto done;                                                                                          \
    } while (0)

    // 1. words
    if ((st = fat5__bpe_words(ctx, cfg, c, parts, &W))) goto done;
    if (W.n == 0) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: bpe: the corpus holds no word");
        goto done;
    }
    if (cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: bpe: %zu distinct words in %lld distinct sentences, %.1f s\n", W.n,
                (long long)c->n, fat5__now_s() - t0);

    // 2. the special pieces, the alphabet
    if ((st = fat5__tt_vocab_specials(ctx, cfg, out))) goto done;
    n_special = out->n;
    for (i = 0; i < (size_t)out->n; i++)
        if (fat5__bpe_strs_add(ctx, &V, out->piece[i], strlen(out->piece[i]), 0) != (int64_t)i) FAT5__BPE_OOM("vocabulary");
    if (!fat5__grow(ctx, (void **)&B.clen, &B.cap_clen, (size_t)out->n + 1, sizeof(int32_t))) FAT5__BPE_OOM("vocabulary");
    for (i = 0; i < (size_t)out->n; i++) B.clen[i] = fat5__bpe_nchars(out->piece[i]);
    for (i = 0; i < W.n; i++) {
        const char *s = W.bytes + W.off[i];
        size_t n = (size_t)(W.off[i + 1] - W.off[i]), l;
        for (k = 0; k < n; k += l)
            if (!fat5__bpe_alpha_add(ctx, &A, fat5__utf8_cp(s + k, n - k, &l), (uint64_t)W.count[i])) FAT5__BPE_OOM("alphabet");
    }
    if (cfg->byte_level)
        for (k = 0; k < 256; k++)
            if (!fat5__bpe_alpha_add(ctx, &A, fat5__gpt2_char((unsigned)k), UINT64_MAX)) FAT5__BPE_OOM("alphabet");
    {
        fat5__bpe_char *kept = FAT5__CAST(fat5__bpe_char *, fat5__malloc(ctx, A.n * sizeof(fat5__bpe_char)));
        size_t nk = A.n, drop = 0;
        if (!kept) FAT5__BPE_OOM("alphabet");
        memcpy(kept, A.ch, A.n * sizeof(fat5__bpe_char));
        if (cfg->limit_alphabet > 0 && (int64_t)nk > cfg->limit_alphabet) {
            drop = nk - (size_t)cfg->limit_alphabet;
            qsort(kept, nk, sizeof *kept, fat5__bpe_char_rarer);
        }
        qsort(kept + drop, nk - drop, sizeof *kept, fat5__bpe_char_by_cp);
        for (k = drop; k < nk; k++) {
            char u[4];
            size_t ul = fat5__utf8_put(u, kept[k].cp);
            id = fat5__bpe_piece(&B, &V, out, u, ul);
            if (id < 0) {
                fat5__free(ctx, kept);
                FAT5__BPE_OOM("alphabet");
            }
            A.ch[fat5__bpe_alpha_find(&A, kept[k].cp)].id = (int32_t)id;
        }
        rep->alphabet_size = (int64_t)(nk - drop);
        fat5__free(ctx, kept);
    }
    n_alpha = out->n;
    if (cfg->vocab_size < n_alpha) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                       "fat5_tokenizer_train: vocab_size %lld is smaller than the %lld special pieces and the %lld "
                       "characters of the alphabet (%lld pieces together); raise vocab_size%s",
                       (long long)cfg->vocab_size, (long long)n_special,
                       (long long)rep->alphabet_size, (long long)n_alpha,
                       cfg->byte_level ? "" : " or lower limit_alphabet");
        goto done;
    }

    // the words as symbols (characters left out of the alphabet dropped); words of one symbol
    // have no pair and are left out
    for (i = 0; i < W.n; i++) B.nsym += (size_t)(W.off[i + 1] - W.off[i]);
    B.sym = FAT5__CAST(int32_t *, fat5__malloc(ctx, (B.nsym + 1) * sizeof(int32_t)));
    B.wlen = FAT5__CAST(int32_t *, fat5__malloc(ctx, W.n * sizeof(int32_t)));
    B.wstart = FAT5__CAST(int64_t *, fat5__malloc(ctx, W.n * sizeof(int64_t)));
    B.wcount = FAT5__CAST(int64_t *, fat5__malloc(ctx, W.n * sizeof(int64_t)));
    if (!B.sym || !B.wlen || !B.wstart || !B.wcount) FAT5__BPE_OOM("words");
    B.nsym = 0;
    for (i = 0; i < W.n; i++) {
        const char *s = W.bytes + W.off[i];
        size_t n = (size_t)(W.off[i + 1] - W.off[i]), l, at = B.nsym;
        for (k = 0; k < n; k += l) {
            int32_t sid = A.ch[fat5__bpe_alpha_find(&A, fat5__utf8_cp(s + k, n - k, &l))].id;
            if (sid >= 0) B.sym[B.nsym++] = sid;
        }
        if (B.nsym - at < 2) {
            B.nsym = at;
            continue;
        }
        B.wstart[B.nw] = (int64_t)at;
        B.wlen[B.nw] = (int32_t)(B.nsym - at);
        B.wcount[B.nw++] = W.count[i];
    }
    fat5__bpe_strs_free(ctx, &W);

    // 3. the pairs and their words, one queue entry each
    {
        int32_t *ps = FAT5__CAST(int32_t *, fat5__malloc(ctx, (B.nsym + 1) * sizeof(int32_t)));
        if (!ps) FAT5__BPE_OOM("pairs");
        for (i = 0; i < B.nw; i++) {
            const int32_t *s = B.sym + B.wstart[i];
            for (k = 0; k + 1 < (size_t)B.wlen[i]; k++) {
                int64_t q = fat5__bpe_pair_get(&B, s[k], s[k + 1]);
                if (q < 0) {
                    fat5__free(ctx, ps);
                    FAT5__BPE_OOM("pairs");
                }
                ps[B.wstart[i] + (int64_t)k] = (int32_t)q;
                B.pairs[q].count += B.wcount[i];
                if (B.pairs[q].last != (int32_t)i) B.pairs[q].last = (int32_t)i, B.pairs[q].nw++;
            }
        }
        if (!fat5__grow(ctx, (void **)&touched, &cap_touched, B.npairs + 1, sizeof(int32_t))) {
            fat5__free(ctx, ps);
            FAT5__BPE_OOM("pairs");
        }
        for (i = 0; i < B.npairs; i++) touched[i] = (int32_t)i;
        if (!fat5__bpe_lists_reserve(&B, touched, B.npairs)) {
            fat5__free(ctx, ps);
            FAT5__BPE_OOM("pairs");
        }
        for (i = 0; i < B.nw; i++)
            for (k = 0; k + 1 < (size_t)B.wlen[i]; k++) fat5__bpe_lists_put(&B, ps[B.wstart[i] + (int64_t)k], (int32_t)i);
        fat5__free(ctx, ps);
        for (i = 0; i < B.npairs; i++) {
            fat5__bpe_entry e;
            e.count = (uint64_t)B.pairs[i].count, e.a = B.pairs[i].a, e.b = B.pairs[i].b;
            e.pair = (int32_t)i, e.nw = B.pairs[i].nw, e.off = B.pairs[i].off, e.seq = 0;
            if (B.pairs[i].count > 0 && !fat5__bpe_push(&B, e)) FAT5__BPE_OOM("queue");
        }
    }
    B.ch = FAT5__CAST(fat5__bpe_change **, fat5__calloc(ctx, (size_t)parts, sizeof(fat5__bpe_change *)));
    B.nch = FAT5__CAST(size_t *, fat5__calloc(ctx, (size_t)parts, sizeof(size_t)));
    B.cap_ch = FAT5__CAST(size_t *, fat5__calloc(ctx, (size_t)parts, sizeof(size_t)));
    B.oom = FAT5__CAST(int *, fat5__calloc(ctx, (size_t)parts, sizeof(int)));
    if (!B.ch || !B.nch || !B.cap_ch || !B.oom) FAT5__BPE_OOM("changes");

    // 4. merges
    while (out->n < cfg->vocab_size && B.nheap > 0) {
        fat5__bpe_entry top = fat5__bpe_pop(&B);
        int64_t now = B.pairs[top.pair].count;
        const char *pa, *pb;
        size_t la, lb;
        int np;
        if (top.count != (uint64_t)now) {   // stale: queued again with the pair's count
            top.count = (uint64_t)now;
            if (!fat5__bpe_push(&B, top)) FAT5__BPE_OOM("queue");
            continue;
        }
        if (top.count < 1 || (uint64_t)cfg->min_frequency > top.count) break;
        pa = out->piece[top.a], pb = out->piece[top.b];
        la = strlen(pa), lb = strlen(pb);
        if (!fat5__grow(ctx, (void **)&buf, &cap_buf, la + lb + 1, 1)) FAT5__BPE_OOM("pieces");
        memcpy(buf, pa, la);
        memcpy(buf + la, pb, lb);
        if ((id = fat5__bpe_piece(&B, &V, out, buf, la + lb)) < 0) FAT5__BPE_OOM("pieces");
        if (!fat5__grow(ctx, (void **)&mpair, &cap_mpair, nmerge + 1, sizeof(int32_t))) FAT5__BPE_OOM("merges");
        mpair[nmerge++] = top.pair;
        // replace it in the entry's words (on the threads for many words), then count the changes
        // in the words' order
        B.ma = top.a, B.mb = top.b, B.mid = (int32_t)id;
        B.mwords = B.lists + top.off;
        B.mn = top.nw;
        np = top.nw >= FAT5__BPE_PAR_MIN && parts > 1 ? parts : 1;
        if (np > 1) fat5__pool_run(ctx, fat5__bpe_merge_part, &B, np);
        else fat5__bpe_merge_part(&B, 0, 1);
        for (p = 0; p < np; p++)
            if (B.oom[p]) FAT5__BPE_OOM("changes");
        nt = 0;
        for (p = 0; p < np; p++)
            for (k = 0; k < B.nch[p]; k++) {
                fat5__bpe_change *ch = &B.ch[p][k];
                int64_t q = fat5__bpe_pair_get(&B, ch->a, ch->b);
                fat5__bpe_pair *P;
                if (q < 0) FAT5__BPE_OOM("pairs");
                P = &B.pairs[q];
                P->count += ch->delta * B.wcount[ch->w];
                ch->a = (int32_t)q;   // the pair's index from here on
                if (ch->delta <= 0) continue;
                if (P->stamp != (int32_t)nmerge) {
                    if (!fat5__grow(ctx, (void **)&touched, &cap_touched, nt + 1, sizeof(int32_t))) FAT5__BPE_OOM("pairs");
                    touched[nt++] = (int32_t)q;
                    P->stamp = (int32_t)nmerge, P->nw = 0, P->last = -1;
                }
                if (P->last != ch->w) P->last = ch->w, P->nw++;
            }
        if (!fat5__bpe_lists_reserve(&B, touched, nt)) FAT5__BPE_OOM("word lists");
        for (p = 0; p < np; p++)
            for (k = 0; k < B.nch[p]; k++)
                if (B.ch[p][k].delta > 0) fat5__bpe_lists_put(&B, B.ch[p][k].a, B.ch[p][k].w);
        B.mwords = NULL;
        for (i = 0; i < nt; i++) {
            fat5__bpe_pair *P = &B.pairs[touched[i]];
            fat5__bpe_entry e;
            if (P->count <= 0) continue;
            e.count = (uint64_t)P->count, e.a = P->a, e.b = P->b;
            e.pair = touched[i], e.nw = P->nw, e.off = P->off, e.seq = 0;
            if (!fat5__bpe_push(&B, e)) FAT5__BPE_OOM("queue");
        }
        if (cfg->verbose && (nmerge & 63) == 0 && fat5__now_s() - last_print >= 5.0) {
            last_print = fat5__now_s();
            fprintf(stderr, "fat5_tokenizer_train: bpe: %zu merges, %lld of %lld pieces, %.0f s\n", nmerge,
                    (long long)out->n, (long long)cfg->vocab_size, last_print - t0);
        }
    }

    // a pair merged twice keeps its last rank
    seen = FAT5__CAST(uint8_t *, fat5__calloc(ctx, B.npairs + 1, 1));
    if (!seen) FAT5__BPE_OOM("merges");
    k = nmerge;
    for (i = nmerge; i-- > 0;)
        if (!seen[mpair[i]]) seen[mpair[i]] = 1, mpair[--k] = mpair[i];
    for (i = k; i < nmerge; i++)
        if (!fat5__tt_vocab_merge(ctx, out, B.pairs[mpair[i]].a, B.pairs[mpair[i]].b)) {
            st = FAT5_ERR_OUT_OF_MEMORY;
            goto done;
        }
    rep->rounds = (int)(nmerge - k);
    rep->peak_bytes = (int64_t)(B.nsym * sizeof(int32_t) + B.nw * 24 + B.cap_pairs * sizeof(fat5__bpe_pair) +
                                B.cap_pslot * sizeof(int32_t) + B.cap_lists * sizeof(int32_t) +
                                B.cap_heap * sizeof(fat5__bpe_entry) + V.cap_bytes + V.cap * 24 + V.cap_slot * 4);
    if (cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: bpe: %d merges, %lld pieces (alphabet %lld) from %zu words in %.1f s\n",
                rep->rounds, (long long)out->n, (long long)rep->alphabet_size, B.nw, fat5__now_s() - t0);
#undef FAT5__BPE_OOM
done:
    fat5__bpe_strs_free(ctx, &W);
    fat5__bpe_strs_free(ctx, &V);
    fat5__free(ctx, A.ch);
    fat5__free(ctx, A.slot);
    fat5__bpe_free(&B, parts);
    fat5__free(ctx, touched);
    fat5__free(ctx, mpair);
    fat5__free(ctx, buf);
    fat5__free(ctx, seen);
    return st;
}
