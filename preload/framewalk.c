/*
 * framewalk.c: the walk's continuation through frames no unwind table
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
#include <stdint.h>
#include "shim.h"

/* One frame-pointer step from the frame at *pc, whose frame pointer is
 * *rbp, on a stack whose walk has reached *sp and ends at hi: 1 and the
 * caller's registers, or 0 and nothing changed when the frame is not sane. */
int hl_fp_step(uint64_t *rbp, uint64_t *sp, uint64_t *pc, uintptr_t hi)
{
    uint64_t fp = *rbp;
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
