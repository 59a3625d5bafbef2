/* plugin.c -- libnccl-profiler-lockstep.so: NCCL's profiler plugin interface (versions 1 to 7),
 * loaded by NCCL through NCCL_PROFILER_PLUGIN. Collective and p2p events become records of the
 * shim's trace format; kernel-channel and proxy events tell where a collective is on the GPU
 * (plugin_events.c). Beside the shim (LD_PRELOAD) it writes no record, only GPU progress into the
 * shim's communicators. Chains to a user's plugin named by LOCKSTEP_PROFILER_CHAIN: every event
 * NCCL gives lockstep's goes on to it, in the version NCCL speaks or, for a plugin that does not
 * speak that one, the newest of versions 5 to 7 it does (descriptors cut to that version's, events
 * it does not know kept back). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin_events.h"

/* The process-wide state of the plugin. */
static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct ls_bridge *bridge; /* the shim's, NULL when it is not loaded */
static int bridge_checked;
static uint32_t init_count; /* communicators initialized so far (ids without a hash) */

/* The user's plugin we chain to (LOCKSTEP_PROFILER_CHAIN), one per process. */
static struct {
    int state;   /* 0 not tried, 1 loaded, -1 none */
    int version; /* the version its table speaks (<= the one NCCL speaks to ours) */
    void *table;
} chain;

static const struct ls_bridge *find_bridge(void)
{
    if (!bridge_checked) {
        const struct ls_bridge *(*get)(void) =
            (const struct ls_bridge *(*)(void))ls_dl_lookup(RTLD_DEFAULT, LS_BRIDGE_SYMBOL, NULL);
        const struct ls_bridge *b = get ? get() : NULL;
        if (b && b->version >= LS_BRIDGE_VERSION && b->size >= sizeof(*b) && b->active)
            bridge = b;
        bridge_checked = 1;
    }
    return bridge;
}

/* Loads the chained plugin for `version` (plugin lock held); prints one line when it can't. */
static void chain_load(int version)
{
    if (chain.state)
        return;
    chain.state = -1;
    const char *name = ls_knob_str(LS_KNOB_PROFILER_CHAIN);
    if (!name || !*name || strcasecmp(name, "none") == 0)
        return;
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    size_t n = strlen(name);
    if (!lib && !strchr(name, '/') &&
        (strncmp(name, "lib", 3) != 0 || n < 3 || strcmp(name + n - 3, ".so") != 0)) {
        char alt[512];
        snprintf(alt, sizeof alt, "libnccl-profiler-%s.so", name);
        lib = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        ls_warn("profiler plugin %s (LOCKSTEP_PROFILER_CHAIN) could not be loaded: %s; going on "
                "without it",
                name, dlerror());
        return;
    }
    /* Versions 5 to 7 share the table and the descriptor's head: a plugin of an older one of
     * them takes what NCCL gives ours, cut to its version. Below 5 the shapes differ. */
    char sym[32];
    void *table = NULL;
    int v = version;
    for (; v >= (version >= 5 ? 5 : version) && !table; v--) {
        snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
        table = ls_dl_lookup(lib, sym, NULL);
    }
    if (!table) {
        ls_warn("profiler plugin %s has no ncclProfiler_v%d%s (NCCL speaks version %d to "
                "lockstep's plugin); it is not chained",
                name, version, version > 5 ? " down to _v5" : "", version);
        dlclose(lib);
        return;
    }
    chain.table = table;
    chain.version = v + 1;
    chain.state = 1;
}

/* Whether the chained plugin's version knows events of `type` (NCCL asks ours for those of its
 * own version). */
static int chain_knows(uint64_t type)
{
    if (type == NPR_KERNEL_PHASE)
        return chain.version >= 7;
    if (type & (NPR_CE_COLL | NPR_CE_SYNC | NPR_CE_BATCH))
        return chain.version >= 6;
    return 1;
}

/* The chained plugin's init for `pc` (its context in pc->inner, 0 on failure). */
static void chain_init(struct pl_comm *pc, int *mask, const char *name, uint64_t hash, int nnodes,
                       int nranks, int rank, npr_logger log)
{
    int inner_mask = 0;
    npr_result r;
    if (pc->version >= 5)
        r = ((struct npr_plugin_v5 *)chain.table)
                ->init(&pc->inner, hash, &inner_mask, name, nnodes, nranks, rank, log);
    else if (pc->version == 4)
        r = ((struct npr_plugin_v4 *)chain.table)
                ->init(&pc->inner, &inner_mask, name, hash, nnodes, nranks, rank, log);
    else
        r = ((struct npr_plugin_v1 *)chain.table)->init(&pc->inner, &inner_mask);
    if (r != 0) {
        ls_warn("the chained profiler plugin's init failed (%d); this communicator goes on "
                "without it",
                r);
        return;
    }
    pc->chained = 1;
    *mask |= inner_mask;
}

