/* live_cmd.h -- what `lockstep run` and `lockstep watch` share: the stall diagnosis of a
 * running job, CI annotations, and stopping the job. */
#ifndef LOCKSTEP_LIVE_CMD_H
#define LOCKSTEP_LIVE_CMD_H

#include <stdio.h>
#include <sys/types.h>

#include "commands.h"
#include "job_stop.h"
#include "monitor.h"
#include "monitor_stall.h"
#include "output.h"

struct live_opts {
    double stall_s;           /* no progress for this long while something is outstanding */
    struct output_plan files; /* the report files: --format NAME=FILE, --json FILE (each
                               * `written` once live_diagnose() wrote it) */
    const struct output_format *annotations; /* printed after the text report (--format
                                              * github: ::error annotations), NULL none */
    double grace_s;            /* stopping: how long each step waits before the next, harsher one */
    int signal_stacks;         /* --signal-stacks: the shim's in-process sampler where ptrace is
                                * refused (docs/live.md: its signal can end a rank's sleeps) */
    const char *log_path;      /* --log FILE: all the command says goes there too (live_log.h) */
    struct output_opts report; /* how the report files are written (--ranks all) */
};

/* The defaults: a stall after 300 s, the stop's grace from job_stop_default_grace(). */
void live_opts_init(struct live_opts *o);

/* The options run and watch share, as CMD_TAKE_CALL functions of their tables (commands.h):
 * `ctx` is the command's struct of options, whose first member is its struct live_opts. Each
 * returns 0, or -1 after a message when the value is wrong. --format NAME=FILE takes any
 * format of output.c's table; on stdout (no FILE) only text or github: stdout has the text
 * report, github's annotations go after it. */
int live_take_stall(void *ctx, const char *val);         /* --stall SECONDS */
int live_take_format(void *ctx, const char *val);        /* --format NAME[=FILE] */
int live_take_json(void *ctx, const char *val);          /* --json FILE */
int live_take_log(void *ctx, const char *val);           /* --log FILE */
int live_take_ranks(void *ctx, const char *val);         /* --ranks WHICH */
int live_take_grace(void *ctx, const char *val);         /* --grace SECONDS */
int live_take_signal_stacks(void *ctx, const char *val); /* --signal-stacks */

/* The rows of run's and watch's tables (commands.h) that say the same in both. */
#define LIVE_OPTION_STALL                                                                          \
    CMD_CALL("stall", 0, "SECONDS", "how long without progress is a stall (default 300)", NULL,    \
             live_take_stall)
/* The row of --format NAME[=FILE]: `when` says when a file is checked ("CMD starts"), `roff_when`
 * the same in the man page. */
#define LIVE_OPTION_FORMAT(when, roff_when)                                                        \
    CMD_CALL("format", 0, "NAME[=FILE]",                                                           \
             "also write the report as NAME to FILE (checked before " when ";\n"                   \
             "written even when the job made no NCCL call); repeatable. No\n"                      \
             "FILE: on stdout, text (the default) or github (::error\n"                            \
             "annotations at the divergent call sites after the text)\n"                           \
             "formats: " COMMAND_HELP_FORMATS,                                                     \
             "also write the report in format \\fINAME\\fR to \\fIFILE\\fR; repeatable, one "      \
             "format per file.\n"                                                                  \
             "A file is checked before " roff_when " and written even when the job made no "       \
             "NCCL call (an\n"                                                                     \
             "empty report). Without \\fIFILE\\fR (or with \\fB\\-\\fR) the format goes to "       \
             "standard output,\n"                                                                  \
             "which has the text report: \\fBtext\\fR is the default, \\fBgithub\\fR adds "        \
             "::error annotations\n"                                                               \
             "at the divergent call sites after it (files named relative to the repository).\n"    \
             "\\fINAME\\fR is one of the formats in \\fBlockstep\\fR(1), FORMATS.",                \
             live_take_format)
