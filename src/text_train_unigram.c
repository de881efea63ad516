// =============================================================================================
// ==[8.10] text: tokenizer training — Unigram (SentencePiece's trainer) ==
//
// The Unigram language-model trainer of SentencePiece (spm_train --model_type=unigram), step by
// step:
//   1. The alphabet: the sentences' characters by count (weighted by the sentences' counts), the
//      most frequent first, until character_coverage of all the characters is covered; the rest
//      read as unknown. The text of a special piece (pad / eos / unk / bos, control, user-defined,
//      the <0xXX> byte pieces) inside a sentence reads as unknown too, so no piece spans it.
//   2. The seed pieces: every character of the alphabet (scored by its count), and the substrings
//      that a suffix array of all the sentences (joined by a boundary) shows to repeat with more
//      than one right context (the suffix tree's internal nodes), at least 2 characters long,
//      valid pieces (fat5__ug_valid), scored count x length; the seed_sentencepiece_size best.
//      Scores become log-probabilities (each score over their sum).
//   3. The words: each sentence cut before every "\u2581" (split_by_whitespace; else whole), equal
//      words merged with their counts added.
//   4. Rounds of num_sub_iterations EM steps, each an E step (the expected count of every piece:
//      forward-backward over every word's lattice, times the word's count) and the M step (pieces
//      expected less than 0.5 times dropped, the others scored digamma(count) - digamma(sum of
//      counts): the Bayesian EM's sparse prior); then pruning: every piece's best other
//      segmentation (the second-best path of its own lattice), the likelihood lost when its
//      Viterbi count moves to that segmentation, and the pieces of largest loss kept,
//      shrinking_factor of them, never fewer than the target vocab_size x 1.1 (pieces with no
//      other segmentation, or one needing an unknown character, are kept; pieces the Viterbi
//      paths never use, dropped). The rounds stop, before pruning, when a pruning would reach the
//      target (sentencepiece 0.2.3's rule; 0.2.1 pruned down to it).
//   5. The final vocabulary: every alphabet character (those the model lost scored just above the
//      lowest score), then the best-scored pieces up to vocab_size less the special pieces; a
//      corpus that gives fewer is an error, as spm_train's hard vocabulary limit.
// Unknown characters get lattice nodes of their own (10 below the lowest score) whose expected
// counts go nowhere. Scores and sums are doubles (spm_train's are floats); ties between seed
// substrings of equal score go by their text (spm_train's by its suffix tree's order).
//
// Parallel parts (cfg->num_threads, 0: the context's threads) take words i = part (mod parts);
// their expected counts add as fixed-point integers (FAT5__UG_FX), so the result is the same for
// any thread count. Memory: the suffix array's four int32 per character while seeding, then the
// words (at most the corpus) and, per part, one count per piece.

#define FAT5__UG_SENT 0        // dense character ids: the suffix array's terminator,
#define FAT5__UG_BOUND 1       // the boundary between sentences,
#define FAT5__UG_UNK 2         // a character outside the alphabet; the alphabet from 3, most frequent first
#define FAT5__UG_FX 268435456.0  // 2^28: expected counts as integers of 1 / FX
#define FAT5__UG_WS 0x2581u    // the whitespace mark

#ifdef FAT5_TEST_FAULTS
// Test hook: called after every EM step with its round, step, vocabulary size and objective (the
// words' negative log-likelihood over their total count, before the M step).
static void (*fat5__ug_em_hook)(void *arg, int round, int step, int64_t size, double objective);
static void *fat5__ug_em_hook_arg;
#endif

// The prefix tree of the pieces: nodes numbered from 0 (the root); an edge (node, character) is a
// key of an open-addressing table.
typedef struct fat5__ug_trie {
    uint64_t *key;      // [cap] (node << 22 | character) + 1; 0: empty
    int32_t *child;     // [cap]
    int32_t *piece;     // [n_nodes] the piece ending at the node, -1 when none
    int64_t cap, n_nodes, cap_nodes;
} fat5__ug_trie;

// A lattice: the pieces (nodes) that match a word, by start then length; unknown characters get
// a node of their own (id -1).
typedef struct fat5__ug_lat {
    int32_t *b, *e, *id;   // [n] start, end (characters) and piece id
    double *s;             // [n] score
    int64_t n, cap;
    double *alpha, *beta;  // [2 (len + 1)] (the two-best search's scores), [len + 1]
    int32_t *bp;           // [len + 1] the Viterbi path's last node into each position
    double *best;          // [len + 1]
    int32_t *aux;          // [5 (len + 1)] the two-best search's back pointers and the alternative
    int64_t lcap;
} fat5__ug_lat;

// One parallel part's sums.
typedef struct fat5__ug_part {
    int64_t *acc;          // [n_pieces] fixed-point expected counts, or Viterbi counts
    int64_t obj_fx;        // sum of count x log-likelihood, fixed point (x 2^20)
    int64_t ntok;          // tokens of the Viterbi segmentations, times the words' counts
    fat5__ug_lat lat;
    int oom;
} fat5__ug_part;

typedef struct fat5__ug {
    fat5_ctx *ctx;
    const fat5_tokenizer_train_config *cfg;
    int parts;
    // the alphabet
    int32_t n_dense;       // dense ids 0 .. n_dense - 1
    uint32_t *cp;          // [n_dense] the code point of each dense id (0 for the first three)
    int64_t *cfreq;        // [n_dense] its count
    int32_t ws;            // the dense id of "\u2581", -1 when absent
    // the words
    int32_t *wch;          // characters of the words, one after the other
    int64_t *woff;         // [n_words + 1]
    int64_t *wfreq;        // [n_words]
    int64_t n_words, total_freq;
    int64_t text_bytes;    // UTF-8 bytes of the sentences, times their counts (for the progress lines)
    // the model
    int32_t *pch;          // characters of the pieces
    int64_t *poff;         // [n_pieces + 1]
    double *score;         // [n_pieces]
    int64_t n_pieces;
    double min_score;
    fat5__ug_trie trie;
    fat5__ug_part *part;   // [parts]
    // pruning's per-piece results
    double *loss;          // [n_pieces]
    int8_t *kind;          // [n_pieces] 0 drop, 1 keep (no alternative), 2 a candidate by loss
    double vit_sum, vsum;  // Viterbi counts' and the words' total
    const int64_t *vfreq;  // the Viterbi counts, summed
} fat5__ug;

// ---------------------------------------------------------------------------------------------
// pieces' rules

// a decimal digit as the piece rules see them: ASCII and fullwidth
static int fat5__ug_is_digit(uint32_t c) { return (c >= 0x30 && c <= 0x39) || (c >= 0xFF10 && c <= 0xFF19); }

// The script of c, as the piece rules group them: Hiragana, Katakana and U+30FC are Han.
static int fat5__ug_script(uint32_t c) {
    int s = (int)fat5__uc_range(fat5__uc_script, FAT5__UC_COUNT(fat5__uc_script), c);
    if (s == FAT5__SC_HIRAGANA || s == FAT5__SC_KATAKANA || c == 0x30FC) s = FAT5__SC_HAN;
    return s;
}

