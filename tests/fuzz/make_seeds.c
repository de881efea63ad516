// make_seeds.c — writes the seed corpora of the fuzz targets from the fixtures in tests/data.
//     make_seeds OUT_DIR FIXTURE_DIR...
// creates OUT_DIR/corpus_<target>/ for every target: the fixtures' model.safetensors and
// reference.safetensors (safetensors), config.json (config), batch.json (batch), config.json +
// FUZZ_SPLIT + model.safetensors (model_dir), and a model.safetensors.index.json generated for
// the two-shard split of FUZZ_DATA_DIR that fuzz_index writes (index), the small tokenizer
// fixtures of tests/data/tokenizers behind their kind byte (tokenizer), the decoding options of
// the fixtures' generate.json and hand-written edge cases (generation_config), token files of a
// fixture's text (tokens), the tokenizer fixtures' directories (tokenizer_dir), and the files of
// the checkpoint a tiny training run writes (resume; fuzz_run_train, in OUT_DIR/resume_run, which
// is removed after).
#define FAT5_IMPLEMENTATION
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

static void die(const char *what, const char *path) {
    fprintf(stderr, "make_seeds: %s: %s\n", what, path);
    exit(1);
}

static void mkdir_p(const char *path) {
    struct stat sb;
    if (mkdir(path, 0755) != 0 && !(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))) die("cannot create", path);
}

static char *slurp(const char *dir, const char *name, size_t *len) {
    char p[1024];
    char *b;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!(b = fuzz_read(p, len))) die("cannot read", p);
    return b;
}

// the same, or NULL when the file is absent (a fixture without a reference or a batch)
static char *slurp_opt(const char *dir, const char *name, size_t *len) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *len = 0;
    return access(p, F_OK) == 0 ? slurp(dir, name, len) : NULL;
}

static void put(const char *out, const char *corpus, const char *name, const char *a, size_t alen,
                const char *b, size_t blen) {
    char p[1024];
    FILE *f;
    snprintf(p, sizeof p, "%s/corpus_%s/%s", out, corpus, name);
    if (!(f = fopen(p, "wb")) || fwrite(a, 1, alen, f) != alen || (blen && fwrite(b, 1, blen, f) != blen) ||
        fclose(f) != 0)
        die("cannot write", p);
}

// The index for the split fuzz_write_shards makes of the fixture's tensors.
static void write_index(fat5_ctx *ctx, const char *out, const char *fixture) {
    fat5_st_file *f = NULL;
    FILE *o;
    char p[1024];
    int i, n;
    snprintf(p, sizeof p, "%s/model.safetensors", fixture);
    if (fat5_st_load(ctx, p, &f) != FAT5_OK) die(fat5_last_error(ctx), p);
    snprintf(p, sizeof p, "%s/corpus_index/split.index.json", out);
    if (!(o = fopen(p, "wb"))) die("cannot write", p);
    n = fat5_st_tensor_count(f);
    fprintf(o, "{\n  \"metadata\": {\"total_size\": 0},\n  \"weight_map\": {\n");
    for (i = 0; i < n; i++)
        fprintf(o, "    \"%s\": \"%s\"%s\n", fat5_st_get(f, i)->name, fuzz_shard_names[fuzz_shard_of(i)],
                i + 1 < n ? "," : "");
    fprintf(o, "  }\n}\n");
    if (fclose(o) != 0) die("cannot write", p);
    fat5_st_destroy(f);
}

// Appends a file of a tokenizer directory (fuzz_tokenizer_dir's entry: the byte of its name, then
// its bytes) to f, after a separator unless it is the first.
static void put_dir_entry(FILE *f, int *first, int name, const char *src) {
    size_t len;
    char *b;
    const char *slash = strrchr(src, '/');
    char dir[1024];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - src), src);
    b = slurp(dir, slash + 1, &len);
    if ((!*first && fputs(FUZZ_FILE_SPLIT, f) < 0) || fputc(name, f) == EOF || fwrite(b, 1, len, f) != len)
        die("cannot write", src);
    *first = 0;
    free(b);
}

