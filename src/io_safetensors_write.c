// =============================================================================================
// ==[6.2] io: safetensors writer ==
// The writer: fp32 tensors in name order, __metadata__ first, the header padded with
// spaces to a multiple of 8 bytes, little-endian data. Same input, same bytes.

static int fat5__st_wcmp(const void *a, const void *b) {
    const fat5_st_write_tensor *x = *FAT5__CAST(const fat5_st_write_tensor *const *, a);
    const fat5_st_write_tensor *y = *FAT5__CAST(const fat5_st_write_tensor *const *, b);
    return strcmp(x->name, y->name);
}

static int fat5__st_kcmp(const void *a, const void *b) {
    return strcmp(*FAT5__CAST(const char *const *, a), *FAT5__CAST(const char *const *, b));
}

// Checks the arguments of fat5_st_write and sorts the tensors by name into order.
static fat5_status fat5__st_write_check(fat5_ctx *ctx, const char *path,
                                        const fat5_st_write_tensor *t, int n,
                                        const char *const *meta_kv, int n_meta,
                                        const fat5_st_write_tensor **order, const int64_t *const *i64) {
    const char **keys;
    char nm[128];
    uint64_t total = 0;
    int i, d;
    for (i = 0; i < n; i++) {
        uint64_t numel = 1;
        const char *name = t[i].name;
        if (!name || !name[0])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d has %s name", path, i,
                             name ? "an empty" : "a NULL");
        if (strcmp(name, "__metadata__") == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d: the name __metadata__ is "
                             "reserved", path, i);
        if (!fat5__utf8_valid(name))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d: the name is not valid "
                             "UTF-8", path, i);
        fat5__msg_name(nm, sizeof nm, name);
        if (t[i].ndim < 0 || t[i].ndim > FAT5_ST_MAX_DIMS)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': ndim %d is not in "
                             "[0, %d]", path, nm, t[i].ndim, FAT5_ST_MAX_DIMS);
        for (d = 0; d < t[i].ndim; d++) {
            int64_t s = t[i].shape[d];
            if (s < 0)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': shape[%d] = %lld is "
                                 "negative", path, nm, d, (long long)s);
            if (s != 0 && numel > UINT64_MAX / 8 / (uint64_t)s)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': shape overflows",
                                 path, nm);
            numel *= (uint64_t)s;
        }
        if (numel > 0 && !t[i].data && !(i64 && i64[i]))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': data is NULL", path, nm);
        if (total + (i64 && i64[i] ? 8 : 4) * numel < total)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the tensors add up to more than "
                             "2^64 bytes", path);
        total += (i64 && i64[i] ? 8 : 4) * numel;
        order[i] = &t[i];
    }
    qsort(FAT5__CAST(void *, order), (size_t)n, sizeof *order, fat5__st_wcmp);
    for (i = 1; i < n; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: duplicate tensor name '%s'", path,
                             fat5__msg_name(nm, sizeof nm, order[i]->name));
    if (n_meta == 0) return FAT5_OK;
    keys = FAT5__CAST(const char **, fat5__calloc(ctx, (size_t)n_meta, sizeof *keys));
    if (!keys) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (i = 0; i < n_meta; i++) {
        const char *k = meta_kv[2 * i], *v = meta_kv[2 * i + 1];
        const char *bad = !k ? "the key is NULL" : !v ? "the value is NULL"
                          : !fat5__utf8_valid(k) ? "the key is not valid UTF-8"
                          : !fat5__utf8_valid(v) ? "the value is not valid UTF-8" : NULL;
        if (bad) {
            fat5__free(ctx, FAT5__CAST(void *, keys));
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: metadata entry %d: %s", path, i, bad);
        }
        keys[i] = k;
    }
    qsort(FAT5__CAST(void *, keys), (size_t)n_meta, sizeof *keys, fat5__st_kcmp);
    for (i = 1; i < n_meta; i++) {
        if (strcmp(keys[i - 1], keys[i]) == 0) {
            fat5__msg_name(nm, sizeof nm, keys[i]);
            fat5__free(ctx, FAT5__CAST(void *, keys));
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: duplicate metadata key '%s'", path,
                             nm);
        }
    }
    fat5__free(ctx, FAT5__CAST(void *, keys));
    return FAT5_OK;
}

