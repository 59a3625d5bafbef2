/* cmd_analyze.c -- `lockstep analyze [--json] [--html OUT.html] [--job ID] PATH...`: loads
 * every trace, builds the job model, diagnoses each job and reports. Exit 0 clean, 1 findings,
 * 2 bad input. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"

static int usage_full(FILE *f, int rc)
{
    fprintf(f,
            "usage: lockstep analyze [--json] [--html OUT.html] [--job ID] PATH...\n"
            "  PATH      trace files or folders (their *.trace, and one level of subfolders)\n"
            "  --json    write the JSON report (docs/report-format.md) instead of text\n"
            "  --html OUT.html  also write a self-contained HTML report with a timeline\n"
            "  --job ID  diagnose only job ID (a job id, or anon-N as the text report names it)\n"
            "exit status: 0 nothing found, 1 findings, 2 bad input\n");
    return rc;
}

/* Writes the HTML report to `path`. Returns 0, or -1 after a message (the file is removed). */
static int write_html(struct analysis *a, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "lockstep: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct report_input in = analysis_report_input(a);
    int rc = report_html(f, &in);
    if (rc < 0)
        fprintf(stderr, "lockstep: out of memory\n");
    int werr = ferror(f);
    if (fclose(f) != 0 || werr) {
        if (rc == 0)
            fprintf(stderr, "lockstep: writing %s: %s\n", path, strerror(errno ? errno : EIO));
        rc = -1;
    }
    if (rc < 0)
        unlink(path);
    return rc;
}

int cmd_analyze(int argc, char **argv)
{
    int json = 0, rc = 2;
    const char *job = NULL, *html = NULL;
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
        else if (strcmp(argv[i], "--html") == 0 && i + 1 < argc)
            html = argv[++i];
        else if (strncmp(argv[i], "--html=", 7) == 0 && argv[i][7])
            html = argv[i] + 7;
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
    if (html && write_html(&a, html) < 0)
        goto out;
    rc = a.fs.n ? 1 : 0;
out:
    analysis_free(&a);
    return rc;
}
