/* liveness.c -- is the process of a trace alive: host, boot, pid and start time, /proc state. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live_proc.h"
#include "liveness.h"

#define NS 1000000000ull

/* This host's name, read once per run (a job of 100,000 traces asks for every one). */
static char this_host[LS_HOST_LEN + 1];
static int this_host_ok;
static pthread_once_t this_host_once = PTHREAD_ONCE_INIT;

static void read_this_host(void)
{
    this_host_ok = gethostname(this_host, sizeof(this_host) - 1) == 0;
}

int liveness_file_host_here(const char *host)
{
    pthread_once(&this_host_once, read_this_host);
    if (!this_host_ok)
        return 0;
    size_t i = 0;
    for (; this_host[i] && i < LS_HOST_LEN; i++) {
        char ch = this_host[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '-' || ch == '_' || ch == '.';
        if (host[i] != (ok ? ch : '_'))
            return 0;
    }
    return host[i] == 0;
}

static int same_host(const struct ls_header *h)
{
    pthread_once(&this_host_once, read_this_host);
    return this_host_ok && strncmp(this_host, h->host, LS_HOST_LEN) == 0;
}

/* What the state of a sample of the right process says. */
static enum liveness verdict(const struct proc_sample *s, const char **why)
{
    if (s->state == 'Z' || s->state == 'X') {
        *why = "a zombie its parent has not reaped";
        return LIVENESS_DEAD;
    }
    if (s->state == 'T' || s->state == 't') {
        *why = "stopped";
        return LIVENESS_STOPPED;
    }
    return LIVENESS_RUNNING;
}

enum liveness liveness_local(const struct ls_header *h, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = "";
    if (!same_host(h)) {
        *why = "it ran on another host";
        return LIVENESS_UNKNOWN;
    }
    uint32_t boot = proc_boot_id();
    if (h->boot_id && boot && h->boot_id != boot) {
        *why = "the host has rebooted since";
        return LIVENESS_DEAD;
    }
    struct proc_sample s;
    if (h->pid <= 0 || proc_sample(h->pid, &s) != 0) {
        *why = "no such process";
        return LIVENESS_DEAD;
    }
    /* The same process, or a later one that got the pid: the start decides. */
    if (h->proc_start_ticks ? s.start_ticks != h->proc_start_ticks
                            : (s.start_ns != 0 && s.start_ns > h->start_ns + 2 * NS)) {
        *why = "its pid belongs to another process now";
        return LIVENESS_DEAD;
    }
    return verdict(&s, why);
}

enum liveness liveness_of_pid(int pid, uint64_t start_ticks)
{
    struct proc_sample s;
    if (pid <= 0 || proc_sample(pid, &s) != 0 || s.start_ticks != start_ticks)
        return LIVENESS_DEAD;
    const char *why;
    return verdict(&s, &why);
}

int liveness_alive(enum liveness v)
{
    return v == LIVENESS_RUNNING || v == LIVENESS_STOPPED;
}

enum liveness liveness_from_activity(const char *activity)
{
    if (!activity)
        return LIVENESS_UNKNOWN;
    if (strcmp(activity, "busy") == 0 || strcmp(activity, "sleeping") == 0)
        return LIVENESS_RUNNING;
    if (strcmp(activity, "stopped") == 0)
        return LIVENESS_STOPPED;
    if (strcmp(activity, "zombie") == 0 || strcmp(activity, "gone") == 0)
        return LIVENESS_DEAD;
    return LIVENESS_UNKNOWN;
}

int liveness_in_snapshot(const char *trace_path)
{
    const char *slash = strrchr(trace_path, '/');
    char mark[4096];
    if (slash)
        snprintf(mark, sizeof(mark), "%.*s/%s", (int)(slash - trace_path), trace_path,
                 LIVENESS_SNAPSHOT_MARK);
    else
        snprintf(mark, sizeof(mark), "%s", LIVENESS_SNAPSHOT_MARK);
    struct stat st;
    return stat(mark, &st) == 0 && S_ISREG(st.st_mode);
}
