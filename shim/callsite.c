/* callsite.c -- call sites: stacks captured with libunwind, deduplicated, symbolized once. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "shim.h"

#define SITE_SLOTS (2 * LS_DEFAULT_SITES)
#define SHIM_SKIP 4 /* at most this many leading frames belong to the shim */

/* In-process index: stack hash -> site index + 1 (0 = free slot). */
struct site_slot {
    _Atomic uint64_t hash;
    _Atomic uint32_t site; /* site id (index + 1); 0 while being filled */
};
static struct site_slot site_slots[SITE_SLOTS];
static pthread_mutex_t site_lock = PTHREAD_MUTEX_INITIALIZER;

/* Module paths already in the string pool (the pointer from dladdr is stable per object). */
struct module_str {
    const char *path;
    uint32_t off;
};
static struct module_str modules[256];
static int nmodules;

static uintptr_t shim_lo, shim_hi; /* text of liblockstep.so */

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t me = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + p->p_vaddr, hi = lo + p->p_memsz;
        if (me >= lo && me < hi) {
            shim_lo = lo;
            shim_hi = hi;
            return 1;
        }
    }
    return 0;
}

static uint64_t hash_pcs(void *const *pcs, int n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uintptr_t)pcs[i];
        h *= 0x100000001b3ull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

static struct ls_site *site_at(struct ls_trace *t, uint32_t idx)
{
    return (struct ls_site *)(t->sites + (size_t)idx * t->hdr->site_entry_size);
}

static int same_stack(struct ls_trace *t, uint32_t id, void *const *pcs, int n)
{
    struct ls_site *s = site_at(t, id - 1);
    if ((int)s->nframes != n)
        return 0;
    const struct ls_frame *f = (const struct ls_frame *)(s + 1);
    for (int i = 0; i < n; i++)
        if (f[i].pc != (uint64_t)(uintptr_t)pcs[i])
            return 0;
    return 1;
}

static uint32_t module_string(struct ls_trace *t, const char *path)
{
    for (int i = 0; i < nmodules; i++)
        if (modules[i].path == path)
            return modules[i].off;
    uint32_t off = ls_trace_add_string(t, path);
    if (off && nmodules < (int)(sizeof modules / sizeof modules[0]))
        modules[nmodules++] = (struct module_str){path, off};
    return off;
}

/* Fills a new site entry (site lock held). Returns its id or 0 when the table is full. */
static uint32_t add_site(struct ls_trace *t, uint64_t hash, void *const *pcs, int n)
{
    uint32_t idx = t->hdr->site_count;
    if (idx >= t->hdr->site_cap) {
        atomic_fetch_or_explicit((_Atomic uint32_t *)&t->hdr->flags, LS_HFLAG_SITES_FULL,
                                 memory_order_relaxed);
        return 0;
    }
    struct ls_site *s = site_at(t, idx);
    struct ls_frame *f = (struct ls_frame *)(s + 1);
    for (int i = 0; i < n; i++) {
        uintptr_t pc = (uintptr_t)pcs[i];
        f[i].pc = pc;
        Dl_info info;
        /* A return address points after the call; look up the call instruction itself. */
        if (dladdr((void *)(pc - 1), &info)) {
            f[i].module_off = pc - (uintptr_t)info.dli_fbase;
            if (info.dli_fname && *info.dli_fname)
                f[i].module = module_string(t, info.dli_fname);
            if (info.dli_sname) {
                f[i].symbol = ls_trace_add_string(t, info.dli_sname);
                f[i].symbol_off = pc - (uintptr_t)info.dli_saddr;
            }
        }
    }
    s->nframes = (uint32_t)n;
    s->hash = hash;
    atomic_store_explicit((_Atomic uint32_t *)&s->state, 1, memory_order_release);
    atomic_store_explicit((_Atomic uint32_t *)&t->hdr->site_count, idx + 1, memory_order_release);
    return idx + 1;
}

uint32_t ls_callsite_capture(struct ls_trace *t)
{
    uint32_t depth = t->hdr->stack_depth;
    if (depth == 0)
        return 0;
    void *raw[LS_MAX_STACK_DEPTH + SHIM_SKIP];
    int n = unw_backtrace(raw, (int)depth + SHIM_SKIP);
    if (LS_UNLIKELY(shim_hi == 0))
        dl_iterate_phdr(find_self, (void *)(uintptr_t)&ls_callsite_capture);
    int skip = 0;
    while (skip < n && (uintptr_t)raw[skip] >= shim_lo && (uintptr_t)raw[skip] < shim_hi)
        skip++;
    void **pcs = raw + skip;
    n -= skip;
    if (n > (int)depth)
        n = (int)depth;
    if (n <= 0)
        return 0;

    uint64_t hash = hash_pcs(pcs, n);
    size_t i = (size_t)(hash % SITE_SLOTS);
    for (size_t probes = 0; probes < SITE_SLOTS; probes++, i = (i + 1) % SITE_SLOTS) {
        uint64_t cur = atomic_load_explicit(&site_slots[i].hash, memory_order_acquire);
        if (cur == 0)
            break;
        if (cur == hash) {
            uint32_t id = atomic_load_explicit(&site_slots[i].site, memory_order_acquire);
            if (id && same_stack(t, id, pcs, n)) {
                atomic_fetch_add_explicit((_Atomic uint64_t *)&site_at(t, id - 1)->count, 1,
                                          memory_order_relaxed);
                return id;
            }
        }
    }

    /* First sight of this stack: register and symbolize it under the lock. */
    pthread_mutex_lock(&site_lock);
    uint32_t id = 0;
    i = (size_t)(hash % SITE_SLOTS);
    for (size_t probes = 0; probes < SITE_SLOTS; probes++, i = (i + 1) % SITE_SLOTS) {
        uint64_t cur = atomic_load_explicit(&site_slots[i].hash, memory_order_relaxed);
        if (cur == hash) {
            uint32_t s = atomic_load_explicit(&site_slots[i].site, memory_order_relaxed);
            if (s && same_stack(t, s, pcs, n)) {
                id = s;
                break;
            }
            continue;
        }
        if (cur == 0) {
            id = add_site(t, hash, pcs, n);
            if (id) {
                atomic_store_explicit(&site_slots[i].site, id, memory_order_relaxed);
                atomic_store_explicit(&site_slots[i].hash, hash, memory_order_release);
            }
            break;
        }
    }
    pthread_mutex_unlock(&site_lock);
    if (id)
        atomic_fetch_add_explicit((_Atomic uint64_t *)&site_at(t, id - 1)->count, 1,
                                  memory_order_relaxed);
    return id;
}

void ls_callsites_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    site_lock = fresh;
    memset(site_slots, 0, sizeof site_slots);
    nmodules = 0;
}
