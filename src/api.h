// fat5.h — train and run T5-family encoder-decoder models, in one C header.
//
// Quick start
//     #define FAT5_IMPLEMENTATION      // in exactly one .c file
//     #include "fat5.h"
//     cc app.c -lm -ldl -lpthread
//
//     fat5_ctx *ctx = NULL;
//     fat5_ctx_config cc = fat5_ctx_config_default();
//     char why[512];
//     if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) return 1;  // why says why
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
// examples/train.c is a complete program around them. With a train_file the same loop fine-tunes
// on (input, target) pairs, evaluating generated text (examples/finetune, docs/finetuning.md).
// Several GPUs train data parallel, one process each (fat5_launch forks them, section [9.1]; NCCL
// opened at run time, section [3.6]).
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
//                              (fat5_ctx_config.n_threads is ignored; no -lpthread needed), and GPU
//                              ranks have no watchdog (section [3.6]), so nothing bounds their join
//                              (ncclCommInitRank), and each training step's host waits for the
//                              gradient sums before it queues the optimizer. Results are bitwise
//                              the same either way.
//     FAT5_MM_SCALAR           plain-C micro-kernels for the CPU matrix products (no GNU vector
//                              extensions, no AVX2 dispatch); same results, slower
//
// Environment (GPU):
//     FAT5_CACHE_DIR           compiled-kernel cache (else $XDG_CACHE_HOME/fat5, ~/.cache/fat5; "" = off)
//     FAT5_KERNELS_DIR         compile kernels/*.cu from this directory instead of fat5_kernels.cuh
//     FAT5_SYNC_LAUNCHES=1     synchronise after every kernel launch (errors name the kernel)
//     FAT5_ATTN_TC=0           bf16 attention forward and backward on the exact FMA kernels, not
//                              tensor cores
//     FAT5_MM_ROWS=0           products of a few rows (decoding) on cuBLAS too, not fat5_mm
//     FAT5_CUBLASLT=0          products on cublasGemmEx (its own algorithm per size), not cuBLASLt
//                              with one algorithm per size class
//     FAT5_PDL=0               decode-step kernels launch plainly, not as programmatic dependents
//                              (these five are read when fat5_ctx_config's field of the same name,
//                              lower case, is 0, its default)
//     CUDA_HOME                also searched for libcuda, libnvrtc, libcublas and libcublasLt
//     NCCL_HOME, VIRTUAL_ENV, CONDA_PREFIX   also searched for libnccl.so.2 (several GPUs only;
//                              the Python environments' nvidia/nccl/lib)
//
// Errors: every fallible call returns a fat5_status (FAT5_OK = 0, negative on error); the message,
// naming the tensor or field and what was expected, is read with fat5_last_error(ctx). The library
// never prints and never exits, with one exception: a GPU rank of data-parallel training whose
// thread is held inside an NCCL call for a second after its watchdog saw a peer fail or a sum time
// out (dist_timeout). NCCL cannot abort a call under the thread that is in it and that call never
// returns, so the watchdog marks the rank failed on the ranks' board (its peers and fat5_launch
// report why), passes the message to the context's log callback from the watchdog thread (to
// stderr when there is none), and ends the process with _exit(1) rather than leave a rank hung
// (section [9.1]; the watchdog: section [3.6]).
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
//     for the caller are released on the same context in one of two ways: a plain buffer (text,
//     token ids: fat5_model_config_to_json, fat5_read_file, fat5_tokenize) with fat5_free; a
//     struct fat5 filled (fat5_batch, fat5_generate_result) or an object it made with that
//     kind's _destroy. Every lifecycle is create/destroy (made from nothing) or load/destroy
//     (read from files).
//   - Destroy everything made with a context (models, safetensors and token files, tokenizers,
//     decoders, trainers) before the context; every destroy accepts NULL. A training config's
//     strings set by name (fat5_train_config_set, _from_json) are copies the context keeps: use
//     that config only while its context lives.
//   - A CPU context may run its matrix products on worker threads of its own (n_threads in
//     fat5_ctx_config): they exist only inside a call, touch nothing but that call's buffers, and
//     stop in fat5_ctx_destroy. The caller still sees one thread per context.
//
// Contents (search for "==[n]" to jump to a section). This file is generated from the files of src/
// in the repository, one per section below (do not edit it: edit src/, then make amalgamate). The
// sections follow the layers base, device, ops, model, train, io, generate, text, run, and a lower
// layer never calls a higher one (make check-layers):
//     [0]    API: the declarations below (status, context, RNG, model config, model, batches,
//            safetensors files, token files, UL2 sampler, optimizers, training loop, inference,
//            generation, tokenizers)
//@contents
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
    FAT5_ERR_STATE = -10,        // a call out of order (backward before forward, ...)
    FAT5_ERR_BUSY = -11          // a queue is full (fat5_engine_submit): try again later
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
    // Kernel switches of a GPU context, for comparisons and bisecting: > 0 on, < 0 off, 0 (the
    // default, also of a zero-filled struct) = the environment variable named ("0" off, any other
    // value on), else the default given here. The CPU ignores them.
    int attn_tc;        // FAT5_ATTN_TC, default on: bf16 attention forward and backward on tensor
                        // cores (off: the exact FMA kernels)
    int mm_rows;        // FAT5_MM_ROWS, default on: products of a few rows (decoding) on fat5_mm
                        // (off: cuBLAS)
    int cublaslt;       // FAT5_CUBLASLT, default on: products on cuBLASLt with one algorithm per size
                        // class (off: cublasGemmEx, its own algorithm per size)
    int pdl;            // FAT5_PDL, default on: decode-step kernels launch as programmatic dependents
                        // (sm_90+)
    int sync_launches;  // FAT5_SYNC_LAUNCHES, default off: on, the host synchronises after every
                        // launch, so that an error names its kernel (slow; no CUDA graphs)
    int attn_wg;        // FAT5_ATTN_WG, default on: on H100/H200 (sm_90) the kernels compile for
                        // sm_90a and the bf16 self-attention forward of head dims 64 and 128 runs
                        // on Hopper's wgmma + TMA kernels (off: the mma.sync ones, a plain sm_90
                        // program)
} fat5_ctx_config;

FAT5_API fat5_ctx_config fat5_ctx_config_default(void);
// Creates a context (cfg NULL: the defaults); on the GPU it also opens the device. It either
// succeeds or leaves nothing to destroy: on failure *out is NULL and, when err is not NULL, err
// holds why (at most err_cap bytes, NUL-terminated; "no CUDA driver: ..." and the like).
FAT5_API fat5_status fat5_ctx_create(const fat5_ctx_config *cfg, fat5_ctx **out, char *err, size_t err_cap);
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

// What sits on the stacks: Hugging Face's architecture class (config.json's "architectures"; MT5
// and UMT5 have each one under their prefix, with the same tensors). Every head but LM and
// ENC_SEQ_CLS is a transformers class with its tensor names, so checkpoints go both ways.
typedef enum fat5_head {
    FAT5_HEAD_LM = 0,          // T5ForConditionalGeneration: lm_head over the vocabulary (generation)
    FAT5_HEAD_ENCODER = 1,     // T5EncoderModel: the encoder alone (shared.weight, encoder.*), no head
    FAT5_HEAD_SEQ_CLS = 2,     // T5ForSequenceClassification: encoder-decoder on (input, shift_right(input)),
                               // the decoder's state at each input's last EOS, classification_head
                               // (dropout, dense, tanh, dropout, out_proj); tensors under "transformer."
    FAT5_HEAD_TOKEN_CLS = 3,   // T5ForTokenClassification: encoder, dropout, classifier, per token
                               // (tensors under "transformer.")
    FAT5_HEAD_QA = 4,          // T5ForQuestionAnswering: encoder-decoder on (input, shift_right(input)),
                               // qa_outputs: a start and an end logit per input token
    FAT5_HEAD_ENC_SEQ_CLS = 5  // fat5's encoder-only sequence classifier (not a transformers class;
                               // architecture "Fat5EncoderForSequenceClassification"): the encoder's
                               // output pooled per input (pooling: EOS, mean or first token), then
                               // classification_head as SEQ_CLS's; tensors as T5EncoderModel's + head
} fat5_head;

// A sequence classifier's loss (config.json's problem_type): AUTO is Hugging Face's None (regression
// for num_labels 1, else single-label).
typedef enum fat5_problem {
    FAT5_PROBLEM_AUTO = 0,
    FAT5_PROBLEM_REGRESSION = 1,    // "regression": MSE of the logits against float targets
    FAT5_PROBLEM_SINGLE_LABEL = 2,  // "single_label_classification": cross-entropy against a class
    FAT5_PROBLEM_MULTI_LABEL = 3    // "multi_label_classification": BCE with logits against 0/1 targets
} fat5_problem;

