/* waitgraph_types.h -- the wait-for graph's nodes, edges and components (waitgraph.h): below
 * both its building (waitgraph.c) and its components (waitgraph_scc.c). */
#ifndef LOCKSTEP_WAITGRAPH_TYPES_H
#define LOCKSTEP_WAITGRAPH_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "model_types.h"

/* Nodes: ranks (one per process of the job), ranks or communicator members no trace holds, and
 * the calls ranks wait in (a collective, the creation of a communicator, a send/receive pair
 * whose halves do not fit). */
enum wg_node_kind { WG_RANK, WG_ABSENT, WG_CALL };

enum wg_call_kind {
    WG_CALL_COLL,     /* collective #seq of comm */
    WG_CALL_INIT,     /* the creation of comm (InitRank family), or a split of comm (seq: its
                       * parent split counter) */
    WG_CALL_P2P,      /* send/receive #seq of comm between two comm ranks whose halves differ */
    WG_CALL_TEARDOWN, /* the finalize/destroy of comm, which from NCCL 2.31 on waits for every
                       * member to come to it */
};

/* Why a node waits for nothing (a terminal), or WG_WAITS. */
enum wg_state {
    WG_WAITS,      /* it has edges: a rank blocked in a call, a call some members never reached */
    WG_RUNNING,    /* a rank alive outside NCCL (busy or sleeping), or in a call every member
                    * reached */
    WG_STOPPED,    /* a rank alive but stopped (SIGSTOP, a debugger, a suspended job) */
    WG_DEAD,       /* a rank that ended (exit, signal, vanished) while waiting for nothing */
    WG_NO_TRACE,   /* a rank (or member) no trace holds: it never reached NCCL, or its trace is
                    * gone */
    WG_MISMATCH,   /* a call whose members called different things: it can never complete */
    WG_GPU_STUCK,  /* a collective every member issued and no GPU completed */
    WG_COMPLETING, /* a call every member reached as called: nothing to wait for */
    WG_ALONE,      /* a collective or child creation only its waiters made: every other
                    * member finished (exited 0) without it or waits for its waiters, and the
                    * finished outnumber the waiters; it can never complete */
    WG_STATE_COUNT
};

enum wg_edge_kind {
    WG_E_COLL,     /* rank -> call: inside the collective (or its call failed while waiting) */
    WG_E_GPU,      /* rank -> call: its GPU stream waits for the collective */
    WG_E_INIT,     /* rank -> call: inside the creation (or split) of a communicator */
    WG_E_SEND,     /* rank -> rank: a send whose receive was never posted */
    WG_E_RECV,     /* rank -> rank: a receive whose send was never posted */
    WG_E_P2P,      /* rank -> call: a send/receive whose other half does not fit */
    WG_E_MEMBER,   /* call -> rank: a member that never called it */
    WG_E_QUEUED,   /* call -> rank: a member that queued it in a group it never ended */
    WG_E_ABORTED,  /* call -> rank: a member that aborted (or revoked) the communicator instead */
    WG_E_UNJOINED, /* call -> rank: a member that never joined the communicator's creation */
    WG_E_DIED_IN,  /* call -> rank: a member that reached it and died inside it */
    WG_E_REMOTE,   /* rank -> rank: its call failed after that peer ended */
    WG_E_STREAM,   /* call -> rank: a member whose GPU stream holds older work not completed,
                    * which the collective queues behind */
    WG_E_SIGNAL,   /* rank -> rank: a wait for signals (ncclWaitSignal) from that peer that
                    * have not come: never sent, or not yet run on the peer's GPU */
    WG_EDGE_COUNT
};

struct wg_edge {
    size_t from, to;
    uint8_t kind;                 /* enum wg_edge_kind */
    uint8_t soft;                 /* the target is only on its way (en route): not followed */
    uint8_t went_on;              /* soft because the job's stop, after a hang elsewhere, caught
                                   * the target on its way (settle_went_on()): under way */
    int comm_rank;                /* the target's rank in the call's communicator, -1 none */
    const struct ls_record *call; /* rank -> x: the waiting rank's record of the call */
};

struct wg_node {
    uint8_t kind;                 /* enum wg_node_kind */
    uint8_t state;                /* enum wg_state */
    uint8_t call_kind;            /* WG_CALL: enum wg_call_kind */
    uint8_t waits_on_members;     /* WG_CALL collective: it waits for members that never reached
                                   * it, or queued it behind stuck work on their stream (not only
                                   * for members that died inside it) */
    uint8_t en_route;             /* WG_CALL collective: some absent members are running, every
                                   * other absent one is gone, and the first waiter has waited no
                                   * longer than the comm's ranks usually take to gather */
    int rank;                     /* WG_RANK, WG_ABSENT: the global rank, -1 unknown */
    int comm_rank;                /* WG_ABSENT without a global rank: its rank in `comm`;
                                   * WG_CALL_P2P: the sender's comm rank */
    int peer_rank;                /* WG_CALL_P2P: the receiver's comm rank */
    const struct m_proc *proc;    /* WG_RANK */
    uint64_t comm, seq;           /* WG_CALL, WG_ABSENT (the comm that expects it) */
    const struct ls_record *call; /* WG_CALL: the first waiter's record of it */
    uint64_t since_ns;            /* when it began to wait or stopped waiting (entered, died,
                                   * left NCCL); 0 unknown */
    size_t edge0, nedges;         /* its out edges: edges[edge0 .. edge0 + nedges) */
    size_t scc;                   /* its strongly connected component */
};

/* A strongly connected component. A sink has no edge out of it: a root cause. */
/* Most ranks a cycle that is no deadlock may come back to (wg_scc.hubs). */
#define WG_MAX_HUBS 16

struct wg_scc {
    size_t node0, nnodes;     /* its nodes: members[node0 .. node0 + nnodes) */
    size_t nranks;            /* WG_RANK nodes among them */
    uint8_t sink;             /* no edge leaves it (soft edges aside) */
    uint8_t cycle;            /* ranks wait on each other around it (two ranks or more, or one rank
                               * waiting for itself) */
    size_t behind;            /* a cycle that is no deadlock, (size_t)-1 none: the collective node
                               * of it whose missing members are behind their peers (they went into
                               * a creation before a collective the others make: waitgraph_scc.c,
                               * out_of_order()), or the rank node every cycle of it passes through
                               * (it skipped an exchange its neighbours wait in: hub_rank()), the
                               * first of hubs[] */
    size_t hubs[WG_MAX_HUBS]; /* the rank nodes every cycle passes through one of (hub_rank(),
                               * hub_ranks()): ranks that skipped an exchange; 0 when behind is
                               * none or a collective */
    size_t nhubs;
};

struct waitgraph {
    const struct model *m;
    size_t job;
    struct wg_node *nodes; /* nodes[0 .. job.nprocs) are the ranks, in job.procs order */
    size_t nnodes;
    struct wg_edge *edges; /* ascending `from` */
    size_t nedges;
    struct wg_scc *sccs; /* in reverse topological order: a component comes after every one it
                          * reaches, so sinks come first */
    size_t nsccs;
    size_t *members;    /* node indexes grouped by component */
    struct idmap index; /* absent and call nodes by key */
    long *roots;        /* per component: the root finding its waits end in (an index into the
                         * diagnosis's findings), -1 none; set by the diagnosis (diagnose_causes()),
                         * NULL before */
};

#endif
