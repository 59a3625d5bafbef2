/* common.c -- implementation of the test-program helpers (environment, id exchange, typed buffers).
 */
#define _GNU_SOURCE
#include "common.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The first of `names` that is set, as a launcher sets it (torchrun, mpirun, srun, PMI). */
static int first_int(const char *const *names, int dflt)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return atoi(v);
    }
    return dflt;
}

int tp_rank(void)
{
    static const char *const names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID",
                                        NULL};
    return first_int(names, 0);
}

int tp_world_size(void)
{
    static const char *const names[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                        "SLURM_NTASKS", NULL};
    return first_int(names, 1);
}

int tp_local_rank(void)
{
    static const char *const names[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                        NULL};
    return first_int(names, tp_rank());
}

int tp_env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

const char *tp_env_str(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

uint64_t tp_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tp_die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "rank %d: ", tp_rank());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void tp_sleep_ms(int ms)
{
    /* Resumes after a signal handler ran, as Python's time.sleep and C++'s sleep_for do. */
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void tp_compute_ms(int ms)
{
    uint64_t end = tp_mono_ms() + (uint64_t)ms;
    volatile double x = 1.0;
    while (tp_mono_ms() < end)
        for (int i = 0; i < 20000; i++)
            x = x * 1.0000001 + 1e-9;
}

const struct tp_mode *tp_pick_mode(int argc, char **argv, const char *prog,
                                   const struct tp_mode *modes, size_t n)
{
    for (size_t i = 0; argc > 1 && i < n; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return &modes[i];
    fprintf(stderr, "usage: %s MODE; modes:", prog);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %s", modes[i].name);
    fprintf(stderr, "\n");
    return NULL;
}

typedef CUresult (*tp_cu_init_fn)(unsigned int);
typedef CUresult (*tp_cu_sync_fn)(CUstream);

static void *cuda_sym(void *lib, const char *name)
{
    void *p = lib ? dlsym(lib, name) : NULL;
    return p ? p : dlsym(RTLD_DEFAULT, name);
}

int tp_sync_result(void)
{
    static int async = -1;
    static tp_cu_sync_fn sync;
    if (async < 0) {
        const char *e = getenv("LOCKSTEP_EMU_ASYNC");
        async = e && strcmp(e, "1") == 0;
    }
    if (!async)
        return 0;
    if (!sync) {
        void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        void *init_p = cuda_sym(lib, "cuInit"), *sync_p = cuda_sym(lib, "cuStreamSynchronize");
        if (!init_p || !sync_p)
            tp_die("tp_sync: LOCKSTEP_EMU_ASYNC=1 but no libcuda.so.1 with cuStreamSynchronize "
                   "is loaded");
        tp_cu_init_fn init;
        memcpy(&init, &init_p, sizeof(init));
        CUresult r = init(0);
        if (r != CUDA_SUCCESS)
            tp_die("tp_sync: cuInit failed: %d", (int)r);
        memcpy(&sync, &sync_p, sizeof(sync));
    }
    return (int)sync(NULL);
}

void tp_sync(void)
{
    int r = tp_sync_result();
    if (r != CUDA_SUCCESS)
        tp_die("tp_sync: cuStreamSynchronize failed: %d", r);
}

void tp_launch_host(void (*fn)(void *), void *data)
{
    typedef CUresult (*launch_fn)(CUstream, void (*)(void *), void *);
    void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *p = cuda_sym(lib, "cuLaunchHostFunc");
    if (!p)
        tp_die("tp_launch_host: no libcuda.so.1 with cuLaunchHostFunc is loaded "
               "(LOCKSTEP_EMU_ASYNC=1 loads the emulator's)");
    launch_fn launch;
    memcpy(&launch, &p, sizeof(launch));
    CUresult r = launch(NULL, fn, data);
    if (r != CUDA_SUCCESS)
        tp_die("tp_launch_host: cuLaunchHostFunc failed: %d", (int)r);
}

void *tp_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        tp_die("out of memory (%zu bytes)", bytes);
    return p;
}

static int read_whole(const char *path, void *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, len);
    close(fd);
    return n == (ssize_t)len;
}

void tp_publish(const char *path, const void *buf, size_t len)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        tp_die("cannot create %s: %s", tmp, strerror(errno));
    if (write(fd, buf, len) != (ssize_t)len)
        tp_die("cannot write %s: %s", tmp, strerror(errno));
    close(fd);
    if (rename(tmp, path) != 0)
        tp_die("cannot rename to %s: %s", path, strerror(errno));
}

