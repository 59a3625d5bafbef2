/* finding.h -- one diagnosis finding (a JSON `kind` of DESIGN.md) and the list of them. */
#ifndef LOCKSTEP_FINDING_H
#define LOCKSTEP_FINDING_H

#include <stddef.h>
#include <stdint.h>

#include "intvec.h"

#include "finding_kinds.h"
#include "rank_end.h"

/* Kinds, generated from finding_kinds.h (one list: names, severity, priority, traits). */
enum finding_kind {
#define F_KIND_ENUM(id, ...) F_##id,
    FINDING_KINDS(F_KIND_ENUM)
#undef F_KIND_ENUM
        F_KIND_COUNT
};

enum finding_severity { F_SEV_ERROR, F_SEV_WARN };

/* Traits of a kind (finding_kinds.h). */
enum { F_T_DEATH = 1, F_T_MISMATCH = 2, F_T_TIMELINE = 4 };

/* A group of ranks that did the same thing from the same place (STAT-style). `role` says
 * which side of the finding they are on ("called", "waiting", "missing"). */
struct f_class {
    struct intvec ranks;
    struct intvec comm_ranks; /* the members' ranks in the communicator (missing_ranks), where
                               * one process may hold several */
    const char *role;
    int has_call; /* the fields below describe a call */
    int op, dtype, redop, root;
    uint64_t count, seq;
    uint64_t comm;
    const char *callsite;           /* owned by the symbolizer */
    const struct tr_pysite *python; /* the Python stack of the first rank's call, or NULL */
    const char *state;              /* rank state name, NULL if not relevant */
    double seconds_ago; /* since the call was entered (or the rank was last seen), < 0 none */
    int pid;            /* duplicate_rank: the claimant process, 0 none */
    const char *host;   /* ... and its host (the trace's), NULL none */
    /* stuck_outside_nccl: where the ranks of the class wait, from their live stacks */
    char where[192];  /* the innermost frame of the program ("prepare_data (data.py:56)"), "" */
    char blocked[64]; /* what it blocks in, in words ("a socket read"), "" */
    char thread[24];  /* the waiting thread's name when it is not the main thread, "" */
    double cpu_share; /* the most CPU a rank of the class used while probed (of one CPU) */
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

/* rank_exited/rank_crashed: why its first rank ended, beyond its status (rank_end.h). */
struct f_exception {
    struct rank_end end;
    const char *site;       /* the exception's frame as a symbolizer site, NULL none */
    const char *cause_site; /* the original cause's, NULL none */
};

/* A kind's own data, in struct finding's `as` (tag: its kind; finding_kinds.h says which kind
 * has which). A new kind with fields of its own adds its struct here rather than reuse another
 * kind's; finding_add() sets its defaults, finding_free() and findings_normalize() its lists. */
struct f_in_flight {       /* stuck_in_flight */
    double since_s;        /* since the last rank issued the call, -1 unknown */
    struct intvec lagging; /* ranks whose GPU is two or more collectives behind the others */
    struct f_gpu *gpu;     /* GPU progress per rank (profiler plugin) */
    size_t ngpu;
};
struct f_outside {     /* stuck_outside_nccl */
    double since_s;    /* since the newest NCCL call of any of its ranks, -1 none */
    struct intvec odd; /* the ranks of the smallest class, when there are several */
};
struct f_straggler {  /* straggler */
    double late_by_s; /* how late it arrived at its worst collective (the finding's seq) */
};

struct finding {
    enum finding_kind kind;
    size_t job;
    char *summary;  /* one line */
    char **details; /* further lines for the text report */
    size_t ndetails;
    struct intvec ranks; /* every global rank involved */
    int has_comm, has_seq;
    uint64_t comm, seq;
    uint64_t time_ns;   /* when it happened, for ordering; 0 unknown */
    int consequence_of; /* index of the finding this one follows from, -1 none */
    struct f_class *classes;
    size_t nclasses;
    struct intvec missing, waiting, cycle;
    struct intvec dead;   /* rank_crashed/rank_exited: the ranks that ended this way */
    struct intvec queued; /* missing_ranks: missing ranks that queued #seq in a group they never
                           * ended */
    struct intvec missing_cr, waiting_cr; /* missing_ranks: the same as comm ranks */
    int multi_rank; /* missing_ranks: a process holds several ranks of the comm */
    int en_route;   /* missing_ranks: some missing ranks are running (in no call, not
                     * stopped), every other one is gone, and the first waiter has waited no
                     * longer than the comm's arrival spread allows: the running ones are late,
                     * not stuck (diagnose_missing.c) */
    int died_in;    /* rank_*: comm/seq name the collective they were blocked in */
    int refused;    /* nccl_error: NCCL refused the arguments (nothing enqueued) */
    int rank, src, dst, signal, status, result; /* -1 where not relevant */
    int vanished;       /* rank_crashed without a recorded signal */
    const char *reason; /* trace_incomplete: no_trace, truncated, wrapped, ... */
    const char *object; /* trace_incomplete nccl_static: the object NCCL is linked into (the
                         * trace's string), NULL none */
    struct f_exception *exception; /* rank_*: the exception that ended its ranks, NULL none */
    union {                        /* the kind's own data: the member finding_kinds.h names */
        struct f_in_flight in_flight;
        struct f_outside outside;
        struct f_straggler straggler;
    } as;
};

struct findings {
    struct finding *v;
    size_t n, cap;
};

/* What a proxy step in NCCL state `state` waits for: "recv_data", "send_credit", ... (the
 * JSON `waiting_for` of gpu_progress). */
const char *finding_gpu_wait_name(int state, int is_send);
/* The same in words around the peer's global rank ("waiting for rank 5 to free a buffer ..."). */
void finding_gpu_wait_words(int state, int is_send, int peer, char *buf, size_t len);

/* JSON name of a kind ("missing_ranks", ...); "?" for a value that is not a kind. */
const char *finding_kind_name(enum finding_kind k);
/* F_SEV_ERROR or F_SEV_WARN (finding_kinds.h); F_SEV_ERROR for a value that is not a kind. */
enum finding_severity finding_kind_severity(enum finding_kind k);
/* The root-cause priority of a kind: lower comes first among roots at the same depth. */
int finding_kind_priority(enum finding_kind k);
/* True when the kind has every trait in `traits` (F_T_*). */
int finding_kind_has(enum finding_kind k, unsigned traits);
/* For a mismatch kind, what its ranks' calls differ in ("different counts"); NULL otherwise. */
const char *finding_kind_differs(enum finding_kind k);

/* The ranks f singles out from the others by its kind: those missing (missing_ranks,
 * comm_init_mismatch, p2p_unmatched; duplicate_rank's unclaimed ones), stuck_outside_nccl's
 * odd class. Never NULL: an empty list where the kind singles out none. */
const struct intvec *finding_singled_out(const struct finding *f);
/* The ranks a kind names apart by its own rule (report format 2's rank_detail): stuck_in_flight
 * its lagging ranks; NULL for the kinds that follow the common rule (their ranks less those
 * they say wait and less their largest class). */
const struct intvec *finding_kind_names_apart(const struct finding *f);

/* Appends a new finding of `kind` with every optional field unset. Returns it, or NULL when
 * out of memory. The pointer is valid until the next finding_add(). */
struct finding *finding_add(struct findings *fs, enum finding_kind kind, size_t job);

/* Sets the summary (printf-style), replacing any. */
void finding_summary(struct finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends one detail line (printf-style). Lines that cannot be allocated are dropped. */
void finding_detail(struct finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds rank r to the class equal to `key` (all fields but ranks compared), creating it.
 * Returns 0, or -1 when out of memory. */
int finding_class_add(struct finding *f, const struct f_class *key, int rank);

/* finding_class_add() that also records the member's rank in the communicator. */
int finding_class_add_member(struct finding *f, const struct f_class *key, int rank, int comm_rank);

/* Where in the program a class's ranks are, as "file:line (function)": the call site of their
 * call, else where they wait (stuck_outside_nccl); NULL none. */
const char *finding_class_site(const struct f_class *c);

/* The places in the program the CI formats annotate for f: the line that raised the exception
 * that ended its rank (rank_exited/rank_crashed with one), else each class's site. Returns how
 * many there are; finding_site() gives place i (NULL: that class has none). */
size_t finding_nsites(const struct finding *f);
const char *finding_site(const struct finding *f, size_t i);

/* Frees what one finding owns (its text, classes and rank lists) and zeroes it; the finding
 * itself is its list's. */
void finding_free(struct finding *f);

/* Frees every finding and empties the list. */
void findings_free(struct findings *fs);

/* Sorts the ranks of every finding and class ascending, without duplicates. */
void findings_normalize(struct findings *fs);

#endif
