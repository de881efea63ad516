// =============================================================================================
// ==[7.4] generate: continuous batching (fat5_engine) ==
// An engine runs one decoder in joined mode (fat5_decoder_join) over a fixed pool of max_rows
// rows: a greedy or sampling request takes one row, a beam search request num_beams contiguous
// rows. Requests wait in a FIFO queue until their rows are free; at each step the waiting ones
// that fit join together (their encoders run packed, fat5_decoder_join), every running row feeds
// its last token, and each request's next token is chosen by the same ops fat5_generate runs
// (gen_process, gen_select, gen_beam + the cache reorder), on the request's slice of the step:
//
//   entries   e0 .. e0 + k - 1 of the step are the request's rows row0 .. row0 + k - 1 (requests
//             sorted by row0, so each request's entries are contiguous);
//   state     hist [R, Lh], lens, done, score, bscore, fin_* [R (, Lh)] on the backend, indexed by
//             decoder row: a request owns its rows' parts (beam search reads done and unsat at its
//             first row: the ops index those by input, and a request is one input);
//   options   the request's fat5__gen_opts with row0 set (the ops count inputs, sampling draws and
//             beam units from it, so a request decodes as fat5_generate decodes it alone), its
//             lists in its first row's list area (FAT5__ENGINE_LIST_INTS + max_input_tokens ints).
//
// Greedy requests without any logits processor ("plain") share one gen_select over all the step's
// entries (the others' tokens are overwritten afterwards by their own ops), so a batch of plain
// requests costs one selection launch a step. The decoder step itself is replayed from a CUDA
// graph recorded once per entry count n (kept for every n seen; contents of tok / rows / positions
// change between replays, the graph does not). Between steps the host reads the step's tokens
// (and, with beam search running, the done flags): events, finishes and the next step's entries.

#define FAT5__ENGINE_LIST_INTS 4096    // a request's option lists (eos, suppress, bad words ...), ints
#define FAT5__ENGINE_LIST_FLOATS 1024  // ... and sequence biases

typedef struct fat5__ereq {
    uint64_t id;
    int plain;                     // greedy with no processor: the shared selection
    int beam;                      // K rows of beam search
    int cancel;                    // fat5_engine_cancel: leaves at the next step
    int32_t *input;                // [n_input]
    int64_t n_input;
    int64_t K, max_new, row0, e0;  // rows, new tokens at most, first row, first entry of the step
    int32_t start_tok;             // the decoder start token
    fat5__gen_opts o;              // counts and values; the list addresses are set when it joins
    int32_t *list;                 // [n_list] the option lists as fat5__gen_fill lays them out
    float *bias;                   // [o.n_seq] the sequence biases
    int64_t n_list;
    int32_t *out;                  // [max_new] the tokens so far
    int64_t n_out;
    int64_t steps;                 // decoder steps run for it
    float score;
} fat5__ereq;

struct fat5_engine {
    fat5_model *m;
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_engine_config cfg;
    fat5_decoder *d;
    int64_t R, Lh, V, list_ints;   // rows, history length (1 + max_new_tokens), vocabulary, ints a list area
    fat5__addr base;               // the state below, one allocation
    fat5__addr hist, lens, done, score, bscore, fin_score, fin_tok, fin_len, fin_flag, unsat, src, scratch;
    fat5__addr lists, biases;      // [R, list_ints] int32, [R, FAT5__ENGINE_LIST_FLOATS] fp32
    fat5__addr skip;               // int32 [R]: nonzero for rows the shared selection leaves alone (its done flags)
    fat5__gen_opts plain;          // the shared selection's options (no stop token: the host finishes rows)
    fat5__graph *graphs;           // [R + 1]: the decoder step recorded for n entries
    int use_graph;
    // requests
    fat5__ereq **waiting;          // FIFO [max_waiting], from wait_head, n_waiting of them
    int64_t wait_head, n_waiting;
    fat5__ereq **running;          // [R] sorted by row0
    int64_t n_running;
    fat5__ereq **done_reqs;        // [R + max_waiting] finished at the last step, freed at the next
    int64_t n_done;
    unsigned char *row_used;       // [R]
    uint64_t next_id;
    // the step's host buffers
    int32_t *ent_tok, *ent_row;    // [R] the entries of the last step (their tokens: the next inputs)
    int32_t *last_tok;             // [R] each row's last chosen token (its input at the next step)
    int64_t n_ent;
    int dirty;                     // the entries changed: upload them before the step
    int32_t *h32, *flags;          // [R * Lh] staging, [R] done flags
    float *hf;                     // [R] staging
    fat5_engine_event *events;     // [R + max_waiting]
    int64_t steps, tokens;
    int64_t last_join;             // the step count at the last admission
};

#define FAT5__TRY(call)                          \
    do {                                         \
        if ((st = (call)) != FAT5_OK) return st; \
    } while (0)

FAT5_API fat5_engine_config fat5_engine_config_default(void) {
    fat5_engine_config c;
    c.max_rows = 64;
    c.max_input_tokens = 1024;
    c.max_new_tokens = 256;
    c.max_waiting = 1024;
    c.join_interval = 1;
    return c;
}