static uint64_t fat5__st_wnumel(const fat5_st_write_tensor *t) {
    uint64_t numel = 1;
    int d;
    for (d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
    return numel;
}

// fp32 to IEEE half, rounded to nearest even (as torch's .half()): above 65504 (after rounding) to
// infinity, below 2^-14 to the subnormals, NaN to a quiet NaN of the same sign
static uint16_t fat5__f32_to_f16(float f) {
    uint32_t x, sign, mag;
    memcpy(&x, &f, 4);
    sign = (x >> 16) & 0x8000u;
    mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);                  // NaN
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);                 // rounds past 65504: inf
    if (mag >= 0x38800000u) {                                                  // normal: 2^-14 and up
        uint32_t r = mag - 0x38000000u;                                        // rebias 127 -> 15
        r = r + 0x0fffu + ((r >> 13) & 1u);                                    // to nearest even, 13 bits off
        return (uint16_t)(sign | (r >> 13));
    }
    if (mag < 0x33000000u) return (uint16_t)sign;                              // below half the least subnormal
    {   // subnormal: the significand with its hidden bit, shifted to 2^-24 units, to nearest even
        uint32_t e = mag >> 23, m = (mag & 0x7fffffu) | 0x800000u, shift = 126u - e;   // 14..24
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
}

