/* proctree.c -- reads the process tree from /proc/PID/stat; finds descendants; subreaper. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "proctree.h"

int proctree_read(pid_t pid, struct proc_node *out)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    /* "PID (COMM) STATE PPID PGRP SESSION ...": the name may hold spaces and parentheses. */
    char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
    if (!open_paren || !close_paren || close_paren < open_paren)
        return -1;
    memset(out, 0, sizeof(*out));
    size_t len = (size_t)(close_paren - open_paren - 1);
    if (len >= sizeof(out->comm))
        len = sizeof(out->comm) - 1;
    memcpy(out->comm, open_paren + 1, len);
    int ppid, pgid, sid;
    unsigned long long start;
    /* Fields 3..22: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime cutime cstime priority nice threads itrealvalue starttime */
    if (sscanf(close_paren + 1,
               " %c %d %d %d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
               &out->state, &ppid, &pgid, &sid, &start) != 5)
        return -1;
    out->pid = pid;
    out->ppid = ppid;
    out->pgid = pgid;
    out->sid = sid;
    out->start_ticks = start;
    return 0;
}

static int by_pid(const void *a, const void *b)
{
    pid_t x = ((const struct proc_node *)a)->pid, y = ((const struct proc_node *)b)->pid;
    return (x > y) - (x < y);
}

int proctree_scan(struct proc_table *t)
{
    t->n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 512;
            struct proc_node *v = realloc(t->v, cap * sizeof(*v));
            if (!v) {
                closedir(d);
                t->n = 0;
                return -1;
            }
            t->v = v;
            t->cap = cap;
        }
        if (proctree_read((pid_t)pid, &t->v[t->n]) == 0)
            t->n++;
    }
    closedir(d);
    qsort(t->v, t->n, sizeof(*t->v), by_pid);
    return 0;
}

const struct proc_node *proctree_find(const struct proc_table *t, pid_t pid)
{
    struct proc_node key = {.pid = pid};
    return t->n ? bsearch(&key, t->v, t->n, sizeof(*t->v), by_pid) : NULL;
}

size_t proctree_mark_descendants(const struct proc_table *t, pid_t root, unsigned char *marks)
{
    /* Pass after pass, mark the children of `root` and of what is marked below it, until a pass
     * marks nothing: as many passes as the tree is deep. `below` keeps apart what this call
     * found from marks the caller had set for other roots. */
    unsigned char *below = calloc(t->n ? t->n : 1, 1);
    if (!below)
        return 0;
    size_t added = 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < t->n; i++) {
            if (below[i] || t->v[i].pid == root)
                continue;
            const struct proc_node *parent = proctree_find(t, t->v[i].ppid);
            if (t->v[i].ppid == root || (parent && below[parent - t->v])) {
                below[i] = 1;
                changed = 1;
                added += !marks[i];
                marks[i] = 1;
            }
        }
    }
    free(below);
    return added;
}

/* The children this process had before it started anything (pid and start time name each). */
static struct proc_node *inherited;
static size_t ninherited;

int proctree_note_inherited(void)
{
    struct proc_table t = {0};
    if (proctree_scan(&t) < 0)
        return -1;
    free(inherited);
    inherited = NULL;
    ninherited = 0;
    pid_t self = getpid();
    for (size_t i = 0; i < t.n; i++)
        if (t.v[i].ppid == self) {
            struct proc_node *v = realloc(inherited, (ninherited + 1) * sizeof(*v));
            if (!v)
                break;
            inherited = v;
            inherited[ninherited++] = t.v[i];
        }
    proctree_free(&t);
    return (int)ninherited;
}

int proctree_is_inherited(const struct proc_node *p)
{
    for (size_t i = 0; i < ninherited; i++)
        if (inherited[i].pid == p->pid && inherited[i].start_ticks == p->start_ticks)
            return 1;
    return 0;
}

size_t proctree_mark_own(const struct proc_table *t, unsigned char *marks)
{
    size_t n = t->n ? t->n : 1;
    unsigned char *below = calloc(n, 1), *foreign = calloc(n, 1);
    size_t added = 0;
    if (below && foreign) {
        proctree_mark_descendants(t, getpid(), below);
        for (size_t i = 0; i < ninherited; i++) {
            const struct proc_node *p = proctree_find(t, inherited[i].pid);
            if (p && proctree_is_inherited(p)) {
                foreign[p - t->v] = 1;
                proctree_mark_descendants(t, p->pid, foreign);
            }
        }
        for (size_t i = 0; i < t->n; i++)
            if (below[i] && !foreign[i]) {
                added += !marks[i];
                marks[i] = 1;
            }
    }
    free(below);
    free(foreign);
    return added;
}

int proctree_become_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : -1;
}

void proctree_free(struct proc_table *t)
{
    free(t->v);
    memset(t, 0, sizeof(*t));
}