// fuzz_tokenizer_dir's seeds: each tokenizer fixture directory with its files, and directories
// where a later candidate (spiece.model, tokenizer.model) is the one that loads.
static void write_tokenizer_dirs(const char *out) {
    static const struct {
        const char *seed;
        const char *files[3];   // fixture paths under tests/data
        int names[3];           // their names in the directory (fuzz_tokdir_names)
    } dirs[] = {
        {"mt5bf", {"tokenizers/mt5bf/tokenizer.json", "tokenizers/mt5bf/spiece.model", NULL}, {0, 1, 0}},
        {"mt5bf_spiece", {"tokenizers/mt5bf/spiece.model", NULL, NULL}, {1, 0, 0}},
        {"spmbpe", {"tokenizers/spmbpe/tokenizer.json", "tokenizers/spmbpe/spiece.model", NULL}, {0, 1, 0}},
        {"spmbpe_model", {"tokenizers/spmbpe/spiece.model", NULL, NULL}, {2, 0, 0}},
        {"bytebpe", {"tokenizers/bytebpe/tokenizer.json", NULL, NULL}, {0, 0, 0}},
        {"uniseq", {"tokenizers/uniseq/tokenizer.json", NULL, NULL}, {0, 0, 0}},
        {"legacy", {"tokenizers/legacy/tokenizer.json", NULL, NULL}, {0, 0, 0}},
        {"t5_spiece", {"t5_spiece/tokenizer.json", "t5_spiece/spiece.model", "t5_spiece/tokenizer_config.json"},
         {0, 1, 3}},
        {"t5_spiece_noj", {"t5_spiece/tokenizer_config.json", "t5_spiece/spiece.model", NULL}, {3, 1, 0}},
    };
    size_t i;
    int k;
    for (i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[1024], src[1024];
        FILE *f;
        int first = 1;
        snprintf(p, sizeof p, "%s/corpus_tokenizer_dir/%s", out, dirs[i].seed);
        if (!(f = fopen(p, "wb"))) die("cannot write", p);
        for (k = 0; k < 3 && dirs[i].files[k]; k++) {
            snprintf(src, sizeof src, "%s/../%s", FUZZ_DATA_DIR, dirs[i].files[k]);
            put_dir_entry(f, &first, dirs[i].names[k], src);
        }
        if (fclose(f) != 0) die("cannot write", p);
    }
}

// fuzz_generation_config's seeds: every "options" object of a fixture's generate.json (flat objects:
// the text up to the first '}').
static void write_generate_options(const char *out, const char *dir, const char *base) {
    size_t len;
    char *text = slurp_opt(dir, "generate.json", &len), *at, name[300];
    int k = 0, file;
    for (file = 0; file < 2; file++) {
    if (file == 1) {
        free(text);
        text = slurp_opt(dir, "generate_options.json", &len);
    }
    if (!text) continue;
    for (at = strstr(text, "\"options\": {"); at; at = strstr(at, "\"options\": {")) {
        char *open = strchr(at, '{'), *close = strchr(open, '}');
        if (!close) break;
        snprintf(name, sizeof name, "%s.options%d", base, k++);
        put(out, "generation_config", name, open, (size_t)(close - open + 1), NULL, 0);
        at = close;
    }
    }
    free(text);
}

