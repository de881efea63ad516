// fat5_inspect — print what a checkpoint holds.
//     cc -O2 -o tools/fat5_inspect tools/fat5_inspect.c -lm -ldl -lpthread
//     tools/fat5_inspect DIR               a Hugging Face directory: config, tensor table, metadata
//     tools/fat5_inspect FILE.safetensors  one file: tensor table and metadata
//     tools/fat5_inspect --help | --version
// Exits 1 with a one-line reason on a bad file.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// The character at s: its length when it may be printed as it is, 0 for a control character (C0,
// DEL, or C1 U+0080..U+009F, which some terminals obey too) or a byte that is not valid UTF-8
// (overlong forms, surrogates, code points above U+10FFFF); *skip gets the bytes it spans (1 for
// an invalid byte).
static size_t clean_char(const char *s, size_t *skip) {
    unsigned char c = (unsigned char)s[0], lo = 0x80, hi = 0xBF;
    size_t k, j;
    *skip = 1;
    if (c < 0x20 || c == 0x7f) return 0;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    for (j = 1; j < k; j++) {   // the NUL ending s is no continuation byte: never read past it
        unsigned char b = (unsigned char)s[j];
        if (b < (j == 1 ? lo : 0x80) || b > (j == 1 ? hi : 0xBF)) return 0;
    }
    *skip = k;
    return k == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0 ? 0 : k;
}

// s with every control character or invalid byte written as \xHH, so a name or value taken from
// the file cannot drive the terminal
static void print_clean(const char *s) {
    size_t skip, k, j;
    for (; *s; s += skip) {
        k = clean_char(s, &skip);
        if (k) fwrite(s, 1, k, stdout);
        else
            for (j = 0; j < skip; j++) printf("\\x%02X", (unsigned)(unsigned char)s[j]);
    }
}

// A tensor name fit for one line of the table or a message: each control character or invalid
// byte as one '?', at most cap - 1 bytes, cut on a character boundary with "..." (cap >= 8).
static const char *clean_name(char *buf, size_t cap, const char *s) {
    size_t i = 0, skip;
    for (; *s; s += skip) {
        size_t k = clean_char(s, &skip), n = k ? k : 1;
        if (n > cap - 1 - i) break;
        if (k) memcpy(buf + i, s, k);
        else buf[i] = '?';
        i += n;
    }
    if (*s) {   // cut: room for "..." without splitting a character
        while (i > cap - 4) {
            do i--;
            while (i > 0 && ((unsigned char)buf[i] & 0xC0) == 0x80);
        }
        memcpy(buf + i, "...", 3);
        i += 3;
    }
    buf[i] = 0;
    return buf;
}

// element count of t: 0 when a dimension is 0 (whatever the others), else the product, checked;
// 0 returned on overflow (never for a file fat5_st_load accepted: its data holds every element)
static int tensor_numel(const fat5_st_tensor *t, int64_t *out) {
    int64_t n = 1;
    int d;
    *out = 0;
    for (d = 0; d < t->ndim; d++)
        if (t->shape[d] == 0) return 1;
    for (d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || n > INT64_MAX / t->shape[d]) return 0;
        n *= t->shape[d];
    }
    *out = n;
    return 1;
}

// the metadata and tensor table of f; 1 (reported on stderr) when an element count overflows
static int print_st(fat5_st_file *f, const char *path, int64_t *total) {
    int i, d;
    printf("file %s: %d tensors\n", path, fat5_st_tensor_count(f));
    for (i = 0; i < fat5_st_metadata_count(f); i++) {
        const char *k, *v;
        fat5_st_metadata_get(f, i, &k, &v);
        printf("  metadata ");
        print_clean(k);
        printf(" = ");
        print_clean(v);
        printf("\n");
    }
    for (i = 0; i < fat5_st_tensor_count(f); i++) {
        const fat5_st_tensor *t = fat5_st_get(f, i);
        int64_t n;
        char shape[256], name[256];
        int o = 0;
        shape[0] = 0;
        for (d = 0; d < t->ndim; d++) {
            o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
            if (o >= (int)sizeof shape) o = (int)sizeof shape - 1;
        }
        if (!tensor_numel(t, &n) || n > INT64_MAX - *total) {
            fprintf(stderr, "fat5_inspect: %s: tensor '%s': element count overflows\n", path,
                    clean_name(name, sizeof name, t->name));
            return 1;
        }
        *total += n;
        printf("  %-72s %-5s [%s]\n", clean_name(name, sizeof name, t->name), fat5_st_dtype_name(t->dtype),
               shape);
    }
    return 0;
}

