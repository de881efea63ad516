// =============================================================================================
// ==[8.6] text: pairs data for fine-tuning (JSONL, TSV, CSV, parallel text files) ==
// (input, target) rows read one at a time from a file (or two parallel files) and tokenized with
// a checkpoint's tokenizer, or byte-level with ByT5's ids when there is none. The reader lives
// in the text layer because it calls the tokenizer, which the train layer below may not reach.
//
// Reading: a 64 KiB buffer per file and one line at a time (never the whole file); a line is
// what ends at "\n" (a "\r" before it is dropped; the last line need not end with one). Each line
// is checked before use: valid UTF-8, no NUL byte, at most max_line_bytes. A CSV record may span
// several lines (newlines inside quotes); its rows are named by the line where they start.
//
// Tokenizing follows Hugging Face's tokenizer(text, truncation=True, max_length=N): the text's
// ids without special tokens are cut to N minus the special tokens the tokenizer adds, then the
// special tokens are added (T5: "</s>" after the text), so a row never exceeds N and keeps its
// EOS. The prefix is prepended to the input text before tokenizing, as the Hugging Face
// fine-tuning scripts do (prefix + text).
//
// Errors are "file: line N: reason". An error in one row's content (a missing field, a value
// that is not a string, an empty target, a wrong column count, a bad line of JSONL / TSV /
// parallel files) leaves the reader after that row, so a caller may skip it by asking for the
// next; an error that leaves the position unknown (I/O, a header, an over-long line, CSV
// quoting, parallel files of different lengths) stops the reader until fat5_pairs_rewind.

#define FAT5__PAIRS_BUF ((size_t)1 << 16)
#define FAT5__PAIRS_MAX_LINE ((int64_t)64 << 20)   // default max_line_bytes
#define FAT5__PAIRS_JSON_DEPTH 64

// one input file read a line at a time
typedef struct fat5__pfile {
    char *path;           // owned copy
    FILE *fp;
    char *buf;            // FAT5__PAIRS_BUF bytes read ahead
    size_t pos, len;
    int eof;              // fread reached the end of the file
    fat5__tbuf line;      // the current line, NUL-terminated, its "\n" (and "\r" before it) removed
    int crlf;             // the current line ended with "\r\n"
    int64_t lineno;       // the current line's number (1-based; 0 before the first)
    uint64_t offset;      // byte offset of the current line's first byte in the file
    uint64_t next_off;    // byte offset of the next line
} fat5__pfile;

struct fat5_pairs {
    fat5_ctx *ctx;
    fat5_pairs_format format;
    fat5__pfile f[2];             // f[1]: the target file of parallel files
    int n_files;
    char *input_field, *target_field, *prefix;
    int named;                    // the field names were given (TSV: a header must name them)
    int64_t max_len[2];           // max_source_length, max_target_length (0: none)
    int64_t max_line;
    int started;                  // the header (if any) has been read
    int pending;                  // TSV without a header: the line read as a header is the first row
    int n_cols, col[2];           // TSV / CSV: columns per row, the input and target columns
    fat5_status stuck;            // non-zero: an earlier error stopped the reader
    int64_t n_rows, n_seen;       // rows returned / rows met (bad ones too) since open or rewind
    fat5__tbuf text[2];           // the current row's input and target text
    fat5__tbuf rec;               // CSV / TSV: the current record's fields, each NUL-terminated
    size_t *fld;                  // offsets of the fields in rec
    size_t n_fld, cap_fld;
    fat5__tbuf scratch;           // prefix + input
    fat5__ubuf content, ids[2];   // ids without special tokens; the row's input and target ids
};

FAT5_API fat5_pairs_config fat5_pairs_config_default(void) {
    fat5_pairs_config c;
    memset(&c, 0, sizeof c);
    c.format = FAT5_PAIRS_AUTO;
    return c;
}

// ---------------------------------------------------------------------------------------------
// lines

