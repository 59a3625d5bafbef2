/* cuda_core.c -- emulated CUDA driver: initialization, version, devices, primary contexts, error
 * strings. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "cuda_emu.h"
#include "wait_board.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;

static _Atomic int initialized;
static struct CUctx_st contexts[CU_MAX_DEVICES];
static pthread_once_t devices_once = PTHREAD_ONCE_INIT;
static int ndevices;
static int default_device;

/* Per-thread current context. A thread that never called cuCtxSetCurrent has
 * the primary context of device $LOCAL_RANK (mod the device count) current if
 * it is the main thread or launched work (NCCL's calls go through the CUDA
 * runtime, which makes the device's primary context current there, as
 * cudaSetDevice does); any other thread has none, as a thread that only ever
 * called the driver API (the shim's heartbeat) has none on real CUDA. */
/* initial-exec: with the default model, the shim's heartbeat thread reaches these through
 * __tls_get_addr when it polls events, and GCC 12's LeakSanitizer tracer crashed at exit in
 * about 1 sanitized run of 5 while scanning that thread's dynamic-TLS record (0 of 30 so). */
static __thread __attribute__((tls_model("initial-exec"))) int ctx_set;
static __thread __attribute__((tls_model("initial-exec"))) struct CUctx_st *ctx_current;
static __thread __attribute__((tls_model("initial-exec"))) int ctx_bound;

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return (v && *v) ? atoi(v) : dflt;
}

static void devices_init(void)
{
    int n = env_int("LOCKSTEP_EMU_CUDA_DEVICES", 0);
    if (n <= 0) {
        n = env_int("LOCAL_WORLD_SIZE", 1);
        if (n < 8)
            n = 8;
    }
    if (n > CU_MAX_DEVICES)
        n = CU_MAX_DEVICES;
    ndevices = n;
    for (int d = 0; d < n; d++) {
        contexts[d].magic = CU_CTX_MAGIC;
        contexts[d].device = d;
    }
    int local = env_int("LOCAL_RANK", env_int("RANK", 0));
    default_device = local >= 0 ? local % n : 0;
}

static int device_count(void)
{
    pthread_once(&devices_once, devices_init);
    return ndevices;
}

/* CUDA_SUCCESS once cuInit succeeded in this process, else
 * CUDA_ERROR_NOT_INITIALIZED. */
CUresult cu_check_init(void)
{
    return atomic_load(&initialized) ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* LOCKSTEP_EMU_CUDA_FAULT=RANK:K: the process of that RANK faults once K launched works have
 * completed on a stream: from then on its queries and synchronizations return
 * CUDA_ERROR_ILLEGAL_ADDRESS, sticky as after a real illegal memory access. (cu_lock held
 * or not: reads only.) */
int cu_faulted(const struct CUstream_st *s)
{
    static int rank = -2;
    static unsigned long long after;
    if (rank == -2) {
        const char *v = getenv("LOCKSTEP_EMU_CUDA_FAULT"), *r = getenv("RANK");
        rank = -1;
        if (v && r && sscanf(v, "%d:%llu", &rank, &after) == 2 && rank != atoi(r))
            rank = -1;
    }
    return rank >= 0 && s && s->done >= after;
}

/* This thread's current context (NULL after cuCtxSetCurrent(NULL)). */
struct CUctx_st *cu_current_ctx(void)
{
    if (ctx_set)
        return ctx_current;
    if (!ctx_bound && syscall(SYS_gettid) != getpid())
        return NULL;
    device_count();
    return &contexts[default_device];
}

/* This thread launched work: the runtime made the default context current here. */
void cu_bind_thread(void)
{
    ctx_bound = 1;
}

/* Start a new wait: the next sleep is the shortest one. */
void cu_backoff_reset(unsigned *us)
{
    *us = 50;
    wait_board_progress();
}

/* Sleep *us microseconds, then double it, up to 2 ms. */
void cu_backoff_sleep(unsigned *us)
{
    struct timespec ts = {0, (long)*us * 1000L};
    nanosleep(&ts, NULL);
    if (*us == 2000)
        wait_board_waiting();
    *us = *us * 2 > 2000 ? 2000 : *us * 2;
}

/* CLOCK_MONOTONIC in milliseconds. */
double cu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- initialization and version ---- */

/* Initialize the driver; Flags must be 0. Idempotent. */
CUresult cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    device_count();
    atomic_store(&initialized, 1);
    return CUDA_SUCCESS;
}

/* The CUDA version of the cuda.h this emulator was built with (works before cuInit). */
CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CUDA_VERSION;
    return CUDA_SUCCESS;
}

/* ---- devices ---- */

/* Number of emulated devices: $LOCKSTEP_EMU_CUDA_DEVICES, else
 * max(8, $LOCAL_WORLD_SIZE), at most 64. */
CUresult cuDeviceGetCount(int *count)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = device_count();
    return CUDA_SUCCESS;
}

