// =============================================================================================
// ==[8.5] text: evaluation metrics (exact match and F1, ROUGE, BLEU) ==
// Generation metrics computed as the Python packages compute them, from the same token rules:
//   - SQuAD v1.1's evaluation script: normalize_answer (Python's str.lower(), ASCII punctuation
//     removed, the words a / an / the removed, whitespace collapsed), exact match, token F1, the
//     maximum over the references, and the corpus means in percent.
//   - rouge_score's RougeScorer with its default tokenizer (lower case, every character but
//     a-z 0-9 a separator, nltk's Porter stemmer in its default NLTK_EXTENSIONS mode on tokens
//     longer than 3 characters when asked): rouge1, rouge2, rougeL, rougeLsum (lines split on
//     "\n", summary-level union LCS).
//   - sacrebleu's corpus BLEU with its defaults: the 13a tokenizer, n-grams up to 4, 'exp'
//     smoothing, the closest reference length (the shorter one on a tie), clipped counts against
//     the largest count over a hypothesis's references.
// Every function tokenizes into ids of one vocabulary (fat5__tm) made for the call, so n-grams
// and LCS compare integers. Inputs are NUL-terminated UTF-8; text that is not valid UTF-8 is
// refused (FAT5_ERR_INVALID_ARG) before anything is computed. Character classes and case
// mappings come from the Unicode tables of section [8.1] (Python's own are its Unicode version's).

// ---------------------------------------------------------------------------------------------
// the vocabulary of one call: token text interned to dense ids (0, 1, ...)

typedef struct fat5__tm {
    fat5_ctx *ctx;
    int oom;              // latched on the first failed allocation; the caller checks it once
    fat5__sb text;        // every token's bytes, back to back
    size_t *off, *len;    // token id -> its bytes in text
    size_t n_tok, cap_tok;
    uint32_t *slot;       // open-addressing hash table: id + 1, 0 for an empty slot
    size_t n_slot;        // a power of two, at least twice n_tok
} fat5__tm;

// a token sequence
typedef struct fat5__tm_seq {
    int32_t *id;
    size_t n, cap;
} fat5__tm_seq;

static void fat5__tm_init(fat5__tm *M, fat5_ctx *ctx) {
    memset(M, 0, sizeof *M);
    M->ctx = ctx;
    fat5__sb_init(&M->text, ctx);
}

static void fat5__tm_free(fat5__tm *M) {
    fat5__sb_free(&M->text);
    fat5__free(M->ctx, M->off);
    fat5__free(M->ctx, M->len);
    fat5__free(M->ctx, M->slot);
}

static uint32_t fat5__tm_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;   // FNV-1a
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

// the slot of s[0..n) in the table: the one holding it, or the empty one where it belongs
static size_t fat5__tm_find(const fat5__tm *M, const char *s, size_t n, uint32_t h) {
    size_t mask = M->n_slot - 1, i = h & mask;
    for (;;) {
        uint32_t v = M->slot[i];
        if (!v) return i;
        if (M->len[v - 1] == n && memcmp(M->text.buf + M->off[v - 1], s, n) == 0) return i;
        i = (i + 1) & mask;
    }
}

// doubles the hash table (and makes it on the first call); 0 when out of memory
static int fat5__tm_grow(fat5__tm *M) {
    size_t ns = M->n_slot ? M->n_slot * 2 : 64, i;
    uint32_t *old = M->slot;
    size_t old_n = M->n_slot;
    uint32_t *t;
    if (ns > (size_t)UINT32_MAX) return 0;
    t = FAT5__CAST(uint32_t *, fat5__calloc(M->ctx, ns, sizeof *t));
    if (!t) return 0;
    M->slot = t;
    M->n_slot = ns;
    for (i = 0; i < old_n; i++)
        if (old[i]) {
            uint32_t id = old[i] - 1;
            size_t at = fat5__tm_find(M, M->text.buf + M->off[id], M->len[id],
                                      fat5__tm_hash(M->text.buf + M->off[id], M->len[id]));
            t[at] = old[i];
        }
    fat5__free(M->ctx, old);
    return 1;
}

// the id of token s[0..n), added when new; -1 when out of memory (M->oom set)
static int32_t fat5__tm_intern(fat5__tm *M, const char *s, size_t n) {
    uint32_t h = fat5__tm_hash(s, n);
    size_t at;
    if (M->oom) return -1;
    if ((M->n_tok + 1) * 2 > M->n_slot && !fat5__tm_grow(M)) goto oom;
    at = fat5__tm_find(M, s, n, h);
    if (M->slot[at]) return (int32_t)(M->slot[at] - 1);
    if (M->n_tok >= (size_t)INT32_MAX - 1) goto oom;
    if (M->n_tok == M->cap_tok) {
        size_t nc = M->cap_tok ? M->cap_tok * 2 : 64;
        size_t *o = FAT5__CAST(size_t *, fat5__calloc(M->ctx, nc, sizeof *o));
        size_t *l = FAT5__CAST(size_t *, fat5__calloc(M->ctx, nc, sizeof *l));
        if (!o || !l) {
            fat5__free(M->ctx, o);
            fat5__free(M->ctx, l);
            goto oom;
        }
        if (M->n_tok) {
            memcpy(o, M->off, M->n_tok * sizeof *o);
            memcpy(l, M->len, M->n_tok * sizeof *l);
        }
        fat5__free(M->ctx, M->off);
        fat5__free(M->ctx, M->len);
        M->off = o;
        M->len = l;
        M->cap_tok = nc;
    }
    M->off[M->n_tok] = M->text.len;
    M->len[M->n_tok] = n;
    fat5__sb_putn(&M->text, s, n);
    if (M->text.oom) goto oom;
    M->slot[at] = (uint32_t)(M->n_tok + 1);
    return (int32_t)M->n_tok++;
oom:
    M->oom = 1;
    return -1;
}

static void fat5__tm_seq_free(fat5__tm *M, fat5__tm_seq *q) {
    fat5__free(M->ctx, q->id);
    memset(q, 0, sizeof *q);
}

// appends token s[0..n) (interned) to q
static void fat5__tm_push(fat5__tm *M, fat5__tm_seq *q, const char *s, size_t n) {
    int32_t id = fat5__tm_intern(M, s, n);
    if (id < 0) return;
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 32;
        int32_t *p = nc <= SIZE_MAX / sizeof *p ? FAT5__CAST(int32_t *, fat5__realloc(M->ctx, q->id, nc * sizeof *p)) : NULL;
        if (!p) {
            M->oom = 1;
            return;
        }
        q->id = p;
        q->cap = nc;
    }
    q->id[q->n++] = id;
}

// ---------------------------------------------------------------------------------------------
// character classes

// Python's str.isspace(), which str.split() splits on: White_Space and the information separators
// U+001C..U+001F
static int fat5__tm_py_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// a character of Python's \w (str.isalnum() or '_'): letters and numbers (Unicode FAT5__UNICODE_VERSION)
static int fat5__tm_py_word(uint32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    return fat5__uc_is_letter(cp) || fat5__uc_is_number(cp);
}

