/* cmd_summarize.c -- `lockstep summarize [-o FILE | --per-host DIR] PATH...`: reduces the traces
 * of a node to one node summary (docs/summary-format.md), what the analysis reads of each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"
#include "window.h"
#include "node_summary.h"

/* What the options say. */
struct summarize_opts {
    const char *out, *per_host;
};

static const struct command_option summarize_options[] = {
    CMD_OPERAND("PATH", "trace files or folders (their *.trace, and one level of subfolders);\n"
                        "node summaries too (their traces are taken again)"),
    CMD_TEXT("output", 'o', "FILE", "the summary to write (default HOST.summary in this folder)",
             "the summary to write (default \\fIHOST\\fR.summary in this folder, HOST this host's "
             "name)",
             struct summarize_opts, out),
    CMD_TEXT("per-host", 0, "DIR", "one summary per host the traces name: DIR/HOST.summary",
             "one summary per host the traces name, \\fIDIR/HOST\\fR.summary (as each node would "
             "make its own)",
             struct summarize_opts, per_host),
    CMD_END};

const struct command_help summarize_help = {
    "summarize",
    "[-o FILE | --per-host DIR] PATH...",
    "reduce a node's traces to one node summary, what the diagnosis reads of them",
    NULL,
    17,
    summarize_options,
    "The newest LOCKSTEP_ANALYZE_RECORDS records of each trace are kept "
    "(default " COMMAND_HELP_DEFAULT(
        "LOCKSTEP_ANALYZE_RECORDS") "), and\n"
                                    "further back to its oldest GPU work not completed, as analyze "
                                    "reads them.\n"
                                    "Each trace or summary that cannot be read is named once on "
                                    "stderr, and kept in the summary\n"
                                    "as a message the analysis repeats.\n"
                                    "exit status: 0 written (at least one trace read), 2 bad input "
                                    "(no trace could be read:\n"
                                    "nothing written) or the summary could not be written\n",
    0};

int cmd_summarize(int argc, char **argv)
{
    struct summarize_opts so = {0};
    int parsed = command_parse(&summarize_help, &argc, argv, &so);
    if (parsed >= 0)
        return parsed;
    const char *out = so.out, *per_host = so.per_host;
    if (optind >= argc)
        return command_usage_error(&summarize_help, "no trace file or folder given");
    if (out && per_host)
        return command_usage_error(&summarize_help, "-o and --per-host exclude each other");
    struct analysis a;
    memset(&a, 0, sizeof(a));
    int rc = 2;
    for (int i = optind; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto done;
    if (a.paths.n == 0) {
        fprintf(stderr, "lockstep: no trace files (*.trace) found in the given paths\n");
        goto done;
    }
    if (per_host && mkdir(per_host, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "lockstep: cannot create %s: %s\n", per_host, strerror(errno));
        goto done;
    }
    struct node_summary_stats st;
    int wrote =
        node_summary_write(a.paths.v, a.paths.n, window_records(a.paths.n), out, per_host, 1, &st);
    if (wrote == 1) {
        fprintf(stderr, "lockstep: no trace could be read (%zu unreadable): no summary written\n",
                st.unreadable);
    } else if (wrote == 0) {
        fprintf(stderr, "lockstep: summarized %zu traces (%zu unreadable) into %zu summar%s\n",
                st.traces, st.unreadable, st.files, st.files == 1 ? "y" : "ies");
        rc = 0;
    }
done:
    analysis_free(&a);
    return rc;
}
