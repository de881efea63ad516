// =============================================================================================
// ==[9.3] run: fine-tuning on (input, target) pairs: batches, evaluation with generation, the best checkpoint ==
// The fine-tuning task of the training loop of [9.2]: a train_file in the config makes the trainer
// draw its micro-batches here instead of from the UL2 sampler; everything else (optimizers,
// schedules, clipping, accumulation, several ranks, metrics.jsonl, checkpoints, resume) is the
// loop's own. The trainer calls the fat5__ft_* functions declared at the top of [9.2].
//
// Data: the rows of train_file (and validation_file) are read once at creation with the pairs
// reader of [8.6], tokenized with the model checkpoint's tokenizer (or ByT5's byte ids), and kept
// in memory as ids: 4 bytes a token and about 30 a row (the validation rows also keep their
// texts, for the predictions). A pretokenized pairs file (a token file of [5.1] whose documents
// are the rows' inputs and targets in turn) is indexed instead, its rows read from the file as
// batches are drawn. Without a validation_file, a share eval_fraction of the training rows is held
// out, row i when splitmix64(i ^ seed') / 2^64 < eval_fraction (seed' from the run's seed).
//
// Batches: an epoch is a permutation of the training rows drawn from (seed, epoch); with
// group_by_length, windows of about 50 batches' rows are sorted by length (longest first), so
// rows of similar lengths meet; the rows are then packed in order into micro-batches that hold at
// most per_device_train_batch_size rows, batch_tokens input and batch_labels_tokens target
// tokens, and the batches' order is shuffled. A micro-batch is packed like the UL2 sampler's:
// inputs and targets concatenated with cu_seqlens, labels = the target ids (EOS included), the
// decoder input their shift right behind decoder_start_token_id (the model's, fat5_batch). The
// sampler's whole state is (seed, epoch, batch index): an epoch's plan is a function of them and
// of the rows, so a resumed run draws exactly the batches of an uninterrupted one.
//
// Evaluation: the mean loss over the validation rows' label tokens (the first max_eval_samples;
// batches split across ranks); with predict_with_generate, rank 0 also generates for them
// (fat5_generate, greedy or beams) and scores the text with [8.5]'s metrics, as Hugging Face's
// run_summarization / evaluate report them (percent): exact_match and f1 (SQuAD), rouge1, rouge2,
// rougeL, rougeLsum (stemmed), bleu (sacrebleu), and gen_len. The predictions go to
// OUTPUT_DIR/eval_predictions.jsonl, and into a checkpoint saved after the same step. A checkpoint
// saved after an evaluation competes for OUTPUT_DIR/best by metric_for_best_model;
// save_total_limit never deletes it.

#define FAT5__FT_WINDOW_BATCHES 50   // group_by_length: rows of about this many batches sorted together

static const char fat5__finetune_options[] =
    "train_file: (input, target) pairs: .jsonl / .json, .tsv, .csv, two parallel text files\n"
    "  \"inputs.txt,targets.txt\", or a pretokenized pairs file (tools/pretokenize --pairs, read from disk as\n"
    "  batches need it); makes the run a fine-tuning one (data unused)\n"
    "validation_file: pairs for evaluation, the same formats (none: eval_fraction of the training rows)\n"
    "text_column, summary_column: the input's and the target's field or column (input, target)\n"
    "source_prefix: put before every input (\"summarize: \")\n"
    "tokenizer_name: a tokenizer file or directory (default: the model checkpoint's, else byte-level ids)\n"
    "per_device_train_batch_size: rows of a micro-batch at most (0: batch_tokens and batch_labels_tokens alone)\n"
    "per_device_eval_batch_size: rows generated together at an evaluation\n"
    "num_train_epochs: passes over the training rows (sets max_steps; 0: max_steps decides)\n"
    "group_by_length: batches of rows of similar lengths (true or false; false: rows of any lengths meet, as\n"
    "  Hugging Face's default; packed batches have no padding to save)\n"
    "predict_with_generate: evaluations also generate for the validation rows and score them (true or false)\n"
    "generation_max_length: generated length, Hugging Face's max_length (start token included; 0: max_labels_length)\n"
    "generation_num_beams: beams at evaluation (1: greedy)\n"
    "max_eval_samples: validation rows an evaluation uses (0: all)\n"
    "metric_for_best_model: loss, exact_match, f1, rouge1, rouge2, rougeL, rougeLsum, bleu or gen_len (tasks:\n"
    "  accuracy, macro_f1, mse, precision, recall, f1, exact_match):\n"
    "  OUTPUT_DIR/best names the best checkpoint by it\n"
    "greater_is_better: a greater metric_for_best_model is the better one (true or false)\n"
    "task: seq2seq ((input, target) pairs, the default), classify (a class or labels per row), token-classify (a\n"
    "  tag per word) or qa (extractive question answering): the last three train a head (docs/tasks.md)\n"
    "classifier: classify with fat5's encoder-only classifier (encoder, the default) or T5ForSequenceClassification (t5)\n"
    "text_column_names: classify: the text fields, comma-separated, joined by a space (text); token-classify: the\n"
    "  words' field (tokens)\n"
    "label_column_name: the label's field (classify: label; token-classify: ner_tags)\n"
    "label_file: the class names, one a line (none: the training rows' names, sorted; integer labels as they are)\n"
    "question_column_name, context_column_name, answer_column_name: qa's fields (question, context, answers)\n"
    "pooling: the encoder classifier's sequence state: eos (its last EOS), mean or first\n"
    "problem_type: classify: single_label_classification, multi_label_classification or regression (none: from\n"
    "  the labels: lists are multi-label, floats regression)\n"
    "classifier_dropout: the head's dropout rate (0)\n";

FAT5_API const char *fat5_finetune_option_names(void) { return fat5__finetune_options; }

static void fat5__ft_config_defaults(fat5_train_config *c) {
    c->per_device_eval_batch_size = 32;
    c->generation_num_beams = 1;
    c->metric_for_best_model = "loss";
    c->greater_is_better = -1;
}

static int fat5__ft_bool(const char *v, int *out) {
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) *out = 1;
    else if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) *out = 0;
    else return 0;
    return 1;
}

// The metric a name means (an "eval_" prefix allowed); -1 when none. Index into fat5__ft_metric_names.
static const char *const fat5__ft_metric_names[] = {"loss", "exact_match", "f1", "rouge1", "rouge2",
                                                    "rougeL", "rougeLsum", "bleu", "gen_len", "accuracy",
                                                    "macro_f1", "precision", "recall", "mse"};
static int fat5__ft_metric_index(const char *name) {
    int i;
    if (!strncmp(name, "eval_", 5)) name += 5;
    for (i = 0; i < (int)(sizeof fat5__ft_metric_names / sizeof fat5__ft_metric_names[0]); i++)
        if (!strcmp(name, fat5__ft_metric_names[i])) return i;
    return -1;
}
static double fat5__ft_metric_value(const fat5_train_metrics *r, int i) {
    switch (i) {
    case 0: return r->eval_loss;
    case 1: return r->eval_exact_match;
    case 2: return r->eval_f1;
    case 3: return r->eval_rouge1;
    case 4: return r->eval_rouge2;
    case 5: return r->eval_rougeL;
    case 6: return r->eval_rougeLsum;
    case 7: return r->eval_bleu;
    case 8: return r->eval_gen_len;
    case 9: return r->eval_accuracy;
    case 10: return r->eval_macro_f1;
    case 11: return r->eval_precision;
    case 12: return r->eval_recall;
    default: return r->eval_mse;
    }
}