// SentencePiece's rule for a piece (len code points): 1 .. max_sentencepiece_length characters;
// "\u2581" only first (split_by_whitespace), or anywhere but last; one script (Inherited marks
// take the previous one; digits are of no script unless split_by_number) when
// split_by_unicode_script; a digit alone when split_digits.
static int fat5__ug_valid(const fat5_tokenizer_train_config *cfg, const uint32_t *c, int64_t len) {
    int prev = -1, pos;
    if (len < 1 || len > cfg->max_sentencepiece_length) return 0;
    for (pos = 0; pos < len; pos++) {
        if (c[pos] == FAT5__UG_WS) {
            if (pos > 0 && (cfg->split_by_whitespace || pos == len - 1)) return 0;
        } else {
            int s = fat5__ug_script(c[pos]);
            if (s == FAT5__SC_INHERITED) s = prev;
            if (!cfg->split_by_number && fat5__ug_is_digit(c[pos])) s = -1;
            if (cfg->split_digits && fat5__ug_is_digit(c[pos]) && len > 1) return 0;
            if (cfg->split_by_unicode_script && s != -1 && prev != -1 && prev != s) return 0;
            prev = s;
        }
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// the suffix array (SA-IS: Nong, Zhang and Chan's induced sorting)

#define FAT5__UG_ISS(i) ((ty[(i) >> 3] >> ((i) & 7)) & 1)
#define FAT5__UG_ISLMS(i) ((i) > 0 && FAT5__UG_ISS(i) && !FAT5__UG_ISS((i) - 1))

// bkt[c] = the start (end = 0) or the end (end = 1) of character c's bucket in the suffix array
static void fat5__ug_buckets(const int32_t *T, int32_t n, int32_t K, int32_t *bkt, int end) {
    int32_t i, sum = 0;
    memset(bkt, 0, (size_t)K * sizeof(int32_t));
    for (i = 0; i < n; i++) bkt[T[i]]++;
    for (i = 0; i < K; i++) {
        sum += bkt[i];
        bkt[i] = end ? sum : sum - bkt[i];
    }
}

// Induced sorting: the L-type suffixes from the sorted ones already placed, then the S-type ones
static void fat5__ug_induce(const int32_t *T, int32_t *SA, const unsigned char *ty, int32_t n, int32_t K,
                            int32_t *bkt) {
    int32_t i, j;
    fat5__ug_buckets(T, n, K, bkt, 0);   // L-type suffixes, left to right
    for (i = 0; i < n; i++)
        if (SA[i] > 0 && !FAT5__UG_ISS(SA[i] - 1)) j = SA[i] - 1, SA[bkt[T[j]]++] = j;
    fat5__ug_buckets(T, n, K, bkt, 1);   // S-type suffixes, right to left
    for (i = n - 1; i >= 0; i--)
        if (SA[i] > 0 && FAT5__UG_ISS(SA[i] - 1)) j = SA[i] - 1, SA[--bkt[T[j]]] = j;
}

// SA[0..n) = the suffix array of T[0..n), whose values are in [0, K) and whose last value is a 0
// found nowhere else. 0 when out of memory.
static int fat5__ug_sais(fat5_ctx *ctx, const int32_t *T, int32_t *SA, int32_t n, int32_t K) {
    unsigned char *ty = FAT5__CAST(unsigned char *, fat5__calloc(ctx, (size_t)n / 8 + 1, 1));
    int32_t *bkt = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)K * sizeof(int32_t)));
    int32_t i, j, n1 = 0, name = 0, prev = -1, *s1, *SA1;
    int ok = 1;
    if (n == 1) {   // the terminator alone
        SA[0] = 0;
        fat5__free(ctx, ty);
        fat5__free(ctx, bkt);
        return 1;
    }
    if (!ty || !bkt) {
        fat5__free(ctx, ty);
        fat5__free(ctx, bkt);
        return 0;
    }
    ty[(n - 1) >> 3] |= (unsigned char)(1 << ((n - 1) & 7));   // the terminator is S-type
    for (i = n - 2; i >= 0; i--)
        if (T[i] < T[i + 1] || (T[i] == T[i + 1] && FAT5__UG_ISS(i + 1))) ty[i >> 3] |= (unsigned char)(1 << (i & 7));
    // sort the LMS substrings
    fat5__ug_buckets(T, n, K, bkt, 1);
    for (i = 0; i < n; i++) SA[i] = -1;
    for (i = 1; i < n; i++)
        if (FAT5__UG_ISLMS(i)) SA[--bkt[T[i]]] = i;
    fat5__ug_induce(T, SA, ty, n, K, bkt);
    for (i = 0; i < n; i++)
        if (FAT5__UG_ISLMS(SA[i])) SA[n1++] = SA[i];
    // name them: equal LMS substrings get the same name
    for (i = n1; i < n; i++) SA[i] = -1;
    for (i = 0; i < n1; i++) {
        int32_t pos = SA[i], d;
        int diff = 0;
        for (d = 0; d < n; d++) {
            if (prev == -1 || T[pos + d] != T[prev + d] || FAT5__UG_ISS(pos + d) != FAT5__UG_ISS(prev + d)) {
                diff = 1;
                break;
            }
            if (d > 0 && (FAT5__UG_ISLMS(pos + d) || FAT5__UG_ISLMS(prev + d))) break;
        }
        if (diff) name++, prev = pos;
        SA[n1 + pos / 2] = name - 1;
    }
    for (i = n - 1, j = n - 1; i >= n1; i--)
        if (SA[i] >= 0) SA[j--] = SA[i];
    // the reduced problem
    s1 = SA + n - n1;
    SA1 = SA;
    if (name < n1) {
        ok = fat5__ug_sais(ctx, s1, SA1, n1, name);
    } else {
        for (i = 0; i < n1; i++) SA1[s1[i]] = i;
    }
    if (ok) {   // induce the whole order from the LMS suffixes' order
        fat5__ug_buckets(T, n, K, bkt, 1);
        for (i = 1, j = 0; i < n; i++)
            if (FAT5__UG_ISLMS(i)) s1[j++] = i;
        for (i = 0; i < n1; i++) SA1[i] = s1[SA1[i]];
        for (i = n1; i < n; i++) SA[i] = -1;
        for (i = n1 - 1; i >= 0; i--) {
            j = SA[i];
            SA[i] = -1;
            SA[--bkt[T[j]]] = j;
        }
        fat5__ug_induce(T, SA, ty, n, K, bkt);
    }
    fat5__free(ctx, ty);
    fat5__free(ctx, bkt);
    return ok;
}
#undef FAT5__UG_ISS
#undef FAT5__UG_ISLMS

// ---------------------------------------------------------------------------------------------
// the alphabet and the words

// The special pieces' texts, matched in the sentences (longest first at each place).
typedef struct fat5__ug_meta {
    const char **s;
    size_t *len;
    int n;
    unsigned char first[256];   // 1: some text starts with this byte
} fat5__ug_meta;

// The length of the longest special text at s (n bytes left), 0 when none.
static size_t fat5__ug_meta_match(const fat5__ug_meta *m, const char *s, size_t n) {
    size_t best = 0;
    int k;
    if (!m->first[(unsigned char)s[0]]) return 0;
    for (k = 0; k < m->n; k++)
        if (m->len[k] > best && m->len[k] <= n && !memcmp(s, m->s[k], m->len[k])) best = m->len[k];
    return best;
}

#define FAT5__UG_SPECIAL 0x110000   // a special piece's text in a sentence (outside Unicode)

// The code points of sentence i into out (capacity: its byte count), each special text as one
// FAT5__UG_SPECIAL; the count.
static int64_t fat5__ug_decode(const fat5__tt_corpus *c, int64_t i, const fat5__ug_meta *m, int32_t *out) {
    const char *s = c->bytes + c->off[i];
    size_t n = (size_t)(c->off[i + 1] - c->off[i] - 1), k = 0, len;
    int64_t o = 0;
    while (k < n) {
        size_t ml = fat5__ug_meta_match(m, s + k, n - k);
        if (ml) {
            out[o++] = (int32_t)FAT5__UG_SPECIAL;
            k += ml;
            continue;
        }
        out[o++] = (int32_t)fat5__utf8_cp(s + k, n - k, &len);
        k += len;
    }
    return o;
}

typedef struct { uint32_t cp; int64_t n; } fat5__ug_cc;
static int fat5__ug_cc_cmp(const void *a, const void *b) {   // count descending, then code point
    const fat5__ug_cc *x = (const fat5__ug_cc *)a, *y = (const fat5__ug_cc *)b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return x->cp < y->cp ? -1 : x->cp > y->cp;
}

