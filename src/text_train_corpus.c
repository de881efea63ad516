// =============================================================================================
// ==[8.8] text: tokenizer training — the corpus, the trained vocabulary, the entry point ==
//
// fat5_tokenizer_train reads the corpus into sentences (fat5__tt_read: text lines, %-separated
// documents or JSON Lines, a uniform sample of input_sentence_size of them), hands them to a
// trainer (Unigram: text_train_unigram.c, after SentencePiece's normaliser; BPE:
// text_train_bpe.c), and writes what it returns (a fat5__tt_vocab) with text_train_write.c.
//
// Memory: the sample is the only copy of the corpus held (input_sentence_size sentences of at most
// max_sentence_length bytes), read a line at a time; the trainers' own structures are in
// proportion to it. Determinism: the sample depends on the seed only; the trainers' results do
// not depend on the thread count (their parallel parts add in a fixed order).

// Piece types, SentencePiece's ModelProto.SentencePiece.Type numbers
enum {
    FAT5__PT_NORMAL = 1,
    FAT5__PT_UNKNOWN = 2,
    FAT5__PT_CONTROL = 3,
    FAT5__PT_USER = 4,
    FAT5__PT_UNUSED = 5,
    FAT5__PT_BYTE = 6
};

// A trained vocabulary: what a trainer makes and the writers take. Ids are positions.
typedef struct fat5__tt_vocab {
    int64_t n;
    size_t cap_piece, cap_score, cap_type, cap_merges;   // fat5__grow's capacities
    char **piece;        // [n] UTF-8, NUL-terminated, owned
    float *score;        // [n] Unigram: the piece's log-probability (0 for special pieces); BPE: 0
    int8_t *type;        // [n] FAT5__PT_*
    int64_t n_merges;
    int32_t *merges;     // BPE: [n_merges, 2] the ids of each merge's left and right piece, by rank
} fat5__tt_vocab;

// Sentences with their counts. Sentence i is bytes + off[i], off[i + 1] - off[i] - 1 bytes long,
// followed by a NUL; it occurs freq[i] times in the corpus.
typedef struct fat5__tt_corpus {
    char *bytes;         // [off[n]]
    int64_t *off;        // [n + 1]
    int64_t *freq;       // [n]
    int64_t n, nbytes;
    size_t cap_off, cap_freq, cap_bytes;   // fat5__grow's capacities
} fat5__tt_corpus;

// The trainers: each fills out (empty on entry) with the whole vocabulary in id order, the special
// pieces included, and may set report's alphabet_size and rounds.
//   Unigram: c holds sentences normalised as the written model normalises them (fat5__tt_normalize:
//   spaces as "\u2581", a dummy prefix), deduplicated.
//   BPE: c holds the raw sentences, deduplicated; the trainer pre-tokenizes them itself.
static fat5_status fat5__tt_unigram(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                    const fat5__tt_corpus *c, fat5__tt_vocab *out,
                                    fat5_tokenizer_train_report *rep);
static fat5_status fat5__tt_bpe(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, const fat5__tt_corpus *c,
                                fat5__tt_vocab *out, fat5_tokenizer_train_report *rep);
// The normalisation rule as a precompiled charsmap (SentencePiece's format: darts-clone double
// array + replacement strings; text_train_charsmap.c): "nmt_nfkc" or "nfkc"; "identity" gives an
// empty blob. *blob is allocated with the context (fat5__free).
static fat5_status fat5__tt_charsmap(fat5_ctx *ctx, const char *rule, unsigned char **blob, size_t *len);
// The writers (text_train_write.c): spiece.model bytes (Unigram), tokenizer.json text, and the
// whole directory.
static fat5_status fat5__tt_spm_bytes(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                      const fat5__tt_vocab *v, const unsigned char *charsmap, size_t charsmap_len,
                                      fat5__sb *out);
static fat5_status fat5__tt_write_dir(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                      const fat5__tt_vocab *v, const unsigned char *charsmap, size_t charsmap_len,
                                      const char *dir);

