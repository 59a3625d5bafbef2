/* outside.c -- jobs that hang, or only seem to, with no rank inside NCCL: what `lockstep run`
 * and `watch` must notice from the ranks' activity and explain from their stacks.
 *
 * Usage: outside MODE   (run as N ranks by a launcher; OUTSIDE_SOCK names a Unix socket path)
 * Every rank makes OUTSIDE_STEPS (default 3) AllReduces on the world communicator, then meets
 * the others in a barrier that is not NCCL's (a socket: rank 0 accepts a connection from each
 * other rank, reads its rank and answers one byte; the others wait in read()), then makes
 * OUTSIDE_TAIL_STEPS (default 0) more AllReduces 50 ms apart, one last AllReduce and exits. Before
 * the barrier rank 0 runs prepare_data(): lock        it takes a lock it already holds: it never
 * comes back (the job hangs: ranks 1.. in a socket read, rank 0 on a lock) compute     it computes
 * for OUTSIDE_WORK_MS (default 3000), then joins (not a hang) checkpoint  every rank writes a
 * checkpoint of OUTSIDE_WORK_MS worth of 1 MiB blocks to OUTSIDE_CKPT (a file per rank), synced
 * every 16 MiB, then joins (not a hang) wedge       it waits for OUTSIDE_WORK_MS on a lock it holds
 * (pthread_mutex_timedlock), then gives up and joins: the job stalls outside NCCL and resumes (for
 * watch --keep) download    it reads a data set from the Unix socket OUTSIDE_FEED until its end
 * (the test feeds it slowly: I/O with next to no CPU), then joins (not a hang) exited      rank
 * OUTSIDE_VICTIM (default 2) exits with status 1 instead of joining the barrier: rank 0 waits in
 * accept() for it, the others in their read */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static float buf[256];
static ncclComm_t world;

static void all_reduce(void)
{
    TP_CHECK(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, world, NULL));
}

static struct sockaddr_un sock_addr(void)
{
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tp_env_str("OUTSIDE_SOCK", "/tmp/outside.sock"));
    return a;
}

/* Rank 0's side of the barrier: listening before NCCL starts, so the others find it. */
static int listen_fd = -1;

static void barrier_listen(void)
{
    struct sockaddr_un a = sock_addr();
    unlink(a.sun_path);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(listen_fd, 64) != 0)
        tp_die("barrier socket %s: %s", a.sun_path, strerror(errno));
}

/* Rank 0: every other rank checks in, then each is let go. */
void barrier_serve(int world_size)
{
    int fds[256], n = 0;
    while (n < world_size - 1 && n < 256) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        int r;
        if (read(fd, &r, sizeof r) != (ssize_t)sizeof r)
            tp_die("barrier: a rank checked in without its rank");
        fds[n++] = fd;
    }
    for (int i = 0; i < n; i++) {
        char go = 1;
        if (write(fds[i], &go, 1) != 1)
            tp_die("barrier: cannot release a rank");
        close(fds[i]);
    }
}

/* The other ranks: check in, wait for the byte that lets them go. */
void barrier_wait(int rank)
{
    struct sockaddr_un a = sock_addr();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    while (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        tp_sleep_ms(20);
    char go;
    if (fd < 0 || write(fd, &rank, sizeof rank) != (ssize_t)sizeof rank || read(fd, &go, 1) != 1)
        tp_die("barrier: %s", strerror(errno));
    close(fd);
}

static pthread_mutex_t data_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_shard(void)
{
    pthread_mutex_lock(&data_lock); /* held already: a lock taken twice */
    pthread_mutex_unlock(&data_lock);
}

/* Rank 0's work before the barrier. */
void prepare_data(const char *mode)
{
    if (strcmp(mode, "lock") == 0) {
        pthread_mutex_lock(&data_lock);
        load_shard();
    } else if (strcmp(mode, "wedge") == 0) {
        pthread_mutex_lock(&data_lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        long ms = tp_env_int("OUTSIDE_WORK_MS", 3000);
        until.tv_sec += ms / 1000;
        until.tv_nsec += (ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_timedlock(&data_lock, &until); /* held already: it times out */
        pthread_mutex_unlock(&data_lock);
    } else if (strcmp(mode, "download") == 0) {
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        snprintf(a.sun_path, sizeof a.sun_path, "%s", tp_env_str("OUTSIDE_FEED", ""));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
            tp_die("download from %s: %s", a.sun_path, strerror(errno));
        static char chunk[65536];
        ssize_t n;
        while ((n = read(fd, chunk, sizeof chunk)) > 0)
            ;
        close(fd);
    } else if (strcmp(mode, "compute") == 0) {
        uint64_t until = tp_mono_ms() + (uint64_t)tp_env_int("OUTSIDE_WORK_MS", 3000);
        volatile double x = 1;
        while (tp_mono_ms() < until)
            for (int i = 0; i < 100000; i++)
                x = x * 1.0000001 + 1e-9;
    }
}

/* Every rank's checkpoint: 1 MiB blocks for OUTSIDE_WORK_MS, synced every 16 MiB. */
void write_checkpoint(int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", tp_env_str("OUTSIDE_CKPT", "/tmp/outside.ckpt"), rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        tp_die("checkpoint %s: %s", path, strerror(errno));
    static char block[1 << 20];
    memset(block, rank + 1, sizeof block);
    uint64_t until = tp_mono_ms() + (uint64_t)tp_env_int("OUTSIDE_WORK_MS", 3000);
    for (int n = 1; tp_mono_ms() < until; n++) {
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block)
            tp_die("checkpoint %s: %s", path, strerror(errno));
        if (n % 16 == 0) {
            fsync(fd);
            if (lseek(fd, 0, SEEK_SET) < 0) /* keep the file at 16 MiB */
                tp_die("checkpoint %s: %s", path, strerror(errno));
        }
    }
    close(fd);
    unlink(path);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        tp_die("usage: outside lock|compute|checkpoint|exited");
    const char *mode = argv[1];
    int rank = tp_rank(), n = tp_world_size();
    if (rank == 0)
        barrier_listen();
    tp_init_world(&world);
    for (int i = 0; i < tp_env_int("OUTSIDE_STEPS", 3); i++)
        all_reduce();
    if (strcmp(mode, "checkpoint") == 0)
        write_checkpoint(rank);
    if (strcmp(mode, "exited") == 0 && rank == tp_env_int("OUTSIDE_VICTIM", 2)) {
        fprintf(stderr, "outside: rank %d exits before the barrier\n", rank);
        exit(1);
    }
    if (rank == 0) {
        prepare_data(mode);
        barrier_serve(n);
    } else {
        barrier_wait(rank);
    }
    for (int i = 0; i < tp_env_int("OUTSIDE_TAIL_STEPS", 0); i++) {
        all_reduce();
        tp_sleep_ms(50);
    }
    all_reduce();
    TP_CHECK(ncclCommDestroy(world));
    if (rank == 0)
        unlink(sock_addr().sun_path);
    return 0;
}
