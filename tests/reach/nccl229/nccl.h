/* nccl.h (2.30) -- the machine's nccl.h plus the NCCL 2.29/2.30 declarations a newer nccl.h
 * makes, written here for the compile-only check (tests/reach/meson.build) that
 * lockstep/nccl_next.h declares only what such headers lack (here: 2.31's config calls). Our own
 * declarations, from NCCL's documented API; installed as "nccl.h" in front of the real one. */
#ifndef LOCKSTEP_TEST_NCCL_2_29_H
#define LOCKSTEP_TEST_NCCL_2_29_H

#include_next <nccl.h>

#undef NCCL_VERSION_CODE
#define NCCL_VERSION_CODE NCCL_VERSION(2, 30, 0)

#include "nccl_2_30_api.h"

#endif
