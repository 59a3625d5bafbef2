/* callsite_cache.h -- each thread's memory of its recent stacks (callsite.c), and the check
 * that recognises one of them inline in the fast path of a wrapper (fast_call.h). */
#ifndef LOCKSTEP_CALLSITE_CACHE_H
#define LOCKSTEP_CALLSITE_CACHE_H

#include "shim.h"

/* A stack is remembered by the address of each frame's return-address slot and the return
 * address found there. The same call instruction (pc0) reached with the same stack pointer
 * (slot0) from the same callers leaves the same words in the same slots; a different path
 * changes at least one of them. So a call whose (pc0, slot0) is remembered and whose
 * remembered slots all still hold their return addresses has the remembered site, found with
 * one load and compare per frame. Slots are only remembered inside this thread's stack, and
 * checked only while slot0 is inside it too, so the loads cannot fault. */
#define CACHE_WAYS 16
struct chain {
    uintptr_t pc0, slot0;           /* key: the caller's return address and where it is stored */
    uintptr_t seen_pc0, seen_slot0; /* a key seen once, not remembered yet */
    uint32_t site;                  /* 0: empty */
    uint32_t py;                    /* the python site `site` was found with */
    uint32_t n;                     /* frames remembered */
    uint32_t uncounted;             /* hits not yet added to the site's shared count */
    uintptr_t *slot, *pc;           /* n each: slot addresses and the return addresses they hold */
};
struct site_cache {
    int pid; /* process the site ids belong to */
    uint32_t depth;
    uintptr_t stack_lo, stack_hi;
    struct chain e[CACHE_WAYS];
};

/* Hits of a chain are added to its site's shared count this many at a time. */
#define LS_SITE_COUNT_BATCH 64

/* Adds a chain's uncounted hits to its site's count: an add per LS_SITE_COUNT_BATCH calls
 * rather than a store to a line every thread calling from that site writes. Approximate under
 * contention, as the format says: no atomic add. */
void ls_callsite_count_flush(struct ls_trace *t, struct chain *e);

/* The calling thread's cache when the fast path may use it for trace t: made for this process
 * and t's depth, and t records no Python frames. NULL otherwise (callsite.c). */
struct site_cache *ls_callsite_fast_cache(const struct ls_trace *t);

static inline struct chain *way_of(struct site_cache *sc, uintptr_t pc0, uintptr_t slot0)
{
    /* slot0's low 4 bits are the same for every call (16-byte aligned frames): shifted out */
    uint64_t h = (uint64_t)(pc0 ^ (slot0 >> 4)) * 0x9e3779b97f4a7c15ull;
    return &sc->e[h >> 60];
}

/* The site id of the calling thread's stack when the thread remembers it (ls_callsite_capture's
 * cache hit), 0 when not: the caller then calls ls_callsite_capture(). For the fast path
 * (fast_call.h): `sc` is the thread's cache, which the general path found valid for this
 * trace (its process and depth, no Python frames: ls_thread.fast_sites). Makes no call: when
 * the hit completes a batch of uncounted hits, the chain is left in ls_thread.fast_flush for
 * ls_fast_exit() to add to the site's count after the forwarded call. `caller_pc`/`caller_cfa`
 * as in struct ls_call_args. */
static inline __attribute__((always_inline)) uint32_t
ls_callsite_hit(struct site_cache *sc, const void *caller_pc, const void *caller_cfa)
{
    uintptr_t pc0 = (uintptr_t)caller_pc;
    uintptr_t slot0 = (uintptr_t)caller_cfa - sizeof(uintptr_t);
    if (LS_UNLIKELY(slot0 < sc->stack_lo || slot0 >= sc->stack_hi))
        return 0;
    struct chain *e = way_of(sc, pc0, slot0);
    if (LS_UNLIKELY(e->pc0 != pc0 || e->slot0 != slot0))
        return 0;
    /* Every remembered slot still holds its return address; two frames a turn. */
    const uintptr_t *slot = e->slot + 1, *end = e->slot + e->n;
    ptrdiff_t to_pc = e->pc - e->slot;
    uintptr_t differ = 0;
    for (; slot + 1 < end; slot += 2)
        differ |= (*(const volatile uintptr_t *)slot[0] ^ slot[to_pc]) |
                  (*(const volatile uintptr_t *)slot[1] ^ slot[to_pc + 1]);
    if (slot < end)
        differ |= *(const volatile uintptr_t *)slot[0] ^ slot[to_pc];
    if (LS_UNLIKELY(differ))
        return 0;
    if (LS_UNLIKELY(++e->uncounted >= LS_SITE_COUNT_BATCH)) {
        ls_t.fast_flush = e;
        ls_t.fast_limit = 0;
    }
    return e->site;
}

#endif
