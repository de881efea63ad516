// libFuzzer target: the batch JSON reader (fat5_batch_from_json, fat5_batch_destroy). A batch that
// parses must be consistent: cumulative offsets start at 0 and never decrease.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    fat5_batch b;
    int64_t s;
    if (fat5_batch_from_json(ctx, (const char *)data, size, &b) != FAT5_OK) {
        fat5_batch_destroy(ctx, &b);  // must be harmless on a failed parse
        return 0;
    }
    if (b.n_seq < 0 || !b.enc_cu_seqlens || !b.dec_cu_seqlens) fuzz_die("batch shape");
    if (b.enc_cu_seqlens[0] != 0 || b.dec_cu_seqlens[0] != 0) fuzz_die("cu_seqlens[0]");
    for (s = 0; s < b.n_seq; s++)
        if (b.enc_cu_seqlens[s + 1] < b.enc_cu_seqlens[s] || b.dec_cu_seqlens[s + 1] < b.dec_cu_seqlens[s])
            fuzz_die("cu_seqlens decrease");
    // touch the last element of every token buffer (ASan catches a short allocation)
    if (b.enc_cu_seqlens[b.n_seq] > 0 && b.enc_tokens) s = b.enc_tokens[b.enc_cu_seqlens[b.n_seq] - 1];
    if (b.dec_cu_seqlens[b.n_seq] > 0 && b.labels) s = b.labels[b.dec_cu_seqlens[b.n_seq] - 1];
    if (b.dec_cu_seqlens[b.n_seq] > 0 && b.dec_tokens) s = b.dec_tokens[b.dec_cu_seqlens[b.n_seq] - 1];
    (void)s;
    fat5_batch_destroy(ctx, &b);
    return 0;
}
