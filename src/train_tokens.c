// =============================================================================================
// ==[5.1] train: token files ==

// Token files (format in the declarations). Every file is validated when it is opened, in one
// sequential pass through a window of FAT5__TOK_WINDOW bytes; afterwards ids are read through the
// same window (fseeko + fread), so a corpus is never loaded whole. Each file ends with an eos, so
// a document never spans two files; the files form one stream of ids indexed from 0.

#define FAT5__TOK_HEADER 32
#define FAT5__TOK_WINDOW ((size_t)1 << 20)   // bytes; a multiple of 4

typedef struct fat5__tokfile {
    char *path;
    FILE *fp;
    int width;            // bytes per id: 2 or 4
    int64_t n;            // ids in the file
    int64_t first;        // index of its first id in the stream
    int64_t *win_docs;    // per window-sized block of the file (ids [k w, (k + 1) w), w the ids a
                          // window holds): the documents of the stream before it (its eos ids)
} fat5__tokfile;

struct fat5_tokens {
    fat5_ctx *ctx;
    fat5__tokfile *files;
    int n_files;
    int64_t n_ids, n_docs, vocab;
    int32_t eos;
    unsigned char *win;   // FAT5__TOK_WINDOW bytes of one file
    int win_file;         // the file in the window, -1 when empty
    int64_t win_first;    // index (in that file) of the first id in the window
    int64_t win_n;        // ids in the window
};

