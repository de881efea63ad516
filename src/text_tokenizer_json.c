// =============================================================================================
// ==[8.4] text: tokenizer.json ==
// A Hugging Face tokenizer.json read and run as the `tokenizers` library runs it (added tokens
// split off the raw text, then normalizers, pre-tokenizers, the model, the post-processor;
// decoders on the way back), over the vocabulary, tries and Unigram lattice of section [8.3],
// whose public calls (fat5_tokenize, ...) come here for tokenizer.json files.

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

static fat5_status fat5__hf_normalize(fat5_tokenizer *t, const char *s, size_t n, uint32_t orig0, int edges,
                                      fat5__tbuf *out, fat5__ubuf *orig, const uint32_t *x, fat5__ubuf *xout);
static int32_t fat5__tokenizer_text_id(const fat5_tokenizer *t, const char *text);
static void fat5__hf_cut_setup(fat5_tokenizer *t);

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

// the double nearest 10^k, 0 <= k <= 308 (exact up to 10^22; past it as strtod reads "1eK")
static double fat5__tj_pow10(int k) {
    double p = 1;
    char buf[16];
    int i;
    if (k <= 22) {
        for (i = 0; i < k; i++) p *= 10;
        return p;
    }
    snprintf(buf, sizeof buf, "1e%d", k);
    return strtod(buf, NULL);
}

// A validated JSON number s as `tokenizers` reads it into an f64 (a Unigram score): serde_json's
// default parse (without its float_roundtrip feature), which is not always the nearest double
// (8,334 of the 32,100 scores of the published T5 tokenizer.json land an ulp or two away, enough
// to break, one way or the other, sums that the nearest doubles would tie). The digits accumulate
// into a u64 significand while it does not overflow; integer digits past that raise the decimal
// exponent by one each, fraction digits past that are dropped. The significand, rounded to a
// double, is then multiplied by 10^exp or divided by 10^-exp (the nearest doubles; by 1e308 first
// while -exp > 308). A plain integer (no '.', no exponent, fitting a u64) is rounded to a double
// at once. An exponent past i32 gives a signed zero when negative or when the significand is 0.
// 0 where serde_json refuses the number (its value overflows a double).
static int fat5__tj_serde_f64(const char *s, double *out) {
    const uint64_t cap = UINT64_MAX / 10;
    const unsigned last = (unsigned)(UINT64_MAX % 10);
    uint64_t m = 0;
    int64_t e = 0;
    int neg = 0, plain = 1;
    double f;
    if (*s == '-') neg = 1, s++;
    for (; *s >= '0' && *s <= '9'; s++) {   // the integer digits the u64 holds
        unsigned d = (unsigned)(*s - '0');
        if (m > cap || (m == cap && d > last)) break;
        m = m * 10 + d;
    }
    for (; *s >= '0' && *s <= '9'; s++) e++, plain = 0;   // integer digits past them
    if (*s == '.') {
        plain = 0;
        for (s++; *s >= '0' && *s <= '9'; s++) {
            unsigned d = (unsigned)(*s - '0');
            if (m > cap || (m == cap && d > last)) break;
            m = m * 10 + d;
            e--;
        }
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        int eneg = 0;
        int64_t x = 0;
        plain = 0;
        s++;
        if (*s == '+' || *s == '-') eneg = *s++ == '-';
        for (; *s >= '0' && *s <= '9'; s++) {
            if (x > INT32_MAX / 10 || (x == INT32_MAX / 10 && *s - '0' > INT32_MAX % 10)) {   // the exponent overflows an i32
                if (m != 0 && !eneg) return 0;
                *out = neg ? -0.0 : 0.0;
                return 1;
            }
            x = x * 10 + (*s - '0');
        }
        e = eneg ? e - x : e + x;
        if (e > INT32_MAX) e = INT32_MAX;   // serde_json's saturating i32 sum
        if (e < INT32_MIN) e = INT32_MIN;
    }
    f = (double)m;
    if (!plain)
        for (;;) {
            int64_t a = e < 0 ? -e : e;
            if (a <= 308) {
                if (e >= 0) f *= fat5__tj_pow10((int)a);
                else f /= fat5__tj_pow10((int)a);
                break;
            }
            if (f == 0) break;
            if (e >= 0) return 0;
            f /= 1e308;
            e += 308;
        }
    if (f == HUGE_VAL) return 0;
    *out = neg ? -f : f;
    return 1;
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
            if (!p || p->type != FAT5__J_STRING || !sc || sc->type != FAT5__J_NUMBER || sc->next)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab[%lld] must be [piece, score]", what, (long long)i);
            if (!fat5__tj_serde_f64(sc->str, &v))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab[%lld]: the score %.40s is out of range", what,
                                 (long long)i, sc->str);
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
    if (!strcmp(ty, "ByteLevel")) {   // spans only (trim_offsets); ids unchanged
        fat5_status st;
        int trim = 1, pre = 1;
        if ((st = fat5__tj_bool(t->ctx, what, pp, "trim_offsets", 1, &trim)) ||
            (st = fat5__tj_bool(t->ctx, what, pp, "add_prefix_space", 1, &pre)))
            return st;
        if (trim) t->bl_trim = pre ? 2 : 1;
        return FAT5_OK;
    }
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
            st = fat5__hf_normalize(t, t->pool.p + a->off, a->len, 0, FAT5__SEG_START | FAT5__SEG_END, &t->s2, &t->o2, NULL, NULL);
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
    fat5__hf_cut_setup(t);
    st = fat5__tok_automata(t, 0);
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

// appends bytes with one original offset each (orig[i] when o is not NULL, else o0 for all); when
// xb is not NULL (spans wanted), their spans as well: x's (start, end) pairs, or (xs, xe) for all
static int fat5__emit(fat5_tokenizer *t, fat5__tbuf *b, fat5__ubuf *ob, const char *s, size_t n, const uint32_t *o,
                      uint32_t o0, fat5__ubuf *xb, const uint32_t *x, uint32_t xs, uint32_t xe) {
    size_t i;
    if (!fat5__tbuf_put(t->ctx, b, s, n)) return 0;
    if (o) {
        if (!fat5__ubuf_append(t->ctx, ob, o, n)) return 0;
    } else {
        if (!fat5__grow(t->ctx, (void **)&ob->p, &ob->cap, ob->n + n, sizeof(uint32_t))) return 0;
        for (i = 0; i < n; i++) ob->p[ob->n + i] = o0;
        ob->n += n;
    }
    if (!xb) return 1;
    if (x) return fat5__ubuf_append(t->ctx, xb, x, 2 * n);
    if (!fat5__grow(t->ctx, (void **)&xb->p, &xb->cap, xb->n + 2 * n, sizeof(uint32_t))) return 0;
    for (i = 0; i < n; i++) {
        xb->p[xb->n + 2 * i] = xs;
        xb->p[xb->n + 2 * i + 1] = xe;
    }
    xb->n += 2 * n;
    return 1;
}
static int fat5__split_push(fat5_tokenizer *t, fat5__ubuf *sp, size_t off, size_t len, uint32_t shift, uint32_t tok) {
    return fat5__ubuf_push(t->ctx, sp, (uint32_t)off) && fat5__ubuf_push(t->ctx, sp, (uint32_t)len) &&
           fat5__ubuf_push(t->ctx, sp, shift) && fat5__ubuf_push(t->ctx, sp, tok);
}

