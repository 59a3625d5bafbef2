/* monitor_stall.h -- when a watched job, or one communicator of it, has stalled: a running rank
 * waits in it and nothing of it moved for the stall time, even while the rest of the folder
 * progresses; what stalled, what progressed meanwhile, in words and in JSON. */
#ifndef LOCKSTEP_MONITOR_STALL_H
#define LOCKSTEP_MONITOR_STALL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "idmap.h"
#include "intvec.h"
#include "json_writer.h"
#include "monitor.h"

enum mon_stall_scope { MON_STALL_JOB, MON_STALL_COMM };

struct mon_stall_known;

/* How long a part may go without progress (docs/live.md, "Two bounds"). A part whose waiting
 * ranks wait for ranks that make no progress at all (asleep outside I/O, stopped, in a lock or
 * a host barrier, dead, or waiting in NCCL themselves, followed along the chain) stalls after
 * `short_s`; while one of those ranks is busy (CPU, I/O, its GPU) or progresses elsewhere, only
 * after `long_s`. Once a part has a rhythm (it progressed RHYTHM_PROGRESSIONS times), its short
 * bound is a few times the longest pause it came back from, down to two fifths of `short_s`, and
 * its long bound at least three times that pause. short_s >= long_s: one fixed bound
 * (--stall), no rhythm. */
struct mon_bounds {
    double short_s;
    double long_s;
};

/* The bounds of run and watch when no --stall is given (docs/live.md), in whole seconds: the
 * options' help prints them (LIVE_STR). */
#define MON_SHORT_S 25
#define MON_LONG_S  300

/* The least time without progress any bound of `b` can hold a part to (its rhythm counted):
 * what monitor_set_stall() is told. */
double mon_bounds_least(const struct mon_bounds *b);

/* Which bound decided a stall. */
enum mon_bound {
    MON_BOUND_FIXED = 0, /* the one bound of --stall */
    MON_BOUND_SHORT,     /* the ranks waited for made no progress */
    MON_BOUND_LONG,      /* they worked, but for longer than the long bound */
};

/* A part of the folder: a communicator (comm != 0) or a job (comm 0). */
struct mon_part {
    uint64_t comm;
    char job[LS_JOB_LEN]; /* its job id, "" none */
    double idle_s;        /* seconds since it last progressed */
    struct intvec ranks;  /* its global ranks (a member without one: its rank in the comm) */
    size_t at;            /* its index in the monitor's communicators or jobs */
};

/* Parts that progressed shown by name at most (the rest are counted). */
#define MON_STALL_SHOWN 8

struct mon_stall {
    enum mon_stall_scope scope;
    int outside_nccl;       /* a job (scope JOB) with nothing outstanding in NCCL none of whose
                             * ranks moved in NCCL or out of it (monitor_activity.h) */
    struct mon_part part;   /* what stalled: no progress for part.idle_s */
    struct intvec waiting;  /* its ranks that wait in it */
    char why[256];          /* what one of them waits in, in words */
    double window_s;        /* the stall time: the bound that decided */
    enum mon_bound bound;   /* which bound that was */
    double short_s, long_s; /* the bounds that held for the part (its rhythm counted) */
    int busy_rank;          /* the rank waited for that worked last, -1 none (awaited) */
    long busy_at;           /* ... its trace (index in the monitor's), -1 none */
    int busy_pid;           /* ... its process, 0 none (a rank with no trace yet has one) */
    double busy_ago_s;      /* ... seconds since it last worked, -1 none */
    char awaited[160];      /* what the ranks waited for did, in words ("rank 7 (pid 12) was
                             * last busy 3.2 s ago (92% of a CPU)") */
    size_t nprogressed;     /* other communicators (COMM) or jobs (JOB) that kept progressing
                             * for half the window after the stalled part stopped: the stall is
                             * partial when there is one */
    struct mon_part shown[MON_STALL_SHOWN]; /* the most recent of them first */
    size_t nshown;
    struct idmap progressed_comms;  /* ids of every communicator that kept progressing so */
    struct idmap progressed_traces; /* monitor_name_key() of every trace that did */
};

