// =============================================================================================
// ==[6.1] io: safetensors reader ==
// 8-byte little-endian header length, a JSON header, then the data region. The
// reader treats the file as hostile (style_anchors.md §7.8): bounded header, strict JSON, closed
// dtype list, checked shape arithmetic, and tensor ranges that tile the data region exactly.

#define FAT5__ST_MAX_HEADER ((uint64_t)100 << 20)   // 100 MiB

typedef struct fat5__st_kv { const char *key, *val; } fat5__st_kv;   // one __metadata__ entry

struct fat5_st_file {
    fat5_ctx *ctx;
    char *path;
    FILE *fp;
    uint64_t file_size;
    uint64_t data_offset;       // 8 + header length
    fat5_st_tensor *tensors;    // [n_tensors], sorted by name
    int n_tensors;
    fat5__st_kv *meta;          // [n_meta], sorted by key
    int n_meta;
    char *strings;              // names, keys and values, one allocation
};

typedef struct fat5__st_dtype_info { const char *name; unsigned size; } fat5__st_dtype_info;
static const fat5__st_dtype_info fat5__st_dtypes[FAT5_ST_DTYPE_COUNT] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2}, {"BF16", 2},
    {"U32", 4}, {"I32", 4}, {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8},
    {"F8_E4M3", 1}, {"F8_E5M2", 1}
};

FAT5_API const char *fat5_st_dtype_name(fat5_st_dtype t) {
    int i = (int)t;
    return i >= 0 && i < (int)FAT5_ST_DTYPE_COUNT ? fat5__st_dtypes[i].name : "?";
}

FAT5_API size_t fat5_st_dtype_size(fat5_st_dtype t) {
    int i = (int)t;
    return i >= 0 && i < (int)FAT5_ST_DTYPE_COUNT ? fat5__st_dtypes[i].size : 0;
}

static int fat5__seek(FILE *fp, uint64_t off) {
#ifdef _WIN32
    return off <= (uint64_t)INT64_MAX && _fseeki64(fp, (__int64)off, SEEK_SET) == 0;
#else
    off_t o = (off_t)off;
    if (o < 0 || (uint64_t)o != off) return 0;
    return fseeko(fp, o, SEEK_SET) == 0;
#endif
}

// Reads n bytes at offset off; a short read means the file changed or was truncated.
static fat5_status fat5__st_read_at(fat5_st_file *f, uint64_t off, void *buf, size_t n) {
    size_t got;
    if (!fat5__seek(f->fp, off))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: cannot seek to byte %llu: %s", f->path,
                         (unsigned long long)off, strerror(errno));
    got = fread(buf, 1, n, f->fp);
    if (got == n) return FAT5_OK;
    if (ferror(f->fp))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: read failed at byte %llu: %s", f->path,
                         (unsigned long long)(off + got), strerror(errno));
    return fat5__err(f->ctx, FAT5_ERR_IO, "%s: unexpected end of file at byte %llu (the file "
                     "changed or was truncated)", f->path, (unsigned long long)(off + got));
}

// "[2, 3]"; fits in 256 bytes for up to FAT5_ST_MAX_DIMS dimensions
static const char *fat5__st_shape_str(char buf[256], const int64_t *shape, int ndim) {
    size_t len = 0;
    int i;
    buf[len++] = '[';
    for (i = 0; i < ndim && i < FAT5_ST_MAX_DIMS; i++) {
        char num[24];
        int w = snprintf(num, sizeof num, "%lld", (long long)shape[i]);
        if (i) {
            buf[len++] = ',';
            buf[len++] = ' ';
        }
        memcpy(buf + len, num, (size_t)w);
        len += (size_t)w;
    }
    buf[len++] = ']';
    buf[len] = 0;
    return buf;
}

