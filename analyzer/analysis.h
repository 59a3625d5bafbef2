/* analysis.h -- one diagnosis of a set of traces: find, load, model, diagnose, report. Shared
 * by analyze (post-mortem) and run/watch (live), so both say the same thing. */
#ifndef LOCKSTEP_ANALYSIS_H
#define LOCKSTEP_ANALYSIS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "diagnose.h"
#include "live.h"
#include "model.h"
#include "output.h"
#include "report.h"
#include "untraced.h"

struct pathlist {
    char **v;
    size_t n, cap;
};

struct analysis {
    struct pathlist paths;
    struct tr_trace **traces;
    size_t ntraces;
    char **unreadable; /* "file: problem" of each trace that could not be loaded */
    size_t nunreadable;
    struct model *m;
    struct findings fs;
    struct findings earlier; /* the earlier attempts of the selected jobs (summarized) */
    struct symbolizer *sym;
    size_t *jobs; /* the jobs selected */
    size_t njobs;
    struct waitgraph **graphs; /* per job of the model: its wait-for graph once diagnosed */
    struct live_set live;      /* what probes saw of running ranks (<trace>.live files) */
    struct stop_mark *stops;   /* the stop records of the traces' folders (stop_mark.h) */
    size_t nstops;
    struct untraced_set untraced; /* the markers of ranks without room for a trace (untraced.h)
                                   * in the folders scanned and the node summaries read */
    int whole_rings;              /* set before analysis_load(): read whole rings, not the window of
                                   * window_records() (for exports of every call) */
    const struct diag_scope *scope;   /* set before analysis_diagnose(): the part of the jobs it is
                                       * narrowed to (a live stall), NULL all of them */
    const struct analysis_opts *opts; /* set before analysis_load(): the thresholds of the model
                                       * and the diagnosis (--threshold), NULL the defaults */
};

/* Adds a trace file, or the *.trace files of a folder and of its direct subfolders (and the
 * markers of ranks that could not be traced there, into a->untraced). Returns
 * 0, or -1 after a message on stderr naming the path. */
int analysis_add_path(struct analysis *a, const char *path);

/* Loads every trace added (unreadable ones are kept as messages), builds the model and
 * selects job `job` (NULL: all); live facts probed earlier (`<trace>.live`) are attached to
 * their processes. Returns 0; -1 after a message when nothing could be loaded, the job does
 * not exist or memory ran out. */
int analysis_load(struct analysis *a, const char *job);

/* Diagnoses the selected jobs into a->fs. Returns 0, or -1 when out of memory. */
int analysis_diagnose(struct analysis *a);

/* What a report of this analysis covers (for report_*() and exports); before analysis_load()
 * (no trace to load), a report with no job in it and the untraced ranks found. */
struct report_input analysis_report_input(const struct analysis *a);

/* Writes the report in format `fmt` (output.h; colour if asked and the format has any) and
 * flushes the stream. Returns 0, or -1 when memory ran out or the stream failed (message
 * printed). */
int analysis_report(struct analysis *a, FILE *out, const struct output_format *fmt, int color);

/* Frees everything the analysis holds. The struct may be zeroed and reused. */
void analysis_free(struct analysis *a);

/* True when stdout should get colour: a terminal and NO_COLOR unset. */
int analysis_want_color(void);

#endif
