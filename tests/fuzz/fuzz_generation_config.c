// libFuzzer target: generation_config.json. The input is read over the fixture model's defaults by
// fat5_generate_config_from_json (a refused text must leave the config as it was), then written
// beside the fixture's config.json and model.safetensors: fat5_model_load of that directory must
// succeed exactly when the text was accepted, and keep the same settings
// (fat5_generate_config_from_model). A model that loads generates from two inputs with those
// settings (max_new_tokens, num_return_sequences and num_beams capped to keep a run short): any
// refusal is fine, but the outputs of a generation that succeeds must be well formed (ids in the
// vocabulary, no eos before min_new_tokens, nothing after an eos, a sequence that stops early ends
// with it).
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP_NEW_TOKENS 6
#define CAP_RETURN_SEQUENCES 3
#define CAP_BEAMS 6

static fat5_model *fixture;   // the model the inputs' settings are read over
static int ready;

static int same_double(double a, double b) { return a == b || (a != a && b != b); }

static int same_list(const fat5_token_list *a, const fat5_token_list *b) {
    return a->n == b->n && (a->n == 0 || !memcmp(a->ids, b->ids, (size_t)a->n * sizeof(int32_t)));
}

static int same_seqs(const fat5_token_seqs *a, const fat5_token_seqs *b) {
    return a->n == b->n && (a->n == 0 || (!memcmp(a->cu, b->cu, (size_t)(a->n + 1) * sizeof(int32_t)) &&
                                          !memcmp(a->ids, b->ids, (size_t)a->cu[a->n] * sizeof(int32_t))));
}

static int same_gen(const fat5_generate_config *a, const fat5_generate_config *b) {
    int64_t i;
    int same = a->max_new_tokens == b->max_new_tokens && a->min_new_tokens == b->min_new_tokens &&
           a->do_sample == b->do_sample && same_double(a->temperature, b->temperature) && a->top_k == b->top_k &&
           same_double(a->top_p, b->top_p) && a->seed == b->seed && a->num_beams == b->num_beams &&
           same_double(a->length_penalty, b->length_penalty) && a->early_stopping == b->early_stopping &&
           a->num_return_sequences == b->num_return_sequences &&
           same_double(a->repetition_penalty, b->repetition_penalty) &&
           a->no_repeat_ngram_size == b->no_repeat_ngram_size && a->eos_token_id == b->eos_token_id &&
           a->pad_token_id == b->pad_token_id && a->decoder_start_token_id == b->decoder_start_token_id &&
           a->use_graph == b->use_graph && a->max_length == b->max_length && a->min_length == b->min_length &&
           same_list(&a->eos_token_ids, &b->eos_token_ids) && a->forced_bos_token_id == b->forced_bos_token_id &&
           same_list(&a->forced_eos_token_id, &b->forced_eos_token_id) &&
           same_list(&a->suppress_tokens, &b->suppress_tokens) &&
           same_list(&a->begin_suppress_tokens, &b->begin_suppress_tokens) &&
           same_seqs(&a->bad_words_ids, &b->bad_words_ids) && same_seqs(&a->sequence_bias, &b->sequence_bias) &&
           same_seqs(&a->decoder_input_ids, &b->decoder_input_ids) &&
           same_double(a->encoder_repetition_penalty, b->encoder_repetition_penalty) &&
           a->encoder_no_repeat_ngram_size == b->encoder_no_repeat_ngram_size &&
           a->exponential_decay_start == b->exponential_decay_start &&
           same_double(a->exponential_decay_factor, b->exponential_decay_factor) &&
           a->renormalize_logits == b->renormalize_logits && a->remove_invalid_values == b->remove_invalid_values &&
           same_double(a->min_p, b->min_p) && same_double(a->typical_p, b->typical_p) &&
           same_double(a->epsilon_cutoff, b->epsilon_cutoff) && same_double(a->eta_cutoff, b->eta_cutoff) &&
           same_double(a->max_time, b->max_time) && a->output_scores == b->output_scores &&
           a->output_logits == b->output_logits && a->n_stop_strings == b->n_stop_strings &&
           a->num_beam_groups == b->num_beam_groups && same_double(a->diversity_penalty, b->diversity_penalty) &&
           same_seqs(&a->force_words_ids, &b->force_words_ids);
    if (same && a->force_words_ids.n)
        same = !memcmp(a->force_words_constraint, b->force_words_constraint,
                       (size_t)a->force_words_ids.n * sizeof(int32_t));
    for (i = 0; same && i < a->sequence_bias.n; i++)
        same = same_double(a->sequence_bias_values[i], b->sequence_bias_values[i]);
    for (i = 0; same && i < a->n_stop_strings; i++) same = !strcmp(a->stop_strings[i], b->stop_strings[i]);
    return same;
}

// a stop token of g (its list, else eos_token_id)
static int is_eos(const fat5_generate_config *g, int32_t id) {
    int64_t k;
    if (g->eos_token_ids.n == 0) return id == g->eos_token_id;
    for (k = 0; k < g->eos_token_ids.n; k++)
        if (g->eos_token_ids.ids[k] == id) return 1;
    return 0;
}

