/* html_timeline.h -- the HTML report's picture of the last collectives (html_timeline.c). */
#ifndef LOCKSTEP_HTML_TIMELINE_H
#define LOCKSTEP_HTML_TIMELINE_H

#include <stddef.h>
#include <stdio.h>

#include "report.h"

/* Writes the timeline of job `job`: per communicator (those findings name first) an inline
 * SVG with the last ~12 collective sequence numbers up to the stall as columns and one lane
 * per class of ranks that did the same thing, the diverging call highlighted, call sites in
 * <title>. Returns 0, or -1 when out of memory (what was written stays). */
int html_timeline(FILE *f, const struct report_input *in, size_t job);

#endif
