// =============================================================================================
// ==[6.4] io: Hugging Face checkpoint directories ==

// Creates dir unless it exists (one level; the parent must exist).
static fat5_status fat5__mkdir(fat5_ctx *ctx, const char *dir) {
    if (fat5__is_dir(dir)) return FAT5_OK;
#ifdef _WIN32
    return fat5__err(ctx, FAT5_ERR_IO, "%s: no such directory", dir);
#else
    if (fat5__fs_mkdir(dir) != 0) {
        int e = errno;   // before the check below, whose stat() may change it
        if (!fat5__is_dir(dir))
            return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot create directory: %s", dir, strerror(e));
    }
    return FAT5_OK;
#endif
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
// T5ForSequenceClassification and T5ForTokenClassification keep them under "transformer.".
static int fat5__ignorable_tensor(const char *name) {
    if (strncmp(name, "transformer.", 12) == 0) name += 12;
    return strcmp(name, "encoder.embed_tokens.weight") == 0 || strcmp(name, "decoder.embed_tokens.weight") == 0 ||
           strcmp(name, "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight") == 0;
}

// Tensors of another head that fat5_model_load_head leaves behind: the LM's output projection,
// the decoder (for an encoder-only head) and the other heads' layers.
static int fat5__other_head_tensor(const char *name) {
    if (strncmp(name, "transformer.", 12) == 0) name += 12;
    return strcmp(name, "lm_head.weight") == 0 || strncmp(name, "decoder.", 8) == 0 ||
           strncmp(name, "classification_head.", 20) == 0 || strncmp(name, "classifier.", 11) == 0 ||
           strncmp(name, "qa_outputs.", 11) == 0;
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
        fat5_st_destroy(k->files[i]);
        fat5__free(ctx, k->used[i]);
    }
    k->n_files = 0;
}

static fat5_status fat5__ckpt_add(fat5_ctx *ctx, fat5__ckpt *k, const char *path) {
    fat5_status st;
    int i = k->n_files;
    if (i >= FAT5__MAX_SHARDS) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "more than %d shards", FAT5__MAX_SHARDS);
    if ((st = fat5_st_load(ctx, path, &k->files[i]))) return st;
    k->used[i] = FAT5__CAST(char *, fat5__calloc(ctx, (size_t)fat5_st_tensor_count(k->files[i]) + 1, 1));
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

// The shard list of a model.safetensors.index.json: every distinct shard once, in name order
// (sorted, then adjacent duplicates skipped: O(n log n) for an index of any size), each checked to
// be a .safetensors name in the same directory. *shard (fat5__free) points into *doc's strings;
// *wm is the weight map. On failure nothing is left to free.
static fat5_status fat5__ckpt_index(fat5_ctx *ctx, const char *index_path, char **text_out, fat5__jdoc **doc_out,
                                    const fat5__json **wm_out, const char ***shard_out, size_t *n_out) {
    char *text = NULL, nm[128], sh[128];
    const char **shard = NULL;
    size_t len = 0, n = 0, n_shards = 0, i;
    fat5__jdoc *doc = NULL;
    const fat5__json *wm, *e, *root;
    fat5_status st = fat5__read_file(ctx, index_path, (size_t)64 << 20, &text, &len);
    if (st) return st;
    if ((st = fat5__json_parse(ctx, "model.safetensors.index.json", text, len, 8, &doc))) goto fail;
    root = fat5__json_root(doc);
    wm = fat5__json_get(root, "weight_map");
    if (!wm || wm->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: no 'weight_map' object", index_path);
        goto fail;
    }
    shard = FAT5__CAST(const char **, fat5__calloc(ctx, wm->n ? wm->n : 1, sizeof *shard));
    if (!shard) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        goto fail;
    }
    for (e = wm->child; e; e = e->next) {
        if (e->type != FAT5__J_STRING || !e->len || strchr(e->str, '/') || strchr(e->str, '\\') ||
            e->str[0] == '.' || !fat5__ends_with(e->str, ".safetensors") || !fat5__msg_safe(e->str)) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT,
                           "%s: tensor '%s' maps to '%s', not a .safetensors file name in the same directory",
                           index_path, fat5__msg_name(nm, sizeof nm, e->key),
                           e->type == FAT5__J_STRING ? fat5__msg_name(sh, sizeof sh, e->str) : "(not a string)");
            goto fail;
        }
        shard[n++] = e->str;
    }
    qsort(FAT5__CAST(void *, shard), n, sizeof *shard, fat5__st_kcmp);
    for (i = 0; i < n; i++)
        if (i == 0 || strcmp(shard[n_shards - 1], shard[i]) != 0) shard[n_shards++] = shard[i];
    if (n_shards == 0) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: the weight map names no tensor", index_path);
        goto fail;
    }
    if (n_shards > FAT5__MAX_SHARDS) {
        st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: the index names %zu shard files; at most %d are supported",
                       index_path, n_shards, FAT5__MAX_SHARDS);
        goto fail;
    }
    *text_out = text;
    *doc_out = doc;
    *wm_out = wm;
    *shard_out = shard;
    *n_out = n_shards;
    return FAT5_OK;
fail:
    fat5__free(ctx, FAT5__CAST(void *, shard));
    fat5__json_free(ctx, doc);
    fat5__free(ctx, text);
    return st;
}

