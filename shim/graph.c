/* graph.c -- the CUDA driver's graph entry points: each launch of an executable graph that holds
 * NCCL calls is recorded as the calls it replays (graph_capture.c keeps which).
 *
 * A program reaches the driver three ways, and each is covered:
 *   - linked with -lcuda, it calls the exported names: this file exports them (the SLOTS rows
 *     with a symbol) and forwards to libcuda's;
 *   - through a handle (dlopen("libcuda.so.1") then dlsym, as most loaders do), dlsym.c asks
 *     ls_graph_dlsym() and hands out the same wrappers;
 *   - through cuGetProcAddress, as the CUDA runtime finds every driver function (cudaGraphLaunch
 *     is cuGraphLaunch reached this way): the wrapped cuGetProcAddress hands out a wrapper of
 *     its own for each graph entry point it returns (the rows without a symbol), which
 *     remembers the function the driver gave.
 * A wrapper called while another one runs (a driver entry point calling another, as an
 * emulated one may) forwards untouched. Each launch costs a lookup and one record per call it
 * replays, written after the driver accepted the launch, on its stream, with one GPU event
 * behind them (completion.c). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "shim.h"

enum kind { K_LAUNCH, K_INSTANTIATE, K_EXEC_DESTROY, K_GRAPH_DESTROY, K_PROC_ADDRESS };

/* name: the entry point's base name (what cuGetProcAddress is asked for); symbol: the libcuda
 * symbol the export of that name forwards to, NULL for a row that wraps what cuGetProcAddress
 * returned (ptds: the per-thread default stream form was asked for). */
#define SLOTS(X)                                                                                   \
    X(0, K_LAUNCH, "cuGraphLaunch", "cuGraphLaunch", 0)                                            \
    X(1, K_LAUNCH, "cuGraphLaunch", "cuGraphLaunch_ptsz", 1)                                       \
    X(2, K_INSTANTIATE, "cuGraphInstantiate", "cuGraphInstantiate", 0)                             \
    X(3, K_INSTANTIATE, "cuGraphInstantiate_v2", "cuGraphInstantiate_v2", 0)                       \
    X(4, K_INSTANTIATE, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags", 0)           \
    X(5, K_INSTANTIATE, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams", 0)         \
    X(6, K_INSTANTIATE, "cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams_ptsz", 1)    \
    X(7, K_EXEC_DESTROY, "cuGraphExecDestroy", "cuGraphExecDestroy", 0)                            \
    X(8, K_GRAPH_DESTROY, "cuGraphDestroy", "cuGraphDestroy", 0)                                   \
    X(9, K_PROC_ADDRESS, "cuGetProcAddress", "cuGetProcAddress", 0)                                \
    X(10, K_PROC_ADDRESS, "cuGetProcAddress_v2", "cuGetProcAddress_v2", 0)                         \
    X(11, K_LAUNCH, "cuGraphLaunch", NULL, 0)                                                      \
    X(12, K_LAUNCH, "cuGraphLaunch", NULL, 1)                                                      \
    X(13, K_INSTANTIATE, "cuGraphInstantiate", NULL, 0)                                            \
    X(14, K_INSTANTIATE, "cuGraphInstantiateWithFlags", NULL, 0)                                   \
    X(15, K_INSTANTIATE, "cuGraphInstantiateWithParams", NULL, 0)                                  \
    X(16, K_INSTANTIATE, "cuGraphInstantiateWithParams", NULL, 1)                                  \
    X(17, K_EXEC_DESTROY, "cuGraphExecDestroy", NULL, 0)                                           \
    X(18, K_GRAPH_DESTROY, "cuGraphDestroy", NULL, 0)                                              \
    X(19, K_PROC_ADDRESS, "cuGetProcAddress", NULL, 0)

#define NSLOTS 20

static void *_Atomic real_of[NSLOTS];
static LS_TLS int in_driver; /* a wrapper of this thread is forwarding */

struct slot {
    const char *name, *symbol;
    int ptds;
    void *wrapper;
};

/* The function slot `i` forwards to: what cuGetProcAddress gave, else libcuda's symbol. */
static void *real(int i, const char *symbol)
{
    void *p = atomic_load_explicit(&real_of[i], memory_order_acquire);
    if (p || !symbol)
        return p;
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return NULL;
    p = ls_dl_lookup(h, symbol, NULL);
    dlclose(h); /* the program keeps it loaded */
    if (!p || ls_in_shim(p))
        return NULL;
    atomic_store_explicit(&real_of[i], p, memory_order_release);
    return p;
}

