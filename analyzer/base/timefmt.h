/* timefmt.h -- formats CLOCK_REALTIME nanoseconds and durations for people. */
#ifndef LOCKSTEP_TIMEFMT_H
#define LOCKSTEP_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* Writes ns since the epoch as local "YYYY-MM-DD HH:MM:SS.uuuuuu" into buf; "-" for 0.
 * Returns buf. This function can't fail (the text is cut to len). */
char *timefmt_wall(char *buf, size_t len, uint64_t ns);

/* Writes a duration compactly ("850 ns", "12.3 us", "4.51 ms", "31 s", "40 min", "2.5 h").
 * Returns buf. This function can't fail. */
char *timefmt_duration(char *buf, size_t len, uint64_t ns);

/* Returns the current CLOCK_REALTIME in ns. */
uint64_t timefmt_now_ns(void);

/* Returns the current CLOCK_MONOTONIC in ns (for intervals and deadlines). */
uint64_t timefmt_mono_ns(void);

#endif