// Opens every shard of a model.safetensors.index.json into k.
static fat5_status fat5__ckpt_open_index(fat5_ctx *ctx, fat5__ckpt *k, const char *dir, const char *index_path) {
    char *text = NULL, path[4096], nm[128], sh[128];
    const char **shard = NULL;
    size_t n_shards = 0, i;
    fat5__jdoc *doc = NULL;
    const fat5__json *wm = NULL, *e;
    fat5_status st = fat5__ckpt_index(ctx, index_path, &text, &doc, &wm, &shard, &n_shards);
    if (st) return st;
    for (i = 0; i < n_shards; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, shard[i]) >= sizeof path) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: path too long", index_path);
            goto done;
        }
        if ((st = fat5__ckpt_add(ctx, k, path))) goto done;
    }
    // every tensor the index names must be in the shard it names (k->files[i] holds shard[i])
    for (e = wm->child; e; e = e->next) {
        const char **at = FAT5__CAST(const char **, bsearch(&e->str, FAT5__CAST(const void *, shard), n_shards,
                                                            sizeof *shard, fat5__st_kcmp));
        if (!at || fat5_st_find(k->files[at - shard], e->key) < 0) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' is listed in the index but absent from '%s'",
                           index_path, fat5__msg_name(nm, sizeof nm, e->key), fat5__msg_name(sh, sizeof sh, e->str));
            goto done;
        }
    }
done:
    fat5__free(ctx, FAT5__CAST(void *, shard));
    fat5__json_free(ctx, doc);
    fat5__free(ctx, text);
    return st;
}

FAT5_API fat5_status fat5_model_weight_files(fat5_ctx *ctx, const char *dir, char **out, size_t *len, int *n_files) {
    char p[4096], *text = NULL, *buf;
    const char **shard = NULL;
    size_t n_shards = 0, i, total = 0, at = 0;
    fat5__jdoc *doc = NULL;
    const fat5__json *wm = NULL;
    fat5_status st;
    if (!out || !len || !n_files) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_weight_files: NULL argument");
    *out = NULL;
    *len = 0;
    *n_files = 0;
    if (!dir) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_weight_files: dir is NULL");
    if (!fat5__is_dir(dir)) return fat5__err(ctx, FAT5_ERR_IO, "%s: not a directory", dir);
    if ((size_t)snprintf(p, sizeof p, "%s/model.safetensors", dir) >= sizeof p)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: path too long", dir);
    if (fat5__is_file(p)) {
        static const char one[] = "model.safetensors";
        n_shards = 1;
        total = sizeof one;
        if (!(buf = FAT5__CAST(char *, fat5__malloc(ctx, total))))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
        memcpy(buf, one, total);
    } else {
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        if (!fat5__is_file(p))
            return fat5__err(ctx, FAT5_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
        if ((st = fat5__ckpt_index(ctx, p, &text, &doc, &wm, &shard, &n_shards))) return st;
        for (i = 0; i < n_shards; i++) total += strlen(shard[i]) + 1;
        if ((buf = FAT5__CAST(char *, fat5__malloc(ctx, total))) != NULL)
            for (i = 0; i < n_shards; i++) {
                size_t k = strlen(shard[i]) + 1;
                memcpy(buf + at, shard[i], k);
                at += k;
            }
        fat5__free(ctx, FAT5__CAST(void *, shard));
        fat5__json_free(ctx, doc);
        fat5__free(ctx, text);
        if (!buf) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", p);
    }
    *out = buf;
    *len = total;
    *n_files = (int)n_shards;
    return FAT5_OK;
}

// Matches the parameter table of cfg against the open files without allocating any weights:
// every parameter must be present with the shape cfg implies and a float dtype, and every tensor
// of the files must be a parameter (or an ignorable alias). On success *loc holds, per parameter,
// its (file, tensor) pair: (*loc)[2 i], (*loc)[2 i + 1]; free with fat5__free.
// FAT5's FIRE keeps its L0 as a fixed 0-d I64 tensor, init_L, beside each stack's MLP; fat5 takes
// L0 from relative_attention_max_distance (FAT5 creates init_L from it) and writes init_L back.
static void fat5__fire_init_l_name(char *out, size_t n, const char *stack) {
    snprintf(out, n, "%s.block.0.self_attention_layer.self_attention.pe_encoding.init_L", stack);
}

// A FIRE checkpoint's init_L tensors, when present: 0-d integers equal to the config's L0.
static fat5_status fat5__ckpt_check_init_l(fat5_ctx *ctx, fat5__ckpt *k, const fat5_model_config *cfg,
                                           const char *dir) {
    char nm[96];
    int s, f, t;
    for (s = 0; s < 2; s++) {
        const fat5_st_tensor *ti;
        unsigned char b[8];
        int64_t v = 0;
        size_t es, e;
        fat5_status st;
        fat5__fire_init_l_name(nm, sizeof nm, s ? "decoder" : "encoder");
        if ((t = fat5__ckpt_find(k, nm, &f)) < 0) continue;
        ti = fat5_st_get(k->files[f], t);
        if ((ti->dtype != FAT5_ST_I64 && ti->dtype != FAT5_ST_I32) || ti->ndim != 0)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' is %s with %d dims; FIRE's init_L is a 0-d integer",
                             dir, nm, fat5_st_dtype_name(ti->dtype), ti->ndim);
        es = fat5_st_dtype_size(ti->dtype);
        if ((st = fat5__st_read_at(k->files[f], k->files[f]->data_offset + ti->begin, b, es))) return st;
        for (e = 0; e < es; e++) v |= (int64_t)((uint64_t)b[e] << (8 * e));
        if (es == 4) v = (int64_t)(int32_t)(uint32_t)v;
        if (v != cfg->rel_max_distance)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' = %lld differs from config.json's "
                             "relative_attention_max_distance %lld (FIRE's L0)", dir, nm, (long long)v,
                             (long long)cfg->rel_max_distance);
        k->used[f][t] = 1;
    }
    return FAT5_OK;
}

