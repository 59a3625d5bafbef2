/* cmd_export.c -- `lockstep export --perfetto OUT.json PATH...`: the traces as a timeline that
 * ui.perfetto.dev and chrome://tracing open. Exit 0 written, 2 bad input or write error. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "analysis.h"
#include "commands.h"
#include "export_perfetto.h"

static int usage_full(FILE *f, int rc)
{
    fprintf(f, "usage: lockstep export --perfetto OUT.json [--job ID] PATH...\n"
               "  --perfetto OUT.json  write Chrome trace events (open in ui.perfetto.dev or\n"
               "                       chrome://tracing); '-' writes to stdout\n"
               "  --job ID             export only job ID\n"
               "  PATH                 trace files or folders, as for 'lockstep analyze'\n"
               "exit status: 0 written, 2 bad input or the file could not be written\n");
    return rc;
}

/* Writes the export to `path` ("-": stdout). Returns 0, or -1 after a message. */
static int write_export(struct analysis *a, const char *path)
{
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "lockstep: %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct report_input in = analysis_report_input(a);
    int rc = export_perfetto(f, &in);
    if (rc < 0)
        fprintf(stderr, "lockstep: out of memory\n");
    int werr = ferror(f) || fflush(f) != 0;
    if (!to_stdout && fclose(f) != 0)
        werr = 1;
    if (werr && rc == 0) {
        fprintf(stderr, "lockstep: writing %s: %s\n", path, strerror(errno ? errno : EIO));
        rc = -1;
    }
    if (rc < 0 && !to_stdout)
        unlink(path);
    return rc;
}

int cmd_export(int argc, char **argv)
{
    const char *out = NULL, *job = NULL;
    struct analysis a;
    memset(&a, 0, sizeof(a));
    int i, rc = 2;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--perfetto") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strncmp(argv[i], "--perfetto=", 11) == 0)
            out = argv[i] + 11;
        else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc)
            job = argv[++i];
        else if (strncmp(argv[i], "--job=", 6) == 0)
            job = argv[i] + 6;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage_full(stdout, 0);
        else if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "lockstep export: unknown option '%s'\n", argv[i]);
            return usage_full(stderr, 2);
        } else
            break;
    }
    if (!out || !out[0]) {
        fprintf(stderr, "lockstep export: say which format and file, e.g. --perfetto OUT.json\n");
        return usage_full(stderr, 2);
    }
    if (i >= argc)
        return usage_full(stderr, 2);
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
    if (write_export(&a, out) == 0)
        rc = 0;
done:
    analysis_free(&a);
    return rc;
}
