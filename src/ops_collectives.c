// =============================================================================================
// ==[3.6] ops: collectives: NCCL (GPU) and shared memory (CPU ranks), the ranks' board and watchdog ==
// Data parallel training runs one process per rank (one GPU each, or CPU processes). Every rank
// holds the whole model and draws the whole step's micro-batches from one sampler stream, keeps
// its own share, and adds its gradients to the others' with an all-reduce, so every rank takes the
// same optimizer step on the same sums. This section is the backends' collectives: how ranks meet,
// sums of fp32 / fp64 buffers, gradient buckets, failure detection (fat5_launch, which forks one
// worker per rank, is the run layer's: section [9.1]). Two transports, chosen by the backend:
//   - NCCL (GPU): ncclAllReduce on a second stream, each bucket ordered after the backward that
//     finished it by an event, the compute stream ordered after the last one (section [2] opens
//     libnccl.so.2). The ranks exchange NCCL's unique id through a pipe (fat5_launch) or a file.
//   - host (CPU backend): shared memory: each rank copies a chunk into its slot, and every rank
//     adds the slots in rank order, so all get the same bits. The same host only.
// The board: a shared page (an unlinked temporary file fat5_launch maps into every worker, or the
// rendezvous file) with the first failed rank and why, the workers' pids and the launcher's, and
// the host transport's barrier and slots. A rank whose collective waits longer than the timeout,
// or sees a peer fail or vanish, marks the board, aborts NCCL and returns an error naming the rank;
// it never hangs. A GPU rank held where it does not check is seen to by its watchdog thread.
#ifndef _WIN32
#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#endif

#define FAT5__DIST_MAGIC 0x3230747369643566ull   // "f5dist02"
#define FAT5__DIST_MAX_LOCAL 256                 // ranks one board (one host) holds
#define FAT5__DIST_SLOT ((size_t)4 << 20)        // bytes per rank in a host sum's chunk

typedef struct fat5__board {
    uint64_t magic;
    int32_t world, launcher_pid;   // launcher_pid 0: no launcher (rendezvous file)
    int32_t failed;                // the first rank that failed, -1 none (set once, after why)
    int32_t claim;                 // ... the rank that claimed the right to write why, -1 none
    int32_t id_ready;
    int32_t transport;             // FAT5__DIST_HOST or FAT5__DIST_NCCL, set by the first rank to join
    char why[480];                 // ... and what happened to it
    uint32_t arrive, gen;          // host barrier: ranks arrived, generation
    uint32_t seen[FAT5__DIST_MAX_LOCAL];   // ... the generation each rank last arrived at, plus 1
    uint32_t join[FAT5__DIST_MAX_LOCAL], ack[FAT5__DIST_MAX_LOCAL];   // rendezvous file: check-in tokens
    int32_t pid[FAT5__DIST_MAX_LOCAL];
    unsigned char nccl_id[128];
} fat5__board;

// What the watchdog does when the rank's thread is held inside an NCCL call (see the watchdog).
typedef void (*fat5__comm_held_fn)(struct fat5__comm *c, const char *msg);

typedef struct fat5__comm {
    fat5_ctx *ctx;
    const fat5__backend *be;
    int rank, world, mode;
    int launched;                  // the board is fat5_launch's: all ranks are local processes
    int local;                     // the peers' pids can be checked (launched, or host transport)
    fat5__board *board;
    size_t board_bytes;
    unsigned char *slots;          // host transport: world x FAT5__DIST_SLOT
    char file[4200];               // the rendezvous file (removed by rank 0 at the end), "" none
    unsigned long long file_ino, file_dev;   // ... the file mapped
    double timeout_s;
    double wait_s;                 // host time spent waiting on the others since the last read
    int failed;                    // this rank failed: close tears down without waiting for the others
    int fds[3];                    // fat5_launch's board and pipe ends (closed with the comm), -1 none
    size_t bucket;                 // floats per gradient bucket
    fat5__addr gd;                 // the gradients being summed
    size_t next_hi;                // floats at or above next_hi are summed (or queued)
#ifndef FAT5_NO_CUDA
    fat5__nccl nccl;
    fat5__ncclComm_t nc;
    fat5__CUstream stream;         // the collectives' stream
    fat5__CUevent ev_order, ev_done, ev_t0, ev_t1;
    int pending;                   // collectives queued since the last wait (or order)
    int timed;                     // ev_t0 / ev_t1 recorded this step
    // The watchdog: nc is read and cleared under nc_mu; an abort clears it, sets `aborted` and
    // keeps why in abort_why. Times in microseconds of fat5__now_s, 0 none: call_t0_us, when this
    // rank's thread entered the NCCL call it is in (set under nc_mu); queued_t0_us, when the first
    // sum not yet waited out (fat5__comm_wait) or landed (fat5__comm_grads_landed) was queued.
    // on_held: the watchdog's last resort, the opener's (fat5__comm_open; tests replace it).
    // joining: the rank's thread is joining NCCL (ncclCommInitRank; queued_t0_us then times the
    // join from its first try).
    int32_t aborted, joining;
    char abort_why[640];
    int64_t call_t0_us, queued_t0_us;
    fat5__comm_held_fn on_held;
#if FAT5__THREADS
    pthread_mutex_t nc_mu;
    pthread_t watch;
    int mu_on, watch_on;
    int32_t watch_stop;
#endif
#endif
} fat5__comm;

