/*
 * summary_line.c: the exit summary's two renderers, text and JSON, from
 * the figures summary.c gathers once (struct hl_summary). Formatted by hand
 * into a static buffer: at exit stdio may already be torn down, and must
 * not allocate.
 *
 *   heapline[4711] python3 x.py: 4153 allocs, 4123 frees, peak 18.3 MiB malloc (± 512.0 KiB) + 160.0 MiB mapped, live at exit 472.2 KiB + 0 B mapped, 1.21 s
 *
 * After an exec, the command is followed by " (exec'd from <the image
 * before>)". The mapped parts only when the program mapped memory of its
 * own; the peak's error bound only when there is one (docs/counting.md);
 * Python's objects (pymalloc's blocks, py_pymalloc.c) only when they are
 * counted.
 *
 * Byte figures round half to even, like Go's %.1f, so heapctl prints the
 * same line from the same counters (ctl/internal/report; its cline test
 * compares the two over many summaries).
 */
#include <string.h>
#include "region.h"
#include "summary_line.h"

void hl_put(struct hl_buf *o, const char *s)
{
    for (; *s && o->n < sizeof o->b - 1; s++)
        o->b[o->n++] = *s;
}

/* header.mode's name in the JSON summary (heapctl's: region.ModeName);
 * NULL where the shim counts nothing or has not booted. */
const char *hl_mode_name(uint32_t m)
{
    switch (m) {
    case HL_MODE_GLIBC: return "glibc";
    case HL_MODE_GENERIC: return "generic";
    case HL_MODE_BYPASSED: return "bypassed";
    }
    return NULL;
}