/* ---- what the wrappers do ---- */

/* Records the calls launch `launch` of `exec` replays on `stream`, entered at `t0`. */
static void replay(CUgraphExec exec, CUstream stream, uint64_t t0, const void *pc, const void *cfa)
{
    struct ls_graph_call *calls;
    uint64_t launch = 0;
    uint32_t n = ls_graph_calls((uintptr_t)exec, &calls, &launch);
    struct ls_call c = {0};
    uint32_t site = 0;
    int recorded = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct ls_graph_call *g = &calls[i];
        struct ls_call_args a = {
            .op = g->op,
            .comm = g->comm,
            .count = g->count,
            .dtype = g->dtype == LS_DTYPE_NONE ? -1 : g->dtype,
            .redop = g->redop,
            .peer = g->peer,
            .sendbuff = (const void *)(uintptr_t)g->sendbuff,
            .recvbuff = (const void *)(uintptr_t)g->recvbuff,
            .stream = stream,
            .caller_pc = pc,
            .caller_cfa = cfa,
            .has_site = recorded,
            .site = site,
            .enter_ns = t0,
            .aux = ls_op_is_onesided(g->op) ? g->aux : ls_replay_aux(launch, g->site),
            .xflags = LS_REC_GRAPH_REPLAY | g->xflags,
            .issued_later = 1, /* its stream is told once for the launch, below */
        };
        if (!ls_call_enter(&c, &a))
            break;
        site = c.site;
        recorded = 1;
        ls_call_exit(&c, 0);
    }
    if (recorded && ls_completion_active())
        ls_completion_issue(c.t, stream, c.ticket, c.exit_ns);
    free(calls);
}

static CUresult launch(int i, const char *symbol, CUgraphExec exec, CUstream stream, const void *pc,
                       const void *cfa)
{
    CUresult (*fn)(CUgraphExec, CUstream) = (CUresult(*)(CUgraphExec, CUstream))real(i, symbol);
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    if (in_driver || !ls_graph_any())
        return fn(exec, stream);
    in_driver = 1;
    uint64_t t0 = ls_now();
    /* As before any call that issues work after a gap: an event behind what the stream holds
     * now, so that a replay that never completes does not hide that the work before it did. */
    struct ls_trace *t = ls_completion_active() ? ls_active() : NULL;
    if (t)
        ls_completion_before(t, stream, t0);
    CUresult r = fn(exec, stream);
    if (r == CUDA_SUCCESS)
        replay(exec, stream, t0, pc, cfa);
    in_driver = 0;
    return r;
}

/* Every form of cuGraphInstantiate passes the executable's place and the graph first; the rest
 * (flags, a parameter block, or an error node with a log buffer) is forwarded as it came: five
 * integer-class arguments, in registers on x86-64 and aarch64, where a callee reads only those
 * it has. */
typedef CUresult (*instantiate_fn)(CUgraphExec *, CUgraph, uintptr_t, uintptr_t, uintptr_t);

static CUresult instantiate(int i, const char *symbol, CUgraphExec *exec, CUgraph graph,
                            uintptr_t a3, uintptr_t a4, uintptr_t a5)
{
    instantiate_fn fn = (instantiate_fn)real(i, symbol);
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    if (in_driver)
        return fn(exec, graph, a3, a4, a5);
    in_driver = 1;
    CUresult r = fn(exec, graph, a3, a4, a5);
    if (r == CUDA_SUCCESS && exec && ls_graph_any())
        ls_graph_instantiated((uintptr_t)graph, (uintptr_t)*exec);
    in_driver = 0;
    return r;
}

static CUresult destroy(int i, const char *symbol, void *handle, int exec)
{
    CUresult (*fn)(void *) = (CUresult(*)(void *))real(i, symbol);
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    if (!in_driver)
        ls_graph_forget((uintptr_t)handle, exec);
    in_driver++;
    CUresult r = fn(handle);
    in_driver--;
    return r;
}

static void *wrap_proc(const char *symbol, void *fn, unsigned long long flags);

typedef CUresult (*proc_fn)(const char *, void **, int, cuuint64_t, void *);

/* cuGetProcAddress and its _v2 (which adds a status out-parameter: forwarded the same way as
 * instantiate's extra arguments). */
static CUresult proc_address(int i, const char *symbol, const char *name, void **pfn, int version,
                             cuuint64_t flags, void *status)
{
    proc_fn fn = (proc_fn)real(i, symbol);
    if (!fn)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = fn(name, pfn, version, flags, status);
    if (r == CUDA_SUCCESS && name && pfn && *pfn && !ls_in_shim(*pfn)) {
        void *w = wrap_proc(name, *pfn, flags);
        if (w)
            *pfn = w;
    }
    return r;
}

