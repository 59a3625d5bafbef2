/* launch_ranks.c -- starts N ranks of a program the way torchrun, srun or mpirun would: rank
 * environment, fail-fast teardown, restarts, a timeout; then reports and cleans up. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../emulator/wait_board.h"

#define MAX_RANK_VARS 8
#define MAX_ENVS      16

enum rank_state { R_RUNNING = 0, R_EXITED, R_SIGNALED, R_TIMEDOUT };

struct rank {
    pid_t pid;
    int state;
    int value; /* exit status or signal number */
};

struct options {
    int nranks;
    double timeout;
    double stuck_s; /* stop the job once it made no progress this long (0: never) */
    int kill_sig;
    const char *idfile;
    const char *rank_vars[MAX_RANK_VARS];
    int nrank_vars;
    char *envs[MAX_ENVS];
    int nenvs;
    const char *dlopens[MAX_ENVS];
    int ndlopens;
    int fail_fast;
    int ff_sig;                   /* what the launcher sends the others after a failure */
    int ff_delay_lo, ff_delay_hi; /* ms between noticing the failure and signalling */
    double ff_grace;              /* s before SIGKILL follows */
    int monitor_ms;               /* how often the launcher looks at its children */
    int rank_offset, world_size;
    int *rank_list;  /* RANK of each process, when given (--ranks) */
    int *world_list; /* WORLD_SIZE of each process, when given (--world-sizes) */
    int nworld_list;
    int max_restarts;
    unsigned seed;
};

static struct rank *ranks;
static struct wait_slot *board; /* the emulator's marks, one slot per rank (--timeout and
                                 * --stop-when-stuck) */
static int board_fd = -1;

/* A timeout counts from the moment every rank has started (the emulator marked its slot at
 * load), not from the launch: on a loaded machine, or under qemu, starting 32 ranks takes seconds
 * of the few a test gives its job. A rank that never loads the emulator starts the clock
 * START_GRACE_S after the launch at the latest. */
#define START_GRACE_S 60.0
static double launched_at; /* now_s() of the launch */
static double started_at;  /* now_s() when every rank had started, 0 not yet */
static volatile sig_atomic_t forward_sig;
static volatile sig_atomic_t stop_now; /* SIGUSR1: stop the job as at its timeout, now */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: launch-ranks [--np N] [--timeout SECONDS] [--stop-when-stuck SECONDS]\n"
        "                    [--kill-signal SIG]\n"
        "                    [--idfile PATH] [--env-rank-var NAME]... [--env NAME=VALUE]...\n"
        "                    [--fail-fast] [--fail-fast-signal SIG] [--fail-fast-delay MS[-MS]]\n"
        "                    [--fail-fast-grace SECONDS] [--monitor-interval MS]\n"
        "                    [--max-restarts N] [--ranks R,R,...] [--seed S]\n"
        "                    [--rank-offset K --world-size W] [--world-sizes W,W,...]\n"
        "                    [--dlopen LIB]...\n"
        "                    -- PROGRAM [ARGS...]\n"
        "  --timeout S           stop the job S seconds after every rank has started (loaded\n"
        "                        NCCL: the emulator marks it), 60 s after the launch at latest\n"
        "  SIGUSR1 to the launcher stops the job as at its timeout, at once\n"
        "  --stop-when-stuck S   stop the job as at its timeout once no rank made progress\n"
        "                        in the emulator for S seconds while one waits in it\n"
        "  --fail-fast           when a rank fails, stop the others, as torchrun does; exit\n"
        "                        with the first failure's status\n"
        "  --fail-fast-signal    the signal for the others (default TERM; srun -K: KILL)\n"
        "  --fail-fast-delay     ms from noticing the failure to signalling (a range picks\n"
        "                        one at random, printed on stderr; default 0)\n"
        "  --fail-fast-grace     seconds before SIGKILL follows the signal (default 5)\n"
        "  --monitor-interval    ms between looks at the children: failures are noticed and\n"
        "                        dead ranks reaped only then (default 5)\n"
        "  --max-restarts N      after a failure, stop the others and start every rank again,\n"
        "                        up to N times (TORCHELASTIC_RESTART_COUNT, same run id)\n"
        "  --ranks R,R,...       the RANK of each process (a misconfigured launch); sets --np\n"
        "  --rank-offset K       this launcher runs global ranks K..K+N-1 of a job of\n"
        "  --world-size W        W ranks (one launcher per simulated node)\n"
        "  --world-sizes W,W,... the WORLD_SIZE of each process (a launch that gives some\n"
        "                        nodes the wrong one); as many as processes\n"
        "  --dlopen LIB          load LIB into the launcher first and call nothing in it, as\n"
        "                        torchrun's agent loads libtorch_cuda (libnccl, the CUDA "
        "driver)\n");
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

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void on_signal(int sig)
{
    forward_sig = sig;
}

