// amalgamate — writes fat5.h from the library's sources in src/, in the order of src/manifest.
//
//     build/amalgamate [--lines] [--check] -o OUT src/manifest   (make builds it from dev/amalgamate.c)
//
// fat5.h is the files the manifest lists, concatenated in its order, byte for byte, with one
// exception: the line "//@contents" (in src/api.h) becomes the table of contents, one line per
// section marker ("// ==[n] title ==") found in the files, in file order. Nothing else is
// generated, so an error in fat5.h is found at the same text in src/.
//
//     --lines   the developer build: a #line directive before every file (and after the contents)
//               so that compiler messages and debuggers name src/ files and lines
//     --check   compare with OUT instead of writing it: exit 1, naming the first differing line,
//               when OUT is not the amalgamation (make check-amalgamate)
//
// It also checks the sources: a manifest line is "layer path"; every file ends with a newline,
// holds at most FILE_MAX_LINES lines, and section numbers appear once each. OUT is written to
// OUT.tmp and renamed, so a failed run never leaves half a header.
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX_LINES 3000
#define MAX_FILES 128
#define MAX_SECTIONS 256

typedef struct {
    char layer[32];
    char path[512];
    char *text;    // the file's bytes, NUL-terminated
    size_t size;
} src_file;

typedef struct {
    char buf[304];   // "[n]"
    char title[304];
} section;

static src_file files[MAX_FILES];
static int n_files;
static section sections[MAX_SECTIONS];
static int n_sections;

static void die(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "amalgamate: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    exit(1);
}

static char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    size_t cap = 0, n = 0, got;
    if (!f) return NULL;
    for (;;) {
        if (n + 65536 + 1 > cap) {
            cap = (n + 65536 + 1) * 2;
            p = (char *)realloc(p, cap);
            if (!p) die("out of memory reading %s%s", path, "");
        }
        got = fread(p + n, 1, 65536, f);
        n += got;
        if (got < 65536) break;
    }
    if (ferror(f)) {
        fclose(f);
        free(p);
        return NULL;
    }
    fclose(f);
    p[n] = 0;
    *size = n;
    return p;
}

