// =============================================================================================
// ==[8.7] text: tokens as text while they are generated (streaming, stop strings) ==
// fat5_tokenizer_token_texts: every id's text as Hugging Face's stop-string matching reads a
// vocabulary (fat5_generate's stop_strings). fat5_detok_stream: a sequence's text as its tokens
// come, in whole UTF-8 characters (fat5_generate's stream callback, examples/generate --stream).
// Each id's text as it reads inside a text, made as Hugging Face's stop-string matching makes it:
// "abcdef" tokenized (no special tokens), the id appended, detokenized, and what follows the first
// "abcdef" kept. The result belongs to the context.
FAT5_API fat5_status fat5_tokenizer_token_texts(fat5_tokenizer *t, fat5_token_texts *out) {
    static const char prefix[] = "abcdef";
    fat5_ctx *ctx;
    int32_t *base = NULL, *ids = NULL;
    int64_t nb = 0, V, id, *off = NULL;
    char *bytes = NULL;
    size_t cap = 0, used = 0;
    fat5_status st;
    if (!t || !out) return FAT5_ERR_INVALID_ARG;
    ctx = t->ctx;
    V = t->vocab_size;
    if ((st = fat5_tokenize(t, prefix, sizeof prefix - 1, NULL, 0, FAT5_TOKENIZE_NO_SPECIAL, &base, &nb))) return st;
    ids = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(nb + 1) * sizeof(int32_t)));
    off = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(V + 1) * sizeof(int64_t)));
    if (!ids || !off) goto oom;
    memcpy(ids, base, (size_t)nb * sizeof(int32_t));
    off[0] = 0;
    for (id = 0; id < V; id++) {
        char *txt = NULL, *at;
        size_t len = 0, keep = 0;
        ids[nb] = (int32_t)id;
        if (fat5_detokenize(t, ids, nb + 1, 0, &txt, &len) == FAT5_OK && txt) {
            at = strstr(txt, prefix);
            if (at) keep = len - (size_t)(at + sizeof prefix - 1 - txt);
            if (used + keep + 1 > cap) {
                size_t nc = cap ? 2 * cap : 4096;
                char *nbuf;
                while (nc < used + keep + 1) nc *= 2;
                nbuf = FAT5__CAST(char *, fat5__realloc(ctx, bytes, nc));
                if (!nbuf) {
                    fat5__free(ctx, txt);
                    goto oom;
                }
                bytes = nbuf, cap = nc;
            }
            if (keep) memcpy(bytes + used, at + sizeof prefix - 1, keep);
            used += keep;
        }
        fat5__free(ctx, txt);
        off[id + 1] = (int64_t)used;
    }
    {
        char *kb = (char *)fat5__ctx_keep_bytes(ctx, bytes, used + 1);
        int64_t *ko = (int64_t *)fat5__ctx_keep_bytes(ctx, off, (size_t)(V + 1) * sizeof(int64_t));
        if (!kb || !ko) goto oom;
        out->bytes = kb, out->offsets = ko, out->n = V;
    }
    st = FAT5_OK;
    goto done;
oom:
    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokenizer_token_texts: out of memory (%lld ids)", (long long)V);
done:
    fat5__free(ctx, base);
    fat5__free(ctx, ids);
    fat5__free(ctx, off);
    fat5__free(ctx, bytes);
    return st;
}

// A streamed sequence: its tokens so far and the bytes of its text already given out.
struct fat5_detok_stream {
    fat5_tokenizer *t;
    int flags;
    int32_t *ids;
    int64_t n, cap;
    char *out;          // the text given by the last push (its `len` first bytes are the caller's)
    size_t given;       // bytes of the text given out so far
};

FAT5_API fat5_status fat5_detok_stream_create(fat5_tokenizer *t, int flags, fat5_detok_stream **out) {
    fat5_detok_stream *s;
    if (!out) return FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!t) return FAT5_ERR_INVALID_ARG;
    s = FAT5__CAST(fat5_detok_stream *, fat5__calloc(t->ctx, 1, sizeof *s));
    if (!s) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_detok_stream_create: out of memory");
    s->t = t, s->flags = flags;
    *out = s;
    return FAT5_OK;
}

FAT5_API void fat5_detok_stream_destroy(fat5_detok_stream *s) {
    if (!s) return;
    fat5__free(s->t->ctx, s->ids);
    fat5__free(s->t->ctx, s->out);
    fat5__free(s->t->ctx, s);
}

// The end of the text that is final: up to the last complete UTF-8 character, leaving out a last
// U+FFFD (a byte-fallback character whose bytes may still come) unless `last`.
static size_t fat5__detok_final_end(const char *txt, size_t len, int last) {
    size_t k = len, back = 0;
    if (last) return len;
    while (k > 0 && back < 3 && ((unsigned char)txt[k - 1] & 0xC0) == 0x80) k--, back++;
    if (k > 0) {
        unsigned char lead = (unsigned char)txt[k - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (back + 1 < need) len = k - 1;   // an incomplete character at the end
    }
    if (len >= 3 && !memcmp(txt + len - 3, "\xEF\xBF\xBD", 3)) len -= 3;
    return len;
}

FAT5_API fat5_status fat5_detok_stream_push(fat5_detok_stream *s, const int32_t *ids, int64_t n, int last,
                                            const char **text, size_t *len) {
    fat5_ctx *ctx;
    char *full = NULL;
    size_t flen = 0, end;
    fat5_status st;
    if (!s || !text || !len || n < 0 || (n > 0 && !ids)) return FAT5_ERR_INVALID_ARG;
    ctx = s->t->ctx;
    *text = "", *len = 0;
    if (s->n + n > s->cap) {
        int64_t cap = s->cap ? 2 * s->cap : 64;
        int32_t *p;
        while (cap < s->n + n) cap *= 2;
        p = FAT5__CAST(int32_t *, fat5__realloc(ctx, s->ids, (size_t)cap * sizeof(int32_t)));
        if (!p) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_detok_stream_push: out of memory");
        s->ids = p, s->cap = cap;
    }
    if (n) memcpy(s->ids + s->n, ids, (size_t)n * sizeof(int32_t));
    s->n += n;
    if ((st = fat5_detokenize(s->t, s->ids, s->n, s->flags, &full, &flen))) return st;
    end = fat5__detok_final_end(full, flen, last);
    fat5__free(ctx, s->out);
    s->out = full;
    if (end > s->given) {   // the text grows at its end (a detokenizer that rewrites earlier text gives its new part)
        *text = full + s->given, *len = end - s->given;
        s->given = end;
    }
    return FAT5_OK;
}
