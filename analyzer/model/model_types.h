/* model_types.h -- the job model's types: processes as global ranks, jobs, communicators with
 * their members' collective sequences, and the index that finds a communicator. The bottom of
 * the model: model_state.c, model_jobs.c, model.c and stop_mark.c build on it (model.h). */
#ifndef LOCKSTEP_MODEL_TYPES_H
#define LOCKSTEP_MODEL_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "analysis_opts.h"
#include "idmap.h"
#include "trace_reader.h"

enum rank_state {
    RANK_IN_CALL,  /* alive, waiting on NCCL: inside a call (or a group's GroupEnd), or with
                    * work it issued that its GPU has not completed (see waiting_gpu) */
    RANK_IDLE,     /* alive, not in any NCCL call */
    RANK_EXITED,   /* exit()/_exit() recorded */
    RANK_CRASHED,  /* a fatal signal reached the shim's handler */
    RANK_VANISHED, /* no end recorded and the process is gone (SIGKILL, OOM killer) */
};

/* What a live command saw of a process that still runs on this host (run/watch only). */
#define M_LIVE_FRAMES 32
/* One thread of a live process, as a probe read it (live.c). */
struct m_live_thread {
    uint32_t tid;
    char name[16];    /* its name (comm) */
    char state;       /* /proc state letter */
    char syscall[24]; /* the system call it is blocked in, "" none */
    char fd[8];       /* what its descriptor is: "socket", "pipe", "file", "" none */
    int in_call;      /* inside a recorded NCCL call (the trace's thread slots say so) */
    int helper;       /* only library frames (NCCL's, CUDA's, lockstep's own threads) */
    int waits;        /* waits for another thread (pthread_join, a condition, a futex) */
    char wait_fn[32]; /* the function it waits in ("pthread_join"), "" unknown */
    int how;          /* how it was read: 0 not, 1 held by ptrace, 2 read without stopping it */
    uint64_t held_ns; /* how long the probe held it stopped (how == 1) */
    int nframes;
    char frames[M_LIVE_FRAMES][192]; /* symbolized, innermost first */
    char where[512];                 /* like m_live.where */
    char python[256];                /* its Python frames, "" none */
};

struct m_live {
    const char *activity;            /* "busy", "sleeping", "stopped", "zombie", "gone" */
    double cpu_share;                /* of one CPU, over the sampling interval */
    char state;                      /* /proc state letter */
    int nframes;                     /* live stack frames, 0 if the process did not answer */
    char frames[M_LIVE_FRAMES][192]; /* symbolized, innermost first */
    char where[512];                 /* the user frames, "f (file.c:12) <- g (file.c:40) <- main",
                                      * or the Python frames when it runs Python */
    char python[256];                /* "file.py:LINE (func) <- ...", "" none */
    uint64_t probed_ns;              /* CLOCK_REALTIME of the probe, 0 unknown (older files) */
    /* Every thread (frames, where and python above are those of the work thread). */
    struct m_live_thread *threads;
    int nthreads;
    int nccl_thread;  /* index of the thread inside NCCL, -1 none */
    int work_thread;  /* index of the thread doing the program's work (the main thread unless it
                       * waits for another), -1 none */
    char stacks[200]; /* how stacks were read ("ptrace", "signal"), or why not ("refused: ...") */
};

struct stop_mark;

/* One process: one trace file. */
struct m_proc {
    struct tr_trace *t;
    int rank;   /* global rank, -1 unknown */
    size_t job; /* index into model.jobs (one attempt of a job) */
    enum rank_state state;
    uint64_t since_ns;                 /* in the call / idle / ended since */
    uint64_t last_seen_ns;             /* newest heartbeat, end or call time */
    const struct ls_record *current;   /* oldest call in flight (else, completion tracked, the
                                        * oldest op its GPU has not completed), NULL if none */
    int waiting_gpu;                   /* current returned: the rank waits on its GPU */
    const struct model *model;         /* the model it belongs to */
    const struct ls_record *last_call; /* newest record */
    int stopped;              /* alive but stopped (SIGSTOP, a debugger, a suspended job) */
    const char *liveness_why; /* why a process that seems there is dead: "a zombie its parent
                               * has not reaped", "its pid belongs to another process now"; "" */
    /* Dead processes (exited, crashed, vanished): when it died, [death_lo, death_hi]; exact
     * for a recorded end, from the last sign of life for a vanished one (model_state.c). */
    uint64_t death_lo, death_hi;
    int stopped_with_job; /* killed from outside after another rank of its attempt had died,
                           * or in one wave with others (a launcher, a scheduler, a timeout):
                           * its death says nothing about why the job hung (see
                           * model_was_running()) */
    const struct m_proc *stopped_after; /* the earlier death it followed, NULL: a wave */
    const struct ls_record *died_in;    /* the collective/p2p it was blocked in when it ended */
    const struct ls_record *failed;     /* its first call that failed in NCCL (an error other
                                         * than refused arguments), NULL none */
    int fork_child;                     /* forked from another traced process of its rank */
    int node_failure; /* ended with every other rank of its host(s) in one wave that ranks on
                       * other hosts outlived: a node failure, a death of its own even when it
                       * was waiting in a call (model_state.c) */
    int blind; /* the shim saw NCCL in the process but none of its calls (LS_HFLAG_NCCL_UNSEEN,
                * nothing recorded): it holds its rank only where no other process does */
    const struct ls_record **group_ends; /* GroupEnd records, ascending group id */
    size_t ngroup_ends;
    const struct m_live *live; /* NULL post-mortem; owned by the live command */
    /* lockstep run (or watch --kill) ended it when it stopped the job after a stall: its
     * state is the one it had then (stop_mark.h); NULL otherwise. Owned by the analysis. */
    const struct stop_mark *stopped_by;
};

