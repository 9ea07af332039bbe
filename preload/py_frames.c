/*
 * py_frames.c: the Python frames of a sample (docs/profiling.md).
 *
 * A sample's native stack shows CPython's evaluation loop, not the Python
 * code it runs. When the program is CPython 3.11 to 3.15 (or later, its
 * offsets agreeing), take()
 * hands its frames to hl_py_frames, which replaces each native frame of
 * _PyEval_EvalFrameDefault with the Python frames that invocation runs,
 * innermost first, read from the thread's own frame chain. Each Python
 * frame becomes one value with bit 63 set: its code object's entry in the
 * region's code table (qualified name, file and first line, copied as
 * strings the first time) and the line it was running, so that a profile
 * can be written after the process is gone.
 *
 * Everything here reads memory only, at sample time: no call into Python,
 * no GIL, no lock, no allocation. Like py-spy and austin it reads
 * interpreter structures at the offsets of the running version: 3.11's
 * and 3.12's fixed below (checked with the installed headers), 3.13's and
 * later from _Py_DebugOffsets, which CPython keeps at the start of
 * _PyRuntime for tools like this one (debug_offsets, below, says which
 * fields and how a later version is checked). A version it cannot read
 * gets native frames only, and the header says what was missing.
 *
 * The thread: its PyThreadState is found by comparing each state's
 * thread_id (pthread_self() of the thread that made it) with ours, in the
 * interpreters' lists, read with process_vm_readv so that a state freed
 * meanwhile by another thread is a failed read, never a fault (or, where
 * the kernel refuses that, with mincore and a load: safe_read). It is kept
 * per thread and checked the same way at each sample. The frames
 * themselves are the thread's own: while it is in malloc nothing else
 * changes them, and what they point to (code objects, their strings) is
 * kept alive by them, so they are read directly.
 *
 * Grouping: an invocation of the eval loop runs Python frames until its
 * entry frame: 3.11 marks the first frame it ran (is_entry); 3.12 on push
 * a frame below them that is no Python frame (OWNED_BY_INTERPRETER).
 * Native eval frames are matched by the function's address range; Debian
 * builds split its cold code out into a second range (its 3.14 and 3.15
 * the whole dispatch), found at boot as the unwind-table entry (FDE) most
 * of the function's jumps out of itself land in.
 *
 * Fixed for every version, as _Py_DebugOffsets does not hold them (and
 * docs/profiling.md lists): tp_basicsize at 32 in a type, the bits of
 * str's state, PyCompactUnicodeObject as PyASCIIObject and 16 bytes, the
 * line table's format and 2-byte code units, the low two bits of a
 * _PyStackRef as its tag, the frame owners, and thread_id as the
 * thread's pthread_self().
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include "shim.h"
#include "count_thread.h"

#define RELAXED __ATOMIC_RELAXED

/* Offsets of one interpreter version (bytes). */
struct pyoffs {
    uint32_t rt_interp_head;   /* _PyRuntime.interpreters.head */
    uint32_t interp_next;
    uint32_t interp_threads;   /* interp->threads.head */
    uint32_t ts_next;
    uint32_t ts_thread_id;
    uint32_t ts_cframe;        /* 3.11, 3.12: tstate->cframe; 0 when the frame is in the state */
    uint32_t ts_frame;         /* cframe->current_frame, or tstate->current_frame */
    uint32_t fr_code, fr_previous, fr_instr, fr_owner;
    int32_t fr_is_entry;       /* 3.11; -1 after it */
    uint32_t co_filename, co_qualname, co_linetable, co_firstlineno, co_code;
    uint32_t str_ascii, str_compact; /* sizeof PyASCIIObject, PyCompactUnicodeObject */
    uint32_t str_state, str_length;  /* in PyASCIIObject */
    uint32_t bytes_size, bytes_data; /* PyBytesObject's ob_size and ob_sval: the line table */
};

/* The first owner that is no Python frame of the chain but the boundary
 * of an eval loop's invocation: 3.12 and 3.13's FRAME_OWNED_BY_CSTACK (3),
 * the entry frame each invocation pushes; from 3.14 on, that entry frame
 * is FRAME_OWNED_BY_INTERPRETER (3), with 3.14's CSTACK (4) after it, and
 * 3.15's thread state ends the chain with a base frame owned by the
 * interpreter too. */
#define OWNED_BY_INTERPRETER 3

/* 3.11 and 3.12 publish no layout: their offsets are fixed, checked with
 * the installed headers. */
