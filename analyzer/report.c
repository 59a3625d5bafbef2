/* report.c -- what every report writer shares: which jobs a report covers. */
#include "report.h"

int report_job_shown(const struct report_input *in, size_t job)
{
    if (!in->jobs)
        return 1;
    for (size_t i = 0; i < in->njobs; i++)
        if (in->jobs[i] == job)
            return 1;
    return 0;
}
