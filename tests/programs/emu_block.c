/* emu_block.c -- NCCL programs whose ranks do not line up (they must block, not crash), and an
 * abort check. */
#define _GNU_SOURCE
#include "common.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
    fprintf(stderr, "usage: emu_block skip|count|p2p|p2psize|nogroup|abort|async_skip\n");
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static float buf[4096], out[4096];

/* Rank 1 skips the second AllReduce and leaves; the others wait in it. */
static int skip(ncclComm_t comm, int rank)
{
    TP_CHECK(ncclAllReduce(buf, out, 1024, ncclFloat32, ncclSum, comm, NULL));
    if (rank != 1)
        TP_CHECK(ncclAllReduce(buf, out, 1024, ncclFloat32, ncclSum, comm, NULL));
    TP_CHECK(ncclCommDestroy(comm));
    return 0;
}

/* Rank 1 calls AllReduce with a different count: everyone waits forever. */
static int count(ncclComm_t comm, int rank)
{
    size_t n = rank == 1 ? 2048 : 1024;
    TP_CHECK(ncclAllReduce(buf, out, n, ncclFloat32, ncclSum, comm, NULL));
    fprintf(stderr, "rank %d: AllReduce with mismatched counts completed!\n", rank);
    return 3;
}

/* Rank 0 sends to rank 1, which never receives. */
static int p2p(ncclComm_t comm, int rank)
{
    if (rank == 0)
        TP_CHECK(ncclSend(buf, 100, ncclFloat32, 1, comm, NULL));
    else
        tp_sleep_ms(60000);
    return rank == 0 ? 3 : 0;
}

/* Rank 0 sends 100 floats, rank 1 expects 1000: both wait forever. */
static int p2psize(ncclComm_t comm, int rank)
{
    if (rank == 0)
        TP_CHECK(ncclSend(buf, 100, ncclFloat32, 1, comm, NULL));
    if (rank == 1)
        TP_CHECK(ncclRecv(out, 1000, ncclFloat32, 0, comm, NULL));
    return 3;
}

/* Both ranks Send before Recv outside a group: a rendezvous deadlock. */
static int nogroup(ncclComm_t comm, int rank)
{
    int peer = 1 - rank;
    if (rank > 1)
        return 0;
    TP_CHECK(ncclSend(buf, 100, ncclFloat32, peer, comm, NULL));
    TP_CHECK(ncclRecv(out, 100, ncclFloat32, peer, comm, NULL));
    return 3;
}

/* Async mode (LOCKSTEP_EMU_ASYNC=1): rank 1 skips the second AllReduce. The
 * others' call must return at once (a watchdog exits 4 otherwise) and their
 * default stream must stay busy; they then hang in tp_sync, as GPU ranks hang
 * in cudaStreamSynchronize. Reaching the end is a failure (exit 3). */
static int async_skip(ncclComm_t comm, int rank)
{
    const char *e = getenv("LOCKSTEP_EMU_ASYNC");
    if (!e || strcmp(e, "1") != 0)
        tp_die("async_skip needs LOCKSTEP_EMU_ASYNC=1");
    TP_CHECK(ncclAllReduce(buf, out, 1024, ncclFloat32, ncclSum, comm, NULL));
    tp_sync();
    if (rank == 1) {
        TP_CHECK(ncclCommDestroy(comm));
        return 0;
    }
    tp_watch_start("async AllReduce", 1000);
    TP_CHECK(ncclAllReduce(buf, out, 1024, ncclFloat32, ncclSum, comm, NULL));
    tp_watch_end();
    CUresult (*query)(CUstream) = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "cuStreamQuery");
    memcpy(&query, &sym, sizeof(query));
    if (!query)
        tp_die("cuStreamQuery not found (emulated libcuda not loaded)");
    CUresult q = query(NULL);
    if (q != CUDA_ERROR_NOT_READY)
        tp_die("default stream reports %d, expected NOT_READY", (int)q);
    fprintf(stderr, "rank %d: AllReduce returned, stream busy; waiting in tp_sync\n", rank);
    tp_sync();
    fprintf(stderr, "rank %d: tp_sync returned although rank 1 skipped the AllReduce!\n", rank);
    return 3;
}

struct blocked {
    ncclComm_t comm;
    ncclResult_t res;
    double returned;
};

static void *blocked_main(void *arg)
{
    struct blocked *b = arg;
    b->res = ncclAllReduce(buf, out, 1024, ncclFloat32, ncclSum, b->comm, NULL);
    b->returned = now_s();
    return NULL;
}

/* One process, two ranks: rank 0 blocks in AllReduce (rank 1 never calls it);
 * another thread aborts the comm; the call must fail within 2 s. */
static int abort_check(void)
{
    ncclComm_t comms[2];
    TP_CHECK(ncclCommInitAll(comms, 2, NULL));
    struct blocked b = {comms[0], ncclSuccess, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, blocked_main, &b) != 0)
        tp_die("pthread_create failed");
    tp_sleep_ms(300);
    if (b.returned != 0)
        tp_die("AllReduce returned without its peer");
    double t0 = now_s();
    TP_CHECK(ncclCommAbort(comms[0]));
    pthread_join(t, NULL);
    double dt = b.returned - t0;
    if (b.res == ncclSuccess)
        tp_die("aborted AllReduce returned ncclSuccess");
    if (dt > 2.0)
        tp_die("aborted AllReduce returned after %.2f s", dt);
    fprintf(stderr, "abort: blocked AllReduce returned '%s' %.3f s after ncclCommAbort (%s)\n",
            ncclGetErrorString(b.res), dt, ncclGetLastError(NULL));
    TP_CHECK(ncclCommDestroy(comms[1]));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        usage();
    const char *mode = argv[1];
    if (strcmp(mode, "abort") == 0)
        return abort_check();
    int rank = tp_rank();
    if (tp_world_size() < 2)
        tp_die("emu_block %s needs at least 2 ranks", mode);
    ncclComm_t comm;
    tp_init_world(&comm);
    fprintf(stderr, "rank %d: running '%s' (expected to block)\n", rank, mode);
    if (strcmp(mode, "skip") == 0)
        return skip(comm, rank);
    if (strcmp(mode, "count") == 0)
        return count(comm, rank);
    if (strcmp(mode, "p2p") == 0)
        return p2p(comm, rank);
    if (strcmp(mode, "p2psize") == 0)
        return p2psize(comm, rank);
    if (strcmp(mode, "nogroup") == 0)
        return nogroup(comm, rank);
    if (strcmp(mode, "async_skip") == 0)
        return async_skip(comm, rank);
    usage();
}
