/* async_poll.c -- polls ncclCommGetAsyncError as PyTorch's watchdog does, on two communicators,
 * before and after the emulator injects an asynchronous error (LOCKSTEP_EMU_ASYNC_ERROR=0:1:R:
 * after a communicator's first collective it reports R). Run as 1 rank; exits 1 when NCCL's
 * answers are not the ones expected. Each poll loop is its own call site. */
#include <stdio.h>
#include <stdlib.h>

#include <nccl.h>

#include "common.h"

#define POLLS 100

static char buf[64];

/* A poll's answer `err` must be `want`. */
static void expect_answer(ncclResult_t err, ncclResult_t want, const char *what)
{
    if (err != want)
        tp_die("%s: NCCL reported %d, want %d", what, (int)err, (int)want);
}

/* The poll loops: each calls ncclCommGetAsyncError itself, so its name is the call site. */
#define POLL_LOOP(comm, want, what)                                                                \
    for (int i = 0; i < POLLS; i++) {                                                              \
        ncclResult_t err_ = ncclInProgress;                                                        \
        TP_CHECK(ncclCommGetAsyncError((comm), &err_));                                            \
        expect_answer(err_, (want), (what));                                                       \
    }

/* Before any collective: no error yet, nothing to record. */
void poll_quiet(ncclComm_t world, ncclComm_t sub)
{
    POLL_LOOP(world, ncclSuccess, "world before its first collective");
    POLL_LOOP(sub, ncclSuccess, "sub before its first collective");
}

void poll_world(ncclComm_t world, ncclResult_t want)
{
    POLL_LOOP(world, want, "world after its first collective");
}

void poll_sub(ncclComm_t sub, ncclResult_t want)
{
    POLL_LOOP(sub, want, "sub");
}

/* NCCL polls the communicator itself before a split (ncclCommEnsureReady) and fails it. */
void split_after_error(ncclComm_t world, ncclResult_t want)
{
    ncclComm_t child = NULL;
    ncclResult_t r = ncclCommSplit(world, 0, 0, &child, NULL);
    if (r != want)
        tp_die("split after the error returned %d, want %d", (int)r, (int)want);
}

int main(int argc, char **argv)
{
    ncclResult_t want = argc > 1 ? (ncclResult_t)atoi(argv[1]) : ncclSystemError;
    ncclComm_t world, sub;
    tp_init_world(&world);
    TP_CHECK(ncclCommSplit(world, 0, 0, &sub, NULL));
    poll_quiet(world, sub);
    TP_CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, world, NULL));
    poll_sub(sub, ncclSuccess); /* only the world's collective completed */
    split_after_error(world, want);
    poll_world(world, want);
    poll_world(world, want); /* a second round: still one record */
    TP_CHECK(ncclAllReduce(buf, buf, 4, ncclFloat32, ncclSum, sub, NULL));
    poll_sub(sub, want);
    TP_CHECK(ncclCommAbort(sub));
    TP_CHECK(ncclCommAbort(world));
    return 0;
}
