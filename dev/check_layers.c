// check_layers — DESIGN §3's layer rules over the library's source (make check-layers, in make test).
//
//     build/check_layers src/manifest   (make builds it from dev/check_layers.c)
//
// src/manifest gives every file its layer; bottom to top: base, device, ops, model, train, io,
// generate, text, run ("api", the public declarations, and "-", the implementation's opening and
// closing, are neither checked nor counted). The names checked are the library's own (they start
// with fat5 / FAT5 in any case): functions (where their body is), macros, types, struct / enum
// tags, enum constants and file-scope variables. Rules:
//   1. A file never uses a name that only files of a higher layer define (a forward declaration
//      is not a definition: the body's file counts; "struct name *", an opaque pointer, is no use).
//   2. Above the ops (model, train, io, generate, text, run) no file uses a device name: they
//      reach the device through a backend (section [3.4]).
//   3. text uses base alone (tokenizers stand apart from the model).
//   4. Backend branches above the ops, a line that tests FAT5_NO_CUDA or names fat5__cpu_backend,
//      fat5__gpu_backend or a context's ->gpu, are at most MAX_BRANCHES, each with a comment
//      "backend branch:" on its line or the line above saying why.
// Every finding is printed as "file:line: ..."; the exit status is 1 when there is one.
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BRANCHES 3
#define MAX_FILES 128

static const char *const layer_names[] = {"base", "device", "ops", "model", "train", "io", "generate", "text", "run"};
enum { L_BASE, L_DEVICE, L_OPS, L_MODEL, L_TRAIN, L_IO, L_GENERATE, L_TEXT, L_RUN, L_COUNT };

typedef struct {
    char path[512];
    int layer;  // -1: not checked ("api", "-")
    char *text;
    size_t size;
} src_file;

typedef struct {
    char *name;
    unsigned long long files[2];  // bit set of the defining files
    int def_file, def_line;        // the first definition, for messages
} def;

static src_file files[MAX_FILES];
static int n_files;
static def *defs;
static size_t n_defs, cap_defs;
static int findings;

static void *xrealloc(void *p, size_t n) {
    p = realloc(p, n);
    if (!p) {
        fprintf(stderr, "check_layers: out of memory\n");
        exit(2);
    }
    return p;
}

static char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    size_t n = 0, cap = 0, got;
    if (!f) return NULL;
    do {
        if (n + 65537 > cap) p = (char *)xrealloc(p, cap = (n + 65537) * 2);
        got = fread(p + n, 1, 65536, f);
        n += got;
    } while (got == 65536);
    fclose(f);
    p[n] = 0;
    *size = n;
    return p;
}

static int is_ours(const char *s, size_t n) {
    return n > 4 && (s[0] == 'f' || s[0] == 'F') && (s[1] == 'a' || s[1] == 'A') && (s[2] == 't' || s[2] == 'T') && s[3] == '5';
}

// ---- names: a hash table from name to its definitions ----
static size_t *slots;
static size_t n_slots;
static unsigned long hash(const char *s, size_t n) {
    unsigned long h = 5381;
    while (n--) h = h * 33 + (unsigned char)*s++;
    return h;
}
static def *lookup(const char *s, size_t n, int create) {
    size_t i;
    if (!n_slots) {
        n_slots = 1 << 16;
        slots = (size_t *)calloc(n_slots, sizeof *slots);
    }
    for (i = hash(s, n) & (n_slots - 1); slots[i]; i = (i + 1) & (n_slots - 1)) {
        def *d = &defs[slots[i] - 1];
        if (strlen(d->name) == n && !memcmp(d->name, s, n)) return d;
    }
    if (!create) return NULL;
    if (n_defs + 1 > n_slots / 2) {
        fprintf(stderr, "check_layers: too many names\n");
        exit(2);
    }
    if (n_defs == cap_defs) defs = (def *)xrealloc(defs, (cap_defs = cap_defs ? cap_defs * 2 : 4096) * sizeof *defs);
    memset(&defs[n_defs], 0, sizeof defs[n_defs]);
    defs[n_defs].name = (char *)xrealloc(NULL, n + 1);
    memcpy(defs[n_defs].name, s, n);
    defs[n_defs].name[n] = 0;
    defs[n_defs].def_file = -1;
    slots[i] = ++n_defs;
    return &defs[n_defs - 1];
}
static void define(const char *s, size_t n, int file, int line) {
    def *d;
    if (!is_ours(s, n)) return;
    d = lookup(s, n, 1);
    d->files[file / 64] |= 1ull << (file % 64);
    if (d->def_file < 0) {
        d->def_file = file;
        d->def_line = line;
    }
}

