/* fast_wrap.S -- the wrappers of NCCL's collectives on x86-64: the fast path of fast_call.h
 * written out by hand, so that it needs no register the caller expects kept (a C wrapper saves
 * and restores all six) and writes the record straight from the argument registers.
 *
 * What a wrapper does, in order (docs/shim.md, "The per-call cost"):
 *   1. Checks, with no side effect, that the fast path applies: the call's communicator is the
 *      one the thread is armed for, the real function is known, the data type fits the
 *      record's byte, the thread is armed in this epoch and in no recorded call (one 64-bit
 *      compare). With LS_ARM_SITES the call site is looked up first, inline (SITE_HIT); with
 *      Python frames to record, by ls_fast_site (C), the arguments kept on the stack
 *      meanwhile. Anything else: the general path ls_general_<name> (C), reached with a jump
 *      and the arguments untouched.
 *   2. Claims the thread's next ticket's ring slot (busy mark), writes the record from the
 *      registers and ls_t's template, numbers the call, reads the clock and publishes.
 *   3. Calls the real function with the stack arguments pushed again (the caller's return
 *      address stays where the unwind information says), then records the return; a result
 *      other than ncclSuccess, a block of tickets used up or a call-site count to flush take
 *      ls_fast_exit_rare (C) as a tail call.
 * Registers: r11 holds ls_t's offset from %fs, r10 the record; rax, rdx, xmm0-xmm3 are
 * scratch (rdx is restored before the call); nothing else is written before the call. */

#include "fast_abi.h"

#if defined(__x86_64__) && !defined(LS_FAST_C)

#ifdef __CET__
#define LANDING endbr64
#else
#define LANDING
#endif

/* Stores operand `src` (a register, or "stk<N>": the stack argument at N(%rsp) on entry) to
 * memory `dst`, through rax for the stack. */
.macro STORE64 src, dst
    .ifc \src, stk8
    movq 8(%rsp), %rax
    movq %rax, \dst
    .else
    .ifc \src, stk16
    movq 16(%rsp), %rax
    movq %rax, \dst
    .else
    movq \src, \dst
    .endif
    .endif
.endm

/* Jumps to `to` unless the thread's fast_comm is the call's communicator `comm` (as in
 * STORE64). */
.macro COMM_CHECK comm, to
    .ifc \comm, stk8
    movq 8(%rsp), %rax
    cmpq %rax, %fs:LS_T_FAST_COMM(%r11)
    .else
    cmpq \comm, %fs:LS_T_FAST_COMM(%r11)
    .endif
    jne \to
.endm

/* The time now (ns, rax) from the thread's copy of the clock conversion, never before its
 * time floor, which it becomes. Clobbers rdx. CLOCK_COLD, after the function's return, holds
 * its rare cases; `l` names the labels of the pair. */
.macro CLOCK_NOW l
    rdtsc
    shlq $32, %rdx
    orq %rdx, %rax
    subq %fs:LS_T_CLOCK_TSC(%r11), %rax
    js \l\()_neg
\l\()_mul:
    mulq %fs:LS_T_CLOCK_MULT(%r11)
    shrdq $32, %rdx, %rax
    addq %fs:LS_T_CLOCK_NS(%r11), %rax
    cmpq %fs:LS_T_TIME_FLOOR(%r11), %rax
    jb \l\()_floor
\l\()_store:
    movq %rax, %fs:LS_T_TIME_FLOOR(%r11)
.endm

.macro CLOCK_COLD l
\l\()_neg:
    xorl %eax, %eax /* this CPU's TSC a few ticks behind the sample: its time, to a few ns */
    jmp \l\()_mul
\l\()_floor:
    movq %fs:LS_T_TIME_FLOOR(%r11), %rax
    jmp \l\()_store
.endm

/* The call site (into xmm2) of a stack the thread remembers: ls_callsite_hit() (callsite_cache.h)
 * with the wrapper's caller, whose return address is at (%rsp) (slot0) on entry. Anything but
 * a hit goes to the general path (label 9); without a cache (Python frames to record), to
 * SITE_COLD's call of ls_fast_site(). Clobbers rax, r10, xmm1, xmm3; r11 is ls_t's offset again
 * after it. */
