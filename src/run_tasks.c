// =============================================================================================
// ==[9.4] run: fine-tuning a task head: classify, token-classify, qa ==
// The task option of the fine-tuning loop of [9.3] (docs/tasks.md): the rows of train_file and
// validation_file are JSON Lines read here, the model is --init's stacks under a head
// (fat5_model_load_head, or a new model with the head from the config), batches carry the head's
// targets (fat5_batch.head_labels / head_targets), and an evaluation scores the head's predictions
// on the validation rows, as Hugging Face's run_classification, run_ner and run_qa do. Everything
// else (sampler, optimizers, checkpoints, resume, several ranks) is the loop's own.
//
// A row keeps its input ids and, after them in the rows' ids (fat5__ftrows), its payload: the
// class (single-label), num_labels floats' bits (multi-label, regression), a label per input token
// (token-classify: the first piece of each word its word's tag, -100 elsewhere, Hugging Face's
// convention) or the answer's first and last token (qa). Validation rows keep their texts: the
// input, and the gold (the class names, the words' tags, or the answers, joined by 0x1f); qa's
// also their tokens' byte spans in the input (f->val_off) to cut a predicted span out of it.
//
//   classify:        {"text": "...", "label": "name" | 3 | 0.5 | ["a", "b"]}   (fields: options)
//   token-classify:  {"tokens": ["EU", "rejects", ...], "ner_tags": ["B-ORG", "O", ...] | [3, 0, ...]}
//   qa:              {"question": "...", "context": "...", "answers": {"text": ["..."], "answer_start": [c]}}
// qa's input is "question: Q context: C" (T5's format); answer_start counts characters (code
// points), as SQuAD's files do.

enum { FAT5__TASK_SEQ2SEQ = 0, FAT5__TASK_CLASSIFY = 1, FAT5__TASK_TOKENS = 2, FAT5__TASK_QA = 3 };
#define FAT5__QA_MAX_ANSWER 30   // tokens of a predicted answer at most (run_qa's max_answer_length)

static int fat5__task_of(const fat5_train_config *c) {
    if (!c->task || !c->task[0] || !strcmp(c->task, "seq2seq")) return FAT5__TASK_SEQ2SEQ;
    if (!strcmp(c->task, "classify")) return FAT5__TASK_CLASSIFY;
    if (!strcmp(c->task, "token-classify")) return FAT5__TASK_TOKENS;
    return FAT5__TASK_QA;
}

// a field name option, or its default
static const char *fat5__task_field(const char *opt, const char *def) { return opt && opt[0] ? opt : def; }

// The lines of a JSON Lines file, one at a time: *line (NUL-terminated in place), its number;
// 0 at the end. Blank lines are skipped.
typedef struct fat5__jl {
    char *text;
    size_t len, at;
    int64_t line;
} fat5__jl;

static fat5_status fat5__jl_open(fat5_ctx *ctx, const char *path, fat5__jl *j) {
    memset(j, 0, sizeof *j);
    return fat5__read_file(ctx, path, (size_t)1 << 36, &j->text, &j->len);
}
static int fat5__jl_next(fat5__jl *j, char **line, size_t *len) {
    while (j->at < j->len) {
        char *s = j->text + j->at, *e = FAT5__CAST(char *, memchr(s, '\n', j->len - j->at));
        size_t n = e ? (size_t)(e - s) : j->len - j->at, k;
        j->at += n + (e ? 1 : 0);
        j->line++;
        if (n && s[n - 1] == '\r') n--;
        s[n] = 0;
        for (k = 0; k < n && (s[k] == ' ' || s[k] == '\t'); k++) {}
        if (k == n) continue;
        *line = s;
        *len = n;
        return 1;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// the labels, and the model with its head

// whether a JSON number is an integer (no fraction, no exponent)
static int fat5__task_is_int(const fat5__json *v) {
    return v && v->type == FAT5__J_NUMBER && !strpbrk(v->str, ".eE");
}

// A set of distinct names: names[0 .. n) in the order they came, and an open-addressing table of
// their indexes (slot: index + 1, 0 empty; at most half full), so that adding is O(1) on average.
typedef struct fat5__task_set {
    char **names;
    int64_t n, cap;
    int64_t *slot, n_slot;   // [n_slot], a power of two
} fat5__task_set;

// FNV-1a of a NUL-terminated string
static uint64_t fat5__task_hash(const char *s) {
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

// Adds a copy of name unless the set holds it; *at: its index (the new one or the earlier one),
// *added: whether it is new. 0 when out of memory.
static int fat5__task_set_add(fat5_ctx *ctx, fat5__task_set *s, const char *name, int64_t *at, int *added) {
    uint64_t h = fat5__task_hash(name), mask;
    int64_t i;
    *added = 0;
    if (2 * (s->n + 1) > s->n_slot) {   // grown, the indexes placed again
        int64_t ns = s->n_slot ? 2 * s->n_slot : 64, *sl = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)ns, sizeof *sl));
        if (!sl) return 0;
        for (i = 0; i < s->n; i++) {
            uint64_t k = fat5__task_hash(s->names[i]) & (uint64_t)(ns - 1);
            while (sl[k]) k = (k + 1) & (uint64_t)(ns - 1);
            sl[k] = i + 1;
        }
        fat5__free(ctx, s->slot);
        s->slot = sl;
        s->n_slot = ns;
    }
    mask = (uint64_t)(s->n_slot - 1);
    for (h &= mask; s->slot[h]; h = (h + 1) & mask)
        if (!strcmp(s->names[s->slot[h] - 1], name)) {
            *at = s->slot[h] - 1;
            return 1;
        }
    if (!fat5__ft_grow(ctx, (void **)&s->names, &s->cap, s->n + 1, sizeof *s->names) ||
        !(s->names[s->n] = fat5__strdup(ctx, name)))
        return 0;
    s->slot[h] = s->n + 1;
    *at = s->n++;
    *added = 1;
    return 1;
}

