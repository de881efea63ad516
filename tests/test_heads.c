
// The task heads (fat5_model_config.head): Hugging Face's T5ForSequenceClassification,
// T5ForTokenClassification, T5ForQuestionAnswering and T5EncoderModel (and their MT5 / UMT5
// twins) against transformers' fixtures (tests/data/heads_*, ref/make_reference.py --heads):
// outputs, loss and every gradient, on the CPU and the GPU; fat5's encoder-only classifier by
// finite differences; save and load; fat5_model_load_head; the batch errors.

// A head batch and its storage
typedef struct hd_batch {
    fat5_batch b;
    int32_t *tok, *cu, *lab;
    float *tgt;
} hd_batch;

static void hd_batch_free(hd_batch *h) {
    free(h->tok);
    free(h->cu);
    free(h->lab);
    free(h->tgt);
    memset(h, 0, sizeof *h);
}

// a JSON number array element as double (0 when absent)
static double hd_num(const fat5__json *v) {
    double d = 0;
    fat5__json_as_double(v, &d);
    return d;
}

// batch.json of a head fixture: "inputs" and the targets of cfg's head ("labels": an int, floats
// or token ints per row; "start_positions" / "end_positions" for QA). ENCODER: targets = G from
// the reference ("grad_output"), passed by the caller.
static int hd_load_batch(fat5_test *T, const char *dir, const fat5_model_config *c, hd_batch *h) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char path[1024];
    size_t len;
    char *text;
    fat5__jdoc *doc = NULL;
    const fat5__json *in, *lab, *r, *e;
    int64_t n_tok = 0, n_seq = 0, s = 0, t = 0, L = c->num_labels;
    memset(h, 0, sizeof *h);
    snprintf(path, sizeof path, "%s/batch.json", dir);
    text = tm_read(T, path, &len);
    if (!text) return 0;
    if (fat5__json_parse(ctx, "batch.json", text, len, 16, &doc) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: %s", path, fat5_last_error(ctx));
        fat5__free(ctx, text);
        return 0;
    }
    in = fat5__json_get(doc->root, "inputs");
    for (r = in ? in->child : NULL; r; r = r->next, n_seq++) n_tok += (int64_t)r->n;
    h->tok = (int32_t *)malloc((size_t)n_tok * sizeof(int32_t));
    h->cu = (int32_t *)malloc((size_t)(n_seq + 1) * sizeof(int32_t));
    h->lab = (int32_t *)malloc((size_t)(n_tok + 2 * n_seq) * sizeof(int32_t));
    h->tgt = (float *)malloc((size_t)(n_seq * (L > 0 ? L : 1)) * sizeof(float));
    if (!h->tok || !h->cu || !h->lab || !h->tgt || !in) {
        FAT5_CHECK_MSG(T, 0, "%s: out of memory or no inputs", path);
        fat5__json_free(ctx, doc);
        fat5__free(ctx, text);
        return 0;
    }
    h->cu[0] = 0;
    for (r = in->child, s = 0; r; r = r->next, s++) {
        for (e = r->child; e; e = e->next) h->tok[t++] = (int32_t)hd_num(e);
        h->cu[s + 1] = (int32_t)t;
    }
    h->b.n_seq = n_seq;
    h->b.n_enc_tokens = n_tok;
    h->b.enc_tokens = h->tok;
    h->b.enc_cu_seqlens = h->cu;
    lab = fat5__json_get(doc->root, "labels");
    if (c->head == FAT5_HEAD_QA) {
        const fat5__json *sp = fat5__json_get(doc->root, "start_positions"), *ep = fat5__json_get(doc->root, "end_positions");
        const fat5__json *a = sp ? sp->child : NULL, *z = ep ? ep->child : NULL;
        for (s = 0; s < n_seq && a && z; s++, a = a->next, z = z->next) {
            h->lab[2 * s] = (int32_t)hd_num(a);
            h->lab[2 * s + 1] = (int32_t)hd_num(z);
        }
        h->b.head_labels = h->lab;
    } else if (c->head == FAT5_HEAD_TOKEN_CLS) {
        for (r = lab ? lab->child : NULL, t = 0; r; r = r->next)
            for (e = r->child; e; e = e->next) h->lab[t++] = (int32_t)hd_num(e);
        h->b.head_labels = h->lab;
    } else if (c->head != FAT5_HEAD_ENCODER) {
        fat5_problem pr = c->problem_type == FAT5_PROBLEM_AUTO
                              ? (L == 1 ? FAT5_PROBLEM_REGRESSION : FAT5_PROBLEM_SINGLE_LABEL) : c->problem_type;
        for (r = lab ? lab->child : NULL, s = 0; r; r = r->next, s++) {
            if (pr == FAT5_PROBLEM_SINGLE_LABEL) h->lab[s] = (int32_t)hd_num(r);
            else if (r->type == FAT5__J_ARRAY)
                for (e = r->child, t = 0; e; e = e->next, t++) h->tgt[s * L + t] = (float)hd_num(e);
            else h->tgt[s] = (float)hd_num(r);
        }
        if (pr == FAT5_PROBLEM_SINGLE_LABEL) h->b.head_labels = h->lab;
        else h->b.head_targets = h->tgt;
    }
    fat5__json_free(ctx, doc);
    fat5__free(ctx, text);
    return 1;
}

static const char *const hd_fixtures[] = {"heads_t5_seqcls", "heads_mt5_seqcls_multi", "heads_umt5_seqcls_reg",
                                          "heads_t5_tokcls", "heads_umt5_tokcls", "heads_t5_qa", "heads_mt5_qa",
                                          "heads_t5_encoder", "heads_umt5_encoder", "heads_mt5_tokcls",
                                          "heads_mt5_encoder", "heads_umt5_qa"};
#define HD_N_FIXTURES ((int)(sizeof hd_fixtures / sizeof hd_fixtures[0]))

