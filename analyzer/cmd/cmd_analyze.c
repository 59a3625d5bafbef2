/* cmd_analyze.c -- `lockstep analyze [--format NAME[=FILE]]... [--json [FILE]] [--html OUT.html]
 * [--job ID] [--ranks WHICH] PATH...`: loads every trace, builds the job model, diagnoses each job
 * and reports in each format asked for (text on stdout when none asks for stdout). Exit 0 clean, 1
 * findings, 2 bad input. */
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis.h"
#include "commands.h"

/* What the options say. */
struct analyze_opts {
    const char *job;
    struct output_plan plan;
    struct output_opts out;
    struct analysis_opts thresholds; /* --threshold NAME=VALUE */
};

static int take_format(void *ctx, const char *val)
{
    return output_plan_add(&((struct analyze_opts *)ctx)->plan, val, "--format");
}

/* --json [FILE]: FILE as run's and watch's --json take it ('-': stdout); alone, the JSON on
 * stdout (as it always was here). */
static int take_json(void *ctx, const char *val)
{
    return output_plan_add_to(&((struct analyze_opts *)ctx)->plan, "json", val ? val : "-",
                              "--json");
}

static int take_html(void *ctx, const char *val)
{
    return output_plan_add_to(&((struct analyze_opts *)ctx)->plan, "html", val, "--html");
}

static int take_threshold(void *ctx, const char *val)
{
    return analysis_opts_set(&((struct analyze_opts *)ctx)->thresholds, val);
}

static int take_ranks(void *ctx, const char *val)
{
    return output_set_ranks(&((struct analyze_opts *)ctx)->out, val, "--ranks");
}

static const struct command_option analyze_options[] = {
    CMD_OPERAND("PATH", "trace files, node summaries (lockstep summarize) or folders (their\n"
                        "*.trace and *.summary, and one level of subfolders)"),
    CMD_REPEAT("format", 0, "NAME[=FILE]",
               "write the report as NAME to FILE (none or '-': stdout); repeatable,\n"
               "one format at most on stdout (none there: the text report)\n"
               "formats: " COMMAND_HELP_FORMATS,
               "write the report in format \\fINAME\\fR to \\fIFILE\\fR (none or \\fB\\-\\fR: "
               "standard output);\n"
               "repeatable, one format per file and at most one on standard output. When none asks "
               "for\n"
               "standard output, the text report goes there.\n"
               "\\fINAME\\fR is one of the formats in \\fBlockstep\\fR(1), FORMATS.",
               take_format),
    CMD_MAYBE("json", 0, "[FILE]",
              "the same as --format json=FILE: the JSON report (docs/report-format.md)\n"
              "to FILE ('-', or none: stdout); FILE is the next word when it is '-'\n"
              "or ends in .json, or give --json=FILE",
              "the same as \\fB\\-\\-format json=\\fIFILE\\fR: the JSON report "
              "(docs/report\\-format.md) to \\fIFILE\\fR\n"
              ".RB ( \\- ,\n"
              "or none: standard output); \\fIFILE\\fR is the next word when it is \\fB\\-\\fR "
              "or ends in \\fB.json\\fR, or give \\fB\\-\\-json=\\fIFILE\\fR",
              take_json, command_json_file_next),
    CMD_CALL("html", 0, "OUT.html",
             "the same as --format html=OUT.html: a self-contained page with a\n"
             "timeline ('-': the page on stdout, in place of the report)",
             "the same as \\fB\\-\\-format html=\\fIOUT.html\\fR: a self\\-contained HTML "
             "report with a timeline\n"
             ".RB ( \\- :\n"
             "the page on standard output, in place of the report)",
             take_html),
    CMD_TEXT("job", 0, "ID",
             "diagnose only job ID (a job id, or anon-N as the text report names it)",
             "diagnose only job \\fIID\\fR (a job id, or anon\\-N as the text report names it)",
             struct analyze_opts, job),
    CMD_CHOICE("ranks", 0, "WHICH", OUTPUT_RANKS_WORDS, OUTPUT_RANKS_HELP, OUTPUT_RANKS_MAN,
               take_ranks),
    CMD_OPTION_THRESHOLD(take_threshold),
    CMD_END};

const struct command_help analyze_help = {
    "analyze",
    "PATH...",
    "diagnose a hung or failed job from its traces (folders or files)",
    NULL,
    17,
    analyze_options,
    "exit status: 0 nothing found, 1 findings (or ranks that could not be traced), 2 bad input\n",
    0};

/* After "PATH: No such file or directory": a missing PATH named like a report of one of the
 * formats (report.json, out.html) was meant as one ("did you mean --format json=report.json?"). */
static void report_hint(const char *path)
{
    struct stat st;
    const char *dot = strrchr(path, '.');
    if (stat(path, &st) == 0 || !dot || strchr(dot, '/'))
        return;
    const struct output_format *fmt = output_find(dot + 1);
    if (fmt && strcmp(fmt->name, "text") != 0)
        fprintf(stderr, "lockstep: (did you mean --format %s=%s?)\n", fmt->name, path);
}

int cmd_analyze(int argc, char **argv)
{
    int rc = 2;
    struct analyze_opts ao = {.out = {analysis_want_color(), 0},
                              .thresholds = analysis_opts_default()};
    struct analysis a;
    memset(&a, 0, sizeof(a));
    a.opts = &ao.thresholds;
    int parsed = command_parse(&analyze_help, &argc, argv, &ao);
    if (parsed >= 0)
        return parsed;
    int i = optind;
    if (i >= argc)
        return command_usage_error(&analyze_help, "no trace file or folder given");
    if (!output_plan_stdout(&ao.plan) && output_plan_add_to(&ao.plan, "text", "-", "--format") < 0)
        return 2;
    for (; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0) {
            report_hint(argv[i]);
            goto out;
        }
    if (a.paths.n == 0 &&
        untraced_set_count(&a.untraced)) { /* no rank had room for a trace: say which, and why */
        struct report_input none = analysis_report_input(&a);
        rc = output_plan_write(&ao.plan, &none, &ao.out) < 0 ? 2 : 1;
        goto out;
    }
    if (analysis_load(&a, ao.job) < 0)
        goto out;
    if (analysis_diagnose(&a) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        goto out;
    }
    struct report_input in = analysis_report_input(&a);
    if (output_plan_write(&ao.plan, &in, &ao.out) < 0)
        goto out;
    rc = a.fs.n ? 1 : 0;
out:
    analysis_free(&a);
    return rc;
}
