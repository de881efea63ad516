// Pre-trains (or continues training) a T5 with the UL2 mixture of denoisers.
//     cc -std=c99 -O2 -o examples/train examples/train.c -lm -ldl -lpthread
//
//     examples/train --data corpus.tok --output_dir out              # GPU when there is one
//     examples/train --config run.json --resume out                   # continue where it stopped
//     examples/train --data corpus.tok --init path/to/flan-t5-small   # continued pre-training
//     examples/train --gpus 8 --data corpus.tok --output_dir out      # data parallel, one host
//
// --gpus N forks one worker per GPU (rank r on GPU r) and waits for them; --ranks N does the same
// on whichever device --device picks (CPU processes too). Several hosts: start one process per GPU
// with --rank R --world_size N --rendezvous FILE (the same file, on a filesystem every host sees;
// rank 0 creates it) and LOCAL_RANK set to the GPU's index on its host. Rank 0 prints and writes
// the checkpoints; if a rank fails, every rank stops, and the error names it.
// Options are fat5_train_config_set's names, as --name value, or in a JSON file (--config FILE;
// later flags override it), and this program's own: --device auto|cpu|gpu (auto: the GPU when
// there is one), --logging_steps N (a progress line every N steps; 50 on a GPU, 10 on the CPU),
// --gpus N, --ranks N (flags only, not keys of the JSON file). --help lists them. Without a model
// option, the run's shape follows the device: FAT5-small for a few minutes on a GPU, a tiny model
// on the CPU.
// Ctrl-C writes a checkpoint and exits; --resume OUTPUT_DIR continues bit-identically.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static char who[32] = "train";   // "train[rank 1]" in a worker of several

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

static void fmt_duration(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e8) snprintf(buf, cap, "?");
    else if (s < 60) snprintf(buf, cap, "%.0fs", s);
    else if (s < 3600) snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

