/* diagnose.h -- turns the job model into findings, root cause first. One pass per concept
 * (diagnose_*.c, with what they get in diagnose_pass.h); diagnose.c runs them and orders the
 * result. */
#ifndef LOCKSTEP_DIAGNOSE_H
#define LOCKSTEP_DIAGNOSE_H

#include <stddef.h>

#include "diagnose_pass.h"
#include "finding.h"
#include "waitgraph.h"

/* Options of a diagnosis of the whole job (its thresholds are the model's). This function can't
 * fail. */
struct diag_options diag_default_options(void);

/* Diagnoses job `job` of the model and appends its findings to `out`, root cause first,
 * consequences marked with consequence_of (indexes into `out`). Returns 0, or -1 when out of
 * memory (findings added so far stay in `out`). */
int diagnose_job(const struct model *m, size_t job, struct symbolizer *sym,
                 const struct diag_options *opt, struct findings *out);

/* diagnose_job() that also hands back the job's wait-for graph in *graph (the caller frees it
 * with waitgraph_free()); *graph is NULL when -1 is returned. */
int diagnose_job_graph(const struct model *m, size_t job, struct symbolizer *sym,
                       const struct diag_options *opt, struct findings *out,
                       struct waitgraph **graph);

/* Appends a trace_incomplete finding for a file that could not be read (job unknown). Returns
 * 0, or -1 when out of memory. */
int diagnose_unreadable(struct findings *out, const char *error);

/* Sorts fs->v[first..] root cause first (consequences after what they follow from), keeping
 * consequence_of (and the graph's roots, when g is not NULL) pointing at the same findings. */
void diagnose_order(struct findings *fs, size_t first, struct waitgraph *g);

#endif