// A fine-tuning option of fat5_train_config_set: 1 when key is one (*ok: 1, 0 for a bad value,
// -1 out of memory with the message set), 0 when it is not.
static int fat5__ft_config_set(fat5_ctx *ctx, fat5_train_config *c, const char *key, const char *v, int *ok) {
    int b = 0;
    const int64_t imax = (int64_t)1 << 52;
    static const struct { const char *name; size_t off; } strs[] = {
        {"train_file", offsetof(fat5_train_config, train_file)},
        {"validation_file", offsetof(fat5_train_config, validation_file)},
        {"text_column", offsetof(fat5_train_config, text_column)},
        {"summary_column", offsetof(fat5_train_config, summary_column)},
        {"source_prefix", offsetof(fat5_train_config, source_prefix)},
        {"tokenizer_name", offsetof(fat5_train_config, tokenizer_name)},
        {"text_column_names", offsetof(fat5_train_config, text_column_names)},
        {"label_column_name", offsetof(fat5_train_config, label_column_name)},
        {"label_file", offsetof(fat5_train_config, label_file)},
        {"question_column_name", offsetof(fat5_train_config, question_column_name)},
        {"context_column_name", offsetof(fat5_train_config, context_column_name)},
        {"answer_column_name", offsetof(fat5_train_config, answer_column_name)},
    };
    static const char *const tasks[] = {"seq2seq", "classify", "token-classify", "qa", NULL};
    static const char *const classifiers[] = {"encoder", "t5", NULL};
    static const char *const pools[] = {"eos", "mean", "first", NULL};
    static const char *const problems[] = {"single_label_classification", "multi_label_classification", "regression",
                                           NULL};
    static const struct { const char *name; size_t off; const char *const *values; } choices[] = {
        {"task", offsetof(fat5_train_config, task), tasks},
        {"classifier", offsetof(fat5_train_config, classifier), classifiers},
        {"pooling", offsetof(fat5_train_config, pooling), pools},
        {"problem_type", offsetof(fat5_train_config, problem_type), problems},
    };
    size_t k;
    for (k = 0; k < sizeof strs / sizeof strs[0]; k++)
        if (!strcmp(key, strs[k].name)) {
            const char **dst = (const char **)(void *)((char *)c + strs[k].off);
            *ok = fat5__opt_str(ctx, v, dst);
            return 1;
        }
    for (k = 0; k < sizeof choices / sizeof choices[0]; k++)
        if (!strcmp(key, choices[k].name)) {
            const char **dst = (const char **)(void *)((char *)c + choices[k].off);
            int i;
            for (i = 0; choices[k].values[i] && strcmp(v, choices[k].values[i]); i++) {}
            *ok = choices[k].values[i] ? fat5__opt_str(ctx, v, dst) : 0;
            return 1;
        }
    if (!strcmp(key, "classifier_dropout")) *ok = fat5__opt_f64(v, 0, 1, &c->classifier_dropout) && c->classifier_dropout < 1;
    else if (!strcmp(key, "per_device_train_batch_size")) *ok = fat5__opt_i64(v, 0, 1 << 30, &c->per_device_train_batch_size);
    else if (!strcmp(key, "per_device_eval_batch_size")) *ok = fat5__opt_i64(v, 1, 1 << 20, &c->per_device_eval_batch_size);
    else if (!strcmp(key, "num_train_epochs")) *ok = fat5__opt_f64(v, 0, 1e9, &c->num_train_epochs);
    else if (!strcmp(key, "group_by_length")) *ok = fat5__ft_bool(v, &c->group_by_length);
    else if (!strcmp(key, "predict_with_generate")) *ok = fat5__ft_bool(v, &c->predict_with_generate);
    else if (!strcmp(key, "generation_max_length")) *ok = fat5__opt_i64(v, 0, 1 << 24, &c->generation_max_length);
    else if (!strcmp(key, "generation_num_beams")) *ok = fat5__opt_i64(v, 1, 32, &c->generation_num_beams);
    else if (!strcmp(key, "max_eval_samples")) *ok = fat5__opt_i64(v, 0, imax, &c->max_eval_samples);
    else if (!strcmp(key, "metric_for_best_model"))
        *ok = fat5__ft_metric_index(v) < 0 ? 0 : fat5__opt_str(ctx, v, &c->metric_for_best_model);
    else if (!strcmp(key, "greater_is_better")) {
        *ok = fat5__ft_bool(v, &b);
        c->greater_is_better = b;
    } else {
        return 0;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// rows in memory

typedef struct fat5__ftrows {
    int32_t *ids;        // row r: its input ids ids[at[r] .. at[r] + n_in[r]), then its target ids to at[r + 1]
    int64_t *at;         // [n + 1]
    int32_t *n_in;       // [n]
    fat5_tokens *src;    // streamed rows (a pretokenized pairs file): no ids here; row r's are read from
    int64_t *pos;        // [n] src at stream index pos[r] (its input, then its target, EOS each)
    int64_t n, cap, n_ids, cap_ids;
    int64_t max_in, max_tgt, sum_in, sum_tgt;   // longest and total input / target ids
    char *text;          // rows with texts (validation): "input\0target\0" each
    int64_t *text_at;    // [n]: row r's input text in text (-1: none kept)
    size_t n_text, cap_text;
    int pay;             // a task head's rows ([9.4]): after the input ids a payload, not target ids:
                         // 1 int32 labels (fat5_batch.head_labels), 2 floats (head_targets); 0 pairs
} fat5__ftrows;

typedef struct fat5__ftkey { int64_t len; int32_t pos, row; } fat5__ftkey;   // a row to sort by length

struct fat5__ft {
    fat5_tokenizer *tok;          // NULL: byte-level ids
    fat5__ftrows train, val;
    int64_t n_val_text;           // validation rows with their texts: the first n_val_text
    uint64_t hash;                // of the training rows' ids (the data's identity in checkpoints)
    // the sampler: the next batch is batch `pos` of epoch `epoch`
    uint64_t seed;
    int64_t epoch, pos;
    int64_t planned;              // the epoch whose plan perm / bat hold (-1: none)
    int32_t *perm, *tmp;          // [train.n]: rows in batch order; scratch
    int64_t *bat, *bat_tmp;       // [train.n + 1]: batch b is perm[bat[b] .. bat[b + 1])
    int32_t *order;               // [train.n] scratch: the batches' order
    fat5__ftkey *keys;            // [train.n] scratch: a window's rows by length
    int64_t n_batches, window;
    int32_t *bbuf;                // the emitted batch: enc cu [R+1] | dec cu [R+1] | inputs [E] | labels [D]
    int64_t max_rows, budget_e, budget_d;
    // evaluation
    int metric;                   // fat5__ft_metric_names index of metric_for_best_model
    int greater;                  // 1: a greater metric is better
    int64_t best_step;            // the best checkpoint's step (-1: none yet)
    double best_value;
    int64_t eval_step;            // the step of the last evaluation (-1: none)
    double eval_value;            // its metric_for_best_model
    fat5__sb pred;                // its predictions, JSON lines (predict_with_generate, a task head's)
    // a task head ([9.4])
    int task;                     // FAT5__TASK_*
    int64_t buf_pay;              // payload ints a batch holds at most (bbuf: instead of budget_d)
    int64_t *val_off, *val_off_at;// qa: the validation rows' pieces' byte spans; row r's from val_off_at[r]
    int64_t n_val_off, cap_val_off, cap_val_off_at;
    fat5__cfg_label *lab_idx;     // [n_lab_idx]: the model's label names with their ids, by name (label lookups)
    int64_t n_lab_idx;
};

// the task heads ([9.4], run_tasks.c)
static int fat5__task_of(const fat5_train_config *c);
static fat5_status fat5__task_read(fat5_trainer *t, const char *path, int is_val, int split);
static fat5_status fat5__task_predict(fat5_trainer *t, fat5_train_metrics *mr);

static void fat5__ftrows_free(fat5_ctx *ctx, fat5__ftrows *r) {
    fat5__free(ctx, r->ids);
    fat5__free(ctx, r->at);
    fat5__free(ctx, r->n_in);
    fat5__free(ctx, r->pos);
    fat5_tokens_destroy(r->src);
    fat5__free(ctx, r->text);
    fat5__free(ctx, r->text_at);
    memset(r, 0, sizeof *r);
}

// grows *p (elements of `elem` bytes, capacity *cap) to hold need elements; 0 when out of memory
static int fat5__ft_grow(fat5_ctx *ctx, void **p, int64_t *cap, int64_t need, size_t elem) {
    int64_t c = *cap ? *cap : 64;
    void *n;
    if (need <= *cap) return 1;
    while (c < need) c += c / 2 + 1;
    if ((uint64_t)c > SIZE_MAX / elem) return 0;
    if (!(n = fat5__realloc(ctx, *p, (size_t)c * elem))) return 0;
    *p = n;
    *cap = c;
    return 1;
}

// Appends a row (and its texts when keep_text); 0 when out of memory. stream_pos >= 0: a streamed
// row (r->src), whose ids stay in the file at that stream index (row's ids are not read).
static int fat5__ftrows_add(fat5_ctx *ctx, fat5__ftrows *r, const fat5_pairs_row *row, int keep_text,
                            int64_t stream_pos) {
    int64_t need = r->n_ids + row->n_input + row->n_target;
    if (r->n + 2 > r->cap) {   // the per-row arrays, all of capacity r->cap
        int64_t c = r->cap ? r->cap + r->cap / 2 : 64;
        int64_t *at = FAT5__CAST(int64_t *, fat5__realloc(ctx, r->at, (size_t)c * sizeof *at));
        int32_t *n_in = at ? FAT5__CAST(int32_t *, fat5__realloc(ctx, r->n_in, (size_t)c * sizeof *n_in)) : NULL;
        int64_t *ta = n_in ? FAT5__CAST(int64_t *, fat5__realloc(ctx, r->text_at, (size_t)c * sizeof *ta)) : NULL;
        int64_t *pos = ta && stream_pos >= 0 ? FAT5__CAST(int64_t *, fat5__realloc(ctx, r->pos, (size_t)c * sizeof *pos))
                                             : NULL;
        if (at) r->at = at;
        if (n_in) r->n_in = n_in;
        if (ta) r->text_at = ta;
        if (pos) r->pos = pos;
        if (!ta || (stream_pos >= 0 && !pos)) return 0;
        r->cap = c;
    }
    if (r->n == 0) r->at[0] = 0;
    if (stream_pos >= 0) {
        r->pos[r->n] = stream_pos;
    } else {
        if (!fat5__ft_grow(ctx, (void **)&r->ids, &r->cap_ids, need, sizeof *r->ids)) return 0;
        memcpy(r->ids + r->n_ids, row->input_ids, (size_t)row->n_input * 4);
        memcpy(r->ids + r->n_ids + row->n_input, row->target_ids, (size_t)row->n_target * 4);
    }
    r->n_ids = need;
    r->n_in[r->n] = (int32_t)row->n_input;
    r->at[r->n + 1] = need;
    r->text_at[r->n] = -1;
    if (keep_text) {
        size_t t = row->input_len + row->target_len + 2;
        int64_t ct = (int64_t)r->cap_text;
        if (!fat5__ft_grow(ctx, (void **)&r->text, &ct, (int64_t)(r->n_text + t), 1)) return 0;
        r->cap_text = (size_t)ct;
        r->text_at[r->n] = (int64_t)r->n_text;
        memcpy(r->text + r->n_text, row->input_text, row->input_len);
        r->text[r->n_text + row->input_len] = 0;
        memcpy(r->text + r->n_text + row->input_len + 1, row->target_text, row->target_len);
        r->text[r->n_text + t - 1] = 0;
        r->n_text += t;
    }
    if (row->n_input > r->max_in) r->max_in = row->n_input;
    if (row->n_target > r->max_tgt) r->max_tgt = row->n_target;
    r->sum_in += row->n_input;
    r->sum_tgt += row->n_target;
    r->n++;
    return 1;
}

// The training rows' identity (f->hash) with one more row: its input ids a [na], then its target
// ids (or a task's payload) b [nb]
static void fat5__ft_hash_row(fat5__ft *f, const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    uint64_t h = f->hash ^ ((uint64_t)na * 0x9E3779B97F4A7C15ull) ^ (uint64_t)nb;
    int64_t j;
    for (j = 0; j < na; j++) h = (h ^ (uint32_t)a[j]) * 0x100000001B3ull;
    for (j = 0; j < nb; j++) h = (h ^ (uint32_t)b[j]) * 0x100000001B3ull;
    f->hash = fat5__h128_mix(h);
}

// Ids [pos, pos + n) of a pretokenized file into dst (its one file, read where they are).
static fat5_status fat5__ft_stream_read(fat5_tokens *t, int64_t pos, int64_t n, int32_t *dst) {
    const fat5__tokfile *tf = &t->files[fat5__tok_file_of(t, pos)];
    size_t w = (size_t)tf->width, bytes = (size_t)n * w;
    unsigned char *b = (unsigned char *)dst;
    int64_t i;
    t->win_file = -1;   // the window no longer matches the file position
    if (!fat5__tok_seek(tf->fp, FAT5__TOK_HEADER + (uint64_t)(pos - tf->first) * w) || fread(b, 1, bytes, tf->fp) != bytes)
        return fat5__err(t->ctx, FAT5_ERR_IO, "%s: byte %llu: read failed (was the file changed?)", tf->path,
                         (unsigned long long)(FAT5__TOK_HEADER + (uint64_t)(pos - tf->first) * w));
    for (i = n - 1; i >= 0; i--)   // little-endian ids in place, from the end (a 2-byte id never overtakes)
        dst[i] = (int32_t)fat5__tok_get_le(b + (size_t)i * w, (int)w);
    return FAT5_OK;
}

static int64_t fat5__ftrow_in(const fat5__ftrows *r, int64_t i) { return r->n_in[i]; }
static int64_t fat5__ftrow_tgt(const fat5__ftrows *r, int64_t i) { return r->at[i + 1] - r->at[i] - r->n_in[i]; }

// whether training row i is held out for evaluation (no validation_file): splitmix64 of its index
static int fat5__ft_held_out(int64_t i, uint64_t seed, double fraction) {
    uint64_t z = (uint64_t)i ^ (seed * 0xD1B54A32D192ED03ull) ^ 0x510E527FADE682D1ull;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0) < fraction;
}

static fat5_status fat5__ft_decode(fat5_trainer *t, const int32_t *ids, int64_t n, char **out);

// whether path starts as a token file does ("FAT5TOK\0"): a pretokenized pairs file
static int fat5__ft_is_tok(const char *path) {
    char m[8];
    FILE *fp = fopen(path, "rb");
    int yes = fp && fread(m, 1, 8, fp) == 8 && memcmp(m, "FAT5TOK", 8) == 0;
    if (fp) fclose(fp);
    return yes;
}

// Reads a pretokenized pairs file (tools/pretokenize --pairs: a token file whose documents are
// the rows' inputs and targets in turn, each ending with the EOS): the training rows are indexed
// (their ids stay in the file, read as batches need them), the held-out ones (split) read into
// val with their texts decoded. One pass over the file.
static fat5_status fat5__ft_read_tok(fat5_trainer *t, const char *path, int split) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    const fat5_train_config *c = &t->cfg;
    const char *paths[1];
    fat5_tokens *src = NULL;
    int32_t *buf = NULL;
    int64_t cap = (c->ul2.enc_tokens > c->ul2.dec_tokens ? c->ul2.enc_tokens : c->ul2.dec_tokens) + 1;
    int64_t pos = 0, i, max_val = c->max_eval_samples;
    fat5_status st;
    paths[0] = path;
    if ((st = fat5_tokens_load(t->dctx, paths, 1, &src)))   // the data's context: read on its thread
        return fat5__err(ctx, st, "train_file: %s", fat5_last_error(t->dctx));
    if (fat5_tokens_vocab_size(src) > t->m->cfg.vocab_size || fat5_tokens_doc_count(src) % 2) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "train_file %s: %s", path, fat5_tokens_doc_count(src) % 2
                       ? "an odd number of documents: not a pairs token file (tools/pretokenize --pairs writes them)"
                       : "its vocabulary is larger than the model's");
        fat5_tokens_destroy(src);
        return st;
    }
    f->train.src = src;
    if (!(buf = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(2 * cap) * sizeof *buf))))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "train_file %s: out of memory", path);
    for (i = 0; pos < fat5_tokens_count(src); i++) {
        fat5_pairs_row row;
        int64_t n[2], start = pos;
        int w, eos;
        for (w = 0; w < 2; w++) {   // the input, then the target: ids up to the EOS, which counts
            if ((st = fat5__tok_read_doc(src, pos, cap - 1, buf + w * cap, &n[w], &eos))) {
                st = fat5__err(ctx, st, "train_file: %s", fat5_last_error(t->dctx));
                goto done;
            }
            if (!eos || n[w] + 1 > (w ? c->ul2.dec_tokens : c->ul2.enc_tokens)) {
                st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "train_file %s: row %lld: the %s has more tokens than %s %lld "
                               "holds", path, (long long)i + 1, w ? "target" : "input",
                               w ? "batch_labels_tokens" : "batch_tokens",
                               (long long)(w ? c->ul2.dec_tokens : c->ul2.enc_tokens));
                goto done;
            }
            buf[w * cap + n[w]] = fat5_tokens_eos_id(src);
            pos += ++n[w];
        }
        memset(&row, 0, sizeof row);
        row.input_ids = buf, row.n_input = n[0];
        row.target_ids = buf + cap, row.n_target = n[1];
        if (split && fat5__ft_held_out(i, c->seed, c->eval_fraction)) {   // its texts from its ids
            char *txt[2] = {NULL, NULL};
            if (max_val > 0 && f->val.n >= max_val) continue;
            for (w = 0; w < 2 && st == FAT5_OK; w++)
                st = fat5__ft_decode(t, w ? row.target_ids : row.input_ids, n[w], &txt[w]);
            if (st == FAT5_OK) {
                row.input_text = txt[0], row.input_len = strlen(txt[0]);
                row.target_text = txt[1], row.target_len = strlen(txt[1]);
                if (!fat5__ftrows_add(ctx, &f->val, &row, 1, -1))
                    st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "train_file %s: out of memory", path);
            }
            fat5__free(ctx, txt[0]);
            fat5__free(ctx, txt[1]);
            if (st) goto done;
            continue;
        }
        if (!fat5__ftrows_add(ctx, &f->train, &row, 0, start)) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "train_file %s: out of memory for the rows' index", path);
            goto done;
        }
        fat5__ft_hash_row(f, buf, n[0], buf + cap, n[1]);   // the training rows' identity, as for rows read from text
    }