/* ---- the wrappers, one per slot ---- */

#define WRAPPER(n, kind, name, symbol, ptds) WRAPPER_##kind(n, symbol)
#define WRAPPER_K_LAUNCH(n, symbol)                                                                \
    static CUresult wrap_##n(CUgraphExec e, CUstream s)                                            \
    {                                                                                              \
        return launch(n, symbol, e, s, __builtin_return_address(0), __builtin_dwarf_cfa());        \
    }
#define WRAPPER_K_INSTANTIATE(n, symbol)                                                           \
    static CUresult wrap_##n(CUgraphExec *e, CUgraph g, uintptr_t a3, uintptr_t a4, uintptr_t a5)  \
    {                                                                                              \
        return instantiate(n, symbol, e, g, a3, a4, a5);                                           \
    }
#define WRAPPER_K_EXEC_DESTROY(n, symbol)                                                          \
    static CUresult wrap_##n(CUgraphExec e)                                                        \
    {                                                                                              \
        return destroy(n, symbol, e, 1);                                                           \
    }
#define WRAPPER_K_GRAPH_DESTROY(n, symbol)                                                         \
    static CUresult wrap_##n(CUgraph g)                                                            \
    {                                                                                              \
        return destroy(n, symbol, g, 0);                                                           \
    }
#define WRAPPER_K_PROC_ADDRESS(n, symbol)                                                          \
    static CUresult wrap_##n(const char *name, void **pfn, int version, cuuint64_t flags,          \
                             void *status)                                                         \
    {                                                                                              \
        return proc_address(n, symbol, name, pfn, version, flags, status);                         \
    }
SLOTS(WRAPPER)

#define ROW(n, kind, name, symbol, ptds) {name, symbol, ptds, (void *)wrap_##n},
static const struct slot slots[NSLOTS] = {SLOTS(ROW)};

/* The exports: the wrappers of the rows with a symbol, under that name (asm labels: cuda.h maps
 * several of these names to others with macros). */
#define EXPORT_AS(n, symbol)                                                                       \
    extern __typeof(wrap_##n) export_##n __asm__(symbol)                                           \
        __attribute__((alias("wrap_" #n), visibility("default")));
EXPORT_AS(0, "cuGraphLaunch")
EXPORT_AS(1, "cuGraphLaunch_ptsz")
EXPORT_AS(2, "cuGraphInstantiate")
EXPORT_AS(3, "cuGraphInstantiate_v2")
EXPORT_AS(4, "cuGraphInstantiateWithFlags")
EXPORT_AS(5, "cuGraphInstantiateWithParams")
EXPORT_AS(6, "cuGraphInstantiateWithParams_ptsz")
EXPORT_AS(7, "cuGraphExecDestroy")
EXPORT_AS(8, "cuGraphDestroy")
EXPORT_AS(9, "cuGetProcAddress")
EXPORT_AS(10, "cuGetProcAddress_v2")

/* ---- lookups ---- */

/* The wrapper of what cuGetProcAddress returned for `name`: the row without a symbol for that
 * name and stream form, remembering `fn` (a row that already holds another function hands out
 * none: each wrapper forwards to one). */
static void *wrap_proc(const char *name, void *fn, unsigned long long flags)
{
    int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    for (int i = 0; i < NSLOTS; i++) {
        const struct slot *s = &slots[i];
        if (s->symbol || strcmp(s->name, name) != 0 || s->ptds != ptds)
            continue;
        void *expected = NULL;
        if (atomic_compare_exchange_strong(&real_of[i], &expected, fn) || expected == fn)
            return s->wrapper;
        return NULL;
    }
    return NULL;
}

void *ls_graph_dlsym(void *handle, const char *name, const char *version)
{
    int row = -1;
    for (int i = 0; i < NSLOTS && row < 0; i++)
        if (slots[i].symbol && strcmp(slots[i].symbol, name) == 0)
            row = i;
    if (row < 0)
        return NULL; /* most names: no lookup of ours */
    void *fn = ls_dl_lookup(handle, name, version);
    Dl_info info;
    if (!fn || ls_in_shim(fn) || !dladdr(fn, &info) || !info.dli_fname ||
        strncmp(ls_path_base(info.dli_fname), "libcuda.so", 10) != 0)
        return NULL;
    return slots[row].wrapper;
}
