/* threads.c -- 16 threads, each on its own single-rank communicator, call NCCL at once. With a
 * second argument "slow", thread 0 makes one call, waits until the others have made all of
 * theirs, and makes one more: its ticket block is then far older than the other threads'.
 * With "pause MS", each thread sleeps MS after half of its calls (the shim's clock is
 * calibrated in between: the calls before it read the kernel's clock). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#include "common.h"

#define NTHREADS 16

static int calls_per_thread = 2000;
static int slow;                 /* thread 0 calls once, then once more after the others */
static int pause_ms;             /* every thread sleeps this long after half its calls */
static _Atomic int others_done;  /* threads other than 0 that made all their calls */
static _Atomic int slow_started; /* thread 0 made its first call (the others start then) */

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    ncclUniqueId id;
    ncclComm_t comm;
    float x[4] = {1, 2, 3, 4}, y[4];
    TP_CHECK(ncclGetUniqueId(&id));
    TP_CHECK(ncclCommInitRank(&comm, 1, id, 0));
    if (slow && me == 0) {
        TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
        atomic_store(&slow_started, 1);
        while (atomic_load(&others_done) < NTHREADS - 1)
            usleep(1000);
        TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
        printf("slow thread done\n");
        fflush(stdout);
        pause(); /* still running, its block still held, until the test kills the process */
    }
    for (int i = 0; i < calls_per_thread; i++) {
        if (pause_ms && i == calls_per_thread / 2)
            usleep((useconds_t)pause_ms * 1000);
        TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
    }
    TP_CHECK(ncclCommDestroy(comm));
    atomic_fetch_add(&others_done, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        calls_per_thread = atoi(argv[1]);
    slow = argc > 2 && strcmp(argv[2], "slow") == 0;
    pause_ms = argc > 3 && strcmp(argv[2], "pause") == 0 ? atoi(argv[3]) : 0;
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
        while (slow && i == 0 && !atomic_load(&slow_started))
            usleep(1000);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    return 0;
}
