/* trace_format.h -- the byte layout of a lockstep trace file, shared by the shim (writer) and the
 * analyzer (reader). docs/trace-format.md describes every field; keep the two in step. */
#ifndef LOCKSTEP_TRACE_FORMAT_H
#define LOCKSTEP_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* A trace file is one shared mapping, laid out as:
 *
 *   [ls_header, 4096 bytes][comm table][peer table][site table][python site table]
 *   [string pool][ring of records]
 *
 * Every section offset and size is in the header, so a reader never assumes the layout. All
 * integers are little-endian (the writer's native order; `endian` lets a reader refuse others).
 * Fields the writer updates while the process runs are marked (live); they are written with
 * atomic stores and must be read with atomic loads by a live reader. */

#define LS_MAGIC          "LOCKSTEP"
#define LS_MAGIC_LEN      8
#define LS_FORMAT_VERSION 1
#define LS_ENDIAN_TAG     0x01020304u
#define LS_HEADER_SIZE    4096u

#define LS_HOST_LEN      64
#define LS_JOB_LEN       64
#define LS_CMDLINE_LEN   448 /* 512 before ls_end_why took its last 64 bytes (LS_HFLAG_END_WHY) */
#define LS_COMM_NAME_LEN 32

/* Default capacities (the shim may be told otherwise; readers take them from the header). */
#define LS_DEFAULT_RING         32768u
#define LS_DEFAULT_COMMS        512u
#define LS_DEFAULT_PEERS        4096u
#define LS_DEFAULT_SITES        1024u
#define LS_DEFAULT_STRINGS      (256u * 1024u)
#define LS_DEFAULT_STACK_DEPTH  16u
#define LS_MAX_STACK_DEPTH      64u
#define LS_DEFAULT_PYSITES      1024u
#define LS_DEFAULT_PY_DEPTH     16u
#define LS_MAX_PY_DEPTH         64u
#define LS_LIVE_PY_LEN          256u
#define LS_DEFAULT_HEARTBEAT_MS 10u /* how far apart SIGKILL deaths can be told apart */
#define LS_MIN_RING             64u
#define LS_MAX_RING             (1u << 24)

/* Retention (LOCKSTEP_RETAIN_HOURS, 0 keeps everything): a trace whose last sign of life (the
 * newest of start_ns, heartbeat_ns and end_ns) is older is deleted, by the shim in its own folder
 * and by `lockstep run` with the run-* folders it made. */
#define LS_DEFAULT_RETAIN_HOURS 72u
#define LS_MAX_RETAIN_HOURS     (24u * 365u * 10u)

/* How the process ended (ls_header.end_kind). */
enum ls_end_kind {
    LS_END_RUNNING = 0,  /* no end recorded: still running, or killed by an uncatchable signal */
    LS_END_EXITED = 1,   /* exit() or return from main; end_status holds the status */
    LS_END_SIGNALED = 2, /* a fatal signal reached the shim's handler; end_signal holds it */
    LS_END_UNDERSCORE_EXIT = 3, /* _exit()/_Exit() called directly; end_status holds the status */
};

/* Where the global rank came from (ls_header.rank_source). */
enum ls_rank_source {
    LS_RANK_UNKNOWN = 0,
    LS_RANK_FROM_ENV = 1, /* RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, ... */
};

/* Header flags. */
#define LS_HFLAG_CUDA_SEEN    (1u << 0) /* the process had libcuda loaded at some point */
#define LS_HFLAG_CLOSED       (1u << 1) /* the writer unmapped the file cleanly */
#define LS_HFLAG_SITES_FULL   (1u << 2) /* the site table filled: later new sites are id 0 */
#define LS_HFLAG_COMMS_FULL   (1u << 3) /* the comm table filled: calls on new comms unrecorded */
#define LS_HFLAG_PEERS_FULL   (1u << 4) /* the peer table filled: p2p seq numbers for new peers 0 */
#define LS_HFLAG_STRINGS_FULL (1u << 5)
#define LS_HFLAG_PYSITES_FULL (1u << 6) /* the python site table filled: later stacks unnamed */
#define LS_HFLAG_END_STACK                                                                         \
    (1u << 7) /* live_stack/live_python were taken by the handler of                               \
               * the fatal signal in end_signal: where it died */
/* The shim was blind: NCCL was in the process (and the CUDA driver), but no NCCL call reached
 * the shim for LOCKSTEP_BLIND_SECONDS. The two flags after it say how NCCL was there. */
#define LS_HFLAG_NCCL_UNSEEN     (1u << 8)
#define LS_HFLAG_NCCL_LIB_LOADED (1u << 9) /* a libnccl.so object was loaded */
#define LS_HFLAG_NCCL_STATIC                                                                       \
    (1u << 10) /* an object other than libnccl and the shim defines NCCL's API                     \
                * (NCCL linked statically into it): nccl_static_object names it */
/* The header holds ls_end_why at 768 (written by shims that know it, which keep cmdline to 447
 * bytes); without the flag those 64 bytes are the tail of a 512-byte cmdline of older shims. */
#define LS_HFLAG_END_WHY (1u << 11)

/* Why the process ended, beyond its status: what it said on its way out. Strings are offsets
 * into the string pool, 0 none. Written at exit (exit, _exit) with a non-zero status, except
 * error_file and nccl_debug_file, noted when the trace is made. */
#define LS_STDERR_TAIL_LEN 4096 /* at most this many bytes (NUL included) of stderr_tail */
struct ls_end_why {
    uint32_t stderr_tail;     /*  0: the last bytes the process wrote to file descriptor 2
                               *     (through write(2)), from a line start: where the interpreter
                               *     printed an uncaught exception's traceback */
    uint32_t error_file;      /*  4: TORCHELASTIC_ERROR_FILE (torchrun's @record writes there) */
    uint32_t nccl_warning;    /*  8: NCCL's last "NCCL WARN" line, from NCCL_DEBUG_FILE */
    uint32_t nccl_debug_file; /* 12: NCCL_DEBUG_FILE as expanded for this process (%h, %p) */
    int32_t cuda_result;      /* 16: a CUDA error the shim saw (CUresult), 0 none */
    uint32_t cuda_error;      /* 20: its text (cuGetErrorString), 0 none */
    uint64_t ns;              /* 24: when it was written (the exit), 0 never */
    uint32_t beat_late_us;    /* 32: how much later than its period the heartbeat came, at
                               *     worst, over its last 4 to 8 s (the scheduler ran its thread
                               *     late): how long after its last heartbeat a process killed
                               *     without a record may still have lived (live), 0 unknown */
    uint32_t reserved[7];     /* 36 */
};                            /* 64 bytes */

/* A stack captured on request while the process runs (`lockstep run`/`watch` send the signal
 * in ls_header.live_signal). A sequence lock: `seq` is odd while the shim writes, even when
 * the stack is whole; it grows by 2 per capture. */
#define LS_LIVE_FRAMES 32
struct ls_live_stack {
    uint64_t seq;                 /*  0 (live) */
    uint64_t ns;                  /*  8: CLOCK_REALTIME ns of the capture */
    uint32_t tid;                 /* 16: the thread that was interrupted */
    uint32_t nframes;             /* 20 */
    uint64_t pcs[LS_LIVE_FRAMES]; /* 24: the interrupted pc first, then return addresses */
};                                /* 280 bytes */

/* Completion tracking of one CUDA stream the process issued NCCL work on (GPU truth: a call
 * that returned has only been enqueued). The shim keeps at most one CUDA event outstanding
 * per stream; when it completes, every operation issued on the stream up to the ticket it
 * covers has completed. */
#define LS_MAX_STREAMS          32
#define LS_STREAM_VALID         (1u << 0) /* the slot is in use */
#define LS_STREAM_EVENT_PENDING (1u << 1) /* an event is outstanding on it (live) */
#define LS_STREAM_CAPTURED      (1u << 2) /* work was issued into it while it was captured */
#define LS_STREAM_FAILED        (1u << 3) /* the driver refused an event: no tracking */
struct ls_stream {
    uint64_t stream;           /*  0: the cudaStream_t (0 is the legacy default stream) */
    uint64_t issued_ticket;    /*  8: ticket + 1 of the newest op issued on it, 0 none (live) */
    uint64_t completed_ticket; /* 16: ticket + 1 of the newest op known complete, 0 none (live) */
    uint64_t completed_ns;     /* 24: when that completion was observed (live) */
    uint64_t event_ticket;     /* 32: ticket + 1 the outstanding event covers (live) */
    uint32_t flags;            /* 40: LS_STREAM_* (live) */
    uint32_t pad;              /* 44 */
};                             /* 48 bytes */

/* Where record timestamps come from (ls_header.clock_source). Either way they are
 * CLOCK_REALTIME ns, comparable across nodes. */
enum ls_clock_source {
    /* clock_gettime(CLOCK_REALTIME) on every call */
    LS_CLOCK_REALTIME = 0,
    /* the CPU's counter (x86-64: the TSC the kernel clocks on; aarch64: the generic timer),
     * converted with a rate and offset the shim recalibrates against CLOCK_REALTIME every second
     * (within a few us of it) */
    LS_CLOCK_TSC = 1,
    /* the same, from a TSC the CPU calls invariant while the kernel clocks on another source
     * (kvm-clock, hyperv, xen) */
    LS_CLOCK_TSC_INVARIANT = 2,
};

/* One thread of the process that records calls: whether it is inside one. The first
 * LS_THREAD_SLOTS recording threads own a slot each (one cache line, written by its owner
 * only, so entering and leaving a call costs no shared atomic); later threads count in
 * ls_header.calls_in_flight instead. Use ls_calls_in_flight() for the total. */
#define LS_THREAD_SLOTS 16
struct ls_thread_slot {
    uint64_t in_call_since; /*  0: enter_ns of the call the thread is in, 0 none (live) */
    uint32_t tid;           /*  8: owning thread, 0 free (live) */
    uint32_t pad;           /* 12 */
    uint64_t py_tstate;     /* 16: the thread's PyThreadState address in this process, as its
                             *     Python frames were last read; 0 none (live): lets a live
                             *     reader find the thread's Python frames from outside */
    uint64_t block_start;   /* 24: first ticket + 1 of the block of ls_header.ticket_block
                             *     tickets the thread reserved last, 0 none (live): tickets of
                             *     it the thread has not used yet are not lost records */
    uint64_t last_enter_ns; /* 32: last time the thread entered a recorded call (live) */
    uint64_t last_exit_ns;  /* 40: last time the thread left a recorded call (live) */
    uint64_t cpu_ns;        /* 48: the thread's CPU time as the heartbeat last sampled it (every
                             *     100 ms), 0 never sampled (live) */
    uint64_t on_cpu_ns;     /* 56: CLOCK_REALTIME of the last sample at which the thread had
                             *     used the CPU since the one before (5% of the interval or
                             *     more): busy up to then, off the CPU since (asleep, in I/O,
                             *     blocked); 0 never seen on it (live) */
};                          /* 64 bytes */

/* ls_header.completion: whether issued operations' completion is known. */
enum ls_completion_state {
    LS_COMPLETION_OFF = 0,    /* no CUDA driver in the process: a call that returned is done */
    LS_COMPLETION_EVENTS = 1, /* tracked with CUDA events per stream */
};

struct ls_header {
    char magic[LS_MAGIC_LEN]; /*   0: "LOCKSTEP" */
    uint32_t version;         /*   8: LS_FORMAT_VERSION */
    uint32_t header_size;     /*  12: LS_HEADER_SIZE */
    uint32_t endian;          /*  16: LS_ENDIAN_TAG as written by the writer */
    uint32_t flags;           /*  20: LS_HFLAG_* (live) */
    uint64_t file_size;       /*  24: bytes in the file */

    /* Section table. */
    uint64_t comm_off;        /*  32 */
    uint32_t comm_cap;        /*  40: entries */
    uint32_t comm_entry_size; /*  44: sizeof(struct ls_comm) */
    uint64_t peer_off;        /*  48 */
    uint32_t peer_cap;        /*  56 */
    uint32_t peer_entry_size; /*  60: sizeof(struct ls_peer) */
    uint64_t site_off;        /*  64 */
    uint32_t site_cap;        /*  72 */
    uint32_t
        site_entry_size;  /*  76: sizeof(struct ls_site) + stack_depth * sizeof(struct ls_frame) */
    uint64_t str_off;     /*  80 */
    uint64_t str_cap;     /*  88: bytes */
    uint64_t ring_off;    /*  96 */
    uint64_t ring_cap;    /* 104: records */
    uint32_t record_size; /* 112: sizeof(struct ls_record) */
    uint32_t stack_depth; /* 116: frames kept per call site (0: call sites off) */

    /* Identity of the process. */
    int32_t pid;                  /* 120 */
    int32_t ppid;                 /* 124 */
    uint32_t uid;                 /* 128 */
    int32_t rank;                 /* 132: global rank from the launcher's environment, -1 unknown */
    int32_t local_rank;           /* 136: -1 unknown */
    int32_t world_size;           /* 140: -1 unknown */
    int32_t local_world_size;     /* 144: -1 unknown */
    uint32_t rank_source;         /* 148: enum ls_rank_source */
    uint64_t start_ns;            /* 152: CLOCK_REALTIME ns when the trace was created */
    char host[LS_HOST_LEN];       /* 160: NUL-terminated */
    char job[LS_JOB_LEN];         /* 224: job id (LOCKSTEP_JOB, SLURM_JOB_ID, ...), "" if none */
    char job_source[32];          /* 288: name of the variable the job id came from */
    char cmdline[LS_CMDLINE_LEN]; /* 320: argv joined by spaces, truncated */
    struct ls_end_why end_why;    /* 768: with LS_HFLAG_END_WHY (else cmdline bytes) */
    uint32_t nccl_version;        /* 832: ncclGetVersion() of the real library, 0 unknown (live) */
    uint32_t attempt;             /* 836: the launcher's restart count + 1
                                   *      (TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT), 0 unknown */

    /* Live state. */
    uint64_t heartbeat_ns; /* 840: CLOCK_REALTIME ns of the last heartbeat (live) */
    uint64_t
        next_ticket; /* 848: records reserved so far; record t lives in slot t % ring_cap (live) */
    uint32_t comm_count;      /* 856: comm entries used (live) */
    uint32_t peer_count;      /* 860: peer entries used (live) */
    uint32_t site_count;      /* 864: site entries used (live) */
    uint32_t end_kind;        /* 868: enum ls_end_kind (live) */
    uint64_t str_used;        /* 872: bytes of the string pool used (live) */
    int32_t end_status;       /* 880: exit status when end_kind is EXITED or UNDERSCORE_EXIT */
    int32_t end_signal;       /* 884: signal number when end_kind is SIGNALED */
    uint64_t end_ns;          /* 888: CLOCK_REALTIME ns of the end (live) */
    uint64_t last_enter_ns;   /* 896: last time a thread without a slot (or the plugin) entered
                               *      a recorded call (live); see ls_last_enter_ns() */
    uint64_t last_exit_ns;    /* 904: the same for leaving one; see ls_last_exit_ns() */
    uint64_t calls_in_flight; /* 912: calls entered and not yet left by threads without a
                               *      thread slot (live); see ls_calls_in_flight() */
    struct ls_live_stack live_stack; /* 920: the last stack captured on request */
    int32_t live_signal;   /* 1200: signal that asks for a live stack, 0 if none is handled */
    uint32_t heartbeat_ms; /* 1204: period of heartbeat_ns in ms; 0: 1000 (older writers) */
    uint32_t completion;   /* 1208: enum ls_completion_state (live) */
    uint32_t stream_count; /* 1212: stream slots used (live) */
    uint64_t completions;  /* 1216: completions observed so far (live; progress for watchers) */
    struct ls_stream streams[LS_MAX_STREAMS]; /* 1224 */
    uint32_t clock_source;                    /* 2760: enum ls_clock_source (live) */
    uint32_t boot_id;                         /* 2764: hash of the kernel's boot id, 0 unknown */
    uint64_t pysite_off;        /* 2768: python site table; 0 (and cap 0) in traces without one */
    uint32_t pysite_cap;        /* 2776: entries */
    uint32_t pysite_entry_size; /* 2780: sizeof(struct ls_pysite) + py_depth * sizeof(ls_pyframe) */
    uint32_t py_depth;          /* 2784: Python frames kept per Python stack (0: off) */
    uint32_t pysite_count;      /* 2788: python site entries used (live) */
    uint32_t python;            /* 2792: enum ls_python_state (live) */
    uint32_t python_version;    /* 2796: major << 8 | minor of the interpreter, 0 unknown (live) */
    char live_python[LS_LIVE_PY_LEN]; /* 2800: with the live stack (same seq): the interrupted
                                       * thread's Python frames, "file.py:LINE (func) <- ...",
                                       * innermost first, NUL-terminated; "" none */
    uint64_t proc_start_ticks;        /* 3056: the process's start, clock ticks after boot
                                       *       (/proc/PID/stat field 22); with pid and boot_id
                                       *       it names the process; 0 unknown */
    uint32_t nccl_static_object;      /* 3064: string: path of the object NCCL is linked into
                                       *       statically (LS_HFLAG_NCCL_STATIC), 0 none */
    uint32_t ticket_block;            /* 3068: tickets a thread with a slot reserves at once
                                       *       (ls_thread_slot.block_start); 0 means 1 */
    struct ls_thread_slot threads[LS_THREAD_SLOTS]; /* 3072: threads in a call (live) */
};

/* Communicator entry flags (ls_comm.flags). */
#define LS_COMM_NONBLOCKING  (1u << 0) /* created with config.blocking == 0 */
#define LS_COMM_RANK_PENDING (1u << 1) /* rank/nranks not known yet (split still in progress) */
#define LS_COMM_FINALIZED    (1u << 2)
#define LS_COMM_DESTROYED    (1u << 3)
#define LS_COMM_ABORTED      (1u << 4)
#define LS_COMM_REVOKED      (1u << 5)
/* The creating call failed (init_result says how): rank and nranks are the arguments as the
 * caller gave them, which NCCL may have refused (rank 4 of 4). */
#define LS_COMM_INIT_FAILED (1u << 6)
/* ncclCommGetAsyncError reported an error on it: its first report is an AsyncError record. */
#define LS_COMM_ASYNC_ERROR (1u << 7)
/* init_result follows a nonblocking creation's end: it stays ncclInProgress (7), which the
 * creating call returned, until ncclCommGetAsyncError first reports the communicator ready,
 * and becomes ncclSuccess then. Without this flag (older shims) ncclInProgress says nothing of
 * whether the creation completed since. */
#define LS_COMM_READY_TRACKED (1u << 8)

/* Where a communicator's oldest unfinished collective is on the GPU, as lockstep's NCCL profiler
 * plugin (libnccl-profiler-lockstep.so) saw it in NCCL's kernel-channel and proxy events. A
 * sequence lock: `lock` is odd while the plugin rewrites the entry. `seq` 0: nothing in flight
 * (or no plugin). Channels beyond 63 are not shown in the masks. */
#define LS_GPU_PROXY_SEND (1u << 0) /* proxy_*: a send (else a receive) */
#define LS_GPU_PROXY      (1u << 1) /* proxy_* are valid: a network transfer is unfinished */
#define LS_GPU_SHIM_SEQ   (1u << 2) /* seq counts the plugin's collectives beside the shim's */
struct ls_gpu_progress {
    uint64_t seq;           /*  0: the collective (comm seq) still in flight on the GPU (live) */
    uint64_t ch_started;    /*  8: bit c: channel c's kernel started on it (live) */
    uint64_t ch_stopped;    /* 16: bit c: channel c's kernel ended (live) */
    uint64_t moved_ns;      /* 24: CLOCK_REALTIME ns of its last kernel or proxy event (live) */
    int32_t proxy_peer;     /* 32: peer rank in the comm the unfinished transfer waits on */
    int32_t proxy_step;     /* 36: its step (network transfers, from 0) */
    uint8_t proxy_channel;  /* 40: its channel */
    uint8_t proxy_state;    /* 41: NCCL's proxy step state (10: waits to receive, 9: sending,
                             *     8: waits for the GPU to fill, 20: waits for the peer) */
    uint8_t flags;          /* 42: LS_GPU_* */
    uint8_t plugin_version; /* 43: profiler API version NCCL used (1..6) */
    uint32_t lock;          /* 44: sequence lock (live) */
};                          /* 48 bytes */

/* One communicator this process is a member of. `comm_id` is computed alike on every member
 * without communication: the hash of the ncclUniqueId (InitRank family) or of the parent's id,
 * the parent's split counter and the color (Split, Shrink). An entry is valid once comm_id != 0;
 * the writer fills every other field first and stores comm_id last (release). */
struct ls_comm {
    uint64_t comm_id;     /*   0: 0 = slot unused */
    uint64_t parent_id;   /*   8: 0 = none */
    uint64_t handle;      /*  16: the ncclComm_t value in this process */
    int32_t nranks;       /*  24: -1 unknown */
    int32_t rank;         /*  28: this process's rank in the communicator, -1 unknown */
    int32_t color;        /*  32: split color (Split), excluded count (Shrink), else -1 */
    int32_t key;          /*  36: split key, else -1 */
    uint32_t create_op;   /*  40: enum ls_op that created it */
    uint32_t flags;       /*  44: LS_COMM_* (live) */
    int32_t init_result;  /*  48: ncclResult_t of the creating call (live) */
    uint32_t split_count; /*  52: children split/shrunk from this communicator so far (live) */
    uint64_t created_ns;  /*  56 */
    uint64_t ended_ns;    /*  64: when finalized/destroyed/aborted, 0 otherwise (live) */
    uint64_t coll_issued; /*  72: collectives entered; the latest has seq == coll_issued (live) */
    uint64_t coll_done;   /*  80: collectives returned (live) */
    uint64_t p2p_sends;   /*  88: sends entered (live) */
    uint64_t p2p_recvs;   /*  96: receives entered (live) */
    uint64_t reserved0;   /* 104: 0 (was the last entry on it: nothing read it) */
    uint32_t create_site; /* 112: call site of the creating call, 0 none */
    int32_t cuda_dev;     /* 116: device, -1 unknown */
    char name[LS_COMM_NAME_LEN]; /* 120: config.commName, truncated, "" if none */
    uint64_t coll_completed;     /* 152: highest collective seq known complete on the GPU (live;
                                  *      meaningful when the header's completion is EVENTS) */
    uint64_t completed_ns;       /* 160: when that completion was observed (live) */
    uint64_t last_stream;        /* 168: stream of the newest operation (live) */
    struct ls_gpu_progress gpu;  /* 176: where its oldest unfinished collective is on the GPU,
                                  *      from NCCL's profiler plugin; all zero without one */
};                               /* 224 bytes */

/* Point-to-point counters of one (communicator, peer) pair; valid once comm_id != 0. */
struct ls_peer {
    uint64_t comm_id;  /*  0 */
    int32_t peer;      /*  8: peer rank in the communicator */
    uint32_t comm_idx; /* 12: index of the communicator in the comm table */
    uint64_t sends;    /* 16: sends to `peer` entered; the latest has seq == sends (live) */
    uint64_t recvs;    /* 24: receives from `peer` entered (live) */
};                     /* 32 bytes */

/* One frame of a call site. String offsets index the string pool; 0 means "unknown". */
struct ls_frame {
    uint64_t pc;         /*  0: return address as captured */
    uint64_t module_off; /*  8: pc minus the load base of its module */
    uint32_t module;     /* 16: string: path of the module (executable or shared object) */
    uint32_t symbol;     /* 20: string: nearest symbol name, 0 if none */
    uint64_t symbol_off; /* 24: pc minus the symbol's address */
};                       /* 32 bytes */

/* A unique call stack. Call site id N (N >= 1) is entry N-1. Valid once `state` is 1. Frames
 * follow the entry: `stack_depth` slots, the first `nframes` used, innermost first, starting
 * at the caller of the NCCL function. */
struct ls_site {
    uint32_t state;   /*  0: 0 empty, 1 valid (release) */
    uint32_t nframes; /*  4 */
    uint64_t hash;    /*  8: hash of the pcs and the python site */
    uint64_t count;   /* 16: calls seen from this site (live; added per thread every 64 calls) */
    uint32_t pysite;  /* 24: Python stack of the calling thread (python site id, 1-based), 0 none */
    uint32_t reserved; /* 28 */
};                     /* 32 bytes, then the frames */

/* One Python frame: where the interpreter was in a function. Strings index the pool. */
struct ls_pyframe {
    uint32_t file;     /*  0: string: co_filename as the interpreter has it */
    uint32_t func;     /*  4: string: the function's qualified name (co_qualname, or co_name) */
    int32_t line;      /*  8: line number, 0 unknown */
    uint32_t reserved; /* 12 */
};                     /* 16 bytes */

/* A unique Python stack. Python site id N (N >= 1) is entry N-1, valid once `state` is 1.
 * `py_depth` frame slots follow, the first `nframes` used, innermost first. */
struct ls_pysite {
    uint32_t state;   /* 0: 0 empty, 1 valid (release) */
    uint32_t nframes; /* 4 */
    uint64_t hash;    /* 8: hash of the frames as the shim saw them (code object, offset) */
};                    /* 16 bytes, then the frames */

/* Python call stacks (ls_header.python). */
enum ls_python_state {
    LS_PYTHON_NONE = 0,     /* no CPython interpreter seen (or Python frames off) */
    LS_PYTHON_ACTIVE = 1,   /* frames of python_version are read and recorded */
    LS_PYTHON_DISABLED = 2, /* an interpreter is there, but its frames cannot be read safely
                             * (version without a layout, or the layout check failed) */
};

/* Operations (ls_record.op, ls_comm.create_op), one line each: the number (part of the format:
 * never renumber, append before LS_OP_COUNT), the name, and the classes the predicates below
 * read (LS_OPC_*). A new op's classes are declared on its own line, so no range check can leave
 * it out.
 *   X(ID, number, name, classes)
 *
 * Which NCCL introduced a call: an op whose wrapper stands under `#if NCCL_VERSION_CODE >=
 * NCCL_VERSION(2, X, 0)` in shim/wrap_*.c (its types are newer than the oldest headers lockstep
 * builds against) says that version in the comment above its line ("(2.29+)"). Every other op
 * is declared by NCCL 2.28's nccl.h (checked against 2.28.9) and its wrapper needs no #if: Send
 * and Recv came with NCCL 2.7, CommInitRankConfig and CommFinalize with 2.14, CommSplit with
 * 2.18, CommInitRankScalable with 2.23, CommShrink with 2.27; AlltoAll, Gather, Scatter,
 * GroupSimulateEnd and CommRevoke are recent too (look them up before counting on an older
 * NCCL); the first collectives, groups, CommInitRank, InitAll, Destroy and Abort are old.
 * NCCL's nccl.h names no versions: take a new call's from NCCL's release notes, or from the
 * first release whose nccl.h declares it.
 *
 * What a wrapper records of a call: LS_CALL_ARGS(op, comm, count, dtype, redop, peer, send, recv,
 * stream) (shim/shim.h), nine positional slots that become the record's fields:
 *   op      LS_OP_ID of the line below
 *   comm    the ncclComm_t (ls_record.comm_id and comm_rank come from the shim's table of it)
 *   count   ls_record.count: elements as NCCL takes them (see ls_record), or the op's own
 *           number (bytes, descriptors, flags: the comment on its line says which); 0 none
 *   dtype   ncclDataType_t, -1 none (stored as LS_DTYPE_NONE)
 *   redop   ncclRedOp_t for LS_OPC_REDOP ops, else -1
 *   peer    the root of an LS_OPC_ROOTED op, the peer of Send/Recv and the one-sided ops, else -1
 *   send    the send buffer (or the op's one pointer: a window, a registered buffer), NULL none
 *   recv    the receive buffer, NULL none
 *   stream  the cudaStream_t the op is enqueued on, NULL for host-only calls
 * The analyzer compares the members' calls under one seq by op, count and dtype, and by redop
 * and peer where the op's classes say they matter (model_calls_agree()), so a slot an op does
 * not have is -1 or 0, never a guess. */
enum ls_op_class {
    /* A collective: numbered per communicator (seq from 1) by the shim, its GPU completion
     * tracked (shim/completion.c); the model lines the members' calls up by seq, so the
     * missing-rank, mismatch, straggler and abort passes, the wait-for graph's edges to the
     * members not in #seq yet, and the HTML timeline see it. */
    LS_OPC_COLL = 1 << 0,
    /* Send/Recv: numbered per (communicator, peer); the model matches each half with the peer's
     * (p2p pass: unmatched sends and receives, the graph's edge to the peer). */
    LS_OPC_P2P = 1 << 1,
    /* A collective whose `peer` holds a root: members that name different roots differ (mismatch
     * pass), and the reports print the root. */
    LS_OPC_ROOTED = 1 << 2,
    /* A reduction: `redop` matters, members that pass different ones differ (mismatch pass). */
    LS_OPC_REDOP = 1 << 3,
    /* Communicator lifecycle (and window registration): no sequence number; a rank in one (but
     * CommFinalize) is blocked in it (model_blocked_ops()), and the wait-for graph follows the
     * creations and splits among them (LS_OPC_INIT, CommSplit) to the ranks not there yet. */
    LS_OPC_COMM = 1 << 4,
    /* One-sided puts, signals and waits for signals (2.29+): no sequence number; work on their
     * stream like a collective (GPU completion tracked). A WaitSignal its stream has not
     * completed is a call its rank is blocked in (model_blocked_ops()), and the wait-for graph
     * follows it to the peer whose signals it waits for (ls_record.aux: ls_signal_*()). */
    LS_OPC_ONESIDED = 1 << 5,
    /* Creates a communicator from a unique id: the wait-for graph waits through it for the
     * members that have not joined, and a refused init is a configuration error (process pass);
     * members that disagree on the size, or never joined, are comm_init_mismatch. */
    LS_OPC_INIT = 1 << 6,
    /* Makes a child of its communicator (ls_record.comm_id) at the parent's split counter: the
     * members of the parent are to make their child creations in the same order (a split, a
     * shrink, a grow), and the wait-for graph waits through it for the members not there yet
     * (but those a shrink excluded). */
    LS_OPC_CHILD = 1 << 7,
};
#define LS_OPS(X)                                                                                  \
    X(NONE, 0, "None", 0)                                                                          \
    X(ALLREDUCE, 1, "AllReduce", LS_OPC_COLL | LS_OPC_REDOP)                                       \
    X(BROADCAST, 2, "Broadcast", LS_OPC_COLL | LS_OPC_ROOTED)                                      \
    /* ncclBcast: in-place broadcast; matches LS_OP_BROADCAST across ranks */                      \
    X(BCAST, 3, "Bcast", LS_OPC_COLL | LS_OPC_ROOTED)                                              \
    X(REDUCE, 4, "Reduce", LS_OPC_COLL | LS_OPC_ROOTED | LS_OPC_REDOP)                             \
    X(ALLGATHER, 5, "AllGather", LS_OPC_COLL)                                                      \
    X(REDUCESCATTER, 6, "ReduceScatter", LS_OPC_COLL | LS_OPC_REDOP)                               \
    X(ALLTOALL, 7, "AlltoAll", LS_OPC_COLL)                                                        \
    X(GATHER, 8, "Gather", LS_OPC_COLL | LS_OPC_ROOTED)                                            \
    X(SCATTER, 9, "Scatter", LS_OPC_COLL | LS_OPC_ROOTED)                                          \
    X(SEND, 10, "Send", LS_OPC_P2P)                                                                \
    X(RECV, 11, "Recv", LS_OPC_P2P)                                                                \
    X(GROUP_START, 12, "GroupStart", 0)                                                            \
    X(GROUP_END, 13, "GroupEnd", 0)                                                                \
    X(GROUP_SIMULATE_END, 14, "GroupSimulateEnd", 0)                                               \
    X(COMM_INIT_RANK, 15, "CommInitRank", LS_OPC_COMM | LS_OPC_INIT)                               \
    X(COMM_INIT_RANK_CONFIG, 16, "CommInitRankConfig", LS_OPC_COMM | LS_OPC_INIT)                  \
    X(COMM_INIT_ALL, 17, "CommInitAll", LS_OPC_COMM | LS_OPC_INIT)                                 \
    X(COMM_INIT_RANK_SCALABLE, 18, "CommInitRankScalable", LS_OPC_COMM | LS_OPC_INIT)              \
    X(COMM_SPLIT, 19, "CommSplit", LS_OPC_COMM | LS_OPC_CHILD)                                     \
    X(COMM_SHRINK, 20, "CommShrink", LS_OPC_COMM | LS_OPC_CHILD)                                   \
    X(COMM_FINALIZE, 21, "CommFinalize", LS_OPC_COMM)                                              \
    X(COMM_DESTROY, 22, "CommDestroy", LS_OPC_COMM)                                                \
    X(COMM_ABORT, 23, "CommAbort", LS_OPC_COMM)                                                    \
    X(COMM_REVOKE, 24, "CommRevoke", LS_OPC_COMM)                                                  \
    /* ncclCommWindowRegister (2.27+): count = bytes */                                            \
    X(WINDOW_REGISTER, 25, "CommWindowRegister", LS_OPC_COMM)                                      \
    X(WINDOW_DEREGISTER, 26, "CommWindowDeregister", LS_OPC_COMM)                                  \
    /* ncclPutSignal (2.29+): one-sided put to `peer`; aux: its signal (ls_signal_aux()) */        \
    X(PUT_SIGNAL, 27, "PutSignal", LS_OPC_ONESIDED)                                                \
    /* ncclSignal (2.29+): a signal to `peer`; aux: the signal (ls_signal_aux()) */                \
    X(SIGNAL, 28, "Signal", LS_OPC_ONESIDED)                                                       \
    /* ncclWaitSignal (2.29+): count = descriptors; peer and aux: the one descriptor's peer and    \
     * signals (ls_signal_aux()), with several: peer -1 and aux's count their sum */               \
    X(WAIT_SIGNAL, 29, "WaitSignal", LS_OPC_ONESIDED)                                              \
    /* ncclCommGrow (2.29+): count = new size */                                                   \
    X(COMM_GROW, 30, "CommGrow", LS_OPC_COMM | LS_OPC_CHILD)                                       \
    /* ncclCommSuspend (2.30+): count = flags; ncclCommResume (2.30+) */                           \
    X(COMM_SUSPEND, 31, "CommSuspend", LS_OPC_COMM)                                                \
    X(COMM_RESUME, 32, "CommResume", LS_OPC_COMM)                                                  \
    /* ncclCommGetAsyncError that reported an error (a remote peer, the network, the system):      \
     * result = the asynchronous error; recorded once per communicator, where it was polled */     \
    X(ASYNC_ERROR, 33, "AsyncError", 0)

enum ls_op {
#define LS_OP_ENUM(id, num, name, classes) LS_OP_##id = (num),
    LS_OPS(LS_OP_ENUM)
#undef LS_OP_ENUM
        LS_OP_COUNT = 34
};
/* Every number below LS_OP_COUNT is listed once, in order (the tables below index by it). */
#define LS_OP_ONE(id, num, name, classes) +1
_Static_assert(0 LS_OPS(LS_OP_ONE) == LS_OP_COUNT, "LS_OPS must list every op once");
#undef LS_OP_ONE

/* Record flags (ls_record.flags). */
#define LS_REC_IN_GROUP    (1u << 0) /* issued between ncclGroupStart and ncclGroupEnd */
#define LS_REC_NONBLOCKING (1u << 1) /* on a nonblocking communicator */
#define LS_REC_INPLACE     (1u << 2) /* no longer written: in place is sendbuff == recvbuff */
#define LS_REC_GRAPH_CAPTURED                                                                      \
    (1u << 3) /* issued into a stream being captured into a graph:                                 \
               * it runs when the graph is launched, not tracked */
#define LS_REC_NOT_ENQUEUED                                                                        \
    (1u << 4) /* NCCL refused the call's arguments (ncclInvalidArgument, ncclInvalidUsage):        \
               * nothing was enqueued, and the call gave back the sequence number it took          \
               * (seq is 0) */

#define LS_REC_VOID                                                                                \
    (1u << 5) /* no call: a ticket a thread reserved and gave back unused (its thread ended);      \
               * op is NONE, readers skip it */

#define LS_REC_GRAPH_REPLAY                                                                        \
    (1u << 7) /* a call a launch of a CUDA graph replayed (cuGraphLaunch): recorded at the launch, \
               * on its stream, numbered like any call; aux: ls_replay_aux() */

#define LS_REC_GRAPH_TRACKED                                                                       \
    (1u << 12) /* a captured call (LS_REC_GRAPH_CAPTURED) whose graph the shim knows: each launch  \
                * of it is recorded as the calls it replays (LS_REC_GRAPH_REPLAY) */

#define LS_REC_COLL_CONFIG                                                                         \
    (1u << 6) /* a collective issued through its nccl*Config twin (NCCL 2.31+) with a config:      \
               * aux holds the config's userProfilerTag, LS_REC_CTA_* its CTAPolicy */
/* The CTAPolicy of a nccl*Config call's config (bits 8-11 of flags): 0 unset (the
 * communicator's), else NCCL_CTA_POLICY_* + 1 (LS_REC_CTA_ZERO: NCCL_CTA_POLICY_ZERO, the
 * copy engines move the data and no NCCL kernel runs). */
#define LS_REC_CTA_SHIFT 8
#define LS_REC_CTA_MASK  (0xfu << LS_REC_CTA_SHIFT)
#define LS_REC_CTA_ZERO  (3u << LS_REC_CTA_SHIFT)

/* ls_record.result while the call has not returned. */
#define LS_RESULT_PENDING (-1)

/* ls_record.ticket: 0 = never written; LS_TICKET_BUSY set = being written (a writer that dies
 * here leaves it set: a half-written record); otherwise ticket + 1 of the call it holds. */
#define LS_TICKET_BUSY (1ull << 63)

/* One NCCL call. Written at entry (everything but exit_ns and result), published by a release
 * store of `ticket`; at return exit_ns is stored, then `result` (release). */
struct ls_record {
    uint64_t ticket;      /*   0 */
    uint64_t comm_id;     /*   8: 0 for calls without a communicator (GroupStart/End) */
    uint64_t seq;         /*  16: collectives: per-communicator number, from 1; Send: per (comm,
                           *      peer) send number; Recv: per (comm, peer) receive number;
                           *      0 for other calls */
    uint64_t count;       /*  24: elements as passed (AllGather: send count; ReduceScatter: recv
                           *      count; AlltoAll: per peer); Split: the new comm id; InitAll:
                           *      ndev; Shrink: excluded count */
    uint64_t sendbuff;    /*  32 */
    uint64_t recvbuff;    /*  40 */
    uint64_t stream;      /*  48 */
    uint64_t enter_ns;    /*  56: CLOCK_REALTIME */
    uint64_t exit_ns;     /*  64: CLOCK_REALTIME, 0 while in the call */
    uint64_t group_id;    /*  72: per-process id of the outermost group, 0 outside groups */
    uint64_t aux;         /*  80: op specific: Split: color << 32 | key (as uint32); Init*: the
                           *      communicator id created; GroupEnd: calls in the group;
                           *      a collective with LS_REC_COLL_CONFIG: its userProfilerTag;
                           *      one-sided ops: their signals (ls_signal_aux()) */
    uint64_t complete_ns; /*  88: when its completion on the GPU was observed, 0 not (yet) */
    uint32_t callsite;    /*  96: call site id (1-based), 0 none */
    uint32_t tid;         /* 100: kernel thread id */
    int32_t comm_rank;    /* 104: the caller's rank in the communicator, -1 unknown */
    int32_t peer;         /* 108: root (rooted collectives), peer (Send/Recv), else -1 */
    int32_t redop;        /* 112: ncclRedOp_t, -1 if none */
    uint16_t op;          /* 116: enum ls_op */
    uint8_t dtype;        /* 118: ncclDataType_t, 255 if none */
    uint8_t group_depth;  /* 119: ncclGroupStart nesting at the call (saturates at 255) */
    int32_t result;       /* 120: ncclResult_t, LS_RESULT_PENDING while in the call */
    uint32_t flags;       /* 124: LS_REC_* */
};                        /* 128 bytes */

#define LS_DTYPE_NONE 255

/* Layout checks: the format is the contract, the compiler keeps us honest. */
_Static_assert(sizeof(struct ls_header) == LS_HEADER_SIZE, "header size");
_Static_assert(offsetof(struct ls_header, nccl_version) == 832, "header layout");
_Static_assert(offsetof(struct ls_header, end_why) == 768, "header layout");
_Static_assert(sizeof(struct ls_end_why) == 64, "end why size");
_Static_assert(offsetof(struct ls_header, heartbeat_ns) == 840, "header layout");
_Static_assert(offsetof(struct ls_header, calls_in_flight) == 912, "header layout");
_Static_assert(offsetof(struct ls_header, live_stack) == 920, "header layout");
_Static_assert(offsetof(struct ls_header, live_signal) == 1200, "header layout");
_Static_assert(sizeof(struct ls_live_stack) == 280, "live stack size");
_Static_assert(offsetof(struct ls_header, streams) == 1224, "header layout");
_Static_assert(sizeof(struct ls_stream) == 48, "stream entry size");
_Static_assert(offsetof(struct ls_header, clock_source) == 2760, "header layout");
_Static_assert(offsetof(struct ls_header, threads) == 3072, "header layout");
_Static_assert(offsetof(struct ls_header, live_python) == 2800, "header layout");
_Static_assert(offsetof(struct ls_header, attempt) == 836, "header layout");
_Static_assert(offsetof(struct ls_header, heartbeat_ms) == 1204, "header layout");
_Static_assert(offsetof(struct ls_header, boot_id) == 2764, "header layout");
_Static_assert(offsetof(struct ls_header, proc_start_ticks) == 3056, "header layout");
_Static_assert(offsetof(struct ls_header, nccl_static_object) == 3064, "header layout");
_Static_assert(sizeof(struct ls_thread_slot) == 64, "thread slot size");
_Static_assert(offsetof(struct ls_thread_slot, block_start) == 24, "thread slot layout");
_Static_assert(offsetof(struct ls_header, ticket_block) == 3068, "header layout");
_Static_assert(offsetof(struct ls_comm, coll_completed) == 152, "comm layout");
_Static_assert(sizeof(struct ls_comm) == 224, "comm entry size");
_Static_assert(offsetof(struct ls_comm, gpu) == 176, "comm layout");
_Static_assert(sizeof(struct ls_gpu_progress) == 48, "gpu progress size");
_Static_assert(sizeof(struct ls_peer) == 32, "peer entry size");
_Static_assert(sizeof(struct ls_frame) == 32, "frame size");
_Static_assert(sizeof(struct ls_site) == 32, "site entry size");
_Static_assert(sizeof(struct ls_pyframe) == 16, "python frame size");
_Static_assert(sizeof(struct ls_pysite) == 16, "python site entry size");
_Static_assert(sizeof(struct ls_record) == 128, "record size");
_Static_assert(offsetof(struct ls_record, result) == 120, "record layout");

/* Layout of a file with the given capacities. Used by the writer to size the file and by the
 * reader to check that the header's offsets are the ones this version writes. */
struct ls_layout {
    uint64_t comm_off, peer_off, site_off, pysite_off, str_off, ring_off, file_size;
    uint32_t site_entry_size, pysite_entry_size;
};

/* Computes the section offsets for the given capacities. Sections start on 64-byte
 * boundaries and the ring on a 4096-byte boundary. This function can't fail; capacities are
 * the caller's to bound. A trace without a python site table (pysite_cap 0) has
 * pysite_off 0. */
static inline struct ls_layout ls_layout_for(uint32_t comm_cap, uint32_t peer_cap,
                                             uint32_t site_cap, uint32_t stack_depth,
                                             uint32_t pysite_cap, uint32_t py_depth,
                                             uint64_t str_cap, uint64_t ring_cap)
{
    struct ls_layout l;
    uint64_t at = LS_HEADER_SIZE;
    l.comm_off = at;
    at += (uint64_t)comm_cap * sizeof(struct ls_comm);
    l.peer_off = at;
    at += (uint64_t)peer_cap * sizeof(struct ls_peer);
    l.site_entry_size = (uint32_t)(sizeof(struct ls_site) + stack_depth * sizeof(struct ls_frame));
    l.site_off = at;
    at += (uint64_t)site_cap * l.site_entry_size;
    l.pysite_entry_size =
        pysite_cap ? (uint32_t)(sizeof(struct ls_pysite) + py_depth * sizeof(struct ls_pyframe))
                   : 0;
    l.pysite_off = pysite_cap ? at : 0;
    at += (uint64_t)pysite_cap * l.pysite_entry_size;
    l.str_off = at;
    at += str_cap;
    at = (at + 4095u) & ~(uint64_t)4095u;
    l.ring_off = at;
    at += ring_cap * sizeof(struct ls_record);
    l.file_size = at;
    return l;
}

/* NCCL's name of an op without "nccl" ("AllReduce"); "?" for values outside the list. */
static inline const char *ls_op_name(unsigned op)
{
    static const char *const names[LS_OP_COUNT] = {
#define LS_OP_NAME(id, num, name, classes) [num] = name,
        LS_OPS(LS_OP_NAME)
#undef LS_OP_NAME
    };
    return op < LS_OP_COUNT ? names[op] : "?";
}

/* The LS_OPC_* classes of an op; 0 for values outside the list. */
static inline unsigned ls_op_classes(unsigned op)
{
    static const unsigned char classes[LS_OP_COUNT] = {
#define LS_OP_CLASSES(id, num, name, classes_) [num] = (classes_),
        LS_OPS(LS_OP_CLASSES)
#undef LS_OP_CLASSES
    };
    return op < LS_OP_COUNT ? classes[op] : 0;
}

/* True for the collective ops that advance a communicator's sequence number. */
static inline int ls_op_is_collective(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_COLL) != 0;
}

