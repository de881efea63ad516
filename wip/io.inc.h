// ---------------------------------------------------------------------------------------------
// io: JSON reader (a small DOM) and writer, atomic file writes, safetensors read / write

// A name or key taken from a file, made fit for an error message: at most cap-1 bytes, control
// bytes shown as '?', and "..." when cut. Returns buf.
static const char *fat5__msg_name(char *buf, size_t cap, const char *s) {
    size_t i = 0;
    if (cap == 0) return "";
    for (; *s && i + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        buf[i++] = (c < 0x20 || c == 0x7f) ? '?' : *s;
    }
    if (*s && cap >= 8) {
        memcpy(buf + cap - 4, "...", 3);
        i = cap - 1;
    }
    buf[i] = 0;
    return buf;
}

// Length of the UTF-8 sequence at s (at most avail bytes), 0 when it is not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
static size_t fat5__utf8_len(const char *s, size_t avail) {
    unsigned char c = (unsigned char)s[0], lo = 0x80, hi = 0xBF;
    size_t k, j;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0) lo = 0xA0;   // overlong
        if (c == 0xED) hi = 0x9F;   // U+D800..U+DFFF
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0) lo = 0x90;   // overlong
        if (c == 0xF4) hi = 0x8F;   // above U+10FFFF
    } else {
        return 0;
    }
    if (avail < k) return 0;
    for (j = 1; j < k; j++) {
        unsigned char t = (unsigned char)s[j];
        if (t < lo || t > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
    }
    return k;
}

static int fat5__utf8_valid(const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = fat5__utf8_len(s + i, n - i);
        if (k == 0) return 0;
        i += k;
    }
    return 1;
}

// ---------------------------------------------------------------------------------------------
// JSON reader. Values form a tree linked first-child / next-sibling; every node and string of a
// document lives in a few arena blocks owned by the fat5__jdoc and freed together.

typedef enum {
    FAT5__J_NULL, FAT5__J_FALSE, FAT5__J_TRUE, FAT5__J_NUMBER, FAT5__J_STRING, FAT5__J_ARRAY,
    FAT5__J_OBJECT
} fat5__jtype;

typedef struct fat5__json fat5__json;
struct fat5__json {
    fat5__jtype type;
    const char *key;      // member name inside an object (unescaped, NUL-terminated), else NULL
    const char *str;      // STRING: unescaped UTF-8, NUL-terminated; NUMBER: the literal text
    size_t len;           // strlen of str
    fat5__json *child;    // ARRAY / OBJECT: first element
    fat5__json *next;     // next sibling
    size_t n;             // ARRAY / OBJECT: number of elements
};

typedef struct fat5__jblock {
    struct fat5__jblock *next;
    size_t cap, used;     // bytes of payload after the (aligned) block header
} fat5__jblock;

typedef struct fat5__jdoc {
    fat5__json *root;
    fat5__jblock *blocks; // the head block serves small allocations
    size_t block_size;    // payload size of the next regular block (grows to 1 MiB)
} fat5__jdoc;

#define FAT5__JALIGN (sizeof(void *) > 8 ? sizeof(void *) : (size_t)8)
#define FAT5__JBLOCK_HDR ((sizeof(fat5__jblock) + FAT5__JALIGN - 1) / FAT5__JALIGN * FAT5__JALIGN)

typedef struct fat5__jkey { const char *key; size_t pos; } fat5__jkey;

typedef struct fat5__jp {
    fat5_ctx *ctx;
    const char *what;     // message prefix ("config.json"), may be NULL
    const char *s;
    size_t len, pos;
    int max_depth;
    fat5__jdoc *doc;
    fat5_status st;       // first error
    fat5__jkey *keys;     // keys of the objects being parsed, innermost last (duplicate check)
    size_t n_keys, cap_keys;
} fat5__jp;

