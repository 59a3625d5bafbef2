/* shim.h -- internal interfaces of liblockstep.so, the LD_PRELOAD recorder of NCCL calls. */
#ifndef LOCKSTEP_SHIM_H
#define LOCKSTEP_SHIM_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <time.h>

#include "lockstep/comm_id.h"
#include "lockstep/knobs.h"
#include "lockstep/room.h"
#include "lockstep/trace_format.h"

#define LS_TLS         __thread __attribute__((tls_model("initial-exec")))
#define LS_LIKELY(x)   __builtin_expect(!!(x), 1)
#define LS_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* For code a sanitizer runtime may run before it set itself up (its own dlsym(RTLD_NEXT)
 * calls reach the shim's dlsym): no instrumentation, and no C library string functions,
 * which it intercepts. */
#define LS_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* ---- configuration (config.c) ---- */

struct ls_config {
    int disabled;             /* LOCKSTEP_DISABLE */
    char dir[LS_DIR_MAX + 2]; /* LOCKSTEP_DIR or the per-user default; "" until read */
    int dir_is_default;       /* the folder is /dev/shm/lockstep-<uid> */
    uint64_t ring;            /* LOCKSTEP_RING, a power of two */
    uint32_t stack_depth;     /* LOCKSTEP_STACK_DEPTH */
    uint32_t py_depth;        /* LOCKSTEP_PYTHON_DEPTH (0 when stack_depth is 0) */
    double retain_hours;      /* LOCKSTEP_RETAIN_HOURS; 0 keeps every trace */
    uint32_t heartbeat_ms;    /* LOCKSTEP_HEARTBEAT_MS: how often the heartbeat is written */
};

/* Knobs for tests only, in the test build of the shim alone (-DLS_TEST_KNOBS,
 * liblockstep-test.so): never in the shipped library. */
#ifdef LS_TEST_KNOBS
#define LS_KNOBS_TEST(X)                                                                           \
    X(TEST_PY_SKEW, "LOCKSTEP_TEST_PY_SKEW", KNOB_STRING, 0, 0, 64, "unset")                       \
    X(TEST_FAST_COUNT, "LOCKSTEP_TEST_FAST_COUNT", KNOB_BOOL, 0, 0, 1, NULL)                       \
    X(TEST_WAIT_CLOCK, "LOCKSTEP_TEST_WAIT_CLOCK", KNOB_BOOL, 0, 0, 1, NULL)                       \
    X(TEST_BEAT_LATE_MS, "LOCKSTEP_TEST_BEAT_LATE_MS", KNOB_UINT, 0, 0, 10000, NULL)
#else
#define LS_KNOBS_TEST(X)
#endif
#define LS_KNOBS(X) LS_KNOBS_SHIPPED(X) LS_KNOBS_TEST(X)

enum ls_knob {
#define LS_KNOB_ENUM(id, ...) LS_KNOB_##id,
    LS_KNOBS(LS_KNOB_ENUM)
#undef LS_KNOB_ENUM
        LS_KNOB_COUNT
};

/* The value of an integer, boolean, choice or signal knob: read from the environment and
 * checked on first use (a value refused is said in one line on stderr naming the variable,
 * the value and the default, and the default is used), the same value after. Unset is the
 * default (a signal knob: 0, off). This function can't fail. */
int64_t ls_knob_int(enum ls_knob id);

/* The text of a string knob, "" when unset or refused; valid for the life of the process. */
const char *ls_knob_str(enum ls_knob id);

/* Forgets what was read, in a forked child: its knobs are read again, as a new process would. */
void ls_knobs_reset(void);

/* Reads every knob of the table (when the shim starts: each bad value is said then) and fills
 * `cfg` with those it holds (LOCKSTEP_DISABLE, _DIR, _RING, _STACK_DEPTH, _PYTHON_DEPTH,
 * _RETAIN_HOURS, _HEARTBEAT_MS). This function can't fail. */
void ls_config_read(struct ls_config *cfg);

#ifdef LS_TEST_KNOBS
/* LOCKSTEP_TEST_PY_SKEW=N adds N to *frame_code, =units:N to *code_units (tests of the Python
 * layout check). Returns 1 when it applied a skew. */
int ls_config_py_skew(int *code_units, int *frame_code);
#endif

/* Prints "lockstep: <message>" on stderr, in one write(2). Async-signal-safe when `fmt` has
 * no conversions. */
void ls_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the trace file of this process (trace_file.c) ---- */

/* Tickets a thread with a header slot reserves at once (fewer in a small ring). */
#define LS_TICKET_BLOCK 64u

