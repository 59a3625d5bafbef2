/* plugin_events.h -- what lockstep's NCCL profiler plugin keeps of NCCL's communicators and
 * events, and what plugin_events.c does with them; plugin.c (NCCL's entry points) calls it. */
#ifndef LOCKSTEP_PLUGIN_EVENTS_H
#define LOCKSTEP_PLUGIN_EVENTS_H

#include <pthread.h>
#include <stdint.h>

#include "lockstep/nccl_profiler.h"
#include "shim.h"

#define PL_RECENT 256

/* One communicator as NCCL's init named it to the plugin: the plugin's context. */
struct pl_comm {
    int version;        /* profiler API version NCCL speaks to us */
    struct ls_trace *t; /* the trace written: our own, or the shim's */
    int shim;           /* the shim records its calls: we add GPU progress only */
    int idx;            /* its comm-table entry, -1 until known */
    uint64_t comm_id;   /* as the analyzer matches it across ranks */
    int rank, nranks;   /* -1 unknown (v1..v3 until the first event) */
    char name[LS_COMM_NAME_LEN];
    uint32_t ordinal;             /* n-th communicator this process initialized */
    uint64_t colls;               /* collectives seen: the seq of the latest */
    int stream_slot;              /* the header's stream slot of its GPU queue, -1 none */
    pthread_mutex_t lock;         /* its events and in-flight list */
    struct pl_event *head, *tail; /* collectives and p2p not yet complete, oldest first */
    uint64_t moved_ns;
    /* The newest tasks, each holding a reference: NCCL stops a task before its channel and
     * proxy events start (they name it as parent), so it must outlive its stop; a child whose
     * parent is not among them is ignored. */
    struct pl_event *recent[PL_RECENT];
    unsigned recent_at;
    long nevents;                        /* our events of it still allocated */
    int ended;                           /* finalized: freed when its last event is */
    int chained;                         /* the chained plugin accepted it */
    void *inner;                         /* the chained plugin's context */
    struct pl_event *events;             /* every event of it still allocated */
    struct pl_comm *all_prev, *all_next; /* every communicator not yet freed */
};

enum pl_kind { PL_OTHER, PL_TASK, PL_KERNEL_CH, PL_PROXY_OP, PL_PROXY_STEP };

/* One event NCCL started (our handle). Freed when it stopped and no child is alive. */
struct pl_event {
    int kind;
    int refs; /* 1 until stopped, +1 per live child, +1 while in the in-flight list */
    struct pl_comm *comm;
    struct pl_event *parent;
    void *inner; /* the chained plugin's handle */
    /* PL_TASK */
    int is_coll;
    uint64_t seq;
    struct ls_record *rec;
    uint64_t ticket;
    int recorded, host_done, gpu_done;
    int nch;
    uint64_t ch_started, ch_stopped;
    struct pl_event *next; /* in-flight list */
    struct pl_event *pops; /* its proxy ops (sibling list) */
    /* PL_KERNEL_CH, PL_PROXY_OP, PL_PROXY_STEP */
    int channel, peer, is_send, step, state, stopped;
    struct pl_event *sib;                 /* next proxy op of the same task */
    struct pl_event *cur;                 /* PL_PROXY_OP: its newest unfinished step */
    struct pl_event *all_prev, *all_next; /* its communicator's events */
};

/* Finds or makes the comm-table entry of `pc` (plugin_events.c): beside the shim, the shim's
 * entry of the communicator being created; alone, one of our own with an id every rank
 * computes alike from NCCL's commHash (`hash`, 0 unknown). */
void pl_comm_attach(struct pl_comm *pc, uint64_t hash);

/* Keeps `pc` reachable until it is freed (after a successful init). */
void pl_comm_track(struct pl_comm *pc);

/* NCCL finalized the communicator: its entry is ended; `pc` is freed once no event is left. */
void pl_comm_end(struct pl_comm *pc);

/* The event NCCL starts with descriptor `d` of `version`, or NULL when it is none of ours. */
struct pl_event *pl_event_start(struct pl_comm *pc, int version, const void *d);

/* An event kept only to chain it (group, API events, ...). NULL when out of memory. */
struct pl_event *pl_event_other(struct pl_comm *pc);

void pl_event_stop(struct pl_event *ev);
void pl_event_state(struct pl_event *ev, int state);

#endif