// ---- tokens: identifiers and punctuation, comments and literals skipped ----
typedef struct {
    const char *s;   // identifier start, or the punctuation character
    size_t n;        // identifier length; 0 for punctuation
    int line;
    int pp;          // inside a preprocessor line
    int define_name; // the name right after #define
} token;

static token *toks;
static size_t n_toks, cap_toks;

static void push(const char *s, size_t n, int line, int pp, int dn) {
    if (n_toks == cap_toks) toks = (token *)xrealloc(toks, (cap_toks = cap_toks ? cap_toks * 2 : 65536) * sizeof *toks);
    toks[n_toks].s = s;
    toks[n_toks].n = n;
    toks[n_toks].line = line;
    toks[n_toks].pp = pp;
    toks[n_toks].define_name = dn;
    n_toks++;
}

static void tokenize(const char *p, const char *end) {
    const char *begin = p;
    int line = 1, pp = 0, bol = 1, after_define = 0, pp_first = 0;
    n_toks = 0;
    while (p < end) {
        char c = *p;
        if (c == '\n') {
            if (!(p > begin && p[-1] == '\\')) pp = 0;
            line++;
            bol = 1;
            p++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\\') {
            p++;
            continue;
        }
        if (c == '/' && p + 1 < end && p[1] == '/') {
            while (p < end && *p != '\n') p++;
            continue;
        }
        if (c == '/' && p + 1 < end && p[1] == '*') {
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n') line++;
                p++;
            }
            p += 2;
            continue;
        }
        if (bol && c == '#') {
            pp = 1;
            pp_first = 1;
            bol = 0;
            p++;
            continue;
        }
        bol = 0;
        if (c == '"' || c == '\'') {
            p++;
            while (p < end && *p != c && *p != '\n') p += *p == '\\' ? 2 : 1;
            p++;
            push("\"", 0, line, pp, 0);  // a literal is a value
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            const char *s = p;
            while (p < end && (isalnum((unsigned char)*p) || *p == '_')) p++;
            if (pp && pp_first) {
                after_define = (size_t)(p - s) == 6 && !memcmp(s, "define", 6);
                pp_first = 0;
                continue;  // the directive's own word
            }
            push(s, (size_t)(p - s), line, pp, pp && after_define);
            after_define = 0;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            while (p < end && (isalnum((unsigned char)*p) || *p == '.' || *p == '_')) p++;
            push("0", 0, line, pp, 0);
            continue;
        }
        push(p, 0, line, pp, 0);
        p++;
    }
}

static int punct(const token *t, char c) { return t->n == 0 && t->s[0] == c; }
static int word(const token *t, const char *w) { return t->n == strlen(w) && !memcmp(t->s, w, t->n); }

