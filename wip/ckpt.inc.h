// ---------------------------------------------------------------------------------------------
// io: Hugging Face checkpoint directories

static int fat5__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
static int fat5__is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
static int fat5__ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// Tensors a Hugging Face file may carry that are aliases or unused by T5's math.
static int fat5__ignorable_tensor(const char *name) {
    return strcmp(name, "encoder.embed_tokens.weight") == 0 || strcmp(name, "decoder.embed_tokens.weight") == 0 ||
           strcmp(name, "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight") == 0;
}

#define FAT5__MAX_SHARDS 1024

typedef struct fat5__ckpt {
    fat5_st_file *files[FAT5__MAX_SHARDS];
    char *used[FAT5__MAX_SHARDS];     // per file, one flag per tensor
    int n_files;
} fat5__ckpt;

static void fat5__ckpt_close(fat5_ctx *ctx, fat5__ckpt *k) {
    int i;
    for (i = 0; i < k->n_files; i++) {
        fat5_st_close(k->files[i]);
        fat5__free(ctx, k->used[i]);
    }
    k->n_files = 0;
}

static fat5_status fat5__ckpt_add(fat5_ctx *ctx, fat5__ckpt *k, const char *path) {
    fat5_status st;
    int i = k->n_files;
    if (i >= FAT5__MAX_SHARDS) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "more than %d shards", FAT5__MAX_SHARDS);
    if ((st = fat5_st_open(ctx, path, &k->files[i]))) return st;
    k->used[i] = FAT5__CAST(char *, fat5__calloc(ctx, (size_t)fat5_st_count(k->files[i]) + 1, 1));
    k->n_files++;
    if (!k->used[i]) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
    return FAT5_OK;
}

static int fat5__ckpt_find(const fat5__ckpt *k, const char *name, int *file) {
    int i, t;
    for (i = 0; i < k->n_files; i++)
        if ((t = fat5_st_find(k->files[i], name)) >= 0) {
            *file = i;
            return t;
        }
    return -1;
}

// Reads the shard list of a model.safetensors.index.json into k.
static fat5_status fat5__ckpt_open_index(fat5_ctx *ctx, fat5__ckpt *k, const char *dir, const char *index_path) {
    char *text = NULL, path[4096];
    size_t len = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *wm, *e, *root;
    fat5_status st = fat5__read_file(ctx, index_path, (size_t)64 << 20, &text, &len);
    if (st) return st;
    if ((st = fat5__json_parse(ctx, "model.safetensors.index.json", text, len, 8, &doc))) goto done;
    root = fat5__json_root(doc);
    wm = fat5__json_get(root, "weight_map");
    if (!wm || wm->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: no 'weight_map' object", index_path);
        goto done;
    }
    for (e = wm->child; e; e = e->next) {
        const fat5__json *prev;
        int seen = 0;
        if (e->type != FAT5__J_STRING || !e->len || strchr(e->str, '/') || strchr(e->str, '\\') ||
            strcmp(e->str, "..") == 0 || e->str[0] == '.' || !fat5__ends_with(e->str, ".safetensors")) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT,
                           "%s: tensor '%s' maps to '%s', not a .safetensors file name in the same directory",
                           index_path, e->key, e->type == FAT5__J_STRING ? e->str : "(not a string)");
            goto done;
        }
        for (prev = wm->child; prev != e && !seen; prev = prev->next) seen = strcmp(prev->str, e->str) == 0;
        if (seen) continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->str) >= sizeof path) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: path too long", index_path);
            goto done;
        }
        if ((st = fat5__ckpt_add(ctx, k, path))) goto done;
    }
    // every tensor the index names must be in one of the shards
    for (e = wm->child; e; e = e->next) {
        int f;
        if (fat5__ckpt_find(k, e->key, &f) < 0) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' is listed in the index but absent from '%s'",
                           index_path, e->key, e->str);
            goto done;
        }
    }
done:
    fat5__json_free(ctx, doc);
    fat5__free(ctx, text);
    return st;
}

