/* realjobs.c -- NCCL programs that die the way real training jobs die: a watchdog aborting the
 * ranks that wait, a rank killed by the OOM killer, restarts, failed calls, misconfigured
 * launches, one process driving several GPUs, an exception inside a group, child
 * communicators, GPU-like queues running far ahead, an aborted communicator, a stopped rank, an
 * asynchronous NCCL error, nodes given the wrong world size.
 *
 * Usage: realjobs MODE   (run as N ranks by a launcher; RANK/WORLD_SIZE in the environment)
 * Knobs (all optional):
 *   SCENARIO_VICTIM       the rank that misbehaves (default the last)
 *   SCENARIO_STEPS        training steps before the failure (default 3)
 *   SCENARIO_STEP_MS      compute per training step, ms (default 10)
 *   SCENARIO_DELAY_MS     how long the late rank stays busy (default 60000)
 *   SCENARIO_BUSY         how the late rank is busy: "compute" (default) or "sleep"
 *   SCENARIO_WATCHDOG_MS  the watchdog's timeout (default 0: no watchdog)
 *   SCENARIO_WATCHDOG     what it does then: "abort" (SIGABRT, default) or "commabort"
 *                         (ncclCommAbort from the watchdog thread; the blocked call fails and
 *                         the rank exits 1)
 *   SCENARIO_PLAN         restart: what each attempt does, comma-separated (segv, oom, clean,
 *                         hang), indexed by TORCHELASTIC_RESTART_COUNT
 *   SCENARIO_NDEV         GPUs per process (initall, multigpu; default 4 and 2)
 *   SCENARIO_FAR          far_apart: collectives issued past the stuck one (default 3000)
 *   SCENARIO_LATE         ranks (comma-separated) that compute SCENARIO_LATE_MS more than the
 *                         others: oom_kill, in every step from SCENARIO_LATE_FROM on (default
 *                         1): ranks that are always late, or (from the last step) stuck;
 *                         restart, once before the barrier that ends the attempt
 * async_error needs the victim's NCCL to report an asynchronous error after step
 * SCENARIO_STEPS: on the emulator LOCKSTEP_EMU_ASYNC_ERROR=VICTIM:STEPS (tests/emulator).
 * wrong_world needs a launcher that gives some ranks a WORLD_SIZE too small for their RANK
 * (launch-ranks --world-sizes).
 * Every collective waits for its result with tp_sync(), as a training loop does (a no-op
 * unless LOCKSTEP_EMU_ASYNC=1). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static int rank, world, victim, steps, step_ms, delay_ms;
static float grad[1024];
static ncclComm_t world_comm;

/* Computes for `ms` milliseconds: work of the rank's own, not in NCCL. A frame of its own in
 * every stack the tests read, as its callers are. */
__attribute__((noinline)) void compute_ms(int ms)
{
    uint64_t end = tp_mono_ms() + (uint64_t)ms;
    volatile double x = 1.0;
    while (tp_mono_ms() < end)
        for (int i = 0; i < 20000; i++)
            x = x * 1.0000001 + 1e-9;
}

/* ---- the watchdog (PyTorch's ProcessGroupNCCL does this on a thread of its own) ---------- */

static _Atomic uint64_t work_since_ms; /* when the collective in flight was issued, 0 none */
static _Atomic int watchdog_fired;

/* Marks a collective as in flight for the watchdog. */
static void work_begin(void)
{
    atomic_store(&work_since_ms, tp_mono_ms());
}

static void work_end(void)
{
    atomic_store(&work_since_ms, 0);
}

static void *watchdog_main(void *arg)
{
    int timeout = *(int *)arg;
    const char *action = tp_env_str("SCENARIO_WATCHDOG", "abort");
    for (;;) {
        tp_sleep_ms(20);
        uint64_t since = atomic_load(&work_since_ms);
        if (!since || tp_mono_ms() - since < (uint64_t)timeout)
            continue;
        fprintf(stderr, "rank %d: watchdog: collective operation timed out after %d ms\n", rank,
                timeout);
        atomic_store(&watchdog_fired, 1);
        if (strcmp(action, "commabort") == 0) {
            ncclCommAbort(world_comm); /* the blocked call now fails; the main thread exits */
            return NULL;
        }
        abort(); /* what an uncaught exception on the watchdog thread ends in */
    }
    return NULL;
}

