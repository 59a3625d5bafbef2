/* cmd_watch.c -- `lockstep watch [--stall S] [--format NAME[=FILE]]... [--json FILE] [--kill]
 * DIR`: watches a job started elsewhere (LD_PRELOAD set by hand) through its trace folder;
 * on a stall it diagnoses the live job (and stops it with --kill) and exits 3; when every
 * traced process has ended it gives the post-mortem diagnosis. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "live_cmd.h"
#include "timefmt.h"

#define WATCH_STALL_EXIT 3

const struct command_help watch_help = {
    "watch",
    "[--stall SECONDS] [--format NAME[=FILE]]... [--json FILE] [--log FILE] [--kill] "
    "[--grace SECONDS] "
    "[--signal-stacks] DIR",
    "watch a job traced into DIR; on a stall diagnose it live and exit 3",
    "  watches the traces in DIR of a job started with LD_PRELOAD=liblockstep.so\n"
    "  and LOCKSTEP_DIR=DIR (DIR must exist; the job may start later); when for SECONDS\n"
    "  a job, or one communicator of it, made no progress while one of its ranks waits in\n"
    "  it (even while the rest trains on), it diagnoses the live job and exits 3. When\n"
    "  every traced process has ended it prints the post-mortem diagnosis.\n"
    "  --stall SECONDS  how long without progress is a stall (default 300)\n"
    "  --format NAME[=FILE]\n"
    "                   also write the report as NAME to FILE (checked before watching;\n"
    "                   written even when the job made no NCCL call); repeatable. No\n"
    "                   FILE: on stdout, text (the default) or github (::error\n"
    "                   annotations at the divergent call sites after the text)\n"
    "                   formats: " COMMAND_HELP_FORMATS "\n"
    "  --json FILE      the same as --format json=FILE\n"
    "  --log FILE       also write all that watch says (its messages and the report) to\n"
    "                   FILE as it says it, whatever becomes of the terminal or a pipe\n"
    "  --kill           on a stall also stop the traced processes\n"
    "  --grace SECONDS  with --kill: how long the ranks get after SIGTERM, and their\n"
    "                   left-over processes after that, before SIGKILL (default 5,\n"
    "                   or LOCKSTEP_STOP_GRACE)\n"
    "  --signal-stacks  where ptrace is refused, ask the shim for live stacks with its\n"
    "                   signal (the job must run with LOCKSTEP_STACK_SIGNAL set)\n"
    "  -h, --help       this help\n"
    "exit status: 0 nothing found, 1 findings (post-mortem), 2 bad input, 3 a stall was\n"
    "diagnosed\n"};

int cmd_watch(int argc, char **argv)
{
    struct live_opts o;
    live_opts_init(&o);
    int kill_job = 0, c;
    static const struct option options[] = {LIVE_LONG_OPTIONS,
                                            {"kill", no_argument, NULL, 'k'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        int r = live_set_option(&o, c, optarg);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (c == 'k')
            kill_job = 1;
        else if (c == 'h')
            return command_help(stdout, &watch_help, 0);
        else
            return command_bad_option(&watch_help, c, argv);
    }
    if (optind >= argc)
        return command_usage_error(&watch_help, "no trace folder given");
    if (argc - optind > 1)
        return command_usage_error(&watch_help, "one trace folder, not %d", argc - optind);
    const char *dir = argv[optind];
    struct stat st;
    int found = stat(dir, &st) == 0;
    if (!found || !S_ISDIR(st.st_mode)) {
        fprintf(stderr,
                "lockstep watch: %s: %s (start the job with LOCKSTEP_DIR=%s, or make the "
                "folder first)\n",
                dir, found ? "not a folder" : strerror(errno), dir);
        return 2;
    }
    if (live_check_json(&o) < 0 || live_start_log(&o) < 0)
        return 2;
    /* A reader of the report that went away (`| head -1`) must not cost the --json file or
     * the exit status: writes fail with EPIPE instead of killing watch. */
    signal(SIGPIPE, SIG_IGN);
    struct monitor m;
    if (monitor_init(&m, dir) < 0)
        return 2;
    monitor_set_stall(&m, o.stall_s);
    fprintf(stderr, "lockstep: watching %s (stall after %g s without progress)\n", dir, o.stall_s);
    int rc;
    for (;;) {
        monitor_poll(&m);
        /* Over: traces exist, none of their processes runs, nothing moved for a second (a
         * launcher may still be starting ranks). */
        if (m.n > 0 && monitor_running(&m) == 0 && monitor_idle_s(&m) >= 1.0) {
            fprintf(stderr, "lockstep: every traced process has ended: post-mortem diagnosis\n");
            int n = live_diagnose(dir, &o, 0, 1, NULL);
            rc = n < 0 ? 2 : n > 0 ? 1 : 0;
            break;
        }
        struct mon_stall stall;
        if (monitor_find_stall(&m, o.stall_s, timefmt_mono_ns(), &stall) > 0) {
            live_announce_stall(&stall);
            live_diagnose(dir, &o, 1, 1, &stall);
            if (kill_job) {
                struct stop_job job = {0};
                live_stop(&m, &o, &job, NULL, "watch", &stall);
            }
            mon_stall_free(&stall);
            rc = WATCH_STALL_EXIT;
            break;
        }
        live_sleep_ms(200);
    }
    monitor_free(&m);
    return rc;
}