// Fixture `name` on context ctx: outputs, loss and every gradient against transformers' (fp32:
// the LM fixtures' tolerances). Returns the model when keep (the caller destroys it).
static void hd_parity(fat5_test *T, fat5_ctx *ctx, const char *name) {
    char dir[512], path[600];
    fat5_model *m = NULL;
    hd_batch h;
    fat5_st_file *ref = NULL;
    fat5_forward_result r;
    float *out = NULL, *want = NULL, *g = NULL, *lref = NULL, *G = NULL;
    int64_t n = 0, nl = 0, rows = 0, cols = 0, nG = 0;
    int i;
    memset(&h, 0, sizeof h);
    snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, name);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (fat5_model_load(ctx, dir, &m) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: load: %s", name, fat5_last_error(ctx));
        return;
    }
    if (!hd_load_batch(T, dir, &m->cfg, &h) || fat5_st_load(fat5_test_ctx(T), path, &ref) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "fixture %s: %s", name, fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    if (m->cfg.head == FAT5_HEAD_ENCODER) {
        if (!(G = tm_read_tensor(T, ref, "grad_output", &nG))) goto done;
        FAT5_CHECK(T, nG == h.b.n_enc_tokens * m->cfg.d_model);
        h.b.head_targets = G;
    }
    if (fat5_model_forward(m, &h.b, NULL, &r) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: forward: %s", name, fat5_last_error(ctx));
        goto done;
    }
    if (!(want = tm_read_tensor(T, ref, "logits", &n))) goto done;
    FAT5_REQUIRE(T, fat5_model_get_head_output(m, NULL, 0, &rows, &cols) == FAT5_OK);
    FAT5_CHECK_MSG(T, rows * cols == n, "%s: output %lld x %lld, reference %lld values", name, (long long)rows,
                   (long long)cols, (long long)n);
    out = (float *)malloc((size_t)n * sizeof(float));
    if (out && rows * cols == n && fat5_model_get_head_output(m, out, n, NULL, NULL) == FAT5_OK)
        fat5_check_close(T, name, out, want, (size_t)n, 1e-5, 1e-4);
    if ((lref = tm_read_tensor(T, ref, "loss", &nl)) != NULL)
        FAT5_CHECK_MSG(T, fabs(r.loss - lref[0]) <= 1e-4 * fabs(lref[0]) + 1e-7, "%s: loss %.9g, transformers %.9g",
                       name, r.loss, (double)lref[0]);
    fat5_model_zero_grad(m);
    if (fat5_model_backward(m, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: backward: %s", name, fat5_last_error(ctx));
        goto done;
    }
    for (i = 0; i < m->n_params; i++) {
        char gname[200];
        int64_t gn = 0;
        float *mine;
        snprintf(gname, sizeof gname, "grad.%s", m->params[i].io_name);
        free(g);
        g = tm_read_tensor(T, ref, gname, &gn);
        FAT5_CHECK_MSG(T, g != NULL, "%s: fixture has no %s", name, gname);
        if (!g) continue;
        mine = (float *)malloc((size_t)gn * sizeof(float));
        if (!mine) break;
        fat5_model_get_grad(m, m->params[i].name, mine, gn);
        snprintf(gname, sizeof gname, "%s grad.%s", name, m->params[i].io_name);
        if (i == m->ho_b && m->cfg.head == FAT5_HEAD_QA) {
            // qa_outputs.bias: each counted row's softmax gradient sums to zero over its tokens, so
            // the exact gradient is 0 and both sides hold rounding noise: both must be negligible
            // next to the largest gradient of qa_outputs.weight
            int64_t wn = 0, e;
            char wname[200];
            float *gw;
            snprintf(wname, sizeof wname, "grad.%s", m->params[m->ho_w].io_name);
            if ((gw = tm_read_tensor(T, ref, wname, &wn)) != NULL)
                for (e = 0; e < gn; e++)
                    FAT5_CHECK_MSG(T, fabs(mine[e]) <= 1e-5 * tm_max_abs(gw, wn) && fabs(g[e]) <= 1e-5 * tm_max_abs(gw, wn),
                                   "%s[%lld]: %g and %g, expected ~0 next to %g", gname, (long long)e, (double)mine[e],
                                   (double)g[e], tm_max_abs(gw, wn));
            free(gw);
        } else {
            fat5_check_close(T, gname, mine, g, (size_t)gn, 1e-5 * tm_max_abs(g, gn) + 1e-9, 1e-3);
        }
        free(mine);
    }
done:
    free(g);
    free(out);
    free(want);
    free(lref);
    free(G);
    fat5_st_destroy(ref);
    hd_batch_free(&h);
    fat5_model_destroy(m);
}

static void t_heads_hf_parity(fat5_test *T) {
    int k;
    for (k = 0; k < HD_N_FIXTURES; k++) hd_parity(T, fat5_test_ctx(T), hd_fixtures[k]);
}

// ---- random models: finite differences, packing, save and load, errors ----

// three inputs of one EOS each (id 1), of 6, 3 and 7 tokens
static const int32_t hd_tok[] = {3, 4, 5, 6, 7, 1, 8, 9, 1, 5, 7, 9, 11, 3, 2, 1};
static const int32_t hd_cu[] = {0, 6, 9, 16};
static const int32_t hd_cls[] = {2, -100, 0};
static const int32_t hd_tokl[] = {0, 1, -100, 2, 1, -100, 2, 2, 0, 1, -100, 0, 2, 1, 0, -100};
static const int32_t hd_qa[] = {1, 3, 0, 5, -2, 6};   // (start, end): row 1's end past its 3 tokens; row 2's start < 0
static const float hd_reg[] = {0.5f, -1.25f, 2.0f};
static const float hd_multi[] = {1, 0, 1, 0, 0, 1, 1, 1, 0};

static fat5_batch hd_rand_batch(fat5_head head, fat5_problem pr) {
    fat5_batch b;
    memset(&b, 0, sizeof b);
    b.n_seq = 3;
    b.n_enc_tokens = 16;
    b.enc_tokens = hd_tok;
    b.enc_cu_seqlens = hd_cu;
    if (head == FAT5_HEAD_TOKEN_CLS) b.head_labels = hd_tokl;
    else if (head == FAT5_HEAD_QA) b.head_labels = hd_qa;
    else if (pr == FAT5_PROBLEM_REGRESSION) b.head_targets = hd_reg;
    else if (pr == FAT5_PROBLEM_MULTI_LABEL) b.head_targets = hd_multi;
    else if (head != FAT5_HEAD_ENCODER) b.head_labels = hd_cls;
    return b;
}

static fat5_model_config hd_rand_config(fat5_head head, fat5_problem pr, fat5_pool pool) {
    fat5_model_config c = tm_tiny_config(1, 0, 0);
    c.head = head;
    c.num_labels = head == FAT5_HEAD_QA ? 2 : pr == FAT5_PROBLEM_REGRESSION ? 1 : 3;
    c.problem_type = pr;
    c.pooling = pool;
    return c;
}

// G for an ENCODER model's loss: n floats ([tokens, d_model]), normal / n (a mean's scale)
static float *hd_grad_output(int64_t n) {
    float *G = (float *)malloc((size_t)n * sizeof(float));
    int64_t i;
    fat5_rng r = fat5_rng_init(5);
    for (i = 0; G && i < n; i++) G[i] = (float)(fat5_rng_normal(&r) / (double)n);
    return G;
}

static float *hd_outputs(fat5_test *T, fat5_model *m, const fat5_batch *b, int64_t *n);

typedef struct hd_fd { fat5_model *m; fat5_batch b; const fat5_loss_config *lc; } hd_fd;

// Central differences of f in each element of x, Richardson-extrapolated from steps h and h/2
// (error O(h^4): the tiny models' losses curve enough that a plain O(h^2) difference at 1e-3
// misses by 1% on some elements), against the analytic gradient g.
static void hd_fd_richardson(fat5_test *T, const char *what, float *x, size_t n, const float *g, tc_scalar_fn f,
                             void *user, double h, double atol, double rtol) {
    float *num = tc_alloc(n);
    size_t i;
    for (i = 0; i < n; i++) {
        float x0 = x[i];
        double d[2];
        int k;
        for (k = 0; k < 2; k++) {
            double hk = k ? h / 2 : h, lp, lm;
            x[i] = (float)(x0 + hk);
            lp = f(user);
            x[i] = (float)(x0 - hk);
            lm = f(user);
            x[i] = x0;
            d[k] = (lp - lm) / (2 * hk);
        }
        num[i] = (float)((4 * d[1] - d[0]) / 3);
    }
    fat5_check_close(T, what, g, num, n, atol, rtol);
    free(num);
}
static double hd_fd_loss(void *u) {
    hd_fd *a = (hd_fd *)u;
    fat5_forward_result r;
    if (fat5_model_forward(a->m, &a->b, a->lc, &r) != FAT5_OK) return NAN;
    return r.loss;
}

// every parameter's gradient against central differences of the head's loss (with the loss
// options lc, NULL: the defaults)
static void hd_fd_check_loss(fat5_test *T, fat5_head head, fat5_problem pr, fat5_pool pool, const char *what,
                             const fat5_loss_config *lc) {
    fat5_model_config c = hd_rand_config(head, pr, pool);
    fat5_model *m = NULL;
    hd_fd a;
    float *g = NULL, *G = NULL;
    int i;
    FAT5_REQUIRE_OK(T, fat5_model_create(fat5_test_ctx(T), &c, 17, &m));
    tm_perturb_norms(m, 3);
    for (i = 0; i < m->n_params; i++)   // biases away from 0, so that theirs matter in the products
        if (i == m->hd_b || i == m->ho_b) {
            size_t j;
            for (j = 0; j < m->params[i].numel; j++) m->w[m->params[i].offset + j] = 0.1f * (float)((int)j % 5 - 2);
        }
    a.m = m;
    a.b = hd_rand_batch(head, pr);
    a.lc = lc;
    if (head == FAT5_HEAD_ENCODER) {
        G = hd_grad_output(16 * c.d_model);
        a.b.head_targets = G;
    }
    FAT5_CHECK_MSG(T, isfinite(hd_fd_loss(&a)), "%s: forward: %s", what, fat5_last_error(fat5_test_ctx(T)));
    fat5_model_zero_grad(m);
    if (fat5_model_backward(m, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: backward: %s", what, fat5_last_error(fat5_test_ctx(T)));
        goto done;
    }
    g = (float *)malloc(m->n_floats * sizeof(float));
    if (!g) goto done;
    memcpy(g, FAT5__HOST(const float, m->gd), m->n_floats * sizeof(float));
    for (i = 0; i < m->n_params; i++) {
        const fat5__param *p = &m->params[i];
        char name[200];
        snprintf(name, sizeof name, "%s: %s", what, p->io_name);
        hd_fd_richardson(T, name, m->w + p->offset, p->numel, g + p->offset, hd_fd_loss, &a, 4e-3, 2e-4, 2e-3);
        FAT5_CHECK_MSG(T, tm_max_abs(g + p->offset, (int64_t)p->numel) > 0 || p->numel < 4, "%s: all-zero gradient",
                       name);
    }
done:
    free(g);
    free(G);
    fat5_model_destroy(m);
}

static void hd_fd_check(fat5_test *T, fat5_head head, fat5_problem pr, fat5_pool pool, const char *what) {
    hd_fd_check_loss(T, head, pr, pool, what, NULL);
}

static void t_heads_fd_enc_seqcls(fat5_test *T) {
    hd_fd_check(T, FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL, FAT5_POOL_EOS, "encoder classifier, EOS");
    hd_fd_check(T, FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_AUTO, FAT5_POOL_MEAN, "encoder classifier, mean");
    hd_fd_check(T, FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_MULTI_LABEL, FAT5_POOL_FIRST, "encoder classifier, first, multi");
    hd_fd_check(T, FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_REGRESSION, FAT5_POOL_MEAN, "encoder classifier, regression");
}
static void t_heads_fd_other(fat5_test *T) {
    hd_fd_check(T, FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL, FAT5_POOL_EOS, "T5ForSequenceClassification");
    hd_fd_check(T, FAT5_HEAD_TOKEN_CLS, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS, "T5ForTokenClassification");
    hd_fd_check(T, FAT5_HEAD_QA, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS, "T5ForQuestionAnswering");
    hd_fd_check(T, FAT5_HEAD_ENCODER, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS, "T5EncoderModel");
}


// The loss options on the heads: label smoothing s and z-loss z on the cross-entropy over classes
// (single-label classifiers, token classifiers): the loss is the mean over the counted rows of
// (1 - s) (lse - x_y) + s (lse - mean_j x_j) + z lse^2 (Hugging Face's LabelSmoother, torch's
// label_smoothing; fat5's z-loss), computed here from the head's logits, and every gradient is
// that loss's (central differences); the heads whose loss is not over classes refuse them.
static void t_heads_loss_options(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_loss_config lc = fat5_loss_config_default();
    static const struct { fat5_head head; fat5_problem pr; } ok[] = {
        {FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL}, {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_AUTO},
        {FAT5_HEAD_TOKEN_CLS, FAT5_PROBLEM_AUTO}}, bad[] = {
        {FAT5_HEAD_QA, FAT5_PROBLEM_AUTO}, {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_REGRESSION},
        {FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_MULTI_LABEL}, {FAT5_HEAD_ENCODER, FAT5_PROBLEM_AUTO}};
    size_t k;
    lc.label_smoothing = 0.2;
    lc.z_loss = 0.05;
    for (k = 0; k < sizeof ok / sizeof ok[0]; k++) {
        fat5_model_config c = hd_rand_config(ok[k].head, ok[k].pr, FAT5_POOL_EOS);
        fat5_batch b = hd_rand_batch(ok[k].head, ok[k].pr);
        fat5_model *m = NULL;
        fat5_forward_result r;
        float *x = NULL;
        int64_t n = 0, R, L = c.num_labels, i, j, cnt = 0;
        double ce = 0, zl = 0;
        char what[64];
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 23, &m));
        tm_perturb_norms(m, 3);
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, &lc, &r));
        x = hd_outputs(T, m, &b, &n);
        FAT5_REQUIRE(T, x && n % L == 0);
        R = n / L;
        for (i = 0; i < R; i++) {   // the reference, in double from the logits
            int32_t y = b.head_labels[i];
            double mx = -INFINITY, sum = 0, mean = 0, lse;
            if (y == -100) continue;
            for (j = 0; j < L; j++) mx = fmax(mx, (double)x[i * L + j]), mean += (double)x[i * L + j] / (double)L;
            for (j = 0; j < L; j++) sum += exp((double)x[i * L + j] - mx);
            lse = mx + log(sum);
            ce += (1 - lc.label_smoothing) * (lse - (double)x[i * L + y]) + lc.label_smoothing * (lse - mean);
            zl += lc.z_loss * lse * lse;
            cnt++;
        }
        FAT5_REQUIRE(T, cnt > 0);
        FAT5_CHECK_MSG(T, fabs(r.ce - ce / (double)cnt) <= 1e-9 * fabs(ce / (double)cnt) &&
                          fabs(r.loss - (ce + zl) / (double)cnt) <= 1e-9 * fabs((ce + zl) / (double)cnt) && r.n_tokens == cnt,
                       "head %d: ce %.10g, loss %.10g, expected %.10g, %.10g", (int)ok[k].head, r.ce, r.loss,
                       ce / (double)cnt, (ce + zl) / (double)cnt);
        free(x);
        fat5_model_destroy(m);
        snprintf(what, sizeof what, "head %d, smoothing and z-loss", (int)ok[k].head);
        hd_fd_check_loss(T, ok[k].head, ok[k].pr, FAT5_POOL_EOS, what, &lc);
    }
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fat5_model_config c = hd_rand_config(bad[k].head, bad[k].pr, FAT5_POOL_EOS);
        fat5_batch b = hd_rand_batch(bad[k].head, bad[k].pr);
        fat5_model *m = NULL;
        fat5_loss_config one = fat5_loss_config_default();
        float *G = NULL;
        int z;
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 23, &m));
        if (bad[k].head == FAT5_HEAD_ENCODER) b.head_targets = G = hd_grad_output(16 * c.d_model);
        for (z = 0; z < 2; z++) {
            fat5_status st;
            one.label_smoothing = z ? 0 : 0.1;
            one.z_loss = z ? 1e-4 : 0;
            st = fat5_model_forward(m, &b, &one, NULL);
            FAT5_CHECK_MSG(T, st == FAT5_ERR_INVALID_ARG && strstr(fat5_last_error(ctx), z ? "z_loss" : "label_smoothing") &&
                              strstr(fat5_last_error(ctx), "takes neither"), "head %d, problem %d: %s: %s",
                           (int)bad[k].head, (int)bad[k].pr, fat5_status_string(st), fat5_last_error(ctx));
        }
        FAT5_CHECK_MSG(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_OK, "%s", fat5_last_error(ctx));
        free(G);
        fat5_model_destroy(m);
    }
}

