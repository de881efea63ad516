// test_engine.c — continuous batching (fat5_engine): requests that join and leave a running batch
// at different steps get exactly what fat5_generate gives each of them alone (greedy, sampling with
// a seed, logits processors, beam search; the oracle is fat5_generate, itself checked against
// Hugging Face), through a pool of rows smaller than the requests (a queue, rows reused), with
// cancellation, a full queue and refused options. Uses test_generate.c's tgen_ helpers.

// One request of a schedule: its input, options, and the step before which it is submitted
typedef struct te_req {
    int32_t tok[24];
    int64_t n;
    fat5_generate_config g;
    int64_t at;
    // what the engine gave: its events' tokens, the final output, how it finished
    uint64_t id;
    int32_t streamed[64];
    int64_t n_streamed, n_events;
    int32_t out[64];
    int64_t n_out;
    fat5_finish finish;
    float score;
} te_req;

// The schedule's kinds of request, by index: plain greedy, greedy with processors, sampling, beam
// search, a short greedy one (max_new 3)
static void te_make(fat5_model *m, te_req *q, int i, int64_t V) {
    fat5_rng r = fat5_rng_init(100 + (uint64_t)i);
    int k = i % 6;
    int64_t j;
    memset(q, 0, sizeof *q);
    q->n = 3 + (int64_t)fat5_rng_below(&r, 12);
    for (j = 0; j < q->n; j++) q->tok[j] = 2 + (int32_t)fat5_rng_below(&r, (uint64_t)(V - 2));
    q->tok[q->n - 1] = 1;   // EOS ends every input
    q->g = fat5_generate_config_from_model(m);
    q->g.max_length = 0;
    q->g.max_new_tokens = 6 + i % 7;
    q->g.use_graph = 1;
    if (k == 1) q->g.repetition_penalty = 1.5, q->g.no_repeat_ngram_size = 2, q->g.min_new_tokens = 3;
    if (k == 2) q->g.do_sample = 1, q->g.seed = 11 + (uint64_t)i, q->g.top_k = 20, q->g.temperature = 0.8;
    if (k == 3) q->g.num_beams = 3, q->g.length_penalty = 0.7;
    if (k == 4) q->g.max_new_tokens = 3;
    if (k == 5) q->g.encoder_repetition_penalty = 1.3, q->g.do_sample = 1, q->g.seed = 5, q->g.top_p = 0.9;
    q->at = (i * 7) % 11;
}

// Runs n requests through an engine of `rows` rows (each submitted before step q->at; all waiting
// in the queue while rows are busy), collecting their events. Returns 0 on a failure (reported).
static int te_run(fat5_test *T, fat5_model *m, te_req *q, int n, int64_t rows) {
    fat5_ctx *ctx = m->ctx;
    fat5_engine_config c = fat5_engine_config_default();
    fat5_engine *e = NULL;
    int64_t step, left = n, i, j;
    int ok = 1;
    c.max_rows = rows, c.max_input_tokens = 24, c.max_new_tokens = 16, c.max_waiting = 64;
    if (fat5_engine_create(m, &c, &e) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "fat5_engine_create: %s", fat5_last_error(ctx));
        return 0;
    }
    for (step = 0; left > 0 && step < 1000 && ok; step++) {
        const fat5_engine_event *ev;
        int64_t n_ev;
        for (i = 0; i < n; i++)
            if (q[i].at == step && fat5_engine_submit(e, q[i].tok, q[i].n, &q[i].g, &q[i].id) != FAT5_OK) {
                FAT5_CHECK_MSG(T, 0, "submit %lld: %s", (long long)i, fat5_last_error(ctx));
                ok = 0;
            }
        if (!ok || fat5_engine_step(e, &ev, &n_ev) != FAT5_OK) {
            FAT5_CHECK_MSG(T, !ok, "step %lld: %s", (long long)step, fat5_last_error(ctx));
            ok = 0;
            break;
        }
        for (j = 0; j < n_ev; j++) {
            te_req *r = NULL;
            for (i = 0; i < n; i++)
                if (q[i].id == ev[j].id) r = &q[i];
            if (!r) {
                FAT5_CHECK_MSG(T, 0, "an event for request %llu, not submitted", (unsigned long long)ev[j].id);
                ok = 0;
                break;
            }
            r->n_events++;
            if (ev[j].token >= 0 && r->n_streamed < 64) r->streamed[r->n_streamed++] = ev[j].token;
            if (ev[j].finish != FAT5_FINISH_NONE) {
                r->finish = ev[j].finish;
                r->n_out = ev[j].n_tokens < 64 ? ev[j].n_tokens : 64;
                memcpy(r->out, ev[j].tokens, (size_t)r->n_out * sizeof(int32_t));
                r->score = ev[j].score;
                left--;
            }
        }
    }
    {
        fat5_engine_stats s;
        fat5_engine_stats_get(e, &s);
        FAT5_CHECK_MSG(T, !ok || (left == 0 && s.running == 0 && s.waiting == 0 && s.rows_used == 0),
                       "%lld requests left, %lld running, %lld waiting, %lld rows used", (long long)left,
                       (long long)s.running, (long long)s.waiting, (long long)s.rows_used);
    }
    fat5_engine_destroy(e);
    return ok;
}

