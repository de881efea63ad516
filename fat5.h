// fat5.h — train and run T5-family encoder-decoder models, in one C header.
//
// Quick start
//     #define FAT5_IMPLEMENTATION      // in exactly one .c file
//     #include "fat5.h"
//     cc app.c -lm -ldl
//
//     fat5_ctx *ctx = NULL;
//     fat5_ctx_config cc = fat5_ctx_config_default();
//     if (fat5_ctx_create(&cc, &ctx) != FAT5_OK) return 1;     // fails only when out of memory
//     fat5_model *m = NULL;
//     if (fat5_model_load(ctx, "path/to/t5-small", &m) != FAT5_OK)
//         fprintf(stderr, "%s\n", fat5_last_error(ctx));
//
// Models: T5 v1.0 (ReLU, tied embeddings), v1.1 / FLAN-T5 (gated-gelu, untied), gated-silu, mT5,
// UMT5 (a relative-bias table in every layer), ByT5 shapes, any H*d_kv, bucket count and distance.
// Checkpoints are Hugging Face directories: config.json + model.safetensors (or a sharded
// model.safetensors.index.json), bf16 / fp16 / fp32 tensors.
//
// Batches are packed: the tokens of all sequences are concatenated and described by cumulative
// offsets (cu_seqlens), for the encoder and the decoder separately; no token attends across a
// sequence boundary and relative positions restart at 0 in every sequence.
//
// Options (define before including):
//     FAT5_STATIC              make every function static to the including translation unit
//     FAT5_NO_CUDA             compile the GPU path out (CPU reference only)
//     FAT5_MALLOC/REALLOC/FREE replace the C allocator (all three or none)
//     FAT5_ASSERT(x)           internal invariants (default: assert)
//
// Errors: every fallible call returns a fat5_status (FAT5_OK = 0, negative on error); the message,
// naming the tensor or field and what was expected, is read with fat5_last_error(ctx). The library
// never prints and never exits.
//
// License: MIT, at the end of this file.

#ifndef FAT5_H
#define FAT5_H

// The implementation uses POSIX (fsync, mkstemp, dlopen): include fat5.h before any system header
// in the file that defines FAT5_IMPLEMENTATION, or define _POSIX_C_SOURCE 200809L yourself.
#if defined(FAT5_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE) && \
    !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>

#define FAT5_VERSION_MAJOR 0
#define FAT5_VERSION_MINOR 1
#define FAT5_VERSION_PATCH 0
#define FAT5_VERSION_STRING "0.1.0"

#ifdef FAT5_STATIC
#define FAT5_API static
#else
#define FAT5_API extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------------
// status codes
typedef enum fat5_status {
    FAT5_OK = 0,
    FAT5_ERR_INVALID_ARG = -1,   // a bad argument or batch (message names it)
    FAT5_ERR_OUT_OF_MEMORY = -2,
    FAT5_ERR_IO = -3,            // open/read/write/rename failed
    FAT5_ERR_FORMAT = -4,        // a malformed file: safetensors, JSON, config
    FAT5_ERR_UNSUPPORTED = -5,   // well-formed but not something fat5 runs
    FAT5_ERR_NO_DEVICE = -6,     // no CUDA driver, library or device
    FAT5_ERR_CUDA = -7,
    FAT5_ERR_NVRTC = -8,
    FAT5_ERR_CUBLAS = -9,
    FAT5_ERR_STATE = -10         // a call out of order (backward before forward, ...)
} fat5_status;

FAT5_API const char *fat5_status_string(fat5_status s);
FAT5_API const char *fat5_version(void);

// ---------------------------------------------------------------------------------------------
// context: allocator, logging, device choice; owns the last error message
typedef enum fat5_device { FAT5_DEVICE_CPU = 0, FAT5_DEVICE_GPU = 1 } fat5_device;
typedef enum fat5_dtype {
    FAT5_DTYPE_FP32 = 0,  // everything in fp32 (CPU reference; GPU parity mode)
    FAT5_DTYPE_BF16 = 1   // GPU mixed precision: bf16 activations and matmul inputs, fp32 master weights
} fat5_dtype;
typedef enum fat5_log_level { FAT5_LOG_DEBUG = 0, FAT5_LOG_INFO = 1, FAT5_LOG_WARN = 2 } fat5_log_level;

