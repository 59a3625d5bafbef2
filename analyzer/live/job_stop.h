/* job_stop.h -- stops a job the way its launcher expects, and says what that took: the
 * launcher (and its process group) first, then the traced ranks it left running, then every
 * left-over process of theirs; who ended which process, with which signal, how fast. */
#ifndef LOCKSTEP_JOB_STOP_H
#define LOCKSTEP_JOB_STOP_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "json_writer.h"
#include "monitor.h"

enum stop_role { STOP_ROLE_LAUNCHER, STOP_ROLE_RANK, STOP_ROLE_DESCENDANT };
/* Who ended a process: lockstep's own signal aimed at it; the launcher's teardown (it ended
 * without one while the launcher ran); or itself (neither: e.g. a helper that exits when its
 * rank ends). */
enum stop_by { STOP_BY_NONE, STOP_BY_LAUNCHER, STOP_BY_LOCKSTEP, STOP_BY_ITSELF };

/* One process of the job that ran when the stop began (or appeared during it). */
struct stop_proc {
    pid_t pid;
    uint64_t start_ticks; /* with the pid, names the process (liveness_of_pid) */
    enum stop_role role;
    int rank;           /* its global rank when it has a trace, else -1 */
    pid_t parent;       /* a descendant's parent when first seen, else 0 */
    char command[32];   /* the kernel's name for it */
    char parent_is[64]; /* a descendant's parent in words: "child of rank 2", "orphaned" */
    int sent;           /* the last signal lockstep aimed at this process itself, 0 none */
    int died_of;        /* the signal it died of where known (trace end, wait status), else 0 */
    enum stop_by by;    /* who ended it; NONE while it lives */
    double ended_s;     /* when it was seen gone, seconds after the stop began */
    int alive;          /* it was still there when the stop gave up */
    int launchers;      /* below a launcher that runs and below no rank: the launcher's own
                         * helper, left to it while it runs */
};

struct stop_report {
    struct stop_proc *v;
    size_t n, cap;
    double took_s;         /* from the first signal until nothing of the job ran (or gave up) */
    char launcher_cmd[64]; /* CMD's name, "" when the job has none (watch) */
    int launcher_gone;     /* CMD had exited before the stop began */
};

/* What to stop. */
struct stop_job {
    pid_t launcher;   /* CMD's pid, the leader of its process group; 0 when it already ended
                       * or the job has none (watch) */
    int own_children; /* this process is the job's subreaper (lockstep run): every process
                       * below it is the job's, and it reaps them; a traced rank that is not
                       * below it (another job writing to the same folder) is not stopped */
    long job;         /* the job of the monitor (monitor.jobs index) whose ranks to stop; -1 every
                       * traced rank running here (and below this process with own_children) */
    double grace_s;   /* how long each step waits for processes to comply */
};

/* Stops the job: SIGTERM to the launcher's process group, and up to `grace_s` for the launcher
 * to tear its job down and exit (SIGCONT to stopped processes of the job); then SIGTERM (and
 * SIGCONT) to every traced rank of monitor `m` still running here and every descendant of
 * theirs (and, with own_children, of this process) still alive, up to `grace_s` more; then
 * SIGKILL to what is left but the launcher; the launcher gets `grace_s` more to exit once its
 * ranks are gone, then SIGKILL. Polls every 10 ms, so a job that complies ends in
 * milliseconds. Fills `r` (zero it first) with every process it saw and how it ended. This
 * function can't fail: what could not be stopped is reported `alive`. */
void job_stop(struct monitor *m, struct stop_job *job, struct stop_report *r);

/* The grace: how long each step of the stop waits before the next, harsher one.
 * LOCKSTEP_STOP_GRACE (seconds, 0 to 3600), else its default (settings.h: 5 s). */
double job_stop_default_grace(void);

/* Writes one line for people: "stopped the job in 0.31 s: torchrun (pid 812) took SIGTERM and
 * ended 4 ranks in 0.30 s; lockstep killed 1 left-over process with SIGKILL: pid 977 (python3,
 * child of rank 2)". */
void stop_report_print(FILE *out, const struct stop_report *r);

/* Writes the member "stopped": [{pid, command, role, rank, parent, parent_role, signal, by,
 * ended_s, alive}] into the object `w` is in (docs/report-format.md). */
void stop_report_json(struct json_writer *w, const struct stop_report *r);

/* Frees the report's list. */
void stop_report_free(struct stop_report *r);

/* Sleeps `ms` milliseconds (signals may end it early): the stop's polls, and those of the live
 * commands above it (live_cmd.h). */
void live_sleep_ms(int ms);

#endif
