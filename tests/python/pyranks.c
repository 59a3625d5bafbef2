/* pyranks.c -- plays libtorch for the Python tests: a few NCCL entry points a Python script
 * calls through ctypes.CDLL, which releases the GIL around the call as PyTorch's bindings do.
 * One world communicator per process. Every function returns 0 when the call succeeded and
 * the result is right, 1 on a wrong result, 2 on an NCCL error (printed on stderr). */
#include <nccl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

static ncclComm_t world;
static int my_rank, nranks = 1;
static atomic_int entered; /* calls entered (counted just before NCCL is called) */

static int nccl_failed(const char *what, ncclResult_t r)
{
    fprintf(stderr, "rank %d: pyranks: %s: %s\n", my_rank, what, ncclGetErrorString(r));
    return 2;
}

/* The world communicator from RANK / WORLD_SIZE / LOCKSTEP_TEST_IDFILE; returns the rank. */
int pr_init(void)
{
    tp_init_world(&world);
    my_rank = tp_rank();
    nranks = tp_world_size();
    return my_rank;
}

int pr_world_size(void)
{
    return nranks;
}

/* How many pyranks calls entered NCCL so far (a thread blocked in one counts). */
int pr_entered(void)
{
    return atomic_load(&entered);
}

/* AllReduce (sum) of `count` floats: element i of rank r is r + 1 + i. */
int pr_all_reduce(int count)
{
    float stackbuf[64], *buf = count <= 64 ? stackbuf : tp_alloc((size_t)count * sizeof(float));
    for (int i = 0; i < count; i++)
        buf[i] = (float)(my_rank + 1 + i);
    atomic_fetch_add(&entered, 1);
    ncclResult_t r = ncclAllReduce(buf, buf, (size_t)count, ncclFloat32, ncclSum, world, NULL);
    int rc = 0;
    if (r != ncclSuccess)
        rc = nccl_failed("ncclAllReduce", r);
    for (int i = 0; rc == 0 && i < count; i++)
        if (buf[i] != (float)(nranks * (nranks + 1) / 2 + nranks * i)) {
            fprintf(stderr, "rank %d: pyranks: AllReduce element %d is %g\n", my_rank, i,
                    (double)buf[i]);
            rc = 1;
        }
    if (buf != stackbuf)
        free(buf);
    return rc;
}

/* AllReduce of 4 floats left on the stream (async mode: it completes on the emulated GPU);
 * pr_sync() waits for it. */
int pr_all_reduce_async(void)
{
    static float buf[4];
    atomic_fetch_add(&entered, 1);
    ncclResult_t r = ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, world, NULL);
    return r == ncclSuccess ? 0 : nccl_failed("ncclAllReduce", r);
}

/* cuStreamSynchronize of the default stream: its CUresult, 0 in blocking mode. */
int pr_sync(void)
{
    return tp_sync_result();
}

/* Broadcast of `count` ints from `root`: the root's element i is 1000 + i. */
int pr_broadcast(int count, int root)
{
    int stackbuf[64], *buf = count <= 64 ? stackbuf : tp_alloc((size_t)count * sizeof(int));
    for (int i = 0; i < count; i++)
        buf[i] = my_rank == root ? 1000 + i : -1;
    atomic_fetch_add(&entered, 1);
    ncclResult_t r = ncclBroadcast(buf, buf, (size_t)count, ncclInt32, root, world, NULL);
    int rc = 0;
    if (r != ncclSuccess)
        rc = nccl_failed("ncclBroadcast", r);
    for (int i = 0; rc == 0 && i < count; i++)
        if (buf[i] != 1000 + i) {
            fprintf(stderr, "rank %d: pyranks: Broadcast element %d is %d\n", my_rank, i, buf[i]);
            rc = 1;
        }
    if (buf != stackbuf)
        free(buf);
    return rc;
}

/* A barrier as torch.distributed does it: an AllReduce of one int. */
int pr_barrier(void)
{
    int one = 1;
    atomic_fetch_add(&entered, 1);
    ncclResult_t r = ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, world, NULL);
    if (r != ncclSuccess)
        return nccl_failed("barrier", r);
    return one == nranks ? 0 : 1;
}

int pr_destroy(void)
{
    ncclResult_t r = ncclCommDestroy(world);
    world = NULL;
    return r == ncclSuccess ? 0 : nccl_failed("ncclCommDestroy", r);
}

/* n AllReduces of one float, timed inside C: the elapsed ns, or -1 on an error or a wrong
 * result. For the benchmark: what one call costs, without ctypes in the measurement. */
int64_t pr_loop(int64_t n)
{
    float x = 1.0f, y = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int64_t i = 0; i < n; i++) {
        ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, world, NULL);
        if (r != ncclSuccess) {
            nccl_failed("ncclAllReduce", r);
            return -1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (n > 0 && y != (float)nranks)
        return -1;
    return (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
}