// Added tokens in s[0..n): leftmost-longest matches of the trie, filtered as tokenizers does
// (single_word needs non-word characters around; lstrip / rstrip take the spaces beside). Writes
// (start, end, index or FAT5__NOTOK) triples covering s to out. r: tr's automaton (empty: walk tr).
static int fat5__hf_added_split(fat5_tokenizer *t, const fat5__trie *tr, const fat5__rac *r, const char *s, size_t n,
                                fat5__ubuf *out) {
    size_t pos = 0, last = 0;
    out->n = 0;
    if (r->trie.node && n) {   // long added tokens: the longest at each position through the automaton
        if (!fat5__grow(t->ctx, (void **)&t->ustate.p, &t->ustate.cap, n, sizeof(uint32_t))) return 0;
        fat5__rac_states(r, s, 0, n, n, t->ustate.p, &t->work);
    }
    while (tr->node && pos < n) {
        int32_t idx;
        size_t k = r->trie.node ? fat5__rac_longest(r, t->ustate.p[pos], &idx)
                                : fat5__trie_longest(tr, s + pos, n - pos, &idx, &t->work);
        size_t start = pos, stop;
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

// Spans through a normalizer, as tokenizers' NormalizedString::transform aligns its new text: a
// list of (character, change) over the old text, read with a cursor. A character with change
// <= 0 replaces the character at the cursor (whose span it takes) and -change more are removed
// after it; a character with change 1 is inserted with the span of the character before the
// cursor ((seg0, seg0) at the start). The last entry stays pending, for Precompiled's rule that
// changes the previous entry when a rule's replacement is empty.
typedef struct fat5__xt {
    const char *s;          // the old text, n bytes, its spans x (pairs per byte)
    const uint32_t *x;
    size_t n, idx;          // the cursor
    uint32_t seg0;
    int has;                // an entry is pending
    uint32_t cp;
    long change;
} fat5__xt;

static void fat5__xt_init(fat5__xt *c, const char *s, size_t n, const uint32_t *x, uint32_t seg0) {
    c->s = s;
    c->n = n;
    c->x = x;
    c->idx = 0;
    c->seg0 = seg0;
    c->has = 0;
    c->cp = 0;
    c->change = 0;
}

// the cursor past one character of the old text (when any is left)
static void fat5__xt_skip(fat5__xt *c) {
    size_t l;
    if (c->idx >= c->n) return;
    l = fat5__utf8_len(c->s + c->idx, c->n - c->idx);
    c->idx += l ? l : 1;
}

// applies one entry: its character's bytes' spans appended to xb
static int fat5__xt_apply(fat5_tokenizer *t, fat5__xt *c, fat5__ubuf *xb, uint32_t cp, long change) {
    char u[4];
    size_t k = fat5__utf8_put(u, cp), i;
    uint32_t xs, xe;
    long r;
    if (change > 0) {
        xs = xe = c->seg0;
        if (c->idx >= 1 && c->n) {
            size_t j = (c->idx <= c->n ? c->idx : c->n) - 1;
            xs = c->x[2 * j];
            xe = c->x[2 * j + 1];
        }
    } else {
        size_t j = c->idx < c->n ? c->idx : c->n - 1;
        xs = xe = c->seg0;
        if (c->n) {
            xs = c->x[2 * j];
            xe = c->x[2 * j + 1];
        }
        fat5__xt_skip(c);
        for (r = change; r < 0; r++) fat5__xt_skip(c);
    }
    if (!fat5__grow(t->ctx, (void **)&xb->p, &xb->cap, xb->n + 2 * k, sizeof(uint32_t))) return 0;
    for (i = 0; i < k; i++) {
        xb->p[xb->n++] = xs;
        xb->p[xb->n++] = xe;
    }
    return 1;
}

static int fat5__xt_flush(fat5_tokenizer *t, fat5__xt *c, fat5__ubuf *xb) {
    int ok = !c->has || fat5__xt_apply(t, c, xb, c->cp, c->change);
    c->has = 0;
    return ok;
}

static int fat5__xt_push(fat5_tokenizer *t, fat5__xt *c, fat5__ubuf *xb, uint32_t cp, long change) {
    if (!fat5__xt_flush(t, c, xb)) return 0;
    c->has = 1;
    c->cp = cp;
    c->change = change;
    return 1;
}

static size_t fat5__nchars(const char *s, size_t n) {
    size_t i = 0, k = 0, l;
    while (i < n) {
        l = fat5__utf8_len(s + i, n - i);
        i += l ? l : 1;
        k++;
    }
    return k;
}

// Precompiled's entries for a rule that rewrites old[0..on) as rep: rep's characters replace the
// old ones in order; extra ones are inserted (change 1), missing ones removed by the last (or,
// when rep is empty, by the entry before)
static int fat5__xt_rule(fat5_tokenizer *t, fat5__xt *c, fat5__ubuf *xb, const char *old, size_t on, const char *rep) {
    long oc = (long)fat5__nchars(old, on), nc, diff, k = 0;
    size_t rn = strlen(rep), i = 0, l;
    nc = (long)fat5__nchars(rep, rn);
    diff = nc - oc;
    while (i < rn) {
        uint32_t cp = fat5__utf8_cp(rep + i, rn - i, &l);
        long ch = diff > 0 && k >= nc - diff ? 1 : 0;
        if (diff < 0 && k == nc - 1) ch += diff;
        if (!fat5__xt_push(t, c, xb, cp, ch)) return 0;
        i += l ? l : 1;
        k++;
    }
    if (nc == 0 && diff < 0 && c->has) c->change += diff;
    return 1;
}

// The entries of one NFx chunk s[0..n) as tokenizers' normalization makes them: each character's
// decomposition (its first code point change 0, the others 1), the marks between two starters
// sorted stably by class, then (NFC, NFKC) composed, a composite's change the sum of its two
// parts' less one. Applied through c; 0 (nothing applied) when they do not spell want[0..wn)
// (fat5__unorm's result), or a run of marks is over 64 long: the caller then gives the whole
// chunk's span to each of its bytes. -1: out of memory.
static int fat5__xt_nfx(fat5_tokenizer *t, fat5__xt *c, fat5__ubuf *xb, int form, const char *s, size_t n,
                        const char *want, size_t wn) {
    fat5__ubuf *e = &t->om;   // scratch (s2's map is in t->xm by now): (cp, class, change) triples
    int compat = form == FAT5__NFKC || form == FAT5__NFKD, compose = form == FAT5__NFC || form == FAT5__NFKC;
    size_t i = 0, l, m, j, k, run, w = 0, o = 0;
    uint32_t d[FAT5__UC_MAXDEC], kc = 0, x;
    long kch = 0, last = -1;
    int has_k = 0;
    size_t om_keep = e->n;
    while (i < n) {
        uint32_t cp = fat5__utf8_cp(s + i, n - i, &l);
        size_t nd = fat5__uc_decompose(cp, compat, d);
        for (j = 0; j < nd; j++)
            if (!fat5__ubuf_push(t->ctx, e, d[j]) || !fat5__ubuf_push(t->ctx, e, fat5__uc_cc(d[j])) ||
                !fat5__ubuf_push(t->ctx, e, j ? 1u : 0u))
                return -1;
        i += l ? l : 1;
    }
    m = (e->n - om_keep) / 3;
    {
        uint32_t *E = e->p + om_keep;
        for (j = 0; j < m; j = k) {   // stable sort of each run of marks by class
            for (k = j; k < m && E[3 * k + 1]; k++) {}
            if (k == j) {
                k = j + 1;
                continue;
            }
            if ((run = k - j) > 64) goto fallback;
            {
                size_t p, q;
                for (p = j + 1; p < k; p++)
                    for (q = p; q > j && E[3 * (q - 1) + 1] > E[3 * q + 1]; q--) {
                        uint32_t tmp[3];
                        memcpy(tmp, E + 3 * q, sizeof tmp);
                        memcpy(E + 3 * q, E + 3 * (q - 1), sizeof tmp);
                        memcpy(E + 3 * (q - 1), tmp, sizeof tmp);
                    }
            }
        }
        // the entries in place (composition only shortens the list): E[3 o ..] the output
        for (j = 0; j < m; j++) {
            uint32_t ch = E[3 * j], cls = E[3 * j + 1];
            long chg = (long)(int32_t)E[3 * j + 2];
            if (!compose) {
                E[3 * o] = ch;
                E[3 * o + 2] = (uint32_t)(int32_t)chg;
                o++;
                continue;
            }
            if (!has_k) {
                if (cls) {
                    E[3 * o] = ch;
                    E[3 * o + 2] = (uint32_t)(int32_t)chg;
                    o++;
                } else {
                    has_k = 1;
                    kc = ch;
                    kch = chg;
                }
                continue;
            }
            if (last >= 0 && (uint32_t)last >= cls) {   // blocked
                if (cls == 0) goto new_starter;   // the composee (before the marks that stayed), a new one
                goto stay;
            }
            if ((x = fat5__uc_compose(kc, ch)) != 0) {
                kc = x;
                kch = kch + chg - 1;
                continue;
            }
            if (last < 0 && cls == 0) goto new_starter;
        stay:   // a mark that stays: after the composee, which is written before the marks
            if (last < 0) {   // the first mark that stays: make room for the composee before it
                E[3 * o] = 0xFFFFFFFFu;   // placeholder
                E[3 * o + 2] = 0;
                w = o++;
            }
            E[3 * o] = ch;
            E[3 * o + 2] = (uint32_t)(int32_t)chg;
            o++;
            last = (long)cls;
            continue;
        new_starter:
            if (last >= 0) {
                E[3 * w] = kc;
                E[3 * w + 2] = (uint32_t)(int32_t)kch;
            } else {
                E[3 * o] = kc;
                E[3 * o + 2] = (uint32_t)(int32_t)kch;
                o++;
            }
            kc = ch;
            kch = chg;
            last = -1;
        }
        if (compose && has_k) {
            if (last >= 0) {
                E[3 * w] = kc;
                E[3 * w + 2] = (uint32_t)(int32_t)kch;
            } else {
                E[3 * o] = kc;
                E[3 * o + 2] = (uint32_t)(int32_t)kch;
                o++;
            }
        }
        // the same text as fat5__unorm's?
        for (j = 0, k = 0; j < o; j++) {
            char u[4];
            size_t ul = fat5__utf8_put(u, E[3 * j]);
            if (k + ul > wn || memcmp(want + k, u, ul) != 0) goto fallback;
            k += ul;
        }
        if (k != wn) goto fallback;
        for (j = 0; j < o; j++)
            if (!fat5__xt_push(t, c, xb, E[3 * j], (long)(int32_t)E[3 * j + 2])) return -1;
        if (!fat5__xt_flush(t, c, xb)) return -1;
    }
    e->n = om_keep;
    return 1;
fallback:
    e->n = om_keep;
    return 0;
}

// one normalizer: (s, o)[0..n) -> (b, ob); with spans wanted (xb not NULL), x (pairs beside s) ->
// xb as well, seg0 the segment's original start. edges: whether s starts (FAT5__SEG_START) and
// ends (FAT5__SEG_END) a segment of the text (between added tokens), or is a part cut inside
// one: Strip and Prepend act at a segment's edges only.
static fat5_status fat5__hf_norm_step(fat5_tokenizer *t, const fat5__tstep *st, const char *s, const uint32_t *o, size_t n,
                                      int edges, fat5__tbuf *b, fat5__ubuf *ob, const uint32_t *x, fat5__ubuf *xb,
                                      uint32_t seg0) {
    size_t i = 0, l;
    fat5__xt xt;
    b->n = 0;
    ob->n = 0;
    if (xb) xb->n = 0;
    fat5__xt_init(&xt, s, n, x, seg0);
    if (!fat5__tbuf_put(t->ctx, b, "", 0)) goto oom;
    if (n == 0) return FAT5_OK;
    switch (st->kind) {
    case FAT5__N_PRECOMPILED:   // per grapheme cluster (under 6 bytes), else per character; first rule
        while (i < n) {
            size_t g = fat5__grapheme_len(s + i, n - i), j;
            fat5__cm_match m;
            if (g < 6 && fat5__charsmap_search(&st->cm, s + i, g, &m, 1)) {
                if (!fat5__emit(t, b, ob, m.repl, strlen(m.repl), NULL, o[i], NULL, NULL, 0, 0) ||
                    (xb && !fat5__xt_rule(t, &xt, xb, s + i, g, m.repl)))
                    goto oom;
            } else {
                for (j = i; j < i + g; j += l) {
                    l = fat5__utf8_len(s + j, n - j);
                    if (fat5__charsmap_search(&st->cm, s + j, l, &m, 1)) {
                        if (!fat5__emit(t, b, ob, m.repl, strlen(m.repl), NULL, o[j], NULL, NULL, 0, 0) ||
                            (xb && !fat5__xt_rule(t, &xt, xb, s + j, l, m.repl)))
                            goto oom;
                    } else if (!fat5__emit(t, b, ob, s + j, l, o + j, 0, NULL, NULL, 0, 0) ||
                               (xb && !fat5__xt_push(t, &xt, xb, fat5__utf8_cp(s + j, n - j, &l), 0))) {
                        goto oom;
                    }
                }
            }
            i += g;
        }
        if (xb && !fat5__xt_flush(t, &xt, xb)) goto oom;
        break;
    case FAT5__N_REPLACE:
        while (i < n) {
            size_t k = fat5__replace_at(st, s + i, n - i);
            if (k) {   // the new text is aligned with the match's last character (as tokenizers aligns it)
                size_t lc = i + k - 1;
                while (lc > i && ((unsigned char)s[lc] & 0xC0) == 0x80) lc--;
                if (!fat5__emit(t, b, ob, st->b, st->b_len, NULL, o[lc], xb, NULL, xb ? x[2 * lc] : 0, xb ? x[2 * lc + 1] : 0))
                    goto oom;
                i += k;
            } else {
                l = fat5__utf8_len(s + i, n - i);
                if (!fat5__emit(t, b, ob, s + i, l, o + i, 0, xb, xb ? x + 2 * i : NULL, 0, 0)) goto oom;
                i += l;
            }
        }
        break;
    case FAT5__N_STRIP: {
        size_t a = 0, e = n;
        while (st->f1 && (edges & FAT5__SEG_START) && a < e && fat5__hf_space(fat5__cp_at(s + a, e - a, &l))) a += l;
        while (st->f2 && (edges & FAT5__SEG_END) && e > a && fat5__hf_space(fat5__cp_before(s, e))) {
            e--;
            while (e > a && ((unsigned char)s[e] & 0xC0) == 0x80) e--;
        }
        if (!fat5__emit(t, b, ob, s + a, e - a, o + a, 0, xb, xb ? x + 2 * a : NULL, 0, 0)) goto oom;
        break;
    }
    case FAT5__N_PREPEND:
        if (n && (edges & FAT5__SEG_START) &&
            !fat5__emit(t, b, ob, st->a, st->a_len, NULL, o[0], xb, NULL, xb ? x[0] : 0, xb ? x[1] : 0))
            goto oom;
        if (!fat5__emit(t, b, ob, s, n, o, 0, xb, x, 0, 0)) goto oom;
        break;
    default: {   // NFC / NFD / NFKC / NFKD, a chunk at a time: a white-space character alone, else a
                 // character and the non-ASCII, non-space ones after it. Nothing composes across
                 // those boundaries, and each chunk's bytes take its first character's offset
                 // (its spans: fat5__xt_nfx).

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
            if (xb) {   // tokenizers' alignment of the chunk, else its whole span for each byte
                int r = 0;
                xt.idx = i;
                if (!(e - i == 1 && need == 1 && b->p[b->n] == s[i]))
                    r = fat5__xt_nfx(t, &xt, xb, form, s + i, e - i, b->p + b->n, need);
                if (r < 0) goto oom;
                if (r == 0) {
                    if (e - i == 1 && need == 1 && b->p[b->n] == s[i]) {
                        if (!fat5__ubuf_append(t->ctx, xb, x + 2 * i, 2)) goto oom;
                    } else {
                        uint32_t xs = x[2 * i], xe = x[2 * (e - 1) + 1];
                        for (l = 0; l < need; l++)
                            if (!fat5__ubuf_push(t->ctx, xb, xs) || !fat5__ubuf_push(t->ctx, xb, xe)) goto oom;
                    }
                }
                xt.idx = e;
            }
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

// the normalizer chain on s[0..n) (original offsets orig0 + i; edges as for fat5__hf_norm_step)
// -> (out, orig); with spans wanted (x not NULL: pairs beside s), their spans -> xout
static fat5_status fat5__hf_normalize(fat5_tokenizer *t, const char *s, size_t n, uint32_t orig0, int edges,
                                      fat5__tbuf *out, fat5__ubuf *orig, const uint32_t *x, fat5__ubuf *xout) {
    fat5__tbuf tb = t->sn;   // the other buffer of the pair, kept by the tokenizer
    fat5__ubuf to = t->on, tx = t->xn;
    fat5_status st = FAT5_OK;
    size_t i;
    uint32_t seg0 = x && n ? x[0] : orig0;
    int k;
    out->n = 0;
    orig->n = 0;
    if (x) xout->n = 0;
    if (!fat5__tbuf_put(t->ctx, out, s, n) || (x && !fat5__ubuf_append(t->ctx, xout, x, 2 * n)))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (i = 0; i < n; i++)
        if (!fat5__ubuf_push(t->ctx, orig, orig0 + (uint32_t)i)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (k = 0; k < t->n_norm && !st; k++) {
        fat5__tbuf xb;
        fat5__ubuf xo;
        st = fat5__hf_norm_step(t, &t->norm[k], out->p, orig->p, out->n, edges, &tb, &to, x ? xout->p : NULL,
                                x ? &tx : NULL, seg0);
        xb = *out; *out = tb; tb = xb;
        xo = *orig; *orig = to; to = xo;
        if (x) {
            xo = *xout; *xout = tx; tx = xo;
        }
    }
    t->sn = tb;
    t->on = to;
    t->xn = tx;
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

// one pre-tokenizer over the splits (b0, o0, sp0) -> (b1, o1, sp1); with spans wanted (x1 not NULL),
// the spans beside b0 (xa) -> x1: a replaced or prepended character takes the span of the one it
// replaces or precedes, GPT-2's byte characters their character's
static fat5_status fat5__hf_pre_step(fat5_tokenizer *t, const fat5__tstep *st, const fat5__tbuf *b0, const fat5__ubuf *o0,
                                     const fat5__ubuf *sp0, fat5__tbuf *b1, fat5__ubuf *o1, fat5__ubuf *sp1,
                                     const fat5__ubuf *xa, fat5__ubuf *x1) {
    size_t q;
    b1->n = o1->n = sp1->n = 0;
    if (x1) x1->n = 0;
    if (!fat5__tbuf_put(t->ctx, b1, "", 0)) goto oom;
    for (q = 0; q < sp0->n; q += 4) {
        const char *s = b0->p + sp0->p[q];
        const uint32_t *o = o0->p + sp0->p[q], *x = x1 ? xa->p + 2 * sp0->p[q] : NULL;
        size_t n = sp0->p[q + 1], i, l, start = b1->n, a;
        uint32_t shift = sp0->p[q + 2];
        if (sp0->p[q + 3] != FAT5__NOTOK) {   // an added token: as it is
            if (!fat5__emit(t, b1, o1, s, n, o, 0, x1, x, 0, 0) || !fat5__split_push(t, sp1, start, n, shift, sp0->p[q + 3]))
                goto oom;
            continue;
        }
        switch (st->kind) {
        case FAT5__P_METASPACE: {
            // the spaces are replaced first, so a leading space counts as a leading replacement
            int pre = n > 0 && s[0] != ' ' && !(n >= st->a_len && memcmp(s, st->a, st->a_len) == 0) &&
                      (st->f1 == 0 || (st->f1 == 1 && shift == 0));
            if (pre && !fat5__emit(t, b1, o1, st->a, st->a_len, NULL, o[0], x1, NULL, x ? x[0] : 0, x ? x[1] : 0)) goto oom;
            for (i = 0; i < n; i++)
                if (!(s[i] == ' ' ? fat5__emit(t, b1, o1, st->a, st->a_len, NULL, o[i], x1, NULL, x ? x[2 * i] : 0, x ? x[2 * i + 1] : 0)
                                  : fat5__emit(t, b1, o1, s + i, 1, o + i, 0, x1, x ? x + 2 * i : NULL, 0, 0)))
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
                if (!fat5__emit(t, b1, o1, s + i, e - i, o + i, 0, x1, x ? x + 2 * i : NULL, 0, 0) ||
                    !fat5__split_push(t, sp1, a, e - i, o[i], FAT5__NOTOK))
                    goto oom;
                i = e;
            }
            break;
        case FAT5__P_BYTELEVEL: {
            // the prefix space and the split work on the text; each piece is then mapped byte by byte
            size_t tn = n;
            const char *ts = s;
            fat5__ubuf *x3 = x1 ? &t->x3 : NULL;
            t->s3.n = 0;
            t->o3.n = 0;
            t->x3.n = 0;
            if (st->f1 && n > 0 && s[0] != ' ') {
                if (!fat5__emit(t, &t->s3, &t->o3, " ", 1, NULL, o[0], x3, NULL, x ? x[0] : 0, x ? x[1] : 0) ||
                    !fat5__emit(t, &t->s3, &t->o3, s, n, o, 0, x3, x, 0, 0))
                    goto oom;
                ts = t->s3.p;
                o = t->o3.p;
                x = x1 ? t->x3.p : NULL;
                tn = n + 1;
            }
            for (i = 0; i < tn;) {
                size_t k = st->f2 ? fat5__gpt2_piece(ts + i, tn - i) : tn - i, j;
                a = b1->n;
                for (j = i; j < i + k; j++) {
                    char u[4];
                    size_t ul = fat5__utf8_put(u, fat5__gpt2_char((unsigned char)ts[j]));
                    if (!fat5__emit(t, b1, o1, u, ul, NULL, o[j], x1, NULL, x ? x[2 * j] : 0, x ? x[2 * j + 1] : 0)) goto oom;
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
// (with spans wanted, t->hspan holds each symbol's (start, end) in the word beside them)
typedef struct fat5__hsym { int32_t c, prev, next; uint32_t len; } fat5__hsym;
typedef struct fat5__hmrg { uint32_t rank, pos, id; } fat5__hmrg;

static int fat5__hsym_add(fat5_tokenizer *t, size_t *ny, int32_t id, uint32_t len, size_t pos, size_t end) {
    fat5__hsym *y;
    if (!fat5__grow(t->ctx, &t->lat, &t->lat_cap, (*ny + 1) * sizeof(fat5__hsym), 1)) return 0;
    y = FAT5__CAST(fat5__hsym *, t->lat);
    y[*ny].c = id;
    y[*ny].len = len;
    if (t->want_off && !(fat5__ubuf_push(t->ctx, &t->hspan, (uint32_t)pos) && fat5__ubuf_push(t->ctx, &t->hspan, (uint32_t)end)))
        return 0;
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
    size_t unk_pos = 0;
    const fat5__merge *m;
    if (n == 0) return FAT5_OK;
    t->hspan.n = 0;
    if (t->ignore_merges) {
        int32_t id = fat5__trie_find(&t->vocab, s, n);
        if (id >= 0)
            return fat5__ubuf_push(t->ctx, out, (uint32_t)id) &&
                   (!t->want_off || (fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base)) &&
                                     fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s + n - t->span_base))))
                       ? FAT5_OK : FAT5_ERR_OUT_OF_MEMORY;
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
            if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len, unk_pos, unk_pos + unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
            unk = -1;
            if (!fat5__hsym_add(t, &ny, id, (uint32_t)l, i, i + l)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        if (t->byte_fallback && fat5__has_byte_pieces(t, t->s3.p, t->s3.n)) {   // every byte of the piece
            size_t j;                                                              // (prefix and suffix too)
            for (j = 0; j < t->s3.n; j++)   // each byte: its character's span
                if (!fat5__hsym_add(t, &ny, t->byte_id[(unsigned char)t->s3.p[j]], 1, i, i + l)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        if (t->unk_id >= 0) {
            if (unk >= 0 && t->fuse_unk) {
                unk_len += (uint32_t)l;
            } else {
                if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len, unk_pos, unk_pos + unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
                unk = t->unk_id;
                unk_len = (uint32_t)l;
                unk_pos = i;
            }
        }
    }
    if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len, unk_pos, unk_pos + unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
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
        if (t->want_off) t->hspan.p[2 * top.pos + 1] = t->hspan.p[2 * (size_t)cur->next + 1];
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0) y[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && (m = fat5__merge_find(t, y[cur->prev].c, cur->c)))
            fat5__hmrg_add(h, &nh, m->rank, (uint32_t)cur->prev, m->id);
        if (cur->next >= 0 && (m = fat5__merge_find(t, cur->c, y[cur->next].c)))
            fat5__hmrg_add(h, &nh, m->rank, top.pos, m->id);
    }
    for (i = 0; i < ny; i = y[i].next >= 0 ? (size_t)y[i].next : ny)
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)y[i].c) ||
            (t->want_off && (!fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base) + t->hspan.p[2 * i]) ||
                             !fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base) + t->hspan.p[2 * i + 1]))))
            return FAT5_ERR_OUT_OF_MEMORY;
    return FAT5_OK;
}

// tokenizers' Unigram: the pieces of a part (t->ids triples over s) as ids appended to out; a run
// of unknowns is fused and looked up as text, then bytes or <unk> (a part never ends inside a run)
static fat5_status fat5__hf_unigram_post(fat5_tokenizer *t, const char *s, fat5__ubuf *out) {
    size_t i;
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
                size_t j;
                if (!fat5__push_byte_pieces(t, s + a, b - a, out)) return FAT5_ERR_OUT_OF_MEMORY;
                for (j = 0; t->want_off && j < b - a; j++)   // each byte piece: the run's span
                    if (!fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base) + a) ||
                        !fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base) + b))
                        return FAT5_ERR_OUT_OF_MEMORY;
                continue;
            }
            if (id < 0) id = t->unk_id;
        }
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)id)) return FAT5_ERR_OUT_OF_MEMORY;
        if (t->want_off && (!fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base) + a) ||
                            !fat5__ubuf_push(t->ctx, &t->spans, (uint32_t)(s - t->span_base) + b)))
            return FAT5_ERR_OUT_OF_MEMORY;
    }
    return FAT5_OK;
}