.macro SITE_HIT name
    movq %fs:LS_T_FAST_SITES(%r11), %r10
    testq %r10, %r10
    jz 10f
    /* No bounds check: a way whose key matches was stored by this thread with slot0 inside
     * its stack, and so were its other slots (callsite.c). */
    movq %rsp, %rax /* way_of(): (pc0 ^ slot0 >> 4) * K, top 4 bits */
    shrq $4, %rax
    xorq (%rsp), %rax
    movabsq $LS_SITE_HASH, %r11
    imulq %r11, %rax
    shrq $60, %rax
    shlq $LS_CH_SHIFT, %rax
    leaq LS_SC_CHAINS(%r10,%rax), %r10 /* the chain */
    movq (%rsp), %rax
    cmpq %rax, LS_CH_PC0(%r10)
    jne 9f
    cmpq %rsp, LS_CH_SLOT0(%r10)
    jne 9f
    /* Every remembered slot after the first still holds its return address: slots 1 to n-1,
     * through a table of entry points into 16 checks (more: SITE_COLD's loop). */
    movq %rdx, %xmm1
    movq %r10, %xmm3
    movl LS_CH_N(%r10), %eax
    movq LS_CH_SLOT(%r10), %r11
    movq LS_CH_PC(%r10), %rdx
    subq %r11, %rdx /* from a slot's entry to its return address's */
    cmpl $17, %eax
    ja 20f
    leaq (%r11,%rax,8), %r11 /* the end */
    leaq .L\name\()_checks(%rip), %r10
    movslq (%r10,%rax,4), %rax
    addq %r10, %rax
    jmp *%rax
    .irp j, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1
.L\name\()_check\j:
    movq -8*\j(%r11), %rax
    movq (%rax), %rax
    cmpq -8*\j(%r11,%rdx), %rax
    jne 15f
    .endr
.L\name\()_checked:
13: movq %xmm1, %rdx
    movq %xmm3, %r10
    movq ls_t@gottpoff(%rip), %r11
    incl LS_CH_UNCOUNTED(%r10)
    cmpl $LS_SITE_BATCH, LS_CH_UNCOUNTED(%r10)
    jae 16f
17: movd LS_CH_SITE(%r10), %xmm2
18:
.endm

/* SITE_HIT's rare cases, after the function's return. */
.macro SITE_COLD name
15: movq %xmm1, %rdx /* a slot holds another return address: a different stack */
    jmp 9f
20: leaq -8(%r11,%rax,8), %r10 /* more than 16 slots: the last one; pairs start below it */
    addq $8, %r11
14: movq (%r11), %rax /* two slots a turn */
    movq (%rax), %rax
    cmpq (%r11,%rdx), %rax
    jne 15b
    movq 8(%r11), %rax
    movq (%rax), %rax
    cmpq 8(%r11,%rdx), %rax
    jne 15b
    addq $16, %r11
    cmpq %r10, %r11
    jb 14b
    ja 13b /* past the last slot: none left */
    movq (%r11), %rax /* the last one */
    movq (%rax), %rax
    cmpq (%r11,%rdx), %rax
    jne 15b
    jmp 13b
    .p2align 2
.L\name\()_checks: /* by n: where the checks of slots 1 to n-1 start */
    .long .L\name\()_checked - .L\name\()_checks
    .long .L\name\()_checked - .L\name\()_checks
    .irp j, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16
    .long .L\name\()_check\j - .L\name\()_checks
    .endr
16: movq %r10, %fs:LS_T_FAST_FLUSH(%r11) /* ls_fast_exit_rare() adds the hits to the count */
    movq $0, %fs:LS_T_FAST_LIMIT(%r11)
    jmp 17b
10: pushq %rdi /* no cache: ls_fast_site() captures the stack */
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    pushq %rcx
    .cfi_adjust_cfa_offset 8
    pushq %r8
    .cfi_adjust_cfa_offset 8
    pushq %r9
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    movq 56(%rsp), %rdi /* the caller's return address */
    leaq 64(%rsp), %rsi /* and frame (CFA) */
    call ls_fast_site
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %r9
    .cfi_adjust_cfa_offset -8
    popq %r8
    .cfi_adjust_cfa_offset -8
    popq %rcx
    .cfi_adjust_cfa_offset -8
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    testl %eax, %eax
    jz 9f
    movq ls_t@gottpoff(%rip), %r11
    movd %eax, %xmm2
    jmp 18b
.endm

