/* monitor_poll.c -- what one poll of `lockstep run`'s monitor costs on a folder of traces: the
 * rescan, each trace's header and communicator table, the communicator index, the waits, the
 * jobs, and the search for a stall, as the run loop does every 50 ms.
 *
 * Usage: monitor_poll [--adopt] DIR [POLLS]. --adopt first rewrites each trace's identity (pid,
 * host, start, boot) to this process's, so that the monitor takes every trace for a rank running
 * here (its liveness read from /proc at each poll, its waits worked out), as in a live job.
 * Prints "traces N running R polls P median_us M p90_us Q max_us X"; exits 2 on bad usage. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "monitor_stall.h"
#include "timefmt.h"

/* Makes trace t's header name this process (written in place). */
static void adopt(const struct mon_trace *t)
{
    int fd = open(t->path, O_RDWR | O_CLOEXEC);
    struct ls_header h;
    if (fd < 0 || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
        if (fd >= 0)
            close(fd);
        return;
    }
    h.pid = getpid();
    h.start_ns = timefmt_now_ns();
    h.boot_id = 0;
    h.proc_start_ticks = 0;
    h.end_kind = LS_END_RUNNING;
    memset(h.host, 0, sizeof(h.host));
    gethostname(h.host, sizeof(h.host) - 1);
    if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        fprintf(stderr, "monitor_poll: cannot rewrite %s\n", t->path);
    close(fd);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int adopting = argc > 1 && strcmp(argv[1], "--adopt") == 0;
    if (argc < 2 + adopting || argc > 3 + adopting) {
        fprintf(stderr, "usage: monitor_poll [--adopt] DIR [POLLS]\n");
        return 2;
    }
    const char *dir = argv[1 + adopting];
    int polls = argc > 2 + adopting ? atoi(argv[2 + adopting]) : 50;
    struct monitor m;
    if (polls < 1 || monitor_init(&m, dir) < 0)
        return 2;
    monitor_set_stall(&m, 300);
    monitor_poll(&m);
    for (size_t i = 0; adopting && i < m.n; i++)
        adopt(&m.t[i]);
    monitor_poll(&m); /* the first polls read every comm table new */
    uint64_t *ns = calloc((size_t)polls, sizeof(*ns));
    for (int k = 0; ns && k < polls; k++) {
        uint64_t t0 = timefmt_mono_ns();
        monitor_poll(&m);
        struct mon_stall s;
        if (monitor_find_stall(&m, 300, timefmt_mono_ns(), &s) > 0)
            mon_stall_free(&s);
        ns[k] = timefmt_mono_ns() - t0;
    }
    if (!ns)
        return 2;
    qsort(ns, (size_t)polls, sizeof(*ns), cmp_u64);
    printf("traces %zu running %zu polls %d median_us %.0f p90_us %.0f max_us %.0f\n", m.n,
           monitor_running(&m), polls, ns[polls / 2] / 1e3, ns[polls * 9 / 10] / 1e3,
           ns[polls - 1] / 1e3);
    free(ns);
    monitor_free(&m);
    return 0;
}
