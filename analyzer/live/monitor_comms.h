/* monitor_comms.h -- the live monitor's communicators: each id with the (trace, entry) of every
 * member that holds it, when a member last moved on it, and the members' counters together. */
#ifndef LOCKSTEP_MONITOR_COMMS_H
#define LOCKSTEP_MONITOR_COMMS_H

#include <stddef.h>
#include <stdint.h>

#include "lockstep/trace_format.h"
#include "monitor_types.h"

struct mon_trace;

/* Adds to the index the valid entries of trace `t` (number `ti` in the monitor) not in it yet,
 * each as progress at `now_ns` of its communicator (a member joined). Returns 0, -1 when out
 * of memory (the entries left out are tried again next time). */
int mon_comms_index(struct mon_comms *c, struct mon_trace *t, uint32_t ti, uint64_t now_ns);

/* Marks progress at `now_ns` on each communicator whose entry in `t` moved from `old` (the
 * entries as read before, `nold` of them) to t->comms: collectives issued, returned or
 * completed, sends or receives entered, its flags. Returns 1 when one did, else 0; this
 * function can't fail. */
int mon_comms_moved(struct mon_comms *c, const struct mon_trace *t, const struct ls_comm *old,
                    uint32_t nold, uint64_t now_ns);

/* Marks progress at `now_ns` on every communicator of `t` (its process ended). */
void mon_comms_member_ended(struct mon_comms *c, const struct mon_trace *t, uint64_t now_ns);

/* Recomputes each communicator's counters over its members (traces `v`, `n` of them); waiters
 * are left at 0 for the caller to count. O(entries). This function can't fail. */
void mon_comms_tally(struct mon_comms *c, const struct mon_trace *v, size_t n);

/* The communicator with this id, NULL when none is indexed. */
const struct mon_comm *mon_comms_find(const struct mon_comms *c, uint64_t id);

/* Frees the index; it is empty and usable again. */
void mon_comms_free(struct mon_comms *c);

#endif
