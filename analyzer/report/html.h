/* html.h -- pieces shared by the files of the HTML report (report_html.c, html_timeline.c),
 * written in html.c. */
#ifndef LOCKSTEP_HTML_H
#define LOCKSTEP_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "report.h"

/* Writes `s` with &, <, >, " and ' escaped (usable in text and attribute values); control
 * characters become spaces. NULL writes nothing. Errors are the stream's. */
void html_text(FILE *f, const char *s);

/* Writes the ranks compressed ("0-30,32-4095"), escaped, cut after about `max` characters
 * with an ellipsis ("0,4,8,…"); max 0 means no limit. Errors are the stream's. */
void html_ranks(FILE *f, const int *ranks, size_t n, size_t max);

/* The words of a call a rank's counter counts with no record read and none lost (a cell of
 * the timeline, a half of a send/receive pair): "no record". */
#define HTML_UNRECORDED_WHY                                                                        \
    "issued, no record of it read: being written, or half-written when the process died"

/* The root-cause finding of job `job` (first independent one), or NULL when there is none. */
const struct finding *html_root_finding(const struct report_input *in, size_t job);

#endif