done:
    fat5__free(ctx, buf);
    return st;
}

// Reads a pairs file (path, or "inputs,targets" for parallel files) into train, or into val
// (validation rows; at most max_val of them, texts kept); split: the training file's rows held out
// go to val. Every row must fit the model's vocabulary and the micro-batch budgets.
static fat5_status fat5__ft_read(fat5_trainer *t, const char *spec, int is_val, int split) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    const fat5_train_config *c = &t->cfg;
    fat5_pairs_config pc = fat5_pairs_config_default();
    fat5_pairs *p = NULL;
    fat5_pairs_row row;
    char paths[2][4200];
    const char *comma = strchr(spec, ',');
    int has = 1;
    int64_t i = 0, vocab = t->m->cfg.vocab_size, max_val = c->max_eval_samples;
    fat5_status st;
    if (!comma && fat5__ft_is_tok(spec)) {
        if (!is_val) return fat5__ft_read_tok(t, spec, split);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "validation_file %s: a pretokenized file; the evaluation needs "
                         "the rows' texts: give its text file (JSONL, TSV, CSV)", spec);
    }
    if (comma) {
        snprintf(paths[0], sizeof paths[0], "%.*s", (int)(comma - spec), spec);
        snprintf(paths[1], sizeof paths[1], "%s", comma + 1);
    } else {
        snprintf(paths[0], sizeof paths[0], "%s", spec);
    }
    pc.input_field = c->text_column[0] ? c->text_column : NULL;
    pc.target_field = c->summary_column[0] ? c->summary_column : NULL;
    pc.prefix = c->source_prefix[0] ? c->source_prefix : NULL;
    pc.max_source_length = c->ul2.max_enc_len;
    pc.max_target_length = c->ul2.max_dec_len;
    if ((st = fat5_pairs_open(ctx, paths[0], comma ? paths[1] : NULL, &pc, &p)))
        return fat5__err_prefix(ctx, st, "%s: ", is_val ? "validation_file" : "train_file");
    for (;;) {
        int64_t j, e, d, to_val;
        const char *where = paths[0];
        if (is_val && max_val > 0 && f->val.n >= max_val) break;
        if ((st = fat5_pairs_next(p, f->tok, &row, &has)) || !has) break;
        e = row.n_input, d = row.n_target;
        for (j = 0; j < e + d; j++) {
            int32_t id = j < e ? row.input_ids[j] : row.target_ids[j - e];
            if (id < 0 || id >= vocab) {
                if (j >= e && comma) where = paths[1];
                st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: line %lld: token id %ld is outside the model's "
                               "vocabulary (%lld ids): the tokenizer does not match the model", where,
                               (long long)row.line, (long)id, (long long)vocab);
                goto done;
            }
        }
        if (e > c->ul2.enc_tokens || d > c->ul2.dec_tokens) {
            int in = e > c->ul2.enc_tokens;
            if (!in && comma) where = paths[1];
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: line %lld: the %s has %lld tokens, more than %s %lld holds "
                           "(raise it, or truncate with %s)", where, (long long)row.line, in ? "input" : "target",
                           (long long)(in ? e : d), in ? "batch_tokens" : "batch_labels_tokens",
                           (long long)(in ? c->ul2.enc_tokens : c->ul2.dec_tokens),
                           in ? "max_length (max_source_length)" : "max_labels_length (max_target_length)");
            goto done;
        }
        to_val = is_val || (split && fat5__ft_held_out(i, c->seed, c->eval_fraction));
        i++;
        if (to_val && max_val > 0 && f->val.n >= max_val) continue;   // held out, beyond the evaluation's rows
        if (!fat5__ftrows_add(ctx, to_val ? &f->val : &f->train, &row, to_val, -1)) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: line %lld: out of memory for the rows", paths[0],
                           (long long)row.line);
            goto done;
        }
        if (!to_val) fat5__ft_hash_row(f, row.input_ids, e, row.target_ids, d);   // the training rows' identity
    }