/* SIGUSR1: a test saw the state it waited for (the ranks in a barrier, in a lock) and has the
 * job stopped now as its timeout would stop it: a stop that starts when the thing starts, not
 * a timer started at launch. */
static void on_stop(int sig)
{
    (void)sig;
    stop_now = 1;
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

static int reap(const struct options *o, pid_t pid, int status)
{
    for (int r = 0; r < o->nranks; r++) {
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

static int rank_of(const struct options *o, int r)
{
    return o->rank_list ? o->rank_list[r] : o->rank_offset + r;
}

static void signal_running(const struct options *o, int sig)
{
    for (int r = 0; r < o->nranks; r++)
        if (ranks[r].state == R_RUNNING)
            kill(ranks[r].pid, sig);
}

/* Parses the comma-separated integers of `list` into a new array *out; returns how many, or -1
 * when there are none or memory ran out. */
static int parse_int_list(const char *list, int **out)
{
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    *out = calloc((size_t)n, sizeof(int));
    char *copy = strdup(list), *save = NULL;
    if (!*out || !copy) {
        free(copy);
        return -1;
    }
    int i = 0;
    for (char *t = strtok_r(copy, ",", &save); t && i < n; t = strtok_r(NULL, ",", &save))
        (*out)[i++] = atoi(t);
    free(copy);
    return i > 0 ? i : -1;
}

static int parse_ranks(struct options *o, const char *list)
{
    o->nranks = parse_int_list(list, &o->rank_list);
    return o->nranks > 0 ? 0 : -1;
}

/* --world-sizes: every size at least 1. */
static int parse_world_sizes(struct options *o, const char *list)
{
    o->nworld_list = parse_int_list(list, &o->world_list);
    for (int i = 0; i < o->nworld_list; i++)
        if (o->world_list[i] < 1)
            return -1;
    return o->nworld_list > 0 ? 0 : -1;
}

static void parse_args(struct options *o, int argc, char **argv, int *prog_at)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--fail-fast") == 0) {
            o->fail_fast = 1;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (strcmp(a, "--np") == 0) {
            o->nranks = atoi(v);
            if (o->nranks < 1 || o->nranks > 4096)
                usage();
        } else if (strcmp(a, "--timeout") == 0) {
            o->timeout = atof(v);
        } else if (strcmp(a, "--stop-when-stuck") == 0) {
            o->stuck_s = atof(v);
        } else if (strcmp(a, "--kill-signal") == 0) {
            if ((o->kill_sig = parse_signal(v)) < 0)
                usage();
        } else if (strcmp(a, "--fail-fast-signal") == 0) {
            if ((o->ff_sig = parse_signal(v)) < 0)
                usage();
            o->fail_fast = 1;
        } else if (strcmp(a, "--fail-fast-delay") == 0) {
            if (sscanf(v, "%d-%d", &o->ff_delay_lo, &o->ff_delay_hi) == 1)
                o->ff_delay_hi = o->ff_delay_lo;
            if (o->ff_delay_lo < 0 || o->ff_delay_hi < o->ff_delay_lo)
                usage();
            o->fail_fast = 1;
        } else if (strcmp(a, "--fail-fast-grace") == 0) {
            o->ff_grace = atof(v);
        } else if (strcmp(a, "--monitor-interval") == 0) {
            o->monitor_ms = atoi(v);
            if (o->monitor_ms < 1)
                usage();
        } else if (strcmp(a, "--max-restarts") == 0) {
            o->max_restarts = atoi(v);
            if (o->max_restarts < 0)
                usage();
        } else if (strcmp(a, "--ranks") == 0) {
            if (parse_ranks(o, v) < 0)
                usage();
        } else if (strcmp(a, "--world-sizes") == 0) {
            if (parse_world_sizes(o, v) < 0)
                usage();
        } else if (strcmp(a, "--seed") == 0) {
            o->seed = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--idfile") == 0) {
            o->idfile = v;
        } else if (strcmp(a, "--rank-offset") == 0) {
            o->rank_offset = atoi(v);
            if (o->rank_offset < 0)
                usage();
        } else if (strcmp(a, "--world-size") == 0) {
            o->world_size = atoi(v);
            if (o->world_size < 1)
                usage();
        } else if (strcmp(a, "--env-rank-var") == 0) {
            if (o->nrank_vars == MAX_RANK_VARS)
                usage();
            o->rank_vars[o->nrank_vars++] = v;
        } else if (strcmp(a, "--dlopen") == 0) {
            if (o->ndlopens == MAX_ENVS)
                usage();
            o->dlopens[o->ndlopens++] = v;
        } else if (strcmp(a, "--env") == 0) {
            if (o->nenvs == MAX_ENVS || !strchr(v, '='))
                usage();
            o->envs[o->nenvs++] = (char *)v;
        } else {
            usage();
        }
    }
    if (i >= argc)
        usage();
    *prog_at = i;
}

/* The board of waiting ranks (--stop-when-stuck): a memory file every rank inherits, named to
 * the ranks by its descriptor and their slot (tests/emulator/wait_board.h). 0, or -1. */
static int board_create(const struct options *o)
{
    size_t size = sizeof(struct wait_slot) * (size_t)o->nranks;
    board_fd = memfd_create("lsemu-waits", 0);
    if (board_fd < 0 || ftruncate(board_fd, (off_t)size) != 0) {
        fprintf(stderr, "launch-ranks: wait board: %s\n", strerror(errno));
        return -1;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, board_fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "launch-ranks: wait board: %s\n", strerror(errno));
        return -1;
    }
    board = p;
    setenv_int(WAIT_BOARD_FD_ENV, board_fd);
    return 0;
}

