/* model.h -- the job model built from loaded traces: processes as global ranks, jobs,
 * communicators with their members' collective sequences, groups and rank states. Its types are
 * model_types.h's, what each rank is doing model_state.h's (both below the model's building). */
#ifndef LOCKSTEP_MODEL_H
#define LOCKSTEP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model_state.h"
#include "model_types.h"

/* Builds the model of the given traces with thresholds `opts` (copied; NULL: the defaults); the
 * model does not own the traces (free them after model_free()). Returns a new model, or NULL
 * when out of memory. Free with model_free(). */
struct model *model_build(struct tr_trace **traces, size_t ntraces,
                          const struct analysis_opts *opts);

/* Frees the model (not the traces). NULL is fine. */
void model_free(struct model *m);

struct stop_mark;

/* For every process of `m` whose trace folder (or node summary) holds a stop record
 * (stop_mark.h), on the record's host, that started before the stop and ended at or after it
 * began (its end record, or its last sign of life for one killed without one): sets its
 * stopped_by (model_stops.c). `*marks` holds
 * `*nmarks` records already known (those node summaries carried, their folder the summary's
 * path; NULL, 0 for none); the records of the traces' folders are added (the array is to be
 * freed with free() once the model is). Unreadable records get one line on stderr each.
 * Returns how many processes it marked, -1 when out of memory. */
long stop_mark_attach(struct model *m, struct stop_mark **marks, size_t *nmarks);

/* Returns the member's record of collective #seq, or NULL when it was not issued or was
 * overwritten (see model_seq_lost()). */
const struct ls_record *model_member_coll(const struct m_member *mb, uint64_t seq);

/* The index in mb->colls of the member's first record of a collective numbered `seq` or
 * later (mb->ncolls when none): where a walk through its records from #seq starts. */
size_t model_member_coll_index(const struct m_member *mb, uint64_t seq);

/* True when the member issued #seq but the records read do not hold it because its trace
 * lost records: overwritten in the ring, cut off by truncation, or older than the window the
 * analysis read (see model_seq_unread()). A collective newer than every record the member
 * holds is not lost: its record is being written. */
int model_seq_lost(const struct m_member *mb, uint64_t seq);

/* True when the process's records read are not all it wrote: its ring wrapped, its file was
 * cut short, or the analysis read a window of them. */
int model_lost_records(const struct m_proc *p);

/* True when #seq is lost (model_seq_lost()) and may still be in the ring: older than every
 * collective read of a trace whose older records were left unread. */
int model_seq_unread(const struct m_member *mb, uint64_t seq);

/* True when the member has handed collective #seq to NCCL: issued it (its counter says so
 * even when the record was overwritten) outside a group, or in a group it has ended. */
int model_member_entered(const struct m_member *mb, uint64_t seq);

/* How a member stands towards collective #seq of its communicator c. */
enum model_stand {
    MODEL_ENTERED, /* handed it to NCCL (model_member_entered()) */
    MODEL_QUEUED,  /* issued it inside a group it never ended */
    MODEL_ABORTED, /* aborted or revoked the communicator before issuing it */
    MODEL_MISSING, /* never issued it */
};
enum model_stand model_member_stand(const struct m_comm *c, const struct m_member *mb,
                                    uint64_t seq);

/* The peer's half of p2p record r issued by comm rank my_cr (send #k from a to b pairs with
 * receive #k on b from a), NULL when the records read do not hold it. */
const struct ls_record *model_p2p_half(const struct m_member *peer, int my_cr,
                                       const struct ls_record *r);

/* How the other half of send or receive r (of a member of c) stands. */
enum model_half {
    MODEL_HALF_UNTRACED, /* the peer has no trace (or r names no member) */
    MODEL_HALF_POSTED,   /* the peer handed its half to NCCL (issued it outside a group, or in a
                          * group it ended; or its counters say it issued it), the same size */
    MODEL_HALF_DIFFERS,  /* the peer's half has another count or datatype: it cannot complete */
    MODEL_HALF_MISSING,  /* the peer never posted it (or queued it in a group it never ended) */
};
/* The one answer to which halves of a send/receive pair match: model_p2p_half() and the
 * peer's counters. *other gets the peer's record of the half when the records read hold it,
 * else NULL. */
enum model_half model_p2p_match(const struct m_comm *c, const struct ls_record *r,
                                const struct ls_record **other);

/* How the signals wait r (a WaitSignal of a member of c on one descriptor) waits for stand:
 * MODEL_HALF_POSTED when its peer put or signalled (on r's signal index and context, towards
 * r's member) as many signals as the member's waits up to r consumed, MODEL_HALF_MISSING when
 * fewer, MODEL_HALF_UNTRACED when r names no peer (several descriptors) or one with no trace.
 * *sent and *wanted get the two counts (from the records read: a wrapped ring loses the
 * oldest). */