static void start_watchdog(void)
{
    static int timeout;
    timeout = tp_env_int("SCENARIO_WATCHDOG_MS", 0);
    if (timeout <= 0)
        return;
    pthread_t th;
    if (pthread_create(&th, NULL, watchdog_main, &timeout) != 0)
        tp_die("cannot start the watchdog");
    pthread_detach(th);
}

/* PyTorch's watchdog also polls every communicator for an asynchronous NCCL error (a peer or
 * the network failed); on one it aborts the communicator and the rank dies (the exception it
 * raises ends the process). Each poll is its own call site. */
static pthread_t async_poller;
static _Atomic int async_polling;

static _Atomic int async_logged; /* SCENARIO_ON_ERROR=log: the error was logged, polls end */

void poll_async_error(void)
{
    ncclResult_t err = ncclSuccess;
    if (atomic_load(&async_logged) || ncclCommGetAsyncError(world_comm, &err) != ncclSuccess ||
        err == ncclSuccess || err == ncclInProgress)
        return;
    if (strcmp(tp_env_str("SCENARIO_ON_ERROR", "abort"), "log") == 0) {
        /* PyTorch's watchdog raising the error in its own thread while the rank goes on */
        fprintf(stderr, "rank %d: watchdog: NCCL reported an asynchronous error (%s)\n", rank,
                ncclGetErrorString(err));
        atomic_store(&async_logged, 1);
        return;
    }
    fprintf(stderr, "rank %d: watchdog: NCCL reported an asynchronous error (%s); aborting\n", rank,
            ncclGetErrorString(err));
    ncclCommAbort(world_comm);
    exit(1);
}

static void *async_poller_main(void *arg)
{
    (void)arg;
    while (atomic_load(&async_polling)) {
        poll_async_error();
        tp_sleep_ms(20);
    }
    return NULL;
}

static void start_async_poller(void)
{
    atomic_store(&async_polling, 1);
    if (pthread_create(&async_poller, NULL, async_poller_main, NULL) != 0)
        tp_die("cannot start the asynchronous error poller");
}

/* Stops the poller before the communicator goes (a rank that ends cleanly). */
static void stop_async_poller(void)
{
    if (atomic_exchange(&async_polling, 0))
        pthread_join(async_poller, NULL);
}

/* ---- training-loop pieces, each its own function so call sites name them ---------------- */

/* One training step: compute, then the gradient AllReduce every rank issues. */
void train_step(ncclComm_t c)
{
    compute_ms(step_ms);
    work_begin();
    TP_CHECK(ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, c, NULL));
    tp_sync();
    work_end();
}

/* A barrier as torch.distributed implements it on NCCL: an AllReduce of one element. */
void barrier(ncclComm_t c)
{
    work_begin();
    TP_CHECK(ncclAllReduce(grad, grad, 1, ncclFloat32, ncclSum, c, NULL));
    tp_sync();
    work_end();
}

/* The late rank's own work: reading a slow shard, downloading, preprocessing. A frame of its own
 * in every stack the tests read. */
__attribute__((noinline)) void load_batch(void)
{
    if (strcmp(tp_env_str("SCENARIO_BUSY", "compute"), "sleep") == 0)
        tp_sleep_ms(delay_ms);
    else
        compute_ms(delay_ms);
}

static void run_steps(ncclComm_t c, int n)
{
    for (int i = 0; i < n; i++)
        train_step(c);
}

/* ---- modes ------------------------------------------------------------------------------ */

/* The victim is busy loading data while the others wait at the barrier; their watchdogs
 * fire, and the launcher stops the victim. */
static void mode_watchdog(void)
{
    run_steps(world_comm, steps);
    if (rank == victim)
        load_batch();
    barrier(world_comm);
    run_steps(world_comm, 1);
}

/* The OOM killer takes the victim in the middle of a step's compute. */
/* True when `r` is in the comma-separated list `list`. */
static int listed(const char *list, int r)
{
    for (const char *s = list; *s;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s)
            return 0;
        if (v == r)
            return 1;
        s = *end == ',' ? end + 1 : end;
    }
    return 0;
}