// Marks the board: rank r failed because of msg (the first failure wins). The first claims the
// board, writes why, then publishes its rank: whoever sees `failed` sees why whole.
static void fat5__board_fail(fat5__board *b, int r, const char *msg) {
    int32_t none = -1;
    if (!b) return;
    if (__atomic_compare_exchange_n(&b->claim, &none, (int32_t)r, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        snprintf(b->why, sizeof b->why, "%.470s", msg);
        __atomic_store_n(&b->failed, (int32_t)r, __ATOMIC_RELEASE);
    }
}

// This rank failed (why: the message it reports): the board names it, close waits for nobody, and
// its watchdog no longer times sums it will not wait for (a failure between a step's sums and
// their landing left the clock running).
static void fat5__comm_fail(fat5__comm *c, const char *why) {
    fat5__board_fail(c->board, c->rank, why);
    c->failed = 1;
#ifndef FAT5_NO_CUDA
    __atomic_store_n(&c->queued_t0_us, 0, __ATOMIC_RELEASE);
#endif
}

// The watchdog's clock for a check (dev/dist_check): 1 while sums queued on the GPU are timed, 0
// when not, -1 on the host transport or without the GPU path; *watchdog: a watchdog thread runs.
static FAT5__UNUSED int fat5__comm_clock(const fat5__comm *c, int *watchdog) {
    *watchdog = 0;
#ifndef FAT5_NO_CUDA
#if FAT5__THREADS
    *watchdog = c->watch_on;
#endif
    return __atomic_load_n(&c->queued_t0_us, __ATOMIC_ACQUIRE) != 0;
#else
    (void)c;
    return -1;
#endif
}

// Rank 0 removes the rendezvous file it published, unless a new run has replaced it since.
static void fat5__comm_unlink_own(fat5__comm *c) {
    struct stat sb;
    if (c->rank == 0 && c->file[0] && stat(c->file, &sb) == 0 && (unsigned long long)sb.st_ino == c->file_ino &&
        (unsigned long long)sb.st_dev == c->file_dev)
        (void)unlink(c->file);
}

// 0 while every rank is well (as far as this host can see); else 1 with msg = "rank R stops: ..."
// naming the rank that failed or vanished (and marking the board for a vanished one). Touches
// neither the context nor NCCL, so the watchdog thread calls it too.
static int fat5__comm_trouble(fat5__comm *c, char *msg, size_t n) {
    fat5__board *b = c->board;
    int32_t f, r;
    if (!b) return 0;
    f = __atomic_load_n(&b->failed, __ATOMIC_ACQUIRE);
    if (f >= 0 && f != c->rank) {
        char why[sizeof b->why];
        memcpy(why, b->why, sizeof why);
        why[sizeof why - 1] = 0;
        snprintf(msg, n, "rank %d stops: rank %d failed: %s", c->rank, (int)f, why);
        return 1;
    }
    if (c->launched && b->launcher_pid > 0 && getppid() != b->launcher_pid) {
        fat5__board_fail(b, c->rank, "its launcher exited");
        snprintf(msg, n, "rank %d stops: the launcher (pid %d) exited", c->rank, (int)b->launcher_pid);
        return 1;
    }
    if (c->local)
        for (r = 0; r < c->world && r < FAT5__DIST_MAX_LOCAL; r++) {
            int32_t pid = __atomic_load_n(&b->pid[r], __ATOMIC_ACQUIRE);
            if (r != c->rank && pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
                char gone[128];
                snprintf(gone, sizeof gone, "its process (pid %d) is gone", (int)pid);
                fat5__board_fail(b, r, gone);
                snprintf(msg, n, "rank %d stops: rank %d failed: %s", c->rank, (int)r, gone);
                return 1;
            }
        }
    return 0;
}

// FAT5_OK while every rank is well; else an error naming the rank that failed or vanished.
static fat5_status fat5__comm_check(fat5__comm *c) {
    char msg[640];
    if (!fat5__comm_trouble(c, msg, sizeof msg)) return FAT5_OK;
    return fat5__err(c->ctx, FAT5_ERR_STATE, "%s", msg);
}

// Every rank must compute on the same kind of device (a rank that fell back to the CPU cannot sum
// with GPU ranks): the first rank to join records its transport on the board.
static fat5_status fat5__comm_same_transport(fat5__comm *c) {
    int32_t none = 0;
    if (!c->board) return FAT5_OK;
    if (__atomic_compare_exchange_n(&c->board->transport, &none, (int32_t)c->mode, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ||
        none == c->mode)
        return FAT5_OK;
    return fat5__err(c->ctx, FAT5_ERR_INVALID_ARG, "rank %d computes on the %s, and another rank on the %s: every rank "
                     "needs the same device", c->rank, c->mode == FAT5__DIST_HOST ? "CPU" : "GPU",
                     none == FAT5__DIST_HOST ? "CPU" : "GPU");
}

static void fat5__dist_nap(int spins) {
    struct timespec ts;
    ts.tv_sec = 0;
    ts.tv_nsec = spins < 1000 ? 0 : spins < 20000 ? 50000 : 2000000;   // spin, then 50 us, then 2 ms naps
    if (ts.tv_nsec) nanosleep(&ts, NULL);
}

// Waits until every rank arrived (host transport), watching for failures and the timeout.
static fat5_status fat5__comm_barrier(fat5__comm *c) {
    fat5__board *b = c->board;
    uint32_t gen = __atomic_load_n(&b->gen, __ATOMIC_ACQUIRE);
    double t0 = fat5__now_s(), next_check = t0 + 0.05;
    int spins = 0;
    fat5_status st;
    __atomic_store_n(&b->seen[c->rank], gen + 1, __ATOMIC_RELEASE);
    if (__atomic_add_fetch(&b->arrive, 1, __ATOMIC_ACQ_REL) == (uint32_t)c->world) {
        __atomic_store_n(&b->arrive, 0, __ATOMIC_RELAXED);
        __atomic_add_fetch(&b->gen, 1, __ATOMIC_RELEASE);
        return FAT5_OK;
    }
    while (__atomic_load_n(&b->gen, __ATOMIC_ACQUIRE) == gen) {
        fat5__dist_nap(spins++);
        if ((spins & 63) == 0) {
            double now = fat5__now_s();
            if (now >= next_check) {
                if ((st = fat5__comm_check(c))) return st;
                next_check = now + 0.05;
            }
            if (now - t0 > c->timeout_s) {   // the first rank that has not arrived is named as failed
                char msg[160];
                int r, late = -1;
                for (r = 0; r < c->world && late < 0; r++)
                    if (__atomic_load_n(&b->seen[r], __ATOMIC_ACQUIRE) != gen + 1) late = r;
                snprintf(msg, sizeof msg, "did not answer rank %d for %.0f s (dist_timeout)", c->rank, c->timeout_s);
                fat5__board_fail(b, late >= 0 ? late : c->rank, msg);
                return fat5__err(c->ctx, FAT5_ERR_STATE, "rank %d stops: rank %d %s", c->rank, late, msg);
            }
        }
    }
    c->wait_s += fat5__now_s() - t0;
    return FAT5_OK;
}

// In-place sum over the ranks of n fp32 (f64 0) or fp64 (f64 1) elements at p on the host
// transport: chunk by chunk, each rank's chunk in its slot, every rank adding slots 0, 1, ... in
// order, so that every rank gets the same bits.
static fat5_status fat5__comm_host_sum(fat5__comm *c, void *p, size_t n, int f64) {
    size_t es = f64 ? 8 : 4, per = FAT5__DIST_SLOT / es, off, i;
    fat5_status st;
    for (off = 0; off < n; off += per) {
        size_t m = n - off < per ? n - off : per;
        int r;
        memcpy(c->slots + (size_t)c->rank * FAT5__DIST_SLOT, (char *)p + off * es, m * es);
        if ((st = fat5__comm_barrier(c))) return st;
        if (f64) {
            double *d = (double *)p + off;
            const double *s0 = (const double *)(const void *)c->slots;
            for (i = 0; i < m; i++) d[i] = s0[i];
            for (r = 1; r < c->world; r++) {
                const double *s = (const double *)(const void *)(c->slots + (size_t)r * FAT5__DIST_SLOT);
                for (i = 0; i < m; i++) d[i] += s[i];
            }
        } else {
            float *d = (float *)p + off;
            const float *s0 = (const float *)(const void *)c->slots;
            for (i = 0; i < m; i++) d[i] = s0[i];
            for (r = 1; r < c->world; r++) {
                const float *s = (const float *)(const void *)(c->slots + (size_t)r * FAT5__DIST_SLOT);
                for (i = 0; i < m; i++) d[i] += s[i];
            }
        }
        if ((st = fat5__comm_barrier(c))) return st;   // nobody refills a slot still being read
    }
    return FAT5_OK;
}

// Reduce-scatter on the host transport: rank r gets the sum over the ranks, in rank order, of
// their send[r n .. (r + 1) n) (fp32), chunk by chunk: each rank puts m elements of every rank's
// chunk in its slot (world x m), then adds slot q's part r for q = 0, 1, ...
static fat5_status fat5__host_comm_reduce_scatter(fat5__comm *c, fat5__addr send_a, fat5__addr recv_a, size_t n) {
    const float *send = (const float *)(uintptr_t)send_a;
    float *recv = (float *)(uintptr_t)recv_a;
    size_t per = FAT5__DIST_SLOT / 4 / (size_t)c->world, off, i;
    fat5_status st;
    for (off = 0; off < n; off += per) {
        size_t m = n - off < per ? n - off : per;
        float *mine = (float *)(void *)(c->slots + (size_t)c->rank * FAT5__DIST_SLOT);
        int q;
        for (q = 0; q < c->world; q++) memcpy(mine + (size_t)q * m, send + (size_t)q * n + off, m * 4);
        if ((st = fat5__comm_barrier(c))) return st;
        for (q = 0; q < c->world; q++) {
            const float *s = (const float *)(const void *)(c->slots + (size_t)q * FAT5__DIST_SLOT) + (size_t)c->rank * m;
            if (q == 0)
                for (i = 0; i < m; i++) recv[off + i] = s[i];
            else
                for (i = 0; i < m; i++) recv[off + i] += s[i];
        }
        if ((st = fat5__comm_barrier(c))) return st;
    }
    return FAT5_OK;
}

// All-gather on the host transport: recv[q n .. (q + 1) n) = rank q's send (fp32), chunk by chunk.
static fat5_status fat5__host_comm_all_gather(fat5__comm *c, fat5__addr send_a, fat5__addr recv_a, size_t n) {
    const float *send = (const float *)(uintptr_t)send_a;
    float *recv = (float *)(uintptr_t)recv_a;
    size_t per = FAT5__DIST_SLOT / 4, off;
    fat5_status st;
    for (off = 0; off < n; off += per) {
        size_t m = n - off < per ? n - off : per;
        int q;
        memcpy(c->slots + (size_t)c->rank * FAT5__DIST_SLOT, send + off, m * 4);
        if ((st = fat5__comm_barrier(c))) return st;
        for (q = 0; q < c->world; q++)
            memcpy(recv + (size_t)q * n + off, c->slots + (size_t)q * FAT5__DIST_SLOT, m * 4);
        if ((st = fat5__comm_barrier(c))) return st;
    }
    return FAT5_OK;
}

static fat5_status fat5__host_comm_sum(fat5__comm *c, fat5__addr p, size_t n, int f64) {
    return fat5__comm_host_sum(c, (void *)(uintptr_t)p, n, f64);
}

#ifndef FAT5_NO_CUDA
// --- the watchdog (NCCL ranks)
// A rank's own thread checks the board, NCCL's errors and the timeout while it waits for the sums
// (fat5__comm_wait), but it can be held elsewhere: in a CUDA call queued behind an NCCL kernel
// that a dead peer never feeds (a training step's own sync, since the step does not wait for the
// gradient sums: fat5__comm_grads_end), or inside an NCCL call. So each rank runs a watchdog
// thread that makes the same checks every 20 ms, and also times the sums from when they were
// queued, and NCCL's join (which has no timeout of its own) from its start. When trouble has lasted
// FAT5__WATCH_GRACE_S without the rank's thread acting on it (at once when the sums or the join
// outlast dist_timeout):
//   - the rank's thread is in no NCCL call: the watchdog aborts NCCL (NCCL's kernels end, so
//     the held CUDA call returns); the rank's next sum, wait or landing stops with the reason;
//   - it is held inside an NCCL call for FAT5__WATCH_GRACE_S: ncclCommAbort would free what that
//     call uses, so the watchdog marks the board and calls the opener's on_held, which in the
//     run layer ends the process: its peers and the launcher see a failed rank, never a hang.
// The rank's thread enters an NCCL call only under nc_mu and while not aborted, so an abort never
// lands inside one. Without threads (FAT5_NO_THREADS) there is no watchdog, and nothing bounds
// the join.
#define FAT5__WATCH_GRACE_S 1.0

static void fat5__comm_lock(fat5__comm *c) {
#if FAT5__THREADS
    if (c->mu_on) pthread_mutex_lock(&c->nc_mu);
#else
    (void)c;
#endif
}

static void fat5__comm_unlock(fat5__comm *c) {
#if FAT5__THREADS
    if (c->mu_on) pthread_mutex_unlock(&c->nc_mu);
#else
    (void)c;
#endif
}

// Ends NCCL once: nc cleared under the lock and the first reason kept, then the abort outside the
// lock (it returns once NCCL's work has stopped). From the watchdog (`watchdog`), nothing is done
// while the rank's thread is inside an NCCL call: then 0.
static int fat5__comm_abort(fat5__comm *c, const char *why, int watchdog) {
    fat5__ncclComm_t nc;
    fat5__comm_lock(c);
    if (watchdog && __atomic_load_n(&c->call_t0_us, __ATOMIC_ACQUIRE)) {
        fat5__comm_unlock(c);
        return 0;
    }
    nc = c->nc;
    c->nc = NULL;
    if (!__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        size_t k = strlen(why);
        if (k >= sizeof c->abort_why) k = sizeof c->abort_why - 1;
        memcpy(c->abort_why, why, k);
        c->abort_why[k] = 0;
        __atomic_store_n(&c->aborted, 1, __ATOMIC_RELEASE);
    }
    fat5__comm_unlock(c);
    if (nc) c->nccl.f.ncclCommAbort(nc);
    return 1;
}

// The error of a rank whose NCCL was aborted (by the watchdog or its own wait).
static fat5_status fat5__comm_aborted_err(fat5__comm *c) {
    if (!__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
        return fat5__err(c->ctx, FAT5_ERR_STATE, "rank %d: NCCL is closed", c->rank);
    return fat5__err(c->ctx, FAT5_ERR_STATE, "%s", c->abort_why);
}

// 1 with why = "NCCL error N (...)" when NCCL reports an asynchronous error; read under the lock
// (the watchdog may clear nc). Beside the rank's ncclAllReduce on a blocking communicator this call
// only reads NCCL's error flags, which is how watchdogs poll NCCL.
static int fat5__comm_nccl_error(fat5__comm *c, char *why, size_t n) {
    fat5__ncclResult_t ae = FAT5__NCCL_SUCCESS;
    fat5__comm_lock(c);
    if (c->nc && c->nccl.f.ncclCommGetAsyncError(c->nc, &ae) != FAT5__NCCL_SUCCESS) ae = FAT5__NCCL_SUCCESS;
    fat5__comm_unlock(c);
    if (ae == FAT5__NCCL_SUCCESS || ae == FAT5__NCCL_IN_PROGRESS) return 0;
    snprintf(why, n, "NCCL error %u (%s)", ae, c->nccl.f.ncclGetErrorString(ae));
    return 1;
}

// What a rank says when its sums outlast dist_timeout (its own wait, or its watchdog), and when
// its join does.
#define FAT5__NO_PROGRESS "an all-reduce made no progress for %.0f s (dist_timeout): a rank hangs or died"
#define FAT5__NO_JOIN "joining NCCL (ncclCommInitRank) took more than %.0f s (dist_timeout): a rank did not start, " \
    "or cannot reach the others"

// Under nc_mu: the call the rank's thread enters now, and the first sum (or try to join) not yet
// waited out, timed (| 1: never 0, which means none).
static void fat5__comm_call_mark(fat5__comm *c) {
    int64_t now_us = (int64_t)(fat5__now_s() * 1e6) | 1;
    __atomic_store_n(&c->call_t0_us, now_us, __ATOMIC_RELEASE);
    if (!__atomic_load_n(&c->queued_t0_us, __ATOMIC_ACQUIRE)) __atomic_store_n(&c->queued_t0_us, now_us, __ATOMIC_RELEASE);
}

// The rank's thread into an NCCL call: nc under the lock, and only while not aborted (the
// watchdog aborts only outside a call), marked. NULL when aborted.
static fat5__ncclComm_t fat5__comm_call_enter(fat5__comm *c) {
    fat5__ncclComm_t nc;
    fat5__comm_lock(c);
    nc = c->nc;
    if (nc) fat5__comm_call_mark(c);
    fat5__comm_unlock(c);
    return nc;
}

// ... and out of it: once the watchdog sees 0 the call has returned (release / acquire).
static void fat5__comm_call_leave(fat5__comm *c) { __atomic_store_n(&c->call_t0_us, 0, __ATOMIC_RELEASE); }

// The join (ncclCommInitRank) is such a call for the watchdog, with the join timed from its first
// try: there is no communicator to abort yet, so a peer that fails meanwhile, or a join longer than
// dist_timeout, ends in on_held. 0 when aborted (between two tries).
static int fat5__comm_join_enter(fat5__comm *c) {
    int ok;
    fat5__comm_lock(c);
    ok = !__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE);
    if (ok) {
        __atomic_store_n(&c->joining, 1, __ATOMIC_RELEASE);
        fat5__comm_call_mark(c);
    }
    fat5__comm_unlock(c);
    return ok;
}

// ... and out of it with nc, the communicator it made (NULL: that try failed, and the join's
// clock keeps running for the next). 1 when nc is now the rank's; 0 when the watchdog aborted
// in the meantime (nc is then aborted too).
static int fat5__comm_join_leave(fat5__comm *c, fat5__ncclComm_t nc) {
    int mine = 0;
    fat5__comm_lock(c);
    fat5__comm_call_leave(c);
    if (nc && !__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
        c->nc = nc;   // the clock stopped before `joining` (the watchdog reads them the other way round)
        __atomic_store_n(&c->queued_t0_us, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&c->joining, 0, __ATOMIC_RELEASE);
        mine = 1;
    }
    fat5__comm_unlock(c);
    if (nc && !mine) c->nccl.f.ncclCommAbort(nc);
    return mine;
}

// The watchdog's last resort: the rank's thread is held inside an NCCL call, which NCCL cannot
// abort under it, and no error can be returned from a call that does not return. The opener's
// on_held decides what happens: the run layer ends the process (fat5__run_held_exit, the one place
// the library does, fat5.h's header says why). Without one the board names this rank and why (its
// peers report it), the log callback gets the message, and the rank stays held.
static void fat5__comm_held(fat5__comm *c, const char *msg) {
    if (c->on_held) {
        c->on_held(c, msg);
        return;
    }
    fat5__board_fail(c->board, c->rank, msg);
    fat5__log(c->ctx, FAT5_LOG_WARN, "rank %d: %s; held inside an NCCL call, which NCCL cannot abort under it",
              c->rank, msg);
}

// One look of the watchdog at time `now`: 1 when it must act, with msg (the reason the rank's
// thread reports). *since: when the trouble seen now was first seen, 0 none.
static FAT5__UNUSED int fat5__comm_watch_once(fat5__comm *c, double now, double *since, char *msg, size_t n) {
    int joining = __atomic_load_n(&c->joining, __ATOMIC_ACQUIRE);   // before the clock: a join that ends
    int64_t tq = __atomic_load_n(&c->queued_t0_us, __ATOMIC_ACQUIRE);   // between the two stops the clock
    int trouble = fat5__comm_trouble(c, msg, n);
    if (!trouble) {
        char why[200];
        if (fat5__comm_nccl_error(c, why, sizeof why)) {
            fat5__board_fail(c->board, c->rank, why);
            snprintf(msg, n, "rank %d stops: %s", c->rank, why);
            trouble = 1;
        }
    }
    if (!trouble && tq > 0 && now - (double)tq * 1e-6 > c->timeout_s) {
        char why[200];
        snprintf(why, sizeof why, joining ? FAT5__NO_JOIN : FAT5__NO_PROGRESS, c->timeout_s);
        fat5__board_fail(c->board, c->rank, why);
        snprintf(msg, n, "rank %d stops: %s", c->rank, why);
        return 1;
    }
    if (!trouble) {
        *since = 0;
        return 0;
    }
    if (*since == 0) *since = now;
    return now - *since >= FAT5__WATCH_GRACE_S;
}

// The watchdog acts on msg: aborts NCCL, or, when the rank's thread is held inside an NCCL call
// for FAT5__WATCH_GRACE_S, calls on_held. 1 once done, 0 to look again at the next tick.
static FAT5__UNUSED int fat5__comm_watch_act(fat5__comm *c, double now, const char *msg) {
    int64_t t_call;
    if (fat5__comm_abort(c, msg, 1)) return 1;
    t_call = __atomic_load_n(&c->call_t0_us, __ATOMIC_ACQUIRE);
    if (t_call == 0 || now - (double)t_call * 1e-6 < FAT5__WATCH_GRACE_S) return 0;
    fat5__comm_held(c, msg);
    return 1;
}

#if FAT5__THREADS
static void *fat5__comm_watch(void *arg) {
    fat5__comm *c = (fat5__comm *)arg;
    double since = 0;
    char msg[640];
    int acting = 0;
    for (;;) {
        struct timespec ts;
        double now;
        ts.tv_sec = 0;
        ts.tv_nsec = 20000000;
        nanosleep(&ts, NULL);
        if (__atomic_load_n(&c->watch_stop, __ATOMIC_ACQUIRE) || __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) break;
        now = fat5__now_s();
        if (!acting) acting = fat5__comm_watch_once(c, now, &since, msg, sizeof msg);
        if (acting && fat5__comm_watch_act(c, now, msg)) break;
    }
    return NULL;
}
#endif

// Starts the watchdog, or starts it again (signals blocked in it: they stay the rank's thread's).
static fat5_status fat5__comm_watch_start(fat5__comm *c) {
#if FAT5__THREADS
    sigset_t all, old;
    int rc;
    if (!c->mu_on && (rc = pthread_mutex_init(&c->nc_mu, NULL)) != 0)
        return fat5__err(c->ctx, FAT5_ERR_OUT_OF_MEMORY, "rank %d: cannot make the watchdog's lock: %s", c->rank, strerror(rc));
    c->mu_on = 1;
    c->watch_stop = 0;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&c->watch, NULL, fat5__comm_watch, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return fat5__err(c->ctx, FAT5_ERR_OUT_OF_MEMORY, "rank %d: cannot start the watchdog thread: %s", c->rank, strerror(rc));
    c->watch_on = 1;
#else
    (void)c;
#endif
    return FAT5_OK;
}

// Ends the watchdog (before NCCL is destroyed, and while the rank's thread maps a new board).
static void fat5__comm_watch_stop(fat5__comm *c) {
#if FAT5__THREADS
    if (!c->watch_on) return;
    __atomic_store_n(&c->watch_stop, 1, __ATOMIC_RELEASE);
    pthread_join(c->watch, NULL);
    c->watch_on = 0;
#else
    (void)c;
#endif
}
#endif

#ifndef FAT5_NO_CUDA
// An NCCL collective is queued on the collectives' stream after the work queued so far on the
// compute stream, inside the watchdog's bracket (fat5__comm_call_enter / _leave). 0 when it may
// go ahead with *nc.
static fat5_status fat5__nccl_enter(fat5__comm *c, fat5__ncclComm_t *nc) {
    struct fat5__gpu *g = c->ctx->gpu;
    fat5_status st;
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return fat5__comm_aborted_err(c);
    if ((st = fat5__dev_check(c->ctx, g->ev.cuEventRecord(c->ev_order, g->stream), "cuEventRecord")) ||
        (st = fat5__dev_check(c->ctx, c->nccl.cu.cuStreamWaitEvent(c->stream, c->ev_order, 0), "cuStreamWaitEvent")))
        return st;
    if (!(*nc = fat5__comm_call_enter(c))) return fat5__comm_aborted_err(c);
    return FAT5_OK;
}

static fat5_status fat5__nccl_leave(fat5__comm *c, fat5__ncclResult_t r, const char *what) {
    fat5__comm_call_leave(c);
    if (r != FAT5__NCCL_SUCCESS) {
        if (!c->pending) __atomic_store_n(&c->queued_t0_us, 0, __ATOMIC_RELEASE);   // nothing queued
        return fat5__nccl_fail(c->ctx, &c->nccl, r, what);
    }
    c->pending = 1;
    return FAT5_OK;
}

static fat5_status fat5__nccl_comm_sum(fat5__comm *c, fat5__addr p, size_t n, int f64) {
    fat5__ncclComm_t nc;
    fat5_status st = fat5__nccl_enter(c, &nc);
    if (st) return st;
    return fat5__nccl_leave(c, c->nccl.f.ncclAllReduce((const void *)(uintptr_t)p, (void *)(uintptr_t)p, n,
                                                       f64 ? FAT5__NCCL_FLOAT64 : FAT5__NCCL_FLOAT32, FAT5__NCCL_SUM,
                                                       nc, c->stream),
                            "ncclAllReduce");
}

static fat5_status fat5__nccl_comm_reduce_scatter(fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n) {
    fat5__ncclComm_t nc;
    fat5_status st = fat5__nccl_enter(c, &nc);
    if (st) return st;
    return fat5__nccl_leave(c, c->nccl.f.ncclReduceScatter((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, n,
                                                           FAT5__NCCL_FLOAT32, FAT5__NCCL_SUM, nc, c->stream),
                            "ncclReduceScatter");
}

static fat5_status fat5__nccl_comm_all_gather(fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n) {
    fat5__ncclComm_t nc;
    fat5_status st = fat5__nccl_enter(c, &nc);
    if (st) return st;
    return fat5__nccl_leave(c, c->nccl.f.ncclAllGather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv, n,
                                                       FAT5__NCCL_FLOAT32, nc, c->stream),
                            "ncclAllGather");
}
#endif

// The collectives, on the backend's transport (fat5__backend: comm_sum, comm_reduce_scatter,
// comm_all_gather, for their shapes). Nothing to move is no call: every rank skips it alike.
static fat5_status fat5__comm_sum(fat5__comm *c, fat5__addr p, size_t n, int f64) {
    return n ? c->be->comm_sum(c, p, n, f64) : FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__comm_reduce_scatter(fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n) {
    return n ? c->be->comm_reduce_scatter(c, send, recv, n) : FAT5_OK;
}

static FAT5__UNUSED fat5_status fat5__comm_all_gather(fat5__comm *c, fat5__addr send, fat5__addr recv, size_t n) {
    return n ? c->be->comm_all_gather(c, send, recv, n) : FAT5_OK;
}

// Orders the compute stream after every queued collective (NCCL), without waiting on the host;
// the compute stream's wait is timed (ev_t0 .. ev_t1) for the step's exposed communication.
static FAT5__UNUSED fat5_status fat5__comm_order_sums(fat5__comm *c) {
#ifndef FAT5_NO_CUDA
    struct fat5__gpu *g = c->ctx->gpu;
    fat5_status st;
    if (c->mode != FAT5__DIST_NCCL || !c->pending) return FAT5_OK;
    c->pending = 0;
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return fat5__comm_aborted_err(c);
    if ((st = fat5__dev_check(c->ctx, g->ev.cuEventRecord(c->ev_done, c->stream), "cuEventRecord")) ||
        (st = fat5__dev_check(c->ctx, g->ev.cuEventRecord(c->ev_t0, g->stream), "cuEventRecord")) ||
        (st = fat5__dev_check(c->ctx, c->nccl.cu.cuStreamWaitEvent(g->stream, c->ev_done, 0), "cuStreamWaitEvent")) ||
        (st = fat5__dev_check(c->ctx, g->ev.cuEventRecord(c->ev_t1, g->stream), "cuEventRecord")))
        return st;
    c->timed = 1;
#else
    (void)c;
#endif
    return FAT5_OK;
}

// ... and waits on the host until they are done, watching the board, NCCL's asynchronous errors
// and the timeout (then aborting NCCL).
static fat5_status fat5__comm_wait_sums(fat5__comm *c) {
#ifndef FAT5_NO_CUDA
    double t0, next_check;
    int spins = 0;
    fat5_status st;
    if (c->mode != FAT5__DIST_NCCL || !c->pending) return FAT5_OK;
    if ((st = fat5__comm_order_sums(c))) return st;
    t0 = fat5__now_s();
    next_check = t0 + 0.05;
    for (;;) {
        fat5__CUresult q = c->nccl.cu.cuEventQuery(c->ev_done);
        double now;
        if (q == FAT5__CUDA_SUCCESS) break;
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return fat5__comm_aborted_err(c);
        if (q != FAT5__CUDA_ERROR_NOT_READY) return fat5__dev_check(c->ctx, q, "waiting for the all-reduce");
        fat5__dist_nap(spins++ + 1000);
        now = fat5__now_s();
        if (now < next_check) continue;
        next_check = now + 0.05;
        {
            const char *why = NULL;
            char msg[200];
            st = fat5__comm_check(c);
            if (!st && fat5__comm_nccl_error(c, msg, sizeof msg)) {
                why = msg;
            } else if (!st && now - t0 > c->timeout_s) {
                snprintf(msg, sizeof msg, FAT5__NO_PROGRESS, c->timeout_s);
                why = msg;
            }
            if (st || why) {
                char keep[700];
                if (why) fat5__board_fail(c->board, c->rank, why);
                snprintf(keep, sizeof keep, "%.690s", st ? fat5_last_error(c->ctx) : why);
                fat5__comm_abort(c, keep, 0);   // frees the stuck kernels; the communicator is gone
                return fat5__err(c->ctx, st ? st : FAT5_ERR_STATE, "%s%s", st ? "" : "rank stops: ", keep);
            }
        }
    }
    // an abort also ends NCCL's kernels: the sums are then incomplete
    if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return fat5__comm_aborted_err(c);
    c->wait_s += fat5__now_s() - t0;
    return FAT5_OK;
#else
    (void)c;
    return FAT5_OK;
#endif
}

// ... and, however that ends, no sum is outstanding any more for the watchdog's clock (after an
// abort the watchdog has stopped looking).
static fat5_status fat5__comm_wait(fat5__comm *c) {
    fat5_status st = fat5__comm_wait_sums(c);
#ifndef FAT5_NO_CUDA
    __atomic_store_n(&c->queued_t0_us, 0, __ATOMIC_RELEASE);
#endif
    return st;
}

// Seconds the compute stream (GPU) or the host (CPU) waited for the others since the last call.
static double fat5__comm_exposed_s(fat5__comm *c) {
    double s = 0;
#ifndef FAT5_NO_CUDA
    if (c->mode == FAT5__DIST_NCCL) {
        float ms = 0;
        if (c->timed && c->ctx->gpu->ev.cuEventSynchronize(c->ev_t1) == FAT5__CUDA_SUCCESS &&
            c->ctx->gpu->ev.cuEventElapsedTime(&ms, c->ev_t0, c->ev_t1) == FAT5__CUDA_SUCCESS)
            s = ms * 1e-3;
        c->timed = 0;
        c->wait_s = 0;
        return s;
    }
#endif
    s = c->wait_s;
    c->wait_s = 0;
    return s;
}

// --- gradient buckets: [n - (j + 1) B, n - j B) for j = 0, 1, ..., the top of the parameter arena
// first, because the backward finishes the gradients from the top down (lm_head, the decoder's
// last layer, ..., the encoder's first layer, the shared embedding).

static void fat5__comm_grads_begin(fat5__comm *c, fat5__addr gd, size_t n) {
    c->gd = gd;
    c->next_hi = n;
}

// Every gradient at float offset >= lo is final: sums the whole buckets above lo, from the top.
// Once what is left fits one bucket, sums what is final at every call (a layer at a time), so that
// the sum left for after the backward, which nothing overlaps, is only the last layer's. The calls
// come in the same order with the same offsets on every rank, so the buckets match.
static fat5_status fat5__comm_grads_ready(void *user, size_t lo) {
    fat5__comm *c = (fat5__comm *)user;
    fat5_status st;
    while (c->next_hi > lo) {
        size_t b_lo = c->next_hi > c->bucket ? c->next_hi - c->bucket : 0;
        if (b_lo < lo) {
            if (c->next_hi > c->bucket) break;   // not a whole bucket yet
            b_lo = lo;                            // the last bucket's worth: what is final now
        }
        if ((st = fat5__comm_sum(c, c->gd + (fat5__addr)b_lo * 4, c->next_hi - b_lo, 0))) return st;
        c->next_hi = b_lo;
    }
    return FAT5_OK;
}

// The rest of the gradients, then `n_extra` doubles at `extra` (losses and votes). On GPUs with a
// watchdog the host does not wait here: the compute stream is ordered after the sums, so the work
// queued next (the optimizer) runs as soon as they are done instead of after the host has woken
// and queued it, and the host waits once, at the step's own sync. fat5__comm_grads_landed follows
// that sync. Without a watchdog (FAT5_NO_THREADS) nothing would free a rank held in that sync
// behind a sum that a dead peer never feeds, so the host waits here, watching (fat5__comm_wait).
static fat5_status fat5__comm_grads_end(fat5__comm *c, fat5__addr extra, size_t n_extra) {
    fat5_status st;
    if ((st = fat5__comm_grads_ready(c, 0))) return st;
    if ((st = fat5__comm_sum(c, extra, n_extra, 1))) return st;
#if !defined(FAT5_NO_CUDA) && FAT5__THREADS
    if (c->mode == FAT5__DIST_NCCL && c->watch_on) return fat5__comm_order_sums(c);
#endif
    return fat5__comm_wait(c);
}

// After fat5__comm_grads_end, once the host has synchronised the compute stream past the sums:
// they are done, unless the watchdog aborted NCCL meanwhile (a peer failed; the sums, and what was
// computed from them, are then incomplete: the rank stops with why, and fat5_train_save refuses).
// The abort sets `aborted` before ncclCommAbort ends NCCL's kernels, and the host's sync returns
// only after they ended, so incomplete sums are always seen here. Stops the sums' clock.
static fat5_status fat5__comm_grads_landed(fat5__comm *c) {
#ifndef FAT5_NO_CUDA
    if (c->mode == FAT5__DIST_NCCL) {
        __atomic_store_n(&c->queued_t0_us, 0, __ATOMIC_RELEASE);
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return fat5__comm_aborted_err(c);
    }
#else
    (void)c;
#endif
    return FAT5_OK;
}

// The sum over the ranks of n host doubles (evaluation totals), in place, now.
static fat5_status fat5__comm_sum_host(fat5__comm *c, double *v, size_t n, fat5__addr scratch) {
    fat5_status st;
    if (c->world == 1) return FAT5_OK;
    if (c->mode == FAT5__DIST_HOST) return fat5__comm_host_sum(c, v, n, 1);
    if ((st = c->be->upload(c->ctx, scratch, v, n * 8)) || (st = fat5__comm_sum(c, scratch, n, 1)) ||
        (st = fat5__comm_wait(c)))
        return st;
    (void)fat5__comm_exposed_s(c);
    return c->be->download(c->ctx, v, scratch, n * 8);
}

// --- meeting: the board from fat5_launch's file descriptor, or a rendezvous file

static size_t fat5__board_bytes(int world, int host) {
    return sizeof(fat5__board) + (host ? (size_t)world * FAT5__DIST_SLOT : 0);
}

static fat5_status fat5__comm_map(fat5__comm *c, int fd, size_t bytes, const char *what) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return fat5__err(c->ctx, FAT5_ERR_IO, "%s: mmap of %zu bytes failed: %s", what, bytes, strerror(errno));
    c->board = (fat5__board *)p;
    c->board_bytes = bytes;
    c->slots = (unsigned char *)p + sizeof(fat5__board);
    return FAT5_OK;
}

// The waits for a rendezvous file look every 20 ms (a shared filesystem's server sees them all).
static void fat5__dist_pause(void) {
    struct timespec ts;
    ts.tv_sec = 0;
    ts.tv_nsec = 20000000;
    nanosleep(&ts, NULL);
}

// Rank 0 writes the board file (under a temporary name, renamed over the path when complete: the
// path never goes missing when a new run replaces a killed run's file); the others wait for it to
// appear with this run's size, then map it.
static fat5_status fat5__comm_file(fat5__comm *c, const char *path, size_t bytes, const unsigned char *id) {
    fat5_ctx *ctx = c->ctx;
    int fd;
    fat5_status st;
    snprintf(c->file, sizeof c->file, "%s", path);
    if (c->rank == 0) {
        char tmp[4300];
        fat5__board *b;
        struct stat sb;
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
        fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) return fat5__err(ctx, FAT5_ERR_IO, "rendezvous %s: cannot create: %s", tmp, strerror(errno));
        if (ftruncate(fd, (off_t)bytes) != 0 || fstat(fd, &sb) != 0) {
            close(fd);
            (void)unlink(tmp);
            return fat5__err(ctx, FAT5_ERR_IO, "rendezvous %s: cannot size: %s", tmp, strerror(errno));
        }
        c->file_ino = (unsigned long long)sb.st_ino;
        c->file_dev = (unsigned long long)sb.st_dev;
        st = fat5__comm_map(c, fd, bytes, tmp);
        close(fd);
        if (st) {
            (void)unlink(tmp);
            return st;
        }
        b = c->board;
        b->world = c->world;
        b->failed = b->claim = -1;
        if (id) {
            memcpy(b->nccl_id, id, sizeof b->nccl_id);
            b->id_ready = 1;
        }
        b->magic = FAT5__DIST_MAGIC;
        if (msync(c->board, bytes, MS_SYNC) != 0 || rename(tmp, path) != 0) {
            (void)unlink(tmp);
            return fat5__err(ctx, FAT5_ERR_IO, "rendezvous %s: cannot publish: %s", path, strerror(errno));
        }
        return FAT5_OK;
    }
    {
        // A board with a failure on it is a failed run's: a killed run leaves its file, which the
        // next run's rank 0 replaces; a rank 0 that stops removes it (then the path stays gone:
        // this rank came late to a run that failed, and says so). Every look maps the file
        // anew: a replacement is told by its board, not its inode (a shared filesystem may give
        // the new file the old one's number).
        double t0 = fat5__now_s(), gone_since = 0;
        char why[sizeof c->board->why + 40];
        why[0] = 0;
        for (;;) {
            struct stat sb;
            double now = fat5__now_s();
            fd = open(path, O_RDWR);
            if (fd < 0 && errno == ENOENT) {
                if (gone_since == 0) gone_since = now;
                if (why[0] && now - gone_since > 1.0)
                    return fat5__err(ctx, FAT5_ERR_STATE, "rank %d stops: the run at rendezvous %s has stopped (%s)",
                                     c->rank, path, why);
            } else {
                gone_since = 0;
            }
            if (fd >= 0 && fstat(fd, &sb) == 0 && (size_t)sb.st_size == bytes) {
                int32_t f;
                c->file_ino = (unsigned long long)sb.st_ino;
                c->file_dev = (unsigned long long)sb.st_dev;
                st = fat5__comm_map(c, fd, bytes, path);
                close(fd);
                if (st) return st;
                if (c->board->magic != FAT5__DIST_MAGIC || c->board->world != c->world)
                    return fat5__err(ctx, FAT5_ERR_FORMAT, "rendezvous %s: not this run's (world size %d, expected %d)",
                                     path, (int)c->board->world, c->world);
                if ((f = __atomic_load_n(&c->board->failed, __ATOMIC_ACQUIRE)) < 0) return FAT5_OK;
                snprintf(why, sizeof why, "rank %d failed: %.*s", (int)f, (int)sizeof c->board->why - 1,
                         (const char *)c->board->why);
                munmap((void *)c->board, c->board_bytes);
                c->board = NULL;
            } else if (fd >= 0) {
                close(fd);
            }
            if (now - t0 > c->timeout_s) {
                if (why[0])
                    return fat5__err(ctx, FAT5_ERR_STATE, "rank %d: rendezvous %s is a failed run's (%s), and rank 0 did "
                                     "not replace it within %.0f s", c->rank, path, why, c->timeout_s);
                return fat5__err(ctx, FAT5_ERR_STATE, "rank %d: rendezvous %s did not appear with this run's size "
                                 "(%zu bytes) within %.0f s: is rank 0 running, with world_size %d?", c->rank, path,
                                 bytes, c->timeout_s, c->world);
            }
            fat5__dist_pause();
        }
    }
}

// NCCL's id from the board this rank mapped from the rendezvous file.
static FAT5__UNUSED fat5_status fat5__comm_board_id(fat5__comm *c, const char *rendezvous, unsigned char *id) {
    if (!c->board->id_ready) return fat5__err(c->ctx, FAT5_ERR_FORMAT, "rendezvous %s: no NCCL id in it", rendezvous);
    memcpy(id, c->board->nccl_id, sizeof c->board->nccl_id);
    return FAT5_OK;
}

// 1 when the file at the rendezvous path is no longer the board this rank mapped: another file,
// or (a shared filesystem can reuse an inode number) another NCCL id in it.
static FAT5__UNUSED int fat5__comm_file_replaced(fat5__comm *c) {
    struct stat sb;
    unsigned char id[sizeof c->board->nccl_id];
    int fd = open(c->file, O_RDONLY), replaced;
    if (fd < 0) return 0;   // gone: nothing to join instead
    if (fstat(fd, &sb) != 0) replaced = 0;
    else if ((unsigned long long)sb.st_ino != c->file_ino || (unsigned long long)sb.st_dev != c->file_dev) replaced = 1;
    else
        replaced = pread(fd, id, sizeof id, (off_t)offsetof(fat5__board, nccl_id)) == (ssize_t)sizeof id &&
                   memcmp(id, c->board->nccl_id, sizeof id) != 0;
    close(fd);
    return replaced;
}

// CPU ranks meeting in a rendezvous file (one host): every rank checks in with a token of its own
// and waits for rank 0 to echo it, opening the path again when rank 0 has replaced the file, so
// that no rank stays in a file a killed run left behind.
static fat5_status fat5__comm_checkin(fat5__comm *c, const char *path, size_t bytes) {
    uint32_t token = ((uint32_t)getpid() * 2654435761u) ^ (uint32_t)(uint64_t)(fat5__now_s() * 1e6) ^ (uint32_t)c->rank;
    double t0 = fat5__now_s();
    int r;
    fat5_status st;
    token |= 1u;
    for (;;) {
        double now = fat5__now_s();
        if (c->rank == 0) {   // everyone checked in: echo their tokens
            int all = 1;
            for (r = 1; r < c->world; r++) all &= __atomic_load_n(&c->board->join[r], __ATOMIC_ACQUIRE) != 0;
            if (all) {
                for (r = 1; r < c->world; r++)
                    __atomic_store_n(&c->board->ack[r], __atomic_load_n(&c->board->join[r], __ATOMIC_ACQUIRE),
                                     __ATOMIC_RELEASE);
                return FAT5_OK;
            }
        } else {
            struct stat sb;
            __atomic_store_n(&c->board->join[c->rank], token, __ATOMIC_RELEASE);
            if (__atomic_load_n(&c->board->ack[c->rank], __ATOMIC_ACQUIRE) == token) return FAT5_OK;
            if (stat(path, &sb) != 0 || (unsigned long long)sb.st_ino != c->file_ino ||
                (unsigned long long)sb.st_dev != c->file_dev) {   // replaced (one host: the mapping keeps the inode)
                munmap((void *)c->board, c->board_bytes);
                c->board = NULL;
                if ((st = fat5__comm_file(c, path, bytes, NULL))) return st;
            }
        }
        if ((st = fat5__comm_check(c))) return st;   // a rank that failed meanwhile
        if (now - t0 > c->timeout_s)
            return fat5__err(c->ctx, FAT5_ERR_STATE, "rank %d: the ranks did not all meet in rendezvous %s within %.0f s",
                             c->rank, path, c->timeout_s);
        fat5__dist_pause();
    }
}

// Leaves the run. When every rank is well, the ranks leave together (a last sum of one value):
// none exits while rank 0 still writes its checkpoint, and NCCL's communicators are destroyed
// together; after a failure (this rank's or another's) nothing is waited for and NCCL is aborted.
static void fat5__comm_close(fat5__comm *c) {
    int well;
    if (!c) return;
    well = !c->failed && (!c->board || __atomic_load_n(&c->board->failed, __ATOMIC_ACQUIRE) < 0);
#ifndef FAT5_NO_CUDA
    if (c->mode == FAT5__DIST_NCCL) {
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) well = 0;
        if (well && c->world > 1) {
            fat5__addr one = 0;
            if (c->be->alloc(c->ctx, 8, &one) == FAT5_OK) {
                if (fat5__comm_sum(c, one, 1, 1) || fat5__comm_wait(c)) well = 0;
                c->be->free(c->ctx, one);
            } else {   // the others wait in that sum: tell them
                fat5__board_fail(c->board, c->rank, "out of device memory while leaving");
                well = 0;
            }
        }
        if (c->pending && well) (void)fat5__comm_wait(c);
        fat5__comm_watch_stop(c);   // then this thread alone touches nc
        if (c->nc) {
            if (well) c->nccl.f.ncclCommDestroy(c->nc);
            else c->nccl.f.ncclCommAbort(c->nc);
        }
#if FAT5__THREADS
        if (c->mu_on) pthread_mutex_destroy(&c->nc_mu);
#endif
        if (c->ev_order) c->ctx->gpu->ev.cuEventDestroy(c->ev_order);
        if (c->ev_done) c->ctx->gpu->ev.cuEventDestroy(c->ev_done);
        if (c->ev_t0) c->ctx->gpu->ev.cuEventDestroy(c->ev_t0);
        if (c->ev_t1) c->ctx->gpu->ev.cuEventDestroy(c->ev_t1);
        if (c->stream) c->ctx->gpu->cu.cuStreamDestroy(c->stream);
    }
#endif
    if (c->board) {
        // the host transport's last barrier: nobody unmaps slots another rank may still read
        if (c->mode == FAT5__DIST_HOST && well && c->world > 1) (void)fat5__comm_barrier(c);
        munmap((void *)c->board, c->board_bytes);
    }
    fat5__comm_unlink_own(c);
    {
        int i;
        for (i = 0; i < 3; i++)
            if (c->fds[i] >= 0) close(c->fds[i]);
    }
    fat5__free(c->ctx, c);
}

