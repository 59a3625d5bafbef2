/* output_gitlab.c -- the findings as a GitLab Code Quality report: a JSON array of issues,
 * one at each divergent call site or raising line (its file relative to the repository,
 * output_site_place()), else one per root finding; shown in merge requests' Code Quality widget and
 * diff. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "output_place.h"
#include "output_writer.h"

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* What an issue is, free of anything that changes from run to run (pids, times, communicator
 * ids): its kind, file and line. */
static uint64_t issue_key(const struct finding *f, const char *path, int line)
{
    const char *kind = finding_kind_name(f->kind);
    uint64_t h = fnv1a(0xcbf29ce484222325ull, kind, strlen(kind) + 1);
    h = fnv1a(h, path, strlen(path) + 1);
    return fnv1a(h, &line, sizeof(line));
}

/* Code Quality's severities: a root cause is critical, a consequence major, a warning (a limit
 * of what can be concluded, a slowness) minor. */
static const char *severity(const struct finding *f)
{
    if (finding_kind_severity(f->kind) == F_SEV_WARN)
        return "minor";
    return f->consequence_of < 0 ? "critical" : "major";
}

/* The issues written so far, by key: the fingerprint of the n-th issue with one key is that
 * key and n, so each is unique and the same in every run that finds the same things. */
struct issue_keys {
    uint64_t *v;
    size_t n, cap;
};

static int write_issue(struct json_writer *w, struct issue_keys *keys, const struct finding *f,
                       const char *path, int line)
{
    uint64_t key = issue_key(f, path, line);
    uint32_t nth = 0;
    for (size_t i = 0; i < keys->n; i++)
        nth += keys->v[i] == key;
    if (keys->n == keys->cap) {
        size_t cap = keys->cap ? keys->cap * 2 : 16;
        uint64_t *v = realloc(keys->v, cap * sizeof(*v));
        if (!v)
            return -1;
        keys->v = v;
        keys->cap = cap;
    }
    keys->v[keys->n++] = key;
    char fingerprint[40];
    snprintf(fingerprint, sizeof(fingerprint), "%016llx%08x", (unsigned long long)key, nth);
    json_begin_object(w, NULL);
    json_string(w, "description", f->summary ? f->summary : finding_kind_name(f->kind));
    json_string(w, "check_name", finding_kind_name(f->kind));
    json_string(w, "fingerprint", fingerprint);
    json_string(w, "severity", severity(f));
    json_begin_object(w, "location");
    json_string(w, "path", path);
    json_begin_object(w, "lines");
    json_int(w, "begin", line);
    json_end_object(w);
    json_end_object(w);
    json_end_object(w);
    return 0;
}

output_write_fn output_gitlab;

int output_gitlab(FILE *out, const struct report_input *in, const struct output_opts *opts)
{
    (void)opts;
    struct json_writer w;
    struct issue_keys keys = {0};
    int rc = 0;
    json_init(&w, out);
    json_begin_array(&w, NULL);
    for (size_t i = 0; i < in->fs->n && rc == 0; i++) {
        const struct finding *f = &in->fs->v[i];
        int any = 0;
        for (size_t c = 0; c < finding_nsites(f) && rc == 0; c++) {
            char path[PATH_MAX];
            int line;
            if (output_site_place(in, finding_site(f, c), path, sizeof(path), &line) != 0)
                continue;
            any = 1;
            if (!output_place_repeats(in, f, c, path, line)) /* once per place */
                rc = write_issue(&w, &keys, f, path, line);
        }
        /* No source line to show it at: the repository itself ("."), line 1. */
        if (!any && f->consequence_of < 0 && rc == 0)
            rc = write_issue(&w, &keys, f, ".", 1);
    }
    json_end_array(&w);
    free(keys.v);
    return rc;
}