// fuzz_generation_config's hand-written seeds: what Hugging Face writes, sampling, the longest beam
// search, ids at and past the fixture's vocabulary (96), the length settings and their limits.
static void write_generation_cases(const char *out) {
    static const char *const cases[] = {
        "{\n  \"_from_model_config\": true,\n  \"decoder_start_token_id\": 0,\n  \"eos_token_id\": 1,\n"
        "  \"pad_token_id\": 0,\n  \"transformers_version\": \"4.57.6\"\n}\n",
        "{\"decoder_start_token_id\": 0, \"eos_token_id\": [1, 2], \"pad_token_id\": 0}",
        "{\"do_sample\": true, \"temperature\": 0.7, \"top_k\": 0, \"top_p\": 0.9, \"seed\": 7, "
        "\"num_return_sequences\": 3, \"max_length\": 6, \"min_length\": 3}",
        "{\"do_sample\": true, \"temperature\": 1e-300, \"top_k\": 1, \"top_p\": 1e-300, "
        "\"repetition_penalty\": 1e300}",
        "{\"num_beams\": 32, \"num_return_sequences\": 32, \"early_stopping\": \"never\", \"length_penalty\": -1e308, "
        "\"no_repeat_ngram_size\": 1, \"use_graph\": false}",
        "{\"do_sample\": true, \"num_beams\": 2}",
        "{\"max_new_tokens\": null, \"min_new_tokens\": null, \"max_length\": 1}",
        "{\"max_new_tokens\": 1073741823, \"min_new_tokens\": 2147483647, \"no_repeat_ngram_size\": 2147483647}",
        "{\"eos_token_id\": 95, \"pad_token_id\": 95, \"decoder_start_token_id\": 95}",
        "{\"eos_token_id\": 96}",
        "{\"eos_token_id\": -1, \"min_new_tokens\": 3}",
        "{\"eos_token_id\": [], \"seed\": 18446744073709551615}",
        "{\"early_stopping\": \"sometimes\"}",
        "[1, 2, 3]",
        "{\"forced_bos_token_id\": 5, \"forced_eos_token_id\": [1, 7], \"suppress_tokens\": [3, 95], "
        "\"begin_suppress_tokens\": [4], \"max_new_tokens\": 5}",
        "{\"bad_words_ids\": [[9], [3, 5, 9], [1]], \"sequence_bias\": [[[5], 2.5], [[9, 9], -1e30], [[5], -1.0]], "
        "\"eos_token_id\": [1, 9, 12]}",
        "{\"encoder_repetition_penalty\": 1.5, \"encoder_no_repeat_ngram_size\": 2, "
        "\"exponential_decay_length_penalty\": [1, 1.5], \"renormalize_logits\": true, \"remove_invalid_values\": true}",
        "{\"do_sample\": true, \"min_p\": 0.1, \"typical_p\": 0.8, \"epsilon_cutoff\": 0.001, \"eta_cutoff\": 0.002, "
        "\"num_beams\": 3, \"seed\": 3}",
        "{\"decoder_input_ids\": [[0, 7, 8]], \"max_length\": 6, \"min_length\": 5, \"no_repeat_ngram_size\": 2}",
        "{\"output_scores\": true, \"output_logits\": true, \"max_time\": 0.5, \"stop_strings\": [\"ab\"]}",
        "{\"num_beams\": 4, \"num_beam_groups\": 2, \"diversity_penalty\": 1.0, \"num_return_sequences\": 3}",
        "{\"num_beams\": 6, \"num_beam_groups\": 3, \"diversity_penalty\": 1e30, \"eos_token_id\": [1, 9]}",
        "{\"force_words_ids\": [[3, 4]], \"num_beams\": 2}",
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "case%zu", i);
        put(out, "generation_config", name, cases[i], strlen(cases[i]), NULL, 0);
    }
}

// fuzz_tokens's seeds: the tiny run's corpus (a fixture's text as byte ids) as one file of 2-byte
// ids, as 4-byte ids, cut in two files at a document boundary, and folded into a vocabulary of 96,
// each behind a byte of sampler options.
static void write_token_seeds(fat5_ctx *ctx, const char *out) {
    char p[1024], *file;
    size_t len, n, i, cut = 0;
    int32_t *ids;
    FILE *f;
    snprintf(p, sizeof p, "%s/seed.tokens", out);
    if (fuzz_run_corpus(ctx, p) != 0) die(fat5_last_error(ctx), p);
    if (!(file = fuzz_read(p, &len)) || len < 34) die("cannot read", p);
    n = (len - 32) / 2;
    if (!(ids = (int32_t *)malloc(n * sizeof *ids))) die("out of memory", p);
    for (i = 0; i < n; i++) {
        ids[i] = (int32_t)((unsigned char)file[32 + 2 * i] | (unsigned char)file[33 + 2 * i] << 8);
        if (ids[i] == 1 && i < n / 2) cut = i + 1;
    }
    put(out, "tokens", "bytes2", "\x00", 1, file, len);
    if (fat5_tokens_write(ctx, p, ids, (int64_t)n, FUZZ_RUN_VOCAB, 1, 4) != FAT5_OK) die(fat5_last_error(ctx), p);
    free(file);
    if (!(file = fuzz_read(p, &len))) die("cannot read", p);
    put(out, "tokens", "bytes4", "\x11", 1, file, len);
    free(file);
    snprintf(p, sizeof p, "%s/corpus_tokens/two_files", out);   // the first half, FUZZ_FILE_SPLIT, the rest
    if (!(f = fopen(p, "wb")) || fputc(0x23, f) == EOF) die("cannot write", p);
    {
        char q[1024];
        size_t k, part;
        for (k = 0; k < 2; k++) {
            snprintf(q, sizeof q, "%s/seed.tokens", out);
            if (fat5_tokens_write(ctx, q, ids + (k ? cut : 0), (int64_t)(k ? n - cut : cut), FUZZ_RUN_VOCAB, 1, 2) !=
                FAT5_OK)
                die(fat5_last_error(ctx), q);
            if (!(file = fuzz_read(q, &part))) die("cannot read", q);
            if ((k && fputs(FUZZ_FILE_SPLIT, f) < 0) || fwrite(file, 1, part, f) != part) die("cannot write", p);
            free(file);
        }
    }
    if (fclose(f) != 0) die("cannot write", p);
    for (i = 0; i < n; i++) ids[i] %= 96;
    ids[n - 1] = 1;
    snprintf(p, sizeof p, "%s/seed.tokens", out);
    if (fat5_tokens_write(ctx, p, ids, (int64_t)n, 96, 1, 2) != FAT5_OK) die(fat5_last_error(ctx), p);
    if (!(file = fuzz_read(p, &len))) die("cannot read", p);
    put(out, "tokens", "vocab96", "\x4c", 1, file, len);
    free(file);
    free(ids);
    unlink(p);
}

