/* html_waits.h -- the HTML report's picture of the wait-for graph (html_waits.c). */
#ifndef LOCKSTEP_HTML_WAITS_H
#define LOCKSTEP_HTML_WAITS_H

#include <stddef.h>
#include <stdio.h>

#include "report.h"

/* Writes, under a heading, job `job`'s wait-for graph as an inline SVG: one box per class of
 * ranks that wait the same way, in columns by distance from where their waits end (those boxes
 * marked "sink"), arrows to what each class waits for, every rank and the whole wait in a
 * <title>. Writes nothing when nobody waits. Returns 0, or -1 when out of memory (what was
 * written stays). */
int html_waits(FILE *f, const struct report_input *in, size_t job);

#endif
