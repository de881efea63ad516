// dist_check — checks the sums across ranks that data parallel training uses, on N ranks forked by
// fat5_launch: NCCL between GPUs (--gpus N, rank r on GPU r), or shared memory between CPU
// processes (--ranks N).
//     cc -std=c99 -O2 -o dev/dist_check dev/dist_check.c -lm -ldl -lpthread
//     dev/dist_check --ranks 3                     the sums, bit for bit against the ranks' sum
//     dev/dist_check --gpus 2 --kill 1             rank 1 dies mid-sum: every rank must stop,
//                                                    naming it, within the timeout
//     dev/dist_check --gpus 2 --kill 1 --at join   rank 1 dies before joining: the others must
//                                                    stop by themselves (the launcher waits 30 s)
//     dev/dist_check --ranks 2 --hang 1 --timeout 2  rank 1 stops answering: the others time out
// Each rank fills its buffers from its rank, sums them (fp32 over several transport chunks, fp64,
// and the gradient buckets fed by decreasing watermarks as the backward does), and compares every
// element with the sum it computes itself, adding the ranks' values in rank order: equal bits for
// two ranks (a + b is one rounding in any order) and on the CPU (which adds in rank order), a few
// ulps for NCCL with more ranks. Prints one line per rank and check; exits 0 when every rank passed
// (or, with --kill / --hang, when every rank stopped with an error naming the rank; with --at join,
// within 15 s).
// Beyond the public API it uses the developer interface of fat5_internal.h: buffers on the
// context's backend and the communicator of data parallel training.
#define _POSIX_C_SOURCE 200809L   // raise, sleep, _exit, clock_gettime: before every system header
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "fat5_internal.h"

#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float val32(int rank, size_t i) { return (float)((double)((i * 2654435761u + (size_t)rank * 40503u) % 1000003u) / 997.0 - 500.0) * (rank + 1); }
static double val64(int rank, size_t i) { return ((double)((i * 7919u + (size_t)rank) % 104729u) - 52000.5) / 3.0 * (rank + 1); }

// |a - b| within tol ulps of b (tol 0: the same bits)
static int close32(float a, float b, int tol) {
    if (tol == 0) return memcmp(&a, &b, 4) == 0;
    return fabsf(a - b) <= (float)tol * FLT_EPSILON * fabsf(b) + FLT_MIN;
}

static int fail_at(int rank, const char *what, size_t i, double got, double want) {
    printf("dist_check: rank %d: %s: element %zu is %.9g, expected %.9g\n", rank, what, i, got, want);
    return 1;
}

// One worker: the checks, or the failure it was told to act out. Returns the exit status.
// the library's warnings on stderr (it never prints itself): a rank held inside an NCCL call says
// why it ends its process this way
static void on_log(void *user, fat5_log_level level, const char *msg) {
    (void)user;
    if (level >= FAT5_LOG_WARN) fprintf(stderr, "dist_check: %s\n", msg);
}

