/* cmd_export.c -- `lockstep export --perfetto OUT.json PATH...` (or any --format NAME[=FILE]):
 * every call kept in the traces, as a timeline that ui.perfetto.dev and chrome://tracing open,
 * or as a report. Exit 0 written, 2 bad input or write error. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"

/* What the options say. */
struct export_opts {
    const char *job;
    struct output_plan plan;
};

static int take_perfetto(void *ctx, const char *val)
{
    return output_plan_add_to(&((struct export_opts *)ctx)->plan, "perfetto", val, "--perfetto");
}

static int take_format(void *ctx, const char *val)
{
    return output_plan_add(&((struct export_opts *)ctx)->plan, val, "--format");
}

static const struct command_option export_options[] = {
    CMD_CALL("perfetto", 0, "OUT.json",
             "write Chrome trace events (open in ui.perfetto.dev or\n"
             "chrome://tracing); '-' writes to stdout; the same as\n"
             "--format perfetto=OUT.json",
             "write Chrome trace events there; \\fB\\-\\fR writes to stdout; the same as\n"
             "\\fB\\-\\-format perfetto=\\fIOUT.json\\fR",
             take_perfetto),
    CMD_REPEAT("format", 0, "NAME[=FILE]",
               "write NAME to FILE (none or '-': stdout) from every call kept\n"
               "(not only the analysis window); repeatable, one on stdout\n"
               "formats: " COMMAND_HELP_FORMATS,
               "write format \\fINAME\\fR to \\fIFILE\\fR (none or \\fB\\-\\fR: standard "
               "output) from every call the\n"
               "traces kept, not only the analysis window; repeatable, at most one on standard "
               "output.\n"
               "\\fINAME\\fR is one of the formats in \\fBlockstep\\fR(1), FORMATS.",
               take_format),
    CMD_TEXT("job", 0, "ID", "export only job ID", "export only job \\fIID\\fR", struct export_opts,
             job),
    CMD_OPERAND("PATH", "trace files or folders, as for 'lockstep analyze'"), CMD_END};

const struct command_help export_help = {
    "export",
    "--perfetto OUT.json | --format NAME[=FILE]... PATH...",
    "write the calls of every rank as a timeline for ui.perfetto.dev / chrome://tracing",
    NULL,
    21,
    export_options,
    "exit status: 0 written, 2 bad input or the file could not be written\n",
    0};

int cmd_export(int argc, char **argv)
{
    struct export_opts eo = {0};
    struct analysis a;
    memset(&a, 0, sizeof(a));
    int rc = 2;
    int parsed = command_parse(&export_help, &argc, argv, &eo);
    if (parsed >= 0)
        return parsed;
    if (eo.plan.n == 0)
        return command_usage_error(&export_help,
                                   "say which format and file, e.g. --perfetto OUT.json");
    int i = optind;
    if (i >= argc)
        return command_usage_error(&export_help, "no trace file or folder given");
    for (; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto done;
    a.whole_rings = 1; /* a timeline shows every call kept, not the diagnosis window */
    if (analysis_load(&a, eo.job) < 0)
        goto done;
    if (analysis_diagnose(&a) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        goto done;
    }
    struct report_input in = analysis_report_input(&a);
    struct output_opts plain = {0};
    if (output_plan_write(&eo.plan, &in, &plain) == 0)
        rc = 0;
done:
    analysis_free(&a);
    return rc;
}
