/* coll_check.c -- NCCL correctness program: every collective, p2p, split, nonblocking init,
 * InitAll; prints a checksum. */
/* Results are read only after tp_sync(), so it passes in the emulator's async mode too. */
#include "common.h"

#include <math.h>
#include <string.h>

enum kind {
    K_ALLREDUCE,
    K_REDUCE,
    K_BROADCAST,
    K_BCAST,
    K_ALLGATHER,
    K_REDUCESCATTER,
    K_ALLTOALL,
    K_GATHER,
    K_SCATTER
};

static const char *kind_name[] = {"AllReduce",     "Reduce",   "Broadcast", "Bcast",  "AllGather",
                                  "ReduceScatter", "AlltoAll", "Gather",    "Scatter"};

struct test {
    enum kind kind;
    ncclDataType_t dt;
    int op;       /* ncclRedOp_t, -1 for PreMulSum, -2 for none */
    size_t count; /* NCCL's count argument */
    int root, inplace, salt;
    int n, rank;
};

static uint64_t checksum = TP_FNV_INIT;
static int nchecks;

static int is_fp8(ncclDataType_t dt)
{
    return dt == ncclFloat8e4m3 || dt == ncclFloat8e5m2;
}

static int is_int(ncclDataType_t dt)
{
    return dt <= ncclUint64;
}

/* Round v through dt (so expectations wrap or round exactly like results). */
static double as_dtype(double v, ncclDataType_t dt)
{
    unsigned char tmp[8];
    tp_set(tmp, 0, dt, v);
    return tp_get(tmp, 0, dt);
}

/* Input element i of rank q: small enough that every reduction is exact. */
static double input(const struct test *t, int q, size_t i)
{
    int p = tp_pattern(q, i, t->salt);
    if (t->op == ncclProd)
        return 1 + p % 2;
    if (is_fp8(t->dt) && (t->op == ncclSum || t->op == ncclAvg || t->op == -1))
        return p % 2;
    return p;
}

static double reduced(const struct test *t, size_t i)
{
    double acc = input(t, 0, i);
    for (int q = 1; q < t->n; q++) {
        double x = input(t, q, i);
        switch (t->op) {
        case ncclProd:
            acc *= x;
            break;
        case ncclMax:
            acc = x > acc ? x : acc;
            break;
        case ncclMin:
            acc = x < acc ? x : acc;
            break;
        default:
            acc += x;
        }
    }
    if (t->op == -1)
        acc *= 2; /* PreMulSum with scalar 2 */
    if (t->op == ncclAvg)
        acc = is_int(t->dt) ? trunc(acc / t->n) : acc / t->n;
    return as_dtype(acc, t->dt);
}

static double expect(size_t i, void *ctx)
{
    const struct test *t = ctx;
    size_t c = t->count;
    switch (t->kind) {
    case K_ALLREDUCE:
    case K_REDUCE:
        return reduced(t, i);
    case K_BROADCAST:
    case K_BCAST:
        return input(t, t->root, i);
    case K_ALLGATHER:
    case K_GATHER:
        return input(t, (int)(i / c), i % c);
    case K_REDUCESCATTER:
        return reduced(t, (size_t)t->rank * c + i);
    case K_ALLTOALL:
        return input(t, (int)(i / c), (size_t)t->rank * c + i % c);
    case K_SCATTER:
        return input(t, t->root, (size_t)t->rank * c + i);
    }
    return 0;
}

static void fill(const struct test *t, void *buf, size_t count)
{
    for (size_t i = 0; i < count; i++)
        tp_set(buf, i, t->dt, input(t, t->rank, i));
}

static void account(const void *buf, size_t bytes)
{
    checksum = tp_fnv(checksum, buf, bytes);
    nchecks++;
}

