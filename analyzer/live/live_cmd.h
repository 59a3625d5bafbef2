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
    struct mon_bounds bounds; /* how long without progress is a stall (monitor_stall.h): two
                               * bounds by default, one with --stall */
    struct output_plan files; /* the report files: --format NAME=FILE, --json FILE (each
                               * `written` once live_diagnose() wrote it) */
    const struct output_format *annotations; /* printed after the text report (--format
                                              * github: ::error annotations), NULL none */
    double grace_s;            /* stopping: how long each step waits before the next, harsher one */
    int signal_stacks;         /* --signal-stacks: the shim's in-process sampler where ptrace is
                                * refused (docs/live.md: its signal can end a rank's sleeps) */
    const char *log_path;      /* --log FILE: all the command says goes there too (live_log.h) */
    struct output_opts report; /* how the report files are written (--ranks all) */
    struct analysis_opts thresholds; /* --threshold NAME=VALUE: the diagnosis's thresholds */
};

/* The defaults: the two bounds MON_SHORT_S and MON_LONG_S, the stop's grace from
 * job_stop_default_grace(). */
void live_opts_init(struct live_opts *o);

/* The options run and watch share, as CMD_TAKE_CALL functions of their tables (commands.h):
 * `ctx` is the command's struct of options, whose first member is its struct live_opts. Each
 * returns 0, or -1 after a message when the value is wrong. --format NAME=FILE takes any
 * format of output.c's table; on stdout (no FILE) only text or github: stdout has the text
 * report, github's annotations go after it. */
int live_take_stall(void *ctx, const char *val);         /* --stall SECONDS */
int live_take_stall_short(void *ctx, const char *val);   /* --stall-short SECONDS */
int live_take_stall_long(void *ctx, const char *val);    /* --stall-long SECONDS */
int live_take_format(void *ctx, const char *val);        /* --format NAME[=FILE] */
int live_take_json(void *ctx, const char *val);          /* --json FILE */
int live_take_log(void *ctx, const char *val);           /* --log FILE */
int live_take_ranks(void *ctx, const char *val);         /* --ranks WHICH */
int live_take_grace(void *ctx, const char *val);         /* --grace SECONDS */
int live_take_signal_stacks(void *ctx, const char *val); /* --signal-stacks */
int live_take_threshold(void *ctx, const char *val);     /* --threshold NAME=VALUE */

/* A number's digits, for help that says a default written elsewhere ("25" for MON_SHORT_S). */
#define LIVE_STR(x)  LIVE_STR_(x)
#define LIVE_STR_(x) #x

/* The rows of run's and watch's tables (commands.h) that say the same in both. */
#define LIVE_OPTION_STALL                                                                          \
    CMD_CALL("stall", 0, "SECONDS",                                                                \
             "one bound for every wait: this long without progress is a stall\n"                   \
             "(default: two bounds, --stall-short and --stall-long)",                              \
             "one bound for every wait: this long without progress is a stall, whatever the "      \
             "ranks waited\n"                                                                      \
             "for do (default: the two bounds of \\fB\\-\\-stall\\-short\\fR and "                 \
             "\\fB\\-\\-stall\\-long\\fR)",                                                        \
             live_take_stall),                                                                     \
        CMD_CALL(                                                                                  \
            "stall-short", 0, "SECONDS",                                                           \
            "a wait whose ranks waited for make no progress at all (asleep,\n"                     \
            "stopped, in a lock, dead, waiting in NCCL themselves) is a stall\n"                   \
            "after this (default " LIVE_STR(                                                       \
                MON_SHORT_S) "; once the job has a rhythm, 4 "                                     \
                             "times its\n"                                                         \
                             "longest healthy pause, down to two fifths of it)",                   \
            "a wait whose ranks waited for make no progress at all (asleep outside I/O, "          \
            "stopped, in a\n"                                                                      \
            "lock or a host barrier, dead, or waiting in NCCL themselves) is a stall after "       \
            "this many seconds\n"                                                                  \
            "(default " LIVE_STR(                                                                  \
                MON_SHORT_S) "). Once the job has a rhythm, the bound is 4 times the longest "     \
                             "pause it came back\n"                                                \
                             "from, down to two fifths of \\fISECONDS\\fR (docs/live.md)",         \
            live_take_stall_short),                                                                \
        CMD_CALL("stall-long", 0, "SECONDS",                                                       \
                 "a wait whose ranks waited for are busy (CPU, I/O, their GPU) is\n"               \
                 "slow, not hung, and a stall only after this (default " LIVE_STR(                 \
                     MON_LONG_S) ", or 3\n"                                                        \
                                 "times the longest pause the job came back from)",                \
                 "a wait whose ranks waited for are busy (on the CPU, in I/O, completing GPU "     \
                 "work) is slow,\n"                                                                \
                 "not hung: a stall only after this many seconds (default " LIVE_STR(              \
                     MON_LONG_S) ", or 3 times the "                                               \
                                 "longest pause\n"                                                 \
                                 "the job came back from). Meanwhile one line on stderr says "     \
                                 "what it waits for",                                              \
                 live_take_stall_long)
