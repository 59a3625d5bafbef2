/* no_nccl.c -- a program without libnccl that still reaches ncclAllReduce (the shim's): the
 * call must fail with ncclSystemError and one line on stderr, never crash. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*allreduce_fn)(const void *, void *, size_t, int, int, void *, void *);

int main(void)
{
    allreduce_fn fn = (allreduce_fn)dlsym(RTLD_DEFAULT, "ncclAllReduce");
    if (!fn) {
        printf("no-symbol\n");
        return 3;
    }
    float x = 1, y = 0;
    int r1 = fn(&x, &y, 1, 7, 0, NULL, NULL);
    int r2 = fn(&x, &y, 1, 7, 0, NULL, NULL);
    printf("results %d %d\n", r1, r2);
    return 0;
}
