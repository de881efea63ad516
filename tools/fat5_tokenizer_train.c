// fat5_tokenizer_train — trains a tokenizer on text files (fat5_tokenizer_train) and writes a
// checkpoint's tokenizer directory: tokenizer.json, spiece.model (Unigram), tokenizer_config.json,
// special_tokens_map.json.
//     cc -std=c99 -O2 -o tools/fat5_tokenizer_train tools/fat5_tokenizer_train.c -lm -ldl -lpthread
//     tools/fat5_tokenizer_train --input corpus.txt --model_prefix out/tok --vocab_size 8000
//     tools/fat5_tokenizer_train --model_type bpe --byte_level corpus.jsonl -o out/bpe
// Options carry sentencepiece's spm_train names (--input, --model_prefix, --vocab_size,
// --character_coverage, --input_sentence_size, --normalization_rule_name, --byte_fallback, ...) and
// tokenizers' BpeTrainer's (--min_frequency, --limit_alphabet, --max_token_length); --model_prefix
// (or -o / --output_dir) names the directory written. Inputs: --input with comma-separated paths
// and/or positional paths; each a text file (a sentence a line), a fortune file (documents
// between "%" lines) or JSON Lines (.jsonl: the "text" field, --jsonl_field).
// Prints one JSON line on standard output at the end: the report (sentences, alphabet, pieces,
// seconds, peak memory); a progress line on standard error every few seconds unless --quiet.
// Exits 1 with a one-line reason on an error (naming the file and line), 2 on a usage error.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    O_INPUT = 1, O_OUT, O_TYPE, O_VOCAB, O_EXTRA, O_FORMAT, O_FIELD, O_ISS, O_SHUFFLE, O_MSL, O_SEED, O_THREADS,
    O_QUIET, O_COVERAGE, O_MSPL, O_SEEDSIZE, O_SHRINK, O_SUBITER, O_NORM, O_DUMMY, O_EXTRA_WS, O_SPLIT_WS,
    O_SPLIT_SCRIPT, O_SPLIT_NUM, O_SPLIT_DIGITS, O_BYTE_FALLBACK, O_USER, O_CONTROL, O_PAD, O_EOS, O_UNK, O_BOS,
    O_BYTE_LEVEL, O_MIN_FREQ, O_LIMIT_ALPHA, O_MAX_TOKEN_LEN, O_S1, O_S2, O_S3
};
static const cli_opt opts[] = {
    {.id = O_S1, .kind = CLI_SECTION, .help = "corpus and output"},
    {.id = O_INPUT, .name = "input", .alias = "files", .kind = CLI_STR, .meta = "FILE[,FILE...]",
     .help = "text, fortune or JSON Lines files (also as positional arguments)"},
    {.id = O_OUT, .name = "model-prefix", .alias = "-o output output-dir", .kind = CLI_STR, .meta = "DIR",
     .help = "the directory written (tokenizer.json, spiece.model, tokenizer_config.json, ...)"},
    {.id = O_TYPE, .name = "model-type", .kind = CLI_CHOICE, .def = "unigram", .choices = "unigram|bpe",
     .help = "unigram: SentencePiece's trainer; bpe: tokenizers' BpeTrainer"},
    {.id = O_VOCAB, .name = "vocab-size", .kind = CLI_INT, .def = "8000", .lo = 1, .hi = 16777216,
     .help = "the model's pieces, special pieces included (the sentinels come on top)"},
    {.id = O_EXTRA, .name = "extra-ids", .kind = CLI_INT, .def = "100", .lo = 0, .hi = 100000,
     .help = "T5's <extra_id_N> sentinels appended (the highest ids)"},
    {.id = O_FORMAT, .name = "input-format", .kind = CLI_CHOICE, .choices = "text|fortune|jsonl",
     .help = "every input's format (default: .jsonl/.json -> jsonl, % separators -> fortune, else text)"},
    {.id = O_FIELD, .name = "jsonl-field", .alias = "text-field", .kind = CLI_STR, .def = "text",
     .help = "jsonl: the string field read"},
    {.id = O_ISS, .name = "input-sentence-size", .kind = CLI_INT, .def = "1000000", .lo = 0, .hi = 1e15,
     .help = "sentences trained on, a uniform sample (0: all)"},
    {.id = O_SHUFFLE, .name = "shuffle-input-sentence", .kind = CLI_FLAG, .def = "true",
     .help = "sample uniformly (false: the first sentences)"},
    {.id = O_MSL, .name = "max-sentence-length", .kind = CLI_INT, .def = "4192", .lo = 0, .hi = 1e12,
     .help = "longer sentences (bytes) are skipped (0: no limit)"},
    {.id = O_SEED, .name = "seed", .alias = "random-seed", .kind = CLI_INT, .def = "0", .lo = 0, .hi = 9e15,
     .help = "the sampling seed"},
    {.id = O_THREADS, .name = "num-threads", .kind = CLI_INT, .def = "0", .lo = 0, .hi = 256,
     .help = "worker threads (0: the machine's cores)"},
    {.id = O_QUIET, .name = "quiet", .kind = CLI_FLAG, .help = "no progress lines"},
    {.id = O_S2, .kind = CLI_SECTION, .help = "Unigram (spm_train)"},
    {.id = O_COVERAGE, .name = "character-coverage", .kind = CLI_NUM, .def = "0.9995", .lo = 0, .hi = 1, .lo_open = 1,
     .help = "share of the characters the alphabet covers"},
    {.id = O_MSPL, .name = "max-sentencepiece-length", .kind = CLI_INT, .def = "16", .lo = 1, .hi = 512,
     .help = "characters of a piece"},
    {.id = O_SEEDSIZE, .name = "seed-sentencepiece-size", .kind = CLI_INT, .def = "1000000", .lo = 1, .hi = 1e12,
     .help = "seed pieces from the suffix array"},
    {.id = O_SHRINK, .name = "shrinking-factor", .kind = CLI_NUM, .def = "0.75", .lo = 0, .hi = 0.9999, .lo_open = 1,
     .help = "pieces kept by each pruning"},
    {.id = O_SUBITER, .name = "num-sub-iterations", .kind = CLI_INT, .def = "2", .lo = 1, .hi = 100,
     .help = "EM rounds between prunings"},
    {.id = O_NORM, .name = "normalization-rule-name", .kind = CLI_CHOICE, .def = "nmt_nfkc",
     .choices = "nmt_nfkc|nfkc|identity", .help = "the normaliser (bpe: nfkc rules give NFKC)"},
    {.id = O_DUMMY, .name = "add-dummy-prefix", .kind = CLI_FLAG, .def = "true", .help = "a space before each text"},
    {.id = O_EXTRA_WS, .name = "remove-extra-whitespaces", .kind = CLI_FLAG, .def = "true",
     .help = "leading, trailing and repeated spaces dropped"},
    {.id = O_SPLIT_WS, .name = "split-by-whitespace", .kind = CLI_FLAG, .def = "true",
     .help = "pieces do not cross spaces"},
    {.id = O_SPLIT_SCRIPT, .name = "split-by-unicode-script", .kind = CLI_FLAG, .def = "true",
     .help = "pieces do not cross a change of script"},
    {.id = O_SPLIT_NUM, .name = "split-by-number", .kind = CLI_FLAG, .def = "true",
     .help = "pieces do not cross a digit boundary"},
    {.id = O_SPLIT_DIGITS, .name = "split-digits", .kind = CLI_FLAG, .help = "every digit its own piece"},
    {.id = O_BYTE_FALLBACK, .name = "byte-fallback", .kind = CLI_FLAG,
     .help = "<0x00>..<0xFF> pieces for characters out of the vocabulary"},
    {.id = O_USER, .name = "user-defined-symbols", .kind = CLI_STR, .meta = "A,B,...",
     .help = "pieces always kept whole, matched in the text"},
    {.id = O_CONTROL, .name = "control-symbols", .alias = "special-tokens", .kind = CLI_STR, .meta = "A,B,...",
     .help = "special pieces never produced from text"},
    {.id = O_PAD, .name = "pad-id", .kind = CLI_INT, .def = "0", .lo = -1, .hi = 3, .help = "<pad> (-1: none)"},
    {.id = O_EOS, .name = "eos-id", .kind = CLI_INT, .def = "1", .lo = -1, .hi = 3, .help = "</s> (-1: none)"},
    {.id = O_UNK, .name = "unk-id", .kind = CLI_INT, .def = "2", .lo = 0, .hi = 3, .help = "<unk>"},
    {.id = O_BOS, .name = "bos-id", .kind = CLI_INT, .def = "-1", .lo = -1, .hi = 3, .help = "<s> (-1: none)"},
    {.id = O_S3, .kind = CLI_SECTION, .help = "BPE (tokenizers' BpeTrainer)"},
    {.id = O_BYTE_LEVEL, .name = "byte-level", .kind = CLI_FLAG, .help = "GPT-2's byte-level words and alphabet"},
    {.id = O_MIN_FREQ, .name = "min-frequency", .kind = CLI_INT, .def = "0", .lo = 0, .hi = 1e15,
     .help = "a merge needs its pair seen this often"},
    {.id = O_LIMIT_ALPHA, .name = "limit-alphabet", .kind = CLI_INT, .def = "0", .lo = 0, .hi = 1e9,
     .help = "characters kept, most frequent first (0: all)"},
    {.id = O_MAX_TOKEN_LEN, .name = "max-token-length", .kind = CLI_INT, .def = "0", .lo = 0, .hi = 1e6,
     .help = "characters of a merged token (0: no limit)"},
};