// ---------------------------------------------------------------------------------------------
// the vocabulary

static void fat5__tt_vocab_free(fat5_ctx *ctx, fat5__tt_vocab *v) {
    int64_t i;
    for (i = 0; i < v->n; i++) fat5__free(ctx, v->piece[i]);
    fat5__free(ctx, v->piece);
    fat5__free(ctx, v->score);
    fat5__free(ctx, v->type);
    fat5__free(ctx, v->merges);
    memset(v, 0, sizeof *v);
}

// Appends a piece (len bytes of s); its id, or -1 when out of memory (the message set).
static int64_t fat5__tt_vocab_add(fat5_ctx *ctx, fat5__tt_vocab *v, const char *s, size_t len, float score, int type) {
    char *p;
    if (!fat5__grow(ctx, (void **)&v->piece, &v->cap_piece, (size_t)v->n + 1, sizeof(char *)) ||
        !fat5__grow(ctx, (void **)&v->score, &v->cap_score, (size_t)v->n + 1, sizeof(float)) ||
        !fat5__grow(ctx, (void **)&v->type, &v->cap_type, (size_t)v->n + 1, 1))
        goto oom;
    p = FAT5__CAST(char *, fat5__malloc(ctx, len + 1));
    if (!p) goto oom;
    memcpy(p, s, len);
    p[len] = 0;
    v->piece[v->n] = p;
    v->score[v->n] = score;
    v->type[v->n] = (int8_t)type;
    return v->n++;
oom:
    fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for the vocabulary (%lld pieces)",
              (long long)v->n);
    return -1;
}

// Appends a BPE merge of pieces a and b (ids); 0 when out of memory (the message set).
static FAT5__UNUSED int fat5__tt_vocab_merge(fat5_ctx *ctx, fat5__tt_vocab *v, int32_t a, int32_t b) {
    if (!fat5__grow(ctx, (void **)&v->merges, &v->cap_merges, 2 * (size_t)v->n_merges + 2, sizeof(int32_t))) {
        fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for the merges");
        return 0;
    }
    v->merges[2 * v->n_merges] = a;
    v->merges[2 * v->n_merges + 1] = b;
    v->n_merges++;
    return 1;
}

// The special pieces every vocabulary starts with, in SentencePiece's order: pad / eos / unk / bos
// at their ids (cfg: -1 = none; the ids used must be 0 .. k-1), then the control symbols, then the
// user-defined symbols. *n_meta gets their count. Unigram's byte pieces (byte_fallback) and normal
// pieces come after, added by the trainer.
static fat5_status fat5__tt_vocab_specials(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, fat5__tt_vocab *v) {
    struct { int id; const char *piece; int type; } sp[4];
    int n = 0, i, k;
    int64_t id;
    if (cfg->pad_id >= 0) sp[n].id = cfg->pad_id, sp[n].piece = "<pad>", sp[n].type = FAT5__PT_CONTROL, n++;
    if (cfg->eos_id >= 0) sp[n].id = cfg->eos_id, sp[n].piece = "</s>", sp[n].type = FAT5__PT_CONTROL, n++;
    if (cfg->unk_id >= 0) sp[n].id = cfg->unk_id, sp[n].piece = "<unk>", sp[n].type = FAT5__PT_UNKNOWN, n++;
    if (cfg->bos_id >= 0) sp[n].id = cfg->bos_id, sp[n].piece = "<s>", sp[n].type = FAT5__PT_CONTROL, n++;
    if (cfg->unk_id < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: unk_id is -1; the vocabulary needs <unk>");
    for (k = 0; k < n; k++) {   // ids 0 .. n-1, each once
        int found = 0;
        for (i = 0; i < n; i++) found += sp[i].id == k;
        if (found != 1)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "fat5_tokenizer_train: pad_id %d, eos_id %d, unk_id %d, bos_id %d must number the "
                             "special pieces 0 .. %d (each once; -1: none)", cfg->pad_id, cfg->eos_id, cfg->unk_id,
                             cfg->bos_id, n - 1);
    }
    for (k = 0; k < n; k++)
        for (i = 0; i < n; i++)
            if (sp[i].id == k && fat5__tt_vocab_add(ctx, v, sp[i].piece, strlen(sp[i].piece), 0.0f, sp[i].type) < 0)
                return FAT5_ERR_OUT_OF_MEMORY;
    for (k = 0; k < cfg->n_control_symbols + cfg->n_user_defined_symbols; k++) {
        int user = k >= cfg->n_control_symbols;
        const char *s = user ? cfg->user_defined_symbols[k - cfg->n_control_symbols] : cfg->control_symbols[k];
        int64_t j;
        if (!s || !*s || !fat5__utf8_valid(s))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: %s[%d] is %s",
                             user ? "user_defined_symbols" : "control_symbols",
                             user ? k - cfg->n_control_symbols : k, !s ? "NULL" : !*s ? "empty" : "not valid UTF-8");
        for (j = 0; j < v->n; j++)
            if (!strcmp(v->piece[j], s))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: the symbol \"%s\" is given twice", s);
        id = fat5__tt_vocab_add(ctx, v, s, strlen(s), 0.0f, user ? FAT5__PT_USER : FAT5__PT_CONTROL);
        if (id < 0) return FAT5_ERR_OUT_OF_MEMORY;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// the corpus

