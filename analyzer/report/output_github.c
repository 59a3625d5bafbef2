/* output_github.c -- the findings as GitHub Actions workflow commands: an ::error annotation
 * at each divergent call site, its file named relative to the repository (output_site_place()),
 * else one per root finding. */
#include <limits.h>
#include <string.h>

#include "output_place.h"
#include "output_writer.h"

/* Writes text safe inside a GitHub workflow command (%, CR and LF escaped; in a property
 * also ',' and ':'). */
static void gh_escape(FILE *f, const char *s, int property)
{
    for (; *s; s++) {
        if (*s == '%')
            fputs("%25", f);
        else if (*s == '\r')
            fputs("%0D", f);
        else if (*s == '\n')
            fputs("%0A", f);
        else if (property && *s == ',')
            fputs("%2C", f);
        else if (property && *s == ':')
            fputs("%3A", f);
        else
            fputc(*s, f);
    }
}

/* Writes one ::error annotation of f at its call site number c. Returns 1, or 0 when the site
 * names no file and line (nothing written); a place an earlier site of f is at already counts
 * but is not written again. */
static int annotate(FILE *out, const struct report_input *in, const struct finding *f, size_t c)
{
    char path[PATH_MAX];
    int line;
    if (output_site_place(in, finding_site(f, c), path, sizeof(path), &line) != 0)
        return 0;
    if (output_place_repeats(in, f, c, path, line))
        return 1;
    fputs("::error file=", out);
    gh_escape(out, path, 1);
    fprintf(out, ",line=%d,title=lockstep %s::", line, finding_kind_name(f->kind));
    gh_escape(out, f->summary ? f->summary : "", 0);
    fputc('\n', out);
    return 1;
}

output_write_fn output_github;

int output_github(FILE *out, const struct report_input *in, const struct output_opts *opts)
{
    (void)opts;
    const struct findings *fs = in->fs;
    for (size_t i = 0; i < fs->n; i++) {
        const struct finding *f = &fs->v[i];
        int any = 0;
        for (size_t c = 0; c < finding_nsites(f); c++)
            any |= annotate(out, in, f, c);
        if (!any && f->consequence_of < 0) {
            fprintf(out, "::error title=lockstep %s::", finding_kind_name(f->kind));
            gh_escape(out, f->summary ? f->summary : "", 0);
            fputc('\n', out);
        }
    }
    return 0;
}
