/*
 * unwind_x86_64.h: unwind.c's rules and walk on x86-64, included by it
 * (it uses unwind.c's cache and its reading of .eh_frame), as
 * unwind_arm64.h is on aarch64.
 *
 * call pushes the return address at CFA - 8, so a rule is "CFA = rsp + k"
 * or "CFA = rbp + k", with the caller's rbp unchanged or saved at
 * CFA - 8j.
 */

/* A rule in 32 bits: kind in bits 0..1, the caller's rbp in bits 2..9 (0:
 * unchanged, j: saved at CFA - 8j), CFA's offset in bits 10..31. */
#define RULE(kind, rbp_slot, off) ((uint32_t)(kind) | (uint32_t)(rbp_slot) << 2 | (uint32_t)(off) << 10)
#define RULE_KIND(r)  ((r) & 3u)
#define RULE_RBP(r)   (((r) >> 2) & 0xffu)
#define RULE_OFF(r)   ((r) >> 10)
#define RULE_OFF_MAX  ((1u << 22) - 1)

/* The rule of the registers a frame's CFI leaves, or R_STOP where it is
 * not one a rule can say. */
static uint32_t x86_rule(const struct regs *rp)
{
    const struct regs r = *rp;
    if (r.ra_kind != REG_OFFSET || r.ra_off != -8 || (r.cfa_reg != DW_RSP && r.cfa_reg != DW_RBP) ||
        r.cfa_off < 8 || r.cfa_off > RULE_OFF_MAX)
        return R_STOP;
    uint32_t slot = 0;
    if (r.rbp_kind == REG_OFFSET) {
        if (r.rbp_off >= 0 || (-r.rbp_off) % 8 != 0 || -r.rbp_off / 8 > 255)
            return R_STOP;
        slot = (uint32_t)(-r.rbp_off / 8);
    } else if (r.rbp_kind == REG_OTHER) {
        return R_STOP;
    }
    return RULE(r.cfa_reg == DW_RSP ? R_RSP : R_RBP, slot, (uint32_t)r.cfa_off);
}

// ---- the walk -------------------------------------------------------------------------

int hl_unwind_from(uint64_t *pcs, uint64_t *cfas, int max, uint64_t rbp, uint64_t sp, uint64_t pc);

/* hl_unwind(pcs, cfas, max) starts the walk from its caller's registers as
 * they are at the call: from a return address, with no frame of its own in
 * between. It returns the frames found, negated when the walk stopped
 * before the stack's end (shim.h). */
__asm__(".text\n"
        ".globl hl_unwind\n"
        ".hidden hl_unwind\n"
        ".type hl_unwind, @function\n"
        "hl_unwind:\n"
        "    .cfi_startproc\n"
        "    movq %rbp, %rcx\n"     /* the caller's rbp: callee-saved, untouched */
        "    leaq 8(%rsp), %r8\n"   /* the caller's rsp after the return */
        "    movq (%rsp), %r9\n"    /* the return address */
        "    jmp hl_unwind_from\n"
        "    .cfi_endproc\n"
        ".size hl_unwind, .-hl_unwind\n");

int hl_unwind_from(uint64_t *pcs, uint64_t *cfas, int max, uint64_t rbp, uint64_t sp, uint64_t pc)
{
    uintptr_t lo = sp, hi = stack_top(sp);
    struct entry *const table = cache;
    const uint32_t ep = __atomic_load_n(&epoch, RELAXED);
    int n = 0;
    if (table == NULL || max <= 0 || hi == 0)
        return 0;
    for (;;) {
        pcs[n] = pc;
        if (cfas != NULL)
            cfas[n] = sp;
        if (++n == max)
            return -n;
        uint32_t rule = walk_rule(table, ep, pc);
        uint32_t kind = RULE_KIND(rule), slot = RULE_RBP(rule);
        if (kind == R_END)
            break;
        if (HL_UNLIKELY(rule == R_NOINFO)) {
            int step = hl_fp_step(&rbp, &sp, &pc, hi);
            if (step < 0)
                break;
            if (step == 0 && !hl_go_step(&rbp, &sp, &pc, &lo, &hi))
                return -n;
            continue;
        }
        uint64_t cfa = (kind == R_RSP ? sp : rbp) + RULE_OFF(rule);
        /* Every read lies in [lo, hi), mapped since we run on it: the CFA
         * above this frame's sp and at most hi, the saved rbp (at most 255
         * words below the CFA) at least lo. */
        if (HL_UNLIKELY(kind == R_STOP || cfa - sp - 1 >= hi - sp))
            return -n;
        if (slot != 0) {
            if (HL_UNLIKELY(cfa - lo < 8 * slot))
                return -n;
            rbp = *(const uint64_t *)(uintptr_t)(cfa - 8 * slot);
        }
        pc = *(const uint64_t *)(uintptr_t)(cfa - 8);
        sp = cfa;
        if (pc == 0)
            break; /* a thread's first frame, by convention */
    }
    return n;
}
