/* nextapi.c -- NCCL programs that hang through the API NCCL added in 2.29-2.32: training loops
 * that issue their collectives only through the per-collective config calls (NCCL 2.31's
 * ncclAllReduceConfig and kin, with a profiler tag and a CTA policy), and pipelines that hand
 * work on with one-sided puts and signals (NCCL 2.29's ncclPutSignal, ncclSignal,
 * ncclWaitSignal) on registered windows.
 *
 * Usage: nextapi MODE   (run as N ranks by a launcher; RANK/WORLD_SIZE in the environment)
 * Knobs (all optional):
 *   SCENARIO_VICTIM     the rank that misbehaves (default per mode)
 *   SCENARIO_STEPS      steps before it does (default 2)
 *   SCENARIO_STEP_MS    compute per step, ms (default 5)
 *   SCENARIO_DELAY_MS   how long a busy rank stays busy (default 60000)
 *   SCENARIO_CTA        config_train: the CTA policy of every config (default -1: unset)
 *   SCENARIO_PLAIN      config_train: 1 makes the victim issue the plain twins (ncclAllReduce)
 *                       while the others issue the config calls: the same collectives to NCCL
 *   SCENARIO_OPCNT      signal modes: signals each rank puts, and waits for, per step (default 1)
 *   SCENARIO_GETPROC    graph modes: find the driver's functions through cuGetProcAddress, as
 *                       the CUDA runtime does (default: dlsym on libcuda)
 *   SCENARIO_AHEAD      graph_stuck: steps queued beyond the one that never completes (default 3)
 *   SCENARIO_SYNC_STEPS graph_stuck: the first steps, whose tokens are waited for (default 0)
 * The graph modes need LOCKSTEP_EMU_ASYNC=1 (streams, capture and graphs are the emulated
 * driver's).
 * Every collective waits for its result with tp_sync(), as a training loop does. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep/nccl_next.h>
#include <nccl.h>

#include "common.h"

static int rank, world, victim, steps, step_ms, delay_ms, cta, plain, opcnt;
static float grad[1024];
static float *window_buf;
static ncclComm_t world_comm;
static ncclWindow_t win;

/* A rank busy with work of its own for a long time: a slow shard, a checkpoint written. */
__attribute__((noinline)) void load_batch(void)
{
    tp_compute_ms(delay_ms);
}

/* The config of step `step`'s collectives: the step as the profiler tag, the chosen policy. */
static ncclCollConfig_t step_config(int step)
{
    ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
    c.userProfilerTag = (uint64_t)step + 1000;
    if (cta >= 0)
        c.CTAPolicy = cta;
    return c;
}

/* One data-parallel step: compute, the gradients' all-reduce and a small all-gather of the
 * loss, each through its config call (or its plain twin), waited for. */
__attribute__((noinline)) void config_step(int step, int use_plain)
{
    static float loss[64];
    ncclCollConfig_t c = step_config(step);
    tp_compute_ms(step_ms);
    if (use_plain)
        TP_CHECK(ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, world_comm, NULL));
    else
        TP_CHECK(ncclAllReduceConfig(grad, grad, 1024, ncclFloat32, ncclSum, world_comm, NULL, &c));
    tp_sync();
    if (use_plain)
        TP_CHECK(ncclAllGather(loss + rank, loss, 1, ncclFloat32, world_comm, NULL));
    else
        TP_CHECK(ncclAllGatherConfig(loss + rank, loss, 1, ncclFloat32, world_comm, NULL, &c));
    tp_sync();
}

/* config_train: every rank trains with the config calls only; after `steps` steps the victim
 * loads its next shard for a minute while the others wait in the next all-reduce. */
static void mode_config_train(void)
{
    for (int s = 0; s < steps; s++)
        config_step(s, plain && rank == victim);
    if (rank == victim)
        load_batch();
    config_step(steps, plain && rank == victim);
}

/* config_mismatch: the victim's last all-reduce carries another count (a padded bucket). */
static void mode_config_mismatch(void)
{
    for (int s = 0; s < steps; s++)
        config_step(s, 0);
    ncclCollConfig_t c = step_config(steps);
    tp_compute_ms(step_ms);
    TP_CHECK(ncclAllReduceConfig(grad, grad, rank == victim ? 1000 : 1024, ncclFloat32, ncclSum,
                                 world_comm, NULL, &c));
    tp_sync();
}

/* ---- one-sided pipelines ---- */