// Records "what: JSON: line L column C: msg" and returns 0.
static FAT5__PRINTF(3, 4) int fat5__jp_fail(fat5__jp *p, size_t at, const char *fmt, ...) {
    char msg[512];
    size_t i, line = 1, col = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (i = 0; i < at && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    p->st = FAT5_ERR_FORMAT;
    fat5__err(p->ctx, FAT5_ERR_FORMAT, "%s%sJSON: line %zu column %zu: %s", p->what ? p->what : "",
              p->what ? ": " : "", line, col, msg);
    return 0;
}

static int fat5__jp_oom(fat5__jp *p) {
    p->st = FAT5_ERR_OUT_OF_MEMORY;
    fat5__err(p->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s%sJSON: out of memory", p->what ? p->what : "",
              p->what ? ": " : "");
    return 0;
}

static void *fat5__jalloc(fat5__jp *p, size_t n) {
    fat5__jdoc *d = p->doc;
    fat5__jblock *b = d->blocks;
    size_t need, total;
    char *mem;
    if (!fat5__add_ok(n, FAT5__JALIGN - 1, &need)) {
        fat5__jp_oom(p);
        return NULL;
    }
    need = need / FAT5__JALIGN * FAT5__JALIGN;
    if (!b || b->cap - b->used < need) {
        int big = need > d->block_size / 4;   // a long string gets a block of its own
        size_t cap = big ? need : d->block_size;
        if (!fat5__add_ok(cap, FAT5__JBLOCK_HDR, &total) ||
            !(b = FAT5__CAST(fat5__jblock *, fat5__malloc(p->ctx, total)))) {
            fat5__jp_oom(p);
            return NULL;
        }
        b->cap = cap;
        b->used = 0;
        if (big && d->blocks) {   // keep the current head serving small allocations
            b->next = d->blocks->next;
            d->blocks->next = b;
        } else {
            b->next = d->blocks;
            d->blocks = b;
            if (!big && d->block_size < ((size_t)1 << 20)) d->block_size *= 2;
        }
    }
    mem = FAT5__CAST(char *, FAT5__CAST(void *, b)) + FAT5__JBLOCK_HDR + b->used;
    b->used += need;
    return mem;
}

static void fat5__jp_ws(fat5__jp *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int fat5__jp_digit(const fat5__jp *p, size_t i) {
    return i < p->len && p->s[i] >= '0' && p->s[i] <= '9';
}

// "'x'" for a printable character, "byte 0xHH" otherwise, "end of input" past the end
static const char *fat5__jp_desc(const fat5__jp *p, size_t i, char buf[16]) {
    unsigned char c;
    if (i >= p->len) return "end of input";
    c = (unsigned char)p->s[i];
    if (c > 0x20 && c < 0x7f) snprintf(buf, 16, "'%c'", (char)c);
    else snprintf(buf, 16, "byte 0x%02X", (unsigned)c);
    return buf;
}

static int fat5__jp_hex4(const fat5__jp *p, size_t i, size_t end, uint32_t *out) {
    uint32_t v = 0;
    size_t k;
    if (end < i || end - i < 4) return 0;
    for (k = 0; k < 4; k++) {
        char c = p->s[i + k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static size_t fat5__utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Parses the string starting at the '"' at p->pos into an arena copy (unescaped, NUL-terminated).
// The unescaped text is never longer than the source, so one allocation of the source size fits.
static int fat5__jp_string(fat5__jp *p, const char **out, size_t *out_len) {
    size_t start = p->pos + 1, i = start, end, n = 0;
    char *o;
    for (;;) {   // find the closing quote
        unsigned char c;
        if (i >= p->len) return fat5__jp_fail(p, p->pos, "unterminated string");
        c = (unsigned char)p->s[i];
        if (c == '"') break;
        if (c < 0x20)
            return fat5__jp_fail(p, i, "control character 0x%02X in a string (must be escaped)",
                                 (unsigned)c);
        i += (c == '\\') ? 2 : 1;
    }
    end = i;
    o = FAT5__CAST(char *, fat5__jalloc(p, end - start + 1));
    if (!o) return 0;
    for (i = start; i < end;) {
        unsigned char c = (unsigned char)p->s[i];
        if (c == '\\') {
            char e = p->s[i + 1];   // i + 1 < end: the scan above stepped over it
            uint32_t cp, lo;
            switch (e) {
            case '"': o[n++] = '"'; break;
            case '\\': o[n++] = '\\'; break;
            case '/': o[n++] = '/'; break;
            case 'b': o[n++] = '\b'; break;
            case 'f': o[n++] = '\f'; break;
            case 'n': o[n++] = '\n'; break;
            case 'r': o[n++] = '\r'; break;
            case 't': o[n++] = '\t'; break;
            case 'u':
                if (!fat5__jp_hex4(p, i + 2, end, &cp))
                    return fat5__jp_fail(p, i, "invalid \\u escape (expected 4 hex digits)");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (i + 8 <= end && p->s[i + 6] == '\\' && p->s[i + 7] == 'u' &&
                        fat5__jp_hex4(p, i + 8, end, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        i += 6;
                    } else {
                        return fat5__jp_fail(p, i, "lone surrogate \\u%04X (a high surrogate must "
                                             "be followed by a low one)", (unsigned)cp);
                    }
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fat5__jp_fail(p, i, "lone surrogate \\u%04X (a low surrogate without "
                                         "a high one)", (unsigned)cp);
                } else if (cp == 0) {
                    return fat5__jp_fail(p, i, "\\u0000 in a string is not supported (strings "
                                         "are NUL-terminated)");
                }
                n += fat5__utf8_put(o + n, cp);
                i += 4;
                break;
            default: {
                char buf[16];
                return fat5__jp_fail(p, i, "invalid escape: backslash followed by %s",
                                     fat5__jp_desc(p, i + 1, buf));
            }
            }
            i += 2;
        } else if (c < 0x80) {
            o[n++] = (char)c;
            i++;
        } else {
            size_t k = fat5__utf8_len(p->s + i, end - i);
            if (k == 0) return fat5__jp_fail(p, i, "invalid UTF-8 in a string");
            memcpy(o + n, p->s + i, k);
            n += k;
            i += k;
        }
    }
    o[n] = 0;
    *out = o;
    *out_len = n;
    p->pos = end + 1;
    return 1;
}

// number = [ "-" ] ( "0" / [1-9] *DIGIT ) [ "." 1*DIGIT ] [ ( "e" / "E" ) [ "+" / "-" ] 1*DIGIT ]
static int fat5__jp_number(fat5__jp *p, fat5__json *v) {
    size_t i = p->pos, n;
    char *o;
    if (p->s[i] == '-') i++;
    if (!fat5__jp_digit(p, i)) return fat5__jp_fail(p, i, "invalid number: expected a digit");
    if (p->s[i] == '0') {
        i++;
        if (fat5__jp_digit(p, i)) return fat5__jp_fail(p, i - 1, "leading zero in a number");
    } else {
        while (fat5__jp_digit(p, i)) i++;
    }
    if (i < p->len && p->s[i] == '.') {
        i++;
        if (!fat5__jp_digit(p, i))
            return fat5__jp_fail(p, i, "invalid number: expected a digit after '.'");
        while (fat5__jp_digit(p, i)) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (!fat5__jp_digit(p, i))
            return fat5__jp_fail(p, i, "invalid number: expected a digit in the exponent");
        while (fat5__jp_digit(p, i)) i++;
    }
    n = i - p->pos;
    o = FAT5__CAST(char *, fat5__jalloc(p, n + 1));
    if (!o) return 0;
    memcpy(o, p->s + p->pos, n);
    o[n] = 0;
    v->type = FAT5__J_NUMBER;
    v->str = o;
    v->len = n;
    p->pos = i;
    return 1;
}

static int fat5__jp_literal(fat5__jp *p, fat5__json *v) {
    const char *lit;
    size_t n;
    switch (p->s[p->pos]) {
    case 't': lit = "true"; v->type = FAT5__J_TRUE; break;
    case 'f': lit = "false"; v->type = FAT5__J_FALSE; break;
    default: lit = "null"; v->type = FAT5__J_NULL; break;
    }
    n = strlen(lit);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0)
        return fat5__jp_fail(p, p->pos, "invalid literal (expected true, false or null)");
    p->pos += n;
    return 1;
}

static int fat5__jp_push_key(fat5__jp *p, const char *key, size_t pos) {
    if (p->n_keys == p->cap_keys) {
        size_t cap = p->cap_keys ? p->cap_keys * 2 : 64, bytes;
        fat5__jkey *k;
        if (!fat5__mul_ok(cap, sizeof *k, &bytes) ||
            !(k = FAT5__CAST(fat5__jkey *, fat5__realloc(p->ctx, p->keys, bytes))))
            return fat5__jp_oom(p);
        p->keys = k;
        p->cap_keys = cap;
    }
    p->keys[p->n_keys].key = key;
    p->keys[p->n_keys].pos = pos;
    p->n_keys++;
    return 1;
}

static int fat5__jkey_cmp(const void *a, const void *b) {
    const fat5__jkey *x = FAT5__CAST(const fat5__jkey *, a), *y = FAT5__CAST(const fat5__jkey *, b);
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return x->pos < y->pos ? -1 : x->pos > y->pos ? 1 : 0;
}

// Checks the keys of one object, p->keys[base..n_keys), for duplicates (sorting: O(n log n) even
// for a hostile header with millions of keys) and reports the first repeat in document order.
static int fat5__jp_check_dups(fat5__jp *p, size_t base) {
    fat5__jkey *k = p->keys + base;
    size_t n = p->n_keys - base, i, dup = 0;
    if (n < 2) return 1;
    qsort(k, n, sizeof *k, fat5__jkey_cmp);
    for (i = 1; i < n; i++)
        if (strcmp(k[i - 1].key, k[i].key) == 0 && (dup == 0 || k[i].pos < k[dup].pos)) dup = i;
    if (dup) {
        char name[128];
        return fat5__jp_fail(p, k[dup].pos, "duplicate key \"%s\" in an object",
                             fat5__msg_name(name, sizeof name, k[dup].key));
    }
    return 1;
}

static fat5__json *fat5__jp_value(fat5__jp *p, int depth);

// Parses the object or array at p->pos; depth = number of enclosing containers.
static int fat5__jp_container(fat5__jp *p, fat5__json *v, int depth) {
    int is_obj = p->s[p->pos] == '{';
    char close = is_obj ? '}' : ']';
    size_t key_base = p->n_keys;
    fat5__json **tail = &v->child;
    v->type = is_obj ? FAT5__J_OBJECT : FAT5__J_ARRAY;
    if (depth >= p->max_depth)
        return fat5__jp_fail(p, p->pos, "nesting deeper than %d levels", p->max_depth);
    p->pos++;
    fat5__jp_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 1;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len;
        fat5__json *child;
        char buf[16];
        if (is_obj) {
            fat5__jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fat5__jp_fail(p, p->pos, "expected a string key, got %s",
                                     fat5__jp_desc(p, p->pos, buf));
            if (!fat5__jp_push_key(p, NULL, p->pos)) return 0;
            if (!fat5__jp_string(p, &key, &key_len)) return 0;
            p->keys[p->n_keys - 1].key = key;
            fat5__jp_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fat5__jp_fail(p, p->pos, "expected ':' after object key");
            p->pos++;
        }
        child = fat5__jp_value(p, depth + 1);
        if (!child) return 0;
        child->key = key;
        *tail = child;
        tail = &child->next;
        v->n++;
        fat5__jp_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            fat5__jp_ws(p);
            if (p->pos < p->len && p->s[p->pos] == close)
                return fat5__jp_fail(p, p->pos, "trailing comma before '%c'", close);
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        return fat5__jp_fail(p, p->pos, "expected ',' or '%c' after %s, got %s", close,
                             is_obj ? "an object member" : "an array element",
                             fat5__jp_desc(p, p->pos, buf));
    }
    if (is_obj && !fat5__jp_check_dups(p, key_base)) return 0;
    p->n_keys = key_base;
    return 1;
}

static fat5__json *fat5__jp_value(fat5__jp *p, int depth) {
    fat5__json *v;
    char c, buf[16];
    int ok;
    fat5__jp_ws(p);
    if (p->pos >= p->len) {
        fat5__jp_fail(p, p->pos, "unexpected end of input (expected a value)");
        return NULL;
    }
    v = FAT5__CAST(fat5__json *, fat5__jalloc(p, sizeof *v));
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    c = p->s[p->pos];
    if (c == '{' || c == '[') {
        ok = fat5__jp_container(p, v, depth);
    } else if (c == '"') {
        v->type = FAT5__J_STRING;
        ok = fat5__jp_string(p, &v->str, &v->len);
    } else if (c == 't' || c == 'f' || c == 'n') {
        ok = fat5__jp_literal(p, v);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        ok = fat5__jp_number(p, v);
    } else {
        ok = fat5__jp_fail(p, p->pos, "unexpected %s (expected a value)",
                           fat5__jp_desc(p, p->pos, buf));
    }
    return ok ? v : NULL;
}

static void fat5__json_free(fat5_ctx *ctx, fat5__jdoc *d) {
    fat5__jblock *b, *next;
    if (!d) return;
    for (b = d->blocks; b; b = next) {
        next = b->next;
        fat5__free(ctx, b);
    }
    fat5__free(ctx, d);
}

// Parses src[0..len) strictly (RFC 8259): the whole input is one value with optional whitespace
// around it; containers nest at most max_depth deep; literals are exact; strings hold valid UTF-8,
// no raw control characters, valid escapes (surrogates paired; \u0000 rejected); numbers follow
// the grammar; keys are unique within an object. Errors are FAT5_ERR_FORMAT, "what: JSON: line L
// column C: ...".
static fat5_status fat5__json_parse(fat5_ctx *ctx, const char *what, const char *src, size_t len,
                                    int max_depth, fat5__jdoc **out) {
    fat5__jp p;
    fat5__jdoc *d;
    fat5__json *root;
    *out = NULL;
    if (!src && len) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5__json_parse: src is NULL");
    d = FAT5__CAST(fat5__jdoc *, fat5__calloc(ctx, 1, sizeof *d));
    if (!d) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s%sJSON: out of memory",
                             what ? what : "", what ? ": " : "");
    d->block_size = 4096;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.what = what;
    p.s = src ? src : "";
    p.len = len;
    p.max_depth = max_depth;
    p.doc = d;
    p.st = FAT5_OK;
    root = fat5__jp_value(&p, 0);
    if (root) {
        fat5__jp_ws(&p);
        if (p.pos != p.len) {
            char buf[16];
            fat5__jp_fail(&p, p.pos, "unexpected %s after the JSON value (trailing data)",
                          fat5__jp_desc(&p, p.pos, buf));
        }
    }
    fat5__free(ctx, p.keys);
    if (p.st != FAT5_OK) {
        fat5__json_free(ctx, d);
        return p.st;
    }
    d->root = root;
    *out = d;
    return FAT5_OK;
}

static const fat5__json *fat5__json_root(const fat5__jdoc *d) { return d ? d->root : NULL; }

// member of an object by key; NULL if absent or obj is not an object
static const fat5__json *fat5__json_get(const fat5__json *obj, const char *key) {
    const fat5__json *c;
    if (!obj || obj->type != FAT5__J_OBJECT) return NULL;
    for (c = obj->child; c; c = c->next)
        if (strcmp(c->key, key) == 0) return c;
    return NULL;
}

static const char *fat5__json_type_name(fat5__jtype t) {
    switch (t) {
    case FAT5__J_NULL: return "null";
    case FAT5__J_FALSE: case FAT5__J_TRUE: return "a boolean";
    case FAT5__J_NUMBER: return "a number";
    case FAT5__J_STRING: return "a string";
    case FAT5__J_ARRAY: return "an array";
    case FAT5__J_OBJECT: return "an object";
    }
    return "?";
}

// Number helpers: 1 on success. Integers are read digit by digit with overflow checks, never
// through double; a literal with '.' or an exponent is not an integer.
static int fat5__json_as_u64(const fat5__json *v, uint64_t *out) {
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    return fat5__parse_u64(v->str, v->len, out);
}

static int fat5__json_as_i64(const fat5__json *v, int64_t *out) {
    const char *s;
    size_t n;
    uint64_t m;
    int neg;
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    s = v->str;
    n = v->len;
    neg = n > 0 && s[0] == '-';
    if (neg) {
        s++;
        n--;
    }
    if (!fat5__parse_u64(s, n, &m)) return 0;
    if (!neg) {
        if (m > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)m;
    } else {
        if (m > (uint64_t)INT64_MAX + 1) return 0;
        *out = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
    }
    return 1;
}

// strtod on the validated literal; values that overflow a double fail
static int fat5__json_as_double(const fat5__json *v, double *out) {
    char *end;
    double d;
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    d = strtod(v->str, &end);
    if (end != v->str + v->len || d == HUGE_VAL || d == -HUGE_VAL) return 0;
    *out = d;
    return 1;
}

// Reads a whole file into a NUL-terminated buffer (free with fat5__free). FAT5_ERR_IO when it
// cannot be read, FAT5_ERR_FORMAT when it holds more than max_size bytes.
static fat5_status fat5__read_file(fat5_ctx *ctx, const char *path, size_t max_size, char **out,
                                   size_t *out_len) {
    FILE *fp;
    char *buf = NULL;
    size_t len = 0, cap = 0, limit = max_size < SIZE_MAX - 1 ? max_size + 1 : SIZE_MAX - 1;
    *out = NULL;
    if (out_len) *out_len = 0;
    fp = fopen(path, "rb");
    if (!fp) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    for (;;) {
        size_t got;
        if (len == cap) {   // grow; never beyond one byte past the limit (+1 for the NUL)
            size_t ncap = cap ? (cap <= limit / 2 ? cap * 2 : limit)
                              : (limit < 4096 ? limit : 4096);
            char *nb = FAT5__CAST(char *, fat5__realloc(ctx, buf, ncap + 1));
            if (!nb) {
                fclose(fp);
                fat5__free(ctx, buf);
                return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory reading the file",
                                 path);
            }
            buf = nb;
            cap = ncap;
        }
        got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (len > max_size) {
            fclose(fp);
            fat5__free(ctx, buf);
            return fat5__err(ctx, FAT5_ERR_FORMAT, "%s: file is larger than the limit of %zu bytes",
                             path, max_size);
        }
        if (len < cap) {   // short read: end of file or an error
            if (ferror(fp)) {
                int e = errno;
                fclose(fp);
                fat5__free(ctx, buf);
                return fat5__err(ctx, FAT5_ERR_IO, "%s: read failed: %s", path, strerror(e));
            }
            break;
        }
    }
    fclose(fp);
    buf[len] = 0;
    *out = buf;
    if (out_len) *out_len = len;
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// JSON writer: a growable string. Out of memory latches b->oom; callers check it once at the end.

typedef struct fat5__sb {
    fat5_ctx *ctx;
    char *buf;            // NUL-terminated once anything was written
    size_t len, cap;
    int oom;
} fat5__sb;

static void fat5__sb_init(fat5__sb *b, fat5_ctx *ctx) {
    memset(b, 0, sizeof *b);
    b->ctx = ctx;
}

static int fat5__sb_reserve(fat5__sb *b, size_t extra) {
    size_t need, cap;
    char *nb;
    if (b->oom) return 0;
    if (!fat5__add_ok(b->len, extra, &need) || !fat5__add_ok(need, 1, &need)) {
        b->oom = 1;
        return 0;
    }
    if (need <= b->cap) return 1;
    cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap <= SIZE_MAX / 2 ? cap * 2 : need;
    nb = FAT5__CAST(char *, fat5__realloc(b->ctx, b->buf, cap));
    if (!nb) {
        b->oom = 1;
        return 0;
    }
    b->buf = nb;
    b->cap = cap;
    return 1;
}

static void fat5__sb_putn(fat5__sb *b, const char *s, size_t n) {
    if (!fat5__sb_reserve(b, n)) return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void fat5__sb_puts(fat5__sb *b, const char *s) { fat5__sb_putn(b, s, strlen(s)); }

static FAT5__PRINTF(2, 3) void fat5__sb_printf(fat5__sb *b, const char *fmt, ...) {
    va_list ap, ap2;
    int n;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0) {
        b->oom = 1;
    } else if (fat5__sb_reserve(b, (size_t)n)) {
        vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
    va_end(ap);
}

// s as a JSON string: quoted, with '"', '\' and control characters escaped; other bytes as they are
static void fat5__sb_json_string(fat5__sb *b, const char *s) {
    size_t run;
    fat5__sb_putn(b, "\"", 1);
    while (*s) {
        for (run = 0; s[run] && s[run] != '"' && s[run] != '\\' && (unsigned char)s[run] >= 0x20;)
            run++;
        fat5__sb_putn(b, s, run);
        s += run;
        if (*s == '"' || *s == '\\') {
            char e[2];
            e[0] = '\\';
            e[1] = *s;
            fat5__sb_putn(b, e, 2);
            s++;
        } else if (*s) {
            fat5__sb_printf(b, "\\u%04X", (unsigned)(unsigned char)*s);
            s++;
        }
    }
    fat5__sb_putn(b, "\"", 1);
}

static void fat5__sb_free(fat5__sb *b) {
    fat5__free(b->ctx, b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
}

// ---------------------------------------------------------------------------------------------
// Atomic file writes: a temporary file "<path>.tmp.XXXXXX" in the same directory is written,
// flushed to disk and renamed over path, so a crash leaves either the old file or the new one.

typedef struct fat5__afile {
    char *tmp;            // temporary path; removed on abort
#ifdef _WIN32
    FILE *fp;
#else
    int fd;
#endif
} fat5__afile;

static void fat5__afile_abort(fat5_ctx *ctx, fat5__afile *a) {
    if (!a->tmp) return;
#ifdef _WIN32
    if (a->fp) fclose(a->fp);
    a->fp = NULL;
#else
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
#endif
    remove(a->tmp);
    fat5__free(ctx, a->tmp);
    a->tmp = NULL;
}

static fat5_status fat5__afile_open(fat5_ctx *ctx, const char *path, fat5__afile *a) {
    size_t n = strlen(path);
    int e;
    memset(a, 0, sizeof *a);
    a->tmp = FAT5__CAST(char *, fat5__malloc(ctx, n + 12));
    if (!a->tmp) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    memcpy(a->tmp, path, n);
    memcpy(a->tmp + n, ".tmp.XXXXXX", 12);
#ifdef _WIN32
    a->tmp[n + 4] = 0;   // "<path>.tmp"
    a->fp = fopen(a->tmp, "wb");
    if (a->fp) return FAT5_OK;
#else
    a->fd = mkstemp(a->tmp);
    if (a->fd >= 0) {
        // mkstemp creates 0600; keep the mode of the file being replaced, else use 0644
        struct stat st;
        mode_t mode = 0644;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) mode = st.st_mode & 07777;
        (void)fchmod(a->fd, mode);
        return FAT5_OK;
    }
#endif
    e = errno;
    fat5__free(ctx, a->tmp);
    a->tmp = NULL;
    return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot create a temporary file beside it: %s", path,
                     strerror(e));
}

static fat5_status fat5__afile_write(fat5_ctx *ctx, fat5__afile *a, const char *path,
                                     const void *data, size_t n) {
    const char *p = FAT5__CAST(const char *, data);
    int e;
#ifdef _WIN32
    if (n == 0 || fwrite(p, 1, n, a->fp) == n) return FAT5_OK;
    e = errno;
#else
    while (n > 0) {
        size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        ssize_t w = write(a->fd, p, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    if (n == 0) return FAT5_OK;
    e = errno;
#endif
    fat5__afile_abort(ctx, a);
    return fat5__err(ctx, FAT5_ERR_IO, "%s: write failed: %s", path, strerror(e));
}

// Flushes, closes and renames the temporary file over path; on failure removes it.
static fat5_status fat5__afile_commit(fat5_ctx *ctx, fat5__afile *a, const char *path) {
    const char *step;
    int e;
#ifdef _WIN32
    FILE *fp = a->fp;
    a->fp = NULL;
    step = "flush";
    if (fflush(fp) != 0) {
        e = errno;
        fclose(fp);
        goto fail;
    }
    step = "close";
    if (fclose(fp) != 0) goto fail_errno;
    remove(path);   // rename does not replace an existing file on Windows
#else
    int fd = a->fd;
    a->fd = -1;
    step = "fsync";
    if (fsync(fd) != 0) {
        e = errno;
        close(fd);
        goto fail;
    }
    step = "close";
    if (close(fd) != 0) goto fail_errno;
#endif
    step = "rename";
    if (rename(a->tmp, path) != 0) goto fail_errno;
    fat5__free(ctx, a->tmp);
    a->tmp = NULL;
    return FAT5_OK;
fail_errno:
    e = errno;
fail:
    fat5__afile_abort(ctx, a);
    return fat5__err(ctx, FAT5_ERR_IO, "%s: %s of the temporary file failed: %s", path, step,
                     strerror(e));
}

FAT5_API fat5_status fat5_write_file_atomic(fat5_ctx *ctx, const char *path, const void *data,
                                            size_t size) {
    fat5__afile a;
    fat5_status st;
    if (!path || (!data && size > 0))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_write_file_atomic: %s is NULL",
                         path ? "data" : "path");
    st = fat5__afile_open(ctx, path, &a);
    if (st != FAT5_OK) return st;
    st = fat5__afile_write(ctx, &a, path, data, size);
    if (st != FAT5_OK) return st;
    return fat5__afile_commit(ctx, &a, path);
}

// ---------------------------------------------------------------------------------------------
// 16-bit floats. Bit-exact and free of type punning (memcpy), shared with the GPU code.

static float fat5__bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static float fat5__bf16_to_f32(uint16_t h) { return fat5__bits_to_f32((uint32_t)h << 16); }

static float fat5__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp == 0x1F) return fat5__bits_to_f32(sign | 0x7F800000u | (mant << 13));   // inf, NaN
    if (exp != 0) return fat5__bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return fat5__bits_to_f32(sign);                                   // +-0
    exp = 113;   // subnormal: mant * 2^-24, normalised
    while (!(mant & 0x400)) {
        mant <<= 1;
        exp--;
    }
    return fat5__bits_to_f32(sign | (exp << 23) | ((mant & 0x3FF) << 13));
}

// round to nearest, ties to even; NaN stays NaN (quieted, sign kept); overflow rounds to inf
static FAT5__UNUSED uint16_t fat5__f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040);
    u += 0x7FFFu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

