// bench — GPU benchmarks, one JSON object per line on stdout.
//     cc -O2 -o dev/bench dev/bench.c -lm -ldl -lpthread
//     dev/bench [attn|step|ul2|generate|engine|decode|long|all]  (make bench runs all)
// attn: the attention kernels with T5 relative bias (32 buckets, max distance 128), head dims 64
//       and 128, 8 heads, 16,384 tokens per batch in sequences of L = 1024 and 4096, bidirectional
//       and causal, bf16: forward and backward on tensor cores ("forward": "tensor-core") and on
//       the exact FMA kernels ("fma", FAT5_ATTN_TC=0); the backward (delta, dq with the bias-table
//       gradient, dk/dv) whole, then dq, dq without the bias gradient and dk/dv each alone
//       (dbias_share_of_bwd: what the bias gradient adds, over the whole backward); FLOPs as in
//       the usual convention: forward 4*B*H*L^2*d (halved when causal), forward + backward 3.5x
//       that.
// step: a training step of a randomly initialised FAT5-small-shaped model (d_model 512, d_ff
//       2048, 8 heads, 12 + 12 layers, gated-gelu, vocabulary 32768), batch 16 x (1024 encoder +
//       256 decoder tokens), bf16: zero_grad, forward, backward and the optimizer (AdamWScale,
//       clipping); ms per step with and without the optimizer, tokens/s, MFU (model FLOPs as the
//       training loop counts them, 989 TFLOP/s peak) and the device memory of model, gradients,
//       optimizer and workspace. Then the step's profile: every kernel, cuBLAS product (keyed by
//       layout and M x N x K), copy and fill timed between two events, summed per key per step,
//       and the GPU's busy time against the step's. Options (bench step --help): another config,
//       batch shape, step count, the optimizer (--optim adafactor: ref/compare_hf.py --finetune), the
//       CPU (ref/compare_hf.py --train --tiny runs it so).
// ul2:  the UL2 sampler on one CPU core, no GPU needed: FAT5's seven denoisers over a generated
//       corpus of 16 M byte-level ids (ByT5 vocabulary 384; documents of 1 .. 4096 ids) written to a
//       temporary token file, packed batches of 16 x 512 / 16 x 512; corpus ids consumed per second
//       and batch tokens (inputs + targets) emitted per second.
// generate: greedy decoding with a randomly initialised model of the FAT5-small shape (as step),
//       inputs of 512 tokens, 128 new tokens per row (min_new_tokens = max_new_tokens, so every row
//       runs to the end), batch 1 and 64, bf16 and fp32, CUDA graphs on; the whole call (encoder
//       included), a 1-token call (encoder + first step), and from their difference the decode
//       step alone: ms per step and generated tokens/s; the device memory the model and decoder use.
// long: the encoder alone (fat5_model_encode's pass) of a randomly initialised T5-base-shaped model
//       (d_model 768, d_ff 3072, 12 heads of 64, 12 layers, ReLU) on one sequence of 16,384, 65,536
//       and 131,072 tokens, bf16, with full, local (radius 127) and transient-global (radius 127,
//       blocks of 16) attention: ms and the device memory of the encoder's buffers (the weights
//       apart); then forward + backward of the same encoder in training mode (a one-layer decoder
//       of 16 tokens after it), full attention at 16k only: ms and the device memory of weights,
//       gradients and workspace.
// engine: continuous batching (fat5_engine) on the model of `generate`, bf16, prompts of 512 tokens,
//       128 new tokens each (no stop token, so every request runs to the end): the static baseline
//       first (fat5_generate, batch 64 and batch 1: tokens/s and ms per decode step), then closed
//       loops of 64 and 1 clients in the engine (each client submits its next request when its last
//       one finishes; the 64 start one every 2 steps, so requests join and leave all the time):
//       generated tokens/s, time to first token and per-token latency (p50 / p90 / p99,
//       nearest rank), and the ratios to the static runs.
// decode: the decode step of `generate` (bf16, batch 1 and 64) op by op, each op timed in a CUDA
//       graph of 20 copies, the whole step, and the step followed by a 4-byte read (as between
//       the steps of fat5_generate).
// Times are means over repeats after a warm-up, with the stream synchronised around them.
// Beyond the public API, bench uses the developer interface of fat5_internal.h (the attention
// kernels alone, the profile, the decode step's ops, device memory).
#define _POSIX_C_SOURCE 200809L   // clock_gettime, getpid: before every system header
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "fat5_internal.h"

static char bench_why[512];   // why a context could not be made

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int bench_fail(fat5_ctx *ctx, const char *what) {
    fprintf(stderr, "bench: %s: %s\n", what, fat5_last_error(ctx));
    return 1;
}