/* Run one collective described by t on comm, verify, add to the checksum. */
static void run(struct test *t, ncclComm_t comm)
{
    size_t esz = tp_dtype_size(t->dt), c = t->count, n = (size_t)t->n, r = (size_t)t->rank;
    int root_here = t->rank == t->root;
    size_t send_n = c, recv_n = c;
    switch (t->kind) {
    case K_ALLGATHER:
        recv_n = n * c;
        break;
    case K_GATHER:
        recv_n = root_here ? n * c : 0;
        break;
    case K_REDUCESCATTER:
        send_n = n * c;
        break;
    case K_ALLTOALL:
        send_n = recv_n = n * c;
        break;
    case K_SCATTER:
        send_n = n * c;
        break;
    case K_REDUCE:
        recv_n = root_here ? c : 0;
        break;
    default:
        break;
    }
    size_t big = send_n > recv_n ? send_n : recv_n;
    unsigned char *sendbuf = tp_alloc(big * esz), *recvbuf = sendbuf;
    unsigned char *send = sendbuf, *recv;
    if (!t->inplace)
        recvbuf = tp_alloc(recv_n * esz);
    recv = recvbuf;
    if (t->inplace && t->kind == K_ALLGATHER)
        send = recvbuf + r * c * esz;
    if (t->inplace && t->kind == K_REDUCESCATTER)
        recv = sendbuf + r * c * esz;
    if (t->inplace && t->kind == K_GATHER && root_here)
        send = recvbuf + r * c * esz;
    if (t->inplace && t->kind == K_SCATTER && root_here)
        recv = sendbuf + r * c * esz;
    fill(t, send, send_n);

    ncclRedOp_t op = (ncclRedOp_t)t->op;
    unsigned char scalar[8];
    if (t->op == -1) {
        tp_set(scalar, 0, t->dt, 2.0);
        TP_CHECK(ncclRedOpCreatePreMulSum(&op, scalar, t->dt, ncclScalarHostImmediate, comm));
    }
    switch (t->kind) {
    case K_ALLREDUCE:
        TP_CHECK(ncclAllReduce(send, recv, c, t->dt, op, comm, NULL));
        break;
    case K_REDUCE:
        TP_CHECK(ncclReduce(send, recv, c, t->dt, op, t->root, comm, NULL));
        break;
    case K_BROADCAST:
        TP_CHECK(ncclBroadcast(send, recv, c, t->dt, t->root, comm, NULL));
        break;
    case K_BCAST:
        TP_CHECK(ncclBcast(send, c, t->dt, t->root, comm, NULL));
        recv = send;
        break;
    case K_ALLGATHER:
        TP_CHECK(ncclAllGather(send, recv, c, t->dt, comm, NULL));
        break;
    case K_REDUCESCATTER:
        TP_CHECK(ncclReduceScatter(send, recv, c, t->dt, op, comm, NULL));
        break;
    case K_ALLTOALL:
        TP_CHECK(ncclAlltoAll(send, recv, c, t->dt, comm, NULL));
        break;
    case K_GATHER:
        TP_CHECK(ncclGather(send, recv, c, t->dt, t->root, comm, NULL));
        break;
    case K_SCATTER:
        TP_CHECK(ncclScatter(send, recv, c, t->dt, t->root, comm, NULL));
        break;
    }
    if (t->op == -1)
        TP_CHECK(ncclRedOpDestroy(op, comm)); /* allowed before it ran */
    tp_sync();

    char what[128];
    snprintf(what, sizeof(what), "%s%s count %zu op %d root %d", kind_name[t->kind],
             t->inplace ? " (in place)" : "", c, t->op, t->root);
    size_t check_n = recv_n;
    if ((t->kind == K_REDUCE || t->kind == K_GATHER) && !root_here)
        check_n = 0;
    double tol = t->op == ncclAvg && !is_int(t->dt) ? 1e-6 : 0;
    tp_verify(recv, check_n, t->dt, expect, t, tol, what);
    account(recv, check_n * esz);
    free(sendbuf);
    if (!t->inplace)
        free(recvbuf);
}