// The sentences as dense characters into *T_out (each followed by FAT5__UG_BOUND, then the
// terminator; *n_out positions in all) and the alphabet by character_coverage; vocab_size must
// hold it and the meta_n special pieces.
static fat5_status fat5__ug_alphabet(fat5__ug *u, const fat5__tt_corpus *c, const fat5__ug_meta *m, int32_t **T_out,
                                     int64_t *n_out, int64_t meta_n) {
    fat5_ctx *ctx = u->ctx;
    const fat5_tokenizer_train_config *cfg = u->cfg;
    int64_t *cnt = NULL, total = 0, acc = 0, n = 0, i, k;
    int32_t *T = NULL, *map = NULL;
    fat5__ug_cc *cc = NULL;
    int64_t ncc = 0, nreq = 0;
    fat5_status st = FAT5_OK;
    T = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(c->nbytes + 1) * sizeof(int32_t)));
    cnt = FAT5__CAST(int64_t *, fat5__calloc(ctx, 0x110000, sizeof(int64_t)));
    if (!T || !cnt) goto oom;
    for (i = 0; i < c->n; i++) {
        int64_t len = fat5__ug_decode(c, i, m, T + n);
        for (k = 0; k < len; k++) {
            uint32_t cp = (uint32_t)T[n + k];
            if (cp == FAT5__UG_SPECIAL || cp == ' ') continue;   // never in the alphabet, not counted
            cnt[cp] += c->freq[i];
            total += c->freq[i];
        }
        n += len;
        T[n++] = -1;   // the boundary, mapped below
    }
    if (total == 0) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: the corpus holds no character after normalisation");
        goto done;
    }
    for (k = 0; k < 0x110000; k++) ncc += cnt[k] > 0;
    cc = FAT5__CAST(fat5__ug_cc *, fat5__malloc(ctx, (size_t)ncc * sizeof *cc));
    if (!cc) goto oom;
    for (k = 0, ncc = 0; k < 0x110000; k++)
        if (cnt[k] > 0) cc[ncc].cp = (uint32_t)k, cc[ncc].n = cnt[k], ncc++;
    qsort(cc, (size_t)ncc, sizeof *cc, fat5__ug_cc_cmp);
    // the most frequent characters until the coverage is reached (the share as a float, as
    // SentencePiece computes it)
    for (k = 0; k < ncc; k++) {
        float coverage = (float)(1.0 * (double)acc / (double)total);
        if ((double)coverage >= cfg->character_coverage) break;
        acc += cc[k].n;
        cc[nreq++] = cc[k];
    }
    if (nreq + meta_n > cfg->vocab_size) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                       "fat5_tokenizer_train: vocab_size %lld is smaller than the %lld special pieces and the %lld "
                       "characters that character_coverage %g keeps (%lld); raise vocab_size or lower "
                       "character_coverage", (long long)cfg->vocab_size, (long long)meta_n, (long long)nreq,
                       cfg->character_coverage, (long long)(meta_n + nreq));
        goto done;
    }
    u->n_dense = (int32_t)(nreq + 3);
    u->cp = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)u->n_dense, sizeof(uint32_t)));
    u->cfreq = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)u->n_dense, sizeof(int64_t)));
    if (!u->cp || !u->cfreq) goto oom;
    // the dense ids, in the count array's place (an int32 view of it)
    map = FAT5__CAST(int32_t *, (void *)cnt);
    for (k = 0; k < 0x110000; k++) map[k] = FAT5__UG_UNK;
    u->ws = -1;
    for (k = 0; k < nreq; k++) {
        map[cc[k].cp] = (int32_t)(k + 3);
        u->cp[k + 3] = cc[k].cp;
        u->cfreq[k + 3] = cc[k].n;
        if (cc[k].cp == FAT5__UG_WS) u->ws = (int32_t)(k + 3);
    }
    for (k = 0; k < n; k++) T[k] = T[k] < 0 ? FAT5__UG_BOUND : T[k] == (int32_t)FAT5__UG_SPECIAL ? FAT5__UG_UNK : map[T[k]];
    T[n] = FAT5__UG_SENT;
    *T_out = T, *n_out = n + 1;
    T = NULL;
    if (cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: unigram: alphabet of %lld characters (%.4f%% of %lld covered)\n",
                (long long)nreq, 100.0 * (double)acc / (double)total, (long long)total);
    goto done;
oom:
    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory reading the characters of %lld bytes",
                   (long long)c->nbytes);
done:
    fat5__free(ctx, T);
    fat5__free(ctx, cnt);
    fat5__free(ctx, cc);
    return st;
}

// The words of the sentences in T (n positions, the boundary after each sentence, then the
// terminator): cut before every "\u2581" when split_by_whitespace; equal words merged, in order
// of first occurrence.
static fat5_status fat5__ug_words(fat5__ug *u, const int32_t *T, int64_t n, const fat5__tt_corpus *c) {
    fat5_ctx *ctx = u->ctx;
    int64_t cap = 16, i, s = 0, start = 0, cap_w = 1024, *slot = NULL;
    while (cap < 2 * c->n + 16) cap *= 2;
    u->wch = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof(int32_t)));
    u->woff = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(cap_w + 1) * sizeof(int64_t)));
    u->wfreq = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)cap_w * sizeof(int64_t)));
    if (!u->wch || !u->woff || !u->wfreq) goto oom;
    u->woff[0] = 0;
    u->n_words = 0;
    slot = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)cap * sizeof(int64_t)));
    if (!slot) goto oom;
    for (i = 0; i < cap; i++) slot[i] = -1;
    for (i = 0; i < n; i++) {
        int end = T[i] == FAT5__UG_BOUND || T[i] == FAT5__UG_SENT;
        int cut = end || (u->cfg->split_by_whitespace && T[i] == u->ws && i > start);
        if (cut && i > start) {   // the word T[start .. i)
            const int32_t *w = T + start;
            int64_t len = i - start, j;
            uint64_t h = fat5__tt_hash((const char *)w, (size_t)len * sizeof(int32_t));
            for (h &= (uint64_t)(cap - 1);; h = (h + 1) & (uint64_t)(cap - 1)) {
                j = slot[h];
                if (j < 0) break;
                if (u->woff[j + 1] - u->woff[j] == len && !memcmp(u->wch + u->woff[j], w, (size_t)len * sizeof(int32_t)))
                    break;
            }
            if (j >= 0) {
                u->wfreq[j] += c->freq[s];
            } else {
                if (u->n_words == cap_w) {
                    int64_t *a, *b;
                    cap_w *= 2;
                    a = FAT5__CAST(int64_t *, fat5__realloc(ctx, u->woff, (size_t)(cap_w + 1) * sizeof(int64_t)));
                    if (!a) goto oom;
                    u->woff = a;
                    b = FAT5__CAST(int64_t *, fat5__realloc(ctx, u->wfreq, (size_t)cap_w * sizeof(int64_t)));
                    if (!b) goto oom;
                    u->wfreq = b;
                }
                if (2 * (u->n_words + 1) > cap) {   // grow the table
                    int64_t ncap = 2 * cap, q, *ns = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)ncap * sizeof(int64_t)));
                    if (!ns) goto oom;
                    for (q = 0; q < ncap; q++) ns[q] = -1;
                    for (q = 0; q < u->n_words; q++) {
                        uint64_t g = fat5__tt_hash((const char *)(u->wch + u->woff[q]),
                                                   (size_t)(u->woff[q + 1] - u->woff[q]) * sizeof(int32_t));
                        for (g &= (uint64_t)(ncap - 1); ns[g] >= 0; g = (g + 1) & (uint64_t)(ncap - 1)) {}
                        ns[g] = q;
                    }
                    fat5__free(ctx, slot);
                    slot = ns, cap = ncap;
                    h = fat5__tt_hash((const char *)w, (size_t)len * sizeof(int32_t));
                    for (h &= (uint64_t)(cap - 1); slot[h] >= 0; h = (h + 1) & (uint64_t)(cap - 1)) {}
                }
                slot[h] = u->n_words;
                memcpy(u->wch + u->woff[u->n_words], w, (size_t)len * sizeof(int32_t));
                u->wfreq[u->n_words] = c->freq[s];
                u->woff[u->n_words + 1] = u->woff[u->n_words] + len;
                u->n_words++;
            }
            start = i;
        }
        if (end) {
            start = i + 1;
            if (T[i] == FAT5__UG_BOUND) s++;
        } else if (cut) {
            start = i;
        }
    }
    fat5__free(ctx, slot);
    u->total_freq = 0;
    for (i = 0; i < u->n_words; i++) u->total_freq += u->wfreq[i];
    return FAT5_OK;
oom:
    fat5__free(ctx, slot);
    return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory collecting %lld words", (long long)u->n_words);
}

// ---------------------------------------------------------------------------------------------
// the seed pieces

typedef struct fat5__ug_cand {
    int64_t score;      // count x length
    int32_t off, len;   // the piece: T[off .. off + len)
    const struct fat5__ug_text *t;
} fat5__ug_cand;
typedef struct fat5__ug_text { const int32_t *T; const uint32_t *cp; } fat5__ug_text;