done:
    fat5_pairs_close(p);
    return st;
}

// ---------------------------------------------------------------------------------------------
// the sampler

// longest first, then the permutation's order: a total order
static int fat5__ftkey_cmp(const void *a, const void *b) {
    const fat5__ftkey *x = (const fat5__ftkey *)a, *y = (const fat5__ftkey *)b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

// Packs rows[0 .. n) in order into batches within the budgets: bat[0 .. nb] (batch b is
// rows[bat[b] .. bat[b + 1])); returns nb.
static int64_t fat5__ft_pack(const fat5__ftrows *r, const int32_t *rows, int64_t n, int64_t max_rows, int64_t E,
                             int64_t D, int64_t *bat) {
    int64_t i, nb = 0, ce = 0, cd = 0, cr = 0;
    bat[0] = 0;
    for (i = 0; i < n; i++) {
        int64_t e = fat5__ftrow_in(r, rows[i]), d = fat5__ftrow_tgt(r, rows[i]);
        if (cr > 0 && ((max_rows > 0 && cr + 1 > max_rows) || ce + e > E || cd + d > D)) {
            bat[++nb] = i;
            ce = cd = cr = 0;
        }
        ce += e, cd += d, cr++;
    }
    if (cr > 0) bat[++nb] = n;
    return nb;
}

// The plan of epoch e: the rows' order and the batches (fat5__ft's comment at the top).
static void fat5__ft_plan(fat5__ft *f, int64_t e) {
    const fat5__ftrows *r = &f->train;
    int64_t n = r->n, i, w, b, k;
    uint64_t key[2];
    fat5_rng rng;
    key[0] = f->seed, key[1] = (uint64_t)e;
    rng = fat5_rng_init(fat5__h128_of(key, sizeof key).a);
    for (i = 0; i < n; i++) f->perm[i] = (int32_t)i;
    for (i = n - 1; i > 0; i--) {   // Fisher-Yates
        int64_t j = (int64_t)fat5_rng_below(&rng, (uint64_t)i + 1);
        int32_t x = f->perm[i];
        f->perm[i] = f->perm[j];
        f->perm[j] = x;
    }
    // each window sorted (group_by_length), then packed on its own: no batch spans two windows
    f->n_batches = 0;
    for (w = 0; w < n; w += f->window > 0 ? f->window : n) {
        int64_t m = f->window <= 0 || n - w < f->window ? n - w : f->window, nb;
        if (f->window > 0) {
            for (i = 0; i < m; i++) {
                int32_t row = f->perm[w + i];
                f->keys[i].len = r->at[row + 1] - r->at[row];
                f->keys[i].pos = (int32_t)i;
                f->keys[i].row = row;
            }
            qsort(f->keys, (size_t)m, sizeof *f->keys, fat5__ftkey_cmp);
            for (i = 0; i < m; i++) f->perm[w + i] = f->keys[i].row;
        }
        nb = fat5__ft_pack(r, f->perm + w, m, f->max_rows, f->budget_e, f->budget_d, f->bat + f->n_batches);
        for (b = 0; b <= nb; b++) f->bat[f->n_batches + b] += w;   // (its start: the previous window's end)
        f->n_batches += nb;
    }
    // the batches in a random order (sorted windows would otherwise come longest first)
    for (b = 0; b < f->n_batches; b++) f->order[b] = (int32_t)b;
    for (b = f->n_batches - 1; b > 0; b--) {
        int64_t j = (int64_t)fat5_rng_below(&rng, (uint64_t)b + 1);
        int32_t x = f->order[b];
        f->order[b] = f->order[j];
        f->order[j] = x;
    }
    for (k = 0, b = 0; b < f->n_batches; b++) {
        int64_t s = f->bat[f->order[b]], m = f->bat[f->order[b] + 1] - s;
        f->bat_tmp[b] = k;
        memcpy(f->tmp + k, f->perm + s, (size_t)m * sizeof *f->tmp);
        k += m;
    }
    f->bat_tmp[f->n_batches] = k;
    memcpy(f->perm, f->tmp, (size_t)n * sizeof *f->perm);
    memcpy(f->bat, f->bat_tmp, (size_t)(f->n_batches + 1) * sizeof *f->bat);
    f->planned = e;
}

// Rows rows[0 .. n) of r as a packed batch in buf (enc cu [n+1] | dec cu [n+1] | inputs | labels);
// streamed rows are read from their file here.
static fat5_status fat5__ft_fill(const fat5__ftrows *r, const int32_t *rows, int64_t n, int32_t *buf, fat5_batch *b) {
    int64_t i, te = 0, td = 0;
    int32_t *ecu = buf, *dcu = buf + n + 1, *in, *lab;
    for (i = 0; i < n; i++) te += fat5__ftrow_in(r, rows[i]), td += fat5__ftrow_tgt(r, rows[i]);
    in = buf + 2 * (n + 1);
    lab = in + te;
    ecu[0] = dcu[0] = 0;
    for (i = 0; i < n; i++) {
        int64_t row = rows[i], e = fat5__ftrow_in(r, row), d = fat5__ftrow_tgt(r, row);
        fat5_status st;
        if (r->src) {   // a row is its input then its target in the file
            if ((st = fat5__ft_stream_read(r->src, r->pos[row], e, in + ecu[i])) ||
                (st = fat5__ft_stream_read(r->src, r->pos[row] + e, d, lab + dcu[i])))
                return st;
        } else {
            memcpy(in + ecu[i], r->ids + r->at[row], (size_t)e * 4);
            memcpy(lab + dcu[i], r->ids + r->at[row] + e, (size_t)d * 4);
        }
        ecu[i + 1] = ecu[i] + (int32_t)e;
        dcu[i + 1] = dcu[i] + (int32_t)d;
    }
    memset(b, 0, sizeof *b);
    b->n_seq = n;
    b->n_enc_tokens = te;
    b->enc_cu_seqlens = ecu;
    b->enc_tokens = in;
    if (r->pay == 1) {   // a task head: the rows' payloads, concatenated, are its targets
        b->head_labels = lab;
    } else if (r->pay == 2) {
        b->head_targets = (const float *)(const void *)lab;
    } else {
        b->n_dec_tokens = td;
        b->dec_cu_seqlens = dcu;
        b->labels = lab;
    }
    return FAT5_OK;
}

// The next training micro-batch (its arrays valid until the next call). Allocates nothing: it may
// run on the trainer's data thread.
static fat5_status fat5__ft_next_batch(fat5_trainer *t, fat5_batch *b) {
    fat5__ft *f = t->ft;
    fat5_status st;
    if (f->planned != f->epoch) fat5__ft_plan(f, f->epoch);
    if ((st = fat5__ft_fill(&f->train, f->perm + f->bat[f->pos], f->bat[f->pos + 1] - f->bat[f->pos], f->bbuf, b)))
        return st;
    if (++f->pos == f->n_batches) f->epoch++, f->pos = 0;
    return FAT5_OK;
}

#define FAT5__FT_STATE "pairsv1"
static fat5_status fat5__ft_get_state(const fat5_trainer *t, char *buf, size_t cap) {
    const fat5__ft *f = t->ft;
    if ((size_t)snprintf(buf, cap, FAT5__FT_STATE ":%llu:%lld:%lld", (unsigned long long)f->seed, (long long)f->epoch,
                         (long long)f->pos) >= cap)
        return fat5__err(t->dctx, FAT5_ERR_INVALID_ARG, "sampler state: the buffer is too small");
    return FAT5_OK;
}

// The sampler at a state fat5__ft_get_state wrote (the message names what does not fit this data).
static fat5_status fat5__ft_set_state(fat5_trainer *t, const char *s) {
    fat5__ft *f = t->ft;
    unsigned long long seed;
    long long epoch, pos;
    int n = 0;
    if (!s || sscanf(s, FAT5__FT_STATE ":%llu:%lld:%lld%n", &seed, &epoch, &pos, &n) != 3 || s[n] || epoch < 0 ||
        pos < 0)
        return fat5__err(t->dctx, FAT5_ERR_FORMAT, "sampler state '%.60s' is not a pairs sampler's", s ? s : "");
    if (seed != f->seed)
        return fat5__err(t->dctx, FAT5_ERR_INVALID_ARG, "the sampler's seed %llu is not this run's (%llu)", seed,
                         (unsigned long long)f->seed);
    fat5__ft_plan(f, epoch);
    if (pos >= f->n_batches)
        return fat5__err(t->dctx, FAT5_ERR_FORMAT, "sampler state: batch %lld of epoch %lld, which has %lld", pos, epoch,
                         (long long)f->n_batches);
    f->epoch = epoch;
    f->pos = pos;
    return FAT5_OK;
}

// passes over the training rows so far, fractional (an epoch not planned yet is at its start)
static double fat5__ft_epoch(const fat5_trainer *t) {
    const fat5__ft *f = t->ft;
    if (f->planned != f->epoch) return (double)f->epoch;
    return (double)f->epoch + (double)f->pos / (double)f->n_batches;
}

// the training data's identity in a checkpoint
static void fat5__ft_fingerprint(const fat5_trainer *t, char *buf, size_t cap) {
    const fat5__ft *f = t->ft;
    snprintf(buf, cap, "pairs rows=%lld tokens=%lld ids=%016llx held_out=%lld eval_fraction=%.17g", (long long)f->train.n,
             (long long)f->train.n_ids, (unsigned long long)f->hash,
             (long long)(t->cfg.validation_file[0] ? -1 : f->val.n), t->cfg.eval_fraction);
}

static void fat5__ft_destroy(fat5_trainer *t) {
    fat5__ft *f = t->ft;
    if (!f) return;
    fat5_tokenizer_destroy(f->tok);
    fat5__ftrows_free(t->ctx, &f->train);
    fat5__ftrows_free(t->ctx, &f->val);
    fat5__free(t->ctx, f->perm);
    fat5__free(t->ctx, f->tmp);
    fat5__free(t->ctx, f->bat);
    fat5__free(t->ctx, f->bat_tmp);
    fat5__free(t->ctx, f->order);
    fat5__free(t->ctx, f->keys);
    fat5__free(t->ctx, f->bbuf);
    fat5__sb_free(&f->pred);
    fat5__free(t->ctx, f->val_off);
    fat5__free(t->ctx, f->val_off_at);
    fat5__free(t->ctx, f->lab_idx);
    fat5__free(t->ctx, f);
    t->ft = NULL;
}

// The task's setup, once the model is there: its tokenizer, the rows, the sampler's buffers, and
// max_steps from num_train_epochs.
static fat5_status fat5__ft_open(fat5_trainer *t) {
    fat5_ctx *ctx = t->ctx;
    fat5_train_config *c = &t->cfg;
    fat5__ft *f;
    fat5_status st;
    int64_t n, R, est;
    if (c->data[0])
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training: data (token files, pre-training) and train_file "
                         "(pairs, fine-tuning) are two tasks: give one");
    if (!(f = t->ft = FAT5__CAST(fat5__ft *, fat5__calloc(ctx, 1, sizeof *f))))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fine-tuning: out of memory");
    fat5__sb_init(&f->pred, ctx);
    f->planned = -1;
    f->best_step = -1;
    f->eval_step = -1;
    f->seed = c->seed;
    f->metric = fat5__ft_metric_index(c->metric_for_best_model[0] ? c->metric_for_best_model : "loss");
    if (f->metric < 0) f->metric = 0;
    f->task = fat5__task_of(c);
    f->greater = c->greater_is_better >= 0 ? c->greater_is_better : f->metric != 0 && f->metric != 13;
    if (f->metric != 0 && f->task) {   // the scores each task reports
        static const unsigned ok[4] = {0, 1u << 9 | 1u << 10 | 1u << 13, 1u << 2 | 1u << 9 | 1u << 11 | 1u << 12,
                                       1u << 1 | 1u << 2};
        if (!(ok[f->task] >> f->metric & 1u))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "metric_for_best_model %s: task %s reports %s",
                             fat5__ft_metric_names[f->metric], c->task,
                             f->task == 1 ? "loss, accuracy, macro_f1 (mse for a regression)"
                             : f->task == 2 ? "loss, precision, recall, f1, accuracy" : "loss, exact_match, f1");
    }
    if (!f->task && f->metric >= 9)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "metric_for_best_model %s is a task head's score (task classify, "
                         "token-classify, qa)", fat5__ft_metric_names[f->metric]);
    if (f->metric != 0 && !c->predict_with_generate && !f->task)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "metric_for_best_model %s is a score of generated text: it needs "
                         "predict_with_generate", fat5__ft_metric_names[f->metric]);
    if (c->ul2.enc_tokens < 1 || c->ul2.dec_tokens < 1 || c->ul2.max_enc_len < 0 || c->ul2.max_dec_len < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fine-tuning: batch_tokens and batch_labels_tokens must be >= 1");
    // the tokenizer: tokenizer_name, else the model checkpoint's own, else bytes
    if (c->tokenizer_name[0]) {
        if ((st = fat5_tokenizer_load(ctx, c->tokenizer_name, &f->tok)))
            return fat5__err_prefix(ctx, st, "tokenizer_name %s: ", c->tokenizer_name);
    } else if (t->m->tok_file[0] || t->m->tok_file[3]) {   // the checkpoint's tokenizer.json, else spiece.model
        int js = t->m->tok_file[0] != NULL;
        if ((st = fat5_tokenizer_from_memory(ctx, t->m->tok_file[js ? 0 : 3], t->m->tok_len[js ? 0 : 3], js, &f->tok)))
            return fat5__err_prefix(ctx, st, "the model's tokenizer (%s): ", js ? "tokenizer.json" : "spiece.model");
    } else if (t->m->cfg.vocab_size < 259) {
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fine-tuning: the model has no tokenizer files and %lld ids, too few "
                         "for byte-level ids (259): name one with tokenizer_name", (long long)t->m->cfg.vocab_size);
    }
    if (c->validation_file[0] && !fat5__is_file(c->validation_file) && !strchr(c->validation_file, ','))
        return fat5__err(ctx, FAT5_ERR_IO, "validation_file %s: no such file", c->validation_file);
    if (f->task) {   // JSON Lines rows of the task, their payloads after the input ids
        f->train.pay = f->val.pay = t->m->cfg.problem_type == FAT5_PROBLEM_REGRESSION ||
                                            t->m->cfg.problem_type == FAT5_PROBLEM_MULTI_LABEL ? 2 : 1;
        if ((st = fat5__task_read(t, c->train_file, 0, !c->validation_file[0] && c->eval_fraction > 0))) return st;
        if (c->validation_file[0] && (st = fat5__task_read(t, c->validation_file, 1, 0))) return st;
    } else {
        if ((st = fat5__ft_read(t, c->train_file, 0, !c->validation_file[0] && c->eval_fraction > 0))) return st;
        if (c->validation_file[0] && (st = fat5__ft_read(t, c->validation_file, 1, 0))) return st;
    }
    f->n_val_text = f->val.n;
    if (f->train.n == 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "train_file %s: no training rows (eval_fraction %g held out all %lld)",
                         c->train_file, c->eval_fraction, (long long)f->val.n);
    if (!c->validation_file[0] && c->eval_fraction > 0 && f->val.n == 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "train_file %s: eval_fraction %g of its %lld rows holds none out: "
                         "give a validation_file, a larger eval_fraction, or eval_fraction 0 (no evaluation)",
                         c->train_file, c->eval_fraction, (long long)f->train.n);
    if (f->train.n > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "train_file %s: more than 2^31 rows", c->train_file);
    // the sampler's buffers, all of them now: drawing allocates nothing
    n = f->train.n;
    f->max_rows = c->per_device_train_batch_size;
    f->budget_e = c->ul2.enc_tokens;
    f->budget_d = c->ul2.dec_tokens;
    f->buf_pay = f->budget_d;
    if (f->task) {   // payloads do not count against a budget: a batch holds at most budget_e tokens, and
                     // so at most budget_e rows (fat5__task_read refuses a row without tokens); a row's payload
                     // is 1 (a class), num_labels (multi-label, regression), its tokens (token-classify) or 2 (qa)
        int64_t L = t->m->cfg.num_labels;
        fat5_problem pr = fat5__head_problem(&t->m->cfg);
        int per_row = t->m->cfg.head == FAT5_HEAD_QA ? 2 : t->m->cfg.head == FAT5_HEAD_TOKEN_CLS ? 1
                      : pr == FAT5_PROBLEM_SINGLE_LABEL ? 1 : 0;
        f->budget_d = (int64_t)1 << 60;
        f->buf_pay = per_row ? f->budget_e * per_row : f->budget_e * L;
    }
    R = f->max_rows > 0 ? f->max_rows : n;
    f->perm = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
    f->tmp = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
    f->order = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
    f->bat = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof(int64_t)));
    f->bat_tmp = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof(int64_t)));
    f->keys = FAT5__CAST(fat5__ftkey *, fat5__malloc(ctx, (size_t)n * sizeof *f->keys));
    f->bbuf = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(2 * ((R < n ? R : n) + 1) + f->budget_e + f->buf_pay) *
                                                          sizeof(int32_t)));
    if (!f->perm || !f->tmp || !f->order || !f->bat || !f->bat_tmp || !f->keys || !f->bbuf)
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fine-tuning: out of memory for the sampler (%lld rows)", (long long)n);
    // group_by_length's window: about FAT5__FT_WINDOW_BATCHES batches of the mean row
    est = f->budget_e * n / (f->train.sum_in > 0 ? f->train.sum_in : 1);
    if (!f->task && f->budget_d * n / (f->train.sum_tgt > 0 ? f->train.sum_tgt : 1) < est)
        est = f->budget_d * n / (f->train.sum_tgt > 0 ? f->train.sum_tgt : 1);
    if (f->max_rows > 0 && f->max_rows < est) est = f->max_rows;
    if (est < 1) est = 1;
    f->window = c->group_by_length ? est * FAT5__FT_WINDOW_BATCHES : 0;
    fat5__ft_plan(f, 0);
    if (c->num_train_epochs > 0) {   // the run's length: the steps of that many epochs (of epoch 0's batches)
        double per = (double)c->grad_accum * t->world;
        c->optim.total_steps = (int64_t)ceil(c->num_train_epochs * (double)f->n_batches / per - 1e-9);
        if (c->optim.total_steps < 1) c->optim.total_steps = 1;
    }
    return FAT5_OK;
}

