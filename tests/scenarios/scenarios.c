/* scenarios.c -- real NCCL programs that hang the way training jobs do, one per failure mode.
 *
 * Usage: scenarios MODE   (run as N ranks by a launcher; RANK/WORLD_SIZE in the environment)
 * Knobs: SCENARIO_VICTIM (the rank that misbehaves, default the last), SCENARIO_STEPS
 * (training steps, default 5), SCENARIO_DELAY_MS (how late a late rank is, default 30000).
 * Each call site waits for its result with tp_sync(), as a training loop does: with the
 * emulator's LOCKSTEP_EMU_ASYNC=1 the NCCL call returns at once and a hung rank waits in
 * the stream synchronize, as on a GPU; otherwise tp_sync() does nothing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static int rank, world, victim, steps, delay_ms;
static float grad[1024], out[4096];

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* One training step: the gradient AllReduce every rank issues. */
void train_step(ncclComm_t w)
{
    TP_CHECK(ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, w, NULL));
    tp_sync();
}

/* The validation epoch's metric gather. */
void validate(ncclComm_t w)
{
    TP_CHECK(ncclAllGather(grad, out, 4, ncclFloat32, w, NULL));
    tp_sync();
}

/* A barrier as torch.distributed implements it on NCCL: an AllReduce of one element. */
void barrier(ncclComm_t w)
{
    TP_CHECK(ncclAllReduce(grad, grad, 1, ncclFloat32, ncclSum, w, NULL));
    tp_sync();
}