/* Device handle of an ordinal (the handle is the ordinal). */
CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

/* The device's primary context (one per device); counts a reference. */
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    atomic_fetch_add(&contexts[dev].retained, 1);
    *pctx = &contexts[dev];
    return CUDA_SUCCESS;
}

/* Drop a reference from cuDevicePrimaryCtxRetain; the context stays usable. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    int old = atomic_load(&contexts[dev].retained);
    while (old > 0 && !atomic_compare_exchange_weak(&contexts[dev].retained, &old, old - 1)) {
    }
    return old > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* Pre-CUDA-11 name of cuDevicePrimaryCtxRelease_v2. */
CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

/* ---- contexts ---- */

/* This thread's current context (see ctx_current above); NULL after
 * cuCtxSetCurrent(NULL). */
CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = cu_current_ctx();
    return CUDA_SUCCESS;
}

/* Make ctx (a primary context, or NULL for none) current in this thread. */
CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (ctx && ctx->magic != CU_CTX_MAGIC)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_current = ctx;
    ctx_set = 1;
    return CUDA_SUCCESS;
}

/* Device of the current context; CUDA_ERROR_INVALID_CONTEXT if none. */
CUresult cuCtxGetDevice(CUdevice *device)
{
    CUresult r = cu_check_init();
    if (r != CUDA_SUCCESS)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUctx_st *c = cu_current_ctx();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
}

/* ---- error strings ---- */

struct cu_err {
    CUresult code;
    const char *name, *text;
};

static const struct cu_err errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation cannot be performed in the present state"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
     "operation would result in a merge of separate capture sequences"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct cu_err *find_error(CUresult code)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == code)
            return &errors[i];
    return NULL;
}

/* Description of a result code; CUDA_ERROR_INVALID_VALUE (and *pStr = NULL)
 * for codes this emulator does not know. Works before cuInit. */
CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct cu_err *e = find_error(error);
    *pStr = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Enum name of a result code, e.g. "CUDA_ERROR_NOT_READY"; as cuGetErrorString
 * for unknown codes. */
CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct cu_err *e = find_error(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- entry points by name ---- */

/* cuGetProcAddress (CUDA 11.3; _v2 from CUDA 12): how the CUDA runtime finds every driver
 * function. `symbol` is the base name; `cudaVersion` picks the form a name had then (the rows
 * below: cuGraphInstantiate is cuGraphInstantiateWithFlags from CUDA 12.0), the per-thread
 * default stream flag the _ptsz form where there is one. Looked up in this library through the
 * dynamic linker, as the real driver hands out its own entry points. */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    static const struct {
        const char *name;
        int since;
        const char *as;
    } forms[] = {
        {"cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags"},
        {"cuGraphInstantiate", 11000, "cuGraphInstantiate_v2"},
        {"cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2"},
        {"cuGetProcAddress", 12000, "cuGetProcAddress_v2"},
        {"cuStreamDestroy", 4000, "cuStreamDestroy_v2"},
        {"cuEventDestroy", 4000, "cuEventDestroy_v2"},
    };
    /* Handed out directly, as the real driver does (an interposer of the exported names never
     * sees these calls unless it wraps what this returns). */
    const int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct {
        const char *name;
        void *fn;
    } direct[] = {
        {"cuGraphLaunch", ptds ? (void *)cuGraphLaunch_ptsz_direct : (void *)cuGraphLaunch_direct},
        {"cuGraphInstantiate", (void *)cuGraphInstantiateWithFlags_direct},
        {"cuGraphInstantiateWithFlags", (void *)cuGraphInstantiateWithFlags_direct},
        {"cuGraphInstantiateWithParams", (void *)cuGraphInstantiateWithParams_direct},
        {"cuGraphExecDestroy", (void *)cuGraphExecDestroy_direct},
        {"cuGraphDestroy", (void *)cuGraphDestroy_direct},
    };
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (cudaVersion >= 12000)
        for (size_t i = 0; i < sizeof direct / sizeof direct[0]; i++)
            if (strcmp(direct[i].name, symbol) == 0) {
                *pfn = direct[i].fn;
                if (symbolStatus)
                    *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
                return CUDA_SUCCESS;
            }
    const char *name = symbol;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (strcmp(forms[i].name, symbol) == 0 && cudaVersion >= forms[i].since) {
            name = forms[i].as;
            break;
        }
    Dl_info self;
    void *lib = dladdr((void *)&cu_check_init, &self) && self.dli_fname /* hidden: ours */
                    ? dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD)
                    : NULL;
    if (lib) {
        char ptsz[128];
        if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) &&
            snprintf(ptsz, sizeof ptsz, "%s_ptsz", name) < (int)sizeof ptsz)
            *pfn = dlsym(lib, ptsz);
        if (!*pfn)
            *pfn = dlsym(lib, name);
        dlclose(lib);
    }
    if (symbolStatus)
        *symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