// whether an evaluation has rows to use
static int fat5__ft_has_eval(const fat5_trainer *t) { return t->ft->val.n > 0; }

// ---------------------------------------------------------------------------------------------
// evaluation

// The mean loss over the validation rows' label tokens (packed within the budgets, in file order;
// with several ranks each takes every world-th batch and the sums are added).
static fat5_status fat5__ft_eval_loss(fat5_trainer *t, double *loss) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    const fat5__ftrows *r = &f->val;
    int32_t *rows = NULL, *buf = NULL;
    int64_t *bat = NULL, nb, i, n = r->n, cnt = 0;
    double sum = 0;
    fat5_status st = FAT5_OK;
    *loss = NAN;
    if (n == 0) return fat5__err(ctx, FAT5_ERR_STATE, "evaluate: no validation rows (validation_file, eval_fraction)");
    fat5__train_join(t);
    rows = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof *rows));
    bat = FAT5__CAST(int64_t *, fat5__malloc(ctx, (size_t)(n + 1) * sizeof *bat));
    buf = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(2 * (n + 1) + f->budget_e + f->buf_pay) * sizeof *buf));
    if (!rows || !bat || !buf) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
        goto done;
    }
    for (i = 0; i < n; i++) rows[i] = (int32_t)i;
    nb = fat5__ft_pack(r, rows, n, 0, f->budget_e, f->budget_d, bat);
    for (i = t->rank; i < nb && st == FAT5_OK; i += t->world) {
        fat5_batch b;
        fat5_forward_result fr;
        if ((st = fat5__ft_fill(r, rows + bat[i], bat[i + 1] - bat[i], buf, &b))) break;
        t->m->no_grad = 1;   // the loss alone: no dlogits
        st = fat5_model_forward(t->m, &b, &t->cfg.loss, &fr);
        t->m->no_grad = 0;
        if (st) break;
        sum += fr.loss * (double)fr.n_tokens;
        cnt += fr.n_tokens;
    }
    if (st == FAT5_OK) st = fat5__train_eval_mean(t, sum, cnt, loss);
