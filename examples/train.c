// Pre-trains (or continues training) a T5 with the UL2 mixture of denoisers.
//     cc -std=c99 -O2 -o examples/train examples/train.c -lm -ldl -lpthread
//
//     examples/train --data corpus.tok --output-dir out              # GPU when there is one
//     examples/train --resume out                                    # continue where it stopped
//     examples/train --data corpus.tok --init path/to/flan-t5-small   # continued pre-training
//     examples/train --gpus 8 --data corpus.tok --output-dir out      # data parallel, one host
//     examples/train --config run.json --max-steps 5000               # options from a JSON file
//
// Options are the training options of the library (fat5_train_config_set's table), spelled with
// dashes (--max-steps; --max_steps works too), with Hugging Face Trainer's names where the meaning
// is the same (--learning_rate, --warmup_steps, --output_dir, --resume_from_checkpoint, --bf16,
// ...: docs/cli.md), as --key value or --key=value, or keys of a JSON file (--config FILE; later
// flags override it); and this program's own: --device auto|cpu|gpu (auto: the GPU when there is
// one), --bf16 (the GPU's precision, default; --bf16 false: fp32), --logging-steps N (a progress
// line every N steps; 50 on a GPU, 10 on the CPU), --gpus N, --ranks N (flags only, not keys of the
// JSON file). --help lists them all with their defaults. Every option is checked before any device
// work. The run's defaults follow the device (--preset cpu|gpu chooses): FAT5-small for a few
// minutes on a GPU, a tiny model on the CPU (the model options replace the model; steps, batches
// and schedule keep the preset's defaults unless given; a default warm-up longer than the run is
// cut to a tenth of it).
// The run's options go to OUTPUT_DIR/train_args.json (and into each checkpoint): its preset and the
// options given. --resume DIR starts from them, so a run continues with its own model and step
// count whatever the device (options given again override them, e.g. --max-steps to extend it);
// a run already at its last step says so and exits 0. Ctrl-C (or SIGTERM) writes a checkpoint and
// exits 130; --resume OUTPUT_DIR continues bit-identically. `make train` resumes by itself.
// --gpus N forks one worker per GPU (rank r on GPU r) and waits for them; --ranks N does the same
// on whichever device --device picks (CPU processes too). Several hosts: start one process per GPU
// with --rank R --world-size N --rendezvous FILE (the same file, on a filesystem every host sees;
// rank 0 creates it) and LOCAL_RANK set to the GPU's index on its host. Rank 0 prints and writes
// the checkpoints; if a rank fails, every rank stops, and the error names it.
//
// The same program fine-tunes on (input, target) pairs when built as examples/finetune
// (examples/finetune.c defines TRAIN_FINETUNE 1 and includes this file): its name, presets,
// options and progress lines are then fine-tuning's (docs/finetuning.md).
#ifndef TRAIN_FINETUNE
#define TRAIN_FINETUNE 0
#endif
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "../tools/cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static const int finetune = TRAIN_FINETUNE;   // 1: examples/finetune
#if TRAIN_FINETUNE
#define PROG "finetune"
#else
#define PROG "train"
#endif
static char who[32] = PROG;   // "train[rank 1]" in a worker of several

static int fail(fat5_ctx *ctx, const char *what) {
    fprintf(stderr, "%s: %s: %s\n", who, what, ctx ? fat5_last_error(ctx) : "out of memory");
    return 1;
}
// The library's warnings (it never prints itself): e.g. why a rank held inside an NCCL call ended
// its process.
static void on_log(void *user, fat5_log_level level, const char *msg) {
    (void)user;
    if (level >= FAT5_LOG_WARN) fprintf(stderr, "%s: %s\n", who, msg);
}

static int fail_why(const char *what, const char *why) {
    fprintf(stderr, "%s: %s: %s\n", who, what, why);
    return 1;
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = (char *)malloc((size_t)n + 1)) != NULL) {
        *len = fread(buf, 1, (size_t)n, f);
        buf[*len] = 0;
    }
    fclose(f);
    return buf;
}

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static void fmt_duration(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e8) snprintf(buf, cap, "?");
    else if (s < 60) snprintf(buf, cap, "%.0fs", s);
    else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

// ---------------------------------------------------------------------------------------------
// the run's options: (library name, text) pairs, applied in order with fat5_train_config_set

enum { SRC_DEVICE, SRC_RUN, SRC_FILE, SRC_FLAG };   // where a value came from
typedef struct kv { char *k, *v; int src; } kv;
typedef struct kvs { kv *a; int n, cap; } kvs;

static kv *kvs_find(const kvs *s, const char *k) {
    int i;
    for (i = 0; i < s->n; i++)
        if (strcmp(s->a[i].k, k) == 0) return &s->a[i];
    return NULL;
}
static const char *kvs_get(const kvs *s, const char *k) {
    kv *e = kvs_find(s, k);
    return e ? e->v : NULL;
}
static void kvs_del(kvs *s, const char *k) {
    kv *e = kvs_find(s, k);
    if (!e) return;
    free(e->k);
    free(e->v);
    memmove(e, e + 1, (size_t)(s->a + s->n - e - 1) * sizeof *e);
    s->n--;
}
// Sets k to v, after every other option (a later value of a key replaces the earlier one, which
// it overrides entirely: the order of the rest is kept). 0 when out of memory.
static int kvs_set(kvs *s, const char *k, const char *v, int src) {
    char *kc, *vc;
    kvs_del(s, k);
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 64;
        kv *na = (kv *)realloc(s->a, (size_t)nc * sizeof *na);
        if (!na) return 0;
        s->a = na;
        s->cap = nc;
    }
    kc = (char *)malloc(strlen(k) + 1);
    vc = (char *)malloc(strlen(v) + 1);
    if (!kc || !vc) {
        free(kc);
        free(vc);
        return 0;
    }
    strcpy(kc, k);
    strcpy(vc, v);
    s->a[s->n].k = kc;
    s->a[s->n].v = vc;
    s->a[s->n].src = src;
    s->n++;
    return 1;
}
static int kvs_add_all(kvs *dst, const kvs *src) {
    int i;
    for (i = 0; i < src->n; i++)
        if (!kvs_set(dst, src->a[i].k, src->a[i].v, src->a[i].src)) return 0;
    return 1;
}
static void kvs_free(kvs *s) {
    int i;
    for (i = 0; i < s->n; i++) free(s->a[i].k), free(s->a[i].v);
    free(s->a);
    memset(s, 0, sizeof *s);
}

// The members of a JSON object as options, as fat5_train_config_from_json reads them: strings
// decoded, numbers as written, true / false as 1 / 0, an array of strings (data) joined by commas.
// 1; 0 with a message on stderr; -1 when the text is not one JSON object (no message).
static int kvs_from_json(kvs *s, const char *text, size_t len, const char *name, int src) {
    cli_json_it it;
    char key[128];
    const char *v, *ve;
    int m;
    cli_json_begin(&it, text, len);
    while ((m = cli_json_member(&it, key, sizeof key, &v, &ve)) > 0) {
        char *val = NULL;
        int ok = 1;
        if (*v == '"') {
            val = cli_json_str_dup(v, ve, NULL);
            ok = val != NULL;
        } else if (*v == 't' || *v == 'f') {
            ok = kvs_set(s, key, *v == 't' ? "1" : "0", src);
        } else if (*v == '[') {   // file names, comma-joined
            const char *p = cli_json_ws(v + 1, ve);
            size_t n = 0;
            val = (char *)calloc((size_t)(ve - v) + 1, 1);
            ok = val != NULL;
            while (ok && *p == '"') {
                char *e = cli_json_str_dup(p, ve, NULL);
                if (!e) {
                    ok = 0;
                    break;
                }
                n += (size_t)sprintf(val + n, "%s%s", n ? "," : "", e);
                free(e);
                p = cli_json_ws(cli_json_skip(p, ve, 0), ve);
                if (*p == ',') p = cli_json_ws(p + 1, ve);
            }
            if (ok && *p != ']') {
                fprintf(stderr, "%s: %s: '%s' must be a string or an array of strings\n", who, name, key);
                free(val);
                return 0;
            }
        } else if (*v == '-' || (*v >= '0' && *v <= '9')) {
            val = (char *)malloc((size_t)(ve - v) + 1);
            if ((ok = val != NULL)) memcpy(val, v, (size_t)(ve - v)), val[ve - v] = 0;
        } else {
            fprintf(stderr, "%s: %s: '%s' is %s\n", who, name, key, cli_json_kind(v));
            return 0;
        }
        if (ok && val) ok = kvs_set(s, key, val, src);
        free(val);
        if (!ok) {
            fprintf(stderr, "%s: out of memory\n", who);
            return 0;
        }
    }
    return m == 0 ? 1 : -1;
}

