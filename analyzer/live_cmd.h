/* live_cmd.h -- what `lockstep run` and `lockstep watch` share: the stall diagnosis of a
 * running job, CI annotations, and stopping the job. */
#ifndef LOCKSTEP_LIVE_CMD_H
#define LOCKSTEP_LIVE_CMD_H

#include <stdio.h>
#include <sys/types.h>

#include "monitor.h"

struct live_opts {
    double stall_s;        /* no progress for this long while something is outstanding */
    const char *json_path; /* also write the JSON report here, NULL: no */
    int github;            /* also print ::error annotations at the divergent call sites */
};

/* Parses a --stall/--json/--format option at argv[*i] into `o`, advancing *i past its value.
 * Returns 1 when it was one of those, 0 when not, -1 (after a message) when its value is
 * wrong. */
int live_parse_option(struct live_opts *o, int argc, char **argv, int *i);

/* Diagnoses the traces in `dir`: probes the ranks still running here when `probe` is set,
 * prints the report (text, github annotations) on stdout when `print` is set, and writes the
 * JSON file. Returns the number of findings, or -1 when the traces could not be analyzed. */
int live_diagnose(const char *dir, const struct live_opts *o, int probe, int print);

/* Stops the job: SIGTERM (and SIGCONT, for stopped ones) to process group `pgid` (if > 0) and
 * to every traced process still running here, SIGKILL to what is left after `grace_s`. */
void live_stop(struct monitor *m, pid_t pgid, double grace_s);

/* Sleeps `ms` milliseconds (signals may end it early). */
void live_sleep_ms(int ms);

#endif