struct ls_trace {
    struct ls_header *hdr;
    struct ls_comm *comms;
    struct ls_peer *peers;
    unsigned char *sites;   /* site_cap entries of hdr->site_entry_size bytes */
    unsigned char *pysites; /* pysite_cap entries of hdr->pysite_entry_size bytes, or NULL */
    char *strings;
    struct ls_record *ring;
    uint64_t ring_mask;
    uint32_t ticket_block; /* hdr->ticket_block: tickets a thread reserves at once */
    size_t map_size;
    char path[768];
};

/* Creates and maps the trace file of this process as `cfg` says, fills its header and prunes
 * expired traces of the same folder. `py_depth` is the frames kept per Python call site: the
 * file gets a python site table (LS_DEFAULT_PYSITES sites) when it is not 0; the caller
 * decides (cfg->py_depth where an interpreter is loaded, else 0). On failure returns -1 after
 * one line on stderr that says what went wrong; nothing is left behind. */
int ls_trace_create(struct ls_trace *t, const struct ls_config *cfg, uint32_t py_depth);

/* ---- room in the trace folder (trace_room.c) ---- */

/* The ring this process's trace takes in folder `dirfd` (named `dir` in messages): cfg->ring when
 * it fits, a smaller one (said in one line on stderr) when the folder is short of room for
 * `sharers` traces (LOCAL_WORLD_SIZE; <= 0: LS_ROOM_DEFAULT_SHARERS) and NCCL, 0 when not even
 * the smallest fits (room.h's rule). cfg->ring when the free space is unknown. */
uint64_t ls_room_ring(int dirfd, const char *dir, const struct ls_config *cfg, uint32_t py_depth,
                      int sharers);

/* Says in one line on stderr that this process is not traced for want of room (a trace of
 * `need` bytes), and leaves `trace_name` + LS_BLIND_SUFFIX in the folder for the runner, holding
 * what the folder had free when there is room for it. This function can't fail. */
void ls_room_mark_blind(int dirfd, const char *dir, const char *trace_name, uint64_t need);

/* The mark of a rank process that has no trace yet (room.h, LS_PENDING_SUFFIX): made at its
 * start (ls_pending_mark(), from the shim's constructor; nothing for a process without a
 * launcher's rank, or when the folder does not exist), removed when its trace is made
 * (ls_pending_clear()) or at an exit with status 0, else given the status (ls_pending_exit()).
 * Each acts on the mark of the calling process only (a forked child made none). */
void ls_pending_mark(void);
void ls_pending_clear(void);
void ls_pending_exit(int status);

/* Unmaps the trace (the file stays). */
void ls_trace_unmap(struct ls_trace *t);

/* Appends a NUL-terminated string to the pool and returns its offset, or 0 when the pool is
 * full. Thread-safe (a lock of its own). */
uint32_t ls_trace_add_string(struct ls_trace *t, const char *s);

/* Re-initializes the string lock (after fork). */
void ls_trace_strings_reset(void);

/* ---- the tail of stderr (stderr_tail.c) ---- */

/* stderr_tail.c interposes the C library's write(): what the process writes to fd 2 is kept in
 * a ring of the last 8 KiB while `on` (LOCKSTEP_STDERR_TAIL, set before main by end_why.c). */
void ls_stderr_tail_keep(int on);

/* Copies the tail's last bytes (at most len - 1), from its first whole line, into `out`
 * (NUL-terminated); returns how many. Waits 100 ms at most for a writer in the ring. */
size_t ls_stderr_tail_copy(char *out, size_t len);

/* In a forked child: its stderr tail starts empty. */
void ls_stderr_tail_after_fork_child(void);

/* ---- why the process ended (end_why.c) ---- */

/* Notes in t's end_why what the environment says now: TORCHELASTIC_ERROR_FILE and NCCL's debug
 * file. Called once the trace is made. This function can't fail (a full pool notes nothing). */
void ls_end_why_note(struct ls_trace *t);

/* At exit with a non-zero status: keeps the tail of what the process wrote to stderr and NCCL's
 * last warning in t's end_why. Once per process; nothing for status 0. */
void ls_end_why_record(struct ls_trace *t, int status);

/* ---- process-wide state (state.c) ---- */

enum ls_state_kind { LS_STATE_OFF = 0, LS_STATE_ON = 1, LS_STATE_DISABLED = 2 };

struct ls_global {
    _Atomic int state; /* enum ls_state_kind */
    int pid;           /* the process that owns `trace` */
    struct ls_config cfg;
    struct ls_trace trace;
    _Atomic uint64_t group_counter;
    int completion_by_plugin;      /* the profiler plugin's build: completion comes from NCCL's
                                    * events, never from CUDA events (set before the first start) */
    _Atomic int pending_creations; /* nonblocking creations not yet seen ready: only while
                                    * some are does ncclCommGetAsyncError look its comm up */
};