// score descending, then the piece's code points (its UTF-8 bytes' order)
static int fat5__ug_cand_cmp(const void *a, const void *b) {
    const fat5__ug_cand *x = (const fat5__ug_cand *)a, *y = (const fat5__ug_cand *)b;
    const int32_t *T = x->t->T;
    const uint32_t *cp = x->t->cp;
    int32_t k;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    for (k = 0; k < x->len && k < y->len; k++) {
        uint32_t p = cp[T[x->off + k]], q = cp[T[y->off + k]];
        if (p != q) return p < q ? -1 : 1;
    }
    return (x->len > y->len) - (x->len < y->len);
}

typedef struct fat5__ug_queue {
    fat5__ug_cand *a;
    int64_t n, cap, keep;
    int64_t floor;       // after a cut: candidates below the kept last score are refused
    int sorted;
} fat5__ug_queue;

// Sorts the candidates and keeps the best q->keep; from then on, weaker ones are refused
static void fat5__ug_queue_cut(fat5__ug_queue *q) {
    qsort(q->a, (size_t)q->n, sizeof *q->a, fat5__ug_cand_cmp);
    if (q->n > q->keep) q->n = q->keep;
    if (q->n == q->keep) q->floor = q->a[q->n - 1].score, q->sorted = 1;
}

// Appends the model's pieces: the alphabet (by count) and the best substrings of T (count x length).
static fat5_status fat5__ug_seed(fat5__ug *u, const int32_t *T, int64_t n64, const fat5__tt_corpus *c) {
    fat5_ctx *ctx = u->ctx;
    const fat5_tokenizer_train_config *cfg = u->cfg;
    int32_t n = (int32_t)n64, i, *SA = NULL, *lcp = NULL, *aux = NULL, h;
    int64_t *st_lcp = NULL, *st_w = NULL, top = 0, s, k, total_chars = 0;
    int32_t *st_lb = NULL;
    fat5__ug_queue q;
    fat5__ug_text tx;
    int64_t st_cap = 1024;
    uint32_t cps[512];
    double sum = 0.0;
    double t0 = fat5__now_s();
    memset(&q, 0, sizeof q);
    tx.T = T, tx.cp = u->cp;
    if (n64 >= INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: %lld characters are too many for the "
                         "suffix array (at most %d): lower input_sentence_size", (long long)n64, INT32_MAX - 1);
    SA = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
    lcp = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
    aux = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
    if (!SA || !lcp || !aux || !fat5__ug_sais(ctx, T, SA, n, u->n_dense)) goto oom;
    // the longest common prefix of each suffix with the one before it (Kasai et al.)
    for (i = 0; i < n; i++) aux[SA[i]] = i;
    lcp[0] = 0;
    for (i = 0, h = 0; i < n; i++) {
        if (aux[i] > 0) {
            int32_t j = SA[aux[i] - 1];
            while (T[i + h] == T[j + h] && T[i + h] != FAT5__UG_SENT) h++;
            lcp[aux[i]] = h;
            if (h > 0) h--;
        } else {
            h = 0;
        }
    }
    // the sentence of each position
    for (i = 0, s = 0; i < n; i++) {
        aux[i] = (int32_t)s;
        if (T[i] == FAT5__UG_BOUND) s++;
    }
    // the internal nodes (lcp intervals), bottom up, with the counts of their suffixes' sentences
    q.keep = cfg->seed_sentencepiece_size;
    q.cap = 1024;
    q.a = FAT5__CAST(fat5__ug_cand *, fat5__malloc(ctx, (size_t)q.cap * sizeof *q.a));
    st_lcp = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)st_cap * sizeof(int64_t)));
    st_w = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)st_cap * sizeof(int64_t)));
    st_lb = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)st_cap * sizeof(int32_t)));
    if (!q.a || !st_lcp || !st_w || !st_lb) goto oom;
    st_lcp[0] = 0, st_lb[0] = 0, st_w[0] = 0;
    for (i = 1; i <= n; i++) {
        int64_t L = i < n ? lcp[i] : 0;
        int32_t leaf = SA[i - 1];
        int64_t wl = T[leaf] == FAT5__UG_SENT ? 0 : c->freq[aux[leaf]];
        if (top + 2 >= st_cap) {   // room for two more entries
            void *a;
            st_cap *= 2;
            if (!(a = fat5__realloc(ctx, st_lcp, (size_t)st_cap * sizeof(int64_t)))) goto oom;
            st_lcp = FAT5__CAST(int64_t *, a);
            if (!(a = fat5__realloc(ctx, st_w, (size_t)st_cap * sizeof(int64_t)))) goto oom;
            st_w = FAT5__CAST(int64_t *, a);
            if (!(a = fat5__realloc(ctx, st_lb, (size_t)st_cap * sizeof(int32_t)))) goto oom;
            st_lb = FAT5__CAST(int32_t *, a);
        }
        if (L > st_lcp[top]) {
            top++;
            st_lcp[top] = L, st_lb[top] = i - 1, st_w[top] = wl;
            continue;
        }
        st_w[top] += wl;
        while (L < st_lcp[top]) {
            int64_t len = st_lcp[top], w = st_w[top];
            int32_t lb = st_lb[top], off = SA[lb];
            top--;
            if (len > 1 && len <= cfg->max_sentencepiece_length) {   // a candidate piece
                int ok = 1;
                for (k = 0; k < len && ok; k++) {
                    int32_t d = T[off + k];
                    if (d <= FAT5__UG_UNK) ok = 0;
                    else cps[k] = u->cp[d];
                }
                if (ok && fat5__ug_valid(cfg, cps, len) && !(q.sorted && w * len < q.floor)) {
                    if (q.n == q.cap) {
                        if (q.n >= 2 * q.keep) {
                            fat5__ug_queue_cut(&q);
                        } else {
                            fat5__ug_cand *na = FAT5__CAST(fat5__ug_cand *, fat5__realloc(ctx, q.a, (size_t)q.cap * 2 * sizeof *q.a));
                            if (!na) goto oom;
                            q.a = na, q.cap *= 2;
                        }
                    }
                    q.a[q.n].score = w * len, q.a[q.n].off = off, q.a[q.n].len = (int32_t)len, q.a[q.n].t = &tx;
                    q.n++;
                }
            }
            if (L <= st_lcp[top]) {
                st_w[top] += w;
            } else {
                top++;
                st_lcp[top] = L, st_lb[top] = lb, st_w[top] = w;
            }
        }
    }
    fat5__free(ctx, st_lcp), st_lcp = NULL;
    fat5__free(ctx, st_w), st_w = NULL;
    fat5__free(ctx, st_lb), st_lb = NULL;
    fat5__free(ctx, SA), SA = NULL;
    fat5__free(ctx, lcp), lcp = NULL;
    fat5__free(ctx, aux), aux = NULL;
    fat5__ug_queue_cut(&q);
    // the model: characters first, then the substrings
    for (k = 3; k < u->n_dense; k++) total_chars += u->cfreq[k] > 0;
    u->n_pieces = total_chars + q.n;
    u->poff = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(u->n_pieces + 1) * sizeof(int64_t)));
    u->score = FAT5__CAST(double *, fat5__malloc(ctx, (size_t)u->n_pieces * sizeof(double)));
    {
        int64_t nch = total_chars;
        for (k = 0; k < q.n; k++) nch += q.a[k].len;
        u->pch = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(nch + 1) * sizeof(int32_t)));
    }
    if (!u->poff || !u->score || !u->pch) goto oom;
    u->poff[0] = 0;
    for (k = 0, s = 0; k < u->n_dense - 3; k++) {
        u->pch[u->poff[s]] = (int32_t)(k + 3);
        u->poff[s + 1] = u->poff[s] + 1;
        u->score[s++] = (double)u->cfreq[k + 3];
    }
    for (k = 0; k < q.n; k++, s++) {
        memcpy(u->pch + u->poff[s], T + q.a[k].off, (size_t)q.a[k].len * sizeof(int32_t));
        u->poff[s + 1] = u->poff[s] + q.a[k].len;
        u->score[s] = (double)q.a[k].score;
    }
    for (k = 0; k < u->n_pieces; k++) sum += u->score[k];
    for (k = 0; k < u->n_pieces; k++) u->score[k] = log(u->score[k]) - log(sum);
    if (cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: unigram: %lld seed pieces (%lld characters, %lld substrings) from %lld "
                "positions in %.1f s\n", (long long)u->n_pieces, (long long)total_chars, (long long)q.n, (long long)n64,
                fat5__now_s() - t0);
    fat5__free(ctx, q.a);
    return FAT5_OK;