// ---------------------------------------------------------------------------------------------
// safetensors: 8-byte little-endian header length, a JSON header, then the data region. The
// reader treats the file as hostile (style_anchors.md §7.8): bounded header, strict JSON, closed
// dtype list, checked shape arithmetic, and tensor ranges that tile the data region exactly.

#define FAT5__ST_MAX_HEADER ((uint64_t)100 << 20)   // 100 MiB

struct fat5_st_file {
    fat5_ctx *ctx;
    char *path;
    FILE *fp;
    uint64_t file_size;
    uint64_t data_offset;       // 8 + header length
    fat5_st_tensor *tensors;    // [n_tensors], sorted by name
    int n_tensors;
    const char **meta_key;      // [n_meta], sorted by key
    const char **meta_val;      // [n_meta]
    int n_meta;
    char *strings;              // names, keys and values, one allocation
};

typedef struct fat5__st_dtype_info { const char *name; unsigned size; } fat5__st_dtype_info;
static const fat5__st_dtype_info fat5__st_dtypes[FAT5_ST_DTYPE_COUNT] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"U16", 2}, {"I16", 2}, {"F16", 2}, {"BF16", 2},
    {"U32", 4}, {"I32", 4}, {"F32", 4}, {"U64", 8}, {"I64", 8}, {"F64", 8},
    {"F8_E4M3", 1}, {"F8_E5M2", 1}
};

