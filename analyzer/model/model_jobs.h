/* model_jobs.h -- the model's jobs and their attempts (model_jobs.c): above the rank states,
 * below the model's building (model.c). */
#ifndef LOCKSTEP_MODEL_JOBS_H
#define LOCKSTEP_MODEL_JOBS_H

#include "model_types.h"

/* One m_job per attempt of each job id, procs[].job set. Returns 0, or -1 when out of memory. */
int model_assign_jobs(struct model *m);

#endif
