/* live_status.c -- watch's facts as a JSON status file (docs/report-format.md, "Status file"). */
#include <stdio.h>
#include <time.h>

#include "json_writer.h"
#include "live_facts_types.h"

/* CLOCK_REALTIME ns as "2026-11-27T10:04:31.250Z" (UTC); null for 0. */
static void json_utc(struct json_writer *w, const char *key, uint64_t ns)
{
    if (!ns) {
        json_null(w, key);
        return;
    }
    time_t s = (time_t)(ns / 1000000000ull);
    struct tm tm;
    char buf[64];
    gmtime_r(&s, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%03uZ", (unsigned)(ns / 1000000ull % 1000));
    json_string(w, key, buf);
}

static void job_json(struct json_writer *w, const struct live_job_fact *j)
{
    json_begin_object(w, NULL);
    json_string(w, "job", j->job);
    json_bool(w, "stalled", j->stalled);
    json_utc(w, "since", j->since_ns);
    json_double(w, "stalled_s", j->stalled_s);
    json_string(w, "stall", j->stalled ? j->description : NULL);
    json_uint(w, "stalls", j->stalls);
    json_uint(w, "running_ranks", j->running_ranks);
    if (j->stalled && j->first.kind[0]) {
        json_begin_object(w, "finding");
        json_string(w, "kind", j->first.kind);
        json_string(w, "ranks", j->first.ranks);
        json_string(w, "summary", j->first.summary);
        json_end_object(w);
    } else {
        json_null(w, "finding");
    }
    json_end_object(w);
}

static void comm_json(struct json_writer *w, const struct live_comm_fact *c)
{
    char comm[20];
    snprintf(comm, sizeof(comm), "%08llx", (unsigned long long)(c->id >> 32));
    json_begin_object(w, NULL);
    json_string(w, "comm", comm);
    json_string(w, "job", c->job);
    json_string(w, "ranks", c->ranks);
    json_uint(w, "collective_seq", c->collective);
    json_double(w, "idle_s", c->idle_s);
    json_bool(w, "stalled", c->stalled);
    json_bool(w, "slow", c->slow);
    json_end_object(w);
}

int live_status_write(FILE *f, const void *arg)
{
    const struct live_facts *x = arg;
    struct json_writer w;
    json_init(&w, f);
    json_begin_object(&w, NULL);
    json_uint(&w, "status_format", LIVE_STATUS_FORMAT);
    json_string(&w, "dir", x->dir);
    json_bool(&w, "up", x->up);
    json_utc(&w, "updated", x->now_ns);
    json_uint(&w, "traces", x->traces);
    json_uint(&w, "running", x->running);
    json_begin_array(&w, "jobs");
    for (size_t i = 0; i < x->njobs; i++)
        job_json(&w, &x->jobs[i]);
    json_end_array(&w);
    json_uint(&w, "communicator_count", x->comms_total);
    json_begin_array(&w, "communicators");
    for (size_t i = 0; i < x->ncomms; i++)
        comm_json(&w, &x->comms[i]);
    json_end_array(&w);
    json_end_object(&w);
    fputc('\n', f);
    return 0;
}
