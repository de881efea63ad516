// Checkpoint saves cut short at every file-system call. The library makes each call that changes a
// file (mkdir, create, chmod, write, fsync, close, rename, unlink, rmdir, and the open of a
// directory to sync it) through its fat5__fs_* wrappers, which ask fat5__fs_fault first when the
// test runner is built with FAT5_TEST_FAULTS (tests/test_main.c defines it). The same save is run
// again and again from the same starting directory, its Nth call made to crash it (a forked child
// ends there with _exit, as a kill -9 would leave things) or to fail (ENOSPC, as on a full disk),
// for N = 1, 2, ... until a save completes without reaching N. Two saves are cut: a save of a new
// step that prunes the previous checkpoint (save_total_limit 1), and a save of a step that has a
// checkpoint already. After each cut: every step-N directory is whole (its files, and it loads),
// so is any .old-step-N (a start puts it back under its name), `latest` names a checkpoint that
// loads, a trainer resuming from the output directory leaves no temporary behind and its next
// step's loss is the one a run that never stopped has, bit for bit. A failed save returns an error
// naming the file and the system's reason, leaves `latest` as it was (unless what failed is the
// sync of the new one) and the checkpoint it names, and the next save succeeds. A last test checks
// the order of a save's calls against what a power loss keeps (data synced before it is named,
// names synced before they are pointed to or anything older is deleted). The output directory is
// in /dev/shm where there is one: the calls are the same, and the syncs cost nothing.
#include <signal.h>
#include <sys/wait.h>

#define TC_MAX_CALLS 512
#define TC_CRASHED 77   // the exit status of a child that crashed at its Nth call

typedef struct tc_call {
    char op[8];
    char path[600], path2[600];
} tc_call;

// the hook's state: what it does at the tc_at-th call, the calls counted and logged
enum { TC_COUNT, TC_CRASH, TC_FAIL };
static int tc_mode, tc_at, tc_calls;
static tc_call tc_trace[TC_MAX_CALLS];

static int tc_hook(const char *op, const char *path, const char *path2) {
    if (tc_calls < TC_MAX_CALLS) {
        tc_call *c = &tc_trace[tc_calls];
        snprintf(c->op, sizeof c->op, "%s", op);
        snprintf(c->path, sizeof c->path, "%s", path ? path : "");
        snprintf(c->path2, sizeof c->path2, "%s", path2 ? path2 : "");
    }
    if (++tc_calls != tc_at) return 0;
    if (tc_mode == TC_CRASH) _exit(TC_CRASHED);
    return tc_mode == TC_FAIL ? ENOSPC : 0;
}

static void tc_hook_on(int mode, int at) {
    tc_mode = mode;
    tc_at = at;
    tc_calls = 0;
    fat5__fs_fault = tc_hook;
}
static void tc_hook_off(void) { fat5__fs_fault = NULL; }

// --- a directory's files, kept in memory and put back

typedef struct tc_snap {
    char rel[32][96];   // "name" or "dir/name"; a directory's entry comes before its files
    char *data[32];     // NULL for a directory
    size_t len[32];
    int n;
} tc_snap;

static void tc_snap_free(tc_snap *s) {
    int i;
    for (i = 0; i < s->n; i++) free(s->data[i]);
    s->n = 0;
}

// Adds dir/rel (a file, or a directory and its files) to s; 0 on an error.
static int tc_snap_add(fat5_test *T, tc_snap *s, const char *dir, const char *rel) {
    char p[800];
    char *text = NULL;
    size_t len = 0;
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    if (s->n >= 32) return 0;
    if (fat5__is_dir(p)) {
        DIR *d = opendir(p);
        struct dirent *e;
        int ok = d != NULL;
        snprintf(s->rel[s->n], sizeof s->rel[0], "%s", rel);
        s->data[s->n++] = NULL;
        while (ok && (e = readdir(d)) != NULL) {
            char sub[400];
            if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
            snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
            ok = tc_snap_add(T, s, dir, sub);
        }
        if (d) closedir(d);
        return ok;
    }
    if (fat5__read_file(fat5_test_ctx(T), p, (size_t)1 << 26, &text, &len) != FAT5_OK) return 0;
    snprintf(s->rel[s->n], sizeof s->rel[0], "%s", rel);
    s->data[s->n] = (char *)malloc(len + 1);
    if (s->data[s->n]) memcpy(s->data[s->n], text, len);
    s->len[s->n] = len;
    fat5__free(fat5_test_ctx(T), text);
    return s->data[s->n++] != NULL;
}

