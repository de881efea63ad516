// =============================================================================================
// ==[9.1] run: the launcher ==
// fat5_launch forks one worker process per rank, gives them a board (section [3.6]) and NCCL's
// unique id through a pipe, passes SIGINT / SIGTERM on to them and reports how they ended.
#ifndef _WIN32
#include <signal.h>
#include <sys/wait.h>
#endif

// The watchdog's last resort for a rank of this layer's runs (fat5__comm_open's on_held): the
// rank's thread is held inside an NCCL call, which NCCL cannot abort under it, and no error can be
// returned from a call that does not return. This is the one place the library ends the process
// (fat5.h's header says so): the board names this rank and why (its peers and the launcher report
// it, unless another rank failed first), the context's log callback gets the message at
// FAT5_LOG_WARN on the watchdog thread (without a callback, and only here, the message goes to
// stderr: the process is about to end and nothing else would say why), the rendezvous file is
// removed as close would, and the process exits with status 1.
static FAT5__UNUSED void fat5__run_held_exit(fat5__comm *c, const char *msg) {
    char why[600];
    snprintf(why, sizeof why, "%.400s; held inside an NCCL call, which NCCL cannot abort under it: its process ends",
             msg);
    fat5__board_fail(c->board, c->rank, why);
    if (c->ctx && c->ctx->cfg.log) fat5__log(c->ctx, FAT5_LOG_WARN, "rank %d: %s", c->rank, why);
    else fprintf(stderr, "fat5: rank %d: %s\n", c->rank, why);
    fat5__comm_unlink_own(c);   // as its close would: the next run starts clean
    _exit(1);
}

// SIGINT or SIGTERM received by the launcher while it waits (then passed on to every worker)
static volatile sig_atomic_t fat5__launch_sig;
static void fat5__launch_on_signal(int sig) { fat5__launch_sig = sig; }

