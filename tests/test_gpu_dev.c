// GPU device layer: the no-device path, memory round trips and launches, cuBLAS GEMMs against the
// CPU ops, the kernel cache and NVRTC error reports. Tests that need a GPU skip without one; the
// cache and compile-error logic is also tested through NVRTC alone (fat5__dev_build_offline), which
// needs the toolkit's libnvrtc but no driver or device.

#ifdef FAT5_NO_CUDA
static void gd_no_cuda(fat5_test *T) { FAT5_SKIP(T, "no CUDA device: built with FAT5_NO_CUDA"); }
#define t_gpu_dev_open gd_no_cuda
#define t_gpu_dev_memory gd_no_cuda
#define t_gpu_dev_mm_fp32 gd_no_cuda
#define t_gpu_dev_mm_bf16 gd_no_cuda
#define t_gpu_dev_mm_lt gd_no_cuda
#define t_gpu_dev_arch_and_cache_dir gd_no_cuda
#define t_gpu_dev_cache_offline gd_no_cuda
#define t_gpu_dev_cache gd_no_cuda
#define t_gpu_dev_compile_error_offline gd_no_cuda
#define t_gpu_dev_compile_error gd_no_cuda
#define t_gpu_backend_answers gd_no_cuda
#else

typedef struct gd_log {
    char text[8192];
    size_t len;
} gd_log;

static void gd_log_fn(void *user, fat5_log_level level, const char *msg) {
    gd_log *l = (gd_log *)user;
    int n = snprintf(l->text + l->len, sizeof l->text - l->len, "[%d] %s\n", (int)level, msg);
    if (n > 0) l->len += (size_t)n < sizeof l->text - l->len ? (size_t)n : sizeof l->text - l->len - 1;
}

// why the last gd_create failed (fat5_ctx_create leaves no context to ask)
static char gd_why[1024];

static fat5_status gd_create(fat5_ctx **ctx, fat5_device dev, fat5_dtype dt, const char *cache_dir,
                             gd_log *log) {
    fat5_ctx_config c = fat5_ctx_config_default();
    c.device = dev;
    c.dtype = dt;
    c.cache_dir = cache_dir;
    if (log) {
        memset(log, 0, sizeof *log);
        c.log = gd_log_fn;
        c.log_user = log;
    }
    return fat5_ctx_create(&c, ctx, gd_why, sizeof gd_why);
}

// Opens a GPU context into ctx, or skips the test when there is no device (any other failure
// fails it). Cleanup of ctx is the caller's.
#define GD_OPEN(T, ctx, dt, cache_dir, log)                                                        \
    do {                                                                                           \
        fat5_status s_ = gd_create(&(ctx), FAT5_DEVICE_GPU, (dt), (cache_dir), (log));             \
        if (s_ == FAT5_ERR_NO_DEVICE) {                                                            \
            char r_[256];                                                                          \
            snprintf(r_, sizeof r_, "no CUDA device: %.200s", gd_why);                             \
            FAT5_SKIP(T, r_);                                                                      \
        }                                                                                          \
        if (s_ != FAT5_OK) {                                                                       \
            fat5_test_fail((T), __FILE__, __LINE__, "GPU fat5_ctx_create -> %s: %s",               \
                           fat5_status_string(s_), gd_why);                                        \
            return;                                                                                \
        }                                                                                          \
    } while (0)