static int bench_attn(fat5_ctx *ctx) {
    const int H = 8, nb = 32, md = 128, lens[2] = {1024, 4096}, dks[2] = {64, 128};
    const int64_t T = 16384;
    int A = fat5_internal_act_size(ctx);
    fat5_internal_attn *a = NULL;
    int li, kind, di, tc, rc = 1;
    // buffers for the largest head dim
    if (fat5_internal_attn_create(ctx, T, H, 128, nb, md, 7, &a)) return bench_fail(ctx, "attention buffers");
    for (di = 0; di < 2; di++)
    for (li = 0; li < 2; li++)
        for (kind = 1; kind <= 2; kind++)
        for (tc = A == 2 ? 2 : 0; tc >= 0; tc--) {  // bf16: the default (sm_90a where it runs), mma.sync, FMA
            int L = lens[li], n_seq = (int)(T / L), reps = 5, rep, dk = dks[di];
            if (tc == 0 && A == 2 && getenv("FAT5_BENCH_NO_FMA")) continue;  // the slow exact kernels left out
            double t0, tf, tb, tq, tq0, tkv, flops = 4.0 * n_seq * H * (double)L * L * dk / (kind == 2 ? 2 : 1);
            if (fat5_internal_attn_shape(a, L, dk, kind == 2, tc)) {
                rc = bench_fail(ctx, "attention batch");
                goto done;
            }
            if (fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_FWD) || fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_BWD) ||
                fat5_internal_sync(ctx)) {
                rc = bench_fail(ctx, "attention warm-up");
                goto done;
            }
            t0 = bench_now();
            for (rep = 0; rep < reps; rep++) (void)fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_FWD);
            fat5_internal_sync(ctx);
            tf = (bench_now() - t0) / reps;
            t0 = bench_now();
            for (rep = 0; rep < reps; rep++) (void)fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_BWD);
            if (fat5_internal_sync(ctx)) {
                rc = bench_fail(ctx, "attention backward");
                goto done;
            }
            tb = (bench_now() - t0) / reps;
            // the backward's kernels one by one, and dq without the bias-table gradient (its cost)
            t0 = bench_now();
            for (rep = 0; rep < reps; rep++) (void)fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_DQ);
            fat5_internal_sync(ctx);
            tq = (bench_now() - t0) / reps;
            t0 = bench_now();
            for (rep = 0; rep < reps; rep++) (void)fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_DQ_NO_DBIAS);
            fat5_internal_sync(ctx);
            tq0 = (bench_now() - t0) / reps;
            t0 = bench_now();
            for (rep = 0; rep < reps; rep++) (void)fat5_internal_attn_run(a, FAT5_INTERNAL_ATTN_DKV);
            if (fat5_internal_sync(ctx)) {
                rc = bench_fail(ctx, "attention backward kernels");
                goto done;
            }
            tkv = (bench_now() - t0) / reps;
            printf("{\"bench\": \"attn\", \"dtype\": \"%s\", \"forward\": \"%s\", \"L\": %d, \"batch\": %d, \"heads\": %d, "
                   "\"head_dim\": %d, \"causal\": %s, \"fwd_ms\": %.3f, \"bwd_ms\": %.3f, \"dq_ms\": %.3f, "
                   "\"dq_no_dbias_ms\": %.3f, \"dkv_ms\": %.3f, \"dbias_share_of_bwd\": %.3f, \"fwd_tflops\": %.2f, "
                   "\"fwd_bwd_tflops\": %.2f}\n",
                   A == 2 ? "bf16" : "fp32", tc == 2 ? "default" : tc ? "tensor-core" : "fma", L, n_seq, H, dk, kind == 2 ? "true" : "false",
                   tf * 1e3, tb * 1e3, tq * 1e3, tq0 * 1e3, tkv * 1e3, (tq - tq0) / tb,
                   flops / tf / 1e12, 3.5 * flops / (tf + tb) / 1e12);
            fflush(stdout);
        }
    rc = 0;
done:
    if (a) fat5_internal_attn_shape(a, lens[0], dks[0], 0, 2);   // the default kernels back
    fat5_internal_attn_destroy(a);
    return rc;
}

// The whole of a small file (a config.json) in memory, NUL-terminated; free with free.
static int bench_read(const char *path, char **out, size_t *len) {
    FILE *fp = fopen(path, "rb");
    long n;
    *out = NULL;
    if (!fp) {
        fprintf(stderr, "bench: %s: %s\n", path, strerror(errno));
        return 0;
    }
    if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || n > (1L << 20) || fseek(fp, 0, SEEK_SET) != 0 ||
        !(*out = (char *)malloc((size_t)n + 1)) || fread(*out, 1, (size_t)n, fp) != (size_t)n) {
        fprintf(stderr, "bench: %s: cannot read it (at most 1 MiB)\n", path);
        free(*out);
        *out = NULL;
        fclose(fp);
        return 0;
    }
    fclose(fp);
    (*out)[n] = 0;
    *len = (size_t)n;
    return 1;
}

// The options of `bench step` (defaults: the FAT5-small shape of the header comment).
typedef struct step_opts {
    const char *config;       // config.json of the model shape, or NULL: FAT5-small
    int device_cpu, fp32;     // --device cpu, --dtype fp32
    int B, Le, Ld, reps, profile;
    int adafactor;            // --optim adafactor (Hugging Face Trainer's settings), else AdamWScale
} step_opts;

