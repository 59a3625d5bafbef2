/* finding_kinds.h -- every kind of finding in one list: the enum, the JSON names, the severity,
 * the root-cause priority, the traits other code asks about and the row of what the kind does
 * are all generated from it.
 *
 * X(ID, json name, severity, priority, traits, what differs, ops)
 *   severity  F_SEV_ERROR (red in the text report, a root cause) or F_SEV_WARN (yellow: a
 *             limit of what can be concluded, or a slowness, never the hang itself)
 *   priority  where several findings are roots at the same depth, the lower number comes
 *             first: the cause a person should act on first (docs/analyzer.md, "What makes a
 *             root cause"). Numbers leave room between them for a new kind.
 *   traits    F_T_DEATH (a rank's process ended), F_T_MISMATCH (ranks called different things
 *             under one seq: their classes say who called what), F_T_TIMELINE (the HTML
 *             timeline centres on its collective), F_T_FAILED_AT (its time is when its rank
 *             failed, before the rank ended: an error a call returned, an abort)
 *   what differs  for a mismatch, the words of its summary ("holds different counts")
 *   ops       its row of functions (struct finding_ops, finding_ops.h): its place in the
 *             wait-for graph, its JSON keys, its data's rank sets and memory; defined by the
 *             pass that makes the kind, which kinds may share
 *
 * A kind's own data (beyond struct finding's common part, finding.h) is a struct below, in
 * union finding_payload (struct finding's `as`); FINDING_PAYLOADS says which member holds each
 * kind's data and what its fields are when unset, and a finding's kind says which member holds.
 *
 * Adding a kind: docs/architecture.md, "Add a finding kind" (tests/cli kinds-documented and
 * kinds-listed check the docs' lists of kinds against this one). */
#ifndef LOCKSTEP_FINDING_KINDS_H
#define LOCKSTEP_FINDING_KINDS_H

#include <stddef.h>
#include <stdint.h>

#include "intvec.h"
#include "rank_end.h"

#define FINDING_KINDS(X)                                                                           \
    X(DUPLICATE_RANK, "duplicate_rank", F_SEV_ERROR, 10, 0, NULL, duplicate_rank_ops)              \
    X(RANK_CRASHED, "rank_crashed", F_SEV_ERROR, 20, F_T_DEATH, NULL, rank_crashed_ops)            \
    X(RANK_EXITED, "rank_exited", F_SEV_ERROR, 30, F_T_DEATH, NULL, rank_exited_ops)               \
    X(COMM_ABORTED, "comm_aborted", F_SEV_ERROR, 40, F_T_FAILED_AT, NULL, comm_aborted_ops)        \
    X(NCCL_ERROR, "nccl_error", F_SEV_ERROR, 50, F_T_FAILED_AT, NULL, nccl_error_ops)              \
    X(COMM_INIT_MISMATCH, "comm_init_mismatch", F_SEV_ERROR, 60, 0, NULL, comm_init_mismatch_ops)  \
    X(OP_MISMATCH, "op_mismatch", F_SEV_ERROR, 70, F_T_MISMATCH | F_T_TIMELINE,                    \
      "different operations", mismatch_ops)                                                        \
    X(COUNT_MISMATCH, "count_mismatch", F_SEV_ERROR, 80, F_T_MISMATCH | F_T_TIMELINE,              \
      "different counts", mismatch_ops)                                                            \
    X(DTYPE_MISMATCH, "dtype_mismatch", F_SEV_ERROR, 90, F_T_MISMATCH | F_T_TIMELINE,              \
      "different datatypes", mismatch_ops)                                                         \
    X(REDOP_MISMATCH, "redop_mismatch", F_SEV_ERROR, 100, F_T_MISMATCH | F_T_TIMELINE,             \
      "different reduction ops", mismatch_ops)                                                     \
    X(ROOT_MISMATCH, "root_mismatch", F_SEV_ERROR, 110, F_T_MISMATCH | F_T_TIMELINE,               \
      "different roots", mismatch_ops)                                                             \
    X(P2P_SIZE_MISMATCH, "p2p_size_mismatch", F_SEV_ERROR, 120, 0, NULL, p2p_size_mismatch_ops)    \
    X(DEADLOCK_CYCLE, "deadlock_cycle", F_SEV_ERROR, 130, 0, NULL, deadlock_cycle_ops)             \
    X(P2P_UNMATCHED, "p2p_unmatched", F_SEV_ERROR, 140, 0, NULL, p2p_unmatched_ops)                \
    X(STUCK_IN_FLIGHT, "stuck_in_flight", F_SEV_ERROR, 150, F_T_TIMELINE, NULL,                    \
      stuck_in_flight_ops)                                                                         \
    X(MISSING_RANKS, "missing_ranks", F_SEV_ERROR, 160, F_T_TIMELINE, NULL, missing_ranks_ops)     \
    X(STUCK_OUTSIDE_NCCL, "stuck_outside_nccl", F_SEV_ERROR, 165, 0, NULL, stuck_outside_nccl_ops) \
    X(STRAGGLER, "straggler", F_SEV_WARN, 170, F_T_TIMELINE, NULL, straggler_ops)                  \
    X(TRACE_INCOMPLETE, "trace_incomplete", F_SEV_WARN, 180, 0, NULL, trace_incomplete_ops)