// the code point at s[0..n) (valid UTF-8); *len gets its byte length
static uint32_t fat5__tm_cp(const char *s, size_t n, size_t *len) { return fat5__utf8_cp(s, n, len); }

// the Simple_Lowercase_Mapping of cp (cp itself when it has none)
static uint32_t fat5__tm_simple_lower(uint32_t cp) {
    size_t i;
    uint32_t start, span, v, stride;
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    if (cp < (fat5__uc_lower_key[0] >> 8)) return cp;
    i = fat5__uc_floor(fat5__uc_lower_key, FAT5__UC_COUNT(fat5__uc_lower_key), cp, 8);
    start = fat5__uc_lower_key[i] >> 8;
    v = fat5__uc_lower_val[i];
    stride = (v & 1) ? 2 : 1;
    span = (fat5__uc_lower_key[i] & 0xFF) * stride;   // the last code point of the run is start + span
    if (cp - start > span || (cp - start) % stride) return cp;
    return (uint32_t)((int64_t)cp + (int64_t)(v >> 1) - 0x110000);
}

static int fat5__tm_cased(uint32_t cp) { return (fat5__uc_range(fat5__uc_case, FAT5__UC_COUNT(fat5__uc_case), cp) & 1) != 0; }
static int fat5__tm_case_ignorable(uint32_t cp) {
    return (fat5__uc_range(fat5__uc_case, FAT5__UC_COUNT(fat5__uc_case), cp) & 2) != 0;
}

// the start of the code point that ends just before s[i] (valid UTF-8, i > 0)
static size_t fat5__tm_prev(const char *s, size_t i) {
    do i--;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80);
    return i;
}

// Python's str.lower() of s[0..n), appended to b: the simple lowercase mappings, U+0130 to
// "i" + U+0307 (its one unconditional full mapping), and U+03A3 to final sigma U+03C2 where it
// ends a word: after a cased letter and not before one, case-ignorable characters skipped both ways
static void fat5__tm_py_lower(fat5__sb *b, const char *s, size_t n) {
    size_t i, k;
    for (i = 0; i < n; i += k) {
        uint32_t cp = fat5__tm_cp(s + i, n - i, &k), lc;
        char u[4];
        if (cp < 0x80) {
            char c = (char)((cp >= 'A' && cp <= 'Z') ? cp + 32 : cp);
            fat5__sb_putn(b, &c, 1);
            continue;
        }
        if (cp == 0x130) {
            fat5__sb_putn(b, "i\xCC\x87", 3);
            continue;
        }
        lc = fat5__tm_simple_lower(cp);
        if (cp == 0x3A3) {
            size_t j = i, kk;
            uint32_t c = 0;
            int final_sigma = 0;
            while (j > 0) {   // back over case-ignorable characters: is the one before cased?
                j = fat5__tm_prev(s, j);
                c = fat5__tm_cp(s + j, n - j, &kk);
                if (!fat5__tm_case_ignorable(c)) {
                    final_sigma = fat5__tm_cased(c);
                    break;
                }
            }
            for (j = i + k; final_sigma && j < n; j += kk) {   // and is none after
                c = fat5__tm_cp(s + j, n - j, &kk);
                if (!fat5__tm_case_ignorable(c)) {
                    final_sigma = !fat5__tm_cased(c);
                    break;
                }
            }
            lc = final_sigma ? 0x3C2 : 0x3C3;
        }
        fat5__sb_putn(b, u, fat5__utf8_put(u, lc));
    }
}

// splits s[0..n) on Python whitespace (str.split()) and appends the words to q
static void fat5__tm_split(fat5__tm *M, const char *s, size_t n, fat5__tm_seq *q) {
    size_t i = 0, start = 0, k;
    int in_word = 0;
    while (i < n) {
        uint32_t cp = fat5__tm_cp(s + i, n - i, &k);
        if (fat5__tm_py_space(cp)) {
            if (in_word) fat5__tm_push(M, q, s + start, i - start);
            in_word = 0;
        } else if (!in_word) {
            in_word = 1;
            start = i;
        }
        i += k;
    }
    if (in_word) fat5__tm_push(M, q, s + start, n - start);
}

// FAT5_ERR_INVALID_ARG when s is NULL or not valid UTF-8; `what` names it in the message
static fat5_status fat5__tm_check(fat5_ctx *ctx, const char *fn, const char *what, int64_t i, const char *s) {
    size_t n, ok;
    if (!s) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s[%lld] is NULL", fn, what, (long long)i);
    n = strlen(s);
    ok = fat5_utf8_valid_len(s, n);
    if (ok != n)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s[%lld] is not valid UTF-8 (byte %zu)", fn, what,
                         (long long)i, ok);
    return FAT5_OK;
}

// checks the predictions and their references (refs[ref_offsets[i] .. ref_offsets[i + 1]) belong
// to prediction i; ref_offsets NULL: refs[i] alone)
static fat5_status fat5__tm_check_corpus(fat5_ctx *ctx, const char *fn, const char *const *preds, int64_t n,
                                         const char *const *refs, const int64_t *ref_offsets) {
    int64_t i, n_refs;
    fat5_status st;
    if (n < 1 || !preds || !refs)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: needs n >= 1 predictions and their references (n = %lld)",
                         fn, (long long)n);
    if (ref_offsets) {
        if (ref_offsets[0] != 0) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: ref_offsets[0] must be 0", fn);
        for (i = 0; i < n; i++)
            if (ref_offsets[i + 1] <= ref_offsets[i])
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "%s: prediction %lld has no reference (ref_offsets must increase)", fn, (long long)i);
    }
    for (i = 0; i < n; i++)
        if ((st = fat5__tm_check(ctx, fn, "preds", i, preds[i])) != FAT5_OK) return st;
    n_refs = ref_offsets ? ref_offsets[n] : n;
    for (i = 0; i < n_refs; i++)
        if ((st = fat5__tm_check(ctx, fn, "refs", i, refs[i])) != FAT5_OK) return st;
    return FAT5_OK;
}

// the first reference of prediction i and how many it has
static int64_t fat5__tm_refs_of(const int64_t *ref_offsets, int64_t i, int64_t *count) {
    if (!ref_offsets) {
        *count = 1;
        return i;
    }
    *count = ref_offsets[i + 1] - ref_offsets[i];
    return ref_offsets[i];
}

// ---------------------------------------------------------------------------------------------
// n-gram counting: the n-grams of several sequences sorted together, so that each distinct n-gram
// comes as one run with the count of every sequence

typedef struct fat5__tm_gram {
    const int32_t *p;     // the n-gram's first token
    int32_t n;            // its order
    int32_t side;         // which sequence it is from
} fat5__tm_gram;

static int fat5__tm_gram_cmp(const void *a, const void *b) {
    const fat5__tm_gram *x = FAT5__CAST(const fat5__tm_gram *, a), *y = FAT5__CAST(const fat5__tm_gram *, b);
    int32_t i;
    for (i = 0; i < x->n; i++)
        if (x->p[i] != y->p[i]) return x->p[i] < y->p[i] ? -1 : 1;
    return x->side < y->side ? -1 : x->side > y->side;
}

