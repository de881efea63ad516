// fat5_test.h — a tiny test runner for fat5.h (C99, header only).
//
// A test is `static void t_name(fat5_test *T)`; a table lists them:
//     #define MY_TESTS(X) X(rmsnorm_fwd) X(rmsnorm_bwd)
//     static const fat5_test_case cases[] = { MY_TESTS(FAT5_TEST_ENTRY) };
//     int main(int argc, char **argv) { return fat5_test_main(cases, n, argc, argv); }
// Output: one [ RUN ] line per test, then [ OK ] / [FAIL] / [SKIP]; the last line is exactly
// "N passed, N failed". The exit status is non-zero when any test failed. argv[1], when given,
// runs only the tests whose name contains it ("=NAME": only the test called NAME).
#ifndef FAT5_TEST_H
#define FAT5_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h>
#endif

typedef struct fat5_test {
    const char *name;
    int failed;            // number of failed checks
    int skipped;
    char skip_reason[256];
    char tmpdir[512];      // created on first use, removed after the test
    fat5_ctx *ctx;         // a CPU context, created on first use
} fat5_test;

typedef struct fat5_test_case {
    const char *name;
    void (*fn)(fat5_test *T);
} fat5_test_case;

#define FAT5_TEST_ENTRY(name) {#name, t_##name},

static void fat5_test_fail(fat5_test *T, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    T->failed++;
    fprintf(stdout, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

#define FAT5_CHECK(T, cond) \
    do { if (!(cond)) fat5_test_fail((T), __FILE__, __LINE__, "check failed: %s", #cond); } while (0)
#define FAT5_CHECK_MSG(T, cond, ...) \
    do { if (!(cond)) fat5_test_fail((T), __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define FAT5_REQUIRE(T, cond) \
    do { if (!(cond)) { fat5_test_fail((T), __FILE__, __LINE__, "required: %s", #cond); return; } } while (0)
#define FAT5_SKIP(T, reason) \
    do { (T)->skipped = 1; snprintf((T)->skip_reason, sizeof (T)->skip_reason, "%s", (reason)); return; } while (0)
// checks a fat5 call returns FAT5_OK, printing the library's message otherwise; returns from the test
#define FAT5_REQUIRE_OK(T, call) \
    do { fat5_status s_ = (call); if (s_ != FAT5_OK) { \
        fat5_test_fail((T), __FILE__, __LINE__, "%s -> %s: %s", #call, fat5_status_string(s_), \
                       fat5_last_error(fat5_test_ctx(T))); return; } } while (0)

static fat5_ctx *fat5_test_ctx(fat5_test *T) {
    if (!T->ctx) {
        fat5_ctx_config c = fat5_ctx_config_default();
        if (fat5_ctx_create(&c, &T->ctx, NULL, 0) != FAT5_OK) {
            fprintf(stderr, "cannot create a CPU context\n");
            exit(2);
        }
    }
    return T->ctx;
}

static const char *fat5_test_tmpdir(fat5_test *T) {
    if (!T->tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        char tmpl[512];
        snprintf(tmpl, sizeof tmpl, "%s/fat5_test_XXXXXX", base && base[0] ? base : "/tmp");
        if (!mkdtemp(tmpl)) {
            fprintf(stderr, "mkdtemp failed\n");
            exit(2);
        }
        snprintf(T->tmpdir, sizeof T->tmpdir, "%s", tmpl);
    }
    return T->tmpdir;
}

// |got - ref| <= atol + rtol * |ref| elementwise; prints the first 5 mismatches and the worst error.
static int fat5_check_close_at(fat5_test *T, const char *file, int line, const char *what,
                               const float *got, const float *ref, size_t n, double atol, double rtol) {
    size_t i, bad = 0, worst = 0;
    double max_abs = 0, max_ratio = 0;
    for (i = 0; i < n; i++) {
        // equal values match, infinities of the same sign included (a masked logit is -inf on both)
        double d = got[i] == ref[i] ? 0.0 : fabs((double)got[i] - (double)ref[i]);
        double tol = isinf(ref[i]) ? 0.0 : atol + rtol * fabs((double)ref[i]);  // an infinity must match exactly
        double ratio = d == 0 ? 0.0 : d / tol;
        if (d > max_abs) max_abs = d;
        if (!(ratio <= max_ratio)) { max_ratio = ratio; worst = i; }
        if (!(d <= tol)) {
            if (bad < 5)
                fprintf(stdout, "  %s[%zu]: got %.9g, want %.9g (|diff| %.3g > tol %.3g)\n", what, i,
                        (double)got[i], (double)ref[i], d, tol);
            bad++;
        }
    }
    if (bad) {
        fat5_test_fail(T, file, line, "%s: %zu of %zu elements differ; max |diff| %.3g, worst at [%zu]",
                       what, bad, n, max_abs, worst);
        return 0;
    }
    return 1;
}
#define fat5_check_close(T, what, got, ref, n, atol, rtol) \
    fat5_check_close_at((T), __FILE__, __LINE__, (what), (got), (ref), (n), (atol), (rtol))

static void fat5_test_rmtree(const char *dir) {
    char cmd[1100];
    if (!dir[0] || strncmp(dir, "/", 1) != 0 || !strstr(dir, "fat5_test_")) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static int fat5_test_main(const fat5_test_case *cases, size_t n, int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    size_t i;
    int passed = 0, failed = 0, skipped = 0;
    static char reasons[16][sizeof(((fat5_test *)0)->skip_reason)];
    size_t n_reasons = 0;
    unsigned shard = 0, shards = 1;   // FAT5_TEST_SHARD=i/n: only the tests whose index is i modulo n
    const char *sh = getenv("FAT5_TEST_SHARD");
    if (sh && (sscanf(sh, "%u/%u", &shard, &shards) != 2 || shards < 1 || shard >= shards)) {
        fprintf(stderr, "FAT5_TEST_SHARD=%s: expected i/n with i < n\n", sh);
        return 2;
    }
    for (i = 0; i < n; i++) {
        fat5_test T;
        if (i % shards != shard) continue;
        if (filter && (filter[0] == '=' ? strcmp(cases[i].name, filter + 1) != 0 : !strstr(cases[i].name, filter))) continue;
        memset(&T, 0, sizeof T);
        T.name = cases[i].name;
        fprintf(stdout, "[ RUN ] %s\n", T.name);
        fflush(stdout);
        cases[i].fn(&T);
        if (T.failed) {
            fprintf(stdout, "[FAIL] %s\n", T.name);
            failed++;
        } else if (T.skipped) {   // a reason is printed whole once; the skips it repeats refer to it
            size_t k;
            int seen = 0;
            for (k = 0; k < n_reasons && !seen; k++) seen = strcmp(reasons[k], T.skip_reason) == 0;
            if (seen) {
                fprintf(stdout, "[SKIP] %s: as above (reason %d)\n", T.name, (int)k);
            } else {
                if (n_reasons < sizeof reasons / sizeof reasons[0])
                    memcpy(reasons[n_reasons++], T.skip_reason, sizeof reasons[0]);
                fprintf(stdout, "[SKIP] %s: %s (reason %d)\n", T.name, T.skip_reason, (int)n_reasons);
            }
            skipped++;
        } else {
            fprintf(stdout, "[ OK ] %s\n", T.name);
            passed++;
        }
        fflush(stdout);
        fat5_ctx_destroy(T.ctx);
        if (T.tmpdir[0]) fat5_test_rmtree(T.tmpdir);
    }
    fprintf(stdout, "%d skipped\n", skipped);
    fprintf(stdout, "%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif // FAT5_TEST_H