// fuzz_resume's seeds: each file of the tiny run's output directory that the target replaces (of the
// two safetensors files, the header, which the target writes over theirs), and the sampler state and
// the metadata of its training_state.safetensors, behind the byte that picks it.
static void write_resume_seeds(fat5_ctx *ctx, const char *out) {
    char run[1024], p[1200], name[32], mode;
    fat5_st_file *f = NULL;
    int i;
    snprintf(run, sizeof run, "%s/resume_run", out);
    fuzz_rmtree(run);
    mkdir_p(run);
    if (fuzz_run_train(ctx, run) != 0) die(fat5_last_error(ctx), run);
    for (i = 0; i < FUZZ_RESUME_N; i++) {   // the small files whole, the safetensors' headers to overwrite
        size_t len, keep;
        char *b;
        int large = i == FUZZ_RESUME_STATE || i == FUZZ_RESUME_MODEL;
        mode = (char)(i | (large ? FUZZ_RESUME_OVERLAY : 0));
        snprintf(name, sizeof name, "mode%d", i);
        if (!fuzz_resume_files[i]) continue;
        snprintf(p, sizeof p, "%s/%s", run, fuzz_resume_files[i]);
        if (!(b = fuzz_read(p, &len))) die("cannot read", p);
        keep = len;
        if (large) {   // the 8-byte header length and the JSON header
            uint64_t h = 0;
            int j;
            for (j = 7; j >= 0 && len >= 8; j--) h = h << 8 | (unsigned char)b[j];
            if (len < 8 || h > len - 8) die("not a safetensors file", p);
            keep = 8 + (size_t)h;
        }
        put(out, "resume", name, &mode, 1, b, keep);
        free(b);
    }
    snprintf(p, sizeof p, "%s/%s", run, fuzz_resume_files[FUZZ_RESUME_STATE]);
    if (fat5_st_load(ctx, p, &f) != FAT5_OK) die(fat5_last_error(ctx), p);
    {
        FILE *o;
        snprintf(p, sizeof p, "%s/corpus_resume/mode%d", out, FUZZ_RESUME_META);
        if (!(o = fopen(p, "wb")) || fputc(FUZZ_RESUME_META, o) == EOF) die("cannot write", p);
        for (i = 0; i < fat5_st_metadata_count(f); i++) {
            const char *k = NULL, *v = NULL;
            fat5_st_metadata_get(f, i, &k, &v);
            if (fwrite(k, 1, strlen(k) + 1, o) != strlen(k) + 1 || fwrite(v, 1, strlen(v) + 1, o) != strlen(v) + 1)
                die("cannot write", p);
            if (!strcmp(k, "sampler")) {
                mode = FUZZ_RESUME_SAMPLER;
                snprintf(name, sizeof name, "mode%d", FUZZ_RESUME_SAMPLER);
                put(out, "resume", name, &mode, 1, v, strlen(v));
            }
        }
        if (fclose(o) != 0) die("cannot write", p);
    }
    fat5_st_destroy(f);
    fuzz_rmtree(run);
}

