/* fault_programs.c -- NCCL programs that put the shim under stress and faults, one per mode.
 *
 * Usage: fault_programs MODE [ARGS]   (see usage() for the modes; run under the shim by
 * test_hardening.py, which checks their output and the traces they leave). */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

extern char **environ;

static void usage(void)
{
    fprintf(stderr,
            "usage: fault_programs stress THREADS CALLS | kill_target COUNTER_FILE | spawn |\n"
            "                      segv_recover | quiet\n");
    exit(2);
}

/* A single-rank communicator of this process. */
static ncclComm_t local_comm(void)
{
    ncclUniqueId id;
    ncclComm_t comm;
    TP_CHECK(ncclGetUniqueId(&id));
    TP_CHECK(ncclCommInitRank(&comm, 1, id, 0));
    return comm;
}

/* ---- stress: THREADS threads, each on its own communicator, CALLS AllReduces each. Record
 * seq s of thread i carries count i+1 and redop (s-1)%4, sendbuff its own buffer: a torn
 * record mixes fields that cannot belong together. */

#define MAX_THREADS 256
static int calls_per_thread;
static float stress_buf[MAX_THREADS][MAX_THREADS];
static float stress_out[MAX_THREADS][MAX_THREADS];

static void *stress_worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    ncclComm_t comm = local_comm();
    for (int s = 1; s <= calls_per_thread; s++)
        TP_CHECK(ncclAllReduce(stress_buf[i], stress_out[i], (size_t)i + 1, ncclFloat32,
                               (ncclRedOp_t)((s - 1) % 4), comm, NULL));
    TP_CHECK(ncclCommDestroy(comm));
    return NULL;
}

static int stress(int nthreads, int calls)
{
    if (nthreads < 1 || nthreads > MAX_THREADS)
        usage();
    calls_per_thread = calls;
    pthread_t th[MAX_THREADS];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, stress_worker, (void *)(intptr_t)i) != 0)
            tp_die("pthread_create failed");
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    printf("stress: %d threads x %d calls, buffers at %p + %zu per thread\n", nthreads, calls,
           (void *)stress_buf, sizeof(stress_buf[0]));
    return 0;
}

/* ---- kill_target: AllReduces forever; after call n returned, the shared counter holds n.
 * The counter is a shared mapping, so its value survives SIGKILL like the trace. Call n has
 * count (n-1)%64+1. */
static int kill_target(const char *counter_path)
{
    int fd = open(counter_path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        tp_die("cannot make the counter file %s", counter_path);
    _Atomic uint64_t *done = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (done == MAP_FAILED)
        tp_die("cannot map the counter file");
    float x[64] = {0}, y[64];
    ncclComm_t comm = local_comm();
    for (uint64_t n = 1;; n++) {
        TP_CHECK(ncclAllReduce(x, y, (size_t)((n - 1) % 64 + 1), ncclFloat32, ncclSum, comm, NULL));
        atomic_store_explicit(done, n, memory_order_release);
    }
}

/* ---- spawn: NCCL before and after fork (no exec), posix_spawn and exec of itself. */
static void calls(int n, size_t count)
{
    float x[64] = {0}, y[64];
    ncclComm_t comm = local_comm();
    for (int i = 0; i < n; i++)
        TP_CHECK(ncclAllReduce(x, y, count, ncclFloat32, ncclSum, comm, NULL));
    TP_CHECK(ncclCommDestroy(comm));
}

static int spawn_family(const char *self)
{
    calls(2, 11); /* the parent, before anything */
    pid_t pid = fork();
    if (pid == 0) {
        calls(3, 12); /* fork without exec */
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        tp_die("forked child failed");
    char *child_argv[] = {(char *)self, "spawned", NULL};
    if (posix_spawn(&pid, self, NULL, NULL, child_argv, environ) != 0)
        tp_die("posix_spawn failed");
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        tp_die("spawned child failed");
    fflush(stdout);
    char *exec_argv[] = {(char *)self, "execed", NULL};
    execv(self, exec_argv);
    tp_die("execv failed");
}

/* ---- segv_recover: a program that survives its own SIGSEGV (siglongjmp out of its handler)
 * and keeps calling NCCL. Its handler is installed before the first NCCL call and again
 * after it (the shim must chain to both). */
static sigjmp_buf recover;
static volatile sig_atomic_t faults;

static void on_segv(int sig)
{
    (void)sig;
    faults++;
    siglongjmp(recover, 1);
}

static void fault_once(void)
{
    static volatile int *guard;
    if (!guard) {
        void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            tp_die("mmap failed");
        guard = p;
    }
    if (sigsetjmp(recover, 1) == 0)
        *guard = 1; /* a real fault: the page has no access */
}

static int segv_recover(void)
{
    signal(SIGSEGV, on_segv);
    calls(2, 21);
    fault_once();
    calls(2, 22);
    signal(SIGSEGV, on_segv);
    fault_once();
    calls(2, 23);
    printf("recovered from %d faults\n", (int)faults);
    return faults == 2 ? 0 : 1;
}

/* ---- quiet: linked with libnccl, never calls it: prints the threads it has at the end. */
static int quiet(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    printf("threads %d nccl %p\n", n, (void *)ncclGetErrorString);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *mode = argv[1];
    if (strcmp(mode, "stress") == 0 && argc == 4)
        return stress(atoi(argv[2]), atoi(argv[3]));
    if (strcmp(mode, "kill_target") == 0 && argc == 3)
        return kill_target(argv[2]);
    if (strcmp(mode, "spawn") == 0)
        return spawn_family(argv[0]);
    if (strcmp(mode, "spawned") == 0) {
        calls(5, 13);
        return 0;
    }
    if (strcmp(mode, "execed") == 0) {
        calls(4, 14);
        return 0;
    }
    if (strcmp(mode, "segv_recover") == 0)
        return segv_recover();
    if (strcmp(mode, "quiet") == 0)
        return quiet();
    usage();
}