// Validates one tensor entry (rules 4-6) into t; t->name is set by the caller.
static fat5_status fat5__st_parse_tensor(fat5_st_file *f, const fat5__json *v, fat5_st_tensor *t) {
    const fat5__json *dtype = NULL, *shape = NULL, *offs = NULL, *c;
    char nm[128], shp[256], key[64];
    const char *name = fat5__msg_name(nm, sizeof nm, v->key);
    uint64_t numel = 1, nbytes, begin, end, dim;
    int i, k, any_zero = 0, overflow = 0;
    if (v->type != FAT5__J_OBJECT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': expected an object with dtype, "
                         "shape and data_offsets, got %s", f->path, name,
                         fat5__json_type_name(v->type));
    for (c = v->child; c; c = c->next) {
        if (strcmp(c->key, "dtype") == 0) dtype = c;
        else if (strcmp(c->key, "shape") == 0) shape = c;
        else if (strcmp(c->key, "data_offsets") == 0) offs = c;
        else return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': unknown key '%s'", f->path,
                              name, fat5__msg_name(key, sizeof key, c->key));
    }
    if (!dtype || !shape || !offs)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': missing key '%s'", f->path,
                         name, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (dtype->type != FAT5__J_STRING)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': dtype is %s, expected a "
                         "string", f->path, name, fat5__json_type_name(dtype->type));
    for (k = 0; k < (int)FAT5_ST_DTYPE_COUNT; k++)
        if (strcmp(dtype->str, fat5__st_dtypes[k].name) == 0) break;
    if (k == (int)FAT5_ST_DTYPE_COUNT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", f->path,
                         name, fat5__msg_name(key, sizeof key, dtype->str));
    t->dtype = FAT5__CAST(fat5_st_dtype, k);
    if (shape->type != FAT5__J_ARRAY)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape is %s, expected an "
                         "array", f->path, name, fat5__json_type_name(shape->type));
    if (shape->n > FAT5_ST_MAX_DIMS)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape has %zu dimensions; at "
                         "most %d are supported", f->path, name, shape->n, FAT5_ST_MAX_DIMS);
    for (c = shape->child, i = 0; c; c = c->next, i++) {
        if (!fat5__json_as_u64(c, &dim))
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a "
                             "non-negative integer", f->path, name, i);
        if (dim > (uint64_t)INT64_MAX)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape[%d] = %llu is too "
                             "large", f->path, name, i, (unsigned long long)dim);
        t->shape[i] = (int64_t)dim;
        if (dim == 0) any_zero = 1;
        else if (numel > UINT64_MAX / dim) overflow = 1;
        else numel *= dim;
    }
    t->ndim = i;
    if (any_zero) numel = 0;   // exact: a zero dimension makes the product 0 whatever the rest
    if ((!any_zero && overflow) || numel > UINT64_MAX / fat5__st_dtypes[k].size)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape %s overflows (element "
                         "count times %u bytes does not fit in 64 bits)", f->path, name,
                         fat5__st_shape_str(shp, t->shape, t->ndim),
                         fat5__st_dtypes[k].size);
    nbytes = numel * fat5__st_dtypes[k].size;
    if (offs->type != FAT5__J_ARRAY || offs->n != 2 || !fat5__json_as_u64(offs->child, &begin) ||
        !fat5__json_as_u64(offs->child->next, &end))
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets must be an array "
                         "of 2 non-negative integers", f->path, name);
    if (begin > end)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are "
                         "reversed (begin after end)", f->path, name, (unsigned long long)begin,
                         (unsigned long long)end);
    if (end - begin != nbytes)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] hold "
                         "%llu bytes, but dtype %s and shape %s need %llu", f->path, name,
                         (unsigned long long)begin, (unsigned long long)end,
                         (unsigned long long)(end - begin), fat5__st_dtypes[k].name,
                         fat5__st_shape_str(shp, t->shape, t->ndim),
                         (unsigned long long)nbytes);
    t->begin = begin;
    t->end = end;
    return FAT5_OK;
}

