/* common.h -- helpers shared by the NCCL test programs: rank environment, id exchange, buffers. */
#ifndef LOCKSTEP_TEST_COMMON_H
#define LOCKSTEP_TEST_COMMON_H

#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Exit 1 with file:line, the call, NCCL's error string and last error if
 * `call` does not return ncclSuccess. */
#define TP_CHECK(call)                                                                             \
    do {                                                                                           \
        ncclResult_t tp_res_ = (call);                                                             \
        if (tp_res_ != ncclSuccess) {                                                              \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%s)\n", tp_rank(), __FILE__, __LINE__, \
                    #call, ncclGetErrorString(tp_res_), ncclGetLastError(NULL));                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* $RANK (else the rank mpirun, PMI or srun set), or 0 when unset. */
int tp_rank(void);

/* $WORLD_SIZE (else mpirun's, PMI's or srun's), or 1 when unset. */
int tp_world_size(void);

/* $LOCAL_RANK (else mpirun's or srun's), or tp_rank() when unset. */
int tp_local_rank(void);

/* The integer in environment variable `name`, `dflt` when it is unset or empty. */
int tp_env_int(const char *name, int dflt);

/* The environment variable `name`, `dflt` when it is unset or empty. */
const char *tp_env_str(const char *name, const char *dflt);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t tp_mono_ms(void);

/* Print "rank R: <message>" on stderr and exit 1. */
void tp_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Publishes `len` bytes at `path` whole (written to a temp file, then renamed), so a reader
 * never sees part of them. Exits 1 on failure. */
void tp_publish(const char *path, const void *buf, size_t len);

/* Waits until `path` holds the `len` bytes tp_publish() put there, and reads them. */
void tp_await(const char *path, void *buf, size_t len);

/* An ncclUniqueId all ranks agree on. Rank 0 makes it with ncclGetUniqueId and
 * writes it atomically (temp file + rename) to $LOCKSTEP_TEST_IDFILE.<tag>;
 * the others poll until that file appears. Each tag must be used once per
 * run; under a restarting launcher each attempt (TORCHELASTIC_RESTART_COUNT) has its
 * own file. With one rank and no LOCKSTEP_TEST_IDFILE the id stays local. */
ncclUniqueId tp_exchange_id(const char *tag);

/* The world communicator: tp_exchange_id("world") + ncclCommInitRank with
 * RANK/WORLD_SIZE. Exits 1 on failure. */
void tp_init_world(ncclComm_t *comm);

/* Bytes per element of dt (0 if invalid). */
size_t tp_dtype_size(ncclDataType_t dt);

/* Short name of dt, e.g. "float32". */
const char *tp_dtype_name(ncclDataType_t dt);

/* Element i of buf, converted to double (any NCCL datatype). */
double tp_get(const void *buf, size_t i, ncclDataType_t dt);

/* Store v as element i of buf: floats round to nearest even, integers
 * truncate and wrap to the type's width. */
void tp_set(void *buf, size_t i, ncclDataType_t dt, double v);

/* Deterministic small integer in [0, 8) for (rank, index, salt): exact in
 * every datatype, and sums over 16 ranks stay exact even in fp16/bf16. */
int tp_pattern(int rank, size_t i, int salt);

/* buf[i] = tp_pattern(rank, i, salt) for i < count. */
void tp_fill(void *buf, size_t count, ncclDataType_t dt, int rank, int salt);

/* Compare buf[0..count) with expect(i, ctx) (absolute tolerance tol); on the
 * first difference print what/index/values and exit 1. */
void tp_verify(const void *buf, size_t count, ncclDataType_t dt,
               double (*expect)(size_t i, void *ctx), void *ctx, double tol, const char *what);

/* FNV-1a of n bytes continuing from h (start with TP_FNV_INIT). */
#define TP_FNV_INIT 0xcbf29ce484222325ull
uint64_t tp_fnv(uint64_t h, const void *p, size_t n);

/* Sleep for ms milliseconds, resuming after signal handlers. */
void tp_sleep_ms(int ms);

/* A watchdog over a call that must return at once (an NCCL call in the emulator's async mode):
 * unless tp_watch_end() is called within ms milliseconds, the process says "rank R: WHAT still
 * blocked after MS ms" on stderr and exits 4. One at a time. */
void tp_watch_start(const char *what, int ms);
void tp_watch_end(void);

/* Computes (spins) for ms milliseconds: a rank's own work, outside NCCL. */
void tp_compute_ms(int ms);

/* One failure mode of a scenario program: its name on the command line, what it runs, and the
 * rank that misbehaves by default (-1: the last one). */
struct tp_mode {
    const char *name;
    void (*run)(void);
    int victim;
};

/* The mode argv[1] names among `modes` (n of them), or NULL after a usage line on stderr that
 * lists them (`prog MODE; modes: ...`). */
const struct tp_mode *tp_pick_mode(int argc, char **argv, const char *prog,
                                   const struct tp_mode *modes, size_t n);

/* Wait for the NCCL work this process issued on the default stream, as a
 * training loop does when it reads a result (loss.item(), a host copy). In
 * the emulator's async mode (LOCKSTEP_EMU_ASYNC=1) this is
 * cuStreamSynchronize(NULL), resolved at run time from the already loaded
 * libcuda.so.1 (programs need not link -lcuda), and it blocks forever if the
 * work never completes -- where a GPU job hangs. Otherwise (NCCL calls
 * complete before they return) a no-op. Exits 1 if it cannot synchronize. */
void tp_sync(void);

/* tp_sync() that returns cuStreamSynchronize's CUresult (0 success, and in blocking mode)
 * instead of exiting on a failed one; still exits 1 when it cannot synchronize at all. */
int tp_sync_result(void);

/* Launches fn(data) on the legacy stream, in stream order, through the CUDA driver's
 * cuLaunchHostFunc (the emulator's with LOCKSTEP_EMU_ASYNC=1): what comes after it on the
 * stream waits until it returns, as behind a long kernel. */
void tp_launch_host(void (*fn)(void *), void *data);

/* malloc that exits 1 on failure; memory is zeroed. */
void *tp_alloc(size_t bytes);

#endif
