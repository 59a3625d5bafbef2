/* sleepers.c -- ranks that wait outside NCCL in the ways programs wait, to check that reading
 * their live stacks does not change what they do.
 *
 * Usage: sleepers HOW   (run as N ranks by a launcher)
 * After one AllReduce, the rank SLEEPER_RANK (default the last) waits SLEEPER_MS (default 2000)
 * milliseconds in HOW: sleep, nanosleep, poll, select, epoll, cond (pthread_cond_timedwait),
 * read (a pipe a child process writes to after the time), or join (the main thread joins a
 * worker thread that sleeps in read on a pipe: the work is in another thread), or poller (runs
 * a few ms, sleeps a few ms, over and over: wait_in_poller()). It then prints
 * "slept HOW <seconds measured> <result>" on stderr and joins the others in a second AllReduce;
 * the others go straight to it. A wait that a signal or a stop cuts short shows up as a
 * shorter time or an EINTR result. SLEEPER_NODUMP=1 makes the ranks non-dumpable (ptrace then
 * needs CAP_SYS_PTRACE). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static float buf[256];
static int wait_ms;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Each waits once, as a program does that does not retry after EINTR; returns the result. */
int wait_in_sleep(void)
{
    return (int)sleep((unsigned)(wait_ms / 1000));
}

int wait_in_nanosleep(void)
{
    struct timespec ts = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L};
    return nanosleep(&ts, NULL);
}

/* A poller: it looks at something for POLLER_BURN_MS (default 6) of CPU, then sleeps
 * POLLER_SLEEP_MS (default 14), until wait_ms is over: waiting most of its time, running a third
 * of it. */
int wait_in_poller(void)
{
    int burn = tp_env_int("POLLER_BURN_MS", 6), nap = tp_env_int("POLLER_SLEEP_MS", 14);
    double end = now_s() + wait_ms / 1000.0;
    while (now_s() < end) {
        tp_compute_ms(burn);
        tp_sleep_ms(nap);
    }
    return 0;
}

int wait_in_poll(void)
{
    return poll(NULL, 0, wait_ms);
}

int wait_in_select(void)
{
    struct timeval tv = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000L};
    return select(0, NULL, NULL, NULL, &tv);
}

int wait_in_epoll(void)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev;
    int r = epoll_wait(ep, &ev, 1, wait_ms);
    close(ep);
    return r;
}

/* The deadline is on CLOCK_MONOTONIC, the clock the wait is measured with: on CLOCK_REALTIME a
 * step of the wall clock (seen here: a wait 40 ms short of 8 s, under load) would cut it short
 * whatever the stack reads do. */
int wait_in_cond(void)
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_condattr_t attr;
    pthread_cond_t c;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&c, &attr);
    pthread_condattr_destroy(&attr);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += wait_ms / 1000;
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&m);
    int r = pthread_cond_timedwait(&c, &m, &ts);
    pthread_mutex_unlock(&m);
    pthread_cond_destroy(&c);
    return r == ETIMEDOUT ? 0 : r;
}

/* Reads one byte from a pipe a child writes to after wait_ms (a download, a data loader). */
int wait_in_read(void)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a helper that ends with the rank */
        close(p[0]);
        struct timespec ts = {wait_ms / 1000, (long)(wait_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    char c;
    ssize_t r = read(p[0], &c, 1);
    close(p[0]);
    waitpid(child, NULL, 0);
    return r == 1 ? 0 : -1;
}

static void *loader(void *arg)
{
    *(int *)arg = wait_in_read();
    return NULL;
}

/* The main thread waits for a data-loader thread that waits in read. */
int wait_in_join(void)
{
    pthread_t t;
    int r = -1;
    pthread_create(&t, NULL, loader, &r);
    pthread_setname_np(t, "loader");
    pthread_join(t, NULL);
    return r;
}

static const struct {
    const char *name;
    int (*wait)(void);
} hows[] = {
    {"sleep", wait_in_sleep},   {"nanosleep", wait_in_nanosleep}, {"poll", wait_in_poll},
    {"select", wait_in_select}, {"epoll", wait_in_epoll},         {"cond", wait_in_cond},
    {"read", wait_in_read},     {"join", wait_in_join},           {"poller", wait_in_poller},
};

int main(int argc, char **argv)
{
    int (*wait)(void) = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof hows / sizeof hows[0]; i++)
        if (strcmp(argv[1], hows[i].name) == 0)
            wait = hows[i].wait;
    if (!wait) {
        fprintf(stderr,
                "usage: sleepers sleep|nanosleep|poll|select|epoll|cond|read|join|poller\n");
        return 2;
    }
    const char *r = getenv("SLEEPER_RANK"), *ms = getenv("SLEEPER_MS");
    int sleeper = r && *r ? atoi(r) : tp_world_size() - 1;
    wait_ms = ms && *ms ? atoi(ms) : 2000;
    const char *nodump = getenv("SLEEPER_NODUMP");
    if (nodump && *nodump == '1')
        prctl(PR_SET_DUMPABLE, 0); /* as hardened programs do: no ptrace without CAP_SYS_PTRACE */
    ncclComm_t w;
    tp_init_world(&w);
    TP_CHECK(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, w, NULL));
    if (tp_rank() == sleeper) {
        double t0 = now_s();
        int res = wait();
        int err = errno;
        fprintf(stderr, "slept %s %.3f %s\n", argv[1], now_s() - t0,
                res < 0 ? strerror(err) : "ok");
    }
    TP_CHECK(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, w, NULL));
    TP_CHECK(ncclCommDestroy(w));
    return 0;
}