// a call on a GPU ctx that must succeed; on failure records the ctx's message and jumps to done
#define GD_OK(T, ctx, call)                                                                        \
    do {                                                                                           \
        fat5_status s_ = (call);                                                                   \
        if (s_ != FAT5_OK) {                                                                       \
            fat5_test_fail((T), __FILE__, __LINE__, "%s -> %s: %s", #call, fat5_status_string(s_), \
                           fat5_last_error(ctx));                                                  \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

// environment variables changed by a test, restored afterwards
typedef struct gd_env { const char *name; char *old; int had; } gd_env;
static gd_env gd_env_set(const char *name, const char *value) {
    gd_env e;
    const char *v = getenv(name);
    e.name = name;
    e.had = v != NULL;
    e.old = v ? fat5__strdup(NULL, v) : NULL;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
    return e;
}
static void gd_env_restore(gd_env *e) {
    if (e->had && e->old) setenv(e->name, e->old, 1);
    else unsetenv(e->name);
    fat5__free(NULL, e->old);
    e->old = NULL;
}

static int gd_file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    return 1;
}

static int gd_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static uint16_t gd_bf16(float x) { return fat5__f32_to_bf16(x); }
static float gd_round_bf16(float x) { return fat5__bf16_to_f32(fat5__f32_to_bf16(x)); }
// n floats to the device as bf16 when `as16` (through h16, n entries), else as fp32; and back
static fat5_status gd_upload_as(fat5_ctx *ctx, fat5__dptr dst, const float *x, size_t n, int as16, uint16_t *h16) {
    size_t i;
    if (!as16) return fat5__dev_upload(ctx, dst, x, n * 4);
    for (i = 0; i < n; i++) h16[i] = gd_bf16(x[i]);
    return fat5__dev_upload(ctx, dst, h16, n * 2);
}
static fat5_status gd_download_as(fat5_ctx *ctx, float *x, fat5__dptr src, size_t n, int as16, uint16_t *h16) {
    fat5_status st;
    size_t i;
    if (!as16) return fat5__dev_download(ctx, x, src, n * 4);
    if ((st = fat5__dev_download(ctx, h16, src, n * 2))) return st;
    for (i = 0; i < n; i++) x[i] = fat5__bf16_to_f32(h16[i]);
    return FAT5_OK;
}

// ---------------------------------------------------------------------------------------------
// (a) no device: a clear FAT5_ERR_NO_DEVICE, no GPU state, and the CPU path unaffected; with a
// device: it opens and reports itself.

static void t_gpu_dev_open(fat5_test *T) {
    fat5_ctx *ctx = NULL, *cpu = NULL;
    fat5_model *m = NULL;
    fat5_model_config mc = fat5_model_config_default();
    gd_log log;
    fat5_status st = gd_create(&ctx, FAT5_DEVICE_GPU, FAT5_DTYPE_BF16, NULL, &log);
    FAT5_REQUIRE(T, (st == FAT5_OK) == (ctx != NULL));   // a failed create leaves nothing
    if (st == FAT5_ERR_NO_DEVICE) {
        const char *msg = gd_why;
        FAT5_CHECK_MSG(T, strstr(msg, "libcuda") || strstr(msg, "NVRTC") || strstr(msg, "cuBLAS") ||
                              strstr(msg, "cuInit") || strstr(msg, "device"),
                       "the NO_DEVICE message does not say what is missing: '%s'", msg);
        // the GPU entry points refuse cleanly on a ctx without a GPU
        FAT5_REQUIRE(T, gd_create(&ctx, FAT5_DEVICE_CPU, FAT5_DTYPE_FP32, NULL, NULL) == FAT5_OK);
        FAT5_CHECK(T, ctx->gpu == NULL);
        {
            fat5__dptr p = 1;
            FAT5_CHECK(T, fat5__dev_alloc(ctx, 16, &p) == FAT5_ERR_STATE && p == 0);
            FAT5_CHECK(T, fat5__dev_sync(ctx) == FAT5_ERR_STATE);
            fat5__dev_free(ctx, 0);
            fat5__dev_close(ctx);  // idempotent
        }
    } else {
        struct fat5__gpu *g = ctx->gpu;
        FAT5_CHECK_MSG(T, st == FAT5_OK && g != NULL, "GPU open -> %s: %s", fat5_status_string(st),
                       fat5_last_error(ctx));
        if (st != FAT5_OK || !g) goto done;
        FAT5_CHECK(T, g->name[0] != 0 && g->cc_major >= 8 && g->sm_count > 0 && g->total_mem > 0);
        FAT5_CHECK(T, g->driver_version >= 12000 && g->nvrtc_major >= 12 && g->stream && g->blas);
        {   // every part of the kernel program loaded as a module of its own
            int p;
            for (p = 0; p < FAT5__K_PARTS; p++) FAT5_CHECK_MSG(T, g->module[p] != NULL, "part %d has no module", p);
        }
        FAT5_CHECK(T, fat5__dev_act_size(ctx) == 2);
        FAT5_CHECK_MSG(T, strstr(log.text, g->name) && strstr(log.text, g->arch) && strstr(log.text, "kernels:"),
                       "log does not report the device, arch and kernel build:\n%s", log.text);
        {
            int k;
            for (k = 0; k < FAT5__K_COUNT; k++) FAT5_CHECK_MSG(T, g->fn[k] != NULL, "%s", fat5__kernel_names[k]);
        }
        {
            size_t fr = 0, tot = 0;
            GD_OK(T, ctx, fat5__dev_mem_info(ctx, &fr, &tot));
            FAT5_CHECK(T, tot > 0 && fr <= tot);
        }
        fat5_ctx_destroy(ctx);
        ctx = NULL;
        // an ordinal past the last device
        {
            fat5_ctx_config c = fat5_ctx_config_default();
            c.device = FAT5_DEVICE_GPU;
            c.device_ordinal = 1000;
            st = fat5_ctx_create(&c, &ctx, gd_why, sizeof gd_why);
            FAT5_CHECK_MSG(T, st == FAT5_ERR_NO_DEVICE && !ctx && strstr(gd_why, "out of range"),
                           "ordinal 1000 -> %s: %s", fat5_status_string(st), gd_why);
        }
    }
done:
    fat5_ctx_destroy(ctx);
    // the CPU path works after (and beside) a failed or closed GPU context
    FAT5_REQUIRE(T, gd_create(&cpu, FAT5_DEVICE_CPU, FAT5_DTYPE_FP32, NULL, NULL) == FAT5_OK);
    mc.vocab_size = 11;
    mc.d_model = 8;
    mc.d_kv = 4;
    mc.num_heads = 2;
    mc.d_ff = 12;
    mc.num_layers = 1;
    mc.num_decoder_layers = 1;
    mc.rel_buckets = 4;
    mc.rel_max_distance = 8;
    if (fat5_model_create(cpu, &mc, 7, &m) == FAT5_OK) {
        static const int32_t enc[] = {3, 4, 5, 1}, enc_cu[] = {0, 4}, lab[] = {6, 7, 1}, dec_cu[] = {0, 3};
        fat5_batch b;
        fat5_forward_result r;
        memset(&b, 0, sizeof b);
        b.n_seq = 1;
        b.n_enc_tokens = 4;
        b.n_dec_tokens = 3;
        b.enc_tokens = enc;
        b.enc_cu_seqlens = enc_cu;
        b.labels = lab;
        b.dec_cu_seqlens = dec_cu;
        FAT5_CHECK_MSG(T, fat5_model_forward(m, &b, NULL, &r) == FAT5_OK && r.loss > 0 && r.loss < 100,
                       "CPU forward: %s", fat5_last_error(cpu));
    } else {
        FAT5_CHECK_MSG(T, 0, "CPU model: %s", fat5_last_error(cpu));
    }
    fat5_model_destroy(m);
    fat5_ctx_destroy(cpu);
}

// ---------------------------------------------------------------------------------------------
// (b) memory: zero-filled alloc, upload/download, memset, device copy, a launch and a bad launch

static void t_gpu_dev_memory(fat5_test *T) {
    fat5_ctx *ctx = NULL;
    fat5__dptr a = 0, b = 0, z = 7;
    enum { N = 1000 };
    float host[N], back[N];
    int i, zeros = 1, same = 1;
    GD_OPEN(T, ctx, FAT5_DTYPE_FP32, NULL, NULL);
    GD_OK(T, ctx, fat5__dev_alloc(ctx, 0, &z));
    FAT5_CHECK(T, z == 0);
    fat5__dev_free(ctx, 0);
    GD_OK(T, ctx, fat5__dev_alloc(ctx, N * sizeof(float), &a));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, N * sizeof(float), &b));
    FAT5_CHECK(T, a != 0 && b != 0);
    for (i = 0; i < N; i++) back[i] = 1.0f;
    GD_OK(T, ctx, fat5__dev_download(ctx, back, a, N * sizeof(float)));
    for (i = 0; i < N; i++) zeros &= back[i] == 0.0f;
    FAT5_CHECK_MSG(T, zeros, "a new allocation is not zero-filled");
    for (i = 0; i < N; i++) host[i] = (float)i * 0.5f - 3.0f;
    GD_OK(T, ctx, fat5__dev_upload(ctx, a, host, N * sizeof(float)));
    GD_OK(T, ctx, fat5__dev_copy(ctx, b, a, N * sizeof(float)));
    GD_OK(T, ctx, fat5__dev_memset0(ctx, a + 100 * sizeof(float), 50 * sizeof(float)));
    GD_OK(T, ctx, fat5__dev_download(ctx, back, a, N * sizeof(float)));
    for (i = 0; i < N; i++) same &= back[i] == ((i >= 100 && i < 150) ? 0.0f : host[i]);
    FAT5_CHECK_MSG(T, same, "upload / memset0 / download round trip differs");
    GD_OK(T, ctx, fat5__dev_download(ctx, back, b, N * sizeof(float)));
    FAT5_CHECK_MSG(T, memcmp(back, host, sizeof host) == 0, "device-to-device copy differs");
    // a kernel: fat5_fill_f32(float *x, float v, long long n) on part of b
    {
        fat5__dptr p = b + 10 * sizeof(float);
        float v = 2.5f;
        long long n = 20;
        void *args[3];
        args[0] = &p;
        args[1] = &v;
        args[2] = &n;
        GD_OK(T, ctx, fat5__dev_launch(ctx, FAT5__K_fill_f32, 1, 1, 1, 64, 1, 1, 0, args));
        GD_OK(T, ctx, fat5__dev_sync(ctx));
        GD_OK(T, ctx, fat5__dev_download(ctx, back, b, N * sizeof(float)));
        same = 1;
        for (i = 0; i < N; i++) same &= back[i] == ((i >= 10 && i < 30) ? 2.5f : host[i]);
        FAT5_CHECK_MSG(T, same, "fat5_fill_f32 wrote the wrong elements");
        // an invalid launch (2048 threads per block) is reported with the kernel's name; skipped
        // under compute-sanitizer (FAT5_SANITIZER=1), which counts the deliberate API error
        if (!getenv("FAT5_SANITIZER")) {
            FAT5_CHECK(T, fat5__dev_launch(ctx, FAT5__K_fill_f32, 1, 1, 1, 2048, 1, 1, 0, args) == FAT5_ERR_CUDA);
            FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "fat5_fill_f32") != NULL, "%s", fat5_last_error(ctx));
        }
        FAT5_CHECK(T, fat5__dev_launch(ctx, FAT5__K_COUNT, 1, 1, 1, 1, 1, 1, 0, args) == FAT5_ERR_INVALID_ARG);
        GD_OK(T, ctx, fat5__dev_sync(ctx));  // the context survives a rejected launch
    }
done:
    fat5__dev_free(ctx, a);
    fat5__dev_free(ctx, b);
    fat5_ctx_destroy(ctx);
}

// ---------------------------------------------------------------------------------------------
// (c) fat5__gpu_mm, all layouts, against fat5__cpu_mm_*

