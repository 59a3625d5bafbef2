/* live_metrics.c -- watch's facts as Prometheus text (exposition format 0.0.4), for
 * node_exporter's textfile collector: one family per fact, bounded label sets. */
#include <stdio.h>

#include "live_facts_types.h"

/* A family's HELP and TYPE lines (the help texts here need no escaping). */
static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name="value" with the value escaped as the format wants (backslash, quote, newline); other
 * bytes outside printable ASCII become '?' (a label value must be UTF-8, and a file the
 * collector cannot parse loses every series in it). */
static void label(FILE *f, const char *sep, const char *name, const char *value)
{
    fprintf(f, "%s%s=\"", sep, name);
    for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
        if (*c == '\\' || *c == '"')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else
            fputc(*c < 0x20 || *c >= 0x7f ? '?' : *c, f);
    }
    fputc('"', f);
}

typedef double comm_value_fn(const struct live_comm_fact *c);
typedef double job_value_fn(const struct live_job_fact *j);

static double comm_stalled(const struct live_comm_fact *c)
{
    return c->stalled;
}
static double comm_slow(const struct live_comm_fact *c)
{
    return c->slow;
}
static double comm_collective(const struct live_comm_fact *c)
{
    return (double)c->collective;
}
static double comm_idle(const struct live_comm_fact *c)
{
    return c->idle_s;
}
static double job_stalled(const struct live_job_fact *j)
{
    return j->stalled;
}
static double job_stalled_s(const struct live_job_fact *j)
{
    return j->stalled_s;
}
static double job_stalls(const struct live_job_fact *j)
{
    return (double)j->stalls;
}
static double job_running(const struct live_job_fact *j)
{
    return (double)j->running_ranks;
}

/* One sample per communicator of `x`: NAME{job_name, comm, ranks} VALUE. */
static void comm_family(FILE *f, const struct live_facts *x, const char *name, const char *help,
                        comm_value_fn *value)
{
    family(f, name, "gauge", help);
    for (size_t i = 0; i < x->ncomms; i++) {
        const struct live_comm_fact *c = &x->comms[i];
        char comm[20];
        snprintf(comm, sizeof(comm), "%08llx", (unsigned long long)(c->id >> 32));
        fputs(name, f);
        label(f, "{", "job_name", c->job);
        label(f, ",", "comm", comm);
        label(f, ",", "ranks", c->ranks);
        fprintf(f, "} %.15g\n", value(c));
    }
}

/* One sample per job of `x`: NAME{job_name} VALUE. */
static void job_family(FILE *f, const struct live_facts *x, const char *name, const char *type,
                       const char *help, job_value_fn *value)
{
    family(f, name, type, help);
    for (size_t i = 0; i < x->njobs; i++) {
        fputs(name, f);
        label(f, "{", "job_name", x->jobs[i].job);
        fprintf(f, "} %.15g\n", value(&x->jobs[i]));
    }
}

int live_metrics_write(FILE *f, const void *arg)
{
    const struct live_facts *x = arg;
    family(f, "lockstep_watch_up", "gauge",
           "1 while lockstep watch runs; 0 in the last write of a watch that stopped.");
    fprintf(f, "lockstep_watch_up %d\n", x->up);
    family(f, "lockstep_communicators", "gauge",
           "Communicators with a member process running here, or stalled (the per-communicator "
           "series show at most 64: stalled first, then the most recently progressed).");
    fprintf(f, "lockstep_communicators %zu\n", x->comms_total);
    comm_family(f, x, "lockstep_comm_stalled",
                "1 while a reported stall is on the communicator, else 0.", comm_stalled);
    comm_family(f, x, "lockstep_comm_slow",
                "1 while members wait in the communicator past the short bound for a rank that "
                "works (slow, not hung yet), else 0.",
                comm_slow);
    comm_family(f, x, "lockstep_comm_collective_seq",
                "The newest collective sequence number issued on the communicator.",
                comm_collective);
    comm_family(f, x, "lockstep_comm_idle_seconds",
                "Seconds since a member last progressed on the communicator.", comm_idle);
    job_family(f, x, "lockstep_stalled", "gauge",
               "1 while a stall of the job that lockstep reported is not over, else 0.",
               job_stalled);
    job_family(f, x, "lockstep_stalled_seconds", "gauge",
               "Seconds since the job's oldest stall not over stopped progressing; 0.",
               job_stalled_s);
    job_family(f, x, "lockstep_stalls_total", "counter",
               "Stalls of the job reported since lockstep watch started.", job_stalls);
    job_family(f, x, "lockstep_running_ranks", "gauge",
               "Traced processes of the job running on this host.", job_running);
    family(f, "lockstep_finding", "gauge",
           "The first finding of the diagnosis of a stalled job: its kind and the ranks it is "
           "about; always 1, present while the stall is not over.");
    for (size_t i = 0; i < x->njobs; i++) {
        const struct live_job_fact *j = &x->jobs[i];
        if (!j->stalled || !j->first.kind[0])
            continue;
        fputs("lockstep_finding", f);
        label(f, "{", "job_name", j->job);
        label(f, ",", "kind", j->first.kind);
        label(f, ",", "ranks", j->first.ranks);
        fputs("} 1\n", f);
    }
    return 0;
}
