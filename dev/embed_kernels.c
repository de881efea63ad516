// embed_kernels.c — turn kernels/*.cu into fat5_kernels.cuh (C string literals, one per line).
//
//     cc -std=c99 -Wall -Wextra -Wpedantic -Werror -o dev/embed_kernels dev/embed_kernels.c
//     dev/embed_kernels fat5_kernels.cuh kernels/a.cu kernels/b.cu ...
//
// Each input file becomes `static const char *const fat5__ksrc_<stem>[]`, one string literal per
// source line (each ending in "\n", the array ending in 0), so NVRTC line numbers match the .cu
// file. A table `fat5__kernel_files[]` maps "<name>.cu" to its lines. Files are emitted in the
// order given (the Makefile passes them sorted, so the output is deterministic).
//
// Rejected, with a message and a non-zero exit: CR or NUL bytes, a line longer than
// EMBED_MAX_LINE bytes, an `#include` directive (kernels define their helpers locally), two files
// whose names map to the same identifier. A missing final newline is accepted.
//
// The output is written to OUT.tmp and renamed over OUT, so a failed run never leaves a torn file.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMBED_MAX_LINE 4000  // bytes per source line; keeps each literal under C99's 4095

typedef struct embed_file {
    const char *path;  // as given on the command line
    const char *name;  // basename, e.g. "util.cu"
    char *ident;       // identifier suffix from the stem, e.g. "util"
    char *data;        // whole file
    size_t size;
} embed_file;

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// "foo-bar.cu" -> "foo_bar": the stem (up to the last '.'), non-alphanumerics replaced by '_'.
static char *make_ident(const char *name)
{
    const char *dot = strrchr(name, '.');
    size_t n = dot && dot != name ? (size_t)(dot - name) : strlen(name);
    char *id = (char *)malloc(n + 1);
    size_t i;
    if (!id) return NULL;
    for (i = 0; i < n; i++) {
        char c = name[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        id[i] = alnum ? c : '_';
    }
    id[n] = '\0';
    return id;
}

static int read_file(const char *path, char **out, size_t *out_size)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t size = 0, cap = 0;
    if (!f) {
        fprintf(stderr, "embed_kernels: cannot open %s\n", path);
        return 0;
    }
    for (;;) {
        size_t got;
        if (size == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nbuf = (char *)realloc(buf, ncap);
            if (!nbuf) {
                fprintf(stderr, "embed_kernels: out of memory reading %s\n", path);
                free(buf);
                fclose(f);
                return 0;
            }
            buf = nbuf;
            cap = ncap;
        }
        got = fread(buf + size, 1, cap - size, f);
        size += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        fprintf(stderr, "embed_kernels: read error on %s\n", path);
        free(buf);
        fclose(f);
        return 0;
    }
    fclose(f);
    *out = buf;
    *out_size = size;
    return 1;
}

// Is this line a preprocessor #include directive ("#include", "  #  include", ...)?
static int is_include(const char *line, size_t len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    if (i == len || line[i] != '#') return 0;
    i++;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    return len - i >= 7 && memcmp(line + i, "include", 7) == 0;
}

// Check every line of a file; returns 1 when it can be embedded.
static int validate(const embed_file *ef)
{
    size_t pos = 0, lineno = 0;
    while (pos < ef->size) {
        const char *line = ef->data + pos;
        const char *nl = (const char *)memchr(line, '\n', ef->size - pos);
        size_t len = nl ? (size_t)(nl - line) : ef->size - pos, i;
        lineno++;
        for (i = 0; i < len; i++) {
            if (line[i] == '\r') {
                fprintf(stderr, "%s:%lu: error: CR character (use LF line endings)\n", ef->path,
                        (unsigned long)lineno);
                return 0;
            }
            if (line[i] == '\0') {
                fprintf(stderr, "%s:%lu: error: NUL byte\n", ef->path, (unsigned long)lineno);
                return 0;
            }
        }
        if (len > EMBED_MAX_LINE) {
            fprintf(stderr, "%s:%lu: error: line is %lu bytes long (at most %d)\n", ef->path,
                    (unsigned long)lineno, (unsigned long)len, EMBED_MAX_LINE);
            return 0;
        }
        if (is_include(line, len)) {
            fprintf(stderr, "%s:%lu: error: kernels must not #include; define helpers locally\n",
                    ef->path, (unsigned long)lineno);
            return 0;
        }
        pos += len + (nl ? 1 : 0);
    }
    return 1;
}

// Write bytes as the inside of a C string literal. '\\' and '"' are escaped; control characters
// and bytes >= 0x7f become 3-digit octal (so a following digit is never absorbed); a '?' after
// a '?' becomes "\?" so no trigraph can form.
static void put_escaped(FILE *out, const char *s, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '"')
            fprintf(out, "\\%c", c);
        else if (c == '?' && i > 0 && s[i - 1] == '?')
            fputs("\\?", out);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(out, "\\%03o", (unsigned)c);
        else
            fputc(c, out);
    }
}

