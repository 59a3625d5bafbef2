/* cmd_export.c -- `lockstep export --perfetto OUT.json PATH...` (or any --format NAME[=FILE]):
 * every call kept in the traces, as a timeline that ui.perfetto.dev and chrome://tracing open,
 * or as a report. Exit 0 written, 2 bad input or write error. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "commands.h"

const struct command_help export_help = {
    "export", "--perfetto OUT.json | --format NAME[=FILE]... [--job ID] PATH...",
    "write the calls of every rank as a timeline for ui.perfetto.dev / chrome://tracing",
    "  --perfetto OUT.json  write Chrome trace events (open in ui.perfetto.dev or\n"
    "                       chrome://tracing); '-' writes to stdout; the same as\n"
    "                       --format perfetto=OUT.json\n"
    "  --format NAME[=FILE] write NAME to FILE (none or '-': stdout) from every call kept\n"
    "                       (not only the analysis window); repeatable, one on stdout\n"
    "                       formats: " COMMAND_HELP_FORMATS "\n"
    "  --job ID             export only job ID\n"
    "  PATH                 trace files or folders, as for 'lockstep analyze'\n"
    "  -h, --help           this help\n"
    "exit status: 0 written, 2 bad input or the file could not be written\n"};

int cmd_export(int argc, char **argv)
{
    const char *job = NULL;
    struct output_plan plan = {0};
    struct analysis a;
    memset(&a, 0, sizeof(a));
    int rc = 2, c;
    static const struct option options[] = {{"perfetto", required_argument, NULL, 'p'},
                                            {"format", required_argument, NULL, 'f'},
                                            {"job", required_argument, NULL, 'J'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        int r = 0;
        if (c == 'p')
            r = output_plan_add_to(&plan, "perfetto", optarg, "--perfetto");
        else if (c == 'f')
            r = output_plan_add(&plan, optarg, "--format");
        else if (c == 'J')
            job = optarg;
        else if (c == 'h')
            return command_help(stdout, &export_help, 0);
        else
            return command_bad_option(&export_help, c, argv);
        if (r < 0)
            return 2;
    }
    if (plan.n == 0)
        return command_usage_error(&export_help,
                                   "say which format and file, e.g. --perfetto OUT.json");
    int i = optind;
    if (i >= argc)
        return command_usage_error(&export_help, "no trace file or folder given");
    for (; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto done;
    a.whole_rings = 1; /* a timeline shows every call kept, not the diagnosis window */
    if (analysis_load(&a, job) < 0)
        goto done;
    if (analysis_diagnose(&a) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        goto done;
    }
    struct report_input in = analysis_report_input(&a);
    struct output_opts plain = {0};
    if (output_plan_write(&plan, &in, &plain) == 0)
        rc = 0;
done:
    analysis_free(&a);
    return rc;
}