typedef struct fat5_ctx fat5_ctx;

typedef struct fat5_ctx_config {
    fat5_device device;        // FAT5_DEVICE_CPU (default) or FAT5_DEVICE_GPU
    int device_ordinal;        // which GPU (default 0)
    fat5_dtype dtype;          // compute precision on the GPU; the CPU always computes in fp32
    const char *cache_dir;     // compiled-kernel cache; NULL = $FAT5_CACHE_DIR or ~/.cache/fat5, "" = off
    void *(*alloc)(void *user, size_t size);               // host allocator hooks (all or none)
    void *(*realloc)(void *user, void *ptr, size_t size);
    void (*free)(void *user, void *ptr);
    void *alloc_user;
    void (*log)(void *user, fat5_log_level level, const char *msg);  // optional
    void *log_user;
} fat5_ctx_config;

FAT5_API fat5_ctx_config fat5_ctx_config_default(void);
// Creates a context. On the GPU it also opens the device; on failure *out still holds a context
// whose fat5_last_error says why (destroy it), except for FAT5_ERR_OUT_OF_MEMORY (*out = NULL).
FAT5_API fat5_status fat5_ctx_create(const fat5_ctx_config *cfg, fat5_ctx **out);
FAT5_API void fat5_ctx_destroy(fat5_ctx *ctx);
FAT5_API const char *fat5_last_error(const fat5_ctx *ctx);
FAT5_API fat5_device fat5_ctx_device(const fat5_ctx *ctx);

// ---------------------------------------------------------------------------------------------
// RNG: Philox4x32-10, counter based; the whole state is (seed, counter) and can be saved.
typedef struct fat5_rng { uint64_t seed; uint64_t counter; } fat5_rng;
FAT5_API fat5_rng fat5_rng_init(uint64_t seed);
FAT5_API uint32_t fat5_rng_u32(fat5_rng *r);
FAT5_API uint64_t fat5_rng_u64(fat5_rng *r);
FAT5_API double fat5_rng_uniform(fat5_rng *r);            // [0, 1), 53 random bits
FAT5_API uint64_t fat5_rng_below(fat5_rng *r, uint64_t n); // uniform in [0, n), unbiased; n > 0
FAT5_API double fat5_rng_normal(fat5_rng *r);             // standard normal
// "seed:counter" in decimal; parse returns FAT5_ERR_FORMAT on anything else
FAT5_API void fat5_rng_to_string(const fat5_rng *r, char buf[48]);
FAT5_API fat5_status fat5_rng_from_string(const char *s, fat5_rng *out);

// ---------------------------------------------------------------------------------------------
// model configuration: every Hugging Face T5 field that changes the math
typedef enum fat5_act {
    FAT5_ACT_RELU = 0,
    FAT5_ACT_GELU = 1,       // exact erf GELU ("gelu")
    FAT5_ACT_GELU_TANH = 2,  // tanh approximation ("gelu_new"; what "gated-gelu" means)
    FAT5_ACT_SILU = 3
} fat5_act;

typedef struct fat5_model_config {
    int64_t vocab_size;            // 32128
    int64_t d_model;               // 512
    int64_t d_kv;                  // 64 (per head; H*d_kv may differ from d_model)
    int64_t d_ff;                  // 2048
    int64_t num_layers;            // encoder layers, 6
    int64_t num_decoder_layers;    // 6 (ByT5: 12 encoder / 4 decoder)
    int64_t num_heads;             // 8
    int64_t rel_buckets;           // relative_attention_num_buckets, 32
    int64_t rel_max_distance;      // relative_attention_max_distance, 128
    double layer_norm_eps;         // 1e-6
    fat5_act act;                  // FFN activation
    int gated;                     // 1: wo(act(wi_0 x) * wi_1 x); 0: wo(act(wi x))
    int tie_word_embeddings;       // 1: lm_head is shared.weight
    int scale_decoder_outputs;     // 1: multiply the decoder output by d_model^-0.5 before lm_head
    int bias_every_layer;          // 1 (UMT5): each self-attention owns a bias table; 0: block 0 only
    int64_t pad_token_id;          // 0
    int64_t eos_token_id;          // 1
    int64_t decoder_start_token_id;// 0
    double dropout_rate;           // kept for the saved config; fat5 trains without dropout
    char model_type[16];           // "t5", "mt5" or "umt5" (written back to config.json)
} fat5_model_config;

