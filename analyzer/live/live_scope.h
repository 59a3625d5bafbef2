/* live_scope.h -- narrows the live diagnosis of a partial stall to the part that stalled. While
 * the rest of a job trains on, the snapshot catches a healthy communicator's members a few
 * microseconds apart; that is neither a missing rank nor a root cause. The diagnosis is the one
 * `analyze` runs, told the scope (live_scope_of()) so that such a finding owns no sink and takes
 * no blame; live_scope_narrow() then drops it from what is shown. */
#ifndef LOCKSTEP_LIVE_SCOPE_H
#define LOCKSTEP_LIVE_SCOPE_H

#include "analysis.h"
#include "monitor_stall.h"

/* Drops from a->fs the findings about a communicator that kept progressing after the stalled part
 * of `s` stopped, and those whose every rank's trace progressed then; a finding that followed from
 * a dropped one follows from what that one followed from (or is a root), and every consequence_of
 * is renumbered. Jobs whose every trace progressed then, and that keep no finding, are no longer
 * among the jobs the report shows (one is always kept). A whole stall (nothing progressed) drops
 * nothing. Returns the number of findings dropped, -1 when out of memory (nothing changed). */
int live_scope_narrow(struct analysis *a, const struct mon_stall *s);

/* The scope of stall `s` for the diagnosis (diag_scope): what live_scope_narrow() drops went on
 * meanwhile, and is no one's cause. NULL when `s` is NULL or a whole stall. `*buf` holds it. */
const struct diag_scope *live_scope_of(const struct mon_stall *s, struct diag_scope *buf);

#endif