static int fat5__task_strcmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The class names: label_file's lines, else the training rows' label names, sorted, distinct (for
// token-classify each word's tag). Integer labels need none (*n = 1 + the largest, names NULL).
// *problem: what the labels say (lists: multi-label, non-integer numbers: regression).
static fat5_status fat5__task_labels(fat5_trainer *t, char ***names_out, int64_t *n_out, fat5_problem *problem) {
    fat5_ctx *ctx = t->ctx;
    const fat5_train_config *c = &t->cfg;
    int task = fat5__task_of(c);
    const char *field = fat5__task_field(c->label_column_name, task == FAT5__TASK_TOKENS ? "ner_tags" : "label");
    char *line;
    size_t len;
    int64_t max_int = -1, i, at;
    int any_str = 0, any_float = 0, any_list = 0, added;
    fat5__task_set set;   // the distinct names, in a hash set (O(1) a label)
    fat5__jl jl;
    fat5_status st;
    memset(&set, 0, sizeof set);
    *names_out = NULL;
    *n_out = 0;
    *problem = FAT5_PROBLEM_AUTO;
    if (task == FAT5__TASK_QA) return FAT5_OK;
    if (c->label_file && c->label_file[0]) {   // one name a line
        if ((st = fat5__jl_open(ctx, c->label_file, &jl))) return fat5__err_prefix(ctx, st, "label_file: ");
        while (fat5__jl_next(&jl, &line, &len)) {
            if (!fat5__task_set_add(ctx, &set, line, &at, &added)) {
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "label_file: out of memory");
                break;
            }
            if (!added) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: label '%s' is already label %lld", c->label_file,
                               (long long)jl.line, line, (long long)at);
                break;
            }
        }
        fat5__free(ctx, jl.text);
        if (!st && set.n == 0) st = fat5__err(ctx, FAT5_ERR_FORMAT, "label_file %s: no labels", c->label_file);
        if (st) goto fail;
        fat5__free(ctx, set.slot);
        *names_out = set.names;
        *n_out = set.n;
        return FAT5_OK;
    }
    if ((st = fat5__jl_open(ctx, c->train_file, &jl))) return fat5__err_prefix(ctx, st, "train_file: ");
    while (!st && fat5__jl_next(&jl, &line, &len)) {
        fat5__jdoc *d = NULL;
        const fat5__json *v, *e;
        if ((st = fat5__json_parse(ctx, "row", line, len, 64, &d))) {
            st = fat5__err_prefix(ctx, st, "%s: line %lld: ", c->train_file, (long long)jl.line);
            break;
        }
        v = fat5__json_get(d->root, field);
        if (!v) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: no field '%s' (label_column_name)", c->train_file,
                           (long long)jl.line, field);
        } else {
            int list = v->type == FAT5__J_ARRAY;
            any_list |= list && task == FAT5__TASK_CLASSIFY;
            for (e = list ? v->child : v; e && !st; e = list ? e->next : NULL) {
                if (e->type == FAT5__J_STRING) {
                    any_str = 1;
                    if (!fat5__task_set_add(ctx, &set, e->str, &at, &added))
                        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "labels: out of memory");
                } else if (fat5__task_is_int(e)) {
                    double x = 0;
                    fat5__json_as_double(e, &x);
                    if (x < 0 || x >= (1 << 16))   // the classes an integer label makes: at most 65,536
                        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: label %s is outside [0, 65536): "
                                       "integer labels are classes (more with a label_file of names)",
                                       c->train_file, (long long)jl.line, e->str);
                    else if ((int64_t)x > max_int)
                        max_int = (int64_t)x;
                } else if (e->type == FAT5__J_NUMBER && task == FAT5__TASK_CLASSIFY && !list) {
                    any_float = 1;
                } else {
                    st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: field '%s' holds %s, expected %s",
                                   c->train_file, (long long)jl.line, field,
                                   e->type == FAT5__J_NUMBER ? "a number that is not a class" : "something else",
                                   task == FAT5__TASK_TOKENS ? "a list of tags (names or integers)"
                                                             : "a name, an integer, a number or a list of them");
                }
            }
        }
        fat5__json_free(ctx, d);
    }
    fat5__free(ctx, jl.text);
    if (st) goto fail;
    if ((any_str && max_int >= 0) || (any_float && (any_str || any_list))) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: the labels in '%s' mix names, integers and numbers: give one kind "
                       "(or a label_file and names)", c->train_file, field);
        goto fail;
    }
    *problem = any_list ? FAT5_PROBLEM_MULTI_LABEL : any_float ? FAT5_PROBLEM_REGRESSION : FAT5_PROBLEM_AUTO;
    fat5__free(ctx, set.slot);
    set.slot = NULL;
    if (any_str) {   // sorted, as the datasets' label lists are
        qsort(set.names, (size_t)set.n, sizeof *set.names, fat5__task_strcmp);
        *names_out = set.names;
        *n_out = set.n;
        return FAT5_OK;
    }
    fat5__free(ctx, set.names);
    *n_out = any_float ? 1 : max_int + 1;
    if (*n_out < 1) *n_out = 1;
    return FAT5_OK;
fail:
    for (i = 0; i < set.n; i++) fat5__free(ctx, set.names[i]);
    fat5__free(ctx, set.names);
    fat5__free(ctx, set.slot);
    return st;
}

// The class names of --init's checkpoint when its head is a classifier of the task's kind (a
// sequence classifier for classify, a token classifier for token-classify) and its id2label
// names the classes (not transformers' defaults LABEL_0, LABEL_1, ...): *ck, one block to free
// (NULL otherwise), *n_ck of them.
static fat5_status fat5__task_ckpt_labels(fat5_trainer *t, char ***ck, int64_t *n_ck) {
    fat5_ctx *ctx = t->ctx;
    const fat5_train_config *c = &t->cfg;
    int task = fat5__task_of(c);
    char path[4200], def[32], *text = NULL, **names = NULL;
    const char *slash = strrchr(c->init, '/');
    size_t len = 0, k = strlen(c->init);
    int64_t i, named = 0;
    fat5_model_config mc;
    fat5_status st;
    *ck = NULL;
    *n_ck = 0;
    if (k > 12 && !strcmp(c->init + k - 12, ".safetensors"))   // a weights file: config.json beside it
        snprintf(path, sizeof path, "%.*s/config.json", slash ? (int)(slash - c->init) : 1, slash ? c->init : ".");
    else
        snprintf(path, sizeof path, "%s/config.json", c->init);
    if (fat5__read_file(ctx, path, (size_t)1 << 24, &text, &len)) return FAT5_OK;   // fat5_model_load_head says why
    st = fat5_model_config_from_json(ctx, text, len, &mc);
    if (!st && ((task == FAT5__TASK_CLASSIFY && (mc.head == FAT5_HEAD_SEQ_CLS || mc.head == FAT5_HEAD_ENC_SEQ_CLS)) ||
                (task == FAT5__TASK_TOKENS && mc.head == FAT5_HEAD_TOKEN_CLS)))
        st = fat5__cfg_label_names(ctx, text, len, mc.num_labels, &names);
    fat5__free(ctx, text);
    if (st) return fat5__err_prefix(ctx, st, "%s: ", path);
    for (i = 0; names && i < mc.num_labels; i++) {
        snprintf(def, sizeof def, "LABEL_%lld", (long long)i);
        named += strcmp(names[i], def) != 0;
    }
    if (!named) {
        fat5__free(ctx, names);
        return FAT5_OK;
    }
    *ck = names;
    *n_ck = mc.num_labels;
    return FAT5_OK;
}

// The class names of a run that starts from a classifier with named classes (fat5__task_ckpt_labels)
// on rows labelled by name: the checkpoint's, in its order (its head's outputs keep their
// meaning), when every name of the rows is one of them; an error naming the first that is not.
// names / *n: the rows' names (sorted), replaced.
static fat5_status fat5__task_map_labels(fat5_trainer *t, char ***names, int64_t *n) {
    fat5_ctx *ctx = t->ctx;
    const fat5_train_config *c = &t->cfg;
    char **ck = NULL, **own = NULL, **sorted = NULL;
    int64_t n_ck = 0, i;
    fat5_status st;
    if ((st = fat5__task_ckpt_labels(t, &ck, &n_ck)) || !ck) return st;
    sorted = FAT5__CAST(char **, fat5__malloc(ctx, (size_t)n_ck * sizeof *sorted));
    own = FAT5__CAST(char **, fat5__calloc(ctx, (size_t)n_ck, sizeof *own));
    if (!sorted || !own) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "labels: out of memory");
        goto done;
    }
    memcpy(sorted, ck, (size_t)n_ck * sizeof *sorted);
    qsort(sorted, (size_t)n_ck, sizeof *sorted, fat5__task_strcmp);
    for (i = 0; i < *n && !st; i++)
        if (!bsearch(&(*names)[i], sorted, (size_t)n_ck, sizeof *sorted, fat5__task_strcmp)) {
            fat5__sb list;
            int64_t j;
            fat5__sb_init(&list, ctx);
            for (j = 0; j < n_ck && j < 20; j++) fat5__sb_printf(&list, "%s'%s'", j ? ", " : "", ck[j]);
            if (n_ck > 20) fat5__sb_printf(&list, ", ... (%lld in all)", (long long)n_ck);
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: label '%s' is not one of the classes of the checkpoint %s "
                           "(config.json's id2label: %s): its head's outputs are those classes. Give a label_file to "
                           "set the classes yourself (the head is kept when their number is the checkpoint's, made "
                           "anew otherwise)", c->train_file, (*names)[i], c->init, list.oom ? "" : list.buf);
            fat5__sb_free(&list);
        }
    for (i = 0; i < n_ck && !st; i++)
        if (!(own[i] = fat5__strdup(ctx, ck[i]))) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "labels: out of memory");
    if (!st) {   // the checkpoint's names replace the rows'
        for (i = 0; i < *n; i++) fat5__free(ctx, (*names)[i]);
        fat5__free(ctx, *names);
        *names = own;
        *n = n_ck;
        own = NULL;
        if (n_ck > 0) fat5__log(ctx, FAT5_LOG_INFO, "labels: the %lld classes of %s, in its order", (long long)n_ck, c->init);
    }
