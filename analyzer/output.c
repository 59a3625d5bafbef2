/* output.c -- the one table of report formats, and writing one of them to a file. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "export_perfetto.h"
#include "output.h"

static int output_text(FILE *out, const struct report_input *in, const struct output_opts *o)
{
    report_text(out, in, o->color);
    return 0;
}

static int output_json(FILE *out, const struct report_input *in, const struct output_opts *o)
{
    (void)o;
    report_json(out, in);
    return 0;
}

static int output_html(FILE *out, const struct report_input *in, const struct output_opts *o)
{
    (void)o;
    return report_html(out, in);
}

static int output_perfetto(FILE *out, const struct report_input *in, const struct output_opts *o)
{
    (void)o;
    return export_perfetto(out, in);
}

/* Writers in files of their own (output_NAME.c). */
output_write_fn output_github;

static const struct output_format formats[] = {
    {"text", ".txt", output_text},          /* report_text.c: for people */
    {"json", ".json", output_json},         /* report_json.c: docs/report-format.md */
    {"html", ".html", output_html},         /* report_html.c: one self-contained page */
    {"perfetto", ".json", output_perfetto}, /* export_perfetto.c: Chrome trace events */
    {"github", ".txt", output_github},      /* output_github.c: ::error annotations */
};

const struct output_format *output_find(const char *name)
{
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
        if (strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

int output_to_file(const struct output_format *fmt, const struct report_input *in, const char *path,
                   const struct output_opts *opts)
{
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "lockstep: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = fmt->write(f, in, opts);
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