static const struct pyoffs v311 = {
    .rt_interp_head = 40, .interp_next = 0, .interp_threads = 16, .ts_next = 8, .ts_thread_id = 152,
    .ts_cframe = 56, .ts_frame = 8, .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_owner = 69,
    .fr_is_entry = 68, .co_filename = 112, .co_qualname = 128, .co_linetable = 136, .co_firstlineno = 72,
    .co_code = 184, .str_ascii = 48, .str_compact = 72, .str_state = 32, .str_length = 16,
    .bytes_size = 16, .bytes_data = 32};
static const struct pyoffs v312 = {
    .rt_interp_head = 40, .interp_next = 0, .interp_threads = 72, .ts_next = 8, .ts_thread_id = 136,
    .ts_cframe = 56, .ts_frame = 0, .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70,
    .fr_is_entry = -1, .co_filename = 112, .co_qualname = 128, .co_linetable = 136, .co_firstlineno = 68,
    .co_code = 192, .str_ascii = 40, .str_compact = 56, .str_state = 32, .str_length = 16,
    .bytes_size = 16, .bytes_data = 32};

/*
 * From 3.13 on, _Py_DebugOffsets at the start of _PyRuntime
 * (Include/internal/pycore_debug_offsets.h): a cookie, the version, a
 * free-threaded flag, then one section per structure, each its size
 * followed by its fields' offsets, every one a u64. Sections grow between
 * versions (3.14 added fields to the interpreter's, frame's and code's
 * sections and a section for sets; 3.15 to the thread's and the type's),
 * so where each field the walk needs sits is one row per layout, by u64
 * index: each holds from its version on, and a later CPython is read with
 * the newest row if its offsets agree with its build (pyoffs_check).
 */
struct dolayout {
    uint32_t minor; /* PY_VERSION_HEX >> 16 */
    uint8_t rt_size, rt_head;
    uint8_t in_size, in_next, in_threads;
    uint8_t ts_size, ts_next, ts_frame, ts_thread_id;
    uint8_t fr_size, fr_previous, fr_executable, fr_instr, fr_owner;
    uint8_t co_size, co_filename, co_qualname, co_linetable, co_firstlineno, co_code;
    uint8_t ob_size, ob_type;
    uint8_t by_size, by_ob_size, by_sval;
    uint8_t un_size, un_state, un_length, un_ascii;
};

static const struct dolayout layouts[] = {
    {0x030d, 3, 5, 6, 8, 9, 19, 21, 23, 24, 28, 29, 30, 31, 33, 34, 35, 37, 38, 39, 43, 44, 45, 64, 65, 66, 67, 68, 69, 70},
    {0x030e, 3, 5, 6, 8, 9, 22, 24, 26, 27, 31, 32, 33, 34, 36, 39, 40, 42, 43, 44, 48, 50, 51, 74, 75, 76, 77, 78, 79, 80},
    {0x030f, 3, 5, 6, 8, 9, 22, 24, 26, 30, 39, 40, 41, 42, 44, 47, 48, 50, 51, 52, 56, 58, 59, 86, 87, 88, 89, 90, 91, 92},
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])
#define DO_WORDS 93 /* the newest layout's words we read (3.15's unicode section ends at 92) */

static struct pyoffs off;
static int py_on;                  /* frames are read */
static uintptr_t runtime;          /* &_PyRuntime */
static uintptr_t code_type, str_type; /* &PyCode_Type, &PyUnicode_Type */
static uintptr_t eval_lo, eval_hi, cold_lo, cold_hi;
uint32_t hl_py_version;            /* PY_VERSION_HEX, 0 without Python */
uint32_t hl_py_flags;

static struct hl_pycode *codes;
static uint32_t ncodes;
static uint32_t *code_index;          /* code_entry's */
static uint32_t code_mask;
static struct hl_header *codes_region; /* the region codes is in */

// ---- memory ---------------------------------------------------------------------

static inline uint64_t rd64(uintptr_t a) { return *(const volatile uint64_t *)a; }
static inline uint32_t rd32(uintptr_t a) { return *(const volatile uint32_t *)a; }

