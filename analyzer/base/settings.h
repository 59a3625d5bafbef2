/* settings.h -- the analyzer's settings: every LOCKSTEP_* environment variable the lockstep
 * command reads, in one table, read through this module only (never getenv() elsewhere).
 *
 * One policy for a bad value: main() calls settings_check() before any command runs, and a
 * value a setting cannot take stops lockstep with exit status 2 (bad usage) and one line that
 * names the variable, the value and what it takes. The getters below then never meet a bad
 * value (a program that skips settings_check(), a unit test, gets the default).
 *
 * Adding a setting: one row of SETTINGS below (its default is written there only), its row in
 * docs/analyzer.md's table of settings (tests/cli `settings-documented` fails while it is
 * missing), and its reader calls setting_text(), setting_number() or setting_on().
 *
 * Not settings: the shim's own knobs (LOCKSTEP_RING, ...: lockstep/knobs.h, the shim's table),
 * which setting_shim_knob() reads from the same rows as the shim will (its own policy: the
 * default for a bad value), so that `lockstep run` foresees the size of its traces. */
#ifndef LOCKSTEP_SETTINGS_H
#define LOCKSTEP_SETTINGS_H

#include <stdint.h>
#include <stdio.h>

#include "lockstep/knobs.h"

/* What a setting takes. */
enum setting_type {
    SETTING_PATH,     /* a file or folder: any text (empty is unset) */
    SETTING_SWITCH,   /* 1/0, true/false, yes/no, on/off */
    SETTING_INTEGER,  /* a whole number from lo to hi */
    SETTING_RECORDS,  /* a whole number of records, or "all" (read as 0: all of them) */
    SETTING_SECONDS,  /* seconds from lo to hi */
    SETTING_POSITIVE, /* seconds above 0, up to hi */
};

/* X(ID, NAME, type, lo, hi, default, its words, what it sets). The default is the value every
 * reader gets when the variable is unset (setting_number(), setting_on()): it is written here
 * only. Its words are what help and docs say for it: NULL for a number (it is printed, "%g"),
 * else a description (a path's: "beside lockstep"). `lockstep --list-settings` prints the
 * table; docs/analyzer.md's table of settings is checked against that. */
/* clang-format off */
#define SETTINGS(X)                                                                                \
    X(SET_ANALYZE_RECORDS, "LOCKSTEP_ANALYZE_RECORDS", SETTING_RECORDS, 0, 0, 1024, NULL,          \
      "records read per trace, newest first (fewer past 8,192 traces; `all`: whole rings)")        \
    X(SET_ADDR2LINE, "LOCKSTEP_ADDR2LINE", SETTING_SWITCH, 0, 1, 1, NULL,                          \
      "`0` names call sites by symbol only, without debug info's file and line")                   \
    X(SET_SHIM, "LOCKSTEP_SHIM", SETTING_PATH, 0, 0, 0, "beside lockstep",                         \
      "the shim `lockstep run` preloads (else `../lib/lockstep/`, or `../shim/`)")                 \
    X(SET_PROFILER_PLUGIN, "LOCKSTEP_PROFILER_PLUGIN", SETTING_PATH, 0, 0, 0, "beside the shim",   \
      "the NCCL profiler plugin `lockstep run` names in `NCCL_PROFILER_PLUGIN`")                   \
    X(SET_PRELOAD, "LOCKSTEP_PRELOAD", SETTING_SWITCH, 0, 1, 1, NULL,                              \
      "`0`: `lockstep run` reaches NCCL through the profiler plugin only")                         \
    X(SET_RUNS_DIR, "LOCKSTEP_RUNS_DIR", SETTING_PATH, 0, 0, 0, "/dev/shm/lockstep-UID",           \
      "where `lockstep run` makes its run folders without `--dir`")                                \
    X(SET_RETAIN_HOURS, "LOCKSTEP_RETAIN_HOURS", SETTING_INTEGER, 0, LS_MAX_RETAIN_HOURS,          \
      LS_DEFAULT_RETAIN_HOURS, NULL,                                                               \
      "run folders of processes gone this long are removed (0 keeps them)")                        \
    X(SET_STOP_GRACE, "LOCKSTEP_STOP_GRACE", SETTING_SECONDS, 0, 3600, 5, NULL,                    \
      "the default of `--grace`: how long each step of a stop waits")                              \
    X(SET_GATHER_DIR, "LOCKSTEP_GATHER_DIR", SETTING_PATH, 0, 0, 0, "unset",                       \
      "a folder all nodes share: one diagnosis of a job on many nodes")                            \
    X(SET_GATHER_WAIT, "LOCKSTEP_GATHER_WAIT", SETTING_POSITIVE, 0, 1e6, 30, NULL,                 \
      "seconds rank 0's runner waits for the other nodes' snapshots")
/* clang-format on */

enum setting_id {
#define SETTING_ID(ID, NAME, TYPE, LO, HI, DEF, WORDS, DOC) ID,
    SETTINGS(SETTING_ID)
#undef SETTING_ID
        SET_COUNT
};

/* Checks every setting the environment gives. Returns 0, or -1 after one line on stderr naming
 * the first bad one's variable and value (the caller exits 2). */
int settings_check(void);

/* The default of the setting named `name` ("LOCKSTEP_STOP_GRACE") in words, as help and
 * `lockstep --list-settings` say it: its number ("%g"), or its row's words; NULL for a name
 * that is no setting. */
const char *setting_default_words(const char *name, char *buf, size_t len);

/* The value of a SETTING_PATH, NULL when unset or empty. */
const char *setting_text(enum setting_id id);

/* A number's value (SETTING_RECORDS: "all" is 0), its row's default when unset or empty (or
 * bad, in a program that skipped settings_check()). */
double setting_number(enum setting_id id);

/* True when the environment gives the setting a value it takes (not unset, empty or bad). */
int setting_given(enum setting_id id);

/* The row's default of a number or switch. */
double setting_default(enum setting_id id);

/* A switch: 1 on, 0 off; its row's default when unset, empty or bad. */
int setting_on(enum setting_id id);

/* The shim's knobs, by their rows in lockstep/knobs.h. */
enum shim_knob {
#define SHIM_KNOB_ID(id, ...) SHIM_KNOB_##id,
    LS_KNOBS_SHIPPED(SHIM_KNOB_ID)
#undef SHIM_KNOB_ID
        SHIM_KNOB_COUNT
};

/* A whole-number knob of the shim (KNOB_UINT) as the shim will read it: its row's default when
 * unset or outside its row's bounds (the shim says so itself); other kinds: the row's default.
 * This function can't fail. */
uint64_t setting_shim_knob(enum shim_knob id);

/* A whole number from environment variable `name` (not a LOCKSTEP_* setting: LOCAL_WORLD_SIZE),
 * `def` when unset, malformed or outside [lo, hi]. This function can't fail. */
uint64_t setting_env_uint(const char *name, uint64_t def, uint64_t lo, uint64_t hi);

/* Prints the table, a line per setting: "NAME<TAB>DEFAULT<TAB>MEANING" (`lockstep
 * --list-settings`, which the docs' table is checked against). */
void settings_list(FILE *f);

#endif
