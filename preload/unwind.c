/*
 * unwind.c: the sampler's stack walk, with no per-thread state.
 *
 * The programs we profile are built without frame pointers, so each frame
 * is found from its object's call frame information (.eh_frame, through
 * .eh_frame_hdr's sorted table). Running a frame's CFA program is the slow
 * part, so its outcome is kept: one process-wide cache keyed by return
 * address holds each address's *rule*, "CFA = rsp + k" or "CFA = rbp + k",
 * with the caller's rbp either unchanged or saved at CFA - 8j, and the
 * return address at CFA - 8 (x86-64's call). More than 97% of the rows of
 * python3.11, libc and libstdc++ have one of those shapes (readelf -wF).
 * A hit costs a hash, two loads and the return address's load: a thread's
 * first sample costs what its hundredth does, where libunwind built a
 * 256 KiB trace cache per thread and took a global mutex per new address
 * (parca-agent's compact unwind tables and framehop's rule cache are the
 * models; docs/journal.md has the measurements that chose this).
 *
 * No lock, no malloc, no signal-mask change, no file descriptor: a miss
 * finds the frame's FDE through hl_find_object (unwind_objects.c: _dl_find_object,
 * lock-free and async-signal-safe, where glibc has it) and the object's .eh_frame_hdr. The cache's entries
 * are two words written without a lock; a check word ties the rule to its
 * address, so a reader that races a writer sees a miss, never another
 * address's rule. dlclose moves the cache's epoch (override.c), which
 * turns every entry into a miss: an object loaded where a closed one was
 * gets rules of its own.
 *
 * The walk stops, and says why, outside the thread's stack, at a rule it
 * does not handle (a CFA expression: signal frames, PLT stubs), at a
 * frame whose return address is undefined (the outermost, _start and
 * clone), and at max frames. An address no table describes (JIT code, in
 * no object; code in no FDE) is followed by its frame pointer when that
 * looks sane (unwind_framewalk.c), and the walk stops there otherwise.
 */
#include <link.h>
#include <string.h>
#include <sys/resource.h>
#include "shim.h"

#define RELAXED __ATOMIC_RELAXED

// ---- rules ----------------------------------------------------------------------------
/* A rule in 32 bits: each architecture's RULE packs it. */
enum { R_STOP = 0, R_RSP = 1, R_RBP = 2, R_END = 3 }; /* RULE: unwind_x86_64.h, unwind_arm64.h */
/* A stop for want of a table (an address in no object, or in no FDE: JIT
 * code, V8's embedded builtins): unwind_framewalk.c may go on by frame pointer. */
#if defined(__aarch64__)
#define R_NOINFO RULE(R_STOP, 0, 0, 1) /* aarch64's walk stops at it as at any R_STOP */
#else
#define R_NOINFO RULE(R_STOP, 0, 1)
#endif

// ---- the cache ------------------------------------------------------------------------
/* Direct-mapped: 2^14 entries of 16 bytes (256 KiB of address space,
 * pages only as they are used). A python3 profile's stacks have a few
 * thousand distinct return addresses. */
#define CACHE_BITS 14
#define CACHE_SIZE ((size_t)1 << CACHE_BITS)

struct entry {
    uint64_t pc;
    uint64_t val; /* rule | check << 32; 0 is empty */
};

static struct entry *cache;
static uint32_t epoch;

/* One multiply gives both: the entry from the top bits, the check (never
 * 0, and another for another address or epoch) from the low ones. */
static inline uint64_t cache_hash(uint64_t pc) { return pc * 0x9e3779b97f4a7c15ull; }
static inline size_t cache_index(uint64_t h) { return (size_t)(h >> (64 - CACHE_BITS)); }
static inline uint32_t check_of(uint64_t h) { return ((uint32_t)h ^ __atomic_load_n(&epoch, RELAXED)) | 1u; }

void hl_unwind_forget(void) { __atomic_add_fetch(&epoch, 2, RELAXED); }

static uint32_t rule_of(uint64_t pc);

/* The walk's lookup: rule_of(pc), with the table and epoch read once a
 * walk and the hit inline. */