/*
 * Reads of memory another thread may free: the interpreters' and thread
 * states' lists (own_state, below). process_vm_readv on ourselves copies
 * them and fails with EFAULT where nothing is mapped. Where the kernel
 * refuses it (qemu-user does not implement it: ENOSYS; a seccomp filter,
 * as a container's may be: EPERM), the first refusal switches every
 * thread, once, to the fallback: mincore() on the page or two read, which
 * fails with ENOMEM where one is not mapped, then a plain load.
 * HEAPLINE_PY_READ=mincore takes the fallback from the start (tests).
 *
 * What the fallback leaves open is the time between the probe and the
 * load. What it reads there: _PyRuntime, in libpython's data, which
 * stays mapped as long as the code that calls us; the main interpreter,
 * inside _PyRuntime, and the main thread's state (3.12 on, inside the
 * interpreter); other interpreters' and threads' states, malloc's
 * blocks. A state leaves its list under the runtime's HEAD_LOCK and is
 * freed afterwards, so a walk that takes no lock can hold a pointer to a
 * state freed a moment later, and a cached state can be one its thread
 * has since deleted (PyGILState_Release). A freed block stays mapped
 * unless glibc gives its page back (a trim of the main heap's top past
 * M_TRIM_THRESHOLD, or a thread arena's heap shrunk or unmapped; under
 * vm.overcommit_memory=2 a shrunk heap is made PROT_NONE, which mincore
 * does not see): unmapped before the probe, the probe fails and the walk
 * stops; unmapped in the few hundred instructions between the probe and
 * the load, the load faults. That takes another thread ending its
 * Python state and trimming the heap at that instant, while this thread
 * walks the list: at its first sample, or after 64 samples with no state.
 * The frames and what they point to are read directly in both modes:
 * they are the thread's own (hl_py_frames). py_pymalloc.c reads its arenas'
 * pool headers at exit the same two ways.
 */
static long page_size = 4096; /* AT_PAGESZ, at boot */
static int by_mincore;        /* the fallback: process_vm_readv was refused, or HEAPLINE_PY_READ=mincore */

/* Whether reads go by mincore: on, for good, once err (process_vm_readv's
 * errno after it failed) is a refusal. */
int hl_py_by_mincore(int err)
{
    if (err == ENOSYS || err == EPERM)
        __atomic_store_n(&by_mincore, 1, RELAXED);
    return __atomic_load_n(&by_mincore, RELAXED);
}

/* 0 when every page of [a, a + n) is mapped, by mincore with vec's cap
 * bytes (one a page, zeroed: qemu-user 7.2 reads it as a string first);
 * -1 otherwise. */
int hl_py_mapped(uintptr_t a, size_t n, unsigned char *vec, size_t cap)
{
    uintptr_t lo = a & ~(uintptr_t)(page_size - 1), hi = (a + n - 1) & ~(uintptr_t)(page_size - 1);
    if (n == 0 || a + n < a || (hi - lo) / (uintptr_t)page_size + 1 > cap)
        return -1;
    memset(vec, 0, cap);
    return syscall(SYS_mincore, lo, hi - lo + (uintptr_t)page_size, vec) == 0 ? 0 : -1;
}

/* n bytes at a (n at most a page), or -1: a read that cannot fault
 * (memory another thread may free), but for the fallback's window. */
static int safe_read(long pid, uintptr_t a, void *out, size_t n)
{
    if (a < 4096 || n > (size_t)page_size || a + n < a)
        return -1;
    if (!hl_py_by_mincore(0)) {
        struct iovec local = {out, n}, remote = {(void *)a, n};
        long got = syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0);
        if (got == (long)n)
            return 0;
        if (got >= 0 || !hl_py_by_mincore(errno))
            return -1;
    }
    unsigned char vec[2];
    if (hl_py_mapped(a, n, vec, sizeof vec) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)out)[i] = ((const volatile uint8_t *)a)[i];
    return 0;
}

static uint64_t safe64(long pid, uintptr_t a)
{
    uint64_t v = 0;
    return safe_read(pid, a, &v, 8) == 0 ? v : 0;
}

// ---- the eval function's cold part ------------------------------------------------

/* The FDE holding pc in the .eh_frame_hdr search table at hdr: its range,
 * or -1. Only the encodings GCC and the linker write on x86-64. */
static int fde_range(const uint8_t *hdr, uintptr_t pc, uintptr_t *lo, uintptr_t *hi)
{
    if (hdr == NULL || hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b || (hdr[1] & 0x0f) != 0x0b)
        return -1;
    uint32_t count = *(const uint32_t *)(hdr + 8);
    const int32_t *table = (const int32_t *)(hdr + 12);
    intptr_t rel = (intptr_t)pc - (intptr_t)hdr;
    uint32_t a = 0, b = count;
    while (a < b) { /* the last entry whose start is <= pc */
        uint32_t m = (a + b) / 2;
        if (table[2 * m] <= rel)
            a = m + 1;
        else
            b = m;
    }
    if (a == 0)
        return -1;
    const uint8_t *fde = hdr + table[2 * (a - 1) + 1];
    if (*(const uint32_t *)fde == 0xffffffffu)
        return -1;
    const uint8_t *f = fde + 8; /* pc_begin: pcrel sdata4 */
    uintptr_t begin = (uintptr_t)(f + *(const int32_t *)f), range = (uint32_t) * (const int32_t *)(f + 4);
    if (begin != (uintptr_t)(hdr + table[2 * (a - 1)]) || pc - begin >= range)
        return -1;
    *lo = begin;
    *hi = begin + range;
    return 0;
}

