// pretokenize — UTF-8 text files to one fat5 token file, with the built-in byte-level tokenizer
// (ByT5's ids: 0 pad, 1 eos, 2 unk, byte b -> b + 3; vocabulary 384 by default, whose top ids
// 259 .. 383 serve as sentinels: sentinel_first = vocab - 1, n_sentinels = vocab - 259), or with
// a checkpoint's tokenizer (--tokenizer PATH: tokenizer.json, a SentencePiece .model, or a
// directory holding one).
//     cc -std=c99 -O2 -o tools/pretokenize tools/pretokenize.c -lm -ldl -lpthread
//     tools/pretokenize [--sep MODE] [--tokenizer PATH] [--vocab N] [--width 2|4] -o OUT.tok IN.txt...
//     tools/pretokenize --help | --version
// (-o is --output; options may come before or after the inputs, as --key value or --key=value.)
// --tokenizer: each document's text (as --sep makes it) is tokenized with fat5_tokenize_stream
// (fat5_tokenize's ids, streamed to the file) without the post-processor, and the tokenizer's EOS
// id (it must have one) is written after it, so that documents end as they do byte-level, once
// (T5's template would append the same EOS). A document takes memory for its text (twice with
// --sep file, blank or STR: as read, then joined; once with --sep line), not for its ids. The
// vocabulary written to the header is the tokenizer's (fat5_tokenizer_vocab_size: pieces, added
// tokens and T5's <extra_id_N> sentinels) unless --vocab gives a larger one; --width 2 holds
// vocabularies up to 65536, larger ones need --width 4. A document whose text gives no ids (only
// whitespace, for T5) is skipped like an empty one.
// --sep says where documents end:
//     file   (default) each input file is one document, its bytes as they are
//     line   each non-empty line is a document (the newline is not part of it)
//     blank  paragraphs: runs of non-blank lines, separated by blank lines (whitespace only);
//            a paragraph's lines are joined by "\n"
//     STR    any other value: a line holding exactly STR (a trailing \r allowed) separates
//            documents, e.g. --sep % for fortune files; the lines between are joined by "\n"
//            (empty lines at a document's start and end dropped)
// Empty documents are skipped. "-" reads standard input. Input must be valid UTF-8 (an error names
// the file and the byte offset otherwise). The output is written atomically. Progress goes to
// stderr every 64 MiB of input; a summary line at the end.
// --pairs: the inputs are (input, target) pairs files instead (JSONL, TSV, CSV, or
// "inputs.txt,targets.txt" for two parallel files; fat5_pairs_open), read and tokenized as
// fine-tuning reads them (--text-column, --summary-column, --source-prefix, --max-source-length,
// --max-target-length; special tokens added, so T5's sequences end with EOS), and each row is
// written as two documents, its input then its target: a pretokenized pairs file, which
// fine-tuning streams from disk (train_file; docs/finetuning.md). Every sequence must end with the
// EOS and hold no other (a tokenizer whose template adds none is refused).
#define _POSIX_C_SOURCE 200809L   // getline, mkstemp, fsync, fstat: before every system header
#define FAT5_IMPLEMENTATION
#include "../fat5.h"
#include "cli.h"   // the command line every fat5 program shares (docs/cli.md)

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Opens an input for reading: a regular file only (a FIFO or a directory is refused without
// blocking on it). 0 with the reason on stderr.
static int pt_open_regular(const char *path, FILE **out) {
    struct stat sb;
    int fd, fl;
    *out = NULL;
    do fd = open(path, O_RDONLY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        fprintf(stderr, "pretokenize: %s: cannot open: %s\n", path, strerror(errno));
        return 0;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fprintf(stderr, "pretokenize: %s: not a regular file\n", path);
        close(fd);
        return 0;
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 || !(*out = fdopen(fd, "rb"))) {
        fprintf(stderr, "pretokenize: %s: cannot open: %s\n", path, strerror(errno));
        close(fd);
        return 0;
    }
    return 1;
}

typedef struct pt_state {
    fat5_ctx *ctx;
    fat5_tokenizer *tok;      // --tokenizer; NULL: byte-level
    int32_t eos;
    char *text;               // --tokenizer: the text of the document being read
    size_t text_len, text_cap;
    fat5_tokens_writer *out;  // the token file, written atomically (it appears whole or not at all)
    int width;
    int32_t buf[1 << 14];     // ids not yet handed to the writer
    size_t fill;
    int64_t n_ids, n_docs, in_bytes, next_report;
    int64_t doc_len;          // ids of the document being written
    int64_t doc_ids;          // --tokenizer: ids of the document so far
    int write_failed;         // --tokenizer: the token file refused ids (the reason is printed)
    int64_t pending_nl;       // "\n"s joining lines, written before the next non-empty line
    int64_t n_rows;           // --pairs: rows written
} pt_state;

static int pt_fail(pt_state *p) {
    fprintf(stderr, "pretokenize: %s\n", fat5_last_error(p->ctx));
    return 0;
}

static int pt_flush(pt_state *p) {
    if (p->fill && fat5_tokens_writer_append(p->out, p->buf, (int64_t)p->fill) != FAT5_OK) return pt_fail(p);
    p->fill = 0;
    return 1;
}

static int pt_id(pt_state *p, uint32_t id) {
    if (p->fill == sizeof p->buf / sizeof p->buf[0] && !pt_flush(p)) return 0;
    p->buf[p->fill++] = (int32_t)id;
    p->n_ids++;
    return 1;
}

// --tokenizer: appends text to the document's
static int pt_text(pt_state *p, const char *s, size_t n) {
    if (p->text_len + n > p->text_cap) {
        size_t cap = 2 * p->text_cap + n + 4096;
        char *nb = (char *)realloc(p->text, cap);
        if (!nb) {
            fprintf(stderr, "pretokenize: out of memory (a document of %llu bytes)\n", (unsigned long long)cap);
            return 0;
        }
        p->text = nb;
        p->text_cap = cap;
    }
    memcpy(p->text + p->text_len, s, n);
    p->text_len += n;
    return 1;
}

// appends a piece of the document; owed newlines (lines joined by "\n") go first, unless the
// document is still empty
static int pt_bytes(pt_state *p, const char *s, size_t n) {
    size_t i;
    if (n == 0) return 1;
    for (; p->pending_nl > 0; p->pending_nl--)
        if (p->doc_len > 0) {
            if (p->tok ? !pt_text(p, "\n", 1) : !pt_id(p, '\n' + 3)) return 0;
            p->doc_len++;
        }
    if (p->tok) {
        p->doc_len += (int64_t)n;
        return pt_text(p, s, n);
    }
    for (i = 0; i < n; i++)
        if (!pt_id(p, (uint32_t)(unsigned char)s[i] + 3)) return 0;
    p->doc_len += (int64_t)n;
    return 1;
}

// --tokenizer: takes a run of the document's ids as fat5_tokenize_stream makes them
static fat5_status pt_take_ids(void *user, const int32_t *ids, int64_t n) {
    pt_state *p = (pt_state *)user;
    int64_t i;
    for (i = 0; i < n; i++)
        if (!pt_id(p, (uint32_t)ids[i])) {
            p->write_failed = 1;   // pt_flush said why
            return FAT5_ERR_IO;
        }
    p->doc_ids += n;
    return FAT5_OK;
}

// --tokenizer: a document's text s[0..n) to ids, streamed (a long document's ids are never all
// held, and the tokenizer's scratch does not grow with it), then EOS; no ids (whitespace only):
// the document is skipped
static int pt_tok_doc(pt_state *p, const char *s, size_t n) {
    p->doc_ids = 0;
    if (fat5_tokenize_stream(p->tok, s, n, FAT5_TOKENIZE_NO_SPECIAL, pt_take_ids, p) != FAT5_OK)
        return p->write_failed ? 0 : pt_fail(p);
    if (p->doc_ids == 0) return 1;
    p->n_docs++;
    return pt_id(p, (uint32_t)p->eos);
}

static int pt_end_doc(pt_state *p) {
    p->pending_nl = 0;
    if (p->doc_len == 0) return 1;   // empty documents are skipped
    p->doc_len = 0;
    if (p->tok) {
        size_t len = p->text_len;
        p->text_len = 0;
        return pt_tok_doc(p, p->text, len);
    }
    p->n_docs++;
    return pt_id(p, 1);
}

// whether the line (without its newline) is blank: only spaces, tabs, \r, \f, \v
static int pt_blank(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (!strchr(" \t\r\f\v", s[i])) return 0;
    return 1;
}

static int pt_file(pt_state *p, const char *path, const char *sep) {
    FILE *fp;
    char *line = NULL;
    size_t cap = 0, bad;
    ssize_t got;
    int64_t lineno = 0, off = 0;
    int ok = 1, from_stdin = strcmp(path, "-") == 0;
    if (from_stdin) {
        fp = stdin;
    } else if (!pt_open_regular(path, &fp)) {
        return 0;
    }
    while ((got = getline(&line, &cap, fp)) > 0) {
        size_t n = (size_t)got, body;
        lineno++;
        if ((bad = fat5_utf8_valid_len(line, n)) < n) {
            fprintf(stderr, "pretokenize: %s: line %lld, byte %lld: not valid UTF-8\n", path, (long long)lineno,
                    (long long)(off + (int64_t)bad));
            ok = 0;
            break;
        }
        off += got;
        p->in_bytes += got;
        if (p->in_bytes >= p->next_report) {
            fprintf(stderr, "pretokenize: %s: %lld MiB read, %lld documents so far\n", path,
                    (long long)(p->in_bytes >> 20), (long long)p->n_docs);
            p->next_report += (int64_t)64 << 20;
        }
        body = n - (line[n - 1] == '\n');
        if (!strcmp(sep, "file")) {
            ok = pt_bytes(p, line, n);
        } else if (!strcmp(sep, "line")) {   // --tokenizer: the line is the document's text, not copied
            ok = p->tok ? (body == 0 || pt_tok_doc(p, line, body)) : pt_bytes(p, line, body) && pt_end_doc(p);
        } else if (!strcmp(sep, "blank") ? pt_blank(line, body)
                                         : (body - (body > 0 && line[body - 1] == '\r') == strlen(sep) &&
                                            !memcmp(line, sep, strlen(sep)))) {
            ok = pt_end_doc(p);
        } else {
            ok = pt_bytes(p, line, body);
            p->pending_nl++;
        }
        if (!ok) break;
    }
    if (ok && ferror(fp)) {
        fprintf(stderr, "pretokenize: %s: read failed\n", path);
        ok = 0;
    }
    free(line);
    if (!from_stdin) fclose(fp);
    return ok && pt_end_doc(p);   // a file always ends a document
}

// --pairs: each row of a pairs file (spec: a file, or "inputs.txt,targets.txt") as two documents,
// its input's ids then its target's, as the pairs reader makes them (each ending with the EOS)
static int pt_pairs_file(pt_state *p, const char *spec, const fat5_pairs_config *pc) {
    char a[4096], b[4096];
    const char *comma = strchr(spec, ',');
    fat5_pairs *pp = NULL;
    fat5_pairs_row row;
    int has = 1, w, ok = 1;
    snprintf(a, sizeof a, "%.*s", comma ? (int)(comma - spec) : (int)strlen(spec), spec);
    if (comma) snprintf(b, sizeof b, "%s", comma + 1);
    if (fat5_pairs_open(p->ctx, a, comma ? b : NULL, pc, &pp) != FAT5_OK) return pt_fail(p);
    while (ok) {
        if (fat5_pairs_next(pp, p->tok, &row, &has) != FAT5_OK) {
            ok = pt_fail(p);
            break;
        }
        if (!has) break;
        for (w = 0; w < 2 && ok; w++) {
            const int32_t *ids = w ? row.target_ids : row.input_ids;
            int64_t n = w ? row.n_target : row.n_input, k;
            for (k = 0; k < n - 1 && ids[k] != p->eos; k++) {}
            if (n < 1 || k != n - 1 || ids[n - 1] != p->eos) {
                fprintf(stderr, "pretokenize: %s: line %lld: the %s's ids do not end with the EOS (%d) alone: a pairs "
                        "file needs them to\n", w && comma ? b : a, (long long)row.line, w ? "target" : "input",
                        (int)p->eos);
                ok = 0;
            } else {
                ok = pt_flush(p) && (fat5_tokens_writer_append(p->out, ids, n) == FAT5_OK || pt_fail(p));
                p->n_ids += n;
                p->n_docs++;
            }
        }
        p->in_bytes += (int64_t)(row.input_len + row.target_len);
        p->n_rows++;
    }
    fat5_pairs_close(pp);
    return ok;
}

enum { O_SEP = 1, O_TOKENIZER, O_VOCAB, O_WIDTH, O_OUTPUT, O_PAIRS, O_TEXT_COL, O_SUMMARY_COL, O_PREFIX, O_MAX_SRC,
       O_MAX_TGT };
static const cli_opt opts[] = {
    {.id = O_SEP, .name = "sep", .kind = CLI_STR, .meta = "MODE", .def = "file",
     .help = "where documents end: file (each input file is one document), line (one document\n"
             "per non-empty line), blank (documents separated by blank lines), or STR: a line\n"
             "holding exactly STR (e.g. % for fortune files)"},
    {.id = O_TOKENIZER, .name = "tokenizer", .kind = CLI_STR, .meta = "PATH", .def = "byte-level (ByT5's ids)",
     .help = "tokenizer.json, SentencePiece .model or a directory holding one: each document\n"
             "tokenized with it (no post-processor), then its EOS id"},
    {.id = O_VOCAB, .name = "vocab", .alias = "vocab_size", .kind = CLI_INT, .meta = "N",
     .def = "384 byte-level, else the tokenizer's", .lo = 1, .hi = 2147483648.0,
     .help = "vocabulary size written to the header (byte-level: at least 259;\n"
             "--tokenizer: at least the tokenizer's vocabulary size)"},
    {.id = O_WIDTH, .name = "width", .kind = CLI_CHOICE, .choices = "2|4", .def = "2",
     .help = "bytes per id: 2 holds vocabularies up to 65536"},
    {.id = O_OUTPUT, .name = "output", .alias = "-o", .kind = CLI_STR, .meta = "OUT.tok",
     .help = "the token file to write (atomically)"},
    {.id = O_PAIRS, .name = "pairs", .kind = CLI_FLAG,
     .help = "the inputs are (input, target) pairs files (.jsonl, .tsv, .csv, or inputs.txt,targets.txt):\n"
             "each row written as two documents, input then target (fine-tuning's train_file)"},
    {.id = O_TEXT_COL, .name = "text-column", .kind = CLI_STR, .meta = "NAME", .def = "input",
     .help = "--pairs: the input's field or column"},
    {.id = O_SUMMARY_COL, .name = "summary-column", .kind = CLI_STR, .meta = "NAME", .def = "target",
     .help = "--pairs: the target's field or column"},
    {.id = O_PREFIX, .name = "source-prefix", .kind = CLI_STR, .meta = "TEXT", .help = "--pairs: put before every input"},
    {.id = O_MAX_SRC, .name = "max-source-length", .kind = CLI_INT, .meta = "N", .def = "0 (no limit)", .lo = 0,
     .hi = 1e9, .help = "--pairs: input ids at most, EOS included (Hugging Face's truncation)"},
    {.id = O_MAX_TGT, .name = "max-target-length", .kind = CLI_INT, .meta = "N", .def = "0 (no limit)", .lo = 0,
     .hi = 1e9, .help = "--pairs: target ids at most, EOS included"},
};

int main(int argc, char **argv) {
    static pt_state p;
    fat5_ctx_config cc = fat5_ctx_config_default();
    const char *sep = "file", *out = NULL, *tok_path = NULL;
    long long vocab = -1;
    int pairs = 0;
    fat5_pairs_config pc = fat5_pairs_config_default();
    const char **ins = (const char **)malloc((size_t)argc * sizeof *ins);
    int i, n_in = 0, ok = 1, o;
    cli c;
    if (!ins) return 1;
    cli_init(&c, "pretokenize", "usage: pretokenize [options] -o OUT.tok IN.txt...\n"
             "UTF-8 text to a fat5 token file, byte-level (ByT5 ids: byte + 3, eos 1) or with a tokenizer.\n"
             "IN.txt may be - for standard input. With --pairs, the inputs are pairs files for fine-tuning.\n", opts, (int)(sizeof opts / sizeof opts[0]), argc, argv);
    while ((o = cli_next(&c)) != CLI_END) {
        if (o < 0) {
            free(ins);
            return cli_status(o);
        }
        if (o == O_SEP) {
            sep = c.val;
            if (!sep[0]) {
                free(ins);
                return cli_status(cli_bad(&c, "needs a non-empty value"));
            }
        } else if (o == O_TOKENIZER) tok_path = c.val;
        else if (o == O_VOCAB) vocab = c.ival;
        else if (o == O_WIDTH) p.width = c.ival ? 4 : 2;
        else if (o == O_OUTPUT) out = c.val;
        else if (o == O_PAIRS) pairs = (int)c.ival;
        else if (o == O_TEXT_COL) pc.input_field = c.val;
        else if (o == O_SUMMARY_COL) pc.target_field = c.val;
        else if (o == O_PREFIX) pc.prefix = c.val;
        else if (o == O_MAX_SRC) pc.max_source_length = c.ival;
        else if (o == O_MAX_TGT) pc.max_target_length = c.ival;
        else ins[n_in++] = c.val;
    }
    if (!p.width) p.width = 2;
    if (!out || !n_in) {
        cli_fail(&c, "%s (usage: pretokenize [options] -o OUT.tok IN.txt...)", !out ? "no output file (-o OUT.tok)"
                                                                                   : "no input files");
        free(ins);
        return 2;
    }
    if (!tok_path && vocab < 0) vocab = 384;
    if (!tok_path && (vocab < 259 || vocab > (p.width == 2 ? 65536 : 2147483648LL))) {
        fprintf(stderr, "pretokenize: --vocab %lld: want 259 .. %lld for %d-byte ids\n", vocab,
                p.width == 2 ? 65536LL : 2147483648LL, p.width);
        return 2;
    }
    if (fat5_ctx_create(&cc, &p.ctx, NULL, 0) != FAT5_OK) {
        fprintf(stderr, "pretokenize: out of memory\n");
        return 1;
    }
    p.eos = 1;
    if (tok_path) {
        int64_t tv;
        if (fat5_tokenizer_load(p.ctx, tok_path, &p.tok) != FAT5_OK) {
            pt_fail(&p);
            fat5_ctx_destroy(p.ctx);
            return 1;
        }
        tv = fat5_tokenizer_vocab_size(p.tok);
        p.eos = fat5_tokenizer_eos_id(p.tok);
        ok = 2;
        if (p.eos < 0) {
            fprintf(stderr, "pretokenize: %s: the tokenizer has no EOS token to end documents with\n", tok_path);
            ok = 1;
        } else if (vocab >= 0 && vocab < tv) {
            fprintf(stderr, "pretokenize: --vocab %lld: below the tokenizer's vocabulary size %lld\n", vocab, (long long)tv);
        } else if ((vocab < 0 ? tv : vocab) > (p.width == 2 ? 65536 : 2147483648LL)) {
            fprintf(stderr, "pretokenize: vocabulary %lld does not fit %d-byte ids (at most %lld)%s\n",
                    vocab < 0 ? (long long)tv : vocab, p.width, p.width == 2 ? 65536LL : 2147483648LL,
                    p.width == 2 ? ": use --width 4" : "");
        } else {
            ok = 0;
        }
        if (ok) {
            fat5_tokenizer_destroy(p.tok);
            fat5_ctx_destroy(p.ctx);
            return ok;
        }
        ok = 1;
        if (vocab < 0) vocab = tv;
    }
    p.next_report = (int64_t)64 << 20;
    if (fat5_tokens_writer_create(p.ctx, out, vocab, p.eos, p.width, &p.out) != FAT5_OK) ok = pt_fail(&p);
    for (i = 0; i < n_in && ok; i++) ok = pairs ? pt_pairs_file(&p, ins[i], &pc) : pt_file(&p, ins[i], sep);
    if (ok && p.n_docs == 0) {
        fprintf(stderr, "pretokenize: the input holds no document (every one was empty)\n");
        ok = 0;
    }
    ok = ok && pt_flush(&p);
    if (ok && fat5_tokens_writer_commit(p.out) != FAT5_OK) ok = pt_fail(&p);
    fat5_tokens_writer_destroy(p.out);   // without a commit: the temporary file is removed
    if (!ok) {
        fat5_tokenizer_destroy(p.tok);
        fat5_ctx_destroy(p.ctx);
        free(p.text);
        free(ins);
        return 1;
    }
    if (pairs) {
        fprintf(stderr, "pretokenize: %s: %lld rows (%lld documents, input and target in turn), %lld ids, vocabulary "
                "%lld, eos %d (%s%s)\n", out, (long long)p.n_rows, (long long)p.n_docs, (long long)p.n_ids, vocab,
                (int)p.eos, p.tok ? "tokenizer " : "byte-level", p.tok ? tok_path : "");
    } else if (p.tok) {
        int32_t s0 = fat5_tokenizer_piece_to_id(p.tok, "<extra_id_0>");
        fprintf(stderr, "pretokenize: %s: %lld documents, %lld ids (%lld bytes of text), vocabulary %lld, eos %d",
                out, (long long)p.n_docs, (long long)p.n_ids, (long long)p.in_bytes, vocab, (int)p.eos);
        if (s0 >= 0) fprintf(stderr, ", sentinels from <extra_id_0> = %d", (int)s0);
        fprintf(stderr, " (tokenizer %s)\n", tok_path);
    } else {
        fprintf(stderr, "pretokenize: %s: %lld documents, %lld ids (%lld bytes of text), vocabulary %lld, eos 1, "
                "sentinels %lld down to 259\n", out, (long long)p.n_docs, (long long)p.n_ids, (long long)p.in_bytes,
                vocab, vocab - 1);
    }
    fat5_tokenizer_destroy(p.tok);
    fat5_ctx_destroy(p.ctx);
    free(p.text);
    free(ins);
    return 0;
}
