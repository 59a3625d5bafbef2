/* cmd_run.c -- `lockstep run [--dir DIR] [--stall S] [--format NAME[=FILE]]... [--json FILE]
 * [--grace S] -- CMD...`: runs a job under the shim as the reaper of its processes, notices a
 * stall, diagnoses it live, stops the job and exits 3; otherwise waits until no traced process
 * of the job runs and exits with the job's own status. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "gather.h"
#include "live_cmd.h"
#include "names.h"
#include "proctree.h"
#include "run_dir.h"
#include "settings.h"
#include "timefmt.h"

#define RUN_STALL_EXIT 3
#define RUN_POLL_MS    50 /* how often the traces are read: a stall is seen this late at most */
#define RUN_UNTRACED_WAIT_S                                                                        \
    10 /* after CMD ended: how long a process of the job may run                                   \
        * before it makes its trace */

static volatile sig_atomic_t forwarded_signal;
/* The first interrupt (SIGINT, SIGTERM, SIGHUP) and how many came: the job gets it, and
 * RUN_INTERRUPT_WAIT_MS later (or at a second one) run stops what is left of it. */
static volatile sig_atomic_t interrupt_sig, interrupts;
#define RUN_INTERRUPT_WAIT_MS 2000
/* SIGPIPE as this process got it: what the job gets (run itself ignores it, so that a closed
 * stdout never stops it from stopping the job, keeping its report files and exiting). */
static struct sigaction caller_sigpipe;

static void remember_signal(int sig)
{
    forwarded_signal = sig;
    if (!interrupt_sig)
        interrupt_sig = sig;
    interrupts++;
}

/* What the options say: live_opts first (the shared options' functions take it). */
struct run_opts {
    struct live_opts o;
    const char *dir; /* --dir DIR */
};

static const struct command_option run_options[] = {
    CMD_TEXT("dir", 0, "DIR", "trace folder (default: a fresh one under /dev/shm/lockstep-UID)",
             "the trace folder (default: a fresh one under /dev/shm/lockstep\\-UID)",
             struct run_opts, dir),
    LIVE_OPTION_STALL,
    LIVE_OPTION_FORMAT("CMD starts", "\\fICMD\\fR starts"),
    LIVE_OPTION_JSON,
    LIVE_OPTION_LOG("also write all that run says (its messages and the report) to FILE\n"
                    "as it says it, whatever becomes of the terminal or a pipe",
                    "run"),
    LIVE_OPTION_RANKS,
    LIVE_OPTION_THRESHOLD,
    CMD_CALL("grace", 0, "SECONDS",
             "stopping: how long the launcher gets to tear its job down after\n"
             "SIGTERM, then the ranks after theirs, before SIGKILL (default " COMMAND_HELP_DEFAULT(
                 "LOCKSTEP_STOP_GRACE") ")",
             "stopping: how long the launcher gets to tear its job down after SIGTERM, then the "
             "ranks after\n"
             "theirs, before SIGKILL (default " COMMAND_HELP_DEFAULT("LOCKSTEP_STOP_GRACE") ")",
             live_take_grace),
    CMD_CALL("signal-stacks", 0, NULL,
             "where ptrace is refused, ask the shim for live stacks with a\n"
             "signal (it can end a sleep the program does not restart)",
             "where ptrace is refused, ask the shim for live stacks with a signal (it can end a "
             "sleep the\n"
             "program does not restart)",
             live_take_signal_stacks),
    CMD_END};