// Everything in dir but the lock file.
static int tc_snap_take(fat5_test *T, tc_snap *s, const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int ok = d != NULL;
    s->n = 0;
    while (ok && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".lock"))
            ok = tc_snap_add(T, s, dir, e->d_name);
    if (d) closedir(d);
    return ok;
}

// Removes everything in dir but the lock file (one level of subdirectories, as checkpoints are).
static void tc_clear(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[800], q[1100];
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".lock")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (fat5__is_dir(p)) {
            DIR *sd = opendir(p);
            struct dirent *f;
            while (sd && (f = readdir(sd)) != NULL) {
                if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, "..")) continue;
                snprintf(q, sizeof q, "%s/%s", p, f->d_name);
                (void)unlink(q);
            }
            if (sd) closedir(sd);
            (void)rmdir(p);
        } else {
            (void)unlink(p);
        }
    }
    if (d) closedir(d);
}

// dir as it was when s was taken; 0 on an error.
static int tc_restore(const char *dir, const tc_snap *s) {
    char p[800];
    int i, ok = 1;
    tc_clear(dir);
    for (i = 0; i < s->n && ok; i++) {
        FILE *f;
        snprintf(p, sizeof p, "%s/%s", dir, s->rel[i]);
        if (!s->data[i]) {
            ok = mkdir(p, 0755) == 0;
            continue;
        }
        if (!(f = fopen(p, "wb"))) return 0;
        ok = s->len[i] == 0 || fwrite(s->data[i], 1, s->len[i], f) == s->len[i];
        if (fclose(f) != 0) ok = 0;
    }
    return ok;
}

// --- the run whose saves are cut

typedef struct tc_run {
    char shm[200];            // a directory of /dev/shm this test made and removes, or ""
    char out[600];
    fat5_train_config c;
    fat5_trainer *t;          // at step 4, holding no lock
    double ref[6];            // the losses of steps 1 .. 6 of a run that never stops
    tc_snap before_new;       // out: checkpoint step 2 (latest); the next save is of step 4
    tc_snap before_resave;    // out: steps 2 and 4 (latest); the next save is of step 4 again
    char files[8][64];        // the files of a checkpoint directory
    int n_files;
} tc_run;

static void tc_run_free(tc_run *R) {
    fat5_train_destroy(R->t);
    tc_snap_free(&R->before_new);
    tc_snap_free(&R->before_resave);
    if (R->shm[0]) fat5_test_rmtree(R->shm);
}

