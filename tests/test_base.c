// Base layer: the counter-based RNG (known answers, saved state, distributions), allocator hooks,
// checked size arithmetic, status strings.

#ifndef FAT5_TEST_DATA
#define FAT5_TEST_DATA "tests/data"
#endif

static void t_rng_philox_known_answer(fat5_test *T) {
    // Philox4x32-10 with counter 0 and key 0 (the Random123 known-answer vector)
    uint32_t o[4];
    fat5_rng r = fat5_rng_init(0);
    fat5__philox(0, 0, o);
    FAT5_CHECK(T, o[0] == 0x6627e8d5u && o[1] == 0xe169c58du && o[2] == 0xbc57ac4cu && o[3] == 0x9b00dbd8u);
    // the stream is those words in order, then the next counter block
    FAT5_CHECK(T, fat5_rng_u32(&r) == 0x6627e8d5u && fat5_rng_u32(&r) == 0xe169c58du);
    FAT5_CHECK(T, fat5_rng_u64(&r) == (((uint64_t)0xbc57ac4cu << 32) | 0x9b00dbd8u));
    fat5__philox(0, 1, o);
    FAT5_CHECK(T, fat5_rng_u32(&r) == o[0] && r.counter == 5);
}

static void t_rng_save_restore(fat5_test *T) {
    fat5_rng a = fat5_rng_init(12345678901234567ull), b;
    char buf[48];
    uint64_t want[16];
    int i;
    for (i = 0; i < 7; i++) fat5_rng_normal(&a);
    fat5_rng_to_string(&a, buf);
    FAT5_REQUIRE_OK(T, fat5_rng_from_string(buf, &b));
    for (i = 0; i < 16; i++) want[i] = fat5_rng_u64(&a);
    for (i = 0; i < 16; i++) FAT5_CHECK_MSG(T, fat5_rng_u64(&b) == want[i], "draw %d differs after restore", i);
    FAT5_CHECK(T, fat5_rng_from_string("12:", &b) == FAT5_ERR_FORMAT);
    FAT5_CHECK(T, fat5_rng_from_string("12", &b) == FAT5_ERR_FORMAT);
    FAT5_CHECK(T, fat5_rng_from_string("-1:2", &b) == FAT5_ERR_FORMAT);
    FAT5_CHECK(T, fat5_rng_from_string("18446744073709551616:0", &b) == FAT5_ERR_FORMAT);
    FAT5_CHECK(T, fat5_rng_from_string("18446744073709551615:01", &b) == FAT5_ERR_FORMAT);
    FAT5_REQUIRE_OK(T, fat5_rng_from_string("18446744073709551615:0", &b));
    FAT5_CHECK(T, b.seed == UINT64_MAX && b.counter == 0);
    // different seeds give different streams
    a = fat5_rng_init(1);
    b = fat5_rng_init(2);
    FAT5_CHECK(T, fat5_rng_u64(&a) != fat5_rng_u64(&b));
}

// Means and variances of 200k draws within 5 standard errors; below() is uniform over a range
// that does not divide 2^64, checked with a chi-square test.
static void t_rng_distributions(fat5_test *T) {
    fat5_rng r = fat5_rng_init(99);
    const int n = 200000;
    double su = 0, suu = 0, sn = 0, snn = 0, chi = 0;
    int i, counts[7] = {0};
    for (i = 0; i < n; i++) {
        double u = fat5_rng_uniform(&r), z = fat5_rng_normal(&r);
        FAT5_CHECK(T, u >= 0 && u < 1);
        su += u;
        suu += u * u;
        sn += z;
        snn += z * z;
        counts[fat5_rng_below(&r, 7)]++;
    }
    FAT5_CHECK_MSG(T, fabs(su / n - 0.5) < 5 * sqrt(1.0 / 12 / n), "uniform mean %g", su / n);
    FAT5_CHECK_MSG(T, fabs(suu / n - su * su / n / n - 1.0 / 12) < 5e-3, "uniform variance %g", suu / n - su * su / n / n);
    FAT5_CHECK_MSG(T, fabs(sn / n) < 5 * sqrt(1.0 / n), "normal mean %g", sn / n);
    FAT5_CHECK_MSG(T, fabs(snn / n - 1) < 5 * sqrt(2.0 / n), "normal variance %g", snn / n);
    for (i = 0; i < 7; i++) chi += (counts[i] - n / 7.0) * (counts[i] - n / 7.0) / (n / 7.0);
    FAT5_CHECK_MSG(T, chi < 22.46, "below(7) chi-square %g (p < 0.001 at 6 degrees of freedom)", chi);
    FAT5_CHECK(T, fat5_rng_below(&r, 1) == 0 && fat5_rng_below(&r, 0) == 0);
}

