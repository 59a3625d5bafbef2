/* live_facts.h -- what `lockstep watch` publishes about a folder while it watches (--metrics:
 * Prometheus text for node_exporter's textfile collector; --status: a JSON file): per job
 * whether it is stalled, since when, its stalls and the first finding of its diagnosis; per
 * communicator (at most LIVE_FACTS_COMMS) its newest collective and how long since it
 * progressed. Both files are replaced whole (file_replace.h). docs/live.md, "watch as a
 * service", and docs/report-format.md, "Status file", describe them. */
#ifndef LOCKSTEP_LIVE_FACTS_H
#define LOCKSTEP_LIVE_FACTS_H

#include "live_facts_types.h"
#include "live_stalled.h"
#include "monitor.h"

/* Gathers the facts of the monitor's last poll and the stalls of `set` into `f`; `slow_comm` is
 * the communicator watch found slow (monitor_find_slow()), 0 none. Returns 0, -1 when out of
 * memory. */
int live_facts_gather(struct live_facts *f, const struct monitor *m,
                      const struct live_stalled_set *set, int up, uint64_t slow_comm);

/* Gathers the facts and replaces the files `metrics_path` and `status_path` (each NULL: not
 * written) with them. Returns 0, or -1 after a message on stderr when one could not be written. */
int live_facts_publish(const char *metrics_path, const char *status_path, const struct monitor *m,
                       const struct live_stalled_set *set, int up, uint64_t slow_comm);

#endif