oom:
    fat5__free(ctx, SA);
    fat5__free(ctx, lcp);
    fat5__free(ctx, aux);
    fat5__free(ctx, q.a);
    fat5__free(ctx, st_lcp);
    fat5__free(ctx, st_w);
    fat5__free(ctx, st_lb);
    return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory making the seed pieces of %lld characters",
                     (long long)n64);
}

// ---------------------------------------------------------------------------------------------
// the model's prefix tree and lattices

// releases the prefix tree
static void fat5__ug_trie_free(fat5_ctx *ctx, fat5__ug_trie *t) {
    fat5__free(ctx, t->key);
    fat5__free(ctx, t->child);
    fat5__free(ctx, t->piece);
    memset(t, 0, sizeof *t);
}

static uint64_t fat5__ug_mix(uint64_t k) {   // every key bit reaches the low bits (MurmurHash3's finaliser)
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    return k ^ (k >> 33);
}

// the child of node by character c, -1 when none
static int32_t fat5__ug_child(const fat5__ug_trie *t, int32_t node, int32_t c) {
    uint64_t key = ((uint64_t)node << 22 | (uint64_t)c) + 1, m = (uint64_t)t->cap - 1, h = fat5__ug_mix(key) & m;
    for (;; h = (h + 1) & m) {
        if (t->key[h] == key) return t->child[h];
        if (!t->key[h]) return -1;
    }
}

// The prefix tree of the model's pieces; also the lowest score.
static fat5_status fat5__ug_trie_build(fat5__ug *u) {
    fat5__ug_trie *t = &u->trie;
    int64_t edges = u->poff[u->n_pieces], i, k;
    fat5__ug_trie_free(u->ctx, t);
    t->cap = 64;
    while (t->cap < 2 * edges + 2) t->cap *= 2;
    t->key = FAT5__CAST(uint64_t *, fat5__calloc(u->ctx, (size_t)t->cap, sizeof(uint64_t)));
    t->child = FAT5__CAST(int32_t *, fat5__malloc(u->ctx, (size_t)t->cap * sizeof(int32_t)));
    t->piece = FAT5__CAST(int32_t *, fat5__malloc(u->ctx, (size_t)(edges + 1) * sizeof(int32_t)));
    if (!t->key || !t->child || !t->piece)
        return fat5__err(u->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for %lld pieces", (long long)u->n_pieces);
    t->n_nodes = 1;
    t->piece[0] = -1;
    u->min_score = INFINITY;
    for (i = 0; i < u->n_pieces; i++) {
        int32_t node = 0;
        for (k = u->poff[i]; k < u->poff[i + 1]; k++) {
            uint64_t key = ((uint64_t)node << 22 | (uint64_t)u->pch[k]) + 1, m = (uint64_t)t->cap - 1;
            uint64_t h = fat5__ug_mix(key) & m;
            while (t->key[h] && t->key[h] != key) h = (h + 1) & m;
            if (!t->key[h]) {
                t->key[h] = key;
                t->child[h] = (int32_t)t->n_nodes;
                t->piece[t->n_nodes++] = -1;
            }
            node = t->child[h];
        }
        t->piece[node] = (int32_t)i;
        if (u->score[i] < u->min_score) u->min_score = u->score[i];
    }
    return FAT5_OK;
}

// releases a lattice's buffers
static void fat5__ug_lat_free(fat5_ctx *ctx, fat5__ug_lat *l) {
    fat5__free(ctx, l->b);
    fat5__free(ctx, l->e);
    fat5__free(ctx, l->id);
    fat5__free(ctx, l->s);
    fat5__free(ctx, l->alpha);
    fat5__free(ctx, l->beta);
    fat5__free(ctx, l->bp);
    fat5__free(ctx, l->best);
    fat5__free(ctx, l->aux);
    memset(l, 0, sizeof *l);
}

// appends a node (characters b .. e, piece id, score); 0 when out of memory
static int fat5__ug_lat_node(fat5_ctx *ctx, fat5__ug_lat *l, int32_t b, int32_t e, int32_t id, double s) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 256;
        void *p;
        if (!(p = fat5__realloc(ctx, l->b, (size_t)cap * sizeof(int32_t)))) return 0;
        l->b = FAT5__CAST(int32_t *, p);
        if (!(p = fat5__realloc(ctx, l->e, (size_t)cap * sizeof(int32_t)))) return 0;
        l->e = FAT5__CAST(int32_t *, p);
        if (!(p = fat5__realloc(ctx, l->id, (size_t)cap * sizeof(int32_t)))) return 0;
        l->id = FAT5__CAST(int32_t *, p);
        if (!(p = fat5__realloc(ctx, l->s, (size_t)cap * sizeof(double)))) return 0;
        l->s = FAT5__CAST(double *, p);
        l->cap = cap;
    }
    l->b[l->n] = b, l->e[l->n] = e, l->id[l->n] = id, l->s[l->n] = s;
    l->n++;
    return 1;
}

// The lattice of w[0 .. len): every piece at every place; a character with no piece of its own
// gets an unknown node (id -1) scored 10 below the lowest score. 0 when out of memory.
static int fat5__ug_lattice(const fat5__ug *u, fat5_ctx *ctx, const int32_t *w, int64_t len, fat5__ug_lat *l) {
    int64_t b, e;
    double unk = u->min_score - 10.0;
    l->n = 0;
    if (len + 1 > l->lcap) {
        int64_t cap = len + 1 > 2 * l->lcap ? len + 1 : 2 * l->lcap;
        void *p;
        if (!(p = fat5__realloc(ctx, l->alpha, 2 * (size_t)cap * sizeof(double)))) return 0;
        l->alpha = FAT5__CAST(double *, p);
        if (!(p = fat5__realloc(ctx, l->beta, (size_t)cap * sizeof(double)))) return 0;
        l->beta = FAT5__CAST(double *, p);
        if (!(p = fat5__realloc(ctx, l->best, (size_t)cap * sizeof(double)))) return 0;
        l->best = FAT5__CAST(double *, p);
        if (!(p = fat5__realloc(ctx, l->bp, (size_t)cap * sizeof(int32_t)))) return 0;
        l->bp = FAT5__CAST(int32_t *, p);
        if (!(p = fat5__realloc(ctx, l->aux, 5 * (size_t)cap * sizeof(int32_t)))) return 0;
        l->aux = FAT5__CAST(int32_t *, p);
        l->lcap = cap;
    }
    for (b = 0; b < len; b++) {
        int32_t node = 0;
        int single = 0;
        for (e = b; e < len; e++) {
            int32_t id;
            if (w[e] <= FAT5__UG_UNK || (node = fat5__ug_child(&u->trie, node, w[e])) < 0) break;
            if ((id = u->trie.piece[node]) >= 0) {
                if (!fat5__ug_lat_node(ctx, l, (int32_t)b, (int32_t)(e + 1), id, u->score[id])) return 0;
                single |= e == b;
            }
        }
        if (!single && !fat5__ug_lat_node(ctx, l, (int32_t)b, (int32_t)(b + 1), -1, unk)) return 0;
    }
    return 1;
}

static double fat5__ug_lse(double a, double b) {   // log(exp(a) + exp(b))
    if (a < b) {
        double t = a;
        a = b, b = t;
    }
    if (b == -INFINITY) return a;
    return a + log1p(exp(b - a));
}

// The Viterbi path of a lattice over len characters: l->bp[len] .. back through l->bp; the number
// of its nodes. Ties go to the node seen first (the longer piece).
static int64_t fat5__ug_viterbi(fat5__ug_lat *l, int64_t len) {
    int64_t k, pos, cnt = 0;
    for (k = 0; k <= len; k++) l->best[k] = -INFINITY, l->bp[k] = -1;
    l->best[0] = 0.0;
    for (k = 0; k < l->n; k++) {
        double v = l->best[l->b[k]] + l->s[k];
        if (v > l->best[l->e[k]] || l->bp[l->e[k]] < 0) l->best[l->e[k]] = v, l->bp[l->e[k]] = (int32_t)k;
    }
    for (pos = len; pos > 0; pos = l->b[l->bp[pos]]) cnt++;
    return cnt;
}

// ---------------------------------------------------------------------------------------------
// the parallel parts: E step, Viterbi counts, pruning losses

