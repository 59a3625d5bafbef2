/* static_nccl.c -- NCCL linked statically into the executable (the emulator's objects), as conda
 * builds of PyTorch link it into libtorch_cuda.so: its calls never pass through the dynamic
 * linker, so the shim cannot see them. Links the CUDA driver. Rank $REACH_VICTIM (default 1)
 * calls Broadcast at step 3 where the others AllReduce: the job hangs. */
#include <cuda.h>
#include <stdlib.h>

#include "common.h"

int main(void)
{
    if (cuInit(0) != CUDA_SUCCESS)
        tp_die("cuInit failed");
    ncclComm_t comm;
    tp_init_world(&comm);
    const char *v = getenv("REACH_VICTIM");
    int victim = v && *v ? atoi(v) : 1;
    float x[16] = {1}, y[16];
    for (int step = 1; step <= 5; step++) {
        if (step == 3 && tp_rank() == victim)
            TP_CHECK(ncclBroadcast(x, y, 16, ncclFloat32, 0, comm, NULL));
        else
            TP_CHECK(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, comm, NULL));
    }
    TP_CHECK(ncclCommDestroy(comm));
    return 0;
}
