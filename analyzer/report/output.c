/* output.c -- the one table of report formats, and writing one of them to a file. */
#include <errno.h>
#include <fcntl.h>
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
    return report_json(out, in, o->all_ranks);
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
output_write_fn output_gitlab;

int output_set_ranks(struct output_opts *opts, const char *which, const char *option)
{
    if (strcmp(which, "all") == 0 || strcmp(which, "named") == 0) {
        opts->all_ranks = which[0] == 'a';
        return 0;
    }
    fprintf(stderr, "lockstep: %s wants 'named' or 'all', not '%s'\n", option, which);
    return -1;
}

static const struct output_format formats[] = {
    {"text", ".txt", output_text, /* report_text.c */
     "the report for people, root cause first (the default on standard output)"},
    {"json", ".json", output_json, /* report_json.c */
     "the JSON report (docs/report\\-format.md)"},
    {"html", ".html", output_html, /* report_html.c */
     "one self\\-contained page with a timeline of the last collectives"},
    {"perfetto", ".json", output_perfetto, /* export_perfetto.c */
     "every call as Chrome trace events, for ui.perfetto.dev or chrome://tracing"},
    {"github", ".txt", output_github, /* output_github.c */
     "GitHub Actions ::error annotations at the divergent call sites, their files relative to "
     "the\n"
     "repository (\\fBGITHUB_WORKSPACE\\fR, else the folder holding .git)"},
    {"gitlab", ".json", output_gitlab, /* output_gitlab.c */
     "a GitLab Code Quality report (a JSON array of issues), its paths relative to the "
     "repository"},
};
#define NFORMATS (sizeof(formats) / sizeof(formats[0]))

const struct output_format *output_find(const char *name)
{
    for (size_t i = 0; i < NFORMATS; i++)
        if (strcmp(formats[i].name, name) == 0)
            return &formats[i];
    return NULL;
}

void output_names(char *buf, size_t len, const char *sep)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NFORMATS && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? sep : "", formats[i].name);
}

const struct output_format *output_format_at(size_t i)
{
    return i < NFORMATS ? &formats[i] : NULL;
}

int output_plan_add_to(struct output_plan *p, const char *name, const char *path,
                       const char *option)
{
    const struct output_format *fmt = output_find(name);
    if (!fmt) {
        char names[256];
        output_names(names, sizeof(names), ", ");
        fprintf(stderr, "lockstep: %s %s: no such format (the formats are %s)\n", option, name,
                names);
        return -1;
    }
    if (!path[0]) {
        fprintf(stderr, "lockstep: %s %s=: the file name is empty ('-' is stdout)\n", option, name);
        return -1;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->v[i].path, path) != 0)
            continue;
        if (strcmp(path, "-") == 0)
            fprintf(stderr,
                    "lockstep: %s %s: stdout already gets %s; at most one format goes to stdout, "
                    "give the others a file (--format NAME=FILE)\n",
                    option, name, p->v[i].fmt->name);
        else
            fprintf(stderr, "lockstep: %s %s=%s: %s already goes to %s; one format per file\n",
                    option, name, path, p->v[i].fmt->name, path);
        return -1;
    }
    if (p->n == OUTPUT_PLAN_MAX) {
        fprintf(stderr, "lockstep: %s %s: at most %d formats at once\n", option, name,
                OUTPUT_PLAN_MAX);
        return -1;
    }
    p->v[p->n++] = (struct output_request){fmt, path, 0};
    return 0;
}

int output_plan_add(struct output_plan *p, const char *spec, const char *option)
{
    const char *eq = strchr(spec, '=');
    char name[64];
    size_t nlen = eq ? (size_t)(eq - spec) : strlen(spec);
    snprintf(name, sizeof(name), "%.*s", (int)(nlen < sizeof(name) ? nlen : sizeof(name) - 1),
             spec);
    return output_plan_add_to(p, name, eq ? eq + 1 : "-", option);
}

const struct output_request *output_plan_stdout(const struct output_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->v[i].path, "-") == 0)
            return &p->v[i];
    return NULL;
}

int output_plan_check_files(const struct output_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        const char *path = p->v[i].path;
        if (strcmp(path, "-") == 0)
            continue;
        int existed = access(path, F_OK) == 0;
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "lockstep: cannot write the %s report to %s: %s\n", p->v[i].fmt->name,
                    path, strerror(errno));
            return -1;
        }
        close(fd);
        if (!existed)
            unlink(path); /* made again when the report is written */
    }
    return 0;
}

int output_plan_write(struct output_plan *p, const struct report_input *in,
                      const struct output_opts *opts)
{
    struct output_opts plain = *opts;
    plain.color = 0; /* colour only on stdout */
    int rc = 0;
    for (size_t i = 0; i < p->n; i++) {
        struct output_request *r = &p->v[i];
        int to_stdout = strcmp(r->path, "-") == 0;
        if (output_to_file(r->fmt, in, r->path, to_stdout ? opts : &plain) < 0)
            rc = -1;
        else
            r->written = 1;
    }
    return rc;
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