// Reads the next line of f into f->line; *got = 0 at the end of the file. Nothing is checked but
// the length (fat5__pairs_check_line checks the bytes).
static fat5_status fat5__pairs_read_line(fat5_pairs *p, fat5__pfile *f, int *got) {
    int had_nl = 0;
    *got = 0;
    f->line.n = 0;
    f->crlf = 0;
    if (!f->line.p && !fat5__tbuf_put(p->ctx, &f->line, "", 0)) goto oom;
    f->line.p[0] = 0;
    for (;;) {
        const char *nl;
        size_t take;
        if (f->pos == f->len) {
            size_t n;
            if (f->eof) break;
            n = fread(f->buf, 1, FAT5__PAIRS_BUF, f->fp);
            if (n == 0) {
                if (ferror(f->fp)) {
                    p->stuck = FAT5_ERR_IO;
                    return fat5__err(p->ctx, FAT5_ERR_IO, "%s: line %lld: read failed: %s", f->path,
                                     (long long)f->lineno + 1, strerror(errno));
                }
                f->eof = 1;
                break;
            }
            f->pos = 0;
            f->len = n;
        }
        nl = FAT5__CAST(const char *, memchr(f->buf + f->pos, '\n', f->len - f->pos));
        take = nl ? (size_t)(nl - (f->buf + f->pos)) : f->len - f->pos;
        if ((int64_t)(f->line.n + take) > p->max_line) {
            p->stuck = FAT5_ERR_FORMAT;
            return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: longer than the limit of %lld bytes "
                             "(max_line_bytes)", f->path, (long long)f->lineno + 1, (long long)p->max_line);
        }
        if (!fat5__tbuf_put(p->ctx, &f->line, f->buf + f->pos, take)) goto oom;
        f->pos += take;
        if (nl) {
            f->pos++;
            had_nl = 1;
            break;
        }
    }
    if (f->line.n == 0 && !had_nl) return FAT5_OK;   // the end of the file
    f->lineno++;
    f->offset = f->next_off;
    f->next_off += f->line.n + (size_t)had_nl;
    if (f->line.n && f->line.p[f->line.n - 1] == '\r') {
        f->line.p[--f->line.n] = 0;
        f->crlf = had_nl;
    }
    *got = 1;
    return FAT5_OK;
oom:
    p->stuck = FAT5_ERR_OUT_OF_MEMORY;
    return fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: line %lld: out of memory", f->path, (long long)f->lineno + 1);
}

// The current line holds valid UTF-8 and no NUL byte; else FAT5_ERR_FORMAT naming the byte.
static fat5_status fat5__pairs_check_line(fat5_pairs *p, const fat5__pfile *f) {
    size_t k = fat5_utf8_valid_len(f->line.p, f->line.n);
    const char *z = FAT5__CAST(const char *, memchr(f->line.p, 0, k));
    if (z)
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: a NUL byte at byte offset %llu of the file (column %zu "
                         "of the line)", f->path, (long long)f->lineno, (unsigned long long)(f->offset + (size_t)(z - f->line.p)),
                         (size_t)(z - f->line.p) + 1);
    if (k < f->line.n)
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: invalid UTF-8 at byte offset %llu of the file (column "
                         "%zu of the line: 0x%02X)", f->path, (long long)f->lineno, (unsigned long long)(f->offset + k),
                         k + 1, (unsigned)(unsigned char)f->line.p[k]);
    return FAT5_OK;
}

