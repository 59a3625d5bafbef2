/* test_live_facts.c -- what watch publishes, as written: the Prometheus text (label values
 * escaped and kept ASCII, counters _total, the finding only while stalled) and the status
 * JSON, from facts filled by hand. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "live_facts.h"
#include "unit_run.h"

/* What `write` writes of `f`; the caller frees it. */
static char *written(file_replace_fn *write, const struct live_facts *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    ck_assert_int_eq(write(out, f), 0);
    fclose(out);
    return buf;
}

/* Two jobs: "tp-server" stalled (a missing_ranks finding about rank 3), and one whose id needs
 * escaping, not stalled; one communicator of the first. */
static void two_jobs(struct live_facts *f, int up)
{
    memset(f, 0, sizeof(*f));
    f->dir = "/dev/shm/x";
    f->up = up;
    f->now_ns = 1795000000123456789ull;
    f->traces = f->running = 8;
    f->comms_total = 3;
    struct live_job_fact *j = &f->jobs[f->njobs++];
    snprintf(j->job, sizeof(j->job), "tp-server");
    j->running_ranks = 4;
    j->stalls = 2;
    j->stalled = 1;
    j->stalled_s = 41.25;
    j->since_ns = 1795000000000000000ull;
    snprintf(j->description, sizeof(j->description), "job tp-server (ranks 0-3) made no progress");
    snprintf(j->first.kind, sizeof(j->first.kind), "missing_ranks");
    snprintf(j->first.ranks, sizeof(j->first.ranks), "3");
    snprintf(j->first.summary, sizeof(j->first.summary), "ranks 0-2 wait in AllReduce #22");
    j = &f->jobs[f->njobs++];
    snprintf(j->job, sizeof(j->job), "a\"b\\c\nd\xc3\xa9");
    snprintf(j->first.kind, sizeof(j->first.kind), "op_mismatch"); /* a stall that is over */
    struct live_comm_fact *c = &f->comms[f->ncomms++];
    c->id = 0x7f3a91c2deadbeefull;
    snprintf(c->job, sizeof(c->job), "tp-server");
    snprintf(c->ranks, sizeof(c->ranks), "0-3");
    c->collective = 123456789012ull;
    c->idle_s = 1.5;
    c->stalled = 1;
}

START_TEST(metrics_text)
{
    struct live_facts f;
    two_jobs(&f, 1);
    char *text = written(live_metrics_write, &f);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE lockstep_watch_up gauge\nlockstep_watch_up 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE lockstep_stalls_total counter\n"
                                       "lockstep_stalls_total{job_name=\"tp-server\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "lockstep_stalled{job_name=\"tp-server\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "lockstep_stalled_seconds{job_name=\"tp-server\"} 41.25\n"));
    ck_assert_ptr_nonnull(strstr(text, "lockstep_stalled{job_name=\"a\\\"b\\\\c\\nd??\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(
        text, "lockstep_finding{job_name=\"tp-server\",kind=\"missing_ranks\",ranks=\"3\"} 1\n"));
    ck_assert_ptr_null(strstr(text, "op_mismatch")); /* not stalled: no finding series */
    ck_assert_ptr_nonnull(strstr(text, "lockstep_communicators 3\n"));
    ck_assert_ptr_nonnull(strstr(text, "lockstep_comm_collective_seq{job_name=\"tp-server\","
                                       "comm=\"7f3a91c2\",ranks=\"0-3\"} 123456789012\n"));
    ck_assert_ptr_nonnull(strstr(text, "lockstep_comm_idle_seconds{job_name=\"tp-server\","
                                       "comm=\"7f3a91c2\",ranks=\"0-3\"} 1.5\n"));
    free(text);
    two_jobs(&f, 0);
    text = written(live_metrics_write, &f);
    ck_assert_ptr_nonnull(strstr(text, "\nlockstep_watch_up 0\n"));
    free(text);
}
END_TEST

START_TEST(status_json)
{
    struct live_facts f;
    two_jobs(&f, 0);
    char *text = written(live_status_write, &f);
    ck_assert_ptr_nonnull(strstr(text, "\"status_format\": 1"));
    ck_assert_ptr_nonnull(strstr(text, "\"up\": false"));
    ck_assert_ptr_nonnull(strstr(text, "\"updated\": \"2026-11-18T"));
    ck_assert_ptr_nonnull(strstr(text, "\"since\": \"2026-11-18T"));
    ck_assert_ptr_nonnull(
        strstr(text, "\"stall\": \"job tp-server (ranks 0-3) made no progress\""));
    ck_assert_ptr_nonnull(strstr(text, "\"kind\": \"missing_ranks\""));
    ck_assert_ptr_nonnull(strstr(text, "\"summary\": \"ranks 0-2 wait in AllReduce #22\""));
    ck_assert_ptr_nonnull(strstr(text, "\"job\": \"a\\\"b\\\\c\\nd\xc3\xa9\""));
    ck_assert_ptr_nonnull(strstr(text, "\"finding\": null"));
    ck_assert_ptr_nonnull(strstr(text, "\"comm\": \"7f3a91c2\""));
    ck_assert_ptr_nonnull(strstr(text, "\"collective_seq\": 123456789012"));
    free(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("live_facts");
    TCase *tc = tcase_create("live_facts");
    tcase_add_test(tc, metrics_text);
    tcase_add_test(tc, status_json);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
