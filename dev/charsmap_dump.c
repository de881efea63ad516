// charsmap_dump — writes the precompiled charsmap fat5 builds for a normalisation rule, and what
// fat5's SentencePiece normaliser makes with it of every code point and of given lines, for
// ref/check_charsmap.py to compare with sentencepiece and tokenizers.
//     cc -std=c99 -O2 -I. -o build/charsmap_dump dev/charsmap_dump.c -lm -ldl -lpthread
//     build/charsmap_dump RULE BLOB_OUT SPIECE_OUT CODEPOINTS_OUT [LINES_IN LINES_OUT]
// SPIECE_OUT: a spiece.model as the trainer writes it (fat5__tt_spm_bytes: the special pieces and
// "a") with the blob, add_dummy_prefix and remove_extra_whitespaces off. CODEPOINTS_OUT: for each code point 0..U+10FFFF but the surrogates, a uint32 (little-endian)
// byte length and the bytes its one-character text becomes. LINES_OUT: the same for each line of
// LINES_IN (UTF-8, "\n"-separated; the line without its "\n"). The charsmap alone is applied
// (sentencepiece's rule: the longest match of the first 32 at each byte, else one character), no
// whitespace handling.
#define FAT5_IMPLEMENTATION
#define FAT5_NO_CUDA
#include "fat5.h"

#include <stdio.h>

static fat5__charsmap cm;

// the charsmap applied to s[0..n), appended to f with its length first
static void put_norm(FILE *f, const char *s, size_t n) {
    static char *out;
    static size_t cap;
    size_t o = 0, i = 0;
    while (i < n) {
        fat5__cm_match m[32];
        size_t k = fat5__charsmap_search(&cm, s + i, n - i, m, 32), j, best = 0, step;
        const char *repl = NULL, *src;
        for (j = 0; j < k && j < 32; j++)
            if (m[j].len > best) best = m[j].len, repl = m[j].repl;
        if (best) src = repl, step = best, k = strlen(repl);
        else if ((k = fat5__utf8_len(s + i, n - i)) == 0) src = "\xEF\xBF\xBD", step = 1, k = 3;
        else src = s + i, step = k;
        if (o + k > cap) {
            cap = 2 * (o + k) + 64;
            out = (char *)realloc(out, cap);
        }
        memcpy(out + o, src, k);
        o += k;
        i += step;
    }
    {
        unsigned char h[4] = {(unsigned char)o, (unsigned char)(o >> 8), (unsigned char)(o >> 16), (unsigned char)(o >> 24)};
        fwrite(h, 1, 4, f);
        fwrite(out, 1, o, f);
    }
}

int main(int argc, char **argv) {
    fat5_ctx *ctx = NULL;
    unsigned char *blob;
    size_t len;
    uint32_t cp;
    FILE *f;
    double t0;
    if (argc != 5 && argc != 7) {
        fprintf(stderr, "usage: %s RULE BLOB_OUT SPIECE_OUT CODEPOINTS_OUT [LINES_IN LINES_OUT]\n", argv[0]);
        return 2;
    }
    if (fat5_ctx_create(NULL, &ctx, NULL, 0) != FAT5_OK) return 1;
    t0 = fat5__now_s();
    if (fat5__tt_charsmap(ctx, argv[1], &blob, &len) != FAT5_OK) {
        fprintf(stderr, "%s\n", fat5_last_error(ctx));
        return 1;
    }
    fprintf(stderr, "%s: %zu bytes (trie %u) in %.3f s\n", argv[1], len,
            len ? (unsigned)(blob[0] | blob[1] << 8 | blob[2] << 16 | (unsigned)blob[3] << 24) : 0u, fat5__now_s() - t0);
    f = fopen(argv[2], "wb");
    fwrite(blob, 1, len, f);
    fclose(f);
    if (len && fat5__charsmap_load(ctx, argv[2], blob, len, &cm) != FAT5_OK) {
        fprintf(stderr, "%s\n", fat5_last_error(ctx));
        return 1;
    }
    {
        fat5_tokenizer_train_config cfg = fat5_tokenizer_train_config_default();
        fat5__tt_vocab v;
        fat5__sb sb;
        memset(&v, 0, sizeof v);
        fat5__sb_init(&sb, ctx);
        cfg.normalization_rule_name = argv[1];
        cfg.add_dummy_prefix = 0;
        cfg.remove_extra_whitespaces = 0;
        if (fat5__tt_vocab_specials(ctx, &cfg, &v) || fat5__tt_vocab_add(ctx, &v, "a", 1, -1.0f, FAT5__PT_NORMAL) < 0 ||
            fat5__tt_spm_bytes(ctx, &cfg, &v, blob, len, &sb)) {
            fprintf(stderr, "%s\n", fat5_last_error(ctx));
            return 1;
        }
        f = fopen(argv[3], "wb");
        fwrite(sb.buf, 1, sb.len, f);
        fclose(f);
        fat5__sb_free(&sb);
        fat5__tt_vocab_free(ctx, &v);
    }
    f = fopen(argv[4], "wb");
    for (cp = 0; cp <= 0x10FFFF; cp++) {
        char s[4];
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        put_norm(f, s, fat5__utf8_put(s, cp));
    }
    fclose(f);
    if (argc == 7) {
        FILE *in = fopen(argv[5], "rb");
        char *line = NULL;
        size_t cap = 0, n = 0;
        int c;
        if (!in) return 1;
        f = fopen(argv[6], "wb");
        while ((c = fgetc(in)) != EOF) {
            if (c == '\n') {
                put_norm(f, line, n);
                n = 0;
                continue;
            }
            if (n + 1 > cap) line = (char *)realloc(line, cap = 2 * cap + 64);
            line[n++] = (char)c;
        }
        fclose(in);
        fclose(f);
        free(line);
    }
    fat5__charsmap_free(ctx, &cm);
    fat5__free(ctx, blob);
    fat5_ctx_destroy(ctx);
    return 0;
}
