/* py_embed.c -- a program that loads libpython without being a Python program.
 *
 *   py_embed LIBPYTHON noinit     dlopen(RTLD_GLOBAL), never Py_Initialize, then NCCL calls
 *   py_embed LIBPYTHON finalized  NCCL init, Py_Initialize, Python code that calls back into
 *                                 this program's py_embed_allreduce (ctypes), Py_FinalizeEx,
 *                                 then NCCL calls again
 *
 * Prints "ok" and exits 0 when every call succeeded with the right result. */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

static ncclComm_t world;

/* One AllReduce of `count` floats, checked; 0 on success. Exported: the embedded Python code
 * calls it through ctypes.CDLL(None). */
int py_embed_allreduce(int count)
{
    float buf[16];
    int n = tp_world_size();
    if (count > 16)
        count = 16;
    for (int i = 0; i < count; i++)
        buf[i] = (float)(tp_rank() + i);
    TP_CHECK(ncclAllReduce(buf, buf, (size_t)count, ncclFloat32, ncclSum, world, NULL));
    for (int i = 0; i < count; i++)
        if (buf[i] != (float)(n * (n - 1) / 2 + n * i))
            tp_die("AllReduce element %d is %g", i, (double)buf[i]);
    return 0;
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        tp_die("%s not found in libpython: %s", name, dlerror());
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "noinit") && strcmp(argv[2], "finalized"))) {
        fprintf(stderr, "usage: py_embed LIBPYTHON noinit|finalized\n");
        return 2;
    }
    void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!py)
        tp_die("dlopen %s: %s", argv[1], dlerror());
    int (*is_init)(void) = (int (*)(void))sym(py, "Py_IsInitialized");

    tp_init_world(&world);
    py_embed_allreduce(4); /* @before */
    if (strcmp(argv[2], "finalized") == 0) {
        void (*init)(void) = (void (*)(void))sym(py, "Py_Initialize");
        int (*run)(const char *) = (int (*)(const char *))sym(py, "PyRun_SimpleString");
        int (*fin)(void) = (int (*)(void))sym(py, "Py_FinalizeEx");
        init();
        /* The frames of this code are "<string>" lines 3 (f) and 4 (<module>). */
        if (run("import ctypes\n"
                "def f():\n"
                "    return ctypes.CDLL(None).py_embed_allreduce(5)\n"
                "if f() != 0: raise SystemExit(1)\n") != 0)
            tp_die("embedded Python failed");
        if (fin() != 0)
            tp_die("Py_FinalizeEx failed");
    }
    if (is_init())
        tp_die("Python is initialized");
    py_embed_allreduce(6); /* @after */
    TP_CHECK(ncclCommDestroy(world));
    printf("ok\n");
    return 0;
}
