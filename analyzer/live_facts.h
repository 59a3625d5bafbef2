/* live_facts.h -- what `lockstep watch` publishes about a folder while it watches (--metrics:
 * Prometheus text for node_exporter's textfile collector; --status: a JSON file): per job
 * whether it is stalled, since when, its stalls and the first finding of its diagnosis; per
 * communicator (at most LIVE_FACTS_COMMS) its newest collective and how long since it
 * progressed. Both files are replaced whole (file_replace.h). docs/live.md, "watch as a
 * service", and docs/report-format.md, "Status file", describe them. */
#ifndef LOCKSTEP_LIVE_FACTS_H
#define LOCKSTEP_LIVE_FACTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "file_replace.h"
#include "live_stalled.h"
#include "monitor.h"

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

/* Gathers the facts of the monitor's last poll and the stalls of `set` into `f`. Returns 0, -1
 * when out of memory. */
int live_facts_gather(struct live_facts *f, const struct monitor *m,
                      const struct live_stalled_set *set, int up);

/* Gathers the facts and replaces the files `metrics_path` and `status_path` (each NULL: not
 * written) with them. Returns 0, or -1 after a message on stderr when one could not be written. */
int live_facts_publish(const char *metrics_path, const char *status_path, const struct monitor *m,
                       const struct live_stalled_set *set, int up);

/* The two writers (file_replace_fn: `arg` is a struct live_facts). Prometheus text exposition
 * format 0.0.4: */
file_replace_fn live_metrics_write;
/* The status JSON (docs/report-format.md, "Status file"): */
file_replace_fn live_status_write;

#endif
