/* analysis_opts.h -- the thresholds of the model and the diagnosis, in one table: each a row with
 * its name, unit, default, bounds and meaning. The command line sets them (`--threshold
 * NAME=VALUE` of analyze, run and watch: command_options.c), help and the man pages list them
 * from the rows, and the model and the passes read them from the analysis's copy (model.opts):
 * a threshold is written in its row only.
 *
 * Adding a threshold: one row of ANALYSIS_OPTS below, its row in docs/analyzer.md's table of
 * thresholds (tests/cli `thresholds-documented` compares them), and its reader calls
 * opt_value() or opt_ns(). */
#ifndef LOCKSTEP_ANALYSIS_OPTS_H
#define LOCKSTEP_ANALYSIS_OPTS_H

#include <stdint.h>
#include <stdio.h>

/* What a threshold's value is. */
enum opt_unit {
    OPT_SECONDS, /* a time, in seconds (fractions allowed) */
    OPT_FACTOR,  /* a ratio */
    OPT_COUNT,   /* a whole number */
};

/* X(ID, NAME, unit, default, lo, hi, meaning). */
/* clang-format off */
#define ANALYSIS_OPTS(X)                                                                           \
    X(OPT_CLOCK_SKEW, "clock-skew", OPT_SECONDS, 0.05, 0, 60,                                      \
      "times on different hosts this close may be in either order")                               \
    X(OPT_DEATH_WAVE, "death-wave", OPT_SECONDS, 0.1, 0, 60,                                       \
      "ranks that recorded the same signal this close were killed together")                      \
    X(OPT_OUTLIVED, "outlived", OPT_SECONDS, 1, 0, 3600,                                           \
      "ranks that lived on this long after a wave of kills make it deaths of their own, not a "    \
      "stop of the job")                                                                           \
    X(OPT_OUTLIVED_HOST, "outlived-host", OPT_SECONDS, 0.25, 0, 3600,                              \
      "the same when the wave took every rank of its hosts: the hosts failed")                    \
    X(OPT_BLOCKED_DEATH, "blocked-death", OPT_SECONDS, 0.25, 0, 3600,                              \
      "a rank gone without a record while blocked in a call died first only with this gap more")  \
    X(OPT_SILENT, "silent", OPT_SECONDS, 1, 0.01, 86400,                                           \
      "a process with no end whose heartbeat is this silent (and 20 heartbeats) is gone")          \
    X(OPT_SNAPSHOT_SILENT, "snapshot-silent", OPT_SECONDS, 10, 0.01, 86400,                        \
      "the same in a snapshot taken while the job ran (and 10 heartbeats)")                        \
    X(OPT_STOP_SLACK, "stop-slack", OPT_SECONDS, 0.1, 0, 3600,                                     \
      "a rank last seen this long (and 4 heartbeats) before lockstep's stop was ended by it")     \
    X(OPT_ON_CPU, "on-cpu", OPT_SECONDS, 0.25, 0, 3600,                                            \
      "a thread last seen on the CPU this close to its end was busy at it")                        \
    X(OPT_EN_ROUTE, "en-route", OPT_SECONDS, 1, 0, 86400,                                          \
      "a member still running may be on its way to a collective others wait in this long (and "   \
      "a wait the job's stop caught this young, after a hang elsewhere, was going on)")           \
    X(OPT_EN_ROUTE_SPREAD, "en-route-spread", OPT_FACTOR, 4, 0, 1000,                              \
      "... or this many times the communicator's usual spread of arrivals, if longer")            \
    X(OPT_OUTSIDE_QUIET, "outside-quiet", OPT_SECONDS, 1, 0, 86400,                                \
      "a job stopped with every rank off the CPU outside NCCL this long was stuck outside it")    \
    X(OPT_STRAGGLER_MIN, "straggler-min", OPT_SECONDS, 1, 0, 86400,                                \
      "a late arrival shorter than this is no straggler")                                          \
    X(OPT_STRAGGLER_FACTOR, "straggler-factor", OPT_FACTOR, 10, 0, 1e6,                            \
      "... nor one less than this many times the others' spread")                                  \
    X(OPT_STRAGGLER_REPEATS, "straggler-repeats", OPT_COUNT, 3, 1, 1000000,                        \
      "a straggler is reported when late this many times (or at the last collective)")
/* clang-format on */

enum opt_id {
#define OPT_ROW_ID(ID, NAME, UNIT, DEF, LO, HI, DOC) ID,
    ANALYSIS_OPTS(OPT_ROW_ID)
#undef OPT_ROW_ID
        OPT_COUNT_
};

/* The thresholds of one analysis. A zeroed struct is not valid: start from
 * analysis_opts_default(). */
struct analysis_opts {
    double v[OPT_COUNT_];
};

/* Every threshold at its default. */
struct analysis_opts analysis_opts_default(void);

/* The value of a threshold in `o` (seconds, a factor or a count). */
double opt_value(const struct analysis_opts *o, enum opt_id id);

/* A time threshold of `o` in nanoseconds. */
uint64_t opt_ns(const struct analysis_opts *o, enum opt_id id);

/* Sets one threshold from "NAME=VALUE". Returns 0, or -1 after one line on stderr naming what
 * is wrong (no such name, with the names; a value it does not take, with its bounds). */
int analysis_opts_set(struct analysis_opts *o, const char *name_value);

/* Prints the table, a line per threshold: "NAME<TAB>DEFAULT<TAB>UNIT<TAB>MEANING" (`lockstep
 * --list-thresholds`, which docs/analyzer.md's table is checked against). */
void analysis_opts_list(FILE *f);

/* Prints the thresholds for --help: "  NAME=DEFAULT  MEANING" lines, each indented by `indent`
 * spaces. */
void analysis_opts_help(FILE *f, int indent);

/* Prints the thresholds for a man page (roff): a .TP paragraph each. */
void analysis_opts_man(FILE *f);

#endif