// fuzz_pairs's seeds: the form byte (fuzz_pairs.c: 0 JSONL, 1 TSV, 2 CSV, 4 a configured format
// with fields src / tgt, 5 parallel files), then small files of each form, quoting and escapes
// included
static void write_pairs_seeds(const char *out) {
    static const struct {
        char form;
        const char *name, *text;
    } seeds[] = {
        {0, "jsonl", "{\"input\": \"define: cat (noun)\", \"target\": \"a small feline\"}\n"
                     "{\"input\": \"caf\\u00e9 \\\"x\\\"\", \"target\": \"line\\nbreak\", \"extra\": 1}\r\n\n"},
        {1, "tsv_header", "input\ttarget\nhello\tworld\nsecond row\ttarget text\n"},
        {1, "tsv_plain", "a\tb\r\nc\td"},
        {2, "csv", "input,target\n\"a, quoted\",\"say \"\"hi\"\"\"\n\"multi\nline\",x\r\n"},
        {4, "configured", "src,tgt,other\nsome input text,t,3\n"},
        {5, "parallel", "first input\nsecond input\n" FUZZ_FILE_SPLIT "first target\nsecond target\n"},
    };
    size_t i;
    for (i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char form = seeds[i].form;
        if (form == 4) form = (char)(4 + 6 * 5);   // 34: form 4, CSV (1 + (34 >> 4) % 3 = 3)
        put(out, "pairs", seeds[i].name, &form, 1, seeds[i].text, strlen(seeds[i].text));
    }
}