// The shape of a run by device: what fits it (options given replace these).
static const char *const gpu_opts[][2] = {
    {"model", "fat5-small"}, {"max_steps", "2000"}, {"warmup_steps", "100"}, {"learning_rate", "5e-3"},
    {"max_length", "512"}, {"max_labels_length", "512"}, {"batch_tokens", "8192"},
    {"batch_labels_tokens", "8192"}, {"eval_steps", "250"}, {"eval_batches", "8"}, {"save_steps", "1000"}};
static const char *const cpu_opts[][2] = {
    {"model", "tiny"}, {"max_steps", "150"}, {"warmup_steps", "10"}, {"learning_rate", "5e-3"},
    {"max_length", "128"}, {"max_labels_length", "128"}, {"batch_tokens", "1024"},
    {"batch_labels_tokens", "1024"}, {"eval_steps", "25"}, {"eval_batches", "4"}, {"save_steps", "50"}};
// Fine-tuning's (examples/finetune): T5's recipe (Adafactor, a constant 1e-3), 3 epochs as Hugging
// Face's Trainer, batches of rows, evaluations that generate and score (the model: --init).
static const char *const ft_gpu_opts[][2] = {
    {"num_train_epochs", "3"}, {"warmup_steps", "0"}, {"optim", "adafactor"}, {"learning_rate", "1e-3"},
    {"lr_scheduler_type", "constant"}, {"max_length", "512"}, {"max_labels_length", "128"},
    {"per_device_train_batch_size", "32"}, {"batch_tokens", "16384"}, {"batch_labels_tokens", "8192"},
    {"eval_steps", "500"}, {"save_steps", "500"}, {"predict_with_generate", "true"}, {"max_eval_samples", "0"},
    {"output_dir", "finetune-out"}};
static const char *const ft_cpu_opts[][2] = {
    {"num_train_epochs", "3"}, {"warmup_steps", "0"}, {"optim", "adafactor"}, {"learning_rate", "1e-3"},
    {"lr_scheduler_type", "constant"}, {"max_length", "512"}, {"max_labels_length", "128"},
    {"per_device_train_batch_size", "16"}, {"batch_tokens", "4096"}, {"batch_labels_tokens", "2048"},
    {"eval_steps", "200"}, {"save_steps", "200"}, {"predict_with_generate", "true"}, {"max_eval_samples", "200"},
    {"output_dir", "finetune-out"}};

// this program's presets for a device: n pairs (name, value)
static const char *const (*dev_opts(int gpu, int *n))[2] {
    if (finetune) {
        *n = (int)(sizeof ft_cpu_opts / sizeof ft_cpu_opts[0]);
        return gpu ? ft_gpu_opts : ft_cpu_opts;
    }
    *n = (int)(sizeof cpu_opts / sizeof cpu_opts[0]);
    return gpu ? gpu_opts : cpu_opts;
}

static const char *device_default(int gpu, const char *key) {
    int i, n;
    const char *const (*o)[2] = dev_opts(gpu, &n);
    for (i = 0; i < n; i++)
        if (strcmp(o[i][0], key) == 0) return o[i][1];
    return NULL;
}

// What a training option's value must be, for messages and --help (the library checks them).
static const struct { const char *key, *meta, *expect; } expects[] = {
    {"max_steps", "N", "an integer >= 1"}, {"warmup_steps", "N", "an integer >= 0"},
    {"decay_steps", "N", "an integer >= 0"}, {"eval_steps", "N", "an integer >= 0"},
    {"save_steps", "N", "an integer >= 0"}, {"save_total_limit", "N", "an integer >= 0"},
    {"learning_rate", "X", "a number > 0"}, {"min_lr", "X", "a number >= 0"}, {"weight_decay", "X", "a number >= 0"},
    {"max_grad_norm", "X", "a number >= 0"}, {"z_loss", "X", "a number >= 0"}, {"peak_tflops", "X", "a number >= 0"},
    {"adam_beta1", "X", "a number in [0, 1)"}, {"adam_beta2", "X", "a number in [0, 1)"},
    {"adam_epsilon", "X", "a number in (0, 1]"}, {"label_smoothing", "X", "a number in [0, 1)"},
    {"dropout_rate", "X", "a number in [0, 1)"}, {"attention_dropout_rate", "X", "a number in [0, 1)"},
    {"eval_fraction", "X", "a number in [0, 0.5]"}, {"gradient_accumulation_steps", "N", "an integer >= 1"},
    {"eval_batches", "N", "an integer >= 1"}, {"d_model", "N", "an integer >= 1"}, {"d_ff", "N", "an integer >= 1"},
    {"d_kv", "N", "an integer >= 1"}, {"num_heads", "N", "an integer >= 1"}, {"num_layers", "N", "an integer >= 1"},
    {"num_decoder_layers", "N", "an integer >= 1"}, {"vocab_size", "N", "an integer >= 1"},
    {"max_length", "N", "an integer >= 1"}, {"max_labels_length", "N", "an integer >= 1"},
    {"batch_tokens", "N", "an integer >= 1"}, {"batch_labels_tokens", "N", "an integer >= 1"},
    {"fire_mlp_width", "N", "an integer >= 1"}, {"world_size", "N", "an integer >= 1"}, {"seed", "N", "an integer >= 0"},
    {"rank", "N", "an integer >= 0"}, {"sentinel_first", "N", "an integer >= 0"}, {"n_sentinels", "N", "an integer >= 0"},
    {"prefetch", "0|1", "0 or 1"}, {"balance_ranks", "0|1", "0 or 1"}, {"dist_timeout", "SECONDS", "a number >= 1"},
    {"bucket_mb", "X", "a number >= 0.01"}, {"rotary_emb_fraction", "X", "a number in (0, 1]"},
    {"rotary_base", "X", "a number > 0"}, {"rotary_scale_base", "X", "a number >= 0"},
    {"relative_attention_num_buckets", "N", "an integer >= 4"}, {"relative_attention_max_distance", "N", "an integer >= 1"},
    {"optim", "adamwscale|adamw|adafactor", "adamwscale, adamw or adafactor"},
    {"adafactor_relative_step", "true|false", "true or false"}, {"adafactor_scale_parameter", "true|false", "true or false"},
    {"adafactor_warmup_init", "true|false", "true or false"}, {"adafactor_clip_threshold", "X", "a number > 0"},
    {"adafactor_decay_rate", "X", "a number < 0"}, {"adafactor_beta1", "X|none", "a number in [0, 1) or none"},
    {"lr_scheduler_type", "NAME", "cosine, wsd, inverse_sqrt, linear or constant"},
    {"denoisers", "fat5|t5", "fat5 or t5"}, {"feed_forward_proj", "NAME", "relu, gelu, gated-gelu or gated-silu"},
    {"position_encoding_type", "NAME", "t5, none, ALiBi, RoPE or FIRE"},
    {"alibi_mode", "symetric|asymetric", "symetric or asymetric"}, {"rotary_interleaved", "true|false", "true or false"},
    {"per_device_train_batch_size", "N", "an integer >= 0"}, {"per_device_eval_batch_size", "N", "an integer >= 1"},
    {"num_train_epochs", "X", "a number >= 0"}, {"group_by_length", "true|false", "true or false"},
    {"predict_with_generate", "true|false", "true or false"}, {"generation_max_length", "N", "an integer >= 0"},
    {"generation_num_beams", "N", "an integer in [1, 32]"}, {"max_eval_samples", "N", "an integer >= 0"},
    {"metric_for_best_model", "NAME", "loss, exact_match, f1, rouge1, rouge2, rougeL, rougeLsum, bleu, gen_len, accuracy, "
                                      "macro_f1, precision, recall or mse"},
    {"task", "seq2seq|classify|token-classify|qa", "seq2seq, classify, token-classify or qa"},
    {"classifier", "encoder|t5", "encoder or t5"}, {"pooling", "eos|mean|first", "eos, mean or first"},
    {"problem_type", "NAME", "single_label_classification, multi_label_classification or regression"},
    {"classifier_dropout", "X", "a number in [0, 1)"}, {"label_file", "FILE", NULL},
    {"text_column_names", "NAMES", NULL}, {"label_column_name", "NAME", NULL},
    {"question_column_name", "NAME", NULL}, {"context_column_name", "NAME", NULL}, {"answer_column_name", "NAME", NULL},
    {"greater_is_better", "true|false", "true or false"}, {"train_file", "FILE", NULL}, {"validation_file", "FILE", NULL},
    {"text_column", "NAME", NULL}, {"summary_column", "NAME", NULL}, {"source_prefix", "TEXT", NULL},
    {"tokenizer_name", "PATH", NULL},
    {"data", "FILE[,FILE...]", NULL}, {"model", "NAME|config.json", NULL}, {"init", "DIR", NULL},
    {"output_dir", "DIR", NULL}, {"resume", "DIR", NULL}, {"attention", "SPEC", NULL}, {"rendezvous", "FILE", NULL},
    {"freeze", "PATTERNS", NULL},
};
static int expect_of(const char *key) {
    int i;
    for (i = 0; i < (int)(sizeof expects / sizeof expects[0]); i++)
        if (strcmp(expects[i].key, key) == 0) return i;
    return -1;
}