/* The range most of the eval function's jumps out of itself go to, if
 * they are several and most: GCC's .cold part. Scanned byte by byte, not decoded:
 * what is not really a jump lands anywhere, and loses the vote. */
static void find_cold(void)
{
    struct hl_dlfo o;
    if (hl_find_object((void *)eval_lo, &o) != 0)
        return;
    const uint8_t *hdr = o.dlfo_eh_frame, *c = (const uint8_t *)eval_lo;
    uintptr_t lo[8] = {0}, hi[8] = {0};
    uint32_t votes[8] = {0};
    for (uintptr_t i = 0; i + 6 <= eval_hi - eval_lo; i++) {
        uintptr_t to;
        if (c[i] == 0x0f && (c[i + 1] & 0xf0) == 0x80)
            to = eval_lo + i + 6 + (intptr_t) * (const int32_t *)(c + i + 2);
        else if (c[i] == 0xe9)
            to = eval_lo + i + 5 + (intptr_t) * (const int32_t *)(c + i + 1);
        else
            continue;
        if (to - eval_lo < eval_hi - eval_lo || to - (uintptr_t)o.dlfo_map_start >=
                                                     (uintptr_t)o.dlfo_map_end - (uintptr_t)o.dlfo_map_start)
            continue;
        int k = 0;
        while (k < 8 && votes[k] != 0 && !(to - lo[k] < hi[k] - lo[k]))
            k++;
        if (k == 8)
            continue;
        if (votes[k] == 0 && fde_range(hdr, to, &lo[k], &hi[k]) != 0)
            continue;
        votes[k]++;
    }
    int best = 0;
    for (int k = 1; k < 8; k++)
        if (votes[k] > votes[best])
            best = k;
    uint32_t second = 0;
    for (int k = 0; k < 8; k++)
        if (k != best && votes[k] > second)
            second = votes[k];
    /* Debian's 3.11: 307 jumps to its cold part, 1 anywhere else. Its
     * 3.14 and 3.15 (GCC 16, profile-guided) keep only the entry and exit
     * in the function's symbol (1,184 and 844 bytes), the whole dispatch
     * in the cold part (84 KB): 11 and 13 jumps there, none elsewhere. */
    if (votes[best] >= 8 && votes[best] >= 4 * second) {
        cold_lo = lo[best];
        cold_hi = hi[best];
    }
}

static inline int is_eval(uint64_t pc)
{
    /* a return address: the call is just before it */
    return pc - 1 - eval_lo < eval_hi - eval_lo || pc - 1 - cold_lo < cold_hi - cold_lo;
}

// ---- boot -------------------------------------------------------------------------

/* The size of the symbol holding addr (its st_size), or 0. */
static uint64_t sym_size(const void *addr)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL)
        return 0;
    return sym->st_size;
}

/* Whether n bytes at off lie inside a structure of size bytes, itself
 * under 4 MiB: a structure's offsets are read as 32 bits, and a sum that
 * wraps must not pass. */
static int inside(uint64_t off, uint64_t n, uint64_t size)
{
    return size < ((uint64_t)4 << 20) && off <= size && n <= size - off;
}

/* A type object's tp_basicsize: in PyTypeObject after its PyVarObject head
 * (24 bytes) and tp_name, fixed by the limited API. */
static uint64_t basicsize(uintptr_t type) { return rd64(type + 32); }

/*
 * 3.13 and later: the offsets from _Py_DebugOffsets, in the newest layout
 * not newer than the interpreter. 0, or the HL_PY_MISSING_* of the first
 * check that failed. The checks tie the layout to the build, so that a
 * version after the newest known is read only if the newest row still
 * fits it: the cookie and the version; the runtime section's size is the
 * _PyRuntime symbol's; a PyObject is 16 bytes with its type at 8; the
 * code section's co_code_adaptive is PyCode_Type's tp_basicsize and the
 * str section's size PyUnicode_Type's; every offset lies inside its
 * section's size.
 */