#define WAITING_FRESH_NS 250000000LL /* a wait marked this recently: the rank still waits */

/* True when the job is stuck: every running rank has been in the emulator before, none made
 * progress there for --stop-when-stuck seconds, and one is still waiting there. */
static int job_stuck(const struct options *o)
{
    if (!board || o->stuck_s <= 0)
        return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t quiet = (int64_t)(o->stuck_s * 1e9);
    int waiting = 0;
    for (int r = 0; r < o->nranks; r++) {
        if (ranks[r].state != R_RUNNING)
            continue;
        int64_t p = atomic_load(&board[r].progress_ns), w = atomic_load(&board[r].waiting_ns);
        if (p == 0 || now - p < quiet)
            return 0;
        if (w && now - w < WAITING_FRESH_NS)
            waiting = 1;
    }
    return waiting;
}

/* The time at which the job's --timeout expires (0: none), from when every rank started. */
static double job_deadline(const struct options *o)
{
    if (o->timeout <= 0)
        return 0;
    if (!board)
        return launched_at + o->timeout;
    if (started_at == 0) {
        int all = 1;
        for (int r = 0; r < o->nranks && all; r++)
            all = ranks[r].state != R_RUNNING || atomic_load(&board[r].started_ns) != 0;
        double now = now_s();
        if (all || now - launched_at >= START_GRACE_S) {
            started_at = all ? now : launched_at + START_GRACE_S;
            if (!all)
                fprintf(stderr,
                        "launch-ranks: a rank had not loaded NCCL %g s after the "
                        "launch; the timeout counts from then\n",
                        START_GRACE_S);
        }
    }
    return (started_at ? started_at : now_s()) + o->timeout;
}

/* Starts every rank of one attempt. Returns 0, or -1 after killing what was started. */
static int spawn(const struct options *o, char **prog)
{
    pid_t pgid = 0;
    fflush(NULL);
    for (int r = 0; r < o->nranks; r++) {
        if (board) {
            atomic_store(&board[r].progress_ns, 0);
            atomic_store(&board[r].waiting_ns, 0);
        }
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "launch-ranks: fork: %s\n", strerror(errno));
            if (pgid)
                kill(-pgid, SIGKILL);
            return -1;
        }
        if (pid == 0) {
            setpgid(0, pgid);
            if (board)
                setenv_int(WAIT_BOARD_SLOT_ENV, r);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            setenv_int("RANK", rank_of(o, r));
            setenv_int("LOCAL_RANK", r);
            if (o->world_list)
                setenv_int("WORLD_SIZE", o->world_list[r]);
            for (int v = 0; v < o->nrank_vars; v++)
                setenv_int(o->rank_vars[v], rank_of(o, r));
            execvp(prog[0], prog);
            fprintf(stderr, "launch-ranks: exec %s: %s\n", prog[0], strerror(errno));
            _exit(127);
        }
        setpgid(pid, pgid); /* also in the parent: no race with the child */
        if (!pgid)
            pgid = pid;
        ranks[r] = (struct rank){pid, R_RUNNING, 0};
    }
    return 0;
}

