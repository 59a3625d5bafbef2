/* live_facts.c -- what watch publishes of a folder: jobs and communicators, from the monitor and
 * the stalls reported. */
#include <stdlib.h>
#include <string.h>

#include "live_facts.h"
#include "rankset.h"
#include "timefmt.h"

static double since_s(uint64_t then_ns, uint64_t now_ns)
{
    return now_ns > then_ns ? (double)(now_ns - then_ns) / 1e9 : 0.0;
}

/* The ranks of communicator `k`, compressed and cut to fit `len` (",..." at a comma). */
static void comm_ranks_words(const struct monitor *m, const struct mon_comm *k, char *buf,
                             size_t len)
{
    struct intvec ranks = {0};
    if (mon_comm_ranks(m, k, &ranks) == 0)
        rankset_format_fit(buf, len, ranks.v, ranks.n);
    else
        snprintf(buf, len, "?");
    intvec_free(&ranks);
}

/* Orders communicators for the bounded list: stalled first, then the most recently
 * progressed, then by id. */
struct comm_pick {
    const struct mon_comm *k;
    int stalled;
};

static int comm_pick_cmp(const void *a, const void *b)
{
    const struct comm_pick *x = a, *y = b;
    if (x->stalled != y->stalled)
        return y->stalled - x->stalled;
    if (x->k->last_progress_ns != y->k->last_progress_ns)
        return x->k->last_progress_ns > y->k->last_progress_ns ? -1 : 1;
    return x->k->id < y->k->id ? -1 : x->k->id > y->k->id;
}

static int comm_stalled(const struct monitor *m, const struct mon_stall_known *known,
                        const struct mon_comm *k)
{
    size_t at;
    return idmap_get(&known->comms, k->id, &at) ||
           (k->waiters && k->nmembers &&
            idmap_get(&known->jobs, m->t[k->members[0].trace].job + 1, &at));
}

static int gather_comms(struct live_facts *f, const struct monitor *m,
                        const struct mon_stall_known *known, uint64_t mono, uint64_t slow_comm)
{
    struct comm_pick *picks = malloc((m->comms.n ? m->comms.n : 1) * sizeof(*picks));
    if (!picks)
        return -1;
    size_t n = 0;
    for (size_t c = 0; c < m->comms.n; c++) {
        const struct mon_comm *k = &m->comms.v[c];
        int stalled = comm_stalled(m, known, k);
        if (k->nmembers && (k->running_live || stalled))
            picks[n++] = (struct comm_pick){k, stalled};
    }
    qsort(picks, n, sizeof(*picks), comm_pick_cmp);
    f->comms_total = n;
    for (size_t i = 0; i < n && f->ncomms < LIVE_FACTS_COMMS; i++) {
        const struct mon_comm *k = picks[i].k;
        struct live_comm_fact *c = &f->comms[f->ncomms++];
        c->id = k->id;
        live_job_label(m, m->t[k->members[0].trace].job, c->job, sizeof(c->job));
        comm_ranks_words(m, k, c->ranks, sizeof(c->ranks));
        c->collective = k->max_issued;
        c->idle_s = since_s(k->last_progress_ns, mono);
        c->stalled = picks[i].stalled;
        c->slow = !c->stalled && slow_comm && k->id == slow_comm;
    }
    free(picks);
    return 0;
}

/* Fills job fact `jf` of job `j`: its stalls not over (the oldest gives since when, the newest
 * its words and finding). */
static void fill_job(struct live_job_fact *jf, const struct monitor *m,
                     const struct live_stalled_set *set, size_t j, uint64_t mono)
{
    live_job_label(m, j, jf->job, sizeof(jf->job));
    for (size_t i = 0; i < m->n; i++)
        jf->running_ranks += m->t[i].job == j && m->t[i].running_here;
    jf->stalls = live_stalled_count(set, jf->job);
    for (size_t i = 0; i < set->n; i++) {
        const struct live_stalled *r = &set->v[i];
        if (live_stalled_job(m, r) != j)
            continue;
        if (!jf->stalled || since_s(r->stopped_ns, mono) > jf->stalled_s) {
            jf->stalled_s = since_s(r->stopped_ns, mono);
            jf->since_ns = r->since_ns;
        }
        jf->stalled = 1;
        snprintf(jf->description, sizeof(jf->description), "%s", r->description);
        jf->first = r->first;
    }
}

/* Job facts in order: stalled first, then those running here, then the rest; at most
 * LIVE_FACTS_JOBS. */
static void gather_jobs(struct live_facts *f, const struct monitor *m,
                        const struct live_stalled_set *set, uint64_t mono)
{
    for (int pass = 0; pass < 3; pass++)
        for (size_t j = 0; j < m->jobs.n && f->njobs < LIVE_FACTS_JOBS; j++) {
            struct live_job_fact jf;
            memset(&jf, 0, sizeof(jf));
            fill_job(&jf, m, set, j, mono);
            int rank = jf.stalled ? 0 : jf.running_ranks ? 1 : 2;
            if (rank == pass)
                f->jobs[f->njobs++] = jf;
        }
}

int live_facts_gather(struct live_facts *f, const struct monitor *m,
                      const struct live_stalled_set *set, int up, uint64_t slow_comm)
{
    memset(f, 0, sizeof(*f));
    f->dir = m->dir;
    f->up = up;
    f->now_ns = timefmt_now_ns();
    f->traces = m->n;
    f->running = monitor_running(m);
    uint64_t mono = timefmt_mono_ns();
    struct mon_stall_known known = {0};
    int rc = live_stalled_known(set, m, &known);
    if (rc == 0)
        rc = gather_comms(f, m, &known, mono, slow_comm);
    if (rc == 0)
        gather_jobs(f, m, set, mono);
    mon_stall_known_free(&known);
    return rc;
}

int live_facts_publish(const char *metrics_path, const char *status_path, const struct monitor *m,
                       const struct live_stalled_set *set, int up, uint64_t slow_comm)
{
    if (!metrics_path && !status_path)
        return 0;
    struct live_facts *f = malloc(sizeof(*f));
    if (!f || live_facts_gather(f, m, set, up, slow_comm) < 0) {
        fprintf(stderr, "lockstep: out of memory gathering the metrics of %s\n", m->dir);
        free(f);
        return -1;
    }
    int rc = 0;
    if (metrics_path && file_replace(metrics_path, live_metrics_write, f) < 0)
        rc = -1;
    if (status_path && file_replace(status_path, live_status_write, f) < 0)
        rc = -1;
    free(f);
    return rc;
}
