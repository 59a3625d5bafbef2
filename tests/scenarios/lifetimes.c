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
 *   SCENARIO_AFTER      shrink_then_hang: steps the survivors make on the shrunk communicator
 *                       before the second failure (default 3)
 * Every collective waits for its result with tp_sync(), as a training loop does. */
#define _GNU_SOURCE
#include <signal.h>
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

static void mode_alone_at_exit(void)
{
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank == victim)
        log_final_metric();
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
    for (int i = 0; i < steps; i++)
        train_step(world_comm);
    if (rank == victim)
        save_checkpoint();
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

static const struct tp_mode modes[] = {
    {"alone_at_exit", mode_alone_at_exit, 0}, {"finished_early", mode_finished_early, -1},
    {"ckpt_group", mode_ckpt_group, 0},       {"init_order", mode_init_order, 0},
    {"split_vs_coll", mode_split_vs_coll, 0},
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
    tp_init_world(&world_comm);
    m->run();
    return 0;
}
