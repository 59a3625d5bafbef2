/* dlsym.c -- dlsym and dlvsym interposed: a program that looks NCCL up by handle (JAX/XLA,
 * TensorFlow, vLLM's pynccl, nccl4py, ctypes) gets the shim's wrappers, so its calls are
 * recorded like linked ones. The exported entry points are dlsym_trampoline.S (x86_64,
 * aarch64) or the C fallback at the end; docs/shim.md says why a trampoline. glibc's own are
 * found by dl_real.c, below this file: the shim's own lookups call them there. */
#include <dlfcn.h>
#include <stdatomic.h>

#include "shim.h"

#define HIDDEN __attribute__((visibility("hidden")))

/* ---- the hook ---- */

/* Whether the shim was initialized (its constructor ran): only then may the hook look at the
 * loaded objects, which a sanitizer still starting up could not bear. */
static _Atomic int hook_ready;

__attribute__((constructor)) static void dlsym_ready(void)
{
    atomic_store(&hook_ready, 1);
}

/* An NCCL name looked up through `handle` (not RTLD_DEFAULT/RTLD_NEXT, which bind to the shim
 * already or are the program's business): the shim's wrapper when the lookup lands in a
 * libnccl object (through any handle whose scope holds it), else what glibc found. */
static void *substitute(void *handle, const char *name, const char *version)
{
    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT)
        return NULL;
    void *real = ls_dl_lookup(handle, name, version);
    if (!real)
        return NULL; /* forwarded again: glibc sets dlerror for the caller */
    Dl_info info;
    if (ls_in_shim(real) || !dladdr(real, &info) || !ls_is_libnccl_path(info.dli_fname))
        return real;
    void *mine = ls_own_symbol(name);
    return mine ? mine : real;
}

/* Called by the trampolines for names starting "nccl", "pn", "cu" or "Py". Returns the address to
 * answer with, or NULL to have glibc answer (the trampoline jumps to it with the caller's
 * return address). A lookup from the shim's own code is always forwarded (its own lookups call
 * ls_dl_lookup() and do not come here). */
HIDDEN void *ls_dlsym_hook(void *handle, const char *name, const char *version, void *caller)
{
    if (ls_in_shim(caller) || !atomic_load_explicit(&hook_ready, memory_order_acquire))
        return NULL;
    if (name[0] == 'n')
        return substitute(handle, name, version);
    ls_blind_check(); /* "pn": NCCL's pnccl names, which the shim does not wrap; "cu": CUDA being
                       * set up; "Py": a Python extension loaded */
    if (name[0] == 'c' && handle != RTLD_DEFAULT && handle != RTLD_NEXT)
        return ls_graph_dlsym(handle, name, version); /* libcuda's graph entry points */
    return NULL;
}

#if defined(LS_DLSYM_C_FALLBACK) || (!defined(__x86_64__) && !defined(__aarch64__))
/* C fallback (LS_DLSYM_C_FALLBACK forces it, for a compile check on x86_64): correct for lookups
 * through a handle, but glibc sees the shim as the caller, so a dlsym(RTLD_NEXT, ...) made by other
 * code resolves relative to the shim (docs/shim.md). */
/* glibc declares `name` nonnull; a bad program may still pass NULL. The empty asm hides the
 * attribute from the compiler, so the check stays. */
static int hooked_name(const char *n)
{
    __asm__("" : "+r"(n));
    if (!n)
        return 0;
    return (n[0] == 'n' && n[1] == 'c' && n[2] == 'c' && n[3] == 'l') ||
           (n[0] == 'p' && n[1] == 'n') || (n[0] == 'c' && n[1] == 'u') ||
           (n[0] == 'P' && n[1] == 'y');
}

void *dlsym(void *handle, const char *name)
{
    if (hooked_name(name)) {
        void *p = ls_dlsym_hook(handle, name, NULL, __builtin_return_address(0));
        if (p)
            return p;
    }
    return ls_dl_lookup(handle, name, NULL);
}

void *dlvsym(void *handle, const char *name, const char *version)
{
    if (hooked_name(name)) {
        void *p = ls_dlsym_hook(handle, name, version, __builtin_return_address(0));
        if (p)
            return p;
    }
    return ls_dl_lookup(handle, name, version);
}
#endif