done:
    for (i = 0; own && i < n_ck; i++) fat5__free(ctx, own[i]);
    fat5__free(ctx, own);
    fat5__free(ctx, sorted);
    fat5__free(ctx, ck);
    return st;
}

// The run's model with its task's head, in place of t->m (the trainer made or loaded it as it
// is): --init's stacks under the head (fat5_model_load_head), or a new model of the config with
// it; the class names from the labels. A resumed checkpoint (made by such a run) has it already.
static fat5_status fat5__task_model(fat5_trainer *t) {
    fat5_ctx *ctx = t->ctx;
    fat5_train_config *c = &t->cfg;
    int task = fat5__task_of(c);
    char **names = NULL;
    int64_t n = 0, i;
    fat5_problem pr = FAT5_PROBLEM_AUTO;
    fat5_head_config hc;
    fat5_model *m = NULL;
    fat5_status st;
    if (task == FAT5__TASK_SEQ2SEQ) return FAT5_OK;
    if (!c->train_file[0]) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "task %s: needs a train_file", c->task);
    if ((st = fat5__task_labels(t, &names, &n, &pr))) return st;
    if (names && c->init[0] && !(c->label_file && c->label_file[0]) && (st = fat5__task_map_labels(t, &names, &n))) {
        for (i = 0; i < n; i++) fat5__free(ctx, names[i]);
        fat5__free(ctx, names);
        return st;
    }
    hc = fat5_head_config_default(task == FAT5__TASK_TOKENS ? FAT5_HEAD_TOKEN_CLS
                                  : task == FAT5__TASK_QA ? FAT5_HEAD_QA
                                  : c->classifier[0] && !strcmp(c->classifier, "t5") ? FAT5_HEAD_SEQ_CLS
                                                                                     : FAT5_HEAD_ENC_SEQ_CLS, n);
    hc.problem_type = !c->problem_type[0] ? pr
                      : !strcmp(c->problem_type, "regression") ? FAT5_PROBLEM_REGRESSION
                      : !strcmp(c->problem_type, "multi_label_classification") ? FAT5_PROBLEM_MULTI_LABEL
                                                                                : FAT5_PROBLEM_SINGLE_LABEL;
    if (hc.problem_type == FAT5_PROBLEM_AUTO && task == FAT5__TASK_CLASSIFY && n == 1)
        hc.problem_type = FAT5_PROBLEM_SINGLE_LABEL;   // one class (a name, or integers all 0), not a regression
    hc.classifier_dropout = c->classifier_dropout;
    hc.pooling = !c->pooling[0] || !strcmp(c->pooling, "eos") ? FAT5_POOL_EOS
                 : !strcmp(c->pooling, "mean") ? FAT5_POOL_MEAN : FAT5_POOL_FIRST;
    hc.label_names = (const char *const *)names;
    if (c->init[0]) {
        st = fat5_model_load_head(ctx, c->init, &hc, c->seed, &m);
    } else {
        fat5_model_config mc = t->m->cfg;
        mc.head = hc.head;
        mc.num_labels = hc.num_labels;
        mc.problem_type = hc.problem_type;
        mc.classifier_dropout = hc.classifier_dropout;
        mc.pooling = hc.pooling;
        st = fat5_model_create(ctx, &mc, c->seed, &m);
        if (!st && names) st = fat5_model_set_label_names(m, hc.label_names, n);
    }
    for (i = 0; i < n && names; i++) fat5__free(ctx, names[i]);
    fat5__free(ctx, names);
    if (st) {
        fat5_model_destroy(m);
        return fat5__err_prefix(ctx, st, "task %s: ", c->task);
    }
    if ((st = fat5__head_check_loss(ctx, &m->cfg, &c->loss)) ||   // label_smoothing, z_loss: refused now, not at step 1
        (st = fat5_model_set_dropout_rate(m, t->m->cfg.dropout_rate, t->m->cfg.attention_dropout_rate))) {
        fat5_model_destroy(m);
        return st;
    }
    fat5_model_destroy(t->m);
    t->m = m;
    c->model = m->cfg;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// the rows

// The ids of text (EOS added) and each one's byte span in it ([2 n], EOS's (0, 0)), truncated to
// max_len ids (EOS kept last); byte-level ids (ByT5's: byte + 3) without a tokenizer.
static fat5_status fat5__task_encode(fat5_trainer *t, const char *text, size_t len, int64_t max_len, int32_t **ids,
                                     int64_t **off, int64_t *n) {
    fat5_ctx *ctx = t->ctx;
    fat5_status st;
    *ids = NULL;
    *off = NULL;
    if (t->ft->tok) {
        if ((st = fat5_tokenize_offsets(t->ft->tok, text, len, 0, ids, off, n))) return st;
    } else {
        size_t i;
        *ids = FAT5__CAST(int32_t *, fat5__malloc(ctx, (len + 1) * sizeof **ids));
        *off = FAT5__CAST(int64_t *, fat5__malloc(ctx, 2 * (len + 1) * sizeof **off));
        if (!*ids || !*off) {
            fat5__free(ctx, *ids);
            fat5__free(ctx, *off);
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizing: out of memory");
        }
        for (i = 0; i < len; i++) {
            (*ids)[i] = (int32_t)(unsigned char)text[i] + 3;
            (*off)[2 * i] = (int64_t)i;
            (*off)[2 * i + 1] = (int64_t)i + 1;
        }
        (*ids)[len] = (int32_t)t->m->cfg.eos_token_id;
        (*off)[2 * len] = (*off)[2 * len + 1] = 0;
        *n = (int64_t)len + 1;
    }
    if (max_len > 1 && *n > max_len) {   // the first max_len - 1 pieces, then the last (EOS)
        (*ids)[max_len - 1] = (*ids)[*n - 1];
        (*off)[2 * (max_len - 1)] = (*off)[2 * (*n - 1)];
        (*off)[2 * (max_len - 1) + 1] = (*off)[2 * (*n - 1) + 1];
        *n = max_len;
    }
    return FAT5_OK;
}

static int fat5__task_name_cmp(const void *a, const void *b) {
    return strcmp(((const fat5__cfg_label *)a)->name, ((const fat5__cfg_label *)b)->name);
}

