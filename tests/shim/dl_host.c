/* dl_host.c -- a program with no link to NCCL that dlopens a library using it, RTLD_LOCAL. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dl_host LIBRARY\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dl_host: %s\n", dlerror());
        return 2;
    }
    float (*run)(int) = (float (*)(int))dlsym(h, "dl_caller_run");
    if (!run) {
        fprintf(stderr, "dl_host: %s\n", dlerror());
        return 2;
    }
    printf("sum %.1f\n", run(5));
    return 0;
}
