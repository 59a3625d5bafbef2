/* chains.c -- NCCL programs whose hangs chain causes across communicators, point-to-point,
 * GPU streams, creation and deaths: a rank missing from one communicator because it waits in
 * another one's collective that can never complete, pipeline-parallel chains, a node failing,
 * a rank that never reached NCCL, a refused call ending a program, cycles others wait behind.
 *
 * Usage: chains MODE   (run as N ranks by a launcher; RANK/WORLD_SIZE in the environment)
 * Knobs (all optional):
 *   SCENARIO_VICTIM     the rank that misbehaves (default per mode)
 *   SCENARIO_STEPS      training steps before the failure (default 2)
 *   SCENARIO_STEP_MS    compute per step, ms (default 5)
 *   SCENARIO_DELAY_MS   how long a late rank stays busy (default 60000)
 *   SCENARIO_BUSY       how the late rank is busy: "compute" (default) or "sleep" (asleep
 *                       outside NCCL: what a stuck data loader or a lock looks like)
 *   SCENARIO_DIFF       cross_mismatch: what the odd rank changes: "op" (default) or "count"
 *   SCENARIO_TP, SCENARIO_PP   pp_chain: tensor- and pipeline-parallel sizes (default 4, 4;
 *                       the data-parallel size is what is left of the world)
 *   SCENARIO_WHERE      pp_chain: where the victim stops: "forward" (before its forward
 *                       tensor-parallel AllReduce, default) or "backward"
 *   SCENARIO_NODE_SIZE  node_failure: ranks per node (default 4); the last node dies
 *   SCENARIO_NOSYNC     cross_gpu_stuck: 1: the stage ranks go on without waiting for the stuck
 *                       collective (their next one queues behind it on the stream)
 *   SCENARIO_INIT       late_init: what the victim does before its first NCCL call: "busy"
 *                       (default: load_batch(), see SCENARIO_BUSY), "exit" (exits 1) or
 *                       "kill" (SIGKILL, as the OOM killer ends it)
 *   SCENARIO_MARK       caught_mid_step: the file written when the victim's pair deadlocks
 *   SCENARIO_LATE       caught_mid_step: pair {0,1}'s rank that stays away at the end (1)
 *   SCENARIO_CATCH_MS   caught_mid_step: how long it is away before the job is stopped (300)
 *   SCENARIO_WHERE      caught_mid_step: "send" (default) or "allreduce", the pairs' step
 * Every collective waits for its result with tp_sync(), as a training loop does (a no-op
 * unless LOCKSTEP_EMU_ASYNC=1). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static int rank, world, victim, steps, step_ms, delay_ms;
static float grad[1024], act[256];
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

/* The late rank's own work: a slow shard, a download, a checkpoint. */
__attribute__((noinline)) void load_batch(void)
{
    if (strcmp(tp_env_str("SCENARIO_BUSY", "compute"), "sleep") == 0)
        tp_sleep_ms(delay_ms);
    else
        compute_ms(delay_ms);
}

/* A child communicator of the world: the ranks of `color` (NCCL_SPLIT_NOCOLOR: none). */
static ncclComm_t split(int color, int key)
{
    ncclComm_t c = NULL;
    TP_CHECK(ncclCommSplit(world_comm, color, key, &c, NULL));
    return c;
}

void allreduce(ncclComm_t c, int count)
{
    TP_CHECK(ncclAllReduce(grad, grad, (size_t)count, ncclFloat32, ncclSum, c, NULL));
    tp_sync();
}

void train_step(ncclComm_t c)
{
    compute_ms(step_ms);
    allreduce(c, 1024);
}

/* ---- a rank missing from the world because its child communicator can never complete ------ */

/* Ranks 0 and 1 form a stage; the victim (rank 1) calls something else than rank 0 there. */
void stage_sync(ncclComm_t stage)
{
    int odd = rank == victim;
    if (odd && strcmp(tp_env_str("SCENARIO_DIFF", "op"), "count") == 0)
        TP_CHECK(ncclAllReduce(grad, grad, 32, ncclFloat32, ncclSum, stage, NULL));
    else if (odd)
        TP_CHECK(ncclAllGather(grad, grad, 8, ncclFloat32, stage, NULL));
    else
        TP_CHECK(ncclAllReduce(grad, grad, 16, ncclFloat32, ncclSum, stage, NULL));
    tp_sync();
}

static void mode_cross_mismatch(void)
{
    ncclComm_t stage = split(rank < 2 ? 0 : NCCL_SPLIT_NOCOLOR, rank);
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank < 2)
        stage_sync(stage);
    train_step(world_comm);
}