// The default --help shows for a training option: the device's (when it sets one) or the library's.
static void fmt_default(const char *key, const fat5_train_config *c0, const fat5_train_config *g0, char *buf, size_t cap) {
    static const char *const sched[] = {"constant", "linear", "cosine", "wsd", "inverse_sqrt"};
    static const char *const pos[] = {"t5", "none", "ALiBi", "RoPE", "FIRE"};
    const char *dc = device_default(0, key), *dg = device_default(1, key);
    int k;
    buf[0] = 0;
    if (dc && dg) {
        if (strcmp(dc, dg) == 0) snprintf(buf, cap, "%s", dc);
        else snprintf(buf, cap, "%s on the CPU, %s on a GPU", dc, dg);
        return;
    }
    {   // the model's fields: each device's preset
        long long v[2] = {0, 0};
        for (k = 0; k < 2; k++) {
            const fat5_model_config *m = k ? &g0->model : &c0->model;
            if (!strcmp(key, "d_model")) v[k] = m->d_model;
            else if (!strcmp(key, "d_ff")) v[k] = m->d_ff;
            else if (!strcmp(key, "d_kv")) v[k] = m->d_kv;
            else if (!strcmp(key, "num_heads")) v[k] = m->num_heads;
            else if (!strcmp(key, "num_layers")) v[k] = m->num_layers;
            else if (!strcmp(key, "num_decoder_layers")) v[k] = m->num_decoder_layers;
            else if (!strcmp(key, "vocab_size")) v[k] = m->vocab_size;
            else break;
        }
        if (k == 2) {
            if (!strcmp(key, "vocab_size") && v[0] == v[1])   // the trainer's rule for a new model
                snprintf(buf, cap, "%lld, or the data's vocabulary when larger", v[0]);
            else if (v[0] == v[1]) snprintf(buf, cap, "%lld", v[0]);
            else snprintf(buf, cap, "%lld on the CPU, %lld on a GPU", v[0], v[1]);
            return;
        }
    }
    buf[0] = 0;
#define D(name, ...) else if (!strcmp(key, name)) snprintf(buf, cap, __VA_ARGS__)
    if (0) {}
    D("eval_fraction", "%g", c0->eval_fraction);
    D("feed_forward_proj", "%s%s", c0->model.gated ? "gated-" : "",
      c0->model.act == FAT5_ACT_RELU ? "relu" : c0->model.act == FAT5_ACT_SILU ? "silu" : "gelu");
    D("position_encoding_type", "%s", (unsigned)c0->model.pos_kind < 5 ? pos[c0->model.pos_kind] : "?");
    D("relative_attention_num_buckets", "%lld", (long long)c0->model.rel_buckets);
    D("relative_attention_max_distance", "%lld", (long long)c0->model.rel_max_distance);
    D("alibi_mode", "%s", c0->model.alibi_asymmetric ? "asymetric" : "symetric");
    D("rotary_emb_fraction", "%g", c0->model.rotary_fraction);
    D("rotary_base", "%g", c0->model.rotary_base);
    D("rotary_interleaved", "%s", c0->model.rotary_interleaved ? "true" : "false");
    D("rotary_scale_base", "%g (off)", c0->model.rotary_scale_base);
    D("fire_mlp_width", "%d", c0->model.fire_mlp_width);
    D("attention", "the model's own");
    D("freeze", "none (every parameter trains)");
    D("seed", "%llu", (unsigned long long)c0->seed);
    D("optim", "%s", c0->optim.kind == FAT5_OPTIM_ADAMW_SCALE ? "adamwscale"
                     : c0->optim.kind == FAT5_OPTIM_ADAFACTOR ? "adafactor" : "adamw");
    D("adafactor_relative_step", "%s", c0->optim.adafactor_relative_step ? "true" : "false");
    D("adafactor_scale_parameter", "%s", c0->optim.adafactor_scale_parameter ? "true" : "false");
    D("adafactor_warmup_init", "%s", c0->optim.adafactor_warmup_init ? "true" : "false");
    D("adafactor_clip_threshold", "%g", c0->optim.adafactor_clip_threshold);
    D("adafactor_decay_rate", "%g", c0->optim.adafactor_decay_rate);
    D("adafactor_beta1", "%s", c0->optim.adafactor_beta1 > 0 ? "set" : "none");
    D("adam_beta1", "%g", c0->optim.beta1);
    D("adam_beta2", "%g", c0->optim.beta2);
    D("adam_epsilon", "%g", c0->optim.eps);
    D("weight_decay", "%g", c0->optim.weight_decay);
    D("max_grad_norm", "%g", c0->optim.clip_norm);
    D("lr_scheduler_type", "%s", (unsigned)c0->optim.sched < 5 ? sched[c0->optim.sched] : "?");
    D("decay_steps", "%lld (wsd: warmup_steps)", (long long)c0->optim.decay_steps);
    D("min_lr", "%g", c0->optim.min_lr);
    D("gradient_accumulation_steps", "%d", c0->grad_accum);
    D("prefetch", "%d", c0->prefetch);
    D("z_loss", "%g", c0->loss.z_loss);
    D("label_smoothing", "%g", c0->loss.label_smoothing);
    D("denoisers", "%s", c0->ul2.n_denoisers == 1 ? "t5" : "fat5");
    D("sentinel_first", "from the data's vocabulary");
    D("n_sentinels", "from the data's vocabulary");
    D("output_dir", "%s", c0->output_dir);
    D("save_total_limit", "%d", c0->save_total_limit);
    D("peak_tflops", "%g (989 on a GPU in bf16)", c0->peak_tflops);
    D("world_size", "%d", c0->world_size);
    D("rank", "%d", c0->rank);
    D("dist_timeout", "%g", c0->dist_timeout_s);
    D("bucket_mb", "%g", c0->bucket_mb);
    D("balance_ranks", "%d", c0->balance_ranks);
    D("text_column", "input");
    D("summary_column", "target");
    D("tokenizer_name", "the model's own, else byte-level ids");
    D("per_device_eval_batch_size", "%lld", (long long)c0->per_device_eval_batch_size);
    D("group_by_length", "%s", c0->group_by_length ? "true" : "false");
    D("generation_max_length", "max_labels_length");
    D("generation_num_beams", "%lld", (long long)c0->generation_num_beams);
    D("metric_for_best_model", "%s", c0->metric_for_best_model);
    D("greater_is_better", "false for loss, true for the others");
#undef D
}

