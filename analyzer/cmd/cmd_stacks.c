/* cmd_stacks.c -- `lockstep stacks [--json [FILE]] PATH...`: where every live rank of a traced job
 * is right now, each thread with its frames (native and Python), read from outside: nothing runs in
 * the ranks and their sleeps keep their length (live_threads.c). A look at a job that seems slow,
 * without diagnosing or stopping it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"
#include "json_writer.h"
#include "timefmt.h"

/* What the options say. */
struct stacks_opts {
    const char *json; /* --json's FILE, "-" stdout; NULL text */
};

/* --json [FILE]: as analyze's (alone or '-': stdout). */
static int take_json(void *ctx, const char *val)
{
    ((struct stacks_opts *)ctx)->json = val ? val : "-";
    return 0;
}

static const struct command_option stacks_options[] = {
    CMD_OPERAND("PATH", "trace files or folders, as for 'lockstep analyze'"),
    CMD_MAYBE("json", 0, "[FILE]",
              "write JSON instead of text, to FILE ('-' or alone: stdout); the next\n"
              "word is FILE when it is '-' or ends in .json, or give --json=FILE",
              "write JSON instead of text, to \\fIFILE\\fR (\\fB-\\fR or alone: standard "
              "output); the next word is \\fIFILE\\fR when it is \\fB-\\fR or ends in "
              "\\fB.json\\fR, or give \\fB\\-\\-json=\\fIFILE\\fR",
              take_json, command_json_file_next),
    CMD_END};

const struct command_help stacks_help = {
    "stacks",
    "PATH...",
    "show where every live rank of a traced job is now, each thread, without stopping it",
    "  prints where every rank of the traces in PATH (folders or files) that still runs on\n"
    "  this host is now: each thread, its state, the system call it waits in and its frames\n"
    "  (native and Python). The ranks are not stopped (a thread is held for microseconds at\n"
    "  most) and no code runs in them.\n",
    12,
    stacks_options,
    "exit status: 0 shown, 2 bad input\n",
    0};

static void print_thread(const struct m_live *lv, int i)
{
    const struct m_live_thread *t = &lv->threads[i];
    printf("  thread %u \"%s\" %c%s%s%s%s%s\n", t->tid, t->name, t->state,
           t->syscall[0] ? " in " : "", t->syscall, t->in_call ? ", inside an NCCL call" : "",
           i == lv->work_thread ? ", doing the work" : "", t->helper ? ", library thread" : "");
    if (t->python[0])
        printf("    python: %s\n", t->python);
    for (int k = 0; k < t->nframes; k++)
        printf("    #%-2d %s\n", k, t->frames[k]);
}

int cmd_stacks(int argc, char **argv)
{
    struct analysis a;
    memset(&a, 0, sizeof(a));
    int rc = 2;
    struct stacks_opts so = {0};
    int parsed = command_parse(&stacks_help, &argc, argv, &so);
    if (parsed >= 0)
        return parsed;
    FILE *out = stdout;
    int json = so.json != NULL;
    if (optind >= argc)
        return command_usage_error(&stacks_help, "no trace file or folder given");
    for (int i = optind; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto out;
    if (a.paths.n == 0) {
        fprintf(stderr, "lockstep stacks: no trace files (*.trace) in the given paths\n");
        goto out;
    }
    if (json && strcmp(so.json, "-") != 0 && !(out = fopen(so.json, "w"))) {
        fprintf(stderr, "lockstep stacks: cannot write --json %s: %s\n", so.json, strerror(errno));
        out = stdout;
        goto out;
    }
    uint64_t start_ns = timefmt_now_ns();
    size_t probed = live_probe(a.paths.v, a.paths.n, LIVE_SAMPLE_MS);
    if (analysis_load(&a, NULL) < 0)
        goto out;
    struct json_writer w;
    if (json) {
        json_init(&w, out);
        json_begin_object(&w, NULL);
        json_begin_array(&w, "ranks");
    }
    for (size_t i = 0; i < a.m->nprocs; i++) {
        const struct m_proc *p = &a.m->procs[i];
        const struct m_live *lv = p->live;
        /* Only what this probe saw: an older .live file describes a process that has ended. */
        if (!lv || !p->t->hdr.pid || lv->probed_ns < start_ns || strcmp(lv->activity, "gone") == 0)
            continue;
        if (json) {
            json_begin_object(&w, NULL);
            json_int(&w, "rank", p->rank);
            json_int(&w, "pid", p->t->hdr.pid);
            json_string(&w, "trace", p->t->path);
            json_string(&w, "activity", lv->activity);
            report_json_live_threads(&w, lv);
            json_end_object(&w);
            continue;
        }
        printf("rank %d (pid %d): %s%s%s\n", p->rank, p->t->hdr.pid, lv->activity,
               strncmp(lv->stacks, "refused", 7) == 0 ? "; stacks " : "",
               strncmp(lv->stacks, "refused", 7) == 0 ? lv->stacks : "");
        for (int k = 0; k < lv->nthreads; k++)
            print_thread(lv, k);
    }
    if (json) {
        json_end_array(&w);
        json_end_object(&w);
        fputc('\n', out);
    } else if (!probed) {
        printf("no traced process of these traces runs on this host\n");
    }
    rc = 0;
out:
    if (out != stdout && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "lockstep stacks: cannot write --json %s: %s\n", so.json, strerror(errno));
        rc = 2;
    }
    analysis_free(&a);
    return rc;
}