// |got - ref| <= rel * (|alpha| sum_k |a_k b_k| + |beta c0|) + out_rel * |ref|: the first term
// bounds fp32 accumulation (K = 45 terms: ~K * 2^-24 < 1e-5), the second the rounding of a bf16
// output (half an ulp: 2^-8 relative).
// M = 37 rows go to cuBLAS; NT products of M <= FAT5__MM_ROWS rows to fat5_mm (K = 64: 16-byte
// loads; K = 45: one element at a time).
enum { GD_MM_MAXM = 37, GD_MM_MAXK = 64 };
static void gd_mm_case(fat5_test *T, fat5_dtype dt, fat5__mm_layout layout, int c_f32, int M, int K) {
    static const char *const lname[3] = {"NT", "NN", "TN"};
    enum { N = 19 };
    fat5_ctx *ctx = NULL;
    fat5__dptr dA = 0, dB = 0, dC = 0;
    static float A[GD_MM_MAXM * GD_MM_MAXK], B[N * GD_MM_MAXK], C0[GD_MM_MAXM * N], ref[GD_MM_MAXM * N];
    static float mag[GD_MM_MAXM * N], got[GD_MM_MAXM * N], Ab[GD_MM_MAXM * GD_MM_MAXK], Bb[N * GD_MM_MAXK];
    static uint16_t h16[GD_MM_MAXM * GD_MM_MAXK];
    int bf16 = dt == FAT5_DTYPE_BF16, out16 = bf16 && !c_f32, pass, i;
    size_t act = bf16 ? 2 : 4, csz = out16 ? 2 : 4;
    fat5_rng r = fat5_rng_init(1234 + (uint64_t)layout * 10 + (uint64_t)c_f32);
    GD_OPEN(T, ctx, dt, NULL, NULL);
    // inputs as the device sees them (bf16-rounded in bf16 mode), so the reference sees the same
    for (i = 0; i < M * K; i++) A[i] = bf16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    for (i = 0; i < N * K; i++) B[i] = bf16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    for (i = 0; i < M * N; i++) C0[i] = out16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    GD_OK(T, ctx, fat5__dev_alloc(ctx, M * K * act, &dA));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, N * K * act, &dB));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, M * N * csz, &dC));
    GD_OK(T, ctx, gd_upload_as(ctx, dA, A, (size_t)(M * K), bf16, h16));
    GD_OK(T, ctx, gd_upload_as(ctx, dB, B, (size_t)(N * K), bf16, h16));
    // the CPU reference on the same buffers read with the layout's shapes; |a||b| sums for the bound
    for (i = 0; i < M * K; i++) Ab[i] = fabsf(A[i]);
    for (i = 0; i < N * K; i++) Bb[i] = fabsf(B[i]);
    if (layout == FAT5__MM_NT) {  // A[M,K], B[N,K]
        fat5__cpu_mm(ctx, FAT5__MM_NT, A_(ref), 1, A_(A), A_(B), M, N, K, 1.0f, 0.0f);
        fat5__cpu_mm(ctx, FAT5__MM_NT, A_(mag), 1, A_(Ab), A_(Bb), M, N, K, 1.0f, 0.0f);
    } else if (layout == FAT5__MM_NN) {  // A[M,K], B[K,N]
        fat5__cpu_mm(ctx, FAT5__MM_NN, A_(ref), 1, A_(A), A_(B), M, N, K, 1.0f, 0.0f);
        fat5__cpu_mm(ctx, FAT5__MM_NN, A_(mag), 1, A_(Ab), A_(Bb), M, N, K, 1.0f, 0.0f);
    } else {  // A[K,M], B[K,N]
        fat5__cpu_mm(ctx, FAT5__MM_TN, A_(ref), 1, A_(A), A_(B), M, N, K, 1.0f, 0.0f);
        fat5__cpu_mm(ctx, FAT5__MM_TN, A_(mag), 1, A_(Ab), A_(Bb), M, N, K, 1.0f, 0.0f);
    }
    // two passes: alpha 1, beta 0 over a NaN-filled C (beta 0 must not read C); then alpha 0.75,
    // beta 0.5 over C0
    for (pass = 0; pass < 2; pass++) {
        float alpha = pass ? 0.75f : 1.0f, beta = pass ? 0.5f : 0.0f;
        int bad = 0, first = -1;
        double worst = 0;
        if (out16) {
            for (i = 0; i < M * N; i++) h16[i] = pass ? gd_bf16(C0[i]) : 0x7fc0;
            GD_OK(T, ctx, fat5__dev_upload(ctx, dC, h16, M * N * 2));
        } else {
            for (i = 0; i < M * N; i++) got[i] = pass ? C0[i] : NAN;
            GD_OK(T, ctx, fat5__dev_upload(ctx, dC, got, M * N * 4));
        }
        GD_OK(T, ctx, fat5__gpu_mm(ctx, layout, dC, c_f32, dA, dB, M, N, K, alpha, beta));
        FAT5_CHECK_MSG(T, (ctx->gpu->last_kernel == FAT5__K_mm) == (layout == FAT5__MM_NT && M <= ctx->gpu->mm_rows),
                       "M=%d: fat5_mm ran %s", M, ctx->gpu->last_kernel == FAT5__K_mm ? "yes" : "no");
        GD_OK(T, ctx, gd_download_as(ctx, got, dC, (size_t)(M * N), out16, h16));
        for (i = 0; i < M * N; i++) {
            double want = (double)alpha * ref[i] + (double)beta * C0[i];
            double bound = 1e-5 * (fabs((double)alpha) * mag[i] + fabs((double)beta * C0[i])) +
                           (out16 ? ldexp(1.0, -8) * fabs(want) : 0.0) + 1e-30;
            double err = fabs((double)got[i] - want);
            if (!(err <= bound)) {
                if (first < 0) first = i;
                bad++;
            }
            if (err / bound > worst || err != err) worst = err != err ? INFINITY : err / bound;
        }
        FAT5_CHECK_MSG(T, bad == 0,
                       "%s %s M=%d K=%d c_f32=%d alpha=%g beta=%g: %d of %d elements off (first [%d,%d]: got %.9g, "
                       "want %.9g); worst err/bound %.3g",
                       bf16 ? "bf16" : "fp32", lname[layout], M, K, c_f32, (double)alpha, (double)beta, bad,
                       M * N, first < 0 ? 0 : first / N, first < 0 ? 0 : first % N,
                       first < 0 ? 0.0 : (double)got[first],
                       first < 0 ? 0.0 : (double)alpha * ref[first] + (double)beta * C0[first], worst);
    }
done:
    fat5__dev_free(ctx, dA);
    fat5__dev_free(ctx, dB);
    fat5__dev_free(ctx, dC);
    fat5_ctx_destroy(ctx);
}

// every layout on cuBLAS (37 rows); NT with 1, 5 and 16 rows on fat5_mm, K = 64 and 45
static void gd_mm_all(fat5_test *T, fat5_dtype dt) {
    static const int few[3] = {1, 5, 16}, ks[2] = {64, 45};
    int l, c, i, k;
    for (l = 0; l < 3 && !T->skipped; l++)
        for (c = 1; c >= 0 && !T->skipped; c--) gd_mm_case(T, dt, (fat5__mm_layout)l, c, GD_MM_MAXM, 45);
    for (i = 0; i < 3 && !T->skipped; i++)
        for (k = 0; k < 2 && !T->skipped; k++)
            for (c = 1; c >= 0 && !T->skipped; c--) gd_mm_case(T, dt, FAT5__MM_NT, c, few[i], ks[k]);
}

static void t_gpu_dev_mm_fp32(fat5_test *T) { gd_mm_all(T, FAT5_DTYPE_FP32); }

static void t_gpu_dev_mm_bf16(fat5_test *T) { gd_mm_all(T, FAT5_DTYPE_BF16); }

