// =============================================================================================
// ==[1.3] base: messages, UTF-8, JSON reader and writer, atomic file writes, 16-bit floats ==

static size_t fat5__utf8_len(const char *s, size_t avail);

// The character at s in a message: returns its length when it may be printed as it is, 0 for a
// control character (C0, DEL, or C1 U+0080..U+009F, which some terminals obey too) or a byte that
// is not valid UTF-8; *skip gets the bytes it spans (1 for an invalid byte).
static size_t fat5__msg_char(const char *s, size_t *skip) {
    unsigned char c = (unsigned char)s[0];
    size_t k;
    *skip = 1;
    if (c < 0x20 || c == 0x7f) return 0;
    if (c < 0x80) return 1;
    k = fat5__utf8_len(s, 4);   // stops at the first byte that is not a continuation, e.g. the NUL
    if (k == 0) return 0;
    *skip = k;
    return k == 2 && c == 0xC2 && (unsigned char)s[1] < 0xA0 ? 0 : k;
}

// 1 when s prints as it is in a message (fat5__msg_name would not change a byte of it)
static int fat5__msg_safe(const char *s) {
    size_t skip;
    for (; *s; s += skip)
        if (fat5__msg_char(s, &skip) == 0) return 0;
    return 1;
}

// A string taken from a file (a name, key or value), made fit for an error message: each control
// character or invalid byte shown as one '?' (a key holding ESC "[2J" must not reach a terminal
// as an escape sequence), at most cap-1 bytes, cut on a character boundary with "...". Returns
// buf.
static const char *fat5__msg_name(char *buf, size_t cap, const char *s) {
    size_t i = 0, skip;
    if (cap == 0) return "";
    for (; *s; s += skip) {
        size_t k = fat5__msg_char(s, &skip), n = k ? k : 1;
        if (n > cap - 1 - i) break;
        if (k) memcpy(buf + i, s, k);
        else buf[i] = '?';
        i += n;
    }
    if (*s && cap >= 8) {   // cut: make room for "..." without splitting a character
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

FAT5_API size_t fat5_utf8_valid_len(const char *s, size_t n) {
    size_t i = 0, k;
    if (!s) return 0;
    while (i < n && (k = fat5__utf8_len(s + i, n - i)) != 0) i += k;
    return i;
}

static int fat5__utf8_valid(const char *s) {
    size_t n = strlen(s);
    return fat5_utf8_valid_len(s, n) == n;
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
    size_t dom_bytes;     // bytes of nodes and strings so far, bounded by FAT5__JSON_MAX_DOM
} fat5__jp;

// A document whose tree would take more than this is refused before it exhausts memory (a
// hostile 100 MiB safetensors header of tiny values would otherwise need gigabytes).
#define FAT5__JSON_MAX_DOM ((size_t)256 << 20)

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
    if (need > FAT5__JSON_MAX_DOM - p->dom_bytes) {
        fat5__jp_fail(p, p->pos, "document too large: its tree would take more than %zu MiB",
                      FAT5__JSON_MAX_DOM >> 20);
        return NULL;
    }
    p->dom_bytes += need;
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

#include <locale.h>

// JSON numbers use '.' whatever LC_NUMERIC says, and strtod / printf use the locale's decimal
// point (',' in de_DE or fr_FR). The two helpers below translate between them, so a program that
// calls setlocale still reads and writes the same JSON.

// strtod of the whole NUL-terminated decimal s (a validated JSON number: digits, at most one '.',
// an exponent), independent of the locale: the '.' is replaced by the locale's decimal point in
// a copy (on the stack; on the heap only for a literal above 120 bytes). 1 when all of s was
// read and the value is finite.
static int fat5__strtod_c(const char *s, double *out) {
    const char *dp = localeconv()->decimal_point, *dot = strchr(s, '.');
    char small[128], *buf = small, *end;
    size_t n, dl;
    double d;
    int ok;
    if (!dp || !dp[0]) dp = ".";
    dl = strlen(dp);
    if (!dot || strcmp(dp, ".") == 0) {
        d = strtod(s, &end);
        ok = *end == 0;
    } else {
        n = strlen(s);
        if (n + dl + 1 > sizeof small && !(buf = FAT5__CAST(char *, fat5__malloc(NULL, n + dl + 1))))
            return 0;
        memcpy(buf, s, (size_t)(dot - s));
        memcpy(buf + (dot - s), dp, dl);
        memcpy(buf + (dot - s) + dl, dot + 1, n - (size_t)(dot - s));   // with the NUL
        d = strtod(buf, &end);
        ok = *end == 0;
        if (buf != small) fat5__free(NULL, buf);
    }
    if (!ok || d == HUGE_VAL || d == -HUGE_VAL || d != d) return 0;
    *out = d;
    return 1;
}

// snprintf(buf, cap, "%.*g", prec, x) with '.' as the decimal point whatever the locale
static void fat5__fmt_g(char *buf, size_t cap, int prec, double x) {
    const char *dp = localeconv()->decimal_point;
    char *at;
    snprintf(buf, cap, "%.*g", prec, x);
    if (dp && dp[0] && strcmp(dp, ".") != 0 && (at = strstr(buf, dp)) != NULL) {
        size_t dl = strlen(dp);
        *at = '.';
        memmove(at + 1, at + dl, strlen(at + dl) + 1);
    }
}

// shortest decimal that reads back as the same double ("1e-06", not "9.9999999999999995e-07"),
// always with a '.' or an exponent so Python reads a float; '.' whatever the locale
static void fat5__fmt_double(char buf[40], double x) {
    int prec;
    double back;
    for (prec = 1; prec <= 17; prec++) {
        fat5__fmt_g(buf, 40, prec, x);
        if (fat5__strtod_c(buf, &back) && back == x) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
}

// the validated literal as a double, whatever the locale; values that overflow a double fail
static int fat5__json_as_double(const fat5__json *v, double *out) {
    if (!v || v->type != FAT5__J_NUMBER) return 0;
    return fat5__strtod_c(v->str, out);
}

#ifndef _WIN32
#include <fcntl.h>
#endif

// Opens path for reading when it is a regular file; *size (may be NULL) gets its size. A FIFO, a
// device or a directory is refused with FAT5_ERR_IO and never blocks: the open is non-blocking
// (a FIFO without a writer would otherwise wait forever), and the flag is cleared once fstat has
// shown a regular file.
static fat5_status fat5__open_regular(fat5_ctx *ctx, const char *path, FILE **out, uint64_t *size) {
#ifdef _WIN32
    FILE *fp = fopen(path, "rb");
    *out = NULL;
    if (!fp) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (size) {
        if (_fseeki64(fp, 0, SEEK_END) != 0 || _ftelli64(fp) < 0 || _fseeki64(fp, 0, SEEK_SET) != 0) {
            int e = errno;
            fclose(fp);
            return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot get the file size: %s", path, strerror(e));
        }
        *size = (uint64_t)_ftelli64(fp);
    }
    *out = fp;
    return FAT5_OK;
#else
    struct stat sb;
    FILE *fp;
    int fd, fl, e, flags = O_RDONLY | O_NONBLOCK;
    const char *what;
#ifdef O_CLOEXEC
    flags |= O_CLOEXEC;
#endif
    *out = NULL;
    do fd = open(path, flags);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        e = errno;
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot get the file size: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        what = S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO"
               : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : "a special file";
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: not a regular file (%s)", path, what);
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        !(fp = fdopen(fd, "rb"))) {
        e = errno;
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    if (size) *size = (uint64_t)sb.st_size;
    *out = fp;
    return FAT5_OK;
#endif
}

static int fat5__is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// Reads a whole regular file into a NUL-terminated buffer (free with fat5__free). FAT5_ERR_IO when
// it cannot be read or is not a regular file, FAT5_ERR_FORMAT when it holds more than max_size
// bytes.
static fat5_status fat5__read_file(fat5_ctx *ctx, const char *path, size_t max_size, char **out,
                                   size_t *out_len) {
    FILE *fp;
    char *buf = NULL;
    size_t len = 0, cap = 0, limit = max_size < SIZE_MAX - 1 ? max_size + 1 : SIZE_MAX - 1;
    fat5_status st;
    *out = NULL;
    if (out_len) *out_len = 0;
    if ((st = fat5__open_regular(ctx, path, &fp, NULL)) != FAT5_OK) return st;
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
// The file-system calls that change files: those of atomic writes and of checkpoint directories
// (their saves, the pointer to the latest, pruning). Each fat5__fs_* is the system call, with its
// result and errno; path names the file a descriptor refers to (for the hook below only).
//
// Built with FAT5_TEST_FAULTS (the test runners define it; the library never does), each first
// asks fat5__fs_fault, when a test has set it, with the operation's name ("mkdir", "create",
// "chmod", "write", "fsync", "close", "rename", "unlink", "rmdir", "opendir") and the path(s): a
// non-zero answer is an errno value, and the call fails with it without being made (as a full disk
// fails it); a test simulating a crash ends its process inside the hook. A refused close still
// releases the descriptor, as close does when it reports an error. Without the macro the check is
// the constant 0 and each wrapper is the plain call.
#ifdef FAT5_TEST_FAULTS
typedef int (*fat5__fs_fault_fn)(const char *op, const char *path, const char *path2);
static fat5__fs_fault_fn fat5__fs_fault;
// Whether the test hook refuses the call (errno set to its answer).
static int fat5__fs_refused(const char *op, const char *path, const char *path2) {
    int e;
    if (!fat5__fs_fault || (e = fat5__fs_fault(op, path, path2)) == 0) return 0;
    errno = e;
    return 1;
}
#else
#define fat5__fs_refused(op, path, path2) ((void)(path), (void)(path2), 0)
#endif

static int fat5__fs_rename(const char *from, const char *to) {
    if (fat5__fs_refused("rename", from, to)) return -1;
    return rename(from, to);
}
static int fat5__fs_unlink(const char *path) {
    if (fat5__fs_refused("unlink", path, NULL)) return -1;
    return remove(path);
}
#ifndef _WIN32
static int fat5__fs_mkdir(const char *path) {
    if (fat5__fs_refused("mkdir", path, NULL)) return -1;
    return mkdir(path, 0777);
}
static int fat5__fs_rmdir(const char *path) {
    if (fat5__fs_refused("rmdir", path, NULL)) return -1;
    return rmdir(path);
}
// Creates and opens a new file from tmpl ("...XXXXXX", rewritten with the name), for writing.
static int fat5__fs_create(char *tmpl) {
    if (fat5__fs_refused("create", tmpl, NULL)) return -1;
    return mkstemp(tmpl);
}
static int fat5__fs_chmod(int fd, const char *path, mode_t mode) {
    if (fat5__fs_refused("chmod", path, NULL)) return -1;
    return fchmod(fd, mode);
}
static ssize_t fat5__fs_write(int fd, const char *path, const void *data, size_t n) {
    if (fat5__fs_refused("write", path, NULL)) return -1;
    return write(fd, data, n);
}
static int fat5__fs_fsync(int fd, const char *path) {
    if (fat5__fs_refused("fsync", path, NULL)) return -1;
    return fsync(fd);
}
static int fat5__fs_close(int fd, const char *path) {
    if (fat5__fs_refused("close", path, NULL)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}
// Opens a directory to sync its entries (fat5__fs_fsync on the descriptor).
static int fat5__fs_open_dir(const char *path) {
    if (fat5__fs_refused("opendir", path, NULL)) return -1;
    return open(path, O_RDONLY);
}
#endif

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
    (void)fat5__fs_unlink(a->tmp);
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
    a->fd = fat5__fs_create(a->tmp);
    if (a->fd >= 0) {
        // mkstemp creates 0600; keep the mode of the file being replaced, else use 0644
        struct stat st;
        mode_t mode = 0644;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) mode = st.st_mode & 07777;
        (void)fat5__fs_chmod(a->fd, a->tmp, mode);
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
        ssize_t w = fat5__fs_write(a->fd, a->tmp, p, chunk);
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
    if (fat5__fs_fsync(fd, a->tmp) != 0) {
        e = errno;
        close(fd);
        goto fail;
    }
    step = "close";
    if (fat5__fs_close(fd, a->tmp) != 0) goto fail_errno;
#endif
    step = "rename";
    if (fat5__fs_rename(a->tmp, path) != 0) goto fail_errno;
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

FAT5_API fat5_status fat5_read_file(fat5_ctx *ctx, const char *path, size_t max_size, char **out, size_t *len) {
    if (!ctx || !path || !out || !len) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_read_file: NULL argument");
    return fat5__read_file(ctx, path, max_size, out, len);
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

