/*
 * usdt.h: the otel_memory USDT probes (usdt.c), the contract of the
 * OpenTelemetry eBPF profiler's memory profiling (docs/profiling.md):
 *
 *   otel_memory:alloc(ptr, size, weight)  a sampled block: the pointer the
 *                                         program got, its usable bytes, and
 *                                         the bytes it stands for (its weight)
 *   otel_memory:free(ptr)                 a sampled block released
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

void hl_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight);
void hl_usdt_free(uint64_t ptr);

static inline void hl_fire_alloc(const void *p, uint64_t size, uint64_t weight)
{
    if (HL_UNLIKELY(otel_memory_alloc_semaphore))
        hl_usdt_alloc((uintptr_t)p, size, weight);
}

static inline void hl_fire_free(const void *p)
{
    if (HL_UNLIKELY(otel_memory_free_semaphore))
        hl_usdt_free((uintptr_t)p);
}

#endif