// tokenizers' Unigram on one split s[0..n): the lattice over a window of at most about two parts
// past its expanded positions, so that a long split needs no lattice of its length
static fat5_status fat5__hf_unigram(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    const size_t look = fat5__uni_look(t), part = t->chunk ? t->chunk : 1;
    size_t base = 0;
    fat5_status st;
    if (n == 0) return FAT5_OK;
    if ((st = fat5__uni_begin(t, 0))) return st;
    for (;;) {
        size_t avail = n - base, used, d = avail - t->uni_pos;
        int fin = d <= look || d - look <= part || d - look - part <= part;   // d <= 2 part + look, without overflow
        if (!fin) avail = t->uni_pos + 2 * part + look;
        if ((st = fat5__uni_feed(t, s + base, avail, fin, out, &used))) return st;
        base += used;
        if (fin) return FAT5_OK;
    }
}

// The ByteLevel post-processor's trim_offsets: the leading and trailing spaces of a token's text
// p[0..n) (U+0120, GPT-2's space, or white space), in characters, appended to t->trimc. A piece
// of spaces counts both ways, as tokenizers counts it.
static int fat5__hf_trim_counts(fat5_tokenizer *t, const char *p, size_t n) {
    size_t a = 0, b = n, l;
    uint32_t lead = 0, trail = 0, c;
    while (a < n && (l = fat5__utf8_len(p + a, n - a)) && ((c = fat5__cp_at(p + a, n - a, &l)) == 0x120 || fat5__hf_space(c))) {
        a += l;
        lead++;
    }
    while (b > 0 && ((c = fat5__cp_before(p, b)) == 0x120 || fat5__hf_space(c))) {
        b--;
        while (b > 0 && ((unsigned char)p[b] & 0xC0) == 0x80) b--;
        trail++;
    }
    return fat5__ubuf_push(t->ctx, &t->trimc, lead) && fat5__ubuf_push(t->ctx, &t->trimc, trail);
}

