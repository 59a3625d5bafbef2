/* launch_ranks.c -- start N ranks of a program as torchrun would, wait, report, time out, clean up.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANK_VARS 8

enum rank_state { R_RUNNING = 0, R_EXITED, R_SIGNALED, R_TIMEDOUT };

struct rank {
    pid_t pid;
    int state;
    int value; /* exit status or signal number */
};

static struct rank *ranks;
static int nranks = 1;
static volatile sig_atomic_t forward_sig;

static void usage(void)
{
    fprintf(stderr,
            "usage: launch-ranks [--np N] [--timeout SECONDS] [--kill-signal SIG]\n"
            "                    [--idfile PATH] [--env-rank-var NAME]... [--fail-fast]\n"
            "                    [--rank-offset K --world-size W] -- PROGRAM [ARGS...]\n"
            "  --fail-fast      when a rank fails, stop the others (SIGTERM, then SIGKILL), as\n"
            "                   torchrun does; exit with the first failure's status\n"
            "  --rank-offset K  this launcher runs global ranks K..K+N-1 of a job of\n"
            "  --world-size W   W ranks (one launcher per simulated node)\n");
    exit(2);
}

static int parse_signal(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {
        {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"QUIT", SIGQUIT},
        {"ABRT", SIGABRT}, {"HUP", SIGHUP},   {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
        {"SEGV", SIGSEGV}, {"ALRM", SIGALRM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},
    };
    char *end;
    long v = strtol(s, &end, 10);
    if (*s && !*end && v > 0 && v < NSIG)
        return (int)v;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].sig;
    return -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_signal(int sig)
{
    forward_sig = sig;
}

static void setenv_int(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* Remove /dev/shm/<prefix>* (segments of this job's emulator communicators). */
static void remove_segments(const char *prefix)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    size_t n = strlen(prefix);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, n) != 0)
            continue;
        char path[512];
        snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* Remove our temporary id directory and the id files the ranks wrote in it. */
static void remove_tmpdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int reap(pid_t pid, int status)
{
    for (int r = 0; r < nranks; r++) {
        if (ranks[r].pid != pid || ranks[r].state != R_RUNNING)
            continue;
        if (WIFEXITED(status)) {
            ranks[r].state = R_EXITED;
            ranks[r].value = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
            ranks[r].state = R_SIGNALED;
            ranks[r].value = WTERMSIG(status);
        } else {
            return -1;
        }
        return r;
    }
    return -1;
}

int main(int argc, char **argv)
{
    double timeout = 0;
    int kill_sig = SIGKILL;
    const char *idfile = NULL;
    const char *rank_vars[MAX_RANK_VARS];
    int nrank_vars = 0, fail_fast = 0, rank_offset = 0, world_size = 0;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--fail-fast") == 0) {
            fail_fast = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (strcmp(a, "--np") == 0) {
            nranks = atoi(argv[++i]);
            if (nranks < 1 || nranks > 4096)
                usage();
        } else if (strcmp(a, "--timeout") == 0) {
            timeout = atof(argv[++i]);
        } else if (strcmp(a, "--kill-signal") == 0) {
            kill_sig = parse_signal(argv[++i]);
            if (kill_sig < 0)
                usage();
        } else if (strcmp(a, "--idfile") == 0) {
            idfile = argv[++i];
        } else if (strcmp(a, "--rank-offset") == 0) {
            rank_offset = atoi(argv[++i]);
            if (rank_offset < 0)
                usage();
        } else if (strcmp(a, "--world-size") == 0) {
            world_size = atoi(argv[++i]);
            if (world_size < 1)
                usage();
        } else if (strcmp(a, "--env-rank-var") == 0) {
            if (nrank_vars == MAX_RANK_VARS)
                usage();
            rank_vars[nrank_vars++] = argv[++i];
        } else {
            usage();
        }
    }
    if (i >= argc)
        usage();
    char **prog = &argv[i];

    char tag[32], prefix[64], tmpdir[4000] = "", idpath[4096];
    snprintf(tag, sizeof(tag), "%d", (int)getpid());
    snprintf(prefix, sizeof(prefix), "lsemu-%s-", tag);
    if (!idfile) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/launch-ranks-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "launch-ranks: mkdtemp: %s\n", strerror(errno));
            return 2;
        }
        snprintf(idpath, sizeof(idpath), "%s/id", tmpdir);
        idfile = idpath;
    }
    setenv("LOCKSTEP_TEST_IDFILE", idfile, 1);
    setenv("LOCKSTEP_EMU_TAG", tag, 1);
    if (world_size == 0)
        world_size = rank_offset + nranks;
    if (rank_offset + nranks > world_size)
        usage();
    setenv_int("WORLD_SIZE", world_size);
    setenv_int("LOCAL_WORLD_SIZE", nranks);

    ranks = calloc((size_t)nranks, sizeof(*ranks));
    if (!ranks)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    pid_t pgid = 0;
    fflush(NULL);
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "launch-ranks: fork: %s\n", strerror(errno));
            if (pgid)
                kill(-pgid, SIGKILL);
            return 2;
        }
        if (pid == 0) {
            setpgid(0, pgid);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            setenv_int("RANK", rank_offset + r);
            setenv_int("LOCAL_RANK", r);
            for (int v = 0; v < nrank_vars; v++)
                setenv_int(rank_vars[v], rank_offset + r);
            execvp(prog[0], prog);
            fprintf(stderr, "launch-ranks: exec %s: %s\n", prog[0], strerror(errno));
            _exit(127);
        }
        setpgid(pid, pgid); /* also in the parent: no race with the child */
        if (!pgid)
            pgid = pid;
        ranks[r].pid = pid;
    }

    int first_bad = 0, running = nranks, timed_out = 0, stopping = 0;
    double deadline = timeout > 0 ? now_s() + timeout : 0, stop_deadline = 0;
    while (running > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            int r = reap(pid, status);
            if (r >= 0) {
                running--;
                int code = ranks[r].state == R_EXITED ? ranks[r].value : 128 + ranks[r].value;
                if (code != 0 && first_bad == 0)
                    first_bad = code;
                if (code != 0 && fail_fast && !stopping) {
                    /* One rank failed: the job is over, as torchrun decides. */
                    stopping = 1;
                    stop_deadline = now_s() + 5.0;
                    for (int k = 0; k < nranks; k++)
                        if (ranks[k].state == R_RUNNING)
                            kill(ranks[k].pid, SIGTERM);
                }
            }
            continue;
        }
        if (stopping && now_s() > stop_deadline) {
            for (int k = 0; k < nranks; k++)
                if (ranks[k].state == R_RUNNING)
                    kill(ranks[k].pid, SIGKILL);
            stop_deadline = now_s() + 60.0;
        }
        if (pid < 0 && errno == ECHILD)
            break;
        if (forward_sig) {
            for (int r = 0; r < nranks; r++)
                if (ranks[r].state == R_RUNNING)
                    kill(ranks[r].pid, forward_sig);
            forward_sig = 0;
        }
        if (deadline > 0 && now_s() >= deadline) {
            timed_out = 1;
            for (int r = 0; r < nranks; r++)
                if (ranks[r].state == R_RUNNING)
                    kill(ranks[r].pid, kill_sig);
            double grace = now_s() + 5.0;
            while (running > 0) {
                pid = waitpid(-1, &status, WNOHANG);
                if (pid > 0) {
                    int r = reap(pid, status);
                    if (r >= 0) {
                        running--;
                        ranks[r].state = R_TIMEDOUT;
                    }
                    continue;
                }
                if (pid < 0 && errno == ECHILD)
                    break;
                if (now_s() > grace) { /* the signal was ignored: insist */
                    for (int r = 0; r < nranks; r++)
                        if (ranks[r].state == R_RUNNING)
                            kill(ranks[r].pid, SIGKILL);
                    grace = now_s() + 60.0;
                }
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            break;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }

    for (int r = 0; r < nranks; r++) {
        switch (ranks[r].state) {
        case R_EXITED:
            fprintf(stderr, "rank %d: exited %d\n", rank_offset + r, ranks[r].value);
            break;
        case R_SIGNALED:
            fprintf(stderr, "rank %d: killed by signal %d\n", rank_offset + r, ranks[r].value);
            break;
        case R_TIMEDOUT:
            fprintf(stderr, "rank %d: timed out\n", rank_offset + r);
            break;
        default:
            fprintf(stderr, "rank %d: lost\n", rank_offset + r);
            break;
        }
    }
    remove_segments(prefix);
    if (tmpdir[0])
        remove_tmpdir(tmpdir);
    if (timed_out)
        return 124;
    return first_bad;
}
