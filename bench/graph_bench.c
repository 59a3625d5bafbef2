/* graph_bench.c -- what a CUDA-graph launch costs the shim: a single-rank communicator, K
 * count-1 all-reduces captured into one graph, the graph instantiated and launched N times.
 * Run under callgrind with and without the shim, collecting in launch_batch() only (the
 * launching thread's launches, not the device thread's work nor the synchronizations between
 * batches): the difference per launch is the shim's, for K calls replayed each time.
 * Needs LOCKSTEP_EMU_ASYNC=1 (the emulated driver's graphs).
 *
 * Usage: graph_bench --calls K --launches N */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <nccl.h>

#define BATCH 64 /* launches between two synchronizations */

static CUresult (*launch)(CUgraphExec, CUstream);

static void die(const char *what, int code)
{
    fprintf(stderr, "graph_bench: %s failed (%d)\n", what, code);
    exit(2);
}

static void *cu(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        die(name, 0);
    return p;
}

/* The measured part: `n` launches of `exec` on `s`. */
static __attribute__((noinline)) void launch_batch(CUgraphExec exec, CUstream s, long n)
{
    for (long i = 0; i < n; i++) {
        CUresult r = launch(exec, s);
        if (r != CUDA_SUCCESS)
            die("cuGraphLaunch", r);
    }
}

int main(int argc, char **argv)
{
    long calls = 1, launches = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--calls"))
            calls = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--launches"))
            launches = strtol(argv[i + 1], NULL, 10);
    }
    if (calls < 0 || calls > 4096 || launches < 1) {
        fprintf(stderr, "usage: graph_bench --calls K --launches N\n");
        return 2;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        die("finding libcuda.so.1 (LOCKSTEP_EMU_ASYNC=1)", 0);
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))cu(lib, "cuInit");
    CUresult (*create)(CUstream *, unsigned) =
        (CUresult(*)(CUstream *, unsigned))cu(lib, "cuStreamCreate");
    CUresult (*begin)(CUstream, CUstreamCaptureMode) =
        (CUresult(*)(CUstream, CUstreamCaptureMode))cu(lib, "cuStreamBeginCapture_v2");
    CUresult (*end)(CUstream, CUgraph *) =
        (CUresult(*)(CUstream, CUgraph *))cu(lib, "cuStreamEndCapture");
    CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long) =
        (CUresult(*)(CUgraphExec *, CUgraph, unsigned long long))cu(lib,
                                                                    "cuGraphInstantiateWithFlags");
    CUresult (*sync)(CUstream) = (CUresult(*)(CUstream))cu(lib, "cuStreamSynchronize");
    launch = (CUresult(*)(CUgraphExec, CUstream))cu(lib, "cuGraphLaunch");
    CUresult r = init(0);
    if (r != CUDA_SUCCESS)
        die("cuInit", r);
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t nr = ncclGetUniqueId(&id);
    if (nr == ncclSuccess)
        nr = ncclCommInitRank(&comm, 1, id, 0);
    if (nr != ncclSuccess)
        die("ncclCommInitRank", nr);
    static float buf[1];
    CUstream s;
    CUgraph graph;
    CUgraphExec exec;
    if ((r = create(&s, 0)) != CUDA_SUCCESS || (r = begin(s, CU_STREAM_CAPTURE_MODE_RELAXED)))
        die("capture", r);
    for (long k = 0; k < calls; k++)
        if ((nr = ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, (cudaStream_t)s)))
            die("ncclAllReduce", nr);
    if ((r = end(s, &graph)) != CUDA_SUCCESS || (r = instantiate(&exec, graph, 0)))
        die("instantiate", r);
    for (long done = 0; done < launches; done += BATCH) {
        launch_batch(exec, s, launches - done < BATCH ? launches - done : BATCH);
        if ((r = sync(s)) != CUDA_SUCCESS)
            die("cuStreamSynchronize", r);
    }
    ncclCommDestroy(comm);
    printf("launches %ld calls %ld\n", launches, calls);
    return 0;
}
