/* dlsym_client.c -- an NCCL program the way XLA, TensorFlow and pynccl are: no link against
 * libnccl; it dlopens the library by path (RTLD_LOCAL) and calls only pointers from dlsym.
 *
 * Usage: dlsym_client LIBNCCL MODE. Rank and size from RANK/WORLD_SIZE, the unique id through
 * $LOCKSTEP_TEST_IDFILE.world (launch-ranks sets both). Modes:
 *   clean   five AllReduces, then exit 0 (prints "sum S")
 *   hang    rank $REACH_VICTIM (default 1) calls Broadcast at step 3 where the others call
 *           AllReduce: the job hangs
 *   dlvsym  as clean, with ncclAllReduce from dlvsym(handle, name, "NCCL_TEST")
 *   pnccl   as hang, through the pncclX names (which the shim does not wrap), with the CUDA
 *           driver ($REACH_LIBCUDA) loaded: NCCL in use, and the shim sees none of it
 *   async   as clean, polling ncclCommGetAsyncError after every step as a watchdog does; on an
 *           error it prints "async error N" and exits 1
 *   newer   as clean, then calls ncclAllReduceConfig (NCCL 2.31) twice by its name, as a
 *           program built against newer headers than the library it runs on (LIBNCCL an older
 *           one): the name binds to the shim's wrapper, the only definition; prints "config R R"
 *           (the two results) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockstep/nccl_next.h>
#include <nccl.h>

/* The program's own reference, bound by the dynamic linker at start (weak: it runs without a
 * definition too, and then says so). */
extern __typeof__(ncclAllReduceConfig) ncclAllReduceConfig __attribute__((weak));

typedef ncclResult_t (*get_id_fn)(ncclUniqueId *);
typedef ncclResult_t (*init_rank_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*all_reduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                      ncclComm_t, cudaStream_t);
typedef ncclResult_t (*broadcast_fn)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                                     cudaStream_t);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);
typedef ncclResult_t (*async_error_fn)(ncclComm_t, ncclResult_t *);

static struct {
    get_id_fn get_id;
    init_rank_fn init_rank;
    all_reduce_fn all_reduce;
    broadcast_fn broadcast;
    destroy_fn destroy;
    async_error_fn async_error; /* mode async only */
} nccl;

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void die(const char *what, const char *why)
{
    fprintf(stderr, "dlsym_client rank %d: %s: %s\n", env_int("RANK", 0), what, why ? why : "?");
    exit(1);
}

static void check(ncclResult_t r, const char *what)
{
    if (r != ncclSuccess) {
        char code[32];
        snprintf(code, sizeof code, "ncclResult %d", (int)r);
        die(what, code);
    }
}

/* The function named `name` (with `prefix`, "" or "p"), from dlsym or, `version` set, dlvsym. */
static void *lookup(void *h, const char *prefix, const char *name, const char *version)
{
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    void *p = version ? dlvsym(h, full, version) : dlsym(h, full);
    if (!p)
        die(full, dlerror());
    return p;
}

/* Rank 0 makes the id and publishes it (temporary file + rename); the others wait for it. */
static ncclUniqueId exchange_id(void)
{
    ncclUniqueId id;
    const char *base = getenv("LOCKSTEP_TEST_IDFILE");
    char path[4096], tmp[4200];
    if (!base)
        die("LOCKSTEP_TEST_IDFILE", "not set (run under launch-ranks)");
    snprintf(path, sizeof path, "%s.world", base);
    if (env_int("RANK", 0) == 0) {
        check(nccl.get_id(&id), "ncclGetUniqueId");
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, &id, sizeof id) != (ssize_t)sizeof id || close(fd) != 0 ||
            rename(tmp, path) != 0)
            die(path, "cannot write the id");
        return id;
    }
    for (;;) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            ssize_t n = read(fd, &id, sizeof id);
            close(fd);
            if (n == (ssize_t)sizeof id)
                return id;
        }
        usleep(10000);
    }
}

__attribute__((noinline)) static void train_step(ncclComm_t comm, float *x, float *y)
{
    check(nccl.all_reduce(x, y, 16, ncclFloat32, ncclSum, comm, NULL), "AllReduce");
}

__attribute__((noinline)) static void eval_broadcast(ncclComm_t comm, float *x, float *y)
{
    check(nccl.broadcast(x, y, 16, ncclFloat32, 0, comm, NULL), "Broadcast");
}

/* Mode async: what a watchdog thread does between steps. */
__attribute__((noinline)) static void watchdog_poll(ncclComm_t comm)
{
    ncclResult_t err = ncclSuccess;
    check(nccl.async_error(comm, &err), "ncclCommGetAsyncError");
    if (err != ncclSuccess && err != ncclInProgress) {
        printf("async error %d\n", (int)err);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: dlsym_client LIBNCCL clean|hang|dlvsym|pnccl|async|newer\n");
        return 2;
    }
    const char *mode = argv[2];
    int pnccl = strcmp(mode, "pnccl") == 0;
    const char *prefix = pnccl ? "p" : "";
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        die(argv[1], dlerror());
    if (pnccl && !dlopen(getenv("REACH_LIBCUDA") ? getenv("REACH_LIBCUDA") : "libcuda.so.1",
                         RTLD_NOW | RTLD_GLOBAL))
        die("libcuda", dlerror());
    *(void **)&nccl.get_id = lookup(h, prefix, "ncclGetUniqueId", NULL);
    *(void **)&nccl.init_rank = lookup(h, prefix, "ncclCommInitRank", NULL);
    *(void **)&nccl.all_reduce =
        lookup(h, prefix, "ncclAllReduce", strcmp(mode, "dlvsym") == 0 ? "NCCL_TEST" : NULL);
    *(void **)&nccl.broadcast = lookup(h, prefix, "ncclBroadcast", NULL);
    *(void **)&nccl.destroy = lookup(h, prefix, "ncclCommDestroy", NULL);
    int poll = strcmp(mode, "async") == 0;
    if (poll)
        *(void **)&nccl.async_error = lookup(h, prefix, "ncclCommGetAsyncError", NULL);

    int rank = env_int("RANK", 0), size = env_int("WORLD_SIZE", 1);
    ncclUniqueId id = exchange_id();
    ncclComm_t comm;
    check(nccl.init_rank(&comm, size, id, rank), "ncclCommInitRank");
    float x[16], y[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(rank + 1);
    int hang = strcmp(mode, "hang") == 0 || pnccl;
    int victim = env_int("REACH_VICTIM", 1);
    for (int step = 1; step <= 5; step++) {
        if (hang && step == 3 && rank == victim)
            eval_broadcast(comm, x, y);
        else
            train_step(comm, x, y);
        if (poll)
            watchdog_poll(comm);
    }
    if (strcmp(mode, "newer") == 0) {
        if (!ncclAllReduceConfig)
            die("ncclAllReduceConfig", "no definition (is the shim preloaded?)");
        ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
        ncclResult_t a = ncclAllReduceConfig(x, y, 16, ncclFloat32, ncclSum, comm, NULL, &c);
        ncclResult_t b = ncclAllReduceConfig(x, y, 16, ncclFloat32, ncclSum, comm, NULL, &c);
        printf("config %d %d\n", (int)a, (int)b);
    }
    check(nccl.destroy(comm), "ncclCommDestroy");
    printf("sum %.1f\n", y[0]);
    return 0;
}