static uint32_t debug_offsets(uint32_t minor)
{
    const uint64_t *d = (const uint64_t *)runtime;
    if (sym_size((const void *)runtime) < DO_WORDS * 8 || memcmp(d, "xdebugpy", 8) != 0)
        return HL_PY_MISSING_OFFSETS;
    if ((d[1] >> 16) != minor)
        return HL_PY_MISSING_VERSION;
    const struct dolayout *l = &layouts[0];
    for (size_t i = 1; i < NLAYOUTS && layouts[i].minor <= minor; i++)
        l = &layouts[i];
    uint64_t rt = d[l->rt_size], in = d[l->in_size], ts = d[l->ts_size], fr = d[l->fr_size], co = d[l->co_size];
    if (rt != sym_size((const void *)runtime) || !inside(d[l->rt_head], 8, rt))
        return HL_PY_MISSING_RUNTIME;
    if (d[l->ob_size] != 16 || d[l->ob_type] != 8)
        return HL_PY_MISSING_OBJECT;
    if (!inside(d[l->in_next], 8, in) || !inside(d[l->in_threads], 8, in))
        return HL_PY_MISSING_INTERP;
    if (!inside(d[l->ts_next], 8, ts) || !inside(d[l->ts_frame], 8, ts) || !inside(d[l->ts_thread_id], 8, ts))
        return HL_PY_MISSING_THREAD;
    if (!inside(d[l->fr_previous], 8, fr) || !inside(d[l->fr_executable], 8, fr) || !inside(d[l->fr_instr], 8, fr) ||
        !inside(d[l->fr_owner], 1, fr))
        return HL_PY_MISSING_FRAME;
    if (d[l->co_code] != basicsize(code_type) || !inside(d[l->co_code], 0, co) || !inside(d[l->co_filename], 8, co) ||
        !inside(d[l->co_qualname], 8, co) || !inside(d[l->co_linetable], 8, co) || !inside(d[l->co_firstlineno], 4, co))
        return HL_PY_MISSING_CODE;
    uint64_t un = d[l->un_size], by = d[l->by_size];
    if (un != basicsize(str_type) || !inside(d[l->un_ascii], 16, un) || !inside(d[l->un_state], 4, un) ||
        !inside(d[l->un_length], 8, un) || !inside(d[l->by_ob_size], 8, by) || !inside(d[l->by_sval], 0, by))
        return HL_PY_MISSING_STR;
    off = (struct pyoffs){
        .rt_interp_head = (uint32_t)d[l->rt_head], .interp_next = (uint32_t)d[l->in_next],
        .interp_threads = (uint32_t)d[l->in_threads], .ts_next = (uint32_t)d[l->ts_next],
        .ts_thread_id = (uint32_t)d[l->ts_thread_id], .ts_cframe = 0, .ts_frame = (uint32_t)d[l->ts_frame],
        .fr_code = (uint32_t)d[l->fr_executable], .fr_previous = (uint32_t)d[l->fr_previous],
        .fr_instr = (uint32_t)d[l->fr_instr], .fr_owner = (uint32_t)d[l->fr_owner], .fr_is_entry = -1,
        .co_filename = (uint32_t)d[l->co_filename], .co_qualname = (uint32_t)d[l->co_qualname],
        .co_linetable = (uint32_t)d[l->co_linetable], .co_firstlineno = (uint32_t)d[l->co_firstlineno],
        .co_code = (uint32_t)d[l->co_code],
        /* not in the offsets: PyCompactUnicodeObject is PyASCIIObject and
         * its utf8_length and utf8 (3.12 on) */
        .str_ascii = (uint32_t)d[l->un_ascii], .str_compact = (uint32_t)d[l->un_ascii] + 16,
        .str_state = (uint32_t)d[l->un_state], .str_length = (uint32_t)d[l->un_length],
        .bytes_size = (uint32_t)d[l->by_ob_size], .bytes_data = (uint32_t)d[l->by_sval]};
    return 0;
}

/* A free-threaded build (3.13 on, Py_GIL_DISABLED): its objects are
 * mimalloc's and its frames' references tagged otherwise, so the shim reads
 * neither and wraps none of its allocators (py_pymalloc.c): said by the
 * offsets' free_threaded word, or, should they be unreadable, by
 * _Py_DecRefShared, which only such a build exports (Include/object.h). */
static int free_threaded(void)
{
    const uint64_t *d = (const uint64_t *)runtime;
    int ft = (sym_size((const void *)runtime) >= 24 && memcmp(d, "xdebugpy", 8) == 0 && d[2] != 0) ||
             dlsym(RTLD_DEFAULT, "_Py_DecRefShared") != NULL;
    if (ft)
        hl_py_flags |= HL_PY_FREETHREADED;
    return ft;
}