typedef struct fat5__ug_job {
    fat5__ug *u;
    int mode;   // 0: E step, 1: Viterbi counts, 2: the losses of removing each piece
} fat5__ug_job;

// The loss of removing piece i (pruning's rule): kind 0 (its best segmentation is already
// another one, or it is never used), 1 (no other segmentation: kept), 2 (loss set).
static int fat5__ug_piece_loss(fat5__ug *u, fat5__ug_lat *l, int64_t i) {
    const int32_t *w = u->pch + u->poff[i];
    int64_t len = u->poff[i + 1] - u->poff[i], k, pos;
    double *sc;
    int32_t *nd, *rk, *alt;   // the two best paths into each position: score, last node, its rank
    double fi = (double)u->vfreq[i], logsum_alt, lp_alt = 0.0;
    int64_t n_alt = 0, n_best = 0;
    if (!fat5__ug_lattice(u, u->ctx, w, len, l)) return -1;
    sc = l->alpha, nd = l->aux, rk = l->aux + 2 * (len + 1), alt = l->aux + 4 * (len + 1);
    for (k = 0; k <= len; k++) nd[2 * k] = nd[2 * k + 1] = -1, rk[2 * k] = rk[2 * k + 1] = 0;
    for (k = 0; k <= len; k++) sc[2 * k] = sc[2 * k + 1] = -INFINITY;
    nd[0] = -2;   // the empty prefix
    for (k = 0; k < l->n; k++) {
        int r;
        for (r = 0; r < 2; r++) {
            int32_t b = l->b[k], e = l->e[k];
            double v;
            if (nd[2 * b + r] == -1) continue;
            v = sc[2 * b + r] + l->s[k];
            if (nd[2 * e] == -1 || v > sc[2 * e]) {
                sc[2 * e + 1] = sc[2 * e], nd[2 * e + 1] = nd[2 * e], rk[2 * e + 1] = rk[2 * e];
                sc[2 * e] = v, nd[2 * e] = (int32_t)k, rk[2 * e] = r;
            } else if (nd[2 * e + 1] == -1 || v > sc[2 * e + 1]) {
                sc[2 * e + 1] = v, nd[2 * e + 1] = (int32_t)k, rk[2 * e + 1] = r;
            }
        }
    }
    if (nd[2 * len + 1] == -1) return 1;   // one segmentation only
    for (pos = len, k = 0; pos > 0;) {      // the best path's length
        int32_t node = nd[2 * pos + k];
        k = rk[2 * pos + k];
        pos = l->b[node];
        n_best++;
    }
    if (n_best >= 2) return 0;
    if (fi == 0.0) return 0;
    for (pos = len, k = 1; pos > 0;) {      // the second path: the alternative
        int32_t node = nd[2 * pos + k];
        k = rk[2 * pos + k];
        pos = l->b[node];
        if (l->id[node] < 0) return 1;      // it would need an unknown character: keep the piece
        alt[n_alt++] = l->id[node];
    }
    logsum_alt = log(u->vit_sum + fi * (double)(n_alt - 1));
    for (k = 0; k < n_alt; k++) lp_alt += log((double)u->vfreq[alt[k]] + fi) - logsum_alt;
    u->loss[i] = fi / u->vsum * ((log(fi) - log(u->vit_sum)) - lp_alt);
    return 2;
}

// Part p of a job: the E step's expected counts (mode 0) or the Viterbi counts (mode 1) of the
// words i = p (mod parts), into the part's own sums; or the pruning losses of the pieces of the
// p-th slice (mode 2), each written by its own part.
static void fat5__ug_run(void *arg, int p, int parts) {
    fat5__ug_job *job = FAT5__CAST(fat5__ug_job *, arg);
    fat5__ug *u = job->u;
    fat5__ug_part *pt = &u->part[p];
    fat5__ug_lat *l = &pt->lat;
    int64_t i, k;
    if (job->mode == 2) {
        int64_t lo = u->n_pieces * p / parts, hi = u->n_pieces * (p + 1) / parts;
        for (i = lo; i < hi && !pt->oom; i++) {
            int r = fat5__ug_piece_loss(u, l, i);
            if (r < 0) pt->oom = 1;
            else u->kind[i] = (int8_t)r;
        }
        return;
    }
    memset(pt->acc, 0, (size_t)u->n_pieces * sizeof(int64_t));
    pt->obj_fx = 0, pt->ntok = 0;
    for (i = p; i < u->n_words && !pt->oom; i += parts) {
        const int32_t *w = u->wch + u->woff[i];
        int64_t len = u->woff[i + 1] - u->woff[i], pos;
        double f = (double)u->wfreq[i], Z;
        if (!fat5__ug_lattice(u, u->ctx, w, len, l)) {
            pt->oom = 1;
            break;
        }
        pt->ntok += fat5__ug_viterbi(l, len) * u->wfreq[i];
        if (job->mode == 1) {   // the Viterbi path's pieces, counted
            for (pos = len; pos > 0; pos = l->b[l->bp[pos]])
                if (l->id[l->bp[pos]] >= 0) pt->acc[l->id[l->bp[pos]]] += u->wfreq[i];
            continue;
        }
        for (k = 0; k <= len; k++) l->alpha[k] = l->beta[k] = -INFINITY;
        l->alpha[0] = 0.0, l->beta[len] = 0.0;
        for (k = 0; k < l->n; k++) l->alpha[l->e[k]] = fat5__ug_lse(l->alpha[l->e[k]], l->alpha[l->b[k]] + l->s[k]);
        for (k = l->n - 1; k >= 0; k--) l->beta[l->b[k]] = fat5__ug_lse(l->beta[l->b[k]], l->beta[l->e[k]] + l->s[k]);
        Z = l->alpha[len];
        for (k = 0; k < l->n; k++)
            if (l->id[k] >= 0) {
                double m = f * exp(l->alpha[l->b[k]] + l->s[k] + l->beta[l->e[k]] - Z);
                pt->acc[l->id[k]] += (int64_t)(m * FAT5__UG_FX + 0.5);
            }
        pt->obj_fx += (int64_t)llround(f * Z * 1048576.0);
    }
}

// Runs a job over the parts; their sums are added into part 0 (integers: the order does not matter).
static fat5_status fat5__ug_parallel(fat5__ug *u, int mode) {
    fat5__ug_job job;
    int p;
    int64_t k;
    job.u = u, job.mode = mode;
    fat5__pool_run(u->ctx, fat5__ug_run, &job, u->parts);
    for (p = 0; p < u->parts; p++)
        if (u->part[p].oom)
            return fat5__err(u->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory in a word's lattice");
    if (mode == 2) return FAT5_OK;
    for (p = 1; p < u->parts; p++) {
        for (k = 0; k < u->n_pieces; k++) u->part[0].acc[k] += u->part[p].acc[k];
        u->part[0].obj_fx += u->part[p].obj_fx;
        u->part[0].ntok += u->part[p].ntok;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// EM and pruning

// The digamma function (asymptotic series after the recurrence)
static double fat5__ug_digamma(double x) {
    double r = 0.0, f, f2;
    for (; x < 7; ++x) r -= 1 / x;
    x -= 0.5;
    f = 1.0 / x, f2 = f * f;
    return r + log(x) + f2 / 24.0 - 7.0 / 960.0 * f2 * f2 + 31.0 / 8064.0 * f2 * f2 * f2 - 127.0 / 30720.0 * f2 * f2 * f2 * f2;
}

// Keeps the pieces idx[0 .. n) in that order with the scores sc (NULL: their own); rebuilds the
// prefix tree.
static fat5_status fat5__ug_keep(fat5__ug *u, const int64_t *idx, int64_t n, const double *sc) {
    fat5_ctx *ctx = u->ctx;
    int64_t k, nch = 0;
    int32_t *pch;
    int64_t *poff;
    double *score;
    for (k = 0; k < n; k++) nch += u->poff[idx[k] + 1] - u->poff[idx[k]];
    pch = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(nch + 1) * sizeof(int32_t)));
    poff = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof(int64_t)));
    score = FAT5__CAST(double *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof(double)));
    if (!pch || !poff || !score) {
        fat5__free(ctx, pch);
        fat5__free(ctx, poff);
        fat5__free(ctx, score);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for %lld pieces", (long long)n);
    }
    poff[0] = 0;
    for (k = 0; k < n; k++) {
        int64_t a = u->poff[idx[k]], b = u->poff[idx[k] + 1];
        memcpy(pch + poff[k], u->pch + a, (size_t)(b - a) * sizeof(int32_t));
        poff[k + 1] = poff[k] + (b - a);
        score[k] = sc ? sc[k] : u->score[idx[k]];
    }
    fat5__free(ctx, u->pch);
    fat5__free(ctx, u->poff);
    fat5__free(ctx, u->score);
    u->pch = pch, u->poff = poff, u->score = score, u->n_pieces = n;
    return fat5__ug_trie_build(u);
}

