/* blocker.c -- rank 1 skips the second collective and sleeps: rank 0 blocks inside it until
 * it is SIGKILLed, leaving a trace whose last record is entered and never left. */
#include <unistd.h>

#include <nccl.h>

#include "common.h"

int main(void)
{
    ncclComm_t w;
    tp_init_world(&w);
    float x[4] = {0}, y[4];
    TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, w, NULL));
    if (tp_rank() != 1)
        TP_CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, w, NULL));
    for (;;)
        pause();
}
