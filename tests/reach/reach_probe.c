/* reach_probe.c -- dlsym and dlvsym as programs use them, under the shim: RTLD_NEXT from a
 * library (and from its constructor, before the shim's), RTLD_DEFAULT, handles, misses. Prints
 * one "name value" line per check; test_reach.py compares them with the same run unpreloaded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int reach_next(const char *name, int versioned);
int reach_probe2_linked(void);
extern int reach_early;

static int call(void *p)
{
    int (*f)(void) = NULL;
    *(void **)&f = p;
    return f ? f() : -1;
}

int main(int argc, char **argv)
{
    const char *names[] = {"reach_probe", "ncclReachProbe", "cuReachProbe", "PyReach_Probe"};
    for (int i = 0; i < 4; i++) {
        printf("next_%s %d\n", names[i], reach_next(names[i], 0));
        printf("vnext_%s %d\n", names[i], reach_next(names[i], 1));
        printf("default_%s %d\n", names[i], call(dlsym(RTLD_DEFAULT, names[i])));
    }
    printf("early %d\n", reach_early);
    printf("linked %d\n", reach_probe2_linked());
    if (argc > 1) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        printf("handle_reach_probe %d\n", h ? call(dlsym(h, "reach_probe")) : -3);
        printf("handle_ncclReachProbe %d\n", h ? call(dlsym(h, "ncclReachProbe")) : -3);
    }
    void *miss = dlsym(RTLD_DEFAULT, "ncclNoSuchFunction");
    printf("miss %d %d\n", miss == NULL, dlerror() != NULL);
    miss = dlsym(RTLD_DEFAULT, "no_such_function");
    printf("miss_plain %d %d\n", miss == NULL, dlerror() != NULL);
    return 0;
}