static void fat5__tok_put_le(unsigned char *p, uint64_t v, int n) {
    int i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t fat5__tok_get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int fat5__tok_seek(FILE *fp, uint64_t off) {
#ifdef _WIN32
    return off <= (uint64_t)INT64_MAX && _fseeki64(fp, (__int64)off, SEEK_SET) == 0;
#else
    off_t o = (off_t)off;
    if (o < 0 || (uint64_t)o != off) return 0;
    return fseeko(fp, o, SEEK_SET) == 0;
#endif
}

// The 32-byte header of a token file.
static void fat5__tok_header(unsigned char h[FAT5__TOK_HEADER], int width, int64_t vocab, int32_t eos) {
    memset(h, 0, FAT5__TOK_HEADER);
    memcpy(h, "FAT5TOK", 8);
    fat5__tok_put_le(h + 8, 1, 4);
    fat5__tok_put_le(h + 12, (uint64_t)width, 4);
    fat5__tok_put_le(h + 16, (uint64_t)vocab, 8);
    fat5__tok_put_le(h + 24, (uint64_t)(uint32_t)eos, 4);
}

// Loads ids [at, at + n) of file f into the window (n <= the window, within the file).
static fat5_status fat5__tok_fill(fat5_tokens *t, int f, int64_t at, int64_t n) {
    fat5__tokfile *tf = &t->files[f];
    size_t bytes = (size_t)n * (size_t)tf->width;
    t->win_file = -1;
    if (!fat5__tok_seek(tf->fp, FAT5__TOK_HEADER + (uint64_t)at * (uint64_t)tf->width) ||
        fread(t->win, 1, bytes, tf->fp) != bytes)
        return fat5__err(t->ctx, FAT5_ERR_IO, "%s: byte %llu: read failed (was the file changed?)",
                         tf->path, (unsigned long long)(FAT5__TOK_HEADER + (uint64_t)at * (uint64_t)tf->width));
    t->win_file = f;
    t->win_first = at;
    t->win_n = n;
    return FAT5_OK;
}

// Makes id `at` of file f available in the window; *avail = ids from it to the window's end.
static fat5_status fat5__tok_window(fat5_tokens *t, int f, int64_t at, const unsigned char **p,
                                    int64_t *avail) {
    const fat5__tokfile *tf = &t->files[f];
    if (t->win_file != f || at < t->win_first || at >= t->win_first + t->win_n) {
        int64_t cap = (int64_t)(FAT5__TOK_WINDOW / (size_t)tf->width), n = tf->n - at;
        fat5_status st = fat5__tok_fill(t, f, at, n < cap ? n : cap);
        if (st != FAT5_OK) return st;
    }
    *p = t->win + (size_t)(at - t->win_first) * (size_t)tf->width;
    *avail = t->win_first + t->win_n - at;
    return FAT5_OK;
}

// The file holding stream index pos (pos < n_ids).
static int fat5__tok_file_of(const fat5_tokens *t, int64_t pos) {
    int lo = 0, hi = t->n_files - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->files[mid].first <= pos) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Reads ids from stream index pos into dst, at most max of them, stopping before an eos: *n gets
// the ids copied and *eos 1 when an eos ended them (it sits at pos + *n). pos < n_ids.
static fat5_status fat5__tok_read_doc(fat5_tokens *t, int64_t pos, int64_t max, int32_t *dst,
                                      int64_t *n, int *eos) {
    int f = fat5__tok_file_of(t, pos);
    int64_t at = pos - t->files[f].first, got = 0;
    const uint32_t e = (uint32_t)t->eos;
    *eos = 0;
    while (got < max) {   // the file ends with an eos, so this stops inside it
        const unsigned char *p;
        int64_t avail, i, take;
        fat5_status st = fat5__tok_window(t, f, at, &p, &avail);
        if (st != FAT5_OK) return st;
        take = avail < max - got ? avail : max - got;
        if (t->files[f].width == 2) {
            for (i = 0; i < take; i++) {
                uint32_t v = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
                if (v == e) { *eos = 1; break; }
                dst[got + i] = (int32_t)v;
            }
        } else {
            for (i = 0; i < take; i++) {
                uint32_t v = (uint32_t)fat5__tok_get_le(p + 4 * i, 4);
                if (v == e) { *eos = 1; break; }
                dst[got + i] = (int32_t)v;
            }
        }
        got += i;
        at += i;
        if (*eos) break;
    }
    if (!*eos && got == max && at < t->files[f].n) {   // peek: is the next id the eos?
        const unsigned char *p;
        int64_t avail;
        fat5_status st = fat5__tok_window(t, f, at, &p, &avail);
        if (st != FAT5_OK) return st;
        *eos = (uint32_t)fat5__tok_get_le(p, t->files[f].width) == e;
    }
    *n = got;
    return FAT5_OK;
}

// The index of the document that starts at stream index pos (0 <= pos < n_ids, at 0 or right after
// an eos): the eos ids before it, from the count the check recorded at the start of pos's block and
// those of the block before pos (at most one window read).
static fat5_status fat5__tok_doc_index(fat5_tokens *t, int64_t pos, int64_t *doc) {
    int f = fat5__tok_file_of(t, pos);
    const fat5__tokfile *tf = &t->files[f];
    int64_t per_win = (int64_t)(FAT5__TOK_WINDOW / (size_t)tf->width), at = pos - tf->first;
    int64_t q = at - at % per_win, n = tf->win_docs[at / per_win];
    while (q < at) {
        const unsigned char *p;
        int64_t avail, i, take;
        fat5_status st = fat5__tok_window(t, f, q, &p, &avail);
        if (st != FAT5_OK) return st;
        take = avail < at - q ? avail : at - q;
        for (i = 0; i < take; i++) n += fat5__tok_get_le(p + (size_t)i * (size_t)tf->width, tf->width) == (uint32_t)t->eos;
        q += take;
    }
    *doc = n;
    return FAT5_OK;
}

// Opens and checks one file: header, size, every id below the vocabulary, last id an eos.
static fat5_status fat5__tok_check(fat5_tokens *t, int f, const char *path) {
    fat5__tokfile *tf = &t->files[f];
    unsigned char h[FAT5__TOK_HEADER];
    uint64_t size, vocab, nbytes, i;
    uint32_t version, width, pad;
    int32_t eos;
    int64_t at, per_win;
    fat5_status st;
    fat5_ctx *ctx = t->ctx;
    if (!(tf->path = fat5__strdup(ctx, path)))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    if ((st = fat5__open_regular(ctx, path, &tf->fp, &size)) != FAT5_OK) return st;
    if (size < FAT5__TOK_HEADER || fread(h, 1, FAT5__TOK_HEADER, tf->fp) != FAT5__TOK_HEADER)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: truncated: a token file has a %d-byte header",
                         path, (unsigned long long)size, FAT5__TOK_HEADER);
    if (memcmp(h, "FAT5TOK", 8) != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 0: not a token file (bad magic, want \"FAT5TOK\\0\")", path);
    version = (uint32_t)fat5__tok_get_le(h + 8, 4);
    width = (uint32_t)fat5__tok_get_le(h + 12, 4);
    vocab = fat5__tok_get_le(h + 16, 8);
    eos = (int32_t)(uint32_t)fat5__tok_get_le(h + 24, 4);
    pad = (uint32_t)fat5__tok_get_le(h + 28, 4);
    if (version != 1)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: byte 8: token file version %u, this reader knows 1",
                         path, version);
    if (width != 2 && width != 4)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 12: id width %u, want 2 or 4", path, width);
    if (vocab == 0 || vocab > (uint64_t)INT32_MAX + 1)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 16: vocabulary size %llu, want 1 .. 2^31", path,
                         (unsigned long long)vocab);
    if (eos < 0 || (uint64_t)eos >= vocab)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 24: eos id %ld outside the vocabulary of %llu",
                         path, (long)eos, (unsigned long long)vocab);
    if (pad != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 28: the header's last 4 bytes must be zero", path);
    if (f > 0 && ((int64_t)vocab != t->vocab || eos != t->eos))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %d: %s %lld differs from %lld in %s (the files must agree)",
                         path, (int64_t)vocab != t->vocab ? 16 : 24,
                         (int64_t)vocab != t->vocab ? "vocabulary size" : "eos id",
                         (long long)((int64_t)vocab != t->vocab ? (int64_t)vocab : eos),
                         (long long)((int64_t)vocab != t->vocab ? t->vocab : t->eos), t->files[0].path);
    nbytes = size - FAT5__TOK_HEADER;
    if (nbytes % width != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: truncated: %llu bytes of ids is not a multiple "
                         "of the id width %u", path, (unsigned long long)(size - nbytes % width),
                         (unsigned long long)nbytes, width);
    if (nbytes == 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 32: empty: the file holds no ids", path);
    if (nbytes / width > (uint64_t)(INT64_MAX / 2) - (uint64_t)t->n_ids)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: too many ids", path);
    t->vocab = (int64_t)vocab;
    t->eos = eos;
    tf->width = (int)width;
    tf->n = (int64_t)(nbytes / width);
    tf->first = t->n_ids;
    per_win = (int64_t)(FAT5__TOK_WINDOW / width);
    tf->win_docs = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)((tf->n + per_win - 1) / per_win), sizeof(int64_t)));
    if (!tf->win_docs) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (at = 0; at < tf->n;) {   // every id, in window-sized steps (each window starts at a multiple of per_win)
        const unsigned char *p;
        int64_t avail;
        tf->win_docs[at / per_win] = t->n_docs;
        if ((st = fat5__tok_window(t, f, at, &p, &avail)) != FAT5_OK) return st;
        for (i = 0; i < (uint64_t)avail; i++) {
            uint64_t v = fat5__tok_get_le(p + i * width, (int)width);
            if (v >= vocab)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: id %llu is not below the vocabulary size %llu",
                                 path, (unsigned long long)(FAT5__TOK_HEADER + ((uint64_t)at + i) * width),
                                 (unsigned long long)v, (unsigned long long)vocab);
            if (v == (uint64_t)eos) t->n_docs++;
        }
        at += avail;
        if (at == tf->n && fat5__tok_get_le(p + (size_t)(avail - 1) * width, (int)width) != (uint64_t)eos)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: the last id is not the eos id %ld "
                             "(every document, the last included, ends with it)", path,
                             (unsigned long long)(size - width), (long)eos);
    }
    t->n_ids += tf->n;
    return FAT5_OK;
}

