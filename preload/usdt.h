/*
 * usdt.h: the otel_memory USDT probes (usdt.c), the contract of the
 * OpenTelemetry eBPF profiler's memory profiling (docs/profiling.md):
 *
 *   otel_memory:alloc(ptr, size, weight)  a sampled block: the pointer the
 *                                         program got, its usable bytes, and
 *                                         the bytes it stands for (its weight)
 *   otel_memory:free(ptr)                 a sampled block released
 *
 * and, at the alloc probe's own site, heapline:alloc(ptr, size, weight,
 * frames, nframes): the same three and the stack the sampler walked, for
 * heapctl trace (usdt.c).
 *
 * Each has a USDT semaphore, which the kernel counts up while a tracer is
 * attached: the sampled path tests it (one load) and calls the probe only
 * then; the unsampled path never comes here. Plain C, no Go: the musl
 * build compiles it too.
 */
#ifndef HEAPLINE_USDT_H
#define HEAPLINE_USDT_H

#include <stdint.h>
#include "shim.h"

/* In .probes (sys/sdt.h's place for them); hidden: the program sees no
 * symbol of ours, and a hidden one is loaded without the GOT. */
extern HL_HIDDEN volatile unsigned short otel_memory_alloc_semaphore, otel_memory_free_semaphore;

void hl_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight, const uint64_t *frames, uint64_t nframes);
void hl_usdt_free(uint64_t ptr);

/* stack: the sample's entry in the region's stack table (NULL: none),
 * whose frames heapline:alloc passes along. */
static inline void hl_fire_alloc(const void *p, uint64_t size, uint64_t weight, const struct hl_stack *stack)
{
    if (HL_UNLIKELY(otel_memory_alloc_semaphore))
        hl_usdt_alloc((uintptr_t)p, size, weight, stack ? stack->frames : NULL, stack ? stack->nframes : 0);
}

static inline void hl_fire_free(const void *p)
{
    if (HL_UNLIKELY(otel_memory_free_semaphore))
        hl_usdt_free((uintptr_t)p);
}

#endif
