/* graph_capture.c -- what CUDA graphs hold of NCCL: the calls captured into each graph (its
 * templates), copied to each executable graph instantiated from it, so that graph.c can record
 * every launch of an executable as the calls it replays.
 *
 * A call issued into a stream being captured does not run then; it runs each time an executable
 * graph instantiated from the capture is launched. record.c hands each such call here (its
 * record, flagged LS_REC_GRAPH_CAPTURED); the driver says which graph the capture builds
 * (cuStreamGetCaptureInfo_v2, looked up in the libcuda the program loaded), and the call becomes
 * one template of that graph: its op, shape, communicator, peer, and the call site of its capture.
 * One table, keyed by CUgraph or CUgraphExec handle, under one lock: captures and
 * instantiations are rare, launches look one entry up. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "shim.h"

#define BUCKETS 256 /* a power of two */

struct graph_entry {
    struct graph_entry *next;
    uintptr_t key; /* the CUgraph or CUgraphExec */
    int exec;      /* 1: an executable graph */
    uint32_t n, cap;
    uint64_t launches;
    struct ls_graph_call *calls;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct graph_entry *buckets[BUCKETS];
static _Atomic int any_templates; /* some graph holds NCCL calls: launches are worth a look */

typedef CUresult (*capture_info_fn)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                    const CUgraphNode **, size_t *);
static capture_info_fn capture_info;
static pthread_once_t capture_info_once = PTHREAD_ONCE_INIT;

static void capture_info_find(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return;
    *(void **)&capture_info = ls_dl_lookup(h, "cuStreamGetCaptureInfo_v2", NULL);
    dlclose(h); /* the program keeps it loaded */
}

static unsigned bucket_of(uintptr_t key)
{
    uint64_t x = (uint64_t)key * 0x9e3779b97f4a7c15ull;
    return (unsigned)(x >> 56) & (BUCKETS - 1);
}

/* The entry of `key` (lock held), NULL none. */
static struct graph_entry *find(uintptr_t key, int exec)
{
    for (struct graph_entry *e = buckets[bucket_of(key)]; e; e = e->next)
        if (e->key == key && e->exec == exec)
            return e;
    return NULL;
}

/* Removes the entry of `key` (lock held). */
static void drop(uintptr_t key, int exec)
{
    for (struct graph_entry **p = &buckets[bucket_of(key)]; *p; p = &(*p)->next)
        if ((*p)->key == key && (*p)->exec == exec) {
            struct graph_entry *e = *p;
            *p = e->next;
            free(e->calls);
            free(e);
            return;
        }
}

/* The entry of `key`, made empty when new (lock held); NULL when memory is short. */
static struct graph_entry *get(uintptr_t key, int exec)
{
    struct graph_entry *e = find(key, exec);
    if (e)
        return e;
    e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->key = key;
    e->exec = exec;
    unsigned b = bucket_of(key);
    e->next = buckets[b];
    buckets[b] = e;
    return e;
}

static int append(struct graph_entry *e, const struct ls_graph_call *c)
{
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 8;
        struct ls_graph_call *grown = realloc(e->calls, cap * sizeof *grown);
        if (!grown)
            return -1;
        e->calls = grown;
        e->cap = cap;
    }
    e->calls[e->n++] = *c;
    return 0;
}

/* The handle of the communicator a record names (its id and the caller's rank), 0 unknown. */
static uintptr_t comm_handle(struct ls_trace *t, const struct ls_record *r)
{
    uint32_t n =
        atomic_load_explicit((_Atomic uint32_t *)&t->hdr->comm_count, memory_order_acquire);
    for (uint32_t i = 0; i < n && i < t->hdr->comm_cap; i++)
        if (t->comms[i].comm_id == r->comm_id && t->comms[i].rank == r->comm_rank &&
            !t->comms[i].ended_ns)
            return (uintptr_t)t->comms[i].handle;
    return 0;
}

int ls_graph_note(struct ls_trace *t, const struct ls_record *r, const void *stream)
{
    pthread_once(&capture_info_once, capture_info_find);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph graph = NULL;
    if (!capture_info ||
        capture_info((CUstream)stream, &st, &id, &graph, NULL, NULL) != CUDA_SUCCESS ||
        st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !graph)
        return 0; /* the capture stays hidden: the analyzer says so (graph_captured) */
    struct ls_graph_call c = {
        .comm = comm_handle(t, r),
        .count = r->count,
        .sendbuff = r->sendbuff,
        .recvbuff = r->recvbuff,
        .site = r->callsite,
        .aux = r->aux,
        .peer = r->peer,
        .redop = r->redop,
        .op = r->op,
        .dtype = r->dtype,
        .xflags = r->flags & LS_REC_CTA_MASK,
    };
    if (!c.comm)
        return 0;
    pthread_mutex_lock(&lock);
    struct graph_entry *e = get((uintptr_t)graph, 0);
    int kept = e && append(e, &c) == 0;
    if (kept)
        atomic_store_explicit(&any_templates, 1, memory_order_release);
    pthread_mutex_unlock(&lock);
    return kept;
}

int ls_graph_any(void)
{
    return atomic_load_explicit(&any_templates, memory_order_acquire);
}

void ls_graph_instantiated(uintptr_t graph, uintptr_t exec)
{
    pthread_mutex_lock(&lock);
    drop(exec, 1); /* a handle the driver gave out again */
    struct graph_entry *g = find(graph, 0);
    struct graph_entry *e = g && g->n ? get(exec, 1) : NULL;
    for (uint32_t i = 0; e && i < g->n; i++)
        if (append(e, &g->calls[i]) != 0)
            break;
    pthread_mutex_unlock(&lock);
}

void ls_graph_forget(uintptr_t key, int exec)
{
    if (!ls_graph_any())
        return;
    pthread_mutex_lock(&lock);
    drop(key, exec);
    pthread_mutex_unlock(&lock);
}

uint32_t ls_graph_calls(uintptr_t exec, struct ls_graph_call **calls, uint64_t *launch)
{
    uint32_t n = 0;
    *calls = NULL;
    pthread_mutex_lock(&lock);
    struct graph_entry *e = find(exec, 1);
    if (e && e->n && (*calls = malloc(e->n * sizeof **calls)) != NULL) {
        memcpy(*calls, e->calls, e->n * sizeof **calls);
        n = e->n;
        *launch = ++e->launches;
    }
    pthread_mutex_unlock(&lock);
    return n;
}
