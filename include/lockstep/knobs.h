/* knobs.h -- the shim's LOCKSTEP_* knobs, one table: the shim reads them (shim/config.c), and
 * `lockstep run` foresees from the same rows what the shim it preloads will make of them (the
 * size of its traces: analyzer/base/settings.c, setting_shim_knob()). Defaults and bounds are
 * written here only. */
#ifndef LOCKSTEP_KNOBS_H
#define LOCKSTEP_KNOBS_H

#include "lockstep/room.h"
#include "lockstep/trace_format.h"

/* What a knob takes. */
enum knob_type {
    KNOB_UINT,   /* a decimal integer from lo to hi */
    KNOB_BOOL,   /* 1/0, true/false, yes/no, on/off */
    KNOB_CHOICE, /* one of the words "a|b" in `words`; the value is its index */
    KNOB_SIGNAL, /* 0 (off) or a real-time signal; unset is off, a refused value is `def` */
    KNOB_STRING, /* any text up to hi bytes; "" when unset */
};

enum { LS_KNOB_CLOCK_TSC = 0, LS_KNOB_CLOCK_REALTIME = 1 }; /* LOCKSTEP_CLOCK's words */

/* Every LOCKSTEP_* variable the shim and the plugin read, one line each:
 * X(id, variable, type, default, lo, hi, words). Types (enum knob_type above): KNOB_UINT
 * (lo..hi), KNOB_BOOL, KNOB_CHOICE (words "a|b": the value is the index), KNOB_SIGNAL (0 off, or
 * a real-time signal; the default is SIGRTMAX - 3), KNOB_STRING (up to hi bytes; words say what
 * unset means). README.md's Knobs table is this table for people: keep the two in step. */
#define LS_KNOBS_SHIPPED(X)                                                                        \
    X(DISABLE, "LOCKSTEP_DISABLE", KNOB_BOOL, 0, 0, 1, NULL)                                       \
    X(DIR, "LOCKSTEP_DIR", KNOB_STRING, 0, 0, LS_DIR_MAX, "/dev/shm/lockstep-$UID")                \
    X(RING, "LOCKSTEP_RING", KNOB_UINT, LS_DEFAULT_RING, LS_MIN_RING, LS_MAX_RING, NULL)           \
    X(STACK_DEPTH, "LOCKSTEP_STACK_DEPTH", KNOB_UINT, LS_DEFAULT_STACK_DEPTH, 0,                   \
      LS_MAX_STACK_DEPTH, NULL)                                                                    \
    X(PYTHON_DEPTH, "LOCKSTEP_PYTHON_DEPTH", KNOB_UINT, LS_DEFAULT_PY_DEPTH, 0, LS_MAX_PY_DEPTH,   \
      NULL)                                                                                        \
    X(JOB, "LOCKSTEP_JOB", KNOB_STRING, 0, 0, 4095, "the launcher's job id")                       \
    X(RETAIN_HOURS, "LOCKSTEP_RETAIN_HOURS", KNOB_UINT, LS_DEFAULT_RETAIN_HOURS, 0,                \
      LS_MAX_RETAIN_HOURS, NULL)                                                                   \
    X(HEARTBEAT_MS, "LOCKSTEP_HEARTBEAT_MS", KNOB_UINT, LS_DEFAULT_HEARTBEAT_MS, 5, 1000, NULL)    \
    X(CLOCK, "LOCKSTEP_CLOCK", KNOB_CHOICE, LS_KNOB_CLOCK_TSC, 0, 0, "tsc|realtime")               \
    X(COMPLETION, "LOCKSTEP_COMPLETION", KNOB_BOOL, 1, 0, 1, NULL)                                 \
    X(STACK_SIGNAL, "LOCKSTEP_STACK_SIGNAL", KNOB_SIGNAL, -3, 0, 0, NULL)                          \
    X(BLIND_SECONDS, "LOCKSTEP_BLIND_SECONDS", KNOB_UINT, 5, 0, 86400, NULL)                       \
    X(PLUGIN_STEPS, "LOCKSTEP_PLUGIN_STEPS", KNOB_UINT, 1, 0, 1, NULL)                             \
    X(PROFILER_CHAIN, "LOCKSTEP_PROFILER_CHAIN", KNOB_STRING, 0, 0, 4095, "none")                  \
    X(STDERR_TAIL, "LOCKSTEP_STDERR_TAIL", KNOB_BOOL, 1, 0, 1, NULL)

#endif