/* LOCKSTEP_PLUGIN_STEPS, read once (a bad value is said once). */
static int proxy_steps(void)
{
    static _Atomic int steps = -1;
    int v = atomic_load(&steps);
    if (v < 0) {
        v = (int)ls_knob_int(LS_KNOB_PLUGIN_STEPS);
        atomic_store(&steps, v);
    }
    return v;
}

/* init, for every version: `hash` 0 and nranks -1 when NCCL does not say (v1..v3). */
static npr_result plugin_init(int version, void **ctx, int *mask, const char *name, uint64_t hash,
                              int nnodes, int nranks, int rank, npr_logger log)
{
    *ctx = NULL;
    struct pl_comm *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return 1; /* ncclSystemError: NCCL goes on without the plugin */
    pc->version = version;
    pc->idx = -1;
    pc->rank = rank;
    pc->nranks = nranks;
    pthread_mutex_init(&pc->lock, NULL);
    if (name)
        snprintf(pc->name, sizeof pc->name, "%s", name);
    pthread_mutex_lock(&plugin_lock);
    pc->ordinal = ++init_count;
    const struct ls_bridge *b = find_bridge();
    chain_load(version);
    pthread_mutex_unlock(&plugin_lock);
    if (b) {
        pc->t = b->active();
        pc->shim = 1;
    } else {
        ls_g.completion_by_plugin = 1;
        pc->t = ls_active();
    }
    if (!pc->t) { /* recording is off (LOCKSTEP_DISABLE) or the trace could not be made */
        pthread_mutex_destroy(&pc->lock);
        free(pc);
        return 1;
    }
    *mask =
        NPR_COLL | NPR_P2P | NPR_PROXY_OP | NPR_KERNEL_CH | (proxy_steps() ? NPR_PROXY_STEP : 0);
    if (chain.state == 1)
        chain_init(pc, mask, name, hash, nnodes, nranks, rank, log);
    if (version >= 4)
        pl_comm_attach(pc, hash);
    pl_comm_track(pc);
    *ctx = pc;
    return 0;
}

static npr_result plugin_finalize(void *ctx)
{
    struct pl_comm *pc = ctx;
    if (!pc)
        return 0;
    if (pc->chained)
        ((struct npr_plugin_v1 *)chain.table)->finalize(pc->inner);
    pl_comm_end(pc);
    return 0;
}

/* Bytes of a descriptor of `version` holding an event of `type` (copied for the chain). */
static size_t descr_size(int version, uint64_t type)
{
    if (version <= 4)
        return version == 1   ? sizeof(struct npr_descr_v1)
               : version == 2 ? sizeof(struct npr_descr_v2)
               : version == 3 ? sizeof(struct npr_descr_v3)
                              : sizeof(struct npr_descr_v4);
    size_t head = offsetof(struct npr_descr_v5, coll);
    switch (type) {
    case NPR_COLL:
        return head + (version >= 7 ? sizeof(((struct npr_descr_v7 *)0)->coll)
                                    : sizeof(((struct npr_descr_v5 *)0)->coll));
    case NPR_P2P:
        return head + (version >= 7 ? sizeof(((struct npr_descr_v7 *)0)->p2p)
                                    : sizeof(((struct npr_descr_v5 *)0)->p2p));
    case NPR_KERNEL_PHASE:
        return head + sizeof(((struct npr_descr_v7 *)0)->kernel_phase);
    case NPR_PROXY_OP:
    case NPR_PROXY_STEP:
    case NPR_KERNEL_CH:
    case NPR_NET_PLUGIN:
    case NPR_GROUP:
    case NPR_PROXY_CTRL:
        return head + sizeof(struct npr_kernel_ch) + sizeof(struct npr_proxy_op);
    default:
        return version >= 7 ? sizeof(struct npr_descr_v7) : sizeof(struct npr_descr_v5);
    }
}

/* The descriptor's common head, whatever the version. */
static uint64_t descr_type(int version, const void *d)
{
    return version >= 5 ? ((const struct npr_descr_v5 *)d)->type
                        : ((const struct npr_descr_v1 *)d)->type;
}

static void *inner_of(void *handle)
{
    return handle ? ((struct pl_event *)handle)->inner : NULL;
}

/* Starts the chained plugin's event: the descriptor copied (cut to the chained plugin's version),
 * its parents replaced by the chained plugin's own handles. */
