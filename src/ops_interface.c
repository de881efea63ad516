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

// The decoding options the generation ops read (gen_process, gen_select, gen_beam), filled once
// per fat5_generate call. The kernels of kernels/generate.cu take it by value: fat5_gen_opts
// there has these fields in this order (pointers as 64-bit addresses). Row r of the decoder holds
// hist[r][0 .. P) = its prompt, then the generated tokens: cur = P + lens[r] tokens in all.
typedef struct fat5__gen_opts {
    fat5__addr eos;             // int32 [n_eos]: the stop tokens
    fat5__addr forced_eos;      // int32 [n_forced_eos]
    fat5__addr suppress;        // int32 [n_suppress]
    fat5__addr begin_suppress;  // int32 [n_begin_suppress]
    fat5__addr seq_ids;         // int32 [seq_cu[n_seq]]: sequence biases, then bad words
    fat5__addr seq_cu;          // int32 [n_seq + 1]
    fat5__addr seq_bias;        // fp32 [n_seq]: the bias of each sequence's last token (-inf: a bad word)
    fat5__addr enc_tok;         // int32 [enc_cu[inputs]]: the inputs (encoder processors)
    fat5__addr enc_cu;          // int32 [inputs + 1]
    int n_eos, n_forced_eos, n_suppress, n_begin_suppress, n_seq, n_seq_bias; // the first n_seq_bias of
                                //   the n_seq sequences are sequence_bias (added), the rest bad words
    int P;                      // the decoder prompt's length (1: the start token)
    int rows_per_input;         // row r decodes input r / rows_per_input
    int enc_max;                // the longest input: a shorter one is followed by pads up to it, as in
    int pad;                    //   Hugging Face's right-padded batch (the encoder processors see them)
    int max_new;                // tokens generated at most (the forced EOS comes at max_new - 1)
    int min_new, min_len;       // EOS suppressed while lens < min_new or P + lens < min_len
    int ngram, enc_ngram;       // no_repeat_ngram_size, encoder_no_repeat_ngram_size (0: off)
    float rep, enc_rep;         // repetition_penalty, encoder_repetition_penalty (1: off)
    int forced_bos;             // -1: off; forced when cur == 1
    int begin_index;            // begin_suppress_tokens apply when cur == begin_index
    int decay_start;            // -1: off; exponential decay when cur > decay_start (P included)
    float decay_factor;
    int remove_invalid;         // NaN -> 0, +-inf -> +-FLT_MAX
    int log_softmax;            // beam search: the logits become log-probabilities first
    int renormalize;            // log_softmax after the processors and warpers
    int do_sample;              // warpers (below) and a sampled token / sampled beam candidates
    float temperature;
    int top_k;                  // 0: off
    float top_p, min_p, typical_p, epsilon, eta;   // 1, 0, 1, 0, 0: off
    int min_keep;               // warpers keep at least this many tokens (1; beams: n_eos + 1)
    int K;                      // beams of one unit: an input (1: greedy or sampling), or a group
    float length_penalty;
    int early_stopping;         // 0 false, 1 true, 2 "never"
    unsigned long long seed;
    int G, group;               // group beam search: each input's K G beams are G units of K (K is a
                                //   group's beams); gen_process and gen_beam touch group `group` alone
    float diversity;            // subtracted per earlier group of the input whose beam chose the token
    fat5__addr bidx, fin_bidx;  // 0, or int32 [R, Lh - P] each: gen_beam keeps each running beam's and each
                                //   finished slot's beam indices (the row each token's beam was, per step)
    int row0;                   // the first decoder row of these options' request (0 for fat5_generate; an
                                //   engine's request from its row): row r is its row r - row0 for the
                                //   inputs (r - row0) / rows_per_input, the sampling draws and beam units
} fat5__gen_opts;

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

// act_fwd / act_bwd's activations: a fat5_act value, or this one (the classification head's)
#define FAT5__ACT_TANH 4

// rope's flags
#define FAT5__ROPE_INTERLEAVED 1  // pairs (2k, 2k + 1) (GPT-J), else (k, k + rd/2) (NeoX)
#define FAT5__ROPE_KEY 2          // the key side: xPos scales by zeta^(-t/gamma) instead of zeta^(t/gamma)
#define FAT5__ROPE_TRANSPOSE 4    // the backward: the transposed rotation (same scale)

// dropout's modes: y = x m (m: scale where element i of the mask is kept, else 0; fat5__drop in
// base: RNG), by the types of y and x. The attention ops and act_fwd / act_bwd take a fat5__drop
// too (thresh 0: none).
enum {
    FAT5__DROP_F32 = 0,     // fp32 y = drop(fp32 x) (in place allowed)
    FAT5__DROP_ADD = 1,     // fp32 y += drop(fp32 x): a sub-layer's output into the residual stream
    FAT5__DROP_TO_ACT = 2,  // activation-dtype y = drop(fp32 x): a stream gradient as a matmul operand
    FAT5__DROP_ACT = 3      // activation-dtype y = drop(activation-dtype x) (in place allowed)
};

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