// The definitions of one file's tokens: #define names, and at file scope functions with a body,
// typedef names, struct / union / enum tags and constants, variables.
static void collect_defs(int file) {
    size_t i, stmt = 0;
    int depth = 0, enum_depth = -1;
    for (i = 0; i < n_toks; i++) {
        token *t = &toks[i];
        if (t->pp) {
            if (t->define_name) define(t->s, t->n, file, t->line);
            continue;
        }
        if (t->n && (word(t, "struct") || word(t, "union") || word(t, "enum"))) {
            size_t j = i + 1;
            while (j < n_toks && toks[j].pp) j++;
            if (j + 1 < n_toks && toks[j].n && punct(&toks[j + 1], '{')) define(toks[j].s, toks[j].n, file, toks[j].line);
            if (word(t, "enum")) {
                size_t k = j;
                while (k < n_toks && toks[k].n) k++;
                if (k < n_toks && punct(&toks[k], '{')) enum_depth = depth + 1;
            }
            continue;
        }
        if (punct(t, '{')) {
            // a function body: "name ( ... ) {" at file scope
            if (depth == 0 && i > 0 && punct(&toks[i - 1], ')')) {
                size_t j = i - 1;
                int par = 0;
                for (;; j--) {
                    if (punct(&toks[j], ')')) par++;
                    else if (punct(&toks[j], '(') && --par == 0) break;
                    if (j == 0) break;
                }
                // the name before the outermost parameter list (function pointer returns aside)
                if (j > 0 && toks[j - 1].n) define(toks[j - 1].s, toks[j - 1].n, file, toks[j - 1].line);
            }
            depth++;
            continue;
        }
        if (punct(t, '}')) {
            if (depth == enum_depth) enum_depth = -1;
            depth--;
            continue;
        }
        if (depth == enum_depth && t->n && (punct(&toks[i - 1], '{') || punct(&toks[i - 1], ',')))
            define(t->s, t->n, file, t->line);
        if (depth != 0) continue;
        if (punct(t, ';') || (punct(t, '=') && !word(&toks[stmt], "typedef"))) {
            // the statement's declared name: typedef's last name (or (*name)), a variable's
            size_t j, name = 0;
            int par = 0, is_typedef = word(&toks[stmt], "typedef"), has_paren = 0;
            for (j = stmt; j < i; j++) {
                if (punct(&toks[j], '(')) {
                    if (par == 0 && j + 2 < i && punct(&toks[j + 1], '*') && toks[j + 2].n && is_typedef) {
                        name = j + 2;
                        break;
                    }
                    par++;
                    has_paren = 1;
                } else if (punct(&toks[j], ')')) {
                    par--;
                } else if (punct(&toks[j], '{')) {
                    break;
                } else if (par == 0 && toks[j].n && !has_paren) {
                    name = j;
                }
            }
            if (is_typedef || !has_paren) {
                if (is_typedef && !name) {
                    for (j = i; j > stmt; j--)
                        if (toks[j - 1].n) { name = j - 1; break; }
                }
                if (name) define(toks[name].s, toks[name].n, file, toks[name].line);
            }
            if (punct(t, '=')) {
                // skip the initialiser
                int d = 0;
                for (i++; i < n_toks; i++) {
                    if (toks[i].pp) continue;
                    if (punct(&toks[i], '{') || punct(&toks[i], '(')) d++;
                    else if (punct(&toks[i], '}') || punct(&toks[i], ')')) d--;
                    else if (d == 0 && punct(&toks[i], ';')) break;
                }
            }
            stmt = i + 1;
            continue;
        }
        if (punct(t, '}') || (i > 0 && punct(&toks[i - 1], '}') && depth == 0 && stmt < i && punct(&toks[stmt], '}'))) stmt = i;
    }
}

static int lowest_layer(const def *d) {
    int f, best = L_COUNT;
    for (f = 0; f < n_files; f++)
        if ((d->files[f / 64] >> (f % 64)) & 1)
            if (files[f].layer >= 0 && files[f].layer < best) best = files[f].layer;
    return best;
}
static int defined_in(const def *d, int f) { return (int)((d->files[f / 64] >> (f % 64)) & 1); }

static void check_uses(int file) {
    size_t i;
    int layer = files[file].layer;
    for (i = 0; i < n_toks; i++) {
        token *t = &toks[i];
        def *d;
        int dl;
        if (!t->n || t->define_name || !is_ours(t->s, t->n)) continue;
        // "struct name *": an opaque pointer to a higher layer's object knows nothing of it
        if (i > 0 && word(&toks[i - 1], "struct") && i + 1 < n_toks && punct(&toks[i + 1], '*')) continue;
        d = lookup(t->s, t->n, 0);
        if (!d || defined_in(d, file)) continue;
        dl = lowest_layer(d);
        if (dl == L_COUNT) continue;  // declared only (api)
        if (dl > layer) {
            printf("%s:%d: %s (layer %s) uses %s, which %s:%d defines in the higher layer %s\n", files[file].path,
                   t->line, files[file].path, layer_names[layer], d->name, files[d->def_file].path, d->def_line,
                   layer_names[dl]);
            findings++;
        } else if (dl == L_DEVICE && layer > L_OPS) {
            printf("%s:%d: %s (layer %s) reaches the device directly through %s (%s:%d): go through the backend\n",
                   files[file].path, t->line, files[file].path, layer_names[layer], d->name,
                   files[d->def_file].path, d->def_line);
            findings++;
        } else if (layer == L_TEXT && dl != L_BASE && dl != L_TEXT) {
            printf("%s:%d: text uses base alone, not %s (layer %s, %s:%d)\n", files[file].path, t->line, d->name,
                   layer_names[dl], files[d->def_file].path, d->def_line);
            findings++;
        }
    }
}