static void read_manifest(const char *path) {
    size_t size;
    char *m = read_all(path, &size), *line, *save = NULL;
    int lineno = 0;
    if (!m) die("cannot read the manifest %s%s", path, "");
    for (line = strtok_r(m, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char layer[32], file[512], more[8];
        int k;
        lineno++;
        while (*line == ' ' || *line == '\t') line++;
        if (!*line || *line == '#') continue;
        k = sscanf(line, "%31s %511s %7s", layer, file, more);
        if (k != 2) {
            char where[64];
            snprintf(where, sizeof where, "%s:%d", path, lineno);
            die("%s: a line is \"layer path\", not \"%s\"", where, line);
        }
        if (n_files == MAX_FILES) die("more than %s files in %s", "128", path);
        strcpy(files[n_files].layer, layer);
        strcpy(files[n_files].path, file);
        files[n_files].text = read_all(file, &files[n_files].size);
        if (!files[n_files].text) die("cannot read %s (listed in %s)", file, path);
        n_files++;
    }
    free(m);
}

// The sections of every file, in order; the sources' own checks.
static void scan_files(void) {
    int i, j;
    for (i = 0; i < n_files; i++) {
        const char *p = files[i].text, *end = p + files[i].size;
        long lines = 0;
        if (files[i].size == 0 || end[-1] != '\n') die("%s: the file must end with a newline%s", files[i].path, "");
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = (size_t)(nl - p);
            lines++;
            if (len > 6 && !memcmp(p, "// ==[", 6) && len < 300) {
                char line[300], *close;
                memcpy(line, p, len);
                line[len] = 0;
                close = strchr(line + 6, ']');
                if (close && len > 3 && !strcmp(line + len - 3, " ==") && close[1] == ' ') {
                    section *s = &sections[n_sections];
                    if (n_sections == MAX_SECTIONS) die("more than %s sections%s", "256", "");
                    *close = 0;
                    snprintf(s->buf, sizeof s->buf, "[%s]", line + 6);
                    line[len - 3] = 0;
                    snprintf(s->title, sizeof s->title, "%s", close + 2);
                    for (j = 0; j < n_sections; j++)
                        if (!strcmp(sections[j].buf, s->buf)) die("section %s appears twice (again in %s)", s->buf, files[i].path);
                    n_sections++;
                }
            }
            p = nl + 1;
        }
        if (lines > FILE_MAX_LINES) {
            char n[32];
            snprintf(n, sizeof n, "%ld", lines);
            die("%s has %s lines: split it (a source file holds at most 3000)", files[i].path, n);
        }
    }
}

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = (char *)realloc(b->p, b->cap);
        if (!b->p) die("out of memory%s%s", "", "");
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void amalgamate(sbuf *out, int with_lines) {
    int i, j;
    for (i = 0; i < n_files; i++) {
        const char *p = files[i].text, *end = p + files[i].size;
        long lineno = 0;
        char dir[600];
        if (with_lines) {
            snprintf(dir, sizeof dir, "#line 1 \"%s\"\n", files[i].path);
            puts_(out, dir);
        }
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = (size_t)(nl - p);
            lineno++;
            if (len == 11 && !memcmp(p, "//@contents", 11)) {
                for (j = 0; j < n_sections; j++) {
                    size_t w = strlen(sections[j].buf);
                    puts_(out, "//     ");
                    puts_(out, sections[j].buf);
                    put(out, "       ", w < 7 ? 7 - w : 0);
                    puts_(out, sections[j].title);
                    puts_(out, "\n");
                }
                if (with_lines) {
                    snprintf(dir, sizeof dir, "#line %ld \"%s\"\n", lineno + 1, files[i].path);
                    puts_(out, dir);
                }
            } else {
                put(out, p, len + 1);
            }
            p = nl + 1;
        }
    }
}

int main(int argc, char **argv) {
    const char *out_path = NULL, *manifest = NULL;
    int with_lines = 0, check = 0, i;
    sbuf out = {0, 0, 0};
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lines")) with_lines = 1;
        else if (!strcmp(argv[i], "--check")) check = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) out_path = argv[++i];
        else if (argv[i][0] != '-' && !manifest) manifest = argv[i];
        else {
            fprintf(stderr, "usage: %s [--lines] [--check] -o OUT src/manifest\n", argv[0]);
            return 2;
        }
    }
    if (!out_path || !manifest) {
        fprintf(stderr, "usage: %s [--lines] [--check] -o OUT src/manifest\n", argv[0]);
        return 2;
    }
    read_manifest(manifest);
    scan_files();
    amalgamate(&out, with_lines);
    if (check) {
        size_t size, k, line = 1;
        char *have = read_all(out_path, &size);
        if (!have) die("cannot read %s%s", out_path, "");
        for (k = 0; k < size && k < out.n && have[k] == out.p[k]; k++)
            if (have[k] == '\n') line++;
        if (k == size && k == out.n) return 0;
        fprintf(stderr, "amalgamate: %s differs from the amalgamation of %s at line %zu: run make amalgamate "
                        "(and edit src/, never %s)\n", out_path, manifest, line, out_path);
        return 1;
    } else {
        char tmp[1024];
        FILE *f;
        snprintf(tmp, sizeof tmp, "%s.tmp", out_path);
        f = fopen(tmp, "wb");
        if (!f || fwrite(out.p, 1, out.n, f) != out.n || fclose(f) != 0) die("cannot write %s%s", tmp, "");
        if (rename(tmp, out_path) != 0) die("cannot rename %s to %s", tmp, out_path);
    }
    free(out.p);
    for (i = 0; i < n_files; i++) free(files[i].text);
    return 0;
}