// Pooling of the encoder's hidden states per sequence (fat5_model_encode; FAT5_HEAD_ENC_SEQ_CLS)
typedef enum fat5_pool {
    FAT5_POOL_NONE = 0,   // no pooling: every token
    FAT5_POOL_MEAN = 1,   // the mean over the sequence's tokens
    FAT5_POOL_EOS = 2,    // the sequence's last EOS token
    FAT5_POOL_FIRST = 3   // the sequence's first token
} fat5_pool;

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
    double dropout_rate;           // dropout of training (Hugging Face T5's sites; 0.1): applied only in
                                   // training forwards with dropout turned on (fat5_model_set_dropout;
                                   // the trainer does), never in evaluation, encode or generation
    double attention_dropout_rate; // on the attention probabilities; < 0 (default -1): dropout_rate, as
                                   // in T5 (FAT5's attention_dropout_rate; written to config.json when >= 0)
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
    // the head (config.json's architectures[0], num_labels, problem_type, classifier_dropout; fat5's
    // classifier_pooling); the label names (id2label) live in the model (fat5_model_set_label_names)
    fat5_head head;                // FAT5_HEAD_LM
    int64_t num_labels;            // classes of a classifier (QA: 2, start and end), 2
    fat5_problem problem_type;     // sequence classifiers: the loss, FAT5_PROBLEM_AUTO
    double classifier_dropout;     // the heads' dropout (classification_head, token classifier), 0.0
    fat5_pool pooling;             // FAT5_HEAD_ENC_SEQ_CLS: FAT5_POOL_EOS, MEAN or FIRST; EOS
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
// Writes a complete checkpoint directory, each file atomically: config.json (with torch_dtype),
// model.safetensors (the model's names: Hugging Face's, or FAT5's for flash_t5), and
// generation_config.json (the loaded checkpoint's as it was, else the model's decoder start, eos
// and pad ids as transformers derives them); a model loaded from a directory also carries that
// directory's tokenizer files along (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json, spiece.model, added_tokens.json). fat5_model_save writes fp32 weights;
// fat5_model_save_as FAT5_DTYPE_BF16 writes BF16 (rounded to nearest even, torch_dtype
// "bfloat16"), half the size, as Hugging Face checkpoints of T5 usually are.
FAT5_API fat5_status fat5_model_save(fat5_model *m, const char *dir);
FAT5_API fat5_status fat5_model_save_as(fat5_model *m, const char *dir, fat5_dtype dtype);
// The same with every choice (fat5_model_save is F32 in one file, fat5_model_save_as its dtype):
// the weights' dtype, FAT5_WEIGHTS_SOURCE by default: the checkpoint's the model was loaded from
// (F32, F16 or BF16; F32 for a model made from a config). An F32 save records the model's source
// dtype in its metadata and a load takes it from there, so an export of a training checkpoint
// (always F32, to resume exactly) writes the starting checkpoint's dtype. F16 is
// rounded to nearest even and refused, naming the tensor, for a weight beyond 65504. max_shard_bytes
// > 0 writes the weights as transformers' save_pretrained(max_shard_size=...) does: shards
// model-00001-of-0000N.safetensors of tensors in parameter order, each at most that many bytes
// (a larger tensor alone in its own), and model.safetensors.index.json; 0: one model.safetensors.
// The files of the other layout (and shards of an earlier save this one does not name) are
// removed after the new ones are written. Tied embeddings are written once, as shared.weight
// (transformers ties encoder/decoder.embed_tokens and, when tied, lm_head to it).
typedef enum fat5_weights_dtype {
    FAT5_WEIGHTS_SOURCE = 0, FAT5_WEIGHTS_F32 = 1, FAT5_WEIGHTS_BF16 = 2, FAT5_WEIGHTS_F16 = 3
} fat5_weights_dtype;
typedef struct fat5_save_config {
    fat5_weights_dtype dtype;     // FAT5_WEIGHTS_SOURCE
    int64_t max_shard_bytes;      // 0: one file
} fat5_save_config;
FAT5_API fat5_save_config fat5_save_config_default(void);
FAT5_API fat5_status fat5_model_save_hf(fat5_model *m, const char *dir, const fat5_save_config *cfg);
// The tokenizer every later save of m writes beside the weights: the tokenizer files of directory
// dir (those of the five names above that exist; at least one), read now; or, with dir NULL,
// ByT5's byte-level tokenizer (a tokenizer_config.json naming ByT5Tokenizer with vocab_size - 259
// extra ids: ids 0 pad, 1 eos, 2 unk, byte b -> b + 3, the ids of tools/pretokenize and of pairs
// data without a tokenizer), which needs a vocabulary of at least 259; "": none. A model loaded
// from a directory starts with that directory's files; a new one with none.
FAT5_API fat5_status fat5_model_set_tokenizer(fat5_model *m, const char *dir);
FAT5_API void fat5_model_destroy(fat5_model *m);
// The weight files of a checkpoint directory, as fat5_model_load reads them: "model.safetensors",
// or every distinct shard model.safetensors.index.json names, in name order (each checked to be a
// .safetensors name in dir). *out holds *n_files names, each NUL-terminated, back to back (*len
// bytes in all; release with fat5_free).
FAT5_API fat5_status fat5_model_weight_files(fat5_ctx *ctx, const char *dir, char **out, size_t *len, int *n_files);
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
FAT5_API int64_t fat5_model_param_count(const fat5_model *m);      // elements in all tensors
FAT5_API int fat5_model_tensor_count(const fat5_model *m);
FAT5_API fat5_status fat5_model_tensor_info(const fat5_model *m, int index, fat5_tensor_info *out);
FAT5_API int fat5_model_find_tensor(const fat5_model *m, const char *name);  // -1 if absent
// Copy a parameter, or its accumulated gradient, to / from a caller buffer of exactly numel floats.
FAT5_API fat5_status fat5_model_get_param(fat5_model *m, const char *name, float *dst, int64_t n);
FAT5_API fat5_status fat5_model_set_param(fat5_model *m, const char *name, const float *src, int64_t n);
FAT5_API fat5_status fat5_model_get_grad(fat5_model *m, const char *name, float *dst, int64_t n);

// Frozen parameters (fine-tuning part of a model). patterns: comma-separated parameter names, each
// matched against the whole name as tensor_info lists it (the Hugging Face T5 name is accepted too),
// where '*' stands for any run of characters, dots included: "shared.weight", "encoder.*",
// "*.layer_norm.weight", "decoder.block.0.*"; spaces around a pattern are dropped. The set becomes
// exactly the tensors some pattern matches (NULL or "": none). A pattern that matches no tensor is
// FAT5_ERR_INVALID_ARG naming it, and the set is left as it was; so is a set that splits tensors
// one op differentiates together (FIRE's pe_encoding block, LongT5's two bias tables).
// A frozen tensor gets no gradient (the backward skips its weight-gradient product and keeps no
// memory for it; fat5_model_get_grad reads zeros), no update and no optimizer state; the backward
// stops below the lowest layer with a trainable tensor, and skips the encoder when neither it nor
// the shared embedding trains. Changing the set drops the accumulated gradients; an optimizer made
// before then refuses to step (FAT5_ERR_STATE): make it after fat5_model_freeze.
FAT5_API fat5_status fat5_model_freeze(fat5_model *m, const char *patterns);
// 1 when tensor `index` (as fat5_model_tensor_info's) is frozen, 0 when it trains, -1 out of range.
FAT5_API int fat5_model_tensor_frozen(const fat5_model *m, int index);
// Elements of the trainable tensors (fat5_model_param_count when none is frozen).
FAT5_API int64_t fat5_model_trainable_count(const fat5_model *m);

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
    // The targets of a model with a head other than LM (fat5_model_config.head), whose batches have
    // no decoder fields (n_dec_tokens 0, dec_* and labels NULL: SEQ_CLS and QA decode
    // shift_right(input) themselves). NULL: a forward without loss.
    //   SEQ_CLS, ENC_SEQ_CLS single-label: head_labels [n_seq], a class or -100 (not counted);
    //     regression and multi-label: head_targets [n_seq * num_labels] (floats; 0 or 1 multi-label)
    //   TOKEN_CLS: head_labels [n_enc_tokens], a class or -100 per input token
    //   QA: head_labels [2 n_seq], the start and end token of each answer (Hugging Face's clamp:
    //     below 0 is 0, at or past the sequence's length not counted)
    //   ENCODER: head_targets [n_enc_tokens * d_model], the gradient of the caller's loss with
    //     respect to the hidden states; the forward's loss is sum(hidden * head_targets), so that
    //     fat5_model_backward trains the encoder on any loss computed outside
    const int32_t *head_labels;
    const float *head_targets;
} fat5_batch;

// Builds a packed batch from JSON rows: {"inputs": [[ids]...], "labels": [[ids]...]} and optionally
// "decoder_inputs": [[ids]...]; rows may have any lengths (labels may hold -100). The arrays are
// allocated with the ctx allocator; release them with fat5_batch_destroy.
FAT5_API fat5_status fat5_batch_from_json(fat5_ctx *ctx, const char *json, size_t len, fat5_batch *out);
FAT5_API void fat5_batch_destroy(fat5_ctx *ctx, fat5_batch *b);

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
// The head's outputs of the last forward (a model whose head is not LM), fp32 row-major:
// SEQ_CLS, ENC_SEQ_CLS [n_seq, num_labels]; TOKEN_CLS [n_enc_tokens, num_labels]; QA
// [n_enc_tokens, 2] (start logit, end logit of each token); ENCODER [n_enc_tokens, d_model] (the
// hidden states). *rows and *cols (either may be NULL) get the shape; n must equal rows * cols.
FAT5_API fat5_status fat5_model_get_head_output(fat5_model *m, float *dst, int64_t n, int64_t *rows,
                                                int64_t *cols);