// "a,b,c" -> a list of strings (the text is split in place); NULL when out of memory
static const char **split_list(char *s, int *n) {
    const char **v;
    int k = 1, i = 0;
    char *p;
    for (p = s; *p; p++) k += *p == ',';
    v = (const char **)malloc((size_t)k * sizeof *v);
    if (!v) return NULL;
    for (p = s;;) {
        char *e = strchr(p, ',');
        if (e) *e = 0;
        if (*p) v[i++] = p;
        if (!e) break;
        p = e + 1;
    }
    *n = i;
    return v;
}

int main(int argc, char **argv) {
    fat5_tokenizer_train_config c = fat5_tokenizer_train_config_default();
    fat5_tokenizer_train_report rep;
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    const char **files = NULL, **inl = NULL;
    char *inputs = NULL, *users = NULL, *controls = NULL;
    const char *out = NULL;
    int n_files = 0, n_in = 0, o, i, rc = 1;
    cli cl;
    cli_init(&cl, "fat5_tokenizer_train",
             "usage: fat5_tokenizer_train [options] --model_prefix DIR [--input FILE,...] [FILE...]\n"
             "Trains a Unigram (SentencePiece) or BPE (tokenizers) tokenizer on text files and writes\n"
             "a checkpoint's tokenizer files into DIR.\n",
             opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    files = (const char **)calloc((size_t)argc + 1, sizeof *files);
    if (!files) return 1;
    while ((o = cli_next(&cl)) != CLI_END) {
        if (o < 0) return cli_status(o);
        switch (o) {
        case CLI_POS: files[n_files++] = cl.val; break;
        case O_INPUT: free(inputs); inputs = strdup(cl.val); break;
        case O_OUT: out = cl.val; break;
        case O_TYPE: c.model_type = cl.val; break;
        case O_VOCAB: c.vocab_size = cl.ival; break;
        case O_EXTRA: c.extra_ids = (int)cl.ival; break;
        case O_FORMAT: c.input_format = cl.val; break;
        case O_FIELD: c.jsonl_field = cl.val; break;
        case O_ISS: c.input_sentence_size = cl.ival; break;
        case O_SHUFFLE: c.shuffle_input_sentence = (int)cl.ival; break;
        case O_MSL: c.max_sentence_length = cl.ival; break;
        case O_SEED: c.seed = (uint64_t)cl.ival; break;
        case O_THREADS: c.num_threads = (int)cl.ival; break;
        case O_QUIET: c.verbose = !cl.ival; break;
        case O_COVERAGE: c.character_coverage = cl.dval; break;
        case O_MSPL: c.max_sentencepiece_length = (int)cl.ival; break;
        case O_SEEDSIZE: c.seed_sentencepiece_size = cl.ival; break;
        case O_SHRINK: c.shrinking_factor = cl.dval; break;
        case O_SUBITER: c.num_sub_iterations = (int)cl.ival; break;
        case O_NORM: c.normalization_rule_name = cl.val; break;
        case O_DUMMY: c.add_dummy_prefix = (int)cl.ival; break;
        case O_EXTRA_WS: c.remove_extra_whitespaces = (int)cl.ival; break;
        case O_SPLIT_WS: c.split_by_whitespace = (int)cl.ival; break;
        case O_SPLIT_SCRIPT: c.split_by_unicode_script = (int)cl.ival; break;
        case O_SPLIT_NUM: c.split_by_number = (int)cl.ival; break;
        case O_SPLIT_DIGITS: c.split_digits = (int)cl.ival; break;
        case O_BYTE_FALLBACK: c.byte_fallback = (int)cl.ival; break;
        case O_USER: free(users); users = strdup(cl.val); break;
        case O_CONTROL: free(controls); controls = strdup(cl.val); break;
        case O_PAD: c.pad_id = (int)cl.ival; break;
        case O_EOS: c.eos_id = (int)cl.ival; break;
        case O_UNK: c.unk_id = (int)cl.ival; break;
        case O_BOS: c.bos_id = (int)cl.ival; break;
        case O_BYTE_LEVEL: c.byte_level = (int)cl.ival; break;
        case O_MIN_FREQ: c.min_frequency = cl.ival; break;
        case O_LIMIT_ALPHA: c.limit_alphabet = cl.ival; break;
        case O_MAX_TOKEN_LEN: c.max_token_length = (int)cl.ival; break;
        default: break;
        }
    }
    if (inputs) {
        inl = split_list(inputs, &n_in);
        if (!inl) return 1;
        {
            const char **all = (const char **)realloc(files, (size_t)(n_files + n_in + 1) * sizeof *files);
            if (!all) return 1;
            files = all;
        }
        // --input's files first, then the positional ones
        memmove(files + n_in, files, (size_t)n_files * sizeof *files);
        for (i = 0; i < n_in; i++) files[i] = inl[i];
        n_files += n_in;
    }
    if (users && !(c.user_defined_symbols = split_list(users, &c.n_user_defined_symbols))) return 1;
    if (controls && !(c.control_symbols = split_list(controls, &c.n_control_symbols))) return 1;
    if (n_files == 0) return cli_status(cli_fail(&cl, "no input (--input FILE or FILE arguments; --help)"));
    if (!out) return cli_status(cli_fail(&cl, "no output directory (--model_prefix DIR; --help)"));
    cc.n_threads = c.num_threads;
    {
        char why[256];
        if (fat5_ctx_create(&cc, &ctx, why, sizeof why) != FAT5_OK) {
            fprintf(stderr, "fat5_tokenizer_train: %s\n", why);
            goto done;
        }
    }
    if (fat5_tokenizer_train(ctx, &c, files, n_files, out, &rep) != FAT5_OK) {
        const char *msg = fat5_last_error(ctx);   // the library's messages name the call or the file
        fprintf(stderr, "%s%s\n", strncmp(msg, "fat5_tokenizer_train:", 21) ? "fat5_tokenizer_train: " : "", msg);
        goto done;
    }
    printf("{\"toktrain\": \"%s\", \"output\": ", c.model_type);
    cli_json_put(stdout, out, strlen(out));
    printf(", \"vocab_size\": %lld, \"sentences_read\": %lld, \"sentences_used\": %lld, \"sentences_skipped\": %lld, "
           "\"bytes_used\": %lld, \"alphabet_size\": %lld, \"rounds\": %d, \"seconds\": %.3f, \"peak_bytes\": %lld}\n",
           (long long)rep.vocab_size, (long long)rep.sentences_read, (long long)rep.sentences_used,
           (long long)rep.sentences_skipped, (long long)rep.bytes_used, (long long)rep.alphabet_size, rep.rounds,
           rep.seconds, (long long)rep.peak_bytes);
    rc = 0;
done:
    fat5_ctx_destroy(ctx);
    free(files);
    free(inl);
    free(inputs);
    free(users);
    free(controls);
    free((void *)c.user_defined_symbols);
    free((void *)c.control_symbols);
    return rc;
}
