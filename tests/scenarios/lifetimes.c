/* lifetimes.c -- NCCL programs whose hangs lie in the lives of communicators and of the ranks
 * themselves: groups created by some ranks and not others, created in different orders, split
 * while the others go on, created nonblocking, shrunk after a failure the job recovered from,
 * ranks that finished while another made one call more.
 *
 * Usage: lifetimes MODE   (run as N ranks by a launcher; RANK/WORLD_SIZE in the environment)
 * Knobs (all optional):
 *   SCENARIO_VICTIM     the rank that misbehaves (default per mode)
 *   SCENARIO_STEPS      training steps before it (default 2)
 *   SCENARIO_STEP_MS    compute per step, ms (default 5)
 *   SCENARIO_DELAY_MS   how long a busy rank stays busy (default 60000)
 *   SCENARIO_DESTROY    alone_at_exit, finished_early: 1 (default) the finishing ranks destroy
 *                       the world communicator before they exit 0, 0 they just exit
 *   SCENARIO_SPLITTERS  split_vs_coll: how many ranks (the lowest) split the world (default 2)
 *   SCENARIO_AFTER      shrink_recover_hang: steps the survivors make on the shrunk
 *                       communicator before the second failure (default 3)
 *   SCENARIO_VICTIM2    the shrink modes: the survivor that fails next (default the last
 *                       survivor)
 *   SCENARIO_HOW        shrink_disagree: what the odd survivor does: "shrink" (default: it
 *                       excludes one rank more than the others) or "split" (it splits the world
 *                       instead)
 *   SCENARIO_WATCHDOG_MS  the shrink modes: how long a collective may take before the
 *                       survivors' watchdog revokes the world communicator (default 300)
 *   SCENARIO_GIVE_UP_MS nonblocking_absent: how long the ranks poll a nonblocking creation
 *                       before they abort it and exit 1 (default 0: they poll forever)
 *   SCENARIO_STOP_FILE  train_until: the file whose existence ends training (checked every
 *                       step; at most 10,000 steps)
 * Every collective waits for its result with tp_sync(), as a training loop does. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static int rank, world, victim, steps, step_ms, delay_ms;
static float grad[1024];
static ncclComm_t world_comm;

/* A rank busy with work of its own for a long time: a slow shard, a checkpoint written. */
__attribute__((noinline)) void load_batch(void)
{
    tp_compute_ms(delay_ms);
}

/* One step: the rank's compute (ms milliseconds), then an all-reduce of `count` floats on c,
 * waited for as a training loop does. */
void step_on(ncclComm_t c, int ms, int count)
{
    tp_compute_ms(ms);
    TP_CHECK(ncclAllReduce(grad, grad, (size_t)count, ncclFloat32, ncclSum, c, NULL));
    tp_sync();
}

void train_step(ncclComm_t c)
{
    step_on(c, step_ms, 1024);
}

/* A unique id for `tag` made by rank `owner` and handed to the others through the launcher's
 * id file (common.c's tp_exchange_id() always makes it on rank 0). */
static ncclUniqueId exchange_id_from(const char *tag, int owner)
{
    ncclUniqueId id;
    char path[4200];
    const char *base = getenv("LOCKSTEP_TEST_IDFILE");
    if (!base || !*base)
        tp_die("LOCKSTEP_TEST_IDFILE is not set (use launch-ranks)");
    snprintf(path, sizeof path, "%s.%s", base, tag);
    if (rank == owner) {
        TP_CHECK(ncclGetUniqueId(&id));
        tp_publish(path, &id, sizeof id);
    } else {
        tp_await(path, &id, sizeof id);
    }
    return id;
}

/* ---- endings ------------------------------------------------------------------------------ */

/* The end of training: the ranks that finished destroy the world communicator (or not) and
 * return from main with status 0. */
static void finish(void)
{
    if (tp_env_int("SCENARIO_DESTROY", 1))
        TP_CHECK(ncclCommDestroy(world_comm));
    exit(0);
}

