/* threads.c -- 16 threads, each on its own single-rank communicator, call NCCL at once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#include "common.h"

#define NTHREADS 16

static int calls_per_thread = 2000;

static void *worker(void *arg)
{
    (void)arg;
    ncclUniqueId id;
    ncclComm_t comm;
    float x[4] = {1, 2, 3, 4}, y[4];
    TP_CHECK(ncclGetUniqueId(&id));
    TP_CHECK(ncclCommInitRank(&comm, 1, id, 0));
    for (int i = 0; i < calls_per_thread; i++)
        TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, comm, NULL));
    TP_CHECK(ncclCommDestroy(comm));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        calls_per_thread = atoi(argv[1]);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    return 0;
}