/* The same, the stage's collective stuck on the GPU (LOCKSTEP_EMU_HANG_COLL=1:2, async mode).
 * With SCENARIO_NOSYNC=1 the stage ranks do not wait for it: the host goes on to the world's
 * AllReduce, which their streams queue behind the stuck one. */
static void mode_cross_gpu_stuck(void)
{
    ncclComm_t stage = split(rank < 2 ? 0 : NCCL_SPLIT_NOCOLOR, rank);
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank < 2 && tp_env_int("SCENARIO_NOSYNC", 0))
        TP_CHECK(ncclAllReduce(grad, grad, 64, ncclFloat32, ncclSum, stage, NULL));
    else if (rank < 2)
        allreduce(stage, 64);
    train_step(world_comm);
}

/* ---- pipeline parallel: tensor x pipeline x data parallel groups ---------------------------- */

struct grid {
    int tp, pp, dp;           /* sizes */
    int t, p, d;              /* this rank's coordinates */
    ncclComm_t tpc, ppc, dpc; /* its groups */
};

static void grid_init(struct grid *g)
{
    g->tp = tp_env_int("SCENARIO_TP", 4);
    g->pp = tp_env_int("SCENARIO_PP", 4);
    if (g->tp < 1 || g->pp < 2 || world % (g->tp * g->pp) != 0)
        tp_die("pp_chain: world %d is not a multiple of TP %d x PP %d (PP >= 2)", world, g->tp,
               g->pp);
    g->dp = world / (g->tp * g->pp);
    g->t = rank % g->tp;
    g->p = rank / g->tp % g->pp;
    g->d = rank / (g->tp * g->pp);
    g->tpc = split(g->d * g->pp + g->p, g->t);
    g->ppc = split(g->d * g->tp + g->t, g->p);
    g->dpc = split(g->p * g->tp + g->t, g->d);
}

void pp_recv(struct grid *g, int from)
{
    TP_CHECK(ncclRecv(act, 256, ncclFloat32, from, g->ppc, NULL));
    tp_sync();
}

void pp_send(struct grid *g, int to)
{
    TP_CHECK(ncclSend(act, 256, ncclFloat32, to, g->ppc, NULL));
    tp_sync();
}

void tp_allreduce(struct grid *g)
{
    allreduce(g->tpc, 256);
}

void forward(struct grid *g, int stuck)
{
    if (g->p > 0)
        pp_recv(g, g->p - 1);
    compute_ms(step_ms);
    if (stuck)
        load_batch();
    tp_allreduce(g);
    if (g->p < g->pp - 1)
        pp_send(g, g->p + 1);
}

void backward(struct grid *g, int stuck)
{
    if (g->p < g->pp - 1)
        pp_recv(g, g->p + 1);
    compute_ms(step_ms);
    if (stuck)
        load_batch();
    tp_allreduce(g);
    if (g->p > 0)
        pp_send(g, g->p - 1);
}

void dp_allreduce(struct grid *g)
{
    allreduce(g->dpc, 1024);
}

static void mode_pp_chain(void)
{
    struct grid g;
    grid_init(&g);
    int bwd = strcmp(tp_env_str("SCENARIO_WHERE", "forward"), "backward") == 0;
    for (int i = 0; i <= steps; i++) {
        int last = i == steps && rank == victim;
        forward(&g, last && !bwd);
        backward(&g, last && bwd);
        dp_allreduce(&g);
    }
}

/* ---- a node fails: its ranks die together, the others wait on ----------------------------- */

/* The last node's ranks die at one instant after the step's AllReduce, as when the node loses
 * power or its kernel panics: each computes, then publishes its pid next to the job's id file;
 * the node's first rank kills them all with SIGKILL in one loop, itself last. (Each raising
 * SIGKILL after its own compute let them die hundreds of milliseconds apart on a loaded
 * machine, which is no node failure.) */
void node_lost(int first, int size)
{
    compute_ms(step_ms);
    const char *base = getenv("LOCKSTEP_TEST_IDFILE");
    if (!base || !*base)
        raise(SIGKILL);
    char path[4200];
    snprintf(path, sizeof(path), "%s.node-pid.%d", base, rank);
    pid_t self = getpid();
    tp_publish(path, &self, sizeof(self));
    if (rank != first)
        for (;;)
            pause();
    pid_t pids[64];
    int n = size < 64 ? size : 64;
    for (int r = 0; r < n; r++) {
        snprintf(path, sizeof(path), "%s.node-pid.%d", base, first + r);
        tp_await(path, &pids[r], sizeof(pids[r]));
    }
    for (int r = 1; r < n; r++)
        kill(pids[r], SIGKILL);
    raise(SIGKILL);
}

