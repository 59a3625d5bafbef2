/* fast_abi.h -- the offsets the assembly fast path (fast_wrap.S) uses: fields of ls_t (struct
 * ls_thread), of a record, a communicator and a thread slot. Plain numbers, so that the
 * assembler can read them; record.c checks each against the C structures. */
#ifndef LOCKSTEP_FAST_ABI_H
#define LOCKSTEP_FAST_ABI_H

/* ls_thread.fast_arm's flags: the call site is to be looked up first (stack_depth > 0); no
 * clock conversion (only the general path's fast branch, with the kernel's clock, applies). */
#define LS_ARM_SITES    1
#define LS_ARM_NO_CLOCK 0x80000000

/* struct ls_thread */
#define LS_T_ARM         0 /* uint32_t fast_arm; in_call (int) at 4: one 64-bit word */
#define LS_T_IN_CALL     4
#define LS_T_BLOCK_NEXT  8
#define LS_T_FAST_LIMIT  16
#define LS_T_FAST_COMM   24
#define LS_T_COMM_ENTRY  32
#define LS_T_RING        40
#define LS_T_RING_MASK   48
#define LS_T_SLOT        56
#define LS_T_FAST_REC    64
#define LS_T_TICKET1     72
#define LS_T_TIME_FLOOR  80
#define LS_T_CLOCK_TSC   88
#define LS_T_CLOCK_NS    96
#define LS_T_CLOCK_MULT  104
#define LS_T_TMPL        112 /* 16 bytes: record bytes 96-111 */
#define LS_T_GENERAL_PC  128
#define LS_T_GENERAL_CFA 136
#define LS_T_FAST_SITES  144
#define LS_T_FAST_FLUSH  152

/* struct site_cache and struct chain (callsite_cache.h) */
#define LS_SC_STACK_LO  8
#define LS_SC_STACK_HI  16
#define LS_SC_CHAINS    24
#define LS_CH_SHIFT     6 /* 64 bytes */
#define LS_CH_PC0       0
#define LS_CH_SLOT0     8
#define LS_CH_SITE      32
#define LS_CH_N         40
#define LS_CH_UNCOUNTED 44
#define LS_CH_SLOT      48
#define LS_CH_PC        56
#define LS_SITE_BATCH   64                 /* LS_SITE_COUNT_BATCH */
#define LS_SITE_HASH    0x9e3779b97f4a7c15 /* way_of() */

/* struct ls_record */
#define LS_R_TICKET   0
#define LS_R_COMM_ID  8
#define LS_R_SEQ      16
#define LS_R_COUNT    24
#define LS_R_SENDBUFF 32
#define LS_R_RECVBUFF 40
#define LS_R_STREAM   48
#define LS_R_ENTER    56
#define LS_R_EXIT     64 /* exit_ns, group_id, aux, complete_ns: 64-95 */
#define LS_R_CALLSITE 96
#define LS_R_PEER     108
#define LS_R_REDOP    112 /* redop, op, dtype, group_depth, result, flags: 112-127 */
#define LS_R_DTYPE    118
#define LS_R_RESULT   120
#define LS_R_SHIFT    7 /* 128 bytes */

/* struct ls_comm */
#define LS_C_COMM_ID     0
#define LS_C_COLL_ISSUED 72
#define LS_C_COLL_DONE   80

/* struct ls_thread_slot */
#define LS_S_IN_CALL_SINCE 0
#define LS_S_LAST_ENTER    32
#define LS_S_LAST_EXIT     40

#endif