static inline __attribute__((always_inline)) uint32_t walk_rule(const struct entry *table, uint32_t ep, uint64_t pc)
{
    uint64_t h = cache_hash(pc);
    const struct entry *e = &table[cache_index(h)];
    uint64_t val = __atomic_load_n(&e->val, __ATOMIC_ACQUIRE);
    if (HL_UNLIKELY(__atomic_load_n(&e->pc, RELAXED) != pc || (uint32_t)(val >> 32) != (((uint32_t)h ^ ep) | 1u)))
        return rule_of(pc);
    return (uint32_t)val;
}

// ---- reading .eh_frame ----------------------------------------------------------------

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
    int64_t v = 0;
    int shift = 0;
    uint8_t b = 0;
    while (*p < end && shift < 64) {
        b = *(*p)++;
        v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

#define PE_OMIT 0xff

/* A pointer in DW_EH_PE encoding enc at *p; datarel is relative to base.
 * 0 and *ok = 0 on an encoding we do not read. */
static uint64_t encoded(const uint8_t **p, const uint8_t *end, uint8_t enc, uint64_t base, int *ok)
{
    const uint8_t *at = *p;
    uint64_t v;
    if (enc == PE_OMIT)
        return 0;
    switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: /* absptr, udata8, sdata8 */
        if (end - at < 8) goto bad;
        memcpy(&v, at, 8), *p += 8;
        break;
    case 0x03: { uint32_t u; if (end - at < 4) goto bad; memcpy(&u, at, 4), *p += 4; v = u; break; }
    case 0x0b: { int32_t s; if (end - at < 4) goto bad; memcpy(&s, at, 4), *p += 4; v = (uint64_t)(int64_t)s; break; }
    case 0x02: { uint16_t u; if (end - at < 2) goto bad; memcpy(&u, at, 2), *p += 2; v = u; break; }
    case 0x0a: { int16_t s; if (end - at < 2) goto bad; memcpy(&s, at, 2), *p += 2; v = (uint64_t)(int64_t)s; break; }
    case 0x01: v = uleb(p, end); break;
    case 0x09: v = (uint64_t)sleb(p, end); break;
    default: goto bad;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)at; break; /* pcrel */
    case 0x30: v += base; break;          /* datarel */
    default: goto bad;
    }
    if (enc & 0x80)
        goto bad; /* indirect: never in the fields we read */
    return v;
bad:
    *ok = 0;
    return 0;
}

/* The FDE covering pc in the object whose .eh_frame_hdr is hdr: its start,
 * or NULL. The table is sorted by initial location (binary search). */
static const uint8_t *find_fde(const uint8_t *hdr, uint64_t pc)
{
    if (hdr == NULL || hdr[0] != 1)
        return NULL;
    const uint8_t *p = hdr + 4, *end = hdr + 4 + 32;
    int ok = 1;
    (void)encoded(&p, end, hdr[1], (uintptr_t)hdr, &ok); /* eh_frame_ptr */
    uint64_t count = encoded(&p, end, hdr[2], (uintptr_t)hdr, &ok);
    if (!ok || hdr[3] != 0x3b || count == 0) /* datarel sdata4: every linker's */
        return NULL;
    const int32_t *table = (const int32_t *)p;
    uint64_t lo = 0, hi = count;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((uint64_t)((uintptr_t)hdr + (int64_t)table[2 * mid]) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if ((uint64_t)((uintptr_t)hdr + (int64_t)table[2 * lo]) > pc)
        return NULL;
    return hdr + (int64_t)table[2 * lo + 1];
}

/* What a CFA program leaves for the registers we follow. */
enum { REG_SAME = 0, REG_UNDEF, REG_OFFSET, REG_OTHER };
struct regs {
    uint8_t cfa_reg;   /* DWARF register: 7 rsp, 6 rbp; 0xff an expression */
    int64_t cfa_off;
    uint8_t rbp_kind, ra_kind;
    int64_t rbp_off, ra_off;
};

#if defined(__aarch64__)
#define DW_RBP 29 /* x29, the frame pointer */
#define DW_RSP 31 /* sp */
#define DW_RA  30 /* x30, the link register: aarch64's return address column */
#else
#define DW_RBP 6
#define DW_RSP 7
#define DW_RA  16
#endif

static void set_reg(struct regs *r, uint64_t reg, uint8_t kind, int64_t off)
{
    if (reg == DW_RBP)
        r->rbp_kind = kind, r->rbp_off = off;
    else if (reg == DW_RA)
        r->ra_kind = kind, r->ra_off = off;
}

static void restore_reg(struct regs *r, const struct regs *init, uint64_t reg)
{
    if (reg == DW_RBP)
        r->rbp_kind = init->rbp_kind, r->rbp_off = init->rbp_off;
    else if (reg == DW_RA)
        r->ra_kind = init->ra_kind, r->ra_off = init->ra_off;
}

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    uint8_t has_z, signal;
    const uint8_t *insns, *end;
};