/* The victim logs one metric more at the end of training, under `if rank == 0` (an all-reduce
 * of a scalar no other rank makes); every other rank finishes and exits 0. */
void log_final_metric(void)
{
    step_on(world_comm, 0, 1);
}

/* SCENARIO_STEPS training steps on the world, then the victim's detour `what` (the others go
 * straight on): the shape most of these hangs start from. */
static void train_then_victim(void (*what)(void))
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank == victim)
        what();
}

static void mode_alone_at_exit(void)
{
    train_then_victim(log_final_metric);
    finish();
}

/* As alone_at_exit, and the victim then hands its last activations to the next rank, which
 * waits for them in a receive: the others finish, the next rank waits for the victim, the
 * victim in its metric. */
static void mode_alone_then_send(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    int next = (victim + 1) % world;
    if (rank == victim) {
        log_final_metric();
        TP_CHECK(ncclSend(grad, 64, ncclFloat32, next, world_comm, NULL));
    } else if (rank == next) {
        TP_CHECK(ncclRecv(grad, 64, ncclFloat32, victim, world_comm, NULL));
    }
    tp_sync();
    finish();
}

/* The victim's data runs out a step early: it finishes (and exits 0) while the others start
 * one step more. */
static void mode_finished_early(void)
{
    for (int i = 0; i < (rank == victim ? steps - 1 : steps); i++)
        train_step(world_comm);
    finish();
}

/* ---- creations ------------------------------------------------------------------------------ */

/* A checkpoint saved under `if rank == victim`: its group {victim, victim + 1} is created at
 * first use (ncclCommInitRank of a 2-rank communicator), which the other member never does; it
 * goes on to the next step with everyone else. */
void save_checkpoint(void)
{
    ncclComm_t ckpt;
    ncclUniqueId id = exchange_id_from("ckpt", victim);
    TP_CHECK(ncclCommInitRank(&ckpt, 2, id, 0));
    step_on(ckpt, 0, 1);
}

static void mode_ckpt_group(void)
{
    train_then_victim(save_checkpoint);
    train_step(world_comm);
}

/* Two groups spanning the world, A (id from rank 0) and B (id from the last rank, where B's
 * rank 0 is), created in one order by the lower half of the ranks and in the other by the
 * upper half: each half waits in one creation for the other. */
static void mode_init_order(void)
{
    train_step(world_comm);
    ncclComm_t a, b;
    int low = rank < world / 2, brank = (rank + 1) % world;
    if (low) {
        ncclUniqueId ia = exchange_id_from("A", 0);
        TP_CHECK(ncclCommInitRank(&a, world, ia, rank));
        ncclUniqueId ib = exchange_id_from("B", world - 1);
        TP_CHECK(ncclCommInitRank(&b, world, ib, brank));
    } else {
        ncclUniqueId ib = exchange_id_from("B", world - 1);
        TP_CHECK(ncclCommInitRank(&b, world, ib, brank));
        ncclUniqueId ia = exchange_id_from("A", 0);
        TP_CHECK(ncclCommInitRank(&a, world, ia, rank));
    }
    train_step(a);
    train_step(b);
}

/* new_group() for a side group made by splitting the world, which only the lowest
 * SCENARIO_SPLITTERS ranks call (they think they need it); the others go on training. */
void make_side_group(void)
{
    ncclComm_t side = NULL;
    TP_CHECK(ncclCommSplit(world_comm, 0, rank, &side, NULL));
}

static void mode_split_vs_coll(void)
{
    int splitters = tp_env_int("SCENARIO_SPLITTERS", 2);
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank < splitters)
        make_side_group();
    train_step(world_comm);
}

/* ---- fault tolerance: shrinking the world after a failure ------------------------------- */