// 1 with the reason in the context, 2 reported already
static int print_file(fat5_ctx *ctx, const char *path, int64_t *total) {
    fat5_st_file *f = NULL;
    int rc;
    if (fat5_st_load(ctx, path, &f) != FAT5_OK) return 1;
    rc = print_st(f, path, total) ? 2 : 0;
    fat5_st_destroy(f);
    return rc;
}

// every weight file of the directory (model.safetensors, or each shard the index names, in name
// order); 1 with the reason in the context, 2 reported
static int print_weights(fat5_ctx *ctx, const char *dir, int64_t *total) {
    char p[4200], *names = NULL;
    const char *name;
    size_t len = 0;
    int i, n = 0, rc = 0;
    if (fat5_model_weight_files(ctx, dir, &names, &len, &n) != FAT5_OK) return 1;
    for (i = 0, name = names; i < n && !rc; i++, name += strlen(name) + 1) {
        fat5_st_file *f = NULL;
        char title[64];
        snprintf(p, sizeof p, "%s/%s", dir, name);
        if (n == 1) {
            rc = print_file(ctx, p, total);
            continue;
        }
        if (fat5_st_load(ctx, p, &f) != FAT5_OK) {
            rc = 1;
            break;
        }
        snprintf(title, sizeof title, "shard %d of %d", i + 1, n);
        if (print_st(f, title, total)) rc = 2;
        fat5_st_destroy(f);
    }
    fat5_free(ctx, names);
    return rc;
}

int main(int argc, char **argv) {
    fat5_ctx *ctx = NULL;
    fat5_ctx_config cc = fat5_ctx_config_default();
    struct stat st;
    int64_t total = 0;
    int rc = 0, o;
    const char *path = NULL;
    cli c;
    cli_init(&c, "fat5_inspect", "usage: fat5_inspect DIR | FILE.safetensors\n"
             "Prints what a checkpoint holds: a Hugging Face directory's config, tensor table and metadata,\n"
             "or one safetensors file's tensor table and metadata. Exits 1 with a one-line reason on a bad file.\n",
             NULL, 0, argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) return cli_status(o);
        if (path) return cli_status(cli_fail(&c, "'%s': one DIR or FILE only", c.val));
        path = c.val;
    }
    if (!path) return cli_status(cli_fail(&c, "no DIR or FILE (usage: fat5_inspect DIR | FILE.safetensors)"));
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) {
        fprintf(stderr, "fat5_inspect: out of memory\n");
        return 1;
    }
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fat5_inspect: %s: no such file or directory\n", path);
        fat5_ctx_destroy(ctx);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        // the whole model: load validates config, names, shapes and dtypes together
        fat5_model *m = NULL;
        const fat5_model_config *c;
        char *json = NULL;
        size_t len;
        if (fat5_model_load(ctx, path, &m) != FAT5_OK) {
            fprintf(stderr, "fat5_inspect: %s\n", fat5_last_error(ctx));
            fat5_ctx_destroy(ctx);
            return 1;
        }
        c = fat5_model_get_config(m);
        printf("model %s: %s, %lld parameters\n", path, c->model_type, (long long)fat5_model_param_count(m));
        printf("  d_model %lld, d_kv %lld, heads %lld, d_ff %lld, layers %lld + %lld, vocab %lld\n",
               (long long)c->d_model, (long long)c->d_kv, (long long)c->num_heads, (long long)c->d_ff,
               (long long)c->num_layers, (long long)c->num_decoder_layers, (long long)c->vocab_size);
        printf("  buckets %lld, max distance %lld, FFN %s%s, lm_head %s, decoder output %s\n",
               (long long)c->rel_buckets, (long long)c->rel_max_distance, c->gated ? "gated-" : "",
               c->act == FAT5_ACT_RELU ? "relu" : c->act == FAT5_ACT_GELU ? "gelu" :
               c->act == FAT5_ACT_GELU_TANH ? "gelu_new" : "silu",
               c->tie_word_embeddings ? "tied to shared" : "untied",
               c->scale_decoder_outputs ? "scaled by d_model^-0.5" : "unscaled");
        if (fat5_model_config_to_json(ctx, c, &json, &len) == FAT5_OK) {
            printf("config as fat5 writes it:\n%s", json);
            fat5_free(ctx, json);
        }
        fat5_model_destroy(m);
        rc = print_weights(ctx, path, &total);
    } else {
        rc = print_file(ctx, path, &total);
    }
    if (rc == 1) fprintf(stderr, "fat5_inspect: %s\n", fat5_last_error(ctx));   // 2: reported already
    else if (rc == 0) printf("%lld elements\n", (long long)total);
    fat5_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