static void mode_node_failure(void)
{
    int node_size = tp_env_int("SCENARIO_NODE_SIZE", 4);
    int doomed = rank >= world - node_size;
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (doomed)
        node_lost(world - node_size, node_size);
    train_step(world_comm);
}

/* ---- a rank that never reaches NCCL ---------------------------------------------------------- */

/* What the victim does before its first NCCL call: a dataset download, an import that fails. */
void prepare_dataset(void)
{
    if (strcmp(tp_env_str("SCENARIO_INIT", "busy"), "exit") == 0) {
        fprintf(stderr, "rank %d: dataset not found; exiting\n", rank);
        exit(1);
    }
    if (strcmp(tp_env_str("SCENARIO_INIT", "busy"), "kill") == 0) {
        fprintf(stderr, "rank %d: out of memory while loading the dataset\n", rank);
        raise(SIGKILL); /* the OOM killer: no exit of its own */
    }
    load_batch();
}

static void mode_late_init(void)
{
    if (rank == victim)
        prepare_dataset();
    tp_init_world(&world_comm);
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
}

/* ---- a call NCCL refused, then the program gives up ---------------------------------------- */

void broadcast_config(void)
{
    int root = rank == victim ? world : 0; /* an off-by-one: a root out of range */
    TP_CHECK(ncclBroadcast(grad, grad, 8, ncclFloat32, root, world_comm, NULL));
    tp_sync();
}

static void mode_refused_exit(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    broadcast_config(); /* TP_CHECK: the victim's refused call ends it with status 1 */
    train_step(world_comm);
}

/* ---- a death in a child communicator, others behind it ------------------------------------- */

/* Pairs (0,1), (2,3)... exchange in their pair, then the world reduces. The victim is
 * OOM-killed in its compute; its partner waits in the pair; the others wait in the world. */
void pair_step(ncclComm_t pair)
{
    compute_ms(step_ms);
    allreduce(pair, 64);
}

static void mode_death_in_child(void)
{
    ncclComm_t pair = split(rank / 2, rank);
    for (int i = 0; i < steps; i++) {
        pair_step(pair);
        train_step(world_comm);
    }
    if (rank == victim) {
        compute_ms(step_ms / 2);
        raise(SIGKILL);
    }
    pair_step(pair);
    train_step(world_comm);
}

/* ---- a cycle others wait behind ------------------------------------------------------------- */

/* Ranks 0 and 1 both receive from each other first: each waits for the other's send. The
 * others wait in the world's next AllReduce for them. */
void exchange_halo(void)
{
    int peer = 1 - rank;
    TP_CHECK(ncclRecv(act, 64, ncclFloat32, peer, world_comm, NULL));
    tp_sync();
    TP_CHECK(ncclSend(act, 64, ncclFloat32, peer, world_comm, NULL));
    tp_sync();
}

static void mode_cycle_behind(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank < 2)
        exchange_halo();
    train_step(world_comm);
}

/* ---- an abort in a child communicator ----------------------------------------------------- */

void handle_bad_batch(ncclComm_t pair)
{
    TP_CHECK(ncclCommAbort(pair));
    load_batch();
}

/* Pairs as in death_in_child; the victim aborts its pair's communicator after a bad batch and
 * goes on with its error handling; its partner waits in the pair, the rest in the world. */
static void mode_abort_in_child(void)
{
    ncclComm_t pair = split(rank / 2, rank);
    for (int i = 0; i < steps; i++) {
        pair_step(pair);
        train_step(world_comm);
    }
    if (rank == victim) {
        handle_bad_batch(pair);
        return;
    }
    pair_step(pair);
    train_step(world_comm);
}

/* ---- two independent causes ----------------------------------------------------------------- */

/* Pairs again: in one pair a rank is late (SCENARIO_VICTIM), in another (SCENARIO_VICTIM2) a
 * rank calls a different count; the world waits for both. */
void pair_mismatch(ncclComm_t pair)
{
    compute_ms(step_ms);
    allreduce(pair, rank == tp_env_int("SCENARIO_VICTIM2", 2) ? 32 : 64);
}

static void mode_two_causes(void)
{
    ncclComm_t pair = split(rank / 2, rank);
    for (int i = 0; i < steps; i++) {
        pair_step(pair);
        train_step(world_comm);
    }
    if (rank == victim)
        load_batch();
    pair_mismatch(pair);
    train_step(world_comm);
}