enum model_half model_signal_match(const struct m_comm *c, const struct ls_record *r,
                                   uint64_t *sent, uint64_t *wanted);

/* How many halves towards comm rank my_cr of kind `want_op` (LS_OP_SEND or LS_OP_RECV) the
 * peer issued on comm `comm_id`: its peer table (which survives wraps) or its records. */
uint64_t model_p2p_issued(const struct m_member *peer, uint64_t comm_id, int my_cr, int want_op);

/* Process p's record of the child creation (Split, Shrink, Grow) it made of communicator
 * `pe` (its entry of it) at split counter `counter`, counted back from its newest (records lost
 * to a wrapped ring are the oldest); NULL when it has not made that one or its record is gone. */
const struct ls_record *model_child_creation(const struct m_proc *p, const struct ls_comm *pe,
                                             uint32_t counter);

/* True when two members' records of the creation at one split counter of a communicator make
 * different communicators that NCCL cannot match: a split beside a shrink, shrinks excluding
 * different ranks, grows to different sizes. */
int model_creations_differ(const struct ls_record *a, const struct ls_record *b);

/* The members of parent c that shrink `r` (made at split counter `counter`) excluded, marked in
 * excluded[] (c->nmembers bytes) by comm rank: those its child id names among the members that
 * had not reached the counter (the shim hashes the excluded ranks into the id, lockstep/comm_id.h:
 * the subset that hashes to it is the one the caller passed), else as many of them (the record's
 * excluded count) as are gone or aborted the parent, the rest in comm rank order. Returns
 * excluded[] (free() it), NULL for none or when out of memory. */
unsigned char *model_shrink_excluded(const struct m_comm *c, const struct ls_record *r,
                                     uint32_t counter);

/* True when c looks like its job's world: the world's size, and every traced member's global
 * rank equal to its comm rank. Then a comm rank no trace holds is that global rank. */
int model_comm_world_like(const struct model *m, const struct m_comm *c);

/* True when two records under one sequence number are the same collective as far as NCCL
 * matches them (Bcast is Broadcast; count, datatype, reduction op, root). */
static inline int model_calls_agree(const struct ls_record *a, const struct ls_record *b)
{
    unsigned oa = a->op == LS_OP_BCAST ? LS_OP_BROADCAST : a->op;
    unsigned ob = b->op == LS_OP_BCAST ? LS_OP_BROADCAST : b->op;
    return oa == ob && a->count == b->count && a->dtype == b->dtype &&
           (!ls_op_has_redop(oa) || a->redop == b->redop) &&
           (!ls_op_is_rooted(oa) || a->peer == b->peer);
}

/* True when p made no call that issues work and succeeded after time t: a failure at t is where
 * its NCCL work ended (a wait given up on, or what ended the program). */
int model_nothing_after(const struct m_proc *p, uint64_t t);

/* True when p's failed call r is where its NCCL work ended: it made no call that issues work
 * and succeeded after it (model_nothing_after()), and it did not revoke r's communicator
 * itself (ncclCommRevoke: NCCL's way to stop a communicator so as to shrink or rebuild it;
 * such a rank is recovering from the failure, whatever it does until its next call). */
int model_failure_ended_work(const struct m_proc *p, const struct ls_record *r);

/* Process p's newest ncclCommAbort or ncclCommRevoke of communicator `comm` among the records
 * read, NULL none. */
const struct ls_record *model_comm_abort(const struct m_proc *p, uint64_t comm);

/* The oldest sequence number of comm c where the records read of two members disagree
 * (model_calls_agree()) into *seq, 0 none: where the members' paths diverged. Worked out once
 * per communicator and kept in it (the graph and the mismatch pass both ask). Returns 0, or -1
 * when out of memory. */
int model_first_divergence(const struct m_comm *c, uint64_t *seq);

/* True when every member of c tracks completion on its GPU, issued collective #k as the same
 * call, and no GPU completed it: the collective itself is stuck. *last gets the record of the
 * member that issued it last (NULL when every record of it was overwritten). */
int model_gpu_stuck(const struct m_comm *c, uint64_t k, const struct ls_record **last);

/* The widest arrival spread (last enter minus first) of the newest collectives before #seq
 * (at most 32) that every traced member still holds, in ns. This function can't fail. */
uint64_t model_arrival_spread(const struct m_comm *c, uint64_t seq);

/* The newest attempt of job `job`'s id (itself when it is the newest). The attempts of one id
 * are consecutive in model.jobs, oldest first. */
size_t model_newest_attempt(const struct model *m, size_t job);

#endif