const struct command_help run_help = {
    "run",
    "[--stall SECONDS | --stall-short SECONDS --stall-long SECONDS] -- CMD [ARG...]",
    "run a job under the shim; on a stall diagnose it live, stop it and exit 3",
    "  runs CMD with the lockstep shim preloaded; when the job, or one communicator of\n"
    "  it, made no progress while one of its ranks waits in it (even while the rest of\n"
    "  the job trains on), it diagnoses the live job, stops it and exits 3. How long:\n"
    "  25 s when the ranks waited for make no progress at all (asleep, on a lock, dead,\n"
    "  waiting in NCCL themselves; once the job has a rhythm, 4 times its longest\n"
    "  healthy pause, down to 10 s), 300 s while one of them works (CPU, I/O, its GPU:\n"
    "  meanwhile one line on stderr says what the wait is for). --stall S: one bound.\n"
    "  Ctrl-C (SIGINT, SIGTERM) is passed on; what is left of the job 2 s later is\n"
    "  stopped, and run exits 128+N. Otherwise it exits with CMD's own status.\n",
    17,
    run_options,
    "  environment: LOCKSTEP_SHIM (the shim), LOCKSTEP_GATHER_DIR (multi-node gather),\n"
    "  LOCKSTEP_STOP_GRACE (the default of --grace), LOCKSTEP_RUNS_DIR (where run folders\n"
    "  are made without --dir; default " COMMAND_HELP_DEFAULT(
        "LOCKSTEP_RUNS_DIR") "),\n"
                             "  LOCKSTEP_RETAIN_HOURS (run folders of processes gone this long are "
                             "removed;\n"
                             "  default " COMMAND_HELP_DEFAULT(
                                 "LOCKSTEP_RETAIN_HOURS") ", 0 keeps them)\n"
                                                          "exit status: CMD's own (128+N for "
                                                          "signal N) when it ends by itself, 3 a "
                                                          "stall was\n"
                                                          "diagnosed and the job stopped, 128+N "
                                                          "interrupted by signal N (130: Ctrl-C), "
                                                          "2 bad\n"
                                                          "usage (nothing started)\n",
    1};

/* Finds liblockstep.so: LOCKSTEP_SHIM, else from this binary's own path, in the build tree
 * (build/analyzer/lockstep -> build/shim/) or an install tree, moved or not, which is also what a
 * pip-installed wheel lays out (bin/lockstep -> lib/lockstep/; docs/install.md). */
static int find_shim(char *out, size_t len)
{
    const char *env = setting_text(SET_SHIM);
    if (env) {
        if (access(env, R_OK) != 0) {
            fprintf(stderr, "lockstep: LOCKSTEP_SHIM=%s: %s\n", env, strerror(errno));
            return -1;
        }
        snprintf(out, len, "%s", env);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = 0;
    static const char *const rel[] = {"../shim/liblockstep.so", "../lib/lockstep/liblockstep.so",
                                      NULL};
    for (int i = 0; rel[i]; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof(path), "%s/%s", self, rel[i]);
        char real[PATH_MAX];
        if (realpath(path, real) && access(real, R_OK) == 0) {
            snprintf(out, len, "%s", real);
            return 0;
        }
    }
    fprintf(
        stderr,
        "lockstep: cannot find liblockstep.so next to %s (looked in ../shim, ../lib/lockstep); set "
        "LOCKSTEP_SHIM\n",
        self);
    return -1;
}

/* Finds libnccl-profiler-lockstep.so: LOCKSTEP_PROFILER_PLUGIN, else next to the shim. Returns
 * 0 with the path in out, -1 (after one line) when there is none: then only LD_PRELOAD reaches
 * the job's NCCL. */
static int find_plugin(const char *shim, char *out, size_t len)
{
    const char *env = setting_text(SET_PROFILER_PLUGIN);
    if (env) {
        snprintf(out, len, "%s", env);
    } else {
        snprintf(out, len, "%s", shim);
        char *slash = strrchr(out, '/');
        size_t at = slash ? (size_t)(slash - out + 1) : 0;
        snprintf(out + at, len - at, "libnccl-profiler-lockstep.so");
    }
    if (access(out, R_OK) == 0)
        return 0;
    fprintf(stderr,
            "lockstep: no profiler plugin at %s (%s): NCCL linked statically stays unseen\n", out,
            strerror(errno));
    return -1;
}

