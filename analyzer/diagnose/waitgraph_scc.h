/* waitgraph_scc.h -- the strongly connected components of a wait-for graph, its sinks, the sink
 * each wait ends in and the way there (waitgraph_scc.c): below the graph's building. */
#ifndef LOCKSTEP_WAITGRAPH_SCC_H
#define LOCKSTEP_WAITGRAPH_SCC_H

#include <stddef.h>

#include "waitgraph_types.h"

/* Finds the components of g (sccs, members, nodes[].scc), sinks first. Returns 0, or -1 when out
 * of memory. waitgraph_build() calls it. */
int waitgraph_components(struct waitgraph *g);

/* A shortest way from node `from` to the sink its waits end in (reach[], from waitgraph_reach()):
 * fills path[] with up to max nodes, `from` first and a node of that sink last, and returns how
 * many; 1 when `from` is in the sink itself, 0 when out of memory. Soft edges are not taken. */
size_t waitgraph_path(const struct waitgraph *g, const size_t *reach, size_t from, size_t *path,
                      size_t max);

/* For each component, the sink component its waits end in, chosen among the sinks it reaches by
 * `better(a, b, ctx)` (true when sink a is the better explanation than sink b): reach[c] for
 * component c, a sink reaching only itself. Soft edges are not followed. Returns the array
 * (free() it), or NULL when out of memory. */
size_t *waitgraph_reach(const struct waitgraph *g, int (*better)(size_t a, size_t b, void *ctx),
                        void *ctx);

/* Per node, 1 when some wait that is not soft ends at it (an edge leads to it). Returns the array
 * (free() it), or NULL when out of memory. */
char *waitgraph_waited(const struct waitgraph *g);

/* Names for people and for the JSON report ("waits", "running", ...; "collective", "gpu",
 * "member", ...). */
const char *waitgraph_state_name(enum wg_state s);
const char *waitgraph_edge_name(enum wg_edge_kind k);

/* True when node v is a call where waits end by itself: it can never complete (its ranks called
 * different things, or only its waiters made it) or the GPU is stuck on it. */
int waitgraph_call_is_sink(const struct waitgraph *g, size_t v);

/* What such a call is, after its name ("can never complete: ..."); "" for other states. */
const char *waitgraph_call_sink_words(enum wg_state s);

#endif