// sequences [s0, s1) of b as a batch of their own, its arrays in buf (int32 [2 * 16 + 64])
static fat5_batch hd_sub_batch(const fat5_model_config *c, const fat5_batch *b, int64_t s0, int64_t s1, int32_t *buf) {
    fat5_batch o;
    int64_t t0 = b->enc_cu_seqlens[s0], t1 = b->enc_cu_seqlens[s1], s, L = c->num_labels;
    int32_t *cu = buf, *lab = buf + 16;
    memset(&o, 0, sizeof o);
    o.n_seq = s1 - s0;
    o.n_enc_tokens = t1 - t0;
    o.enc_tokens = b->enc_tokens + t0;
    for (s = s0; s <= s1; s++) cu[s - s0] = b->enc_cu_seqlens[s] - (int32_t)t0;
    o.enc_cu_seqlens = cu;
    if (b->head_targets)
        o.head_targets = b->head_targets + (c->head == FAT5_HEAD_ENCODER ? t0 * c->d_model : s0 * L);
    if (b->head_labels) {
        int64_t a = c->head == FAT5_HEAD_TOKEN_CLS ? t0 : c->head == FAT5_HEAD_QA ? 2 * s0 : s0;
        int64_t z = c->head == FAT5_HEAD_TOKEN_CLS ? t1 : c->head == FAT5_HEAD_QA ? 2 * s1 : s1;
        memcpy(lab, b->head_labels + a, (size_t)(z - a) * sizeof *lab);
        o.head_labels = lab;
    }
    return o;
}