// the offset k characters after at in s[0..n) (at most n); a maximal invalid subsequence is one
static size_t fat5__chars_after(const char *s, size_t n, size_t at, uint32_t k) {
    while (k-- && at < n) {
        size_t l = fat5__utf8_len(s + at, n - at);
        at += l ? l : fat5__utf8_subpart(s + at, n - at);
    }
    return at;
}

// Trims the spans off[2 n] of a sequence's ids by their counts in t->trimc, in characters of
// text as tokenizers does: the start moves past the leading spaces (not past one of the first
// token, or of one starting at 0, when the post-processor adds a prefix space: t->bl_trim 2), up
// to the end; the end moves back over the trailing ones (when there are that many characters
// before it), down to the start.
static void fat5__hf_trim_offsets(fat5_tokenizer *t, const char *text, size_t len, uint32_t *off, size_t n) {
    size_t i;
    for (i = 0; t->bl_trim && i < n && 2 * i + 1 < t->trimc.n; i++) {
        uint32_t lead = t->trimc.p[2 * i], trail = t->trimc.p[2 * i + 1], k;
        size_t s0 = off[2 * i], e0 = off[2 * i + 1];
        if (lead && !(t->bl_trim == 2 && lead == 1 && (i == 0 || s0 == 0))) {
            size_t s1 = fat5__chars_after(text, len, s0, lead);
            s0 = s1 < e0 ? s1 : e0;
        }
        if (trail) {
            size_t e1 = e0;
            for (k = 0; k < trail && e1 > 0; k++) {
                e1--;
                while (e1 > 0 && ((unsigned char)text[e1] & 0xC0) == 0x80 && e0 - e1 < 4) e1--;
            }
            if (k == trail) e0 = e1 > s0 ? e1 : s0;
        }
        off[2 * i] = (uint32_t)s0;
        off[2 * i + 1] = (uint32_t)e0;
    }
}

