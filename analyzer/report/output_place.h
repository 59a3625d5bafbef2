/* output_place.h -- a call site's file relative to the repository, for the CI formats
 * (output_github.c, output_gitlab.c): below them and the table of formats (output.c). */
#ifndef LOCKSTEP_OUTPUT_PLACE_H
#define LOCKSTEP_OUTPUT_PLACE_H

#include <stddef.h>

#include "report.h"

/* Writes the repository-relative place of call site `site` (a string of in->sym) into path
 * and *line: the site's full source path (symbolizer_site_file()) made relative to the
 * repository (GITHUB_WORKSPACE when set, else the nearest folder at or above the current one
 * that holds .git); a file outside it keeps its full path. Returns 0, or -1 when the site
 * names no source file and line. Used by the CI formats (github, gitlab). */
int output_site_place(const struct report_input *in, const char *site, char *path, size_t len,
                      int *line);

/* 1 when one of f's call sites before site number c is at path:line already (two call sites
 * of one finding, say two ranks' stacks, can end at one line): a CI format shows a finding once
 * per place. */
int output_place_repeats(const struct report_input *in, const struct finding *f, size_t c,
                         const char *path, int line);

#endif