static void fat5__ereq_free(fat5_ctx *ctx, fat5__ereq *q) {
    if (!q) return;
    fat5__free(ctx, q->input);
    fat5__free(ctx, q->list);
    fat5__free(ctx, q->bias);
    fat5__free(ctx, q->out);
    fat5__free(ctx, q);
}

FAT5_API void fat5_engine_destroy(fat5_engine *e) {
    int64_t i;
    fat5_ctx *ctx;
    if (!e) return;
    ctx = e->ctx;
    for (i = 0; i < e->n_waiting; i++) fat5__ereq_free(ctx, e->waiting[(e->wait_head + i) % e->cfg.max_waiting]);
    for (i = 0; i < e->n_running; i++) fat5__ereq_free(ctx, e->running[i]);
    for (i = 0; i < e->n_done; i++) fat5__ereq_free(ctx, e->done_reqs[i]);
    if (e->graphs)
        for (i = 0; i <= e->R; i++) e->be->graph_destroy(ctx, e->graphs[i].exec);
    if (e->base) e->be->free(ctx, e->base);
    fat5_decoder_destroy(e->d);
    fat5__free(ctx, e->graphs);
    fat5__free(ctx, e->waiting);
    fat5__free(ctx, e->running);
    fat5__free(ctx, e->done_reqs);
    fat5__free(ctx, e->row_used);
    fat5__free(ctx, e->ent_tok);
    fat5__free(ctx, e->h32);
    fat5__free(ctx, e->hf);
    fat5__free(ctx, e->events);
    fat5__free(ctx, e);
}

// Lays out the engine's state on the backend from base (0 measures); 0 when the size overflows.
static int fat5__engine_layout(fat5_engine *e, fat5__addr base, size_t *total) {
    size_t off = 0, R = (size_t)e->R, Lh = (size_t)e->Lh;
    int ok = 1;
#define FAT5__EWS(field, count)                                                                   \
    do {                                                                                          \
        size_t n_ = 0;                                                                            \
        off = (off + 255) & ~(size_t)255;                                                         \
        if (!fat5__mul_ok((size_t)(count), 4, &n_) || !fat5__add_ok(off, n_, &off)) ok = 0;        \
        e->field = base ? base + (fat5__addr)(off - n_) : 0;                                      \
    } while (0)
    FAT5__EWS(hist, R * Lh);
    FAT5__EWS(lens, R);
    FAT5__EWS(done, R);
    FAT5__EWS(score, R);
    FAT5__EWS(bscore, R);
    FAT5__EWS(fin_score, R);
    FAT5__EWS(fin_tok, R * Lh);
    FAT5__EWS(fin_len, R);
    FAT5__EWS(fin_flag, R);
    FAT5__EWS(unsat, R);
    FAT5__EWS(src, R);
    FAT5__EWS(scratch, R * Lh);
    FAT5__EWS(lists, R * (size_t)e->list_ints);
    FAT5__EWS(biases, R * FAT5__ENGINE_LIST_FLOATS);
    FAT5__EWS(skip, R);
#undef FAT5__EWS
    *total = off;
    return ok;
}