/* ---- a healthy pair caught mid-step by the job's stop -------------------------------------- */

/* One step of a two-stage pipeline pair: stage 0 sends its activations and receives the
 * gradients back, stage 1 the other way round (`swapped`: it sends first too); `reduce`: a pair
 * AllReduce instead. */
void pipe_step(ncclComm_t pair, int stage, int swapped, int reduce)
{
    int peer = 1 - stage;
    compute_ms(step_ms);
    if (reduce) {
        allreduce(pair, 64);
        return;
    }
    for (int k = 0; k < 2; k++) {
        if ((k == 0) == (stage == 0 || swapped))
            TP_CHECK(ncclSend(act, 256, ncclFloat32, peer, pair, NULL));
        else
            TP_CHECK(ncclRecv(act, 256, ncclFloat32, peer, pair, NULL));
        tp_sync();
    }
}

/* The slow step of the caught pair's late rank: it tells the launcher to stop the job once it
 * has been away SCENARIO_CATCH_MS, as a launcher's timeout would fall, and stays away. */
__attribute__((noinline)) void fetch_next_batch(void)
{
    tp_sleep_ms(tp_env_int("SCENARIO_CATCH_MS", 300));
    kill(getppid(), SIGUSR1);
    tp_sleep_ms(delay_ms);
}

/* Pipeline pairs ({0,1}, {2,3}, ...). After SCENARIO_STEPS steps the victim's pair deadlocks
 * (its stage 1 sends first too: both wait in Send) and SCENARIO_MARK is written; the others
 * train on (by sends and receives, or SCENARIO_WHERE=allreduce by a pair AllReduce). Pair {0,1}
 * goes on 2 s after the mark, then its late rank (SCENARIO_LATE: 1, whose partner waits in a
 * Send or an AllReduce for it, or 0, whose partner waits in a Recv) stays away in
 * fetch_next_batch(), which has the launcher stop the job. */
static void mode_caught_mid_step(void)
{
    ncclComm_t pair = split(rank / 2, rank);
    int stage = rank % 2, late = tp_env_int("SCENARIO_LATE", 1);
    int reduce = strcmp(tp_env_str("SCENARIO_WHERE", "send"), "allreduce") == 0;
    const char *mark = tp_env_str("SCENARIO_MARK", "");
    uint64_t marked = 0;
    for (int i = 0;; i++) {
        int deadlocks = rank / 2 == victim / 2 && i == steps;
        if (deadlocks && stage == 0 && *mark) {
            FILE *f = fopen(mark, "w");
            if (f)
                fclose(f);
        }
        if (rank / 2 == 0 && !marked && *mark && access(mark, F_OK) == 0)
            marked = tp_mono_ms();
        if (rank == late && marked && tp_mono_ms() - marked > 2000)
            fetch_next_batch();
        pipe_step(pair, stage, deadlocks, reduce && rank / 2 != victim / 2);
    }
}

struct mode {
    const char *name;
    void (*run)(void);
    int makes_world; /* 0: the mode creates its communicators itself */
    int victim;      /* the default victim, -1: the last rank */
};

static const struct mode modes[] = {
    {"cross_mismatch", mode_cross_mismatch, 1, 1},
    {"cross_gpu_stuck", mode_cross_gpu_stuck, 1, 1},
    {"pp_chain", mode_pp_chain, 1, -1},
    {"node_failure", mode_node_failure, 1, -1},
    {"late_init", mode_late_init, 0, -1},
    {"refused_exit", mode_refused_exit, 1, -1},
    {"death_in_child", mode_death_in_child, 1, -1},
    {"cycle_behind", mode_cycle_behind, 1, -1},
    {"abort_in_child", mode_abort_in_child, 1, -1},
    {"two_causes", mode_two_causes, 1, 1},
    {"caught_mid_step", mode_caught_mid_step, 1, -1},
};

int main(int argc, char **argv)
{
    const struct mode *m = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            m = &modes[i];
    if (!m) {
        fprintf(stderr, "usage: chains MODE; modes:");
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            fprintf(stderr, " %s", modes[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    rank = tp_rank();
    world = tp_world_size();
    victim = tp_env_int("SCENARIO_VICTIM", m->victim >= 0 ? m->victim : world - 1);
    steps = tp_env_int("SCENARIO_STEPS", 2);
    step_ms = tp_env_int("SCENARIO_STEP_MS", 5);
    delay_ms = tp_env_int("SCENARIO_DELAY_MS", 60000);
    if (m->makes_world)
        tp_init_world(&world_comm);
    m->run();
    return 0;
}