#ifndef FAT5_NO_CUDA
// Joins NCCL (c->nc) with the id uid, under the watchdog, which starts here: NCCL's join waits
// for every rank without a timeout of its own, and the watchdog bounds it (fat5__comm_join_enter).
// The watchdog runs with one rank too, so the one-GPU runs start and stop it beside a real
// communicator. A rendezvous file that a killed run left holds an id nobody answers: once rank 0
// has replaced the file, the join starts again with the new id.
static fat5_status fat5__comm_join(fat5__comm *c, fat5__ncclUniqueId uid, const char *rendezvous, size_t bytes) {
    double t0 = fat5__now_s();
    fat5_status st;
    if ((st = fat5__comm_watch_start(c))) return st;
    for (;;) {
        fat5__ncclComm_t nc = NULL;
        fat5__ncclResult_t r;
        if (!fat5__comm_join_enter(c)) return fat5__comm_aborted_err(c);
        if ((r = c->nccl.f.ncclCommInitRank(&nc, c->world, uid, c->rank)) != FAT5__NCCL_SUCCESS) nc = NULL;
        if (fat5__comm_join_leave(c, nc)) return FAT5_OK;
        if (nc) return fat5__comm_aborted_err(c);   // joined, but the watchdog had given up
        if (c->file[0] && c->rank != 0 && fat5__now_s() - t0 < c->timeout_s && fat5__comm_file_replaced(c)) {
            fat5__comm_watch_stop(c);   // it reads the board
            munmap((void *)c->board, c->board_bytes);
            c->board = NULL;
            __atomic_store_n(&c->queued_t0_us, 0, __ATOMIC_RELEASE);   // the new run's join gets its own clock
            if ((st = fat5__comm_file(c, rendezvous, bytes, NULL)) || (st = fat5__comm_watch_start(c)) ||
                (st = fat5__comm_board_id(c, rendezvous, (unsigned char *)uid.internal)))
                return st;
            continue;
        }
        return fat5__nccl_fail(c->ctx, &c->nccl, r, "ncclCommInitRank");
    }
}