static void t_checked_size_math(fat5_test *T) {
    size_t out = 0;
    FAT5_CHECK(T, fat5__mul_ok(SIZE_MAX / 3, 3, &out) && out == SIZE_MAX / 3 * 3);
    FAT5_CHECK(T, !fat5__mul_ok(SIZE_MAX / 2 + 1, 2, &out));
    FAT5_CHECK(T, !fat5__add_ok(SIZE_MAX, 1, &out));
    FAT5_CHECK(T, !fat5__mul3_ok((size_t)1 << 32, (size_t)1 << 32, 16, &out));
    FAT5_CHECK(T, fat5__calloc(NULL, SIZE_MAX / 4, 8) == NULL);
    FAT5_CHECK(T, strcmp(fat5_status_string(FAT5_ERR_FORMAT), "FAT5_ERR_FORMAT") == 0);
    FAT5_CHECK(T, strcmp(fat5_version(), FAT5_VERSION_STRING) == 0);
}

// A context with allocator hooks: every host allocation of a load / forward / backward / save
// goes through them, and everything is given back.
typedef struct tb_alloc { long live, calls; } tb_alloc;
static void *tb_malloc(void *u, size_t n) {
    tb_alloc *a = (tb_alloc *)u;
    a->live++;
    a->calls++;
    return malloc(n);
}
static void *tb_realloc(void *u, void *p, size_t n) {
    tb_alloc *a = (tb_alloc *)u;
    if (!p) a->live++;
    a->calls++;
    return realloc(p, n);
}
static void tb_free(void *u, void *p) {
    tb_alloc *a = (tb_alloc *)u;
    if (p) a->live--;
    free(p);
}
static void t_allocator_hooks(fat5_test *T) {
    tb_alloc a = {0, 0};
    fat5_ctx_config cc = fat5_ctx_config_default();
    fat5_ctx *ctx = NULL;
    fat5_model *m = NULL;
    fat5_batch b;
    char dir[600], why[512];
    cc.alloc = tb_malloc;
    cc.realloc = tb_realloc;
    cc.free = tb_free;
    cc.alloc_user = &a;
    FAT5_REQUIRE(T, fat5_ctx_create(&cc, &ctx, NULL, 0) == FAT5_OK);
    memset(&b, 0, sizeof b);
    snprintf(dir, sizeof dir, "%s/saved", fat5_test_tmpdir(T));
    if (fat5_model_load(ctx, FAT5_TEST_DATA "/umt5_gated_silu", &m) != FAT5_OK ||
        fat5_batch_from_json(ctx, "{\"inputs\": [[3, 4, 5]], \"labels\": [[6, 7]]}", 43, &b) != FAT5_OK ||
        fat5_model_forward(m, &b, NULL, NULL) != FAT5_OK || fat5_model_backward(m, 1.0f) != FAT5_OK ||
        fat5_model_save(m, dir) != FAT5_OK)
        FAT5_CHECK_MSG(T, 0, "%s", fat5_last_error(ctx));
    fat5_batch_destroy(ctx, &b);
    fat5_model_destroy(m);
    FAT5_CHECK(T, a.calls > 10);
    // what is left belongs to the context: itself and the CPU ops' scratch arena
    FAT5_CHECK_MSG(T, a.live == 2 && ctx->scratch, "%ld allocations outstanding besides the context and its scratch",
                   a.live - 2);
    fat5_ctx_destroy(ctx);
    FAT5_CHECK_MSG(T, a.live == 0, "%ld allocations outstanding", a.live);
    // hooks are all or none
    cc.realloc = NULL;
    // a failed create leaves nothing to destroy: *out NULL, the reason in err, nothing allocated
    ctx = (fat5_ctx *)&a;
    FAT5_CHECK(T, fat5_ctx_create(&cc, &ctx, why, sizeof why) == FAT5_ERR_INVALID_ARG && !ctx && strstr(why, "hooks"));
    FAT5_CHECK(T, a.live == 0);
    cc = fat5_ctx_config_default();
    cc.alloc = tb_malloc;   // the hooks that count
    cc.realloc = tb_realloc;
    cc.free = tb_free;
    cc.alloc_user = &a;
    cc.dtype = (fat5_dtype)9;
    FAT5_CHECK(T, fat5_ctx_create(&cc, &ctx, why, sizeof why) == FAT5_ERR_INVALID_ARG && !ctx && strstr(why, "dtype"));
    FAT5_CHECK(T, a.live == 0);
    cc.dtype = FAT5_DTYPE_FP32;
    cc.device = (fat5_device)5;
    FAT5_CHECK(T, fat5_ctx_create(&cc, &ctx, why, sizeof why) == FAT5_ERR_INVALID_ARG && !ctx && strstr(why, "device"));
    FAT5_CHECK(T, a.live == 0);
    // a short buffer is cut and terminated; no buffer at all is allowed
    FAT5_CHECK(T, fat5_ctx_create(&cc, &ctx, why, 8) == FAT5_ERR_INVALID_ARG && !ctx && strlen(why) == 7);
    FAT5_CHECK(T, fat5_ctx_create(&cc, &ctx, NULL, 0) == FAT5_ERR_INVALID_ARG && !ctx && a.live == 0);
    FAT5_CHECK(T, fat5_ctx_create(&cc, NULL, NULL, 0) == FAT5_ERR_INVALID_ARG);
}