static void chain_start(struct pl_comm *pc, struct pl_event *ev, const void *d)
{
    uint64_t type = descr_type(pc->version, d);
    if (!chain_knows(type))
        return;
    size_t n = descr_size(pc->version < chain.version ? pc->version : chain.version, type);
    union {
        struct npr_descr_v1 v1;
        struct npr_descr_v2 v2;
        struct npr_descr_v3 v3;
        struct npr_descr_v4 v4;
        struct npr_descr_v5 v5;
        struct npr_descr_v7 v7;
    } copy;
    memset(&copy, 0, sizeof copy);
    memcpy(&copy, d, n < sizeof copy ? n : sizeof copy);
    if (pc->version >= 5) {
        copy.v5.parent = inner_of(copy.v5.parent);
        if (type == NPR_COLL)
            copy.v5.coll.parent_group = inner_of(copy.v5.coll.parent_group);
        else if (type == NPR_P2P)
            copy.v5.p2p.parent_group = inner_of(copy.v5.p2p.parent_group);
    } else {
        copy.v1.parent = inner_of(copy.v1.parent);
    }
    ((struct npr_plugin_v1 *)chain.table)->start_event(pc->inner, &ev->inner, &copy);
}

static npr_result plugin_start(int version, void *ctx, void **handle, void *d)
{
    *handle = NULL;
    struct pl_comm *pc = ctx;
    if (!pc || !d)
        return 0;
    struct pl_event *ev = pl_event_start(pc, version, d);
    if (!ev && pc->chained)
        ev = pl_event_other(pc);
    if (ev && pc->chained)
        chain_start(pc, ev, d);
    *handle = ev;
    return 0;
}

static npr_result plugin_stop(void *handle)
{
    struct pl_event *ev = handle;
    if (!ev)
        return 0;
    if (ev->comm->chained && ev->inner)
        ((struct npr_plugin_v1 *)chain.table)->stop_event(ev->inner);
    pl_event_stop(ev);
    return 0;
}

static npr_result plugin_state(void *handle, int state, void *args)
{
    struct pl_event *ev = handle;
    if (!ev)
        return 0;
    if (ev->comm->chained && ev->inner)
        ((struct npr_plugin_v1 *)chain.table)->record_state(ev->inner, state, args);
    pl_event_state(ev, state);
    return 0;
}

/* ---- the tables NCCL looks up, newest first ---- */

static npr_result init_v1(void **ctx, int *mask)
{
    return plugin_init(1, ctx, mask, NULL, 0, 1, -1, -1, NULL);
}
static npr_result init_v2(void **ctx, int *mask)
{
    return plugin_init(2, ctx, mask, NULL, 0, 1, -1, -1, NULL);
}
static npr_result init_v3(void **ctx, int *mask)
{
    return plugin_init(3, ctx, mask, NULL, 0, 1, -1, -1, NULL);
}
static npr_result init_v4(void **ctx, int *mask, const char *name, uint64_t hash, int nnodes,
                          int nranks, int rank, npr_logger log)
{
    return plugin_init(4, ctx, mask, name, hash, nnodes, nranks, rank, log);
}
static npr_result init_v5(void **ctx, uint64_t id, int *mask, const char *name, int nnodes,
                          int nranks, int rank, npr_logger log)
{
    return plugin_init(5, ctx, mask, name, id, nnodes, nranks, rank, log);
}
static npr_result init_v6(void **ctx, uint64_t id, int *mask, const char *name, int nnodes,
                          int nranks, int rank, npr_logger log)
{
    return plugin_init(6, ctx, mask, name, id, nnodes, nranks, rank, log);
}
static npr_result init_v7(void **ctx, uint64_t id, int *mask, const char *name, int nnodes,
                          int nranks, int rank, npr_logger log)
{
    return plugin_init(7, ctx, mask, name, id, nnodes, nranks, rank, log);
}

#define START_V(n)                                                                                 \
    static npr_result start_v##n(void *ctx, void **handle, void *d)                                \
    {                                                                                              \
        return plugin_start(n, ctx, handle, d);                                                    \
    }
START_V(1)
START_V(2)
START_V(3)
START_V(4)
START_V(5)
START_V(6)
START_V(7)

#define PLUGIN_NAME "lockstep"
struct npr_plugin_v1 ncclProfiler_v1 = {PLUGIN_NAME, init_v1,      start_v1,
                                        plugin_stop, plugin_state, plugin_finalize};
struct npr_plugin_v1 ncclProfiler_v2 = {PLUGIN_NAME, init_v2,      start_v2,
                                        plugin_stop, plugin_state, plugin_finalize};
struct npr_plugin_v1 ncclProfiler_v3 = {PLUGIN_NAME, init_v3,      start_v3,
                                        plugin_stop, plugin_state, plugin_finalize};
struct npr_plugin_v4 ncclProfiler_v4 = {PLUGIN_NAME, init_v4,      start_v4,
                                        plugin_stop, plugin_state, plugin_finalize};
struct npr_plugin_v5 ncclProfiler_v5 = {PLUGIN_NAME, init_v5,      start_v5,
                                        plugin_stop, plugin_state, plugin_finalize};
struct npr_plugin_v5 ncclProfiler_v6 = {PLUGIN_NAME, init_v6,      start_v6,
                                        plugin_stop, plugin_state, plugin_finalize};
struct npr_plugin_v5 ncclProfiler_v7 = {PLUGIN_NAME, init_v7,      start_v7,
                                        plugin_stop, plugin_state, plugin_finalize};