FAT5_API fat5_status fat5_engine_create(fat5_model *m, const fat5_engine_config *c, fat5_engine **out) {
    fat5_ctx *ctx;
    fat5_engine *e;
    fat5_engine_config cfg;
    size_t total = 0;
    int64_t R, W, i;
    fat5_status st;
    if (!out) return m ? fat5__err(m->ctx, FAT5_ERR_INVALID_ARG, "fat5_engine_create: out is NULL") : FAT5_ERR_INVALID_ARG;
    *out = NULL;
    if (!m) return FAT5_ERR_INVALID_ARG;
    ctx = m->ctx;
    cfg = c ? *c : fat5_engine_config_default();
    if (cfg.max_rows < 1 || cfg.max_rows > 65535 || cfg.max_input_tokens < 1 || cfg.max_input_tokens > (1 << 24) ||
        cfg.max_new_tokens < 1 || cfg.max_new_tokens > (1 << 20) || cfg.max_waiting < 1 ||
        cfg.max_waiting > (1 << 24) || cfg.join_interval < 1 || cfg.max_rows * cfg.max_input_tokens > INT32_MAX / 2)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_engine_create: max_rows %lld (1 .. 65535), max_input_tokens %lld (1 .. 2^24), "
                         "max_new_tokens %lld (1 .. 2^20), max_waiting %lld (1 .. 2^24), join_interval %lld (>= 1); rows x input "
                         "tokens below 2^30",
                         (long long)cfg.max_rows, (long long)cfg.max_input_tokens, (long long)cfg.max_new_tokens,
                         (long long)cfg.max_waiting, (long long)cfg.join_interval);
    e = FAT5__CAST(fat5_engine *, fat5__calloc(ctx, 1, sizeof *e));
    if (!e) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_engine_create: out of memory");
    e->m = m, e->ctx = ctx, e->be = m->be, e->cfg = cfg;
    R = e->R = cfg.max_rows;
    W = cfg.max_waiting;
    e->Lh = 1 + cfg.max_new_tokens;
    e->V = m->cfg.vocab_size;
    e->list_ints = FAT5__ENGINE_LIST_INTS + cfg.max_input_tokens + 2;
    e->use_graph = 1;
    e->next_id = 1;
    e->graphs = FAT5__CAST(fat5__graph *, fat5__calloc(ctx, (size_t)R + 1, sizeof(fat5__graph)));
    e->waiting = FAT5__CAST(fat5__ereq **, fat5__calloc(ctx, (size_t)(W > 0 ? W : 1), sizeof(fat5__ereq *)));
    e->running = FAT5__CAST(fat5__ereq **, fat5__calloc(ctx, (size_t)R, sizeof(fat5__ereq *)));
    e->done_reqs = FAT5__CAST(fat5__ereq **, fat5__calloc(ctx, (size_t)(R + W), sizeof(fat5__ereq *)));
    e->row_used = FAT5__CAST(unsigned char *, fat5__calloc(ctx, (size_t)R, 1));
    e->ent_tok = FAT5__CAST(int32_t *, fat5__calloc(ctx, 3 * (size_t)R, sizeof(int32_t)));
    e->h32 = FAT5__CAST(int32_t *, fat5__calloc(ctx, (size_t)(R * e->Lh + R) + (size_t)e->list_ints, sizeof(int32_t)));
    e->hf = FAT5__CAST(float *, fat5__calloc(ctx, (size_t)R + FAT5__ENGINE_LIST_FLOATS, sizeof(float)));
    e->events = FAT5__CAST(fat5_engine_event *, fat5__calloc(ctx, (size_t)(R + W), sizeof(fat5_engine_event)));
    if (!e->graphs || !e->waiting || !e->running || !e->done_reqs || !e->row_used || !e->ent_tok || !e->h32 ||
        !e->hf || !e->events) {
        fat5_engine_destroy(e);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_engine_create: out of memory");
    }
    e->ent_row = e->ent_tok + R;
    e->last_tok = e->ent_row + R;
    e->flags = e->h32 + R * e->Lh;
    // the decoder: every row a slot of max_input_tokens encoder positions and max_new_tokens cache
    // positions (the start token and each generated token but the last are fed)
    if ((st = fat5_decoder_create(m, R, R * cfg.max_input_tokens, cfg.max_new_tokens, &e->d))) {
        fat5_engine_destroy(e);
        return fat5__err_prefix(ctx, st, "fat5_engine_create: ");
    }
    if (!fat5__engine_layout(e, 0, &total)) {
        fat5_engine_destroy(e);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_engine_create: the buffer size overflows");
    }
    if ((st = e->be->alloc(ctx, total, &e->base))) {
        fat5_engine_destroy(e);
        return fat5__err_prefix(ctx, st, "fat5_engine_create: %.1f MiB of decoding state: ", (double)total / 1048576.0);
    }
    fat5__engine_layout(e, e->base, &total);
    // the shared selection: greedy, no stop token and no length limit (the host finishes rows)
    memset(&e->plain, 0, sizeof e->plain);
    e->plain.P = 1, e->plain.rows_per_input = 1, e->plain.max_new = INT32_MAX;
    e->plain.rep = 1.0f, e->plain.enc_rep = 1.0f, e->plain.forced_bos = -1, e->plain.begin_index = -1;
    e->plain.decay_start = -1, e->plain.decay_factor = 1.0f, e->plain.temperature = 1.0f, e->plain.top_p = 1.0f;
    e->plain.typical_p = 1.0f, e->plain.min_keep = 1, e->plain.K = 1, e->plain.G = 1, e->plain.length_penalty = 1.0f;
    for (i = 0; i < R; i++) e->flags[i] = 0;
    if ((st = e->be->upload(ctx, e->done, e->flags, (size_t)R * 4)) || (st = e->be->sync(ctx))) {
        fat5_engine_destroy(e);
        return st;
    }
    *out = e;
    return FAT5_OK;
}

// ---- requests ----

// Greedy decoding with every logits processor off: the shared selection gives its tokens.
static int fat5__engine_plain(const fat5_generate_config *g, const fat5__gen_opts *o) {
    return !g->do_sample && g->num_beams == 1 && o->n_forced_eos == 0 && o->n_suppress == 0 &&
           o->n_begin_suppress == 0 && o->n_seq == 0 && o->min_new == 0 && o->min_len <= 1 && o->ngram == 0 &&
           o->enc_ngram == 0 && o->rep == 1.0f && o->enc_rep == 1.0f && o->forced_bos < 0 && o->decay_start < 0 &&
           !o->remove_invalid && !o->renormalize;
}

