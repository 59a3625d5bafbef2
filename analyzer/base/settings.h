/* settings.h -- the analyzer's settings: every LOCKSTEP_* environment variable the lockstep
 * command reads, in one table, read through this module only (never getenv() elsewhere).
 *
 * One policy for a bad value: main() calls settings_check() before any command runs, and a
 * value a setting cannot take stops lockstep with exit status 2 (bad usage) and one line that
 * names the variable, the value and what it takes. The getters below then never meet a bad
 * value (a program that skips settings_check(), a unit test, gets the default).
 *
 * Adding a setting: one line of SETTINGS below, its row in docs/analyzer.md's table of settings
 * (tests/cli `settings-documented` fails while it is missing), and its reader calls
 * setting_text(), setting_number() or setting_on().
 *
 * Not settings: the shim's own knobs (LOCKSTEP_RING, ...), which run_dir.c reads as the shim will
 * (its own policy: the default for a bad value) to foresee the size of its traces. */
#ifndef LOCKSTEP_SETTINGS_H
#define LOCKSTEP_SETTINGS_H

/* What a setting takes. */
enum setting_type {
    SETTING_PATH,     /* a file or folder: any text (empty is unset) */
    SETTING_SWITCH,   /* 1/0, true/false, yes/no, on/off */
    SETTING_INTEGER,  /* a whole number from lo to hi */
    SETTING_RECORDS,  /* a whole number of records, or "all" (read as 0: all of them) */
    SETTING_SECONDS,  /* seconds from lo to hi */
    SETTING_POSITIVE, /* seconds above 0, up to hi */
};

/* X(ID, NAME, type, lo, hi, default as the docs say it, what it sets). A number's default is
 * the reader's own (setting_number()'s `def`); the text here is what docs/analyzer.md says. */
/* clang-format off */
#define SETTINGS(X)                                                                                \
    X(SET_ANALYZE_RECORDS, "LOCKSTEP_ANALYZE_RECORDS", SETTING_RECORDS, 0, 0, "1024",              \
      "records read per trace, newest first (fewer past 8,192 traces; `all`: whole rings)")        \
    X(SET_ADDR2LINE, "LOCKSTEP_ADDR2LINE", SETTING_SWITCH, 0, 1, "1",                              \
      "`0` names call sites by symbol only, without debug info's file and line")                   \
    X(SET_SHIM, "LOCKSTEP_SHIM", SETTING_PATH, 0, 0, "beside lockstep",                            \
      "the shim `lockstep run` preloads (else `../lib/lockstep/`, or `../shim/`)")                 \
    X(SET_PROFILER_PLUGIN, "LOCKSTEP_PROFILER_PLUGIN", SETTING_PATH, 0, 0, "beside the shim",      \
      "the NCCL profiler plugin `lockstep run` names in `NCCL_PROFILER_PLUGIN`")                   \
    X(SET_PRELOAD, "LOCKSTEP_PRELOAD", SETTING_SWITCH, 0, 1, "1",                                  \
      "`0`: `lockstep run` reaches NCCL through the profiler plugin only")                         \
    X(SET_RUNS_DIR, "LOCKSTEP_RUNS_DIR", SETTING_PATH, 0, 0, "/dev/shm/lockstep-UID",              \
      "where `lockstep run` makes its run folders without `--dir`")                                \
    X(SET_RETAIN_HOURS, "LOCKSTEP_RETAIN_HOURS", SETTING_INTEGER, 0, 87600, "72",                  \
      "run folders of processes gone this long are removed (0 keeps them)")                        \
    X(SET_STOP_GRACE, "LOCKSTEP_STOP_GRACE", SETTING_SECONDS, 0, 3600, "5",                        \
      "the default of `--grace`: how long each step of a stop waits")                              \
    X(SET_GATHER_DIR, "LOCKSTEP_GATHER_DIR", SETTING_PATH, 0, 0, "unset",                          \
      "a folder all nodes share: one diagnosis of a job on many nodes")                            \
    X(SET_GATHER_WAIT, "LOCKSTEP_GATHER_WAIT", SETTING_POSITIVE, 0, 1e6, "30",                     \
      "seconds rank 0's runner waits for the other nodes' snapshots")
/* clang-format on */

enum setting_id {
#define SETTING_ID(ID, NAME, TYPE, LO, HI, DEF, DOC) ID,
    SETTINGS(SETTING_ID)
#undef SETTING_ID
        SET_COUNT
};

/* Checks every setting the environment gives. Returns 0, or -1 after one line on stderr naming
 * the first bad one's variable and value (the caller exits 2). */
int settings_check(void);

/* The value of a SETTING_PATH, NULL when unset or empty. */
const char *setting_text(enum setting_id id);

/* A number's value (SETTING_RECORDS: "all" is 0), `def` when unset, empty or bad. */
double setting_number(enum setting_id id, double def);

/* A switch: 1 on, 0 off; its table default (1) when unset, empty or bad. */
int setting_on(enum setting_id id);

#endif