/* At boot, before the region is made (its size depends on it): is the
 * program CPython, which version, and where is its eval loop. dlsym's
 * failures may calloc: boot's pool serves them. */
void hl_py_resolve(void)
{
    if (getauxval(AT_PAGESZ) != 0)
        page_size = (long)getauxval(AT_PAGESZ);
    by_mincore = hl_cfg->py_read == HL_PYREAD_MINCORE;
    /* one failed lookup for a program that is not CPython (each costs
     * about 2,000 instructions at start) */
    void *eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
    if (eval == NULL)
        return;
    const unsigned long *ver = dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11 and later */
    runtime = (uintptr_t)dlsym(RTLD_DEFAULT, "_PyRuntime");
    code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
    str_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    if (eval == NULL || runtime == 0)
        return;
    hl_py_version = ver != NULL ? (uint32_t)*ver : 1; /* 1: a Python before 3.11 */
    uint32_t minor = hl_py_version >> 16, missing = 0;
    if (minor > 0x030c && free_threaded())
        missing = HL_PY_MISSING_GIL;
    else if (code_type == 0 || str_type == 0)
        missing = HL_PY_MISSING_TYPES;
    else if (minor == 0x030b)
        off = v311;
    else if (minor == 0x030c)
        off = v312;
    else if (minor > 0x030c)
        missing = debug_offsets(minor);
    else
        missing = HL_PY_MISSING_OFFSETS; /* before 3.11 (version 1) */
    uint64_t size = sym_size(eval);
    if (missing == 0 && size == 0)
        missing = HL_PY_MISSING_EVAL;
    if (missing == 0) {
        eval_lo = (uintptr_t)eval;
        eval_hi = eval_lo + size;
        find_cold();
        py_on = 1;
        hl_py_flags |= HL_PY_FRAMES;
    } else {
        hl_py_flags |= HL_PY_UNKNOWN | missing << HL_PY_MISSING_SHIFT;
    }
}

size_t hl_py_codes_size(void) { return py_on ? (size_t)HL_PYCODES_DEFAULT * sizeof(struct hl_pycode) : 0; }

void hl_py_attach(struct hl_header *r, struct hl_pycode *table)
{
    r->py_version = hl_py_version;
    r->py_flags = hl_py_flags;
    r->py_eval_cold = (uint32_t)(cold_hi - cold_lo);
    if (!py_on || table == NULL)
        return;
    codes = table;
    ncodes = HL_PYCODES_DEFAULT;
    codes_region = r;
    if (code_index == NULL) {
        uint32_t cap = 64;
        while (cap < 2 * ncodes)
            cap *= 2;
        code_index = hl_raw_map((size_t)cap * sizeof *code_index);
        code_mask = code_index != NULL ? cap - 1 : 0;
    }
    r->pycode_offset = (uint64_t)((char *)table - (char *)r);
    r->npycodes = ncodes;
}

// ---- code objects ---------------------------------------------------------------

/* A str object as UTF-8 into out (cut at a character, NUL-terminated). */
static void copy_str(uintptr_t s, char *out, size_t cap)
{
    size_t o = 0;
    if (s != 0 && rd64(s + 8) == str_type) {
        uint32_t state = rd32(s + off.str_state);
        unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
        uint64_t len = rd64(s + off.str_length);
        const uint8_t *d = (const uint8_t *)(s + (ascii ? off.str_ascii : off.str_compact));
        for (uint64_t i = 0; compact && i < len && o + 5 < cap; i++) {
            uint32_t ch = kind == 1 ? d[i] : kind == 2 ? ((const uint16_t *)d)[i] : ((const uint32_t *)d)[i];
            if (ch < 0x80) {
                out[o++] = (char)ch;
            } else if (ch < 0x800) {
                out[o++] = (char)(0xc0 | ch >> 6);
                out[o++] = (char)(0x80 | (ch & 0x3f));
            } else if (ch < 0x10000) {
                out[o++] = (char)(0xe0 | ch >> 12);
                out[o++] = (char)(0x80 | (ch >> 6 & 0x3f));
                out[o++] = (char)(0x80 | (ch & 0x3f));
            } else {
                out[o++] = (char)(0xf0 | ch >> 18);
                out[o++] = (char)(0x80 | (ch >> 12 & 0x3f));
                out[o++] = (char)(0x80 | (ch >> 6 & 0x3f));
                out[o++] = (char)(0x80 | (ch & 0x3f));
            }
        }
    }
    if (o == 0 && cap > 1)
        out[o++] = '?';
    out[o] = 0;
}