// The options fat5_engine runs in a shared batch; the others are FAT5_ERR_UNSUPPORTED naming them.
static fat5_status fat5__engine_check_options(fat5_ctx *ctx, const fat5_generate_config *g) {
    const char *bad = g->num_return_sequences != 1 ? "num_return_sequences > 1"
                      : g->num_beam_groups > 1     ? "num_beam_groups > 1 (group beam search)"
                      : g->force_words_ids.n       ? "force_words_ids (constrained beam search)"
                      : g->decoder_input_ids.n     ? "decoder_input_ids"
                      : g->output_scores           ? "output_scores"
                      : g->output_logits           ? "output_logits"
                      : g->stream                  ? "stream (the engine's events stream every request)"
                      : g->n_stop_strings          ? "stop_strings (match the text, then fat5_engine_cancel)"
                      : g->max_time > 0            ? "max_time (cancel the request at its deadline)"
                      : g->num_beams > 1 && g->do_sample ? "beam sampling"
                                                         : NULL;
    if (bad)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED, "fat5_engine_submit: %s is not run in a shared batch (fat5_generate "
                         "runs it)", bad);
    return FAT5_OK;
}

FAT5_API fat5_status fat5_engine_submit(fat5_engine *e, const int32_t *tokens, int64_t n, const fat5_generate_config *g,
                                        uint64_t *id) {
    fat5_ctx *ctx;
    fat5__ereq *q;
    fat5__gen s;   // fat5__gen_fill's view of the request: one input, its rows
    int32_t cu[2];
    int64_t P, max_new, n_list;
    fat5_status st;
    if (!e) return FAT5_ERR_INVALID_ARG;
    ctx = e->ctx;
    if (id) *id = 0;
    if (!g || !id) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_engine_submit: %s is NULL", g ? "id" : "config");
    if (n < 1 || n > e->cfg.max_input_tokens || !tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_engine_submit: the input has %lld tokens; expected 1 .. %lld (max_input_tokens)",
                         (long long)n, (long long)e->cfg.max_input_tokens);
    if ((st = fat5__engine_check_options(ctx, g))) return st;
    cu[0] = 0, cu[1] = (int32_t)n;
    if ((st = fat5__gen_check_request(e->m, tokens, cu, 1, g))) return fat5__err_prefix(ctx, st, "fat5_engine_submit: ");
    fat5__gen_lengths(g, &P, &max_new);
    if (max_new > e->cfg.max_new_tokens)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG,
                         "fat5_engine_submit: %lld new tokens asked (max_new_tokens or max_length); the engine's "
                         "max_new_tokens is %lld", (long long)max_new, (long long)e->cfg.max_new_tokens);
    if (g->num_beams > e->R)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_engine_submit: num_beams = %lld exceeds the engine's %lld rows",
                         (long long)g->num_beams, (long long)e->R);
    if (e->n_waiting >= e->cfg.max_waiting)
        return fat5__err(ctx, FAT5_ERR_BUSY, "fat5_engine_submit: %lld requests are waiting (max_waiting): try later",
                         (long long)e->n_waiting);
    memset(&s, 0, sizeof s);
    s.beam = g->num_beams > 1;
    s.G = 1;
    s.K = (int)g->num_beams;
    s.N = 1;
    s.P = P;
    s.max_new = max_new;
    fat5__gen_fill(&s, g, tokens, cu, NULL, NULL);
    n_list = s.o.n_eos + s.o.n_forced_eos + s.o.n_suppress + s.o.n_begin_suppress + s.n_seq_tok + s.o.n_seq + 1 +
             s.n_enc_tok + 2;
    if (n_list > e->list_ints || s.o.n_seq > FAT5__ENGINE_LIST_FLOATS)
        return fat5__err(ctx, FAT5_ERR_UNSUPPORTED,
                         "fat5_engine_submit: the option lists hold %lld ids and %d sequences; a request's lists hold "
                         "at most %d ids and %d sequences besides its input", (long long)(n_list - s.n_enc_tok - 2),
                         s.o.n_seq, FAT5__ENGINE_LIST_INTS, FAT5__ENGINE_LIST_FLOATS);
    q = FAT5__CAST(fat5__ereq *, fat5__calloc(ctx, 1, sizeof *q));
    if (q) {
        q->input = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n * sizeof(int32_t)));
        q->list = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)n_list * sizeof(int32_t)));
        q->bias = FAT5__CAST(float *, fat5__malloc(ctx, (size_t)(s.o.n_seq + 1) * sizeof(float)));
        q->out = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)max_new * sizeof(int32_t)));
    }
    if (!q || !q->input || !q->list || !q->bias || !q->out) {
        fat5__ereq_free(ctx, q);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_engine_submit: out of memory");
    }
    memcpy(q->input, tokens, (size_t)n * sizeof(int32_t));
    q->n_input = n;
    fat5__gen_fill(&s, g, tokens, cu, q->list, q->bias);
    q->o = s.o;
    q->n_list = n_list;
    q->beam = s.beam;
    q->K = s.beam ? g->num_beams : 1;
    q->max_new = max_new;
    q->start_tok = (int32_t)g->decoder_start_token_id;
    q->plain = fat5__engine_plain(g, &q->o);
    q->id = e->next_id++;
    e->waiting[(e->wait_head + e->n_waiting) % e->cfg.max_waiting] = q;
    e->n_waiting++;
    *id = q->id;
    return FAT5_OK;
}

