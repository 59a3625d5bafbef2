/* dl_real.c -- the C library's own dlsym and dlvsym, found without calling them, and the shim's
 * own mapping. Below everything that looks a symbol up: the shim exports a dlsym of its own
 * (dlsym.c), which the shim's lookups (resolve.c, python.c, completion.c, end_why.c) never
 * need to go through (it forwards them untouched), so they call ls_dl_lookup() here. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    /* Said with the system call itself (ls_warn() formats with the C library, and its write()
     * is end_why.c's, which looks the C library's up through here). */
    static const char said_dlsym[] =
        "lockstep: cannot find the C library's dlsym: lookups by handle return NULL\n";
    static const char said_dlvsym[] =
        "lockstep: cannot find the C library's dlvsym: lookups by handle return NULL\n";
    static _Atomic int warned;
    if (!atomic_exchange(&warned, 1)) {
        long w = versioned ? syscall(SYS_write, 2, said_dlvsym, sizeof said_dlvsym - 1)
                           : syscall(SYS_write, 2, said_dlsym, sizeof said_dlsym - 1);
        (void)w;
    }
    return NULL;
}

void *ls_dl_lookup(void *handle, const char *name, const char *version)
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