// ---------------------------------------------------------------------------------------------
// (c2) products on cuBLASLt: one heuristic query per size class, and every size of a class right
// with the algorithm chosen for the class's largest. The free dimension (M of NT / NN, K of TN)
// takes sizes 1029, 1100, 1200, 1280 of the class of 1280 (one query, at the first), then 1281
// (the next class: one more), then 1100 with A, then C, one element off its alignment (classes of
// their own: one more each), then 1100 aligned again (none); batches of 3 likewise (A shared,
// then strided: a class each); fp32 outputs, and in bf16 bf16 outputs too (rounded
// once: split-K parts summed in fp32). Each result against fat5__cpu_mm; the counters say that
// cuBLASLt ran each product. With FAT5_CUBLASLT=0 cublasGemmEx runs them, right too.
enum { GD_LT_N = 72, GD_LT_FIXED = 96, GD_LT_MAXF = 1281 };
static void gd_mm_lt_case(fat5_test *T, fat5_ctx *ctx, fat5_dtype dt, fat5__mm_layout layout, int c_f32, int64_t F,
                          int a_off, int c_off, int queries) {
    static const char *const lname[3] = {"NT", "NN", "TN"};
    int64_t M = layout == FAT5__MM_TN ? GD_LT_FIXED : F, K = layout == FAT5__MM_TN ? F : GD_LT_FIXED, N = GD_LT_N;
    int bf16 = dt == FAT5_DTYPE_BF16, lt = ctx->gpu->lt_handle != NULL, out16 = bf16 && !c_f32;
    size_t act = bf16 ? 2 : 4, csz = out16 ? 2 : 4, nA = (size_t)(M * K), nB = (size_t)(N * K), nC = (size_t)(M * N), i;
    float *A = (float *)malloc(nA * 4), *B = (float *)malloc(nB * 4), *C0 = (float *)malloc(nC * 4);
    float *ref = (float *)malloc(nC * 4), *mag = (float *)malloc(nC * 4), *got = (float *)malloc(nC * 4);
    float *Ab = (float *)malloc(nA * 4), *Bb = (float *)malloc(nB * 4);
    uint16_t *h16 = (uint16_t *)malloc((nA > nC ? nA : nC) * 2);
    fat5__dptr dA = 0, dB = 0, dC = 0;
    fat5_rng r = fat5_rng_init(99 + (uint64_t)F * 3 + (uint64_t)layout);
    long long q0, c0;
    double rel = 2.0 * (double)K * ldexp(1.0, -24), worst = 0;
    int bad = 0, first = -1;
    const float alpha = 0.75f, beta = 0.5f;
    if (!A || !B || !C0 || !ref || !mag || !got || !Ab || !Bb || !h16) {
        fat5_test_fail(T, __FILE__, __LINE__, "out of host memory");
        goto done;
    }
    for (i = 0; i < nA; i++) A[i] = bf16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    for (i = 0; i < nB; i++) B[i] = bf16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    for (i = 0; i < nC; i++) C0[i] = out16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    GD_OK(T, ctx, fat5__dev_alloc(ctx, (nA + 1) * act, &dA));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, nB * act, &dB));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, (nC + 1) * csz, &dC));
    dC += (fat5__dptr)c_off * csz;
    GD_OK(T, ctx, gd_upload_as(ctx, dA + (fat5__dptr)a_off * act, A, nA, bf16, h16));
    GD_OK(T, ctx, gd_upload_as(ctx, dB, B, nB, bf16, h16));
    GD_OK(T, ctx, gd_upload_as(ctx, dC, C0, nC, out16, h16));
    for (i = 0; i < nA; i++) Ab[i] = fabsf(A[i]);
    for (i = 0; i < nB; i++) Bb[i] = fabsf(B[i]);
    fat5__cpu_mm(ctx, layout, A_(ref), 1, A_(A), A_(B), M, N, K, 1.0f, 0.0f);
    fat5__cpu_mm(ctx, layout, A_(mag), 1, A_(Ab), A_(Bb), M, N, K, 1.0f, 0.0f);
    q0 = ctx->gpu->lt_queries;
    c0 = ctx->gpu->lt_calls;
    GD_OK(T, ctx, fat5__gpu_mm(ctx, layout, dC, c_f32, dA + (fat5__dptr)a_off * act, dB, M, N, K, alpha, beta));
    FAT5_CHECK_MSG(T, ctx->gpu->lt_calls - c0 == (lt ? 1 : 0) && ctx->gpu->lt_queries - q0 == (lt ? queries : 0),
                   "%s %s c_f32=%d F=%lld a_off=%d: cuBLASLt ran %lld products (want %d) after %lld heuristic "
                   "queries (want %d)", bf16 ? "bf16" : "fp32", lname[layout], c_f32, (long long)F, a_off,
                   ctx->gpu->lt_calls - c0, lt, ctx->gpu->lt_queries - q0, lt ? queries : 0);
    GD_OK(T, ctx, gd_download_as(ctx, got, dC, nC, out16, h16));
    for (i = 0; i < nC; i++) {   // a bf16 output: one rounding of the fp32 sum (split-K parts summed in fp32)
        double want = (double)alpha * ref[i] + (double)beta * C0[i];
        double bound = rel * (fabs((double)alpha) * mag[i] + fabs((double)beta * C0[i])) +
                       (out16 ? ldexp(1.0, -8) * fabs(want) : 0.0) + 1e-30;
        double err = fabs((double)got[i] - want);
        if (!(err <= bound)) {
            if (first < 0) first = (int)i;
            bad++;
        }
        if (err / bound > worst || err != err) worst = err != err ? INFINITY : err / bound;
    }
    FAT5_CHECK_MSG(T, bad == 0, "%s %s c_f32=%d M=%lld N=%lld K=%lld a_off=%d: %d of %d elements off (first [%d,%d]: "
                   "got %.9g, want %.9g); worst err/bound %.3g", bf16 ? "bf16" : "fp32", lname[layout], c_f32, (long long)M,
                   (long long)N, (long long)K, a_off, bad, (int)nC, first < 0 ? 0 : first / (int)N,
                   first < 0 ? 0 : first % (int)N, first < 0 ? 0.0 : (double)got[first],
                   first < 0 ? 0.0 : (double)alpha * ref[first] + (double)beta * C0[first], worst);
done:
    fat5__dev_free(ctx, dA);
    fat5__dev_free(ctx, dB);
    fat5__dev_free(ctx, dC ? dC - (fat5__dptr)c_off * csz : 0);
    free(A), free(B), free(C0), free(ref), free(mag), free(got), free(Ab), free(Bb), free(h16);
}

// A batch of 3 products on cuBLASLt (fp32 outputs accumulated, beta 1, with a gap between them that
// must stay untouched): A shared (stride 0, as q | k | v read one input) or strided; free sizes of
// one class, so its algorithm runs sizes below the one it was chosen for. The strides are those of
// the class's largest size, rounded up to 128 elements, as the model's come from its capacity: the
// same for every size of the class (their alignment is part of the class).
static void gd_mm_lt_batched(fat5_test *T, fat5_ctx *ctx, fat5_dtype dt, fat5__mm_layout layout, int64_t F,
                             int shared, int queries) {
    enum { NB = 3, GAP = 8 };
    int64_t M = layout == FAT5__MM_TN ? GD_LT_FIXED : F, K = layout == FAT5__MM_TN ? F : GD_LT_FIXED, N = GD_LT_N;
    int bf16 = dt == FAT5_DTYPE_BF16, lt = ctx->gpu->lt_handle != NULL, bad = 0, b;
    int64_t Fx = fat5__lt_class(F), Mx = layout == FAT5__MM_TN ? M : Fx, Kx = layout == FAT5__MM_TN ? Fx : K;
    int64_t sA = shared ? 0 : (Mx * Kx + 127) / 128 * 128, sB = (N * Kx + 127) / 128 * 128;
    int64_t sC = (Mx * N + GAP + 127) / 128 * 128;
    size_t act = bf16 ? 2 : 4, nA = shared ? (size_t)(M * K) : (size_t)(sA * NB), nB = (size_t)(sB * NB), i;
    size_t nC = (size_t)(sC * NB);
    float *A = (float *)malloc(nA * 4), *B = (float *)malloc(nB * 4), *C0 = (float *)malloc(nC * 4);
    float *got = (float *)malloc(nC * 4), *ref = (float *)malloc((size_t)(M * N) * 4);
    float *mag = (float *)malloc((size_t)(M * N) * 4), *Ab = (float *)malloc(nA * 4), *Bb = (float *)malloc(nB * 4);
    uint16_t *h16 = (uint16_t *)malloc((nA > nB ? nA : nB) * 2);
    fat5__dptr dA = 0, dB = 0, dC = 0;
    fat5_rng r = fat5_rng_init(7 + (uint64_t)F + (uint64_t)shared * 100);
    double rel = 2.0 * (double)K * ldexp(1.0, -24);
    long long q0 = ctx->gpu->lt_queries, c0 = ctx->gpu->lt_calls;
    if (!A || !B || !C0 || !got || !ref || !mag || !Ab || !Bb || !h16) {
        fat5_test_fail(T, __FILE__, __LINE__, "out of host memory");
        goto done;
    }
    for (i = 0; i < nA; i++) A[i] = bf16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    for (i = 0; i < nB; i++) B[i] = bf16 ? gd_round_bf16((float)fat5_rng_normal(&r)) : (float)fat5_rng_normal(&r);
    for (i = 0; i < nC; i++) C0[i] = (float)fat5_rng_normal(&r);
    GD_OK(T, ctx, fat5__dev_alloc(ctx, nA * act, &dA));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, nB * act, &dB));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, nC * 4, &dC));
    GD_OK(T, ctx, gd_upload_as(ctx, dA, A, nA, bf16, h16));
    GD_OK(T, ctx, gd_upload_as(ctx, dB, B, nB, bf16, h16));
    GD_OK(T, ctx, fat5__dev_upload(ctx, dC, C0, nC * 4));
    GD_OK(T, ctx, fat5__gpu_mm_batched(ctx, layout, dC, 1, dA, dB, M, N, K, 0.75f, 1.0f, NB, sA, sB, sC));
    FAT5_CHECK_MSG(T, ctx->gpu->lt_calls - c0 == (lt ? 1 : 0) && ctx->gpu->lt_queries - q0 == (lt ? queries : 0),
                   "%s batched layout %d F=%lld A %s: cuBLASLt ran %lld calls (want %d) after %lld heuristic queries "
                   "(want %d)", bf16 ? "bf16" : "fp32", (int)layout, (long long)F, shared ? "shared" : "strided",
                   ctx->gpu->lt_calls - c0, lt, ctx->gpu->lt_queries - q0, lt ? queries : 0);
    GD_OK(T, ctx, fat5__dev_download(ctx, got, dC, nC * 4));
    for (b = 0; b < NB; b++) {
        const float *a = A + b * sA, *bb = B + b * sB;
        for (i = 0; i < (size_t)(M * K); i++) Ab[i] = fabsf(a[i]);
        for (i = 0; i < (size_t)(N * K); i++) Bb[i] = fabsf(bb[i]);
        fat5__cpu_mm(ctx, layout, A_(ref), 1, A_(a), A_(bb), M, N, K, 1.0f, 0.0f);
        fat5__cpu_mm(ctx, layout, A_(mag), 1, A_(Ab), A_(Bb), M, N, K, 1.0f, 0.0f);
        for (i = 0; i < (size_t)(M * N); i++) {
            double want = 0.75 * ref[i] + C0[b * sC + (int64_t)i];
            if (!(fabs(got[b * sC + (int64_t)i] - want) <= rel * (0.75 * mag[i] + fabs(C0[b * sC + (int64_t)i])) + 1e-30))
                bad++;
        }
        for (i = (size_t)(M * N); i < (size_t)sC; i++) bad += got[b * sC + (int64_t)i] != C0[b * sC + (int64_t)i];
    }
    FAT5_CHECK_MSG(T, bad == 0, "%s batched layout %d F=%lld A %s: %d elements off", bf16 ? "bf16" : "fp32",
                   (int)layout, (long long)F, shared ? "shared" : "strided", bad);