/* What each kind's own data is, beside its kind:
 *
 * X(ID, member of union finding_payload, the fields' values when unset...)
 *   The member `m` is of type struct f_m; finding_add() sets it to (struct f_m){unset...}: list
 *   `0` where every field's unset value is 0. A kind not listed has no data of its own. */
#define FINDING_PAYLOADS(X)                                                                        \
    X(RANK_CRASHED, death, .signal = -1, .status = -1)                                             \
    X(RANK_EXITED, death, .signal = -1, .status = -1)                                              \
    X(NCCL_ERROR, nccl_error, .result = -1)                                                        \
    X(COMM_INIT_MISMATCH, absent, 0)                                                               \
    X(P2P_SIZE_MISMATCH, p2p, .src = -1, .dst = -1)                                                \
    X(DEADLOCK_CYCLE, deadlock, 0)                                                                 \
    X(P2P_UNMATCHED, p2p, .src = -1, .dst = -1)                                                    \
    X(STUCK_IN_FLIGHT, in_flight, .since_s = -1)                                                   \
    X(MISSING_RANKS, absent, 0)                                                                    \
    X(STUCK_OUTSIDE_NCCL, outside, .since_s = -1)                                                  \
    X(STRAGGLER, straggler, .late_by_s = -1)                                                       \
    X(TRACE_INCOMPLETE, incomplete, 0)

/* What the rank lists and the memory of a kind's data are, for the code that sorts, frees and
 * reads findings whatever their kind (finding.c):
 *
 * L(ID, what, field of union finding_payload): a list of global ranks (struct intvec) of the
 *   kind's data; `what` ORs
 *     F_L_SET      a set: sorted without duplicates by findings_normalize(), freed with the
 *                  finding (a list without it is kept in its order, freed too: the cycle)
 *     F_L_ENDED    the ranks whose end the finding reports or follows (finding_ended())
 *     F_L_ODD      the ranks it singles out, instead of `missing` (finding_singled_out())
 *     F_L_APART    the ranks it names apart by a rule of its own (finding_kind_names_apart())
 *     F_L_COMM     the missing ranks as ranks of the comm (finding_missing_comm_ranks())
 * O(ID, field): memory the kind's data owns (a pointer freed with the finding). */
