/* gather.h -- many nodes, one diagnosis: each node's `lockstep run` copies its traces into a
 * shared folder (LOCKSTEP_GATHER_DIR) when it sees a stall or its job ends, and the runner
 * that holds global rank 0 waits for the other nodes and diagnoses the whole job. */
#ifndef LOCKSTEP_GATHER_H
#define LOCKSTEP_GATHER_H

#include <stdint.h>

#include "monitor.h"

struct gather {
    const char *shared;  /* LOCKSTEP_GATHER_DIR, NULL when not gathering */
    const char *local;   /* this node's trace folder */
    char node[512];      /* this node's folder inside `shared` */
    double wait_s;       /* LOCKSTEP_GATHER_WAIT: how long rank 0 waits for the others */
    uint64_t started_ns; /* CLOCK_REALTIME: markers older than this are from other runs */
};

/* Sets up gathering from the environment. This function can't fail. */
void gather_init(struct gather *g, const char *local_dir);

/* True when another node's runner has marked a stall in the shared folder. */
int gather_stall_elsewhere(const struct gather *g);

/* On a stall: without a shared folder returns the local folder (to diagnose, probing live
 * ranks). With one: probes the local ranks, copies the traces and their live facts there,
 * marks the stall for the other nodes, and returns the shared folder if this node holds rank
 * 0 (after waiting for the others), else NULL (rank 0's runner diagnoses). */
const char *gather_on_stall(struct gather *g, struct monitor *m);

/* When the job ended by itself: like gather_on_stall() without probing or marking. */
const char *gather_on_end(struct gather *g, struct monitor *m);

/* Frees nothing today; kept for symmetry with gather_init(). */
void gather_free(struct gather *g);

#endif
