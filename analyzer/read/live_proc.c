/* live_proc.c -- reads /proc/PID/stat: alive, run state, CPU time, start time. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "live_proc.h"
#include "lockstep/trace_format.h"
#include "timefmt.h"

/* Boot time in CLOCK_REALTIME ns, from /proc/stat's btime (0 if unknown). */
static uint64_t boot_realtime_ns(void)
{
    static uint64_t cached;
    if (cached)
        return cached;
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    char line[256];
    unsigned long long btime = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &btime) == 1)
            break;
    fclose(f);
    cached = (uint64_t)btime * 1000000000ull;
    return cached;
}

ssize_t proc_read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        return -1;
    }
    buf[n] = 0;
    return n;
}

static uint64_t ns_per_tick(void)
{
    long hz = sysconf(_SC_CLK_TCK);
    return 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
}

int proc_stat_parse(const char *buf, struct proc_stat *out)
{
    memset(out, 0, sizeof(*out));
    out->state = '?';
    const char *open_p = strchr(buf, '('), *close_p = strrchr(buf, ')');
    if (!open_p || !close_p || close_p < open_p)
        return -1;
    snprintf(out->name, sizeof(out->name), "%.*s", (int)(close_p - open_p - 1), open_p + 1);
    char state;
    unsigned long long utime = 0, stime = 0, start = 0;
    /* Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime stime cutime cstime priority nice threads itrealvalue starttime */
    if (sscanf(close_p + 1,
               " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu",
               &state, &utime, &stime, &start) != 4)
        return -1;
    out->state = state;
    out->cpu_ns = (utime + stime) * ns_per_tick();
    out->start_ticks = start;
    return 0;
}

int proc_fd_kind(int pid, long fd, char *out, size_t len)
{
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/%d/fd/%ld", pid, fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (len)
        out[0] = 0;
    if (n <= 0)
        return -1;
    target[n] = 0;
    snprintf(out, len, "%s",
             strncmp(target, "socket:", 7) == 0        ? "socket"
             : strncmp(target, "pipe:", 5) == 0        ? "pipe"
             : strncmp(target, "/dev/nvidia", 11) == 0 ? "gpu"
             : target[0] == '/'                        ? "file"
                                                       : "");
    return 0;
}

int proc_sample(int pid, struct proc_sample *s)
{
    memset(s, 0, sizeof *s);
    s->state = '?';
    s->taken_ns = timefmt_mono_ns();
    if (pid <= 0)
        return -1;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    struct proc_stat st;
    if (proc_read_small(path, buf, sizeof buf) < 0 || proc_stat_parse(buf, &st) < 0)
        return -1;
    s->state = st.state;
    s->alive = st.state != 'Z' && st.state != 'X';
    s->cpu_ns = st.cpu_ns;
    s->start_ns = boot_realtime_ns() + st.start_ticks * ns_per_tick();
    s->start_ticks = st.start_ticks;
    return 0;
}

uint32_t proc_boot_id(void)
{
    static uint32_t cached;
    if (cached)
        return cached;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return 0;
    char buf[64] = "";
    if (!fgets(buf, sizeof buf, f))
        buf[0] = 0;
    fclose(f);
    cached = buf[0] ? ls_boot_id_hash(buf) : 0;
    return cached;
}

double proc_cpu_share(const struct proc_sample *before, const struct proc_sample *after)
{
    if (after->taken_ns <= before->taken_ns || after->cpu_ns < before->cpu_ns)
        return 0;
    return (double)(after->cpu_ns - before->cpu_ns) / (double)(after->taken_ns - before->taken_ns);
}

const char *proc_activity(const struct proc_sample *before, const struct proc_sample *after)
{
    if (!after->alive)
        return after->state == 'Z' ? "zombie" : "gone";
    if (after->state == 'T' || after->state == 't')
        return "stopped";
    /* Runnable at both looks: busy, even when a crowded machine gave it little CPU between. */
    int runnable = before->state == 'R' && after->state == 'R';
    return runnable || proc_cpu_share(before, after) >= 0.3 ? "busy" : "sleeping";
}