/* Computes for `ms` milliseconds: a rank busy with work of its own, not in NCCL. */
void compute_ms(int ms)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    volatile double x = 1.0;
    do {
        for (int i = 0; i < 100000; i++)
            x = x * 1.0000001 + 1e-9;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

/* One rank spends long preparing data (busy, not in NCCL) while the others wait. */
void prepare_data(void)
{
    compute_ms(delay_ms);
}

/* Sleeps until killed: a rank that has nothing more to do but is still alive. */
static void linger(void)
{
    for (;;)
        pause();
}

static void run_steps(ncclComm_t w, int n)
{
    for (int i = 0; i < n; i++)
        train_step(w);
}

static void mode_prepare_data(ncclComm_t w)
{
    run_steps(w, 2);
    if (rank == victim)
        prepare_data();
    barrier(w);
    run_steps(w, 1);
}

static void mode_uneven_shards(ncclComm_t w)
{
    run_steps(w, rank == victim ? steps - 1 : steps);
    validate(w);
}

void eval_broadcast_config(ncclComm_t w)
{
    TP_CHECK(ncclBroadcast(grad, grad, 16, ncclFloat32, 0, w, NULL));
    tp_sync();
}

static void mode_code_path(ncclComm_t w)
{
    run_steps(w, 2);
    if (rank == victim)
        eval_broadcast_config(w);
    else
        train_step(w);
}

/* DDP's parameter verification: every rank gathers the shapes of its parameters. */
void verify_params(ncclComm_t w, size_t nparams)
{
    TP_CHECK(ncclAllGather(grad, out, nparams, ncclInt64, w, NULL));
    tp_sync();
}

static void mode_shape_mismatch(ncclComm_t w)
{
    verify_params(w, rank == victim ? 12 : 10);
    run_steps(w, 1);
}

static void mode_dtype_mismatch(ncclComm_t w)
{
    run_steps(w, 1);
    TP_CHECK(ncclAllReduce(grad, grad, 256, rank == victim ? ncclFloat16 : ncclFloat32, ncclSum, w,
                           NULL));
    tp_sync();
}

static void mode_redop_mismatch(ncclComm_t w)
{
    run_steps(w, 1);
    TP_CHECK(
        ncclAllReduce(grad, grad, 8, ncclFloat32, rank == victim ? ncclMax : ncclSum, w, NULL));
    tp_sync();
}

/* Pipeline stages: a split communicator whose broadcast disagrees on its root. */
void stage_broadcast(ncclComm_t stage, int root)
{
    TP_CHECK(ncclBroadcast(grad, grad, 64, ncclFloat32, root, stage, NULL));
    tp_sync();
}

static void mode_root_mismatch_split(ncclComm_t w)
{
    ncclComm_t stage;
    TP_CHECK(ncclCommSplit(w, rank % 2, rank, &stage, NULL));
    run_steps(stage, 1);
    stage_broadcast(stage, rank == victim ? 1 : 0);
}

void send_activations(ncclComm_t w, int peer)
{
    TP_CHECK(ncclSend(grad, 256, ncclFloat32, peer, w, NULL));
    tp_sync();
}

void recv_activations(ncclComm_t w, int peer, size_t count)
{
    TP_CHECK(ncclRecv(grad, count, ncclFloat32, peer, w, NULL));
    tp_sync();
}

static void mode_unmatched_send(ncclComm_t w)
{
    run_steps(w, 1);
    if (rank == 0)
        send_activations(w, 1);
    linger();
}

static void mode_p2p_size_mismatch(ncclComm_t w)
{
    run_steps(w, 1);
    if (rank == 0)
        send_activations(w, 1);
    else if (rank == 1)
        recv_activations(w, 0, 128);
    linger();
}

static void mode_sendrecv_deadlock(ncclComm_t w)
{
    run_steps(w, 1);
    if (rank < 2) {
        int peer = 1 - rank;
        send_activations(w, peer); /* both send first: each waits for the other's recv */
        recv_activations(w, peer, 256);
    }
    linger();
}

static void mode_cross_comm_deadlock(ncclComm_t w)
{
    ncclComm_t other;
    TP_CHECK(ncclCommSplit(w, 0, rank, &other, NULL));
    run_steps(w, 1);
    if (rank == victim) {
        train_step(other); /* opposite order: the others are in w first */
        train_step(w);
    } else {
        train_step(w);
        train_step(other);
    }
}

static void mode_segfault(ncclComm_t w)
{
    run_steps(w, 2);
    if (rank == victim) {
        volatile int *p = NULL;
        *p = 42;
    }
    run_steps(w, 1);
}

static void mode_sigkill(ncclComm_t w)
{
    run_steps(w, 2);
    if (rank == victim)
        raise(SIGKILL); /* what the OOM killer does */
    run_steps(w, 1);
}

static void mode_early_exit(ncclComm_t w)
{
    run_steps(w, 2);
    if (rank == victim)
        exit(0);
    run_steps(w, 1);
}

static void mode_straggler(ncclComm_t w)
{
    for (int i = 0; i < steps; i++) {
        if (rank == victim)
            tp_sleep_ms(delay_ms);
        train_step(w);
    }
}

/* Long pauses between collectives with nothing in flight: not a stall. */
static void mode_pauses(ncclComm_t w)
{
    for (int i = 0; i < steps; i++) {
        train_step(w);
        tp_sleep_ms(delay_ms);
    }
}

/* Every step: three collectives and a ring exchange issued back to back (the shim's CUDA event
 * covers only the first of a burst; the heartbeat covers the rest once it completed),
 * synchronized, then a pause outside NCCL: a job that waits elsewhere with all of its GPU
 * work done (a Gloo barrier, data loading). Never a stall. */
static void mode_burst_pauses(ncclComm_t w)
{
    for (int i = 0; i < steps; i++) {
        for (int k = 0; k < 3; k++)
            TP_CHECK(ncclAllReduce(grad, grad, 1, ncclFloat32, ncclSum, w, NULL));
        TP_CHECK(ncclGroupStart());
        TP_CHECK(ncclSend(grad, 4, ncclFloat32, (rank + 1) % world, w, NULL));
        TP_CHECK(ncclRecv(out, 4, ncclFloat32, (rank + world - 1) % world, w, NULL));
        TP_CHECK(ncclGroupEnd());
        tp_sync();
        tp_sleep_ms(delay_ms);
    }
}

/* Holds the stream for SCENARIO_DELAY_MS, as a kernel that spins for minutes does. */
static void spin_on_stream(void *arg)
{
    (void)arg;
    tp_sleep_ms(delay_ms);
}

/* A collective stuck on the GPU behind other work: a burst of collectives, synchronized, a
 * moment of host work, then the victim queues a long "kernel" on its stream before the next
 * AllReduce; every rank issues that AllReduce (calls return at once, as on a GPU) and waits
 * in the stream synchronize. The stuck call is the last, not the burst before it. */
static void mode_stream_blocked(ncclComm_t w)
{
    run_steps(w, 1);
    for (int k = 0; k < 3; k++)
        TP_CHECK(ncclAllReduce(grad, grad, 1, ncclFloat32, ncclSum, w, NULL));
    tp_sync();
    tp_sleep_ms(2);
    if (rank == victim)
        tp_launch_host(spin_on_stream, NULL);
    train_step(w);
}

/* Every step computes longer than the stall threshold, then all ranks finish the collective
 * together (one rank a little later): progress every step, never a stall. */
static void mode_slow_steps(ncclComm_t w)
{
    for (int i = 0; i < steps; i++) {
        compute_ms(delay_ms + (rank == victim ? delay_ms / 8 : 0));
        train_step(w);
    }
}

static void mode_clean(ncclComm_t w)
{
    run_steps(w, steps);
    validate(w);
    barrier(w);
}

struct mode {
    const char *name;
    void (*run)(ncclComm_t w);
};

static const struct mode modes[] = {
    {"prepare_data", mode_prepare_data},
    {"uneven_shards", mode_uneven_shards},
    {"code_path", mode_code_path},
    {"shape_mismatch", mode_shape_mismatch},
    {"dtype_mismatch", mode_dtype_mismatch},
    {"redop_mismatch", mode_redop_mismatch},
    {"root_mismatch_split", mode_root_mismatch_split},
    {"unmatched_send", mode_unmatched_send},
    {"p2p_size_mismatch", mode_p2p_size_mismatch},
    {"sendrecv_deadlock", mode_sendrecv_deadlock},
    {"cross_comm_deadlock", mode_cross_comm_deadlock},
    {"segfault", mode_segfault},
    {"sigkill", mode_sigkill},
    {"early_exit", mode_early_exit},
    {"straggler", mode_straggler},
    {"pauses", mode_pauses},
    {"burst_pauses", mode_burst_pauses},
    {"stream_blocked", mode_stream_blocked},
    {"slow_steps", mode_slow_steps},
    {"clean", mode_clean},
};

int main(int argc, char **argv)
{
    const struct mode *m = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            m = &modes[i];
    if (!m) {
        fprintf(stderr, "usage: scenarios MODE; modes:");
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
            fprintf(stderr, " %s", modes[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    rank = tp_rank();
    world = tp_world_size();
    victim = env_int("SCENARIO_VICTIM", world - 1);
    steps = env_int("SCENARIO_STEPS", 5);
    delay_ms = env_int("SCENARIO_DELAY_MS", 30000);
    ncclComm_t w;
    tp_init_world(&w);
    m->run(w);
    TP_CHECK(ncclCommDestroy(w));
    return 0;
}