static void write_output(FILE *out, const embed_file *files, int nfiles)
{
    int k;
    fputs("// fat5_kernels.cuh \xe2\x80\x94 generated by dev/embed_kernels.c from kernels/*.cu. "
          "Do not edit; run `make embed`.\n"
          "// Each kernel source file is an array of string literals, one per source line, so "
          "that line numbers\n"
          "// in NVRTC messages match the .cu file.\n"
          "#ifndef FAT5_KERNELS_CUH\n"
          "#define FAT5_KERNELS_CUH\n",
          out);
    for (k = 0; k < nfiles; k++) {
        const embed_file *ef = &files[k];
        size_t pos = 0;
        fprintf(out, "static const char *const fat5__ksrc_%s[] = {\n", ef->ident);
        while (pos < ef->size) {
            const char *line = ef->data + pos;
            const char *nl = (const char *)memchr(line, '\n', ef->size - pos);
            size_t len = nl ? (size_t)(nl - line) : ef->size - pos;
            fputs("    \"", out);
            put_escaped(out, line, len);
            fputs("\\n\",\n", out);
            pos += len + (nl ? 1 : 0);
        }
        fputs("    0};\n", out);
    }
    fputs("typedef struct fat5__kernel_file { const char *name; const char *const *lines; } "
          "fat5__kernel_file;\n"
          "#if defined(__GNUC__)\n"
          "__attribute__((unused))\n"
          "#endif\n"
          "static const fat5__kernel_file fat5__kernel_files[] = {\n",
          out);
    for (k = 0; k < nfiles; k++) {
        fputs("    {\"", out);
        put_escaped(out, files[k].name, strlen(files[k].name));
        fprintf(out, "\", fat5__ksrc_%s},\n", files[k].ident);
    }
    fputs("    {0, 0}};\n"
          "#endif\n",
          out);
}

int main(int argc, char **argv)
{
    const char *out_path;
    char *tmp_path;
    embed_file *files;
    int nfiles, i, j, ok = 1;
    FILE *out;

    if (argc < 2) {
        fprintf(stderr, "usage: embed_kernels OUT.cuh kernels/a.cu kernels/b.cu ...\n");
        return 2;
    }
    out_path = argv[1];
    nfiles = argc - 2;
    files = (embed_file *)calloc(nfiles ? (size_t)nfiles : 1, sizeof *files);
    if (!files) {
        fprintf(stderr, "embed_kernels: out of memory\n");
        return 1;
    }

    for (i = 0; i < nfiles && ok; i++) {
        embed_file *ef = &files[i];
        ef->path = argv[i + 2];
        ef->name = base_name(ef->path);
        ef->ident = make_ident(ef->name);
        if (!ef->ident) {
            fprintf(stderr, "embed_kernels: out of memory\n");
            ok = 0;
            break;
        }
        if (!ef->ident[0]) {
            fprintf(stderr, "embed_kernels: %s: empty file name\n", ef->path);
            ok = 0;
            break;
        }
        for (j = 0; j < i; j++) {
            if (strcmp(files[j].ident, ef->ident) == 0) {
                fprintf(stderr, "embed_kernels: %s and %s both map to fat5__ksrc_%s\n",
                        files[j].path, ef->path, ef->ident);
                ok = 0;
                break;
            }
        }
        if (ok) ok = read_file(ef->path, &ef->data, &ef->size) && validate(ef);
    }

    if (ok) {
        tmp_path = (char *)malloc(strlen(out_path) + 5);
        if (!tmp_path) {
            fprintf(stderr, "embed_kernels: out of memory\n");
            ok = 0;
        } else {
            strcpy(tmp_path, out_path);
            strcat(tmp_path, ".tmp");
            out = fopen(tmp_path, "wb");
            if (!out) {
                fprintf(stderr, "embed_kernels: cannot create %s\n", tmp_path);
                ok = 0;
            } else {
                int werr;
                write_output(out, files, nfiles);
                werr = fflush(out) != 0 || ferror(out);
                werr |= fclose(out) != 0;
                if (werr) {
                    fprintf(stderr, "embed_kernels: write error on %s\n", tmp_path);
                    ok = 0;
                } else if (rename(tmp_path, out_path) != 0) {
                    fprintf(stderr, "embed_kernels: cannot rename %s to %s\n", tmp_path,
                            out_path);
                    ok = 0;
                }
                if (!ok) remove(tmp_path);
            }
            free(tmp_path);
        }
    }

    for (i = 0; i < nfiles; i++) {
        free(files[i].ident);
        free(files[i].data);
    }
    free(files);
    return ok ? 0 : 1;
}