static int fat5__pairs_blank(const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// records: fields collected into p->rec

static int fat5__pairs_field_begin(fat5_pairs *p) {
    if (p->n_fld == p->cap_fld) {
        size_t c = p->cap_fld ? p->cap_fld * 2 : 8;
        size_t *q = FAT5__CAST(size_t *, fat5__realloc(p->ctx, p->fld, c * sizeof *q));
        if (!q) return 0;
        p->fld = q;
        p->cap_fld = c;
    }
    p->fld[p->n_fld++] = p->rec.n;
    return 1;
}

// ends the current field (its NUL) and starts none
static int fat5__pairs_field_end(fat5_pairs *p) {
    if (!fat5__tbuf_put(p->ctx, &p->rec, "", 0)) return 0;
    p->rec.n++;   // keep the NUL between fields
    return 1;
}

static const char *fat5__pairs_field(const fat5_pairs *p, int i) { return p->rec.p + p->fld[i]; }
static size_t fat5__pairs_field_len(const fat5_pairs *p, int i) {
    return (i + 1 < (int)p->n_fld ? p->fld[i + 1] : p->rec.n) - p->fld[i] - 1;
}

// TSV: the current line split on tabs into p->rec
static fat5_status fat5__pairs_split_tsv(fat5_pairs *p, const fat5__pfile *f) {
    const char *s = f->line.p, *end = s + f->line.n;
    p->rec.n = 0;
    p->n_fld = 0;
    for (;;) {
        const char *t = FAT5__CAST(const char *, memchr(s, '\t', (size_t)(end - s)));
        size_t n = t ? (size_t)(t - s) : (size_t)(end - s);
        if (!fat5__pairs_field_begin(p) || !fat5__tbuf_put(p->ctx, &p->rec, s, n) || !fat5__pairs_field_end(p))
            return fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: line %lld: out of memory", f->path, (long long)f->lineno);
        if (!t) return FAT5_OK;
        s = t + 1;
    }
}

// CSV (RFC 4180): the next record into p->rec, starting with the next line that is not empty;
// *got = 0 at the end of the file. Quoted fields may hold commas, doubled quotes and newlines
// (kept as they were written, "\r\n" or "\n"). *line gets the record's first line.
static fat5_status fat5__pairs_read_csv(fat5_pairs *p, int *got, int64_t *line) {
    fat5__pfile *f = &p->f[0];
    fat5_status st;
    size_t i = 0;
    p->rec.n = 0;
    p->n_fld = 0;
    do {
        if ((st = fat5__pairs_read_line(p, f, got)) || !*got) return st;
    } while (f->line.n == 0);
    *line = f->lineno;
    if ((st = fat5__pairs_check_line(p, f))) return p->stuck = st;
    for (;;) {   // one field per pass
        const char *s = f->line.p;
        if (!fat5__pairs_field_begin(p)) goto oom;
        if (s[i] == '"') {
            int64_t open_line = f->lineno;
            size_t open_col = i + 1;
            i++;
            for (;;) {
                const char *q = FAT5__CAST(const char *, memchr(f->line.p + i, '"', f->line.n - i));
                if (!q) {   // the field goes on after the newline
                    int more;
                    if (!fat5__tbuf_put(p->ctx, &p->rec, f->line.p + i, f->line.n - i) ||
                        !fat5__tbuf_put(p->ctx, &p->rec, f->crlf ? "\r\n" : "\n", f->crlf ? 2 : 1))
                        goto oom;
                    if ((st = fat5__pairs_read_line(p, f, &more))) return st;
                    if (!more) {
                        p->stuck = FAT5_ERR_FORMAT;
                        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: unterminated quoted field: the "
                                         "quote at line %lld, column %zu is never closed", f->path, (long long)*line,
                                         (long long)open_line, open_col);
                    }
                    if ((st = fat5__pairs_check_line(p, f))) return p->stuck = st;
                    i = 0;
                    continue;
                }
                if (!fat5__tbuf_put(p->ctx, &p->rec, f->line.p + i, (size_t)(q - (f->line.p + i)))) goto oom;
                i = (size_t)(q - f->line.p) + 1;
                if (i < f->line.n && f->line.p[i] == '"') {   // a doubled quote
                    if (!fat5__tbuf_put(p->ctx, &p->rec, "\"", 1)) goto oom;
                    i++;
                    continue;
                }
                break;   // the closing quote
            }
            if (i < f->line.n && f->line.p[i] != ',') {
                p->stuck = FAT5_ERR_FORMAT;
                return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: column %zu: '%c' after a closing quote "
                                 "(a quote inside a quoted field is written twice: \"\")", f->path,
                                 (long long)f->lineno, i + 1, f->line.p[i]);
            }
        } else {
            size_t j = i;
            while (j < f->line.n && s[j] != ',') {
                if (s[j] == '"') {
                    p->stuck = FAT5_ERR_FORMAT;
                    return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: column %zu: a quote inside an unquoted "
                                     "field (quote the whole field and write the quote twice)", f->path,
                                     (long long)f->lineno, j + 1);
                }
                j++;
            }
            if (!fat5__tbuf_put(p->ctx, &p->rec, s + i, j - i)) goto oom;
            i = j;
        }
        if (!fat5__pairs_field_end(p)) goto oom;
        if (i >= f->line.n) return FAT5_OK;
        i++;   // the comma
        if (i == f->line.n) {   // a comma at the end: one more, empty field
            if (!fat5__pairs_field_begin(p) || !fat5__pairs_field_end(p)) goto oom;
            return FAT5_OK;
        }
    }