extern struct ls_global ls_g;

/* Per-thread state. `generation` invalidates caches after fork. */
#include "fast_abi.h" /* LS_ARM_* and the offsets below */

struct ls_thread {
    /* ---- what the fast path reads and writes (fast_call.h, fast_wrap.S): offsets fixed by
     * fast_abi.h, checked in record.c ---- */
    /* The fast path may record a call on communicator `fast_comm` while fast_arm is
     * ls_fast_epoch with its flags (LS_ARM_*) and in_call is 0 (the two read as one 64-bit
     * word). Set by the general path when the thread has a slot and a block of tickets, is
     * outside groups, the communicator is blocking and completion tracking is off, with the
     * thread's copy of the clock conversion current; anything that changes one of these clears
     * it or bumps ls_fast_epoch. 0: never. */
    uint32_t fast_arm;
    int in_call; /* inside a recorded wrapper: nested NCCL calls are forwarded */
    /* Tickets this thread reserved and has not used: [block_next, block_end) (record.c). While
     * the thread is armed, block_next < block_end. */
    uint64_t block_next;
    /* What the fast path leaves for after the forwarded call: its return takes
     * ls_fast_exit_rare() when block_next reaches fast_limit, which is block_end (a block to
     * reserve) or 0 (fast_flush, a call-site chain whose hits are due to be counted, or an
     * entry timed by the kernel's clock). */
    uint64_t fast_limit;
    uintptr_t fast_comm;
    struct ls_comm *fast_comm_entry;
    struct ls_record *ring; /* the trace's ring and ring mask */
    uint64_t ring_mask;
    struct ls_thread_slot *slot; /* this thread's slot in the header, NULL if none */
    /* The call the fast path is in: its record and ticket + 1. Kept here rather than on the
     * wrapper's stack, so that nothing lives across the forwarded call in registers the
     * wrapper would have to save. */
    struct ls_record *fast_rec;
    uint64_t fast_ticket1;
    /* The newest time this thread recorded (an entry or a return): its next time is never
     * earlier. A recalibrated clock, or the kernel's clock before the first TSC conversion,
     * can read a little behind the conversion a previous call used. */
    uint64_t time_floor;
    /* This thread's copy of the clock conversion `clock_gen` names (ls_fast_clock()); written
     * only by the thread itself, by the general path, outside signal handlers. clock_mult 0:
     * none (the fast path is then not armed). */
    uint64_t clock_base_tsc, clock_base_ns, clock_mult;
    /* Record bytes 96-111 of a call on fast_comm, as the fast path writes them: no call site,
     * the thread id, the rank in fast_comm, no peer. */
    struct {
        uint32_t callsite, tid;
        int32_t comm_rank, peer;
    } fast_tmpl;
    /* The caller of a wrapper whose fast path did not apply, for its general path: passed here
     * so that the wrapper reaches it with a jump, its own arguments untouched. */
    const void *general_pc, *general_cfa;
    /* The thread's call-site cache when the fast path may use it (callsite_cache.h), else
     * NULL: set with fast_arm. */
    void *fast_sites;
    void *fast_flush; /* a chain whose hits are due to be counted, NULL none */
    /* ---- the rest ---- */
    uint32_t clock_gen;
    int group_depth;      /* ncclGroupStart nesting */
    uint64_t group_id;    /* id of the outermost open group, 0 outside groups */
    uint64_t group_calls; /* calls recorded inside the open group */
    uint32_t tid;
    uint32_t generation;
    uintptr_t cached_handle; /* last communicator looked up */
    int cached_idx;
    const void *group_streams[8]; /* streams the open group issued on */
    int ngroup_streams;
    uint64_t group_work[64]; /* tickets of the open group's calls that issue work (the first 64) */
    int ngroup_work;
    uint32_t setup_generation; /* ls_generation when record.c last set the thread up */
    int slot_pid;              /* process whose trace `slot` lies in */
    void *site_cache;          /* callsite.c's recently seen stacks of this thread */
    uint64_t block_end;
    uint32_t stack_depth; /* the trace's stack_depth */
    int fast_comm_idx;
};

extern LS_TLS struct ls_thread ls_t;
extern _Atomic uint32_t ls_generation;
/* What a thread's fast_arm must equal, but for its flags, for the fast path to apply: even,
 * never 0, below 2^31 (compared as 64 bits with in_call above it). Bumped with ls_generation
 * and when a new clock conversion is published. */