done:
    fat5__dev_free(ctx, dA);
    fat5__dev_free(ctx, dB);
    fat5__dev_free(ctx, dC);
    free(A), free(B), free(C0), free(got), free(ref), free(mag), free(Ab), free(Bb), free(h16);
}

static void gd_mm_lt_all(fat5_test *T, fat5_dtype dt, int lt_off) {
    static const int64_t sizes[8] = {1029, 1100, 1200, 1280, GD_LT_MAXF, 1100, 1100, 1100};
    static const int a_offs[8] = {0, 0, 0, 0, 0, 1, 0, 0}, c_offs[8] = {0, 0, 0, 0, 0, 0, 1, 0};
    static const int queries[8] = {1, 0, 0, 0, 1, 1, 1, 0};
    static const int64_t bsizes[4] = {1029, 1280, 1100, 1200};
    static const int bshared[4] = {1, 1, 0, 0}, bqueries[4] = {1, 0, 1, 0};
    fat5_ctx *ctx = NULL;
    gd_env e = gd_env_set("FAT5_CUBLASLT", lt_off ? "0" : NULL);
    int l, i;
    GD_OPEN(T, ctx, dt, NULL, NULL);
    if (lt_off)
        FAT5_CHECK_MSG(T, !ctx->gpu->lt_handle && strstr(ctx->gpu->lt_off, "FAT5_CUBLASLT=0"),
                       "FAT5_CUBLASLT=0: cuBLASLt still on (%s)", ctx->gpu->lt_off);
    else if (!ctx->gpu->lt_handle)
        printf("  (cuBLASLt off here: %s; the products run on cublasGemmEx)\n", ctx->gpu->lt_off);
    FAT5_CHECK_MSG(T, fat5__lt_class(1029) == 1280 && fat5__lt_class(1280) == 1280 && fat5__lt_class(1281) == 1536 &&
                   fat5__lt_class(4093) == 4096 && fat5__lt_class(64) == 64 && fat5__lt_class(65) == 80,
                   "size classes: 1029 -> %lld, 1281 -> %lld, 4093 -> %lld, 65 -> %lld", (long long)fat5__lt_class(1029),
                   (long long)fat5__lt_class(1281), (long long)fat5__lt_class(4093), (long long)fat5__lt_class(65));
    for (l = 0; l < 3; l++)
        for (i = 0; i < 8; i++)
            gd_mm_lt_case(T, ctx, dt, (fat5__mm_layout)l, 1, sizes[i], a_offs[i], c_offs[i], queries[i]);
    // bf16 outputs (other classes): a split-K product must sum its parts in fp32, then round once
    for (l = 0; l < 3 && dt == FAT5_DTYPE_BF16; l++)
        for (i = 0; i < 8; i++)
            gd_mm_lt_case(T, ctx, dt, (fat5__mm_layout)l, 0, sizes[i], a_offs[i], c_offs[i], queries[i]);
    for (l = 0; l < 3; l++)
        for (i = 0; i < 4; i++) gd_mm_lt_batched(T, ctx, dt, (fat5__mm_layout)l, bsizes[i], bshared[i], bqueries[i]);
    fat5_ctx_destroy(ctx);
    gd_env_restore(&e);
}

static void t_gpu_dev_mm_lt(fat5_test *T) {
    gd_mm_lt_all(T, FAT5_DTYPE_BF16, 0);
    if (!T->skipped) gd_mm_lt_all(T, FAT5_DTYPE_FP32, 0);
    if (!T->skipped) gd_mm_lt_all(T, FAT5_DTYPE_BF16, 1);
}

// fat5__gpu_mm_batched (one cuBLASLt call, where cuBLASLt is on): three products of every layout, A shared (stride 0, as
// the q | k | v projections read one input) or strided, B strided, outputs with a gap between them
// (which must stay untouched), fp32 and bf16 inputs, fp32 output accumulating onto C (beta 1, as
// the weight gradients); each product against the CPU's, with gd_mm_case's bound.
static void gd_mm_batched(fat5_test *T, fat5_dtype dt) {
    enum { M = 37, N = 19, K = 45, NB = 3, GAP = 5 };
    static float A[NB * M * K], B[NB * N * K], C0[NB * (M * N + GAP)], got[NB * (M * N + GAP)], ref[M * N], mag[M * N];
    static float Ab[M * K], Bb[N * K];
    static uint16_t h16[NB * M * K];  // M > N: room for A and for B
    fat5_ctx *ctx = NULL;
    fat5__dptr dA = 0, dB = 0, dC = 0;
    int bf16 = dt == FAT5_DTYPE_BF16, l, shared, b, i;
    size_t act = bf16 ? 2 : 4;
    const int64_t sC = M * N + GAP;
    fat5_rng r = fat5_rng_init(4321);
    GD_OPEN(T, ctx, dt, NULL, NULL);
    for (i = 0; i < NB * M * K; i++) A[i] = gd_round_bf16((float)fat5_rng_normal(&r));
    for (i = 0; i < NB * N * K; i++) B[i] = gd_round_bf16((float)fat5_rng_normal(&r));
    for (i = 0; i < NB * sC; i++) C0[i] = (float)fat5_rng_normal(&r);
    GD_OK(T, ctx, fat5__dev_alloc(ctx, NB * M * K * act, &dA));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, NB * N * K * act, &dB));
    GD_OK(T, ctx, fat5__dev_alloc(ctx, (size_t)(NB * sC) * 4, &dC));
    GD_OK(T, ctx, gd_upload_as(ctx, dA, A, NB * M * K, bf16, h16));
    GD_OK(T, ctx, gd_upload_as(ctx, dB, B, NB * N * K, bf16, h16));
    for (l = 0; l < 3; l++)
        for (shared = 0; shared < 2; shared++) {
            int64_t sA = shared ? 0 : M * K;
            int bad = 0;
            long long c0 = ctx->gpu->lt_calls;
            GD_OK(T, ctx, fat5__dev_upload(ctx, dC, C0, (size_t)(NB * sC) * 4));
            GD_OK(T, ctx, fat5__gpu_mm_batched(ctx, (fat5__mm_layout)l, dC, 1, dA, dB, M, N, K, 0.75f, 1.0f, NB, sA,
                                               N * K, sC));
            FAT5_CHECK_MSG(T, ctx->gpu->lt_calls - c0 == (ctx->gpu->lt_handle ? 1 : 0),
                           "%s layout %d, A %s: %lld cuBLASLt calls for the batch (want one when it is on)",
                           bf16 ? "bf16" : "fp32", l, shared ? "shared" : "strided", ctx->gpu->lt_calls - c0);
            GD_OK(T, ctx, fat5__dev_download(ctx, got, dC, (size_t)(NB * sC) * 4));
            for (b = 0; b < NB; b++) {
                const float *a = A + b * sA, *bb = B + b * N * K;
                for (i = 0; i < M * K; i++) Ab[i] = fabsf(a[i]);
                for (i = 0; i < N * K; i++) Bb[i] = fabsf(bb[i]);
                fat5__cpu_mm(ctx, (fat5__mm_layout)l, A_(ref), 1, A_(a), A_(bb), M, N, K, 1.0f, 0.0f);
                fat5__cpu_mm(ctx, (fat5__mm_layout)l, A_(mag), 1, A_(Ab), A_(Bb), M, N, K, 1.0f, 0.0f);
                for (i = 0; i < M * N; i++) {
                    double want = 0.75 * ref[i] + C0[b * sC + i];
                    if (!(fabs(got[b * sC + i] - want) <= 1e-5 * (0.75 * mag[i] + fabs(C0[b * sC + i])) + 1e-30)) bad++;
                }
                for (i = M * N; i < sC; i++) bad += got[b * sC + i] != C0[b * sC + i];  // the gap
            }
            FAT5_CHECK_MSG(T, bad == 0, "%s layout %d, A %s: %d elements off", bf16 ? "bf16" : "fp32", l,
                           shared ? "shared" : "strided", bad);
        }