/* Step 2 and 3 for a call from call site xmm2 (site 1) or none (site 0). */
.macro BODY name, op, site, comm, count, dtype8, redop, peer, send, recv, stream, nstack, rdx_count
    movq %fs:LS_T_BLOCK_NEXT(%r11), %rax /* the ticket */
    movq %rax, %r10
    andq %fs:LS_T_RING_MASK(%r11), %r10
    shlq $LS_R_SHIFT, %r10
    addq %fs:LS_T_RING(%r11), %r10
    cmpq %rax, LS_R_TICKET(%r10)
    ja 9f /* the slot holds a newer lap or a record being written */
    btsq $63, %rax
    movq %rax, LS_R_TICKET(%r10) /* ours, being written */
    incq %fs:LS_T_BLOCK_NEXT(%r11)
    movl $1, %fs:LS_T_IN_CALL(%r11)
    .if \rdx_count == 0
    movq %rdx, %xmm1
    .endif
    movq \count, LS_R_COUNT(%r10)
    movq \send, LS_R_SENDBUFF(%r10)
    movq \recv, LS_R_RECVBUFF(%r10)
    STORE64 \stream, LS_R_STREAM(%r10)
    xorps %xmm0, %xmm0 /* exit_ns, group_id, aux, complete_ns */
    movups %xmm0, LS_R_EXIT(%r10)
    movups %xmm0, LS_R_EXIT+16(%r10)
    movups %fs:LS_T_TMPL(%r11), %xmm0 /* callsite 0, tid, comm_rank, peer -1 */
    movups %xmm0, LS_R_CALLSITE(%r10)
    .if \site
    movd %xmm2, LS_R_CALLSITE(%r10)
    .endif
    .ifnc \peer, none
    movl \peer, LS_R_PEER(%r10)
    .endif
    movups ls_tail_\name(%rip), %xmm0 /* redop -1, op, dtype 0, depth 0, pending, flags 0 */
    movups %xmm0, LS_R_REDOP(%r10)
    .ifnc \redop, none
    movl \redop, LS_R_REDOP(%r10)
    .endif
    movb \dtype8, LS_R_DTYPE(%r10)
    movq %fs:LS_T_COMM_ENTRY(%r11), %rax
    movq LS_C_COMM_ID(%rax), %rdx
    movq %rdx, LS_R_COMM_ID(%r10)
    incq LS_C_COLL_ISSUED(%rax) /* only this thread writes it (NCCL's rule for a comm) */
    movq LS_C_COLL_ISSUED(%rax), %rdx
    movq %rdx, LS_R_SEQ(%r10)
    CLOCK_NOW .L\name\()_\site\()_in
    movq %rax, LS_R_ENTER(%r10)
    movq %fs:LS_T_SLOT(%r11), %rdx
    movq %rax, LS_S_LAST_ENTER(%rdx)
    movq %rax, LS_S_IN_CALL_SINCE(%rdx)
    movq %fs:LS_T_BLOCK_NEXT(%r11), %rax
    movq %rax, LS_R_TICKET(%r10) /* published: ticket + 1 */
    movq %rax, %fs:LS_T_TICKET1(%r11)
    movq %r10, %fs:LS_T_FAST_REC(%r11)
#ifdef LS_TEST_KNOBS
    lock incq ls_test_fast_calls(%rip) /* the test build only (record.c) */
#endif
    .if \rdx_count
    movq LS_R_COUNT(%r10), %rdx
    .else
    movq %xmm1, %rdx
    .endif
    /* The forwarded call, with rsp 16-byte aligned and the stack arguments above it. */
    .if \nstack == 0
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call *ls_real_\name(%rip)
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    .elseif \nstack == 1
    pushq 8(%rsp)
    .cfi_adjust_cfa_offset 8
    call *ls_real_\name(%rip)
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    .else
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    pushq 24(%rsp)
    .cfi_adjust_cfa_offset 8
    pushq 24(%rsp)
    .cfi_adjust_cfa_offset 8
    call *ls_real_\name(%rip)
    addq $24, %rsp
    .cfi_adjust_cfa_offset -24
    .endif
    /* The return. */
    movq ls_t@gottpoff(%rip), %r11
    testl %eax, %eax
    jnz 7f
    movq %fs:LS_T_BLOCK_NEXT(%r11), %rcx
    cmpq %fs:LS_T_FAST_LIMIT(%r11), %rcx
    jae 7f
    CLOCK_NOW .L\name\()_\site\()_out
    movq %fs:LS_T_FAST_REC(%r11), %rdx
    movq LS_R_TICKET(%rdx), %rcx
    cmpq %fs:LS_T_TICKET1(%r11), %rcx
    jne 2f /* the ring wrapped onto the slot while the call ran: the newer record stays */
    movq %rax, LS_R_EXIT(%rdx)
    movl $0, LS_R_RESULT(%rdx)
2:  movq %fs:LS_T_COMM_ENTRY(%r11), %rdx
    incq LS_C_COLL_DONE(%rdx)
    movq %fs:LS_T_SLOT(%r11), %rdx
    movq %rax, LS_S_LAST_EXIT(%rdx)
    movq $0, LS_S_IN_CALL_SINCE(%rdx)
    movl $0, %fs:LS_T_IN_CALL(%r11)
    xorl %eax, %eax
    ret