/* The teardown after the first failure: `delay` ms, the fail-fast signal, SIGKILL after the
 * grace period. Returns when every rank is reaped. */
struct teardown {
    int active;
    double signal_at, kill_at;
    int signalled;
};

static void teardown_begin(const struct options *o, struct teardown *td, int failed_rank)
{
    int delay = o->ff_delay_lo;
    if (o->ff_delay_hi > o->ff_delay_lo)
        delay += rand() % (o->ff_delay_hi - o->ff_delay_lo + 1);
    td->active = 1;
    td->signal_at = now_s() + delay / 1000.0;
    td->kill_at = td->signal_at + o->ff_grace;
    td->signalled = 0;
    fprintf(stderr, "launch-ranks: rank %d failed; stopping the others with signal %d in %d ms\n",
            rank_of(o, failed_rank), o->ff_sig, delay);
}

static void teardown_step(const struct options *o, struct teardown *td)
{
    if (!td->active)
        return;
    double t = now_s();
    if (!td->signalled && t >= td->signal_at) {
        signal_running(o, o->ff_sig);
        td->signalled = 1;
    }
    if (td->signalled && t >= td->kill_at) {
        signal_running(o, SIGKILL);
        td->kill_at = t + 60.0;
    }
}

enum attempt_end { A_DONE, A_FAILED, A_TIMEDOUT };

/* Runs one attempt to its end. `first_bad` gets the first failure's status. */
static enum attempt_end run_attempt(const struct options *o, int *first_bad)
{
    int running = o->nranks;
    struct teardown td = {0};
    *first_bad = 0;
    while (running > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            int r = reap(o, pid, status);
            if (r < 0)
                continue;
            running--;
            int code = ranks[r].state == R_EXITED ? ranks[r].value : 128 + ranks[r].value;
            if (code != 0 && *first_bad == 0) {
                *first_bad = code;
                if ((o->fail_fast || o->max_restarts > 0) && !td.active)
                    teardown_begin(o, &td, r); /* the job is over, as torchrun decides */
            }
            continue;
        }
        if (pid < 0 && errno == ECHILD)
            break;
        teardown_step(o, &td);
        if (forward_sig) {
            signal_running(o, forward_sig);
            forward_sig = 0;
        }
        int stuck = job_stuck(o);
        if (stuck)
            fprintf(stderr, "launch-ranks: no rank made progress for %g s; stopping the job\n",
                    o->stuck_s);
        double deadline = job_deadline(o);
        if (stuck || stop_now || (deadline > 0 && now_s() >= deadline)) {
            signal_running(o, o->kill_sig);
            double grace = now_s() + 5.0;
            while (running > 0) {
                pid = waitpid(-1, &status, WNOHANG);
                if (pid > 0) {
                    int r = reap(o, pid, status);
                    if (r >= 0) {
                        running--;
                        ranks[r].state = R_TIMEDOUT;
                    }
                    continue;
                }
                if (pid < 0 && errno == ECHILD)
                    break;
                if (now_s() > grace) { /* the signal was ignored: insist */
                    signal_running(o, SIGKILL);
                    grace = now_s() + 60.0;
                }
                sleep_ms(5);
            }
            return A_TIMEDOUT;
        }
        /* Between looks the launcher does not wait(): a dead rank stays a zombie meanwhile. */
        int slept = 0;
        while (slept < o->monitor_ms && !forward_sig && !stop_now &&
               !(td.active && !td.signalled && now_s() >= td.signal_at)) {
            sleep_ms(o->monitor_ms - slept < 5 ? o->monitor_ms - slept : 5);
            slept += 5;
        }
    }
    return *first_bad ? A_FAILED : A_DONE;
}