static int cmp_prof(const void *a, const void *b) {
    double x = ((const fat5_internal_prof_entry *)a)->ms, y = ((const fat5_internal_prof_entry *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

// One step on batch b: zero_grad, forward, backward, and the optimizer when o is not NULL
static fat5_status step_once(fat5_model *m, const fat5_batch *b, fat5_optim *o, fat5_forward_result *res) {
    fat5_optim_result orr;
    fat5_status st;
    if ((st = fat5_model_zero_grad(m)) || (st = fat5_model_forward(m, b, NULL, res)) ||
        (st = fat5_model_backward(m, 1.0f)))
        return st;
    return o ? fat5_optim_step(o, &orr) : FAT5_OK;
}

// One training step as fat5_train_step runs it on a fixed batch: zero_grad, forward, backward and
// the optimizer (AdamWScale, FAT5's settings, or Adafactor as Hugging Face's Trainer sets it up with
// lr 1e-3; clipping on). Then, on the GPU, the same step under
// the per-kernel profile: every kernel, cuBLAS product (by shape), copy and fill, summed per step.
static int bench_step(fat5_ctx *ctx, const step_opts *so) {
    static const char *small_json =
        "{\"d_model\": 512, \"d_ff\": 2048, \"d_kv\": 64, \"num_heads\": 8, \"num_layers\": 12,"
        " \"num_decoder_layers\": 12, \"vocab_size\": 32768, \"feed_forward_proj\": \"gated-gelu\","
        " \"tie_word_embeddings\": false}";
    const int B = so->B, Le = so->Le, Ld = so->Ld, reps = so->reps;
    int gpu = !so->device_cpu;
    fat5_model_config cfg;
    fat5_optim_config oc = fat5_optim_config_default();
    fat5_model *m = NULL;
    fat5_optim *o = NULL;
    fat5_batch b;
    fat5_forward_result res;
    fat5_rng r = fat5_rng_init(3);
    int32_t *enc = (int32_t *)malloc((size_t)B * Le * 4), *lab = (int32_t *)malloc((size_t)B * Ld * 4);
    int32_t *ecu = (int32_t *)malloc((size_t)(B + 1) * 4), *dcu = (int32_t *)malloc((size_t)(B + 1) * 4);
    char *text = NULL, bytes[32] = "null";
    size_t free0 = 0, free1 = 0, total = 0, len = 0;
    double t0, t_step, t_fb, flops;
    int i, rc = 1, V;
    if (!enc || !lab || !ecu || !dcu) goto done;
    if (so->config) {
        if (!bench_read(so->config, &text, &len)) goto done;
        if (fat5_model_config_from_json(ctx, text, len, &cfg)) {
            rc = bench_fail(ctx, so->config);
            goto done;
        }
    } else if (fat5_model_config_from_json(ctx, small_json, strlen(small_json), &cfg)) {
        rc = bench_fail(ctx, "config");
        goto done;
    }
    V = (int)(cfg.vocab_size < 32002 ? cfg.vocab_size : 32002);
    for (i = 0; i < B * Le; i++) enc[i] = (int32_t)fat5_rng_below(&r, (uint64_t)V - 2) + 2;
    for (i = 0; i < B * Ld; i++) lab[i] = (int32_t)fat5_rng_below(&r, (uint64_t)V - 2) + 2;
    for (i = 0; i <= B; i++) {
        ecu[i] = i * Le;
        dcu[i] = i * Ld;
    }
    memset(&b, 0, sizeof b);
    b.n_seq = B;
    b.n_enc_tokens = (int64_t)B * Le;
    b.n_dec_tokens = (int64_t)B * Ld;
    b.enc_tokens = enc;
    b.enc_cu_seqlens = ecu;
    b.labels = lab;
    b.dec_cu_seqlens = dcu;
    flops = 3 * fat5_internal_batch_flops(&cfg, &b);
    oc.warmup_steps = 100;
    oc.total_steps = 1000;
    if (so->adafactor) {
        oc.kind = FAT5_OPTIM_ADAFACTOR;
        oc.lr = 1e-3;
    }
    if (gpu) fat5_internal_mem_info(ctx, &free0, &total);
    // the first step allocates the workspace and, on the GPU, warms cuBLAS up
    if (fat5_model_create(ctx, &cfg, 1, &m) || fat5_model_reserve(m, B, (int64_t)B * Le, (int64_t)B * Ld) ||
        fat5_optim_create(m, &oc, &o) || step_once(m, &b, o, &res)) {
        rc = bench_fail(ctx, "training step");
        goto done;
    }
    if (gpu) fat5_internal_mem_info(ctx, &free1, &total);
    if (cfg.dropout_rate > 0) {
        // the config's dropout in the timed steps, at every site (the attention probabilities: the
        // config's attention_dropout_rate, by default dropout_rate)
        if (fat5_model_set_dropout_rate(m, cfg.dropout_rate, cfg.attention_dropout_rate) ||
            fat5_model_set_dropout(m, 1, 7, 0)) {
            rc = bench_fail(ctx, "dropout");
            goto done;
        }
    }
    t0 = bench_now();
    for (i = 0; i < reps; i++)
        if (step_once(m, &b, o, &res)) {
            rc = bench_fail(ctx, "training step");
            goto done;
        }
    t_step = (bench_now() - t0) / reps;
    t0 = bench_now();
    for (i = 0; i < reps; i++)
        if (step_once(m, &b, NULL, &res)) {
            rc = bench_fail(ctx, "forward + backward");
            goto done;
        }
    t_fb = (bench_now() - t0) / reps;
    if (gpu) snprintf(bytes, sizeof bytes, "%zu", free0 - free1);  // null on the CPU
    printf("{\"bench\": \"step\", \"model\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"optim\": \"%s\", "
           "\"batch\": %d, \"enc_len\": %d, \"dec_len\": %d, \"ms\": %.2f, \"ms_fwd_bwd\": %.2f, \"ms_optim\": %.2f, "
           "\"tokens_per_s\": %.0f, \"tflop_per_step\": %.3f, \"mfu\": %.4f, \"device_bytes\": %s, \"loss\": %.4f, "
           "\"dropout\": %g, \"attention_dropout\": %g}\n",
           so->config ? so->config : "fat5-small shape", gpu ? "gpu" : "cpu", so->fp32 ? "fp32" : "bf16",
           so->adafactor ? "adafactor" : "adamwscale", B, Le, Ld,
           t_step * 1e3, t_fb * 1e3, (t_step - t_fb) * 1e3, B * (Le + Ld) / t_step, flops / 1e12,
           gpu && !so->fp32 ? flops / t_step / 989e12 : 0.0, bytes, res.loss, cfg.dropout_rate,
           cfg.dropout_rate <= 0 ? 0.0 : cfg.attention_dropout_rate < 0 ? cfg.dropout_rate : cfg.attention_dropout_rate);
    fflush(stdout);
    if (gpu && so->profile) {  // the same step, each call between two events
        fat5_internal_prof_entry *e = NULL;
        double sum = 0, t_prof;
        const int prof_reps = 3;
        int n_e;
        if (fat5_internal_profile(ctx, 1)) {
            rc = bench_fail(ctx, "profile");
            goto done;
        }
        t0 = bench_now();
        for (i = 0; i < prof_reps; i++)
            if (step_once(m, &b, o, &res) || fat5_internal_profile_collect(ctx)) {
                rc = bench_fail(ctx, "profiled step");
                goto done;
            }
        t_prof = (bench_now() - t0) / prof_reps;
        n_e = fat5_internal_profile_entry(ctx, 0, NULL);
        if (n_e > 0 && !(e = (fat5_internal_prof_entry *)malloc((size_t)n_e * sizeof *e))) {
            fprintf(stderr, "bench: out of memory\n");
            goto done;
        }
        for (i = 0; i < n_e; i++) fat5_internal_profile_entry(ctx, i, &e[i]);
        if (n_e > 0) qsort(e, (size_t)n_e, sizeof e[0], cmp_prof);
        for (i = 0; i < n_e; i++) sum += e[i].ms / prof_reps;
        for (i = 0; i < n_e; i++)
            printf("{\"bench\": \"step_profile\", \"key\": \"%s\", \"calls_per_step\": %.1f, \"ms_per_step\": %.3f, "
                   "\"share\": %.4f}\n", e[i].key, (double)e[i].calls / prof_reps, e[i].ms / prof_reps,
                   sum > 0 ? e[i].ms / prof_reps / sum : 0.0);
        // the GPU's busy time against the step's: the rest is the host (launches, synchronisations)
        printf("{\"bench\": \"step_profile_sum\", \"gpu_busy_ms\": %.2f, \"step_ms\": %.2f, \"idle_ms\": %.2f, "
               "\"keys\": %d}\n", sum, t_prof * 1e3, t_prof * 1e3 - sum, n_e);
        free(e);
        fat5_internal_profile(ctx, 0);
    }
    rc = 0;
done:
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
    free(text);
    free(enc);
    free(lab);
    free(ecu);
    free(dcu);
    return rc;
}

static int bench_ul2(void) {
    const int64_t n_ids = (int64_t)16 << 20, V = 384;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_tokens *src = NULL;
    fat5_ul2 *s = NULL;
    fat5_ul2_config c = fat5_ul2_config_default();
    fat5_rng r = fat5_rng_init(3);
    int32_t *ids = (int32_t *)malloc((size_t)n_ids * sizeof(int32_t));
    char path[512];
    const char *paths[1];
    const char *tmp = getenv("TMPDIR");
    int64_t i = 0, n_docs = 0, enc = 0, dec = 0, batches = 0, n_content;
    int rc = 1;
    double t0, t;
    fat5_batch b;
    if (!ids || fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    while (i < n_ids) {   // documents of 1 .. 4096 ids, the last one cut to fit
        int64_t len = 1 + (int64_t)fat5_rng_below(&r, 4096), j;
        if (len > n_ids - i - 1) len = n_ids - i - 1;
        for (j = 0; j < len; j++) ids[i++] = 3 + (int32_t)fat5_rng_below(&r, 256);
        ids[i++] = 1;
        n_docs++;
    }
    n_content = n_ids - n_docs;
    snprintf(path, sizeof path, "%s/fat5_bench_ul2_%ld.tok", tmp && tmp[0] ? tmp : "/tmp", (long)getpid());
    paths[0] = path;
    c.sentinel_first = (int32_t)(V - 1);
    c.n_sentinels = (int32_t)(V - 259);
    if (fat5_tokens_write(ctx, path, ids, n_ids, V, 1, 2) != FAT5_OK || fat5_tokens_load(ctx, paths, 1, &src) != FAT5_OK ||
        fat5_ul2_create(ctx, &c, src, &s) != FAT5_OK) {
        bench_fail(ctx, "ul2 setup");
        goto done;
    }
    t0 = bench_now();
    while (fat5_ul2_epoch(s) == 0) {   // one pass over the corpus
        if (fat5_ul2_next_batch(s, &b) != FAT5_OK) {
            bench_fail(ctx, "ul2 batch");
            goto done;
        }
        enc += b.n_enc_tokens;
        dec += b.n_dec_tokens;
        batches++;
    }
    t = bench_now() - t0;
    printf("{\"bench\": \"ul2\", \"denoisers\": 7, \"corpus_ids\": %lld, \"documents\": %lld, \"batches\": %lld, "
           "\"enc_tokens\": %lld, \"dec_tokens\": %lld, \"seconds\": %.3f, \"corpus_tokens_per_s\": %.0f, "
           "\"batch_tokens_per_s\": %.0f}\n", (long long)n_ids, (long long)n_docs, (long long)batches,
           (long long)enc, (long long)dec, t, (double)n_content / t, (double)(enc + dec) / t);
    fflush(stdout);
    rc = 0;
done:
    fat5_ul2_destroy(s);
    fat5_tokens_destroy(src);
    remove(path);
    fat5_ctx_destroy(ctx);
    free(ids);
    return rc;
}

// one generate configuration: the mean time of reps calls
static int bench_generate_time(fat5_ctx *ctx, fat5_model *m, const int32_t *tok, const int32_t *cu, int64_t B,
                               const fat5_generate_config *g, int reps, double *t) {
    fat5_generate_result res;
    double t0;
    int i;
    memset(&res, 0, sizeof res);
    if (fat5_generate(m, tok, cu, B, g, &res)) return 1;   // warm-up (graph capture)
    fat5_generate_result_destroy(ctx, &res);
    t0 = bench_now();
    for (i = 0; i < reps; i++) {
        if (fat5_generate(m, tok, cu, B, g, &res)) return 1;
        fat5_generate_result_destroy(ctx, &res);
    }
    *t = (bench_now() - t0) / reps;
    return 0;
}

// The context, the randomly initialised model of `generate` (the FAT5-small shape, vocabulary
// 32,768, inference mode) and 64 inputs of Le random ids each ending with EOS (tok [64 Le], cu [65]),
// on the GPU in `dtype`; *free0 (may be NULL) gets the device's free memory before the model. 0 on
// success; else 1, the failure reported, *ctx (maybe NULL) and *tok left to the caller to release.
static int bench_gen_setup(fat5_dtype dtype, int64_t Le, fat5_ctx **ctx, fat5_model **m, int32_t **tok, int32_t *cu,
                           size_t *free0) {
    static const char *cfg_json =
        "{\"d_model\": 512, \"d_ff\": 2048, \"d_kv\": 64, \"num_heads\": 8, \"num_layers\": 12,"
        " \"num_decoder_layers\": 12, \"vocab_size\": 32768, \"feed_forward_proj\": \"gated-gelu\","
        " \"tie_word_embeddings\": false}";
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_model_config cfg;
    fat5_rng r = fat5_rng_init(5);
    size_t total = 0;
    int64_t i;
    *ctx = NULL, *m = NULL;
    *tok = (int32_t *)malloc((size_t)(64 * Le) * 4);
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = dtype;
    if (!*tok || fat5_ctx_create(&cc, ctx, bench_why, sizeof bench_why) != FAT5_OK) {
        fprintf(stderr, "bench: %s\n", bench_why[0] ? bench_why : "out of memory");
        return 1;
    }
    for (i = 0; i < 64 * Le; i++) (*tok)[i] = (int32_t)fat5_rng_below(&r, 32000) + 2;
    for (i = 0; i < 64; i++) (*tok)[(i + 1) * Le - 1] = 1;   // each input ends with EOS
    for (i = 0; i <= 64; i++) cu[i] = (int32_t)(i * Le);
    if (free0) fat5_internal_mem_info(*ctx, free0, &total);
    if (fat5_model_config_from_json(*ctx, cfg_json, strlen(cfg_json), &cfg) || fat5_model_create(*ctx, &cfg, 1, m) ||
        fat5_model_set_training(*m, 0))
        return bench_fail(*ctx, "generate model");
    return 0;
}

static int bench_generate(void) {
    const int64_t Le = 512, new_tokens = 128, batches[2] = {1, 64};
    const fat5_dtype dtypes[2] = {FAT5_DTYPE_BF16, FAT5_DTYPE_FP32};
    int di, bi, rc = 0;
    for (di = 0; di < 2; di++) {
        fat5_ctx *ctx = NULL;
        fat5_model *m = NULL;
        int32_t *tok = NULL, cu[65];
        size_t free0 = 0, free1 = 0, total = 0;
        if (bench_gen_setup(dtypes[di], Le, &ctx, &m, &tok, cu, &free0)) {
            rc = 1;
            goto next;
        }
        for (bi = 0; bi < 2; bi++) {
            int64_t B = batches[bi];
            fat5_generate_config g = fat5_generate_config_from_model(m);
            double t_full = 0, t_one = 0, step;
            g.max_new_tokens = g.min_new_tokens = new_tokens, g.max_length = 0;
            if (bench_generate_time(ctx, m, tok, cu, B, &g, B == 1 ? 5 : 3, &t_full)) {
                rc |= bench_fail(ctx, "generate");
                goto next;
            }
            fat5_internal_mem_info(ctx, &free1, &total);
            g.max_new_tokens = g.min_new_tokens = 1;
            if (bench_generate_time(ctx, m, tok, cu, B, &g, 5, &t_one)) {
                rc |= bench_fail(ctx, "generate (1 token)");
                goto next;
            }
            step = (t_full - t_one) / (double)(new_tokens - 1);
            printf("{\"bench\": \"generate\", \"model\": \"fat5-small shape\", \"dtype\": \"%s\", \"batch\": %lld, "
                   "\"input_len\": %lld, \"new_tokens\": %lld, \"strategy\": \"greedy\", \"total_ms\": %.2f, "
                   "\"first_token_ms\": %.2f, \"decode_ms_per_step\": %.3f, \"decode_tokens_per_s\": %.0f, "
                   "\"tokens_per_s\": %.0f, \"device_bytes\": %zu}\n",
                   dtypes[di] == FAT5_DTYPE_BF16 ? "bf16" : "fp32", (long long)B, (long long)Le, (long long)new_tokens,
                   t_full * 1e3, t_one * 1e3, step * 1e3, step > 0 ? (double)B / step : 0.0,
                   (double)(B * new_tokens) / t_full, free0 - free1);
            fflush(stdout);
        }
    next:
        fat5_model_destroy(m);
        fat5_ctx_destroy(ctx);
        free(tok);
    }
    return rc;
}

// ---- engine: continuous batching against the static batch ----

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
// nearest-rank percentile p (0 .. 100) of n sorted values
static double bench_pct(const double *v, int64_t n, double p) {
    int64_t k = (int64_t)ceil(p / 100.0 * (double)n);
    return n ? v[k < 1 ? 0 : k > n ? n - 1 : k - 1] : 0.0;
}

// A closed loop of `clients` clients for `total` requests (after `warm` not counted): tokens/s and
// the latency percentiles, one JSON line
static int bench_engine_loop(fat5_ctx *ctx, fat5_model *m, const int32_t *tok, int64_t Le, int64_t new_tokens,
                             int64_t clients, int64_t total, int64_t warm, int64_t join_interval, double static_tps,
                             double static_step) {
    fat5_engine_config ec = fat5_engine_config_default();
    fat5_engine *e = NULL;
    fat5_generate_config g = fat5_generate_config_from_model(m);
    int64_t submitted = 0, finished = 0, counted = 0, tokens = 0, step = 0, i, started = 0;
    int64_t n_slots = total + warm;
    double *t_sub = (double *)calloc((size_t)n_slots, sizeof(double)), *t_first = (double *)calloc((size_t)n_slots, sizeof(double));
    double *ttft = (double *)calloc((size_t)n_slots, sizeof(double)), *tpot = (double *)calloc((size_t)n_slots, sizeof(double));
    uint64_t *ids = (uint64_t *)calloc((size_t)n_slots, sizeof(uint64_t));
    double t0 = 0, t1, t_end = 0;   // the window: from the first counted submission to the last submission
    int rc = 0;
    g.max_new_tokens = new_tokens, g.max_length = 0, g.eos_token_id = -1;
    ec.max_rows = clients, ec.max_input_tokens = Le, ec.max_new_tokens = new_tokens, ec.max_waiting = clients + 1;
    ec.join_interval = join_interval;
    if (!t_sub || !t_first || !ttft || !tpot || !ids || fat5_engine_create(m, &ec, &e)) {
        rc = bench_fail(ctx, "engine");
        goto out;
    }
    while (finished < n_slots) {
        const fat5_engine_event *ev;
        int64_t n_ev;
        // clients: the first ones start one every 2 steps, then each resubmits when its request ends
        while (submitted < n_slots && submitted - finished < clients && (started >= clients || step >= 2 * started)) {
            if (fat5_engine_submit(e, tok + (submitted % 64) * Le, Le, &g, &ids[submitted])) {
                rc = bench_fail(ctx, "engine submit");
                goto out;
            }
            t_sub[submitted] = bench_now();
            if (submitted == warm) t0 = t_sub[submitted];
            submitted++;
            if (submitted == n_slots) t_end = bench_now();   // the clients stop: the loop is no longer closed
            if (started < clients) started++;
        }
        if (fat5_engine_step(e, &ev, &n_ev)) {
            rc = bench_fail(ctx, "engine step");
            goto out;
        }
        step++;
        t1 = bench_now();
        for (i = 0; i < n_ev; i++) {
            int64_t k = (int64_t)(ev[i].id - ids[0]);   // ids count from the first
            if (ev[i].n_tokens == 1 && ev[i].token >= 0) t_first[k] = t1;
            if (t0 > 0 && t_end == 0 && ev[i].token >= 0) tokens++;   // the tokens of the window
            if (ev[i].finish == FAT5_FINISH_NONE) continue;
            finished++;
            if (k < warm) continue;
            ttft[counted] = t_first[k] - t_sub[k];
            tpot[counted] = ev[i].n_tokens > 1 ? (t1 - t_first[k]) / (double)(ev[i].n_tokens - 1) : 0.0;
            counted++;
        }
    }
    if (clients == 1) {   // one client: its requests' window (no overlap to keep closed)
        tokens = counted * new_tokens;
        t_end = bench_now();
    }
    qsort(ttft, (size_t)counted, sizeof(double), bench_cmp_double);
    qsort(tpot, (size_t)counted, sizeof(double), bench_cmp_double);
    printf("{\"bench\": \"engine\", \"model\": \"fat5-small shape\", \"dtype\": \"bf16\", \"clients\": %lld, "
           "\"requests\": %lld, \"join_interval\": %lld, \"input_len\": %lld, \"new_tokens\": %lld, \"tokens_per_s\": %.0f, "
           "\"static_tokens_per_s\": %.0f, \"ratio_to_static\": %.3f, "
           "\"ttft_ms\": {\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f}, "
           "\"per_token_ms\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f}, \"static_step_ms\": %.3f, "
           "\"per_token_ratio_to_static\": %.3f}\n",
           (long long)clients, (long long)counted, (long long)join_interval, (long long)Le, (long long)new_tokens,
           (double)tokens / (t_end - t0), static_tps, static_tps > 0 ? (double)tokens / (t_end - t0) / static_tps : 0.0, bench_pct(ttft, counted, 50) * 1e3,
           bench_pct(ttft, counted, 90) * 1e3, bench_pct(ttft, counted, 99) * 1e3, bench_pct(tpot, counted, 50) * 1e3,
           bench_pct(tpot, counted, 90) * 1e3, bench_pct(tpot, counted, 99) * 1e3, static_step * 1e3,
           static_step > 0 ? bench_pct(tpot, counted, 50) / static_step : 0.0);
    fflush(stdout);
out:
    fat5_engine_destroy(e);
    free(t_sub), free(t_first), free(ttft), free(tpot), free(ids);
    return rc;
}

static int bench_engine(void) {
    const int64_t Le = 512, new_tokens = 128;
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    int32_t *tok = NULL, cu[65];
    double t64 = 0, t1 = 0, t1_one = 0, static64 = 0, step1 = 0;
    int rc = 0;
    fat5_generate_config g;
    if (bench_gen_setup(FAT5_DTYPE_BF16, Le, &ctx, &m, &tok, cu, NULL)) {
        rc = 1;
        goto out;
    }
    // the static runs: batch 64 (tokens/s, the encoder included) and batch 1 (ms per decode step)
    g = fat5_generate_config_from_model(m);
    g.max_new_tokens = new_tokens, g.max_length = 0, g.eos_token_id = -1;
    if (bench_generate_time(ctx, m, tok, cu, 64, &g, 3, &t64) || bench_generate_time(ctx, m, tok, cu, 1, &g, 5, &t1)) {
        rc = bench_fail(ctx, "engine static");
        goto out;
    }
    g.max_new_tokens = 1;
    if (bench_generate_time(ctx, m, tok, cu, 1, &g, 5, &t1_one)) {
        rc = bench_fail(ctx, "engine static (1 token)");
        goto out;
    }
    static64 = 64.0 * (double)new_tokens / t64;
    step1 = (t1 - t1_one) / (double)(new_tokens - 1);
    printf("{\"bench\": \"engine_static\", \"model\": \"fat5-small shape\", \"dtype\": \"bf16\", \"batch64_tokens_per_s\": "
           "%.0f, \"batch1_tokens_per_s\": %.0f, \"batch1_step_ms\": %.3f}\n",
           static64, (double)new_tokens / t1, step1 * 1e3);
    fflush(stdout);
    rc |= bench_engine_loop(ctx, m, tok, Le, new_tokens, 64, 512, 64, 1, static64, 0);
    rc |= bench_engine_loop(ctx, m, tok, Le, new_tokens, 64, 512, 64, 4, static64, 0);
    rc |= bench_engine_loop(ctx, m, tok, Le, new_tokens, 1, 8, 2, 1, (double)new_tokens / t1, step1);
out:
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    free(tok);
    return rc;
}

// ---- decode: the decode step op by op (the profile behind `generate`) ----
// Each op of a decode step is captured 20 times into one CUDA graph and the graph replayed, so the
// time per op includes what a graph launch of it costs inside the step; the step itself is its
// own graph (as fat5_generate replays it). Cache position 64 of 129, inputs of 512 tokens
// (fat5_internal_decode_time).

// the ops in step order, and how many a step runs (per layer x layers, or once); "step" is the
// whole step's graph replayed back to back, "step + read" each replay followed by a 4-byte
// download and a synchronisation, as fat5_generate does between steps
#define BENCH_DEC_OPS 12
static const char *const bench_op_names[BENCH_DEC_OPS] = {
    "embed", "norm_mm q|k|v -> cache", "attn_decode causal", "mm o + h", "norm_mm cq", "attn_decode cross",
    "mm co + h", "norm_mm wi0|wi1 gated", "mm wo + h", "rmsnorm (final)", "mm lm_head", "step"};
static const int bench_op_of[BENCH_DEC_OPS] = {
    FAT5_INTERNAL_DEC_EMBED, FAT5_INTERNAL_DEC_QKV, FAT5_INTERNAL_DEC_SELF_ATTN, FAT5_INTERNAL_DEC_O,
    FAT5_INTERNAL_DEC_CROSS_Q, FAT5_INTERNAL_DEC_CROSS_ATTN, FAT5_INTERNAL_DEC_O, FAT5_INTERNAL_DEC_FF_IN,
    FAT5_INTERNAL_DEC_FF_OUT, FAT5_INTERNAL_DEC_FINAL_NORM, FAT5_INTERNAL_DEC_LM_HEAD, FAT5_INTERNAL_DEC_STEP};

static int bench_decode(void) {
    static const char *cfg_json =
        "{\"d_model\": 512, \"d_ff\": 2048, \"d_kv\": 64, \"num_heads\": 8, \"num_layers\": 12,"
        " \"num_decoder_layers\": 12, \"vocab_size\": 32768, \"feed_forward_proj\": \"gated-gelu\","
        " \"tie_word_embeddings\": false}";
    const int64_t Le = 512, batches[2] = {1, 64};
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    fat5_decoder *d = NULL;
    fat5_rng r = fat5_rng_init(5);
    int32_t *tok = (int32_t *)malloc((size_t)(64 * Le) * 4), cu[65];
    int bi, op, rc = 1;
    int64_t i;
    cc.device = FAT5_DEVICE_GPU;
    cc.dtype = FAT5_DTYPE_BF16;
    if (!tok || fat5_ctx_create(&cc, &ctx, bench_why, sizeof bench_why) != FAT5_OK) {
        fprintf(stderr, "bench: %s\n", bench_why[0] ? bench_why : "out of memory");
        goto done;
    }
    for (i = 0; i < 64 * Le; i++) tok[i] = (int32_t)fat5_rng_below(&r, 32000) + 2;
    for (i = 0; i <= 64; i++) cu[i] = (int32_t)(i * Le);
    if (fat5_model_config_from_json(ctx, cfg_json, strlen(cfg_json), &cfg) || fat5_model_create(ctx, &cfg, 1, &m) ||
        fat5_model_set_training(m, 0) || fat5_decoder_create(m, 64, 64 * Le, 129, &d)) {
        bench_fail(ctx, "decode model");
        goto done;
    }
    for (bi = 0; bi < 2; bi++) {
        int64_t B = batches[bi], L = cfg.num_decoder_layers;
        const int64_t per_step[BENCH_DEC_OPS] = {1, L, L, L, L, L, L, L, L, 1, 1, 1};
        double sum = 0, us = 0;
        if (fat5_decoder_start(d, tok, cu, B, 1)) {
            bench_fail(ctx, "decode start");
            goto done;
        }
        for (op = 0; op <= BENCH_DEC_OPS; op++) {
            int k = op < BENCH_DEC_OPS ? bench_op_of[op] : FAT5_INTERNAL_DEC_STEP;
            if (fat5_internal_decode_time(d, k, B, op == BENCH_DEC_OPS, &us)) {
                bench_fail(ctx, op < BENCH_DEC_OPS ? bench_op_names[op] : "step + read");
                goto done;
            }
            if (op < BENCH_DEC_OPS - 1) sum += us * (double)per_step[op];
            printf("{\"bench\": \"decode\", \"dtype\": \"bf16\", \"batch\": %lld, \"op\": \"%s\", \"us\": %.2f, "
                   "\"per_step\": %lld, \"us_per_step\": %.1f}\n",
                   (long long)B, op < BENCH_DEC_OPS ? bench_op_names[op] : "step + read", us,
                   (long long)(op < BENCH_DEC_OPS ? per_step[op] : 1), us * (double)(op < BENCH_DEC_OPS ? per_step[op] : 1));
            fflush(stdout);
        }
        printf("{\"bench\": \"decode\", \"dtype\": \"bf16\", \"batch\": %lld, \"op\": \"sum of the ops\", "
               "\"us_per_step\": %.1f}\n", (long long)B, sum);
    }
    rc = 0;
done:
    fat5_decoder_destroy(d);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    free(tok);
    return rc;
}

static int bench_long(fat5_ctx *ctx) {
    static const char *cfg_json =
        "{\"d_model\": 768, \"d_ff\": 3072, \"d_kv\": 64, \"num_heads\": 12, \"num_layers\": 12,"
        " \"num_decoder_layers\": 1, \"vocab_size\": 32128, \"feed_forward_proj\": \"relu\"}";
    static const char *const patterns[3] = {"full", "local:127", "transient-global:127:16"};
    const int64_t lens[3] = {16384, 65536, 131072};
    fat5_model_config cfg;
    fat5_model *m = NULL;
    fat5_rng r = fat5_rng_init(11);
    int32_t *tok = (int32_t *)malloc((size_t)lens[2] * 4), cu[2];
    int li, pi, rc = 1;
    if (!tok) return 1;
    for (li = 0; li < lens[2]; li++) tok[li] = (int32_t)fat5_rng_below(&r, 32000) + 2;
    if (fat5_model_config_from_json(ctx, cfg_json, strlen(cfg_json), &cfg) || fat5_model_create(ctx, &cfg, 1, &m) ||
        fat5_model_set_training(m, 0)) {
        rc = bench_fail(ctx, "long-input model");
        goto done;
    }
    for (pi = 0; pi < 3; pi++)
        for (li = 0; li < 3; li++) {
            fat5_attention a;
            fat5_decoder *d = NULL;
            size_t free0 = 0, free1 = 0, total = 0;
            int i, reps = lens[li] > 16384 ? 1 : 3;
            double t0, t = 0;
            cu[0] = 0;
            cu[1] = (int32_t)lens[li];
            fat5_internal_mem_info(ctx, &free0, &total);
            if (fat5_attention_parse(ctx, patterns[pi], &a) || fat5_model_set_attention(m, &a) ||
                fat5_decoder_create(m, 1, lens[li], 0, &d)) {
                rc = bench_fail(ctx, "long-input encoder");
                goto done;
            }
            fat5_internal_mem_info(ctx, &free1, &total);
            for (i = -1; i < reps; i++) {   // i = -1: the warm-up
                t0 = bench_now();
                if (fat5_internal_decoder_encode(d, tok, cu, 1) || fat5_internal_sync(ctx)) {
                    fat5_decoder_destroy(d);
                    rc = bench_fail(ctx, "long-input encoder");
                    goto done;
                }
                if (i >= 0) t += bench_now() - t0;
                if (i < 0 && lens[li] > 16384 && pi == 0) break;   // full attention at 64k+: one run
            }
            if (i < 0) t = bench_now() - t0, reps = 1;
            printf("{\"bench\": \"long\", \"model\": \"t5-base shape\", \"dtype\": \"%s\", \"pass\": \"encoder\", "
                   "\"attention\": \"%s\", \"tokens\": %lld, \"ms\": %.1f, \"tokens_per_s\": %.0f, "
                   "\"device_bytes\": %zu}\n",
                   fat5_internal_act_size(ctx) == 2 ? "bf16" : "fp32", patterns[pi], (long long)lens[li], t / reps * 1e3,
                   (double)lens[li] * reps / t, free0 - free1);
            fflush(stdout);
            fat5_decoder_destroy(d);
        }
    rc = 0;
done:
    fat5_model_destroy(m);
    free(tok);
    return rc;
}

// long, forward + backward: the same T5-base-shaped encoder in training mode (one sequence, a
// one-layer decoder of 16 tokens after it, loss and every gradient), ms per step and the device
// memory of model, gradients and workspace. Full attention only at 16k tokens: its backward still
// runs on the FMA kernels (about 20 TFLOP/s), which would take ~25 s at 64k and ~100 s at 128k.
static int bench_long_train(fat5_ctx *ctx) {
    static const char *cfg_json =
        "{\"d_model\": 768, \"d_ff\": 3072, \"d_kv\": 64, \"num_heads\": 12, \"num_layers\": 12,"
        " \"num_decoder_layers\": 1, \"vocab_size\": 32128, \"feed_forward_proj\": \"relu\"}";
    static const char *const patterns[3] = {"full", "local:127", "transient-global:127:16"};
    const int64_t lens[3] = {16384, 65536, 131072}, Ld = 16;
    fat5_rng r = fat5_rng_init(12);
    int32_t *tok = (int32_t *)malloc((size_t)lens[2] * 4), lab[16], ecu[2], dcu[2];
    int li, pi, i, rc = 0;
    if (!tok) return 1;
    for (li = 0; li < lens[2]; li++) tok[li] = (int32_t)fat5_rng_below(&r, 32000) + 2;
    for (i = 0; i < Ld; i++) lab[i] = (int32_t)fat5_rng_below(&r, 32000) + 2;
    for (pi = 0; pi < 3; pi++)
        for (li = 0; li < 3; li++) {
            fat5_model_config cfg;
            fat5_model *m = NULL;
            fat5_attention a;
            fat5_batch b;
            fat5_forward_result res;
            size_t free0 = 0, free1 = 0, total = 0;
            int reps = lens[li] > 16384 ? 1 : 2;
            double t0, t = 0;
            if (pi == 0 && li > 0) continue;  // full attention: 16k only (see above)
            memset(&b, 0, sizeof b);
            ecu[0] = dcu[0] = 0;
            ecu[1] = (int32_t)lens[li];
            dcu[1] = (int32_t)Ld;
            b.n_seq = 1;
            b.n_enc_tokens = lens[li];
            b.n_dec_tokens = Ld;
            b.enc_tokens = tok;
            b.enc_cu_seqlens = ecu;
            b.labels = lab;
            b.dec_cu_seqlens = dcu;
            fat5_internal_mem_info(ctx, &free0, &total);
            if (fat5_model_config_from_json(ctx, cfg_json, strlen(cfg_json), &cfg) ||
                fat5_model_create(ctx, &cfg, 1, &m) || fat5_attention_parse(ctx, patterns[pi], &a) ||
                fat5_model_set_attention(m, &a) || fat5_model_reserve(m, 1, lens[li], Ld) ||
                fat5_model_zero_grad(m) || fat5_model_forward(m, &b, NULL, &res) || fat5_model_backward(m, 1.0f)) {
                rc |= bench_fail(ctx, "long-input training step");
                fat5_model_destroy(m);
                break;
            }
            fat5_internal_mem_info(ctx, &free1, &total);
            for (i = 0; i < reps; i++) {
                t0 = bench_now();
                if (fat5_model_zero_grad(m) || fat5_model_forward(m, &b, NULL, &res) || fat5_model_backward(m, 1.0f) ||
                    fat5_internal_sync(ctx)) {
                    rc |= bench_fail(ctx, "long-input training step");
                    break;
                }
                t += bench_now() - t0;
            }
            printf("{\"bench\": \"long\", \"model\": \"t5-base shape\", \"dtype\": \"%s\", "
                   "\"pass\": \"encoder forward + backward (1-layer decoder of 16 tokens)\", \"attention\": \"%s\", "
                   "\"tokens\": %lld, \"ms\": %.1f, \"tokens_per_s\": %.0f, \"device_bytes\": %zu}\n",
                   fat5_internal_act_size(ctx) == 2 ? "bf16" : "fp32", patterns[pi], (long long)lens[li], t / reps * 1e3,
                   (double)lens[li] * reps / t, free0 - free1);
            fflush(stdout);
            fat5_model_destroy(m);
        }
    free(tok);
    return rc;
}

static int step_usage(void) {
    fprintf(stderr, "usage: bench step [--device gpu|cpu] [--dtype bf16|fp32] [--config CONFIG.json] [--batch 16] "
                    "[--enc-len 1024] [--dec-len 256] [--steps 5] [--optim adamwscale|adafactor] "
                    "[--no-profile]\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "all";
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    step_opts so;
    int rc = 0, i;
    if (strcmp(what, "attn") && strcmp(what, "step") && strcmp(what, "ul2") && strcmp(what, "generate") &&
        strcmp(what, "engine") && strcmp(what, "long") && strcmp(what, "decode") && strcmp(what, "all")) {
        fprintf(stderr, "usage: bench [attn|step|ul2|generate|engine|decode|long|all]  (bench step --help: its options)\n");
        return 2;
    }
    memset(&so, 0, sizeof so);
    so.B = 16, so.Le = 1024, so.Ld = 256, so.reps = 5, so.profile = 1;
    for (i = 2; i < argc; i++) {  // bench step's options
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(what, "step")) return step_usage();
        if (!strcmp(a, "--no-profile")) {
            so.profile = 0;
            continue;
        }
        if (!v) return step_usage();
        i++;
        if (!strcmp(a, "--device") && (!strcmp(v, "cpu") || !strcmp(v, "gpu"))) so.device_cpu = !strcmp(v, "cpu");
        else if (!strcmp(a, "--dtype") && (!strcmp(v, "fp32") || !strcmp(v, "bf16"))) so.fp32 = !strcmp(v, "fp32");
        else if (!strcmp(a, "--config")) so.config = v;
        else if (!strcmp(a, "--batch") && atoi(v) > 0) so.B = atoi(v);
        else if (!strcmp(a, "--enc-len") && atoi(v) > 0) so.Le = atoi(v);
        else if (!strcmp(a, "--dec-len") && atoi(v) > 0) so.Ld = atoi(v);
        else if (!strcmp(a, "--steps") && atoi(v) > 0) so.reps = atoi(v);
        else if (!strcmp(a, "--optim") && (!strcmp(v, "adamwscale") || !strcmp(v, "adafactor")))
            so.adafactor = !strcmp(v, "adafactor");
        else return step_usage();
    }
    if (!strcmp(what, "ul2") || !strcmp(what, "all")) rc |= bench_ul2();   // CPU only
    if (!strcmp(what, "ul2")) return rc;
    if (!strcmp(what, "generate")) return bench_generate();
    if (!strcmp(what, "engine")) return bench_engine();
    if (!strcmp(what, "decode")) return bench_decode();
    cc.device = so.device_cpu ? FAT5_DEVICE_CPU : FAT5_DEVICE_GPU;
    cc.dtype = so.fp32 || so.device_cpu ? FAT5_DTYPE_FP32 : FAT5_DTYPE_BF16;
    so.fp32 = cc.dtype == FAT5_DTYPE_FP32;
    if (fat5_ctx_create(&cc, &ctx, bench_why, sizeof bench_why) != FAT5_OK) {
        fprintf(stderr, "bench: %s\n", bench_why[0] ? bench_why : "out of memory");
        fat5_ctx_destroy(ctx);
        return 1;
    }
    if (!strcmp(what, "attn") || !strcmp(what, "all")) rc |= bench_attn(ctx);
    if (!strcmp(what, "step") || !strcmp(what, "all")) rc |= bench_step(ctx, &so);
    if (!strcmp(what, "long") || !strcmp(what, "all")) rc |= bench_long(ctx);
    if (!strcmp(what, "long") || !strcmp(what, "all")) rc |= bench_long_train(ctx);
    fat5_ctx_destroy(ctx);
    if (!strcmp(what, "all")) rc |= bench_generate();   // its own contexts: bf16 and fp32
    if (!strcmp(what, "all")) rc |= bench_decode();
    return rc;
}