/* True for Send and Recv. */
static inline int ls_op_is_p2p(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_P2P) != 0;
}

/* True for the ops that put work on the GPU in stream order: collectives, Send/Recv and the
 * one-sided ops. */
static inline int ls_op_issues_work(unsigned op)
{
    return (ls_op_classes(op) & (LS_OPC_COLL | LS_OPC_P2P | LS_OPC_ONESIDED)) != 0;
}

/* True for the ops the shim numbers (ls_record.seq): collectives and Send/Recv. */
static inline int ls_op_numbered(unsigned op)
{
    return (ls_op_classes(op) & (LS_OPC_COLL | LS_OPC_P2P)) != 0;
}

/* True for collectives where `peer` holds a root. */
static inline int ls_op_is_rooted(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_ROOTED) != 0;
}

/* True for reductions, where `redop` matters. */
static inline int ls_op_has_redop(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_REDOP) != 0;
}

/* True for communicator lifecycle ops (and window registration, collective over a
 * communicator too). */
static inline int ls_op_is_comm(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_COMM) != 0;
}

/* True for the ops that create a communicator from a unique id (CommInitRank and kin). */
static inline int ls_op_is_init(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_INIT) != 0;
}

/* True for the ops that make a child of their communicator (Split, Shrink, Grow). */
static inline int ls_op_makes_child(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_CHILD) != 0;
}

