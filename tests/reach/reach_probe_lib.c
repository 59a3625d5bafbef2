/* reach_probe_lib.c -- two libraries from one source (REACH_PROBE_VALUE 1 and 2), linked in
 * that order: each defines the same probe functions returning its value, and library 1 looks
 * the "next" definitions up with dlsym(RTLD_NEXT, ...) -- which must be library 2's however
 * the shim interposes dlsym. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

int reach_probe(void)
{
    return REACH_PROBE_VALUE;
}

int ncclReachProbe(void)
{
    return REACH_PROBE_VALUE;
}

int cuReachProbe(void)
{
    return REACH_PROBE_VALUE;
}

int PyReach_Probe(void)
{
    return REACH_PROBE_VALUE;
}

#if REACH_PROBE_VALUE == 2
/* Referenced by the program, so that the linker keeps this library as a dependency. */
int reach_probe2_linked(void)
{
    return 2;
}
#else
/* The value of the next definition of `name` after this library, -1 if none; dlvsym too. */
int reach_next(const char *name, int versioned)
{
    void *p = versioned ? dlvsym(RTLD_NEXT, name, "REACH_2") : dlsym(RTLD_NEXT, name);
    int (*f)(void) = NULL;
    *(void **)&f = p;
    return f ? f() : -1;
}

int reach_early = -2; /* reach_next("reach_probe") as this library's constructor saw it */

__attribute__((constructor)) static void early(void)
{
    reach_early = reach_next("reach_probe", 0);
}
#endif
