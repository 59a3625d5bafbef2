/* proctree.h -- the process tree of this host from /proc: parents, process groups, start times,
 * the descendants of a process, and becoming the reaper of a job's orphans. */
#ifndef LOCKSTEP_PROCTREE_H
#define LOCKSTEP_PROCTREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_node {
    pid_t pid, ppid, pgid, sid;
    uint64_t start_ticks; /* field 22 of /proc/PID/stat: with the pid it names the process */
    char state;           /* R, S, D, T, t, Z, ... */
    char comm[32];        /* the command name the kernel keeps (at most 15 characters) */
};

struct proc_table {
    struct proc_node *v; /* by pid, ascending */
    size_t n, cap;
};

/* Reads /proc/PID/stat of one process into `out`. Returns 0, -1 when there is no such process
 * (or its stat cannot be read). */
int proctree_read(pid_t pid, struct proc_node *out);

/* Reads every process of this host into `t` (emptied first; zero it before the first call).
 * Returns 0, -1 when /proc cannot be read or memory ran out (then `t` is empty). */
int proctree_scan(struct proc_table *t);

/* The entry of `pid` in `t`, NULL when it has none. */
const struct proc_node *proctree_find(const struct proc_table *t, pid_t pid);

/* Sets marks[i] for every process of `t` below `root` (its children, their children, ...),
 * `root` itself excluded; `marks` has t->n entries and keeps the marks it already had.
 * Returns how many were newly marked. */
size_t proctree_mark_descendants(const struct proc_table *t, pid_t root, unsigned char *marks);

/* Notes the children this process has now, before it starts anything: processes it did not
 * start (a calling shell's process substitution or coprocess, forked before the shell exec'd
 * this program, is a child of it). They and what they start are never counted as this
 * process's own (proctree_mark_own()). Returns how many; -1 when /proc cannot be read. */
int proctree_note_inherited(void);

/* Sets marks[i] for every process of `t` below this one that is its own: started by it, or by
 * what it started (orphans re-parented here included), but not the children it inherited
 * (proctree_note_inherited()) nor their descendants. Returns how many were newly marked. */
size_t proctree_mark_own(const struct proc_table *t, unsigned char *marks);

/* True when process `p` (this process's child) is one it inherited. */
int proctree_is_inherited(const struct proc_node *p);

/* Makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER): a
 * process whose parent ends is re-parented here instead of to init, so that the job's
 * double-forked or setsid'ed processes stay below us and can be found and waited for.
 * Returns 0, -1 where the kernel refuses. */
int proctree_become_subreaper(void);

/* Frees the table. */
void proctree_free(struct proc_table *t);

#endif