/* True for one-sided communication (2.29+): puts and signals to a peer, waits for signals.
 * They take no sequence number. */
static inline int ls_op_is_onesided(unsigned op)
{
    return (ls_op_classes(op) & LS_OPC_ONESIDED) != 0;
}

/* ls_record.aux of a one-sided op: how many signals (1 for a put or a signal; a wait's opCnt),
 * on which signal index and context (each kept to 16 bits). */
static inline uint64_t ls_signal_aux(uint32_t count, int sig_idx, int ctx)
{
    return (uint64_t)count << 32 | (uint64_t)(uint16_t)sig_idx << 16 | (uint16_t)ctx;
}
static inline uint32_t ls_signal_count(uint64_t aux)
{
    return (uint32_t)(aux >> 32);
}
static inline int ls_signal_index(uint64_t aux)
{
    return (uint16_t)(aux >> 16);
}
static inline int ls_signal_ctx(uint64_t aux)
{
    return (uint16_t)aux;
}

/* ls_record.aux of a call a CUDA-graph launch replayed (LS_REC_GRAPH_REPLAY; one-sided ops
 * keep their signals' aux instead): which launch of its executable graph (from 1, kept to 32
 * bits) and the call site of its capture (0 none): a server captures at start-up, and the ring
 * holds only its latest replays. */