/* In the job's environment: NCCL_PROFILER_PLUGIN names our plugin; a plugin the user named
 * already is chained to (LOCKSTEP_PROFILER_CHAIN, our plugin forwards every event to it) or, when
 * that cannot be, kept alone (one line says why). */
static void set_profiler_plugin(const char *plugin)
{
    const char *theirs = getenv("NCCL_PROFILER_PLUGIN");
    if (theirs && *theirs && strcmp(theirs, plugin) != 0) {
        if (strcasecmp(theirs, "none") == 0) {
            fprintf(stderr, "lockstep: NCCL_PROFILER_PLUGIN=none kept: NCCL loads no profiler "
                            "plugin, lockstep sees NCCL through LD_PRELOAD only\n");
            return;
        }
        if (strchr(theirs, '/') && access(theirs, R_OK) != 0) {
            fprintf(stderr,
                    "lockstep: NCCL_PROFILER_PLUGIN=%s kept as it is: it cannot be read (%s), "
                    "so lockstep's plugin cannot chain to it\n",
                    theirs, strerror(errno));
            return;
        }
        setenv("LOCKSTEP_PROFILER_CHAIN", theirs, 1);
    }
    setenv("NCCL_PROFILER_PLUGIN", plugin, 1);
}

static pid_t start_job(char **cmd, const char *shim, const char *dir, int signal_stacks)
{
    char plugin[PATH_MAX];
    int have_plugin = find_plugin(shim, plugin, sizeof(plugin)) == 0;
    /* LOCKSTEP_PRELOAD=0: NCCL is reached through the profiler plugin only (a job whose NCCL is
     * linked statically behaves so anyway; docs/live.md). */
    int preload_shim = setting_on(SET_PRELOAD);
    char preload[8192];
    const char *old = getenv("LD_PRELOAD");
    snprintf(preload, sizeof(preload), "%s%s%s", shim, old && *old ? ":" : "", old ? old : "");
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "lockstep: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        sigaction(SIGPIPE, &caller_sigpipe, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (preload_shim)
            setenv("LD_PRELOAD", preload, 1);
        if (have_plugin)
            set_profiler_plugin(plugin);
        setenv("LOCKSTEP_DIR", dir, 1);
        if (signal_stacks) { /* the shim's in-process sampler, asked for (docs/live.md) */
            char sig[16];
            snprintf(sig, sizeof(sig), "%d", SIGRTMAX - 3);
            setenv("LOCKSTEP_STACK_SIGNAL", sig, 0);
        }
        execvp(cmd[0], cmd);
        fprintf(stderr, "lockstep: cannot run %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* What `run` knows of its children: CMD, and the job's orphans it reaps. */
struct children {
    pid_t job;
    int job_status, job_done;
};

/* Waits for every child that has ended; CMD's status is kept. */
static void reap_children(struct children *c)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == c->job) {
            c->job_status = status;
            c->job_done = 1;
        }
}

/* Reads the process tree into `t` (zeroed) and marks the processes below this one that are the
 * job's (proctree_mark_own()): the marks (t->n of them, free() them), NULL when /proc cannot be
 * read or memory ran out. */
static unsigned char *scan_own(struct proc_table *t)
{
    unsigned char *marks = NULL;
    if (proctree_scan(t) == 0 && (marks = calloc(t->n + 1, 1)) != NULL)
        proctree_mark_own(t, marks);
    return marks;
}

/* True while a process of the job lives below this one (being the subreaper, every orphan of
 * the job is re-parented here); what the calling shell gave this process is not the job's. */
static int job_alive(void)
{
    struct proc_table t = {0};
    unsigned char *marks = scan_own(&t);
    int found = 0;
    for (size_t i = 0; marks && i < t.n && !found; i++)
        found = marks[i] && t.v[i].state != 'Z' && t.v[i].state != 'X';
    free(marks);
    proctree_free(&t);
    return found;
}

/* True when a process below this one runs with this run's LOCKSTEP_DIR in its environment:
 * a rank of the job that has not made its trace yet (a slow start), or one between traces. */