// One EM step: expected counts, then the pieces expected at least 0.5 times rescored.
static fat5_status fat5__ug_em(fat5__ug *u, int round, int step, double t0) {
    fat5_status st;
    int64_t *idx, n = 0, k, old = u->n_pieces;
    double *sc, sum = 0.0, lsum, obj;
    if ((st = fat5__ug_parallel(u, 0))) return st;
    idx = FAT5__CAST(int64_t *, fat5__malloc(u->ctx, (size_t)old * sizeof(int64_t)));
    sc = FAT5__CAST(double *, fat5__malloc(u->ctx, (size_t)old * sizeof(double)));
    if (!idx || !sc) {
        fat5__free(u->ctx, idx);
        fat5__free(u->ctx, sc);
        return fat5__err(u->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory in the M step");
    }
    for (k = 0; k < old; k++) {
        double f = (double)u->part[0].acc[k] / FAT5__UG_FX;
        if (f < 0.5) continue;
        idx[n] = k, sc[n++] = f;
        sum += f;
    }
    lsum = fat5__ug_digamma(sum);
    for (k = 0; k < n; k++) sc[k] = fat5__ug_digamma(sc[k]) - lsum;
    obj = -(double)u->part[0].obj_fx / 1048576.0 / (double)u->total_freq;
    st = n ? fat5__ug_keep(u, idx, n, sc)
           : fat5__err(u->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: no piece is expected half a time");
    fat5__free(u->ctx, idx);
    fat5__free(u->ctx, sc);
    if (st) return st;
#ifdef FAT5_TEST_FAULTS
    if (fat5__ug_em_hook) fat5__ug_em_hook(fat5__ug_em_hook_arg, round, step, u->n_pieces, obj);
#endif
    if (u->cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: unigram: round %d EM step %d: %lld pieces, objective %.6f, %lld tokens "
                "(%.2f bytes each), %.1f s\n", round, step, (long long)u->n_pieces, obj, (long long)u->part[0].ntok,
                (double)u->text_bytes / (double)u->part[0].ntok, fat5__now_s() - t0);
    return FAT5_OK;
}

typedef struct { double loss; int64_t i; } fat5__ug_lossi;
static int fat5__ug_loss_cmp(const void *a, const void *b) {   // loss descending, then index
    const fat5__ug_lossi *x = (const fat5__ug_lossi *)a, *y = (const fat5__ug_lossi *)b;
    if (x->loss != y->loss) return x->loss > y->loss ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

// Pruning: keeps the pieces without another segmentation, then those whose removal loses the
// most likelihood, max(shrinking_factor x size, target) in all.
static fat5_status fat5__ug_prune(fat5__ug *u, int64_t desired) {
    fat5_ctx *ctx = u->ctx;
    fat5_status st;
    int64_t k, n = 0, nc = 0, pruned, *idx = NULL, *vf = NULL;
    fat5__ug_lossi *cand = NULL;
    if ((st = fat5__ug_parallel(u, 1))) return st;
    vf = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)u->n_pieces * sizeof(int64_t)));
    u->loss = FAT5__CAST(double *, fat5__malloc(ctx, (size_t)u->n_pieces * sizeof(double)));
    u->kind = FAT5__CAST(int8_t *, fat5__malloc(ctx, (size_t)u->n_pieces));
    idx = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)u->n_pieces * sizeof(int64_t)));
    cand = FAT5__CAST(fat5__ug_lossi *, fat5__malloc(ctx, (size_t)u->n_pieces * sizeof *cand));
    if (!vf || !u->loss || !u->kind || !idx || !cand) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory pruning %lld pieces", (long long)u->n_pieces);
        goto done;
    }
    memcpy(vf, u->part[0].acc, (size_t)u->n_pieces * sizeof(int64_t));
    u->vfreq = vf;
    u->vit_sum = 0.0;
    for (k = 0; k < u->n_pieces; k++) u->vit_sum += (double)vf[k];
    u->vsum = (double)u->total_freq;
    if ((st = fat5__ug_parallel(u, 2))) goto done;
    pruned = (int64_t)(u->cfg->shrinking_factor * (double)u->n_pieces);
    if (pruned < desired) pruned = desired;
    for (k = 0; k < u->n_pieces; k++) {
        if (vf[k] == 0 || u->kind[k] == 0) continue;
        if (u->kind[k] == 1) idx[n++] = k;
        else cand[nc].loss = u->loss[k], cand[nc++].i = k;
    }
    qsort(cand, (size_t)nc, sizeof *cand, fat5__ug_loss_cmp);
    for (k = 0; k < nc && n < pruned; k++) idx[n++] = cand[k].i;
    st = fat5__ug_keep(u, idx, n, NULL);
done:
    fat5__free(ctx, vf);
    fat5__free(ctx, u->loss), u->loss = NULL;
    fat5__free(ctx, u->kind), u->kind = NULL;
    fat5__free(ctx, idx);
    fat5__free(ctx, cand);
    u->vfreq = NULL;
    return st;
}

// ---------------------------------------------------------------------------------------------
// the final vocabulary

typedef struct { float score; int64_t i; const fat5__ug *u; } fat5__ug_fin;
static int fat5__ug_fin_cmp(const void *a, const void *b) {   // score descending, then the piece's bytes
    const fat5__ug_fin *x = (const fat5__ug_fin *)a, *y = (const fat5__ug_fin *)b;
    const fat5__ug *u = x->u;
    int64_t p, q;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    for (p = u->poff[x->i], q = u->poff[y->i]; p < u->poff[x->i + 1] && q < u->poff[y->i + 1]; p++, q++)
        if (u->cp[u->pch[p]] != u->cp[u->pch[q]]) return u->cp[u->pch[p]] < u->cp[u->pch[q]] ? -1 : 1;
    return (p < u->poff[x->i + 1]) - (q < u->poff[y->i + 1]);
}