static inline uint64_t ls_replay_aux(uint64_t launch, uint32_t capture_site)
{
    return (launch & 0xffffffffull) << 32 | capture_site;
}
static inline uint32_t ls_replay_launch(uint64_t aux)
{
    return (uint32_t)(aux >> 32);
}
static inline uint32_t ls_replay_capture_site(uint64_t aux)
{
    return (uint32_t)aux;
}

/* NCCL's result codes (ncclResult_t) that lockstep tells apart, by name: their values are
 * NCCL's ABI and part of the format (ls_record.result). */
enum ls_nccl_result {
    LS_NCCL_SUCCESS = 0,
    LS_NCCL_UNHANDLED_CUDA_ERROR = 1,
    LS_NCCL_SYSTEM_ERROR = 2,
    LS_NCCL_INTERNAL_ERROR = 3,
    LS_NCCL_INVALID_ARGUMENT = 4,
    LS_NCCL_INVALID_USAGE = 5,
    LS_NCCL_REMOTE_ERROR = 6,
    LS_NCCL_IN_PROGRESS = 7,
};

/* True when NCCL refused the call's arguments: nothing was enqueued. */
static inline int ls_result_refused(int result)
{
    return result == LS_NCCL_INVALID_ARGUMENT || result == LS_NCCL_INVALID_USAGE;
}