// Finds every parameter of the model cfg describes in the checkpoint: loc[2 i], loc[2 i + 1] =
// file and tensor of parameter i. Shapes and dtypes are checked, and a tensor that is no
// parameter is an error. With `other_head` (fat5_model_load_head) the stacks may lie with or
// without "transformer.", a head tensor that is missing or of another shape gets loc -1 (the
// caller initialises it), and the tensors of another head are left unread.
static fat5_status fat5__ckpt_match(fat5_ctx *ctx, fat5__ckpt *k, const fat5_model_config *cfg, int lm_head_tied,
                                    int other_head, const char *dir, int **loc, int *n_loc) {
    fat5_model *probe;
    fat5_status st;
    char nm[128], got[160];
    int i, f, t;
    *loc = NULL;
    *n_loc = 0;
    if ((st = fat5_model_config_validate(ctx, cfg))) return st;
    probe = FAT5__CAST(fat5_model *, fat5__calloc(ctx, 1, sizeof *probe));
    if (!probe) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
    probe->ctx = ctx;
    probe->cfg = *cfg;
    probe->lm_head_tied = lm_head_tied;
    if ((st = fat5__build_params(probe))) goto done;   // the table only: names and shapes
    *loc = FAT5__CAST(int *, fat5__calloc(ctx, (size_t)probe->n_params, 2 * sizeof(int)));
    if (!*loc) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
        goto done;
    }
    for (i = 0; i < probe->n_params && st == FAT5_OK; i++) {
        const fat5__param *pr = &probe->params[i];
        const fat5_st_tensor *ti;
        int is_head = i == probe->hd_w || i == probe->hd_b || i == probe->ho_w || i == probe->ho_b;
        const char *pre = strncmp(pr->io_name, "transformer.", 12) == 0 ? "transformer." : "";
        t = fat5__ckpt_find(k, pr->io_name, &f);
        if (t < 0 && other_head && !is_head) {   // the stacks under the other prefix
            char alt[160];
            snprintf(alt, sizeof alt, "%s%s", *pre ? "" : "transformer.", pr->io_name + strlen(pre));
            t = fat5__ckpt_find(k, alt, &f);
            if (t >= 0) pre = *pre ? "" : "transformer.";
        }
        if (t < 0 && i == probe->shared) {   // transformers' tied aliases: the encoder's table, then the decoder's
            int a;                             // (with other_head, under either prefix)
            for (a = 0; a < (other_head ? 4 : 2) && t < 0; a++) {
                const char *p2 = a < 2 ? pre : *pre ? "" : "transformer.";
                snprintf(nm, sizeof nm, "%s%s.embed_tokens.weight", p2, a % 2 ? "decoder" : "encoder");
                t = fat5__ckpt_find(k, nm, &f);
            }
        }
        if (t >= 0 && other_head && is_head) {   // a head of another size: made anew
            ti = fat5_st_get(k->files[f], t);
            if (ti->ndim != pr->ndim || ti->shape[0] != pr->shape[0] || (pr->ndim == 2 && ti->shape[1] != pr->shape[1]))
                t = -1;
        }
        if (t < 0 && other_head && is_head) {
            (*loc)[2 * i] = (*loc)[2 * i + 1] = -1;
            continue;
        }
        if (t < 0) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: missing tensor '%s'%s", dir, pr->io_name,
                           i == probe->lm_head && !lm_head_tied ? ": config.json sets tie_word_embeddings false, "
                           "so the output projection is not shared.weight" : "");
            break;
        }
        ti = fat5_st_get(k->files[f], t);
        fat5__msg_name(nm, sizeof nm, ti->name);
        if (ti->dtype != FAT5_ST_F32 && ti->dtype != FAT5_ST_F16 && ti->dtype != FAT5_ST_BF16) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16", dir,
                           nm, fat5_st_dtype_name(ti->dtype));
            break;
        }
        if (ti->ndim != pr->ndim || ti->shape[0] != pr->shape[0] || (pr->ndim == 2 && ti->shape[1] != pr->shape[1])) {
            int d, o = 0;
            got[0] = 0;
            for (d = 0; d < ti->ndim && o < 120; d++)
                o += snprintf(got + o, sizeof got - (size_t)o, "%s%lld", d ? ", " : "", (long long)ti->shape[d]);
            if (pr->ndim == 2)
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; config.json implies [%lld, %lld]",
                               dir, nm, got, (long long)pr->shape[0], (long long)pr->shape[1]);
            else if (pr->ndim == 0)
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; expected a scalar (shape [])", dir,
                               nm, got);
            else
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' has shape [%s]; config.json implies [%lld]", dir,
                               nm, got, (long long)pr->shape[0]);
            break;
        }
        (*loc)[2 * i] = f;
        (*loc)[2 * i + 1] = t;
        k->used[f][t] = 1;
    }
    if (st == FAT5_OK && cfg->pos_kind == FAT5_POS_FIRE) st = fat5__ckpt_check_init_l(ctx, k, cfg, dir);
    for (f = 0; f < k->n_files && st == FAT5_OK; f++)
        for (t = 0; t < fat5_st_tensor_count(k->files[f]); t++) {
            const char *name = fat5_st_get(k->files[f], t)->name;
            if (!k->used[f][t] && !fat5__ignorable_tensor(name) && !(other_head && fat5__other_head_tensor(name))) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT,
                               "%s: unexpected tensor '%s' (not a parameter of the model config.json describes)", dir,
                               fat5__msg_name(nm, sizeof nm, name));
                break;
            }
        }
    if (st == FAT5_OK) *n_loc = probe->n_params;
