/*
 * unwind_framewalk.c: the walk's continuation through frames no unwind table
 * describes, by frame pointer.
 *
 * JIT code is in no loaded object, and V8's builtins, which node embeds in
 * its own .text, have no call frame information: unwind.c's table walk
 * stops at either. Both keep rbp chains, as does HotSpot's compiled code
 * with -XX:+PreserveFramePointer: a frame's rbp points at the caller's rbp,
 * with the return address above it (push rbp; mov rsp, rbp). That is how
 * perf and every eBPF profiler walk them, and names come afterwards from
 * /tmp/perf-PID.map (heapctl, ctl/internal/profile).
 *
 * A frame is followed only if it looks sane: its rbp 8-aligned, at or
 * above the stack pointer the walk has reached, and its two words below
 * the thread's stack top; a return address not 0. The caller's sp is then
 * rbp + 16, above this frame's: stacks grow down, so the walk only climbs
 * and is bounded by the stack's size as well as by its frames. The
 * caller's rbp is not judged here: a caller with call frame information
 * may use rbp for anything, and one without meets this test in its turn.
 * Every read is inside [sp, hi), the part of the thread's stack the walk
 * has shown to be mapped, as unwind.c's own reads are: no fault, no lock,
 * no malloc, no fd. It runs only at a sample, on a walk's slow path.
 *
 * Go's cgo calls are the other frame without a table (the Go linker writes
 * no .eh_frame): runtime.asmcgocall switches from the goroutine's stack to
 * the thread's (g0) and calls C there. hl_go_step crosses back, below.
 */
#include <link.h>
#include <stdint.h>
#include <string.h>
#include "shim.h"

/* One frame-pointer step from the frame at *pc, whose frame pointer is
 * *rbp, on a stack whose walk has reached *sp and ends at hi: 1 and the
 * caller's registers, -1 at the chain's end (rbp 0: runtime.goexit's,
 * a thread's first), or 0 and nothing changed when the frame is not sane. */
int hl_fp_step(uint64_t *rbp, uint64_t *sp, uint64_t *pc, uintptr_t hi)
{
    uint64_t fp = *rbp;
    if (fp == 0)
        return -1;
    if ((fp & 7) != 0 || fp < *sp || fp >= hi || hi - fp < 16)
        return 0;
    const uint64_t *frame = (const uint64_t *)(uintptr_t)fp;
    uint64_t caller = frame[0], ra = frame[1];
    if (ra == 0)
        return 0;
    *rbp = caller;
    *sp = fp + 16;
    *pc = ra;
    return 1;
}

// ---- Go's cgo calls ---------------------------------------------------------------------
/* runtime.asmcgocall (Go's asm_amd64.s) pushes rbp on the goroutine's
 * stack, switches to g0's, leaves there [depth, g] (the goroutine's depth
 * below its stack's top, and its g) and calls the C function. Its return
 * address is followed by the code that switches back, the same since Go
 * 1.17: MOVQ 8(SP), DI; MOVQ 8(DI), SI (g.stack.hi); SUBQ 0(SP), SI. Seen
 * there, the g is the running goroutine's, its first two words the
 * bounds of its stack [lo, hi), and rbp the frame of asmcgocall on it:
 * from there Go's frame pointers lead to the function that called C, and
 * on to runtime.goexit. The code is read only inside the program's
 * executable segments, noted at boot: a return address is only a word
 * of the stack, and a read elsewhere could fault. The g and the
 * goroutine's stack are outside the thread's stack, the one exception to
 * its bound: the g is the one asmcgocall stored, and Go never unmaps its
 * heap, where both live (a g is never freed; a freed stack is at worst
 * returned with madvise, still mapped), and the reads on the goroutine's
 * stack keep to the bounds its g gives. */
static const uint8_t go_switch_back[] = {0x48, 0x8b, 0x7c, 0x24, 0x08, 0x48, 0x8b, 0x77,
                                         0x08, 0x48, 0x2b, 0x34, 0x24};

#define PROGRAM_SEGMENTS 8
static struct { uintptr_t lo, hi; } program_code[PROGRAM_SEGMENTS];
static int nprogram_code;

static int note_program(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    for (int i = 0; i < info->dlpi_phnum && nprogram_code < PROGRAM_SEGMENTS; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            program_code[nprogram_code].lo = info->dlpi_addr + ph->p_vaddr;
            program_code[nprogram_code].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
            nprogram_code++;
        }
    }
    return 1; /* the first object is the program */
}

/* At boot: the program's executable segments (dl_iterate_phdr takes the
 * loader's lock, which a sample may not). */
void hl_framewalk_boot(void)
{
    if (nprogram_code == 0)
        dl_iterate_phdr(note_program, NULL);
}

static int in_program_code(uintptr_t a, size_t n)
{
    for (int i = 0; i < nprogram_code; i++)
        if (a >= program_code[i].lo && a < program_code[i].hi && program_code[i].hi - a >= n)
            return 1;
    return 0;
}

/* From a return address into runtime.asmcgocall onto the goroutine's
 * stack: 1 with the registers of asmcgocall's caller and that stack's
 * bounds in *lo and *hi, 0 and nothing changed otherwise. */
int hl_go_step(uint64_t *rbp, uint64_t *sp, uint64_t *pc, uintptr_t *lo, uintptr_t *hi)
{
    if (!in_program_code((uintptr_t)*pc, sizeof go_switch_back) ||
        memcmp((const void *)(uintptr_t)*pc, go_switch_back, sizeof go_switch_back) != 0)
        return 0;
    if ((*sp & 7) != 0 || *sp < *lo || *sp >= *hi || *hi - *sp < 16)
        return 0;
    const uint64_t *saved = (const uint64_t *)(uintptr_t)*sp;
    uint64_t depth = saved[0], g = saved[1];
    if (g == 0 || (g & 7) != 0)
        return 0;
    const uint64_t *stack = (const uint64_t *)(uintptr_t)g; /* g.stack: lo, hi */
    uint64_t glo = stack[0], ghi = stack[1], gsp = ghi - depth, fp = *rbp;
    /* The goroutine's sp at the switch inside its stack, and rbp at or
     * above it: asmcgocall's own frame (Go 1.21 on push rbp there, and
     * rbp is that sp), or its caller's. */
    if (glo >= ghi || depth > ghi - glo || gsp < glo || (fp & 7) != 0 || fp < gsp || fp >= ghi || ghi - fp < 16)
        return 0;
    const uint64_t *frame = (const uint64_t *)(uintptr_t)fp;
    if (frame[1] == 0)
        return 0;
    *rbp = frame[0];
    *pc = frame[1];
    *sp = fp + 16;
    *lo = (uintptr_t)glo;
    *hi = (uintptr_t)ghi;
    return 1;
}
