/* tracegen.c -- lockstep-tracegen: writes synthetic trace files of a simulated job with
 * injected faults, for the analyzer's tests and benchmarks. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lockstep/trace_format.h"
#include "../../analyzer/read/window.h"
#include "scenario.h"

static const char usage[] =
    "usage: lockstep-tracegen --out DIR [options]\n"
    "  --ranks N            ranks in the job (default 4)\n"
    "  --colls K            world collectives per rank (default 20)\n"
    "  --ring CAP           ring capacity in records (default 4096; small to force a wrap)\n"
    "  --job ID             job id written in the headers (default \"tg\"; \"\" for none)\n"
    "  --seed S             varies communicator ids and times (default 1)\n"
    "  --pid-base P         pid of rank 0 (default 4000)\n"
    "  --ranks-per-host H   ranks per host name tg-nodeX (default 8)\n"
    "  --stall SECONDS      how long ago the job stopped (default 30)\n"
    "  --no-env-rank        header.rank = -1 (rank from the communicator)\n"
    "  --no-sites           no call sites\n"
    "  --python             call sites carry Python frames (site-packages, then train.py)\n"
    "  --host-paths         each host runs its own copy of the program and the script\n"
    "                       (the same places under different paths)\n"
    "  --grouped            world collectives inside GroupStart/GroupEnd\n"
    "  --p2p                a send/recv ring exchange in a group every iteration\n"
    "  --split C            also a sub-communicator split from world by rank %% C\n"
    "faults (SEQ: the world collective before which it happens, default the last):\n"
    "  --missing R[:SEQ]    rank R stays alive but stops calling NCCL\n"
    "  --crash R:SIG[:SEQ]  rank R is killed by signal SIG\n"
    "  --exit R:STATUS[:SEQ] rank R exits with STATUS (SEQ K+1: after its last call)\n"
    "  --vanish R[:SEQ]     rank R disappears without an end record (SIGKILL/OOM)\n"
    "  --half-written R[:SEQ] rank R dies while writing the record of collective SEQ\n"
    "  --entering R[:SEQ]   the traces are read as rank R enters collective SEQ: its counter\n"
    "                       counts it, its record is not written yet (use a short --stall)\n"
    "  --writing R[:SEQ]    the traces are read as rank R writes its record of collective SEQ\n"
    "                       (alive; use a short --stall)\n"
    "  --mismatch KIND:R[:SEQ] KIND op|count|dtype|redop|root: rank R's collective SEQ differs\n"
    "  --straggler R:SECONDS rank R reaches every world collective SECONDS late\n"
    "  --p2p-skip-recv R    rank R skips its receive in the last iteration (needs --p2p)\n"
    "  --p2p-size R         rank R sends twice the count in the last iteration (needs --p2p)\n"
    "  --deadlock R         rank R calls the sub collective before world, last iteration\n"
    "                       (needs --split)\n"
    "  --error R:SEQ:CODE   rank R's collective SEQ returns ncclResult CODE; R exits 1\n"
    "  --init-size R        rank R creates world with one rank too many\n"
    "  --never-join R       rank R never calls ncclCommInitRank\n"
    "  --no-trace R         rank R's trace file is not written (repeatable)\n"
    "  --terminated         at the end, every live rank is killed by SIGTERM (a launcher\n"
    "                       stopping the hung job)\n"
    "output:\n"
    "  --summary            one node summary per host (DIR/tg-nodeX.summary) instead of the\n"
    "                       trace files, made in memory: what `lockstep summarize --per-host`\n"
    "                       makes of the traces (the newest LOCKSTEP_ANALYZE_RECORDS records)\n";

enum {
    O_OUT = 256,
    O_RANKS,
    O_COLLS,
    O_RING,
    O_JOB,
    O_SEED,
    O_PID,
    O_RPH,
    O_STALL,
    O_NOENV,
    O_NOSITES,
    O_PYTHON,
    O_HOST_PATHS,
    O_GROUPED,
    O_P2P,
    O_SPLIT,
    O_MISSING,
    O_CRASH,
    O_EXIT,
    O_VANISH,
    O_HALF,
    O_ENTERING,
    O_WRITING,
    O_MISMATCH,
    O_STRAGGLER,
    O_SKIPRECV,
    O_P2PSIZE,
    O_DEADLOCK,
    O_ERROR,
    O_INITSIZE,
    O_NEVERJOIN,
    O_NOTRACE,
    O_TERMINATED,
    O_SUMMARY,
    O_HELP
};

static const struct option options[] = {{"out", 1, 0, O_OUT},
                                        {"ranks", 1, 0, O_RANKS},
                                        {"colls", 1, 0, O_COLLS},
                                        {"ring", 1, 0, O_RING},
                                        {"job", 1, 0, O_JOB},
                                        {"seed", 1, 0, O_SEED},
                                        {"pid-base", 1, 0, O_PID},
                                        {"ranks-per-host", 1, 0, O_RPH},
                                        {"stall", 1, 0, O_STALL},
                                        {"no-env-rank", 0, 0, O_NOENV},
                                        {"no-sites", 0, 0, O_NOSITES},
                                        {"python", 0, 0, O_PYTHON},
                                        {"host-paths", 0, 0, O_HOST_PATHS},
                                        {"grouped", 0, 0, O_GROUPED},
                                        {"p2p", 0, 0, O_P2P},
                                        {"split", 1, 0, O_SPLIT},
                                        {"missing", 1, 0, O_MISSING},
                                        {"crash", 1, 0, O_CRASH},
                                        {"exit", 1, 0, O_EXIT},
                                        {"vanish", 1, 0, O_VANISH},
                                        {"half-written", 1, 0, O_HALF},
                                        {"entering", 1, 0, O_ENTERING},
                                        {"writing", 1, 0, O_WRITING},
                                        {"mismatch", 1, 0, O_MISMATCH},
                                        {"straggler", 1, 0, O_STRAGGLER},
                                        {"p2p-skip-recv", 1, 0, O_SKIPRECV},
                                        {"p2p-size", 1, 0, O_P2PSIZE},
                                        {"deadlock", 1, 0, O_DEADLOCK},
                                        {"error", 1, 0, O_ERROR},
                                        {"init-size", 1, 0, O_INITSIZE},
                                        {"never-join", 1, 0, O_NEVERJOIN},
                                        {"no-trace", 1, 0, O_NOTRACE},
                                        {"terminated", 0, 0, O_TERMINATED},
                                        {"summary", 0, 0, O_SUMMARY},
                                        {"help", 0, 0, O_HELP},
                                        {0, 0, 0, 0}};

/* Parses up to max colon-separated integers; returns how many, -1 on junk. */
static int parse_ints(const char *s, long *v, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        v[n++] = strtol(s, &end, 10);
        if (end == s || (*end && *end != ':'))
            return -1;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

static int bad(const char *opt, const char *arg)
{
    fprintf(stderr, "lockstep-tracegen: bad value '%s' for --%s\n%s", arg, opt, usage);
    return 2;
}

static int add_stop(struct scenario *sc, enum stop_how how, const char *arg, int need)
{
    long v[3];
    int n = parse_ints(arg, v, 3);
    if (n < need || sc->nstops >= MAX_STOPS)
        return -1;
    struct stop *st = &sc->stops[sc->nstops++];
    st->rank = (int)v[0];
    st->how = how;
    st->arg = need > 1 ? (int)v[1] : 0;
    st->seq = n > need ? (int)v[need] : -1; /* resolved to the last collective below */
    return 0;
}

static int parse_mismatch(struct scenario *sc, const char *arg)
{
    static const char *const kinds[] = {"", "op", "count", "dtype", "redop", "root"};
    const char *colon = strchr(arg, ':');
    long v[2];
    if (!colon)
        return -1;
    int n = parse_ints(colon + 1, v, 2);
    if (n < 1)
        return -1;
    for (int k = 1; k <= MIS_ROOT; k++)
        if (strlen(kinds[k]) == (size_t)(colon - arg) &&
            strncmp(arg, kinds[k], (size_t)(colon - arg)) == 0)
            sc->mismatch = (enum mismatch_kind)k;
    if (sc->mismatch == MIS_NONE)
        return -1;
    sc->mismatch_rank = (int)v[0];
    sc->mismatch_seq = n > 1 ? (int)v[1] : -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct scenario sc = {.job = "tg",
                          .nranks = 4,
                          .ncoll = 20,
                          .ring = 4096,
                          .ranks_per_host = 8,
                          .pid_base = 4000,
                          .seed = 1,
                          .stall_s = 30,
                          .env_rank = 1,
                          .sites = 1,
                          .mismatch_rank = -1,
                          .straggler_rank = -1,
                          .p2p_skip_recv_rank = -1,
                          .p2p_size_rank = -1,
                          .deadlock_rank = -1,
                          .error_rank = -1,
                          .init_size_rank = -1,
                          .never_join_rank = -1};
    int opt;
    long v[3];
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        const char *name = opt >= O_OUT && opt < O_HELP ? options[opt - O_OUT].name : "?";
        int ok = 1;
        switch (opt) {
        case O_OUT:
            sc.out_dir = optarg;
            break;
        case O_RANKS:
            sc.nranks = atoi(optarg);
            ok = sc.nranks > 0;
            break;
        case O_COLLS:
            sc.ncoll = atoi(optarg);
            ok = sc.ncoll >= 0;
            break;
        case O_RING:
            sc.ring = strtoull(optarg, NULL, 10);
            ok = sc.ring >= LS_MIN_RING;
            break;
        case O_JOB:
            sc.job = optarg;
            break;
        case O_SEED:
            sc.seed = strtoull(optarg, NULL, 10);
            break;
        case O_PID:
            sc.pid_base = atoi(optarg);
            break;
        case O_RPH:
            sc.ranks_per_host = atoi(optarg);
            ok = sc.ranks_per_host > 0;
            break;
        case O_STALL:
            sc.stall_s = atof(optarg);
            break;
        case O_NOENV:
            sc.env_rank = 0;
            break;
        case O_NOSITES:
            sc.sites = 0;
            break;
        case O_PYTHON:
            sc.python = 1;
            break;
        case O_HOST_PATHS:
            sc.host_paths = 1;
            break;
        case O_GROUPED:
            sc.grouped = 1;
            break;
        case O_P2P:
            sc.p2p = 1;
            break;
        case O_SPLIT:
            sc.split = atoi(optarg);
            ok = sc.split > 0;
            break;
        case O_MISSING:
            ok = add_stop(&sc, STOP_IDLE, optarg, 1) == 0;
            break;
        case O_CRASH:
            ok = add_stop(&sc, STOP_CRASH, optarg, 2) == 0;
            break;
        case O_EXIT:
            ok = add_stop(&sc, STOP_EXIT, optarg, 2) == 0;
            break;
        case O_VANISH:
            ok = add_stop(&sc, STOP_VANISH, optarg, 1) == 0;
            break;
        case O_HALF:
            ok = add_stop(&sc, STOP_BUSY, optarg, 1) == 0;
            break;
        case O_ENTERING:
            ok = add_stop(&sc, STOP_ENTERING, optarg, 1) == 0;
            break;
        case O_WRITING:
            ok = add_stop(&sc, STOP_WRITING, optarg, 1) == 0;
            break;
        case O_MISMATCH:
            ok = parse_mismatch(&sc, optarg) == 0;
            break;
        case O_STRAGGLER:
            ok = sscanf(optarg, "%d:%lf", &sc.straggler_rank, &sc.straggler_s) == 2;
            break;
        case O_SKIPRECV:
            sc.p2p_skip_recv_rank = atoi(optarg);
            break;
        case O_P2PSIZE:
            sc.p2p_size_rank = atoi(optarg);
            break;
        case O_DEADLOCK:
            sc.deadlock_rank = atoi(optarg);
            break;
        case O_ERROR:
            ok = parse_ints(optarg, v, 3) == 3;
            sc.error_rank = (int)v[0];
            sc.error_seq = (int)v[1];
            sc.error_code = (int)v[2];
            break;
        case O_INITSIZE:
            sc.init_size_rank = atoi(optarg);
            break;
        case O_NEVERJOIN:
            sc.never_join_rank = atoi(optarg);
            break;
        case O_NOTRACE:
            ok = sc.n_no_trace < MAX_NO_TRACE;
            if (ok)
                sc.no_trace[sc.n_no_trace++] = atoi(optarg);
            break;
        case O_TERMINATED:
            sc.terminated = 1;
            break;
        case O_SUMMARY:
            sc.summary = 1;
            break;
        case O_HELP:
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return 2;
        }
        if (!ok)
            return bad(name, optarg ? optarg : "");
    }
    if (!sc.out_dir || optind != argc) {
        fputs(usage, stderr);
        return 2;
    }
    for (int i = 0; i < sc.nstops; i++)
        if (sc.stops[i].seq < 0)
            sc.stops[i].seq = sc.ncoll;
    if (sc.mismatch_seq < 0)
        sc.mismatch_seq = sc.ncoll;
    if (sc.deadlock_rank >= 0 && !sc.split)
        sc.split = 1;
    /* What the analysis of the whole job reads of each rank (the window shrinks for huge jobs):
     * a node summary of a job this size needs no more. */
    sc.keep = window_records((size_t)sc.nranks);
    mkdir(sc.out_dir, 0700);
    return sim_run(&sc) == 0 ? 0 : 1;
}
