// libFuzzer target: pairs data (fat5_pairs_open / _next / _rewind). The first byte picks the form
// (JSONL, TSV, CSV by the file name; two parallel files split at FUZZ_FILE_SPLIT; a format given in
// the config with other field names, a prefix and small length limits); the rest is written as
// the file(s). Every row is read byte-level (ByT5 ids), then once more after a rewind: any refusal
// is fine, but a row the reader returns must be well formed (ids in 3 .. 258 or eos 1 last, within
// the limits, a target of at least one token, a positive line number, indices in order), and the
// second pass must return the same rows.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ROWS 4096   // rows read per pass at most (bad rows are skipped one call each)

static int ids_ok(const int32_t *ids, int64_t n, int64_t limit) {
    int64_t i;
    if (n < 1 || (limit > 0 && n > limit) || ids[n - 1] != 1) return 0;
    for (i = 0; i + 1 < n; i++)
        if (ids[i] < 3 || ids[i] > 258) return 0;
    return 1;
}

// Reads every row it can; sums the ids and line numbers into *sig (for the second pass to match).
static int64_t read_all(fat5_pairs *p, const fat5_pairs_config *cfg, uint64_t *sig) {
    int64_t rows = 0, calls, last_line = 0, last_index = -1;
    uint64_t h = 1469598103934665603ull;
    for (calls = 0; calls < MAX_ROWS; calls++) {
        fat5_pairs_row r;
        int has = 0;
        int64_t i;
        fat5_status st = fat5_pairs_next(p, NULL, &r, &has);
        if (st != FAT5_OK) {
            if (st != FAT5_ERR_FORMAT && st != FAT5_ERR_IO && st != FAT5_ERR_INVALID_ARG && st != FAT5_ERR_STATE &&
                st != FAT5_ERR_OUT_OF_MEMORY)
                fuzz_die("fat5_pairs_next: an unexpected status");
            continue;   // a bad row is skipped by the next call; a stopping error repeats
        }
        if (!has) break;
        if (!ids_ok(r.input_ids, r.n_input, cfg->max_source_length) ||
            !ids_ok(r.target_ids, r.n_target, cfg->max_target_length) || r.n_target < 1)
            fuzz_die("a row's ids are malformed");
        if (r.line < 1 || r.line < last_line || r.index <= last_index || r.input_cut < 0 || r.target_cut < 0)
            fuzz_die("a row's line, index or cut counts are out of order");
        if (!r.input_text || !r.target_text || strlen(r.target_text) != r.target_len ||
            memchr(r.input_text, 0, r.input_len))
            fuzz_die("a row's texts are malformed");
        last_line = r.line;
        last_index = r.index;
        for (i = 0; i < r.n_input; i++) h = (h ^ (uint64_t)r.input_ids[i]) * 1099511628211ull;
        for (i = 0; i < r.n_target; i++) h = (h ^ (uint64_t)r.target_ids[i]) * 1099511628211ull;
        h = (h ^ (uint64_t)r.line) * 1099511628211ull;
        rows++;
    }
    *sig = h;
    return rows;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[] = {"d.jsonl", "d.tsv", "d.csv", "d.txt"};
    fat5_ctx *ctx = fuzz_ctx();
    fat5_pairs_config cfg = fat5_pairs_config_default();
    fat5_pairs *p = NULL;
    char path[1024], path2[1024];
    size_t pos = 1, len = 0;
    const uint8_t *part;
    uint64_t s1 = 0, s2 = 0;
    int64_t n1, n2;
    int form;
    if (size < 1) return 0;
    form = data[0] % 6;
    if (form == 4) {   // a format set in the config, other names, a prefix and small limits
        cfg.format = (fat5_pairs_format)(1 + (data[0] >> 4) % 3);
        cfg.input_field = "src";
        cfg.target_field = "tgt";
        cfg.prefix = "summarize: ";
        cfg.max_source_length = 1 + (data[0] >> 3) % 9;
        cfg.max_target_length = 2 + (data[0] >> 5);
    }
    fuzz_path(path, sizeof path, form == 4 ? "d.data" : form == 5 ? "in.txt" : names[form]);
    if (form == 5) {
        part = fuzz_next_part(data, size, FUZZ_FILE_SPLIT, &pos, &len);
    } else {
        part = data + 1;
        len = size - 1;
    }
    fuzz_write(path, part, len);
    if (form == 5) {   // parallel files: the input lines, FUZZ_FILE_SPLIT, the target lines
        part = fuzz_next_part(data, size, FUZZ_FILE_SPLIT, &pos, &len);
        fuzz_path(path2, sizeof path2, "out.txt");
        fuzz_write(path2, part ? part : data, part ? len : 0);   // nothing left: an empty file
    }
    if (fat5_pairs_open(ctx, path, form == 5 ? path2 : NULL, &cfg, &p) != FAT5_OK) return 0;
    n1 = read_all(p, &cfg, &s1);
    if (fat5_pairs_rewind(p) == FAT5_OK) {
        n2 = read_all(p, &cfg, &s2);
        if (n1 != n2 || s1 != s2) fuzz_die("a rewind read other rows");
    }
    fat5_pairs_close(p);
    return 0;
}