/* Run CFA instructions [p, end) while the location is at most pc; init
 * is the CIE's outcome (for DW_CFA_restore). 0 on an instruction we do not
 * know. */
#define STATE_DEPTH 8
static int run(const struct cie *c, const uint8_t *p, const uint8_t *end, uint64_t loc, uint64_t pc, struct regs *r,
               const struct regs *init)
{
    struct regs saved[STATE_DEPTH];
    int depth = 0, ok = 1;
    while (p < end) {
        uint8_t op = *p++;
        uint64_t reg, delta;
        switch (op >> 6) {
        case 1:
            delta = (uint64_t)(op & 0x3f) * c->code_align;
            goto advance;
        case 2:
            set_reg(r, op & 0x3f, REG_OFFSET, (int64_t)uleb(&p, end) * c->data_align);
            continue;
        case 3:
            if (init != NULL)
                restore_reg(r, init, op & 0x3f);
            continue;
        }
        switch (op) {
        case 0x00: continue; /* nop */
        case 0x01: /* set_loc */
            loc = encoded(&p, end, c->fde_enc, 0, &ok);
            if (!ok || loc > pc)
                return ok;
            continue;
        case 0x02: if (end - p < 1) return 0; delta = p[0] * c->code_align, p += 1; goto advance;
        case 0x03: { uint16_t d; if (end - p < 2) return 0; memcpy(&d, p, 2), p += 2; delta = d * c->code_align; goto advance; }
        case 0x04: { uint32_t d; if (end - p < 4) return 0; memcpy(&d, p, 4), p += 4; delta = d * c->code_align; goto advance; }
        case 0x05: reg = uleb(&p, end); set_reg(r, reg, REG_OFFSET, (int64_t)uleb(&p, end) * c->data_align); continue;
        case 0x06: reg = uleb(&p, end); if (init != NULL) restore_reg(r, init, reg); continue;
        case 0x07: set_reg(r, uleb(&p, end), REG_UNDEF, 0); continue;
        case 0x08: set_reg(r, uleb(&p, end), REG_SAME, 0); continue;
        case 0x09: reg = uleb(&p, end); (void)uleb(&p, end); set_reg(r, reg, REG_OTHER, 0); continue;
        case 0x0a:
            if (depth == STATE_DEPTH)
                return 0;
            saved[depth++] = *r;
            continue;
        case 0x0b: {
            if (depth == 0)
                return 0;
            /* the CFA is part of the state (DWARF 5, 6.4.2.4) */
            *r = saved[--depth];
            continue;
        }
        case 0x0c: r->cfa_reg = (uint8_t)uleb(&p, end); r->cfa_off = (int64_t)uleb(&p, end); continue;
        case 0x0d: r->cfa_reg = (uint8_t)uleb(&p, end); continue;
        case 0x0e: r->cfa_off = (int64_t)uleb(&p, end); continue;
        case 0x0f: delta = uleb(&p, end); r->cfa_reg = 0xff; p += delta; continue; /* def_cfa_expression */
        case 0x10: reg = uleb(&p, end); delta = uleb(&p, end); p += delta; set_reg(r, reg, REG_OTHER, 0); continue;
        case 0x11: reg = uleb(&p, end); set_reg(r, reg, REG_OFFSET, sleb(&p, end) * c->data_align); continue;
        case 0x12: r->cfa_reg = (uint8_t)uleb(&p, end); r->cfa_off = sleb(&p, end) * c->data_align; continue;
        case 0x13: r->cfa_off = sleb(&p, end) * c->data_align; continue;
        case 0x14: case 0x15: reg = uleb(&p, end); (void)uleb(&p, end); set_reg(r, reg, REG_OTHER, 0); continue;
        case 0x16: reg = uleb(&p, end); delta = uleb(&p, end); p += delta; set_reg(r, reg, REG_OTHER, 0); continue;
        case 0x2e: (void)uleb(&p, end); continue; /* GNU_args_size */
        case 0x2f: reg = uleb(&p, end); set_reg(r, reg, REG_OFFSET, -(int64_t)uleb(&p, end) * c->data_align); continue;
#if defined(__aarch64__)
        case 0x2d: continue; /* AARCH64_negate_ra_state: x30 is signed from here (PAC); the walk strips it anyway */
#endif
        default: return 0;
        }
    advance:
        if (loc + delta > pc)
            return 1;
        loc += delta;
    }
    return 1;
}