// t->ft->lab_idx: the model's label names with their ids, sorted by name (fat5__task_class's
// lookups: O(log num_labels) a label)
static fat5_status fat5__task_label_index(fat5_trainer *t) {
    fat5__ft *f = t->ft;
    int64_t L = t->m->cfg.num_labels, i;
    if (f->lab_idx || !fat5_model_label_name(t->m, 0)) return FAT5_OK;   // built, or a model without classes
    if (!(f->lab_idx = FAT5__CAST(fat5__cfg_label *, fat5__malloc(t->ctx, (size_t)L * sizeof *f->lab_idx))))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "labels: out of memory for %lld names", (long long)L);
    for (i = 0; i < L; i++) {
        f->lab_idx[i].name = fat5_model_label_name(t->m, i);
        f->lab_idx[i].id = i;
    }
    qsort(f->lab_idx, (size_t)L, sizeof *f->lab_idx, fat5__task_name_cmp);
    f->n_lab_idx = L;
    return FAT5_OK;
}

// the class id of a label value (a name of the model's, or an integer below num_labels); -1 with
// the message set when it is neither
static int64_t fat5__task_class(fat5_trainer *t, const fat5__json *v, const char *where, int64_t line,
                                const char *field) {
    const fat5_model *m = t->m;
    const fat5__ft *f = t->ft;
    int64_t L = m->cfg.num_labels;
    if (v && v->type == FAT5__J_STRING) {
        fat5__cfg_label key, *hit;
        key.name = v->str;
        key.id = 0;
        hit = f->lab_idx ? FAT5__CAST(fat5__cfg_label *, bsearch(&key, f->lab_idx, (size_t)f->n_lab_idx, sizeof key,
                                                                  fat5__task_name_cmp)) : NULL;
        if (hit) return hit->id;
        fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: line %lld: label '%s' in '%s' is not one of the model's %lld classes "
                  "(label_file, or the training rows' names)", where, (long long)line, v->str, field, (long long)L);
        return -1;
    }
    if (fat5__task_is_int(v)) {
        double x = -1;
        fat5__json_as_double(v, &x);
        if (x >= 0 && x < (double)L) return (int64_t)x;
    }
    fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: line %lld: label %s in '%s' is outside the model's %lld classes", where,
              (long long)line, v && v->str ? v->str : "(not a name or an integer)", field, (long long)L);
    return -1;
}

// byte offset of code point `cp` in s (len bytes); -1 past its end
static int64_t fat5__task_cp_byte(const char *s, size_t len, int64_t cp) {
    size_t i = 0;
    int64_t k = 0;
    while (k < cp && i < len) {
        size_t v = fat5__utf8_len(s + i, len - i);
        i += v ? v : 1;
        k++;
    }
    return k == cp && i <= len ? (int64_t)i : -1;
}

