/* unit_traces.h -- what the unit tests that write traces with tracegen's writer share. */
#ifndef LOCKSTEP_UNIT_TRACES_H
#define LOCKSTEP_UNIT_TRACES_H

#include "trace_writer.h"

/* Room for a few communicators, sites and Python sites, and `ring` records. */
static inline struct tw_caps unit_small_caps(uint64_t ring)
{
    return (struct tw_caps){.ring = ring,
                            .comms = 8,
                            .peers = 8,
                            .sites = 8,
                            .stack_depth = 4,
                            .strings = 4096,
                            .pysites = 4,
                            .py_depth = 3};
}

#endif