// T5 v1.0 t5-small defaults, as Hugging Face's T5Config
FAT5_API fat5_model_config fat5_model_config_default(void);
// Parses a Hugging Face config.json text. Unknown keys that could change the architecture, values
// out of range and contradictions are errors (FAT5_ERR_FORMAT / FAT5_ERR_UNSUPPORTED).
FAT5_API fat5_status fat5_model_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                 fat5_model_config *out);
FAT5_API fat5_status fat5_model_config_validate(fat5_ctx *ctx, const fat5_model_config *cfg);
// Writes config.json text; *out is allocated with the ctx allocator, free with fat5_free.
FAT5_API fat5_status fat5_model_config_to_json(fat5_ctx *ctx, const fat5_model_config *cfg,
                                               char **out, size_t *out_len);
FAT5_API void fat5_free(fat5_ctx *ctx, void *p);

// ---------------------------------------------------------------------------------------------
// model
typedef struct fat5_model fat5_model;

// A new model with Hugging Face's T5 initialisation (lm_head std d_model^-0.5), seeded.
FAT5_API fat5_status fat5_model_create(fat5_ctx *ctx, const fat5_model_config *cfg, uint64_t seed,
                                       fat5_model **out);
// Loads a Hugging Face checkpoint directory, or a single .safetensors file with a config.json
// beside it.
FAT5_API fat5_status fat5_model_load(fat5_ctx *ctx, const char *path, fat5_model **out);
// Writes config.json + model.safetensors (fp32, Hugging Face names) into dir, each atomically.
FAT5_API fat5_status fat5_model_save(fat5_model *m, const char *dir);
FAT5_API void fat5_model_destroy(fat5_model *m);
FAT5_API const fat5_model_config *fat5_model_get_config(const fat5_model *m);

// Parameters by Hugging Face name ("encoder.block.0.layer.0.SelfAttention.q.weight").
typedef struct fat5_tensor_info {
    const char *name;
    int ndim;
    int64_t shape[2];
    int64_t numel;
} fat5_tensor_info;
FAT5_API int64_t fat5_model_num_params(const fat5_model *m);      // elements in all tensors
FAT5_API int fat5_model_num_tensors(const fat5_model *m);
FAT5_API fat5_status fat5_model_tensor_info(const fat5_model *m, int index, fat5_tensor_info *out);
FAT5_API int fat5_model_find_tensor(const fat5_model *m, const char *name);  // -1 if absent
// Copy a parameter, or its accumulated gradient, to / from a caller buffer of exactly numel floats.
FAT5_API fat5_status fat5_model_get_param(fat5_model *m, const char *name, float *dst, int64_t n);
FAT5_API fat5_status fat5_model_set_param(fat5_model *m, const char *name, const float *src, int64_t n);
FAT5_API fat5_status fat5_model_get_grad(fat5_model *m, const char *name, float *dst, int64_t n);

// A packed batch. Sequence s of the encoder is enc_tokens[enc_cu_seqlens[s] .. enc_cu_seqlens[s+1]),
// and likewise for the decoder. labels (the targets, -100 = ignored) define the decoder tokens;
// dec_tokens may be NULL, in which case the decoder input of each sequence is labels shifted right
// with decoder_start_token_id in front and -100 replaced by pad_token_id (Hugging Face's
// shift_right). labels may be NULL for a forward without loss (dec_tokens then required).
typedef struct fat5_batch {
    int64_t n_seq;
    const int32_t *enc_tokens;        // [enc_cu_seqlens[n_seq]]
    const int32_t *enc_cu_seqlens;    // [n_seq + 1], enc_cu_seqlens[0] = 0, non-decreasing
    const int32_t *dec_tokens;        // [dec_cu_seqlens[n_seq]] or NULL
    const int32_t *labels;            // [dec_cu_seqlens[n_seq]] or NULL
    const int32_t *dec_cu_seqlens;    // [n_seq + 1]
} fat5_batch;

// Builds a packed batch from JSON rows: {"inputs": [[ids]...], "labels": [[ids]...]} and optionally
// "decoder_inputs": [[ids]...]; rows may have any lengths (labels may hold -100). The arrays are
// allocated with the ctx allocator; release them with fat5_batch_free.
FAT5_API fat5_status fat5_batch_from_json(fat5_ctx *ctx, const char *json, size_t len, fat5_batch *out);
FAT5_API void fat5_batch_free(fat5_ctx *ctx, fat5_batch *b);