/* The table is filled in order, so that its pages are taken as it fills
 * (region_grow.c); a code object's entry is found by its address in an index of
 * our own (private memory), whose slots hold an entry's number + 1, 0
 * while free. Made at the first region's layout, kept by a fork child,
 * whose table is a copy of its parent's (hl_py_codes_inherit). */

static void code_index_clear(void)
{
    if (code_index != NULL)
        memset(code_index, 0, ((size_t)code_mask + 1) * sizeof *code_index);
}

/* A fork child's region: the parent's entries in use, or none (parent
 * NULL, or no page for them). */
void hl_py_codes_inherit(const struct hl_header *parent)
{
    struct hl_header *r = codes_region;
    if (codes == NULL || r == NULL)
        return;
    uint32_t used = parent != NULL && parent->pycode_offset != 0 ? parent->pycodes_used : 0;
    if (used > ncodes)
        used = ncodes;
    if (used > 0 && hl_grow(HL_TABLE_PYCODES, r->pycode_offset, r->pycode_offset + (uint64_t)used * sizeof *codes) == 0) {
        memcpy(codes, (const char *)parent + parent->pycode_offset, (size_t)used * sizeof *codes);
        r->pycodes_used = used;
        return;
    }
    code_index_clear();
}

/* The next entry, its page given to the file, or HL_PYCODE_NONE. */
static uint32_t next_code(struct hl_header *r)
{
    uint32_t used = __atomic_load_n(&r->pycodes_used, __ATOMIC_ACQUIRE);
    for (;;) {
        if (used >= ncodes ||
            hl_grow(HL_TABLE_PYCODES, r->pycode_offset, r->pycode_offset + ((uint64_t)used + 1) * sizeof *codes) != 0)
            return HL_PYCODE_NONE;
        if (__atomic_compare_exchange_n(&r->pycodes_used, &used, used + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return used;
    }
}

/* The code object's entry in the table, made if new; HL_PYCODE_NONE when
 * the table is full or /dev/shm has no page for it. An address can be a
 * new code object's after the old one is freed: the entry is its if its
 * name, file and first line are the same objects too. */
static uint32_t code_entry(uintptr_t code)
{
    struct hl_header *r = codes_region;
    if (code_index == NULL || r == NULL)
        return HL_PYCODE_NONE;
    uintptr_t name = rd64(code + off.co_qualname), file = rd64(code + off.co_filename);
    uint32_t first = rd32(code + off.co_firstlineno);
    uint64_t ident = (name * 0x9e3779b97f4a7c15ull) ^ file ^ ((uint64_t)first << 40);
    uint32_t at = (uint32_t)((code >> 4) * 0x9e3779b97f4a7c15ull >> 40) & code_mask, made = HL_PYCODE_NONE;
    for (uint32_t i = 0; i <= code_mask; i++, at = (at + 1) & code_mask) {
        uint32_t e = __atomic_load_n(&code_index[at], __ATOMIC_ACQUIRE);
        if (e != 0) {
            struct hl_pycode *c = &codes[e - 1];
            if (made == HL_PYCODE_NONE && e - 1 < __atomic_load_n(&r->pycodes_used, __ATOMIC_ACQUIRE) &&
                __atomic_load_n(&c->code, __ATOMIC_ACQUIRE) == code && c->ident == ident)
                return e - 1;
            continue;
        }
        if (made == HL_PYCODE_NONE) {
            made = next_code(r);
            if (made == HL_PYCODE_NONE)
                return made;
            struct hl_pycode *c = &codes[made];
            c->state = 1;
            c->ident = ident;
            c->firstline = first;
            copy_str(name, c->name, sizeof c->name);
            copy_str(file, c->file, sizeof c->file);
            __atomic_store_n(&c->code, code, __ATOMIC_RELEASE);
        }
        uint32_t free_slot = 0;
        if (__atomic_compare_exchange_n(&code_index[at], &free_slot, made + 1, 0, __ATOMIC_RELEASE, RELAXED))
            return made;
    }
    return made;
}

static uint64_t varint(const uint8_t *p, uint64_t len, uint64_t *i)
{
    uint64_t v = 0;
    for (int shift = 0; *i < len && shift < 64; shift += 6) {
        uint8_t b = p[(*i)++];
        v |= (uint64_t)(b & 63) << shift;
        if (!(b & 64))
            break;
    }
    return v;
}

/* The line of code unit `unit`, from the location table (3.11's format,
 * Objects/locations.md): entries of 1 to 8 code units, each moving the
 * line by its delta. */
static uint32_t line_of(uintptr_t code, int64_t unit)
{
    int64_t line = (int32_t)rd32(code + off.co_firstlineno);
    uintptr_t lt = rd64(code + off.co_linetable);
    if (unit < 0 || lt == 0)
        return line > 0 ? (uint32_t)line : 0;
    uint64_t len = rd64(lt + off.bytes_size), i = 0;
    const uint8_t *p = (const uint8_t *)(lt + off.bytes_data);
    int64_t pos = 0;
    while (i < len) {
        uint8_t b = p[i++];
        int kind = b >> 3 & 15, units = (b & 7) + 1;
        if (kind == 14 || kind == 13) {
            uint64_t u = varint(p, len, &i);
            line += (u & 1) ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
            if (kind == 14) {
                varint(p, len, &i);
                varint(p, len, &i);
                varint(p, len, &i);
            }
        } else if (kind >= 10 && kind <= 12) {
            line += kind - 10;
            i += 2;
        } else if (kind < 10) {
            i += 1;
        }
        if (unit < pos + units)
            break;
        pos += units;
    }
    return line > 0 ? (uint32_t)line : 0;
}

// ---- the thread's state ------------------------------------------------------------

/* This thread's PyThreadState, or 0. */
static uintptr_t own_state(long pid)
{
    uint64_t me = (uint64_t)pthread_self();
    uintptr_t t = hl_self.py.tstate;
    if (t != 0 && safe64(pid, t + off.ts_thread_id) == me)
        return t;
    hl_self.py.tstate = 0;
    if (hl_self.py.misses != 0) { /* no state at the last look: look again later */
        hl_self.py.misses--;
        return 0;
    }
    uintptr_t interp = safe64(pid, runtime + off.rt_interp_head);
    for (int i = 0; interp != 0 && i < 64; i++, interp = safe64(pid, interp + off.interp_next)) {
        t = safe64(pid, interp + off.interp_threads);
        for (int j = 0; t != 0 && j < 4096; j++, t = safe64(pid, t + off.ts_next))
            if (safe64(pid, t + off.ts_thread_id) == me)
                return hl_self.py.tstate = t;
    }
    hl_self.py.misses = 64;
    return 0;
}

// ---- merging ---------------------------------------------------------------------

int hl_py_frames(uint64_t *frames, int n, int max)
{
    if (!py_on || codes == NULL)
        return n < max ? n : max;
    int i = 0;
    while (i < n && !is_eval(frames[i]))
        i++;
    if (i == n)
        return n < max ? n : max;
    int saved = errno; /* a failed read's, not the program's to see */
    uintptr_t ts = own_state(syscall(SYS_getpid));
    errno = saved;
    if (ts == 0)
        return n < max ? n : max;
    uintptr_t f = off.ts_cframe ? rd64(ts + off.ts_cframe) : ts;
    f = f != 0 ? rd64(f + off.ts_frame) : 0;
    uint64_t out[HL_STACK_FRAMES];
    int m = 0, depth = 0;
    if (max > HL_STACK_FRAMES)
        max = HL_STACK_FRAMES;
    for (i = 0; i < n && m < max; i++) {
        if (!is_eval(frames[i])) {
            out[m++] = frames[i];
            continue;
        }
        /* this invocation's frames, up to its entry; none read (the
         * chain ran out): the native frame stays */
        int first = m;
        for (; f != 0 && m < max && depth < 1024; depth++) {
            /* 3.14 on, f_executable is a _PyStackRef: a pointer whose
             * low two bits are its tag (Py_TAG_BITS; objects are 16-byte
             * aligned, so earlier pointers lose nothing) */
            uintptr_t code = rd64(f + off.fr_code) & ~(uintptr_t)3, prev = rd64(f + off.fr_previous);
            int owner = ((const volatile uint8_t *)f)[off.fr_owner];
            int entry = off.fr_is_entry >= 0 && ((const volatile uint8_t *)f)[off.fr_is_entry];
            if (off.fr_is_entry < 0 && owner >= OWNED_BY_INTERPRETER) {
                f = prev;
                break;
            }
            if (code != 0 && rd64(code + 8) == code_type) {
                uintptr_t ip = rd64(f + off.fr_instr);
                int64_t unit = ((int64_t)ip - (int64_t)(code + off.co_code)) / 2;
                uint64_t line = line_of(code, unit);
                out[m++] = HL_PYFRAME_BIT | (uint64_t)code_entry(code) << 32 | line;
            }
            f = prev;
            if (entry)
                break;
        }
        if (m == first && m < max)
            out[m++] = frames[i];
    }
    memcpy(frames, out, (size_t)m * sizeof *out);
    return m;
}
