// libFuzzer target: token files (fat5_tokens_load), the pretokenized data tools/pretokenize writes
// and the trainer reads, and the UL2 sampler that draws batches from them. The input is a byte of
// sampler options, then one to four token files separated by FUZZ_FILE_SPLIT. The harness checks
// the files itself against the format of the declarations (header, size, ids below the vocabulary,
// last id an eos, files that agree): fat5_tokens_load must accept exactly the valid ones, with the
// id and document counts the harness finds. A valid first file written again by fat5_tokens_write
// must come out byte for byte the same. Then a sampler on the stream (any config error is fine)
// draws batches that must be well formed, and its state (fat5_ul2_get_state) must continue the
// same stream in a second sampler.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FILES 4

static uint64_t get_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    int i;
    for (i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

// The harness's reading of the format: 1 when every file is a valid token file and they agree,
// with the stream's id and document counts, vocabulary and eos id.
static int spec_valid(const uint8_t *const *f, const size_t *len, int n, int64_t *ids, int64_t *docs,
                      uint64_t *vocab, int64_t *eos) {
    int k;
    *ids = *docs = 0;
    for (k = 0; k < n; k++) {
        const uint8_t *b = f[k];
        uint64_t w, v, e, i, cnt;
        if (len[k] < 32 || memcmp(b, "FAT5TOK", 8) != 0 || get_le(b + 8, 4) != 1) return 0;
        w = get_le(b + 12, 4), v = get_le(b + 16, 8), e = get_le(b + 24, 4);
        if ((w != 2 && w != 4) || v == 0 || v > ((uint64_t)1 << 31) || e >= v || get_le(b + 28, 4) != 0) return 0;
        if (k > 0 && (v != *vocab || (int64_t)e != *eos)) return 0;
        if ((len[k] - 32) % w != 0 || len[k] == 32) return 0;
        cnt = (len[k] - 32) / w;
        for (i = 0; i < cnt; i++) {
            uint64_t id = get_le(b + 32 + i * w, (int)w);
            if (id >= v) return 0;
            if (id == e) (*docs)++;
        }
        if (get_le(b + len[k] - w, (int)w) != e) return 0;
        *vocab = v;
        *eos = (int64_t)e;
        *ids += (int64_t)cnt;
    }
    return 1;
}

// A valid file written again from its ids must be the same bytes.
static void check_rewrite(const uint8_t *b, size_t len) {
    int w = (int)get_le(b + 12, 4);
    int64_t v = (int64_t)get_le(b + 16, 8), n = (int64_t)((len - 32) / (size_t)w), i;
    int32_t eos = (int32_t)get_le(b + 24, 4), *ids;
    char path[1024], *back;
    size_t blen = 0;
    if (w == 2 && v > 65536) return;   // the writer's width 2 needs ids of any value below the vocabulary to fit
    if (!(ids = (int32_t *)malloc((size_t)n * sizeof *ids))) fuzz_die("malloc");
    for (i = 0; i < n; i++) ids[i] = (int32_t)get_le(b + 32 + i * w, w);
    fuzz_path(path, sizeof path, "rewrite.tokens");
    if (fat5_tokens_write(fuzz_ctx(), path, ids, n, v, eos, w) != FAT5_OK) fuzz_die("a valid file cannot be written");
    if (!(back = fuzz_read(path, &blen)) || blen != len || memcmp(back, b, len) != 0)
        fuzz_die("fat5_tokens_write wrote other bytes");
    free(back);
    free(ids);
}

// A drawn batch: sequences packed without padding within the budgets, every id in the vocabulary,
// each input and target ended by the eos id, no decoder input (the model shifts the labels).
static void check_batch(const fat5_batch *b, const fat5_ul2_config *u, int64_t V, int32_t eos) {
    int64_t s, i;
    if (b->n_seq < 1 || !b->enc_cu_seqlens || !b->dec_cu_seqlens || !b->enc_tokens || !b->labels || b->dec_tokens)
        fuzz_die("batch arrays");
    if (b->enc_cu_seqlens[0] != 0 || b->dec_cu_seqlens[0] != 0 || b->enc_cu_seqlens[b->n_seq] != b->n_enc_tokens ||
        b->dec_cu_seqlens[b->n_seq] != b->n_dec_tokens || b->n_enc_tokens > u->enc_tokens ||
        b->n_dec_tokens > u->dec_tokens)
        fuzz_die("batch sizes");
    for (s = 0; s < b->n_seq; s++) {
        int64_t e0 = b->enc_cu_seqlens[s], e1 = b->enc_cu_seqlens[s + 1];
        int64_t d0 = b->dec_cu_seqlens[s], d1 = b->dec_cu_seqlens[s + 1];
        if (e1 <= e0 || d1 <= d0) fuzz_die("an empty sequence");
        if (b->enc_tokens[e1 - 1] != eos || b->labels[d1 - 1] != eos) fuzz_die("a sequence without its eos");
    }
    for (i = 0; i < b->n_enc_tokens; i++)
        if (b->enc_tokens[i] < 0 || b->enc_tokens[i] >= V) fuzz_die("an input id outside the vocabulary");
    for (i = 0; i < b->n_dec_tokens; i++)
        if (b->labels[i] < 0 || b->labels[i] >= V) fuzz_die("a label outside the vocabulary");
}

static int same_batch(const fat5_batch *a, const fat5_batch *b) {
    return a->n_seq == b->n_seq && a->n_enc_tokens == b->n_enc_tokens && a->n_dec_tokens == b->n_dec_tokens &&
           !memcmp(a->enc_cu_seqlens, b->enc_cu_seqlens, (size_t)(a->n_seq + 1) * 4) &&
           !memcmp(a->dec_cu_seqlens, b->dec_cu_seqlens, (size_t)(a->n_seq + 1) * 4) &&
           !memcmp(a->enc_tokens, b->enc_tokens, (size_t)a->n_enc_tokens * 4) &&
           !memcmp(a->labels, b->labels, (size_t)a->n_dec_tokens * 4);
}

// The sampler options of the first byte: bit 0 the mixture (FAT5's seven denoisers or T5's one),
// bits 1-2 the split (0 all, 1 training, 2 held-out; 3 all), bit 3 mode tokens, bits 4-5 the
// budgets, bits 6-7 the seed. Sentinels from the top of the vocabulary, as the trainer sets them.
static fat5_ul2_config sampler_config(uint8_t o, int64_t V) {
    static const int64_t budget[4][2] = {{16, 16}, {48, 24}, {128, 64}, {512, 114}};
    fat5_ul2_config u = (o & 1) ? fat5_ul2_config_t5() : fat5_ul2_config_default();
    int i;
    u.split = ((o >> 1) & 3) % 3;
    u.eval_fraction = u.split ? 0.3 : 0.0;
    if (o & 8)
        for (i = 0; i < u.n_denoisers; i++) u.denoisers[i].mode_token = (int32_t)((2 + i) % V);
    u.enc_tokens = u.max_enc_len = budget[(o >> 4) & 3][0];
    u.dec_tokens = u.max_dec_len = budget[(o >> 4) & 3][1];
    u.seed = (uint64_t)(o >> 6);
    u.sentinel_first = (int32_t)(V - 1);
    u.n_sentinels = (int32_t)(V > 259 && V <= 1024 ? V - 259 : (V / 4 < 100 ? V / 4 : 100));
    return u;
}

// Whether document doc is in the split, by the rule of the declarations: held out iff
// splitmix64(doc ^ 0x6A09E667F3BCC908) / 2^64 < eval_fraction (its 53 high bits).
static int in_split(const fat5_ul2_config *u, int64_t doc) {
    uint64_t z = (uint64_t)doc ^ 0x6A09E667F3BCC908ull;
    int held;
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    held = (double)(z >> 11) / 9007199254740992.0 < u->eval_fraction;
    return u->split == 0 || (u->split == 2) == held;
}

// A sampler on the stream (doc_len: the ids of each document, eos excluded). A split whose
// documents are all empty gives no batch (an error); any other draws batches.
static void run_sampler(fat5_tokens *tk, uint8_t o, const int64_t *doc_len, int64_t n_docs) {
    fat5_ctx *ctx = fuzz_ctx();
    int64_t V = fat5_tokens_vocab_size(tk), d;
    int32_t eos = fat5_tokens_eos_id(tk);
    fat5_ul2_config u = sampler_config(o, V);
    fat5_ul2 *a = NULL, *b = NULL;
    fat5_batch ba, bb;
    char state[FAT5_UL2_STATE_CAP];
    int has_ids = 0;
    fat5_status st;
    if (fat5_ul2_create(ctx, &u, tk, &a) != FAT5_OK) {
        if (a) fuzz_die("a failed create returned a sampler");
        return;
    }
    for (d = 0; d < n_docs && !has_ids; d++) has_ids = doc_len[d] > 0 && in_split(&u, d);
    st = fat5_ul2_next_batch(a, &ba);
    if (!has_ids) {
        if (st == FAT5_OK) fuzz_die("a batch from a split without ids");
        fat5_ul2_destroy(a);
        return;
    }
    if (st != FAT5_OK) fuzz_die("next_batch failed");
    check_batch(&ba, &u, V, eos);
    if (fat5_ul2_get_state(a, state, sizeof state) != FAT5_OK) fuzz_die("get_state failed");
    if (memchr(state, 0, sizeof state) == NULL) fuzz_die("state not terminated");
    if (fat5_ul2_next_batch(a, &ba) != FAT5_OK) fuzz_die("next_batch failed");
    check_batch(&ba, &u, V, eos);
    if (fat5_ul2_create(ctx, &u, tk, &b) != FAT5_OK) fuzz_die("a second create failed");
    if (fat5_ul2_set_state(b, state) != FAT5_OK) fuzz_die("a sampler refuses its own state");
    if (fat5_ul2_next_batch(b, &bb) != FAT5_OK) fuzz_die("next_batch after set_state failed");
    if (!same_batch(&ba, &bb)) fuzz_die("the restored state draws another batch");
    if (fat5_ul2_next_batch(a, &ba) != FAT5_OK) fuzz_die("next_batch failed");
    check_batch(&ba, &u, V, eos);
    fat5_ul2_destroy(b);
    fat5_ul2_destroy(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[MAX_FILES];
    size_t len[MAX_FILES], pos = 1, plen;
    char names[MAX_FILES][1024];
    const char *paths[MAX_FILES];
    const uint8_t *p;
    int n = 0, valid;
    int64_t ids = 0, docs = 0, eos = 0;
    uint64_t vocab = 0;
    fat5_tokens *tk = NULL;
    fat5_status st;
    if (size < 1) return 0;
    while (n < MAX_FILES && (p = fuzz_next_part(data, size, FUZZ_FILE_SPLIT, &pos, &plen)) != NULL) {
        char name[32];
        part[n] = p;
        len[n] = plen;
        snprintf(name, sizeof name, "f%d.tokens", n);
        fuzz_path(names[n], sizeof names[n], name);
        fuzz_write(names[n], p, plen);
        paths[n] = names[n];
        n++;
    }
    valid = spec_valid(part, len, n, &ids, &docs, &vocab, &eos);
    st = fat5_tokens_load(fuzz_ctx(), paths, n, &tk);
    if ((st == FAT5_OK) != (tk != NULL)) fuzz_die("status and tokens disagree");
    if ((st == FAT5_OK) != valid) fuzz_die(valid ? "a valid token file refused" : "an invalid token file accepted");
    if (!tk) return 0;
    if (fat5_tokens_count(tk) != ids || fat5_tokens_doc_count(tk) != docs ||
        fat5_tokens_vocab_size(tk) != (int64_t)vocab || fat5_tokens_eos_id(tk) != eos)
        fuzz_die("counts differ from the files'");
    check_rewrite(part[0], len[0]);
    {   // the documents' lengths, in stream order
        int64_t *doc_len = (int64_t *)calloc((size_t)docs + 1, sizeof *doc_len), d = 0;
        int k;
        if (!doc_len) fuzz_die("calloc");
        for (k = 0; k < n; k++) {
            int w = (int)get_le(part[k] + 12, 4);
            size_t i;
            for (i = 32; i < len[k]; i += (size_t)w) {
                if ((int64_t)get_le(part[k] + i, w) == eos) d++;
                else doc_len[d]++;
            }
        }
        run_sampler(tk, data[0], doc_len, docs);
        free(doc_len);
    }
    fat5_tokens_destroy(tk);
    return 0;
}
