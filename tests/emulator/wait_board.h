/* wait_board.h -- the launcher's board of waiting ranks: one slot per rank in a memory file the
 * launcher shares (launch-ranks --stop-when-stuck), where the emulator marks when a rank last
 * made progress and when it last slept in a long wait, so the launcher can stop a hung job at
 * once instead of at its timeout, and when the rank's program started (the emulator was loaded),
 * so that a timeout counts from the moment every rank has started and not from the launch.
 * Without the launcher's board every function does nothing. */
#ifndef LOCKSTEP_EMU_WAIT_BOARD_H
#define LOCKSTEP_EMU_WAIT_BOARD_H

#include <stdatomic.h>
#include <stdint.h>

/* The environment the launcher gives each rank: the board's descriptor, the rank's slot. */
#define WAIT_BOARD_FD_ENV   "LOCKSTEP_EMU_WAIT_BOARD_FD"
#define WAIT_BOARD_SLOT_ENV "LOCKSTEP_EMU_WAIT_SLOT"

/* One rank's slot; times are CLOCK_MONOTONIC nanoseconds, 0 while never marked. */
struct wait_slot {
    _Atomic int64_t progress_ns; /* a wait began or moved on: the rank is doing something */
    _Atomic int64_t waiting_ns;  /* a wait slept its longest backoff: the rank is waiting */
    _Atomic int64_t started_ns;  /* the emulator was loaded: the rank's program has started */
    char pad[40];
};

#define WAIT_BOARD_HIDDEN __attribute__((visibility("hidden")))

/* Marks the calling rank's progress: a wait starts (or the device thread moved work on). */
WAIT_BOARD_HIDDEN void wait_board_progress(void);

/* Marks that the calling rank is still inside a wait that has backed off to its longest sleep. */
WAIT_BOARD_HIDDEN void wait_board_waiting(void);

#endif
