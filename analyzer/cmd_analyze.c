/* cmd_analyze.c -- `lockstep analyze [--format NAME[=FILE]]... [--json] [--html OUT.html]
 * [--job ID] [--ranks WHICH] PATH...`: loads every trace, builds the job model, diagnoses each job
 * and reports in each format asked for (text on stdout when none asks for stdout). Exit 0 clean, 1
 * findings, 2 bad input. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "commands.h"

const struct command_help analyze_help = {
    "analyze",
    "[--format NAME[=FILE]]... [--json] [--html OUT.html] [--job ID] [--ranks WHICH] PATH...",
    "diagnose a hung or failed job from its traces (folders or files)",
    "  PATH             trace files, node summaries (lockstep summarize) or folders (their\n"
    "                   *.trace and *.summary, and one level of subfolders)\n"
    "  --format NAME[=FILE]\n"
    "                   write the report as NAME to FILE (none or '-': stdout); repeatable,\n"
    "                   one format at most on stdout (none there: the text report)\n"
    "                   formats: " COMMAND_HELP_FORMATS "\n"
    "  --json           the same as --format json (docs/report-format.md)\n"
    "  --html OUT.html  the same as --format html=OUT.html: a self-contained page with a\n"
    "                   timeline ('-': the page on stdout, in place of the report)\n"
    "  --job ID         diagnose only job ID (a job id, or anon-N as the text report names it)\n"
    "  --ranks WHICH    the JSON's object of each rank: 'named' (default: the ranks findings\n"
    "                   name apart; the others in classes) or 'all'\n"
    "  -h, --help       this help\n"
    "exit status: 0 nothing found, 1 findings (or ranks that could not be traced), 2 bad input\n"};

int cmd_analyze(int argc, char **argv)
{
    int rc = 2;
    const char *job = NULL;
    struct output_plan plan = {0};
    struct output_opts opts = {analysis_want_color(), 0};
    struct analysis a;
    memset(&a, 0, sizeof(a));
    static const struct option options[] = {{"format", required_argument, NULL, 'f'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"html", required_argument, NULL, 'H'},
                                            {"job", required_argument, NULL, 'J'},
                                            {"ranks", required_argument, NULL, 'R'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        int r = 0;
        if (c == 'f')
            r = output_plan_add(&plan, optarg, "--format");
        else if (c == 'j') /* the old spellings */
            r = output_plan_add_to(&plan, "json", "-", "--json");
        else if (c == 'H')
            r = output_plan_add_to(&plan, "html", optarg, "--html");
        else if (c == 'J')
            job = optarg;
        else if (c == 'R')
            r = output_set_ranks(&opts, optarg, "--ranks");
        else if (c == 'h')
            return command_help(stdout, &analyze_help, 0);
        else
            return command_bad_option(&analyze_help, c, argv);
        if (r < 0)
            return 2;
    }
    int i = optind;
    if (i >= argc)
        return command_usage_error(&analyze_help, "no trace file or folder given");
    if (!output_plan_stdout(&plan) && output_plan_add_to(&plan, "text", "-", "--format") < 0)
        return 2;
    for (; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto out;
    if (a.paths.n == 0 && a.untraced.n) { /* no rank had room for a trace: say which, and why */
        struct report_input none = analysis_report_input(&a);
        rc = output_plan_write(&plan, &none, &opts) < 0 ? 2 : 1;
        goto out;
    }
    if (analysis_load(&a, job) < 0)
        goto out;
    if (analysis_diagnose(&a) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        goto out;
    }
    struct report_input in = analysis_report_input(&a);
    if (output_plan_write(&plan, &in, &opts) < 0)
        goto out;
    rc = a.fs.n ? 1 : 0;
out:
    analysis_free(&a);
    return rc;
}
