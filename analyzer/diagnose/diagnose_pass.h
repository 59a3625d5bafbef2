/* diagnose_pass.h -- what a pass of the diagnosis gets (diagnose.h): the job's state shared by
 * the passes, the helpers they share (diagnose_describe.c), and the other passes. Below the
 * passes and diagnose.c, which runs them; a pass includes this header, not diagnose.h. */
#ifndef LOCKSTEP_DIAGNOSE_PASS_H
#define LOCKSTEP_DIAGNOSE_PASS_H

#include <stddef.h>
#include <stdint.h>

#include "cause.h"
#include "finding.h"
#include "finding_ops.h"
#include "model.h"
#include "symbolizer.h"
#include "waitgraph.h"

/* A diagnosis narrowed to the part of a job that stalled while the rest went on (a live stall:
 * live_scope.h): `went_on` is true for a finding about a part that progressed meanwhile, which
 * the report leaves out. Such a finding is no one's cause (diagnose_cause.c): a healthy
 * communicator's member caught a moment before its peer does not say why the stalled part
 * waits for that peer. */
struct diag_scope {
    int (*went_on)(const void *ctx, const struct model *m, const struct finding *f);
    const void *ctx;
};

/* How one diagnosis runs; its thresholds are the model's (model.opts, analysis_opts.h). */
struct diag_options {
    const struct diag_scope *scope; /* NULL: the whole job */
};

/* State shared by the passes while one job is diagnosed. */
struct diag {
    const struct model *m;
    size_t job;
    const struct m_job *j;
    struct symbolizer *sym;
    const struct diag_options *opt;
    struct findings *out;
    struct waitgraph *graph; /* the job's wait-for graph, built before the passes */
};

/* The passes; each returns 0, or -1 when out of memory. */
int diagnose_identity(struct diag *d);   /* duplicate_rank */
int diagnose_process(struct diag *d);    /* rank_crashed, rank_exited, nccl_error */
int diagnose_abort(struct diag *d);      /* comm_aborted */
int diagnose_mismatch(struct diag *d);   /* op/count/dtype/redop/root_mismatch */
int diagnose_missing(struct diag *d);    /* missing_ranks */
int diagnose_p2p(struct diag *d);        /* p2p_unmatched, p2p_size_mismatch */
int diagnose_deadlock(struct diag *d);   /* deadlock_cycle */
int diagnose_straggler(struct diag *d);  /* straggler */
int diagnose_outside(struct diag *d);    /* stuck_outside_nccl (live facts: every rank out of
                                          * NCCL) */
int diagnose_inflight(struct diag *d);   /* stuck_in_flight (GPU completion known) */
int diagnose_comm_init(struct diag *d);  /* comm_init_mismatch */
int diagnose_incomplete(struct diag *d); /* trace_incomplete (runs last: looks at the others) */

/* Sets consequence_of of every finding in d->out[first..] from the wait-for graph: a finding
 * that owns a sink of the graph is a root cause, every other one follows from the owner of the
 * sink its waits end in and gets a "why:" line with the way there (diagnose_cause.c). Returns
 * 0, or -1 when out of memory. */
int diagnose_causes(struct diag *d, size_t first);

/* First failure first (diagnose_first_failure.c): among the root findings in d->out[first..]
 * that own the sink of a rank that ended with a failure (owner: per component of d->graph, the
 * finding that owns it, -1 none), the earliest stays the root cause and every certainly later
 * one becomes its consequence, with a "why:" line; deaths that follow a failure through the graph
 * get the same words. Called by diagnose_causes(). This function can't fail. */
void diagnose_first_failure(struct diag *d, size_t first, const long *owner);

/* ---- helpers shared by the passes (diagnose_describe.c) ---------------------------------- */

/* Appends a finding of `kind` for the job being diagnosed, at communicator `comm` and sequence
 * number `seq` (a collective's, or a Send/Recv's per peer), both marked known (has_comm,
 * has_seq: a caller whose call may have neither clears them). Returns it, or NULL when out of
 * memory; the pointer is valid until the next finding is added. */
struct finding *diag_finding_at(struct diag *d, enum finding_kind kind, uint64_t comm,
                                uint64_t seq);

/* Writes "AllReduce #12 on comm 7f3a91c2 (count 1048576, fp32, sum, from train.c:212)". */
void describe_call(struct diag *d, const struct m_proc *p, const struct ls_record *r, char *buf,
                   size_t len);

/* Writes where a rank is, for people: "it is alive, last seen in Broadcast #12 from
 * eval.c:90, 31 s ago" / "it crashed with SIGSEGV 2 min ago" / ... */
void describe_whereabouts(struct diag *d, const struct m_proc *p, char *buf, size_t len);

/* "rank 4" or "ranks 0-3,5" for a rank list (the text is cut to len). */
void describe_ranks(const int *ranks, size_t n, char *buf, size_t len);

/* Fills a class key describing call r of process p (role given). */
struct f_class describe_class(struct diag *d, const struct m_proc *p, const struct ls_record *r,
                              enum class_role role);

/* Seconds from t to the job's reference time (>= 0). */
double diag_seconds_ago(const struct diag *d, uint64_t t);

/* The other members of a call only its `nmakers` makers made, in words: "ranks 0,2,4 finished
 * without it (exited with status 0[ after ending the communicator]); ranks 1,5 wait for it
 * elsewhere" (`finished` and `held` are normalized on the way). */
void describe_alone_others(struct intvec *finished, struct intvec *held, int ended, size_t nmakers,
                           char *buf, size_t len);

/* Appends to f->waiting the ranks waiting in call node x of the graph, and sets *example to
 * the earliest of their records of it (its process into *holder); NULL, NULL when none has one.
 * Returns 0, -1 when out of memory. */
int diag_call_waiters(struct diag *d, size_t x, struct finding *f, const struct ls_record **example,
                      const struct m_proc **holder);

/* Global rank of comm rank `cr` of c, -1 when no trace joined as it. */
int diag_member_rank(const struct m_comm *c, int cr);

#endif
