/* forker.c -- a parent and its forked child both call NCCL; each must get its own trace. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

/* One single-rank communicator, `calls` AllReduces of `count` floats, destroyed. */
static void single_rank_job(int calls, size_t count)
{
    ncclUniqueId id;
    ncclComm_t comm;
    float x[64] = {0}, y[64];
    TP_CHECK(ncclGetUniqueId(&id));
    TP_CHECK(ncclCommInitRank(&comm, 1, id, 0));
    for (int i = 0; i < calls; i++)
        TP_CHECK(ncclAllReduce(x, y, count, ncclFloat32, ncclSum, comm, NULL));
    TP_CHECK(ncclCommDestroy(comm));
}

int main(void)
{
    single_rank_job(3, 31);
    pid_t pid = fork();
    if (pid == 0) {
        single_rank_job(5, 57);
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    single_rank_job(1, 32);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