oom:
    p->stuck = FAT5_ERR_OUT_OF_MEMORY;
    return fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: line %lld: out of memory", f->path, (long long)f->lineno);
}

// TSV / CSV: finds the columns the row in p->rec names input_field and target_field (p->col);
// 1 when it names both. *st is an error when it names one twice.
static int fat5__pairs_find_columns(fat5_pairs *p, fat5_status *st, int64_t line) {
    int i, k;
    p->col[0] = p->col[1] = -1;
    for (i = 0; i < (int)p->n_fld; i++)
        for (k = 0; k < 2; k++)
            if (strcmp(fat5__pairs_field(p, i), k ? p->target_field : p->input_field) == 0) {
                if (p->col[k] >= 0) {
                    *st = fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: the header names column \"%s\" twice",
                                    p->f[0].path, (long long)line, k ? p->target_field : p->input_field);
                    return 0;
                }
                p->col[k] = i;
            }
    *st = FAT5_OK;
    return p->col[0] >= 0 && p->col[1] >= 0;
}

// The header row (CSV always; TSV when its first row names both columns, or must when the names
// were given); on return the next read is the first data row.
static fat5_status fat5__pairs_header(fat5_pairs *p) {
    fat5__pfile *f = &p->f[0];
    fat5_status st;
    int got;
    int64_t line = 0;
    if (p->format == FAT5_PAIRS_CSV) {
        if ((st = fat5__pairs_read_csv(p, &got, &line))) return st;
        if (!got) return FAT5_OK;   // an empty file: fat5_pairs_next says so
    } else {
        do {
            if ((st = fat5__pairs_read_line(p, f, &got)) || !got) return st;
        } while (f->line.n == 0);
        line = f->lineno;
        if ((st = fat5__pairs_check_line(p, f))) return st;
        if ((st = fat5__pairs_split_tsv(p, f))) return st;
        if (!fat5__pairs_find_columns(p, &st, line) && !st && !p->named) {
            // no header: two columns, input then target; this line is the first row
            p->n_cols = 2;
            p->col[0] = 0;
            p->col[1] = 1;
            p->pending = 1;
            return FAT5_OK;
        }
        if (st) return st;
    }
    if (!fat5__pairs_find_columns(p, &st, line)) {
        char name[64];
        int k = p->col[0] < 0 ? 0 : 1;
        if (st) return st;
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: the header row has no column \"%s\" (its first "
                         "column is \"%s\"; set the column names in the pairs options)", f->path, (long long)line,
                         k ? p->target_field : p->input_field,
                         fat5__msg_name(name, sizeof name, fat5__pairs_field(p, 0)));
    }
    p->n_cols = (int)p->n_fld;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// tokenizing

// The ids of text s[0..n) as Hugging Face's tokenizer(s, truncation=True, max_length=max_len)
// gives them (max_len 0: no truncation) into out; tok NULL: ByT5's (byte + 3, then EOS 1).
// *n_content gets the ids of the text before truncation (special tokens not counted), *cut the
// ids truncation dropped.
static fat5_status fat5__pairs_encode(fat5_pairs *p, fat5_tokenizer *tok, const char *s, size_t n, int64_t max_len,
                                      fat5__ubuf *out, int64_t *n_content, int64_t *cut) {
    fat5__ubuf *c = &p->content;
    int64_t n_special = 0, keep;
    int k;
    c->n = 0;
    out->n = 0;
    if (!tok) {
        size_t i;
        if (!fat5__grow(p->ctx, (void **)&c->p, &c->cap, n ? n : 1, sizeof(uint32_t))) return FAT5_ERR_OUT_OF_MEMORY;
        for (i = 0; i < n; i++) c->p[i] = (uint32_t)(unsigned char)s[i] + 3;
        c->n = n;
        n_special = 1;
    } else {
        fat5_status st = fat5__encode_one(tok, s, n, c);
        if (st) return st;
        if (!tok->is_json) {
            n_special = tok->eos_id >= 0;
        } else if (tok->n_tmpl[0] >= 0) {
            for (k = 0; k < tok->n_tmpl[0]; k++)
                if (tok->tmpl[0][k].seq < 0) n_special += tok->tmpl[0][k].n;
        }
    }
    *n_content = (int64_t)c->n;
    keep = (int64_t)c->n;
    if (max_len > 0 && keep > max_len - n_special) keep = max_len - n_special;
    *cut = (int64_t)c->n - keep;
    if (!tok) {
        if (!fat5__ubuf_append(p->ctx, out, c->p, (size_t)keep) || !fat5__ubuf_push(p->ctx, out, 1))
            return FAT5_ERR_OUT_OF_MEMORY;
    } else if (tok->is_json && tok->n_tmpl[0] >= 0) {
        for (k = 0; k < tok->n_tmpl[0]; k++) {
            const fat5__titem *it = &tok->tmpl[0][k];
            if (!(it->seq >= 0 ? fat5__ubuf_append(p->ctx, out, c->p, (size_t)keep)
                               : fat5__ubuf_append(p->ctx, out, tok->tmpl_ids.p + it->first, it->n)))
                return FAT5_ERR_OUT_OF_MEMORY;
        }
    } else {
        if (!fat5__ubuf_append(p->ctx, out, c->p, (size_t)keep) ||
            (n_special && !fat5__ubuf_push(p->ctx, out, (uint32_t)tok->eos_id)))
            return FAT5_ERR_OUT_OF_MEMORY;
    }
    if (!out->p && !fat5__ubuf_push(p->ctx, out, 0)) return FAT5_ERR_OUT_OF_MEMORY;   // never NULL
    return FAT5_OK;
}