#define FINDING_LISTS(L)                                                                           \
    L(RANK_CRASHED, F_L_SET | F_L_ENDED, death.dead)                                               \
    L(RANK_EXITED, F_L_SET | F_L_ENDED, death.dead)                                                \
    L(COMM_INIT_MISMATCH, F_L_SET | F_L_COMM, absent.missing_cr)                                   \
    L(COMM_INIT_MISMATCH, F_L_SET, absent.waiting_cr)                                              \
    L(COMM_INIT_MISMATCH, F_L_SET, absent.queued)                                                  \
    L(DEADLOCK_CYCLE, 0, deadlock.cycle)                                                           \
    L(STUCK_IN_FLIGHT, F_L_SET | F_L_APART, in_flight.lagging)                                     \
    L(MISSING_RANKS, F_L_SET | F_L_COMM, absent.missing_cr)                                        \
    L(MISSING_RANKS, F_L_SET, absent.waiting_cr)                                                   \
    L(MISSING_RANKS, F_L_SET, absent.queued)                                                       \
    L(STUCK_OUTSIDE_NCCL, F_L_SET | F_L_ODD, outside.odd)                                          \
    L(STUCK_OUTSIDE_NCCL, F_L_SET | F_L_ENDED, outside.follows)

#define FINDING_OWNED(O)                                                                           \
    O(RANK_CRASHED, death.exception)                                                               \
    O(RANK_EXITED, death.exception)                                                                \
    O(STUCK_IN_FLIGHT, in_flight.gpu)

/* Why a trace_incomplete finding cannot conclude (its JSON `reason`):
 * R(ID, JSON name); R, not X: tests/cli reads the X lines of this file as its kinds */
#define INCOMPLETE_REASONS(R)                                                                      \
    R(UNKNOWN, "unknown")                                                                          \
    R(NO_TRACE, "no_trace")                                                                        \
    R(TRUNCATED, "truncated")                                                                      \
    R(WRAPPED, "wrapped")                                                                          \
    R(NOT_READ, "not_read")                                                                        \
    R(HALF_WRITTEN, "half_written")                                                                \
    R(TABLE_FULL, "table_full")                                                                    \
    R(UNREADABLE, "unreadable")                                                                    \
    R(NCCL_STATIC, "nccl_static")                                                                  \
    R(NCCL_UNSEEN, "nccl_unseen")                                                                  \
    R(GRAPH_CAPTURED, "graph_captured")

enum incomplete_reason {
#define INCOMPLETE_REASON_ENUM(id, name) INC_##id,
    INCOMPLETE_REASONS(INCOMPLETE_REASON_ENUM)
#undef INCOMPLETE_REASON_ENUM
};

/* Which side of a finding a class of ranks is on (struct f_class's `role`, its JSON `role`):
 * R(ID, JSON name). ROLE_NONE has none (null). */
#define CLASS_ROLES(R)                                                                             \
    R(NONE, NULL)                                                                                  \
    R(WAITING, "waiting")                                                                          \
    R(MISSING, "missing")                                                                          \
    R(QUEUED, "queued")                                                                            \
    R(ABORTED, "aborted")                                                                          \
    R(NO_TRACE, "no_trace")                                                                        \
    R(SEND, "send")                                                                                \
    R(RECV, "recv")                                                                                \
    R(WAIT, "wait")                                                                                \
    R(ISSUED, "issued")                                                                            \
    R(CLAIMANT, "claimant")                                                                        \
    R(CALLED, "called")                                                                            \
    R(STUCK, "stuck")                                                                              \
    R(FAILED, "failed")                                                                            \
    R(CREATED, "created")

enum class_role {
#define CLASS_ROLE_ENUM(id, name) ROLE_##id,
    CLASS_ROLES(CLASS_ROLE_ENUM)
#undef CLASS_ROLE_ENUM
};