#endif

// Opens rank `rank` of `world` on the model's backend. rendezvous: "launch:SHM:READ:WRITE"
// (fat5_launch's descriptors), a file path (every rank names the same; a shared filesystem when
// the ranks are on several hosts, NCCL only), or "NCCL_COMM_ID": NCCL's own rendezvous at the
// host:port that environment variable holds on every rank (rank 0 listens there; GPU only).
static fat5_status fat5__comm_open(fat5_ctx *ctx, const fat5__backend *be, int rank, int world, const char *rendezvous,
                                   double timeout_s, double bucket_mb, fat5__comm_held_fn on_held, fat5__comm **out) {
    fat5__comm *c;
    int host = be->comm_transport == FAT5__DIST_HOST, shm = -1, pr = -1, pw = -1, by_env;
    size_t bytes = fat5__board_bytes(world, host);
    unsigned char id[128];   // NCCL's unique id
    fat5_status st = FAT5_OK;
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "rank %d of world_size %d: expected 0 <= rank < world_size", rank, world);
    if (host && world > FAT5__DIST_MAX_LOCAL)
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "world_size %d: the CPU's shared-memory transport takes %d ranks at "
                         "most", world, FAT5__DIST_MAX_LOCAL);
    if (!rendezvous || !rendezvous[0])
        return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "world_size %d: no rendezvous (a file every rank can reach, or "
                         "fat5_launch's)", world);
    c = FAT5__CAST(fat5__comm *, fat5__calloc(ctx, 1, sizeof *c));
    if (!c) return fat5__err(ctx, FAT5_ERR_OUT_OF_MEMORY, "out of memory");
    c->ctx = ctx;
    c->be = be;
    c->rank = rank;
    c->world = world;
    c->mode = be->comm_transport;
