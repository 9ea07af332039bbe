/*
 * count_hotpair_arm64.c: aarch64's exported malloc and free, in assembly: the
 * hot pair of count_glibc.h, instruction for instruction, less what gcc
 * adds. gcc keeps malloc's block in x3 across the header test and moves
 * it back at its shared epilogue (two instructions no flag removed), and
 * reaches hl_next and the GOT's thread-pointer offset with an adrp each.
 * Here the block stays in x0, x19 (saved in the slot beside x30, the same
 * one stp) keeps hl_hot's page across the call, and free adds to
 * hl_self.free_at, the word's own address: ldxr takes no offset.
 *
 * The same design as x86-64's: one TLS load, one header load, one test,
 * one add whose carry is detected (shim.h, hl_chunk_add, says why the add
 * is an exclusive pair), then the same cold continuations as the C. Every
 * register used is one the AAPCS64 lets a callee clobber but x19, which
 * is restored before each exit. Counted in docs/data/fastpath-arm64-*.txt.
 */
#if defined(__aarch64__)
#include <stddef.h>
#include "shim.h"
#include "count_glibc.h"

_Static_assert(offsetof(struct hl_hot, next.malloc) == 0, "the asm's hl_hot+0");
_Static_assert(offsetof(struct hl_hot, next.free) == 8, "the asm's hl_hot+8");
_Static_assert(offsetof(struct hl_hot, tp_slot) == 80, "the asm's hl_hot+80");
_Static_assert(offsetof(struct hl_hot, tp_free_at) == 88, "the asm's hl_hot+88");
_Static_assert(sizeof(struct hl_hot) <= 128 && _Alignof(struct hl_hot) >= sizeof(struct hl_hot),
               "hl_hot within one page: one adrp reaches all of it");
_Static_assert(offsetof(struct hl_slot, free_word) == 8, "the asm's carry stub: free_at - 8 is the slot");
/* SLOW_BITS, tested as ~1 then 0xfffffffffffe0003: a logical immediate is
 * one rotated run of ones, and bit 1 and bits 17 up are two around bit 0 */
_Static_assert((SLOW_BITS | 1) == 0xfffffffffffe0003ull, "the asm's header test");
_Static_assert(HL_WORD_SHIFT == 50, "the asm's adds, lsl #50");

void hl_hot_init(void)
{
    uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
    hl_hot.tp_slot = (uintptr_t)&hl_self.slot - tp;
    hl_hot.tp_free_at = (uintptr_t)&hl_self.free_at - tp;
}

/* The asm's exits for a thread without a fast slot: the mode's own
 * continuation, from the one table (shim.h, hl_impl), as the C pair's. */
HL_HIDDEN void *hl_glibc_malloc_noslot(void *p) { return hl_impl.malloc_noslot(p); }
HL_HIDDEN void hl_glibc_free_noslot(void *p) { hl_impl.free_noslot(p); }

/* A build with branch protection (-mbranch-protection=bti or standard)
 * marks the object BTI: an indirect call, as through the PLT, must then
 * land on a bti c. The default build has none, and no instruction more. */
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define HL_BTI_C "   hint #34\n" /* bti c: a no-op on cores without BTI */
#else
#define HL_BTI_C ""
#endif

