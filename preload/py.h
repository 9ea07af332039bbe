/*
 * py.h: py_frames.c's part of the thread's state (count_thread.h composes the
 * parts into hl_self); py_frames.c's functions are declared in shim.h.
 */
#ifndef HEAPLINE_PYTHON_H
#define HEAPLINE_PYTHON_H

#include <stdint.h>

struct hl_python_tls {
    uintptr_t tstate;       /* this thread's PyThreadState, as last found */
    uint32_t misses;        /* samples left before looking for one again */
};

#endif
