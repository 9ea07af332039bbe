/*
 * summary_line.h: the exit summary's figures, gathered once at exit
 * (summary.c), and its two renderers, text and JSON (summary_line.c).
 * Nothing here reads the region or the process: heapctl's test of the
 * renderers (ctl/internal/report/cline) compiles summary_line.c alone and
 * checks that report.Line makes the same text from the JSON.
 */
#ifndef HEAPLINE_SUMMARY_LINE_H
#define HEAPLINE_SUMMARY_LINE_H

#include <stddef.h>
#include <stdint.h>

/* A line being made: what does not fit is left out. */
struct hl_buf {
    char b[2048];
    size_t n;
};

void hl_put(struct hl_buf *o, const char *s);
void hl_put_u64(struct hl_buf *o, uint64_t v);

struct hl_summary {
    int64_t pid;
    const char *command, *exec_from, *bypassed_by; /* "" when none */
    const char *mode;                              /* NULL when none */
    uint64_t elapsed_ns;
    int64_t live, live_blocks;
    uint64_t peak, peak_error;
    uint64_t allocs, frees, allocated_bytes, freed_bytes, threads;
    uint64_t mapped, peak_mapped, mappings;
    uint64_t py_allocs, py_frees, py_allocated_bytes, py_freed_bytes; /* pymalloc's blocks; 0 when not counted */
    uint64_t py_live_objects, py_live_bytes;                          /* from pymalloc's pools at exit */
};

void hl_summary_text(struct hl_buf *o, const struct hl_summary *s);
void hl_summary_json(struct hl_buf *o, const struct hl_summary *s);
const char *hl_mode_name(uint32_t mode);

#endif