static void fat5__tt_corpus_free(fat5_ctx *ctx, fat5__tt_corpus *c) {
    fat5__free(ctx, c->bytes);
    fat5__free(ctx, c->off);
    fat5__free(ctx, c->freq);
    memset(c, 0, sizeof *c);
}

// Appends a sentence (n bytes of s) with count freq; 0 when out of memory (the message set).
static int fat5__tt_corpus_add(fat5_ctx *ctx, fat5__tt_corpus *c, const char *s, size_t n, int64_t freq) {
    if (!fat5__grow(ctx, (void **)&c->off, &c->cap_off, (size_t)c->n + 2, sizeof(int64_t)) ||
        !fat5__grow(ctx, (void **)&c->freq, &c->cap_freq, (size_t)c->n + 1, sizeof(int64_t)) ||
        !fat5__grow(ctx, (void **)&c->bytes, &c->cap_bytes, (size_t)c->nbytes + n + 1, 1))
        goto oom;
    if (c->n == 0) c->off[0] = 0;
    memcpy(c->bytes + c->nbytes, s, n);
    c->bytes[c->nbytes + (int64_t)n] = 0;
    c->nbytes += (int64_t)n + 1;
    c->freq[c->n] = freq;
    c->off[++c->n] = c->nbytes;
    return 1;
oom:
    fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory for the corpus (%lld sentences, %lld bytes)",
              (long long)c->n, (long long)c->nbytes);
    return 0;
}

static uint64_t fat5__tt_hash(const char *s, size_t n) {   // FNV-1a
    uint64_t h = 1469598103934665603ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

// The same sentences merged, their counts added; the first occurrence's order is kept.
static fat5_status fat5__tt_corpus_dedup(fat5_ctx *ctx, fat5__tt_corpus *c) {
    fat5__tt_corpus d;
    int64_t *slot, cap = 16, i;
    memset(&d, 0, sizeof d);
    while (cap < 2 * c->n) cap *= 2;
    slot = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)cap * sizeof(int64_t)));
    if (!slot) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory counting sentences");
    for (i = 0; i < cap; i++) slot[i] = -1;
    for (i = 0; i < c->n; i++) {
        const char *s = c->bytes + c->off[i];
        size_t n = (size_t)(c->off[i + 1] - c->off[i] - 1);
        uint64_t h = fat5__tt_hash(s, n) & (uint64_t)(cap - 1);
        for (;; h = (h + 1) & (uint64_t)(cap - 1)) {
            int64_t j = slot[h];
            if (j < 0) {
                if (!fat5__tt_corpus_add(ctx, &d, s, n, c->freq[i])) {
                    fat5__free(ctx, slot);
                    fat5__tt_corpus_free(ctx, &d);
                    return FAT5_ERR_OUT_OF_MEMORY;
                }
                slot[h] = d.n - 1;
                break;
            }
            if ((size_t)(d.off[j + 1] - d.off[j] - 1) == n && !memcmp(d.bytes + d.off[j], s, n)) {
                d.freq[j] += c->freq[i];
                break;
            }
        }
    }
    fat5__free(ctx, slot);
    fat5__tt_corpus_free(ctx, c);
    *c = d;
    return FAT5_OK;
}

