/* fuzz_trace_reader.c -- fuzz target: bytes -> trace reader (or node summary reader) -> job model
 * -> diagnosis -> reports. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "model.h"
#include "lockstep/summary_format.h"
#include "report.h"
#include "summary_reader.h"
#include "trace_reader.h"

/* An input holds up to FUZZ_MAX_TRACES traces back to back, each as long as its header's
 * file_size says (the rest of the input when that is absent or implausible), so one input
 * can be a whole job and the multi-rank diagnosis is reached too. */
#define FUZZ_MAX_TRACES 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Splits the input into pieces; returns how many. */
static size_t split(const uint8_t *data, size_t size, const uint8_t **at, size_t *len)
{
    size_t n = 0, off = 0;
    while (off < size && n < FUZZ_MAX_TRACES) {
        size_t left = size - off, take = left;
        uint64_t fsize;
        if (left >= offsetof(struct ls_header, file_size) + sizeof(fsize)) {
            memcpy(&fsize, data + off + offsetof(struct ls_header, file_size), sizeof(fsize));
            if (fsize >= LS_HEADER_SIZE && fsize < left)
                take = (size_t)fsize;
        }
        at[n] = data + off;
        len[n++] = take;
        off += take;
    }
    return n;
}

/* Aborts (a finding for the fuzzer) when a reader promise is broken. */
static void check_promises(const struct tr_trace *t, const char *name, const char *err)
{
    if (!t) {
        if (!strstr(err, name) || strlen(err) <= strlen(name) + 2) {
            fprintf(stderr, "error message without the file or the problem: '%s'\n", err);
            abort();
        }
        return;
    }
    for (size_t i = 0; i < t->nrecords; i++) {
        const struct ls_record *r = &t->records[i];
        if (r->op == LS_OP_NONE || r->op >= LS_OP_COUNT || r->callsite > t->nsites ||
            (i > 0 && r->ticket <= t->records[i - 1].ticket)) {
            fprintf(stderr, "record %zu of %s breaks the reader's promises\n", i, name);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w")))
        abort();
    const uint8_t *at[FUZZ_MAX_TRACES];
    size_t len[FUZZ_MAX_TRACES];
    size_t n = split(data, size, at, len);

    struct tr_trace *traces[FUZZ_MAX_TRACES];
    char *unreadable[FUZZ_MAX_TRACES];
    size_t ntraces = 0, nunreadable = 0;
    /* An input that starts as a node summary is one summary: its traces are the job. */
    struct summary_contents sc = {0};
    if (size >= LS_SUMMARY_MAGIC_LEN && memcmp(data, LS_SUMMARY_MAGIC, LS_SUMMARY_MAGIC_LEN) == 0) {
        char err[1024] = "";
        if (summary_load_buffer("fuzz.summary", data, size, 0, &sc, err, sizeof(err)) < 0)
            check_promises(NULL, "fuzz.summary", err);
        for (size_t i = 0; i < sc.ntraces && ntraces < FUZZ_MAX_TRACES; i++) {
            check_promises(sc.traces[i], sc.traces[i]->path, "");
            traces[ntraces++] = sc.traces[i];
            sc.traces[i] = NULL;
        }
        n = 0;
    }
    for (size_t i = 0; i < n; i++) {
        char name[32], err[1024] = "";
        snprintf(name, sizeof(name), "fuzz-%zu.trace", i);
        struct tr_trace *t = trace_load_buffer(name, at[i], len[i], err, sizeof(err));
        check_promises(t, name, err);
        if (t)
            traces[ntraces++] = t;
        else if ((unreadable[nunreadable] = strdup(err)) != NULL)
            nunreadable++;
    }

    struct findings fs = {0};
    struct model *m = ntraces ? model_build(traces, ntraces, NULL) : NULL;
    struct symbolizer *sym = symbolizer_new(0);
    if (m && sym) {
        struct diag_options opt = diag_default_options();
        struct waitgraph **graphs = calloc(m->njobs + 1, sizeof(*graphs));
        for (size_t j = 0; graphs && j < m->njobs; j++)
            diagnose_job_graph(m, j, sym, &opt, &fs, &graphs[j]);
        for (size_t k = 0; k < nunreadable; k++)
            diagnose_unreadable(&fs, unreadable[k]);
        struct report_input in = {
            m, &fs, sym, NULL, 0, (const char *const *)unreadable, nunreadable, NULL, graphs, NULL};
        report_json(sink, &in, 1);
        report_text(sink, &in, 1);
        for (size_t j = 0; graphs && j < m->njobs; j++)
            waitgraph_free(graphs[j]);
        free(graphs);
    }
    findings_free(&fs);
    symbolizer_free(sym);
    model_free(m);
    for (size_t i = 0; i < ntraces; i++)
        trace_free(traces[i]);
    for (size_t k = 0; k < nunreadable; k++)
        free(unreadable[k]);
    summary_contents_free(&sc);
    return 0;
}