// The reference run, then the run under test: 2 steps, checkpoint (step 2), 2 steps, the state
// before a new step's save kept, checkpoint (step 4), the state before a re-save kept. 0 on an error.
static int tc_run_open(fat5_test *T, tc_run *R) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    const char *data = ttr_corpus(T, 8);
    fat5_train_config c;
    fat5_trainer *t = NULL;
    fat5_train_metrics r;
    char straight[600];
    int i;
    memset(R, 0, sizeof *R);
    if (!data) return 0;
    // the output directory in memory where there is such a file system (the calls are the same; the
    // thousands of syncs of some 370 saves and resumes then cost nothing), else beside the others
    snprintf(R->shm, sizeof R->shm, "/dev/shm/fat5_test_crash_XXXXXX");
    if (access("/dev/shm", W_OK) != 0 || !mkdtemp(R->shm)) R->shm[0] = 0;
    snprintf(R->out, sizeof R->out, "%s/crash", R->shm[0] ? R->shm : fat5_test_tmpdir(T));
    snprintf(straight, sizeof straight, "%s/straight", fat5_test_tmpdir(T));
    R->c = ttr_config(T, data, R->out);
    {   // smaller still: a step is made after every cut
        static const char *const o[][2] = {{"d_model", "16"}, {"d_ff", "32"}, {"d_kv", "8"}, {"max_length", "24"},
                                           {"max_labels_length", "24"}, {"batch_tokens", "48"},
                                           {"batch_labels_tokens", "48"}};
        for (i = 0; i < (int)(sizeof o / sizeof o[0]); i++)
            if (fat5_train_config_set(ctx, &R->c, o[i][0], o[i][1]) != FAT5_OK) goto fail;
    }
    R->c.eval_steps = 0;
    R->c.save_steps = 0;
    R->c.save_total_limit = 2;
    c = R->c;
    c.output_dir = straight;
    if (fat5_train_create(ctx, &c, &t) != FAT5_OK) goto fail;
    for (i = 0; i < 6; i++) {
        if (fat5_train_step(t, &r) != FAT5_OK) goto fail;
        R->ref[i] = r.loss;
    }
    fat5_train_destroy(t);
    t = NULL;
    if (fat5_train_create(ctx, &R->c, &R->t) != FAT5_OK) goto fail;
    // the trainer under test gives up its output directory's lock, so that the trainers that check
    // the resumes, in this same process, can take it
    close(R->t->lock_fd);
    R->t->lock_fd = -1;
    for (i = 0; i < 4; i++) {
        if (fat5_train_step(R->t, &r) != FAT5_OK) goto fail;
        if (memcmp(&r.loss, &R->ref[i], sizeof r.loss) != 0) {
            fat5_test_fail(T, __FILE__, __LINE__, "step %d: loss %.17g, the reference run's %.17g", i + 1, r.loss,
                           R->ref[i]);
            return 0;
        }
        if (i == 1 && fat5_train_save(R->t, NULL) != FAT5_OK) goto fail;
    }
    if (!tc_snap_take(T, &R->before_new, R->out) || fat5_train_save(R->t, NULL) != FAT5_OK ||
        !tc_snap_take(T, &R->before_resave, R->out))
        goto fail;
    for (i = 0; i < R->before_new.n; i++)   // step-00000002/NAME
        if (!strncmp(R->before_new.rel[i], "step-00000002/", 14) && R->n_files < 8)
            snprintf(R->files[R->n_files++], sizeof R->files[0], "%s", R->before_new.rel[i] + 14);
    // config.json, generation_config.json, model.safetensors, training_state.safetensors and the
    // byte-level model's tokenizer_config.json
    if (R->n_files != 5) {
        fat5_test_fail(T, __FILE__, __LINE__, "a checkpoint directory holds %d files, expected 5", R->n_files);
        return 0;
    }
    return 1;
fail:
    fat5_test_fail(T, __FILE__, __LINE__, "setup: %s", fat5_last_error(ctx));
    fat5_train_destroy(t);
    return 0;
}

// Whether dir is a whole checkpoint: exactly a checkpoint's files, its model and training state load.
static int tc_whole(fat5_test *T, const tc_run *R, const char *dir, char *why, size_t cap) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    char p[900];
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0, k, ok = 1;
    fat5_model *m = NULL;
    fat5_st_file *f = NULL;
    while (d && (e = readdir(d)) != NULL) {
        int known = 0;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        for (k = 0; k < R->n_files; k++) known |= !strcmp(e->d_name, R->files[k]);
        if (!known) {
            snprintf(why, cap, "%.600s: unexpected file %.100s", dir, e->d_name);
            ok = 0;
        }
        n++;
    }
    if (d) closedir(d);
    if (!ok) return 0;
    if (n != R->n_files) {
        snprintf(why, cap, "%s: %d of the %d files of a checkpoint", dir, n, R->n_files);
        return 0;
    }
    snprintf(p, sizeof p, "%s/training_state.safetensors", dir);
    if (fat5_model_load(ctx, dir, &m) != FAT5_OK || fat5_st_load(ctx, p, &f) != FAT5_OK) {
        snprintf(why, cap, "%.800s", fat5_last_error(ctx));
        ok = 0;
    }
    fat5_model_destroy(m);
    fat5_st_destroy(f);
    return ok;
}