// One JSON Lines row of the task: its input text (into *in), its input ids and their spans, and
// its payload (into *pay: ints; floats' bits for multi-label and regression) and gold text (into
// *gold, validation rows). Errors name the file and line.
static fat5_status fat5__task_row(fat5_trainer *t, const fat5__json *root, const char *path, int64_t line,
                                  fat5__sb *in, fat5__sb *gold, int32_t **ids, int64_t **off, int64_t *n,
                                  int32_t **pay_p, int64_t *cap_pay, int64_t *n_pay, int64_t *cut, int64_t *c0_out) {
    int32_t *pay = *pay_p;   // (grown below where the pieces outnumber the line's bytes)
    fat5_ctx *ctx = t->ctx;
    const fat5_train_config *c = &t->cfg;
    const fat5_model_config *mc = &t->m->cfg;
    int task = fat5__task_of(c);
    int64_t max_len = c->ul2.max_enc_len, L = mc->num_labels, i, k;
    fat5_status st = FAT5_OK;
    in->len = 0;
    gold->len = 0;
    *n_pay = 0;
    *cut = 0;
    if (task == FAT5__TASK_CLASSIFY) {
        const char *fields = fat5__task_field(c->text_column_names, "text"), *p = fields;
        const char *lf = fat5__task_field(c->label_column_name, "label");
        const fat5__json *v = fat5__json_get(root, lf), *e;
        if (c->source_prefix[0]) fat5__sb_puts(in, c->source_prefix);
        for (k = 0; *p; k++) {   // the text fields, joined by a space
            const char *z = strchr(p, ',');
            char name[256];
            const fat5__json *f;
            snprintf(name, sizeof name, "%.*s", (int)(z ? z - p : (ptrdiff_t)strlen(p)), p);
            p = z ? z + 1 : p + strlen(p);
            if (!(f = fat5__json_get(root, name)) || f->type != FAT5__J_STRING)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: %s field '%s' (text_column_names)", path,
                                 (long long)line, f ? "no text in" : "no", name);
            if (k) fat5__sb_puts(in, " ");
            fat5__sb_puts(in, f->str);
        }
        if (!v) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: no field '%s' (label_column_name)", path,
                                 (long long)line, lf);
        if (mc->problem_type == FAT5_PROBLEM_REGRESSION) {
            for (e = v->type == FAT5__J_ARRAY ? v->child : v, k = 0; e; e = v->type == FAT5__J_ARRAY ? e->next : NULL, k++) {
                double x = NAN;
                float fx;
                if (k >= L || !fat5__json_as_double(e, &x) || !isfinite(x))
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: '%s' must hold %lld number%s (regression)",
                                     path, (long long)line, lf, (long long)L, L > 1 ? "s" : "");
                fx = (float)x;
                memcpy(&pay[k], &fx, 4);
                fat5__sb_printf(gold, "%s%.9g", k ? "\x1f" : "", x);
            }
            if (k != L)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: '%s' holds %lld numbers, the model %lld", path,
                                 (long long)line, lf, (long long)k, (long long)L);
            *n_pay = L;
        } else if (mc->problem_type == FAT5_PROBLEM_MULTI_LABEL) {
            float one = 1.0f, zero = 0.0f;
            for (k = 0; k < L; k++) memcpy(&pay[k], &zero, 4);
            if (v->type != FAT5__J_ARRAY)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: '%s' must be a list of labels (multi-label)",
                                 path, (long long)line, lf);
            for (e = v->child; e; e = e->next) {
                int64_t y = fat5__task_class(t, e, path, line, lf);
                if (y < 0) return FAT5_ERR_FORMAT;
                memcpy(&pay[y], &one, 4);
                fat5__sb_printf(gold, "%s%s", gold->len ? "\x1f" : "", fat5_model_label_name(t->m, y));
            }
            *n_pay = L;
        } else {
            int64_t y = fat5__task_class(t, v, path, line, lf);
            if (y < 0) return FAT5_ERR_FORMAT;
            pay[0] = (int32_t)y;
            fat5__sb_puts(gold, fat5_model_label_name(t->m, y));
            *n_pay = 1;
        }
        if (in->oom || gold->oom) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        if ((st = fat5__task_encode(t, in->buf, in->len, max_len, ids, off, n)))
            return fat5__err_prefix(ctx, st, "%s: line %lld: ", path, (long long)line);
        return FAT5_OK;
    }
    if (task == FAT5__TASK_TOKENS) {   // words joined by a space; each word's first piece gets its tag
        const char *wf = fat5__task_field(c->text_column_names, "tokens"), *lf = fat5__task_field(c->label_column_name, "ner_tags");
        const fat5__json *w = fat5__json_get(root, wf), *g = fat5__json_get(root, lf), *a, *b;
        int64_t nw = 0, *wend = NULL, wi;
        if (!w || w->type != FAT5__J_ARRAY || !g || g->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: '%s' and '%s' must be lists (the words and their "
                             "tags)", path, (long long)line, wf, lf);
        if (w->n != g->n)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: %lld words and %lld tags", path, (long long)line,
                             (long long)w->n, (long long)g->n);
        if (!(wend = FAT5__CAST(int64_t *, fat5__malloc(ctx, (w->n + 1) * 2 * sizeof *wend))))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        for (a = w->child, b = g->child; a; a = a->next, b = b->next, nw++) {
            int64_t y;
            if (a->type != FAT5__J_STRING) {
                fat5__free(ctx, wend);
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: word %lld of '%s' is not a string", path,
                                 (long long)line, (long long)nw, wf);
            }
            if ((y = fat5__task_class(t, b, path, line, lf)) < 0) {
                fat5__free(ctx, wend);
                return FAT5_ERR_FORMAT;
            }
            if (nw) fat5__sb_puts(in, " ");
            wend[2 * nw] = (int64_t)in->len;   // the word's start, then its end
            fat5__sb_puts(in, a->str);
            wend[2 * nw + 1] = (int64_t)in->len;
            pay[nw] = (int32_t)y;   // the tags, for now
            fat5__sb_printf(gold, "%s%s", nw ? "\x1f" : "", fat5_model_label_name(t->m, y));
        }
        if (in->oom || gold->oom || (st = fat5__task_encode(t, in->buf ? in->buf : "", in->len, max_len, ids, off, n))) {
            fat5__free(ctx, wend);
            return in->oom || gold->oom ? fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path)
                                        : fat5__err_prefix(ctx, st, "%s: line %lld: ", path, (long long)line);
        }
        // token i belongs to the first word ending after its start (a piece of the space before a
        // word belongs to that word); the first token of each word takes its tag, the others -100
        if (!fat5__ft_grow(ctx, (void **)pay_p, cap_pay, *n > nw ? *n : nw, sizeof *pay)) {
            fat5__free(ctx, wend);
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        }
        pay = *pay_p;
        {
            int32_t *tags = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(nw ? nw : 1) * sizeof *tags));
            int64_t prev = -1, last = -1;
            if (!tags) {
                fat5__free(ctx, wend);
                return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            }
            memcpy(tags, pay, (size_t)nw * sizeof *tags);
            for (i = 0, wi = 0; i < *n; i++) {
                int64_t s0 = (*off)[2 * i], e0 = (*off)[2 * i + 1];
                pay[i] = -100;
                if (e0 <= s0 && !(i < *n - 1 && s0 > 0)) continue;   // EOS and empty pieces
                while (wi < nw && wend[2 * wi + 1] <= s0) wi++;
                if (wi < nw && wi != prev) {
                    pay[i] = tags[wi];
                    prev = wi;
                    last = wi;
                }
            }
            *cut = nw - 1 - last;   // words truncation dropped
            fat5__free(ctx, tags);
        }
        fat5__free(ctx, wend);
        *n_pay = *n;
        return FAT5_OK;
    }
    {   // qa: "question: Q context: C"; the first answer's first and last token
        const char *qf = fat5__task_field(c->question_column_name, "question");
        const char *cf = fat5__task_field(c->context_column_name, "context");
        const char *af = fat5__task_field(c->answer_column_name, "answers");
        const fat5__json *q = fat5__json_get(root, qf), *cx = fat5__json_get(root, cf), *an = fat5__json_get(root, af);
        const fat5__json *tx = an ? fat5__json_get(an, "text") : NULL, *as = an ? fat5__json_get(an, "answer_start") : NULL;
        int64_t c0, a0 = -1, a1 = -1, s = -1, e = -1;
        double cp = -1;
        if (!q || q->type != FAT5__J_STRING || !cx || cx->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: '%s' and '%s' must be strings", path, (long long)line,
                             qf, cf);
        if (!tx || tx->type != FAT5__J_ARRAY || !as || as->type != FAT5__J_ARRAY || tx->n != as->n || !tx->n)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: '%s' must be {\"text\": [...], \"answer_start\": "
                             "[...]} with as many of each, at least one", path, (long long)line, af);
        fat5__sb_puts(in, "question: ");
        fat5__sb_puts(in, q->str);
        fat5__sb_puts(in, " context: ");
        c0 = (int64_t)in->len;
        *c0_out = c0;
        fat5__sb_puts(in, cx->str);
        for (tx = tx->child, k = 0; tx; tx = tx->next, k++) {
            if (tx->type != FAT5__J_STRING)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: answer %lld is not a string", path, (long long)line,
                                 (long long)k);
            fat5__sb_printf(gold, "%s%s", k ? "\x1f" : "", tx->str);
        }
        tx = fat5__json_get(an, "text")->child;
        if (!fat5__json_as_double(as->child, &cp) || !(cp >= 0 && cp < 4e18) ||
            (a0 = fat5__task_cp_byte(cx->str, cx->len, (int64_t)cp)) < 0 || a0 + (int64_t)tx->len > (int64_t)cx->len ||
            memcmp(cx->str + a0, tx->str, tx->len) != 0)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: the answer '%.60s' is not at character %.0f of the "
                             "context (answer_start counts characters)", path, (long long)line, tx->str, cp);
        a1 = c0 + a0 + (int64_t)tx->len;
        a0 += c0;
        if (in->oom || gold->oom) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        if ((st = fat5__task_encode(t, in->buf, in->len, max_len, ids, off, n)))
            return fat5__err_prefix(ctx, st, "%s: line %lld: ", path, (long long)line);
        for (i = 0; i < *n; i++) {   // run_qa's: the last piece starting at or before the answer, the first ending at or after it
            int64_t s0 = (*off)[2 * i], e0 = (*off)[2 * i + 1];
            if (e0 <= s0 || e0 <= c0) continue;
            if (s0 <= a0 || s < 0) s = s0 <= a0 || e0 > a0 ? i : s;
            if (e0 >= a1) {
                e = i;
                break;
            }
        }
        if (s < 0 || e < 0 || (*off)[2 * s + 1] <= a0) {   // truncation cut the answer: not counted
            s = e = *n;
            *cut = 1;
        }
        pay[0] = (int32_t)s;
        pay[1] = (int32_t)e;
        *n_pay = 2;
        return FAT5_OK;
    }
}