/* The survivors' watchdog: a thread that revokes the world communicator when a collective has
 * not returned within SCENARIO_WATCHDOG_MS (ncclCommRevoke: the call returns an error, and the
 * communicator can then be shrunk), as fault-tolerant trainers do. */
static _Atomic uint64_t coll_since_ms; /* when the main thread entered its collective, 0 none */

static void *watchdog(void *arg)
{
    (void)arg;
    int limit = tp_env_int("SCENARIO_WATCHDOG_MS", 300);
    for (;;) {
        uint64_t since = atomic_load(&coll_since_ms);
        if (since && tp_mono_ms() - since > (uint64_t)limit) {
            fprintf(stderr, "rank %d: watchdog: a collective took over %d ms; revoking the world\n",
                    rank, limit);
            ncclCommRevoke(world_comm, NCCL_REVOKE_DEFAULT);
            return NULL;
        }
        tp_sleep_ms(10);
    }
}

/* One step on the world, under the watchdog when `armed`; returns the all-reduce's result. */
static ncclResult_t guarded_step(int armed)
{
    tp_compute_ms(step_ms);
    atomic_store(&coll_since_ms, armed ? tp_mono_ms() : 0);
    ncclResult_t res = ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, world_comm, NULL);
    atomic_store(&coll_since_ms, 0);
    return res;
}

/* Trains on the world until the victim dies (SIGKILL in its compute, as the OOM killer does);
 * the survivors' watchdog revokes the world and their step fails. Returns on the survivors. The
 * watchdog watches the steps from the victim's last on: on a loaded machine a slow rank can hold
 * an earlier step past its limit, and a world revoked before the death is another story (the
 * victim, still alive, would then recover without itself). */
static void train_until_failure(void)
{
    pthread_t t;
    if (rank != victim && pthread_create(&t, NULL, watchdog, NULL) != 0)
        tp_die("pthread_create failed");
    for (int i = 0;; i++) {
        if (rank == victim && i == steps) {
            tp_compute_ms(step_ms);
            raise(SIGKILL);
        }
        ncclResult_t res = guarded_step(i >= steps);
        if (res != ncclSuccess) {
            fprintf(stderr, "rank %d: step %d failed (%s): recovering without rank %d\n", rank, i,
                    ncclGetErrorString(res), victim);
            return;
        }
    }
}