// Counts the order-n n-grams of seqs[0..n_seqs): for each distinct n-gram, with c[s] its count in
// seqs[s], adds min(c[0], max over s >= 1 of c[s]) to *clipped. *total gets the number of
// n-grams of seqs[0]. 0 when out of memory.
static int fat5__tm_ngram_match(fat5__tm *M, const fat5__tm_seq *seqs, int n_seqs, int n, int64_t *clipped,
                                int64_t *total) {
    size_t count = 0, at = 0, i;
    int s;
    fat5__tm_gram *g;
    *clipped = *total = 0;
    for (s = 0; s < n_seqs; s++)
        if (seqs[s].n >= (size_t)n) count += seqs[s].n - (size_t)n + 1;
    if (seqs[0].n >= (size_t)n) *total = (int64_t)(seqs[0].n - (size_t)n + 1);
    if (!count) return 1;
    g = FAT5__CAST(fat5__tm_gram *, fat5__calloc(M->ctx, count, sizeof *g));
    if (!g) {
        M->oom = 1;
        return 0;
    }
    for (s = 0; s < n_seqs; s++)
        for (i = 0; i + (size_t)n <= seqs[s].n; i++) {
            g[at].p = seqs[s].id + i;
            g[at].n = n;
            g[at].side = s;
            at++;
        }
    qsort(g, count, sizeof *g, fat5__tm_gram_cmp);
    for (i = 0; i < count;) {
        // one distinct n-gram: runs of equal sides inside it
        int64_t mine = 0, best_ref = 0;
        size_t j = i;
        while (j < count && memcmp(g[j].p, g[i].p, (size_t)n * sizeof(int32_t)) == 0) {
            size_t k = j;
            while (k < count && g[k].side == g[j].side && memcmp(g[k].p, g[i].p, (size_t)n * sizeof(int32_t)) == 0)
                k++;
            if (g[j].side == 0) mine = (int64_t)(k - j);
            else if ((int64_t)(k - j) > best_ref) best_ref = (int64_t)(k - j);
            j = k;
        }
        *clipped += mine < best_ref ? mine : best_ref;
        i = j;
    }
    fat5__free(M->ctx, g);
    return 1;
}