// The sample being read: a reservoir of at most cfg->input_sentence_size sentences (all when 0),
// each slot's text in its own allocation (a replaced slot is freed).
typedef struct fat5__tt_reader {
    fat5_ctx *ctx;
    const fat5_tokenizer_train_config *cfg;
    fat5_tokenizer_train_report *rep;
    char **slot;
    size_t *slot_len;
    int64_t n;
    size_t cap_slot, cap_len;   // fat5__grow's capacities
    fat5_rng rng;
    double t0, last_print;
    int64_t bytes_read, read, skipped;   // sentences read, and skipped (empty or too long)
} fat5__tt_reader;

static void fat5__tt_progress(fat5__tt_reader *r, const char *file) {
    double now = fat5__now_s();
    if (!r->cfg->verbose || now - r->last_print < 5.0) return;
    r->last_print = now;
    fprintf(stderr, "fat5_tokenizer_train: reading %s: %lld sentences, %.1f MB read, %.0f s\n", file,
            (long long)r->read, (double)r->bytes_read / 1e6, now - r->t0);
}

// One sentence (n bytes of s, valid UTF-8) offered to the sample.
static fat5_status fat5__tt_offer(fat5__tt_reader *r, const char *s, size_t n) {
    const fat5_tokenizer_train_config *cfg = r->cfg;
    int64_t k;
    char *p;
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
    r->read++;
    if (n == 0 || (cfg->max_sentence_length > 0 && (int64_t)n > cfg->max_sentence_length)) {
        r->skipped++;
        return FAT5_OK;
    }
    k = r->read - 1 - r->skipped;   // sentences offered before this one
    if (cfg->input_sentence_size > 0 && r->n >= cfg->input_sentence_size) {
        uint64_t j;
        if (!cfg->shuffle_input_sentence) return FAT5_OK;
        j = fat5_rng_below(&r->rng, (uint64_t)k + 1);   // reservoir sampling (Algorithm R)
        if (j >= (uint64_t)cfg->input_sentence_size) return FAT5_OK;
        p = FAT5__CAST(char *, fat5__malloc(r->ctx, n + 1));
        if (!p) goto oom;
        fat5__free(r->ctx, r->slot[j]);
        r->slot[j] = p;
        r->slot_len[j] = n;
        memcpy(p, s, n);
        p[n] = 0;
        return FAT5_OK;
    }
    if (!fat5__grow(r->ctx, (void **)&r->slot, &r->cap_slot, (size_t)r->n + 1, sizeof(char *)) ||
        !fat5__grow(r->ctx, (void **)&r->slot_len, &r->cap_len, (size_t)r->n + 1, sizeof(size_t)))
        goto oom;
    p = FAT5__CAST(char *, fat5__malloc(r->ctx, n + 1));
    if (!p) goto oom;
    memcpy(p, s, n);
    p[n] = 0;
    r->slot[r->n] = p;
    r->slot_len[r->n++] = n;
    return FAT5_OK;
oom:
    return fat5__err(r->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_train: out of memory holding %lld sentences",
                     (long long)r->n);
}

