/* cmd_summarize.c -- `lockstep summarize [-o FILE | --per-host DIR] PATH...`: reduces the traces
 * of a node to one node summary (docs/summary-format.md), what the analysis reads of each. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"
#include "window.h"
#include "node_summary.h"

const struct command_help summarize_help = {
    "summarize", "[-o FILE | --per-host DIR] PATH...",
    "reduce a node's traces to one node summary, what the diagnosis reads of them",
    "  PATH             trace files or folders (their *.trace, and one level of subfolders);\n"
    "                   node summaries too (their traces are taken again)\n"
    "  -o, --output FILE  the summary to write (default HOST.summary in this folder)\n"
    "  --per-host DIR   one summary per host the traces name: DIR/HOST.summary\n"
    "  -h, --help       this help\n"
    "The newest LOCKSTEP_ANALYZE_RECORDS records of each trace are kept (default 1024), and\n"
    "further back to its oldest GPU work not completed, as analyze reads them.\n"
    "Each trace or summary that cannot be read is named once on stderr, and kept in the summary\n"
    "as a message the analysis repeats.\n"
    "exit status: 0 written (at least one trace read), 2 bad input (no trace could be read:\n"
    "nothing written) or the summary could not be written\n"};

int cmd_summarize(int argc, char **argv)
{
    const char *out = NULL, *per_host = NULL;
    static const struct option options[] = {{"output", required_argument, NULL, 'o'},
                                            {"per-host", required_argument, NULL, 'P'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":ho:", options, NULL)) != -1) {
        if (c == 'o')
            out = optarg;
        else if (c == 'P')
            per_host = optarg;
        else if (c == 'h')
            return command_help(stdout, &summarize_help, 0);
        else
            return command_bad_option(&summarize_help, c, argv);
    }
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
