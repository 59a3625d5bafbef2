/* shim_bench.c -- a plain NCCL program that issues many count-1 allreduces on single-rank
 * communicators, timed per call; run with and without the shim to get the shim's cost. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include "ticks.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cuda.h>
#include <nccl.h>

struct options {
    long calls;  /* calls per repetition per thread */
    int reps;    /* repetitions (each reported; the median is taken) */
    int threads; /* threads calling at once, one communicator each */
    int frames;  /* nested frames between the thread's entry and the calls */
    int async;   /* LOCKSTEP_EMU_ASYNC=1: synchronize the stream every 1024 calls */
    int floor;   /* --floor 1: around each call, what recording it must cost at least */
};

/* The floor of recording a call, done around each call with --floor 1 (run without the shim):
 * two TSC reads, one locked add on a counter every thread shares, one 128-byte record written
 * into a MAP_SHARED ring. */
struct floor_record {
    uint64_t w[16];
};
static struct floor_record *floor_ring; /* FLOOR_RING records, MAP_SHARED */
#define FLOOR_RING 32768u
static _Atomic uint64_t floor_ticket;

struct worker {
    const struct options *opt;
    ncclComm_t comm;
    pthread_barrier_t *barrier;
    double *ns_per_call;   /* [reps]: thread CPU time per call */
    double *wall_per_call; /* [reps]: wall time per call */
    double *tsc_per_call;  /* [reps]: thread CPU time per call in TSC cycles */
};

typedef CUresult (*cu_sync_fn)(CUstream);
static cu_sync_fn stream_sync;

static void die(const char *what, int code)
{
    fprintf(stderr, "shim_bench: %s failed (%d)\n", what, code);
    exit(2);
}

static double clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The measured loop: `calls` allreduces of one float. */
static __attribute__((noinline)) void call_loop(struct worker *w)
{
    static float send = 1.0f;
    float recv;
    const struct options *o = w->opt;
    for (int rep = -1; rep < o->reps; rep++) { /* rep -1 warms up */
        long n = rep < 0 ? o->calls / 10 + 1 : o->calls;
        pthread_barrier_wait(w->barrier);
        double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);
        uint64_t tsc0 = ls_ticks();
        for (long i = 0; i < n; i++) {
            struct floor_record *fr = NULL;
            uint64_t tk = 0;
            if (o->floor) {
                uint64_t enter = ls_ticks();
                tk = atomic_fetch_add_explicit(&floor_ticket, 1, memory_order_relaxed);
                fr = &floor_ring[tk % FLOOR_RING];
                fr->w[1] = (uint64_t)(uintptr_t)w->comm;
                fr->w[2] = (uint64_t)i;
                fr->w[3] = 1;
                fr->w[4] = (uint64_t)(uintptr_t)&send;
                fr->w[5] = (uint64_t)(uintptr_t)&recv;
                fr->w[6] = 0;
                fr->w[7] = enter;
                fr->w[8] = 0;
                fr->w[9] = 0;
                fr->w[10] = 0;
                fr->w[11] = 0;
                fr->w[12] = 0;
                fr->w[13] = 0;
                fr->w[14] = 0;
                atomic_store_explicit((_Atomic uint64_t *)&fr->w[0], tk + 1, memory_order_release);
            }
            ncclResult_t r = ncclAllReduce(&send, &recv, 1, ncclFloat, ncclSum, w->comm, NULL);
            if (o->floor) {
                fr->w[8] = ls_ticks();
                atomic_store_explicit((_Atomic uint64_t *)&fr->w[15], (uint64_t)r,
                                      memory_order_release);
            }
            if (r != ncclSuccess)
                die("ncclAllReduce", r);
            if (o->async && (i & 1023) == 1023)
                stream_sync(NULL);
        }
        if (o->async)
            stream_sync(NULL);
        double c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t1 = clock_ns(CLOCK_MONOTONIC);
        uint64_t tsc1 = ls_ticks();
        if (rep >= 0) {
            /* CPU time in TSC cycles (the TSC's rate over this repetition's wall time): time
             * the thread spent waiting for a CPU on a shared machine is left out. */
            w->tsc_per_call[rep] = (c1 - c0) / (double)n * (double)(tsc1 - tsc0) / (t1 - t0);
            w->ns_per_call[rep] = (c1 - c0) / (double)n;
            w->wall_per_call[rep] = (t1 - t0) / (double)n;
        }
    }
}

