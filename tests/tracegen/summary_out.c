/* summary_out.c -- lockstep-tracegen --summary: the node summaries of the simulated job, made from
 * the ranks' traces in memory by the analyzer's own summary writer, so that a job of 131,072
 * ranks needs no trace file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../analyzer/read/node_summary.h"
#include "../../analyzer/read/summary_writer.h"
#include "../../analyzer/read/trace_reader.h"
#include "sim.h"

/* The summary of the ranks [lo, hi) of one host into out_dir/HOST.summary. */
static int write_host(const struct scenario *sc, struct rank_state *r, int lo, int hi,
                      unsigned char *image, uint64_t window)
{
    char host[64], path[4096], err[1024];
    host_of(sc, lo, host, sizeof(host));
    struct summary_writer *w = summary_writer_new(window);
    if (!w) {
        fprintf(stderr, "lockstep-tracegen: out of memory\n");
        return -1;
    }
    int rc = 0;
    for (int k = lo; k < hi && rc == 0; k++) {
        if (skip_trace(sc, k) || !r[k].f)
            continue;
        /* The name its file would have (sim.c's open_rank()). */
        snprintf(path, sizeof(path), "%s/lockstep-%s-%d-r%d.trace", sc->out_dir, host,
                 sc->pid_base + k, k);
        tw_image(r[k].f, image);
        struct tr_trace *t =
            trace_load_buffer_window(path, image, tw_file_size(r[k].f), window, err, sizeof(err));
        if (!t) {
            fprintf(stderr, "lockstep-tracegen: %s\n", err);
            rc = -1;
            break;
        }
        rc = node_summary_add(w, path, t);
        trace_free(t);
    }
    snprintf(path, sizeof(path), "%s/%s.summary", sc->out_dir, host);
    if (rc == 0 && summary_writer_count(w) > 0 &&
        summary_writer_write(w, path, host, err, sizeof(err)) < 0) {
        fprintf(stderr, "lockstep-tracegen: %s\n", err);
        rc = -1;
    }
    summary_writer_free(w);
    return rc;
}

int summary_out(const struct scenario *sc, struct rank_state *r, int n)
{
    uint64_t size = 0;
    for (int k = 0; k < n; k++)
        if (r[k].f && tw_file_size(r[k].f) > size)
            size = tw_file_size(r[k].f);
    unsigned char *image = malloc(size ? size : 1);
    if (!image) {
        fprintf(stderr, "lockstep-tracegen: out of memory\n");
        return -1;
    }
    int rph = sc->ranks_per_host > 0 ? sc->ranks_per_host : 8, rc = 0;
    for (int lo = 0; lo < n && rc == 0; lo += rph)
        rc = write_host(sc, r, lo, lo + rph < n ? lo + rph : n, image, sc->keep);
    free(image);
    return rc;
}