// Gradient accumulation as the trainer does it: a batch in two micro-batches, each backward scaled
// by its share of the batch's targets (fat5__batch_targets; the encoder's loss is a sum: 1 each),
// gives the gradient and the loss of the whole batch in one, for every head. QA's answers are as
// the task rows make them: both positions inside the sequence, or both past it (cut off).
static void t_heads_accum(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const struct { fat5_head head; fat5_problem pr; fat5_pool pool; } cases[] = {
        {FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL, FAT5_POOL_EOS}, {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_AUTO, FAT5_POOL_MEAN},
        {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_MULTI_LABEL, FAT5_POOL_FIRST},
        {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_REGRESSION, FAT5_POOL_EOS}, {FAT5_HEAD_TOKEN_CLS, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS},
        {FAT5_HEAD_QA, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS}, {FAT5_HEAD_ENCODER, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS}};
    static const int32_t qa[] = {1, 3, 3, 3, 0, 6};   // row 1's answer cut off (both at its length)
    static const int32_t cls[] = {2, 1, -100};
    size_t k;
    for (k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fat5_model_config c = hd_rand_config(cases[k].head, cases[k].pr, cases[k].pool);
        fat5_batch b = hd_rand_batch(cases[k].head, cases[k].pr), mb[2];
        fat5_model *m = NULL;
        fat5_forward_result r;
        float *g1 = NULL, *G = NULL;
        int32_t buf[2][2 * 16 + 64];
        double loss1, loss2 = 0;
        int64_t n_all, i, split;
        char what[96];
        FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 31, &m));
        tm_perturb_norms(m, 3);
        if (cases[k].head == FAT5_HEAD_QA) b.head_labels = qa;
        if (cases[k].head == FAT5_HEAD_SEQ_CLS || (cases[k].head == FAT5_HEAD_ENC_SEQ_CLS && cases[k].pr == FAT5_PROBLEM_AUTO))
            b.head_labels = cls;
        if (cases[k].head == FAT5_HEAD_ENCODER) b.head_targets = G = hd_grad_output(16 * c.d_model);
        n_all = fat5__batch_targets(m, &b);
        FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, &r));
        FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
        loss1 = r.loss;
        g1 = (float *)malloc(m->n_floats * sizeof(float));
        FAT5_REQUIRE(T, g1);
        memcpy(g1, FAT5__HOST(const float, m->gd), m->n_floats * sizeof(float));
        for (split = 1; split < 3; split++) {   // sequences [0, split) and [split, 3)
            loss2 = 0;
            mb[0] = hd_sub_batch(&c, &b, 0, split, buf[0]);
            mb[1] = hd_sub_batch(&c, &b, split, 3, buf[1]);
            FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
            for (i = 0; i < 2; i++) {
                double w = cases[k].head == FAT5_HEAD_ENCODER ? 1.0 : (double)fat5__batch_targets(m, &mb[i]) / (double)n_all;
                FAT5_REQUIRE_OK(T, fat5_model_forward(m, &mb[i], NULL, &r));
                FAT5_REQUIRE_OK(T, fat5_model_backward(m, (float)w));
                loss2 += w * r.loss;
            }
            snprintf(what, sizeof what, "head %d, problem %d, split at %d: accumulated gradient", (int)cases[k].head,
                     (int)cases[k].pr, (int)split);
            fat5_check_close(T, what, FAT5__HOST(const float, m->gd), g1, m->n_floats, 1e-6, 1e-4);
            FAT5_CHECK_MSG(T, fabs(loss2 - loss1) <= 1e-5 * fabs(loss1) + 1e-7, "head %d, split at %d: loss %.9g in two, "
                           "%.9g in one", (int)cases[k].head, (int)split, loss2, loss1);
        }
        free(g1);
        free(G);
        fat5_model_destroy(m);
    }
}

// the head outputs of m on b (NULL with the count in *n on failure)
static float *hd_outputs(fat5_test *T, fat5_model *m, const fat5_batch *b, int64_t *n) {
    int64_t rows = 0, cols = 0;
    float *o;
    *n = 0;
    if (fat5_model_forward(m, b, NULL, NULL) != FAT5_OK ||
        fat5_model_get_head_output(m, NULL, 0, &rows, &cols) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "forward: %s", fat5_last_error(m->ctx));
        return NULL;
    }
    o = (float *)malloc((size_t)(rows * cols) * sizeof(float));
    if (o && fat5_model_get_head_output(m, o, rows * cols, NULL, NULL) != FAT5_OK) {
        free(o);
        return NULL;
    }
    *n = rows * cols;
    return o;
}