FAT5_API void fat5_tokens_destroy(fat5_tokens *t) {
    int i;
    if (!t) return;
    for (i = 0; i < t->n_files; i++) {
        if (t->files[i].fp) fclose(t->files[i].fp);
        fat5__free(t->ctx, t->files[i].path);
        fat5__free(t->ctx, t->files[i].win_docs);
    }
    fat5__free(t->ctx, t->files);
    fat5__free(t->ctx, t->win);
    fat5__free(t->ctx, t);
}

FAT5_API fat5_status fat5_tokens_load(fat5_ctx *ctx, const char *const *paths, int n_paths,
                                      fat5_tokens **out) {
    fat5_tokens *t;
    fat5_status st;
    int i;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_load: out is NULL");
    *out = NULL;
    if (!paths || n_paths <= 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_load: no files given");
    for (i = 0; i < n_paths; i++)
        if (!paths[i]) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_load: path %d is NULL", i);
    t = FAT5__CAST(fat5_tokens *, fat5__calloc(ctx, 1, sizeof *t));
    if (!t) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokens_load: out of memory");
    t->ctx = ctx;
    t->win_file = -1;
    t->files = FAT5__CAST(fat5__tokfile *, fat5__calloc(ctx, (size_t)n_paths, sizeof *t->files));
    t->win = FAT5__CAST(unsigned char *, fat5__malloc(ctx, FAT5__TOK_WINDOW));
    if (!t->files || !t->win) {
        fat5_tokens_destroy(t);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokens_load: out of memory");
    }
    for (i = 0; i < n_paths; i++) {
        t->n_files = i + 1;
        if ((st = fat5__tok_check(t, i, paths[i])) != FAT5_OK) {
            fat5_tokens_destroy(t);
            return st;
        }
    }
    *out = t;
    return FAT5_OK;
}

FAT5_API int64_t fat5_tokens_count(const fat5_tokens *t) { return t ? t->n_ids : 0; }
FAT5_API int64_t fat5_tokens_doc_count(const fat5_tokens *t) { return t ? t->n_docs : 0; }
FAT5_API int64_t fat5_tokens_vocab_size(const fat5_tokens *t) { return t ? t->vocab : 0; }
FAT5_API int32_t fat5_tokens_eos_id(const fat5_tokens *t) { return t ? t->eos : -1; }

// A token file being written: ids validated as they come, buffered, then the file committed
// atomically (fat5__afile: a temporary file beside it until commit).
struct fat5_tokens_writer {
    fat5_ctx *ctx;
    char *path;
    fat5__afile af;
    int width, open;                  // open: the temporary file exists (not committed, not failed)
    int64_t vocab, n_ids, n_docs;
    int32_t eos, last;                // last: the last id appended, -1 none
    size_t fill;
    unsigned char buf[1 << 16];
};

FAT5_API fat5_status fat5_tokens_writer_create(fat5_ctx *ctx, const char *path, int64_t vocab_size, int32_t eos_id,
                                               int id_width, fat5_tokens_writer **out) {
    unsigned char h[FAT5__TOK_HEADER];
    fat5_tokens_writer *w;
    fat5_status st;
    size_t n;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_writer_create: out is NULL");
    *out = NULL;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_writer_create: path is NULL");
    if (id_width != 2 && id_width != 4)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: id width %d, want 2 or 4", path, id_width);
    if (vocab_size <= 0 || vocab_size > (int64_t)INT32_MAX + 1 || (id_width == 2 && vocab_size > 65536))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: vocabulary size %lld out of range for %d-byte ids%s", path,
                         (long long)vocab_size, id_width, id_width == 2 && vocab_size > 65536 ? " (use 4)" : "");
    if (eos_id < 0 || eos_id >= vocab_size)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: eos id %ld outside the vocabulary of %lld", path,
                         (long)eos_id, (long long)vocab_size);
    w = FAT5__CAST(fat5_tokens_writer *, fat5__calloc(ctx, 1, sizeof *w));
    n = strlen(path);
    if (w) w->path = FAT5__CAST(char *, fat5__malloc(ctx, n + 1));
    if (!w || !w->path) {
        fat5__free(ctx, w);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    memcpy(w->path, path, n + 1);
    w->ctx = ctx;
    w->width = id_width;
    w->vocab = vocab_size;
    w->eos = eos_id;
    w->last = -1;
    fat5__tok_header(h, id_width, vocab_size, eos_id);
    if ((st = fat5__afile_open(ctx, path, &w->af)) != FAT5_OK) {
        fat5_tokens_writer_destroy(w);
        return st;
    }
    w->open = 1;
    if ((st = fat5__afile_write(ctx, &w->af, path, h, sizeof h)) != FAT5_OK) {
        w->open = 0;   // the temporary file is gone (afile_write removes it on failure)
        fat5_tokens_writer_destroy(w);
        return st;
    }
    *out = w;
    return FAT5_OK;
}