typedef struct fat5_loss_config {
    double z_loss;            // adds z * mean(logsumexp^2) over counted tokens (0 = off)
    double label_smoothing;   // torch's convention: (1-s) * CE + s * mean over the vocabulary
} fat5_loss_config;
FAT5_API fat5_loss_config fat5_loss_config_default(void);

typedef struct fat5_forward_result {
    double loss;              // mean over counted tokens of CE (+ z-loss term)
    double ce;                // the cross-entropy part alone (mean, smoothing included)
    int64_t n_tokens;         // labels that are not -100
} fat5_forward_result;

// Sizes the activation workspace for batches of up to this many sequences and tokens. forward
// grows it when a batch is larger; call it once up front to fix the memory.
FAT5_API fat5_status fat5_model_reserve(fat5_model *m, int64_t n_seq, int64_t enc_tokens,
                                        int64_t dec_tokens);
// Runs encoder, decoder, lm_head and (when labels are given) the loss. Keeps what backward needs.
FAT5_API fat5_status fat5_model_forward(fat5_model *m, const fat5_batch *b,
                                        const fat5_loss_config *loss, fat5_forward_result *out);
// Accumulates d(loss)/d(parameter) of the last forward into the gradients (scaled by grad_scale,
// e.g. 1/accumulation_steps).
FAT5_API fat5_status fat5_model_backward(fat5_model *m, float grad_scale);
FAT5_API fat5_status fat5_model_zero_grad(fat5_model *m);
// Logits of the last forward, [dec_tokens, vocab] row-major; n must equal dec_tokens * vocab.
FAT5_API fat5_status fat5_model_get_logits(fat5_model *m, float *dst, int64_t n);

// ---------------------------------------------------------------------------------------------
// safetensors files (hostile-input reader; used by the model loader and by tools/fat5_inspect)
typedef enum fat5_st_dtype {
    FAT5_ST_BOOL, FAT5_ST_U8, FAT5_ST_I8, FAT5_ST_U16, FAT5_ST_I16, FAT5_ST_F16, FAT5_ST_BF16,
    FAT5_ST_U32, FAT5_ST_I32, FAT5_ST_F32, FAT5_ST_U64, FAT5_ST_I64, FAT5_ST_F64,
    FAT5_ST_F8_E4M3, FAT5_ST_F8_E5M2, FAT5_ST_DTYPE_COUNT
} fat5_st_dtype;

#define FAT5_ST_MAX_DIMS 8
typedef struct fat5_st_tensor {
    char *name;
    fat5_st_dtype dtype;
    int ndim;
    int64_t shape[FAT5_ST_MAX_DIMS];
    uint64_t begin, end;      // byte range inside the data region
} fat5_st_tensor;

typedef struct fat5_st_file fat5_st_file;
FAT5_API fat5_status fat5_st_open(fat5_ctx *ctx, const char *path, fat5_st_file **out);
FAT5_API void fat5_st_close(fat5_st_file *f);
FAT5_API int fat5_st_count(const fat5_st_file *f);
FAT5_API const fat5_st_tensor *fat5_st_get(const fat5_st_file *f, int i);
FAT5_API int fat5_st_find(const fat5_st_file *f, const char *name);   // -1 if absent
FAT5_API int fat5_st_metadata_count(const fat5_st_file *f);
FAT5_API void fat5_st_metadata_get(const fat5_st_file *f, int i, const char **key, const char **value);
FAT5_API const char *fat5_st_metadata_find(const fat5_st_file *f, const char *key);  // NULL if absent
FAT5_API const char *fat5_st_dtype_name(fat5_st_dtype t);
FAT5_API size_t fat5_st_dtype_size(fat5_st_dtype t);
// Reads tensor i converted to fp32 (from F32, F16 or BF16; others: FAT5_ERR_UNSUPPORTED);
// n must equal the tensor's element count.
FAT5_API fat5_status fat5_st_read_f32(fat5_st_file *f, int i, float *dst, int64_t n);