/* The survivors drop the dead rank: ncclCommShrink of the revoked world, excluding it. */
ncclComm_t shrink_world(const int *excluded, int n)
{
    ncclComm_t shrunk = NULL;
    TP_CHECK(ncclCommShrink(world_comm, (int *)excluded, n, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
    return shrunk;
}

/* The survivor that fails next: SCENARIO_VICTIM2, else the last rank that is not the victim. */
static int second_victim(void)
{
    return tp_env_int("SCENARIO_VICTIM2", victim == world - 1 ? world - 2 : world - 1);
}

/* A failure the job recovered from, then a hang of its own: the victim dies, the survivors
 * shrink the world without it and train SCENARIO_AFTER steps on the shrunk communicator; then a
 * survivor (SCENARIO_VICTIM2) stays in its data loader. */
static void mode_shrink_recover_hang(void)
{
    train_until_failure();
    ncclComm_t shrunk = shrink_world(&victim, 1);
    int after = tp_env_int("SCENARIO_AFTER", 3);
    for (int i = 0; i < after; i++)
        train_step(shrunk);
    if (rank == second_victim())
        load_batch();
    train_step(shrunk);
}

/* The victim dies and the survivors shrink the world without it, but one survivor
 * (SCENARIO_VICTIM2) is still in its data loader and never comes to the shrink. */
static void mode_shrink_waits(void)
{
    train_until_failure();
    if (rank == second_victim())
        load_batch();
    ncclComm_t shrunk = shrink_world(&victim, 1);
    train_step(shrunk);
}

/* A planned shrink that the survivors make differently: the victim is drained (it destroys the
 * world and exits 0), the others shrink the world without it; one survivor (SCENARIO_VICTIM2)
 * has another view of the job and excludes one more rank (SCENARIO_HOW=shrink) or splits the
 * world instead (SCENARIO_HOW=split). */
static void mode_shrink_disagree(void)
{
    train_then_victim(finish);
    int odd = second_victim(), other = odd == 0 || victim == 0 ? 1 : 0;
    if (other == victim || other == odd)
        other = 2;
    int both[2] = {victim < other ? victim : other, victim < other ? other : victim};
    ncclComm_t next = NULL;
    if (rank == odd && strcmp(tp_env_str("SCENARIO_HOW", "shrink"), "split") == 0)
        TP_CHECK(ncclCommSplit(world_comm, 0, rank, &next, NULL));
    else if (rank == odd)
        next = shrink_world(both, 2);
    else
        next = shrink_world(&victim, 1);
    train_step(next);
}

/* ---- nonblocking creation -------------------------------------------------------------- */

/* Polls the nonblocking communicator c until ncclCommGetAsyncError says it is ready, as
 * frameworks do between steps; after SCENARIO_GIVE_UP_MS (0: never) the rank gives up: it
 * aborts c and exits 1. */
void wait_ready(ncclComm_t c)
{
    int give_up = tp_env_int("SCENARIO_GIVE_UP_MS", 0);
    uint64_t start = tp_mono_ms();
    for (;;) {
        ncclResult_t state = ncclInProgress;
        TP_CHECK(ncclCommGetAsyncError(c, &state));
        if (state == ncclSuccess)
            return;
        if (state != ncclInProgress)
            tp_die("rank %d: the creation failed (%d)", rank, (int)state);
        if (give_up && tp_mono_ms() - start > (uint64_t)give_up) {
            fprintf(stderr, "rank %d: the communicator is not ready after %d ms; aborting it\n",
                    rank, give_up);
            ncclCommAbort(c);
            exit(1);
        }
        tp_sleep_ms(10);
    }
}

/* The world's communicator is created nonblocking (config.blocking = 0): ncclCommInitRankConfig
 * returns ncclInProgress and the ranks poll it; the victim is still in its data loader and
 * never calls the init. No thread of the waiting ranks is inside NCCL. */
static void mode_nonblocking_absent(void)
{
    ncclUniqueId id = exchange_id_from("nbworld", 0);
    if (rank == victim)
        load_batch();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t c = NULL;
    ncclResult_t res = ncclCommInitRankConfig(&c, world, id, rank, &config);
    if (res != ncclSuccess && res != ncclInProgress)
        tp_die("rank %d: ncclCommInitRankConfig returned %d", rank, (int)res);
    wait_ready(c);
    train_step(c);
}

/* ---- a rank whose link dies inside a collective -------------------------------------------- */

/* The victim's NCCL watchdog: after SCENARIO_WATCHDOG_MS it takes the network error its link
 * gave, aborts the communicator and ends the process (SIGABRT), as PyTorch's does with
 * TORCH_NCCL_ASYNC_ERROR_HANDLING. */
static void *link_watchdog(void *arg)
{
    (void)arg;
    tp_sleep_ms(tp_env_int("SCENARIO_WATCHDOG_MS", 300));
    fprintf(stderr, "rank %d: NCCL WARN network error on its link; aborting the communicator\n",
            rank);
    ncclCommAbort(world_comm);
    abort();
    return NULL;
}

/* Async (GPU-like) mode: the victim's link dies in the next collective (its GPU never completes
 * it: LOCKSTEP_EMU_HANG_COLL), so no member's GPU does; its watchdog aborts and ends it while
 * the others still wait in that collective. */
static void mode_link_down(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank == victim) {
        setenv("LOCKSTEP_EMU_HANG_COLL", "1", 1); /* counted from the next collective */
        pthread_t t;
        if (pthread_create(&t, NULL, link_watchdog, NULL) != 0)
            tp_die("pthread_create failed");
    }
    train_step(world_comm);
    while (rank == victim) /* its synchronize ends with the abort: the watchdog ends it */
        pause();
}

/* ---- a healthy job ------------------------------------------------------------------------ */

/* Trains until SCENARIO_STOP_FILE exists, then finishes (destroys the world, exits 0): a job
 * that must never be stopped by a runner watching another one. */
static void mode_train_until(void)
{
    const char *stop = tp_env_str("SCENARIO_STOP_FILE", "");
    static float done[1];
    for (int i = 0; i < 10000 && done[0] == 0; i++) {
        train_step(world_comm);
        /* Rank 0 decides for all: every rank makes the same number of steps. */
        done[0] = rank == 0 && *stop && access(stop, F_OK) == 0;
        TP_CHECK(ncclAllReduce(done, done, 1, ncclFloat32, ncclSum, world_comm, NULL));
        tp_sync();
    }
    finish();
}

/* ---- several members absent ------------------------------------------------------------- */

/* Two ranks fail at once in different ways: the victim is killed in its compute (the OOM
 * killer), SCENARIO_VICTIM2 stays in its data loader; the others wait in the next collective
 * for both. */
static void mode_dead_and_busy(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank == victim) {
        tp_compute_ms(step_ms);
        raise(SIGKILL);
    }
    if (rank == tp_env_int("SCENARIO_VICTIM2", world - 1))
        load_batch();
    train_step(world_comm);
}

