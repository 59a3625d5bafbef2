/* callsite.c -- call sites: stacks captured with libunwind, deduplicated, symbolized once, and
 * recognised again without unwinding (each thread remembers where its recent stacks keep their
 * return addresses and checks those words instead of walking the frames). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "callsite_cache.h"
#include "shim.h"

#define SITE_SLOTS (2 * LS_DEFAULT_SITES)
#define SHIM_SKIP                                                                                  \
    6 /* at most this many leading frames belong to the shim (the general path:                    \
       * capture_slow, ls_callsite_capture, ls_call_enter, ls_general_X, ncclX) */

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

static uint64_t hash_pcs(void *const *pcs, int n, uint32_t py)
{
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)n ^ ((uint64_t)py << 32);
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

static int same_stack(struct ls_trace *t, uint32_t id, void *const *pcs, int n, uint32_t py)
{
    struct ls_site *s = site_at(t, id - 1);
    if ((int)s->nframes != n || s->pysite != py)
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
static uint32_t add_site(struct ls_trace *t, uint64_t hash, void *const *pcs, int n, uint32_t py)
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
    s->pysite = py;
    s->hash = hash;
    atomic_store_explicit((_Atomic uint32_t *)&s->state, 1, memory_order_release);
    atomic_store_explicit((_Atomic uint32_t *)&t->hdr->site_count, idx + 1, memory_order_release);
    return idx + 1;
}

/* Returns the site id of the stack `pcs` (n frames) called from python site `py` (0 none),
 * registering it on first sight; 0 when the table is full. */
static uint32_t site_of(struct ls_trace *t, void *const *pcs, int n, uint32_t py)
{
    uint64_t hash = hash_pcs(pcs, n, py);
    size_t i = (size_t)(hash % SITE_SLOTS);
    for (size_t probes = 0; probes < SITE_SLOTS; probes++, i = (i + 1) % SITE_SLOTS) {
        uint64_t cur = atomic_load_explicit(&site_slots[i].hash, memory_order_acquire);
        if (cur == 0)
            break;
        if (cur == hash) {
            uint32_t id = atomic_load_explicit(&site_slots[i].site, memory_order_acquire);
            if (id && same_stack(t, id, pcs, n, py))
                return id;
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
            if (s && same_stack(t, s, pcs, n, py)) {
                id = s;
                break;
            }
            continue;
        }
        if (cur == 0) {
            id = add_site(t, hash, pcs, n, py);
            if (id) {
                atomic_store_explicit(&site_slots[i].site, id, memory_order_relaxed);
                atomic_store_explicit(&site_slots[i].hash, hash, memory_order_release);
            }
            break;
        }
    }
    pthread_mutex_unlock(&site_lock);
    return id;
}

/* ---- per-thread memory of recent stacks: callsite_cache.h ---- */
static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

/* Adds a chain's uncounted hits to its site's count: an atomic add per LS_SITE_COUNT_BATCH
 * calls rather than a write per call to a line every thread calling from that site writes. The
 * add is atomic, so threads that flush at once lose nothing (a plain load and store lost a
 * batch of 64 about once in six sanitized runs of shim-fast_path). */
void ls_callsite_count_flush(struct ls_trace *t, struct chain *e)
{
    if (e->uncounted && e->site)
        atomic_fetch_add_explicit((_Atomic uint64_t *)&site_at(t, e->site - 1)->count, e->uncounted,
                                  memory_order_relaxed);
    e->uncounted = 0;
}

struct site_cache *ls_callsite_fast_cache(const struct ls_trace *t)
{
    struct site_cache *sc = ls_t.site_cache;
    uint32_t depth = t->hdr->stack_depth;
    return depth && sc && !t->pysites && sc->pid == ls_g.pid && sc->depth == depth ? sc : NULL;
}

static void cache_free(void *p)
{
    struct site_cache *sc = p;
    if (sc->pid == ls_g.pid && atomic_load(&ls_g.state) == LS_STATE_ON)
        for (int i = 0; i < CACHE_WAYS; i++)
            ls_callsite_count_flush(&ls_g.trace, &sc->e[i]);
    if (ls_t.site_cache == p)
        ls_t.site_cache = NULL;
    if (ls_t.fast_sites == p)
        ls_t.fast_sites = NULL;
    free(p);
}

static void cache_key_create(void)
{
    pthread_key_create(&cache_key, cache_free);
}

