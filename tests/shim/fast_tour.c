/* fast_tour.c -- every collective of the fast path, from one call site each, several times, with
 * distinct parameters per collective and per round: the first rounds take the general path (a
 * new call site), the later ones the fast path. Each result is checked against what NCCL must
 * compute, so arguments the wrappers forwarded wrongly fail here; the test checks the records.
 * Run as 2 ranks: fast_tour ROUNDS [FRAMES] (the calls made FRAMES frames deeper), with a pause of
 * 100 ms before the third round (the shim's first clock conversion comes 20 ms after it starts).
 * Prints "bufs A B" (the buffers' addresses: "bufs RANK A B") first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#include "common.h"

#define N         2                                                 /* ranks */
#define MAXC      64                                                /* elements per rank at most */
#define STREAM(k) ((cudaStream_t)(uintptr_t)(0x5000 + 0x100 * (k))) /* ignored by the emulator */

static double send_buf[N * MAXC], recv_buf[N * MAXC]; /* 8 bytes per element at most */

static double pat(int rank, size_t i, int salt)
{
    return tp_pattern(rank, i, salt) + 1; /* 1..8: a product of two stays exact everywhere */
}

static void check(int ok, const char *what, int round, size_t i)
{
    if (!ok) {
        fprintf(stderr, "fast_tour: %s wrong at round %d, element %zu\n", what, round, i);
        exit(1);
    }
}

static void fill(size_t count, ncclDataType_t dt, int rank, int salt)
{
    for (size_t i = 0; i < count; i++)
        tp_set(send_buf, i, dt, pat(rank, i, salt));
}

static void tour(int rounds, int rank, ncclComm_t w)
{
    for (int r = 0; r < rounds; r++) {
        size_t c;
        int salt = r, k = r % 8; /* counts grow by one a round, eight rounds apart */
        if (r == 2)
            tp_sleep_ms(100); /* the shim's first clock conversion: the fast path times with it */
        /* AllReduce, sum, int32 */
        c = 4 + k;
        fill(c, ncclInt32, rank, salt);
        TP_CHECK(ncclAllReduce(send_buf, recv_buf, c, ncclInt32, ncclSum, w, STREAM(0)));
        for (size_t i = 0; i < c; i++)
            check(tp_get(recv_buf, i, ncclInt32) == pat(0, i, salt) + pat(1, i, salt), "AllReduce",
                  r, i);
        /* Broadcast from rank 1, float32 */
        c = 8 + k;
        fill(c, ncclFloat32, rank, salt);
        TP_CHECK(ncclBroadcast(send_buf, recv_buf, c, ncclFloat32, 1, w, STREAM(1)));
        for (size_t i = 0; i < c; i++)
            check(tp_get(recv_buf, i, ncclFloat32) == pat(1, i, salt), "Broadcast", r, i);
        /* Bcast from rank 0, int8, in place */
        c = 12 + k;
        fill(c, ncclInt8, rank, salt);
        TP_CHECK(ncclBcast(send_buf, c, ncclInt8, 0, w, STREAM(2)));
        for (size_t i = 0; i < c; i++)
            check(tp_get(send_buf, i, ncclInt8) == pat(0, i, salt), "Bcast", r, i);
        /* Reduce, max, float64, to rank 1 */
        c = 16 + k;
        fill(c, ncclFloat64, rank, salt);
        TP_CHECK(ncclReduce(send_buf, recv_buf, c, ncclFloat64, ncclMax, 1, w, STREAM(3)));
        for (size_t i = 0; rank == 1 && i < c; i++) {
            double a = pat(0, i, salt), b = pat(1, i, salt);
            check(tp_get(recv_buf, i, ncclFloat64) == (a > b ? a : b), "Reduce", r, i);
        }
        /* AllGather, uint8 */
        c = 20 + k;
        fill(c, ncclUint8, rank, salt);
        TP_CHECK(ncclAllGather(send_buf, recv_buf, c, ncclUint8, w, STREAM(4)));
        for (size_t i = 0; i < N * c; i++)
            check(tp_get(recv_buf, i, ncclUint8) == pat((int)(i / c), i % c, salt), "AllGather", r,
                  i);
        /* ReduceScatter, prod, int64 */
        c = 24 + k;
        fill(N * c, ncclInt64, rank, salt);
        TP_CHECK(ncclReduceScatter(send_buf, recv_buf, c, ncclInt64, ncclProd, w, STREAM(5)));
        for (size_t i = 0; i < c; i++)
            check(tp_get(recv_buf, i, ncclInt64) ==
                      pat(0, rank * c + i, salt) * pat(1, rank * c + i, salt),
                  "ReduceScatter", r, i);
        /* AlltoAll, float32 */
        c = 28 + k;
        fill(N * c, ncclFloat32, rank, salt);
        TP_CHECK(ncclAlltoAll(send_buf, recv_buf, c, ncclFloat32, w, STREAM(6)));
        for (size_t i = 0; i < N * c; i++)
            check(tp_get(recv_buf, i, ncclFloat32) == pat((int)(i / c), rank * c + i % c, salt),
                  "AlltoAll", r, i);
        /* Gather to rank 0, uint32 */
        c = 32 + k;
        fill(c, ncclUint32, rank, salt);
        TP_CHECK(ncclGather(send_buf, recv_buf, c, ncclUint32, 0, w, STREAM(7)));
        for (size_t i = 0; rank == 0 && i < N * c; i++)
            check(tp_get(recv_buf, i, ncclUint32) == pat((int)(i / c), i % c, salt), "Gather", r,
                  i);
        /* Scatter from rank 1, int32 */
        c = 36 + k;
        fill(N * c, ncclInt32, rank, salt);
        TP_CHECK(ncclScatter(send_buf, recv_buf, c, ncclInt32, 1, w, STREAM(8)));
        for (size_t i = 0; i < c; i++)
            check(tp_get(recv_buf, i, ncclInt32) == pat(1, rank * c + i, salt), "Scatter", r, i);
    }
}