/* True while communicator entry `e` waits for its nonblocking creation to complete: its
 * creating call returned ncclInProgress, ncclCommGetAsyncError has not reported it ready since
 * (LS_COMM_READY_TRACKED), no collective on it completed, and it was not ended. The member
 * waits on the others joining even while none of its threads is inside NCCL. */
static inline int ls_comm_creation_pending(const struct ls_comm *e)
{
    return (e->flags & LS_COMM_READY_TRACKED) && (e->flags & LS_COMM_NONBLOCKING) &&
           e->init_result == LS_NCCL_IN_PROGRESS && e->coll_done == 0 &&
           !(e->flags & (LS_COMM_FINALIZED | LS_COMM_DESTROYED | LS_COMM_ABORTED | LS_COMM_REVOKED |
                         LS_COMM_INIT_FAILED));
}

/* True while a record's call has not returned: no exit time and no result yet. */
static inline int ls_record_pending(const struct ls_record *r)
{
    return r->exit_ns == 0 && r->result == LS_RESULT_PENDING;
}

/* Short datatype names; "?" for unknown values. */
static inline const char *ls_dtype_name(unsigned dt)
{
    static const char *const names[] = {"int8", "uint8", "int32", "uint32", "int64",   "uint64",
                                        "fp16", "fp32",  "fp64",  "bf16",   "fp8e4m3", "fp8e5m2"};
    if (dt == LS_DTYPE_NONE)
        return "-";
    return dt < sizeof(names) / sizeof(names[0]) ? names[dt] : "?";
}