7:  movl %eax, %edx /* ls_fast_exit_rare(op, no peer, result) returns result to our caller */
    movl $\op, %edi
    movl $-1, %esi
    jmp ls_fast_exit_rare
    CLOCK_COLD .L\name\()_\site\()_in
    CLOCK_COLD .L\name\()_\site\()_out
.endm

/* The wrapper `name` of collective `op`. Operands: the communicator, count, data type (32 and
 * 8 bits), reduction (or none), root (or none), send and receive buffers, stream: registers,
 * or stk8/stk16 for stack arguments; `nstack` stack arguments; `rdx_count`: rdx holds the
 * count (restored from the record), else it is kept in xmm1 across the clock read. */
.macro FAST_WRAP name, op, comm, count, dtype32, dtype8, redop, peer, send, recv, stream, nstack, rdx_count
    .pushsection .rodata
    .p2align 4
ls_tail_\name:
    .long -1 /* redop */
    .short \op
    .byte 0, 0 /* dtype, group_depth */
    .long -1 /* result: pending */
    .long 0 /* flags */
    .popsection

    .text
    .p2align 4
    .globl \name
    .type \name, @function
\name:
    .cfi_startproc
    LANDING
    movq ls_t@gottpoff(%rip), %r11
    COMM_CHECK \comm, 9f
    cmpq $0, ls_real_\name(%rip)
    je 9f
    cmpl $255, \dtype32 /* 0-254 fit the record's byte (255 is "none") */
    jae 9f
    movq ls_fast_epoch(%rip), %rax
    cmpq %rax, %fs:LS_T_ARM(%r11) /* fast_arm and in_call */
    jne 8f
    BODY \name, \op, 0, \comm, \count, \dtype8, \redop, \peer, \send, \recv, \stream, \nstack, \rdx_count

8:  /* Not armed as such: armed for a call-site lookup? */
    movq %fs:LS_T_ARM(%r11), %rax
    xorq ls_fast_epoch(%rip), %rax
    cmpq $LS_ARM_SITES, %rax
    jne 9f
    SITE_HIT \name
    BODY \name, \op, 1, \comm, \count, \dtype8, \redop, \peer, \send, \recv, \stream, \nstack, \rdx_count
    SITE_COLD \name

9:  /* The general path, with the caller's return address and frame in ls_t. */
    movq ls_t@gottpoff(%rip), %r11
    movq (%rsp), %rax
    movq %rax, %fs:LS_T_GENERAL_PC(%r11)
    leaq 8(%rsp), %rax
    movq %rax, %fs:LS_T_GENERAL_CFA(%r11)
    jmp ls_general_\name
    .cfi_endproc
    .size \name, .-\name
.endm

/* The op numbers are the trace format's (record.c checks them). Arguments: NCCL's order,
 * integer registers rdi rsi rdx rcx r8 r9, then the stack. */
/*        name               op comm   count dtype       redop peer  send  recv  stream nstack rdx_count */
FAST_WRAP ncclAllReduce,     1, %r9,   %rdx, %ecx, %cl, %r8d, none, %rdi, %rsi, stk8,  1, 1
FAST_WRAP ncclBroadcast,     2, %r9,   %rdx, %ecx, %cl, none, %r8d, %rdi, %rsi, stk8,  1, 1
FAST_WRAP ncclBcast,         3, %r8,   %rsi, %edx, %dl, none, %ecx, %rdi, %rdi, %r9,   0, 0
FAST_WRAP ncclReduce,        4, stk8,  %rdx, %ecx, %cl, %r8d, %r9d, %rdi, %rsi, stk16, 2, 1
FAST_WRAP ncclAllGather,     5, %r8,   %rdx, %ecx, %cl, none, none, %rdi, %rsi, %r9,   0, 1
FAST_WRAP ncclReduceScatter, 6, %r9,   %rdx, %ecx, %cl, %r8d, none, %rdi, %rsi, stk8,  1, 1
FAST_WRAP ncclAlltoAll,      7, %r8,   %rdx, %ecx, %cl, none, none, %rdi, %rsi, %r9,   0, 1
FAST_WRAP ncclGather,        8, %r9,   %rdx, %ecx, %cl, none, %r8d, %rdi, %rsi, stk8,  1, 1
FAST_WRAP ncclScatter,       9, %r9,   %rdx, %ecx, %cl, none, %r8d, %rdi, %rsi, stk8,  1, 1

#endif

#if defined(__linux__) && defined(__ELF__)
.section .note.GNU-stack, "", %progbits
#endif