FAT5_API const char *fat5_st_dtype_name(fat5_st_dtype t) {
    int i = (int)t;
    return i >= 0 && i < (int)FAT5_ST_DTYPE_COUNT ? fat5__st_dtypes[i].name : "?";
}

FAT5_API size_t fat5_st_dtype_size(fat5_st_dtype t) {
    int i = (int)t;
    return i >= 0 && i < (int)FAT5_ST_DTYPE_COUNT ? fat5__st_dtypes[i].size : 0;
}

static int fat5__seek(FILE *fp, uint64_t off) {
#ifdef _WIN32
    return off <= (uint64_t)INT64_MAX && _fseeki64(fp, (__int64)off, SEEK_SET) == 0;
#else
    off_t o = (off_t)off;
    if (o < 0 || (uint64_t)o != off) return 0;
    return fseeko(fp, o, SEEK_SET) == 0;
#endif
}

// Reads n bytes at offset off; a short read means the file changed or was truncated.
static fat5_status fat5__st_read_at(fat5_st_file *f, uint64_t off, void *buf, size_t n) {
    size_t got;
    if (!fat5__seek(f->fp, off))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: cannot seek to byte %llu: %s", f->path,
                         (unsigned long long)off, strerror(errno));
    got = fread(buf, 1, n, f->fp);
    if (got == n) return FAT5_OK;
    if (ferror(f->fp))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: read failed at byte %llu: %s", f->path,
                         (unsigned long long)(off + got), strerror(errno));
    return fat5__err(f->ctx, FAT5_ERR_IO, "%s: unexpected end of file at byte %llu (the file "
                     "changed or was truncated)", f->path, (unsigned long long)(off + got));
}