/* Looks for a stall at `now_ns` (CLOCK_MONOTONIC) after monitor_poll(): a job with something
 * outstanding (monitor_waits.h) none of whose traces progressed for its bound; else a
 * communicator a running member waits in (enum mon_wait) on which no member progressed for its
 * bound, whatever the rest of its job does; else a job with a rank running here, nothing
 * outstanding and no rank on another host, none of whose ranks progressed or was active
 * outside NCCL for its short bound (outside_nccl). Of several, the one idle longest, a job
 * first. monitor_find_stall() holds every part to one bound, `stall_s`. Returns 1 with `s`
 * filled (free with mon_stall_free(); s->part.at is the job's or the communicator's index), 0
 * when nothing stalled (`s` zeroed), -1 when out of memory. */
int monitor_find_stall(const struct monitor *m, double stall_s, uint64_t now_ns,
                       struct mon_stall *s);

/* A part that is slow, not stalled: idle past its short bound while a rank it waits for works
 * (struct mon_bounds), not covered by `known` (NULL: nothing); the one idle longest. Filled as
 * a stall is (its window_s the long bound it is held to). Returns 1, 0 none (`s` zeroed), -1
 * out of memory. */
int monitor_find_slow(const struct monitor *m, const struct mon_bounds *b, uint64_t now_ns,
                      const struct mon_stall_known *known, struct mon_stall *s);

/* Parts already reported stalled and not resumed (`watch --keep`, live_stalled.h), for
 * monitor_find_stall_beside() to pass over. Zero it to start. */
struct mon_stall_known {
    struct idmap comms; /* communicator ids */
    struct idmap jobs;  /* job indexes in monitor.jobs as of the last poll, plus 1 */
};

/* monitor_find_stall() with bounds `b`, passing over what `known` covers (NULL: nothing): a known
 * communicator, or one in a known job; a known job, or one whose every running trace is a
 * member of a known communicator (its stall is the one reported, seen whole). What is left is
 * a new stall, or the growth of a known one (the rest of its job stopped too). Returns as
 * monitor_find_stall() does. */
int monitor_find_stall_beside(const struct monitor *m, const struct mon_bounds *b, uint64_t now_ns,
                              const struct mon_stall_known *known, struct mon_stall *s);

/* Frees the sets of `k`; it is empty and usable again. */
void mon_stall_known_free(struct mon_stall_known *k);

/* Appends the global ranks of communicator `k`'s members (a member without one: its rank in
 * the communicator) to `out`, sorted and without duplicates. Returns 0, -1 out of memory. */
int mon_comm_ranks(const struct monitor *m, const struct mon_comm *k, struct intvec *out);

/* Appends the global ranks of the traces of job `job` (index in monitor.jobs) to `out`, sorted
 * and without duplicates. Returns 0, -1 when out of memory. */
int mon_job_ranks(const struct monitor *m, size_t job, struct intvec *out);

/* Writes what stalled as words: "comm 7f3a91c2 (ranks 4-7)", "job train-b (ranks 0-3)", "the
 * job (ranks 0-3)". This function can't fail (the text is cut to len). */
void mon_stall_part_words(const struct mon_stall *s, char *buf, size_t len);

/* Writes what stalled, for how long and what progressed meanwhile as one sentence: "comm
 * 7f3a91c2 (ranks 4-7) made no progress for 2.0 s while comm 1a2b3c4d (ranks 0-3) progressed".
 * This function can't fail (the text is cut to len). */
void mon_stall_describe(const struct mon_stall *s, char *buf, size_t len);

/* Writes the member "stall" (docs/report-format.md) into the object `w` is in. */
void mon_stall_json(struct json_writer *w, const struct mon_stall *s);

/* Frees what `s` holds; it is zeroed. */
void mon_stall_free(struct mon_stall *s);

#endif