// The heads' options: a model config's head fields, for fat5_model_load_head.
typedef struct fat5_head_config {
    fat5_head head;
    int64_t num_labels;            // classes (SEQ_CLS, TOKEN_CLS, ENC_SEQ_CLS); QA's is 2
    fat5_problem problem_type;
    double classifier_dropout;
    fat5_pool pooling;             // ENC_SEQ_CLS
    const char *const *label_names;// [num_labels] names (id2label), or NULL: the checkpoint's when it
                                   // has as many, else Hugging Face's "LABEL_i"
} fat5_head_config;
FAT5_API fat5_head_config fat5_head_config_default(fat5_head head, int64_t num_labels);
// Loads the stacks of any checkpoint of the family (an LM, an encoder-only model or a model with
// another head) and gives them the head of hc: the checkpoint's own head weights when it has that
// head with as many labels, else a new head initialised as Hugging Face does, seeded (what
// from_pretrained does for a class whose head the checkpoint lacks). The decoder is dropped for the
// encoder-only heads; an encoder-only checkpoint cannot become a head with a decoder
// (FAT5_ERR_UNSUPPORTED). The tokenizer files come along as with fat5_model_load.
FAT5_API fat5_status fat5_model_load_head(fat5_ctx *ctx, const char *path, const fat5_head_config *hc,
                                          uint64_t seed, fat5_model **out);
// id2label: the name of class i (NULL when i is out of range; "LABEL_i" unless set or loaded), and
// setting all num_labels names at once (saved in config.json's id2label and label2id).
FAT5_API const char *fat5_model_label_name(const fat5_model *m, int64_t i);
FAT5_API fat5_status fat5_model_set_label_names(fat5_model *m, const char *const *names, int64_t n);
// The head's name as config.json's architectures writes it (e.g. "MT5ForTokenClassification")
FAT5_API const char *fat5_model_architecture(const fat5_model *m);

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
FAT5_API fat5_status fat5_st_load(fat5_ctx *ctx, const char *path, fat5_st_file **out);
FAT5_API void fat5_st_destroy(fat5_st_file *f);
FAT5_API int fat5_st_tensor_count(const fat5_st_file *f);
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
// Reads a whole regular file into *out (NUL-terminated, *len bytes before the NUL; release with
// fat5_free): FAT5_ERR_IO when it cannot be read or is no regular file, FAT5_ERR_FORMAT when it
// holds more than max_size bytes.
FAT5_API fat5_status fat5_read_file(fat5_ctx *ctx, const char *path, size_t max_size, char **out, size_t *len);
// The length of the longest prefix of s[0 .. n) that is valid UTF-8 (n when all of it is): the
// offset of the first bad byte otherwise. Overlong forms, surrogates and code points above
// U+10FFFF are invalid, as in every file fat5 reads.
FAT5_API size_t fat5_utf8_valid_len(const char *s, size_t n);

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
// per tokens object, never the whole file; the files stay open until fat5_tokens_destroy. An empty
// document (two eos in a row) is allowed and counts in fat5_tokens_doc_count.
FAT5_API fat5_status fat5_tokens_load(fat5_ctx *ctx, const char *const *paths, int n_paths, fat5_tokens **out);
FAT5_API void fat5_tokens_destroy(fat5_tokens *t);
FAT5_API int64_t fat5_tokens_count(const fat5_tokens *t);        // ids in all files
FAT5_API int64_t fat5_tokens_doc_count(const fat5_tokens *t);
FAT5_API int64_t fat5_tokens_vocab_size(const fat5_tokens *t);
FAT5_API int32_t fat5_tokens_eos_id(const fat5_tokens *t);
// Writes a token file atomically (temp file + flush + rename) from ids (each below vocab_size,
// at least one, the last eos_id); id_width 2 needs vocab_size <= 65536.
FAT5_API fat5_status fat5_tokens_write(fat5_ctx *ctx, const char *path, const int32_t *ids, int64_t n,
                                       int64_t vocab_size, int32_t eos_id, int id_width);
// The same, streamed: create opens a temporary file beside path; append adds ids (a document is
// its ids then eos_id; a refused append, an id outside the vocabulary, changes nothing); commit
// checks the file ends with eos_id, flushes it to disk and renames it over path. Destroy without a
// commit (or after a failed write) removes the temporary file: a token file appears whole or not
// at all. count / doc_count: ids and eos ids appended so far.
typedef struct fat5_tokens_writer fat5_tokens_writer;
FAT5_API fat5_status fat5_tokens_writer_create(fat5_ctx *ctx, const char *path, int64_t vocab_size, int32_t eos_id,
                                               int id_width, fat5_tokens_writer **out);
