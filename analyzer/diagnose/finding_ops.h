/* finding_ops.h -- what each finding kind does, beside its facts (finding_kinds.h): one row of
 * functions per kind, kept by the pass that makes the kind (diagnose_missing.c keeps
 * missing_ranks'), named by the last column of its FINDING_KINDS line. Every question the rest of
 * the analyzer asks about a kind's behaviour goes through its row: its place in the wait-for
 * graph (diagnose_cause.c), its JSON keys (report_json.c), its words where first failures are
 * compared (diagnose_first_failure.c). What its data's rank lists and memory are is a fact, not
 * a function: FINDING_LISTS and FINDING_OWNED (finding_kinds.h), read by finding.c.
 *
 * A NULL member answers with the common rule its comment gives, so a kind fills only what is
 * its own. The graph functions see diagnose_cause.c's work only through cause.h.
 *
 * finding_rows.c holds the table of rows, apart from this header: the passes include this one
 * to define their rows, and the table needs the passes. */
#ifndef LOCKSTEP_FINDING_OPS_H
#define LOCKSTEP_FINDING_OPS_H

#include <stddef.h>

#include "finding.h"

struct cause; /* cause.h: one job's roots and consequences being worked out */
struct json_writer;

struct finding_ops {
    /* ---- the wait-for graph (diagnose_cause.c, through cause.h) ---- */

    /* Tells the cause which ranks finding i (f) is about: cause_own() for a rank whose own end,
     * failure or abort it reports, cause_blame() for a rank it says others wait for (and how
     * well it says it). f may get a detail line. NULL: none. */
    void (*note)(struct cause *x, long i, struct finding *f);
    /* Whether f says why sink `node` of the graph is stuck: a call node (wg_node.state says
     * how it is stuck: members that differ, one only its waiters made, a GPU that stopped) or
     * an absent rank's node that some wait ends at: how directly (enum own_score, cause.h; the
     * highest owns the sink, among equals the earliest). NULL: it owns none. A cycle's owner and a
     * rank's (the note()s) are diagnose_cause.c's rules. */
    int (*owns)(const struct cause *x, const struct finding *f, size_t node);
    /* The nodes f is about, where its waits start (cause_anchor_ranks(), cause_anchor_call()),
     * up to max; returns how many. NULL: none (it follows from nothing the graph shows). */
    size_t (*anchors)(const struct cause *x, const struct finding *f, size_t *out, size_t max);

    /* ---- its report ---- */

    /* Writes its own keys into the finding's JSON object (docs/report-format.md, the table of
     * kinds). NULL: none. */
    void (*json)(struct json_writer *w, const struct finding *f);
    /* What its rank met, in a word or two ("SIGSEGV", "exit (status 1)", "ncclRemoteError");
     * an exception that ended a death's rank is named before this is asked. NULL: the kind's
     * name. */
    void (*failure)(const struct finding *f, char *buf, size_t len);
};

/* Every kind's row, declared from FINDING_KINDS' last column. */
#define F_OPS_DECLARE(id, name, sev, prio, traits, differs, ops)                                   \
    extern const struct finding_ops ops;
FINDING_KINDS(F_OPS_DECLARE)
#undef F_OPS_DECLARE

/* ---- the table (finding_rows.c) ---- */

/* The row of kind k (a row of NULLs for a value that is not a kind). */
const struct finding_ops *finding_ops(enum finding_kind k);

/* Writes f's own keys into its JSON object, as its kind's row says. */
void finding_write_own(struct json_writer *w, const struct finding *f);

/* What finding f's rank met, in a word or two ("ValueError", "exit (status 1)", "SIGSEGV",
 * "ncclRemoteError"): the exception that ended a death's rank, else its row's words, else the
 * kind's name. */
void finding_failure_words(const struct finding *f, char *buf, size_t len);

#endif