static int fat5__st_cmp_offset(const void *a, const void *b) {
    const fat5_st_tensor *x = FAT5__CAST(const fat5_st_tensor *, a);
    const fat5_st_tensor *y = FAT5__CAST(const fat5_st_tensor *, b);
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int fat5__st_cmp_name(const void *a, const void *b) {
    const fat5_st_tensor *x = FAT5__CAST(const fat5_st_tensor *, a);
    const fat5_st_tensor *y = FAT5__CAST(const fat5_st_tensor *, b);
    return strcmp(x->name, y->name);
}

static int fat5__st_cmp_kv(const void *a, const void *b) {
    return strcmp(FAT5__CAST(const fat5__st_kv *, a)->key, FAT5__CAST(const fat5__st_kv *, b)->key);
}

// Rule 7: sorted by offset, the ranges cover [0, data_len) exactly: no gap, no overlap, nothing
// past the end, no trailing bytes. A zero-sized tensor must sit on a boundary.
static fat5_status fat5__st_check_tiling(fat5_st_file *f) {
    uint64_t data_len = f->file_size - f->data_offset, cursor = 0;
    const fat5_st_tensor *prev = NULL;
    char nm[128], nm2[128];
    int i;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, fat5__st_cmp_offset);
    for (i = 0; i < f->n_tensors; i++) {
        const fat5_st_tensor *t = &f->tensors[i];
        if (t->end > data_len)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data range [%llu, %llu) is "
                             "past the end of the file (the data region is %llu bytes)", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)t->begin,
                             (unsigned long long)t->end, (unsigned long long)data_len);
    }
    for (i = 0; i < f->n_tensors; i++) {
        const fat5_st_tensor *t = &f->tensors[i];
        if (t->begin < cursor)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data range [%llu, %llu) "
                             "overlaps tensor '%s' ([%llu, %llu))", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)t->begin,
                             (unsigned long long)t->end,
                             fat5__msg_name(nm2, sizeof nm2, prev ? prev->name : "?"),
                             (unsigned long long)(prev ? prev->begin : 0),
                             (unsigned long long)(prev ? prev->end : 0));
        if (t->begin > cursor)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: gap before tensor '%s': data bytes "
                             "[%llu, %llu) belong to no tensor", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)cursor,
                             (unsigned long long)t->begin);
        if (t->end > t->begin) prev = t;
        cursor = t->end;
    }
    if (cursor != data_len)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: %llu trailing bytes after the last tensor "
                         "(the data region is %llu bytes, the tensors cover %llu)", f->path,
                         (unsigned long long)(data_len - cursor), (unsigned long long)data_len,
                         (unsigned long long)cursor);
    return FAT5_OK;
}

// Builds the tensor and metadata tables from the parsed header (rules 3-7).
static fat5_status fat5__st_build(fat5_st_file *f, const fat5__json *root) {
    const fat5__json *m, *meta = NULL;
    size_t n_t = 0, n_m = 0, bytes = 0, used = 0;
    char nm[128];
    fat5_status st;
    if (root->type != FAT5__J_OBJECT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header is %s, expected an object",
                         f->path, fat5__json_type_name(root->type));
    for (m = root->child; m; m = m->next) {
        if (strcmp(m->key, "__metadata__") == 0) {
            const fat5__json *kv;
            meta = m;
            if (m->type != FAT5__J_OBJECT)
                return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: __metadata__ is %s, expected an "
                                 "object of strings", f->path, fat5__json_type_name(m->type));
            for (kv = m->child; kv; kv = kv->next) {
                if (kv->type != FAT5__J_STRING)
                    return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: __metadata__ value of '%s' "
                                     "is %s; metadata values must be strings", f->path,
                                     fat5__msg_name(nm, sizeof nm, kv->key),
                                     fat5__json_type_name(kv->type));
                if (!fat5__add_ok(bytes, strlen(kv->key) + 1, &bytes) ||
                    !fat5__add_ok(bytes, kv->len + 1, &bytes))
                    return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header too large", f->path);
                n_m++;
            }
        } else {
            n_t++;
            if (!fat5__add_ok(bytes, strlen(m->key) + 1, &bytes))
                return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header too large", f->path);
        }
    }
    if (n_t > (size_t)INT_MAX || n_m > (size_t)INT_MAX)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: too many entries in the header", f->path);
    f->tensors = FAT5__CAST(fat5_st_tensor *, fat5__calloc(f->ctx, n_t, sizeof *f->tensors));
    f->meta = FAT5__CAST(fat5__st_kv *, fat5__calloc(f->ctx, n_m, sizeof *f->meta));
    f->strings = FAT5__CAST(char *, fat5__malloc(f->ctx, bytes));
    if (!f->tensors || !f->meta || !f->strings)
        return fat5__err(f->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the tensor table",
                         f->path);
    for (m = root->child; m; m = m->next) {
        size_t n = strlen(m->key) + 1;
        fat5_st_tensor *t;
        if (m == meta) continue;
        t = &f->tensors[f->n_tensors];
        st = fat5__st_parse_tensor(f, m, t);
        if (st != FAT5_OK) return st;
        memcpy(f->strings + used, m->key, n);
        t->name = f->strings + used;
        used += n;
        f->n_tensors++;
    }
    if (meta) {
        for (m = meta->child; m; m = m->next) {
            size_t nk = strlen(m->key) + 1;
            memcpy(f->strings + used, m->key, nk);
            f->meta[f->n_meta].key = f->strings + used;
            used += nk;
            memcpy(f->strings + used, m->str, m->len + 1);
            f->meta[f->n_meta].val = f->strings + used;
            used += m->len + 1;
            f->n_meta++;
        }
        // by key, for the binary search of fat5_st_metadata_find: O(n log n) whatever the order
        // in the file (the JSON reader already refused duplicate keys)
        qsort(f->meta, (size_t)f->n_meta, sizeof *f->meta, fat5__st_cmp_kv);
    }
    st = fat5__st_check_tiling(f);
    if (st != FAT5_OK) return st;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, fat5__st_cmp_name);
    return FAT5_OK;
}

