/* bounds.c -- a training loop whose one rank stops calling NCCL for a while: asleep, busy on
 * the CPU, busy and then asleep, or one that ignores an interrupt; what the two stall bounds of
 * `lockstep run` and `watch` (docs/live.md, "Two bounds") must tell apart.
 *
 * Usage: bounds MODE   (run as N ranks by a launcher)
 * Before NCCL starts, rank r computes BOUNDS_START_MS * (r + 1) / N ms (default 0): a start-up
 * (imports, building the model) that ends later on each rank, while those done first wait in
 * the communicator's creation for the rest.
 * Every rank makes BOUNDS_STEPS (default 30) AllReduces, BOUNDS_STEP_MS (default 100) apart.
 * Before step BOUNDS_AT (default 10) rank BOUNDS_CULPRIT (default the last) does, by MODE:
 *   asleep       sleeps for good in load_batch() (a timed sleep: the others wait for a rank that
 *                makes no progress at all; a hang)
 *   locked       waits for good on a lock it holds, in load_batch() (no CPU, no sleep; a hang)
 *   busy         computes for BOUNDS_WORK_MS (default 8000) in save_checkpoint(), then goes on
 *                (slow, not a hang)
 *   busy_asleep  computes for BOUNDS_WORK_MS in save_checkpoint(), then sleeps for good in
 *                load_batch() (slow, then a hang from that moment)
 *   busy_forever computes for good in save_checkpoint() (a hang only the long bound ends)
 *   loader       sleeps BOUNDS_WORK_MS in load_batch() before every BOUNDS_EVERY-th step (default
 *                10), from step BOUNDS_AT on: a data loader that stalls now and then (not a hang)
 *   save_io      writes BOUNDS_WORK_MS worth of 1 MiB blocks to BOUNDS_FILE in write_shard(),
 *                synced every 16 MiB, then goes on (I/O with little CPU; not a hang)
 *   exits        exits with status 1 (the others wait for a rank whose process ended: a hang
 *                no waiting ends)
 *   ignore_int   every rank ignores SIGINT, as the ranks a shell script starts with '&' do, and
 *                trains on for BOUNDS_STEPS steps (default here: for good) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static float buf[256];

/* Says when the culprit stops for good, for scripts/bench --detect-only: "bounds: rank 3 hangs at
 * <CLOCK_REALTIME ns>". */
static void say_hang(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(stderr, "bounds: rank %d hangs at %lld\n", tp_rank(),
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

static void __attribute__((noinline)) load_batch(int lock)
{
    say_hang();
    if (lock) {
        static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&m);
        pthread_mutex_lock(&m); /* a default mutex: the second lock never returns */
    }
    for (;;)
        sleep(3600);
}

static void __attribute__((noinline)) save_checkpoint(int ms)
{
    if (ms < 0) {
        say_hang();
        for (;;)
            tp_compute_ms(1000);
    }
    tp_compute_ms(ms);
}

static void __attribute__((noinline)) write_shard(int ms)
{
    const char *path = tp_env_str("BOUNDS_FILE", "/tmp/lockstep-bounds.shard");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        tp_die("write_shard: cannot open %s", path);
    static char block[1 << 20];
    uint64_t end = tp_mono_ms() + (uint64_t)ms;
    for (int n = 1; tp_mono_ms() < end; n++) {
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block)
            tp_die("write_shard: write to %s failed", path);
        if (n % 16 == 0) {
            fsync(fd);
            if (lseek(fd, 0, SEEK_SET) < 0) /* rewrite the same 16 MiB: no disk fills */
                tp_die("write_shard: lseek");
        }
    }
    close(fd);
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    static const char *const modes[] = {"asleep",       "locked",     "busy",   "busy_asleep",
                                        "busy_forever", "ignore_int", "loader", "save_io",
                                        "exits",        NULL};
    int known = 0;
    for (int i = 0; modes[i]; i++)
        known |= strcmp(mode, modes[i]) == 0;
    if (!known)
        tp_die("usage: bounds MODE; modes: asleep locked busy busy_asleep busy_forever "
               "ignore_int loader save_io exits");
    int ignore_int = strcmp(mode, "ignore_int") == 0;
    if (ignore_int)
        signal(SIGINT, SIG_IGN);
    int start_ms = tp_env_int("BOUNDS_START_MS", 0);
    if (start_ms > 0)
        tp_compute_ms((int)((long long)start_ms * (tp_rank() + 1) / tp_world_size()));
    ncclComm_t world;
    tp_init_world(&world);
    int rank = tp_rank(), n = tp_world_size();
    int culprit = tp_env_int("BOUNDS_CULPRIT", n - 1);
    int steps = tp_env_int("BOUNDS_STEPS", ignore_int ? 1 << 30 : 30);
    int at = tp_env_int("BOUNDS_AT", 10), step_ms = tp_env_int("BOUNDS_STEP_MS", 100);
    int work_ms = tp_env_int("BOUNDS_WORK_MS", 8000), every = tp_env_int("BOUNDS_EVERY", 10);
    for (int s = 0; s < steps; s++) {
        if (strcmp(mode, "loader") == 0 && rank == culprit && s >= at && every > 0 &&
            (s - at) % every == 0)
            tp_sleep_ms(work_ms);
        if (s == at && rank == culprit) {
            if (strcmp(mode, "asleep") == 0 || strcmp(mode, "locked") == 0)
                load_batch(strcmp(mode, "locked") == 0);
            else if (strcmp(mode, "busy") == 0)
                save_checkpoint(work_ms);
            else if (strcmp(mode, "busy_asleep") == 0) {
                save_checkpoint(work_ms);
                load_batch(0);
            } else if (strcmp(mode, "busy_forever") == 0)
                save_checkpoint(-1);
            else if (strcmp(mode, "save_io") == 0)
                write_shard(work_ms);
            else if (strcmp(mode, "exits") == 0) {
                say_hang();
                fflush(stderr);
                _exit(1);
            }
        }
        TP_CHECK(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, world, NULL));
        tp_sync();
        tp_sleep_ms(step_ms);
    }
    ncclCommDestroy(world);
    return 0;
}