done:
    fat5__dev_free(ctx, dA);
    fat5__dev_free(ctx, dB);
    fat5__dev_free(ctx, dC);
    fat5_ctx_destroy(ctx);
}

static void t_gpu_dev_mm_batched(fat5_test *T) {
    gd_mm_batched(T, FAT5_DTYPE_FP32);
    if (!T->skipped) gd_mm_batched(T, FAT5_DTYPE_BF16);
}

// ---------------------------------------------------------------------------------------------
// target choice and cache directory (pure logic)

static void t_gpu_dev_arch_and_cache_dir(fat5_test *T) {
    static const int archs[] = {75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121};
    static const int no_sm10x[] = {80, 90, 120};
    char a[24], dir[512];
    int ptx = -1;
    fat5_ctx *ctx = NULL;
    gd_env e1, e2, e3;
    FAT5_CHECK(T, fat5__dev_pick_arch(90, archs, 11, a, sizeof a, &ptx) == 0 && !strcmp(a, "sm_90") && !ptx);
    FAT5_CHECK(T, fat5__dev_pick_arch(86, archs, 11, a, sizeof a, &ptx) == 0 && !strcmp(a, "sm_86") && !ptx);
    // a minor that NVRTC does not list: the newest cubin of the same major still runs
    FAT5_CHECK(T, fat5__dev_pick_arch(88, archs, 11, a, sizeof a, &ptx) == 0 && !strcmp(a, "sm_87") && !ptx);
    FAT5_CHECK(T, fat5__dev_pick_arch(104, archs, 11, a, sizeof a, &ptx) == 0 && !strcmp(a, "sm_103") && !ptx);
    // newer than NVRTC knows: PTX of its newest target
    FAT5_CHECK(T, fat5__dev_pick_arch(130, archs, 11, a, sizeof a, &ptx) == 0 && !strcmp(a, "compute_121") && ptx);
    FAT5_CHECK(T, fat5__dev_pick_arch(100, no_sm10x, 3, a, sizeof a, &ptx) == 0 && !strcmp(a, "compute_90") && ptx);
    FAT5_CHECK(T, fat5__dev_pick_arch(70, archs, 11, a, sizeof a, &ptx) == -1);

    FAT5_REQUIRE(T, gd_create(&ctx, FAT5_DEVICE_CPU, FAT5_DTYPE_FP32, NULL, NULL) == FAT5_OK);
    e1 = gd_env_set("FAT5_CACHE_DIR", NULL);
    e2 = gd_env_set("XDG_CACHE_HOME", "/xdg");
    e3 = gd_env_set("HOME", "/home/u");
    FAT5_CHECK(T, fat5__dev_cache_dir(ctx, dir, sizeof dir) && !strcmp(dir, "/xdg/fat5"));
    setenv("XDG_CACHE_HOME", "relative", 1);  // ignored, as the XDG spec says
    FAT5_CHECK(T, fat5__dev_cache_dir(ctx, dir, sizeof dir) && !strcmp(dir, "/home/u/.cache/fat5"));
    unsetenv("XDG_CACHE_HOME");
    FAT5_CHECK(T, fat5__dev_cache_dir(ctx, dir, sizeof dir) && !strcmp(dir, "/home/u/.cache/fat5"));
    setenv("FAT5_CACHE_DIR", "/env/cache", 1);
    FAT5_CHECK(T, fat5__dev_cache_dir(ctx, dir, sizeof dir) && !strcmp(dir, "/env/cache"));
    setenv("FAT5_CACHE_DIR", "", 1);
    FAT5_CHECK(T, !fat5__dev_cache_dir(ctx, dir, sizeof dir));
    ctx->cfg.cache_dir = "/cfg/cache";
    FAT5_CHECK(T, fat5__dev_cache_dir(ctx, dir, sizeof dir) && !strcmp(dir, "/cfg/cache"));
    ctx->cfg.cache_dir = "";
    setenv("FAT5_CACHE_DIR", "/env/cache", 1);
    FAT5_CHECK(T, !fat5__dev_cache_dir(ctx, dir, sizeof dir));
    ctx->cfg.cache_dir = NULL;
    unsetenv("FAT5_CACHE_DIR");
    unsetenv("HOME");
    FAT5_CHECK(T, !fat5__dev_cache_dir(ctx, dir, sizeof dir));
    gd_env_restore(&e3);
    gd_env_restore(&e2);
    gd_env_restore(&e1);
    fat5_ctx_destroy(ctx);
}

// ---------------------------------------------------------------------------------------------
// (d) the kernel cache: a second build hits; a corrupted or truncated file is rejected and replaced

// Flips one payload byte (mode 0) or cuts the file in half (mode 1).
static int gd_damage(fat5_test *T, const char *path, int mode) {
    char *buf = NULL;
    size_t len = 0;
    int ok;
    if (fat5__read_file(fat5_test_ctx(T), path, (size_t)1 << 30, &buf, &len) != FAT5_OK || len < 100) {
        fat5__free(NULL, buf);
        return 0;
    }
    if (mode == 0) buf[len - len / 3] ^= 0x10;
    ok = gd_write(path, buf, mode == 0 ? len : len / 2);
    fat5__free(NULL, buf);
    return ok;
}

static int gd_write_kernels_as(const char *dir, int broken, const char **broken_name, int stub);

// The cache logic on stand-in kernel files (FAT5_KERNELS_DIR), so that each miss is a quick compile.
static void t_gpu_dev_cache_offline(fat5_test *T) {
    char dir[600], kdir[600], file[1024], file2[1024];
    const char *unused = NULL;
    fat5_ctx *ctx = NULL;
    fat5_status st;
    int hit = -1, rej = -1, mode, wg_off;
    gd_env kd;
    snprintf(dir, sizeof dir, "%s/kcache/sub", fat5_test_tmpdir(T));  // created on first write
    snprintf(kdir, sizeof kdir, "%s/kernels", fat5_test_tmpdir(T));
    FAT5_REQUIRE(T, mkdir(kdir, 0755) == 0 && gd_write_kernels_as(kdir, -1, &unused, 1) == 1);
    FAT5_REQUIRE(T, gd_create(&ctx, FAT5_DEVICE_CPU, FAT5_DTYPE_FP32, dir, NULL) == FAT5_OK);
    kd = gd_env_set("FAT5_KERNELS_DIR", kdir);
    st = fat5__dev_build_offline(ctx, 90, &hit, &rej, file, sizeof file);
    if (st == FAT5_ERR_NO_DEVICE) {
        char r[256];
        snprintf(r, sizeof r, "NVRTC not available: %.200s", fat5_last_error(ctx));
        fat5_ctx_destroy(ctx);
        gd_env_restore(&kd);
        FAT5_SKIP(T, r);
    }
    FAT5_CHECK_MSG(T, st == FAT5_OK, "first build -> %s: %s", fat5_status_string(st), fat5_last_error(ctx));
    if (st != FAT5_OK) goto done;
    FAT5_CHECK(T, hit == 0 && rej == 0);
    // sm_90's program is compiled for sm_90a (attention_wg.cu's kernels), for plain sm_90 with
    // FAT5_ATTN_WG=0
    wg_off = getenv("FAT5_ATTN_WG") && !strcmp(getenv("FAT5_ATTN_WG"), "0");
    FAT5_CHECK_MSG(T, strncmp(file, dir, strlen(dir)) == 0 && strstr(file, wg_off ? "-sm_90.cubin" : "-sm_90a.cubin") &&
                          gd_file_exists(file), "cache file '%s'", file);
    GD_OK(T, ctx, fat5__dev_build_offline(ctx, 90, &hit, &rej, file2, sizeof file2));
    FAT5_CHECK_MSG(T, hit == 1 && rej == 0 && !strcmp(file, file2), "second build: hit %d, rejected %d", hit, rej);
    for (mode = 0; mode < 2; mode++) {
        FAT5_REQUIRE(T, gd_damage(T, file, mode));
        GD_OK(T, ctx, fat5__dev_build_offline(ctx, 90, &hit, &rej, file2, sizeof file2));
        FAT5_CHECK_MSG(T, hit == 0 && rej == 1, "%s file: hit %d, rejected %d", mode ? "truncated" : "corrupted",
                       hit, rej);
        GD_OK(T, ctx, fat5__dev_build_offline(ctx, 90, &hit, &rej, file2, sizeof file2));
        FAT5_CHECK_MSG(T, hit == 1 && rej == 0, "after rewriting the %s file: hit %d, rejected %d",
                       mode ? "truncated" : "corrupted", hit, rej);
    }
    // the dtype (an option) is in the key
    ctx->cfg.dtype = FAT5_DTYPE_BF16;
    GD_OK(T, ctx, fat5__dev_build_offline(ctx, 90, &hit, &rej, file2, sizeof file2));
    FAT5_CHECK_MSG(T, hit == 0 && strcmp(file, file2) != 0 && gd_file_exists(file2), "bf16 build: hit %d, file %s", hit, file2);
    // "" turns the cache off (fat5__dev_cache_dir is tested above; this is the end to end check)
    ctx->cfg.cache_dir = "";
    GD_OK(T, ctx, fat5__dev_build_offline(ctx, 90, &hit, &rej, file2, sizeof file2));
    FAT5_CHECK(T, hit == 0 && file2[0] == 0);
    // sm_75 is refused (bf16 needs sm_80)
    FAT5_CHECK(T, fat5__dev_build_offline(ctx, 75, &hit, &rej, file2, sizeof file2) == FAT5_ERR_UNSUPPORTED);
    FAT5_CHECK_MSG(T, strstr(fat5_last_error(ctx), "sm_75") != NULL, "%s", fat5_last_error(ctx));
done:
    gd_env_restore(&kd);
    fat5_ctx_destroy(ctx);
}

