/* finding.h -- one diagnosis finding (a JSON `kind` of DESIGN.md) and the list of them. */
#ifndef LOCKSTEP_FINDING_H
#define LOCKSTEP_FINDING_H

#include <stddef.h>
#include <stdint.h>

#include "intvec.h"

#include "finding_kinds.h"

/* Kinds, generated from finding_kinds.h (one list: names, severity, priority, traits). */
enum finding_kind {
#define F_KIND_ENUM(id, ...) F_##id,
    FINDING_KINDS(F_KIND_ENUM)
#undef F_KIND_ENUM
        F_KIND_COUNT
};

enum finding_severity { F_SEV_ERROR, F_SEV_WARN };

/* Traits of a kind (finding_kinds.h). */
enum { F_T_DEATH = 1, F_T_MISMATCH = 2, F_T_TIMELINE = 4, F_T_FAILED_AT = 8 };

/* What a rank list of a kind's data is (FINDING_LISTS, finding_kinds.h). */
enum { F_L_SET = 1, F_L_ENDED = 2, F_L_ODD = 4, F_L_APART = 8, F_L_COMM = 16 };

/* duplicate_rank: a process that claimed the rank (a class per claimant). */
struct fc_claimant {
    int pid;          /* the claimant process, 0 none */
    const char *host; /* ... and its host (the trace's), NULL none */
};

/* stuck_outside_nccl: where the ranks of a class wait, from their live stacks. */
struct fc_outside {
    char where[192];  /* the innermost frame of the program ("prepare_data (data.py:56)"), "" */
    char blocked[64]; /* what it blocks in, in words ("a socket read"), "" */
    char thread[24];  /* the waiting thread's name when it is not the main thread, "" */
    double cpu_share; /* the most CPU a rank of the class used while probed (of one CPU) */
};

/* A group of ranks that did the same thing from the same place (STAT-style). `role` says
 * which side of the finding they are on (called, waiting, missing: finding_kinds.h). */
struct f_class {
    struct intvec ranks;
    struct intvec comm_ranks; /* the members' ranks in the communicator (missing_ranks), where
                               * one process may hold several */
    enum class_role role;
    int has_call; /* the fields below describe a call */
    int op, dtype, redop, root;
    uint64_t count, seq;
    uint64_t comm;
    int config;             /* issued through its nccl*Config twin with a config (2.31+) */
    uint64_t user_tag;      /* ... the config's userProfilerTag, 0 none */
    const char *cta_policy; /* ... its CTA policy ("zero"), NULL unset */
    int signals;            /* a one-sided call: the signals below mean something */
    unsigned signal_count;  /* signals it puts or waits for */
    int signal_index, signal_ctx;
    unsigned replay_launch;   /* replayed by this launch of a CUDA graph (from 1), 0 not */
    const char *capture_site; /* ... where the graph captured it (the symbolizer's), NULL unknown */
    const char *callsite;     /* owned by the symbolizer */
    const struct tr_pysite *python; /* the Python stack of the first rank's call, or NULL */
    const char *state;              /* rank state name, NULL if not relevant */
    double seconds_ago; /* since the call was entered (or the rank was last seen), < 0 none */
    /* the parts only one kind's classes fill (zero in every other class): */
    struct fc_claimant claimant; /* duplicate_rank */
    struct fc_outside outside;   /* stuck_outside_nccl */
};

/* One finding: a common part every kind has (what the report writers, the ordering and the
 * wait-for graph read whatever the kind), and in `as` the data of its kind alone. A field is
 * common only where it means one thing for every kind that fills it; a kind's own data goes in
 * its payload (finding_kinds.h), never in a field of another kind's. */
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
    int history;        /* a failure the job recovered from: it replaced the communicators
                         * after it, completed collectives on them, and nothing waits for it
                         * now (diagnose_cause.c); reported after every finding of the present */
    struct f_class *classes;
    size_t nclasses;
    /* filled by several kinds, read by the wait-for graph (diagnose_cause.c), the HTML and
     * live's culprits whatever the kind: */
    struct intvec missing;    /* ranks it says the others wait for (missing_ranks,
                               * comm_init_mismatch, p2p_unmatched; duplicate_rank's unclaimed) */
    struct intvec waiting;    /* ranks it says wait for those (or for its dead, its aborted rank) */
    int rank;                 /* the one rank it is about (a death's first, the aborting rank, the
                               * duplicate, the straggler, a failed call's or an incomplete
                               * trace's when one), -1 none */
    union finding_payload as; /* its kind's own data: FINDING_PAYLOADS (finding_kinds.h) names
                               * the member */
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

/* JSON name of a trace_incomplete reason ("no_trace", ...); "unknown" for another value. */
const char *finding_reason_name(enum incomplete_reason r);
/* JSON name of a class role ("waiting", ...); NULL for ROLE_NONE or another value. */
const char *finding_role_name(enum class_role r);

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

/* A death's data (rank_crashed, rank_exited: as.death); NULL for a finding of another kind. */
const struct f_death *finding_death(const struct finding *f);
/* The ranks whose end f reports (a death: those that ended so) or follows from
 * (stuck_outside_nccl: the rank that ended first). Never NULL: empty for the other kinds. */
const struct intvec *finding_ended(const struct finding *f);
/* The missing ranks as ranks of the comm (missing_ranks, comm_init_mismatch: as.absent). Never
 * NULL: empty for the other kinds. */
const struct intvec *finding_missing_comm_ranks(const struct finding *f);

/* Appends a new finding of `kind` with every optional field unset (its payload's as
 * FINDING_PAYLOADS says). Returns it, or NULL when
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
