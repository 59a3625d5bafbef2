/* monitor_activity.c -- a rank's activity outside NCCL from /proc: CPU time of its threads
 * (schedstat, nanoseconds), its I/O (rchar + wchar), disk waits and timed sleeps. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "live_proc.h"
#include "monitor_activity.h"
#include "timefmt.h"

/* Processes looked at per rank (itself and its children, breadth first). */
#define MAX_PROCS 32
/* Threads per process whose system call is read to tell a timed sleep (the rest are counted). */
#define MAX_SLEEP_CHECKS 16

int mon_background_thread(const char *name)
{
    static const char *const prefixes[] = {
        "lockstep-",      /* the shim's heartbeat and blind watch */
        "NCCL ",          /* NCCL's proxy, service and RAS threads (NCCL_SET_THREAD_NAME=1) */
        "pt_nccl_",       /* PyTorch's NCCL watchdog, heartbeat monitor, GIL checker */
        "pt_tcpstore",    /* PyTorch's TCPStore client and server loops */
        "cuda-EvtHandlr", /* the CUDA runtime's event handler */
        "cuda0",          /* the CUDA driver's own threads ("cuda00001800007") */
        NULL};
    for (int i = 0; prefixes[i]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* How a sleeping thread waits, when that is not a wait for someone: 1, for a set time
 * (nanosleep, clock_nanosleep, or select / poll with no descriptor: how Python before 3.11
 * sleeps); 2, for its GPU (an ioctl on an NVIDIA device: CUDA's blocking synchronization);
 * 0 otherwise. From its system call where /proc shows it, else from where the kernel has it
 * wait (timed sleeps only). */
static int pause_kind(int pid, unsigned tid)
{
    /* Sleeps for a set time: the call, and which argument must be 0 (no descriptor), -1 none. */
    static const struct {
        long nr;
        int zero_arg;
    } sleeps[] = {
#ifdef SYS_nanosleep
        {SYS_nanosleep, -1},
#endif
#ifdef SYS_clock_nanosleep
        {SYS_clock_nanosleep, -1},
#endif
#ifdef SYS_select
        {SYS_select, 0},
#endif
#ifdef SYS_pselect6
        {SYS_pselect6, 0},
#endif
#ifdef SYS_poll
        {SYS_poll, 1},
#endif
#ifdef SYS_ppoll
        {SYS_ppoll, 1},
#endif
    };
    char path[96], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%u/syscall", pid, tid);
    long nr;
    unsigned long arg[2] = {1, 1};
    if (proc_read_small(path, buf, sizeof buf) > 0 &&
        sscanf(buf, "%ld %lx %lx", &nr, &arg[0], &arg[1]) >= 1) {
        for (size_t i = 0; i < sizeof sleeps / sizeof sleeps[0]; i++)
            if (sleeps[i].nr == nr)
                return sleeps[i].zero_arg < 0 || arg[sleeps[i].zero_arg] == 0;
        char kind[8];
        return nr == SYS_ioctl && proc_fd_kind(pid, (long)arg[0], kind, sizeof kind) == 0 &&
                       strcmp(kind, "gpu") == 0
                   ? 2
                   : 0;
    }
    snprintf(path, sizeof path, "/proc/%d/task/%u/wchan", pid, tid);
    return proc_read_small(path, buf, sizeof buf) > 0 && strstr(buf, "nanosleep") != NULL;
}

/* Adds one thread of `pid` to `a`; its children's pids go to `kids`. */
static void add_thread(int pid, unsigned tid, struct mon_activity *a, int *sleep_checks, int *kids,
                       int *nkids)
{
    char path[96], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task/%u/stat", pid, tid);
    struct proc_stat st;
    if (proc_read_small(path, buf, sizeof buf) <= 0 || proc_stat_parse(buf, &st) < 0)
        return;
    /* Its children, whatever the thread: a data loader's workers are the rank's work too. */
    snprintf(path, sizeof path, "/proc/%d/task/%u/children", pid, tid);
    char kb[512];
    if (proc_read_small(path, kb, sizeof kb) > 0)
        for (char *s = kb, *end; *nkids < MAX_PROCS; s = end) {
            long k = strtol(s, &end, 10);
            if (end == s)
                break;
            kids[(*nkids)++] = (int)k;
        }
    if (mon_background_thread(st.name))
        return;
    a->threads++;
    snprintf(path, sizeof path, "/proc/%d/task/%u/schedstat", pid, tid);
    unsigned long long ns, waited, runs;
    int got = proc_read_small(path, buf, sizeof buf) > 0
                  ? sscanf(buf, "%llu %llu %llu", &ns, &waited, &runs)
                  : 0;
    if (got >= 1)
        a->cpu_ns += ns;
    else
        a->cpu_ns += st.cpu_ns; /* no schedstat: clock ticks */
    if (got == 3)
        a->wakeups += runs;
    if (st.state == 'D')
        a->disk_wait = 1;
    else if (st.state == 'S' && !a->timed_sleep && !a->gpu_wait &&
             (*sleep_checks)++ < MAX_SLEEP_CHECKS) {
        int k = pause_kind(pid, tid);
        a->timed_sleep = k == 1;
        a->gpu_wait = k == 2;
    }
}

/* Adds process `pid` (its threads and I/O) to `a`; returns -1 when it cannot be read. */
static int add_process(int pid, struct mon_activity *a, int *kids, int *nkids)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int sleep_checks = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            add_thread(pid, (unsigned)strtoul(e->d_name, NULL, 10), a, &sleep_checks, kids, nkids);
    closedir(d);
    snprintf(path, sizeof path, "/proc/%d/io", pid);
    if (proc_read_small(path, buf, sizeof buf) > 0) {
        unsigned long long rchar = 0, wchar = 0;
        char *r = strstr(buf, "rchar:"), *w = strstr(buf, "wchar:");
        if (r)
            sscanf(r, "rchar: %llu", &rchar);
        if (w)
            sscanf(w, "wchar: %llu", &wchar);
        a->io_bytes += rchar + wchar;
    }
    return 0;
}

int mon_activity_sample(int pid, const struct mon_activity *prev, struct mon_activity *now,
                        char *why, size_t len)
{
    memset(now, 0, sizeof(*now));
    now->taken_ns = timefmt_mono_ns();
    if (why && len)
        why[0] = 0;
    int procs[MAX_PROCS], nprocs = 1;
    procs[0] = pid;
    for (int i = 0; i < nprocs; i++)
        if (add_process(procs[i], now, procs, &nprocs) < 0 && i == 0)
            return -1;
    if (!prev || !prev->taken_ns || now->taken_ns <= prev->taken_ns)
        return MON_ACTIVE_BUSY;
    double dt = (double)(now->taken_ns - prev->taken_ns) / 1e9;
    /* Counters of children that ended (or a thread that left) go down: no activity from them. */
    double cpu = now->cpu_ns > prev->cpu_ns ? (double)(now->cpu_ns - prev->cpu_ns) / 1e9 / dt : 0;
    double io = now->io_bytes > prev->io_bytes ? (double)(now->io_bytes - prev->io_bytes) / dt : 0;
    if (cpu >= MON_ACTIVITY_CPU_SHARE) {
        if (why)
            snprintf(why, len, "%.0f%% of a CPU", cpu * 100);
        return MON_ACTIVE_BUSY;
    }
    if (io >= MON_ACTIVITY_IO_PER_S) {
        if (why)
            snprintf(why, len, "%.1f MB/s of I/O", io / 1e6);
        return MON_ACTIVE_BUSY;
    }
    /* A timed sleep that keeps waking up to sleep again polls: a wait, not a pause. */
    int pause =
        now->timed_sleep && now->wakeups - prev->wakeups <= (uint64_t)MON_ACTIVITY_PAUSE_WAKEUPS;
    if (now->disk_wait || pause || now->gpu_wait) {
        if (why)
            snprintf(why, len, "%s",
                     now->disk_wait ? "a disk wait"
                     : pause        ? "a timed sleep"
                                    : "a wait for its GPU");
        return now->disk_wait || now->gpu_wait ? MON_ACTIVE_BUSY : MON_ACTIVE_PAUSE;
    }
    return 0;
}