// The shape of a run that names no model: what fits the device.
static fat5_status device_defaults(fat5_ctx *ctx, fat5_train_config *c, int gpu) {
    static const char *const gpu_opts[][2] = {
        {"model", "fat5-small"}, {"max_steps", "2000"}, {"warmup_steps", "100"}, {"learning_rate", "5e-3"},
        {"max_length", "512"}, {"max_labels_length", "512"}, {"batch_tokens", "8192"},
        {"batch_labels_tokens", "8192"}, {"eval_steps", "250"}, {"eval_batches", "8"}, {"save_steps", "1000"}};
    static const char *const cpu_opts[][2] = {
        {"model", "tiny"}, {"max_steps", "150"}, {"warmup_steps", "10"}, {"learning_rate", "5e-3"},
        {"max_length", "128"}, {"max_labels_length", "128"}, {"batch_tokens", "1024"},
        {"batch_labels_tokens", "1024"}, {"eval_steps", "25"}, {"eval_batches", "4"}, {"save_steps", "50"}};
    size_t i, n = gpu ? sizeof gpu_opts / sizeof gpu_opts[0] : sizeof cpu_opts / sizeof cpu_opts[0];
    fat5_status st;
    for (i = 0; i < n; i++)
        if ((st = fat5_train_config_set(ctx, c, gpu ? gpu_opts[i][0] : cpu_opts[i][0], gpu ? gpu_opts[i][1] : cpu_opts[i][1])))
            return st;
    return FAT5_OK;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();   // its log: on_log (set below, and again for the CPU)
    fat5_ctx *ctx = NULL, *probe = NULL;
    fat5_train_config cfg;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    const char *config_file = NULL;
    int i, named_model = 0, tty = isatty(2), gpu, rc = 0, ranks = 1, quiet = 0;
    double first_loss = 0, last_loss = 0;
    char why[512];
    int device = -1;              // --device: FAT5_DEVICE_CPU, FAT5_DEVICE_GPU, -1 = the GPU when there is one
    long long logging_steps = 0;  // --logging_steps: 0 = the device's default
    int64_t first_step = -1;
    fat5_launch_info li;
    memset(&li, 0, sizeof li);
    li.rank = -1;

    cc.log = on_log;
    // a CPU context to check the config file and for fat5_launch (no GPU context may exist before
    // it forks); the device is chosen after
    if (fat5_ctx_create(&cc, &probe, why, sizeof why) != FAT5_OK) return fail_why("context", why);
    cfg = fat5_train_config_default();
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [--config FILE.json] [--NAME VALUE]...\n\noptions:\n%s"
                   "device: auto (the GPU when there is one), cpu or gpu\n"
                   "logging_steps: a progress line every N steps (50 on a GPU, 10 on the CPU)\n"
                   "gpus, ranks: start N ranks on this host (GPUs: rank r on GPU r)\n", argv[0], fat5_train_option_names());
            fat5_ctx_destroy(probe);
            return 0;
        }
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) config_file = argv[++i];
        else if ((strcmp(argv[i], "--gpus") == 0 || strcmp(argv[i], "--ranks") == 0) && i + 1 < argc) {
            char *end;
            long n = strtol(argv[i + 1], &end, 10);
            if (*end || n < 1 || n > 256) {
                fprintf(stderr, "train: %s %s: expected 1 to 256\n", argv[i], argv[i + 1]);
                return 2;
            }
            ranks = (int)n;
            if (strcmp(argv[i], "--gpus") == 0) device = FAT5_DEVICE_GPU;
            i++;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "auto") == 0) device = -1;
            else if (strcmp(v, "cpu") == 0) device = FAT5_DEVICE_CPU;
            else if (strcmp(v, "gpu") == 0) device = FAT5_DEVICE_GPU;
            else {
                fprintf(stderr, "train: --device %s: expected auto, cpu or gpu\n", v);
                return 2;
            }
        } else if (strcmp(argv[i], "--logging_steps") == 0 && i + 1 < argc) {
            char *end;
            logging_steps = strtoll(argv[i + 1], &end, 10);
            if (*end || logging_steps < 1) {
                fprintf(stderr, "train: --logging_steps %s: expected a count >= 1\n", argv[i + 1]);
                return 2;
            }
            i++;
        } else if (strncmp(argv[i], "--", 2) == 0 && i + 1 < argc) {
            const char *k = argv[i] + 2;
            if (strcmp(k, "model") == 0 || strcmp(k, "init") == 0 || strcmp(k, "resume") == 0) named_model = 1;
            i++;
        } else {
            fprintf(stderr, "train: unexpected argument '%s' (--help lists the options)\n", argv[i]);
            return 2;
        }
    }
    {   // a config file may name the model too (and is checked before any rank starts)
        fat5_train_config tmp = cfg;
        char *text;
        size_t len = 0;
        if (config_file) {
            if (!(text = read_text(config_file, &len))) {
                fprintf(stderr, "train: %s: cannot read\n", config_file);
                return 1;
            }
            if (fat5_train_config_from_json(probe, text, len, &tmp)) {
                free(text);
                return fail(probe, config_file);
            }
            named_model |= strstr(text, "\"model\"") || strstr(text, "\"init\"") || strstr(text, "\"resume\"");
            free(text);
        }
    }
    if (ranks > 1) {   // one worker per rank; this process waits for them and passes Ctrl-C on
        if (fat5_launch(probe, ranks, 30.0, &li)) return fail(probe, "launch");
        if (li.rank < 0) {
            if (li.failed_rank >= 0) fprintf(stderr, "train: %s; all %d ranks stopped\n", li.message, ranks);
            fat5_ctx_destroy(probe);
            return li.exit_code;
        }
        snprintf(who, sizeof who, "train[rank %d]", li.rank);
        quiet = li.rank != 0;
    }
    fat5_ctx_destroy(probe);
    gpu = device != FAT5_DEVICE_CPU;
    if (gpu) {
        const char *lr = getenv("LOCAL_RANK");
        cc.device = FAT5_DEVICE_GPU;
        cc.dtype = FAT5_DTYPE_BF16;
        if (li.rank >= 0) cc.device_ordinal = li.rank;
        else if (lr && lr[0]) cc.device_ordinal = atoi(lr);
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            if (device == FAT5_DEVICE_GPU) return fail_why("GPU", why);
            fprintf(stderr, "train: no GPU (%s): training on the CPU\n", why);
            gpu = 0;
        }
    }
    if (!ctx) {
        cc = fat5_ctx_config_default();
        cc.log = on_log;
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) return fail_why("context", why);
    }
    // defaults for the device, then the config file, then the flags
    if (!named_model && device_defaults(ctx, &cfg, gpu)) return fail(ctx, "defaults");
    if (config_file) {
        size_t len = 0;
        char *text = read_text(config_file, &len);
        if (!text || fat5_train_config_from_json(ctx, text, len, &cfg)) {
            free(text);
            return fail(ctx, config_file);
        }
        free(text);
    }
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "--gpus") == 0 || strcmp(argv[i], "--ranks") == 0 ||
            strcmp(argv[i], "--device") == 0 || strcmp(argv[i], "--logging_steps") == 0) {
            i++;
            continue;
        }
        if (fat5_train_config_set(ctx, &cfg, argv[i] + 2, argv[i + 1])) return fail(ctx, argv[i]);
        i++;
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
            fprintf(stderr, "train: setting up %d ranks; they join when every rank is ready (waiting at most %.0f s: "
                    "dist_timeout)\n", cfg.world_size, cfg.dist_timeout_s);
        else
            fprintf(stderr, "train: setting up\n");
    }
    if (fat5_train_create(ctx, &cfg, &t)) {
        rc = fail(ctx, "setup");
        goto done;
    }
    if (!quiet) {
        const fat5_model_config *mc = fat5_model_get_config(fat5_train_model(t));
        char where[64];
        if (cfg.world_size > 1) snprintf(where, sizeof where, "%d %s ranks", cfg.world_size, gpu ? "GPU (bf16)" : "CPU");
        else snprintf(where, sizeof where, "%s", gpu ? "GPU (bf16)" : "CPU");
        fprintf(stderr, "train: %s, d_model %lld, %lld+%lld layers, %.1fM parameters, %lld steps -> %s\n", where,
                (long long)mc->d_model, (long long)mc->num_layers, (long long)mc->num_decoder_layers,
                (double)fat5_model_param_count(fat5_train_model(t)) / 1e6, (long long)cfg.optim.total_steps,
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
            fprintf(stderr, "train: interrupted; checkpoint %s (continue with --resume %s)\n", dir, cfg.output_dir);
            rc = 130;
            goto done;
        }
        if (fat5_train_step(t, &r)) {
            if (tty) fprintf(stderr, "\n");
            rc = fail(ctx, "step");
            goto done;
        }
        if (r.stop) {   // every rank, after the same step: one checkpoint (this step's if it has one)
            const char *dir = r.checkpoint;
            if (!r.saved && fat5_train_save(t, &dir)) {
                rc = fail(ctx, "save");
                goto done;
            }
            if (!quiet)
                fprintf(stderr, "%strain: interrupted after step %lld; checkpoint %s (continue with --resume %s)\n",
                        tty ? "\n" : "", (long long)r.step, dir, cfg.output_dir);
            rc = 130;
            goto done;
        }
        if (first_step < 0) first_step = r.step, first_loss = r.loss;
        last_loss = r.loss;
        if (quiet) continue;
        fmt_duration(eta, sizeof eta, r.eta_s);
        if (r.skipped)
            fprintf(stderr, "%strain: step %lld: non-finite loss or gradient, step skipped (%lld so far)\n", tty ? "\n" : "",
                    (long long)r.step, (long long)r.n_skipped);
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
        if (r.has_eval) fprintf(stderr, "%seval loss %.4f at step %lld\n", tty ? "\n" : "", r.eval_loss, (long long)r.step);
        if (r.saved) fprintf(stderr, "%scheckpoint %s\n", tty && !r.has_eval ? "\n" : "", r.checkpoint);
    }
    if (tty) fprintf(stderr, "\n");
    if (quiet) goto done;
    if (first_step >= 0)
        fprintf(stderr, "train: loss %.4f (step %lld) -> %.4f (step %lld); metrics in %s/metrics.jsonl\n", first_loss,
                (long long)first_step, last_loss, (long long)r.step, cfg.output_dir);
    else
        fprintf(stderr, "train: nothing to do: the run is complete at step %lld\n", (long long)cfg.optim.total_steps);
done:
    fat5_train_destroy(t);
    fat5_ctx_destroy(ctx);
    return rc;
}