static fat5_status fat5__tw_flush(fat5_tokens_writer *w) {
    fat5_status st = w->fill ? fat5__afile_write(w->ctx, &w->af, w->path, w->buf, w->fill) : FAT5_OK;
    w->fill = 0;
    if (st) w->open = 0;
    return st;
}

FAT5_API fat5_status fat5_tokens_writer_append(fat5_tokens_writer *w, const int32_t *ids, int64_t n) {
    fat5_status st;
    int64_t i;
    if (!w) return FAT5_ERR_INVALID_ARG;
    if (!w->open)
        return fat5__err(w->ctx, FAT5_ERR_INVALID_ARG, "%s: the token file was committed or failed; nothing more "
                         "can be appended", w->path);
    if (n < 0 || (!ids && n > 0))
        return fat5__err(w->ctx, FAT5_ERR_INVALID_ARG, "%s: append of %lld ids from %s", w->path, (long long)n,
                         ids ? "an array" : "NULL");
    for (i = 0; i < n; i++)   // all checked before any is kept: a refused append changes nothing
        if (ids[i] < 0 || ids[i] >= w->vocab)
            return fat5__err(w->ctx, FAT5_ERR_INVALID_ARG, "%s: ids[%lld] = %ld is outside the vocabulary of %lld "
                             "(counting every id appended to the file)", w->path, (long long)(w->n_ids + i),
                             (long)ids[i], (long long)w->vocab);
    for (i = 0; i < n; i++) {
        if (w->fill + 4 > sizeof w->buf && (st = fat5__tw_flush(w)) != FAT5_OK) return st;
        fat5__tok_put_le(w->buf + w->fill, (uint64_t)(uint32_t)ids[i], w->width);
        w->fill += (size_t)w->width;
        w->n_docs += ids[i] == w->eos;
    }
    w->n_ids += n;
    if (n) w->last = ids[n - 1];
    return FAT5_OK;
}