done:
    if (st != FAT5_OK) {
        fat5__free(ctx, *loc);
        *loc = NULL;
    }
    fat5_model_destroy(probe);
    return st;
}

// FAT5 checkpoints may carry encoder.embed_tokens.weight and decoder.embed_tokens.weight beside
// shared.weight; FAT5 embeds both stacks with one table, so they must hold exactly shared's values
// (m->w, already read). Hugging Face T5 files keep treating them as unread aliases.
static fat5_status fat5__ckpt_check_aliases(fat5_ctx *ctx, fat5__ckpt *k, const fat5_model *m, const char *dir) {
    static const char *const alias[2] = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"};
    const fat5__param *sh = &m->params[m->shared];
    fat5_status st = FAT5_OK;
    float *buf = NULL;
    int a, f, t;
    for (a = 0; a < 2 && st == FAT5_OK; a++) {
        if ((t = fat5__ckpt_find(k, alias[a], &f)) < 0) continue;
        if (!buf && !(buf = FAT5__CAST(float *, fat5__calloc(ctx, sh->numel, sizeof(float)))))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
        // the shape was checked when the alias stood for a missing shared.weight; check it here too
        if (fat5_st_get(k->files[f], t)->ndim != 2 || fat5_st_get(k->files[f], t)->shape[0] != sh->shape[0] ||
            fat5_st_get(k->files[f], t)->shape[1] != sh->shape[1])
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: tensor '%s' does not have shared.weight's shape", dir, alias[a]);
        else if ((st = fat5_st_read_f32(k->files[f], t, buf, (int64_t)sh->numel)) == FAT5_OK &&
                 memcmp(buf, m->w + sh->offset, sh->numel * sizeof(float)) != 0)
            st = fat5__err(ctx, FAT5_ERR_FORMAT,
                           "%s: tensor '%s' differs from shared.weight; FAT5 embeds both stacks with one table",
                           dir, alias[a]);
    }
    fat5__free(ctx, buf);
    return st;
}

// The tokenizer files a checkpoint directory may hold (Hugging Face's names); carried as they are.
static const char *const fat5__tokenizer_files[FAT5__TOK_FILES] = {"tokenizer.json", "tokenizer_config.json",
                                                                   "special_tokens_map.json", "spiece.model",
                                                                   "added_tokens.json"};

// Reads dir's tokenizer files into m (what it carried before is dropped). need: at least one must
// be there (FAT5_ERR_IO naming dir otherwise).
static fat5_status fat5__read_tokenizer_files(fat5_model *m, const char *dir, int need) {
    char *data[FAT5__TOK_FILES], p[4200];
    size_t len[FAT5__TOK_FILES];
    fat5_status st = FAT5_OK;
    int k, n = 0;
    for (k = 0; k < FAT5__TOK_FILES; k++) {
        data[k] = NULL;
        len[k] = 0;
        snprintf(p, sizeof p, "%s/%s", dir, fat5__tokenizer_files[k]);
        if (st != FAT5_OK || !fat5__is_file(p)) continue;
        if ((st = fat5__read_file(m->ctx, p, (size_t)1 << 30, &data[k], &len[k])) == FAT5_OK) n++;
    }
    if (st == FAT5_OK && need && !n)
        st = fat5__err(m->ctx, FAT5_ERR_IO, "%s: no tokenizer file (tokenizer.json, tokenizer_config.json, "
                       "special_tokens_map.json, spiece.model or added_tokens.json)", dir);
    for (k = 0; k < FAT5__TOK_FILES; k++) {
        if (st) {
            fat5__free(m->ctx, data[k]);
            continue;
        }
        fat5__free(m->ctx, m->tok_file[k]);
        m->tok_file[k] = data[k];
        m->tok_len[k] = len[k];
    }
    return st;
}