static void t_gpu_dev_cache(fat5_test *T) {
    char dir[600], file[1024];
    fat5_ctx *ctx = NULL;
    gd_log log;
    int round;
    snprintf(dir, sizeof dir, "%s/kcache", fat5_test_tmpdir(T));
    GD_OPEN(T, ctx, FAT5_DTYPE_BF16, dir, &log);
    FAT5_CHECK_MSG(T, !ctx->gpu->cache_hit && ctx->gpu->cache_file[0] && strstr(log.text, "compiled for"),
                   "first open: hit %d, log:\n%s", ctx->gpu->cache_hit, log.text);
    snprintf(file, sizeof file, "%s", ctx->gpu->cache_file);
    fat5_ctx_destroy(ctx);
    ctx = NULL;
    for (round = 0; round < 3; round++) {
        // 0: clean hit; 1: after corrupting the file, rejected and recompiled; 2: hit again
        if (round == 1) FAT5_REQUIRE(T, gd_damage(T, file, 0));
        GD_OK(T, ctx, gd_create(&ctx, FAT5_DEVICE_GPU, FAT5_DTYPE_BF16, dir, &log));
        FAT5_CHECK_MSG(T, ctx->gpu->cache_hit == (round != 1) && ctx->gpu->cache_rejected == (round == 1),
                       "round %d: hit %d, rejected %d, log:\n%s", round, ctx->gpu->cache_hit,
                       ctx->gpu->cache_rejected, log.text);
        FAT5_CHECK(T, !strcmp(file, ctx->gpu->cache_file));
        if (round != 1) FAT5_CHECK_MSG(T, strstr(log.text, "from the cache") != NULL, "%s", log.text);
        fat5_ctx_destroy(ctx);
        ctx = NULL;
    }
done:
    fat5_ctx_destroy(ctx);
}

// ---------------------------------------------------------------------------------------------
// (e) FAT5_KERNELS_DIR and compile errors: the NVRTC log, naming the file and line, reaches
// fat5_last_error with the target and options

// Writes every embedded kernel file into dir; the one at index `broken` gets a bad last line.
// Returns that line's number (or 0 on failure). With stub set, each file holds one tiny kernel
// instead of its real text: the offline cache and error tests then exercise the same NVRTC, cache
// and message paths in a second rather than a full compile each (make check-kernels compiles the
// real program for every variant and target).
static int gd_write_kernels_as(const char *dir, int broken, const char **broken_name, int stub) {
    int k, line = 0;
    for (k = 0; fat5__kernel_files[k].name; k++) {
        char path[1024];
        FILE *f;
        int i;
        snprintf(path, sizeof path, "%s/%s", dir, fat5__kernel_files[k].name);
        if (!(f = fopen(path, "wb"))) return 0;
        if (stub) {
            fprintf(f, "// stand-in for %s\n", fat5__kernel_files[k].name);
            fprintf(f, "extern \"C\" __global__ void fat5_stub_%d(float *p) {\n", k);
            fprintf(f, "    p[threadIdx.x] = FAT5_ACT_BF16 + %d.0f;\n}\n", k);
            i = 4;
        } else {
            for (i = 0; fat5__kernel_files[k].lines[i]; i++) fputs(fat5__kernel_files[k].lines[i], f);
        }
        if (k == broken) {
            fputs("int fat5_broken_line = fat5_undefined_symbol_xyz;\n", f);
            line = i + 1;
            *broken_name = fat5__kernel_files[k].name;
        }
        if (fclose(f) != 0) return 0;
    }
    return broken < 0 ? 1 : line;
}
static int gd_write_kernels(const char *dir, int broken, const char **broken_name) {
    return gd_write_kernels_as(dir, broken, broken_name, 0);
}

static void t_gpu_dev_compile_error_offline(fat5_test *T) {
    char dir[600], want[700];
    const char *bad_name = NULL, *msg;
    fat5_ctx *ctx = NULL;
    fat5_status st;
    int line, hit, rej;
    gd_env kd;
    snprintf(dir, sizeof dir, "%s/kernels", fat5_test_tmpdir(T));
    FAT5_REQUIRE(T, mkdir(dir, 0755) == 0);
    FAT5_REQUIRE(T, gd_create(&ctx, FAT5_DEVICE_CPU, FAT5_DTYPE_FP32, "", NULL) == FAT5_OK);
    kd = gd_env_set("FAT5_KERNELS_DIR", dir);
    // an empty directory: the missing file is named
    st = fat5__dev_build_offline(ctx, 80, &hit, &rej, NULL, 0);
    if (st == FAT5_ERR_NO_DEVICE) {
        char r[256];
        snprintf(r, sizeof r, "NVRTC not available: %.200s", fat5_last_error(ctx));
        fat5_ctx_destroy(ctx);
        gd_env_restore(&kd);
        FAT5_SKIP(T, r);
    }
    FAT5_CHECK_MSG(T, st == FAT5_ERR_IO && strstr(fat5_last_error(ctx), "FAT5_KERNELS_DIR") &&
                          strstr(fat5_last_error(ctx), fat5__kernel_files[0].name),
                   "empty FAT5_KERNELS_DIR -> %s: %s", fat5_status_string(st), fat5_last_error(ctx));
    // an intact copy compiles
    FAT5_REQUIRE(T, gd_write_kernels_as(dir, -1, &bad_name, 1) == 1);
    st = fat5__dev_build_offline(ctx, 80, &hit, &rej, NULL, 0);
    FAT5_CHECK_MSG(T, st == FAT5_OK, "intact copy -> %s: %s", fat5_status_string(st), fat5_last_error(ctx));
    // a broken copy: FAT5_ERR_NVRTC with the log line "<dir>/<file>(<line>): error ..."
    line = gd_write_kernels_as(dir, 0, &bad_name, 1);
    FAT5_REQUIRE(T, line > 0 && bad_name != NULL);
    st = fat5__dev_build_offline(ctx, 80, &hit, &rej, NULL, 0);
    msg = fat5_last_error(ctx);
    snprintf(want, sizeof want, "%s/%s(%d)", dir, bad_name, line);
    FAT5_CHECK_MSG(T, st == FAT5_ERR_NVRTC, "broken copy -> %s: %s", fat5_status_string(st), msg);
    FAT5_CHECK_MSG(T, strstr(msg, want) && strstr(msg, "fat5_undefined_symbol_xyz") && strstr(msg, "error"),
                   "the message lacks the NVRTC log line '%s...': %s", want, msg);
    FAT5_CHECK_MSG(T, strstr(msg, "sm_80") && strstr(msg, "-DFAT5_ACT_BF16=0") && strstr(msg, "--std=c++17"),
                   "the message lacks the target and options: %s", msg);
    gd_env_restore(&kd);
    fat5_ctx_destroy(ctx);
}

