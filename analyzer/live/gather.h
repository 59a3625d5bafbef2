/* gather.h -- many nodes, one diagnosis: each node's `lockstep run` reduces its traces to a node
 * summary (docs/summary-format.md) in a shared folder (LOCKSTEP_GATHER_DIR) when it sees a stall or
 * its job ends, and the runner that holds global rank 0 waits for every node's snapshot, diagnoses
 * the whole job and then releases the other runners, which stop their ranks only then
 * (docs/live.md, "Many nodes"). */
#ifndef LOCKSTEP_GATHER_H
#define LOCKSTEP_GATHER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "monitor.h"

/* A node folder the diagnosing runner took for this run. */
struct gather_node {
    char name[256];    /* <host>-<pid> of its runner */
    uint64_t ready_ns; /* when its snapshot was complete (its READY marker) */
    int world;         /* the world size its traces name, -1 unknown */
    int *ranks;        /* the global ranks of its traces */
    size_t nranks;
    int kept; /* 0 when a newer snapshot holds one of its ranks (an earlier run's node) */
};

struct gather {
    const char *shared;        /* LOCKSTEP_GATHER_DIR, NULL when not gathering */
    const char *local;         /* this node's trace folder */
    char name[256];            /* this runner's node folder inside `shared`: <host>-<pid> */
    char node[PATH_MAX];       /* shared/name */
    char diagnosis[PATH_MAX];  /* the run folder rank 0's runner diagnoses, "" until then */
    double wait_s;             /* LOCKSTEP_GATHER_WAIT: how long to wait for the other nodes */
    uint64_t started_ns;       /* CLOCK_REALTIME: markers older than this are from other runs */
    int made;                  /* the node folder was made (emptied) by this runner */
    int answered;              /* this node gave its ended ranks' traces for a stall mark */
    struct gather_node *taken; /* the node folders of this run (diagnosing runner) */
    size_t ntaken, cap;
};

/* Sets up gathering from the environment. Returns 0, or -1 after a message naming the problem
 * (LOCKSTEP_GATHER_WAIT not a positive number, a gather folder that cannot be made or
 * written). */
int gather_init(struct gather *g, const char *local_dir);

/* True when another node's runner has marked a stall of this run in the shared folder and this
 * node should answer it with a live snapshot. A node whose ranks have all ended (its job ends
 * by itself) answers with their traces instead, once, and returns 0: it is not a stall here. */
int gather_stall_elsewhere(struct gather *g, const struct monitor *m);

/* On a stall: without a shared folder returns the local folder (to diagnose, probing live
 * ranks). With one: marks the stall for the other nodes, probes the local ranks and writes the
 * node summary of their traces and live facts into this node's folder. The runner that holds rank 0
 * then waits (up to LOCKSTEP_GATHER_WAIT) for every node's snapshot and returns the folder of this
 * run's node folders to diagnose; the caller calls gather_release() after diagnosing. Any other
 * runner waits until rank 0's runner has read its snapshot (or cannot have: a bounded wait,
 * said on stderr) and returns NULL: its ranks may be stopped then. */
const char *gather_on_stall(struct gather *g, struct monitor *m);

/* When the job ended by itself: writes the node summary (no probe, nothing marked); returns what
 * gather_on_stall() returns for rank 0's runner, NULL for the others (they do not wait). */
const char *gather_on_end(struct gather *g, struct monitor *m);

/* After the diagnosis: rank 0's runner tells every node whose snapshot it read that it may
 * stop its ranks. Does nothing for other runners or without a shared folder. This function
 * can't fail (a marker that cannot be written is said on stderr). */
void gather_release(struct gather *g);

/* Frees what the gather holds. */
void gather_free(struct gather *g);

#endif