// every fixture saved and loaded again: the same architecture, head fields, label names and outputs
static void t_heads_save_load(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    int k;
    for (k = 0; k < HD_N_FIXTURES; k++) {
        char dir[512], out[700];
        fat5_model *a = NULL, *b = NULL;
        hd_batch h;
        float *oa = NULL, *ob = NULL, *G = NULL;
        int64_t na = 0, nb = 0, i;
        memset(&h, 0, sizeof h);
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, hd_fixtures[k]);
        snprintf(out, sizeof out, "%s/%s", fat5_test_tmpdir(T), hd_fixtures[k]);
        if (fat5_model_load(ctx, dir, &a) != FAT5_OK || !hd_load_batch(T, dir, &a->cfg, &h) ||
            fat5_model_save(a, out) != FAT5_OK || fat5_model_load(ctx, out, &b) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "%s: %s", hd_fixtures[k], fat5_last_error(ctx));
            goto next;
        }
        if (a->cfg.head == FAT5_HEAD_ENCODER) h.b.head_targets = G = hd_grad_output(a->cfg.d_model * h.b.n_enc_tokens);
        FAT5_CHECK_MSG(T, strcmp(fat5_model_architecture(a), fat5_model_architecture(b)) == 0, "%s: saved as %s, "
                       "loaded as %s", hd_fixtures[k], fat5_model_architecture(a), fat5_model_architecture(b));
        FAT5_CHECK(T, a->cfg.head == b->cfg.head && a->cfg.num_labels == b->cfg.num_labels &&
                      a->cfg.problem_type == b->cfg.problem_type && a->cfg.classifier_dropout == b->cfg.classifier_dropout);
        for (i = 0; i < a->cfg.num_labels && fat5_model_label_name(a, 0); i++)
            FAT5_CHECK_MSG(T, strcmp(fat5_model_label_name(a, i), fat5_model_label_name(b, i)) == 0,
                           "%s: label %lld '%s' became '%s'", hd_fixtures[k], (long long)i, fat5_model_label_name(a, i),
                           fat5_model_label_name(b, i));
        oa = hd_outputs(T, a, &h.b, &na);
        ob = hd_outputs(T, b, &h.b, &nb);
        FAT5_CHECK(T, oa && ob && na == nb && na > 0 && memcmp(oa, ob, (size_t)na * sizeof(float)) == 0);
    next:
        free(oa);
        free(ob);
        free(G);
        hd_batch_free(&h);
        fat5_model_destroy(a);
        fat5_model_destroy(b);
    }
}

// fat5_model_load_head: an LM's stacks under every head (weights as the LM's, the head made anew:
// biases 0, weights of the right scale), a head kept when the checkpoint has it with as many
// labels and made anew otherwise, the names given, and an encoder-only checkpoint refused a decoder
static void t_heads_load_head(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char lm_dir[512], cls_dir[512], enc_dir[512];
    fat5_model *lm = NULL, *m = NULL, *src = NULL;
    static const fat5_head heads[] = {FAT5_HEAD_SEQ_CLS, FAT5_HEAD_TOKEN_CLS, FAT5_HEAD_QA, FAT5_HEAD_ENC_SEQ_CLS,
                                      FAT5_HEAD_ENCODER};
    static const char *const names[3] = {"négatif", "neutral \"quoted\"", "positive"};
    float *x = NULL, *y = NULL;
    int k, i;
    snprintf(lm_dir, sizeof lm_dir, "%s/t5_v11_gated_gelu_untied", FAT5_TEST_DATA);
    snprintf(cls_dir, sizeof cls_dir, "%s/heads_t5_seqcls", FAT5_TEST_DATA);
    snprintf(enc_dir, sizeof enc_dir, "%s/heads_t5_encoder", FAT5_TEST_DATA);
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, lm_dir, &lm));
    x = (float *)malloc(lm->n_floats * sizeof(float));
    y = (float *)malloc(lm->n_floats * sizeof(float));
    FAT5_REQUIRE(T, x && y);
    for (k = 0; k < (int)(sizeof heads / sizeof heads[0]); k++) {
        fat5_head_config hc = fat5_head_config_default(heads[k], 3);
        if (heads[k] == FAT5_HEAD_SEQ_CLS) hc.label_names = names;
        if (fat5_model_load_head(ctx, lm_dir, &hc, 9, &m) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "head %d: %s", (int)heads[k], fat5_last_error(ctx));
            continue;
        }
        FAT5_CHECK(T, m->cfg.head == heads[k] && m->lm_head < 0);
        for (i = 0; i < m->n_params; i++) {   // the stacks: the LM's values, under the head's names
            const fat5__param *p = &m->params[i];
            int j = fat5_model_find_tensor(lm, p->name);
            if (i == m->hd_w || i == m->hd_b || i == m->ho_w || i == m->ho_b) continue;
            FAT5_CHECK_MSG(T, j >= 0 && lm->params[j].numel == p->numel &&
                              memcmp(lm->w + lm->params[j].offset, m->w + p->offset, p->numel * sizeof(float)) == 0,
                           "head %d: %s differs from the LM's", (int)heads[k], p->io_name);
        }
        if (m->ho_w >= 0) {
            double ss = 0, D = (double)m->cfg.d_model, want = heads[k] == FAT5_HEAD_TOKEN_CLS ? 1.0 : 1.0 / D;
            size_t j, n = m->params[m->ho_w].numel;
            for (j = 0; j < n; j++) ss += (double)m->w[m->params[m->ho_w].offset + j] * m->w[m->params[m->ho_w].offset + j];
            FAT5_CHECK_MSG(T, ss / (double)n > want / 3 && ss / (double)n < want * 3, "head %d: the new output "
                           "layer's variance %g, Hugging Face's init %g", (int)heads[k], ss / (double)n, want);
            for (j = 0; j < m->params[m->ho_b].numel; j++) FAT5_CHECK(T, m->w[m->params[m->ho_b].offset + j] == 0.0f);
        }
        if (heads[k] == FAT5_HEAD_SEQ_CLS)
            for (i = 0; i < 3; i++) FAT5_CHECK(T, strcmp(fat5_model_label_name(m, i), names[i]) == 0);
        if (heads[k] == FAT5_HEAD_TOKEN_CLS) FAT5_CHECK(T, strcmp(fat5_model_label_name(m, 1), "LABEL_1") == 0);
        if (heads[k] != FAT5_HEAD_ENCODER) {   // and it trains: a forward and a backward
            fat5_batch b = hd_rand_batch(heads[k], FAT5_PROBLEM_AUTO);
            fat5_forward_result r;
            FAT5_CHECK_MSG(T, fat5_model_forward(m, &b, NULL, &r) == FAT5_OK && fat5_model_backward(m, 1.0f) == FAT5_OK &&
                              isfinite(r.loss) && r.loss > 0, "head %d: %s", (int)heads[k], fat5_last_error(ctx));
        }
        fat5_model_destroy(m);
        m = NULL;
    }
    {   // a classifier's own head is kept (same labels), made anew for another count
        fat5_head_config hc = fat5_head_config_default(FAT5_HEAD_SEQ_CLS, 3);
        int o;
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, cls_dir, &src));
        if (fat5_model_load_head(ctx, cls_dir, &hc, 1, &m) == FAT5_OK) {
            o = m->ho_w;
            FAT5_CHECK(T, memcmp(m->w + m->params[o].offset, src->w + src->params[src->ho_w].offset,
                                 m->params[o].numel * sizeof(float)) == 0);
            FAT5_CHECK(T, strcmp(fat5_model_label_name(m, 2), fat5_model_label_name(src, 2)) == 0);
        } else {
            FAT5_CHECK_MSG(T, 0, "same head: %s", fat5_last_error(ctx));
        }
        fat5_model_destroy(m);
        m = NULL;
        hc.num_labels = 5;
        if (fat5_model_load_head(ctx, cls_dir, &hc, 1, &m) == FAT5_OK) {
            FAT5_CHECK(T, m->params[m->ho_w].shape[0] == 5 && m->w[m->params[m->ho_b].offset] == 0.0f);
            FAT5_CHECK(T, strcmp(fat5_model_label_name(m, 4), "LABEL_4") == 0);
            // dense keeps the checkpoint's values (its shape is the same), as from_pretrained's
            // ignore_mismatched_sizes does
            FAT5_CHECK(T, memcmp(m->w + m->params[m->hd_w].offset, src->w + src->params[src->hd_w].offset,
                                 m->params[m->hd_w].numel * sizeof(float)) == 0);
        } else {
            FAT5_CHECK_MSG(T, 0, "5 labels: %s", fat5_last_error(ctx));
        }
        fat5_model_destroy(m);
        m = NULL;
    }
    {   // an encoder-only checkpoint has no decoder for question answering
        fat5_head_config hc = fat5_head_config_default(FAT5_HEAD_QA, 2);
        FAT5_CHECK(T, fat5_model_load_head(ctx, enc_dir, &hc, 1, &m) == FAT5_ERR_UNSUPPORTED);
        FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "encoder-only") != NULL, "message: %s", fat5_last_error(ctx));
        hc = fat5_head_config_default(FAT5_HEAD_TOKEN_CLS, 4);
        FAT5_CHECK_MSG(T, fat5_model_load_head(ctx, enc_dir, &hc, 1, &m) == FAT5_OK, "%s", fat5_last_error(ctx));
        fat5_model_destroy(m);
        m = NULL;
    }
    free(x);
    free(y);
    fat5_model_destroy(src);
    fat5_model_destroy(lm);
}

