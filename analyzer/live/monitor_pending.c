/* monitor_pending.c -- rank processes that have no trace yet (monitor_pending.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "liveness.h"
#include "lockstep/room.h"
#include "monitor_pending.h"

#define PENDING_TAIL ".trace" LS_PENDING_SUFFIX

int mon_pending_name(const char *name)
{
    size_t n = strlen(name), k = strlen(PENDING_TAIL);
    return strncmp(name, "lockstep-", 9) == 0 && n > k + 9 &&
           strcmp(name + n - k, PENDING_TAIL) == 0;
}

/* Reads mark `pd` (its file in `dir`): its fields once, its exit status while it has none.
 * Returns 0, -1 when it cannot be read or parsed (a mark being written: read again later). */
static int read_mark(struct mon_pending *pd, const char *dir, int first)
{
    char path[4096], text[512];
    snprintf(path, sizeof path, "%s/%s", dir, pd->name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *nl = strchr(text, '\n');
    if (!nl)
        return -1; /* not written whole yet */
    *nl = 0;
    if (first) {
        int pid, rank, world, used = 0;
        unsigned long long start;
        unsigned attempt;
        if (sscanf(text, "pid=%d start=%llu rank=%d world=%d attempt=%u job=%n", &pid, &start,
                   &rank, &world, &attempt, &used) != 5 ||
            used == 0 || pid <= 0 || rank < 0)
            return -1;
        pd->pid = pid;
        pd->start_ticks = start;
        pd->rank = rank;
        pd->world = world;
        pd->attempt = attempt;
        snprintf(pd->job, sizeof pd->job, "%s", text + used);
    }
    int status;
    if (sscanf(nl + 1, "exited=%d", &status) == 1 && status != 0)
        pd->exited = status;
    return 0;
}

void mon_pending_scan_begin(struct mon_pendings *p)
{
    for (size_t i = 0; i < p->n; i++)
        p->v[i].present = 0;
}

int mon_pending_seen(struct mon_pendings *p, const char *dir, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->v[i].name, name) == 0) {
            struct mon_pending *pd = &p->v[i];
            if (pd->pid > 0) {
                pd->present = 1;
                if (pd->gone && !pd->exited) /* the status is written before the end */
                    read_mark(pd, dir, 0);
            } else if (read_mark(pd, dir, 1) == 0) {
                pd->present = 1;
            }
            return 0;
        }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        struct mon_pending *v = realloc(p->v, cap * sizeof(*v));
        if (!v)
            return -1;
        p->v = v;
        p->cap = cap;
    }
    struct mon_pending *pd = &p->v[p->n];
    memset(pd, 0, sizeof(*pd));
    pd->name = strdup(name);
    if (!pd->name)
        return -1;
    p->n++;
    /* "lockstep-HOST-PID-rR.trace.pending": made here when HOST is this host's name. */
    char host[LS_HOST_LEN + 1];
    const char *r = strrchr(name, '-'), *end = name + 9;
    for (const char *q = name + 9; q < r; q++)
        if (*q == '-')
            end = q; /* the '-' before PID */
    snprintf(host, sizeof host, "%.*s", (int)(end - (name + 9)), name + 9);
    pd->here = end > name + 9 && liveness_file_host_here(host);
    if (read_mark(pd, dir, 1) == 0)
        pd->present = 1;
    else
        pd->pid = 0; /* read again at the next scan */
    return 0;
}

void mon_pending_sample(struct mon_pendings *p, uint64_t now)
{
    for (size_t i = 0; i < p->n; i++) {
        struct mon_pending *pd = &p->v[i];
        if (!pd->present || !pd->here || pd->gone || pd->pid <= 0)
            continue;
        if (!liveness_alive(liveness_of_pid(pd->pid, pd->start_ticks))) {
            pd->gone = 1;
            continue;
        }
        struct mon_activity a;
        char why[sizeof pd->busy_why];
        int r = mon_activity_sample(pd->pid, &pd->act, &a, why, sizeof why);
        if (r < 0)
            continue;
        if (r == MON_ACTIVE_BUSY && pd->act.taken_ns) { /* a first sample compares nothing */
            pd->last_busy_ns = now;
            memcpy(pd->busy_why, why, sizeof why);
        }
        pd->act = a;
    }
}

void mon_pendings_free(struct mon_pendings *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].name);
    free(p->v);
    memset(p, 0, sizeof(*p));
}