FAT5_API fat5_status fat5_engine_cancel(fat5_engine *e, uint64_t id) {
    int64_t i;
    if (!e) return FAT5_ERR_INVALID_ARG;
    for (i = 0; i < e->n_running; i++)   // (cancelling one already cancelled is no error: it is still there)
        if (e->running[i]->id == id) return e->running[i]->cancel = 1, FAT5_OK;
    for (i = 0; i < e->n_waiting; i++) {
        fat5__ereq *q = e->waiting[(e->wait_head + i) % e->cfg.max_waiting];
        if (q->id == id) return q->cancel = 1, FAT5_OK;
    }
    return fat5__err(e->ctx, FAT5_ERR_INVALID_ARG, "fat5_engine_cancel: request %llu is not waiting or running",
                     (unsigned long long)id);
}

FAT5_API void fat5_engine_stats_get(const fat5_engine *e, fat5_engine_stats *out) {
    int64_t i, used = 0;
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!e) return;
    for (i = 0; i < e->R; i++) used += e->row_used[i];
    out->running = e->n_running;
    out->waiting = e->n_waiting;
    out->rows_used = used;
    out->max_rows = e->R;
    out->steps = e->steps;
    out->tokens = e->tokens;
}

// ---- a step ----

// Frees request q's rows (the engine's and the decoder's: a later join may take them)
static void fat5__engine_free_rows(fat5_engine *e, fat5__ereq *q) {
    int64_t k;
    for (k = 0; k < q->K; k++) {
        e->row_used[q->row0 + k] = 0;
        if (e->d->live[q->row0 + k]) e->d->live[q->row0 + k] = 0, e->d->n_live--;
    }
}

// The first run of k free rows, or -1
static int64_t fat5__engine_find_rows(const fat5_engine *e, int64_t k) {
    int64_t r, run = 0;
    for (r = 0; r < e->R; r++) {
        run = e->row_used[r] ? 0 : run + 1;
        if (run == k) return r - k + 1;
    }
    return -1;
}

// An event for request q; finish != NONE moves it to the finished list (freed at the next step).
static void fat5__engine_event(fat5_engine *e, int64_t *n_ev, fat5__ereq *q, int32_t token, fat5_finish finish) {
    fat5_engine_event *ev = &e->events[(*n_ev)++];
    ev->id = q->id;
    ev->token = token;
    ev->finish = finish;
    ev->tokens = q->out;
    ev->n_tokens = q->n_out;
    ev->score = q->score;
}

// Uploads a joining request's state: its rows' histories (the start token), lengths, scores, done
// flags; beam search's running scores (beams after the first 1e9 down), finished slots, unsat; its
// option lists into its first row's area, their addresses into its options.
static fat5_status fat5__engine_init_rows(fat5_engine *e, fat5__ereq *q) {
    fat5_ctx *ctx = e->ctx;
    const fat5__backend *be = e->be;
    int64_t K = q->K, Lh = e->Lh, r, t, a, off;
    fat5__addr at = (fat5__addr)((size_t)q->row0 * 4), list = e->lists + (fat5__addr)((size_t)q->row0 * (size_t)e->list_ints * 4);
    fat5_status st;
    q->o.row0 = (int)q->row0;
    // lengths, done flags and scores 0 (queued fills: no round trip); skip nonzero (1.0f's bits)
    // unless the shared selection serves it
    FAT5__TRY(be->memset0(ctx, e->lens + at, (size_t)K * 4));
    FAT5__TRY(be->memset0(ctx, e->done + at, (size_t)K * 4));
    FAT5__TRY(be->memset0(ctx, e->score + at, (size_t)K * 4));
    FAT5__TRY(q->plain ? be->memset0(ctx, e->skip + at, (size_t)K * 4) : be->fill_f32(ctx, e->skip + at, 1.0f, K));
    if (q->plain) return FAT5_OK;   // its options are the shared ones; the history is never read
    for (r = 0; r < K; r++)
        for (t = 0; t < Lh; t++) e->h32[r * Lh + t] = t == 0 ? q->start_tok : (int32_t)q->o.pad;
    FAT5__TRY(be->upload(ctx, e->hist + (fat5__addr)((size_t)q->row0 * (size_t)Lh * 4), e->h32, (size_t)(K * Lh) * 4));
    for (r = 0; r < K; r++) e->flags[r] = 0;
    if (q->beam) {
        FAT5__TRY(be->upload(ctx, e->fin_len + at, e->flags, (size_t)K * 4));
        FAT5__TRY(be->upload(ctx, e->fin_flag + at, e->flags, (size_t)K * 4));
        for (r = 0; r < K; r++) e->hf[r] = r ? -1.0e9f : 0.0f;
        FAT5__TRY(be->upload(ctx, e->bscore + at, e->hf, (size_t)K * 4));
        for (r = 0; r < K; r++) e->hf[r] = -1.0e9f;
        FAT5__TRY(be->upload(ctx, e->fin_score + at, e->hf, (size_t)K * 4));
        for (r = 0; r < K; r++) e->flags[r] = (int32_t)(q->row0 + r);
        FAT5__TRY(be->upload(ctx, e->src + at, e->flags, (size_t)K * 4));
        e->flags[0] = 1;
        FAT5__TRY(be->upload(ctx, e->unsat + at, e->flags, 4));
    }
    {   // the lists, area by area (fat5__gen_layout's order), then their addresses
        fat5__addr *dst[] = {&q->o.eos, &q->o.forced_eos, &q->o.suppress, &q->o.begin_suppress, &q->o.seq_ids,
                             &q->o.seq_cu, &q->o.enc_tok, &q->o.enc_cu};
        const int64_t cnt[] = {q->o.n_eos, q->o.n_forced_eos, q->o.n_suppress, q->o.n_begin_suppress,
                               q->n_list - q->o.n_eos - q->o.n_forced_eos - q->o.n_suppress - q->o.n_begin_suppress -
                                   q->o.n_seq - 1 - q->n_input - 2,
                               q->o.n_seq + 1, q->n_input, 2};
        FAT5__TRY(be->upload(ctx, list, q->list, (size_t)q->n_list * 4));
        for (a = 0, off = 0; a < 8; off += cnt[a], a++) *dst[a] = cnt[a] ? list + (fat5__addr)(off * 4) : 0;
        q->o.seq_bias = e->biases + (fat5__addr)((size_t)q->row0 * FAT5__ENGINE_LIST_FLOATS * 4);
        if (q->o.n_seq) FAT5__TRY(be->upload(ctx, q->o.seq_bias, q->bias, (size_t)q->o.n_seq * 4));
    }
    return FAT5_OK;
}

