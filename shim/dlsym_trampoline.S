/* dlsym_trampoline.S -- the exported dlsym and dlvsym: a few byte compares, then a tail jump
 * to glibc's own with the caller's registers and return address untouched (glibc resolves
 * RTLD_NEXT relative to the return address it sees). Names starting "nccl", "pn", "cu" or
 * "Py" (bytes 0x6e 0x63 0x63 0x6c, 0x70 0x6e, 0x63 0x75, 0x50 0x79) first go to the C hook
 * ls_dlsym_hook(handle, name, version, caller) in dlsym.c, which returns the address to give
 * back, or NULL to forward. Other architectures use dlsym.c's C fallback. */

#if defined(LS_DLSYM_C_FALLBACK)
/* dlsym.c defines them in C */
#elif defined(__x86_64__)

#ifdef __CET__
#define LANDING endbr64
#else
#define LANDING
#endif

/* SAVE/RESTORE keep the argument registers across a call, with rsp 16-byte aligned. */
.macro SAVE versioned
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    pushq %rdx
    .cfi_adjust_cfa_offset 8
.endm

.macro RESTORE
    popq %rdx
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
.endm

.macro TRAMPOLINE name, real, versioned
    .text
    .p2align 4
    .globl \name
    .type \name, @function
\name:
    .cfi_startproc
    LANDING
    testq %rsi, %rsi
    jz 9f
    cmpb $0x6e, (%rsi)
    je 1f
    cmpb $0x63, (%rsi)
    je 2f
    cmpb $0x70, (%rsi)
    je 3f
    cmpb $0x50, (%rsi)
    jne 9f
    cmpb $0x79, 1(%rsi)
    je 5f
    jmp 9f
3:  cmpb $0x6e, 1(%rsi)
    je 5f
    jmp 9f
2:  cmpb $0x75, 1(%rsi)
    je 5f
    jmp 9f
1:  cmpb $0x63, 1(%rsi)
    jne 9f
    cmpb $0x63, 2(%rsi)
    jne 9f
    cmpb $0x6c, 3(%rsi)
    jne 9f
5:  SAVE \versioned
    .if \versioned == 0
    xorl %edx, %edx
    .endif
    movq 24(%rsp), %rcx /* the caller's return address */
    call ls_dlsym_hook
    RESTORE
    testq %rax, %rax
    jz 9f
    ret
9:  movq \real(%rip), %rax
    testq %rax, %rax
    jz 8f
    jmp *%rax
8:  SAVE \versioned
    movl $\versioned, %edi
    call ls_dl_find_real
    RESTORE
    testq %rax, %rax
    jz 7f
    jmp *%rax
7:  ret /* glibc's is nowhere: NULL (dlsym.c said so on stderr) */
    .cfi_endproc
    .size \name, .-\name
.endm

TRAMPOLINE dlsym, ls_dlsym_real, 0
TRAMPOLINE dlvsym, ls_dlvsym_real, 1

#elif defined(__aarch64__)

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define LANDING hint #34 /* bti c */
#else
#define LANDING
#endif

/* SAVE/RESTORE keep x0-x2 and the frame across a call. */
.macro SAVE
    stp x29, x30, [sp, #-48]!
    .cfi_def_cfa_offset 48
    .cfi_offset 29, -48
    .cfi_offset 30, -40
    mov x29, sp
    stp x0, x1, [sp, #16]
    str x2, [sp, #32]
.endm

.macro RESTORE
    ldp x0, x1, [sp, #16]
    ldr x2, [sp, #32]
    ldp x29, x30, [sp], #48
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
.endm

.macro TRAMPOLINE name, real, versioned
    .text
    .p2align 4
    .globl \name
    .type \name, %function
\name:
    .cfi_startproc
    LANDING
    cbz x1, 9f
    ldrb w9, [x1]
    cmp w9, #0x6e
    b.eq 1f
    cmp w9, #0x63
    b.eq 2f
    cmp w9, #0x70
    b.eq 3f
    cmp w9, #0x50
    b.ne 9f
    ldrb w9, [x1, #1]
    cmp w9, #0x79
    b.eq 5f
    b 9f
3:  ldrb w9, [x1, #1]
    cmp w9, #0x6e
    b.eq 5f
    b 9f
2:  ldrb w9, [x1, #1]
    cmp w9, #0x75
    b.eq 5f
    b 9f
1:  ldrb w9, [x1, #1]
    cmp w9, #0x63
    b.ne 9f
    ldrb w9, [x1, #2]
    cmp w9, #0x63
    b.ne 9f
    ldrb w9, [x1, #3]
    cmp w9, #0x6c
    b.ne 9f
5:  mov x3, x30 /* the caller's return address */
    SAVE
    .if \versioned == 0
    mov x2, xzr
    .endif
    bl ls_dlsym_hook
    mov x9, x0
    RESTORE
    cbz x9, 9f
    mov x0, x9
    ret
9:  adrp x16, \real
    ldr x16, [x16, #:lo12:\real]
    cbz x16, 8f
    br x16
8:  SAVE
    mov w0, #\versioned
    bl ls_dl_find_real
    mov x16, x0
    RESTORE
    cbz x16, 7f
    br x16
7:  mov x0, xzr /* glibc's is nowhere: NULL (dlsym.c said so on stderr) */
    ret
    .cfi_endproc
    .size \name, .-\name
.endm

TRAMPOLINE dlsym, ls_dlsym_real, 0
TRAMPOLINE dlvsym, ls_dlvsym_real, 1

#endif

#if defined(__linux__) && defined(__ELF__)
.section .note.GNU-stack, "", %progbits
#endif