// The format of a file: cfg's, else by its name and first bytes.
static const char *fat5__tt_format(const fat5_tokenizer_train_config *cfg, const char *path, const char *head,
                                   size_t n) {
    size_t L = strlen(path);
    if (cfg->input_format && *cfg->input_format) return cfg->input_format;
    if ((L >= 6 && !strcmp(path + L - 6, ".jsonl")) || (L >= 5 && !strcmp(path + L - 5, ".json"))) return "jsonl";
    if (n >= 2 && head[0] == '%' && head[1] == '\n') return "fortune";
    for (L = 0; L + 3 <= n; L++)
        if (head[L] == '\n' && head[L + 1] == '%' && head[L + 2] == '\n') return "fortune";
    return "text";
}

// Reads one file into the sample. text: every line a sentence (as spm_train reads text). fortune:
// the same, the "%" lines between documents dropped.
// jsonl: every line a JSON object whose cfg->jsonl_field string is the sentence (its newlines cut it
// into sentences).
static fat5_status fat5__tt_read_file(fat5__tt_reader *r, const char *path) {
    fat5_ctx *ctx = r->ctx;
    const fat5_tokenizer_train_config *cfg = r->cfg;
    FILE *fp = fopen(path, "rb");
    char *line = NULL, head[4096];
    size_t cap = 0, hn;
    int64_t lineno = 0;
    const char *fmt;
    fat5_status st = FAT5_OK;
    if (!fp) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    hn = fread(head, 1, sizeof head, fp);
    fmt = fat5__tt_format(cfg, path, head, hn);
    if (strcmp(fmt, "text") && strcmp(fmt, "fortune") && strcmp(fmt, "jsonl")) {
        fclose(fp);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_tokenizer_train: input_format \"%s\" (expected text, fortune or jsonl)", fmt);
    }
    rewind(fp);
    for (;;) {
        size_t n = 0;
        int c = 0;
        // one line, any length up to the cap (a longer one is read through and skipped)
        while ((c = getc(fp)) != EOF) {
            if (n + 1 >= cap) {
                size_t nc = cap ? 2 * cap : 4096;
                char *nl;
                if (nc > ((size_t)1 << 31)) {   // a line over 2 GiB: stop keeping it
                    st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s:%lld: a line of over 2 GiB", path, (long long)lineno + 1);
                    goto done;
                }
                nl = FAT5__CAST(char *, fat5__realloc(ctx, line, nc));
                if (!nl) {
                    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s:%lld: out of memory reading a line of %zu bytes", path,
                                   (long long)lineno + 1, n);
                    goto done;
                }
                line = nl;
                cap = nc;
            }
            line[n++] = (char)c;
            if (c == '\n') break;
        }
        if (n == 0 && c == EOF) break;
        lineno++;
        r->bytes_read += (int64_t)n;
        line[n] = 0;
        if (strlen(line) != n || !fat5__utf8_valid(line)) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s:%lld: %s", path, (long long)lineno,
                           strlen(line) != n ? "a NUL byte in the text" : "not valid UTF-8");
            goto done;
        }
        if (!strcmp(fmt, "fortune") && (!strcmp(line, "%\n") || !strcmp(line, "%"))) continue;
        if (!strcmp(fmt, "jsonl")) {
            fat5__jdoc *d = NULL;
            const fat5__json *v;
            char what[64];
            size_t k;
            for (k = 0; k < n && (line[k] == ' ' || line[k] == '\t' || line[k] == '\n' || line[k] == '\r');) k++;
            if (k == n) continue;   // a blank line
            snprintf(what, sizeof what, "line %lld", (long long)lineno);
            if ((st = fat5__json_parse(ctx, what, line, n, 64, &d))) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s:%lld: %s", path, (long long)lineno, fat5_last_error(ctx));
                goto done;
            }
            v = fat5__json_get(fat5__json_root(d), cfg->jsonl_field && *cfg->jsonl_field ? cfg->jsonl_field : "text");
            if (!v || v->type != FAT5__J_STRING || strlen(v->str) != v->len) {
                fat5__json_free(ctx, d);
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s:%lld: %s \"%s\"", path, (long long)lineno,
                               v && v->type == FAT5__J_STRING ? "a NUL character in the string field" : "no string field",
                               cfg->jsonl_field && *cfg->jsonl_field ? cfg->jsonl_field : "text");
                goto done;
            }
            {
                const char *s = v->str, *e;
                while ((e = strchr(s, '\n')) != NULL) {
                    if ((st = fat5__tt_offer(r, s, (size_t)(e - s)))) break;
                    s = e + 1;
                }
                if (!st) st = fat5__tt_offer(r, s, strlen(s));
            }
            fat5__json_free(ctx, d);
            if (st) goto done;
        } else if ((st = fat5__tt_offer(r, line, n))) {
            goto done;
        }
        fat5__tt_progress(r, path);
        if (c == EOF) break;
    }
    if (ferror(fp)) st = fat5__err(ctx, FAT5_ERR_IO, "%s: read failed: %s", path, strerror(errno));