// The rows of a task's JSON Lines file into f->train / f->val as fat5__ft_read does for pairs
// (eval_fraction's held-out rows when split, max_eval_samples, the training rows' hash); qa's
// validation rows keep their pieces' spans.
static fat5_status fat5__task_read(fat5_trainer *t, const char *path, int is_val, int split) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    const fat5_train_config *c = &t->cfg;
    int task = fat5__task_of(c);
    int64_t vocab = t->m->cfg.vocab_size, max_val = c->max_eval_samples, i = 0, j, cut = 0, rows_cut = 0;
    int64_t L = t->m->cfg.num_labels;
    fat5__jl jl;
    fat5__sb in, gold;
    char *line;
    size_t len;
    int32_t *pay = NULL;
    int64_t cap_pay = 0;
    fat5_status st;
    if ((st = fat5__task_label_index(t))) return st;
    if ((st = fat5__jl_open(ctx, path, &jl)))
        return fat5__err_prefix(ctx, st, "%s: ", is_val ? "validation_file" : "train_file");
    fat5__sb_init(&in, ctx);
    fat5__sb_init(&gold, ctx);
    while (!st && fat5__jl_next(&jl, &line, &len)) {
        fat5__jdoc *d = NULL;
        int32_t *ids = NULL;
        int64_t *off = NULL, n = 0, n_pay = 0, to_val, qa_c0 = 0;
        fat5_pairs_row row;
        if (is_val && max_val > 0 && f->val.n >= max_val) break;
        if (!fat5__ft_grow(ctx, (void **)&pay, &cap_pay, (int64_t)len + L + 16, sizeof *pay)) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            break;
        }
        if ((st = fat5__json_parse(ctx, "row", line, len, 64, &d))) {
            st = fat5__err_prefix(ctx, st, "%s: line %lld: ", path, (long long)jl.line);
            break;
        }
        st = fat5__task_row(t, d->root, path, jl.line, &in, &gold, &ids, &off, &n, &pay, &cap_pay, &n_pay, &cut, &qa_c0);
        if (!st && t->m->cfg.head == FAT5_HEAD_SEQ_CLS) {   // T5ForSequenceClassification: one EOS in every input
            int64_t eos = 0;
            for (j = 0; j < n; j++) eos += ids[j] == t->m->cfg.eos_token_id;
            if (eos != 1)
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: the input holds %lld EOS tokens (its text "
                               "spells EOS, e.g. </s>): T5ForSequenceClassification needs the same number in every "
                               "input, the one the tokenizer appends", path, (long long)jl.line, (long long)eos);
        }
        fat5__json_free(ctx, d);
        for (j = 0; !st && j < n; j++)
            if (ids[j] < 0 || ids[j] >= vocab)
                st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: line %lld: token id %ld is outside the model's "
                               "vocabulary (%lld ids): the tokenizer does not match the model", path,
                               (long long)jl.line, (long)ids[j], (long long)vocab);
        if (!st && n == 0)   // (a batch's rows, and so its payloads, are bounded by its tokens: fat5__ft_open's buf_pay)
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: line %lld: the input has no tokens (its text is empty and the "
                           "tokenizer adds no EOS): a row needs at least one", path, (long long)jl.line);
        if (!st && n > c->ul2.enc_tokens)
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: line %lld: the input has %lld tokens, more than batch_tokens "
                           "%lld holds (raise it, or truncate with max_length)", path, (long long)jl.line,
                           (long long)n, (long long)c->ul2.enc_tokens);
        rows_cut += cut > 0;
        to_val = is_val || (split && fat5__ft_held_out(i, c->seed, c->eval_fraction));
        i++;
        if (!st && !(to_val && max_val > 0 && f->val.n >= max_val)) {
            memset(&row, 0, sizeof row);
            row.input_ids = ids;
            row.n_input = n;
            row.target_ids = pay;
            row.n_target = n_pay;
            row.input_text = in.buf ? in.buf : "";
            row.input_len = in.len;
            row.target_text = gold.buf ? gold.buf : "";
            row.target_len = gold.len;
            row.line = jl.line;
            if (!fat5__ftrows_add(ctx, to_val ? &f->val : &f->train, &row, to_val, -1))
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: line %lld: out of memory for the rows", path,
                               (long long)jl.line);
            if (!st && to_val && task == FAT5__TASK_QA) {   // the pieces' spans, for the predictions
                if (!fat5__ft_grow(ctx, (void **)&f->val_off, &f->cap_val_off, f->n_val_off + 2 * n + 1, sizeof *f->val_off) ||
                    !fat5__ft_grow(ctx, (void **)&f->val_off_at, &f->cap_val_off_at, f->val.n, sizeof *f->val_off_at))
                    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
                else {
                    f->val_off[f->n_val_off] = qa_c0;   // the context's first byte, then the spans
                    f->val_off_at[f->val.n - 1] = f->n_val_off + 1;
                    memcpy(f->val_off + f->n_val_off + 1, off, (size_t)(2 * n) * sizeof *off);
                    f->n_val_off += 2 * n + 1;
                }
            }
            if (!st && !to_val) fat5__ft_hash_row(f, ids, n, pay, n_pay);   // the training rows' identity
        }
        fat5__free(ctx, ids);
        fat5__free(ctx, off);
    }
    if (!st && rows_cut)
        fat5__log(ctx, FAT5_LOG_WARN, "%s: %lld rows lost %s to max_length truncation", path, (long long)rows_cut,
                  task == FAT5__TASK_QA ? "their answer (not counted in the loss)" : "words");
    fat5__sb_free(&in);
    fat5__sb_free(&gold);
    fat5__free(ctx, pay);
    fat5__free(ctx, jl.text);
    fat5__free(ctx, f->lab_idx);   // (pointers into the model's names: made again for each file)
    f->lab_idx = NULL;
    f->n_lab_idx = 0;
    return st;
}

// ---------------------------------------------------------------------------------------------
// the predictions and their scores

// seqeval's type of a tag (its default mode): after the first character, the part after the first
// '-' (the whole rest without one); "_" when empty ("O")
static void fat5__task_tag_type(const char *tag, const char **ty, size_t *len) {
    const char *r = tag[0] ? tag + 1 : tag, *d = strchr(r, '-');
    if (d) r = d + 1;
    *ty = *r ? r : "_";
    *len = *r ? strlen(r) : 1;
}

// The entities of the sentences' tags as seqeval's get_entities finds them (its default mode: the
// sentences flattened with an "O" after each): (type's word, first, last) triples in flattened
// positions into ent (the type is that of the word at the triple's first index). Returns the
// count.
static int64_t fat5__task_entities(const char *const *tags, const int64_t *cu, int64_t n_sent, int64_t *ent) {
    int64_t s, i, m = 0, begin = 0, k = 0, prev_at = -1;
    char prev_tag = 'O';
    const char *prev_ty = "_";
    size_t prev_len = 1;
    for (s = 0; s < n_sent; s++)
        for (i = cu[s]; i <= cu[s + 1]; i++, k++) {   // the sentence's words, then its "O"
            const char *tag = i < cu[s + 1] ? tags[i] : "O", *ty;
            char c = tag[0];
            size_t len;
            int same, end, start;
            fat5__task_tag_type(tag, &ty, &len);
            same = len == prev_len && !memcmp(ty, prev_ty, len);
            end = prev_tag == 'E' || prev_tag == 'S' ||
                  ((prev_tag == 'B' || prev_tag == 'I') && (c == 'B' || c == 'S' || c == 'O')) ||
                  (prev_tag != 'O' && prev_tag != '.' && !same);
            start = c == 'B' || c == 'S' || ((prev_tag == 'E' || prev_tag == 'S' || prev_tag == 'O') && (c == 'E' || c == 'I')) ||
                    (c != 'O' && c != '.' && !same);
            if (end) {
                ent[3 * m] = prev_at;
                ent[3 * m + 1] = begin;
                ent[3 * m + 2] = k - 1;
                m++;
            }
            if (start) begin = k;
            prev_tag = c;
            prev_ty = ty;
            prev_len = len;
            prev_at = i < cu[s + 1] ? i : -1;
        }
    return m;
}