FAT5_API fat5_status fat5_model_set_tokenizer(fat5_model *m, const char *dir) {
    char *text;
    int k, n;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (dir && !dir[0]) {   // none
        for (k = 0; k < FAT5__TOK_FILES; k++) {
            fat5__free(m->ctx, m->tok_file[k]);
            m->tok_file[k] = NULL;
            m->tok_len[k] = 0;
        }
        return FAT5_OK;
    }
    if (dir) {
        if (!fat5__is_dir(dir)) return fat5__err(m->ctx, FAT5_ERR_IO, "fat5_model_set_tokenizer: %s: not a directory", dir);
        return fat5__read_tokenizer_files(m, dir, 1);
    }
    // ByT5's byte level: ids 0 pad, 1 eos, 2 unk, byte b -> b + 3, then vocab_size - 259 sentinels
    if (m->cfg.vocab_size < 259)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_tokenizer: a byte-level tokenizer needs a "
                         "vocabulary of at least 259 ids (3 special + 256 bytes); the model has %lld",
                         (long long)m->cfg.vocab_size);
    if (!(text = FAT5__CAST(char *, fat5__malloc(m->ctx, 256))))
        return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_set_tokenizer: out of memory");
    n = snprintf(text, 256, "{\n  \"tokenizer_class\": \"ByT5Tokenizer\",\n  \"eos_token\": \"</s>\",\n"
                 "  \"pad_token\": \"<pad>\",\n  \"unk_token\": \"<unk>\",\n  \"extra_ids\": %lld\n}\n",
                 (long long)(m->cfg.vocab_size - 259));
    for (k = 0; k < FAT5__TOK_FILES; k++) {
        fat5__free(m->ctx, m->tok_file[k]);
        m->tok_file[k] = NULL;
        m->tok_len[k] = 0;
    }
    m->tok_file[1] = text;   // tokenizer_config.json
    m->tok_len[1] = (size_t)n;
    return FAT5_OK;
}

// fat5_model_load, and with hc fat5_model_load_head: the checkpoint's stacks under hc's head
static fat5_status fat5__model_load(fat5_ctx *ctx, const char *path, const fat5_head_config *hc, uint64_t seed,
                                    fat5_model **out) {
    fat5__ckpt k;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    char dir[4096], p[4200], *text = NULL, **names = NULL;
    size_t len = 0;
    fat5_status st;
    int i, f, has_lm_head, n_loc = 0, *loc = NULL;
    fat5_head src_head;
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
    src_head = cfg.head;
    if (!st && hc) {   // the head asked for
        int64_t n_src = cfg.num_labels;
        if (!fat5__head_has_decoder(src_head) && fat5__head_has_decoder(hc->head))
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "the checkpoint is encoder-only (%s): it has no decoder for %s",
                           fat5__cfg_arch_name(&cfg), hc->head == FAT5_HEAD_QA ? "question answering (T5ForQuestionAnswering)"
                           : hc->head == FAT5_HEAD_SEQ_CLS ? "T5ForSequenceClassification" : "a language model");
        cfg.head = hc->head;
        cfg.num_labels = hc->head == FAT5_HEAD_QA ? 2 : hc->num_labels;
        cfg.problem_type = hc->problem_type;
        cfg.classifier_dropout = hc->classifier_dropout;
        cfg.pooling = hc->pooling;
        if (!st) st = fat5_model_config_validate(ctx, &cfg);
        // the names: hc's, else the checkpoint's when it has as many
        if (!st && !hc->label_names && n_src == cfg.num_labels && src_head != FAT5_HEAD_LM && src_head != FAT5_HEAD_ENCODER)
            st = fat5__cfg_label_names(ctx, text, len, cfg.num_labels, &names);
    } else if (!st && cfg.head != FAT5_HEAD_LM && cfg.head != FAT5_HEAD_ENCODER && cfg.head != FAT5_HEAD_QA) {
        st = fat5__cfg_label_names(ctx, text, len, cfg.num_labels, &names);
    }
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

    // lm_head: the file's own when it has one, else shared.weight -- unless config.json says the
    // model is untied: then lm_head.weight stays in the table and its absence is an error (tying
    // silently would run another model than the one transformers builds from this directory)
    has_lm_head = fat5__ckpt_find(&k, "lm_head.weight", &f) >= 0;
    if (cfg.head == FAT5_HEAD_LM) cfg.tie_word_embeddings = !has_lm_head && cfg.tie_word_embeddings;
    // every name, shape and dtype is checked before the weights are allocated
    if ((st = fat5__ckpt_match(ctx, &k, &cfg, cfg.tie_word_embeddings, hc != NULL, dir, &loc, &n_loc))) goto fail;
    if ((st = fat5__model_alloc(ctx, &cfg, cfg.tie_word_embeddings, &m))) goto fail;
    FAT5_ASSERT(m->n_params == n_loc);
    {
        fat5_rng r = fat5_rng_init(seed);
        for (i = 0; i < m->n_params; i++) {   // a head the checkpoint lacks: initialised, seeded
            const fat5__param *pr = &m->params[i];
            if (loc[2 * i] < 0) fat5__param_init(m, i, &r);
            else if ((st = fat5_st_read_f32(k.files[loc[2 * i]], loc[2 * i + 1], m->w + pr->offset, (int64_t)pr->numel)))
                goto fail;
        }
    }
    m->label_names = names;
    names = NULL;
    if (hc && hc->label_names && (st = fat5_model_set_label_names(m, hc->label_names, cfg.num_labels))) goto fail;
    if (m->flash_names && (st = fat5__ckpt_check_aliases(ctx, &k, m, dir))) goto fail;
    {   // the weights' dtype, for saves in it: as our saves record it (a training checkpoint's F32
        // copy of a BF16 start says BF16), else shared.weight's
        const char *v = fat5_st_metadata_find(k.files[0], "fat5_source_dtype");
        m->src_dtype = fat5_st_get(k.files[loc[2 * m->shared]], loc[2 * m->shared + 1])->dtype;
        if (v && strcmp(v, "F32") == 0) m->src_dtype = FAT5_ST_F32;
        else if (v && strcmp(v, "F16") == 0) m->src_dtype = FAT5_ST_F16;
        else if (v && strcmp(v, "BF16") == 0) m->src_dtype = FAT5_ST_BF16;
    }
    fat5__free(ctx, loc);
    loc = NULL;
    fat5__ckpt_close(ctx, &k);
    if ((st = fat5__model_place(m))) goto fail;
    // generation_config.json beside the weights: read over the defaults with the model's ids, and
    // kept for fat5_generate_config_from_model
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    if (fat5__is_file(p)) {
        char *json = NULL;
        size_t glen = 0;
        if ((st = fat5__read_file(ctx, p, (size_t)1 << 20, &json, &glen))) goto fail;
        m->gen = fat5__generate_config_for(&m->cfg);
        st = fat5_generate_config_from_json(ctx, json, glen, &m->gen);
        if (st) {
            fat5__free(ctx, json);
            st = fat5__err_prefix(ctx, st, "%s: ", p);
            goto fail;
        }
        m->has_gen = 1;
        m->gen_json = json;   // written back as it was by fat5_model_save
        m->gen_json_len = glen;
    }
    // the directory's tokenizer files, carried by every save of the model
    if ((st = fat5__read_tokenizer_files(m, dir, 0))) goto fail;
    *out = m;
    return FAT5_OK;
