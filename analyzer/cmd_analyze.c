/* cmd_analyze.c -- `lockstep analyze [--json] [--job ID] PATH...`: loads every trace, builds
 * the job model, diagnoses each job and reports. Exit 0 clean, 1 findings, 2 bad input. */
#include <stdio.h>
#include <string.h>

#include "analysis.h"
#include "commands.h"

static int usage_full(FILE *f, int rc)
{
    fprintf(f,
            "usage: lockstep analyze [--json] [--job ID] PATH...\n"
            "  PATH      trace files or folders (their *.trace, and one level of subfolders)\n"
            "  --json    write the JSON report (docs/report-format.md) instead of text\n"
            "  --job ID  diagnose only job ID (a job id, or anon-N as the text report names it)\n"
            "exit status: 0 nothing found, 1 findings, 2 bad input\n");
    return rc;
}

int cmd_analyze(int argc, char **argv)
{
    int json = 0, rc = 2;
    const char *job = NULL;
    struct analysis a;
    memset(&a, 0, sizeof(a));
    int i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc)
            job = argv[++i];
        else if (strncmp(argv[i], "--job=", 6) == 0)
            job = argv[i] + 6;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage_full(stdout, 0);
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "lockstep analyze: unknown option '%s'\n", argv[i]);
            return usage_full(stderr, 2);
        } else
            break;
    }
    if (i >= argc)
        return usage_full(stderr, 2);
    for (; i < argc; i++)
        if (analysis_add_path(&a, argv[i]) < 0)
            goto out;
    if (analysis_load(&a, job) < 0)
        goto out;
    if (analysis_diagnose(&a) < 0) {
        fprintf(stderr, "lockstep: out of memory\n");
        goto out;
    }
    if (analysis_report(&a, stdout, json, analysis_want_color()) < 0)
        goto out;
    rc = a.fs.n ? 1 : 0;
out:
    analysis_free(&a);
    return rc;
}