void forward_pass(int step)
{
    if (rank == victim && step == steps) {
        compute_ms(step_ms / 2);
        raise(SIGKILL);
    }
    compute_ms(step_ms);
    if (step >= tp_env_int("SCENARIO_LATE_FROM", 1) &&
        listed(tp_env_str("SCENARIO_LATE", ""), rank))
        compute_ms(tp_env_int("SCENARIO_LATE_MS", 0));
}

static void mode_oom_kill(void)
{
    for (int i = 1; i <= steps + 1; i++) {
        forward_pass(i);
        work_begin();
        TP_CHECK(ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, world_comm, NULL));
        tp_sync();
        work_end();
    }
}

void bad_pointer(void)
{
    volatile int *p = NULL;
    *p = 42;
}

/* One attempt of a job the launcher restarts: SCENARIO_PLAN names what attempt N does. */
static void mode_restart(void)
{
    int attempt = tp_env_int("TORCHELASTIC_RESTART_COUNT", 0);
    char plan[256], *save = NULL;
    snprintf(plan, sizeof plan, "%s", tp_env_str("SCENARIO_PLAN", "segv,clean"));
    const char *what = strtok_r(plan, ",", &save);
    for (int i = 0; i < attempt && what; i++)
        what = strtok_r(NULL, ",", &save);
    if (!what)
        what = "clean";
    run_steps(world_comm, steps);
    if (listed(tp_env_str("SCENARIO_LATE", ""), rank)) /* evaluation work before the barrier */
        compute_ms(tp_env_int("SCENARIO_LATE_MS", 0));
    if (rank == victim && strcmp(what, "segv") == 0)
        bad_pointer();
    if (rank == victim && strcmp(what, "oom") == 0)
        raise(SIGKILL);
    if (rank == victim && strcmp(what, "hang") == 0)
        load_batch();
    barrier(world_comm);
    run_steps(world_comm, 1);
}

/* A call that fails NCCL's argument checks is never enqueued; the program catches the error
 * and issues the call again, right this time, as a framework with a fallback does. */
void reduce_metrics(void)
{
    ncclDataType_t dt = rank == victim ? (ncclDataType_t)(ncclNumTypes + 3) : ncclFloat32;
    ncclResult_t r = ncclAllReduce(grad, grad, 16, dt, ncclSum, world_comm, NULL);
    if (r != ncclSuccess) {
        fprintf(stderr, "rank %d: allreduce failed (%s); retrying with float32\n", rank,
                ncclGetErrorString(r));
        TP_CHECK(ncclAllReduce(grad, grad, 16, ncclFloat32, ncclSum, world_comm, NULL));
    }
    tp_sync();
}

void broadcast_config(void)
{
    int root = rank == victim ? world : 0; /* an off-by-one: a root out of range */
    ncclResult_t r = ncclBroadcast(grad, grad, 8, ncclFloat32, root, world_comm, NULL);
    if (r != ncclSuccess) {
        fprintf(stderr, "rank %d: broadcast failed (%s); retrying from rank 0\n", rank,
                ncclGetErrorString(r));
        TP_CHECK(ncclBroadcast(grad, grad, 8, ncclFloat32, 0, world_comm, NULL));
    }
    tp_sync();
}

static void mode_bad_args(void)
{
    run_steps(world_comm, steps);
    reduce_metrics();
    broadcast_config();
    run_steps(world_comm, 2);
}

/* The launcher gave two processes the same RANK: every rank waits in ncclCommInitRank (done
 * by main before the mode runs); nothing to add. */
static void mode_dup_rank(void)
{
    run_steps(world_comm, steps);
}

/* One GPU's batch is empty at the last step: its AllReduce is skipped inside the group. */
void step_all_devices(ncclComm_t *comms, int ndev, int skip)
{
    TP_CHECK(ncclGroupStart());
    for (int d = 0; d < ndev; d++)
        if (d != skip)
            TP_CHECK(ncclAllReduce(grad, grad, 256, ncclFloat32, ncclSum, comms[d], NULL));
    TP_CHECK(ncclGroupEnd());
    tp_sync();
}

static void run_devices(ncclComm_t *comms, int ndev, int skip_dev)
{
    for (int i = 0; i < steps; i++) {
        compute_ms(step_ms);
        step_all_devices(comms, ndev, -1);
    }
    compute_ms(step_ms);
    step_all_devices(comms, ndev, skip_dev);
}