__asm__(
    "   .text\n"
    "   .p2align 5\n"
    "   .globl malloc\n"
    "   .type malloc, %function\n"
    "malloc:\n"
    "   .cfi_startproc\n"
    HL_BTI_C
    "   stp x30, x19, [sp, #-16]!\n"
    "   .cfi_def_cfa_offset 16\n"
    "   .cfi_offset 30, -16\n"
    "   .cfi_offset 19, -8\n"
    "   adrp x19, hl_hot\n"
    "   ldr x1, [x19, #:lo12:hl_hot]\n"       /* hl_next.malloc */
    "   blr x1\n"
    "   cbz x0, 1f\n"
    "   ldr x1, [x19, #:lo12:hl_hot+80]\n"    /* tp_slot */
    "   mrs x2, tpidr_el0\n"
    "   ldr x1, [x2, x1]\n"                   /* s = hl_self.slot */
    "   cbz x1, 2f\n"
    "   ldur x2, [x0, #-8]\n"                 /* h, the chunk header */
    "   and x3, x2, #0xfffffffffffffffe\n"
    "   and x3, x3, #0xfffffffffffe0003\n"
    "   cbnz x3, 3f\n"                        /* h & SLOW_BITS */
    "   lsr x2, x2, #4\n"
    "5: ldxr x3, [x1]\n"                      /* hl_chunk_add(&s->alloc_word, h) */
    "   adds x3, x3, x2, lsl #50\n"
    "   add x3, x3, #1\n"
    "   stxr w4, x3, [x1]\n"
    "   cbnz w4, 5b\n"
    "   b.cs 4f\n"
    "1: ldp x30, x19, [sp], #16\n"
    "   .cfi_remember_state\n"
    "   .cfi_restore 30\n"
    "   .cfi_restore 19\n"
    "   .cfi_def_cfa_offset 0\n"
    "   ret\n"
    "   .cfi_restore_state\n"
    "2: ldp x30, x19, [sp], #16\n"
    "   .cfi_remember_state\n"
    "   .cfi_restore 30\n"
    "   .cfi_restore 19\n"
    "   .cfi_def_cfa_offset 0\n"
    "   b hl_glibc_malloc_noslot\n"
    "   .cfi_restore_state\n"
    "3: ldp x30, x19, [sp], #16\n"
    "   .cfi_remember_state\n"
    "   .cfi_restore 30\n"
    "   .cfi_restore 19\n"
    "   .cfi_def_cfa_offset 0\n"
    "   b hl_glibc_malloc_cold\n"
    "   .cfi_restore_state\n"
    "4: ldp x30, x19, [sp], #16\n"
    "   .cfi_restore 30\n"
    "   .cfi_restore 19\n"
    "   .cfi_def_cfa_offset 0\n"
    "   b hl_glibc_malloc_carry\n"            /* (p, s) */
    "   .cfi_endproc\n"
    "   .size malloc, .-malloc\n"
    "\n"
    "   .p2align 5\n"
    "   .globl free\n"
    "   .type free, %function\n"
    "free:\n"
    "   .cfi_startproc\n"
    HL_BTI_C
    "   cbz x0, 1f\n"
    "   adrp x1, hl_hot\n"
    "   ldr x2, [x1, #:lo12:hl_hot+88]\n"     /* tp_free_at */
    "   mrs x3, tpidr_el0\n"
    "   ldr x2, [x3, x2]\n"                   /* w = hl_self.free_at */
    "   cbz x2, 2f\n"
    "   ldur x3, [x0, #-8]\n"
    "   and x4, x3, #0xfffffffffffffffe\n"
    "   and x4, x4, #0xfffffffffffe0003\n"
    "   cbnz x4, 3f\n"
    "   lsr x3, x3, #4\n"
    "5: ldxr x4, [x2]\n"                      /* hl_chunk_add(w, h) */
    "   adds x4, x4, x3, lsl #50\n"
    "   add x4, x4, #1\n"
    "   stxr w5, x4, [x2]\n"
    "   cbnz w5, 5b\n"
    "   b.cs 4f\n"
    "   ldr x16, [x1, #:lo12:hl_hot+8]\n"     /* hl_next.free, into x16 as the C's (count_glibc.h) */
    "   br x16\n"
    "1: ret\n"
    "2: b hl_glibc_free_noslot\n"
    "3: b hl_glibc_free_cold\n"
    "4: sub x1, x2, #8\n"                     /* the slot */
    "   b hl_glibc_free_carry\n"              /* (p, s) */
    "   .cfi_endproc\n"
    "   .size free, .-free\n");
#endif