// Admits the waiting requests that fit, oldest first (cancelled ones finish here), their encoders
// run together in one join.
static fat5_status fat5__engine_admit(fat5_engine *e, int64_t *n_ev) {
    fat5_ctx *ctx = e->ctx;
    int64_t n_in = 0, n_rows = 0, n_tok = 0, i, k;
    int32_t *tok = NULL, *cu = NULL, *rows = NULL;
    fat5__ereq *joined[64];
    fat5_status st = FAT5_OK;
    int join = e->n_running == 0 || e->steps - e->last_join >= e->cfg.join_interval;
    while (e->n_waiting > 0 && n_in < 64) {
        fat5__ereq *q = e->waiting[e->wait_head];
        int64_t r0;
        if (q->cancel) {   // cancelled while waiting: finishes without a token
            fat5__engine_event(e, n_ev, q, -1, FAT5_FINISH_CANCELLED);
            e->done_reqs[e->n_done++] = q;
        } else {
            if (!join || (r0 = fat5__engine_find_rows(e, q->K)) < 0) break;   // oldest first: it waits for rows
            q->row0 = r0;
            for (k = 0; k < q->K; k++) e->row_used[r0 + k] = 1;
            joined[n_in++] = q;
            n_rows += q->K;
            n_tok += q->n_input;
        }
        e->wait_head = (e->wait_head + 1) % e->cfg.max_waiting;
        e->n_waiting--;
    }
    for (i = 0, k = 0; i < e->n_waiting; i++) {   // cancelled ones behind a head that waits finish too
        fat5__ereq *q = e->waiting[(e->wait_head + i) % e->cfg.max_waiting];
        if (q->cancel) {
            fat5__engine_event(e, n_ev, q, -1, FAT5_FINISH_CANCELLED);
            e->done_reqs[e->n_done++] = q;
        } else {
            e->waiting[(e->wait_head + k++) % e->cfg.max_waiting] = q;   // the others keep their order
        }
    }
    e->n_waiting = k;
    if (n_in == 0) return FAT5_OK;
    e->last_join = e->steps;
    tok = FAT5__CAST(int32_t *, fat5__malloc(ctx, (size_t)(n_tok + n_in + 1 + n_rows) * sizeof(int32_t)));
    if (!tok) {
        st = fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "fat5_engine_step: out of memory");
        goto fail;
    }
    cu = tok + n_tok, rows = cu + n_in + 1;
    cu[0] = 0;
    for (i = 0, n_rows = 0; i < n_in; i++) {
        fat5__ereq *q = joined[i];
        memcpy(tok + cu[i], q->input, (size_t)q->n_input * sizeof(int32_t));
        cu[i + 1] = cu[i] + (int32_t)q->n_input;
        for (k = 0; k < q->K; k++) rows[n_rows++] = (int32_t)(q->row0 + k);
    }
    // one join a rows-per-input: greedy and sampling requests together, beam requests each alone
    {
        int64_t a = 0, ra = 0;
        while (a < n_in && !st) {
            int64_t b = a, rb = ra;
            while (b < n_in && joined[b]->K == joined[a]->K && (joined[a]->K == 1 || b == a)) rb += joined[b]->K, b++;
            {
                int32_t *sub_cu = cu + a, base = cu[a], j;
                for (j = 0; j <= (int32_t)(b - a); j++) sub_cu[j] -= base;
                st = fat5_decoder_join(e->d, tok + base, sub_cu, b - a, joined[a]->K, rows + ra);
                for (j = 0; j <= (int32_t)(b - a); j++) sub_cu[j] += base;
            }
            a = b, ra = rb;
        }
    }
    for (i = 0; i < n_in && !st; i++) st = fat5__engine_init_rows(e, joined[i]);
    fat5__free(ctx, tok);
    if (st) goto fail;
    for (i = 0; i < n_in; i++) {   // into the running list, sorted by first row
        fat5__ereq *q = joined[i];
        int64_t j = e->n_running;
        while (j > 0 && e->running[j - 1]->row0 > q->row0) e->running[j] = e->running[j - 1], j--;
        e->running[j] = q;
        e->n_running++;
    }
    e->dirty = 1;
    return FAT5_OK;