void hl_put_u64(struct hl_buf *o, uint64_t v)
{
    char d[24];
    int n = 24;
    d[--n] = 0;
    do {
        d[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    hl_put(o, d + n);
}

static void put_i64(struct hl_buf *o, int64_t v)
{
    if (v < 0) {
        hl_put(o, "-");
        hl_put_u64(o, (uint64_t)0 - (uint64_t)v);
    } else {
        hl_put_u64(o, (uint64_t)v);
    }
}

/* num/den with `places` decimals, rounded half to even. */
static void put_fixed(struct hl_buf *o, uint64_t num, uint64_t den, int places)
{
    uint64_t scale = 1;
    for (int i = 0; i < places; i++)
        scale *= 10;
    unsigned __int128 x = (unsigned __int128)num * scale;
    uint64_t q = (uint64_t)(x / den), r = (uint64_t)(x % den);
    if (2 * (unsigned __int128)r > den || (2 * (unsigned __int128)r == den && (q & 1)))
        q++;
    hl_put_u64(o, q / scale);
    if (places) {
        hl_put(o, ".");
        char d[20];
        uint64_t f = q % scale;
        for (int i = places - 1; i >= 0; i--, f /= 10)
            d[i] = (char)('0' + f % 10);
        d[places] = 0;
        hl_put(o, d);
    }
}

static void put_bytes(struct hl_buf *o, int64_t v)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (v < 0) {
        hl_put(o, "-");
        v = -v;
    }
    if (v < 1024) {
        hl_put_u64(o, (uint64_t)v);
        hl_put(o, " B");
        return;
    }
    uint64_t den = 1024;
    int u = 0;
    while (u < 4 && (uint64_t)v >= den * 1024) {
        den *= 1024;
        u++;
    }
    put_fixed(o, (uint64_t)v, den, 1);
    hl_put(o, " ");
    hl_put(o, units[u]);
}

/* The command for a text line: at most COMMAND_SHOWN bytes, cut at a
 * character and marked "...", control characters as '?', so that a line
 * stays one line. report.Command in heapctl does the same. */
#define COMMAND_SHOWN 60
static void put_command(struct hl_buf *o, const char *s)
{
    size_t n = strlen(s), cut = n;
    if (n > COMMAND_SHOWN) {
        cut = COMMAND_SHOWN;
        while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
            cut--; /* not inside a UTF-8 sequence */
    }
    for (size_t i = 0; i < cut && o->n < sizeof o->b - 1; i++) {
        unsigned char c = (unsigned char)s[i];
        o->b[o->n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (cut < n)
        hl_put(o, "...");
}

static void put_json_string(struct hl_buf *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    hl_put(o, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[3] = {'\\', (char)c, 0};
            hl_put(o, e);
        } else if (c < 0x20 || c == 0x7f) {
            char e[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            hl_put(o, e);
        } else {
            char e[2] = {(char)c, 0};
            hl_put(o, e);
        }
    }
    hl_put(o, "\"");
}

static void field_u64(struct hl_buf *o, const char *name, uint64_t v)
{
    hl_put(o, ",\"");
    hl_put(o, name);
    hl_put(o, "\":");
    hl_put_u64(o, v);
}

static void field_i64(struct hl_buf *o, const char *name, int64_t v)
{
    hl_put(o, ",\"");
    hl_put(o, name);
    hl_put(o, "\":");
    put_i64(o, v);
}

/* Python's objects: pymalloc's blocks where they are counted, else what
 * its pools held at exit. */
static void text_python(struct hl_buf *o, const struct hl_summary *s)
{
if (s->py_allocs != 0) {
    hl_put(o, ", python objects ");
    hl_put_u64(o, s->py_allocs);
    hl_put(o, " allocated (");
    put_bytes(o, (int64_t)s->py_allocated_bytes);
    hl_put(o, "), ");
    hl_put_u64(o, s->py_allocs - s->py_frees);
    hl_put(o, " live (");
    put_bytes(o, (int64_t)(s->py_allocated_bytes - s->py_freed_bytes));
    hl_put(o, ")");
} else if (s->py_live_objects != 0) {
    hl_put(o, ", python objects ");
    hl_put_u64(o, s->py_live_objects);
    hl_put(o, " live (");
    put_bytes(o, (int64_t)s->py_live_bytes);
    hl_put(o, ")");
}
}

void hl_summary_json(struct hl_buf *o, const struct hl_summary *s)
{
    hl_put(o, "{\"pid\":");
    put_i64(o, s->pid);
    hl_put(o, ",\"command\":");
    put_json_string(o, s->command);
    if (s->exec_from[0]) {
        hl_put(o, ",\"exec_from\":");
        put_json_string(o, s->exec_from);
    }
    hl_put(o, ",\"source\":\"preload\",\"elapsed_s\":");
    put_fixed(o, s->elapsed_ns, 1000000000u, 6);
    field_i64(o, "live_bytes", s->live);
    field_i64(o, "live_blocks", s->live_blocks);
    field_u64(o, "peak_live_bytes", s->peak);
    field_u64(o, "peak_error_bytes", s->peak_error);
    field_u64(o, "allocs", s->allocs);
    field_u64(o, "frees", s->frees);
    field_u64(o, "allocated_bytes", s->allocated_bytes);
    field_u64(o, "freed_bytes", s->freed_bytes);
    field_u64(o, "threads", s->threads);
    field_u64(o, "mapped_bytes", s->mapped);
    field_u64(o, "peak_mapped_bytes", s->peak_mapped);
    field_u64(o, "mappings", s->mappings);
    if (s->py_allocs != 0) { /* pymalloc's blocks (py_pymalloc.c); none under PYTHONMALLOC */
        field_u64(o, "py_allocs", s->py_allocs);
        field_u64(o, "py_frees", s->py_frees);
        field_u64(o, "py_allocated_bytes", s->py_allocated_bytes);
        field_u64(o, "py_freed_bytes", s->py_freed_bytes);
    }
    if (s->py_live_objects != 0) { /* from pymalloc's pools (py_pymalloc.c) */
        field_u64(o, "py_live_objects", s->py_live_objects);
        field_u64(o, "py_live_bytes", s->py_live_bytes);
    }
    if (s->mode != NULL) {
        hl_put(o, ",\"mode\":\"");
        hl_put(o, s->mode);
        hl_put(o, "\"");
    }
    if (s->bypassed_by[0]) {
        hl_put(o, ",\"bypassed_by\":");
        put_json_string(o, s->bypassed_by);
    }
    hl_put(o, ",\"exited\":true}\n");
}

void hl_summary_text(struct hl_buf *o, const struct hl_summary *s)
{
    hl_put(o, "heapline[");
    put_i64(o, s->pid);
    hl_put(o, "]");
    if (s->command[0]) {
        hl_put(o, " ");
        put_command(o, s->command);
    }
    if (s->exec_from[0]) {
        hl_put(o, " (exec'd from ");
        put_command(o, s->exec_from);
        hl_put(o, ")");
    }
    hl_put(o, ": ");
    hl_put_u64(o, s->allocs);
    hl_put(o, s->allocs == 1 ? " alloc, " : " allocs, ");
    hl_put_u64(o, s->frees);
    hl_put(o, s->frees == 1 ? " free, peak " : " frees, peak ");
    put_bytes(o, (int64_t)s->peak);
    if (s->peak_mapped)
        hl_put(o, " malloc");
    if (s->peak_error) {
        hl_put(o, " (\xc2\xb1 "); /* ± */
        put_bytes(o, (int64_t)s->peak_error);
        hl_put(o, ")");
    }
    if (s->peak_mapped) {
        hl_put(o, " + ");
        put_bytes(o, (int64_t)s->peak_mapped);
        hl_put(o, " mapped");
    }
    hl_put(o, ", live at exit ");
    put_bytes(o, s->live);
    if (s->peak_mapped) {
        hl_put(o, " + ");
        put_bytes(o, (int64_t)s->mapped);
        hl_put(o, " mapped");
    }
    text_python(o, s);
    if (s->bypassed_by[0]) {
        hl_put(o, ", malloc bypassed by ");
        put_command(o, s->bypassed_by);
    }
    hl_put(o, ", ");
    put_fixed(o, s->elapsed_ns, 1000000000u, 2);
    hl_put(o, " s\n");
}