FAT5_API fat5_status fat5_tokens_writer_append(fat5_tokens_writer *w, const int32_t *ids, int64_t n);
FAT5_API fat5_status fat5_tokens_writer_commit(fat5_tokens_writer *w);
FAT5_API void fat5_tokens_writer_destroy(fat5_tokens_writer *w);
FAT5_API int64_t fat5_tokens_writer_count(const fat5_tokens_writer *w);
FAT5_API int64_t fat5_tokens_writer_doc_count(const fat5_tokens_writer *w);

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
// ids for every denoiser, a split with documents) with a message naming the field. A split whose
// documents are all empty (eos eos) is found by the first fat5_ul2_next_batch (FAT5_ERR_STATE),
// which would otherwise read the whole corpus here.
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
    FAT5_OPTIM_ADAMW_SCALE = 1,  // AdamW with the step scaled by max(1e-3, RMS(p)) per tensor (FAT5)
    FAT5_OPTIM_ADAFACTOR = 2     // Adafactor as transformers.optimization.Adafactor (the adafactor_* fields)
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
    // Adafactor (kind FAT5_OPTIM_ADAFACTOR; beta1, beta2 and eps above are AdamW's and unused by it):
    // transformers' Adafactor arguments. Defaults: those Hugging Face's Trainer passes for
    // optim "adafactor" (relative_step 0, scale_parameter 0, warmup_init 0, clip_threshold 1,
    // decay_rate -0.8, beta1 None): lr and the schedule above give the rate. relative_step 1
    // ignores lr and the schedule (the rate is min(1e-2, 1/sqrt(t)), or min(1e-6 t, 1/sqrt(t))
    // with warmup_init).
    int adafactor_relative_step, adafactor_scale_parameter, adafactor_warmup_init;
    double adafactor_clip_threshold;  // the update's RMS clipped to this (> 0)
    double adafactor_decay_rate;      // beta2 of update t is 1 - t^decay_rate (< 0)
    double adafactor_beta1;           // first moment's decay, in [0, 1); 0 = none (HF's None)
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
// An optimizer for every trainable parameter of m (norm weights and relative-bias tables get no
// weight decay; frozen ones, fat5_model_freeze, get nothing: no state, no update, not in the norm).
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
// Strings are borrowed (NULL or "": none): fat5_train_create copies them. fat5_train_config_set and
// fat5_train_config_from_json point them at copies the context keeps until it is destroyed, so a
// value set by name need not outlive the call.
typedef struct fat5_train_config {
    // data: token files (fat5_tokens_load), comma-separated; a share of documents held out
    const char *data;
    double eval_fraction;         // 0.01; 0 = no evaluation
    fat5_ul2_config ul2;          // denoisers and budgets; seed, split and sentinels set by the trainer
    // model: a new one from `model`, or --init DIR (a Hugging Face checkpoint) instead
    fat5_model_config model;
    const char *init;
    const char *attention;        // the encoder's attention pattern for this run ("local:127", ...,
                                  // fat5_attention_parse); none = the model's own
    const char *freeze;           // parameters not trained: fat5_model_freeze's patterns ("encoder.*,
                                  // shared.weight"); none = all train. A checkpoint records the frozen
                                  // tensors, and a resume must freeze the same ones
    const char *save_tokenizer;   // the tokenizer files checkpoints carry (fat5_model_set_tokenizer): a
                                  // directory holding them, "byte" (ByT5's), "none"; none given: the
                                  // init checkpoint's, else "byte" for a new model on data of a byte
                                  // vocabulary (259 < the data's vocabulary <= 1024), else none
    uint64_t seed;                // model initialisation and data order (42)
    // optimisation
    fat5_optim_config optim;      // total_steps is the run length
    fat5_loss_config loss;
    int grad_accum;               // micro-batches per step (1)
    int prefetch;                 // 1: the next step's batches are drawn on a host thread while the GPU
                                  // runs this one (default); 0: on the calling thread, when needed
    // output
    const char *output_dir;       // checkpoints and metrics.jsonl ("train-out")
    const char *resume;           // a checkpoint directory, or an output directory (its latest)
    int64_t eval_steps;           // evaluate every N steps and at the end (0 = only at the end)
    int64_t eval_batches;         // batches per evaluation (8)
    int64_t save_steps;           // checkpoint every N steps (0 = only at the end)
    int save_total_limit;         // keep the last K checkpoints (0 = all)
    double peak_tflops;           // for MFU (0 = from the device: 989 for H100/H200 bf16, else none)
    // several ranks (data parallel): one process per GPU, see fat5_launch
    int world_size;               // ranks in the run (1)
    int rank;                     // this process's: 0 .. world_size - 1 (rank 0 writes checkpoints and logs)
    const char *rendezvous;       // where the ranks meet: fat5_launch_info.rendezvous, or a file path that
                                  // every rank names (rank 0 creates it; a shared filesystem across hosts), or
                                  // "NCCL_COMM_ID": that environment variable's host:port on every rank (GPU).
                                  // With world_size 1 it runs the sums too (one rank: a check of the path)
    double dist_timeout_s;        // a rank that waits this long for the others stops the run (900)
    double bucket_mb;             // gradients summed across ranks in buckets of this size, overlapping the
                                  // backward (100: the fastest of 25, 100, 200 and 1000 on two H200s)
    int balance_ranks;            // 1: the step's examples are exchanged between the ranks' micro-batches
                                  // (within their token budgets) so that every rank has about the same
                                  // FLOPs; the step's batch is the same (default). 0: as drawn
    // dropout of the training steps (never of evaluation), at the model config's rates: the presets'
    // 0, an --init checkpoint's own; >= 0 replaces the config's (saved with the checkpoints); < 0
    // (default -1) keeps it
    double dropout_rate;          // Hugging Face's name
    double attention_dropout_rate;// on the attention probabilities (FAT5's name; the config's default:
                                  // dropout_rate). The GPU does not drop them yet: 0 there
    // fine-tuning on (input, target) pairs (docs/finetuning.md; fat5_finetune_option_names lists the
    // options by name): a train_file makes the run a fine-tuning one, the same loop on batches of
    // pairs instead of UL2 over `data`. max_length / max_labels_length truncate the input / target
    // (Hugging Face's max_source_length / max_target_length), batch_tokens / batch_labels_tokens
    // bound a micro-batch's input / target tokens, eval_fraction of the training rows is held out
    // when there is no validation_file.
    const char *train_file;       // JSONL, TSV, CSV (fat5_pairs_open), "inputs.txt,targets.txt", or a
                                  // pretokenized pairs file (tools/pretokenize --pairs; streamed)
    const char *validation_file;  // the same formats; NULL: eval_fraction of the training rows
    const char *text_column;      // the input's field / column ("input")
    const char *summary_column;   // the target's ("target")
    const char *source_prefix;    // put before every input ("summarize: "); NULL: none
    const char *tokenizer_name;   // a tokenizer file or directory; NULL: the model checkpoint's own, else
                                  // byte-level ids (ByT5's) for a model of 259 ids or more
    int64_t per_device_train_batch_size;   // rows of a micro-batch at most (0: the token budgets alone)
    int64_t per_device_eval_batch_size;    // rows of one generate call at an evaluation (32)
    double num_train_epochs;      // > 0: max_steps = the steps of this many passes over the training rows
    int group_by_length;          // 1: batches of rows of similar lengths (windows of ~50 batches); 0 (default)
    int predict_with_generate;    // 1: evaluations also generate on the validation rows and score them
    int64_t generation_max_length;  // generated sequence length, Hugging Face's max_length (the start
                                    // token counts: max_length - 1 new tokens); 0: max_labels_length
    int64_t generation_num_beams;   // 1: greedy
    int64_t max_eval_samples;     // validation rows an evaluation uses (loss and generation); 0: all
    const char *metric_for_best_model;   // loss (default), exact_match, f1, rouge1, rouge2, rougeL,
                                         // rougeLsum, bleu, gen_len (an "eval_" prefix is allowed)
    int greater_is_better;        // 1 / 0; -1 (default): 0 for loss, else 1
    // task heads (docs/tasks.md): task classify, token-classify or qa trains a head (fat5_head) on
    // the stacks of `init` (fat5_model_load_head: the head made anew unless init has it) with JSON
    // Lines rows; evaluations score its predictions (accuracy, F1, exact match)
    const char *task;             // "seq2seq" (default: (input, target) pairs), "classify", "token-classify", "qa"
    const char *classifier;       // classify: "encoder" (fat5's encoder-only classifier, default) or "t5"
                                  // (T5ForSequenceClassification)
    const char *text_column_names;// classify: the text fields, comma-separated, joined with a space ("text");
                                  // token-classify: the words' field ("tokens")
    const char *label_column_name;// classify: "label"; token-classify: "ner_tags"
    const char *label_file;       // the class names, one a line (class i on line i); none: the training
                                  // rows' names, sorted (integer labels: as they are)
    const char *question_column_name, *context_column_name, *answer_column_name;  // qa: "question",
                                  // "context", "answers" (SQuAD's {"text": [...], "answer_start": [...]})
    const char *pooling;          // classify with the encoder classifier: "eos" (default), "mean", "first"
    const char *problem_type;     // classify: "single_label_classification", "multi_label_classification",
                                  // "regression"; none: from the labels (lists: multi-label, floats: regression)
    double classifier_dropout;    // the head's dropout (0)
} fat5_train_config;

// Defaults: FAT5's recipe (UL2 mixture, AdamWScale, cosine) on a FAT5-small-shaped byte model.
FAT5_API fat5_train_config fat5_train_config_default(void);
// Sets one option by name from its text form (FAT5's / Hugging Face TrainingArguments' names where
// they exist: learning_rate, max_steps, warmup_steps, lr_scheduler_type, weight_decay, adam_beta1,
// adam_beta2, adam_epsilon, max_grad_norm, gradient_accumulation_steps, output_dir, seed,
// eval_steps, save_steps, save_total_limit, max_length, max_labels_length, ...).
// fat5_train_option_names lists them all. An unknown name or bad value is FAT5_ERR_INVALID_ARG.
FAT5_API fat5_status fat5_train_config_set(fat5_ctx *ctx, fat5_train_config *cfg, const char *key,
                                           const char *value);
// Applies every key of a JSON object ({"learning_rate": 5e-3, "model": "tiny", ...}).
FAT5_API fat5_status fat5_train_config_from_json(fat5_ctx *ctx, const char *json, size_t len,
                                                 fat5_train_config *cfg);
FAT5_API const char *fat5_train_option_names(void);   // "name: meaning\n" lines
// The options of fine-tuning on pairs (train_file, validation_file, ...), the same way; also set by
// fat5_train_config_set.
FAT5_API const char *fat5_finetune_option_names(void);

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
    // several ranks: tokens and tokens_per_s above count every rank's
    int world_size;
    double tokens_per_s_gpu;      // tokens_per_s / world_size
    double comm_s;                // of step_s, the time the step waited for the sums across ranks
    double scaling;               // (step_s - comm_s) / step_s: the scaling efficiency against one GPU
                                  // running the same per-GPU batch, estimated from the exposed wait
                                  // alone (an upper bound: the sums also slow the backward they overlap)
    double rank_balance;          // the busiest rank's share of the step's FLOPs over the mean share
                                  // (1: even; the wait of the others is part of comm_s)
    int stop;                     // 1: some rank asked to stop (fat5_train_request_stop) before this step
    // fine-tuning (train_file): an evaluation with predict_with_generate scores the generated text
    // (rank 0), in percent as Hugging Face's evaluate reports them; gen_len: mean tokens generated
    int has_generate;
    double eval_exact_match, eval_f1, eval_rouge1, eval_rouge2, eval_rougeL, eval_rougeLsum, eval_bleu, eval_gen_len;
    int64_t eval_samples;         // validation rows of the evaluation
    // a task head's evaluation (task classify, token-classify, qa), in percent as Hugging Face's
    // run_classification / run_ner / run_qa report them: accuracy (classify: of the rows; multi-label:
    // rows with every label right; token-classify: of the words), macro_f1 (classify), precision,
    // recall and f1 (token-classify: entities, as seqeval; f1 also SQuAD's for qa), exact_match (qa),
    // mse (regression)
    int has_predict;
    double eval_accuracy, eval_macro_f1, eval_precision, eval_recall, eval_mse;
    int is_best;                  // the checkpoint saved after this step is the best so far (OUTPUT_DIR/best)
    double epoch_f;               // fine-tuning: passes over the training rows, fractional
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
// Asks every rank to stop: the next fat5_train_step's metrics say stop on all ranks at the same
// step (each rank's request is summed with the losses), so they can save and exit together.
FAT5_API void fat5_train_request_stop(fat5_trainer *t);

