/* output_github.c -- the findings as GitHub Actions workflow commands: an ::error annotation
 * at each divergent call site found in the checkout (the current folder), else one per root
 * finding. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "output.h"

/* Finds `base` under the current folder (bounded search, skipping .git and build folders) and
 * writes its relative path; falls back to `base` itself. */
static void find_source(const char *dir, const char *base, int depth, char *out, size_t len,
                        int *budget)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && out[0] == 0 && (e = readdir(d)) != NULL && --*budget > 0) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, "build", 5) == 0)
            continue;
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISREG(st.st_mode) && strcmp(e->d_name, base) == 0)
            snprintf(out, len, "%.1000s", path + 2); /* drop "./" */
        else if (S_ISDIR(st.st_mode) && depth > 0)
            find_source(path, base, depth - 1, out, len, budget);
    }
    if (d)
        closedir(d);
}

/* "file.c:12 (func)" -> file and line; returns 0 when it has that shape. */
static int split_site(const char *site, char *file, size_t flen, int *line)
{
    const char *colon = strchr(site, ':');
    if (!colon || colon == site || (size_t)(colon - site) >= flen)
        return -1;
    char *end;
    long l = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || l <= 0)
        return -1;
    memcpy(file, site, (size_t)(colon - site));
    file[colon - site] = 0;
    *line = (int)l;
    return 0;
}

/* Writes text safe inside a GitHub workflow command (%, CR and LF escaped). */
static void gh_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '%')
            fputs("%25", f);
        else if (*s == '\r')
            fputs("%0D", f);
        else if (*s == '\n')
            fputs("%0A", f);
        else
            fputc(*s, f);
    }
}

output_write_fn output_github;

int output_github(FILE *out, const struct report_input *in, const struct output_opts *opts)
{
    (void)opts;
    const struct findings *fs = in->fs;
    for (size_t i = 0; i < fs->n; i++) {
        const struct finding *f = &fs->v[i];
        int any = 0;
        for (size_t c = 0; c < f->nclasses; c++) {
            char base[512], path[1024] = "";
            int line;
            if (!f->classes[c].callsite ||
                split_site(f->classes[c].callsite, base, sizeof(base), &line) != 0)
                continue;
            int budget = 20000;
            find_source(".", base, 6, path, sizeof(path), &budget);
            fprintf(out, "::error file=%s,line=%d,title=lockstep %s::", path[0] ? path : base, line,
                    finding_kind_name(f->kind));
            gh_escape(out, f->summary ? f->summary : "");
            fputc('\n', out);
            any = 1;
        }
        if (!any && f->consequence_of < 0) {
            fprintf(out, "::error title=lockstep %s::", finding_kind_name(f->kind));
            gh_escape(out, f->summary ? f->summary : "");
            fputc('\n', out);
        }
    }
    return 0;
}