// Each request's engine output against fat5_generate alone: tokens identical, the score within
// score_tol (0 on the CPU: the same sums in the same order), the stream (greedy, sampling) the
// output token by token, the finish reason the last token's.
static void te_check(fat5_test *T, fat5_model *m, te_req *q, int n, double score_tol, const char *what) {
    int i;
    for (i = 0; i < n; i++) {
        fat5_generate_result a;
        int32_t cu[2] = {0, (int32_t)q[i].n};
        int64_t len;
        int eos;
        if (fat5_generate(m, q[i].tok, cu, 1, &q[i].g, &a) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s: fat5_generate: %s", what, fat5_last_error(m->ctx));
            continue;
        }
        len = a.cu_seqlens[1];
        FAT5_CHECK_MSG(T, q[i].n_out == len && !memcmp(q[i].out, a.tokens, (size_t)len * 4),
                       "%s: request %d (beams %lld, sample %d): %lld tokens from the engine, %lld alone (first %d vs %d)",
                       what, i, (long long)q[i].g.num_beams, q[i].g.do_sample, (long long)q[i].n_out, (long long)len,
                       q[i].n_out ? q[i].out[0] : -1, len ? a.tokens[0] : -1);
        FAT5_CHECK_MSG(T, fabs((double)q[i].score - (double)a.scores[0]) <= score_tol,
                       "%s: request %d: score %.9g, alone %.9g", what, i, (double)q[i].score, (double)a.scores[0]);
        if (q[i].g.num_beams == 1)
            FAT5_CHECK_MSG(T, q[i].n_streamed == q[i].n_out && q[i].n_events == q[i].n_out &&
                                  !memcmp(q[i].streamed, q[i].out, (size_t)q[i].n_out * 4),
                           "%s: request %d: %lld streamed tokens in %lld events for %lld", what, i,
                           (long long)q[i].n_streamed, (long long)q[i].n_events, (long long)q[i].n_out);
        else
            FAT5_CHECK_MSG(T, q[i].n_events == 1 && q[i].n_streamed == 0, "%s: beam request %d: %lld events", what, i,
                           (long long)q[i].n_events);
        eos = len > 0 && a.tokens[len - 1] == (int32_t)q[i].g.eos_token_id;
        FAT5_CHECK_MSG(T, q[i].finish == (eos ? FAT5_FINISH_EOS : FAT5_FINISH_LENGTH), "%s: request %d: finish %d", what,
                       i, (int)q[i].finish);
        fat5_generate_result_destroy(m->ctx, &a);
    }
}