// fat5_st_write, where i64 (unless NULL) marks I64 tensors: i64[i] not NULL holds tensor i's values
// (its data is then ignored). As the safetensors library lays data out (by alignment, then name),
// the I64 tensors come first, then the float ones, each group in name order.
// fd: the float tensors' dtype in the file: FAT5_ST_F32, or FAT5_ST_BF16 / FAT5_ST_F16 (rounded to
// nearest even).
static fat5_status fat5__st_write(fat5_ctx *ctx, const char *path, const fat5_st_write_tensor *t, int n_tensors,
                                  const char *const *meta_kv, int n_meta, const int64_t *const *i64, fat5_st_dtype fd) {
    int half = fd == FAT5_ST_BF16 || fd == FAT5_ST_F16;
    const fat5_st_write_tensor **order;
    unsigned char buf[16384];
    fat5__sb h;
    fat5__afile a;
    uint64_t off = 0, hlen;
    fat5_status st;
    int i, d;
    if (fd != FAT5_ST_F32 && !half)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_write: float dtype %s", fat5_st_dtype_name(fd));
    if (!path || n_tensors < 0 || n_meta < 0 || (n_tensors > 0 && !t) || (n_meta > 0 && !meta_kv))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_write: %s",
                         !path ? "path is NULL" : n_tensors < 0 || n_meta < 0 ? "negative count"
                         : !t && n_tensors > 0 ? "tensors is NULL" : "meta_kv is NULL");
    order = FAT5__CAST(const fat5_st_write_tensor **,
                       fat5__calloc(ctx, (size_t)n_tensors, sizeof *order));
    if (!order) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    st = fat5__st_write_check(ctx, path, t, n_tensors, meta_kv, n_meta, order, i64);
    if (st != FAT5_OK) {
        fat5__free(ctx, FAT5__CAST(void *, order));
        return st;
    }
    if (i64) {   // a stable partition of the name order: I64 tensors first
        int n8 = 0, j;
        for (i = 0; i < n_tensors; i++)
            if (i64[order[i] - t]) {
                const fat5_st_write_tensor *x = order[i];
                for (j = i; j > n8; j--) order[j] = order[j - 1];
                order[n8++] = x;
            }
    }
    // the header
    fat5__sb_init(&h, ctx);
    fat5__sb_puts(&h, "{");
    if (n_meta > 0) {
        fat5__sb_puts(&h, "\"__metadata__\":{");
        for (i = 0; i < n_meta; i++) {
            if (i) fat5__sb_puts(&h, ",");
            fat5__sb_json_string(&h, meta_kv[2 * i]);
            fat5__sb_puts(&h, ":");
            fat5__sb_json_string(&h, meta_kv[2 * i + 1]);
        }
        fat5__sb_puts(&h, "}");
    }
    for (i = 0; i < n_tensors; i++) {
        const int64_t *v64 = i64 ? i64[order[i] - t] : NULL;
        uint64_t nbytes = fat5__st_wnumel(order[i]) * (v64 ? 8 : half ? 2 : 4);
        if (i || n_meta > 0) fat5__sb_puts(&h, ",");
        fat5__sb_json_string(&h, order[i]->name);
        fat5__sb_puts(&h, v64                  ? ":{\"dtype\":\"I64\",\"shape\":["
                          : fd == FAT5_ST_BF16 ? ":{\"dtype\":\"BF16\",\"shape\":["
                          : fd == FAT5_ST_F16  ? ":{\"dtype\":\"F16\",\"shape\":["
                                               : ":{\"dtype\":\"F32\",\"shape\":[");
        for (d = 0; d < order[i]->ndim; d++)
            fat5__sb_printf(&h, "%s%lld", d ? "," : "", (long long)order[i]->shape[d]);
        fat5__sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                        (unsigned long long)(off + nbytes));
        off += nbytes;   // no overflow: each tensor is in memory
    }
    fat5__sb_puts(&h, "}");
    while (!h.oom && h.len % 8 != 0) fat5__sb_puts(&h, " ");
    if (h.oom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the header", path);
    } else if ((uint64_t)h.len > FAT5__ST_MAX_HEADER) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the header would be %zu bytes, over the "
                       "100 MiB a reader accepts", path, h.len);
    }
    if (st == FAT5_OK) st = fat5__afile_open(ctx, path, &a);
    if (st == FAT5_OK) {   // header length and header
        hlen = h.len;
        for (i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen >> (8 * i));
        st = fat5__afile_write(ctx, &a, path, buf, 8);
        if (st == FAT5_OK) st = fat5__afile_write(ctx, &a, path, h.buf, h.len);
    }
    for (i = 0; st == FAT5_OK && i < n_tensors; i++) {   // data, little-endian, in chunks
        uint64_t numel = fat5__st_wnumel(order[i]), done = 0;
        const int64_t *v64 = i64 ? i64[order[i] - t] : NULL;
        if (v64) {   // 8 bytes an element, little-endian
            for (; st == FAT5_OK && done < numel; done++) {
                uint64_t u = (uint64_t)v64[done];
                for (d = 0; d < 8; d++) buf[d] = (unsigned char)(u >> (8 * d));
                st = fat5__afile_write(ctx, &a, path, buf, 8);
            }
            continue;
        }
        while (st == FAT5_OK && done < numel && half) {
            size_t k = sizeof buf / 2, j;
            if (numel - done < k) k = (size_t)(numel - done);
            for (j = 0; j < k; j++) {
                float x = order[i]->data[done + j];
                uint16_t u = fd == FAT5_ST_BF16 ? fat5__f32_to_bf16(x) : fat5__f32_to_f16(x);
                buf[2 * j] = (unsigned char)u;
                buf[2 * j + 1] = (unsigned char)(u >> 8);
            }
            st = fat5__afile_write(ctx, &a, path, buf, 2 * k);
            done += k;
        }
        while (st == FAT5_OK && done < numel) {
            size_t k = sizeof buf / 4, j;
            if (numel - done < k) k = (size_t)(numel - done);
            for (j = 0; j < k; j++) {
                uint32_t u;
                memcpy(&u, &order[i]->data[done + j], 4);
                buf[4 * j] = (unsigned char)u;
                buf[4 * j + 1] = (unsigned char)(u >> 8);
                buf[4 * j + 2] = (unsigned char)(u >> 16);
                buf[4 * j + 3] = (unsigned char)(u >> 24);
            }
            st = fat5__afile_write(ctx, &a, path, buf, 4 * k);
            done += k;
        }
    }
    if (st == FAT5_OK) st = fat5__afile_commit(ctx, &a, path);
    fat5__sb_free(&h);
    fat5__free(ctx, FAT5__CAST(void *, order));
    return st;
}

FAT5_API fat5_status fat5_st_write(fat5_ctx *ctx, const char *path, const fat5_st_write_tensor *t,
                                   int n_tensors, const char *const *meta_kv, int n_meta) {
    return fat5__st_write(ctx, path, t, n_tensors, meta_kv, n_meta, NULL, FAT5_ST_F32);
}