// fat5_read_file: what fat5_write_file_atomic wrote, byte for byte and NUL-terminated; a file
// over the limit, a missing file and a directory refused with the path in the message
static void t_read_file(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char data[] = "{\"a\": 1}\n\0tail";   // a NUL inside: the length counts every byte
    char path[600], *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/read.json", fat5_test_tmpdir(T));
    FAT5_REQUIRE_OK(T, fat5_write_file_atomic(ctx, path, data, sizeof data - 1));
    FAT5_REQUIRE_OK(T, fat5_read_file(ctx, path, 1 << 10, &buf, &len));
    FAT5_CHECK(T, len == sizeof data - 1 && memcmp(buf, data, len) == 0 && buf[len] == 0);
    fat5_free(ctx, buf);
    buf = NULL;
    FAT5_CHECK(T, fat5_read_file(ctx, path, 4, &buf, &len) == FAT5_ERR_FORMAT && !buf &&
                  strstr(fat5_last_error(ctx), "read.json"));
    snprintf(path, sizeof path, "%s/missing.json", fat5_test_tmpdir(T));
    FAT5_CHECK(T, fat5_read_file(ctx, path, 1 << 10, &buf, &len) == FAT5_ERR_IO && !buf &&
                  strstr(fat5_last_error(ctx), "missing.json"));
    FAT5_CHECK(T, fat5_read_file(ctx, fat5_test_tmpdir(T), 1 << 10, &buf, &len) == FAT5_ERR_IO && !buf);
}

// fat5__wall_time's calendar against the C library's gmtime_r, for now and around now
static void t_wall_time(fat5_test *T) {
    int tries;
    for (tries = 0; tries < 3; tries++) {
        char iso[32], want[32];
        double u;
        time_t now;
        struct tm tmv;
        fat5__wall_time(iso, &u);
        now = (time_t)u;
        FAT5_REQUIRE(T, gmtime_r(&now, &tmv) != NULL);
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tmv);
        FAT5_CHECK_MSG(T, strncmp(iso, want, 19) == 0 && strlen(iso) == 24 && iso[23] == 'Z', "%s vs %s", iso, want);
        FAT5_CHECK(T, fabs(u - (double)time(NULL)) < 2);
    }
}

#define FAT5_TESTS_BASE(X) X(rng_philox_known_answer) X(rng_save_restore) X(rng_distributions) \
    X(checked_size_math) X(allocator_hooks) X(read_file) X(wall_time)