fail:
    fat5__free(ctx, loc);
    fat5__free(ctx, names);
    fat5__ckpt_close(ctx, &k);
    fat5_model_destroy(m);
    return st;
}

FAT5_API fat5_status fat5_model_load(fat5_ctx *ctx, const char *path, fat5_model **out) {
    return fat5__model_load(ctx, path, NULL, 0, out);
}

FAT5_API fat5_status fat5_model_load_head(fat5_ctx *ctx, const char *path, const fat5_head_config *hc, uint64_t seed,
                                          fat5_model **out) {
    if (!hc) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_load_head: NULL head config");
    return fat5__model_load(ctx, path, hc, seed, out);
}

// generation_config.json: the loaded checkpoint's text as it was, else the settings transformers
// derives from config.json (the model's decoder start, eos and pad ids).
static fat5_status fat5__save_generation_config(fat5_model *m, const char *dir) {
    char path[4200], text[256];
    int n;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (m->gen_json) return fat5_write_file_atomic(m->ctx, path, m->gen_json, m->gen_json_len);
    n = snprintf(text, sizeof text,
                 "{\n  \"_from_model_config\": true,\n  \"decoder_start_token_id\": %lld,\n  \"eos_token_id\": %lld,\n"
                 "  \"pad_token_id\": %lld\n}\n",
                 (long long)m->cfg.decoder_start_token_id, (long long)m->cfg.eos_token_id,
                 (long long)m->cfg.pad_token_id);
    return fat5_write_file_atomic(m->ctx, path, text, (size_t)n);
}

FAT5_API fat5_save_config fat5_save_config_default(void) {
    fat5_save_config c;
    memset(&c, 0, sizeof c);
    c.dtype = FAT5_WEIGHTS_SOURCE;
    c.max_shard_bytes = 0;
    return c;
}

FAT5_API fat5_status fat5_model_save(fat5_model *m, const char *dir) {
    fat5_save_config c = fat5_save_config_default();
    c.dtype = FAT5_WEIGHTS_F32;
    return m ? fat5_model_save_hf(m, dir, &c) : FAT5_ERR_INVALID_ARG;
}

FAT5_API fat5_status fat5_model_save_as(fat5_model *m, const char *dir, fat5_dtype dtype) {
    fat5_save_config c = fat5_save_config_default();
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (dtype != FAT5_DTYPE_FP32 && dtype != FAT5_DTYPE_BF16)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_save_as: dtype %d: want FAT5_DTYPE_FP32 or "
                         "FAT5_DTYPE_BF16", (int)dtype);
    c.dtype = dtype == FAT5_DTYPE_BF16 ? FAT5_WEIGHTS_BF16 : FAT5_WEIGHTS_F32;
    return fat5_model_save_hf(m, dir, &c);
}

// torch's name of a weights dtype (config.json's torch_dtype)
static const char *fat5__torch_dtype(fat5_st_dtype d) {
    return d == FAT5_ST_BF16 ? "bfloat16" : d == FAT5_ST_F16 ? "float16" : "float32";
}