/* Recurses `depth` frames deep (none of them a tail call), then runs the loop. */
static __attribute__((noinline)) int nest(struct worker *w, int depth)
{
    if (depth <= 0) {
        call_loop(w);
        return 0;
    }
    volatile int keep = nest(w, depth - 1);
    return keep + 1;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    nest(w, w->opt->frames);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: shim_bench [--calls N] [--reps R] [--threads T] [--frames F] [--floor 1]\n"
            "Prints cpu_ns_per_call and wall_ns_per_call (medians over reps and "
            "threads).\n");
    exit(2);
}

static void find_stream_sync(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *init = lib ? dlsym(lib, "cuInit") : NULL;
    void *sync = lib ? dlsym(lib, "cuStreamSynchronize") : NULL;
    if (!init || !sync)
        die("finding libcuda.so.1 (LOCKSTEP_EMU_ASYNC=1)", 0);
    CUresult (*cu_init)(unsigned);
    memcpy(&cu_init, &init, sizeof init);
    memcpy(&stream_sync, &sync, sizeof sync);
    CUresult r = cu_init(0);
    if (r != CUDA_SUCCESS)
        die("cuInit", r);
}

/* Peak resident set of this process image, from /proc/self/status (VmHWM), -1 unknown.
 * Not getrusage's ru_maxrss: Linux carries that over fork and exec from the parent, so a
 * benchmark started by a larger driver would report the driver's peak. */
static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    struct options o = {.calls = 100000, .reps = 5, .threads = 1, .frames = 0};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc)
            usage();
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--calls"))
            o.calls = v;
        else if (!strcmp(argv[i], "--reps"))
            o.reps = (int)v;
        else if (!strcmp(argv[i], "--threads"))
            o.threads = (int)v;
        else if (!strcmp(argv[i], "--frames"))
            o.frames = (int)v;
        else if (!strcmp(argv[i], "--floor"))
            o.floor = v != 0;
        else
            usage();
        i++;
    }
    if (o.calls < 1 || o.reps < 1 || o.threads < 1 || o.threads > 256 || o.frames < 0 ||
        o.frames > 1000)
        usage();
    const char *async = getenv("LOCKSTEP_EMU_ASYNC");
    o.async = async && !strcmp(async, "1");
    if (o.async)
        find_stream_sync();

    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)o.threads);
    struct worker *w = calloc((size_t)o.threads, sizeof *w);
    double *cpu = calloc((size_t)o.threads * (size_t)o.reps, sizeof *cpu);
    double *wall = calloc((size_t)o.threads * (size_t)o.reps, sizeof *wall);
    double *tsc = calloc((size_t)o.threads * (size_t)o.reps, sizeof *tsc);
    if (o.floor) {
        floor_ring = mmap(NULL, FLOOR_RING * sizeof *floor_ring, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (floor_ring == MAP_FAILED)
            die("mmap", 0);
    }
    pthread_t *tids = calloc((size_t)o.threads, sizeof *tids);
    for (int i = 0; i < o.threads; i++) {
        ncclUniqueId id;
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            die("ncclGetUniqueId", r);
        r = ncclCommInitRank(&w[i].comm, 1, id, 0);
        if (r != ncclSuccess)
            die("ncclCommInitRank", r);
        w[i].opt = &o;
        w[i].barrier = &barrier;
        w[i].ns_per_call = cpu + (size_t)i * (size_t)o.reps;
        w[i].wall_per_call = wall + (size_t)i * (size_t)o.reps;
        w[i].tsc_per_call = tsc + (size_t)i * (size_t)o.reps;
    }
    /* A pause before the timed calls: the shim's heartbeat publishes its TSC conversion within
     * about 20 ms of the first call, and the calls should be measured with it (steady state),
     * under valgrind too, which runs one thread at a time. */
    struct timespec pause = {0, 200000000};
    nanosleep(&pause, NULL);
    for (int i = 0; i < o.threads; i++)
        pthread_create(&tids[i], NULL, worker_main, &w[i]);
    for (int i = 0; i < o.threads; i++)
        pthread_join(tids[i], NULL);
    for (int i = 0; i < o.threads; i++)
        ncclCommDestroy(w[i].comm);
    size_t n = (size_t)o.threads * (size_t)o.reps;
    printf("cpu_ns_per_call %.1f\nwall_ns_per_call %.1f\ntsc_per_call %.1f\nvmhwm_kib %ld\n",
           median(cpu, n), median(wall, n), median(tsc, n), peak_rss_kib());
    pthread_barrier_destroy(&barrier);
    free(tids);
    free(tsc);
    free(wall);
    free(cpu);
    free(w);
    return 0;
}