fail:   // the joined requests fail with the step: they are dropped, their rows freed
    for (i = 0; i < n_in; i++) {
        fat5__engine_free_rows(e, joined[i]);
        fat5__ereq_free(ctx, joined[i]);
    }
    return st;
}

// The entries of the next step: every running request's rows in row order, each fed its last
// token (the start token first; beam search: the tokens gen_beam left, read back after the step).
static void fat5__engine_entries(fat5_engine *e) {
    int64_t i, k, n = 0;
    for (i = 0; i < e->n_running; i++) {
        fat5__ereq *q = e->running[i];
        q->e0 = n;
        for (k = 0; k < q->K; k++, n++) {
            int32_t r = (int32_t)(q->row0 + k);
            e->ent_row[n] = r;
            e->ent_tok[n] = q->steps == 0 ? q->start_tok : e->last_tok[r];
        }
    }
    e->n_ent = n;
}

// The decoder step for the entries on the backend, from a recording when the backend records
static fat5_status fat5__engine_decode(fat5_engine *e, int64_t n) {
    fat5_status st;
    if (e->use_graph) {
        st = fat5__graph_step(e->be, e->ctx, &e->graphs[n], n, fat5__decoder_step_rec, e->d, &e->d->pos);
        if (st != FAT5_ERR_UNSUPPORTED) return st;
        e->use_graph = 0;   // no capture here: plain launches from now on
    }
    return fat5__decoder_step_dev(e->d, n);
}

// Each request's selection on its slice of the step (entries e0 .. e0 + K - 1)
static fat5_status fat5__engine_select(fat5_engine *e, int64_t n) {
    fat5_ctx *ctx = e->ctx;
    const fat5__backend *be = e->be;
    fat5_decoder *d = e->d;
    int V = (int)e->V, Lh = (int)e->Lh;
    int64_t i, l, any_plain = 0;
    fat5_status st;
    for (i = 0; i < e->n_running; i++) any_plain |= e->running[i]->plain;
    if (any_plain)
        FAT5__TRY(be->gen_select(ctx, d->logits, d->tok, e->hist, e->lens, e->skip, e->score, d->rows, n, V, Lh,
                                 &e->plain));   // the other rows get pad here, their token below
    for (i = 0; i < e->n_running; i++) {
        fat5__ereq *q = e->running[i];
        fat5__addr x = d->logits + (fat5__addr)((size_t)q->e0 * (size_t)V * 4);
        fat5__addr tok = d->tok + (fat5__addr)((size_t)q->e0 * 4), rows = d->rows + (fat5__addr)((size_t)q->e0 * 4);
        fat5__addr at = (fat5__addr)((size_t)q->row0 * 4);
        if (q->plain) continue;
        FAT5__TRY(be->gen_process(ctx, x, e->hist, e->lens, rows, q->K, V, Lh, &q->o));
        if (!q->beam) {
            FAT5__TRY(be->gen_select(ctx, x, tok, e->hist, e->lens, e->done, e->score, rows, q->K, V, Lh, &q->o));
            continue;
        }
        FAT5__TRY(be->gen_beam(ctx, x, tok, e->src, e->hist, e->lens, e->bscore, e->fin_score, e->fin_tok, e->fin_len,
                               e->fin_flag, e->unsat + at, e->done + at, rows, e->scratch, q->K, V, Lh, &q->o));
        for (l = 0; l < e->m->cfg.num_decoder_layers; l++)
            FAT5__TRY(fat5__decoder_gather(d, l, e->src, q->row0, q->K));
    }
    return FAT5_OK;
}

// A beam search request that finished: its best hypothesis (finished slot 0) into q->out
static fat5_status fat5__engine_beam_result(fat5_engine *e, fat5__ereq *q) {
    fat5_ctx *ctx = e->ctx;
    int64_t F = e->Lh - 1, len;
    int32_t n = 0;
    fat5_status st;
    FAT5__TRY(e->be->download(ctx, &n, e->fin_len + (fat5__addr)((size_t)q->row0 * 4), 4));
    FAT5__TRY(e->be->download(ctx, &q->score, e->fin_score + (fat5__addr)((size_t)q->row0 * 4), 4));
    FAT5__TRY(e->be->sync(ctx));
    len = n < 0 ? 0 : n > q->max_new ? q->max_new : n;
    if (len) FAT5__TRY(e->be->download(ctx, q->out, e->fin_tok + (fat5__addr)((size_t)q->row0 * (size_t)F * 4), (size_t)len * 4));
    q->n_out = len;
    return e->be->sync(ctx);
}