void tp_await(const char *path, void *buf, size_t len)
{
    while (!read_whole(path, buf, len))
        tp_sleep_ms(2);
}

ncclUniqueId tp_exchange_id(const char *tag)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    const char *base = getenv("LOCKSTEP_TEST_IDFILE");
    if (!base || !*base) {
        if (tp_world_size() > 1)
            tp_die("LOCKSTEP_TEST_IDFILE is not set (use launch-ranks)");
        TP_CHECK(ncclGetUniqueId(&id));
        return id;
    }
    char path[4096];
    /* A launcher that restarts the job (torchrun --max-restarts) reuses the environment: each
     * attempt exchanges a fresh id. */
    const char *attempt = getenv("TORCHELASTIC_RESTART_COUNT");
    if (attempt && *attempt)
        snprintf(path, sizeof(path), "%s.%s.a%s", base, tag, attempt);
    else
        snprintf(path, sizeof(path), "%s.%s", base, tag);
    if (tp_rank() == 0) {
        TP_CHECK(ncclGetUniqueId(&id));
        tp_publish(path, &id, sizeof(id));
        return id;
    }
    tp_await(path, &id, sizeof(id));
    return id;
}

void tp_init_world(ncclComm_t *comm)
{
    ncclUniqueId id = tp_exchange_id("world");
    TP_CHECK(ncclCommInitRank(comm, tp_world_size(), id, tp_rank()));
}

