/* report.h -- writes a diagnosis for people (text, HTML) or machines (JSON,
 * docs/report-format.md). */
#ifndef LOCKSTEP_REPORT_H
#define LOCKSTEP_REPORT_H

#include <stdio.h>
#include <sys/types.h>

#include "finding.h"
#include "intvec.h"
#include "model.h"
#include "symbolizer.h"
#include "waitgraph.h"

#define REPORT_FORMAT_VERSION 2

/* What a report covers. `jobs` selects the model's jobs shown (NULL: all). */
struct report_input {
    const struct model *m;
    const struct findings *fs;
    struct symbolizer *sym;
    const size_t *jobs;
    size_t njobs;
    const char *const *unreadable; /* "file: problem" of each trace that could not be loaded */
    size_t nunreadable;
    const struct findings *earlier;      /* findings of the earlier attempts of the jobs shown, NULL
                                          * none (each job shown is the newest attempt of its id) */
    struct waitgraph *const *graphs;     /* per job of the model: its wait-for graph, NULL where
                                          * none (the array itself may be NULL) */
    const struct untraced_set *untraced; /* ranks that could not be traced, NULL none */
};

/* True when job `job` of the model is among those the report covers. */
int report_job_shown(const struct report_input *in, size_t job);

/* The stop record of the lockstep run (or watch --kill) that ended ranks of job `job`, NULL
 * when none did; `ranks` gets those ranks ("0-3,5"; malloc'ed, NULL when out of memory). */
const struct stop_mark *report_job_stop(const struct report_input *in, size_t job, char **ranks);

/* True when job `e` of the model is an earlier attempt of job `j`'s id. */
int report_is_earlier(const struct report_input *in, size_t j, size_t e);

/* One line on how earlier attempt `job` ended, from its root findings in in->earlier ("rank 3
 * crashed with SIGSEGV (signal 11)"; "every rank exited 0"...). This function can't fail. */
void report_attempt_outcome(const struct report_input *in, size_t job, char *buf, size_t len);

/* A group of a job's ranks in the same state, in the same call (op and communicator; the
 * current call of a rank inside one, else its last) from the same call site. Sites are
 * compared by their text: the symbolizer gives different pointers for the same place reached
 * through different module or script paths (copies of one program on different hosts). */
struct report_state_group {
    enum rank_state state;
    const struct ls_record *call; /* NULL: no NCCL call */
    const struct m_proc *example; /* the group's first rank */
    const char *site;             /* symbolizer_site() of the call, "" without one */
    uint64_t seq_lo, seq_hi;      /* the calls' sequence numbers (0 when unnumbered) */
    struct intvec ranks;          /* in the job's rank order */
};

/* Groups the ranks of job `j` (the one place both the text and the HTML report ask). Returns
 * the number of groups with the array in *out (free with report_state_groups_free()), or -1
 * when out of memory (*out is then NULL). */
ssize_t report_state_groups(const struct report_input *in, const struct m_job *j,
                            struct report_state_group **out);

/* Frees what report_state_groups() returned. NULL is fine. */
void report_state_groups_free(struct report_state_group *g, size_t n);

/* The wait-for graph of job `job`, NULL none. */
const struct waitgraph *report_graph(const struct report_input *in, size_t job);

/* A class of the wait-for graph's nodes that wait the same way (STAT-style): a rank that waits
 * (the same calls, the same peers), or a rank some wait ends at (the same state, the same root
 * cause). */
struct report_wait_class {
    const struct waitgraph *g;
    size_t node;         /* its first node */
    struct intvec ranks; /* the global ranks of its nodes (-1: a member without one) */
    size_t count;        /* nodes in it */
    long root;           /* the root finding its waits end in (an index into the findings), -1 */
    size_t depth;        /* hops from its nodes to where their waits end (0: it is there) */
};

/* The classes of job `job`'s wait-for graph, by root, then nearest the root first. Returns how
 * many with the array in *out (free with report_wait_classes_free()); 0, *out NULL, when nobody
 * waits or there is no graph; -1 when out of memory. With node_class, *node_class gets each
 * node's class ((size_t)-1: none), an array the caller frees (NULL when 0 or -1 is returned). */
ssize_t report_wait_classes(const struct report_input *in, size_t job,
                            struct report_wait_class **out, size_t **node_class);

/* Frees what report_wait_classes() returned. NULL is fine. */
void report_wait_classes_free(struct report_wait_class *v, size_t n);

/* What a class does, for people, its verbs agreeing with its number of ranks: "waits in
 * AllReduce #4 on comm 7f3a91c2 for rank 3", "wait in Send #2 on comm ... for rank 5", "alive,
 * not waiting in NCCL", "ended", "no trace". */
void report_wait_words(const struct report_wait_class *c, char *buf, size_t len);

/* "AllReduce #4 on comm 7f3a91c2" for call node `call` (r: a waiting rank's record, or NULL),
 * "CommInitRank of comm ..." for a creation. */
void report_call_words(const struct waitgraph *g, size_t call, const struct ls_record *r, char *buf,
                       size_t len);

/* Writes the JSON report (schema "lockstep_report": REPORT_FORMAT_VERSION): ranks in classes
 * of equal state, each rank's own object for the ranks findings name apart, or for every rank
 * with `all_ranks` (--ranks all). Returns 0, or -1 when out of memory (the report is then cut
 * short). Errors are the stream's. */
int report_json(FILE *out, const struct report_input *in, int all_ranks);

/* Writes the text report: the root cause first, then details and rank states. With `color`,
 * uses ANSI colour. Errors are the stream's. */
void report_text(FILE *out, const struct report_input *in, int color);

/* Writes the report as one self-contained HTML page (inline CSS, SVG and a small script; no
 * network): findings, a timeline of the last collectives by class of ranks, rank states.
 * Returns 0, or -1 when out of memory (the page is then cut short). Errors are the stream's. */
int report_html(FILE *out, const struct report_input *in);

struct json_writer;
/* Writes "stacks" (how a live process's stacks were read, or why not) and "threads" (each with
 * tid, name, state, syscall, in_nccl_call, doing_the_work, library_thread, where, python,
 * stack) into the open JSON object (docs/report-format.md). */
void report_json_live_threads(struct json_writer *w, const struct m_live *lv);

/* "python": the call site's Python frames [{file, line, func}, ...] innermost first, or null. */
void report_json_python(struct json_writer *w, const struct tr_pysite *py);

/* report_json_ranks.c: "ranks" (classes of ranks in equal state) and "rank_detail" (every rank
 * with `all`, else those the findings name apart) of the jobs shown; an earlier attempt's
 * "ranks" (classes by how they ended; "rank_detail" with `all`). Return 0, or -1 when out of
 * memory. */
int report_json_ranks(struct json_writer *w, const struct report_input *in, int all);
int report_json_earlier_ranks(struct json_writer *w, const struct report_input *in,
                              const struct m_job *ej, int all);

#endif
