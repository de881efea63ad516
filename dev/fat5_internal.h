// fat5_internal.h — the developer interface: what the benchmarks and checks of dev/ use beyond
// fat5.h's public API. Defined by src/internal_api.c, part of the amalgamation, so a program gets
// it either way it gets the library: linked from build/fat5_impl.o (make), or compiled in by its own
// #define FAT5_IMPLEMENTATION. Include it after fat5.h. Not public API: these names change with the
// library, and user programs (tools/, examples/) never use them.
//
// Users: dev/bench (device memory and synchronisation, FLOPs of a batch, the attention kernels
// alone, the per-kernel profile, the decoder's encoder pass and its step's ops in CUDA graphs)
// and dev/dist_check (buffers on the context's backend and the communicator of data parallel
// training). Functions that need a GPU context return FAT5_ERR_NO_DEVICE without one (always
// with FAT5_NO_CUDA), the message in fat5_last_error.
#ifndef FAT5_INTERNAL_H
#define FAT5_INTERNAL_H

#include "../fat5.h"

#ifdef __cplusplus
extern "C" {
#endif

// The types, once: a program that compiles the implementation itself has them from it already.
#ifndef FAT5__INTERNAL_TYPES
#define FAT5__INTERNAL_TYPES
// A buffer on a context's backend: a device pointer on a GPU context, a host address on the CPU.
typedef unsigned long long fat5_internal_addr;
typedef struct fat5_internal_attn fat5_internal_attn;   // below: the attention kernels alone
typedef struct fat5_internal_comm fat5_internal_comm;   // below: the sums across ranks
typedef struct fat5_internal_prof_entry {               // below: the per-kernel profile
    const char *key;      // "attn_fwd_tc64", "gemm NT 16384x1536x512", "copy", ...
    long long calls;
    double ms;            // summed over the collected calls
} fat5_internal_prof_entry;
#endif

// ---- the context's device ----

// Waits until the work queued on the context's stream has run (CPU: returns at once). bench
// brackets its timings with it.
fat5_status fat5_internal_sync(fat5_ctx *ctx);
// The GPU's free and total memory in bytes (cuMemGetInfo); bench reports the difference around an
// allocation as a model's or decoder's device memory.
fat5_status fat5_internal_mem_info(fat5_ctx *ctx, size_t *free_b, size_t *total_b);
// Bytes of one activation element: 2 on a bf16 GPU context, 4 for fp32 (and on the CPU).
int fat5_internal_act_size(const fat5_ctx *ctx);
// Model FLOPs of a forward over batch b, as the training loop counts them for MFU (a training
// step: 3x this).
double fat5_internal_batch_flops(const fat5_model_config *c, const fat5_batch *b);

// Buffers on the context's backend, and copies between them and host memory (synchronous).
fat5_status fat5_internal_alloc(fat5_ctx *ctx, size_t bytes, fat5_internal_addr *out);
void fat5_internal_free(fat5_ctx *ctx, fat5_internal_addr p);
fat5_status fat5_internal_upload(fat5_ctx *ctx, fat5_internal_addr dst, const void *src, size_t bytes);
fat5_status fat5_internal_download(fat5_ctx *ctx, void *dst, fat5_internal_addr src, size_t bytes);

// ---- the per-kernel profile (GPU) ----

// On: from now every kernel launch, cuBLAS product, copy and fill is timed between two events;
// off: the profile is dropped.
fat5_status fat5_internal_profile(fat5_ctx *ctx, int on);
// Waits for the pending events and adds their times to the profile's entries.
fat5_status fat5_internal_profile_collect(fat5_ctx *ctx);
// The number of entries (0 when the profile is off); with 0 <= i < that number, entry i into
// *out (out may be NULL). key stays valid until the next collect or the profile is turned off.
int fat5_internal_profile_entry(fat5_ctx *ctx, int i, fat5_internal_prof_entry *out);

// ---- the attention kernels alone (GPU) ----
// A set of buffers for T5 attention with relative bias over `tokens` packed tokens: q, k, v and
// the output gradient filled with normal values (0.3, 0.3, 1, 1 scale), a random bias table of
// buckets x heads, and every output and scratch buffer of the forward and the backward.
fat5_status fat5_internal_attn_create(fat5_ctx *ctx, int64_t tokens, int heads, int max_head_dim, int buckets,
                                      int max_distance, uint64_t seed, fat5_internal_attn **out);
void fat5_internal_attn_destroy(fat5_internal_attn *a);   // NULL: no-op
// The shape of the next runs: sequences of seq_len tokens (dividing tokens), head_dim <=
// max_head_dim, causal or bidirectional buckets; tensor_cores (bf16 only) 0 runs the exact FMA
// kernels (as FAT5_ATTN_TC=0), 1 the mma.sync tensor-core ones (as FAT5_ATTN_WG=0), 2 the default:
// the forward on the sm_90a wgmma kernels where they run. The setting stays on the context.
fat5_status fat5_internal_attn_shape(fat5_internal_attn *a, int seq_len, int head_dim, int causal, int tensor_cores);
// Queues one pass (no synchronisation: time it with fat5_internal_sync around).
enum {
    FAT5_INTERNAL_ATTN_FWD = 0,          // the forward (output and log-sum-exp)
    FAT5_INTERNAL_ATTN_BWD = 1,          // the whole backward: delta, dq with the bias-table gradient, dk/dv
    FAT5_INTERNAL_ATTN_DQ = 2,           // dq with the bias-table gradient alone
    FAT5_INTERNAL_ATTN_DQ_NO_DBIAS = 3,  // dq without it (the difference: what the bias gradient costs)
    FAT5_INTERNAL_ATTN_DKV = 4           // dk / dv alone
};
fat5_status fat5_internal_attn_run(fat5_internal_attn *a, int pass);

// ---- the decoder ----

// The decoder's encoder pass alone (what fat5_decoder_start runs before it resets the cache), into
// the decoder's own buffers; bench times long inputs with it.
fat5_status fat5_internal_decoder_encode(fat5_decoder *d, const int32_t *tokens, const int32_t *cu_seqlens,
                                         int64_t n_seq);
// The ops of a decode step (layer 0's where the step runs one per layer), for entries 0 .. n-1 of
// a started decoder (rows 0 .. n-1, fed tokens 0 .. n-1, cache position 64; max_len >= 65).
enum {
    FAT5_INTERNAL_DEC_EMBED = 0,      // embedding
    FAT5_INTERNAL_DEC_QKV = 1,        // norm_mm: q, and k / v into the cache
    FAT5_INTERNAL_DEC_SELF_ATTN = 2,  // attn_decode, causal
    FAT5_INTERNAL_DEC_O = 3,          // mm o + h (the cross-attention's co the same shape)
    FAT5_INTERNAL_DEC_CROSS_Q = 4,    // norm_mm: the cross-attention's q
    FAT5_INTERNAL_DEC_CROSS_ATTN = 5, // attn_decode over the encoder's keys
    FAT5_INTERNAL_DEC_FF_IN = 6,      // norm_mm wi0 | wi1 (gated)
    FAT5_INTERNAL_DEC_FF_OUT = 7,     // mm wo + h
    FAT5_INTERNAL_DEC_FINAL_NORM = 8, // the final rmsnorm
    FAT5_INTERNAL_DEC_LM_HEAD = 9,    // mm lm_head
    FAT5_INTERNAL_DEC_STEP = 10       // the whole step (cache position 40: it advances)
};
// Captures 20 copies of op (the whole step: one) into a CUDA graph, replays it (10 times; the
// step 32) after a warm-up and writes the mean microseconds of one op to *us; read 1: each replay
// followed by a 4-byte download and a synchronisation, as fat5_generate does between steps.
fat5_status fat5_internal_decode_time(fat5_decoder *d, int op, int64_t n, int read, double *us);

// ---- the sums across ranks (data parallel training) ----
// The communicator of a rank: NCCL on a GPU context, shared memory between CPU processes, joined
// through a rendezvous (fat5_launch_info.rendezvous), with the watchdog's timeout_s, and gradient
// buckets of bucket_mb MiB. Opening is collective: every rank opens.
fat5_status fat5_internal_comm_open(fat5_ctx *ctx, int rank, int world, const char *rendezvous, double timeout_s,
                                    double bucket_mb, fat5_internal_comm **out);
void fat5_internal_comm_close(fat5_internal_comm *c);   // NULL: no-op
// Bytes of one rank's slice of a host sum's transport chunk (sums larger than this run in chunks).
size_t fat5_internal_comm_chunk_bytes(void);
// Marks the run failed by rank with msg on the shared board (the others stop, naming the rank).
void fat5_internal_comm_fail(fat5_internal_comm *c, int rank, const char *msg);
// Queues the in-place sum over the ranks of n floats (f64 1: doubles) at p; wait: until it landed.
fat5_status fat5_internal_comm_sum(fat5_internal_comm *c, fat5_internal_addr p, size_t n, int f64);
fat5_status fat5_internal_comm_wait(fat5_internal_comm *c);
// send [world * n] fp32 -> recv [n]: the sum over the ranks of their send's chunk [rank n, (rank + 1) n)
fat5_status fat5_internal_comm_reduce_scatter(fat5_internal_comm *c, fat5_internal_addr send,
                                              fat5_internal_addr recv, size_t n);
// send [n] fp32 -> recv [world * n]: every rank's send in rank order
fat5_status fat5_internal_comm_all_gather(fat5_internal_comm *c, fat5_internal_addr send, fat5_internal_addr recv,
                                          size_t n);
// The gradient buckets as the backward feeds them: begin over n floats at grads; ready(lo): the
// elements from lo up are final (decreasing watermarks; whole buckets above go out); end: the rest,
// and n_extra doubles at extra summed with them; landed: wait until every sum has landed.
void fat5_internal_comm_grads_begin(fat5_internal_comm *c, fat5_internal_addr grads, size_t n);
fat5_status fat5_internal_comm_grads_ready(fat5_internal_comm *c, size_t lo);
fat5_status fat5_internal_comm_grads_end(fat5_internal_comm *c, fat5_internal_addr extra, size_t n_extra);
fat5_status fat5_internal_comm_grads_landed(fat5_internal_comm *c);
// The clock of the queued NCCL sums: 1 while it runs (sums queued, not known to have landed), 0
// stopped, -1 without a GPU path (FAT5_NO_CUDA). *watchdog: 1 when the rank's watchdog thread runs.
int fat5_internal_comm_clock(const fat5_internal_comm *c, int *watchdog);

#ifdef __cplusplus
}
#endif
#endif  // FAT5_INTERNAL_H