// fuzz_tasks's seeds: the task byte (fuzz_tasks.c: task = b % 3, 8: the t5 classifier, 16: a label
// file first), then rows of each task
static void write_task_seeds(const char *out) {
    static const struct {
        char form;
        const char *name, *text;
    } seeds[] = {
        {0, "classify", "{\"text\": \"the red one\", \"label\": \"colour\"}\n{\"text\": \"a cat\", \"label\": \"animal\"}\n"
                        "{\"text\": \"the dog\", \"label\": \"animal\"}\n{\"text\": \"blue\", \"label\": \"colour\"}\n"},
        {8, "classify_t5_multi", "{\"text\": \"x\", \"label\": [\"a\", \"b\"]}\n{\"text\": \"y\", \"label\": [\"b\"]}\n"
                                 "{\"text\": \"z\", \"label\": []}\n{\"text\": \"w\", \"label\": [\"a\"]}\n"},
        {0, "regression", "{\"text\": \"x\", \"label\": 0.5}\n{\"text\": \"y\", \"label\": -1.25}\n"
                          "{\"text\": \"z\", \"label\": 2}\n{\"text\": \"w\", \"label\": 0.1}\n"},
        {16, "classify_labels", "colour\nanimal\n" FUZZ_FILE_SPLIT "{\"text\": \"red\", \"label\": \"colour\"}\n"
                                "{\"text\": \"cat\", \"label\": 1}\n{\"text\": \"dog\", \"label\": \"animal\"}\n"},
        {1, "tokens", "{\"tokens\": [\"Ann\", \"met\", \"Bob\"], \"ner_tags\": [\"B-PER\", \"O\", \"B-PER\"]}\n"
                      "{\"tokens\": [\"caf\u00e9\"], \"ner_tags\": [\"O\"]}\n{\"tokens\": [], \"ner_tags\": []}\n"
                      "{\"tokens\": [\"x\", \"y\"], \"ner_tags\": [0, 1]}\n"},
        {2, "qa", "{\"question\": \"who?\", \"context\": \"Ann met Bob\", \"answers\": {\"text\": [\"Bob\"], "
                  "\"answer_start\": [8]}}\n{\"question\": \"q\", \"context\": \"caf\u00e9 Zo\u00eb\", \"answers\": "
                  "{\"text\": [\"Zo\u00eb\"], \"answer_start\": [5]}}\n"},
    };
    size_t i;
    for (i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        put(out, "tasks", seeds[i].name, &seeds[i].form, 1, seeds[i].text, strlen(seeds[i].text));
}

// fuzz_config's seeds of the heads: config.json files transformers writes for the head classes
// (tests/data/heads_configs, beside FUZZ_DATA_DIR's fixture)
static void write_head_configs(const char *out) {
    static const char *const files[] = {"T5ForTokenClassification_unicode", "UMT5ForSequenceClassification_multi4",
                                        "Fat5EncoderForSequenceClassification_mean", "MT5EncoderModel",
                                        "T5ForQuestionAnswering"};
    char name[300];
    size_t i, len;
    for (i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *text;
        snprintf(name, sizeof name, "%s.json", files[i]);
        text = slurp(FUZZ_DATA_DIR "/../heads_configs", name, &len);
        snprintf(name, sizeof name, "head_%s", files[i]);
        put(out, "config", name, text, len, NULL, 0);
        free(text);
    }
}

// fuzz_toktrain's seeds: the byte (fuzz_toktrain.c: kind = b % 3, form = (b / 3) % 4, the rest the
// vocabulary, sentinels and normaliser), then a small corpus of each form
static void write_toktrain_seeds(const char *out) {
    static const struct {
        char b;
        const char *name, *text;
    } seeds[] = {
        {0, "unigram_text", "the cat sat on the mat\nthe dog sat on the log\ncats and dogs\n\xC3\xA9t\xC3\xA9 caf\xC3\xA9\n"},
        {4, "bpe_fortune", "%\nA fortune.\nWith two lines.\n%\nAnother fortune, another day.\n%\n"},
        {8, "bytebpe_jsonl", "{\"text\": \"hello world\"}\n{\"text\": \"hello there\\nworld\", \"id\": 2}\n"},
        {9, "unigram_field", "{\"t\": \"some text here\"}\n{\"t\": \"more text\"}\n"},
        {2, "bytebpe_digits", "12345 67890 3.14159\ttabs\there\n\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\n"},
    };
    size_t i;
    for (i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        put(out, "toktrain", seeds[i].name, &seeds[i].b, 1, seeds[i].text, strlen(seeds[i].text));
}

int main(int argc, char **argv) {
    static const char *const corpora[] = {"safetensors", "config", "batch", "model_dir", "index", "tokenizer",
                                          "generation_config", "tokens", "tokenizer_dir", "resume", "pairs", "tasks",
                                          "toktrain"};
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    char p[1024];
    int i;
    if (argc < 3) {
        fprintf(stderr, "usage: make_seeds OUT_DIR FIXTURE_DIR...\n");
        return 2;
    }
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) die("out of memory", "");
    mkdir_p(argv[1]);
    for (i = 0; i < (int)(sizeof corpora / sizeof corpora[0]); i++) {
        snprintf(p, sizeof p, "%s/corpus_%s", argv[1], corpora[i]);
        mkdir_p(p);
    }
    for (i = 2; i < argc; i++) {
        const char *dir = argv[i], *base = strrchr(dir, '/');
        char name[300];
        size_t clen, mlen, rlen, blen;
        char *config = slurp(dir, "config.json", &clen), *model = slurp(dir, "model.safetensors", &mlen);
        char *ref = slurp_opt(dir, "reference.safetensors", &rlen), *batch = slurp_opt(dir, "batch.json", &blen);
        base = base && base[1] ? base + 1 : dir;
        snprintf(name, sizeof name, "%s.model", base);
        put(argv[1], "safetensors", name, model, mlen, NULL, 0);
        snprintf(name, sizeof name, "%s.reference", base);
        if (ref) put(argv[1], "safetensors", name, ref, rlen, NULL, 0);
        put(argv[1], "config", base, config, clen, NULL, 0);
        if (batch) put(argv[1], "batch", base, batch, blen, NULL, 0);
        put(argv[1], "model_dir", base, config, clen, FUZZ_SPLIT, sizeof FUZZ_SPLIT - 1);
        snprintf(p, sizeof p, "%s/corpus_model_dir/%s", argv[1], base);
        {
            FILE *f = fopen(p, "ab");
            if (!f || fwrite(model, 1, mlen, f) != mlen || fclose(f) != 0) die("cannot write", p);
        }
        write_generate_options(argv[1], dir, base);
        free(config);
        free(model);
        free(ref);
        free(batch);
    }
    write_index(ctx, argv[1], FUZZ_DATA_DIR);
    {   // tokenizer files (the small ones), behind the byte that says which kind
        static const char *const toks[] = {"mt5bf/spiece.model", "spmbpe/spiece.model", "mt5bf/tokenizer.json",
                                           "spmbpe/tokenizer.json", "bytebpe/tokenizer.json", "uniseq/tokenizer.json"};
        for (i = 0; i < 6; i++) {
            char dir[1024], name[64], kind = (char)(strstr(toks[i], ".json") ? 1 : 0), *s;
            size_t len;
            snprintf(dir, sizeof dir, "%s/../tokenizers", FUZZ_DATA_DIR);
            s = slurp(dir, toks[i], &len);
            snprintf(name, sizeof name, "tok%d", i);
            put(argv[1], "tokenizer", name, &kind, 1, s, len);
            free(s);
        }
    }
    write_generation_cases(argv[1]);
    write_head_configs(argv[1]);
    write_token_seeds(ctx, argv[1]);
    write_tokenizer_dirs(argv[1]);
    write_resume_seeds(ctx, argv[1]);
    write_pairs_seeds(argv[1]);
    write_task_seeds(argv[1]);
    write_toktrain_seeds(argv[1]);
    fat5_ctx_destroy(ctx);
    return 0;
}