// the span of bytes [a, b) of a buffer whose spans are x (pairs per byte): the first one's start,
// the last one's end, as tokenizers expands alignments; appended to t->offs
static int fat5__off_push(fat5_tokenizer *t, const uint32_t *x, size_t a, size_t b) {
    if (b <= a) return fat5__ubuf_push(t->ctx, &t->offs, x[2 * a]) && fat5__ubuf_push(t->ctx, &t->offs, x[2 * a]);
    return fat5__ubuf_push(t->ctx, &t->offs, x[2 * a]) && fat5__ubuf_push(t->ctx, &t->offs, x[2 * (b - 1) + 1]);
}

// s2's spans (t->xm, pairs per byte) from the sanitizer's map t->om: each character's bytes get
// (start, end) of the input bytes it comes from, plus base; len: the part's input length
static int fat5__hf_input_spans(fat5_tokenizer *t, uint32_t base, size_t len) {
    size_t i = 0, n = t->s2.n, l, j;
    t->xm.n = 0;
    if (!fat5__grow(t->ctx, (void **)&t->xm.p, &t->xm.cap, 2 * n + 2, sizeof(uint32_t))) return 0;
    while (i < n) {
        uint32_t xs, xe;
        l = fat5__utf8_len(t->s2.p + i, n - i);
        if (!l) l = 1;
        if (i + l > n) l = n - i;
        xs = base + t->om.p[i];
        xe = base + (uint32_t)(i + l < n ? t->om.p[i + l] : len);
        for (j = 0; j < l; j++) {
            t->xm.p[2 * (i + j)] = xs;
            t->xm.p[2 * (i + j) + 1] = xe;
        }
        i += l;
    }
    t->xm.n = 2 * n;
    return 1;
}

