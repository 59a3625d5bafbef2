/* cmd_watch.c -- `lockstep watch [--stall S] [--format NAME[=FILE]]... [--json FILE] [--kill]
 * [--keep] [--metrics FILE] [--status FILE] DIR`: watches a job started elsewhere (LD_PRELOAD
 * set by hand) through its trace folder; on a stall it diagnoses the live job (and stops it with
 * --kill) and exits 3; when every traced process has ended it gives the post-mortem diagnosis.
 * With --keep it is a service: each stall is reported once, its end said, and it watches on
 * until SIGTERM; --metrics and --status publish what it sees (live_facts.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "live_cmd.h"
#include "live_facts.h"
#include "live_stalled.h"
#include "names.h"
#include "timefmt.h"

#define WATCH_STALL_EXIT 3
/* How often the metrics and status files are rewritten when nothing else happens. */
#define WATCH_PUBLISH_NS 1000000000ull

/* What one watch does, and what it keeps while it runs. */
struct watch {
    struct live_opts o;
    const char *dir;
    int kill_job, keep;
    const char *metrics, *status; /* the files to publish to, NULL none */
    char status_path[4200];       /* the default --status beside --metrics */
    int serves;                   /* --keep, --metrics or --status: SIGTERM ends it with 0 */
    sigset_t sleep_mask;          /* the signal mask while it sleeps (SIGTERM, SIGINT let in) */
    struct monitor m;
    struct live_stalled_set stalled; /* the stalls reported and not over */
    struct live_slow_said slow_said; /* the slow wait said last (live_announce_slow()) */
    uint64_t published_ns;           /* CLOCK_MONOTONIC of the last write of the files */
    int said_over;                   /* said that every traced process has ended */
    int started;                     /* watching began: the files get a last write */
};

static const struct command_option watch_options[] = {
    LIVE_OPTION_STALL,
    LIVE_OPTION_FORMAT("watching", "watching starts"),
    LIVE_OPTION_JSON,
    LIVE_OPTION_LOG("also write all that watch says (its messages and the report) to\n"
                    "FILE as it says it, whatever becomes of the terminal or a pipe",
                    "watch"),
    LIVE_OPTION_RANKS,
    LIVE_OPTION_THRESHOLD,
    CMD_FLAG("kill", 0, "on a stall also stop the traced processes", NULL, struct watch, kill_job),
    CMD_FLAG("keep", 0,
             "a service (an inference server's watch): never exit at a stall;\n"
             "diagnose each stall once (report files rewritten), say when it\n"
             "resumes, watch on when every process has ended; exit 0 on SIGTERM\n"
             "or SIGINT. Not with --kill",
             "a service: never exit at a stall. Each stall is announced and diagnosed once (the "
             "report on\n"
             "standard output, the report files rewritten); its end is said on standard error "
             "(\"job X (ranks\n"
             "0\\-3) resumed after 41.2 s\"); another part stalling meanwhile is a new stall; when "
             "every traced\n"
             "process has ended it says so once and watches on for new ones. SIGTERM or SIGINT "
             "end it with\n"
             "status 0, after a last write of the metrics and status files. Not with "
             "\\fB\\-\\-kill\\fR (a\n"
             "usage error).",
             struct watch, keep),
    CMD_FILE("metrics", 0, "FILE",
             "keep FILE up to date in Prometheus text format (about once a\n"
             "second and at each stall and resume; replaced whole), for\n"
             "node_exporter's textfile collector: stalled jobs, their first\n"
             "finding, each communicator's newest collective and idle time",
             "keep \\fIFILE\\fR up to date in Prometheus text format: about once a second and at "
             "each stall and\n"
             "resume, replaced whole (written beside it, then renamed). Per job "
             "\\fBlockstep_stalled\\fR,\n"
             "\\fBlockstep_stalled_seconds\\fR, \\fBlockstep_stalls_total\\fR, "
             "\\fBlockstep_running_ranks\\fR\n"
             "and \\fBlockstep_finding\\fR (the first finding's kind and ranks); per communicator, "
             "at most 64,\n"
             "\\fBlockstep_comm_stalled\\fR, \\fBlockstep_comm_slow\\fR, "
             "\\fBlockstep_comm_collective_seq\\fR and\n"
             "\\fBlockstep_comm_idle_seconds\\fR; \\fBlockstep_communicators\\fR; "
             "\\fBlockstep_watch_up\\fR\n"
             "(0 in the last write). Put it in the folder of node_exporter's textfile collector.",
             struct watch, metrics),
    CMD_FILE("status", 0, "FILE",
             "the same as a JSON status file (with --metrics, by default its\n"
             "name with .prom replaced by .json)",
             "the same facts as a JSON file (docs/report\\-format.md, \"Status file\"); with "
             "\\fB\\-\\-metrics\\fR\n"
             "and no \\fB\\-\\-status\\fR it is written beside the metrics, its name's "
             "\\fB.prom\\fR made\n"
             "\\fB.json\\fR.",
             struct watch, status),
    CMD_CALL("grace", 0, "SECONDS",
             "with --kill: how long the ranks get after SIGTERM, and their\n"
             "left-over processes after that, before SIGKILL (default " COMMAND_HELP_DEFAULT(
                 "LOCKSTEP_STOP_GRACE") ",\n"
                                        "or LOCKSTEP_STOP_GRACE)",
             "with \\fB\\-\\-kill\\fR: how long the ranks get after SIGTERM, and their "
             "left\\-over processes after\n"
             "that, before SIGKILL (default " COMMAND_HELP_DEFAULT(
                 "LOCKSTEP_STOP_GRACE") ", or "
                                        "LOCKSTEP_STOP_GRACE)",
             live_take_grace),
    CMD_CALL("signal-stacks", 0, NULL,
             "where ptrace is refused, ask the shim for live stacks with its\n"
             "signal (the job must run with LOCKSTEP_STACK_SIGNAL set)",
             "where ptrace is refused, ask the shim for live stacks with its signal (the job must "
             "run with\n"
             "LOCKSTEP_STACK_SIGNAL set)",
             live_take_signal_stacks),
    CMD_END};