// The weight files: one model.safetensors, or, past max_shard bytes, shards of the tensors in
// parameter order (a shard takes tensors while they fit; a larger tensor gets one of its own)
// named model-00001-of-0000N.safetensors, then model.safetensors.index.json (transformers'
// layout; its weight map in name order). The files of the other layout, and shards an earlier
// save left that this one does not name, are removed after, so that a reader finds only these.
static fat5_status fat5__save_weights(fat5_model *m, const char *dir, const fat5_st_write_tensor *t,
                                      const int64_t *const *i64, int n, const char *const *meta, int n_meta,
                                      fat5_st_dtype fd, int64_t max_shard) {
    fat5_ctx *ctx = m->ctx;
    char path[4200], *old = NULL;
    size_t old_len = 0, esz = fd == FAT5_ST_F32 ? 4 : 2;
    uint64_t total = 0, cur = 0;
    int *shard = NULL, n_shards = 1, n_old = 0, i, s;
    fat5_status st = FAT5_OK;
    fat5__sb b;
    if (fat5_model_weight_files(ctx, dir, &old, &old_len, &n_old) != FAT5_OK) n_old = 0;   // what an earlier save left
    if (!(shard = FAT5__CAST(int *, fat5__calloc(ctx, (size_t)n + 1, sizeof *shard)))) {
        fat5__free(ctx, old);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    }
    for (i = 0; i < n; i++) {   // shard of each tensor, in parameter order
        uint64_t bytes = (i64[i] ? 8 : esz), d;
        for (d = 0; d < (uint64_t)t[i].ndim; d++) bytes *= (uint64_t)t[i].shape[d];
        if (max_shard > 0 && cur > 0 && cur + bytes > (uint64_t)max_shard) n_shards++, cur = 0;
        shard[i] = n_shards - 1;
        cur += bytes;
        total += bytes;
    }
    fat5__sb_init(&b, ctx);
    if (n_shards == 1) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        st = fat5__st_write(ctx, path, t, n, meta, n_meta, i64, fd);
    } else {
        fat5_st_write_tensor *sub = FAT5__CAST(fat5_st_write_tensor *, fat5__calloc(ctx, (size_t)n, sizeof *sub));
        const int64_t **sub64 = FAT5__CAST(const int64_t **, fat5__calloc(ctx, (size_t)n, sizeof *sub64));
        const char **names = FAT5__CAST(const char **, fat5__calloc(ctx, (size_t)n, sizeof *names));
        if (!sub || !sub64 || !names) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
        for (s = 0; s < n_shards && st == FAT5_OK; s++) {
            int k = 0;
            for (i = 0; i < n; i++)
                if (shard[i] == s) sub[k] = t[i], sub64[k++] = i64[i];
            snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s + 1, n_shards);
            st = fat5__st_write(ctx, path, sub, k, meta, n_meta, sub64, fd);
        }
        if (st == FAT5_OK) {   // the index, its weight map in name order
            for (i = 0; i < n; i++) names[i] = t[i].name;
            qsort(FAT5__CAST(void *, names), (size_t)n, sizeof *names, fat5__st_kcmp);
            fat5__sb_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                            (unsigned long long)total);
            for (i = 0; i < n; i++) {
                int k;
                for (k = 0; strcmp(t[k].name, names[i]) != 0; k++) {}
                fat5__sb_printf(&b, "%s\n    ", i ? "," : "");
                fat5__sb_json_string(&b, names[i]);
                fat5__sb_printf(&b, ": \"model-%05d-of-%05d.safetensors\"", shard[k] + 1, n_shards);
            }
            fat5__sb_puts(&b, "\n  }\n}\n");
            snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
            st = b.oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path)
                       : fat5_write_file_atomic(ctx, path, b.buf, b.len);
        }
        fat5__free(ctx, sub);
        fat5__free(ctx, FAT5__CAST(void *, sub64));
        fat5__free(ctx, FAT5__CAST(void *, names));
    }
    if (st == FAT5_OK) {   // the other layout's files and stale shards go
        const char *o = old;
        snprintf(path, sizeof path, "%s/%s", dir, n_shards == 1 ? "model.safetensors.index.json" : "model.safetensors");
        if (fat5__is_file(path) && fat5__fs_unlink(path) != 0)
            st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot remove the earlier weights' file: %s", path, strerror(errno));
        for (i = 0; i < n_old && st == FAT5_OK; i++, o += strlen(o) + 1) {
            int a = 0, z = 0, keep = strcmp(o, "model.safetensors") == 0;
            if (!keep && sscanf(o, "model-%5d-of-%5d.safetensors", &a, &z) == 2)
                keep = z == n_shards && n_shards > 1 && a >= 1 && a <= z;
            snprintf(path, sizeof path, "%s/%s", dir, o);
            if (!keep && fat5__is_file(path) && fat5__fs_unlink(path) != 0)
                st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot remove an earlier save's shard: %s", path, strerror(errno));
        }
    }
    fat5__sb_free(&b);
    fat5__free(ctx, shard);
    fat5__free(ctx, old);
    return st;
}

