/* monitor_jobs.h -- the jobs of a watched folder: which traces belong together (the job id of
 * their headers, else the communicators they share, else the folder), when each job last
 * progressed and what in it is outstanding. One job can hang while another trains on. */
#ifndef LOCKSTEP_MONITOR_JOBS_H
#define LOCKSTEP_MONITOR_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "monitor_types.h"

struct monitor;

/* Regroups the traces of `m` into jobs (sets each trace's `job`): traces with a job id by that
 * id; the others by the communicators they share, and those with neither id nor communicator
 * into one job of the folder. Fills each job's progress and what is outstanding in it (after
 * the communicators' tally). O(traces + entries). Returns 0, -1 when out of memory. */
int mon_jobs_group(struct monitor *m);

/* Frees the jobs; the list is empty and usable again. */
void mon_jobs_free(struct mon_jobs *j);

#endif