/* One AllReduce of `count` elements from one call instruction, reached through via_a() or
 * via_b(): the same return address in the same stack slot, callers that differ one frame up. */
/* Not static: named in call sites (the program exports its symbols). */
void leaf(ncclComm_t w, size_t count);
void via_a(ncclComm_t w);
void via_b(ncclComm_t w);

__attribute__((noinline)) void leaf(ncclComm_t w, size_t count)
{
    TP_CHECK(ncclAllReduce(send_buf, recv_buf, count, ncclInt32, ncclSum, w, NULL));
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}

__attribute__((noinline)) void via_a(ncclComm_t w)
{
    leaf(w, 3);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void via_b(ncclComm_t w)
{
    leaf(w, 2);
    __asm__ volatile("" ::: "memory");
}

/* Runs the tour `frames` frames below this one (none a tail call), then via_a() and via_b() in
 * turn. */
static __attribute__((noinline)) int nest(int frames, int rounds, int rank, ncclComm_t w)
{
    if (frames > 0) {
        volatile int keep = nest(frames - 1, rounds, rank, w);
        return keep + 1;
    }
    tour(rounds, rank, w);
    for (int r = 0; r < rounds; r++) {
        via_a(w);
        via_b(w);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    int frames = argc > 2 ? atoi(argv[2]) : 0;
    int rank = tp_rank();
    ncclComm_t w;
    tp_init_world(&w);
    if (tp_world_size() != N)
        tp_die("fast_tour runs as %d ranks", N);
    printf("bufs %d %p %p\n", rank, (void *)send_buf, (void *)recv_buf);
    fflush(stdout);
    nest(frames, rounds, rank, w);
    TP_CHECK(ncclCommDestroy(w));
    return 0;
}
