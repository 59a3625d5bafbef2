/* dlsym.c -- dlsym and dlvsym interposed: a program that looks NCCL up by handle (JAX/XLA,
 * TensorFlow, vLLM's pynccl, nccl4py, ctypes) gets the shim's wrappers, so its calls are
 * recorded like linked ones. The exported entry points are dlsym_trampoline.S (x86_64,
 * aarch64) or the C fallback at the end; docs/shim.md says why a trampoline. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>

#include "shim.h"

#define HIDDEN __attribute__((visibility("hidden")))

typedef void *(*dlsym_fn)(void *, const char *);
typedef void *(*dlvsym_fn)(void *, const char *, const char *);

/* glibc's own dlsym and dlvsym (NULL until found); the trampolines jump to them. */
HIDDEN void *_Atomic ls_dlsym_real;
HIDDEN void *_Atomic ls_dlvsym_real;

/* The linker's names for this object's ELF header and dynamic section. */
extern const ElfW(Ehdr) __ehdr_start HIDDEN;
extern ElfW(Dyn) _DYNAMIC[] HIDDEN;

/* ---- the shim's own mapping ---- */

static _Atomic uintptr_t own_lo, own_hi; /* [lo, hi) of the loaded segments; 0 until known */

LS_NO_SANITIZE static uintptr_t own_bias(void)
{
    const ElfW(Ehdr) *eh = &__ehdr_start;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD)
            return (uintptr_t)eh - (ph[i].p_vaddr - ph[i].p_offset);
    return (uintptr_t)eh;
}

LS_NO_SANITIZE int ls_in_shim(const void *addr)
{
    uintptr_t lo = atomic_load_explicit(&own_lo, memory_order_acquire);
    uintptr_t hi = atomic_load_explicit(&own_hi, memory_order_acquire);
    if (LS_UNLIKELY(hi == 0)) {
        const ElfW(Ehdr) *eh = &__ehdr_start;
        const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
        uintptr_t bias = own_bias();
        lo = UINTPTR_MAX;
        for (int i = 0; i < eh->e_phnum; i++) {
            if (ph[i].p_type != PT_LOAD)
                continue;
            uintptr_t a = bias + ph[i].p_vaddr, b = a + ph[i].p_memsz;
            lo = a < lo ? a : lo;
            hi = b > hi ? b : hi;
        }
        atomic_store_explicit(&own_lo, lo, memory_order_relaxed);
        atomic_store_explicit(&own_hi, hi, memory_order_release);
    }
    return (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
}

void *ls_own_symbol(const char *name)
{
    struct ls_elf e;
    if (ls_elf_open(&e, own_bias(), _DYNAMIC) != 0)
        return NULL;
    void *p = ls_elf_symbol(&e, name);
    return p && ls_in_shim(p) ? p : NULL;
}

int ls_is_libnccl_path(const char *path)
{
    const char *base = ls_path_base(path);
    static const char want[] = "libnccl.so";
    for (size_t i = 0; i < sizeof want - 1; i++)
        if (base[i] != want[i])
            return 0;
    return 1;
}

/* ---- glibc's dlsym ---- */

LS_NO_SANITIZE static int has_prefix(const char *s, const char *prefix)
{
    while (*prefix)
        if (*s++ != *prefix++)
            return 0;
    return 1;
}

/* Finds glibc's dlsym (versioned 0) or dlvsym (1) in the loaded libc, else libdl (glibc before
 * 2.34), by reading their symbol tables: calling dlsym from here would reach the shim's own.
 * Walks the loader's list of objects (no lock, no call a sanitizer intercepts: this may run
 * inside its start-up). Returns NULL after one line on stderr when there is none. */
LS_NO_SANITIZE HIDDEN void *ls_dl_find_real(int versioned)
{
    static const char *const libs[] = {"libc.so.", "libdl.so."};
    const char *name = versioned ? "dlvsym" : "dlsym";
    void *found = NULL;
    for (unsigned k = 0; k < 2 && !found; k++)
        for (const struct link_map *m = _r_debug.r_map; m && !found; m = m->l_next) {
            struct ls_elf e;
            if (!has_prefix(ls_path_base(m->l_name), libs[k]) ||
                ls_elf_open(&e, m->l_addr, m->l_ld) != 0)
                continue;
            found = ls_elf_symbol(&e, name);
            if (found && ls_in_shim(found))
                found = NULL;
        }
    if (found) {
        atomic_store_explicit(versioned ? &ls_dlvsym_real : &ls_dlsym_real, found,
                              memory_order_release);
        return found;
    }
    static _Atomic int warned;
    if (!atomic_exchange(&warned, 1))
        ls_warn("cannot find the C library's %s: lookups by handle return NULL", name);
    return NULL;
}

static void *real_lookup(void *handle, const char *name, const char *version)
{
    if (version) {
        void *f = atomic_load_explicit(&ls_dlvsym_real, memory_order_acquire);
        f = f ? f : ls_dl_find_real(1);
        return f ? ((dlvsym_fn)f)(handle, name, version) : NULL;
    }
    void *f = atomic_load_explicit(&ls_dlsym_real, memory_order_acquire);
    f = f ? f : ls_dl_find_real(0);
    return f ? ((dlsym_fn)f)(handle, name) : NULL;
}

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
    void *real = real_lookup(handle, name, version);
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
 * return address). The shim's own lookups (resolve.c, python.c, completion.c) are always
 * forwarded. */
HIDDEN void *ls_dlsym_hook(void *handle, const char *name, const char *version, void *caller)
{
    if (ls_in_shim(caller) || !atomic_load_explicit(&hook_ready, memory_order_acquire))
        return NULL;
    if (name[0] == 'n')
        return substitute(handle, name, version);
    ls_blind_check(); /* "pn": NCCL's pnccl names, which the shim does not wrap; "cu": CUDA being
                       * set up; "Py": a Python extension loaded */
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
    return real_lookup(handle, name, NULL);
}

void *dlvsym(void *handle, const char *name, const char *version)
{
    if (hooked_name(name)) {
        void *p = ls_dlsym_hook(handle, name, version, __builtin_return_address(0));
        if (p)
            return p;
    }
    return real_lookup(handle, name, version);
}
#endif