// The name `latest` holds ("step-NNNNNNNN"), or "" when it cannot be read.
static void tc_latest(fat5_test *T, const char *out, char *name, size_t cap) {
    char p[800], *text = NULL;
    size_t len = 0;
    name[0] = 0;
    snprintf(p, sizeof p, "%s/latest", out);
    if (fat5__read_file(fat5_test_ctx(T), p, 64, &text, &len) != FAT5_OK) return;
    while (len && text[len - 1] == '\n') text[--len] = 0;
    snprintf(name, cap, "%s", text);
    fat5__free(fat5_test_ctx(T), text);
}

// The output directory as a cut save left it, before any start tidies it: every step-N and
// .old-step-N directory whole, `latest` naming step-N. *window (when not NULL) counts the states
// where step-N is absent and .old-step-N holds it (a re-save between its two renames: the next
// start puts it back); with window NULL that state is a failure. 0 when a check failed.
static int tc_check_dir(fat5_test *T, const tc_run *R, const char *what, int *window) {
    char name[64], p[800], why[900];
    DIR *d = opendir(R->out);
    struct dirent *e;
    int ok = 1;
    int64_t s;
    while (d && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (!fat5__is_step_name(n, &s) && !(!strncmp(n, ".old-", 5) && fat5__is_step_name(n + 5, &s))) continue;
        snprintf(p, sizeof p, "%s/%.100s", R->out, n);
        if (!tc_whole(T, R, p, why, sizeof why)) {
            fat5_test_fail(T, __FILE__, __LINE__, "%s: %s is not a whole checkpoint: %s", what, n, why);
            ok = 0;
        }
    }
    if (d) closedir(d);
    tc_latest(T, R->out, name, sizeof name);
    if (!fat5__is_step_name(name, &s)) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: latest holds '%s'", what, name);
        return 0;
    }
    snprintf(p, sizeof p, "%s/%s", R->out, name);
    if (!fat5__is_dir(p)) {
        snprintf(p, sizeof p, "%s/.old-%s", R->out, name);
        if (!window || !fat5__is_dir(p)) {
            fat5_test_fail(T, __FILE__, __LINE__, "%s: latest names %s, which is not there%s", what, name,
                           window ? ", nor moved aside as .old-" : "");
            if (window) printf("  (.old-%s)\n", name);
            return 0;
        }
        ++*window;
    }
    return ok;
}

// The first temporary in the output directory or its checkpoints ("" when none): a checkpoint or
// a file being written, a checkpoint moved aside or being deleted.
static void tc_stale(const char *out, char *name, size_t cap) {
    DIR *d = opendir(out);
    struct dirent *e;
    name[0] = 0;
    while (d && !name[0] && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        int64_t s;
        if (!strncmp(n, ".tmp-", 5) || !strncmp(n, ".old-", 5) || !strncmp(n, ".del-", 5) || strstr(n, ".tmp.")) {
            snprintf(name, cap, "%s", n);
        } else if (fat5__is_step_name(n, &s)) {
            char p[800];
            DIR *sd;
            struct dirent *f;
            snprintf(p, sizeof p, "%.600s/%.100s", out, n);
            sd = opendir(p);
            while (sd && !name[0] && (f = readdir(sd)) != NULL)
                if (strstr(f->d_name, ".tmp.")) snprintf(name, cap, "%s/%s", n, f->d_name);
            if (sd) closedir(sd);
        }
    }
    if (d) closedir(d);
}