// Writes a safetensors file of fp32 tensors atomically (temp file in the same directory, flushed,
// then renamed). Tensors are written in name order; metadata is string -> string.
typedef struct fat5_st_write_tensor {
    const char *name;
    int ndim;
    int64_t shape[FAT5_ST_MAX_DIMS];
    const float *data;
} fat5_st_write_tensor;
FAT5_API fat5_status fat5_st_write(fat5_ctx *ctx, const char *path, const fat5_st_write_tensor *t,
                                   int n_tensors, const char *const *meta_kv, int n_meta);

// Atomically replaces path with the given bytes (temp file + flush + rename).
FAT5_API fat5_status fat5_write_file_atomic(fat5_ctx *ctx, const char *path, const void *data,
                                            size_t size);

#ifdef __cplusplus
}
#endif
#endif // FAT5_H

// =============================================================================================
// implementation
// =============================================================================================
#if (defined(FAT5_IMPLEMENTATION) || defined(__INTELLISENSE__)) && !defined(FAT5__IMPL_DONE)
#define FAT5__IMPL_DONE

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <errno.h>
#include <limits.h>
#ifndef _WIN32
#include <unistd.h>
#include <sys/stat.h>
#endif

#if defined(FAT5_MALLOC) && defined(FAT5_REALLOC) && defined(FAT5_FREE)
#elif !defined(FAT5_MALLOC) && !defined(FAT5_REALLOC) && !defined(FAT5_FREE)
#define FAT5_MALLOC(sz) malloc(sz)
#define FAT5_REALLOC(p, sz) realloc(p, sz)
#define FAT5_FREE(p) free(p)
#else
#error "fat5.h: define all of FAT5_MALLOC, FAT5_REALLOC and FAT5_FREE, or none"
#endif
#ifndef FAT5_ASSERT
#include <assert.h>
#define FAT5_ASSERT(x) assert(x)
#endif

#ifdef __cplusplus
#define FAT5__CAST(T, x) static_cast<T>(x)
#else
#define FAT5__CAST(T, x) ((T)(x))
#endif
#if defined(__GNUC__) || defined(__clang__)
#define FAT5__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define FAT5__UNUSED __attribute__((unused))  // helpers some configurations do not call
#else
#define FAT5__PRINTF(a, b)
#define FAT5__UNUSED
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------------
// base: status, context, errors, allocation, checked size math

#define FAT5__ERRMSG_CAP 4096

struct fat5_ctx {
    fat5_ctx_config cfg;
    char err[FAT5__ERRMSG_CAP];
    struct fat5__gpu *gpu;    // NULL on the CPU
};

FAT5_API const char *fat5_status_string(fat5_status s) {
    switch (s) {
    case FAT5_OK: return "FAT5_OK";
    case FAT5_ERR_INVALID_ARG: return "FAT5_ERR_INVALID_ARG";
    case FAT5_ERR_OUT_OF_MEMORY: return "FAT5_ERR_OUT_OF_MEMORY";
    case FAT5_ERR_IO: return "FAT5_ERR_IO";
    case FAT5_ERR_FORMAT: return "FAT5_ERR_FORMAT";
    case FAT5_ERR_UNSUPPORTED: return "FAT5_ERR_UNSUPPORTED";
    case FAT5_ERR_NO_DEVICE: return "FAT5_ERR_NO_DEVICE";
    case FAT5_ERR_CUDA: return "FAT5_ERR_CUDA";
    case FAT5_ERR_NVRTC: return "FAT5_ERR_NVRTC";
    case FAT5_ERR_CUBLAS: return "FAT5_ERR_CUBLAS";
    case FAT5_ERR_STATE: return "FAT5_ERR_STATE";
    }
    return "FAT5_ERR_UNKNOWN";
}

FAT5_API const char *fat5_version(void) { return FAT5_VERSION_STRING; }

// Records a message in the context and returns the status, so errors read
//     return fat5__err(ctx, FAT5_ERR_FORMAT, "tensor %s: ...", name);
static FAT5__PRINTF(3, 4) fat5_status fat5__err(fat5_ctx *ctx, fat5_status s, const char *fmt, ...) {
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
        va_end(ap);
    }
    return s;
}