/* rank_crashed, rank_exited: the ranks that ended one way, and how. */
struct f_death {
    struct intvec dead; /* the ranks that ended this way */
    int signal;         /* rank_crashed: the signal that ended them, -1 none (vanished) */
    int status;         /* rank_exited: their exit status, -1 none */
    int vanished;       /* rank_crashed: they died without an exit record (no signal known) */
    int died_in;        /* the finding's comm/seq name the collective they were blocked in */
    struct f_exception *exception; /* the exception that ended its first rank, NULL none */
};

/* rank_exited/rank_crashed: why its first rank ended, beyond its status (rank_end.h). */
struct f_exception {
    struct rank_end end;
    const char *site;       /* the exception's frame as a symbolizer site, NULL none */
    const char *cause_site; /* the original cause's, NULL none */
};

/* nccl_error: what NCCL returned. */
struct f_nccl_error {
    int result;  /* the ncclResult_t of the failed call */
    int refused; /* NCCL refused the arguments (nothing enqueued) */
};

/* missing_ranks and comm_init_mismatch: ranks absent from a communicator's call or creation
 * (the finding's `missing`), in the communicator's numbering. */
struct f_absent {
    struct intvec missing_cr; /* the missing ranks as ranks of the comm */
    /* missing_ranks alone: */
    struct intvec waiting_cr; /* the waiting ranks as ranks of the comm */
    struct intvec queued;     /* missing ranks that queued #seq in a group they never ended */
    int multi_rank;           /* a process holds several ranks of the comm */
    int en_route; /* some missing ranks are running (in no call, not stopped), every other one
                   * is gone, and the first waiter has waited no longer than the comm's arrival
                   * spread allows: the running ones are late, not stuck (diagnose_missing.c) */
    int alone;    /* only the waiting ranks made it: every missing one finished without it and
                   * they outnumber the waiting ones (the graph's WG_ALONE): the waiting ranks
                   * are the odd ones */
};

/* p2p_unmatched, p2p_size_mismatch: the pair of the send and receive. */
struct f_p2p {
    int src, dst; /* global ranks of the sender and the receiver */
};

/* deadlock_cycle */
struct f_deadlock {
    struct intvec cycle; /* its ranks, in the order each waits for the next */
};

/* stuck_in_flight */
struct f_in_flight {
    double since_s;        /* since the last rank issued the call, -1 unknown */
    struct intvec lagging; /* ranks whose GPU is two or more collectives behind the others */
    struct f_gpu *gpu;     /* GPU progress per rank (profiler plugin) */
    size_t ngpu;
};

/* stuck_in_flight: where one rank's GPU is in the stuck collective, from NCCL's profiler
 * plugin (ls_comm.gpu). */
struct f_gpu {
    int rank, comm_rank;
    uint64_t ch_started, ch_stopped; /* bit c: channel c's kernel started / ended */
    int has_transfer;                /* the fields below are known */
    int channel, step, peer, peer_comm_rank, is_send, state;
    double moved_s_ago; /* since its last kernel or proxy event, -1 unknown */
};

/* stuck_outside_nccl */
struct f_outside {
    double since_s;        /* since the newest NCCL call of any of its ranks, -1 none */
    struct intvec odd;     /* the ranks of the smallest class, when there are several */
    struct intvec follows; /* the rank that ended first, whose end its ranks most likely
                            * follow (one at most) */
};

/* straggler */
struct f_straggler {
    double late_by_s; /* how late it arrived at its worst collective (the finding's seq) */
};

/* trace_incomplete */
struct f_incomplete {
    enum incomplete_reason reason;
    const char *object; /* nccl_static: the object NCCL is linked into (the trace's string),
                         * NULL none */
};

/* struct finding's `as`: the member FINDING_PAYLOADS names for the finding's kind. */
union finding_payload {
    struct f_death death;
    struct f_nccl_error nccl_error;
    struct f_absent absent;
    struct f_p2p p2p;
    struct f_deadlock deadlock;
    struct f_in_flight in_flight;
    struct f_outside outside;
    struct f_straggler straggler;
    struct f_incomplete incomplete;
};

#endif