/* One process drives every GPU (ncclCommInitAll). */
static void mode_initall(void)
{
    int ndev = tp_env_int("SCENARIO_NDEV", 4);
    ncclComm_t comms[16];
    if (ndev < 2 || ndev > 16)
        tp_die("SCENARIO_NDEV must be 2..16");
    TP_CHECK(ncclCommInitAll(comms, ndev, NULL));
    run_devices(comms, ndev, tp_env_int("SCENARIO_SKIP_DEV", ndev - 1));
}

/* nccl-tests -g N: each process drives N GPUs, communicator ranks rank*N+d, created with
 * ncclCommInitRank in a group. */
static void mode_multigpu(void)
{
    int ndev = tp_env_int("SCENARIO_NDEV", 2);
    ncclComm_t comms[16];
    if (ndev < 2 || ndev > 16)
        tp_die("SCENARIO_NDEV must be 2..16");
    ncclUniqueId id = tp_exchange_id("multigpu");
    TP_CHECK(ncclGroupStart());
    for (int d = 0; d < ndev; d++)
        TP_CHECK(ncclCommInitRank(&comms[d], world * ndev, id, rank * ndev + d));
    TP_CHECK(ncclGroupEnd());
    run_devices(comms, ndev, rank == victim ? tp_env_int("SCENARIO_SKIP_DEV", ndev - 1) : -1);
}

/* An exception thrown between ncclGroupStart and ncclGroupEnd: the group is never ended. */
static jmp_buf exception;

void bucket_allreduce(int bad)
{
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclAllReduce(grad, grad, 512, ncclFloat32, ncclSum, world_comm, NULL));
    if (bad)
        longjmp(exception, 1); /* a Python/C++ exception unwinding past the group */
    TP_CHECK(ncclAllReduce(grad + 512, grad + 512, 512, ncclFloat32, ncclSum, world_comm, NULL));
    TP_CHECK(ncclGroupEnd());
    tp_sync();
}

/* Where the program goes after the exception: its error handling (logging, a checkpoint). */
void handle_exception(void)
{
    load_batch();
}

static void mode_open_group(void)
{
    run_steps(world_comm, steps);
    if (setjmp(exception) != 0) {
        handle_exception();
        return;
    }
    bucket_allreduce(rank == victim);
    run_steps(world_comm, 1);
}

/* Pipeline stages: ranks 0 and 1 form a child communicator; the others are not in it
 * (NCCL_SPLIT_NOCOLOR, or SCENARIO_CHILD=color: a child of their own). Rank 1 is late for
 * the child's collective; rank 0 waits there; ranks 2.. wait in the world's next one. */
void stage_exchange(ncclComm_t stage)
{
    work_begin();
    TP_CHECK(ncclAllReduce(grad, grad, 64, ncclFloat32, ncclSum, stage, NULL));
    tp_sync();
    work_end();
}

static void mode_child_comm(void)
{
    int late = tp_env_int("SCENARIO_VICTIM", 1);
    int nocolor = strcmp(tp_env_str("SCENARIO_CHILD", "nocolor"), "nocolor") == 0;
    int color = rank < 2 ? 0 : (nocolor ? NCCL_SPLIT_NOCOLOR : 1);
    ncclComm_t stage = NULL;
    TP_CHECK(ncclCommSplit(world_comm, color, rank, &stage, NULL));
    run_steps(world_comm, steps);
    if (rank < 2) {
        if (rank == late)
            load_batch();
        stage_exchange(stage);
    }
    train_step(world_comm);
}

/* GPU-like queues: the host enqueues thousands of collectives past one that never completes
 * (the victim is late for it, or, with LOCKSTEP_EMU_HANG_COLL, a dead link), then
 * synchronizes. */
static void mode_far_apart(void)
{
    int far = tp_env_int("SCENARIO_FAR", 3000);
    run_steps(world_comm, steps);
    if (rank == victim && !getenv("LOCKSTEP_EMU_HANG_COLL"))
        load_batch();
    for (int i = 0; i < far; i++)
        TP_CHECK(ncclAllReduce(grad, grad, 1, ncclFloat32, ncclSum, world_comm, NULL));
    tp_sync();
}

/* The victim detects a bad batch, aborts (or revokes) the communicator and waits to be
 * restarted; the others are already waiting in the next collective. */