// Prefixes the current message with more context ("loading X: " + old message).
static FAT5__PRINTF(3, 4) fat5_status fat5__err_prefix(fat5_ctx *ctx, fat5_status s, const char *fmt, ...) {
    if (ctx) {
        char head[512], old[FAT5__ERRMSG_CAP];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(head, sizeof head, fmt, ap);
        va_end(ap);
        size_t hl = strlen(head), ol;
        memcpy(old, ctx->err, sizeof old);
        ol = strlen(old);
        if (hl > sizeof ctx->err - 1) hl = sizeof ctx->err - 1;
        if (ol > sizeof ctx->err - 1 - hl) ol = sizeof ctx->err - 1 - hl;
        memcpy(ctx->err, head, hl);
        memcpy(ctx->err + hl, old, ol);
        ctx->err[hl + ol] = 0;
    }
    return s;
}

static FAT5__UNUSED FAT5__PRINTF(3, 4) void fat5__log(fat5_ctx *ctx, fat5_log_level lvl, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    if (!ctx || !ctx->cfg.log) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->cfg.log(ctx->cfg.log_user, lvl, msg);
}

static void *fat5__malloc(fat5_ctx *ctx, size_t n) {
    if (n == 0) n = 1;
    if (ctx && ctx->cfg.alloc) return ctx->cfg.alloc(ctx->cfg.alloc_user, n);
    return FAT5_MALLOC(n);
}
static void *fat5__realloc(fat5_ctx *ctx, void *p, size_t n) {
    if (n == 0) n = 1;
    if (ctx && ctx->cfg.realloc) return ctx->cfg.realloc(ctx->cfg.alloc_user, p, n);
    return FAT5_REALLOC(p, n);
}
static void fat5__free(fat5_ctx *ctx, void *p) {
    if (!p) return;
    if (ctx && ctx->cfg.free) ctx->cfg.free(ctx->cfg.alloc_user, p);
    else FAT5_FREE(p);
}
FAT5_API void fat5_free(fat5_ctx *ctx, void *p) { fat5__free(ctx, p); }

// checked size arithmetic: return 1 when the result fits
static int fat5__mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}
static int fat5__add_ok(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return 0;
    *out = a + b;
    return 1;
}
// a * b * sizeof-element with overflow check; 0 on overflow
static FAT5__UNUSED int fat5__mul3_ok(size_t a, size_t b, size_t c, size_t *out) {
    size_t t;
    return fat5__mul_ok(a, b, &t) && fat5__mul_ok(t, c, out);
}

// zeroed array of count elements of size bytes, NULL on overflow or out of memory
static void *fat5__calloc(fat5_ctx *ctx, size_t count, size_t size) {
    size_t n;
    void *p;
    if (!fat5__mul_ok(count, size, &n)) return NULL;
    p = fat5__malloc(ctx, n);
    if (p) memset(p, 0, n);
    return p;
}

static char *fat5__strdup(fat5_ctx *ctx, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = FAT5__CAST(char *, fat5__malloc(ctx, n));
    if (p) memcpy(p, s, n);
    return p;
}

FAT5_API fat5_ctx_config fat5_ctx_config_default(void) {
    fat5_ctx_config c;
    memset(&c, 0, sizeof c);
    c.device = FAT5_DEVICE_CPU;
    c.dtype = FAT5_DTYPE_FP32;
    return c;
}

static fat5_status fat5__gpu_open(fat5_ctx *ctx);
static void fat5__gpu_close(fat5_ctx *ctx);

