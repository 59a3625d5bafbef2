/* unit_ring.c -- Check unit tests of the shim's ring: reservation, publication, wrap. */
#include <check.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

static char dir[] = "/tmp/lockstep-unit-ringXXXXXX";

static struct ls_trace *start(const char *ring)
{
    setenv("LOCKSTEP_DIR", dir, 1);
    setenv("LOCKSTEP_RING", ring, 1);
    setenv("LOCKSTEP_STACK_DEPTH", "0", 1);
    return ls_active();
}

static void one_call(unsigned op, uint64_t count)
{
    struct ls_call_args a = {.op = op, .count = count, .dtype = 7, .redop = 0, .peer = -1};
    struct ls_call c;
    ck_assert(ls_call_enter(&c, &a));
    ls_call_exit(&c, 0);
}

START_TEST(test_records_in_order)
{
    struct ls_trace *t = start("1024");
    ck_assert_ptr_nonnull(t);
    for (int i = 0; i < 10; i++)
        one_call(LS_OP_GROUP_START, (uint64_t)i);
    /* The thread reserved one block of tickets (1024 / 32) and used the first ten. */
    ck_assert_uint_eq(t->hdr->ticket_block, 32);
    ck_assert_uint_eq(t->hdr->next_ticket, 32);
    ck_assert_uint_eq(t->hdr->threads[0].block_start, 1);
    ck_assert(ls_ticket_reserved(t->hdr, 10) && ls_ticket_reserved(t->hdr, 31));
    ck_assert(!ls_ticket_reserved(t->hdr, 32));
    for (uint64_t i = 0; i < 10; i++) {
        struct ls_record *r = &t->ring[i];
        ck_assert_uint_eq(r->ticket, i + 1);
        ck_assert_uint_eq(r->count, i);
        ck_assert_int_eq(r->result, 0);
        ck_assert_uint_ge(r->exit_ns, r->enter_ns);
    }
    ck_assert_uint_eq(ls_calls_in_flight(t->hdr), 0);
}
END_TEST

START_TEST(test_in_flight_until_exit)
{
    struct ls_trace *t = start("1024");
    struct ls_call_args a = {.op = LS_OP_GROUP_END, .dtype = -1, .redop = -1, .peer = -1};
    struct ls_call c;
    ck_assert(ls_call_enter(&c, &a));
    struct ls_record *r = &t->ring[0];
    ck_assert_uint_eq(r->ticket, 1);
    ck_assert_int_eq(r->result, LS_RESULT_PENDING);
    ck_assert_uint_eq(r->exit_ns, 0);
    ck_assert_uint_eq(ls_calls_in_flight(t->hdr), 1);
    /* A nested call (NCCL calling its own API) is forwarded, not recorded. */
    struct ls_call inner;
    ck_assert(!ls_call_enter(&inner, &a));
    ls_call_exit(&c, 3);
    ck_assert_int_eq(r->result, 3);
    ck_assert_uint_ne(r->exit_ns, 0);
    ck_assert_uint_eq(t->hdr->next_ticket, t->hdr->ticket_block);
    ck_assert_uint_ge(ls_last_exit_ns(t->hdr), ls_last_enter_ns(t->hdr));
    ck_assert_uint_ne(ls_last_enter_ns(t->hdr), 0);
}
END_TEST

START_TEST(test_wrap_keeps_newest)
{
    struct ls_trace *t = start("100"); /* rounded up to 128 */
    ck_assert_uint_eq(t->hdr->ring_cap, 128);
    for (int i = 0; i < 1000; i++)
        one_call(LS_OP_GROUP_START, (uint64_t)i);
    for (uint64_t tk = 1000 - 128; tk < 1000; tk++) {
        struct ls_record *r = &t->ring[tk & 127];
        ck_assert_uint_eq(r->ticket, tk + 1);
        ck_assert_uint_eq(r->count, tk);
    }
}
END_TEST

static void *hammer(void *arg)
{
    for (int i = 0; i < 5000; i++)
        one_call(LS_OP_GROUP_START, (uint64_t)(uintptr_t)arg);
    return NULL;
}

START_TEST(test_threads_lose_nothing)
{
    struct ls_trace *t = start("65536");
    pthread_t th[8];
    for (uintptr_t i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, hammer, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    /* Blocks of 64: every thread's last block was partly used; its thread gave the rest back
     * as void records when it ended. */
    uint64_t next = t->hdr->next_ticket;
    ck_assert_uint_eq(t->hdr->ticket_block, 64);
    ck_assert_uint_ge(next, 40000);
    ck_assert_uint_le(next, 40000 + 8 * 64);
    int per_thread[8] = {0};
    uint64_t voids = 0;
    for (uint64_t tk = 0; tk < next; tk++) {
        struct ls_record *r = &t->ring[tk];
        ck_assert_uint_eq(r->ticket, tk + 1);
        if (r->flags & LS_REC_VOID) {
            ck_assert_uint_eq(r->op, LS_OP_NONE);
            voids++;
            continue;
        }
        ck_assert_uint_lt(r->count, 8);
        per_thread[r->count]++;
    }
    ck_assert_uint_eq(voids, next - 40000);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(per_thread[i], 5000);
    /* The slots were freed; each keeps its last block (a reader's window still reads it), all
     * of whose tickets are records or void now: none is counted as reserved. */
    for (int i = 0; i < LS_THREAD_SLOTS; i++)
        ck_assert_uint_eq(t->hdr->threads[i].tid, 0);
    for (uint64_t tk = 0; tk < next; tk++)
        ck_assert_uint_eq(t->ring[tk].ticket, tk + 1);
}
END_TEST

START_TEST(test_header_identity)
{
    setenv("RANK", "5", 1);
    setenv("WORLD_SIZE", "8", 1);
    setenv("LOCKSTEP_JOB", "job-42", 1);
    struct ls_trace *t = start("1024");
    ck_assert_int_eq(t->hdr->rank, 5);
    ck_assert_int_eq(t->hdr->world_size, 8);
    ck_assert_str_eq(t->hdr->job, "job-42");
    ck_assert_str_eq(t->hdr->job_source, "LOCKSTEP_JOB");
    ck_assert_int_eq(t->hdr->pid, getpid());
    ck_assert_mem_eq(t->hdr->magic, LS_MAGIC, LS_MAGIC_LEN);
    ck_assert_ptr_nonnull(strstr(t->path, "-r5.trace"));
    struct ls_layout l =
        ls_layout_for(t->hdr->comm_cap, t->hdr->peer_cap, t->hdr->site_cap, t->hdr->stack_depth,
                      t->hdr->pysite_cap, t->hdr->py_depth, t->hdr->str_cap, t->hdr->ring_cap);
    ck_assert_uint_eq(t->hdr->ring_off, l.ring_off);
    ck_assert_uint_eq(t->hdr->file_size, l.file_size);
    ck_assert_uint_eq(t->hdr->ring_off % 4096, 0);
}
END_TEST

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    Suite *s = suite_create("shim-ring");
    TCase *tc = tcase_create("ring");
    tcase_add_test(tc, test_records_in_order);
    tcase_add_test(tc, test_in_flight_until_exit);
    tcase_add_test(tc, test_wrap_keeps_newest);
    tcase_add_test(tc, test_threads_lose_nothing);
    tcase_add_test(tc, test_header_identity);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK); /* each test gets a fresh process, so a fresh trace */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? 1 : 0;
}