// Hugging Face's names for the same options (TrainingArguments, and the example scripts'), and
// names this trainer does not take, with what to use instead.
static const struct { const char *hf, *key; } hf_alias[] = {
    {"label_smoothing_factor", "label_smoothing"}, {"ddp_timeout", "dist_timeout"},
    {"model_name_or_path", "init"}, {"resume_from_checkpoint", "resume"},
    {"max_seq_length", "max_length"}, {"max_source_length", "max_length"}, {"max_target_length", "max_labels_length"},
};
static const cli_opt ft_hints[] = {
    {.name = "warmup-ratio", .kind = CLI_HINT, .help = "use --warmup-steps (a number of steps)"},
    {.name = "fp16", .kind = CLI_HINT, .help = "not supported: a GPU trains in bf16 (--bf16, the default there)"},
    {.name = "eval-strategy", .alias = "evaluation_strategy save_strategy logging_strategy", .kind = CLI_HINT,
     .help = "evaluations, checkpoints and logs come every N steps: --eval-steps, --save-steps, --logging-steps"},
    {.name = "do-train", .alias = "do_eval do_predict", .kind = CLI_HINT,
     .help = "finetune always trains, and evaluates every --eval-steps and at the end"},
    {.name = "report-to", .alias = "logging_dir", .kind = CLI_HINT,
     .help = "the metrics go to OUTPUT_DIR/metrics.jsonl (tools/plot_metrics draws them)"},
    {.name = "load-best-model-at-end", .kind = CLI_HINT,
     .help = "OUTPUT_DIR/best names the best checkpoint (save_total_limit keeps it): use that directory"},
    {.name = "dataset-name", .alias = "dataset_config_name", .kind = CLI_HINT,
     .help = "no hub access: give the data as files, --train-file and --validation-file (JSONL, TSV, CSV)"},
};
static const cli_opt hints[] = {
    {.name = "num-train-epochs", .kind = CLI_HINT,
     .help = "this trainer counts optimizer steps, not epochs: use --max-steps"},
    {.name = "per-device-train-batch-size", .alias = "per_device_eval_batch_size train_batch_size", .kind = CLI_HINT,
     .help = "a micro-batch is a token budget here: use --batch-tokens and --batch-labels-tokens"},
    {.name = "warmup-ratio", .kind = CLI_HINT, .help = "use --warmup-steps (a number of steps)"},
    {.name = "fp16", .kind = CLI_HINT, .help = "not supported: a GPU trains in bf16 (--bf16, the default there)"},
    {.name = "eval-strategy", .alias = "evaluation_strategy save_strategy logging_strategy", .kind = CLI_HINT,
     .help = "evaluations, checkpoints and logs come every N steps: --eval-steps, --save-steps, --logging-steps"},
    {.name = "do-train", .alias = "do_eval", .kind = CLI_HINT,
     .help = "train always trains, and evaluates every --eval-steps (--eval-fraction 0: never)"},
    {.name = "report-to", .alias = "logging_dir", .kind = CLI_HINT,
     .help = "the metrics go to OUTPUT_DIR/metrics.jsonl (tools/plot_metrics draws them)"},
};

enum { O_CONFIG = 1, O_DEVICE, O_PRESET, O_BF16, O_LOGGING, O_GPUS, O_RANKS, O_LIB = 100 };
#define MAX_LIB 128

typedef struct lib_opts {      // the library's option table, as the command line spells it
    int n;
    char *key[MAX_LIB];        // fat5_train_config_set's name ("max_steps")
    char *name[MAX_LIB];       // with dashes ("max-steps")
    char *help[MAX_LIB];
    char def[MAX_LIB][96];
    char alias[MAX_LIB][128];
    cli_opt opts[MAX_LIB + 32];
    int n_opts;
    int ft_at;                 // finetune: the first of fine-tuning's options (fat5_finetune_option_names)
} lib_opts;

// Reads fat5_train_option_names ("name, name: meaning" lines, continued by indented lines) into
// the command line's table. 0 when out of memory.
static int lib_opts_build(lib_opts *L, const fat5_train_config *c0, const fat5_train_config *g0) {
    static const cli_opt own[] = {
        {.kind = CLI_SECTION, .help = "this program's options:"},
        {.id = O_CONFIG, .name = "config", .kind = CLI_STR, .meta = "FILE.json",
         .help = "training options from a JSON object ({\"max_steps\": 500, ...}); later flags override it"},
        {.id = O_DEVICE, .name = "device", .kind = CLI_CHOICE, .choices = "auto|cpu|gpu", .def = "auto",
         .help = "auto: the GPU when there is one, else the CPU"},
        {.id = O_PRESET, .name = "preset", .kind = CLI_CHOICE, .choices = "cpu|gpu", .def = "the device's",
         .help = "the run's defaults: a CPU run's (tiny model, 150 steps) or a GPU run's\n(FAT5-small, 2000 steps)"},
        {.id = O_BF16, .name = "bf16", .kind = CLI_FLAG, .def = "true on a GPU",
         .help = "a GPU computes in bf16 (--bf16 false: fp32); the CPU always in fp32"},
        {.id = O_LOGGING, .name = "logging-steps", .kind = CLI_INT, .def = "10 on the CPU, 50 on a GPU",
         .help = "a progress line every N steps (every step on a terminal)", .lo = 1, .hi = 1e15},
        {.id = O_GPUS, .name = "gpus", .kind = CLI_INT, .help = "start N ranks on this host's GPUs (rank r on GPU r)",
         .lo = 1, .hi = 256},
        {.id = O_RANKS, .name = "ranks", .kind = CLI_INT, .help = "start N ranks on this host, on --device's device",
         .lo = 1, .hi = 256},
        {.kind = CLI_SECTION, .help = "training options (the library's; the keys of --config's file, with underscores):"},
    };
    static const char *const ul2_only[] = {"data", "denoisers", "sentinel_first", "n_sentinels", "eval_batches"};
    const char *p = fat5_train_option_names();
    int i, k, list;
    memset(L, 0, sizeof *L);
    for (i = 0; i < (int)(sizeof own / sizeof own[0]); i++) {
        L->opts[L->n_opts] = own[i];
        if (finetune && own[i].id == O_PRESET)
            L->opts[L->n_opts].help = "the run's defaults: a CPU run's (batches of 16 rows, 200 rows generated at an\n"
                                      "evaluation) or a GPU run's (32 rows, every validation row)";
        L->n_opts++;
    }
    for (list = 0; list < 1 + finetune; list++, p = fat5_finetune_option_names()) {
    if (list == 1) L->ft_at = L->n;
    while (*p) {   // the training options, then (finetune) fine-tuning's
        const char *e = strchr(p, '\n'), *colon, *h, *hend, *q;
        size_t hl;
        if (!e) e = p + strlen(p);
        colon = p + strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_, ()");
        if (p[0] == ' ' || colon >= e || *colon != ':') {   // not a "names: meaning" line
            p = *e ? e + 1 : e;
            continue;
        }
        // the meaning: the rest of the line and the indented lines after it
        h = colon + 1 + (colon[1] == ' ');
        for (hend = e; *hend == '\n' && hend[1] == ' ' && hend[2] == ' ';) {
            const char *nx = strchr(hend + 1, '\n');
            hend = nx ? nx : hend + strlen(hend);
        }
        hl = (size_t)(hend - h);
        for (q = p; q < colon && L->n < MAX_LIB;) {   // each name of the line: "decay_steps (wsd)"
            size_t n = strspn(q, "abcdefghijklmnopqrstuvwxyz0123456789_"), item = strcspn(q, ",:");
            const char *note = q + n + strspn(q + n, " ");
            size_t nl = (size_t)(q + item - note);
            char *key = (char *)malloc(n + 1), *name = (char *)malloc(n + 1), *help = (char *)malloc(hl + nl + 2);
            if (!key || !name || !help) {
                free(key), free(name), free(help);
                return 0;
            }
            memcpy(key, q, n), key[n] = 0;
            for (k = 0; k <= (int)n; k++) name[k] = key[k] == '_' ? '-' : key[k];
            memcpy(help, h, hl), help[hl] = 0;
            for (k = 0; help[k]; k++)   // continuation lines: their indent goes
                if (help[k] == '\n' && help[k + 1] == ' ' && help[k + 2] == ' ')
                    memmove(help + k + 1, help + k + 3, strlen(help + k + 3) + 1);
            if (nl) strcat(help, " "), strncat(help, note, nl);   // the name's own note
            for (k = 0; finetune && n && k < (int)(sizeof ul2_only / sizeof ul2_only[0]); k++)
                if (strlen(ul2_only[k]) == n && !strncmp(ul2_only[k], key, n)) n = 0;   // pre-training's alone
            if (n) {
                L->key[L->n] = key, L->name[L->n] = name, L->help[L->n] = help;
                L->n++;
            } else {
                free(key), free(name), free(help);
            }
            q += item;
            while (q < colon && (*q == ',' || *q == ' ')) q++;
        }
        p = *hend ? hend + 1 : hend;
    }
    }
    for (i = 0; i < L->n; i++) {
        cli_opt *o;
        if (finetune && i == L->ft_at) {
            o = &L->opts[L->n_opts++];
            memset(o, 0, sizeof *o);
            o->kind = CLI_SECTION;
            o->help = "fine-tuning options (the library's, fat5_finetune_option_names):";
        }
        o = &L->opts[L->n_opts++];
        int x = expect_of(L->key[i]);
        size_t an = 0;
        memset(o, 0, sizeof *o);
        o->id = O_LIB + i;
        o->name = L->name[i];
        o->kind = CLI_STR;
        o->meta = x >= 0 ? expects[x].meta : "VALUE";
        if (finetune && i >= L->ft_at && x >= 0 && !strcmp(expects[x].meta, "true|false")) {
            o->kind = CLI_FLAG;   // Hugging Face's bare flags: --predict_with_generate (or --... false)
            o->meta = NULL;
        }
        o->help = L->help[i];
        fmt_default(L->key[i], c0, g0, L->def[i], sizeof L->def[i]);
        o->def = L->def[i][0] ? L->def[i] : NULL;
        L->alias[i][0] = 0;
        for (k = 0; k < (int)(sizeof hf_alias / sizeof hf_alias[0]); k++)
            if (strcmp(hf_alias[k].key, L->key[i]) == 0)
                an += (size_t)snprintf(L->alias[i] + an, sizeof L->alias[i] - an, "%s%s", an ? " " : "", hf_alias[k].hf);
        o->alias = an ? L->alias[i] : NULL;
    }
    if (finetune)
        for (i = 0; i < (int)(sizeof ft_hints / sizeof ft_hints[0]); i++) L->opts[L->n_opts++] = ft_hints[i];
    else
        for (i = 0; i < (int)(sizeof hints / sizeof hints[0]); i++) L->opts[L->n_opts++] = hints[i];
    return 1;
}

