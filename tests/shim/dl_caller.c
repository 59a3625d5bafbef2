/* dl_caller.c -- a library linked against libnccl, loaded by dl_host with RTLD_LOCAL the way
 * Python loads an extension module: libnccl then stays out of the global scope. */
#include <nccl.h>

#include "common.h"

/* Initializes the world communicator, runs `calls` AllReduces; returns the sum seen. */
float dl_caller_run(int calls)
{
    ncclComm_t w;
    tp_init_world(&w);
    float x = 1.0f + (float)tp_rank(), y = 0;
    for (int i = 0; i < calls; i++)
        TP_CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, w, NULL));
    TP_CHECK(ncclCommDestroy(w));
    return y;
}