// The special tokens the tokenizer adds to one sequence (ByT5's: the EOS)
static int64_t fat5__pairs_n_special(const fat5_tokenizer *tok) {
    int64_t n = 0;
    int k;
    if (!tok) return 1;
    if (!tok->is_json) return tok->eos_id >= 0;
    for (k = 0; k < tok->n_tmpl[0]; k++)
        if (tok->tmpl[0][k].seq < 0) n += tok->tmpl[0][k].n;
    return n;
}

// The row in p->text tokenized into p->ids and described in *row.
static fat5_status fat5__pairs_make_row(fat5_pairs *p, fat5_tokenizer *tok, const char *path, const char *tpath,
                                        int64_t line, fat5_pairs_row *row) {
    static const char *const what[2] = {"input", "target"};
    int64_t n_content[2], cut[2];
    int w;
    if (p->text[1].n == 0)
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: empty target", tpath, (long long)line);
    p->scratch.n = 0;
    if (!fat5__tbuf_put(p->ctx, &p->scratch, p->prefix ? p->prefix : "", p->prefix ? strlen(p->prefix) : 0) ||
        !fat5__tbuf_put(p->ctx, &p->scratch, p->text[0].p, p->text[0].n))
        return fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: line %lld: out of memory", path, (long long)line);
    for (w = 0; w < 2; w++) {
        const fat5__tbuf *t = w ? &p->text[1] : &p->scratch;
        fat5_status st = fat5__pairs_encode(p, tok, t->p, t->n, p->max_len[w], &p->ids[w], &n_content[w], &cut[w]);
        if (st == FAT5_ERR_OUT_OF_MEMORY)
            return fat5__err(p->ctx, st, "%s: line %lld: out of memory", w ? tpath : path, (long long)line);
        if (st) {
            char msg[FAT5__ERRMSG_CAP];
            snprintf(msg, sizeof msg, "%s", fat5_last_error(tok->ctx));
            return fat5__err(p->ctx, st, "%s: line %lld: tokenizing the %s: %s", w ? tpath : path, (long long)line,
                             what[w], msg);
        }
    }
    if (n_content[1] == 0)
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: empty target (its text gives no tokens)", tpath,
                         (long long)line);
    row->input_ids = FAT5__CAST(const int32_t *, (void *)p->ids[0].p);
    row->n_input = (int64_t)p->ids[0].n;
    row->target_ids = FAT5__CAST(const int32_t *, (void *)p->ids[1].p);
    row->n_target = (int64_t)p->ids[1].n;
    row->input_cut = cut[0];
    row->target_cut = cut[1];
    row->input_text = p->text[0].p;
    row->input_len = p->text[0].n;
    row->target_text = p->text[1].p;
    row->target_len = p->text[1].n;
    row->line = line;
    row->index = p->n_rows;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// the rows of each format: the next row's texts into p->text; *got = 0 at the end