const struct command_help watch_help = {
    "watch",
    "[--stall SECONDS | --stall-short SECONDS --stall-long SECONDS] DIR",
    "watch a job traced into DIR; on a stall diagnose it live and exit 3",
    "  watches the traces in DIR of a job started with LD_PRELOAD=liblockstep.so\n"
    "  and LOCKSTEP_DIR=DIR (DIR must exist; the job may start later); when a job, or\n"
    "  one communicator of it, made no progress while one of its ranks waits in it (even\n"
    "  while the rest trains on), it diagnoses the live job and exits 3. How long: as run\n"
    "  (25 s when the ranks waited for make no progress at all, 300 s while one of them\n"
    "  works; --stall S: one bound). When every traced process has ended it prints the\n"
    "  post-mortem diagnosis.\n",
    17,
    watch_options,
    "exit status: 0 nothing found (or stopped by SIGTERM or SIGINT with --keep, --metrics\n"
    "or --status), 1 findings (post-mortem), 2 bad input, 3 a stall was diagnosed\n",
    0};

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

/* SIGTERM and SIGINT set stop_signal; they are blocked except while watch sleeps, so a
 * diagnosis or a file being written is never cut short. */
static void catch_stop_signals(struct watch *w)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, &w->sleep_mask);
    sigdelset(&w->sleep_mask, SIGTERM);
    sigdelset(&w->sleep_mask, SIGINT);
}

static void watch_sleep(const struct watch *w, int ms)
{
    if (!w->serves) {
        live_sleep_ms(ms);
        return;
    }
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    ppoll(NULL, 0, &ts, &w->sleep_mask); /* a stop signal ends it at once */
}

/* The default --status: the --metrics path with a trailing ".prom" made ".json" (else
 * ".json" added). */
static void default_status(struct watch *w)
{
    if (w->status || !w->metrics)
        return;
    size_t n = strlen(w->metrics);
    int prom = n > 5 && strcmp(w->metrics + n - 5, ".prom") == 0;
    snprintf(w->status_path, sizeof(w->status_path), "%.*s.json", (int)(prom ? n - 5 : n),
             w->metrics);
    w->status = w->status_path;
}

/* Parses the command line into `w`. Returns -1 to go on, else the exit status. */
static int parse_options(struct watch *w, int argc, char **argv)
{
    int parsed = command_parse(&watch_help, &argc, argv, w);
    if (parsed >= 0)
        return parsed;
    if (w->keep && w->kill_job)
        return command_usage_error(&watch_help,
                                   "--keep and --kill do not go together: --keep watches on "
                                   "after a stall, --kill stops the job at its first");
    if (optind >= argc)
        return command_usage_error(&watch_help, "no trace folder given");
    if (argc - optind > 1)
        return command_usage_error(&watch_help, "one trace folder, not %d", argc - optind);
    w->dir = argv[optind];
    default_status(w);
    w->serves = w->keep || w->metrics || w->status;
    return -1;
}

/* Rewrites the metrics and status files when asked (`force`) or a second has passed. */
static int publish(struct watch *w, int up, int force)
{
    uint64_t now = timefmt_mono_ns();
    if (!force && now - w->published_ns < WATCH_PUBLISH_NS)
        return 0;
    w->published_ns = now;
    /* The slow part said last, when it is a communicator (a job's has no row of its own). */
    uint64_t slow = w->slow_said.part && w->slow_said.is_comm ? w->slow_said.part : 0;
    return live_facts_publish(w->metrics, w->status, &w->m, &w->stalled, up, slow);
}

/* The monitor's job that stall `s` is part of: the job itself, or the job of the stalled
 * communicator's first member; -1 unknown. */
static long stalled_job(const struct monitor *m, const struct mon_stall *s)
{
    if (s->scope == MON_STALL_JOB)
        return (long)s->part.at;
    if (s->part.at < m->comms.n && m->comms.v[s->part.at].nmembers)
        return (long)m->t[m->comms.v[s->part.at].members[0].trace].job;
    return -1;
}