/* The CIE at p (its length field): 0 if we cannot read it. */
static int read_cie(const uint8_t *p, struct cie *c)
{
    uint32_t len32;
    memcpy(&len32, p, 4);
    if (len32 == 0 || len32 == 0xffffffffu)
        return 0;
    const uint8_t *end = p + 4 + len32;
    p += 8; /* length, CIE id */
    uint8_t version = *p++;
    const char *aug = (const char *)p;
    size_t auglen = strnlen(aug, (size_t)(end - p));
    p += auglen + 1;
    if (aug[0] != 0 && aug[0] != 'z')
        return 0; /* "eh" and other old forms */
    memset(c, 0, sizeof *c);
    c->fde_enc = 0; /* absptr unless 'R' says */
    c->code_align = uleb(&p, end);
    c->data_align = sleb(&p, end);
    c->ra_reg = version == 1 ? *p++ : uleb(&p, end);
    if (aug[0] == 'z') {
        uint64_t alen = uleb(&p, end);
        const uint8_t *aend = p + alen, *q = p;
        int ok = 1;
        c->has_z = 1;
        for (size_t i = 1; i < auglen && q < aend; i++) {
            switch (aug[i]) {
            case 'R': c->fde_enc = *q++; break;
            case 'L': q++; break;
            case 'P': { uint8_t enc = *q++; (void)encoded(&q, aend, enc & 0x7f, 0, &ok); break; }
            case 'S': c->signal = 1; break;
            default: return 0;
            }
        }
        if (!ok)
            return 0;
        p = aend;
    }
    c->insns = p;
    c->end = end;
    return p <= end;
}

extern void *__libc_stack_end;
static uintptr_t stack_limit; /* RLIMIT_STACK: how far below its top a thread's stack reaches */

/* The top of the running thread's stack, or 0 if we cannot tell. A thread
 * glibc started keeps its descriptor (where %fs points) at the top of its
 * stack block, one mapping with the stack below it, whose size is
 * RLIMIT_STACK unless the program chose another; the main thread's stack
 * ends above __libc_stack_end (its arguments and environment), in the same
 * page at least, and is at most RLIMIT_STACK deep. A stack pointer farther
 * down is on a stack we know nothing of (a coroutine's, sigaltstack's, a
 * thread with a larger stack of its own): no walk, rather than a read
 * outside its mapping. On aarch64 the descriptor and static TLS, where
 * tpidr_el0 points, sit at the top of the stack's mapping too. */
static uintptr_t stack_top(uintptr_t sp)
{
    uintptr_t tp = (uintptr_t)__builtin_thread_pointer(); /* %fs's base; tpidr_el0 */
    if (sp < tp && tp - sp < stack_limit)
        return tp;
    uintptr_t main_top = ((uintptr_t)__libc_stack_end | 4095) + 1;
    if (sp < main_top && main_top - sp < stack_limit)
        return main_top;
    return 0;
}