done:
    fat5__free(ctx, rows);
    fat5__free(ctx, bat);
    fat5__free(ctx, buf);
    return st;
}

// Generated ids as text: the tokenizer's, special tokens left out (ids beyond its vocabulary
// too); byte-level: ids 3 .. 258 as bytes. Invalid UTF-8 is dropped (ByT5's decode, errors
// "ignore"), and so is whitespace at both ends (run_summarization's strip). *out: fat5__malloc'd.
static fat5_status fat5__ft_decode(fat5_trainer *t, const int32_t *ids, int64_t n, char **out) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    char *s = NULL, *o;
    size_t len = 0, i, k, a, b;
    fat5_status st;
    *out = NULL;
    if (f->tok) {
        int32_t *keep = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(n ? n : 1) * sizeof *keep));
        int64_t m = 0, V = fat5_tokenizer_vocab_size(f->tok), j;
        char *d = NULL;
        if (!keep) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
        for (j = 0; j < n; j++)
            if (ids[j] >= 0 && ids[j] < V) keep[m++] = ids[j];
        st = fat5_detokenize(f->tok, keep, m, FAT5_DETOKENIZE_SKIP_SPECIAL, &d, &len);
        fat5__free(ctx, keep);
        if (st) return fat5__err_prefix(ctx, st, "evaluate: decoding a prediction: ");
        s = d;
    } else {
        int64_t j;
        if (!(s = FAT5__CAST(char *, fat5__malloc(ctx, (size_t)n + 1))))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
        for (j = 0; j < n; j++)
            if (ids[j] >= 4 && ids[j] < 259) s[len++] = (char)(ids[j] - 3);   // byte 0 (id 3) left out: a C string
        s[len] = 0;
    }
    // valid UTF-8 only
    for (i = 0, k = 0; i < len;) {
        size_t v = fat5_utf8_valid_len(s + i, len - i);
        memmove(s + k, s + i, v);
        k += v, i += v;
        if (i < len) i++;
    }
    len = k;
    for (a = 0; a < len && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r'); a++) {}
    for (b = len; b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\n' || s[b - 1] == '\r'); b--) {}
    if (!(o = FAT5__CAST(char *, fat5__malloc(ctx, b - a + 1)))) {
        fat5__free(ctx, s);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
    }
    memcpy(o, s + a, b - a);
    o[b - a] = 0;
    fat5__free(ctx, s);
    *out = o;
    return FAT5_OK;
}

// a text with its ends' whitespace left out, in a buffer of the context
static char *fat5__ft_strip_dup(fat5_ctx *ctx, const char *s) {
    size_t a = 0, b = strlen(s);
    char *o;
    while (a < b && (s[a] == ' ' || s[a] == '\t' || s[a] == '\n' || s[a] == '\r')) a++;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\n' || s[b - 1] == '\r')) b--;
    if (!(o = FAT5__CAST(char *, fat5__malloc(ctx, b - a + 1)))) return NULL;
    memcpy(o, s + a, b - a);
    o[b - a] = 0;
    return o;
}

// Generates for the validation rows that keep their texts, per_device_eval_batch_size at a time,
// and scores the predictions against the targets (both stripped); the predictions as JSON lines
// in f->pred. Rank 0.
static fat5_status fat5__ft_generate(fat5_trainer *t, fat5_train_metrics *r) {
    fat5_ctx *ctx = t->ctx;
    fat5__ft *f = t->ft;
    const fat5__ftrows *v = &f->val;
    const fat5_train_config *c = &t->cfg;
    int64_t n = f->n_val_text, B = c->per_device_eval_batch_size, i, j, gen_tokens = 0;
    int64_t glen = c->generation_max_length > 0 ? c->generation_max_length
                   : c->ul2.max_dec_len > 0 ? c->ul2.max_dec_len : 128;
    char **pred = NULL, **ref = NULL;
    int32_t *tok = NULL, *cu = NULL;
    fat5_generate_config g = fat5_generate_config_from_model(t->m);
    fat5_generate_result res;
    fat5_rouge rouge;
    fat5_bleu bleu;
    double em = 0, f1 = 0;
    fat5_status st = FAT5_OK;
    memset(&res, 0, sizeof res);
    g.max_new_tokens = glen > 1 ? glen - 1 : 1;   // Hugging Face's max_length counts the start token
    g.max_length = 0;                              // (the checkpoint's own max_length does not apply)
    g.min_new_tokens = 0;
    g.do_sample = 0;
    g.num_beams = c->generation_num_beams;
    g.num_return_sequences = 1;
    pred = FAT5__CAST(char **, fat5__calloc(ctx, (size_t)n, sizeof *pred));
    ref = FAT5__CAST(char **, fat5__calloc(ctx, (size_t)n, sizeof *ref));
    cu = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(B + 1) * sizeof *cu));
    tok = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(B * (v->max_in > 0 ? v->max_in : 1)) * sizeof *tok));
    if (!pred || !ref || !cu || !tok) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
        goto done;
    }
    for (i = 0; i < n && st == FAT5_OK; i += B) {
        int64_t m = n - i < B ? n - i : B;
        cu[0] = 0;
        for (j = 0; j < m; j++) {
            int64_t e = fat5__ftrow_in(v, i + j);
            memcpy(tok + cu[j], v->ids + v->at[i + j], (size_t)e * 4);
            cu[j + 1] = cu[j] + (int32_t)e;
        }
        if ((st = fat5_generate(t->m, tok, cu, m, &g, &res))) {
            st = fat5__err_prefix(ctx, st, "evaluate: generating for validation rows %lld..%lld: ", (long long)i,
                                  (long long)(i + m - 1));
            break;
        }
        for (j = 0; j < m && st == FAT5_OK; j++) {
            int64_t a = res.cu_seqlens[j], len = res.cu_seqlens[j + 1] - a;
            gen_tokens += len;
            st = fat5__ft_decode(t, res.tokens + a, len, &pred[i + j]);
        }
        fat5_generate_result_destroy(ctx, &res);
    }
    for (i = 0; i < n && st == FAT5_OK; i++) {
        const char *tt = v->text + v->text_at[i];
        if (!(ref[i] = fat5__ft_strip_dup(ctx, tt + strlen(tt) + 1)))
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory");
    }
    if (st) goto done;
    if ((st = fat5_metric_squad_corpus(ctx, (const char *const *)pred, n, (const char *const *)ref, NULL, &em, &f1)) ||
        (st = fat5_metric_rouge_corpus(ctx, (const char *const *)pred, n, (const char *const *)ref, NULL, 1, &rouge)) ||
        (st = fat5_metric_bleu(ctx, (const char *const *)pred, n, (const char *const *)ref, NULL, &bleu))) {
        st = fat5__err_prefix(ctx, st, "evaluate: scoring the predictions: ");
        goto done;
    }
    r->has_generate = 1;
    r->eval_exact_match = em;
    r->eval_f1 = f1;
    r->eval_rouge1 = 100 * rouge.rouge1.fmeasure;
    r->eval_rouge2 = 100 * rouge.rouge2.fmeasure;
    r->eval_rougeL = 100 * rouge.rougeL.fmeasure;
    r->eval_rougeLsum = 100 * rouge.rougeLsum.fmeasure;
    r->eval_bleu = bleu.score;
    r->eval_gen_len = (double)gen_tokens / (double)n;
    f->pred.len = 0;
    for (i = 0; i < n; i++) {
        const char *tt = v->text + v->text_at[i];
        fat5__sb_puts(&f->pred, "{\"input\": ");
        fat5__sb_json_string(&f->pred, tt);
        fat5__sb_puts(&f->pred, ", \"target\": ");
        fat5__sb_json_string(&f->pred, tt + strlen(tt) + 1);
        fat5__sb_puts(&f->pred, ", \"prediction\": ");
        fat5__sb_json_string(&f->pred, pred[i]);
        fat5__sb_puts(&f->pred, "}\n");
    }
    if (f->pred.oom) {
        f->pred.oom = 0;
        f->pred.len = 0;
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "evaluate: out of memory for the predictions");
    }
