/* partial.c -- jobs where one part hangs while the rest trains on, and a healthy job whose
 * communicators progress at very different rates: what `lockstep run`/`watch` must tell apart.
 *
 * Usage: partial MODE   (run as N ranks by a launcher)
 *   replicas  every rank joins the world communicator, then ncclCommSplit by rank / 4 makes the
 *             data-parallel replicas; each replica runs AllReduces on its own communicator. The
 *             rank PARTIAL_VICTIM (default 5) stops calling after PARTIAL_STEPS (default 20)
 *             steps: it waits in load_next_shard() (PARTIAL_HOW: sleep, the default, or busy)
 *             for PARTIAL_HANG_S (default 600) seconds; its replica's other ranks wait for it,
 *             the other replicas train on.
 *   pipeline  the world communicator split by rank / 2 into pipeline pairs; in each pair the
 *             even rank sends activations to the odd one (PARTIAL_GROUPED=1: each Send inside
 *             ncclGroupStart/End). The receiver PARTIAL_VICTIM stops receiving after
 *             PARTIAL_STEPS steps; the other pairs go on.
 *   job       AllReduces on the world communicator only; PARTIAL_VICTIM (-1: none) stops (for
 *             two jobs in one folder: one hangs, the other trains on).
 *   serve     a tensor-parallel group serving requests (what `watch --keep` watches): one
 *             AllReduce on the world communicator per request, every PARTIAL_STEP_MS (here
 *             default 50); the rank PARTIAL_VICTIM wedges the group (stops calling while the
 *             others wait in the AllReduce) for PARTIAL_HANG_S, then serves on.
 *   rates     healthy: the replicas of `replicas`, replica 0 fast, replica 1 one step every
 *             PARTIAL_SLOW_MS (default 600) with its last rank half of that late, and the world
 *             communicator idle (nobody in it) until the end, where every rank joins one last
 *             AllReduce on it and exits.
 *   weight_sync  RL weight sync on 4 ranks: trainer ranks 0,1 all-gather parameters (FSDP) on
 *             their communicator, the inference engine's ranks 2,3 all-reduce once per decode
 *             step on theirs, rank PARTIAL_LAGGARD (here default 2) the slower, so that rank 3
 *             waits for it inside NCCL most of the time. After PARTIAL_STEPS steps rank 0
 *             broadcasts the weights to rank 2 on their communicator {0,2}, but the engine never
 *             got the pause request: rank 2 serves on, rank 0 waits in the broadcast, rank 1 in
 *             its next all-gather for rank 0.
 * Each step of the others sleeps PARTIAL_STEP_MS (default 5), of rank PARTIAL_LAGGARD (default 3)
 * PARTIAL_LAG_MS (default 20) more: its healthy peers wait for it inside NCCL most of the time,
 * as a snapshot of a job that trains on catches them. Training ends after
 * PARTIAL_TOTAL_S seconds (default 600; `rates`: 6), the ranks of each communicator agreeing on
 * the last step. The victim stops PARTIAL_WEDGES times (default 1): after PARTIAL_STEPS steps,
 * and again every PARTIAL_WEDGE_GAP steps (default 40) after that. It says on stderr when it
 * stopped calling: "partial: rank 5 stopped calling at <CLOCK_REALTIME ns>". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "common.h"

static float buf[1024];

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say_stopped(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "partial: rank %d stopped calling at %lld\n", tp_rank(),
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

/* The victim's work outside NCCL: a data loader that takes far too long. */
void load_next_shard(void)
{
    say_stopped();
    double until = mono_s() + env_int("PARTIAL_HANG_S", 600);
    const char *how = getenv("PARTIAL_HOW");
    volatile unsigned long spin = 0;
    while (mono_s() < until) {
        if (how && strcmp(how, "busy") == 0)
            for (int i = 0; i < 1000000; i++)
                spin++;
        else
            tp_sleep_ms(100);
    }
}

/* Each step carries the ranks' wish to stop in buf[0] (their time is up): every rank of a
 * communicator stops after the same step. */
static double until_s;

static int time_is_up(void)
{
    return mono_s() >= until_s;
}

int train_step(ncclComm_t comm)
{
    buf[0] = (float)time_is_up();
    TP_CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, NULL));
    tp_sync();
    return buf[0] > 0;
}

void send_activations(ncclComm_t pair, int grouped)
{
    buf[0] = (float)time_is_up();
    if (grouped)
        TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSend(buf, 256, ncclFloat32, 1, pair, NULL));
    if (grouped)
        TP_CHECK(ncclGroupEnd());
    tp_sync();
}

void recv_activations(ncclComm_t pair)
{
    TP_CHECK(ncclRecv(buf, 256, ncclFloat32, 0, pair, NULL));
    tp_sync();
}

/* The pause between steps when PARTIAL_STEP_MS does not say (`serve`: a request every 50 ms). */
static int default_step_ms = 5;

/* True when the victim stops before step k: after PARTIAL_STEPS steps, then every
 * PARTIAL_WEDGE_GAP steps, PARTIAL_WEDGES times in all. */