/* One rank's part of a communicator. */
struct m_member {
    struct m_proc *proc;            /* NULL: no trace joined as this comm rank */
    const struct ls_comm *entry;    /* the process's comm table entry */
    const struct ls_record **colls; /* collectives on this comm, ascending seq */
    size_t ncolls;
    const struct ls_record **p2p; /* sends and receives on this comm, ticket order */
    size_t np2p;
    const struct ls_record **sig; /* puts, signals and waits for signals, ticket order */
    size_t nsig;
    uint64_t issued; /* latest collective seq issued (survives wraps) */
};

struct m_comm {
    uint64_t id, parent;
    int nranks;         /* size most members agree on */
    int size_disagrees; /* members claim different sizes */
    int color;          /* split color, -1 none */
    uint32_t create_op;
    int njoined;              /* members with a trace */
    int multi_rank;           /* one process holds more than one rank of it */
    int diverged_known;       /* diverged_at is worked out (model_first_divergence()) */
    uint64_t diverged_at;     /* the oldest seq where members' calls differ, 0 none */
    uint64_t max_issued;      /* highest collective seq any member issued */
    uint64_t gpu_completed;   /* highest collective seq any member's GPU completed (tracked) */
    struct m_member *members; /* nmembers slots, by comm rank */
    int nmembers;             /* >= nranks when some member claims a larger size */
    size_t job;
};

/* One attempt of a job: the processes of one start of every rank. A launcher that restarts
 * a job (torchrun --max-restarts, elastic, a requeue), or a user starting it again under a fixed
 * id, starts new processes under the same job id; each start is an attempt of its own
 * (model_jobs.c says how they are told apart: communicators, lifetimes, ranks started anew,
 * world sizes, the launcher's restart count). */
struct m_job {
    char name[LS_JOB_LEN + 16]; /* job id, or "anon-N" for jobs without one */
    int attempt;                /* 1-based, in start order */
    int nattempts;              /* attempts of this job id found */
    int attempt_source;         /* 1: the launcher's restart count alone told the attempts
                                 * apart (each has one, growing), 0: lifetimes did too */
    uint64_t started_ns;        /* first trace of the attempt created */
    struct m_proc **procs;      /* ascending global rank */
    size_t nprocs;
    struct m_comm **comms; /* ascending id */
    size_t ncomms;
    int world_size;          /* from the launcher, else the largest communicator */
    struct m_proc **by_rank; /* world_size slots; NULL where no trace */
    uint64_t now_ns;         /* reference time: newest heartbeat, end or call of the job; when
                              * lockstep stopped it, the stop's time (stop_mark.h) */
    uint64_t newest_ns;      /* the newest heartbeat, end or call of the job, stopped or not */
    uint64_t recovered_ns;   /* the newest creation of a communicator on which a collective
                              * completed: a failure before it that nothing waits for now is one
                              * the job replaced its communicators after and went on from
                              * (model_state.c); 0 none */
    uint64_t recovering_ns;  /* the newest entry into a call of NCCL's fault tolerance (revoke,
                              * shrink, grow): the job was recovering from what failed before;
                              * 0 none */
};

struct model {
    struct m_proc *procs;
    size_t nprocs;
    struct m_comm *comms;
    size_t ncomms;
    struct m_job *jobs;
    size_t njobs;
    struct idmap comm_index;             /* (comm id ^ job salt) -> index into comms */
    const struct untraced_set *untraced; /* the markers of ranks that had no room for a trace
                                          * (untraced.h; not owned, NULL none): why a rank
                                          * no trace holds is absent */
    struct analysis_opts opts;           /* the thresholds the model and the diagnosis use */
};

/* The key of communicator `id` of job `job` in model.comm_index. */
static inline uint64_t model_comm_key(uint64_t id, size_t job)
{
    return id ^ ((uint64_t)(job + 1) * 0x9e3779b97f4a7c15ull);
}

/* Returns the communicator `id` of job `job`, or NULL. */
static inline struct m_comm *model_comm(const struct model *m, size_t job, uint64_t id)
{
    size_t idx;
    if (!idmap_get(&m->comm_index, model_comm_key(id, job), &idx))
        return NULL;
    struct m_comm *c = &m->comms[idx];
    return c->id == id && c->job == job ? c : NULL;
}

#endif