// Copies the fixture dir src to dst with its shared table stored only under the name `as` (the
// names transformers' tied embeddings may be saved under); the other tensors as they are.
static void hd_copy_shared_as(fat5_test *T, const char *src, const char *dst, const char *shared, const char *as) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char p[700], *cfg = NULL;
    size_t len = 0;
    fat5_st_file *f = NULL;
    fat5_st_write_tensor w[128];
    float *data[128];
    int n, i, d;
    snprintf(p, sizeof p, "%s/config.json", src);
    FAT5_REQUIRE_OK(T, fat5_read_file(ctx, p, (size_t)1 << 20, &cfg, &len));
    mkdir(dst, 0755);
    snprintf(p, sizeof p, "%s/config.json", dst);
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, p, cfg, len));
    fat5_free(ctx, cfg);
    snprintf(p, sizeof p, "%s/model.safetensors", src);
    FAT5_REQUIRE_OK(T, fat5_st_load(ctx, p, &f));
    n = fat5_st_tensor_count(f);
    FAT5_REQUIRE(T, n <= 128);
    for (i = 0; i < n; i++) {
        const fat5_st_tensor *ti = fat5_st_get(f, i);
        int64_t numel = 1;
        for (d = 0; d < ti->ndim; d++) numel *= ti->shape[d];
        data[i] = (float *)malloc((size_t)(numel ? numel : 1) * sizeof(float));
        FAT5_REQUIRE(T, data[i] && fat5_st_read_f32(f, i, data[i], numel) == FAT5_OK);
        w[i].name = strcmp(ti->name, shared) == 0 ? as : ti->name;
        w[i].ndim = ti->ndim;
        for (d = 0; d < ti->ndim; d++) w[i].shape[d] = ti->shape[d];
        w[i].data = data[i];
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dst);
    FAT5_REQUIRE_OK(T, fat5_st_write(ctx, p, w, n, NULL, 0));
    for (i = 0; i < n; i++) free(data[i]);
    fat5_st_destroy(f);
}

// A classifier or QA checkpoint whose shared table is stored only as one of its tied aliases
// (encoder.embed_tokens or decoder.embed_tokens, under "transformer." for the classifiers) loads,
// by fat5_model_load and by fat5_model_load_head into a head of the other prefix, with the
// fixture's table
static void t_heads_tied_names(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    static const struct { const char *fixture, *shared, *as; } cases[] = {
        {"heads_t5_seqcls", "transformer.shared.weight", "transformer.encoder.embed_tokens.weight"},
        {"heads_t5_seqcls", "transformer.shared.weight", "transformer.decoder.embed_tokens.weight"},
        {"heads_t5_qa", "shared.weight", "encoder.embed_tokens.weight"},
        {"heads_t5_qa", "shared.weight", "decoder.embed_tokens.weight"}};
    static const fat5_head heads[] = {FAT5_HEAD_SEQ_CLS, FAT5_HEAD_TOKEN_CLS, FAT5_HEAD_QA, FAT5_HEAD_ENC_SEQ_CLS,
                                      FAT5_HEAD_LM};
    size_t c, h;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char src[600], dst[600];
        fat5_model *ref = NULL, *m = NULL;
        snprintf(src, sizeof src, "%s/%s", FAT5_TEST_DATA, cases[c].fixture);
        snprintf(dst, sizeof dst, "%s/tied%d", fat5_test_tmpdir(T), (int)c);
        hd_copy_shared_as(T, src, dst, cases[c].shared, cases[c].as);
        FAT5_REQUIRE_OK(T, fat5_model_load(ctx, src, &ref));
        if (fat5_model_load(ctx, dst, &m) == FAT5_OK) {
            FAT5_CHECK_MSG(T, m->n_floats == ref->n_floats && !memcmp(m->w, ref->w, m->n_floats * sizeof(float)),
                           "%s as %s: fat5_model_load's weights differ", cases[c].shared, cases[c].as);
        } else {
            FAT5_CHECK_MSG(T, 0, "%s as %s: %s", cases[c].shared, cases[c].as, fat5_last_error(ctx));
        }
        fat5_model_destroy(m);
        m = NULL;
        for (h = 0; h < sizeof heads / sizeof heads[0]; h++) {
            fat5_head_config hc = fat5_head_config_default(heads[h], 3);
            const fat5__param *a, *b;
            if (fat5_model_load_head(ctx, dst, &hc, 1, &m) != FAT5_OK) {
                FAT5_CHECK_MSG(T, 0, "%s as %s, head %d: %s", cases[c].shared, cases[c].as, (int)heads[h],
                               fat5_last_error(ctx));
                continue;
            }
            a = &m->params[m->shared];
            b = &ref->params[ref->shared];
            FAT5_CHECK_MSG(T, a->numel == b->numel && !memcmp(m->w + a->offset, ref->w + b->offset, a->numel * sizeof(float)),
                           "%s as %s, head %d: the shared table differs", cases[c].shared, cases[c].as, (int)heads[h]);
            fat5_model_destroy(m);
            m = NULL;
        }
        fat5_model_destroy(ref);
    }
}

// T5EncoderModel trains on a loss computed outside: with G the gradient of sum(hidden * G), a few
// optimizer steps lower it, and the model saves and loads as T5EncoderModel
static void t_heads_encoder_trains(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = hd_rand_config(FAT5_HEAD_ENCODER, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS);
    fat5_model *m = NULL, *back = NULL;
    fat5_optim *o = NULL;
    fat5_optim_config oc = fat5_optim_config_default();
    fat5_batch b = hd_rand_batch(FAT5_HEAD_ENCODER, FAT5_PROBLEM_AUTO);
    fat5_forward_result r;
    float *G = hd_grad_output(16 * 8);
    double first = 0, last = 0;
    char dir[600];
    int step;
    FAT5_REQUIRE(T, G != NULL);
    b.head_targets = G;
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 5, &m));
    oc.lr = 1e-2;
    FAT5_REQUIRE_OK(T, fat5_optim_create(m, &oc, &o));
    for (step = 0; step < 6; step++) {
        FAT5_REQUIRE_OK(T, fat5_model_zero_grad(m));
        FAT5_REQUIRE_OK(T, fat5_model_forward(m, &b, NULL, &r));
        FAT5_REQUIRE_OK(T, fat5_model_backward(m, 1.0f));
        FAT5_REQUIRE_OK(T, fat5_optim_step(o, NULL));
        if (step == 0) first = r.loss;
        last = r.loss;
    }
    FAT5_CHECK_MSG(T, last < first - 1e-4, "sum(hidden * G): %.6f after 6 steps, %.6f at the first", last, first);
    snprintf(dir, sizeof dir, "%s/encoder", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_model_save(m, dir));
    FAT5_REQUIRE_OK(T, fat5_model_load(ctx, dir, &back));
    FAT5_CHECK(T, back->cfg.head == FAT5_HEAD_ENCODER && strcmp(fat5_model_architecture(back), "T5EncoderModel") == 0 &&
                  back->n_dec == 0 && fat5_model_find_tensor(back, "decoder.final_layer_norm.weight") < 0);
    fat5_model_destroy(back);
    fat5_optim_destroy(o);
    fat5_model_destroy(m);
    free(G);
}