// "[2, 3]"; fits in 256 bytes for up to FAT5_ST_MAX_DIMS dimensions
static const char *fat5__st_shape_str(char buf[256], const int64_t *shape, int ndim) {
    size_t len = 0;
    int i;
    buf[len++] = '[';
    for (i = 0; i < ndim && i < FAT5_ST_MAX_DIMS; i++) {
        char num[24];
        int w = snprintf(num, sizeof num, "%lld", (long long)shape[i]);
        if (i) {
            buf[len++] = ',';
            buf[len++] = ' ';
        }
        memcpy(buf + len, num, (size_t)w);
        len += (size_t)w;
    }
    buf[len++] = ']';
    buf[len] = 0;
    return buf;
}

// Validates one tensor entry (rules 4-6) into t; t->name is set by the caller.
static fat5_status fat5__st_parse_tensor(fat5_st_file *f, const fat5__json *v, fat5_st_tensor *t) {
    const fat5__json *dtype = NULL, *shape = NULL, *offs = NULL, *c;
    char nm[128], shp[256], key[64];
    const char *name = fat5__msg_name(nm, sizeof nm, v->key);
    uint64_t numel = 1, nbytes, begin, end, dim;
    int i, k, any_zero = 0, overflow = 0;
    if (v->type != FAT5__J_OBJECT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': expected an object with dtype, "
                         "shape and data_offsets, got %s", f->path, name,
                         fat5__json_type_name(v->type));
    for (c = v->child; c; c = c->next) {
        if (strcmp(c->key, "dtype") == 0) dtype = c;
        else if (strcmp(c->key, "shape") == 0) shape = c;
        else if (strcmp(c->key, "data_offsets") == 0) offs = c;
        else return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': unknown key '%s'", f->path,
                              name, fat5__msg_name(key, sizeof key, c->key));
    }
    if (!dtype || !shape || !offs)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': missing key '%s'", f->path,
                         name, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (dtype->type != FAT5__J_STRING)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': dtype is %s, expected a "
                         "string", f->path, name, fat5__json_type_name(dtype->type));
    for (k = 0; k < (int)FAT5_ST_DTYPE_COUNT; k++)
        if (strcmp(dtype->str, fat5__st_dtypes[k].name) == 0) break;
    if (k == (int)FAT5_ST_DTYPE_COUNT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", f->path,
                         name, fat5__msg_name(key, sizeof key, dtype->str));
    t->dtype = FAT5__CAST(fat5_st_dtype, k);
    if (shape->type != FAT5__J_ARRAY)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape is %s, expected an "
                         "array", f->path, name, fat5__json_type_name(shape->type));
    if (shape->n > FAT5_ST_MAX_DIMS)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape has %zu dimensions; at "
                         "most %d are supported", f->path, name, shape->n, FAT5_ST_MAX_DIMS);
    for (c = shape->child, i = 0; c; c = c->next, i++) {
        if (!fat5__json_as_u64(c, &dim))
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a "
                             "non-negative integer", f->path, name, i);
        if (dim > (uint64_t)INT64_MAX)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape[%d] = %llu is too "
                             "large", f->path, name, i, (unsigned long long)dim);
        t->shape[i] = (int64_t)dim;
        if (dim == 0) any_zero = 1;
        else if (numel > UINT64_MAX / dim) overflow = 1;
        else numel *= dim;
    }
    t->ndim = i;
    if (any_zero) numel = 0;   // exact: a zero dimension makes the product 0 whatever the rest
    if ((!any_zero && overflow) || numel > UINT64_MAX / fat5__st_dtypes[k].size)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': shape %s overflows (element "
                         "count times %u bytes does not fit in 64 bits)", f->path, name,
                         fat5__st_shape_str(shp, t->shape, t->ndim),
                         fat5__st_dtypes[k].size);
    nbytes = numel * fat5__st_dtypes[k].size;
    if (offs->type != FAT5__J_ARRAY || offs->n != 2 || !fat5__json_as_u64(offs->child, &begin) ||
        !fat5__json_as_u64(offs->child->next, &end))
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets must be an array "
                         "of 2 non-negative integers", f->path, name);
    if (begin > end)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are "
                         "reversed (begin after end)", f->path, name, (unsigned long long)begin,
                         (unsigned long long)end);
    if (end - begin != nbytes)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] hold "
                         "%llu bytes, but dtype %s and shape %s need %llu", f->path, name,
                         (unsigned long long)begin, (unsigned long long)end,
                         (unsigned long long)(end - begin), fat5__st_dtypes[k].name,
                         fat5__st_shape_str(shp, t->shape, t->ndim),
                         (unsigned long long)nbytes);
    t->begin = begin;
    t->end = end;
    return FAT5_OK;
}