// ---------------------------------------------------------------------------------------------
// several GPUs: data parallel training, one process per rank
//
// Every rank draws the whole step's micro-batches (world_size x gradient_accumulation_steps) from
// one sampler stream and trains on its own share, so a step of N ranks sees the same batch as one
// GPU with N times the accumulation, and losses agree to rounding. The shares are evened first
// (balance_ranks): examples move between the ranks' micro-batches, within the token budgets, until
// every rank has about the same FLOPs, since a step waits for its busiest rank. Gradients are summed across
// ranks (NCCL on the GPU, shared memory for CPU processes) in buckets while the backward runs;
// every rank then takes the same optimizer step. Rank 0 writes checkpoints and metrics.jsonl; a
// checkpoint resumes on any number of ranks. A rank that fails (an error, a crash, a lost GPU, a
// peer that stopped answering for dist_timeout_s) stops every rank with an error naming it.
// NCCL (libnccl.so.2) is opened at run time like the CUDA libraries: FAT5_ERR_NO_DEVICE when absent.
//
// One host: fat5_launch forks `world_size` workers and returns in each with its rank and
// rendezvous (NCCL's id goes from rank 0 to the others through a pipe); in the calling process
// it returns once every worker has exited, with the first failure. Call it before creating any
// GPU context. If a worker fails, the others get grace_s seconds to stop on their own, then
// SIGKILL. While it waits, SIGINT and SIGTERM are passed on to every worker (its own handlers are
// restored on return); a worker that exits with status 130 stopped on request, not a failure. Several hosts: start one process per GPU yourself with rank, world_size and the same
// rendezvous file on a shared filesystem.
typedef struct fat5_launch_info {
    int rank;                 // in a worker: its rank; in the launching process: -1
    int world_size;
    char rendezvous[64];      // workers: for fat5_train_config.rendezvous
    int exit_code;            // launcher: 0 when every worker exited with 0, else the first failure's
                              // status (128 + signal for a killed one)
    int failed_rank;          // launcher: the first rank that failed, -1 none
    char message[512];        // launcher: what happened to it
} fat5_launch_info;
FAT5_API fat5_status fat5_launch(fat5_ctx *ctx, int world_size, double grace_s, fat5_launch_info *out);

// ---------------------------------------------------------------------------------------------
// inference and generation
//
// Inference mode: a model that will not be trained drops its gradients and lays its workspace out
// for one layer at a time (memory = weights + a few layers' buffers). fat5_model_backward and the
// optimizers then refuse with FAT5_ERR_STATE. Models start in training mode; switching back
// allocates zeroed gradients.
FAT5_API fat5_status fat5_model_set_training(fat5_model *m, int training);
FAT5_API int fat5_model_is_training(const fat5_model *m);
// Dropout, at Hugging Face T5's sites: the token embeddings, each sub-layer's output before the
// residual add, the FFN's hidden activation, the attention probabilities and each stack's final
// norm. A model starts with it off (forwards are deterministic whatever the config's rate);
// fat5_model_set_dropout(m, 1, seed, draw) turns it on for the training-mode forwards that follow
// (not evaluation, fat5_model_encode or generation), at the config's dropout_rate (and
// attention_dropout_rate), until it is turned off (on 0). Each forward's masks are a pure function
// of (seed, draw, stack, layer, site, element): the same seed and draw give the same masks, on the
// CPU and the GPU alike, and the backward regenerates its forward's; give every forward its own
// draw (the trainer: step, rank and micro-batch), below 2^38. A rate is applied rounded to a
// multiple of 2^-16 (an element is kept with probability 1 - round(65536 p) / 65536 and scaled by
// the inverse). Every site runs on the CPU and the GPU, the attention probabilities inside the
// attention kernels.
FAT5_API fat5_status fat5_model_set_dropout(fat5_model *m, int on, uint64_t seed, uint64_t draw);
// Sets the config's dropout_rate and attention_dropout_rate (< 0: dropout_rate), each below 1
// (saved with the model).
FAT5_API fat5_status fat5_model_set_dropout_rate(fat5_model *m, double rate, double attention_rate);

// The encoder alone on a packed batch (embeddings, retrieval): the final-norm hidden states,
// fp32. pool FAT5_POOL_NONE writes [n_tokens, d_model] (n = n_tokens * d_model floats),
// FAT5_POOL_MEAN the mean over each sequence's tokens, [n_seq, d_model]. Runs in inference
// layout whatever the model's mode, and keeps nothing of a training forward.
FAT5_API fat5_status fat5_model_encode(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens,
                                       int64_t n_seq, fat5_pool pool, float *out, int64_t n);

// Decoding options, with Hugging Face's names and meanings (GenerationConfig).
// Token lists of the generation options: n ids, and n packed sequences (sequence i is
// ids[cu[i] .. cu[i + 1]), cu[0] = 0). The arrays are the caller's; those read from JSON
// (fat5_generate_config_from_json) belong to the context and live until fat5_ctx_destroy.
typedef struct fat5_token_list {
    const int32_t *ids;   // [n]
    int64_t n;
} fat5_token_list;
typedef struct fat5_token_seqs {
    const int32_t *ids;   // [cu[n]]
    const int32_t *cu;    // [n + 1]
    int64_t n;
} fat5_token_seqs;

// The text of every token id as it reads inside a text (a leading "\u2581" as a space, byte
// tokens as their bytes): id i is bytes[offsets[i] .. offsets[i + 1]). fat5_tokenizer_token_texts
// makes it from a tokenizer, as Hugging Face's stop-string matching reads a vocabulary.
typedef struct fat5_token_texts {
    const char *bytes;
    const int64_t *offsets;   // [n + 1]
    int64_t n;
} fat5_token_texts;

// A streaming callback: after each decoding step, the n sequences still running and the token each
// just got (seqs[i]: the output sequence, input x num_return_sequences + k, of tokens[i]). A
// non-zero return ends the generation there (every sequence keeps what it has).
typedef int (*fat5_generate_stream_fn)(void *user, const int64_t *seqs, const int32_t *tokens, int64_t n);

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
    int64_t eos_token_id;          // from the model config (fat5_generate_config_from_model); T5's 1
    int64_t pad_token_id;          //   "   (fills finished rows in Hugging Face; not emitted here)
    int64_t decoder_start_token_id;//   "
    int use_graph;                 // GPU: 1 (default) replays every step from a CUDA graph
    // ---- the rest of Hugging Face's options, by their generation_config.json names and meaning.
    // Lengths count the decoder input as Hugging Face does: the decoder prompt (the start token, or
    // decoder_input_ids) and the tokens generated after it.
    int64_t max_length;            // 0: unset; else the decoder input's limit, replacing max_new_tokens
                                   //   (= max_length - prompt length) as when only max_length is given;
                                   //   a checkpoint's generation_config.json may set it: set it to 0
                                   //   when setting max_new_tokens over such a config
    int64_t min_length;            // 0: EOS is not emitted while the decoder input is shorter than this
    fat5_token_list eos_token_ids; // n > 0: every id stops a sequence (Hugging Face's eos_token_id list;
                                   //   eos_token_id is then ignored); n = 0: eos_token_id alone
    int64_t forced_bos_token_id;   // -1: off; else the only token allowed first (prompt of one token)
    fat5_token_list forced_eos_token_id; // the tokens allowed last (when max_length is reached); n = 0: off
    fat5_token_list suppress_tokens;       // never generated
    fat5_token_list begin_suppress_tokens; // not generated first (second after a forced BOS)
    fat5_token_seqs bad_words_ids; // a sequence's last token is never generated after the rest of it
                                   //   (sequences that are one EOS id are left out, as Hugging Face does)
    fat5_token_seqs sequence_bias; // sequence_bias_values[i] is added to the logit of sequence i's
    const float *sequence_bias_values; //   last token after the rest of it (one token: always)
    double encoder_repetition_penalty;   // 1.0 = off; > 1 favours the input's tokens (HF's rule, 1 / p)
    int64_t encoder_no_repeat_ngram_size;// 0 = off; n: no n-gram of the input appears in the output
    int64_t exponential_decay_start;     // -1 = off; after this many generated tokens, EOS's logit grows by
    double exponential_decay_factor;     //   |logit| * (factor^k - 1) at the k-th (exponential_decay_length_penalty)
    int renormalize_logits;        // 0; 1: log_softmax after every processor (scores are log-probabilities)
    int remove_invalid_values;     // 0; 1: NaN -> 0, +-inf -> +-FLT_MAX before the suppressions
    double min_p;                  // 0 = off (sampling): drop tokens below min_p x the top probability
    double typical_p;              // 1.0 = off (sampling): locally typical sampling's mass
    double epsilon_cutoff;         // 0 = off (sampling): drop tokens of probability below it
    double eta_cutoff;             // 0 = off (sampling): eta sampling's epsilon
    fat5_token_seqs decoder_input_ids; // n = 0: every prompt is the decoder start token; else one
                                   //   (all inputs) or one per input, all of one length: the decoder's
                                   //   prompt as given (it should begin with the decoder start token)
    double max_time;               // 0 = off; seconds after which no further step starts
    int64_t num_beam_groups;       // 1; g > 1: diverse (group) beam search, num_beams / g beams a group
    double diversity_penalty;      // 0 (group beam search): subtracted from a token's score per earlier
                                   //   group of the input that chose it at this step (Hamming diversity)
    fat5_token_seqs force_words_ids; // n = 0: off; else constrained beam search (transformers 4's, num_beams
    const int32_t *force_words_constraint; // > 1, no sampling or groups): [n] the constraint of each
                                   //   sequence, 0, 1, ... in order. Every output contains every constraint:
                                   //   a constraint of one sequence is that phrase, one of several sequences
                                   //   any one of them (none a prefix of another). Hypotheses that never met
                                   //   them fill the output when too few did, as in transformers
    // ---- outputs, streaming and stop strings (each costs a host read per step; greedy and
    // sampling only for stream and stop_strings) ----
    int output_scores;             // 0; 1: fat5_generate_result.step_scores, every step's processed scores
    int output_logits;             // 0; 1: fat5_generate_result.step_logits, every step's raw logits
    fat5_generate_stream_fn stream;// NULL; else called after every step with the tokens just chosen
    void *stream_user;             //   (its first argument)
    const char *const *stop_strings; // [n_stop_strings]: a sequence ends when its text ends in one of
    int64_t n_stop_strings;        //   them, the last token overlapping it (Hugging Face's rule)
    const fat5_token_texts *token_texts; // each id's text (fat5_tokenizer_token_texts): stop_strings need it
} fat5_generate_config;