static int worker(int rank, int world, const char *rendezvous, int gpu, int kill_rank, int kill_at_join, int hang_rank,
                  double timeout) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    cc.log = on_log;
    fat5_ctx *ctx = NULL;
    fat5_internal_comm *c = NULL;
    size_t slot = fat5_internal_comm_chunk_bytes(), n = slot / 4 * 2 + 1237, nb = 3 * 4096 + 17, i;   // fp32: three chunks
    float *h = NULL, *want = NULL;
    double h64[5], w64[5];
    fat5_internal_addr d = 0, d64 = 0;
    int tol = gpu && world > 2 ? 2 * world : 0, r, bad = 0, watchdog = 0;
    fat5_status st;
    char why[512];
    if (gpu) {   // bf16, as training on GPUs: the same kernel module, compiled once and cached for both
        cc.device = FAT5_DEVICE_GPU;
        cc.device_ordinal = rank;
        cc.dtype = FAT5_DTYPE_BF16;
    }
    if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
        printf("dist_check: rank %d: context: %s\n", rank, why);
        return 2;
    }
    h = (float *)malloc(n * 4);
    want = (float *)malloc(n * 4);
    if (!h || !want || fat5_internal_alloc(ctx, n * 4, &d) || fat5_internal_alloc(ctx, 8 * 8, &d64)) {
        printf("dist_check: rank %d: out of memory\n", rank);
        return 2;
    }
    if (rank == kill_rank && kill_at_join) raise(SIGKILL);
    if ((st = fat5_internal_comm_open(ctx, rank, world, rendezvous, timeout, 4096 * 4 / 1048576.0, &c))) {
        printf("dist_check: rank %d: join: %s\n", rank, fat5_last_error(ctx));
        return 3;
    }
    if (rank == 0) printf("dist_check: %d ranks joined (%s)\n", world, gpu ? "NCCL" : "shared memory");
    // 1. fp32 in place, several chunks; a rank told to fail does so instead
    for (i = 0; i < n; i++) h[i] = val32(rank, i);
    for (i = 0; i < n; i++) {
        float s = val32(0, i);
        for (r = 1; r < world; r++) s += val32(r, i);
        want[i] = s;
    }
    if (rank == kill_rank && !kill_at_join) raise(SIGKILL);
    if (rank == hang_rank) {   // alive and silent until the launcher kills it
        for (;;) sleep(1);
    }
    if ((st = fat5_internal_upload(ctx, d, h, n * 4)) || (st = fat5_internal_comm_sum(c, d, n, 0)) ||
        (st = fat5_internal_comm_wait(c)) || (st = fat5_internal_download(ctx, h, d, n * 4))) {
        printf("dist_check: rank %d: stopped: %s\n", rank, fat5_last_error(ctx));
        fat5_internal_comm_fail(c, rank, fat5_last_error(ctx));
        return 4;
    }
    for (i = 0; i < n && !bad; i++)
        if (!close32(h[i], want[i], tol)) bad = fail_at(rank, "fp32 sum", i, h[i], want[i]);
    // 2. fp64
    for (i = 0; i < 5; i++) {
        h64[i] = val64(rank, i);
        w64[i] = val64(0, i);
        for (r = 1; r < world; r++) w64[i] += val64(r, i);
    }
    if ((st = fat5_internal_upload(ctx, d64, h64, 40)) || (st = fat5_internal_comm_sum(c, d64, 5, 1)) ||
        (st = fat5_internal_comm_wait(c)) || (st = fat5_internal_download(ctx, h64, d64, 40))) {
        printf("dist_check: rank %d: fp64: %s\n", rank, fat5_last_error(ctx));
        return 4;
    }
    for (i = 0; i < 5 && !bad; i++)
        if (tol ? fabs(h64[i] - w64[i]) > 1e-12 * fabs(w64[i]) : memcmp(&h64[i], &w64[i], 8) != 0)
            bad = fail_at(rank, "fp64 sum", i, h64[i], w64[i]);
    // 3. gradient buckets of 4096 floats over nb floats, released by decreasing watermarks that
    // fall inside buckets, on bucket edges and repeat, then the end with 3 doubles: every element
    // summed exactly once (twice would double it)
    {
        static const size_t marks[] = {3 * 4096 + 17, 3 * 4096 + 16, 2 * 4096 + 17, 2 * 4096 + 17, 4096 + 5, 17, 17};
        size_t m;
        for (i = 0; i < nb; i++) h[i] = val32(rank, i + 7);
        for (i = 0; i < 3; i++) h64[i] = val64(rank, i);
        if ((st = fat5_internal_upload(ctx, d, h, nb * 4)) || (st = fat5_internal_upload(ctx, d64, h64, 24)))
            goto stopped;
        fat5_internal_comm_grads_begin(c, d, nb);
        for (m = 0; m < sizeof marks / sizeof marks[0]; m++)
            if ((st = fat5_internal_comm_grads_ready(c, marks[m]))) goto stopped;
        if ((st = fat5_internal_comm_grads_end(c, d64, 3))) goto stopped;
        // with NCCL and a watchdog the host leaves the sums queued (the clock running) for the
        // step's own sync, after which they have landed (the clock stopped)
        if (gpu && fat5_internal_comm_clock(c, &watchdog) == 0 && watchdog) {
            printf("dist_check: rank %d: the host waited for the bucketed sums in grads_end\n", rank);
            bad = 1;
        }
        if ((st = fat5_internal_download(ctx, h, d, nb * 4)) || (st = fat5_internal_download(ctx, h64, d64, 24)) ||
            (st = fat5_internal_comm_grads_landed(c)))
            goto stopped;
        if (gpu && fat5_internal_comm_clock(c, &watchdog) == 1) {
            printf("dist_check: rank %d: the sums' clock still runs after they landed\n", rank);
            bad = 1;
        }
        for (i = 0; i < nb && !bad; i++) {
            float s = val32(0, i + 7);
            for (r = 1; r < world; r++) s += val32(r, i + 7);
            if (!close32(h[i], s, tol)) bad = fail_at(rank, "bucketed sum", i, h[i], s);
        }
        for (i = 0; i < 3 && !bad; i++)
            if (fabs(h64[i] - w64[i]) > 1e-12 * fabs(w64[i])) bad = fail_at(rank, "bucketed extra", i, h64[i], w64[i]);
    }
    // 4. reduce-scatter and all-gather (fp32), each over more than one of the host transport's chunks
    {
        size_t k = slot / 4 / (size_t)world + 333, k2 = slot / 4 + 77, cap = (size_t)world * (k > k2 ? k : k2);
        fat5_internal_addr ds = 0, dr = 0;
        float *hs = (float *)malloc(cap * 4), *hr = (float *)malloc(cap * 4);
        if (!hs || !hr || fat5_internal_alloc(ctx, cap * 4, &ds) || fat5_internal_alloc(ctx, cap * 4, &dr)) {
            printf("dist_check: rank %d: out of memory\n", rank);
            return 2;
        }
        for (i = 0; i < (size_t)world * k; i++) hs[i] = val32(rank, i + 11);
        if ((st = fat5_internal_upload(ctx, ds, hs, (size_t)world * k * 4)) ||
            (st = fat5_internal_comm_reduce_scatter(c, ds, dr, k)) || (st = fat5_internal_comm_wait(c)) ||
            (st = fat5_internal_download(ctx, hr, dr, k * 4)))
            goto stopped;
        for (i = 0; i < k && !bad; i++) {
            size_t at = (size_t)rank * k + i + 11;
            float s = val32(0, at);
            for (r = 1; r < world; r++) s += val32(r, at);
            if (!close32(hr[i], s, tol)) bad = fail_at(rank, "reduce-scatter", i, hr[i], s);
        }
        for (i = 0; i < k2; i++) hs[i] = val32(rank, i + 5);
        if ((st = fat5_internal_upload(ctx, ds, hs, k2 * 4)) || (st = fat5_internal_comm_all_gather(c, ds, dr, k2)) ||
            (st = fat5_internal_comm_wait(c)) || (st = fat5_internal_download(ctx, hr, dr, (size_t)world * k2 * 4)))
            goto stopped;
        for (r = 0; r < world && !bad; r++)   // copies: the same bits on every transport
            for (i = 0; i < k2 && !bad; i++)
                if (!close32(hr[(size_t)r * k2 + i], val32(r, i + 5), 0))
                    bad = fail_at(rank, "all-gather", (size_t)r * k2 + i, hr[(size_t)r * k2 + i], val32(r, i + 5));
        fat5_internal_free(ctx, ds);
        fat5_internal_free(ctx, dr);
        free(hs);
        free(hr);
    }
    printf("dist_check: rank %d: fp32 (%zu, %d chunks), fp64, bucketed sums, reduce-scatter and all-gather %s\n",
           rank, n, (int)((n * 4 + slot - 1) / slot), bad ? "WRONG" : (tol ? "within ulps" : "bit-exact"));
    fat5_internal_comm_close(c);
    fat5_internal_free(ctx, d);
    fat5_internal_free(ctx, d64);
    fat5_ctx_destroy(ctx);
    free(h);
    free(want);
    return bad;
