/* waitgraph.h -- the wait-for graph of one job: what every blocked rank waits for, through which
 * call, and the sinks every wait ends in (docs/analyzer.md, "The wait-for graph"). Built once per
 * job from the model; the diagnosis, the order of its findings and every report read it. */
#ifndef LOCKSTEP_WAITGRAPH_H
#define LOCKSTEP_WAITGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "intvec.h"
#include "model.h"
#include "waitgraph_scc.h"
#include "waitgraph_types.h"

/* Builds the wait-for graph of job `job` of the model. Returns it, or NULL when out of memory.
 * Free with waitgraph_free(). */
struct waitgraph *waitgraph_build(const struct model *m, size_t job);

/* Frees the graph. NULL is fine. */
void waitgraph_free(struct waitgraph *g);

/* The node of process p (a process of the graph's job). This function can't fail. */
size_t waitgraph_rank_node(const struct waitgraph *g, const struct m_proc *p);

/* The node of call (kind, comm, seq), or (size_t)-1 when no rank waits in it. */
size_t waitgraph_call_node(const struct waitgraph *g, enum wg_call_kind kind, uint64_t comm,
                           uint64_t seq);

/* The node of global rank r when no trace holds it, or (size_t)-1. */
size_t waitgraph_absent_node(const struct waitgraph *g, int rank);

/* The node standing for global rank r: its process's, else its absent node, else (size_t)-1. */
size_t waitgraph_node_of_rank(const struct waitgraph *g, int rank);

/* Appends to `out` the global ranks that wait for node v itself: in a call that waits for v
 * (by an edge whose kind is in the mask `kinds`, bit 1 << enum wg_edge_kind; 0 any), or in a
 * send or receive straight to it; only waits on communicator `comm` when not 0, only ranks still
 * running (model_was_running()) with `running`. *first_seq (may be NULL) gets the smallest
 * collective sequence number among those calls, 0 none. Returns 0, -1 when out of memory. */
int waitgraph_waiters(const struct waitgraph *g, size_t v, uint64_t comm, unsigned kinds,
                      int running, struct intvec *out, uint64_t *first_seq);

/* True when a collective waited for node v (a member that never called it) for longer than
 * its members usually take to gather by time `at` (four times its arrival spread, at least a
 * second): v was not on its way then but late on its own. */
int waitgraph_late_at(const struct waitgraph *g, size_t v, uint64_t at);

/* True when call node x explains its waits by itself: every member it waits for waits for
 * nothing else (a leaf of the graph), so no other call stands between. */
int waitgraph_leaf_call(const struct waitgraph *g, size_t x);

/* True when the node is a rank that waits for something (directly). */
int waitgraph_waits(const struct waitgraph *g, size_t node);

/* True when node v (a collective node, or a rank's node with r its record of the wait asked
 * about; r NULL: all its waits) waits only for ranks the job's stop caught on their way after a
 * hang elsewhere (wg_edge.went_on): it has such edges and no other. That call or pair was going
 * on, not hung: nothing to report about it. False for v (size_t)-1 (no node). */
int waitgraph_under_way(const struct waitgraph *g, size_t v, const struct ls_record *r);

/* The edge from node `from` to node `to` (the first of them), NULL none. */
const struct wg_edge *waitgraph_edge(const struct waitgraph *g, size_t from, size_t to);
#endif