/* The thread's cache for `depth` frames, made on first use; NULL when it cannot be made. */
static struct site_cache *thread_cache(uint32_t depth)
{
    struct site_cache *sc = ls_t.site_cache;
    if (sc && sc->pid == ls_g.pid && sc->depth == depth)
        return sc;
    if (sc) { /* a fork's child (ids of the parent's table) or another depth: start over */
        ls_t.site_cache = NULL;
        ls_t.fast_sites = NULL;
        pthread_setspecific(cache_key, NULL);
        free(sc);
    }
    pthread_attr_t attr;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return NULL;
    int ok = pthread_attr_getstack(&attr, &lo, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!ok)
        return NULL;
    size_t words = (size_t)CACHE_WAYS * 2 * depth;
    sc = calloc(1, sizeof *sc + words * sizeof(uintptr_t));
    if (!sc)
        return NULL;
    uintptr_t *w = (uintptr_t *)(sc + 1);
    for (int i = 0; i < CACHE_WAYS; i++) {
        sc->e[i].slot = w + (size_t)i * 2 * depth;
        sc->e[i].pc = sc->e[i].slot + depth;
    }
    sc->pid = ls_g.pid;
    sc->depth = depth;
    sc->stack_lo = (uintptr_t)lo;
    sc->stack_hi = (uintptr_t)lo + size;
    pthread_once(&cache_key_once, cache_key_create);
    pthread_setspecific(cache_key, sc);
    ls_t.site_cache = sc;
    return sc;
}

/* On x86-64 the first slot (the wrapper's frame less a word) holds the return address into its
 * caller, pushed by the call; elsewhere it is only the key the cache looks the stack up by. */
#if defined(__x86_64__) || defined(__i386__)
#define LS_SLOT0_HOLDS_PC0 1
#else
#define LS_SLOT0_HOLDS_PC0 0
#endif

/* Where the return address into a frame was saved: the slot the cache checks (callsite_cache.h).
 * `sp` is the frame's stack pointer, `callee_sp` its callee's, `ra` the return address. On x86-64
 * the call instruction pushed it just below the frame's stack pointer. On aarch64 the callee
 * saved its link register somewhere in its own frame ([callee_sp, sp): a frame record, or beside
 * the other saved registers): the highest word there that holds it; 0 when none does (the
 * callee kept it in a register: such a stack is not remembered). */
static uintptr_t return_slot(uintptr_t sp, uintptr_t callee_sp, uintptr_t ra)
{
#if defined(__aarch64__)
    if (callee_sp == 0 || callee_sp >= sp || sp - callee_sp > 65536)
        return 0;
    for (uintptr_t at = (sp - sizeof(uintptr_t)) & ~(uintptr_t)(sizeof(uintptr_t) - 1);
         at >= callee_sp; at -= sizeof(uintptr_t))
        if (*(const uintptr_t *)at == ra)
            return at;
    return 0;
#else
    (void)callee_sp;
    (void)ra;
    return sp - sizeof(uintptr_t);
#endif
}

/* Unwinds frame by frame, keeping each frame's stack pointer: the frames outside the shim
 * go to pcs (and the slots their return addresses were saved in to slots; the first one's,
 * which the wrapper's own frame may keep anywhere, is its frame's stack pointer less a word, as
 * the fast path computes it: a key, not checked); returns how many (at most `depth`). */
static int unwind_with_slots(uint32_t depth, void **pcs, uintptr_t *slots)
{
    unw_context_t uc;
    unw_cursor_t cur;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&cur, &uc) != 0)
        return 0;
    int n = 0, in_shim = 1;
    unw_word_t callee_sp = 0;
    do {
        unw_word_t ip = 0, sp = 0;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) != 0 || unw_get_reg(&cur, UNW_REG_SP, &sp) != 0)
            break;
        if (in_shim && ip >= shim_lo && ip < shim_hi) {
            callee_sp = sp;
            continue;
        }
        in_shim = 0;
        pcs[n] = (void *)(uintptr_t)ip;
        slots[n] = n == 0 ? (uintptr_t)sp - sizeof(uintptr_t)
                          : return_slot((uintptr_t)sp, (uintptr_t)callee_sp, (uintptr_t)ip);
        callee_sp = sp;
        n++;
    } while ((uint32_t)n < depth && unw_step(&cur) > 0);
    return n;
}

/* A stack not recognised: unwind it, find its site, and remember it when it is seen the
 * second time (a stack seen once is often never seen again: unw_backtrace is cheaper). */
