/* cuda_only.c -- a single-GPU program: the CUDA driver and no NCCL at all. Sleeps
 * $REACH_SLEEP_MS (default 2500) so that the shim's watch for unseen NCCL calls has looked. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
    if (cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "cuda_only: cuInit failed\n");
        return 1;
    }
    const char *v = getenv("REACH_SLEEP_MS");
    long ms = v && *v ? atol(v) : 2500;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    printf("done\n");
    return 0;
}
