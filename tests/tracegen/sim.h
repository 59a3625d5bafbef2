/* sim.h -- types shared by the simulator (sim.c) and the rank programs (program.c). */
#ifndef TRACEGEN_SIM_H
#define TRACEGEN_SIM_H

#include <stdint.h>

#include "scenario.h"
#include "trace_writer.h"

#define NS         1000000000ull
#define T0_NS      1700000000000000000ull
#define GAP_NS     10000000ull /* compute between iterations */
#define COLL_NS    1000000ull  /* a collective's duration once everyone is there */
#define CALL_NS    2000ull     /* a call that returns at once */
#define BASE_COUNT 1048576ull
#define MAX_OPS    8
#define BUCKETS    4096

enum step_kind { ST_INIT, ST_SPLIT, ST_GSTART, ST_GEND, ST_COLL, ST_SEND, ST_RECV };
enum site_kind { SITE_INIT, SITE_TRAIN, SITE_EVAL, SITE_HALO, SITE_SUB, SITE_ODD, NSITES };

struct step {
    enum step_kind kind;
    int comm; /* 0 world, 1 sub */
    int op, dtype, redop, peer;
    uint64_t count;
    enum site_kind site;
};

/* What must agree for a rendezvous to complete. */
struct sig {
    int op, dtype, redop, root;
    uint64_t count;
};

/* One call waiting for its partners; the key names the rendezvous it joins. */
struct op_inst {
    int rank;
    int done;
    uint64_t done_ns;
    struct sig sig;
    uint64_t comm_id, seq;
    int kind, a, b, expected; /* kind 0 collective, 1 p2p (a src, b dst), 2 init */
};

struct rank_state {
    int rank;
    struct tw_file *f;
    uint64_t clock;
    int iter; /* 0: prologue; 1..ncoll; ncoll+1: epilogue */
    struct step steps[16];
    int nsteps, pc;
    int done, blocked, queued, stopped_how, stop_arg;
    struct ls_comm *comm[2];
    uint64_t comm_id[2];
    int comm_rank[2], comm_size[2];
    uint32_t site[NSITES];
    uint64_t group_id, group_calls, block_ticket;
    int in_group;
    struct op_inst ops[MAX_OPS];
    int nops;
};

/* Fills the steps of the rank's next iteration (iteration 0 is the prologue that creates the
 * communicators); returns 0 when its program is over (stopped_how/stop_arg say how). */
int program_next(const struct scenario *sc, struct rank_state *rs);

/* The stop injected for `rank` before world collective #iter, or NULL. */
const struct stop *program_stop_at(const struct scenario *sc, int rank, int iter);

/* True when rank's trace is not written (--no-trace). */
int skip_trace(const struct scenario *sc, int rank);

/* The host name of rank (tg-nodeN, ranks_per_host a host). */
void host_of(const struct scenario *sc, int rank, char *buf, size_t len);

/* --summary: writes one node summary per host into sc->out_dir from the ranks' traces in
 * memory, as `lockstep summarize --per-host` would from their files (summary_out.c). Returns 0,
 * or -1 after a message. */
int summary_out(const struct scenario *sc, struct rank_state *r, int n);

#endif