/* ---- a rank asleep ----------------------------------------------------------------------- */

/* The victim waits for something of its own outside NCCL, off the CPU (a file on a slow share,
 * a lock): the others wait in the next collective for it. */
__attribute__((noinline)) void wait_for_shard(void)
{
    tp_sleep_ms(delay_ms);
}

static void mode_asleep(void)
{
    train_then_victim(wait_for_shard);
    train_step(world_comm);
}

/* ---- a barrier of the program's own --------------------------------------------------------- */

/* A host-side barrier through the launcher's id folder (as a store-based barrier is): each rank
 * publishes its arrival and polls, off the CPU, for everyone else's. */
__attribute__((noinline)) void host_barrier(const char *name)
{
    const char *base = getenv("LOCKSTEP_TEST_IDFILE");
    if (!base || !*base)
        tp_die("LOCKSTEP_TEST_IDFILE is not set (use launch-ranks)");
    char path[4200];
    snprintf(path, sizeof path, "%s.%s.%d", base, name, rank);
    tp_publish(path, &rank, sizeof rank);
    for (int r = 0; r < world; r++) {
        snprintf(path, sizeof path, "%s.%s.%d", base, name, r);
        while (access(path, F_OK) != 0) /* a store's poll: every 20 ms */
            tp_sleep_ms(20);
    }
}

static pthread_mutex_t ckpt_lock = PTHREAD_MUTEX_INITIALIZER;

/* The victim takes a lock it already holds (a checkpoint hook that locks twice): it blocks off
 * the CPU forever, never reaching the barrier the others wait in. */
__attribute__((noinline)) void save_state(void)
{
    pthread_mutex_lock(&ckpt_lock);
    pthread_mutex_lock(&ckpt_lock); /* never returns: the lock is not recursive */
}

static void mode_outside_barrier(void)
{
    train_then_victim(save_state);
    host_barrier("epoch-end");
    train_step(world_comm);
}

/* ---- one rank out of order inside a cycle --------------------------------------------------- */

static float ring_send[256], ring_recv[256];

/* One step of ring attention: each rank sends its block to the next rank and receives the
 * previous rank's, in one group, then the step's gradients are all-reduced. */
void ring_exchange(void)
{
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSend(ring_send, 256, ncclFloat32, (rank + 1) % world, world_comm, NULL));
    TP_CHECK(ncclRecv(ring_recv, 256, ncclFloat32, (rank + world - 1) % world, world_comm, NULL));
    TP_CHECK(ncclGroupEnd());
    tp_sync();
}

