/* model_state.h -- what each rank of the model is doing (model_state.c): rank states, the order
 * the dead died, and what a record's completion says. Below the jobs and the model's building. */
#ifndef LOCKSTEP_MODEL_STATE_H
#define LOCKSTEP_MODEL_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "model_types.h"

/* Decides (again) what every rank is doing and in what order the dead died: after live facts
 * were attached to the processes (analysis.c), their snapshot counts. Returns 0, or -1 when
 * out of memory. model_build() calls it once. */
int model_state_build(struct model *m);

/* Returns the GroupEnd record of group `group_id` of process p, or NULL when the process has
 * not reached it (or it was overwritten). */
const struct ls_record *model_group_end(const struct m_proc *p, uint64_t group_id);

/* True when record r of process p has completed: it returned and, inside a group, the
 * group's GroupEnd returned too. */
int model_op_complete(const struct m_proc *p, const struct ls_record *r);

/* True when the completion of r on the GPU is tracked (CUDA events on its stream): then
 * returning from the call is not enough to be complete. */
int model_gpu_tracked(const struct m_proc *p, const struct ls_record *r);

/* True when record r has been handed to NCCL: issued outside a group, or the process has
 * entered its group's GroupEnd. */
int model_op_launched(const struct m_proc *p, const struct ls_record *r);

/* Fills `out` (up to max) with the collective/p2p/init records process p is blocked on: its
 * in-flight call, or every op of the group whose GroupEnd it is in. Returns how many. */
size_t model_blocked_ops(const struct m_proc *p, const struct ls_record **out, size_t max);

/* Fills `out` (up to max) with the creation records of p's nonblocking communicators whose
 * creation has not completed (ls_comm_creation_pending()) and whose call returned: p waits on
 * the members that have not joined while it polls outside NCCL. For a process that ended, those
 * it aborted or destroyed before they completed: the wait it gave up on (its end follows from
 * what that wait was for). Returns how many. */
size_t model_pending_creations(const struct m_proc *p, const struct ls_record **out, size_t max);

/* Name of a rank state ("in_call", "idle", "exited", "crashed", "vanished"). */
const char *model_state_name(enum rank_state s);

/* True when the process is alive (in a call or idle; stopped counts as alive). */
int model_alive(const struct m_proc *p);

/* True when the process is alive, or was stopped with the job (stopped_with_job): a launcher
 * or scheduler killing the ranks of a job that had already failed or hung. The diagnosis
 * treats such a rank as still doing what it did when killed. */
int model_was_running(const struct m_proc *p);

/* Whether the thread of process p that made its last call was on the CPU up to the process's
 * end (its death, or its last sign of life), from the CPU time the shim's heartbeat samples
 * (ls_thread_slot.on_cpu_ns): 1 busy; 0 off the CPU (asleep, in I/O, blocked on a lock or a
 * peer), since *since_ns (0: never seen on it); -1 unknown (an older trace). */
int model_thread_busy(const struct m_proc *p, uint64_t *since_ns);

/* True when job handled a failure at time t: it made new communicators after it and completed
 * collectives on them (m_job.recovered_ns), or began to recover with NCCL's fault tolerance
 * calls after it (revoke, shrink, grow: m_job.recovering_ns). */
int model_handled_after(const struct m_job *job, uint64_t t);

/* True when the process finished: it exited with status 0, by itself, neither inside a call nor
 * after one failed (a rank that ended its work as the program meant it to). */
int model_finished(const struct m_proc *p);

/* True when the process was killed from outside: SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT
 * recorded, or vanished without an end record. */
int model_killed_from_outside(const struct m_proc *p);

/* The newest sign of life in trace t: its start, heartbeat, end, or a call entered or left.
 * This function can't fail. */
uint64_t model_last_seen(const struct tr_trace *t);

/* True when a died certainly before b (a's latest possible death is before b's earliest). */
int model_died_before(const struct m_proc *a, const struct m_proc *b);

#endif