static fat5_status fat5__st_load(fat5_st_file *f) {
    unsigned char len8[8];
    uint64_t hlen = 0;
    char *hdr;
    fat5__jdoc *doc = NULL;
    fat5_status st;
    int i;
    st = fat5__open_regular(f->ctx, f->path, &f->fp, &f->file_size);
    if (st != FAT5_OK) return st;
    // rules 1-2: the header length, bounded before any arithmetic with it
    if (f->file_size < 8)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: file is too small (%llu bytes) to hold the "
                         "8-byte header length", f->path, (unsigned long long)f->file_size);
    st = fat5__st_read_at(f, 0, len8, 8);
    if (st != FAT5_OK) return st;
    for (i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    // the length is not echoed: for a file of another kind (text, an image) it is 8 bytes of that
    // file read as a number, and a 20-digit figure would only mislead
    if (hlen > FAT5__ST_MAX_HEADER)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: not a safetensors file (the header length in its "
                         "first 8 bytes exceeds the limit of 100 MiB)", f->path);
    if (hlen == 0) return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header is empty", f->path);
    if (hlen > f->file_size - 8)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header length %llu runs past the end of the "
                         "file (%llu bytes)", f->path, (unsigned long long)hlen,
                         (unsigned long long)f->file_size);
    f->data_offset = 8 + hlen;
    hdr = FAT5__CAST(char *, fat5__malloc(f->ctx, (size_t)hlen));
    if (!hdr)
        return fat5__err(f->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the %llu-byte "
                         "header", f->path, (unsigned long long)hlen);
    st = fat5__st_read_at(f, 8, hdr, (size_t)hlen);
    if (st == FAT5_OK && hdr[0] != '{')
        st = fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header does not start with '{'", f->path);
    // depth 4: root object > tensor object > shape array, plus one level of slack for errors
    if (st == FAT5_OK) st = fat5__json_parse(f->ctx, f->path, hdr, (size_t)hlen, 4, &doc);
    fat5__free(f->ctx, hdr);
    if (st != FAT5_OK) return st;
    st = fat5__st_build(f, fat5__json_root(doc));
    fat5__json_free(f->ctx, doc);
    return st;
}

FAT5_API void fat5_st_destroy(fat5_st_file *f) {
    fat5_ctx *ctx;
    if (!f) return;
    ctx = f->ctx;
    if (f->fp) fclose(f->fp);
    fat5__free(ctx, f->path);
    fat5__free(ctx, f->tensors);
    fat5__free(ctx, f->meta);
    fat5__free(ctx, f->strings);
    fat5__free(ctx, f);
}