done:
    fat5__free(ctx, line);
    fclose(fp);
    return st;
}

// The sample of every file's sentences, in file order (the sample's order: by slot), each with count 1.
static fat5_status fat5__tt_read(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg, const char *const *files,
                                 int n_files, fat5__tt_corpus *out, fat5_tokenizer_train_report *rep) {
    fat5__tt_reader r;
    fat5_status st = FAT5_OK;
    int64_t i;
    int f;
    memset(&r, 0, sizeof r);
    r.ctx = ctx, r.cfg = cfg, r.rep = rep;
    r.t0 = r.last_print = fat5__now_s();
    r.rng = fat5_rng_init(cfg->seed);
    for (f = 0; f < n_files && !st; f++) st = fat5__tt_read_file(&r, files[f]);
    for (i = 0; i < r.n && !st; i++)
        if (!fat5__tt_corpus_add(ctx, out, r.slot[i], r.slot_len[i], 1)) st = FAT5_ERR_OUT_OF_MEMORY;
    for (i = 0; i < r.n; i++) {
        rep->bytes_used += (int64_t)r.slot_len[i];
        fat5__free(ctx, r.slot[i]);
    }
    rep->sentences_used = r.n;
    rep->sentences_read = r.read;
    rep->sentences_skipped = r.skipped;
    fat5__free(ctx, r.slot);
    fat5__free(ctx, r.slot_len);
    if (!st && r.n == 0)
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: the corpus holds no sentence (%lld read, %lld "
                       "empty or longer than max_sentence_length %lld)", (long long)r.read, (long long)r.skipped, (long long)cfg->max_sentence_length);
    return st;
}

// ---------------------------------------------------------------------------------------------
// the entry point

FAT5_API fat5_tokenizer_train_config fat5_tokenizer_train_config_default(void) {
    fat5_tokenizer_train_config c;
    memset(&c, 0, sizeof c);
    c.model_type = "unigram";
    c.vocab_size = 8000;
    c.extra_ids = 100;
    c.input_sentence_size = 1000000;
    c.shuffle_input_sentence = 1;
    c.max_sentence_length = 4192;
    c.verbose = 1;
    c.character_coverage = 0.9995;
    c.max_sentencepiece_length = 16;
    c.seed_sentencepiece_size = 1000000;
    c.shrinking_factor = 0.75;
    c.num_sub_iterations = 2;
    c.normalization_rule_name = "nmt_nfkc";
    c.add_dummy_prefix = 1;
    c.remove_extra_whitespaces = 1;
    c.split_by_whitespace = 1;
    c.split_by_unicode_script = 1;
    c.split_by_number = 1;
    c.pad_id = 0, c.eos_id = 1, c.unk_id = 2, c.bos_id = -1;
    return c;
}

