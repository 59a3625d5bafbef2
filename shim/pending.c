/* pending.c -- a rank process marks itself in the trace folder from its start until its trace
 * exists (include/lockstep/room.h, LS_PENDING_SUFFIX): a rank that has not reached NCCL yet is
 * then seen working, asleep or ended, not only missing (docs/shim.md). */
#include <stdlib.h>

#include "shim.h"

static void pending_at_exit(int status, void *arg)
{
    (void)arg;
    ls_pending_exit(status);
}

__attribute__((constructor)) static void pending_ctor(void)
{
    ls_pending_mark();
    on_exit(pending_at_exit, NULL);
}