static void collectives(ncclComm_t comm, int n, int rank)
{
    static const ncclDataType_t dts[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                         ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                         ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
    static const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, -1};
    int salt = 1;
    struct test t = {.n = n, .rank = rank};
    /* Every datatype with every reduction, small counts, alternating in place. */
    for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            t = (struct test){K_ALLREDUCE,  dts[d], ops[o], 1000 + d, 0,
                              (int)(o % 2), salt++, n,      rank};
            run(&t, comm);
        }
        t = (struct test){K_REDUCESCATTER, dts[d], ncclSum, 300, 0, (int)(d % 2), salt++, n, rank};
        run(&t, comm);
        t = (struct test){K_REDUCE, dts[d], ncclMax, 500, n - 1, 0, salt++, n, rank};
        run(&t, comm);
        t = (struct test){K_BROADCAST, dts[d], -2, 777, (int)d % n, (int)(d % 2), salt++, n, rank};
        run(&t, comm);
        t = (struct test){K_ALLGATHER, dts[d], -2, 321, 0, (int)(d % 2), salt++, n, rank};
        run(&t, comm);
    }
    /* Every collective, several roots, in place or not, counts spanning many
     * arena chunks. */
    for (int inplace = 0; inplace < 2; inplace++) {
        int root = inplace ? n - 1 : 0;
        struct test big[] = {
            {K_ALLREDUCE, ncclFloat32, ncclSum, 300000, 0, inplace, salt++, n, rank},
            {K_ALLREDUCE, ncclFloat64, ncclMax, 100000, 0, inplace, salt++, n, rank},
            {K_REDUCE, ncclFloat32, ncclSum, 300000, root, inplace, salt++, n, rank},
            {K_BROADCAST, ncclFloat32, -2, 300000, root, inplace, salt++, n, rank},
            {K_BCAST, ncclInt32, -2, 100000, root, 1, salt++, n, rank},
            {K_ALLGATHER, ncclFloat32, -2, 70000, 0, inplace, salt++, n, rank},
            {K_REDUCESCATTER, ncclFloat32, ncclSum, 70000, 0, inplace, salt++, n, rank},
            {K_REDUCESCATTER, ncclInt64, -1, 20000, 0, inplace, salt++, n, rank},
            {K_ALLTOALL, ncclFloat32, -2, 40000, 0, inplace, salt++, n, rank},
            {K_GATHER, ncclUint8, -2, 150000, root, inplace, salt++, n, rank},
            {K_SCATTER, ncclFloat16, -2, 90000, root, inplace, salt++, n, rank},
            {K_ALLREDUCE, ncclBfloat16, ncclAvg, 200000, 0, inplace, salt++, n, rank},
        };
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
            run(&big[i], comm);
    }
}

/* Ring exchange: each rank sends to rank+1 and receives from rank-1 in a
 * group (deadlocks without the group since Send is a rendezvous). */
static void ring(ncclComm_t comm, int n, int rank, size_t count, int salt)
{
    float *s = tp_alloc(count * sizeof(float)), *r = tp_alloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        s[i] = (float)tp_pattern(rank, i, salt);
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSend(s, count, ncclFloat32, next, comm, NULL));
    TP_CHECK(ncclRecv(r, count, ncclFloat32, prev, comm, NULL));
    TP_CHECK(ncclGroupEnd());
    tp_sync();
    for (size_t i = 0; i < count; i++)
        if (r[i] != (float)tp_pattern(prev, i, salt))
            tp_die("WRONG RESULT in ring Send/Recv count %zu: element %zu is %g, expected %d",
                   count, i, r[i], tp_pattern(prev, i, salt));
    account(r, count * sizeof(float));
    free(s);
    free(r);
}

static void sum_check(ncclComm_t comm, const int *members, int nmembers, int salt, const char *what)
{
    enum { C = 5000 };
    int32_t *buf = tp_alloc(C * sizeof(int32_t));
    int me;
    TP_CHECK(ncclCommUserRank(comm, &me));
    (void)me;
    for (size_t i = 0; i < C; i++)
        buf[i] = tp_pattern(tp_rank(), i, salt);
    TP_CHECK(ncclAllReduce(buf, buf, C, ncclInt32, ncclSum, comm, NULL));
    tp_sync();
    for (size_t i = 0; i < C; i++) {
        int32_t want = 0;
        for (int m = 0; m < nmembers; m++)
            want += tp_pattern(members[m], i, salt);
        if (buf[i] != want)
            tp_die("WRONG RESULT in %s: element %zu is %d, expected %d", what, i, buf[i], want);
    }
    account(buf, C * sizeof(int32_t));
    free(buf);
}