// Hugging Face's defaults, with T5's ids (eos 1, pad 0, decoder start 0).
FAT5_API fat5_generate_config fat5_generate_config_default(void);
// ... with the model's ids, overlaid with the generation_config.json that was beside the checkpoint
// fat5_model_load read (when there was one); the defaults for m NULL.
FAT5_API fat5_generate_config fat5_generate_config_from_model(const fat5_model *m);
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
    int64_t n_rows;         // output_scores / output_logits: the decoder rows of each step, n_inputs x
                            // num_beams (beam search) or x num_return_sequences
    int64_t vocab_size;
    float *step_scores;     // output_scores: [steps, n_rows, vocab_size], Hugging Face's `scores`: the
                            // processed scores each row's token was chosen from (beam search: each
                            // running beam's, before the selection); NaN for a row already finished
    float *step_logits;     // output_logits: [steps, n_rows, vocab_size], the raw logits (`logits`)
    int32_t *beam_indices;  // output_scores with beam search (one group): for each token of `tokens`, the
                            // decoder row (input x num_beams + beam) of the beam it extended, packed as
                            // `tokens` (Hugging Face's beam_indices); NULL otherwise
    size_t cache_bytes;     // the key/value caches it allocated: self-attention for every row and
                            // decoder layer (max_new_tokens positions), and each layer's keys and
                            // values of the encoder output for cross-attention (not counted: one
                            // layer's spare cache that beam search reorders through)
} fat5_generate_result;

// Encodes each input once, then decodes: greedy, sampling or beam search as g says. Inputs are a
// packed batch of any lengths (cu_seqlens [n_inputs + 1]). Free the result with
// fat5_generate_result_destroy. Output tokens equal Hugging Face's generate in fp32 (same options,
// eager attention). Bad options are FAT5_ERR_INVALID_ARG naming the field (empty inputs, ids out
// of the vocabulary, max_new_tokens < 1, num_beams outside 1 .. 32, top_p outside (0, 1],
// temperature <= 0, num_return_sequences > num_beams, ...); beam sampling is FAT5_ERR_UNSUPPORTED.
FAT5_API fat5_status fat5_generate(fat5_model *m, const int32_t *tokens, const int32_t *cu_seqlens,
                                   int64_t n_inputs, const fat5_generate_config *g, fat5_generate_result *out);
FAT5_API void fat5_generate_result_destroy(fat5_ctx *ctx, fat5_generate_result *r);

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
// Continuous batching: requests join a running decoder at step boundaries. Each row owns a slot of
// max_enc_tokens / max_rows encoder positions and its max_len cache positions (a fixed pool: no
// allocation, no fragmentation), and has its own position. fat5_decoder_join runs the encoder on
// n_inputs packed inputs (no padding) and gives input i the free rows rows[i rpi .. i rpi + rpi),
// rpi = rows_per_input (beam search: its beams), all at position 0, reading the encoder slot of
// its first row (so an input holds at most max_enc_tokens / max_rows tokens). A row left out of a
// step is free again. After fat5_decoder_start, join waits until every row of that request has
// finished (FAT5_ERR_STATE); fat5_decoder_start empties a joined decoder.
FAT5_API fat5_status fat5_decoder_join(fat5_decoder *d, const int32_t *tokens, const int32_t *cu_seqlens,
                                       int64_t n_inputs, int64_t rows_per_input, const int32_t *rows);
// Tokens consumed by row `row` (0 for a free row or one out of range).
FAT5_API int64_t fat5_decoder_row_position(const fat5_decoder *d, int64_t row);

// ---------------------------------------------------------------------------------------------
// Continuous batching: an engine decodes many requests at once on one model. A request submitted
// at any time joins the running batch at the next step (the encoders of the requests joining at a
// step run together, packed), takes one decoder row (greedy, sampling) or num_beams rows (beam
// search) of a fixed pool, and leaves when it finishes or is cancelled, freeing them. A request's
// tokens are those fat5_generate gives for it alone (greedy and beam search; sampling with the
// same seed), whatever else shares the batch. Like its context, an engine is used from one thread
// at a time (a server calls it from one thread and hands results to the others).
typedef struct fat5_engine fat5_engine;
typedef struct fat5_engine_config {
    int64_t max_rows;           // 64: decoder rows at once (requests x their beams)
    int64_t max_input_tokens;   // 1024: a request's input tokens at most (each row's encoder slot)
    int64_t max_new_tokens;     // 256: a request's max_new_tokens at most (each row's cache positions)
    int64_t max_waiting;        // 1024: requests queued for rows at most (submit is then FAT5_ERR_BUSY)
    int64_t join_interval;      // 1: waiting requests join at the next step; J > 1: while others run, at
                                //   most every J steps (more requests per encoder run, fewer runs;
                                //   time to first token up to J - 1 steps longer)
} fat5_engine_config;
FAT5_API fat5_engine_config fat5_engine_config_default(void);
FAT5_API fat5_status fat5_engine_create(fat5_model *m, const fat5_engine_config *c, fat5_engine **out);
FAT5_API void fat5_engine_destroy(fat5_engine *e);
// Queues a request: input ids [n] (the tokenizer's output, EOS included), options g as for
// fat5_generate (copied, lists included). *id (>= 1) names it in the events. Checked here, with
// messages naming the option: the input against max_input_tokens and the vocabulary, the options
// as fat5_generate checks them, max_new_tokens (or max_length) against the engine's. Options not
// run in a shared batch are FAT5_ERR_UNSUPPORTED naming the option: num_return_sequences > 1,
// group and constrained beam search, decoder_input_ids, output_scores / output_logits, stream,
// stop_strings, max_time (a server matches stop texts and deadlines itself, and cancels).
FAT5_API fat5_status fat5_engine_submit(fat5_engine *e, const int32_t *tokens, int64_t n,
                                        const fat5_generate_config *g, uint64_t *id);
// Ends a request at the next step (its last event says FAT5_FINISH_CANCELLED); an id that is not
// queued or running (finished, unknown) is FAT5_ERR_INVALID_ARG.
FAT5_API fat5_status fat5_engine_cancel(fat5_engine *e, uint64_t id);
typedef enum fat5_finish {
    FAT5_FINISH_NONE = 0,       // still running
    FAT5_FINISH_EOS = 1,        // a stop token (included in the output)
    FAT5_FINISH_LENGTH = 2,     // max_new_tokens (or max_length) reached
    FAT5_FINISH_CANCELLED = 3   // fat5_engine_cancel
} fat5_finish;
typedef struct fat5_engine_event {
    uint64_t id;
    int32_t token;              // the token this step gave the request (greedy, sampling); -1 none
                                //   (beam search emits its output when it finishes)
    fat5_finish finish;         // FAT5_FINISH_NONE while it runs; else it has left, its output complete
    const int32_t *tokens;      // the output so far (beam search, finished: the best hypothesis),
    int64_t n_tokens;           //   valid until the next fat5_engine_step
    float score;                // as fat5_generate_result.scores
} fat5_engine_event;
// One step: admits queued requests into free rows (oldest first), runs the decoder for every
// running row and picks each request's next token. *events (the engine's, valid until the next
// step) gets one event per request that got a token or finished. With nothing running or queued
// it returns at once with no events. A step that fails (a device error, out of memory) leaves the
// engine unusable: destroy it (its requests are lost; a server answers them with an error).
FAT5_API fat5_status fat5_engine_step(fat5_engine *e, const fat5_engine_event **events, int64_t *n_events);
typedef struct fat5_engine_stats {
    int64_t running, waiting;   // requests in the batch, queued
    int64_t rows_used, max_rows;
    int64_t steps, tokens;      // decoder steps run, tokens emitted (all requests), since create
} fat5_engine_stats;
FAT5_API void fat5_engine_stats_get(const fat5_engine *e, fat5_engine_stats *out);

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
// Like fat5_tokenize, with each token's span in `text`: offsets [2 n] = (start, end) byte
// offsets of token i, as tokenizers' Encoding.offsets gives them for the same text but in
// bytes of the UTF-8 input (HF counts characters; ours are byte offsets into text). Special
// tokens the template adds (EOS) get (0, 0). *ids and *offsets are allocated with the ctx
// allocator (fat5_free). A SentencePiece model file gives sentencepiece's spans (the pieces'
// begin / end of its EncodeAsProto; docs/tokenizers.md).
FAT5_API fat5_status fat5_tokenize_offsets(fat5_tokenizer *t, const char *text, size_t len, int flags,
                                           int32_t **ids, int64_t **offsets, int64_t *n);