// rouge_score's F-measure of a precision and a recall
static double fat5__tm_fmeasure(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

// ---------------------------------------------------------------------------------------------
// the Porter stemmer as nltk's PorterStemmer runs it in its default mode (NLTK_EXTENSIONS):
// the original algorithm with the irregular forms, 'ies' / 'ied' of four letters to 'ie', y -> i
// after any consonant but the first letter, 'alli' first in step 2, 'bli' -> 'ble', 'fulli' and
// 'logi', two-letter words left alone and vowel-consonant as *o. The word is w[0..*k), lower case,
// rewritten in place; it never grows by more than the one letter step 1b may add back.

static int fat5__pt_vowel(char c) { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'; }

// whether w[i] is a consonant: not a vowel, and a y only at the start or after a vowel
static int fat5__pt_cons(const char *w, size_t i) {
    size_t j = i;
    int base;
    if (fat5__pt_vowel(w[i])) return 0;
    if (w[i] != 'y') return 1;
    while (j > 0 && w[j - 1] == 'y') j--;      // w[j..i] is a run of y
    base = j == 0 ? 0 : !fat5__pt_vowel(w[j - 1]);  // whether the letter before the run is a consonant
    // the first y of the run is a consonant after a vowel (or at the start); then they alternate
    return ((i - j) % 2 == 0) ? !base : base;
}

// whether w[i] is a consonant, given whether w[i - 1] is (prev; ignored for i = 0): one step of
// a left-to-right pass, linear where fat5__pt_cons at every position would be quadratic on a run of y
static int fat5__pt_cons_next(const char *w, size_t i, int prev) {
    if (fat5__pt_vowel(w[i])) return 0;
    if (w[i] != 'y' || i == 0) return 1;
    return !prev;
}

// m, the number of vowel-consonant sequences of w[0..n)
static int fat5__pt_measure(const char *w, size_t n) {
    int m = 0, c = 1;
    size_t i;
    for (i = 0; i < n; i++) {
        int prev = c;
        c = fat5__pt_cons_next(w, i, prev);
        if (i > 0 && c && !prev) m++;
    }
    return m;
}

static int fat5__pt_has_vowel(const char *w, size_t n) {
    int c = 1;
    size_t i;
    for (i = 0; i < n; i++)
        if (!(c = fat5__pt_cons_next(w, i, c))) return 1;
    return 0;
}

static int fat5__pt_double(const char *w, size_t n) { return n >= 2 && w[n - 1] == w[n - 2] && fat5__pt_cons(w, n - 1); }

// *o: consonant-vowel-consonant, the last not w, x or y; or a two-letter vowel-consonant word
static int fat5__pt_cvc(const char *w, size_t n) {
    if (n >= 3 && fat5__pt_cons(w, n - 3) && !fat5__pt_cons(w, n - 2) && fat5__pt_cons(w, n - 1) &&
        w[n - 1] != 'w' && w[n - 1] != 'x' && w[n - 1] != 'y')
        return 1;
    return n == 2 && !fat5__pt_cons(w, 0) && fat5__pt_cons(w, 1);
}

static int fat5__pt_ends(const char *w, size_t n, const char *suffix) {
    size_t l = strlen(suffix);
    return n >= l && memcmp(w + n - l, suffix, l) == 0;
}

// replaces the last `cut` letters of w[0..*k) by `repl`
static void fat5__pt_set(char *w, size_t *k, size_t cut, const char *repl) {
    size_t l = strlen(repl);
    memcpy(w + *k - cut, repl, l);
    *k = *k - cut + l;
}

// the conditions of the rules of steps 2 to 4, on the stem left by removing the suffix
enum { FAT5__PT_M0, FAT5__PT_M1, FAT5__PT_ION, FAT5__PT_LOGI };
typedef struct fat5__pt_rule {
    const char *suffix, *repl;
    int cond;
} fat5__pt_rule;

// the first rule whose suffix ends the word decides: applied when its condition holds, and no
// later rule is tried either way
static void fat5__pt_rules(char *w, size_t *k, const fat5__pt_rule *r, size_t n_rules) {
    size_t i;
    for (i = 0; i < n_rules; i++) {
        size_t l = strlen(r[i].suffix), stem;
        int ok;
        if (!fat5__pt_ends(w, *k, r[i].suffix)) continue;
        stem = *k - l;
        switch (r[i].cond) {
        case FAT5__PT_M0: ok = fat5__pt_measure(w, stem) > 0; break;
        case FAT5__PT_M1: ok = fat5__pt_measure(w, stem) > 1; break;
        case FAT5__PT_ION: ok = fat5__pt_measure(w, stem) > 1 && (w[stem - 1] == 's' || w[stem - 1] == 't'); break;
        default: ok = fat5__pt_measure(w, stem + 1) > 0; break;   // 'logi': the stem keeps its l
        }
        if (ok) fat5__pt_set(w, k, l, r[i].repl);
        return;
    }
}

static void fat5__pt_step1a(char *w, size_t *k) {
    if (*k == 4 && fat5__pt_ends(w, *k, "ies")) fat5__pt_set(w, k, 3, "ie");
    else if (fat5__pt_ends(w, *k, "sses")) fat5__pt_set(w, k, 4, "ss");
    else if (fat5__pt_ends(w, *k, "ies")) fat5__pt_set(w, k, 3, "i");
    else if (fat5__pt_ends(w, *k, "ss")) return;
    else if (fat5__pt_ends(w, *k, "s")) *k -= 1;
}

static void fat5__pt_step1b(char *w, size_t *k) {
    size_t stem;
    if (fat5__pt_ends(w, *k, "ied")) {
        fat5__pt_set(w, k, 3, *k == 4 ? "ie" : "i");
        return;
    }
    if (fat5__pt_ends(w, *k, "eed")) {
        if (fat5__pt_measure(w, *k - 3) > 0) *k -= 1;
        return;
    }
    if (fat5__pt_ends(w, *k, "ed") && fat5__pt_has_vowel(w, *k - 2)) stem = *k - 2;
    else if (fat5__pt_ends(w, *k, "ing") && fat5__pt_has_vowel(w, *k - 3)) stem = *k - 3;
    else return;
    *k = stem;
    if (fat5__pt_ends(w, *k, "at") || fat5__pt_ends(w, *k, "bl") || fat5__pt_ends(w, *k, "iz")) {
        w[(*k)++] = 'e';
    } else if (fat5__pt_double(w, *k)) {
        char c = w[*k - 1];
        if (c != 'l' && c != 's' && c != 'z') *k -= 1;
    } else if (fat5__pt_measure(w, *k) == 1 && fat5__pt_cvc(w, *k)) {
        w[(*k)++] = 'e';
    }
}

static void fat5__pt_step1c(char *w, size_t *k) {
    if (fat5__pt_ends(w, *k, "y") && *k - 1 > 1 && fat5__pt_cons(w, *k - 2)) w[*k - 1] = 'i';
}

static void fat5__pt_step2(char *w, size_t *k) {
    static const fat5__pt_rule rules[] = {
        {"ational", "ate", FAT5__PT_M0}, {"tional", "tion", FAT5__PT_M0}, {"enci", "ence", FAT5__PT_M0},
        {"anci", "ance", FAT5__PT_M0},   {"izer", "ize", FAT5__PT_M0},    {"bli", "ble", FAT5__PT_M0},
        {"alli", "al", FAT5__PT_M0},     {"entli", "ent", FAT5__PT_M0},   {"eli", "e", FAT5__PT_M0},
        {"ousli", "ous", FAT5__PT_M0},   {"ization", "ize", FAT5__PT_M0}, {"ation", "ate", FAT5__PT_M0},
        {"ator", "ate", FAT5__PT_M0},    {"alism", "al", FAT5__PT_M0},    {"iveness", "ive", FAT5__PT_M0},
        {"fulness", "ful", FAT5__PT_M0}, {"ousness", "ous", FAT5__PT_M0}, {"aliti", "al", FAT5__PT_M0},
        {"iviti", "ive", FAT5__PT_M0},   {"biliti", "ble", FAT5__PT_M0},  {"fulli", "ful", FAT5__PT_M0},
        {"logi", "log", FAT5__PT_LOGI}};
    // 'alli' -> 'al' first, and step 2 again on the result
    while (fat5__pt_ends(w, *k, "alli") && fat5__pt_measure(w, *k - 4) > 0) fat5__pt_set(w, k, 4, "al");
    fat5__pt_rules(w, k, rules, sizeof rules / sizeof rules[0]);
}

static void fat5__pt_step3(char *w, size_t *k) {
    static const fat5__pt_rule rules[] = {
        {"icate", "ic", FAT5__PT_M0}, {"ative", "", FAT5__PT_M0}, {"alize", "al", FAT5__PT_M0},
        {"iciti", "ic", FAT5__PT_M0}, {"ical", "ic", FAT5__PT_M0}, {"ful", "", FAT5__PT_M0},
        {"ness", "", FAT5__PT_M0}};
    fat5__pt_rules(w, k, rules, sizeof rules / sizeof rules[0]);
}

static void fat5__pt_step4(char *w, size_t *k) {
    static const fat5__pt_rule rules[] = {
        {"al", "", FAT5__PT_M1},   {"ance", "", FAT5__PT_M1}, {"ence", "", FAT5__PT_M1},  {"er", "", FAT5__PT_M1},
        {"ic", "", FAT5__PT_M1},   {"able", "", FAT5__PT_M1}, {"ible", "", FAT5__PT_M1},  {"ant", "", FAT5__PT_M1},
        {"ement", "", FAT5__PT_M1}, {"ment", "", FAT5__PT_M1}, {"ent", "", FAT5__PT_M1},  {"ion", "", FAT5__PT_ION},
        {"ou", "", FAT5__PT_M1},   {"ism", "", FAT5__PT_M1},  {"ate", "", FAT5__PT_M1},   {"iti", "", FAT5__PT_M1},
        {"ous", "", FAT5__PT_M1},  {"ive", "", FAT5__PT_M1},  {"ize", "", FAT5__PT_M1}};
    fat5__pt_rules(w, k, rules, sizeof rules / sizeof rules[0]);
}

static void fat5__pt_step5(char *w, size_t *k) {
    if (fat5__pt_ends(w, *k, "e")) {   // 5a
        int m = fat5__pt_measure(w, *k - 1);
        if (m > 1 || (m == 1 && !fat5__pt_cvc(w, *k - 1))) *k -= 1;
    }
    if (fat5__pt_ends(w, *k, "ll") && fat5__pt_measure(w, *k - 1) > 1) *k -= 1;   // 5b
}

// stems the lower-case word w[0..n) in place (w has room for n + 1 bytes); returns its new length
static size_t fat5__porter(char *w, size_t n) {
    static const char *const pool[][2] = {
        {"sky", "sky"},       {"skies", "sky"},     {"dying", "die"},         {"lying", "lie"},
        {"tying", "tie"},     {"news", "news"},     {"innings", "inning"},    {"inning", "inning"},
        {"outings", "outing"}, {"outing", "outing"}, {"cannings", "canning"}, {"canning", "canning"},
        {"howe", "howe"},     {"proceed", "proceed"}, {"exceed", "exceed"},   {"succeed", "succeed"}};
    size_t i, k = n;
    for (i = 0; i < sizeof pool / sizeof pool[0]; i++)
        if (strlen(pool[i][0]) == n && memcmp(w, pool[i][0], n) == 0) {
            k = strlen(pool[i][1]);
            memcpy(w, pool[i][1], k);
            return k;
        }
    if (n <= 2) return n;
    fat5__pt_step1a(w, &k);
    fat5__pt_step1b(w, &k);
    fat5__pt_step1c(w, &k);
    fat5__pt_step2(w, &k);
    fat5__pt_step3(w, &k);
    fat5__pt_step4(w, &k);
    fat5__pt_step5(w, &k);
    return k;
}

FAT5_API size_t fat5_porter_stem(const char *word, size_t len, char *out) {
    size_t i, k;
    for (i = 0; i < len; i++) {
        char c = word[i];
        out[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    k = fat5__porter(out, len);
    out[k] = 0;
    return k;
}

// ---------------------------------------------------------------------------------------------
// SQuAD v1.1: normalize_answer and the token F1

// The normalised answer's words appended to q: Python's lower case, ASCII punctuation removed,
// the words a / an / the (whole runs of Python's \w) removed, split on Python whitespace.
static void fat5__tm_squad_words(fat5__tm *M, const char *s, fat5__tm_seq *q) {
    static const char punct[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    size_t n, i, k, start;
    fat5__sb low, a, b;
    fat5__sb_init(&low, M->ctx);
    fat5__sb_init(&a, M->ctx);
    fat5__sb_init(&b, M->ctx);
    fat5__sb_putn(&low, "", 0);
    fat5__sb_putn(&a, "", 0);
    fat5__sb_putn(&b, "", 0);
    fat5__tm_py_lower(&low, s, strlen(s));
    // punctuation out
    for (i = 0; i < low.len && !low.oom; i++)
        if ((unsigned char)low.buf[i] >= 0x80 || !strchr(punct, low.buf[i])) fat5__sb_putn(&a, low.buf + i, 1);
    // articles out: a run of word characters that is exactly a, an or the becomes a space
    n = a.len;
    for (i = 0; i < n;) {
        uint32_t cp = fat5__tm_cp(a.buf + i, n - i, &k);
        if (!fat5__tm_py_word(cp)) {
            fat5__sb_putn(&b, a.buf + i, k);
            i += k;
            continue;
        }
        start = i;
        while (i < n && fat5__tm_py_word(fat5__tm_cp(a.buf + i, n - i, &k))) i += k;
        if ((i - start == 1 && a.buf[start] == 'a') || (i - start == 2 && memcmp(a.buf + start, "an", 2) == 0) ||
            (i - start == 3 && memcmp(a.buf + start, "the", 3) == 0))
            fat5__sb_putn(&b, " ", 1);
        else fat5__sb_putn(&b, a.buf + start, i - start);
    }
    if (low.oom || a.oom || b.oom) M->oom = 1;
    else fat5__tm_split(M, b.buf, b.len, q);
    fat5__sb_free(&low);
    fat5__sb_free(&a);
    fat5__sb_free(&b);
}

// exact match (0 or 1) and F1 of two normalised answers, as the script computes them
static int fat5__tm_squad_pair(fat5__tm *M, const fat5__tm_seq *pred, const fat5__tm_seq *ref, double *em, double *f1) {
    fat5__tm_seq two[2];
    int64_t same, total;
    double p, r;
    *em = (pred->n == ref->n && (pred->n == 0 || memcmp(pred->id, ref->id, pred->n * sizeof(int32_t)) == 0)) ? 1 : 0;
    two[0] = *pred;
    two[1] = *ref;
    if (!fat5__tm_ngram_match(M, two, 2, 1, &same, &total)) return 0;
    if (same == 0) {
        *f1 = 0;
        return 1;
    }
    p = 1.0 * (double)same / (double)pred->n;
    r = 1.0 * (double)same / (double)ref->n;
    *f1 = (2 * p * r) / (p + r);
    return 1;
}

FAT5_API fat5_status fat5_metric_squad(fat5_ctx *ctx, const char *pred, const char *ref, double *em, double *f1) {
    static const char *const fn = "fat5_metric_squad";
    fat5__tm M;
    fat5__tm_seq a, b;
    fat5_status st;
    double e = 0, f = 0;
    if ((st = fat5__tm_check(ctx, fn, "pred", 0, pred)) != FAT5_OK) return st;
    if ((st = fat5__tm_check(ctx, fn, "ref", 0, ref)) != FAT5_OK) return st;
    fat5__tm_init(&M, ctx);
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    fat5__tm_squad_words(&M, pred, &a);
    fat5__tm_squad_words(&M, ref, &b);
    if (!M.oom) fat5__tm_squad_pair(&M, &a, &b, &e, &f);
    st = M.oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", fn) : FAT5_OK;
    fat5__tm_seq_free(&M, &a);
    fat5__tm_seq_free(&M, &b);
    fat5__tm_free(&M);
    if (st == FAT5_OK) {
        if (em) *em = e;
        if (f1) *f1 = f;
    }
    return st;
}

FAT5_API fat5_status fat5_metric_squad_corpus(fat5_ctx *ctx, const char *const *preds, int64_t n,
                                              const char *const *refs, const int64_t *ref_offsets, double *em,
                                              double *f1) {
    static const char *const fn = "fat5_metric_squad_corpus";
    fat5__tm M;
    fat5_status st;
    double em_sum = 0, f1_sum = 0;
    int64_t i, j;
    if ((st = fat5__tm_check_corpus(ctx, fn, preds, n, refs, ref_offsets)) != FAT5_OK) return st;
    fat5__tm_init(&M, ctx);
    for (i = 0; i < n && !M.oom; i++) {
        int64_t count, first = fat5__tm_refs_of(ref_offsets, i, &count);
        fat5__tm_seq p;
        double best_em = 0, best_f1 = 0;
        memset(&p, 0, sizeof p);
        fat5__tm_squad_words(&M, preds[i], &p);
        for (j = 0; j < count && !M.oom; j++) {
            fat5__tm_seq r;
            double e = 0, f = 0;
            memset(&r, 0, sizeof r);
            fat5__tm_squad_words(&M, refs[first + j], &r);
            if (!M.oom) fat5__tm_squad_pair(&M, &p, &r, &e, &f);
            if (j == 0 || e > best_em) best_em = e;
            if (j == 0 || f > best_f1) best_f1 = f;
            fat5__tm_seq_free(&M, &r);
        }
        em_sum += best_em;
        f1_sum += best_f1;
        fat5__tm_seq_free(&M, &p);
    }
    st = M.oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", fn) : FAT5_OK;
    fat5__tm_free(&M);
    if (st == FAT5_OK) {
        if (em) *em = 100.0 * em_sum / (double)n;
        if (f1) *f1 = 100.0 * f1_sum / (double)n;
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// ROUGE (rouge_score)

// rouge_score's default tokenizer on s[0..n): Python's lower case, every character but a-z 0-9
// a separator (so the only letters outside ASCII that count are those that lower to ASCII: U+212A
// to "k", U+0130 to "i" + U+0307), tokens longer than 3 letters stemmed when stem is set, empty
// tokens dropped
static void fat5__tm_rouge_words(fat5__tm *M, const char *s, size_t n, int stem, fat5__tm_seq *q) {
    fat5__sb w;
    size_t i, k;
    fat5__sb_init(&w, M->ctx);
    for (i = 0; i <= n; i += k) {
        uint32_t cp = 0, lc;
        char c = 0;
        k = 1;
        if (i < n) cp = fat5__tm_cp(s + i, n - i, &k);
        lc = fat5__tm_simple_lower(cp);   // U+0130's full mapping is "i" + U+0307, a separator
        if ((lc >= 'a' && lc <= 'z') || (lc >= '0' && lc <= '9')) c = (char)lc;
        if (c) fat5__sb_putn(&w, &c, 1);
        if (!c || cp == 0x130 || i == n) {
            if (w.oom) break;
            if (w.len) {
                size_t len = w.len;
                if (stem && len > 3) {
                    fat5__sb_putn(&w, "", 0);   // the one byte stemming may add
                    fat5__sb_reserve(&w, 1);
                    if (w.oom) break;
                    len = fat5__porter(w.buf, len);
                }
                if (len) fat5__tm_push(M, q, w.buf, len);
            }
            w.len = 0;
        }
    }
    if (w.oom) M->oom = 1;
    fat5__sb_free(&w);
}

// the longest common subsequence table of a and b, (a->n + 1) x (b->n + 1); NULL when out of memory
static int32_t *fat5__tm_lcs_table(fat5__tm *M, const fat5__tm_seq *a, const fat5__tm_seq *b) {
    size_t cols = b->n + 1, cells, i, j;
    int32_t *t = fat5__mul_ok(a->n + 1, cols, &cells) ? FAT5__CAST(int32_t *, fat5__calloc(M->ctx, cells, sizeof *t)) : NULL;
    if (!t) {
        M->oom = 1;
        return NULL;
    }
    for (i = 1; i <= a->n; i++)
        for (j = 1; j <= b->n; j++) {
            int32_t up = t[(i - 1) * cols + j], left = t[i * cols + j - 1];
            t[i * cols + j] = a->id[i - 1] == b->id[j - 1] ? t[(i - 1) * cols + j - 1] + 1 : (up > left ? up : left);
        }
    return t;
}

// the length of the longest common subsequence of a and b, in O(b->n) memory
static int64_t fat5__tm_lcs_len(fat5__tm *M, const fat5__tm_seq *a, const fat5__tm_seq *b) {
    size_t i, j;
    int64_t *row = FAT5__CAST(int64_t *, fat5__calloc(M->ctx, b->n + 1, sizeof *row)), r;
    if (!row) {
        M->oom = 1;
        return 0;
    }
    for (i = 1; i <= a->n; i++) {
        int64_t diag = 0;   // row[j - 1] of the previous row
        for (j = 1; j <= b->n; j++) {
            int64_t up = row[j], v = a->id[i - 1] == b->id[j - 1] ? diag + 1 : (up > row[j - 1] ? up : row[j - 1]);
            diag = up;
            row[j] = v;
        }
    }
    r = row[b->n];
    fat5__free(M->ctx, row);
    return r;
}

// marks in mark[0..ref->n) the ref positions of the LCS of ref and can that rouge_score's
// backtracking picks (a match when the tokens are equal; else left when that cell is larger, up
// otherwise)
static void fat5__tm_lcs_mark(fat5__tm *M, const fat5__tm_seq *ref, const fat5__tm_seq *can, unsigned char *mark) {
    size_t i = ref->n, j = can->n, cols = can->n + 1;
    int32_t *t = fat5__tm_lcs_table(M, ref, can);
    if (!t) return;
    while (i > 0 && j > 0) {
        if (ref->id[i - 1] == can->id[j - 1]) {
            mark[i - 1] = 1;
            i--;
            j--;
        } else if (t[i * cols + j - 1] > t[(i - 1) * cols + j]) {
            j--;
        } else {
            i--;
        }
    }
    fat5__free(M->ctx, t);
}

// the lines of s that rougeLsum scores: s split on "\n", empty lines dropped, each tokenized;
// *n_lines gets their number
static fat5__tm_seq *fat5__tm_rouge_lines(fat5__tm *M, const char *s, int stem, size_t *n_lines) {
    size_t n = strlen(s), i, count = 0, at = 0, start = 0;
    fat5__tm_seq *L;
    *n_lines = 0;
    for (i = 0; i <= n; i++)
        if (i == n || s[i] == '\n') {
            if (i > start) count++;
            start = i + 1;
        }
    L = FAT5__CAST(fat5__tm_seq *, fat5__calloc(M->ctx, count ? count : 1, sizeof *L));
    if (!L) {
        M->oom = 1;
        return NULL;
    }
    start = 0;
    for (i = 0; i <= n; i++)
        if (i == n || s[i] == '\n') {
            if (i > start) fat5__tm_rouge_words(M, s + start, i - start, stem, &L[at++]);
            start = i + 1;
        }
    *n_lines = count;
    return L;
}

// summary-level LCS (rougeLsum) of reference lines R and candidate lines C
static fat5_rouge_score fat5__tm_rouge_lsum(fat5__tm *M, const fat5__tm_seq *R, size_t nr, const fat5__tm_seq *C,
                                            size_t nc) {
    fat5_rouge_score s = {0, 0, 0};
    size_t m = 0, n = 0, i, j, longest = 0;
    int64_t *cnt_r, *cnt_c, hits = 0;
    unsigned char *mark;
    for (i = 0; i < nr; i++) {
        m += R[i].n;
        if (R[i].n > longest) longest = R[i].n;
    }
    for (i = 0; i < nc; i++) n += C[i].n;
    if (!nr || !nc || !m || !n) return s;
    cnt_r = FAT5__CAST(int64_t *, fat5__calloc(M->ctx, M->n_tok, sizeof *cnt_r));
    cnt_c = FAT5__CAST(int64_t *, fat5__calloc(M->ctx, M->n_tok, sizeof *cnt_c));
    mark = FAT5__CAST(unsigned char *, fat5__calloc(M->ctx, longest, 1));
    if (!cnt_r || !cnt_c || !mark) {
        M->oom = 1;
    } else {
        for (i = 0; i < nr; i++)
            for (j = 0; j < R[i].n; j++) cnt_r[R[i].id[j]]++;
        for (i = 0; i < nc; i++)
            for (j = 0; j < C[i].n; j++) cnt_c[C[i].id[j]]++;
        for (i = 0; i < nr && !M->oom; i++) {
            // the union of the LCS positions of this reference line with every candidate line
            memset(mark, 0, longest);
            for (j = 0; j < nc && !M->oom; j++) fat5__tm_lcs_mark(M, &R[i], &C[j], mark);
            for (j = 0; j < R[i].n; j++) {
                int32_t t = R[i].id[j];
                if (mark[j] && cnt_c[t] > 0 && cnt_r[t] > 0) {
                    hits++;
                    cnt_c[t]--;
                    cnt_r[t]--;
                }
            }
        }
        s.recall = (double)hits / (double)m;
        s.precision = (double)hits / (double)n;
        s.fmeasure = fat5__tm_fmeasure(s.precision, s.recall);
    }
    fat5__free(M->ctx, cnt_r);
    fat5__free(M->ctx, cnt_c);
    fat5__free(M->ctx, mark);
    return s;
}

// rouge1, rouge2, rougeL and rougeLsum of one prediction against one reference
static void fat5__tm_rouge_pair(fat5__tm *M, const char *pred, const char *ref, int stem, fat5_rouge *out) {
    fat5__tm_seq t[2];
    fat5__tm_seq *RL = NULL, *CL = NULL;
    size_t nr = 0, nc = 0, i;
    int order;
    memset(out, 0, sizeof *out);
    memset(t, 0, sizeof t);
    fat5__tm_rouge_words(M, pred, strlen(pred), stem, &t[0]);
    fat5__tm_rouge_words(M, ref, strlen(ref), stem, &t[1]);
    for (order = 1; order <= 2 && !M->oom; order++) {
        fat5_rouge_score *s = order == 1 ? &out->rouge1 : &out->rouge2;
        int64_t inter, n_pred, n_ref;
        if (!fat5__tm_ngram_match(M, t, 2, order, &inter, &n_pred)) break;
        n_ref = t[1].n >= (size_t)order ? (int64_t)(t[1].n - (size_t)order + 1) : 0;
        s->precision = (double)inter / (double)(n_pred > 1 ? n_pred : 1);
        s->recall = (double)inter / (double)(n_ref > 1 ? n_ref : 1);
        s->fmeasure = fat5__tm_fmeasure(s->precision, s->recall);
    }
    if (!M->oom && t[0].n && t[1].n) {
        int64_t lcs = fat5__tm_lcs_len(M, &t[1], &t[0]);
        out->rougeL.precision = (double)lcs / (double)t[0].n;
        out->rougeL.recall = (double)lcs / (double)t[1].n;
        out->rougeL.fmeasure = fat5__tm_fmeasure(out->rougeL.precision, out->rougeL.recall);
    }
    if (!M->oom) RL = fat5__tm_rouge_lines(M, ref, stem, &nr);
    if (!M->oom) CL = fat5__tm_rouge_lines(M, pred, stem, &nc);
    if (!M->oom) out->rougeLsum = fat5__tm_rouge_lsum(M, RL, nr, CL, nc);
    for (i = 0; RL && i < nr; i++) fat5__tm_seq_free(M, &RL[i]);
    for (i = 0; CL && i < nc; i++) fat5__tm_seq_free(M, &CL[i]);
    fat5__free(M->ctx, RL);
    fat5__free(M->ctx, CL);
    fat5__tm_seq_free(M, &t[0]);
    fat5__tm_seq_free(M, &t[1]);
}

FAT5_API fat5_status fat5_metric_rouge(fat5_ctx *ctx, const char *pred, const char *ref, int use_stemmer,
                                       fat5_rouge *out) {
    static const char *const fn = "fat5_metric_rouge";
    fat5__tm M;
    fat5_rouge r;
    fat5_status st;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if ((st = fat5__tm_check(ctx, fn, "pred", 0, pred)) != FAT5_OK) return st;
    if ((st = fat5__tm_check(ctx, fn, "ref", 0, ref)) != FAT5_OK) return st;
    fat5__tm_init(&M, ctx);
    fat5__tm_rouge_pair(&M, pred, ref, use_stemmer, &r);
    st = M.oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", fn) : FAT5_OK;
    fat5__tm_free(&M);
    if (st == FAT5_OK) *out = r;
    return st;
}

// the k-th score of r: rouge1, rouge2, rougeL, rougeLsum
static fat5_rouge_score *fat5__tm_rouge_kind(fat5_rouge *r, int k) {
    switch (k) {
    case 0: return &r->rouge1;
    case 1: return &r->rouge2;
    case 2: return &r->rougeL;
    default: return &r->rougeLsum;
    }
}

FAT5_API fat5_status fat5_metric_rouge_corpus(fat5_ctx *ctx, const char *const *preds, int64_t n,
                                              const char *const *refs, const int64_t *ref_offsets, int use_stemmer,
                                              fat5_rouge *out) {
    static const char *const fn = "fat5_metric_rouge_corpus";
    fat5__tm M;
    fat5_rouge sum;
    fat5_status st;
    int64_t i, j;
    int k;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if ((st = fat5__tm_check_corpus(ctx, fn, preds, n, refs, ref_offsets)) != FAT5_OK) return st;
    fat5__tm_init(&M, ctx);
    memset(&sum, 0, sizeof sum);
    for (i = 0; i < n && !M.oom; i++) {
        int64_t count, first = fat5__tm_refs_of(ref_offsets, i, &count);
        fat5_rouge best, r;
        memset(&best, 0, sizeof best);
        for (j = 0; j < count && !M.oom; j++) {
            fat5__tm_rouge_pair(&M, preds[i], refs[first + j], use_stemmer, &r);
            // each kind from the reference with the largest F-measure (the first on a tie)
            for (k = 0; k < 4; k++) {
                fat5_rouge_score *b = fat5__tm_rouge_kind(&best, k), *c = fat5__tm_rouge_kind(&r, k);
                if (j == 0 || c->fmeasure > b->fmeasure) *b = *c;
            }
        }
        for (k = 0; k < 4; k++) {
            fat5_rouge_score *acc = fat5__tm_rouge_kind(&sum, k), *b = fat5__tm_rouge_kind(&best, k);
            acc->precision += b->precision;
            acc->recall += b->recall;
            acc->fmeasure += b->fmeasure;
        }
    }
    st = M.oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", fn) : FAT5_OK;
    fat5__tm_free(&M);
    if (st == FAT5_OK) {
        for (k = 0; k < 4; k++) {
            fat5_rouge_score *acc = fat5__tm_rouge_kind(&sum, k);
            acc->precision /= (double)n;
            acc->recall /= (double)n;
            acc->fmeasure /= (double)n;
        }
        *out = sum;
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// BLEU (sacrebleu)

// s with every (non-overlapping, left to right) occurrence of `from` replaced by `to`, as Python's
// str.replace; in b (cleared first)
static void fat5__tm_replace(fat5__sb *b, const char *s, size_t n, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to), i = 0;
    b->len = 0;
    fat5__sb_putn(b, "", 0);
    while (i < n) {
        if (i + fl <= n && memcmp(s + i, from, fl) == 0) {
            fat5__sb_putn(b, to, tl);
            i += fl;
        } else {
            fat5__sb_putn(b, s + i, 1);
            i++;
        }
    }
}

// *nxt = *cur with from replaced by to; then the two swap, so *cur holds the result
static void fat5__tm_replace_step(fat5__sb **cur, fat5__sb **nxt, const char *from, const char *to) {
    fat5__sb *t = *cur;
    fat5__tm_replace(*nxt, (*cur)->buf, (*cur)->len, from, to);
    *cur = *nxt;
    *nxt = t;
}

static int fat5__tm_digit(char c) { return c >= '0' && c <= '9'; }

// the 13a tokenizer's first rule: the ASCII punctuation but ' , - . gets spaces around it
static int fat5__tm_13a_punct(char c) {
    unsigned char u = (unsigned char)c;
    return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
           (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == 0x2F;
}

// One of the 13a tokenizer's three rules on pairs of characters (x, y), scanning left to right
// and consuming a matched pair whole, as re.sub does: rule 0 ([^0-9])([\.,]) -> 'x y ', rule 1
// ([\.,])([^0-9]) -> ' x y', rule 2 ([0-9])(-) -> 'x y '. *cur becomes the result (*nxt scratch).
static void fat5__tm_13a_pairs(fat5__sb **cur, fat5__sb **nxt, int rule) {
    fat5__sb *c = *cur, *x = *nxt;
    size_t i;
    x->len = 0;
    fat5__sb_putn(x, "", 0);
    for (i = 0; i < c->len && !c->oom;) {
        char u = c->buf[i], v = i + 1 < c->len ? c->buf[i + 1] : 0;
        int hit = i + 1 < c->len &&
                  (rule == 0   ? !fat5__tm_digit(u) && (v == '.' || v == ',')
                   : rule == 1 ? (u == '.' || u == ',') && !fat5__tm_digit(v)
                               : fat5__tm_digit(u) && v == '-');
        if (hit) {
            char four[4];
            four[0] = rule == 1 ? ' ' : u;
            four[1] = rule == 1 ? u : ' ';
            four[2] = rule == 1 ? ' ' : v;
            four[3] = rule == 1 ? v : ' ';
            fat5__sb_putn(x, four, 4);
            i += 2;
        } else fat5__sb_putn(x, c->buf + i++, 1);
    }
    *cur = x;
    *nxt = c;
}

// sacrebleu's segment preprocessing (rstrip, then tokenizer 13a) of s, its words appended to q.
// The regular expressions work on code points; on valid UTF-8 their byte-wise application below
// gives the same text, since every character they look for or insert is ASCII and none of their
// conditions can hold on a byte inside a multi-byte character.
static void fat5__tm_13a_words(fat5__tm *M, const char *s, fat5__tm_seq *q) {
    size_t n = strlen(s), end = 0, i, k;
    fat5__sb a, b, *cur = &a, *nxt = &b, *t;
    fat5__sb_init(&a, M->ctx);
    fat5__sb_init(&b, M->ctx);
    // rstrip (Python whitespace)
    for (i = 0; i < n; i += k)
        if (!fat5__tm_py_space(fat5__tm_cp(s + i, n - i, &k))) end = i + k;
    fat5__tm_replace(cur, s, end, "<skipped>", "");
    fat5__tm_replace_step(&cur, &nxt, "-\n", "");
    fat5__tm_replace_step(&cur, &nxt, "\n", " ");
    if (!cur->oom && memchr(cur->buf, '&', cur->len)) {
        fat5__tm_replace_step(&cur, &nxt, "&quot;", "\"");
        fat5__tm_replace_step(&cur, &nxt, "&amp;", "&");
        fat5__tm_replace_step(&cur, &nxt, "&lt;", "<");
        fat5__tm_replace_step(&cur, &nxt, "&gt;", ">");
    }
    // ' ' + line + ' ', then ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
    nxt->len = 0;
    fat5__sb_putn(nxt, " ", 1);
    for (i = 0; i < cur->len && !cur->oom; i++) {
        if (fat5__tm_13a_punct(cur->buf[i])) {
            char three[3];
            three[0] = ' ';
            three[1] = cur->buf[i];
            three[2] = ' ';
            fat5__sb_putn(nxt, three, 3);
        } else fat5__sb_putn(nxt, cur->buf + i, 1);
    }
    fat5__sb_putn(nxt, " ", 1);
    t = cur;
    cur = nxt;
    nxt = t;
    // ([^0-9])([\.,]) -> '\1 \2 ', ([\.,])([^0-9]) -> ' \1 \2', ([0-9])(-) -> '\1 \2 '
    fat5__tm_13a_pairs(&cur, &nxt, 0);
    fat5__tm_13a_pairs(&cur, &nxt, 1);
    fat5__tm_13a_pairs(&cur, &nxt, 2);
    if (a.oom || b.oom) M->oom = 1;
    else fat5__tm_split(M, cur->buf, cur->len, q);
    fat5__sb_free(&a);
    fat5__sb_free(&b);
}

FAT5_API fat5_status fat5_metric_bleu(fat5_ctx *ctx, const char *const *preds, int64_t n, const char *const *refs,
                                      const int64_t *ref_offsets, fat5_bleu *out) {
    static const char *const fn = "fat5_metric_bleu";
    fat5__tm M;
    fat5_bleu r;
    fat5_status st;
    fat5__tm_seq *seqs = NULL;
    int64_t i, j, most = 1;
    int order, any = 0;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: out is NULL", fn);
    if ((st = fat5__tm_check_corpus(ctx, fn, preds, n, refs, ref_offsets)) != FAT5_OK) return st;
    for (i = 0; ref_offsets && i < n; i++)
        if (ref_offsets[i + 1] - ref_offsets[i] > most) most = ref_offsets[i + 1] - ref_offsets[i];
    if (most > INT32_MAX - 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: too many references", fn);
    memset(&r, 0, sizeof r);
    fat5__tm_init(&M, ctx);
    seqs = FAT5__CAST(fat5__tm_seq *, fat5__calloc(ctx, (size_t)most + 1, sizeof *seqs));
    if (!seqs) M.oom = 1;
    for (i = 0; i < n && !M.oom; i++) {
        // seqs[0]: the hypothesis; seqs[1..count]: its references
        int64_t count, first = fat5__tm_refs_of(ref_offsets, i, &count), closest = -1, diff = -1;
        int64_t hyp_len;
        fat5__tm_13a_words(&M, preds[i], &seqs[0]);
        for (j = 0; j < count; j++) fat5__tm_13a_words(&M, refs[first + j], &seqs[j + 1]);
        hyp_len = (int64_t)seqs[0].n;
        for (j = 0; j < count; j++) {   // the closest reference length, the shorter on a tie
            int64_t len = (int64_t)seqs[j + 1].n, d = hyp_len > len ? hyp_len - len : len - hyp_len;
            if (diff < 0 || d < diff || (d == diff && len < closest)) {
                diff = d;
                closest = len;
            }
        }
        r.sys_len += hyp_len;
        r.ref_len += closest;
        for (order = 1; order <= 4 && !M.oom; order++) {
            int64_t clipped, total;
            if (!fat5__tm_ngram_match(&M, seqs, (int)count + 1, order, &clipped, &total)) break;
            r.correct[order - 1] += clipped;
            r.total[order - 1] += total;
        }
        for (j = 0; j <= count; j++) fat5__tm_seq_free(&M, &seqs[j]);
    }
    st = M.oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", fn) : FAT5_OK;
    fat5__free(ctx, seqs);
    fat5__tm_free(&M);
    if (st != FAT5_OK) return st;
    // sacrebleu's compute_bleu with smooth_method 'exp'
    r.bp = 1.0;
    if (r.sys_len < r.ref_len) r.bp = r.sys_len > 0 ? exp(1 - (double)r.ref_len / (double)r.sys_len) : 0.0;
    for (order = 0; order < 4; order++) any |= r.correct[order] != 0;
    if (any) {
        double smooth = 1.0, log_sum = 0.0;
        for (order = 0; order < 4; order++) {
            if (r.total[order] == 0) break;
            if (r.correct[order] == 0) {
                smooth *= 2;
                r.precisions[order] = 100. / (smooth * (double)r.total[order]);
            } else {
                r.precisions[order] = 100. * (double)r.correct[order] / (double)r.total[order];
            }
        }
        for (order = 0; order < 4; order++)   // a zero precision counts as log -9999999999
            log_sum += r.precisions[order] == 0.0 ? -9999999999.0 : log(r.precisions[order]);
        r.score = r.bp * exp(log_sum / 4);
    }
    *out = r;
    return FAT5_OK;
}
