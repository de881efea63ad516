// make_seeds.c — writes the seed corpora of the fuzz targets from the fixtures in tests/data.
//     make_seeds OUT_DIR FIXTURE_DIR...
// creates OUT_DIR/corpus_<target>/ for every target: the fixtures' model.safetensors and
// reference.safetensors (safetensors), config.json (config), batch.json (batch), config.json +
// FUZZ_SPLIT + model.safetensors (model_dir), and a model.safetensors.index.json generated for
// the two-shard split of FUZZ_DATA_DIR that fuzz_index writes (index), and the small tokenizer
// fixtures of tests/data/tokenizers behind their kind byte (tokenizer).
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

int main(int argc, char **argv) {
    static const char *const corpora[] = {"safetensors", "config", "batch", "model_dir", "index", "tokenizer"};
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
    for (i = 0; i < 6; i++) {
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
    fat5_ctx_destroy(ctx);
    return 0;
}
