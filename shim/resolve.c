/* resolve.c -- finds the real NCCL functions under the shim, wherever the program loaded them. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

static void *own_base; /* load base of liblockstep.so, to refuse our own symbols */

static int is_self(void *fn)
{
    Dl_info info;
    if (!fn)
        return 0;
    if (!own_base) {
        Dl_info me;
        if (dladdr((void *)&ls_resolve, &me))
            own_base = me.dli_fbase;
    }
    return dladdr(fn, &info) && info.dli_fbase == own_base;
}

struct find_nccl {
    char path[512];
};

/* dl_iterate_phdr callback: remembers the first loaded object named libnccl*. */
static int find_nccl_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct find_nccl *f = data;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libnccl", 7) == 0 && strncmp(base, "libnccl-net", 11) != 0) {
        snprintf(f->path, sizeof f->path, "%s", name);
        return 1;
    }
    return 0;
}

static void *lookup_in(void *handle, const char *name, void *self)
{
    char pname[128];
    snprintf(pname, sizeof pname, "p%s", name);
    void *fn = ls_dl_lookup(handle, pname, NULL);
    if (fn && fn != self && !is_self(fn))
        return fn;
    fn = ls_dl_lookup(handle, name, NULL);
    if (fn && fn != self && !is_self(fn))
        return fn;
    return NULL;
}

/* Says once per name that the loaded libnccl (`path`) has no `name`: a program built against
 * newer headers than the NCCL it runs on (ncclAllReduceConfig came with 2.31). The names are
 * the wrappers' string literals, so their addresses tell them apart. */
static void lacks(const char *name, const char *path)
{
    enum { NAMES = 64 };
    static const char *_Atomic said[NAMES];
    for (int i = 0; i < NAMES; i++) {
        const char *expected = NULL;
        if (atomic_compare_exchange_strong(&said[i], &expected, name))
            break; /* first time: say it */
        if (expected == name)
            return;
    }
    ls_warn("%s called, but the loaded NCCL (%s) has none: it came with a newer NCCL than the one "
            "loaded; the call returns ncclSystemError",
            name, path);
}

void *ls_resolve(const char *name, void *self)
{
    void *fn = lookup_in(RTLD_NEXT, name, self);
    if (fn)
        return fn;

    /* libnccl loaded RTLD_LOCAL (e.g. a dependency of a Python extension) is invisible to
     * RTLD_NEXT, but dlopen with RTLD_NOLOAD hands out the already loaded copy. */
    static const char *const sonames[] = {"libnccl.so.2", "libnccl.so", NULL};
    for (int i = 0; sonames[i]; i++) {
        void *h = dlopen(sonames[i], RTLD_NOLOAD | RTLD_LAZY);
        if (h) {
            fn = lookup_in(h, name, self);
            dlclose(h);
            if (fn)
                return fn;
        }
    }
    struct find_nccl f = {{0}};
    if (dl_iterate_phdr(find_nccl_object, &f) && f.path[0]) {
        void *h = dlopen(f.path, RTLD_NOLOAD | RTLD_LAZY);
        if (h) {
            fn = lookup_in(h, name, self);
            dlclose(h);
            if (fn)
                return fn;
        }
    }

    if (f.path[0]) {
        lacks(name, f.path);
        return NULL;
    }
    static _Atomic int warned;
    if (!atomic_exchange(&warned, 1))
        ls_warn("%s called, but no NCCL library is loaded in this process; NCCL calls return "
                "ncclSystemError",
                name);
    return NULL;
}