static void lib_opts_free(lib_opts *L) {
    int i;
    for (i = 0; i < L->n; i++) free(L->key[i]), free(L->name[i]), free(L->help[i]);
}

// Applies the options in order. On a bad value: 0, with a message in the command line's terms
// (the flag, or the file and its key).
static int apply(fat5_ctx *ctx, fat5_train_config *cfg, const kvs *s, const char *config_file, const char *run_file) {
    int i;
    for (i = 0; i < s->n; i++) {
        const kv *e = &s->a[i];
        const char *msg, *tail;
        int x;
        char flag[96];
        size_t k;
        if (fat5_train_config_set(ctx, cfg, e->k, e->v) == FAT5_OK) continue;
        msg = fat5_last_error(ctx);
        // "training option max_steps: bad value '0'": what it must be instead, when known
        x = expect_of(e->k);
        tail = strncmp(msg, "training option ", 16) == 0 && strstr(msg, ": bad value") ? NULL : msg;
        if (!tail && x >= 0 && expects[x].expect) snprintf(flag, sizeof flag, "expected %s", expects[x].expect);
        else if (!tail) snprintf(flag, sizeof flag, "not a valid value (--help describes it)");
        if (e->src == SRC_FLAG) {
            char nm[64];
            for (k = 0; e->k[k] && k < sizeof nm - 1; k++) nm[k] = e->k[k] == '_' ? '-' : e->k[k];
            nm[k] = 0;
            fprintf(stderr, "%s: --%s %s: %s\n", who, nm, e->v, tail ? tail : flag);
        } else {
            fprintf(stderr, "%s: %s%s: \"%s\": %s: %s\n", who, e->src == SRC_FILE ? "--config " : "",
                    e->src == SRC_FILE ? config_file : e->src == SRC_RUN ? run_file : "the device's defaults", e->k, e->v,
                    tail ? tail : flag);
        }
        return 0;
    }
    return 1;
}

// The checkpoint a --resume path names (itself, or an output directory's latest) and the file
// with the options of its run (train_args.json beside the checkpoints, or in the checkpoint).
static void resume_paths(const char *r, char *ckpt, size_t cap, char *args, size_t acap) {
    char p[4400];
    ckpt[0] = args[0] = 0;
    if (snprintf(p, sizeof p, "%s/training_state.safetensors", r) >= (int)sizeof p) return;
    if (is_file(p)) {
        if (snprintf(ckpt, cap, "%s", r) >= (int)cap) ckpt[0] = 0;
    } else {
        size_t len = 0;
        char *t;
        if (snprintf(p, sizeof p, "%s/latest", r) < (int)sizeof p && (t = read_text(p, &len)) != NULL) {
            while (len && (t[len - 1] == '\n' || t[len - 1] == '\r')) t[--len] = 0;
            if (len && !strchr(t, '/') && snprintf(ckpt, cap, "%s/%s", r, t) >= (int)cap) ckpt[0] = 0;
            free(t);
        }
        if (snprintf(args, acap, "%s/train_args.json", r) < (int)acap && is_file(args)) return;
        args[0] = 0;
    }
    if (ckpt[0]) {
        char *slash;
        if (snprintf(args, acap, "%s/train_args.json", ckpt) < (int)acap && is_file(args)) return;
        snprintf(p, sizeof p, "%s", ckpt);   // the output directory above a checkpoint
        while ((slash = strrchr(p, '/')) != NULL && slash[1] == 0) *slash = 0;
        slash = strrchr(p, '/');
        if (slash) slash[1] = 0;
        else snprintf(p, sizeof p, "./");
        if (snprintf(args, acap, "%strain_args.json", p) >= (int)acap || !is_file(args)) args[0] = 0;
    }
}

// Writes the run's options to DIR/train_args.json (a --config file), atomically: its preset (the
// device whose defaults it took) and the options given, not the per-launch ones (resume, rank,
// world_size, rendezvous), so that the defaults keep their rules on resume (a warm-up the run's
// length shortens). 0 (reported) on an error.
static int write_args(const char *dir, const kvs *s, const char *output_dir, int preset) {
    char path[4400], tmp[4420];
    FILE *f;
    int i, first = 1, ok;
    snprintf(path, sizeof path, "%s/train_args.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) {
        fprintf(stderr, "%s: %s: cannot write\n", who, tmp);
        return 0;
    }
    fprintf(f, "{\n  \"preset\": \"%s\"", preset ? "gpu" : "cpu");
    first = 0;
    for (i = 0; i < s->n; i++) {
        const char *k = s->a[i].k;
        if (s->a[i].src == SRC_DEVICE || !strcmp(k, "resume") || !strcmp(k, "rank") || !strcmp(k, "world_size") || !strcmp(k, "rendezvous") ||
            !strcmp(k, "output_dir"))
            continue;
        fprintf(f, "%s\n  ", first ? "" : ",");
        cli_json_put(f, k, strlen(k));
        fputs(": ", f);
        cli_json_put(f, s->a[i].v, strlen(s->a[i].v));
        first = 0;
    }
    fprintf(f, "%s\n  \"output_dir\": ", first ? "" : ",");
    cli_json_put(f, output_dir, strlen(output_dir));
    fputs("\n}\n", f);
    ok = fflush(f) == 0 && !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: %s: cannot write\n", who, path);
        remove(tmp);
        return 0;
    }
    return 1;
}

