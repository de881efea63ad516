// libFuzzer target: what examples/serve reads from a client (examples/serve_request.h). The input
// after its first byte goes two ways:
//   - through the HTTP parser as a connection's bytes, in pieces whose sizes the first byte picks
//     (1 byte at a time, a few, or all at once), request after request (pipelining); every
//     request is routed and its body mapped to a generation or embedding request. The parser must
//     end each request in DONE or ERROR (with an HTTP status and a message), use every byte up to
//     there, keep the body within its limit, and give the same result however the bytes are cut;
//   - as a JSON body of each endpoint, directly. A request that maps must hold what the server
//     relies on: inputs of valid UTF-8 or ids in range, token lists whose every element can be
//     read, packed sequences with cu[0] = 0 and increasing offsets, stop strings within bounds.
// Any text, escaped by sv_buf_json_str, must parse back as a JSON string equal to the text with
// every invalid byte as U+FFFD, and sv_utf8_stream must give that same text whatever the pieces.
//     make fuzz   (clang -fsanitize=fuzzer,address,undefined)
#define FAT5_NO_CUDA
#include "../../fat5.h"
#include "../../examples/serve_request.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const sv_http_limits http_limits = {2048, 24, 65536};

static sv_req_limits req_limits(void) {
    sv_req_limits l;
    l.json.max_depth = 16;
    l.json.max_values = 4096;
    l.max_stop = 4;
    l.max_stop_bytes = 64;
    l.max_embed_inputs = 8;
    return l;
}

static int known_status(int s) {
    static const int ok[] = {400, 404, 405, 411, 413, 414, 417, 422, 431, 501, 505};
    size_t k;
    for (k = 0; k < sizeof ok / sizeof ok[0]; k++)
        if (s == ok[k]) return 1;
    return 0;
}

static void check_error(const sv_error *e) {
    if (!known_status(e->status)) fuzz_die("an error with an unexpected HTTP status");
    if (!e->type || !e->msg[0]) fuzz_die("an error without a type or message");
}

static void check_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int k = sv_utf8_char((const unsigned char *)s + i, n - i);
        if (k <= 0) fuzz_die("invalid UTF-8 in a decoded string");
        i += (size_t)k;
    }
}

static volatile int32_t sink;

static void touch_list(const fat5_token_list *l) {
    int64_t k;
    if (l->n < 0 || (l->n > 0 && !l->ids)) fuzz_die("a malformed token list");
    for (k = 0; k < l->n; k++) {
        if (l->ids[k] < 0) fuzz_die("a negative id in a token list");
        sink ^= l->ids[k];
    }
}

static void touch_seqs(const fat5_token_seqs *q) {
    int64_t k, j;
    if (q->n < 0 || (q->n > 0 && (!q->ids || !q->cu))) fuzz_die("malformed token sequences");
    if (q->n > 0 && q->cu[0] != 0) fuzz_die("token sequences with cu[0] != 0");
    for (k = 0; k < q->n; k++) {
        if (q->cu[k + 1] <= q->cu[k]) fuzz_die("an empty or backwards token sequence");
        for (j = q->cu[k]; j < q->cu[k + 1]; j++) {
            if (q->ids[j] < 0) fuzz_die("a negative id in a token sequence");
            sink ^= q->ids[j];
        }
    }
}

static void check_request(const sv_req *r, int endpoint, const sv_req_limits *lim) {
    int64_t i, j;
    const fat5_generate_config *g = &r->g;
    if (r->n_inputs < 1) fuzz_die("a request without inputs");
    if (endpoint != SV_EP_EMBED && r->n_inputs != 1) fuzz_die("a generation request with several inputs");
    if (r->n_inputs > lim->max_embed_inputs) fuzz_die("more inputs than the limit");
    if ((r->texts != NULL) == (r->ids != NULL)) fuzz_die("texts and ids both or neither");
    for (i = 0; i < r->n_inputs; i++) {
        if (r->texts) {
            check_utf8(r->texts[i], r->text_lens[i]);
            if (r->texts[i][r->text_lens[i]] != 0) fuzz_die("a text without its NUL");
        } else {
            if (r->n_ids[i] < 1) fuzz_die("an empty row of ids");
            for (j = 0; j < r->n_ids[i]; j++)
                if (r->ids[i][j] < 0) fuzz_die("a negative input id");
        }
    }
    if (r->n_stops < 0 || r->n_stops > lim->max_stop) fuzz_die("stop strings beyond the limit");
    for (i = 0; i < r->n_stops; i++) {
        if (r->stop_lens[i] < 1 || r->stop_lens[i] > lim->max_stop_bytes) fuzz_die("a stop string of a bad length");
        check_utf8(r->stops[i], r->stop_lens[i]);
    }
    if (r->endpoint == SV_EP_COMPAT) fuzz_die("POST / left unresolved");
    if (r->truncate < 0 || r->max_time < 0) fuzz_die("a negative truncate or max_time");
    if (r->ignore_eos && (g->eos_token_id != -1 || g->eos_token_ids.n != 0)) fuzz_die("ignore_eos left an eos");
    touch_list(&g->eos_token_ids);
    touch_list(&g->forced_eos_token_id);
    touch_list(&g->suppress_tokens);
    touch_list(&g->begin_suppress_tokens);
    touch_seqs(&g->bad_words_ids);
    touch_seqs(&g->sequence_bias);
    touch_seqs(&g->decoder_input_ids);
    touch_seqs(&g->force_words_ids);
    for (i = 0; i < g->sequence_bias.n; i++)
        if (g->sequence_bias_values[i] != g->sequence_bias_values[i]) fuzz_die("a NaN sequence bias");
    for (i = 0; i < g->force_words_ids.n; i++) sink ^= g->force_words_constraint[i];
}