/* A stall found: said, diagnosed live and remembered (its part is passed over while it stays
 * stalled); without --keep the job is stopped with --kill. */
static void on_stall(struct watch *w, struct mon_stall *stall)
{
    live_announce_stall(stall);
    struct live_first_finding first;
    live_diagnose_first(w->dir, &w->o, 1, 1, stall, &first);
    if (live_stalled_add(&w->stalled, &w->m, stall, &first) < 0)
        fprintf(stderr, "lockstep: out of memory remembering the stall\n");
    if (w->kill_job) {
        /* The job that stalled, not another one writing to the same folder. */
        struct stop_job job = {0};
        job.job = (long)stalled_job(&w->m, stall);
        live_stop(&w->m, &w->o, &job, NULL, "watch", stall);
    }
}

/* One poll: the stalls that are over, the job's end, a new stall. Returns -1 to go on, else
 * the exit status. */
static int watch_step(struct watch *w)
{
    monitor_poll(&w->m);
    int changed = live_stalled_check(&w->stalled, &w->m, stderr) > 0;
    /* Over: traces exist, none of their processes runs, nothing moved for a second (a
     * launcher may still be starting ranks). */
    if (w->m.n > 0 && monitor_running(&w->m) == 0 && monitor_idle_s(&w->m) >= 1.0) {
        if (!w->keep) {
            fprintf(stderr, "lockstep: every traced process has ended: post-mortem diagnosis\n");
            int n = live_diagnose(w->dir, &w->o, 0, 1, NULL);
            return n < 0 ? 2 : n > 0 ? 1 : 0;
        }
        if (!w->said_over)
            fprintf(stderr,
                    "lockstep: every traced process has ended; watching %s on for new "
                    "ones (--keep)\n",
                    w->dir);
        changed |= !w->said_over;
        w->said_over = 1;
    } else if (monitor_running(&w->m) > 0) {
        w->said_over = 0;
    }
    struct mon_stall_known known = {0};
    struct mon_stall stall;
    uint64_t now = timefmt_mono_ns();
    int knows = live_stalled_known(&w->stalled, &w->m, &known) == 0;
    int found = knows && monitor_find_stall_beside(&w->m, &w->o.bounds, now, &known, &stall) > 0;
    if (!found) {
        struct mon_stall slow;
        int is_slow = knows && monitor_find_slow(&w->m, &w->o.bounds, now, &known, &slow) > 0;
        live_announce_slow(&w->m, is_slow ? &slow : NULL, &w->slow_said);
        mon_stall_free(&slow);
    }
    mon_stall_known_free(&known);
    if (found) {
        on_stall(w, &stall);
        mon_stall_free(&stall);
        if (!w->keep)
            return WATCH_STALL_EXIT;
    }
    publish(w, 1, changed || found);
    return -1;
}

/* Checks DIR and the files, and starts what watching needs. Returns -1 to go on, else the
 * exit status. */
static int watch_start(struct watch *w)
{
    struct stat st;
    int found = stat(w->dir, &st) == 0;
    if (!found || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "lockstep watch: %s: %s (start the job with LOCKSTEP_DIR=%s, or make the "
                "folder first)\n",
                w->dir, found ? "not a folder" : strerror(errno), w->dir);
        return 2;
    }
    if (live_check_bounds(&w->o) < 0 || live_check_json(&w->o) < 0 || live_start_log(&w->o) < 0)
        return 2;
    /* A reader of the report that went away (`| head -1`) must not cost the --json file or
     * the exit status: writes fail with EPIPE instead of killing watch. */
    signal(SIGPIPE, SIG_IGN);
    if (monitor_init(&w->m, w->dir) < 0)
        return 2;
    monitor_set_stall(&w->m, mon_bounds_least(&w->o.bounds));
    if (publish(w, 1, 1) < 0) /* the files can be written, before watching */
        return 2;
    if (w->serves)
        catch_stop_signals(w);
    char bounds[160];
    live_bounds_words(&w->o, bounds, sizeof(bounds));
    fprintf(stderr, "lockstep: watching %s (%s%s)\n", w->dir, bounds,
            w->keep ? "; --keep: until SIGTERM" : "");
    w->started = 1;
    return -1;
}

int cmd_watch(int argc, char **argv)
{
    static struct watch w; /* large (the status path); one per process */
    memset(&w, 0, sizeof(w));
    live_opts_init(&w.o);
    int rc = parse_options(&w, argc, argv);
    if (rc < 0)
        rc = watch_start(&w);
    while (rc < 0) {
        if (stop_signal) {
            fprintf(stderr, "lockstep: %s: watch stops\n", names_signal(stop_signal));
            rc = 0;
            break;
        }
        rc = watch_step(&w);
        if (rc < 0)
            watch_sleep(&w, 200);
    }
    if (w.started)
        publish(&w, 0, 1);
    live_stalled_free(&w.stalled);
    monitor_free(&w.m);
    return rc;
}