// what a head refuses, each error naming the row (or what to do instead)
static void t_heads_errors(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_model_config c = hd_rand_config(FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL, FAT5_POOL_EOS);
    fat5_model *m = NULL;
    fat5_batch b;
    fat5_decoder *d = NULL;
    static const int32_t no_eos[] = {3, 4, 5, 6, 7, 1, 8, 9, 2, 5, 7, 9, 11, 3, 2, 1};
    static const int32_t two_eos[] = {3, 4, 1, 6, 7, 1, 8, 9, 1, 5, 7, 9, 11, 3, 2, 1};
    static const int32_t bad_cls[] = {2, 3, 0};
    static const int32_t bad_tok[] = {0, 1, -100, 2, 1, -100, 2, 2, 0, 1, -100, 7, 2, 1, 0, -100};
    static const int32_t lab[] = {1, 1};
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 3, &m));
    b = hd_rand_batch(FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL);
    b.enc_tokens = no_eos;
    FAT5_CHECK(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "sequence 1 has no EOS"), "%s", fat5_last_error(ctx));
    b.enc_tokens = two_eos;
    FAT5_CHECK(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "sequence 1 holds 1 EOS tokens, sequence 0 holds 2"), "%s",
                   fat5_last_error(ctx));
    b = hd_rand_batch(FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL);
    b.head_labels = bad_cls;
    FAT5_CHECK(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "sequence 1: label 3 is outside [0, num_labels 3)"), "%s",
                   fat5_last_error(ctx));
    b = hd_rand_batch(FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL);
    b.labels = lab;
    b.n_dec_tokens = 2;
    FAT5_CHECK(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "takes no decoder tokens or labels"), "%s", fat5_last_error(ctx));
    b = hd_rand_batch(FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_REGRESSION);
    FAT5_CHECK(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_ERR_INVALID_ARG);   // floats for a single-label head
    FAT5_CHECK(T, fat5_model_get_logits(m, NULL, 0) == FAT5_ERR_STATE);
    FAT5_CHECK(T, fat5_decoder_create(m, 1, 16, 8, &d) == FAT5_ERR_UNSUPPORTED && d == NULL);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "generation needs a language model"), "%s", fat5_last_error(ctx));
    fat5_model_destroy(m);
    m = NULL;
    c = hd_rand_config(FAT5_HEAD_TOKEN_CLS, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS);
    FAT5_REQUIRE_OK(T, fat5_model_create(ctx, &c, 3, &m));
    b = hd_rand_batch(FAT5_HEAD_TOKEN_CLS, FAT5_PROBLEM_AUTO);
    b.head_labels = bad_tok;
    FAT5_CHECK(T, fat5_model_forward(m, &b, NULL, NULL) == FAT5_ERR_INVALID_ARG);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "sequence 2, position 2: label 7"), "%s", fat5_last_error(ctx));
    fat5_model_destroy(m);
}