FAT5_API fat5_status fat5_ctx_create(const fat5_ctx_config *cfg, fat5_ctx **out) {
    fat5_ctx_config c = cfg ? *cfg : fat5_ctx_config_default();
    fat5_ctx *ctx;
    if (!out) return FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if ((c.alloc != NULL) != (c.free != NULL) || (c.realloc != NULL) != (c.free != NULL))
        return FAT5_ERR_INVALID_ARG;
    ctx = FAT5__CAST(fat5_ctx *, c.alloc ? c.alloc(c.alloc_user, sizeof *ctx) : FAT5_MALLOC(sizeof *ctx));
    if (!ctx) return FAT5_ERR_OUT_OF_MEMORY;
    memset(ctx, 0, sizeof *ctx);
    ctx->cfg = c;
    *out = ctx;
    if (c.device == FAT5_DEVICE_GPU) return fat5__gpu_open(ctx);
    if (c.device != FAT5_DEVICE_CPU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown device %d", (int)c.device);
    return FAT5_OK;
}

FAT5_API void fat5_ctx_destroy(fat5_ctx *ctx) {
    if (!ctx) return;
    fat5__gpu_close(ctx);
    if (ctx->cfg.free) ctx->cfg.free(ctx->cfg.alloc_user, ctx);
    else FAT5_FREE(ctx);
}

FAT5_API const char *fat5_last_error(const fat5_ctx *ctx) { return ctx ? ctx->err : "no context"; }
FAT5_API fat5_device fat5_ctx_device(const fat5_ctx *ctx) { return ctx->cfg.device; }

// ---------------------------------------------------------------------------------------------
// RNG: Philox4x32-10 (Salmon et al., SC'11). Block i of stream `seed` is philox(key = seed,
// counter = i); each block gives four 32-bit words. The state is (seed, counter in words).

static void fat5__philox(uint64_t key64, uint64_t ctr64, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)ctr64, c1 = (uint32_t)(ctr64 >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key64, k1 = (uint32_t)(key64 >> 32);
    int r;
    for (r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

FAT5_API fat5_rng fat5_rng_init(uint64_t seed) {
    fat5_rng r;
    r.seed = seed;
    r.counter = 0;
    return r;
}
FAT5_API uint32_t fat5_rng_u32(fat5_rng *r) {
    uint32_t b[4];
    fat5__philox(r->seed, r->counter >> 2, b);
    return b[r->counter++ & 3];
}
FAT5_API uint64_t fat5_rng_u64(fat5_rng *r) {
    uint64_t hi = fat5_rng_u32(r);
    return (hi << 32) | fat5_rng_u32(r);
}
FAT5_API double fat5_rng_uniform(fat5_rng *r) {
    return (double)(fat5_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}
FAT5_API uint64_t fat5_rng_below(fat5_rng *r, uint64_t n) {
    uint64_t lim, x;
    if (n <= 1) return 0;
    lim = UINT64_MAX - UINT64_MAX % n;  // reject the top partial range
    do x = fat5_rng_u64(r); while (x >= lim);
    return x % n;
}
FAT5_API double fat5_rng_normal(fat5_rng *r) {
    // Box-Muller; one draw per call keeps the state a pure counter
    double u1 = 1.0 - fat5_rng_uniform(r), u2 = fat5_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
FAT5_API void fat5_rng_to_string(const fat5_rng *r, char buf[48]) {
    snprintf(buf, 48, "%llu:%llu", (unsigned long long)r->seed, (unsigned long long)r->counter);
}
static int fat5__parse_u64(const char *s, size_t n, uint64_t *out) {
    uint64_t v = 0;
    size_t i;
    if (n == 0 || n > 20) return 0;
    for (i = 0; i < n; i++) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9') return 0;
        d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (n > 1 && s[0] == '0') return 0;
    *out = v;
    return 1;
}
FAT5_API fat5_status fat5_rng_from_string(const char *s, fat5_rng *out) {
    const char *colon = s ? strchr(s, ':') : NULL;
    fat5_rng r;
    if (!colon || !fat5__parse_u64(s, (size_t)(colon - s), &r.seed) ||
        !fat5__parse_u64(colon + 1, strlen(colon + 1), &r.counter))
        return FAT5_ERR_FORMAT;
    *out = r;
    return FAT5_OK;
}

#include "wip/io.inc.h"  // merged into this file when complete

#include "wip/ops.inc.h"
#include "wip/model.inc.h"
#include "wip/fwd.inc.h"
#include "wip/ckpt.inc.h"

#ifdef FAT5_NO_CUDA
static fat5_status fat5__gpu_open(fat5_ctx *ctx) {
    return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "fat5 was built with FAT5_NO_CUDA: no GPU path");
}
static void fat5__gpu_close(fat5_ctx *ctx) { (void)ctx; }
#else
static fat5_status fat5__gpu_open(fat5_ctx *ctx) {
    return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "the GPU backend is not built yet");
}
static void fat5__gpu_close(fat5_ctx *ctx) { (void)ctx; }
#endif

#ifdef __cplusplus
}
#endif
#endif // FAT5_IMPLEMENTATION

/*
------------------------------------------------------------------------------
MIT License

Copyright (c) 2026 the fat5.h authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
------------------------------------------------------------------------------
*/