// The ids fat5_tokenize gives for text alone (no pair), handed to emit in order, a run at a time
// (the run is valid during the call), as they are made: a long text is tokenized in parts with
// scratch memory that does not grow with its length (docs/tokenizers.md), and its ids need not
// be held. emit returns FAT5_OK to go on; another status stops the call, which returns it.
FAT5_API fat5_status fat5_tokenize_stream(fat5_tokenizer *t, const char *text, size_t len, int flags,
                                          fat5_status (*emit)(void *user, const int32_t *ids, int64_t n), void *user);
// Ids to UTF-8 text, NUL-terminated, allocated like fat5_tokenize's ids; *len (may be NULL) gets
// its length. An id outside the vocabulary is FAT5_ERR_INVALID_ARG.
FAT5_API fat5_status fat5_detokenize(fat5_tokenizer *t, const int32_t *ids, int64_t n, int flags, char **text,
                                     size_t *len);
// Vocabulary size: the model's pieces and the added tokens (the largest id + 1).
FAT5_API int64_t fat5_tokenizer_vocab_size(const fat5_tokenizer *t);
// Every id's text as Hugging Face's stop-string matching reads a vocabulary (fat5_token_texts: a
// leading "\u2581" as a space, special tokens as their text), for fat5_generate_config.token_texts.
// The arrays belong to the context (they live until fat5_ctx_destroy): make them once.
FAT5_API fat5_status fat5_tokenizer_token_texts(fat5_tokenizer *t, fat5_token_texts *out);
// A sequence's text while its tokens come (streaming): push each new token (or several) and get the
// text that became final since the last push, whole UTF-8 characters only (a trailing U+FFFD that
// byte-fallback bytes may still complete is held back too); push with last = 1 (and n = 0) for the
// rest. flags: fat5_detokenize's (FAT5_DETOKENIZE_SKIP_SPECIAL). *text is the stream's until the
// next push. Each push detokenizes the whole sequence so far (fine for generation lengths).
typedef struct fat5_detok_stream fat5_detok_stream;
FAT5_API fat5_status fat5_detok_stream_create(fat5_tokenizer *t, int flags, fat5_detok_stream **out);
FAT5_API fat5_status fat5_detok_stream_push(fat5_detok_stream *s, const int32_t *ids, int64_t n, int last,
                                            const char **text, size_t *len);
FAT5_API void fat5_detok_stream_destroy(fat5_detok_stream *s);
// A piece's text (borrowed; NULL outside the vocabulary) and a text's id (-1 when none).
FAT5_API const char *fat5_tokenizer_id_to_piece(const fat5_tokenizer *t, int32_t id);
FAT5_API int32_t fat5_tokenizer_piece_to_id(const fat5_tokenizer *t, const char *piece);
// The ids of the end-of-sequence and padding tokens (-1 when the tokenizer has none); T5's
// "</s>" and "<pad>", or SentencePiece's trainer settings.
FAT5_API int32_t fat5_tokenizer_eos_id(const fat5_tokenizer *t);
FAT5_API int32_t fat5_tokenizer_pad_id(const fat5_tokenizer *t);
// A packed batch from texts: row i's encoder input is fat5_tokenize(inputs[i]) with the
// post-processor (EOS appended); targets (NULL: no labels) give the labels the same way. Release
// with fat5_batch_destroy.
FAT5_API fat5_status fat5_batch_from_texts(fat5_tokenizer *t, const char *const *inputs,
                                           const char *const *targets, int64_t n, fat5_batch *out);

// ---------------------------------------------------------------------------------------------
// Tokenizer training (text): a Unigram vocabulary as SentencePiece's trainer (spm_train) makes it,
// or a BPE vocabulary as `tokenizers`' BpeTrainer makes it, from text files; written as a
// tokenizer.json that `tokenizers`, transformers' T5TokenizerFast and fat5_tokenizer_load read
// alike (Unigram: also spiece.model for `sentencepiece`), with tokenizer_config.json and
// special_tokens_map.json, so that the directory is a checkpoint's tokenizer (docs/tokenizers.md,
// "Training a tokenizer"). Names follow spm_train's flags and BpeTrainer's arguments.
typedef struct fat5_tokenizer_train_config {
    const char *model_type;             // "unigram" (default) or "bpe"
    int64_t vocab_size;                 // the model's pieces, special pieces included (8000); the
                                        // extra_ids sentinels come on top, as in T5's 32,000 + 100
    int extra_ids;                      // T5's <extra_id_0> .. <extra_id_{N-1}> appended (100; 0: none)
    // the corpus (every file; format by file: "text", "fortune", "jsonl"; NULL: by extension,
    // .jsonl / .json -> jsonl, a file whose first line is "%" or holding "\n%\n" -> fortune, else text)
    const char *input_format;
    const char *jsonl_field;            // jsonl: the string field read ("text")
    int64_t input_sentence_size;        // sentences kept, a uniform sample of them (0: all; 1,000,000)
    int shuffle_input_sentence;         // 1: sample uniformly (reservoir, seeded); 0: the first ones
    int64_t max_sentence_length;        // longer sentences (bytes) are skipped, counted in the report (4192)
    uint64_t seed;                      // the sampling seed (0)
    int num_threads;                    // parts run on the context's threads (0: its n_threads); the files
                                        // written are the same for every value
    int verbose;                        // 1: a progress line on stderr every few seconds (default 1)
    // Unigram (spm_train's flags and defaults)
    double character_coverage;          // share of the corpus' characters covered by the alphabet (0.9995)
    int max_sentencepiece_length;       // characters of a piece (16)
    int64_t seed_sentencepiece_size;    // seed pieces from the suffix array (1,000,000)
    double shrinking_factor;            // pieces kept at each pruning round (0.75)
    int num_sub_iterations;             // EM rounds between prunings (2)
    const char *normalization_rule_name;// "nmt_nfkc" (default), "nfkc", "identity"
    int add_dummy_prefix;               // a "\u2581" before each sentence (1)
    int remove_extra_whitespaces;       // leading, trailing and repeated spaces dropped (1)
    int split_by_whitespace;            // pieces never cross a "\u2581" inside (1)
    int split_by_unicode_script;        // nor a change of script (1)
    int split_by_number;                // nor a digit / non-digit boundary (1)
    int split_digits;                   // every digit its own piece (0)
    int byte_fallback;                  // <0x00> .. <0xFF> pieces for characters out of the vocabulary (0)
    const char *const *user_defined_symbols;  // pieces always whole, matched in the text
    int n_user_defined_symbols;
    const char *const *control_symbols; // pieces never produced from text (ids only)
    int n_control_symbols;
    int pad_id, eos_id, unk_id, bos_id; // T5's 0, 1, 2, -1 (none); pieces "<pad>", "</s>", "<unk>", "<s>"
    // BPE (tokenizers' BpeTrainer)
    int byte_level;                     // GPT-2's byte-level pre-tokenizer and alphabet (0: Metaspace words)
    int64_t min_frequency;              // a merge needs its pair seen this often (0, as BpeTrainer)
    int64_t limit_alphabet;             // characters kept in the alphabet, most frequent first (0: all)
    int max_token_length;               // characters of a merged token (0: no limit)
} fat5_tokenizer_train_config;

FAT5_API fat5_tokenizer_train_config fat5_tokenizer_train_config_default(void);

// What a training run did (filled when report is not NULL).
typedef struct fat5_tokenizer_train_report {
    int64_t sentences_read, sentences_used, sentences_skipped;   // skipped: too long or empty
    int64_t bytes_used;                 // bytes of the sentences trained on
    int64_t alphabet_size;              // characters kept (Unigram: by character_coverage)
    int64_t vocab_size;                 // pieces written (sentinels included)
    int rounds;                         // Unigram: EM + pruning rounds; BPE: merges
    double seconds;                     // wall time
    int64_t peak_bytes;                 // the process's peak resident memory at the end (getrusage; 0
                                        // where unknown): the sample of at most input_sentence_size x
                                        // max_sentence_length bytes and the trainer's tables, in proportion
} fat5_tokenizer_train_report;

// Trains on files[0 .. n_files) and writes the tokenizer files into out_dir (created if needed;
// files replaced atomically). Errors name the file and line (invalid UTF-8, a jsonl row without the
// field), or the setting (a vocabulary smaller than the alphabet and the special pieces).
FAT5_API fat5_status fat5_tokenizer_train(fat5_ctx *ctx, const fat5_tokenizer_train_config *cfg,
                                          const char *const *files, int n_files, const char *out_dir,
                                          fat5_tokenizer_train_report *report);

