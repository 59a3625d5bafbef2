/* export_perfetto.h -- writes the recorded calls as Chrome trace events (ui.perfetto.dev). */
#ifndef LOCKSTEP_EXPORT_PERFETTO_H
#define LOCKSTEP_EXPORT_PERFETTO_H

#include <stdio.h>

#include "report.h"

/* Writes the jobs `in` selects as one Chrome trace event JSON object ("traceEvents"): a
 * process per rank, a track per communicator, a complete slice per call (calls in flight drawn
 * to the job's reference time and marked), flow arrows from each send to its receive, and the
 * findings as instant events on the ranks they name. Times are microseconds since the job's
 * earliest record (docs/pictures.md). Returns 0, or -1 when out of memory (the output is then
 * incomplete); stream errors are the stream's. */
int export_perfetto(FILE *out, const struct report_input *in);

#endif