static int fat5__engine_is_eos(const fat5__ereq *q, int32_t t) { return fat5__gen_in(q->list, q->o.n_eos, t); }

// How a greedy or sampling request ends when token t makes its output n_out tokens long
static fat5_finish fat5__engine_finish(const fat5__ereq *q, int32_t t, int64_t n_out) {
    return fat5__engine_is_eos(q, t) ? FAT5_FINISH_EOS : n_out >= q->max_new ? FAT5_FINISH_LENGTH : FAT5_FINISH_NONE;
}

FAT5_API fat5_status fat5_engine_step(fat5_engine *e, const fat5_engine_event **events, int64_t *n_events) {
    fat5_ctx *ctx;
    const fat5__backend *be;
    fat5_decoder *d;
    int64_t n_ev = 0, i, n, any_beam = 0, kept = 0;
    fat5_status st;
    if (!e) return FAT5_ERR_INVALID_ARG;
    ctx = e->ctx, be = e->be, d = e->d;
    if (!events || !n_events) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_engine_step: events is NULL");
    *events = e->events, *n_events = 0;
    for (i = 0; i < e->n_done; i++) fat5__ereq_free(ctx, e->done_reqs[i]);   // the last step's finished ones
    e->n_done = 0;
    // cancelled running requests leave before the step
    for (i = 0; i < e->n_running; i++) {
        fat5__ereq *q = e->running[i];
        if (!q->cancel) {
            e->running[kept++] = q;
            continue;
        }
        fat5__engine_free_rows(e, q);
        fat5__engine_event(e, &n_ev, q, -1, FAT5_FINISH_CANCELLED);
        e->done_reqs[e->n_done++] = q;
        e->dirty = 1;
    }
    e->n_running = kept;
    FAT5__TRY(fat5__engine_admit(e, &n_ev));
    *n_events = n_ev;
    if (e->n_running == 0) return FAT5_OK;
    // the entries: uploaded when the batch changed (else the last step's tokens are in d->tok)
    if (e->dirty) {
        fat5__engine_entries(e);
        FAT5__TRY(fat5__decoder_upload_entries(d, e->ent_tok, e->ent_row, e->n_ent));
        e->dirty = 0;
    }
    n = e->n_ent;
    for (i = 0; i < n; i++) d->pos_h[e->ent_row[i]]++;   // (the backend's positions advance in the step)
    FAT5__TRY(fat5__engine_decode(e, n));
    FAT5__TRY(fat5__engine_select(e, n));
    // the chosen tokens (the next step's inputs) and, with beam search, the done flags
    FAT5__TRY(be->download(ctx, e->ent_tok, d->tok, (size_t)n * 4));
    for (i = 0; i < e->n_running; i++) any_beam |= e->running[i]->beam;
    if (any_beam) FAT5__TRY(be->download(ctx, e->flags, e->done, (size_t)e->R * 4));
    e->steps++;   // (a download returns when the step's work is done)
    for (i = 0; i < n; i++) e->last_tok[e->ent_row[i]] = e->ent_tok[i];
    for (i = 0; i < e->n_running; i++) {   // the scores of the rows that finish here, in one copy
        fat5__ereq *q = e->running[i];
        if (!q->beam && fat5__engine_finish(q, e->ent_tok[q->e0], q->n_out + 1) != FAT5_FINISH_NONE) {
            FAT5__TRY(be->download(ctx, e->hf, e->score, (size_t)e->R * 4));
            break;
        }
    }
    kept = 0;
    for (i = 0; i < e->n_running; i++) {
        fat5__ereq *q = e->running[i];
        fat5_finish fin = FAT5_FINISH_NONE;
        int32_t t = -1;
        q->steps++;
        if (q->beam) {   // its output comes when it finishes: the best finished hypothesis
            if (e->flags[q->row0] || q->steps >= q->max_new) {
                FAT5__TRY(fat5__engine_beam_result(e, q));
                e->tokens += q->n_out;
                fin = q->n_out > 0 && fat5__engine_is_eos(q, q->out[q->n_out - 1]) ? FAT5_FINISH_EOS
                                                                                  : FAT5_FINISH_LENGTH;
            }
        } else {
            t = e->ent_tok[q->e0];
            q->out[q->n_out++] = t;
            e->tokens++;
            if ((fin = fat5__engine_finish(q, t, q->n_out)) != FAT5_FINISH_NONE) q->score = e->hf[q->row0];
        }
        if (fin != FAT5_FINISH_NONE || !q->beam) fat5__engine_event(e, &n_ev, q, t, fin);
        if (fin == FAT5_FINISH_NONE) {
            e->running[kept++] = q;
            continue;
        }
        fat5__engine_free_rows(e, q);
        e->done_reqs[e->n_done++] = q;
        e->dirty = 1;
    }
    e->n_running = kept;
    *n_events = n_ev;
    return FAT5_OK;
}
#undef FAT5__TRY