/* Reduction op names; values >= 5 are ops made by ncclRedOpCreatePreMulSum. */
static inline const char *ls_redop_name(int redop)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "avg"};
    if (redop < 0)
        return "-";
    return redop < 5 ? names[redop] : "premulsum";
}

/* ls_header.boot_id of the kernel boot id `text` (/proc/sys/kernel/random/boot_id as read):
 * FNV-1a over it up to the newline, never 0. Writer and reader hash alike with it. */
static inline uint32_t ls_boot_id_hash(const char *text)
{
    uint32_t h = 2166136261u;
    for (; *text && *text != '\n'; text++)
        h = (h ^ (unsigned char)*text) * 16777619u;
    return h ? h : 1;
}

/* Recorded calls the process is inside right now: the threads whose slot says so, plus the
 * calls of threads without a slot. A live reader passes a header it copied atomically enough
 * for a progress check (each field is written with one store). */
static inline uint64_t ls_calls_in_flight(const struct ls_header *h)
{
    uint64_t n = h->calls_in_flight;
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++)
        n += h->threads[i].in_call_since != 0;
    return n;
}

/* Tickets a thread with a slot reserves at once: ticket_block, 1 for writers before it. */
static inline uint64_t ls_ticket_block(const struct ls_header *h)
{
    return h->ticket_block ? h->ticket_block : 1;
}