/* Even/odd split ordered by descending parent rank; a NOCOLOR split. */
static void split(ncclComm_t comm, int n, int rank)
{
    ncclComm_t sub = NULL;
    TP_CHECK(ncclCommSplit(comm, rank % 2, -rank, &sub, NULL));
    if (!sub)
        tp_die("ncclCommSplit returned a NULL communicator");
    int members[64], m = 0, sub_rank, sub_n;
    for (int q = n - 1; q >= 0; q--)
        if (q % 2 == rank % 2)
            members[m++] = q;
    TP_CHECK(ncclCommCount(sub, &sub_n));
    TP_CHECK(ncclCommUserRank(sub, &sub_rank));
    if (sub_n != m || members[sub_rank] != rank)
        tp_die("split: got rank %d of %d, expected %d members ordered by key", sub_rank, sub_n, m);
    sum_check(sub, members, m, 900, "AllReduce on split communicator");
    TP_CHECK(ncclCommDestroy(sub));

    ncclComm_t none = (ncclComm_t)0x1;
    TP_CHECK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, 0, &none, NULL));
    if (rank == 0 && none != NULL)
        tp_die("NOCOLOR split did not yield NULL");
    if (rank != 0) {
        if (!none)
            tp_die("split with color 7 yielded NULL");
        for (int q = 1; q < n; q++)
            members[q - 1] = q;
        sum_check(none, members, n - 1, 901, "AllReduce on NOCOLOR-split communicator");
        TP_CHECK(ncclCommDestroy(none));
    }
}

/* The last rank drops out; the others shrink the world and reduce on it. */
static void shrink(ncclComm_t comm, int n, int rank)
{
    if (n < 2 || rank == n - 1)
        return;
    int excluded = n - 1, members[64], sub_n, sub_rank;
    ncclComm_t sub = NULL;
    TP_CHECK(ncclCommShrink(comm, &excluded, 1, &sub, NULL, NCCL_SHRINK_DEFAULT));
    if (!sub)
        tp_die("ncclCommShrink returned a NULL communicator");
    TP_CHECK(ncclCommCount(sub, &sub_n));
    TP_CHECK(ncclCommUserRank(sub, &sub_rank));
    if (sub_n != n - 1 || sub_rank != rank)
        tp_die("shrink: rank %d of %d", sub_rank, sub_n);
    for (int q = 0; q < n - 1; q++)
        members[q] = q;
    sum_check(sub, members, n - 1, 904, "AllReduce on shrunk communicator");
    TP_CHECK(ncclCommDestroy(sub));
}

static void wait_async(ncclComm_t comm, const char *what)
{
    ncclResult_t st;
    do {
        TP_CHECK(ncclCommGetAsyncError(comm, &st));
        if (st == ncclInProgress)
            tp_sleep_ms(1);
    } while (st == ncclInProgress);
    if (st != ncclSuccess)
        tp_die("%s failed asynchronously: %s", what, ncclGetErrorString(st));
}

/* config.blocking = 0: init and split return ncclInProgress, then complete. */
static void nonblocking(int n, int rank)
{
    ncclUniqueId id = tp_exchange_id("nonblocking");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t res = ncclCommInitRankConfig(&comm, n, id, rank, &config);
    if (res != ncclSuccess && res != ncclInProgress)
        tp_die("nonblocking init returned %s", ncclGetErrorString(res));
    wait_async(comm, "nonblocking init");
    int members[64];
    for (int q = 0; q < n; q++)
        members[q] = q;
    sum_check(comm, members, n, 902, "AllReduce on nonblocking communicator");

    ncclComm_t sub = NULL;
    res = ncclCommSplit(comm, 0, rank, &sub, &config);
    if (res != ncclSuccess && res != ncclInProgress)
        tp_die("nonblocking split returned %s", ncclGetErrorString(res));
    wait_async(comm, "nonblocking split");
    if (!sub)
        tp_die("nonblocking split completed without a communicator");
    wait_async(sub, "nonblocking split child");
    sum_check(sub, members, n, 903, "AllReduce on nonblocking split communicator");
    TP_CHECK(ncclCommDestroy(sub));
    TP_CHECK(ncclCommFinalize(comm));
    TP_CHECK(ncclCommDestroy(comm));
}

