/* scenario.h -- what lockstep-tracegen simulates: a job, its ranks and the faults to inject. */
#ifndef TRACEGEN_SCENARIO_H
#define TRACEGEN_SCENARIO_H

#include <stdint.h>

/* How a rank leaves the program early (a "stop" injection). */
enum stop_how {
    STOP_IDLE,     /* stays alive, makes no more NCCL calls (busy elsewhere) */
    STOP_EXIT,     /* exit(arg) */
    STOP_CRASH,    /* killed by signal arg, seen by the shim's handler */
    STOP_VANISH,   /* SIGKILL/OOM: no end recorded, heartbeat stops */
    STOP_BUSY,     /* dies while writing the record of world collective #seq */
    STOP_ENTERING, /* caught entering world collective #seq: its counter counts it, its
                    * record is not published yet (the shim counts a call just before it
                    * publishes the record); stays alive */
    STOP_WRITING,  /* caught writing its record of world collective #seq (the slot marked
                    * busy); stays alive */
};

struct stop {
    int rank, seq; /* before world collective #seq */
    enum stop_how how;
    int arg;
};

enum mismatch_kind { MIS_NONE, MIS_OP, MIS_COUNT, MIS_DTYPE, MIS_REDOP, MIS_ROOT };

#define MAX_STOPS    32
#define MAX_NO_TRACE 64

struct scenario {
    const char *out_dir;
    const char *job;
    int nranks;
    int ncoll;     /* world collectives per rank */
    uint64_t ring; /* ring capacity (records) */
    int ranks_per_host;
    int pid_base;
    uint64_t seed;
    double stall_s; /* how long ago the job stopped moving */
    int env_rank;   /* header.rank from the environment (else -1) */
    int grouped;    /* world collectives inside GroupStart/GroupEnd */
    int p2p;        /* ring exchange (send r+1, recv r-1) every iteration */
    int split;      /* colors of a sub-communicator split from world (0 none) */
    int sites;      /* record call sites */
    int python;     /* call sites come from Python (a library frame, the script, <module>) */
    int host_paths; /* each host runs its own copy of the program and script (paths differ) */
    struct stop stops[MAX_STOPS];
    int nstops;
    enum mismatch_kind mismatch;
    int mismatch_rank, mismatch_seq;
    int straggler_rank;
    double straggler_s;
    int p2p_skip_recv_rank; /* this rank skips its receive in the last iteration */
    int p2p_size_rank;      /* this rank sends twice the count in the last iteration */
    int deadlock_rank;      /* in the last iteration, sub before world (needs --split) */
    int error_rank, error_seq, error_code;
    int init_size_rank;  /* this rank believes the world has one rank more */
    int never_join_rank; /* this rank never calls CommInitRank */
    int terminated;      /* at the end every live rank gets SIGTERM (a launcher timeout) */
    int no_trace[MAX_NO_TRACE];
    int n_no_trace;
    /* Starts of one job (attempts, tests/unit/test_diagnose.c): */
    uint64_t t0_ns;   /* the ranks' clocks start here (0: from the seed) */
    uint32_t attempt; /* the launcher's restart count + 1 in every header (0: none) */
    int rank_offset;  /* global rank of rank 0 (its host too): a launcher per node */
    int world_size;   /* the launcher's world size in the headers (0: nranks) */
    int summary;      /* write node summaries (one per host), not trace files */
    uint64_t keep;    /* --summary: ring slots kept in memory per rank (the window read) */
};

/* Runs the scenario and writes one trace per rank into sc->out_dir. Returns 0, or -1 after
 * printing why to stderr. */
int sim_run(const struct scenario *sc);

#endif