static int wedged_at(int k)
{
    int before = env_int("PARTIAL_STEPS", 20), gap = env_int("PARTIAL_WEDGE_GAP", 40);
    int wedges = env_int("PARTIAL_WEDGES", 1);
    return k >= before && gap > 0 && (k - before) % gap == 0 && (k - before) / gap < wedges;
}

/* Steps `step` on `comm` until a step says the time is up; the victim stops after
 * PARTIAL_STEPS (and PARTIAL_WEDGE_GAP after that, PARTIAL_WEDGES times). */
static void train(ncclComm_t comm, int (*step)(ncclComm_t, void *), void *arg)
{
    int victim = env_int("PARTIAL_VICTIM", 5);
    int pause = env_int("PARTIAL_STEP_MS", default_step_ms);
    if (tp_rank() == env_int("PARTIAL_LAGGARD", 3))
        pause += env_int("PARTIAL_LAG_MS", 20);
    for (int k = 0;; k++) {
        if (tp_rank() == victim && wedged_at(k))
            load_next_shard();
        if (step(comm, arg))
            return;
        tp_sleep_ms(pause);
    }
}

static int allreduce_step(ncclComm_t comm, void *arg)
{
    (void)arg;
    return train_step(comm);
}

static int pipeline_step(ncclComm_t pair, void *arg)
{
    if (tp_rank() % 2 == 0)
        send_activations(pair, *(int *)arg); /* sends its wish in buf[0], keeps it */
    else
        recv_activations(pair);
    return buf[0] > 0;
}

static void mode_replicas(ncclComm_t world)
{
    ncclComm_t replica;
    TP_CHECK(ncclCommSplit(world, tp_rank() / 4, tp_rank(), &replica, NULL));
    train(replica, allreduce_step, NULL);
}

static void mode_pipeline(ncclComm_t world)
{
    ncclComm_t pair;
    int grouped = env_int("PARTIAL_GROUPED", 0);
    TP_CHECK(ncclCommSplit(world, tp_rank() / 2, tp_rank(), &pair, NULL));
    train(pair, pipeline_step, &grouped);
}

/* Healthy, at different rates: replica 1 steps every PARTIAL_SLOW_MS, its last rank half of
 * that after the others; the world communicator waits idle for the last step. */
static void mode_rates(ncclComm_t world)
{
    ncclComm_t replica;
    TP_CHECK(ncclCommSplit(world, tp_rank() / 4, tp_rank(), &replica, NULL));
    int slow = env_int("PARTIAL_SLOW_MS", 600);
    do {
        if (tp_rank() / 4 == 1)
            tp_sleep_ms(tp_rank() % 4 == 3 ? slow + slow / 2 : slow);
        else
            tp_sleep_ms(env_int("PARTIAL_STEP_MS", 5));
    } while (!train_step(replica));
    train_step(world);
    TP_CHECK(ncclCommDestroy(replica));
}

/* RL weight sync, trainer to inference engine (weight_sync): see the usage above. */
static float params[2 * 256];

void fsdp_all_gather(ncclComm_t trainer)
{
    TP_CHECK(ncclAllGather(buf, params, 256, ncclFloat32, trainer, NULL));
    tp_sync();
}

void broadcast_weights(ncclComm_t sync)
{
    TP_CHECK(ncclBroadcast(buf, buf, 1024, ncclFloat32, 0, sync, NULL));
    tp_sync();
}

static void mode_weight_sync(ncclComm_t world)
{
    int r = tp_rank();
    ncclComm_t group, sync;
    TP_CHECK(ncclCommSplit(world, r / 2, r, &group, NULL)); /* trainer {0,1}, engine {2,3} */
    TP_CHECK(ncclCommSplit(world, r % 2, r, &sync, NULL));  /* {0,2}: the weights' way */
    int steps = env_int("PARTIAL_STEPS", 20), pause = env_int("PARTIAL_STEP_MS", 5);
    if (r == env_int("PARTIAL_LAGGARD", 2))
        pause += env_int("PARTIAL_LAG_MS", 20);
    for (int k = 0;; k++) {
        if (r < 2) {
            fsdp_all_gather(group);
            if (r == 0 && k == steps) {
                say_stopped();
                broadcast_weights(sync); /* the engine never got the pause request */
            }
        } else if (train_step(group)) {
            break;
        }
        tp_sleep_ms(pause);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    ncclComm_t world;
    tp_init_world(&world);
    until_s = 1e300;
    train_step(world);
    until_s = mono_s() + env_int("PARTIAL_TOTAL_S", strcmp(mode, "rates") == 0 ? 6 : 600);
    if (strcmp(mode, "replicas") == 0)
        mode_replicas(world);
    else if (strcmp(mode, "pipeline") == 0)
        mode_pipeline(world);
    else if (strcmp(mode, "job") == 0)
        train(world, allreduce_step, NULL);
    else if (strcmp(mode, "serve") == 0) {
        default_step_ms = 50;
        train(world, allreduce_step, NULL);
    } else if (strcmp(mode, "rates") == 0)
        mode_rates(world);
    else if (strcmp(mode, "weight_sync") == 0)
        mode_weight_sync(world);
    else
        tp_die("usage: partial replicas|pipeline|job|serve|rates|weight_sync");
    TP_CHECK(ncclCommDestroy(world));
    return 0;
}