// A trainer resuming from the output directory: it starts (from step 2 or 4), leaves no temporary
// behind and every checkpoint whole, latest naming one that is there, and its next step's loss is
// the reference run's, bit for bit. *step gets the step it resumed from (-1 on a failure).
static void tc_resume(fat5_test *T, const tc_run *R, const char *what, int64_t *step) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    fat5_train_config c = R->c;
    fat5_trainer *v = NULL;
    fat5_train_metrics r;
    char stale[800];
    *step = -1;
    c.resume = R->out;
    if (fat5_train_create(ctx, &c, &v) != FAT5_OK) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: resume: %s", what, fat5_last_error(ctx));
        return;
    }
    *step = fat5_optim_get_step(v->o);
    tc_stale(R->out, stale, sizeof stale);
    FAT5_CHECK_MSG(T, !stale[0], "%s: %s is left after a trainer started", what, stale);
    snprintf(stale, sizeof stale, "%.700s, after a trainer started", what);
    tc_check_dir(T, R, stale, NULL);
    if (*step != 2 && *step != 4) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: resumed at step %lld", what, (long long)*step);
    } else if (fat5_train_step(v, &r) != FAT5_OK) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: step: %s", what, fat5_last_error(ctx));
    } else {
        FAT5_CHECK_MSG(T, memcmp(&r.loss, &R->ref[*step], sizeof r.loss) == 0,
                       "%s: step %lld after the resume: loss %.17g, a run that never stopped %.17g", what,
                       (long long)*step + 1, r.loss, R->ref[*step]);
    }
    fat5_train_destroy(v);
}

// The calls of an uncut save from snap (logged in tc_trace); -1 on an error.
static int tc_dry_run(fat5_test *T, tc_run *R, const tc_snap *snap, int limit) {
    fat5_status st;
    if (!tc_restore(R->out, snap)) return -1;
    R->t->cfg.save_total_limit = limit;
    tc_hook_on(TC_COUNT, 0);
    st = fat5_train_save(R->t, NULL);
    tc_hook_off();
    if (st != FAT5_OK) {
        fat5_test_fail(T, __FILE__, __LINE__, "save: %s", fat5_last_error(fat5_test_ctx(T)));
        return -1;
    }
    if (tc_calls > TC_MAX_CALLS) {
        fat5_test_fail(T, __FILE__, __LINE__, "a save makes %d calls, more than the %d logged", tc_calls, TC_MAX_CALLS);
        return -1;
    }
    return tc_calls;
}

// path without the directory of the output directory, for messages
static const char *tc_rel(const tc_run *R, const char *path) {
    size_t n = strlen(R->out);
    return !strncmp(path, R->out, n) && path[n] == '/' ? path + n + 1 : path;
}