extern _Atomic uint64_t ls_fast_epoch __attribute__((visibility("hidden")));

/* Bumps ls_generation (every thread sets itself up again and leaves the fast path). */
void ls_generation_bump(void);
/* Bumps ls_fast_epoch (every thread leaves the fast path until its next general call). */
void ls_fast_epoch_bump(void);

/* Kernel thread id of the caller, cached per thread. */
uint32_t ls_tid(void);

/* ---- clock (clock.c) ---- */

#include "ticks.h" /* ls_ticks() */

/* CLOCK_REALTIME in ns, from the kernel. */
static inline uint64_t ls_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* TSC -> CLOCK_REALTIME: ns = base_ns + ((tsc - base_tsc) * mult) >> 32. The heartbeat writes
 * a new conversion into the entry after the current one and then publishes its number in
 * `gen` (0: none yet, ls_now() asks the kernel); a reader takes the entry `gen` names without a
 * retry loop. An entry is rewritten only four conversions (seconds) after it was published, so
 * a reader checks `gen` again only to catch a thread that slept through that. */
struct ls_clock_param {
    _Atomic uint64_t base_tsc, base_ns, mult;
};
struct ls_clock_conv {
    _Atomic uint32_t gen;
    struct ls_clock_param p[4];
};
extern struct ls_clock_conv ls_clock_conv;

/* Takes a (TSC, CLOCK_REALTIME) sample and, with the previous one at least 10 ms old,
 * publishes a new conversion. Called by the heartbeat thread about once a second; does
 * nothing when the kernel does not run its own clock on the TSC (or LOCKSTEP_CLOCK=realtime),
 * so ls_now() keeps asking the kernel. This function can't fail. */
void ls_clock_calibrate(void);

/* 1 while the counter may still be read and no conversion is published yet (the heartbeat's
 * first two samples, 20 ms apart, are not taken). */
int ls_clock_pending(void);

/* Where the shim's timestamps come from now (enum ls_clock_source, for the trace header):
 * LS_CLOCK_REALTIME until a conversion is published or when no counter is trusted. */
int ls_clock_source(void);

/* CLOCK_REALTIME in ns: from the TSC once calibrated (a few ns; within a few microseconds of
 * the kernel's clock, recalibrated every second), else clock_gettime. */