FAT5_API fat5_status fat5_st_load(fat5_ctx *ctx, const char *path, fat5_st_file **out) {
    fat5_st_file *f;
    fat5_status st;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_load: out is NULL");
    *out = NULL;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_load: path is NULL");
    f = FAT5__CAST(fat5_st_file *, fat5__calloc(ctx, 1, sizeof *f));
    if (!f) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    f->ctx = ctx;
    f->path = fat5__strdup(ctx, path);
    if (!f->path) {
        fat5__free(ctx, f);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    st = fat5__st_load(f);
    if (st != FAT5_OK) {
        fat5_st_destroy(f);
        return st;
    }
    *out = f;
    return FAT5_OK;
}

FAT5_API int fat5_st_tensor_count(const fat5_st_file *f) { return f ? f->n_tensors : 0; }

FAT5_API const fat5_st_tensor *fat5_st_get(const fat5_st_file *f, int i) {
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

FAT5_API int fat5_st_find(const fat5_st_file *f, const char *name) {
    int lo = 0, hi = f && name ? f->n_tensors : 0;
    while (lo < hi) {   // binary search: the table is sorted by name
        int mid = lo + (hi - lo) / 2, c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

FAT5_API int fat5_st_metadata_count(const fat5_st_file *f) { return f ? f->n_meta : 0; }

FAT5_API void fat5_st_metadata_get(const fat5_st_file *f, int i, const char **key,
                                   const char **value) {
    int ok = f && i >= 0 && i < f->n_meta;
    if (key) *key = ok ? f->meta[i].key : NULL;
    if (value) *value = ok ? f->meta[i].val : NULL;
}

FAT5_API const char *fat5_st_metadata_find(const fat5_st_file *f, const char *key) {
    int lo = 0, hi = f && key ? f->n_meta : 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->meta[mid].key, key);
        if (c == 0) return f->meta[mid].val;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

FAT5_API fat5_status fat5_st_read_f32(fat5_st_file *f, int i, float *dst, int64_t n) {
    unsigned char buf[16384];
    const fat5_st_tensor *t;
    char nm[128];
    uint64_t numel, done = 0;
    size_t es;
    if (!f) return FAT5_ERR_INVALID_ARG;
    if (i < 0 || i >= f->n_tensors)
        return fat5__err(f->ctx, FAT5_ERR_INVALID_ARG, "%s: tensor index %d out of range [0, %d)",
                         f->path, i, f->n_tensors);
    t = &f->tensors[i];
    fat5__msg_name(nm, sizeof nm, t->name);
    es = fat5_st_dtype_size(t->dtype);
    numel = (t->end - t->begin) / es;   // exact: checked at open
    if (t->dtype != FAT5_ST_F32 && t->dtype != FAT5_ST_F16 && t->dtype != FAT5_ST_BF16)
        return fat5__err(f->ctx, FAT5_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; fat5 reads "
                         "F32, F16 and BF16", f->path, nm, fat5_st_dtype_name(t->dtype));
    if (n < 0 || (uint64_t)n != numel || (!dst && numel > 0))
        return fat5__err(f->ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s' has %llu elements; got a "
                         "buffer of %lld%s", f->path, nm, (unsigned long long)numel, (long long)n,
                         !dst && numel > 0 ? " (NULL)" : "");
    if (numel == 0) return FAT5_OK;
    if (!fat5__seek(f->fp, f->data_offset + t->begin))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: tensor '%s': cannot seek to its data: %s",
                         f->path, nm, strerror(errno));
    while (done < numel) {
        size_t k = sizeof buf / es, j;
        if (numel - done < k) k = (size_t)(numel - done);
        if (fread(buf, es, k, f->fp) != k)
            return fat5__err(f->ctx, FAT5_ERR_IO, "%s: tensor '%s': %s", f->path, nm,
                             ferror(f->fp) ? strerror(errno)
                                           : "unexpected end of file (the file changed or was "
                                             "truncated)");
        if (t->dtype == FAT5_ST_F32) {
            for (j = 0; j < k; j++) {
                const unsigned char *b = buf + 4 * j;
                uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                             (uint32_t)b[3] << 24;
                dst[done + j] = fat5__bits_to_f32(u);
            }
        } else if (t->dtype == FAT5_ST_BF16) {
            for (j = 0; j < k; j++)
                dst[done + j] = fat5__bf16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
        } else {
            for (j = 0; j < k; j++)
                dst[done + j] = fat5__f16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
        }
        done += k;
    }
    return FAT5_OK;
}