done:
    for (i = 0; pred && i < n; i++) fat5__free(ctx, pred[i]);
    for (i = 0; ref && i < n; i++) fat5__free(ctx, ref[i]);
    fat5__free(ctx, pred);
    fat5__free(ctx, ref);
    fat5__free(ctx, tok);
    fat5__free(ctx, cu);
    return st;
}

// The evaluation after `step`: the validation loss, and with predict_with_generate (rank 0) the
// generated text's scores and OUTPUT_DIR/eval_predictions.jsonl. Fills r's eval fields.
static fat5_status fat5__ft_evaluate(fat5_trainer *t, int64_t step, fat5_train_metrics *r) {
    fat5__ft *f = t->ft;
    fat5_status st;
    r->has_generate = 0;
    if ((st = fat5__ft_eval_loss(t, &r->eval_loss))) return st;
    r->has_eval = 1;
    r->eval_samples = f->val.n;
    f->pred.len = 0;
    if ((t->cfg.predict_with_generate || f->task) && t->rank == 0) {
        char path[4400];
        if ((st = f->task ? fat5__task_predict(t, r) : fat5__ft_generate(t, r))) return st;
        snprintf(path, sizeof path, "%s/eval_predictions.jsonl", t->cfg.output_dir);
        if ((st = fat5_write_file_atomic(t->ctx, path, f->pred.buf ? f->pred.buf : "", f->pred.len))) return st;
    }
    f->eval_step = step;
    f->eval_value = fat5__ft_metric_value(r, f->metric);
    return FAT5_OK;
}