static inline uint64_t ls_now(void)
{
    struct ls_clock_conv *c = &ls_clock_conv;
    for (;;) {
        uint32_t g = atomic_load_explicit(&c->gen, memory_order_acquire);
        if (LS_UNLIKELY(g == 0))
            return ls_realtime_ns();
        const struct ls_clock_param *p = &c->p[g & 3];
        uint64_t tsc = ls_ticks();
        uint64_t base_tsc = atomic_load_explicit(&p->base_tsc, memory_order_relaxed);
        uint64_t base_ns = atomic_load_explicit(&p->base_ns, memory_order_relaxed);
        uint64_t mult = atomic_load_explicit(&p->mult, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (LS_UNLIKELY(atomic_load_explicit(&c->gen, memory_order_relaxed) - g > 2))
            continue; /* slept through three recalibrations: the entry may be rewritten */
        /* Another CPU's TSC may read a few ticks before the base: signed. */
        int64_t d = (int64_t)(tsc - base_tsc);
        return base_ns + (uint64_t)(((__int128)d * (__int128)mult) >> 32);
    }
}

/* Copies the published conversion into the calling thread's ls_thread unless it holds it
 * already (clock.c): the copy the fast path reads (fast_call.h, ls_fast_clock()). */
void ls_clock_thread_current(void);

/* ---- lifecycle: the start, heartbeat, signals, exit, fork (lifecycle.c) ---- */

/* Returns the trace to record into, starting it on first use (file, heartbeat, signal, exit
 * and fork hooks), or NULL when recording is off (disabled, or the trace could not be created:
 * then one line was printed and every later call is forwarded untouched). */
struct ls_trace *ls_active(void);

/* Starts fn(arg) on a detached thread with a stack of `stack` bytes that takes no signals.
 * Returns pthread_create's result. */
int ls_start_thread(void *(*fn)(void *), void *arg, size_t stack);

/* Re-installs the signal handlers if the program replaced them since (keeping theirs as the
 * ones to chain to). Cheap enough for communicator creation, not for every call. */
void ls_lifecycle_recheck_signals(void);

/* Writes the calling thread's stack as interrupted at signal context `uctx` (and its Python
 * frames) into the header's live_stack/live_python, under their sequence lock. For signal
 * handlers of the trace's owner only: no locks, no allocation. */
void ls_live_stack_capture(void *uctx);

/* Installs the handler of the live-stack signal when LOCKSTEP_STACK_SIGNAL names one (unset or
 * 0: none, the default) and publishes its number in the header; leaves a program's own handler
 * alone. */
void ls_live_stack_install(struct ls_trace *t);

/* ---- completion on the GPU (completion.c) ---- */

/* Turns completion tracking on when the process has the CUDA driver (libcuda.so.1) loaded
 * and LOCKSTEP_COMPLETION is not 0; safe to call again later (cheap once on). */
void ls_completion_start(struct ls_trace *t);

/* True once tracking is on. */
int ls_completion_active(void);

/* Notes that the operation with `ticket` was issued on `stream` at `now` (the call's return:
 * records an event behind it when one is free). Returns 1 when tracked, 0 when not (stream
 * table full), -1 when the stream is being captured into a graph (the caller marks the record). */
int ls_completion_issue(struct ls_trace *t, const void *stream, uint64_t ticket, uint64_t now);
/* Before work is issued on `stream` outside a group, at `now` (the call's entry): after a gap in
 * the stream's calls, covers the work issued before with an event of its own (completion.c). */
void ls_completion_before(struct ls_trace *t, const void *stream, uint64_t now);

/* Checks outstanding events, marks what completed, re-arms streams with newer work. Never
 * blocks on the GPU. Returns 1 while an event is still outstanding. */
int ls_completion_poll(struct ls_trace *t);

/* Forgets the driver state (after fork). */
void ls_completion_reset(void);

/* ---- real NCCL (resolve.c) ---- */

/* Finds the real NCCL function `name` (trying pncclX and ncclX through RTLD_NEXT, an already
 * loaded libnccl with RTLD_NOLOAD, and the loaded objects) that is not `self`. Returns NULL
 * when no NCCL library is loaded, after one line on stderr (once per process). */
void *ls_resolve(const char *name, void *self);

/* Declares the pointer to the real `name` and its type (one line per forwarded function). */
#define LS_FORWARD_DECL(name, ret, params)                                                         \
    typedef ret(*ls_fn_##name##_t) params;                                                         \
    static ls_fn_##name##_t ls_real_##name

/* Evaluates to the real `name`, resolving it on first use; NULL if there is none. */
#define LS_REAL(name) LS_REAL_NOT(name, (void *)name)

/* LS_REAL() refusing `self` (the wrapper's own address, or NULL: ls_resolve() refuses every
 * symbol of the shim's own object anyway). */
#define LS_REAL_NOT(name, self)                                                                    \
    ({                                                                                             \
        ls_fn_##name##_t ls_r_ = atomic_load_explicit(                                             \
            (_Atomic(ls_fn_##name##_t) *)&ls_real_##name, memory_order_acquire);                   \
        LS_LIKELY(ls_r_ != NULL)                                                                   \
        ? ls_r_ : (ls_real_##name = (ls_fn_##name##_t)ls_resolve(#name, (self)));                  \
    })

/* ---- symbols of loaded objects (elf_lookup.c) ---- */

/* A loaded object's dynamic symbol table, as mapped in memory. */
struct ls_elf {
    uintptr_t base; /* load bias */
    const void *symtab;
    const char *strtab;
    size_t strsz;
    const uint32_t *gnu_hash;  /* DT_GNU_HASH, or NULL */
    const uint32_t *sysv_hash; /* DT_HASH, used without a GNU hash table */
    const uint16_t *versym;    /* DT_VERSYM, or NULL */
};

/* Reads the dynamic section `dynamic` of the object loaded at `base`. Returns 0, or -1 when it
 * has no symbol table to search. Never calls the dynamic loader; async-signal-safe. */
int ls_elf_open(struct ls_elf *e, uintptr_t base, const void *dynamic);

/* Address of the definition of `name` (its default version) in `e`, NULL if none. */
void *ls_elf_symbol(const struct ls_elf *e, const char *name);

/* The PT_DYNAMIC of an object dl_iterate_phdr reports, NULL if none. */
struct dl_phdr_info;
const void *ls_elf_dynamic(const struct dl_phdr_info *info);

/* The file name part of `path` ("" for NULL). */
const char *ls_path_base(const char *path);

/* ---- the C library's dlsym and dlvsym, the shim's own mapping (dl_real.c) ---- */

/* What the C library's dlsym(handle, name) (version NULL) or dlvsym(handle, name, version)
 * returns, called as the shim: the shim's own lookups call this, never the dlsym the shim
 * exports for the program (dlsym.c). NULL when the C library's is nowhere (said once). */
void *ls_dl_lookup(void *handle, const char *name, const char *version);

/* True when `addr` lies in liblockstep.so's own mapping. Async-signal-safe, usable before
 * the shim's constructors ran. */
int ls_in_shim(const void *addr);

/* The shim's own exported definition of `name` (an NCCL wrapper), NULL if it has none. */
void *ls_own_symbol(const char *name);

/* True for a path whose file name is libnccl.so* (not libnccl-net, a profiler or tuner
 * plugin). */
int ls_is_libnccl_path(const char *path);

/* ---- saying when blind (blind.c) ---- */

/* Looks at the objects loaded since the last look (cheap when none): when NCCL is among them
 * (libnccl, or NCCL's API defined by another object) with the CUDA driver, and no NCCL call
 * has reached the shim, starts a watch thread; after LOCKSTEP_BLIND_SECONDS (default 5, 0 off)
 * still without one, it starts the trace and records LS_HFLAG_NCCL_UNSEEN. Called from the
 * shim's constructor and from dlsym; never from the shim's own lookups. */
void ls_blind_check(void);

/* ---- communicators (comms.c) ---- */

/* Returns the comm-table index of the communicator with handle `h`, adopting an unknown one
 * (an entry with a process-local id) when it was made before recording started; -1 when the
 * table is full. */
int ls_comm_lookup(struct ls_trace *t, uintptr_t h);

/* Registers a communicator created by `op`; `h` is 0 while NCCL has not produced the handle
 * (ls_comm_bind or ls_comm_defer follow). Returns the entry index or -1 when the table is
 * full. */
int ls_comm_register(struct ls_trace *t, uintptr_t h, uint64_t id, uint64_t parent_id, int nranks,
                     int rank, unsigned create_op, int color, int key, uint32_t site,
                     const void *config);

/* Sets the handle of entry `idx` once NCCL has produced it and asks NCCL for rank/size if
 * they are unknown. */
void ls_comm_bind(struct ls_trace *t, int idx, uintptr_t h);

/* Remembers that NCCL will store entry `idx`'s handle at `out` later: at the end of the
 * enclosing group (`settled_by_group_end`), or when a nonblocking creation completes. */
void ls_comm_defer(struct ls_trace *t, int idx, void *const *out, int settled_by_group_end);

/* Marks deferred creations of a group as complete (called when the outermost ncclGroupEnd
 * returned successfully). */
void ls_comm_settle(void);

/* Binds deferred entries whose handle NCCL has stored: the one holding `want` (an unknown
 * handle just seen), or with `want` 0 every settled one. */
void ls_comm_resolve_pending(struct ls_trace *t, uintptr_t want);

/* Marks the entry with handle `h` ended by `flag` (LS_COMM_DESTROYED, ...) and forgets the
 * handle when the communicator is gone. */
void ls_comm_end(struct ls_trace *t, uintptr_t h, uint32_t flag);

/* Notes that entry `idx`'s creation returned ncclInProgress: a nonblocking creation, pending
 * until ncclCommGetAsyncError reports it ready (ls_comm_note_ready()). */
void ls_comm_created_pending(struct ls_trace *t, int idx);

/* ncclCommGetAsyncError reported communicator `h` ready (ncclSuccess): a pending creation of it
 * is complete, its init_result ncclSuccess from now on. */
void ls_comm_note_ready(struct ls_trace *t, uintptr_t h);

/* Identity helpers, ids every member computes alike: lockstep/comm_id.h. */

/* Returns the peer-table entry for (idx, peer), creating it; NULL when the table is full. */
struct ls_peer *ls_peer_get(struct ls_trace *t, int idx, int peer);

/* Forgets every in-process index (after fork). */
void ls_comms_reset(void);

/* Real NCCL helpers used by the registry; set by wrap_comm.c. */
extern int (*ls_query_rank)(uintptr_t h, int *rank);
extern int (*ls_query_count)(uintptr_t h, int *count);

/* ---- call sites (callsite.c) ---- */

/* Captures the caller's stack (skipping the shim's frames) and returns its call site id,
 * registering and symbolizing it the first time it is seen; 0 when call sites are off or the
 * table is full. `a->caller_pc`/`caller_cfa` (the wrapper's return address and frame) let a
 * stack the thread saw recently be recognised without unwinding; NULL forces an unwind. */
struct ls_call_args;
uint32_t ls_callsite_capture(struct ls_trace *t, const struct ls_call_args *a);

/* Adds the calling thread's call-site hits not yet counted to the sites' shared counts (they
 * are added 64 at a time, and when a thread ends): for the thread that exits the process. */
void ls_callsites_flush_thread(void);

/* Forgets the in-process site index (after fork). */
void ls_callsites_reset(void);

/* ---- Python frames (python.c) ---- */

/* Whether a CPython interpreter's symbols are in the process (initialized or not). */
int ls_python_present(void);

/* The python site id of the calling thread's Python stack (registered and named the first
 * time it is seen), 0 when the thread runs no Python, Python frames are off or cannot be
 * read safely (docs/python.md). Never takes the GIL, never allocates a Python object.
 * Only for a trace with a python site table (t->pysites; the caller checks). */
uint32_t ls_python_capture(struct ls_trace *t);

/* Writes the calling thread's Python frames as "file.py:LINE (func) <- ..." (base names,
 * innermost first) into out (NUL-terminated; "" when it runs no Python or they cannot be
 * read). Async-signal-safe: for the live-stack signal handler; every read is checked. */
void ls_python_live(char *out, size_t cap);

/* Forgets the in-process python site index (after fork). */
void ls_python_reset(void);

/* ---- recording a call (record.c) ---- */

struct ls_call_args {
    unsigned op;
    uintptr_t comm; /* handle, 0 if the call has none */
    uint64_t count;
    int dtype; /* -1 none */
    int redop; /* -1 none */
    int peer;  /* root or peer, -1 none */
    const void *sendbuff;
    const void *recvbuff;
    const void *stream;
    const void *caller_pc;  /* the NCCL wrapper's __builtin_return_address(0), or NULL */
    const void *caller_cfa; /* the NCCL wrapper's __builtin_dwarf_cfa() */
    int has_site;           /* `site` was captured for this call already */
    uint32_t site;
    uint64_t enter_ns; /* when the call was entered, for one recorded after it returned; 0: now */
    uint64_t aux;      /* the record's aux at entry (one-sided signals, a config's user tag) */
    uint32_t xflags;   /* LS_REC_* flags of the call's own (LS_REC_COLL_CONFIG and its policy) */
    int issued_later;  /* its stream is told of its work by the caller, not by the call (a
                        * CUDA-graph launch's replays: once for the launch, graph.c) */
};

/* Fills the caller fields of `a`; used in the exported wrapper itself (not a helper). */
#define LS_CALLER(a)                                                                               \
    do {                                                                                           \
        (a).caller_pc = __builtin_return_address(0);                                               \
        (a).caller_cfa = __builtin_dwarf_cfa();                                                    \
    } while (0)

struct ls_call {
    unsigned op;
    uint32_t site; /* call site id of the call */
    int comm_rank; /* the caller's rank in the call's communicator, -1 unknown */
    uint64_t enter_ns;
    uint64_t exit_ns; /* set by ls_call_exit() */
    const void *stream;
    int issued_later; /* its stream is told later: at the GroupEnd inside a group, else by the
                       * caller (ls_call_args.issued_later) */
    struct ls_trace *t;
    struct ls_record *rec; /* NULL when the ring slot was taken (the call is unrecorded) */
    uint64_t ticket;
    int comm_idx;
    int peer; /* Send/Recv: the peer, else -1 */
};

/* Starts recording a call: returns 1 with `c` filled when the call is recorded (the caller
 * must then call ls_call_exit), 0 when it must simply be forwarded (recording off, or a
 * nested call made by NCCL itself). */
int ls_call_enter(struct ls_call *c, const struct ls_call_args *a);

/* Tells completion tracking that call `c` put work on `stream` (its own record's stream, or
 * for a GroupEnd each stream of the group). Work issued into a stream being captured is
 * flagged LS_REC_GRAPH_CAPTURED and handed to graph_capture.c. */
void ls_call_issued(struct ls_call *c, const void *stream);

/* ---- CUDA graphs (graph_capture.c: the calls each graph holds; graph.c: the driver's entry
 * points, each launch recorded as the calls it replays) ---- */

/* One NCCL call captured into a graph: what each launch of it replays. */
struct ls_graph_call {
    uintptr_t comm; /* the ncclComm_t */
    uint64_t count, sendbuff, recvbuff;
    uint32_t site; /* the capture's call site */
    uint64_t aux;  /* the capture's aux (one-sided ops keep their signals) */
    int32_t peer, redop;
    uint16_t op;
    uint8_t dtype;
    uint32_t xflags; /* the capture's flags a replay keeps (its CTA policy) */
};

/* Record `r` was issued into `stream` while it was captured: it becomes a call of the graph the
 * capture builds. Returns 1 when it did (the driver named the graph). */
int ls_graph_note(struct ls_trace *t, const struct ls_record *r, const void *stream);
/* Whether any graph holds NCCL calls (launches are worth looking up). */
int ls_graph_any(void);
/* `exec` was instantiated from `graph`: it holds a copy of the graph's calls. */
void ls_graph_instantiated(uintptr_t graph, uintptr_t exec);
/* A graph (exec 0) or executable graph (exec 1) was destroyed. */
void ls_graph_forget(uintptr_t key, int exec);
/* The calls executable `exec` replays at a launch (a malloc'd copy for the caller to free), and
 * the launch's number (from 1); 0 when it holds none. */
uint32_t ls_graph_calls(uintptr_t exec, struct ls_graph_call **calls, uint64_t *launch);
/* For a lookup of `name` through `handle` (dlsym.c): graph.c's wrapper when the name is a graph
 * entry point it wraps and the lookup lands in libcuda, else NULL (forwarded as it came). */
void *ls_graph_dlsym(void *handle, const char *name, const char *version);

/* The end of a wrapper: records the call `a` describes around forwarding `args` to `real`
 * (forwards alone when it is not recorded: NCCL calling itself, recording off), and returns
 * the result. */
#define LS_RECORD_FORWARD(real, args, a)                                                           \
    do {                                                                                           \
        struct ls_call c;                                                                          \
        if (!ls_call_enter(&c, &(a)))                                                              \
            return real args;                                                                      \
        ncclResult_t res = real args;                                                              \
        ls_call_exit(&c, res);                                                                     \
        return res;                                                                                \
    } while (0)

/* Defines the wrapper `name`: resolve the real function, record the call described by
 * `args_init` (a struct ls_call_args initializer), forward, record the return. */
#define LS_WRAP(name, params, args, args_init)                                                     \
    LS_FORWARD_DECL(name, ncclResult_t, params);                                                   \
    ncclResult_t name params                                                                       \
    {                                                                                              \
        ls_fn_##name##_t real = LS_REAL(name);                                                     \
        if (LS_UNLIKELY(!real))                                                                    \
            return ncclSystemError;                                                                \
        struct ls_call_args a = args_init;                                                         \
        LS_CALLER(a);                                                                              \
        LS_RECORD_FORWARD(real, args, a);                                                          \
    }

/* A struct ls_call_args initializer for a call with these fields. */
#define LS_CALL_ARGS(op_, comm_, count_, dtype_, redop_, peer_, send_, recv_, stream_)             \
    {                                                                                              \
        .op = (op_), .comm = (uintptr_t)(comm_), .count = (count_), .dtype = (int)(dtype_),        \
        .redop = (int)(redop_), .peer = (peer_), .sendbuff = (send_), .recvbuff = (recv_),         \
        .stream = (const void *)(stream_)                                                          \
    }

/* Writes the return of a call started by ls_call_enter. */
void ls_call_exit(struct ls_call *c, int result);

/* Reserves a new block of tickets for the calling thread, which has a slot (for the fast path
 * too: fast_call.c). */
void ls_block_reserve(struct ls_trace *t);

/* Sets fields of a record still owned by the caller (before ls_call_exit): communicator
 * creations know their id and rank only in the wrapper. */
void ls_call_set(struct ls_call *c, uint64_t comm_id, int comm_rank, uint64_t count, uint64_t aux);

/* Publishes a record holding `fields` (its ticket ignored) for an operation seen by another
 * observer than a wrapper (the profiler plugin) and returns it, with its ticket in *ticket;
 * NULL when the ring slot is still held by another writer (the operation goes unrecorded). */
struct ls_record *ls_record_put(struct ls_trace *t, const struct ls_record *fields,
                                uint64_t *ticket);

/* Updates the record `ls_record_put` returned with `ticket`: its return (exit_ns and result,
 * when exit_ns != 0) and its completion on the GPU (complete_ns != 0). Does nothing when the
 * ring wrapped onto its slot since. */
void ls_record_finish(struct ls_record *r, uint64_t ticket, uint64_t exit_ns, int result,
                      uint64_t complete_ns);

/* ---- lockstep's profiler plugin beside the shim (bridge.c) ---- */

/* What the shim offers lockstep's NCCL profiler plugin loaded into the same process, so that
 * one call stays one record: the plugin then adds GPU progress to the shim's communicators
 * and writes no records. Found by the plugin with dlsym(RTLD_DEFAULT, LS_BRIDGE_SYMBOL). */
#define LS_BRIDGE_SYMBOL  "lockstep_shim_bridge"
#define LS_BRIDGE_VERSION 1
struct ls_bridge {
    uint32_t version; /* LS_BRIDGE_VERSION */
    uint32_t size;    /* sizeof(struct ls_bridge) */
    /* The shim's trace (started if need be), NULL when it records nothing. */
    struct ls_trace *(*active)(void);
};

#endif