FAT5_API int64_t fat5_tokens_writer_count(const fat5_tokens_writer *w) { return w ? w->n_ids : 0; }
FAT5_API int64_t fat5_tokens_writer_doc_count(const fat5_tokens_writer *w) { return w ? w->n_docs : 0; }

FAT5_API fat5_status fat5_tokens_writer_commit(fat5_tokens_writer *w) {
    fat5_status st;
    if (!w) return FAT5_ERR_INVALID_ARG;
    if (!w->open)
        return fat5__err(w->ctx, FAT5_ERR_INVALID_ARG, "%s: the token file was committed or failed already", w->path);
    if (w->n_ids == 0)
        return fat5__err(w->ctx, FAT5_ERR_INVALID_ARG, "%s: no ids (a token file holds at least one document)",
                         w->path);
    if (w->last != w->eos)
        return fat5__err(w->ctx, FAT5_ERR_INVALID_ARG, "%s: the last id %ld is not the eos id %ld (end the last "
                         "document)", w->path, (long)w->last, (long)w->eos);
    if ((st = fat5__tw_flush(w)) != FAT5_OK) return st;
    w->open = 0;
    return fat5__afile_commit(w->ctx, &w->af, w->path);
}

FAT5_API void fat5_tokens_writer_destroy(fat5_tokens_writer *w) {
    if (!w) return;
    if (w->open) fat5__afile_abort(w->ctx, &w->af);   // not committed: no file is left
    fat5__free(w->ctx, w->path);
    fat5__free(w->ctx, w);
}

FAT5_API fat5_status fat5_tokens_write(fat5_ctx *ctx, const char *path, const int32_t *ids, int64_t n,
                                       int64_t vocab_size, int32_t eos_id, int id_width) {
    fat5_tokens_writer *w = NULL;
    fat5_status st;
    if (!path || (!ids && n > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s is NULL", path ? "ids" : "path");
    if ((st = fat5_tokens_writer_create(ctx, path, vocab_size, eos_id, id_width, &w)) != FAT5_OK) return st;
    st = fat5_tokens_writer_append(w, ids, n);
    if (!st) st = fat5_tokens_writer_commit(w);
    fat5_tokens_writer_destroy(w);
    return st;
}