static int job_member_alive(const char *dir)
{
    struct proc_table t = {0};
    unsigned char *marks = scan_own(&t);
    int found = 0;
    char want[4200];
    int wlen = snprintf(want, sizeof(want), "LOCKSTEP_DIR=%s", dir);
    if (marks) {
        for (size_t i = 0; i < t.n && !found; i++) {
            if (!marks[i] || t.v[i].state == 'Z')
                continue;
            char path[64], env[65536];
            snprintf(path, sizeof(path), "/proc/%d/environ", (int)t.v[i].pid);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            ssize_t n = fd >= 0 ? read(fd, env, sizeof(env) - 1) : -1;
            if (fd >= 0)
                close(fd);
            for (ssize_t at = 0; n > 0 && at < n && !found;) { /* NUL-separated entries */
                size_t len = strnlen(env + at, (size_t)(n - at));
                found = len == (size_t)wlen && memcmp(env + at, want, len) == 0;
                at += (ssize_t)len + 1;
            }
        }
    }
    free(marks);
    proctree_free(&t);
    return found;
}

/* The job's status from its traces: the first failure's (exit status, or 128 + the signal
 * that killed it), 0 when every traced process ended well. */
static int traced_status(const struct monitor *m)
{
    int rc = 0;
    uint64_t first = UINT64_MAX;
    for (size_t i = 0; i < m->n; i++) {
        const struct ls_header *h = &m->t[i].h;
        int code = h->end_kind == LS_END_SIGNALED ? 128 + (int)h->end_signal
                   : h->end_kind == LS_END_EXITED || h->end_kind == LS_END_UNDERSCORE_EXIT
                       ? (int)h->end_status
                       : 0;
        if (code != 0 && h->end_ns < first) {
            first = h->end_ns;
            rc = code;
        }
    }
    return rc;
}

/* Lists the pids below this process on `out` (", "-separated); returns how many. */
static size_t list_descendants(FILE *out, const struct monitor *m, int traced)
{
    size_t n = 0;
    if (traced) {
        for (size_t i = 0; i < m->n; i++)
            if (m->t[i].running_here)
                fprintf(out, "%s%d", n++ ? ", " : "", m->t[i].h.pid);
        return n;
    }
    struct proc_table t = {0};
    unsigned char *marks = scan_own(&t);
    if (marks) {
        for (size_t i = 0; i < t.n; i++)
            if (marks[i] && t.v[i].state != 'Z')
                fprintf(out, "%s%d (%s)", n++ ? ", " : "", t.v[i].pid, t.v[i].comm);
    }
    free(marks);
    proctree_free(&t);
    return n;
}

/* CMD ended while processes of its job run on: say so, once. Names every process below
 * `run` (a rank may not have made its trace yet: a slow start) and how many are traced. */
static void announce_orphans(const char *cmd, const struct children *c, const struct monitor *m)
{
    char *pids = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&pids, &len);
    if (!f)
        return;
    size_t n = list_descendants(f, m, 0), traced = monitor_running(m);
    if (n == 0) /* re-parented elsewhere (no subreaper): the traces name them */
        n = list_descendants(f, m, 1);
    fclose(f);
    fprintf(stderr,
            "lockstep: %s exited (status %d) but %zu %s of its job still %s (pids %s; %zu "
            "traced): watching them until they end\n",
            cmd, exit_code(c->job_status), n, n == 1 ? "process" : "processes",
            n == 1 ? "runs" : "run", pids, traced);
    free(pids);
}

/* After the job: says which processes it left behind that were never traced (left alone). */
static void mention_untraced(void)
{
    char *pids = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&pids, &len);
    if (!f)
        return;
    size_t n = list_descendants(f, NULL, 0);
    fclose(f);
    if (n)
        fprintf(stderr,
                "lockstep: the job ended, and %zu %s it started %s on untraced (pids %s): left "
                "alone\n",
                n, n == 1 ? "process" : "processes", n == 1 ? "runs" : "run", pids);
    free(pids);
}

