/* crasher.c -- a rank that dies by a fatal signal after one collective (argv[1]: segv, abort,
 * handled: a program with its own SIGSEGV handler that exits 7). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "common.h"

static void own_handler(int sig)
{
    (void)sig;
    static const char msg[] = "crasher: own handler ran\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(7);
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "segv";
    if (strcmp(how, "handled") == 0)
        signal(SIGSEGV, own_handler);
    ncclComm_t w;
    tp_init_world(&w);
    float x[8] = {0}, y[8];
    TP_CHECK(ncclAllReduce(x, y, 8, ncclFloat32, ncclSum, w, NULL));
    if (strcmp(how, "abort") == 0)
        abort();
    volatile int *p = NULL;
    *p = 1; /* segv and handled */
    return 0;
}
