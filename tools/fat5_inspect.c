// fat5_inspect — print what a checkpoint holds.
//     cc -O2 -o tools/fat5_inspect tools/fat5_inspect.c -lm -ldl -lpthread
//     tools/fat5_inspect DIR               a Hugging Face directory: config, tensor table, metadata
//     tools/fat5_inspect FILE.safetensors  one file: tensor table and metadata
// Exits 1 with a one-line reason on a bad file.
#define FAT5_IMPLEMENTATION
#include "../fat5.h"

#include <errno.h>
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

// ---- the shard list of a model.safetensors.index.json ----
// fat5_model_load has read and checked the index before this runs (every shard a .safetensors
// file of the directory, every tensor where the index says); here only the distinct file names of
// its "weight_map" are wanted, in name order, as the loader opens them. A small JSON scanner:
// strings (with their escapes), and any other value skipped over.

static const char *js_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

static void js_put_utf8(char *out, size_t *n, unsigned long cp) {
    if (cp < 0x80) out[(*n)++] = (char)cp;
    else if (cp < 0x800) out[(*n)++] = (char)(0xC0 | (cp >> 6)), out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
        out[(*n)++] = (char)(0xE0 | (cp >> 12)), out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    else
        out[(*n)++] = (char)(0xF0 | (cp >> 18)), out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[(*n)++] = (char)(0x80 | (cp & 0x3F));
}

static int js_hex4(const char *p, unsigned long *v) {
    int i;
    *v = 0;
    for (i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (unsigned long)d;
    }
    return 1;
}

// The string at p (which is at its opening quote), decoded into a malloc'd copy when out is not
// NULL; returns the position after the closing quote, NULL when it is not a string.
static const char *js_string(const char *p, char **out) {
    const char *q;
    char *o = NULL;
    size_t n = 0;
    if (*p != '"') return NULL;
    for (q = p + 1; *q && *q != '"'; q++)
        if (*q == '\\' && !*++q) return NULL;
    if (*q != '"') return NULL;
    if (!out) return q + 1;
    if (!(o = (char *)malloc((size_t)(q - p) * 2 + 1))) return NULL;   // \uXXXX: 6 bytes, 3 of UTF-8
    for (p++; p < q; p++) {
        unsigned long cp, lo;
        if (*p != '\\') {
            o[n++] = *p;
            continue;
        }
        switch (*++p) {
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u':
            if (p + 4 >= q || !js_hex4(p + 1, &cp)) goto bad;
            p += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && p + 6 < q && p[1] == '\\' && p[2] == 'u' && js_hex4(p + 3, &lo) &&
                lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            }
            js_put_utf8(o, &n, cp);
            break;
        default: o[n++] = *p;   // \" \\ \/
        }
    }
    o[n] = 0;
    *out = o;
    return q + 1;
bad:
    free(o);
    return NULL;
}

