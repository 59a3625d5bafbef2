/* cmd_watch.c -- `lockstep watch [--stall S] [--json FILE] [--format text|github] [--kill]
 * DIR`: watches a job started elsewhere (LD_PRELOAD set by hand) through its trace folder;
 * on a stall it diagnoses the live job (and stops it with --kill) and exits 3; when every
 * traced process has ended it gives the post-mortem diagnosis. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "live_cmd.h"

#define WATCH_STALL_EXIT 3

static int usage_full(FILE *f, int rc)
{
    fprintf(f, "usage: lockstep watch [--stall SECONDS] [--json FILE] [--format text|github] "
               "[--kill] [--grace SECONDS] [--signal-stacks] DIR\n"
               "  watches the traces in DIR of a job started with LD_PRELOAD=liblockstep.so\n"
               "  and LOCKSTEP_DIR=DIR; when for SECONDS (default 300) no rank entered or left an\n"
               "  NCCL call while some rank waits, it diagnoses the live job and exits 3 (--kill\n"
               "  also stops its processes). When every traced process has ended it prints the\n"
               "  post-mortem diagnosis and exits 0 (nothing found) or 1 (findings).\n"
               "  --grace SECONDS  with --kill: how long the ranks get after SIGTERM, and their\n"
               "                   left-over processes after that, before SIGKILL (default 5,\n"
               "                   or LOCKSTEP_STOP_GRACE)\n"
               "  --signal-stacks  where ptrace is refused, ask the shim for live stacks with its\n"
               "                   signal (the job must run with LOCKSTEP_STACK_SIGNAL set)\n");
    return rc;
}

int cmd_watch(int argc, char **argv)
{
    struct live_opts o;
    live_opts_init(&o);
    int kill_job = 0, i;
    const char *dir = NULL;
    for (i = 1; i < argc; i++) {
        int r = live_parse_option(&o, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (strcmp(argv[i], "--kill") == 0)
            kill_job = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage_full(stdout, 0);
        else if (argv[i][0] == '-' || dir) {
            fprintf(stderr, "lockstep watch: unexpected argument '%s'\n", argv[i]);
            return usage_full(stderr, 2);
        } else
            dir = argv[i];
    }
    if (!dir) {
        fprintf(stderr, "lockstep watch: no trace folder given\n");
        return usage_full(stderr, 2);
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "lockstep watch: %s: %s (start the job with LOCKSTEP_DIR=%s, or make the "
                "folder first)\n",
                dir, stat(dir, &st) != 0 ? strerror(errno) : "not a folder", dir);
        return 2;
    }
    if (live_check_json(&o) < 0)
        return 2;
    struct monitor m;
    if (monitor_init(&m, dir) < 0)
        return 2;
    fprintf(stderr, "lockstep: watching %s (stall after %g s without progress)\n", dir, o.stall_s);
    int rc;
    for (;;) {
        monitor_poll(&m);
        /* Over: traces exist, none of their processes runs, nothing moved for a second (a
         * launcher may still be starting ranks). */
        if (m.n > 0 && monitor_running(&m) == 0 && monitor_idle_s(&m) >= 1.0) {
            fprintf(stderr, "lockstep: every traced process has ended: post-mortem diagnosis\n");
            int n = live_diagnose(dir, &o, 0, 1);
            rc = n < 0 ? 2 : n > 0 ? 1 : 0;
            break;
        }
        char why[256];
        if (monitor_outstanding(&m, why, sizeof(why)) && monitor_idle_s(&m) >= o.stall_s) {
            fprintf(stderr, "lockstep: no progress for %.1f s while %s: diagnosing the live job\n",
                    monitor_idle_s(&m), why);
            live_diagnose(dir, &o, 1, 1);
            if (kill_job) {
                struct stop_job job = {0};
                live_stop(&m, &o, &job, NULL);
            }
            rc = WATCH_STALL_EXIT;
            break;
        }
        live_sleep_ms(200);
    }
    monitor_free(&m);
    return rc;
}
