// libFuzzer target: config.json (fat5_model_config_from_json). A config that parses must validate,
// and when fat5_model_config_to_json writes it, the text must parse back to the same config.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_double(double a, double b) { return a == b || (a != a && b != b); }

static int same_config(const fat5_model_config *a, const fat5_model_config *b) {
    return a->vocab_size == b->vocab_size && a->d_model == b->d_model && a->d_kv == b->d_kv &&
           a->d_ff == b->d_ff && a->num_layers == b->num_layers &&
           a->num_decoder_layers == b->num_decoder_layers && a->num_heads == b->num_heads &&
           a->rel_buckets == b->rel_buckets && a->rel_max_distance == b->rel_max_distance &&
           same_double(a->layer_norm_eps, b->layer_norm_eps) && a->act == b->act && a->gated == b->gated &&
           a->tie_word_embeddings == b->tie_word_embeddings &&
           a->scale_decoder_outputs == b->scale_decoder_outputs && a->bias_every_layer == b->bias_every_layer &&
           a->pad_token_id == b->pad_token_id && a->eos_token_id == b->eos_token_id &&
           a->decoder_start_token_id == b->decoder_start_token_id &&
           same_double(a->dropout_rate, b->dropout_rate) &&
           same_double(a->attention_dropout_rate, b->attention_dropout_rate) &&
           strncmp(a->model_type, b->model_type, sizeof a->model_type) == 0 && a->pos_kind == b->pos_kind &&
           a->alibi_asymmetric == b->alibi_asymmetric && a->rotary_interleaved == b->rotary_interleaved &&
           a->fire_mlp_width == b->fire_mlp_width && same_double(a->rotary_fraction, b->rotary_fraction) &&
           same_double(a->rotary_base, b->rotary_base) && same_double(a->rotary_scale_base, b->rotary_scale_base) &&
           a->head == b->head && a->num_labels == b->num_labels && a->problem_type == b->problem_type &&
           same_double(a->classifier_dropout, b->classifier_dropout) && a->pooling == b->pooling;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    fat5_model_config cfg, back;
    char *json = NULL;
    size_t len = 0;
    if (fat5_model_config_from_json(ctx, (const char *)data, size, &cfg) != FAT5_OK) return 0;
    if (memchr(cfg.model_type, 0, sizeof cfg.model_type) == NULL) fuzz_die("model_type not terminated");
    if (fat5_model_config_validate(ctx, &cfg) != FAT5_OK) fuzz_die("a parsed config does not validate");
    // a head's config.json holds one id2label and one label2id line per label: up to 2^24 labels
    // validate, but writing millions of lines is no test of the writer
    if (cfg.num_labels > 4096) return 0;
    if (fat5_model_config_to_json(ctx, &cfg, &json, &len) != FAT5_OK) return 0;
    if (!json || strlen(json) != len) fuzz_die("to_json length");
    if (fat5_model_config_from_json(ctx, json, len, &back) != FAT5_OK) fuzz_die("to_json output does not parse");
    if (!same_config(&cfg, &back)) fuzz_die("config changed in a to_json/from_json round trip");
    fat5_free(ctx, json);
    return 0;
}
