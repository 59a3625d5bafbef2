/* unit_comms.c -- Check unit tests of the shim's communicator registry and peer table. */
#include <check.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

static char dir[] = "/tmp/lockstep-unit-commsXXXXXX";

static struct ls_trace *start(void)
{
    setenv("LOCKSTEP_DIR", dir, 1);
    setenv("LOCKSTEP_STACK_DEPTH", "0", 1);
    return ls_active();
}

START_TEST(test_ids_agree_and_differ)
{
    unsigned char a[128], b[128];
    memset(a, 7, sizeof a);
    memcpy(b, a, sizeof b);
    ck_assert_uint_eq(ls_comm_id_from_unique(a, sizeof a), ls_comm_id_from_unique(b, sizeof b));
    b[127] ^= 1;
    ck_assert_uint_ne(ls_comm_id_from_unique(a, sizeof a), ls_comm_id_from_unique(b, sizeof b));
    uint64_t p = ls_comm_id_from_unique(a, sizeof a);
    ck_assert_uint_eq(ls_comm_id_child(p, 0, 1, 0), ls_comm_id_child(p, 0, 1, 0));
    ck_assert_uint_ne(ls_comm_id_child(p, 0, 1, 0), ls_comm_id_child(p, 0, 0, 0));
    ck_assert_uint_ne(ls_comm_id_child(p, 0, 1, 0), ls_comm_id_child(p, 1, 1, 0));
    ck_assert_uint_ne(ls_comm_id_child(p, 0, 1, 0), 0);
}
END_TEST

START_TEST(test_register_lookup_end)
{
    struct ls_trace *t = start();
    ck_assert_ptr_nonnull(t);
    int a = ls_comm_register(t, 0x1000, 0xaaaa, 0, 4, 1, LS_OP_COMM_INIT_RANK, -1, -1, 0, NULL);
    int b = ls_comm_register(t, 0x2000, 0xbbbb, 0xaaaa, 2, 0, LS_OP_COMM_SPLIT, 1, 3, 0, NULL);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 1);
    ck_assert_uint_eq(t->hdr->comm_count, 2);
    ck_assert_int_eq(ls_comm_lookup(t, 0x1000), a);
    ck_assert_int_eq(ls_comm_lookup(t, 0x2000), b);
    ck_assert_int_eq(ls_comm_lookup(t, 0x1000), a);
    ck_assert_uint_eq(t->comms[b].parent_id, 0xaaaa);
    ck_assert_int_eq(t->comms[b].color, 1);
    ck_assert_int_eq(t->comms[b].init_result, LS_RESULT_PENDING);

    ls_comm_end(t, 0x1000, LS_COMM_DESTROYED);
    ck_assert(t->comms[a].flags & LS_COMM_DESTROYED);
    ck_assert_uint_ne(t->comms[a].ended_ns, 0);
    /* The handle is forgotten: a new communicator at the same address is a new entry. */
    int c = ls_comm_lookup(t, 0x1000);
    ck_assert_int_eq(c, 2);
    ck_assert_uint_eq(t->comms[c].create_op, LS_OP_NONE);
    ck_assert_uint_ne(t->comms[c].comm_id, 0xaaaa);
}
END_TEST

START_TEST(test_deferred_handle)
{
    struct ls_trace *t = start();
    void *out = NULL;
    int idx = ls_comm_register(t, 0, 0xcccc, 0, 2, 1, LS_OP_COMM_SPLIT, 0, 0, 0, NULL);
    ls_comm_defer(t, idx, (void *const *)&out, 1);
    /* Before the group ends, even a non-zero value is not trusted. */
    out = (void *)0x3000;
    ls_comm_resolve_pending(t, 0);
    ck_assert_uint_eq(t->comms[idx].handle, 0);
    ls_comm_settle();
    ls_comm_resolve_pending(t, 0);
    ck_assert_uint_eq(t->comms[idx].handle, 0x3000);
    ck_assert_int_eq(ls_comm_lookup(t, 0x3000), idx);

    /* A nonblocking creation binds when its handle is first used. */
    void *out2 = NULL;
    int idx2 = ls_comm_register(t, 0, 0xdddd, 0, 2, 0, LS_OP_COMM_SPLIT, 1, 0, 0, NULL);
    ls_comm_defer(t, idx2, (void *const *)&out2, 0);
    out2 = (void *)0x4000;
    ck_assert_int_eq(ls_comm_lookup(t, 0x4000), idx2);
    ck_assert_uint_eq(t->comms[idx2].comm_id, 0xdddd);
}
END_TEST

START_TEST(test_peers_dense_and_stable)
{
    struct ls_trace *t = start();
    int a = ls_comm_register(t, 0x1000, 0xaaaa, 0, 8, 0, LS_OP_COMM_INIT_RANK, -1, -1, 0, NULL);
    int b = ls_comm_register(t, 0x2000, 0xbbbb, 0, 8, 0, LS_OP_COMM_INIT_RANK, -1, -1, 0, NULL);
    struct ls_peer *p1 = ls_peer_get(t, a, 3);
    struct ls_peer *p2 = ls_peer_get(t, b, 3);
    struct ls_peer *p3 = ls_peer_get(t, a, 4);
    ck_assert_ptr_nonnull(p1);
    ck_assert_ptr_ne(p1, p2);
    ck_assert_ptr_ne(p1, p3);
    ck_assert_ptr_eq(ls_peer_get(t, a, 3), p1);
    ck_assert_uint_eq(t->hdr->peer_count, 3);
    ck_assert_ptr_eq(p1, &t->peers[0]);
    ck_assert_ptr_eq(p3, &t->peers[2]);
    ck_assert_uint_eq(p2->comm_id, 0xbbbb);
    ck_assert_int_eq(p3->peer, 4);
    ck_assert_uint_eq(p3->comm_idx, (uint32_t)a);
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
    Suite *s = suite_create("shim-comms");
    TCase *tc = tcase_create("comms");
    tcase_add_test(tc, test_ids_agree_and_differ);
    tcase_add_test(tc, test_register_lookup_end);
    tcase_add_test(tc, test_deferred_handle);
    tcase_add_test(tc, test_peers_dense_and_stable);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return failed ? 1 : 0;
}
