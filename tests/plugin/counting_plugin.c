/* counting_plugin.c -- a user's NCCL profiler plugin (API v6, or v7 built with COUNTING_V7) for
 * the chaining tests: counts the events it is given by type and writes "type count" lines to
 * $COUNTING_PLUGIN_OUT.<pid> at each finalize. Checks that every parent it is handed is one of
 * its own handles; as v7, counts the collective events whose descriptor holds v7's own members
 * (the kernel variant), which a descriptor cut to an older version's would not. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lockstep/nccl_profiler.h"

static long counts[16];
static long foreign_parents, inits, finalizes, variants;

struct handle {
    uint32_t magic;
    uint64_t type;
};
#define MAGIC 0x636e7430u

static npr_result init(void **ctx, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                       int rank, npr_logger log)
{
    (void)id, (void)name, (void)nnodes, (void)nranks, (void)rank, (void)log;
    static int token;
    *ctx = &token;
    *mask = NPR_GROUP | NPR_COLL | NPR_P2P | NPR_PROXY_OP | NPR_PROXY_STEP | NPR_KERNEL_CH;
    inits++;
    return 0;
}

static npr_result start(void *ctx, void **eh, void *descr)
{
    (void)ctx;
    struct npr_descr_v5 *d = descr;
    static struct handle pool[1 << 16]; /* handles outlive their stop: never freed */
    static _Atomic unsigned next;
    struct handle *h = &pool[next++ % (1 << 16)];
    h->magic = MAGIC;
    h->type = d->type;
    const struct handle *p = d->parent;
    if (p && p->magic != MAGIC)
        foreign_parents++;
    for (int b = 0; b < 16; b++)
        if (d->type == (1ull << b))
            counts[b]++;
#ifdef COUNTING_V7
    if (d->type == NPR_COLL && ((struct npr_descr_v7 *)descr)->coll.kernel_variant)
        variants++;
#endif
    *eh = h;
    return 0;
}

/* Kept: NCCL stops a collective's event before its channel and proxy events start (they name
 * it as their parent), so a handle outlives its stop. */
static npr_result stop(void *eh)
{
    (void)eh;
    return 0;
}

static npr_result state(void *eh, int s, void *args)
{
    (void)eh, (void)s, (void)args;
    return 0;
}

static npr_result fini(void *ctx)
{
    (void)ctx;
    finalizes++;
    const char *out = getenv("COUNTING_PLUGIN_OUT");
    if (!out)
        return 0;
    char path[512];
    snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return 0;
    fprintf(f, "inits %ld\nfinalizes %ld\nforeign_parents %ld\nvariants %ld\n", inits, finalizes,
            foreign_parents, variants);
    for (int b = 0; b < 16; b++)
        fprintf(f, "type%d %ld\n", 1 << b, counts[b]);
    fclose(f);
    return 0;
}

#ifdef COUNTING_V7
struct npr_plugin_v5 ncclProfiler_v7 = {"counting", init, start, stop, state, fini};
#else
struct npr_plugin_v5 ncclProfiler_v6 = {"counting", init, start, stop, state, fini};
#endif