// The step's fine-tuning keys of metrics.jsonl: the epoch, and an evaluation's scores.
static void fat5__ft_log(fat5_trainer *t, fat5__sb *b, const fat5_train_metrics *r) {
    fat5__json_num(b, "epoch", r->epoch_f);
    if (r->has_eval) fat5__sb_printf(b, ", \"eval_samples\": %lld", (long long)r->eval_samples);
    if (r->has_predict) {   // a task head's scores
        int task = t->ft->task;
        fat5_problem pr = t->m->cfg.problem_type;
        if (task == 1 && (pr == FAT5_PROBLEM_REGRESSION || (pr == FAT5_PROBLEM_AUTO && t->m->cfg.num_labels == 1))) {
            fat5__json_num(b, "eval_mse", r->eval_mse);
        } else if (task == 1) {
            fat5__json_num(b, "eval_accuracy", r->eval_accuracy);
            fat5__json_num(b, "eval_macro_f1", r->eval_macro_f1);
        } else if (task == 2) {
            fat5__json_num(b, "eval_precision", r->eval_precision);
            fat5__json_num(b, "eval_recall", r->eval_recall);
            fat5__json_num(b, "eval_f1", r->eval_f1);
            fat5__json_num(b, "eval_accuracy", r->eval_accuracy);
        } else {
            fat5__json_num(b, "eval_exact_match", r->eval_exact_match);
            fat5__json_num(b, "eval_f1", r->eval_f1);
        }
    }
    if (!r->has_generate) return;
    fat5__json_num(b, "eval_exact_match", r->eval_exact_match);
    fat5__json_num(b, "eval_f1", r->eval_f1);
    fat5__json_num(b, "eval_rouge1", r->eval_rouge1);
    fat5__json_num(b, "eval_rouge2", r->eval_rouge2);
    fat5__json_num(b, "eval_rougeL", r->eval_rougeL);
    fat5__json_num(b, "eval_rougeLsum", r->eval_rougeLsum);
    fat5__json_num(b, "eval_bleu", r->eval_bleu);
    fat5__json_num(b, "eval_gen_len", r->eval_gen_len);
}

// ---------------------------------------------------------------------------------------------
// checkpoints: the predictions, the best one

// Into a checkpoint being written (tmp) for `step`: the predictions of an evaluation after the
// same step.
static fat5_status fat5__ft_save_files(fat5_trainer *t, const char *tmp, int64_t step) {
    fat5__ft *f = t->ft;
    char path[4400];
    if (f->eval_step != step || !(t->cfg.predict_with_generate || f->task) || !f->pred.buf) return FAT5_OK;
    snprintf(path, sizeof path, "%s/predictions.jsonl", tmp);
    return fat5_write_file_atomic(t->ctx, path, f->pred.buf, f->pred.len);
}

// The best checkpoint once step `step` is saved: that step's when an evaluation came after it and
// its metric beats the best's (or there is none yet), else the best so far. 1 when it is `step`.
static int fat5__ft_best_after(const fat5_trainer *t, int64_t step, int64_t *best_step, double *best_value) {
    const fat5__ft *f = t->ft;
    double v = f->eval_value;
    *best_step = f->best_step;
    *best_value = f->best_value;
    if (f->eval_step != step || !isfinite(v)) return 0;
    if (f->best_step >= 0 && f->best_step != step && !(f->greater ? v > f->best_value : v < f->best_value)) return 0;
    *best_step = step;
    *best_value = v;
    return 1;
}

// The training state's entries of the best checkpoint, this step's included (n pairs into meta,
// texts in buf): a resumed run goes on beating the same best.
static int fat5__ft_save_meta(const fat5_trainer *t, int64_t step, const char **meta, char (*buf)[40]) {
    int64_t bs;
    double bv;
    (void)fat5__ft_best_after(t, step, &bs, &bv);
    if (bs < 0) return 0;
    snprintf(buf[0], 40, "%lld", (long long)bs);
    fat5__fmt_g(buf[1], 40, 17, bv);
    meta[0] = "best_step", meta[1] = buf[0];
    meta[2] = "best_metric", meta[3] = buf[1];
    meta[4] = "metric_for_best_model", meta[5] = fat5__ft_metric_names[t->ft->metric];
    return 3;
}

// After the checkpoint of `step` is saved (and latest names it): when it is the best so far,
// OUTPUT_DIR/best names it (written atomically, then made durable).
static fat5_status fat5__ft_after_save(fat5_trainer *t, int64_t step) {
    fat5__ft *f = t->ft;
    char path[4400], name[64];
    fat5_status st;
    if (!fat5__ft_best_after(t, step, &f->best_step, &f->best_value)) return FAT5_OK;
    snprintf(name, sizeof name, "step-%08lld\n", (long long)step);
    snprintf(path, sizeof path, "%s/best", t->cfg.output_dir);
    if ((st = fat5_write_file_atomic(t->ctx, path, name, strlen(name)))) return st;
    return fat5__fsync_dir(t->ctx, t->cfg.output_dir);
}

// The step of the best checkpoint (-1: none), which pruning keeps.
static int64_t fat5__ft_best_step(const fat5_trainer *t) { return t->ft ? t->ft->best_step : -1; }

// The best checkpoint so far, from a resumed training state (none when it was chosen by another
// metric than this run's).
static fat5_status fat5__ft_resume(fat5_trainer *t, const fat5_st_file *sf, const char *path) {
    fat5__ft *f = t->ft;
    const char *m = fat5_st_metadata_find(sf, "metric_for_best_model"), *v = fat5_st_metadata_find(sf, "best_metric");
    int64_t s;
    double x;
    if (!m || strcmp(m, fat5__ft_metric_names[f->metric]) != 0) return FAT5_OK;
    if (!fat5__meta_i64(sf, "best_step", &s) || !v || !fat5__strtod_c(v, &x))
        return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: best_step / best_metric are not numbers", path);
    f->best_step = s;
    f->best_value = x;
    return FAT5_OK;
}