// Entity-level precision, recall and F1 (0..1) of predicted against gold tags of n_sent sentences
// (sentence s: words cu[s] .. cu[s + 1]), micro-averaged over entities as seqeval's default
// classification report: an entity is right when its type, first and last word all are.
// scratch: 6 (words + sentences) int64.
static void fat5__task_seqeval(const char *const *pred, const char *const *gold, const int64_t *cu, int64_t n_sent,
                               int64_t *scratch, double *p, double *r, double *f1) {
    int64_t words = cu[n_sent], *ep = scratch, *eg = scratch + 3 * (words + n_sent), np, ng, i, j, tp = 0;
    np = fat5__task_entities(pred, cu, n_sent, ep);
    ng = fat5__task_entities(gold, cu, n_sent, eg);
    for (i = 0, j = 0; i < np; i++) {   // both lists are in order of their last word
        const char *ta, *tb;
        size_t la, lb;
        while (j < ng && eg[3 * j + 2] < ep[3 * i + 2]) j++;
        if (j == ng || eg[3 * j + 2] != ep[3 * i + 2] || eg[3 * j + 1] != ep[3 * i + 1]) continue;
        fat5__task_tag_type(ep[3 * i] >= 0 ? pred[ep[3 * i]] : "O", &ta, &la);
        fat5__task_tag_type(eg[3 * j] >= 0 ? gold[eg[3 * j]] : "O", &tb, &lb);
        tp += la == lb && !memcmp(ta, tb, la);
    }
    *p = np ? (double)tp / (double)np : 0;
    *r = ng ? (double)tp / (double)ng : 0;
    *f1 = *p + *r > 0 ? 2 * *p * *r / (*p + *r) : 0;
}

// Macro-F1 (0..1) as scikit-learn's f1_score(average="macro", zero_division=0) from each class's
// true positives, false positives and false negatives: the mean over the classes in the gold or the
// predictions (all_labels, multi-label: over every label), 0 for a class with no true positive.
static double fat5__task_macro_f1(const int64_t *tp, const int64_t *fp, const int64_t *fn, int64_t L, int all_labels) {
    double sum = 0;
    int64_t i, k = 0;
    for (i = 0; i < L; i++) {
        if (!all_labels && tp[i] + fp[i] + fn[i] == 0) continue;
        sum += tp[i] ? 2.0 * (double)tp[i] / (double)(2 * tp[i] + fp[i] + fn[i]) : 0.0;
        k++;
    }
    return k ? sum / (double)k : 0;
}

// the row's gold items (the validation text after the input: items joined by 0x1f) into out[],
// pointers into a copy (a context buffer the caller frees); returns the count
static int64_t fat5__task_split(char *s, char **out, int64_t cap) {
    int64_t n = 0;
    while (n < cap) {
        char *z = strchr(s, '\x1f');
        out[n++] = s;
        if (!z) break;
        *z = 0;
        s = z + 1;
    }
    return n;
}

