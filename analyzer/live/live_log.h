/* live_log.h -- `run`/`watch --log FILE`: everything the command itself says (its stderr lines
 * and the report on its stdout) also goes to FILE as it is said, so that the whole report is
 * kept when the terminal, a pipe's reader or a CI log stream goes away. The job's own output
 * is not in it (the job writes to the terminal directly). */
#ifndef LOCKSTEP_LIVE_LOG_H
#define LOCKSTEP_LIVE_LOG_H

/* Starts the log at `path` (replaced): stdout and stderr of this process become streams that
 * write both to where they went and to the file; a write to the terminal that fails (EPIPE: the
 * reader went away) is dropped, once said in the log, and the file still gets every byte.
 * Returns 0, or -1 after a message naming the file. */
int live_log_open(const char *path);

/* Says once on stderr (and in the log) that stdout went away when writing to it failed, and
 * where the report is kept instead (`kept`: "the report is kept in a.json, run.log"; NULL:
 * nowhere). Call after writing to stdout. This function can't fail. */
void live_log_note_stdout(const char *kept);

#endif