#ifndef FAT5_NO_CUDA
    c->on_held = on_held;
#else
    (void)on_held;
#endif
    c->fds[0] = c->fds[1] = c->fds[2] = -1;
    c->timeout_s = timeout_s > 0 ? timeout_s : 900;
    c->bucket = (size_t)(bucket_mb > 0 ? bucket_mb * 1048576.0 / 4 : 100.0 * 1048576 / 4);
    if (c->bucket < 1024) c->bucket = 1024;
    if (strncmp(rendezvous, "launch:", 7) == 0) {
        if (sscanf(rendezvous + 7, "%d:%d:%d", &shm, &pr, &pw) != 3 || shm < 0) {
            fat5__free(ctx, c);
            return fat5__err(ctx, FAT5_ERR_INVALID_ARG, "rendezvous '%s': expected launch:SHM:READ:WRITE (from fat5_launch)",
                             rendezvous);
        }
        c->launched = c->local = 1;
        c->fds[0] = shm, c->fds[1] = pr, c->fds[2] = pw;
        {   // fat5_launch sized the board for the host transport
            size_t have = fat5__board_bytes(world, 1);
            if ((st = fat5__comm_map(c, shm, have, "the launcher's board"))) goto fail;
        }
        if (c->board->magic != FAT5__DIST_MAGIC || c->board->world != world) {
            st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "rendezvous '%s': the launcher started %d ranks, this run says "
                           "world_size %d", rendezvous, (int)c->board->world, world);
            goto fail;
        }
    }
    by_env = strcmp(rendezvous, "NCCL_COMM_ID") == 0;
    if (by_env && (host || !getenv("NCCL_COMM_ID") || !getenv("NCCL_COMM_ID")[0])) {
        st = fat5__err(ctx, FAT5_ERR_INVALID_ARG, "rendezvous NCCL_COMM_ID: %s", host ? "GPU ranks (NCCL) only; CPU "
                       "ranks meet through a file" : "the environment variable NCCL_COMM_ID (host:port of rank 0's "
                       "machine) is not set");
        goto fail;
    }
    if (c->mode == FAT5__DIST_HOST) {
        c->local = 1;
        if (!c->launched && ((st = fat5__comm_file(c, rendezvous, bytes, NULL)) ||
                             (st = fat5__comm_checkin(c, rendezvous, bytes))))
            goto fail;
        if ((st = fat5__comm_same_transport(c))) goto fail;
        __atomic_store_n(&c->board->pid[rank], (int32_t)getpid(), __ATOMIC_RELEASE);
        if ((st = fat5__comm_barrier(c))) goto fail;   // all here
        *out = c;
        return FAT5_OK;
    }