static void t_gpu_dev_compile_error(fat5_test *T) {
    char dir[600], want[700];
    const char *bad_name = NULL, *msg;
    fat5_ctx *ctx = NULL;
    fat5_status st;
    int line;
    gd_env kd;
    snprintf(dir, sizeof dir, "%s/kernels", fat5_test_tmpdir(T));
    FAT5_REQUIRE(T, mkdir(dir, 0755) == 0);
    line = gd_write_kernels(dir, 0, &bad_name);
    FAT5_REQUIRE(T, line > 0);
    kd = gd_env_set("FAT5_KERNELS_DIR", dir);
    st = gd_create(&ctx, FAT5_DEVICE_GPU, FAT5_DTYPE_BF16, "", NULL);
    gd_env_restore(&kd);
    if (st == FAT5_ERR_NO_DEVICE) {
        char r[256];
        snprintf(r, sizeof r, "no CUDA device: %.200s", gd_why);
        FAT5_SKIP(T, r);
    }
    msg = gd_why;
    snprintf(want, sizeof want, "%s/%s(%d)", dir, bad_name, line);
    FAT5_CHECK_MSG(T, st == FAT5_ERR_NVRTC, "GPU open with a broken kernel -> %s: %s", fat5_status_string(st), msg);
    FAT5_CHECK_MSG(T, strstr(msg, want) && strstr(msg, "fat5_undefined_symbol_xyz") && strstr(msg, "-DFAT5_ACT_BF16=1"),
                   "the message lacks the NVRTC log line '%s...' or the options: %s", want, msg);
    FAT5_CHECK(T, ctx == NULL);
    fat5_ctx_destroy(ctx);
}


// What the GPU backend answers the layers above, and the kernel switches as fat5_ctx_config
// fields (the environment only their fallback): device memory, queued work, per-block bias
// partials, the bf16 peak, the device's memory, an empty recording replayed; mm_rows 0: no fused
// rows; cublaslt 0: cuBLASLt off and why; attn_tc 0, pdl 0, sync_launches 1 taken as given.
static void t_gpu_backend_answers(fat5_test *T) {
    fat5_ctx_config c = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    const fat5__backend *be;
    size_t fr = 0, tot = 0;
    void *exec = NULL;
    c.device = FAT5_DEVICE_GPU;
    c.dtype = FAT5_DTYPE_BF16;
    if (fat5_ctx_create(&c, &ctx, gd_why, sizeof gd_why) == FAT5_ERR_NO_DEVICE) {
        char r[256];
        snprintf(r, sizeof r, "no CUDA device: %.200s", gd_why);
        FAT5_SKIP(T, r);
    }
    FAT5_CHECK_MSG(T, ctx != NULL, "GPU context: %s", gd_why);
    if (!ctx) return;
    be = fat5__backend_of(ctx);
    FAT5_CHECK(T, be == &fat5__gpu_backend && !be->host_memory && be->queued && be->dbias_partials);
    FAT5_CHECK(T, be->act_size(ctx) == 2 && be->peak_flops(ctx) == 989e12 && be->fused_rows(ctx) > 0);
    FAT5_CHECK(T, be->mem_info(ctx, &fr, &tot) == FAT5_OK);
    FAT5_CHECK(T, tot > ((size_t)1 << 30) && fr <= tot);
    if (ctx->gpu->sync_launches) {   // FAT5_SYNC_LAUNCHES in the environment: no recording
        FAT5_CHECK(T, be->capture_begin(ctx) == FAT5_ERR_UNSUPPORTED);
    } else {
        FAT5_CHECK(T, be->capture_begin(ctx) == FAT5_OK);
        FAT5_CHECK_MSG(T, be->capture_end(ctx, 1, &exec) == FAT5_OK && exec != NULL, "%s", fat5_last_error(ctx));
        FAT5_CHECK(T, exec && be->graph_launch(ctx, exec) == FAT5_OK && be->sync(ctx) == FAT5_OK);
        be->graph_destroy(ctx, exec);
    }
    FAT5_CHECK(T, ctx->gpu->attn_tc == fat5__dev_switch(0, "FAT5_ATTN_TC", 1));
    fat5_ctx_destroy(ctx);
    ctx = NULL;
    c.mm_rows = -1;
    c.cublaslt = -1;
    c.attn_tc = -1;
    c.pdl = -1;
    c.sync_launches = 1;
    FAT5_CHECK_MSG(T, fat5_ctx_create(&c, &ctx, gd_why, sizeof gd_why) == FAT5_OK, "GPU context: %s", gd_why);
    if (!ctx) return;
    be = fat5__backend_of(ctx);
    FAT5_CHECK(T, be->fused_rows(ctx) == 0 && ctx->gpu->mm_rows == 0);
    FAT5_CHECK_MSG(T, !ctx->gpu->lt_handle && strstr(ctx->gpu->lt_off, "cublaslt off"), "cuBLASLt: %s", ctx->gpu->lt_off);
    FAT5_CHECK(T, !ctx->gpu->attn_tc && !ctx->gpu->pdl && ctx->gpu->sync_launches);
    FAT5_CHECK(T, be->capture_begin(ctx) == FAT5_ERR_UNSUPPORTED);   // nothing to record with sync_launches
    fat5_ctx_destroy(ctx);
}

#endif  // FAT5_NO_CUDA

// The library search (no device needed): the directories in order, each name in each; an absent
// file is listed under "not found", any other dlopen failure (here a file that is no ELF) is
// reported with dlerror's text; the first that opens wins. Then NCCL: where libnccl.so.2 is
// installed it opens with all its entry points, else the error lists NCCL_HOME's directory.
static void t_gpu_dev_dlopen_search(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char a[600], b[600], bad[700], path[700], dl[2048];
    const char *dirs[3], *names[2] = {"libfat5_none.so.1", "libfat5_bad.so.1"}, *libc[1] = {"libc.so.6"};
    fat5__sb errs;
    fat5__nccl n;
    FILE *f;
    void *lib;
    fat5_status st;
    gd_env home;
    snprintf(a, sizeof a, "%s/dl_a/", fat5_test_tmpdir(T));
    snprintf(b, sizeof b, "%s/dl_b/", fat5_test_tmpdir(T));
    FAT5_REQUIRE(T, mkdir(a, 0755) == 0 && mkdir(b, 0755) == 0);
    snprintf(bad, sizeof bad, "%slibfat5_bad.so.1", b);
    FAT5_REQUIRE(T, (f = fopen(bad, "w")) != NULL);
    fputs("not a shared object\n", f);
    fclose(f);
    dirs[0] = a, dirs[1] = b;
    fat5__sb_init(&errs, ctx);
    lib = fat5__dev_dlopen_in(&errs, dirs, 2, names, 2, path, sizeof path);
    FAT5_CHECK(T, lib == NULL && path[0] == 0 && errs.buf);
    snprintf(dl, sizeof dl, "not found: %slibfat5_none.so.1, %slibfat5_bad.so.1, %slibfat5_none.so.1;", a, a, b);
    FAT5_CHECK_MSG(T, errs.buf && strncmp(errs.buf, dl, strlen(dl)) == 0 && strstr(errs.buf, bad) &&
                          !strstr(errs.buf + strlen(dl), "No such file"),
                   "%s", errs.buf ? errs.buf : "(nothing)");
    fat5__sb_free(&errs);
    dirs[0] = a, dirs[1] = "";   // the bare name: the loader's own search
    fat5__sb_init(&errs, ctx);
    lib = fat5__dev_dlopen_in(&errs, dirs, 2, libc, 1, path, sizeof path);
    FAT5_CHECK_MSG(T, lib != NULL && strcmp(path, "libc.so.6") == 0, "%s", errs.buf ? errs.buf : path);
    if (lib) dlclose(lib);
    fat5__sb_free(&errs);
    home = gd_env_set("NCCL_HOME", fat5_test_tmpdir(T));
    st = fat5__nccl_open(ctx, &n);
    if (st == FAT5_OK) {
        FAT5_CHECK(T, n.lib && n.path[0] && n.f.ncclAllReduce && n.f.ncclCommInitRank && n.f.ncclGetErrorString);
        printf("  NCCL: %s\n", n.path);
        dlclose(n.lib);
    } else {
        snprintf(dl, sizeof dl, "%s/lib/libnccl.so.2", fat5_test_tmpdir(T));
        FAT5_CHECK_MSG(T, st == FAT5_ERR_NO_DEVICE && strstr(fat5_last_error(ctx), "NCCL not found") &&
                              strstr(fat5_last_error(ctx), dl),
                       "%s: %s", fat5_status_string(st), fat5_last_error(ctx));
    }
    gd_env_restore(&home);
}

#define FAT5_TESTS_GPU_DEV(X)                                                                      \
    X(gpu_dev_dlopen_search) X(gpu_dev_open) X(gpu_dev_memory) X(gpu_dev_mm_fp32) X(gpu_dev_mm_bf16) X(gpu_dev_mm_lt) X(gpu_dev_mm_batched)                        \
    X(gpu_dev_arch_and_cache_dir) X(gpu_dev_cache_offline) X(gpu_dev_cache)                        \
    X(gpu_dev_compile_error_offline) X(gpu_dev_compile_error) X(gpu_backend_answers)