/* The row of --format NAME[=FILE]: `when` says when a file is checked ("CMD starts"), `roff_when`
 * the same in the man page. */
#define LIVE_OPTION_FORMAT(when, roff_when)                                                        \
    CMD_REPEAT("format", 0, "NAME[=FILE]",                                                         \
               "also write the report as NAME to FILE (checked before " when ";\n"                 \
               "written even when the job made no NCCL call); repeatable. No\n"                    \
               "FILE: on stdout, text (the default) or github (::error\n"                          \
               "annotations at the divergent call sites after the text)\n"                         \
               "formats: " COMMAND_HELP_FORMATS,                                                   \
               "also write the report in format \\fINAME\\fR to \\fIFILE\\fR; repeatable, one "    \
               "format per file.\n"                                                                \
               "A file is checked before " roff_when " and written even when the job made no "     \
               "NCCL call (an\n"                                                                   \
               "empty report). Without \\fIFILE\\fR (or with \\fB\\-\\fR) the format goes to "     \
               "standard output,\n"                                                                \
               "which has the text report: \\fBtext\\fR is the default, \\fBgithub\\fR adds "      \
               "::error annotations\n"                                                             \
               "at the divergent call sites after it (files named relative to the repository).\n"  \
               "\\fINAME\\fR is one of the formats in \\fBlockstep\\fR(1), FORMATS.",              \
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
#define LIVE_OPTION_THRESHOLD CMD_OPTION_THRESHOLD(live_take_threshold)
#define LIVE_OPTION_RANKS                                                                          \
    CMD_CHOICE("ranks", 0, "WHICH", OUTPUT_RANKS_WORDS, OUTPUT_RANKS_HELP, OUTPUT_RANKS_MAN,       \
               live_take_ranks)

/* Checks the bounds once every option is read: --stall-short above --stall-long is refused.
 * Returns 0, or -1 after a message. */
int live_check_bounds(const struct live_opts *o);

/* The bounds in words, for the first line run and watch say: "stall after 25 s when the ranks
 * waited for make no progress, 300 s while they work" or "stall after 2 s without progress".
 * This function can't fail (the text is cut to len). */
void live_bounds_words(const struct live_opts *o, char *buf, size_t len);

/* Says on stderr, once per change, that part `s` (monitor_find_slow() of monitor `m`) is slow,
 * not hung: "lockstep: ranks 0-2 wait in comm 7f3a91c2 ... for 45 s; rank 3 (pid 12) was last
 * busy 0.1 s ago (92% of a CPU), now in save_checkpoint <- main - not a hang yet (...)": where
 * the busy rank is comes from its live stack, read from outside (live_threads.h; left out where
 * that is refused). `said` keeps what was said last (zero it to start); NULL `s`: nothing is
 * slow now. */
struct live_slow_said {
    uint64_t part; /* the comm id, or the job index + 1, said last; 0 none */
    int busy_rank; /* the rank said busy */
    int asleep;    /* ... said no longer busy */
    int is_comm;   /* part is a communicator */
};
void live_announce_slow(const struct monitor *m, const struct mon_stall *s,
                        struct live_slow_said *said);

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

/* Records in the trace folder (stop_mark.h), before the interrupt `sig` (SIGINT, SIGTERM,
 * SIGHUP) is passed on to the job, that `by` ("run") was interrupted `after_s` seconds after
 * it started the job: later reports say "interrupted (SIGINT) after 12 s" of the ranks it ended,
 * not that they crashed. This function can't fail (a mark not written is said on stderr). */
void live_mark_interrupt(const struct monitor *m, const char *by, int sig, double after_s);

/* Stops a job that did not end after an interrupt (job_stop(), with o->grace_s) and says what
 * that took on stderr (stdout is the report's). This function can't fail. */
void live_stop_interrupted(struct monitor *m, struct live_opts *o, struct stop_job *job);

#endif
