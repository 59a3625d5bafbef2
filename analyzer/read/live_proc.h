/* live_proc.h -- what /proc says about a local process: alive, run state, CPU time. */
#ifndef LOCKSTEP_LIVE_PROC_H
#define LOCKSTEP_LIVE_PROC_H

#include <stdint.h>
#include <sys/types.h>

struct proc_sample {
    int alive;            /* 1 if /proc/PID exists and is not a zombie */
    char state;           /* R, S, D, T, Z, ... ('?' when gone) */
    uint64_t cpu_ns;      /* user + system time of the whole process */
    uint64_t start_ns;    /* process start, CLOCK_REALTIME ns (to notice pid reuse) */
    uint64_t start_ticks; /* process start, clock ticks after boot (field 22, exact) */
    uint64_t taken_ns;    /* CLOCK_MONOTONIC ns when the sample was taken */
};

/* Reads up to len-1 bytes of a small file (a /proc entry) into buf, NUL-terminated. Returns
 * the length, or -1 with errno set (EACCES, EPERM: refused; ENOENT: gone). */
ssize_t proc_read_small(const char *path, char *buf, size_t len);

/* What a /proc stat line (/proc/PID/stat or /proc/PID/task/TID/stat) says. */
struct proc_stat {
    char name[32];        /* the command name (comm), cut to fit */
    char state;           /* R, S, D, T, Z, ... */
    uint64_t cpu_ns;      /* user + system time, at clock-tick resolution */
    uint64_t start_ticks; /* start, clock ticks after boot (field 22) */
};

/* Parses a stat line (the command name may hold spaces and parentheses: the fields start after
 * the last ')'). Returns 0, -1 when it is malformed. */
int proc_stat_parse(const char *buf, struct proc_stat *out);

/* What descriptor `fd` of process `pid` is, into out: "socket", "pipe", "gpu" (an NVIDIA
 * device), "file" (a path), "" (anything else). Returns 0, -1 (out "") when /proc does not
 * say (gone, refused). */
int proc_fd_kind(int pid, long fd, char *out, size_t len);

/* Samples process `pid`. Always fills `s`; returns 0 when the process exists, -1 when not. */
int proc_sample(int pid, struct proc_sample *s);

/* A hash of this machine's boot id (as the shim writes it in ls_header.boot_id), 0 unknown. */
uint32_t proc_boot_id(void);

/* Share of one CPU the process used between two samples (0 when unknown). */
double proc_cpu_share(const struct proc_sample *before, const struct proc_sample *after);

/* A word for a process from two samples: "busy" (>= 30% of a CPU, or runnable at both),
 * "sleeping", "stopped", "zombie", "gone". */
const char *proc_activity(const struct proc_sample *before, const struct proc_sample *after);

#endif
