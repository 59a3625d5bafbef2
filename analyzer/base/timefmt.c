/* timefmt.c -- wall-clock and duration formatting. */
#include "timefmt.h"

#include <stdio.h>
#include <time.h>

char *timefmt_wall(char *buf, size_t len, uint64_t ns)
{
    if (ns == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    time_t sec = (time_t)(ns / 1000000000ull);
    struct tm tm;
    char day[32];
    localtime_r(&sec, &tm);
    strftime(day, sizeof(day), "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, len, "%s.%06llu", day, (unsigned long long)(ns % 1000000000ull / 1000));
    return buf;
}

char *timefmt_duration(char *buf, size_t len, uint64_t ns)
{
    double s = (double)ns / 1e9;
    if (ns < 1000)
        snprintf(buf, len, "%llu ns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, len, "%.1f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
    else if (s < 10)
        snprintf(buf, len, "%.1f s", s);
    else if (s < 120)
        snprintf(buf, len, "%.0f s", s);
    else if (s < 7200)
        snprintf(buf, len, "%.0f min", s / 60);
    else
        snprintf(buf, len, "%.1f h", s / 3600);
    return buf;
}

uint64_t timefmt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t timefmt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
