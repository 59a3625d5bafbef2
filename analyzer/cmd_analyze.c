/* cmd_analyze.c -- `lockstep analyze [--json] [--html OUT.html] [--job ID] PATH...`: loads
 * every trace, builds the job model, diagnoses each job and reports. Exit 0 clean, 1 findings,
 * 2 bad input. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "commands.h"

const struct command_help analyze_help = {
    "analyze", "[--json] [--html OUT.html] [--job ID] PATH...",
    "diagnose a hung or failed job from its traces (folders or files)",
    "  PATH             trace files, node summaries (lockstep summarize) or folders (their\n"
    "                   *.trace and *.summary, and one level of subfolders)\n"
    "  --json           write the JSON report (docs/report-format.md) instead of text\n"
    "  --html OUT.html  also write a self-contained HTML report with a timeline\n"
    "                   ('-': the page on stdout, in place of the report)\n"
    "  --job ID         diagnose only job ID (a job id, or anon-N as the text report names it)\n"
    "  -h, --help       this help\n"
    "exit status: 0 nothing found, 1 findings, 2 bad input\n"};

int cmd_analyze(int argc, char **argv)
{
    int rc = 2;
    const char *job = NULL, *html = NULL;
    const struct output_format *fmt = output_find("text");
    struct analysis a;
    memset(&a, 0, sizeof(a));
    static const struct option options[] = {{"json", no_argument, NULL, 'j'},
                                            {"html", required_argument, NULL, 'H'},
                                            {"job", required_argument, NULL, 'J'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'j')
            fmt = output_find("json");
        else if (c == 'H')
            html = optarg;
        else if (c == 'J')
            job = optarg;
        else if (c == 'h')
            return command_help(stdout, &analyze_help, 0);
        else
            return command_bad_option(&analyze_help, c, argv);
    }
    int i = optind;
    if (i >= argc)
        return command_usage_error(&analyze_help, "no trace file or folder given");
    for (; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto out;
    if (analysis_load(&a, job) < 0)
        goto out;
    if (analysis_diagnose(&a) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        goto out;
    }
    /* `--html -` puts the page on stdout in place of the text or JSON report, never both. */
    int html_to_stdout = html && strcmp(html, "-") == 0;
    if (!html_to_stdout && analysis_report(&a, stdout, fmt, analysis_want_color()) < 0)
        goto out;
    struct report_input in = analysis_report_input(&a);
    struct output_opts plain = {0};
    if (html && output_to_file(output_find("html"), &in, html, &plain) < 0)
        goto out;
    rc = a.fs.n ? 1 : 0;
out:
    analysis_free(&a);
    return rc;
}