// 18 requests of every kind through 8 rows (a queue, rows reused, beam requests needing 3
// contiguous rows), submitted at different steps: each gets what it gets alone. Three fixtures:
// T5 v1.0 and v1.1, and RoPE (positions per row reach the rotation).
static void t_engine_same_as_alone(fat5_test *T) {
    static const char *const fx[] = {"t5_v10_relu_tied", "t5_v11_gated_gelu_untied", "posenc_rope_neox"};
    fat5_ctx *ctx = fat5_test_ctx(T);
    size_t k;
    for (k = 0; k < sizeof fx / sizeof fx[0]; k++) {
        char dir[512];
        fat5_model *m = NULL;
        te_req q[18];
        int i;
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, fx[k]);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
        for (i = 0; i < 18; i++) te_make(m, &q[i], i, m->cfg.vocab_size);
        if (te_run(T, m, q, 18, 8)) te_check(T, m, q, 18, 0.0, fx[k]);
        fat5_model_destroy(m);
    }
}

// Cancellation (running and waiting), the queue's limit, refused options and limits, by name
static void t_engine_limits(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_engine *e = NULL;
    fat5_engine_config c = fat5_engine_config_default();
    fat5_generate_config g;
    const fat5_engine_event *ev;
    int64_t n_ev, i, got_cancel = 0, step;
    uint64_t id[4], extra;
    int32_t tok[5] = {5, 6, 7, 8, 1}, big[30];
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, "t5_v11_gated_gelu_untied");
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    g = fat5_generate_config_from_model(m);
    g.max_length = 0, g.max_new_tokens = 10, g.eos_token_id = -1;   // runs to max_new_tokens
    c.max_rows = 2, c.max_input_tokens = 24, c.max_new_tokens = 10, c.max_waiting = 2;
    TM_EXPECT_ERR(T, fat5_engine_create(m, NULL, NULL), FAT5_ERR_INVALID_ARG, "out is NULL");
    c.max_rows = 0;
    TM_EXPECT_ERR(T, fat5_engine_create(m, &c, &e), FAT5_ERR_INVALID_ARG, "max_rows 0");
    c.max_rows = 2;
    FAT5_REQUIRE_OK(T, fat5_engine_create(m, &c, &e));
    for (i = 0; i < 30; i++) big[i] = 3;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, big, 30, &g, &extra), FAT5_ERR_INVALID_ARG, "max_input_tokens");
    g.max_new_tokens = 11;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_INVALID_ARG, "max_new_tokens is 10");
    g.max_new_tokens = 10, g.num_return_sequences = 2, g.do_sample = 1;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_UNSUPPORTED, "num_return_sequences");
    g.num_return_sequences = 1, g.do_sample = 0, g.num_beams = 4, g.num_beam_groups = 2;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_UNSUPPORTED, "num_beam_groups");
    g.num_beam_groups = 1, g.num_beams = 3;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_INVALID_ARG, "num_beams = 3 exceeds");
    g.num_beams = 1, g.max_time = 1.0;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_UNSUPPORTED, "max_time");
    g.max_time = 0, g.temperature = 0;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_INVALID_ARG, "temperature");
    g.temperature = 1.0;
    tok[1] = (int32_t)m->cfg.vocab_size;
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 5, &g, &extra), FAT5_ERR_INVALID_ARG, "token id");
    tok[1] = 6;
    // 2 rows, 2 waiting: the fifth is refused until the queue moves
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 5, &g, &id[0]));
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 4, &g, &id[1]));
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 3, &g, &extra), FAT5_ERR_BUSY, "waiting");
    FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));   // both join
    FAT5_CHECK(T, n_ev == 2 && ev[0].token >= 0 && ev[0].finish == FAT5_FINISH_NONE);
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 3, &g, &id[2]));
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 2, &g, &id[3]));
    TM_EXPECT_ERR(T, fat5_engine_submit(e, tok, 3, &g, &extra), FAT5_ERR_BUSY, "waiting");
    // cancel a running one and a waiting one: both finish at the next step, cancelled; the
    // waiting request behind them takes the freed row
    FAT5_REQUIRE_OK(T, fat5_engine_cancel(e, id[0]));
    FAT5_REQUIRE_OK(T, fat5_engine_cancel(e, id[2]));
    TM_EXPECT_ERR(T, fat5_engine_cancel(e, 9999), FAT5_ERR_INVALID_ARG, "not waiting or running");
    FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));
    for (i = 0; i < n_ev; i++) {
        if (ev[i].id == id[0] || ev[i].id == id[2]) {
            got_cancel++;
            FAT5_CHECK(T, ev[i].finish == FAT5_FINISH_CANCELLED && ev[i].token == -1);
        } else {
            FAT5_CHECK(T, ev[i].finish == FAT5_FINISH_NONE && (ev[i].id == id[1] || ev[i].id == id[3]));
        }
    }
    FAT5_CHECK_MSG(T, got_cancel == 2 && n_ev == 4, "%lld events, %lld cancelled", (long long)n_ev, (long long)got_cancel);
    TM_EXPECT_ERR(T, fat5_engine_cancel(e, id[0]), FAT5_ERR_INVALID_ARG, "not waiting or running");
    // the rest run to max_new_tokens: id[1] 10 tokens in all, id[3] 9 after this
    for (step = 0; step < 20; step++) {
        fat5_engine_stats s;
        FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));
        for (i = 0; i < n_ev; i++)
            if (ev[i].finish != FAT5_FINISH_NONE)
                FAT5_CHECK(T, ev[i].finish == FAT5_FINISH_LENGTH && ev[i].n_tokens == 10);
        fat5_engine_stats_get(e, &s);
        if (s.running == 0 && s.waiting == 0) break;
    }
    FAT5_CHECK_MSG(T, step == 8, "%lld more steps", (long long)step + 1);   // 9 more steps: id[3]'s 9 tokens
    FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));   // nothing left: no events
    FAT5_CHECK(T, n_ev == 0);
    fat5_engine_destroy(e);
    fat5_engine_destroy(NULL);
    fat5_model_destroy(m);
}