stopped:
    printf("dist_check: rank %d: stopped: %s\n", rank, fat5_last_error(ctx));
    return 4;
}

int main(int argc, char **argv) {
    fat5_ctx_config cc = fat5_ctx_config_default();
    cc.log = on_log;
    fat5_ctx *ctx = NULL;
    fat5_launch_info li;
    int i, n = 2, gpu = 0, kill_rank = -1, hang_rank = -1, at_join = 0;
    double timeout = 30, t0, took;
    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ranks") == 0) n = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--gpus") == 0) n = atoi(argv[i + 1]), gpu = 1;
        else if (strcmp(argv[i], "--kill") == 0) kill_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--hang") == 0) hang_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--timeout") == 0) timeout = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--at") == 0 && (strcmp(argv[i + 1], "join") == 0 || strcmp(argv[i + 1], "sum") == 0))
            at_join = strcmp(argv[i + 1], "join") == 0;
        else break;
    }
    if (i < argc || n < 1 || (at_join && kill_rank < 0)) {
        fprintf(stderr, "usage: %s (--ranks N | --gpus N) [--kill RANK [--at join|sum] | --hang RANK] [--timeout S]\n",
                argv[0]);
        return 2;
    }
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 2;
    t0 = now_s();
    // the launcher's grace before it kills the others: long when they must stop by themselves
    if (fat5_launch(ctx, n, at_join ? 30.0 : 3.0, &li) != FAT5_OK) {
        fprintf(stderr, "dist_check: %s\n", fat5_last_error(ctx));
        return 2;
    }
    if (li.rank >= 0) {
        int rc;
        fat5_ctx_destroy(ctx);
        rc = worker(li.rank, n, li.rendezvous, gpu, kill_rank, at_join, hang_rank, timeout);
        fflush(stdout);
        _exit(rc);
    }
    fat5_ctx_destroy(ctx);
    took = now_s() - t0;
    printf("dist_check: launcher: %s after %.1f s (exit %d)\n", li.failed_rank >= 0 ? li.message : "every rank passed",
           took, li.exit_code);
    if (kill_rank >= 0 || hang_rank >= 0) {   // the failure must be the one acted out, and end the run
        int want = kill_rank >= 0 ? kill_rank : hang_rank;
        if (kill_rank >= 0 && li.failed_rank != kill_rank) return 1;
        if (hang_rank >= 0 && li.failed_rank < 0) return 1;
        if (at_join && took >= 15) {
            printf("dist_check: the others did not stop by themselves within 15 s\n");
            return 1;
        }
        printf("dist_check: rank %d's failure stopped the run\n", want);
        return 0;
    }
    return li.exit_code;
}