size_t tp_dtype_size(ncclDataType_t dt)
{
    switch (dt) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

const char *tp_dtype_name(ncclDataType_t dt)
{
    static const char *names[] = {"int8",    "uint8",    "int32",      "uint32",
                                  "int64",   "uint64",   "float16",    "float32",
                                  "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    return ((int)dt >= 0 && (int)dt < 12) ? names[dt] : "?";
}

/* Small binary floating formats: exponent bits, mantissa bits, and whether the
 * all-ones pattern is the only NaN (e4m3fn, no infinities). */
struct smallfp {
    int ebits, mbits, finite_only;
};

static const struct smallfp *smallfp_of(ncclDataType_t dt)
{
    static const struct smallfp f16 = {5, 10, 0}, bf16 = {8, 7, 0}, e4m3 = {4, 3, 1},
                                e5m2 = {5, 2, 0};
    switch (dt) {
    case ncclFloat16:
        return &f16;
    case ncclBfloat16:
        return &bf16;
    case ncclFloat8e4m3:
        return &e4m3;
    case ncclFloat8e5m2:
        return &e5m2;
    default:
        return NULL;
    }
}

static double smallfp_value(const struct smallfp *f, unsigned code)
{
    int bias = (1 << (f->ebits - 1)) - 1;
    unsigned top = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    unsigned exp = (code >> f->mbits) & top, man = code & mmask;
    int neg = (code >> (f->ebits + f->mbits)) & 1;
    double v;
    if (exp == top && (!f->finite_only || man == mmask))
        v = f->finite_only || man ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp(man, 1 - bias - f->mbits);
    else
        v = ldexp(man + (double)(mmask + 1), (int)exp - bias - f->mbits);
    return neg ? -v : v;
}

/* Encode by rounding |v| to the format's grid at its binade (ties to even). */
static unsigned smallfp_code(const struct smallfp *f, double v)
{
    int bias = (1 << (f->ebits - 1)) - 1;
    unsigned top = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    unsigned sign = (v < 0 || (v == 0 && signbit(v))) ? 1u << (f->ebits + f->mbits) : 0;
    if (isnan(v))
        return sign | (top << f->mbits) | (f->finite_only ? mmask : 1u << (f->mbits - 1));
    double a = fabs(v);
    int e = a > 0 ? ilogb(a) : 1 - bias;
    if (e < 1 - bias)
        e = 1 - bias;
    double units = nearbyint(ldexp(a, f->mbits - e)); /* multiples of the grid step */
    if (units >= ldexp(1.0, f->mbits + 1)) {          /* rounded into the next binade */
        units /= 2;
        e++;
    }
    unsigned biased = units >= ldexp(1.0, f->mbits) ? (unsigned)(e + bias) : 0;
    unsigned maxexp = f->finite_only ? top : top - 1;
    unsigned maxman = f->finite_only ? mmask - 1 : mmask;
    if (biased > maxexp || (biased == maxexp && ((unsigned)units & mmask) > maxman) || isinf(a)) {
        if (f->finite_only)
            return sign | (maxexp << f->mbits) | maxman;
        return sign | (top << f->mbits);
    }
    return sign | (biased << f->mbits) | ((unsigned)units & mmask);
}

double tp_get(const void *buf, size_t i, ncclDataType_t dt)
{
    const unsigned char *p = (const unsigned char *)buf + i * tp_dtype_size(dt);
    union {
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f;
        double d;
        uint16_t h;
    } u;
    memcpy(&u, p, tp_dtype_size(dt));
    switch (dt) {
    case ncclInt8:
        return u.i8;
    case ncclUint8:
        return u.u8;
    case ncclInt32:
        return u.i32;
    case ncclUint32:
        return u.u32;
    case ncclInt64:
        return (double)u.i64;
    case ncclUint64:
        return (double)u.u64;
    case ncclFloat32:
        return u.f;
    case ncclFloat64:
        return u.d;
    case ncclFloat16:
    case ncclBfloat16:
        return smallfp_value(smallfp_of(dt), u.h);
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return smallfp_value(smallfp_of(dt), u.u8);
    default:
        return 0;
    }
}

void tp_set(void *buf, size_t i, ncclDataType_t dt, double v)
{
    unsigned char *p = (unsigned char *)buf + i * tp_dtype_size(dt);
    union {
        int8_t i8;
        uint8_t u8;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f;
        double d;
        uint16_t h;
    } u;
    switch (dt) {
    case ncclInt8:
        u.i8 = (int8_t)(uint8_t)(int64_t)v;
        break; /* integers wrap */
    case ncclUint8:
        u.u8 = (uint8_t)(int64_t)v;
        break;
    case ncclInt32:
        u.i32 = (int32_t)(uint32_t)(int64_t)v;
        break;
    case ncclUint32:
        u.u32 = (uint32_t)(int64_t)v;
        break;
    case ncclInt64:
        u.i64 = (int64_t)v;
        break;
    case ncclUint64:
        u.u64 = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
        break;
    case ncclFloat32:
        u.f = (float)v;
        break;
    case ncclFloat64:
        u.d = v;
        break;
    case ncclFloat16:
    case ncclBfloat16:
        u.h = (uint16_t)smallfp_code(smallfp_of(dt), v);
        break;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        u.u8 = (uint8_t)smallfp_code(smallfp_of(dt), v);
        break;
    default:
        return;
    }
    memcpy(p, &u, tp_dtype_size(dt));
}

int tp_pattern(int rank, size_t i, int salt)
{
    uint64_t h = (uint64_t)i * 2654435761u + (uint64_t)rank * 40503u + (uint64_t)salt * 977u;
    h ^= h >> 13;
    return (int)(h % 8);
}

void tp_fill(void *buf, size_t count, ncclDataType_t dt, int rank, int salt)
{
    for (size_t i = 0; i < count; i++)
        tp_set(buf, i, dt, tp_pattern(rank, i, salt));
}

void tp_verify(const void *buf, size_t count, ncclDataType_t dt,
               double (*expect)(size_t i, void *ctx), void *ctx, double tol, const char *what)
{
    for (size_t i = 0; i < count; i++) {
        double got = tp_get(buf, i, dt), want = expect(i, ctx);
        if (!(fabs(got - want) <= tol)) {
            tp_die("WRONG RESULT in %s (%s): element %zu of %zu is %g, expected %g", what,
                   tp_dtype_name(dt), i, count, got, want);
        }
    }
}

uint64_t tp_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- the watchdog of tp_watch_start() ---- */

static _Atomic int watch_returned;
static pthread_t watch_thread;
static const char *watch_what;
static int watch_ms;

static void *watch_main(void *arg)
{
    (void)arg;
    tp_sleep_ms(watch_ms);
    if (!atomic_load(&watch_returned)) {
        fprintf(stderr, "rank %d: %s still blocked after %d ms\n", tp_rank(), watch_what, watch_ms);
        _exit(4);
    }
    return NULL;
}

void tp_watch_start(const char *what, int ms)
{
    watch_what = what;
    watch_ms = ms;
    atomic_store(&watch_returned, 0);
    if (pthread_create(&watch_thread, NULL, watch_main, NULL) != 0)
        tp_die("pthread_create failed");
}

void tp_watch_end(void)
{
    atomic_store(&watch_returned, 1);
    pthread_join(watch_thread, NULL);
}