/* The row of --log FILE: `help` its lines in --help, `who` the command ("run"). */
#define LIVE_OPTION_LOG(help, who)                                                                 \
    CMD_CALL("log", 0, "FILE", help,                                                               \
             "also write all that " who " says (its messages on stderr and the report on stdout) " \
             "to \\fIFILE\\fR as\n"                                                                \
             "it says it; a terminal or pipe that goes away (SIGPIPE is ignored: writes to it "    \
             "fail) loses\n"                                                                       \
             "nothing there. The job's own output is not in it.",                                  \
             live_take_log)
#define LIVE_OPTION_JSON                                                                           \
    CMD_CALL("json", 0, "FILE", "the same as --format json=FILE",                                  \
             "the same as \\fB\\-\\-format json=\\fIFILE\\fR: the JSON report "                    \
             "(docs/report\\-format.md)",                                                          \
             live_take_json)
#define LIVE_OPTION_RANKS                                                                          \
    CMD_CALL("ranks", 0, "WHICH", OUTPUT_RANKS_HELP, OUTPUT_RANKS_MAN, live_take_ranks)

/* Checks, before a job starts, that every report file (--format NAME=FILE, --json FILE) can be
 * written: opens it for writing (it is made and removed again when it did not exist). Returns
 * 0, or -1 after a message naming the file. */
int live_check_json(const struct live_opts *o);

/* Starts --log FILE when asked (live_log.h), once the report files are checked and before the
 * job starts or watching begins. Returns 0, -1 after a message naming the file. */
int live_start_log(const struct live_opts *o);

/* Diagnoses the traces in `dir`: probes the ranks still running here when `probe` is set,
 * prints the report (text, github annotations) on stdout when `print` is set, and writes the
 * report files of o->files (an empty report when `dir` has no traces). With `stall` (what
 * the monitor found stalled; NULL post-mortem) the report opens with what stalled and what
 * progressed meanwhile, its JSON files have the member "stall", and the diagnosis speaks of the
 * stalled part only (live_scope.h). Returns the number of findings, or -1 when the traces could not
 * be analyzed. */
int live_diagnose(const char *dir, struct live_opts *o, int probe, int print,
                  const struct mon_stall *stall);

/* The first finding of a live diagnosis, in brief (what `watch --keep`'s metrics and status
 * files say of a stall). */
struct live_first_finding {
    char kind[32];     /* its JSON kind ("missing_ranks"); "" when the diagnosis found nothing */
    char ranks[128];   /* the ranks it is about, compressed ("3", "4-7"): the missing ones,
                        * else the dead ones, else the smallest of its classes (the odd one
                        * out), else all of them; cut short with ",..." */
    char summary[512]; /* its one line (cut to fit) */
};

/* live_diagnose() that also fills `first` (when not NULL) from the first finding of the
 * diagnosis, the root cause first (zeroed when there is none, or the traces could not be
 * analyzed). Returns as live_diagnose() does. */
int live_diagnose_first(const char *dir, struct live_opts *o, int probe, int print,
                        const struct mon_stall *stall, struct live_first_finding *first);

/* Says on stderr that `s` stalled and that the live job is diagnosed now: as "no progress for
 * 2.0 s while rank 0 (pid 12) is inside an NCCL call" when a whole job stalled, else what
 * stalled while what progressed (mon_stall_describe()). */
void live_announce_stall(const struct mon_stall *s);

/* Stops the job (job_stop(), with o->grace_s), prints what that took on stdout, and adds it
 * to each JSON report file live_diagnose() wrote as the key "stopped". `launcher_cmd` names CMD
 * when it had exited before (else NULL). First it records the stop in the trace folder
 * (stop_mark.h): `by` the command ("run", "watch"), after `stall` (NULL: another node saw
 * it). This function can't fail. */
void live_stop(struct monitor *m, struct live_opts *o, struct stop_job *job,
               const char *launcher_cmd, const char *by, const struct mon_stall *stall);

#endif