static fat5_status fat5__tt_check(fat5_ctx *ctx, const fat5_tokenizer_train_config *c) {
    const char *bad = NULL;
    if (!c->model_type || (strcmp(c->model_type, "unigram") && strcmp(c->model_type, "bpe")))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: model_type \"%s\" (expected unigram or bpe)",
                         c->model_type ? c->model_type : "(null)");
    if (c->vocab_size < 1 || c->vocab_size > FAT5__TOK_MAX_VOCAB) bad = "vocab_size";
    else if (c->extra_ids < 0 || c->extra_ids > 100000) bad = "extra_ids";
    else if (c->input_sentence_size < 0) bad = "input_sentence_size";
    else if (c->max_sentence_length < 0) bad = "max_sentence_length";
    else if (c->num_threads < 0 || c->num_threads > 256) bad = "num_threads";
    else if (!(c->character_coverage > 0.0 && c->character_coverage <= 1.0)) bad = "character_coverage";
    else if (c->max_sentencepiece_length < 1 || c->max_sentencepiece_length > 512) bad = "max_sentencepiece_length";
    else if (c->seed_sentencepiece_size < 1) bad = "seed_sentencepiece_size";
    else if (!(c->shrinking_factor > 0.0 && c->shrinking_factor < 1.0)) bad = "shrinking_factor";
    else if (c->num_sub_iterations < 1 || c->num_sub_iterations > 100) bad = "num_sub_iterations";
    else if (c->min_frequency < 0) bad = "min_frequency";
    else if (c->limit_alphabet < 0) bad = "limit_alphabet";
    else if (c->max_token_length < 0) bad = "max_token_length";
    else if (c->n_user_defined_symbols < 0 || (c->n_user_defined_symbols > 0 && !c->user_defined_symbols))
        bad = "user_defined_symbols";
    else if (c->n_control_symbols < 0 || (c->n_control_symbols > 0 && !c->control_symbols)) bad = "control_symbols";
    if (bad) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: %s is out of range", bad);
    if (!strcmp(c->model_type, "bpe") && c->byte_fallback)   // BpeTrainer makes no <0xXX> pieces to fall back on
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_tokenizer_train: byte_fallback is Unigram's; a BPE vocabulary covers every byte with "
                         "byte_level");
    {   // the special pieces' ids
        fat5__tt_vocab v;
        fat5_status st;
        memset(&v, 0, sizeof v);
        st = fat5__tt_vocab_specials(ctx, c, &v);
        fat5__tt_vocab_free(ctx, &v);
        if (st) return st;
    }
    if (!c->normalization_rule_name || (strcmp(c->normalization_rule_name, "nmt_nfkc") &&
                                        strcmp(c->normalization_rule_name, "nfkc") &&
                                        strcmp(c->normalization_rule_name, "identity")))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_tokenizer_train: normalization_rule_name \"%s\" (expected nmt_nfkc, nfkc or identity)",
                         c->normalization_rule_name ? c->normalization_rule_name : "(null)");
    return FAT5_OK;
}