// The head's predictions for the validation rows that keep their texts (rank 0), scored as
// run_classification / run_ner / run_qa report them (percent), and each row's prediction in
// f->pred (JSON lines: the input, the gold and the prediction).
static fat5_status fat5__task_predict(fat5_trainer *t, fat5_train_metrics *mr) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    const fat5__ftrows *v = &f->val;
    const fat5_model_config *mc = &t->m->cfg;
    int task = fat5__task_of(&t->cfg);
    int64_t n = f->n_val_text, L = mc->num_labels, i, j, nb, *bat = NULL, *tp = NULL, *fp = NULL, *fn = NULL;
    int64_t right = 0, total = 0, words = 0, *cu = NULL, *scratch = NULL, *refo = NULL;
    int32_t *rows = NULL, *buf = NULL;
    float *out = NULL;
    char **pred_tags = NULL, **gold_tags = NULL, **preds = NULL, **refs = NULL, *gcopy = NULL;
    double sq = 0, em = 0, f1 = 0;
    fat5_problem pr = mc->problem_type == FAT5_PROBLEM_AUTO ? (L == 1 ? FAT5_PROBLEM_REGRESSION : FAT5_PROBLEM_SINGLE_LABEL)
                                                            : mc->problem_type;
    fat5__sb *P = &f->pred;
    fat5_status st = FAT5_OK;
    if (n == 0) return FAT5_OK;
    rows = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof *rows));
    bat = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof *bat));
    buf = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(2 * (n + 1) + f->budget_e + f->buf_pay) * sizeof *buf));
    out = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)((f->budget_e + n) * (L > 2 ? L : 2)) * sizeof *out));
    tp = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)(3 * (L + 1)), sizeof *tp));
    cu = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)(n + 1), sizeof *cu));
    gcopy = FAT5__CAST(char *, fat5__malloc(ctx, v->n_text + 1));
    if (!rows || !bat || !buf || !out || !tp || !cu || !gcopy) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
        goto done;
    }
    fp = tp + L + 1;
    fn = fp + L + 1;
    memcpy(gcopy, v->text, v->n_text);
    if (task == FAT5__TASK_TOKENS) {   // the words: the first pieces (payload != -100)
        for (i = 0; i < n; i++) {
            const int32_t *pay = v->ids + v->at[i] + fat5__ftrow_in(v, i);
            int64_t e = fat5__ftrow_tgt(v, i);
            for (j = 0; j < e; j++) words += pay[j] != -100;
            cu[i + 1] = words;
        }
        pred_tags = FAT5__CAST(char **, fat5__calloc(ctx, (size_t)(2 * words + 1), sizeof *pred_tags));
        scratch = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(6 * (words + n) + 6) * sizeof *scratch));
        if (!pred_tags || !scratch) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
            goto done;
        }
        gold_tags = pred_tags + words;
    }
    if (task == FAT5__TASK_QA) {
        preds = FAT5__CAST(char **, fat5__calloc(ctx, (size_t)n, sizeof *preds));
        refs = FAT5__CAST(char **, fat5__calloc(ctx, v->n_text + 1, sizeof *refs));
        refo = FAT5__CAST(int64_t *, fat5__calloc(ctx, (size_t)(n + 1), sizeof *refo));
        if (!preds || !refs || !refo) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
            goto done;
        }
    }
    P->len = 0;
    for (i = 0; i < n; i++) rows[i] = (int32_t)i;
    nb = fat5__ft_pack(v, rows, n, t->cfg.per_device_eval_batch_size, f->budget_e, f->budget_d, bat);
    for (j = 0; j < nb && !st; j++) {
        fat5_batch b;
        int64_t R = 0, C = 0, k, a = bat[j], m = bat[j + 1] - bat[j], tok0 = 0;
        if ((st = fat5__ft_fill(v, rows + a, m, buf, &b))) break;
        t->m->no_grad = 1;
        st = fat5_model_forward(t->m, &b, NULL, NULL);
        t->m->no_grad = 0;
        if (st || (st = fat5_model_get_head_output(t->m, NULL, 0, &R, &C)) ||
            (st = fat5_model_get_head_output(t->m, out, R * C, NULL, NULL)))
            break;
        for (k = 0; k < m && !st; k++) {   // row a + k: its outputs from row k (classify) or token tok0
            int64_t row = a + k, e = fat5__ftrow_in(v, row), y;
            const int32_t *pay = v->ids + v->at[row] + e;
            const char *input = v->text + v->text_at[row], *gtext = gcopy + (v->text_at[row] + (int64_t)strlen(input) + 1);
            const float *o = out + (task == FAT5__TASK_CLASSIFY ? k * C : tok0 * C);
            fat5__sb_puts(P, "{\"input\": ");
            fat5__sb_json_string(P, input);
            fat5__sb_puts(P, ", \"label\": ");
            if (task == FAT5__TASK_CLASSIFY && pr == FAT5_PROBLEM_SINGLE_LABEL) {
                fat5__sb_json_string(P, v->text + v->text_at[row] + strlen(input) + 1);
            } else {   // the gold items as a list
                const char *g = v->text + v->text_at[row] + strlen(input) + 1;
                fat5__sb_puts(P, "[");
                while (*g) {
                    const char *z = strchr(g, '\x1f');
                    size_t gl = z ? (size_t)(z - g) : strlen(g);
                    char *item = FAT5__CAST(char *, fat5__malloc(ctx, gl + 1));
                    if (!item) {
                        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
                        break;
                    }
                    memcpy(item, g, gl);
                    item[gl] = 0;
                    if (pr == FAT5_PROBLEM_REGRESSION && task == FAT5__TASK_CLASSIFY) fat5__sb_puts(P, item);
                    else fat5__sb_json_string(P, item);
                    fat5__free(ctx, item);
                    g += gl;
                    if (*g) {
                        g++;
                        fat5__sb_puts(P, ", ");
                    }
                }
                fat5__sb_puts(P, "]");
            }
            fat5__sb_puts(P, ", \"prediction\": ");
            if (task == FAT5__TASK_CLASSIFY && pr == FAT5_PROBLEM_SINGLE_LABEL) {
                for (y = 0, i = 1; i < L; i++) y = o[i] > o[y] ? i : y;
                right += y == pay[0];
                tp[y] += y == pay[0];
                fp[y] += y != pay[0];
                fn[pay[0]] += y != pay[0];
                fat5__sb_json_string(P, fat5_model_label_name(t->m, y));
                total++;
            } else if (task == FAT5__TASK_CLASSIFY && pr == FAT5_PROBLEM_MULTI_LABEL) {
                int all = 1, first = 1;
                fat5__sb_puts(P, "[");
                for (i = 0; i < L; i++) {
                    float g;
                    int yp = o[i] > 0, yg;
                    memcpy(&g, &pay[i], 4);
                    yg = g > 0.5f;
                    all &= yp == yg;
                    tp[i] += yp && yg;
                    fp[i] += yp && !yg;
                    fn[i] += !yp && yg;
                    if (yp) {
                        fat5__sb_puts(P, first ? "" : ", ");
                        fat5__sb_json_string(P, fat5_model_label_name(t->m, i));
                        first = 0;
                    }
                }
                fat5__sb_puts(P, "]");
                right += all;
                total++;
            } else if (task == FAT5__TASK_CLASSIFY) {   // regression
                fat5__sb_puts(P, "[");
                for (i = 0; i < L; i++) {
                    float g;
                    memcpy(&g, &pay[i], 4);
                    sq += ((double)o[i] - g) * ((double)o[i] - g);
                    fat5__sb_printf(P, "%s%.9g", i ? ", " : "", (double)o[i]);
                }
                fat5__sb_puts(P, "]");
                total += L;
            } else if (task == FAT5__TASK_TOKENS) {   // each word's first piece
                int64_t w = cu[row];
                fat5__sb_puts(P, "[");
                for (i = 0; i < e; i++) {
                    int64_t c2;
                    if (pay[i] == -100) continue;
                    for (y = 0, c2 = 1; c2 < L; c2++) y = o[i * C + c2] > o[i * C + y] ? c2 : y;
                    pred_tags[w] = FAT5__CAST(char *, (void *)(uintptr_t)fat5_model_label_name(t->m, y));
                    gold_tags[w] = FAT5__CAST(char *, (void *)(uintptr_t)fat5_model_label_name(t->m, pay[i]));
                    right += y == pay[i];
                    fat5__sb_puts(P, w > cu[row] ? ", " : "");
                    fat5__sb_json_string(P, pred_tags[w]);
                    w++;
                }
                total += w - cu[row];
                fat5__sb_puts(P, "]");
            } else {   // qa: the best span of at most FAT5__QA_MAX_ANSWER pieces inside the context
                const int64_t *off = f->val_off + f->val_off_at[row];
                int64_t c0 = off[-1], bs = -1, be = -1, s2, e2;   // the context's first byte (fat5__task_read)
                double best = -INFINITY;
                for (s2 = 0; s2 < e; s2++) {
                    if (off[2 * s2 + 1] <= off[2 * s2] || off[2 * s2] < c0) continue;
                    for (e2 = s2; e2 < e && e2 < s2 + FAT5__QA_MAX_ANSWER; e2++) {
                        double sc = (double)o[2 * s2] + (double)o[2 * e2 + 1];
                        if (off[2 * e2 + 1] > off[2 * e2] && sc > best) best = sc, bs = s2, be = e2;
                    }
                }
                if (bs >= 0) {
                    size_t pl = (size_t)(off[2 * be + 1] - off[2 * bs]);
                    preds[row] = FAT5__CAST(char *, fat5__malloc(ctx, pl + 1));
                    if (preds[row]) {
                        memcpy(preds[row], input + off[2 * bs], pl);
                        preds[row][pl] = 0;
                    }
                } else {
                    preds[row] = fat5__strdup(ctx, "");
                }
                if (!preds[row]) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
                else fat5__sb_json_string(P, preds[row]);
                refo[row + 1] = refo[row] + fat5__task_split(FAT5__CAST(char *, (void *)(uintptr_t)gtext), refs + refo[row],
                                                             (int64_t)v->n_text + 1 - refo[row]);
            }
            fat5__sb_puts(P, "}\n");
            tok0 += e;
        }
    }
    if (st) goto done;
    mr->has_predict = 1;
    if (task == FAT5__TASK_CLASSIFY && pr != FAT5_PROBLEM_REGRESSION) {
        mr->eval_accuracy = total ? 100.0 * (double)right / (double)total : 0;
        mr->eval_macro_f1 = 100.0 * fat5__task_macro_f1(tp, fp, fn, L, pr == FAT5_PROBLEM_MULTI_LABEL);
    } else if (task == FAT5__TASK_CLASSIFY) {
        mr->eval_mse = total ? sq / (double)total : 0;
    } else if (task == FAT5__TASK_TOKENS) {
        double p = 0, r = 0, ff = 0;
        fat5__task_seqeval((const char *const *)pred_tags, (const char *const *)gold_tags, cu, n, scratch, &p, &r, &ff);
        mr->eval_precision = 100 * p;
        mr->eval_recall = 100 * r;
        mr->eval_f1 = 100 * ff;
        mr->eval_accuracy = total ? 100.0 * (double)right / (double)total : 0;
    } else {
        if ((st = fat5_metric_squad_corpus(ctx, (const char *const *)preds, n, (const char *const *)refs, refo, &em, &f1)))
            goto done;
        mr->eval_exact_match = em;
        mr->eval_f1 = f1;
    }
    if (P->oom) {
        P->oom = 0;
        P->len = 0;
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory for the predictions");
    }
done:
    for (i = 0; preds && i < n; i++) fat5__free(ctx, preds[i]);
    fat5__free(ctx, preds);
    fat5__free(ctx, refs);
    fat5__free(ctx, refo);
    fat5__free(ctx, pred_tags);
    fat5__free(ctx, scratch);
    fat5__free(ctx, gcopy);
    fat5__free(ctx, cu);
    fat5__free(ctx, tp);
    fat5__free(ctx, out);
    fat5__free(ctx, buf);
    fat5__free(ctx, bat);
    fat5__free(ctx, rows);
    return st;
}