/* Two "devices" in this one process: collectives and p2p between them. */
static void init_all(void)
{
    ncclComm_t comms[2];
    int devs[2] = {0, 1};
    TP_CHECK(ncclCommInitAll(comms, 2, devs));
    int dev, cnt;
    TP_CHECK(ncclCommCuDevice(comms[1], &dev));
    TP_CHECK(ncclCommCount(comms[1], &cnt));
    if (dev != 1 || cnt != 2)
        tp_die("InitAll: device %d count %d", dev, cnt);
    enum { C = 70000 };
    float *a = tp_alloc(C * sizeof(float)), *b = tp_alloc(C * sizeof(float));
    float *ra = tp_alloc(C * sizeof(float)), *rb = tp_alloc(C * sizeof(float));
    for (size_t i = 0; i < C; i++) {
        a[i] = (float)i;
        b[i] = 2.0f * (float)i;
    }
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclAllReduce(a, ra, C, ncclFloat32, ncclSum, comms[0], NULL));
    TP_CHECK(ncclAllReduce(b, rb, C, ncclFloat32, ncclSum, comms[1], NULL));
    TP_CHECK(ncclGroupEnd());
    tp_sync();
    for (size_t i = 0; i < C; i++)
        if (ra[i] != 3.0f * (float)i || rb[i] != 3.0f * (float)i)
            tp_die("WRONG RESULT in InitAll AllReduce at %zu: %g %g", i, ra[i], rb[i]);
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSend(a, C, ncclFloat32, 1, comms[0], NULL));
    TP_CHECK(ncclRecv(rb, C, ncclFloat32, 0, comms[1], NULL));
    TP_CHECK(ncclSend(b, C, ncclFloat32, 0, comms[1], NULL));
    TP_CHECK(ncclRecv(ra, C, ncclFloat32, 1, comms[0], NULL));
    TP_CHECK(ncclGroupEnd());
    tp_sync();
    if (memcmp(rb, a, C * sizeof(float)) || memcmp(ra, b, C * sizeof(float)))
        tp_die("WRONG RESULT in InitAll Send/Recv");
    account(ra, C * sizeof(float));
    account(rb, C * sizeof(float));
    TP_CHECK(ncclCommDestroy(comms[0]));
    TP_CHECK(ncclCommDestroy(comms[1]));
    free(a);
    free(b);
    free(ra);
    free(rb);
}

int main(void)
{
    int n = tp_world_size(), rank = tp_rank();
    int version = 0;
    TP_CHECK(ncclGetVersion(&version));
    if (version < 20000)
        tp_die("odd NCCL version %d", version);
    if (n > 64)
        tp_die("coll_check supports at most 64 ranks");
    ncclComm_t comm;
    tp_init_world(&comm);
    int cnt, me;
    TP_CHECK(ncclCommCount(comm, &cnt));
    TP_CHECK(ncclCommUserRank(comm, &me));
    if (cnt != n || me != rank)
        tp_die("world comm says rank %d of %d", me, cnt);

    collectives(comm, n, rank);
    ring(comm, n, rank, 1000, 500);
    ring(comm, n, rank, 100000, 501);
    split(comm, n, rank);
    shrink(comm, n, rank);
    nonblocking(n, rank);
    init_all();

    /* Combine every rank's checksum; rank 0 prints one line. */
    uint64_t mine = checksum, *all = tp_alloc((size_t)n * sizeof(uint64_t));
    /* Back to back with two more calls, then one synchronize and the exit: the last calls
     * share one event, recorded at exit at the latest (shim-completion). */
    float one = 1.0f;
    TP_CHECK(ncclAllReduce(&one, &one, 1, ncclFloat32, ncclSum, comm, NULL));
    TP_CHECK(ncclAllReduce(&one, &one, 1, ncclFloat32, ncclSum, comm, NULL));
    TP_CHECK(ncclAllGather(&mine, all, 1, ncclUint64, comm, NULL));
    tp_sync();
    TP_CHECK(ncclCommDestroy(comm));
    uint64_t h = tp_fnv(TP_FNV_INIT, all, (size_t)n * sizeof(uint64_t));
    if (rank == 0)
        printf("%016llx\n", (unsigned long long)h);
    fprintf(stderr, "rank %d: coll_check passed (%d result buffers)\n", rank, nchecks);
    free(all);
    return 0;
}