/* At step SCENARIO_STEPS the victim takes a causal-mask shortcut: it skips the exchange and goes
 * on into the all-reduce. Its neighbours wait in the exchange for it, it waits in the all-reduce
 * for them: a cycle that only the victim closes. */
static void mode_ring_skip(void)
{
    for (int i = 0; i <= steps; i++) {
        if (!(i == steps && rank == victim))
            ring_exchange();
        train_step(world_comm);
    }
}

static jmp_buf exchange_failed;

/* The exchange as the victim runs it at the failing step: its send is queued in the group, then
 * an exception (a Python error in the attention kernel's launcher) unwinds past the receive and
 * the group's end: the send is recorded, never posted. */
void ring_exchange_throws(void)
{
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSend(ring_send, 256, ncclFloat32, (rank + 1) % world, world_comm, NULL));
    longjmp(exchange_failed, 1);
}

/* 1 when the exchange threw (the victim's handler runs then). */
static int exchange_threw(void)
{
    if (setjmp(exchange_failed) != 0)
        return 1;
    ring_exchange_throws();
    return 0;
}

/* The victim's handler: it logs and writes a checkpoint before it would go on (long). */
__attribute__((noinline)) void handle_exchange_error(void)
{
    load_batch();
}

/* At step SCENARIO_STEPS the victim's exchange throws after queuing its send, and its handler
 * writes a checkpoint. As ring_skip, except that the victim has a record of the send its
 * neighbour waits for: queued in a group never ended, it was never posted. */
static void mode_ring_open_group(void)
{
    for (int i = 0; i <= steps; i++) {
        if (i == steps && rank == victim) {
            if (exchange_threw())
                handle_exchange_error();
        } else {
            ring_exchange();
        }
        train_step(world_comm);
    }
}

/* 1 when rank r is among SCENARIO_VICTIMS ("1,4": ranks, comma-separated), else when it is the
 * victim. */
static int among_victims(int r)
{
    const char *v = getenv("SCENARIO_VICTIMS");
    if (!v || !*v)
        return r == victim;
    for (const char *p = v; *p;) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p)
            break;
        if (k == r)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* ring_skip with several ranks taking the shortcut (SCENARIO_VICTIMS): the ranks whose block is
 * wholly masked skip the exchange at step SCENARIO_STEPS. */
static void mode_ring_skip_many(void)
{
    for (int i = 0; i <= steps; i++) {
        if (!(i == steps && among_victims(rank)))
            ring_exchange();
        train_step(world_comm);
    }
}

/* ---- teardown that waits for every member (NCCL 2.31: LOCKSTEP_EMU_VERSION=23100) ------------ */

/* The victim is still writing its last checkpoint when the others finish: their
 * ncclCommDestroy waits for every member of the world, as NCCL's does from 2.31 on. */
static void mode_teardown_waits(void)
{
    train_then_victim(load_batch);
    finish();
}

/* A failure recovered from, then the teardown: the victim dies, the survivors shrink the world
 * without it and train SCENARIO_AFTER steps; at the end they destroy the shrunk communicator and
 * then the world, whose destroy waits for every member, the dead one too. */
static void mode_teardown_after_shrink(void)
{
    train_until_failure();
    ncclComm_t shrunk = shrink_world(&victim, 1);
    int after = tp_env_int("SCENARIO_AFTER", 3);
    for (int i = 0; i < after; i++)
        train_step(shrunk);
    TP_CHECK(ncclCommDestroy(shrunk));
    TP_CHECK(ncclCommDestroy(world_comm));
}

/* ---- a nonblocking split inside a cycle ------------------------------------------------------ */

/* The victim makes a side group of the world nonblocking (config.blocking = 0: the split returns
 * ncclInProgress) and polls the world until it is ready, while the others go on into the
 * world's next collective: a creation polled from outside NCCL closes a cycle with a
 * collective. */