static fat5_status fat5__pairs_set_text(fat5_pairs *p, int w, const char *s, size_t n) {
    p->text[w].n = 0;
    if (!fat5__tbuf_put(p->ctx, &p->text[w], s, n))
        return fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", p->f[0].path);
    return FAT5_OK;
}

static fat5_status fat5__pairs_next_jsonl(fat5_pairs *p, int *got, int64_t *line) {
    static const char *const what[2] = {"input", "target"};
    fat5__pfile *f = &p->f[0];
    fat5__jdoc *doc = NULL;
    const fat5__json *root;
    fat5_status st;
    char where[600];
    int w;
    do {
        if ((st = fat5__pairs_read_line(p, f, got)) || !*got) return st;
    } while (fat5__pairs_blank(f->line.p, f->line.n));
    *line = f->lineno;
    p->n_seen++;
    if ((st = fat5__pairs_check_line(p, f))) return st;
    if (f->line.p[strspn(f->line.p, " \t")] == '[')
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: a JSON array: pairs data is JSON Lines, one object "
                         "per line", f->path, (long long)*line);
    snprintf(where, sizeof where, "%s: line %lld", f->path, (long long)*line);
    if ((st = fat5__json_parse(p->ctx, where, f->line.p, f->line.n, FAT5__PAIRS_JSON_DEPTH, &doc))) return st;
    root = fat5__json_root(doc);
    if (root->type != FAT5__J_OBJECT) {
        st = fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: %s, not a JSON object", f->path, (long long)*line,
                       fat5__json_type_name(root->type));
    }
    for (w = 0; w < 2 && !st; w++) {
        const char *name = w ? p->target_field : p->input_field;
        const fat5__json *v = fat5__json_get(root, name);
        if (!v)
            st = fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: missing field \"%s\" (the %s)", f->path,
                           (long long)*line, name, what[w]);
        else if (v->type != FAT5__J_STRING)
            st = fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: field \"%s\" is %s, not a string", f->path,
                           (long long)*line, name, fat5__json_type_name(v->type));
        else
            st = fat5__pairs_set_text(p, w, v->str, v->len);
    }
    fat5__json_free(p->ctx, doc);
    return st;
}

static fat5_status fat5__pairs_next_columns(fat5_pairs *p, int *got, int64_t *line) {
    fat5__pfile *f = &p->f[0];
    fat5_status st;
    int w;
    if (p->format == FAT5_PAIRS_CSV) {
        if ((st = fat5__pairs_read_csv(p, got, line)) || !*got) return st;
        p->n_seen++;
    } else {
        if (p->pending) {   // already read, checked and split
            p->pending = 0;
            *got = 1;
        } else {
            do {
                if ((st = fat5__pairs_read_line(p, f, got)) || !*got) return st;
            } while (f->line.n == 0);
            if ((st = fat5__pairs_check_line(p, f)) || (st = fat5__pairs_split_tsv(p, f))) {
                *line = f->lineno;
                p->n_seen++;
                return st;
            }
        }
        *line = f->lineno;
        p->n_seen++;
    }
    if ((int)p->n_fld != p->n_cols)
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: %d column%s, want %d%s", f->path, (long long)*line,
                         (int)p->n_fld, p->n_fld == 1 ? "" : "s", p->n_cols,
                         p->format == FAT5_PAIRS_TSV ? " (columns are separated by one tab)" : " (as in the header)");
    for (w = 0; w < 2; w++)
        if ((st = fat5__pairs_set_text(p, w, fat5__pairs_field(p, p->col[w]), fat5__pairs_field_len(p, p->col[w]))))
            return st;
    return FAT5_OK;
}