static void open_window(void)
{
    window_buf = tp_alloc(4096 * sizeof(float));
    TP_CHECK(ncclCommWindowRegister(world_comm, window_buf, 4096 * sizeof(float), &win, 0));
}

/* Hands this step's activations to the next rank: opcnt puts, each with a signal. */
__attribute__((noinline)) void send_activations(int step)
{
    int next = (rank + 1) % world;
    for (int i = 0; i < opcnt; i++)
        TP_CHECK(ncclPutSignal(grad, 256, ncclFloat32, next, win,
                               (size_t)((step % 4) * 1024 + i * 256) * sizeof(float), 0, 0, 0,
                               world_comm, NULL));
}

/* Waits for the previous rank's activations of this step. */
__attribute__((noinline)) void recv_activations(void)
{
    ncclWaitSignalDesc_t d = {
        .opCnt = opcnt, .peer = (rank + world - 1) % world, .sigIdx = 0, .ctx = 0};
    TP_CHECK(ncclWaitSignal(1, &d, world_comm, NULL));
    tp_sync();
}

/* One pipeline step: compute, hand on, take over, then the step's gradient all-reduce. */
static void pipeline_step(int step)
{
    tp_compute_ms(step_ms);
    send_activations(step);
    recv_activations();
    TP_CHECK(ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, world_comm, NULL));
    tp_sync();
}

/* signal_missing: after `steps` steps the victim goes to load its next shard before it hands
 * its activations on: the next rank waits for its signal, the others in the all-reduce. */
static void mode_signal_missing(void)
{
    open_window();
    for (int s = 0; s < steps; s++)
        pipeline_step(s);
    if (rank == victim)
        load_batch();
    pipeline_step(steps);
}

/* signal_order: at step `steps` every rank waits for its predecessor before it hands on (the
 * two lines swapped in a refactor): each waits for a signal the other has not sent yet. */
static void mode_signal_order(void)
{
    open_window();
    for (int s = 0; s < steps; s++)
        pipeline_step(s);
    tp_compute_ms(step_ms);
    recv_activations();
    send_activations(steps);
}

/* signal_short: the victim signals one time fewer than the next rank waits for (its last
 * micro-batch was empty, and it skipped the put): the next rank waits for the last one. */
static void mode_signal_short(void)
{
    open_window();
    for (int s = 0; s < steps; s++)
        pipeline_step(s);
    tp_compute_ms(step_ms);
    int next = (rank + 1) % world;
    int n = rank == victim ? opcnt - 1 : opcnt;
    for (int i = 0; i < n; i++)
        TP_CHECK(ncclSignal(next, 0, 0, 0, world_comm, NULL));
    recv_activations();
    TP_CHECK(ncclAllReduce(grad, grad, 1024, ncclFloat32, ncclSum, world_comm, NULL));
    tp_sync();
}

/* ---- CUDA graphs ---- */

/* The emulated driver's function `name` (LOCKSTEP_EMU_ASYNC=1 loads it): looked up by handle,
 * or with SCENARIO_GETPROC=1 through cuGetProcAddress, as the CUDA runtime finds every driver
 * function (as CUDA 12.8's runtime asks: the name's form of that version, default stream). */
