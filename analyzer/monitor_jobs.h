/* monitor_jobs.h -- the jobs of a watched folder: which traces belong together (the job id of
 * their headers, else the communicators they share, else the folder), when each job last
 * progressed and what in it is outstanding. One job can hang while another trains on. */
#ifndef LOCKSTEP_MONITOR_JOBS_H
#define LOCKSTEP_MONITOR_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"

struct monitor;

struct mon_job {
    char name[LS_JOB_LEN];     /* the job id of its traces, "" none */
    uint64_t last_progress_ns; /* CLOCK_MONOTONIC: the newest progress of its traces */
    uint64_t last_active_ns;   /* ... or activity of their processes outside NCCL */
    size_t ntraces;
    size_t running;       /* traces whose process runs here */
    size_t elsewhere;     /* traces whose process may run on another host (mon_trace.elsewhere) */
    size_t ranked;        /* traces with a global rank */
    int world_size;       /* the largest world size its traces' launcher gave, -1 none */
    int outstanding;      /* something in it is outstanding (mon_trace_outstanding()) */
    char why[256];        /* ... in words */
    size_t waiting_trace; /* the trace it is outstanding in */
};

struct mon_jobs {
    struct mon_job *v;
    size_t n, cap;
};

/* Regroups the traces of `m` into jobs (sets each trace's `job`): traces with a job id by that
 * id; the others by the communicators they share, and those with neither id nor communicator
 * into one job of the folder. Fills each job's progress and what is outstanding in it (after
 * the communicators' tally). O(traces + entries). Returns 0, -1 when out of memory. */
int mon_jobs_group(struct monitor *m);

/* Frees the jobs; the list is empty and usable again. */
void mon_jobs_free(struct mon_jobs *j);

#endif