void make_side_group_nonblocking(void)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t side = NULL;
    ncclResult_t res = ncclCommSplit(world_comm, 0, rank, &side, &config);
    if (res != ncclSuccess && res != ncclInProgress)
        tp_die("rank %d: ncclCommSplit returned %d", rank, (int)res);
    wait_ready(world_comm);
}

static void mode_nonblocking_split_cycle(void)
{
    train_then_victim(make_side_group_nonblocking);
    train_step(world_comm);
}

/* ---- a rank that stops training early ------------------------------------------------------- */

/* Early stopping decided on each rank's own validation loss (not all-reduced first): the victim
 * stops after SCENARIO_STEPS steps and tears the world down, the others train one step more. From
 * NCCL 2.31 the victim's destroy waits for them, and they wait in the step's all-reduce for it. */
static void mode_early_stop(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank != victim)
        train_step(world_comm);
    finish();
}

/* ---- a creation retried on one rank -----------------------------------------------------------
 */

/* Tensor-parallel groups made by a split wrapped in retry logic: on the victim the first split
 * "fails" after it completed (an exception in the code that uses the new communicator), so it
 * splits again; the others already train on the first one. */
static void mode_retry_split(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    ncclComm_t tp = NULL;
    TP_CHECK(ncclCommSplit(world_comm, rank % 2, rank, &tp, NULL));
    if (rank == victim) /* the retry: a second split of the world nobody else makes */
        TP_CHECK(ncclCommSplit(world_comm, rank % 2, rank, &tp, NULL));
    for (int i = 0; i < 2; i++)
        train_step(tp);
}

static const struct tp_mode modes[] = {
    {"alone_at_exit", mode_alone_at_exit, 0},
    {"finished_early", mode_finished_early, -1},
    {"ckpt_group", mode_ckpt_group, 0},
    {"init_order", mode_init_order, 0},
    {"split_vs_coll", mode_split_vs_coll, 0},
    {"shrink_recover_hang", mode_shrink_recover_hang, 1},
    {"shrink_waits", mode_shrink_waits, 1},
    {"shrink_disagree", mode_shrink_disagree, 1},
    {"nonblocking_absent", mode_nonblocking_absent, -1},
    {"link_down", mode_link_down, 1},
    {"train_until", mode_train_until, -1},
    {"dead_and_busy", mode_dead_and_busy, 0},
    {"asleep", mode_asleep, -1},
    {"outside_barrier", mode_outside_barrier, -1},
    {"ring_skip", mode_ring_skip, 1},
    {"teardown_waits", mode_teardown_waits, -1},
    {"teardown_after_shrink", mode_teardown_after_shrink, 1},
    {"nonblocking_split_cycle", mode_nonblocking_split_cycle, 0},
    {"ring_open_group", mode_ring_open_group, 1},
    {"early_stop", mode_early_stop, 0},
    {"ring_skip_many", mode_ring_skip_many, 1},
    {"retry_split", mode_retry_split, 0},
    {"alone_then_send", mode_alone_then_send, 0},
};

int main(int argc, char **argv)
{
    const struct tp_mode *m =
        tp_pick_mode(argc, argv, "lifetimes", modes, sizeof modes / sizeof modes[0]);
    if (!m)
        return 2;
    rank = tp_rank();
    world = tp_world_size();
    victim = tp_env_int("SCENARIO_VICTIM", m->victim >= 0 ? m->victim : world - 1);
    steps = tp_env_int("SCENARIO_STEPS", 2);
    step_ms = tp_env_int("SCENARIO_STEP_MS", 5);
    delay_ms = tp_env_int("SCENARIO_DELAY_MS", 60000);
    if (m->run != mode_nonblocking_absent) /* it creates its world itself */
        tp_init_world(&world_comm);
    m->run();
    return 0;
}
