// The implementation compiled as C++: builds, loads a fixture and runs forward + backward.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <cstdio>

int main() {
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = nullptr;
    fat5_model *m = nullptr;
    static const int32_t enc[] = {5, 6, 7, 1};
    static const int32_t enc_cu[] = {0, 4};
    static const int32_t lab[] = {9, 1};
    static const int32_t dec_cu[] = {0, 2};
    fat5_batch b = {1, 4, 2, enc, enc_cu, nullptr, lab, dec_cu, nullptr, nullptr};  // n_seq, encoder and decoder token counts, buffers
    fat5_forward_result r;
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) return 1;
    if (fat5_model_load(ctx, "tests/data/t5_v11_gated_gelu_untied", &m) != FAT5_OK ||
        fat5_model_forward(m, &b, nullptr, &r) != FAT5_OK || fat5_model_backward(m, 1.0f) != FAT5_OK) {
        std::printf("C++ build: FAILED: %s\n", fat5_last_error(ctx));
        fat5_model_destroy(m);
        fat5_ctx_destroy(ctx);
        return 1;
    }
    std::printf("C++ build: ok (loss %.4f)\n", r.loss);
    fat5_model_destroy(m);
    fat5_ctx_destroy(ctx);
    return r.loss > 0 ? 0 : 1;
}
