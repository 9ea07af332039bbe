/*
 * fakepython.c: a program the shim takes for a CPython (py_frames.c,
 * py_pymalloc.c): it exports the symbols the shim looks up, a Py_Version of
 * minor FAKE_MINOR (default 0x0310, 3.16: newer than any the shim knows)
 * and a _PyRuntime starting with _Py_DebugOffsets in 3.15's layout, the
 * offsets of Debian's 3.15, sizes that agree with its types unless
 * FAKE_BAD_CODE (the code section's first instruction not at
 * PyCode_Type's tp_basicsize). FAKE_FT sets the offsets' free-threaded
 * word, FAKE_FT_SYMBOL exports _Py_DecRefShared instead. It counts the
 * calls of the allocator setters, prints them once main runs (the shim
 * installs before main) and waits for a line on stdin. Built with
 * -rdynamic, so that dlsym finds its symbols.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef FAKE_MINOR
#define FAKE_MINOR 0x0310
#endif
#ifdef FAKE_BAD_CODE
#define CODE_BASICSIZE 200
#else
#define CODE_BASICSIZE 208
#endif
#ifdef FAKE_FT
#define FT 1
#else
#define FT 0
#endif

const unsigned long Py_Version = (unsigned long)FAKE_MINOR << 16 | 0xf0;

/* "xdebugpy", the version, free_threaded, then 3.15's sections by index */
uint64_t _PyRuntime[512] = {
    [0] = 0x7970677562656478ull, [1] = (uint64_t)FAKE_MINOR << 16 | 0xf0, [2] = FT,
    [3] = sizeof(uint64_t) * 512, [4] = 912, [5] = 936,          /* runtime: size, finalizing, interpreters.head */
    [6] = 226240, [8] = 7264, [9] = 7336,                        /* interpreter: size, next, threads.head */
    [22] = 888, [24] = 8, [26] = 72, [30] = 176,                 /* thread: size, next, current_frame, thread_id */
    [39] = 88, [40] = 8, [41] = 0, [42] = 56, [44] = 74,         /* frame: size, previous, executable, instr_ptr, owner */
    [47] = 216, [48] = 112, [50] = 128, [51] = 136, [52] = 68, [56] = 208, /* code */
    [58] = 16, [59] = 8,                                         /* PyObject: size, ob_type */
    [86] = 40, [87] = 16, [88] = 32,                             /* bytes: size, ob_size, ob_sval */
    [89] = 64, [90] = 32, [91] = 16, [92] = 40,                  /* str: size, state, length, PyASCIIObject's size */
};

/* type objects: tp_basicsize at 32 */
uint64_t PyCode_Type[52] = {[4] = CODE_BASICSIZE};
uint64_t PyUnicode_Type[52] = {[4] = 64};

static int sets;
void PyMem_GetAllocator(int domain, void *a) { (void)domain; memset(a, 0, 40); }
void PyMem_SetAllocator(int domain, void *a) { (void)domain, (void)a; sets++; }
void PyObject_GetArenaAllocator(void *a) { memset(a, 0, 24); }
void PyObject_SetArenaAllocator(void *a) { (void)a; sets++; }
int Py_IsInitialized(void) { return 0; }
#ifdef FAKE_FT_SYMBOL
void _Py_DecRefShared(void *o) { (void)o; }
#endif

/* a function with a size in the symbol table, never run */
int _PyEval_EvalFrameDefault(void *tstate, void *frame, int throwflag)
{
    return tstate != frame ? throwflag + 1 : throwflag - 1;
}

int main(void)
{
    printf("setters %d\n", sets);
    fflush(stdout);
    char line[8];
    return fgets(line, sizeof line, stdin) == NULL;
}