// Unigram's sentences: each normalised by the model being trained's own normaliser (the charsmap,
// whitespace rules and user-defined symbols of a spiece.model written with the special pieces
// only), then deduplicated.
static fat5_status fat5__tt_normalize(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                      const unsigned char *charsmap, size_t charsmap_len, fat5__tt_corpus *c) {
    fat5__tt_vocab v;
    fat5__sb sb;
    fat5_tokenizer *t = NULL;
    fat5__tt_corpus d;
    fat5_status st;
    int64_t i;
    memset(&v, 0, sizeof v);
    memset(&d, 0, sizeof d);
    fat5__sb_init(&sb, ctx);
    if ((st = fat5__tt_vocab_specials(ctx, cfg, &v))) goto done;
    for (i = 0; cfg->byte_fallback && i < 256; i++) {   // the loader wants them with byte_fallback
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", (unsigned)i);
        if (fat5__tt_vocab_add(ctx, &v, piece, strlen(piece), 0.0f, FAT5__PT_BYTE) < 0) {
            st = FAT5_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    if ((st = fat5__tt_spm_bytes(ctx, cfg, &v, charsmap, charsmap_len, &sb)) ||
        (st = fat5_tokenizer_from_memory(ctx, sb.buf, sb.len, 0, &t)))
        goto done;
    for (i = 0; i < c->n; i++) {
        fat5__spm_norm z;
        const char *s = c->bytes + c->off[i];
        size_t n = (size_t)(c->off[i + 1] - c->off[i] - 1);
        memset(&z, 0, sizeof z);
        t->s0.n = 0;
        if ((st = fat5__spm_norm_more(t, s, n, &z, &t->s0, (size_t)-1, NULL))) goto done;
        if (t->s0.n == 0) continue;
        if (!fat5__tt_corpus_add(ctx, &d, t->s0.p, t->s0.n, c->freq[i])) {
            st = FAT5_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    fat5__tt_corpus_free(ctx, c);
    *c = d;
    memset(&d, 0, sizeof d);
    st = fat5__tt_corpus_dedup(ctx, c);
done:
    fat5_tokenizer_destroy(t);
    fat5__tt_corpus_free(ctx, &d);
    fat5__tt_vocab_free(ctx, &v);
    fat5__sb_free(&sb);
    return st;
}

FAT5_API fat5_status fat5_tokenizer_train(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                          const char *const *files, int n_files, const char *out_dir,
                                          fat5_tokenizer_train_report *report) {
    fat5_tokenizer_train_report rep;
    fat5__tt_corpus c;
    fat5__tt_vocab v;
    unsigned char *cm = NULL;
    size_t cm_len = 0;
    double t0 = fat5__now_s();
    fat5_status st;
    int f;
    if (!ctx || !cfg || !files || n_files < 1 || !out_dir)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: %s",
                         !cfg ? "cfg is NULL" : !files || n_files < 1 ? "no input file" : "out_dir is NULL");
    for (f = 0; f < n_files; f++)
        if (!files[f]) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_train: files[%d] is NULL", f);
    if ((st = fat5__tt_check(ctx, cfg))) return st;
    memset(&rep, 0, sizeof rep);
    memset(&c, 0, sizeof c);
    memset(&v, 0, sizeof v);
    if ((st = fat5__tt_read(ctx, cfg, files, n_files, &c, &rep))) goto done;
    if (!strcmp(cfg->model_type, "unigram")) {   // (BPE's tokenizer.json normalises with NFKC, no charsmap)
        if ((st = fat5__tt_charsmap(ctx, cfg->normalization_rule_name, &cm, &cm_len))) goto done;
        if ((st = fat5__tt_normalize(ctx, cfg, cm, cm_len, &c))) goto done;
        st = fat5__tt_unigram(ctx, cfg, &c, &v, &rep);
    } else {
        if ((st = fat5__tt_corpus_dedup(ctx, &c))) goto done;
        st = fat5__tt_bpe(ctx, cfg, &c, &v, &rep);
    }
    if (st) goto done;
    fat5__tt_corpus_free(ctx, &c);
    if ((st = fat5__tt_write_dir(ctx, cfg, &v, cm, cm_len, out_dir))) goto done;
    rep.vocab_size = v.n + cfg->extra_ids;
    rep.seconds = fat5__now_s() - t0;
#ifndef _WIN32
    {
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru) == 0) rep.peak_bytes = (int64_t)ru.ru_maxrss * 1024;   // Linux: KiB
    }
#endif
    if (cfg->verbose)
        fprintf(stderr, "fat5_tokenizer_train: %s, %lld pieces from %lld sentences (%.1f MB) in %.1f s, peak memory "
                "%.0f MB -> %s\n", cfg->model_type, (long long)rep.vocab_size, (long long)rep.sentences_used,
                (double)rep.bytes_used / 1e6, rep.seconds, (double)rep.peak_bytes / 1e6, out_dir);
    if (report) *report = rep;
done:
    fat5__tt_corpus_free(ctx, &c);
    fat5__tt_vocab_free(ctx, &v);
    fat5__free(ctx, cm);
    return st;
}