static int fat5__st_cmp_offset(const void *a, const void *b) {
    const fat5_st_tensor *x = FAT5__CAST(const fat5_st_tensor *, a);
    const fat5_st_tensor *y = FAT5__CAST(const fat5_st_tensor *, b);
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int fat5__st_cmp_name(const void *a, const void *b) {
    const fat5_st_tensor *x = FAT5__CAST(const fat5_st_tensor *, a);
    const fat5_st_tensor *y = FAT5__CAST(const fat5_st_tensor *, b);
    return strcmp(x->name, y->name);
}

// Rule 7: sorted by offset, the ranges cover [0, data_len) exactly: no gap, no overlap, nothing
// past the end, no trailing bytes. A zero-sized tensor must sit on a boundary.
static fat5_status fat5__st_check_tiling(fat5_st_file *f) {
    uint64_t data_len = f->file_size - f->data_offset, cursor = 0;
    const fat5_st_tensor *prev = NULL;
    char nm[128], nm2[128];
    int i;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, fat5__st_cmp_offset);
    for (i = 0; i < f->n_tensors; i++) {
        const fat5_st_tensor *t = &f->tensors[i];
        if (t->end > data_len)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data range [%llu, %llu) is "
                             "past the end of the file (the data region is %llu bytes)", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)t->begin,
                             (unsigned long long)t->end, (unsigned long long)data_len);
    }
    for (i = 0; i < f->n_tensors; i++) {
        const fat5_st_tensor *t = &f->tensors[i];
        if (t->begin < cursor)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: tensor '%s': data range [%llu, %llu) "
                             "overlaps tensor '%s' ([%llu, %llu))", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)t->begin,
                             (unsigned long long)t->end,
                             fat5__msg_name(nm2, sizeof nm2, prev ? prev->name : "?"),
                             (unsigned long long)(prev ? prev->begin : 0),
                             (unsigned long long)(prev ? prev->end : 0));
        if (t->begin > cursor)
            return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: gap before tensor '%s': data bytes "
                             "[%llu, %llu) belong to no tensor", f->path,
                             fat5__msg_name(nm, sizeof nm, t->name), (unsigned long long)cursor,
                             (unsigned long long)t->begin);
        if (t->end > t->begin) prev = t;
        cursor = t->end;
    }
    if (cursor != data_len)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: %llu trailing bytes after the last tensor "
                         "(the data region is %llu bytes, the tensors cover %llu)", f->path,
                         (unsigned long long)(data_len - cursor), (unsigned long long)data_len,
                         (unsigned long long)cursor);
    return FAT5_OK;
}

// Builds the tensor and metadata tables from the parsed header (rules 3-7).
static fat5_status fat5__st_build(fat5_st_file *f, const fat5__json *root) {
    const fat5__json *m, *meta = NULL;
    size_t n_t = 0, n_m = 0, bytes = 0, used = 0;
    char nm[128];
    int i;
    fat5_status st;
    if (root->type != FAT5__J_OBJECT)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header is %s, expected an object",
                         f->path, fat5__json_type_name(root->type));
    for (m = root->child; m; m = m->next) {
        if (strcmp(m->key, "__metadata__") == 0) {
            const fat5__json *kv;
            meta = m;
            if (m->type != FAT5__J_OBJECT)
                return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: __metadata__ is %s, expected an "
                                 "object of strings", f->path, fat5__json_type_name(m->type));
            for (kv = m->child; kv; kv = kv->next) {
                if (kv->type != FAT5__J_STRING)
                    return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: __metadata__ value of '%s' "
                                     "is %s; metadata values must be strings", f->path,
                                     fat5__msg_name(nm, sizeof nm, kv->key),
                                     fat5__json_type_name(kv->type));
                if (!fat5__add_ok(bytes, strlen(kv->key) + 1, &bytes) ||
                    !fat5__add_ok(bytes, kv->len + 1, &bytes))
                    return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header too large", f->path);
                n_m++;
            }
        } else {
            n_t++;
            if (!fat5__add_ok(bytes, strlen(m->key) + 1, &bytes))
                return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header too large", f->path);
        }
    }
    if (n_t > (size_t)INT_MAX || n_m > (size_t)INT_MAX)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: too many entries in the header", f->path);
    f->tensors = FAT5__CAST(fat5_st_tensor *, fat5__calloc(f->ctx, n_t, sizeof *f->tensors));
    f->meta_key = FAT5__CAST(const char **, fat5__calloc(f->ctx, n_m, sizeof *f->meta_key));
    f->meta_val = FAT5__CAST(const char **, fat5__calloc(f->ctx, n_m, sizeof *f->meta_val));
    f->strings = FAT5__CAST(char *, fat5__malloc(f->ctx, bytes));
    if (!f->tensors || !f->meta_key || !f->meta_val || !f->strings)
        return fat5__err(f->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the tensor table",
                         f->path);
    for (m = root->child; m; m = m->next) {
        size_t n = strlen(m->key) + 1;
        fat5_st_tensor *t;
        if (m == meta) continue;
        t = &f->tensors[f->n_tensors];
        st = fat5__st_parse_tensor(f, m, t);
        if (st != FAT5_OK) return st;
        memcpy(f->strings + used, m->key, n);
        t->name = f->strings + used;
        used += n;
        f->n_tensors++;
    }
    if (meta) {
        for (m = meta->child; m; m = m->next) {
            size_t nk = strlen(m->key) + 1;
            memcpy(f->strings + used, m->key, nk);
            f->meta_key[f->n_meta] = f->strings + used;
            used += nk;
            memcpy(f->strings + used, m->str, m->len + 1);
            f->meta_val[f->n_meta] = f->strings + used;
            used += m->len + 1;
            f->n_meta++;
        }
        // sort metadata by key (insertion sort on two arrays; keys are unique)
        for (i = 1; i < f->n_meta; i++) {
            const char *key = f->meta_key[i], *val = f->meta_val[i];
            int j = i;
            for (; j > 0 && strcmp(f->meta_key[j - 1], key) > 0; j--) {
                f->meta_key[j] = f->meta_key[j - 1];
                f->meta_val[j] = f->meta_val[j - 1];
            }
            f->meta_key[j] = key;
            f->meta_val[j] = val;
        }
    }
    st = fat5__st_check_tiling(f);
    if (st != FAT5_OK) return st;
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, fat5__st_cmp_name);
    return FAT5_OK;
}

static fat5_status fat5__st_load(fat5_st_file *f) {
    unsigned char len8[8];
    uint64_t hlen = 0;
    char *hdr;
    fat5__jdoc *doc = NULL;
    fat5_status st;
    int i;
    f->fp = fopen(f->path, "rb");
    if (!f->fp)
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
#ifdef _WIN32
    if (_fseeki64(f->fp, 0, SEEK_END) != 0 || _ftelli64(f->fp) < 0)
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: cannot get the file size: %s", f->path,
                         strerror(errno));
    f->file_size = (uint64_t)_ftelli64(f->fp);
#else
    {
        struct stat sb;
        if (fstat(fileno(f->fp), &sb) != 0)
            return fat5__err(f->ctx, FAT5_ERR_IO, "%s: cannot get the file size: %s", f->path,
                             strerror(errno));
        if (!S_ISREG(sb.st_mode))
            return fat5__err(f->ctx, FAT5_ERR_IO, "%s: not a regular file", f->path);
        f->file_size = (uint64_t)sb.st_size;
    }