// ---------------------------------------------------------------------------------------------
// Pairs data (text): (input, target) rows for fine-tuning, read from a file a row at a time and
// tokenized with the checkpoint's tokenizer (docs/training.md, "Pairs data"). Formats:
//   - JSON Lines (.jsonl, .json): one object per line; the input and target are string fields
//     (names: input_field / target_field, default "input" / "target"); other fields are ignored.
//   - TSV (.tsv): input and target separated by one tab, no quoting. A first row that names both
//     columns is a header and places them (rows then have its number of columns); without one a
//     row has exactly two columns, input then target. Given field names need a header.
//   - CSV (.csv): RFC 4180 (quoted fields may hold commas, doubled quotes "" and newlines), a
//     header row naming the columns.
//   - parallel text files (two paths): line i of the first is the input, line i of the second
//     its target; the files must have the same number of lines.
// A "\r" before "\n" is dropped; the last line needs no "\n"; blank lines between rows are skipped
// (not in parallel files, where a line is a row). Every line must be valid UTF-8 without NUL.
// Tokens: Hugging Face's tokenizer(text, truncation=True, max_length=N): the text's ids are cut
// to N minus the special tokens the tokenizer adds, and those are added after (T5: "</s>" last),
// so a sequence has at most N ids and keeps its EOS. The input is tokenized as prefix + input.
// Without a tokenizer (NULL): ByT5's ids, byte b -> b + 3, then EOS 1.
// Errors (FAT5_ERR_FORMAT, FAT5_ERR_IO for reading) read "file: line N: reason" (1-based lines):
// a missing field, a field that is not a string, invalid UTF-8 (with its byte offset), an empty
// target, a wrong column count, an unterminated CSV quote, parallel files of different lengths, a
// file with no pairs. After an error in one row's content the reader stands after that row, so a
// caller may skip the row by calling fat5_pairs_next again; other errors (I/O, header, quoting,
// line lengths, parallel lengths) stop the reader until fat5_pairs_rewind.
typedef struct fat5_pairs fat5_pairs;

typedef enum fat5_pairs_format {
    FAT5_PAIRS_AUTO = 0,      // from the name: .jsonl / .json, .tsv, .csv; two paths: parallel
    FAT5_PAIRS_JSONL = 1,
    FAT5_PAIRS_TSV = 2,
    FAT5_PAIRS_CSV = 3,
    FAT5_PAIRS_PARALLEL = 4
} fat5_pairs_format;

typedef struct fat5_pairs_config {
    fat5_pairs_format format;     // FAT5_PAIRS_AUTO
    const char *input_field;      // JSONL field / TSV, CSV column of the input; NULL: "input"
    const char *target_field;     // of the target; NULL: "target"
    const char *prefix;           // put before every input ("summarize: "); NULL: none
    int64_t max_source_length;    // input ids at most (EOS included); 0: no limit
    int64_t max_target_length;    // target ids at most (EOS included); 0: no limit
    int64_t max_line_bytes;       // a longer line is an error; 0: 64 MiB
} fat5_pairs_config;

// One row. The ids and texts belong to the reader and stay valid until its next call.
typedef struct fat5_pairs_row {
    const int32_t *input_ids;     // tokens of prefix + input, truncated, special tokens added
    int64_t n_input;
    const int32_t *target_ids;    // tokens of the target, the same way
    int64_t n_target;
    int64_t input_cut, target_cut;   // ids truncation dropped (0: the text fit)
    const char *input_text;       // the row's input (without the prefix) and target, NUL-terminated
    size_t input_len;
    const char *target_text;
    size_t target_len;
    int64_t line;                 // the row's line in its file (1-based; CSV: its first line)
    int64_t index;                // rows returned before this one since open / rewind
} fat5_pairs_row;

FAT5_API fat5_pairs_config fat5_pairs_config_default(void);
// Opens path (target_path NULL), or the parallel files path and target_path; cfg NULL: defaults.
// The files are read as fat5_pairs_next asks for rows, never whole.
FAT5_API fat5_status fat5_pairs_open(fat5_ctx *ctx, const char *path, const char *target_path,
                                     const fat5_pairs_config *cfg, fat5_pairs **out);
FAT5_API void fat5_pairs_close(fat5_pairs *p);
// The next row, tokenized with tok (NULL: byte-level): *has_row = 1 and *row filled, or
// *has_row = 0 at the end of the data. A file with no pairs at all is FAT5_ERR_FORMAT.
FAT5_API fat5_status fat5_pairs_next(fat5_pairs *p, fat5_tokenizer *tok, fat5_pairs_row *row, int *has_row);
// Back to the first row (the next epoch); also clears an error that stopped the reader.
FAT5_API fat5_status fat5_pairs_rewind(fat5_pairs *p);

// ---------------------------------------------------------------------------------------------
// Text metrics (text): generated text scored against references as the Python packages score it
// (docs/api.md, "Metrics"). Strings are NUL-terminated UTF-8; one that is not valid UTF-8 is
// FAT5_ERR_INVALID_ARG. The corpus forms take n >= 1 predictions and their references:
// refs[ref_offsets[i] .. ref_offsets[i + 1]) belong to preds[i] (ref_offsets[0] = 0, at least one
// each), or refs[i] alone when ref_offsets is NULL. Nothing is kept between calls.
//   - SQuAD v1.1's evaluation script: answers normalised by its normalize_answer (Python's lower
//     case, final sigma included; ASCII punctuation removed; the words a / an / the removed;
//     whitespace collapsed), then exact match and the F1 of the word counts.
//   - rouge_score 0.1.2's RougeScorer (default tokenizer: lower case, every character but a-z 0-9
//     separates words, so other letters are dropped; nltk's Porter stemmer on words longer than 3
//     letters when use_stemmer; rougeLsum splits on "\n").
//   - sacrebleu 2.6's corpus BLEU with its defaults (tokenizer 13a, which keeps non-ASCII letters;
//     n-grams up to 4; 'exp' smoothing; no lower case).
// Character properties and case mappings are Unicode FAT5__UNICODE_VERSION's (Python 3.11: 14.0).

// Exact match (0 or 1) and token F1 (0..1) of one prediction against one reference; em or f1 may
// be NULL.
FAT5_API fat5_status fat5_metric_squad(fat5_ctx *ctx, const char *pred, const char *ref, double *em, double *f1);
// The script's corpus figures, in percent (0..100): the means over the predictions of the best
// exact match and the best F1 over each prediction's references.
FAT5_API fat5_status fat5_metric_squad_corpus(fat5_ctx *ctx, const char *const *preds, int64_t n,
                                              const char *const *refs, const int64_t *ref_offsets, double *em,
                                              double *f1);

typedef struct fat5_rouge_score {
    double precision, recall, fmeasure;   // 0..1
} fat5_rouge_score;
typedef struct fat5_rouge {
    fat5_rouge_score rouge1, rouge2, rougeL, rougeLsum;
} fat5_rouge;
// RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer).score(ref, pred).
FAT5_API fat5_status fat5_metric_rouge(fat5_ctx *ctx, const char *pred, const char *ref, int use_stemmer,
                                       fat5_rouge *out);
// The arithmetic means over the predictions of each field (the F-measures' means are what
// Hugging Face evaluate's "rouge" reports with use_aggregator=False, averaged); a prediction with
// several references scores each kind against the reference of the largest F-measure, the first
// on a tie (RougeScorer.score_multi).
FAT5_API fat5_status fat5_metric_rouge_corpus(fat5_ctx *ctx, const char *const *preds, int64_t n,
                                              const char *const *refs, const int64_t *ref_offsets, int use_stemmer,
                                              fat5_rouge *out);

typedef struct fat5_bleu {
    double score;           // 0..100, sacrebleu's BLEUScore.score
    double precisions[4];   // n-gram precisions in percent, smoothed ('exp')
    double bp;              // brevity penalty
    int64_t sys_len, ref_len;         // hypothesis words; closest reference words (the shorter on a tie)
    int64_t correct[4], total[4];     // clipped n-gram matches and hypothesis n-grams, n = 1..4
} fat5_bleu;
// sacrebleu.corpus_bleu(preds, ref_streams) with its defaults; a hypothesis with several
// references counts each n-gram up to its largest count in one of them.
FAT5_API fat5_status fat5_metric_bleu(fat5_ctx *ctx, const char *const *preds, int64_t n, const char *const *refs,
                                      const int64_t *ref_offsets, fat5_bleu *out);

// nltk's PorterStemmer().stem(word) (mode NLTK_EXTENSIONS), the stemmer of the ROUGE above, for a
// word of ASCII letters and digits (ASCII capitals are lowered first; any other byte counts as a
// consonant). out receives the stem and a NUL: len + 1 bytes suffice. Returns the stem's length.
FAT5_API size_t fat5_porter_stem(const char *word, size_t len, char *out);

#ifdef __cplusplus
}
#endif
#endif // FAT5_H