// A request cancelled while it waits finishes at the next step even when the queue's head cannot
// join yet (a beam request waiting for contiguous rows, and steps between joins): its event comes
// then, the rows stay with the running request, and the head joins once they are free.
static void t_engine_cancel_behind_head(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_engine *e = NULL;
    fat5_engine_config c = fat5_engine_config_default();
    fat5_generate_config g, gb;
    const fat5_engine_event *ev;
    int64_t n_ev, i, step, cancelled = 0, others = 0, head_tokens = -1;
    uint64_t a, b, x, y;
    int32_t tok[5] = {5, 6, 7, 8, 1};
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, "t5_v11_gated_gelu_untied");
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    g = fat5_generate_config_from_model(m);
    g.max_length = 0, g.max_new_tokens = 8, g.eos_token_id = -1;   // runs to max_new_tokens
    gb = g, gb.num_beams = 2;
    c.max_rows = 2, c.max_input_tokens = 24, c.max_new_tokens = 8, c.max_waiting = 4, c.join_interval = 3;
    FAT5_REQUIRE_OK(T, fat5_engine_create(m, &c, &e));
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 5, &g, &a));
    FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));   // a joins (one row), the other stays free
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 4, &gb, &b));   // 2 rows: waits for a
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 3, &g, &x));
    FAT5_REQUIRE_OK(T, fat5_engine_submit(e, tok, 2, &g, &y));
    FAT5_REQUIRE_OK(T, fat5_engine_cancel(e, x));
    FAT5_CHECK_MSG(T, fat5_engine_cancel(e, x) == FAT5_OK, "a second cancel while it waits: %s", fat5_last_error(ctx));
    FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));
    for (i = 0; i < n_ev; i++) {
        if (ev[i].id == x) {
            cancelled++;
            FAT5_CHECK(T, ev[i].finish == FAT5_FINISH_CANCELLED && ev[i].token == -1);
        } else {
            others++;
            FAT5_CHECK(T, ev[i].id == a && ev[i].finish == FAT5_FINISH_NONE);
        }
    }
    FAT5_CHECK_MSG(T, cancelled == 1 && others == 1, "the cancelled request behind the head: %lld events (%lld others)",
                   (long long)cancelled, (long long)others);
    TM_EXPECT_ERR(T, fat5_engine_cancel(e, x), FAT5_ERR_INVALID_ARG, "not waiting or running");
    {
        fat5_engine_stats s;
        fat5_engine_stats_get(e, &s);
        FAT5_CHECK_MSG(T, s.running == 1 && s.waiting == 2 && s.rows_used == 1, "%lld running, %lld waiting, %lld rows",
                       (long long)s.running, (long long)s.waiting, (long long)s.rows_used);
    }
    // the rest in order: a finishes, b (the head) then y join; every one of them finishes by length
    for (step = 0; step < 40; step++) {
        fat5_engine_stats s;
        FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));
        for (i = 0; i < n_ev; i++) {
            FAT5_CHECK(T, ev[i].id == a || ev[i].id == b || ev[i].id == y);
            if (ev[i].finish != FAT5_FINISH_NONE) FAT5_CHECK(T, ev[i].finish == FAT5_FINISH_LENGTH && ev[i].n_tokens == 8);
            if (ev[i].id == b && ev[i].finish != FAT5_FINISH_NONE) head_tokens = ev[i].n_tokens;
        }
        fat5_engine_stats_get(e, &s);
        if (s.running == 0 && s.waiting == 0) break;
    }
    FAT5_CHECK_MSG(T, head_tokens == 8, "the head: %lld tokens", (long long)head_tokens);
    fat5_engine_destroy(e);
    fat5_model_destroy(m);
}