static __attribute__((noinline)) uint32_t capture_slow(struct ls_trace *t, uint32_t depth,
                                                       uintptr_t pc0, uintptr_t slot0, uint32_t py)
{
    if (LS_UNLIKELY(shim_hi == 0))
        dl_iterate_phdr(find_self, (void *)(uintptr_t)&ls_callsite_capture);
    struct site_cache *sc = pc0 ? thread_cache(depth) : NULL;
    struct chain *e = sc ? way_of(sc, pc0, slot0) : NULL;
    void *raw[LS_MAX_STACK_DEPTH + SHIM_SKIP];
    if (e && e->seen_pc0 == pc0 && e->seen_slot0 == slot0 && slot0 >= sc->stack_lo &&
        slot0 < sc->stack_hi) {
        uintptr_t slots[LS_MAX_STACK_DEPTH];
        int n = unwind_with_slots(depth, raw, slots);
        if (n <= 0)
            return 0;
        uint32_t id = site_of(t, raw, n, py);
        int ok = id && (uintptr_t)raw[0] == pc0 && slots[0] == slot0;
        for (int k = LS_SLOT0_HOLDS_PC0 ? 0 : 1; ok && k < n; k++)
            ok = slots[k] >= sc->stack_lo && slots[k] + sizeof(uintptr_t) <= sc->stack_hi &&
                 *(const uintptr_t *)slots[k] == (uintptr_t)raw[k];
        if (ok) {
            ls_callsite_count_flush(t, e);
            for (int k = 0; k < n; k++) {
                e->slot[k] = slots[k];
                e->pc[k] = (uintptr_t)raw[k];
            }
            e->n = (uint32_t)n;
            e->pc0 = pc0;
            e->slot0 = slot0;
            e->site = id;
            e->py = py;
        }
        return id;
    }
    if (e) {
        e->seen_pc0 = pc0;
        e->seen_slot0 = slot0;
    }
    int n = unw_backtrace(raw, (int)depth + SHIM_SKIP);
#if defined(__aarch64__)
    /* libunwind's aarch64 backtrace gives each return address less one (to land inside the
     * call); the stepping unwinder above gives it whole, and so does the fast path's lookup.
     * Instructions are 4 bytes: rounded up, both agree (one stack, one site). */
    for (int i = 0; i < n; i++)
        raw[i] = (void *)(((uintptr_t)raw[i] + 3) & ~(uintptr_t)3);
#endif
    int skip = 0;
    while (skip < n && (uintptr_t)raw[skip] >= shim_lo && (uintptr_t)raw[skip] < shim_hi)
        skip++;
    n -= skip;
    if (n > (int)depth)
        n = (int)depth;
    return n > 0 ? site_of(t, raw + skip, n, py) : 0;
}

uint32_t ls_callsite_capture(struct ls_trace *t, const struct ls_call_args *a)
{
    uint32_t depth = t->hdr->stack_depth;
    if (depth == 0)
        return 0;
    uintptr_t pc0 = (uintptr_t)a->caller_pc;
    uintptr_t slot0 = (uintptr_t)a->caller_cfa - sizeof(uintptr_t);
    uint32_t py = t->pysites ? ls_python_capture(t) : 0;
    struct site_cache *sc = ls_t.site_cache;
    uint32_t id = 0;
    if (LS_LIKELY(sc && pc0 && sc->pid == ls_g.pid && sc->depth == depth && slot0 >= sc->stack_lo &&
                  slot0 < sc->stack_hi)) {
        struct chain *e = way_of(sc, pc0, slot0);
        if (e->site && e->pc0 == pc0 && e->slot0 == slot0) {
            uint32_t k = 1;
            while (k < e->n && *(const volatile uintptr_t *)e->slot[k] == e->pc[k])
                k++;
            if (k == e->n) {
                /* The same native stack from another Python line: no unwinding needed. */
                if (LS_UNLIKELY(e->py != py)) {
                    ls_callsite_count_flush(t, e);
                    e->site = site_of(t, (void *const *)e->pc, (int)e->n, py);
                    e->py = py;
                }
                id = e->site;
                if (LS_UNLIKELY(++e->uncounted >= LS_SITE_COUNT_BATCH))
                    ls_callsite_count_flush(t, e);
                return id;
            }
        }
    }
    if (!id)
        id = capture_slow(t, depth, pc0, slot0, py);
    if (id) /* the general path: one atomic add per call, exact as the batches are */
        atomic_fetch_add_explicit((_Atomic uint64_t *)&site_at(t, id - 1)->count, 1,
                                  memory_order_relaxed);
    return id;
}

void ls_callsites_flush_thread(void)
{
    struct site_cache *sc = ls_t.site_cache;
    if (sc && sc->pid == ls_g.pid && atomic_load(&ls_g.state) == LS_STATE_ON)
        for (int i = 0; i < CACHE_WAYS; i++)
            ls_callsite_count_flush(&ls_g.trace, &sc->e[i]);
}

void ls_callsites_reset(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    site_lock = fresh;
    memset(site_slots, 0, sizeof site_slots);
    nmodules = 0;
}