// Rule 4 works on lines (comments included: the reason is a comment).
static int branches;
static void check_branches(int file) {
    const char *p = files[file].text, *end = p + files[file].size, *prev = NULL;
    int line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        char buf[4096];
        line++;
        if (n >= sizeof buf) n = sizeof buf - 1;
        memcpy(buf, p, n);
        buf[n] = 0;
        {
            char *code = buf, *cmt = strstr(buf, "//");
            int hit;
            if (cmt) *cmt = 0;
            while (*code == ' ') code++;
            hit = (code[0] == '#' && strstr(code, "FAT5_NO_CUDA")) || strstr(code, "fat5__cpu_backend") ||
                  strstr(code, "fat5__gpu_backend") || strstr(code, "->gpu");
            if (cmt) *cmt = '/';
            if (hit) {
                int why = strstr(buf, "backend branch:") != NULL;
                if (!why && prev) {
                    const char *pn = memchr(prev, '\n', (size_t)(end - prev));
                    size_t m = (size_t)((pn ? pn : end) - prev);
                    char pb[4096];
                    if (m >= sizeof pb) m = sizeof pb - 1;
                    memcpy(pb, prev, m);
                    pb[m] = 0;
                    why = strstr(pb, "backend branch:") != NULL;
                }
                branches++;
                printf("%s:%d: backend branch %d above the ops%s\n", files[file].path, line, branches,
                       why ? "" : " without a \"backend branch:\" comment saying why");
                if (!why) findings++;
            }
        }
        prev = p;
        p = nl ? nl + 1 : end;
    }
}

int main(int argc, char **argv) {
    size_t size;
    char *m, *line, *save = NULL;
    int f;
    if (argc != 2) {
        fprintf(stderr, "usage: %s src/manifest\n", argv[0]);
        return 2;
    }
    m = read_all(argv[1], &size);
    if (!m) {
        fprintf(stderr, "check_layers: cannot read %s\n", argv[1]);
        return 2;
    }
    for (line = strtok_r(m, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char layer[32], path[512];
        int l;
        while (*line == ' ') line++;
        if (!*line || *line == '#') continue;
        if (sscanf(line, "%31s %511s", layer, path) != 2 || n_files == MAX_FILES) {
            fprintf(stderr, "check_layers: %s: bad line \"%s\"\n", argv[1], line);
            return 2;
        }
        files[n_files].layer = -1;
        for (l = 0; l < L_COUNT; l++)
            if (!strcmp(layer, layer_names[l])) files[n_files].layer = l;
        if (files[n_files].layer < 0 && strcmp(layer, "api") && strcmp(layer, "-")) {
            fprintf(stderr, "check_layers: %s: unknown layer \"%s\"\n", argv[1], layer);
            return 2;
        }
        strcpy(files[n_files].path, path);
        files[n_files].text = read_all(path, &files[n_files].size);
        if (!files[n_files].text) {
            fprintf(stderr, "check_layers: cannot read %s\n", path);
            return 2;
        }
        n_files++;
    }
    for (f = 0; f < n_files; f++) {
        if (files[f].layer < 0) continue;
        tokenize(files[f].text, files[f].text + files[f].size);
        collect_defs(f);
    }
    for (f = 0; f < n_files; f++) {
        if (files[f].layer < 0) continue;
        tokenize(files[f].text, files[f].text + files[f].size);
        check_uses(f);
        if (files[f].layer > L_OPS) check_branches(f);
    }
    if (branches > MAX_BRANCHES) {
        printf("check_layers: %d backend branches above the ops, at most %d\n", branches, MAX_BRANCHES);
        findings++;
    }
    printf("check-layers: %d files, %zu names, %d backend branches above the ops: %s\n", n_files, n_defs, branches,
           findings ? "FAILED" : "ok");
    free(m);
    return findings ? 1 : 0;
}