// Churn: requests of every kind through 5 rows, a third of them cancelled at pseudo-random steps
// (waiting or running, beam requests included): every request gets exactly one finishing event,
// the ones not cancelled exactly fat5_generate's output alone, a cancelled greedy or sampling one
// a prefix of it; at the end no row or request is left.
static void t_engine_churn_cancel(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char dir[512];
    fat5_model *m = NULL;
    fat5_engine *e = NULL;
    fat5_engine_config c = fat5_engine_config_default();
    enum { N = 24 };
    te_req q[N];
    int64_t cancel_at[N], fin_events[N], step, left = N, i, j;
    fat5_rng r = fat5_rng_init(7);
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, "t5_v11_gated_gelu_untied");
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &m));
    for (i = 0; i < N; i++) {
        te_make(m, &q[i], (int)i, m->cfg.vocab_size);
        q[i].at = (int64_t)fat5_rng_below(&r, 12);
        cancel_at[i] = fat5_rng_below(&r, 3) == 0 ? q[i].at + (int64_t)fat5_rng_below(&r, 8) : -1;
        fin_events[i] = 0;
    }
    c.max_rows = 5, c.max_input_tokens = 24, c.max_new_tokens = 16, c.max_waiting = N, c.join_interval = 2;
    FAT5_REQUIRE_OK(T, fat5_engine_create(m, &c, &e));
    for (step = 0; step < 1000 && left > 0; step++) {
        const fat5_engine_event *ev;
        int64_t n_ev;
        for (i = 0; i < N; i++)
            if (q[i].at == step) FAT5_REQUIRE_OK(T, fat5_engine_submit(e, q[i].tok, q[i].n, &q[i].g, &q[i].id));
        for (i = 0; i < N; i++) {   // (a request that has finished already is refused; twice is once)
            if (cancel_at[i] != step) continue;
            if (fat5_engine_cancel(e, q[i].id) != FAT5_OK) cancel_at[i] = -1;
            else FAT5_CHECK_MSG(T, fat5_engine_cancel(e, q[i].id) == FAT5_OK, "cancel twice: %s", fat5_last_error(ctx));
        }
        FAT5_REQUIRE_OK(T, fat5_engine_step(e, &ev, &n_ev));
        for (j = 0; j < n_ev; j++) {
            te_req *x = NULL;
            for (i = 0; i < N; i++)
                if (q[i].id == ev[j].id) x = &q[i];
            FAT5_REQUIRE(T, x != NULL);
            i = x - q;
            if (ev[j].token >= 0 && x->n_streamed < 64) x->streamed[x->n_streamed++] = ev[j].token;
            if (ev[j].finish != FAT5_FINISH_NONE) {
                fin_events[i]++;
                x->finish = ev[j].finish;
                x->n_out = ev[j].n_tokens < 64 ? ev[j].n_tokens : 64;
                if (x->n_out) memcpy(x->out, ev[j].tokens, (size_t)x->n_out * sizeof(int32_t));
                x->score = ev[j].score;
                left--;
            }
        }
    }
    {
        fat5_engine_stats s;
        fat5_engine_stats_get(e, &s);
        FAT5_CHECK_MSG(T, left == 0 && s.running == 0 && s.waiting == 0 && s.rows_used == 0,
                       "%lld requests left, %lld running, %lld waiting, %lld rows used", (long long)left,
                       (long long)s.running, (long long)s.waiting, (long long)s.rows_used);
    }
    for (i = 0; i < N; i++) {
        fat5_generate_result a;
        int32_t cu[2] = {0, (int32_t)q[i].n};
        int64_t len;
        FAT5_CHECK_MSG(T, fin_events[i] == 1, "request %lld: %lld finishing events", (long long)i, (long long)fin_events[i]);
        FAT5_REQUIRE_OK(T, fat5_generate(m, q[i].tok, cu, 1, &q[i].g, &a));
        len = a.cu_seqlens[1];
        if (cancel_at[i] >= 0) {
            FAT5_CHECK_MSG(T, q[i].finish == FAT5_FINISH_CANCELLED, "request %lld: cancelled, finish %d", (long long)i,
                           (int)q[i].finish);
            if (q[i].g.num_beams == 1)
                FAT5_CHECK_MSG(T, q[i].n_out <= len && !memcmp(q[i].out, a.tokens, (size_t)q[i].n_out * 4),
                               "request %lld (cancelled): %lld tokens, not a prefix of the %lld alone", (long long)i,
                               (long long)q[i].n_out, (long long)len);
        } else {
            FAT5_CHECK_MSG(T, q[i].finish != FAT5_FINISH_CANCELLED && q[i].n_out == len &&
                                  !memcmp(q[i].out, a.tokens, (size_t)len * 4) && q[i].score == a.scores[0],
                           "request %lld (beams %lld, sample %d): %lld tokens from the engine, %lld alone", (long long)i,
                           (long long)q[i].g.num_beams, q[i].g.do_sample, (long long)q[i].n_out, (long long)len);
        }
        fat5_generate_result_destroy(m->ctx, &a);
    }
    fat5_engine_destroy(e);
    fat5_model_destroy(m);
}

#ifndef FAT5_NO_CUDA
// The same schedule on the GPU in fp32 (graphs recorded per entry count): tokens identical to
// fat5_generate alone on the GPU, scores within 1e-5 (the selection's sums run on other rows)
static void t_gpu_engine_same_as_alone(fat5_test *T) {
    fat5_ctx *g = tgen_gpu_ctx(T, FAT5_DTYPE_FP32);
    fat5_model *m;
    te_req q[18];
    int i;
    if (!g) return;
    m = tgen_gpu_model(T, g, 1);
    if (m) {
        for (i = 0; i < 18; i++) te_make(m, &q[i], i, m->cfg.vocab_size);
        if (te_run(T, m, q, 18, 8)) te_check(T, m, q, 18, 1e-5, "gpu fp32");
    }
    fat5_model_destroy(m);
    fat5_ctx_destroy(g);
}
#define FAT5_TESTS_ENGINE_GPU(X) X(gpu_engine_same_as_alone)
#else
#define FAT5_TESTS_ENGINE_GPU(X)
#endif

#define FAT5_TESTS_ENGINE(X) \
    X(engine_same_as_alone) X(engine_limits) X(engine_cancel_behind_head) X(engine_churn_cancel) FAT5_TESTS_ENGINE_GPU(X)