// The options of the run, in the order they apply: the device's shape, the resumed run's own, the
// config file, the flags. A warm-up the device set that is longer than the run is cut to a tenth
// of it. 0 when out of memory.
static int build(kvs *out, int gpu, const kvs *run, const kvs *file, const kvs *flags) {
    int i, n;
    const char *const (*d)[2] = dev_opts(gpu, &n);
    kvs_free(out);
    for (i = 0; i < n; i++)
        if (!kvs_set(out, d[i][0], d[i][1], SRC_DEVICE)) return 0;
    if (!kvs_add_all(out, run) || !kvs_add_all(out, file) || !kvs_add_all(out, flags)) return 0;
    {   // Hugging Face's rule: a max_steps given overrides num_train_epochs
        kv *m = kvs_find(out, "max_steps");
        if (m && m->src != SRC_DEVICE) kvs_del(out, "num_train_epochs");
    }
    {
        kv *w = kvs_find(out, "warmup_steps");
        const char *ms = kvs_get(out, "max_steps");
        double steps = ms ? atof(ms) : 0;
        if (w && w->src == SRC_DEVICE && steps >= 1 && atof(w->v) > steps) {
            char v[32];
            snprintf(v, sizeof v, "%.0f", floor(steps / 10));
            if (!kvs_set(out, "warmup_steps", v, SRC_DEVICE)) return 0;
        }
    }
    return 1;
}

// A file's "preset" (cpu or gpu) taken out of its options; *preset keeps an earlier one (a flag's,
// or the config file's over the resumed run's). 0 (reported) on a bad value.
static int take_preset(kvs *s, const char *file, int *preset) {
    const char *v = kvs_get(s, "preset");
    int p;
    if (!v) return 1;
    p = !strcmp(v, "cpu") ? 0 : !strcmp(v, "gpu") ? 1 : -1;
    if (p < 0) {
        fprintf(stderr, "%s: %s: \"preset\": %s: expected cpu or gpu\n", who, file, v);
        return 0;
    }
    if (*preset < 0) *preset = p;
    kvs_del(s, "preset");
    return 1;
}