void handle_bad_batch(void)
{
    if (strcmp(tp_env_str("SCENARIO_ABORT", "abort"), "revoke") == 0)
        TP_CHECK(ncclCommRevoke(world_comm, 0));
    else
        TP_CHECK(ncclCommAbort(world_comm));
    load_batch();
}

static void mode_comm_abort(void)
{
    run_steps(world_comm, steps);
    if (rank == victim) {
        handle_bad_batch();
        return;
    }
    train_step(world_comm);
}

/* The victim is stopped (SIGSTOP: a debugger, Ctrl-Z, a job suspended) before the barrier. */
void checkpoint(void)
{
    raise(SIGSTOP);
    compute_ms(step_ms);
}

static void mode_sigstop(void)
{
    run_steps(world_comm, steps);
    if (rank == victim)
        checkpoint();
    barrier(world_comm);
}

/* The victim's NCCL reports an asynchronous error after step SCENARIO_STEPS while the victim
 * computes the next step's batch; its watchdog aborts the communicator and the rank exits 1.
 * The others wait for it in the next AllReduce. */
static void mode_async_error(void)
{
    start_async_poller();
    run_steps(world_comm, steps);
    if (rank == victim)
        load_batch();
    train_step(world_comm);
    stop_async_poller();
}

/* A mismatch the transport notices, as DDP's constructor met it on a GPU (init_paths): after a
 * few steps the victim, which took another code path, issues a one-element AllReduce where the
 * others all-reduce their gradients (1,024 values); calls return at once (GPU-style, with
 * LOCKSTEP_EMU_ASYNC=1), the victim goes on preparing its next batch, the others wait in the
 * barrier after it. The victim's NCCL reports an asynchronous error (message truncated:
 * ncclInvalidUsage with LOCKSTEP_EMU_MISMATCH_ERROR=1), which its watchdog polls and logs
 * (SCENARIO_ON_ERROR=log). */
static void mode_truncated(void)
{
    start_async_poller();
    run_steps(world_comm, steps);
    TP_CHECK(ncclAllReduce(grad, grad, rank == victim ? 1 : 1024, ncclFloat32, ncclSum, world_comm,
                           NULL));
    if (rank == victim)
        load_batch();
    barrier(world_comm);
    stop_async_poller();
}

/* Ranks whose launcher gave them a world size too small for their rank: NCCL refuses their
 * ncclCommInitRank (done by main; the program exits 1), and the others wait in theirs. */
static void mode_wrong_world(void)
{
    run_steps(world_comm, steps);
}

struct mode {
    const char *name;
    void (*run)(void);
    int makes_world; /* 0: the mode creates its communicators itself */
};

static const struct mode modes[] = {
    {"watchdog", mode_watchdog, 1},       {"oom_kill", mode_oom_kill, 1},
    {"restart", mode_restart, 1},         {"bad_args", mode_bad_args, 1},
    {"dup_rank", mode_dup_rank, 1},       {"initall", mode_initall, 0},
    {"multigpu", mode_multigpu, 0},       {"open_group", mode_open_group, 1},
    {"child_comm", mode_child_comm, 1},   {"far_apart", mode_far_apart, 1},
    {"comm_abort", mode_comm_abort, 1},   {"sigstop", mode_sigstop, 1},
    {"async_error", mode_async_error, 1}, {"wrong_world", mode_wrong_world, 1},
    {"truncated", mode_truncated, 1},
};

int main(int argc, char **argv)
{
    const struct mode *m = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            m = &modes[i];
    if (!m) {
        fprintf(stderr, "usage: realjobs MODE; modes:");
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            fprintf(stderr, " %s", modes[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    rank = tp_rank();
    world = tp_world_size();
    victim = tp_env_int("SCENARIO_VICTIM", world - 1);
    steps = tp_env_int("SCENARIO_STEPS", 3);
    step_ms = tp_env_int("SCENARIO_STEP_MS", 10);
    delay_ms = tp_env_int("SCENARIO_DELAY_MS", 60000);
    if (m->makes_world) {
        tp_init_world(&world_comm);
        start_watchdog();
    }
    m->run();
    if (world_comm && !atomic_load(&watchdog_fired) && strcmp(m->name, "comm_abort") != 0)
        TP_CHECK(ncclCommDestroy(world_comm));
    return 0;
}