// a path's directory, and its last component
static void tc_parent(const char *path, char *out, size_t cap) {
    const char *s = strrchr(path, '/');
    snprintf(out, cap, "%.*s", s ? (int)(s - path) : 0, path);
}
static const char *tc_base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// a failed check that ends the test, its run freed (its directory in /dev/shm removed)
#define TC_REQUIRE(cond) \
    do { if (!(cond)) { fat5_test_fail(T, __FILE__, __LINE__, "required: %s", #cond); goto done; } } while (0)

// The two saves that are cut: of a new step (the earlier checkpoint pruned), of a step again.
static const struct tc_case {
    const char *name;
    int resave, limit;
} tc_cases[2] = {{"new step", 0, 1}, {"re-save", 1, 2}};

// Each save crashed at each of its calls in turn (a child ends at its Nth call).
static void t_crash_save_points(fat5_test *T) {
    tc_run R;
    int k, total = 0;
    if (!tc_run_open(T, &R)) goto done;
    for (k = 0; k < 2; k++) {
        const struct tc_case *cs = &tc_cases[k];
        const tc_snap *snap = cs->resave ? &R.before_resave : &R.before_new;
        int n, calls = tc_dry_run(T, &R, snap, cs->limit), window = 0, committed = 0, failed = T->failed;
        static tc_call trace[TC_MAX_CALLS];
        if (calls < 0) goto done;
        memcpy(trace, tc_trace, sizeof trace);
        for (n = 1; n <= calls + 1 && T->failed == failed; n++) {
            char what[1600];
            pid_t pid;
            int status = 0;
            int64_t step;
            TC_REQUIRE(tc_restore(R.out, snap));
            fflush(NULL);
            pid = fork();
            TC_REQUIRE(pid >= 0);
            if (pid == 0) {
                fat5_status st;
                tc_hook_on(TC_CRASH, n);
                st = fat5_train_save(R.t, NULL);
                _exit(st == FAT5_OK ? 0 : 3);
            }
            TC_REQUIRE(waitpid(pid, &status, 0) == pid && WIFEXITED(status));
            if (n == calls + 1) {   // past the last call: the save completes
                FAT5_CHECK_MSG(T, WEXITSTATUS(status) == 0, "%s: the save uncut exits %d", cs->name, WEXITSTATUS(status));
                break;
            }
            snprintf(what, sizeof what, "%s, crash at call %d of %d (%s %s%s%s)", cs->name, n, calls, trace[n - 1].op,
                     tc_rel(&R, trace[n - 1].path), trace[n - 1].path2[0] ? " -> " : "",
                     trace[n - 1].path2[0] ? tc_rel(&R, trace[n - 1].path2) : "");
            if (WEXITSTATUS(status) != TC_CRASHED) {
                fat5_test_fail(T, __FILE__, __LINE__, "%s: the child exited %d", what, WEXITSTATUS(status));
                break;
            }
            total++;
            if (!tc_check_dir(T, &R, what, &window)) break;
            tc_resume(T, &R, what, &step);
            // once a crash resumes from the new step, every later one does (one commit point)
            if (!cs->resave && step == 4 && !committed) committed = n;
            FAT5_CHECK_MSG(T, cs->resave ? step == 4 : step == (committed ? 4 : 2), "%s: resumed from step %lld",
                           what, (long long)step);
        }
        if (cs->resave)
            printf("  %s: %d crash points; %d of them leave step 4 as .old-step-00000004 until the next start\n",
                   cs->name, calls, window);
        else if (committed > 1)
            printf("  %s: %d crash points; a crash after call %d (%s %s%s%s) resumes from the new checkpoint, "
                   "one before it from the earlier\n", cs->name, calls, committed - 1, trace[committed - 2].op,
                   tc_rel(&R, trace[committed - 2].path), trace[committed - 2].path2[0] ? " -> " : "",
                   trace[committed - 2].path2[0] ? tc_rel(&R, trace[committed - 2].path2) : "");
        FAT5_CHECK_MSG(T, cs->resave || committed > 1, "%s: no crash resumed from the new checkpoint, or every one",
                       cs->name);
    }
    printf("  %d crash points in all\n", total);
done:
    tc_run_free(&R);
}

// path with a temporary file's suffix (".tmp.XXXXXX") taken off: the file a message names
static void tc_named(const char *path, char *out, size_t cap) {
    const char *t = strstr(path, ".tmp.");
    snprintf(out, cap, "%.*s", t ? (int)(t - path) : (int)strlen(path), path);
}

// Each save failed at each of its calls in turn (the call returns ENOSPC, as on a full disk).
static void t_crash_save_failures(fat5_test *T) {
    fat5_ctx *ctx = fat5_test_ctx(T);
    tc_run R;
    int k, total = 0;
    if (!tc_run_open(T, &R)) goto done;
    for (k = 0; k < 2; k++) {
        const struct tc_case *cs = &tc_cases[k];
        const tc_snap *snap = cs->resave ? &R.before_resave : &R.before_new;
        int n, calls = tc_dry_run(T, &R, snap, cs->limit), errors = 0, ignored = 0, failed = T->failed, installed;
        char before[64], after[64], p[800];
        if (calls < 0) goto done;
        // the call that installs the new latest
        for (installed = calls; installed > 0; installed--)
            if (!strcmp(tc_trace[installed - 1].op, "rename") && !strcmp(tc_base(tc_trace[installed - 1].path2), "latest"))
                break;
        TC_REQUIRE(installed > 0);
        TC_REQUIRE(tc_restore(R.out, snap));
        tc_latest(T, R.out, before, sizeof before);
        for (n = 1; T->failed == failed; n++) {
            char what[1600], named[600], named2[600], msg[2048];
            tc_call hit;
            fat5_status st;
            int64_t step;
            TC_REQUIRE(tc_restore(R.out, snap));
            tc_hook_on(TC_FAIL, n);
            st = fat5_train_save(R.t, NULL);
            tc_hook_off();
            if (tc_calls < n) {   // no Nth call: the save completed
                FAT5_CHECK_MSG(T, st == FAT5_OK && n == calls + 1, "%s: %d calls, %d in the first save: %s", cs->name,
                               tc_calls, calls, fat5_last_error(ctx));
                break;
            }
            total++;
            hit = tc_trace[n - 1];
            snprintf(what, sizeof what, "%s, call %d of %d failed (%s %s%s%s)", cs->name, n, calls, hit.op,
                     tc_rel(&R, hit.path), hit.path2[0] ? " -> " : "", hit.path2[0] ? tc_rel(&R, hit.path2) : "");
            snprintf(msg, sizeof msg, "%.2000s", fat5_last_error(ctx));
            tc_latest(T, R.out, after, sizeof after);
            if (st != FAT5_OK) {
                // the error names the file and the reason; latest is as it was (unless it is the
                // sync of the new one that failed), and the checkpoint it named is there
                errors++;
                tc_named(hit.path, named, sizeof named);
                tc_named(hit.path2, named2, sizeof named2);
                FAT5_CHECK_MSG(T, st == FAT5_ERR_IO && (strstr(msg, named) || (named2[0] && strstr(msg, named2))) &&
                                      strstr(msg, strerror(ENOSPC)),
                               "%s: %s: %s", what, fat5_status_string(st), msg);
                FAT5_CHECK_MSG(T, !strcmp(after, before) || n > installed,
                               "%s: the save failed, and latest changed from %s to %s", what, before, after);
                snprintf(p, sizeof p, "%s/%s", R.out, before);
                FAT5_CHECK_MSG(T, fat5__is_dir(p), "%s: the save failed, and %s is gone", what, before);
            } else {   // a failure the save can go on from (the mode of a temporary, a removal)
                ignored++;
                FAT5_CHECK_MSG(T, !strcmp(after, "step-00000004"), "%s: the save succeeded and latest is %s", what,
                               after);
            }
            if (!tc_check_dir(T, &R, what, NULL)) break;
            // the next save (the disk has room again) succeeds, and is resumed from
            if (fat5_train_save(R.t, NULL) != FAT5_OK) {
                fat5_test_fail(T, __FILE__, __LINE__, "%s: the next save: %s", what, fat5_last_error(ctx));
                break;
            }
            snprintf(what + strlen(what), sizeof what - strlen(what), ", then saved again");
            tc_latest(T, R.out, after, sizeof after);
            FAT5_CHECK_MSG(T, !strcmp(after, "step-00000004"), "%s: latest is %s", what, after);
            if (!tc_check_dir(T, &R, what, NULL)) break;
            tc_resume(T, &R, what, &step);
            FAT5_CHECK_MSG(T, step == 4, "%s: resumed from step %lld", what, (long long)step);
        }
        printf("  %s: %d failure points: %d failed the save, %d were gone on from\n", cs->name, calls, errors, ignored);
    }
    printf("  %d failure points in all\n", total);
done:
    tc_run_free(&R);
}

// --- the order of a save's calls, against what survives a power loss: a file's data, and a
// directory's entries (names created, renamed, removed), are on disk once fsync returned on it;
// before that, a power loss may drop them, each directory's independently of the others'.

// whether the trace has an fsync of path among calls (from, to)
static int tc_synced(const tc_call *c, int from, int to, const char *path) {
    int i;
    for (i = from + 1; i < to; i++)
        if (!strcmp(c[i].op, "fsync") && !strcmp(c[i].path, path)) return 1;
    return 0;
}

// The rules a save's calls keep (0 and a failure naming the call where one is broken):
// 1. a temporary file is renamed over its name only after an fsync following its last write;
// 2. .tmp-step-N becomes step-N only after an fsync of it following the last name made in it;
// 3. latest is replaced only after an fsync of the output directory following step-N's rename;
// 4. a checkpoint is deleted (unlink, rmdir inside .old-step-N / .del-step-N, or of it) only after
//    an fsync of the output directory following its every rename (latest's, the checkpoint's own);
// 5. when the save returns, the output directory was synced after its last rename (latest's).
static int tc_check_order(fat5_test *T, const tc_run *R, const tc_call *c, int n, const char *what) {
    int i, j, bad = -1, rule = 0;
    char par[600], par2[600];
    for (i = 0; i < n && bad < 0; i++) {
        tc_parent(c[i].path, par, sizeof par);
        tc_parent(c[i].path2, par2, sizeof par2);
        if (!strcmp(c[i].op, "rename") && strstr(tc_base(c[i].path), ".tmp.")) {
            for (j = i - 1; j >= 0 && !(!strcmp(c[j].op, "write") && !strcmp(c[j].path, c[i].path)); j--) {}
            if (!tc_synced(c, j, i, c[i].path)) bad = i, rule = 1;
        }
        if (!strcmp(c[i].op, "rename") && !strncmp(tc_base(c[i].path), ".tmp-step-", 10)) {
            for (j = i - 1; j >= 0; j--) {
                char pj[600];
                tc_parent(c[j].path2[0] ? c[j].path2 : c[j].path, pj, sizeof pj);
                if ((!strcmp(c[j].op, "rename") || !strcmp(c[j].op, "create")) && !strcmp(pj, c[i].path)) break;
            }
            if (!tc_synced(c, j, i, c[i].path)) bad = i, rule = 2;
        }
        if (!strcmp(c[i].op, "rename") && !strcmp(tc_base(c[i].path2), "latest") && !strcmp(par2, R->out)) {
            for (j = i - 1; j >= 0 && !(!strcmp(c[j].op, "rename") && !strncmp(tc_base(c[j].path2), "step-", 5)); j--) {}
            if (j < 0 || !tc_synced(c, j, i, R->out)) bad = i, rule = 3;
        }
        if (!strcmp(c[i].op, "unlink") || !strcmp(c[i].op, "rmdir")) {
            char top[600];
            size_t no = strlen(R->out);
            // the entry of the output directory the path lies in
            snprintf(top, sizeof top, "%s", !strncmp(c[i].path, R->out, no) && c[i].path[no] == '/'
                                                ? c[i].path + no + 1 : "");
            if (strchr(top, '/')) *strchr(top, '/') = 0;
            if (!strncmp(top, ".old-step-", 10) || !strncmp(top, ".del-step-", 10)) {
                for (j = i - 1; j >= 0; j--) {
                    char a[600], b[600];
                    tc_parent(c[j].path, a, sizeof a);
                    tc_parent(c[j].path2, b, sizeof b);
                    if (!strcmp(c[j].op, "rename") && (!strcmp(a, R->out) || !strcmp(b, R->out))) break;
                }
                if (j >= 0 && !tc_synced(c, j, i, R->out)) bad = i, rule = 4;
            }
        }
    }
    if (bad < 0) {
        for (j = n - 1; j >= 0; j--) {
            char b[600];
            tc_parent(c[j].path2, b, sizeof b);
            if (!strcmp(c[j].op, "rename") && !strcmp(b, R->out)) break;
        }
        if (j >= 0 && !tc_synced(c, j, n, R->out)) bad = j, rule = 5;
    }
    if (bad >= 0) {
        fat5_test_fail(T, __FILE__, __LINE__, "%s: call %d of %d (%s %s%s%s) breaks rule %d; the calls:", what, bad + 1,
                       n, c[bad].op, tc_rel(R, c[bad].path), c[bad].path2[0] ? " -> " : "",
                       c[bad].path2[0] ? tc_rel(R, c[bad].path2) : "", rule);
        for (i = 0; i < n; i++)
            printf("    %3d %-7s %s%s%s\n", i + 1, c[i].op, tc_rel(R, c[i].path), c[i].path2[0] ? " -> " : "",
                   c[i].path2[0] ? tc_rel(R, c[i].path2) : "");
        return 0;
    }
    return 1;
}

static void t_crash_save_sync_order(fat5_test *T) {
    tc_run R;
    int k;
    if (!tc_run_open(T, &R)) goto done;
    for (k = 0; k < 2; k++) {
        const struct tc_case *cs = &tc_cases[k];
        int calls = tc_dry_run(T, &R, cs->resave ? &R.before_resave : &R.before_new, cs->limit);
        if (calls < 0) goto done;
        tc_check_order(T, &R, tc_trace, calls, cs->name);
    }
done:
    tc_run_free(&R);
}

#define FAT5_TESTS_CRASH(X) X(crash_save_points) X(crash_save_failures) X(crash_save_sync_order)