#ifndef FAT5_NO_CUDA
    {
        struct fat5__gpu *g = ctx->gpu;
        fat5__ncclResult_t r;
        fat5__ncclUniqueId uid;
        int least = 0, greatest = 0;   // stream priorities (the greatest: the lowest number)
        if ((st = fat5__nccl_open(ctx, &c->nccl))) goto fail;
        // rank 0 makes the id (with NCCL_COMM_ID every rank does: NCCL derives it from the address)
        if ((rank == 0 || by_env) && (r = c->nccl.f.ncclGetUniqueId(&uid)) != FAT5__NCCL_SUCCESS) {
            st = fat5__nccl_fail(ctx, &c->nccl, r, "ncclGetUniqueId");
            goto fail;
        }
        if (rank == 0 || by_env) memcpy(id, uid.internal, sizeof id);
        if (by_env) {
            // nothing to exchange; no board: a failed peer shows as NCCL's error or the timeout
        } else if (c->launched) {
            if ((st = fat5__comm_same_transport(c))) goto fail;
            if (rank == 0) {
                int i;
                for (i = 1; i < world; i++)
                    if (write(pw, id, sizeof id) != (ssize_t)sizeof id) {
                        st = fat5__err(ctx, FAT5_ERR_IO, "rank 0: cannot send NCCL's id to the other ranks: %s", strerror(errno));
                        goto fail;
                    }
            } else {   // rank 0's id, watching the board and the timeout meanwhile
                size_t got = 0;
                double t0 = fat5__now_s();
                while (got < sizeof id) {
                    struct pollfd pf;
                    ssize_t k;
                    int pn;
                    pf.fd = pr;
                    pf.events = POLLIN;
                    pf.revents = 0;
                    pn = poll(&pf, 1, 100);
                    if (pn < 0 && errno == EINTR) pn = 0;   // a signal: check and wait again
                    if (pn == 0) {
                        if ((st = fat5__comm_check(c))) goto fail;
                        if (fat5__now_s() - t0 > c->timeout_s) {
                            st = fat5__err(ctx, FAT5_ERR_STATE, "rank %d: no NCCL id from rank 0 within %.0f s "
                                           "(dist_timeout)", rank, c->timeout_s);
                            goto fail;
                        }
                        continue;
                    }
                    k = read(pr, id + got, sizeof id - got);
                    if (k < 0 && errno == EINTR) continue;
                    if (k <= 0) {
                        st = fat5__err(ctx, FAT5_ERR_STATE, "rank %d: rank 0 exited before sharing NCCL's id", rank);
                        goto fail;
                    }
                    got += (size_t)k;
                }
            }
            __atomic_store_n(&c->board->pid[rank], (int32_t)getpid(), __ATOMIC_RELEASE);
        } else {
            if ((st = fat5__comm_file(c, rendezvous, bytes, rank == 0 ? id : NULL)) ||
                (st = fat5__comm_board_id(c, rendezvous, id)))
                goto fail;
        }
        memcpy(uid.internal, id, sizeof id);
        if ((st = fat5__comm_join(c, uid, rendezvous, bytes))) goto fail;
        // The collectives' stream at the device's highest priority: a bucket's all-reduce launched
        // while the backward's products fill the GPU gets the next free SMs instead of waiting
        // behind the products queued after it, so less of the sum is left for after the backward.
        // Priorities are hints: the order of the two streams' work is the events' only.
        if ((st = fat5__dev_check(ctx, c->nccl.cu.cuCtxGetStreamPriorityRange(&least, &greatest),
                                  "cuCtxGetStreamPriorityRange")) ||
            (st = fat5__dev_check(ctx, c->nccl.cu.cuStreamCreateWithPriority(&c->stream, FAT5__CU_STREAM_NON_BLOCKING,
                                                                             greatest),
                                  "cuStreamCreateWithPriority")) ||
            (st = fat5__dev_check(ctx, g->ev.cuEventCreate(&c->ev_order, 2), "cuEventCreate")) ||
            (st = fat5__dev_check(ctx, g->ev.cuEventCreate(&c->ev_done, 2), "cuEventCreate")) ||
            (st = fat5__dev_check(ctx, g->ev.cuEventCreate(&c->ev_t0, 0), "cuEventCreate")) ||
            (st = fat5__dev_check(ctx, g->ev.cuEventCreate(&c->ev_t1, 0), "cuEventCreate")))
            goto fail;
        *out = c;
        return FAT5_OK;
    }
#else
    (void)id;
    (void)pr;
    (void)pw;
    st = fat5__err(ctx, FAT5_ERR_NO_DEVICE, "several ranks on the GPU: built with FAT5_NO_CUDA");
#endif
fail:
    if (c->board && c->world > 1) {
        char msg[200];
        snprintf(msg, sizeof msg, "could not join: %.160s", fat5_last_error(ctx));
        fat5__board_fail(c->board, rank, msg);
    }
    {
        char keep[1024];
        snprintf(keep, sizeof keep, "%.1000s", fat5_last_error(ctx));
        c->failed = 1;   // close aborts what was made, waits for nobody
        fat5__comm_close(c);
        return fat5__err(ctx, st, "%s", keep);
    }
}

