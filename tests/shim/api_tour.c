/* api_tour.c -- calls every NCCL API the shim records, each with distinct parameters, so a
 * test can check every record field. Run as 4 ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nccl.h>

#include "common.h"

static char buf_a[1 << 16], buf_b[1 << 16];

/* Each collective of the tour, in order; the test expects exactly these parameters. */
void tour_collectives(ncclComm_t w, int rank, int n)
{
    TP_CHECK(ncclAllReduce(buf_a, buf_b, 11, ncclFloat32, ncclSum, w, NULL));
    TP_CHECK(ncclBroadcast(buf_a, buf_b, 12, ncclInt32, 1, w, NULL));
    TP_CHECK(ncclBcast(buf_b, 13, ncclInt8, 2, w, NULL));
    TP_CHECK(ncclReduce(buf_a, buf_b, 14, ncclFloat64, ncclMax, 3, w, NULL));
    TP_CHECK(ncclAllGather(buf_a, buf_b, 15, ncclUint8, w, NULL));
    TP_CHECK(ncclReduceScatter(buf_a, buf_b, 16, ncclInt64, ncclProd, w, NULL));
    TP_CHECK(ncclAlltoAll(buf_a, buf_b, 17, ncclFloat32, w, NULL));
    TP_CHECK(ncclGather(buf_a, buf_b, 18, ncclInt32, 0, w, NULL));
    TP_CHECK(ncclScatter(buf_a, buf_b, 19, ncclInt32, 1, w, NULL));
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclSend(buf_a, 20, ncclFloat32, (rank + 1) % n, w, NULL));
    TP_CHECK(ncclRecv(buf_b, 20, ncclFloat32, (rank + n - 1) % n, w, NULL));
    TP_CHECK(ncclGroupEnd());
}

void tour_splits(ncclComm_t w, int rank)
{
    ncclComm_t sub = NULL, three = NULL, shrunk = NULL;
    TP_CHECK(ncclCommSplit(w, rank % 2, -rank, &sub, NULL));
    TP_CHECK(ncclAllReduce(buf_a, buf_b, 21, ncclFloat32, ncclMin, sub, NULL));

    /* Inside a group, the new handle appears only at ncclGroupEnd. */
    TP_CHECK(ncclGroupStart());
    TP_CHECK(ncclCommSplit(w, rank == 3 ? NCCL_SPLIT_NOCOLOR : 0, rank, &three, NULL));
    TP_CHECK(ncclGroupEnd());
    if (rank != 3) {
        TP_CHECK(ncclAllReduce(buf_a, buf_b, 22, ncclFloat32, ncclSum, three, NULL));
        TP_CHECK(ncclCommDestroy(three));
        /* Rank 3 is "lost": the survivors shrink the world without it. */
        int excluded = 3;
        TP_CHECK(ncclCommShrink(w, &excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT));
        TP_CHECK(ncclAllReduce(buf_a, buf_b, 24, ncclFloat32, ncclSum, shrunk, NULL));
        TP_CHECK(ncclCommDestroy(shrunk));
    } else if (three != NULL) {
        fprintf(stderr, "api_tour: NOCOLOR split gave a communicator\n");
        exit(1);
    }
    TP_CHECK(ncclCommDestroy(sub));
}

void tour_nonblocking(int rank, int n)
{
    ncclUniqueId id = tp_exchange_id("nb");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "tour-nb";
    ncclComm_t nb = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&nb, n, id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
        TP_CHECK(r);
    ncclResult_t state = ncclInProgress;
    while (nb != NULL && state == ncclInProgress)
        TP_CHECK(ncclCommGetAsyncError(nb, &state));
    TP_CHECK(state);
    r = ncclAllReduce(buf_a, buf_b, 23, ncclFloat32, ncclSum, nb, NULL);
    while (r == ncclInProgress)
        TP_CHECK(ncclCommGetAsyncError(nb, &r));
    TP_CHECK(r);
    TP_CHECK(ncclCommDestroy(nb));
}

void tour_scalable(int rank, int n)
{
    ncclUniqueId id = tp_exchange_id("scalable");
    ncclComm_t sc = NULL;
    TP_CHECK(ncclCommInitRankScalable(&sc, n, rank, 1, &id, NULL));
    TP_CHECK(ncclAllReduce(buf_a, buf_b, 25, ncclFloat32, ncclSum, sc, NULL));
    TP_CHECK(ncclGroupStart());
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    TP_CHECK(ncclGroupSimulateEnd(&sim));
    TP_CHECK(ncclCommRevoke(sc, NCCL_REVOKE_DEFAULT));
    TP_CHECK(ncclCommAbort(sc));
}

void tour_init_all(void)
{
    ncclComm_t comms[2];
    TP_CHECK(ncclCommInitAll(comms, 2, NULL));
    TP_CHECK(ncclCommDestroy(comms[0]));
    TP_CHECK(ncclCommDestroy(comms[1]));
}

int main(void)
{
    int rank = tp_rank(), n = tp_world_size();
    ncclComm_t w;
    tp_init_world(&w);
    tour_collectives(w, rank, n);
    tour_splits(w, rank);
    tour_nonblocking(rank, n);
    tour_scalable(rank, n);
    if (rank == 0)
        tour_init_all();
    TP_CHECK(ncclCommFinalize(w));
    TP_CHECK(ncclCommDestroy(w));
    return 0;
}
