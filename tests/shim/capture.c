/* capture.c -- an NCCL call captured into a CUDA graph is marked, not tracked; the same call
 * on the stream afterwards is tracked to completion. Needs the CUDA driver (emulated here). */
#include <stdio.h>

#include <cuda.h>
#include <nccl.h>

#include "common.h"

#define CU_CHECK(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "capture: %s failed: %d\n", #call, (int)r_);                           \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    float x[16] = {0}, y[16];
    CU_CHECK(cuInit(0));
    CUstream s;
    CU_CHECK(cuStreamCreate(&s, 0));
    ncclComm_t w;
    tp_init_world(&w);
    CU_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    TP_CHECK(ncclAllReduce(x, y, 16, ncclFloat32, ncclSum, w, (cudaStream_t)s));
    CUgraph g;
    CU_CHECK(cuStreamEndCapture(s, &g));
    TP_CHECK(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, w, (cudaStream_t)s));
    CU_CHECK(cuStreamSynchronize(s));
    TP_CHECK(ncclCommDestroy(w));
    return 0;
}
