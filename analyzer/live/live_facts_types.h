/* live_facts_types.h -- the facts `lockstep watch` publishes (live_facts.h) and their two
 * writers: below both the gathering (live_facts.c) and the writers (live_metrics.c,
 * live_status.c), which read nothing else. */
#ifndef LOCKSTEP_LIVE_FACTS_TYPES_H
#define LOCKSTEP_LIVE_FACTS_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "file_replace.h"
#include "live_stalled.h"

/* Series per communicator and per job at most: bounded, whatever the job's size. */
#define LIVE_FACTS_COMMS 64
#define LIVE_FACTS_JOBS  64
/* The status file's format version (its member "status_format"). */
#define LIVE_STATUS_FORMAT 1

struct live_comm_fact {
    uint64_t id;
    char job[LIVE_JOB_LABEL_LEN];
    char ranks[256];     /* its members' global ranks, compressed (cut short with ",...") */
    uint64_t collective; /* the newest collective issued on it (mon_comm.max_issued) */
    double idle_s;       /* since a member last progressed on it */
    int stalled;         /* a reported stall is on it: its own, or its job's while a rank waits
                          * in it */
    int slow;            /* its members wait in it past the short bound for a rank that works:
                          * slow, not hung (docs/live.md, "Two bounds") */
};

struct live_job_fact {
    char job[LIVE_JOB_LABEL_LEN];
    size_t running_ranks;            /* its traced processes running here */
    unsigned long long stalls;       /* stalls reported in it since watch started */
    int stalled;                     /* a reported stall of it is not over */
    double stalled_s;                /* since its oldest such stall stopped progressing; 0 */
    uint64_t since_ns;               /* CLOCK_REALTIME of that moment; 0 */
    char description[512];           /* the newest such stall in words; "" */
    struct live_first_finding first; /* the first finding of its diagnosis */
};

struct live_facts {
    const char *dir;
    int up;             /* 1 while watch runs; 0 in its last write */
    uint64_t now_ns;    /* CLOCK_REALTIME when gathered */
    size_t traces;      /* trace files in the folder */
    size_t running;     /* ... whose process runs here */
    size_t comms_total; /* communicators with a member running here, or stalled */
    struct live_comm_fact comms[LIVE_FACTS_COMMS]; /* stalled first, then the most recently
                                                    * progressed */
    size_t ncomms;
    struct live_job_fact jobs[LIVE_FACTS_JOBS]; /* stalled first, then those running here */
    size_t njobs;
};

/* The two writers (file_replace_fn: `arg` is a struct live_facts). Prometheus text exposition
 * format 0.0.4: */
file_replace_fn live_metrics_write;
/* The status JSON (docs/report-format.md, "Status file"): */
file_replace_fn live_status_write;

#endif
