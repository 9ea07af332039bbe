/*
 * usdt.c: the otel_memory probes (usdt.h), each in a function of its own
 * that the sampler calls only while a tracer holds the probe's semaphore.
 *
 * The probe is the function's first instruction, so its arguments are
 * still in the registers the ABI passed them in (x86-64: rdi, rsi, rdx;
 * arm64: x0, x1, x2): the OpenTelemetry profiler's first reader takes them
 * from there rather than from the note's argument specs, and bpftrace or
 * any other USDT reader reads the specs, which name the same registers.
 */
#define _SDT_HAS_SEMAPHORES 1
#include "sdt.h" /* systemtap's sys/sdt.h, kept in preload/ */
#include "usdt.h"

HL_HIDDEN volatile unsigned short otel_memory_alloc_semaphore __attribute__((section(".probes"))) = 0;
HL_HIDDEN volatile unsigned short otel_memory_free_semaphore __attribute__((section(".probes"))) = 0;

/* heapline:alloc shares otel_memory:alloc's site, so it shares its
 * semaphore too: the kernel takes one counter for one address, whichever
 * note a tracer attached by. */
extern HL_HIDDEN volatile unsigned short heapline_alloc_semaphore __attribute__((alias("otel_memory_alloc_semaphore")));

/* One site, two notes: otel_memory:alloc(ptr, size, weight), the contract,
 * and heapline:alloc(ptr, size, weight, frames, nframes), which adds the
 * stack the sampler has just walked (its entry's return addresses in the
 * region), so that heapctl trace copies a few hundred bytes of frames
 * instead of the top of the stack, and unwinds nothing. A tracer of either
 * note pays the same one hit. */
HL_COLD void hl_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight, const uint64_t *frames, uint64_t nframes)
{
    _SDT_NOTE_SEMAPHORE_USE(otel_memory, alloc);
    __asm__ __volatile__(_SDT_ASM_BODY(otel_memory, alloc, _SDT_ASM_ARGS, (3))
                             _SDT_ASM_NOTE(heapline, alloc, _SDT_ASM_ARGS, (5))::_SDT_ASM_OPERANDS_5(ptr, size, weight, frames, nframes));
    __asm__ __volatile__(_SDT_ASM_BASE);
}

HL_COLD void hl_usdt_free(uint64_t ptr)
{
    STAP_PROBE1(otel_memory, free, ptr);
}