FAT5_API fat5_status fat5_launch(fat5_ctx *ctx, int n, double grace_s, fat5_launch_info *out) {
    char path[512];
    const char *tmpdir = getenv("TMPDIR");
    size_t bytes = fat5__board_bytes(n, 1);
    fat5__board *b;
    pid_t *pids;
    int fd, pipefd[2], r, alive = 0, stopped = 0;
    double deadline = 0;
    struct sigaction sa, old_int, old_term;
    sigset_t block, old_mask;
    if (!out) return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_launch: NULL argument");
    memset(out, 0, sizeof *out);
    out->rank = -1;
    out->failed_rank = -1;
    out->world_size = n;
    if (n < 1 || n > FAT5__DIST_MAX_LOCAL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "fat5_launch: %d ranks; one host takes 1 to %d", n, FAT5__DIST_MAX_LOCAL);
    // backend branch: fork() copies no CUDA context, so the launcher refuses to run after one opened
    if (ctx->gpu)
        return fat5__err(ctx, FAT5_ERR_STATE, "fat5_launch: call it before any GPU context exists (a forked CUDA "
                         "context does not work in the child)");
    snprintf(path, sizeof path, "%s/fat5-ranks-XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp");
    if ((fd = mkstemp(path)) < 0) return fat5__err(ctx, FAT5_ERR_IO, "fat5_launch: %s: %s", path, strerror(errno));
    (void)unlink(path);   // lives while a process holds it
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);   // not for programs a worker runs
    if (ftruncate(fd, (off_t)bytes) != 0 ||
        (b = (fat5__board *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == (fat5__board *)MAP_FAILED) {
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "fat5_launch: shared memory of %zu bytes: %s", bytes, strerror(errno));
    }
    if (pipe(pipefd) != 0) {
        munmap((void *)b, bytes);
        close(fd);
        return fat5__err(ctx, FAT5_ERR_IO, "fat5_launch: pipe: %s", strerror(errno));
    }
    (void)fcntl(pipefd[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(pipefd[1], F_SETFD, FD_CLOEXEC);
    if (!(pids = FAT5__CAST(pid_t *, fat5__calloc(ctx, (size_t)n, sizeof *pids)))) {
        munmap((void *)b, bytes);
        close(fd), close(pipefd[0]), close(pipefd[1]);
        return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
    }
    b->world = n;
    b->failed = b->claim = -1;
    b->launcher_pid = (int32_t)getpid();
    b->magic = FAT5__DIST_MAGIC;
    // SIGINT / SIGTERM to the launcher go on to the workers (which stop together, see
    // fat5_train_request_stop); caught from before the first fork, so that none is lost or kills
    // the launcher midway; the workers and, on return, the caller get their own handlers back
    // (held back while forking, so that none reaches a child before its own handlers are back)
    fat5__launch_sig = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fat5__launch_on_signal;
    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    (void)sigprocmask(SIG_BLOCK, &block, &old_mask);
    (void)sigaction(SIGINT, &sa, &old_int);
    (void)sigaction(SIGTERM, &sa, &old_term);
    fflush(NULL);
    for (r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) {   // a worker
            (void)sigaction(SIGINT, &old_int, NULL);
            (void)sigaction(SIGTERM, &old_term, NULL);
            (void)sigprocmask(SIG_SETMASK, &old_mask, NULL);
            fat5__free(ctx, pids);
            b->pid[r] = (int32_t)getpid();
            munmap((void *)b, bytes);
            if (r != 0) close(pipefd[1]), pipefd[1] = -1;   // only rank 0 writes: the others see EOF if it dies
            if (r == 0) close(pipefd[0]), pipefd[0] = -1;
            out->rank = r;
            snprintf(out->rendezvous, sizeof out->rendezvous, "launch:%d:%d:%d", fd, pipefd[0], pipefd[1]);
            return FAT5_OK;
        }
        if (pid < 0) {
            fat5__board_fail(b, r, "fork failed");
            snprintf(out->message, sizeof out->message, "fork of rank %d failed: %s", r, strerror(errno));
            out->failed_rank = r;
            out->exit_code = 1;
            break;
        }
        pids[r] = pid;
        alive++;
    }
    close(pipefd[0]);
    close(pipefd[1]);
    (void)sigprocmask(SIG_SETMASK, &old_mask, NULL);   // a signal held meanwhile arrives now
    if (out->failed_rank >= 0) deadline = fat5__now_s() + grace_s;
    // wait for every worker; the first that fails marks the board (the others stop on their own),
    // and the ones still running grace_s later are killed. Exit status 130 is a worker that
    // stopped on request, not a failure.
    while (alive > 0) {
        int progressed = 0;
        if (fat5__launch_sig) {
            int sig = (int)__atomic_exchange_n(&fat5__launch_sig, 0, __ATOMIC_ACQ_REL);
            for (r = 0; r < n; r++)
                if (pids[r] > 0) kill(pids[r], sig);
        }
        for (r = 0; r < n; r++) {
            int status = 0;
            pid_t w;
            if (pids[r] <= 0) continue;
            w = waitpid(pids[r], &status, WNOHANG);
            if (w == 0 || (w < 0 && errno == EINTR)) continue;
            pids[r] = 0;
            alive--;
            progressed = 1;
            if (w < 0) continue;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 130) {
                stopped = 1;
            } else if ((WIFEXITED(status) && WEXITSTATUS(status) != 0) || WIFSIGNALED(status)) {
                char msg[200];
                if (WIFSIGNALED(status)) snprintf(msg, sizeof msg, "killed by signal %d", WTERMSIG(status));
                else snprintf(msg, sizeof msg, "exited with status %d", WEXITSTATUS(status));
                fat5__board_fail(b, r, msg);
                if (out->failed_rank < 0) {
                    int32_t f = __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
                    out->failed_rank = r;
                    out->exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
                    if (f >= 0 && f != r) {   // r stopped because another rank failed first
                        char why[sizeof b->why];
                        memcpy(why, b->why, sizeof why);
                        why[sizeof why - 1] = 0;
                        out->failed_rank = f;
                        snprintf(out->message, sizeof out->message, "rank %d failed: %s", (int)f, why);
                    } else {
                        snprintf(out->message, sizeof out->message, "rank %d (pid %ld) %s", r, (long)w, msg);
                    }
                    deadline = fat5__now_s() + grace_s;
                }
            }
        }
        if (deadline > 0 && fat5__now_s() > deadline) {
            for (r = 0; r < n; r++)
                if (pids[r] > 0) kill(pids[r], SIGKILL);
            deadline = 1e300;   // killed: wait for them
        }
        if (!progressed) fat5__dist_nap(30000);
    }
    (void)sigaction(SIGINT, &old_int, NULL);
    (void)sigaction(SIGTERM, &old_term, NULL);
    if (out->failed_rank < 0 && stopped) out->exit_code = 130;
    fat5__free(ctx, pids);
    munmap((void *)b, bytes);
    close(fd);
    return FAT5_OK;
}