#endif
    // rules 1-2: the header length, bounded before any arithmetic with it
    if (f->file_size < 8)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: file is too small (%llu bytes) to hold the "
                         "8-byte header length", f->path, (unsigned long long)f->file_size);
    st = fat5__st_read_at(f, 0, len8, 8);
    if (st != FAT5_OK) return st;
    for (i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    if (hlen > FAT5__ST_MAX_HEADER)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header length %llu exceeds the limit of "
                         "100 MiB", f->path, (unsigned long long)hlen);
    if (hlen == 0) return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header is empty", f->path);
    if (hlen > f->file_size - 8)
        return fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: header length %llu runs past the end of the "
                         "file (%llu bytes)", f->path, (unsigned long long)hlen,
                         (unsigned long long)f->file_size);
    f->data_offset = 8 + hlen;
    hdr = FAT5__CAST(char *, fat5__malloc(f->ctx, (size_t)hlen));
    if (!hdr)
        return fat5__err(f->ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the %llu-byte "
                         "header", f->path, (unsigned long long)hlen);
    st = fat5__st_read_at(f, 8, hdr, (size_t)hlen);
    if (st == FAT5_OK && hdr[0] != '{')
        st = fat5__err(f->ctx, FAT5_ERR_FORMAT, "%s: the header does not start with '{'", f->path);
    // depth 4: root object > tensor object > shape array, plus one level of slack for errors
    if (st == FAT5_OK) st = fat5__json_parse(f->ctx, f->path, hdr, (size_t)hlen, 4, &doc);
    fat5__free(f->ctx, hdr);
    if (st != FAT5_OK) return st;
    st = fat5__st_build(f, fat5__json_root(doc));
    fat5__json_free(f->ctx, doc);
    return st;
}

FAT5_API void fat5_st_close(fat5_st_file *f) {
    fat5_ctx *ctx;
    if (!f) return;
    ctx = f->ctx;
    if (f->fp) fclose(f->fp);
    fat5__free(ctx, f->path);
    fat5__free(ctx, f->tensors);
    fat5__free(ctx, FAT5__CAST(void *, f->meta_key));
    fat5__free(ctx, FAT5__CAST(void *, f->meta_val));
    fat5__free(ctx, f->strings);
    fat5__free(ctx, f);
}

FAT5_API fat5_status fat5_st_open(fat5_ctx *ctx, const char *path, fat5_st_file **out) {
    fat5_st_file *f;
    fat5_status st;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_open: out is NULL");
    *out = NULL;
    if (!path) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_open: path is NULL");
    f = FAT5__CAST(fat5_st_file *, fat5__calloc(ctx, 1, sizeof *f));
    if (!f) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    f->ctx = ctx;
    f->path = fat5__strdup(ctx, path);
    if (!f->path) {
        fat5__free(ctx, f);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    st = fat5__st_load(f);
    if (st != FAT5_OK) {
        fat5_st_close(f);
        return st;
    }
    *out = f;
    return FAT5_OK;
}

FAT5_API int fat5_st_count(const fat5_st_file *f) { return f ? f->n_tensors : 0; }

FAT5_API const fat5_st_tensor *fat5_st_get(const fat5_st_file *f, int i) {
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

FAT5_API int fat5_st_find(const fat5_st_file *f, const char *name) {
    int lo = 0, hi = f && name ? f->n_tensors : 0;
    while (lo < hi) {   // binary search: the table is sorted by name
        int mid = lo + (hi - lo) / 2, c = strcmp(f->tensors[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

FAT5_API int fat5_st_metadata_count(const fat5_st_file *f) { return f ? f->n_meta : 0; }

FAT5_API void fat5_st_metadata_get(const fat5_st_file *f, int i, const char **key,
                                   const char **value) {
    int ok = f && i >= 0 && i < f->n_meta;
    if (key) *key = ok ? f->meta_key[i] : NULL;
    if (value) *value = ok ? f->meta_val[i] : NULL;
}

FAT5_API const char *fat5_st_metadata_find(const fat5_st_file *f, const char *key) {
    int lo = 0, hi = f && key ? f->n_meta : 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->meta_key[mid], key);
        if (c == 0) return f->meta_val[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

FAT5_API fat5_status fat5_st_read_f32(fat5_st_file *f, int i, float *dst, int64_t n) {
    unsigned char buf[16384];
    const fat5_st_tensor *t;
    char nm[128];
    uint64_t numel, done = 0;
    size_t es;
    if (!f) return FAT5_ERR_INVALID_ARG;
    if (i < 0 || i >= f->n_tensors)
        return fat5__err(f->ctx, FAT5_ERR_INVALID_ARG, "%s: tensor index %d out of range [0, %d)",
                         f->path, i, f->n_tensors);
    t = &f->tensors[i];
    fat5__msg_name(nm, sizeof nm, t->name);
    es = fat5_st_dtype_size(t->dtype);
    numel = (t->end - t->begin) / es;   // exact: checked at open
    if (t->dtype != FAT5_ST_F32 && t->dtype != FAT5_ST_F16 && t->dtype != FAT5_ST_BF16)
        return fat5__err(f->ctx, FAT5_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s; fat5 reads "
                         "F32, F16 and BF16", f->path, nm, fat5_st_dtype_name(t->dtype));
    if (n < 0 || (uint64_t)n != numel || (!dst && numel > 0))
        return fat5__err(f->ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s' has %llu elements; got a "
                         "buffer of %lld%s", f->path, nm, (unsigned long long)numel, (long long)n,
                         !dst && numel > 0 ? " (NULL)" : "");
    if (numel == 0) return FAT5_OK;
    if (!fat5__seek(f->fp, f->data_offset + t->begin))
        return fat5__err(f->ctx, FAT5_ERR_IO, "%s: tensor '%s': cannot seek to its data: %s",
                         f->path, nm, strerror(errno));
    while (done < numel) {
        size_t k = sizeof buf / es, j;
        if (numel - done < k) k = (size_t)(numel - done);
        if (fread(buf, es, k, f->fp) != k)
            return fat5__err(f->ctx, FAT5_ERR_IO, "%s: tensor '%s': %s", f->path, nm,
                             ferror(f->fp) ? strerror(errno)
                                           : "unexpected end of file (the file changed or was "
                                             "truncated)");
        if (t->dtype == FAT5_ST_F32) {
            for (j = 0; j < k; j++) {
                const unsigned char *b = buf + 4 * j;
                uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                             (uint32_t)b[3] << 24;
                dst[done + j] = fat5__bits_to_f32(u);
            }
        } else if (t->dtype == FAT5_ST_BF16) {
            for (j = 0; j < k; j++)
                dst[done + j] = fat5__bf16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
        } else {
            for (j = 0; j < k; j++)
                dst[done + j] = fat5__f16_to_f32((uint16_t)(buf[2 * j] | buf[2 * j + 1] << 8));
        }
        done += k;
    }
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// safetensors writer: fp32 tensors in name order, __metadata__ first, the header padded with
// spaces to a multiple of 8 bytes, little-endian data. Same input, same bytes.

static int fat5__st_wcmp(const void *a, const void *b) {
    const fat5_st_write_tensor *x = *FAT5__CAST(const fat5_st_write_tensor *const *, a);
    const fat5_st_write_tensor *y = *FAT5__CAST(const fat5_st_write_tensor *const *, b);
    return strcmp(x->name, y->name);
}

static int fat5__st_kcmp(const void *a, const void *b) {
    return strcmp(*FAT5__CAST(const char *const *, a), *FAT5__CAST(const char *const *, b));
}

// Checks the arguments of fat5_st_write and sorts the tensors by name into order.
static fat5_status fat5__st_write_check(fat5_ctx *ctx, const char *path,
                                        const fat5_st_write_tensor *t, int n,
                                        const char *const *meta_kv, int n_meta,
                                        const fat5_st_write_tensor **order) {
    const char **keys;
    char nm[128];
    uint64_t total = 0;
    int i, d;
    for (i = 0; i < n; i++) {
        uint64_t numel = 1;
        const char *name = t[i].name;
        if (!name || !name[0])
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d has %s name", path, i,
                             name ? "an empty" : "a NULL");
        if (strcmp(name, "__metadata__") == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d: the name __metadata__ is "
                             "reserved", path, i);
        if (!fat5__utf8_valid(name))
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor %d: the name is not valid "
                             "UTF-8", path, i);
        fat5__msg_name(nm, sizeof nm, name);
        if (t[i].ndim < 0 || t[i].ndim > FAT5_ST_MAX_DIMS)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': ndim %d is not in "
                             "[0, %d]", path, nm, t[i].ndim, FAT5_ST_MAX_DIMS);
        for (d = 0; d < t[i].ndim; d++) {
            int64_t s = t[i].shape[d];
            if (s < 0)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': shape[%d] = %lld is "
                                 "negative", path, nm, d, (long long)s);
            if (s != 0 && numel > UINT64_MAX / 4 / (uint64_t)s)
                return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': shape overflows",
                                 path, nm);
            numel *= (uint64_t)s;
        }
        if (numel > 0 && !t[i].data)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: tensor '%s': data is NULL", path, nm);
        if (total + 4 * numel < total)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the tensors add up to more than "
                             "2^64 bytes", path);
        total += 4 * numel;
        order[i] = &t[i];
    }
    qsort(FAT5__CAST(void *, order), (size_t)n, sizeof *order, fat5__st_wcmp);
    for (i = 1; i < n; i++)
        if (strcmp(order[i - 1]->name, order[i]->name) == 0)
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: duplicate tensor name '%s'", path,
                             fat5__msg_name(nm, sizeof nm, order[i]->name));
    if (n_meta == 0) return FAT5_OK;
    keys = FAT5__CAST(const char **, fat5__calloc(ctx, (size_t)n_meta, sizeof *keys));
    if (!keys) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    for (i = 0; i < n_meta; i++) {
        const char *k = meta_kv[2 * i], *v = meta_kv[2 * i + 1];
        const char *bad = !k ? "the key is NULL" : !v ? "the value is NULL"
                          : !fat5__utf8_valid(k) ? "the key is not valid UTF-8"
                          : !fat5__utf8_valid(v) ? "the value is not valid UTF-8" : NULL;
        if (bad) {
            fat5__free(ctx, FAT5__CAST(void *, keys));
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: metadata entry %d: %s", path, i, bad);
        }
        keys[i] = k;
    }
    qsort(FAT5__CAST(void *, keys), (size_t)n_meta, sizeof *keys, fat5__st_kcmp);
    for (i = 1; i < n_meta; i++) {
        if (strcmp(keys[i - 1], keys[i]) == 0) {
            fat5__msg_name(nm, sizeof nm, keys[i]);
            fat5__free(ctx, FAT5__CAST(void *, keys));
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: duplicate metadata key '%s'", path,
                             nm);
        }
    }
    fat5__free(ctx, FAT5__CAST(void *, keys));
    return FAT5_OK;
}