static fat5_status fat5__pairs_next_parallel(fat5_pairs *p, int *got, int64_t *line) {
    int g[2], w;
    fat5_status st;
    for (w = 0; w < 2; w++)
        if ((st = fat5__pairs_read_line(p, &p->f[w], &g[w]))) return st;
    *got = g[0] && g[1];
    if (g[0] != g[1]) {
        const fat5__pfile *longer = &p->f[g[1]], *shorter = &p->f[g[0]];
        p->stuck = FAT5_ERR_FORMAT;
        return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: line %lld: no partner line: %s ends after %lld line%s (parallel "
                         "files must have the same number of lines)", longer->path, (long long)longer->lineno,
                         shorter->path, (long long)shorter->lineno, shorter->lineno == 1 ? "" : "s");
    }
    if (!*got) return FAT5_OK;
    *line = p->f[0].lineno;
    p->n_seen++;
    for (w = 0; w < 2; w++)
        if ((st = fat5__pairs_check_line(p, &p->f[w])) ||
            (st = fat5__pairs_set_text(p, w, p->f[w].line.p, p->f[w].line.n)))
            return st;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// the public calls

// the format a path's extension names (case-insensitive), or FAT5_PAIRS_AUTO
static fat5_pairs_format fat5__pairs_format_of(const char *path) {
    static const struct { const char *ext; fat5_pairs_format f; } map[] = {
        {".jsonl", FAT5_PAIRS_JSONL}, {".json", FAT5_PAIRS_JSONL}, {".tsv", FAT5_PAIRS_TSV}, {".csv", FAT5_PAIRS_CSV}};
    size_t n = strlen(path), i, k;
    for (i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t m = strlen(map[i].ext);
        if (n < m) continue;
        for (k = 0; k < m; k++) {
            char ch = path[n - m + k];
            if ((ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch) != map[i].ext[k]) break;
        }
        if (k == m) return map[i].f;
    }
    return FAT5_PAIRS_AUTO;
}

FAT5_API void fat5_pairs_close(fat5_pairs *p) {
    int w;
    if (!p) return;
    for (w = 0; w < 2; w++) {
        if (p->f[w].fp) fclose(p->f[w].fp);
        fat5__free(p->ctx, p->f[w].path);
        fat5__free(p->ctx, p->f[w].buf);
        fat5__free(p->ctx, p->f[w].line.p);
        fat5__free(p->ctx, p->text[w].p);
        fat5__free(p->ctx, p->ids[w].p);
    }
    fat5__free(p->ctx, p->input_field);
    fat5__free(p->ctx, p->target_field);
    fat5__free(p->ctx, p->prefix);
    fat5__free(p->ctx, p->rec.p);
    fat5__free(p->ctx, p->fld);
    fat5__free(p->ctx, p->scratch.p);
    fat5__free(p->ctx, p->content.p);
    fat5__free(p->ctx, p);
}

FAT5_API fat5_status fat5_pairs_open(fat5_ctx *ctx, const char *path, const char *target_path,
                                     const fat5_pairs_config *cfg, fat5_pairs **out) {
    fat5_pairs_config c = cfg ? *cfg : fat5_pairs_config_default();
    fat5_pairs *p;
    fat5_status st;
    int w;
    if (!ctx || !out) return ctx ? fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_open: NULL argument") : FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_open: no path");
    if (c.format == FAT5_PAIRS_AUTO) c.format = target_path ? FAT5_PAIRS_PARALLEL : fat5__pairs_format_of(path);
    if (c.format == FAT5_PAIRS_AUTO)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: cannot tell the pairs format from the name (.jsonl, .json, "
                         ".tsv or .csv); set the format", path);
    if (c.format < FAT5_PAIRS_JSONL || c.format > FAT5_PAIRS_PARALLEL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_open: unknown format %d", (int)c.format);
    if ((c.format == FAT5_PAIRS_PARALLEL) != (target_path != NULL))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: %s", path, target_path ? "two files are parallel text files "
                         "(format FAT5_PAIRS_PARALLEL)" : "parallel text files need the target file too");
    if (c.max_source_length < 0 || c.max_target_length < 0 || c.max_line_bytes < 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_open: max_source_length %lld, max_target_length %lld, "
                         "max_line_bytes %lld: want 0 (none / the default) or more", (long long)c.max_source_length,
                         (long long)c.max_target_length, (long long)c.max_line_bytes);
    if ((c.input_field && !c.input_field[0]) || (c.target_field && !c.target_field[0]) ||
        strcmp(c.input_field ? c.input_field : "input", c.target_field ? c.target_field : "target") == 0)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_open: the input and target fields must be two "
                         "different non-empty names");
    p = FAT5__CAST(fat5_pairs *, fat5__calloc(ctx, 1, sizeof *p));
    if (!p) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    p->ctx = ctx;
    p->format = c.format;
    p->n_files = target_path ? 2 : 1;
    p->named = c.input_field || c.target_field;
    p->max_len[0] = c.max_source_length;
    p->max_len[1] = c.max_target_length;
    p->max_line = c.max_line_bytes ? c.max_line_bytes : FAT5__PAIRS_MAX_LINE;
    if (!(p->input_field = fat5__strdup(ctx, c.input_field ? c.input_field : "input")) ||
        !(p->target_field = fat5__strdup(ctx, c.target_field ? c.target_field : "target")) ||
        (c.prefix && c.prefix[0] && !(p->prefix = fat5__strdup(ctx, c.prefix)))) {
        fat5_pairs_close(p);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    if (p->prefix && fat5_utf8_valid_len(p->prefix, strlen(p->prefix)) != strlen(p->prefix)) {
        fat5_pairs_close(p);
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_open: the prefix is not valid UTF-8");
    }
    for (w = 0; w < p->n_files; w++) {
        const char *name = w ? target_path : path;
        if (!(p->f[w].path = fat5__strdup(ctx, name)) ||
            !(p->f[w].buf = FAT5__CAST(char *, fat5__malloc(ctx, FAT5__PAIRS_BUF)))) {
            fat5_pairs_close(p);
            return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
        }
        if ((st = fat5__open_regular(ctx, name, &p->f[w].fp, NULL))) {
            fat5_pairs_close(p);
            return st;
        }
    }
    *out = p;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_pairs_rewind(fat5_pairs *p) {
    int w;
    if (!p) return FAT5_ERR_INVALID_ARG;
    for (w = 0; w < p->n_files; w++) {
        fat5__pfile *f = &p->f[w];
        clearerr(f->fp);
        if (fseek(f->fp, 0, SEEK_SET) != 0) {
            p->stuck = FAT5_ERR_IO;
            return fat5__err(p->ctx, FAT5_ERR_IO, "%s: cannot seek: %s", f->path, strerror(errno));
        }
        f->pos = f->len = 0;
        f->eof = 0;
        f->lineno = 0;
        f->offset = f->next_off = 0;
    }
    p->started = 0;
    p->pending = 0;
    p->stuck = FAT5_OK;
    p->n_rows = p->n_seen = 0;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_pairs_next(fat5_pairs *p, fat5_tokenizer *tok, fat5_pairs_row *row, int *has_row) {
    fat5_status st;
    int got = 0;
    int64_t line = 0, w;
    if (!p || !row || !has_row)
        return p ? fat5__err(p->ctx, FAT5_ERR_INVALID_ARG, "fat5_pairs_next: NULL argument") : FAT5_ERR_INVALID_ARG;
    *has_row = 0;
    memset(row, 0, sizeof *row);
    if (p->stuck)
        return fat5__err(p->ctx, p->stuck, "%s: an earlier error stopped the reader (fat5_pairs_rewind starts again)",
                         p->f[0].path);
    for (w = 0; w < 2; w++)
        if (p->max_len[w] > 0 && p->max_len[w] < fat5__pairs_n_special(tok))
            return fat5__err(p->ctx, FAT5_ERR_INVALID_ARG, "%s: %s %lld leaves no room: the tokenizer adds %lld "
                             "special token(s) to each sequence", p->f[0].path,
                             w ? "max_target_length" : "max_source_length", (long long)p->max_len[w],
                             (long long)fat5__pairs_n_special(tok));
    if (!p->started && (p->format == FAT5_PAIRS_TSV || p->format == FAT5_PAIRS_CSV)) {
        if ((st = fat5__pairs_header(p))) {
            p->stuck = st;
            return st;
        }
    }
    p->started = 1;
    switch (p->format) {
    case FAT5_PAIRS_JSONL: st = fat5__pairs_next_jsonl(p, &got, &line); break;
    case FAT5_PAIRS_PARALLEL: st = fat5__pairs_next_parallel(p, &got, &line); break;
    default: st = fat5__pairs_next_columns(p, &got, &line); break;
    }
    if (st) return st;
    if (!got) {
        if (p->n_seen == 0)
            return fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s: no pairs: %s", p->f[0].path,
                             p->f[0].lineno == 0 ? "an empty file" : "only a header or blank lines");
        return FAT5_OK;
    }
    if ((st = fat5__pairs_make_row(p, tok, p->f[0].path, p->f[p->n_files - 1].path, line, row))) {
        memset(row, 0, sizeof *row);
        return st;
    }
    p->n_rows++;
    *has_row = 1;
    return FAT5_OK;
}
