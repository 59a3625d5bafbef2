/* cmd_run.c -- `lockstep run [--dir DIR] [--stall S] [--json FILE] [--format text|github]
 * -- CMD...`: runs a job under the shim, notices a stall, diagnoses it live, stops the job and
 * exits 3; otherwise exits with the job's own status. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "commands.h"
#include "gather.h"
#include "live_cmd.h"

#define RUN_STALL_EXIT 3

static volatile sig_atomic_t forwarded_signal;

static void remember_signal(int sig)
{
    forwarded_signal = sig;
}

static int usage_full(FILE *f, int rc)
{
    fprintf(f,
            "usage: lockstep run [--dir DIR] [--stall SECONDS] [--json FILE] [--format text|github]"
            " -- CMD [ARG...]\n"
            "  runs CMD with the lockstep shim preloaded; when for SECONDS (default 300) no rank\n"
            "  entered or left an NCCL call while some rank waits, it diagnoses the live job,\n"
            "  stops it and exits 3. Otherwise it exits with CMD's own status.\n"
            "  --dir DIR        trace folder (default: a fresh one under /dev/shm/lockstep-UID)\n"
            "  --json FILE      also write the JSON report there\n"
            "  --format github  also print ::error annotations at the divergent call sites\n"
            "  environment: LOCKSTEP_SHIM (the shim), LOCKSTEP_GATHER_DIR (multi-node gather)\n");
    return rc;
}

/* Finds liblockstep.so: LOCKSTEP_SHIM, else next to this binary in the build tree
 * (build/analyzer/lockstep -> build/shim/) or the install tree (bin/ -> lib/). */
static int find_shim(char *out, size_t len)
{
    const char *env = getenv("LOCKSTEP_SHIM");
    if (env && *env) {
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
    static const char *const rel[] = {"../shim/liblockstep.so",
                                      "../lib/liblockstep.so",
                                      "../lib64/liblockstep.so",
                                      "../lib/x86_64-linux-gnu/liblockstep.so",
                                      "../lib/aarch64-linux-gnu/liblockstep.so",
                                      "liblockstep.so",
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
    fprintf(stderr,
            "lockstep: cannot find liblockstep.so next to %s (looked in ../shim, ../lib); set "
            "LOCKSTEP_SHIM\n",
            self);
    return -1;
}

/* A trace folder of our own: DIR as given (created 0700), or a fresh one under the per-user
 * default folder. */
static int make_dir(const char *given, char *out, size_t len)
{
    if (given) {
        if (mkdir(given, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "lockstep: cannot create %s: %s\n", given, strerror(errno));
            return -1;
        }
        snprintf(out, len, "%s", given);
        return 0;
    }
    char base[256];
    snprintf(base, sizeof(base), "/dev/shm/lockstep-%u", (unsigned)getuid());
    if (mkdir(base, 0700) != 0 && errno != EEXIST)
        snprintf(base, sizeof(base), "/tmp");
    snprintf(out, len, "%s/run-XXXXXX", base);
    if (!mkdtemp(out)) {
        fprintf(stderr, "lockstep: cannot create a trace folder in %s: %s\n", base,
                strerror(errno));
        return -1;
    }
    return 0;
}

static pid_t start_job(char **cmd, const char *shim, const char *dir)
{
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
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        setenv("LD_PRELOAD", preload, 1);
        setenv("LOCKSTEP_DIR", dir, 1);
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

/* True when a trace of the folder records a crash (a fatal signal) or a failed exit. */
static int job_failed(struct monitor *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const struct ls_header *h = &m->t[i].h;
        if (h->end_kind == LS_END_SIGNALED ||
            ((h->end_kind == LS_END_EXITED || h->end_kind == LS_END_UNDERSCORE_EXIT) &&
             h->end_status != 0))
            return 1;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    struct live_opts o = {300, NULL, 0};
    const char *given_dir = NULL;
    int i;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int r = live_parse_option(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            given_dir = argv[++i];
        else if (strncmp(argv[i], "--dir=", 6) == 0)
            given_dir = argv[i] + 6;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage_full(stdout, 0);
        else {
            fprintf(stderr, "lockstep run: unknown option '%s'\n", argv[i]);
            return usage_full(stderr, 2);
        }
    }
    if (i >= argc - 1)
        return usage_full(stderr, 2);
    char **cmd = argv + i + 1;

    char shim[PATH_MAX], dir[PATH_MAX];
    if (find_shim(shim, sizeof(shim)) < 0 || make_dir(given_dir, dir, sizeof(dir)) < 0)
        return 2;
    fprintf(stderr, "lockstep: tracing %s into %s (stall after %g s without progress)\n", cmd[0],
            dir, o.stall_s);
    struct monitor m;
    if (monitor_init(&m, dir) < 0)
        return 2;
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

    pid_t job = start_job(cmd, shim, dir);
    if (job < 0)
        return 2;
    int status = 0, rc;
    for (;;) {
        pid_t w = waitpid(job, &status, WNOHANG);
        if (w == job)
            break;
        if (forwarded_signal) {
            kill(-job, forwarded_signal);
            forwarded_signal = 0;
        }
        monitor_poll(&m);
        char why[256];
        int outstanding = monitor_outstanding(&m, why, sizeof(why));
        int stalled = outstanding && monitor_idle_s(&m) >= o.stall_s;
        if (stalled || gather_stall_elsewhere(&g, &m)) {
            if (stalled)
                fprintf(stderr,
                        "lockstep: no progress for %.1f s while %s: diagnosing the live job\n",
                        monitor_idle_s(&m), why);
            else
                fprintf(stderr, "lockstep: another node saw the job stall: diagnosing\n");
            const char *where = gather_on_stall(&g, &m);
            if (where)
                live_diagnose(where, &o, where == dir, 1);
            gather_release(&g);
            live_stop(&m, job, 5.0);
            while (waitpid(job, &status, 0) < 0 && errno == EINTR)
                ;
            fprintf(stderr, "lockstep: stopped the job (traces in %s)\n", dir);
            monitor_free(&m);
            gather_free(&g);
            return RUN_STALL_EXIT;
        }
        live_sleep_ms(200);
    }
    rc = exit_code(status);
    monitor_poll(&m);
    const char *where = gather_on_end(&g, &m);
    int failed = rc != 0 || job_failed(&m);
    if (where && (failed || o.json_path)) {
        if (failed)
            fprintf(stderr, "lockstep: the job ended with status %d: post-mortem diagnosis\n", rc);
        live_diagnose(where, &o, 0, failed); /* a clean run only writes the JSON file */
    }
    gather_release(&g);
    monitor_free(&m);
    gather_free(&g);
    return rc;
}