// tokenizers: the ids of text[0..len), a part of a sequence that starts at offset base (its
// first segment is a continuation unless at_start, its last one unless at_end), appended to out;
// with t->want_off, each id's span in the text appended to t->offs as well
static fat5_status fat5__hf_encode_part(fat5_tokenizer *t, const char *text, size_t len, uint32_t base, int at_start,
                                        int at_end, fat5__ubuf *out) {
    fat5_status st;
    size_t q, i;
    int k;
    fat5__tbuf *ba = &t->s0, *bb = &t->s1;
    fat5__ubuf *oa = &t->o0, *ob = &t->o1, *sa = &t->spl, *sb = &t->spl2;
    fat5__ubuf *xa = t->want_off ? &t->x0 : NULL, *xb = t->want_off ? &t->x1 : NULL;
    // 1. valid UTF-8 (s2), split on the added tokens matched in the raw text (o2: the triples)
    if (!fat5__utf8_sanitize(t->ctx, text, len, &t->s2, t->want_off ? &t->om : NULL) ||
        (t->want_off && !fat5__hf_input_spans(t, base, len)) ||
        !fat5__hf_added_split(t, &t->added_raw, &t->added_rac[0], t->s2.p, t->s2.n, &t->o2))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    ba->n = oa->n = sa->n = 0;
    if (xa) xa->n = 0;
    if (!fat5__tbuf_put(t->ctx, ba, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (q = 0; q < t->o2.n; q += 3) {
        uint32_t a = t->o2.p[q], b = t->o2.p[q + 1], idx = t->o2.p[q + 2];
        if (idx != FAT5__NOTOK) {   // (with spans wanted, its text goes along to carry its span)
            size_t at = ba->n, w = xa ? b - a : 0;
            if ((xa && !fat5__emit(t, ba, oa, t->s2.p + a, w, NULL, base + a, xa, t->xm.p + 2 * a, 0, 0)) ||
                !fat5__split_push(t, sa, at, w, base + a, (uint32_t)t->added[idx].id))
                return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        // 2. normalise the piece (s3, o3), split on the added tokens matched in normalised text
        if ((st = fat5__hf_normalize(t, t->s2.p + a, b - a, base + a,
                                     (a > 0 || at_start ? FAT5__SEG_START : 0) | (b < t->s2.n || at_end ? FAT5__SEG_END : 0),
                                     &t->s3, &t->o3, xa ? t->xm.p + 2 * a : NULL, &t->x3)))
            return st;
        if (!fat5__hf_added_split(t, &t->added_norm, &t->added_rac[1], t->s3.p, t->s3.n, &t->ids)) return FAT5_ERR_OUT_OF_MEMORY;
        for (i = 0; i < t->ids.n; i += 3) {
            uint32_t c = t->ids.p[i], d = t->ids.p[i + 1], id2 = t->ids.p[i + 2];
            size_t at = ba->n;
            if (c == d) continue;   // empty pieces are dropped
            if (!fat5__emit(t, ba, oa, t->s3.p + c, d - c, t->o3.p + c, 0, xa, xa ? t->x3.p + 2 * c : NULL, 0, 0) ||
                !fat5__split_push(t, sa, at, d - c, t->o3.p[c], id2 == FAT5__NOTOK ? FAT5__NOTOK : (uint32_t)t->added[id2].id))
                return FAT5_ERR_OUT_OF_MEMORY;
        }
    }
    // 3. pre-tokenizers
    for (k = 0; k < t->n_pre; k++) {
        fat5__tbuf *xtb;
        fat5__ubuf *xo, *xs;
        if ((st = fat5__hf_pre_step(t, &t->pre[k], ba, oa, sa, bb, ob, sb, xa, xb))) return st;
        xtb = ba; ba = bb; bb = xtb;
        xo = oa; oa = ob; ob = xo;
        xs = sa; sa = sb; sb = xs;
        xo = xa; xa = xb; xb = xo;
    }
    // 4. the model on each text split
    for (q = 0; q < sa->n; q += 4) {
        size_t off = sa->p[q], n = sa->p[q + 1], n0 = out->n, j;
        if (sa->p[q + 3] != FAT5__NOTOK) {   // an added token; trimmed by the text it matched
            if (!fat5__ubuf_push(t->ctx, out, sa->p[q + 3]) || (xa && !fat5__off_push(t, xa->p, off, off + n)) ||
                (xa && t->bl_trim && !fat5__hf_trim_counts(t, ba->p + off, n)))
                return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        t->spans.n = 0;
        t->span_base = ba->p + off;
        st = t->model == FAT5__TM_UNIGRAM ? fat5__hf_unigram(t, ba->p + off, n, out) : fat5__hf_bpe(t, ba->p + off, n, out);
        if (st) return st;
        if (!xa) continue;
        if (t->spans.n != 2 * (out->n - n0))
            return fat5__err(t->ctx, FAT5_ERR_STATE, "tokenize: %zu spans for %zu ids (a defect)", t->spans.n / 2, out->n - n0);
        for (j = 0; j < t->spans.n; j += 2) {
            size_t sa0 = t->spans.p[j], sb0 = t->spans.p[j + 1];
            if (sb0 > n) sb0 = n;
            if (sa0 >= n) sa0 = n ? n - 1 : 0;
            if (!fat5__off_push(t, xa->p, off + sa0, off + sb0)) return FAT5_ERR_OUT_OF_MEMORY;
        }
        for (j = n0; t->bl_trim && j < out->n; j++) {   // a model's token: trimmed by its piece
            const char *piece = t->pool.p + t->id_off[out->p[j]];
            if (!fat5__hf_trim_counts(t, piece, strlen(piece))) return FAT5_ERR_OUT_OF_MEMORY;
        }
    }
    return FAT5_OK;
}

// Where a long text may be cut, found at load (fat5__hf_cut_setup): before a single space between
// two ASCII letters or digits x and y, the text before x ASCII ("…wx| y…"), x in t->cut_left.
// The part after the cut starts with the space; the steps then do on the two parts what they do
// on the whole text, because (each checked at load, else no cut at all):
//   - x, the space and y are characters of their own (grapheme clusters, NFx chunks, UTF-8), no
//     added token holds x or the space (so none matches across the cut, and the leftmost-longest
//     scan reaches the space on both sides), and no Precompiled rule maps x or the space;
//   - Replace patterns hold no ASCII letter or digit (no match reaches x or y), and what they make
//     of the space (J) is what they make of it inside the text; Strip and Prepend act only at
//     the text's segment edges, which a cut is not (the parts are passed as continuations);
//   - NFx and Precompiled steps see the space still a space;
//   - the pre-tokenizers split there (Metaspace with split, J starting with a space or the
//     replacement, so nothing is prepended; WhitespaceSplit, J all white space; ByteLevel's
//     GPT-2 split, J one space), after which each split is tokenized on its own; or, with no
//     split, a BPE model whose pieces hold J's first character nowhere but at their start, which
//     is itself a piece (no merge, and no run of unknowns, reaches across), with no subword
//     prefix or suffix and no ignore_merges.
// Metaspace's prepend_scheme "first" reads the original offset of a split, which stays nonzero
// after a cut. Unigram models without a split are never cut (the lattice cuts itself, above).
static int fat5__ascii_alnum(unsigned c) { return ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9'); }

static void fat5__hf_cut_setup(fat5_tokenizer *t) {
    uint8_t in_added[256];
    char j[64], nb[64];
    size_t jl = 1, i;
    int k, split = 0, c;
    t->hf_cut = 0;
    memset(in_added, 0, sizeof in_added);
    for (k = 0; k < 2; k++) {   // every byte of an added token, raw or normalised
        const fat5__trie *tr = k ? &t->added_norm : &t->added_raw;
        for (i = 1; i < tr->n_nodes; i++) in_added[tr->node[i].label] = 1;
    }
    if (in_added[' ']) return;
    for (c = 0; c < 128; c++) t->cut_left[c] = (uint8_t)(fat5__ascii_alnum((unsigned)c) && !in_added[c]);
    j[0] = ' ';
    for (k = 0; k < t->n_norm; k++) {
        const fat5__tstep *st = &t->norm[k];
        fat5__cm_match m;
        size_t nl = 0;
        switch (st->kind) {
        case FAT5__N_PRECOMPILED:
            if (jl != 1 || j[0] != ' ' || fat5__charsmap_search(&st->cm, " ", 1, &m, 1)) return;
            for (c = 1; c < 128; c++) {
                char ch = (char)c;
                if (t->cut_left[c] && fat5__charsmap_search(&st->cm, &ch, 1, &m, 1)) t->cut_left[c] = 0;
            }
            break;
        case FAT5__N_REPLACE:
            if (st->n_atoms) {
                int a;
                for (a = 0; a < st->n_atoms; a++)
                    if (st->atom[a].cp < 128 && fat5__ascii_alnum(st->atom[a].cp)) return;
            } else {
                for (i = 0; i < st->a_len; i++)
                    if (fat5__ascii_alnum((unsigned char)st->a[i])) return;
            }
            for (i = 0; i < jl;) {   // J through the step, as the step runs over a text
                size_t m_len = fat5__replace_at(st, j + i, jl - i);
                const char *add = m_len ? st->b : j + i;
                size_t add_len = m_len ? st->b_len : fat5__utf8_len(j + i, jl - i);
                if (add_len == 0 && !m_len) return;
                if (nl + add_len > sizeof nb) return;
                memcpy(nb + nl, add, add_len);
                nl += add_len;
                i += m_len ? m_len : add_len;
            }
            if (nl == 0) return;   // the space vanishes: x and y would touch
            memcpy(j, nb, nl);
            jl = nl;
            break;
        case FAT5__N_STRIP:
        case FAT5__N_PREPEND:
            break;
        default:   // NFC / NFD / NFKC / NFKD
            if (jl != 1 || j[0] != ' ') return;
        }
    }
    for (i = 0; i < jl; i++)
        if (in_added[(unsigned char)j[i]]) return;
    for (k = 0; k < t->n_pre && !split; k++) {
        const fat5__tstep *st = &t->pre[k];
        if (st->kind == FAT5__P_METASPACE) {
            size_t nl = 0;
            if (!(j[0] == ' ' || (jl >= st->a_len && memcmp(j, st->a, st->a_len) == 0))) return;
            for (i = 0; i < jl; i++) {   // the spaces replaced
                if (nl + st->a_len > sizeof nb) return;
                if (j[i] == ' ') {
                    memcpy(nb + nl, st->a, st->a_len);
                    nl += st->a_len;
                } else {
                    nb[nl++] = j[i];
                }
            }
            memcpy(j, nb, nl);
            jl = nl;
            split = st->f2;
        } else if (st->kind == FAT5__P_WHITESPACE_SPLIT) {
            size_t l;
            for (i = 0; i < jl; i += l)
                if (!fat5__hf_space(fat5__cp_at(j + i, jl - i, &l))) return;
            split = 1;
        } else {   // ByteLevel
            if (!st->f2 || jl != 1 || j[0] != ' ') return;
            split = 1;
        }
    }
    if (!split) {
        size_t l = fat5__utf8_len(j, jl);
        int32_t p;
        if (t->model != FAT5__TM_BPE || t->cs_prefix_len || t->eow_suffix_len || t->ignore_merges || l == 0 ||
            fat5__trie_find(&t->vocab, j, l) < 0)
            return;
        for (p = 0; p < t->n_pieces; p++) {
            const char *ps = fat5__piece(t, p);
            size_t n = t->len[p];
            if (!t->type[p]) continue;
            for (i = 1; i + l <= n; i++)
                if (memcmp(ps + i, j, l) == 0) return;
        }
    }
    t->hf_cut = 1;
}

// the first place at or after from (and before n) where text[0..n) may be cut, n when none
static size_t fat5__hf_next_cut(const fat5_tokenizer *t, const char *s, size_t n, size_t from) {
    size_t p;
    for (p = from > 2 ? from : 2; p + 1 < n; p++) {
        unsigned char x = (unsigned char)s[p - 1], y = (unsigned char)s[p + 1];
        if (s[p] == ' ' && x < 128 && t->cut_left[x] && (unsigned char)s[p - 2] < 128 && fat5__ascii_alnum(y))
            return p;
    }
    return n;
}

// tokenizers: one sequence's ids appended to out; a long text a part at a time where it may be cut
static fat5_status fat5__hf_encode(fat5_tokenizer *t, const char *text, size_t len, fat5__ubuf *out) {
    size_t a = 0;
    fat5_status st;
    if (len > UINT32_MAX / 2) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "tokenize: text longer than 2 GiB");
    for (;;) {
        size_t b = t->hf_cut && len - a > t->chunk ? fat5__hf_next_cut(t, text, len, a + (t->chunk ? t->chunk : 1)) : len;
        if ((st = fat5__hf_encode_part(t, text + a, b - a, (uint32_t)a, a == 0, b == len, out))) return st;
        t->cuts += b < len;
        if ((st = fat5__emit_ids(t, out))) return st;
        if (b == len) return FAT5_OK;
        a = b;
    }
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