static uint64_t fat5__st_wnumel(const fat5_st_write_tensor *t) {
    uint64_t numel = 1;
    int d;
    for (d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
    return numel;
}

FAT5_API fat5_status fat5_st_write(fat5_ctx *ctx, const char *path, const fat5_st_write_tensor *t,
                                   int n_tensors, const char *const *meta_kv, int n_meta) {
    const fat5_st_write_tensor **order;
    unsigned char buf[16384];
    fat5__sb h;
    fat5__afile a;
    uint64_t off = 0, hlen;
    fat5_status st;
    int i, d;
    if (!path || n_tensors < 0 || n_meta < 0 || (n_tensors > 0 && !t) || (n_meta > 0 && !meta_kv))
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_st_write: %s",
                         !path ? "path is NULL" : n_tensors < 0 || n_meta < 0 ? "negative count"
                         : !t && n_tensors > 0 ? "tensors is NULL" : "meta_kv is NULL");
    order = FAT5__CAST(const fat5_st_write_tensor **,
                       fat5__calloc(ctx, (size_t)n_tensors, sizeof *order));
    if (!order) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    st = fat5__st_write_check(ctx, path, t, n_tensors, meta_kv, n_meta, order);
    if (st != FAT5_OK) {
        fat5__free(ctx, FAT5__CAST(void *, order));
        return st;
    }
    // the header
    fat5__sb_init(&h, ctx);
    fat5__sb_puts(&h, "{");
    if (n_meta > 0) {
        fat5__sb_puts(&h, "\"__metadata__\":{");
        for (i = 0; i < n_meta; i++) {
            if (i) fat5__sb_puts(&h, ",");
            fat5__sb_json_string(&h, meta_kv[2 * i]);
            fat5__sb_puts(&h, ":");
            fat5__sb_json_string(&h, meta_kv[2 * i + 1]);
        }
        fat5__sb_puts(&h, "}");
    }
    for (i = 0; i < n_tensors; i++) {
        uint64_t nbytes = fat5__st_wnumel(order[i]) * 4;
        if (i || n_meta > 0) fat5__sb_puts(&h, ",");
        fat5__sb_json_string(&h, order[i]->name);
        fat5__sb_puts(&h, ":{\"dtype\":\"F32\",\"shape\":[");
        for (d = 0; d < order[i]->ndim; d++)
            fat5__sb_printf(&h, "%s%lld", d ? "," : "", (long long)order[i]->shape[d]);
        fat5__sb_printf(&h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                        (unsigned long long)(off + nbytes));
        off += nbytes;   // no overflow: each tensor is in memory
    }
    fat5__sb_puts(&h, "}");
    while (!h.oom && h.len % 8 != 0) fat5__sb_puts(&h, " ");
    if (h.oom) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "%s: out of memory for the header", path);
    } else if ((uint64_t)h.len > FAT5__ST_MAX_HEADER) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "%s: the header would be %zu bytes, over the "
                       "100 MiB a reader accepts", path, h.len);
    }
    if (st == FAT5_OK) st = fat5__afile_open(ctx, path, &a);
    if (st == FAT5_OK) {   // header length and header
        hlen = h.len;
        for (i = 0; i < 8; i++) buf[i] = (unsigned char)(hlen >> (8 * i));
        st = fat5__afile_write(ctx, &a, path, buf, 8);
        if (st == FAT5_OK) st = fat5__afile_write(ctx, &a, path, h.buf, h.len);
    }
    for (i = 0; st == FAT5_OK && i < n_tensors; i++) {   // data, little-endian, in chunks
        uint64_t numel = fat5__st_wnumel(order[i]), done = 0;
        while (st == FAT5_OK && done < numel) {
            size_t k = sizeof buf / 4, j;
            if (numel - done < k) k = (size_t)(numel - done);
            for (j = 0; j < k; j++) {
                uint32_t u;
                memcpy(&u, &order[i]->data[done + j], 4);
                buf[4 * j] = (unsigned char)u;
                buf[4 * j + 1] = (unsigned char)(u >> 8);
                buf[4 * j + 2] = (unsigned char)(u >> 16);
                buf[4 * j + 3] = (unsigned char)(u >> 24);
            }
            st = fat5__afile_write(ctx, &a, path, buf, 4 * k);
            done += k;
        }
    }
    if (st == FAT5_OK) st = fat5__afile_commit(ctx, &a, path);
    fat5__sb_free(&h);
    fat5__free(ctx, FAT5__CAST(void *, order));
    return st;
}
