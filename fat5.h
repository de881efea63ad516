// fat5.h — train and run T5-family encoder-decoder models, in one C header.
//
// Quick start
//     #define FAT5_IMPLEMENTATION      // in exactly one .c file
//     #include "fat5.h"
//     cc app.c -lm -ldl -lpthread
//
//     fat5_ctx *ctx = NULL;
//     fat5_ctx_config cc = fat5_ctx_config_default();
//     if (fat5_ctx_create(&cc, &ctx) != FAT5_OK) return 1;     // fails only when out of memory
//     fat5_model *m = NULL;
//     if (fat5_model_load(ctx, "path/to/t5-small", &m) != FAT5_OK)
//         fprintf(stderr, "%s\n", fat5_last_error(ctx));
//
// Models: T5 v1.0 (ReLU, tied embeddings), v1.1 / FLAN-T5 (gated-gelu, untied), gated-silu, mT5,
// UMT5 (a relative-bias table in every layer), ByT5 shapes, any H*d_kv, bucket count and distance;
// FAT5 (model_type flash_t5) with T5 buckets, none, ALiBi, RoPE or FIRE; LongT5 (model_type longt5,
// local and transient-global encoders). Long inputs: any model's encoder runs local, block-global
// or transient-global attention for a run (fat5_model_set_attention). Checkpoints are Hugging Face
// directories: config.json + model.safetensors (or a sharded model.safetensors.index.json), bf16 /
// fp16 / fp32 tensors; flash_t5 directories use FAT5's parameter names.
//
// Tokenizers: fat5_tokenizer_load reads a checkpoint's tokenizer.json or spiece.model and gives the
// ids of Hugging Face tokenizers / sentencepiece (fat5_tokenize, fat5_detokenize); no model needed.
//
// Training: fat5_train_create / fat5_train_step run the whole loop (UL2 batches from token files,
// AdamWScale or AdamW, schedules, evaluation, atomic checkpoints that resume bit-identically);
// examples/train.c is a complete program around them.
//
// Batches are packed: the tokens of all sequences are concatenated and described by cumulative
// offsets (cu_seqlens), for the encoder and the decoder separately; no token attends across a
// sequence boundary and relative positions restart at 0 in every sequence.
//
// Options (define before including):
//     FAT5_STATIC              make every function static to the including translation unit
//     FAT5_API                 the prefix of every public function (default extern; static with
//                              FAT5_STATIC), e.g. __attribute__((visibility("default")))
//     FAT5_NO_CUDA             compile the GPU path out (CPU reference only)
//     FAT5_MALLOC/REALLOC/FREE replace the C allocator (all three or none)
//     FAT5_ASSERT(x)           internal invariants (default: assert)
//     FAT5_NO_THREADS          no worker threads: the CPU matrix products run on the calling thread
//                              (fat5_ctx_config.n_threads is ignored; no -lpthread needed). Results
//                              are bitwise the same either way.
//     FAT5_MM_SCALAR           plain-C micro-kernels for the CPU matrix products (no GNU vector
//                              extensions, no AVX2 dispatch); same results, slower
//
// Environment (GPU):
//     FAT5_CACHE_DIR           compiled-kernel cache (else $XDG_CACHE_HOME/fat5, ~/.cache/fat5; "" = off)
//     FAT5_KERNELS_DIR         compile kernels/*.cu from this directory instead of fat5_kernels.cuh
//     FAT5_SYNC_LAUNCHES=1     synchronise after every kernel launch (errors name the kernel)
//     FAT5_ATTN_TC=0           bf16 attention forward on the exact FMA kernels, not tensor cores
//     FAT5_MM_ROWS=0           products of a few rows (decoding) on cuBLAS too, not fat5_mm
//     FAT5_PDL=0               decode-step kernels launch plainly, not as programmatic dependents
//     CUDA_HOME                also searched for libcuda, libnvrtc and libcublas
//
// Errors: every fallible call returns a fat5_status (FAT5_OK = 0, negative on error); the message,
// naming the tensor or field and what was expected, is read with fat5_last_error(ctx). The library
// never prints and never exits.
//
// Threads, ownership, lifetimes:
//   - A fat5_ctx and everything made with it (models, safetensors files) is used by one thread at
//     a time; different contexts are independent and may run in parallel. The library keeps no
//     global mutable state (the CUDA libraries, once opened, stay mapped for the process).
//   - The caller owns every buffer it passes in: fat5 copies what it needs during the call and
//     keeps no pointer to it afterwards (batches, parameters, config structs, paths). Pointers
//     fat5 returns (fat5_last_error, fat5_model_get_config, fat5_tensor_info.name,
//     fat5_st_get, metadata strings) are borrowed: valid until the owning object is destroyed,
//     and fat5_last_error's text until the next call on that context. Buffers fat5 allocates
//     for the caller (fat5_model_config_to_json, fat5_batch_from_json) are released with
//     fat5_free / fat5_batch_free on the same context.
//   - Destroy models and safetensors files before the context that made them; every destroy
//     accepts NULL.
//   - A CPU context may run its matrix products on worker threads of its own (n_threads in
//     fat5_ctx_config): they exist only inside a call, touch nothing but that call's buffers, and
//     stop in fat5_ctx_destroy. The caller still sees one thread per context.
//
// Contents (search for "==[n]" to jump to a section; the implementation follows DESIGN §3's layers,
// and a lower layer never calls a higher one):
//     [0]    API: the declarations below (status, context, RNG, model config, model, batches,
//            safetensors files, token files, UL2 sampler, optimizers, training loop, inference,
//            generation, tokenizers)
//     [1.1]  base: status, context, errors, allocation, checked size math
//     [1.2]  base: RNG
//     [1.3]  base: messages, UTF-8, JSON reader and writer, atomic file writes, 16-bit floats
//     [2]    device: CUDA driver, NVRTC and cuBLAS at run time, kernel cache, memory, launches
//     [3.1]  ops: buffers, host memory, and the op interface
//     [3.2]  ops: the CPU reference (fp32, simple, obviously right)
//     [3.3]  ops: the GPU launchers
//     [3.4]  ops: the op table and the two backends
//     [4.1]  model: configuration
//     [4.2]  model: parameters
//     [4.3]  model: workspace, forward, backward
//     [4.4]  model: batches from JSON rows
//     [5.1]  train: token files
//     [5.2]  train: UL2 sampler
//     [5.3]  train: optimizers and schedules
//     [6.1]  io: safetensors reader
//     [6.2]  io: safetensors writer
//     [6.3]  io: Hugging Face checkpoint directories
//     [6.4]  io: training checkpoints and the training loop
//     [7.1]  generate: decoders, the KV cache and inference mode
//     [7.2]  generate: decoding strategies
//     [8.1]  text: Unicode properties, grapheme clusters and normalization forms
//     [8.2]  text: tokenizers
//
// License: MIT, at the end of this file.

#ifndef FAT5_H
#define FAT5_H

// The implementation uses POSIX (fsync, mkstemp, fseeko, clock_gettime, dlopen). It asks for it
// with _POSIX_C_SOURCE when it comes before every system header; after one (with -std=c99 and no
// feature macro) glibc has already hidden those functions, which is an #error naming the fix.
#if defined(FAT5_IMPLEMENTATION) && !defined(_WIN32) && !defined(_POSIX_C_SOURCE) && \
    !defined(_GNU_SOURCE) && !defined(_XOPEN_SOURCE) && !defined(_DEFAULT_SOURCE)
#if defined(__GLIBC__) && !defined(__USE_XOPEN2K8)
#error "fat5.h: a system header came before the implementation and POSIX is off (strict -std=c99): define _POSIX_C_SOURCE 200809L before the first #include of this file, or include fat5.h first, or build with -std=gnu99"
#endif
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>

#define FAT5_VERSION_MAJOR 0
#define FAT5_VERSION_MINOR 1
#define FAT5_VERSION_PATCH 0
#define FAT5_VERSION_STRING "0.1.0"

// FAT5_API prefixes every public function; define it yourself to add attributes, e.g.
//     #define FAT5_API __attribute__((visibility("default")))
#ifndef FAT5_API
#if defined(FAT5_STATIC) && (defined(__GNUC__) || defined(__clang__))
#define FAT5_API static __attribute__((unused))  // no warning for the functions a program leaves unused
#elif defined(FAT5_STATIC)
#define FAT5_API static
#else
#define FAT5_API extern
#endif
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
struct fat5_attention;  // an encoder attention pattern (below, with the model)

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
    // Threads for the CPU matrix products: 0 = one per online CPU (default), 1 = none (the calling
    // thread only), n = n. The threads split the output, never a sum, so results are bitwise the
    // same for every value. A pool of n - 1 workers starts at the first large product and stops in
    // fat5_ctx_destroy. Ignored with FAT5_NO_THREADS and on the GPU.
    int n_threads;
    // The encoder attention every model made with this context starts with (copied at creation;
    // checked against each model when it is made or loaded), e.g. local attention for long inputs
    // everywhere; NULL (the default): each model's own, from its config. fat5_model_set_attention
    // changes one model's afterwards.
    const struct fat5_attention *attention;
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

// How attention learns position (FAT5's position_encoding_type), in self-attention (cross-attention
// has no position term). Biases are computed from positions inside the attention ops; positions
// restart at every packed sequence; nothing is sized by a maximum length.
typedef enum fat5_pos_kind {
    FAT5_POS_T5 = 0,     // "t5": relative buckets, a [buckets, H] table in block 0 (or every layer: UMT5)
    FAT5_POS_NONE = 1,   // "none": no position information
    FAT5_POS_ALIBI = 2,  // "ALiBi": fixed linear biases, one slope per head
    FAT5_POS_ROPE = 3,   // "RoPE": rotary embedding of the first int(d_kv * rotary_fraction) dims
    FAT5_POS_FIRE = 4    // "FIRE": a learned MLP of normalised relative positions
} fat5_pos_kind;

// Which keys an encoder token attends to: LongT5's encoder_attention_type in a longt5 config (local
// or transient-global), or any model's choice for a run (fat5_model_set_attention). The cost of
// every pattern but FULL grows linearly with the sequence (transient-global: plus n^2 / block
// size for the globals).
typedef enum fat5_enc_attention {
    FAT5_ENC_ATTN_FULL = 0,         // every token of its sequence (T5)
    FAT5_ENC_ATTN_LOCAL = 1,        // "local": keys within the radius, |j - i| <= r (LongT5)
    FAT5_ENC_ATTN_TGLOBAL = 2,      // "transient-global": local keys, plus one global token per block
                                    // of g tokens: the block's normed inputs summed and normed again,
                                    // with a bias table of its own (LongT5)
    FAT5_ENC_ATTN_BLOCK_GLOBAL = 3  // "block-global": local keys, and the first g tokens of every
                                    // sequence are global: they attend to and are attended by every
                                    // token (not a LongT5 config value: a run's choice only)
} fat5_enc_attention;

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
    char model_type[16];           // "t5", "mt5", "umt5", "flash_t5" or "longt5" (written back to config.json)
    // position encoding (FAT5's config.json fields; the defaults are FAT5's)
    fat5_pos_kind pos_kind;        // position_encoding_type, FAT5_POS_T5
    int alibi_asymmetric;          // alibi_mode "asymetric": half the heads see the past, half the future; 0
    int rotary_interleaved;        // rotary_interleaved: rotate (even, odd) pairs, else the two halves; 0
    int fire_mlp_width;            // fire_mlp_width: hidden width of FIRE's MLP, 32
    double rotary_fraction;        // rotary_emb_fraction: int(d_kv * fraction) dims rotate, 1.0
    double rotary_base;            // rotary_base, 10000
    double rotary_scale_base;      // rotary_scale_base: xPos scale base, 0 = off (FAT5's None)
    // encoder attention (LongT5's config.json fields, model_type longt5; defaults as LongT5Config)
    fat5_enc_attention enc_attention;  // encoder_attention_type, FAT5_ENC_ATTN_FULL (longt5: local)
    int64_t local_radius;          // local_radius: keys within this distance, 127
    int64_t global_block_size;     // global_block_size: tokens summed into one global token, 16
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
// beside it. model_type flash_t5 (FAT5) directories load with FAT5's parameter names and position
// encodings, longt5 ones with LongT5's names and encoder attention (fat5_model_get_attention).
FAT5_API fat5_status fat5_model_load(fat5_ctx *ctx, const char *path, fat5_model **out);
// Writes config.json + model.safetensors (fp32, the model's names: Hugging Face's, or FAT5's for
// flash_t5) into dir, each atomically.
FAT5_API fat5_status fat5_model_save(fat5_model *m, const char *dir);
FAT5_API void fat5_model_destroy(fat5_model *m);
FAT5_API const fat5_model_config *fat5_model_get_config(const fat5_model *m);

// Parameters by name. A model's names follow its checkpoint scheme: Hugging Face T5 names
// ("encoder.block.0.layer.0.SelfAttention.q.weight"), or, for model_type flash_t5, FAT5's
// ("encoder.block.0.self_attention_layer.self_attention.Wq.weight"; load and save use them too),
// or, for longt5, LongT5's ("encoder.block.0.layer.0.LocalSelfAttention.q.weight").
// tensor_info reports the scheme's names; find_tensor, get_param, set_param and get_grad accept
// them, and the Hugging Face names as well.
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

// Encoder attention for a run: any T5-family checkpoint can run local, block-global or
// transient-global attention without retraining (and a LongT5 checkpoint another pattern than its
// own). A model starts with its config's pattern: full for T5, encoder_attention_type with
// local_radius and global_block_size for LongT5. The decoder always attends fully.
// Transient-global on a checkpoint without LongT5's global tensors takes the global tokens' bias
// from the model's own relative-attention table (same buckets, of the block distance) and norms
// them without a learned scale (weight 1); it needs T5 buckets or no position encoding.
typedef struct fat5_attention {
    fat5_enc_attention type;
    int64_t radius;        // LOCAL, BLOCK_GLOBAL, TGLOBAL: keys with |j - i| <= radius, 1 .. 2^22 - 1
    int64_t global;        // BLOCK_GLOBAL: the first `global` tokens are global; TGLOBAL: tokens per
                           // global block (LongT5's global_block_size); 1 .. 2^31 - 1
} fat5_attention;
// Parses "full", "local:R", "block-global:R:G" or "transient-global:R:G" (R the radius, G as
// `global`, decimal numbers; "local" alone means R = 127, "transient-global" alone R = 127, G = 16
// and "transient-global:R" G = 16, LongT5's defaults). Errors name what is wrong
// (FAT5_ERR_INVALID_ARG).
FAT5_API fat5_status fat5_attention_parse(fat5_ctx *ctx, const char *spec, fat5_attention *out);
// The spec text of a pattern, as fat5_attention_parse reads it.
FAT5_API void fat5_attention_to_string(const fat5_attention *a, char buf[64]);
// Sets the encoder attention of later forwards, encodes and decoders (a decoder made before keeps
// the one it had). A new pattern drops the workspace (and a forward awaiting its backward): call
// fat5_model_reserve after it, not before. A block-global prefix longer than every sequence of an
// input is refused when the input comes (FAT5_ERR_INVALID_ARG: it would be full attention); a
// shorter sequence among longer ones attends fully. A transient-global block longer than a
// sequence leaves that sequence without a global token (LongT5's rule).
FAT5_API fat5_status fat5_model_set_attention(fat5_model *m, const fat5_attention *a);
FAT5_API fat5_attention fat5_model_get_attention(const fat5_model *m);

// A packed batch. Sequence s of the encoder is enc_tokens[enc_cu_seqlens[s] .. enc_cu_seqlens[s+1]),
// and likewise for the decoder. labels (the targets, -100 = ignored) define the decoder tokens;
// dec_tokens may be NULL, in which case the decoder input of each sequence is labels shifted right
// with decoder_start_token_id in front and -100 replaced by pad_token_id (Hugging Face's
// shift_right). labels may be NULL for a forward without loss (dec_tokens then required).
typedef struct fat5_batch {
    int64_t n_seq;
    int64_t n_enc_tokens;             // tokens in enc_tokens; enc_cu_seqlens[n_seq] must equal it
    int64_t n_dec_tokens;             // tokens in dec_tokens and labels; dec_cu_seqlens[n_seq] must equal it
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
    int64_t n_dec_tokens;     // decoder tokens of the batch: the rows of the logits
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
// Logits of the last forward, [dec_tokens, vocab] row-major; n must equal dec_tokens * vocab. In
// training mode the forward keeps the fp32 logits of 1,024 decoder tokens at most (the loss and its
// gradient are computed chunk by chunk): FAT5_ERR_STATE for a larger batch; inference mode keeps all.
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

// ---------------------------------------------------------------------------------------------
// token files: pre-tokenised documents, read without loading the whole file
//
// A token file is a 32-byte header and then the ids, little-endian:
//     bytes 0..7    magic "FAT5TOK\0"
//     bytes 8..11   uint32 version (1)
//     bytes 12..15  uint32 id width in bytes (2 or 4)
//     bytes 16..23  uint64 vocabulary size (every id is below it)
//     bytes 24..27  int32 eos id (documents are separated by it; the last document ends with it)
//     bytes 28..31  zero
// followed by the ids (uint16 or uint32). The id count is (file size - 32) / width.
typedef struct fat5_tokens fat5_tokens;
// Opens one or more token files as one stream of documents (the files' order). They must agree on
// vocabulary size and eos id; every file is checked in one pass (header, size, ids below the
// vocabulary, the last id an eos) and a bad one is an error naming the file and the byte offset
// ("x.tok: byte 34: id 300 is not below the vocabulary size 256"). Only regular files are opened
// (a FIFO or directory is FAT5_ERR_IO, without blocking). Ids are then read through a 1 MiB window
// per tokens object, never the whole file; the files stay open until fat5_tokens_close. An empty
// document (two eos in a row) is allowed and counts in num_docs.
FAT5_API fat5_status fat5_tokens_open(fat5_ctx *ctx, const char *const *paths, int n_paths, fat5_tokens **out);
FAT5_API void fat5_tokens_close(fat5_tokens *t);
FAT5_API int64_t fat5_tokens_count(const fat5_tokens *t);        // ids in all files
FAT5_API int64_t fat5_tokens_num_docs(const fat5_tokens *t);
FAT5_API int64_t fat5_tokens_vocab_size(const fat5_tokens *t);
FAT5_API int32_t fat5_tokens_eos_id(const fat5_tokens *t);
// Writes a token file atomically (temp file + flush + rename) from ids (each below vocab_size,
// at least one, the last eos_id); id_width 2 needs vocab_size <= 65536.
FAT5_API fat5_status fat5_tokens_write(fat5_ctx *ctx, const char *path, const int32_t *ids, int64_t n,
                                       int64_t vocab_size, int32_t eos_id, int id_width);

// ---------------------------------------------------------------------------------------------
// UL2 mixture of denoisers: packed batches from a token stream
typedef enum fat5_denoiser_kind {
    FAT5_DENOISE_SPAN = 0,    // T5 span corruption: mean span mu, corruption rate r (R and X)
    FAT5_DENOISE_PREFIX = 1   // prefix LM: the document split at a uniform random point (S)
} fat5_denoiser_kind;

typedef struct fat5_denoiser {
    fat5_denoiser_kind kind;
    double mu;                // mean noise-span length (SPAN)
    double r;                 // corruption rate (SPAN)
    int32_t mode_token;       // id put in front of the input ("[R]", "[S]", "[X]"), -1 for none
    double weight;            // mixture weight (renormalised over the list)
} fat5_denoiser;

#define FAT5_UL2_MAX_DENOISERS 16
typedef struct fat5_ul2_config {
    int n_denoisers;
    fat5_denoiser denoisers[FAT5_UL2_MAX_DENOISERS];
    int64_t enc_tokens;       // encoder token budget of one packed batch
    int64_t dec_tokens;       // decoder (label) token budget of one packed batch
    int64_t max_enc_len;      // most encoder tokens of one example (0 = enc_tokens)
    int64_t max_dec_len;      // most label tokens of one example (0 = dec_tokens)
    int32_t sentinel_first;   // the first sentinel id: span j (from 0) of an example uses sentinel_first - j
    int32_t n_sentinels;      // sentinel ids available: sentinel_first - n_sentinels + 1 .. sentinel_first;
                              // an example never has more spans than this (ByT5: vocab-1 and vocab-259)
    int split;                // 0: every document, 1: the training documents, 2: the held-out ones
    double eval_fraction;     // share of documents held out (by a hash of the document index)
    uint64_t seed;
} fat5_ul2_config;

// FAT5's seven denoisers ([R] 3/.15, [R] 8/.15, [S] prefix, [X] 3/.5, [X] 8/.15, [X] 64/.15,
// [X] 64/.5; weights .165/.165/.34/.0825 x 4), no mode tokens, budgets 512 x 16 / 512 x 16,
// examples of at most 512 / 512, split 0, seed 0. sentinel_first and n_sentinels must be set for
// the vocabulary (create fails until they are).
FAT5_API fat5_ul2_config fat5_ul2_config_default(void);
// Classic T5 span corruption (r .15, mu 3): the one-denoiser mixture; examples of 512 input and
// 114 target tokens (568-id pieces, as T5 and nanoT5), budgets 16 of them.
FAT5_API fat5_ul2_config fat5_ul2_config_t5(void);

// What the sampler emits. The documents of the split are read in order, each cut into
// consecutive pieces; every piece draws a denoiser from the mixture and becomes one example, one
// sequence of the packed batch (no attention across documents or pieces). A piece is as long as
// the denoiser's example can be within max_enc_len / max_dec_len (T5's random_spans_helper),
// shorter at a document's end; no id is dropped: over an epoch every non-eos id of the split
// appears exactly once in the inputs and targets. With A = kept ids, N = noise ids, S_j =
// sentinel_first - j, M = the optional mode token:
//     SPAN   noise = round(L r) within [1, L-1], spans = round(noise / mu) within
//            [1, min(noise, L - noise, n_sentinels)]; noise and kept ids each split into `spans`
//            positive runs uniformly at random (T5's random_spans_noise_mask), laid out A0 N0 A1 N1 ...
//            input  = M A0 S0 A1 S1 ... A_{n-1} S_{n-1} eos,  target = S0 N0 S1 N1 ... eos
//            (a piece of one id: input M S0 eos, target S0 id eos)
//     PREFIX split point P uniform in [1, L-1] (UL2's prefix LM; P = 0 for a piece of one id)
//            input  = M ids[0..P) eos,  target = ids[P..L) eos
// Rounding is half to even (numpy's). Batches fill enc_tokens / dec_tokens without padding; dec_tokens
// is NULL (the model shifts the labels right). An example that does not fit is carried to the next
// batch. Held-out split: document i is held out iff splitmix64(i ^ 0x6A09E667F3BCC908) / 2^64 <
// eval_fraction (53 high bits). Empty documents (eos eos) give no example.
typedef struct fat5_ul2 fat5_ul2;
// The sampler reads src (borrowed: keep it open while the sampler lives). Checks the config
// against it (denoisers, weights, sentinel range, mode tokens, budgets that hold an example of two
// ids for every denoiser, a non-empty split) with a message naming the field.
FAT5_API fat5_status fat5_ul2_create(fat5_ctx *ctx, const fat5_ul2_config *cfg, fat5_tokens *src, fat5_ul2 **out);
FAT5_API void fat5_ul2_destroy(fat5_ul2 *s);
// The next packed batch; its arrays are owned by the sampler and valid until the next call.
// The stream cycles through the documents forever (epoch after epoch, new noise each time).
FAT5_API fat5_status fat5_ul2_next_batch(fat5_ul2 *s, fat5_batch *out);
FAT5_API int64_t fat5_ul2_epoch(const fat5_ul2 *s);   // completed passes, counted at the last example emitted
// The whole state (RNG counter, document, piece offset; a carried example is drawn again) as a
// short printable string "ul2v1:seed:counter:epoch:doc:pos:off:ids", and back: a sampler with the
// same config and corpus continues the same stream exactly. Malformed or foreign states are
// FAT5_ERR_FORMAT. FAT5_UL2_STATE_CAP bytes always hold it.
#define FAT5_UL2_STATE_CAP 192
FAT5_API fat5_status fat5_ul2_get_state(const fat5_ul2 *s, char *buf, size_t cap);
FAT5_API fat5_status fat5_ul2_set_state(fat5_ul2 *s, const char *state);

// ---------------------------------------------------------------------------------------------
// optimizers and learning-rate schedules (fp32 master weights and moments, on the model's backend)
typedef enum fat5_optim_kind {
    FAT5_OPTIM_ADAMW = 0,        // AdamW, decoupled weight decay
    FAT5_OPTIM_ADAMW_SCALE = 1   // AdamW with the step scaled by max(1e-3, RMS(p)) per tensor (FAT5)
} fat5_optim_kind;

typedef enum fat5_sched_kind {
    FAT5_SCHED_CONSTANT = 0,     // lr after a linear warm-up from 0
    FAT5_SCHED_LINEAR = 1,       // linear warm-up from 0, then linear to 0 at total_steps
    FAT5_SCHED_COSINE = 2,       // FAT5: warm-up from lr/2 to lr, then cosine to min_lr
    FAT5_SCHED_WSD = 3,          // warm-up (lr/2 -> lr), stable, decay (lr -> lr/2) over decay_steps
    FAT5_SCHED_INV_SQRT = 4      // linear warm-up from 0, then lr * sqrt(warmup / step)
} fat5_sched_kind;

typedef struct fat5_optim_config {
    fat5_optim_kind kind;
    double lr, beta1, beta2, eps, weight_decay;
    double clip_norm;            // global L2 gradient norm clipped to this (0 = off)
    fat5_sched_kind sched;
    int64_t warmup_steps, total_steps, decay_steps;
    double min_lr;               // the cosine floor
} fat5_optim_config;
// FAT5's: AdamWScale, lr 5e-3, betas .9/.999, eps 1e-6, wd 0, clip 1, cosine, min_lr 1e-5.
// warmup_steps 10000 and total_steps 65536 (nanoT5's run) are placeholders: set them for your run.
// fat5_optim_create validates the config (the message names the field).
FAT5_API fat5_optim_config fat5_optim_config_default(void);
FAT5_API double fat5_sched_lr(const fat5_optim_config *c, int64_t step);   // step counts from 0

typedef struct fat5_optim fat5_optim;
typedef struct fat5_optim_result {
    double lr;                   // the rate this step used
    double grad_norm;            // global L2 norm before clipping
    int skipped;                 // 1: a non-finite gradient; nothing was changed but the step count
} fat5_optim_result;
// The update rule, clipping, exclusions and the bias correction are described in section [5.3].
// An optimizer for every parameter of m (norm weights and relative-bias tables get no weight decay).
FAT5_API fat5_status fat5_optim_create(fat5_model *m, const fat5_optim_config *cfg, fat5_optim **out);
FAT5_API void fat5_optim_destroy(fat5_optim *o);
// One update from the accumulated gradients: norm, clip, moments, weights. Does not zero them.
FAT5_API fat5_status fat5_optim_step(fat5_optim *o, fat5_optim_result *out);
FAT5_API int64_t fat5_optim_get_step(const fat5_optim *o);   // updates taken (skipped ones included)

// ---------------------------------------------------------------------------------------------
// training loop: UL2 batches, gradient accumulation, optimizer, evaluation, checkpoints, resume
//
// A checkpoint is a directory OUT/step-NNNNNNNN holding a Hugging Face model (config.json,
// model.safetensors: loads in transformers) and training_state.safetensors (optimizer moments,
// step, sampler and RNG state in its metadata). It is written under a temporary name and renamed
// when complete, then OUT/latest names it: a crash mid-save leaves the previous one loadable.
// Resuming from one continues bit-identically: the same losses, step for step, as a run that was
// never interrupted (on the GPU too: its backward and reductions are deterministic).
typedef struct fat5_train_config {
    // data: token files (fat5_tokens_open), comma-separated; a share of documents held out
    char data[4096];
    double eval_fraction;         // 0.01; 0 = no evaluation
    fat5_ul2_config ul2;          // denoisers and budgets; seed, split and sentinels set by the trainer
    // model: a new one from `model`, or --init DIR (a Hugging Face checkpoint) instead
    fat5_model_config model;
    char init[4096];
    char attention[64];           // the encoder's attention pattern for this run ("local:127", ...,
                                  // fat5_attention_parse); "" = the model's own
    uint64_t seed;                // model initialisation and data order (42)
    // optimisation
    fat5_optim_config optim;      // total_steps is the run length
    fat5_loss_config loss;
    int grad_accum;               // micro-batches per step (1)
    int prefetch;                 // 1: the next step's batches are drawn on a host thread while the GPU
                                  // runs this one (default); 0: on the calling thread, when needed
    // output
    char output_dir[4096];        // checkpoints and metrics.jsonl
    char resume[4096];            // a checkpoint directory, or an output directory (its latest)
    int64_t logging_steps;        // the trainer reports every step; the example prints every N (10)
    int64_t eval_steps;           // evaluate every N steps and at the end (0 = only at the end)
    int64_t eval_batches;         // batches per evaluation (8)
    int64_t save_steps;           // checkpoint every N steps (0 = only at the end)
    int save_total_limit;         // keep the last K checkpoints (0 = all)
    double peak_tflops;           // for MFU (0 = from the device: 989 for H100/H200 bf16, else none)
    int device;                   // FAT5_DEVICE_CPU or FAT5_DEVICE_GPU, -1 = GPU when there is one
} fat5_train_config;

// Defaults: FAT5's recipe (UL2 mixture, AdamWScale, cosine) on a FAT5-small-shaped byte model.
FAT5_API fat5_train_config fat5_train_config_default(void);
// Sets one option by name from its text form (FAT5's / Hugging Face TrainingArguments' names where
// they exist: learning_rate, max_steps, warmup_steps, lr_scheduler_type, weight_decay, adam_beta1,
// adam_beta2, adam_epsilon, max_grad_norm, gradient_accumulation_steps, output_dir, seed,
// logging_steps, eval_steps, save_steps, save_total_limit, max_length, max_labels_length, ...).
// fat5_train_option_names lists them all. An unknown name or bad value is FAT5_ERR_INVALID_ARG.
FAT5_API fat5_status fat5_train_config_set(fat5_ctx *ctx, fat5_train_config *cfg, const char *key,
                                           const char *value);
// Applies every key of a JSON object ({"learning_rate": 5e-3, "model": "tiny", ...}).
FAT5_API fat5_status fat5_train_config_from_json(fat5_ctx *ctx, fat5_train_config *cfg, const char *json,
                                                 size_t len);
FAT5_API const char *fat5_train_option_names(void);   // "name: meaning\n" lines

typedef struct fat5_trainer fat5_trainer;
typedef struct fat5_train_metrics {
    int64_t step, max_steps;      // steps done (this one included) and the run length
    double loss, lr, grad_norm;   // the step's mean loss over its label tokens
    int skipped;                  // 1: a non-finite loss or gradient; the weights were not changed
    int64_t n_skipped;            // skipped steps so far
    int64_t tokens;               // encoder + decoder tokens of the step
    int64_t tokens_seen;          // since the start of training (resumes included)
    double step_s, tokens_per_s, elapsed_s, eta_s;
    double mfu;                   // model FLOPs utilisation (0 when unknown)
    double data_s;                // of step_s, the time spent waiting for the step's batches
    int has_eval;                 // an evaluation ran after this step
    double eval_loss;
    int saved;                    // a checkpoint was written after this step
    char checkpoint[4200];        // ... here
    int64_t epoch;                // passes over the training documents
} fat5_train_metrics;

// Opens the data, creates / loads / resumes the model and optimizer, on ctx's device.
FAT5_API fat5_status fat5_train_create(fat5_ctx *ctx, const fat5_train_config *cfg, fat5_trainer **out);
FAT5_API void fat5_train_destroy(fat5_trainer *t);
// One optimizer step (grad_accum micro-batches); evaluates and checkpoints when due, and at the
// last step. Appends the step's metrics to OUTPUT_DIR/metrics.jsonl.
FAT5_API fat5_status fat5_train_step(fat5_trainer *t, fat5_train_metrics *out);
FAT5_API int fat5_train_done(const fat5_trainer *t);
FAT5_API fat5_status fat5_train_evaluate(fat5_trainer *t, double *loss);
// Writes a checkpoint now (e.g. on Ctrl-C); *dir (may be NULL) gets its path, borrowed.
FAT5_API fat5_status fat5_train_save(fat5_trainer *t, const char **dir);
FAT5_API fat5_model *fat5_train_model(fat5_trainer *t);
FAT5_API const fat5_train_config *fat5_train_get_config(const fat5_trainer *t);

// ---------------------------------------------------------------------------------------------
// inference and generation
//
// Inference mode: a model that will not be trained drops its gradients and lays its workspace out
// for one layer at a time (memory = weights + a few layers' buffers). fat5_model_backward and the
// optimizers then refuse with FAT5_ERR_STATE. Models start in training mode; switching back
// allocates zeroed gradients.
FAT5_API fat5_status fat5_model_set_training(fat5_model *m, int training);
FAT5_API int fat5_model_is_training(const fat5_model *m);

// The encoder alone on a packed batch (embeddings, retrieval): the final-norm hidden states,
// fp32. pool FAT5_POOL_NONE writes [n_tokens, d_model] (n = n_tokens * d_model floats),
// FAT5_POOL_MEAN the mean over each sequence's tokens, [n_seq, d_model]. Runs in inference
// layout whatever the model's mode, and keeps nothing of a training forward.
typedef enum fat5_pool { FAT5_POOL_NONE = 0, FAT5_POOL_MEAN = 1 } fat5_pool;
FAT5_API fat5_status fat5_model_encode(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens,
                                       int64_t n_seq, fat5_pool pool, float *out, int64_t n);

// Decoding options, with Hugging Face's names and meanings (GenerationConfig).
typedef struct fat5_generate_config {
    int64_t max_new_tokens;        // 20: tokens generated per sequence at most (EOS included)
    int64_t min_new_tokens;        // 0: EOS is not emitted before this many tokens
    int do_sample;                 // 0: greedy (num_beams 1) or beam search; 1: sampling
    double temperature;            // 1.0 (sampling): logits / temperature, > 0
    int64_t top_k;                 // 50 (sampling): keep the k most likely tokens; 0 = off
    double top_p;                  // 1.0 (sampling): keep the smallest set of mass >= top_p; (0, 1]
    uint64_t seed;                 // sampling: a seed gives the same tokens on every run
    int64_t num_beams;             // 1 = no beam search
    double length_penalty;         // 1.0 (beam): a hypothesis scores sum(log p) / length^length_penalty
    int early_stopping;            // beam: 0 Hugging Face's False (heuristic), 1 True, 2 "never"
    int64_t num_return_sequences;  // 1: outputs per input (<= num_beams with beam search)
    double repetition_penalty;     // 1.0 = off; > 1 lowers tokens already in the decoder input
    int64_t no_repeat_ngram_size;  // 0 = off; n: no n-gram appears twice in a decoder input
    int64_t eos_token_id;          // from the model config (fat5_generate_config_default)
    int64_t pad_token_id;          //   "   (fills finished rows in Hugging Face; not emitted here)
    int64_t decoder_start_token_id;//   "
    int use_graph;                 // GPU: 1 (default) replays every step from a CUDA graph
} fat5_generate_config;

// Hugging Face's defaults with the model's ids, overlaid with the generation_config.json that was
// beside the checkpoint fat5_model_load read (when there was one).
FAT5_API fat5_generate_config fat5_generate_config_default(const fat5_model *m);
// Overlays the fields of a generation_config.json text; unknown keys are ignored, known keys with
// values of the wrong type or range are errors.
FAT5_API fat5_status fat5_generate_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                    fat5_generate_config *inout);

typedef struct fat5_generate_result {
    int64_t n_seq;          // n_inputs * num_return_sequences, grouped by input
    int32_t *tokens;        // the generated ids of all sequences, concatenated (no decoder start
                            // token; EOS included when it was generated)
    int32_t *cu_seqlens;    // [n_seq + 1] offsets into tokens
    float *scores;          // [n_seq] beam search: the hypothesis score; else the sum of the chosen
                            // tokens' log-probabilities (after the logits processors)
    int64_t steps;          // decoder steps run
    size_t cache_bytes;     // the key/value caches it allocated: self-attention for every row and
                            // decoder layer (max_new_tokens positions), and each layer's keys and
                            // values of the encoder output for cross-attention (not counted: one
                            // layer's spare cache that beam search reorders through)
} fat5_generate_result;

// Encodes each input once, then decodes: greedy, sampling or beam search as g says. Inputs are a
// packed batch of any lengths (cu_seqlens [n_inputs + 1]). Free the result with
// fat5_generate_result_free. Output tokens equal Hugging Face's generate in fp32 (same options,
// eager attention). Bad options are FAT5_ERR_INVALID_ARG naming the field (empty inputs, ids out
// of the vocabulary, max_new_tokens < 1, num_beams outside 1 .. 32, top_p outside (0, 1],
// temperature <= 0, num_return_sequences > num_beams, ...); beam sampling is FAT5_ERR_UNSUPPORTED.
FAT5_API fat5_status fat5_generate(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens,
                                   int64_t n_inputs, const fat5_generate_config *g, fat5_generate_result *out);
FAT5_API void fat5_generate_result_free(fat5_ctx *ctx, fat5_generate_result *r);

// Incremental decoding, for callers that drive the loop themselves. A decoder holds the encoder
// output of a request, its cross-attention keys and values (computed once) and the self-attention
// cache (layers x 2 x rows x heads x max_len x d_kv, allocated once at create). Rows advance in
// lock step: every step appends one token to each row it names; a row left out of a step has
// finished and cannot come back.
typedef struct fat5_decoder fat5_decoder;
FAT5_API fat5_status fat5_decoder_create(fat5_model *m, int64_t max_rows, int64_t max_enc_tokens, int64_t max_len,
                                         fat5_decoder **out);
FAT5_API void fat5_decoder_destroy(fat5_decoder *d);
// Runs the encoder on n_inputs packed inputs; row r of the decoder reads input r / rows_per_input
// (rows_per_input = num_beams for beam search). Empties the cache.
FAT5_API fat5_status fat5_decoder_start(fat5_decoder *d, const int32_t *tokens, const int32_t *cu_seqlens,
                                        int64_t n_inputs, int64_t rows_per_input);
// Feeds tokens[i] to row rows[i] (rows NULL: rows 0 .. n-1 in order; row ids strictly increasing)
// and writes the next-token logits, [n, vocab] fp32, to logits (NULL: kept on the decoder).
FAT5_API fat5_status fat5_decoder_step(fat5_decoder *d, const int32_t *tokens, const int32_t *rows, int64_t n,
                                       float *logits);
// Row r continues from the history of row src[r] (all rows; beam search).
FAT5_API fat5_status fat5_decoder_reorder(fat5_decoder *d, const int32_t *src);
FAT5_API int64_t fat5_decoder_position(const fat5_decoder *d);   // tokens consumed by each live row

// ---------------------------------------------------------------------------------------------
// Tokenizers (text). A checkpoint's own tokenizer, read from its files, giving the ids the Python
// libraries give:
//   - tokenizer.json (Hugging Face `tokenizers`): read as that library reads it. Normalizers
//     Precompiled, Replace (a string, or a regex of literal characters with quantifiers, as in
//     T5 files), Strip, Prepend, NFC / NFD / NFKC / NFKD, Sequence; pre-tokenizers
//     Metaspace (prepend_scheme always / first / never, or the older add_prefix_space),
//     WhitespaceSplit, ByteLevel (GPT-2's split and byte alphabet), Sequence; models Unigram and
//     BPE (merges, byte fallback, unknown fusing, subword prefix / suffix); post-processors
//     TemplateProcessing, ByteLevel, Sequence; decoders Metaspace, ByteLevel, ByteFallback, Fuse,
//     Strip, Replace, Sequence; added tokens (special or not, lstrip / rstrip / single_word /
//     normalized), matched in the text before normalisation. Anything else is refused with
//     FAT5_ERR_UNSUPPORTED naming it, never ignored.
//   - spiece.model (SentencePiece): Unigram and BPE models, the precompiled normalisation charsmap,
//     user-defined pieces, byte fallback, encoded and decoded as the `sentencepiece` library does
//     (its whitespace rules differ from `tokenizers`': each file kind follows its own library).
//     A model with an EOS piece gets it appended (the T5 tokenizers' convention), unless
//     FAT5_TOKENIZE_NO_SPECIAL.
// Text that is not valid UTF-8 is taken as the libraries take it: each invalid byte becomes U+FFFD
// for sentencepiece; for tokenizer.json, Python's bytes.decode("utf-8", "replace") (one U+FFFD per
// maximal invalid subsequence). A tokenizer belongs to its context (one thread at a time, like the
// context) and keeps scratch buffers, so repeated calls do not allocate per character.
typedef struct fat5_tokenizer fat5_tokenizer;

enum {
    FAT5_TOKENIZE_NO_SPECIAL = 1,     // fat5_tokenize: no post-processor (no EOS / template tokens)
    FAT5_DETOKENIZE_SKIP_SPECIAL = 2  // fat5_detokenize: leave special (control) tokens out
};

// path: a file (tokenizer.json, or a SentencePiece .model), or a directory holding tokenizer.json
// (preferred) or spiece.model / tokenizer.model.
FAT5_API fat5_status fat5_tokenizer_load(fat5_ctx *ctx, const char *path, fat5_tokenizer **out);
// The same from bytes in memory; is_json: 1 for tokenizer.json, 0 for a SentencePiece model.
FAT5_API fat5_status fat5_tokenizer_from_memory(fat5_ctx *ctx, const void *data, size_t len, int is_json,
                                                fat5_tokenizer **out);
FAT5_API void fat5_tokenizer_destroy(fat5_tokenizer *t);
// Text to ids. pair (NULL: none) is the second sequence of a pair template. *ids is allocated with
// the context's allocator (release it with fat5_free); *n_ids gets its length.
FAT5_API fat5_status fat5_tokenize(fat5_tokenizer *t, const char *text, size_t len, const char *pair,
                                   size_t pair_len, int flags, int32_t **ids, int64_t *n_ids);
// Ids to UTF-8 text, NUL-terminated, allocated like fat5_tokenize's ids; *len (may be NULL) gets
// its length. An id outside the vocabulary is FAT5_ERR_INVALID_ARG.
FAT5_API fat5_status fat5_detokenize(fat5_tokenizer *t, const int32_t *ids, int64_t n, int flags, char **text,
                                     size_t *len);
// Vocabulary size: the model's pieces and the added tokens (the largest id + 1).
FAT5_API int64_t fat5_tokenizer_vocab_size(const fat5_tokenizer *t);
// A piece's text (borrowed; NULL outside the vocabulary) and a text's id (-1 when none).
FAT5_API const char *fat5_tokenizer_id_to_piece(const fat5_tokenizer *t, int32_t id);
FAT5_API int32_t fat5_tokenizer_piece_to_id(const fat5_tokenizer *t, const char *piece);
// The ids of the end-of-sequence and padding tokens (-1 when the tokenizer has none); T5's
// "</s>" and "<pad>", or SentencePiece's trainer settings.
FAT5_API int32_t fat5_tokenizer_eos_id(const fat5_tokenizer *t);
FAT5_API int32_t fat5_tokenizer_pad_id(const fat5_tokenizer *t);
// A packed batch from texts: row i's encoder input is fat5_tokenize(inputs[i]) with the
// post-processor (EOS appended); targets (NULL: no labels) give the labels the same way. Release
// with fat5_batch_free.
FAT5_API fat5_status fat5_batch_from_texts(fat5_tokenizer *t, const char *const *inputs,
                                           const char *const *targets, int64_t n, fat5_batch *out);

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
#include <float.h>
#include <time.h>
#ifndef _WIN32
#include <unistd.h>
#include <sys/stat.h>
#include <dirent.h>
#endif
#ifndef FAT5_NO_THREADS
#include <pthread.h>
#endif
#if !defined(FAT5_NO_THREADS) && !defined(_WIN32)
#define FAT5__THREADS 1
#include <pthread.h>
#else
#define FAT5__THREADS 0
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

// =============================================================================================
// ==[1.1] base: status, context, errors, allocation, checked size math ==

#define FAT5__ERRMSG_CAP 4096

struct fat5_ctx {
    fat5_ctx_config cfg;      // cfg.attention points at `attention` below, or is NULL
    char err[FAT5__ERRMSG_CAP];
    struct fat5__gpu *gpu;    // NULL on the CPU
    void *scratch;            // the CPU ops' scratch arena (fat5__host_scratch)
    size_t scratch_bytes;
    int n_threads;            // CPU matrix-product threads, resolved from cfg.n_threads (>= 1)
    struct fat5__pool *pool;  // their workers (n_threads - 1), started at the first use; NULL before
    fat5_attention attention;  // the copy cfg.attention points at
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

// ---- worker threads ----
// A pool of n_threads - 1 workers per context. fat5__pool_run(ctx, fn, arg, parts) calls
// fn(arg, p, parts) once for each p < parts, p = 0 on the calling thread and p = 1.. on the
// workers, and returns when all are done. What a part computes must depend only on p (never on
// which thread runs it or when), and parts write disjoint memory: that is what keeps results
// identical for every thread count. With FAT5_NO_THREADS (or no pool) every part runs in turn on
// the caller.
typedef void (*fat5__pool_fn)(void *arg, int part, int parts);

#if FAT5__THREADS
typedef struct fat5__pool_worker {
    pthread_t thread;
    struct fat5__pool *pool;
    int index;                // runs part index + 1
} fat5__pool_worker;
struct fat5__pool {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    fat5__pool_worker *workers;
    int n_workers;            // threads started
    int stop;                 // set once, by fat5__pool_destroy
    unsigned long job;        // incremented for every fat5__pool_run
    int pending;              // workers still inside the current job
    fat5__pool_fn fn;         // the current job
    void *arg;
    int parts;
};

static void *fat5__pool_main(void *p) {
    fat5__pool_worker *w = FAT5__CAST(fat5__pool_worker *, p);
    struct fat5__pool *pl = w->pool;
    int part = w->index + 1;
    unsigned long seen = 0;
    for (;;) {
        fat5__pool_fn fn;
        void *arg;
        int parts;
        pthread_mutex_lock(&pl->mu);
        while (!pl->stop && pl->job == seen) pthread_cond_wait(&pl->wake, &pl->mu);
        if (pl->stop) {
            pthread_mutex_unlock(&pl->mu);
            return NULL;
        }
        seen = pl->job;
        fn = pl->fn;
        arg = pl->arg;
        parts = pl->parts;
        pthread_mutex_unlock(&pl->mu);
        if (part < parts) fn(arg, part, parts);
        pthread_mutex_lock(&pl->mu);
        if (--pl->pending == 0) pthread_cond_signal(&pl->done);
        pthread_mutex_unlock(&pl->mu);
    }
}

static void fat5__pool_destroy(fat5_ctx *ctx) {
    struct fat5__pool *pl = ctx->pool;
    int i;
    if (!pl) return;
    pthread_mutex_lock(&pl->mu);
    pl->stop = 1;
    pthread_cond_broadcast(&pl->wake);
    pthread_mutex_unlock(&pl->mu);
    for (i = 0; i < pl->n_workers; i++) pthread_join(pl->workers[i].thread, NULL);
    pthread_cond_destroy(&pl->done);
    pthread_cond_destroy(&pl->wake);
    pthread_mutex_destroy(&pl->mu);
    fat5__free(ctx, pl->workers);
    fat5__free(ctx, pl);
    ctx->pool = NULL;
}

// Starts the workers; on any failure the context keeps the workers that did start (or none), so a
// product still runs, on fewer threads, with the same result.
static void fat5__pool_start(fat5_ctx *ctx) {
    struct fat5__pool *pl;
    int i, n = ctx->n_threads - 1, ok = 0;
    if (ctx->pool || n < 1) return;
    pl = FAT5__CAST(struct fat5__pool *, fat5__calloc(ctx, 1, sizeof *pl));
    if (!pl) return;
    pl->workers = FAT5__CAST(fat5__pool_worker *, fat5__calloc(ctx, (size_t)n, sizeof(fat5__pool_worker)));
    if (pl->workers && !pthread_mutex_init(&pl->mu, NULL)) {
        ok = 1;
        if (!pthread_cond_init(&pl->wake, NULL)) {
            ok = 2;
            if (!pthread_cond_init(&pl->done, NULL)) ok = 3;
        }
    }
    if (ok < 3) {
        if (ok >= 2) pthread_cond_destroy(&pl->wake);
        if (ok >= 1) pthread_mutex_destroy(&pl->mu);
        fat5__free(ctx, pl->workers);
        fat5__free(ctx, pl);
        return;
    }
    ctx->pool = pl;
    for (i = 0; i < n; i++) {
        pl->workers[i].pool = pl;
        pl->workers[i].index = i;
        if (pthread_create(&pl->workers[i].thread, NULL, fat5__pool_main, &pl->workers[i])) break;
        pl->n_workers++;
    }
}

static void fat5__pool_run(fat5_ctx *ctx, fat5__pool_fn fn, void *arg, int parts) {
    struct fat5__pool *pl;
    int p;
    if (parts > 1 && !ctx->pool) fat5__pool_start(ctx);
    pl = ctx->pool;
    if (parts <= 1 || !pl || pl->n_workers == 0) {
        for (p = 0; p < parts; p++) fn(arg, p, parts);
        return;
    }
    pthread_mutex_lock(&pl->mu);
    pl->fn = fn;
    pl->arg = arg;
    pl->parts = parts;
    pl->pending = pl->n_workers;
    pl->job++;
    pthread_cond_broadcast(&pl->wake);
    pthread_mutex_unlock(&pl->mu);
    fn(arg, 0, parts);
    // parts the workers cannot take (fewer started than asked for) run here
    for (p = pl->n_workers + 1; p < parts; p++) fn(arg, p, parts);
    pthread_mutex_lock(&pl->mu);
    while (pl->pending > 0) pthread_cond_wait(&pl->done, &pl->mu);
    pthread_mutex_unlock(&pl->mu);
}
#else
static void fat5__pool_destroy(fat5_ctx *ctx) { (void)ctx; }
static void fat5__pool_run(fat5_ctx *ctx, fat5__pool_fn fn, void *arg, int parts) {
    int p;
    (void)ctx;
    for (p = 0; p < parts; p++) fn(arg, p, parts);
}
#endif

// cfg.n_threads resolved: 0 = the online CPUs; at most 256
static int fat5__resolve_threads(int n) {
#if FAT5__THREADS
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)(c < 256 ? c : 256) : 1;
    }
    return n < 1 ? 1 : n > 256 ? 256 : n;
#else
    (void)n;
    return 1;
#endif
}

static fat5_status fat5__dev_open(fat5_ctx *ctx);
static void fat5__dev_close(fat5_ctx *ctx);

FAT5_API fat5_status fat5_ctx_create(const fat5_ctx_config *cfg, fat5_ctx **out) {
    fat5_ctx_config c = cfg ? *cfg : fat5_ctx_config_default();
    fat5_ctx *ctx;
    int bad_hooks = (c.alloc != NULL) != (c.free != NULL) || (c.realloc != NULL) != (c.free != NULL);
    if (!out) return FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (bad_hooks) {  // the context that reports it lives on the default allocator
        c.alloc = NULL;
        c.realloc = NULL;
        c.free = NULL;
    }
    ctx = FAT5__CAST(fat5_ctx *, c.alloc ? c.alloc(c.alloc_user, sizeof *ctx) : FAT5_MALLOC(sizeof *ctx));
    if (!ctx) return FAT5_ERR_OUT_OF_MEMORY;
    memset(ctx, 0, sizeof *ctx);
    ctx->cfg = c;
    if (c.attention) {  // copied: the caller's struct is not kept
        ctx->attention = *c.attention;
        ctx->cfg.attention = &ctx->attention;
    }
    *out = ctx;
    if (bad_hooks)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_ctx_create: the alloc, realloc and free hooks must be given together (all or none)");
    ctx->n_threads = 1;
    if (c.dtype != FAT5_DTYPE_FP32 && c.dtype != FAT5_DTYPE_BF16)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown dtype %d", (int)c.dtype);
    if (c.n_threads < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: n_threads %d (0 = one per CPU, or >= 1)",
                         c.n_threads);
    ctx->n_threads = fat5__resolve_threads(c.n_threads);
    if (c.device == FAT5_DEVICE_GPU) return fat5__dev_open(ctx);
    if (c.device != FAT5_DEVICE_CPU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown device %d", (int)c.device);
    return FAT5_OK;
}

FAT5_API void fat5_ctx_destroy(fat5_ctx *ctx) {
    if (!ctx) return;
    fat5__pool_destroy(ctx);
    fat5__dev_close(ctx);
    fat5__free(ctx, ctx->scratch);
    if (ctx->cfg.free) ctx->cfg.free(ctx->cfg.alloc_user, ctx);
    else FAT5_FREE(ctx);
}

FAT5_API const char *fat5_last_error(const fat5_ctx *ctx) { return ctx ? ctx->err : "no context"; }
FAT5_API fat5_device fat5_ctx_device(const fat5_ctx *ctx) { return ctx->cfg.device; }

// seconds on a monotonic clock (timings and progress)
static double fat5__now_s(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// =============================================================================================
// ==[1.2] base: RNG ==
// Philox4x32-10 (Salmon et al., SC'11). Block i of stream `seed` is philox(key = seed,
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

// =============================================================================================
// ==[1.3] base: messages, UTF-8, JSON reader and writer, atomic file writes, 16-bit floats ==

static size_t fat5__utf8_len(const char *s, size_t avail);

// The character at s in a message: returns its length when it may be printed as it is, 0 for a
// control character (C0, DEL, or C1 U+0080..U+009F, which some terminals obey too) or a byte that
// is not valid UTF-8; *skip gets the bytes it spans (1 for an invalid byte).
static size_t fat5__msg_char(const char *s, size_t *skip) {
    unsigned char c = (unsigned char)s[0];
    size_t k;
    *skip = 1;
    if (c < 0x20 || c == 0x7f) return 0;
    if (c < 0x80) return 1;
    k = fat5__utf8_len(s, 4);   // stops at the first byte that is not a continuation, e.g. the NUL
    if (k == 0) return 0;
    *skip = k;
    return k == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0 ? 0 : k;
}

// 1 when s prints as it is in a message (fat5__msg_name would not change a byte of it)
static int fat5__msg_safe(const char *s) {
    size_t skip;
    for (; *s; s += skip)
        if (fat5__msg_char(s, &skip) == 0) return 0;
    return 1;
}

// A string taken from a file (a name, key or value), made fit for an error message: each control
// character or invalid byte shown as one '?' (a key holding ESC "[2J" must not reach a terminal
// as an escape sequence), at most cap-1 bytes, cut on a character boundary with "...". Returns
// buf.
static const char *fat5__msg_name(char *buf, size_t cap, const char *s) {
    size_t i = 0, skip;
    if (cap == 0) return "";
    for (; *s; s += skip) {
        size_t k = fat5__msg_char(s, &skip), n = k ? k : 1;
        if (n > cap - 1 - i) break;
        if (k) memcpy(buf + i, s, k);
        else buf[i] = '?';
        i += n;
    }
    if (*s && cap >= 8) {   // cut: make room for "..." without splitting a character
        while (i > cap - 4) {
            do i--;
            while (i > 0 && ((unsigned char)buf[i] & 0xC0) == 0x80);
        }
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = 0;
    return buf;
}

// Length of the UTF-8 sequence at s (at most avail bytes), 0 when it is not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
static size_t fat5__utf8_len(const char *s, size_t avail) {
    unsigned char c = (unsigned char)s[0], lo = 0x80, hi = 0xBF;
    size_t k, j;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;   // overlong
        if (c == 0xED) hi = 0x9F;   // U+D800..U+DFFF
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;   // overlong
        if (c == 0xF4) hi = 0x8F;   // above U+10FFFF
    } else {
        return 0;
    }
    if (avail < k) return 0;
    for (j = 1; j < k; j++) {
        unsigned char t = (unsigned char)s[j];
        if (t < lo || t > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
    }
    return k;
}

static int fat5__utf8_valid(const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = fat5__utf8_len(s + i, n - i);
        if (k == 0) return 0;
        i += k;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// JSON reader. Values form a tree linked first-child / next-sibling; every node and string of a
// document lives in a few arena blocks owned by the fat5__jdoc and freed together.

typedef enum {
    FAT5__J_NULL, FAT5__J_FALSE, FAT5__J_TRUE, FAT5__J_NUMBER, FAT5__J_STRING, FAT5__J_ARRAY,
    FAT5__J_OBJECT
} fat5__jtype;

typedef struct fat5__json fat5__json;
struct fat5__json {
    fat5__jtype type;
    const char *key;      // member name inside an object (unescaped, NUL-terminated), else NULL
    const char *str;      // STRING: unescaped UTF-8, NUL-terminated; NUMBER: the literal text
    size_t len;           // strlen of str
    fat5__json *child;    // ARRAY / OBJECT: first element
    fat5__json *next;     // next sibling
    size_t n;             // ARRAY / OBJECT: number of elements
};

typedef struct fat5__jblock {
    struct fat5__jblock *next;
    size_t cap, used;     // bytes of payload after the (aligned) block header
} fat5__jblock;

typedef struct fat5__jdoc {
    fat5__json *root;
    fat5__jblock *blocks; // the head block serves small allocations
    size_t block_size;    // payload size of the next regular block (grows to 1 MiB)
} fat5__jdoc;

#define FAT5__JALIGN (sizeof(void *) > 8 ? sizeof(void *) : (size_t)8)
#define FAT5__JBLOCK_HDR ((sizeof(fat5__jblock) + FAT5__JALIGN - 1) / FAT5__JALIGN * FAT5__JALIGN)

typedef struct fat5__jkey { const char *key; size_t pos; } fat5__jkey;

typedef struct fat5__jp {
    fat5_ctx *ctx;
    const char *what;     // message prefix ("config.json"), may be NULL
    const char *s;
    size_t len, pos;
    int max_depth;
    fat5__jdoc *doc;
    fat5_status st;       // first error
    fat5__jkey *keys;     // keys of the objects being parsed, innermost last (duplicate check)
    size_t n_keys, cap_keys;
    size_t dom_bytes;     // bytes of nodes and strings so far, bounded by FAT5__JSON_MAX_DOM
} fat5__jp;

// A document whose tree would take more than this is refused before it exhausts memory (a
// hostile 100 MiB safetensors header of tiny values would otherwise need gigabytes).
#define FAT5__JSON_MAX_DOM ((size_t)256 << 20)

// Records "what: JSON: line L column C: msg" and returns 0.
static FAT5__PRINTF(3, 4) int fat5__jp_fail(fat5__jp *p, size_t at, const char *fmt, ...) {
    char msg[512];
    size_t i, line = 1, col = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    p->st = FAT5_ERR_FORMAT;
    fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s%sJSON: line %zu column %zu: %s", p->what ? p->what : "",
              p->what ? ": " : "", line, col, msg);
    return 0;
}

static int fat5__jp_oom(fat5__jp *p) {
    p->st = FAT5_ERR_OUT_OF_MEMORY;
    fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s%sJSON: out of memory", p->what ? p->what : "",
              p->what ? ": " : "");
    return 0;
}

static void *fat5__jalloc(fat5__jp *p, size_t n) {
    fat5__jdoc *d = p->doc;
    fat5__jblock *b = d->blocks;
    size_t need, total;
    char *mem;
    if (!fat5__add_ok(n, FAT5__JALIGN - 1, &need)) {
        fat5__jp_oom(p);
        return NULL;
    }
    need = need / FAT5__JALIGN * FAT5__JALIGN;
    if (need > FAT5__JSON_MAX_DOM - p->dom_bytes) {
        fat5__jp_fail(p, p->pos, "document too large: its tree would take more than %zu MiB",
                      FAT5__JSON_MAX_DOM >> 20);
        return NULL;
    }
    p->dom_bytes += need;
    if (!b || b->cap - b->used < need) {
        int big = need > d->block_size / 4;   // a long string gets a block of its own
        size_t cap = big ? need : d->block_size;
        if (!fat5__add_ok(cap, FAT5__JBLOCK_HDR, &total) ||
            !(b = FAT5__CAST(fat5__jblock *, fat5__malloc(p->ctx, total)))) {
            fat5__jp_oom(p);
            return NULL;
        }
        b->cap = cap;
        b->used = 0;
        if (big && d->blocks) {   // keep the current head serving small allocations
            b->next = d->blocks->next;
            d->blocks->next = b;
        } else {
            b->next = d->blocks;
            d->blocks = b;
            if (!big && d->block_size < ((size_t)1 << 20)) d->block_size *= 2;
        }
    }
    mem = FAT5__CAST(char *, FAT5__CAST(void *, b)) + FAT5__JBLOCK_HDR + b->used;
    b->used += need;
    return mem;
}

static void fat5__jp_ws(fat5__jp *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int fat5__jp_digit(const fat5__jp *p, size_t i) {
    return i < p->len && p->s[i] >= '0' && p->s[i] <= '9';
}

// "'x'" for a printable character, "byte 0xHH" otherwise, "end of input" past the end
static const char *fat5__jp_desc(const fat5__jp *p, size_t i, char buf[16]) {
    unsigned char c;
    if (i >= p->len) return "end of input";
    c = (unsigned char)p->s[i];
    if (c > 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", (char)c);
    else snprintf(buf, 16, "byte 0x%02X", (unsigned)c);
    return buf;
}

static int fat5__jp_hex4(const fat5__jp *p, size_t i, size_t end, uint32_t *out) {
    uint32_t v = 0;
    size_t k;
    if (end < i || end - i < 4) return 0;
    for (k = 0; k < 4; k++) {
        char c = p->s[i + k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static size_t fat5__utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Parses the string starting at the '"' at p->pos into an arena copy (unescaped, NUL-terminated).
// The unescaped text is never longer than the source, so one allocation of the source size fits.
static int fat5__jp_string(fat5__jp *p, const char **out, size_t *out_len) {
    size_t start = p->pos + 1, i = start, end, n = 0;
    char *o;
    for (;;) {   // find the closing quote
        unsigned char c;
        if (i >= p->len) return fat5__jp_fail(p, p->pos, "unterminated string");
        c = (unsigned char)p->s[i];
        if (c == '"') break;
        if (c < 0x20)
            return fat5__jp_fail(p, i, "control character 0x%02X in a string (must be escaped)",
                                 (unsigned)c);
        i += (c == '\\') ? 2 : 1;
    }
    end = i;
    o = FAT5__CAST(char *, fat5__jalloc(p, end - start + 1));
    if (!o) return 0;
    for (i = start; i < end;) {
        unsigned char c = (unsigned char)p->s[i];
        if (c == '\\') {
            char e = p->s[i + 1];   // i + 1 < end: the scan above stepped over it
            uint32_t cp, lo;
            switch (e) {
            case '"': o[n++] = '"'; break;
            case '\\': o[n++] = '\\'; break;
            case '/': o[n++] = '/'; break;
            case 'b': o[n++] = '\b'; break;
            case 'f': o[n++] = '\f'; break;
            case 'n': o[n++] = '\n'; break;
            case 'r': o[n++] = '\r'; break;
            case 't': o[n++] = '\t'; break;
            case 'u':
                if (!fat5__jp_hex4(p, i + 2, end, &cp))
                    return fat5__jp_fail(p, i, "invalid \\u escape (expected 4 hex digits)");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (i + 8 <= end && p->s[i + 6] == '\\' && p->s[i + 7] == 'u' &&
                        fat5__jp_hex4(p, i + 8, end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    } else {
                        return fat5__jp_fail(p, i, "lone surrogate \\u%04X (a high surrogate must "
                                             "be followed by a low one)", (unsigned)cp);
                    }
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fat5__jp_fail(p, i, "lone surrogate \\u%04X (a low surrogate without "
                                         "a high one)", (unsigned)cp);
                } else if (cp == 0) {
                    return fat5__jp_fail(p, i, "\\u0000 in a string is not supported (strings "
                                         "are NUL-terminated)");
                }
                n += fat5__utf8_put(o + n, cp);
                i += 4;
                break;
            default: {
                char buf[16];
                return fat5__jp_fail(p, i, "invalid escape: backslash followed by %s",
                                     fat5__jp_desc(p, i + 1, buf));
            }
            }
            i += 2;
        } else if (c < 0x80) {
            o[n++] = (char)c;
            i++;
        } else {
            size_t k = fat5__utf8_len(p->s + i, end - i);
            if (k == 0) return fat5__jp_fail(p, i, "invalid UTF-8 in a string");
            memcpy(o + n, p->s + i, k);
            n += k;
            i += k;
        }
    }
    o[n] = 0;
    *out = o;
    *out_len = n;
    p->pos = end + 1;
    return 1;
}

// number = [ "-" ] ( "0" / [1-9] *DIGIT ) [ "." 1*DIGIT ] [ ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT ]
static int fat5__jp_number(fat5__jp *p, fat5__json *v) {
    size_t i = p->pos, n;
    char *o;
    if (p->s[i] == '-') i++;
    if (!fat5__jp_digit(p, i)) return fat5__jp_fail(p, i, "invalid number: expected a digit");
    if (p->s[i] == '0') {
        i++;
        if (fat5__jp_digit(p, i)) return fat5__jp_fail(p, i - 1, "leading zero in a number");
    } else {
        while (fat5__jp_digit(p, i)) i++;
    }
    if (i < p->len && p->s[i] == '.') {
        i++;
        if (!fat5__jp_digit(p, i))
            return fat5__jp_fail(p, i, "invalid number: expected a digit after '.'");
        while (fat5__jp_digit(p, i)) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (!fat5__jp_digit(p, i))
            return fat5__jp_fail(p, i, "invalid number: expected a digit in the exponent");
        while (fat5__jp_digit(p, i)) i++;
    }
    n = i - p->pos;
    o = FAT5__CAST(char *, fat5__jalloc(p, n + 1));
    if (!o) return 0;
    memcpy(o, p->s + p->pos, n);
    o[n] = 0;
    v->type = FAT5__J_NUMBER;
    v->str = o;
    v->len = n;
    p->pos = i;
    return 1;
}

static int fat5__jp_literal(fat5__jp *p, fat5__json *v) {
    const char *lit;
    size_t n;
    switch (p->s[p->pos]) {
    case 't': lit = "true"; v->type = FAT5__J_TRUE; break;
    case 'f': lit = "false"; v->type = FAT5__J_FALSE; break;
    default: lit = "null"; v->type = FAT5__J_NULL; break;
    }
    n = strlen(lit);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0)
        return fat5__jp_fail(p, p->pos, "invalid literal (expected true, false or null)");
    p->pos += n;
    return 1;
}

static int fat5__jp_push_key(fat5__jp *p, const char *key, size_t pos) {
    if (p->n_keys == p->cap_keys) {
        size_t cap = p->cap_keys ? p->cap_keys * 2 : 64, bytes;
        fat5__jkey *k;
        if (!fat5__mul_ok(cap, sizeof *k, &bytes) ||
            !(k = FAT5__CAST(fat5__jkey *, fat5__realloc(p->ctx, p->keys, bytes))))
            return fat5__jp_oom(p);
        p->keys = k;
        p->cap_keys = cap;
    }
    p->keys[p->n_keys].key = key;
    p->keys[p->n_keys].pos = pos;
    p->n_keys++;
    return 1;
}

static int fat5__jkey_cmp(const void *a, const void *b) {
    const fat5__jkey *x = FAT5__CAST(const fat5__jkey *, a), *y = FAT5__CAST(const fat5__jkey *, b);
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos ? 1 : 0;
}

// Checks the keys of one object, p->keys[base..n_keys), for duplicates (sorting: O(n log n) even
// for a hostile header with millions of keys) and reports the first repeat in document order.
static int fat5__jp_check_dups(fat5__jp *p, size_t base) {
    fat5__jkey *k = p->keys + base;
    size_t n = p->n_keys - base, i, dup = 0;
    if (n < 2) return 1;
    qsort(k, n, sizeof *k, fat5__jkey_cmp);
    for (i = 1; i < n; i++)
        if (strcmp(k[i - 1].key, k[i].key) == 0 && (dup == 0 || k[i].pos < k[dup].pos)) dup = i;
    if (dup) {
        char name[128];
        return fat5__jp_fail(p, k[dup].pos, "duplicate key \"%s\" in an object",
                             fat5__msg_name(name, sizeof name, k[dup].key));
    }
    return 1;
}

static fat5__json *fat5__jp_value(fat5__jp *p, int depth);

// Parses the object or array at p->pos; depth = number of enclosing containers.
static int fat5__jp_container(fat5__jp *p, fat5__json *v, int depth) {
    int is_obj = p->s[p->pos] == '{';
    char close = is_obj ? '}' : ']';
    size_t key_base = p->n_keys;
    fat5__json **tail = &v->child;
    v->type = is_obj ? FAT5__J_OBJECT : FAT5__J_ARRAY;
    if (depth >= p->max_depth)
        return fat5__jp_fail(p, p->pos, "nesting deeper than %d levels", p->max_depth);
    p->pos++;
    fat5__jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 1;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len;
        fat5__json *child;
        char buf[16];
        if (is_obj) {
            fat5__jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fat5__jp_fail(p, p->pos, "expected a string key, got %s",
                                     fat5__jp_desc(p, p->pos, buf));
            if (!fat5__jp_push_key(p, NULL, p->pos)) return 0;
            if (!fat5__jp_string(p, &key, &key_len)) return 0;
            p->keys[p->n_keys - 1].key = key;
            fat5__jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fat5__jp_fail(p, p->pos, "expected ':' after object key");
            p->pos++;
        }
        child = fat5__jp_value(p, depth + 1);
        if (!child) return 0;
        child->key = key;
        *tail = child;
        tail = &child->next;
        v->n++;
        fat5__jp_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            fat5__jp_ws(p);
            if (p->pos < p->len && p->s[p->pos] == close)
                return fat5__jp_fail(p, p->pos, "trailing comma before '%c'", close);
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        return fat5__jp_fail(p, p->pos, "expected ',' or '%c' after %s, got %s", close,
                             is_obj ? "an object member" : "an array element",
                             fat5__jp_desc(p, p->pos, buf));
    }
    if (is_obj && !fat5__jp_check_dups(p, key_base)) return 0;
    p->n_keys = key_base;
    return 1;
}

static fat5__json *fat5__jp_value(fat5__jp *p, int depth) {
    fat5__json *v;
    char c, buf[16];
    int ok;
    fat5__jp_ws(p);
    if (p->pos >= p->len) {
        fat5__jp_fail(p, p->pos, "unexpected end of input (expected a value)");
        return NULL;
    }
    v = FAT5__CAST(fat5__json *, fat5__jalloc(p, sizeof *v));
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    c = p->s[p->pos];
    if (c == '{' || c == '[') {
        ok = fat5__jp_container(p, v, depth);
    } else if (c == '"') {
        v->type = FAT5__J_STRING;
        ok = fat5__jp_string(p, &v->str, &v->len);
    } else if (c == 't' || c == 'f' || c == 'n') {
        ok = fat5__jp_literal(p, v);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        ok = fat5__jp_number(p, v);
    } else {
        ok = fat5__jp_fail(p, p->pos, "unexpected %s (expected a value)",
                           fat5__jp_desc(p, p->pos, buf));
    }
    return ok ? v : NULL;
}

static void fat5__json_free(fat5_ctx *ctx, fat5__jdoc *d) {
    fat5__jblock *b, *next;
    if (!d) return;
    for (b = d->blocks; b; b = next) {
        next = b->next;
        fat5__free(ctx, b);
    }
    fat5__free(ctx, d);
}

// Parses src[0..len) strictly (RFC 8259): the whole input is one value with optional whitespace
// around it; containers nest at most max_depth deep; literals are exact; strings hold valid UTF-8,
// no raw control characters, valid escapes (surrogates paired; \u0000 rejected); numbers follow
// the grammar; keys are unique within an object. Errors are FAT5_ERR_FORMAT, "what: JSON: line L
// column C: ...".
static fat5_status fat5__json_parse(fat5_ctx *ctx, const char *what, const char *src, size_t len,
                                    int max_depth, fat5__jdoc **out) {
    fat5__jp p;
    fat5__jdoc *d;
    fat5__json *root;
    *out = NULL;
    if (!src && len) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__json_parse: src is NULL");
    d = FAT5__CAST(fat5__jdoc *, fat5__calloc(ctx, 1, sizeof *d));
    if (!d) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s%sJSON: out of memory",
                             what ? what : "", what ? ": " : "");
    d->block_size = 4096;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.what = what;
    p.s = src ? src : "";
    p.len = len;
    p.max_depth = max_depth;
    p.doc = d;
    p.st = FAT5_OK;
    root = fat5__jp_value(&p, 0);
    if (root) {
        fat5__jp_ws(&p);
        if (p.pos != p.len) {
            char buf[16];
            fat5__jp_fail(&p, p.pos, "unexpected %s after the JSON value (trailing data)",
                          fat5__jp_desc(&p, p.pos, buf));
        }
    }
    fat5__free(ctx, p.keys);
    if (p.st != FAT5_OK) {
        fat5__json_free(ctx, d);
        return p.st;
    }
    d->root = root;
    *out = d;
    return FAT5_OK;
}

static const fat5__json *fat5__json_root(const fat5__jdoc *d) { return d ? d->root : NULL; }

// member of an object by key; NULL if absent or obj is not an object
static const fat5__json *fat5__json_get(const fat5__json *obj, const char *key) {
    const fat5__json *c;
    if (!obj || obj->type != FAT5__J_OBJECT) return NULL;
    for (c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0) return c;
    return NULL;
}

static const char *fat5__json_type_name(fat5__jtype t) {
    switch (t) {
    case FAT5__J_NULL: return "null";
    case FAT5__J_FALSE: case FAT5__J_TRUE: return "a boolean";
    case FAT5__J_NUMBER: return "a number";
    case FAT5__J_STRING: return "a string";
    case FAT5__J_ARRAY: return "an array";
    case FAT5__J_OBJECT: return "an object";
    }
    return "?";
}

// Number helpers: 1 on success. Integers are read digit by digit with overflow checks, never
// through double; a literal with '.' or an exponent is not an integer.
static int fat5__json_as_u64(const fat5__json *v, uint64_t *out) {
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    return fat5__parse_u64(v->str, v->len, out);
}

static int fat5__json_as_i64(const fat5__json *v, int64_t *out) {
    const char *s;
    size_t n;
    uint64_t m;
    int neg;
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    s = v->str;
    n = v->len;
    neg = n > 0 && s[0] == '-';
    if (neg) {
        s++;
        n--;
    }
    if (!fat5__parse_u64(s, n, &m)) return 0;
    if (!neg) {
        if (m > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)m;
    } else {
        if (m > (uint64_t)INT64_MAX + 1) return 0;
        *out = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
    }
    return 1;
}

#include <locale.h>

// JSON numbers use '.' whatever LC_NUMERIC says, and strtod / printf use the locale's decimal
// point (',' in de_DE or fr_FR). The two helpers below translate between them, so a program that
// calls setlocale still reads and writes the same JSON.

// strtod of the whole NUL-terminated decimal s (a validated JSON number: digits, at most one '.',
// an exponent), independent of the locale: the '.' is replaced by the locale's decimal point in
// a copy (on the stack; on the heap only for a literal above 120 bytes). 1 when all of s was
// read and the value is finite.
static int fat5__strtod_c(const char *s, double *out) {
    const char *dp = localeconv()->decimal_point, *dot = strchr(s, '.');
    char small[128], *buf = small, *end;
    size_t n, dl;
    double d;
    int ok;
    if (!dp || !dp[0]) dp = ".";
    dl = strlen(dp);
    if (!dot || strcmp(dp, ".") == 0) {
        d = strtod(s, &end);
        ok = *end == 0;
    } else {
        n = strlen(s);
        if (n + dl + 1 > sizeof small && !(buf = FAT5__CAST(char *, fat5__malloc(NULL, n + dl + 1))))
            return 0;
        memcpy(buf, s, (size_t)(dot - s));
        memcpy(buf + (dot - s), dp, dl);
        memcpy(buf + (dot - s) + dl, dot + 1, n - (size_t)(dot - s));   // with the NUL
        d = strtod(buf, &end);
        ok = *end == 0;
        if (buf != small) fat5__free(NULL, buf);
    }
    if (!ok || d == HUGE_VAL || d == -HUGE_VAL || d != d) return 0;
    *out = d;
    return 1;
}

// snprintf(buf, cap, "%.*g", prec, x) with '.' as the decimal point whatever the locale
static void fat5__fmt_g(char *buf, size_t cap, int prec, double x) {
    const char *dp = localeconv()->decimal_point;
    char *at;
    snprintf(buf, cap, "%.*g", prec, x);
    if (dp && dp[0] && strcmp(dp, ".") != 0 && (at = strstr(buf, dp)) != NULL) {
        size_t dl = strlen(dp);
        *at = '.';
        memmove(at + 1, at + dl, strlen(at + dl) + 1);
    }
}

// the validated literal as a double, whatever the locale; values that overflow a double fail
static int fat5__json_as_double(const fat5__json *v, double *out) {
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    return fat5__strtod_c(v->str, out);
}

#ifndef _WIN32
#include <fcntl.h>
#endif

// Opens path for reading when it is a regular file; *size (may be NULL) gets its size. A FIFO, a
// device or a directory is refused with FAT5_ERR_IO and never blocks: the open is non-blocking
// (a FIFO without a writer would otherwise wait forever), and the flag is cleared once fstat has
// shown a regular file.
static fat5_status fat5__open_regular(fat5_ctx *ctx, const char *path, FILE **out, uint64_t *size) {
#ifdef _WIN32
    FILE *fp = fopen(path, "rb");
    *out = NULL;
    if (!fp) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (size) {
        if (_fseeki64(fp, 0, SEEK_END) != 0 || _ftelli64(fp) < 0 || _fseeki64(fp, 0, SEEK_SET) != 0) {
            int e = errno;
            fclose(fp);
            return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot get the file size: %s", path, strerror(e));
        }
        *size = (uint64_t)_ftelli64(fp);
    }
    *out = fp;
    return FAT5_OK;
#else
    struct stat sb;
    FILE *fp;
    int fd, fl, e, flags = O_RDONLY | O_NONBLOCK;
    const char *what;
#ifdef O_CLOEXEC
    flags |= O_CLOEXEC;
#endif
    *out = NULL;
    do fd = open(path, flags);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        e = errno;
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot get the file size: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        what = S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO"
               : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : "a special file";
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: not a regular file (%s)", path, what);
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        !(fp = fdopen(fd, "rb"))) {
        e = errno;
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    if (size) *size = (uint64_t)sb.st_size;
    *out = fp;
    return FAT5_OK;
#endif
}

static int fat5__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Reads a whole regular file into a NUL-terminated buffer (free with fat5__free). FAT5_ERR_IO when
// it cannot be read or is not a regular file, FAT5_ERR_FORMAT when it holds more than max_size
// bytes.
static fat5_status fat5__read_file(fat5_ctx *ctx, const char *path, size_t max_size, char **out,
                                   size_t *out_len) {
    FILE *fp;
    char *buf = NULL;
    size_t len = 0, cap = 0, limit = max_size < SIZE_MAX - 1 ? max_size + 1 : SIZE_MAX - 1;
    fat5_status st;
    *out = NULL;
    if (out_len) *out_len = 0;
    if ((st = fat5__open_regular(ctx, path, &fp, NULL)) != FAT5_OK) return st;
    for (;;) {
        size_t got;
        if (len == cap) {   // grow; never beyond one byte past the limit (+1 for the NUL)
            size_t ncap = cap ? (cap <= limit / 2 ? cap * 2 : limit)
                              : (limit < 4096 ? limit : 4096);
            char *nb = FAT5__CAST(char *, fat5__realloc(ctx, buf, ncap + 1));
            if (!nb) {
                fclose(fp);
                fat5__free(ctx, buf);
                return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory reading the file",
                                 path);
            }
            buf = nb;
            cap = ncap;
        }
        got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (len > max_size) {
            fclose(fp);
            fat5__free(ctx, buf);
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: file is larger than the limit of %zu bytes",
                             path, max_size);
        }
        if (len < cap) {   // short read: end of file or an error
            if (ferror(fp)) {
                int e = errno;
                fclose(fp);
                fat5__free(ctx, buf);
                return fat5__err(ctx, FAT5_ERR_IO, "%s: read failed: %s", path, strerror(e));
            }
            break;
        }
    }
    fclose(fp);
    buf[len] = 0;
    *out = buf;
    if (out_len) *out_len = len;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// JSON writer: a growable string. Out of memory latches b->oom; callers check it once at the end.

typedef struct fat5__sb {
    fat5_ctx *ctx;
    char *buf;            // NUL-terminated once anything was written
    size_t len, cap;
    int oom;
} fat5__sb;

static void fat5__sb_init(fat5__sb *b, fat5_ctx *ctx) {
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
}

static int fat5__sb_reserve(fat5__sb *b, size_t extra) {
    size_t need, cap;
    char *nb;
    if (b->oom) return 0;
    if (!fat5__add_ok(b->len, extra, &need) || !fat5__add_ok(need, 1, &need)) {
        b->oom = 1;
        return 0;
    }
    if (need <= b->cap) return 1;
    cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap <= SIZE_MAX / 2 ? cap * 2 : need;
    nb = FAT5__CAST(char *, fat5__realloc(b->ctx, b->buf, cap));
    if (!nb) {
        b->oom = 1;
        return 0;
    }
    b->buf = nb;
    b->cap = cap;
    return 1;
}

static void fat5__sb_putn(fat5__sb *b, const char *s, size_t n) {
    if (!fat5__sb_reserve(b, n)) return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void fat5__sb_puts(fat5__sb *b, const char *s) { fat5__sb_putn(b, s, strlen(s)); }

static FAT5__PRINTF(2, 3) void fat5__sb_printf(fat5__sb *b, const char *fmt, ...) {
    va_list ap, ap2;
    int n;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        b->oom = 1;
    } else if (fat5__sb_reserve(b, (size_t)n)) {
        vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
    va_end(ap);
}

// s as a JSON string: quoted, with '"', '\' and control characters escaped; other bytes as they are
static void fat5__sb_json_string(fat5__sb *b, const char *s) {
    size_t run;
    fat5__sb_putn(b, "\"", 1);
    while (*s) {
        for (run = 0; s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20;)
            run++;
        fat5__sb_putn(b, s, run);
        s += run;
        if (*s == '"' || *s == '\\') {
            char e[2];
            e[0] = '\\';
            e[1] = *s;
            fat5__sb_putn(b, e, 2);
            s++;
        } else if (*s) {
            fat5__sb_printf(b, "\\u%04X", (unsigned)(unsigned char)*s);
            s++;
        }
    }
    fat5__sb_putn(b, "\"", 1);
}

static void fat5__sb_free(fat5__sb *b) {
    fat5__free(b->ctx, b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

// ---------------------------------------------------------------------------------------------
// Atomic file writes: a temporary file "<path>.tmp.XXXXXX" in the same directory is written,
// flushed to disk and renamed over path, so a crash leaves either the old file or the new one.

typedef struct fat5__afile {
    char *tmp;            // temporary path; removed on abort
#ifdef _WIN32
    FILE *fp;
#else
    int fd;
#endif
} fat5__afile;

static void fat5__afile_abort(fat5_ctx *ctx, fat5__afile *a) {
    if (!a->tmp) return;
#ifdef _WIN32
    if (a->fp) fclose(a->fp);
    a->fp = NULL;
#else
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
#endif
    remove(a->tmp);
    fat5__free(ctx, a->tmp);
    a->tmp = NULL;
}

static fat5_status fat5__afile_open(fat5_ctx *ctx, const char *path, fat5__afile *a) {
    size_t n = strlen(path);
    int e;
    memset(a, 0, sizeof *a);
    a->tmp = FAT5__CAST(char *, fat5__malloc(ctx, n + 12));
    if (!a->tmp) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, ".tmp.XXXXXX", 12);
#ifdef _WIN32
    a->tmp[n + 4] = 0;   // "<path>.tmp"
    a->fp = fopen(a->tmp, "wb");
    if (a->fp) return FAT5_OK;
#else
    a->fd = mkstemp(a->tmp);
    if (a->fd >= 0) {
        // mkstemp creates 0600; keep the mode of the file being replaced, else use 0644
        struct stat st;
        mode_t mode = 0644;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) mode = st.st_mode & 07777;
        (void)fchmod(a->fd, mode);
        return FAT5_OK;
    }
#endif
    e = errno;
    fat5__free(ctx, a->tmp);
    a->tmp = NULL;
    return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot create a temporary file beside it: %s", path,
                     strerror(e));
}

static fat5_status fat5__afile_write(fat5_ctx *ctx, fat5__afile *a, const char *path,
                                     const void *data, size_t n) {
    const char *p = FAT5__CAST(const char *, data);
    int e;
#ifdef _WIN32
    if (n == 0 || fwrite(p, 1, n, a->fp) == n) return FAT5_OK;
    e = errno;
#else
    while (n > 0) {
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(a->fd, p, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (n == 0) return FAT5_OK;
    e = errno;
#endif
    fat5__afile_abort(ctx, a);
    return fat5__err(ctx, FAT5_ERR_IO, "%s: write failed: %s", path, strerror(e));
}

// Flushes, closes and renames the temporary file over path; on failure removes it.
static fat5_status fat5__afile_commit(fat5_ctx *ctx, fat5__afile *a, const char *path) {
    const char *step;
    int e;
#ifdef _WIN32
    FILE *fp = a->fp;
    a->fp = NULL;
    step = "flush";
    if (fflush(fp) != 0) {
        e = errno;
        fclose(fp);
        goto fail;
    }
    step = "close";
    if (fclose(fp) != 0) goto fail_errno;
    remove(path);   // rename does not replace an existing file on Windows
#else
    int fd = a->fd;
    a->fd = -1;
    step = "fsync";
    if (fsync(fd) != 0) {
        e = errno;
        close(fd);
        goto fail;
    }
    step = "close";
    if (close(fd) != 0) goto fail_errno;
#endif
    step = "rename";
    if (rename(a->tmp, path) != 0) goto fail_errno;
    fat5__free(ctx, a->tmp);
    a->tmp = NULL;
    return FAT5_OK;
fail_errno:
    e = errno;
fail:
    fat5__afile_abort(ctx, a);
    return fat5__err(ctx, FAT5_ERR_IO, "%s: %s of the temporary file failed: %s", path, step,
                     strerror(e));
}

FAT5_API fat5_status fat5_write_file_atomic(fat5_ctx *ctx, const char *path, const void *data,
                                            size_t size) {
    fat5__afile a;
    fat5_status st;
    if (!path || (!data && size > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_write_file_atomic: %s is NULL",
                         path ? "data" : "path");
    st = fat5__afile_open(ctx, path, &a);
    if (st != FAT5_OK) return st;
    st = fat5__afile_write(ctx, &a, path, data, size);
    if (st != FAT5_OK) return st;
    return fat5__afile_commit(ctx, &a, path);
}

// ---------------------------------------------------------------------------------------------
// 16-bit floats. Bit-exact and free of type punning (memcpy), shared with the GPU code.

static float fat5__bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float fat5__bf16_to_f32(uint16_t h) { return fat5__bits_to_f32((uint32_t)h << 16); }

static float fat5__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0x1F) return fat5__bits_to_f32(sign | 0x7F800000u | (mant << 13));   // inf, NaN
    if (exp != 0) return fat5__bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return fat5__bits_to_f32(sign);                                   // +-0
    exp = 113;   // subnormal: mant * 2^-24, normalised
    while (!(mant & 0x400)) {
        mant <<= 1;
        exp--;
    }
    return fat5__bits_to_f32(sign | (exp << 23) | ((mant & 0x3FF) << 13));
}

// round to nearest, ties to even; NaN stays NaN (quieted, sign kept); overflow rounds to inf
static FAT5__UNUSED uint16_t fat5__f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040);
    u += 0x7FFFu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

// =============================================================================================
// ==[2] device: CUDA driver, NVRTC and cuBLAS at run time, kernel cache, memory, launches ==
// The CUDA driver, NVRTC and cuBLAS loaded at run time with dlopen (no CUDA headers or
// libraries at build time); the kernel module compiled by NVRTC and cached on disk; device memory,
// one stream, kernel launches, the cuBLAS handle. Nothing model-specific.
//
// Libraries, each tried bare (LD_LIBRARY_PATH, the ld.so cache), then in $CUDA_HOME/lib64,
// /usr/local/cuda/lib64 and /usr/local/cuda/targets/x86_64-linux/lib:
//     driver  libcuda.so.1, libcuda.so
//     NVRTC   libnvrtc.so.13, libnvrtc.so.12 (12 first when the driver is a 12.x one)
//     cuBLAS  libcublas.so.13, libcublas.so.12 (likewise)
// A missing library or device gives FAT5_ERR_NO_DEVICE with the dlerror() texts; the CPU path is
// untouched. Driver entry points are looked up by their versioned names (cuMemAlloc_v2, ...): the
// plain names are the legacy 32-bit ABI that cuda.h renames away.
//
// Kernels: all kernels/*.cu joined into one program (each file behind `#line 1 "kernels/<file>"`),
// compiled once per context for the device's architecture: a cubin for the newest sm_XY that NVRTC
// lists with the device's major and XY <= the device, else (a device newer than NVRTC knows) PTX
// for the newest listed target, JIT-compiled by the driver. The image is cached on disk in
//     cfg.cache_dir, else $FAT5_CACHE_DIR, else $XDG_CACHE_HOME/fat5, else ~/.cache/fat5
// ("" as cfg.cache_dir or $FAT5_CACHE_DIR turns it off), as fat5-<128-bit key>-<arch>.cubin|.ptx.
// The key hashes the cache format, FAT5_VERSION_STRING, the source, the options, the NVRTC and
// driver versions and the target; the file holds magic, format, kind, the key, the payload size
// and a payload hash, and is verified on every read (a bad file is recompiled and replaced).
// Writes are atomic (temp file + rename), so concurrent processes at worst both compile.
// FAT5_KERNELS_DIR=<dir> compiles <dir>/<file> for every embedded file name instead of the
// embedded copy (kernel development without `make embed`). FAT5_SYNC_LAUNCHES=1 synchronizes
// after every launch so an asynchronous fault is reported with the kernel that caused it.
//
// Streams: all work goes to one non-blocking stream of the device's primary context (which cuBLAS
// shares). A non-blocking stream does not order against the legacy NULL stream, so every copy here
// is the *Async form on that stream: never mix in the synchronous cuMemcpy* calls.
#ifndef FAT5_NO_CUDA
#include "fat5_kernels.cuh"

#ifdef _WIN32
#error "fat5.h: the GPU path needs dlopen (Linux); define FAT5_NO_CUDA to build the CPU path only"
#endif
#include <dlfcn.h>
#include <time.h>

typedef unsigned long long fat5__dptr;  // CUdeviceptr on 64-bit hosts

// ---- vendor mirrors: only what fat5 uses --------------------------------------------------------
// An enum type is mirrored by the integer type that GCC and Clang make compatible with it
// (unsigned int when no enumerator is negative, else int), so tests/test_abi.c can assign every
// real function to its mirrored pointer type and let the compiler check the whole prototype.
typedef unsigned int fat5__CUresult;              // CUresult
typedef int fat5__CUdevice;                       // CUdevice
typedef unsigned int fat5__CUdevice_attribute;    // CUdevice_attribute
typedef unsigned int fat5__CUfunction_attribute;  // CUfunction_attribute
typedef unsigned int fat5__CUjit_option;          // CUjit_option
typedef struct fat5__CUctx_st *fat5__CUcontext;
typedef struct fat5__CUmod_st *fat5__CUmodule;
typedef struct fat5__CUfunc_st *fat5__CUfunction;
typedef struct fat5__CUstream_st *fat5__CUstream;  // also cuBLAS's cudaStream_t
typedef struct fat5__CUgraph_st *fat5__CUgraph;
typedef struct fat5__CUgraphExec_st *fat5__CUgraphExec;
typedef struct fat5__CUevent_st *fat5__CUevent;
typedef unsigned int fat5__CUstreamCaptureMode;   // CUstreamCaptureMode
typedef unsigned int fat5__nvrtcResult;
typedef struct fat5__nvrtcProgram_st *fat5__nvrtcProgram;
typedef unsigned int fat5__cublasStatus_t;
typedef struct fat5__cublasContext *fat5__cublasHandle_t;
typedef unsigned int fat5__cublasOperation_t;
typedef unsigned int fat5__cudaDataType;
typedef unsigned int fat5__cublasComputeType_t;
typedef int fat5__cublasGemmAlgo_t;               // has CUBLAS_GEMM_DEFAULT = -1
typedef unsigned int fat5__cublasMath_t;

enum {
    FAT5__CUDA_SUCCESS = 0,
    FAT5__CUDA_ERROR_OUT_OF_MEMORY = 2,
    FAT5__CUDA_ERROR_STUB_LIBRARY = 34,
    FAT5__CUDA_ERROR_NOT_FOUND = 500,
    FAT5__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    FAT5__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    FAT5__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    FAT5__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    FAT5__CU_STREAM_NON_BLOCKING = 1,
    FAT5__CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    FAT5__CU_JIT_ERROR_LOG_BUFFER = 5,
    FAT5__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    FAT5__NVRTC_SUCCESS = 0,
    FAT5__CUBLAS_STATUS_SUCCESS = 0,
    FAT5__CUBLAS_OP_N = 0,
    FAT5__CUBLAS_OP_T = 1,
    FAT5__CUDA_R_32F = 0,
    FAT5__CUDA_R_16BF = 14,
    FAT5__CUBLAS_COMPUTE_32F = 68,  // fp32 compute, no TF32 (that is _FAST_TF32 or a TF32 math mode)
    FAT5__CUBLAS_GEMM_DEFAULT = -1,
    FAT5__CUBLAS_DEFAULT_MATH = 0,
    FAT5__CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16  // split-K sums in fp32 (bf16 C)
};

// driver (cuda.h)
typedef fat5__CUresult (*fat5__PFN_cuGetErrorName)(fat5__CUresult error, const char **str);
typedef fat5__CUresult (*fat5__PFN_cuGetErrorString)(fat5__CUresult error, const char **str);
typedef fat5__CUresult (*fat5__PFN_cuInit)(unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuDriverGetVersion)(int *version);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGetCount)(int *count);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGet)(fat5__CUdevice *dev, int ordinal);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGetName)(char *name, int len, fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDeviceGetAttribute)(int *value, fat5__CUdevice_attribute attr,
                                                         fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDeviceTotalMem)(size_t *bytes, fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDevicePrimaryCtxRetain)(fat5__CUcontext *pctx,
                                                             fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuDevicePrimaryCtxRelease)(fat5__CUdevice dev);
typedef fat5__CUresult (*fat5__PFN_cuCtxSetCurrent)(fat5__CUcontext c);
typedef fat5__CUresult (*fat5__PFN_cuStreamCreate)(fat5__CUstream *stream, unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuStreamDestroy)(fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuStreamSynchronize)(fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuModuleLoadDataEx)(fat5__CUmodule *module, const void *image,
                                                       unsigned int n_options,
                                                       fat5__CUjit_option *options, void **values);
typedef fat5__CUresult (*fat5__PFN_cuModuleUnload)(fat5__CUmodule module);
typedef fat5__CUresult (*fat5__PFN_cuModuleGetFunction)(fat5__CUfunction *fn, fat5__CUmodule module,
                                                        const char *name);
typedef fat5__CUresult (*fat5__PFN_cuFuncGetAttribute)(int *value, fat5__CUfunction_attribute attr,
                                                       fat5__CUfunction fn);
typedef fat5__CUresult (*fat5__PFN_cuFuncSetAttribute)(fat5__CUfunction fn,
                                                       fat5__CUfunction_attribute attr, int value);
typedef fat5__CUresult (*fat5__PFN_cuLaunchKernel)(fat5__CUfunction fn, unsigned int gx,
                                                   unsigned int gy, unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int smem, fat5__CUstream stream,
                                                   void **params, void **extra);
// cuLaunchKernelEx (CUDA 12; optional): only programmatic dependent launch is used. The two structs
// mirror CUlaunchConfig and CUlaunchAttribute (id, padding, a 64-byte value union).
typedef struct fat5__CUlaunchAttribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int i;
        long long align_;
    } value;
} fat5__CUlaunchAttribute;
typedef struct fat5__CUlaunchConfig {
    unsigned int gx, gy, gz, bx, by, bz, smem;
    fat5__CUstream stream;
    fat5__CUlaunchAttribute *attrs;
    unsigned int n_attrs;
} fat5__CUlaunchConfig;
#define FAT5__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef fat5__CUresult (*fat5__PFN_cuLaunchKernelEx)(const fat5__CUlaunchConfig *config, fat5__CUfunction fn,
                                                     void **args, void **extra);
typedef fat5__CUresult (*fat5__PFN_cuMemAlloc)(fat5__dptr *p, size_t bytes);
typedef fat5__CUresult (*fat5__PFN_cuMemFree)(fat5__dptr p);
typedef fat5__CUresult (*fat5__PFN_cuMemGetInfo)(size_t *free_b, size_t *total_b);
typedef fat5__CUresult (*fat5__PFN_cuMemcpyHtoDAsync)(fat5__dptr dst, const void *src, size_t bytes,
                                                      fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuMemcpyDtoHAsync)(void *dst, fat5__dptr src, size_t bytes,
                                                      fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuMemcpyDtoDAsync)(fat5__dptr dst, fat5__dptr src, size_t bytes,
                                                      fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuMemsetD8Async)(fat5__dptr p, unsigned char value, size_t n,
                                                    fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuStreamBeginCapture)(fat5__CUstream stream, fat5__CUstreamCaptureMode mode);
typedef fat5__CUresult (*fat5__PFN_cuStreamEndCapture)(fat5__CUstream stream, fat5__CUgraph *graph);
typedef fat5__CUresult (*fat5__PFN_cuGraphInstantiate)(fat5__CUgraphExec *exec, fat5__CUgraph graph,
                                                       unsigned long long flags);
typedef fat5__CUresult (*fat5__PFN_cuGraphLaunch)(fat5__CUgraphExec exec, fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuGraphExecDestroy)(fat5__CUgraphExec exec);
typedef fat5__CUresult (*fat5__PFN_cuGraphDestroy)(fat5__CUgraph graph);
// events: loaded only to profile (fat5__dev_prof_enable), from drivers that have them
typedef fat5__CUresult (*fat5__PFN_cuEventCreate)(fat5__CUevent *ev, unsigned int flags);
typedef fat5__CUresult (*fat5__PFN_cuEventRecord)(fat5__CUevent ev, fat5__CUstream stream);
typedef fat5__CUresult (*fat5__PFN_cuEventSynchronize)(fat5__CUevent ev);
typedef fat5__CUresult (*fat5__PFN_cuEventDestroy)(fat5__CUevent ev);
typedef fat5__CUresult (*fat5__PFN_cuEventElapsedTime)(float *ms, fat5__CUevent start, fat5__CUevent end);

// NVRTC (nvrtc.h, 11.2 or newer)
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcVersion)(int *major, int *minor);
typedef const char *(*fat5__PFN_nvrtcGetErrorString)(fat5__nvrtcResult r);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetNumSupportedArchs)(int *n);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetSupportedArchs)(int *archs);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcCreateProgram)(fat5__nvrtcProgram *prog, const char *src,
                                                          const char *name, int n_headers,
                                                          const char *const *headers,
                                                          const char *const *include_names);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcCompileProgram)(fat5__nvrtcProgram prog, int n_options,
                                                           const char *const *options);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetProgramLogSize)(fat5__nvrtcProgram prog, size_t *size);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetProgramLog)(fat5__nvrtcProgram prog, char *log);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetCUBINSize)(fat5__nvrtcProgram prog, size_t *size);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetCUBIN)(fat5__nvrtcProgram prog, char *cubin);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetPTXSize)(fat5__nvrtcProgram prog, size_t *size);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcGetPTX)(fat5__nvrtcProgram prog, char *ptx);
typedef fat5__nvrtcResult (*fat5__PFN_nvrtcDestroyProgram)(fat5__nvrtcProgram *prog);

// cuBLAS (cublas_api.h / cublas_v2.h)
typedef fat5__cublasStatus_t (*fat5__PFN_cublasCreate)(fat5__cublasHandle_t *handle);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasDestroy)(fat5__cublasHandle_t handle);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasGetVersion)(fat5__cublasHandle_t handle, int *version);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasSetStream)(fat5__cublasHandle_t handle,
                                                          fat5__CUstream stream);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasSetMathMode)(fat5__cublasHandle_t handle,
                                                            fat5__cublasMath_t mode);
typedef const char *(*fat5__PFN_cublasGetStatusName)(fat5__cublasStatus_t status);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasGemmEx)(
    fat5__cublasHandle_t handle, fat5__cublasOperation_t transa, fat5__cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, fat5__cudaDataType a_type, int lda,
    const void *B, fat5__cudaDataType b_type, int ldb, const void *beta, void *C,
    fat5__cudaDataType c_type, int ldc, fat5__cublasComputeType_t compute,
    fat5__cublasGemmAlgo_t algo);
typedef fat5__cublasStatus_t (*fat5__PFN_cublasGemmStridedBatchedEx)(
    fat5__cublasHandle_t handle, fat5__cublasOperation_t transa, fat5__cublasOperation_t transb,
    int m, int n, int k, const void *alpha, const void *A, fat5__cudaDataType a_type, int lda,
    long long stride_a, const void *B, fat5__cudaDataType b_type, int ldb, long long stride_b,
    const void *beta, void *C, fat5__cudaDataType c_type, int ldc, long long stride_c, int batch,
    fat5__cublasComputeType_t compute, fat5__cublasGemmAlgo_t algo);

// X(api, "exported symbol"): the field g->cu.<api> has type fat5__PFN_<api>. The symbol is the one
// the vendor header maps <api> to (tests/test_abi.c checks it).
#define FAT5__CU_API(X)                                                                            \
    X(cuGetErrorName, "cuGetErrorName")                                                            \
    X(cuGetErrorString, "cuGetErrorString")                                                        \
    X(cuInit, "cuInit")                                                                            \
    X(cuDriverGetVersion, "cuDriverGetVersion")                                                    \
    X(cuDeviceGetCount, "cuDeviceGetCount")                                                        \
    X(cuDeviceGet, "cuDeviceGet")                                                                  \
    X(cuDeviceGetName, "cuDeviceGetName")                                                          \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute")                                                \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")                                                     \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")                                        \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")                                   \
    X(cuCtxSetCurrent, "cuCtxSetCurrent")                                                          \
    X(cuStreamCreate, "cuStreamCreate")                                                            \
    X(cuStreamDestroy, "cuStreamDestroy_v2")                                                       \
    X(cuStreamSynchronize, "cuStreamSynchronize")                                                  \
    X(cuModuleLoadDataEx, "cuModuleLoadDataEx")                                                    \
    X(cuModuleUnload, "cuModuleUnload")                                                            \
    X(cuModuleGetFunction, "cuModuleGetFunction")                                                  \
    X(cuFuncGetAttribute, "cuFuncGetAttribute")                                                    \
    X(cuFuncSetAttribute, "cuFuncSetAttribute")                                                    \
    X(cuLaunchKernel, "cuLaunchKernel")                                                            \
    X(cuMemAlloc, "cuMemAlloc_v2")                                                                 \
    X(cuMemFree, "cuMemFree_v2")                                                                   \
    X(cuMemGetInfo, "cuMemGetInfo_v2")                                                             \
    X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                                                   \
    X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")                                                   \
    X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")                                                   \
    X(cuMemsetD8Async, "cuMemsetD8Async")                                                         \
    X(cuStreamBeginCapture, "cuStreamBeginCapture_v2")                                             \
    X(cuStreamEndCapture, "cuStreamEndCapture")                                                    \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags")                                           \
    X(cuGraphLaunch, "cuGraphLaunch")                                                              \
    X(cuGraphExecDestroy, "cuGraphExecDestroy")                                                    \
    X(cuGraphDestroy, "cuGraphDestroy")

#define FAT5__NVRTC_API(X)                                                                         \
    X(nvrtcVersion, "nvrtcVersion")                                                                \
    X(nvrtcGetErrorString, "nvrtcGetErrorString")                                                  \
    X(nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs")                                      \
    X(nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs")                                            \
    X(nvrtcCreateProgram, "nvrtcCreateProgram")                                                    \
    X(nvrtcCompileProgram, "nvrtcCompileProgram")                                                  \
    X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")                                            \
    X(nvrtcGetProgramLog, "nvrtcGetProgramLog")                                                    \
    X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize")                                                      \
    X(nvrtcGetCUBIN, "nvrtcGetCUBIN")                                                              \
    X(nvrtcGetPTXSize, "nvrtcGetPTXSize")                                                          \
    X(nvrtcGetPTX, "nvrtcGetPTX")                                                                  \
    X(nvrtcDestroyProgram, "nvrtcDestroyProgram")

#define FAT5__CUBLAS_API(X)                                                                        \
    X(cublasCreate, "cublasCreate_v2")                                                             \
    X(cublasDestroy, "cublasDestroy_v2")                                                           \
    X(cublasGetVersion, "cublasGetVersion_v2")                                                     \
    X(cublasSetStream, "cublasSetStream_v2")                                                       \
    X(cublasSetMathMode, "cublasSetMathMode")                                                      \
    X(cublasGetStatusName, "cublasGetStatusName")                                                  \
    X(cublasGemmEx, "cublasGemmEx")                                                                \
    X(cublasGemmStridedBatchedEx, "cublasGemmStridedBatchedEx")

// Optional driver entry points, loaded on first use (the profiler); the same X form, checked by
// tests/test_abi.c like the rest. cuEventElapsedTime_v2 (driver 12.8+) falls back to the first
// version, which has the same prototype.
#define FAT5__CU_EVENT_API(X)                                                                      \
    X(cuEventCreate, "cuEventCreate")                                                              \
    X(cuEventRecord, "cuEventRecord")                                                              \
    X(cuEventSynchronize, "cuEventSynchronize")                                                    \
    X(cuEventDestroy, "cuEventDestroy_v2")                                                         \
    X(cuEventElapsedTime, "cuEventElapsedTime_v2")

// ---- kernels ------------------------------------------------------------------------------------
// X(name): kernel id FAT5__K_<name>, CUDA entry point extern "C" __global__ void fat5_<name>(...).
// Every kernel is the GPU side of the op of its name; the attention ops have one kernel per
// position scheme (fat5_<op> for T5 buckets or no bias, fat5_<op>_alibi, fat5_<op>_fire: the same
// arguments, picked by the launcher from the op's kind), and fwd, dq and dkv one more per scheme
// for the encoder's patterns (the same names ending in _pat). The forward has a second family on
// tensor cores for bf16 activations (attn_fwd_tc64... for dk <= 64, attn_fwd_tc128... up to 128:
// the same arguments, attention_tc.cu), and so has the backward (attn_bwd_dq_tc64..., T5, ALiBi and
// no bias; attn_bwd_dkv_tc64..., FIRE too: attention_tc_bwd.cu). mm's kernel serves products of a
// few rows (cuBLAS the rest).
#define FAT5__KERNELS(X)                                                                           \
    X(fill_f32) X(scale_f32) X(f32_to_bf16) X(to_act) X(embed_fwd) X(embed_bwd) X(rmsnorm_fwd)     \
    X(rmsnorm_bwd) X(colsum_f32) X(act_fwd) X(act_bwd) X(attn_fwd) X(attn_bwd_delta) X(attn_bwd_dq)  \
    X(attn_bwd_dkv) X(xent_fwd) X(xent_bwd) X(sumsq_seg) X(adamw_seg) X(optim_coef) X(loss_total)  \
    X(attn_decode) X(cache_write) X(cache_gather) X(add_i32) X(rope) X(fire_reduce)               \
    X(block_sum) X(block_sum_bwd)                                                                  \
    X(gen_process) X(gen_select) X(gen_beam)                                                       \
    X(attn_fwd_alibi) X(attn_fwd_fire) X(attn_bwd_dq_alibi) X(attn_bwd_dq_fire)                    \
    X(attn_bwd_dkv_alibi) X(attn_bwd_dkv_fire) X(attn_decode_alibi) X(attn_decode_fire)          \
    X(attn_fwd_pat) X(attn_fwd_alibi_pat) X(attn_fwd_fire_pat) X(attn_bwd_dq_pat)                  \
    X(attn_bwd_dq_alibi_pat) X(attn_bwd_dq_fire_pat) X(attn_bwd_dkv_pat) X(attn_bwd_dkv_alibi_pat) \
    X(attn_bwd_dkv_fire_pat) X(attn_fwd_tc64) X(attn_fwd_tc64_pat) X(attn_fwd_tc64_alibi)           \
    X(attn_fwd_tc64_alibi_pat) X(attn_fwd_tc64_fire) X(attn_fwd_tc64_fire_pat) X(attn_fwd_tc128)   \
    X(attn_fwd_tc128_pat) X(attn_fwd_tc128_alibi) X(attn_fwd_tc128_alibi_pat) X(attn_fwd_tc128_fire) \
    X(attn_fwd_tc128_fire_pat) X(mm) X(norm_mm) X(attn_bwd_dq_tc64) X(attn_bwd_dq_tc64_pat)               \
    X(attn_bwd_dq_tc64_alibi) X(attn_bwd_dq_tc64_alibi_pat) X(attn_bwd_dq_tc128) X(attn_bwd_dq_tc128_pat) \
    X(attn_bwd_dq_tc128_alibi) X(attn_bwd_dq_tc128_alibi_pat) X(attn_bwd_dkv_tc64)                        \
    X(attn_bwd_dkv_tc64_pat) X(attn_bwd_dkv_tc64_alibi) X(attn_bwd_dkv_tc64_alibi_pat)                    \
    X(attn_bwd_dkv_tc64_fire) X(attn_bwd_dkv_tc64_fire_pat) X(attn_bwd_dkv_tc128)                         \
    X(attn_bwd_dkv_tc128_pat) X(attn_bwd_dkv_tc128_alibi) X(attn_bwd_dkv_tc128_alibi_pat)                 \
    X(attn_bwd_dkv_tc128_fire) X(attn_bwd_dkv_tc128_fire_pat)

typedef enum fat5__kernel_id {
#define FAT5__KENUM(name) FAT5__K_##name,
    FAT5__KERNELS(FAT5__KENUM)
#undef FAT5__KENUM
    FAT5__K_COUNT
} fat5__kernel_id;

static const char *const fat5__kernel_names[FAT5__K_COUNT] = {
#define FAT5__KNAME(name) "fat5_" #name,
    FAT5__KERNELS(FAT5__KNAME)
#undef FAT5__KNAME
};

// ---- the device state, owned by the fat5_ctx ----------------------------------------------------
#define FAT5__MM_ROWS 16  // FAT5_MM_ROWS in kernels/mm.cu: NT products of at most this many rows run fat5_mm
#define FAT5__GPU_FIELD(api, sym) fat5__PFN_##api api;

// The per-kernel profile (fat5__dev_prof_*): each launch, cuBLAS product, copy and fill between
// two events on the stream; their times summed per key (kernel name, or product shape) when
// collected. FAT5__PROF_PENDING pairs wait at most: a full buffer is collected (a synchronisation).
#define FAT5__PROF_PENDING 2048
#define FAT5__PROF_KEY 80
typedef struct fat5__prof_entry {
    char key[FAT5__PROF_KEY];  // "attn_fwd_tc64", "gemm NT 16384x1536x512", "copy", ...
    long long calls;
    double ms;                 // summed over the collected calls
} fat5__prof_entry;
struct fat5__prof {
    fat5__CUevent ev[2 * FAT5__PROF_PENDING];  // start and end of each pending call, made once
    int n_ev;                                   // events created so far
    int pending[FAT5__PROF_PENDING];            // entry of each pending call
    int n_pending;
    fat5__prof_entry *e;
    int n_e, cap_e;
};

struct fat5__gpu {
    void *lib_cuda, *lib_nvrtc, *lib_nvrtc_builtins, *lib_cublas;
    char path_cuda[512], path_nvrtc[512], path_cublas[512];  // what dlopen opened
    struct { FAT5__CU_API(FAT5__GPU_FIELD) } cu;
    struct { FAT5__NVRTC_API(FAT5__GPU_FIELD) } nvrtc;
    struct { FAT5__CUBLAS_API(FAT5__GPU_FIELD) } cublas;
    int driver_version;            // 13000 = 13.0; 0 when compiling without a driver
    int nvrtc_major, nvrtc_minor;
    int cublas_version;            // e.g. 130100

    int ordinal;
    fat5__CUdevice dev;
    int cc_major, cc_minor;        // compute capability
    int sm_count;                  // multiprocessors
    int smem_optin;                // max dynamic shared memory per block after opting in (bytes)
    char name[256];
    size_t total_mem;              // bytes

    fat5__CUcontext cuctx;         // the device's primary context (retained)
    int ctx_retained;
    fat5__CUstream stream;         // the one non-blocking stream all work goes to
    fat5__cublasHandle_t blas;     // on `stream`
    fat5__CUmodule module;
    fat5__CUfunction fn[FAT5__K_COUNT];
    unsigned smem_set[FAT5__K_COUNT];  // dynamic shared memory opted into per kernel
    int max_threads[FAT5__K_COUNT];    // threads a block can have (its registers allow), 0 not asked yet

    char arch[24];                 // "sm_90" (cubin) or "compute_120" (PTX)
    int ptx;                       // 1 when the module is PTX for the driver to JIT
    int cache_hit;                 // 1: the module came from the disk cache
    int cache_rejected;            // 1: a cache file existed but failed verification (recompiled)
    double compile_ms;             // NVRTC time when compiled (0 on a hit)
    char cache_file[1024];         // "" when the cache is off

    int last_kernel;               // most recent launch (names asynchronous faults); -1 none
    int sync_launches;             // FAT5_SYNC_LAUNCHES=1
    int attn_tc;                   // bf16 attention forward and backward on tensor cores (FAT5_ATTN_TC=0: off)
    int mm_rows;                   // NT products of at most this many rows run fat5_mm (FAT5_MM_ROWS=0: none)
    fat5__PFN_cuLaunchKernelEx launch_ex;  // cuLaunchKernelEx, or NULL (older drivers)
    int pdl;                       // decode-step kernels launch as programmatic dependents (sm_90+; FAT5_PDL=0: off)
    int capturing;                 // between capture_begin and capture_end (the profiler stands aside)
    struct { FAT5__CU_EVENT_API(FAT5__GPU_FIELD) } ev;  // loaded by fat5__dev_prof_enable
    struct fat5__prof *prof;       // the per-kernel profile, or NULL (off)
};
#undef FAT5__GPU_FIELD

// ---- small helpers ------------------------------------------------------------------------------

// The CUDA libraries stay mapped once opened (dlclose only drops the reference): they keep
// process-wide state (NVRTC's static C++ runtime allocates at load and never frees, cuBLAS registers
// exit handlers) that unloading would leak or break, and a later open is then free.
#ifdef RTLD_NODELETE
#define FAT5__RTLD (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)
#else
#define FAT5__RTLD (RTLD_NOW | RTLD_LOCAL)
#endif

typedef void (*fat5__proc)(void);
typedef char fat5__proc_size_check[sizeof(void *) == sizeof(fat5__proc) ? 1 : -1];

// dlsym without an object-to-function pointer cast (POSIX guarantees the representations match)
static fat5__proc fat5__dev_sym(void *lib, const char *name) {
    void *p = lib ? dlsym(lib, name) : NULL;
    fat5__proc f;
    memcpy(&f, &p, sizeof f);
    return f;
}

static const char *fat5__dev_kname(int k) {
    return k >= 0 && k < FAT5__K_COUNT ? fat5__kernel_names[k] : "(no kernel)";
}

// A CUresult as "CUDA_ERROR_X (description)".
static void fat5__dev_cu_text(const struct fat5__gpu *g, fat5__CUresult r, char *buf, size_t cap) {
    const char *name = NULL, *desc = NULL;
    if (g && g->cu.cuGetErrorName && g->cu.cuGetErrorName(r, &name) != FAT5__CUDA_SUCCESS)
        name = NULL;
    if (g && g->cu.cuGetErrorString && g->cu.cuGetErrorString(r, &desc) != FAT5__CUDA_SUCCESS)
        desc = NULL;
    if (name)
        snprintf(buf, cap, "%s (%s)", name, desc ? desc : "no description");
    else if (r == FAT5__CUDA_ERROR_STUB_LIBRARY)  // the stub cannot name its own errors
        snprintf(buf, cap, "CUDA_ERROR_STUB_LIBRARY (the toolkit's link stub, not the driver)");
    else
        snprintf(buf, cap, "CUDA error %u", r);
}

// Records "what: CUDA_ERROR_X (description)" with status st.
static fat5_status fat5__dev_cu_fail(fat5_ctx *ctx, fat5_status st, fat5__CUresult r,
                                     const char *what) {
    char text[256];
    fat5__dev_cu_text(ctx->gpu, r, text, sizeof text);
    return fat5__err(ctx, st, "%s: %s", what, text);
}

// FAT5_OK for CUDA_SUCCESS, else FAT5_ERR_CUDA naming the call and the driver's error.
static fat5_status fat5__dev_check(fat5_ctx *ctx, fat5__CUresult r, const char *what) {
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    return fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, what);
}

static fat5_status fat5__dev_blas_check(fat5_ctx *ctx, fat5__cublasStatus_t s, const char *what) {
    const struct fat5__gpu *g = ctx->gpu;
    const char *name;
    if (s == FAT5__CUBLAS_STATUS_SUCCESS) return FAT5_OK;
    name = g && g->cublas.cublasGetStatusName ? g->cublas.cublasGetStatusName(s) : NULL;
    return fat5__err(ctx, FAT5_ERR_CUBLAS, "%s: %s (cuBLAS status %u)", what,
                     name ? name : "CUBLAS_STATUS_?", s);
}

static const char *fat5__dev_nvrtc_text(const struct fat5__gpu *g, fat5__nvrtcResult r) {
    const char *s = g->nvrtc.nvrtcGetErrorString ? g->nvrtc.nvrtcGetErrorString(r) : NULL;
    return s ? s : "NVRTC error";
}

// Opens the first of names[] that loads: every name bare (LD_LIBRARY_PATH, ld.so cache), then
// every name under $CUDA_HOME/lib64/, /usr/local/cuda/lib64/ and
// /usr/local/cuda/targets/x86_64-linux/lib/.
// path receives what was opened. On failure errs holds "not found: <every name tried>" and the
// dlerror() text of every other failure (a wrong ELF class, a missing dependency, ...).
static void *fat5__dev_dlopen(fat5__sb *errs, const char *const *names, int n_names, char *path,
                              size_t cap) {
    static const char enoent[] = ": cannot open shared object file: No such file or directory";
    char home_lib[512];
    const char *dirs[4];
    const char *home = getenv("CUDA_HOME");
    fat5__sb other;
    int nd = 0, d, i, n_absent = 0;
    dirs[nd++] = "";
    if (home && home[0]) {
        int n = snprintf(home_lib, sizeof home_lib, "%s/lib64/", home);
        if (n > 0 && (size_t)n < sizeof home_lib && strcmp(home_lib, "/usr/local/cuda/lib64/") != 0)
            dirs[nd++] = home_lib;
    }
    dirs[nd++] = "/usr/local/cuda/lib64/";
    dirs[nd++] = "/usr/local/cuda/targets/x86_64-linux/lib/";
    fat5__sb_init(&other, errs->ctx);
    for (d = 0; d < nd; d++) {
        for (i = 0; i < n_names; i++) {
            void *lib;
            const char *e;
            size_t el, pl;
            int n = snprintf(path, cap, "%s%s", dirs[d], names[i]);
            if (n < 0 || (size_t)n >= cap) continue;
            lib = dlopen(path, FAT5__RTLD);
            if (lib) {
                fat5__sb_free(&other);
                return lib;
            }
            e = dlerror();
            el = e ? strlen(e) : 0;
            pl = strlen(path);
            if (e && el == pl + sizeof enoent - 1 && memcmp(e, path, pl) == 0 &&
                strcmp(e + pl, enoent) == 0) {
                fat5__sb_printf(errs, "%s%s", n_absent++ ? ", " : "not found: ", path);
            } else {
                fat5__sb_printf(&other, "; %s", e ? e : path);
            }
        }
    }
    if (other.buf) fat5__sb_puts(errs, other.buf);
    fat5__sb_free(&other);
    if (cap) path[0] = 0;
    return NULL;
}

// Each library's entry points; returns the first missing symbol, or NULL. (One macro level only:
// `api` must reach ## unexpanded even when a vendor header that renames it is included first.)
#define FAT5__DEV_LOAD_CU(api, sym)                                                                \
    if (!missing && !(g->cu.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cuda, sym))) missing = sym;
#define FAT5__DEV_LOAD_NVRTC(api, sym)                                                             \
    if (!missing && !(g->nvrtc.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_nvrtc, sym)))            \
        missing = sym;
#define FAT5__DEV_LOAD_CUBLAS(api, sym)                                                            \
    if (!missing && !(g->cublas.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cublas, sym)))          \
        missing = sym;

static const char *fat5__dev_load_cu(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__CU_API(FAT5__DEV_LOAD_CU)
    return missing;
}
static const char *fat5__dev_load_nvrtc(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__NVRTC_API(FAT5__DEV_LOAD_NVRTC)
    return missing;
}
static const char *fat5__dev_load_cublas(struct fat5__gpu *g) {
    const char *missing = NULL;
    FAT5__CUBLAS_API(FAT5__DEV_LOAD_CUBLAS)
    return missing;
}
#undef FAT5__DEV_LOAD_CU
#undef FAT5__DEV_LOAD_NVRTC
#undef FAT5__DEV_LOAD_CUBLAS

// Sonames of a versioned CUDA library ("libnvrtc.so.13", "libnvrtc.so.12"): the newest first,
// unless the driver is older than 13, then the 12 first (a CUDA 13 library needs a CUDA 13 driver).
static void fat5__dev_sonames(const char *stem, int driver_version, char buf[2][64],
                              const char *names[2]) {
    int first = driver_version > 0 && driver_version < 13000 ? 12 : 13;
    snprintf(buf[0], 64, "%s.so.%d", stem, first);
    snprintf(buf[1], 64, "%s.so.%d", stem, first == 13 ? 12 : 13);
    names[0] = buf[0];
    names[1] = buf[1];
}

// NVRTC into g (driver not needed): library, entry points, version, and, when it was found by
// full path, libnvrtc-builtins from the same directory (libnvrtc dlopens it by bare name at the
// first compile, which would miss a directory outside the loader's search path).
static fat5_status fat5__dev_open_nvrtc(fat5_ctx *ctx, struct fat5__gpu *g) {
    char buf[2][64];
    const char *names[2], *missing;
    fat5__sb errs;
    fat5__dev_sonames("libnvrtc", g->driver_version, buf, names);
    fat5__sb_init(&errs, ctx);
    g->lib_nvrtc = fat5__dev_dlopen(&errs, names, 2, g->path_nvrtc, sizeof g->path_nvrtc);
    if (!g->lib_nvrtc) {
        fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                  "NVRTC not found (%s or %s; set CUDA_HOME or LD_LIBRARY_PATH): %s", names[0],
                  names[1], errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        return FAT5_ERR_NO_DEVICE;
    }
    fat5__sb_free(&errs);
    if ((missing = fat5__dev_load_nvrtc(g)) != NULL)
        return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s lacks %s (NVRTC 11.2 or newer is needed)",
                         g->path_nvrtc, missing);
    if (g->nvrtc.nvrtcVersion(&g->nvrtc_major, &g->nvrtc_minor) != FAT5__NVRTC_SUCCESS)
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcVersion failed (%s)", g->path_nvrtc);
    if (strchr(g->path_nvrtc, '/')) {
        char builtins[600];
        const char *slash = strrchr(g->path_nvrtc, '/');
        int n = snprintf(builtins, sizeof builtins, "%.*slibnvrtc-builtins.so.%d.%d",
                         (int)(slash + 1 - g->path_nvrtc), g->path_nvrtc, g->nvrtc_major,
                         g->nvrtc_minor);
        if (n > 0 && (size_t)n < sizeof builtins)
            g->lib_nvrtc_builtins = dlopen(builtins, FAT5__RTLD);
    }
    return FAT5_OK;
}

// ---- choosing the target ------------------------------------------------------------------------

// The compile target for compute capability cc (major*10 + minor, e.g. 90) from NVRTC's ascending
// list: the newest listed sm_XY with the device's major and XY <= cc (a cubin runs on every later
// minor of its major); else PTX (compute_XY) for the newest listed XY <= cc, which the driver
// JIT-compiles (a device newer than this NVRTC). Returns 0, or -1 when nothing listed is <= cc.
static FAT5__UNUSED int fat5__dev_pick_arch(int cc, const int *archs, int n, char *arch, size_t cap,
                                            int *ptx) {
    int i, best_cubin = -1, best_any = -1;
    for (i = 0; i < n; i++) {
        if (archs[i] > cc) continue;
        if (archs[i] / 10 == cc / 10 && archs[i] > best_cubin) best_cubin = archs[i];
        if (archs[i] > best_any) best_any = archs[i];
    }
    if (best_cubin >= 0) {
        snprintf(arch, cap, "sm_%d", best_cubin);
        *ptx = 0;
        return 0;
    }
    if (best_any >= 0) {
        snprintf(arch, cap, "compute_%d", best_any);
        *ptx = 1;
        return 0;
    }
    return -1;
}

// Sets g->arch / g->ptx for compute capability cc from the loaded NVRTC's supported targets.
static fat5_status fat5__dev_choose_arch(fat5_ctx *ctx, struct fat5__gpu *g, int cc) {
    int n = 0, archs[128];
    fat5__nvrtcResult r;
    if (cc < 80)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "%s is sm_%d: fat5 needs compute capability 8.0 or newer (bf16)",
                         g->name[0] ? g->name : "the device", cc);
    if ((r = g->nvrtc.nvrtcGetNumSupportedArchs(&n)) != FAT5__NVRTC_SUCCESS || n <= 0 || n > 128 ||
        (r = g->nvrtc.nvrtcGetSupportedArchs(archs)) != FAT5__NVRTC_SUCCESS)
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcGetSupportedArchs: %s (%d targets)",
                         fat5__dev_nvrtc_text(g, r), n);
    if (fat5__dev_pick_arch(cc, archs, n, g->arch, sizeof g->arch, &g->ptx) != 0)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "sm_%d is older than every target of NVRTC %d.%d (oldest sm_%d)", cc,
                         g->nvrtc_major, g->nvrtc_minor, archs[0]);
    return FAT5_OK;
}

// ---- the kernel program -------------------------------------------------------------------------

// Every kernels/*.cu file joined into one program, each behind a #line directive so that NVRTC
// messages name the file and line. From the embedded fat5_kernels.cuh, or, with FAT5_KERNELS_DIR
// set, the same file names read from that directory. *out: fat5__free.
static fat5_status fat5__dev_source(fat5_ctx *ctx, char **out, size_t *out_len) {
    const char *dir = getenv("FAT5_KERNELS_DIR");
    fat5__sb b;
    int k, i;
    *out = NULL;
    *out_len = 0;
    if (dir && !dir[0]) dir = NULL;
    fat5__sb_init(&b, ctx);
    for (k = 0; fat5__kernel_files[k].name; k++) {
        const char *name = fat5__kernel_files[k].name;
        if (dir) {
            char path[1024], *text = NULL;
            size_t len = 0;
            fat5_status st;
            if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) {
                fat5__sb_free(&b);
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "FAT5_KERNELS_DIR is too long: %s", dir);
            }
            if ((st = fat5__read_file(ctx, path, (size_t)64 << 20, &text, &len)) != FAT5_OK) {
                fat5__sb_free(&b);
                return fat5__err_prefix(ctx, st, "FAT5_KERNELS_DIR: ");
            }
            // name the real file in messages, unless the path would break the directive
            if (strpbrk(path, "\"\\\n"))
                fat5__sb_printf(&b, "#line 1 \"kernels/%s\"\n", name);
            else
                fat5__sb_printf(&b, "#line 1 \"%s\"\n", path);
            fat5__sb_putn(&b, text, len);
            if (len && text[len - 1] != '\n') fat5__sb_putn(&b, "\n", 1);
            fat5__free(ctx, text);
        } else {
            fat5__sb_printf(&b, "#line 1 \"kernels/%s\"\n", name);
            for (i = 0; fat5__kernel_files[k].lines[i]; i++)
                fat5__sb_puts(&b, fat5__kernel_files[k].lines[i]);
        }
    }
    if (k == 0) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_kernels.cuh holds no kernel files");
    }
    if (b.oom || !b.buf) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory joining the kernel sources");
    }
    *out = b.buf;
    *out_len = b.len;
    return FAT5_OK;
}

// ---- 128-bit hash (two independent 64-bit lanes: FNV-1a and a multiply-xorshift) ----------------

typedef struct fat5__h128 { uint64_t a, b; } fat5__h128;

static void fat5__h128_init(fat5__h128 *h) {
    h->a = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
    h->b = 0x6a09e667f3bcc909ULL;
}
static void fat5__h128_bytes(fat5__h128 *h, const void *data, size_t n) {
    const unsigned char *p = FAT5__CAST(const unsigned char *, data);
    uint64_t a = h->a, b = h->b;
    size_t i;
    for (i = 0; i < n; i++) {
        a = (a ^ p[i]) * 0x100000001b3ULL;                // FNV-1a 64
        b = (b + p[i] + 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
        b ^= b >> 31;
    }
    h->a = a;
    h->b = b;
}
// a length-prefixed field, so that ("ab","c") and ("a","bc") differ
static void fat5__h128_field(fat5__h128 *h, const void *data, size_t n) {
    unsigned char len[8];
    int i;
    for (i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    fat5__h128_bytes(h, len, 8);
    fat5__h128_bytes(h, data, n);
}
static uint64_t fat5__h128_mix(uint64_t x) {  // murmur3 fmix64
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}
static fat5__h128 fat5__h128_final(const fat5__h128 *h) {
    fat5__h128 r;
    r.a = fat5__h128_mix(h->a);
    r.b = fat5__h128_mix(h->b ^ (h->a >> 1));
    return r;
}
static fat5__h128 fat5__h128_of(const void *data, size_t n) {
    fat5__h128 h;
    fat5__h128_init(&h);
    fat5__h128_field(&h, data, n);
    return fat5__h128_final(&h);
}

// ---- disk cache ---------------------------------------------------------------------------------

#define FAT5__KCACHE_FORMAT 1u
#define FAT5__KCACHE_HEADER 56u
#define FAT5__KCACHE_MAX ((size_t)1 << 30)
static const char fat5__kcache_magic[8] = {'f', 'a', 't', '5', 'k', 'e', 'r', 'n'};

static void fat5__dev_put_le(unsigned char *p, uint64_t v, int n) {
    int i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t fat5__dev_get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

// The cache directory into buf: cfg.cache_dir, else $FAT5_CACHE_DIR, else $XDG_CACHE_HOME/fat5
// (absolute paths only, per the XDG spec), else $HOME/.cache/fat5. Returns 0 when the cache is off:
// an empty cfg.cache_dir or $FAT5_CACHE_DIR, no HOME, or a name that does not fit.
static FAT5__UNUSED int fat5__dev_cache_dir(const fat5_ctx *ctx, char *buf, size_t cap) {
    const char *env;
    int n;
    if (ctx->cfg.cache_dir) {
        n = snprintf(buf, cap, "%s", ctx->cfg.cache_dir);
    } else if ((env = getenv("FAT5_CACHE_DIR")) != NULL) {
        n = snprintf(buf, cap, "%s", env);
    } else if ((env = getenv("XDG_CACHE_HOME")) != NULL && env[0] == '/') {
        n = snprintf(buf, cap, "%s/fat5", env);
    } else if ((env = getenv("HOME")) != NULL && env[0]) {
        n = snprintf(buf, cap, "%s/.cache/fat5", env);
    } else {
        n = 0;
    }
    if (n <= 0 || (size_t)n >= cap) {
        if (cap) buf[0] = 0;
        return 0;
    }
    return 1;
}

// mkdir -p; returns 1 when dir exists as a directory afterwards
static int fat5__dev_mkdirs(const char *dir) {
    char p[1024];
    size_t i, n = strlen(dir);
    struct stat sb;
    if (n == 0 || n >= sizeof p) return 0;
    memcpy(p, dir, n + 1);
    for (i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            (void)mkdir(p, 0755);  // EEXIST, or EACCES on an existing parent: the stat decides
            p[i] = c;
        }
    }
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
}

// Checks a cache file; NULL when valid (payload at buf + FAT5__KCACHE_HEADER), else why not.
static const char *fat5__dev_cache_verify(const void *data, size_t len, fat5__h128 key, int ptx,
                                          size_t *payload_len) {
    const unsigned char *buf = FAT5__CAST(const unsigned char *, data);
    uint64_t size;
    fat5__h128 h;
    if (len < FAT5__KCACHE_HEADER) return "shorter than its header";
    if (memcmp(buf, fat5__kcache_magic, 8) != 0) return "bad magic";
    if (fat5__dev_get_le(buf + 8, 4) != FAT5__KCACHE_FORMAT) return "another cache format";
    if (fat5__dev_get_le(buf + 12, 4) != (uint64_t)ptx) return "wrong image kind";
    size = fat5__dev_get_le(buf + 16, 8);
    if (fat5__dev_get_le(buf + 24, 8) != key.a || fat5__dev_get_le(buf + 32, 8) != key.b)
        return "key mismatch";
    if (size != (uint64_t)(len - FAT5__KCACHE_HEADER)) return "size mismatch (truncated?)";
    if (size == 0) return "empty payload";
    h = fat5__h128_of(buf + FAT5__KCACHE_HEADER, (size_t)size);
    if (fat5__dev_get_le(buf + 40, 8) != h.a || fat5__dev_get_le(buf + 48, 8) != h.b)
        return "payload hash mismatch";
    *payload_len = (size_t)size;
    return NULL;
}

// Writes the cache file atomically. Failures are logged, never fatal (the cache is an optimisation).
static void fat5__dev_cache_write(fat5_ctx *ctx, const char *path, const char *dir, fat5__h128 key,
                                  int ptx, const char *img, size_t size) {
    unsigned char *buf;
    size_t total;
    fat5__h128 h;
    fat5_status st;
    char saved[FAT5__ERRMSG_CAP];
    if (!fat5__dev_mkdirs(dir)) {
        fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: cannot create %s: %s", dir, strerror(errno));
        return;
    }
    if (!fat5__add_ok(size, FAT5__KCACHE_HEADER, &total)) return;
    buf = FAT5__CAST(unsigned char *, fat5__malloc(ctx, total));
    if (!buf) return;
    h = fat5__h128_of(img, size);
    memcpy(buf, fat5__kcache_magic, 8);
    fat5__dev_put_le(buf + 8, FAT5__KCACHE_FORMAT, 4);
    fat5__dev_put_le(buf + 12, (uint64_t)ptx, 4);
    fat5__dev_put_le(buf + 16, (uint64_t)size, 8);
    fat5__dev_put_le(buf + 24, key.a, 8);
    fat5__dev_put_le(buf + 32, key.b, 8);
    fat5__dev_put_le(buf + 40, h.a, 8);
    fat5__dev_put_le(buf + 48, h.b, 8);
    memcpy(buf + FAT5__KCACHE_HEADER, img, size);
    memcpy(saved, ctx->err, sizeof saved);
    st = fat5_write_file_atomic(ctx, path, buf, total);
    if (st != FAT5_OK) fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s", ctx->err);
    memcpy(ctx->err, saved, sizeof saved);
    fat5__free(ctx, buf);
}

// ---- NVRTC compile ------------------------------------------------------------------------------

// Compiles src for g->arch; the image (cubin, or NUL-terminated PTX) into *img (fat5__free).
// A compile error reports the NVRTC log with the target and options.
static fat5_status fat5__dev_compile(fat5_ctx *ctx, struct fat5__gpu *g, const char *src,
                                     const char *const *opts, int n_opts, const char *opts_text,
                                     char **img, size_t *img_size) {
    fat5__nvrtcProgram prog = NULL;
    fat5__nvrtcResult r, cr;
    size_t log_size = 0, size = 0;
    char *log = NULL, *out;
    double t0;
    *img = NULL;
    *img_size = 0;
    r = g->nvrtc.nvrtcCreateProgram(&prog, src, "fat5_kernels.cu", 0, NULL, NULL);
    if (r != FAT5__NVRTC_SUCCESS)
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcCreateProgram: %s", fat5__dev_nvrtc_text(g, r));
    t0 = 1e3 * fat5__now_s();
    cr = g->nvrtc.nvrtcCompileProgram(prog, n_opts, opts);
    g->compile_ms = 1e3 * fat5__now_s() - t0;
    // always fetch the log (its size counts the NUL), then look at the result
    if (g->nvrtc.nvrtcGetProgramLogSize(prog, &log_size) == FAT5__NVRTC_SUCCESS && log_size > 1) {
        log = FAT5__CAST(char *, fat5__malloc(ctx, log_size));
        if (log && g->nvrtc.nvrtcGetProgramLog(prog, log) == FAT5__NVRTC_SUCCESS) {
            log[log_size - 1] = 0;
        } else {
            fat5__free(ctx, log);
            log = NULL;
        }
    }
    if (cr != FAT5__NVRTC_SUCCESS) {
        fat5__err(ctx, FAT5_ERR_NVRTC,
                  "%s compiling the kernels for %s (options: %s; NVRTC %d.%d):\n%s",
                  fat5__dev_nvrtc_text(g, cr), g->arch, opts_text, g->nvrtc_major, g->nvrtc_minor,
                  log ? log : "(no log)");
        fat5__free(ctx, log);
        g->nvrtc.nvrtcDestroyProgram(&prog);
        return FAT5_ERR_NVRTC;
    }
    if (log) fat5__log(ctx, FAT5_LOG_DEBUG, "NVRTC messages for %s: %s", g->arch, log);
    fat5__free(ctx, log);
    r = g->ptx ? g->nvrtc.nvrtcGetPTXSize(prog, &size) : g->nvrtc.nvrtcGetCUBINSize(prog, &size);
    if (r != FAT5__NVRTC_SUCCESS || size == 0) {
        g->nvrtc.nvrtcDestroyProgram(&prog);
        return fat5__err(ctx, FAT5_ERR_NVRTC, "NVRTC produced no %s for %s: %s",
                         g->ptx ? "PTX" : "cubin", g->arch,
                         r ? fat5__dev_nvrtc_text(g, r) : "empty image");
    }
    out = FAT5__CAST(char *, fat5__malloc(ctx, size + 1));
    if (!out) {
        g->nvrtc.nvrtcDestroyProgram(&prog);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY,
                         "out of memory for the kernel image (%zu bytes)", size);
    }
    r = g->ptx ? g->nvrtc.nvrtcGetPTX(prog, out) : g->nvrtc.nvrtcGetCUBIN(prog, out);
    g->nvrtc.nvrtcDestroyProgram(&prog);
    if (r != FAT5__NVRTC_SUCCESS) {
        fat5__free(ctx, out);
        return fat5__err(ctx, FAT5_ERR_NVRTC, "nvrtcGet%s: %s", g->ptx ? "PTX" : "CUBIN",
                         fat5__dev_nvrtc_text(g, r));
    }
    out[size] = 0;
    *img = out;
    *img_size = size;
    return FAT5_OK;
}

// The module image for g->arch with the ctx's dtype: from the disk cache when a valid entry exists
// (unless no_read), else compiled by NVRTC and stored. Sets g->cache_hit, cache_rejected,
// compile_ms, cache_file. *img: fat5__free.
static fat5_status fat5__dev_build(fat5_ctx *ctx, struct fat5__gpu *g, int no_read, char **img,
                                   size_t *img_size) {
    char opt_arch[40], dir[900], keyhex[33], saved[FAT5__ERRMSG_CAP], opts_text[256], ver[64];
    const char *opts[4];
    char *src = NULL, *file = NULL;
    size_t src_len = 0, file_len = 0, payload_len = 0;
    fat5__h128 hk, key;
    fat5_status st;
    int cache_on, i, bf16 = ctx->cfg.dtype == FAT5_DTYPE_BF16;
    *img = NULL;
    *img_size = 0;
    g->cache_hit = 0;
    g->compile_ms = 0;
    g->cache_file[0] = 0;

    snprintf(opt_arch, sizeof opt_arch, "-arch=%s", g->arch);
    opts[0] = opt_arch;
    opts[1] = "--std=c++17";
    opts[2] = "-default-device";
    opts[3] = bf16 ? "-DFAT5_ACT_BF16=1" : "-DFAT5_ACT_BF16=0";
    snprintf(opts_text, sizeof opts_text, "%s %s %s %s", opts[0], opts[1], opts[2], opts[3]);
    if ((st = fat5__dev_source(ctx, &src, &src_len)) != FAT5_OK) return st;

    // key: format, fat5 version, source, options, NVRTC version, driver version, target
    fat5__h128_init(&hk);
    snprintf(ver, sizeof ver, "%u|%s|%d.%d|%d|%d", FAT5__KCACHE_FORMAT, FAT5_VERSION_STRING,
             g->nvrtc_major, g->nvrtc_minor, g->driver_version, g->ptx);
    fat5__h128_field(&hk, ver, strlen(ver));
    fat5__h128_field(&hk, src, src_len);
    fat5__h128_field(&hk, opts_text, strlen(opts_text));
    fat5__h128_field(&hk, g->arch, strlen(g->arch));
    key = fat5__h128_final(&hk);
    for (i = 0; i < 16; i++) {
        uint64_t w = i < 8 ? key.a : key.b;
        snprintf(keyhex + 2 * i, 3, "%02x", (unsigned)((w >> (8 * (7 - i % 8))) & 0xff));
    }

    cache_on = fat5__dev_cache_dir(ctx, dir, sizeof dir);
    if (cache_on && snprintf(g->cache_file, sizeof g->cache_file, "%s/fat5-%s-%s.%s", dir, keyhex,
                             g->arch, g->ptx ? "ptx" : "cubin") >= (int)sizeof g->cache_file)
        cache_on = 0;
    if (!cache_on) g->cache_file[0] = 0;

    if (cache_on && !no_read) {
        struct stat sb;
        if (stat(g->cache_file, &sb) == 0) {
            memcpy(saved, ctx->err, sizeof saved);
            st = fat5__read_file(ctx, g->cache_file, FAT5__KCACHE_MAX, &file, &file_len);
            if (st == FAT5_OK) {
                const char *why = fat5__dev_cache_verify(file, file_len, key, g->ptx, &payload_len);
                if (!why) {
                    // the image is the payload, moved to the front (with read_file's NUL)
                    memmove(file, file + FAT5__KCACHE_HEADER, payload_len + 1);
                    *img = file;
                    *img_size = payload_len;
                    g->cache_hit = 1;
                    fat5__free(ctx, src);
                    return FAT5_OK;
                }
                g->cache_rejected = 1;
                fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s is invalid (%s); recompiling",
                          g->cache_file, why);
                fat5__free(ctx, file);
            } else {
                fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s", ctx->err);
            }
            memcpy(ctx->err, saved, sizeof saved);
        }
    }

    st = fat5__dev_compile(ctx, g, src, opts, 4, opts_text, img, img_size);
    fat5__free(ctx, src);
    if (st != FAT5_OK) return st;
    if (cache_on) fat5__dev_cache_write(ctx, g->cache_file, dir, key, g->ptx, *img, *img_size);
    return FAT5_OK;
}

// ---- open / close -------------------------------------------------------------------------------

// Releases everything g holds (in reverse order of acquisition) and frees it.
static void fat5__dev_prof_free(fat5_ctx *ctx, struct fat5__gpu *g);

static void fat5__dev_release(fat5_ctx *ctx, struct fat5__gpu *g) {
    if (!g) return;
    if (g->cuctx && g->cu.cuCtxSetCurrent) g->cu.cuCtxSetCurrent(g->cuctx);
    if (g->stream && g->cu.cuStreamSynchronize) g->cu.cuStreamSynchronize(g->stream);
    fat5__dev_prof_free(ctx, g);
    if (g->blas && g->cublas.cublasDestroy) g->cublas.cublasDestroy(g->blas);
    if (g->module && g->cu.cuModuleUnload) g->cu.cuModuleUnload(g->module);
    if (g->stream && g->cu.cuStreamDestroy) g->cu.cuStreamDestroy(g->stream);
    if (g->ctx_retained && g->cu.cuDevicePrimaryCtxRelease) g->cu.cuDevicePrimaryCtxRelease(g->dev);
    if (g->lib_cublas) dlclose(g->lib_cublas);
    if (g->lib_nvrtc) dlclose(g->lib_nvrtc);
    if (g->lib_nvrtc_builtins) dlclose(g->lib_nvrtc_builtins);
    if (g->lib_cuda) dlclose(g->lib_cuda);
    fat5__free(ctx, g);
}

static void fat5__dev_close(fat5_ctx *ctx) {
    struct fat5__gpu *g;
    if (!ctx || !ctx->gpu) return;
    g = ctx->gpu;
    ctx->gpu = NULL;
    fat5__dev_release(ctx, g);
}

// Loads the module image into the current context; the JIT log (PTX) goes into the error.
static fat5_status fat5__dev_load_module(fat5_ctx *ctx, struct fat5__gpu *g, const char *img) {
    char jit_log[2048];
    fat5__CUjit_option keys[2];
    void *vals[2];
    fat5__CUresult r;
    char what[160];
    jit_log[0] = 0;
    keys[0] = FAT5__CU_JIT_ERROR_LOG_BUFFER;
    vals[0] = jit_log;
    keys[1] = FAT5__CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
    vals[1] = (void *)(uintptr_t)sizeof jit_log;
    r = g->cu.cuModuleLoadDataEx(&g->module, img, 2, keys, vals);
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    g->module = NULL;
    jit_log[sizeof jit_log - 1] = 0;
    snprintf(what, sizeof what, "cuModuleLoadDataEx (%s %s, NVRTC %d.%d, driver %d.%d)",
             g->ptx ? "PTX" : "cubin", g->arch, g->nvrtc_major, g->nvrtc_minor,
             g->driver_version / 1000, g->driver_version % 1000 / 10);
    fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, what);
    if (g->nvrtc_major * 1000 > g->driver_version) {
        size_t n = strlen(ctx->err);
        snprintf(ctx->err + n, sizeof ctx->err - n,
                 " [NVRTC %d.%d is newer than the driver: update the driver, or make libnvrtc.so.%d "
                 "and libcublas.so.%d the ones found]", g->nvrtc_major, g->nvrtc_minor,
                 g->driver_version / 1000, g->driver_version / 1000);
    }
    if (jit_log[0]) {
        size_t n = strlen(ctx->err);
        snprintf(ctx->err + n, sizeof ctx->err - n, ":\n%s", jit_log);
    }
    return FAT5_ERR_CUDA;
}

static fat5_status fat5__dev_open(fat5_ctx *ctx) {
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so"};
    struct fat5__gpu *g;
    fat5__sb errs;
    fat5__CUresult r;
    fat5_status st;
    char buf[2][64], *img = NULL;
    const char *names[2], *missing, *env;
    size_t img_size = 0;
    int count = 0, k, n_missing = 0;
    double t0 = 1e3 * fat5__now_s();

    if (ctx->gpu) return FAT5_OK;
    if (ctx->cfg.dtype != FAT5_DTYPE_FP32 && ctx->cfg.dtype != FAT5_DTYPE_BF16)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ctx_create: unknown dtype %d",
                         (int)ctx->cfg.dtype);
    g = FAT5__CAST(struct fat5__gpu *, fat5__calloc(ctx, 1, sizeof *g));
    if (!g) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory opening the GPU");
    ctx->gpu = g;
    g->ordinal = ctx->cfg.device_ordinal;
    g->last_kernel = -1;
    env = getenv("FAT5_SYNC_LAUNCHES");
    g->sync_launches = env && env[0] && strcmp(env, "0") != 0;
    env = getenv("FAT5_ATTN_TC");
    g->attn_tc = !(env && !strcmp(env, "0"));
    env = getenv("FAT5_MM_ROWS");
    g->mm_rows = env && !strcmp(env, "0") ? 0 : FAT5__MM_ROWS;

    // 1. the driver
    fat5__sb_init(&errs, ctx);
    g->lib_cuda = fat5__dev_dlopen(&errs, cuda_names, 2, g->path_cuda, sizeof g->path_cuda);
    if (!g->lib_cuda) {
        fat5__err(ctx, FAT5_ERR_NO_DEVICE, "no CUDA driver (libcuda.so.1): %s",
                  errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        st = FAT5_ERR_NO_DEVICE;
        goto fail;
    }
    fat5__sb_free(&errs);
    if ((missing = fat5__dev_load_cu(g)) != NULL) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "the CUDA driver %s lacks %s (driver too old?)",
                       g->path_cuda, missing);
        goto fail;
    }
    if ((r = g->cu.cuDriverGetVersion(&g->driver_version)) != FAT5__CUDA_SUCCESS) {
        st = fat5__dev_cu_fail(ctx, FAT5_ERR_NO_DEVICE, r, "cuDriverGetVersion");
        fat5__err_prefix(ctx, st, "%s: ", g->path_cuda);
        goto fail;
    }

    // 2. NVRTC and cuBLAS, so that a missing library is reported before any device work
    if ((st = fat5__dev_open_nvrtc(ctx, g)) != FAT5_OK) goto fail;
    fat5__dev_sonames("libcublas", g->driver_version, buf, names);
    fat5__sb_init(&errs, ctx);
    g->lib_cublas = fat5__dev_dlopen(&errs, names, 2, g->path_cublas, sizeof g->path_cublas);
    if (!g->lib_cublas) {
        fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                  "cuBLAS not found (%s or %s; set CUDA_HOME or LD_LIBRARY_PATH): %s", names[0],
                  names[1], errs.buf ? errs.buf : "dlopen failed");
        fat5__sb_free(&errs);
        st = FAT5_ERR_NO_DEVICE;
        goto fail;
    }
    fat5__sb_free(&errs);
    if ((missing = fat5__dev_load_cublas(g)) != NULL) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "%s lacks %s", g->path_cublas, missing);
        goto fail;
    }

    // 3. the device
    if ((r = g->cu.cuInit(0)) != FAT5__CUDA_SUCCESS) {
        st = fat5__dev_cu_fail(ctx, FAT5_ERR_NO_DEVICE, r, "cuInit");
        fat5__err_prefix(ctx, st, "%s: ", g->path_cuda);
        goto fail;
    }
    if ((r = g->cu.cuDeviceGetCount(&count)) != FAT5__CUDA_SUCCESS) {
        st = fat5__dev_cu_fail(ctx, FAT5_ERR_NO_DEVICE, r, "cuDeviceGetCount");
        goto fail;
    }
    if (count <= 0) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "no CUDA device (driver %d.%d loaded)",
                       g->driver_version / 1000, g->driver_version % 1000 / 10);
        goto fail;
    }
    if (g->ordinal < 0 || g->ordinal >= count) {
        st = fat5__err(ctx, FAT5_ERR_NO_DEVICE,
                       "device_ordinal %d is out of range: %d CUDA device%s (0..%d)", g->ordinal,
                       count, count == 1 ? "" : "s", count - 1);
        goto fail;
    }
    if ((st = fat5__dev_check(ctx, g->cu.cuDeviceGet(&g->dev, g->ordinal), "cuDeviceGet")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetName(g->name, (int)sizeof g->name - 1, g->dev),
                              "cuDeviceGetName")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceTotalMem(&g->total_mem, g->dev),
                              "cuDeviceTotalMem")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetAttribute(&g->cc_major,
                              FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev),
                              "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetAttribute(&g->cc_minor,
                              FAT5__CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev),
                              "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)")) ||
        (st = fat5__dev_check(ctx, g->cu.cuDeviceGetAttribute(&g->sm_count,
                              FAT5__CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev),
                              "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)")))
        goto fail;
    g->name[sizeof g->name - 1] = 0;
    if (g->cu.cuDeviceGetAttribute(&g->smem_optin,
                                   FAT5__CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                   g->dev) != FAT5__CUDA_SUCCESS)
        g->smem_optin = 48 * 1024;
    if ((st = fat5__dev_choose_arch(ctx, g, g->cc_major * 10 + g->cc_minor)) != FAT5_OK) goto fail;
    g->launch_ex = (fat5__PFN_cuLaunchKernelEx)fat5__dev_sym(g->lib_cuda, "cuLaunchKernelEx");
    env = getenv("FAT5_PDL");
    {   // the kernels must be compiled for sm_90+ too (an older NVRTC may target compute_8x here):
        // below that fat5_pdl_begin compiles to nothing and a dependent would not wait
        const char *u = strchr(g->arch, '_');
        g->pdl = g->launch_ex && g->cc_major >= 9 && u && atoi(u + 1) >= 90 && !(env && !strcmp(env, "0"));
    }

    // 4. context (the primary one, which cuBLAS also uses) and the stream
    if ((st = fat5__dev_check(ctx, g->cu.cuDevicePrimaryCtxRetain(&g->cuctx, g->dev),
                              "cuDevicePrimaryCtxRetain")))
        goto fail;
    g->ctx_retained = 1;
    if ((st = fat5__dev_check(ctx, g->cu.cuCtxSetCurrent(g->cuctx), "cuCtxSetCurrent")) ||
        (st = fat5__dev_check(ctx, g->cu.cuStreamCreate(&g->stream, FAT5__CU_STREAM_NON_BLOCKING),
                              "cuStreamCreate")))
        goto fail;

    // 5. kernels: cache or compile, load, look every entry point up
    if ((st = fat5__dev_build(ctx, g, 0, &img, &img_size)) != FAT5_OK) goto fail;
    st = fat5__dev_load_module(ctx, g, img);
    if (st != FAT5_OK && g->cache_hit) {
        fat5__log(ctx, FAT5_LOG_WARN, "kernel cache: %s does not load (%s); recompiling",
                  g->cache_file, ctx->err);
        fat5__free(ctx, img);
        img = NULL;
        g->cache_rejected = 1;
        if ((st = fat5__dev_build(ctx, g, 1, &img, &img_size)) != FAT5_OK) goto fail;
        st = fat5__dev_load_module(ctx, g, img);
    }
    fat5__free(ctx, img);
    img = NULL;
    if (st != FAT5_OK) goto fail;
    for (k = 0; k < FAT5__K_COUNT; k++) {
        r = g->cu.cuModuleGetFunction(&g->fn[k], g->module, fat5__kernel_names[k]);
        if (r == FAT5__CUDA_ERROR_NOT_FOUND) {
            g->fn[k] = NULL;
            n_missing++;
        } else if (r != FAT5__CUDA_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "cuModuleGetFunction(%s)", fat5__kernel_names[k]);
            st = fat5__dev_check(ctx, r, what);
            goto fail;
        }
    }
    if (n_missing) {
        fat5__sb list;
        fat5__sb_init(&list, ctx);
        for (k = 0; k < FAT5__K_COUNT; k++)
            if (!g->fn[k])
                fat5__sb_printf(&list, "%s%s", list.len ? ", " : "", fat5__kernel_names[k]);
        fat5__err(ctx, FAT5_ERR_CUDA,
                  "the kernel module lacks %d of %d entry points: %s (each needs an extern \"C\" "
                  "__global__ function of that name in kernels/*.cu)",
                  n_missing, (int)FAT5__K_COUNT, list.buf ? list.buf : "(out of memory)");
        fat5__sb_free(&list);
        st = FAT5_ERR_CUDA;
        goto fail;
    }

    // 6. cuBLAS on our stream; fp32 compute with the default math mode (no TF32), fp32 reductions
    st = fat5__dev_blas_check(ctx, g->cublas.cublasCreate(&g->blas), "cublasCreate");
    if (st != FAT5_OK) {
        g->blas = NULL;
        fat5__err_prefix(ctx, st, "%s with driver %d.%d: ", g->path_cublas,
                         g->driver_version / 1000, g->driver_version % 1000 / 10);
        goto fail;
    }
    if ((st = fat5__dev_blas_check(ctx, g->cublas.cublasSetStream(g->blas, g->stream),
                                   "cublasSetStream")) ||
        (st = fat5__dev_blas_check(ctx, g->cublas.cublasSetMathMode(g->blas,
                  FAT5__CUBLAS_DEFAULT_MATH | FAT5__CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
                  "cublasSetMathMode")))
        goto fail;
    if (g->cublas.cublasGetVersion(g->blas, &g->cublas_version) != FAT5__CUBLAS_STATUS_SUCCESS)
        g->cublas_version = 0;

    fat5__log(ctx, FAT5_LOG_INFO,
              "GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB; driver %d.%d, NVRTC %d.%d (%s), cuBLAS %d (%s)",
              g->ordinal, g->name, g->cc_major, g->cc_minor, g->sm_count,
              (double)g->total_mem / (1024.0 * 1024.0 * 1024.0), g->driver_version / 1000,
              g->driver_version % 1000 / 10, g->nvrtc_major, g->nvrtc_minor, g->path_nvrtc,
              g->cublas_version, g->path_cublas);
    if (g->cache_hit)
        fat5__log(ctx, FAT5_LOG_INFO, "kernels: %s %s from the cache (%s)", g->ptx ? "PTX" : "cubin",
                  g->arch, g->cache_file);
    else
        fat5__log(ctx, FAT5_LOG_INFO, "kernels: compiled for %s in %.0f ms (%s%s)", g->arch,
                  g->compile_ms, g->cache_file[0] ? "cached at " : "cache off",
                  g->cache_file);
    fat5__log(ctx, FAT5_LOG_DEBUG, "GPU open took %.0f ms", 1e3 * fat5__now_s() - t0);
    return FAT5_OK;

fail:
    fat5__free(ctx, img);
    fat5__dev_close(ctx);
    return st;
}

// Test hook: finds in the cache or compiles the kernel module for compute capability cc (e.g. 90)
// with ctx's dtype and cache settings, with NVRTC alone (no driver, no GPU; driver version 0 in
// the key). Reports whether the cache was hit or a cache file rejected, and the file's path.
static FAT5__UNUSED fat5_status fat5__dev_build_offline(fat5_ctx *ctx, int cc, int *cache_hit,
                                                        int *cache_rejected, char *cache_file,
                                                        size_t cap) {
    struct fat5__gpu *g = FAT5__CAST(struct fat5__gpu *, fat5__calloc(ctx, 1, sizeof *g));
    char *img = NULL;
    size_t img_size = 0;
    fat5_status st;
    if (!g) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(g->name, sizeof g->name, "sm_%d (offline)", cc);
    if ((st = fat5__dev_open_nvrtc(ctx, g)) == FAT5_OK &&
        (st = fat5__dev_choose_arch(ctx, g, cc)) == FAT5_OK)
        st = fat5__dev_build(ctx, g, 0, &img, &img_size);
    if (cache_hit) *cache_hit = g->cache_hit;
    if (cache_rejected) *cache_rejected = g->cache_rejected;
    if (cache_file && cap) snprintf(cache_file, cap, "%s", g->cache_file);
    fat5__free(ctx, img);
    fat5__dev_release(ctx, g);
    return st;
}

// ---- memory, launch, GEMM -----------------------------------------------------------------------

// Makes the ctx's context current on this thread (a ctx may move between threads, and several ctxs
// may share one).
static fat5_status fat5__dev_enter(fat5_ctx *ctx, const char *what) {
    fat5__CUresult r;
    if (!ctx || !ctx->gpu)
        return fat5__err(ctx, FAT5_ERR_STATE, "%s: the context has no open GPU", what);
    r = ctx->gpu->cu.cuCtxSetCurrent(ctx->gpu->cuctx);
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    return fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, "cuCtxSetCurrent");
}

// Synchronizes the stream; an asynchronous fault is reported with the last kernel launched.
static FAT5__UNUSED fat5_status fat5__dev_sync(fat5_ctx *ctx) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_sync");
    fat5__CUresult r;
    char what[128];
    if (st) return st;
    r = ctx->gpu->cu.cuStreamSynchronize(ctx->gpu->stream);
    if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
    snprintf(what, sizeof what, "cuStreamSynchronize (last kernel launched: %s)",
             fat5__dev_kname(ctx->gpu->last_kernel));
    return fat5__dev_cu_fail(ctx, FAT5_ERR_CUDA, r, what);
}

// ---- the per-kernel profile: off unless fat5__dev_prof_enable turned it on (tools/bench step) ----

static void fat5__dev_prof_free(fat5_ctx *ctx, struct fat5__gpu *g) {
    struct fat5__prof *p = g ? g->prof : NULL;
    int i;
    if (!p) return;
    for (i = 0; i < p->n_ev; i++) g->ev.cuEventDestroy(p->ev[i]);
    fat5__free(ctx, p->e);
    fat5__free(ctx, p);
    g->prof = NULL;
}

// Turns the profile on (a new, empty table) or off. On needs the driver's event calls: without
// them FAT5_ERR_UNSUPPORTED.
static FAT5__UNUSED fat5_status fat5__dev_prof_enable(fat5_ctx *ctx, int on) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_prof_enable");
    struct fat5__gpu *g;
    if (st) return st;
    g = ctx->gpu;
    if ((st = fat5__dev_sync(ctx))) return st;
    fat5__dev_prof_free(ctx, g);
    if (!on) return FAT5_OK;
    if (!g->ev.cuEventCreate) {
#define FAT5__EV_LOAD(api, sym) g->ev.api = (fat5__PFN_##api)fat5__dev_sym(g->lib_cuda, sym);
        FAT5__CU_EVENT_API(FAT5__EV_LOAD)
#undef FAT5__EV_LOAD
        if (!g->ev.cuEventElapsedTime)
            g->ev.cuEventElapsedTime = (fat5__PFN_cuEventElapsedTime)fat5__dev_sym(g->lib_cuda, "cuEventElapsedTime");
        if (!g->ev.cuEventCreate || !g->ev.cuEventRecord || !g->ev.cuEventSynchronize || !g->ev.cuEventDestroy ||
            !g->ev.cuEventElapsedTime) {
            g->ev.cuEventCreate = NULL;
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "profile: %s lacks the event calls (cuEventCreate, "
                             "cuEventElapsedTime, ...)", g->path_cuda);
        }
    }
    g->prof = FAT5__CAST(struct fat5__prof *, fat5__calloc(ctx, 1, sizeof(struct fat5__prof)));
    if (!g->prof) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "profile: out of memory");
    return FAT5_OK;
}

// Waits for the pending calls and adds their times to their entries.
static FAT5__UNUSED fat5_status fat5__dev_prof_collect(fat5_ctx *ctx) {
    struct fat5__gpu *g = ctx->gpu;
    struct fat5__prof *p = g ? g->prof : NULL;
    int i;
    if (!p || !p->n_pending) return FAT5_OK;
    for (i = 0; i < p->n_pending; i++) {
        float ms = 0;
        fat5__CUresult r = g->ev.cuEventSynchronize(p->ev[2 * i + 1]);
        if (r == FAT5__CUDA_SUCCESS) r = g->ev.cuEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]);
        if (r != FAT5__CUDA_SUCCESS) {
            p->n_pending = 0;
            return fat5__dev_check(ctx, r, "profile: cuEventElapsedTime");
        }
        p->e[p->pending[i]].calls++;
        p->e[p->pending[i]].ms += ms;
    }
    p->n_pending = 0;
    return FAT5_OK;
}

// Opens a profiled call: its start event, after collecting a full buffer. Returns the call's slot,
// or -1 when the profile is off (or capturing a graph, or failing: the call runs unprofiled).
static int fat5__dev_prof_begin(fat5_ctx *ctx) {
    struct fat5__gpu *g = ctx->gpu;
    struct fat5__prof *p = g ? g->prof : NULL;
    int i;
    if (!p || g->capturing) return -1;
    if (p->n_pending == FAT5__PROF_PENDING && fat5__dev_prof_collect(ctx)) return -1;
    i = p->n_pending;
    while (p->n_ev < 2 * i + 2)
        if (g->ev.cuEventCreate(&p->ev[p->n_ev], 0) != FAT5__CUDA_SUCCESS) return -1;
        else p->n_ev++;
    return g->ev.cuEventRecord(p->ev[2 * i], g->stream) == FAT5__CUDA_SUCCESS ? i : -1;
}

// Closes the call of `slot` (from fat5__dev_prof_begin) under `key`.
static void fat5__dev_prof_end(fat5_ctx *ctx, int slot, const char *key) {
    struct fat5__gpu *g = ctx->gpu;
    struct fat5__prof *p = g->prof;
    int j;
    if (slot < 0 || !p || slot != p->n_pending) return;
    for (j = 0; j < p->n_e; j++)
        if (!strcmp(p->e[j].key, key)) break;
    if (j == p->n_e) {
        if (p->n_e == p->cap_e) {
            int cap = p->cap_e ? 2 * p->cap_e : 64;
            fat5__prof_entry *e = FAT5__CAST(fat5__prof_entry *,
                                             fat5__realloc(ctx, p->e, (size_t)cap * sizeof(fat5__prof_entry)));
            if (!e) return;
            p->e = e;
            p->cap_e = cap;
        }
        memset(&p->e[j], 0, sizeof p->e[j]);
        snprintf(p->e[j].key, sizeof p->e[j].key, "%s", key);
        p->n_e++;
    }
    if (g->ev.cuEventRecord(p->ev[2 * slot + 1], g->stream) != FAT5__CUDA_SUCCESS) return;
    p->pending[slot] = j;
    p->n_pending++;
}

static FAT5__UNUSED fat5_status fat5__dev_mem_info(fat5_ctx *ctx, size_t *free_b, size_t *total_b) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_mem_info");
    if (st) return st;
    return fat5__dev_check(ctx, ctx->gpu->cu.cuMemGetInfo(free_b, total_b), "cuMemGetInfo");
}

// Zero-filled device memory; bytes == 0 gives *out = 0 (which fat5__dev_free ignores).
static FAT5__UNUSED fat5_status fat5__dev_alloc(fat5_ctx *ctx, size_t bytes, fat5__dptr *out) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_alloc");
    struct fat5__gpu *g;
    fat5__dptr p = 0;
    fat5__CUresult r;
    *out = 0;
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    g = ctx->gpu;
    r = g->cu.cuMemAlloc(&p, bytes);
    if (r == FAT5__CUDA_ERROR_OUT_OF_MEMORY) {
        size_t fr = 0, tot = 0;
        g->cu.cuMemGetInfo(&fr, &tot);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY,
                         "GPU out of memory: allocating %zu bytes (%.1f MiB) with %.1f MiB free of "
                         "%.1f MiB on %s", bytes, (double)bytes / 1048576.0, (double)fr / 1048576.0,
                         (double)tot / 1048576.0, g->name);
    }
    if (r != FAT5__CUDA_SUCCESS) {
        char what[80];
        snprintf(what, sizeof what, "cuMemAlloc(%zu bytes)", bytes);
        return fat5__dev_check(ctx, r, what);
    }
    r = g->cu.cuMemsetD8Async(p, 0, bytes, g->stream);
    if (r != FAT5__CUDA_SUCCESS) {
        g->cu.cuMemFree(p);
        return fat5__dev_check(ctx, r, "cuMemsetD8Async (zero-filling a new allocation)");
    }
    *out = p;
    return FAT5_OK;
}

// Frees device memory after the stream has finished with it; 0 is a no-op.
static FAT5__UNUSED void fat5__dev_free(fat5_ctx *ctx, fat5__dptr p) {
    struct fat5__gpu *g;
    if (!p || !ctx || !ctx->gpu) return;
    g = ctx->gpu;
    if (g->cu.cuCtxSetCurrent(g->cuctx) != FAT5__CUDA_SUCCESS) return;
    g->cu.cuStreamSynchronize(g->stream);
    g->cu.cuMemFree(p);
}

// Waits for a copy just queued (r: the result of queuing it); errors name the copy and the last
// kernel launched, since an earlier kernel's fault surfaces here.
static fat5_status fat5__dev_copy_done(fat5_ctx *ctx, fat5__CUresult r, const char *dir, size_t bytes) {
    if (r == FAT5__CUDA_SUCCESS) r = ctx->gpu->cu.cuStreamSynchronize(ctx->gpu->stream);
    if (r != FAT5__CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "%s of %zu bytes (last kernel launched: %s)", dir, bytes,
                 fat5__dev_kname(ctx->gpu->last_kernel));
        return fat5__dev_check(ctx, r, what);
    }
    return FAT5_OK;
}

// Host to device. Returns when the copy is complete (src may be reused at once).
static FAT5__UNUSED fat5_status fat5__dev_upload(fat5_ctx *ctx, fat5__dptr dst, const void *src,
                                                 size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_upload");
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!dst || !src)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_upload: NULL %s for %zu bytes",
                         dst ? "source" : "destination", bytes);
    return fat5__dev_copy_done(ctx, ctx->gpu->cu.cuMemcpyHtoDAsync(dst, src, bytes, ctx->gpu->stream),
                               "upload", bytes);
}

// Device to host, after all work queued before it; returns when dst holds the data.
static FAT5__UNUSED fat5_status fat5__dev_download(fat5_ctx *ctx, void *dst, fat5__dptr src,
                                                   size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_download");
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!dst || !src)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_download: NULL %s for %zu bytes",
                         src ? "destination" : "source", bytes);
    return fat5__dev_copy_done(ctx, ctx->gpu->cu.cuMemcpyDtoHAsync(dst, src, bytes, ctx->gpu->stream),
                               "download", bytes);
}

static FAT5__UNUSED fat5_status fat5__dev_memset0(fat5_ctx *ctx, fat5__dptr p, size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_memset0");
    int slot;
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!p)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_memset0: NULL pointer for %zu bytes",
                         bytes);
    slot = fat5__dev_prof_begin(ctx);
    st = fat5__dev_check(ctx, ctx->gpu->cu.cuMemsetD8Async(p, 0, bytes, ctx->gpu->stream), "cuMemsetD8Async");
    if (!st) fat5__dev_prof_end(ctx, slot, "memset");
    return st;
}

// Device to device, queued on the stream.
static FAT5__UNUSED fat5_status fat5__dev_copy(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src,
                                               size_t bytes) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_copy");
    int slot;
    if (st) return st;
    if (bytes == 0) return FAT5_OK;
    if (!dst || !src)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_copy: NULL %s for %zu bytes",
                         dst ? "source" : "destination", bytes);
    slot = fat5__dev_prof_begin(ctx);
    st = fat5__dev_check(ctx, ctx->gpu->cu.cuMemcpyDtoDAsync(dst, src, bytes, ctx->gpu->stream),
                         "cuMemcpyDtoDAsync");
    if (!st) fat5__dev_prof_end(ctx, slot, "copy");
    return st;
}

static FAT5__UNUSED size_t fat5__dev_act_size(const fat5_ctx *ctx) {
    return ctx->cfg.dtype == FAT5_DTYPE_BF16 ? 2 : 4;
}

// The most threads a block of `kernel` can have on this device (its register use decides), asked
// once; 0 when no device or module is there.
static FAT5__UNUSED int fat5__dev_max_threads(fat5_ctx *ctx, int kernel) {
    struct fat5__gpu *g = ctx->gpu;
    int v = 0;
    if (!g || kernel < 0 || kernel >= FAT5__K_COUNT || !g->fn[kernel]) return 0;
    if (!g->max_threads[kernel] &&
        g->cu.cuFuncGetAttribute(&v, FAT5__CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, g->fn[kernel]) ==
            FAT5__CUDA_SUCCESS)
        g->max_threads[kernel] = v;
    return g->max_threads[kernel];
}

// The kernels of a decode step, which begin with fat5_pdl_begin (kernels/00_common.cu): on sm_90+
// they launch as programmatic dependents, so that the launch of each overlaps the end of the one
// before it (a step is ~100 short kernels; graphs alone leave ~1.5 us between them).
static int fat5__dev_pdl_kernel(int k) {
    return k == FAT5__K_embed_fwd || k == FAT5__K_rmsnorm_fwd || k == FAT5__K_norm_mm || k == FAT5__K_mm ||
           k == FAT5__K_attn_decode || k == FAT5__K_attn_decode_alibi || k == FAT5__K_attn_decode_fire ||
           k == FAT5__K_cache_write || k == FAT5__K_add_i32 || k == FAT5__K_gen_process || k == FAT5__K_gen_select;
}

// Queues kernel `kernel` (a FAT5__K_ id) on the stream. args: the kernel's parameters, one pointer
// per parameter. Dynamic shared memory above 48 KiB is opted into automatically.
static FAT5__UNUSED fat5_status fat5__dev_launch(fat5_ctx *ctx, int kernel, unsigned gx, unsigned gy,
                                                 unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                                 unsigned smem, void **args) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_launch");
    struct fat5__gpu *g;
    fat5__CUresult r;
    char what[200];
    int slot;
    if (st) return st;
    g = ctx->gpu;
    if (kernel < 0 || kernel >= FAT5__K_COUNT)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__dev_launch: no kernel with id %d", kernel);
    if (!g->fn[kernel])
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5__dev_launch: %s is not loaded",
                         fat5__kernel_names[kernel]);
    if (smem > 48u * 1024u && smem > g->smem_set[kernel]) {
        if (smem > (unsigned)g->smem_optin)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "launching %s: %u bytes of dynamic shared memory, %s allows %d",
                             fat5__kernel_names[kernel], smem, g->name, g->smem_optin);
        r = g->cu.cuFuncSetAttribute(
            g->fn[kernel], FAT5__CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem);
        if (r != FAT5__CUDA_SUCCESS) {
            snprintf(what, sizeof what, "cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES=%u)",
                     fat5__kernel_names[kernel], smem);
            return fat5__dev_check(ctx, r, what);
        }
        g->smem_set[kernel] = smem;
    }
    slot = fat5__dev_prof_begin(ctx);
    if (g->pdl && fat5__dev_pdl_kernel(kernel)) {
        // a programmatic dependent: its blocks may start while the kernel before it finishes, and
        // wait (griddepcontrol.wait, fat5_pdl_begin) for it to complete before touching memory
        fat5__CUlaunchAttribute at;
        fat5__CUlaunchConfig lc;
        memset(&at, 0, sizeof at);
        at.id = FAT5__CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.i = 1;
        lc.gx = gx, lc.gy = gy, lc.gz = gz, lc.bx = bx, lc.by = by, lc.bz = bz, lc.smem = smem;
        lc.stream = g->stream;
        lc.attrs = &at;
        lc.n_attrs = 1;
        r = g->launch_ex(&lc, g->fn[kernel], args, NULL);
    } else {
        r = g->cu.cuLaunchKernel(g->fn[kernel], gx, gy, gz, bx, by, bz, smem, g->stream, args, NULL);
    }
    if (r == FAT5__CUDA_SUCCESS) {
        g->last_kernel = kernel;
        fat5__dev_prof_end(ctx, slot, fat5__kernel_names[kernel] + 5);  // the op's name: "fat5_" left out
        if (!g->sync_launches) return FAT5_OK;
        r = g->cu.cuStreamSynchronize(g->stream);
        if (r == FAT5__CUDA_SUCCESS) return FAT5_OK;
        snprintf(what, sizeof what,
                 "%s (fault found by FAT5_SYNC_LAUNCHES; grid %ux%ux%u, block %ux%ux%u)",
                 fat5__kernel_names[kernel], gx, gy, gz, bx, by, bz);
        return fat5__dev_check(ctx, r, what);
    }
    snprintf(what, sizeof what, "launching %s (grid %ux%ux%u, block %ux%ux%u, %u B shared)",
             fat5__kernel_names[kernel], gx, gy, gz, bx, by, bz, smem);
    return fat5__dev_check(ctx, r, what);
}

// ---- CUDA graphs: work enqueued on the stream between capture_begin and capture_end is recorded
// instead of run, and replayed by graph_launch (the decoder's steps). During a capture nothing may
// synchronise or copy from pageable host memory; FAT5_SYNC_LAUNCHES (a synchronisation after every
// launch) cannot be captured, so capture_begin refuses with FAT5_ERR_UNSUPPORTED and callers run
// plain launches.
static FAT5__UNUSED fat5_status fat5__dev_capture_begin(fat5_ctx *ctx) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_capture_begin");
    if (st) return st;
    if (ctx->gpu->sync_launches)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "CUDA graph capture is off with FAT5_SYNC_LAUNCHES");
    st = fat5__dev_check(ctx, ctx->gpu->cu.cuStreamBeginCapture(ctx->gpu->stream,
                                                                FAT5__CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                         "cuStreamBeginCapture");
    ctx->gpu->capturing = st == FAT5_OK;
    return st;
}

// Ends the capture and instantiates it into *exec (a fat5__CUgraphExec). With `keep` 0 (a capture
// abandoned after an error) the recording is discarded and *exec stays NULL; the error that ended
// it is kept as the message.
static FAT5__UNUSED fat5_status fat5__dev_capture_end(fat5_ctx *ctx, int keep, void **exec) {
    struct fat5__gpu *g = ctx->gpu;
    fat5__CUgraph graph = NULL;
    fat5__CUgraphExec e = NULL;
    fat5__CUresult r;
    *exec = NULL;
    if (!g) return fat5__err(ctx, FAT5_ERR_STATE, "fat5__dev_capture_end: no device");
    r = g->cu.cuStreamEndCapture(g->stream, &graph);
    g->capturing = 0;
    if (!keep) {
        if (graph) g->cu.cuGraphDestroy(graph);
        return FAT5_OK;
    }
    if (r != FAT5__CUDA_SUCCESS) {
        if (graph) g->cu.cuGraphDestroy(graph);
        return fat5__dev_check(ctx, r, "cuStreamEndCapture");
    }
    r = g->cu.cuGraphInstantiate(&e, graph, 0);
    g->cu.cuGraphDestroy(graph);
    if (r != FAT5__CUDA_SUCCESS) return fat5__dev_check(ctx, r, "cuGraphInstantiate");
    *exec = (void *)e;
    return FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__dev_graph_launch(fat5_ctx *ctx, void *exec) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__dev_graph_launch");
    if (st) return st;
    return fat5__dev_check(ctx, ctx->gpu->cu.cuGraphLaunch((fat5__CUgraphExec)exec, ctx->gpu->stream),
                           "cuGraphLaunch");
}

static FAT5__UNUSED void fat5__dev_graph_destroy(fat5_ctx *ctx, void *exec) {
    if (exec && ctx->gpu) ctx->gpu->cu.cuGraphExecDestroy((fat5__CUgraphExec)exec);
}
#else  // FAT5_NO_CUDA: the device layer reduced to an error
static fat5_status fat5__dev_open(fat5_ctx *ctx) {
    return fat5__err(ctx, FAT5_ERR_NO_DEVICE, "fat5 was built with FAT5_NO_CUDA: no GPU path");
}
static void fat5__dev_close(fat5_ctx *ctx) { (void)ctx; }
#endif  // FAT5_NO_CUDA

// =============================================================================================
// ==[3.1] ops: buffers, host memory, and the op interface ==
// Every op exists twice under one name:
// fat5__cpu_<op> here and fat5__gpu_<op>, the launcher of kernel fat5_<op> in kernels/, with the
// same arguments. FAT5__OPS below lists the pairs; the two backends (fat5__cpu_backend,
// fat5__gpu_backend) are built from it, the model calls ops only through a backend, and the GPU
// tests run every pair on the same inputs.
//
// Buffers are backend addresses (fat5__addr): a host pointer here, a device pointer on the GPU;
// 0 is "none". Shapes are row-major; a Linear weight W is [out, in] as in PyTorch, so y = x W^T.
// On the CPU every buffer is fp32 whatever the context's dtype (the activation dtype of the GPU
// is bf16 or fp32), and accumulations run in double. Ops that need scratch memory take it from
// the context's arena (fat5__host_scratch), which fat5_model_reserve sizes up front.

typedef unsigned long long fat5__addr;   // a buffer on the backend that runs the op; 0 = none
#define FAT5__HOST(T, a) ((T *)(uintptr_t)(a))
#define FAT5__ADDR(p) ((fat5__addr)(uintptr_t)(p))

typedef enum { FAT5__MM_NT, FAT5__MM_NN, FAT5__MM_TN } fat5__mm_layout;

// An attention op's `kind`: which keys a query sees (the low two bits, FAT5__ATTN_MASK) and, in
// the higher bits, how the position bias added to the scores is made. No scheme bit: the T5
// buckets when `bias` (the [nb, H] table) is given, no bias when it is 0.
typedef enum fat5__attn_kind {
    FAT5__ATTN_CROSS = 0,       // every key of the sequence (cross-attention; no position bias)
    FAT5__ATTN_BIDIR = 1,       // encoder self-attention: every key; T5: bidirectional buckets
    FAT5__ATTN_CAUSAL = 2,      // decoder self-attention: keys j <= i; T5: causal buckets
    FAT5__ATTN_MASK = 3,        // kind & FAT5__ATTN_MASK: one of the three above
    FAT5__ATTN_ALIBI = 4,       // bias -slope_h |j - i|, ALiBi slopes of H heads (fat5__alibi_slope);
                                // bias and lut unused
    FAT5__ATTN_ALIBI_ASYM = 8,  // with BIDIR | ALIBI: slopes of H/2 heads, head h and h + H/2 sharing
                                // one; heads h < H/2 see keys j <= i, the others keys j >= i
    FAT5__ATTN_FIRE = 16,       // bias = FIRE's MLP of a normalised distance (fat5__fire_u); `bias`
                                // is FIRE's parameter block (below), nb its MLP width W,
                                // max_distance its L0 (init_L); lut unused
    FAT5__ATTN_PREFIX = 32,     // block-global keys (below)
    FAT5__ATTN_TGLOBAL = 64,    // transient-global keys (below)
    FAT5__ATTN_GSHARED = 128    // with TGLOBAL: the global keys' bias comes from T5's table
} fat5__attn_kind;
// Attention patterns of the encoder (with BIDIR), for long inputs. A local window, in the bits
// from FAT5__ATTN_WINDOW_SHIFT up: a query sees only the keys with |j - i| <= r (LongT5's local
// attention). FAT5__ATTN_WINDOW(r) sets it, FAT5__ATTN_RADIUS reads it (-1: no window). With a
// window, one of two kinds of global keys may be added; both take the ops' `g` argument:
//   FAT5__ATTN_PREFIX   block-global: the first g tokens of every sequence are global: they see
//                       every key of their sequence, and every query sees them (with the scheme's
//                       bias of j - i, as any key).
//   FAT5__ATTN_TGLOBAL  transient-global (LongT5): a sequence of n tokens has G = n / g globals,
//                       k and v rows cu_g[s] .. cu_g[s + 1] (cu_g: int32 [n_seq + 1], rows anywhere
//                       in k and v, e.g. after the tokens'); every query of the sequence sees all
//                       of them besides its window; token i belongs to block b(i) = min(i / g, G - 1)
//                       and global k adds T_global[bucket_bidir(k - b(i)), h] to the score. T_global
//                       is the [nb, H] table right after T5's in `bias` ([2, nb, H]; its gradient
//                       likewise in dbias), or T5's own table with FAT5__ATTN_GSHARED. T5 buckets or
//                       no bias only (no ALiBi, FIRE). attn_bwd_dkv computes dk, dv of the global
//                       rows too: its k_seq maps them to their sequence, Tk counts them.
// The ops visit only the keys of the pattern, nothing of L^2: O(L (2 r + 1)) scores for the window,
// plus O(L g) for a block-global prefix (its queries see everything), O(L^2 / g) for
// transient-global keys.
#define FAT5__ATTN_WINDOW_SHIFT 8
#define FAT5__ATTN_MAX_RADIUS ((1 << 22) - 1)
#define FAT5__ATTN_WINDOW(r) (((int)(r) + 1) << FAT5__ATTN_WINDOW_SHIFT)
#define FAT5__ATTN_RADIUS(kind) (((kind) >> FAT5__ATTN_WINDOW_SHIFT) - 1)

// FIRE's parameter block, floats, in the order the model declares them (one contiguous run of
// the parameter arena, so that one pointer serves the kernels; its gradient has the same layout):
// mlp.0.weight [W] | mlp.0.bias [W] | mlp.2.weight [H, W] | mlp.2.bias [H] | c | L_multiplier.
#define FAT5__FIRE_B1(W) ((int64_t)(W))
#define FAT5__FIRE_W2(W) (2 * (int64_t)(W))
#define FAT5__FIRE_B2(H, W) ((int64_t)(W) * (2 + (int64_t)(H)))
#define FAT5__FIRE_C(H, W) (FAT5__FIRE_B2(H, W) + (int64_t)(H))
#define FAT5__FIRE_LM(H, W) (FAT5__FIRE_C(H, W) + 1)
#define FAT5__FIRE_NUMEL(H, W) (FAT5__FIRE_C(H, W) + 2)
// One head's share of FIRE's gradient, floats: d mlp.0.weight [W] | d mlp.0.bias [W] |
// d mlp.2.weight row h [W] | d mlp.2.bias[h] | dc | dL_multiplier (fat5__fire_grad, fire_reduce).
#define FAT5__FIRE_SHARES(W) (3 * (int64_t)(W) + 3)

// rope's flags
#define FAT5__ROPE_INTERLEAVED 1  // pairs (2k, 2k + 1) (GPT-J), else (k, k + rd/2) (NeoX)
#define FAT5__ROPE_KEY 2          // the key side: xPos scales by zeta^(-t/gamma) instead of zeta^(t/gamma)
#define FAT5__ROPE_TRANSPOSE 4    // the backward: the transposed rotation (same scale)

// ---- host memory: the CPU backend's allocator and copies ----

// A buffer of at least `bytes` from the context's scratch arena (grown on demand, kept until the
// context is destroyed). NULL, with the message set, when out of memory. One op's scratch at a time.
static void *fat5__host_scratch(fat5_ctx *ctx, size_t bytes, const char *op) {
    if (bytes > ctx->scratch_bytes) {
        void *p = fat5__malloc(ctx, bytes);
        if (!p) {
            fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of scratch", op, bytes);
            return NULL;
        }
        fat5__free(ctx, ctx->scratch);
        ctx->scratch = p;
        ctx->scratch_bytes = bytes;
    }
    return ctx->scratch;
}

// zero-filled; bytes == 0 gives *out = 0
static fat5_status fat5__host_alloc(fat5_ctx *ctx, size_t bytes, fat5__addr *out) {
    void *p;
    *out = 0;
    if (bytes == 0) return FAT5_OK;
    p = fat5__calloc(ctx, 1, bytes);
    if (!p)
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes (%.1f MiB) of host memory", bytes,
                         (double)bytes / 1048576.0);
    *out = FAT5__ADDR(p);
    return FAT5_OK;
}
static void fat5__host_free(fat5_ctx *ctx, fat5__addr p) { fat5__free(ctx, FAT5__HOST(void, p)); }
// upload / download / copy: memmove, and nothing at all when source and destination coincide
// (the CPU backend's fp32 weights are the host weights themselves)
static fat5_status fat5__host_upload(fat5_ctx *ctx, fat5__addr dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes && FAT5__HOST(void, dst) != src) memmove(FAT5__HOST(void, dst), src, bytes);
    return FAT5_OK;
}
static fat5_status fat5__host_download(fat5_ctx *ctx, void *dst, fat5__addr src, size_t bytes) {
    return fat5__host_upload(ctx, FAT5__ADDR(dst), FAT5__HOST(const void, src), bytes);
}
static fat5_status fat5__host_copy(fat5_ctx *ctx, fat5__addr dst, fat5__addr src, size_t bytes) {
    return fat5__host_upload(ctx, dst, FAT5__HOST(const void, src), bytes);
}
static fat5_status fat5__host_memset0(fat5_ctx *ctx, fat5__addr p, size_t bytes) {
    (void)ctx;
    if (bytes) memset(FAT5__HOST(void, p), 0, bytes);
    return FAT5_OK;
}
static fat5_status fat5__host_sync(fat5_ctx *ctx) {
    (void)ctx;
    return FAT5_OK;
}
static size_t fat5__host_act_size(const fat5_ctx *ctx) {
    (void)ctx;
    return 4;
}

// =============================================================================================
// ==[3.2] ops: the CPU reference (fp32, simple, obviously right) ==

// ---- util ----

// x[i] = v for i < n
static fat5_status fat5__cpu_fill_f32(fat5_ctx *ctx, fat5__addr x_, float v, int64_t n) {
    float *x = FAT5__HOST(float, x_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) x[i] = v;
    return FAT5_OK;
}

// x[i] *= s for i < n
static fat5_status fat5__cpu_scale_f32(fat5_ctx *ctx, fat5__addr x_, float s, int64_t n) {
    float *x = FAT5__HOST(float, x_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) x[i] *= s;
    return FAT5_OK;
}

// dst[i] = bf16(src[i]) (16-bit words, round to nearest even)
static fat5_status fat5__cpu_f32_to_bf16(fat5_ctx *ctx, fat5__addr dst_, fat5__addr src_, int64_t n) {
    uint16_t *dst = FAT5__HOST(uint16_t, dst_);
    const float *src = FAT5__HOST(const float, src_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) dst[i] = fat5__f32_to_bf16(src[i]);
    return FAT5_OK;
}

// dst[i] = src[i] in the activation dtype: fp32 on the CPU, so a copy
static fat5_status fat5__cpu_to_act(fat5_ctx *ctx, fat5__addr dst, fat5__addr src, int64_t n) {
    return fat5__host_copy(ctx, dst, src, (size_t)(n > 0 ? n : 0) * sizeof(float));
}

// out[j] += sum over r < rows of in[r*D + j]
static fat5_status fat5__cpu_colsum_f32(fat5_ctx *ctx, fat5__addr out_, fat5__addr in_, int rows, int D) {
    float *out = FAT5__HOST(float, out_);
    const float *in = FAT5__HOST(const float, in_);
    int r, j;
    (void)ctx;
    for (j = 0; j < D; j++) {
        double s = 0;
        for (r = 0; r < rows; r++) s += in[(int64_t)r * D + j];
        out[j] = (float)(out[j] + s);
    }
    return FAT5_OK;
}

// ---- matrix products ----
//   NT: C[M,N] = alpha A[M,K] B[N,K]^T + beta C      (y = x W^T)
//   NN: C[M,N] = alpha A[M,K] B[K,N]   + beta C      (dx = dy W)
//   TN: C[M,N] = alpha A[K,M]^T B[K,N] + beta C      (dW += dy^T x)
// beta == 0 does not read C. c_f32 (C kept in fp32 rather than the activation dtype) only matters
// on the GPU.
//
// Every element is s = sum over k = 0, 1, ..., K-1 of a(i,k) b(k,j), accumulated in double in that
// order (each product of two floats is exact in double; one rounding per addition), then
// C = (float)(alpha s + beta C). The blocking below only decides where and when an element is
// computed, never the order of its sum: a running sum that leaves the registers between blocks of
// k is stored as the same double. The result is therefore bitwise the same for every thread count
// and block size, with or without FMA contraction (the products are exact), and equal to the plain
//     double s = 0; for (k = 0; k < K; k++) s += (double)a(i,k) * b(k,j);
// Double rather than fp32 sums: the finite-difference tests of the whole model need the lower
// noise, and the products are then the same bits as fat5's earlier one-row-at-a-time reference.
//
// Blocking (the classic packed GEMM): C is cut into tiles that the threads share out (whole tiles,
// never a sum). For each tile and each block of FAT5__MM_KC values of k, the tile's columns of B
// are packed (as doubles) into panels of NR columns and, FAT5__MM_MC rows at a time, its rows of A
// into panels of MR rows, zero-padded at the edges; a micro-kernel keeps an MR x NR block of sums
// in registers and runs over the block of k. Sums between blocks of k live in a per-thread tile.
#define FAT5__MM_MR 4      // rows of the micro-kernel
#define FAT5__MM_KC 256    // k per packed block
#define FAT5__MM_MC 48     // rows of A packed at a time (a multiple of MR)
#define FAT5__MM_TILE_M 192  // largest tile: rows (a multiple of MC)
#define FAT5__MM_TILE_N 256  // and columns (a multiple of 8)
// per-thread scratch in doubles: the tile's sums, a packed block of B and one of A
#define FAT5__MM_SCRATCH ((size_t)FAT5__MM_TILE_M * FAT5__MM_TILE_N + (size_t)FAT5__MM_KC * FAT5__MM_TILE_N + \
                          (size_t)FAT5__MM_MC * FAT5__MM_KC + 8)

// s[MR][NR] (+)= sum over k < kc of pa[k][MR] x pb[k][NR] (outer products, in k order); s is the
// running sum (first: start from 0). Vector lanes are independent double operations, so every
// form below gives the same bits: a 4-column kernel (GNU vectors, or plain C elsewhere) and an
// 8-column one (GNU vectors; on x86 compiled for AVX2 and chosen at run time unless the build
// already targets AVX2).
#if (defined(__GNUC__) || defined(__clang__)) && !defined(FAT5_MM_SCALAR)
#define FAT5__MM_VEC 1
typedef double fat5__v4d __attribute__((vector_size(32)));
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__AVX2__)
#define FAT5__MM_WIDE_ATTR __attribute__((target("avx2")))
#define FAT5__MM_WIDE_CHECK 1
#else
#define FAT5__MM_WIDE_ATTR
#define FAT5__MM_WIDE_CHECK 0
#endif
// Written out (no loops over rows and lanes) so that the sums stay in registers.
#define FAT5__MM_LD(v, p) memcpy(&(v), (p), sizeof(fat5__v4d))
#define FAT5__MM_ST(p, v) memcpy((p), &(v), sizeof(fat5__v4d))
#define FAT5__MM_SPLAT(x) {x, x, x, x}
static void fat5__mm_kernel4(int64_t kc, const double *pa, const double *pb, double *s, int first) {
    fat5__v4d c0, c1, c2, c3, b;
    int64_t k;
    if (first) {
        memset(&c0, 0, sizeof c0);
        c1 = c2 = c3 = c0;
    } else {
        FAT5__MM_LD(c0, s), FAT5__MM_LD(c1, s + 4), FAT5__MM_LD(c2, s + 8), FAT5__MM_LD(c3, s + 12);
    }
    for (k = 0; k < kc; k++, pa += FAT5__MM_MR, pb += 4) {
        fat5__v4d a0 = FAT5__MM_SPLAT(pa[0]), a1 = FAT5__MM_SPLAT(pa[1]);
        fat5__v4d a2 = FAT5__MM_SPLAT(pa[2]), a3 = FAT5__MM_SPLAT(pa[3]);
        FAT5__MM_LD(b, pb);
        c0 = c0 + a0 * b, c1 = c1 + a1 * b, c2 = c2 + a2 * b, c3 = c3 + a3 * b;
    }
    FAT5__MM_ST(s, c0), FAT5__MM_ST(s + 4, c1), FAT5__MM_ST(s + 8, c2), FAT5__MM_ST(s + 12, c3);
}
FAT5__MM_WIDE_ATTR static void fat5__mm_kernel8(int64_t kc, const double *pa, const double *pb, double *s,
                                                int first) {
    fat5__v4d c0, c1, c2, c3, d0, d1, d2, d3, b, e;
    int64_t k;
    if (first) {
        memset(&c0, 0, sizeof c0);
        c1 = c2 = c3 = d0 = d1 = d2 = d3 = c0;
    } else {
        FAT5__MM_LD(c0, s), FAT5__MM_LD(d0, s + 4), FAT5__MM_LD(c1, s + 8), FAT5__MM_LD(d1, s + 12);
        FAT5__MM_LD(c2, s + 16), FAT5__MM_LD(d2, s + 20), FAT5__MM_LD(c3, s + 24), FAT5__MM_LD(d3, s + 28);
    }
    for (k = 0; k < kc; k++, pa += FAT5__MM_MR, pb += 8) {
        fat5__v4d a0 = FAT5__MM_SPLAT(pa[0]), a1 = FAT5__MM_SPLAT(pa[1]);
        fat5__v4d a2 = FAT5__MM_SPLAT(pa[2]), a3 = FAT5__MM_SPLAT(pa[3]);
        FAT5__MM_LD(b, pb);
        FAT5__MM_LD(e, pb + 4);
        c0 = c0 + a0 * b, d0 = d0 + a0 * e, c1 = c1 + a1 * b, d1 = d1 + a1 * e;
        c2 = c2 + a2 * b, d2 = d2 + a2 * e, c3 = c3 + a3 * b, d3 = d3 + a3 * e;
    }
    FAT5__MM_ST(s, c0), FAT5__MM_ST(s + 4, d0), FAT5__MM_ST(s + 8, c1), FAT5__MM_ST(s + 12, d1);
    FAT5__MM_ST(s + 16, c2), FAT5__MM_ST(s + 20, d2), FAT5__MM_ST(s + 24, c3), FAT5__MM_ST(s + 28, d3);
}
#else
#define FAT5__MM_VEC 0
static void fat5__mm_kernel4(int64_t kc, const double *pa, const double *pb, double *s, int first) {
    int64_t k;
    int r, j;
    if (first) memset(s, 0, FAT5__MM_MR * 4 * sizeof(double));
    for (k = 0; k < kc; k++)
        for (r = 0; r < FAT5__MM_MR; r++)
            for (j = 0; j < 4; j++) s[r * 4 + j] = s[r * 4 + j] + pa[k * FAT5__MM_MR + r] * pb[k * 4 + j];
}
#endif

// the micro-kernel's columns: 8 where the wide kernel runs, else 4
static int fat5__mm_nr(void) {
#if FAT5__MM_VEC && FAT5__MM_WIDE_CHECK
    return __builtin_cpu_supports("avx2") ? 8 : 4;
#elif FAT5__MM_VEC
    return 8;
#else
    return 4;
#endif
}

typedef struct fat5__mm_job {
    fat5__mm_layout layout;
    float *C;
    const float *A, *B;
    int64_t M, N, K, tm, tn, tiles_n, tiles;  // tiles of tm x tn, tiles_n per row of tiles
    float alpha, beta;
    double *scratch;                          // FAT5__MM_SCRATCH doubles per part
    int nr;
} fat5__mm_job;

// Tiles [part * tiles / parts, (part + 1) * tiles / parts), in the part's own scratch.
static void fat5__mm_part(void *arg, int part, int parts) {
    const fat5__mm_job *J = FAT5__CAST(const fat5__mm_job *, arg);
    const int MR = FAT5__MM_MR, NR = J->nr;
    const int64_t M = J->M, N = J->N, K = J->K;
    double *base = J->scratch + (size_t)part * FAT5__MM_SCRATCH;
    // 64-byte aligned blocks (the scratch itself is malloc-aligned)
    double *acc = base + ((8 - (size_t)((uintptr_t)base / sizeof(double) % 8)) % 8);
    double *pb = acc + (size_t)FAT5__MM_TILE_M * FAT5__MM_TILE_N, *pa = pb + (size_t)FAT5__MM_KC * FAT5__MM_TILE_N;
    int64_t t, t0 = J->tiles * part / parts, t1 = J->tiles * (part + 1) / parts;
    for (t = t0; t < t1; t++) {
        int64_t i0 = t / J->tiles_n * J->tm, j0 = t % J->tiles_n * J->tn;
        int64_t mt = M - i0 < J->tm ? M - i0 : J->tm, nt = N - j0 < J->tn ? N - j0 : J->tn;
        int64_t npan = (nt + NR - 1) / NR, mpan = (mt + MR - 1) / MR, pc, i, j, k;
        if (K <= 0) memset(acc, 0, (size_t)(mpan * MR * npan * NR) * sizeof(double));
        for (pc = 0; pc < K; pc += FAT5__MM_KC) {
            int64_t kc = K - pc < FAT5__MM_KC ? K - pc : FAT5__MM_KC, ic, jp, ip;
            // B[pc.., j0..] -> pb[jp][k][NR]
            for (jp = 0; jp < npan; jp++) {
                double *d = pb + jp * kc * NR;
                for (j = 0; j < NR; j++) {
                    int64_t jj = j0 + jp * NR + j;
                    if (jj >= N)
                        for (k = 0; k < kc; k++) d[k * NR + j] = 0;
                    else if (J->layout == FAT5__MM_NT)
                        for (k = 0; k < kc; k++) d[k * NR + j] = J->B[jj * K + pc + k];
                    else
                        for (k = 0; k < kc; k++) d[k * NR + j] = J->B[(pc + k) * N + jj];
                }
            }
            for (ic = 0; ic < mpan; ic += FAT5__MM_MC / MR) {
                int64_t ipn = mpan - ic < FAT5__MM_MC / MR ? mpan - ic : FAT5__MM_MC / MR;
                // A[i0 + ic*MR.., pc..] -> pa[ip][k][MR]
                for (ip = 0; ip < ipn; ip++) {
                    double *d = pa + ip * kc * MR;
                    for (i = 0; i < MR; i++) {
                        int64_t ii = i0 + (ic + ip) * MR + i;
                        if (ii >= M)
                            for (k = 0; k < kc; k++) d[k * MR + i] = 0;
                        else if (J->layout == FAT5__MM_TN)
                            for (k = 0; k < kc; k++) d[k * MR + i] = J->A[(pc + k) * M + ii];
                        else
                            for (k = 0; k < kc; k++) d[k * MR + i] = J->A[ii * K + pc + k];
                    }
                }
                for (jp = 0; jp < npan; jp++)
                    for (ip = 0; ip < ipn; ip++) {
                        double *s = acc + ((ic + ip) * npan + jp) * MR * NR;
#if FAT5__MM_VEC
                        if (NR == 8) {
                            fat5__mm_kernel8(kc, pa + ip * kc * MR, pb + jp * kc * NR, s, pc == 0);
                            continue;
                        }
#endif
                        fat5__mm_kernel4(kc, pa + ip * kc * MR, pb + jp * kc * NR, s, pc == 0);
                    }
            }
        }
        // C = alpha s + beta C
        for (i = 0; i < mt; i++) {
            const double *s = acc + (i / MR) * npan * MR * NR + (i % MR) * NR;
            float *c = J->C + (i0 + i) * N + j0;
            for (j = 0; j < nt; j++) {
                double v = s[j / NR * MR * NR + j % NR];
                c[j] = (float)(J->alpha * v + (J->beta != 0 ? (double)J->beta * c[j] : 0.0));
            }
        }
    }
}

// scratch bytes fat5__cpu_mm takes from the context's arena
static size_t fat5__cpu_mm_scratch(const fat5_ctx *ctx) {
    return (size_t)ctx->n_threads * FAT5__MM_SCRATCH * sizeof(double);
}

// Products of a few rows in the NT layout (decoding: one token per row, y = x W^T) skip the
// packing, which would cost more than the product: each element is the same sequential double
// sum straight from the row-major operands, eight columns at a time for independent chains.
// Threads split the columns.
#define FAT5__MM_FEW_ROWS 4
static void fat5__mm_few_part(void *arg, int part, int parts) {
    const fat5__mm_job *J = FAT5__CAST(const fat5__mm_job *, arg);
    int64_t K = J->K, N = J->N, j0 = N * part / parts, j1 = N * (part + 1) / parts, i, j, k, c;
    for (i = 0; i < J->M; i++) {
        const float *a = J->A + i * K;
        float *crow = J->C + i * N;
        for (j = j0; j < j1; j += 8) {
            double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            const float *b[8];
            int nc = j1 - j < 8 ? (int)(j1 - j) : 8;
            for (c = 0; c < 8; c++) b[c] = J->B + (j + (c < nc ? c : 0)) * K;
            for (k = 0; k < K; k++) {
                double x = a[k];
                s[0] += x * b[0][k], s[1] += x * b[1][k], s[2] += x * b[2][k], s[3] += x * b[3][k];
                s[4] += x * b[4][k], s[5] += x * b[5][k], s[6] += x * b[6][k], s[7] += x * b[7][k];
            }
            for (c = 0; c < nc; c++)
                crow[j + c] = (float)(J->alpha * s[c] + (J->beta != 0 ? (double)J->beta * crow[j + c] : 0.0));
        }
    }
}

static fat5_status fat5__cpu_mm(fat5_ctx *ctx, fat5__mm_layout layout, fat5__addr C_, int c_f32, fat5__addr A_,
                                fat5__addr B_, int64_t M, int64_t N, int64_t K, float alpha, float beta) {
    fat5__mm_job J;
    int parts = ctx->n_threads;
    (void)c_f32;
    if (M <= 0 || N <= 0) return FAT5_OK;
    if (layout == FAT5__MM_NT && M <= FAT5__MM_FEW_ROWS) {
        memset(&J, 0, sizeof J);
        J.C = FAT5__HOST(float, C_);
        J.A = FAT5__HOST(const float, A_);
        J.B = FAT5__HOST(const float, B_);
        J.M = M, J.N = N, J.K = K, J.alpha = alpha, J.beta = beta;
        if ((double)M * (double)N * (double)(K > 0 ? K : 1) < 5e5 || N < 16 * (int64_t)parts) parts = 1;
        fat5__pool_run(ctx, fat5__mm_few_part, &J, parts);
        return FAT5_OK;
    }
    J.layout = layout;
    J.C = FAT5__HOST(float, C_);
    J.A = FAT5__HOST(const float, A_);
    J.B = FAT5__HOST(const float, B_);
    J.M = M;
    J.N = N;
    J.K = K;
    J.alpha = alpha;
    J.beta = beta;
    J.nr = fat5__mm_nr();
    // Tiles: the largest, halved (rows or columns, whichever is longer) until every thread has a
    // few; small products (under ~1 MFLOP) run on the calling thread alone.
    J.tm = FAT5__MM_TILE_M;
    J.tn = FAT5__MM_TILE_N;
    if ((double)M * (double)N * (double)(K > 0 ? K : 1) < 5e5) parts = 1;
    for (;;) {
        J.tiles_n = (N + J.tn - 1) / J.tn;
        J.tiles = (M + J.tm - 1) / J.tm * J.tiles_n;
        if (parts == 1 || J.tiles >= 4 * (int64_t)parts) break;
        if (J.tm >= J.tn && J.tm > FAT5__MM_MC && J.tm / 2 < M) J.tm /= 2;          // 192 -> 96 -> 48
        else if (J.tn > 32 && J.tn / 2 < N) J.tn /= 2;                              // 256 -> ... -> 32
        else if (J.tm > FAT5__MM_MC && J.tm / 2 < M) J.tm /= 2;
        else break;
    }
    if (J.tiles < parts) parts = (int)J.tiles;
    J.scratch = FAT5__CAST(double *, fat5__host_scratch(ctx, (size_t)parts * FAT5__MM_SCRATCH * sizeof(double),
                                                       "fat5__cpu_mm"));
    if (!J.scratch) return FAT5_ERR_OUT_OF_MEMORY;
    fat5__pool_run(ctx, fat5__mm_part, &J, parts);
    return FAT5_OK;
}

// batch products of the same shape: C + b sC = op(A + b sA, B + b sB) for b < batch, strides in
// elements (0: the same matrix for every product), as mm computes each one
static fat5_status fat5__cpu_mm_batched(fat5_ctx *ctx, fat5__mm_layout layout, fat5__addr C, int c_f32, fat5__addr A,
                                        fat5__addr B, int64_t M, int64_t N, int64_t K, float alpha, float beta,
                                        int batch, int64_t sA, int64_t sB, int64_t sC) {
    fat5_status st = FAT5_OK;
    int b;
    for (b = 0; b < batch && !st; b++)
        st = fat5__cpu_mm(ctx, layout, C + (fat5__addr)(b * sC) * 4, c_f32, A + (fat5__addr)(b * sA) * 4,
                          B + (fat5__addr)(b * sB) * 4, M, N, K, alpha, beta);
    return st;
}

// ---- embedding ----

// out[t] = table[tok[t]] (rows of width D)
static fat5_status fat5__cpu_embed_fwd(fat5_ctx *ctx, fat5__addr out, fat5__addr table, fat5__addr tok_, int64_t T,
                                       int D) {
    const int32_t *tok = FAT5__HOST(const int32_t, tok_);
    int64_t t;
    (void)ctx;
    for (t = 0; t < T; t++)
        memcpy(FAT5__HOST(float, out) + t * D, FAT5__HOST(const float, table) + (int64_t)tok[t] * D,
               (size_t)D * sizeof(float));
    return FAT5_OK;
}
// dtable[tok[t]] += dout[t]
static fat5_status fat5__cpu_embed_bwd(fat5_ctx *ctx, fat5__addr dtable, fat5__addr dout_, fat5__addr tok_,
                                       int64_t T, int D) {
    const int32_t *tok = FAT5__HOST(const int32_t, tok_);
    const float *dout = FAT5__HOST(const float, dout_);
    int64_t t, j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        float *d = FAT5__HOST(float, dtable) + (int64_t)tok[t] * D;
        for (j = 0; j < D; j++) d[j] += dout[t * D + j];
    }
    return FAT5_OK;
}

// ---- RMSNorm ----

// T5 RMSNorm: y = w * x * r, r = 1 / sqrt(mean(x^2) + eps) (no mean subtraction). Saves r [T].
// xs, when not 0: a copy of x (the residual stream saved for the backward, in the same pass).
static fat5_status fat5__cpu_rmsnorm_fwd(fat5_ctx *ctx, fat5__addr y_, fat5__addr r_, fat5__addr x_, fat5__addr w_,
                                         int64_t T, int D, float eps, fat5__addr xs) {
    float *y = FAT5__HOST(float, y_), *r = FAT5__HOST(float, r_);
    const float *x = FAT5__HOST(const float, x_), *w = FAT5__HOST(const float, w_);
    int64_t t, j;
    (void)ctx;
    if (xs) memcpy(FAT5__HOST(float, xs), x, (size_t)T * (size_t)D * sizeof(float));
    for (t = 0; t < T; t++) {
        const float *xr = x + t * D;
        double ss = 0;
        float rt;
        for (j = 0; j < D; j++) ss += (double)xr[j] * xr[j];
        rt = (float)(1.0 / sqrt(ss / (double)D + (double)eps));
        r[t] = rt;
        for (j = 0; j < D; j++) y[t * D + j] = w[j] * (xr[j] * rt);
    }
    return FAT5_OK;
}
// dx (+)= r g - x r^3 mean(g x) with g = w dy;  dw += sum_t dy x r (dw may be 0: no weight
// gradient); dxa (0: none) a copy of dx's final value in the activation dtype (fp32 on the CPU).
// scratch is the GPU's; the CPU needs none.
static fat5_status fat5__cpu_rmsnorm_bwd(fat5_ctx *ctx, fat5__addr dx_, fat5__addr dw_, fat5__addr dy_,
                                         fat5__addr x_, fat5__addr w_, fat5__addr r_, int64_t T, int D,
                                         int accumulate, fat5__addr scratch, fat5__addr dxa_) {
    float *dx = FAT5__HOST(float, dx_), *dw = FAT5__HOST(float, dw_), *dxa = FAT5__HOST(float, dxa_);
    const float *dy = FAT5__HOST(const float, dy_), *x = FAT5__HOST(const float, x_);
    const float *w = FAT5__HOST(const float, w_), *r = FAT5__HOST(const float, r_);
    int64_t t, j;
    (void)ctx;
    (void)scratch;
    for (t = 0; t < T; t++) {
        const float *xr = x + t * D, *dyr = dy + t * D;
        double rt = r[t], gx = 0;
        for (j = 0; j < D; j++) gx += (double)w[j] * dyr[j] * xr[j];
        gx /= (double)D;
        for (j = 0; j < D; j++) {
            double v = rt * w[j] * dyr[j] - xr[j] * rt * rt * rt * gx;
            dx[t * D + j] = (float)(accumulate ? dx[t * D + j] + v : v);
            if (dxa) dxa[t * D + j] = dx[t * D + j];
            if (dw) dw[j] += (float)(dyr[j] * xr[j] * rt);
        }
    }
    return FAT5_OK;
}

// ---- FFN activations ----

static float fat5__act_f(fat5_act a, float x) {
    switch (a) {
    case FAT5_ACT_RELU: return x > 0 ? x : 0.0f;
    case FAT5_ACT_GELU: return (float)(0.5 * x * (1.0 + erf(x / 1.4142135623730951)));
    case FAT5_ACT_GELU_TANH: {
        double u = 0.7978845608028654 * (x + 0.044715 * (double)x * x * x);
        return (float)(0.5 * x * (1.0 + tanh(u)));
    }
    case FAT5_ACT_SILU: return (float)(x / (1.0 + exp(-(double)x)));
    }
    return 0.0f;
}
static double fat5__act_df(fat5_act a, float xf) {
    double x = xf;
    switch (a) {
    case FAT5_ACT_RELU: return x > 0 ? 1.0 : 0.0;
    case FAT5_ACT_GELU:
        return 0.5 * (1.0 + erf(x / 1.4142135623730951)) + x * exp(-0.5 * x * x) * 0.3989422804014327;
    case FAT5_ACT_GELU_TANH: {
        double k = 0.7978845608028654, u = k * (x + 0.044715 * x * x * x), th = tanh(u);
        return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case FAT5_ACT_SILU: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    }
    return 0.0;
}

static fat5_status fat5__cpu_check_act(fat5_ctx *ctx, const char *op, int act) {
    if (act < FAT5_ACT_RELU || act > FAT5_ACT_SILU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: unknown activation %d", op, act);
    return FAT5_OK;
}

// h = act(a) * b (gated), or act(a) when b == 0; act is a fat5_act
static fat5_status fat5__cpu_act_fwd(fat5_ctx *ctx, fat5__addr h_, fat5__addr a_, fat5__addr b_, int64_t n,
                                     int act) {
    float *h = FAT5__HOST(float, h_);
    const float *a = FAT5__HOST(const float, a_), *b = FAT5__HOST(const float, b_);
    fat5_act f = (fat5_act)act;
    int64_t i;
    fat5_status st = fat5__cpu_check_act(ctx, "fat5__cpu_act_fwd", act);
    if (st) return st;
    for (i = 0; i < n; i++) h[i] = b ? fat5__act_f(f, a[i]) * b[i] : fat5__act_f(f, a[i]);
    return FAT5_OK;
}
// da = dh * b * act'(a), db = dh * act(a) (gated); da = dh * act'(a) when b == db == 0. db == dh
// works (each element is read before it is written).
static fat5_status fat5__cpu_act_bwd(fat5_ctx *ctx, fat5__addr da_, fat5__addr db_, fat5__addr dh_, fat5__addr a_,
                                     fat5__addr b_, int64_t n, int act) {
    float *da = FAT5__HOST(float, da_), *db = FAT5__HOST(float, db_);
    const float *dh = FAT5__HOST(const float, dh_), *a = FAT5__HOST(const float, a_);
    const float *b = FAT5__HOST(const float, b_);
    fat5_act f = (fat5_act)act;
    int64_t i;
    fat5_status st = fat5__cpu_check_act(ctx, "fat5__cpu_act_bwd", act);
    if (st) return st;
    for (i = 0; i < n; i++) {
        double d = fat5__act_df(f, a[i]), g = dh[i];
        if (b) {
            da[i] = (float)(g * (double)b[i] * d);
            db[i] = (float)(g * fat5__act_f(f, a[i]));
        } else {
            da[i] = (float)(g * d);
        }
    }
    return FAT5_OK;
}

// ---- attention ----

// T5 relative position bucket of rel = key_pos - query_pos, computed with fp32 logs as PyTorch does.
static int fat5__rel_bucket(int64_t rel, int bidirectional, int nb, int max_distance) {
    int offset = 0, me, large;
    int64_t n;
    if (bidirectional) {
        nb /= 2;
        if (rel > 0) offset = nb;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0;
    }
    me = nb / 2;
    if (n < me) return offset + (int)n;
    if (n >= max_distance) return offset + nb - 1;  // the formula below would clamp there too
    {
        float num = logf((float)n / (float)me);
        float den = (float)log((double)max_distance / (double)me);
        float v = num / den * (float)(nb - me);
        large = me + (int)v;
    }
    if (large > nb - 1) large = nb - 1;
    return offset + large;
}

// ALiBi's slope of head h of n: 2^(-8 (h + 1) / n) when n is a power of two; otherwise, with p
// the largest power of two below n, the p slopes of p heads, then the first n - p of the
// even-indexed slopes of 2p heads (2^(-4 (2 (h - p) + 1) / p)).
static double fat5__alibi_slope(int h, int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return h < p ? pow(2.0, -8.0 * (h + 1) / p) : pow(2.0, -4.0 * (2.0 * (h - p) + 1.0) / p);
}

// FIRE's normalised distance of query position i and key position j (P: its parameter block):
// d = i - j, thr = |L_multiplier L0|, u = sign(d) ln(|c d| + 1) / (ln(|c max(i, thr)| + 1) + 1e-6).
// g (unless NULL) gets du/dc and du/dL_multiplier; at i == thr the maximum's gradient is split
// evenly between its two arguments (as autograd's).
static double fat5__fire_u(const float *P, int H, int W, int L0, int64_t i, int64_t j, double g[2]) {
    double c = P[FAT5__FIRE_C(H, W)], lm = P[FAT5__FIRE_LM(H, W)], d = (double)(i - j), x = (double)i;
    double thr = fabs(lm * L0), mx = x > thr ? x : thr, s = d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
    double num = log(fabs(c * d) + 1.0), den = log(fabs(c * mx) + 1.0) + 1e-6, u = s * num / den;
    if (g) {
        double sc = c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0, slm = lm > 0 ? 1.0 : lm < 0 ? -1.0 : 0.0;
        double dnum_dc = sc * fabs(d) / (fabs(c * d) + 1.0), dden_dc = sc * mx / (fabs(c * mx) + 1.0);
        double dden_dmx = fabs(c) / (fabs(c * mx) + 1.0);
        double dmx_dlm = thr > x ? slm * L0 : thr == x ? 0.5 * slm * L0 : 0.0;
        g[0] = s * (dnum_dc * den - num * dden_dc) / (den * den);
        g[1] = -s * num / (den * den) * dden_dmx * dmx_dlm;
    }
    return u;
}

// FIRE's bias of head h at normalised distance u: mlp.2(relu(mlp.0(u)))_h
static double fat5__fire_mlp(const float *P, int H, int W, int h, double u) {
    const float *w1 = P, *b1 = P + FAT5__FIRE_B1(W), *w2 = P + FAT5__FIRE_W2(W) + (int64_t)h * W;
    double out = P[FAT5__FIRE_B2(H, W) + h];
    int w;
    for (w = 0; w < W; w++) {
        double a = (double)w1[w] * u + b1[w];
        if (a > 0) out += (double)w2[w] * a;
    }
    return out;
}

// FIRE's backward for one score of head h with gradient ds: adds to acc[3 W + 3], the head's
// share of the parameter gradient: d mlp.0.weight [W] | d mlp.0.bias [W] | d mlp.2.weight row h [W]
// | d mlp.2.bias[h] | dc | dL_multiplier.
static void fat5__fire_grad(const float *P, int H, int W, int L0, int h, int64_t i, int64_t j, double ds,
                            double *acc) {
    const float *w1 = P, *b1 = P + FAT5__FIRE_B1(W), *w2 = P + FAT5__FIRE_W2(W) + (int64_t)h * W;
    double g[2], u = fat5__fire_u(P, H, W, L0, i, j, g), du = 0;
    int w;
    for (w = 0; w < W; w++) {
        double a = (double)w1[w] * u + b1[w];
        if (a > 0) {
            double da = ds * w2[w];
            acc[2 * W + w] += ds * a;
            acc[w] += da * u;
            acc[W + w] += da;
            du += da * w1[w];
        }
    }
    acc[3 * W] += ds;
    acc[3 * W + 1] += du * g[0];
    acc[3 * W + 2] += du * g[1];
}

// Adds per-head FIRE gradient shares acc[H][FAT5__FIRE_SHARES(W)] (fat5__fire_grad's layout) to
// FIRE's gradient block g: the shared parts summed over the heads in head order, in double.
#define FAT5__FIRE_REDUCE(g, acc, H, W)                                                                   \
    do {                                                                                              \
        int64_t h_, w_, n_ = FAT5__FIRE_SHARES(W);                                                    \
        double sc_ = 0, sl_ = 0;                                                                      \
        for (w_ = 0; w_ < (W); w_++) {                                                                \
            double a_ = 0, b_ = 0;                                                                    \
            for (h_ = 0; h_ < (H); h_++) {                                                            \
                a_ += (double)(acc)[h_ * n_ + w_];                                                    \
                b_ += (double)(acc)[h_ * n_ + (W) + w_];                                              \
            }                                                                                         \
            (g)[w_] += (float)a_;                                                                     \
            (g)[FAT5__FIRE_B1(W) + w_] += (float)b_;                                                  \
        }                                                                                             \
        for (h_ = 0; h_ < (H); h_++) {                                                                \
            for (w_ = 0; w_ < (W); w_++)                                                              \
                (g)[FAT5__FIRE_W2(W) + h_ * (W) + w_] += (float)(acc)[h_ * n_ + 2 * (W) + w_];        \
            (g)[FAT5__FIRE_B2(H, W) + h_] += (float)(acc)[h_ * n_ + 3 * (W)];                         \
            sc_ += (double)(acc)[h_ * n_ + 3 * (W) + 1];                                              \
            sl_ += (double)(acc)[h_ * n_ + 3 * (W) + 2];                                              \
        }                                                                                             \
        (g)[FAT5__FIRE_C(H, W)] += (float)sc_;                                                        \
        (g)[FAT5__FIRE_LM(H, W)] += (float)sl_;                                                       \
    } while (0)

// fire_reduce: g (FIRE's gradient block) += the per-head shares [H, FAT5__FIRE_SHARES(W)] (fp32),
// summed over the heads in head order. The GPU's bias-gradient path of attn_bwd_dq ends with it.
static fat5_status fat5__cpu_fire_reduce(fat5_ctx *ctx, fat5__addr g_, fat5__addr shares_, int H, int W) {
    float *g = FAT5__HOST(float, g_);
    const float *shares = FAT5__HOST(const float, shares_);
    (void)ctx;
    FAT5__FIRE_REDUCE(g, shares, H, W);
    return FAT5_OK;
}

// The position bias of head h for query position i and key position j (see fat5__attn_kind);
// -inf for a key the head may not see (asymmetric ALiBi). bias: the T5 table or FIRE's block.
static double fat5__cpu_pos_bias(const float *bias, int64_t i, int64_t j, int h, int H, int kind, int nb,
                                 int max_distance) {
    if (kind & FAT5__ATTN_FIRE) return fat5__fire_mlp(bias, H, nb, h, fat5__fire_u(bias, H, nb, max_distance, i, j, NULL));
    if (kind & FAT5__ATTN_ALIBI) {
        double dist = (double)(j > i ? j - i : i - j);
        if (kind & FAT5__ATTN_ALIBI_ASYM) {
            int half = H / 2;
            if (h < half ? j > i : j < i) return -INFINITY;
            return -fat5__alibi_slope(h % half, half) * dist;
        }
        return -fat5__alibi_slope(h, H) * dist;
    }
    if (bias)
        return bias[(int64_t)fat5__rel_bucket(j - i, (kind & FAT5__ATTN_MASK) == FAT5__ATTN_BIDIR, nb, max_distance) *
                        H + h];
    return 0;
}

// The attention ops see a packed batch through cu_q / cu_k ([n_seq + 1] offsets of queries and
// keys) and a token -> sequence map (q_seq for queries, k_seq for keys). Query i of a sequence sees
// its keys 0 .. nk-1 (CROSS, BIDIR) or 0 .. i (CAUSAL), less those asymmetric ALiBi hides; q, k,
// v, o rows are H*dk wide. bias is the [nb, H] relative-position table, FIRE's parameter block, or
// 0 (kind says which). lut (bucket of each distance below max_distance, from fat5__rel_bucket)
// serves the GPU; the CPU computes every bucket itself.
static double fat5__cpu_attn_score(const float *q, const float *k, const float *bias, int64_t i, int64_t j,
                                   int h, int H, int dk, int kind, int nb, int max_distance) {
    double sc = 0;
    int d;
    for (d = 0; d < dk; d++) sc += (double)q[d] * k[d];
    if (bias || (kind & (FAT5__ATTN_ALIBI | FAT5__ATTN_FIRE)))
        sc += fat5__cpu_pos_bias(bias, i, j, h, H, kind, nb, max_distance);
    return sc;
}

// The keys of n that query i sees: [r[0], r[1]) then [r[2], r[3]) (causal: j <= i; a window:
// |j - i| <= rad; block-global: the first g tokens besides the window, or every key for a global
// query). The pattern is symmetric, so the same ranges are the queries that see key j (causal:
// read the other way, i >= j). Transient-global keys are not tokens: the ops add them apart.
static void fat5__attn_range(int kind, int g, int64_t i, int64_t n, int queries, int64_t r[4]) {
    int64_t rad = FAT5__ATTN_RADIUS(kind), pre = (kind & FAT5__ATTN_PREFIX) ? (g < n ? g : n) : 0;
    int causal = (kind & FAT5__ATTN_MASK) == FAT5__ATTN_CAUSAL;
    r[0] = r[1] = 0;
    r[2] = causal && queries ? i : 0;
    r[3] = causal && !queries ? i + 1 : n;
    if (rad < 0 || i < pre) return;
    r[1] = pre;
    if (r[2] < i - rad) r[2] = i - rad;
    if (r[2] < pre) r[2] = pre;
    if (r[3] > i + rad + 1) r[3] = i + rad + 1;
}

// the transient-global keys of the sequence of a query or key token: first row, count G (0
// without TGLOBAL), and the block of position i (HF's orphan rule: the last block takes the rest)
static int64_t fat5__attn_globals(int kind, const int32_t *cu_g, int32_t s, int64_t *row0) {
    *row0 = 0;
    if (!(kind & FAT5__ATTN_TGLOBAL)) return 0;
    *row0 = cu_g[s];
    return cu_g[s + 1] - cu_g[s];
}
static int64_t fat5__attn_block(int64_t i, int g, int64_t G) { return i / g < G - 1 ? i / g : G - 1; }

// the bias of a transient-global key k for a token of block b (0 without a table)
static double fat5__cpu_global_bias(const float *bias, int kind, int64_t k, int64_t b, int h, int H, int nb,
                                    int max_distance) {
    const float *tab;
    if (!bias) return 0.0;  // before any arithmetic on the pointer (an offset from NULL is undefined)
    tab = (kind & FAT5__ATTN_GSHARED) ? bias : bias + (int64_t)nb * H;
    return tab[(int64_t)fat5__rel_bucket(k - b, 1, nb, max_distance) * H + h];
}

// the score of query row qi against transient-global key row kj, global k of a token of block b
static double fat5__cpu_global_score(const float *qi, const float *kj, const float *bias, int kind, int64_t k,
                                     int64_t b, int h, int H, int dk, int nb, int max_distance) {
    return fat5__cpu_attn_score(qi, kj, NULL, 0, 0, h, H, dk, 0, 0, 0) +
           fat5__cpu_global_bias(bias, kind, k, b, h, H, nb, max_distance);
}

// The three attention ops below run on the context's threads (fat5__pool_run) like the matrix
// products, each output row computed exactly as on one thread: the forward and dk/dv split the
// query / key tokens, dq splits the heads (so each head's column of dbias is summed by one thread,
// in the one-thread order). Results are bitwise the same for every thread count.
typedef struct fat5__attn_job {
    float *out0, *out1;                       // fwd: o, lse; dq: dq, dbias; dkv: dk, dv
    const float *dout, *lse, *delta, *q, *k, *v, *bias;
    const int32_t *cu_q, *cu_k, *seq, *cu_g;  // seq: q_seq (fwd, dq) or k_seq (dkv)
    int64_t T, maxk;                          // T: the op's Tq or Tk; maxk: keys of a query at most
    int H, dk, kind, nb, max_distance, g;
    double *scratch;                          // fwd: maxk + dk doubles per part; dq (FIRE): H FAT5__FIRE_SHARES(nb)
} fat5__attn_job;

// parts for T rows of about `work` multiply-adds each: one below ~1 M in all, else the context's
static int fat5__attn_parts(const fat5_ctx *ctx, double rows, double work) {
    return rows * work < 1e6 ? 1 : ctx->n_threads;
}

// the pattern's checks the two backends share (the GPU adds its own limits)
static fat5_status fat5__attn_pattern_check(fat5_ctx *ctx, const char *op, int kind, int g, fat5__addr cu_g) {
    int pat = kind & (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL);
    if (kind < 0 || (kind & FAT5__ATTN_MASK) == FAT5__ATTN_MASK)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: attention kind %d", op, kind);
    if (FAT5__ATTN_RADIUS(kind) >= 0 && (kind & FAT5__ATTN_MASK) == FAT5__ATTN_CROSS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: a local window on cross-attention", op, kind);
    if (!pat && !(kind & FAT5__ATTN_GSHARED)) return FAT5_OK;
    if (pat == (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL) ||
        ((kind & FAT5__ATTN_GSHARED) && !(kind & FAT5__ATTN_TGLOBAL)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: block-global and transient-global keys at once, "
                         "or a shared global table without transient-global keys", op, kind);
    if ((kind & FAT5__ATTN_MASK) != FAT5__ATTN_BIDIR)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: %s attention is for the encoder (bidirectional "
                         "self-attention), not a decoder or cross-attention", op, kind,
                         pat == FAT5__ATTN_PREFIX ? "block-global" : "transient-global");
    if (FAT5__ATTN_RADIUS(kind) < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: global keys need a local window", op, kind);
    if (g < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s of %d tokens (expected >= 1)", op,
                         pat == FAT5__ATTN_PREFIX ? "a global prefix" : "a global block", g);
    if (pat == FAT5__ATTN_TGLOBAL && (kind & (FAT5__ATTN_ALIBI | FAT5__ATTN_FIRE)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: transient-global keys take T5's bias buckets, "
                         "not ALiBi or FIRE", op, kind);
    if (pat == FAT5__ATTN_TGLOBAL && !cu_g)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: transient-global keys without their offsets (cu_g)", op);
    return FAT5_OK;
}

static void fat5__attn_fwd_part(void *arg, int part, int parts) {
    const fat5__attn_job *J = FAT5__CAST(const fat5__attn_job *, arg);
    float *o = J->out0, *lse = J->out1;
    const float *q = J->q, *k = J->k, *v = J->v, *bias = J->bias;
    const int32_t *cu_q = J->cu_q, *cu_k = J->cu_k, *q_seq = J->seq;
    int64_t t, j, ld = (int64_t)J->H * J->dk, t0 = J->T * part / parts, t1 = J->T * (part + 1) / parts;
    int h, d, H = J->H, dk = J->dk, kind = J->kind, x;
    double *p = J->scratch + (size_t)part * (size_t)(J->maxk + dk), *acc = p + J->maxk;
    for (t = t0; t < t1; t++) {
        int32_t s = q_seq[t];
        int64_t i = t - cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0, r[4], g0, G, np, b;
        fat5__attn_range(kind, J->g, i, nk, 0, r);
        G = fat5__attn_globals(kind, J->cu_g, s, &g0);
        b = G ? fat5__attn_block(i, J->g, G) : 0;
        np = r[1] - r[0] + r[3] - r[2] + G;  // scores, in p: the two ranges, then the globals
        for (h = 0; h < H; h++) {
            const float *qi = q + t * ld + h * dk;
            double mx = -INFINITY, sum = 0;
            int64_t n = 0;
            for (x = 0; x < 2; x++)
                for (j = r[2 * x]; j < r[2 * x + 1]; j++, n++)
                    p[n] = fat5__cpu_attn_score(qi, k + (k0 + j) * ld + h * dk, bias, i, j, h, H, dk, kind, J->nb,
                                                J->max_distance);
            for (j = 0; j < G; j++, n++)
                p[n] = fat5__cpu_global_score(qi, k + (g0 + j) * ld + h * dk, bias, kind, j, b, h, H, dk, J->nb,
                                              J->max_distance);
            for (n = 0; n < np; n++)
                if (p[n] > mx) mx = p[n];
            for (d = 0; d < dk; d++) acc[d] = 0;
            for (n = 0, x = 0; x < 3; x++) {
                int64_t lo = x < 2 ? r[2 * x] : 0, hi = x < 2 ? r[2 * x + 1] : G, row0 = x < 2 ? k0 : g0;
                for (j = lo; j < hi; j++, n++) {
                    const float *vj = v + (row0 + j) * ld + h * dk;
                    double e = exp(p[n] - mx);
                    sum += e;
                    for (d = 0; d < dk; d++) acc[d] += e * vj[d];
                }
            }
            for (d = 0; d < dk; d++) o[t * ld + h * dk + d] = np ? (float)(acc[d] / sum) : 0.0f;
            lse[t * H + h] = np ? (float)(mx + log(sum)) : -INFINITY;
        }
    }
}

// keys at most of one query: its sequence's, or the window and the globals
static int64_t fat5__attn_maxk(const fat5__attn_job *J, int64_t Tq) {
    int64_t t, m = 1, rad = FAT5__ATTN_RADIUS(J->kind);
    for (t = 0; t < Tq; t++) {
        int32_t s = J->seq[t];
        int64_t nk = J->cu_k[s + 1] - J->cu_k[s], g0;
        if (rad >= 0 && !(J->kind & FAT5__ATTN_PREFIX) && 2 * rad + 1 < nk) nk = 2 * rad + 1;
        nk += fat5__attn_globals(J->kind, J->cu_g, s, &g0);
        if (nk > m) m = nk;
    }
    return m;
}

// o = softmax(q k^T + bias) v per sequence and head, no 1/sqrt(dk) scale (T5); lse [Tq, H] saved
// (-inf and o = 0 for a query without keys). The keys of a query: the kind's pattern (above).
static fat5_status fat5__cpu_attn_fwd(fat5_ctx *ctx, fat5__addr o_, fat5__addr lse_, fat5__addr q_, fat5__addr k_,
                                      fat5__addr v_, fat5__addr bias_, fat5__addr lut, fat5__addr cu_q_,
                                      fat5__addr cu_k_, fat5__addr q_seq_, int64_t Tq, int H, int dk, int kind,
                                      int nb, int max_distance, int g, fat5__addr cu_g) {
    fat5__attn_job J;
    int parts;
    fat5_status st;
    (void)lut;
    if ((st = fat5__attn_pattern_check(ctx, "fat5__cpu_attn_fwd", kind, g, cu_g))) return st;
    memset(&J, 0, sizeof J);
    J.out0 = FAT5__HOST(float, o_);
    J.out1 = FAT5__HOST(float, lse_);
    J.q = FAT5__HOST(const float, q_);
    J.k = FAT5__HOST(const float, k_);
    J.v = FAT5__HOST(const float, v_);
    J.bias = FAT5__HOST(const float, bias_);
    J.cu_q = FAT5__HOST(const int32_t, cu_q_);
    J.cu_k = FAT5__HOST(const int32_t, cu_k_);
    J.seq = FAT5__HOST(const int32_t, q_seq_);
    J.cu_g = FAT5__HOST(const int32_t, cu_g);
    J.T = Tq;
    J.H = H;
    J.dk = dk;
    J.kind = kind;
    J.nb = nb;
    J.max_distance = max_distance;
    J.g = g;
    J.maxk = fat5__attn_maxk(&J, Tq);
    parts = fat5__attn_parts(ctx, (double)Tq, (double)J.maxk * H * dk * 2);
    J.scratch = FAT5__CAST(double *, fat5__host_scratch(ctx, (size_t)parts * (size_t)(J.maxk + dk) * sizeof(double),
                                                       "fat5__cpu_attn_fwd"));
    if (!J.scratch) return FAT5_ERR_OUT_OF_MEMORY;
    fat5__pool_run(ctx, fat5__attn_fwd_part, &J, parts);
    return FAT5_OK;
}

// delta[t*H + h] = sum over head h's columns of dout * o (the softmax backward's row term)
static fat5_status fat5__cpu_attn_bwd_delta(fat5_ctx *ctx, fat5__addr delta_, fat5__addr o_, fat5__addr dout_,
                                            int64_t Tq, int H, int dk) {
    float *delta = FAT5__HOST(float, delta_);
    const float *o = FAT5__HOST(const float, o_), *dout = FAT5__HOST(const float, dout_);
    int64_t t;
    int h, d;
    (void)ctx;
    for (t = 0; t < Tq; t++)
        for (h = 0; h < H; h++) {
            double s = 0;
            for (d = 0; d < dk; d++) s += (double)dout[(t * H + h) * dk + d] * o[(t * H + h) * dk + d];
            delta[t * H + h] = (float)s;
        }
    return FAT5_OK;
}

// fills the job fields the two backward ops share
static void fat5__attn_bwd_job(fat5__attn_job *J, fat5__addr out0, fat5__addr out1, fat5__addr dout_,
                               fat5__addr lse_, fat5__addr delta_, fat5__addr q_, fat5__addr k_, fat5__addr v_,
                               fat5__addr bias_, fat5__addr cu_q_, fat5__addr cu_k_, fat5__addr seq_, int64_t T,
                               int H, int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g) {
    memset(J, 0, sizeof *J);
    J->out0 = FAT5__HOST(float, out0);
    J->out1 = FAT5__HOST(float, out1);
    J->dout = FAT5__HOST(const float, dout_);
    J->lse = FAT5__HOST(const float, lse_);
    J->delta = FAT5__HOST(const float, delta_);
    J->q = FAT5__HOST(const float, q_);
    J->k = FAT5__HOST(const float, k_);
    J->v = FAT5__HOST(const float, v_);
    J->bias = FAT5__HOST(const float, bias_);
    J->cu_q = FAT5__HOST(const int32_t, cu_q_);
    J->cu_k = FAT5__HOST(const int32_t, cu_k_);
    J->seq = FAT5__HOST(const int32_t, seq_);
    J->cu_g = FAT5__HOST(const int32_t, cu_g);
    J->T = T;
    J->H = H;
    J->dk = dk;
    J->kind = kind;
    J->nb = nb;
    J->max_distance = max_distance;
    J->g = g;
}

// heads [part * H / parts, (part + 1) * H / parts) of every query
static void fat5__attn_dq_part(void *arg, int part, int parts) {
    const fat5__attn_job *J = FAT5__CAST(const fat5__attn_job *, arg);
    float *dq = J->out0, *dbias = J->out1;
    const float *dout = J->dout, *lse = J->lse, *delta = J->delta, *q = J->q, *k = J->k, *v = J->v;
    const int32_t *cu_q = J->cu_q, *cu_k = J->cu_k, *q_seq = J->seq;
    int H = J->H, dk = J->dk, kind = J->kind, h, d, x, h0 = H * part / parts, h1 = H * (part + 1) / parts;
    int64_t t, j, ld = (int64_t)H * dk;
    float *dgbias = dbias && !(kind & FAT5__ATTN_GSHARED) ? dbias + (int64_t)J->nb * H : dbias;
    for (t = 0; t < J->T; t++) {
        int32_t s = q_seq[t];
        int64_t i = t - cu_q[s], k0 = cu_k[s], nk = cu_k[s + 1] - k0, r[4], g0, G, b;
        fat5__attn_range(kind, J->g, i, nk, 0, r);
        G = fat5__attn_globals(kind, J->cu_g, s, &g0);
        b = G ? fat5__attn_block(i, J->g, G) : 0;
        for (h = h0; h < h1; h++) {
            const float *qi = q + t * ld + h * dk, *doi = dout + t * ld + h * dk;
            float *dqi = dq + t * ld + h * dk;
            double L = lse[t * H + h];
            for (d = 0; d < dk; d++) dqi[d] = 0;
            for (x = 0; x < 3; x++) {
                int64_t lo = x < 2 ? r[2 * x] : 0, hi = x < 2 ? r[2 * x + 1] : G, row0 = x < 2 ? k0 : g0;
                for (j = lo; j < hi; j++) {
                    const float *kj = k + (row0 + j) * ld + h * dk, *vj = v + (row0 + j) * ld + h * dk;
                    double sc = x < 2 ? fat5__cpu_attn_score(qi, kj, J->bias, i, j, h, H, dk, kind, J->nb,
                                                             J->max_distance)
                                      : fat5__cpu_global_score(qi, kj, J->bias, kind, j, b, h, H, dk, J->nb,
                                                               J->max_distance);
                    double p = exp(sc - L), dp = 0, ds;
                    for (d = 0; d < dk; d++) dp += (double)doi[d] * vj[d];
                    ds = p * (dp - delta[t * H + h]);
                    for (d = 0; d < dk; d++) dqi[d] += (float)(ds * kj[d]);
                    if (!dbias) continue;
                    if (x == 2)
                        dgbias[(int64_t)fat5__rel_bucket(j - b, 1, J->nb, J->max_distance) * H + h] += (float)ds;
                    else if (kind & FAT5__ATTN_FIRE)
                        fat5__fire_grad(J->bias, H, J->nb, J->max_distance, h, i, j, ds,
                                        J->scratch + (size_t)h * (size_t)FAT5__FIRE_SHARES(J->nb));
                    else if (!(kind & FAT5__ATTN_ALIBI))
                        dbias[(int64_t)fat5__rel_bucket(j - i, (kind & FAT5__ATTN_MASK) == FAT5__ATTN_BIDIR, J->nb,
                                                        J->max_distance) * H + h] += (float)ds;
                }
            }
        }
    }
}

// dq (written) and dbias[bucket, h] += ds (dbias 0: not wanted; ALiBi has no gradient; FIRE adds
// the gradient of its parameter block; transient-global keys add to the global table's). p =
// exp(score - lse) is recomputed; ds = p (dout . v - delta). scratch is the GPU's (its per-block
// bias-gradient partials); the CPU needs none.
static fat5_status fat5__cpu_attn_bwd_dq(fat5_ctx *ctx, fat5__addr dq_, fat5__addr dbias_, fat5__addr dout_,
                                         fat5__addr lse_, fat5__addr delta_, fat5__addr q_, fat5__addr k_,
                                         fat5__addr v_, fat5__addr bias_, fat5__addr lut, fat5__addr cu_q_,
                                         fat5__addr cu_k_, fat5__addr q_seq_, int64_t Tq, int H, int dk, int kind,
                                         int nb, int max_distance, int g, fat5__addr cu_g, fat5__addr scratch) {
    fat5__attn_job J;
    int parts;
    fat5_status st;
    (void)lut;
    (void)scratch;
    if ((st = fat5__attn_pattern_check(ctx, "fat5__cpu_attn_bwd_dq", kind, g, cu_g))) return st;
    fat5__attn_bwd_job(&J, dq_, dbias_, dout_, lse_, delta_, q_, k_, v_, bias_, cu_q_, cu_k_, q_seq_, Tq, H, dk, kind,
                       nb, max_distance, g, cu_g);
    if (dbias_ && (kind & FAT5__ATTN_FIRE)) {  // per-head sums in double, then added in head order
        size_t n = (size_t)H * (size_t)FAT5__FIRE_SHARES(nb), e;
        J.scratch = FAT5__CAST(double *, fat5__host_scratch(ctx, n * sizeof(double), "fat5__cpu_attn_bwd_dq"));
        if (!J.scratch) return FAT5_ERR_OUT_OF_MEMORY;
        for (e = 0; e < n; e++) J.scratch[e] = 0;
    }
    if (!bias_ && !(kind & FAT5__ATTN_FIRE)) J.out1 = NULL;  // no table, no gradient
    parts = fat5__attn_parts(ctx, (double)Tq, (double)H * dk * 64);
    if (parts > H) parts = H;
    fat5__pool_run(ctx, fat5__attn_dq_part, &J, parts);
    if (dbias_ && (kind & FAT5__ATTN_FIRE)) FAT5__FIRE_REDUCE(FAT5__HOST(float, dbias_), J.scratch, H, nb);
    return FAT5_OK;
}

// keys [part * Tk / parts, (part + 1) * Tk / parts): a token key gathers the queries of its
// sequence that see it; a transient-global key, every query of its sequence
static void fat5__attn_dkv_part(void *arg, int part, int parts) {
    const fat5__attn_job *J = FAT5__CAST(const fat5__attn_job *, arg);
    float *dkk = J->out0, *dv = J->out1;
    const float *dout = J->dout, *lse = J->lse, *delta = J->delta, *q = J->q, *k = J->k, *v = J->v;
    const int32_t *cu_q = J->cu_q, *cu_k = J->cu_k, *k_seq = J->seq;
    int H = J->H, dk = J->dk, kind = J->kind, h, d, x;
    int64_t t, i, ld = (int64_t)H * dk, t0 = J->T * part / parts, t1 = J->T * (part + 1) / parts;
    for (t = t0; t < t1; t++) {
        int32_t s = k_seq[t];
        int64_t q0 = cu_q[s], nq = cu_q[s + 1] - q0, g0, G = fat5__attn_globals(kind, J->cu_g, s, &g0), r[4];
        int glob = G && t >= g0 && t < g0 + G;
        int64_t j = glob ? t - g0 : t - cu_k[s];
        if (glob) r[0] = r[1] = 0, r[2] = 0, r[3] = nq;
        else fat5__attn_range(kind, J->g, j, nq, 1, r);
        for (h = 0; h < H; h++) {
            const float *kj = k + t * ld + h * dk, *vj = v + t * ld + h * dk;
            float *dkj = dkk + t * ld + h * dk, *dvj = dv + t * ld + h * dk;
            for (d = 0; d < dk; d++) dkj[d] = dvj[d] = 0;
            for (x = 0; x < 2; x++)
                for (i = r[2 * x]; i < r[2 * x + 1]; i++) {
                    const float *qi = q + (q0 + i) * ld + h * dk, *doi = dout + (q0 + i) * ld + h * dk;
                    double sc = glob ? fat5__cpu_global_score(qi, kj, J->bias, kind, j, fat5__attn_block(i, J->g, G),
                                                              h, H, dk, J->nb, J->max_distance)
                                     : fat5__cpu_attn_score(qi, kj, J->bias, i, j, h, H, dk, kind, J->nb,
                                                            J->max_distance);
                    double p = exp(sc - lse[(q0 + i) * H + h]), dp = 0, ds;
                    for (d = 0; d < dk; d++) dp += (double)doi[d] * vj[d];
                    ds = p * (dp - delta[(q0 + i) * H + h]);
                    for (d = 0; d < dk; d++) {
                        dkj[d] += (float)(ds * qi[d]);
                        dvj[d] += (float)(p * doi[d]);
                    }
                }
        }
    }
}

// dk, dv (written), key by key: k_seq[t] is the sequence of key row t (token or transient-global)
static fat5_status fat5__cpu_attn_bwd_dkv(fat5_ctx *ctx, fat5__addr dk_, fat5__addr dv_, fat5__addr dout_,
                                          fat5__addr lse_, fat5__addr delta_, fat5__addr q_, fat5__addr k_,
                                          fat5__addr v_, fat5__addr bias_, fat5__addr lut, fat5__addr cu_q_,
                                          fat5__addr cu_k_, fat5__addr k_seq_, int64_t Tk, int H, int dk, int kind,
                                          int nb, int max_distance, int g, fat5__addr cu_g) {
    fat5__attn_job J;
    fat5_status st;
    (void)lut;
    if ((st = fat5__attn_pattern_check(ctx, "fat5__cpu_attn_bwd_dkv", kind, g, cu_g))) return st;
    fat5__attn_bwd_job(&J, dk_, dv_, dout_, lse_, delta_, q_, k_, v_, bias_, cu_q_, cu_k_, k_seq_, Tk, H, dk, kind, nb,
                       max_distance, g, cu_g);
    fat5__pool_run(ctx, fat5__attn_dkv_part, &J, fat5__attn_parts(ctx, (double)Tk, (double)H * dk * 64));
    return FAT5_OK;
}

// ---- transient-global tokens: block sums ----

// block_sum: out row r (0 <= r < G) = the sum of x's rows (act) of the tokens of its block: the
// global of k and v row cu_g[0] + r, of sequence s = seq[cu_g[0] + r], is block b = cu_g[0] + r -
// cu_g[s] of s, tokens cu[s] + [b g, (b + 1) g), the last block of s to its end (LongT5's
// orphans). Sums in double, token order. out fp32 [G, D].
static fat5_status fat5__cpu_block_sum(fat5_ctx *ctx, fat5__addr out_, fat5__addr x_, fat5__addr cu_, fat5__addr cu_g_,
                                       fat5__addr seq_, int64_t G, int D, int g) {
    float *out = FAT5__HOST(float, out_);
    const float *x = FAT5__HOST(const float, x_);
    const int32_t *cu = FAT5__HOST(const int32_t, cu_), *cu_g = FAT5__HOST(const int32_t, cu_g_);
    const int32_t *seq = FAT5__HOST(const int32_t, seq_);
    int64_t r, t;
    int j;
    (void)ctx;
    for (r = 0; r < G; r++) {
        int64_t row = cu_g[0] + r, s = seq[row], b = row - cu_g[s], last = row + 1 == cu_g[s + 1];
        int64_t t0 = cu[s] + b * g, t1 = last ? cu[s + 1] : t0 + g;
        for (j = 0; j < D; j++) {
            double acc = 0;
            for (t = t0; t < t1; t++) acc += x[t * D + j];
            out[r * D + j] = (float)acc;
        }
    }
    return FAT5_OK;
}

// block_sum_bwd: dx[t] += dout[row of t's global - cu_g[0]] for the T tokens (seq their
// sequences); tokens of a sequence without globals are left as they are. dx, dout fp32.
static fat5_status fat5__cpu_block_sum_bwd(fat5_ctx *ctx, fat5__addr dx_, fat5__addr dout_, fat5__addr cu_,
                                           fat5__addr cu_g_, fat5__addr seq_, int64_t T, int D, int g) {
    float *dx = FAT5__HOST(float, dx_);
    const float *dout = FAT5__HOST(const float, dout_);
    const int32_t *cu = FAT5__HOST(const int32_t, cu_), *cu_g = FAT5__HOST(const int32_t, cu_g_);
    const int32_t *seq = FAT5__HOST(const int32_t, seq_);
    int64_t t;
    int j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        int32_t s = seq[t];
        int64_t G = cu_g[s + 1] - cu_g[s], row;
        if (!G) continue;
        row = cu_g[s] - cu_g[0] + fat5__attn_block(t - cu[s], g, G);
        for (j = 0; j < D; j++) dx[t * D + j] += dout[row * D + j];
    }
    return FAT5_OK;
}

// ---- rotary position embedding ----

// rope: rotates, in place, dims [0, rd) of every head of x [T, H*dk] (act) by its token's
// position t: pos[0] for every token when pos is given (a decode step), else its place in its
// packed sequence, t - cu[seq[token]]. Pair k < rd/2 is (k, k + rd/2), or (2k, 2k + 1) with
// FAT5__ROPE_INTERLEAVED; it turns by theta = t base^(-2k/rd): (a, b) -> (a cos - b sin, b cos + a sin).
// xpos > 0 (xPos, gamma = xpos): cos and sin scale by zeta_k^(t/gamma), zeta_k = (2k + 0.4 rd) /
// (1.4 rd), or zeta_k^(-t/gamma) with FAT5__ROPE_KEY, so q.k scales by zeta^((i - j)/gamma).
// FAT5__ROPE_TRANSPOSE applies the transposed map (the backward of dq, dk). Angles and scales are
// computed in double from the exact integer position and rounded to fp32 (no table, no length
// limit); dims from rd on pass through. xPos scales leave fp32's range past |t| ~ 70 gamma.
static fat5_status fat5__cpu_rope(fat5_ctx *ctx, fat5__addr x_, fat5__addr cu_, fat5__addr seq_, fat5__addr pos_,
                                  int64_t T, int H, int dk, int rd, float base, float xpos, int flags) {
    float *x = FAT5__HOST(float, x_);
    const int32_t *cu = FAT5__HOST(const int32_t, cu_), *seq = FAT5__HOST(const int32_t, seq_);
    const int32_t *pos = FAT5__HOST(const int32_t, pos_);
    int64_t t;
    int h, k, half = rd / 2;
    (void)ctx;
    for (t = 0; t < T; t++) {
        double p = pos ? (double)pos[0] : (double)(t - cu[seq[t]]);
        for (k = 0; k < half; k++) {
            double ang = p * pow((double)base, -2.0 * k / rd), sc = 1.0;
            float cs, sn;
            int ia = flags & FAT5__ROPE_INTERLEAVED ? 2 * k : k, ib = flags & FAT5__ROPE_INTERLEAVED ? 2 * k + 1 : k + half;
            if (xpos > 0) sc = pow((2.0 * k + 0.4 * rd) / (1.4 * rd), (flags & FAT5__ROPE_KEY ? -p : p) / xpos);
            cs = (float)(cos(ang) * sc);
            sn = (float)(sin(ang) * sc);
            if (flags & FAT5__ROPE_TRANSPOSE) sn = -sn;
            for (h = 0; h < H; h++) {
                float *r = x + t * (int64_t)H * dk + (int64_t)h * dk, a = r[ia], b = r[ib];
                r[ia] = a * cs - b * sn;
                r[ib] = b * cs + a * sn;
            }
        }
    }
    return FAT5_OK;
}

// ---- cross-entropy ----

// ---- decoding: one query per row against a cache ----

// attn_decode: entry i (0 <= i < n) is row rows[i]; its keys and values are rows kv_off[row] + j of
// k and v for j < count, count = pos[0] + 1 (CAUSAL: the decoder's self-attention cache, the query
// at position pos[0]) or kv_len[row] (CROSS: the encoder output of the row's input; bias unused).
// o[i] = softmax_j(q_i . k_j + b(pos[0], j, h)) v_j, per head; rows of q, k, v, o are H*dk wide;
// o = 0 for an entry without keys. b is the causal forward's position bias for a query at position
// pos[0] (fat5__cpu_pos_bias for this kind: T5 buckets, ALiBi or FIRE; lut is the GPU's bucket
// table, as for attn_fwd); none for CROSS.
// max_keys: an upper bound, known on the host, of the key count of any entry: the decoder's cache
// capacity max_len for CAUSAL, the longest encoder output (max of kv_len) for CROSS. pos and kv_len
// live in device memory on the GPU (a decode step is replayable as a CUDA graph), so the GPU sizes
// its split of the keys from max_keys alone; any count is still computed correctly (a count above
// max_keys only splits less well). The CPU ignores it.
// scratch serves the GPU's split over keys: FAT5__DECODE_SCRATCH(H, dk) floats per entry, n entries
// (it may be 0 when max_keys <= FAT5__DECODE_SPLIT_KEYS: one split, no scratch).
#define FAT5__DECODE_MAX_SPLITS 32
#define FAT5__DECODE_SCRATCH(H, dk) ((size_t)(H) * FAT5__DECODE_MAX_SPLITS * ((size_t)(dk) + 2))
#define FAT5__DECODE_BLOCK_SPLITS 16  // warps (splits) of the GPU's one-launch decode block
#define FAT5__DECODE_SPLIT_KEYS 32   // the GPU's keys per split at max_keys: ceil(max_keys / 32) splits (one chunk of a warp)
static fat5_status fat5__cpu_attn_decode(fat5_ctx *ctx, fat5__addr o_, fat5__addr q_, fat5__addr k_, fat5__addr v_,
                                         fat5__addr bias_, fat5__addr lut, fat5__addr rows_, fat5__addr kv_off_,
                                         fat5__addr kv_len_, fat5__addr pos_, int64_t n, int H, int dk, int kind,
                                         int nb, int max_distance, int max_keys, fat5__addr scratch) {
    float *o = FAT5__HOST(float, o_);
    const float *q = FAT5__HOST(const float, q_), *k = FAT5__HOST(const float, k_), *v = FAT5__HOST(const float, v_);
    int causal = (kind & FAT5__ATTN_MASK) == FAT5__ATTN_CAUSAL;
    const float *bias = causal ? FAT5__HOST(const float, bias_) : NULL;
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
    const int32_t *kv_len = FAT5__HOST(const int32_t, kv_len_);
    int64_t pos = FAT5__HOST(const int32_t, pos_)[0], ld = (int64_t)H * dk, i, j, cnt_max = 1;
    double *p, *acc;
    int h, d;
    if (kind >> FAT5__ATTN_WINDOW_SHIFT || (kind & (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_attn_decode: kind %d: decoding takes no attention "
                         "pattern", kind);
    (void)lut;
    (void)max_keys;
    (void)scratch;
    for (i = 0; i < n; i++) {
        int64_t c = causal ? pos + 1 : kv_len[rows[i]];
        if (c > cnt_max) cnt_max = c;
    }
    p = FAT5__CAST(double *, fat5__host_scratch(ctx, (size_t)(cnt_max + dk) * sizeof(double), "fat5__cpu_attn_decode"));
    if (!p) return FAT5_ERR_OUT_OF_MEMORY;
    acc = p + cnt_max;
    for (i = 0; i < n; i++) {
        int64_t row = rows[i], k0 = kv_off[row], cnt = causal ? pos + 1 : kv_len[row];
        for (h = 0; h < H; h++) {
            const float *qi = q + i * ld + h * dk;
            double mx = -INFINITY, sum = 0;
            for (j = 0; j < cnt; j++) {
                p[j] = fat5__cpu_attn_score(qi, k + (k0 + j) * ld + h * dk, bias, pos, j, h, H, dk, kind, nb,
                                            max_distance);
                if (p[j] > mx) mx = p[j];
            }
            for (d = 0; d < dk; d++) acc[d] = 0;
            for (j = 0; j < cnt; j++) {
                const float *vj = v + (k0 + j) * ld + h * dk;
                double e = exp(p[j] - mx);
                sum += e;
                for (d = 0; d < dk; d++) acc[d] += e * vj[d];
            }
            for (d = 0; d < dk; d++) o[i * ld + h * dk + d] = cnt ? (float)(acc[d] / sum) : 0.0f;
        }
    }
    return FAT5_OK;
}

// cache_write: row rows[i] of the caches takes entry i's key and value at position pos[0]:
// kc[kv_off[rows[i]] + pos[0]] = k[i], vc[...] = v[i] (rows of I activation elements).
static fat5_status fat5__cpu_cache_write(fat5_ctx *ctx, fat5__addr kc_, fat5__addr vc_, fat5__addr k_, fat5__addr v_,
                                         fat5__addr rows_, fat5__addr kv_off_, fat5__addr pos_, int64_t n, int I) {
    float *kc = FAT5__HOST(float, kc_), *vc = FAT5__HOST(float, vc_);
    const float *k = FAT5__HOST(const float, k_), *v = FAT5__HOST(const float, v_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
    int64_t pos = FAT5__HOST(const int32_t, pos_)[0], i;
    (void)ctx;
    for (i = 0; i < n; i++) {
        int64_t dst = ((int64_t)kv_off[rows[i]] + pos) * I;
        memcpy(kc + dst, k + i * (int64_t)I, (size_t)I * sizeof(float));
        memcpy(vc + dst, v + i * (int64_t)I, (size_t)I * sizeof(float));
    }
    return FAT5_OK;
}

// norm_mm: the decoder's "normalise, then project" in one op. With xn = rmsnorm_fwd(x, g) (T rows of
// K; x fp32, the normalised rows in the activation dtype):
//   act < 0:  y_s = xn W_s^T ([T, N], activation dtype) for w0 and, when given, w1 and w2;
//   act >= 0: y0 = act_fwd(xn W0^T, xn W1^T) (gated; w1 given, w2 0) or act_fwd(xn W0^T) (w1 0);
//   rows:     (act < 0) rows i of y1 and y2 are the cache rows kv_off[rows[i]] + pos[0] instead of i
//             (cache_write's addressing: the new key and value go straight into the caches).
// The CPU composes its rmsnorm_fwd, mm, act_fwd and the cache addressing; the GPU runs one kernel.
static fat5_status fat5__norm_mm_check(fat5_ctx *ctx, const char *op, fat5__addr y0, fat5__addr y1, fat5__addr y2,
                                       fat5__addr x, fat5__addr g, fat5__addr w0, fat5__addr w1, fat5__addr w2,
                                       int64_t T, int N, int K, int act, fat5__addr rows, fat5__addr kv_off,
                                       fat5__addr pos) {
    if (T < 0 || N < 1 || K < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: T = %lld, N = %d, K = %d (T >= 0, N and K >= 1)", op,
                         (long long)T, N, K);
    if (act > FAT5_ACT_SILU || act < -1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: act %d (-1: none, else a fat5_act)", op, act);
    if (!y0 || !x || !g || !w0 || (w1 && act < 0 && !y1) || (w2 && (!y2 || !w1)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a NULL buffer (y0, x, g, w0; y1 with w1, y2 and w1 with w2)",
                         op);
    if (act >= 0 && (w2 || rows))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: an activation takes w0 and w1 only, and no cache rows", op);
    if (rows && (!kv_off || !pos))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: cache rows need kv_off and pos", op);
    return FAT5_OK;
}

static fat5_status fat5__cpu_norm_mm(fat5_ctx *ctx, fat5__addr y0, fat5__addr y1, fat5__addr y2, fat5__addr x,
                                     fat5__addr g, fat5__addr w0, fat5__addr w1, fat5__addr w2, int64_t T, int N,
                                     int K, float eps, int act, fat5__addr rows_, fat5__addr kv_off_, fat5__addr pos_) {
    const fat5__addr w[3] = {w0, w1, w2}, y[3] = {y0, y1, y2};
    float *buf, *xn, *r, *ta, *tb;
    size_t nb = 0;
    int s;
    fat5_status st = fat5__norm_mm_check(ctx, "fat5__cpu_norm_mm", y0, y1, y2, x, g, w0, w1, w2, T, N, K, act, rows_,
                                         kv_off_, pos_);
    if (st || T == 0) return st;
    if (!fat5__mul_ok((size_t)T, (size_t)K + 1 + 2 * (size_t)N, &nb) || nb > SIZE_MAX / sizeof(float))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_norm_mm: %lld rows: the size overflows", (long long)T);
    buf = FAT5__CAST(float *, fat5__malloc(ctx, nb * sizeof(float)));
    if (!buf) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5__cpu_norm_mm: out of memory");
    xn = buf, r = xn + T * K, ta = r + T, tb = ta + T * N;
    st = fat5__cpu_rmsnorm_fwd(ctx, FAT5__ADDR(xn), FAT5__ADDR(r), x, g, T, K, eps, 0);
    if (act >= 0) {
        if (!st) st = fat5__cpu_mm(ctx, FAT5__MM_NT, FAT5__ADDR(ta), 0, FAT5__ADDR(xn), w0, T, N, K, 1.0f, 0.0f);
        if (!st && w1) st = fat5__cpu_mm(ctx, FAT5__MM_NT, FAT5__ADDR(tb), 0, FAT5__ADDR(xn), w1, T, N, K, 1.0f, 0.0f);
        if (!st) st = fat5__cpu_act_fwd(ctx, y0, FAT5__ADDR(ta), w1 ? FAT5__ADDR(tb) : 0, T * N, act);
    }
    for (s = 0; s < 3 && act < 0 && !st && w[s]; s++) {
        int64_t i;
        if (!rows_ || s == 0) {
            st = fat5__cpu_mm(ctx, FAT5__MM_NT, y[s], 0, FAT5__ADDR(xn), w[s], T, N, K, 1.0f, 0.0f);
            continue;
        }
        st = fat5__cpu_mm(ctx, FAT5__MM_NT, FAT5__ADDR(ta), 0, FAT5__ADDR(xn), w[s], T, N, K, 1.0f, 0.0f);
        for (i = 0; i < T && !st; i++) {
            const int32_t *rows = FAT5__HOST(const int32_t, rows_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
            int64_t dst = (int64_t)kv_off[rows[i]] + FAT5__HOST(const int32_t, pos_)[0];
            memcpy(FAT5__HOST(float, y[s]) + dst * N, ta + i * N, (size_t)N * sizeof(float));
        }
    }
    fat5__free(ctx, buf);
    return st;
}

// cache_gather: for rows r < n, positions [0, pos[0]) of dst row r are those of src row idx[r]
// (cache rows kv_off[r] + j and kv_off[idx[r]] + j; I activation elements each). dst != src.
static fat5_status fat5__cpu_cache_gather(fat5_ctx *ctx, fat5__addr dst_, fat5__addr src_, fat5__addr idx_,
                                          fat5__addr kv_off_, fat5__addr pos_, int64_t n, int I) {
    float *dst = FAT5__HOST(float, dst_);
    const float *src = FAT5__HOST(const float, src_);
    const int32_t *idx = FAT5__HOST(const int32_t, idx_), *kv_off = FAT5__HOST(const int32_t, kv_off_);
    int64_t pos = FAT5__HOST(const int32_t, pos_)[0], r;
    (void)ctx;
    for (r = 0; r < n; r++)
        if (pos > 0)
            memcpy(dst + (int64_t)kv_off[r] * I, src + (int64_t)kv_off[idx[r]] * I, (size_t)(pos * I) * sizeof(float));
    return FAT5_OK;
}

// add_i32: x[i] += v for i < n (the decoder's position counter)
static fat5_status fat5__cpu_add_i32(fat5_ctx *ctx, fat5__addr x_, int v, int64_t n) {
    int32_t *x = FAT5__HOST(int32_t, x_);
    int64_t i;
    (void)ctx;
    for (i = 0; i < n; i++) x[i] += v;
    return FAT5_OK;
}

// Over rows of logits [T, V] with labels (-100 = ignored), z-loss and label smoothing. Per row:
// lse; row_ce = lse - (1-s) x_y - (s/V) sum_j x_j and row_z = z lse^2 for counted rows, 0 for
// ignored ones (the caller sums the rows in double).
static fat5_status fat5__cpu_xent_fwd(fat5_ctx *ctx, fat5__addr lse_, fat5__addr row_ce_, fat5__addr row_z_,
                                      fat5__addr logits_, fat5__addr labels_, int64_t T, int V, float z,
                                      float smooth) {
    float *lse = FAT5__HOST(float, lse_), *row_ce = FAT5__HOST(float, row_ce_), *row_z = FAT5__HOST(float, row_z_);
    const float *logits = FAT5__HOST(const float, logits_);
    const int32_t *labels = FAT5__HOST(const int32_t, labels_);
    int64_t t;
    int j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        const float *x = logits + t * V;
        double mx = -INFINITY, s = 0, sx = 0, L;
        for (j = 0; j < V; j++) if (x[j] > mx) mx = x[j];
        for (j = 0; j < V; j++) {
            s += exp((double)x[j] - mx);
            sx += x[j];
        }
        L = mx + log(s);
        lse[t] = (float)L;
        row_ce[t] = row_z[t] = 0;
        if (labels[t] == -100) continue;
        row_ce[t] = (float)(L - (1.0 - smooth) * x[labels[t]] - smooth / (double)V * sx);
        row_z[t] = (float)(z * L * L);
    }
    return FAT5_OK;
}

// out[0] = ce / n, out[1] = (ce + zs) / n (0, 0 when n = 0), ce and zs the double sums of row_ce and
// row_z in the GPU kernel's order (kernels/xent.cu, fat5_loss_total): FAT5__LOSS_THREADS strided
// partial sums, then halved pairwise, so that both backends report the same bits.
#define FAT5__LOSS_THREADS 256  // FAT5_LOSS_THREADS in kernels/xent.cu
static fat5_status fat5__cpu_loss_total(fat5_ctx *ctx, fat5__addr out_, fat5__addr row_ce_, fat5__addr row_z_,
                                        int64_t T, int64_t n) {
    double *out = FAT5__HOST(double, out_), rc[FAT5__LOSS_THREADS], rz[FAT5__LOSS_THREADS];
    const float *row_ce = FAT5__HOST(const float, row_ce_), *row_z = FAT5__HOST(const float, row_z_);
    int64_t t;
    int i, stride;
    (void)ctx;
    for (i = 0; i < FAT5__LOSS_THREADS; i++) {
        rc[i] = rz[i] = 0;
        for (t = i; t < T; t += FAT5__LOSS_THREADS) {
            rc[i] += (double)row_ce[t];
            rz[i] += (double)row_z[t];
        }
    }
    for (stride = FAT5__LOSS_THREADS / 2; stride > 0; stride >>= 1)
        for (i = 0; i < stride; i++) {
            rc[i] += rc[i + stride];
            rz[i] += rz[i + stride];
        }
    out[0] = n ? rc[0] / (double)n : 0.0;
    out[1] = n ? (rc[0] + rz[0]) / (double)n : 0.0;
    return FAT5_OK;
}
// dlogits = scale * (softmax (1 + 2 z lse) - (1-s) onehot(y) - s/V) for counted rows, 0 otherwise
static fat5_status fat5__cpu_xent_bwd(fat5_ctx *ctx, fat5__addr dlogits_, fat5__addr logits_, fat5__addr lse_,
                                      fat5__addr labels_, int64_t T, int V, float z, float smooth, float scale) {
    float *dlogits = FAT5__HOST(float, dlogits_);
    const float *logits = FAT5__HOST(const float, logits_), *lse = FAT5__HOST(const float, lse_);
    const int32_t *labels = FAT5__HOST(const int32_t, labels_);
    int64_t t;
    int j;
    (void)ctx;
    for (t = 0; t < T; t++) {
        const float *x = logits + t * V;
        float *dx = dlogits + t * V;
        double L = lse[t];
        if (labels[t] == -100) {
            memset(dx, 0, (size_t)V * sizeof(float));
            continue;
        }
        for (j = 0; j < V; j++) {
            double p = exp((double)x[j] - L);
            dx[j] = (float)(scale * (p * (1.0 + 2.0 * z * L) - smooth / (double)V));
        }
        dx[labels[t]] -= (float)(scale * (1.0 - smooth));
    }
    return FAT5_OK;
}

// ---- optimizer ----
// The parameter tensors are segments of one fp32 arena: segs (int64 [2 n_seg]) holds the element
// offset and the numel of each. chunk_off (int64 [n_seg + 1]) and chunk cut every segment into
// chunks of `chunk` elements for the GPU (chunk_off[s] = the first chunk of segment s); the CPU
// walks the segments directly and ignores them, and the scratch.

// out[s] = sum over segment s of x^2 (double [n_seg]); scratch: the GPU's per-chunk partials
// (double [n_chunks])
static fat5_status fat5__cpu_sumsq_seg(fat5_ctx *ctx, fat5__addr out_, fat5__addr x_, fat5__addr segs_,
                                       fat5__addr chunk_off, int n_seg, int64_t n_chunks, int chunk,
                                       fat5__addr scratch) {
    double *out = FAT5__HOST(double, out_);
    const float *x = FAT5__HOST(const float, x_);
    const int64_t *segs = FAT5__HOST(const int64_t, segs_);
    int s;
    (void)ctx;
    (void)chunk_off;
    (void)n_chunks;
    (void)chunk;
    (void)scratch;
    for (s = 0; s < n_seg; s++) {
        const float *p = x + segs[2 * s];
        int64_t i, n = segs[2 * s + 1];
        double acc = 0;
        for (i = 0; i < n; i++) acc += (double)p[i] * p[i];
        out[s] = acc;
    }
    return FAT5_OK;
}

// AdamW update of every segment s, with alpha = coef[2 s] (lr x bias correction x the AdamWScale
// factor) and decay = coef[2 s + 1] (1 - lr wd; 1 for no decay), both fp32, and the clipping
// factor gscale = (float)stats[1]; nothing when the gradient norm stats[0] is not finite:
//   g' = gscale g;  m1 = b1 m1 + (1 - b1) g';  m2 = b2 m2 + (1 - b2) g'^2  (stored in fp32);
//   w = (w - alpha m1 / (sqrt(m2) + eps)) decay   (from the stored fp32 moments; double arithmetic)
// g is read only. wa (the GPU's bf16 operands, refreshed in the same pass) is 0 here.
static fat5_status fat5__cpu_adamw_seg(fat5_ctx *ctx, fat5__addr w_, fat5__addr g_, fat5__addr m1_, fat5__addr m2_,
                                       fat5__addr segs_, fat5__addr chunk_off, int n_seg, int64_t n_chunks,
                                       int chunk, fat5__addr coef_, fat5__addr stats_, float beta1, float beta2,
                                       float eps, fat5__addr wa) {
    float *w = FAT5__HOST(float, w_), *m1 = FAT5__HOST(float, m1_), *m2 = FAT5__HOST(float, m2_);
    const float *g = FAT5__HOST(const float, g_), *coef = FAT5__HOST(const float, coef_);
    const double *stats = FAT5__HOST(const double, stats_);
    const int64_t *segs = FAT5__HOST(const int64_t, segs_);
    double b1 = beta1, b2 = beta2;
    float gscale = (float)stats[1];
    int s;
    (void)ctx;
    (void)chunk_off;
    (void)n_chunks;
    (void)chunk;
    if (wa) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_adamw_seg: the CPU has no separate operands");
    if (!isfinite(stats[0])) return FAT5_OK;  // a skipped step
    for (s = 0; s < n_seg; s++) {
        double alpha = coef[2 * s], decay = coef[2 * s + 1];
        int64_t i, lo = segs[2 * s], hi = lo + segs[2 * s + 1];
        for (i = lo; i < hi; i++) {
            double gi = (double)g[i] * gscale;
            float a = (float)(b1 * m1[i] + (1.0 - b1) * gi), b = (float)(b2 * m2[i] + (1.0 - b2) * gi * gi);
            m1[i] = a;
            m2[i] = b;
            w[i] = (float)(((double)w[i] - alpha * ((double)a / (sqrt((double)b) + (double)eps))) * decay);
        }
    }
    return FAT5_OK;
}

// The step's coefficients (fat5_optim_coef): stats[0] = the gradient norm (the per-tensor sums of
// squares ss_g added in tensor order, in double), stats[1] = the clipping factor min(1, clip /
// (norm + 1e-6)) (1 without clipping); coef[2 s] = lr_bc, times max(sqrt(ss_w[s] / numel), 1e-3)
// when ss_w is given (AdamWScale); coef[2 s + 1] = decay when decayed[s], else 1. A non-finite
// value among gate[0 .. n_gate) (the step's losses) makes the norm NaN: adamw_seg skips the step.
static fat5_status fat5__cpu_optim_coef(fat5_ctx *ctx, fat5__addr coef_, fat5__addr stats_, fat5__addr ss_g_,
                                        fat5__addr ss_w_, fat5__addr segs_, fat5__addr decayed_, int n_seg,
                                        double lr_bc, float decay, double clip, fat5__addr gate_, int n_gate) {
    const double *gate = FAT5__HOST(const double, gate_);
    float *coef = FAT5__HOST(float, coef_);
    double *stats = FAT5__HOST(double, stats_), norm2 = 0, gs = 1;
    const double *ss_g = FAT5__HOST(const double, ss_g_), *ss_w = FAT5__HOST(const double, ss_w_);
    const int64_t *segs = FAT5__HOST(const int64_t, segs_);
    const int32_t *decayed = FAT5__HOST(const int32_t, decayed_);
    int s;
    (void)ctx;
    for (s = 0; s < n_seg; s++) norm2 += ss_g[s];
    stats[0] = sqrt(norm2);
    if (clip > 0) {
        double k = clip / (stats[0] + 1e-6);
        if (k < 1) gs = k;
    }
    stats[1] = gs;
    for (s = 0; s < n_gate; s++)  // after the clipping factor, as the kernel orders it
        if (!isfinite(gate[s])) stats[0] = NAN;
    for (s = 0; s < n_seg; s++) {
        double alpha = lr_bc;
        if (ss_w) {
            double rms = sqrt(ss_w[s] / (double)segs[2 * s + 1]);
            alpha *= rms > 1e-3 ? rms : 1e-3;
        }
        coef[2 * s] = (float)alpha;
        coef[2 * s + 1] = decayed[s] ? decay : 1.0f;
    }
    return FAT5_OK;
}

#define FAT5__BEAM_MAX 32   // beams per input of fat5__cpu_gen_beam / fat5_gen_beam (2K candidates)

// ---- generation: logits processors, token selection, beam search (kernels/generate.cu) ----
// The decoding state lives on the backend, indexed by decoder row r (or by input i = r / K with K
// beams): hist int32 [R, Lh] is the decoder input of each row (hist[r][0] the start token,
// hist[r][1 + j] the j-th generated token), lens int32 [R] the tokens generated so far. An op
// works on n entries whose rows are rows[0 .. n) (the live rows of the step, in the order of the
// decoder's logits [n, V]).

// The Gumbel noise of token v for row `row` at generated length `len`: -log(-log(u)) with u the
// Philox word of counter (len << 44) + (row << 24) + v / 4, word v % 4, key seed, mapped to (0, 1).
// One word per token, so a draw depends on (seed, row, length, token) only: the CPU and the GPU
// (fat5_gen_select mirrors it) agree, and dropping finished rows changes nothing.
static double fat5__gen_gumbel(uint64_t seed, int64_t row, int64_t len, int64_t v) {
    uint32_t w[4];
    double u;
    fat5__philox(seed, ((uint64_t)len << 44) + ((uint64_t)row << 24) + (uint64_t)(v >> 2), w);
    u = ((double)w[v & 3] + 0.5) * (1.0 / 4294967296.0);
    return -log(-log(u));
}

static int fat5__cpu_float_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x > y ? -1 : x < y;
}

// Hugging Face's processors on x [n, V] fp32 in place, entry e for row rows[e] with decoder input
// hist[row][0 .. lens[row] + 1): first log_softmax (when `log_softmax`: beam search processes
// log-probabilities), then the repetition penalty (rep != 1: each distinct token of the input,
// x < 0 ? x * rep : x / rep), no-repeat n-grams (ngram > 0: a token that would complete an n-gram
// already in the input gets -inf), and min_new_tokens (eos gets -inf while lens[row] < min_new).
static fat5_status fat5__cpu_gen_process(fat5_ctx *ctx, fat5__addr x_, fat5__addr hist_, fat5__addr lens_,
                                         fat5__addr rows_, int64_t n, int V, int Lh, float rep, int ngram,
                                         int min_new, int eos, int log_softmax) {
    float *x = FAT5__HOST(float, x_);
    const int32_t *hist = FAT5__HOST(const int32_t, hist_), *lens = FAT5__HOST(const int32_t, lens_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_);
    int64_t e;
    (void)ctx;
    for (e = 0; e < n; e++) {
        float *xe = x + e * (int64_t)V;
        const int32_t *h = hist + (int64_t)rows[e] * Lh;
        int L = lens[rows[e]] + 1, i, j, v;
        if (log_softmax) {
            double mx = -INFINITY, s = 0, lse;
            for (v = 0; v < V; v++) mx = xe[v] > mx ? xe[v] : mx;
            for (v = 0; v < V; v++) s += exp((double)xe[v] - mx);
            lse = mx + log(s);
            for (v = 0; v < V; v++) xe[v] = (float)((double)xe[v] - lse);
        }
        if (rep != 1.0f)
            for (i = 0; i < L; i++) {
                int seen = 0, t = h[i];
                for (j = 0; j < i && !seen; j++) seen = h[j] == t;
                if (!seen && t >= 0 && t < V) xe[t] = xe[t] < 0 ? xe[t] * rep : xe[t] / rep;
            }
        if (ngram > 0 && L + 1 >= ngram)
            for (i = 0; i + ngram <= L; i++) {   // the n-gram h[i .. i + ngram) vs the last ngram-1 tokens
                int match = 1;
                for (j = 0; j < ngram - 1 && match; j++) match = h[i + j] == h[L - ngram + 1 + j];
                if (match && h[i + ngram - 1] >= 0 && h[i + ngram - 1] < V) xe[h[i + ngram - 1]] = -INFINITY;
            }
        if (lens[rows[e]] < min_new && eos >= 0 && eos < V) xe[eos] = -INFINITY;
    }
    return FAT5_OK;
}

// Greedy or sampled next token of entry e (row r = rows[e]) from the processed x [n, V], unless
// done[r]: then tok[e] = pad and nothing changes. Sampling scales by 1 / temperature, keeps the
// tokens >= the top_k-th largest value (top_k > 0), then of those the tokens whose strictly more
// likely kept tokens hold less than top_p of the kept mass (Hugging Face's top-p with ties kept),
// and draws argmax(s + gumbel) over the kept tokens (fat5__gen_gumbel; a categorical draw from their
// softmax). Greedy takes the first largest x. Then tok[e] = hist[r][1 + lens[r]] = the token,
// score[r] += its log-softmax over the kept (scaled) values, lens[r]++, and done[r] = 1 when the
// token is eos or lens[r] reaches max_new.
static fat5_status fat5__cpu_gen_select(fat5_ctx *ctx, fat5__addr x_, fat5__addr tok_, fat5__addr hist_,
                                        fat5__addr lens_, fat5__addr done_, fat5__addr score_, fat5__addr rows_,
                                        int64_t n, int V, int Lh, int max_new, int eos, int pad, int do_sample,
                                        float temperature, int top_k, float top_p, unsigned long long seed) {
    const float *x = FAT5__HOST(const float, x_);
    int32_t *tok = FAT5__HOST(int32_t, tok_), *hist = FAT5__HOST(int32_t, hist_);
    int32_t *lens = FAT5__HOST(int32_t, lens_), *done = FAT5__HOST(int32_t, done_);
    float *score = FAT5__HOST(float, score_), *s;
    const int32_t *rows = FAT5__HOST(const int32_t, rows_);
    int64_t e;
    s = (float *)fat5__host_scratch(ctx, (size_t)V * 2 * sizeof(float), "fat5__cpu_gen_select");
    if (!s) return FAT5_ERR_OUT_OF_MEMORY;
    for (e = 0; e < n; e++) {
        const float *xe = x + e * (int64_t)V;
        float *sorted = s + V, thr = -INFINITY;
        int r = rows[e], v, best = -1;
        double mx = -INFINITY, z = 0, bestkey = -INFINITY;
        if (done[r]) {
            tok[e] = pad;
            continue;
        }
        for (v = 0; v < V; v++) s[v] = do_sample ? xe[v] / temperature : xe[v];
        if (do_sample) {
            int k = top_k > 0 && top_k < V ? top_k : V;
            memcpy(sorted, s, (size_t)V * sizeof(float));
            qsort(sorted, (size_t)V, sizeof(float), fat5__cpu_float_desc);
            thr = sorted[k - 1];
            if (top_p < 1.0f) {
                double zk = 0, before = 0, m0 = sorted[0];
                int i;
                for (i = 0; i < k; i++) zk += exp((double)sorted[i] - m0);
                for (i = 0; i < k; i++) {   // kept while the mass strictly before stays < top_p
                    if (i > 0 && sorted[i] < sorted[i - 1] && before >= (double)top_p * zk) break;
                    thr = sorted[i];
                    before += exp((double)sorted[i] - m0);
                }
            }
        }
        for (v = 0; v < V; v++)
            if (s[v] >= thr && s[v] > mx) mx = s[v];
        for (v = 0; v < V; v++)
            if (s[v] >= thr) z += exp((double)s[v] - mx);
        for (v = 0; v < V; v++) {
            double key;
            if (!(s[v] >= thr)) continue;
            key = do_sample ? (double)s[v] + fat5__gen_gumbel(seed, r, lens[r], v) : (double)s[v];
            if (best < 0 || key > bestkey) best = v, bestkey = key;
        }
        if (best < 0) best = 0;   // every value NaN
        tok[e] = best;
        hist[(int64_t)r * Lh + 1 + lens[r]] = best;
        score[r] += (float)((double)s[best] - mx - log(z));
        lens[r]++;
        if (best == eos || lens[r] >= max_new) done[r] = 1;
    }
    return FAT5_OK;
}

// One step of Hugging Face's beam search (the vectorised one of transformers 5) for n / K live
// inputs: entries b K .. b K + K - 1 are the K beams of input i = rows[b K] / K, rows i K .. i K + K - 1,
// with x the processed log-probabilities [n, V] (fat5__cpu_gen_process with log_softmax). t =
// lens[i K] tokens generated so far. Per input:
//  1. candidates: the 2K largest bscore[beam] + x[beam][v] over K x V (first flat index on ties);
//     a candidate "stops" when v is eos or t + 1 == max_new;
//  2. the next running beams: the K best candidates, stopped ones moved 1e9 down; beam k takes
//     the history of its candidate's beam plus v (src[i K + k] = that beam's row, tok = v);
//  3. finished hypotheses: the K slots (fin_score sorted best first, fin_flag, fin_len, fin_tok
//     [R, Lh - 1]) merged with the candidates among the first K that stopped, scored
//     sum / (t + 1)^length_penalty, unless unsat[i] is 0 or (early_stopping 1 and all K slots hold
//     one): those add 1e9 penalties as Hugging Face does, so they are never taken;
//  4. unsat[i] &= some slot s has best_running / L^length_penalty > (fin_flag[s] ? min fin_score :
//     -1e9), L = max_new for early_stopping 2 ("never") with length_penalty > 0, else t + 1;
//     done[i] = !unsat[i] || (early_stopping 1 && all slots finished) || t + 1 == max_new.
// scratch: int32 [n, Lh] (the histories while they are gathered).
static fat5_status fat5__cpu_gen_beam(fat5_ctx *ctx, fat5__addr x_, fat5__addr tok_, fat5__addr src_,
                                      fat5__addr hist_, fat5__addr lens_, fat5__addr bscore_, fat5__addr fin_score_,
                                      fat5__addr fin_tok_, fat5__addr fin_len_, fat5__addr fin_flag_,
                                      fat5__addr unsat_, fat5__addr done_, fat5__addr rows_, fat5__addr scratch_,
                                      int64_t n, int V, int Lh, int K, int max_new, int eos, float length_penalty,
                                      int early_stopping) {
    const float *x = FAT5__HOST(const float, x_);
    int32_t *tok = FAT5__HOST(int32_t, tok_), *src = FAT5__HOST(int32_t, src_), *hist = FAT5__HOST(int32_t, hist_);
    int32_t *lens = FAT5__HOST(int32_t, lens_), *fin_tok = FAT5__HOST(int32_t, fin_tok_);
    int32_t *fin_len = FAT5__HOST(int32_t, fin_len_), *fin_flag = FAT5__HOST(int32_t, fin_flag_);
    int32_t *unsat = FAT5__HOST(int32_t, unsat_), *done = FAT5__HOST(int32_t, done_);
    int32_t *scratch = FAT5__HOST(int32_t, scratch_);
    float *bscore = FAT5__HOST(float, bscore_), *fin_score = FAT5__HOST(float, fin_score_);
    const int32_t *rows = FAT5__HOST(const int32_t, rows_);
    int64_t b;
    (void)ctx;
    if (K < 1 || K > FAT5__BEAM_MAX) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__cpu_gen_beam: K = %d", K);
    for (b = 0; b < n / K; b++) {
        int i = rows[b * K] / K, r0 = i * K, t = lens[r0], c, k, j, all_fin = 1, any = 0;
        float cval[2 * FAT5__BEAM_MAX], cnorm[2 * FAT5__BEAM_MAX], run[2 * FAT5__BEAM_MAX], worst = INFINITY;
        int64_t cidx[2 * FAT5__BEAM_MAX];
        int cstop[2 * FAT5__BEAM_MAX], next[FAT5__BEAM_MAX], taken[2 * FAT5__BEAM_MAX];
        float mscore[3 * FAT5__BEAM_MAX];
        int mfrom[3 * FAT5__BEAM_MAX], mused[3 * FAT5__BEAM_MAX], pick[FAT5__BEAM_MAX];
        float ns[FAT5__BEAM_MAX];
        int nf[FAT5__BEAM_MAX], nl[FAT5__BEAM_MAX];
        double denom = pow((double)(t + 1), (double)length_penalty), L;
        for (k = 0; k < K; k++) all_fin &= fin_flag[r0 + k] != 0;
        // 1. the 2K best candidates, by repeated arg-max (first flat index on ties)
        for (c = 0; c < 2 * K; c++) {
            int64_t q, best = -1;
            float bv = -INFINITY;
            for (q = 0; q < (int64_t)K * V; q++) {
                float val = bscore[r0 + q / V] + x[(b * K + q / V) * V + q % V];
                int dup = 0;
                for (j = 0; j < c && !dup; j++) dup = cidx[j] == q;
                if (dup) continue;
                if (best < 0 || val > bv) best = q, bv = val;
            }
            cidx[c] = best;
            cval[c] = bv;
            cstop[c] = (int)(best % V) == eos || t + 1 >= max_new;
        }
        // 2. the next running beams: the K best of the candidates with stopped ones moved down
        for (c = 0; c < 2 * K; c++) run[c] = cval[c] + (cstop[c] ? -1.0e9f : 0.0f), taken[c] = 0;
        for (k = 0; k < K; k++) {
            int bc = -1;
            for (c = 0; c < 2 * K; c++)
                if (!taken[c] && (bc < 0 || run[c] > run[bc])) bc = c;
            taken[bc] = 1;
            next[k] = bc;
        }
        // 3. merge the finished slots with the candidates that stopped among the first K
        for (c = 0; c < 2 * K; c++) {
            float s = (float)(cval[c] / (float)denom);
            if (all_fin && early_stopping == 1) s += -1.0e9f;
            if (!unsat[i]) s += -1.0e9f;
            if (!(cstop[c] && c < K)) s += -1.0e9f;
            cnorm[c] = s;
        }
        for (k = 0; k < K; k++) mscore[k] = fin_score[r0 + k], mfrom[k] = -1 - k;
        for (c = 0; c < 2 * K; c++) mscore[K + c] = cnorm[c], mfrom[K + c] = c;
        for (j = 0; j < 3 * K; j++) mused[j] = 0;
        for (k = 0; k < K; k++) {
            int bj = -1;
            for (j = 0; j < 3 * K; j++)
                if (!mused[j] && (bj < 0 || mscore[j] > mscore[bj])) bj = j;
            mused[bj] = 1;
            pick[k] = bj;
        }
        // new slots: copy to temporaries first (a slot may move)
        for (k = 0; k < K; k++) {
            int f = mfrom[pick[k]];
            int32_t *dst = scratch + (b * K + k) * (int64_t)Lh;
            ns[k] = mscore[pick[k]];
            if (f < 0) {
                int s = -1 - f;
                nf[k] = fin_flag[r0 + s];
                nl[k] = fin_len[r0 + s];
                memcpy(dst, fin_tok + (int64_t)(r0 + s) * (Lh - 1), (size_t)nl[k] * sizeof(int32_t));
            } else {
                int beam = (int)(cidx[f] / V);
                nf[k] = cstop[f] && f < K;
                nl[k] = t + 1;
                memcpy(dst, hist + (int64_t)(r0 + beam) * Lh + 1, (size_t)t * sizeof(int32_t));
                dst[t] = (int32_t)(cidx[f] % V);
            }
        }
        for (k = 0; k < K; k++) {
            fin_score[r0 + k] = ns[k];
            fin_flag[r0 + k] = nf[k];
            fin_len[r0 + k] = nl[k];
            memcpy(fin_tok + (int64_t)(r0 + k) * (Lh - 1), scratch + (b * K + k) * (int64_t)Lh,
                   (size_t)nl[k] * sizeof(int32_t));
        }
        // 2 (cont.): gather the running histories, then write them back
        for (k = 0; k < K; k++) {
            int beam = (int)(cidx[next[k]] / V);
            int32_t *dst = scratch + (b * K + k) * (int64_t)Lh;
            memcpy(dst, hist + (int64_t)(r0 + beam) * Lh, (size_t)(t + 1) * sizeof(int32_t));
            dst[t + 1] = (int32_t)(cidx[next[k]] % V);
            src[r0 + k] = r0 + beam;
            tok[b * K + k] = dst[t + 1];
        }
        for (k = 0; k < K; k++) {
            memcpy(hist + (int64_t)(r0 + k) * Lh, scratch + (b * K + k) * (int64_t)Lh, (size_t)(t + 2) * sizeof(int32_t));
            bscore[r0 + k] = run[next[k]];
            lens[r0 + k] = t + 1;
        }
        // 4. Hugging Face's early-stop heuristic and the input's end
        L = early_stopping == 2 && length_penalty > 0.0f ? (double)max_new : (double)(t + 1);
        all_fin = 1;
        for (k = 0; k < K; k++) {
            all_fin &= fin_flag[r0 + k] != 0;
            worst = fin_score[r0 + k] < worst ? fin_score[r0 + k] : worst;
        }
        for (k = 0; k < K; k++) {
            float best = (float)(bscore[r0] / (float)pow(L, (double)length_penalty));
            any |= best > (fin_flag[r0 + k] ? worst : -1.0e9f);
        }
        unsat[i] = unsat[i] && any;
        done[i] = !unsat[i] || (early_stopping == 1 && all_fin) || t + 1 >= max_new;
    }
    return FAT5_OK;
}
// =============================================================================================
// ==[3.3] ops: the GPU launchers ==
#ifndef FAT5_NO_CUDA
// One launcher fat5__gpu_<op> per kernel fat5_<op> of kernels/*.cu (and cuBLAS for mm). Each takes
// the kernel's arguments (device pointers as fat5__dptr, 0 for
// NULL; counts as int64_t), checks what the kernel relies on, picks grid and block, and launches on
// the context's stream (asynchronous: errors of the run itself surface at fat5__dev_sync). The CPU
// twin fat5__cpu_<op> in the ops section is the oracle; tests/test_gpu_ops.c pairs them.
//
// Grids: every kernel loops (grid-stride) over its rows or elements, so grids are clamped to
// FAT5__GPU_MAX_BLOCKS in x; y is only ever the head count (<= 65535, checked).
// Kernel arguments: `void *args[]` holds the addresses of variables of the exact parameter types
// (fat5__dptr for pointers, long long, int, float).

// Row-major GEMM through cuBLAS (column-major), same semantics as the CPU ops:
//   NT: C[M,N] = alpha * A[M,K] B[N,K]^T + beta * C
//   NN: C[M,N] = alpha * A[M,K] B[K,N]   + beta * C
//   TN: C[M,N] = alpha * A[K,M]^T B[K,N] + beta * C
// A row-major X[r,c] is the column-major X^T, so each computes C^T = op(B) op(A) with m = N, n = M.
// A and B are in the activation dtype; C is fp32 when c_f32, else the activation dtype. fp32
// compute (CUBLAS_COMPUTE_32F, default math mode: never TF32). beta == 0 does not read C.
// NT products of at most ctx->gpu->mm_rows rows (decoding) run fat5_mm instead (kernels/mm.cu:
// each row of B read once for all rows of A, fp32 accumulation, one launch, no cuBLAS heuristics).
#define FAT5__GPU_MM_WARPS 4  // FAT5_MM_WARPS in kernels/mm.cu: warps a block, two outputs each

static const char *const fat5__mm_layout_names[3] = {"NT", "NN", "TN"};

// Closes a product's profile slot under its shape: "gemm NT MxNxK", " xB" for a batch, " +C" when
// it accumulates
static void fat5__gpu_mm_prof_end(fat5_ctx *ctx, int slot, fat5__mm_layout layout, int64_t M, int64_t N, int64_t K,
                                  int batch, float beta) {
    char key[FAT5__PROF_KEY], nb[16] = "";
    if (slot < 0) return;
    if (batch > 1) snprintf(nb, sizeof nb, " x%d", batch);
    snprintf(key, sizeof key, "gemm %s %lldx%lldx%lld%s%s", fat5__mm_layout_names[layout], (long long)M, (long long)N,
             (long long)K, nb, beta != 0 ? " +C" : "");
    fat5__dev_prof_end(ctx, slot, key);
}

// cuBLAS's operations and leading dimensions of a row-major product of `layout`
static void fat5__gpu_mm_ops(fat5__mm_layout layout, int64_t M, int64_t N, int64_t K, fat5__cublasOperation_t *op_a,
                             int64_t *ld_a, fat5__cublasOperation_t *op_b, int64_t *ld_b) {
    switch (layout) {
    case FAT5__MM_NT:  // B[N,K] is col-major K x N: op T; A[M,K] is col-major K x M: op N
        *op_b = FAT5__CUBLAS_OP_T, *ld_b = K, *op_a = FAT5__CUBLAS_OP_N, *ld_a = K;
        break;
    case FAT5__MM_NN:  // B[K,N] is col-major N x K; A[M,K] is col-major K x M
        *op_b = FAT5__CUBLAS_OP_N, *ld_b = N, *op_a = FAT5__CUBLAS_OP_N, *ld_a = K;
        break;
    default:           // TN: B[K,N] is col-major N x K; A[K,M] is col-major M x K: op T
        *op_b = FAT5__CUBLAS_OP_N, *ld_b = N, *op_a = FAT5__CUBLAS_OP_T, *ld_a = M;
        break;
    }
}

static FAT5__UNUSED fat5_status fat5__gpu_mm(fat5_ctx *ctx, fat5__mm_layout layout, fat5__dptr C,
                                             int c_f32, fat5__dptr A, fat5__dptr B, int64_t M,
                                             int64_t N, int64_t K, float alpha, float beta) {
    const char *const *names = fat5__mm_layout_names;
    fat5_status st = fat5__dev_enter(ctx, "fat5__gpu_mm");
    fat5__cublasOperation_t op_b, op_a;
    fat5__cudaDataType ab_t, c_t;
    fat5__cublasStatus_t s;
    int64_t ld_b, ld_a;
    int bf16, slot;
    char what[160];
    if (st) return st;
    if ((int)layout < 0 || (int)layout > 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm: unknown layout %d", (int)layout);
    if (M < 0 || N < 0 || K < 0 || M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5__gpu_mm %s: M=%lld N=%lld K=%lld outside [0, INT_MAX]", names[layout],
                         (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) return FAT5_OK;
    if (!C || (K > 0 && (!A || !B)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm %s: NULL %s", names[layout],
                         !C ? "C" : !A ? "A" : "B");
    bf16 = ctx->cfg.dtype == FAT5_DTYPE_BF16;
    if (layout == FAT5__MM_NT && M <= ctx->gpu->mm_rows && K > 0) {
        // a few rows (decoding): fat5_mm reads each row of B once for all of them
        long long M_ = M;
        int N_ = (int)N, K_ = (int)K, vec = K % (bf16 ? 8 : 4) == 0 && !((A | B) & 15);
        void *args[] = {&C, &c_f32, &A, &B, &M_, &N_, &K_, &alpha, &beta, &vec};
        int64_t blocks = (N + 2 * FAT5__GPU_MM_WARPS - 1) / (2 * FAT5__GPU_MM_WARPS);
        return fat5__dev_launch(ctx, FAT5__K_mm, (unsigned)(blocks < 1048576 ? blocks : 1048576), 1, 1,
                                32 * FAT5__GPU_MM_WARPS, 1, 1, 0, args);
    }
    ab_t = bf16 ? FAT5__CUDA_R_16BF : FAT5__CUDA_R_32F;
    c_t = (c_f32 || !bf16) ? FAT5__CUDA_R_32F : FAT5__CUDA_R_16BF;
    fat5__gpu_mm_ops(layout, M, N, K, &op_a, &ld_a, &op_b, &ld_b);
    slot = fat5__dev_prof_begin(ctx);
    s = ctx->gpu->cublas.cublasGemmEx(ctx->gpu->blas, op_b, op_a, (int)N, (int)M, (int)K, &alpha,
                                      (const void *)(uintptr_t)B, ab_t, (int)(ld_b > 0 ? ld_b : 1),
                                      (const void *)(uintptr_t)A, ab_t, (int)(ld_a > 0 ? ld_a : 1),
                                      &beta, (void *)(uintptr_t)C, c_t, (int)N,
                                      FAT5__CUBLAS_COMPUTE_32F, FAT5__CUBLAS_GEMM_DEFAULT);
    if (s == FAT5__CUBLAS_STATUS_SUCCESS) {
        fat5__gpu_mm_prof_end(ctx, slot, layout, M, N, K, 1, beta);
        return FAT5_OK;
    }
    snprintf(what, sizeof what, "cublasGemmEx (%s, M=%lld N=%lld K=%lld, %s inputs, %s output)",
             names[layout], (long long)M, (long long)N, (long long)K, bf16 ? "bf16" : "fp32",
             c_t == FAT5__CUDA_R_32F ? "fp32" : "bf16");
    return fat5__dev_blas_check(ctx, s, what);
}

// batch products of one shape in one cuBLAS call (cublasGemmStridedBatchedEx): C + b sC = op(A + b sA,
// B + b sB), strides in elements of each matrix's type (0: one matrix for all), as fat5__gpu_mm
// computes each (the q | k | v projections, wi_0 | wi_1, and their weight gradients). Products of a
// few rows go to fat5__gpu_mm one by one.
static FAT5__UNUSED fat5_status fat5__gpu_mm_batched(fat5_ctx *ctx, fat5__mm_layout layout, fat5__dptr C, int c_f32,
                                                     fat5__dptr A, fat5__dptr B, int64_t M, int64_t N, int64_t K,
                                                     float alpha, float beta, int batch, int64_t sA, int64_t sB,
                                                     int64_t sC) {
    fat5_status st = fat5__dev_enter(ctx, "fat5__gpu_mm_batched");
    fat5__cublasOperation_t op_b, op_a;
    fat5__cudaDataType ab_t, c_t;
    fat5__cublasStatus_t s;
    int64_t ld_b, ld_a;
    size_t ab_sz, c_sz;
    int bf16, slot, b;
    char what[160];
    if (st) return st;
    if (batch < 0 || sA < 0 || sB < 0 || sC < 0 || (int)layout < 0 || (int)layout > 2 || M < 0 || N < 0 || K < 0 ||
        M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm_batched: layout %d, M=%lld N=%lld K=%lld, batch %d, "
                         "strides %lld %lld %lld", (int)layout, (long long)M, (long long)N, (long long)K, batch,
                         (long long)sA, (long long)sB, (long long)sC);
    if (batch == 0 || M == 0 || N == 0) return FAT5_OK;
    bf16 = ctx->cfg.dtype == FAT5_DTYPE_BF16;
    ab_sz = bf16 ? 2 : 4;
    c_sz = (c_f32 || !bf16) ? 4 : 2;
    if (batch == 1 || K == 0 || (layout == FAT5__MM_NT && M <= ctx->gpu->mm_rows)) {
        for (b = 0; b < batch && !st; b++)
            st = fat5__gpu_mm(ctx, layout, C + (fat5__dptr)(b * sC) * c_sz, c_f32, A + (fat5__dptr)(b * sA) * ab_sz,
                              B + (fat5__dptr)(b * sB) * ab_sz, M, N, K, alpha, beta);
        return st;
    }
    if (!C || !A || !B) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_mm_batched: NULL matrix");
    ab_t = bf16 ? FAT5__CUDA_R_16BF : FAT5__CUDA_R_32F;
    c_t = c_sz == 4 ? FAT5__CUDA_R_32F : FAT5__CUDA_R_16BF;
    fat5__gpu_mm_ops(layout, M, N, K, &op_a, &ld_a, &op_b, &ld_b);
    slot = fat5__dev_prof_begin(ctx);
    s = ctx->gpu->cublas.cublasGemmStridedBatchedEx(
        ctx->gpu->blas, op_b, op_a, (int)N, (int)M, (int)K, &alpha, (const void *)(uintptr_t)B, ab_t,
        (int)(ld_b > 0 ? ld_b : 1), (long long)sB, (const void *)(uintptr_t)A, ab_t, (int)(ld_a > 0 ? ld_a : 1),
        (long long)sA, &beta, (void *)(uintptr_t)C, c_t, (int)N, (long long)sC, batch, FAT5__CUBLAS_COMPUTE_32F,
        FAT5__CUBLAS_GEMM_DEFAULT);
    if (s == FAT5__CUBLAS_STATUS_SUCCESS) {
        fat5__gpu_mm_prof_end(ctx, slot, layout, M, N, K, batch, beta);
        return FAT5_OK;
    }
    snprintf(what, sizeof what, "cublasGemmStridedBatchedEx (M=%lld N=%lld K=%lld, batch %d)", (long long)M,
             (long long)N, (long long)K, batch);
    return fat5__dev_blas_check(ctx, s, what);
}

#define FAT5__GPU_MAX_BLOCKS 1048576    // grid.x clamp; the kernels' grid-stride loops do the rest
#define FAT5__GPU_SMEM_DEFAULT 49152    // dynamic shared memory usable without an opt-in
#define FAT5__GPU_ATTN_WARPS 4          // tokens (warps) per attention block; must be <= 32
#define FAT5__GPU_ATTN_MAX_DK 256       // FAT5_ATTN_MAX_DK in kernels/attention.cu
#define FAT5__GPU_NORM_BWD_BLOCKS 1024  // rows of the rmsnorm_bwd scratch: the dw partials
#define FAT5__GPU_NORM_WARPS 8          // rows (one per warp) an rmsnorm block works on at once
#define FAT5__GPU_NORM_BWD_PER_SM 3     // rmsnorm_bwd blocks resident per multiprocessor
// fat5_rmsnorm_bwd is compiled for FAT5__GPU_NORM_BWD_PER_SM blocks of 256 threads per
// multiprocessor (__launch_bounds__(256, 3) in kernels/norm.cu)
typedef char
    fat5__norm_bwd_matches_launch_bounds[FAT5__GPU_NORM_WARPS == 8 && FAT5__GPU_NORM_BWD_PER_SM == 3 ? 1 : -1];
#define FAT5__GPU_DBIAS_BLOCKS 1024     // grid.x clamp of attn_bwd_dq with a bias gradient: rows of its scratch

// ceil(work / per_block) blocks, at least 1, at most FAT5__GPU_MAX_BLOCKS
static unsigned fat5__gpu_blocks(int64_t work, int64_t per_block) {
    int64_t b = work / per_block + (work % per_block != 0);
    if (b < 1) b = 1;
    if (b > FAT5__GPU_MAX_BLOCKS) b = FAT5__GPU_MAX_BLOCKS;
    return (unsigned)b;
}

// threads for a block that walks a row of D elements: a multiple of 32 covering D, within [32, max]
static unsigned fat5__gpu_row_threads(int64_t D, unsigned max) {
    int64_t t = (D + 31) / 32 * 32;
    if (t < 32) t = 32;
    if (t > (int64_t)max) t = (int64_t)max;
    return (unsigned)t;
}

static fat5_status fat5__gpu_bad_count(fat5_ctx *ctx, const char *op, const char *what, int64_t v) {
    return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s = %lld is negative", op, what, (long long)v);
}

// an elementwise kernel over n elements: blocks of 256 threads, grid-stride
static fat5_status fat5__gpu_launch_1d(fat5_ctx *ctx, int kernel, const char *op, int64_t n, void **args) {
    if (n < 0) return fat5__gpu_bad_count(ctx, op, "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(n, 256), 1, 1, 256, 1, 1, 0, args);
}

// An elementwise kernel that takes FAT5_VEC_E act_t elements per thread (16-byte loads): threads
// for n / E vectors, grid-stride, at least one block (the n % E left over go one per thread).
static fat5_status fat5__gpu_launch_vec(fat5_ctx *ctx, int kernel, const char *op, int64_t n, void **args) {
    int64_t e = 16 / (int64_t)fat5__dev_act_size(ctx);
    if (n < 0) return fat5__gpu_bad_count(ctx, op, "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks((n + e - 1) / e, 256), 1, 1, 256, 1, 1, 0, args);
}

// ----- util.cu -----

// x[i] = v for i < n (fp32)
static FAT5__UNUSED fat5_status fat5__gpu_fill_f32(fat5_ctx *ctx, fat5__dptr x, float v, int64_t n) {
    long long n_ = n;
    void *args[] = {&x, &v, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_fill_f32, "fat5__gpu_fill_f32", n, args);
}

// x[i] *= s for i < n (fp32)
static FAT5__UNUSED fat5_status fat5__gpu_scale_f32(fat5_ctx *ctx, fat5__dptr x, float s, int64_t n) {
    long long n_ = n;
    void *args[] = {&x, &s, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_scale_f32, "fat5__gpu_scale_f32", n, args);
}

// dst[i] = bf16(src[i]) (round to nearest even), whatever the activation dtype; no overlap
static FAT5__UNUSED fat5_status fat5__gpu_f32_to_bf16(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src,
                                                      int64_t n) {
    long long n_ = n;
    void *args[] = {&dst, &src, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_f32_to_bf16, "fat5__gpu_f32_to_bf16", n, args);
}

// dst[i] = src[i] in the activation dtype (fp32 copy, or bf16 rounding); no overlap
static FAT5__UNUSED fat5_status fat5__gpu_to_act(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src, int64_t n) {
    long long n_ = n;
    void *args[] = {&dst, &src, &n_};
    return fat5__gpu_launch_1d(ctx, FAT5__K_to_act, "fat5__gpu_to_act", n, args);
}

// ----- embed.cu: one block per row, threads over D -----

static fat5_status fat5__gpu_embed_launch(fat5_ctx *ctx, int kernel, const char *op, fat5__dptr out,
                                          fat5__dptr table, fat5__dptr tok, int64_t T, int D) {
    long long T_ = T;
    void *args[] = {&out, &table, &tok, &T_, &D};
    if (T < 0) return fat5__gpu_bad_count(ctx, op, "T", T);
    if (D < 0) return fat5__gpu_bad_count(ctx, op, "D", D);
    if (T == 0 || D == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(T, 1), 1, 1, fat5__gpu_row_threads(D, 256), 1, 1, 0,
                            args);
}

// out[t] = table[tok[t]] (rows of D fp32); token ids must be valid rows
static FAT5__UNUSED fat5_status fat5__gpu_embed_fwd(fat5_ctx *ctx, fat5__dptr out, fat5__dptr table,
                                                    fat5__dptr tok, int64_t T, int D) {
    return fat5__gpu_embed_launch(ctx, FAT5__K_embed_fwd, "fat5__gpu_embed_fwd", out, table, tok, T, D);
}

// dtable[tok[t]] += dout[t], deterministic and bit-identical to the CPU twin: block b of G owns the
// rows v = b (mod G) and adds its tokens' rows in token order (no atomics). G = ceil(T / 32),
// clamped to [1, 512]; 256 threads.
static FAT5__UNUSED fat5_status fat5__gpu_embed_bwd(fat5_ctx *ctx, fat5__dptr dtable, fat5__dptr dout,
                                                    fat5__dptr tok, int64_t T, int D) {
    long long T_ = T;
    void *args[] = {&dtable, &dout, &tok, &T_, &D};
    unsigned G = fat5__gpu_blocks(T, 32);
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_embed_bwd", "T", T);
    if (D < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_embed_bwd", "D", D);
    if (T == 0 || D == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_embed_bwd, G < 512 ? G : 512, 1, 1, 256, 1, 1, 0, args);
}

// ----- norm.cu -----

// y = w * x * r with r = 1/sqrt(mean(x^2) + eps) saved per row; x fp32 [T, D], y activation dtype;
// xs (0: none) a copy of x. One warp per row, 8 warps per block.
static FAT5__UNUSED fat5_status fat5__gpu_rmsnorm_fwd(fat5_ctx *ctx, fat5__dptr y, fat5__dptr r, fat5__dptr x,
                                                      fat5__dptr w, int64_t T, int D, float eps, fat5__dptr xs) {
    long long T_ = T;
    void *args[] = {&y, &r, &x, &w, &T_, &D, &eps, &xs};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_rmsnorm_fwd", "T", T);
    if (D < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rmsnorm_fwd: D = %d", D);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_rmsnorm_fwd, fat5__gpu_blocks(T, FAT5__GPU_NORM_WARPS), 1, 1,
                            32 * FAT5__GPU_NORM_WARPS, 1, 1, 0, args);
}

// out[j] += sum over r < rows of in[r*D + j], in a fixed order (deterministic). Block 32x32
// (columns x row stride), one block per 32 columns.
static FAT5__UNUSED fat5_status fat5__gpu_colsum_f32(fat5_ctx *ctx, fat5__dptr out, fat5__dptr in, int rows,
                                                     int D) {
    void *args[] = {&out, &in, &rows, &D};
    if (rows < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_colsum_f32", "rows", rows);
    if (D < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_colsum_f32", "D", D);
    if (rows == 0 || D == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_colsum_f32, fat5__gpu_blocks(D, 32), 1, 1, 32, 32, 1, 0, args);
}

// dx (+)= r g - x r^3 mean(g x) with g = w dy (accumulate: added to dx); dw += sum_t dy x r;
// dxa (0: none) dx's final value in the activation dtype. dy, x, dx fp32 [T, D]. One warp per row,
// FAT5__GPU_NORM_WARPS per block. dw may be 0 (no weight gradient); else scratch holds at least
// FAT5__GPU_NORM_BWD_BLOCKS * D floats for the partial column sums: one row per block when the
// block's warps' rows fit in shared memory (FAT5__GPU_NORM_BWD_PER_SM blocks per multiprocessor,
// what the kernel's registers let run at once; at most 1024), else one
// per warp (at most 1024 warps); fat5__gpu_colsum_f32 then adds them into dw in a fixed order, so
// dw is deterministic.
static FAT5__UNUSED fat5_status fat5__gpu_rmsnorm_bwd(fat5_ctx *ctx, fat5__dptr dx, fat5__dptr dw,
                                                      fat5__dptr dy, fat5__dptr x, fat5__dptr w, fat5__dptr r,
                                                      int64_t T, int D, int accumulate, fat5__dptr scratch,
                                                      fat5__dptr dxa) {
    long long T_ = T;
    fat5__dptr part = dw ? scratch : 0;
    int64_t need = T / FAT5__GPU_NORM_WARPS + (T % FAT5__GPU_NORM_WARPS != 0), cap, rows;
    int in_smem = dw && (int64_t)D * 4 * FAT5__GPU_NORM_WARPS <= FAT5__GPU_SMEM_DEFAULT;
    unsigned smem = in_smem ? (unsigned)D * 4u * FAT5__GPU_NORM_WARPS : 0u;
    void *args[] = {&dx, &part, &dy, &x, &w, &r, &T_, &D, &accumulate, &dxa};
    fat5_status st;
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_rmsnorm_bwd", "T", T);
    if (D < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rmsnorm_bwd: D = %d", D);
    if (dw && !scratch)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rmsnorm_bwd: dw without scratch");
    if (T == 0) return FAT5_OK;
    if (!dw) cap = FAT5__GPU_MAX_BLOCKS;
    else if (in_smem)
        cap = FAT5__GPU_NORM_BWD_PER_SM * (int64_t)(ctx->gpu && ctx->gpu->sm_count > 0 ? ctx->gpu->sm_count : 132);
    else cap = FAT5__GPU_NORM_BWD_BLOCKS / FAT5__GPU_NORM_WARPS;
    if (cap > FAT5__GPU_NORM_BWD_BLOCKS) cap = FAT5__GPU_NORM_BWD_BLOCKS;
    if (need > cap) need = cap;
    st = fat5__dev_launch(ctx, FAT5__K_rmsnorm_bwd, (unsigned)need, 1, 1, 32 * FAT5__GPU_NORM_WARPS, 1, 1, smem,
                          args);
    if (st || !dw) return st;
    rows = in_smem ? need : need * FAT5__GPU_NORM_WARPS;
    return fat5__gpu_colsum_f32(ctx, dw, scratch, (int)rows, D);
}

// ----- ffn.cu -----

static fat5_status fat5__gpu_check_act(fat5_ctx *ctx, const char *op, int act) {
    if (act < FAT5_ACT_RELU || act > FAT5_ACT_SILU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: unknown activation %d", op, act);
    return FAT5_OK;
}

// h = act(a) * b (gated) or act(a) (b == 0); activation dtype; act a fat5_act value
static FAT5__UNUSED fat5_status fat5__gpu_act_fwd(fat5_ctx *ctx, fat5__dptr h, fat5__dptr a, fat5__dptr b,
                                                  int64_t n, int act) {
    long long n_ = n;
    void *args[] = {&h, &a, &b, &n_, &act};
    fat5_status st = fat5__gpu_check_act(ctx, "fat5__gpu_act_fwd", act);
    return st ? st : fat5__gpu_launch_vec(ctx, FAT5__K_act_fwd, "fat5__gpu_act_fwd", n, args);
}

// da = dh * b * act'(a), db = dh * act(a) (gated); da = dh * act'(a) (b == db == 0). db == dh works.
static FAT5__UNUSED fat5_status fat5__gpu_act_bwd(fat5_ctx *ctx, fat5__dptr da, fat5__dptr db, fat5__dptr dh,
                                                  fat5__dptr a, fat5__dptr b, int64_t n, int act) {
    long long n_ = n;
    void *args[] = {&da, &db, &dh, &a, &b, &n_, &act};
    fat5_status st = fat5__gpu_check_act(ctx, "fat5__gpu_act_bwd", act);
    return st ? st : fat5__gpu_launch_vec(ctx, FAT5__K_act_bwd, "fat5__gpu_act_bwd", n, args);
}

// ----- attention.cu -----
// Grid (ceil(T / W) clamped, H), block 32 W (W = FAT5__GPU_ATTN_WARPS tokens of one head per
// block), or 256 threads (the tiled path: 64 tokens of one head per block). Dynamic shared memory:
// `rows` fp32 rows of dk per warp (tiled: the kernels' tiles), plus the position scheme's part:
// T5, the head's bias column, the bucket table and (dq) the bias-gradient accumulator when they fit
// (the kernels read the size they were given and fall back to global memory otherwise); FIRE, the
// head's MLP rows (16 W bytes, always) and (dq) the gradient accumulators; ALiBi, nothing.
// Each scheme has its own kernels (fat5_attn_*_alibi, fat5_attn_*_fire), picked from the kind,
// and so has each scheme with an encoder pattern (fat5_attn_*_pat: a window, maybe block-global or
// transient-global keys; g and cu_g reach only these). The pattern kernels visit the window's,
// the prefix's and the global rows' tiles only: O(T (2 r + 1 + globals)) scores, O(T) memory;
// with transient-global keys and their own table, dq's bias-gradient partial rows are 2 nb H wide
// (the global table's after T5's, as dbias [2, nb, H]).

// the scheme of an attention kind: 0 T5 buckets (or no bias), 1 ALiBi, 2 FIRE
static int fat5__gpu_attn_scheme(int kind) {
    return (kind & FAT5__ATTN_FIRE) ? 2 : (kind & FAT5__ATTN_ALIBI) ? 1 : 0;
}

// whether a kind has an encoder pattern (a window, with or without global keys)
static int fat5__gpu_attn_pattern(int kind) {
    return FAT5__ATTN_RADIUS(kind) >= 0 || (kind & (FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED));
}

// the kernel of op kernel `k0` (the T5 one, e.g. FAT5__K_attn_fwd) for the kind's scheme and pattern
static int fat5__gpu_attn_kernel(int k0, int kind) {
    static const int alibi[] = {FAT5__K_attn_fwd_alibi, FAT5__K_attn_bwd_dq_alibi, FAT5__K_attn_bwd_dkv_alibi,
                                FAT5__K_attn_decode_alibi};
    static const int fire[] = {FAT5__K_attn_fwd_fire, FAT5__K_attn_bwd_dq_fire, FAT5__K_attn_bwd_dkv_fire,
                               FAT5__K_attn_decode_fire};
    static const int pat[3][3] = {{FAT5__K_attn_fwd_pat, FAT5__K_attn_bwd_dq_pat, FAT5__K_attn_bwd_dkv_pat},
                                  {FAT5__K_attn_fwd_alibi_pat, FAT5__K_attn_bwd_dq_alibi_pat,
                                   FAT5__K_attn_bwd_dkv_alibi_pat},
                                  {FAT5__K_attn_fwd_fire_pat, FAT5__K_attn_bwd_dq_fire_pat,
                                   FAT5__K_attn_bwd_dkv_fire_pat}};
    int i = k0 == FAT5__K_attn_fwd ? 0 : k0 == FAT5__K_attn_bwd_dq ? 1 : k0 == FAT5__K_attn_bwd_dkv ? 2 : 3;
    int s = fat5__gpu_attn_scheme(kind);
    if (i < 3 && fat5__gpu_attn_pattern(kind)) return pat[s][i];
    return s == 2 ? fire[i] : s == 1 ? alibi[i] : k0;
}

// The kind (mask | scheme bits | pattern, fat5__attn_kind) and what it needs. T5 (no scheme bit):
// bias the [nb, H] table ([2, nb, H] with transient-global keys and their own table) or 0, lut the
// buckets of distances < max_distance. ALiBi: bias and lut unused; asymmetric only with the
// bidirectional mask and an even head count. FIRE: bias its parameter block, nb its MLP width
// W >= 1, max_distance its L0 >= 0. Cross-attention has no position scheme. The pattern (g, cu_g)
// as fat5__attn_pattern_check says; cu_g is device memory.
static fat5_status fat5__gpu_attn_check(fat5_ctx *ctx, const char *op, int64_t T, int H, int dk, int kind,
                                        fat5__dptr bias, fat5__dptr lut, int nb, int max_distance, int g,
                                        fat5__dptr cu_g) {
    int mask = kind & FAT5__ATTN_MASK;
    int scheme = kind & ((1 << FAT5__ATTN_WINDOW_SHIFT) - 1) &
                 ~(FAT5__ATTN_MASK | FAT5__ATTN_PREFIX | FAT5__ATTN_TGLOBAL | FAT5__ATTN_GSHARED);
    fat5_status st = fat5__attn_pattern_check(ctx, op, kind, g, cu_g);
    if (st) return st;
    if (FAT5__ATTN_RADIUS(kind) > FAT5__ATTN_MAX_RADIUS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: a window of radius %d (at most %d)", op, kind,
                         FAT5__ATTN_RADIUS(kind), FAT5__ATTN_MAX_RADIUS);
    if (T < 0) return fat5__gpu_bad_count(ctx, op, "T", T);
    if (H < 1 || H > 65535) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %d heads (1..65535)", op, H);
    if (dk < 1 || dk > FAT5__GPU_ATTN_MAX_DK)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: head dim %d (1..%d)", op, dk, FAT5__GPU_ATTN_MAX_DK);
    if (kind < 0 || mask == FAT5__ATTN_MASK ||
        (scheme & ~(FAT5__ATTN_ALIBI | FAT5__ATTN_ALIBI_ASYM | FAT5__ATTN_FIRE)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: attention kind %d", op, kind);
    if (scheme && mask == FAT5__ATTN_CROSS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: cross-attention has no position scheme", op, kind);
    if ((kind & FAT5__ATTN_ALIBI) && (kind & FAT5__ATTN_FIRE))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: ALiBi and FIRE at once", op, kind);
    if ((kind & FAT5__ATTN_ALIBI_ASYM) && (!(kind & FAT5__ATTN_ALIBI) || mask != FAT5__ATTN_BIDIR || H % 2))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: kind %d: asymmetric ALiBi needs ALiBi, the bidirectional mask and an even head count "
                         "(H = %d)",
                         op, kind, H);
    if (kind & FAT5__ATTN_FIRE) {
        if (!bias || nb < 1 || max_distance < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: FIRE with parameters %s, MLP width %d, L0 %d", op,
                             bias ? "given" : "missing", nb, max_distance);
        return FAT5_OK;
    }
    if (kind & FAT5__ATTN_ALIBI) return FAT5_OK;
    if (bias && (nb < (mask == FAT5__ATTN_BIDIR ? 2 : 1) || max_distance < 0 || (max_distance > 0 && !lut)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: bias with %d buckets, max distance %d, lut %s", op,
                         nb, max_distance, lut ? "given" : "missing");
    // the kernels' bucket of a distance n >= max_distance is the last one: fat5__rel_bucket's only
    // when max_distance covers its exact buckets (n < nb/4 bidirectional, nb/2 otherwise)
    if (bias && max_distance < (mask == FAT5__ATTN_BIDIR ? nb / 2 / 2 : nb / 2))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "%s: %d buckets with max distance %d: the GPU kernels need a max distance of at least "
                         "%d (the exact buckets)",
                         op, nb, max_distance, mask == FAT5__ATTN_BIDIR ? nb / 2 / 2 : nb / 2);
    return FAT5_OK;
}

// dynamic shared memory of a per-warp T5 attention launch (bytes)
static unsigned fat5__gpu_attn_smem(int rows, int dk, fat5__dptr bias, int nb, int max_distance, int extra) {
    int64_t base = (int64_t)rows * FAT5__GPU_ATTN_WARPS * dk * 4;
    int64_t tables = bias ? ((int64_t)nb + max_distance + extra) * 4 : 0;
    return (unsigned)(base + tables <= FAT5__GPU_SMEM_DEFAULT ? base + tables : base);
}

// FIRE's part of an attention launch's dynamic shared memory after `base` bytes of the kernel's own
// rows (fat5_attn_pos): base rounded up to 16, the head's MLP rows (16 W bytes), then for dq's
// gradient `groups` [W][3] accumulators and 32 floats (0 groups: no gradient). Total bytes.
static int64_t fat5__gpu_fire_smem(int64_t base, int W, int64_t groups) {
    int64_t b = (base + 15) / 16 * 16 + 16 * (int64_t)W;
    return groups ? b + (3 * groups * W + 32) * 4 : b;
}

static fat5_status fat5__gpu_fire_too_big(fat5_ctx *ctx, const char *op, int W, int64_t need, int64_t optin) {
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                     "%s: FIRE's MLP width %d needs %lld bytes of shared memory, the device allows %lld", op, W,
                     (long long)need, (long long)optin);
}

// Whether attn_fwd runs on tensor cores (attention_tc.cu), and then its shared memory (bytes,
// without the optional table cache); 0: the FMA kernels. Needs bf16 activations, FAT5_ATTN_TC not
// 0, dk a multiple of 8 up to 128, 16-byte aligned rows, a T5 max_distance up to 4096 (the bias
// by distance is rebuilt in every block), and room: BM (128 for dk <= 64, else 64) query rows and
// two K/V buffers of 64 rows, rows of dkp + 8 bf16 (dkp 64 or 128); T5's bias by distance
// (2 max(max_distance, 1) + 1 floats); then fat5_attn_pos's part (FIRE's rows).
static FAT5__UNUSED int64_t fat5__gpu_attn_fwd_tc_smem(const fat5_ctx *ctx, fat5__dptr o, fat5__dptr q, fat5__dptr k,
                                                       fat5__dptr v, int64_t Tq, int dk, int kind, fat5__dptr bias,
                                                       int nb, int max_distance) {
    int scheme = fat5__gpu_attn_scheme(kind);
    int64_t bm = dk <= 64 ? 128 : 64, dkp = dk <= 64 ? 64 : 128, base;
    if (!ctx->gpu || !ctx->gpu->attn_tc || fat5__dev_act_size(ctx) != 2 || dk % 8 || dk > 128 ||
        ((o | q | k | v) & 15) || (Tq + bm - 1) / bm > FAT5__GPU_MAX_BLOCKS)
        return 0;
    if (scheme == 0 && bias && max_distance > 4096) return 0;
    base = (bm + 256) * (dkp + 8) * 2;
    if (scheme == 0 && bias) base += (2 * (int64_t)(max_distance > 0 ? max_distance : 1) + 1) * 4;
    if (scheme == 2) base = fat5__gpu_fire_smem(base, nb, 0);
    return base <= ctx->gpu->smem_optin ? base : 0;
}

// Whether attn_bwd_dq (dkv 0) or attn_bwd_dkv (dkv 1) runs on tensor cores (attention_tc_bwd.cu),
// and then its shared memory (bytes, without the optional table cache); 0: the FMA kernels. The
// forward's conditions (fat5__gpu_attn_fwd_tc_smem) on every row pointer; dq not with FIRE (its
// parameter gradient stays on the FMA kernel), nor with a T5 bias gradient of more than 512
// buckets. Both: six tiles of 64 rows of dkp + 8 bf16 (dkp 64
// or 128), T5's bias by distance (2 M + 1 floats, M = max(max_distance, 1)); dq with a T5 bias
// gradient, the 4 warps' gradients by distance and their buckets (5 (2 M + 1) floats, twice in the
// pattern kernels);
// dkv the tiles' lse and delta (256 floats) and 8 ints; then fat5_attn_pos's part (FIRE's rows).
static FAT5__UNUSED int64_t fat5__gpu_attn_bwd_tc_smem(const fat5_ctx *ctx, int dkv, fat5__dptr a, fat5__dptr b,
                                                       fat5__dptr q, fat5__dptr k, fat5__dptr v, fat5__dptr dout,
                                                       int64_t T, int dk, int kind, fat5__dptr bias, int nb,
                                                       int max_distance, int dbias) {
    int scheme = fat5__gpu_attn_scheme(kind);
    int64_t dkp = dk <= 64 ? 64 : 128, M = max_distance > 0 ? max_distance : 1, base;
    if (!ctx->gpu || !ctx->gpu->attn_tc || fat5__dev_act_size(ctx) != 2 || dk % 8 || dk > 128 ||
        ((a | b | q | k | v | dout) & 15) || (T + 63) / 64 > FAT5__GPU_MAX_BLOCKS || (!dkv && scheme == 2))
        return 0;
    if (scheme == 0 && bias && max_distance > 4096) return 0;
    if (!dkv && scheme == 0 && bias && dbias && nb > 512) return 0;  // the block's bucket sums in its tiles' space
    base = 6 * 64 * (dkp + 8) * 2;
    if (scheme == 0 && bias) base += (2 * M + 1) * 4;
    if (dkv) base += (256 + 8) * 4;
    if (!dkv && scheme == 0 && bias && dbias) base += 5 * (2 * M + 1) * 4 * (fat5__gpu_attn_pattern(kind) ? 2 : 1);
    if (scheme == 2) base = fat5__gpu_fire_smem(base, nb, 0);
    return base <= ctx->gpu->smem_optin ? base : 0;
}

// o = softmax(q k^T + bias) v per sequence and head (T5: no 1/sqrt(dk)); lse [Tq, H] saved.
// T5: bias [nb, H] or 0 (cross), lut [max_distance] from fat5__rel_bucket for this kind; ALiBi and
// FIRE: the bias of each score computed in the kernel (fat5__gpu_attn_check). A pattern in the
// kind (window, block-global prefix of g tokens, or transient-global keys in k, v rows cu_g[s] ..
// cu_g[s + 1] with their table after T5's in bias unless GSHARED) takes the _pat kernels, the
// same launch; each query visits its window, the prefix and its sequence's globals only.
static FAT5__UNUSED fat5_status fat5__gpu_attn_fwd(fat5_ctx *ctx, fat5__dptr o, fat5__dptr lse, fat5__dptr q,
                                                   fat5__dptr k, fat5__dptr v, fat5__dptr bias,
                                                   fat5__dptr lut, fat5__dptr cu_q, fat5__dptr cu_k,
                                                   fat5__dptr q_seq, int64_t Tq, int H, int dk, int kind,
                                                   int nb, int max_distance, int g, fat5__dptr cu_g) {
    long long Tq_ = Tq;
    void *args[] = {&o,    &lse,   &q,   &k, &v,  &bias, &lut,          &cu_q,
                    &cu_k, &q_seq, &Tq_, &H, &dk, &kind, &nb,  &max_distance, &g, &cu_g};
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_fwd, kind);
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT, base, need;
    fat5_status st =
        fat5__gpu_attn_check(ctx, "fat5__gpu_attn_fwd", Tq, H, dk, kind, bias, lut, nb, max_distance, g, cu_g);
    if (st || Tq == 0) return st;
    if ((need = fat5__gpu_attn_fwd_tc_smem(ctx, o, q, k, v, Tq, dk, kind, bias, nb, max_distance)) > 0) {
        // the kernels of a family are in the order of the kernel list: T5, _pat, _alibi, _alibi_pat, ...
        int tk = (dk <= 64 ? FAT5__K_attn_fwd_tc64 : FAT5__K_attn_fwd_tc128) + 2 * scheme +
                 (fat5__gpu_attn_pattern(kind) ? 1 : 0);
        int64_t bm = dk <= 64 ? 128 : 64, tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0;
        return fat5__dev_launch(ctx, tk, (unsigned)((Tq + bm - 1) / bm), (unsigned)H, 1, 128, 1, 1,
                                (unsigned)(need + tab <= optin ? need + tab : need), args);
    }
    if (dk <= 128) {  // tiled: 64 queries x 256 threads a block; Qt [dkp][68], P [64][68], K, V [dkp][65]
        int64_t dkp = dk <= 16 ? 16 : dk <= 32 ? 32 : dk <= 64 ? 64 : 128;
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0, need;
        base = (dkp * (68 + 2 * 65) + 64 * 68) * 4;
        need = scheme == 2 ? fat5__gpu_fire_smem(base, nb, 0) : base;
        if (need <= optin)
            return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tq, 64), (unsigned)H, 1, 256, 1, 1,
                                    (unsigned)(need + tab <= optin ? need + tab : need), args);
    }
    base = (int64_t)FAT5__GPU_ATTN_WARPS * dk * 4;
    if (scheme == 2 && fat5__gpu_fire_smem(base, nb, 0) > optin)
        return fat5__gpu_fire_too_big(ctx, "fat5__gpu_attn_fwd", nb, fat5__gpu_fire_smem(base, nb, 0), optin);
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tq, FAT5__GPU_ATTN_WARPS), (unsigned)H, 1,
                            32 * FAT5__GPU_ATTN_WARPS, 1, 1,
                            scheme == 2   ? (unsigned)fat5__gpu_fire_smem(base, nb, 0)
                            : scheme == 1 ? (unsigned)base
                                          : fat5__gpu_attn_smem(1, dk, bias, nb, max_distance, 0),
                            args);
}

// delta[t*H+h] = sum_d dout o over head h's columns; one warp per (token, head), 8 warps a block
static FAT5__UNUSED fat5_status fat5__gpu_attn_bwd_delta(fat5_ctx *ctx, fat5__dptr delta, fat5__dptr o,
                                                         fat5__dptr dout, int64_t Tq, int H, int dk) {
    long long Tq_ = Tq;
    void *args[] = {&delta, &o, &dout, &Tq_, &H, &dk};
    if (Tq < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_attn_bwd_delta", "T", Tq);
    if (H < 1 || dk < 1 || Tq > INT64_MAX / H)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_attn_bwd_delta: H = %d, dk = %d", H, dk);
    if (Tq == 0) return FAT5_OK;
    {   // one thread per 16-byte group when a row is a power of two of them up to 32 (as the kernel's
        // fat5_attn_delta_groups; unaligned pointers take its warp-per-row loop, grid-stride), else a
        // warp per row
        int e = 16 / (int)fat5__dev_act_size(ctx), G = dk / e;
        int64_t per_block = dk % e == 0 && G <= 32 && (G & (G - 1)) == 0 ? 256 / G : 8;
        return fat5__dev_launch(ctx, FAT5__K_attn_bwd_delta, fat5__gpu_blocks(Tq * H, per_block), 1, 1, 256, 1, 1,
                                0, args);
    }
}

// FIRE's gradient block g (FAT5__FIRE_NUMEL(H, W) floats) += per-head shares [H, FAT5__FIRE_SHARES(W)],
// the shared parts summed in head order (in double, as fat5__cpu_fire_reduce: the same bits); one
// thread per element of g, 256 a block
static FAT5__UNUSED fat5_status fat5__gpu_fire_reduce(fat5_ctx *ctx, fat5__dptr g, fat5__dptr shares, int H, int W) {
    void *args[] = {&g, &shares, &H, &W};
    if (H < 1 || W < 1 || (int64_t)H * FAT5__FIRE_SHARES(W) > INT_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_fire_reduce: %d heads, MLP width %d", H, W);
    if (!g || !shares) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_fire_reduce: a NULL buffer");
    return fat5__dev_launch(ctx, FAT5__K_fire_reduce, fat5__gpu_blocks(FAT5__FIRE_NUMEL(H, W), 256), 1, 1, 256, 1, 1,
                            0, args);
}

// dq (written) and the bias gradient, deterministic (same inputs, same bits; no atomics); delta from
// fat5__gpu_attn_bwd_delta, lse from the forward.
// T5: dbias [nb, H] += ds per (bucket, head) (dbias 0: not wanted; it needs a bias). scratch holds
// at least FAT5__GPU_DBIAS_BLOCKS * nb * H floats: the grid (x clamped to FAT5__GPU_DBIAS_BLOCKS)
// writes one row of per-bucket partial sums per block there, then fat5__gpu_colsum_f32 adds the
// rows into dbias in a fixed order. Transient-global keys with their own table: dbias is
// [2, nb, H] (T5's gradient, then the global table's) and the rows are 2 nb H wide (scratch
// FAT5__GPU_DBIAS_BLOCKS * 2 nb H floats); with GSHARED the global keys add to T5's buckets.
// FIRE: dbias is FIRE's gradient block (FAT5__FIRE_NUMEL(H, W) floats, +=). scratch holds
// (FAT5__GPU_DBIAS_BLOCKS + 1) H FAT5__FIRE_SHARES(W) floats: block b writes its per-head shares
// to row b ([H][3 W + 3], fat5__fire_grad's layout), fat5__gpu_colsum_f32 sums the rows in a fixed
// order into the last row (zeroed first), and fat5__gpu_fire_reduce adds those [H, 3 W + 3] shares
// into dbias (in head order).
// ALiBi has no parameters: dbias is ignored (as on the CPU).
static FAT5__UNUSED fat5_status fat5__gpu_attn_bwd_dq(fat5_ctx *ctx, fat5__dptr dq, fat5__dptr dbias,
                                                      fat5__dptr dout, fat5__dptr lse, fat5__dptr delta,
                                                      fat5__dptr q, fat5__dptr k, fat5__dptr v,
                                                      fat5__dptr bias, fat5__dptr lut, fat5__dptr cu_q,
                                                      fat5__dptr cu_k, fat5__dptr q_seq, int64_t Tq, int H,
                                                      int dk, int kind, int nb, int max_distance, int g,
                                                      fat5__dptr cu_g, fat5__dptr scratch) {
    static const char *const op = "fat5__gpu_attn_bwd_dq";
    long long Tq_ = Tq;
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_bwd_dq, kind);
    fat5__dptr dbias_ = scheme == 1 ? 0 : dbias, part = dbias_ ? scratch : 0;
    void *args[] = {&dq,   &part, &dout,  &lse, &delta, &q,  &k,    &v,  &bias,        &lut,
                    &cu_q, &cu_k, &q_seq, &Tq_, &H,     &dk, &kind, &nb, &max_distance, &g, &cu_g};
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT;
    // buckets of T5's gradient rows: nb, or 2 nb with transient-global keys and their own table
    int64_t nbt = (int64_t)nb * ((kind & FAT5__ATTN_TGLOBAL) && !(kind & FAT5__ATTN_GSHARED) ? 2 : 1);
    unsigned gx = 0, smem;
    int kernel_done = 0;
    int64_t need;
    fat5_status st = fat5__gpu_attn_check(ctx, op, Tq, H, dk, kind, bias, lut, nb, max_distance, g, cu_g);
    if (st || Tq == 0) return st;
    if (dbias_ && !bias) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a bias gradient without a bias", op);
    if (dbias_ && !scratch) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a bias gradient without scratch", op);
    if ((need = fat5__gpu_attn_bwd_tc_smem(ctx, 0, dq, 0, q, k, v, dout, Tq, dk, kind, bias, nb, max_distance,
                                           dbias_ != 0)) > 0) {
        // tensor cores: 64 queries x 128 threads a block, grid-stride over the tiles with a gradient
        int tk = (dk <= 64 ? FAT5__K_attn_bwd_dq_tc64 : FAT5__K_attn_bwd_dq_tc128) + 2 * scheme +
                 (fat5__gpu_attn_pattern(kind) ? 1 : 0);
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0;
        gx = fat5__gpu_blocks(Tq, 64);
        if (dbias_) {
            // a block sums its bias gradient once, at its end: half as many blocks as tiles, each
            // taking a tile and its mirror (balanced under a causal mask)
            gx = (gx + 1) / 2;
            if (gx > FAT5__GPU_DBIAS_BLOCKS) gx = FAT5__GPU_DBIAS_BLOCKS;
        }
        st = fat5__dev_launch(ctx, tk, gx, (unsigned)H, 1, 128, 1, 1,
                              (unsigned)(need + tab <= optin ? need + tab : need), args);
        kernel_done = 1;
    }
    if (!kernel_done && dk <= 64) {  // tiled: 64 queries x 256 threads; Q, dout [dkp][68], ds [64][68], K, V [dkp][65]
        int64_t dkp = dk <= 16 ? 16 : dk <= 32 ? 32 : 64;
        int64_t base = (dkp * (2 * 68 + 2 * 65) + 64 * 68) * 4, tab = 0;
        if (scheme == 2) {  // FIRE: the MLP rows; with the gradient, a u tile [64][68] and G = 256 / W groups
            int64_t groups = dbias_ ? (nb < 256 ? 256 / nb : 1) : 0;
            need = fat5__gpu_fire_smem(base + (dbias_ ? 64 * 68 * 4 : 0), nb, groups);
        } else {
            tab = scheme == 0 && bias ? ((int64_t)nb + max_distance + (dbias_ ? 8 * nbt : 0)) * 4 : 0;
            // T5 with dbias: the tables and the 8 warps' accumulators must be in shared memory
            need = scheme == 0 && dbias_ ? base + tab : base;
            if (need == base + tab) tab = 0;
        }
        if (need <= optin) {
            gx = fat5__gpu_blocks(Tq, 64);
            if (dbias_ && gx > FAT5__GPU_DBIAS_BLOCKS) gx = FAT5__GPU_DBIAS_BLOCKS;
            st = fat5__dev_launch(ctx, kernel, gx, (unsigned)H, 1, 256, 1, 1,
                                  (unsigned)(need + tab <= optin ? need + tab : need), args);
            kernel_done = 1;
        }
    }
    if (!kernel_done) {
        int64_t base = (int64_t)2 * FAT5__GPU_ATTN_WARPS * dk * 4;
        gx = fat5__gpu_blocks(Tq, FAT5__GPU_ATTN_WARPS);
        if (dbias_ && gx > FAT5__GPU_DBIAS_BLOCKS) gx = FAT5__GPU_DBIAS_BLOCKS;
        if (scheme == 2) {
            need = fat5__gpu_fire_smem(base, nb, dbias_ ? FAT5__GPU_ATTN_WARPS : 0);
            if (need > optin) return fat5__gpu_fire_too_big(ctx, op, nb, need, optin);
            smem = (unsigned)need;
        } else if (scheme == 1) {
            smem = (unsigned)base;
        } else if (dbias_) {
            need = base + ((int64_t)nb + max_distance + (int64_t)FAT5__GPU_ATTN_WARPS * nbt) * 4;
            if (need > optin)
                return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                                 "%s: %d buckets and max distance %d need %lld bytes of shared memory for the bias "
                                 "gradient, the device allows %lld",
                                 op, nb, max_distance, (long long)need, (long long)optin);
            smem = (unsigned)need;
        } else {
            smem = fat5__gpu_attn_smem(2, dk, bias, nb, max_distance, 0);
        }
        st = fat5__dev_launch(ctx, kernel, gx, (unsigned)H, 1, 32 * FAT5__GPU_ATTN_WARPS, 1, 1, smem, args);
    }
    if (st || !dbias_) return st;
    if (scheme == 2) {  // the blocks' rows summed into the last row, then the heads into dbias
        int64_t row = (int64_t)H * FAT5__FIRE_SHARES(nb);
        fat5__dptr sum = scratch + (fat5__dptr)((int64_t)FAT5__GPU_DBIAS_BLOCKS * row * 4);
        if (row > INT_MAX) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: FIRE's shares of %d heads", op, H);
        if ((st = fat5__gpu_fill_f32(ctx, sum, 0.0f, row)) != FAT5_OK ||
            (st = fat5__gpu_colsum_f32(ctx, sum, scratch, (int)gx, (int)row)) != FAT5_OK)
            return st;
        return fat5__gpu_fire_reduce(ctx, dbias_, sum, H, nb);
    }
    if (nbt * H > INT_MAX) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %lld buckets of %d heads", op,
                                            (long long)nbt, H);
    return fat5__gpu_colsum_f32(ctx, dbias_, scratch, (int)gx, (int)(nbt * H));
}

// dk, dv (written): one warp per (key, head) or a tile of 64 keys, over the queries that see the
// key; k_seq[j] is the sequence of key row j. With transient-global keys, Tk counts their rows too
// (k_seq maps them to their sequence; row j of s is a global iff cu_g[s] <= j < cu_g[s + 1]): a
// global's dk, dv sum over every query of its sequence.
static FAT5__UNUSED fat5_status fat5__gpu_attn_bwd_dkv(fat5_ctx *ctx, fat5__dptr dk_, fat5__dptr dv,
                                                       fat5__dptr dout, fat5__dptr lse, fat5__dptr delta,
                                                       fat5__dptr q, fat5__dptr k, fat5__dptr v,
                                                       fat5__dptr bias, fat5__dptr lut, fat5__dptr cu_q,
                                                       fat5__dptr cu_k, fat5__dptr k_seq, int64_t Tk, int H,
                                                       int dk, int kind, int nb, int max_distance, int g,
                                                       fat5__dptr cu_g) {
    long long Tk_ = Tk;
    void *args[] = {&dk_,  &dv,   &dout,  &lse, &delta, &q,  &k,    &v,  &bias,        &lut,
                    &cu_q, &cu_k, &k_seq, &Tk_, &H,     &dk, &kind, &nb, &max_distance, &g, &cu_g};
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_bwd_dkv, kind);
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT, base;
    fat5_status st =
        fat5__gpu_attn_check(ctx, "fat5__gpu_attn_bwd_dkv", Tk, H, dk, kind, bias, lut, nb, max_distance, g,
                             cu_g);
    if (st || Tk == 0) return st;
    if ((base = fat5__gpu_attn_bwd_tc_smem(ctx, 1, dk_, dv, q, k, v, dout, Tk, dk, kind, bias, nb, max_distance,
                                           0)) > 0) {
        // tensor cores: 64 keys x 128 threads a block
        int tk = (dk <= 64 ? FAT5__K_attn_bwd_dkv_tc64 : FAT5__K_attn_bwd_dkv_tc128) + 2 * scheme +
                 (fat5__gpu_attn_pattern(kind) ? 1 : 0);
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0;
        return fat5__dev_launch(ctx, tk, fat5__gpu_blocks(Tk, 64), (unsigned)H, 1, 128, 1, 1,
                                (unsigned)(base + tab <= optin ? base + tab : base), args);
    }
    if (dk <= 64) {  // tiled: 64 keys x 256 threads; K, V [dkp][68], p, ds [64][68], Q, dout [dkp][65]
        int64_t dkp = dk <= 16 ? 16 : dk <= 32 ? 32 : 64;
        int64_t tab = scheme == 0 && bias ? ((int64_t)nb + max_distance) * 4 : 0, need;
        base = (dkp * (2 * 68 + 2 * 65) + 128 * 68) * 4;
        need = scheme == 2 ? fat5__gpu_fire_smem(base, nb, 0) : base;
        if (need <= optin)
            return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tk, 64), (unsigned)H, 1, 256, 1, 1,
                                    (unsigned)(need + tab <= optin ? need + tab : need), args);
    }
    base = (int64_t)2 * FAT5__GPU_ATTN_WARPS * dk * 4;
    if (scheme == 2 && fat5__gpu_fire_smem(base, nb, 0) > optin)
        return fat5__gpu_fire_too_big(ctx, "fat5__gpu_attn_bwd_dkv", nb, fat5__gpu_fire_smem(base, nb, 0), optin);
    return fat5__dev_launch(ctx, kernel, fat5__gpu_blocks(Tk, FAT5__GPU_ATTN_WARPS), (unsigned)H, 1,
                            32 * FAT5__GPU_ATTN_WARPS, 1, 1,
                            scheme == 2   ? (unsigned)fat5__gpu_fire_smem(base, nb, 0)
                            : scheme == 1 ? (unsigned)base
                                          : fat5__gpu_attn_smem(2, dk, bias, nb, max_distance, 0),
                            args);
}

// ----- xent.cu: one block of 256 threads per row over the vocabulary -----

// ---- decoding (kernels/decode.cu) ----
// The decode position pos and the cross lengths kv_len are device memory that only the kernels
// read: nothing here reads device data, synchronises, or allocates, and every grid depends on host
// sizes alone, so these launches can be captured into a CUDA graph and replayed as pos advances.

// the split count of fat5__gpu_attn_decode for a key count bounded by max_keys (1..32)
static int fat5__gpu_decode_splits(int max_keys) {
    int64_t s = ((int64_t)max_keys + FAT5__DECODE_SPLIT_KEYS - 1) / FAT5__DECODE_SPLIT_KEYS;
    return s < 1 ? 1 : s > FAT5__DECODE_MAX_SPLITS ? FAT5__DECODE_MAX_SPLITS : (int)s;
}

// o[i] = softmax_j(q_i . k_j + bias) v_j per head against entry i's cache row (see
// fat5__cpu_attn_decode); the causal kinds may carry ALiBi or FIRE (never asymmetric ALiBi), whose
// bias of key j is that of a query at position pos[0]. Flash-decoding: the keys of each (entry, head) are cut into S =
// ceil(max_keys / FAT5__DECODE_SPLIT_KEYS) splits (at most 32), one warp each (phase 0, grid
// (ceil(S / W), H, n clamped to 65535), W = min(S, 4) warps a block); with S > 1 each warp writes its
// partial (max, sum, acc[dk]) to scratch and phase 1 (one warp per (entry, head), 4 warps a block)
// combines the partials in split order: deterministic, the same bits every run. Where only one split
// has keys at run time, phase 0 writes o directly. Head dims of 8 or 16 16-byte vectors (bf16 64 and
// 128, fp32 32 and 64) with 16-byte aligned caches and T5 buckets, no bias or ALiBi take phase 2
// instead: one launch, a block per (entry, head) of min(S, 16) warps (one split each), the partials
// merged in shared memory in the same split order; no scratch.
static FAT5__UNUSED fat5_status fat5__gpu_attn_decode(fat5_ctx *ctx, fat5__dptr o, fat5__dptr q, fat5__dptr k,
                                                      fat5__dptr v, fat5__dptr bias, fat5__dptr lut, fat5__dptr rows,
                                                      fat5__dptr kv_off, fat5__dptr kv_len, fat5__dptr pos, int64_t n,
                                                      int H, int dk, int kind, int nb, int max_distance, int max_keys,
                                                      fat5__dptr scratch) {
    static const char *const op = "fat5__gpu_attn_decode";
    long long n_ = n;
    int splits = fat5__gpu_decode_splits(max_keys), phase0 = 0, phase1 = 1;
    int warps = splits < 4 ? splits : 4, mask = kind & FAT5__ATTN_MASK, vec_e = 16 / (int)fat5__dev_act_size(ctx);
    int scheme = fat5__gpu_attn_scheme(kind), kernel = fat5__gpu_attn_kernel(FAT5__K_attn_decode, kind);
    int64_t optin = ctx->gpu ? ctx->gpu->smem_optin : FAT5__GPU_SMEM_DEFAULT;
    int64_t smem = scheme == 2 ? fat5__gpu_fire_smem((int64_t)warps * dk * 4, nb, 0) : (int64_t)warps * dk * 4;
    fat5__dptr bias_ = mask == FAT5__ATTN_CAUSAL ? bias : 0;
    void *a0[] = {&o,      &scratch, &q,  &k,  &v,    &bias_, &lut,          &rows,   &kv_off, &kv_len,
                  &pos,    &n_,      &H,  &dk, &kind, &nb,    &max_distance, &splits, &phase0};
    void *a1[] = {&o,      &scratch, &q,  &k,  &v,    &bias_, &lut,          &rows,   &kv_off, &kv_len,
                  &pos,    &n_,      &H,  &dk, &kind, &nb,    &max_distance, &splits, &phase1};
    fat5_status st = fat5__gpu_attn_check(ctx, op, n, H, dk, kind, bias_, lut, nb, max_distance, 0, 0);
    if (st || n == 0) return st;
    if (fat5__gpu_attn_pattern(kind))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d: decoding takes no attention pattern", op, kind);
    if (mask == FAT5__ATTN_BIDIR || (kind & FAT5__ATTN_ALIBI_ASYM))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind %d (cross or causal only, never asymmetric ALiBi)", op,
                         kind);
    if (scheme == 2 && smem > optin) return fat5__gpu_fire_too_big(ctx, op, nb, smem, optin);
    if (n > INT64_MAX / ((int64_t)H * FAT5__DECODE_MAX_SPLITS * (dk + 2)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %lld entries", op, (long long)n);
    if (!o || !q || !k || !v || !rows || !kv_off || !pos || (kind == FAT5__ATTN_CROSS && !kv_len))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: a NULL buffer", op);
    if (scheme != 2 && (dk == 8 * vec_e || dk == 16 * vec_e) && !((k | v) & 15)) {
        // one launch: a block per (entry, head), a warp per split (at most 16), merged in shared memory
        int bs = splits < FAT5__DECODE_BLOCK_SPLITS ? splits : FAT5__DECODE_BLOCK_SPLITS, phase2 = 2;
        int lim = fat5__dev_max_threads(ctx, kernel) / 32;   // the kernel's registers may allow fewer
        if (lim >= 1 && bs > lim) bs = lim;
        void *a2[] = {&o,   &scratch, &q,  &k,  &v,    &bias_, &lut,          &rows, &kv_off, &kv_len,
                      &pos, &n_,      &H,  &dk, &kind, &nb,    &max_distance, &bs,   &phase2};
        return fat5__dev_launch(ctx, kernel, 1, (unsigned)H, (unsigned)(n < 65535 ? n : 65535), 32 * (unsigned)bs, 1, 1,
                                (unsigned)((int64_t)bs * (2 * dk + 2) * 4), a2);
    }
    if (splits > 1 && !scratch)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %d splits for max_keys = %d need scratch", op, splits,
                         max_keys);
    st = fat5__dev_launch(ctx, kernel, (unsigned)((splits + warps - 1) / warps), (unsigned)H,
                          (unsigned)(n < 65535 ? n : 65535), 32 * (unsigned)warps, 1, 1, (unsigned)smem, a0);
    if (st || splits == 1) return st;
    return fat5__dev_launch(ctx, FAT5__K_attn_decode, fat5__gpu_blocks(n * H, 4), 1, 1, 128, 1, 1, 0, a1);
}

// kc, vc row kv_off[rows[i]] + pos[0] = k, v row i (rows of I activation elements); 256 threads a
// block over the n I elements
static FAT5__UNUSED fat5_status fat5__gpu_cache_write(fat5_ctx *ctx, fat5__dptr kc, fat5__dptr vc, fat5__dptr k,
                                                      fat5__dptr v, fat5__dptr rows, fat5__dptr kv_off, fat5__dptr pos,
                                                      int64_t n, int I) {
    long long n_ = n;
    void *args[] = {&kc, &vc, &k, &v, &rows, &kv_off, &pos, &n_, &I};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_cache_write", "n", n);
    if (I < 1 || n > INT64_MAX / I)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_cache_write: rows of %d elements", I);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_cache_write, fat5__gpu_blocks(n * I, 256), 1, 1, 256, 1, 1, 0, args);
}

// rmsnorm, then the products with up to three weights (or the gated activation), optionally
// writing the second and third outputs into cache rows: see fat5__cpu_norm_mm. One launch of
// fat5_norm_mm: blocks of FAT5__GPU_MM_WARPS warps, two outputs a warp (one when gated), grid x over
// the outputs, y over groups of FAT5__MM_ROWS rows (clamped to 65535; the kernel strides).
static FAT5__UNUSED fat5_status fat5__gpu_norm_mm(fat5_ctx *ctx, fat5__dptr y0, fat5__dptr y1, fat5__dptr y2,
                                                  fat5__dptr x, fat5__dptr g, fat5__dptr w0, fat5__dptr w1,
                                                  fat5__dptr w2, int64_t T, int N, int K, float eps, int act,
                                                  fat5__dptr rows, fat5__dptr kv_off, fat5__dptr pos) {
    long long T_ = T;
    int vec = K % (fat5__dev_act_size(ctx) == 2 ? 8 : 4) == 0 && !((w0 | w1 | w2 | x | g) & 15);
    int64_t outs = act >= 0 ? N : (int64_t)N * (w2 ? 3 : w1 ? 2 : 1), groups = (T + FAT5__MM_ROWS - 1) / FAT5__MM_ROWS;
    void *args[] = {&y0, &y1, &y2, &x, &g, &w0, &w1, &w2, &T_, &N, &K, &eps, &act, &rows, &kv_off, &pos, &vec};
    fat5_status st = fat5__norm_mm_check(ctx, "fat5__gpu_norm_mm", y0, y1, y2, x, g, w0, w1, w2, T, N, K, act, rows,
                                         kv_off, pos);
    if (st || T == 0) return st;
    return fat5__dev_launch(ctx, FAT5__K_norm_mm, fat5__gpu_blocks(outs, (act >= 0 ? 1 : 2) * FAT5__GPU_MM_WARPS),
                            (unsigned)(groups < 65535 ? groups : 65535), 1, 32 * FAT5__GPU_MM_WARPS, 1, 1, 0, args);
}

// dst rows r < n, positions [0, pos[0]) = src rows idx[r]. pos is not known here: the grid is
// (ceil(I / 256) * 4 blocks clamped to 64, n rows clamped to 65535) of 256 threads, and the kernel
// strides over whatever pos[0] I elements each row has.
static FAT5__UNUSED fat5_status fat5__gpu_cache_gather(fat5_ctx *ctx, fat5__dptr dst, fat5__dptr src, fat5__dptr idx,
                                                       fat5__dptr kv_off, fat5__dptr pos, int64_t n, int I) {
    long long n_ = n;
    void *args[] = {&dst, &src, &idx, &kv_off, &pos, &n_, &I};
    unsigned gx;
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_cache_gather", "n", n);
    if (I < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_cache_gather: rows of %d elements", I);
    if (n == 0) return FAT5_OK;
    if (dst == src) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_cache_gather: dst == src");
    gx = fat5__gpu_blocks(I, 256) * 4;
    if (gx > 64) gx = 64;
    return fat5__dev_launch(ctx, FAT5__K_cache_gather, gx, (unsigned)(n < 65535 ? n : 65535), 1, 256, 1, 1, 0,
                            args);
}

// x[i] += v for i < n (int32, device memory)
static FAT5__UNUSED fat5_status fat5__gpu_add_i32(fat5_ctx *ctx, fat5__dptr x, int v, int64_t n) {
    long long n_ = n;
    void *args[] = {&x, &v, &n_};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_add_i32", "n", n);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_add_i32, fat5__gpu_blocks(n, 256), 1, 1, 256, 1, 1, 0, args);
}

// ----- rope.cu -----
// rotary embedding in place (fat5__cpu_rope); one thread per (token, pair), every head
static FAT5__UNUSED fat5_status fat5__gpu_rope(fat5_ctx *ctx, fat5__dptr x, fat5__dptr cu, fat5__dptr seq,
                                               fat5__dptr pos, int64_t T, int H, int dk, int rd, float base,
                                               float xpos, int flags) {
    long long T_ = T;
    void *args[] = {&x, &cu, &seq, &pos, &T_, &H, &dk, &rd, &base, &xpos, &flags};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_rope", "T", T);
    if (H < 1 || dk < 1 || rd < 2 || rd % 2 || rd > dk || !(base > 0) || !(xpos >= 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rope: H %d, dk %d, rd %d, base %g, xpos %g", H, dk, rd,
                         (double)base, (double)xpos);
    if (!x || (!pos && (!cu || !seq))) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_rope: missing buffer");
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_rope, fat5__gpu_blocks(T * (rd / 2), 256), 1, 1, 256, 1, 1, 0, args);
}

// block sums of transient-global tokens and their backward (kernels/global.cu; the CPU twins say
// what they compute): one thread per output element, 256 a block
static FAT5__UNUSED fat5_status fat5__gpu_block_sum(fat5_ctx *ctx, fat5__dptr out, fat5__dptr x, fat5__dptr cu,
                                                    fat5__dptr cu_g, fat5__dptr seq, int64_t G, int D, int g) {
    long long G_ = G;
    void *args[] = {&out, &x, &cu, &cu_g, &seq, &G_, &D, &g};
    if (G < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_block_sum", "G", G);
    if (D < 1 || g < 1 || G > INT64_MAX / D)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_block_sum: D %d, block of %d tokens", D, g);
    if (G == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_block_sum, fat5__gpu_blocks(G * D, 256), 1, 1, 256, 1, 1, 0, args);
}
static FAT5__UNUSED fat5_status fat5__gpu_block_sum_bwd(fat5_ctx *ctx, fat5__dptr dx, fat5__dptr dout, fat5__dptr cu,
                                                        fat5__dptr cu_g, fat5__dptr seq, int64_t T, int D, int g) {
    long long T_ = T;
    void *args[] = {&dx, &dout, &cu, &cu_g, &seq, &T_, &D, &g};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_block_sum_bwd", "T", T);
    if (D < 1 || g < 1 || T > INT64_MAX / D)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_block_sum_bwd: D %d, block of %d tokens", D, g);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_block_sum_bwd, fat5__gpu_blocks(T * D, 256), 1, 1, 256, 1, 1, 0, args);
}

// per row: lse; row_ce = lse - (1-s) x_y - (s/V) sum x and row_z = z lse^2 for labels != -100, else
// 0 (the caller sums the rows in double)
static FAT5__UNUSED fat5_status fat5__gpu_xent_fwd(fat5_ctx *ctx, fat5__dptr lse, fat5__dptr row_ce,
                                                   fat5__dptr row_z, fat5__dptr logits, fat5__dptr labels,
                                                   int64_t T, int V, float z, float smooth) {
    long long T_ = T;
    void *args[] = {&lse, &row_ce, &row_z, &logits, &labels, &T_, &V, &z, &smooth};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_xent_fwd", "T", T);
    if (V < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_xent_fwd: vocabulary of %d", V);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_xent_fwd, fat5__gpu_blocks(T, 1), 1, 1, 256, 1, 1, 0, args);
}

// dlogits = scale (softmax (1 + 2 z lse) - (1-s) onehot(y) - s/V) for counted rows, 0 for -100
static FAT5__UNUSED fat5_status fat5__gpu_xent_bwd(fat5_ctx *ctx, fat5__dptr dlogits, fat5__dptr logits,
                                                   fat5__dptr lse, fat5__dptr labels, int64_t T, int V,
                                                   float z, float smooth, float scale) {
    long long T_ = T;
    void *args[] = {&dlogits, &logits, &lse, &labels, &T_, &V, &z, &smooth, &scale};
    if (T < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_xent_bwd", "T", T);
    if (V < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_xent_bwd: vocabulary of %d", V);
    if (T == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_xent_bwd, fat5__gpu_blocks(T, 1), 1, 1, 256, 1, 1, 0, args);
}

// the batch's loss from its rows (fat5_loss_total): one block of FAT5__LOSS_THREADS, fixed order
static FAT5__UNUSED fat5_status fat5__gpu_loss_total(fat5_ctx *ctx, fat5__dptr out, fat5__dptr row_ce,
                                                     fat5__dptr row_z, int64_t T, int64_t n) {
    long long T_ = T, n_ = n;
    void *args[] = {&out, &row_ce, &row_z, &T_, &n_};
    if (!out || T < 0 || (T > 0 && (!row_ce || !row_z)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_loss_total: %lld rows, a NULL buffer", (long long)T);
    return fat5__dev_launch(ctx, FAT5__K_loss_total, 1, 1, 1, FAT5__LOSS_THREADS, 1, 1, 0, args);
}

// ----- optim.cu: segments of the parameter arena cut into chunks (see the CPU ops) -----

static fat5_status fat5__gpu_check_segs(fat5_ctx *ctx, const char *op, int n_seg, int64_t n_chunks, int chunk) {
    if (n_seg < 0 || n_chunks < 0 || chunk < 1 || (n_seg > 0 && n_chunks < n_seg))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %d segments, %lld chunks of %d elements", op, n_seg,
                         (long long)n_chunks, chunk);
    return FAT5_OK;
}

// out[s] = sum over segment s of x^2 (double [n_seg]), deterministic: fat5_sumsq_seg phase 0 (one
// block of 256 per chunk) writes each chunk's sum into scratch (double [n_chunks]), phase 1 (one
// warp per segment) sums the chunks of each segment in a fixed order.
static FAT5__UNUSED fat5_status fat5__gpu_sumsq_seg(fat5_ctx *ctx, fat5__dptr out, fat5__dptr x, fat5__dptr segs,
                                                    fat5__dptr chunk_off, int n_seg, int64_t n_chunks, int chunk,
                                                    fat5__dptr scratch) {
    long long nc = n_chunks;
    int p0 = 0, p1 = 1;
    void *a1[] = {&out, &scratch, &x, &segs, &chunk_off, &n_seg, &nc, &chunk, &p0};
    void *a2[] = {&out, &scratch, &x, &segs, &chunk_off, &n_seg, &nc, &chunk, &p1};
    fat5_status st = fat5__gpu_check_segs(ctx, "fat5__gpu_sumsq_seg", n_seg, n_chunks, chunk);
    if (st || n_seg == 0) return st;
    if (!scratch) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_sumsq_seg: no scratch");
    st = fat5__dev_launch(ctx, FAT5__K_sumsq_seg, fat5__gpu_blocks(n_chunks, 1), 1, 1, 256, 1, 1, 0, a1);
    if (st) return st;
    return fat5__dev_launch(ctx, FAT5__K_sumsq_seg, fat5__gpu_blocks(n_seg, 8), 1, 1, 256, 1, 1, 0, a2);
}

// the AdamW update of every segment (fat5_adamw_seg): one block of 256 per chunk, fp32
static FAT5__UNUSED fat5_status fat5__gpu_adamw_seg(fat5_ctx *ctx, fat5__dptr w, fat5__dptr g, fat5__dptr m1,
                                                    fat5__dptr m2, fat5__dptr segs, fat5__dptr chunk_off, int n_seg,
                                                    int64_t n_chunks, int chunk, fat5__dptr coef, fat5__dptr stats,
                                                    float beta1, float beta2, float eps, fat5__dptr wa) {
    long long nc = n_chunks;
    void *args[] = {&w, &g, &m1, &m2, &segs, &chunk_off, &n_seg, &nc, &chunk, &coef, &stats, &beta1, &beta2, &eps, &wa};
    fat5_status st = fat5__gpu_check_segs(ctx, "fat5__gpu_adamw_seg", n_seg, n_chunks, chunk);
    if (st || n_seg == 0) return st;
    if (!stats) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_adamw_seg: no stats");
    return fat5__dev_launch(ctx, FAT5__K_adamw_seg, fat5__gpu_blocks(n_chunks, 1), 1, 1, 256, 1, 1, 0, args);
}

// the step's coefficients and gradient norm on the device (fat5_optim_coef): one block
static FAT5__UNUSED fat5_status fat5__gpu_optim_coef(fat5_ctx *ctx, fat5__dptr coef, fat5__dptr stats,
                                                     fat5__dptr ss_g, fat5__dptr ss_w, fat5__dptr segs,
                                                     fat5__dptr decayed, int n_seg, double lr_bc, float decay,
                                                     double clip, fat5__dptr gate, int n_gate) {
    void *args[] = {&coef, &stats, &ss_g, &ss_w, &segs, &decayed, &n_seg, &lr_bc, &decay, &clip, &gate, &n_gate};
    if (n_seg < 0 || !coef || !stats || !ss_g || !segs || !decayed)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_optim_coef: %d segments, a NULL table", n_seg);
    return fat5__dev_launch(ctx, FAT5__K_optim_coef, 1, 1, 1, 256, 1, 1, 0, args);
}

// ----- generate.cu: one block of 256 threads per entry (per input for beam search) -----

// Hugging Face's processors in place on x [n, V] fp32 (see fat5__cpu_gen_process)
static FAT5__UNUSED fat5_status fat5__gpu_gen_process(fat5_ctx *ctx, fat5__dptr x, fat5__dptr hist, fat5__dptr lens,
                                                      fat5__dptr rows, int64_t n, int V, int Lh, float rep, int ngram,
                                                      int min_new, int eos, int log_softmax) {
    long long n_ = n;
    void *args[] = {&x, &hist, &lens, &rows, &n_, &V, &Lh, &rep, &ngram, &min_new, &eos, &log_softmax};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_gen_process", "n", n);
    if (V < 1 || Lh < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_gen_process: V = %d, Lh = %d", V, Lh);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_gen_process, fat5__gpu_blocks(n, 1), 1, 1, 256, 1, 1, 0, args);
}

// greedy or sampled next token per entry (see fat5__cpu_gen_select)
static FAT5__UNUSED fat5_status fat5__gpu_gen_select(fat5_ctx *ctx, fat5__dptr x, fat5__dptr tok, fat5__dptr hist,
                                                     fat5__dptr lens, fat5__dptr done, fat5__dptr score,
                                                     fat5__dptr rows, int64_t n, int V, int Lh, int max_new, int eos,
                                                     int pad, int do_sample, float temperature, int top_k,
                                                     float top_p, unsigned long long seed) {
    long long n_ = n;
    void *args[] = {&x,   &tok, &hist,      &lens,        &done,  &score, &rows,  &n_,  &V, &Lh,
                    &max_new, &eos, &pad, &do_sample, &temperature, &top_k, &top_p, &seed};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_gen_select", "n", n);
    if (V < 1 || Lh < 1 || (do_sample && !(temperature > 0.0f)))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_gen_select: V = %d, Lh = %d, temperature %g", V,
                         Lh, (double)temperature);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_gen_select, fat5__gpu_blocks(n, 1), 1, 1, 256, 1, 1, 0, args);
}

// one beam-search step for n / K inputs (see fat5__cpu_gen_beam)
static FAT5__UNUSED fat5_status fat5__gpu_gen_beam(fat5_ctx *ctx, fat5__dptr x, fat5__dptr tok, fat5__dptr src,
                                                   fat5__dptr hist, fat5__dptr lens, fat5__dptr bscore,
                                                   fat5__dptr fin_score, fat5__dptr fin_tok, fat5__dptr fin_len,
                                                   fat5__dptr fin_flag, fat5__dptr unsat, fat5__dptr done,
                                                   fat5__dptr rows, fat5__dptr scratch, int64_t n, int V, int Lh,
                                                   int K, int max_new, int eos, float length_penalty,
                                                   int early_stopping) {
    long long n_ = n;
    void *args[] = {&x,    &tok,  &src,     &hist, &lens, &bscore, &fin_score, &fin_tok,        &fin_len,
                    &fin_flag, &unsat, &done, &rows, &scratch, &n_, &V, &Lh, &K, &max_new, &eos,
                    &length_penalty, &early_stopping};
    if (n < 0) return fat5__gpu_bad_count(ctx, "fat5__gpu_gen_beam", "n", n);
    if (K < 1 || K > FAT5__BEAM_MAX || n % K || V < 1 || Lh < 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__gpu_gen_beam: n = %lld, K = %d (1 .. %d), V = %d, Lh = %d",
                         (long long)n, K, FAT5__BEAM_MAX, V, Lh);
    if (n == 0) return FAT5_OK;
    return fat5__dev_launch(ctx, FAT5__K_gen_beam, fat5__gpu_blocks(n / K, 1), 1, 1, 256, 1, 1, 0, args);
}
#endif  // FAT5_NO_CUDA

// =============================================================================================
// ==[3.4] ops: the op table and the two backends ==
// X(name, parameters): fat5__cpu_<name> and
// fat5__gpu_<name> both take exactly these parameters (the initialisers of the backend tables
// below make the compiler check it), and kernel fat5_<name> in kernels/ is the GPU side of every
// op but mm (cuBLAS). The model calls ops only as m->be-><name>(...).
#define FAT5__OPS(X)                                                                                           \
    X(fill_f32, (fat5_ctx * ctx, fat5__addr x, float v, int64_t n))                                            \
    X(scale_f32, (fat5_ctx * ctx, fat5__addr x, float s, int64_t n))                                           \
    X(f32_to_bf16, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, int64_t n))                                \
    X(to_act, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, int64_t n))                                     \
    X(colsum_f32, (fat5_ctx * ctx, fat5__addr out, fat5__addr in, int rows, int D))                            \
    X(mm, (fat5_ctx * ctx, fat5__mm_layout layout, fat5__addr C, int c_f32, fat5__addr A, fat5__addr B,        \
           int64_t M, int64_t N, int64_t K, float alpha, float beta))                                          \
    X(mm_batched, (fat5_ctx * ctx, fat5__mm_layout layout, fat5__addr C, int c_f32, fat5__addr A, fat5__addr B, \
                   int64_t M, int64_t N, int64_t K, float alpha, float beta, int batch, int64_t sA, int64_t sB, \
                   int64_t sC))                                                                                \
    X(embed_fwd, (fat5_ctx * ctx, fat5__addr out, fat5__addr table, fat5__addr tok, int64_t T, int D))         \
    X(embed_bwd, (fat5_ctx * ctx, fat5__addr dtable, fat5__addr dout, fat5__addr tok, int64_t T, int D))       \
    X(rmsnorm_fwd, (fat5_ctx * ctx, fat5__addr y, fat5__addr r, fat5__addr x, fat5__addr w, int64_t T, int D,  \
                    float eps, fat5__addr xs))                                                                 \
    X(rmsnorm_bwd, (fat5_ctx * ctx, fat5__addr dx, fat5__addr dw, fat5__addr dy, fat5__addr x, fat5__addr w,   \
                    fat5__addr r, int64_t T, int D, int accumulate, fat5__addr scratch, fat5__addr dxa))       \
    X(act_fwd, (fat5_ctx * ctx, fat5__addr h, fat5__addr a, fat5__addr b, int64_t n, int act))                 \
    X(act_bwd, (fat5_ctx * ctx, fat5__addr da, fat5__addr db, fat5__addr dh, fat5__addr a, fat5__addr b,       \
                int64_t n, int act))                                                                           \
    X(attn_fwd, (fat5_ctx * ctx, fat5__addr o, fat5__addr lse, fat5__addr q, fat5__addr k, fat5__addr v,       \
                 fat5__addr bias, fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr q_seq,          \
                 int64_t Tq, int H, int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g))       \
    X(attn_bwd_delta, (fat5_ctx * ctx, fat5__addr delta, fat5__addr o, fat5__addr dout, int64_t Tq, int H,     \
                       int dk))                                                                                \
    X(attn_bwd_dq, (fat5_ctx * ctx, fat5__addr dq, fat5__addr dbias, fat5__addr dout, fat5__addr lse,          \
                    fat5__addr delta, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,               \
                    fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr q_seq, int64_t Tq, int H,     \
                    int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g, fat5__addr scratch))   \
    X(attn_bwd_dkv, (fat5_ctx * ctx, fat5__addr dk_out, fat5__addr dv, fat5__addr dout, fat5__addr lse,       \
                     fat5__addr delta, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,              \
                     fat5__addr lut, fat5__addr cu_q, fat5__addr cu_k, fat5__addr k_seq, int64_t Tk, int H,    \
                     int dk, int kind, int nb, int max_distance, int g, fat5__addr cu_g))                      \
    X(fire_reduce, (fat5_ctx * ctx, fat5__addr g, fat5__addr shares, int H, int W))                          \
    X(block_sum, (fat5_ctx * ctx, fat5__addr out, fat5__addr x, fat5__addr cu, fat5__addr cu_g,                \
                  fat5__addr seq, int64_t G, int D, int g))                                                    \
    X(block_sum_bwd, (fat5_ctx * ctx, fat5__addr dx, fat5__addr dout, fat5__addr cu, fat5__addr cu_g,          \
                      fat5__addr seq, int64_t T, int D, int g))                                                \
    X(rope, (fat5_ctx * ctx, fat5__addr x, fat5__addr cu, fat5__addr seq, fat5__addr pos, int64_t T, int H,    \
             int dk, int rd, float base, float xpos, int flags))                                               \
    X(attn_decode, (fat5_ctx * ctx, fat5__addr o, fat5__addr q, fat5__addr k, fat5__addr v, fat5__addr bias,  \
                    fat5__addr lut, fat5__addr rows, fat5__addr kv_off, fat5__addr kv_len, fat5__addr pos,     \
                    int64_t n, int H, int dk, int kind, int nb, int max_distance, int max_keys,                \
                    fat5__addr scratch))                                                                       \
    X(cache_write, (fat5_ctx * ctx, fat5__addr kc, fat5__addr vc, fat5__addr k, fat5__addr v, fat5__addr rows, \
                    fat5__addr kv_off, fat5__addr pos, int64_t n, int I))                                      \
    X(norm_mm, (fat5_ctx * ctx, fat5__addr y0, fat5__addr y1, fat5__addr y2, fat5__addr x, fat5__addr g,       \
                fat5__addr w0, fat5__addr w1, fat5__addr w2, int64_t T, int N, int K, float eps, int act,      \
                fat5__addr rows, fat5__addr kv_off, fat5__addr pos))                                           \
    X(cache_gather, (fat5_ctx * ctx, fat5__addr dst, fat5__addr src, fat5__addr idx, fat5__addr kv_off,        \
                     fat5__addr pos, int64_t n, int I))                                                        \
    X(add_i32, (fat5_ctx * ctx, fat5__addr x, int v, int64_t n))                                               \
    X(xent_fwd, (fat5_ctx * ctx, fat5__addr lse, fat5__addr row_ce, fat5__addr row_z, fat5__addr logits,      \
                 fat5__addr labels, int64_t T, int V, float z, float smooth))                                  \
    X(xent_bwd, (fat5_ctx * ctx, fat5__addr dlogits, fat5__addr logits, fat5__addr lse, fat5__addr labels,     \
                 int64_t T, int V, float z, float smooth, float scale))                                        \
    X(loss_total, (fat5_ctx * ctx, fat5__addr out, fat5__addr row_ce, fat5__addr row_z, int64_t T, int64_t n)) \
    X(sumsq_seg, (fat5_ctx * ctx, fat5__addr out, fat5__addr x, fat5__addr segs, fat5__addr chunk_off,         \
                  int n_seg, int64_t n_chunks, int chunk, fat5__addr scratch))                                 \
    X(adamw_seg, (fat5_ctx * ctx, fat5__addr w, fat5__addr g, fat5__addr m1, fat5__addr m2, fat5__addr segs,   \
                  fat5__addr chunk_off, int n_seg, int64_t n_chunks, int chunk, fat5__addr coef,              \
                  fat5__addr stats, float beta1, float beta2, float eps, fat5__addr wa))                      \
    X(optim_coef, (fat5_ctx * ctx, fat5__addr coef, fat5__addr stats, fat5__addr ss_g, fat5__addr ss_w,         \
                   fat5__addr segs, fat5__addr decayed, int n_seg, double lr_bc, float decay, double clip,    \
                   fat5__addr gate, int n_gate))                                                              \
    X(gen_process, (fat5_ctx * ctx, fat5__addr x, fat5__addr hist, fat5__addr lens, fat5__addr rows, int64_t n, \
                    int V, int Lh, float rep, int ngram, int min_new, int eos, int log_softmax))               \
    X(gen_select, (fat5_ctx * ctx, fat5__addr x, fat5__addr tok, fat5__addr hist, fat5__addr lens,             \
                   fat5__addr done, fat5__addr score, fat5__addr rows, int64_t n, int V, int Lh, int max_new,  \
                   int eos, int pad, int do_sample, float temperature, int top_k, float top_p,                 \
                   unsigned long long seed))                                                                   \
    X(gen_beam, (fat5_ctx * ctx, fat5__addr x, fat5__addr tok, fat5__addr src, fat5__addr hist,                \
                 fat5__addr lens, fat5__addr bscore, fat5__addr fin_score, fat5__addr fin_tok,                 \
                 fat5__addr fin_len, fat5__addr fin_flag, fat5__addr unsat, fat5__addr done, fat5__addr rows,  \
                 fat5__addr scratch, int64_t n, int V, int Lh, int K, int max_new, int eos,                    \
                 float length_penalty, int early_stopping))

// the op names in table order (messages and tests name ops by them)
static const char *const fat5__op_names[] = {
#define FAT5__OP_NAME(name, params) #name,
    FAT5__OPS(FAT5__OP_NAME)
#undef FAT5__OP_NAME
};

// A backend: its memory (host or device), its activation element size, and one function per op.
typedef struct fat5__backend {
    const char *name;                                                       // "cpu" or "gpu"
    size_t (*act_size)(const fat5_ctx *ctx);                                // 4, or 2 for bf16
    fat5_status (*alloc)(fat5_ctx *ctx, size_t bytes, fat5__addr *out);    // zero-filled
    void (*free)(fat5_ctx *ctx, fat5__addr p);
    fat5_status (*upload)(fat5_ctx *ctx, fat5__addr dst, const void *src, size_t bytes);
    fat5_status (*download)(fat5_ctx *ctx, void *dst, fat5__addr src, size_t bytes);
    fat5_status (*copy)(fat5_ctx *ctx, fat5__addr dst, fat5__addr src, size_t bytes);
    fat5_status (*memset0)(fat5_ctx *ctx, fat5__addr p, size_t bytes);
    fat5_status (*sync)(fat5_ctx *ctx);                                    // waits for queued work
    const char *const *op_names;                                            // fat5__op_names
#define FAT5__OP_FIELD(name, params) fat5_status(*name) params;
    FAT5__OPS(FAT5__OP_FIELD)
#undef FAT5__OP_FIELD
} fat5__backend;

#define FAT5__OP_COUNT ((int)(sizeof fat5__op_names / sizeof fat5__op_names[0]))

static const fat5__backend fat5__cpu_backend = {
    "cpu", fat5__host_act_size, fat5__host_alloc, fat5__host_free, fat5__host_upload, fat5__host_download,
    fat5__host_copy, fat5__host_memset0, fat5__host_sync, fat5__op_names,
#define FAT5__OP_CPU(name, params) fat5__cpu_##name,
    FAT5__OPS(FAT5__OP_CPU)
#undef FAT5__OP_CPU
};

#ifndef FAT5_NO_CUDA
static const fat5__backend fat5__gpu_backend = {
    "gpu", fat5__dev_act_size, fat5__dev_alloc, fat5__dev_free, fat5__dev_upload, fat5__dev_download,
    fat5__dev_copy, fat5__dev_memset0, fat5__dev_sync, fat5__op_names,
#define FAT5__OP_GPU(name, params) fat5__gpu_##name,
    FAT5__OPS(FAT5__OP_GPU)
#undef FAT5__OP_GPU
};
#endif

// the backend a context computes on
static const fat5__backend *fat5__backend_of(const fat5_ctx *ctx) {
#ifndef FAT5_NO_CUDA
    if (ctx->gpu) return &fat5__gpu_backend;
#endif
    (void)ctx;
    return &fat5__cpu_backend;
}

// =============================================================================================
// ==[4.1] model: configuration ==

FAT5_API fat5_model_config fat5_model_config_default(void) {
    fat5_model_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 32128;
    c.d_model = 512;
    c.d_kv = 64;
    c.d_ff = 2048;
    c.num_layers = 6;
    c.num_decoder_layers = 6;
    c.num_heads = 8;
    c.rel_buckets = 32;
    c.rel_max_distance = 128;
    c.layer_norm_eps = 1e-6;
    c.act = FAT5_ACT_RELU;
    c.gated = 0;
    c.tie_word_embeddings = 1;
    c.scale_decoder_outputs = 1;
    c.bias_every_layer = 0;
    c.pad_token_id = 0;
    c.eos_token_id = 1;
    c.decoder_start_token_id = 0;
    c.dropout_rate = 0.1;
    memcpy(c.model_type, "t5", 3);
    c.pos_kind = FAT5_POS_T5;
    c.alibi_asymmetric = 0;
    c.rotary_interleaved = 0;
    c.fire_mlp_width = 32;
    c.rotary_fraction = 1.0;
    c.rotary_base = 10000.0;
    c.rotary_scale_base = 0.0;
    c.enc_attention = FAT5_ENC_ATTN_FULL;
    c.local_radius = 127;
    c.global_block_size = 16;
    return c;
}

// position_encoding_type values, spelled as FAT5 spells them (case-sensitive)
static const char *fat5__pos_name(fat5_pos_kind k) {
    switch (k) {
    case FAT5_POS_T5: return "t5";
    case FAT5_POS_NONE: return "none";
    case FAT5_POS_ALIBI: return "ALiBi";
    case FAT5_POS_ROPE: return "RoPE";
    case FAT5_POS_FIRE: return "FIRE";
    }
    return "?";
}

// LongT5's encoder attention: a model_type longt5 field, with a window and block of at least 1
static fat5_status fat5__validate_enc_attention(fat5_ctx *ctx, const fat5_model_config *c) {
    int longt5 = strcmp(c->model_type, "longt5") == 0;
    if ((int)c->enc_attention < (int)FAT5_ENC_ATTN_FULL || (int)c->enc_attention > (int)FAT5_ENC_ATTN_TGLOBAL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: encoder_attention_type %d is not a fat5_enc_attention",
                         (int)c->enc_attention);
    if (longt5 != (c->enc_attention != FAT5_ENC_ATTN_FULL))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: %s", longt5 ? "model_type longt5 needs "
                         "encoder_attention_type local or transient-global" : "local and transient-global encoder "
                         "attention are model_type longt5");
    if (c->local_radius < 1 || c->local_radius > FAT5__ATTN_MAX_RADIUS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: local_radius = %lld, expected 1..%d (a window of at "
                         "least one neighbour)", (long long)c->local_radius, FAT5__ATTN_MAX_RADIUS);
    if (c->global_block_size < 1 || c->global_block_size > ((int64_t)1 << 30))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: global_block_size = %lld, expected 1..%lld",
                         (long long)c->global_block_size, (long long)1 << 30);
    if (longt5 && (c->bias_every_layer || c->pos_kind != FAT5_POS_T5))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type longt5 has T5 buckets in block 0 only");
    return FAT5_OK;
}

// The position-encoding fields. Fields of encodings other than cfg's own are checked for range
// only (their defaults always pass), so a file may carry FAT5's defaults whatever it selects.
static fat5_status fat5__validate_pos(fat5_ctx *ctx, const fat5_model_config *c) {
    if ((int)c->pos_kind < (int)FAT5_POS_T5 || (int)c->pos_kind > (int)FAT5_POS_FIRE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: position_encoding_type %d is not a fat5_pos_kind",
                         (int)c->pos_kind);
    if (!(c->rotary_fraction > 0 && c->rotary_fraction <= 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: rotary_emb_fraction = %g, expected 0 < fraction <= 1",
                         c->rotary_fraction);
    if (!(c->rotary_base > 0 && c->rotary_base < HUGE_VAL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: rotary_base = %g, expected a finite value above 0",
                         c->rotary_base);
    if (!(c->rotary_scale_base >= 0 && c->rotary_scale_base < HUGE_VAL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "config: rotary_scale_base = %g, expected a finite value above 0 (or 0/null: no xPos)",
                         c->rotary_scale_base);
    if (c->fire_mlp_width < 1 || c->fire_mlp_width > (1 << 20))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: fire_mlp_width = %d, expected 1..%d", c->fire_mlp_width,
                         1 << 20);
    if (c->pos_kind == FAT5_POS_ROPE) {
        // FAT5 rotates int(d_kv * fraction) dims in pairs
        int64_t rd = (int64_t)((double)c->d_kv * c->rotary_fraction);
        if (rd < 2 || rd % 2)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "config: rotary_emb_fraction = %g gives int(d_kv %lld * fraction) = %lld rotary dims; "
                             "RoPE needs an even number of at least 2", c->rotary_fraction, (long long)c->d_kv,
                             (long long)rd);
    }
    if (c->pos_kind == FAT5_POS_ALIBI && c->alibi_asymmetric && c->num_heads % 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "config: alibi_mode asymetric splits the heads in two halves; num_heads = %lld is odd",
                         (long long)c->num_heads);
    return FAT5_OK;
}

#define FAT5__MAX_DIM ((int64_t)1 << 24)    // no single dimension beyond 16M
#define FAT5__MAX_LAYERS 1024

static const char *fat5__act_name(fat5_act a);

FAT5_API fat5_status fat5_model_config_validate(fat5_ctx *ctx, const fat5_model_config *c) {
    struct { const char *name; int64_t v, lo, hi; } f[9];
    int i;
    f[0].name = "vocab_size"; f[0].v = c->vocab_size; f[0].lo = 1; f[0].hi = INT32_MAX;
    f[1].name = "d_model"; f[1].v = c->d_model; f[1].lo = 1; f[1].hi = FAT5__MAX_DIM;
    f[2].name = "d_kv"; f[2].v = c->d_kv; f[2].lo = 1; f[2].hi = FAT5__MAX_DIM;
    f[3].name = "d_ff"; f[3].v = c->d_ff; f[3].lo = 1; f[3].hi = FAT5__MAX_DIM;
    f[4].name = "num_layers"; f[4].v = c->num_layers; f[4].lo = 1; f[4].hi = FAT5__MAX_LAYERS;
    f[5].name = "num_decoder_layers"; f[5].v = c->num_decoder_layers; f[5].lo = 1; f[5].hi = FAT5__MAX_LAYERS;
    f[6].name = "num_heads"; f[6].v = c->num_heads; f[6].lo = 1; f[6].hi = 4096;
    f[7].name = "relative_attention_num_buckets"; f[7].v = c->rel_buckets; f[7].lo = 4; f[7].hi = 1 << 16;
    f[8].name = "relative_attention_max_distance"; f[8].v = c->rel_max_distance; f[8].lo = 1; f[8].hi = 1 << 30;
    for (i = 0; i < 9; i++)
        if (f[i].v < f[i].lo || f[i].v > f[i].hi)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: %s = %lld, expected %lld..%lld",
                             f[i].name, (long long)f[i].v, (long long)f[i].lo, (long long)f[i].hi);
    if (c->num_heads * c->d_kv > FAT5__MAX_DIM)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: num_heads * d_kv = %lld is too large",
                         (long long)(c->num_heads * c->d_kv));
    // the log-spaced buckets start at nb/4 (encoder) and nb/2 (decoder); both need max_distance above
    if (c->rel_max_distance <= c->rel_buckets / 2)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: relative_attention_max_distance = %lld must exceed "
                         "relative_attention_num_buckets / 2 = %lld (the log-spaced buckets start there)",
                         (long long)c->rel_max_distance, (long long)(c->rel_buckets / 2));
    // the norm runs in fp32: an epsilon that rounds to 0 there would divide by zero on a zero row
    if (!(c->layer_norm_eps > 0 && c->layer_norm_eps < HUGE_VAL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: layer_norm_epsilon = %g, expected a finite value "
                         "above 0", c->layer_norm_eps);
    if (c->layer_norm_eps >= 1)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: layer_norm_epsilon = %g, expected 0 < eps < 1",
                         c->layer_norm_eps);
    if ((float)c->layer_norm_eps == 0.0f)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: layer_norm_epsilon = %g rounds to 0 in fp32 "
                         "(the smallest usable value is about 1.4e-45)", c->layer_norm_eps);
    if (!(c->dropout_rate >= 0 && c->dropout_rate < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: dropout_rate = %g, expected 0 <= rate < 1",
                         c->dropout_rate);
    if (c->act < FAT5_ACT_RELU || c->act > FAT5_ACT_SILU)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: unknown activation %d", (int)c->act);
    {
        fat5_status st = fat5__validate_pos(ctx, c);
        if (!st) st = fat5__validate_enc_attention(ctx, c);
        if (st) return st;
    }
    if (strcmp(c->model_type, "flash_t5") == 0) {
        // what FlashT5ForConditionalGeneration can express, with the parameter names fat5 maps
        if (c->tie_word_embeddings || c->scale_decoder_outputs)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 needs tie_word_embeddings false "
                             "(FlashT5ForConditionalGeneration asserts untied embeddings) and no decoder-output scaling");
        if (c->bias_every_layer)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 has one bias table per stack, "
                             "not one per layer");
        if (!c->gated)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 with use_glu_mlp false is not "
                             "supported (the names of FlashT5's non-gated MLP parameters are not mapped)");
        if (c->act != FAT5_ACT_GELU_TANH && c->act != FAT5_ACT_RELU)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: model_type flash_t5 has a tanh-GELU or a ReLU MLP "
                             "(use_gelu_act), not %s", fat5__act_name(c->act));
    }
    {
        const char *name[3] = {"pad_token_id", "eos_token_id", "decoder_start_token_id"};
        int64_t id[3];
        id[0] = c->pad_token_id;
        id[1] = c->eos_token_id;
        id[2] = c->decoder_start_token_id;
        for (i = 0; i < 3; i++) {
            if (id[i] < 0)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "config: %s = %lld is negative; token ids are in "
                                 "[0, vocab_size %lld)", name[i], (long long)id[i], (long long)c->vocab_size);
            if (id[i] >= c->vocab_size)
                return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config: %s = %lld must be in [0, vocab_size %lld)",
                                 name[i], (long long)id[i], (long long)c->vocab_size);
        }
    }
    return FAT5_OK;
}

// Keys of Hugging Face configs that never change the T5 forward pass (generation settings,
// bookkeeping); anything neither here nor handled below is refused.
static const char *const fat5__cfg_ignored[] = {
    "transformers_version", "torch_dtype", "dtype", "use_cache", "n_positions", "output_past",
    "task_specific_params", "gradient_checkpointing", "classifier_dropout", "tokenizer_class",
    "bos_token_id", "sep_token_id", "id2label", "label2id", "num_labels", "return_dict",
    "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "pruned_heads",
    "chunk_size_feed_forward", "is_decoder", "add_cross_attention", "tie_encoder_decoder",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "finetuning_task", "prefix", "problem_type",
    "cross_attention_hidden_size", "initializer_factor", "dropout_rate", "tf_legacy_loss",
    "decoder_start_token_id", "output_router_logits", "architectures", "is_encoder_decoder",
    "model_type", "feed_forward_proj", "dense_act_fn", "is_gated_act", "scale_decoder_outputs",
    NULL};

// Keys of FAT5's FlashT5Config that never change the forward pass of a model fat5 accepts: loss
// and training settings, kernel choices, dropout and bookkeeping (model_type flash_t5 only).
// attention_scale, use_glu_mlp, use_gelu_act and use_masking are read, not ignored.
static const char *const fat5__cfg_flash_ignored[] = {
    "z_loss", "label_smoothing", "max_sequence_length", "attention_type", "attention_dropout_rate",
    "use_triton_layernorm", "use_triton_crossentropy", "crossentropy_inplace_backward",
    "use_full_bias_size", "auto_map", NULL};

static int fat5__cfg_known(const char *key) {
    int i;
    if (key[0] == '_') return 1;  // private bookkeeping such as _name_or_path
    for (i = 0; fat5__cfg_ignored[i]; i++)
        if (strcmp(key, fat5__cfg_ignored[i]) == 0) return 1;
    return 0;
}

// integer field: absent keeps the default; null is allowed only where HF allows it (allow_null)
static fat5_status fat5__cfg_int(fat5_ctx *ctx, const fat5__json *root, const char *key, int allow_null,
                                 int64_t *v, int *present) {
    const fat5__json *j = fat5__json_get(root, key);
    if (present) *present = 0;
    if (!j || (allow_null && j->type == FAT5__J_NULL)) return FAT5_OK;
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_i64(j, v))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: '%s' must be an integer", key);
    if (present) *present = 1;
    return FAT5_OK;
}

static fat5_status fat5__cfg_bool(fat5_ctx *ctx, const fat5__json *root, const char *key, int *v,
                                  int *present) {
    const fat5__json *j = fat5__json_get(root, key);
    if (present) *present = 0;
    if (!j) return FAT5_OK;
    if (j->type != FAT5__J_TRUE && j->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: '%s' must be true or false", key);
    *v = j->type == FAT5__J_TRUE;
    if (present) *present = 1;
    return FAT5_OK;
}

static const char *fat5__act_name(fat5_act a) {
    switch (a) {
    case FAT5_ACT_RELU: return "relu";
    case FAT5_ACT_GELU: return "gelu";
    case FAT5_ACT_GELU_TANH: return "gelu_new";
    case FAT5_ACT_SILU: return "silu";
    }
    return "?";
}

static int fat5__act_from_name(const char *s, fat5_act *out) {
    if (strcmp(s, "relu") == 0) *out = FAT5_ACT_RELU;
    else if (strcmp(s, "gelu") == 0) *out = FAT5_ACT_GELU;
    else if (strcmp(s, "gelu_new") == 0 || strcmp(s, "gelu_pytorch_tanh") == 0) *out = FAT5_ACT_GELU_TANH;
    else if (strcmp(s, "silu") == 0 || strcmp(s, "swish") == 0) *out = FAT5_ACT_SILU;
    else return 0;
    return 1;
}

// number field: absent keeps the default; null gives null_value where allow_null
static fat5_status fat5__cfg_double(fat5_ctx *ctx, const fat5__json *root, const char *key, int allow_null,
                                    double null_value, double *v) {
    const fat5__json *j = fat5__json_get(root, key);
    if (!j) return FAT5_OK;
    if (allow_null && j->type == FAT5__J_NULL) {
        *v = null_value;
        return FAT5_OK;
    }
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, v))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: '%s' must be a number", key);
    return FAT5_OK;
}

// FAT5's position-encoding fields. FAT5 reads any position_encoding_type it does not know as "no
// encoding"; here "none" says so explicitly and any other unknown name is an error.
static fat5_status fat5__cfg_pos(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j;
    char val[128];
    int64_t width = c->fire_mlp_width, randomized = 0;
    fat5_status st;
    if ((j = fat5__json_get(root, "position_encoding_type")) != NULL) {
        int k;
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'position_encoding_type' must be a string");
        for (k = FAT5_POS_T5; k <= FAT5_POS_FIRE; k++)
            if (strcmp(j->str, fat5__pos_name((fat5_pos_kind)k)) == 0) break;
        if (k > FAT5_POS_FIRE)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                             "config.json: position_encoding_type '%s' is unknown; expected \"t5\", \"RoPE\", "
                             "\"ALiBi\", \"FIRE\" or \"none\" (case-sensitive)", fat5__msg_name(val, sizeof val, j->str));
        c->pos_kind = (fat5_pos_kind)k;
    }
    if ((j = fat5__json_get(root, "alibi_mode")) != NULL) {
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'alibi_mode' must be a string");
        if (strcmp(j->str, "symetric") == 0 || strcmp(j->str, "symmetric") == 0) c->alibi_asymmetric = 0;
        else if (strcmp(j->str, "asymetric") == 0 || strcmp(j->str, "asymmetric") == 0) c->alibi_asymmetric = 1;
        else
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                             "config.json: alibi_mode '%s' is unknown; expected \"symetric\" or \"asymetric\" "
                             "(or \"symmetric\", \"asymmetric\")", fat5__msg_name(val, sizeof val, j->str));
    }
    if ((st = fat5__cfg_double(ctx, root, "rotary_emb_fraction", 0, 0, &c->rotary_fraction)) ||
        (st = fat5__cfg_double(ctx, root, "rotary_base", 0, 0, &c->rotary_base)) ||
        (st = fat5__cfg_double(ctx, root, "rotary_scale_base", 1, 0.0, &c->rotary_scale_base)) ||
        (st = fat5__cfg_bool(ctx, root, "rotary_interleaved", &c->rotary_interleaved, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "fire_mlp_width", 0, &width, NULL)))
        return st;
    // a zero scale base would divide positions by zero; FAT5 writes None for "off"
    if (fat5__json_get(root, "rotary_scale_base") && fat5__json_get(root, "rotary_scale_base")->type != FAT5__J_NULL &&
        !(c->rotary_scale_base > 0))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: rotary_scale_base = %g, expected a value above 0 or null "
                         "(no xPos)", c->rotary_scale_base);
    if (width < 1 || width > (1 << 20))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: fire_mlp_width = %lld, expected 1..%d", (long long)width,
                         1 << 20);
    c->fire_mlp_width = (int)width;
    {
        int r = 0, present = 0;
        if ((st = fat5__cfg_bool(ctx, root, "use_randomized_position_encoding", &r, &present))) return st;
        randomized = present && r;
    }
    if (randomized)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: use_randomized_position_encoding true (random positions at every forward) "
                         "is not supported");
    return FAT5_OK;
}

// The fields of FAT5's FlashT5Config that shape the model (model_type flash_t5). Rules where FAT5
// itself misbehaves:
//   - attention_scale must be 1.0 (T5's unscaled attention, what every released FAT5 checkpoint
//     sets). FlashT5Config's default None means 1/sqrt(num_heads), so an absent or null
//     attention_scale is refused rather than read as either scale.
//   - pad_token_id -100 (FlashT5Config's default) is read as 0, T5's pad id. FAT5 embeds the pad id
//     only where shift-right replaces a -100 label, which crashes with -100 itself; wherever FAT5
//     runs, the pad id therefore never reaches its embedding and 0 gives the same outputs. A saved
//     config.json then says 0. Other negative ids stay errors.
//   - tie_word_embeddings must be present and false (FAT5 asserts untied embeddings; T5Config's
//     default is true).
//   - use_masking true (FAT5 masks query rows of padding, not key columns) is refused.
static fat5_status fat5__cfg_flash(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j;
    int glu = 0, gelu = 1, masking = 0;
    double scale = 0;
    fat5_status st;
    if ((st = fat5__cfg_bool(ctx, root, "use_glu_mlp", &glu, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "use_gelu_act", &gelu, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "use_masking", &masking, NULL)))
        return st;
    c->gated = glu;
    c->act = gelu ? FAT5_ACT_GELU_TANH : FAT5_ACT_RELU;
    j = fat5__json_get(root, "attention_scale");
    if (!j || j->type == FAT5__J_NULL)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: flash_t5 without attention_scale: FlashT5Config's default (None) scales "
                         "attention by 1/sqrt(num_heads); fat5 runs T5's unscaled attention only (set "
                         "\"attention_scale\": 1.0, as released FAT5 checkpoints do)");
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &scale))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'attention_scale' must be a number or null");
    if (scale != 1.0)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: attention_scale = %g is not supported; fat5 runs T5's unscaled attention "
                         "(attention_scale 1.0)", scale);
    if (masking)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: use_masking true (FAT5's padding mask over query rows) is not supported");
    j = fat5__json_get(root, "tie_word_embeddings");
    if (!j || j->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config.json: flash_t5 needs \"tie_word_embeddings\": false (FlashT5ForConditionalGeneration "
                         "asserts untied embeddings; the T5Config default is true)");
    if (c->pad_token_id == -100) c->pad_token_id = 0;
    return FAT5_OK;
}

// LongT5's encoder fields (model_type longt5): encoder_attention_type "local" or
// "transient-global", local_radius, global_block_size
static fat5_status fat5__cfg_long(fat5_ctx *ctx, const fat5__json *root, fat5_model_config *c) {
    const fat5__json *j = fat5__json_get(root, "encoder_attention_type");
    char val[128];
    fat5_status st;
    if (j) {
        if (j->type != FAT5__J_STRING)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'encoder_attention_type' must be a string");
        if (strcmp(j->str, "local") == 0) c->enc_attention = FAT5_ENC_ATTN_LOCAL;
        else if (strcmp(j->str, "transient-global") == 0) c->enc_attention = FAT5_ENC_ATTN_TGLOBAL;
        else
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                             "config.json: encoder_attention_type '%s' is unknown; expected \"local\" or "
                             "\"transient-global\"", fat5__msg_name(val, sizeof val, j->str));
    }
    if ((st = fat5__cfg_int(ctx, root, "local_radius", 0, &c->local_radius, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "global_block_size", 0, &c->global_block_size, NULL)))
        return st;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                 fat5_model_config *out) {
    fat5_model_config c = fat5_model_config_default();
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *j;
    fat5_status st;
    char val[128];   // a key or value from the file, sanitised for a message
    int has_dec_layers = 0, has_scale = 0, has_gated = 0, is_gated_act = 0, is_flash = 0, is_long = 0;
    int64_t dec_layers = 0;

    st = fat5__json_parse(ctx, "config.json", json, len, 16, &doc);
    if (st) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: the top level must be an object");
        goto done;
    }
    // model_type first: it sets UMT5's defaults
    if ((j = fat5__json_get(root, "model_type")) != NULL) {
        if (j->type != FAT5__J_STRING) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'model_type' must be a string");
            goto done;
        }
        if (strcmp(j->str, "t5") != 0 && strcmp(j->str, "mt5") != 0 && strcmp(j->str, "umt5") != 0 &&
            strcmp(j->str, "flash_t5") != 0 && strcmp(j->str, "longt5") != 0) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: model_type '%s' is not a T5 model (fat5 reads t5, mt5, umt5, flash_t5, "
                           "longt5)", fat5__msg_name(val, sizeof val, j->str));
            goto done;
        }
        snprintf(c.model_type, sizeof c.model_type, "%s", j->str);
        is_flash = strcmp(j->str, "flash_t5") == 0;
        is_long = strcmp(j->str, "longt5") == 0;
        if (is_long) {
            c.enc_attention = FAT5_ENC_ATTN_LOCAL;   // LongT5Config's default
        } else if (is_flash) {
            // FlashT5Config's defaults: a plain tanh-GELU MLP, pad_token_id -100 (see below)
            c.act = FAT5_ACT_GELU_TANH;
            c.gated = 0;
            c.pad_token_id = -100;
        } else if (strcmp(j->str, "t5") != 0) {
            // MT5Config / UMT5Config defaults: the mT5-small shape; mT5 (transformers 4.x) is
            // untied by default, UMT5 tied
            c.vocab_size = 250112;
            c.d_ff = 1024;
            c.num_layers = 8;
            c.num_heads = 6;
            c.act = FAT5_ACT_GELU_TANH;
            c.gated = 1;
            c.tie_word_embeddings = strcmp(j->str, "umt5") == 0;
            c.bias_every_layer = strcmp(j->str, "umt5") == 0;
        }
    }
    for (j = root->child; j; j = j->next) {
        static const char *const handled[] = {
            "vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
            "relative_attention_num_buckets", "relative_attention_max_distance", "layer_norm_epsilon",
            "tie_word_embeddings", "pad_token_id", "eos_token_id", "position_encoding_type", "alibi_mode",
            "rotary_emb_fraction", "rotary_base", "rotary_interleaved", "rotary_scale_base", "fire_mlp_width",
            "use_randomized_position_encoding", NULL};
        static const char *const flash_handled[] = {"use_glu_mlp", "use_gelu_act", "attention_scale", "use_masking",
                                                    NULL};
        static const char *const long_handled[] = {"encoder_attention_type", "local_radius", "global_block_size",
                                                   NULL};
        int k, ok = fat5__cfg_known(j->key);
        for (k = 0; !ok && is_long && long_handled[k]; k++) ok = strcmp(j->key, long_handled[k]) == 0;
        for (k = 0; !ok && handled[k]; k++) ok = strcmp(j->key, handled[k]) == 0;
        for (k = 0; !ok && is_flash && flash_handled[k]; k++) ok = strcmp(j->key, flash_handled[k]) == 0;
        for (k = 0; !ok && is_flash && fat5__cfg_flash_ignored[k]; k++)
            ok = strcmp(j->key, fat5__cfg_flash_ignored[k]) == 0;
        if (!ok) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: unknown field '%s'; fat5 cannot tell whether it changes the model, "
                           "so it refuses to guess (remove the field if it is harmless)",
                           fat5__msg_name(val, sizeof val, j->key));
            goto done;
        }
    }
    if ((st = fat5__cfg_int(ctx, root, "vocab_size", 0, &c.vocab_size, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "d_model", 0, &c.d_model, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "d_kv", 0, &c.d_kv, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "d_ff", 0, &c.d_ff, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "num_layers", 0, &c.num_layers, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "num_decoder_layers", 1, &dec_layers, &has_dec_layers)) ||
        (st = fat5__cfg_int(ctx, root, "num_heads", 0, &c.num_heads, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "relative_attention_num_buckets", 0, &c.rel_buckets, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "relative_attention_max_distance", 0, &c.rel_max_distance, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "pad_token_id", 1, &c.pad_token_id, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "eos_token_id", 1, &c.eos_token_id, NULL)) ||
        (st = fat5__cfg_int(ctx, root, "decoder_start_token_id", 1, &c.decoder_start_token_id, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "tie_word_embeddings", &c.tie_word_embeddings, NULL)) ||
        (st = fat5__cfg_bool(ctx, root, "scale_decoder_outputs", &c.scale_decoder_outputs, &has_scale)) ||
        (st = fat5__cfg_bool(ctx, root, "is_gated_act", &is_gated_act, &has_gated)))
        goto done;
    c.num_decoder_layers = has_dec_layers ? dec_layers : c.num_layers;
    if (!has_scale) c.scale_decoder_outputs = c.tie_word_embeddings;
    if ((j = fat5__json_get(root, "layer_norm_epsilon")) != NULL &&
        (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &c.layer_norm_eps))) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'layer_norm_epsilon' must be a number");
        goto done;
    }
    if ((j = fat5__json_get(root, "dropout_rate")) != NULL &&
        (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &c.dropout_rate))) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'dropout_rate' must be a number");
        goto done;
    }
    // initializer_factor only scales a fresh initialisation (fat5_model_create uses 1), but a value
    // no initialisation could use marks a broken file
    if ((j = fat5__json_get(root, "initializer_factor")) != NULL) {
        double f = 0;
        if (j->type != FAT5__J_NUMBER || !fat5__json_as_double(j, &f) || !(f > 0)) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'initializer_factor' must be a positive number");
            goto done;
        }
    }
    if ((j = fat5__json_get(root, "is_encoder_decoder")) != NULL && j->type != FAT5__J_TRUE) {
        st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "config.json: is_encoder_decoder must be true for a T5 model");
        goto done;
    }
    if ((j = fat5__json_get(root, "architectures")) != NULL && j->type != FAT5__J_NULL) {
        const fat5__json *a;
        if (j->type != FAT5__J_ARRAY) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'architectures' must be an array");
            goto done;
        }
        for (a = j->child; a; a = a->next) {
            if (a->type != FAT5__J_STRING) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'architectures' must hold strings");
                goto done;
            }
            if (strstr(a->str, "EncoderModel")) {
                st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                               "config.json: architecture %s has no decoder; fat5 runs encoder-decoder models",
                               fat5__msg_name(val, sizeof val, a->str));
                goto done;
            }
        }
    }
    if (is_long && (st = fat5__cfg_long(ctx, root, &c))) goto done;
    if (is_flash) {
        if ((st = fat5__cfg_flash(ctx, root, &c))) goto done;
        goto checked;   // FlashT5 ignores feed_forward_proj and what derives from it
    }
    // feed_forward_proj: "relu", "gelu", "gated-gelu" (tanh GELU), "gated-silu", ...
    if ((j = fat5__json_get(root, "feed_forward_proj")) != NULL) {
        const char *s, *dash;
        if (j->type != FAT5__J_STRING) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: 'feed_forward_proj' must be a string");
            goto done;
        }
        s = j->str;
        dash = strchr(s, '-');
        if (dash && (strncmp(s, "gated-", 6) != 0 || strchr(dash + 1, '-'))) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT,
                           "config.json: feed_forward_proj '%s' is not 'ACT' or 'gated-ACT'",
                           fat5__msg_name(val, sizeof val, s));
            goto done;
        }
        c.gated = dash != NULL;
        if (strcmp(s, "gated-gelu") == 0) c.act = FAT5_ACT_GELU_TANH;  // HF maps gated-gelu to gelu_new
        else if (!fat5__act_from_name(dash ? dash + 1 : s, &c.act)) {
            st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                           "config.json: feed_forward_proj '%s': unknown activation (relu, gelu, gelu_new, silu)",
                           fat5__msg_name(val, sizeof val, s));
            goto done;
        }
    }
    if (has_gated && is_gated_act != c.gated) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: is_gated_act = %s contradicts feed_forward_proj",
                       is_gated_act ? "true" : "false");
        goto done;
    }
    if ((j = fat5__json_get(root, "dense_act_fn")) != NULL) {
        fat5_act a;
        if (j->type != FAT5__J_STRING || !fat5__act_from_name(j->str, &a) || a != c.act) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "config.json: dense_act_fn '%s' contradicts feed_forward_proj",
                           j->type == FAT5__J_STRING ? fat5__msg_name(val, sizeof val, j->str) : "(not a string)");
            goto done;
        }
    }
checked:
    if ((st = fat5__cfg_pos(ctx, root, &c))) goto done;
    // a value no T5 model can have is a defect of the file here (validate says INVALID_ARG)
    st = fat5_model_config_validate(ctx, &c);
    if (st == FAT5_ERR_INVALID_ARG) st = FAT5_ERR_FORMAT;
    if (st == FAT5_OK) *out = c;
done:
    fat5__json_free(ctx, doc);
    return st;
}

// shortest decimal that reads back as the same double ("1e-06", not "9.9999999999999995e-07"),
// always with a '.' or an exponent so Python reads a float; '.' whatever the locale
static void fat5__fmt_double(char buf[40], double x) {
    int prec;
    double back;
    for (prec = 1; prec <= 17; prec++) {
        fat5__fmt_g(buf, 40, prec, x);
        if (fat5__strtod_c(buf, &back) && back == x) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
}

// The position-encoding fields, all of them, unless the config is T5 buckets with FAT5's defaults
// everywhere (a Hugging Face T5 config then stays exactly as transformers writes it) and is not
// a flash_t5 config.
static void fat5__cfg_pos_json(fat5__sb *b, const fat5_model_config *c) {
    fat5_model_config d = fat5_model_config_default();
    char num[40];
    if (c->pos_kind == FAT5_POS_T5 && c->alibi_asymmetric == d.alibi_asymmetric &&
        c->rotary_interleaved == d.rotary_interleaved && c->fire_mlp_width == d.fire_mlp_width &&
        c->rotary_fraction == d.rotary_fraction && c->rotary_base == d.rotary_base &&
        c->rotary_scale_base == d.rotary_scale_base && strcmp(c->model_type, "flash_t5") != 0)
        return;
    fat5__sb_printf(b, "  \"position_encoding_type\": \"%s\",\n", fat5__pos_name(c->pos_kind));
    fat5__sb_printf(b, "  \"alibi_mode\": \"%s\",\n", c->alibi_asymmetric ? "asymetric" : "symetric");
    fat5__sb_printf(b, "  \"fire_mlp_width\": %d,\n", c->fire_mlp_width);
    fat5__fmt_double(num, c->rotary_base);
    fat5__sb_printf(b, "  \"rotary_base\": %s,\n", num);
    fat5__fmt_double(num, c->rotary_fraction);
    fat5__sb_printf(b, "  \"rotary_emb_fraction\": %s,\n", num);
    fat5__sb_printf(b, "  \"rotary_interleaved\": %s,\n", c->rotary_interleaved ? "true" : "false");
    if (c->rotary_scale_base > 0) {
        fat5__fmt_double(num, c->rotary_scale_base);
        fat5__sb_printf(b, "  \"rotary_scale_base\": %s,\n", num);
    } else {
        fat5__sb_printf(b, "  \"rotary_scale_base\": null,\n");
    }
}

FAT5_API fat5_status fat5_model_config_to_json(fat5_ctx *ctx, const fat5_model_config *c, char **out,
                                               size_t *out_len) {
    fat5__sb b;
    char num[40];
    int flash = strcmp(c->model_type, "flash_t5") == 0, longt5 = strcmp(c->model_type, "longt5") == 0;
    const char *arch = strcmp(c->model_type, "umt5") == 0 ? "UMT5ForConditionalGeneration"
                       : strcmp(c->model_type, "mt5") == 0 ? "MT5ForConditionalGeneration"
                       : flash                             ? "FlashT5ForConditionalGeneration"
                       : longt5                            ? "LongT5ForConditionalGeneration"
                                                           : "T5ForConditionalGeneration";
    fat5_status st = fat5_model_config_validate(ctx, c);
    if (st) return st;
    if (c->bias_every_layer != (strcmp(c->model_type, "umt5") == 0))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: a bias table in every layer is model_type umt5 and nothing else");
    if (c->scale_decoder_outputs != c->tie_word_embeddings)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "config: scale_decoder_outputs != tie_word_embeddings cannot be written so that every "
                         "transformers version reads it back the same");
    fat5__sb_init(&b, ctx);
    fat5__sb_printf(&b, "{\n  \"architectures\": [\"%s\"],\n", arch);
    if (flash) fat5__sb_printf(&b, "  \"attention_scale\": 1.0,\n");
    fat5__sb_printf(&b, "  \"d_ff\": %lld,\n  \"d_kv\": %lld,\n  \"d_model\": %lld,\n", (long long)c->d_ff,
                    (long long)c->d_kv, (long long)c->d_model);
    fat5__sb_printf(&b, "  \"decoder_start_token_id\": %lld,\n", (long long)c->decoder_start_token_id);
    if (!flash) fat5__sb_printf(&b, "  \"dense_act_fn\": \"%s\",\n", fat5__act_name(c->act));
    fat5__fmt_double(num, c->dropout_rate);
    fat5__sb_printf(&b, "  \"dropout_rate\": %s,\n", num);
    if (longt5)
        fat5__sb_printf(&b, "  \"encoder_attention_type\": \"%s\",\n",
                        c->enc_attention == FAT5_ENC_ATTN_TGLOBAL ? "transient-global" : "local");
    fat5__sb_printf(&b, "  \"eos_token_id\": %lld,\n", (long long)c->eos_token_id);
    if (!flash)
        fat5__sb_printf(&b, "  \"feed_forward_proj\": \"%s%s\",\n", c->gated ? "gated-" : "",
                        c->gated && c->act == FAT5_ACT_GELU_TANH ? "gelu" : fat5__act_name(c->act));
    if (longt5) fat5__sb_printf(&b, "  \"global_block_size\": %lld,\n", (long long)c->global_block_size);
    fat5__sb_printf(&b, "  \"initializer_factor\": 1.0,\n  \"is_encoder_decoder\": true,\n");
    if (!flash) fat5__sb_printf(&b, "  \"is_gated_act\": %s,\n", c->gated ? "true" : "false");
    fat5__fmt_double(num, c->layer_norm_eps);
    fat5__sb_printf(&b, "  \"layer_norm_epsilon\": %s,\n", num);
    if (longt5) fat5__sb_printf(&b, "  \"local_radius\": %lld,\n", (long long)c->local_radius);
    fat5__sb_printf(&b, "  \"model_type\": ");
    fat5__sb_json_string(&b, c->model_type);
    fat5__sb_printf(&b, ",\n  \"num_decoder_layers\": %lld,\n  \"num_heads\": %lld,\n  \"num_layers\": %lld,\n",
                    (long long)c->num_decoder_layers, (long long)c->num_heads, (long long)c->num_layers);
    fat5__sb_printf(&b, "  \"pad_token_id\": %lld,\n", (long long)c->pad_token_id);
    fat5__cfg_pos_json(&b, c);
    fat5__sb_printf(&b, "  \"relative_attention_max_distance\": %lld,\n  \"relative_attention_num_buckets\": %lld,\n",
                    (long long)c->rel_max_distance, (long long)c->rel_buckets);
    if (!flash)
        fat5__sb_printf(&b, "  \"scale_decoder_outputs\": %s,\n", c->scale_decoder_outputs ? "true" : "false");
    fat5__sb_printf(&b, "  \"tie_word_embeddings\": %s,\n", c->tie_word_embeddings ? "true" : "false");
    if (flash)
        fat5__sb_printf(&b, "  \"use_gelu_act\": %s,\n  \"use_glu_mlp\": %s,\n",
                        c->act == FAT5_ACT_GELU_TANH ? "true" : "false", c->gated ? "true" : "false");
    fat5__sb_printf(&b, "  \"use_cache\": true,\n  \"vocab_size\": %lld\n}\n", (long long)c->vocab_size);
    if (b.oom) {
        fat5__sb_free(&b);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "config.json: out of memory");
    }
    *out = b.buf;
    *out_len = b.len;
    return FAT5_OK;
}

// =============================================================================================
// ==[4.2] model: parameters ==
// One fp32 arena in a fixed order, with the Hugging Face name of every tensor

typedef struct fat5__param {
    char name[128];      // the Hugging Face T5 name (the model's own code looks parameters up by it)
    char io_name[128];   // the name in the model's checkpoint scheme: name itself, or FAT5's (flash_t5)
    int ndim;
    int64_t shape[2];
    size_t offset;   // in floats, into the parameter arena
    size_t numel;
} fat5__param;

// indices (into the parameter table) of one layer's tensors; -1 where absent
typedef struct fat5__layer {
    int ln_sa, q, k, v, o, rel;       // self-attention: rel = this layer's bias table (maybe shared)
    int ln_ca, cq, ck, cv, co;        // cross-attention (decoder)
    int ln_ff, wi0, wi1, wo;          // wi0 = wi when not gated; wi1 = -1 then
    int grel, gln;                    // LongT5 transient-global encoder: the global bias table (block 0's,
                                      // shared) and this layer's norm of the global tokens; -1 otherwise
} fat5__layer;

// activations the backward pass needs, per layer, on the model's backend; all [tokens, dim]
// row-major. fp32 unless marked act (the backend's activation dtype: bf16 in a GPU bf16 context).
typedef struct fat5__layer_acts {
    fat5__addr h_sa, rs_sa, n_sa;       // stream before self-attention, its inverse RMS [T], normed input (act)
    fat5__addr q, k, v, att, lse;       // act [T, I]; att = attention output before o; lse [T, H]
                                        // transient-global encoder: n_sa, k, v have G more rows, the globals'
    fat5__addr gsum, rs_g;              // ... the block sums [G, D] before their norm, its inverse RMS [G]
    fat5__addr h_ca, rs_ca, n_ca;       // decoder: the same before cross-attention
    fat5__addr cq, ck, cv, catt, clse;  // act; ck, cv [Te, I]
    fat5__addr h_ff, rs_ff, n_ff;       // the same before the FFN
    fat5__addr ff_a, ff_b, ff_h;        // act [T, F]: wi0 x (pre-activation), wi1 x (gated), input of wo
    // q, k, v (and ck, cv; ff_a, ff_b) lie this many elements apart, so that one batched product
    // computes them from their weights, which lie one after the other in the parameters
    int64_t qkv_stride, ckv_stride, ff_stride;
} fat5__layer_acts;

// The activation workspace: one allocation on the backend, carved by fat5__ws_layout.
// The encoder attention of a forward (fat5_model_set_attention) and, for transient-global, the
// batch's global rows: G of them after the T token rows of n_sa, k and v, sequence s's from row
// cu_g[s] (int32 [n_seq + 1] on the backend); the seq map covers them; ones: a weight of 1 [D] to
// norm the globals when the checkpoint has no global_input_layer_norm.
typedef struct fat5__enc_attn {
    fat5_attention at;
    int64_t G;
    fat5__addr cu_g, ones;
} fat5__enc_attn;

typedef struct fat5__ws {
    fat5__layer_acts *enc, *dec;                 // [num_layers], [num_decoder_layers] (host array)
    fat5__enc_attn ea;                           // the encoder's attention pattern and its globals
    fat5__addr enc_hf, enc_rsf, enc_out;         // encoder final norm: stream [Te, D], inverse RMS, output (act)
    fat5__addr dec_hf, dec_rsf, dec_out;         // decoder final norm, as above
    fat5__addr logits, tok_lse, row_ce, row_z;   // [Td, V], [Td] x 3
    fat5__addr loss2;                            // double [2]: the last forward's mean ce and loss
    fat5__addr enc_tok, dec_tok, labels;         // int32 [Te], [Td], [Td]
    fat5__addr enc_cu, dec_cu;                   // int32 [n_seq + 1]
    fat5__addr enc_seq, dec_seq;                 // int32 token -> sequence maps [Te], [Td]
    fat5__addr lut_bidir, lut_causal;            // int32 [max_distance] buckets by distance
    // backward
    fat5__addr dlogits;                          // act [Td, V]
    fat5__addr dh_dec, dh_enc, d_enc_out;        // gradients of the streams and of the encoder output
    fat5__addr dh_act;                           // act [T, D]: a stream gradient as a matmul operand
    fat5__addr dn;                               // [T, D]: gradient of a norm's output
    fat5__addr dgsum;                            // [G, D]: gradient of the globals' block sums
    fat5__addr datt, dq, dk, dv;                 // act [T, I]; dq, dk, dv dqkv_stride elements apart
    fat5__addr delta;                            // [T, H]
    fat5__addr dffh, da;                         // act [T, F]; dffh dff_stride elements after da
    int64_t dqkv_stride, dff_stride;
    fat5__addr norm_scratch;                     // [FAT5__GPU_NORM_ROWS, D] partial norm-weight gradients
    fat5__addr dbias_scratch;                    // [FAT5__GPU_DBIAS_ROWS, nb, H] partial bias-table gradients (GPU)
} fat5__ws;

#define FAT5__GPU_NORM_ROWS 1024  // rows of norm_scratch: FAT5__GPU_NORM_BWD_BLOCKS on the GPU
#define FAT5__GPU_DBIAS_ROWS 1024 // rows of dbias_scratch: FAT5__GPU_DBIAS_BLOCKS on the GPU

// Rows of fp32 logits a training forward keeps at once: the loss and its gradient (dlogits, in the
// activation dtype, for the backward) are computed chunk by chunk, so that no [td, V] fp32 logits
// stay in memory (512 MiB for 4,096 rows of a 32,768 vocabulary).
#define FAT5__XENT_ROWS 1024

struct fat5_model {
    fat5_ctx *ctx;
    const fat5__backend *be;          // where the model computes, fixed at creation
    fat5_model_config cfg;
    int lm_head_tied;                 // lm_head is shared.weight
    int flash_names;                  // 1: checkpoints use FAT5's parameter names (model_type flash_t5)
    fat5__param *params;
    int n_params;
    size_t n_floats;
    float *w;                         // [n_floats] host copy of the parameters (load, save, set)
    int shared, enc_final_ln, dec_final_ln, lm_head;
    fat5__layer *enc, *dec;
    // parameters on the backend
    size_t act_size;                  // bytes per activation element (4, or 2 in bf16)
    fat5__addr wd;                    // fp32 [n_floats] master weights (on the CPU: m->w itself)
    fat5__addr wa;                    // matmul operands: a bf16 copy in bf16, else wd
    fat5__addr gd;                    // fp32 [n_floats] gradients
    // workspace for batches up to cap_* (fat5_model_reserve)
    int64_t cap_seq, cap_te, cap_td;
    int64_t xent_rows;                // fp32 logit rows a training forward keeps (FAT5__XENT_ROWS)
    int no_grad;                      // 1: forwards for the loss alone (evaluation): no dlogits, no backward
    int fwd_no_grad;                  // the last forward ran so
    fat5__addr ws_base;
    size_t ws_bytes;
    fat5__ws ws;
    int32_t *enc_cu, *dec_cu, *enc_tok, *dec_tok, *labels;  // the batch, staged on the host
    int32_t *seq_map;                 // [max(cap_te + globals, cap_td, max_distance)] host staging of maps and tables
    int32_t *enc_cu_g;                // [cap_seq + 1] host staging of the globals' rows (transient-global)
    fat5_attention attn;              // the encoder attention of the next forward (fat5_model_set_attention)
    // state of the last forward
    int have_fwd;                     // a forward ran on the current workspace
    int fwd_labels;                   // ... with labels (so backward has a loss to differentiate)
    int have_bwd;                     // backward already ran for it
    int training;                     // 0: inference mode (no gradients, one layer's workspace)
    int64_t n_seq, te, td, n_count;
    fat5_loss_config loss;
    char *gen_json;                   // generation_config.json found beside the checkpoint, or NULL
    size_t gen_json_len;              // (fat5_generate_config_default overlays it)
};

FAT5_API const fat5_model_config *fat5_model_get_config(const fat5_model *m) { return &m->cfg; }

// a tensor [d0, d1] (d1 <= 0: [d0]; d0 < 0: a 0-d scalar) at the end of the arena
static int fat5__add_param(fat5_model *m, int cap, const char *name, int64_t d0, int64_t d1) {
    fat5__param *p;
    FAT5_ASSERT(m->n_params < cap);
    (void)cap;
    p = &m->params[m->n_params];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = d0 < 0 ? 0 : d1 > 0 ? 2 : 1;   // d0 < 0: a scalar (0-d), one element
    p->shape[0] = d0 < 0 ? 0 : d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = d0 < 0 ? 1 : (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    p->offset = m->n_floats;
    m->n_floats += p->numel;
    return m->n_params++;
}

// The FAT5 (flashT5) name of a Hugging Face T5 parameter name, as FAT5's conversion script maps
// them: inside a block, layer.0 is self_attention_layer (q, k, v become Wq, Wk, Wv; the bias table
// moves under pe_encoding), the decoder's layer.1 is cross_attention_layer, the last layer is
// ff_layer (wi_0, wi_1 under act). Names outside the blocks are the same in both schemes.
static void fat5__flash_name(const char *hf, char *out, size_t n) {
    static const char *const map[][2] = {
        {"layer.0.SelfAttention.q.weight", "self_attention_layer.self_attention.Wq.weight"},
        {"layer.0.SelfAttention.k.weight", "self_attention_layer.self_attention.Wk.weight"},
        {"layer.0.SelfAttention.v.weight", "self_attention_layer.self_attention.Wv.weight"},
        {"layer.0.SelfAttention.o.weight", "self_attention_layer.self_attention.o.weight"},
        {"layer.0.SelfAttention.relative_attention_bias.weight",
         "self_attention_layer.self_attention.pe_encoding.relative_attention_bias.weight"},
        {"layer.0.layer_norm.weight", "self_attention_layer.layer_norm.weight"},
        {"layer.1.EncDecAttention.q.weight", "cross_attention_layer.cross_attention.Wq.weight"},
        {"layer.1.EncDecAttention.k.weight", "cross_attention_layer.cross_attention.Wk.weight"},
        {"layer.1.EncDecAttention.v.weight", "cross_attention_layer.cross_attention.Wv.weight"},
        {"layer.1.EncDecAttention.o.weight", "cross_attention_layer.cross_attention.o.weight"},
        {"DenseReluDense.wi_0.weight", "ff_layer.act.wi_0.weight"},
        {"DenseReluDense.wi_1.weight", "ff_layer.act.wi_1.weight"},
        {"DenseReluDense.wo.weight", "ff_layer.wo.weight"},
        {"layer.2.layer_norm.weight", "ff_layer.layer_norm.weight"}};
    const char *rest;
    size_t i, digits;
    int dec = strncmp(hf, "decoder.block.", 14) == 0;
    snprintf(out, n, "%s", hf);
    if (!dec && strncmp(hf, "encoder.block.", 14) != 0) return;
    digits = strspn(hf + 14, "0123456789");
    if (!digits || hf[14 + digits] != '.') return;
    rest = hf + 15 + digits;   // after "encoder.block.N."
    if (strcmp(rest, "layer.1.layer_norm.weight") == 0) {
        snprintf(out, n, "%.*s%s", (int)(rest - hf), hf,
                 dec ? "cross_attention_layer.layer_norm.weight" : "ff_layer.layer_norm.weight");
        return;
    }
    for (i = 0; i < sizeof map / sizeof map[0]; i++) {
        // the feed-forward entries match after "layer.1." (encoder) or "layer.2." (decoder)
        const char *r = rest;
        if (strncmp(map[i][0], "DenseReluDense.", 15) == 0) {
            if (strncmp(r, dec ? "layer.2." : "layer.1.", 8) != 0) continue;
            r += 8;
        }
        if (strcmp(r, map[i][0]) == 0) {
            snprintf(out, n, "%.*s%s", (int)(rest - hf), hf, map[i][1]);
            return;
        }
    }
}

// Builds the parameter table for cfg (no allocation of weights). Sizes were bounded by validate:
// every dimension < 2^24 and layers <= 1024, so the products below cannot overflow 64 bits.
static fat5_status fat5__build_params(fat5_model *m) {
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size;
    int cap = (int)(16 + (c->num_layers + c->num_decoder_layers) * 16), l;
    char nm[128];
    m->params = FAT5__CAST(fat5__param *, fat5__calloc(m->ctx, (size_t)cap, sizeof(fat5__param)));
    m->enc = FAT5__CAST(fat5__layer *, fat5__calloc(m->ctx, (size_t)c->num_layers, sizeof(fat5__layer)));
    m->dec = FAT5__CAST(fat5__layer *, fat5__calloc(m->ctx, (size_t)c->num_decoder_layers, sizeof(fat5__layer)));
    if (!m->params || !m->enc || !m->dec) return fat5__err(m->ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->shared = fat5__add_param(m, cap, "shared.weight", V, D);
    for (l = 0; l < 2; l++) {
        const char *stack = l == 0 ? "encoder" : "decoder";
        int64_t nl = l == 0 ? c->num_layers : c->num_decoder_layers, b;
        fat5__layer *L = l == 0 ? m->enc : m->dec;
        for (b = 0; b < nl; b++) {
            fat5__layer *y = &L[b];
            const char *ffl = l == 0 ? "1" : "2";
#define FAT5__P(field, fmt, d0, d1) \
    (snprintf(nm, sizeof nm, "%s.block.%lld." fmt, stack, (long long)b), y->field = fat5__add_param(m, cap, nm, d0, d1))
            FAT5__P(q, "layer.0.SelfAttention.q.weight", I, D);
            FAT5__P(k, "layer.0.SelfAttention.k.weight", I, D);
            FAT5__P(v, "layer.0.SelfAttention.v.weight", I, D);
            FAT5__P(o, "layer.0.SelfAttention.o.weight", D, I);
            // the position parameters: T5's bias table, or FIRE's block (its MLP and scalars, one
            // contiguous run in the order of fat5__attn_kind's FAT5__FIRE_* layout; FAT5's names);
            // ALiBi, RoPE and none have none (rel = -1)
            y->grel = y->gln = -1;
            if (b > 0 && !c->bias_every_layer) {
                y->rel = L[0].rel;
            } else if (c->pos_kind == FAT5_POS_T5) {
                FAT5__P(rel, "layer.0.SelfAttention.relative_attention_bias.weight", c->rel_buckets, c->num_heads);
                // LongT5's global table right after T5's: the attention ops read them as one [2, nb, H]
                if (l == 0 && c->enc_attention == FAT5_ENC_ATTN_TGLOBAL) {
                    FAT5__P(grel, "layer.0.TransientGlobalSelfAttention.global_relative_attention_bias.weight",
                            c->rel_buckets, c->num_heads);
                    FAT5_ASSERT(m->params[y->grel].offset == m->params[y->rel].offset + m->params[y->rel].numel);
                }
            } else if (c->pos_kind == FAT5_POS_FIRE) {
                static const char *const fire[6] = {"mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "c",
                                                    "L_multiplier"};
                int64_t W = c->fire_mlp_width, H = c->num_heads;
                int64_t d0[6] = {W, W, H, H, -1, -1}, d1[6] = {1, 0, W, 0, 0, 0};
                int e, last = -1;
                for (e = 0; e < 6; e++) {
                    snprintf(nm, sizeof nm, "%s.block.%lld.self_attention_layer.self_attention.pe_encoding.%s", stack,
                             (long long)b, fire[e]);
                    last = fat5__add_param(m, cap, nm, d0[e], d1[e]);
                    if (e == 0) y->rel = last;
                }
                FAT5_ASSERT(m->params[last].offset - m->params[y->rel].offset == (size_t)FAT5__FIRE_LM(H, W));
            } else {
                y->rel = -1;
            }
            FAT5__P(ln_sa, "layer.0.layer_norm.weight", D, 0);
            if (l == 0 && c->enc_attention == FAT5_ENC_ATTN_TGLOBAL) {
                if (b > 0) y->grel = L[0].grel;
                FAT5__P(gln, "layer.0.TransientGlobalSelfAttention.global_input_layer_norm.weight", D, 0);
            }
            y->ln_ca = y->cq = y->ck = y->cv = y->co = -1;
            if (l == 1) {
                FAT5__P(cq, "layer.1.EncDecAttention.q.weight", I, D);
                FAT5__P(ck, "layer.1.EncDecAttention.k.weight", I, D);
                FAT5__P(cv, "layer.1.EncDecAttention.v.weight", I, D);
                FAT5__P(co, "layer.1.EncDecAttention.o.weight", D, I);
                FAT5__P(ln_ca, "layer.1.layer_norm.weight", D, 0);
            }
            snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.DenseReluDense.%s.weight", stack, (long long)b, ffl,
                     c->gated ? "wi_0" : "wi");
            y->wi0 = fat5__add_param(m, cap, nm, F, D);
            y->wi1 = -1;
            if (c->gated) {
                snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.DenseReluDense.wi_1.weight", stack, (long long)b, ffl);
                y->wi1 = fat5__add_param(m, cap, nm, F, D);
            }
            snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.DenseReluDense.wo.weight", stack, (long long)b, ffl);
            y->wo = fat5__add_param(m, cap, nm, D, F);
            snprintf(nm, sizeof nm, "%s.block.%lld.layer.%s.layer_norm.weight", stack, (long long)b, ffl);
            y->ln_ff = fat5__add_param(m, cap, nm, D, 0);
#undef FAT5__P
        }
        snprintf(nm, sizeof nm, "%s.final_layer_norm.weight", stack);
        if (l == 0) m->enc_final_ln = fat5__add_param(m, cap, nm, D, 0);
        else m->dec_final_ln = fat5__add_param(m, cap, nm, D, 0);
    }
    m->lm_head = m->lm_head_tied ? m->shared : fat5__add_param(m, cap, "lm_head.weight", V, D);
    m->flash_names = strcmp(c->model_type, "flash_t5") == 0;
    for (l = 0; l < m->n_params; l++) {
        fat5__param *p = &m->params[l];
        const char *sa = strstr(p->name, ".layer.0.SelfAttention.");
        if (m->flash_names)
            fat5__flash_name(p->name, p->io_name, sizeof p->io_name);
        else if (c->enc_attention != FAT5_ENC_ATTN_FULL && sa && strncmp(p->name, "encoder.", 8) == 0)
            // LongT5 names its encoder's self-attention after the attention type
            snprintf(p->io_name, sizeof p->io_name, "%.*s.layer.0.%s.%s", (int)(sa - p->name), p->name,
                     c->enc_attention == FAT5_ENC_ATTN_LOCAL ? "LocalSelfAttention" : "TransientGlobalSelfAttention",
                     sa + strlen(".layer.0.SelfAttention."));
        else
            snprintf(p->io_name, sizeof p->io_name, "%s", p->name);
    }
    return FAT5_OK;
}

static fat5_status fat5__model_alloc(fat5_ctx *ctx, const fat5_model_config *cfg, int lm_head_tied,
                                     fat5_model **out) {
    fat5_model *m;
    fat5_status st;
    *out = NULL;
    if ((st = fat5_model_config_validate(ctx, cfg))) return st;
    m = FAT5__CAST(fat5_model *, fat5__calloc(ctx, 1, sizeof *m));
    if (!m) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->ctx = ctx;
    m->cfg = *cfg;
    m->lm_head_tied = lm_head_tied;
    m->training = 1;
    m->xent_rows = FAT5__XENT_ROWS;
    m->attn.type = cfg->enc_attention;
    m->attn.radius = m->attn.type == FAT5_ENC_ATTN_FULL ? 0 : cfg->local_radius;
    m->attn.global = m->attn.type == FAT5_ENC_ATTN_TGLOBAL ? cfg->global_block_size : 0;
    if (ctx->cfg.attention && (st = fat5_model_set_attention(m, ctx->cfg.attention))) {
        fat5__err_prefix(ctx, st, "the context's attention: ");
        fat5_model_destroy(m);
        return st;
    }
    if ((st = fat5__build_params(m))) {
        fat5_model_destroy(m);
        return st;
    }
    m->be = fat5__backend_of(ctx);
    m->act_size = m->be->act_size(ctx);
    m->w = FAT5__CAST(float *, fat5__calloc(ctx, m->n_floats, sizeof(float)));
    if (!m->w) {
        fat5_model_destroy(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "model: cannot allocate %zu parameters (%.1f MiB)",
                         m->n_floats, (double)m->n_floats * 4.0 / 1048576.0);
    }
    *out = m;
    return FAT5_OK;
}

static void fat5__ws_free(fat5_model *m);  // the workspace (model section)

// the backend's parameter arenas (wd is m->w itself on the CPU)
static void fat5__model_free_params(fat5_model *m) {
    if (m->wa && m->wa != m->wd) m->be->free(m->ctx, m->wa);
    if (m->wd && m->wd != FAT5__ADDR(m->w)) m->be->free(m->ctx, m->wd);
    if (m->gd) m->be->free(m->ctx, m->gd);
    m->wa = m->wd = m->gd = 0;
}

FAT5_API void fat5_model_destroy(fat5_model *m) {
    fat5_ctx *ctx;
    if (!m) return;
    ctx = m->ctx;
    if (m->be) {
        fat5__ws_free(m);
        fat5__model_free_params(m);
    }
    fat5__free(ctx, m->params);
    fat5__free(ctx, m->enc);
    fat5__free(ctx, m->dec);
    fat5__free(ctx, m->w);
    fat5__free(ctx, m->gen_json);
    fat5__free(ctx, m);
}

// Refreshes the matmul operands of parameters [off, off + n) from the fp32 master weights (bf16).
static fat5_status fat5__model_refresh_operands(fat5_model *m, size_t off, size_t n) {
    if (m->wa == m->wd || n == 0) return FAT5_OK;
    return m->be->f32_to_bf16(m->ctx, m->wa + 2 * (fat5__addr)off, m->wd + 4 * (fat5__addr)off, (int64_t)n);
}

// Puts the host weights (m->w) where the context computes: master weights, matmul operands and
// zeroed gradients on the backend. On the CPU the master weights are m->w itself.
static fat5_status fat5__model_place(fat5_model *m) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    size_t n = m->n_floats;
    fat5_status st;
    if (be == &fat5__cpu_backend) {
        m->wd = m->wa = FAT5__ADDR(m->w);
        if ((st = be->alloc(ctx, n * 4, &m->gd))) return fat5__err_prefix(ctx, st, "model gradients: ");
        return FAT5_OK;
    }
    if ((st = be->alloc(ctx, n * 4, &m->wd)) || (st = be->alloc(ctx, n * 4, &m->gd)) ||
        (m->act_size == 2 && (st = be->alloc(ctx, n * 2, &m->wa))))
        return fat5__err_prefix(ctx, st, "model weights (%zu parameters) on the %s: ", n, be->name);
    if (!m->wa) m->wa = m->wd;
    if ((st = be->upload(ctx, m->wd, m->w, n * 4)) || (st = fat5__model_refresh_operands(m, 0, n))) return st;
    return be->sync(ctx);
}

// The backend's master weights back into m->w (before a save).
static fat5_status fat5__model_pull_params(fat5_model *m) {
    return m->be->download(m->ctx, m->w, m->wd, m->n_floats * 4);
}

FAT5_API fat5_status fat5_model_create(fat5_ctx *ctx, const fat5_model_config *cfg, uint64_t seed,
                                       fat5_model **out) {
    fat5_model *m;
    fat5_rng r = fat5_rng_init(seed);
    fat5_status st;
    int i;
    double D = (double)cfg->d_model;
    if (!out || !cfg) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_create: NULL argument");
    if ((st = fat5__model_alloc(ctx, cfg, cfg->tie_word_embeddings, &m))) return st;
    // Hugging Face's T5 initialisation (factor 1), with lm_head at std d_model^-0.5; FIRE as FAT5:
    // c = 0.1, L_multiplier = 1, its MLP with PyTorch's Linear default, uniform +-1/sqrt(fan_in)
    for (i = 0; i < m->n_params; i++) {
        const fat5__param *p = &m->params[i];
        const char *n = p->name, *pe = strstr(n, ".pe_encoding.");
        float *w = m->w + p->offset;
        double std;
        size_t j;
        if (pe && cfg->pos_kind == FAT5_POS_FIRE) {
            double bound = strstr(pe, ".mlp.2.") ? 1.0 / sqrt((double)cfg->fire_mlp_width) : 1.0;
            if (strcmp(pe, ".pe_encoding.c") == 0) w[0] = 0.1f;
            else if (strcmp(pe, ".pe_encoding.L_multiplier") == 0) w[0] = 1.0f;
            else
                for (j = 0; j < p->numel; j++) w[j] = (float)(bound * (2.0 * fat5_rng_uniform(&r) - 1.0));
            continue;
        }
        if (strstr(n, "layer_norm")) {
            for (j = 0; j < p->numel; j++) w[j] = 1.0f;
            continue;
        }
        if (strcmp(n, "shared.weight") == 0) std = 1.0;
        else if (strstr(n, ".q.weight")) std = 1.0 / sqrt(D * (double)cfg->d_kv);
        else if (strstr(n, ".o.weight")) std = 1.0 / sqrt((double)(cfg->num_heads * cfg->d_kv));
        else if (strstr(n, ".wo.weight")) std = 1.0 / sqrt((double)cfg->d_ff);
        else std = 1.0 / sqrt(D);  // k, v, wi*, relative_attention_bias, lm_head
        for (j = 0; j < p->numel; j++) w[j] = (float)(std * fat5_rng_normal(&r));
    }
    if ((st = fat5__model_place(m))) {
        fat5_model_destroy(m);
        return st;
    }
    *out = m;
    return FAT5_OK;
}

FAT5_API int64_t fat5_model_num_params(const fat5_model *m) { return (int64_t)m->n_floats; }
FAT5_API int fat5_model_num_tensors(const fat5_model *m) { return m->n_params; }

FAT5_API fat5_status fat5_model_tensor_info(const fat5_model *m, int index, fat5_tensor_info *out) {
    const fat5__param *p;
    if (index < 0 || index >= m->n_params)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "tensor index %d out of range [0, %d)", index, m->n_params);
    p = &m->params[index];
    out->name = p->io_name;
    out->ndim = p->ndim;
    out->shape[0] = p->shape[0];
    out->shape[1] = p->shape[1];
    out->numel = (int64_t)p->numel;
    return FAT5_OK;
}

FAT5_API int fat5_model_find_tensor(const fat5_model *m, const char *name) {
    int i;
    for (i = 0; i < m->n_params; i++)
        if (strcmp(m->params[i].io_name, name) == 0) return i;
    for (i = 0; i < m->n_params; i++)   // the T5 name of a FAT5 or LongT5 tensor
        if (strcmp(m->params[i].name, name) == 0) return i;
    return -1;
}

// what: 0 read the parameter, 1 write it, 2 read its gradient
static fat5_status fat5__param_io(fat5_model *m, const char *name, float *buf, int64_t n, int what) {
    int i = name ? fat5_model_find_tensor(m, name) : -1;
    const fat5__param *p;
    const fat5__backend *be = m->be;
    size_t bytes;
    fat5_status st;
    if (i < 0) return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "no parameter named '%s'", name ? name : "(null)");
    p = &m->params[i];
    bytes = p->numel * sizeof(float);
    if (n != (int64_t)p->numel || !buf)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "parameter '%s' has %zu elements, buffer has %lld", name,
                         p->numel, buf ? (long long)n : 0LL);
    if (what == 0) return be->download(m->ctx, buf, m->wd + 4 * (fat5__addr)p->offset, bytes);
    if (what == 2) return be->download(m->ctx, buf, m->gd + 4 * (fat5__addr)p->offset, bytes);
    memcpy(m->w + p->offset, buf, bytes);  // the host copy, then the backend's
    if ((st = be->upload(m->ctx, m->wd + 4 * (fat5__addr)p->offset, m->w + p->offset, bytes)) ||
        (st = fat5__model_refresh_operands(m, p->offset, p->numel)))
        return st;
    return be->sync(m->ctx);
}
FAT5_API fat5_status fat5_model_get_param(fat5_model *m, const char *name, float *dst, int64_t n) {
    return fat5__param_io(m, name, dst, n, 0);
}
FAT5_API fat5_status fat5_model_set_param(fat5_model *m, const char *name, const float *src, int64_t n) {
    return fat5__param_io(m, name, FAT5__CAST(float *, (void *)(uintptr_t)src), n, 1);
}
FAT5_API fat5_status fat5_model_get_grad(fat5_model *m, const char *name, float *dst, int64_t n) {
    if (m && !m->gd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_grad: the model is in inference mode");
    return fat5__param_io(m, name, dst, n, 2);
}
FAT5_API fat5_status fat5_model_zero_grad(fat5_model *m) {
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!m->gd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_zero_grad: the model is in inference mode");
    st = m->be->memset0(m->ctx, m->gd, m->n_floats * sizeof(float));
    return st ? st : m->be->sync(m->ctx);
}
// =============================================================================================
// ==[4.3] model: workspace, forward, backward ==
// Written once, over the ops of the model's backend.
//
// Precision (DESIGN §5): fp32 master weights, gradients, residual stream, logits and loss;
// matmul inputs and saved activations in the backend's activation dtype (bf16 in a GPU bf16
// context, fp32 otherwise); accumulation in fp32 (double in the CPU ops).

FAT5_API fat5_loss_config fat5_loss_config_default(void) {
    fat5_loss_config l;
    l.z_loss = 0.0;
    l.label_smoothing = 0.0;
    return l;
}

#define FAT5__TRY(call)                     \
    do {                                    \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)

// backend addresses of parameter idx: fp32 master, gradient, and matmul operand
static fat5__addr fat5__pw(const fat5_model *m, int idx) { return m->wd + 4 * (fat5__addr)m->params[idx].offset; }
static fat5__addr fat5__pg(const fat5_model *m, int idx) { return m->gd + 4 * (fat5__addr)m->params[idx].offset; }
static fat5__addr fat5__pa(const fat5_model *m, int idx) {
    return m->wa == m->wd ? fat5__pw(m, idx) : m->wa + 2 * (fat5__addr)m->params[idx].offset;
}

// ---- position encodings: what the attention ops and rope get from the config ----

// The position and pattern arguments of an attention op: kind (mask | scheme | pattern,
// fat5__attn_kind), the `bias` parameter (T5's table or FIRE's block, 0 for none), nb and
// max_distance, g and cu_g as the ops read them.
typedef struct fat5__pos_args {
    int kind, nb, md, g;
    fat5__addr bias, dbias;   // weights and gradient of the layer's position parameters, or 0
    fat5__addr cu_g;          // transient-global: the globals' first rows
} fat5__pos_args;

// for a self-attention (mask BIDIR or CAUSAL) of layer y, or cross-attention (CROSS, no position
// term); ea: the encoder's attention pattern (BIDIR)
static fat5__pos_args fat5__model_pos(const fat5_model *m, const fat5__layer *y, int mask, const fat5__enc_attn *ea) {
    const fat5_model_config *c = &m->cfg;
    fat5__pos_args p;
    p.kind = mask;
    p.nb = (int)c->rel_buckets;
    p.md = (int)c->rel_max_distance;
    p.g = 0;
    p.bias = p.dbias = p.cu_g = 0;
    if (mask == FAT5__ATTN_CROSS) return p;
    if (mask == FAT5__ATTN_BIDIR && ea && ea->at.type != FAT5_ENC_ATTN_FULL) {
        p.kind |= FAT5__ATTN_WINDOW(ea->at.radius);
        p.g = (int)ea->at.global;
        if (ea->at.type == FAT5_ENC_ATTN_BLOCK_GLOBAL) p.kind |= FAT5__ATTN_PREFIX;
        if (ea->at.type == FAT5_ENC_ATTN_TGLOBAL)
            p.kind |= FAT5__ATTN_TGLOBAL | (y->grel < 0 ? FAT5__ATTN_GSHARED : 0);
        p.cu_g = ea->cu_g;
    }
    if (c->pos_kind == FAT5_POS_ALIBI)
        p.kind |= FAT5__ATTN_ALIBI | (mask == FAT5__ATTN_BIDIR && c->alibi_asymmetric ? FAT5__ATTN_ALIBI_ASYM : 0);
    if (c->pos_kind == FAT5_POS_FIRE) {
        p.kind |= FAT5__ATTN_FIRE;
        p.nb = c->fire_mlp_width;   // md stays relative_attention_max_distance: FIRE's L0 (init_L)
    }
    if (y->rel >= 0) {
        p.bias = fat5__pw(m, y->rel);
        if (m->gd) p.dbias = fat5__pg(m, y->rel);
    }
    return p;
}

// RoPE of a self-attention's q and k [T, H*d_kv] in place (nothing for other encodings); positions
// from cu / seq (per packed sequence) or pos[0] (a decode step). transpose: the backward of dq, dk.
static fat5_status fat5__model_rope(fat5_model *m, fat5__addr q, fat5__addr k, fat5__addr cu, fat5__addr seq,
                                    fat5__addr pos, int64_t T, int transpose) {
    const fat5_model_config *c = &m->cfg;
    int rd = (int)((double)c->d_kv * c->rotary_fraction), H = (int)c->num_heads, dk = (int)c->d_kv;
    int f = (c->rotary_interleaved ? FAT5__ROPE_INTERLEAVED : 0) | (transpose ? FAT5__ROPE_TRANSPOSE : 0);
    float base = (float)c->rotary_base, xpos = (float)c->rotary_scale_base;
    fat5_status st;
    if (c->pos_kind != FAT5_POS_ROPE) return FAT5_OK;
    FAT5__TRY(m->be->rope(m->ctx, q, cu, seq, pos, T, H, dk, rd, base, xpos, f));
    return m->be->rope(m->ctx, k, cu, seq, pos, T, H, dk, rd, base, xpos, f | FAT5__ROPE_KEY);
}

// Carves the next buffer of rows x cols elements of esize bytes out of a workspace at `base`, on a
// 256-byte boundary (an empty buffer is 0: absent, as the ops and the model read it): the layout functions keep `off` (bytes so far), `ok` (0 once a size
// overflows) and `base` (0: measure only) in scope. Used by fat5__ws_layout and the decoder's.
#define FAT5__WS(field, rows, cols, esize)                                                                    \
    do {                                                                                                    \
        size_t n_;                                                                                          \
        off = (off + 255) & ~(size_t)255;                                                                   \
        if (!fat5__mul3_ok((size_t)(rows), (size_t)(cols), (size_t)(esize), &n_) || !fat5__add_ok(off, n_, &off)) \
            ok = 0;                                                                                         \
        (field) = base && ok && n_ ? base + (fat5__addr)(off - n_) : 0;                                     \
    } while (0)

// transient-global tokens of te encoder tokens at most (a sequence of n has n / g), for attention at
static int64_t fat5__globals_max(const fat5_attention *at, int64_t te) {
    return at->type == FAT5_ENC_ATTN_TGLOBAL ? te / at->global : 0;
}
// rows of the encoder's keys and values for te tokens: the tokens', then the globals'
static int64_t fat5__enc_kv_rows(const fat5_attention *at, int64_t te) { return te + fat5__globals_max(at, te); }

// n buffers of rows x cols elements of esize bytes, one after another, `stride` (rows x cols)
// elements apart: the first's address is `first`, the others' fat5__ws_block(first, stride, esize, i)
#define FAT5__WS_BLOCKS(first, n, rows, cols, esize, stride)                                              \
    do {                                                                                                \
        (stride) = (int64_t)(rows) * (int64_t)(cols);                                                   \
        FAT5__WS(first, (size_t)(n) * (size_t)(rows), cols, esize);                                     \
    } while (0)
static fat5__addr fat5__ws_block(fat5__addr first, int64_t stride, size_t esize, int i) {
    return first ? first + (fat5__addr)((int64_t)i * stride) * esize : 0;
}

static size_t fat5__xent_rows(const fat5_model *m, size_t td) {
    return td < (size_t)m->xent_rows ? td : (size_t)m->xent_rows;
}

// Lays out the workspace for n_seq sequences, te encoder and td decoder tokens: every buffer on a
// 256-byte boundary, fp32 (4 bytes), int32 (4) or activation (m->act_size) elements. With base == 0
// it only measures. Returns 0 when the size overflows.
static int fat5__ws_layout(fat5_model *m, fat5__addr base, int64_t n_seq, int64_t te, int64_t td, size_t *total) {
    const fat5_model_config *c = &m->cfg;
    fat5__ws *w = &m->ws;
    size_t A = m->act_size, D = (size_t)c->d_model, I = (size_t)(c->num_heads * c->d_kv), F = (size_t)c->d_ff;
    size_t H = (size_t)c->num_heads, V = (size_t)c->vocab_size, T = (size_t)(te > td ? te : td), off = 0;
    size_t Te = (size_t)te, Td = (size_t)td, md = (size_t)c->rel_max_distance;
    size_t Gx = (size_t)fat5__globals_max(&m->attn, te), Tkv = Te + Gx > T ? Te + Gx : T;  // globals: after the tokens
    size_t Tb = m->training ? T : 0, Teb = m->training ? Te : 0, Tdb = m->training ? Td : 0;  // backward only
    int ok = 1, l, own_gtable = m->attn.type == FAT5_ENC_ATTN_TGLOBAL && c->num_layers && m->enc[0].grel >= 0;
    w->ea.at = m->attn;
    for (l = 0; l < c->num_layers + c->num_decoder_layers && ok; l++) {
        int dec = l >= c->num_layers;
        fat5__layer_acts *a = dec ? &w->dec[l - c->num_layers] : &w->enc[l];
        size_t Tl = dec ? Td : Te, Tlb = m->training ? Tl : 0;
        if (!m->training && l != 0 && l != c->num_layers) {  // inference: every layer reuses the first's buffers
            *a = dec ? w->dec[0] : w->enc[0];
            continue;
        }
        memset(a, 0, sizeof *a);
        FAT5__WS(a->h_sa, Tlb, D, 4);
        FAT5__WS(a->rs_sa, Tl, 1, 4);
        FAT5__WS(a->n_sa, Tl + (dec ? 0 : Gx), D, A);
        // q | k | v: three blocks of the rows of k and v (q's extra rows unused), one batched product
        FAT5__WS_BLOCKS(a->q, 3, Tl + (dec ? 0 : Gx), I, A, a->qkv_stride);
        a->k = fat5__ws_block(a->q, a->qkv_stride, A, 1);
        a->v = fat5__ws_block(a->q, a->qkv_stride, A, 2);
        FAT5__WS(a->att, Tl, I, A);
        FAT5__WS(a->lse, Tl, H, 4);
        if (!dec) FAT5__WS(a->gsum, Gx, D, 4);
        if (!dec) FAT5__WS(a->rs_g, Gx, 1, 4);
        if (dec) {
            FAT5__WS(a->h_ca, Tlb, D, 4);
            FAT5__WS(a->rs_ca, Tl, 1, 4);
            FAT5__WS(a->n_ca, Tl, D, A);
            FAT5__WS(a->cq, Tl, I, A);
            FAT5__WS_BLOCKS(a->ck, 2, Te, I, A, a->ckv_stride);
            a->cv = fat5__ws_block(a->ck, a->ckv_stride, A, 1);
            FAT5__WS(a->catt, Tl, I, A);
            FAT5__WS(a->clse, Tl, H, 4);
        }
        FAT5__WS(a->h_ff, Tlb, D, 4);
        FAT5__WS(a->rs_ff, Tl, 1, 4);
        FAT5__WS(a->n_ff, Tl, D, A);
        FAT5__WS_BLOCKS(a->ff_a, c->gated ? 2 : 1, Tl, F, A, a->ff_stride);
        a->ff_b = c->gated ? fat5__ws_block(a->ff_a, a->ff_stride, A, 1) : 0;
        FAT5__WS(a->ff_h, Tl, F, A);
    }
    FAT5__WS(w->enc_hf, Te, D, 4);
    FAT5__WS(w->enc_rsf, Te, 1, 4);
    FAT5__WS(w->enc_out, Te, D, A);
    FAT5__WS(w->dec_hf, Td, D, 4);
    FAT5__WS(w->dec_rsf, Td, 1, 4);
    FAT5__WS(w->dec_out, Td, D, A);
    FAT5__WS(w->logits, m->training ? fat5__xent_rows(m, Td) : Td, V, 4);  // training: one chunk of rows at a time
    FAT5__WS(w->tok_lse, Td, 1, 4);
    FAT5__WS(w->loss2, 2, 1, 8);
    FAT5__WS(w->row_ce, Td, 1, 4);
    FAT5__WS(w->row_z, Td, 1, 4);
    FAT5__WS(w->enc_tok, Te, 1, 4);
    FAT5__WS(w->dec_tok, Td, 1, 4);
    FAT5__WS(w->labels, Td, 1, 4);
    FAT5__WS(w->enc_cu, (size_t)n_seq + 1, 1, 4);
    FAT5__WS(w->dec_cu, (size_t)n_seq + 1, 1, 4);
    FAT5__WS(w->enc_seq, Te + Gx, 1, 4);
    FAT5__WS(w->dec_seq, Td, 1, 4);
    FAT5__WS(w->ea.cu_g, m->attn.type == FAT5_ENC_ATTN_TGLOBAL ? (size_t)n_seq + 1 : 0, 1, 4);
    FAT5__WS(w->ea.ones, m->attn.type == FAT5_ENC_ATTN_TGLOBAL ? D : 0, 1, 4);
    FAT5__WS(w->lut_bidir, md, 1, 4);
    FAT5__WS(w->lut_causal, md, 1, 4);
    FAT5__WS(w->dlogits, Tdb, V, A);
    FAT5__WS(w->dh_dec, Tdb, D, 4);
    FAT5__WS(w->dh_enc, Teb, D, 4);
    FAT5__WS(w->d_enc_out, Teb, D, 4);
    FAT5__WS(w->dh_act, Tb, D, A);
    FAT5__WS(w->dn, m->training ? Tkv : 0, D, 4);
    FAT5__WS(w->dgsum, m->training ? Gx : 0, D, 4);
    FAT5__WS(w->datt, Tb, I, A);
    FAT5__WS_BLOCKS(w->dq, 3, m->training ? Tkv : 0, I, A, w->dqkv_stride);
    w->dk = fat5__ws_block(w->dq, w->dqkv_stride, A, 1);
    w->dv = fat5__ws_block(w->dq, w->dqkv_stride, A, 2);
    FAT5__WS(w->delta, Tb, H, 4);
    FAT5__WS_BLOCKS(w->da, 2, Tb, F, A, w->dff_stride);
    w->dffh = fat5__ws_block(w->da, w->dff_stride, A, 1);
    FAT5__WS(w->norm_scratch, m->training ? FAT5__GPU_NORM_ROWS : 0, D, 4);
    // the CPU ops need no bias-gradient partials
    // the GPU's per-block partial sums of the position gradient: T5's table, or FIRE's per-head
    // shares with one more row for their sum over the blocks (fat5__gpu_attn_bwd_dq)
    FAT5__WS(w->dbias_scratch,
             m->be == &fat5__cpu_backend || !m->training ? 0
             : c->pos_kind == FAT5_POS_FIRE ? FAT5__GPU_DBIAS_ROWS + 1
             : c->pos_kind == FAT5_POS_T5 ? FAT5__GPU_DBIAS_ROWS : 0,
             c->pos_kind == FAT5_POS_FIRE ? (size_t)FAT5__FIRE_SHARES(c->fire_mlp_width) * H
                                          : (size_t)c->rel_buckets * H * (own_gtable ? 2 : 1),
             4);
    *total = off;
    return ok;
}

static void fat5__ws_free(fat5_model *m) {
    fat5_ctx *ctx = m->ctx;
    if (m->ws_base) m->be->free(ctx, m->ws_base);
    fat5__free(ctx, m->ws.enc);
    fat5__free(ctx, m->ws.dec);
    fat5__free(ctx, m->enc_cu);
    fat5__free(ctx, m->dec_cu);
    fat5__free(ctx, m->enc_tok);
    fat5__free(ctx, m->dec_tok);
    fat5__free(ctx, m->labels);
    fat5__free(ctx, m->seq_map);
    memset(&m->ws, 0, sizeof m->ws);
    m->ws_base = 0;
    m->ws_bytes = 0;
    fat5__free(ctx, m->enc_cu_g);
    m->enc_cu = m->dec_cu = m->enc_tok = m->dec_tok = m->labels = m->seq_map = m->enc_cu_g = NULL;
    m->cap_seq = m->cap_te = m->cap_td = 0;
    m->have_fwd = m->fwd_labels = m->have_bwd = 0;
}

// Scratch the CPU ops take from the context's arena for batches of te / td tokens, in bytes:
// the matrix products' packed blocks, or one query's scores and output in attention, for each of
// the context's threads.
static size_t fat5__cpu_scratch_need(const fat5_model *m, int64_t te, int64_t td) {
    const fat5_model_config *c = &m->cfg;
    int64_t tk = fat5__enc_kv_rows(&m->attn, te);
    size_t n = (size_t)((tk > td ? tk : td) + c->d_kv) * sizeof(double) * (size_t)m->ctx->n_threads;
    size_t mm = fat5__cpu_mm_scratch(m->ctx);
    return n > mm ? n : mm;
}

FAT5_API fat5_status fat5_model_reserve(fat5_model *m, int64_t n_seq, int64_t te, int64_t td) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    size_t total = 0, md = (size_t)m->cfg.rel_max_distance, maps, i;
    fat5_status st;
    if (n_seq < 1 || te < 1 || td < 1 || te > INT32_MAX || td > INT32_MAX || n_seq > te)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_model_reserve: n_seq %lld, encoder tokens %lld, decoder tokens %lld: each must be "
                         "in [1, 2^31) and n_seq <= encoder tokens",
                         (long long)n_seq, (long long)te, (long long)td);
    if (fat5__enc_kv_rows(&m->attn, te) > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_reserve: %lld encoder tokens and their %lld "
                         "transient-global tokens exceed 2^31 - 1 rows", (long long)te,
                         (long long)fat5__globals_max(&m->attn, te));
    if (n_seq <= m->cap_seq && te <= m->cap_te && td <= m->cap_td) return FAT5_OK;
    if (n_seq < m->cap_seq) n_seq = m->cap_seq;
    if (te < m->cap_te) te = m->cap_te;
    if (td < m->cap_td) td = m->cap_td;
    fat5__ws_free(m);
    maps = (size_t)(fat5__enc_kv_rows(&m->attn, te) > td ? fat5__enc_kv_rows(&m->attn, te) : td);
    if (md > maps) maps = md;
    m->ws.enc = FAT5__CAST(fat5__layer_acts *, fat5__calloc(ctx, (size_t)m->cfg.num_layers, sizeof(fat5__layer_acts)));
    m->ws.dec = FAT5__CAST(fat5__layer_acts *,
                           fat5__calloc(ctx, (size_t)m->cfg.num_decoder_layers, sizeof(fat5__layer_acts)));
    m->enc_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    m->dec_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    m->enc_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)te, sizeof(int32_t)));
    m->dec_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)td, sizeof(int32_t)));
    m->labels = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)td, sizeof(int32_t)));
    m->seq_map = FAT5__CAST(int32_t *, fat5__calloc(ctx, maps, sizeof(int32_t)));
    m->enc_cu_g = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)n_seq + 1, sizeof(int32_t)));
    if (!m->ws.enc || !m->ws.dec || !m->enc_cu || !m->dec_cu || !m->enc_tok || !m->dec_tok || !m->labels ||
        !m->seq_map || !m->enc_cu_g) {
        fat5__ws_free(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: out of memory");
    }
    if (!fat5__ws_layout(m, 0, n_seq, te, td, &total)) {
        fat5__ws_free(m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_reserve: workspace size overflows");
    }
    if ((st = be->alloc(ctx, total, &m->ws_base))) {
        fat5__ws_free(m);
        return fat5__err_prefix(ctx, st, "fat5_model_reserve: %.1f MiB of activations for %lld + %lld tokens: ",
                                (double)total / 1048576.0, (long long)te, (long long)td);
    }
    m->ws_bytes = total;
    fat5__ws_layout(m, m->ws_base, n_seq, te, td, &total);
    if (be == &fat5__cpu_backend && !fat5__host_scratch(ctx, fat5__cpu_scratch_need(m, te, td), "fat5_model_reserve")) {
        fat5__ws_free(m);
        return FAT5_ERR_OUT_OF_MEMORY;
    }
    // relative-position bucket of each distance, computed here so that both backends agree exactly
    for (i = 0; i < md; i++) m->seq_map[i] = fat5__rel_bucket(-(int64_t)i, 1, (int)m->cfg.rel_buckets, (int)md);
    st = be->upload(ctx, m->ws.lut_bidir, m->seq_map, md * 4);
    for (i = 0; i < md && !st; i++) m->seq_map[i] = fat5__rel_bucket(-(int64_t)i, 0, (int)m->cfg.rel_buckets, (int)md);
    if (!st) st = be->upload(ctx, m->ws.lut_causal, m->seq_map, md * 4);
    if (!st && m->ws.ea.ones) st = be->fill_f32(ctx, m->ws.ea.ones, 1.0f, m->cfg.d_model);
    if (!st) st = be->sync(ctx);
    if (st) {
        fat5__ws_free(m);
        return st;
    }
    m->cap_seq = n_seq;
    m->cap_te = te;
    m->cap_td = td;
    return FAT5_OK;
}

static fat5_status fat5__check_loss(fat5_ctx *ctx, const fat5_loss_config *l) {
    if (!(l->z_loss >= 0 && l->z_loss <= 1e30))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "loss: z_loss = %g, expected a finite value >= 0", l->z_loss);
    if (!(l->label_smoothing >= 0 && l->label_smoothing < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "loss: label_smoothing = %g, expected a value in [0, 1)",
                         l->label_smoothing);
    return FAT5_OK;
}

// Checks a batch against the token counts of its buffers: offsets, token ids, labels. Messages
// name the sequence and the position inside it.
// A block-global prefix longer than every sequence of the input leaves nothing local (it is full
// attention): refused. A sequence shorter than the prefix among longer ones attends fully.
static fat5_status fat5__check_prefix(fat5_ctx *ctx, const fat5_attention *at, const int32_t *cu, int64_t n_seq,
                                      const char *what) {
    int64_t s, longest = 0;
    if (at->type != FAT5_ENC_ATTN_BLOCK_GLOBAL) return FAT5_OK;
    for (s = 0; s < n_seq; s++)
        if (cu[s + 1] - cu[s] > longest) longest = cu[s + 1] - cu[s];
    if (longest < at->global)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: the longest encoder sequence has %lld tokens, fewer than the %lld global tokens of "
                         "block-global attention (a global block larger than the sequence)",
                         what, (long long)longest, (long long)at->global);
    return FAT5_OK;
}

static fat5_status fat5__check_batch(fat5_model *m, const fat5_batch *b) {
    fat5_ctx *ctx = m->ctx;
    int64_t s, t, V = m->cfg.vocab_size;
    if (!b) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: NULL");
    if (b->n_seq < 1 || b->n_seq > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: %s (n_seq = %lld, expected 1 .. 2^31-1)",
                         b->n_seq < 1 ? "empty" : "too many sequences", (long long)b->n_seq);
    if (b->n_enc_tokens < 1 || b->n_enc_tokens > INT32_MAX || b->n_dec_tokens < 1 || b->n_dec_tokens > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "batch: n_enc_tokens = %lld, n_dec_tokens = %lld: each must be in [1, 2^31) (the number of "
                         "tokens in the encoder and decoder buffers)",
                         (long long)b->n_enc_tokens, (long long)b->n_dec_tokens);
    if (!b->enc_tokens || !b->enc_cu_seqlens || !b->dec_cu_seqlens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: enc_tokens, enc_cu_seqlens and dec_cu_seqlens are required");
    if (!b->labels && !b->dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: give labels, dec_tokens or both");
    if (b->enc_cu_seqlens[0] != 0 || b->dec_cu_seqlens[0] != 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: cu_seqlens must start at 0");
    for (s = 0; s < b->n_seq; s++) {
        int64_t e1 = b->enc_cu_seqlens[s + 1], d1 = b->dec_cu_seqlens[s + 1];
        int64_t le = e1 - b->enc_cu_seqlens[s], ld = d1 - b->dec_cu_seqlens[s];
        if (le < 0 || ld < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: sequence %lld has a negative %s length (%lld)",
                             (long long)s, le < 0 ? "encoder" : "decoder", (long long)(le < 0 ? le : ld));
        if (le == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "batch: sequence %lld has no encoder tokens (cross-attention needs at least one)",
                             (long long)s);
        if (e1 > b->n_enc_tokens || d1 > b->n_dec_tokens)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "batch: sequence %lld ends at %s token %lld, past the %lld tokens of the buffer",
                             (long long)s, e1 > b->n_enc_tokens ? "encoder" : "decoder",
                             (long long)(e1 > b->n_enc_tokens ? e1 : d1),
                             (long long)(e1 > b->n_enc_tokens ? b->n_enc_tokens : b->n_dec_tokens));
    }
    if (fat5__check_prefix(ctx, &m->attn, b->enc_cu_seqlens, b->n_seq, "batch")) return FAT5_ERR_INVALID_ARG;
    if (b->enc_cu_seqlens[b->n_seq] != b->n_enc_tokens || b->dec_cu_seqlens[b->n_seq] != b->n_dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "batch: the sequences cover %lld encoder and %lld decoder tokens, the buffers hold %lld and "
                         "%lld",
                         (long long)b->enc_cu_seqlens[b->n_seq], (long long)b->dec_cu_seqlens[b->n_seq],
                         (long long)b->n_enc_tokens, (long long)b->n_dec_tokens);
    for (s = 0; s < b->n_seq; s++) {
        for (t = b->enc_cu_seqlens[s]; t < b->enc_cu_seqlens[s + 1]; t++)
            if (b->enc_tokens[t] < 0 || b->enc_tokens[t] >= V)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "batch: sequence %lld, encoder position %lld: token id %d is outside [0, vocab_size "
                                 "%lld)",
                                 (long long)s, (long long)(t - b->enc_cu_seqlens[s]), (int)b->enc_tokens[t],
                                 (long long)V);
        for (t = b->dec_cu_seqlens[s]; t < b->dec_cu_seqlens[s + 1]; t++) {
            int64_t pos = t - b->dec_cu_seqlens[s];
            if (b->dec_tokens && (b->dec_tokens[t] < 0 || b->dec_tokens[t] >= V))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "batch: sequence %lld, decoder position %lld: token id %d is outside [0, vocab_size "
                                 "%lld)",
                                 (long long)s, (long long)pos, (int)b->dec_tokens[t], (long long)V);
            if (b->labels && b->labels[t] != -100 && (b->labels[t] < 0 || b->labels[t] >= V))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "batch: sequence %lld, decoder position %lld: label %d is outside [0, vocab_size "
                                 "%lld) and not -100",
                                 (long long)s, (long long)pos, (int)b->labels[t], (long long)V);
        }
    }
    return FAT5_OK;
}

// seq[t] = the sequence of token t, for offsets cu of n_seq sequences
static void fat5__seq_map(const int32_t *cu, int64_t n_seq, int32_t *seq) {
    int64_t s, t;
    for (s = 0; s < n_seq; s++)
        for (t = cu[s]; t < cu[s + 1]; t++) seq[t] = (int32_t)s;
}

// token -> sequence map of offsets cu for tokens [0, cu[n_seq]), to the backend
static fat5_status fat5__model_upload_seq(fat5_model *m, fat5__addr dst, const int32_t *cu) {
    fat5__seq_map(cu, m->n_seq, m->seq_map);
    return m->be->upload(m->ctx, dst, m->seq_map, (size_t)cu[m->n_seq] * 4);
}

// The encoder's token -> sequence map and, for transient-global attention, its globals: n_s / g
// for a sequence of n_s tokens, in rows te.. after the tokens (ea->cu_g), mapped to their
// sequences too. Staged in seq (te + globals entries) and cu_g (n_seq + 1) on the host, then
// uploaded; ea->G counts the globals.
static fat5_status fat5__enc_maps(fat5_ctx *ctx, const fat5__backend *be, fat5__enc_attn *ea, const int32_t *cu,
                                  int64_t n_seq, int32_t *seq, int32_t *cu_g, fat5__addr seq_d) {
    int64_t s, t, te = cu[n_seq], r = te;
    fat5_status st;
    fat5__seq_map(cu, n_seq, seq);
    ea->G = 0;
    if (ea->at.type == FAT5_ENC_ATTN_TGLOBAL) {
        for (s = 0; s < n_seq; s++) {
            int64_t G = (cu[s + 1] - cu[s]) / ea->at.global;
            cu_g[s] = (int32_t)r;
            for (t = 0; t < G; t++) seq[r++] = (int32_t)s;
        }
        cu_g[n_seq] = (int32_t)r;
        ea->G = r - te;
        if ((st = be->upload(ctx, ea->cu_g, cu_g, (size_t)(n_seq + 1) * 4))) return st;
    }
    return be->upload(ctx, seq_d, seq, (size_t)r * 4);
}

// the weight that norms layer y's transient-global tokens: its global_input_layer_norm, or 1
static fat5__addr fat5__gln(const fat5_model *m, const fat5__layer *y, const fat5__enc_attn *ea) {
    return y->gln >= 0 ? fat5__pw(m, y->gln) : ea->ones;
}

// out_i = x W_i^T (x [rows, K], W_i [N, K]) for the n weights w[0..n), which lie one after another in
// the parameters (q | k | v, ck | cv, wi_0 | wi_1), into outputs `stride` elements apart: one batched
// product (products one by one if the weights are not adjacent).
static fat5_status fat5__model_proj(fat5_model *m, fat5__addr out, int64_t stride, fat5__addr x, const int *w, int n,
                                    int64_t rows, int64_t N, int64_t K) {
    int i, adjacent = 1;
    fat5_status st = FAT5_OK;
    // the matmul operands are in the activation dtype (bf16 copies, or the fp32 masters themselves)
    for (i = 1; i < n; i++) adjacent &= fat5__pa(m, w[i]) == fat5__ws_block(fat5__pa(m, w[0]), N * K, m->act_size, i);
    if (adjacent) return m->be->mm_batched(m->ctx, FAT5__MM_NT, out, 0, x, fat5__pa(m, w[0]), rows, N, K, 1.0f, 0.0f,
                                           n, 0, N * K, stride);
    for (i = 0; i < n && !st; i++)
        st = m->be->mm(m->ctx, FAT5__MM_NT, fat5__ws_block(out, stride, m->act_size, i), 0, x, fat5__pa(m, w[i]),
                       rows, N, K, 1.0f, 0.0f);
    return st;
}

// grad(W_i) += d_i^T x for the same weights, d_i [rows, N] `stride` elements apart, x [rows, K]: one
// batched product (the gradients lie as the parameters do)
static fat5_status fat5__model_proj_grad(fat5_model *m, const int *w, int n, fat5__addr d, int64_t stride,
                                         fat5__addr x, int64_t rows, int64_t N, int64_t K) {
    int i, adjacent = 1;
    fat5_status st = FAT5_OK;
    for (i = 1; i < n; i++) adjacent &= fat5__pg(m, w[i]) == fat5__ws_block(fat5__pg(m, w[0]), N * K, 4, i);
    if (adjacent) return m->be->mm_batched(m->ctx, FAT5__MM_TN, fat5__pg(m, w[0]), 1, d, x, N, K, rows, 1.0f, 1.0f,
                                           n, stride, 0, N * K);
    for (i = 0; i < n && !st; i++)
        st = m->be->mm(m->ctx, FAT5__MM_TN, fat5__pg(m, w[i]), 1, fat5__ws_block(d, stride, m->act_size, i), x, N,
                       K, rows, 1.0f, 1.0f);
    return st;
}

// Self-attention sublayer: h += o(attn(q, k, v)) with q, k, v from n = rmsnorm(h). ea: the
// encoder's attention pattern (NULL in the decoder); transient-global adds its globals to k and v:
// the block sums of n, normed by the layer's global_input_layer_norm (or a weight of 1).
static fat5_status fat5__model_self_attn_fwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a,
                                             fat5__addr h, int64_t T, fat5__addr cu, fat5__addr seq, int kind,
                                             fat5__addr lut, const fat5__enc_attn *ea) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, G = ea ? ea->G : 0;
    fat5__pos_args p = fat5__model_pos(m, y, kind, ea);
    float eps = (float)c->layer_norm_eps;
    fat5_status st;
    // the residual stream saved for the backward (h_sa: 0 in inference layout) by the norm's pass
    FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_sa, a->rs_sa, h, fat5__pw(m, y->ln_sa), T, (int)D, eps, a->h_sa));
    if (G) {
        FAT5__TRY(be->block_sum(ctx, a->gsum, a->n_sa, cu, ea->cu_g, seq, G, (int)D, p.g));
        FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_sa + (fat5__addr)(T * D) * m->act_size, a->rs_g, a->gsum,
                                  fat5__gln(m, y, ea), G, (int)D, eps, 0));
    }
    {   // q | k | v in one product (the globals' rows of q are computed and unused)
        const int wqkv[3] = {y->q, y->k, y->v};
        FAT5__TRY(fat5__model_proj(m, a->q, a->qkv_stride, a->n_sa, wqkv, 3, T + G, I, D));
    }
    FAT5__TRY(fat5__model_rope(m, a->q, a->k, cu, seq, 0, T, 0));
    FAT5__TRY(be->attn_fwd(ctx, a->att, a->lse, a->q, a->k, a->v, p.bias, lut, cu, cu, seq, T, (int)c->num_heads,
                           (int)c->d_kv, p.kind, p.nb, p.md, p.g, p.cu_g));
    return be->mm(ctx, FAT5__MM_NT, h, 1, a->att, fat5__pa(m, y->o), T, D, I, 1.0f, 1.0f);
}

// Cross-attention sublayer (decoder): h += o(attn(q, k, v)), q from rmsnorm(h), k and v from the
// encoder output
static fat5_status fat5__model_cross_attn_fwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, te = m->te, td = m->td;
    fat5_status st;
    FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_ca, a->rs_ca, w->dec_hf, fat5__pw(m, y->ln_ca), td, (int)D,
                              (float)c->layer_norm_eps, a->h_ca));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NT, a->cq, 0, a->n_ca, fat5__pa(m, y->cq), td, I, D, 1.0f, 0.0f));
    {   // ck | cv in one product
        const int wkv[2] = {y->ck, y->cv};
        FAT5__TRY(fat5__model_proj(m, a->ck, a->ckv_stride, w->enc_out, wkv, 2, te, I, D));
    }
    FAT5__TRY(be->attn_fwd(ctx, a->catt, a->clse, a->cq, a->ck, a->cv, 0, w->lut_causal, w->dec_cu, w->enc_cu,
                           w->dec_seq, td, (int)c->num_heads, (int)c->d_kv, FAT5__ATTN_CROSS, (int)c->rel_buckets,
                           (int)c->rel_max_distance, 0, 0));
    return be->mm(ctx, FAT5__MM_NT, w->dec_hf, 1, a->catt, fat5__pa(m, y->co), td, D, I, 1.0f, 1.0f);
}

// FFN sublayer: h += wo(act(wi0 n) [* wi1 n]), n = rmsnorm(h)
static fat5_status fat5__model_ffn_fwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, fat5__addr h,
                                       int64_t T) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, F = c->d_ff;
    fat5_status st;
    FAT5__TRY(be->rmsnorm_fwd(ctx, a->n_ff, a->rs_ff, h, fat5__pw(m, y->ln_ff), T, (int)D, (float)c->layer_norm_eps,
                              a->h_ff));
    {   // wi_0 | wi_1 in one product
        const int wi[2] = {y->wi0, y->wi1};
        FAT5__TRY(fat5__model_proj(m, a->ff_a, a->ff_stride, a->n_ff, wi, c->gated ? 2 : 1, T, F, D));
    }
    FAT5__TRY(be->act_fwd(ctx, a->ff_h, a->ff_a, a->ff_b, T * F, (int)c->act));
    return be->mm(ctx, FAT5__MM_NT, h, 1, a->ff_h, fat5__pa(m, y->wo), T, D, F, 1.0f, 1.0f);
}

// The forward graph on the staged batch: encoder, decoder, lm_head, loss. The loss (mean cross
// entropy, mean loss: double [2]) goes to loss_dst on the backend, 0 for the workspace's slot; with
// out == NULL nothing is waited for (the training loop reads its micro-batches' losses at the end
// of the step).
static fat5_status fat5__model_forward(fat5_model *m, fat5_forward_result *out, fat5__addr loss_dst) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, V = c->vocab_size, te = m->te, td = m->td, l, r0, chunk;
    float eps = (float)c->layer_norm_eps, head_scale = c->scale_decoder_outputs ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    double ls[2];
    fat5_status st;
    // the batch
    FAT5__TRY(be->upload(ctx, w->enc_tok, m->enc_tok, (size_t)te * 4));
    FAT5__TRY(be->upload(ctx, w->dec_tok, m->dec_tok, (size_t)td * 4));
    FAT5__TRY(be->upload(ctx, w->labels, m->labels, (size_t)td * 4));
    FAT5__TRY(be->upload(ctx, w->enc_cu, m->enc_cu, (size_t)(m->n_seq + 1) * 4));
    FAT5__TRY(be->upload(ctx, w->dec_cu, m->dec_cu, (size_t)(m->n_seq + 1) * 4));
    FAT5__TRY(fat5__enc_maps(ctx, be, &m->ws.ea, m->enc_cu, m->n_seq, m->seq_map, m->enc_cu_g, w->enc_seq));
    FAT5__TRY(fat5__model_upload_seq(m, w->dec_seq, m->dec_cu));
    // encoder; the residual stream lives in the final norm's input buffer
    FAT5__TRY(be->embed_fwd(ctx, w->enc_hf, fat5__pw(m, m->shared), w->enc_tok, te, (int)D));
    for (l = 0; l < c->num_layers; l++) {
        FAT5__TRY(fat5__model_self_attn_fwd(m, &m->enc[l], &w->enc[l], w->enc_hf, te, w->enc_cu, w->enc_seq,
                                            FAT5__ATTN_BIDIR, w->lut_bidir, &w->ea));
        FAT5__TRY(fat5__model_ffn_fwd(m, &m->enc[l], &w->enc[l], w->enc_hf, te));
    }
    FAT5__TRY(be->rmsnorm_fwd(ctx, w->enc_out, w->enc_rsf, w->enc_hf, fat5__pw(m, m->enc_final_ln), te, (int)D, eps, 0));
    // decoder
    FAT5__TRY(be->embed_fwd(ctx, w->dec_hf, fat5__pw(m, m->shared), w->dec_tok, td, (int)D));
    for (l = 0; l < c->num_decoder_layers; l++) {
        FAT5__TRY(fat5__model_self_attn_fwd(m, &m->dec[l], &w->dec[l], w->dec_hf, td, w->dec_cu, w->dec_seq,
                                            FAT5__ATTN_CAUSAL, w->lut_causal, NULL));
        FAT5__TRY(fat5__model_cross_attn_fwd(m, &m->dec[l], &w->dec[l]));
        FAT5__TRY(fat5__model_ffn_fwd(m, &m->dec[l], &w->dec[l], w->dec_hf, td));
    }
    FAT5__TRY(be->rmsnorm_fwd(ctx, w->dec_out, w->dec_rsf, w->dec_hf, fat5__pw(m, m->dec_final_ln), td, (int)D, eps, 0));
    // lm_head (the d_model^-0.5 of tied models folded into the product), then the loss
    // (training: chunk by chunk, each chunk's dlogits = softmax-gradient of the loss terms, unscaled:
    // the backward scales it in its products)
    chunk = m->training ? (int64_t)fat5__xent_rows(m, (size_t)td) : td;
    for (r0 = 0; r0 < td; r0 += chunk) {
        int64_t n = td - r0 < chunk ? td - r0 : chunk;
        fat5__addr lse = w->tok_lse + 4 * (fat5__addr)r0, lab = w->labels + 4 * (fat5__addr)r0;
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, w->logits, 1, w->dec_out + (fat5__addr)(r0 * D) * m->act_size,
                         fat5__pa(m, m->lm_head), n, V, D, head_scale, 0.0f));
        FAT5__TRY(be->xent_fwd(ctx, lse, w->row_ce + 4 * (fat5__addr)r0, w->row_z + 4 * (fat5__addr)r0, w->logits,
                               lab, n, (int)V, (float)m->loss.z_loss, (float)m->loss.label_smoothing));
        if (m->training && !m->no_grad)
            FAT5__TRY(be->xent_bwd(ctx, w->dlogits + (fat5__addr)(r0 * V) * m->act_size, w->logits, lse, lab, n,
                                   (int)V, (float)m->loss.z_loss, (float)m->loss.label_smoothing, 1.0f));
    }
    // the loss, summed on the backend into loss_dst (or the workspace's slot); read back only for `out`
    FAT5__TRY(be->loss_total(ctx, loss_dst ? loss_dst : w->loss2, w->row_ce, w->row_z, td, m->n_count));
    if (out) {
        FAT5__TRY(be->download(ctx, ls, loss_dst ? loss_dst : w->loss2, sizeof ls));
        FAT5__TRY(be->sync(ctx));
        out->n_tokens = m->n_count;
        out->n_dec_tokens = td;
        out->ce = ls[0];
        out->loss = ls[1];
    }
    return FAT5_OK;
}

// fat5_model_forward, with the loss written to loss_dst on the backend (0: the workspace's slot)
// and read back only for `out`
static fat5_status fat5__model_forward_batch(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                             fat5_forward_result *out, fat5__addr loss_dst) {
    const fat5_model_config *c;
    fat5_loss_config lc = loss ? *loss : fat5_loss_config_default();
    fat5_status st;
    int64_t te, td, s, t;
    if (!m) return FAT5_ERR_INVALID_ARG;
    c = &m->cfg;
    m->have_fwd = m->fwd_labels = m->have_bwd = 0;
    if ((st = fat5__check_loss(m->ctx, &lc)) || (st = fat5__check_batch(m, b))) return st;
    te = b->n_enc_tokens;
    td = b->n_dec_tokens;
    if ((st = fat5_model_reserve(m, b->n_seq, te, td))) return st;
    m->n_seq = b->n_seq;
    m->te = te;
    m->td = td;
    m->loss = lc;
    memcpy(m->enc_cu, b->enc_cu_seqlens, (size_t)(b->n_seq + 1) * sizeof(int32_t));
    memcpy(m->dec_cu, b->dec_cu_seqlens, (size_t)(b->n_seq + 1) * sizeof(int32_t));
    memcpy(m->enc_tok, b->enc_tokens, (size_t)te * sizeof(int32_t));
    for (t = 0; t < td; t++) m->labels[t] = b->labels ? b->labels[t] : -100;
    if (b->dec_tokens) {
        memcpy(m->dec_tok, b->dec_tokens, (size_t)td * sizeof(int32_t));
    } else {  // shift_right per sequence
        for (s = 0; s < b->n_seq; s++)
            for (t = m->dec_cu[s]; t < m->dec_cu[s + 1]; t++) {
                int32_t prev = t == m->dec_cu[s] ? (int32_t)c->decoder_start_token_id : b->labels[t - 1];
                m->dec_tok[t] = prev == -100 ? (int32_t)c->pad_token_id : prev;
            }
    }
    m->n_count = 0;
    for (t = 0; t < td; t++) m->n_count += m->labels[t] != -100;
    if ((st = fat5__model_forward(m, out, loss_dst))) return st;
    m->have_fwd = 1;
    m->fwd_labels = b->labels != NULL;
    m->fwd_no_grad = m->no_grad;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_model_forward(fat5_model *m, const fat5_batch *b, const fat5_loss_config *loss,
                                        fat5_forward_result *out) {
    fat5_forward_result r;
    return fat5__model_forward_batch(m, b, loss, out ? out : &r, 0);
}

FAT5_API fat5_status fat5_model_get_logits(fat5_model *m, float *dst, int64_t n) {
    if (!m->have_fwd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_logits: no forward has run");
    if (m->training && (size_t)m->td > fat5__xent_rows(m, (size_t)m->td))
        return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_get_logits: a training forward keeps the logits of %d "
                         "decoder tokens at most (this batch has %lld); run it in inference mode "
                         "(fat5_model_set_training(m, 0)) to read them", (int)m->xent_rows, (long long)m->td);
    if (!dst || n != m->td * m->cfg.vocab_size)
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_get_logits: buffer holds %lld floats, logits are %lld",
                         dst ? (long long)n : 0LL, (long long)(m->td * m->cfg.vocab_size));
    return m->be->download(m->ctx, dst, m->ws.logits, (size_t)n * 4);
}

// FFN backward: dh (fp32 [T, D]) holds the gradient after the sublayer and, on return, before it;
// w->dh_act holds dh in the activation dtype on entry (the RMSNorm backward that last wrote dh wrote
// it too) and on return (this sublayer's norm backward writes both).
static fat5_status fat5__model_ffn_bwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, fat5__addr dh,
                                       int64_t T) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, F = c->d_ff;
    fat5_status st;
    FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, y->wo), 1, w->dh_act, a->ff_h, D, F, T, 1.0f, 1.0f));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dffh, 0, w->dh_act, fat5__pa(m, y->wo), T, F, D, 1.0f, 0.0f));
    // gated: db overwrites dffh in place (each element is read before it is written)
    FAT5__TRY(be->act_bwd(ctx, w->da, c->gated ? w->dffh : 0, w->dffh, a->ff_a, a->ff_b, T * F, (int)c->act));
    {   // the weight gradients of wi_0 | wi_1 in one product (da, then db in dffh)
        const int wi[2] = {y->wi0, y->wi1};
        FAT5__TRY(fat5__model_proj_grad(m, wi, c->gated ? 2 : 1, w->da, w->dff_stride, a->n_ff, T, F, D));
    }
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->da, fat5__pa(m, y->wi0), T, D, F, 1.0f, 0.0f));
    if (c->gated) FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->dffh, fat5__pa(m, y->wi1), T, D, F, 1.0f, 1.0f));
    return be->rmsnorm_bwd(ctx, dh, fat5__pg(m, y->ln_ff), w->dn, a->h_ff, fat5__pw(m, y->ln_ff), a->rs_ff, T, (int)D,
                           1, w->norm_scratch, w->dh_act);
}

// Attention sublayer backward (self or cross), same convention. For cross-attention the keys and
// values come from the encoder output: their gradient is added to d_enc_out.
static fat5_status fat5__model_attn_bwd(fat5_model *m, const fat5__layer *y, const fat5__layer_acts *a, fat5__addr dh,
                                        int64_t T, int kind) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int cross = kind == FAT5__ATTN_CROSS, enc_side = kind == FAT5__ATTN_BIDIR;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, G = enc_side ? w->ea.G : 0, Tk = (cross ? m->te : T) + G;
    int H = (int)c->num_heads, dk = (int)c->d_kv;
    fat5__pos_args p = fat5__model_pos(m, y, kind, enc_side ? &w->ea : NULL);
    fat5__addr att = cross ? a->catt : a->att, lse = cross ? a->clse : a->lse, q = cross ? a->cq : a->q;
    fat5__addr k = cross ? a->ck : a->k, v = cross ? a->cv : a->v, nrm = cross ? a->n_ca : a->n_sa;
    fat5__addr hin = cross ? a->h_ca : a->h_sa, rs = cross ? a->rs_ca : a->rs_sa;
    int wq = cross ? y->cq : y->q, wk = cross ? y->ck : y->k, wv = cross ? y->cv : y->v, wo = cross ? y->co : y->o;
    int ln = cross ? y->ln_ca : y->ln_sa;
    fat5__addr lut = enc_side ? w->lut_bidir : w->lut_causal;
    fat5__addr cu_q = enc_side ? w->enc_cu : w->dec_cu, cu_k = (enc_side || cross) ? w->enc_cu : w->dec_cu;
    fat5__addr q_seq = enc_side ? w->enc_seq : w->dec_seq, k_seq = (enc_side || cross) ? w->enc_seq : w->dec_seq;
    fat5__addr kv_src = cross ? w->enc_out : nrm, dkv_dst = cross ? w->d_enc_out : w->dn;
    fat5_status st;
    FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, wo), 1, w->dh_act, att, D, I, T, 1.0f, 1.0f));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->datt, 0, w->dh_act, fat5__pa(m, wo), T, I, D, 1.0f, 0.0f));
    FAT5__TRY(be->attn_bwd_delta(ctx, w->delta, att, w->datt, T, H, dk));
    FAT5__TRY(be->attn_bwd_dq(ctx, w->dq, p.dbias, w->datt, lse, w->delta, q, k, v, p.bias, lut, cu_q, cu_k, q_seq, T,
                              H, dk, p.kind, p.nb, p.md, p.g, p.cu_g, w->dbias_scratch));
    FAT5__TRY(be->attn_bwd_dkv(ctx, w->dk, w->dv, w->datt, lse, w->delta, q, k, v, p.bias, lut, cu_q, cu_k, k_seq, Tk,
                               H, dk, p.kind, p.nb, p.md, p.g, p.cu_g));
    if (!cross) FAT5__TRY(fat5__model_rope(m, w->dq, w->dk, cu_q, q_seq, 0, T, 1));  // back through the rotation
    {   // weight gradients: q | k | v in one product (self-attention without globals), else q, then k | v
        const int wqkv[3] = {wq, wk, wv};
        if (!cross && Tk == T) {
            FAT5__TRY(fat5__model_proj_grad(m, wqkv, 3, w->dq, w->dqkv_stride, nrm, T, I, D));
        } else {
            FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, wq), 1, w->dq, nrm, I, D, T, 1.0f, 1.0f));
            FAT5__TRY(fat5__model_proj_grad(m, wqkv + 1, 2, w->dk, w->dqkv_stride, kv_src, Tk, I, D));
        }
    }
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->dq, fat5__pa(m, wq), T, D, I, 1.0f, 0.0f));
    if (G) FAT5__TRY(be->memset0(ctx, w->dn + (fat5__addr)(T * D) * 4, (size_t)(G * D) * 4));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, dkv_dst, 1, w->dk, fat5__pa(m, wk), Tk, D, I, 1.0f, 1.0f));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, dkv_dst, 1, w->dv, fat5__pa(m, wv), Tk, D, I, 1.0f, 1.0f));
    if (G) {  // the globals: back through their norm, then to the tokens of their blocks
        FAT5__TRY(be->rmsnorm_bwd(ctx, w->dgsum, y->gln >= 0 ? fat5__pg(m, y->gln) : 0, w->dn + (fat5__addr)(T * D) * 4,
                                  a->gsum, fat5__gln(m, y, &w->ea), a->rs_g, G, (int)D, 0,
                                  w->norm_scratch, 0));
        FAT5__TRY(be->block_sum_bwd(ctx, w->dn, w->dgsum, cu_q, w->ea.cu_g, q_seq, T, (int)D, p.g));
    }
    return be->rmsnorm_bwd(ctx, dh, fat5__pg(m, ln), w->dn, hin, fat5__pw(m, ln), rs, T, (int)D, 1, w->norm_scratch,
                           w->dh_act);
}

// The backward graph of the last forward: gradients added to m->gd.
static fat5_status fat5__model_backward(fat5_model *m, float grad_scale) {
    fat5_ctx *ctx = m->ctx;
    const fat5__backend *be = m->be;
    const fat5_model_config *c = &m->cfg;
    const fat5__ws *w = &m->ws;
    int64_t D = c->d_model, V = c->vocab_size, te = m->te, td = m->td, l;
    float head_scale = c->scale_decoder_outputs ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    float scale = m->n_count ? (float)((double)grad_scale / (double)m->n_count) : 0.0f;
    fat5_status st;
    // loss -> logits -> decoder output -> decoder final norm
    FAT5__TRY(be->memset0(ctx, w->d_enc_out, (size_t)(te * D) * 4));
    // dlogits (from the forward, unscaled) scaled in the products: head_scale x grad_scale / labels
    FAT5__TRY(be->mm(ctx, FAT5__MM_TN, fat5__pg(m, m->lm_head), 1, w->dlogits, w->dec_out, V, D, td, head_scale * scale,
                     1.0f));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NN, w->dn, 1, w->dlogits, fat5__pa(m, m->lm_head), td, D, V, head_scale * scale,
                     0.0f));
    FAT5__TRY(be->rmsnorm_bwd(ctx, w->dh_dec, fat5__pg(m, m->dec_final_ln), w->dn, w->dec_hf,
                              fat5__pw(m, m->dec_final_ln), w->dec_rsf, td, (int)D, 0, w->norm_scratch, w->dh_act));
    // decoder layers, last to first
    for (l = c->num_decoder_layers - 1; l >= 0; l--) {
        FAT5__TRY(fat5__model_ffn_bwd(m, &m->dec[l], &w->dec[l], w->dh_dec, td));
        FAT5__TRY(fat5__model_attn_bwd(m, &m->dec[l], &w->dec[l], w->dh_dec, td, FAT5__ATTN_CROSS));
        FAT5__TRY(fat5__model_attn_bwd(m, &m->dec[l], &w->dec[l], w->dh_dec, td, FAT5__ATTN_CAUSAL));
    }
    FAT5__TRY(be->embed_bwd(ctx, fat5__pg(m, m->shared), w->dh_dec, w->dec_tok, td, (int)D));
    // encoder
    FAT5__TRY(be->rmsnorm_bwd(ctx, w->dh_enc, fat5__pg(m, m->enc_final_ln), w->d_enc_out, w->enc_hf,
                              fat5__pw(m, m->enc_final_ln), w->enc_rsf, te, (int)D, 0, w->norm_scratch, w->dh_act));
    for (l = c->num_layers - 1; l >= 0; l--) {
        FAT5__TRY(fat5__model_ffn_bwd(m, &m->enc[l], &w->enc[l], w->dh_enc, te));
        FAT5__TRY(fat5__model_attn_bwd(m, &m->enc[l], &w->enc[l], w->dh_enc, te, FAT5__ATTN_BIDIR));
    }
    return be->embed_bwd(ctx, fat5__pg(m, m->shared), w->dh_enc, w->enc_tok, te, (int)D);
}

// fat5_model_backward; with `wait` 0 the backward is only queued (the training loop waits once, at
// the end of its step)
static fat5_status fat5__model_backward_checked(fat5_model *m, float grad_scale, int wait) {
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!m->have_fwd) return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_backward: no forward has run");
    if (!m->fwd_labels)
        return fat5__err(m->ctx, FAT5_ERR_STATE,
                         "fat5_model_backward: the last forward had no labels, so there is no loss to differentiate");
    if (m->fwd_no_grad)
        return fat5__err(m->ctx, FAT5_ERR_STATE, "fat5_model_backward: the last forward was an evaluation's (no gradient)");
    if (m->have_bwd)
        return fat5__err(m->ctx, FAT5_ERR_STATE,
                         "fat5_model_backward: already ran for the last forward (its gradients were added once)");
    if (!m->training)
        return fat5__err(m->ctx, FAT5_ERR_STATE,
                         "fat5_model_backward: the model is in inference mode (fat5_model_set_training(m, 1) first)");
    if (!isfinite(grad_scale))
        return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_backward: grad_scale is %g, expected a finite value",
                         (double)grad_scale);
    m->have_bwd = 1;  // set first: a backward that fails half-way has already added to some gradients
    if ((st = fat5__model_backward(m, grad_scale))) return st;
    return wait ? m->be->sync(m->ctx) : FAT5_OK;
}

FAT5_API fat5_status fat5_model_backward(fat5_model *m, float grad_scale) {
    return fat5__model_backward_checked(m, grad_scale, 1);
}

// Inference mode frees the gradients and the workspace (the next forward lays it out again, one
// layer's buffers for all layers, nothing for a backward); training mode allocates zeroed
// gradients again.
FAT5_API fat5_status fat5_model_set_training(fat5_model *m, int training) {
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    training = training != 0;
    if (training == m->training) return FAT5_OK;
    fat5__ws_free(m);
    if (!training) {
        if (m->gd) m->be->free(m->ctx, m->gd);
        m->gd = 0;
    } else if ((st = m->be->alloc(m->ctx, m->n_floats * 4, &m->gd))) {
        return fat5__err_prefix(m->ctx, st, "fat5_model_set_training: model gradients: ");
    }
    m->training = training;
    return FAT5_OK;
}

FAT5_API int fat5_model_is_training(const fat5_model *m) { return m ? m->training : 0; }

// ---- encoder attention patterns of a run ----

static const char *const fat5__attn_names[] = {"full", "local", "transient-global", "block-global"};

// the pattern's own limits and what it needs of the model (m may be NULL: the pattern alone)
static fat5_status fat5__check_attention(fat5_ctx *ctx, const fat5_model *m, const fat5_attention *a) {
    const char *name;
    if ((int)a->type < (int)FAT5_ENC_ATTN_FULL || (int)a->type > (int)FAT5_ENC_ATTN_BLOCK_GLOBAL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention: type %d is not a fat5_enc_attention", (int)a->type);
    if (a->type == FAT5_ENC_ATTN_FULL) return FAT5_OK;
    name = fat5__attn_names[a->type];
    if (a->radius < 1 || a->radius > FAT5__ATTN_MAX_RADIUS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention %s: a window of radius %lld, expected 1..%d (a token "
                         "sees the keys within the radius; 0 would leave it only itself)", name, (long long)a->radius,
                         FAT5__ATTN_MAX_RADIUS);
    if (a->type != FAT5_ENC_ATTN_LOCAL && (a->global < 1 || a->global > INT32_MAX))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention %s: %lld global tokens%s, expected 1..2^31-1", name,
                         (long long)a->global, a->type == FAT5_ENC_ATTN_TGLOBAL ? " per block" : "");
    if (m && a->type == FAT5_ENC_ATTN_TGLOBAL &&
        (m->cfg.pos_kind == FAT5_POS_ALIBI || m->cfg.pos_kind == FAT5_POS_FIRE || m->cfg.pos_kind == FAT5_POS_ROPE))
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "attention transient-global: the global tokens take T5's bias "
                         "buckets of block distances; this model's position_encoding_type is %s",
                         fat5__pos_name(m->cfg.pos_kind));
    return FAT5_OK;
}

FAT5_API fat5_status fat5_attention_parse(fat5_ctx *ctx, const char *spec, fat5_attention *out) {
    fat5_attention a;
    const char *p;
    size_t len;
    int type, n = 0;
    if (!spec || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_attention_parse: NULL argument");
    p = strchr(spec, ':');
    len = p ? (size_t)(p - spec) : strlen(spec);
    for (type = 0; type < 4; type++)
        if (strlen(fat5__attn_names[type]) == len && strncmp(spec, fat5__attn_names[type], len) == 0) break;
    if (type == 4)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': expected full, local:R, block-global:R:G or "
                         "transient-global:R:G", spec);
    memset(&a, 0, sizeof a);
    a.type = (fat5_enc_attention)type;
    a.radius = type == FAT5_ENC_ATTN_FULL ? 0 : 127;
    a.global = type == FAT5_ENC_ATTN_TGLOBAL ? 16 : 0;
    while (p) {  // the numbers after the name: R, then G
        char *end;
        long long v;
        if (n >= (type == FAT5_ENC_ATTN_FULL ? 0 : type == FAT5_ENC_ATTN_LOCAL ? 1 : 2))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': %s takes %s", spec, fat5__attn_names[type],
                             type == FAT5_ENC_ATTN_FULL ? "no numbers"
                             : type == FAT5_ENC_ATTN_LOCAL ? "one number, its radius (local:R)"
                                                           : "two numbers, its radius and global tokens (R:G)");
        errno = 0;
        v = strtoll(p + 1, &end, 10);
        if (!((p[1] >= '0' && p[1] <= '9') || p[1] == '-') || end == p + 1 || errno || (*end && *end != ':'))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': expected full, local:R, block-global:R:G or "
                             "transient-global:R:G with whole numbers", spec);
        if (n++ == 0) a.radius = v;
        else a.global = v;
        p = *end ? end : NULL;
    }
    if (type == FAT5_ENC_ATTN_BLOCK_GLOBAL && n < 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "attention '%s': block-global needs its radius and global tokens "
                         "(block-global:R:G)", spec);
    if (fat5__check_attention(ctx, NULL, &a)) return FAT5_ERR_INVALID_ARG;
    *out = a;
    return FAT5_OK;
}

FAT5_API void fat5_attention_to_string(const fat5_attention *a, char buf[64]) {
    int t = a && (int)a->type >= 0 && (int)a->type <= 3 ? (int)a->type : 0;
    if (t == FAT5_ENC_ATTN_FULL) snprintf(buf, 64, "full");
    else if (t == FAT5_ENC_ATTN_LOCAL) snprintf(buf, 64, "local:%lld", (long long)a->radius);
    else snprintf(buf, 64, "%s:%lld:%lld", fat5__attn_names[t], (long long)a->radius, (long long)a->global);
}

FAT5_API fat5_status fat5_model_set_attention(fat5_model *m, const fat5_attention *a) {
    fat5_attention n;
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    if (!a) return fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_model_set_attention: NULL pattern");
    if ((st = fat5__check_attention(m->ctx, m, a))) return st;
    n = *a;
    if (n.type == FAT5_ENC_ATTN_FULL) n.radius = 0;
    if (n.type == FAT5_ENC_ATTN_FULL || n.type == FAT5_ENC_ATTN_LOCAL) n.global = 0;
    if (n.type == m->attn.type && n.radius == m->attn.radius && n.global == m->attn.global) return FAT5_OK;
    fat5__ws_free(m);  // the workspace of transient-global holds the globals: laid out again by the next forward
    m->attn = n;
    return FAT5_OK;
}

FAT5_API fat5_attention fat5_model_get_attention(const fat5_model *m) {
    fat5_attention a;
    memset(&a, 0, sizeof a);
    return m ? m->attn : a;
}
#undef FAT5__TRY

// =============================================================================================
// ==[4.4] model: batches from JSON rows ==

static fat5_status fat5__rows_to_packed(fat5_ctx *ctx, const fat5__json *rows, const char *what, int allow_ignore,
                                        int32_t **tok, int32_t **cu, int64_t *n_rows) {
    const fat5__json *r, *e;
    size_t total = 0, i = 0, s = 0;
    *tok = NULL;
    *cu = NULL;
    if (!rows || rows->type != FAT5__J_ARRAY)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' must be an array of arrays of token ids", what);
    for (r = rows->child; r; r = r->next) {
        if (r->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' row %zu is not an array", what, s);
        if (!fat5__add_ok(total, r->n, &total) || total > (size_t)INT32_MAX)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "batch: '%s' has more than 2^31 tokens", what);
        s++;
    }
    *tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, total ? total : 1, sizeof(int32_t)));
    *cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, rows->n + 1, sizeof(int32_t)));
    if (!*tok || !*cu) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "batch: out of memory");
    s = 0;
    for (r = rows->child; r; r = r->next, s++) {
        for (e = r->child; e; e = e->next) {
            int64_t v;
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &v) || v < (allow_ignore ? -100 : 0) ||
                v > INT32_MAX || (v < 0 && v != -100))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "batch: '%s' row %zu position %zu: '%s' is not a token id%s",
                                 what, s, (size_t)(i - (size_t)(*cu)[s]), e->type == FAT5__J_NUMBER ? e->str : "value",
                                 allow_ignore ? " or -100" : "");
            (*tok)[i++] = (int32_t)v;
        }
        (*cu)[s + 1] = (int32_t)i;
    }
    *n_rows = (int64_t)rows->n;
    return FAT5_OK;
}

FAT5_API void fat5_batch_free(fat5_ctx *ctx, fat5_batch *b) {
    if (!b) return;
    fat5__free(ctx, (void *)(uintptr_t)b->enc_tokens);
    fat5__free(ctx, (void *)(uintptr_t)b->enc_cu_seqlens);
    fat5__free(ctx, (void *)(uintptr_t)b->dec_tokens);
    fat5__free(ctx, (void *)(uintptr_t)b->labels);
    fat5__free(ctx, (void *)(uintptr_t)b->dec_cu_seqlens);
    memset(b, 0, sizeof *b);
}

FAT5_API fat5_status fat5_batch_from_json(fat5_ctx *ctx, const char *json, size_t len, fat5_batch *out) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *e;
    int32_t *et = NULL, *ec = NULL, *lt = NULL, *lc = NULL, *dt = NULL, *dc = NULL;
    int64_t ne = 0, nl = 0, nd = 0, s;
    fat5_status st;
    memset(out, 0, sizeof *out);
    if ((st = fat5__json_parse(ctx, "batch", json, len, 8, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: the top level must be an object");
        goto done;
    }
    for (e = root->child; e; e = e->next)
        if (strcmp(e->key, "inputs") && strcmp(e->key, "labels") && strcmp(e->key, "decoder_inputs")) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: unknown key '%s' (expected inputs, labels, decoder_inputs)",
                           e->key);
            goto done;
        }
    if ((st = fat5__rows_to_packed(ctx, fat5__json_get(root, "inputs"), "inputs", 0, &et, &ec, &ne))) goto done;
    if (fat5__json_get(root, "labels") &&
        (st = fat5__rows_to_packed(ctx, fat5__json_get(root, "labels"), "labels", 1, &lt, &lc, &nl)))
        goto done;
    if (fat5__json_get(root, "decoder_inputs") &&
        (st = fat5__rows_to_packed(ctx, fat5__json_get(root, "decoder_inputs"), "decoder_inputs", 0, &dt, &dc, &nd)))
        goto done;
    if (!lt && !dt) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: needs 'labels' or 'decoder_inputs'");
        goto done;
    }
    if ((lt && nl != ne) || (dt && nd != ne)) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: %lld input rows but %lld %s rows", (long long)ne,
                       (long long)(lt && nl != ne ? nl : nd), lt && nl != ne ? "label" : "decoder_inputs");
        goto done;
    }
    if (lt && dt)
        for (s = 0; s <= ne; s++)
            if (lc[s] != dc[s]) {
                st = fat5__err(ctx, FAT5_ERR_FORMAT, "batch: row %lld: labels and decoder_inputs differ in length",
                               (long long)(s - 1));
                goto done;
            }
    out->n_seq = ne;
    out->n_enc_tokens = ec[ne];
    out->n_dec_tokens = lt ? lc[ne] : dc[ne];
    out->enc_tokens = et;
    out->enc_cu_seqlens = ec;
    out->labels = lt;
    out->dec_tokens = dt;
    out->dec_cu_seqlens = lt ? lc : dc;
    if (lt) fat5__free(ctx, dc);
    et = ec = lt = lc = dt = dc = NULL;
done:
    fat5__free(ctx, et);
    fat5__free(ctx, ec);
    fat5__free(ctx, lt);
    fat5__free(ctx, lc);
    fat5__free(ctx, dt);
    fat5__free(ctx, dc);
    fat5__json_free(ctx, doc);
    return st;
}
// =============================================================================================
// ==[5.1] train: token files ==

// Token files (format in the declarations). Every file is validated when it is opened, in one
// sequential pass through a window of FAT5__TOK_WINDOW bytes; afterwards ids are read through the
// same window (fseeko + fread), so a corpus is never loaded whole. Each file ends with an eos, so
// a document never spans two files; the files form one stream of ids indexed from 0.

#define FAT5__TOK_HEADER 32
#define FAT5__TOK_WINDOW ((size_t)1 << 20)   // bytes; a multiple of 4

typedef struct fat5__tokfile {
    char *path;
    FILE *fp;
    int width;            // bytes per id: 2 or 4
    int64_t n;            // ids in the file
    int64_t first;        // index of its first id in the stream
} fat5__tokfile;

struct fat5_tokens {
    fat5_ctx *ctx;
    fat5__tokfile *files;
    int n_files;
    int64_t n_ids, n_docs, vocab;
    int32_t eos;
    unsigned char *win;   // FAT5__TOK_WINDOW bytes of one file
    int win_file;         // the file in the window, -1 when empty
    int64_t win_first;    // index (in that file) of the first id in the window
    int64_t win_n;        // ids in the window
};

static void fat5__tok_put_le(unsigned char *p, uint64_t v, int n) {
    int i;
    for (i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t fat5__tok_get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int fat5__tok_seek(FILE *fp, uint64_t off) {
#ifdef _WIN32
    return off <= (uint64_t)INT64_MAX && _fseeki64(fp, (__int64)off, SEEK_SET) == 0;
#else
    off_t o = (off_t)off;
    if (o < 0 || (uint64_t)o != off) return 0;
    return fseeko(fp, o, SEEK_SET) == 0;
#endif
}

// The 32-byte header of a token file.
static void fat5__tok_header(unsigned char h[FAT5__TOK_HEADER], int width, int64_t vocab, int32_t eos) {
    memset(h, 0, FAT5__TOK_HEADER);
    memcpy(h, "FAT5TOK", 8);
    fat5__tok_put_le(h + 8, 1, 4);
    fat5__tok_put_le(h + 12, (uint64_t)width, 4);
    fat5__tok_put_le(h + 16, (uint64_t)vocab, 8);
    fat5__tok_put_le(h + 24, (uint64_t)(uint32_t)eos, 4);
}

// Loads ids [at, at + n) of file f into the window (n <= the window, within the file).
static fat5_status fat5__tok_fill(fat5_tokens *t, int f, int64_t at, int64_t n) {
    fat5__tokfile *tf = &t->files[f];
    size_t bytes = (size_t)n * (size_t)tf->width;
    t->win_file = -1;
    if (!fat5__tok_seek(tf->fp, FAT5__TOK_HEADER + (uint64_t)at * (uint64_t)tf->width) ||
        fread(t->win, 1, bytes, tf->fp) != bytes)
        return fat5__err(t->ctx, FAT5_ERR_IO, "%s: byte %llu: read failed (was the file changed?)",
                         tf->path, (unsigned long long)(FAT5__TOK_HEADER + (uint64_t)at * (uint64_t)tf->width));
    t->win_file = f;
    t->win_first = at;
    t->win_n = n;
    return FAT5_OK;
}

// Makes id `at` of file f available in the window; *avail = ids from it to the window's end.
static fat5_status fat5__tok_window(fat5_tokens *t, int f, int64_t at, const unsigned char **p,
                                    int64_t *avail) {
    const fat5__tokfile *tf = &t->files[f];
    if (t->win_file != f || at < t->win_first || at >= t->win_first + t->win_n) {
        int64_t cap = (int64_t)(FAT5__TOK_WINDOW / (size_t)tf->width), n = tf->n - at;
        fat5_status st = fat5__tok_fill(t, f, at, n < cap ? n : cap);
        if (st != FAT5_OK) return st;
    }
    *p = t->win + (size_t)(at - t->win_first) * (size_t)tf->width;
    *avail = t->win_first + t->win_n - at;
    return FAT5_OK;
}

// The file holding stream index pos (pos < n_ids).
static int fat5__tok_file_of(const fat5_tokens *t, int64_t pos) {
    int lo = 0, hi = t->n_files - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->files[mid].first <= pos) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Reads ids from stream index pos into dst, at most max of them, stopping before an eos: *n gets
// the ids copied and *eos 1 when an eos ended them (it sits at pos + *n). pos < n_ids.
static fat5_status fat5__tok_read_doc(fat5_tokens *t, int64_t pos, int64_t max, int32_t *dst,
                                      int64_t *n, int *eos) {
    int f = fat5__tok_file_of(t, pos);
    int64_t at = pos - t->files[f].first, got = 0;
    const uint32_t e = (uint32_t)t->eos;
    *eos = 0;
    while (got < max) {   // the file ends with an eos, so this stops inside it
        const unsigned char *p;
        int64_t avail, i, take;
        fat5_status st = fat5__tok_window(t, f, at, &p, &avail);
        if (st != FAT5_OK) return st;
        take = avail < max - got ? avail : max - got;
        if (t->files[f].width == 2) {
            for (i = 0; i < take; i++) {
                uint32_t v = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
                if (v == e) { *eos = 1; break; }
                dst[got + i] = (int32_t)v;
            }
        } else {
            for (i = 0; i < take; i++) {
                uint32_t v = (uint32_t)fat5__tok_get_le(p + 4 * i, 4);
                if (v == e) { *eos = 1; break; }
                dst[got + i] = (int32_t)v;
            }
        }
        got += i;
        at += i;
        if (*eos) break;
    }
    if (!*eos && got == max && at < t->files[f].n) {   // peek: is the next id the eos?
        const unsigned char *p;
        int64_t avail;
        fat5_status st = fat5__tok_window(t, f, at, &p, &avail);
        if (st != FAT5_OK) return st;
        *eos = (uint32_t)fat5__tok_get_le(p, t->files[f].width) == e;
    }
    *n = got;
    return FAT5_OK;
}

// Opens and checks one file: header, size, every id below the vocabulary, last id an eos.
static fat5_status fat5__tok_check(fat5_tokens *t, int f, const char *path) {
    fat5__tokfile *tf = &t->files[f];
    unsigned char h[FAT5__TOK_HEADER];
    uint64_t size, vocab, nbytes, i;
    uint32_t version, width, pad;
    int32_t eos;
    int64_t at;
    fat5_status st;
    fat5_ctx *ctx = t->ctx;
    if (!(tf->path = fat5__strdup(ctx, path)))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    if ((st = fat5__open_regular(ctx, path, &tf->fp, &size)) != FAT5_OK) return st;
    if (size < FAT5__TOK_HEADER || fread(h, 1, FAT5__TOK_HEADER, tf->fp) != FAT5__TOK_HEADER)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: truncated: a token file has a %d-byte header",
                         path, (unsigned long long)size, FAT5__TOK_HEADER);
    if (memcmp(h, "FAT5TOK", 8) != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 0: not a token file (bad magic, want \"FAT5TOK\\0\")", path);
    version = (uint32_t)fat5__tok_get_le(h + 8, 4);
    width = (uint32_t)fat5__tok_get_le(h + 12, 4);
    vocab = fat5__tok_get_le(h + 16, 8);
    eos = (int32_t)(uint32_t)fat5__tok_get_le(h + 24, 4);
    pad = (uint32_t)fat5__tok_get_le(h + 28, 4);
    if (version != 1)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: byte 8: token file version %u, this reader knows 1",
                         path, version);
    if (width != 2 && width != 4)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 12: id width %u, want 2 or 4", path, width);
    if (vocab == 0 || vocab > (uint64_t)INT32_MAX + 1)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 16: vocabulary size %llu, want 1 .. 2^31", path,
                         (unsigned long long)vocab);
    if (eos < 0 || (uint64_t)eos >= vocab)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 24: eos id %ld outside the vocabulary of %llu",
                         path, (long)eos, (unsigned long long)vocab);
    if (pad != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 28: the header's last 4 bytes must be zero", path);
    if (f > 0 && ((int64_t)vocab != t->vocab || eos != t->eos))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %d: %s %lld differs from %lld in %s (the files must agree)",
                         path, (int64_t)vocab != t->vocab ? 16 : 24,
                         (int64_t)vocab != t->vocab ? "vocabulary size" : "eos id",
                         (long long)((int64_t)vocab != t->vocab ? (int64_t)vocab : eos),
                         (long long)((int64_t)vocab != t->vocab ? t->vocab : t->eos), t->files[0].path);
    nbytes = size - FAT5__TOK_HEADER;
    if (nbytes % width != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: truncated: %llu bytes of ids is not a multiple "
                         "of the id width %u", path, (unsigned long long)(size - nbytes % width),
                         (unsigned long long)nbytes, width);
    if (nbytes == 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte 32: empty: the file holds no ids", path);
    if (nbytes / width > (uint64_t)(INT64_MAX / 2) - (uint64_t)t->n_ids)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: too many ids", path);
    t->vocab = (int64_t)vocab;
    t->eos = eos;
    tf->width = (int)width;
    tf->n = (int64_t)(nbytes / width);
    tf->first = t->n_ids;
    for (at = 0; at < tf->n;) {   // every id, in window-sized steps
        const unsigned char *p;
        int64_t avail;
        if ((st = fat5__tok_window(t, f, at, &p, &avail)) != FAT5_OK) return st;
        for (i = 0; i < (uint64_t)avail; i++) {
            uint64_t v = fat5__tok_get_le(p + i * width, (int)width);
            if (v >= vocab)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: id %llu is not below the vocabulary size %llu",
                                 path, (unsigned long long)(FAT5__TOK_HEADER + ((uint64_t)at + i) * width),
                                 (unsigned long long)v, (unsigned long long)vocab);
            if (v == (uint64_t)eos) t->n_docs++;
        }
        at += avail;
        if (at == tf->n && fat5__tok_get_le(p + (size_t)(avail - 1) * width, (int)width) != (uint64_t)eos)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte %llu: the last id is not the eos id %ld "
                             "(every document, the last included, ends with it)", path,
                             (unsigned long long)(size - width), (long)eos);
    }
    t->n_ids += tf->n;
    return FAT5_OK;
}

FAT5_API void fat5_tokens_close(fat5_tokens *t) {
    int i;
    if (!t) return;
    for (i = 0; i < t->n_files; i++) {
        if (t->files[i].fp) fclose(t->files[i].fp);
        fat5__free(t->ctx, t->files[i].path);
    }
    fat5__free(t->ctx, t->files);
    fat5__free(t->ctx, t->win);
    fat5__free(t->ctx, t);
}

FAT5_API fat5_status fat5_tokens_open(fat5_ctx *ctx, const char *const *paths, int n_paths,
                                      fat5_tokens **out) {
    fat5_tokens *t;
    fat5_status st;
    int i;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_open: out is NULL");
    *out = NULL;
    if (!paths || n_paths <= 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_open: no files given");
    for (i = 0; i < n_paths; i++)
        if (!paths[i]) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_open: path %d is NULL", i);
    t = FAT5__CAST(fat5_tokens *, fat5__calloc(ctx, 1, sizeof *t));
    if (!t) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokens_open: out of memory");
    t->ctx = ctx;
    t->win_file = -1;
    t->files = FAT5__CAST(fat5__tokfile *, fat5__calloc(ctx, (size_t)n_paths, sizeof *t->files));
    t->win = FAT5__CAST(unsigned char *, fat5__malloc(ctx, FAT5__TOK_WINDOW));
    if (!t->files || !t->win) {
        fat5_tokens_close(t);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_tokens_open: out of memory");
    }
    for (i = 0; i < n_paths; i++) {
        t->n_files = i + 1;
        if ((st = fat5__tok_check(t, i, paths[i])) != FAT5_OK) {
            fat5_tokens_close(t);
            return st;
        }
    }
    *out = t;
    return FAT5_OK;
}

FAT5_API int64_t fat5_tokens_count(const fat5_tokens *t) { return t ? t->n_ids : 0; }
FAT5_API int64_t fat5_tokens_num_docs(const fat5_tokens *t) { return t ? t->n_docs : 0; }
FAT5_API int64_t fat5_tokens_vocab_size(const fat5_tokens *t) { return t ? t->vocab : 0; }
FAT5_API int32_t fat5_tokens_eos_id(const fat5_tokens *t) { return t ? t->eos : -1; }

FAT5_API fat5_status fat5_tokens_write(fat5_ctx *ctx, const char *path, const int32_t *ids, int64_t n,
                                       int64_t vocab_size, int32_t eos_id, int id_width) {
    unsigned char h[FAT5__TOK_HEADER], buf[4096];
    fat5__afile a;
    fat5_status st;
    int64_t i;
    size_t fill = 0;
    if (!path || (!ids && n > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s is NULL", path ? "ids" : "path");
    if (id_width != 2 && id_width != 4)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s: id width %d, want 2 or 4", path, id_width);
    if (vocab_size <= 0 || vocab_size > (int64_t)INT32_MAX + 1 || (id_width == 2 && vocab_size > 65536))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s: vocabulary size %lld out of range "
                         "for %d-byte ids", path, (long long)vocab_size, id_width);
    if (eos_id < 0 || eos_id >= vocab_size)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s: eos id %ld outside the vocabulary",
                         path, (long)eos_id);
    if (n <= 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s: no ids (a token file holds at least one document)", path);
    if (ids[n - 1] != eos_id)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s: the last id %ld is not the eos id %ld",
                         path, (long)ids[n - 1], (long)eos_id);
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab_size)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokens_write: %s: ids[%lld] = %ld is outside the "
                             "vocabulary of %lld", path, (long long)i, (long)ids[i], (long long)vocab_size);
    fat5__tok_header(h, id_width, vocab_size, eos_id);
    if ((st = fat5__afile_open(ctx, path, &a)) != FAT5_OK) return st;
    if ((st = fat5__afile_write(ctx, &a, path, h, sizeof h)) != FAT5_OK) return st;
    for (i = 0; i < n; i++) {
        fat5__tok_put_le(buf + fill, (uint64_t)(uint32_t)ids[i], id_width);
        fill += (size_t)id_width;
        if (fill == sizeof buf || i == n - 1) {
            if ((st = fat5__afile_write(ctx, &a, path, buf, fill)) != FAT5_OK) return st;
            fill = 0;
        }
    }
    return fat5__afile_commit(ctx, &a, path);
}

// =============================================================================================
// ==[5.2] train: UL2 sampler ==

// The stream: documents in order (those of the configured split), each cut into consecutive pieces;
// every piece gets a denoiser drawn from the mixture and becomes one example (one packed sequence).
// The state is a counter-based RNG plus a position, so it saves to a short string; an example that
// does not fit the batch is carried to the next one, and get_state reports the position from
// before it was drawn, so a restored sampler draws it again, identically.

typedef struct fat5__ul2_pos {
    fat5_rng rng;
    int64_t epoch;        // completed passes over the documents
    int64_t doc;          // index of the current document
    int64_t pos;          // stream index of its first id (< the stream's length)
    int64_t off;          // its ids already used by earlier pieces
} fat5__ul2_pos;

struct fat5_ul2 {
    fat5_ctx *ctx;
    fat5_tokens *src;
    fat5_ul2_config cfg;
    double cum[FAT5_UL2_MAX_DENOISERS];         // cumulative mixture weights, the last exactly 1
    int64_t piece_len[FAT5_UL2_MAX_DENOISERS];  // the longest piece each denoiser takes
    int64_t max_piece;
    fat5__ul2_pos cur;        // after the last example drawn
    fat5__ul2_pos pend_from;  // before the carried example (when has_pend)
    int has_pend;
    int idle_wraps;           // passes over the corpus without an example (all its documents empty)
    int32_t *piece;           // [max_piece] the ids of the current piece
    int32_t *seg;             // [2 * (max_piece + 1)] noise and kept span lengths
    int32_t *pin, *ptgt;      // the carried example: [max_enc_len] input, [max_dec_len] target
    int64_t pin_n, ptgt_n;
    int32_t *enc, *lab;       // the batch: [enc_tokens], [dec_tokens]
    int32_t *enc_cu, *dec_cu; // [enc_tokens + 1]
};

// round half to even, as numpy and T5's helpers round
static double fat5__round_even(double x) {
    double f = floor(x), d = x - f;
    if (d > 0.5) return f + 1;
    if (d < 0.5) return f;
    return fmod(f, 2.0) == 0 ? f : f + 1;
}

// SPAN on a piece of L ids: how many are noise and in how many spans. noise = round(L r) within
// [1, L-1], spans = round(noise / mu) within [1, min(noise, L - noise, sentinels)]. A piece of one
// id is all noise, one span (its kept part empty).
static void fat5__ul2_span_counts(const fat5_denoiser *d, int64_t L, int64_t n_sent, int64_t *noise,
                                  int64_t *spans) {
    double nz, k;
    if (L <= 1) {
        *noise = L;
        *spans = L;
        return;
    }
    nz = fat5__round_even((double)L * d->r);
    if (nz > (double)(L - 1)) nz = (double)(L - 1);
    if (nz < 1) nz = 1;
    k = fat5__round_even(nz / d->mu);
    if (k > nz) k = nz;
    if (k > (double)L - nz) k = (double)L - nz;
    if (k > (double)n_sent) k = (double)n_sent;
    if (k < 1) k = 1;
    *noise = (int64_t)nz;
    *spans = (int64_t)k;
}

// the input and target lengths of an example made from a piece of L ids (mode token included)
static void fat5__ul2_lengths(const fat5_ul2_config *c, const fat5_denoiser *d, int64_t L,
                              int64_t *in_len, int64_t *tgt_len) {
    int64_t m = d->mode_token >= 0, noise, spans;
    if (d->kind == FAT5_DENOISE_PREFIX) {   // the longest of each over the split points
        *in_len = m + (L >= 2 ? L - 1 : 0) + 1;
        *tgt_len = L + 1 - (L >= 2);
        return;
    }
    fat5__ul2_span_counts(d, L, c->n_sentinels, &noise, &spans);
    *in_len = m + L - noise + spans + 1;
    *tgt_len = noise + spans + 1;
}

// The longest piece whose example fits max_enc_len and max_dec_len (T5's random_spans_helper;
// both lengths grow with L, so a binary search finds it). 0 when not even one id fits.
static int64_t fat5__ul2_piece_len(const fat5_ul2_config *c, const fat5_denoiser *d) {
    int64_t lo = 0, hi = c->max_enc_len + c->max_dec_len;   // input + target > L
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2, a, b;
        fat5__ul2_lengths(c, d, mid, &a, &b);
        if (a <= c->max_enc_len && b <= c->max_dec_len) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

FAT5_API fat5_ul2_config fat5_ul2_config_default(void) {
    static const double mu[7] = {3, 8, 0, 3, 8, 64, 64}, r[7] = {.15, .15, 0, .5, .15, .15, .5};
    static const double w[7] = {.165, .165, .34, .0825, .0825, .0825, .0825};
    fat5_ul2_config c;
    int i;
    memset(&c, 0, sizeof c);
    c.n_denoisers = 7;
    for (i = 0; i < 7; i++) {
        c.denoisers[i].kind = i == 2 ? FAT5_DENOISE_PREFIX : FAT5_DENOISE_SPAN;
        c.denoisers[i].mu = mu[i];
        c.denoisers[i].r = r[i];
        c.denoisers[i].mode_token = -1;
        c.denoisers[i].weight = w[i];
    }
    c.enc_tokens = 512 * 16;
    c.dec_tokens = 512 * 16;
    c.max_enc_len = 512;
    c.max_dec_len = 512;
    c.sentinel_first = -1;
    c.n_sentinels = 0;
    return c;
}

FAT5_API fat5_ul2_config fat5_ul2_config_t5(void) {
    fat5_ul2_config c = fat5_ul2_config_default();
    c.n_denoisers = 1;
    c.denoisers[0].kind = FAT5_DENOISE_SPAN;
    c.denoisers[0].mu = 3;
    c.denoisers[0].r = .15;
    c.denoisers[0].weight = 1;
    c.max_enc_len = 512;   // a 568-id piece: 512 input ids, 114 target ids
    c.max_dec_len = 114;
    c.enc_tokens = 512 * 16;
    c.dec_tokens = 114 * 16;
    return c;
}

// whether document `doc` belongs to the held-out share: splitmix64 of its index against eval_fraction
static int fat5__ul2_held_out(int64_t doc, double eval_fraction) {
    uint64_t z = (uint64_t)doc ^ 0x6A09E667F3BCC908ull;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0) < eval_fraction;
}

static int fat5__ul2_in_split(const fat5_ul2 *s, int64_t doc) {
    return s->cfg.split == 0 || (s->cfg.split == 2) == fat5__ul2_held_out(doc, s->cfg.eval_fraction);
}

static fat5_status fat5__ul2_check(fat5_ctx *ctx, const fat5_ul2_config *c, const fat5_tokens *src) {
    int64_t V = src->vocab, lo = (int64_t)c->sentinel_first - c->n_sentinels + 1, d_in = 0, i;
    int any_span = 0, k;
    if (c->n_denoisers < 1 || c->n_denoisers > FAT5_UL2_MAX_DENOISERS)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: n_denoisers %d, want 1 .. %d", c->n_denoisers,
                         FAT5_UL2_MAX_DENOISERS);
    for (k = 0; k < c->n_denoisers; k++) {
        const fat5_denoiser *d = &c->denoisers[k];
        if (d->kind != FAT5_DENOISE_SPAN && d->kind != FAT5_DENOISE_PREFIX)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: unknown kind %d", k, (int)d->kind);
        if (!(d->weight > 0) || !isfinite(d->weight))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: weight %g, want a positive finite number",
                             k, d->weight);
        if (d->kind == FAT5_DENOISE_SPAN) {
            any_span = 1;
            if (!(d->mu > 0) || !isfinite(d->mu))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mean span length mu %g, want > 0", k, d->mu);
            if (!(d->r > 0 && d->r < 1))
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: corruption rate r %g, want 0 < r < 1", k, d->r);
        }
        if (d->mode_token != -1) {
            if (d->mode_token < 0 || d->mode_token >= V)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mode token %ld outside the vocabulary "
                                 "of %lld (-1 for none)", k, (long)d->mode_token, (long long)V);
            if (d->mode_token == src->eos)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mode token %ld is the eos id", k,
                                 (long)d->mode_token);
            if (c->n_sentinels > 0 && d->mode_token >= lo && d->mode_token <= c->sentinel_first)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: mode token %ld is a sentinel (%lld .. %ld)",
                                 k, (long)d->mode_token, (long long)lo, (long)c->sentinel_first);
        }
    }
    if (c->n_sentinels < 0 || (any_span && c->n_sentinels == 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: n_sentinels %ld: set sentinel_first and n_sentinels for the "
                         "vocabulary (ByT5 / pretokenize: %lld and %lld)", (long)c->n_sentinels,
                         (long long)(V - 1), (long long)(V > 259 ? V - 259 : 0));
    if (c->n_sentinels > 0) {
        if (c->sentinel_first < 0 || c->sentinel_first >= V || lo < 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: sentinels %lld .. %ld are not inside the vocabulary "
                             "0 .. %lld", (long long)lo, (long)c->sentinel_first, (long long)(V - 1));
        if (src->eos >= lo && src->eos <= c->sentinel_first)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: the eos id %ld is inside the sentinels %lld .. %ld",
                             (long)src->eos, (long long)lo, (long)c->sentinel_first);
    }
    if (c->enc_tokens < 1 || c->dec_tokens < 1 || c->enc_tokens >= INT32_MAX || c->dec_tokens >= INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: token budgets %lld / %lld, want 1 .. %d", (long long)c->enc_tokens,
                         (long long)c->dec_tokens, INT32_MAX - 1);
    if (c->max_enc_len < 0 || c->max_enc_len > c->enc_tokens || c->max_dec_len < 0 || c->max_dec_len > c->dec_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: max_enc_len %lld / max_dec_len %lld must lie within the "
                         "batch budgets %lld / %lld", (long long)c->max_enc_len, (long long)c->max_dec_len,
                         (long long)c->enc_tokens, (long long)c->dec_tokens);
    if (c->split < 0 || c->split > 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: split %d, want 0 (all), 1 (train) or 2 (held out)", c->split);
    if (!(c->eval_fraction >= 0 && c->eval_fraction <= 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: eval_fraction %g, want 0 .. 1", c->eval_fraction);
    if (src->n_ids - src->n_docs <= 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: empty corpus: %lld documents and no id besides eos",
                         (long long)src->n_docs);
    if (c->split != 0) {
        for (i = 0; i < src->n_docs && d_in == 0; i++)
            d_in += (c->split == 2) == fat5__ul2_held_out(i, c->eval_fraction);
        if (d_in == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: the %s split is empty: eval_fraction %g of %lld documents",
                             c->split == 2 ? "held-out" : "training", c->eval_fraction, (long long)src->n_docs);
    }
    return FAT5_OK;
}

FAT5_API void fat5_ul2_destroy(fat5_ul2 *s) {
    if (!s) return;
    fat5__free(s->ctx, s->piece);
    fat5__free(s->ctx, s->seg);
    fat5__free(s->ctx, s->pin);
    fat5__free(s->ctx, s->ptgt);
    fat5__free(s->ctx, s->enc);
    fat5__free(s->ctx, s->lab);
    fat5__free(s->ctx, s->enc_cu);
    fat5__free(s->ctx, s->dec_cu);
    fat5__free(s->ctx, s);
}

FAT5_API fat5_status fat5_ul2_create(fat5_ctx *ctx, const fat5_ul2_config *cfg, fat5_tokens *src,
                                     fat5_ul2 **out) {
    fat5_ul2_config c;
    fat5_ul2 *s;
    fat5_status st;
    double total = 0, acc = 0;
    size_t seg_n;
    int k;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ul2_create: out is NULL");
    *out = NULL;
    if (!cfg || !src) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_ul2_create: %s is NULL", cfg ? "src" : "cfg");
    c = *cfg;
    if (c.max_enc_len == 0) c.max_enc_len = c.enc_tokens;
    if (c.max_dec_len == 0) c.max_dec_len = c.dec_tokens;
    if ((st = fat5__ul2_check(ctx, &c, src)) != FAT5_OK) return st;
    s = FAT5__CAST(fat5_ul2 *, fat5__calloc(ctx, 1, sizeof *s));
    if (!s) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_ul2_create: out of memory");
    s->ctx = ctx;
    s->src = src;
    s->cfg = c;
    for (k = 0; k < c.n_denoisers; k++) total += c.denoisers[k].weight;
    for (k = 0; k < c.n_denoisers; k++) {
        int64_t a, b;
        acc += c.denoisers[k].weight;
        s->cum[k] = k == c.n_denoisers - 1 ? 1.0 : acc / total;
        s->piece_len[k] = fat5__ul2_piece_len(&c, &c.denoisers[k]);
        if (s->piece_len[k] < 2) {
            fat5__ul2_lengths(&c, &c.denoisers[k], 2, &a, &b);
            fat5_ul2_destroy(s);
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "ul2: denoiser %d: max_enc_len %lld / max_dec_len %lld are too "
                             "small for an example of two ids (it needs %lld input and %lld target tokens)", k,
                             (long long)c.max_enc_len, (long long)c.max_dec_len, (long long)a, (long long)b);
        }
        if (s->piece_len[k] > s->max_piece) s->max_piece = s->piece_len[k];
    }
    s->cur.rng = fat5_rng_init(c.seed);
    seg_n = 2 * ((size_t)s->max_piece + 1);
    s->piece = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)s->max_piece, sizeof(int32_t)));
    s->seg = FAT5__CAST(int32_t *, fat5__calloc(ctx, seg_n, sizeof(int32_t)));
    s->pin = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.max_enc_len, sizeof(int32_t)));
    s->ptgt = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.max_dec_len, sizeof(int32_t)));
    s->enc = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.enc_tokens, sizeof(int32_t)));
    s->lab = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.dec_tokens, sizeof(int32_t)));
    s->enc_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.enc_tokens + 1, sizeof(int32_t)));
    s->dec_cu = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)c.enc_tokens + 1, sizeof(int32_t)));
    if (!s->piece || !s->seg || !s->pin || !s->ptgt || !s->enc || !s->lab || !s->enc_cu || !s->dec_cu) {
        fat5_ul2_destroy(s);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_ul2_create: out of memory for the batch buffers");
    }
    *out = s;
    return FAT5_OK;
}

// Splits n items into k positive parts (k <= n), every such split equally likely: k - 1 cut
// points among the n - 1 gaps, chosen by selection sampling (Knuth's algorithm S), one draw per
// gap until the cuts are placed. n = 0 (k = 1) gives one empty part.
static void fat5__ul2_segment(fat5_rng *rng, int64_t n, int64_t k, int32_t *parts) {
    int64_t need = k - 1, gap, last = 0, j = 0;
    for (gap = 1; gap < n && need > 0; gap++) {
        int64_t left = n - gap;   // gaps from this one on
        if (need == left || (int64_t)fat5_rng_below(rng, (uint64_t)left) < need) {
            parts[j++] = (int32_t)(gap - last);
            last = gap;
            need--;
        }
    }
    parts[j] = (int32_t)(n - last);
}

// Moves p to the next document (wrapping to the start of the stream after the last one).
static void fat5__ul2_next_doc(fat5_ul2 *s, fat5__ul2_pos *p, int64_t end) {
    p->pos = end + 1;
    p->doc++;
    p->off = 0;
    if (p->pos >= s->src->n_ids) {
        p->pos = 0;
        p->doc = 0;
        p->epoch++;
        s->idle_wraps++;
    }
}

// Draws the next example from s->cur into pin / ptgt, advancing s->cur.
static fat5_status fat5__ul2_make(fat5_ul2 *s) {
    fat5__ul2_pos *p = &s->cur;
    const fat5_ul2_config *c = &s->cfg;
    const fat5_denoiser *d;
    int32_t *in = s->pin, *tg = s->ptgt, eos = s->src->eos;
    int64_t n = 0, ni = 0, nt = 0, j, k;
    double u;
    int at_end = 0, dn;
    fat5_status st;
    for (;;) {
        if (s->idle_wraps > 1)
            return fat5__err(s->ctx, FAT5_ERR_STATE, "ul2: every document of the split is empty");
        if (!fat5__ul2_in_split(s, p->doc)) {   // skip it: find its end
            do {
                if ((st = fat5__tok_read_doc(s->src, p->pos + p->off, s->max_piece, s->piece, &n, &at_end)) != FAT5_OK)
                    return st;
                p->off += n;
            } while (!at_end);
            fat5__ul2_next_doc(s, p, p->pos + p->off);
            continue;
        }
        u = fat5_rng_uniform(&p->rng);
        for (dn = 0; dn < c->n_denoisers - 1 && u >= s->cum[dn]; dn++) {}
        if ((st = fat5__tok_read_doc(s->src, p->pos + p->off, s->piece_len[dn], s->piece, &n, &at_end)) != FAT5_OK)
            return st;
        p->off += n;
        if (at_end) fat5__ul2_next_doc(s, p, p->pos + p->off);
        if (n > 0) break;   // an empty document gives nothing
    }
    s->idle_wraps = 0;
    d = &c->denoisers[dn];
    if (d->mode_token >= 0) in[ni++] = d->mode_token;
    if (d->kind == FAT5_DENOISE_PREFIX) {
        int64_t split = n >= 2 ? 1 + (int64_t)fat5_rng_below(&p->rng, (uint64_t)(n - 1)) : 0;
        memcpy(in + ni, s->piece, (size_t)split * sizeof(int32_t));
        ni += split;
        memcpy(tg, s->piece + split, (size_t)(n - split) * sizeof(int32_t));
        nt = n - split;
    } else {
        int64_t noise, spans, at = 0;
        int32_t *nl = s->seg, *kl = s->seg + s->max_piece + 1;
        fat5__ul2_span_counts(d, n, c->n_sentinels, &noise, &spans);
        fat5__ul2_segment(&p->rng, noise, spans, nl);
        fat5__ul2_segment(&p->rng, n - noise, spans, kl);
        for (k = 0; k < spans; k++) {   // kept_k, then noise span k behind sentinel_first - k
            int32_t sentinel = (int32_t)(c->sentinel_first - k);
            for (j = 0; j < kl[k]; j++) in[ni++] = s->piece[at++];
            in[ni++] = sentinel;
            tg[nt++] = sentinel;
            for (j = 0; j < nl[k]; j++) tg[nt++] = s->piece[at++];
        }
    }
    in[ni++] = eos;
    tg[nt++] = eos;
    s->pin_n = ni;
    s->ptgt_n = nt;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_ul2_next_batch(fat5_ul2 *s, fat5_batch *out) {
    int64_t ne = 0, nd = 0, n_seq = 0;
    fat5_status st;
    if (!s || !out) return fat5__err(s ? s->ctx : NULL, FAT5_ERR_INVALID_ARG, "fat5_ul2_next_batch: NULL argument");
    s->enc_cu[0] = s->dec_cu[0] = 0;
    for (;;) {
        if (!s->has_pend) {
            s->pend_from = s->cur;
            if ((st = fat5__ul2_make(s)) != FAT5_OK) {
                s->cur = s->pend_from;
                return st;
            }
            s->has_pend = 1;
        }
        if (ne + s->pin_n > s->cfg.enc_tokens || nd + s->ptgt_n > s->cfg.dec_tokens) break;   // carried
        memcpy(s->enc + ne, s->pin, (size_t)s->pin_n * sizeof(int32_t));
        memcpy(s->lab + nd, s->ptgt, (size_t)s->ptgt_n * sizeof(int32_t));
        ne += s->pin_n;
        nd += s->ptgt_n;
        n_seq++;
        s->enc_cu[n_seq] = (int32_t)ne;
        s->dec_cu[n_seq] = (int32_t)nd;
        s->has_pend = 0;
        if (ne + 1 > s->cfg.enc_tokens || nd + 2 > s->cfg.dec_tokens) break;   // nothing more fits
    }
    memset(out, 0, sizeof *out);
    out->n_seq = n_seq;
    out->n_enc_tokens = ne;
    out->n_dec_tokens = nd;
    out->enc_tokens = s->enc;
    out->enc_cu_seqlens = s->enc_cu;
    out->dec_tokens = NULL;
    out->labels = s->lab;
    out->dec_cu_seqlens = s->dec_cu;
    return FAT5_OK;
}

FAT5_API int64_t fat5_ul2_epoch(const fat5_ul2 *s) {
    if (!s) return 0;
    return s->has_pend ? s->pend_from.epoch : s->cur.epoch;
}

// "ul2v1:seed:counter:epoch:doc:pos:off:ids", decimal; ids (the stream's length) ties the state to
// the corpus it was taken from.
FAT5_API fat5_status fat5_ul2_get_state(const fat5_ul2 *s, char *buf, size_t cap) {
    const fat5__ul2_pos *p;
    int n;
    if (!s || !buf) return fat5__err(s ? s->ctx : NULL, FAT5_ERR_INVALID_ARG, "fat5_ul2_get_state: NULL argument");
    p = s->has_pend ? &s->pend_from : &s->cur;
    n = snprintf(buf, cap, "ul2v1:%llu:%llu:%lld:%lld:%lld:%lld:%lld", (unsigned long long)p->rng.seed,
                 (unsigned long long)p->rng.counter, (long long)p->epoch, (long long)p->doc, (long long)p->pos,
                 (long long)p->off, (long long)s->src->n_ids);
    if (n < 0 || (size_t)n >= cap)
        return fat5__err(s->ctx, FAT5_ERR_INVALID_ARG, "fat5_ul2_get_state: the buffer of %zu bytes is too small "
                         "(FAT5_UL2_STATE_CAP is enough)", cap);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_ul2_set_state(fat5_ul2 *s, const char *state) {
    uint64_t v[7];
    const char *q;
    fat5__ul2_pos p;
    int i, at_end = 0;
    int64_t seen = 0, n;
    fat5_status st;
    if (!s || !state) return fat5__err(s ? s->ctx : NULL, FAT5_ERR_INVALID_ARG, "fat5_ul2_set_state: NULL argument");
    if (strncmp(state, "ul2v1:", 6) != 0)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: does not start with \"ul2v1:\"");
    q = state + 6;
    for (i = 0; i < 7; i++) {
        const char *e = strchr(q, ':');
        size_t len = e ? (size_t)(e - q) : strlen(q);
        if ((i < 6) != (e != NULL) || !fat5__parse_u64(q, len, &v[i]) || (i >= 2 && v[i] > (uint64_t)INT64_MAX))
            return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: field %d is not a decimal number (want "
                             "ul2v1:seed:counter:epoch:doc:pos:off:ids)", i + 2);
        q += len + (e != NULL);
    }
    p.rng.seed = v[0];
    p.rng.counter = v[1];
    p.epoch = (int64_t)v[2];
    p.doc = (int64_t)v[3];
    p.pos = (int64_t)v[4];
    p.off = (int64_t)v[5];
    if ((int64_t)v[6] != s->src->n_ids)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: taken from a stream of %lld ids, this one has %lld",
                         (long long)v[6], (long long)s->src->n_ids);
    if (p.doc >= s->src->n_docs || p.pos >= s->src->n_ids || p.off >= s->src->n_ids - p.pos)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: document %lld at id %lld + %lld is outside the stream "
                         "(%lld documents, %lld ids)", (long long)p.doc, (long long)p.pos, (long long)p.off,
                         (long long)s->src->n_docs, (long long)s->src->n_ids);
    if (p.pos > 0) {   // a document starts right after an eos
        if ((st = fat5__tok_read_doc(s->src, p.pos - 1, 1, s->piece, &n, &at_end)) != FAT5_OK) return st;
        if (!at_end || n != 0)
            return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: id %lld does not start a document", (long long)p.pos);
    }
    at_end = 0;
    while (seen < p.off) {   // and holds more than off ids
        int64_t want = p.off - seen < s->max_piece ? p.off - seen : s->max_piece;
        if ((st = fat5__tok_read_doc(s->src, p.pos + seen, want, s->piece, &n, &at_end)) != FAT5_OK) return st;
        seen += n;
        if (at_end) break;
    }
    if (seen < p.off || at_end)
        return fat5__err(s->ctx, FAT5_ERR_FORMAT, "ul2 state: the document at id %lld is shorter than the offset %lld",
                         (long long)p.pos, (long long)p.off);
    s->cur = p;
    s->has_pend = 0;
    s->idle_wraps = 0;
    return FAT5_OK;
}

// =============================================================================================
// ==[5.3] train: optimizers and schedules ==

// The update, for every parameter tensor p with gradient g (fp32 master weights and moments on the
// model's backend, written once over the op interface):
//   norm  = global L2 norm of all gradients (per-tensor sums of squares in double, summed on the
//           host in tensor order: deterministic on both backends)
//   not finite -> the step is skipped: weights and moments untouched, result.skipped = 1; the step
//           counter still advances (the schedule moves on, and the bias correction below counts it)
//   c     = clip_norm / (norm + 1e-6) when clip_norm > 0 and that is < 1, else 1 (torch's
//           clip_grad_norm_); g' = c g (on the fly: the gradients are neither scaled nor zeroed)
//   t     = step + 1;  lr = fat5_sched_lr(cfg, step)
//   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//   alpha = lr sqrt(1 - b2^t) / (1 - b1^t), times max(1e-3, RMS(p)) for ADAMW_SCALE, RMS taken
//           before the update (RMS = |p|_2 / sqrt(numel))
//   p = p - alpha m / (sqrt(v) + eps)        (eps on the uncorrected sqrt(v), as in HF's AdamW)
//   p = p (1 - lr wd)                        (decoupled, after the update; wd = 0 for excluded tensors)
// then the bf16 matmul operands are refreshed from the new master weights. Both kinds place eps
// and the decay this way (torch.optim.AdamW puts eps on the corrected sqrt(v) and decays first;
// the difference is O(eps) and O(lr^2 wd)).
// Weight-decay exclusions: every tensor whose name contains "norm" or "bias" (case-insensitive):
// the RMSNorm weights and the relative_attention_bias tables.

#define FAT5__OPTIM_CHUNK 8192  // elements per chunk of the GPU reductions and update

struct fat5_optim {
    fat5_model *m;
    fat5_optim_config cfg;
    int64_t step;                     // updates taken (skipped ones included)
    fat5__addr m1, m2;                // fp32 [n_floats] first and second moments on the model's backend
    // fixed at creation
    int n_seg;                        // parameter tensors (m->n_params)
    int64_t n_chunks;
    fat5__addr segs, chunk_off;       // int64 [2 n_seg], [n_seg + 1] on the backend
    fat5__addr part;                  // double [n_chunks]: the GPU's per-chunk partial sums
    fat5__addr ss;                    // double [2 n_seg]: per-tensor sums of squares of gradients, weights
    fat5__addr coef;                  // fp32 [2 n_seg]: alpha, decay of each tensor this step
    fat5__addr decayed;               // int32 [n_seg]: 1 where the tensor has weight decay
    fat5__addr stats;                 // double [2]: this step's gradient norm and clipping factor
};

FAT5_API fat5_optim_config fat5_optim_config_default(void) {
    fat5_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = FAT5_OPTIM_ADAMW_SCALE;
    c.lr = 5e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-6;
    c.weight_decay = 0.0;
    c.clip_norm = 1.0;
    c.sched = FAT5_SCHED_COSINE;
    c.warmup_steps = 10000;   // placeholders (nanoT5's pre-training run): set both for your run
    c.total_steps = 65536;
    c.decay_steps = 0;
    c.min_lr = 1e-5;
    return c;
}

static const char *fat5__sched_name(fat5_sched_kind k) {
    switch (k) {
    case FAT5_SCHED_CONSTANT: return "constant";
    case FAT5_SCHED_LINEAR: return "linear";
    case FAT5_SCHED_COSINE: return "cosine";
    case FAT5_SCHED_WSD: return "wsd";
    case FAT5_SCHED_INV_SQRT: return "inv_sqrt";
    }
    return "?";
}

static fat5_status fat5__optim_config_check(fat5_ctx *ctx, const fat5_optim_config *c) {
    const char *E = "optimizer config";
    int sched_needs_total;
    if (c->kind != FAT5_OPTIM_ADAMW && c->kind != FAT5_OPTIM_ADAMW_SCALE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: kind = %d, expected FAT5_OPTIM_ADAMW (0) or "
                         "FAT5_OPTIM_ADAMW_SCALE (1)", E, (int)c->kind);
    if (!(isfinite(c->lr) && c->lr > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: lr = %g, expected a finite value > 0", E, c->lr);
    if (!(c->beta1 >= 0 && c->beta1 < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: beta1 = %g, expected a value in [0, 1)", E, c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: beta2 = %g, expected a value in [0, 1)", E, c->beta2);
    if (!(isfinite(c->eps) && c->eps > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: eps = %g, expected a finite value > 0", E, c->eps);
    if (!(isfinite(c->weight_decay) && c->weight_decay >= 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: weight_decay = %g, expected a finite value >= 0", E,
                         c->weight_decay);
    if (c->weight_decay * c->lr >= 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: lr x weight_decay = %g, expected < 1 (the decay factor 1 - lr wd must stay positive)",
                         E, c->weight_decay * c->lr);
    if (!(isfinite(c->clip_norm) && c->clip_norm >= 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: clip_norm = %g, expected a finite value >= 0 (0 = off)", E,
                         c->clip_norm);
    if ((int)c->sched < FAT5_SCHED_CONSTANT || (int)c->sched > FAT5_SCHED_INV_SQRT)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: sched = %d, expected a fat5_sched_kind (0..4)", E,
                         (int)c->sched);
    if (c->warmup_steps < 0 || c->total_steps < 0 || c->decay_steps < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "%s: warmup_steps %lld, total_steps %lld, decay_steps %lld: each must be >= 0", E,
                         (long long)c->warmup_steps, (long long)c->total_steps, (long long)c->decay_steps);
    if (!(isfinite(c->min_lr) && c->min_lr >= 0 && c->min_lr <= c->lr))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: min_lr = %g, expected a value in [0, lr = %g]", E, c->min_lr,
                         c->lr);
    sched_needs_total = c->sched == FAT5_SCHED_LINEAR || c->sched == FAT5_SCHED_COSINE || c->sched == FAT5_SCHED_WSD;
    if (sched_needs_total && c->total_steps < 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the %s schedule needs total_steps >= 1 (got %lld)", E,
                         fat5__sched_name(c->sched), (long long)c->total_steps);
    if (c->total_steps > 0 && c->warmup_steps > c->total_steps)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: warmup_steps %lld > total_steps %lld", E,
                         (long long)c->warmup_steps, (long long)c->total_steps);
    if (c->sched == FAT5_SCHED_WSD) {
        int64_t dd = c->decay_steps ? c->decay_steps : c->warmup_steps;
        if (c->warmup_steps + dd > c->total_steps)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: wsd: warmup_steps %lld + decay steps %lld > total_steps %lld", E,
                             (long long)c->warmup_steps, (long long)dd, (long long)c->total_steps);
    }
    return FAT5_OK;
}

// The rate of the update taken at `step` (0 = the first). W = warmup_steps, T = total_steps.
//   CONSTANT  lr t/W for t < W, then lr                                         (HF constant_with_warmup)
//   LINEAR    lr t/W for t < W, then lr (T - t)/(T - W), 0 from T on            (HF linear)
//   COSINE    lr (0.5 + 0.5 t/W) for t < W, then min_lr + (lr - min_lr)(1 + cos(pi (t - W)/(T - W)))/2,
//             min_lr from T on (not periodic)                                   (FAT5 / nanoT5)
//   WSD       lr (0.5 + 0.5 t/W) for t < W; lr until T - D; then lr (1 - 0.5 (t - T + D)/D) down to
//             lr/2 at T and after (D = decay_steps, or W when 0)                (FAT5)
//   INV_SQRT  lr t/W for t < W, then lr sqrt(max(W, 1) / max(t, 1))             (relative to lr)
// An invalid config gives 0 (fat5_optim_create reports why).
FAT5_API double fat5_sched_lr(const fat5_optim_config *c, int64_t step) {
    double lr, t, W, T;
    if (!c || !(isfinite(c->lr) && c->lr > 0) || c->warmup_steps < 0 || c->total_steps < 0 || c->decay_steps < 0)
        return 0.0;
    lr = c->lr;
    if (step < 0) step = 0;
    t = (double)step;
    W = (double)c->warmup_steps;
    T = (double)c->total_steps;
    switch (c->sched) {
    case FAT5_SCHED_CONSTANT:
        return step < c->warmup_steps ? lr * t / W : lr;
    case FAT5_SCHED_LINEAR:
        if (step < c->warmup_steps) return lr * t / W;
        if (step >= c->total_steps) return 0.0;
        return lr * (T - t) / (T - W);
    case FAT5_SCHED_COSINE:
        if (step < c->warmup_steps) return lr * (0.5 + 0.5 * t / W);
        if (step >= c->total_steps) return c->min_lr;
        return c->min_lr + (lr - c->min_lr) * 0.5 * (1.0 + cos(3.14159265358979323846 * (t - W) / (T - W)));
    case FAT5_SCHED_WSD: {
        int64_t dd = c->decay_steps ? c->decay_steps : c->warmup_steps, start = c->total_steps - dd;
        if (step < c->warmup_steps) return lr * (0.5 + 0.5 * t / W);
        if (step < start) return lr;
        if (step >= c->total_steps) return 0.5 * lr;
        return lr * (1.0 - 0.5 * (t - (double)start) / (double)dd);
    }
    case FAT5_SCHED_INV_SQRT:
        if (step < c->warmup_steps) return lr * t / W;
        return lr * sqrt((W > 1 ? W : 1.0) / (t > 1 ? t : 1.0));
    }
    return 0.0;
}

// "norm" or "bias" in the name, case-insensitive
static int fat5__optim_no_decay(const char *name) {
    char low[96];
    size_t i;
    for (i = 0; name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    low[i] = 0;
    return strstr(low, "norm") != NULL || strstr(low, "bias") != NULL;
}

FAT5_API void fat5_optim_destroy(fat5_optim *o) {
    fat5_ctx *ctx;
    const fat5__backend *be;
    if (!o) return;
    ctx = o->m->ctx;
    be = o->m->be;
    be->free(ctx, o->m1);
    be->free(ctx, o->m2);
    be->free(ctx, o->segs);
    be->free(ctx, o->chunk_off);
    be->free(ctx, o->part);
    be->free(ctx, o->ss);
    be->free(ctx, o->coef);
    be->free(ctx, o->decayed);
    be->free(ctx, o->stats);
    fat5__free(ctx, o);
}

FAT5_API fat5_status fat5_optim_create(fat5_model *m, const fat5_optim_config *cfg, fat5_optim **out) {
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_optim *o;
    int64_t *segs = NULL, *coff = NULL;
    int32_t *decayed = NULL;
    size_t n, ns;
    int s;
    fat5_status st;
    if (!out) return m ? fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_optim_create: out is NULL")
                       : FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    be = m->be;
    if (!cfg) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_optim_create: cfg is NULL");
    if ((st = fat5__optim_config_check(ctx, cfg))) return st;
    if (!m->training)
        return fat5__err(ctx, FAT5_ERR_STATE,
                         "fat5_optim_create: the model is in inference mode (fat5_model_set_training(m, 1) first)");
    if (!m->gd || !m->wd)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_optim_create: the model has no weights on its backend");
    o = FAT5__CAST(fat5_optim *, fat5__calloc(ctx, 1, sizeof *o));
    if (!o) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_optim_create: out of memory");
    o->m = m;
    o->cfg = *cfg;
    o->n_seg = m->n_params;
    ns = (size_t)o->n_seg;
    n = m->n_floats;
    // the tables, staged on the host: offset and numel of each tensor, its first chunk, its decay
    segs = FAT5__CAST(int64_t *, fat5__calloc(ctx, 2 * ns, sizeof(int64_t)));
    coff = FAT5__CAST(int64_t *, fat5__calloc(ctx, ns + 1, sizeof(int64_t)));
    decayed = FAT5__CAST(int32_t *, fat5__calloc(ctx, ns + 1, sizeof(int32_t)));
    if (!segs || !coff || !decayed) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_optim_create: out of memory");
        goto done;
    }
    for (s = 0; s < o->n_seg; s++) {
        const fat5__param *p = &m->params[s];
        segs[2 * s] = (int64_t)p->offset;
        segs[2 * s + 1] = (int64_t)p->numel;
        coff[s + 1] = coff[s] + (int64_t)((p->numel + FAT5__OPTIM_CHUNK - 1) / FAT5__OPTIM_CHUNK);
        decayed[s] = cfg->weight_decay != 0 && !fat5__optim_no_decay(p->name);
    }
    o->n_chunks = coff[ns];
    if ((st = be->alloc(ctx, n * 4, &o->m1)) || (st = be->alloc(ctx, n * 4, &o->m2)) ||
        (st = be->alloc(ctx, 2 * ns * 8, &o->segs)) || (st = be->alloc(ctx, (ns + 1) * 8, &o->chunk_off)) ||
        (st = be->alloc(ctx, (size_t)o->n_chunks * 8, &o->part)) || (st = be->alloc(ctx, 2 * ns * 8, &o->ss)) ||
        (st = be->alloc(ctx, 2 * ns * 4, &o->coef)) || (st = be->alloc(ctx, (ns + 1) * 4, &o->decayed)) ||
        (st = be->alloc(ctx, 2 * 8, &o->stats))) {
        st = fat5__err_prefix(ctx, st, "fat5_optim_create: moments of %zu parameters on the %s: ", n, be->name);
        goto done;
    }
    st = be->upload(ctx, o->segs, segs, 2 * ns * 8);
    if (!st) st = be->upload(ctx, o->chunk_off, coff, (ns + 1) * 8);
    if (!st) st = be->upload(ctx, o->decayed, decayed, (ns + 1) * 4);
    if (!st) st = be->sync(ctx);
done:
    fat5__free(ctx, segs);
    fat5__free(ctx, coff);
    fat5__free(ctx, decayed);
    if (st) {
        fat5_optim_destroy(o);
        return st;
    }
    *out = o;
    return FAT5_OK;
}

FAT5_API int64_t fat5_optim_get_step(const fat5_optim *o) { return o ? o->step : 0; }

// per-tensor sums of squares of x (the gradients or the master weights) into ss (double [n_seg])
static fat5_status fat5__optim_sumsq(fat5_optim *o, fat5__addr ss, fat5__addr x) {
    fat5_model *m = o->m;
    return m->be->sumsq_seg(m->ctx, ss, x, o->segs, o->chunk_off, o->n_seg, o->n_chunks, FAT5__OPTIM_CHUNK, o->part);
}

// The update is queued whole before the host waits once, at the end: the gradient norm, the clipping
// factor and the per-tensor step sizes are computed on the backend (optim_coef), and the update
// itself skips a step whose gradient norm is not finite (adamw_seg); the bf16 matrix operands of a
// GPU bf16 context are refreshed in the same pass. gate: n_gate doubles on the backend (the training
// loop's losses of the step) that skip the update when one is not finite (grad_norm NaN).
static fat5_status fat5__optim_step_gated(fat5_optim *o, fat5__addr gate, int n_gate, fat5_optim_result *out) {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    const fat5_optim_config *c;
    fat5_optim_result r;
    double lr, bc, t, stats[2];
    fat5__addr ss_w;
    fat5_status st;
    if (!o) return FAT5_ERR_INVALID_ARG;
    m = o->m;
    ctx = m->ctx;
    be = m->be;
    c = &o->cfg;
    memset(&r, 0, sizeof r);
    lr = fat5_sched_lr(c, o->step);
    r.lr = lr;
    t = (double)(o->step + 1);
    bc = sqrt(1.0 - pow(c->beta2, t)) / (1.0 - pow(c->beta1, t));
    // AdamWScale: the factor from the weights before the update
    ss_w = c->kind == FAT5_OPTIM_ADAMW_SCALE ? o->ss + 8 * (fat5__addr)o->n_seg : 0;
    if ((st = fat5__optim_sumsq(o, o->ss, m->gd)) || (ss_w && (st = fat5__optim_sumsq(o, ss_w, m->wd))) ||
        (st = be->optim_coef(ctx, o->coef, o->stats, o->ss, ss_w, o->segs, o->decayed, o->n_seg, lr * bc,
                             (float)(1.0 - lr * c->weight_decay), c->clip_norm, gate, n_gate)) ||
        (st = be->adamw_seg(ctx, m->wd, m->gd, o->m1, o->m2, o->segs, o->chunk_off, o->n_seg, o->n_chunks,
                            FAT5__OPTIM_CHUNK, o->coef, o->stats, (float)c->beta1, (float)c->beta2, (float)c->eps,
                            m->wa == m->wd ? 0 : m->wa)) ||
        (st = be->download(ctx, stats, o->stats, sizeof stats)) || (st = be->sync(ctx)))
        return st;
    r.grad_norm = stats[0];
    r.skipped = !isfinite(r.grad_norm);
    o->step++;
    if (out) *out = r;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_optim_step(fat5_optim *o, fat5_optim_result *out) {
    return fat5__optim_step_gated(o, 0, 0, out);
}

// =============================================================================================
// ==[6.1] io: safetensors reader ==
// 8-byte little-endian header length, a JSON header, then the data region. The
// reader treats the file as hostile (style_anchors.md §7.8): bounded header, strict JSON, closed
// dtype list, checked shape arithmetic, and tensor ranges that tile the data region exactly.

#define FAT5__ST_MAX_HEADER ((uint64_t)100 << 20)   // 100 MiB

typedef struct fat5__st_kv { const char *key, *val; } fat5__st_kv;   // one __metadata__ entry

struct fat5_st_file {
    fat5_ctx *ctx;
    char *path;
    FILE *fp;
    uint64_t file_size;
    uint64_t data_offset;       // 8 + header length
    fat5_st_tensor *tensors;    // [n_tensors], sorted by name
    int n_tensors;
    fat5__st_kv *meta;          // [n_meta], sorted by key
    int n_meta;
    char *strings;              // names, keys and values, one allocation
};

typedef struct fat5__st_dtype_info { const char *name; unsigned size; } fat5__st_dtype_info;
static const fat5__st_dtype_info fat5__st_dtypes[FAT5_ST_DTYPE_COUNT] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2}, {"BF16", 2},
    {"U32", 4}, {"I32", 4}, {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8},
    {"F8_E4M3", 1}, {"F8_E5M2", 1}
};

FAT5_API const char *fat5_st_dtype_name(fat5_st_dtype t) {
    int i = (int)t;
    return i >= 0 && i < (int)FAT5_ST_DTYPE_COUNT ? fat5__st_dtypes[i].name : "?";
}

FAT5_API size_t fat5_st_dtype_size(fat5_st_dtype t) {
    int i = (int)t;
    return i >= 0 && i < (int)FAT5_ST_DTYPE_COUNT ? fat5__st_dtypes[i].size : 0;
}

static int fat5__seek(FILE *fp, uint64_t off) {
#ifdef _WIN32
    return off <= (uint64_t)INT64_MAX && _fseeki64(fp, (__int64)off, SEEK_SET) == 0;
#else
    off_t o = (off_t)off;
    if (o < 0 || (uint64_t)o != off) return 0;
    return fseeko(fp, o, SEEK_SET) == 0;
#endif
}

// Reads n bytes at offset off; a short read means the file changed or was truncated.
static fat5_status fat5__st_read_at(fat5_st_file *f, uint64_t off, void *buf, size_t n) {
    size_t got;
    if (!fat5__seek(f->fp, off))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: cannot seek to byte %llu: %s", f->path,
                         (unsigned long long)off, strerror(errno));
    got = fread(buf, 1, n, f->fp);
    if (got == n) return FAT5_OK;
    if (ferror(f->fp))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: read failed at byte %llu: %s", f->path,
                         (unsigned long long)(off + got), strerror(errno));
    return fat5__err(f->ctx, FAT5_ERR_IO, "%s: unexpected end of file at byte %llu (the file "
                     "changed or was truncated)", f->path, (unsigned long long)(off + got));
}

// "[2, 3]"; fits in 256 bytes for up to FAT5_ST_MAX_DIMS dimensions
static const char *fat5__st_shape_str(char buf[256], const int64_t *shape, int ndim) {
    size_t len = 0;
    int i;
    buf[len++] = '[';
    for (i = 0; i < ndim && i < FAT5_ST_MAX_DIMS; i++) {
        char num[24];
        int w = snprintf(num, sizeof num, "%lld", (long long)shape[i]);
        if (i) {
            buf[len++] = ',';
            buf[len++] = ' ';
        }
        memcpy(buf + len, num, (size_t)w);
        len += (size_t)w;
    }
    buf[len++] = ']';
    buf[len] = 0;
    return buf;
}

// Validates one tensor entry (rules 4-6) into t; t->name is set by the caller.
static fat5_status fat5__st_parse_tensor(fat5_st_file *f, const fat5__json *v, fat5_st_tensor *t) {
    const fat5__json *dtype = NULL, *shape = NULL, *offs = NULL, *c;
    char nm[128], shp[256], key[64];
    const char *name = fat5__msg_name(nm, sizeof nm, v->key);
    uint64_t numel = 1, nbytes, begin, end, dim;
    int i, k, any_zero = 0, overflow = 0;
    if (v->type != FAT5__J_OBJECT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': expected an object with dtype, "
                         "shape and data_offsets, got %s", f->path, name,
                         fat5__json_type_name(v->type));
    for (c = v->child; c; c = c->next) {
        if (strcmp(c->key, "dtype") == 0) dtype = c;
        else if (strcmp(c->key, "shape") == 0) shape = c;
        else if (strcmp(c->key, "data_offsets") == 0) offs = c;
        else return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': unknown key '%s'", f->path,
                              name, fat5__msg_name(key, sizeof key, c->key));
    }
    if (!dtype || !shape || !offs)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': missing key '%s'", f->path,
                         name, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (dtype->type != FAT5__J_STRING)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': dtype is %s, expected a "
                         "string", f->path, name, fat5__json_type_name(dtype->type));
    for (k = 0; k < (int)FAT5_ST_DTYPE_COUNT; k++)
        if (strcmp(dtype->str, fat5__st_dtypes[k].name) == 0) break;
    if (k == (int)FAT5_ST_DTYPE_COUNT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", f->path,
                         name, fat5__msg_name(key, sizeof key, dtype->str));
    t->dtype = FAT5__CAST(fat5_st_dtype, k);
    if (shape->type != FAT5__J_ARRAY)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape is %s, expected an "
                         "array", f->path, name, fat5__json_type_name(shape->type));
    if (shape->n > FAT5_ST_MAX_DIMS)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape has %zu dimensions; at "
                         "most %d are supported", f->path, name, shape->n, FAT5_ST_MAX_DIMS);
    for (c = shape->child, i = 0; c; c = c->next, i++) {
        if (!fat5__json_as_u64(c, &dim))
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a "
                             "non-negative integer", f->path, name, i);
        if (dim > (uint64_t)INT64_MAX)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape[%d] = %llu is too "
                             "large", f->path, name, i, (unsigned long long)dim);
        t->shape[i] = (int64_t)dim;
        if (dim == 0) any_zero = 1;
        else if (numel > UINT64_MAX / dim) overflow = 1;
        else numel *= dim;
    }
    t->ndim = i;
    if (any_zero) numel = 0;   // exact: a zero dimension makes the product 0 whatever the rest
    if ((!any_zero && overflow) || numel > UINT64_MAX / fat5__st_dtypes[k].size)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape %s overflows (element "
                         "count times %u bytes does not fit in 64 bits)", f->path, name,
                         fat5__st_shape_str(shp, t->shape, t->ndim),
                         fat5__st_dtypes[k].size);
    nbytes = numel * fat5__st_dtypes[k].size;
    if (offs->type != FAT5__J_ARRAY || offs->n != 2 || !fat5__json_as_u64(offs->child, &begin) ||
        !fat5__json_as_u64(offs->child->next, &end))
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets must be an array "
                         "of 2 non-negative integers", f->path, name);
    if (begin > end)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are "
                         "reversed (begin after end)", f->path, name, (unsigned long long)begin,
                         (unsigned long long)end);
    if (end - begin != nbytes)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] hold "
                         "%llu bytes, but dtype %s and shape %s need %llu", f->path, name,
                         (unsigned long long)begin, (unsigned long long)end,
                         (unsigned long long)(end - begin), fat5__st_dtypes[k].name,
                         fat5__st_shape_str(shp, t->shape, t->ndim),
                         (unsigned long long)nbytes);
    t->begin = begin;
    t->end = end;
    return FAT5_OK;
}

static int fat5__st_cmp_offset(const void *a, const void *b) {
    const fat5_st_tensor *x = FAT5__CAST(const fat5_st_tensor *, a);
    const fat5_st_tensor *y = FAT5__CAST(const fat5_st_tensor *, b);
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int fat5__st_cmp_name(const void *a, const void *b) {
    const fat5_st_tensor *x = FAT5__CAST(const fat5_st_tensor *, a);
    const fat5_st_tensor *y = FAT5__CAST(const fat5_st_tensor *, b);
    return strcmp(x->name, y->name);
}

static int fat5__st_cmp_kv(const void *a, const void *b) {
    return strcmp(FAT5__CAST(const fat5__st_kv *, a)->key, FAT5__CAST(const fat5__st_kv *, b)->key);
}

// Rule 7: sorted by offset, the ranges cover [0, data_len) exactly: no gap, no overlap, nothing
// past the end, no trailing bytes. A zero-sized tensor must sit on a boundary.
static fat5_status fat5__st_check_tiling(fat5_st_file *f) {
    uint64_t data_len = f->file_size - f->data_offset, cursor = 0;
    const fat5_st_tensor *prev = NULL;
    char nm[128], nm2[128];
    int i;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, fat5__st_cmp_offset);
    for (i = 0; i < f->n_tensors; i++) {
        const fat5_st_tensor *t = &f->tensors[i];
        if (t->end > data_len)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data range [%llu, %llu) is "
                             "past the end of the file (the data region is %llu bytes)", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)t->begin,
                             (unsigned long long)t->end, (unsigned long long)data_len);
    }
    for (i = 0; i < f->n_tensors; i++) {
        const fat5_st_tensor *t = &f->tensors[i];
        if (t->begin < cursor)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data range [%llu, %llu) "
                             "overlaps tensor '%s' ([%llu, %llu))", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)t->begin,
                             (unsigned long long)t->end,
                             fat5__msg_name(nm2, sizeof nm2, prev ? prev->name : "?"),
                             (unsigned long long)(prev ? prev->begin : 0),
                             (unsigned long long)(prev ? prev->end : 0));
        if (t->begin > cursor)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: gap before tensor '%s': data bytes "
                             "[%llu, %llu) belong to no tensor", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)cursor,
                             (unsigned long long)t->begin);
        if (t->end > t->begin) prev = t;
        cursor = t->end;
    }
    if (cursor != data_len)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: %llu trailing bytes after the last tensor "
                         "(the data region is %llu bytes, the tensors cover %llu)", f->path,
                         (unsigned long long)(data_len - cursor), (unsigned long long)data_len,
                         (unsigned long long)cursor);
    return FAT5_OK;
}

// Builds the tensor and metadata tables from the parsed header (rules 3-7).
static fat5_status fat5__st_build(fat5_st_file *f, const fat5__json *root) {
    const fat5__json *m, *meta = NULL;
    size_t n_t = 0, n_m = 0, bytes = 0, used = 0;
    char nm[128];
    fat5_status st;
    if (root->type != FAT5__J_OBJECT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header is %s, expected an object",
                         f->path, fat5__json_type_name(root->type));
    for (m = root->child; m; m = m->next) {
        if (strcmp(m->key, "__metadata__") == 0) {
            const fat5__json *kv;
            meta = m;
            if (m->type != FAT5__J_OBJECT)
                return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: __metadata__ is %s, expected an "
                                 "object of strings", f->path, fat5__json_type_name(m->type));
            for (kv = m->child; kv; kv = kv->next) {
                if (kv->type != FAT5__J_STRING)
                    return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: __metadata__ value of '%s' "
                                     "is %s; metadata values must be strings", f->path,
                                     fat5__msg_name(nm, sizeof nm, kv->key),
                                     fat5__json_type_name(kv->type));
                if (!fat5__add_ok(bytes, strlen(kv->key) + 1, &bytes) ||
                    !fat5__add_ok(bytes, kv->len + 1, &bytes))
                    return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header too large", f->path);
                n_m++;
            }
        } else {
            n_t++;
            if (!fat5__add_ok(bytes, strlen(m->key) + 1, &bytes))
                return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header too large", f->path);
        }
    }
    if (n_t > (size_t)INT_MAX || n_m > (size_t)INT_MAX)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: too many entries in the header", f->path);
    f->tensors = FAT5__CAST(fat5_st_tensor *, fat5__calloc(f->ctx, n_t, sizeof *f->tensors));
    f->meta = FAT5__CAST(fat5__st_kv *, fat5__calloc(f->ctx, n_m, sizeof *f->meta));
    f->strings = FAT5__CAST(char *, fat5__malloc(f->ctx, bytes));
    if (!f->tensors || !f->meta || !f->strings)
        return fat5__err(f->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the tensor table",
                         f->path);
    for (m = root->child; m; m = m->next) {
        size_t n = strlen(m->key) + 1;
        fat5_st_tensor *t;
        if (m == meta) continue;
        t = &f->tensors[f->n_tensors];
        st = fat5__st_parse_tensor(f, m, t);
        if (st != FAT5_OK) return st;
        memcpy(f->strings + used, m->key, n);
        t->name = f->strings + used;
        used += n;
        f->n_tensors++;
    }
    if (meta) {
        for (m = meta->child; m; m = m->next) {
            size_t nk = strlen(m->key) + 1;
            memcpy(f->strings + used, m->key, nk);
            f->meta[f->n_meta].key = f->strings + used;
            used += nk;
            memcpy(f->strings + used, m->str, m->len + 1);
            f->meta[f->n_meta].val = f->strings + used;
            used += m->len + 1;
            f->n_meta++;
        }
        // by key, for the binary search of fat5_st_metadata_find: O(n log n) whatever the order
        // in the file (the JSON reader already refused duplicate keys)
        qsort(f->meta, (size_t)f->n_meta, sizeof *f->meta, fat5__st_cmp_kv);
    }
    st = fat5__st_check_tiling(f);
    if (st != FAT5_OK) return st;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, fat5__st_cmp_name);
    return FAT5_OK;
}

static fat5_status fat5__st_load(fat5_st_file *f) {
    unsigned char len8[8];
    uint64_t hlen = 0;
    char *hdr;
    fat5__jdoc *doc = NULL;
    fat5_status st;
    int i;
    st = fat5__open_regular(f->ctx, f->path, &f->fp, &f->file_size);
    if (st != FAT5_OK) return st;
    // rules 1-2: the header length, bounded before any arithmetic with it
    if (f->file_size < 8)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: file is too small (%llu bytes) to hold the "
                         "8-byte header length", f->path, (unsigned long long)f->file_size);
    st = fat5__st_read_at(f, 0, len8, 8);
    if (st != FAT5_OK) return st;
    for (i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    // the length is not echoed: for a file of another kind (text, an image) it is 8 bytes of that
    // file read as a number, and a 20-digit figure would only mislead
    if (hlen > FAT5__ST_MAX_HEADER)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: not a safetensors file (the header length in its "
                         "first 8 bytes exceeds the limit of 100 MiB)", f->path);
    if (hlen == 0) return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header is empty", f->path);
    if (hlen > f->file_size - 8)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header length %llu runs past the end of the "
                         "file (%llu bytes)", f->path, (unsigned long long)hlen,
                         (unsigned long long)f->file_size);
    f->data_offset = 8 + hlen;
    hdr = FAT5__CAST(char *, fat5__malloc(f->ctx, (size_t)hlen));
    if (!hdr)
        return fat5__err(f->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the %llu-byte "
                         "header", f->path, (unsigned long long)hlen);
    st = fat5__st_read_at(f, 8, hdr, (size_t)hlen);
    if (st == FAT5_OK && hdr[0] != '{')
        st = fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header does not start with '{'", f->path);
    // depth 4: root object > tensor object > shape array, plus one level of slack for errors
    if (st == FAT5_OK) st = fat5__json_parse(f->ctx, f->path, hdr, (size_t)hlen, 4, &doc);
    fat5__free(f->ctx, hdr);
    if (st != FAT5_OK) return st;
    st = fat5__st_build(f, fat5__json_root(doc));
    fat5__json_free(f->ctx, doc);
    return st;
}

FAT5_API void fat5_st_close(fat5_st_file *f) {
    fat5_ctx *ctx;
    if (!f) return;
    ctx = f->ctx;
    if (f->fp) fclose(f->fp);
    fat5__free(ctx, f->path);
    fat5__free(ctx, f->tensors);
    fat5__free(ctx, f->meta);
    fat5__free(ctx, f->strings);
    fat5__free(ctx, f);
}

FAT5_API fat5_status fat5_st_open(fat5_ctx *ctx, const char *path, fat5_st_file **out) {
    fat5_st_file *f;
    fat5_status st;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_open: out is NULL");
    *out = NULL;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_open: path is NULL");
    f = FAT5__CAST(fat5_st_file *, fat5__calloc(ctx, 1, sizeof *f));
    if (!f) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    f->ctx = ctx;
    f->path = fat5__strdup(ctx, path);
    if (!f->path) {
        fat5__free(ctx, f);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    st = fat5__st_load(f);
    if (st != FAT5_OK) {
        fat5_st_close(f);
        return st;
    }
    *out = f;
    return FAT5_OK;
}

FAT5_API int fat5_st_count(const fat5_st_file *f) { return f ? f->n_tensors : 0; }

FAT5_API const fat5_st_tensor *fat5_st_get(const fat5_st_file *f, int i) {
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

FAT5_API int fat5_st_find(const fat5_st_file *f, const char *name) {
    int lo = 0, hi = f && name ? f->n_tensors : 0;
    while (lo < hi) {   // binary search: the table is sorted by name
        int mid = lo + (hi - lo) / 2, c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

FAT5_API int fat5_st_metadata_count(const fat5_st_file *f) { return f ? f->n_meta : 0; }

FAT5_API void fat5_st_metadata_get(const fat5_st_file *f, int i, const char **key,
                                   const char **value) {
    int ok = f && i >= 0 && i < f->n_meta;
    if (key) *key = ok ? f->meta[i].key : NULL;
    if (value) *value = ok ? f->meta[i].val : NULL;
}

FAT5_API const char *fat5_st_metadata_find(const fat5_st_file *f, const char *key) {
    int lo = 0, hi = f && key ? f->n_meta : 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->meta[mid].key, key);
        if (c == 0) return f->meta[mid].val;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

FAT5_API fat5_status fat5_st_read_f32(fat5_st_file *f, int i, float *dst, int64_t n) {
    unsigned char buf[16384];
    const fat5_st_tensor *t;
    char nm[128];
    uint64_t numel, done = 0;
    size_t es;
    if (!f) return FAT5_ERR_INVALID_ARG;
    if (i < 0 || i >= f->n_tensors)
        return fat5__err(f->ctx, FAT5_ERR_INVALID_ARG, "%s: tensor index %d out of range [0, %d)",
                         f->path, i, f->n_tensors);
    t = &f->tensors[i];
    fat5__msg_name(nm, sizeof nm, t->name);
    es = fat5_st_dtype_size(t->dtype);
    numel = (t->end - t->begin) / es;   // exact: checked at open
    if (t->dtype != FAT5_ST_F32 && t->dtype != FAT5_ST_F16 && t->dtype != FAT5_ST_BF16)
        return fat5__err(f->ctx, FAT5_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; fat5 reads "
                         "F32, F16 and BF16", f->path, nm, fat5_st_dtype_name(t->dtype));
    if (n < 0 || (uint64_t)n != numel || (!dst && numel > 0))
        return fat5__err(f->ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s' has %llu elements; got a "
                         "buffer of %lld%s", f->path, nm, (unsigned long long)numel, (long long)n,
                         !dst && numel > 0 ? " (NULL)" : "");
    if (numel == 0) return FAT5_OK;
    if (!fat5__seek(f->fp, f->data_offset + t->begin))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: tensor '%s': cannot seek to its data: %s",
                         f->path, nm, strerror(errno));
    while (done < numel) {
        size_t k = sizeof buf / es, j;
        if (numel - done < k) k = (size_t)(numel - done);
        if (fread(buf, es, k, f->fp) != k)
            return fat5__err(f->ctx, FAT5_ERR_IO, "%s: tensor '%s': %s", f->path, nm,
                             ferror(f->fp) ? strerror(errno)
                                           : "unexpected end of file (the file changed or was "
                                             "truncated)");
        if (t->dtype == FAT5_ST_F32) {
            for (j = 0; j < k; j++) {
                const unsigned char *b = buf + 4 * j;
                uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                             (uint32_t)b[3] << 24;
                dst[done + j] = fat5__bits_to_f32(u);
            }
        } else if (t->dtype == FAT5_ST_BF16) {
            for (j = 0; j < k; j++)
                dst[done + j] = fat5__bf16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
        } else {
            for (j = 0; j < k; j++)
                dst[done + j] = fat5__f16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
        }
        done += k;
    }
    return FAT5_OK;
}

// =============================================================================================
// ==[6.2] io: safetensors writer ==
// The writer: fp32 tensors in name order, __metadata__ first, the header padded with
// spaces to a multiple of 8 bytes, little-endian data. Same input, same bytes.

static int fat5__st_wcmp(const void *a, const void *b) {
    const fat5_st_write_tensor *x = *FAT5__CAST(const fat5_st_write_tensor *const *, a);
    const fat5_st_write_tensor *y = *FAT5__CAST(const fat5_st_write_tensor *const *, b);
    return strcmp(x->name, y->name);
}

static int fat5__st_kcmp(const void *a, const void *b) {
    return strcmp(*FAT5__CAST(const char *const *, a), *FAT5__CAST(const char *const *, b));
}

// Checks the arguments of fat5_st_write and sorts the tensors by name into order.
static fat5_status fat5__st_write_check(fat5_ctx *ctx, const char *path,
                                        const fat5_st_write_tensor *t, int n,
                                        const char *const *meta_kv, int n_meta,
                                        const fat5_st_write_tensor **order, const int64_t *const *i64) {
    const char **keys;
    char nm[128];
    uint64_t total = 0;
    int i, d;
    for (i = 0; i < n; i++) {
        uint64_t numel = 1;
        const char *name = t[i].name;
        if (!name || !name[0])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d has %s name", path, i,
                             name ? "an empty" : "a NULL");
        if (strcmp(name, "__metadata__") == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d: the name __metadata__ is "
                             "reserved", path, i);
        if (!fat5__utf8_valid(name))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d: the name is not valid "
                             "UTF-8", path, i);
        fat5__msg_name(nm, sizeof nm, name);
        if (t[i].ndim < 0 || t[i].ndim > FAT5_ST_MAX_DIMS)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': ndim %d is not in "
                             "[0, %d]", path, nm, t[i].ndim, FAT5_ST_MAX_DIMS);
        for (d = 0; d < t[i].ndim; d++) {
            int64_t s = t[i].shape[d];
            if (s < 0)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': shape[%d] = %lld is "
                                 "negative", path, nm, d, (long long)s);
            if (s != 0 && numel > UINT64_MAX / 8 / (uint64_t)s)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': shape overflows",
                                 path, nm);
            numel *= (uint64_t)s;
        }
        if (numel > 0 && !t[i].data && !(i64 && i64[i]))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': data is NULL", path, nm);
        if (total + (i64 && i64[i] ? 8 : 4) * numel < total)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the tensors add up to more than "
                             "2^64 bytes", path);
        total += (i64 && i64[i] ? 8 : 4) * numel;
        order[i] = &t[i];
    }
    qsort(FAT5__CAST(void *, order), (size_t)n, sizeof *order, fat5__st_wcmp);
    for (i = 1; i < n; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: duplicate tensor name '%s'", path,
                             fat5__msg_name(nm, sizeof nm, order[i]->name));
    if (n_meta == 0) return FAT5_OK;
    keys = FAT5__CAST(const char **, fat5__calloc(ctx, (size_t)n_meta, sizeof *keys));
    if (!keys) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (i = 0; i < n_meta; i++) {
        const char *k = meta_kv[2 * i], *v = meta_kv[2 * i + 1];
        const char *bad = !k ? "the key is NULL" : !v ? "the value is NULL"
                          : !fat5__utf8_valid(k) ? "the key is not valid UTF-8"
                          : !fat5__utf8_valid(v) ? "the value is not valid UTF-8" : NULL;
        if (bad) {
            fat5__free(ctx, FAT5__CAST(void *, keys));
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: metadata entry %d: %s", path, i, bad);
        }
        keys[i] = k;
    }
    qsort(FAT5__CAST(void *, keys), (size_t)n_meta, sizeof *keys, fat5__st_kcmp);
    for (i = 1; i < n_meta; i++) {
        if (strcmp(keys[i - 1], keys[i]) == 0) {
            fat5__msg_name(nm, sizeof nm, keys[i]);
            fat5__free(ctx, FAT5__CAST(void *, keys));
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: duplicate metadata key '%s'", path,
                             nm);
        }
    }
    fat5__free(ctx, FAT5__CAST(void *, keys));
    return FAT5_OK;
}

static uint64_t fat5__st_wnumel(const fat5_st_write_tensor *t) {
    uint64_t numel = 1;
    int d;
    for (d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
    return numel;
}

// fat5_st_write, where i64 (unless NULL) marks I64 tensors: i64[i] not NULL holds tensor i's values
// (its data is then ignored). As the safetensors library lays data out (by alignment, then name),
// the I64 tensors come first, then the F32 ones, each group in name order.
static fat5_status fat5__st_write(fat5_ctx *ctx, const char *path, const fat5_st_write_tensor *t, int n_tensors,
                                  const char *const *meta_kv, int n_meta, const int64_t *const *i64) {
    const fat5_st_write_tensor **order;
    unsigned char buf[16384];
    fat5__sb h;
    fat5__afile a;
    uint64_t off = 0, hlen;
    fat5_status st;
    int i, d;
    if (!path || n_tensors < 0 || n_meta < 0 || (n_tensors > 0 && !t) || (n_meta > 0 && !meta_kv))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_write: %s",
                         !path ? "path is NULL" : n_tensors < 0 || n_meta < 0 ? "negative count"
                         : !t && n_tensors > 0 ? "tensors is NULL" : "meta_kv is NULL");
    order = FAT5__CAST(const fat5_st_write_tensor **,
                       fat5__calloc(ctx, (size_t)n_tensors, sizeof *order));
    if (!order) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    st = fat5__st_write_check(ctx, path, t, n_tensors, meta_kv, n_meta, order, i64);
    if (st != FAT5_OK) {
        fat5__free(ctx, FAT5__CAST(void *, order));
        return st;
    }
    if (i64) {   // a stable partition of the name order: I64 tensors first
        int n8 = 0, j;
        for (i = 0; i < n_tensors; i++)
            if (i64[order[i] - t]) {
                const fat5_st_write_tensor *x = order[i];
                for (j = i; j > n8; j--) order[j] = order[j - 1];
                order[n8++] = x;
            }
    }
    // the header
    fat5__sb_init(&h, ctx);
    fat5__sb_puts(&h, "{");
    if (n_meta > 0) {
        fat5__sb_puts(&h, "\"__metadata__\":{");
        for (i = 0; i < n_meta; i++) {
            if (i) fat5__sb_puts(&h, ",");
            fat5__sb_json_string(&h, meta_kv[2 * i]);
            fat5__sb_puts(&h, ":");
            fat5__sb_json_string(&h, meta_kv[2 * i + 1]);
        }
        fat5__sb_puts(&h, "}");
    }
    for (i = 0; i < n_tensors; i++) {
        const int64_t *v64 = i64 ? i64[order[i] - t] : NULL;
        uint64_t nbytes = fat5__st_wnumel(order[i]) * (v64 ? 8 : 4);
        if (i || n_meta > 0) fat5__sb_puts(&h, ",");
        fat5__sb_json_string(&h, order[i]->name);
        fat5__sb_puts(&h, v64 ? ":{\"dtype\":\"I64\",\"shape\":[" : ":{\"dtype\":\"F32\",\"shape\":[");
        for (d = 0; d < order[i]->ndim; d++)
            fat5__sb_printf(&h, "%s%lld", d ? "," : "", (long long)order[i]->shape[d]);
        fat5__sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                        (unsigned long long)(off + nbytes));
        off += nbytes;   // no overflow: each tensor is in memory
    }
    fat5__sb_puts(&h, "}");
    while (!h.oom && h.len % 8 != 0) fat5__sb_puts(&h, " ");
    if (h.oom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the header", path);
    } else if ((uint64_t)h.len > FAT5__ST_MAX_HEADER) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the header would be %zu bytes, over the "
                       "100 MiB a reader accepts", path, h.len);
    }
    if (st == FAT5_OK) st = fat5__afile_open(ctx, path, &a);
    if (st == FAT5_OK) {   // header length and header
        hlen = h.len;
        for (i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen >> (8 * i));
        st = fat5__afile_write(ctx, &a, path, buf, 8);
        if (st == FAT5_OK) st = fat5__afile_write(ctx, &a, path, h.buf, h.len);
    }
    for (i = 0; st == FAT5_OK && i < n_tensors; i++) {   // data, little-endian, in chunks
        uint64_t numel = fat5__st_wnumel(order[i]), done = 0;
        const int64_t *v64 = i64 ? i64[order[i] - t] : NULL;
        if (v64) {   // 8 bytes an element, little-endian
            for (; st == FAT5_OK && done < numel; done++) {
                uint64_t u = (uint64_t)v64[done];
                for (d = 0; d < 8; d++) buf[d] = (unsigned char)(u >> (8 * d));
                st = fat5__afile_write(ctx, &a, path, buf, 8);
            }
            continue;
        }
        while (st == FAT5_OK && done < numel) {
            size_t k = sizeof buf / 4, j;
            if (numel - done < k) k = (size_t)(numel - done);
            for (j = 0; j < k; j++) {
                uint32_t u;
                memcpy(&u, &order[i]->data[done + j], 4);
                buf[4 * j] = (unsigned char)u;
                buf[4 * j + 1] = (unsigned char)(u >> 8);
                buf[4 * j + 2] = (unsigned char)(u >> 16);
                buf[4 * j + 3] = (unsigned char)(u >> 24);
            }
            st = fat5__afile_write(ctx, &a, path, buf, 4 * k);
            done += k;
        }
    }
    if (st == FAT5_OK) st = fat5__afile_commit(ctx, &a, path);
    fat5__sb_free(&h);
    fat5__free(ctx, FAT5__CAST(void *, order));
    return st;
}

FAT5_API fat5_status fat5_st_write(fat5_ctx *ctx, const char *path, const fat5_st_write_tensor *t,
                                   int n_tensors, const char *const *meta_kv, int n_meta) {
    return fat5__st_write(ctx, path, t, n_tensors, meta_kv, n_meta, NULL);
}

// =============================================================================================
// ==[6.3] io: Hugging Face checkpoint directories ==

// Creates dir unless it exists (one level; the parent must exist).
static fat5_status fat5__mkdir(fat5_ctx *ctx, const char *dir) {
    if (fat5__is_dir(dir)) return FAT5_OK;
#ifdef _WIN32
    return fat5__err(ctx, FAT5_ERR_IO, "%s: no such directory", dir);
#else
    if (mkdir(dir, 0777) != 0 && !fat5__is_dir(dir))
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot create directory: %s", dir, strerror(errno));
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

// Reads the shard list of a model.safetensors.index.json into k: every distinct shard once, in
// name order (sorted, then adjacent duplicates skipped: O(n log n) for an index of any size).
static fat5_status fat5__ckpt_open_index(fat5_ctx *ctx, fat5__ckpt *k, const char *dir, const char *index_path) {
    char *text = NULL, path[4096], nm[128], sh[128];
    const char **shard = NULL;
    size_t len = 0, n = 0, n_shards = 0, i;
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
    shard = FAT5__CAST(const char **, fat5__calloc(ctx, wm->n, sizeof *shard));
    if (!shard) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        goto done;
    }
    for (e = wm->child; e; e = e->next) {
        if (e->type != FAT5__J_STRING || !e->len || strchr(e->str, '/') || strchr(e->str, '\\') ||
            e->str[0] == '.' || !fat5__ends_with(e->str, ".safetensors") || !fat5__msg_safe(e->str)) {
            st = fat5__err(ctx, FAT5_ERR_FORMAT,
                           "%s: tensor '%s' maps to '%s', not a .safetensors file name in the same directory",
                           index_path, fat5__msg_name(nm, sizeof nm, e->key),
                           e->type == FAT5__J_STRING ? fat5__msg_name(sh, sizeof sh, e->str) : "(not a string)");
            goto done;
        }
        shard[n++] = e->str;
    }
    qsort(FAT5__CAST(void *, shard), n, sizeof *shard, fat5__st_kcmp);
    for (i = 0; i < n; i++)
        if (i == 0 || strcmp(shard[n_shards - 1], shard[i]) != 0) shard[n_shards++] = shard[i];
    if (n_shards > FAT5__MAX_SHARDS) {
        st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: the index names %zu shard files; at most %d are supported",
                       index_path, n_shards, FAT5__MAX_SHARDS);
        goto done;
    }
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

static fat5_status fat5__ckpt_match(fat5_ctx *ctx, fat5__ckpt *k, const fat5_model_config *cfg, int lm_head_tied,
                                    const char *dir, int **loc, int *n_loc) {
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
        t = fat5__ckpt_find(k, pr->io_name, &f);
        if (t < 0 && i == probe->shared) {
            t = fat5__ckpt_find(k, "encoder.embed_tokens.weight", &f);
            if (t < 0) t = fat5__ckpt_find(k, "decoder.embed_tokens.weight", &f);
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
        for (t = 0; t < fat5_st_count(k->files[f]); t++) {
            const char *name = fat5_st_get(k->files[f], t)->name;
            if (!k->used[f][t] && !fat5__ignorable_tensor(name)) {
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

FAT5_API fat5_status fat5_model_load(fat5_ctx *ctx, const char *path, fat5_model **out) {
    fat5__ckpt k;
    fat5_model_config cfg;
    fat5_model *m = NULL;
    char dir[4096], p[4200], *text = NULL;
    size_t len = 0;
    fat5_status st;
    int i, f, has_lm_head, n_loc = 0, *loc = NULL;
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

    // lm_head: the file's own when it has one, else shared.weight -- unless config.json says the
    // model is untied: then lm_head.weight stays in the table and its absence is an error (tying
    // silently would run another model than the one transformers builds from this directory)
    has_lm_head = fat5__ckpt_find(&k, "lm_head.weight", &f) >= 0;
    cfg.tie_word_embeddings = !has_lm_head && cfg.tie_word_embeddings;
    // every name, shape and dtype is checked before the weights are allocated
    if ((st = fat5__ckpt_match(ctx, &k, &cfg, cfg.tie_word_embeddings, dir, &loc, &n_loc))) goto fail;
    if ((st = fat5__model_alloc(ctx, &cfg, cfg.tie_word_embeddings, &m))) goto fail;
    FAT5_ASSERT(m->n_params == n_loc);
    for (i = 0; i < m->n_params; i++) {
        const fat5__param *pr = &m->params[i];
        if ((st = fat5_st_read_f32(k.files[loc[2 * i]], loc[2 * i + 1], m->w + pr->offset, (int64_t)pr->numel)))
            goto fail;
    }
    if (m->flash_names && (st = fat5__ckpt_check_aliases(ctx, &k, m, dir))) goto fail;
    fat5__free(ctx, loc);
    loc = NULL;
    fat5__ckpt_close(ctx, &k);
    if ((st = fat5__model_place(m))) goto fail;
    // generation_config.json beside the weights: checked now, kept for fat5_generate_config_default
    snprintf(p, sizeof p, "%s/generation_config.json", dir);
    if (fat5__is_file(p)) {
        fat5_generate_config g;
        if ((st = fat5__read_file(ctx, p, (size_t)1 << 20, &m->gen_json, &m->gen_json_len))) goto fail;
        g = fat5_generate_config_default(m);
        if ((st = fat5_generate_config_from_json(ctx, m->gen_json, m->gen_json_len, &g))) {
            st = fat5__err_prefix(ctx, st, "%s: ", p);
            goto fail;
        }
    }
    *out = m;
    return FAT5_OK;
fail:
    fat5__free(ctx, loc);
    fat5__ckpt_close(ctx, &k);
    fat5_model_destroy(m);
    return st;
}

FAT5_API fat5_status fat5_model_save(fat5_model *m, const char *dir) {
    fat5_ctx *ctx = m->ctx;
    fat5_st_write_tensor *t;
    char path[4200], *json = NULL, init_l[2][96];
    size_t json_len = 0;
    const char *meta[4];
    int64_t l0 = m->cfg.rel_max_distance;
    const int64_t **i64;
    fat5_status st;
    int i, k, n = m->n_params;
    if (!dir || strlen(dir) >= 4096) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_save: bad directory");
    if ((st = fat5__mkdir(ctx, dir))) return st;
    if ((st = fat5__model_pull_params(m))) return st;
    if ((st = fat5_model_config_to_json(ctx, &m->cfg, &json, &json_len))) return st;
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
    meta[0] = "format";
    meta[1] = "pt";
    meta[2] = "fat5_version";
    meta[3] = FAT5_VERSION_STRING;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st = fat5__st_write(ctx, path, t, n, meta, 2, i64);
    if (st == FAT5_OK) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        st = fat5_write_file_atomic(ctx, path, json, json_len);
    }
    fat5__free(ctx, t);
    fat5__free(ctx, FAT5__CAST(void *, i64));
    fat5__free(ctx, json);
    return st;
}

// =============================================================================================
// ==[6.4] io: training checkpoints and the training loop ==

// ---------------------------------------------------------------------------------------------
// training options

// the model shapes a run can name instead of a config.json
static int fat5__model_preset(const char *name, fat5_model_config *c) {
    fat5_model_config d = fat5_model_config_default();
    // byte vocabulary (ByT5 ids: 0 pad, 1 eos, 2 unk, byte + 3, sentinels from the top), v1.1 style
    d.vocab_size = 384;
    d.act = FAT5_ACT_GELU_TANH;
    d.gated = 1;
    d.tie_word_embeddings = 0;
    d.scale_decoder_outputs = 0;
    d.dropout_rate = 0.0;
    if (strcmp(name, "fat5-small") == 0) {        // FAT5-small: 512 / 2048, 8 heads, 12 + 12 layers
        d.d_model = 512, d.d_ff = 2048, d.num_heads = 8, d.d_kv = 64, d.num_layers = 12, d.num_decoder_layers = 12;
    } else if (strcmp(name, "small") == 0) {      // T5 v1.1-small's widths, 8 + 8 layers
        d.d_model = 512, d.d_ff = 1024, d.num_heads = 6, d.d_kv = 64, d.num_layers = 8, d.num_decoder_layers = 8;
    } else if (strcmp(name, "tiny") == 0) {       // for the CPU: 128 / 512, 4 heads of 32, 2 + 2 layers
        d.d_model = 128, d.d_ff = 512, d.num_heads = 4, d.d_kv = 32, d.num_layers = 2, d.num_decoder_layers = 2;
    } else {
        return 0;
    }
    *c = d;
    return 1;
}

FAT5_API fat5_train_config fat5_train_config_default(void) {
    fat5_train_config c;
    memset(&c, 0, sizeof c);
    c.eval_fraction = 0.01;
    c.ul2 = fat5_ul2_config_default();
    (void)fat5__model_preset("fat5-small", &c.model);
    c.seed = 42;
    c.optim = fat5_optim_config_default();
    c.optim.total_steps = 1000;
    c.optim.warmup_steps = 100;
    c.loss = fat5_loss_config_default();
    c.grad_accum = 1;
    c.prefetch = 1;
    memcpy(c.output_dir, "train-out", 10);
    c.logging_steps = 10;
    c.eval_steps = 100;
    c.eval_batches = 8;
    c.save_steps = 500;
    c.save_total_limit = 3;
    c.device = -1;
    return c;
}

static const char fat5__train_options[] =
    "data: token files, comma-separated (tools/pretokenize writes them)\n"
    "eval_fraction: share of documents held out for evaluation (0.01; 0 = none)\n"
    "model: a preset (fat5-small, small, tiny) or a config.json path\n"
    "d_model, d_ff, d_kv, num_heads, num_layers, num_decoder_layers, vocab_size: model shape\n"
    "feed_forward_proj: relu, gelu, gated-gelu, gated-silu\n"
    "position_encoding_type: t5 (relative buckets), none, ALiBi, RoPE or FIRE (FAT5's names; any but t5\n"
    "  makes a FAT5 model, model_type flash_t5)\n"
    "relative_attention_num_buckets, relative_attention_max_distance: T5's buckets (max distance: FIRE's L0)\n"
    "alibi_mode: symetric or asymetric (half the encoder's heads look back, half forward)\n"
    "rotary_emb_fraction, rotary_base, rotary_interleaved, rotary_scale_base: RoPE (scale base: xPos)\n"
    "fire_mlp_width: FIRE's hidden width (32)\n"
    "init: start from this Hugging Face checkpoint directory instead of random weights\n"
    "attention: the encoder's attention for the run: full, local:R, block-global:R:G or transient-global:R:G\n"
    "  (any checkpoint, no retraining; default the model's own)\n"
    "seed: initialisation and data order (42)\n"
    "optim: adamwscale (FAT5) or adamw\n"
    "learning_rate, adam_beta1, adam_beta2, adam_epsilon, weight_decay: the optimizer\n"
    "max_grad_norm: global gradient-norm clipping (0 = off)\n"
    "lr_scheduler_type: cosine (FAT5), wsd, inverse_sqrt, linear, constant\n"
    "warmup_steps, decay_steps (wsd), min_lr (cosine floor): the schedule\n"
    "max_steps: optimizer steps of the run\n"
    "gradient_accumulation_steps: micro-batches per step\n"
    "prefetch: 1 draws the next step's batches on a host thread while the GPU works (default), 0 on the\n"
    "  calling thread (to measure what the sampler costs; metrics.jsonl's data_s is the wait)\n"
    "z_loss, label_smoothing: the loss\n"
    "denoisers: fat5 (the seven-denoiser UL2 mixture) or t5 (span corruption r .15, mu 3)\n"
    "max_length, max_labels_length: most input / target tokens of one example\n"
    "sentinel_first, n_sentinels: the sentinel ids, counting down (default: the top of the data's\n"
    "  vocabulary; every id above the bytes for a byte vocabulary, else 100 as T5's <extra_id_N>)\n"
    "batch_tokens, batch_labels_tokens: input / target token budget of one micro-batch\n"
    "output_dir: checkpoints and metrics.jsonl\n"
    "resume: a checkpoint directory, or an output directory (its latest checkpoint)\n"
    "logging_steps, eval_steps, eval_batches, save_steps, save_total_limit: reporting and checkpoints\n"
    "peak_tflops: the device's peak for MFU (0 = 989 on a GPU in bf16, else none)\n"
    "device: auto, cpu or gpu\n";

FAT5_API const char *fat5_train_option_names(void) { return fat5__train_options; }

static int fat5__opt_f64(const char *v, double lo, double hi, double *out) {
    double d;
    if (!fat5__strtod_c(v, &d) || !(d >= lo && d <= hi)) return 0;
    *out = d;
    return 1;
}
static int fat5__opt_i64(const char *v, int64_t lo, int64_t hi, int64_t *out) {
    double d;
    if (!fat5__strtod_c(v, &d) || d != floor(d) || d < (double)lo || d > (double)hi) return 0;
    *out = (int64_t)d;
    return 1;
}
static int fat5__opt_str(const char *v, char *dst, size_t cap) {
    size_t n = strlen(v);
    if (n >= cap) return 0;
    memcpy(dst, v, n + 1);
    return 1;
}

FAT5_API fat5_status fat5_train_config_set(fat5_ctx *ctx, fat5_train_config *c, const char *key, const char *v) {
    const double big = 1e300;
    const int64_t imax = (int64_t)1 << 52;
    int64_t i = 0;
    int ok = 1;
    fat5_model_config *mc = &c->model;
    if (!c || !key || !v) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_train_config_set: NULL argument");
#define FAT5__IS(name) (strcmp(key, name) == 0)
    if (FAT5__IS("data")) ok = fat5__opt_str(v, c->data, sizeof c->data);
    else if (FAT5__IS("eval_fraction")) ok = fat5__opt_f64(v, 0, 0.5, &c->eval_fraction);
    else if (FAT5__IS("init")) ok = fat5__opt_str(v, c->init, sizeof c->init);
    else if (FAT5__IS("attention")) {  // "": the model's own
        fat5_attention a;
        fat5_status st = v[0] ? fat5_attention_parse(ctx, v, &a) : FAT5_OK;
        if (st) return fat5__err_prefix(ctx, st, "option attention: ");
        ok = fat5__opt_str(v, c->attention, sizeof c->attention);
    }
    else if (FAT5__IS("output_dir")) ok = fat5__opt_str(v, c->output_dir, sizeof c->output_dir) && v[0];
    else if (FAT5__IS("resume")) ok = fat5__opt_str(v, c->resume, sizeof c->resume);
    else if (FAT5__IS("seed")) { ok = fat5__opt_i64(v, 0, imax, &i); c->seed = (uint64_t)i; }
    else if (FAT5__IS("model")) {
        if (!fat5__model_preset(v, mc)) {
            char *text = NULL;
            size_t len = 0;
            fat5_status st = fat5__read_file(ctx, v, (size_t)1 << 20, &text, &len);
            if (st) return fat5__err_prefix(ctx, st, "option model: not a preset (fat5-small, small, tiny) and: ");
            st = fat5_model_config_from_json(ctx, text, len, mc);
            fat5__free(ctx, text);
            if (st) return st;
        }
    }
    else if (FAT5__IS("position_encoding_type")) {   // FAT5's names and values; a FAT5 model then
        int k;                                        // (model_type flash_t5: saved under FAT5's names)
        for (k = FAT5_POS_T5; k <= FAT5_POS_FIRE && strcmp(v, fat5__pos_name((fat5_pos_kind)k)) != 0; k++) {}
        ok = k <= FAT5_POS_FIRE;
        if (ok) mc->pos_kind = (fat5_pos_kind)k;
        if (ok && k != FAT5_POS_T5 && strcmp(mc->model_type, "t5") == 0) memcpy(mc->model_type, "flash_t5", 9);
    }
    else if (FAT5__IS("alibi_mode")) {
        ok = strcmp(v, "symetric") == 0 || strcmp(v, "symmetric") == 0 || strcmp(v, "asymetric") == 0 ||
             strcmp(v, "asymmetric") == 0;
        mc->alibi_asymmetric = v[0] == 'a';
    }
    else if (FAT5__IS("rotary_emb_fraction")) ok = fat5__opt_f64(v, 1e-9, 1, &mc->rotary_fraction);
    else if (FAT5__IS("rotary_base")) ok = fat5__opt_f64(v, 1e-9, big, &mc->rotary_base);
    else if (FAT5__IS("rotary_scale_base")) ok = fat5__opt_f64(v, 0, big, &mc->rotary_scale_base);
    else if (FAT5__IS("rotary_interleaved")) {
        ok = strcmp(v, "true") == 0 || strcmp(v, "false") == 0 || strcmp(v, "1") == 0 || strcmp(v, "0") == 0;
        mc->rotary_interleaved = strcmp(v, "true") == 0 || strcmp(v, "1") == 0;
    }
    else if (FAT5__IS("fire_mlp_width")) {
        ok = fat5__opt_i64(v, 1, 1 << 20, &i);
        mc->fire_mlp_width = (int)i;
    }
    else if (FAT5__IS("relative_attention_max_distance")) ok = fat5__opt_i64(v, 1, 1 << 30, &mc->rel_max_distance);
    else if (FAT5__IS("relative_attention_num_buckets")) ok = fat5__opt_i64(v, 4, 1 << 16, &mc->rel_buckets);
    else if (FAT5__IS("d_model")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->d_model);
    else if (FAT5__IS("d_ff")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->d_ff);
    else if (FAT5__IS("d_kv")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->d_kv);
    else if (FAT5__IS("num_heads")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->num_heads);
    else if (FAT5__IS("num_layers")) ok = fat5__opt_i64(v, 1, 1024, &mc->num_layers);
    else if (FAT5__IS("num_decoder_layers")) ok = fat5__opt_i64(v, 1, 1024, &mc->num_decoder_layers);
    else if (FAT5__IS("vocab_size")) ok = fat5__opt_i64(v, 1, 1 << 24, &mc->vocab_size);
    else if (FAT5__IS("feed_forward_proj")) {
        const char *a = strncmp(v, "gated-", 6) == 0 ? v + 6 : v;
        mc->gated = a != v;
        if (strcmp(a, "relu") == 0) mc->act = FAT5_ACT_RELU;
        else if (strcmp(a, "gelu") == 0) mc->act = mc->gated ? FAT5_ACT_GELU_TANH : FAT5_ACT_GELU;
        else if (strcmp(a, "gelu_new") == 0) mc->act = FAT5_ACT_GELU_TANH;
        else if (strcmp(a, "silu") == 0) mc->act = FAT5_ACT_SILU;
        else ok = 0;
    }
    else if (FAT5__IS("optim")) {
        if (strcmp(v, "adamwscale") == 0) c->optim.kind = FAT5_OPTIM_ADAMW_SCALE;
        else if (strcmp(v, "adamw") == 0) c->optim.kind = FAT5_OPTIM_ADAMW;
        else ok = 0;
    }
    else if (FAT5__IS("learning_rate")) ok = fat5__opt_f64(v, 0, big, &c->optim.lr) && c->optim.lr > 0;
    else if (FAT5__IS("adam_beta1")) ok = fat5__opt_f64(v, 0, 0.999999, &c->optim.beta1);
    else if (FAT5__IS("adam_beta2")) ok = fat5__opt_f64(v, 0, 0.999999999, &c->optim.beta2);
    else if (FAT5__IS("adam_epsilon")) ok = fat5__opt_f64(v, 0, 1, &c->optim.eps) && c->optim.eps > 0;
    else if (FAT5__IS("weight_decay")) ok = fat5__opt_f64(v, 0, 1e6, &c->optim.weight_decay);
    else if (FAT5__IS("max_grad_norm")) ok = fat5__opt_f64(v, 0, big, &c->optim.clip_norm);
    else if (FAT5__IS("lr_scheduler_type")) {
        if (strcmp(v, "cosine") == 0) c->optim.sched = FAT5_SCHED_COSINE;
        else if (strcmp(v, "wsd") == 0) c->optim.sched = FAT5_SCHED_WSD;
        else if (strcmp(v, "inverse_sqrt") == 0) c->optim.sched = FAT5_SCHED_INV_SQRT;
        else if (strcmp(v, "linear") == 0) c->optim.sched = FAT5_SCHED_LINEAR;
        else if (strcmp(v, "constant") == 0) c->optim.sched = FAT5_SCHED_CONSTANT;
        else ok = 0;
    }
    else if (FAT5__IS("warmup_steps")) ok = fat5__opt_i64(v, 0, imax, &c->optim.warmup_steps);
    else if (FAT5__IS("decay_steps")) ok = fat5__opt_i64(v, 0, imax, &c->optim.decay_steps);
    else if (FAT5__IS("min_lr")) ok = fat5__opt_f64(v, 0, big, &c->optim.min_lr);
    else if (FAT5__IS("max_steps")) ok = fat5__opt_i64(v, 1, imax, &c->optim.total_steps);
    else if (FAT5__IS("prefetch")) {
        ok = fat5__opt_i64(v, 0, 1, &i);
        c->prefetch = (int)i;
    }
    else if (FAT5__IS("gradient_accumulation_steps")) {
        ok = fat5__opt_i64(v, 1, 1 << 20, &i);
        c->grad_accum = (int)i;
    }
    else if (FAT5__IS("z_loss")) ok = fat5__opt_f64(v, 0, 1e6, &c->loss.z_loss);
    else if (FAT5__IS("label_smoothing")) ok = fat5__opt_f64(v, 0, 0.999999, &c->loss.label_smoothing);
    else if (FAT5__IS("denoisers")) {
        fat5_ul2_config u = strcmp(v, "fat5") == 0 ? fat5_ul2_config_default() : fat5_ul2_config_t5();
        if (strcmp(v, "fat5") != 0 && strcmp(v, "t5") != 0) ok = 0;
        else {
            c->ul2.n_denoisers = u.n_denoisers;
            memcpy(c->ul2.denoisers, u.denoisers, sizeof u.denoisers);
        }
    }
    else if (FAT5__IS("sentinel_first")) { ok = fat5__opt_i64(v, 0, INT32_MAX, &i); c->ul2.sentinel_first = (int32_t)i; }
    else if (FAT5__IS("n_sentinels")) { ok = fat5__opt_i64(v, 0, INT32_MAX, &i); c->ul2.n_sentinels = (int32_t)i; }
    else if (FAT5__IS("max_length")) ok = fat5__opt_i64(v, 1, 1 << 24, &c->ul2.max_enc_len);
    else if (FAT5__IS("max_labels_length")) ok = fat5__opt_i64(v, 1, 1 << 24, &c->ul2.max_dec_len);
    else if (FAT5__IS("batch_tokens")) ok = fat5__opt_i64(v, 1, (int64_t)1 << 31, &c->ul2.enc_tokens);
    else if (FAT5__IS("batch_labels_tokens")) ok = fat5__opt_i64(v, 1, (int64_t)1 << 31, &c->ul2.dec_tokens);
    else if (FAT5__IS("logging_steps")) ok = fat5__opt_i64(v, 1, imax, &c->logging_steps);
    else if (FAT5__IS("eval_steps")) ok = fat5__opt_i64(v, 0, imax, &c->eval_steps);
    else if (FAT5__IS("eval_batches")) ok = fat5__opt_i64(v, 1, 1 << 20, &c->eval_batches);
    else if (FAT5__IS("save_steps")) ok = fat5__opt_i64(v, 0, imax, &c->save_steps);
    else if (FAT5__IS("save_total_limit")) {
        ok = fat5__opt_i64(v, 0, 1 << 20, &i);
        c->save_total_limit = (int)i;
    }
    else if (FAT5__IS("peak_tflops")) ok = fat5__opt_f64(v, 0, 1e9, &c->peak_tflops);
    else if (FAT5__IS("device")) {
        if (strcmp(v, "auto") == 0) c->device = -1;
        else if (strcmp(v, "cpu") == 0) c->device = FAT5_DEVICE_CPU;
        else if (strcmp(v, "gpu") == 0) c->device = FAT5_DEVICE_GPU;
        else ok = 0;
    }
    else {
        char nm[96];
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "unknown training option '%s' (fat5_train_option_names lists them)",
                         fat5__msg_name(nm, sizeof nm, key));
    }
#undef FAT5__IS
    if (!ok) {
        char nm[96], val[96];
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training option %s: bad value '%s'", fat5__msg_name(nm, sizeof nm, key),
                         fat5__msg_name(val, sizeof val, v));
    }
    return FAT5_OK;
}

FAT5_API fat5_status fat5_train_config_from_json(fat5_ctx *ctx, fat5_train_config *cfg, const char *json,
                                                 size_t len) {
    fat5__jdoc *d = NULL;
    const fat5__json *root, *j;
    fat5_status st;
    if (!cfg || !json) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_train_config_from_json: NULL argument");
    if ((st = fat5__json_parse(ctx, "training config", json, len, 8, &d))) return st;
    root = fat5__json_root(d);
    if (root->type != FAT5__J_OBJECT) {
        fat5__json_free(ctx, d);
        return fat5__err(ctx, FAT5_ERR_FORMAT, "training config: not a JSON object");
    }
    for (j = root->child; j && st == FAT5_OK; j = j->next) {
        char buf[4096];
        const char *v = buf;
        if (j->type == FAT5__J_STRING || j->type == FAT5__J_NUMBER) {
            v = j->str;
        } else if (j->type == FAT5__J_ARRAY && strcmp(j->key, "data") == 0) {   // a list of files
            const fat5__json *e;
            size_t o = 0;
            buf[0] = 0;
            for (e = j->child; e; e = e->next) {
                if (e->type != FAT5__J_STRING || o + e->len + 2 > sizeof buf) {
                    st = fat5__err(ctx, FAT5_ERR_FORMAT, "training config: 'data' must be file names (at most %zu bytes)",
                                   sizeof buf - 1);
                    break;
                }
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", o ? "," : "", e->str);
            }
        } else if (j->type == FAT5__J_TRUE || j->type == FAT5__J_FALSE) {
            v = j->type == FAT5__J_TRUE ? "1" : "0";
        } else {
            char nm[96];
            st = fat5__err(ctx, FAT5_ERR_FORMAT, "training config: '%s' is %s", fat5__msg_name(nm, sizeof nm, j->key),
                           fat5__json_type_name(j->type));
        }
        if (st == FAT5_OK) st = fat5_train_config_set(ctx, cfg, j->key, v);
    }
    fat5__json_free(ctx, d);
    return st;
}

// ---------------------------------------------------------------------------------------------
// the trainer

#define FAT5__TRAIN_MAX_FILES 256

typedef struct fat5__tbatch {          // a copy of one sampler batch
    fat5_batch b;
    int32_t *buf;
    size_t cap;                        // int32 elements in buf
    int64_t n_labels;                  // labels that count (not -100)
} fat5__tbatch;

// The micro-batches of one step, drawn together; state is the sampler's state before them.
typedef struct fat5__tgroup {
    fat5__tbatch *mb;                  // [grad_accum]
    char state[512];
    fat5_status st;                    // of the drawing
} fat5__tgroup;

struct fat5_trainer {
    fat5_ctx *ctx;
    fat5_ctx *dctx;                    // the data's own context: the sampler may run on a host thread
    fat5_train_config cfg;
    fat5_tokens *tokens;
    fat5_ul2 *sampler;
    fat5_model *m;
    fat5_optim *o;
    fat5__addr losses;                 // double [2 grad_accum] on the backend: each micro-batch's ce, loss
    double *h_losses;                  // their host copy, read once per step
    fat5__tgroup grp[2];
    int ahead;                         // index of a group drawn ahead and not yet used, -1 = none
    int prefetch;                      // draw the next step's group on a host thread (GPU models)
#ifndef FAT5_NO_THREADS
    pthread_t thread;
    int thread_running;
#endif
    int64_t tokens_seen, n_skipped, step_at_start;
    double elapsed_before, t_start, flops_per_s_peak;
    char ckpt[4200];
    FILE *log;
};

FAT5_API fat5_model *fat5_train_model(fat5_trainer *t) { return t ? t->m : NULL; }
FAT5_API const fat5_train_config *fat5_train_get_config(const fat5_trainer *t) { return t ? &t->cfg : NULL; }
FAT5_API int fat5_train_done(const fat5_trainer *t) {
    return !t || fat5_optim_get_step(t->o) >= t->cfg.optim.total_steps;
}

static fat5_status fat5__tbatch_copy(fat5_ctx *ctx, fat5__tbatch *d, const fat5_batch *s) {
    size_t ns = (size_t)s->n_seq + 1, te = (size_t)s->n_enc_tokens, td = (size_t)s->n_dec_tokens;
    size_t need = 2 * ns + te + 2 * td, k;
    if (need > d->cap) {
        int32_t *nb = FAT5__CAST(int32_t *, fat5__realloc(ctx, d->buf, need * sizeof *nb));
        if (!nb) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory for a batch");
        d->buf = nb;
        d->cap = need;
    }
    d->b = *s;
    memcpy(d->buf, s->enc_cu_seqlens, ns * 4);
    memcpy(d->buf + ns, s->dec_cu_seqlens, ns * 4);
    memcpy(d->buf + 2 * ns, s->enc_tokens, te * 4);
    memcpy(d->buf + 2 * ns + te, s->labels, td * 4);
    d->b.enc_cu_seqlens = d->buf;
    d->b.dec_cu_seqlens = d->buf + ns;
    d->b.enc_tokens = d->buf + 2 * ns;
    d->b.labels = d->buf + 2 * ns + te;
    d->b.dec_tokens = NULL;
    if (s->dec_tokens) {
        memcpy(d->buf + 2 * ns + te + td, s->dec_tokens, td * 4);
        d->b.dec_tokens = d->buf + 2 * ns + te + td;
    }
    d->n_labels = 0;
    for (k = 0; k < td; k++) d->n_labels += s->labels[k] != -100;
    return FAT5_OK;
}

// Draws the next step's micro-batches into g. Uses only the data context.
static void fat5__tgroup_draw(fat5_trainer *t, fat5__tgroup *g) {
    fat5_batch b;
    int i;
    memset(&b, 0, sizeof b);
    g->st = fat5_ul2_get_state(t->sampler, g->state, sizeof g->state);
    for (i = 0; i < t->cfg.grad_accum && g->st == FAT5_OK; i++)
        if ((g->st = fat5_ul2_next_batch(t->sampler, &b)) == FAT5_OK) g->st = fat5__tbatch_copy(t->dctx, &g->mb[i], &b);
}

#ifndef FAT5_NO_THREADS
static void *fat5__tgroup_thread(void *arg) {
    fat5_trainer *t = FAT5__CAST(fat5_trainer *, arg);
    fat5__tgroup_draw(t, &t->grp[t->ahead]);
    return NULL;
}
#endif

// Waits for a drawing under way on the host thread.
static void fat5__train_join(fat5_trainer *t) {
#ifndef FAT5_NO_THREADS
    if (t->thread_running) {
        pthread_join(t->thread, NULL);
        t->thread_running = 0;
    }
#else
    (void)t;
#endif
}

// The group for this step: the one drawn ahead, or one drawn now. Starts drawing the next one on
// the host thread when prefetching.
static fat5_status fat5__train_next_group(fat5_trainer *t, int more, fat5__tgroup **out) {
    fat5__tgroup *g;
    fat5__train_join(t);
    if (t->ahead < 0) {
        t->ahead = 0;
        fat5__tgroup_draw(t, &t->grp[0]);
    }
    g = &t->grp[t->ahead];
    t->ahead = -1;
    *out = g;
    if (g->st) return fat5__err(t->ctx, g->st, "%s", fat5_last_error(t->dctx));
#ifndef FAT5_NO_THREADS
    if (t->prefetch && more) {
        t->ahead = g == &t->grp[0] ? 1 : 0;
        if (pthread_create(&t->thread, NULL, fat5__tgroup_thread, t) == 0) t->thread_running = 1;
        else fat5__tgroup_draw(t, &t->grp[t->ahead]);   // no thread: draw it now
    }
#else
    (void)more;
#endif
    return FAT5_OK;
}

// Forward FLOPs of a batch, the usual convention (2 per multiply-add, attention scores and values
// counted in full); a training step is 3 times this.
static double fat5__batch_flops(const fat5_model_config *c, const fat5_batch *b) {
    double D = (double)c->d_model, I = (double)(c->num_heads * c->d_kv), F = (double)c->d_ff,
           V = (double)c->vocab_size, ffn = 2.0 * D * F * (c->gated ? 3 : 2), qkvo = 8.0 * D * I;
    double te = (double)b->n_enc_tokens, td = (double)b->n_dec_tokens, enc_sq = 0, dec_sq = 0, cross = 0, f;
    int64_t s;
    for (s = 0; s < b->n_seq; s++) {
        double le = (double)(b->enc_cu_seqlens[s + 1] - b->enc_cu_seqlens[s]);
        double ld = (double)(b->dec_cu_seqlens[s + 1] - b->dec_cu_seqlens[s]);
        enc_sq += le * le;
        dec_sq += ld * ld;
        cross += le * ld;
    }
    f = (double)c->num_layers * (te * (qkvo + ffn) + 4.0 * I * enc_sq);
    f += (double)c->num_decoder_layers *
         (td * (qkvo + ffn + 4.0 * D * I) + te * 4.0 * D * I + 4.0 * I * dec_sq + 4.0 * I * cross);
    return f + 2.0 * td * D * V;
}

static fat5_status fat5__train_sampler(fat5_trainer *t, int split, uint64_t seed, fat5_ul2 **out) {
    fat5_ul2_config u = t->cfg.ul2;
    int64_t V = fat5_tokens_vocab_size(t->tokens);
    fat5_status st;
    u.split = split;
    u.eval_fraction = t->cfg.eval_fraction;
    u.seed = seed;
    if (u.n_sentinels <= 0) {
        // from the top of the vocabulary: every id above the bytes for byte vocabularies (ByT5),
        // else 100 (T5's <extra_id_0> .. <extra_id_99>) or a quarter of a smaller vocabulary
        int64_t n = V > 259 && V <= 1024 ? V - 259 : (V / 4 < 100 ? V / 4 : 100);
        u.sentinel_first = (int32_t)(V - 1);
        u.n_sentinels = (int32_t)n;
    }
    if ((st = fat5_ul2_create(t->dctx, &u, t->tokens, out))) return fat5__err(t->ctx, st, "%s", fat5_last_error(t->dctx));
    return FAT5_OK;
}

// "a.tok,b.tok" opened as one stream
static fat5_status fat5__train_open_data(fat5_trainer *t) {
    char buf[sizeof t->cfg.data], *p, *paths[FAT5__TRAIN_MAX_FILES];
    int n = 0;
    memcpy(buf, t->cfg.data, sizeof buf);
    if (!buf[0]) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "training: no data (option data: token files)");
    for (p = buf; p && *p;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = 0;
        if (*p) {
            if (n == FAT5__TRAIN_MAX_FILES)
                return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "training: more than %d data files", FAT5__TRAIN_MAX_FILES);
            paths[n++] = p;
        }
        p = comma ? comma + 1 : NULL;
    }
    {
        fat5_status st = fat5_tokens_open(t->dctx, (const char *const *)paths, n, &t->tokens);
        if (st) return fat5__err(t->ctx, st, "%s", fat5_last_error(t->dctx));
    }
    return FAT5_OK;
}

// the first line where two texts differ, for messages
static void fat5__first_diff(const char *a, const char *b, char *out, size_t cap) {
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') la = a + 1, lb = b + 1;
        a++, b++;
    }
    {
        size_t na = strcspn(la, "\n"), nb = strcspn(lb, "\n");
        snprintf(out, cap, "%.*s (here) vs %.*s (checkpoint)", (int)(na < 80 ? na : 80), la, (int)(nb < 80 ? nb : 80), lb);
    }
}

// --- checkpoint directories

static fat5_status fat5__fsync_dir(fat5_ctx *ctx, const char *dir) {
    int fd = open(dir, O_RDONLY), rc;
    if (fd < 0) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL) return fat5__err(ctx, FAT5_ERR_IO, "%s: fsync failed: %s", dir, strerror(errno));
    return FAT5_OK;
}

// Removes a checkpoint directory that fat5 wrote: its files (none are directories), then itself.
static void fat5__rm_ckpt(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4400];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        (void)unlink(p);
    }
    closedir(d);
    (void)rmdir(dir);
}

static int fat5__is_step_name(const char *s, int64_t *step) {
    int64_t v = 0;
    int n = 0;
    if (strncmp(s, "step-", 5) != 0) return 0;
    for (s += 5; *s >= '0' && *s <= '9' && n < 18; s++, n++) v = v * 10 + (*s - '0');
    if (*s || n == 0) return 0;
    *step = v;
    return 1;
}

// Deletes temporary directories a killed save left, and all but the newest `keep` checkpoints.
static void fat5__ckpt_prune(const char *out, int keep) {
    DIR *d = opendir(out);
    struct dirent *e;
    int64_t steps[4096], s;
    int n = 0, i, j;
    char p[4400];
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".tmp-step-", 10) == 0) {
            snprintf(p, sizeof p, "%s/%s", out, e->d_name);
            fat5__rm_ckpt(p);
        } else if (fat5__is_step_name(e->d_name, &s) && n < 4096) {
            steps[n++] = s;
        }
    }
    closedir(d);
    if (keep <= 0 || n <= keep) return;
    for (i = 1; i < n; i++)   // insertion sort: a handful of entries
        for (j = i; j > 0 && steps[j - 1] > steps[j]; j--) s = steps[j], steps[j] = steps[j - 1], steps[j - 1] = s;
    for (i = 0; i < n - keep; i++) {
        snprintf(p, sizeof p, "%s/step-%08lld", out, (long long)steps[i]);
        fat5__rm_ckpt(p);
    }
}

// The data set's identity, recorded in a checkpoint and checked on resume.
static void fat5__data_fingerprint(const fat5_trainer *t, char *buf, size_t cap) {
    snprintf(buf, cap, "tokens=%lld docs=%lld vocab=%lld eos=%d eval_fraction=%.17g",
             (long long)fat5_tokens_count(t->tokens), (long long)fat5_tokens_num_docs(t->tokens),
             (long long)fat5_tokens_vocab_size(t->tokens), (int)fat5_tokens_eos_id(t->tokens), t->cfg.eval_fraction);
}

FAT5_API fat5_status fat5_train_save(fat5_trainer *t, const char **dir_out) {
    fat5_ctx *ctx = t->ctx;
    fat5_model *m = t->m;
    char tmp[4200], fin[4200], path[4400], latest[64], sampler[512], data[256], num[4][40], *json = NULL;
    const char *meta[20];
    fat5_st_write_tensor w[2];
    float *mom = NULL;
    size_t n = m->n_floats, json_len = 0;
    int64_t step = fat5_optim_get_step(t->o);
    fat5_status st;
    if (dir_out) *dir_out = NULL;
    if ((st = fat5__mkdir(ctx, t->cfg.output_dir))) return st;
    snprintf(fin, sizeof fin, "%s/step-%08lld", t->cfg.output_dir, (long long)step);
    snprintf(tmp, sizeof tmp, "%s/.tmp-step-%08lld", t->cfg.output_dir, (long long)step);
    fat5__rm_ckpt(tmp);
    if ((st = fat5__mkdir(ctx, tmp))) return st;
    if ((st = fat5_model_save(m, tmp))) goto fail;
    // the sampler where the next step starts: before a group drawn ahead, if there is one
    fat5__train_join(t);
    if (t->ahead >= 0) snprintf(sampler, sizeof sampler, "%s", t->grp[t->ahead].state);
    else if ((st = fat5_ul2_get_state(t->sampler, sampler, sizeof sampler))) goto fail;
    if ((st = fat5_model_config_to_json(ctx, &m->cfg, &json, &json_len))) goto fail;
    mom = FAT5__CAST(float *, fat5__malloc(ctx, n * 2 * sizeof(float)));
    if (!mom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "checkpoint: out of memory for the optimizer state");
        goto fail;
    }
    if ((st = m->be->download(ctx, mom, t->o->m1, n * 4)) || (st = m->be->download(ctx, mom + n, t->o->m2, n * 4)))
        goto fail;
    memset(w, 0, sizeof w);
    w[0].name = "optimizer.exp_avg";
    w[1].name = "optimizer.exp_avg_sq";
    w[0].ndim = w[1].ndim = 1;
    w[0].shape[0] = w[1].shape[0] = (int64_t)n;
    w[0].data = mom;
    w[1].data = mom + n;
    fat5__data_fingerprint(t, data, sizeof data);
    snprintf(num[0], sizeof num[0], "%lld", (long long)step);
    snprintf(num[1], sizeof num[1], "%lld", (long long)t->tokens_seen);
    snprintf(num[2], sizeof num[2], "%lld", (long long)t->n_skipped);
    fat5__fmt_g(num[3], sizeof num[3], 17, t->elapsed_before + (fat5__now_s() - t->t_start));
    meta[0] = "format", meta[1] = "fat5-training-state";
    meta[2] = "version", meta[3] = "1";
    meta[4] = "step", meta[5] = num[0];
    meta[6] = "tokens_seen", meta[7] = num[1];
    meta[8] = "skipped_steps", meta[9] = num[2];
    meta[10] = "elapsed_s", meta[11] = num[3];
    meta[12] = "sampler", meta[13] = sampler;
    meta[14] = "data", meta[15] = data;
    meta[16] = "model_config", meta[17] = json;
    meta[18] = "fat5_version", meta[19] = FAT5_VERSION_STRING;
    snprintf(path, sizeof path, "%s/training_state.safetensors", tmp);
    if ((st = fat5_st_write(ctx, path, w, 2, meta, 10))) goto fail;
    if ((st = fat5__fsync_dir(ctx, tmp))) goto fail;
    // the complete directory takes its name in one rename; an older one of the same step goes first
    if (fat5__is_dir(fin)) fat5__rm_ckpt(fin);
    if (rename(tmp, fin) != 0) {
        st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot rename to %s: %s", tmp, fin, strerror(errno));
        goto fail;
    }
    if ((st = fat5__fsync_dir(ctx, t->cfg.output_dir))) goto fail;
    snprintf(latest, sizeof latest, "step-%08lld\n", (long long)step);
    snprintf(path, sizeof path, "%s/latest", t->cfg.output_dir);
    if ((st = fat5_write_file_atomic(ctx, path, latest, strlen(latest)))) goto fail;
    fat5__ckpt_prune(t->cfg.output_dir, t->cfg.save_total_limit);
    fat5__free(ctx, mom);
    fat5__free(ctx, json);
    snprintf(t->ckpt, sizeof t->ckpt, "%s", fin);
    if (dir_out) *dir_out = t->ckpt;
    return FAT5_OK;
fail:
    fat5__free(ctx, mom);
    fat5__free(ctx, json);
    fat5__rm_ckpt(tmp);
    return st;
}

// The checkpoint directory a resume path names: itself, or an output directory's latest.
static fat5_status fat5__resume_dir(fat5_ctx *ctx, const char *path, char *out, size_t cap) {
    char p[4400], *text = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/training_state.safetensors", path);
    if (fat5__is_file(p)) {
        snprintf(out, cap, "%s", path);
        return FAT5_OK;
    }
    snprintf(p, sizeof p, "%s/latest", path);
    if (!fat5__is_file(p))
        return fat5__err(ctx, FAT5_ERR_IO, "resume %s: neither a checkpoint (no training_state.safetensors) nor an "
                         "output directory with a checkpoint (no 'latest')", path);
    if (fat5__read_file(ctx, p, 64, &text, &len)) return fat5__err_prefix(ctx, FAT5_ERR_IO, "resume: ");
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = 0;
    {
        int64_t s;
        int ok = fat5__is_step_name(text, &s);
        if (ok) snprintf(out, cap, "%s/%s", path, text);
        fat5__free(ctx, text);
        if (!ok) return fat5__err(ctx, FAT5_ERR_FORMAT, "resume %s: 'latest' does not name a step-N checkpoint", path);
    }
    return FAT5_OK;
}

static int fat5__meta_i64(const fat5_st_file *f, const char *key, int64_t *out) {
    const char *v = fat5_st_metadata_find(f, key);
    return v && fat5__opt_i64(v, 0, INT64_MAX / 2, out);
}

// Restores weights (already loaded from dir by the caller), moments, step, sampler and counters.
static fat5_status fat5__train_resume(fat5_trainer *t, const char *dir) {
    fat5_ctx *ctx = t->ctx;
    fat5_model *m = t->m;
    fat5_st_file *f = NULL;
    char path[4400], data[256], *json = NULL;
    const char *v;
    float *mom = NULL;
    size_t n = m->n_floats, json_len = 0;
    int64_t step, seen, skipped;
    double el;
    int i1, i2;
    fat5_status st;
    snprintf(path, sizeof path, "%s/training_state.safetensors", dir);
    if ((st = fat5_st_open(ctx, path, &f))) return st;
    v = fat5_st_metadata_find(f, "format");
    if (!v || strcmp(v, "fat5-training-state") != 0 || !(v = fat5_st_metadata_find(f, "version")) || strcmp(v, "1") != 0) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: not a fat5 training state (format 1)", path);
        goto done;
    }
    if ((st = fat5_model_config_to_json(ctx, &m->cfg, &json, &json_len))) goto done;
    if (!(v = fat5_st_metadata_find(f, "model_config")) || strcmp(v, json) != 0) {
        char diff[256];
        fat5__first_diff(json, v ? v : "", diff, sizeof diff);
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint holds another model: %s", dir, diff);
        goto done;
    }
    fat5__data_fingerprint(t, data, sizeof data);
    if (!(v = fat5_st_metadata_find(f, "data")) || strcmp(v, data) != 0) {
        char a[96], b[96];
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint was trained on other data: %s (here) vs %s",
                       dir, fat5__msg_name(a, sizeof a, data), fat5__msg_name(b, sizeof b, v ? v : "nothing"));
        goto done;
    }
    i1 = fat5_st_find(f, "optimizer.exp_avg");
    i2 = fat5_st_find(f, "optimizer.exp_avg_sq");
    if (!fat5__meta_i64(f, "step", &step) || !fat5__meta_i64(f, "tokens_seen", &seen) ||
        !fat5__meta_i64(f, "skipped_steps", &skipped) || !(v = fat5_st_metadata_find(f, "elapsed_s")) ||
        !fat5__strtod_c(v, &el) || i1 < 0 || i2 < 0 || fat5_st_get(f, i1)->ndim != 1 ||
        fat5_st_get(f, i1)->shape[0] != (int64_t)n || fat5_st_get(f, i2)->ndim != 1 ||
        fat5_st_get(f, i2)->shape[0] != (int64_t)n || !fat5_st_metadata_find(f, "sampler")) {
        st = fat5__err(ctx, FAT5_ERR_FORMAT, "%s: incomplete training state (step, counters, sampler, or moments of "
                       "%zu elements)", path, n);
        goto done;
    }
    if (step > t->cfg.optim.total_steps) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint is at step %lld, past max_steps %lld", dir,
                       (long long)step, (long long)t->cfg.optim.total_steps);
        goto done;
    }
    mom = FAT5__CAST(float *, fat5__malloc(ctx, n * 2 * sizeof(float)));
    if (!mom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "resume: out of memory for the optimizer state");
        goto done;
    }
    if ((st = fat5_st_read_f32(f, i1, mom, (int64_t)n)) || (st = fat5_st_read_f32(f, i2, mom + n, (int64_t)n)))
        goto done;
    if ((st = fat5_ul2_set_state(t->sampler, fat5_st_metadata_find(f, "sampler")))) {
        st = fat5__err(ctx, st, "resume %s: %s", dir, fat5_last_error(t->dctx));
        goto done;
    }
    if ((st = m->be->upload(ctx, t->o->m1, mom, n * 4)) || (st = m->be->upload(ctx, t->o->m2, mom + n, n * 4)))
        goto done;
    t->o->step = step;
    t->tokens_seen = seen;
    t->n_skipped = skipped;
    t->elapsed_before = el;
done:
    fat5__free(ctx, mom);
    fat5__free(ctx, json);
    fat5_st_close(f);
    return st;
}

// metrics.jsonl after a resume: the lines of steps past the checkpoint (written by the run that
// stopped) are dropped, so the log reads as one uninterrupted run.
static fat5_status fat5__log_truncate(fat5_ctx *ctx, const char *path, int64_t step) {
    char *text = NULL, *p, *line;
    size_t len = 0;
    fat5__sb b;
    fat5_status st;
    if (!fat5__is_file(path)) return FAT5_OK;
    if ((st = fat5__read_file(ctx, path, (size_t)1 << 34, &text, &len))) return st;
    fat5__sb_init(&b, ctx);
    for (line = text; *line; line = p) {
        const char *k = strstr(line, "\"step\": ");
        char *nl = strchr(line, '\n');
        p = nl ? nl + 1 : line + strlen(line);
        if (!nl) break;   // a torn last line
        if (k && k < nl && strtoll(k + 8, NULL, 10) > step) continue;
        fat5__sb_putn(&b, line, (size_t)(p - line));
    }
    if (b.oom) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    else st = fat5_write_file_atomic(ctx, path, b.buf ? b.buf : "", b.len);
    fat5__free(ctx, b.buf);
    fat5__free(ctx, text);
    return st;
}

FAT5_API void fat5_train_destroy(fat5_trainer *t) {
    int i, g;
    if (!t) return;
    fat5__train_join(t);
    if (t->log) fclose(t->log);
    for (g = 0; g < 2; g++) {
        if (t->grp[g].mb)
            for (i = 0; i < t->cfg.grad_accum; i++) fat5__free(t->dctx, t->grp[g].mb[i].buf);
        fat5__free(t->ctx, t->grp[g].mb);
    }
    fat5_optim_destroy(t->o);
    if (t->m && t->losses) t->m->be->free(t->ctx, t->losses);
    fat5__free(t->ctx, t->h_losses);
    fat5_model_destroy(t->m);
    fat5_ul2_destroy(t->sampler);
    fat5_tokens_close(t->tokens);
    fat5_ctx_destroy(t->dctx);
    fat5__free(t->ctx, t);
}

FAT5_API fat5_status fat5_train_create(fat5_ctx *ctx, const fat5_train_config *cfg, fat5_trainer **out) {
    fat5_trainer *t;
    fat5_status st;
    char dir[4200], path[4400];
    if (!cfg || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_train_create: NULL argument");
    *out = NULL;
    if (cfg->grad_accum < 1 || cfg->optim.total_steps < 1 || !cfg->output_dir[0] || cfg->eval_batches < 1 ||
        cfg->logging_steps < 1 || cfg->eval_steps < 0 || cfg->save_steps < 0 || cfg->save_total_limit < 0 ||
        !(cfg->eval_fraction >= 0 && cfg->eval_fraction <= 0.5))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training config: gradient_accumulation_steps and max_steps must be "
                         ">= 1, eval_fraction in [0, 0.5], output_dir set, step counts >= 0");
    t = FAT5__CAST(fat5_trainer *, fat5__calloc(ctx, 1, sizeof *t));
    if (!t) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    t->ctx = ctx;
    t->cfg = *cfg;
    t->ahead = -1;
    t->grp[0].mb = FAT5__CAST(fat5__tbatch *, fat5__calloc(ctx, (size_t)cfg->grad_accum, sizeof(fat5__tbatch)));
    t->grp[1].mb = FAT5__CAST(fat5__tbatch *, fat5__calloc(ctx, (size_t)cfg->grad_accum, sizeof(fat5__tbatch)));
    {   // the data's context: the same allocator and log, on the host
        fat5_ctx_config dc = ctx->cfg;
        dc.device = FAT5_DEVICE_CPU;
        if (!t->grp[0].mb || !t->grp[1].mb || fat5_ctx_create(&dc, &t->dctx) != FAT5_OK) {
            fat5_train_destroy(t);
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "trainer: out of memory");
        }
    }
    if ((st = fat5__train_open_data(t))) goto fail;
    // the model: the checkpoint's when resuming, else --init's, else a new one
    dir[0] = 0;
    if (cfg->resume[0] && (st = fat5__resume_dir(ctx, cfg->resume, dir, sizeof dir))) goto fail;
    if (cfg->init[0]) {
        if ((st = fat5_model_load(ctx, cfg->init, &t->m))) goto fail;
        t->cfg.model = t->m->cfg;
    }
    if (dir[0]) {
        fat5_model *r = NULL;
        char *a = NULL, *b = NULL;
        size_t la, lb;
        if ((st = fat5_model_load(ctx, dir, &r))) goto fail;
        st = fat5_model_config_to_json(ctx, &t->cfg.model, &a, &la);
        if (!st) st = fat5_model_config_to_json(ctx, &r->cfg, &b, &lb);
        if (!st && strcmp(a, b) != 0) {
            char diff[256];
            fat5__first_diff(a, b, diff, sizeof diff);
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "resume %s: the checkpoint holds another model than this run's: %s",
                           dir, diff);
        }
        fat5__free(ctx, a);
        fat5__free(ctx, b);
        fat5_model_destroy(t->m);
        t->m = r;
        if (st) goto fail;
    } else if (!t->m) {
        if ((st = fat5_model_create(ctx, &t->cfg.model, cfg->seed, &t->m))) goto fail;
    }
    if (cfg->attention[0]) {
        fat5_attention a;
        if ((st = fat5_attention_parse(ctx, cfg->attention, &a)) || (st = fat5_model_set_attention(t->m, &a)))
            goto fail;
    }
    if (fat5_tokens_vocab_size(t->tokens) > t->m->cfg.vocab_size) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "training: the data's vocabulary (%lld) is larger than the model's (%lld)",
                       (long long)fat5_tokens_vocab_size(t->tokens), (long long)t->m->cfg.vocab_size);
        goto fail;
    }
    if ((st = fat5__train_sampler(t, cfg->eval_fraction > 0 ? 1 : 0, cfg->seed * 0x9e3779b97f4a7c15ull + 1, &t->sampler)))
        goto fail;
    if ((st = fat5_optim_create(t->m, &t->cfg.optim, &t->o))) goto fail;
    if ((st = t->m->be->alloc(ctx, (size_t)(2 * cfg->grad_accum) * 8, &t->losses))) goto fail;
    if (!(t->h_losses = FAT5__CAST(double *, fat5__calloc(ctx, (size_t)(2 * cfg->grad_accum), sizeof(double))))) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_train_create: out of memory");
        goto fail;
    }
    {
        int64_t ne = t->cfg.ul2.enc_tokens, nd = t->cfg.ul2.dec_tokens;
        if ((st = fat5_model_reserve(t->m, ne, ne, nd))) goto fail;
    }
    if ((st = fat5__mkdir(ctx, cfg->output_dir))) goto fail;
    snprintf(path, sizeof path, "%s/metrics.jsonl", cfg->output_dir);
    if (dir[0]) {
        if ((st = fat5__train_resume(t, dir))) goto fail;
        if ((st = fat5__log_truncate(ctx, path, fat5_optim_get_step(t->o)))) goto fail;
    } else if (fat5__is_file(path) && (st = fat5__log_truncate(ctx, path, 0))) {
        goto fail;
    }
    fat5__ckpt_prune(cfg->output_dir, 0);   // temporary directories of a killed save
    t->log = fopen(path, "ab");
    if (!t->log) {
        st = fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    t->prefetch = cfg->prefetch && t->m->be != &fat5__cpu_backend;
    t->step_at_start = fat5_optim_get_step(t->o);
    t->flops_per_s_peak = cfg->peak_tflops > 0 ? cfg->peak_tflops * 1e12
                          : t->m->be != &fat5__cpu_backend && t->m->act_size == 2 ? 989e12 : 0;
    t->t_start = fat5__now_s();
    *out = t;
    return FAT5_OK;
fail:
    fat5_train_destroy(t);
    return st;
}

// Mean loss over the held-out documents: the same eval_batches batches every time.
FAT5_API fat5_status fat5_train_evaluate(fat5_trainer *t, double *loss) {
    fat5_ul2 *s = NULL;
    fat5_batch b;
    fat5_forward_result r;
    double sum = 0;
    memset(&b, 0, sizeof b);
    int64_t n = 0, i;
    fat5_status st;
    *loss = NAN;
    if (t->cfg.eval_fraction <= 0) return fat5__err(t->ctx, FAT5_ERR_STATE, "evaluate: eval_fraction is 0 (no held-out data)");
    fat5__train_join(t);   // the data is read by one thread at a time
    if ((st = fat5__train_sampler(t, 2, 0x5eed0e7a1ull, &s))) return st;
    for (i = 0; i < t->cfg.eval_batches && st == FAT5_OK; i++) {
        if ((st = fat5_ul2_next_batch(s, &b))) {
            st = fat5__err(t->ctx, st, "%s", fat5_last_error(t->dctx));
            break;
        }
        t->m->no_grad = 1;  // the loss alone: no dlogits
        st = fat5_model_forward(t->m, &b, &t->cfg.loss, &r);
        t->m->no_grad = 0;
        if (st) break;
        sum += r.loss * (double)r.n_tokens;
        n += r.n_tokens;
    }
    fat5_ul2_destroy(s);
    if (st == FAT5_OK) *loss = n ? sum / (double)n : NAN;
    return st;
}

static void fat5__json_num(fat5__sb *b, const char *key, double v) {
    char num[40];
    if (!isfinite(v)) {
        fat5__sb_printf(b, ", \"%s\": null", key);
        return;
    }
    fat5__fmt_g(num, sizeof num, 7, v);
    fat5__sb_printf(b, ", \"%s\": %s", key, num);
}

FAT5_API fat5_status fat5_train_step(fat5_trainer *t, fat5_train_metrics *out) {
    fat5_ctx *ctx = t->ctx;
    fat5_train_metrics r;
    fat5_optim_result orr;
    fat5__tgroup *g;
    double t0 = fat5__now_s(), loss = 0, flops = 0;
    int64_t n_labels = 0, i, k = t->cfg.grad_accum, step;
    fat5_status st;
    memset(&r, 0, sizeof r);
    if (out) memset(out, 0, sizeof *out);
    if (fat5_train_done(t)) return fat5__err(ctx, FAT5_ERR_STATE, "training: max_steps (%lld) already done",
                                             (long long)t->cfg.optim.total_steps);
    // the micro-batches first: their label counts weight the gradients, so k micro-batches give the
    // gradient of one batch of all of them
    if ((st = fat5__train_next_group(t, fat5_optim_get_step(t->o) + 1 < t->cfg.optim.total_steps, &g))) return st;
    r.data_s = fat5__now_s() - t0;
    for (i = 0; i < k; i++) {
        const fat5_batch *b = &g->mb[i].b;
        n_labels += g->mb[i].n_labels;
        r.tokens += b->n_enc_tokens + b->n_dec_tokens;
        flops += 3 * fat5__batch_flops(&t->m->cfg, b);
    }
    // forward, backward and optimizer are queued without waiting for the device, which the host
    // does once, in the optimizer (and, with accumulation, when the next micro-batch's tokens are
    // uploaded: an upload waits for the stream): each forward leaves its loss on the backend, and a
    // non-finite one makes the optimizer skip the update (the weights are left as they are; the
    // step still counts)
    if ((st = fat5_model_zero_grad(t->m))) return st;
    for (i = 0; i < k; i++) {
        float scale = n_labels ? (float)((double)g->mb[i].n_labels / (double)n_labels) : 0.0f;
        if ((st = fat5__model_forward_batch(t->m, &g->mb[i].b, &t->cfg.loss, NULL,
                                            t->losses + 16 * (fat5__addr)i)) ||
            (st = fat5__model_backward_checked(t->m, scale, 0)))
            return st;
    }
    if (n_labels == 0) {  // nothing to learn from: no update (the loss is NaN)
        memset(&orr, 0, sizeof orr);
        orr.lr = fat5_sched_lr(&t->cfg.optim, t->o->step);
        orr.grad_norm = NAN;
        orr.skipped = 1;
        t->o->step++;
    } else if ((st = fat5__optim_step_gated(t->o, t->losses, (int)(2 * k), &orr))) {
        return st;
    }
    if ((st = t->m->be->download(ctx, t->h_losses, t->losses, (size_t)(2 * k) * 8))) return st;
    for (i = 0; i < k; i++) loss += t->h_losses[2 * i + 1] * (double)g->mb[i].n_labels;
    loss = n_labels ? loss / (double)n_labels : NAN;
    step = fat5_optim_get_step(t->o);
    t->tokens_seen += r.tokens;
    t->n_skipped += orr.skipped;
    r.step = step;
    r.max_steps = t->cfg.optim.total_steps;
    r.loss = loss;
    r.lr = orr.lr;
    r.grad_norm = orr.grad_norm;
    r.skipped = orr.skipped;
    r.n_skipped = t->n_skipped;
    r.tokens_seen = t->tokens_seen;
    r.epoch = fat5_ul2_epoch(t->sampler);
    r.step_s = fat5__now_s() - t0;
    r.tokens_per_s = r.step_s > 0 ? (double)r.tokens / r.step_s : 0;
    r.mfu = t->flops_per_s_peak > 0 && r.step_s > 0 ? flops / r.step_s / t->flops_per_s_peak : 0;
    // evaluation and checkpoints when due, and at the end
    if (t->cfg.eval_fraction > 0 &&
        ((t->cfg.eval_steps > 0 && step % t->cfg.eval_steps == 0) || step == t->cfg.optim.total_steps)) {
        if ((st = fat5_train_evaluate(t, &r.eval_loss))) return st;
        r.has_eval = 1;
    }
    r.elapsed_s = t->elapsed_before + (fat5__now_s() - t->t_start);
    {
        double per = (r.elapsed_s - t->elapsed_before) / (double)(step - t->step_at_start);
        r.eta_s = per * (double)(t->cfg.optim.total_steps - step);
    }
    {   // one JSON line per step
        fat5__sb b2;
        fat5__sb_init(&b2, ctx);
        fat5__sb_printf(&b2, "{\"step\": %lld", (long long)step);
        fat5__json_num(&b2, "loss", r.loss);
        fat5__json_num(&b2, "lr", r.lr);
        fat5__json_num(&b2, "grad_norm", r.grad_norm);
        fat5__sb_printf(&b2, ", \"skipped\": %d, \"tokens\": %lld, \"tokens_seen\": %lld", r.skipped,
                        (long long)r.tokens, (long long)r.tokens_seen);
        fat5__json_num(&b2, "step_s", r.step_s);
        fat5__json_num(&b2, "tokens_per_s", r.tokens_per_s);
        fat5__json_num(&b2, "data_s", r.data_s);
        if (r.mfu > 0) fat5__json_num(&b2, "mfu", r.mfu);
        fat5__json_num(&b2, "elapsed_s", r.elapsed_s);
        if (r.has_eval) fat5__json_num(&b2, "eval_loss", r.eval_loss);
        fat5__sb_puts(&b2, "}\n");
        if (b2.oom || fwrite(b2.buf, 1, b2.len, t->log) != b2.len || fflush(t->log) != 0) {
            fat5__free(ctx, b2.buf);
            return fat5__err(ctx, FAT5_ERR_IO, "%s/metrics.jsonl: write failed", t->cfg.output_dir);
        }
        fat5__free(ctx, b2.buf);
    }
    if ((t->cfg.save_steps > 0 && step % t->cfg.save_steps == 0) || step == t->cfg.optim.total_steps) {
        const char *d;
        if ((st = fat5_train_save(t, &d))) return st;
        r.saved = 1;
        snprintf(r.checkpoint, sizeof r.checkpoint, "%s", d);
    }
    if (out) *out = r;
    return FAT5_OK;
}

// =============================================================================================
// ==[7.1] generate: decoders, the KV cache and inference mode ==
// A fat5_decoder runs the encoder once per request, keeps each layer's cross-attention keys and
// values of the encoder output, and one self-attention cache per layer, [max_rows, max_len, H*d_kv]
// for keys and the same for values, written in place at the current position. Every decode step
// is written once over the backend's ops, like the training graph; on the GPU it can be captured
// into a CUDA graph and replayed (fat5__decoder_step_dev reads its tokens and rows from device
// memory and never synchronises with the host).
//
// Rows advance in lock step, so the position (tokens consumed) is one number for all live rows:
// the host keeps it in d->pos and the backend in the int32 d->pos_d, which the step's last op
// increments (a replayed graph reads it there).

struct fat5_decoder {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    int64_t max_rows, max_te, max_len;   // capacities fixed at create
    int64_t n_inputs, rows_per_input;    // of the current request (fat5_decoder_start)
    int64_t n_rows;                      // n_inputs * rows_per_input
    int64_t te;                          // encoder tokens of the request
    int64_t pos;                         // tokens consumed by each live row
    int64_t n_live;                      // rows named by the last step (rows only leave)
    unsigned char *live;                 // [max_rows] 1 while a row takes part in the steps
    int started;
    // on the backend
    fat5__addr tok;                      // int32 [max_rows]: the tokens of the next step
    fat5__addr rows;                     // int32 [max_rows]: the row of each entry of the next step
    fat5__addr logits;                   // fp32 [max_rows, vocab]: the last step's logits, by entry
    fat5__addr pos_d;                    // int32 [1]: the position the next step writes
    fat5__addr self_off;                 // int32 [max_rows]: first cache row of each row (r * max_len)
    fat5__addr cross_off, cross_len;     // int32 [max_rows]: encoder keys of each row (start, count)
    fat5__addr iota;                     // int32 [max_rows]: 0 .. max_rows-1
    fat5__addr *kc, *vc;                 // per decoder layer: self-attention cache [max_rows * max_len, I]
    fat5__addr *ck, *cv;                 // per decoder layer: cross keys / values [max_te, I]
    fat5__addr ws_base;                  // everything else of the step and of the encoder
    size_t ws_bytes;
    int32_t *host_i32;                   // staging [max(max_rows, max_te, max_distance) + 1]
    // step buffers ([max_rows, .]) and scratch, laid out by fat5__decoder_layout
    fat5__addr h, r, n_act, q, k, v, att, ff_a, ff_b, ff_h, out_act, attn_scratch;
    fat5__addr tmp_cache;                // one layer's cache: the reorder goes through it
    // the encoder (one layer's buffers; enc.h_sa / h_ff / h_ca stay 0: nothing is kept for a backward)
    fat5__layer_acts enc;
    fat5__addr enc_h, enc_out, enc_tok, enc_cu, enc_seq, lut_bidir, lut_causal;
    fat5__enc_attn ea;                   // the model's encoder attention when the decoder was made
    int32_t *host_cu_g;                  // staging [max_rows + 1] of the globals' rows (transient-global)
    void *graph;                         // GPU: the captured step (fat5__decoder_graph_step), or NULL
    int64_t graph_n;                     // ... for this many entries
};

#define FAT5__TRY(call)                          \
    do {                                         \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)

// ---- internal interface of the decoding strategies ([7.2]) ----
// fat5__decoder_step_dev: one step for entries 0 .. n-1 of d->tok / d->rows (device int32, rows
// strictly increasing, all live): embeds the tokens, runs the decoder layers against the cache,
// writes the next-token logits to d->logits [n, vocab] fp32, and advances the position (host and
// device). Enqueues work only: no host synchronisation and no host-to-device copy, so it can be
// captured into a CUDA graph.
static fat5_status fat5__decoder_step_dev(fat5_decoder *d, int64_t n);
// fat5__decoder_reorder_dev: row r of the cache continues from row src[r] (device int32
// [d->n_rows]) for every position written so far. Enqueues work only.
static fat5_status fat5__decoder_reorder_dev(fat5_decoder *d, fat5__addr src);

// Lays out the decoder's backend buffers (every one on a 256-byte boundary); base == 0 measures.
// Returns 0 when the size overflows. max_len == 0 (fat5_model_encode) leaves out the caches.
// The encoder keeps one layer's buffers, all of them O(tokens): with a pattern of linear cost
// (local, block-global) a long input costs memory and time linear in its length. Its FFN runs
// over FAT5__ENC_FFN_ROWS tokens at a time, so its d_ff-wide buffers stay bounded.
#ifndef FAT5__ENC_FFN_ROWS
#define FAT5__ENC_FFN_ROWS 8192  // (the tests make it small, so that their inputs take several chunks)
#endif
static int fat5__decoder_layout(fat5_decoder *d, fat5__addr base, size_t *total) {
    const fat5_model_config *c = &d->m->cfg;
    size_t A = d->m->act_size, D = (size_t)c->d_model, I = (size_t)(c->num_heads * c->d_kv), F = (size_t)c->d_ff;
    size_t H = (size_t)c->num_heads, V = (size_t)c->vocab_size, md = (size_t)c->rel_max_distance;
    size_t N = (size_t)d->max_rows, Te = (size_t)d->max_te, L = (size_t)d->max_len, NL = 0, off = 0;
    size_t Gx = (size_t)fat5__globals_max(&d->ea.at, d->max_te);  // transient-global rows after the tokens
    size_t Tf = Te < FAT5__ENC_FFN_ROWS ? Te : FAT5__ENC_FFN_ROWS;  // the encoder's FFN rows at a time
    fat5__layer_acts *a = &d->enc;
    int ok = fat5__mul_ok(N, L, &NL), l;
    // the step
    FAT5__WS(d->tok, N, 1, 4);
    FAT5__WS(d->rows, N, 1, 4);
    FAT5__WS(d->pos_d, 1, 1, 4);
    FAT5__WS(d->self_off, N, 1, 4);
    FAT5__WS(d->cross_off, N, 1, 4);
    FAT5__WS(d->cross_len, N, 1, 4);
    FAT5__WS(d->iota, N, 1, 4);
    FAT5__WS(d->logits, L ? N : 0, V, 4);
    FAT5__WS(d->h, L ? N : 0, D, 4);
    FAT5__WS(d->r, L ? N : 0, 1, 4);
    FAT5__WS(d->n_act, L ? N : 0, D, A);
    FAT5__WS(d->q, L ? N : 0, I, A);
    FAT5__WS(d->k, L ? N : 0, I, A);
    FAT5__WS(d->v, L ? N : 0, I, A);
    FAT5__WS(d->att, L ? N : 0, I, A);
    FAT5__WS(d->ff_a, L ? N : 0, F, A);
    if (c->gated) FAT5__WS(d->ff_b, L ? N : 0, F, A);  // act_fwd gates when ff_b is not 0
    FAT5__WS(d->ff_h, L ? N : 0, F, A);
    FAT5__WS(d->out_act, L ? N : 0, D, A);
    FAT5__WS(d->attn_scratch, L ? N : 0, FAT5__DECODE_SCRATCH(H, c->d_kv), 4);
    // the caches: self-attention [N * L, I] and cross-attention [Te, I] per decoder layer
    for (l = 0; l < c->num_decoder_layers; l++) {
        FAT5__WS(d->kc[l], NL, I, A);
        FAT5__WS(d->vc[l], NL, I, A);
        FAT5__WS(d->ck[l], L ? Te : 0, I, A);
        FAT5__WS(d->cv[l], L ? Te : 0, I, A);
    }
    FAT5__WS(d->tmp_cache, c->num_decoder_layers ? NL : 0, I, A);
    // the encoder, one layer's buffers for all layers (nothing is kept for a backward)
    memset(a, 0, sizeof *a);
    FAT5__WS(d->enc_h, Te, D, 4);
    FAT5__WS(a->rs_sa, Te, 1, 4);
    FAT5__WS(a->n_sa, Te + Gx, D, A);
    FAT5__WS_BLOCKS(a->q, 3, Te + Gx, I, A, a->qkv_stride);  // q | k | v as the model lays them out
    a->k = fat5__ws_block(a->q, a->qkv_stride, A, 1);
    a->v = fat5__ws_block(a->q, a->qkv_stride, A, 2);
    FAT5__WS(a->att, Te, I, A);
    FAT5__WS(a->lse, Te, H, 4);
    FAT5__WS(a->gsum, Gx, D, 4);
    FAT5__WS(a->rs_g, Gx, 1, 4);
    FAT5__WS(d->ea.cu_g, d->ea.at.type == FAT5_ENC_ATTN_TGLOBAL ? N + 1 : 0, 1, 4);
    FAT5__WS(d->ea.ones, d->ea.at.type == FAT5_ENC_ATTN_TGLOBAL ? D : 0, 1, 4);
    // the FFN runs FAT5__ENC_FFN_ROWS tokens at a time (fat5__decoder_encode)
    FAT5__WS(a->rs_ff, Tf, 1, 4);
    FAT5__WS(a->n_ff, Tf, D, A);
    FAT5__WS_BLOCKS(a->ff_a, c->gated ? 2 : 1, Tf, F, A, a->ff_stride);  // ff_a | ff_b
    a->ff_b = c->gated ? fat5__ws_block(a->ff_a, a->ff_stride, A, 1) : 0;
    FAT5__WS(a->ff_h, Tf, F, A);
    FAT5__WS(d->enc_out, Te, D, A);
    FAT5__WS(d->enc_tok, Te, 1, 4);
    FAT5__WS(d->enc_cu, N + 1, 1, 4);
    FAT5__WS(d->enc_seq, Te + Gx, 1, 4);
    FAT5__WS(d->lut_bidir, md, 1, 4);
    FAT5__WS(d->lut_causal, md, 1, 4);
    *total = off;
    return ok;
}

FAT5_API void fat5_decoder_destroy(fat5_decoder *d) {
    if (!d) return;
#ifndef FAT5_NO_CUDA
    fat5__dev_graph_destroy(d->ctx, d->graph);
#endif
    if (d->ws_base) d->be->free(d->ctx, d->ws_base);
    fat5__free(d->ctx, d->kc);
    fat5__free(d->ctx, d->host_i32);
    fat5__free(d->ctx, d->host_cu_g);
    fat5__free(d->ctx, d->live);
    fat5__free(d->ctx, d);
}

FAT5_API fat5_status fat5_decoder_create(fat5_model *m, int64_t max_rows, int64_t max_te, int64_t max_len,
                                         fat5_decoder **out) {
    fat5_ctx *ctx;
    fat5_decoder *d;
    const fat5_model_config *c;
    size_t total = 0, nl, stage, i;
    int64_t md;
    fat5_status st;
    if (!out) return m ? fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_decoder_create: out is NULL") : FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    c = &m->cfg;
    md = c->rel_max_distance;
    if (max_rows < 1 || max_rows > INT32_MAX / 2 || max_te < 1 || max_te > INT32_MAX || max_len < 0 ||
        max_len > INT32_MAX || max_rows * (max_len > 0 ? max_len : 1) > INT32_MAX ||
        fat5__enc_kv_rows(&m->attn, max_te) > INT32_MAX)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_decoder_create: max_rows %lld, max_enc_tokens %lld, max_len %lld: rows and encoder "
                         "tokens must be >= 1, max_len >= 0, and rows * max_len below 2^31",
                         (long long)max_rows, (long long)max_te, (long long)max_len);
    d = FAT5__CAST(fat5_decoder *, fat5__calloc(ctx, 1, sizeof *d));
    if (!d) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: out of memory");
    d->m = m;
    d->ctx = ctx;
    d->be = m->be;
    d->max_rows = max_rows;
    d->max_te = max_te;
    d->max_len = max_len;
    d->ea.at = m->attn;
    nl = (size_t)c->num_decoder_layers;
    stage = (size_t)fat5__enc_kv_rows(&m->attn, max_te);
    if ((size_t)max_rows > stage) stage = (size_t)max_rows;
    if ((size_t)md > stage) stage = (size_t)md;
    stage++;
    d->kc = FAT5__CAST(fat5__addr *, fat5__calloc(ctx, 4 * (nl ? nl : 1), sizeof(fat5__addr)));
    d->host_i32 = FAT5__CAST(int32_t *, fat5__calloc(ctx, stage, sizeof(int32_t)));
    d->host_cu_g = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)max_rows + 1, sizeof(int32_t)));
    d->live = FAT5__CAST(unsigned char *, fat5__calloc(ctx, (size_t)max_rows, 1));
    if (!d->kc || !d->host_i32 || !d->host_cu_g || !d->live) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: out of memory");
    }
    d->vc = d->kc + nl;
    d->ck = d->vc + nl;
    d->cv = d->ck + nl;
    if (!fat5__decoder_layout(d, 0, &total)) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_decoder_create: the buffer size overflows");
    }
    if ((st = d->be->alloc(ctx, total, &d->ws_base))) {
        fat5_decoder_destroy(d);
        return fat5__err_prefix(ctx, st,
                                "fat5_decoder_create: %.1f MiB for %lld rows x %lld positions and %lld encoder tokens: ",
                                (double)total / 1048576.0, (long long)max_rows, (long long)max_len, (long long)max_te);
    }
    d->ws_bytes = total;
    fat5__decoder_layout(d, d->ws_base, &total);
    // constant tables: bucket of each distance (both kinds), each row's first cache row, 0 .. N-1
    for (i = 0; i < (size_t)md; i++) d->host_i32[i] = fat5__rel_bucket(-(int64_t)i, 1, (int)c->rel_buckets, (int)md);
    st = d->be->upload(ctx, d->lut_bidir, d->host_i32, (size_t)md * 4);
    for (i = 0; i < (size_t)md && !st; i++)
        d->host_i32[i] = fat5__rel_bucket(-(int64_t)i, 0, (int)c->rel_buckets, (int)md);
    if (!st) st = d->be->upload(ctx, d->lut_causal, d->host_i32, (size_t)md * 4);
    for (i = 0; i < (size_t)max_rows && !st; i++) d->host_i32[i] = (int32_t)(i * (size_t)max_len);
    if (!st) st = d->be->upload(ctx, d->self_off, d->host_i32, (size_t)max_rows * 4);
    for (i = 0; i < (size_t)max_rows && !st; i++) d->host_i32[i] = (int32_t)i;
    if (!st) st = d->be->upload(ctx, d->iota, d->host_i32, (size_t)max_rows * 4);
    if (!st && d->ea.ones) st = d->be->fill_f32(ctx, d->ea.ones, 1.0f, c->d_model);
    if (!st) st = d->be->sync(ctx);
    if (st) {
        fat5_decoder_destroy(d);
        return st;
    }
    *out = d;
    return FAT5_OK;
}

// Checks a packed encoder batch: n_seq >= 1 sequences, each at least one token, ids in the
// vocabulary, at most max_te tokens in all. Messages name `what` and the sequence.
static fat5_status fat5__check_enc_input(fat5_model *m, const char *what, const int32_t *tokens,
                                         const int32_t *cu, int64_t n_seq, int64_t max_te, const fat5_attention *at) {
    fat5_ctx *ctx = m->ctx;
    int64_t s, t;
    if (n_seq < 1) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: no input (n = %lld)", what, (long long)n_seq);
    if (!tokens || !cu) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tokens and cu_seqlens are required", what);
    if (cu[0] != 0) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: cu_seqlens[0] = %d, expected 0", what, (int)cu[0]);
    for (s = 0; s < n_seq; s++) {
        if (cu[s + 1] <= cu[s])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: input %lld is empty (cu_seqlens %d .. %d)", what,
                             (long long)s, (int)cu[s], (int)cu[s + 1]);
        if (cu[s + 1] > max_te)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "%s: the inputs hold more than %lld tokens (input %lld ends at %d)", what,
                             (long long)max_te, (long long)s, (int)cu[s + 1]);
        for (t = cu[s]; t < cu[s + 1]; t++)
            if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                                 "%s: input %lld, position %lld: token id %d is outside [0, vocab_size %lld)", what,
                                 (long long)s, (long long)(t - cu[s]), (int)tokens[t], (long long)m->cfg.vocab_size);
    }
    return fat5__check_prefix(ctx, at, cu, n_seq, what);
}

// The encoder on n_seq packed inputs (already checked): the final-norm output in d->enc_out (act).
static fat5_status fat5__decoder_encode(fat5_decoder *d, const int32_t *tokens, const int32_t *cu, int64_t n_seq) {
    fat5_model *m = d->m;
    fat5_ctx *ctx = d->ctx;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &m->cfg;
    int64_t te = cu[n_seq], l, t, D = c->d_model;
    fat5_status st;
    FAT5__TRY(be->upload(ctx, d->enc_tok, tokens, (size_t)te * 4));
    FAT5__TRY(be->upload(ctx, d->enc_cu, cu, (size_t)(n_seq + 1) * 4));
    FAT5__TRY(fat5__enc_maps(ctx, be, &d->ea, cu, n_seq, d->host_i32, d->host_cu_g, d->enc_seq));
    FAT5__TRY(be->embed_fwd(ctx, d->enc_h, fat5__pw(m, m->shared), d->enc_tok, te, (int)D));
    for (l = 0; l < c->num_layers; l++) {
        FAT5__TRY(fat5__model_self_attn_fwd(m, &m->enc[l], &d->enc, d->enc_h, te, d->enc_cu, d->enc_seq,
                                            FAT5__ATTN_BIDIR, d->lut_bidir, &d->ea));
        for (t = 0; t < te; t += FAT5__ENC_FFN_ROWS)  // token by token: chunks of the stream
            FAT5__TRY(fat5__model_ffn_fwd(m, &m->enc[l], &d->enc, d->enc_h + (fat5__addr)(t * D) * 4,
                                          te - t < FAT5__ENC_FFN_ROWS ? te - t : FAT5__ENC_FFN_ROWS));
    }
    // the staging buffer is read by the uploads above before it is reused (the CPU copies at once;
    // the GPU's uploads are synchronous copies from pageable memory)
    return be->rmsnorm_fwd(ctx, d->enc_out, d->enc.rs_sa, d->enc_h, fat5__pw(m, m->enc_final_ln), te, (int)D,
                           (float)c->layer_norm_eps, 0);
}

FAT5_API fat5_status fat5_decoder_start(fat5_decoder *d, const int32_t *tokens, const int32_t *cu, int64_t n_inputs,
                                        int64_t rows_per_input) {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    const fat5_model_config *c;
    int64_t r, l, te, I, D;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    m = d->m, ctx = d->ctx, be = d->be, c = &m->cfg;
    I = c->num_heads * c->d_kv, D = c->d_model;
    d->started = 0;
    if (d->max_len < 1)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_decoder_start: this decoder has no cache (max_len 0)");
    if (rows_per_input < 1 || n_inputs < 1 || n_inputs > d->max_rows || rows_per_input > d->max_rows / n_inputs)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_decoder_start: %lld inputs x %lld rows each: need at least one of each and at most "
                         "%lld rows (the decoder's max_rows)",
                         (long long)n_inputs, (long long)rows_per_input, (long long)d->max_rows);
    if ((st = fat5__check_enc_input(m, "fat5_decoder_start", tokens, cu, n_inputs, d->max_te, &d->ea.at))) return st;
    te = cu[n_inputs];
    FAT5__TRY(fat5__decoder_encode(d, tokens, cu, n_inputs));
    for (l = 0; l < c->num_decoder_layers; l++) {
        const fat5__layer *y = &m->dec[l];
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->ck[l], 0, d->enc_out, fat5__pa(m, y->ck), te, I, D, 1.0f, 0.0f));
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->cv[l], 0, d->enc_out, fat5__pa(m, y->cv), te, I, D, 1.0f, 0.0f));
    }
    // row r reads input r / rows_per_input; every row is live and at position 0
    FAT5__TRY(be->sync(ctx));  // the encoder's uploads have read host_i32
    d->n_inputs = n_inputs;
    d->rows_per_input = rows_per_input;
    d->n_rows = n_inputs * rows_per_input;
    d->te = te;
    for (r = 0; r < d->n_rows; r++) d->host_i32[r] = cu[r / rows_per_input];
    FAT5__TRY(be->upload(ctx, d->cross_off, d->host_i32, (size_t)d->n_rows * 4));
    for (r = 0; r < d->n_rows; r++) d->host_i32[r] = cu[r / rows_per_input + 1] - cu[r / rows_per_input];
    FAT5__TRY(be->upload(ctx, d->cross_len, d->host_i32, (size_t)d->n_rows * 4));
    FAT5__TRY(be->memset0(ctx, d->pos_d, 4));
    FAT5__TRY(be->sync(ctx));
    memset(d->live, 1, (size_t)d->n_rows);
    d->n_live = d->n_rows;
    d->pos = 0;
    d->started = 1;
    return FAT5_OK;
}

// RMSNorm of the residual stream d->h (weight ln), then the products with w0 (w1, w2) as norm_mm:
// for a few entries one norm_mm (one launch, each weight read once for all of them); for more,
// rmsnorm_fwd, mm (on the GPU's matrix units) and act_fwd, the cache rows by cache_write (so too
// on a GPU context with FAT5_MM_ROWS=0).
#define FAT5__DEC_FUSED_ROWS 8
static fat5_status fat5__dec_norm_mm(fat5_decoder *d, fat5__addr y0, fat5__addr y1, fat5__addr y2, fat5__addr ln,
                                     fat5__addr w0, fat5__addr w1, fat5__addr w2, int64_t n, int64_t N, int act,
                                     fat5__addr rows) {
    fat5_ctx *ctx = d->ctx;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &d->m->cfg;
    int D = (int)c->d_model;
    float eps = (float)c->layer_norm_eps;
    fat5_status st;
    int fused = n <= FAT5__DEC_FUSED_ROWS;
#ifndef FAT5_NO_CUDA
    if (ctx->gpu && !ctx->gpu->mm_rows) fused = 0;  // FAT5_MM_ROWS=0: every product on cuBLAS
#endif
    if (fused)
        return be->norm_mm(ctx, y0, y1, y2, d->h, ln, w0, w1, w2, n, (int)N, D, eps, act, rows, d->self_off, d->pos_d);
    FAT5__TRY(be->rmsnorm_fwd(ctx, d->n_act, d->r, d->h, ln, n, D, eps, 0));
    if (act >= 0) {
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->ff_a, 0, d->n_act, w0, n, N, D, 1.0f, 0.0f));
        if (w1) FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->ff_b, 0, d->n_act, w1, n, N, D, 1.0f, 0.0f));
        return be->act_fwd(ctx, y0, d->ff_a, w1 ? d->ff_b : 0, n * N, act);
    }
    FAT5__TRY(be->mm(ctx, FAT5__MM_NT, y0, 0, d->n_act, w0, n, N, D, 1.0f, 0.0f));
    if (w1) FAT5__TRY(be->mm(ctx, FAT5__MM_NT, rows ? d->k : y1, 0, d->n_act, w1, n, N, D, 1.0f, 0.0f));
    if (w2) FAT5__TRY(be->mm(ctx, FAT5__MM_NT, rows ? d->v : y2, 0, d->n_act, w2, n, N, D, 1.0f, 0.0f));
    return rows ? be->cache_write(ctx, y1, y2, d->k, d->v, rows, d->self_off, d->pos_d, n, (int)N) : FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__decoder_step_dev(fat5_decoder *d, int64_t n) {
    fat5_model *m = d->m;
    fat5_ctx *ctx = d->ctx;
    const fat5__backend *be = d->be;
    const fat5_model_config *c = &m->cfg;
    int64_t D = c->d_model, I = c->num_heads * c->d_kv, F = c->d_ff, V = c->vocab_size, l;
    int H = (int)c->num_heads, dk = (int)c->d_kv, nb = (int)c->rel_buckets, md = (int)c->rel_max_distance;
    fat5__pos_args p;
    float eps = (float)c->layer_norm_eps, head_scale = c->scale_decoder_outputs ? (float)(1.0 / sqrt((double)D)) : 1.0f;
    fat5_status st;
    FAT5__TRY(be->embed_fwd(ctx, d->h, fat5__pw(m, m->shared), d->tok, n, (int)D));
    for (l = 0; l < c->num_decoder_layers; l++) {
        const fat5__layer *y = &m->dec[l];
        // self-attention: this position's key and value go into the cache (straight from the
        // projection, or after the rotation: the cache keeps rotated keys), the query reads it all
        if (c->pos_kind != FAT5_POS_ROPE) {
            FAT5__TRY(fat5__dec_norm_mm(d, d->q, d->kc[l], d->vc[l], fat5__pw(m, y->ln_sa), fat5__pa(m, y->q),
                                        fat5__pa(m, y->k), fat5__pa(m, y->v), n, I, -1, d->rows));
        } else {
            FAT5__TRY(fat5__dec_norm_mm(d, d->q, d->k, d->v, fat5__pw(m, y->ln_sa), fat5__pa(m, y->q),
                                        fat5__pa(m, y->k), fat5__pa(m, y->v), n, I, -1, 0));
            FAT5__TRY(fat5__model_rope(m, d->q, d->k, 0, 0, d->pos_d, n, 0));
            FAT5__TRY(be->cache_write(ctx, d->kc[l], d->vc[l], d->k, d->v, d->rows, d->self_off, d->pos_d, n, (int)I));
        }
        p = fat5__model_pos(m, y, FAT5__ATTN_CAUSAL, NULL);
        FAT5__TRY(be->attn_decode(ctx, d->att, d->q, d->kc[l], d->vc[l], p.bias, d->lut_causal, d->rows, d->self_off, 0,
                                  d->pos_d, n, H, dk, p.kind, p.nb, p.md, (int)d->max_len, d->attn_scratch));
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->h, 1, d->att, fat5__pa(m, y->o), n, D, I, 1.0f, 1.0f));
        // cross-attention against the row's encoder keys and values
        FAT5__TRY(fat5__dec_norm_mm(d, d->q, 0, 0, fat5__pw(m, y->ln_ca), fat5__pa(m, y->cq), 0, 0, n, I, -1, 0));
        FAT5__TRY(be->attn_decode(ctx, d->att, d->q, d->ck[l], d->cv[l], 0, d->lut_causal, d->rows, d->cross_off,
                                  d->cross_len, d->pos_d, n, H, dk, FAT5__ATTN_CROSS, nb, md, (int)d->max_te,
                                  d->attn_scratch));  // max_te: a replayed graph serves any request
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->h, 1, d->att, fat5__pa(m, y->co), n, D, I, 1.0f, 1.0f));
        // FFN
        FAT5__TRY(fat5__dec_norm_mm(d, d->ff_h, 0, 0, fat5__pw(m, y->ln_ff), fat5__pa(m, y->wi0),
                                    c->gated ? fat5__pa(m, y->wi1) : 0, 0, n, F, (int)c->act, 0));
        FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->h, 1, d->ff_h, fat5__pa(m, y->wo), n, D, F, 1.0f, 1.0f));
    }
    FAT5__TRY(be->rmsnorm_fwd(ctx, d->out_act, d->r, d->h, fat5__pw(m, m->dec_final_ln), n, (int)D, eps, 0));
    FAT5__TRY(be->mm(ctx, FAT5__MM_NT, d->logits, 1, d->out_act, fat5__pa(m, m->lm_head), n, V, D, head_scale, 0.0f));
    FAT5__TRY(be->add_i32(ctx, d->pos_d, 1, 1));
    d->pos++;
    return FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__decoder_reorder_dev(fat5_decoder *d, fat5__addr src) {
    const fat5__backend *be = d->be;
    int I = (int)(d->m->cfg.num_heads * d->m->cfg.d_kv);
    int64_t l;
    fat5_status st;
    // through the spare buffer: gather into it, then copy back row by row (identity indices)
    for (l = 0; l < d->m->cfg.num_decoder_layers; l++) {
        FAT5__TRY(be->cache_gather(d->ctx, d->tmp_cache, d->kc[l], src, d->self_off, d->pos_d, d->n_rows, I));
        FAT5__TRY(be->cache_gather(d->ctx, d->kc[l], d->tmp_cache, d->iota, d->self_off, d->pos_d, d->n_rows, I));
        FAT5__TRY(be->cache_gather(d->ctx, d->tmp_cache, d->vc[l], src, d->self_off, d->pos_d, d->n_rows, I));
        FAT5__TRY(be->cache_gather(d->ctx, d->vc[l], d->tmp_cache, d->iota, d->self_off, d->pos_d, d->n_rows, I));
    }
    return FAT5_OK;
}

#ifndef FAT5_NO_CUDA
// The step for n entries replayed from a CUDA graph (GPU decoders): captured at the first call for
// this n (the capture records the work, one launch runs it), replayed afterwards. fat5__decoder_step_dev
// advances the host position when it is recorded, so a replay advances it here. A capture that
// fails leaves the decoder as it was and returns the error (callers fall back to plain launches).
// Callers that capture more than the step (a strategy's ops after it) follow the same rule: the
// host position moves once per recording and once per later launch.
static FAT5__UNUSED fat5_status fat5__decoder_graph_step(fat5_decoder *d, int64_t n) {
    fat5_ctx *ctx = d->ctx;
    fat5_status st;
    void *exec = NULL;
    if (d->graph && d->graph_n == n) {
        if ((st = fat5__dev_graph_launch(ctx, d->graph))) return st;
        d->pos++;
        return FAT5_OK;
    }
    fat5__dev_graph_destroy(ctx, d->graph);
    d->graph = NULL;
    if ((st = fat5__dev_capture_begin(ctx))) return st;
    st = fat5__decoder_step_dev(d, n);
    if (st) {  // the position did not advance
        fat5__dev_capture_end(ctx, 0, &exec);
        return st;
    }
    if ((st = fat5__dev_capture_end(ctx, 1, &exec))) {
        d->pos--;
        return st;
    }
    d->graph = exec;
    d->graph_n = n;
    return fat5__dev_graph_launch(ctx, d->graph);
}
#endif

FAT5_API fat5_status fat5_decoder_step(fat5_decoder *d, const int32_t *tokens, const int32_t *rows, int64_t n,
                                       float *logits) {
    fat5_ctx *ctx;
    int64_t i, V;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    ctx = d->ctx;
    V = d->m->cfg.vocab_size;
    if (!d->started) return fat5__err(ctx, FAT5_ERR_STATE, "fat5_decoder_step: no request (fat5_decoder_start first)");
    if (n < 1 || n > d->n_live || !tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_decoder_step: %lld entries%s; expected 1 .. %lld (the live rows) and a token each",
                         (long long)n, tokens ? "" : " without tokens", (long long)d->n_live);
    if (d->pos >= d->max_len)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_decoder_step: the cache is full: %lld positions written, max_len is %lld",
                         (long long)d->pos, (long long)d->max_len);
    for (i = 0; i < n; i++) {
        int32_t r = rows ? rows[i] : (int32_t)i;
        if (r < 0 || r >= d->n_rows || (i > 0 && rows && r <= rows[i - 1]))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "fat5_decoder_step: rows[%lld] = %d: rows must be strictly increasing and in [0, %lld)",
                             (long long)i, (int)r, (long long)d->n_rows);
        if (!d->live[r])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "fat5_decoder_step: row %d was left out of an earlier step (finished rows cannot come back)",
                             (int)r);
        if (tokens[i] < 0 || tokens[i] >= V)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "fat5_decoder_step: tokens[%lld] = %d is outside [0, vocab_size %lld)", (long long)i,
                             (int)tokens[i], (long long)V);
    }
    // rows left out of this step finish
    for (i = 0; i < n; i++) d->host_i32[i] = rows ? rows[i] : (int32_t)i;
    {
        int64_t j = 0, r;
        for (r = 0; r < d->n_rows; r++) {
            int keep = j < n && d->host_i32[j] == r;
            if (keep) j++;
            else d->live[r] = 0;
        }
    }
    d->n_live = n;
    FAT5__TRY(d->be->upload(ctx, d->rows, d->host_i32, (size_t)n * 4));
    FAT5__TRY(d->be->upload(ctx, d->tok, tokens, (size_t)n * 4));
    FAT5__TRY(fat5__decoder_step_dev(d, n));
    if (logits) FAT5__TRY(d->be->download(ctx, logits, d->logits, (size_t)(n * V) * 4));
    return d->be->sync(ctx);
}

FAT5_API fat5_status fat5_decoder_reorder(fat5_decoder *d, const int32_t *src) {
    fat5_ctx *ctx;
    int64_t r;
    fat5_status st;
    if (!d) return FAT5_ERR_INVALID_ARG;
    ctx = d->ctx;
    if (!d->started) return fat5__err(ctx, FAT5_ERR_STATE, "fat5_decoder_reorder: no request (fat5_decoder_start first)");
    if (!src) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_decoder_reorder: src is NULL");
    for (r = 0; r < d->n_rows; r++)
        if (d->live[r] && (src[r] < 0 || src[r] >= d->n_rows || !d->live[src[r]]))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                             "fat5_decoder_reorder: src[%lld] = %d is not a live row (%lld rows)", (long long)r,
                             (int)src[r], (long long)d->n_rows);
    for (r = 0; r < d->n_rows; r++) d->host_i32[r] = d->live[r] ? src[r] : (int32_t)r;
    FAT5__TRY(d->be->upload(ctx, d->tok, d->host_i32, (size_t)d->n_rows * 4));  // d->tok is free between steps
    FAT5__TRY(fat5__decoder_reorder_dev(d, d->tok));
    return d->be->sync(ctx);
}

FAT5_API int64_t fat5_decoder_position(const fat5_decoder *d) { return d ? d->pos : 0; }

// ---- the encoder alone ----

FAT5_API fat5_status fat5_model_encode(fat5_model *m, const int32_t *tokens, const int32_t *cu, int64_t n_seq,
                                       fat5_pool pool, float *out, int64_t n) {
    fat5_ctx *ctx;
    fat5_decoder *d = NULL;
    int64_t te, D, want, s, t, j;
    float *hid = NULL;
    fat5_status st;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    D = m->cfg.d_model;
    if (pool != FAT5_POOL_NONE && pool != FAT5_POOL_MEAN)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_encode: pool = %d, expected FAT5_POOL_NONE or "
                                                    "FAT5_POOL_MEAN", (int)pool);
    if ((st = fat5__check_enc_input(m, "fat5_model_encode", tokens, cu, n_seq, INT32_MAX, &m->attn))) return st;
    te = cu[n_seq];
    want = (pool == FAT5_POOL_MEAN ? n_seq : te) * D;
    if (!out || n != want)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_model_encode: out holds %lld floats, the result is %lld",
                         out ? (long long)n : 0LL, (long long)want);
    if ((st = fat5_decoder_create(m, n_seq, te, 0, &d))) return st;
    hid = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)(te * D) * (m->act_size == 2 ? 2 : 4)));
    if (!hid) {
        fat5_decoder_destroy(d);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_model_encode: out of memory");
    }
    st = fat5__decoder_encode(d, tokens, cu, n_seq);
    if (!st) st = m->be->download(ctx, hid, d->enc_out, (size_t)(te * D) * m->act_size);
    if (!st) st = m->be->sync(ctx);
    if (!st) {
        const uint16_t *h16 = FAT5__CAST(const uint16_t *, (const void *)hid);
        for (s = 0; s < n_seq; s++) {
            int64_t len = cu[s + 1] - cu[s];
            for (j = 0; j < D; j++) {
                double acc = 0;
                for (t = cu[s]; t < cu[s + 1]; t++) {
                    float x = m->act_size == 2 ? fat5__bf16_to_f32(h16[t * D + j]) : hid[t * D + j];
                    if (pool == FAT5_POOL_MEAN) acc += x;
                    else out[t * D + j] = x;
                }
                if (pool == FAT5_POOL_MEAN) out[s * D + j] = (float)(acc / (double)len);
            }
        }
    }
    fat5__free(ctx, hid);
    fat5_decoder_destroy(d);
    return st;
}
#undef FAT5__TRY

// =============================================================================================
// ==[7.2] generate: decoding strategies ==
// greedy, sampling and beam search over fat5__decoder_step_dev, with Hugging Face's logits
// processors; fat5_generate.
//
// A step for n live entries is one function (fat5__gen_step): the decoder step, gen_process (the
// processors: repetition penalty, no-repeat n-grams, min_new_tokens; beam search first turns the
// logits into log-probabilities, as Hugging Face does), then gen_select (greedy / sampling) or
// gen_beam + the cache reorder (beam search). All of it works on backend buffers and needs no host
// synchronisation, so on the GPU it is captured once per n and replayed from a CUDA graph.
// Between steps the host reads the per-row (per-input for beam search) done flags; when some are
// set it drops their entries from d->tok / d->rows, so finished rows cost nothing afterwards.
// Semantics follow transformers 5's generate: processor order, finished greedy rows padded (here:
// left out), beam search keeping 2K candidates, its finished-hypothesis merge, length
// normalisation by the generated length (EOS included) and its early-stopping heuristic.

// ---- options ----

FAT5_API fat5_generate_config fat5_generate_config_default(const fat5_model *m) {
    fat5_generate_config g;
    memset(&g, 0, sizeof g);
    g.max_new_tokens = 20;
    g.min_new_tokens = 0;
    g.do_sample = 0;
    g.temperature = 1.0;
    g.top_k = 50;
    g.top_p = 1.0;
    g.seed = 0;
    g.num_beams = 1;
    g.length_penalty = 1.0;
    g.early_stopping = 0;
    g.num_return_sequences = 1;
    g.repetition_penalty = 1.0;
    g.no_repeat_ngram_size = 0;
    g.eos_token_id = m ? m->cfg.eos_token_id : 1;
    g.pad_token_id = m ? m->cfg.pad_token_id : 0;
    g.decoder_start_token_id = m ? m->cfg.decoder_start_token_id : 0;
    g.use_graph = 1;
    // checked by fat5_model_load, so this cannot fail
    if (m && m->gen_json) (void)fat5_generate_config_from_json(m->ctx, m->gen_json, m->gen_json_len, &g);
    return g;
}

// The range checks that need no model (fat5_generate_config_from_json and fat5_generate).
static fat5_status fat5__gen_check(fat5_ctx *ctx, const char *what, const fat5_generate_config *g) {
#define FAT5__GEN_BAD(cond, ...) \
    if (cond) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, __VA_ARGS__)
    FAT5__GEN_BAD(g->max_new_tokens < 1 || g->max_new_tokens > INT32_MAX / 2,
                  "%s: max_new_tokens = %lld; expected at least 1", what, (long long)g->max_new_tokens);
    FAT5__GEN_BAD(g->min_new_tokens < 0 || g->min_new_tokens > INT32_MAX,
                  "%s: min_new_tokens = %lld is negative", what, (long long)g->min_new_tokens);
    FAT5__GEN_BAD(g->num_beams < 1 || g->num_beams > FAT5__BEAM_MAX, "%s: num_beams = %lld; expected 1 .. %d", what,
                  (long long)g->num_beams, FAT5__BEAM_MAX);
    FAT5__GEN_BAD(g->num_return_sequences < 1 || g->num_return_sequences > INT32_MAX,
                  "%s: num_return_sequences = %lld; expected at least 1", what, (long long)g->num_return_sequences);
    FAT5__GEN_BAD(!(g->temperature > 0.0) || !isfinite(g->temperature),
                  "%s: temperature = %g; expected a finite value > 0", what, g->temperature);
    FAT5__GEN_BAD(!(g->top_p > 0.0 && g->top_p <= 1.0), "%s: top_p = %g; expected a value in (0, 1]", what, g->top_p);
    FAT5__GEN_BAD(g->top_k < 0 || g->top_k > INT32_MAX, "%s: top_k = %lld; expected >= 0 (0 = off)", what,
                  (long long)g->top_k);
    FAT5__GEN_BAD(!(g->repetition_penalty > 0.0) || !isfinite(g->repetition_penalty),
                  "%s: repetition_penalty = %g; expected a finite value > 0 (1 = off)", what, g->repetition_penalty);
    FAT5__GEN_BAD(g->no_repeat_ngram_size < 0 || g->no_repeat_ngram_size > INT32_MAX,
                  "%s: no_repeat_ngram_size = %lld is negative", what, (long long)g->no_repeat_ngram_size);
    FAT5__GEN_BAD(!isfinite(g->length_penalty), "%s: length_penalty = %g is not finite", what, g->length_penalty);
    FAT5__GEN_BAD(g->early_stopping < 0 || g->early_stopping > 2,
                  "%s: early_stopping = %d; expected 0 (false), 1 (true) or 2 (\"never\")", what, g->early_stopping);
    FAT5__GEN_BAD(g->eos_token_id < -1 || g->eos_token_id > INT32_MAX,
                  "%s: eos_token_id = %lld; expected an id (or -1: none)", what, (long long)g->eos_token_id);
    FAT5__GEN_BAD(g->pad_token_id < 0 || g->pad_token_id > INT32_MAX, "%s: pad_token_id = %lld is not an id", what,
                  (long long)g->pad_token_id);
    FAT5__GEN_BAD(g->decoder_start_token_id < 0 || g->decoder_start_token_id > INT32_MAX,
                  "%s: decoder_start_token_id = %lld is not an id", what, (long long)g->decoder_start_token_id);
    return FAT5_OK;
#undef FAT5__GEN_BAD
}

// one integer member (null: left as it is); *set tells whether it was there
static fat5_status fat5__gen_int(fat5_ctx *ctx, const fat5__json *root, const char *key, int64_t *out, int *set) {
    const fat5__json *v = fat5__json_get(root, key);
    if (set) *set = 0;
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type == FAT5__J_ARRAY && v->n >= 1) v = v->child;   // eos_token_id: [id, ...] -> the first
    if (v->type != FAT5__J_NUMBER || !fat5__json_as_i64(v, out))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be an integer, got %s", key,
                         fat5__json_type_name(v->type));
    if (set) *set = 1;
    return FAT5_OK;
}
static fat5_status fat5__gen_num(fat5_ctx *ctx, const fat5__json *root, const char *key, double *out) {
    const fat5__json *v = fat5__json_get(root, key);
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_NUMBER || !fat5__json_as_double(v, out))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be a number, got %s", key,
                         fat5__json_type_name(v->type));
    return FAT5_OK;
}
static fat5_status fat5__gen_bool(fat5_ctx *ctx, const fat5__json *root, const char *key, int *out) {
    const fat5__json *v = fat5__json_get(root, key);
    if (!v || v->type == FAT5__J_NULL) return FAT5_OK;
    if (v->type != FAT5__J_TRUE && v->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: %s must be true or false, got %s", key,
                         fat5__json_type_name(v->type));
    *out = v->type == FAT5__J_TRUE;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_generate_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                    fat5_generate_config *inout) {
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *es;
    fat5_generate_config g;
    fat5_status st;
    int64_t seed = 0, max_length = 0, min_length = 0;
    int has_max_new = 0, has_min_new = 0, has_max_len = 0, has_min_len = 0, has_seed = 0;
    if (!ctx || !inout) return FAT5_ERR_INVALID_ARG;
    if ((st = fat5__json_parse(ctx, "generation config", json, len, 16, &doc))) return st;
    root = fat5__json_root(doc);
    g = *inout;
    if (root->type != FAT5__J_OBJECT) {
        fat5__json_free(ctx, doc);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: expected a JSON object");
    }
    es = fat5__json_get(root, "early_stopping");
    if ((st = fat5__gen_int(ctx, root, "max_new_tokens", &g.max_new_tokens, &has_max_new)) ||
        (st = fat5__gen_int(ctx, root, "min_new_tokens", &g.min_new_tokens, &has_min_new)) ||
        (st = fat5__gen_int(ctx, root, "max_length", &max_length, &has_max_len)) ||
        (st = fat5__gen_int(ctx, root, "min_length", &min_length, &has_min_len)) ||
        (st = fat5__gen_bool(ctx, root, "do_sample", &g.do_sample)) ||
        (st = fat5__gen_num(ctx, root, "temperature", &g.temperature)) ||
        (st = fat5__gen_int(ctx, root, "top_k", &g.top_k, NULL)) ||
        (st = fat5__gen_num(ctx, root, "top_p", &g.top_p)) ||
        (st = fat5__gen_int(ctx, root, "seed", &seed, &has_seed)) ||
        (st = fat5__gen_int(ctx, root, "num_beams", &g.num_beams, NULL)) ||
        (st = fat5__gen_num(ctx, root, "length_penalty", &g.length_penalty)) ||
        (st = fat5__gen_int(ctx, root, "num_return_sequences", &g.num_return_sequences, NULL)) ||
        (st = fat5__gen_num(ctx, root, "repetition_penalty", &g.repetition_penalty)) ||
        (st = fat5__gen_int(ctx, root, "no_repeat_ngram_size", &g.no_repeat_ngram_size, NULL)) ||
        (st = fat5__gen_int(ctx, root, "eos_token_id", &g.eos_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "pad_token_id", &g.pad_token_id, NULL)) ||
        (st = fat5__gen_int(ctx, root, "decoder_start_token_id", &g.decoder_start_token_id, NULL)) ||
        (st = fat5__gen_bool(ctx, root, "use_graph", &g.use_graph)))
        goto done;
    if (es && es->type == FAT5__J_STRING) {
        if (strcmp(es->str, "never") != 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                           "generation config: early_stopping must be true, false or \"never\", got \"%s\"", es->str);
            goto done;
        }
        g.early_stopping = 2;
    } else if (es && es->type != FAT5__J_NULL) {
        if ((st = fat5__gen_bool(ctx, root, "early_stopping", &g.early_stopping))) goto done;
    }
    if (has_seed) {
        if (seed < 0) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "generation config: seed = %lld is negative", (long long)seed);
            goto done;
        }
        g.seed = (uint64_t)seed;
    }
    // Hugging Face's max_length / min_length count the decoder start token; max_new_tokens and
    // min_new_tokens win when both are given
    if (has_max_len && !has_max_new) g.max_new_tokens = max_length - 1;
    if (has_min_len && !has_min_new) g.min_new_tokens = min_length > 1 ? min_length - 1 : 0;
    if ((st = fat5__gen_check(ctx, "generation config", &g))) goto done;
    *inout = g;
done:
    fat5__json_free(ctx, doc);
    return st;
}

FAT5_API void fat5_generate_result_free(fat5_ctx *ctx, fat5_generate_result *r) {
    if (!r) return;
    fat5__free(ctx, r->tokens);
    fat5__free(ctx, r->cu_seqlens);
    fat5__free(ctx, r->scores);
    memset(r, 0, sizeof *r);
}

// ---- the decoding loop ----
#define FAT5__TRY(call)                          \
    do {                                         \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)
// State of one fat5_generate call: the decoder, the strategy's buffers on the backend (see the
// gen_* ops for their meaning) and the option values the ops take.
typedef struct fat5__gen {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_decoder *d;
    const fat5_generate_config *g;
    int beam, V, Lh, K;                 // K: beams (1 without beam search)
    int64_t R, N;                       // rows and inputs
    fat5__addr base;
    fat5__addr hist, lens, done, score; // [R, Lh], [R], [max(R, N)], [R]
    fat5__addr bscore, fin_score, fin_tok, fin_len, fin_flag, unsat, src, scratch;
    void *graph;                        // GPU: the captured step, for graph_n entries
    int64_t graph_n;
} fat5__gen;

// One decoding step for the first n entries of d->tok / d->rows: the decoder, the processors and
// the strategy. Enqueues work only (no host synchronisation or copy), so it can be captured.
static fat5_status fat5__gen_step(fat5__gen *s, int64_t n) {
    const fat5__backend *be = s->be;
    const fat5_generate_config *g = s->g;
    fat5_decoder *d = s->d;
    fat5_status st;
    int eos = (int)g->eos_token_id;
    FAT5__TRY(fat5__decoder_step_dev(d, n));
    FAT5__TRY(be->gen_process(s->ctx, d->logits, s->hist, s->lens, d->rows, n, s->V, s->Lh,
                              (float)g->repetition_penalty, (int)g->no_repeat_ngram_size, (int)g->min_new_tokens,
                              eos, s->beam));
    if (!s->beam)
        return be->gen_select(s->ctx, d->logits, d->tok, s->hist, s->lens, s->done, s->score, d->rows, n, s->V, s->Lh,
                              (int)g->max_new_tokens, eos, (int)g->pad_token_id, g->do_sample, (float)g->temperature,
                              (int)g->top_k, (float)g->top_p, (unsigned long long)g->seed);
    FAT5__TRY(be->gen_beam(s->ctx, d->logits, d->tok, s->src, s->hist, s->lens, s->bscore, s->fin_score, s->fin_tok,
                           s->fin_len, s->fin_flag, s->unsat, s->done, d->rows, s->scratch, n, s->V, s->Lh, s->K,
                           (int)g->max_new_tokens, eos, (float)g->length_penalty, g->early_stopping));
    return fat5__decoder_reorder_dev(d, s->src);
}

// The step replayed from a CUDA graph (captured again when n changes), as fat5__decoder_graph_step:
// the decoder's host position advances once when the step is recorded and once per later replay.
// Returns FAT5_ERR_UNSUPPORTED when capture is not possible (the caller then launches plainly).
static fat5_status fat5__gen_graph_step(fat5__gen *s, int64_t n) {
#ifndef FAT5_NO_CUDA
    fat5_ctx *ctx = s->ctx;
    fat5_status st;
    void *exec = NULL;
    if (s->graph && s->graph_n == n) {
        if ((st = fat5__dev_graph_launch(ctx, s->graph))) return st;
        s->d->pos++;
        return FAT5_OK;
    }
    fat5__dev_graph_destroy(ctx, s->graph);
    s->graph = NULL;
    if ((st = fat5__dev_capture_begin(ctx))) return st;
    st = fat5__gen_step(s, n);
    if (st) {
        fat5__dev_capture_end(ctx, 0, &exec);
        return st;
    }
    if ((st = fat5__dev_capture_end(ctx, 1, &exec))) {
        s->d->pos--;
        return st;
    }
    s->graph = exec;
    s->graph_n = n;
    return fat5__dev_graph_launch(ctx, s->graph);
#else
    (void)n;
    return fat5__err(s->ctx, FAT5_ERR_UNSUPPORTED, "CUDA graphs need the GPU path");
#endif
}

// Lays out the strategy's buffers from base (0 measures); 0 when the size overflows.
static int fat5__gen_layout(fat5__gen *s, fat5__addr base, size_t *total) {
    size_t off = 0, R = (size_t)s->R, Lh = (size_t)s->Lh, N = (size_t)s->N, RN = R > N ? R : N;
    int ok = 1;
#define FAT5__GWS(field, count)                                                                   \
    do {                                                                                          \
        size_t n_ = 0;                                                                            \
        off = (off + 255) & ~(size_t)255;                                                         \
        if (!fat5__mul_ok((size_t)(count), 4, &n_) || !fat5__add_ok(off, n_, &off)) ok = 0;        \
        s->field = base ? base + (fat5__addr)(off - n_) : 0;                                      \
    } while (0)
    FAT5__GWS(hist, R * Lh);
    FAT5__GWS(lens, R);
    FAT5__GWS(done, RN);
    FAT5__GWS(score, R);
    FAT5__GWS(bscore, R);
    FAT5__GWS(fin_score, R);
    FAT5__GWS(fin_tok, R * Lh);
    FAT5__GWS(fin_len, R);
    FAT5__GWS(fin_flag, R);
    FAT5__GWS(unsat, N);
    FAT5__GWS(src, R);
    FAT5__GWS(scratch, R * Lh);
#undef FAT5__GWS
    *total = off;
    return ok;
}

// Checks the request against the model; messages name the option.
static fat5_status fat5__gen_check_request(fat5_model *m, const int32_t *tokens, const int32_t *cu, int64_t n_inputs,
                                           const fat5_generate_config *g) {
    fat5_ctx *ctx = m->ctx;
    int64_t V = m->cfg.vocab_size, rows;
    fat5_status st;
    if ((st = fat5__gen_check(ctx, "fat5_generate", g))) return st;
    if ((st = fat5__check_enc_input(m, "fat5_generate", tokens, cu, n_inputs, INT32_MAX, &m->attn))) return st;
    if (g->eos_token_id >= V || g->pad_token_id >= V || g->decoder_start_token_id >= V)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: %s = %lld is outside [0, vocab_size %lld)",
                         g->eos_token_id >= V ? "eos_token_id" : g->pad_token_id >= V ? "pad_token_id"
                                                                                      : "decoder_start_token_id",
                         (long long)(g->eos_token_id >= V ? g->eos_token_id
                                     : g->pad_token_id >= V ? g->pad_token_id : g->decoder_start_token_id),
                         (long long)V);
    if (g->num_beams > 1 && g->do_sample)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_generate: do_sample with num_beams = %lld (beam sampling) "
                         "is not supported", (long long)g->num_beams);
    if (g->num_beams > 1 && g->num_return_sequences > g->num_beams)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_return_sequences = %lld exceeds num_beams = %lld",
                         (long long)g->num_return_sequences, (long long)g->num_beams);
    if (g->num_beams == 1 && !g->do_sample && g->num_return_sequences != 1)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: num_return_sequences = %lld with greedy decoding (only 1 is possible)",
                         (long long)g->num_return_sequences);
    rows = g->num_beams > 1 ? g->num_beams : g->num_return_sequences;
    if (n_inputs > INT32_MAX / 2 / rows || n_inputs * rows > INT32_MAX / 2 / (g->max_new_tokens + 1))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_generate: %lld inputs x %lld rows x max_new_tokens = %lld: the output does not fit the "
                         "cache (2^30 positions)",
                         (long long)n_inputs, (long long)rows, (long long)g->max_new_tokens);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_generate(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens, int64_t n_inputs,
                                   const fat5_generate_config *g, fat5_generate_result *out) {
    fat5__gen s;
    fat5_ctx *ctx;
    fat5_status st;
    int32_t *h = NULL;            // host staging: [R * Lh] histories, then the result
    int32_t *ent_tok, *ent_row, *flags;
    float *hs = NULL;
    size_t total = 0;
    int64_t n, r, e, steps = 0, R, N, Lh, rpi, total_tok = 0, q;
    int use_graph;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    if (!g || !out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_generate: %s is NULL", g ? "out" : "config");
    memset(out, 0, sizeof *out);
    if ((st = fat5__gen_check_request(m, tokens, cu_seqlens, n_inputs, g))) return st;
    memset(&s, 0, sizeof s);
    s.m = m, s.ctx = ctx, s.be = m->be, s.g = g;
    s.beam = g->num_beams > 1;
    s.K = (int)g->num_beams;
    rpi = s.beam ? g->num_beams : g->num_return_sequences;
    s.N = N = n_inputs;
    s.R = R = n_inputs * rpi;
    s.V = (int)m->cfg.vocab_size;
    s.Lh = (int)(g->max_new_tokens + 1);
    Lh = s.Lh;
    // the decoder: every generated token but the last is fed back, so max_new_tokens positions
    if ((st = fat5_decoder_create(m, R, cu_seqlens[n_inputs], g->max_new_tokens, &s.d))) return st;
    if ((st = fat5_decoder_start(s.d, tokens, cu_seqlens, n_inputs, rpi))) goto fail;
    if (!fat5__gen_layout(&s, 0, &total)) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: the buffer size overflows");
        goto fail;
    }
    if ((st = s.be->alloc(ctx, total, &s.base))) goto fail;
    fat5__gen_layout(&s, s.base, &total);
    h = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(R * Lh + 3 * R + N + 1) * sizeof(int32_t)));
    hs = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)R * sizeof(float)));
    if (!h || !hs) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory");
        goto fail;
    }
    ent_tok = h + R * Lh, ent_row = ent_tok + R, flags = ent_row + R;
    // initial state: every row holds the start token; beams 1 .. K-1 start 1e9 down (Hugging Face),
    // finished slots empty at -1e9, every input may still improve
    for (r = 0; r < R * Lh; r++) h[r] = r % Lh == 0 ? (int32_t)g->decoder_start_token_id : (int32_t)g->pad_token_id;
    if ((st = s.be->upload(ctx, s.hist, h, (size_t)(R * Lh) * 4))) goto fail;
    for (r = 0; r < R; r++) hs[r] = s.beam && r % s.K ? -1.0e9f : 0.0f;
    if ((st = s.be->upload(ctx, s.bscore, hs, (size_t)R * 4))) goto fail;
    for (r = 0; r < R; r++) hs[r] = -1.0e9f;
    if ((st = s.be->upload(ctx, s.fin_score, hs, (size_t)R * 4))) goto fail;
    for (r = 0; r < R; r++) h[r] = (int32_t)r;
    if ((st = s.be->upload(ctx, s.src, h, (size_t)R * 4))) goto fail;
    for (r = 0; r < N; r++) h[r] = 1;
    if ((st = s.be->upload(ctx, s.unsat, h, (size_t)N * 4))) goto fail;
    for (r = 0; r < R; r++) ent_tok[r] = (int32_t)g->decoder_start_token_id, ent_row[r] = (int32_t)r;
    if ((st = s.be->upload(ctx, s.d->tok, ent_tok, (size_t)R * 4)) ||
        (st = s.be->upload(ctx, s.d->rows, ent_row, (size_t)R * 4)) || (st = s.be->sync(ctx)))
        goto fail;
    use_graph = g->use_graph && ctx->gpu != NULL;
    n = R;
    while (n > 0 && steps < g->max_new_tokens) {
        int64_t kept = 0, unit_n = s.beam ? N : R;
        if (use_graph) {
            st = fat5__gen_graph_step(&s, n);
            if (st == FAT5_ERR_UNSUPPORTED) {   // no capture here: plain launches from now on
                use_graph = 0;
                st = fat5__gen_step(&s, n);
            }
        } else {
            st = fat5__gen_step(&s, n);
        }
        if (st) goto fail;
        steps++;
        // the small read between steps: which rows (inputs) are done; then drop their entries
        if ((st = s.be->download(ctx, flags, s.done, (size_t)unit_n * 4)) || (st = s.be->sync(ctx))) goto fail;
        for (e = 0; e < n; e++) {
            int64_t unit = s.beam ? ent_row[e] / s.K : ent_row[e];
            kept += !flags[unit];
        }
        if (kept == n) continue;
        if (kept == 0) break;
        if ((st = s.be->download(ctx, h, s.d->tok, (size_t)n * 4)) || (st = s.be->sync(ctx))) goto fail;
        for (e = 0, q = 0; e < n; e++) {
            int64_t unit = s.beam ? ent_row[e] / s.K : ent_row[e];
            if (flags[unit]) {
                s.d->live[ent_row[e]] = 0;
                continue;
            }
            ent_tok[q] = h[e];
            ent_row[q++] = ent_row[e];
        }
        n = kept;
        s.d->n_live = n;
        if ((st = s.be->upload(ctx, s.d->tok, ent_tok, (size_t)n * 4)) ||
            (st = s.be->upload(ctx, s.d->rows, ent_row, (size_t)n * 4)) || (st = s.be->sync(ctx)))
            goto fail;
    }
    // the result: per input, its rows (greedy / sampling) or its best finished hypotheses
    {
        int64_t nseq = n_inputs * g->num_return_sequences, i, k;
        fat5__addr toks = s.beam ? s.fin_tok : s.hist, lens = s.beam ? s.fin_len : s.lens;
        fat5__addr sc = s.beam ? s.fin_score : s.score;
        int64_t stride = s.beam ? Lh - 1 : Lh, first = s.beam ? 0 : 1;
        if ((st = s.be->download(ctx, h, toks, (size_t)(R * stride) * 4)) ||
            (st = s.be->download(ctx, ent_tok, lens, (size_t)R * 4)) ||
            (st = s.be->download(ctx, hs, sc, (size_t)R * 4)) || (st = s.be->sync(ctx)))
            goto fail;
        out->cu_seqlens = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)nseq + 1, sizeof(int32_t)));
        out->scores = FAT5__CAST(float *, fat5__calloc(ctx, (size_t)nseq, sizeof(float)));
        for (i = 0; i < n_inputs; i++)
            for (k = 0; k < g->num_return_sequences; k++) total_tok += ent_tok[i * rpi + k];
        out->tokens = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)(total_tok > 0 ? total_tok : 1), sizeof(int32_t)));
        if (!out->cu_seqlens || !out->scores || !out->tokens) {
            st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_generate: out of memory for the result");
            goto fail;
        }
        for (i = 0, q = 0; i < n_inputs; i++)
            for (k = 0; k < g->num_return_sequences; k++) {
                int64_t row = i * rpi + k, j, o = i * g->num_return_sequences + k;
                for (j = 0; j < ent_tok[row]; j++) out->tokens[q++] = h[row * stride + first + j];
                out->cu_seqlens[o + 1] = (int32_t)q;
                out->scores[o] = hs[row];
            }
        out->n_seq = nseq;
        out->steps = steps;
        out->cache_bytes = (size_t)m->cfg.num_decoder_layers * 2 *
                           ((size_t)R * (size_t)g->max_new_tokens + (size_t)cu_seqlens[n_inputs]) *
                           (size_t)(m->cfg.num_heads * m->cfg.d_kv) * m->act_size;
    }
    st = FAT5_OK;
    goto cleanup;
fail:
    fat5_generate_result_free(ctx, out);
cleanup:
#ifndef FAT5_NO_CUDA
    fat5__dev_graph_destroy(ctx, s.graph);
#endif
    if (s.base) s.be->free(ctx, s.base);
    fat5__free(ctx, h);
    fat5__free(ctx, hs);
    fat5_decoder_destroy(s.d);
    return st;
}
#undef FAT5__TRY

// ==[8.1] text: Unicode properties, grapheme clusters and normalization forms ==
//
// The tables between the two GENERATED lines are written by tools/gen_unicode.py from the Unicode
// Character Database files (Debian package unicode-data); `make check-unicode` checks they match.

// BEGIN GENERATED by tools/gen_unicode.py
// Unicode 15.0.0, from the Unicode Character Database (https://www.unicode.org/Public/15.0.0/ucd/;
// Unicode License v3, https://www.unicode.org/license.txt).
#define FAT5__UNICODE_VERSION "15.0.0"
// Properties by range: start << 8 | bits, the entry covers start up to the next start. Bits 0-3
// Grapheme_Cluster_Break (FAT5__GB_*), 16 Extended_Pictographic, 32 letter (L*), 64 number (N*),
// 128 White_Space.
static const uint32_t fat5__uc_prop[3134] = {
3,2435,2690,2947,3457,3587,8320,8448,12352,14848,16672,23296,24864,31488,32515,34179,34307,41088,
41216,43280,43552,43776,44291,44560,44800,45632,46080,46368,46592,47424,47648,47872,48192,48896,
49184,55040,55328,63232,63520,180736,181792,184832,188448,189696,191520,191744,192032,192256,
196612,225312,226560,226848,227328,227872,228864,229152,229376,230944,231168,231456,232192,232480,
232704,232992,238080,238368,259584,259872,295424,295684,297504,339968,340256,349952,350496,350720,
352288,362752,364804,376320,376580,376832,377092,377600,377860,378368,378628,378880,380960,387840,
388896,389888,393223,394752,397316,400128,400387,400640,401440,412420,417856,420352,421408,421892,
422176,447488,447776,448004,449799,450048,450308,451872,452356,452864,453124,454176,454720,457248,
457984,458528,458752,462599,462880,463108,463392,471044,477952,478496,501252,504096,504320,507968,
510496,518916,521248,521728,522784,523008,523524,523776,524320,529924,530976,531204,533536,533764,
534560,534788,536064,540704,547076,547840,548896,551680,552992,559104,559392,560896,561159,561664,
563204,565280,576004,582151,582404,590600,590880,604676,604936,605188,605472,605704,606468,608520,
609540,609800,610336,610564,612384,614916,615424,616000,618496,618784,622852,623112,623616,623904,
625920,626464,626944,627488,633088,633376,635136,635424,635648,636448,637440,637956,638240,638468,
638728,639236,640256,640776,641280,641800,642308,642592,642816,644868,645120,646176,646656,646944,
647684,648192,648768,651296,651776,652352,653824,654368,654592,654852,655104,655620,656136,656384,
656672,658176,659232,659712,660256,665856,666144,667904,668192,668672,668960,669440,669728,670208,
670724,670976,671240,672004,672512,673540,674048,674564,675328,676100,676352,678176,679168,679456,
679680,681536,684036,684576,685316,685568,688388,688904,689152,689440,691712,692000,692736,693024,
698624,698912,700672,700960,701440,701728,702976,703492,703776,704008,704772,706048,706308,706824,
707072,707336,707844,708096,708640,708864,712736,713220,713728,714304,716800,719136,719364,720896,
721156,721416,721920,722208,724224,724768,725248,725792,731392,731680,733440,733728,734208,734496,
735744,736260,736544,736772,737288,737540,738560,739080,739584,740104,740612,740864,742660,743424,
744480,744960,745248,745988,746496,747072,749568,749856,750144,751616,754180,754464,754688,754976,
756480,757280,758016,758304,759296,760096,760576,760864,761088,761376,761856,762656,763136,763936,
764672,765472,768512,769540,769800,770052,770312,770816,771592,772352,772616,773380,773632,774176,
774400,775940,776192,779840,783104,786436,786696,787460,787744,789760,790048,790784,791072,796928,
797216,801280,801796,802080,802308,803080,804096,804356,805120,805380,806400,808196,808704,808992,
809728,810272,810496,811040,811524,812032,812608,815104,817216,818944,819232,819460,819720,820224,
820512,822528,822816,823552,823840,829696,829984,832512,832800,834048,834564,834848,835080,835332,
835592,836100,836360,836864,837124,837384,837888,838152,838660,839168,840964,841472,843040,843520,
843808,844292,844800,845376,847872,848160,848648,848896,851972,852488,853024,855296,855584,856320,
856608,867076,867616,867844,868104,868612,869632,869896,870656,870920,871684,871975,872192,873504,
874244,874560,876320,877060,877568,878144,882944,883232,884736,884996,885256,885760,886048,890624,
891424,897536,897824,900096,900384,900608,901152,902912,903684,903936,904964,905224,905732,906496,
906756,907008,907272,909060,909312,910912,913408,913928,914432,917792,930052,930336,930600,930820,
932608,933920,935684,937728,938048,940544,950560,951040,951328,951552,951840,953088,953376,959488,
959776,960000,960288,962820,963104,963368,963588,965920,966144,966688,967936,968224,968448,968708,
970496,970816,973312,973856,974848,983072,983296,989188,989696,991296,996352,996612,996864,997124,
997376,997636,997888,998920,999456,1001472,1001760,1010944,1011972,1015560,1015812,1017088,1017348,
1017888,1019140,1021952,1022212,1031424,1033732,1033984,1048608,1059584,1060100,1061128,1061380,
1062912,1063172,1063688,1064196,1064736,1065024,1067520,1069088,1070600,1071108,1071648,1072644,
1073440,1073664,1074464,1074944,1076768,1077508,1078560,1081860,1082112,1082376,1082628,1083136,
1084676,1084960,1085184,1085504,1088000,1088772,1089024,1089568,1099264,1099552,1099776,1101088,
1101312,1101856,1112832,1113120,1114153,1138730,1157163,1179680,1198336,1198624,1199616,1200160,
1201920,1202208,1202432,1202720,1203712,1204256,1214720,1215008,1216000,1216544,1224960,1225248,
1226240,1226784,1228544,1228832,1229056,1229344,1230336,1230880,1234688,1234976,1249536,1249824,
1250816,1251360,1268480,1268996,1269760,1272128,1277184,1277984,1282048,1286176,1308160,1308704,
1310208,1311008,1469696,1470240,1474688,1474848,1481472,1482784,1501952,1502784,1503520,1505536,
1507360,1511940,1512712,1512960,1515296,1520132,1520648,1520896,1523744,1528324,1528832,1531936,
1535232,1535520,1536256,1536516,1537024,1540128,1553412,1553928,1554180,1555976,1558020,1558280,
1558788,1561600,1562400,1562624,1563680,1563908,1564160,1564736,1567232,1568832,1571328,1575684,
1576451,1576708,1577024,1579520,1581088,1603840,1605664,1606916,1607456,1616132,1616416,1616640,
1617952,1635840,1638432,1646336,1646596,1647368,1648388,1648904,1649664,1650696,1651204,1651464,
1652996,1653760,1656384,1658912,1666560,1667104,1668352,1671200,1682432,1683488,1690112,1691712,
1694464,1703968,1709828,1710344,1710852,1711104,1712160,1725704,1725956,1726216,1726468,1728256,
1728516,1728768,1729028,1729280,1729796,1731848,1733380,1735936,1736452,1736768,1739264,1740864,
1743360,1746720,1746944,1748996,1756928,1769476,1770504,1770784,1782788,1784584,1784836,1785096,
1786372,1786632,1787168,1789184,1790016,1792512,1796868,1799168,1802244,1802760,1803040,1810696,
1810948,1811976,1812484,1813000,1813252,1814048,1814592,1817120,1828356,1828616,1828868,1829384,
1830148,1830408,1830660,1831432,1831936,1835040,1844232,1846276,1848328,1848836,1849344,1851456,
1853952,1854752,1855552,1858080,1867264,1867808,1870080,1871904,1882880,1883424,1884160,1888260,
1889024,1889284,1892616,1892868,1894688,1895684,1895968,1897476,1897760,1898248,1898500,1899040,
1899264,1900576,1949700,1966112,2037248,2037792,2039296,2039840,2049536,2050080,2051584,2052128,
2054144,2054432,2054656,2054944,2055168,2055456,2055680,2055968,2063872,2064416,2077952,2078240,
2080000,2080288,2080512,2081312,2082048,2082336,2084096,2084896,2085888,2086432,2087936,2088992,
2092288,2093600,2094336,2094624,2096384,2097280,2099971,2100228,2100485,2100739,2101248,2107523,
2107907,2109312,2109440,2112528,2112768,2115856,2116096,2121600,2121731,2125888,2126112,2126336,
2126912,2128384,2129696,2129984,2132480,2134048,2137344,2150404,2158848,2163232,2163456,2164512,
2164736,2165280,2167808,2168096,2168320,2169120,2170368,2171408,2171648,2171936,2172160,2172448,
2172672,2172960,2173184,2173472,2174464,2174752,2177328,2177536,2178080,2179072,2180384,2181632,
2182688,2182912,2183232,2196256,2196800,2198016,2200592,2202112,2205968,2206464,2300432,2300928,
2304016,2304256,2328592,2328832,2346768,2347008,2353424,2356224,2357264,2358016,2383936,2399232,
2408976,2409216,2419264,2424832,2468368,2468864,2471440,2471680,2474000,2474240,2489104,2490112,
2490384,2491904,2492176,2495232,2495504,2524672,2527248,2557440,2557968,2560768,2561040,2561280,
2561552,2561792,2563344,2563584,2564368,2564608,2566160,2566400,2568976,2569472,2573328,2573568,
2574096,2574336,2575376,2575616,2575888,2576128,2577168,2577920,2578192,2578432,2581264,2582528,
2586176,2593792,2594064,2594816,2597136,2597376,2600976,2601216,2604816,2605056,2700304,2700800,
2819344,2820096,2824976,2825472,2838544,2838784,2839824,2840064,2883616,2942208,2943776,2944772,
2945568,2946048,2948416,2948608,2949152,2958848,2959136,2959360,2960672,2960896,2961440,2975744,
2977568,2977792,2981636,2981920,2987776,2990112,2991872,2992160,2993920,2994208,2995968,2996256,
2998016,2998304,3000064,3000352,3002112,3002400,3004160,3004448,3006208,3006468,3014656,3026720,
3026944,3145856,3145984,3147040,3147584,3147776,3154240,3156484,3158032,3158304,3159552,3160128,
3160864,3161360,3161600,3162400,3184384,3184900,3185408,3185952,3186688,3186976,3209984,3210272,
3211264,3212576,3223552,3223840,3247872,3248704,3249664,3252256,3260416,3272736,3276800,3285056,
3287552,3295296,3297280,3297600,3301376,3309632,3312128,3315472,3315712,3315984,3316224,3322176,
3325952,3407904,5095424,5111840,10784000,10801184,10812928,10813472,10882304,10883104,10887232,
10889760,10890240,10895392,10907396,10908416,10908676,10911232,10911520,10919428,10919968,10937920,
10940420,10940928,10950432,10952704,10953248,10979584,10980128,10996480,10997792,10998272,10998560,
10998784,10999072,11000320,11006496,11010564,11010848,11011588,11011872,11012868,11013152,11019016,
11019524,11020040,11020288,11021316,11021568,11022400,11023872,11026464,11039744,11042824,11043360,
11056136,11060228,11060736,11063360,11065856,11067396,11072032,11073536,11074336,11074560,11074848,
11075332,11075648,11078176,11085316,11087360,11087904,11093764,11096584,11097088,11100201,11107584,
11108356,11109128,11109408,11121412,11121672,11122180,11123208,11123716,11124232,11124992,11128608,
11128896,11131392,11132960,11134212,11134496,11137088,11139616,11140864,11141152,11151620,11153160,
11153668,11154184,11154692,11155200,11157536,11158276,11158560,11160580,11160840,11161088,11161664,
11164160,11165728,11171584,11172384,11172608,11172868,11173120,11173408,11186180,11186464,11186692,
11187488,11187972,11188512,11189764,11190304,11190532,11190816,11191040,11197216,11197952,11198496,
11201288,11201540,11202056,11202560,11203104,11203848,11204100,11204352,11206944,11208448,11208992,
11210496,11211040,11212544,11214880,11216640,11216928,11218688,11218976,11229952,11230240,11233792,
11235360,11264776,11265284,11265544,11266052,11266312,11266816,11267080,11267332,11267584,11268160,
11270656,11272236,11272493,11279404,11279661,11286572,11286829,11293740,11293997,11300908,11301165,
11308076,11308333,11315244,11315501,11322412,11322669,11329580,11329837,11336748,11337005,11343916,
11344173,11351084,11351341,11358252,11358509,11365420,11365677,11372588,11372845,11379756,11380013,
11386924,11387181,11394092,11394349,11401260,11401517,11408428,11408685,11415596,11415853,11422764,
11423021,11429932,11430189,11437100,11437357,11444268,11444525,11451436,11451693,11458604,11458861,
11465772,11466029,11472940,11473197,11480108,11480365,11487276,11487533,11494444,11494701,11501612,
11501869,11508780,11509037,11515948,11516205,11523116,11523373,11530284,11530541,11537452,11537709,
11544620,11544877,11551788,11552045,11558956,11559213,11566124,11566381,11573292,11573549,11580460,
11580717,11587628,11587885,11594796,11595053,11601964,11602221,11609132,11609389,11616300,11616557,
11623468,11623725,11630636,11630893,11637804,11638061,11644972,11645229,11652140,11652397,11659308,
11659565,11666476,11666733,11673644,11673901,11680812,11681069,11687980,11688237,11695148,11695405,
11702316,11702573,11709484,11709741,11716652,11716909,11723820,11724077,11730988,11731245,11738156,
11738413,11745324,11745581,11752492,11752749,11759660,11759917,11766828,11767085,11773996,11774253,
11781164,11781421,11788332,11788589,11795500,11795757,11802668,11802925,11809836,11810093,11817004,
11817261,11824172,11824429,11831340,11831597,11838508,11838765,11845676,11845933,11852844,11853101,
11860012,11860269,11867180,11867437,11874348,11874605,11881516,11881773,11888684,11888941,11895852,
11896109,11903020,11903277,11910188,11910445,11917356,11917613,11924524,11924781,11931692,11931949,
11938860,11939117,11946028,11946285,11953196,11953453,11960364,11960621,11967532,11967789,11974700,
11974957,11981868,11982125,11989036,11989293,11996204,11996461,12003372,12003629,12010540,12010797,
12017708,12017965,12024876,12025133,12032044,12032301,12039212,12039469,12046380,12046637,12053548,
12053805,12060716,12060973,12067884,12068141,12075052,12075309,12082220,12082477,12089388,12089645,
12096556,12096813,12103724,12103981,12110892,12111149,12118060,12118317,12125228,12125485,12132396,
12132653,12139564,12139821,12146732,12146989,12153900,12154157,12161068,12161325,12168236,12168493,
12175404,12175661,12182572,12182829,12189740,12189997,12196908,12197165,12204076,12204333,12211244,
12211501,12218412,12218669,12225580,12225837,12232748,12233005,12239916,12240173,12247084,12247341,
12254252,12254509,12261420,12261677,12268588,12268845,12275756,12276013,12282924,12283181,12290092,
12290349,12297260,12297517,12304428,12304685,12311596,12311853,12318764,12319021,12325932,12326189,
12333100,12333357,12340268,12340525,12347436,12347693,12354604,12354861,12361772,12362029,12368940,
12369197,12376108,12376365,12383276,12383533,12390444,12390701,12397612,12397869,12404780,12405037,
12411948,12412205,12419116,12419373,12426284,12426541,12433452,12433709,12440620,12440877,12447788,
12448045,12454956,12455213,12462124,12462381,12469292,12469549,12476460,12476717,12483628,12483885,
12490796,12491053,12497964,12498221,12505132,12505389,12512300,12512557,12519468,12519725,12526636,
12526893,12533804,12534061,12540972,12541229,12548140,12548397,12555308,12555565,12562476,12562733,
12569644,12569901,12576812,12577069,12583980,12584237,12591148,12591405,12598316,12598573,12605484,
12605741,12612652,12612909,12619820,12620077,12626988,12627245,12634156,12634413,12641324,12641581,
12648492,12648749,12655660,12655917,12662828,12663085,12669996,12670253,12677164,12677421,12684332,
12684589,12691500,12691757,12698668,12698925,12705836,12706093,12713004,12713261,12720172,12720429,
12727340,12727597,12734508,12734765,12741676,12741933,12748844,12749101,12756012,12756269,12763180,
12763437,12770348,12770605,12777516,12777773,12784684,12784941,12791852,12792109,12799020,12799277,
12806188,12806445,12813356,12813613,12820524,12820781,12827692,12827949,12834860,12835117,12842028,
12842285,12849196,12849453,12856364,12856621,12863532,12863789,12870700,12870957,12877868,12878125,
12885036,12885293,12892204,12892461,12899372,12899629,12906540,12906797,12913708,12913965,12920876,
12921133,12928044,12928301,12935212,12935469,12942380,12942637,12949548,12949805,12956716,12956973,
12963884,12964141,12971052,12971309,12978220,12978477,12985388,12985645,12992556,12992813,12999724,
12999981,13006892,13007149,13014060,13014317,13021228,13021485,13028396,13028653,13035564,13035821,
13042732,13042989,13049900,13050157,13057068,13057325,13064236,13064493,13071404,13071661,13078572,
13078829,13085740,13085997,13092908,13093165,13100076,13100333,13107244,13107501,13114412,13114669,
13121580,13121837,13128748,13129005,13135916,13136173,13143084,13143341,13150252,13150509,13157420,
13157677,13164588,13164845,13171756,13172013,13178924,13179181,13186092,13186349,13193260,13193517,
13200428,13200685,13207596,13207853,13214764,13215021,13221932,13222189,13229100,13229357,13236268,
13236525,13243436,13243693,13250604,13250861,13257772,13258029,13264940,13265197,13272108,13272365,
13279276,13279533,13286444,13286701,13293612,13293869,13300780,13301037,13307948,13308205,13315116,
13315373,13322284,13322541,13329452,13329709,13336620,13336877,13343788,13344045,13350956,13351213,
13358124,13358381,13365292,13365549,13372460,13372717,13379628,13379885,13386796,13387053,13393964,
13394221,13401132,13401389,13408300,13408557,13415468,13415725,13422636,13422893,13429804,13430061,
13436972,13437229,13444140,13444397,13451308,13451565,13458476,13458733,13465644,13465901,13472812,
13473069,13479980,13480237,13487148,13487405,13494316,13494573,13501484,13501741,13508652,13508909,
13515820,13516077,13522988,13523245,13530156,13530413,13537324,13537581,13544492,13544749,13551660,
13551917,13558828,13559085,13565996,13566253,13573164,13573421,13580332,13580589,13587500,13587757,
13594668,13594925,13601836,13602093,13609004,13609261,13616172,13616429,13623340,13623597,13630508,
13630765,13637676,13637933,13644844,13645101,13652012,13652269,13659180,13659437,13666348,13666605,
13673516,13673773,13680684,13680941,13687852,13688109,13695020,13695277,13702188,13702445,13709356,
13709613,13716524,13716781,13723692,13723949,13730860,13731117,13738028,13738285,13745196,13745453,
13752364,13752621,13759532,13759789,13766700,13766957,13773868,13774125,13781036,13781293,13788204,
13788461,13795372,13795629,13802540,13802797,13809708,13809965,13816876,13817133,13824044,13824301,
13831212,13831469,13838380,13838637,13845548,13845805,13852716,13852973,13859884,13860141,13867052,
13867309,13874220,13874477,13881388,13881645,13888556,13888813,13895724,13895981,13902892,13903149,
13910060,13910317,13917228,13917485,13924396,13924653,13931564,13931821,13938732,13938989,13945900,
13946157,13953068,13953325,13960236,13960493,13967404,13967661,13974572,13974829,13981740,13981997,
13988908,13989165,13996076,13996333,14003244,14003501,14010412,14010669,14017580,14017837,14024748,
14025005,14031916,14032173,14039084,14039341,14046252,14046509,14053420,14053677,14060588,14060845,
14067756,14068013,14074924,14075181,14082092,14082349,14089260,14089517,14096428,14096685,14103596,
14103853,14110764,14111021,14117932,14118189,14125100,14125357,14132224,14135338,14141184,14142251,
14154752,16318496,16412160,16412704,16439808,16449568,16451328,16454432,16455680,16456992,16457220,
16457504,16460032,16460320,16463616,16463904,16465152,16465440,16465664,16465952,16466432,16466720,
16467200,16467488,16495104,16503584,16596480,16601120,16617472,16618016,16631808,16642080,16645120,
16646148,16650240,16654340,16658432,16674848,16676096,16676384,16710912,16711427,16711680,16715840,
16718336,16720160,16726784,16728352,16734976,16737824,16752164,16752672,16760576,16761376,16762880,
16763424,16764928,16765472,16766976,16767520,16768256,16773123,16776192,16777248,16780288,16780576,
16787200,16787488,16792320,16792608,16793088,16793376,16797184,16797728,16801280,16810016,16841472,
16844608,16856064,16859200,16873728,16878144,16878592,16907524,16907776,16941088,16948480,16949280,
16961792,16965636,16965952,16972800,16973856,16982080,16983040,16985376,16990528,16990752,16992832,
16993024,16994336,17004036,17005312,17006624,17014272,17014816,17024000,17025056,17027072,17027392,
17028608,17039392,17079808,17080384,17082880,17084448,17093632,17094688,17103872,17104928,17115136,
17117216,17130496,17133600,17136384,17136672,17140480,17140768,17142528,17142816,17143296,17143584,
17146368,17146656,17150464,17150752,17152512,17152800,17153280,17170464,17250048,17252384,17257984,
17260576,17262592,17268768,17270272,17270560,17281280,17281568,17283840,17301536,17303040,17303584,
17303808,17304096,17315328,17315616,17316096,17316896,17317120,17317664,17323520,17324096,17326112,
17331968,17332544,17334304,17342208,17344320,17346560,17358880,17363712,17364000,17364480,17365824,
17367072,17372736,17374208,17375264,17381888,17399840,17414144,17415232,17415712,17416256,17420288,
17420864,17432608,17432836,17433600,17433860,17434368,17435652,17436704,17437696,17437984,17438720,
17439008,17446400,17446916,17447680,17448708,17449024,17451264,17457184,17464640,17465088,17465376,
17472832,17473536,17481760,17483776,17484064,17491204,17491712,17492800,17494016,17498144,17511936,
17514528,17520128,17520704,17522720,17527552,17528896,17530912,17535488,17541440,17543168,17563680,
17582336,17596448,17609472,17612832,17625856,17627712,17629216,17638404,17639424,17641536,17644032,
17719360,17727232,17727520,17738240,17738500,17739008,17739808,17740288,17759492,17760288,17767744,
17770272,17770496,17772576,17778180,17781056,17782016,17788960,17793540,17794560,17805344,17810752,
17812480,17817632,17823488,17825800,17826052,17826312,17826592,17840132,17843968,17846848,17854468,
17854752,17855236,17855776,17856000,17858308,17859080,17859360,17870856,17871620,17872648,17873156,
17873664,17874183,17874432,17875460,17875712,17878279,17878528,17879072,17885440,17887296,17889792,
17891332,17892128,17901316,17902600,17902852,17904896,17905216,17907712,17908768,17909000,17909536,
17909760,17911840,17920772,17921024,17921568,17921792,17924100,17924616,17924896,17937160,17937924,
17940232,17940768,17941031,17941536,17941760,17942788,17943808,17944072,17944324,17944640,17947168,
17947392,17947680,17947904,17948992,17954048,17956896,17961472,17961760,17968136,17968900,17969672,
17970180,17970440,17970692,17971200,17972740,17973024,17973508,17973760,17989664,17991424,17991712,
17991936,17992224,17993216,17993504,17997312,17997600,18000128,18001952,18013956,18014216,18014980,
18017024,18018368,18020864,18022404,18022920,18023424,18023712,18025728,18026272,18026752,18027296,
18032896,18033184,18034944,18035232,18035712,18036000,18037248,18037508,18038048,18038276,18038536,
18038788,18039048,18040064,18040584,18041088,18041608,18042368,18042912,18043136,18044676,18044928,
18046240,18047496,18048000,18048516,18050304,18051076,18052352,18087968,18101512,18102276,18104328,
18104836,18105608,18105860,18106144,18107136,18108480,18110976,18112004,18112288,18113024,18120736,
18132996,18133256,18133764,18135304,18135556,18135816,18136324,18136584,18136836,18137352,18137604,
18138144,18138624,18138912,18139136,18141248,18143744,18186272,18198276,18198536,18199044,18200064,
18200584,18201604,18202120,18202372,18202880,18208800,18209796,18210304,18219040,18231304,18232068,
18234120,18234628,18234888,18235140,18235648,18236448,18236672,18239552,18242048,18251808,18262788,
18263048,18263300,18263560,18264068,18265608,18265860,18266144,18266368,18268224,18270720,18284576,
18291456,18291972,18292736,18293252,18294280,18294532,18295808,18296896,18299904,18300960,18302720,
18350112,18361352,18362116,18364424,18364676,18365184,18391072,18407488,18412288,18415392,18417408,
18417952,18418176,18418720,18420736,18421024,18421504,18421792,18427908,18428168,18429440,18429704,
18430208,18430724,18431240,18431492,18431783,18432008,18432295,18432520,18432772,18433024,18436160,
18438656,18456608,18458624,18459168,18469128,18469892,18470912,18471428,18471944,18472964,18473248,
18473472,18473760,18473992,18474240,18481184,18481412,18484000,18494212,18495752,18496039,18496260,
18497280,18499332,18499584,18501664,18501892,18503432,18503940,18504736,18514983,18516484,18519816,
18520068,18520576,18521376,18521600,18526240,18544896,18612256,18614528,18614816,18624264,18624516,
18626304,18626564,18628104,18628356,18628640,18628864,18632768,18640128,18641440,18649088,18649604,
18655232,18655496,18655748,18657544,18657796,18658312,18658564,18659072,18677792,18679552,18679840,
18680320,18680608,18690308,18691840,18692612,18692864,18693124,18693632,18693892,18695719,18695940,
18696192,18698304,18700800,18702368,18703872,18704160,18704640,18704928,18713096,18714368,18714628,
18715136,18715400,18715908,18716168,18716420,18716704,18716928,18718784,18721280,18800672,18805508,
18806024,18806528,18808836,18809383,18809608,18809888,18813184,18813472,18822152,18822660,18823936,
18824712,18825220,18825480,18825732,18825984,18829376,18831872,18853920,18854144,18858048,18863360,
18874400,19110400,19136576,19164928,19169312,19219456,19894304,19919104,19922976,20197379,20201476,
20201760,20203268,20207104,21233696,21382912,23592992,23738624,23740448,23748352,23748672,23751168,
23752736,23772928,23773248,23775744,23777312,23784960,23785476,23786752,23789600,23801860,23803648,
23805984,23806976,23810112,23812608,23812928,23814656,23814944,23820288,23821600,23826432,24002592,
24019008,24024832,24051744,24070912,24071940,24072224,24072456,24086528,24088324,24089376,24092672,
24109088,24109568,24109856,24110084,24110336,24113160,24113664,24117280,25688064,25690144,26007040,
26017824,26020096,28307488,28308480,28308768,28310528,28310816,28311296,28311584,28386048,28389920,
28390144,28397600,28398336,28398880,28399104,28402720,28403712,28405792,28507136,29098016,29125376,
29126688,29129984,29130784,29133056,29134880,29137408,29138180,29138688,29138947,29139968,30343172,
30354944,30355460,30361344,30500100,30500360,30500612,30501376,30502152,30502404,30503683,30505732,
30507776,30508292,30510080,30517764,30518784,30556676,30557440,30588992,30594048,30597184,30602240,
30629952,30636288,30670880,30692608,30692896,30711040,30711328,30711808,30712352,30712576,30713120,
30713600,30714144,30715136,30715424,30718464,30718752,30718976,30719264,30721024,30721312,30737920,
30738208,30739200,30739744,30741760,30742048,30743808,30744096,30751232,30751520,30752512,30752800,
30754048,30754336,30754560,30755360,30757120,30757408,30844416,30844960,30851328,30851616,30857984,
30858272,30866176,30866464,30872832,30873120,30881024,30881312,30887680,30887968,30895872,30896160,
30902528,30902816,30910720,30911008,30917376,30917664,30919680,30920256,30932992,31064068,31078144,
31079172,31091968,31094020,31094272,31097860,31098112,31103748,31105024,31105284,31109120,31391776,
31399680,31401248,31402752,31457284,31459072,31459332,31463680,31464196,31465984,31466244,31466752,
31467012,31468288,31469600,31485440,31493892,31494144,31522848,31534336,31535108,31536928,31538688,
31539264,31541760,31542816,31543040,31625248,31632900,31633152,31637536,31648772,31649856,31652352,
31772704,31779844,31780928,31783424,31973408,31975168,31975456,31976448,31976736,31977216,31977504,
31981312,31981600,32032000,32032576,32034820,32036608,32047136,32064516,32066336,32066560,32067648,
32070144,32272704,32287744,32288064,32288768,32289088,32290048,32309568,32321024,32321344,32325120,
32374816,32375808,32376096,32382976,32383264,32383744,32384032,32384256,32384800,32385024,32385312,
32387840,32388128,32389120,32389408,32389632,32389920,32390144,32391712,32391936,32392992,32393216,
32393504,32393728,32394016,32394240,32394528,32395264,32395552,32396032,32396320,32396544,32397088,
32397312,32397600,32397824,32398112,32398336,32398624,32398848,32399136,32399360,32399648,32400128,
32400416,32400640,32401184,32402176,32402464,32404224,32404512,32405504,32405792,32406784,32407072,
32407296,32407584,32410112,32410400,32414720,32416032,32416768,32417056,32418304,32418592,32422912,
32505872,32571456,32574736,32575488,32583440,32583680,32599056,32600576,32603664,32604160,32607760,
32608000,32608528,32611072,32615696,32630278,32636928,32637200,32641024,32643600,32643840,32648976,
32649216,32649744,32652032,32652304,32653312,32655632,32766724,32768016,32849408,32851472,32919552,
32931856,32964608,32994320,32997376,33019152,33030144,33033232,33034240,33048592,33050624,33053200,
33054720,33064976,33067008,33074704,33095680,33098768,33110784,33111056,33113600,33113872,33226752,
33288256,33290752,33292304,33553920,33554464,44490752,44498976,45562368,45563936,45620736,45621280,
47096320,47099936,49012992,49807392,49946112,50331680,51596032,51597344,52670464,234881027,
234889220,234913795,234946564,235008003,235929600,
};
// The property bits of U+0000..U+007F, looked up directly.
static const uint8_t fat5__uc_prop_ascii[128] = {
3,3,3,3,3,3,3,3,3,131,130,131,131,129,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,128,0,0,0,0,0,0,0,0,0,0,
0,0,0,0,0,64,64,64,64,64,64,64,64,64,64,0,0,0,0,0,0,0,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,
32,32,32,32,32,32,32,32,32,32,32,0,0,0,0,0,0,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,32,
32,32,32,32,32,32,32,32,0,0,0,0,3,
};
// Word characters (Alphabetic, M*, Nd, Pc, Join_Control) by range: start << 8 | 1 or 0.
static const uint32_t fat5__uc_word[1543] = {
0,12289,14848,16641,23296,24321,24576,24833,31488,43521,43776,46337,46592,47617,47872,49153,55040,
55297,63232,63489,180736,181761,184832,188417,189696,191489,191744,192001,192256,196609,226560,
226817,227328,227841,228864,229121,229376,230913,231168,231425,232192,232449,232704,232961,238080,
238337,259584,259841,295424,295681,339968,340225,349952,350465,350720,352257,362752,364801,376320,
376577,376832,377089,377600,377857,378368,378625,378880,380929,387840,388865,389888,397313,400128,
401409,420352,421377,447488,447745,449792,450305,452864,453121,457984,458497,458752,462849,477952,
478465,504320,507905,521728,522753,523008,523521,523776,524289,536064,540673,547840,548865,551680,
552961,559104,559361,560896,563201,582144,582401,615424,615937,618496,618753,623616,623873,625920,
626433,626944,627457,633088,633345,635136,635393,635648,636417,637440,637953,640256,640769,641280,
641793,642816,644865,645120,646145,646656,646913,648192,648705,651776,654337,654592,654849,655104,
655617,656384,656641,658176,659201,659712,660225,665856,666113,667904,668161,668672,668929,669440,
669697,670208,670721,670976,671233,672512,673537,674048,674561,675328,676097,676352,678145,679168,
679425,679680,681473,685568,688385,689152,689409,691712,691969,692736,692993,698624,698881,700672,
700929,701440,701697,702976,703489,706048,706305,707072,707329,708096,708609,708864,712705,713728,
714241,716800,719105,720896,721153,721920,722177,724224,724737,725248,725761,731392,731649,733440,
733697,734208,734465,735744,736257,738560,739073,739584,740097,740864,742657,743424,744449,744960,
745217,746496,747009,749568,749825,750080,754177,754688,754945,756480,757249,758016,758273,759296,
760065,760576,760833,761088,761345,761856,762625,763136,763905,764672,765441,768512,769537,770816,
771585,772352,772609,773632,774145,774400,775937,776192,779777,782336,786433,789760,790017,790784,
791041,796928,797185,801280,801793,804096,804353,805120,805377,806400,808193,808704,808961,809728,
810241,810496,811009,812032,812545,815104,819201,820224,820481,822528,822785,823552,823809,829696,
829953,832512,832769,834048,834561,836864,837121,837888,838145,839168,840961,841472,843009,843520,
843777,844800,845313,847872,848129,848896,851969,855296,855553,856320,856577,869632,869889,870656,
870913,872192,873473,874496,876289,877568,878081,880640,883201,884736,884993,885760,886017,890624,
891393,897536,897793,900096,900353,900608,901121,902912,903681,903936,904961,906496,906753,907008,
907265,909312,910849,913408,913921,914432,917761,932608,933889,937728,937985,940544,950529,951040,
951297,951552,951809,953088,953345,959488,959745,960000,960257,966144,966657,967936,968193,968448,
968705,970496,970753,973312,973825,974848,983041,983296,989185,989696,991233,993792,996609,996864,
997121,997376,997633,997888,998913,1001472,1001729,1010944,1011969,1017088,1017345,1021952,1022209,
1031424,1033729,1033984,1048577,1067520,1069057,1089024,1089537,1099264,1099521,1099776,1101057,
1101312,1101825,1112832,1113089,1198336,1198593,1199616,1200129,1201920,1202177,1202432,1202689,
1203712,1204225,1214720,1214977,1216000,1216513,1224960,1225217,1226240,1226753,1228544,1228801,
1229056,1229313,1230336,1230849,1234688,1234945,1249536,1249793,1250816,1251329,1268480,1268993,
1269760,1277953,1282048,1286145,1308160,1308673,1310208,1310977,1469696,1470209,1474560,1474817,
1481472,1482753,1501952,1502721,1505536,1507329,1512960,1515265,1520896,1523713,1528832,1531905,
1535232,1535489,1536256,1536513,1537024,1540097,1561600,1562369,1562624,1563649,1564160,1564673,
1567232,1575681,1576448,1576705,1579520,1581057,1603840,1605633,1616640,1617921,1635840,1638401,
1646336,1646593,1649664,1650689,1653760,1656321,1666560,1667073,1668352,1671169,1682432,1683457,
1690112,1691649,1694208,1703937,1711104,1712129,1728256,1728513,1735936,1736449,1739264,1740801,
1743360,1746689,1746944,1748993,1756928,1769473,1789184,1789953,1792512,1796865,1799168,1802241,
1831936,1835009,1849344,1851393,1853952,1854721,1867264,1867777,1870080,1871873,1882880,1883393,
1884160,1888257,1889024,1889281,1899264,1900545,2037248,2037761,2039296,2039809,2049536,2050049,
2051584,2052097,2054144,2054401,2054656,2054913,2055168,2055425,2055680,2055937,2063872,2064385,
2077952,2078209,2080000,2080257,2080512,2081281,2082048,2082305,2084096,2084865,2085888,2086401,
2087936,2088961,2092288,2093569,2094336,2094593,2096384,2100225,2100736,2113281,2113792,2118657,
2118912,2126081,2126336,2129665,2129920,2134017,2137344,2150401,2158848,2163201,2163456,2164481,
2164736,2165249,2167808,2168065,2168320,2169089,2170368,2171905,2172160,2172417,2172672,2172929,
2173184,2173441,2174464,2174721,2177536,2178049,2179072,2180353,2181632,2182657,2182912,2187265,
2197760,2405889,2419200,2883585,2942208,2943745,2946048,2949121,2958848,2959105,2959360,2960641,
2960896,2961409,2975744,2977537,2977792,2981633,2987776,2990081,2991872,2992129,2993920,2994177,
2995968,2996225,2998016,2998273,3000064,3000321,3002112,3002369,3004160,3004417,3006208,3006465,
3014656,3026689,3026944,3147009,3147776,3154177,3158016,3158273,3159552,3160065,3161344,3162369,
3184384,3184897,3185408,3185921,3186688,3186945,3209984,3210241,3211264,3212545,3223552,3223809,
3247872,3252225,3260416,3272705,3276800,3407873,5095424,5111809,10784000,10801153,10812928,
10813441,10882304,10883073,10890240,10895361,10908416,10908673,10911232,10911489,10940928,10950401,
10952704,10953217,10979584,10980097,10996480,10997761,10998272,10998529,10998784,10999041,11000320,
11006465,11020288,11021313,11021568,11026433,11039744,11042817,11060736,11063297,11065856,11067393,
11073536,11074305,11074560,11074817,11087360,11087873,11097088,11100161,11107584,11108353,11124992,
11128577,11131392,11132929,11140864,11141121,11155200,11157505,11161088,11161601,11164160,11165697,
11171584,11172353,11191040,11197185,11197952,11198465,11202560,11203073,11204352,11206913,11208448,
11208961,11210496,11211009,11212544,11214849,11216640,11216897,11218688,11218945,11229952,11230209,
11233792,11235329,11266816,11267073,11267584,11268097,11270656,11272193,14132224,14135297,14141184,
14142209,14154752,16318465,16412160,16412673,16439808,16449537,16451328,16454401,16455680,16456961,
16460032,16460289,16463616,16463873,16465152,16465409,16465664,16465921,16466432,16466689,16467200,
16467457,16495104,16503553,16596480,16601089,16617472,16617985,16631808,16642049,16645120,16646145,
16650240,16654337,16658432,16659201,16659712,16665857,16666624,16674817,16676096,16676353,16710912,
16715777,16718336,16720129,16726784,16727809,16728064,16728321,16734976,16737793,16760576,16761345,
16762880,16763393,16764928,16765441,16766976,16767489,16768256,16777217,16780288,16780545,16787200,
16787457,16792320,16792577,16793088,16793345,16797184,16797697,16801280,16809985,16841472,16859137,
16872704,16907521,16907776,16941057,16948480,16949249,16961792,16965633,16965888,16973825,16982016,
16985345,16993024,16994305,17005312,17006593,17014272,17014785,17024000,17025025,17027072,17027329,
17028608,17039361,17079808,17080321,17082880,17084417,17093632,17094657,17103872,17104897,17115136,
17117185,17130496,17133569,17136384,17136641,17140480,17140737,17142528,17142785,17143296,17143553,
17146368,17146625,17150464,17150721,17152512,17152769,17153280,17170433,17250048,17252353,17257984,
17260545,17262592,17268737,17270272,17270529,17281280,17281537,17283840,17301505,17303040,17303553,
17303808,17304065,17315328,17315585,17316096,17316865,17317120,17317633,17323520,17326081,17331968,
17334273,17342208,17358849,17363712,17363969,17364480,17367041,17372672,17375233,17381888,17399809,
17414144,17415681,17416192,17432577,17433600,17433857,17434368,17435649,17437696,17437953,17438720,
17438977,17446400,17446913,17447680,17448705,17448960,17457153,17464576,17465345,17472768,17481729,
17483776,17484033,17491712,17498113,17511936,17514497,17520128,17522689,17527552,17530881,17535488,
17563649,17582336,17596417,17609472,17612801,17625856,17629185,17639424,17641473,17644032,17727489,
17738240,17738497,17739008,17739777,17740288,17759489,17767680,17770241,17770496,17772545,17780992,
17788929,17794560,17805313,17810688,17817601,17823488,17825793,17843968,17851905,17856000,17858305,
17873664,17875457,17875712,17879041,17885440,17887233,17889792,17891329,17904896,17905153,17907712,
17908737,17909760,17911809,17921024,17921537,17921792,17924097,17941760,17942785,17943808,17944065,
17947392,17947649,17947904,17956865,17961472,17961729,17971200,17972737,17973760,17989633,17991424,
17991681,17991936,17992193,17993216,17993473,17997312,17997569,18000128,18001921,18017024,18018305,
18020864,18022401,18023424,18023681,18025728,18026241,18026752,18027265,18032896,18033153,18034944,
18035201,18035712,18035969,18037248,18037505,18040064,18040577,18041088,18041601,18042368,18042881,
18043136,18044673,18044928,18046209,18048000,18048513,18050304,18051073,18052352,18087937,18107136,
18108417,18110976,18112001,18113024,18120705,18138624,18138881,18139136,18141185,18143744,18186241,
18200064,18200577,18202880,18208769,18210304,18219009,18235648,18236417,18236672,18239489,18242048,
18251777,18266368,18268161,18270720,18284545,18291456,18291969,18295808,18296833,18299392,18300929,
18302720,18350081,18365184,18391041,18409984,18415361,18417408,18417921,18418176,18418689,18420736,
18420993,18421504,18421761,18429440,18429697,18430208,18430721,18433024,18436097,18438656,18456577,
18458624,18459137,18470912,18471425,18473472,18473729,18474240,18481153,18497280,18499329,18499584,
18501633,18520576,18521345,18521600,18526209,18544896,18612225,18614528,18614785,18626304,18626561,
18628864,18632705,18635264,18641409,18649088,18649601,18655232,18655489,18659072,18677761,18679552,
18679809,18680320,18680577,18691840,18692609,18692864,18693121,18693632,18693889,18696192,18698241,
18700800,18702337,18703872,18704129,18704640,18704897,18714368,18714625,18715136,18715393,18716928,
18718721,18721280,18800641,18806528,18808833,18813184,18813441,18823936,18824705,18825984,18829313,
18831872,18853889,18854144,18874369,19110400,19136513,19164928,19169281,19219456,19894273,19919104,
19922945,20197376,20201473,20207104,21233665,21382912,23592961,23738624,23740417,23748352,23748609,
23751168,23752705,23772928,23773185,23775744,23777281,23784960,23785473,23786752,23789569,23803648,
23805953,23806976,23810049,23812608,23814913,23820288,23821569,23826432,24002561,24018944,24051713,
24070912,24071937,24086528,24088321,24092672,24109057,24109568,24109825,24110336,24113153,24113664,
24117249,25688064,25690113,26007040,26017793,26020096,28307457,28308480,28308737,28310528,28310785,
28311296,28311553,28386048,28389889,28390144,28397569,28398336,28398849,28399104,28402689,28403712,
28405761,28507136,29097985,29125376,29126657,29129984,29130753,29133056,29134849,29137408,29138177,
29138688,30343169,30354944,30355457,30361344,30500097,30501376,30502145,30503680,30505729,30507776,
30508289,30510080,30517761,30518784,30556673,30557440,30670849,30692608,30692865,30711040,30711297,
30711808,30712321,30712576,30713089,30713600,30714113,30715136,30715393,30718464,30718721,30718976,
30719233,30721024,30721281,30737920,30738177,30739200,30739713,30741760,30742017,30743808,30744065,
30751232,30751489,30752512,30752769,30754048,30754305,30754560,30755329,30757120,30757377,30844416,
30844929,30851328,30851585,30857984,30858241,30866176,30866433,30872832,30873089,30881024,30881281,
30887680,30887937,30895872,30896129,30902528,30902785,30910720,30910977,30917376,30917633,30919680,
30920193,30932992,31064065,31078144,31079169,31091968,31094017,31094272,31097857,31098112,31103745,
31105024,31105281,31109120,31391745,31399680,31401217,31402752,31457281,31459072,31459329,31463680,
31464193,31465984,31466241,31466752,31467009,31468288,31469569,31485440,31493889,31494144,31522817,
31534336,31535105,31538688,31539201,31541760,31542785,31543040,31625217,31633152,31637505,31652352,
31772673,31783424,31973377,31975168,31975425,31976448,31976705,31977216,31977473,31981312,31981569,
32032000,32034817,32036608,32047105,32066560,32067585,32070144,32374785,32375808,32376065,32382976,
32383233,32383744,32384001,32384256,32384769,32385024,32385281,32387840,32388097,32389120,32389377,
32389632,32389889,32390144,32391681,32391936,32392961,32393216,32393473,32393728,32393985,32394240,
32394497,32395264,32395521,32396032,32396289,32396544,32397057,32397312,32397569,32397824,32398081,
32398336,32398593,32398848,32399105,32399360,32399617,32400128,32400385,32400640,32401153,32402176,
32402433,32404224,32404481,32405504,32405761,32406784,32407041,32407296,32407553,32410112,32410369,
32414720,32416001,32416768,32417025,32418304,32418561,32422912,32583681,32590336,32591873,32598528,
32600065,32606720,33288193,33290752,33554433,44490752,44498945,45562368,45563905,45620736,45621249,
47096320,47099905,49012992,49807361,49946112,50331649,51596032,51597313,52670464,234946561,
235008000,
};
// Canonical_Combining_Class by range: start << 8 | class.
static const uint32_t fat5__uc_ccc[581] = {
0,196838,202216,202460,203496,203736,203996,205258,205788,206794,207324,209921,211420,212454,
214512,214758,215004,215782,216540,216832,217318,218076,219110,219368,219612,220134,220393,220650,
221161,221418,221929,222182,225280,295910,296960,365020,365286,366300,366566,367326,367580,367846,
369372,370918,371420,371686,372190,372452,372710,372746,373003,373260,373517,373774,374031,374288,
374545,374802,375059,375572,375829,376086,376320,376599,376832,377112,377369,377600,378086,378332,
378368,378642,378880,397542,399390,399647,399904,400128,412443,412700,412957,413214,413471,413728,
413985,414242,414694,415196,415718,416988,417254,417756,417792,421923,422144,448230,449792,450534,
451548,451814,451840,452582,452864,453340,453606,454108,454144,463140,463360,471270,471516,471782,
472284,472550,473052,473830,474076,474598,474844,475110,475868,476134,476380,476646,476892,477158,
477404,477670,477952,519142,520924,521190,521216,523740,523776,530150,530944,531430,533504,533990,
534528,535014,536064,547292,547840,563430,563676,564454,565248,576230,577500,578790,582144,582620,
582886,583388,583654,584156,584422,585180,585755,586012,586269,586726,587484,587750,588252,588774,
589824,605191,605440,609545,609792,610790,611036,611302,611584,637959,638208,642313,642560,655078,
655104,670727,670976,675081,675328,703495,703744,707849,708096,736263,736512,740617,740864,773385,
773632,801799,802048,806153,806400,808276,808539,808704,834567,834816,838921,839168,867081,867584,
871689,871936,903689,903936,931943,932361,932608,936043,936960,964726,965129,965376,968826,969728,
989404,989696,996828,996864,997340,997376,997848,997888,1012097,1012354,1012480,1012868,1012992,
1014402,1015296,1015938,1016064,1016550,1016841,1017088,1017574,1017856,1033948,1033984,1062663,
1062912,1063177,1063680,1084892,1084928,1269222,1269760,1512457,1512960,1520649,1520896,1561097,
1561344,1564134,1564160,1616356,1616384,1653214,1653478,1653724,1653760,1710054,1710300,1710336,
1728521,1728768,1734118,1735936,1736668,1736704,1749222,1750492,1752038,1752540,1752576,1753052,
1753574,1754076,1754598,1755868,1756134,1756928,1782791,1783040,1786889,1787136,1797094,1797340,
1797606,1799168,1813001,1813504,1828359,1828608,1831433,1831936,1849095,1849344,1888486,1889024,
1889281,1889756,1891046,1891548,1892582,1892608,1892865,1894656,1895900,1895936,1897702,1897728,
1898726,1899008,1949926,1950428,1950694,1952476,1952742,1953258,1953494,1953756,1953994,1954278,
1963752,1964004,1964508,1964762,1965030,1965289,1965532,1965798,1966044,1966080,2150630,2150913,
2151654,2152449,2153446,2153728,2154982,2155008,2155777,2156518,2156764,2157030,2157057,2157788,
2158822,2158848,2944998,2945536,2981641,2981888,3006694,3014656,3156698,3156964,3157224,3157470,
3157728,3158016,3184904,3185408,10907622,10907648,10908902,10911232,10919654,10919936,10940646,
10940928,11011593,11011840,11021321,11021568,11060233,11060480,11067622,11072000,11086812,11087360,
11096841,11097088,11121415,11121664,11124745,11124992,11186406,11186432,11186918,11187420,11187456,
11188198,11188480,11189990,11190272,11190758,11190784,11204105,11204352,11267337,11267584,16457242,
16457472,16654566,16656348,16658150,16658432,16907740,16907776,16965852,16965888,17004262,17005312,
17436124,17436160,17436646,17436672,17447142,17447169,17447644,17447680,17448713,17448960,17491430,
17491676,17491712,17638630,17639424,17738726,17739008,17759708,17760256,17778396,17778918,17779676,
17779942,17780188,17780992,17793766,17794012,17794278,17794524,17794560,17843721,17843968,17854473,
17854720,17858313,17858560,17873161,17873415,17873664,17891558,17892096,17904393,17904896,17920775,
17921024,17940489,17940736,17943047,17943296,17970441,17970695,17970944,18016519,18016777,18017024,
18037511,18038016,18042121,18042368,18048742,18050304,18051302,18052352,18104841,18105088,18105863,
18106112,18112230,18112256,18137609,18137863,18138112,18202377,18202631,18202880,18235145,18235392,
18265609,18265863,18266112,18295561,18295808,18364681,18364935,18365184,18431241,18431744,18432775,
18433024,18472969,18473216,18494473,18494720,18499337,18499584,18520329,18520576,18628361,18628608,
18694663,18694912,18695177,18695680,18716425,18716672,18825481,18825984,23785473,23786752,23802086,
23803648,24113158,24113664,29138433,29138688,30500312,30500609,30501376,30502370,30502616,30503680,
30505948,30507776,30508518,30509788,30510080,30517990,30518784,30556902,30557440,31457510,31459072,
31459558,31463680,31464422,31465984,31466470,31466752,31467238,31468288,31494118,31494144,31535334,
31536896,31633126,31633152,31648998,31649792,31780072,31780572,31780838,31780864,32035036,32036608,
32064742,32066055,32066304,
};
// Canonical decomposition mappings (one level, as in UnicodeData.txt; Hangul syllables are computed):
// start << 8 | (count - 1) for `count` consecutive code points, sorted; the value with the same
// index is v << 5 | len: for len 1 the code point start+k maps to v+k, else to
// fat5__uc_dec_pool[v + k*len ..][0 .. len).
static const uint32_t fat5__uc_dec_key[1253] = {
49157,50952,53509,55556,57349,59144,61701,63748,65296,70163,75784,78851,80133,82693,84997,87057,
92182,106497,110337,118031,122373,124426,128001,129059,138753,140813,212993,213760,214016,226304,
228864,230657,231168,231426,232448,232962,240134,248324,250625,262145,262912,263936,265218,268544,
276736,282625,283392,284416,285698,292353,311553,315395,316929,317957,320005,322059,325633,401924,
442368,442880,447232,600320,602368,603136,612359,641793,646145,646912,668416,669184,678146,679424,
739328,740097,744449,758784,772610,804864,835584,837377,838145,870914,907776,908290,1000192,
1002752,1004032,1005312,1006592,1009920,1012480,1012993,1013760,1016064,1020672,1023232,1024512,
1025792,1027072,1030400,1058304,1771008,1771520,1772032,1772544,1773056,1774080,1784576,1785088,
1785857,1786624,1966233,2005760,2007129,2031637,2037765,2039845,2050053,2052103,2054400,2054912,
2055424,2055953,2060544,2060800,2061056,2061312,2061568,2061824,2062080,2062336,2062592,2062848,
2063104,2063360,2063616,2064436,2078212,2079488,2079744,2080256,2081027,2082306,2083072,2083328,
2083584,2083846,2085632,2086404,2087680,2088197,2089728,2089990,2091776,2092033,2092544,2092800,
2093570,2094594,2095360,2095616,2095872,2096128,2096384,2097153,2172416,2173440,2173696,2202113,
2207232,2215170,2229248,2230528,2231296,2237440,2237952,2244864,2245632,2246400,2246912,2252800,
2253312,2256132,2257921,2258945,2260993,2262017,2263041,2272259,2285571,2288131,2304257,2808832,
3165184,3165696,3166208,3166720,3167232,3167744,3168256,3168768,3169280,3169792,3170304,3170816,
3171584,3172096,3172608,3174401,3175169,3175937,3176705,3177473,3183616,3186176,3189760,3190272,
3190784,3191296,3191808,3192320,3192832,3193344,3193856,3194368,3194880,3195392,3196160,3196672,
3197184,3198977,3199745,3200513,3201281,3202049,3208192,3208963,3210752,16318464,16318720,16318976,
16319232,16319488,16319744,16320000,16320256,16320512,16320768,16321024,16321280,16321536,16321792,
16322048,16322304,16322560,16322816,16323072,16323328,16323584,16323840,16324096,16324352,16324608,
16324864,16325120,16325376,16325632,16325888,16326144,16326400,16326656,16326912,16327168,16327424,
16327680,16327936,16328192,16328448,16328704,16328960,16329216,16329472,16329728,16329984,16330240,
16330496,16330752,16331008,16331264,16331520,16331776,16332032,16332288,16332544,16332800,16333056,
16333312,16333568,16333824,16334080,16334336,16334592,16334848,16335104,16335360,16335616,16335872,
16336128,16336384,16336640,16336896,16337152,16337408,16337664,16337920,16338176,16338432,16338688,
16338944,16339200,16339456,16339712,16339968,16340224,16340480,16340736,16340992,16341248,16341504,
16341760,16342016,16342272,16342528,16342784,16343040,16343296,16343552,16343808,16344064,16344320,
16344576,16344832,16345088,16345344,16345600,16345856,16346112,16346368,16346624,16346880,16347136,
16347392,16347648,16347904,16348160,16348416,16348672,16348928,16349184,16349440,16349696,16349952,
16350208,16350464,16350720,16350976,16351232,16351488,16351744,16352000,16352256,16352512,16352768,
16353024,16353280,16353536,16353792,16354048,16354304,16354560,16354816,16355072,16355328,16355584,
16355840,16356096,16356352,16356608,16356864,16357120,16357376,16357632,16357888,16358144,16358400,
16358656,16358912,16359168,16359424,16359680,16359936,16360192,16360448,16360704,16360960,16361216,
16361472,16361728,16361984,16362240,16362496,16362752,16363008,16363264,16363520,16363776,16364032,
16364288,16364544,16364800,16365056,16365312,16365568,16365824,16366080,16366336,16366592,16366848,
16367104,16367360,16367616,16367872,16368128,16368384,16368640,16368896,16369152,16369408,16369664,
16369920,16370176,16370432,16370688,16370944,16371200,16371456,16371712,16371968,16372224,16372480,
16372736,16372992,16373248,16373504,16373760,16374016,16374272,16374528,16374784,16375040,16375296,
16375552,16375808,16376064,16376320,16376576,16376832,16377088,16377344,16377600,16377856,16378112,
16378368,16378624,16378880,16379136,16379392,16379648,16379904,16380160,16380416,16380672,16380928,
16381184,16381440,16381696,16381952,16382208,16382464,16382720,16382976,16383232,16383488,16383744,
16384000,16384256,16384512,16384768,16385024,16385280,16385536,16385792,16386048,16386304,16386560,
16386816,16387072,16387328,16388096,16388608,16389376,16389632,16389888,16390144,16390400,16390656,
16390912,16391168,16391424,16391680,16392192,16392704,16393472,16393728,16394752,16395008,16395264,
16395520,16395776,16396032,16396288,16396544,16396800,16397056,16397312,16397568,16397824,16398080,
16398336,16398592,16398848,16399104,16399360,16399616,16399872,16400128,16400384,16400640,16400896,
16401152,16401408,16401664,16401920,16402176,16402432,16402688,16402944,16403200,16403456,16403712,
16403968,16404224,16404480,16404736,16404993,16405504,16405760,16406016,16406272,16406528,16406784,
16407040,16407296,16407552,16407808,16408064,16408320,16408576,16408832,16409088,16409344,16409600,
16409856,16410112,16410368,16410624,16410880,16411136,16411392,16411648,16411904,16412672,16412928,
16413184,16413440,16413696,16413952,16414208,16414464,16414720,16414976,16415232,16415488,16415744,
16416000,16416256,16416512,16416768,16417024,16417280,16417536,16417792,16418048,16418304,16418560,
16418816,16419072,16419328,16419584,16419840,16420096,16420352,16420608,16420864,16421120,16421376,
16421632,16421888,16422144,16422400,16422656,16422912,16423168,16423424,16423680,16423936,16424192,
16424448,16424704,16424960,16425216,16425472,16425728,16425984,16426240,16426496,16426752,16427008,
16427264,16427520,16427776,16428032,16428288,16428544,16428800,16429056,16429312,16429568,16429824,
16430080,16430336,16430592,16430848,16431104,16431360,16431616,16431872,16432128,16432384,16432640,
16432896,16433152,16433408,16433664,16433920,16434176,16434432,16434688,16434944,16435200,16435456,
16435712,16435968,16436224,16436480,16436736,16436992,16437248,16437504,16437760,16438016,16438272,
16438528,16438784,16439040,16439296,16439552,16456960,16457472,16460300,16463876,16465408,16465921,
16466689,16467464,17865216,17865728,17869568,17903105,18041601,18135809,18136576,18201089,18429952,
30498310,30522117,49807360,49807616,49807872,49808128,49808384,49808640,49808896,49809152,49809408,
49809664,49809920,49810176,49810432,49810688,49810944,49811200,49811456,49811712,49811968,49812224,
49812480,49812736,49812992,49813248,49813504,49813760,49814016,49814272,49814528,49814784,49815040,
49815296,49815552,49815808,49816064,49816320,49816576,49816832,49817088,49817344,49817600,49817857,
49818368,49818624,49818880,49819136,49819392,49819648,49819904,49820160,49820416,49820672,49820928,
49821184,49821440,49821696,49821952,49822208,49822464,49822720,49822976,49823232,49823488,49823744,
49824000,49824256,49824512,49824768,49825024,49825280,49825536,49825792,49826048,49826304,49826560,
49826816,49827072,49827328,49827584,49827840,49828096,49828352,49828608,49828864,49829120,49829376,
49829632,49829888,49830144,49830400,49830656,49830912,49831168,49831424,49831680,49831936,49832192,
49832448,49832704,49832960,49833216,49833472,49833728,49833984,49834240,49834496,49834752,49835008,
49835264,49835520,49835776,49836032,49836288,49836544,49836800,49837056,49837312,49837568,49837824,
49838080,49838336,49838592,49838848,49839104,49839360,49839616,49839872,49840128,49840385,49840896,
49841152,49841408,49841664,49841920,49842176,49842432,49842688,49842944,49843200,49843456,49843712,
49843968,49844224,49844480,49844736,49844992,49845248,49845504,49845760,49846016,49846272,49846528,
49846784,49847040,49847296,49847552,49847808,49848064,49848320,49848576,49848832,49849088,49849344,
49849600,49849856,49850112,49850368,49850624,49850880,49851136,49851392,49851648,49851904,49852160,
49852416,49852672,49852928,49853184,49853440,49853696,49853952,49854208,49854464,49854720,49854976,
49855232,49855488,49855744,49856000,49856256,49856512,49856768,49857024,49857280,49857536,49857792,
49858048,49858304,49858560,49858816,49859072,49859328,49859584,49859840,49860096,49860352,49860608,
49860864,49861120,49861376,49861632,49861888,49862144,49862400,49862656,49862912,49863168,49863424,
49863680,49863936,49864192,49864448,49864704,49864960,49865216,49865472,49865728,49865984,49866240,
49866496,49866752,49867008,49867264,49867520,49867776,49868032,49868288,49868544,49868800,49869056,
49869312,49869568,49869824,49870081,49870592,49870848,49871104,49871360,49871616,49871872,49872128,
49872384,49872640,49872896,49873152,49873408,49873664,49873920,49874176,49874432,49874688,49874944,
49875200,49875456,49875712,49875968,49876224,49876480,49876736,49876992,49877248,49877504,49877760,
49878016,49878272,49878528,49878784,49879040,49879296,49879552,49879808,49880064,49880320,49880576,
49880832,49881088,49881344,49881600,49881856,49882112,49882368,49882624,49882880,49883136,49883392,
49883648,49883904,49884160,49884416,49884672,49884928,49885184,49885440,49885696,49885952,49886208,
49886464,49886720,49886976,49887232,49887488,49887744,49888000,49888256,49888512,49888768,49889024,
49889280,49889536,49889792,49890048,49890304,49890561,49891072,49891328,49891584,49891840,49892096,
49892352,49892608,49892864,49893120,49893376,49893632,49893888,49894144,49894400,49894656,49894912,
49895168,49895424,49895680,49895936,49896192,49896448,49896704,49896960,49897216,49897472,49897728,
49897984,49898240,49898496,49898752,49899008,49899264,49899520,49899776,49900032,49900288,49900544,
49900800,49901056,49901312,49901568,49901824,49902080,49902336,49902592,49902848,49903104,49903360,
49903616,49903872,49904128,49904384,49904640,49904896,49905152,49905408,49905664,49905920,49906176,
49906432,49906688,49906944,49907200,49907456,49907712,49907968,49908224,49908480,49908736,49908992,
49909248,49909504,49909760,49910016,49910272,49910528,49910784,49911040,49911296,49911552,49911808,
49912064,49912320,49912576,49912832,49913088,49913344,49913600,49913856,49914112,49914368,49914624,
49914880,49915136,49915392,49915648,49915904,49916160,49916416,49916672,49916928,49917184,49917440,
49917696,49917952,49918208,49918464,49918720,49918976,49919232,49919488,49919744,49920000,49920256,
49920512,49920768,49921024,49921280,49921536,49921792,49922048,49922304,49922560,49922816,49923072,
49923328,49923584,49923840,49924096,49924352,49924608,49924864,49925120,49925376,49925632,49925888,
49926144,49926400,49926656,49926912,49927168,49927424,49927680,49927936,49928192,49928448,49928704,
49928960,49929216,49929472,49929728,49929984,49930240,49930496,49930752,49931008,49931264,49931520,
49931776,49932032,49932289,49932800,49933056,49933312,49933568,49933824,49934080,49934336,49934592,
49934848,49935104,49935360,49935616,49935872,49936128,49936384,49936640,49936896,49937152,49937408,
49937664,49937920,49938176,49938432,49938688,49938944,49939200,49939456,49939712,49939968,49940224,
49940480,49940736,49940992,49941248,49941504,49941760,49942016,49942272,49942528,49942784,49943040,
49943296,49943552,49943808,49944064,49944320,49944576,49944832,49945088,49945344,49945600,49945856,
};
// Values of fat5__uc_dec_key.
static const uint32_t fat5__uc_dec_val[1253] = {
2,386,962,1346,1666,2050,2626,3010,3330,4418,5698,6274,6530,6914,7298,7682,8834,10306,10434,10562,
11586,11970,12674,12802,15106,15234,24577,25185,16130,22305,1889,16194,5857,16322,16514,16578,
16770,17218,17538,17666,17794,17858,17922,18114,18178,18242,18370,18434,18498,18690,18818,18946,
19202,19330,19714,20098,20866,20994,21314,21378,21442,21506,21570,21634,21698,22210,22338,22466,
22530,22594,22658,22850,22914,22978,23106,23234,23298,23490,23554,23618,23746,23874,24066,24130,
24322,24386,24450,24514,24578,24642,24706,24770,24898,24962,25026,25090,25154,25218,25282,25346,
25410,25474,25538,25602,25666,25730,25794,25858,25922,25986,26114,26178,36034,36098,41858,43266,
43650,46082,46466,46978,47042,47106,47170,30081,48322,30113,48386,30145,48450,30177,48514,31105,
48578,31137,48642,31169,48706,52098,28865,52418,30497,52482,52738,28929,52930,28961,52994,29185,
53442,28993,53762,30209,54146,29121,54594,28833,3073,54722,54914,29057,55106,29153,55170,5761,
262209,29985,2401,6305,55234,55362,55426,55618,55682,55746,55810,55874,55938,56002,56066,56130,
56194,56258,56322,56642,56770,56898,57026,57154,57282,57538,57794,393473,58050,58114,58178,58242,
58306,58370,58434,58498,58562,58626,58690,58754,58818,58882,58946,59010,59074,59202,59330,59458,
59586,59714,59778,59842,59906,59970,60034,60098,60162,60226,60290,60354,60418,60482,60546,60610,
60674,60738,60802,60930,61058,61186,61314,61442,61506,61762,1149185,843393,1169729,1153281,907809,
640577,687265,1307521,1307521,731681,1194529,700641,731393,802497,970017,1044641,1099745,1111873,
1122049,1184225,868417,893793,924449,949185,1083297,1191233,1261089,643137,683681,876673,934753,
1099169,1295297,764417,916833,1096097,1125505,809249,1063681,1115105,776513,844513,896321,941953,
1186241,651457,669409,678849,825473,875105,934401,974049,1048609,1097921,1100673,1162721,1238593,
1273313,1294145,987521,995297,1029121,1079585,1204353,1298401,1137345,728033,778369,1018881,
1052609,937025,989505,1153089,1236705,727809,756801,868961,899905,909793,1025505,1033953,1231201,
678465,1053025,670593,670081,1000321,1030081,1080865,1232545,1142785,809441,868417,1138625,640801,
752865,787009,946401,962049,680673,991073,653281,783649,639393,891265,831233,1025089,686177,723905,
974881,1083681,1135937,882497,1177089,889089,810945,1072289,816129,961697,644545,666913,669985,
856097,1023201,1068513,1137217,1194465,679585,690241,732769,777601,833697,917441,992577,1226145,
1264961,1299169,1300929,676705,841921,880353,1174593,773761,799233,802817,824129,910433,928033,
954657,997697,1031809,1052129,1172673,1088961,1180769,1206593,672481,676961,694177,923905,1120321,
1135937,776481,786081,814945,882113,1017793,945825,646273,712481,752865,767809,787329,947777,
953633,1045313,1050817,1197697,1236673,1239297,1245953,651617,996801,1193601,1234689,793633,643265,
662337,753089,755681,832289,868417,932289,968769,1089409,1183617,1307041,839937,1230273,676129,
847713,851553,895009,906113,950561,961313,986465,1024513,1248193,667041,804289,1232641,656737,
762657,900417,1172801,782689,796801,852705,946401,1233089,673057,688609,756897,836193,846273,
857345,892065,950465,965697,1044257,1120737,1121313,1194369,1236033,681953,907073,689057,932353,
955137,1097537,1234017,1280737,1299425,848609,899425,1064193,1005921,1008641,1020481,940033,922401,
1141505,645121,1074881,673601,671969,775361,809569,1022657,749729,893889,841345,1173345,1116545,
1231265,1126753,776801,665601,702465,723777,839297,670657,943425,973121,993153,994241,994465,
995809,1239745,1021889,1046433,1098305,1138433,1181441,1187745,1252833,1253249,1254657,1291905,
1186753,1234657,652737,662753,666017,678177,679041,682529,701345,704705,707841,722945,726273,
756865,757185,791169,797953,799169,802369,829921,834625,840225,856225,896737,901953,910401,929217,
935265,951361,987681,993217,993569,993537,993793,993985,994209,995745,1001473,1003553,1013761,
1031809,1032481,1034273,1044033,1048737,1064353,1068833,1068833,1084129,1122817,1127105,1138721,
1140513,1153633,1155329,1177281,1181441,1236065,1245153,1247073,790177,4742593,1065729,640193,
669345,666881,651265,665761,667649,678113,679745,701345,699041,701217,703553,723777,726625,731265,
731777,740417,746753,776769,776993,781601,783777,793345,797121,794881,799169,797697,802369,804481,
817281,820097,821825,830145,839297,844513,844641,846529,880417,882497,895009,908129,907617,910401,
918465,929217,980193,935585,939489,943425,953889,958657,960353,967585,967649,973121,973665,974465,
977217,976897,989569,1005089,1013761,1019745,1026913,1031809,1042369,1048737,1075777,1080801,
1109793,1124385,1126593,1127105,1136609,1138433,1136993,1138721,1138625,1138081,1140513,1143105,
1155329,1173249,1183297,1192737,1199809,1232769,1236065,1239745,1244001,1245153,1245537,1247073,
1270337,1307521,4524353,4524161,4618913,488353,525057,526113,4868385,4954625,5233249,1304673,
1307073,61826,61890,61954,62786,63106,63170,63298,63426,64002,64066,64130,64194,64322,64450,64578,
64642,64770,64834,65282,640929,640769,641057,4203585,650241,652737,653153,655425,659265,660257,
662753,661985,431041,4245313,666017,666241,666753,667361,4236161,431905,666849,668065,4237665,
668385,668801,645505,669057,669345,5389281,671393,671841,433121,673633,673985,675393,675553,434849,
678113,678177,679041,679745,680097,680673,682273,682529,682817,683617,683937,684001,684001,684001,
4277633,921089,686401,687073,4287585,687457,687649,688321,693185,689921,690433,691457,693313,
696001,696833,698977,699489,700545,700545,701217,701793,702049,702529,713409,704705,713441,707105,
708225,671969,728513,719297,720513,721313,717153,722497,722465,726401,4365441,728641,728801,729281,
729921,730177,732225,4379905,4382017,736641,738145,738529,736001,740545,449985,450433,745729,
747457,747457,4405505,751713,752385,752865,753249,4416257,753633,753857,780897,754753,454689,
756737,757185,759809,758177,4439169,764001,4439233,765377,765281,765825,769057,460257,769953,
771329,772001,773409,461889,4468833,462721,775681,775777,775873,776513,5534273,778177,4482593,
4482593,1064993,779329,779329,465121,4609793,4995905,781377,781665,466017,783169,784801,785121,
786209,790561,468801,467841,791169,4512385,792801,796929,797057,797121,797057,798529,799169,800321,
799873,800225,801729,802369,802497,803329,803681,805793,808481,809601,813569,4546945,812961,810881,
814337,815201,818305,4554273,820289,817313,816417,476609,822561,823233,824225,823009,478593,829921,
830849,4587841,834657,843521,837921,484129,840225,483585,482433,668225,668321,843777,840577,
1054113,555809,844513,844641,844833,846785,846433,4618337,485665,851777,848033,854593,856225,
4623777,856513,852961,860801,488353,862273,865377,867649,873729,4641889,875361,492289,877601,
4658401,879233,494017,880193,881633,882497,4673953,4432225,4677441,887233,4691841,890849,891297,
888033,893633,894913,896737,895009,896289,896769,897185,4694977,894593,902625,904641,501345,907617,
907489,4708897,900897,912833,4713409,4714945,915649,919329,918465,918369,504513,919873,921505,
921313,923041,4236449,927905,4738145,930689,4748641,935169,935585,936449,4768001,937985,938657,
4777633,4784769,945985,946529,513409,947361,513793,513793,952545,953217,953889,954529,956737,
516961,959617,4818625,960449,4821569,962049,4469729,967169,4846625,4847361,4851841,524161,524545,
974465,4857441,4857409,4858657,4859489,975809,975841,977217,526113,979297,526529,529089,4883361,
985537,987521,989569,531553,4900033,993985,4903745,4905121,995809,998753,533985,1001473,1001793,
1001953,4927361,4936929,4936929,1007041,540737,4945249,1013953,1014049,541921,4952065,1022529,
545793,1023233,1023073,1024001,4976833,1027169,548897,1030369,1032257,1034401,550529,4998401,
4999393,551713,5004065,1044289,5007297,1045153,1048385,1048737,5020481,5022817,1051649,5027073,
1052161,4615137,555681,1054273,1056865,557409,1058753,743073,5043425,5043873,4616801,4617089,
1064993,1065089,1176513,560481,1069601,1069409,1069985,677473,1070625,1070689,1071009,1072321,
5072769,1072289,1074081,1076321,1078689,1074273,1079201,1080545,1084129,1075809,1079617,1079681,
1080193,5080769,5090657,5085857,566625,1089057,1089121,1090241,5142849,1092737,5105025,568225,
568353,5109281,5118529,568673,1100289,1100673,1101025,1101089,1103137,1102081,1106369,1104961,
1109793,1107201,1109345,1110209,572129,1113121,1114145,573217,1117185,1117281,5164257,1120993,
1121217,575137,1122113,431969,5182913,5188801,579521,579809,1135617,1138081,1143105,1149601,
5215489,1152353,1153057,1155937,1158881,5236193,4259969,1161569,1161089,1162753,4266945,1170049,
1173249,5290561,5291425,1184385,1187361,1188385,5301697,1188705,1197825,1202913,1200001,1212193,
1213089,5340993,1225057,602785,1226465,5353185,605377,1235041,767553,1238113,5384353,5391169,
609729,609985,1244161,5407041,611905,5411521,1245537,1245537,1246497,5420737,1252417,616033,
1254689,1258721,1259585,1261505,620993,5465601,1270337,1280001,1286049,629185,630177,1289441,
5511617,630529,5513377,5521857,5526049,1300321,633537,1302305,1302465,1302689,1303009,1303233,
1304417,5554177,
};
// Compatibility decomposition mappings (one level); same packing.
static const uint32_t fat5__uc_kdec_key[1480] = {
40960,43008,43520,44800,45569,46080,46336,47104,47360,47616,48130,78337,81665,84224,98048,115720,
127234,176128,176384,176640,176896,177152,177408,177664,177920,178176,186373,188416,188672,188928,
189184,189440,227840,230400,249856,250112,250368,251136,251392,258048,258305,259072,259328,260352,
362240,423171,930560,963328,973825,986112,1013504,1014016,1113088,1911808,1912064,1912320,1912833,
1913344,1913607,1915904,1916160,1916416,1916672,1916929,1917440,1917696,1917953,1918464,1918720,
1918977,1919488,1919745,1920256,1920768,1921024,1921280,1921536,1921792,1922049,1922560,1922817,
1923328,1923584,1923840,1924096,1924354,1925121,1925632,1925888,1926145,1926657,1927168,1927425,
1931264,1940224,1940480,1940736,1940992,1941248,1941504,1941760,1942016,1942272,1942530,1943296,
1943552,1943808,1944064,1944320,1944576,1944832,1945091,1946112,1946369,1946880,1947137,1947648,
1947905,1948416,1948674,1949440,2005504,2080000,2080513,2096640,2097664,2097920,2098176,2098432,
2098688,2098944,2099200,2099456,2099712,2101504,2103040,2106368,2106624,2106880,2109184,2110208,
2110464,2110976,2111232,2112512,2113024,2115330,2119424,2121472,2125824,2126080,2126853,2128384,
2128640,2128896,2129153,2129664,2129929,2132480,2132736,2132992,2133249,2134016,2134272,2134528,
2134784,2135040,2135296,2135555,2136576,2136833,2140160,2162689,2163200,2163456,2163969,2164480,
2164992,2165248,2165504,2165760,2166016,2166272,2166528,2166784,2167040,2167296,2167552,2168064,
2168320,2169090,2169856,2170112,2170880,2171136,2171392,2171904,2172928,2173953,2174720,2174977,
2175744,2176000,2176259,2177280,2177792,2178048,2178304,2178560,2178816,2179072,2180352,2180609,
2181121,2183169,2183680,2183947,2187008,2187264,2187520,2187776,2188032,2188288,2188544,2188800,
2189056,2189312,2189568,2189824,2190080,2190336,2190593,2191104,2191360,2191616,2191872,2192128,
2192384,2192640,2192896,2193152,2193408,2193664,2193920,2194176,2194432,2194689,2195200,2197760,
2239488,2239744,2240256,2240512,2383880,2386186,2389000,2391306,2394120,2396452,2405913,2412569,
2419200,2755584,2782208,2782464,2782720,2915328,2915584,2977536,3055360,3076864,3080192,3080448,
3080704,3080960,3081216,3081472,3081728,3081984,3082240,3082496,3082752,3083008,3083264,3083520,
3083776,3084032,3084288,3084544,3084800,3085056,3085312,3085568,3085824,3086080,3086336,3086592,
3086848,3087104,3087360,3087616,3087872,3088128,3088384,3088640,3088896,3089152,3089408,3089664,
3089920,3090176,3090432,3090688,3090944,3091200,3091456,3091712,3091968,3092224,3092480,3092736,
3092992,3093248,3093504,3093760,3094016,3094272,3094528,3094784,3095040,3095296,3095552,3095808,
3096064,3096320,3096576,3096832,3097088,3097344,3097600,3097856,3098112,3098368,3098624,3098880,
3099136,3099392,3099648,3099904,3100160,3100416,3100672,3100928,3101184,3101440,3101696,3101952,
3102208,3102464,3102720,3102976,3103232,3103488,3103744,3104000,3104256,3104512,3104768,3105024,
3105280,3105536,3105792,3106048,3106304,3106560,3106816,3107072,3107328,3107584,3107840,3108096,
3108352,3108608,3108864,3109120,3109376,3109632,3109888,3110144,3110400,3110656,3110912,3111168,
3111424,3111680,3111936,3112192,3112448,3112704,3112960,3113216,3113472,3113728,3113984,3114240,
3114496,3114752,3115008,3115264,3115520,3115776,3116032,3116288,3116544,3116800,3117056,3117312,
3117568,3117824,3118080,3118336,3118592,3118848,3119104,3119360,3119616,3119872,3120128,3120384,
3120640,3120896,3121152,3121408,3121664,3121920,3122176,3122432,3122688,3122944,3123200,3123456,
3123712,3123968,3124224,3124480,3124736,3124992,3125248,3125504,3125760,3126016,3126272,3126528,
3126784,3127040,3127296,3127552,3127808,3128064,3128320,3128576,3128832,3129088,3129344,3129600,
3129856,3130112,3130368,3130624,3130880,3131136,3131392,3131648,3131904,3132160,3132416,3132672,
3132928,3133184,3133440,3133696,3133952,3134208,3134464,3134720,3145728,3159552,3160064,3160321,
3185409,3186432,3211008,3223809,3224320,3224576,3224833,3225346,3226117,3227648,3227906,3228672,
3228937,3231508,3236864,3237121,3237633,3238144,3238400,3238656,3238912,3239168,3239424,3239680,
3239936,3240193,3240704,3240961,3241472,3241728,3241988,3243264,3243520,3243776,3244032,3244288,
3244545,3245058,3245825,3246336,3246593,3247104,3247360,3247616,3248640,3248896,3249152,3249408,
3249664,3249920,3250176,3250432,3250688,3250944,3251200,3251456,3251712,3251968,3276813,3280398,
3284224,3284480,3285027,3294208,3294464,3294720,3294976,3297280,3297550,3301376,3301633,3302146,
3302912,3303169,3303684,3304973,3308544,3308800,3309056,3309568,3309824,3310080,3310336,3310592,
3310848,3311104,3311360,3311616,3311872,3312128,3312384,3312640,3312896,3313152,3313408,3313664,
3313920,3314176,3314432,3314688,3314944,3315200,3315456,3315712,3315968,3316224,3316480,3316736,
3316992,3317248,3317504,3317760,3318016,3318272,3318528,3318784,3319040,3319296,3319552,3319808,
3320064,3320320,3320576,3320832,3321088,3321344,3321600,3321856,3322135,3328258,3329024,3329280,
3329536,3329792,3330048,3330304,3330560,3330816,3331073,3331584,3331840,3332096,3332352,3332608,
3332864,3333120,3333376,3333632,3333888,3334144,3334400,3334656,3334912,3335173,3336704,3336960,
3337216,3337472,3337732,3339008,3339264,3339525,3341059,3342080,3342338,3343104,3343360,3343617,
3344128,3344384,3344642,3345409,3345921,3346432,3346688,3346945,3347456,3347712,3347968,3348224,
3348480,3348737,3349248,3349506,3350272,3350528,3350784,3351042,3351811,3352833,3353344,3353600,
3353856,3354112,3354368,3354625,3355136,3355392,3355648,3355904,3356160,3356416,3356676,3357952,
3358208,3358464,3358722,3359488,3359746,3360512,3360768,3361024,3361280,3361536,3361793,3362306,
3363072,3363328,3363584,3363840,3364096,3364352,3364608,3364873,3367439,3371521,3372032,3372290,
3373057,3373572,3374848,3375111,3377152,3377408,3377670,3379459,3380489,3383041,3383552,3383810,
3384576,3384833,3385344,3385600,3385859,3386880,3387136,3387409,3392000,3392258,3393024,3393280,
3393545,3396096,3396353,3396865,3397376,3397632,3397888,3398147,3399169,3399688,3402006,10918912,
10919168,10973184,11006464,11006720,11006976,11008000,11008256,11230208,11230464,11230720,11230976,
11233536,16449538,16450305,16450817,16454404,16457728,16457984,16458241,16458754,16459520,16459776,
16460032,16469760,16470016,16470272,16470528,16470784,16471040,16471296,16471552,16471808,16472064,
16472320,16472576,16472832,16473088,16473344,16473600,16473856,16474112,16474368,16474624,16474880,
16475136,16475392,16475648,16475904,16476160,16476416,16476672,16476928,16477184,16477440,16477696,
16477952,16478208,16478464,16478720,16478976,16479232,16479488,16479744,16480000,16480256,16480512,
16480768,16481024,16481280,16481537,16482048,16482304,16482560,16482816,16483072,16483328,16483584,
16483840,16484096,16484352,16484608,16484864,16485120,16485376,16485632,16485888,16486144,16486400,
16486656,16486912,16487168,16487424,16487680,16487936,16488192,16488448,16488704,16488960,16489216,
16489472,16489728,16489984,16490241,16490752,16491008,16491264,16491520,16491777,16492288,16492544,
16492800,16493056,16493312,16493568,16493824,16494080,16494337,16494848,16503552,16503808,16504064,
16504320,16504576,16504832,16505088,16505344,16505600,16505856,16506112,16506368,16506624,16506880,
16507136,16507392,16507648,16507904,16508160,16508416,16508672,16508928,16509184,16509457,16514048,
16514304,16514560,16514816,16515165,16539141,16540813,16577026,16577864,16601151,16618037,16642049,
16642566,16644352,16644608,16644864,16645120,16650240,16650497,16651009,16651520,16651776,16652033,
16652544,16658432,16658688,16658944,16659200,16659456,16659713,16660224,16660480,16660737,16661249,
16661761,16662273,16662787,16664320,16664576,16664832,16665088,16665344,16665600,16665856,16666112,
16666368,16666624,16666880,16667136,16667648,16667904,16668160,16668416,16668672,16668929,16669440,
16669696,16669953,16670464,16670720,16670977,16671488,16671744,16672000,16672256,16672768,16673025,
16673536,16674818,16675840,16676361,16678913,16679425,16679937,16680449,16680961,16681472,16681728,
16681985,16682497,16683008,16683264,16683521,16684033,16684544,16684800,16685057,16685568,16685824,
16686081,16686592,16686848,16687105,16687616,16687872,16688129,16688640,16688896,16689153,16689665,
16690177,16690689,16691201,16691712,16691968,16692225,16692736,16692992,16693249,16693760,16694016,
16694273,16694784,16695040,16695297,16695808,16696064,16696321,16696832,16697088,16697345,16697856,
16698112,16698369,16698880,16699136,16699392,16699648,16699904,16700160,16700417,16700928,16701184,
16701441,16701952,16702208,16702465,16702976,16703232,16703489,16704000,16704256,16704513,16705024,
16705280,16705537,16706048,16706304,16706561,16707073,16707585,16708096,16708352,16708608,16708871,
16712029,16736001,16736512,16736769,16737280,16737536,16737792,16738048,16738304,16738560,16738816,
16739072,16739328,16739584,16739840,16740096,16740352,16740608,16740864,16741120,16741376,16741633,
16742144,16742400,16742656,16742912,16743168,16743424,16743680,16743936,16744192,16744448,16744704,
16744960,16745216,16745472,16745733,16747264,16747520,16747776,16748032,16748292,16749568,16749824,
16750085,16751616,16751872,16752129,16752640,16752925,16761349,16763397,16765445,16767490,16769025,
16769536,16769792,16770048,16770304,16770560,16771072,16771331,16772352,16772608,17268993,17269504,
17269760,17270016,17270528,17270784,17271040,17271296,17271553,17272064,17272320,17272576,17272832,
17273088,17273344,17273600,17273856,17274112,17274368,17274624,17274880,17275137,17275648,17275904,
17276160,17276416,17276672,17276928,17277184,17277440,17277697,17278208,17278464,17278720,17278977,
17279488,17279744,17280000,17280256,17280512,17280768,17281024,17281536,17281793,17282304,17282562,
17283328,17283584,30670873,30677529,30684185,30690822,30692881,30697497,30704153,30710784,30711297,
30712320,30713089,30714115,30715399,30717443,30718720,30719238,30721290,30724121,30730777,30737409,
30738179,30739719,30742022,30744089,30750721,30751491,30752772,30754304,30755334,30757401,30764057,
30770713,30777369,30784025,30790681,30797337,30803993,30810649,30817305,30823961,30830617,30837273,
30843904,30844160,30844944,30849280,30849542,30851328,30851608,30857984,30858240,30858496,30858752,
30859008,30859264,30859520,30859792,30864128,30864390,30866176,30866456,30872832,30873088,30873344,
30873600,30873856,30874112,30874368,30874640,30878976,30879238,30881024,30881304,30887680,30887936,
30888192,30888448,30888704,30888960,30889216,30889488,30893824,30894086,30895872,30896152,30902528,
30902784,30903040,30903296,30903552,30903808,30904064,30904336,30908672,30908934,30910720,30911000,
30917376,30917632,30917888,30918144,30918400,30918656,30918912,30919169,30920201,30922761,30925321,
30927881,30930441,31469576,31471874,31472650,31475456,31475713,31476224,31476480,31476736,31476992,
31477248,31477504,31477760,31478024,31480321,31480833,31481344,31481605,31483137,31483648,31483904,
31484160,31484416,31484672,31484928,31485184,32374785,32375296,32375552,32376064,32376320,32376576,
32376832,32377088,32377347,32378368,32378624,32378880,32379136,32379392,32379648,32379904,32380161,
32380672,32380928,32381184,32381440,32381696,32381952,32382208,32382464,32382720,32383232,32383488,
32384000,32384768,32385280,32385539,32386560,32386816,32387072,32387328,32387584,32388096,32388353,
32388864,32389376,32389888,32391680,32392960,32393472,32393984,32394496,32394752,32395008,32395520,
32395776,32396288,32397056,32397568,32398080,32398592,32399104,32399616,32399872,32400384,32401152,
32401408,32401664,32401920,32402433,32402944,32403200,32403456,32403712,32403968,32404480,32404737,
32405248,32405760,32406016,32406272,32406528,32407040,32407553,32408064,32408320,32408577,32409088,
32409344,32409600,32409856,32410370,32411136,32411392,32411648,32411904,32412160,32412416,32412672,
32412929,32413440,32413696,32413952,32414208,32414464,32416000,32416256,32416512,32417024,32417280,
32417536,32417792,32418048,32418562,32419328,32419584,32419840,32420096,32420352,32420608,32420864,
32421121,32421632,32421888,32422144,32422400,32422656,32571402,32575514,32582400,32582656,32582913,
32583705,32590339,32591360,32591616,32598530,32608256,32636929,32637440,32641024,32641280,32641536,
32641792,32642048,32642304,32642560,32642816,32643072,32643328,32643584,32643840,32644096,32644352,
32644608,32644864,32645120,32645376,32645632,32645888,32646144,32646400,32646656,32646912,32647168,
32647424,32647680,32647936,32648192,32648448,32648704,32648960,32649216,32649472,32649728,32649984,
32650240,32650496,32650752,32651008,32651264,32651520,32651776,32652032,32653320,32657408,32657664,
33288201,
};
// Values of fat5__uc_kdec_key.
static const uint32_t fat5__uc_kdec_val[1480] = {
1025,65666,3105,65730,1601,65794,30593,65858,1569,3553,65923,66210,66338,66466,3681,66530,67106,
3329,19649,3393,3649,20257,20321,20513,3809,3873,67298,19553,3457,3681,3841,21153,67682,65794,
30273,30465,29857,30913,30721,30529,30753,29441,30369,29793,67746,67810,68066,68130,68194,123233,
68322,68386,138113,2081,6337,2113,2177,12737,2273,2529,17473,2561,2625,2689,2785,3105,18945,237633,
3137,3201,19233,19297,3297,3425,3489,10593,3553,19073,238273,3585,3713,238497,19937,3777,238753,
30273,30913,3361,3649,3745,30273,30753,30913,34721,19009,3169,19105,7681,19329,3265,19425,19489,
19617,19713,241505,21409,19873,241825,21473,20001,19969,20033,20225,20545,13665,20769,238465,20833,
3905,20993,30465,68450,68514,68578,68706,1025,1025,1025,1025,1025,1025,1025,1025,1025,262657,68770,
1473,68834,68899,1025,68994,69059,69154,69219,69314,69378,69442,68996,1025,1537,3361,1665,1377,
279105,1953,1281,3521,1537,1377,279105,1953,1281,3105,3233,3553,3841,19233,3329,3425,3585,3681,
69634,69699,2145,69890,69955,12801,70146,3297,2305,2305,2305,3329,9441,2337,2337,2433,3457,2497,
70210,2561,2625,2625,70274,70339,70434,2881,2881,2113,3233,2209,2465,3553,47617,3361,70499,30721,
30305,29281,29697,279073,2177,3201,3361,70595,70788,70915,65922,2337,72066,72131,72226,2753,72290,
72355,72452,72578,2817,72642,72707,2433,2145,2465,3361,72802,72867,72962,3777,73026,73091,73188,
73314,3841,73378,73443,3457,3169,3489,73539,73634,73699,73794,73859,1569,73954,74659,75524,76930,
77507,2081,3105,1537,73636,81059,81154,81123,3393,2753,371745,883105,1307617,638977,640257,640705,
640993,641825,643233,643457,644097,644929,665569,666785,666977,667713,668353,669025,670721,671393,
671745,676705,679713,680609,680769,681729,682017,682881,683297,684097,685761,686337,687201,711393,
713697,728417,729153,729409,729761,730337,732769,748033,749569,753409,754145,754753,755457,757185,
757281,768865,769185,769569,769985,773697,773953,774113,777857,778177,778593,778849,780801,781345,
781921,784481,803073,804545,805217,828897,829057,831713,832225,832641,833313,834561,834721,843265,
844033,845057,877569,879681,880417,882273,883041,883329,883553,885217,885377,886401,920929,935233,
935617,935777,935905,936161,936737,936801,939393,946305,946465,957313,957633,959233,959457,959745,
960001,962913,963137,970433,970657,972225,972769,974273,981857,982081,982625,993089,997121,997313,
1003137,1005921,1007393,1019489,1023745,1042113,1042977,1044801,1046433,1048609,1048961,1049153,
1050209,1052641,1052961,1064033,1064257,1064545,1064833,1065345,1065825,1065953,1068481,1068609,
1068801,1100193,1101153,1116161,1116545,1117281,1126337,1126753,1129025,1130497,1148641,1149121,
1149601,1150721,1151905,1158273,1158657,1160801,1168737,1169729,1176417,1177089,1177249,1184289,
1190177,1194177,1194369,1194529,1224417,1224705,1229697,1234625,1234721,1236225,1239585,1240001,
1240129,1240353,1243489,1244577,1244769,1245217,1250561,1252193,1252321,1258177,1258273,1258881,
1266945,1268481,1268705,1270945,1271265,1271361,1271681,1272641,1285281,1298081,1298401,1299617,
1300321,1300577,1300897,1301025,1302305,1302433,1302977,1303137,1303553,1304417,1304897,1305153,
1307041,1307521,1307649,1025,393793,682017,682113,81218,81346,81410,139265,144705,139329,144769,
139361,144897,140097,139457,140321,139553,142369,142337,139905,145633,145793,145857,146017,146145,
146209,140161,146337,146401,140193,140289,140353,140513,140577,140641,140865,140993,141313,141537,
141697,146977,142049,143489,143617,143905,144001,144321,144417,638977,643457,639265,711521,639297,
640417,639329,960065,641825,639777,639009,730401,714241,644929,81475,82820,84743,84966,85155,
698849,774017,831713,1012193,88611,88706,139265,139329,139425,139553,139617,139713,89666,90565,
90724,90850,638977,643457,639265,711521,643713,667041,639073,666977,641953,682017,844033,920929,
886401,845057,1194529,713697,834721,853313,844065,993217,688545,937761,1152033,994209,677505,
998145,960225,732769,1183009,664897,683521,892161,1245345,647713,668449,879713,639297,640417,
639329,769217,687713,681825,750305,748737,973921,647201,1153249,682625,729985,90914,92451,92738,
92803,92898,92963,398401,398465,398529,398593,398657,398753,398817,398881,398945,399009,399073,
399137,399201,399265,399329,399393,399489,399553,399617,399681,399937,400033,400129,400225,400321,
400513,400577,400641,400865,93058,93124,93507,93604,93731,93925,94084,94211,94500,94755,94946,
95011,95108,95362,95429,95590,95781,95491,95941,96260,96387,96676,96805,96964,97091,97378,97635,
97829,97987,98084,98213,98371,98466,98597,98756,98885,99043,99141,99298,99363,99844,99971,100066,
100131,100420,100547,100837,100996,101122,101189,101346,101412,101667,101956,102082,102147,102244,
102370,102437,95843,102594,103235,104770,104899,104994,105187,105378,105700,105826,106339,106436,
106562,107011,107394,108035,105218,108227,105314,108515,108708,104706,108835,109221,109382,109570,
110724,110850,111044,111171,111266,111907,112002,112131,112322,112388,112515,112610,112867,113058,
113635,35137,35201,1371617,2145,2241,2593,9409,10849,1369313,1402593,19809,1403457,20897,115842,
116035,116226,116354,48193,47617,47713,47969,48385,48449,1377,116674,52769,52769,53089,53089,53089,
53089,53185,53185,53185,53185,53249,53249,53249,53249,53057,53057,53057,53057,53217,53217,53217,
53217,53025,53025,53025,53025,54401,54401,54401,54401,54465,54465,54465,54465,53377,53377,53377,
53377,53345,53345,53345,53345,53441,53441,53441,53441,53473,53473,53473,53665,53665,53633,53633,
53697,53697,53505,53505,54017,54017,53793,53793,54561,54561,54561,54561,54753,54753,54753,54753,
54881,54881,54881,54881,54817,54817,54817,54817,55105,55105,55137,55137,55137,55297,55297,55329,
55329,55329,55233,55233,55233,55233,55873,55873,55905,54689,54689,54689,54689,55521,55521,55489,
55489,55553,55553,52961,55649,55649,55457,55457,55585,55585,55809,55809,55809,55809,51489,51489,
116738,55681,55681,55681,55681,117890,123907,124482,133571,133858,138531,144675,149859,150052,
150947,151058,151624,151876,1409,393249,1857,1057,2017,393921,263361,263329,262785,262753,3041,
3041,1281,3937,4001,393857,393729,393537,393473,393601,2913,2977,264129,264129,264129,264129,3041,
3041,3041,1409,393249,1473,1889,1857,2017,1057,262785,1281,3937,4001,393857,1121,1217,1345,1441,
1921,1985,1953,2945,1153,2049,152002,124002,152194,50209,50241,50273,50305,50337,50369,50369,50369,
50401,50433,50433,50433,50465,50497,50497,50497,50529,50529,50529,50561,50561,50561,50593,50593,
50593,50625,50625,50625,50657,50689,50721,50753,50785,50785,50785,50817,50817,50817,50849,50849,
50849,50881,50881,50881,50913,50913,50913,50945,50945,50945,50977,50977,50977,51009,51009,51009,
51233,51233,51233,51233,51265,51265,51265,51297,51297,51297,51329,51329,51329,51361,51361,51361,
51393,51393,51393,51425,51425,51425,51457,51489,51521,51521,51521,152834,1057,340129,393281,393601,
393249,401249,400961,398369,398433,398497,398561,398625,400481,400545,400609,399457,401281,398401,
398465,398529,398593,398657,398753,398817,398881,398945,399009,399073,399137,399201,399265,399329,
399393,399489,399553,399617,399681,399937,400033,400129,400225,400321,400513,400577,400641,400865,
400993,398113,404609,402977,403937,404129,404321,404513,5185,5505,5601,5313,5281,267553,303169,
274945,308225,309601,23041,7361,21281,19041,21601,1404097,21665,21633,19137,242209,19201,19393,
21793,19585,19521,19457,21345,9441,21377,19681,20609,21825,19841,3924097,1372609,19905,3924129,
20929,3924161,7937,20161,3617,20289,3924225,20385,20481,21761,21697,1404129,21729,20737,364065,
20961,21537,21249,14337,3924289,3924929,2081,3105,2081,3105,3361,2081,3105,2081,2145,2273,2369,
2497,2657,3105,3265,3329,3585,2081,3105,2081,2177,2369,2657,3105,2081,2177,2337,2529,2657,3105,
2081,3105,2081,3105,2081,3105,2081,3105,2081,3105,2081,3105,9761,18145,29217,32385,29793,278753,
30241,278593,32417,31265,32257,31393,32289,31425,29217,32385,29793,278753,30241,278593,32417,31265,
32257,31393,32289,31425,29217,32385,29793,278753,30241,278593,32417,31265,32257,31393,32289,31425,
29217,32385,29793,278753,30241,278593,32417,31265,32257,31393,32289,31425,29217,32385,29793,278753,
30241,278593,32417,31265,32257,31393,32289,31425,31617,1537,1537,1537,1537,1537,34305,34625,34753,
35169,35233,1364257,39713,35521,35585,40225,38369,39393,34305,34625,34753,34849,34913,35137,37409,
35521,35489,35809,38241,1362465,38433,50401,50561,50657,51457,50753,50593,50913,51521,51297,50785,
50977,51233,50849,51265,50721,50817,50497,50625,50689,50881,50945,51009,52673,55105,54305,52705,
50433,50561,51425,50593,51521,51297,50785,50977,51233,50849,51265,50817,50497,50625,50881,51009,
50561,50593,51521,51329,51393,50785,50977,50849,51265,50817,50625,50881,51009,55105,52705,50433,
50561,51425,50593,50913,51521,51297,51361,50785,50977,51233,50849,51265,50817,50497,50625,50881,
50945,51009,52673,54305,50401,50561,50657,51425,50753,50593,50913,51521,51329,50785,50977,51233,
50849,51265,50721,50817,50497,50625,50689,50881,50945,51009,50433,50561,50657,51457,50753,50593,
50913,51521,51329,50785,50977,51233,50849,51265,50721,50817,50497,50625,50689,50881,50945,51009,
153346,154051,2145,2625,156642,2081,156770,157027,157122,157186,157378,157442,399009,805217,748257,
686465,399585,643457,729921,1129569,730401,644225,836609,926753,832289,674209,782721,668065,833025,
672673,1026113,959457,1152289,728577,689953,909953,807585,813729,638977,639265,1182017,769217,
640417,687713,811233,1158657,805473,995361,1003329,688385,905217,844065,844033,960097,675393,
702145,1190305,157571,783073,687585,1537,
};
// The code points of the decompositions of more than one.
static const uint32_t fat5__uc_dec_pool[4951] = {
65,768,65,769,65,770,65,771,65,776,65,778,67,807,69,768,69,769,69,770,69,776,73,768,73,769,73,770,
73,776,78,771,79,768,79,769,79,770,79,771,79,776,85,768,85,769,85,770,85,776,89,769,97,768,97,769,
97,770,97,771,97,776,97,778,99,807,101,768,101,769,101,770,101,776,105,768,105,769,105,770,105,776,
110,771,111,768,111,769,111,770,111,771,111,776,117,768,117,769,117,770,117,776,121,769,121,776,65,
772,97,772,65,774,97,774,65,808,97,808,67,769,99,769,67,770,99,770,67,775,99,775,67,780,99,780,68,
780,100,780,69,772,101,772,69,774,101,774,69,775,101,775,69,808,101,808,69,780,101,780,71,770,103,
770,71,774,103,774,71,775,103,775,71,807,103,807,72,770,104,770,73,771,105,771,73,772,105,772,73,
774,105,774,73,808,105,808,73,775,74,770,106,770,75,807,107,807,76,769,108,769,76,807,108,807,76,
780,108,780,78,769,110,769,78,807,110,807,78,780,110,780,79,772,111,772,79,774,111,774,79,779,111,
779,82,769,114,769,82,807,114,807,82,780,114,780,83,769,115,769,83,770,115,770,83,807,115,807,83,
780,115,780,84,807,116,807,84,780,116,780,85,771,117,771,85,772,117,772,85,774,117,774,85,778,117,
778,85,779,117,779,85,808,117,808,87,770,119,770,89,770,121,770,89,776,90,769,122,769,90,775,122,
775,90,780,122,780,79,795,111,795,85,795,117,795,65,780,97,780,73,780,105,780,79,780,111,780,85,
780,117,780,220,772,252,772,220,769,252,769,220,780,252,780,220,768,252,768,196,772,228,772,550,
772,551,772,198,772,230,772,71,780,103,780,75,780,107,780,79,808,111,808,490,772,491,772,439,780,
658,780,106,780,71,769,103,769,78,768,110,768,197,769,229,769,198,769,230,769,216,769,248,769,65,
783,97,783,65,785,97,785,69,783,101,783,69,785,101,785,73,783,105,783,73,785,105,785,79,783,111,
783,79,785,111,785,82,783,114,783,82,785,114,785,85,783,117,783,85,785,117,785,83,806,115,806,84,
806,116,806,72,780,104,780,65,775,97,775,69,807,101,807,214,772,246,772,213,772,245,772,79,775,111,
775,558,772,559,772,89,772,121,772,776,769,168,769,913,769,917,769,919,769,921,769,927,769,933,769,
937,769,970,769,921,776,933,776,945,769,949,769,951,769,953,769,971,769,953,776,965,776,959,769,
965,769,969,769,978,769,978,776,1045,768,1045,776,1043,769,1030,776,1050,769,1048,768,1059,774,
1048,774,1080,774,1077,768,1077,776,1075,769,1110,776,1082,769,1080,768,1091,774,1140,783,1141,783,
1046,774,1078,774,1040,774,1072,774,1040,776,1072,776,1045,774,1077,774,1240,776,1241,776,1046,776,
1078,776,1047,776,1079,776,1048,772,1080,772,1048,776,1080,776,1054,776,1086,776,1256,776,1257,776,
1069,776,1101,776,1059,772,1091,772,1059,776,1091,776,1059,779,1091,779,1063,776,1095,776,1067,776,
1099,776,1575,1619,1575,1620,1608,1620,1575,1621,1610,1620,1749,1620,1729,1620,1746,1620,2344,2364,
2352,2364,2355,2364,2325,2364,2326,2364,2327,2364,2332,2364,2337,2364,2338,2364,2347,2364,2351,
2364,2503,2494,2503,2519,2465,2492,2466,2492,2479,2492,2610,2620,2616,2620,2582,2620,2583,2620,
2588,2620,2603,2620,2887,2902,2887,2878,2887,2903,2849,2876,2850,2876,2962,3031,3014,3006,3015,
3006,3014,3031,3142,3158,3263,3285,3270,3285,3270,3286,3270,3266,3274,3285,3398,3390,3399,3390,
3398,3415,3545,3530,3545,3535,3548,3530,3545,3551,3906,4023,3916,4023,3921,4023,3926,4023,3931,
4023,3904,4021,3953,3954,3953,3956,4018,3968,4019,3968,3953,3968,3986,4023,3996,4023,4001,4023,
4006,4023,4011,4023,3984,4021,4133,4142,6917,6965,6919,6965,6921,6965,6923,6965,6925,6965,6929,
6965,6970,6965,6972,6965,6974,6965,6975,6965,6978,6965,65,805,97,805,66,775,98,775,66,803,98,803,
66,817,98,817,199,769,231,769,68,775,100,775,68,803,100,803,68,817,100,817,68,807,100,807,68,813,
100,813,274,768,275,768,274,769,275,769,69,813,101,813,69,816,101,816,552,774,553,774,70,775,102,
775,71,772,103,772,72,775,104,775,72,803,104,803,72,776,104,776,72,807,104,807,72,814,104,814,73,
816,105,816,207,769,239,769,75,769,107,769,75,803,107,803,75,817,107,817,76,803,108,803,7734,772,
7735,772,76,817,108,817,76,813,108,813,77,769,109,769,77,775,109,775,77,803,109,803,78,775,110,775,
78,803,110,803,78,817,110,817,78,813,110,813,213,769,245,769,213,776,245,776,332,768,333,768,332,
769,333,769,80,769,112,769,80,775,112,775,82,775,114,775,82,803,114,803,7770,772,7771,772,82,817,
114,817,83,775,115,775,83,803,115,803,346,775,347,775,352,775,353,775,7778,775,7779,775,84,775,116,
775,84,803,116,803,84,817,116,817,84,813,116,813,85,804,117,804,85,816,117,816,85,813,117,813,360,
769,361,769,362,776,363,776,86,771,118,771,86,803,118,803,87,768,119,768,87,769,119,769,87,776,119,
776,87,775,119,775,87,803,119,803,88,775,120,775,88,776,120,776,89,775,121,775,90,770,122,770,90,
803,122,803,90,817,122,817,104,817,116,776,119,778,121,778,383,775,65,803,97,803,65,777,97,777,194,
769,226,769,194,768,226,768,194,777,226,777,194,771,226,771,7840,770,7841,770,258,769,259,769,258,
768,259,768,258,777,259,777,258,771,259,771,7840,774,7841,774,69,803,101,803,69,777,101,777,69,771,
101,771,202,769,234,769,202,768,234,768,202,777,234,777,202,771,234,771,7864,770,7865,770,73,777,
105,777,73,803,105,803,79,803,111,803,79,777,111,777,212,769,244,769,212,768,244,768,212,777,244,
777,212,771,244,771,7884,770,7885,770,416,769,417,769,416,768,417,768,416,777,417,777,416,771,417,
771,416,803,417,803,85,803,117,803,85,777,117,777,431,769,432,769,431,768,432,768,431,777,432,777,
431,771,432,771,431,803,432,803,89,768,121,768,89,803,121,803,89,777,121,777,89,771,121,771,945,
787,945,788,7936,768,7937,768,7936,769,7937,769,7936,834,7937,834,913,787,913,788,7944,768,7945,
768,7944,769,7945,769,7944,834,7945,834,949,787,949,788,7952,768,7953,768,7952,769,7953,769,917,
787,917,788,7960,768,7961,768,7960,769,7961,769,951,787,951,788,7968,768,7969,768,7968,769,7969,
769,7968,834,7969,834,919,787,919,788,7976,768,7977,768,7976,769,7977,769,7976,834,7977,834,953,
787,953,788,7984,768,7985,768,7984,769,7985,769,7984,834,7985,834,921,787,921,788,7992,768,7993,
768,7992,769,7993,769,7992,834,7993,834,959,787,959,788,8000,768,8001,768,8000,769,8001,769,927,
787,927,788,8008,768,8009,768,8008,769,8009,769,965,787,965,788,8016,768,8017,768,8016,769,8017,
769,8016,834,8017,834,933,788,8025,768,8025,769,8025,834,969,787,969,788,8032,768,8033,768,8032,
769,8033,769,8032,834,8033,834,937,787,937,788,8040,768,8041,768,8040,769,8041,769,8040,834,8041,
834,945,768,949,768,951,768,953,768,959,768,965,768,969,768,7936,837,7937,837,7938,837,7939,837,
7940,837,7941,837,7942,837,7943,837,7944,837,7945,837,7946,837,7947,837,7948,837,7949,837,7950,837,
7951,837,7968,837,7969,837,7970,837,7971,837,7972,837,7973,837,7974,837,7975,837,7976,837,7977,837,
7978,837,7979,837,7980,837,7981,837,7982,837,7983,837,8032,837,8033,837,8034,837,8035,837,8036,837,
8037,837,8038,837,8039,837,8040,837,8041,837,8042,837,8043,837,8044,837,8045,837,8046,837,8047,837,
945,774,945,772,8048,837,945,837,940,837,945,834,8118,837,913,774,913,772,913,768,913,837,168,834,
8052,837,951,837,942,837,951,834,8134,837,917,768,919,768,919,837,8127,768,8127,769,8127,834,953,
774,953,772,970,768,953,834,970,834,921,774,921,772,921,768,8190,768,8190,769,8190,834,965,774,965,
772,971,768,961,787,961,788,965,834,971,834,933,774,933,772,933,768,929,788,168,768,8060,837,969,
837,974,837,969,834,8182,837,927,768,937,768,937,837,8592,824,8594,824,8596,824,8656,824,8660,824,
8658,824,8707,824,8712,824,8715,824,8739,824,8741,824,8764,824,8771,824,8773,824,8776,824,61,824,
8801,824,8781,824,60,824,62,824,8804,824,8805,824,8818,824,8819,824,8822,824,8823,824,8826,824,
8827,824,8834,824,8835,824,8838,824,8839,824,8866,824,8872,824,8873,824,8875,824,8828,824,8829,824,
8849,824,8850,824,8882,824,8883,824,8884,824,8885,824,10973,824,12363,12441,12365,12441,12367,
12441,12369,12441,12371,12441,12373,12441,12375,12441,12377,12441,12379,12441,12381,12441,12383,
12441,12385,12441,12388,12441,12390,12441,12392,12441,12399,12441,12399,12442,12402,12441,12402,
12442,12405,12441,12405,12442,12408,12441,12408,12442,12411,12441,12411,12442,12358,12441,12445,
12441,12459,12441,12461,12441,12463,12441,12465,12441,12467,12441,12469,12441,12471,12441,12473,
12441,12475,12441,12477,12441,12479,12441,12481,12441,12484,12441,12486,12441,12488,12441,12495,
12441,12495,12442,12498,12441,12498,12442,12501,12441,12501,12442,12504,12441,12504,12442,12507,
12441,12507,12442,12454,12441,12527,12441,12528,12441,12529,12441,12530,12441,12541,12441,1497,
1460,1522,1463,1513,1473,1513,1474,64329,1473,64329,1474,1488,1463,1488,1464,1488,1468,1489,1468,
1490,1468,1491,1468,1492,1468,1493,1468,1494,1468,1496,1468,1497,1468,1498,1468,1499,1468,1500,
1468,1502,1468,1504,1468,1505,1468,1507,1468,1508,1468,1510,1468,1511,1468,1512,1468,1513,1468,
1514,1468,1493,1465,1489,1471,1499,1471,1508,1471,69785,69818,69787,69818,69797,69818,69937,69927,
69938,69927,70471,70462,70471,70487,70841,70842,70841,70832,70841,70845,71096,71087,71097,71087,
71989,71984,119127,119141,119128,119141,119135,119150,119135,119151,119135,119152,119135,119153,
119135,119154,119225,119141,119226,119141,119227,119150,119228,119150,119227,119151,119228,119151,
32,776,32,772,32,769,32,807,49,8260,52,49,8260,50,51,8260,52,73,74,105,106,76,183,108,183,700,110,
68,381,68,382,100,382,76,74,76,106,108,106,78,74,78,106,110,106,68,90,68,122,100,122,32,774,32,775,
32,778,32,808,32,771,32,779,32,837,1381,1410,1575,1652,1608,1652,1735,1652,1610,1652,3661,3634,
3789,3762,3755,3737,3755,3745,4018,3969,4019,3969,97,702,32,787,32,787,32,834,32,788,32,819,46,46,
46,46,46,8242,8242,8242,8242,8242,8245,8245,8245,8245,8245,33,33,32,773,63,63,63,33,33,63,82,115,
97,47,99,97,47,115,176,67,99,47,111,99,47,117,176,70,78,111,83,77,84,69,76,84,77,70,65,88,49,8260,
55,49,8260,57,49,8260,49,48,49,8260,51,50,8260,51,49,8260,53,50,8260,53,51,8260,53,52,8260,53,49,
8260,54,53,8260,54,49,8260,56,51,8260,56,53,8260,56,55,8260,56,73,73,73,73,73,73,86,86,73,86,73,73,
86,73,73,73,73,88,88,73,88,73,73,105,105,105,105,105,105,118,118,105,118,105,105,118,105,105,105,
105,120,120,105,120,105,105,48,8260,51,8747,8747,8747,8747,8747,8750,8750,8750,8750,8750,49,48,49,
49,49,50,49,51,49,52,49,53,49,54,49,55,49,56,49,57,50,48,40,49,41,40,50,41,40,51,41,40,52,41,40,53,
41,40,54,41,40,55,41,40,56,41,40,57,41,40,49,48,41,40,49,49,41,40,49,50,41,40,49,51,41,40,49,52,41,
40,49,53,41,40,49,54,41,40,49,55,41,40,49,56,41,40,49,57,41,40,50,48,41,49,46,50,46,51,46,52,46,53,
46,54,46,55,46,56,46,57,46,49,48,46,49,49,46,49,50,46,49,51,46,49,52,46,49,53,46,49,54,46,49,55,46,
49,56,46,49,57,46,50,48,46,40,97,41,40,98,41,40,99,41,40,100,41,40,101,41,40,102,41,40,103,41,40,
104,41,40,105,41,40,106,41,40,107,41,40,108,41,40,109,41,40,110,41,40,111,41,40,112,41,40,113,41,
40,114,41,40,115,41,40,116,41,40,117,41,40,118,41,40,119,41,40,120,41,40,121,41,40,122,41,58,58,61,
61,61,32,12441,32,12442,12424,12426,12467,12488,40,4352,41,40,4354,41,40,4355,41,40,4357,41,40,
4358,41,40,4359,41,40,4361,41,40,4363,41,40,4364,41,40,4366,41,40,4367,41,40,4368,41,40,4369,41,40,
4370,41,40,4352,4449,41,40,4354,4449,41,40,4355,4449,41,40,4357,4449,41,40,4358,4449,41,40,4359,
4449,41,40,4361,4449,41,40,4363,4449,41,40,4364,4449,41,40,4366,4449,41,40,4367,4449,41,40,4368,
4449,41,40,4369,4449,41,40,4370,4449,41,40,4364,4462,41,40,4363,4457,4364,4453,4523,41,40,4363,
4457,4370,4462,41,40,19968,41,40,20108,41,40,19977,41,40,22235,41,40,20116,41,40,20845,41,40,19971,
41,40,20843,41,40,20061,41,40,21313,41,40,26376,41,40,28779,41,40,27700,41,40,26408,41,40,37329,41,
40,22303,41,40,26085,41,40,26666,41,40,26377,41,40,31038,41,40,21517,41,40,29305,41,40,36001,41,40,
31069,41,40,21172,41,40,20195,41,40,21628,41,40,23398,41,40,30435,41,40,20225,41,40,36039,41,40,
21332,41,40,31085,41,40,20241,41,40,33258,41,40,33267,41,80,84,69,50,49,50,50,50,51,50,52,50,53,50,
54,50,55,50,56,50,57,51,48,51,49,51,50,51,51,51,52,51,53,4352,4449,4354,4449,4355,4449,4357,4449,
4358,4449,4359,4449,4361,4449,4363,4449,4364,4449,4366,4449,4367,4449,4368,4449,4369,4449,4370,
4449,4366,4449,4535,4352,4457,4364,4462,4363,4468,4363,4462,51,54,51,55,51,56,51,57,52,48,52,49,52,
50,52,51,52,52,52,53,52,54,52,55,52,56,52,57,53,48,49,26376,50,26376,51,26376,52,26376,53,26376,54,
26376,55,26376,56,26376,57,26376,49,48,26376,49,49,26376,49,50,26376,72,103,101,114,103,101,86,76,
84,68,20196,21644,12450,12497,12540,12488,12450,12523,12501,12449,12450,12531,12506,12450,12450,
12540,12523,12452,12491,12531,12464,12452,12531,12481,12454,12457,12531,12456,12473,12463,12540,
12489,12456,12540,12459,12540,12458,12531,12473,12458,12540,12512,12459,12452,12522,12459,12521,
12483,12488,12459,12525,12522,12540,12460,12525,12531,12460,12531,12510,12462,12460,12462,12491,
12540,12461,12517,12522,12540,12462,12523,12480,12540,12461,12525,12461,12525,12464,12521,12512,
12461,12525,12513,12540,12488,12523,12461,12525,12527,12483,12488,12464,12521,12512,12488,12531,
12463,12523,12476,12452,12525,12463,12525,12540,12493,12465,12540,12473,12467,12523,12490,12467,
12540,12509,12469,12452,12463,12523,12469,12531,12481,12540,12512,12471,12522,12531,12464,12475,
12531,12481,12475,12531,12488,12480,12540,12473,12487,12471,12489,12523,12488,12531,12490,12494,
12494,12483,12488,12495,12452,12484,12497,12540,12475,12531,12488,12497,12540,12484,12496,12540,
12524,12523,12500,12450,12473,12488,12523,12500,12463,12523,12500,12467,12499,12523,12501,12449,
12521,12483,12489,12501,12451,12540,12488,12502,12483,12471,12455,12523,12501,12521,12531,12504,
12463,12479,12540,12523,12506,12477,12506,12491,12498,12504,12523,12484,12506,12531,12473,12506,
12540,12472,12505,12540,12479,12509,12452,12531,12488,12508,12523,12488,12507,12531,12509,12531,
12489,12507,12540,12523,12507,12540,12531,12510,12452,12463,12525,12510,12452,12523,12510,12483,
12495,12510,12523,12463,12510,12531,12471,12519,12531,12511,12463,12525,12531,12511,12522,12511,
12522,12496,12540,12523,12513,12460,12513,12460,12488,12531,12513,12540,12488,12523,12516,12540,
12489,12516,12540,12523,12518,12450,12531,12522,12483,12488,12523,12522,12521,12523,12500,12540,
12523,12540,12502,12523,12524,12512,12524,12531,12488,12466,12531,48,28857,49,28857,50,28857,51,
28857,52,28857,53,28857,54,28857,55,28857,56,28857,57,28857,49,48,28857,49,49,28857,49,50,28857,49,
51,28857,49,52,28857,49,53,28857,49,54,28857,49,55,28857,49,56,28857,49,57,28857,50,48,28857,50,49,
28857,50,50,28857,50,51,28857,50,52,28857,104,80,97,100,97,65,85,98,97,114,111,86,112,99,100,109,
100,109,178,100,109,179,73,85,24179,25104,26157,21644,22823,27491,26126,27835,26666,24335,20250,
31038,112,65,110,65,956,65,109,65,107,65,75,66,77,66,71,66,99,97,108,107,99,97,108,112,70,110,70,
956,70,956,103,109,103,107,103,72,122,107,72,122,77,72,122,71,72,122,84,72,122,956,8467,109,8467,
100,8467,107,8467,102,109,110,109,956,109,109,109,99,109,107,109,109,109,178,99,109,178,107,109,
178,109,109,179,99,109,179,107,109,179,109,8725,115,109,8725,115,178,107,80,97,77,80,97,71,80,97,
114,97,100,114,97,100,8725,115,114,97,100,8725,115,178,112,115,110,115,956,115,109,115,112,86,110,
86,956,86,109,86,107,86,77,86,112,87,110,87,956,87,109,87,107,87,77,87,107,937,77,937,97,46,109,46,
66,113,99,99,99,100,67,8725,107,103,67,111,46,100,66,71,121,104,97,72,80,105,110,75,75,75,77,107,
116,108,109,108,110,108,111,103,108,120,109,98,109,105,108,109,111,108,80,72,112,46,109,46,80,80,
77,80,82,115,114,83,118,87,98,86,8725,109,65,8725,109,49,26085,50,26085,51,26085,52,26085,53,26085,
54,26085,55,26085,56,26085,57,26085,49,48,26085,49,49,26085,49,50,26085,49,51,26085,49,52,26085,49,
53,26085,49,54,26085,49,55,26085,49,56,26085,49,57,26085,50,48,26085,50,49,26085,50,50,26085,50,51,
26085,50,52,26085,50,53,26085,50,54,26085,50,55,26085,50,56,26085,50,57,26085,51,48,26085,51,49,
26085,103,97,108,102,102,102,105,102,108,102,102,105,102,102,108,383,116,115,116,1396,1398,1396,
1381,1396,1387,1406,1398,1396,1389,1488,1500,1574,1575,1574,1575,1574,1749,1574,1749,1574,1608,
1574,1608,1574,1735,1574,1735,1574,1734,1574,1734,1574,1736,1574,1736,1574,1744,1574,1744,1574,
1744,1574,1609,1574,1609,1574,1609,1574,1580,1574,1581,1574,1605,1574,1609,1574,1610,1576,1580,
1576,1581,1576,1582,1576,1605,1576,1609,1576,1610,1578,1580,1578,1581,1578,1582,1578,1605,1578,
1609,1578,1610,1579,1580,1579,1605,1579,1609,1579,1610,1580,1581,1580,1605,1581,1580,1581,1605,
1582,1580,1582,1581,1582,1605,1587,1580,1587,1581,1587,1582,1587,1605,1589,1581,1589,1605,1590,
1580,1590,1581,1590,1582,1590,1605,1591,1581,1591,1605,1592,1605,1593,1580,1593,1605,1594,1580,
1594,1605,1601,1580,1601,1581,1601,1582,1601,1605,1601,1609,1601,1610,1602,1581,1602,1605,1602,
1609,1602,1610,1603,1575,1603,1580,1603,1581,1603,1582,1603,1604,1603,1605,1603,1609,1603,1610,
1604,1580,1604,1581,1604,1582,1604,1605,1604,1609,1604,1610,1605,1580,1605,1581,1605,1582,1605,
1605,1605,1609,1605,1610,1606,1580,1606,1581,1606,1582,1606,1605,1606,1609,1606,1610,1607,1580,
1607,1605,1607,1609,1607,1610,1610,1580,1610,1581,1610,1582,1610,1605,1610,1609,1610,1610,1584,
1648,1585,1648,1609,1648,32,1612,1617,32,1613,1617,32,1614,1617,32,1615,1617,32,1616,1617,32,1617,
1648,1574,1585,1574,1586,1574,1605,1574,1606,1574,1609,1574,1610,1576,1585,1576,1586,1576,1605,
1576,1606,1576,1609,1576,1610,1578,1585,1578,1586,1578,1605,1578,1606,1578,1609,1578,1610,1579,
1585,1579,1586,1579,1605,1579,1606,1579,1609,1579,1610,1601,1609,1601,1610,1602,1609,1602,1610,
1603,1575,1603,1604,1603,1605,1603,1609,1603,1610,1604,1605,1604,1609,1604,1610,1605,1575,1605,
1605,1606,1585,1606,1586,1606,1605,1606,1606,1606,1609,1606,1610,1609,1648,1610,1585,1610,1586,
1610,1605,1610,1606,1610,1609,1610,1610,1574,1580,1574,1581,1574,1582,1574,1605,1574,1607,1576,
1580,1576,1581,1576,1582,1576,1605,1576,1607,1578,1580,1578,1581,1578,1582,1578,1605,1578,1607,
1579,1605,1580,1581,1580,1605,1581,1580,1581,1605,1582,1580,1582,1605,1587,1580,1587,1581,1587,
1582,1587,1605,1589,1581,1589,1582,1589,1605,1590,1580,1590,1581,1590,1582,1590,1605,1591,1581,
1592,1605,1593,1580,1593,1605,1594,1580,1594,1605,1601,1580,1601,1581,1601,1582,1601,1605,1602,
1581,1602,1605,1603,1580,1603,1581,1603,1582,1603,1604,1603,1605,1604,1580,1604,1581,1604,1582,
1604,1605,1604,1607,1605,1580,1605,1581,1605,1582,1605,1605,1606,1580,1606,1581,1606,1582,1606,
1605,1606,1607,1607,1580,1607,1605,1607,1648,1610,1580,1610,1581,1610,1582,1610,1605,1610,1607,
1574,1605,1574,1607,1576,1605,1576,1607,1578,1605,1578,1607,1579,1605,1579,1607,1587,1605,1587,
1607,1588,1605,1588,1607,1603,1604,1603,1605,1604,1605,1606,1605,1606,1607,1610,1605,1610,1607,
1600,1614,1617,1600,1615,1617,1600,1616,1617,1591,1609,1591,1610,1593,1609,1593,1610,1594,1609,
1594,1610,1587,1609,1587,1610,1588,1609,1588,1610,1581,1609,1581,1610,1580,1609,1580,1610,1582,
1609,1582,1610,1589,1609,1589,1610,1590,1609,1590,1610,1588,1580,1588,1581,1588,1582,1588,1605,
1588,1585,1587,1585,1589,1585,1590,1585,1591,1609,1591,1610,1593,1609,1593,1610,1594,1609,1594,
1610,1587,1609,1587,1610,1588,1609,1588,1610,1581,1609,1581,1610,1580,1609,1580,1610,1582,1609,
1582,1610,1589,1609,1589,1610,1590,1609,1590,1610,1588,1580,1588,1581,1588,1582,1588,1605,1588,
1585,1587,1585,1589,1585,1590,1585,1588,1580,1588,1581,1588,1582,1588,1605,1587,1607,1588,1607,
1591,1605,1587,1580,1587,1581,1587,1582,1588,1580,1588,1581,1588,1582,1591,1605,1592,1605,1575,
1611,1575,1611,1578,1580,1605,1578,1581,1580,1578,1581,1580,1578,1581,1605,1578,1582,1605,1578,
1605,1580,1578,1605,1581,1578,1605,1582,1580,1605,1581,1580,1605,1581,1581,1605,1610,1581,1605,
1609,1587,1581,1580,1587,1580,1581,1587,1580,1609,1587,1605,1581,1587,1605,1581,1587,1605,1580,
1587,1605,1605,1587,1605,1605,1589,1581,1581,1589,1581,1581,1589,1605,1605,1588,1581,1605,1588,
1581,1605,1588,1580,1610,1588,1605,1582,1588,1605,1582,1588,1605,1605,1588,1605,1605,1590,1581,
1609,1590,1582,1605,1590,1582,1605,1591,1605,1581,1591,1605,1581,1591,1605,1605,1591,1605,1610,
1593,1580,1605,1593,1605,1605,1593,1605,1605,1593,1605,1609,1594,1605,1605,1594,1605,1610,1594,
1605,1609,1601,1582,1605,1601,1582,1605,1602,1605,1581,1602,1605,1605,1604,1581,1605,1604,1581,
1610,1604,1581,1609,1604,1580,1580,1604,1580,1580,1604,1582,1605,1604,1582,1605,1604,1605,1581,
1604,1605,1581,1605,1581,1580,1605,1581,1605,1605,1581,1610,1605,1580,1581,1605,1580,1605,1605,
1582,1580,1605,1582,1605,1605,1580,1582,1607,1605,1580,1607,1605,1605,1606,1581,1605,1606,1581,
1609,1606,1580,1605,1606,1580,1605,1606,1580,1609,1606,1605,1610,1606,1605,1609,1610,1605,1605,
1610,1605,1605,1576,1582,1610,1578,1580,1610,1578,1580,1609,1578,1582,1610,1578,1582,1609,1578,
1605,1610,1578,1605,1609,1580,1605,1610,1580,1581,1609,1580,1605,1609,1587,1582,1609,1589,1581,
1610,1588,1581,1610,1590,1581,1610,1604,1580,1610,1604,1605,1610,1610,1581,1610,1610,1580,1610,
1610,1605,1610,1605,1605,1610,1602,1605,1610,1606,1581,1610,1602,1605,1581,1604,1581,1605,1593,
1605,1610,1603,1605,1610,1606,1580,1581,1605,1582,1610,1604,1580,1605,1603,1605,1605,1604,1580,
1605,1606,1580,1581,1580,1581,1610,1581,1580,1610,1605,1580,1610,1601,1605,1610,1576,1581,1610,
1603,1605,1605,1593,1580,1605,1589,1605,1605,1587,1582,1610,1606,1580,1610,1589,1604,1746,1602,
1604,1746,1575,1604,1604,1607,1575,1603,1576,1585,1605,1581,1605,1583,1589,1604,1593,1605,1585,
1587,1608,1604,1593,1604,1610,1607,1608,1587,1604,1605,1589,1604,1609,1589,1604,1609,32,1575,1604,
1604,1607,32,1593,1604,1610,1607,32,1608,1587,1604,1605,1580,1604,32,1580,1604,1575,1604,1607,1585,
1740,1575,1604,32,1611,1600,1611,32,1612,32,1614,1600,1614,32,1615,1600,1615,32,1616,1600,1616,32,
1617,1600,1617,32,1618,1600,1618,1604,1570,1604,1570,1604,1571,1604,1571,1604,1573,1604,1573,1604,
1575,1604,1575,48,46,48,44,49,44,50,44,51,44,52,44,53,44,54,44,55,44,56,44,57,44,40,65,41,40,66,41,
40,67,41,40,68,41,40,69,41,40,70,41,40,71,41,40,72,41,40,73,41,40,74,41,40,75,41,40,76,41,40,77,41,
40,78,41,40,79,41,40,80,41,40,81,41,40,82,41,40,83,41,40,84,41,40,85,41,40,86,41,40,87,41,40,88,41,
40,89,41,40,90,41,12308,83,12309,67,68,87,90,72,86,77,86,83,68,83,83,80,80,86,87,67,77,67,77,68,77,
82,68,74,12411,12363,12467,12467,12308,26412,12309,12308,19977,12309,12308,20108,12309,12308,23433,
12309,12308,28857,12309,12308,25171,12309,12308,30423,12309,12308,21213,12309,12308,25943,12309,
};
// Canonical composition: the code points that are second in a primary composite, sorted.
static const uint32_t fat5__uc_comp_second[63] = {
768,769,770,771,772,774,775,776,777,778,779,780,783,785,787,788,795,803,804,805,806,807,808,813,
814,816,817,824,834,837,1619,1620,1621,2364,2494,2519,2878,2902,2903,3006,3031,3158,3266,3285,3286,
3390,3415,3530,3535,3551,4142,6965,12441,12442,69818,69927,70462,70487,70832,70842,70845,71087,
71984,
};
// Primary composites (canonical pairs not in Full_Composition_Exclusion; Hangul is computed):
// first << 8 | index of the second in fat5__uc_comp_second, sorted.
static const uint32_t fat5__uc_comp_key[941] = {
15387,15643,15899,16640,16641,16642,16643,16644,16645,16646,16647,16648,16649,16651,16652,16653,
16657,16659,16662,16902,16913,16922,17153,17154,17158,17163,17173,17414,17419,17425,17429,17431,
17434,17664,17665,17666,17667,17668,17669,17670,17671,17672,17675,17676,17677,17681,17685,17686,
17687,17689,17926,18177,18178,18180,18181,18182,18187,18197,18434,18438,18439,18443,18449,18453,
18456,18688,18689,18690,18691,18692,18693,18694,18695,18696,18699,18700,18701,18705,18710,18713,
18946,19201,19211,19217,19221,19226,19457,19467,19473,19477,19479,19482,19713,19718,19729,19968,
19969,19971,19974,19979,19985,19989,19991,19994,20224,20225,20226,20227,20228,20229,20230,20231,
20232,20234,20235,20236,20237,20240,20241,20246,20481,20486,20993,20998,21003,21004,21005,21009,
21013,21018,21249,21250,21254,21259,21265,21268,21269,21510,21515,21521,21524,21525,21527,21530,
21760,21761,21762,21763,21764,21765,21767,21768,21769,21770,21771,21772,21773,21776,21777,21778,
21782,21783,21785,22019,22033,22272,22273,22274,22278,22279,22289,22534,22535,22784,22785,22786,
22787,22788,22790,22791,22792,22801,23041,23042,23046,23051,23057,23066,24832,24833,24834,24835,
24836,24837,24838,24839,24840,24841,24843,24844,24845,24849,24851,24854,25094,25105,25114,25345,
25346,25350,25355,25365,25606,25611,25617,25621,25623,25626,25856,25857,25858,25859,25860,25861,
25862,25863,25864,25867,25868,25869,25873,25877,25878,25879,25881,26118,26369,26370,26372,26373,
26374,26379,26389,26626,26630,26631,26635,26641,26645,26648,26650,26880,26881,26882,26883,26884,
26885,26887,26888,26891,26892,26893,26897,26902,26905,27138,27147,27393,27403,27409,27413,27418,
27649,27659,27665,27669,27671,27674,27905,27910,27921,28160,28161,28163,28166,28171,28177,28181,
28183,28186,28416,28417,28418,28419,28420,28421,28422,28423,28424,28426,28427,28428,28429,28432,
28433,28438,28673,28678,29185,29190,29195,29196,29197,29201,29205,29210,29441,29442,29446,29451,
29457,29460,29461,29702,29703,29707,29713,29716,29717,29719,29722,29952,29953,29954,29955,29956,
29957,29959,29960,29961,29962,29963,29964,29965,29968,29969,29970,29974,29975,29977,30211,30225,
30464,30465,30466,30470,30471,30473,30481,30726,30727,30976,30977,30978,30979,30980,30982,30983,
30984,30985,30993,31233,31234,31238,31243,31249,31258,43008,43009,43036,49664,49665,49667,49672,
50180,50433,50689,50692,50945,51712,51713,51715,51720,52993,54272,54273,54275,54280,54529,54532,
54535,54788,55297,56320,56321,56324,56331,57856,57857,57859,57864,58372,58625,58881,58884,59137,
59904,59905,59907,59912,61185,62464,62465,62467,62472,62721,62724,62727,62980,63489,64512,64513,
64516,64523,66048,66049,66051,66056,66304,66305,66307,66312,70144,70145,70400,70401,84992,84993,
85248,85249,88582,88838,90118,90374,92161,92417,92679,92935,98054,106496,106497,106499,106504,
106513,106752,106753,106755,106760,106769,110336,110337,110339,110344,110353,110592,110593,110595,
110600,110609,112395,125444,125700,140804,141060,141317,141573,142852,143108,168459,233728,233729,
233732,233733,233742,233743,233757,234752,234753,234766,234767,235264,235265,235278,235279,235293,
235776,235777,235780,235781,235783,235790,235791,237312,237313,237326,237327,237839,238848,238849,
238852,238853,238855,238863,239872,239873,239886,239887,239901,240669,241181,241920,241921,241924,
241925,241934,241935,241948,241949,242944,242945,242958,242959,243456,243457,243470,243471,243484,
243485,243968,243969,243972,243973,243975,243982,243983,243996,245504,245505,245518,245519,246030,
246031,247040,247041,247044,247045,247047,247054,247055,247068,248064,248065,248078,248079,248092,
248093,248320,248321,248348,248576,248577,248604,249373,250369,250375,263687,266245,266247,267009,
267520,267525,267527,267781,267783,268039,268288,268292,268293,268295,268801,269831,271108,271109,
271111,271114,272135,273159,273671,274437,274439,275201,275712,275717,275719,275973,275975,276231,
276480,276484,276485,276487,276993,278023,279300,279301,279303,279306,280327,281351,281863,284167,
291852,292108,317447,317703,321543,321799,403230,403231,403232,411679,412191,442655,447007,447775,
600097,602145,602913,640802,640803,739108,739109,739110,758312,771623,771624,771879,804393,835371,
837162,837163,837164,838187,869933,869934,870189,907567,907568,907569,908335,1058098,1770803,
1771315,1771827,1772339,1772851,1773875,1784371,1784883,1785395,1785651,1786419,1979908,1980164,
1989124,1989380,1991174,1991430,2007042,2007045,2007298,2007301,2013186,2013442,2018306,2018562,
2031616,2031617,2031644,2031645,2031872,2031873,2031900,2031901,2032157,2032413,2032669,2032925,
2033181,2033437,2033664,2033665,2033692,2033693,2033920,2033921,2033948,2033949,2034205,2034461,
2034717,2034973,2035229,2035485,2035712,2035713,2035968,2035969,2037760,2037761,2038016,2038017,
2039808,2039809,2039836,2039837,2040064,2040065,2040092,2040093,2040349,2040605,2040861,2041117,
2041373,2041629,2041856,2041857,2041884,2041885,2042112,2042113,2042140,2042141,2042397,2042653,
2042909,2043165,2043421,2043677,2043904,2043905,2043932,2044160,2044161,2044188,2045952,2045953,
2045980,2046208,2046209,2046236,2048000,2048001,2048256,2048257,2050048,2050049,2050304,2050305,
2052096,2052097,2052124,2052352,2052353,2052380,2054400,2054401,2054428,2056192,2056193,2056220,
2056221,2056448,2056449,2056476,2056477,2056733,2056989,2057245,2057501,2057757,2058013,2058240,
2058241,2058268,2058269,2058496,2058497,2058524,2058525,2058781,2059037,2059293,2059549,2059805,
2060061,2060317,2061341,2063389,2078237,2080512,2080513,2080540,2082333,2094621,2096640,2096641,
2096668,2199579,2200091,2200603,2215963,2216475,2216987,2229019,2230299,2231067,2237211,2237723,
2243611,2245403,2245915,2246683,2247963,2253083,2253851,2254107,2257435,2257691,2258459,2258715,
2259483,2259739,2259995,2260251,2261531,2261787,2262555,2262811,2265371,2265627,2269723,2271259,
2271515,2272027,2273819,2274075,2274331,2274587,3163700,3164980,3165492,3166004,3166516,3167028,
3167540,3168052,3168564,3169076,3169588,3170100,3170612,3171380,3171892,3172404,3174196,3174197,
3174964,3174965,3175732,3175733,3176500,3176501,3177268,3177269,3185972,3188276,3189556,3190068,
3190580,3191092,3191604,3192116,3192628,3193140,3193652,3194164,3194676,3195188,3195956,3196468,
3196980,3198772,3198773,3199540,3199541,3200308,3200309,3201076,3201077,3201844,3201845,3206964,
3207220,3207476,3207732,3210548,17865014,17865526,17868086,17903927,17904183,18040632,18040633,
18135354,18135355,18135356,18200637,18200893,18429246,
};
// The composite of each key.
static const uint32_t fat5__uc_comp_val[941] = {
8814,8800,8815,192,193,194,195,256,258,550,196,7842,197,461,512,514,7840,7680,260,7682,7684,7686,
262,264,266,268,199,7690,270,7692,7696,7698,7694,200,201,202,7868,274,276,278,203,7866,282,516,518,
7864,552,280,7704,7706,7710,500,284,7712,286,288,486,290,292,7714,7718,542,7716,7720,7722,204,205,
206,296,298,300,304,207,7880,463,520,522,7882,302,7724,308,7728,488,7730,310,7732,313,317,7734,315,
7740,7738,7742,7744,7746,504,323,209,7748,327,7750,325,7754,7752,210,211,212,213,332,334,558,214,
7886,336,465,524,526,416,7884,490,7764,7766,340,7768,344,528,530,7770,342,7774,346,348,7776,352,
7778,536,350,7786,356,7788,538,354,7792,7790,217,218,219,360,362,364,220,7910,366,368,467,532,534,
431,7908,7794,370,7798,7796,7804,7806,7808,7810,372,7814,7812,7816,7818,7820,7922,221,374,7928,562,
7822,376,7926,7924,377,7824,379,381,7826,7828,224,225,226,227,257,259,551,228,7843,229,462,513,515,
7841,7681,261,7683,7685,7687,263,265,267,269,231,7691,271,7693,7697,7699,7695,232,233,234,7869,275,
277,279,235,7867,283,517,519,7865,553,281,7705,7707,7711,501,285,7713,287,289,487,291,293,7715,
7719,543,7717,7721,7723,7830,236,237,238,297,299,301,239,7881,464,521,523,7883,303,7725,309,496,
7729,489,7731,311,7733,314,318,7735,316,7741,7739,7743,7745,7747,505,324,241,7749,328,7751,326,
7755,7753,242,243,244,245,333,335,559,246,7887,337,466,525,527,417,7885,491,7765,7767,341,7769,345,
529,531,7771,343,7775,347,349,7777,353,7779,537,351,7787,7831,357,7789,539,355,7793,7791,249,250,
251,361,363,365,252,7911,367,369,468,533,535,432,7909,7795,371,7799,7797,7805,7807,7809,7811,373,
7815,7813,7832,7817,7819,7821,7923,253,375,7929,563,7823,255,7927,7833,7925,378,7825,380,382,7827,
7829,8173,901,8129,7846,7844,7850,7848,478,506,508,482,7688,7872,7870,7876,7874,7726,7890,7888,
7894,7892,7756,556,7758,554,510,475,471,469,473,7847,7845,7851,7849,479,507,509,483,7689,7873,7871,
7877,7875,7727,7891,7889,7895,7893,7757,557,7759,555,511,476,472,470,474,7856,7854,7860,7858,7857,
7855,7861,7859,7700,7702,7701,7703,7760,7762,7761,7763,7780,7781,7782,7783,7800,7801,7802,7803,
7835,7900,7898,7904,7902,7906,7901,7899,7905,7903,7907,7914,7912,7918,7916,7920,7915,7913,7919,
7917,7921,494,492,493,480,481,7708,7709,560,561,495,8122,902,8121,8120,7944,7945,8124,8136,904,
7960,7961,8138,905,7976,7977,8140,8154,906,8153,8152,938,7992,7993,8184,908,8008,8009,8172,8170,
910,8169,8168,939,8025,8186,911,8040,8041,8188,8116,8132,8048,940,8113,8112,7936,7937,8118,8115,
8050,941,7952,7953,8052,942,7968,7969,8134,8131,8054,943,8145,8144,970,7984,7985,8150,8056,972,
8000,8001,8164,8165,8058,973,8161,8160,971,8016,8017,8166,8060,974,8032,8033,8182,8179,8146,912,
8151,8162,944,8167,8180,979,980,1031,1232,1234,1027,1024,1238,1025,1217,1244,1246,1037,1250,1049,
1252,1036,1254,1262,1038,1264,1266,1268,1272,1260,1233,1235,1107,1104,1239,1105,1218,1245,1247,
1117,1251,1081,1253,1116,1255,1263,1118,1265,1267,1269,1273,1261,1111,1142,1143,1242,1243,1258,
1259,1570,1571,1573,1572,1574,1730,1747,1728,2345,2353,2356,2507,2508,2891,2888,2892,2964,3018,
3020,3019,3144,3264,3274,3271,3272,3275,3402,3404,3403,3546,3548,3550,3549,4134,6918,6920,6922,
6924,6926,6930,6971,6973,6976,6977,6979,7736,7737,7772,7773,7784,7785,7852,7862,7853,7863,7878,
7879,7896,7897,7938,7940,7942,8064,7939,7941,7943,8065,8066,8067,8068,8069,8070,8071,7946,7948,
7950,8072,7947,7949,7951,8073,8074,8075,8076,8077,8078,8079,7954,7956,7955,7957,7962,7964,7963,
7965,7970,7972,7974,8080,7971,7973,7975,8081,8082,8083,8084,8085,8086,8087,7978,7980,7982,8088,
7979,7981,7983,8089,8090,8091,8092,8093,8094,8095,7986,7988,7990,7987,7989,7991,7994,7996,7998,
7995,7997,7999,8002,8004,8003,8005,8010,8012,8011,8013,8018,8020,8022,8019,8021,8023,8027,8029,
8031,8034,8036,8038,8096,8035,8037,8039,8097,8098,8099,8100,8101,8102,8103,8042,8044,8046,8104,
8043,8045,8047,8105,8106,8107,8108,8109,8110,8111,8114,8130,8178,8119,8141,8142,8143,8135,8183,
8157,8158,8159,8602,8603,8622,8653,8655,8654,8708,8713,8716,8740,8742,8769,8772,8775,8777,8813,
8802,8816,8817,8820,8821,8824,8825,8832,8833,8928,8929,8836,8837,8840,8841,8930,8931,8876,8877,
8878,8879,8938,8939,8940,8941,12436,12364,12366,12368,12370,12372,12374,12376,12378,12380,12382,
12384,12386,12389,12391,12393,12400,12401,12403,12404,12406,12407,12409,12410,12412,12413,12446,
12532,12460,12462,12464,12466,12468,12470,12472,12474,12476,12478,12480,12482,12485,12487,12489,
12496,12497,12499,12500,12502,12503,12505,12506,12508,12509,12535,12536,12537,12538,12542,69786,
69788,69803,69934,69935,70475,70476,70844,70843,70846,71098,71099,71992,
};
// END GENERATED by tools/gen_unicode.py

// Grapheme_Cluster_Break values (bits 0-3 of fat5__uc_prop)
enum { FAT5__GB_OTHER, FAT5__GB_CR, FAT5__GB_LF, FAT5__GB_CONTROL, FAT5__GB_EXTEND, FAT5__GB_ZWJ,
       FAT5__GB_RI, FAT5__GB_PREPEND, FAT5__GB_SPACINGMARK, FAT5__GB_L, FAT5__GB_V, FAT5__GB_T,
       FAT5__GB_LV, FAT5__GB_LVT };
// normalization forms (UAX #15) for fat5__unorm
enum { FAT5__NFC, FAT5__NFD, FAT5__NFKC, FAT5__NFKD };
#define FAT5__UC_COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FAT5__UC_MAXDEC 18   // the longest full decomposition (U+FDFA); tools/gen_unicode.py checks it

// the index of the last entry of the sorted t[0..n) whose key (t[i] >> shift) is <= key; 0 when
// there is none (the caller checks t[0])
static size_t fat5__uc_floor(const uint32_t *t, size_t n, uint32_t key, int shift) {
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((t[mid] >> shift) <= key) lo = mid;
        else hi = mid;
    }
    return lo;
}

// the low byte of the entry of a start << 8 | value range table that covers cp
static unsigned fat5__uc_range(const uint32_t *t, size_t n, uint32_t cp) {
    return (unsigned)(t[fat5__uc_floor(t, n, cp, 8)] & 0xFF);
}

static unsigned fat5__uc_props(uint32_t cp) {
    if (cp < 128) return fat5__uc_prop_ascii[cp];
    return fat5__uc_range(fat5__uc_prop, FAT5__UC_COUNT(fat5__uc_prop), cp);
}
static FAT5__UNUSED int fat5__uc_gcb(uint32_t cp) { return (int)(fat5__uc_props(cp) & 15); }
static FAT5__UNUSED int fat5__uc_extpict(uint32_t cp) { return (fat5__uc_props(cp) & 16) != 0; }
static FAT5__UNUSED int fat5__uc_is_letter(uint32_t cp) { return (fat5__uc_props(cp) & 32) != 0; }
static FAT5__UNUSED int fat5__uc_is_number(uint32_t cp) { return (fat5__uc_props(cp) & 64) != 0; }
static FAT5__UNUSED int fat5__uc_is_white_space(uint32_t cp) { return (fat5__uc_props(cp) & 128) != 0; }
// a word character of regular expressions (\w: Alphabetic, marks, decimal digits, connector
// punctuation, Join_Control)
static FAT5__UNUSED int fat5__uc_is_word(uint32_t cp) {
    return fat5__uc_range(fat5__uc_word, FAT5__UC_COUNT(fat5__uc_word), cp) != 0;
}

// Canonical_Combining_Class (0 below U+0300)
static unsigned fat5__uc_cc(uint32_t cp) {
    return cp < 0x300 ? 0 : fat5__uc_range(fat5__uc_ccc, FAT5__UC_COUNT(fat5__uc_ccc), cp);
}

// Decodes one code point of valid UTF-8 (n >= 1 bytes at s); *len gets its length. A byte that does
// not start a valid sequence reads as U+FFFD of length 1, so that a caller always advances.
static FAT5__UNUSED uint32_t fat5__utf8_cp(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = fat5__utf8_len(s, n);
    *len = k ? k : 1;
    switch (k) {
    case 1: return u[0];
    case 2: return (uint32_t)(u[0] & 0x1F) << 6 | (uint32_t)(u[1] & 0x3F);
    case 3: return (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (uint32_t)(u[2] & 0x3F);
    case 4:
        return (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 | (uint32_t)(u[2] & 0x3F) << 6 |
               (uint32_t)(u[3] & 0x3F);
    default: return 0xFFFD;
    }
}

// Extended grapheme clusters (UAX #29, Unicode FAT5__UNICODE_VERSION): the byte length of the cluster
// at s (1..n), as unicode-segmentation's graphemes(true). Rules GB3-GB13 and GB999; GB9c (Indic
// conjunct breaks, Unicode 15.1, which unicode-segmentation 1.12 implements) needs the
// Indic_Conjunct_Break property that the Unicode 15.0 data does not have, so it is not applied.
static FAT5__UNUSED size_t fat5__grapheme_len(const char *s, size_t n) {
    size_t len, i;
    uint32_t cp;
    // an ASCII character before another one (CR LF aside) is a cluster of its own: no ASCII
    // character extends, prepends or joins
    if ((unsigned char)s[0] < 0x80 && (n == 1 || ((unsigned char)s[1] < 0x80 && !(s[0] == '\r' && s[1] == '\n')))) return 1;
    cp = fat5__utf8_cp(s, n, &len);
    unsigned p = fat5__uc_props(cp), prev = p & 15;
    int ri = prev == FAT5__GB_RI;            // regional indicators so far in a row (GB12/GB13)
    int emoji = (p & 16) ? 1 : 0;            // 1: ExtPict Extend*, 2: ExtPict Extend* ZWJ (GB11)
    for (i = len; i < n; i += len, prev = p & 15) {
        unsigned g;
        int join;
        cp = fat5__utf8_cp(s + i, n - i, &len);
        p = fat5__uc_props(cp);
        g = p & 15;
        if (prev == FAT5__GB_CR && g == FAT5__GB_LF) join = 1;                                    // GB3
        else if (prev == FAT5__GB_CR || prev == FAT5__GB_LF || prev == FAT5__GB_CONTROL) join = 0;  // GB4
        else if (g == FAT5__GB_CR || g == FAT5__GB_LF || g == FAT5__GB_CONTROL) join = 0;           // GB5
        else if (prev == FAT5__GB_L && (g == FAT5__GB_L || g == FAT5__GB_V || g == FAT5__GB_LV || g == FAT5__GB_LVT))
            join = 1;                                                                               // GB6
        else if ((prev == FAT5__GB_LV || prev == FAT5__GB_V) && (g == FAT5__GB_V || g == FAT5__GB_T)) join = 1;  // GB7
        else if ((prev == FAT5__GB_LVT || prev == FAT5__GB_T) && g == FAT5__GB_T) join = 1;      // GB8
        else if (g == FAT5__GB_EXTEND || g == FAT5__GB_ZWJ || g == FAT5__GB_SPACINGMARK) join = 1;  // GB9, GB9a
        else if (prev == FAT5__GB_PREPEND) join = 1;                                               // GB9b
        else if (emoji == 2 && (p & 16)) join = 1;                                                 // GB11
        else if (prev == FAT5__GB_RI && g == FAT5__GB_RI && (ri & 1)) join = 1;                    // GB12, GB13
        else join = 0;                                                                             // GB999
        if (!join) return i;
        ri = g == FAT5__GB_RI ? ri + 1 : 0;
        if (p & 16) emoji = 1;
        else if (emoji == 1 && g == FAT5__GB_EXTEND) emoji = 1;
        else if (emoji == 1 && g == FAT5__GB_ZWJ) emoji = 2;
        else emoji = 0;
    }
    return n;
}

// ---- normalization (UAX #15) ----

// The one-level mapping of cp in a decomposition table (code points to m), its length; 0 when none.
static size_t fat5__uc_map(const uint32_t *key, const uint32_t *val, size_t n, uint32_t cp, uint32_t *m) {
    size_t lo, j, len;
    uint32_t k, v;
    if (n == 0 || (key[0] >> 8) > cp) return 0;
    lo = fat5__uc_floor(key, n, cp, 8);
    k = cp - (key[lo] >> 8);
    if (k > (key[lo] & 0xFF)) return 0;
    len = val[lo] & 31;
    v = val[lo] >> 5;
    if (len == 1) {
        m[0] = v + k;
        return 1;
    }
    for (j = 0; j < len; j++) m[j] = fat5__uc_dec_pool[v + k * len + j];
    return len;
}

// The full canonical (compat 0) or compatibility decomposition of cp to out (room for
// FAT5__UC_MAXDEC), its length; not yet in canonical order.
static size_t fat5__uc_decompose(uint32_t cp, int compat, uint32_t *out) {
    uint32_t m[FAT5__UC_MAXDEC];
    size_t n = 0, i, k = 0;
    if (cp < 0xA0) {
        out[0] = cp;
        return 1;
    }
    if (cp - 0xAC00u < 11172u) {   // Hangul syllable: L V or L V T
        uint32_t s = cp - 0xAC00u;
        out[0] = 0x1100u + s / 588u;
        out[1] = 0x1161u + s % 588u / 28u;
        if (s % 28u == 0) return 2;
        out[2] = 0x11A7u + s % 28u;
        return 3;
    }
    if (compat) n = fat5__uc_map(fat5__uc_kdec_key, fat5__uc_kdec_val, FAT5__UC_COUNT(fat5__uc_kdec_key), cp, m);
    if (!n) n = fat5__uc_map(fat5__uc_dec_key, fat5__uc_dec_val, FAT5__UC_COUNT(fat5__uc_dec_key), cp, m);
    if (!n) {
        out[0] = cp;
        return 1;
    }
    for (i = 0; i < n; i++) k += fat5__uc_decompose(m[i], compat, out + k);
    return k;
}

// The primary composite of the pair a b, 0 when there is none.
static uint32_t fat5__uc_compose(uint32_t a, uint32_t b) {
    size_t lo;
    uint32_t key;
    if (a - 0x1100u < 19u && b - 0x1161u < 21u) return 0xAC00u + ((a - 0x1100u) * 21u + (b - 0x1161u)) * 28u;
    if (a - 0xAC00u < 11172u && (a - 0xAC00u) % 28u == 0 && b - 0x11A8u < 27u) return a + (b - 0x11A7u);
    if (b < fat5__uc_comp_second[0]) return 0;
    lo = fat5__uc_floor(fat5__uc_comp_second, FAT5__UC_COUNT(fat5__uc_comp_second), b, 0);
    if (fat5__uc_comp_second[lo] != b) return 0;
    key = a << 8 | (uint32_t)lo;
    lo = fat5__uc_floor(fat5__uc_comp_key, FAT5__UC_COUNT(fat5__uc_comp_key), key, 0);
    return fat5__uc_comp_key[lo] == key ? fat5__uc_comp_val[lo] : 0;
}

// The decomposed text as a stream of code points: the input, and the decomposition of the code point
// being read. A copy of the struct is a saved position.
typedef struct fat5__udec {
    const char *s;
    size_t n, i;                     // the input, the offset of the next code point to decompose
    uint32_t d[FAT5__UC_MAXDEC];
    unsigned dn, di;                 // the current decomposition, the index of the next in it
    int compat;
} fat5__udec;

// the next code point of the stream without taking it; 0 at the end
static int fat5__udec_peek(fat5__udec *D, uint32_t *cp) {
    if (D->di == D->dn) {
        size_t len;
        uint32_t c;
        if (D->i >= D->n) return 0;
        c = fat5__utf8_cp(D->s + D->i, D->n - D->i, &len);
        D->i += len;
        D->dn = (unsigned)fat5__uc_decompose(c, D->compat, D->d);
        D->di = 0;
    }
    *cp = D->d[D->di];
    return 1;
}

// A run of non-starters (combining class > 0) of the stream, read in canonical order (stable by
// class). Up to FAT5__UC_RUN marks are sorted in buf; a longer run is read in one pass over the
// stream per class in it (O(marks x classes), no memory).
#define FAT5__UC_RUN 32
typedef struct fat5__urun {
    fat5__udec start, cur;           // the stream at the run's first mark; the pass reading it
    size_t k, pos;                   // marks in the run; the next index (buffered) or in the pass
    unsigned cls, next, first;       // class of this pass, least class above it seen, least class
    uint32_t buf[FAT5__UC_RUN];
    unsigned char cc[FAT5__UC_RUN];
} fat5__urun;

static void fat5__urun_rewind(fat5__urun *R) {
    R->pos = 0;
    R->cur = R->start;
    R->cls = R->first;
    R->next = 256;
}

// reads the run at D (whose next code point is a non-starter); D is left after it
static void fat5__urun_open(fat5__urun *R, fat5__udec *D) {
    uint32_t c;
    R->start = *D;
    R->k = 0;
    R->first = 256;
    while (fat5__udec_peek(D, &c)) {
        unsigned x = fat5__uc_cc(c);
        if (!x) break;
        if (R->k < FAT5__UC_RUN) {
            size_t j = R->k;   // insertion sort, stable
            while (j > 0 && R->cc[j - 1] > x) {
                R->buf[j] = R->buf[j - 1];
                R->cc[j] = R->cc[j - 1];
                j--;
            }
            R->buf[j] = c;
            R->cc[j] = (unsigned char)x;
        }
        if (x < R->first) R->first = x;
        R->k++;
        D->di++;
    }
    fat5__urun_rewind(R);
}

static int fat5__urun_next(fat5__urun *R, uint32_t *cp, unsigned *cls) {
    if (R->k <= FAT5__UC_RUN) {
        if (R->pos == R->k) return 0;
        *cp = R->buf[R->pos];
        *cls = R->cc[R->pos++];
        return 1;
    }
    for (;;) {
        uint32_t c = 0;
        unsigned x;
        if (R->pos == R->k) {   // the pass is over: the next class
            if (R->next > 255) return 0;
            R->cls = R->next;
            R->next = 256;
            R->cur = R->start;
            R->pos = 0;
        }
        fat5__udec_peek(&R->cur, &c);
        R->cur.di++;
        R->pos++;
        x = fat5__uc_cc(c);
        if (x == R->cls) {
            *cp = c;
            *cls = x;
            return 1;
        }
        if (x > R->cls && x < R->next) R->next = x;
    }
}

// the output: bytes go to out while they fit whole code points; len counts them all
typedef struct fat5__uout {
    char *out;
    size_t cap, len, w;
} fat5__uout;

static void fat5__uout_put(fat5__uout *O, uint32_t cp) {
    char b[4];
    size_t k = fat5__utf8_put(b, cp);
    if (O->w == O->len && O->len + k <= O->cap) {
        memcpy(O->out + O->w, b, k);
        O->w += k;
    }
    O->len += k;
}

// Normalization form `form` (FAT5__NFC, FAT5__NFD, FAT5__NFKC, FAT5__NFKD) of the valid UTF-8 s[0..n):
// writes at most cap bytes to out (whole code points, no NUL) and returns the length of the whole
// result, like snprintf. No allocation; any length of combining marks is handled.
static FAT5__UNUSED size_t fat5__unorm(int form, const char *s, size_t n, char *out, size_t cap) {
    fat5__udec D;
    fat5__urun R;
    fat5__uout O;
    int compose = form == FAT5__NFC || form == FAT5__NFKC, hasL = 0;
    uint32_t L = 0, c, x;
    unsigned cl;
    D.s = s;
    D.n = n;
    D.i = 0;
    D.dn = D.di = 0;
    D.compat = form == FAT5__NFKC || form == FAT5__NFKD;
    O.out = out;
    O.cap = out ? cap : 0;
    O.len = O.w = 0;
    for (;;) {
        // ASCII followed by ASCII (or the end): its own normalization, and it composes with nothing
        if (D.di == D.dn && D.i < n && (unsigned char)s[D.i] < 0x80 &&
            (D.i + 1 == n || (unsigned char)s[D.i + 1] < 0x80)) {
            if (hasL) fat5__uout_put(&O, L);
            hasL = 0;
            fat5__uout_put(&O, (unsigned char)s[D.i++]);
            continue;
        }
        if (!fat5__udec_peek(&D, &c)) break;
        if (fat5__uc_cc(c) == 0) {   // a starter
            D.di++;
            if (!compose) {
                fat5__uout_put(&O, c);
            } else if (hasL && (x = fat5__uc_compose(L, c)) != 0) {
                L = x;   // no mark stands between: the last starter takes it
            } else {
                if (hasL) fat5__uout_put(&O, L);
                L = c;
                hasL = 1;
            }
            continue;
        }
        fat5__urun_open(&R, &D);
        if (!compose || !hasL) {
            while (fat5__urun_next(&R, &c, &cl)) fat5__uout_put(&O, c);
            continue;
        }
        // Composition with the last starter: a mark is blocked when a mark of its class (the run is
        // in order) stayed before it. One pass finds the final starter, a second writes the marks
        // that stay; the starter stays open for a following starter when no mark stayed.
        {
            uint32_t L2 = L;
            unsigned last = 0;
            while (fat5__urun_next(&R, &c, &cl)) {
                if (last < cl && (x = fat5__uc_compose(L2, c)) != 0) L2 = x;
                else last = cl;
            }
            if (last == 0) {
                L = L2;
                continue;
            }
            fat5__uout_put(&O, L2);
            fat5__urun_rewind(&R);
            L2 = L;
            last = 0;
            while (fat5__urun_next(&R, &c, &cl)) {
                if (last < cl && (x = fat5__uc_compose(L2, c)) != 0) {
                    L2 = x;
                } else {
                    last = cl;
                    fat5__uout_put(&O, c);
                }
            }
            hasL = 0;
        }
    }
    if (hasL) fat5__uout_put(&O, L);
    return O.len;
}

// ==[8.2] text: tokenizers ==
//
// Two file kinds, one tokenizer object. A tokenizer.json is interpreted as the `tokenizers`
// library does (added tokens split off the raw text, then normalizers, pre-tokenizers, the model,
// the post-processor; decoders on the way back); a SentencePiece model as the `sentencepiece`
// library does (its own normaliser and whitespace rules, Unigram or BPE, byte fallback). The two
// share the vocabulary, the byte trie and the Unigram lattice, and differ where the libraries
// differ: sentencepiece adds in float, tokenizers in double; sentencepiece takes the longest
// charsmap rule at each byte, tokenizers the first one per grapheme cluster.
//
// Everything read from a file is bounded and checked: piece and vocabulary sizes, the protobuf's
// wire types and lengths, the charsmap's double array (each unit's target inside the array, as
// darts-clone's validate), JSON member types. Errors name the field.

#define FAT5__TOK_MAX_FILE ((size_t)1 << 30)    // a tokenizer file larger than 1 GiB is refused
#define FAT5__TOK_MAX_PIECE 8000                // bytes of one piece (sentencepiece's limit)
#define FAT5__TOK_MAX_VOCAB ((int64_t)1 << 24)  // pieces + added tokens

// ---------------------------------------------------------------------------------------------
// growable scratch buffers, kept by the tokenizer between calls

typedef struct fat5__tbuf { char *p; size_t n, cap; } fat5__tbuf;        // bytes
typedef struct fat5__ubuf { uint32_t *p; size_t n, cap; } fat5__ubuf;    // 32-bit values

static int fat5__grow(fat5_ctx *ctx, void **p, size_t *cap, size_t need, size_t elem) {
    size_t c = *cap ? *cap : 64, bytes;
    void *q;
    if (need <= *cap) return 1;
    while (c < need) {
        if (c > SIZE_MAX / 2) return 0;
        c *= 2;
    }
    if (!fat5__mul_ok(c, elem, &bytes)) return 0;
    q = fat5__realloc(ctx, *p, bytes);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}
static int fat5__tbuf_put(fat5_ctx *ctx, fat5__tbuf *b, const char *s, size_t n) {
    size_t need;
    if (!fat5__add_ok(b->n, n + 1, &need) || !fat5__grow(ctx, (void **)&b->p, &b->cap, need, 1)) return 0;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 1;
}
static int fat5__ubuf_push(fat5_ctx *ctx, fat5__ubuf *b, uint32_t v) {
    if (!fat5__grow(ctx, (void **)&b->p, &b->cap, b->n + 1, sizeof(uint32_t))) return 0;
    b->p[b->n++] = v;
    return 1;
}
static int fat5__ubuf_append(fat5_ctx *ctx, fat5__ubuf *b, const uint32_t *v, size_t n) {
    if (!fat5__grow(ctx, (void **)&b->p, &b->cap, b->n + n, sizeof(uint32_t))) return 0;
    if (n) memcpy(b->p + b->n, v, n * sizeof *v);
    b->n += n;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// A byte trie over a set of keys (the vocabulary, the user-defined pieces, the added tokens).
// Node 0 is the root; a node's children are contiguous and sorted by label; value is the key's
// id or -1. Built from the keys sorted bytewise, in breadth-first order.

typedef struct fat5__tnode {
    int32_t value;
    uint32_t first;    // first child
    uint16_t n;        // children
    uint8_t label;     // the byte leading here
} fat5__tnode;

typedef struct fat5__trie {
    fat5__tnode *node;
    size_t n_nodes;
    size_t max_len;    // the longest key
    uint32_t root[256];   // the root's children by byte (0: none), the step every search starts with
} fat5__trie;

typedef struct fat5__tkeys {   // keys for a trie: key i is s + off[i], len[i] bytes, id[i]
    const char *s;
    const uint32_t *off, *len;
    const int32_t *id;
} fat5__tkeys;

static int fat5__tkey_cmp(const fat5__tkeys *k, uint32_t a, uint32_t b) {
    uint32_t la = k->len[a], lb = k->len[b];
    int c = memcmp(k->s + k->off[a], k->s + k->off[b], la < lb ? la : lb);
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return k->id[a] < k->id[b] ? -1 : k->id[a] > k->id[b];
}

// stable bottom-up merge sort of idx[0..n) by the keys
static void fat5__tkey_sort(const fat5__tkeys *k, uint32_t *idx, uint32_t *tmp, size_t n) {
    size_t w, i;
    uint32_t *a = idx, *b = tmp;
    for (w = 1; w < n; w *= 2) {
        for (i = 0; i < n; i += 2 * w) {
            size_t lo = i, mid = i + w < n ? i + w : n, hi = i + 2 * w < n ? i + 2 * w : n, p = lo, q = mid, o = lo;
            while (p < mid && q < hi) b[o++] = fat5__tkey_cmp(k, a[q], a[p]) < 0 ? a[q++] : a[p++];
            while (p < mid) b[o++] = a[p++];
            while (q < hi) b[o++] = a[q++];
        }
        { uint32_t *t = a; a = b; b = t; }
    }
    if (a != idx) memcpy(idx, a, n * sizeof *idx);
}

static void fat5__trie_free(fat5_ctx *ctx, fat5__trie *t) {
    fat5__free(ctx, t->node);
    memset(t, 0, sizeof *t);
}

// Builds the trie of keys[0..n); equal keys keep the last id (a later entry of a vocabulary wins,
// as in a hash map filled in order).
static fat5_status fat5__trie_build(fat5_ctx *ctx, const fat5__tkeys *k, size_t n, fat5__trie *t) {
    uint32_t *idx = NULL, *tmp = NULL, *lo = NULL, *hi = NULL, *depth = NULL;
    size_t total = 1, i, used = 1;
    fat5_status st = FAT5_OK;
    memset(t, 0, sizeof *t);
    for (i = 0; i < n; i++) {
        if (!fat5__add_ok(total, k->len[i], &total)) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: trie too large");
        if (k->len[i] > t->max_len) t->max_len = k->len[i];
    }
    if (total > UINT32_MAX) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "tokenizer: the vocabulary holds more than 4 GiB of text");
    idx = FAT5__CAST(uint32_t *, fat5__calloc(ctx, n + 1, sizeof *idx));
    tmp = FAT5__CAST(uint32_t *, fat5__calloc(ctx, n + 1, sizeof *tmp));
    lo = FAT5__CAST(uint32_t *, fat5__calloc(ctx, total, sizeof *lo));
    hi = FAT5__CAST(uint32_t *, fat5__calloc(ctx, total, sizeof *hi));
    depth = FAT5__CAST(uint32_t *, fat5__calloc(ctx, total, sizeof *depth));
    t->node = FAT5__CAST(fat5__tnode *, fat5__calloc(ctx, total, sizeof *t->node));
    if (!idx || !tmp || !lo || !hi || !depth || !t->node) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory building the trie");
        goto done;
    }
    for (i = 0; i < n; i++) idx[i] = (uint32_t)i;
    fat5__tkey_sort(k, idx, tmp, n);
    t->node[0].value = -1;
    lo[0] = 0;
    hi[0] = (uint32_t)n;
    depth[0] = 0;
    for (i = 0; i < used; i++) {   // breadth-first: a node's children are appended together
        uint32_t a = lo[i], b = hi[i], d = depth[i];
        while (a < b && k->len[idx[a]] == d) t->node[i].value = k->id[idx[a++]];
        t->node[i].first = (uint32_t)used;
        while (a < b) {
            uint8_t c = (uint8_t)k->s[k->off[idx[a]] + d];
            uint32_t e = a;
            while (e < b && (uint8_t)k->s[k->off[idx[e]] + d] == c) e++;
            t->node[used].value = -1;
            t->node[used].label = c;
            lo[used] = a;
            hi[used] = e;
            depth[used] = d + 1;
            used++;
            t->node[i].n++;
            a = e;
        }
    }
    t->n_nodes = used;
    for (i = 0; i < t->node[0].n; i++) t->root[t->node[t->node[0].first + i].label] = t->node[0].first + (uint32_t)i;
done:
    fat5__free(ctx, idx);
    fat5__free(ctx, tmp);
    fat5__free(ctx, lo);
    fat5__free(ctx, hi);
    fat5__free(ctx, depth);
    if (st != FAT5_OK) fat5__trie_free(ctx, t);
    return st;
}

// the child of node labelled c, 0 when none (the root is nobody's child)
static uint32_t fat5__trie_next(const fat5__trie *t, uint32_t node, uint8_t c) {
    const fat5__tnode *nd;
    uint32_t a, b;
    if (!t->node) return 0;
    if (node == 0) return t->root[c];
    nd = &t->node[node];
    a = nd->first;
    b = nd->first + nd->n;
    while (a < b) {
        uint32_t m = a + (b - a) / 2;
        if (t->node[m].label < c) a = m + 1;
        else b = m;
    }
    return a < nd->first + nd->n && t->node[a].label == c ? a : 0;
}

// the id of exactly s[0..n), -1 when it is not a key
static int32_t fat5__trie_find(const fat5__trie *t, const char *s, size_t n) {
    uint32_t node = 0;
    size_t i;
    if (!t->node) return -1;
    for (i = 0; i < n; i++)
        if ((node = fat5__trie_next(t, node, (uint8_t)s[i])) == 0) return -1;
    return t->node[node].value;
}

// the longest key that is a prefix of s[0..n): its length (0: none) and *id
static size_t fat5__trie_longest(const fat5__trie *t, const char *s, size_t n, int32_t *id) {
    uint32_t node = 0;
    size_t i, best = 0;
    if (!t->node) return 0;
    for (i = 0; i < n; i++) {
        if ((node = fat5__trie_next(t, node, (uint8_t)s[i])) == 0) break;
        if (t->node[node].value >= 0) {
            best = i + 1;
            *id = t->node[node].value;
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------------------
// SentencePiece's precompiled charsmap: a uint32 (little-endian) byte size of a darts-clone
// double array, the array, then a pool of NUL-terminated replacement strings.

typedef struct fat5__charsmap {
    uint32_t *unit;
    size_t n_units;
    char *pool;        // ends with a NUL (added when the file's pool does not)
    size_t pool_len;
} fat5__charsmap;

#define FAT5__DA_LEAF(u) (((u) >> 8) & 1u)
#define FAT5__DA_VALUE(u) ((u) & 0x7fffffffu)
#define FAT5__DA_LABEL(u) ((u) & 0x800000ffu)
#define FAT5__DA_OFFSET(u) (((u) >> 10) << (((u) & 0x200u) >> 6))

static void fat5__charsmap_free(fat5_ctx *ctx, fat5__charsmap *m) {
    fat5__free(ctx, m->unit);
    fat5__free(ctx, m->pool);
    memset(m, 0, sizeof *m);
}

static fat5_status fat5__charsmap_load(fat5_ctx *ctx, const char *what, const unsigned char *b, size_t len,
                                       fat5__charsmap *m) {
    uint32_t size;
    size_t i;
    memset(m, 0, sizeof *m);
    if (len <= 4) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: precompiled charsmap of %zu bytes (truncated)", what, len);
    size = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (size >= len - 4 || size < 1024 || (size & 0x3ff) != 0)
        return fat5__err(ctx, FAT5_ERR_FORMAT,
                         "%s: precompiled charsmap: trie of %u bytes in a blob of %zu (want a multiple of 1024 "
                         "smaller than the blob)", what, (unsigned)size, len);
    m->n_units = size / 4;
    m->pool_len = len - 4 - size;
    m->unit = FAT5__CAST(uint32_t *, fat5__calloc(ctx, m->n_units, sizeof *m->unit));
    m->pool = FAT5__CAST(char *, fat5__malloc(ctx, m->pool_len + 1));
    if (!m->unit || !m->pool) {
        fat5__charsmap_free(ctx, m);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    for (i = 0; i < m->n_units; i++) {
        const unsigned char *p = b + 4 + 4 * i;
        m->unit[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    memcpy(m->pool, b + 4 + size, m->pool_len);
    m->pool[m->pool_len] = 0;
    // darts-clone's validate: every transition stays inside the array, every value inside the pool
    if (FAT5__DA_LABEL(m->unit[0]) != 0 || FAT5__DA_LEAF(m->unit[0]) || FAT5__DA_OFFSET(m->unit[0]) == 0 ||
        ((size_t)FAT5__DA_OFFSET(m->unit[0]) | 0xff) >= m->n_units)
        goto bad;
    for (i = 1; i < m->n_units; i++) {
        uint32_t u = m->unit[i];
        if (FAT5__DA_LABEL(u) <= 0xff) {
            if (((i ^ FAT5__DA_OFFSET(u)) | 0xff) >= m->n_units) goto bad;
            if (FAT5__DA_LEAF(u) && FAT5__DA_LABEL(m->unit[i ^ FAT5__DA_OFFSET(u)]) <= 0xff) goto bad;
        } else if (FAT5__DA_VALUE(u) >= m->pool_len) {
            goto bad;
        }
    }
    return FAT5_OK;
bad:
    fat5__charsmap_free(ctx, m);
    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: precompiled charsmap: the double array is invalid", what);
}

// The rules matching a prefix of s[0..n) (stopping at a NUL byte), shortest first. Calls back
// with (length, replacement); returns how many matched.
typedef struct fat5__cm_match { size_t len; const char *repl; } fat5__cm_match;

static size_t fat5__charsmap_search(const fat5__charsmap *m, const char *s, size_t n, fat5__cm_match *out,
                                    size_t cap) {
    size_t pos, i, k = 0;
    uint32_t u;
    if (!m->unit) return 0;
    u = m->unit[0];
    pos = FAT5__DA_OFFSET(u);
    for (i = 0; i < n && s[i]; i++) {
        pos ^= (uint8_t)s[i];
        u = m->unit[pos];
        if (FAT5__DA_LABEL(u) != (uint8_t)s[i]) break;
        pos ^= FAT5__DA_OFFSET(u);
        if (FAT5__DA_LEAF(u)) {
            if (k < cap) {
                out[k].len = i + 1;
                out[k].repl = m->pool + FAT5__DA_VALUE(m->unit[pos]);
            }
            k++;
        }
    }
    return k;
}

// ---------------------------------------------------------------------------------------------
// UTF-8 as each library takes it. sentencepiece: an invalid byte is U+FFFD and one byte consumed.
// tokenizers (through Python's decode with errors="replace"): one U+FFFD per maximal subpart of an
// ill-formed sequence, i.e. the longest prefix of a valid sequence's shape.

static const char fat5__ufffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

// 1 when s[0..n) is valid UTF-8
static int fat5__utf8_valid_n(const char *s, size_t n) {
    size_t i = 0, k;
    for (; i < n; i += k)
        if ((k = fat5__utf8_len(s + i, n - i)) == 0) return 0;
    return 1;
}

// a byte piece's name, "<0xXX>" with upper-case hex as both libraries write it: 1 and *b its byte
static int fat5__byte_piece(const char *s, size_t n, unsigned *b) {
    static const char hex[] = "0123456789ABCDEF";
    const char *h, *l;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>' || !s[3] || !s[4] || !(h = strchr(hex, s[3])) ||
        !(l = strchr(hex, s[4])))
        return 0;
    if (b) *b = (unsigned)((h - hex) * 16 + (l - hex));
    return 1;
}

// bytes of the maximal subpart at s (n >= 1 bytes, s not valid there): at least 1
static size_t fat5__utf8_subpart(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0], lo = 0x80, hi = 0xBF;
    size_t k, j;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) { k = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 1;
    for (j = 1; j < k && j < n; j++) {
        unsigned char t = (unsigned char)s[j];
        if (t < lo || t > hi) return j;
        lo = 0x80;
        hi = 0xBF;
    }
    return j;
}

// s[0..n) made valid UTF-8 into out (tokenizers' rule); original offsets per output byte in orig
// (when not NULL)
static int fat5__utf8_sanitize(fat5_ctx *ctx, const char *s, size_t n, fat5__tbuf *out, fat5__ubuf *orig) {
    size_t i = 0;
    out->n = 0;
    if (orig) orig->n = 0;
    if (!fat5__tbuf_put(ctx, out, "", 0)) return 0;
    while (i < n) {
        size_t k = fat5__utf8_len(s + i, n - i), j;
        const char *p = s + i;
        size_t w = k;
        if (k == 0) {
            k = fat5__utf8_subpart(s + i, n - i);
            p = fat5__ufffd;
            w = 3;
        }
        if (!fat5__tbuf_put(ctx, out, p, w)) return 0;
        if (orig)
            for (j = 0; j < w; j++)
                if (!fat5__ubuf_push(ctx, orig, (uint32_t)i)) return 0;
        i += k;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// the tokenizer object

enum { FAT5__TM_UNIGRAM = 1, FAT5__TM_BPE = 2 };
// sentencepiece piece types (ModelProto.SentencePiece.Type)
enum { FAT5__SP_NORMAL = 1, FAT5__SP_UNKNOWN = 2, FAT5__SP_CONTROL = 3, FAT5__SP_USER = 4, FAT5__SP_UNUSED = 5,
       FAT5__SP_BYTE = 6 };

// normalizers, pre-tokenizers and decoders of a tokenizer.json, each a flat list (a Sequence
// inside a Sequence is spliced in order)
enum { FAT5__N_PRECOMPILED = 1, FAT5__N_REPLACE, FAT5__N_STRIP, FAT5__N_PREPEND, FAT5__N_NFC,
       FAT5__N_NFD, FAT5__N_NFKC, FAT5__N_NFKD };
enum { FAT5__P_METASPACE = 1, FAT5__P_WHITESPACE_SPLIT, FAT5__P_BYTELEVEL };
enum { FAT5__D_METASPACE = 1, FAT5__D_BYTELEVEL, FAT5__D_BYTEFALLBACK, FAT5__D_FUSE, FAT5__D_STRIP, FAT5__D_REPLACE };

#define FAT5__RE_MAX 16   // atoms of a Replace pattern
typedef struct fat5__re_atom { uint32_t cp; uint32_t min, max; } fat5__re_atom;   // a literal with {min,max}

typedef struct fat5__tstep {
    int kind;
    char *a, *b;            // Replace: pattern / content; Prepend, Metaspace: the string; Strip: content
    size_t a_len, b_len;
    int f1, f2;             // Strip: left/right (normalizer) or start/stop counts (decoder); Metaspace:
                            // prepend scheme (0 always, 1 first, 2 never) and split; ByteLevel:
                            // add_prefix_space and use_regex
    int n_atoms;            // Replace with a regex: its atoms (0: a plain string)
    fat5__re_atom atom[FAT5__RE_MAX];
    fat5__charsmap cm;      // Precompiled
} fat5__tstep;

typedef struct fat5__added {
    uint32_t off, len;      // content in the tokenizer's pool
    int32_t id;
    uint8_t special, lstrip, rstrip, single_word, normalized;
} fat5__added;

typedef struct fat5__titem { int seq; uint32_t first, n; } fat5__titem;   // template: sequence 0/1, or ids

typedef struct fat5__merge { uint64_t key; uint32_t rank, id; } fat5__merge;   // BPE: (a, b) -> rank, new id

struct fat5_tokenizer {
    fat5_ctx *ctx;
    int is_json;
    int model;                 // FAT5__TM_*
    // the model's pieces
    int32_t n_pieces;
    fat5__tbuf pool;           // all strings of the tokenizer, NUL-separated
    uint32_t *off, *len;       // piece i
    double *score;             // Unigram scores
    uint8_t *type;             // sentencepiece types (tokenizer.json: all NORMAL)
    fat5__trie vocab;          // piece -> id
    int32_t unk_id, eos_id, pad_id;
    int byte_fallback;
    int32_t byte_id[256];      // <0xXX> -> id, -1 when absent
    double min_score;
    // sentencepiece
    fat5__trie user;           // user-defined pieces (matched before normalisation, never split)
    fat5__charsmap cm;
    int add_dummy_prefix, remove_extra_ws, escape_ws, ws_suffix;
    uint32_t unk_surface;      // offset in pool
    // tokenizer.json
    fat5__added *added;
    int32_t n_added;
    fat5__trie added_raw, added_norm;   // contents -> index into added (raw text / normalised text)
    int32_t vocab_size;        // max id + 1 over pieces and added tokens
    uint32_t *id_off;          // [vocab_size] piece text of every id (added tokens included), offset in pool
    uint8_t *id_special;       // [vocab_size] 1 for special added tokens
    fat5__tstep *norm, *pre, *dec;
    int n_norm, n_pre, n_dec, has_decoder;
    int fuse_unk, ignore_merges;
    uint32_t cs_prefix, eow_suffix;     // BPE continuing_subword_prefix / end_of_word_suffix (0: none)
    uint32_t cs_prefix_len, eow_suffix_len;
    fat5__merge *merges;       // open-addressing table
    size_t merge_cap;
    fat5__titem *tmpl[2];      // single / pair template
    int n_tmpl[2];
    fat5__ubuf tmpl_ids;
    // scratch, reused by every call
    fat5__tbuf s0, s1, s2, s3, sn;
    fat5__ubuf o0, o1, o2, o3, on, ids, spl, spl2;
    void *lat;                 // lattice: best scores, starts and ids
    size_t lat_cap;
};

static void fat5__steps_free(fat5_ctx *ctx, fat5__tstep *s, int n) {
    int i;
    for (i = 0; s && i < n; i++) {
        fat5__free(ctx, s[i].a);
        fat5__free(ctx, s[i].b);
        fat5__charsmap_free(ctx, &s[i].cm);
    }
    fat5__free(ctx, s);
}

FAT5_API void fat5_tokenizer_destroy(fat5_tokenizer *t) {
    fat5_ctx *ctx;
    if (!t) return;
    ctx = t->ctx;
    fat5__free(ctx, t->pool.p);
    fat5__free(ctx, t->off);
    fat5__free(ctx, t->len);
    fat5__free(ctx, t->score);
    fat5__free(ctx, t->type);
    fat5__trie_free(ctx, &t->vocab);
    fat5__trie_free(ctx, &t->user);
    fat5__charsmap_free(ctx, &t->cm);
    fat5__free(ctx, t->added);
    fat5__trie_free(ctx, &t->added_raw);
    fat5__trie_free(ctx, &t->added_norm);
    fat5__free(ctx, t->id_off);
    fat5__free(ctx, t->id_special);
    fat5__steps_free(ctx, t->norm, t->n_norm);
    fat5__steps_free(ctx, t->pre, t->n_pre);
    fat5__steps_free(ctx, t->dec, t->n_dec);
    fat5__free(ctx, t->merges);
    fat5__free(ctx, t->tmpl[0]);
    fat5__free(ctx, t->tmpl[1]);
    fat5__free(ctx, t->tmpl_ids.p);
    fat5__free(ctx, t->s0.p);
    fat5__free(ctx, t->s1.p);
    fat5__free(ctx, t->s2.p);
    fat5__free(ctx, t->s3.p);
    fat5__free(ctx, t->sn.p);
    fat5__free(ctx, t->on.p);
    fat5__free(ctx, t->o0.p);
    fat5__free(ctx, t->o1.p);
    fat5__free(ctx, t->o2.p);
    fat5__free(ctx, t->o3.p);
    fat5__free(ctx, t->ids.p);
    fat5__free(ctx, t->spl.p);
    fat5__free(ctx, t->spl2.p);
    fat5__free(ctx, t->lat);
    fat5__free(ctx, t);
}

static const char *fat5__piece(const fat5_tokenizer *t, int32_t id) { return t->pool.p + t->off[id]; }

// appends s[0..n) and a NUL to the pool; *off gets where it starts
static int fat5__pool_add(fat5_tokenizer *t, const char *s, size_t n, uint32_t *off) {
    size_t at = t->pool.n;
    if (at > UINT32_MAX - n - 1) return 0;
    if (!fat5__tbuf_put(t->ctx, &t->pool, s, n) || !fat5__tbuf_put(t->ctx, &t->pool, "", 0)) return 0;
    t->pool.n++;   // keep the NUL inside the pool
    *off = (uint32_t)at;
    return 1;
}

// allocates the per-piece arrays for n pieces
static fat5_status fat5__pieces_alloc(fat5_tokenizer *t, const char *what, int64_t n) {
    if (n <= 0 || n > FAT5__TOK_MAX_VOCAB)
        return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: %lld pieces (want 1 .. %lld)", what, (long long)n,
                         (long long)FAT5__TOK_MAX_VOCAB);
    t->n_pieces = (int32_t)n;
    t->off = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)n, sizeof *t->off));
    t->len = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)n, sizeof *t->len));
    t->score = FAT5__CAST(double *, fat5__calloc(t->ctx, (size_t)n, sizeof *t->score));
    t->type = FAT5__CAST(uint8_t *, fat5__calloc(t->ctx, (size_t)n, 1));
    if (!t->off || !t->len || !t->score || !t->type) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    return FAT5_OK;
}

// the trie of the pieces whose type passes keep (a bit set of types; 0: all)
static fat5_status fat5__pieces_trie(fat5_tokenizer *t, unsigned keep, fat5__trie *out) {
    fat5__tkeys k;
    uint32_t *off = NULL, *len = NULL;
    int32_t *id = NULL;
    size_t n = 0;
    int32_t i;
    fat5_status st;
    off = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)t->n_pieces, sizeof *off));
    len = FAT5__CAST(uint32_t *, fat5__calloc(t->ctx, (size_t)t->n_pieces, sizeof *len));
    id = FAT5__CAST(int32_t *, fat5__calloc(t->ctx, (size_t)t->n_pieces, sizeof *id));
    if (!off || !len || !id) {
        st = fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
        goto done;
    }
    for (i = 0; i < t->n_pieces; i++) {
        if (keep && !(keep & (1u << t->type[i]))) continue;
        off[n] = t->off[i];
        len[n] = t->len[i];
        id[n++] = i;
    }
    k.s = t->pool.p;
    k.off = off;
    k.len = len;
    k.id = id;
    st = fat5__trie_build(t->ctx, &k, n, out);
done:
    fat5__free(t->ctx, off);
    fat5__free(t->ctx, len);
    fat5__free(t->ctx, id);
    return st;
}

// 1 when every byte of s[0..n) has its byte piece (byte fallback can spell it)
static int fat5__has_byte_pieces(const fat5_tokenizer *t, const char *s, size_t n) {
    size_t j;
    for (j = 0; j < n; j++)
        if (t->byte_id[(unsigned char)s[j]] < 0) return 0;
    return 1;
}
// the byte pieces of s[0..n) appended to out; 0 when out of memory
static int fat5__push_byte_pieces(const fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    size_t j;
    for (j = 0; j < n; j++)
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)t->byte_id[(unsigned char)s[j]])) return 0;
    return 1;
}

// byte pieces "<0xXX>" (upper-case hex, as both libraries write them)
static void fat5__find_byte_pieces(fat5_tokenizer *t) {
    int b;
    for (b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = fat5__trie_find(&t->vocab, name, 6);
    }
}

// ---------------------------------------------------------------------------------------------
// SentencePiece model files: a protobuf ModelProto. Only the fields that change encoding or
// decoding are read; every other field is skipped by its wire type.

typedef struct fat5__pb {
    const unsigned char *p, *end;
} fat5__pb;

typedef struct fat5__pbf {       // one field
    uint32_t num;
    int wire;                    // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
    uint64_t v;                  // varint / fixed value
    const unsigned char *data;   // length-delimited payload
    size_t len;
} fat5__pbf;

static int fat5__pb_varint(fat5__pb *r, uint64_t *v) {
    int shift = 0;
    *v = 0;
    while (r->p < r->end && shift < 64) {
        unsigned char c = *r->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return 1;
        shift += 7;
    }
    return 0;
}

// next field: 1, 0 at the end, -1 on a malformed field (*why says what)
static int fat5__pb_next(fat5__pb *r, fat5__pbf *f, const char **why) {
    uint64_t key, n;
    if (r->p >= r->end) return 0;
    if (!fat5__pb_varint(r, &key)) { *why = "truncated field key"; return -1; }
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff) { *why = "field number out of range"; return -1; }
    switch (f->wire) {
    case 0:
        if (!fat5__pb_varint(r, &f->v)) { *why = "truncated varint"; return -1; }
        return 1;
    case 1: case 5: {
        size_t k = f->wire == 1 ? 8 : 4, i;
        if ((size_t)(r->end - r->p) < k) { *why = "truncated fixed-width value"; return -1; }
        f->v = 0;
        for (i = 0; i < k; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += k;
        return 1;
    }
    case 2:
        if (!fat5__pb_varint(r, &n)) { *why = "truncated length"; return -1; }
        if (n > (uint64_t)(r->end - r->p)) { *why = "length past the end of the message"; return -1; }
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return 1;
    default:
        *why = "unsupported wire type (groups are not used by ModelProto)";
        return -1;
    }
}

static fat5_status fat5__pb_type(fat5_ctx *ctx, const char *what, const char *field, const fat5__pbf *f, int want) {
    static const char *names[] = {"varint", "fixed64", "length-delimited", "?", "?", "fixed32"};
    if (f->wire == want) return FAT5_OK;
    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto %s (field %u): wire type %s, expected %s", what, field,
                     (unsigned)f->num, names[f->wire], names[want]);
}

static float fat5__pb_float(uint64_t v) {
    uint32_t u = (uint32_t)v;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

typedef struct fat5__spm_spec {
    int model_type, byte_fallback, ws_suffix;
    const unsigned char *unk_surface, *eos_piece, *pad_piece;
    size_t unk_surface_len, eos_piece_len, pad_piece_len;
    int has_unk_surface;
    const unsigned char *charsmap;
    size_t charsmap_len;
    int add_dummy_prefix, remove_extra_ws, escape_ws;
    int has_denorm;
} fat5__spm_spec;

#define FAT5__PB_WANT(field, wt) \
    do { if ((st = fat5__pb_type(ctx, what, field, &f, wt)) != FAT5_OK) return st; } while (0)

static fat5_status fat5__pb_fail(fat5_ctx *ctx, const char *what, const char *msg, const char *why) {
    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto %s: %s (truncated or not a SentencePiece model)", what, msg, why);
}

// One of ModelProto's settings messages, msg its field number: 2 trainer_spec, 3 normalizer_spec,
// 5 denormalizer_spec (a denormalizer with rules would rewrite decoded text: not supported, and
// none of the T5 family has one).
static fat5_status fat5__spm_spec_msg(fat5_ctx *ctx, const char *what, int msg, const unsigned char *d, size_t n,
                                      fat5__spm_spec *sp) {
    fat5__pb r;
    fat5__pbf f = {0, 0, 0, NULL, 0};
    const char *why = "";
    int k;
    fat5_status st;
    r.p = d;
    r.end = d + n;
    while ((k = fat5__pb_next(&r, &f, &why)) > 0) {
        if (msg == 2) {
            switch (f.num) {
            case 3: FAT5__PB_WANT("trainer_spec.model_type", 0); sp->model_type = (int)f.v; break;
            case 24: FAT5__PB_WANT("trainer_spec.treat_whitespace_as_suffix", 0); sp->ws_suffix = f.v != 0; break;
            case 35: FAT5__PB_WANT("trainer_spec.byte_fallback", 0); sp->byte_fallback = f.v != 0; break;
            case 44:
                FAT5__PB_WANT("trainer_spec.unk_surface", 2);
                sp->unk_surface = f.data;
                sp->unk_surface_len = f.len;
                sp->has_unk_surface = 1;
                break;
            case 47: FAT5__PB_WANT("trainer_spec.eos_piece", 2); sp->eos_piece = f.data; sp->eos_piece_len = f.len; break;
            case 48: FAT5__PB_WANT("trainer_spec.pad_piece", 2); sp->pad_piece = f.data; sp->pad_piece_len = f.len; break;
            default: break;
            }
        } else if (msg == 3) {
            switch (f.num) {
            case 2:
                FAT5__PB_WANT("normalizer_spec.precompiled_charsmap", 2);
                sp->charsmap = f.data;
                sp->charsmap_len = f.len;
                break;
            case 3: FAT5__PB_WANT("normalizer_spec.add_dummy_prefix", 0); sp->add_dummy_prefix = f.v != 0; break;
            case 4: FAT5__PB_WANT("normalizer_spec.remove_extra_whitespaces", 0); sp->remove_extra_ws = f.v != 0; break;
            case 5: FAT5__PB_WANT("normalizer_spec.escape_whitespaces", 0); sp->escape_ws = f.v != 0; break;
            default: break;
            }
        } else if (f.num == 2 && f.wire == 2 && f.len > 0) {
            sp->has_denorm = 1;
        }
    }
    return k < 0 ? fat5__pb_fail(ctx, what, msg == 2 ? "trainer_spec" : msg == 3 ? "normalizer_spec" : "denormalizer_spec", why)
                 : FAT5_OK;
}

static fat5_status fat5__spm_load(fat5_tokenizer *t, const char *what, const unsigned char *d, size_t n) {
    fat5_ctx *ctx = t->ctx;
    fat5__pb r;
    fat5__pbf f = {0, 0, 0, NULL, 0};
    fat5__spm_spec sp;
    const char *why = "";
    int64_t count = 0, i;
    int k;
    fat5_status st;
    memset(&sp, 0, sizeof sp);
    sp.model_type = 1;
    sp.add_dummy_prefix = sp.remove_extra_ws = sp.escape_ws = 1;
    // pass 1: count the pieces, read the specs
    r.p = d;
    r.end = d + n;
    while ((k = fat5__pb_next(&r, &f, &why)) > 0) {
        if (f.num == 1) { FAT5__PB_WANT("pieces", 2); count++; }
        else if (f.num == 2 || f.num == 3 || f.num == 5) {
            FAT5__PB_WANT(f.num == 2 ? "trainer_spec" : f.num == 3 ? "normalizer_spec" : "denormalizer_spec", 2);
            if ((st = fat5__spm_spec_msg(ctx, what, (int)f.num, f.data, f.len, &sp))) return st;
        }
    }
    if (k < 0) return fat5__pb_fail(ctx, what, "", why);
    if (count == 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto has no pieces (not a SentencePiece model?)", what);
    if (sp.model_type != 1 && sp.model_type != 2)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: SentencePiece model type %s", what,
                         sp.model_type == 3 ? "WORD" : sp.model_type == 4 ? "CHAR" : "(unknown)");
    if (sp.has_denorm) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: denormalizer_spec rules", what);
    if ((st = fat5__pieces_alloc(t, what, count))) return st;
    t->model = sp.model_type == 1 ? FAT5__TM_UNIGRAM : FAT5__TM_BPE;
    t->byte_fallback = sp.byte_fallback;
    t->ws_suffix = sp.ws_suffix;
    t->add_dummy_prefix = sp.add_dummy_prefix;
    t->remove_extra_ws = sp.remove_extra_ws;
    t->escape_ws = sp.escape_ws;
    // pass 2: the pieces
    r.p = d;
    i = 0;
    t->unk_id = -1;
    t->min_score = FLT_MAX;
    while (fat5__pb_next(&r, &f, &why) > 0) {
        fat5__pb q;
        fat5__pbf g = {0, 0, 0, NULL, 0};
        const unsigned char *piece = NULL;
        size_t plen = 0;
        int type = FAT5__SP_NORMAL, has_piece = 0;
        float score = 0;
        char field[64];
        if (f.num != 1) continue;
        q.p = f.data;
        q.end = f.data + f.len;
        while ((k = fat5__pb_next(&q, &g, &why)) > 0) {
            snprintf(field, sizeof field, "pieces[%lld]", (long long)i);
            if (g.num == 1) {
                if ((st = fat5__pb_type(ctx, what, field, &g, 2))) return st;
                piece = g.data;
                plen = g.len;
                has_piece = 1;
            } else if (g.num == 2) {
                if ((st = fat5__pb_type(ctx, what, field, &g, 5))) return st;
                score = fat5__pb_float(g.v);
            } else if (g.num == 3) {
                if ((st = fat5__pb_type(ctx, what, field, &g, 0))) return st;
                type = (int)g.v;
            }
        }
        if (k < 0) {
            snprintf(field, sizeof field, "pieces[%lld]", (long long)i);
            return fat5__pb_fail(ctx, what, field, why);
        }
        if (!has_piece || plen == 0)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: empty piece", what, (long long)i);
        if (plen >= FAT5__TOK_MAX_PIECE || memchr(piece, 0, plen))
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: %s", what, (long long)i,
                             plen >= FAT5__TOK_MAX_PIECE ? "longer than 8000 bytes" : "holds a NUL byte");
        if (!fat5__utf8_valid_n((const char *)piece, plen) || !(type >= 1 && type <= 6))
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: %s", what, (long long)i,
                             type >= 1 && type <= 6 ? "not UTF-8" : "unknown type");
        if (type == FAT5__SP_BYTE && !fat5__byte_piece((const char *)piece, plen, NULL))
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: a BYTE piece not named <0xXX>", what,
                             (long long)i);
        if (score != score || score > FLT_MAX || score < -FLT_MAX)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto pieces[%lld]: score is NaN or infinite", what, (long long)i);
        if (!fat5__pool_add(t, (const char *)piece, plen, &t->off[i]))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        t->len[i] = (uint32_t)plen;
        t->score[i] = score;
        t->type[i] = (uint8_t)type;
        if (type == FAT5__SP_UNKNOWN) {
            if (t->unk_id >= 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto: more than one unknown piece", what);
            t->unk_id = (int32_t)i;
        }
        if (type == FAT5__SP_NORMAL && score < t->min_score) t->min_score = score;
        i++;
    }
    if (t->unk_id < 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto: no piece of type UNKNOWN", what);
    for (i = 0; t->model == FAT5__TM_BPE && i < t->n_pieces; i++)   // sentencepiece splits them back by merge history
        if (t->type[i] == FAT5__SP_UNUSED)
            return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: UNUSED pieces in a BPE model", what);
    if (!fat5__pool_add(t, sp.has_unk_surface ? (const char *)sp.unk_surface : " \xE2\x81\x87 ",
                        sp.has_unk_surface ? sp.unk_surface_len : 5, &t->unk_surface))
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    // every piece once (sentencepiece refuses a model that defines one twice)
    if ((st = fat5__pieces_trie(t, 0, &t->vocab))) return st;
    for (i = 0; i < t->n_pieces; i++)
        if (fat5__trie_find(&t->vocab, fat5__piece(t, (int32_t)i), t->len[i]) != i) {
            char buf[64];
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: ModelProto: piece '%s' is defined twice", what,
                             fat5__msg_name(buf, sizeof buf, fat5__piece(t, (int32_t)i)));
        }
    fat5__trie_free(ctx, &t->vocab);
    // the pieces the model matches in text: normal, user-defined, unused (skipped by Unigram)
    if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_NORMAL | 1u << FAT5__SP_USER | 1u << FAT5__SP_UNUSED, &t->vocab)))
        return st;
    if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_USER, &t->user))) return st;
    {   // byte pieces are BYTE-typed pieces "<0xXX>"
        fat5__trie bytes;
        int b;
        if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_BYTE, &bytes))) return st;
        for (b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_id[b] = fat5__trie_find(&bytes, name, 6);
        }
        fat5__trie_free(ctx, &bytes);
    }
    if (t->byte_fallback)
        for (i = 0; i < 256; i++)
            if (t->byte_id[i] < 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: byte_fallback is on but the byte piece <0x%02X> is missing",
                                 what, (unsigned)i);
    if (sp.charsmap_len && (st = fat5__charsmap_load(ctx, what, sp.charsmap, sp.charsmap_len, &t->cm))) return st;
    {   // EOS and padding: the trainer's pieces ("</s>", "<pad>" by default) when they are control pieces
        fat5__trie all;
        int32_t e, p;
        if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_CONTROL, &all))) return st;
        e = fat5__trie_find(&all, sp.eos_piece ? (const char *)sp.eos_piece : "</s>", sp.eos_piece ? sp.eos_piece_len : 4);
        p = fat5__trie_find(&all, sp.pad_piece ? (const char *)sp.pad_piece : "<pad>", sp.pad_piece ? sp.pad_piece_len : 5);
        fat5__trie_free(ctx, &all);
        t->eos_id = e;
        t->pad_id = p;
    }
    t->vocab_size = t->n_pieces;
    return FAT5_OK;
}
#undef FAT5__PB_WANT

// ---------------------------------------------------------------------------------------------
// Unigram: the best segmentation of a normalised string (Viterbi over the pieces that start at
// each character). sentencepiece sums float scores (and rebases them past 1e5, as it does);
// tokenizers sums doubles. A character no piece covers is the unknown piece at min_score - 10;
// user-defined pieces score 0.1 * (bytes - 1) (sentencepiece). Ties keep the first candidate.
// Output: the pieces as (start, end, id) triples in t->ids.

typedef struct fat5__lat { double score; int32_t start, id; } fat5__lat;

static fat5_status fat5__unigram(fat5_tokenizer *t, const char *s, size_t n) {
    fat5__lat *L;
    size_t pos, i, frontier = 0;
    const int spm = !t->is_json;
    const double unk_score = spm ? (double)((float)t->min_score - 10.0f) : t->min_score - 10.0;
    if (!fat5__grow(t->ctx, &t->lat, &t->lat_cap, n + 1, sizeof(fat5__lat)))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    L = FAT5__CAST(fat5__lat *, t->lat);
    for (i = 0; i <= n; i++) {
        L[i].score = 0;
        L[i].start = -1;
        L[i].id = -1;
    }
    t->ids.n = 0;
    for (pos = 0; pos < n;) {
        double here = L[pos].score;
        uint32_t node = 0;
        size_t mb, k;
        int single = 0;
        if (spm && (here < -100000.0 || here > 100000.0)) {   // sentencepiece's rebase of large scores
            for (i = pos; i <= frontier; i++)
                if (i == pos || L[i].start != -1) L[i].score = (double)((float)L[i].score - (float)here);
            here = 0;
        }
        mb = spm ? (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(unsigned char)s[pos] >> 4]
                 : fat5__utf8_len(s + pos, n - pos);
        if (mb == 0) mb = 1;
        if (mb > n - pos) mb = n - pos;
        for (k = pos; k < n; k++) {
            int32_t id;
            double sc, cand;
            if ((node = fat5__trie_next(&t->vocab, node, (uint8_t)s[k])) == 0) break;
            if ((id = t->vocab.node[node].value) < 0) continue;
            if (spm && t->type[id] == FAT5__SP_UNUSED) continue;
            if (k + 1 > frontier) frontier = k + 1;
            sc = spm && t->type[id] == FAT5__SP_USER ? (double)(float)(0.1 * (double)(k - pos)) : t->score[id];
            cand = spm ? (double)((float)sc + (float)here) : sc + here;
            if (L[k + 1].start == -1 || cand > L[k + 1].score) {
                L[k + 1].score = cand;
                L[k + 1].start = (int32_t)pos;
                L[k + 1].id = id;
            }
            if (k + 1 - pos == mb) single = 1;
        }
        if (!single) {
            double cand = spm ? (double)((float)unk_score + (float)here) : unk_score + here;
            if (pos + mb > frontier) frontier = pos + mb;
            if (L[pos + mb].start == -1 || cand > L[pos + mb].score) {
                if (t->unk_id < 0)   // tokenizers fails here (only where the unknown would be taken)
                    return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG,
                                     "tokenize: a character has no piece and the Unigram model has no unk_id");
                L[pos + mb].score = cand;
                L[pos + mb].start = (int32_t)pos;
                L[pos + mb].id = t->unk_id;
            }
        }
        pos += mb;
    }
    // backtrack, then reverse into (start, end, id) triples
    for (i = n; i > 0; i = (size_t)L[i].start)
        if (!fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)L[i].id) || !fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)i) ||
            !fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)L[i].start))
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (i = 0; i < t->ids.n / 2; i++) {
        uint32_t x = t->ids.p[i];
        t->ids.p[i] = t->ids.p[t->ids.n - 1 - i];
        t->ids.p[t->ids.n - 1 - i] = x;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// sentencepiece BPE: adjacent symbols merge while the concatenation is a piece, best score first
// (ties: leftmost); user-defined pieces are never merged. Triples in t->ids as for Unigram.

typedef struct fat5__bsym { int32_t prev, next; uint32_t start, len; uint8_t freeze; } fat5__bsym;
typedef struct fat5__bpair { float score; uint32_t left, right, size; } fat5__bpair;

// A binary heap of T whose top is the element BEFORE(a, b) (on values) puts first: NAME_push adds
// x, NAME_pop removes and returns the top (*n > 0); it serves both BPE agendas below.
#define FAT5__HEAP(NAME, T, BEFORE)                                   \
    static void NAME##_push(T *h, size_t *n, T x) {                   \
        size_t i = (*n)++;                                            \
        while (i > 0 && BEFORE(x, h[(i - 1) / 2])) {                  \
            h[i] = h[(i - 1) / 2];                                    \
            i = (i - 1) / 2;                                          \
        }                                                             \
        h[i] = x;                                                     \
    }                                                                 \
    static T NAME##_pop(T *h, size_t *n) {                            \
        T top = h[0], x = h[--*n];                                    \
        size_t i = 0;                                                 \
        for (;;) {                                                    \
            size_t c = 2 * i + 1;                                     \
            if (c >= *n) break;                                       \
            if (c + 1 < *n && BEFORE(h[c + 1], h[c])) c++;            \
            if (!BEFORE(h[c], x)) break;                              \
            h[i] = h[c];                                              \
            i = c;                                                    \
        }                                                             \
        if (*n) h[i] = x;                                             \
        return top;                                                   \
    }

// pair a comes out of the agenda before b: the higher score, then the leftmost
#define FAT5__BPAIR_BEFORE(a, b) ((a).score != (b).score ? (a).score > (b).score : (a).left < (b).left)
FAT5__HEAP(fat5__bheap, fat5__bpair, FAT5__BPAIR_BEFORE)
#undef FAT5__BPAIR_BEFORE

static void fat5__spm_bpe_pair(const fat5_tokenizer *t, const char *s, const fat5__bsym *y, int32_t l, int32_t r,
                               fat5__bpair *h, size_t *nh) {
    fat5__bpair p;
    int32_t id;
    if (l < 0 || r < 0 || y[l].freeze || y[r].freeze) return;
    id = fat5__trie_find(&t->vocab, s + y[l].start, y[l].len + y[r].len);
    if (id < 0) return;
    p.score = (float)t->score[id];
    p.left = (uint32_t)l;
    p.right = (uint32_t)r;
    p.size = y[l].len + y[r].len;
    fat5__bheap_push(h, nh, p);
}

static fat5_status fat5__spm_bpe(fat5_tokenizer *t, const char *s, size_t n) {
    fat5__bsym *y;
    fat5__bpair *h;
    size_t ny = 0, nh = 0, pos, bytes;
    int32_t i;
    // symbols and the agenda share the lattice scratch (n symbols, at most 2n live pairs)
    if (!fat5__mul_ok(n + 1, sizeof(fat5__bsym) + 3 * sizeof(fat5__bpair), &bytes) ||
        !fat5__grow(t->ctx, &t->lat, &t->lat_cap, bytes, 1))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    y = FAT5__CAST(fat5__bsym *, t->lat);
    h = FAT5__CAST(fat5__bpair *, (void *)((char *)t->lat + (n + 1) * sizeof(fat5__bsym)));
    for (pos = 0; pos < n; ny++) {
        int32_t uid;
        size_t k = fat5__trie_longest(&t->user, s + pos, n - pos, &uid);
        y[ny].freeze = k > 0;
        if (!k) {
            k = (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(unsigned char)s[pos] >> 4];
            if (k > n - pos) k = n - pos;
        }
        y[ny].start = (uint32_t)pos;
        y[ny].len = (uint32_t)k;
        y[ny].prev = (int32_t)ny - 1;
        y[ny].next = pos + k < n ? (int32_t)ny + 1 : -1;
        pos += k;
    }
    for (i = 0; i + 1 < (int32_t)ny; i++) fat5__spm_bpe_pair(t, s, y, i, i + 1, h, &nh);
    while (nh) {
        fat5__bpair top = fat5__bheap_pop(h, &nh);
        fat5__bsym *l = &y[top.left], *r = &y[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) y[r->next].prev = (int32_t)top.left;
        r->len = 0;
        fat5__spm_bpe_pair(t, s, y, l->prev, (int32_t)top.left, h, &nh);
        fat5__spm_bpe_pair(t, s, y, (int32_t)top.left, l->next, h, &nh);
    }
    t->ids.n = 0;
    for (i = ny ? 0 : -1; i >= 0; i = y[i].next) {
        int32_t id = fat5__trie_find(&t->vocab, s + y[i].start, y[i].len);
        if (id < 0) id = t->unk_id;
        if (!fat5__ubuf_push(t->ctx, &t->ids, y[i].start) || !fat5__ubuf_push(t->ctx, &t->ids, y[i].start + y[i].len) ||
            !fat5__ubuf_push(t->ctx, &t->ids, (uint32_t)id))
            return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// sentencepiece's normaliser: user-defined pieces pass as they are; else the longest charsmap rule
// (among the first 32 matches) or one character (an invalid byte: U+FFFD); spaces become U+2581;
// leading, trailing and repeated spaces go (remove_extra_whitespaces); U+2581 before the text
// (add_dummy_prefix) or after it (treat_whitespace_as_suffix).

static size_t fat5__spm_prefix(const fat5_tokenizer *t, const char *s, size_t n, const char **out, size_t *out_len) {
    fat5__cm_match m[32];
    size_t k, i, best = 0;
    int32_t id;
    const char *repl = NULL;
    if ((k = fat5__trie_longest(&t->user, s, n, &id)) > 0) {
        *out = s;
        *out_len = k;
        return k;
    }
    k = fat5__charsmap_search(&t->cm, s, n, m, 32);
    if (k > 32) k = 32;
    for (i = 0; i < k; i++)
        if (best == 0 || m[i].len > best) {
            best = m[i].len;
            repl = m[i].repl;
        }
    if (best) {
        *out = repl;
        *out_len = strlen(repl);
        return best;
    }
    if ((k = fat5__utf8_len(s, n)) == 0) {
        *out = fat5__ufffd;
        *out_len = 3;
        return 1;
    }
    *out = s;
    *out_len = k;
    return k;
}

static fat5_status fat5__spm_normalize(fat5_tokenizer *t, const char *s, size_t n, fat5__tbuf *o) {
    const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
    size_t wl = t->escape_ws ? 3 : 1, i;
    int prev_space;
    o->n = 0;
    if (!fat5__tbuf_put(t->ctx, o, "", 0)) goto oom;
    if (n == 0) return FAT5_OK;
    if (t->remove_extra_ws)
        while (n) {
            const char *p;
            size_t pl, k = fat5__spm_prefix(t, s, n, &p, &pl);
            if (!(pl == 1 && p[0] == ' ')) break;
            s += k;
            n -= k;
        }
    if (n == 0) return FAT5_OK;
    if (!t->ws_suffix && t->add_dummy_prefix && !fat5__tbuf_put(t->ctx, o, ws, wl)) goto oom;
    prev_space = t->remove_extra_ws;
    while (n) {
        const char *p;
        size_t pl, k = fat5__spm_prefix(t, s, n, &p, &pl);
        while (prev_space && pl && p[0] == ' ') {
            p++;
            pl--;
        }
        if (pl) {
            for (i = 0; i < pl; i++)
                if (!(p[i] == ' ' ? fat5__tbuf_put(t->ctx, o, ws, wl) : fat5__tbuf_put(t->ctx, o, p + i, 1))) goto oom;
            prev_space = p[pl - 1] == ' ';
        }
        s += k;
        n -= k;
        if (!t->remove_extra_ws) prev_space = 0;
    }
    if (t->remove_extra_ws)
        while (o->n >= wl && memcmp(o->p + o->n - wl, ws, wl) == 0) o->p[o->n -= wl] = 0;
    if (t->ws_suffix && t->add_dummy_prefix && !fat5__tbuf_put(t->ctx, o, ws, wl)) goto oom;
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// sentencepiece: text -> ids appended to out (unknown runs merged, or bytes with byte fallback)
static fat5_status fat5__spm_encode(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5_status st;
    size_t i;
    int prev_unk = 0;
    if ((st = fat5__spm_normalize(t, s, n, &t->s0))) return st;
    if (t->s0.n == 0) return FAT5_OK;
    st = t->model == FAT5__TM_UNIGRAM ? fat5__unigram(t, t->s0.p, t->s0.n) : fat5__spm_bpe(t, t->s0.p, t->s0.n);
    if (st) return st;
    for (i = 0; i + 3 <= t->ids.n; i += 3) {
        uint32_t a = t->ids.p[i], b = t->ids.p[i + 1];
        int32_t id = (int32_t)t->ids.p[i + 2];
        int unk;
        unk = id == t->unk_id;
        if (unk && t->byte_fallback) {   // the load made sure all 256 byte pieces exist
            if (!fat5__push_byte_pieces(t, t->s0.p + a, b - a, out)) goto oom;
        } else if (!(prev_unk && unk) && !fat5__ubuf_push(t->ctx, out, (uint32_t)id)) {
            goto oom;
        }
        prev_unk = unk;
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// sentencepiece: ids -> text. Byte pieces gather into bytes (each invalid byte U+FFFD); control
// pieces vanish (or show as their text when keep_special); unknown pieces are the unknown surface
// (" \u2047 "); U+2581 is a space, and the first piece's leading one goes.
static fat5_status fat5__spm_decode(fat5_tokenizer *t, const int32_t *ids, int64_t n, int keep_special, fat5__tbuf *o) {
    int64_t i;
    size_t q0 = 0;   // start of the pending bytes in t->s1
    int bos_ws = 1;
    size_t base = 0;   // where the current run starts (kept control pieces start a new one)
    o->n = 0;
    t->s1.n = 0;
    if (!fat5__tbuf_put(t->ctx, o, "", 0)) goto oom;
    for (i = 0; i <= n; i++) {
        int32_t id = i < n ? ids[i] : -1;
        const char *p;
        size_t pl;
        if (i < n && t->type[id] == FAT5__SP_BYTE) {
            unsigned v = 0;
            if (fat5__byte_piece(fat5__piece(t, id), t->len[id], &v)) {
                char c = (char)v;
                if (!fat5__tbuf_put(t->ctx, &t->s1, &c, 1)) goto oom;
                continue;
            }
        }
        while (q0 < t->s1.n) {   // flush the pending bytes
            size_t k = fat5__utf8_len(t->s1.p + q0, t->s1.n - q0);
            if (!(k ? fat5__tbuf_put(t->ctx, o, t->s1.p + q0, k) : fat5__tbuf_put(t->ctx, o, fat5__ufffd, 3))) goto oom;
            q0 += k ? k : 1;
        }
        t->s1.n = q0 = 0;
        if (i == n) break;
        if (o->n > base) bos_ws = 0;
        if (t->type[id] == FAT5__SP_CONTROL) {
            if (keep_special) {   // the piece's text, then the rest decoded as a text of its own
                if (!fat5__tbuf_put(t->ctx, o, fat5__piece(t, id), t->len[id])) goto oom;
                base = o->n;
                bos_ws = 1;
            }
            continue;
        }
        p = fat5__piece(t, id);
        pl = t->len[id];
        if (t->type[id] == FAT5__SP_UNKNOWN) {
            if (!fat5__tbuf_put(t->ctx, o, t->pool.p + t->unk_surface, strlen(t->pool.p + t->unk_surface))) goto oom;
        } else {
            size_t j = 0;
            int has_bos_ws = 0;
            if (bos_ws && (t->add_dummy_prefix || t->remove_extra_ws) && pl >= 3 && memcmp(p, "\xE2\x96\x81", 3) == 0) {
                j = 3;
                has_bos_ws = !t->remove_extra_ws;
            }
            for (; j < pl; j++) {
                if (j + 3 <= pl && memcmp(p + j, "\xE2\x96\x81", 3) == 0) {
                    if (!fat5__tbuf_put(t->ctx, o, " ", 1)) goto oom;
                    j += 2;
                } else if (!fat5__tbuf_put(t->ctx, o, p + j, 1)) {
                    goto oom;
                }
            }
            if (has_bos_ws) bos_ws = 0;
        }
        if (o->n > base) bos_ws = 0;
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "detokenize: out of memory");
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json: loading

static const char fat5__b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// standard base64 with padding; *out allocated (fat5__free); 0 when malformed
static int fat5__b64_decode(fat5_ctx *ctx, const char *s, size_t n, unsigned char **out, size_t *out_len) {
    size_t i, o = 0, pad = 0;
    uint32_t acc = 0;
    int bits = 0;
    unsigned char *b;
    *out = NULL;
    if (n % 4) return 0;
    while (pad < 2 && pad < n && s[n - 1 - pad] == '=') pad++;
    b = FAT5__CAST(unsigned char *, fat5__malloc(ctx, n / 4 * 3 + 1));
    if (!b) return 0;
    for (i = 0; i < n - pad; i++) {
        const char *c = s[i] ? strchr(fat5__b64, s[i]) : NULL;
        if (!c) {
            fat5__free(ctx, b);
            return 0;
        }
        acc = acc << 6 | (uint32_t)(c - fat5__b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b[o++] = (unsigned char)(acc >> bits);
        }
    }
    *out = b;
    *out_len = o;
    return 1;
}

#define FAT5__TJ_FAIL(...) do { st = fat5__err(ctx, FAT5_ERR_FORMAT, __VA_ARGS__); goto done; } while (0)

// a member that must be a string (or absent when optional): NULL when absent
static fat5_status fat5__tj_str(fat5_ctx *ctx, const char *what, const fat5__json *o, const char *key, int required,
                                const fat5__json **out) {
    const fat5__json *j = fat5__json_get(o, key);
    *out = NULL;
    if (!j || j->type == FAT5__J_NULL) {
        if (required) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' is missing", what, key);
        return FAT5_OK;
    }
    if (j->type != FAT5__J_STRING) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' must be a string", what, key);
    *out = j;
    return FAT5_OK;
}
static fat5_status fat5__tj_bool(fat5_ctx *ctx, const char *what, const fat5__json *o, const char *key, int dflt, int *out) {
    const fat5__json *j = fat5__json_get(o, key);
    *out = dflt;
    if (!j || j->type == FAT5__J_NULL) return FAT5_OK;
    if (j->type != FAT5__J_TRUE && j->type != FAT5__J_FALSE)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' must be true or false", what, key);
    *out = j->type == FAT5__J_TRUE;
    return FAT5_OK;
}
static fat5_status fat5__tj_int(fat5_ctx *ctx, const char *what, const fat5__json *o, const char *key, int64_t lo,
                                int64_t hi, int64_t dflt, int64_t *out) {
    const fat5__json *j = fat5__json_get(o, key);
    *out = dflt;
    if (!j || j->type == FAT5__J_NULL) return FAT5_OK;
    if (j->type != FAT5__J_NUMBER || !fat5__json_as_i64(j, out) || *out < lo || *out > hi)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: '%s' must be an integer in %lld .. %lld", what, key, (long long)lo,
                         (long long)hi);
    return FAT5_OK;
}

static char *fat5__memdup(fat5_ctx *ctx, const char *s, size_t n) {
    char *p = FAT5__CAST(char *, fat5__malloc(ctx, n + 1));
    if (p) {
        if (n) memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

static const char *fat5__tj_type(const fat5__json *o) {
    const fat5__json *ty = fat5__json_get(o, "type");
    return ty && ty->type == FAT5__J_STRING ? ty->str : NULL;
}

// A Replace pattern {"String": s} or {"Regex": r}. A regex is taken when it is a sequence of
// literal characters (escaped or not), each with an optional quantifier ? * + {n} {n,} {n,m};
// any other construct is refused.
static fat5_status fat5__tj_pattern(fat5_ctx *ctx, const char *what, const fat5__json *pat, fat5__tstep *s) {
    const fat5__json *str = fat5__json_get(pat, "String"), *re = fat5__json_get(pat, "Regex");
    const char *p, *e;
    char buf[64];
    if (pat && pat->type == FAT5__J_STRING) str = pat;
    if (str && str->type == FAT5__J_STRING) {
        if (str->len == 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: an empty Replace pattern", what);
        s->a = fat5__memdup(ctx, str->str, str->len);
        s->a_len = str->len;
        return s->a ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    }
    if (!re || re->type != FAT5__J_STRING)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: a Replace pattern must be {\"String\": ...} or {\"Regex\": ...}", what);
    p = re->str;
    e = re->str + re->len;
    while (p < e) {
        fat5__re_atom *a;
        size_t k;
        if (s->n_atoms == FAT5__RE_MAX) goto unsupported;
        a = &s->atom[s->n_atoms++];
        if (*p == '\\') {
            p++;
            if (p >= e || !strchr("\\.^$|?*+()[]{}/ -", *p)) goto unsupported;
        } else if (strchr(".^$|?*+()[]{}", *p)) {
            goto unsupported;
        }
        k = fat5__utf8_len(p, (size_t)(e - p));
        a->cp = fat5__utf8_cp(p, (size_t)(e - p), &k);
        p += k;
        a->min = a->max = 1;
        if (p < e && (*p == '?' || *p == '*' || *p == '+')) {
            a->min = *p == '+';
            a->max = *p == '?' ? 1 : UINT32_MAX;
            p++;
        } else if (p < e && *p == '{') {
            char *q;
            unsigned long lo, hi;
            lo = strtoul(p + 1, &q, 10);
            if (q == p + 1 || lo > 100000) goto unsupported;
            hi = lo;
            if (*q == ',') {
                const char *r = q + 1;
                hi = *r == '}' ? (unsigned long)UINT32_MAX : strtoul(r, &q, 10);
                if (*r == '}') q = (char *)(uintptr_t)r;
                else if (q == r || hi < lo) goto unsupported;
            }
            if (*q != '}') goto unsupported;
            a->min = (uint32_t)lo;
            a->max = (uint32_t)hi;
            p = q + 1;
        }
        if (a->max == 0) goto unsupported;
    }
    if (s->n_atoms == 0) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: an empty Replace pattern", what);
    {   // neighbours with the same character are one atom (a{1,2}a* is a{1,}); then at most one atom
        // may have a variable count, and the pattern must not match the empty string
        int i, k = 0, var = 0;
        uint32_t lo = 0;
        for (i = 0; i < s->n_atoms; i++) {
            if (k > 0 && s->atom[k - 1].cp == s->atom[i].cp) {
                fat5__re_atom *p = &s->atom[k - 1];
                p->min += s->atom[i].min;
                p->max = p->max > UINT32_MAX - s->atom[i].max ? UINT32_MAX : p->max + s->atom[i].max;
            } else {
                s->atom[k++] = s->atom[i];
            }
        }
        s->n_atoms = k;
        for (i = 0; i < k; i++) {
            var += s->atom[i].min != s->atom[i].max;
            lo += s->atom[i].min;
        }
        if (var > 1 || lo == 0) goto unsupported;
    }
    return FAT5_OK;
unsupported:
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: Replace regex '%s' (only literal characters with "
                     "quantifiers are implemented)", what, fat5__msg_name(buf, sizeof buf, re->str));
}

// Metaspace's fields (the pre-tokenizer's and the decoder's): replacement, prepend_scheme (or the
// older add_prefix_space), split
static fat5_status fat5__tj_metaspace(fat5_ctx *ctx, const char *what, const fat5__json *o, fat5__tstep *s) {
    const fat5__json *rep, *sch;
    int aps;
    fat5_status st;
    char buf[64];
    if ((st = fat5__tj_str(ctx, what, o, "replacement", 1, &rep))) return st;
    if (rep->len == 0 || fat5__utf8_len(rep->str, rep->len) != rep->len)
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Metaspace: 'replacement' must be one character", what);
    s->a = fat5__memdup(ctx, rep->str, rep->len);
    s->a_len = rep->len;
    if (!s->a) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    if ((st = fat5__tj_str(ctx, what, o, "prepend_scheme", 0, &sch))) return st;
    if (sch) {
        if (!strcmp(sch->str, "always")) s->f1 = 0;
        else if (!strcmp(sch->str, "first")) s->f1 = 1;
        else if (!strcmp(sch->str, "never")) s->f1 = 2;
        else return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: Metaspace prepend_scheme '%s'", what,
                              fat5__msg_name(buf, sizeof buf, sch->str));
    } else {
        if ((st = fat5__tj_bool(ctx, what, o, "add_prefix_space", 1, &aps))) return st;
        s->f1 = aps ? 0 : 2;
    }
    return fat5__tj_bool(ctx, what, o, "split", 1, &s->f2);
}

// appends the steps of one normalizer / pre-tokenizer / decoder (a Sequence recursively)
static fat5_status fat5__tj_steps(fat5_tokenizer *t, const char *what, const fat5__json *o, int which, int depth,
                                  fat5__tstep **list, int *n) {
    fat5_ctx *ctx = t->ctx;
    const char *ty;
    fat5__tstep *s;
    fat5_status st = FAT5_OK;
    const char *seqkey = which == 0 ? "normalizers" : which == 1 ? "pretokenizers" : "decoders";
    char buf[64];
    if (!o || o->type == FAT5__J_NULL) return FAT5_OK;
    if (o->type != FAT5__J_OBJECT || !(ty = fat5__tj_type(o)))
        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: must be an object with a \"type\"", what);
    if (strcmp(ty, "Sequence") == 0) {
        const fat5__json *arr = fat5__json_get(o, seqkey), *c;
        if (!arr || arr->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Sequence without a '%s' array", what, seqkey);
        if (depth > 8) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Sequences nested more than 8 deep", what);
        for (c = arr->child; c; c = c->next)
            if ((st = fat5__tj_steps(t, what, c, which, depth + 1, list, n))) return st;
        return FAT5_OK;
    }
    if (*n >= 64) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: more than 64 steps", what);
    {
        fat5__tstep *nl = FAT5__CAST(fat5__tstep *, fat5__realloc(ctx, *list, (size_t)(*n + 1) * sizeof **list));
        if (!nl) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        *list = nl;
    }
    s = &(*list)[(*n)++];
    memset(s, 0, sizeof *s);
    if (which == 0) {   // normalizers
        if (strcmp(ty, "Precompiled") == 0) {
            const fat5__json *cm;
            unsigned char *blob = NULL;
            size_t blen = 0;
            s->kind = FAT5__N_PRECOMPILED;
            if ((st = fat5__tj_str(ctx, what, o, "precompiled_charsmap", 1, &cm))) return st;
            if (!fat5__b64_decode(ctx, cm->str, cm->len, &blob, &blen))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Precompiled: precompiled_charsmap is not base64", what);
            st = fat5__charsmap_load(ctx, what, blob, blen, &s->cm);
            fat5__free(ctx, blob);
            return st;
        }
        if (strcmp(ty, "Replace") == 0) {
            const fat5__json *c;
            s->kind = FAT5__N_REPLACE;
            if ((st = fat5__tj_pattern(ctx, what, fat5__json_get(o, "pattern"), s))) return st;
            if ((st = fat5__tj_str(ctx, what, o, "content", 1, &c))) return st;
            s->b = fat5__memdup(ctx, c->str, c->len);
            s->b_len = c->len;
            return s->b ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        }
        if (strcmp(ty, "Strip") == 0) {
            s->kind = FAT5__N_STRIP;
            if ((st = fat5__tj_bool(ctx, what, o, "strip_left", 1, &s->f1))) return st;
            return fat5__tj_bool(ctx, what, o, "strip_right", 1, &s->f2);
        }
        if (strcmp(ty, "Prepend") == 0) {
            const fat5__json *c;
            s->kind = FAT5__N_PREPEND;
            if ((st = fat5__tj_str(ctx, what, o, "prepend", 1, &c))) return st;
            s->a = fat5__memdup(ctx, c->str, c->len);
            s->a_len = c->len;
            return s->a ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        }
        if (strcmp(ty, "NFC") == 0) { s->kind = FAT5__N_NFC; return FAT5_OK; }
        if (strcmp(ty, "NFD") == 0) { s->kind = FAT5__N_NFD; return FAT5_OK; }
        if (strcmp(ty, "NFKC") == 0) { s->kind = FAT5__N_NFKC; return FAT5_OK; }
        if (strcmp(ty, "NFKD") == 0) { s->kind = FAT5__N_NFKD; return FAT5_OK; }
    } else if (which == 1) {   // pre-tokenizers
        if (strcmp(ty, "Metaspace") == 0) {
            s->kind = FAT5__P_METASPACE;
            return fat5__tj_metaspace(ctx, what, o, s);
        }
        if (strcmp(ty, "WhitespaceSplit") == 0) { s->kind = FAT5__P_WHITESPACE_SPLIT; return FAT5_OK; }
        if (strcmp(ty, "ByteLevel") == 0) {
            s->kind = FAT5__P_BYTELEVEL;
            if ((st = fat5__tj_bool(ctx, what, o, "add_prefix_space", 1, &s->f1))) return st;
            return fat5__tj_bool(ctx, what, o, "use_regex", 1, &s->f2);
        }
    } else {   // decoders
        if (strcmp(ty, "Metaspace") == 0) {
            s->kind = FAT5__D_METASPACE;
            return fat5__tj_metaspace(ctx, what, o, s);
        }
        if (strcmp(ty, "ByteLevel") == 0) { s->kind = FAT5__D_BYTELEVEL; return FAT5_OK; }
        if (strcmp(ty, "ByteFallback") == 0) { s->kind = FAT5__D_BYTEFALLBACK; return FAT5_OK; }
        if (strcmp(ty, "Fuse") == 0) { s->kind = FAT5__D_FUSE; return FAT5_OK; }
        if (strcmp(ty, "Strip") == 0) {
            const fat5__json *c;
            int64_t a, b;
            s->kind = FAT5__D_STRIP;
            if ((st = fat5__tj_str(ctx, what, o, "content", 1, &c))) return st;
            if (fat5__utf8_len(c->str, c->len) != c->len || c->len == 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: Strip: 'content' must be one character", what);
            s->a = fat5__memdup(ctx, c->str, c->len);
            s->a_len = c->len;
            if (!s->a) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            if ((st = fat5__tj_int(ctx, what, o, "start", 0, 1 << 20, 0, &a))) return st;
            if ((st = fat5__tj_int(ctx, what, o, "stop", 0, 1 << 20, 0, &b))) return st;
            s->f1 = (int)a;
            s->f2 = (int)b;
            return FAT5_OK;
        }
        if (strcmp(ty, "Replace") == 0) {
            const fat5__json *c;
            s->kind = FAT5__D_REPLACE;
            if ((st = fat5__tj_pattern(ctx, what, fat5__json_get(o, "pattern"), s))) return st;
            if ((st = fat5__tj_str(ctx, what, o, "content", 1, &c))) return st;
            s->b = fat5__memdup(ctx, c->str, c->len);
            s->b_len = c->len;
            return s->b ? FAT5_OK : fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        }
    }
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: %s", what, fat5__msg_name(buf, sizeof buf, ty));
}

static fat5_status fat5__hf_normalize(fat5_tokenizer *t, const char *s, size_t n, uint32_t orig0, fat5__tbuf *out,
                                      fat5__ubuf *orig);
static int32_t fat5__tokenizer_text_id(const fat5_tokenizer *t, const char *text);

// BPE merges: an open-addressing table from (a, b) to (rank, merged id)
static uint64_t fat5__merge_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}
static fat5__merge *fat5__merge_find(const fat5_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i;
    if (!t->merge_cap) return NULL;
    for (i = (size_t)fat5__merge_hash(key) & (t->merge_cap - 1);; i = (i + 1) & (t->merge_cap - 1)) {
        if (t->merges[i].key == key && t->merges[i].id != UINT32_MAX) return &t->merges[i];
        if (t->merges[i].id == UINT32_MAX) return NULL;
    }
}

static fat5_status fat5__tj_model(fat5_tokenizer *t, const char *what, const fat5__json *m) {
    fat5_ctx *ctx = t->ctx;
    const char *ty = fat5__tj_type(m);
    const fat5__json *vocab, *e;
    fat5_status st = FAT5_OK;
    char buf[64];
    int64_t i;
    if (!m || m->type != FAT5__J_OBJECT) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: no \"model\" object", what);
    vocab = fat5__json_get(m, "vocab");
    if (!ty) ty = fat5__json_get(m, "merges") ? "BPE" : vocab && vocab->type == FAT5__J_ARRAY ? "Unigram" : "?";
    if (!vocab) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model: no 'vocab'", what);
    if (strcmp(ty, "Unigram") == 0) {
        int64_t unk;
        t->model = FAT5__TM_UNIGRAM;
        if (vocab->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab must be an array of [piece, score]", what);
        if ((st = fat5__pieces_alloc(t, what, (int64_t)vocab->n))) return st;
        t->min_score = HUGE_VAL;
        for (i = 0, e = vocab->child; e; e = e->next, i++) {
            const fat5__json *p = e->type == FAT5__J_ARRAY ? e->child : NULL, *sc = p ? p->next : NULL;
            double v;
            if (!p || p->type != FAT5__J_STRING || !sc || sc->type != FAT5__J_NUMBER || sc->next ||
                !fat5__json_as_double(sc, &v))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab[%lld] must be [piece, score]", what, (long long)i);
            if (p->len >= FAT5__TOK_MAX_PIECE)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab[%lld]: piece longer than 8000 bytes", what, (long long)i);
            if (!fat5__pool_add(t, p->str, p->len, &t->off[i])) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            t->len[i] = (uint32_t)p->len;
            t->score[i] = v;
            t->type[i] = FAT5__SP_NORMAL;
            if (v < t->min_score) t->min_score = v;
        }
        if ((st = fat5__tj_int(ctx, what, m, "unk_id", 0, t->n_pieces - 1, -1, &unk))) return st;
        t->unk_id = (int32_t)unk;
        if ((st = fat5__tj_bool(ctx, what, m, "byte_fallback", 0, &t->byte_fallback))) return st;
        if ((st = fat5__pieces_trie(t, 0, &t->vocab))) return st;
        fat5__find_byte_pieces(t);
        return FAT5_OK;
    }
    if (strcmp(ty, "BPE") == 0) {
        const fat5__json *merges = fat5__json_get(m, "merges"), *unk, *csp, *eow, *drop;
        int64_t n = 0;
        size_t cap;
        t->model = FAT5__TM_BPE;
        if (vocab->type != FAT5__J_OBJECT)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab must be an object {piece: id}", what);
        for (e = vocab->child; e; e = e->next) {
            int64_t id;
            if (e->type != FAT5__J_NUMBER || !fat5__json_as_i64(e, &id) || id < 0 || id >= FAT5__TOK_MAX_VOCAB)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab['%s'] must be an id in 0 .. 2^24", what,
                                 fat5__msg_name(buf, sizeof buf, e->key));
            if (id + 1 > n) n = id + 1;
        }
        if (n > 2 * (int64_t)vocab->n + 65536)   // a few entries cannot ask for 2^24 ids' worth of memory
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab: ids up to %lld for %zu pieces (too sparse)", what,
                             (long long)n - 1, vocab->n);
        if ((st = fat5__pieces_alloc(t, what, n))) return st;
        for (e = vocab->child; e; e = e->next) {
            int64_t id;
            size_t kl = strlen(e->key);
            fat5__json_as_i64(e, &id);
            if (kl >= FAT5__TOK_MAX_PIECE) return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.vocab: piece longer than 8000 bytes", what);
            if (!fat5__pool_add(t, e->key, kl, &t->off[id])) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            t->len[id] = (uint32_t)kl;
            t->type[id] = FAT5__SP_NORMAL;   // ids no piece names keep type 0: they decode to nothing
        }
        if ((st = fat5__pieces_trie(t, 1u << FAT5__SP_NORMAL, &t->vocab))) return st;
        fat5__find_byte_pieces(t);
        if ((st = fat5__tj_bool(ctx, what, m, "byte_fallback", 0, &t->byte_fallback))) return st;
        if ((st = fat5__tj_bool(ctx, what, m, "fuse_unk", 0, &t->fuse_unk))) return st;
        if ((st = fat5__tj_bool(ctx, what, m, "ignore_merges", 0, &t->ignore_merges))) return st;
        drop = fat5__json_get(m, "dropout");
        if (drop && drop->type != FAT5__J_NULL) {
            double d;
            if (drop->type != FAT5__J_NUMBER || !fat5__json_as_double(drop, &d))
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.dropout must be a number or null", what);
            if (d != 0) return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: BPE dropout (random merges)", what);
        }
        t->unk_id = -1;
        if ((st = fat5__tj_str(ctx, what, m, "unk_token", 0, &unk))) return st;
        if (unk && (t->unk_id = fat5__trie_find(&t->vocab, unk->str, unk->len)) < 0)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.unk_token '%s' is not in the vocabulary", what,
                             fat5__msg_name(buf, sizeof buf, unk->str));
        if ((st = fat5__tj_str(ctx, what, m, "continuing_subword_prefix", 0, &csp))) return st;
        if ((st = fat5__tj_str(ctx, what, m, "end_of_word_suffix", 0, &eow))) return st;
        if ((csp && csp->len && !fat5__pool_add(t, csp->str, csp->len, &t->cs_prefix)) ||
            (eow && eow->len && !fat5__pool_add(t, eow->str, eow->len, &t->eow_suffix)))
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        t->cs_prefix_len = csp ? (uint32_t)csp->len : 0;
        t->eow_suffix_len = eow ? (uint32_t)eow->len : 0;
        if (!merges || merges->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges must be an array", what);
        for (cap = 16; cap < 2 * merges->n + 2; cap *= 2) {}
        t->merges = FAT5__CAST(fat5__merge *, fat5__calloc(ctx, cap, sizeof *t->merges));
        if (!t->merges) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        t->merge_cap = cap;
        for (i = 0; i < (int64_t)cap; i++) t->merges[i].id = UINT32_MAX;
        for (i = 0, e = merges->child; e; e = e->next, i++) {
            const char *a, *b;
            size_t al, bl;
            int32_t ia, ib, inew;
            uint64_t key;
            size_t j;
            if (e->type == FAT5__J_STRING) {
                const char *sp = strchr(e->str, ' ');
                if (!sp || strchr(sp + 1, ' '))
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld] is not \"a b\"", what, (long long)i);
                a = e->str;
                al = (size_t)(sp - e->str);
                b = sp + 1;
                bl = e->len - al - 1;
            } else if (e->type == FAT5__J_ARRAY && e->n == 2 && e->child->type == FAT5__J_STRING &&
                       e->child->next->type == FAT5__J_STRING) {
                a = e->child->str;
                al = e->child->len;
                b = e->child->next->str;
                bl = e->child->next->len;
            } else {
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld] is not \"a b\" or [a, b]", what, (long long)i);
            }
            ia = fat5__trie_find(&t->vocab, a, al);
            ib = fat5__trie_find(&t->vocab, b, bl);
            if (ia < 0 || ib < 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld]: a part is not in the vocabulary", what,
                                 (long long)i);
            if (t->cs_prefix_len && bl >= t->cs_prefix_len && memcmp(b, t->pool.p + t->cs_prefix, t->cs_prefix_len) == 0) {
                b += t->cs_prefix_len;
                bl -= t->cs_prefix_len;
            }
            t->s0.n = 0;
            if (!fat5__tbuf_put(ctx, &t->s0, a, al) || !fat5__tbuf_put(ctx, &t->s0, b, bl))
                return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            if ((inew = fat5__trie_find(&t->vocab, t->s0.p, t->s0.n)) < 0)
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: model.merges[%lld]: the merged piece is not in the vocabulary",
                                 what, (long long)i);
            key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
            for (j = (size_t)fat5__merge_hash(key) & (cap - 1); t->merges[j].id != UINT32_MAX && t->merges[j].key != key;
                 j = (j + 1) & (cap - 1)) {}
            t->merges[j].key = key;   // a repeated pair takes the later rank, as a map filled in order
            t->merges[j].rank = (uint32_t)i;
            t->merges[j].id = (uint32_t)inew;
        }
        return FAT5_OK;
    }
    return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: model type %s", what, fat5__msg_name(buf, sizeof buf, ty));
}

// TemplateProcessing: single / pair lists of {"Sequence": {"id": "A"|"B"}} and
// {"SpecialToken": {"id": NAME}}, NAME's ids from "special_tokens"
static fat5_status fat5__tj_template(fat5_tokenizer *t, const char *what, const fat5__json *pp) {
    fat5_ctx *ctx = t->ctx;
    const fat5__json *specials = fat5__json_get(pp, "special_tokens");
    int w;
    char buf[64];
    for (w = 0; w < 2; w++) {
        const fat5__json *list = fat5__json_get(pp, w ? "pair" : "single"), *e;
        int k = 0;
        if (!list || list->type == FAT5__J_NULL) {
            t->n_tmpl[w] = -1;
            continue;
        }
        if (list->type != FAT5__J_ARRAY)
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: '%s' must be an array", what, w ? "pair" : "single");
        t->tmpl[w] = FAT5__CAST(fat5__titem *, fat5__calloc(ctx, list->n + 1, sizeof(fat5__titem)));
        if (!t->tmpl[w]) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
        for (e = list->child; e; e = e->next, k++) {
            const fat5__json *sq = fat5__json_get(e, "Sequence"), *sp = fat5__json_get(e, "SpecialToken"), *id;
            fat5__titem *it = &t->tmpl[w][k];
            if (sq && (id = fat5__json_get(sq, "id")) && id->type == FAT5__J_STRING &&
                (!strcmp(id->str, "A") || !strcmp(id->str, "B"))) {
                it->seq = id->str[0] - 'A';
            } else if (sp && (id = fat5__json_get(sp, "id")) && id->type == FAT5__J_STRING) {
                const fat5__json *def = fat5__json_get(specials, id->str), *ids = fat5__json_get(def, "ids"), *x;
                if (!ids || ids->type != FAT5__J_ARRAY)
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: special token '%s' has no 'ids' in "
                                     "special_tokens", what, fat5__msg_name(buf, sizeof buf, id->str));
                it->seq = -1;
                it->first = (uint32_t)t->tmpl_ids.n;
                for (x = ids->child; x; x = x->next) {
                    int64_t v;
                    if (x->type != FAT5__J_NUMBER || !fat5__json_as_i64(x, &v) || v < 0 || v >= FAT5__TOK_MAX_VOCAB)
                        return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: special token '%s': bad id", what,
                                         fat5__msg_name(buf, sizeof buf, id->str));
                    if (!fat5__ubuf_push(ctx, &t->tmpl_ids, (uint32_t)v))
                        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
                    it->n++;
                }
            } else {
                return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: TemplateProcessing: '%s'[%d] is not a Sequence (A or B) or a "
                                 "SpecialToken", what, w ? "pair" : "single", k);
            }
        }
        t->n_tmpl[w] = k;
    }
    return FAT5_OK;
}

static fat5_status fat5__tj_post(fat5_tokenizer *t, const char *what, const fat5__json *pp, int depth) {
    const char *ty;
    char buf[64];
    if (!pp || pp->type == FAT5__J_NULL) return FAT5_OK;
    if (!(ty = fat5__tj_type(pp))) return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: post_processor without a type", what);
    if (!strcmp(ty, "ByteLevel")) return FAT5_OK;   // offsets only; ids unchanged
    if (!strcmp(ty, "TemplateProcessing")) {
        if (t->tmpl[0] || t->tmpl[1]) return fat5__err(t->ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: two TemplateProcessing", what);
        return fat5__tj_template(t, what, pp);
    }
    if (!strcmp(ty, "Sequence") && depth < 8) {
        const fat5__json *arr = fat5__json_get(pp, "processors"), *c;
        fat5_status st;
        if (!arr || arr->type != FAT5__J_ARRAY)
            return fat5__err(t->ctx, FAT5_ERR_FORMAT, "%s: post_processor Sequence without 'processors'", what);
        for (c = arr->child; c; c = c->next)
            if ((st = fat5__tj_post(t, what, c, depth + 1))) return st;
        return FAT5_OK;
    }
    return fat5__err(t->ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: post_processor %s", what, fat5__msg_name(buf, sizeof buf, ty));
}

// The trie of some added tokens' contents, values their indices in t->added. which: 0 those
// matched in the raw text (normalized: false), 1 those matched in normalised text (normalized:
// true; their contents normalised as the text will be), 2 the special ones.
static fat5_status fat5__added_trie(fat5_tokenizer *t, const char *what, int which, fat5__trie *out) {
    fat5_ctx *ctx = t->ctx;
    uint32_t *off = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)t->n_added + 1, sizeof *off));
    uint32_t *len = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)t->n_added + 1, sizeof *len));
    int32_t *idx = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)t->n_added + 1, sizeof *idx));
    fat5__tkeys k;
    fat5_status st = FAT5_OK;
    size_t n = 0;
    int32_t i;
    memset(out, 0, sizeof *out);
    if (!off || !len || !idx) st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    for (i = 0; !st && i < t->n_added; i++) {
        const fat5__added *a = &t->added[i];
        if (which == 2 ? !a->special : a->normalized != which) continue;
        off[n] = a->off;
        len[n] = a->len;
        if (which == 1) {   // the normalised content, added to the pool
            st = fat5__hf_normalize(t, t->pool.p + a->off, a->len, 0, &t->s2, &t->o2);
            if (!st && !fat5__pool_add(t, t->s2.p, t->s2.n, &off[n]))
                st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
            len[n] = (uint32_t)t->s2.n;
        }
        idx[n++] = i;
    }
    k.s = t->pool.p;
    k.off = off;
    k.len = len;
    k.id = idx;
    if (!st) st = fat5__trie_build(ctx, &k, n, out);
    fat5__free(ctx, off);
    fat5__free(ctx, len);
    fat5__free(ctx, idx);
    return st;
}

static fat5_status fat5__tj_load(fat5_tokenizer *t, const char *what, const char *text, size_t len) {
    fat5_ctx *ctx = t->ctx;
    fat5__jdoc *doc = NULL;
    const fat5__json *root, *j, *e;
    fat5_status st;
    int64_t i, max_id;
    char buf[64];
    if ((st = fat5__json_parse(ctx, what, text, len, 64, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) FAT5__TJ_FAIL("%s: not a JSON object", what);
    if ((j = fat5__json_get(root, "truncation")) && j->type != FAT5__J_NULL)
        { st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: truncation (set it to null; fat5 never truncates)", what); goto done; }
    if ((j = fat5__json_get(root, "padding")) && j->type != FAT5__J_NULL)
        { st = fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "%s: unsupported: padding (set it to null; batches are packed)", what); goto done; }
    if ((st = fat5__tj_model(t, what, fat5__json_get(root, "model")))) goto done;
    if ((st = fat5__tj_steps(t, "tokenizer.json normalizer", fat5__json_get(root, "normalizer"), 0, 0, &t->norm, &t->n_norm))) goto done;
    if ((st = fat5__tj_steps(t, "tokenizer.json pre_tokenizer", fat5__json_get(root, "pre_tokenizer"), 1, 0, &t->pre, &t->n_pre))) goto done;
    j = fat5__json_get(root, "decoder");
    t->has_decoder = j && j->type != FAT5__J_NULL;
    if ((st = fat5__tj_steps(t, "tokenizer.json decoder", j, 2, 0, &t->dec, &t->n_dec))) goto done;
    if ((st = fat5__tj_post(t, "tokenizer.json post_processor", fat5__json_get(root, "post_processor"), 0))) goto done;
    // added tokens
    max_id = t->n_pieces - 1;
    j = fat5__json_get(root, "added_tokens");
    if (j && j->type != FAT5__J_NULL && j->type != FAT5__J_ARRAY) FAT5__TJ_FAIL("%s: 'added_tokens' must be an array", what);
    if (j && j->type == FAT5__J_ARRAY && j->n) {
        t->added = FAT5__CAST(fat5__added *, fat5__calloc(ctx, j->n, sizeof *t->added));
        if (!t->added) { st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
        for (i = 0, e = j->child; e; e = e->next, i++) {
            fat5__added *a = &t->added[i];
            const fat5__json *c;
            int64_t id;
            int f[5];
            snprintf(buf, sizeof buf, "%s: added_tokens[%lld]", what, (long long)i);
            if ((st = fat5__tj_int(ctx, buf, e, "id", 0, FAT5__TOK_MAX_VOCAB - 1, -1, &id))) goto done;
            if (id < 0) FAT5__TJ_FAIL("%s: no 'id'", buf);
            if ((st = fat5__tj_str(ctx, buf, e, "content", 1, &c))) goto done;
            if (c->len == 0 || c->len >= FAT5__TOK_MAX_PIECE) FAT5__TJ_FAIL("%s: 'content' is empty or too long", buf);
            if ((st = fat5__tj_bool(ctx, buf, e, "special", 0, &f[0])) || (st = fat5__tj_bool(ctx, buf, e, "lstrip", 0, &f[1])) ||
                (st = fat5__tj_bool(ctx, buf, e, "rstrip", 0, &f[2])) ||
                (st = fat5__tj_bool(ctx, buf, e, "single_word", 0, &f[3])))
                goto done;
            if ((st = fat5__tj_bool(ctx, buf, e, "normalized", !f[0], &f[4]))) goto done;
            if (!fat5__pool_add(t, c->str, c->len, &a->off)) { st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
            a->len = (uint32_t)c->len;
            a->id = (int32_t)id;
            a->special = (uint8_t)f[0];
            a->lstrip = (uint8_t)f[1];
            a->rstrip = (uint8_t)f[2];
            a->single_word = (uint8_t)f[3];
            a->normalized = (uint8_t)f[4];
            if (id > max_id) max_id = id;
        }
        t->n_added = (int32_t)j->n;
    }
    for (i = 0; i < (int64_t)t->tmpl_ids.n; i++)   // the template's ids count too (they may name no piece)
        if ((int64_t)t->tmpl_ids.p[i] > max_id) max_id = t->tmpl_ids.p[i];
    if (max_id >= 2 * ((int64_t)t->n_pieces + t->n_added) + 65536)
        FAT5__TJ_FAIL("%s: ids up to %lld for %lld pieces and added tokens (too sparse)", what, (long long)max_id,
                      (long long)t->n_pieces + t->n_added);
    t->vocab_size = (int32_t)(max_id + 1);
    t->id_off = FAT5__CAST(uint32_t *, fat5__calloc(ctx, (size_t)t->vocab_size, sizeof *t->id_off));
    t->id_special = FAT5__CAST(uint8_t *, fat5__calloc(ctx, (size_t)t->vocab_size, 1));
    if (!t->id_off || !t->id_special) { st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
    for (i = 0; i < t->vocab_size; i++) t->id_off[i] = UINT32_MAX;
    for (i = 0; i < t->n_pieces; i++)
        if (t->type[i]) t->id_off[i] = t->off[i];
    for (i = 0; i < t->n_added; i++) t->id_off[t->added[i].id] = t->added[i].off;   // the added vocabulary first
    {   // special: every id whose text is a special token's (tokenizers' special-token set is by content)
        fat5__trie sp;
        if ((st = fat5__added_trie(t, what, 2, &sp))) goto done;
        for (i = 0; sp.n_nodes > 1 && i < t->vocab_size; i++)
            if (t->id_off[i] != UINT32_MAX) {
                const char *txt = t->pool.p + t->id_off[i];
                t->id_special[i] = fat5__trie_find(&sp, txt, strlen(txt)) >= 0;
            }
        fat5__trie_free(ctx, &sp);
    }
    // the two matchers: raw text (normalized: false) and normalised text (normalized: true)
    if ((st = fat5__added_trie(t, what, 0, &t->added_raw)) || (st = fat5__added_trie(t, what, 1, &t->added_norm)))
        goto done;
    {   // EOS and padding: T5's names, "</s>" and "<pad>" (-1 when the tokenizer has neither)
        int32_t e = fat5__tokenizer_text_id(t, "</s>"), p = fat5__tokenizer_text_id(t, "<pad>");
        t->eos_id = e;
        t->pad_id = p;
    }
done:
    fat5__json_free(ctx, doc);
    return st;
}
#undef FAT5__TJ_FAIL

// ---------------------------------------------------------------------------------------------
// tokenizer.json: encoding. Text moves through the steps as splits: (offset, length, shift, token)
// quadruples over a byte buffer with the original offset of every byte beside it (shift: where
// the split starts in the original text; token: an added token's id, or -1 for text still to
// tokenize). Each step reads one set of buffers and writes the other.

#define FAT5__NOTOK UINT32_MAX

// Rust's char::is_whitespace (White_Space) and regex's \w
static int fat5__hf_space(uint32_t cp) { return fat5__uc_is_white_space(cp); }
static int fat5__hf_word(uint32_t cp) { return fat5__uc_is_word(cp); }
static uint32_t fat5__cp_at(const char *s, size_t n, size_t *len) { return fat5__utf8_cp(s, n, len); }
// the code point ending at s[n] (n > 0)
static uint32_t fat5__cp_before(const char *s, size_t n) {
    size_t i = n - 1, k;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return fat5__utf8_cp(s + i, n - i, &k);
}

// appends bytes with one original offset each (orig[i] when o is not NULL, else o0 for all)
static int fat5__emit(fat5_tokenizer *t, fat5__tbuf *b, fat5__ubuf *ob, const char *s, size_t n, const uint32_t *o,
                      uint32_t o0) {
    size_t i;
    if (!fat5__tbuf_put(t->ctx, b, s, n)) return 0;
    if (o) return fat5__ubuf_append(t->ctx, ob, o, n);
    if (!fat5__grow(t->ctx, (void **)&ob->p, &ob->cap, ob->n + n, sizeof(uint32_t))) return 0;
    for (i = 0; i < n; i++) ob->p[ob->n + i] = o0;
    ob->n += n;
    return 1;
}
static int fat5__split_push(fat5_tokenizer *t, fat5__ubuf *sp, size_t off, size_t len, uint32_t shift, uint32_t tok) {
    return fat5__ubuf_push(t->ctx, sp, (uint32_t)off) && fat5__ubuf_push(t->ctx, sp, (uint32_t)len) &&
           fat5__ubuf_push(t->ctx, sp, shift) && fat5__ubuf_push(t->ctx, sp, tok);
}

// Added tokens in s[0..n): leftmost-longest matches of the trie, filtered as tokenizers does
// (single_word needs non-word characters around; lstrip / rstrip take the spaces beside). Writes
// (start, end, index or FAT5__NOTOK) triples covering s to out.
static int fat5__hf_added_split(fat5_tokenizer *t, const fat5__trie *tr, const char *s, size_t n, fat5__ubuf *out) {
    size_t pos = 0, last = 0;
    out->n = 0;
    while (tr->node && pos < n) {
        int32_t idx;
        size_t k = fat5__trie_longest(tr, s + pos, n - pos, &idx), start = pos, stop;
        const fat5__added *a;
        if (!k) {
            pos++;
            continue;
        }
        stop = pos + k;
        pos = stop;
        a = &t->added[idx];
        if (a->single_word) {
            size_t l;
            int sp0 = start == 0 || !fat5__hf_word(fat5__cp_before(s, start));
            int sp1 = stop == n || !fat5__hf_word(fat5__cp_at(s + stop, n - stop, &l));
            if (!sp0 || !sp1) continue;
        }
        if (a->lstrip) {
            size_t b = start;
            while (b > 0 && fat5__hf_space(fat5__cp_before(s, b))) {
                b--;
                while (b > 0 && ((unsigned char)s[b] & 0xC0) == 0x80) b--;
            }
            start = b > last ? b : last;
        }
        if (a->rstrip) {
            size_t l;
            while (stop < n && fat5__hf_space(fat5__cp_at(s + stop, n - stop, &l))) stop += l;
            pos = stop;
        }
        if (last < start && !(fat5__ubuf_push(t->ctx, out, (uint32_t)last) && fat5__ubuf_push(t->ctx, out, (uint32_t)start) &&
                              fat5__ubuf_push(t->ctx, out, FAT5__NOTOK)))
            return 0;
        if (!(fat5__ubuf_push(t->ctx, out, (uint32_t)start) && fat5__ubuf_push(t->ctx, out, (uint32_t)stop) &&
              fat5__ubuf_push(t->ctx, out, (uint32_t)idx)))
            return 0;
        last = stop;
    }
    if (last < n || n == 0)
        return fat5__ubuf_push(t->ctx, out, (uint32_t)last) && fat5__ubuf_push(t->ctx, out, (uint32_t)n) &&
               fat5__ubuf_push(t->ctx, out, FAT5__NOTOK);
    return 1;
}

// a Replace regex at s[0..n): its length, or -1. The atoms are literal characters, neighbours
// distinct, at most one with a variable count (the loader makes sure): then the greedy count is
// the only one that can match, and no backtracking is needed.
static long fat5__re_match(const fat5__re_atom *a, int na, const char *s, size_t n) {
    size_t pos = 0, l;
    int i;
    for (i = 0; i < na; i++) {
        uint32_t cnt = 0;
        while (cnt < a[i].max && pos < n && fat5__cp_at(s + pos, n - pos, &l) == a[i].cp) {
            pos += l;
            cnt++;
        }
        if (cnt < a[i].min) return -1;
    }
    return (long)pos;
}

// a Replace pattern at s[0..n): the match length or 0
static size_t fat5__replace_at(const fat5__tstep *st, const char *s, size_t n) {
    if (st->n_atoms) {
        long r = fat5__re_match(st->atom, st->n_atoms, s, n);
        return r > 0 ? (size_t)r : 0;
    }
    return st->a_len <= n && memcmp(s, st->a, st->a_len) == 0 ? st->a_len : 0;
}

// one normalizer: (s, o)[0..n) -> (b, ob)
static fat5_status fat5__hf_norm_step(fat5_tokenizer *t, const fat5__tstep *st, const char *s, const uint32_t *o, size_t n,
                                      fat5__tbuf *b, fat5__ubuf *ob) {
    size_t i = 0, l;
    b->n = 0;
    ob->n = 0;
    if (!fat5__tbuf_put(t->ctx, b, "", 0)) goto oom;
    if (n == 0) return FAT5_OK;
    switch (st->kind) {
    case FAT5__N_PRECOMPILED:   // per grapheme cluster (under 6 bytes), else per character; first rule
        while (i < n) {
            size_t g = fat5__grapheme_len(s + i, n - i), j;
            fat5__cm_match m;
            if (g < 6 && fat5__charsmap_search(&st->cm, s + i, g, &m, 1)) {
                if (!fat5__emit(t, b, ob, m.repl, strlen(m.repl), NULL, o[i])) goto oom;
            } else {
                for (j = i; j < i + g; j += l) {
                    l = fat5__utf8_len(s + j, n - j);
                    if (fat5__charsmap_search(&st->cm, s + j, l, &m, 1)) {
                        if (!fat5__emit(t, b, ob, m.repl, strlen(m.repl), NULL, o[j])) goto oom;
                    } else if (!fat5__emit(t, b, ob, s + j, l, o + j, 0)) {
                        goto oom;
                    }
                }
            }
            i += g;
        }
        break;
    case FAT5__N_REPLACE:
        while (i < n) {
            size_t k = fat5__replace_at(st, s + i, n - i);
            if (k) {   // the new text is aligned with the match's last character (as tokenizers aligns it)
                size_t lc = i + k - 1;
                while (lc > i && ((unsigned char)s[lc] & 0xC0) == 0x80) lc--;
                if (!fat5__emit(t, b, ob, st->b, st->b_len, NULL, o[lc])) goto oom;
                i += k;
            } else {
                l = fat5__utf8_len(s + i, n - i);
                if (!fat5__emit(t, b, ob, s + i, l, o + i, 0)) goto oom;
                i += l;
            }
        }
        break;
    case FAT5__N_STRIP: {
        size_t a = 0, e = n;
        while (st->f1 && a < e && fat5__hf_space(fat5__cp_at(s + a, e - a, &l))) a += l;
        while (st->f2 && e > a && fat5__hf_space(fat5__cp_before(s, e))) {
            e--;
            while (e > a && ((unsigned char)s[e] & 0xC0) == 0x80) e--;
        }
        if (!fat5__emit(t, b, ob, s + a, e - a, o + a, 0)) goto oom;
        break;
    }
    case FAT5__N_PREPEND:
        if (n && !fat5__emit(t, b, ob, st->a, st->a_len, NULL, o[0])) goto oom;
        if (!fat5__emit(t, b, ob, s, n, o, 0)) goto oom;
        break;
    default: {   // NFC / NFD / NFKC / NFKD, a chunk at a time: a white-space character alone, else a
                 // character and the non-ASCII, non-space ones after it. Nothing composes across
                 // those boundaries, and each chunk's bytes take its first character's offset.

        int form = st->kind == FAT5__N_NFC ? FAT5__NFC : st->kind == FAT5__N_NFD ? FAT5__NFD
                 : st->kind == FAT5__N_NFKC ? FAT5__NFKC : FAT5__NFKD;
        while (i < n) {
            size_t e = i, need;
            int sp = fat5__hf_space(fat5__cp_at(s + i, n - i, &l));
            e = i + l;
            if (!sp)
                while (e < n && (unsigned char)s[e] >= 0x80 && !fat5__hf_space(fat5__cp_at(s + e, n - e, &l))) e += l;
            need = fat5__unorm(form, s + i, e - i, NULL, 0);
            if (!fat5__grow(t->ctx, (void **)&b->p, &b->cap, b->n + need + 1, 1)) goto oom;
            fat5__unorm(form, s + i, e - i, b->p + b->n, need);
            for (l = 0; l < need; l++)
                if (!fat5__ubuf_push(t->ctx, ob, o[i])) goto oom;
            b->n += need;
            b->p[b->n] = 0;
            i = e;
        }
        break;
    }
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// the normalizer chain on s[0..n) (original offsets orig0 + i) -> (out, orig)
static fat5_status fat5__hf_normalize(fat5_tokenizer *t, const char *s, size_t n, uint32_t orig0, fat5__tbuf *out,
                                      fat5__ubuf *orig) {
    fat5__tbuf tb = t->sn;   // the other buffer of the pair, kept by the tokenizer
    fat5__ubuf to = t->on;
    fat5_status st = FAT5_OK;
    size_t i;
    int k;
    out->n = 0;
    orig->n = 0;
    if (!fat5__tbuf_put(t->ctx, out, s, n)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (i = 0; i < n; i++)
        if (!fat5__ubuf_push(t->ctx, orig, orig0 + (uint32_t)i)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    for (k = 0; k < t->n_norm && !st; k++) {
        fat5__tbuf xb;
        fat5__ubuf xo;
        st = fat5__hf_norm_step(t, &t->norm[k], out->p, orig->p, out->n, &tb, &to);
        xb = *out; *out = tb; tb = xb;
        xo = *orig; *orig = to; to = xo;
    }
    t->sn = tb;
    t->on = to;
    return st;
}

// GPT-2's byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 for 256 + k in
// byte order (k: 0x00..0x20 -> 0..32, 0x7F..0xA0 -> 33..66, 0xAD -> 67)
#define FAT5__GPT2_PRINTABLE(b) (((b) >= 0x21 && (b) <= 0x7E) || ((b) >= 0xA1 && (b) <= 0xAC) || ((b) >= 0xAE && (b) <= 0xFF))
static uint32_t fat5__gpt2_char(unsigned b) {
    if (FAT5__GPT2_PRINTABLE(b)) return b;
    return 256 + (b <= 0x20 ? b : b <= 0xA0 ? b - 0x7F + 33 : 67);
}
static int fat5__gpt2_byte(uint32_t cp) {
    uint32_t k = cp - 256;
    if (cp < 256) return FAT5__GPT2_PRINTABLE(cp) ? (int)cp : -1;
    return k <= 32 ? (int)k : k <= 66 ? (int)(k - 33 + 0x7F) : k == 67 ? 0xAD : -1;
}
#undef FAT5__GPT2_PRINTABLE

// GPT-2's split at s[0..n): the length of the next piece ('s 't 're 've 'm 'll 'd | ?\p{L}+ |
// ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+)
static size_t fat5__gpt2_piece(const char *s, size_t n) {
    static const char *con[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    size_t i, l, p, k;
    uint32_t c;
    int cls;
    for (i = 0; i < 7; i++) {
        size_t cl = strlen(con[i]);
        if (cl <= n && memcmp(s, con[i], cl) == 0) return cl;
    }
    p = s[0] == ' ' ? 1 : 0;
    if (p < n) {   // ' ?' then a run of one class (letters, numbers, other non-space)
        c = fat5__cp_at(s + p, n - p, &l);
        cls = fat5__uc_is_letter(c) ? 1 : fat5__uc_is_number(c) ? 2 : fat5__hf_space(c) ? 0 : 3;
        if (cls) {
            k = p;
            while (k < n) {
                int d;
                c = fat5__cp_at(s + k, n - k, &l);
                d = fat5__uc_is_letter(c) ? 1 : fat5__uc_is_number(c) ? 2 : fat5__hf_space(c) ? 0 : 3;
                if (d != cls) break;
                k += l;
            }
            return k;
        }
    }
    // white space: the run, less its last character when a non-space follows (and the run is longer)
    k = 0;
    i = 0;
    while (k < n && fat5__hf_space(fat5__cp_at(s + k, n - k, &l))) {
        i = k;
        k += l;
    }
    if (k < n && i > 0) return i;
    return k ? k : fat5__utf8_len(s, n);
}

// one pre-tokenizer over the splits (b0, o0, sp0) -> (b1, o1, sp1)
static fat5_status fat5__hf_pre_step(fat5_tokenizer *t, const fat5__tstep *st, const fat5__tbuf *b0, const fat5__ubuf *o0,
                                     const fat5__ubuf *sp0, fat5__tbuf *b1, fat5__ubuf *o1, fat5__ubuf *sp1) {
    size_t q;
    b1->n = o1->n = sp1->n = 0;
    if (!fat5__tbuf_put(t->ctx, b1, "", 0)) goto oom;
    for (q = 0; q < sp0->n; q += 4) {
        const char *s = b0->p + sp0->p[q];
        const uint32_t *o = o0->p + sp0->p[q];
        size_t n = sp0->p[q + 1], i, l, start = b1->n, a;
        uint32_t shift = sp0->p[q + 2];
        if (sp0->p[q + 3] != FAT5__NOTOK) {   // an added token: as it is
            if (!fat5__emit(t, b1, o1, s, n, o, 0) || !fat5__split_push(t, sp1, start, n, shift, sp0->p[q + 3])) goto oom;
            continue;
        }
        switch (st->kind) {
        case FAT5__P_METASPACE: {
            // the spaces are replaced first, so a leading space counts as a leading replacement
            int pre = n > 0 && s[0] != ' ' && !(n >= st->a_len && memcmp(s, st->a, st->a_len) == 0) &&
                      (st->f1 == 0 || (st->f1 == 1 && shift == 0));
            if (pre && !fat5__emit(t, b1, o1, st->a, st->a_len, NULL, o[0])) goto oom;
            for (i = 0; i < n; i++)
                if (!(s[i] == ' ' ? fat5__emit(t, b1, o1, st->a, st->a_len, NULL, o[i]) : fat5__emit(t, b1, o1, s + i, 1, o + i, 0)))
                    goto oom;
            if (!st->f2) {
                if (!fat5__split_push(t, sp1, start, b1->n - start, o1->p[start], FAT5__NOTOK)) goto oom;
                break;
            }
            for (a = i = start; i < b1->n; i += l) {   // split before each replacement (merged with the next)
                l = fat5__utf8_len(b1->p + i, b1->n - i);
                if (i > a && l == st->a_len && memcmp(b1->p + i, st->a, l) == 0) {
                    if (!fat5__split_push(t, sp1, a, i - a, o1->p[a], FAT5__NOTOK)) goto oom;
                    a = i;
                }
            }
            if (b1->n > a && !fat5__split_push(t, sp1, a, b1->n - a, o1->p[a], FAT5__NOTOK)) goto oom;
            break;
        }
        case FAT5__P_WHITESPACE_SPLIT:
            for (i = 0; i < n;) {
                size_t e;
                if (fat5__hf_space(fat5__cp_at(s + i, n - i, &l))) {
                    i += l;
                    continue;
                }
                for (e = i; e < n && !fat5__hf_space(fat5__cp_at(s + e, n - e, &l)); e += l) {}
                a = b1->n;
                if (!fat5__emit(t, b1, o1, s + i, e - i, o + i, 0) || !fat5__split_push(t, sp1, a, e - i, o[i], FAT5__NOTOK))
                    goto oom;
                i = e;
            }
            break;
        case FAT5__P_BYTELEVEL: {
            // the prefix space and the split work on the text; each piece is then mapped byte by byte
            size_t tn = n;
            const char *ts = s;
            t->s3.n = 0;
            t->o3.n = 0;
            if (st->f1 && n > 0 && s[0] != ' ') {
                if (!fat5__emit(t, &t->s3, &t->o3, " ", 1, NULL, o[0]) || !fat5__emit(t, &t->s3, &t->o3, s, n, o, 0)) goto oom;
                ts = t->s3.p;
                o = t->o3.p;
                tn = n + 1;
            }
            for (i = 0; i < tn;) {
                size_t k = st->f2 ? fat5__gpt2_piece(ts + i, tn - i) : tn - i, j;
                a = b1->n;
                for (j = i; j < i + k; j++) {
                    char u[4];
                    size_t ul = fat5__utf8_put(u, fat5__gpt2_char((unsigned char)ts[j]));
                    if (!fat5__emit(t, b1, o1, u, ul, NULL, o[j])) goto oom;
                }
                if (!fat5__split_push(t, sp1, a, b1->n - a, o[i], FAT5__NOTOK)) goto oom;
                i += k;
            }
            break;
        }
        }
    }
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
}

// tokenizers' BPE on one word s[0..n): ids appended to out. The symbols (one per character, or
// one per byte of an unknown one with byte fallback) live in the lattice scratch, the merge heap
// (at most three entries per symbol: the first pairs, then two per merge) after them.
typedef struct fat5__hsym { int32_t c, prev, next; uint32_t len; } fat5__hsym;
typedef struct fat5__hmrg { uint32_t rank, pos, id; } fat5__hmrg;

static int fat5__hsym_add(fat5_tokenizer *t, size_t *ny, int32_t id, uint32_t len) {
    fat5__hsym *y;
    if (!fat5__grow(t->ctx, &t->lat, &t->lat_cap, (*ny + 1) * sizeof(fat5__hsym), 1)) return 0;
    y = FAT5__CAST(fat5__hsym *, t->lat);
    y[*ny].c = id;
    y[*ny].len = len;
    y[*ny].prev = (int32_t)*ny - 1;
    y[*ny].next = (int32_t)*ny + 1;
    (*ny)++;
    return 1;
}

// merge x is applied before z: the lower rank, then the leftmost
#define FAT5__MLESS(x, z) ((x).rank < (z).rank || ((x).rank == (z).rank && (x).pos < (z).pos))
FAT5__HEAP(fat5__hmrg, fat5__hmrg, FAT5__MLESS)
#undef FAT5__MLESS
static void fat5__hmrg_add(fat5__hmrg *h, size_t *nh, uint32_t rank, uint32_t pos, uint32_t id) {
    fat5__hmrg v;
    v.rank = rank;
    v.pos = pos;
    v.id = id;
    fat5__hmrg_push(h, nh, v);
}

static fat5_status fat5__hf_bpe(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5__hsym *y;
    fat5__hmrg *h;
    size_t ny = 0, nh = 0, i, l, hbytes;
    int32_t unk = -1;
    uint32_t unk_len = 0;
    const fat5__merge *m;
    if (n == 0) return FAT5_OK;
    if (t->ignore_merges) {
        int32_t id = fat5__trie_find(&t->vocab, s, n);
        if (id >= 0) return fat5__ubuf_push(t->ctx, out, (uint32_t)id) ? FAT5_OK : FAT5_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < n; i += l) {
        int32_t id;
        l = fat5__utf8_len(s + i, n - i);
        t->s3.n = 0;
        if ((i > 0 && t->cs_prefix_len && !fat5__tbuf_put(t->ctx, &t->s3, t->pool.p + t->cs_prefix, t->cs_prefix_len)) ||
            !fat5__tbuf_put(t->ctx, &t->s3, s + i, l) ||
            (i + l == n && t->eow_suffix_len && !fat5__tbuf_put(t->ctx, &t->s3, t->pool.p + t->eow_suffix, t->eow_suffix_len)))
            return FAT5_ERR_OUT_OF_MEMORY;
        if ((id = fat5__trie_find(&t->vocab, t->s3.p, t->s3.n)) >= 0) {
            if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
            unk = -1;
            if (!fat5__hsym_add(t, &ny, id, (uint32_t)l)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        if (t->byte_fallback && fat5__has_byte_pieces(t, t->s3.p, t->s3.n)) {   // every byte of the piece
            size_t j;                                                              // (prefix and suffix too)
            for (j = 0; j < t->s3.n; j++)
                if (!fat5__hsym_add(t, &ny, t->byte_id[(unsigned char)t->s3.p[j]], 1)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        if (t->unk_id >= 0) {
            if (unk >= 0 && t->fuse_unk) {
                unk_len += (uint32_t)l;
            } else {
                if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
                unk = t->unk_id;
                unk_len = (uint32_t)l;
            }
        }
    }
    if (unk >= 0 && !fat5__hsym_add(t, &ny, unk, unk_len)) return FAT5_ERR_OUT_OF_MEMORY;
    if (ny == 0) return FAT5_OK;
    // the heap after the symbols
    if (!fat5__mul_ok(3 * ny + 1, sizeof(fat5__hmrg), &hbytes) ||
        !fat5__grow(t->ctx, &t->lat, &t->lat_cap, ny * sizeof(fat5__hsym) + hbytes + sizeof(fat5__hmrg), 1))
        return FAT5_ERR_OUT_OF_MEMORY;
    y = FAT5__CAST(fat5__hsym *, t->lat);
    h = FAT5__CAST(fat5__hmrg *, (void *)((char *)t->lat + (ny * sizeof(fat5__hsym) + sizeof(fat5__hmrg) - 1) /
                                                          sizeof(fat5__hmrg) * sizeof(fat5__hmrg)));
    y[ny - 1].next = -1;
    // merges: lowest rank first, then leftmost
    for (i = 0; i + 1 < ny; i++)
        if ((m = fat5__merge_find(t, y[i].c, y[i + 1].c))) fat5__hmrg_add(h, &nh, m->rank, (uint32_t)i, m->id);
    while (nh) {
        fat5__hmrg top = fat5__hmrg_pop(h, &nh);
        fat5__hsym *cur = &y[top.pos], *right;
        if (cur->len == 0 || cur->next < 0) continue;
        right = &y[cur->next];
        if (!(m = fat5__merge_find(t, cur->c, right->c)) || m->id != top.id) continue;
        cur->c = (int32_t)top.id;
        cur->len += right->len;
        right->len = 0;
        cur->next = right->next;
        if (cur->next >= 0) y[cur->next].prev = (int32_t)top.pos;
        if (cur->prev >= 0 && (m = fat5__merge_find(t, y[cur->prev].c, cur->c)))
            fat5__hmrg_add(h, &nh, m->rank, (uint32_t)cur->prev, m->id);
        if (cur->next >= 0 && (m = fat5__merge_find(t, cur->c, y[cur->next].c)))
            fat5__hmrg_add(h, &nh, m->rank, top.pos, m->id);
    }
    for (i = 0; i < ny; i = y[i].next >= 0 ? (size_t)y[i].next : ny)
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)y[i].c)) return FAT5_ERR_OUT_OF_MEMORY;
    return FAT5_OK;
}

// tokenizers' Unigram on one split: fused unknowns looked up as text, then bytes or <unk>
static fat5_status fat5__hf_unigram(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    fat5_status st;
    size_t i;
    if (n == 0) return FAT5_OK;
    if ((st = fat5__unigram(t, s, n))) return st;
    for (i = 0; i < t->ids.n; i += 3) {
        uint32_t a = t->ids.p[i], b = t->ids.p[i + 1];
        int32_t id = (int32_t)t->ids.p[i + 2];
        if (id == t->unk_id) {   // fuse the run of unknowns, then look the text up
            while (i + 3 < t->ids.n && (int32_t)t->ids.p[i + 5] == t->unk_id) {
                b = t->ids.p[i + 4];
                i += 3;
            }
            id = fat5__trie_find(&t->vocab, s + a, b - a);
            if (id < 0 && t->byte_fallback && fat5__has_byte_pieces(t, s + a, b - a)) {
                if (!fat5__push_byte_pieces(t, s + a, b - a, out)) return FAT5_ERR_OUT_OF_MEMORY;
                continue;
            }
            if (id < 0) id = t->unk_id;
        }
        if (!fat5__ubuf_push(t->ctx, out, (uint32_t)id)) return FAT5_ERR_OUT_OF_MEMORY;
    }
    return FAT5_OK;
}

// tokenizers: one sequence's ids appended to out
static fat5_status fat5__hf_encode(fat5_tokenizer *t, const char *text, size_t len, fat5__ubuf *out) {
    fat5_status st;
    size_t q, i;
    int k;
    fat5__tbuf *ba = &t->s0, *bb = &t->s1;
    fat5__ubuf *oa = &t->o0, *ob = &t->o1, *sa = &t->spl, *sb = &t->spl2;
    if (len > UINT32_MAX / 2) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "tokenize: text longer than 2 GiB");
    // 1. valid UTF-8 (s2), split on the added tokens matched in the raw text (o2: the triples)
    if (!fat5__utf8_sanitize(t->ctx, text, len, &t->s2, NULL) || !fat5__hf_added_split(t, &t->added_raw, t->s2.p, t->s2.n, &t->o2))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    ba->n = oa->n = sa->n = 0;
    if (!fat5__tbuf_put(t->ctx, ba, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (q = 0; q < t->o2.n; q += 3) {
        uint32_t a = t->o2.p[q], b = t->o2.p[q + 1], idx = t->o2.p[q + 2];
        if (idx != FAT5__NOTOK) {
            if (!fat5__split_push(t, sa, ba->n, 0, a, (uint32_t)t->added[idx].id)) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        // 2. normalise the piece (s3, o3), split on the added tokens matched in normalised text
        if ((st = fat5__hf_normalize(t, t->s2.p + a, b - a, a, &t->s3, &t->o3))) return st;
        if (!fat5__hf_added_split(t, &t->added_norm, t->s3.p, t->s3.n, &t->ids)) return FAT5_ERR_OUT_OF_MEMORY;
        for (i = 0; i < t->ids.n; i += 3) {
            uint32_t c = t->ids.p[i], d = t->ids.p[i + 1], id2 = t->ids.p[i + 2];
            size_t at = ba->n;
            if (c == d) continue;   // empty pieces are dropped
            if (!fat5__emit(t, ba, oa, t->s3.p + c, d - c, t->o3.p + c, 0) ||
                !fat5__split_push(t, sa, at, d - c, t->o3.p[c], id2 == FAT5__NOTOK ? FAT5__NOTOK : (uint32_t)t->added[id2].id))
                return FAT5_ERR_OUT_OF_MEMORY;
        }
    }
    // 3. pre-tokenizers
    for (k = 0; k < t->n_pre; k++) {
        fat5__tbuf *xb;
        fat5__ubuf *xo, *xs;
        if ((st = fat5__hf_pre_step(t, &t->pre[k], ba, oa, sa, bb, ob, sb))) return st;
        xb = ba; ba = bb; bb = xb;
        xo = oa; oa = ob; ob = xo;
        xs = sa; sa = sb; sb = xs;
    }
    // 4. the model on each text split
    for (q = 0; q < sa->n; q += 4) {
        if (sa->p[q + 3] != FAT5__NOTOK) {
            if (!fat5__ubuf_push(t->ctx, out, sa->p[q + 3])) return FAT5_ERR_OUT_OF_MEMORY;
            continue;
        }
        st = t->model == FAT5__TM_UNIGRAM ? fat5__hf_unigram(t, ba->p + sa->p[q], sa->p[q + 1], out)
                                          : fat5__hf_bpe(t, ba->p + sa->p[q], sa->p[q + 1], out);
        if (st) return st;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json: decoding. The ids' texts (special ones left out on request) pass through the
// decoder chain as a list of strings, then are concatenated (no decoder: joined with spaces).

static int fat5__hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

// one decoder over the token list (b0, l0: offset/length pairs) -> (b1, l1)
static fat5_status fat5__hf_dec_step(fat5_tokenizer *t, const fat5__tstep *st, const fat5__tbuf *b0, const fat5__ubuf *l0,
                                     fat5__tbuf *b1, fat5__ubuf *l1) {
    size_t q, i, l;
    b1->n = l1->n = 0;
    if (!fat5__tbuf_put(t->ctx, b1, "", 0)) goto oom;
#define FAT5__TOK_OPEN() size_t at_ = b1->n
#define FAT5__TOK_CLOSE() do { if (!fat5__ubuf_push(t->ctx, l1, (uint32_t)at_) || !fat5__ubuf_push(t->ctx, l1, (uint32_t)(b1->n - at_))) goto oom; } while (0)
    switch (st->kind) {
    case FAT5__D_METASPACE:
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1];
            FAT5__TOK_OPEN();
            for (i = 0; i < n; i += l) {
                l = fat5__utf8_len(s + i, n - i);
                if (l == st->a_len && memcmp(s + i, st->a, l) == 0) {
                    if (!(q == 0 && st->f1 != 2) && !fat5__tbuf_put(t->ctx, b1, " ", 1)) goto oom;
                } else if (!fat5__tbuf_put(t->ctx, b1, s + i, l)) {
                    goto oom;
                }
            }
            FAT5__TOK_CLOSE();
        }
        break;
    case FAT5__D_BYTELEVEL: {   // all tokens to bytes (a token with a character outside the alphabet: its UTF-8)
        FAT5__TOK_OPEN();
        t->s3.n = 0;
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1], start = t->s3.n;
            for (i = 0; i < n; i += l) {
                int by = fat5__gpt2_byte(fat5__cp_at(s + i, n - i, &l));
                char c = (char)by;
                if (by < 0) {
                    t->s3.n = start;
                    if (!fat5__tbuf_put(t->ctx, &t->s3, s, n)) goto oom;
                    break;
                }
                if (!fat5__tbuf_put(t->ctx, &t->s3, &c, 1)) goto oom;
            }
        }
        for (i = 0; i < t->s3.n;) {   // from_utf8_lossy
            size_t k = fat5__utf8_len(t->s3.p + i, t->s3.n - i);
            if (!(k ? fat5__tbuf_put(t->ctx, b1, t->s3.p + i, k) : fat5__tbuf_put(t->ctx, b1, fat5__ufffd, 3))) goto oom;
            i += k ? k : fat5__utf8_subpart(t->s3.p + i, t->s3.n - i);
        }
        FAT5__TOK_CLOSE();
        break;
    }
    case FAT5__D_BYTEFALLBACK:
        t->s3.n = 0;
        for (q = 0; q <= l0->n; q += 2) {
            const char *s = q < l0->n ? b0->p + l0->p[q] : "";
            size_t n = q < l0->n ? l0->p[q + 1] : 0;
            int v = -1;
            if (q < l0->n && n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {   // Rust's u8::from_str_radix(.., 16)
                const char *h = s + 3;
                int d0 = fat5__hexval(h[0]), d1 = fat5__hexval(h[1]);
                if (d0 >= 0 && d1 >= 0) v = d0 * 16 + d1;
                else if (h[0] == '+' && d1 >= 0) v = d1;
            }
            if (v >= 0) {
                char c = (char)v;
                if (!fat5__tbuf_put(t->ctx, &t->s3, &c, 1)) goto oom;
                continue;
            }
            if (t->s3.n) {   // pending bytes: one token when valid UTF-8, else one U+FFFD each
                size_t j, ok = 1;
                for (j = 0; j < t->s3.n && ok; j += ok) ok = fat5__utf8_len(t->s3.p + j, t->s3.n - j);
                if (ok) {
                    FAT5__TOK_OPEN();
                    if (!fat5__tbuf_put(t->ctx, b1, t->s3.p, t->s3.n)) goto oom;
                    FAT5__TOK_CLOSE();
                } else {
                    for (j = 0; j < t->s3.n; j++) {
                        FAT5__TOK_OPEN();
                        if (!fat5__tbuf_put(t->ctx, b1, fat5__ufffd, 3)) goto oom;
                        FAT5__TOK_CLOSE();
                    }
                }
                t->s3.n = 0;
            }
            if (q < l0->n) {
                FAT5__TOK_OPEN();
                if (!fat5__tbuf_put(t->ctx, b1, s, n)) goto oom;
                FAT5__TOK_CLOSE();
            }
        }
        break;
    case FAT5__D_FUSE: {
        FAT5__TOK_OPEN();
        for (q = 0; q < l0->n; q += 2)
            if (!fat5__tbuf_put(t->ctx, b1, b0->p + l0->p[q], l0->p[q + 1])) goto oom;
        FAT5__TOK_CLOSE();
        break;
    }
    case FAT5__D_STRIP:
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1], a = 0, e = n;
            int c;
            FAT5__TOK_OPEN();
            for (c = 0; c < st->f1 && a < e && n - a >= st->a_len && memcmp(s + a, st->a, st->a_len) == 0; c++) a += st->a_len;
            for (c = 0; c < st->f2 && e >= a + st->a_len && memcmp(s + e - st->a_len, st->a, st->a_len) == 0; c++) e -= st->a_len;
            if (!fat5__tbuf_put(t->ctx, b1, s + a, e - a)) goto oom;
            FAT5__TOK_CLOSE();
        }
        break;
    case FAT5__D_REPLACE:
        for (q = 0; q < l0->n; q += 2) {
            const char *s = b0->p + l0->p[q];
            size_t n = l0->p[q + 1];
            FAT5__TOK_OPEN();
            for (i = 0; i < n;) {
                size_t k = fat5__replace_at(st, s + i, n - i);
                if (k) {
                    if (!fat5__tbuf_put(t->ctx, b1, st->b, st->b_len)) goto oom;
                    i += k;
                } else {
                    l = fat5__utf8_len(s + i, n - i);
                    if (!fat5__tbuf_put(t->ctx, b1, s + i, l)) goto oom;
                    i += l;
                }
            }
            FAT5__TOK_CLOSE();
        }
        break;
    }
#undef FAT5__TOK_OPEN
#undef FAT5__TOK_CLOSE
    return FAT5_OK;
oom:
    return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "detokenize: out of memory");
}

static fat5_status fat5__hf_decode(fat5_tokenizer *t, const int32_t *ids, int64_t n, int skip, fat5__tbuf *out) {
    fat5__tbuf *ba = &t->s0, *bb = &t->s1;
    fat5__ubuf *la = &t->o0, *lb = &t->o1;
    fat5_status st;
    int64_t i;
    int k;
    ba->n = la->n = 0;
    if (!fat5__tbuf_put(t->ctx, ba, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (i = 0; i < n; i++) {
        uint32_t off = t->id_off[ids[i]];
        size_t at = ba->n, len;
        if (off == UINT32_MAX || (skip && t->id_special[ids[i]])) continue;
        len = strlen(t->pool.p + off);
        if (!fat5__tbuf_put(t->ctx, ba, t->pool.p + off, len) || !fat5__ubuf_push(t->ctx, la, (uint32_t)at) ||
            !fat5__ubuf_push(t->ctx, la, (uint32_t)len))
            return FAT5_ERR_OUT_OF_MEMORY;
    }
    for (k = 0; k < t->n_dec; k++) {
        fat5__tbuf *xb;
        fat5__ubuf *xl;
        if ((st = fat5__hf_dec_step(t, &t->dec[k], ba, la, bb, lb))) return st;
        xb = ba; ba = bb; bb = xb;
        xl = la; la = lb; lb = xl;
    }
    out->n = 0;
    if (!fat5__tbuf_put(t->ctx, out, "", 0)) return FAT5_ERR_OUT_OF_MEMORY;
    for (i = 0; i < (int64_t)la->n; i += 2)
        if ((i && !t->has_decoder && !fat5__tbuf_put(t->ctx, out, " ", 1)) ||
            !fat5__tbuf_put(t->ctx, out, ba->p + la->p[i], la->p[i + 1]))
            return FAT5_ERR_OUT_OF_MEMORY;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// the public calls

static int32_t fat5__tokenizer_text_id(const fat5_tokenizer *t, const char *text) {
    int32_t i;
    for (i = 0; i < t->n_added; i++)
        if (strcmp(t->pool.p + t->added[i].off, text) == 0) return t->added[i].id;
    return fat5__trie_find(&t->vocab, text, strlen(text));
}

static fat5_status fat5__tokenizer_new(fat5_ctx *ctx, fat5_tokenizer **out) {
    fat5_tokenizer *t;
    int b;
    *out = NULL;
    t = FAT5__CAST(fat5_tokenizer *, fat5__calloc(ctx, 1, sizeof *t));
    if (!t) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    t->ctx = ctx;
    t->unk_id = t->eos_id = t->pad_id = -1;
    t->n_tmpl[0] = t->n_tmpl[1] = -1;
    for (b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (!fat5__pool_add(t, "", 0, &t->cs_prefix)) {   // offset 0: the empty string
        fat5__free(ctx, t);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    *out = t;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_tokenizer_from_memory(fat5_ctx *ctx, const void *data, size_t len, int is_json,
                                                fat5_tokenizer **out) {
    fat5_tokenizer *t;
    fat5_status st;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_from_memory: out is NULL");
    *out = NULL;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    if (!data && len) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_from_memory: data is NULL");
    if (len > FAT5__TOK_MAX_FILE) return fat5__err(ctx, FAT5_ERR_FORMAT, "tokenizer: %zu bytes (more than 1 GiB)", len);
    if ((st = fat5__tokenizer_new(ctx, &t))) return st;
    t->is_json = is_json != 0;
    st = is_json ? fat5__tj_load(t, "tokenizer.json", FAT5__CAST(const char *, data), len)
                 : fat5__spm_load(t, "SentencePiece model", FAT5__CAST(const unsigned char *, data), len);
    if (st) {
        fat5_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_tokenizer_load(fat5_ctx *ctx, const char *path, fat5_tokenizer **out) {
    static const char *names[] = {"tokenizer.json", "spiece.model", "tokenizer.model"};
    char *buf = NULL, *file = NULL;
    size_t len = 0, pl;
    fat5_status st;
    int i, is_json;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_load: out is NULL");
    *out = NULL;
    if (!ctx) return FAT5_ERR_INVALID_ARG;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenizer_load: path is NULL");
    pl = strlen(path);
    if (fat5__is_dir(path)) {
        for (i = 0; i < 3; i++) {
            FILE *f;
            fat5__free(ctx, file);
            if (!(file = FAT5__CAST(char *, fat5__malloc(ctx, pl + 20)))) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
            snprintf(file, pl + 20, "%s/%s", path, names[i]);
            if ((f = fopen(file, "rb")) != NULL) {
                fclose(f);
                break;
            }
        }
        if (i == 3) {
            fat5__free(ctx, file);
            return fat5__err(ctx, FAT5_ERR_IO, "%s: no tokenizer.json, spiece.model or tokenizer.model in the directory", path);
        }
        is_json = i == 0;
    } else {
        if (!(file = fat5__strdup(ctx, path))) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
        is_json = pl >= 5 && strcmp(path + pl - 5, ".json") == 0;
    }
    st = fat5__read_file(ctx, file, FAT5__TOK_MAX_FILE, &buf, &len);
    if (!st) {
        st = fat5_tokenizer_from_memory(ctx, buf, len, is_json, out);
        if (st) {   // name the file in the message
            char msg[FAT5__ERRMSG_CAP];
            snprintf(msg, sizeof msg, "%s", fat5_last_error(ctx));
            fat5__err(ctx, st, "%s: %s", file, msg);
        }
    }
    fat5__free(ctx, buf);
    fat5__free(ctx, file);
    return st;
}

// one sequence's ids (no post-processor) appended to out
static fat5_status fat5__encode_one(fat5_tokenizer *t, const char *s, size_t n, fat5__ubuf *out) {
    return t->is_json ? fat5__hf_encode(t, s, n, out) : fat5__spm_encode(t, s, n, out);
}

FAT5_API fat5_status fat5_tokenize(fat5_tokenizer *t, const char *text, size_t len, const char *pair, size_t pair_len,
                                   int flags, int32_t **ids, int64_t *n_ids) {
    fat5__ubuf seq[2] = {{0, 0, 0}, {0, 0, 0}}, res = {0, 0, 0};
    fat5_status st = FAT5_OK;
    int w, np = pair ? 2 : 1;
    if (!t || !ids || !n_ids) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize: NULL argument") : FAT5_ERR_INVALID_ARG;
    *ids = NULL;
    *n_ids = 0;
    if ((!text && len) || (!pair && pair_len)) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize: text is NULL");
    if (len > UINT32_MAX / 2 || pair_len > UINT32_MAX / 2)
        return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_tokenize: text longer than 2 GiB");
    for (w = 0; w < np && !st; w++) st = fat5__encode_one(t, w ? pair : (text ? text : ""), w ? pair_len : len, &seq[w]);
    if (!st) {
        int special = !(flags & FAT5_TOKENIZE_NO_SPECIAL);
        if (!(special && t->is_json && t->n_tmpl[np - 1] >= 0)) {
            // the sequences as they are; sentencepiece: EOS after each (T5's convention)
            for (w = 0; w < np && !st; w++)
                if (!fat5__ubuf_append(t->ctx, &res, seq[w].p, seq[w].n) ||
                    (special && !t->is_json && t->eos_id >= 0 && !fat5__ubuf_push(t->ctx, &res, (uint32_t)t->eos_id)))
                    st = FAT5_ERR_OUT_OF_MEMORY;
        } else {   // the template
            int k;
            for (k = 0; k < t->n_tmpl[np - 1] && !st; k++) {
                const fat5__titem *it = &t->tmpl[np - 1][k];
                if (!(it->seq >= 0 ? fat5__ubuf_append(t->ctx, &res, seq[it->seq].p, seq[it->seq].n)
                                   : fat5__ubuf_append(t->ctx, &res, t->tmpl_ids.p + it->first, it->n)))
                    st = FAT5_ERR_OUT_OF_MEMORY;
            }
        }
    }
    fat5__free(t->ctx, seq[0].p);
    fat5__free(t->ctx, seq[1].p);
    if (st) {
        fat5__free(t->ctx, res.p);
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "tokenize: out of memory") : st;
    }
    if (!res.p && !(res.p = FAT5__CAST(uint32_t *, fat5__malloc(t->ctx, sizeof(uint32_t)))))
        return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    *ids = FAT5__CAST(int32_t *, (void *)res.p);
    *n_ids = (int64_t)res.n;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_detokenize(fat5_tokenizer *t, const int32_t *ids, int64_t n, int flags, char **text, size_t *len) {
    fat5__tbuf out = {0, 0, 0};
    fat5_status st;
    int64_t i;
    if (!t || !text) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_detokenize: NULL argument") : FAT5_ERR_INVALID_ARG;
    *text = NULL;
    if (len) *len = 0;
    if (n < 0 || (!ids && n)) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_detokenize: bad ids");
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_detokenize: ids[%lld] = %d is outside the vocabulary (%d)",
                             (long long)i, (int)ids[i], (int)t->vocab_size);
    st = t->is_json ? fat5__hf_decode(t, ids, n, (flags & FAT5_DETOKENIZE_SKIP_SPECIAL) != 0, &out)
                    : fat5__spm_decode(t, ids, n, !(flags & FAT5_DETOKENIZE_SKIP_SPECIAL), &out);
    if (st) {
        fat5__free(t->ctx, out.p);
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "detokenize: out of memory") : st;
    }
    if (!out.p && !fat5__tbuf_put(t->ctx, &out, "", 0)) return fat5__err(t->ctx, FAT5_ERR_OUT_OF_MEMORY, "detokenize: out of memory");
    *text = out.p;
    if (len) *len = out.n;
    return FAT5_OK;
}

FAT5_API int64_t fat5_tokenizer_vocab_size(const fat5_tokenizer *t) { return t ? t->vocab_size : 0; }

FAT5_API const char *fat5_tokenizer_id_to_piece(const fat5_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->vocab_size) return NULL;
    if (t->is_json) return t->id_off[id] == UINT32_MAX ? NULL : t->pool.p + t->id_off[id];
    return fat5__piece(t, id);
}

FAT5_API int32_t fat5_tokenizer_piece_to_id(const fat5_tokenizer *t, const char *piece) {
    int32_t i;
    if (!t || !piece) return -1;
    if (t->is_json) return fat5__tokenizer_text_id(t, piece);
    for (i = 0; i < t->n_pieces; i++)   // every piece, control and byte pieces included
        if (strcmp(fat5__piece(t, i), piece) == 0) return i;
    return -1;
}

FAT5_API int32_t fat5_tokenizer_eos_id(const fat5_tokenizer *t) { return t ? t->eos_id : -1; }
FAT5_API int32_t fat5_tokenizer_pad_id(const fat5_tokenizer *t) { return t ? t->pad_id : -1; }

FAT5_API fat5_status fat5_batch_from_texts(fat5_tokenizer *t, const char *const *inputs, const char *const *targets,
                                           int64_t n, fat5_batch *out) {
    fat5__ubuf tok[2] = {{0, 0, 0}, {0, 0, 0}}, cu[2] = {{0, 0, 0}, {0, 0, 0}};
    fat5_status st = FAT5_OK;
    int64_t i;
    int w;
    if (!t || !out) return t ? fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: out is NULL") : FAT5_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (n < 0 || (n && !inputs)) return fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: no inputs");
    for (w = 0; w < (targets ? 2 : 1) && !st; w++) {
        if (!fat5__ubuf_push(t->ctx, &cu[w], 0)) st = FAT5_ERR_OUT_OF_MEMORY;
        for (i = 0; i < n && !st; i++) {
            const char *s = w ? targets[i] : inputs[i];
            int32_t *ids = NULL;
            int64_t m = 0;
            if (!s) {
                st = fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: %s[%lld] is NULL", w ? "targets" : "inputs", (long long)i);
                break;
            }
            if ((st = fat5_tokenize(t, s, strlen(s), NULL, 0, 0, &ids, &m))) break;
            if (tok[w].n + (size_t)m > (size_t)INT32_MAX) st = fat5__err(t->ctx, FAT5_ERR_INVALID_ARG, "fat5_batch_from_texts: more than 2^31 tokens");
            if (!st && !fat5__ubuf_append(t->ctx, &tok[w], (const uint32_t *)(const void *)ids, (size_t)m))
                st = FAT5_ERR_OUT_OF_MEMORY;
            fat5__free(t->ctx, ids);
            if (!st && !fat5__ubuf_push(t->ctx, &cu[w], (uint32_t)tok[w].n)) st = FAT5_ERR_OUT_OF_MEMORY;
        }
    }
    if (!st && !targets && !fat5__ubuf_push(t->ctx, &tok[1], 0)) st = FAT5_ERR_OUT_OF_MEMORY;
    for (w = 0; w < 2 && !st; w++)   // never a NULL array for a batch of no tokens
        if ((!tok[w].p && !fat5__ubuf_push(t->ctx, &tok[w], 0)) || (!cu[w].p && !fat5__ubuf_push(t->ctx, &cu[w], 0)))
            st = FAT5_ERR_OUT_OF_MEMORY;
    if (!targets && !st) {   // no labels: an empty decoder side
        cu[1].n = 0;
        for (i = 0; i <= n && !st; i++)
            if (!fat5__ubuf_push(t->ctx, &cu[1], 0)) st = FAT5_ERR_OUT_OF_MEMORY;
    }
    if (st) {
        for (w = 0; w < 2; w++) {
            fat5__free(t->ctx, tok[w].p);
            fat5__free(t->ctx, cu[w].p);
        }
        return st == FAT5_ERR_OUT_OF_MEMORY ? fat5__err(t->ctx, st, "fat5_batch_from_texts: out of memory") : st;
    }
    out->n_seq = n;
    out->n_enc_tokens = (int64_t)cu[0].p[n];
    out->enc_tokens = FAT5__CAST(const int32_t *, (void *)tok[0].p);
    out->enc_cu_seqlens = FAT5__CAST(const int32_t *, (void *)cu[0].p);
    out->dec_cu_seqlens = FAT5__CAST(const int32_t *, (void *)cu[1].p);
    if (targets) {
        out->labels = FAT5__CAST(const int32_t *, (void *)tok[1].p);
        out->n_dec_tokens = (int64_t)cu[1].p[n];
    } else {
        fat5__free(t->ctx, tok[1].p);
    }
    return FAT5_OK;
}

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