static void prepare(void) {
    fat5_ctx *ctx = fuzz_ctx();
    static const char *const files[] = {"config.json", "model.safetensors"};
    char src[1024], dst[1024], *text;
    size_t len = 0;
    int i;
    for (i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/%s", FUZZ_DATA_DIR, files[i]);
        if (!(text = fuzz_read(src, &len))) fuzz_die("cannot read the fixture");
        fuzz_path(dst, sizeof dst, files[i]);
        fuzz_write(dst, text, len);
        free(text);
    }
    if (fat5_model_load(ctx, FUZZ_DATA_DIR, &fixture) != FAT5_OK) fuzz_die("cannot load the fixture");
    ready = 1;
}

// Generates from two short inputs with g (capped) and checks what a successful run returns.
static void generate(fat5_model *m, const fat5_generate_config *given) {
    static const int32_t tokens[] = {3, 5, 9, 1, 7, 1};
    static const int32_t cu[] = {0, 4, 6};
    fat5_generate_config g = *given;
    fat5_generate_result r;
    int64_t V = fat5_model_get_config(m)->vocab_size, s, j, P, max_new;
    P = g.decoder_input_ids.n ? g.decoder_input_ids.cu[1] : 1;
    if (g.max_length > P + CAP_NEW_TOKENS) g.max_length = 0;   // then max_new_tokens, capped below
    if (g.max_new_tokens > CAP_NEW_TOKENS) g.max_new_tokens = CAP_NEW_TOKENS;
    if (g.num_return_sequences > CAP_RETURN_SEQUENCES) g.num_return_sequences = CAP_RETURN_SEQUENCES;
    if (g.num_beams > CAP_BEAMS) g.num_beams = CAP_BEAMS;   // still beam search, with fewer beams
    if (g.num_beams % g.num_beam_groups) g.num_beam_groups = 1;
    if (g.max_time > 1.0) g.max_time = 1.0;
    max_new = g.max_length > 0 ? g.max_length - P : g.max_new_tokens;
    if (fat5_generate(m, tokens, cu, 2, &g, &r) != FAT5_OK) {
        fat5_generate_result_destroy(fuzz_ctx(), &r);   // must be harmless after a refusal
        return;
    }
    if (r.n_seq != 2 * g.num_return_sequences || !r.cu_seqlens || r.cu_seqlens[0] != 0) fuzz_die("result shape");
    for (s = 0; s < r.n_seq; s++) {
        int64_t a = r.cu_seqlens[s], n = r.cu_seqlens[s + 1] - a;
        if (n < 0 || n > max_new) fuzz_die("a sequence longer than max_new_tokens");
        for (j = 0; j < n; j++) {
            int32_t id = r.tokens[a + j];
            if (id < 0 || id >= V) fuzz_die("an id outside the vocabulary");
            // (a forced word may hold a stop token: constrained beam search proposes it whatever its score)
            if (is_eos(&g, id) && j < g.min_new_tokens && g.forced_eos_token_id.n == 0 && g.forced_bos_token_id < 0 &&
                g.force_words_ids.n == 0)
                fuzz_die("eos before min_new_tokens");
            if (is_eos(&g, id) && j != n - 1) fuzz_die("tokens after the eos");
        }
        // beam search returns a slot no hypothesis filled as no tokens (when every hypothesis scores
        // below the empty slots' -1e9, as with an extreme length_penalty; Hugging Face does the same)
        if (n == 0 && g.num_beams > 1 && r.scores[s] <= -1.0e9f) continue;
        if (n < max_new && g.max_time == 0 && (n == 0 || !is_eos(&g, r.tokens[a + n - 1])))
            fuzz_die("a sequence stopped early without its eos");
    }
    fat5_generate_result_destroy(fuzz_ctx(), &r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fat5_ctx *ctx = fuzz_ctx();
    fat5_generate_config g, before, kept;
    fat5_model *m = NULL;
    fat5_status parsed, loaded;
    char path[1024];
    if (!ready) prepare();
    g = before = fat5_generate_config_from_model(fixture);
    parsed = fat5_generate_config_from_json(ctx, (const char *)data, size, &g);
    if (parsed != FAT5_OK && !same_gen(&g, &before)) fuzz_die("a refused text changed the config");
    fuzz_path(path, sizeof path, "generation_config.json");
    fuzz_write(path, data, size);
    loaded = fat5_model_load(ctx, fuzz_dir, &m);
    if ((loaded == FAT5_OK) != (m != NULL)) fuzz_die("status and model disagree");
    if ((loaded == FAT5_OK) != (parsed == FAT5_OK)) fuzz_die("model_load and from_json disagree");
    if (!m) return 0;
    kept = fat5_generate_config_from_model(m);
    if (!same_gen(&kept, &g)) fuzz_die("the loaded model keeps other settings");
    generate(m, &kept);
    fat5_model_destroy(m);
    return 0;
}