// The normal pieces into out: every alphabet character (scored as in the model, or just above its
// lowest score when the model lost it: the more frequent, the lower), then the best pieces, until
// `room` pieces; sorted by score.
static fat5_status fat5__ug_finalize(fat5__ug *u, int64_t room, fat5__tt_vocab *out) {
    fat5_ctx *ctx = u->ctx;
    int64_t k, n = 0, *char_piece = NULL;
    fat5__ug_fin *f = FAT5__CAST(fat5__ug_fin *, fat5__malloc(ctx, (size_t)(u->n_pieces + u->n_dense) * sizeof *f));
    char *buf = NULL;
    double penalty = 0.0;
    int8_t *used = NULL;
    fat5_status st = FAT5_OK;
    char_piece = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)u->n_dense * sizeof(int64_t)));
    used = FAT5__CAST(int8_t *, fat5__calloc(ctx, (size_t)u->n_pieces + 1, 1));
    buf = FAT5__CAST(char *, fat5__malloc(ctx, 4 * (size_t)(u->cfg->max_sentencepiece_length + 1)));
    if (!f || !char_piece || !used || !buf) goto oom;
    for (k = 0; k < u->n_dense; k++) char_piece[k] = -1;
    for (k = 0; k < u->n_pieces; k++)
        if (u->poff[k + 1] - u->poff[k] == 1) char_piece[u->pch[u->poff[k]]] = k;
    // the characters missing from the model become pieces of their own, after the model's
    {
        int64_t miss = 0, base = u->n_pieces;
        for (k = 3; k < u->n_dense; k++) miss += char_piece[k] < 0;
        if (miss) {
            int64_t *poff = FAT5__CAST(int64_t *, fat5__realloc(ctx, u->poff, (size_t)(u->n_pieces + miss + 1) * sizeof(int64_t)));
            int32_t *pch;
            double *score;
            if (!poff) goto oom;
            u->poff = poff;
            pch = FAT5__CAST(int32_t *, fat5__realloc(ctx, u->pch, (size_t)(u->poff[base] + miss + 1) * sizeof(int32_t)));
            if (!pch) goto oom;
            u->pch = pch;
            score = FAT5__CAST(double *, fat5__realloc(ctx, u->score, (size_t)(base + miss) * sizeof(double)));
            if (!score) goto oom;
            u->score = score;
            fat5__free(ctx, used);
            used = FAT5__CAST(int8_t *, fat5__calloc(ctx, (size_t)(base + miss) + 1, 1));
            if (!used) goto oom;
            for (k = 3; k < u->n_dense; k++)   // alphabet order: count descending
                if (char_piece[k] < 0) {
                    u->pch[u->poff[u->n_pieces]] = (int32_t)k;
                    u->poff[u->n_pieces + 1] = u->poff[u->n_pieces] + 1;
                    u->score[u->n_pieces] = u->min_score + penalty;
                    penalty += 0.0001;
                    char_piece[k] = u->n_pieces++;
                }
        }
    }
    for (k = 3; k < u->n_dense; k++) {
        f[n].score = (float)u->score[char_piece[k]], f[n].i = char_piece[k], f[n++].u = u;
        used[char_piece[k]] = 1;
    }
    {   // then the best of the others
        fat5__ug_fin *g = FAT5__CAST(fat5__ug_fin *, fat5__malloc(ctx, (size_t)u->n_pieces * sizeof *g));
        int64_t ng = 0;
        if (!g) goto oom;
        for (k = 0; k < u->n_pieces; k++)
            if (!used[k]) g[ng].score = (float)u->score[k], g[ng].i = k, g[ng++].u = u;
        qsort(g, (size_t)ng, sizeof *g, fat5__ug_fin_cmp);
        for (k = 0; k < ng && n < room; k++) f[n++] = g[k];
        fat5__free(ctx, g);
    }
    if (n < room) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: the corpus gives %lld pieces, fewer than the %lld "
                       "that vocab_size %lld needs beside the %lld special pieces; set vocab_size <= %lld",
                       (long long)n, (long long)room, (long long)u->cfg->vocab_size,
                       (long long)(u->cfg->vocab_size - room), (long long)(u->cfg->vocab_size - room + n));
        goto done;
    }
    qsort(f, (size_t)n, sizeof *f, fat5__ug_fin_cmp);
    for (k = 0; k < n; k++) {
        size_t len = 0;
        int64_t p;
        for (p = u->poff[f[k].i]; p < u->poff[f[k].i + 1]; p++) len += fat5__utf8_put(buf + len, u->cp[u->pch[p]]);
        if (fat5__tt_vocab_add(ctx, out, buf, len, f[k].score, FAT5__PT_NORMAL) < 0) {
            st = FAT5_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    goto done;
oom:
    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for the final vocabulary");
done:
    fat5__free(ctx, f);
    fat5__free(ctx, char_piece);
    fat5__free(ctx, used);
    fat5__free(ctx, buf);
    return st;
}

// ---------------------------------------------------------------------------------------------
// the trainer

// releases everything the trainer holds
static void fat5__ug_free(fat5__ug *u) {
    fat5_ctx *ctx = u->ctx;
    int p;
    fat5__free(ctx, u->cp);
    fat5__free(ctx, u->cfreq);
    fat5__free(ctx, u->wch);
    fat5__free(ctx, u->woff);
    fat5__free(ctx, u->wfreq);
    fat5__free(ctx, u->pch);
    fat5__free(ctx, u->poff);
    fat5__free(ctx, u->score);
    fat5__ug_trie_free(ctx, &u->trie);
    if (u->part)
        for (p = 0; p < u->parts; p++) {
            fat5__free(ctx, u->part[p].acc);
            fat5__ug_lat_free(ctx, &u->part[p].lat);
        }
    fat5__free(ctx, u->part);
}

// The trainer (declared in text_train_corpus.c): the special pieces, the byte pieces, then the
// trained ones by score.
static fat5_status fat5__tt_unigram(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                    const fat5__tt_corpus *c, fat5__tt_vocab *out,
                                    fat5_tokenizer_train_report *rep) {
    fat5__ug u;
    fat5__ug_meta m;
    fat5_status st;
    int32_t *T = NULL;
    int64_t nT = 0, meta_n, k, desired;
    int round = 0, p;
    char bytes[256][7];
    double t0 = fat5__now_s();
    memset(&u, 0, sizeof u);
    memset(&m, 0, sizeof m);
    u.ctx = ctx, u.cfg = cfg;
    for (k = 0; k < c->n; k++) u.text_bytes += (c->off[k + 1] - c->off[k] - 1) * c->freq[k];
    if ((st = fat5__tt_vocab_specials(ctx, cfg, out))) return st;
    meta_n = out->n + (cfg->byte_fallback ? 256 : 0);
    if (c->n == 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: the corpus holds no sentence after normalisation");
    // the special pieces' texts
    m.n = (int)meta_n;
    m.s = FAT5__CAST(const char **, fat5__malloc(ctx, (size_t)meta_n * sizeof(char *)));
    m.len = FAT5__CAST(size_t *, fat5__malloc(ctx, (size_t)meta_n * sizeof(size_t)));
    if (!m.s || !m.len) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory");
        goto done;
    }
    for (k = 0; k < meta_n; k++) {
        if (k < out->n) {
            m.s[k] = out->piece[k];
        } else {
            snprintf(bytes[k - out->n], sizeof bytes[0], "<0x%02X>", (unsigned)(k - out->n));
            m.s[k] = bytes[k - out->n];
        }
        m.len[k] = strlen(m.s[k]);
        m.first[(unsigned char)m.s[k][0]] = 1;
    }
    if ((st = fat5__ug_alphabet(&u, c, &m, &T, &nT, meta_n))) goto done;
    if (rep) rep->alphabet_size = u.n_dense - 3;
    if ((st = fat5__ug_seed(&u, T, nT, c)) || (st = fat5__ug_words(&u, T, nT - 1, c))) goto done;
    fat5__free(ctx, T), T = NULL;
    if ((st = fat5__ug_trie_build(&u))) goto done;
    if (cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: unigram: %lld words (%lld in all) for EM\n", (long long)u.n_words,
                (long long)u.total_freq);
    u.parts = cfg->num_threads > 0 ? cfg->num_threads : ctx->n_threads;
    if (u.parts < 1) u.parts = 1;
    u.part = FAT5__CAST(fat5__ug_part *, fat5__calloc(ctx, (size_t)u.parts, sizeof(fat5__ug_part)));
    if (!u.part) goto oom;
    for (p = 0; p < u.parts; p++) {
        u.part[p].acc = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(u.n_pieces + 1) * sizeof(int64_t)));
        if (!u.part[p].acc) goto oom;
    }
    desired = (int64_t)((double)cfg->vocab_size * 1.1);
    for (;;) {
        int64_t before;
        for (k = 0; k < cfg->num_sub_iterations; k++)
            if ((st = fat5__ug_em(&u, round, (int)k, t0))) goto done;
        round++;
        if ((double)u.n_pieces * cfg->shrinking_factor <= (double)desired) break;   // the next pruning would reach it
        before = u.n_pieces;
        if ((st = fat5__ug_prune(&u, desired))) goto done;
        if (cfg->verbose)
            fprintf(stderr, "fat5_tokenizer_train: unigram: round %d pruned %lld -> %lld pieces, %.1f s\n", round - 1,
                    (long long)before, (long long)u.n_pieces, fat5__now_s() - t0);
        if (u.n_pieces >= before) break;   // nothing left to prune
    }
    if (rep) rep->rounds = round;
    if (cfg->byte_fallback)
        for (k = 0; k < 256; k++)
            if (fat5__tt_vocab_add(ctx, out, bytes[k], strlen(bytes[k]), 0.0f, FAT5__PT_BYTE) < 0) {
                st = FAT5_ERR_OUT_OF_MEMORY;
                goto done;
            }
    st = fat5__ug_finalize(&u, cfg->vocab_size - meta_n, out);
    goto done;
oom:
    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for the EM sums of %d parts", u.parts);
done:
    fat5__free(ctx, T);
    fat5__free(ctx, (void *)m.s);
    fat5__free(ctx, m.len);
    fat5__ug_free(&u);
    return st;
}
