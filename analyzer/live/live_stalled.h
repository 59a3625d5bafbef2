/* live_stalled.h -- the stalls a long-running `watch --keep` reported, each remembered while its
 * part stays stalled: its end (the part progressed again) is said once, and what is stalled now
 * is what the metrics and status files say (live_facts.h). */
#ifndef LOCKSTEP_LIVE_STALLED_H
#define LOCKSTEP_LIVE_STALLED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "live_cmd.h"
#include "monitor.h"
#include "monitor_stall.h"

/* How watch names a job in its metrics and status files: its job id, else "anon-N" (the N-th
 * job without one in the monitor's order). */
#define LIVE_JOB_LABEL_LEN (LS_JOB_LEN + 16)

/* One stall reported and not yet over. */
struct live_stalled {
    enum mon_stall_scope scope;
    int outside_nccl;                /* a job stalled outside NCCL: it resumes when a rank is
                                      * active again, in NCCL or out of it */
    uint64_t comm;                   /* the communicator (scope MON_STALL_COMM) */
    size_t trace;                    /* a trace of its job (for a communicator, its first
                                      * member's): monitor.t only grows, so this finds the job at
                                      * every poll, however the jobs were regrouped */
    char job[LIVE_JOB_LABEL_LEN];    /* its job's label when it was reported */
    char what[192];                  /* "comm 7f3a91c2 (ranks 0-3)" (mon_stall_part_words()) */
    char description[512];           /* mon_stall_describe() when it was reported */
    uint64_t stopped_ns;             /* CLOCK_MONOTONIC: the part's last progress before it */
    uint64_t since_ns;               /* CLOCK_REALTIME of that moment */
    size_t running;                  /* the part's processes running here when it was reported */
    struct live_first_finding first; /* the first finding of its live diagnosis */
};

/* Stalls reported, per job. */
struct live_job_stalls {
    char job[LIVE_JOB_LABEL_LEN];
    unsigned long long stalls;
};

/* Zero it to start. */
struct live_stalled_set {
    struct live_stalled *v; /* in the order reported */
    size_t n, cap;
    struct live_job_stalls *jobs; /* every job that had a stall, with how many */
    size_t njobs, jobcap;
};

/* Writes the label of job `job` (index in m->jobs) into buf (LIVE_JOB_LABEL_LEN). This
 * function can't fail. */
void live_job_label(const struct monitor *m, size_t job, char *buf, size_t len);

/* Remembers the stall `s` that monitor_find_stall_beside() just found (after the poll it looked
 * at) and its diagnosis' first finding (NULL: none), and counts it for its job. Returns 0, -1
 * when out of memory (nothing remembered). */
int live_stalled_add(struct live_stalled_set *set, const struct monitor *m,
                     const struct mon_stall *s, const struct live_first_finding *first);

/* Fills `k` (zeroed or freed before) with the parts of `set` as of the monitor's last poll, for
 * monitor_find_stall_beside(). Returns 0, -1 when out of memory. */
int live_stalled_known(const struct live_stalled_set *set, const struct monitor *m,
                       struct mon_stall_known *k);

/* Forgets each stall whose part progressed after it stopped (its communicator's progress; for
 * a job, and any scope that is not a communicator's, its job's) and says so on `out`: "comm
 * 7f3a91c2 (ranks 0-3) resumed after 41.2 s", or, when fewer of its processes run than when it
 * was reported, that they ended. Returns how many it forgot. This function can't fail. */
size_t live_stalled_check(struct live_stalled_set *set, const struct monitor *m, FILE *out);

/* The index in m->jobs of the job of stall `r`, as of the last poll. */
size_t live_stalled_job(const struct monitor *m, const struct live_stalled *r);

/* How many stalls were reported in the job labelled `job`. */
unsigned long long live_stalled_count(const struct live_stalled_set *set, const char *job);

/* Frees the set; it is empty and usable again. */
void live_stalled_free(struct live_stalled_set *set);

#endif