// Maps a body for an endpoint and checks the outcome.
static void map_body(int endpoint, const char *body, size_t len, const fat5_generate_config *defaults) {
    sv_req_limits lim = req_limits();
    sv_req r;
    sv_error e;
    memset(&e, 0, sizeof e);
    if (sv_req_parse(endpoint, body, len, &lim, defaults, &r, &e)) check_request(&r, endpoint, &lim);
    else if (e.status == 500) fuzz_die(e.msg);   // out of memory within these limits: a leak or a bug
    else check_error(&e);
    sv_req_free(&r);
}

// One connection's bytes, fed in pieces of `step` bytes (0: all at once). Writes a digest of the
// outcome (requests, their fields, the final error) into out so that two ways of cutting the
// same bytes can be compared.
static void connection(const uint8_t *p, size_t n, size_t step, const fat5_generate_config *defaults, sv_buf *out) {
    sv_http h;
    size_t pos = 0, piece = 0;
    int requests = 0;
    sv_http_init(&h, &http_limits);
    while (pos < n && requests < 8) {
        size_t len = step ? (n - pos < step ? n - pos : step) : n - pos, used;
        if (piece == 0) piece = len;
        used = sv_http_feed(&h, (const char *)p + pos, piece);
        if (used > piece) fuzz_die("the parser used more bytes than it was given");
        pos += used;
        piece -= used;
        if (h.body_len > http_limits.max_body) fuzz_die("a body beyond its limit");
        if (h.state == SV_HTTP_ERROR) {
            check_error(&h.err);
            sv_buf_printf(out, "error %d %s|", h.err.status, h.err.msg);
            break;
        }
        if (h.state == SV_HTTP_DONE) {
            const char *allow;
            sv_error e;
            int ep;
            memset(&e, 0, sizeof e);
            if (!h.body) fuzz_die("a complete request without its body buffer");
            ep = sv_route(h.method, h.path, &allow, &e);
            sv_buf_printf(out, "%s %s 1.%d ka%d ex%d body %zu:", h.method, h.path, h.minor, h.keep_alive,
                          h.expect_continue, h.body_len);
            sv_buf_put(out, h.body, h.body_len);
            sv_buf_puts(out, "|");
            if (ep == SV_EP_GENERATE || ep == SV_EP_STREAM || ep == SV_EP_COMPAT || ep == SV_EP_EMBED)
                map_body(ep, h.body, h.body_len, defaults);
            else if (!ep) check_error(&e);
            sv_http_reset(&h);
            requests++;
            continue;
        }
        if (piece > 0) fuzz_die("the parser stopped before DONE or ERROR with bytes left");
    }
    sv_http_free(&h);
}

// JSON string writing round trip, and the UTF-8 stream in pieces against it.
static void text_round_trip(const uint8_t *p, size_t n, size_t step) {
    sv_buf esc = {NULL, 0, 0, 0}, st = {NULL, 0, 0, 0};
    sv_utf8_stream us;
    sj_limits jl = {4, 16};
    sj_doc d;
    sv_error e;
    size_t pos = 0;
    sv_buf_json_str(&esc, (const char *)p, n);
    if (esc.oom) fuzz_die("out of memory");
    if (!sj_parse(esc.p, esc.n, &jl, &d, &e) || d.root->type != SJ_STRING) fuzz_die("an escaped string does not parse back");
    check_utf8(d.root->s, d.root->len);
    memset(&us, 0, sizeof us);
    while (pos < n) {   // the stream in pieces gives the text with invalid bytes as U+FFFD, as the writer
        size_t len = step && n - pos > step ? step : n - pos;
        sv_utf8_stream_push(&us, (const char *)p + pos, len, 0, &st);
        pos += len;
    }
    sv_utf8_stream_push(&us, NULL, 0, 1, &st);
    if (st.oom) fuzz_die("out of memory");
    if (st.n != d.root->len || (st.n && memcmp(st.p, d.root->s, st.n) != 0))
        fuzz_die("the UTF-8 stream and the JSON writer disagree");
    sj_free(&d);
    sv_buf_free(&esc);
    sv_buf_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t steps[4] = {0, 1, 3, 7};
    fat5_generate_config defaults = fat5_generate_config_default();
    sv_buf a = {NULL, 0, 0, 0}, b = {NULL, 0, 0, 0};
    size_t step;
    if (size < 1) return 0;
    step = steps[data[0] & 3];
    data++, size--;
    // the checkpoint's lists that a request may keep or replace
    {
        static const int32_t sup[] = {5, 6};
        defaults.suppress_tokens.ids = sup, defaults.suppress_tokens.n = 2;
    }
    connection(data, size, 0, &defaults, &a);
    connection(data, size, step ? step : 1, &defaults, &b);
    if (a.oom || b.oom) fuzz_die("out of memory");
    if (a.n != b.n || (a.n && memcmp(a.p, b.p, a.n) != 0)) fuzz_die("the bytes cut in pieces parse differently");
    sv_buf_free(&a);
    sv_buf_free(&b);
    map_body(SV_EP_GENERATE, (const char *)data, size, &defaults);
    map_body(SV_EP_COMPAT, (const char *)data, size, &defaults);
    map_body(SV_EP_EMBED, (const char *)data, size, &defaults);
    text_round_trip(data, size, step ? step : 2);
    return 0;
}
