/* cause.h -- one job's roots and consequences while diagnose_cause.c works them out, and what a
 * finding kind's row (finding_ops.h) may ask of it: which ranks a finding owns or blames, the
 * graph's nodes it starts from, the findings beside it. Below the passes, which define the rows,
 * and below diagnose_cause.c, which asks the rows. */
#ifndef LOCKSTEP_CAUSE_H
#define LOCKSTEP_CAUSE_H

#include <stddef.h>
#include <stdint.h>

#include "finding.h"
#include "intvec.h"
#include "waitgraph.h"

struct diag;

/* How well a finding says why others wait for a rank it blames (cause_blame()): of the findings
 * that blame one rank, the best says it (docs/analyzer.md, "What makes a root cause"); among
 * equals, the one on the communicator the rank was about to call, then the earliest. */
enum blame_score {
    BLAME_ELSEWHERE = 1, /* a collective that also waits for ranks blocked elsewhere */
    BLAME_PLAIN = 2,     /* a send or receive it never posted */
    BLAME_CREATION = 3,  /* a communicator's creation it never joined */
    BLAME_LEAF = 4,      /* a collective it never called, that waits for nothing that waits */
};

/* How directly a finding says why a sink is stuck (finding_ops.owns): the highest owns it. */
enum own_score {
    OWN_NOT = 0,   /* it says nothing of that sink */
    OWN_LAST = 1,  /* only when no other finding does: a rank whose trace is missing */
    OWN_NAMED = 2, /* it names the sink: its call, a rank it says never came */
    OWN_FIRST = 3, /* before any other that names it: a rank another process claimed */
};

/* Per global rank, the findings that can own its node when it is a sink. */
struct rank_findings {
    long own;                     /* its own end, failure or abort (the earliest), -1 none */
    long blame;                   /* the finding that says others wait for it (the best), -1 none */
    enum blame_score blame_score; /* ... how well */
};

struct cause {
    struct diag *d;
    struct findings *fs;
    size_t first;
    const struct waitgraph *g;
    const struct m_job *j;
    long *owner;                   /* per component: the finding that owns it, -1 none */
    char *teardown;                /* per component: owned through the job's teardown (a rank it
                                    * stopped: owner_of_stopped()), not as the owner's own */
    size_t *reach;                 /* per component: the sink its waits end in */
    char *waited;                  /* per node: some wait that is not soft ends at it */
    struct rank_findings *by_rank; /* world_size slots */
    int nranks;
    char *went_on; /* per finding from first: about a part the diagnosis is not narrowed to
                    * (diag_scope), NULL when it is not narrowed */
};

/* Finding i of the list; the findings of the job being worked out are [first, fs->n). */
struct finding *cause_finding(const struct cause *x, long i);

/* True when finding i may own a sink or take the blame for a rank: it is about the part of the
 * job the diagnosis is narrowed to (diag_scope), or the diagnosis is not narrowed. */
int cause_in_scope(const struct cause *x, long i);

/* Finding i reports global rank r's own end, failure or abort (the earliest such owns it). */
void cause_own(struct cause *x, int r, long i);
/* Finding i says others wait for global rank r, this well. */
void cause_blame(struct cause *x, int r, long i, enum blame_score how);
/* cause_own() and cause_blame() for every rank of a list. */
void cause_own_ranks(struct cause *x, const struct intvec *ranks, long i);
void cause_blame_ranks(struct cause *x, const struct intvec *ranks, long i, enum blame_score how);

/* The first finding of `kind` at (comm, seq) about the part the diagnosis is narrowed to, -1
 * none. */
long cause_finding_at(const struct cause *x, enum finding_kind kind, uint64_t comm, uint64_t seq);

/* The call node `node` of the graph when it is f's call (f's comm and seq), else NULL. */
const struct wg_node *cause_call_at(const struct cause *x, const struct finding *f, size_t node);
/* True when `node` is a rank no trace holds that f names missing (by its global rank, else by
 * its rank in f's comm). */
int cause_names_absent(const struct cause *x, const struct finding *f, size_t node);

/* Writes into out[0..max) the graph's nodes of the global ranks in `ranks` (those it has);
 * returns how many. */
size_t cause_anchor_ranks(const struct cause *x, const struct intvec *ranks, size_t *out,
                          size_t max);
/* Writes into out[0..max) the node of collective (comm, seq) when some rank waits in it; returns
 * how many (0 or 1). */
size_t cause_anchor_call(const struct cause *x, uint64_t comm, uint64_t seq, size_t *out,
                         size_t max);

#endif