// ---- the GPU: the fixtures against transformers (fp32), and against the CPU (bf16; dropout) ----
#ifndef FAT5_NO_CUDA
// The same model and batch on the CPU and on gctx: outputs, loss and every gradient. fp32:
// elementwise as the fixtures; bf16: the relative L2 bound of tgm_compare_rows (u sqrt(6 L) x 4).
// drop: dropout on (seed 7, draw 3) on both, so that the masks must agree too.
static void hd_compare(fat5_test *T, fat5_ctx *gctx, fat5_model *cpu, const fat5_batch *b, const char *what, int drop) {
    fat5_model *gpu = NULL;
    fat5_forward_result rc, rg;
    int bf16 = gctx->cfg.dtype == FAT5_DTYPE_BF16, i;
    int64_t rows = 0, cols = 0;
    float *oc = NULL, *og = NULL, *gc = NULL, *gg = NULL;
    char name[240];
    double u = 1.0 / 512.0, layers = (double)(cpu->cfg.num_layers + cpu->n_dec + 1);
    double tol = 4.0 * u * sqrt(6.0 * layers);
    if (fat5_model_create(gctx, &cpu->cfg, 0, &gpu) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: GPU model: %s", what, fat5_last_error(gctx));
        return;
    }
    for (i = 0; i < cpu->n_params; i++) {
        const fat5__param *p = &cpu->params[i];
        if (fat5_model_set_param(gpu, p->name, cpu->w + p->offset, (int64_t)p->numel) != FAT5_OK)
            FAT5_CHECK_MSG(T, 0, "set_param %s: %s", p->name, fat5_last_error(gctx));
    }
    fat5_model_set_dropout(cpu, drop, 7, 3);
    fat5_model_set_dropout(gpu, drop, 7, 3);
    fat5_model_zero_grad(cpu);
    fat5_model_zero_grad(gpu);
    if (fat5_model_forward(cpu, b, NULL, &rc) != FAT5_OK || fat5_model_backward(cpu, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: CPU: %s", what, fat5_last_error(cpu->ctx));
        goto done;
    }
    if (fat5_model_forward(gpu, b, NULL, &rg) != FAT5_OK || fat5_model_backward(gpu, 1.0f) != FAT5_OK) {
        FAT5_CHECK_MSG(T, 0, "%s: GPU: %s", what, fat5_last_error(gctx));
        goto done;
    }
    fat5_model_get_head_output(cpu, NULL, 0, &rows, &cols);
    oc = (float *)malloc((size_t)(rows * cols) * sizeof(float));
    og = (float *)malloc((size_t)(rows * cols) * sizeof(float));
    gc = (float *)malloc(cpu->n_floats * sizeof(float));
    gg = (float *)malloc(cpu->n_floats * sizeof(float));
    if (!oc || !og || !gc || !gg) goto done;
    FAT5_CHECK(T, fat5_model_get_head_output(cpu, oc, rows * cols, NULL, NULL) == FAT5_OK);
    FAT5_CHECK(T, fat5_model_get_head_output(gpu, og, rows * cols, NULL, NULL) == FAT5_OK);
    FAT5_CHECK(T, rc.n_tokens == rg.n_tokens);
    snprintf(name, sizeof name, "%s outputs", what);
    if (!bf16) {
        fat5_check_close(T, name, og, oc, (size_t)(rows * cols), 1e-5, 1e-4);
        FAT5_CHECK_MSG(T, fabs(rg.loss - rc.loss) <= 1e-4 * fabs(rc.loss) + 1e-7, "%s: loss GPU %.9g CPU %.9g", what,
                       rg.loss, rc.loss);
    } else {
        double e = tgm_rel_l2(og, oc, (size_t)(rows * cols)), bound = 1e-2 * fabs(rc.loss) + 1e-5;
        FAT5_CHECK_MSG(T, e <= tol, "%s: bf16 relative L2 error %.3g > %.3g", name, e, tol);
        if (cpu->cfg.head == FAT5_HEAD_ENCODER) {
            // sum(hidden * G) cancels (G has mean 0): its error is bounded by |G| |d hidden| <=
            // |G| tol |hidden| (Cauchy-Schwarz, with the hidden states' relative L2 bound), not by
            // the sum's own size
            double g2 = 0, h2 = 0;
            int64_t j;
            for (j = 0; j < rows * cols; j++) {
                g2 += (double)b->head_targets[j] * b->head_targets[j];
                h2 += (double)oc[j] * oc[j];
            }
            bound = tol * sqrt(g2 * h2);
        }
        FAT5_CHECK_MSG(T, fabs(rg.loss - rc.loss) <= bound, "%s: bf16 loss GPU %.6g CPU %.6g (bound %.3g)", what,
                       rg.loss, rc.loss, bound);
    }
    for (i = 0; i < cpu->n_params; i++) {
        const fat5__param *p = &cpu->params[i];
        fat5_model_get_grad(cpu, p->name, gc, (int64_t)p->numel);
        if (fat5_model_get_grad(gpu, p->name, gg, (int64_t)p->numel) != FAT5_OK) {
            FAT5_CHECK_MSG(T, 0, "get_grad %s: %s", p->name, fat5_last_error(gctx));
            continue;
        }
        snprintf(name, sizeof name, "%s grad %s", what, p->io_name);
        if (i == cpu->ho_b && cpu->cfg.head == FAT5_HEAD_QA) {
            // qa_outputs.bias: exactly 0 (hd_parity), both sides noise. Its logits' gradient sums to
            // at most 1 in absolute value per column, so bf16's rounding of it leaves at most ~u.
            size_t e;
            double bound = bf16 ? 4.0 * u : 1e-6;
            for (e = 0; e < p->numel; e++)
                FAT5_CHECK_MSG(T, fabs(gg[e]) <= bound && fabs(gc[e]) <= 1e-6, "%s[%d]: GPU %g, CPU %g, expected ~0",
                               name, (int)e, (double)gg[e], (double)gc[e]);
        } else if (!bf16) {
            fat5_check_close(T, name, gg, gc, p->numel, 1e-5 * tm_max_abs(gc, (int64_t)p->numel) + 1e-9, 1e-3);
        } else {
            double e = tgm_rel_l2(gg, gc, p->numel);
            FAT5_CHECK_MSG(T, e <= tol, "%s: bf16 relative L2 error %.3g > %.3g", name, e, tol);
        }
    }
done:
    free(oc);
    free(og);
    free(gc);
    free(gg);
    fat5_model_destroy(gpu);
}

// every fixture loaded on a GPU context against transformers' outputs, loss and gradients
static void t_gpu_heads_fixtures_fp32(fat5_test *T) {
    fat5_ctx *g = tgm_ctx(T, FAT5_DTYPE_FP32);
    int k;
    if (!g) return;
    for (k = 0; k < HD_N_FIXTURES; k++) hd_parity(T, g, hd_fixtures[k]);
    fat5_ctx_destroy(g);
}

// every fixture in bf16 against the CPU; random encoder-only classifiers (each pooling) and every
// head with its dropouts on (classifier_dropout 0.2, dropout_rate 0.1) in fp32 against the CPU
static void t_gpu_heads_vs_cpu(fat5_test *T) {
    fat5_ctx *g16 = tgm_ctx(T, FAT5_DTYPE_BF16), *g32 = NULL;
    int k;
    if (!g16) return;
    for (k = 0; k < HD_N_FIXTURES; k++) {
        char dir[512];
        fat5_model *cpu = NULL;
        hd_batch h;
        float *G = NULL;
        memset(&h, 0, sizeof h);
        snprintf(dir, sizeof dir, "%s/%s", FAT5_TEST_DATA, hd_fixtures[k]);
        if (fat5_model_load(fat5_test_ctx(T), dir, &cpu) != FAT5_OK || !hd_load_batch(T, dir, &cpu->cfg, &h)) {
            FAT5_CHECK_MSG(T, 0, "%s: %s", hd_fixtures[k], fat5_last_error(fat5_test_ctx(T)));
        } else {
            if (cpu->cfg.head == FAT5_HEAD_ENCODER) {
                G = hd_grad_output(cpu->cfg.d_model * h.b.n_enc_tokens);
                h.b.head_targets = G;
            }
            hd_compare(T, g16, cpu, &h.b, hd_fixtures[k], 0);
        }
        free(G);
        hd_batch_free(&h);
        fat5_model_destroy(cpu);
    }
    fat5_ctx_destroy(g16);
    if (!(g32 = tgm_ctx(T, FAT5_DTYPE_FP32))) return;
    {
        static const struct { fat5_head head; fat5_problem pr; fat5_pool pool; const char *what; } cases[] = {
            {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL, FAT5_POOL_EOS, "encoder classifier, EOS, dropout"},
            {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_MULTI_LABEL, FAT5_POOL_MEAN, "encoder classifier, mean, dropout"},
            {FAT5_HEAD_ENC_SEQ_CLS, FAT5_PROBLEM_REGRESSION, FAT5_POOL_FIRST, "encoder classifier, first, dropout"},
            {FAT5_HEAD_SEQ_CLS, FAT5_PROBLEM_SINGLE_LABEL, FAT5_POOL_EOS, "T5ForSequenceClassification, dropout"},
            {FAT5_HEAD_TOKEN_CLS, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS, "T5ForTokenClassification, dropout"},
            {FAT5_HEAD_QA, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS, "T5ForQuestionAnswering, dropout"},
            {FAT5_HEAD_ENCODER, FAT5_PROBLEM_AUTO, FAT5_POOL_EOS, "T5EncoderModel, dropout"}};
        for (k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
            fat5_model_config c = hd_rand_config(cases[k].head, cases[k].pr, cases[k].pool);
            fat5_model *cpu = NULL;
            fat5_batch b = hd_rand_batch(cases[k].head, cases[k].pr);
            float *G = NULL;
            c.classifier_dropout = 0.2;
            c.dropout_rate = 0.1;
            if (fat5_model_create(fat5_test_ctx(T), &c, 23, &cpu) != FAT5_OK) {
                FAT5_CHECK_MSG(T, 0, "%s: %s", cases[k].what, fat5_last_error(fat5_test_ctx(T)));
                continue;
            }
            if (cases[k].head == FAT5_HEAD_ENCODER) {
                G = hd_grad_output(16 * c.d_model);
                b.head_targets = G;
            }
            hd_compare(T, g32, cpu, &b, cases[k].what, 1);
            free(G);
            fat5_model_destroy(cpu);
        }
    }
    fat5_ctx_destroy(g32);
}
#define FAT5_TESTS_HEADS_GPU(X) X(gpu_heads_fixtures_fp32) X(gpu_heads_vs_cpu)
#else
#define FAT5_TESTS_HEADS_GPU(X)
#endif

#define FAT5_TESTS_HEADS(X) X(heads_hf_parity) X(heads_fd_enc_seqcls) X(heads_fd_other) X(heads_save_load) \
    X(heads_load_head) X(heads_errors) X(heads_encoder_trains) X(heads_tied_names) \
    X(heads_loss_options) X(heads_accum) FAT5_TESTS_HEADS_GPU(X)
