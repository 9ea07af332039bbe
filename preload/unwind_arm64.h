/*
 * unwind_arm64.h: unwind.c's rules and walk on aarch64, included by it
 * (it uses unwind.c's cache and its reading of .eh_frame).
 *
 * bl leaves sp as it was and the return address in x30; a function that
 * calls another saves x30 (and x29) in its frame, mostly with one
 * `stp x29, x30, [sp, #-k]!`. So a rule is "CFA = sp + k" or
 * "CFA = x29 + k", the caller's x29 unchanged or saved at CFA - 8j, and
 * the return address saved at CFA - 8m: unlike x86-64's call, m is the
 * frame's own (16 bytes under the CFA after `stp x29, x30, [sp, #-16]!`,
 * 8 when x29 and x30 were pushed as a pair at the top). A return address
 * still in x30 is only ever a leaf's, and a leaf is never on the walk
 * (the walk starts in a caller of hl_unwind).
 *
 * Return addresses may be signed (PAC, -mbranch-protection=pac-ret: the
 * frame's CFI says DW_CFA_AARCH64_negate_ra_state): each is stripped with
 * xpaclri, written as its hint-space form (hint #7), which armv8.0 cores
 * without PAC run as a no-op.
 */

/* A rule in 32 bits: kind in bits 0..1, the caller's x29 in bits 2..11
 * (0: unchanged, j: saved at CFA - 8j), the return address's slot m in
 * bits 12..21 (saved at CFA - 8m, never 0), CFA's offset in words in bits
 * 22..31. A frame with large locals keeps x29 and x30 at its bottom
 * (`sub sp, sp, #N; stp x29, x30, [sp]`), so m is as large as the frame:
 * up to 8 KiB is cached, a larger frame stops the walk. */
#define RULE(kind, fp_slot, ra_slot, off) \
    ((uint32_t)(kind) | (uint32_t)(fp_slot) << 2 | (uint32_t)(ra_slot) << 12 | (uint32_t)((off) / 8) << 22)
#define RULE_KIND(r)  ((r) & 3u)
#define RULE_RBP(r)   (((r) >> 2) & 0x3ffu)
#define RULE_RA(r)    (((r) >> 12) & 0x3ffu)
#define RULE_OFF(r)   (((r) >> 22) * 8)
#define RULE_OFF_MAX  (0x3ffu * 8)
#define SLOT_MAX      0x3ff

/* A register's save slot as j of CFA - 8j, or -1 when the rule cannot say it. */
static int arm64_slot(int64_t off)
{
    if (off >= 0 || (-off) % 8 != 0 || -off / 8 > SLOT_MAX)
        return -1;
    return (int)(-off / 8);
}

/* find_rule's outcome, from the registers a frame's CFA program left. */
static uint32_t arm64_rule(const struct regs *r)
{
    if (r->ra_kind != REG_OFFSET || (r->cfa_reg != DW_RSP && r->cfa_reg != DW_RBP) || r->cfa_off < 8 ||
        r->cfa_off > RULE_OFF_MAX || r->cfa_off % 8 != 0)
        return R_STOP;
    int ra = arm64_slot(r->ra_off), fp = 0;
    if (ra <= 0)
        return R_STOP;
    if (r->rbp_kind == REG_OFFSET) {
        if ((fp = arm64_slot(r->rbp_off)) <= 0)
            return R_STOP;
    } else if (r->rbp_kind == REG_OTHER) {
        return R_STOP;
    }
    return RULE(r->cfa_reg == DW_RSP ? R_RSP : R_RBP, fp, ra, (uint32_t)r->cfa_off);
}

/* A return address without its PAC signature: xpaclri strips x30's. */
static inline __attribute__((always_inline)) uint64_t arm64_strip(uint64_t pc)
{
    register uint64_t lr __asm__("x30") = pc;
    __asm__("hint #7" : "+r"(lr)); /* xpaclri */
    return lr;
}

int hl_unwind_from(uint64_t *pcs, uint64_t *cfas, int max, uint64_t fp, uint64_t sp, uint64_t pc);

/* hl_unwind(pcs, cfas, max): the caller's x29, sp and return address as
 * they are at the bl, with no frame of its own. */
__asm__(".text\n"
        ".globl hl_unwind\n"
        ".hidden hl_unwind\n"
        ".type hl_unwind, %function\n"
        "hl_unwind:\n"
        "    .cfi_startproc\n"
        "    mov x3, x29\n"  /* the caller's x29: callee-saved, untouched */
        "    mov x4, sp\n"   /* the caller's sp: bl moves none */
        "    mov x5, x30\n"  /* the return address */
        "    b hl_unwind_from\n"
        "    .cfi_endproc\n"
        ".size hl_unwind, .-hl_unwind\n");

int hl_unwind_from(uint64_t *pcs, uint64_t *cfas, int max, uint64_t fp, uint64_t sp, uint64_t pc)
{
    uintptr_t lo = sp, hi = stack_top(sp);
    struct entry *const table = cache;
    const uint32_t ep = __atomic_load_n(&epoch, RELAXED);
    int n = 0;
    if (table == NULL || max <= 0 || hi == 0)
        return 0;
    pc = arm64_strip(pc);
    for (;;) {
        pcs[n] = pc;
        if (cfas != NULL)
            cfas[n] = sp;
        if (++n == max)
            return -n;
        uint32_t rule = walk_rule(table, ep, pc);
        uint32_t kind = RULE_KIND(rule), slot = RULE_RBP(rule), ra = RULE_RA(rule);
        if (kind == R_END)
            break;
        uint64_t cfa = (kind == R_RSP ? sp : fp) + RULE_OFF(rule);
        /* Every read lies in [lo, hi): the CFA above this frame's sp and
         * at most hi, both slots (at most 1023 words below it) at least lo. */
        if (HL_UNLIKELY(kind == R_STOP || cfa - sp - 1 >= hi - sp || cfa - lo < 8 * ra))
            return -n;
        if (slot != 0) {
            if (HL_UNLIKELY(cfa - lo < 8 * slot))
                return -n;
            fp = *(const uint64_t *)(uintptr_t)(cfa - 8 * slot);
        }
        pc = arm64_strip(*(const uint64_t *)(uintptr_t)(cfa - 8 * ra));
        sp = cfa;
        if (pc == 0)
            break; /* a thread's first frame, by convention */
    }
    return n;
}