/* Passes a signal lockstep got on to the job: to CMD's process group while CMD runs, else to
 * the traced processes that outlived it. */
static void forward_signal(int sig, const struct children *c, struct monitor *m)
{
    if (!c->job_done) {
        kill(-c->job, sig);
        return;
    }
    monitor_poll(m);
    for (size_t i = 0; i < m->n; i++)
        if (m->t[i].running_here)
            kill(m->t[i].h.pid, sig);
}

int cmd_run(int argc, char **argv)
{
    struct run_opts ro = {0};
    live_opts_init(&ro.o);
    /* The options end at CMD, whose own options are its own. */
    int parsed = command_parse(&run_help, &argc, argv, &ro);
    if (parsed >= 0)
        return parsed;
    struct live_opts o = ro.o;
    const char *given_dir = ro.dir;
    if (optind < argc && strcmp(argv[optind - 1], "--") != 0) {
        fprintf(stderr,
                "lockstep run: the command to run goes after '--': lockstep run [OPTIONS] -- %s\n",
                argv[optind]);
        return 2;
    }
    if (optind >= argc)
        return command_usage_error(&run_help, "no command to run after '--'");
    char **cmd = argv + optind;
    if (live_check_bounds(&o) < 0 || live_check_json(&o) < 0 || live_start_log(&o) < 0)
        return 2;

    char shim[PATH_MAX];
    struct run_dir d;
    if (find_shim(shim, sizeof(shim)) < 0 || run_dir_open(&d, given_dir) < 0)
        return 2;
    const char *dir = d.path;
    char bounds[160];
    live_bounds_words(&o, bounds, sizeof(bounds));
    fprintf(stderr, "lockstep: tracing %s into %s (%s)\n", cmd[0], dir, bounds);
    struct monitor m;
    if (monitor_init(&m, dir) < 0)
        return 2;
    monitor_set_stall(&m, mon_bounds_least(&o.bounds));
    struct gather g;
    if (gather_init(&g, dir) < 0) {
        monitor_free(&m);
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = remember_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* A reader of run's output that went away (`| head -1`, a closed terminal, a process
     * substitution stopped) must not cost the result: writes fail with EPIPE instead. */
    struct sigaction ign;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &caller_sigpipe);
    /* Children it has already (a process substitution of the calling shell) are not the job. */
    proctree_note_inherited();

    /* Orphans of the job (a launcher that backgrounds its ranks and exits, a double fork,
     * setsid) are re-parented here: run waits for them and can stop them. */
    if (proctree_become_subreaper() < 0)
        fprintf(stderr,
                "lockstep: cannot become the reaper of the job's orphans (%s): ranks "
                "that leave the process tree are watched through their traces only\n",
                strerror(errno));
    struct children c = {0};
    c.job = start_job(cmd, shim, dir, o.signal_stacks);
    if (c.job < 0)
        return 2;
    int announced = 0, rc, stopped_interrupted = 0;
    uint64_t done_ms = 0, started_ms = timefmt_mono_ns() / 1000000ull, interrupted_ms = 0;
    struct live_slow_said slow_said = {0};
    for (;;) {
        reap_children(&c);
        if (forwarded_signal) {
            int sig = forwarded_signal;
            forwarded_signal = 0;
            if (!interrupted_ms && interrupt_sig) {
                interrupted_ms = timefmt_mono_ns() / 1000000ull;
                fprintf(stderr,
                        "lockstep: %s: passed on to the job; what is left of it in %.0f s is "
                        "stopped (at once on a second one)\n",
                        names_signal(interrupt_sig), RUN_INTERRUPT_WAIT_MS / 1000.0);
                live_mark_interrupt(&m, "run", interrupt_sig,
                                    (double)(interrupted_ms - started_ms) / 1000.0);
            }
            forward_signal(sig, &c, &m);
        }
        /* Ranks that ignore the interrupt (those a shell started with '&' ignore SIGINT) are
         * stopped, the way a stall stops them. */
        if (interrupted_ms && !stopped_interrupted &&
            (interrupts > 1 ||
             timefmt_mono_ns() / 1000000ull - interrupted_ms >= RUN_INTERRUPT_WAIT_MS) &&
            (!c.job_done || monitor_running(&m) > 0)) {
            stopped_interrupted = 1;
            struct stop_job sj = {.launcher = c.job_done ? 0 : c.job, .own_children = 1, .job = -1};
            live_stop_interrupted(&m, &o, &sj);
            reap_children(&c);
            /* job_stop() waited for CMD itself: it is gone, ended by the stop. */
            if (!c.job_done && kill(c.job, 0) != 0) {
                c.job_done = 1;
                c.job_status = W_EXITCODE(0, SIGTERM);
            }
        }
        monitor_poll(&m);
        if (c.job_done) {
            /* Over when no traced process runs, and no process of the job that is still to
             * make its trace (one carrying this run's LOCKSTEP_DIR, waited for up to
             * RUN_UNTRACED_WAIT_S after CMD ended); before any trace exists, when nothing CMD
             * started runs either. */
            if (!done_ms)
                done_ms = (timefmt_mono_ns() / 1000000ull);
            if (monitor_running(&m) == 0 && (m.n > 0 || !job_alive()) &&
                ((timefmt_mono_ns() / 1000000ull) - done_ms > RUN_UNTRACED_WAIT_S * 1000 ||
                 !job_member_alive(dir)))
                break;
            if (!announced)
                announce_orphans(cmd[0], &c, &m);
            announced = 1;
        }
        struct mon_stall stall;
        uint64_t now = timefmt_mono_ns();
        int stalled =
            !interrupted_ms && monitor_find_stall_beside(&m, &o.bounds, now, NULL, &stall) > 0;
        if (!stalled && !interrupted_ms) {
            struct mon_stall slow;
            int found = monitor_find_slow(&m, &o.bounds, now, NULL, &slow) > 0;
            live_announce_slow(&m, found ? &slow : NULL, &slow_said);
            mon_stall_free(&slow);
        }
        if (stalled || (!interrupted_ms && gather_stall_elsewhere(&g, &m))) {
            if (stalled)
                live_announce_stall(&stall);
            else
                fprintf(stderr, "lockstep: another node saw the job stall: diagnosing\n");
            const char *where = gather_on_stall(&g, &m);
            if (where)
                live_diagnose(where, &o, where == dir, 1, stalled ? &stall : NULL);
            gather_release(&g);
            struct stop_job sj = {.launcher = c.job_done ? 0 : c.job, .own_children = 1, .job = -1};
            live_stop(&m, &o, &sj, c.job_done ? cmd[0] : NULL, "run", stalled ? &stall : NULL);
            mon_stall_free(&stall);
            monitor_free(&m);
            gather_free(&g);
            run_dir_close(&d);
            return RUN_STALL_EXIT;
        }
        live_sleep_ms(RUN_POLL_MS);
    }
    rc = exit_code(c.job_status);
    /* CMD did not wait for its ranks: their ends are the job's status. */
    if (announced && rc == 0)
        rc = traced_status(&m);
    if (interrupted_ms) {
        rc = 128 + interrupt_sig;
        fprintf(stderr, "lockstep: the job was interrupted (%s) after %.0f s\n",
                names_signal(interrupt_sig), (double)(interrupted_ms - started_ms) / 1000.0);
    }
    mention_untraced();
    monitor_poll(&m);
    const char *where = gather_on_end(&g, &m);
    int failed = rc != 0 || traced_status(&m) != 0; /* a rank crashed, even if CMD was fine */
    if (where && (failed || o.files.n)) {
        if (failed)
            fprintf(stderr, "lockstep: the job ended with status %d: post-mortem diagnosis\n", rc);
        live_diagnose(where, &o, 0, failed, NULL); /* a clean run only writes the report files */
    }
    gather_release(&g);
    monitor_free(&m);
    gather_free(&g);
    run_dir_close(&d);
    return rc;
}