/* True when ticket `tk` lies in the block a thread slot holds now: reserved by a running (or
 * killed) thread and perhaps not used yet, so an empty ring slot there is no lost record. */
static inline int ls_ticket_reserved(const struct ls_header *h, uint64_t tk)
{
    uint64_t n = ls_ticket_block(h);
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++) {
        uint64_t b = h->threads[i].block_start;
        if (b && tk + 1 >= b && tk + 1 < b + n)
            return 1;
    }
    return 0;
}

/* The last time any thread entered a recorded call: the newest of the header's field (threads
 * without a slot, the plugin, older writers) and every thread slot's. Every reader of "last
 * entered" goes through here. */
static inline uint64_t ls_last_enter_ns(const struct ls_header *h)
{
    uint64_t v = h->last_enter_ns;
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++)
        if (h->threads[i].last_enter_ns > v)
            v = h->threads[i].last_enter_ns;
    return v;
}

/* The last time any thread left a recorded call, as ls_last_enter_ns(). */
static inline uint64_t ls_last_exit_ns(const struct ls_header *h)
{
    uint64_t v = h->last_exit_ns;
    for (unsigned i = 0; i < LS_THREAD_SLOTS; i++)
        if (h->threads[i].last_exit_ns > v)
            v = h->threads[i].last_exit_ns;
    return v;
}

#endif