FAT5_API fat5_status fat5_model_load(fat5_ctx *ctx, const char *path, fat5_model **out) {
    fat5__ckpt k;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    char dir[4096], p[4200], *text = NULL;
    size_t len = 0;
    fat5_status st;
    int i, f, t, has_lm_head;
    memset(&k, 0, sizeof k);
    if (!out || !path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_load: NULL argument");
    *out = NULL;
    if (strlen(path) >= sizeof dir - 64) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_load: path too long");
    if (fat5__is_dir(path)) {
        snprintf(dir, sizeof dir, "%s", path);
    } else if (fat5__is_file(path) && fat5__ends_with(path, ".safetensors")) {
        const char *slash = strrchr(path, '/');
        if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        else snprintf(dir, sizeof dir, ".");
    } else {
        return fat5__err(ctx, FAT5_ERR_IO, "%s: not a checkpoint directory or a .safetensors file", path);
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    if ((st = fat5__read_file(ctx, p, (size_t)1 << 20, &text, &len))) return st;
    st = fat5_model_config_from_json(ctx, text, len, &cfg);
    fat5__free(ctx, text);
    if (st) return fat5__err_prefix(ctx, st, "%s: ", p);

    if (!fat5__is_dir(path)) {
        st = fat5__ckpt_add(ctx, &k, path);
    } else {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        if (fat5__is_file(p)) {
            st = fat5__ckpt_add(ctx, &k, p);
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
            if (fat5__is_file(p)) st = fat5__ckpt_open_index(ctx, &k, dir, p);
            else st = fat5__err(ctx, FAT5_ERR_IO,
                                "%s: no model.safetensors or model.safetensors.index.json (PyTorch .bin files are "
                                "not read; convert them to safetensors)", dir);
        }
    }
    if (st) goto fail;

    // lm_head: the file's own when it has one, else shared.weight
    has_lm_head = fat5__ckpt_find(&k, "lm_head.weight", &f) >= 0;
    cfg.tie_word_embeddings = !has_lm_head;
    if ((st = fat5__model_alloc(ctx, &cfg, !has_lm_head, &m))) goto fail;
    for (i = 0; i < m->n_params; i++) {
        const fat5__param *pr = &m->params[i];
        const fat5_st_tensor *ti;
        int ok_shape;
        t = fat5__ckpt_find(&k, pr->name, &f);
        if (t < 0 && i == m->shared) {
            t = fat5__ckpt_find(&k, "encoder.embed_tokens.weight", &f);
            if (t < 0) t = fat5__ckpt_find(&k, "decoder.embed_tokens.weight", &f);
        }
        if (t < 0) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: missing tensor '%s'", dir, pr->name);
            goto fail;
        }
        ti = fat5_st_get(k.files[f], t);
        if (ti->dtype != FAT5_ST_F32 && ti->dtype != FAT5_ST_F16 && ti->dtype != FAT5_ST_BF16) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", dir,
                           ti->name, fat5_st_dtype_name(ti->dtype));
            goto fail;
        }
        ok_shape = ti->ndim == pr->ndim && ti->shape[0] == pr->shape[0] && (pr->ndim == 1 || ti->shape[1] == pr->shape[1]);
        if (!ok_shape) {
            char got[160];
            int d, o = 0;
            got[0] = 0;
            for (d = 0; d < ti->ndim && o < 120; d++)
                o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)ti->shape[d]);
            if (pr->ndim == 2)
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; config.json implies [%lld, %lld]",
                               dir, ti->name, got, (long long)pr->shape[0], (long long)pr->shape[1]);
            else
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; config.json implies [%lld]", dir,
                               ti->name, got, (long long)pr->shape[0]);
            goto fail;
        }
        if ((st = fat5_st_read_f32(k.files[f], t, m->w + pr->offset, (int64_t)pr->numel))) goto fail;
        k.used[f][t] = 1;
    }
    for (f = 0; f < k.n_files; f++)
        for (t = 0; t < fat5_st_count(k.files[f]); t++) {
            const char *name = fat5_st_get(k.files[f], t)->name;
            if (!k.used[f][t] && !fat5__ignorable_tensor(name)) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT,
                               "%s: unexpected tensor '%s' (not a parameter of the model config.json describes)", dir,
                               name);
                goto fail;
            }
        }
    fat5__ckpt_close(ctx, &k);
    if ((st = fat5__model_place(m))) goto fail;
    *out = m;
    return FAT5_OK;
fail:
    fat5__ckpt_close(ctx, &k);
    fat5_model_destroy(m);
    return st;
}

FAT5_API fat5_status fat5_model_save(fat5_model *m, const char *dir) {
    fat5_ctx *ctx = m->ctx;
    fat5_st_write_tensor *t;
    char path[4200], *json = NULL;
    size_t json_len = 0;
    const char *meta[4];
    fat5_status st;
    int i;
    if (!dir || strlen(dir) >= 4096) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_save: bad directory");
    if (!fat5__is_dir(dir)) {
#ifdef _WIN32
        return fat5__err(ctx, FAT5_ERR_IO, "%s: no such directory", dir);
#else
        if (mkdir(dir, 0777) != 0 && !fat5__is_dir(dir))
            return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
#endif
    }
#ifndef FAT5_NO_CUDA
    if (m->gm && (st = fat5__gpu_pull_params(m))) return st;
#endif
    if ((st = fat5_model_config_to_json(ctx, &m->cfg, &json, &json_len))) return st;
    t = FAT5__CAST(fat5_st_write_tensor *, fat5__calloc(ctx, (size_t)m->n_params, sizeof *t));
    if (!t) {
        fat5__free(ctx, json);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_save: out of memory");
    }
    for (i = 0; i < m->n_params; i++) {
        t[i].name = m->params[i].name;
        t[i].ndim = m->params[i].ndim;
        t[i].shape[0] = m->params[i].shape[0];
        t[i].shape[1] = m->params[i].shape[1];
        t[i].data = m->w + m->params[i].offset;
    }
    meta[0] = "format";
    meta[1] = "pt";
    meta[2] = "fat5_version";
    meta[3] = FAT5_VERSION_STRING;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st = fat5_st_write(ctx, path, t, m->n_params, meta, 2);
    if (st == FAT5_OK) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        st = fat5_write_file_atomic(ctx, path, json, json_len);
    }
    fat5__free(ctx, t);
    fat5__free(ctx, json);
    return st;
}