#if defined(__aarch64__)
#include "unwind_arm64.h" /* aarch64's rules and walk */
#else
#include "unwind_x86_64.h" /* x86-64's */
#endif

/* The rule for return address pc (the call is at pc - 1). *keep = 0 when
 * pc is in no loaded object: JIT code, whose memory may hold an object
 * later, so that stop is not cached. */
static HL_NOINLINE uint32_t find_rule(uint64_t pc, int *keep)
{
    struct hl_dlfo found;
    *keep = 1;
    if (hl_find_object((void *)(uintptr_t)(pc - 1), &found) != 0) {
        *keep = 0;
        return R_NOINFO;
    }
    const uint8_t *fde = find_fde(found.dlfo_eh_frame, pc - 1);
    if (fde == NULL)
        return R_NOINFO;
    uint32_t len32, cie_off;
    memcpy(&len32, fde, 4);
    if (len32 == 0 || len32 == 0xffffffffu)
        return R_STOP;
    memcpy(&cie_off, fde + 4, 4);
    if (cie_off == 0)
        return R_STOP; /* a CIE, not an FDE */
    struct cie c;
    if (!read_cie(fde + 4 - cie_off, &c) || c.ra_reg != DW_RA)
        return R_STOP;
    const uint8_t *p = fde + 8, *end = fde + 4 + len32;
    int ok = 1;
    uint64_t begin = encoded(&p, end, c.fde_enc, 0, &ok);
    uint64_t range = encoded(&p, end, c.fde_enc & 0x0f, 0, &ok);
    if (!ok || pc - 1 < begin || pc - 1 - begin >= range)
        return R_NOINFO;
    if (c.has_z)
        p += uleb(&p, end);
    if (c.signal)
        return R_STOP; /* the frame is a signal's: the rest is a sigcontext */
#if defined(__aarch64__)
    struct regs r = {DW_RSP, 0, REG_SAME, REG_SAME, 0, 0}, init; /* bl leaves sp as it was, the return address in x30 */
#else
    struct regs r = {DW_RSP, 8, REG_SAME, REG_OFFSET, 0, -8}, init;
#endif
    if (!run(&c, c.insns, c.end, 0, UINT64_MAX, &r, NULL))
        return R_STOP;
    init = r;
    if (!run(&c, p, end, begin, pc - 1, &r, &init))
        return R_STOP;
    if (r.ra_kind == REG_UNDEF)
        return R_END; /* the outermost frame */
#if defined(__aarch64__)
    return arm64_rule(&r);
#else
    return x86_rule(&r);
#endif
}

static HL_NOINLINE uint32_t rule_of(uint64_t pc)
{
    uint64_t h = cache_hash(pc);
    struct entry *e = &cache[cache_index(h)];
    uint64_t val = __atomic_load_n(&e->val, __ATOMIC_ACQUIRE);
    uint32_t check = check_of(h);
    if (HL_LIKELY(__atomic_load_n(&e->pc, RELAXED) == pc && (uint32_t)(val >> 32) == check))
        return (uint32_t)val;
    int keep;
    uint32_t rule = find_rule(pc, &keep);
    if (!keep)
        return rule;
    /* A reader between these stores sees the new pc with the old check, or
     * the old pc with the new: a miss either way. */
    __atomic_store_n(&e->val, 0, RELAXED);
    __atomic_store_n(&e->pc, pc, __ATOMIC_RELEASE);
    __atomic_store_n(&e->val, (uint64_t)rule | (uint64_t)check << 32, __ATOMIC_RELEASE);
    return rule;
}


/* At boot, with sampling on: the cache (raw mmap: no malloc). */
int hl_unwind_boot(void)
{
    struct rlimit lim;
    stack_limit = (uintptr_t)32 << 20; /* glibc's default thread stack when RLIMIT_STACK is unlimited */
    if (getrlimit(RLIMIT_STACK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < ((rlim_t)1 << 32))
        stack_limit = (uintptr_t)lim.rlim_cur;
    if (cache == NULL)
        cache = hl_raw_map(CACHE_SIZE * sizeof *cache);
    return cache != NULL ? 0 : -1;
}