static void *cu(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *p = NULL;
    if (lib && tp_env_int("SCENARIO_GETPROC", 0)) {
        CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
            (CUresult(*)(const char *, void **, int, cuuint64_t,
                         CUdriverProcAddressQueryResult *))dlsym(lib, "cuGetProcAddress_v2");
        if (gpa && gpa(name, &p, 12080, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS)
            p = NULL;
    } else if (lib) {
        p = dlsym(lib, name);
    }
    if (!p)
        tp_die("graphs: no %s (run with LOCKSTEP_EMU_ASYNC=1)", name);
    return p;
}

#define CU_CHECK(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS)                                                                    \
            tp_die("%s failed: %d", #call, (int)r_);                                               \
    } while (0)

#define LAYERS 2

static struct {
    CUresult (*launch)(CUgraphExec, CUstream);
    CUresult (*sync)(CUstream);
    CUstream stream;
    CUgraphExec exec[LAYERS];
} g;

/* An inference server's start-up: each layer's tensor-parallel all-reduce captured into a CUDA
 * graph of its own (vLLM and SGLang capture their decode steps so), instantiated, the graph
 * itself destroyed (the executable keeps what it needs). Nothing runs yet. */
__attribute__((noinline)) void capture_decode_graphs(void)
{
    CUresult (*create)(CUstream *, unsigned) =
        (CUresult(*)(CUstream *, unsigned))cu("cuStreamCreate");
    CUresult (*begin)(CUstream, CUstreamCaptureMode) =
        tp_env_int("SCENARIO_GETPROC", 0)
            ? (CUresult(*)(CUstream, CUstreamCaptureMode))cu("cuStreamBeginCapture")
            : (CUresult(*)(CUstream, CUstreamCaptureMode))cu("cuStreamBeginCapture_v2");
    CUresult (*end)(CUstream, CUgraph *) =
        (CUresult(*)(CUstream, CUgraph *))cu("cuStreamEndCapture");
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long) =
        tp_env_int("SCENARIO_GETPROC", 0)
            ? (CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))cu("cuGraphInstantiate")
            : (CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))cu(
                  "cuGraphInstantiateWithFlags");
    CUresult (*destroy)(CUgraph) = (CUresult(*)(CUgraph))cu("cuGraphDestroy");
    g.launch = (CUresult(*)(CUgraphExec, CUstream))cu("cuGraphLaunch");
    g.sync = (CUresult(*)(CUstream))cu("cuStreamSynchronize");
    CU_CHECK(create(&g.stream, 0));
    for (int layer = 0; layer < LAYERS; layer++) {
        CUgraph graph;
        CU_CHECK(begin(g.stream, CU_STREAM_CAPTURE_MODE_RELAXED));
        TP_CHECK(ncclAllReduce(grad, grad, 256 << layer, ncclFloat32, ncclSum, world_comm,
                               (cudaStream_t)g.stream));
        CU_CHECK(end(g.stream, &graph));
        CU_CHECK(instantiate(&g.exec[layer], graph, 0));
        CU_CHECK(destroy(graph));
    }
}

/* One decode step: every layer's graph launched; its tokens waited for unless `nosync` (a
 * server that queues steps ahead). */
__attribute__((noinline)) void decode_step(int nosync)
{
    tp_compute_ms(step_ms);
    for (int layer = 0; layer < LAYERS; layer++)
        CU_CHECK(g.launch(g.exec[layer], g.stream));
    if (!nosync)
        CU_CHECK(g.sync(g.stream));
}

/* graph_decode: an inference server serves decode steps by replaying its captured all-reduces;
 * the victim stops serving (a request of its own, a slow tokenizer) while the others wait for
 * the next step's replay. */
static void mode_graph_decode(void)
{
    capture_decode_graphs();
    for (int st = 0; st < steps; st++)
        decode_step(0);
    if (rank == victim)
        load_batch();
    decode_step(0);
}

/* graph_stuck: the replays go on being launched while one of them never completes on the GPUs
 * (a dead link: LOCKSTEP_EMU_HANG_COLL); the hosts queue SCENARIO_AHEAD steps beyond it, then
 * wait for their tokens. */
static void mode_graph_stuck(void)
{
    capture_decode_graphs();
    int ahead = tp_env_int("SCENARIO_AHEAD", 3);
    int synced = tp_env_int("SCENARIO_SYNC_STEPS", 0); /* steps waited for before queuing */
    for (int st = 0; st < steps + ahead; st++)
        decode_step(st >= synced);
    CU_CHECK(g.sync(g.stream));
}

static const struct tp_mode modes[] = {
    {"config_train", mode_config_train, 0},     {"config_mismatch", mode_config_mismatch, -1},
    {"signal_missing", mode_signal_missing, 0}, {"signal_order", mode_signal_order, 0},
    {"signal_short", mode_signal_short, 0},     {"graph_decode", mode_graph_decode, 0},
    {"graph_stuck", mode_graph_stuck, -1},
};

int main(int argc, char **argv)
{
    const struct tp_mode *m =
        tp_pick_mode(argc, argv, "nextapi", modes, sizeof modes / sizeof modes[0]);
    if (!m)
        return 2;
    rank = tp_rank();
    world = tp_world_size();
    victim = tp_env_int("SCENARIO_VICTIM", m->victim >= 0 ? m->victim : world - 1);
    steps = tp_env_int("SCENARIO_STEPS", 2);
    step_ms = tp_env_int("SCENARIO_STEP_MS", 5);
    delay_ms = tp_env_int("SCENARIO_DELAY_MS", 60000);
    cta = tp_env_int("SCENARIO_CTA", -1);
    plain = tp_env_int("SCENARIO_PLAIN", 0);
    opcnt = tp_env_int("SCENARIO_OPCNT", 1);
    if (opcnt < 1)
        opcnt = 1;
    tp_init_world(&world_comm);
    m->run();
    return 0;
}