FAT5_API fat5_status fat5_model_save_hf(fat5_model *m, const char *dir, const fat5_save_config *cfg) {
    fat5_ctx *ctx;
    fat5_st_write_tensor *t;
    fat5_save_config c = cfg ? *cfg : fat5_save_config_default();
    fat5_st_dtype fd;
    char path[4200], *json = NULL, init_l[2][96], tdt[64];
    size_t json_len = 0;
    const char *meta[6];
    int64_t l0;
    const int64_t **i64;
    fat5_status st;
    int i, k, n;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    n = m->n_params;
    l0 = m->cfg.rel_max_distance;
    if (!dir || strlen(dir) >= 4096) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_save: bad directory");
    if ((int)c.dtype < (int)FAT5_WEIGHTS_SOURCE || (int)c.dtype > (int)FAT5_WEIGHTS_F16 || c.max_shard_bytes < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_save_hf: dtype %d (a fat5_weights_dtype, 0..3), "
                         "max_shard_bytes %lld (>= 0)", (int)c.dtype, (long long)c.max_shard_bytes);
    fd = c.dtype == FAT5_WEIGHTS_SOURCE ? m->src_dtype
         : c.dtype == FAT5_WEIGHTS_BF16 ? FAT5_ST_BF16 : c.dtype == FAT5_WEIGHTS_F16 ? FAT5_ST_F16 : FAT5_ST_F32;
    if ((st = fat5__mkdir(ctx, dir))) return st;
    if ((st = fat5__model_pull_params(m))) return st;
    if (fd == FAT5_ST_F16) {   // F16 holds magnitudes up to 65504: a larger weight would become infinite
        for (i = 0; i < m->n_params; i++) {
            const float *w = m->w + m->params[i].offset;
            size_t j;
            for (j = 0; j < m->params[i].numel; j++)
                if (fabsf(w[j]) > 65504.0f && isfinite(w[j]))
                    return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_save_hf: %s[%zu] = %g is beyond F16's "
                                     "largest value 65504: save it in BF16 or F32", m->params[i].io_name, j,
                                     (double)w[j]);
        }
    }
    if ((st = fat5__cfg_to_json_labels(ctx, &m->cfg, (const char *const *)m->label_names, &json, &json_len))) return st;
    {   // config.json says the weights' dtype (torch_dtype), as transformers writes it
        char *end = json_len ? strrchr(json, '}') : NULL, *nj;
        char add[64];
        size_t keep;
        snprintf(add, sizeof add, ",\n  \"torch_dtype\": \"%s\"\n}\n", fat5__torch_dtype(fd));
        while (end && end > json && (end[-1] == '\n' || end[-1] == ' ')) end--;
        keep = end ? (size_t)(end - json) : 0;
        nj = end ? FAT5__CAST(char *, fat5__malloc(ctx, keep + strlen(add) + 1)) : NULL;
        if (!nj) {
            fat5__free(ctx, json);
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_save: out of memory");
        }
        memcpy(nj, json, keep);
        memcpy(nj + keep, add, strlen(add) + 1);
        fat5__free(ctx, json);
        json = nj;
        json_len = keep + strlen(add);
    }
    t = FAT5__CAST(fat5_st_write_tensor *, fat5__calloc(ctx, (size_t)m->n_params + 2, sizeof *t));
    i64 = FAT5__CAST(const int64_t **, fat5__calloc(ctx, (size_t)m->n_params + 2, sizeof *i64));
    if (!t || !i64) {
        fat5__free(ctx, t);
        fat5__free(ctx, FAT5__CAST(void *, i64));
        fat5__free(ctx, json);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_save: out of memory");
    }
    for (i = 0; i < m->n_params; i++) {
        t[i].name = m->params[i].io_name;
        t[i].ndim = m->params[i].ndim;
        t[i].shape[0] = m->params[i].shape[0];
        t[i].shape[1] = m->params[i].shape[1];
        t[i].data = m->w + m->params[i].offset;
    }
    if (m->cfg.pos_kind == FAT5_POS_FIRE) {   // FAT5's fixed init_L (0-d I64) beside each stack's FIRE block
        for (k = 0; k < 2; k++) {
            fat5__fire_init_l_name(init_l[k], sizeof init_l[k], k ? "decoder" : "encoder");
            t[n].name = init_l[k];
            i64[n++] = &l0;
        }
    }
    // metadata: transformers' "format"; fat5's source dtype: the file's own for BF16 and F16, the
    // model's for F32 (an F32 save, as a training checkpoint is, keeps the starting checkpoint's, so
    // that a save in FAT5_WEIGHTS_SOURCE from it writes that dtype again)
    snprintf(tdt, sizeof tdt, "%s", fat5_st_dtype_name(fd == FAT5_ST_F32 ? m->src_dtype : fd));
    meta[0] = "format", meta[1] = "pt";
    meta[2] = "fat5_version", meta[3] = FAT5_VERSION_STRING;
    meta[4] = "fat5_source_dtype", meta[5] = tdt;
    st = fat5__save_weights(m, dir, t, i64, n, meta, 3, fd, c.max_shard_bytes);
    if (st == FAT5_OK) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        st = fat5_write_file_atomic(ctx, path, json, json_len);
    }
    if (st == FAT5_OK) st = fat5__save_generation_config(m, dir);
    // the tokenizer it carries, file by file as it was read
    for (k = 0; st == FAT5_OK && k < FAT5__TOK_FILES; k++) {
        if (!m->tok_file[k]) continue;
        snprintf(path, sizeof path, "%s/%s", dir, fat5__tokenizer_files[k]);
        st = fat5_write_file_atomic(ctx, path, m->tok_file[k], m->tok_len[k]);
    }
    fat5__free(ctx, t);
    fat5__free(ctx, FAT5__CAST(void *, i64));
    fat5__free(ctx, json);
    return st;
}