static void report(const struct options *o, int attempt)
{
    char prefix[32] = "";
    if (o->max_restarts > 0)
        snprintf(prefix, sizeof(prefix), "attempt %d: ", attempt);
    for (int r = 0; r < o->nranks; r++) {
        int gr = rank_of(o, r);
        switch (ranks[r].state) {
        case R_EXITED:
            fprintf(stderr, "%srank %d: exited %d\n", prefix, gr, ranks[r].value);
            break;
        case R_SIGNALED:
            fprintf(stderr, "%srank %d: killed by signal %d\n", prefix, gr, ranks[r].value);
            break;
        case R_TIMEDOUT:
            fprintf(stderr, "%srank %d: timed out\n", prefix, gr);
            break;
        default:
            fprintf(stderr, "%srank %d: lost\n", prefix, gr);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    struct options o = {
        .nranks = 1, .kill_sig = SIGKILL, .ff_sig = SIGTERM, .ff_grace = 5.0, .monitor_ms = 5};
    int prog_at;
    o.seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    parse_args(&o, argc, argv, &prog_at);
    for (int i = 0; i < o.ndlopens; i++)
        if (!dlopen(o.dlopens[i], RTLD_NOW | RTLD_GLOBAL)) {
            fprintf(stderr, "launch-ranks: --dlopen %s: %s\n", o.dlopens[i], dlerror());
            return 2;
        }
    if (o.ndlopens) /* as the CUDA runtime finds the driver's entry points */
        (void)dlsym(RTLD_DEFAULT, "cuInit");
    char **prog = &argv[prog_at];
    srand(o.seed);

    char tag[32], prefix[64], tmpdir[4000] = "", idpath[4096];
    snprintf(tag, sizeof(tag), "%d", (int)getpid());
    snprintf(prefix, sizeof(prefix), "lsemu-%s-", tag);
    if (!o.idfile) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof(tmpdir), "%s/launch-ranks-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "launch-ranks: mkdtemp: %s\n", strerror(errno));
            return 2;
        }
        snprintf(idpath, sizeof(idpath), "%s/id", tmpdir);
        o.idfile = idpath;
    }
    setenv("LOCKSTEP_TEST_IDFILE", o.idfile, 1);
    setenv("LOCKSTEP_EMU_TAG", tag, 1);
    for (int e = 0; e < o.nenvs; e++)
        putenv(o.envs[e]);
    if (o.world_size == 0)
        o.world_size = o.rank_list ? o.nranks : o.rank_offset + o.nranks;
    if ((!o.rank_list && o.rank_offset + o.nranks > o.world_size) ||
        (o.world_list && o.nworld_list != o.nranks))
        usage();
    setenv_int("WORLD_SIZE", o.world_size);
    setenv_int("LOCAL_WORLD_SIZE", o.nranks);
    if (o.max_restarts > 0) {
        char run_id[64];
        snprintf(run_id, sizeof(run_id), "launch-%s", tag);
        setenv("TORCHELASTIC_RUN_ID", run_id, 0);
        setenv_int("TORCHELASTIC_MAX_RESTARTS", o.max_restarts);
    }

    ranks = calloc((size_t)o.nranks, sizeof(*ranks));
    if (!ranks)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_stop;
    sigaction(SIGUSR1, &sa, NULL);

    if ((o.stuck_s > 0 || o.timeout > 0) && board_create(&o) < 0)
        return 2;
    launched_at = now_s();
    int status = 0;
    enum attempt_end end = A_DONE;
    for (int attempt = 0;; attempt++) {
        if (o.max_restarts > 0)
            setenv_int("TORCHELASTIC_RESTART_COUNT", attempt);
        if (spawn(&o, prog) < 0)
            return 2;
        end = run_attempt(&o, &status);
        report(&o, attempt);
        if (end != A_FAILED || attempt >= o.max_restarts)
            break;
        fprintf(stderr, "launch-ranks: restarting every rank (attempt %d of %d)\n", attempt + 2,
                o.max_restarts + 1);
    }
    remove_segments(prefix);
    if (tmpdir[0])
        remove_tmpdir(tmpdir);
    free(ranks);
    free(o.rank_list);
    free(o.world_list);
    return end == A_TIMEDOUT ? 124 : status;
}