// The keys of a --config file spelled as the flags may be (dashes, Hugging Face's names) become
// the library's names; an unknown key names the closest valid one. 0 (reported) on an error.
static int file_keys(kvs *s, const cli *c, const char *file) {
    int i, k;
    for (i = 0; i < s->n; i++) {
        const char *key = s->a[i].k;
        size_t n = strlen(key);
        for (k = 0; k < c->n_opts && !cli_names(&c->opts[k], key, n, 0); k++) {}
        if (k == c->n_opts) {
            const char *near = cli_closest(c, key, n);
            char u[72];
            size_t j;
            for (j = 0; near && near[j] && j < sizeof u - 1; j++) u[j] = near[j] == '-' ? '_' : near[j];
            u[near ? j : 0] = 0;
            if (near) fprintf(stderr, "%s: --config %s: unknown key \"%s\"; did you mean \"%s\"?\n", who, file, key, u);
            else fprintf(stderr, "%s: --config %s: unknown key \"%s\" (--help lists the options)\n", who, file, key);
            return 0;
        }
        if (c->opts[k].kind == CLI_HINT) {
            fprintf(stderr, "%s: --config %s: \"%s\": %s\n", who, file, key, c->opts[k].help);
            return 0;
        }
        if (c->opts[k].id < O_LIB) {
            fprintf(stderr, "%s: --config %s: \"%s\" is a command-line option only (--%s)\n", who, file, key,
                    c->opts[k].name);
            return 0;
        }
        {
            const char *lib = c->opts[k].name;   // the library's key: the name with underscores
            char *nk = (char *)malloc(strlen(lib) + 1);
            size_t j;
            if (!nk) return 0;
            for (j = 0; lib[j]; j++) nk[j] = lib[j] == '-' ? '_' : lib[j];
            nk[j] = 0;
            if (strcmp(nk, key) != 0) {   // an earlier key of the same option gives way
                int d;
                for (d = 0; d < s->n; d++)
                    if (d != i && strcmp(s->a[d].k, nk) == 0) break;
                if (d < s->n) {
                    kvs_del(s, nk);
                    if (d < i) i--;
                }
                free(s->a[i].k);
                s->a[i].k = nk;
            } else {
                free(nk);
            }
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();   // its log: on_log (set below, and again for the CPU)
    fat5_ctx *ctx = NULL, *probe = NULL;
    fat5_train_config cfg, c0, g0;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    const char *config_file = NULL, *resume = NULL;
    int i, tty = isatty(2), gpu, rc = 0, ranks = 1, quiet = 0, o, bf16 = -1;
    int preset = -1, shape;       // --preset (or the config file's, or the resumed run's): whose defaults
    double first_loss = 0, last_loss = 0;
    char why[512], ckpt[4400] = "", run_file[4400] = "";
    int device = -1;              // --device: FAT5_DEVICE_CPU, FAT5_DEVICE_GPU, -1 = the GPU when there is one
    long long logging_steps = 0;  // --logging-steps: 0 = the device's default
    int64_t first_step = -1;
    fat5_launch_info li;
    static lib_opts L;
    kvs flags = {NULL, 0, 0}, file = {NULL, 0, 0}, run = {NULL, 0, 0}, all = {NULL, 0, 0};
    cli c;
    memset(&li, 0, sizeof li);
    memset(&r, 0, sizeof r);
    li.rank = -1;

    cc.log = on_log;
    // a CPU context to check the options and for fat5_launch (no GPU context may exist before it
    // forks); the device is chosen after
    if (fat5_ctx_create(&cc, &probe, why, sizeof why) != FAT5_OK) return fail_why("context", why);
    c0 = g0 = cfg = fat5_train_config_default();
    {   // each device's defaults, for --help
        int n;
        const char *const (*dc)[2] = dev_opts(0, &n), *const (*dg)[2] = dev_opts(1, &n);
        for (i = 0; i < n; i++) {
            (void)fat5_train_config_set(probe, &c0, dc[i][0], dc[i][1]);
            (void)fat5_train_config_set(probe, &g0, dg[i][0], dg[i][1]);
        }
    }
    if (!lib_opts_build(&L, &c0, &g0)) {
        rc = fail_why("options", "out of memory");
        goto done;
    }
    if (!finetune)
        cli_init(&c, "train",
                 "usage: train [--data FILE.tok] [--output-dir DIR] [--resume DIR] [--config FILE.json] [options]\n"
                 "Pre-trains a T5 with the UL2 mixture of denoisers, on the GPU when there is one (FAT5-small), else\n"
                 "on the CPU (a tiny model). A run continues with --resume OUTPUT_DIR (its own options kept).\n",
                 L.opts, L.n_opts, argc, argv);
    else
        cli_init(&c, "finetune",
                 "usage: finetune --model_name_or_path DIR --train_file FILE [--validation_file FILE] [--output-dir DIR]\n"
                 "                [--resume DIR] [--config FILE.json] [options]\n"
                 "Fine-tunes a T5 checkpoint on (input, target) pairs (JSONL, TSV, CSV or two parallel text files), on\n"
                 "the GPU when there is one, else on the CPU; evaluates the validation loss and, with\n"
                 "--predict_with_generate (the default), generated text's exact match, F1, ROUGE and BLEU.\n"
                 "A run continues with --resume OUTPUT_DIR (its own options kept).\n",
                 L.opts, L.n_opts, argc, argv);
    c.notes = finetune
        ? "Options given with --resume override the run's own (e.g. --max-steps to extend it).\n"
          "Hugging Face's Seq2SeqTrainer / run_summarization names work where the meaning is the same:\n"
          "--model_name_or_path, --train_file, --validation_file, --text_column, --summary_column, --source_prefix,\n"
          "--max_source_length, --max_target_length, --per_device_train_batch_size, --num_train_epochs,\n"
          "--max_steps, --learning_rate, --lr_scheduler_type, --optim, --eval_steps, --save_steps,\n"
          "--predict_with_generate, --generation_max_length, --generation_num_beams, --metric_for_best_model,\n"
          "--resume_from_checkpoint, --seed, ... (docs/finetuning.md)\n"
        : "Options given with --resume override the run's own (e.g. --max-steps to extend it).\n"
          "Hugging Face's names work where the meaning is the same: --learning_rate, --warmup_steps,\n"
          "--max_steps, --output_dir, --resume_from_checkpoint, --model_name_or_path (--init), --seed, ...\n";
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) {
            rc = cli_status(o);
            goto done;
        }
        if (o == CLI_POS) {
            rc = cli_status(cli_fail(&c, "unexpected argument '%s' (options are --key value; --help lists them)", c.val));
            goto done;
        }
        if (o == O_CONFIG) config_file = c.val;
        else if (o == O_DEVICE) device = c.ival == 0 ? -1 : c.ival == 1 ? FAT5_DEVICE_CPU : FAT5_DEVICE_GPU;
        else if (o == O_PRESET) preset = (int)c.ival;
        else if (o == O_BF16) bf16 = (int)c.ival;
        else if (o == O_LOGGING) logging_steps = c.ival;
        else if (o == O_GPUS) ranks = (int)c.ival, device = FAT5_DEVICE_GPU;
        else if (o == O_RANKS) ranks = (int)c.ival;
        else if (!kvs_set(&flags, L.key[o - O_LIB], c.opt->kind == CLI_FLAG ? (c.ival ? "true" : "false") : c.val,
                          SRC_FLAG)) {
            rc = fail_why("options", "out of memory");
            goto done;
        }
    }
    if (bf16 == 1 && device == FAT5_DEVICE_CPU) {
        fprintf(stderr, "%s: --bf16 needs a GPU: the CPU trains in fp32\n", who);
        rc = 2;
        goto done;
    }
    if (config_file) {   // its keys as the flags' names: underscores or dashes, Hugging Face's names
        size_t len = 0;
        char *text = read_text(config_file, &len);
        if (!text) {
            fprintf(stderr, "%s: --config %s: cannot read\n", who, config_file);
            rc = 2;
            goto done;
        }
        snprintf(why, sizeof why, "--config %s", config_file);
        o = kvs_from_json(&file, text, len, why, SRC_FILE);
        if (o < 0) {   // the library's JSON reader says where the text goes wrong
            fat5_train_config tmp = cfg;
            fprintf(stderr, "%s: --config %s: %s\n", who, config_file,
                    fat5_train_config_from_json(probe, text, len, &tmp) != FAT5_OK ? fat5_last_error(probe)
                                                                                  : "not a JSON object");
        }
        free(text);
        if (o == 1 && !take_preset(&file, why, &preset)) o = 0;
        if (o != 1 || !file_keys(&file, &c, config_file)) {
            rc = 2;
            goto done;
        }
    }
    // a resumed run: its own options (train_args.json), else the checkpoint's model
    resume = kvs_get(&flags, "resume") ? kvs_get(&flags, "resume") : kvs_get(&file, "resume");
    if (resume && resume[0]) {
        resume_paths(resume, ckpt, sizeof ckpt, run_file, sizeof run_file);
        if (run_file[0]) {
            size_t len = 0;
            char *text = read_text(run_file, &len);
            o = text ? kvs_from_json(&run, text, len, run_file, SRC_RUN) : 0;
            if (!text) fprintf(stderr, "%s: %s: cannot read\n", who, run_file);
            if (o < 0) fprintf(stderr, "%s: %s: not a JSON object\n", who, run_file);
            if (o == 1 && !take_preset(&run, run_file, &preset)) o = 0;
            free(text);
            if (o != 1) {
                rc = 2;
                goto done;
            }
        }
        if (ckpt[0] && (!run_file[0] || kvs_get(&run, "init")) && !kvs_get(&flags, "model") && !kvs_get(&flags, "init") &&
            !kvs_get(&file, "model") && !kvs_get(&file, "init")) {
            char p[4420];   // the checkpoint's own model (an --init run: its checkpoint, not the start again)
            snprintf(p, sizeof p, "%s/config.json", ckpt);
            kvs_del(&run, "init");
            if (!kvs_set(&run, "model", p, SRC_RUN)) {
                rc = fail_why("options", "out of memory");
                goto done;
            }
        }
    }
    {   // every option checked before any device work (on each device's defaults)
        for (i = 0; i < 2; i++) {
            fat5_train_config tmp = cfg;
            if (preset >= 0 && i != preset) continue;
            if (!build(&all, i, &run, &file, &flags)) {
                rc = fail_why("options", "out of memory");
                goto done;
            }
            if (!apply(probe, &tmp, &all, config_file, run_file)) {
                rc = 2;
                goto done;
            }
            if (finetune && (!kvs_get(&all, "train_file") || !kvs_get(&all, "train_file")[0])) {
                fprintf(stderr, "%s: no training data: --train_file FILE (pairs: .jsonl, .tsv, .csv, or "
                        "inputs.txt,targets.txt)\n", who);
                rc = 2;
                goto done;
            }
            if (finetune && !kvs_get(&all, "init") && !kvs_get(&all, "model")) {
                fprintf(stderr, "%s: no model: --model_name_or_path DIR (the checkpoint to fine-tune), or --model NAME "
                        "for a new one\n", who);
                rc = 2;
                goto done;
            }
            if (tmp.num_train_epochs <= 0 && tmp.optim.warmup_steps > tmp.optim.total_steps) {   // the optimizer's check, before any device work
                kv *w = kvs_find(&all, "warmup_steps");
                int src = w ? w->src : SRC_DEVICE;
                fprintf(stderr, "%s: %s %lld%s is more than max_steps %lld\n", who, src == SRC_FLAG ? "--warmup-steps" : "warmup_steps",
                        (long long)tmp.optim.warmup_steps, src == SRC_FILE ? " (--config)" : src == SRC_RUN ?
                        " (the resumed run's)" : "", (long long)tmp.optim.total_steps);
                rc = 2;
                goto done;
            }
        }
    }
    if (ranks > 1) {   // one worker per rank; this process waits for them and passes Ctrl-C on
        if (fat5_launch(probe, ranks, 30.0, &li)) {
            rc = fail(probe, "launch");
            goto done;
        }
        if (li.rank < 0) {
            if (li.failed_rank >= 0) fprintf(stderr, "%s: %s; all %d ranks stopped\n", who, li.message, ranks);
            rc = li.exit_code;
            goto done;
        }
        snprintf(who, sizeof who, "%s[rank %d]", PROG, li.rank);
        quiet = li.rank != 0;
    }
    fat5_ctx_destroy(probe);
    probe = NULL;
    gpu = device != FAT5_DEVICE_CPU;
    if (gpu) {
        const char *lr = getenv("LOCAL_RANK");
        cc.device = FAT5_DEVICE_GPU;
        cc.dtype = bf16 == 0 ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
        if (li.rank >= 0) cc.device_ordinal = li.rank;
        else if (lr && lr[0]) cc.device_ordinal = atoi(lr);
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            if (device == FAT5_DEVICE_GPU) {
                rc = fail_why("GPU", why);
                goto done;
            }
            if (bf16 == 1) {
                fprintf(stderr, "%s: --bf16 needs a GPU, and there is none here (%s)\n", who, why);
                rc = 2;
                goto done;
            }
            fprintf(stderr, "%s: no GPU (%s): training on the CPU\n", who, why);
            gpu = 0;
        }
    }
    if (!ctx) {
        cc = fat5_ctx_config_default();
        cc.log = on_log;
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            rc = fail_why("context", why);
            goto done;
        }
    }
    // the device's shape, the resumed run's options, the config file, the flags
    shape = preset >= 0 ? preset : gpu;
    if (!build(&all, shape, &run, &file, &flags) || !apply(ctx, &cfg, &all, config_file, run_file)) {
        rc = 2;
        goto done;
    }
    if (li.rank >= 0) {   // a worker of fat5_launch
        cfg.world_size = li.world_size;
        cfg.rank = li.rank;
        cfg.rendezvous = li.rendezvous;
    }
    quiet |= cfg.rank != 0;
    if (!logging_steps) logging_steps = gpu ? 50 : 10;
    if (cfg.world_size > 1 && device == -1 && !gpu) {   // every rank must compute on the same device
        fprintf(stderr, "%s: no GPU here, and the other ranks may have one: name --device gpu or cpu\n", who);
        rc = 1;
        goto done;
    }

    if (!quiet) {   // setup (data, model, kernels, and the ranks' join) takes seconds, and a rank that never
                    // comes keeps the others waiting up to dist_timeout: say so before it starts
        if (cfg.world_size > 1)
            fprintf(stderr, "%s: setting up %d ranks; they join when every rank is ready (waiting at most %.0f s: "
                    "dist_timeout)\n", who, cfg.world_size, cfg.dist_timeout_s);
        else
            fprintf(stderr, "%s: setting up%s%s%s\n", who, run_file[0] ? " (the run's options: " : "", run_file,
                    run_file[0] ? ")" : "");
    }
    if (fat5_train_create(ctx, &cfg, &t)) {
        rc = fail(ctx, "setup");
        goto done;
    }
    if (cfg.rank == 0 && !write_args(cfg.output_dir, &all, cfg.output_dir, shape)) {
        rc = 1;
        goto done;
    }
    if (!quiet) {
        const fat5_model_config *mc = fat5_model_get_config(fat5_train_model(t));
        char where[64];
        if (cfg.world_size > 1) snprintf(where, sizeof where, "%d %s ranks", cfg.world_size, gpu ? "GPU (bf16)" : "CPU");
        else snprintf(where, sizeof where, "%s", gpu ? (cc.dtype == FAT5_DTYPE_BF16 ? "GPU (bf16)" : "GPU (fp32)") : "CPU");
        fprintf(stderr, "%s: %s, d_model %lld, %lld+%lld layers, %.1fM parameters, %lld steps -> %s\n", who, where,
                (long long)mc->d_model, (long long)mc->num_layers, (long long)mc->num_decoder_layers,
                (double)fat5_model_param_count(fat5_train_model(t)) / 1e6, (long long)fat5_train_get_config(t)->optim.total_steps,
                cfg.output_dir);
    }
    tty &= !quiet;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!fat5_train_done(t)) {
        char eta[32];
        if (stop_requested && cfg.world_size > 1) {   // every rank stops after the same step
            fat5_train_request_stop(t);
            stop_requested = 0;
        }
        if (stop_requested) {
            const char *dir;
            if (tty) fprintf(stderr, "\n");
            if (fat5_train_save(t, &dir)) {
                rc = fail(ctx, "save");
                goto done;
            }
            (void)write_args(dir, &all, cfg.output_dir, shape);
            fprintf(stderr, "%s: interrupted; checkpoint %s (continue with --resume %s)\n", who, dir, cfg.output_dir);
            rc = 130;
            goto done;
        }
        if (fat5_train_step(t, &r)) {
            if (tty) fprintf(stderr, "\n");
            rc = fail(ctx, "step");
            goto done;
        }
        if (r.saved && cfg.rank == 0) (void)write_args(r.checkpoint, &all, cfg.output_dir, shape);
        if (r.stop) {   // every rank, after the same step: one checkpoint (this step's if it has one)
            const char *dir = r.checkpoint;
            if (!r.saved && fat5_train_save(t, &dir)) {
                rc = fail(ctx, "save");
                goto done;
            }
            if (!r.saved && cfg.rank == 0) (void)write_args(dir, &all, cfg.output_dir, shape);
            if (!quiet)
                fprintf(stderr, "%s%s: interrupted after step %lld; checkpoint %s (continue with --resume %s)\n",
                        tty ? "\n" : "", who, (long long)r.step, dir, cfg.output_dir);
            rc = 130;
            goto done;
        }
        if (first_step < 0) first_step = r.step, first_loss = r.loss;
        last_loss = r.loss;
        if (quiet) continue;
        fmt_duration(eta, sizeof eta, r.eta_s);
        if (r.skipped)
            fprintf(stderr, "%s%s: step %lld: non-finite loss or gradient, step skipped (%lld so far)\n", tty ? "\n" : "",
                    who, (long long)r.step, (long long)r.n_skipped);
        if (tty || r.step % logging_steps == 0 || r.step == r.max_steps) {
            char mfu[32] = "", per[96] = "";
            if (r.mfu > 0) snprintf(mfu, sizeof mfu, " | MFU %.1f%%", 100 * r.mfu);
            if (r.world_size > 1)
                snprintf(per, sizeof per, " (%d x %.0f, scaling %.0f%%)", r.world_size, r.tokens_per_s_gpu,
                         100 * r.scaling);
            fprintf(stderr, "%sstep %lld/%lld | loss %.4f | lr %.2e | %.0f tok/s%s%s | ETA %s%s", tty ? "\r" : "",
                    (long long)r.step, (long long)r.max_steps, r.loss, r.lr, r.tokens_per_s, per, mfu, eta,
                    tty ? "   " : "\n");
        }
        if (r.has_eval && r.has_generate)   // fine-tuning: the generated text's scores (percent)
            fprintf(stderr, "%seval loss %.4f | exact_match %.2f | f1 %.2f | rouge1 %.2f | rougeL %.2f | bleu %.2f | "
                    "gen_len %.1f (%lld rows) at step %lld\n", tty ? "\n" : "", r.eval_loss, r.eval_exact_match, r.eval_f1,
                    r.eval_rouge1, r.eval_rougeL, r.eval_bleu, r.eval_gen_len, (long long)r.eval_samples, (long long)r.step);
        else if (r.has_eval && r.has_predict) {   // a task head's scores (percent; mse for a regression)
            const char *task = fat5_train_get_config(t)->task;
            fprintf(stderr, "%seval loss %.4f | ", tty ? "\n" : "", r.eval_loss);
            if (!strcmp(task, "qa"))
                fprintf(stderr, "exact_match %.2f | f1 %.2f", r.eval_exact_match, r.eval_f1);
            else if (!strcmp(task, "token-classify"))
                fprintf(stderr, "precision %.2f | recall %.2f | f1 %.2f | accuracy %.2f", r.eval_precision, r.eval_recall,
                        r.eval_f1, r.eval_accuracy);
            else if (fat5_model_get_config(fat5_train_model(t))->problem_type == FAT5_PROBLEM_REGRESSION ||
                     (fat5_model_get_config(fat5_train_model(t))->problem_type == FAT5_PROBLEM_AUTO &&
                      fat5_model_get_config(fat5_train_model(t))->num_labels == 1))
                fprintf(stderr, "mse %.6g", r.eval_mse);
            else
                fprintf(stderr, "accuracy %.2f | macro_f1 %.2f", r.eval_accuracy, r.eval_macro_f1);
            fprintf(stderr, " (%lld rows) at step %lld\n", (long long)r.eval_samples, (long long)r.step);
        } else if (r.has_eval)
            fprintf(stderr, "%seval loss %.4f at step %lld\n", tty ? "\n" : "", r.eval_loss, (long long)r.step);
        if (r.saved)
            fprintf(stderr, "%scheckpoint %s%s\n", tty && !r.has_eval ? "\n" : "", r.checkpoint, r.is_best ? " (best so far)" : "");
    }
    if (tty) fprintf(stderr, "\n");
    if (quiet) goto done;
    if (first_step >= 0)
        fprintf(stderr, "%s: loss %.4f (step %lld) -> %.4f (step %lld); metrics in %s/metrics.jsonl\n", who, first_loss,
                (long long)first_step, last_loss, (long long)r.step, cfg.output_dir);
    else
        fprintf(stderr, "%s: nothing to do: the run is complete at step %lld (--max-steps N continues it to N)\n", who,
                (long long)fat5_train_get_config(t)->optim.total_steps);
    if (finetune) {   // the best checkpoint by metric_for_best_model, as OUTPUT_DIR/best names it
        char p[4400];
        size_t len = 0;
        char *b;
        snprintf(p, sizeof p, "%s/best", cfg.output_dir);
        if ((b = read_text(p, &len)) != NULL) {
            while (len && (b[len - 1] == '\n' || b[len - 1] == '\r')) b[--len] = 0;
            fprintf(stderr, "%s: best checkpoint by %s: %s/%s", who, cfg.metric_for_best_model, cfg.output_dir, b);
            if (r.has_generate || r.has_predict)
                fprintf(stderr, "; predictions in %s/eval_predictions.jsonl", cfg.output_dir);
            fprintf(stderr, "\n");
            free(b);
        }
    }
done:
    fat5_train_destroy(t);
    fat5_ctx_destroy(ctx);
    fat5_ctx_destroy(probe);
    kvs_free(&flags);
    kvs_free(&file);
    kvs_free(&run);
    kvs_free(&all);
    lib_opts_free(&L);
    return rc;
}
