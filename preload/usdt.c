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

HL_COLD void hl_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight)
{
    STAP_PROBE3(otel_memory, alloc, ptr, size, weight);
}

HL_COLD void hl_usdt_free(uint64_t ptr)
{
    STAP_PROBE1(otel_memory, free, ptr);
}