// Skips the value at p (any JSON value); NULL when it is malformed.
static const char *js_skip(const char *p, int depth) {
    p = js_ws(p);
    if (*p == '"') return js_string(p, NULL);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        if (depth > 64) return NULL;
        p = js_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = js_string(js_ws(p), NULL))) return NULL;
                p = js_ws(p);
                if (*p++ != ':') return NULL;
            }
            if (!(p = js_skip(p, depth + 1))) return NULL;
            p = js_ws(p);
            if (*p == close) return p + 1;
            if (*p++ != ',') return NULL;
        }
    }
    if (!*p || strchr(",:}]", *p)) return NULL;
    while (*p && !strchr(" \t\r\n,:}]", *p)) p++;   // a number, true, false or null
    return p;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The distinct shard file names of the index text, sorted: *out (each and the array free'd by the
// caller), *n_out of them. 0 when the text is not what fat5_model_load accepted.
static int index_shards(const char *text, char ***out, int *n_out) {
    const char *p = js_ws(text);
    char **names = NULL, *key = NULL, *val = NULL;
    int n = 0, cap = 0, i, k;
    *out = NULL;
    *n_out = 0;
    if (*p++ != '{') return 0;
    for (p = js_ws(p); *p != '}';) {
        int wm;
        if (!(p = js_string(p, &key))) goto bad;
        wm = strcmp(key, "weight_map") == 0;
        free(key);
        key = NULL;
        p = js_ws(p);
        if (*p++ != ':') goto bad;
        p = js_ws(p);
        if (!wm) {
            if (!(p = js_skip(p, 0))) goto bad;
        } else {
            if (*p++ != '{') goto bad;
            for (p = js_ws(p); *p != '}';) {
                if (!(p = js_string(p, NULL))) goto bad;
                p = js_ws(p);
                if (*p++ != ':' || !(p = js_string(js_ws(p), &val))) goto bad;
                if (n == cap) {
                    char **nn = (char **)realloc(names, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *names);
                    if (!nn) goto bad;
                    names = nn;
                }
                names[n++] = val;
                val = NULL;
                p = js_ws(p);
                if (*p == ',') p = js_ws(p + 1);
                else if (*p != '}') goto bad;
            }
            p++;
        }
        p = js_ws(p);
        if (*p == ',') p = js_ws(p + 1);
        else if (*p != '}') goto bad;
    }
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (i = k = 0; i < n; i++) {
        if (k && strcmp(names[k - 1], names[i]) == 0) free(names[i]);
        else names[k++] = names[i];
    }
    *out = names;
    *n_out = k;
    return 1;
bad:
    for (i = 0; i < n; i++) free(names[i]);
    free(names);
    free(key);
    free(val);
    return 0;
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

// every shard of a model.safetensors.index.json, in name order; 1 with the reason in the
// context, 2 reported
static int print_shards(fat5_ctx *ctx, const char *dir, int64_t *total) {
    FILE *fp;
    char p[4200], *text = NULL, **shards = NULL;
    size_t len = 0, got;
    int i, n = 0, rc = 0;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (!(fp = fopen(p, "rb"))) {
        fprintf(stderr, "fat5_inspect: %s: cannot open: %s\n", p, strerror(errno));
        return 2;
    }
    do {   // the loader read it whole already (it bounds it at 64 MiB)
        char *nt = (char *)realloc(text, len + 65537);
        if (!nt) break;
        text = nt;
        got = fread(text + len, 1, 65536, fp);
        len += got;
    } while (got == 65536 && len < ((size_t)64 << 20));
    fclose(fp);
    if (text) text[len] = 0;
    if (!text || !index_shards(text, &shards, &n)) {
        fprintf(stderr, "fat5_inspect: %s: cannot read its weight_map\n", p);
        rc = 2;
    }
    for (i = 0; i < n && !rc; i++) {
        fat5_st_file *f = NULL;
        char name[64];
        snprintf(p, sizeof p, "%s/%s", dir, shards[i]);
        if (fat5_st_load(ctx, p, &f) != FAT5_OK) {
            rc = 1;
            break;
        }
        snprintf(name, sizeof name, "shard %d of %d", i + 1, n);
        if (print_st(f, name, total)) rc = 2;
        fat5_st_destroy(f);
    }
    for (i = 0; i < n; i++) free(shards[i]);
    free(shards);
    free(text);
    return rc;
}

int main(int argc, char **argv) {
    fat5_ctx *ctx = NULL;
    fat5_ctx_config cc = fat5_ctx_config_default();
    struct stat st;
    int64_t total = 0;
    int rc = 0;
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR | FILE.safetensors\n", argv[0]);
        return 2;
    }
    if (fat5_ctx_create(&cc, &ctx, NULL, 0) != FAT5_OK) {
        fprintf(stderr, "fat5_inspect: out of memory\n");
        return 1;
    }
    if (stat(argv[1], &st) != 0) {
        fprintf(stderr, "fat5_inspect: %s: no such file or directory\n", argv[1]);
        fat5_ctx_destroy(ctx);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        // the whole model: load validates config, names, shapes and dtypes together
        fat5_model *m = NULL;
        const fat5_model_config *c;
        char *json = NULL;
        size_t len;
        if (fat5_model_load(ctx, argv[1], &m) != FAT5_OK) {
            fprintf(stderr, "fat5_inspect: %s\n", fat5_last_error(ctx));
            fat5_ctx_destroy(ctx);
            return 1;
        }
        c = fat5_model_get_config(m);
        printf("model %s: %s, %lld parameters\n", argv[1], c->model_type, (long long)fat5_model_param_count(m));
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
        {
            char p[4200];
            snprintf(p, sizeof p, "%s/model.safetensors", argv[1]);
            if (stat(p, &st) == 0) rc = print_file(ctx, p, &total);
            else rc = print_shards(ctx, argv[1], &total);
        }
    } else {
        rc = print_file(ctx, argv[1], &total);
    }
    if (rc == 1) fprintf(stderr, "fat5_inspect: %s\n", fat5_last_error(ctx));   // 2: reported already
    else if (rc == 0) printf("%lld elements\n", (long long)total);
    fat5_ctx_destroy(ctx);
    return rc ? 1 : 0;
}
