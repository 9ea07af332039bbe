"""Blocks of malloc held live: what test_exact.py and test_limit.py allocate."""
import ctypes

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
BLOCK = 65528  # glibc's usable size too: a 64 KiB chunk, under the mmap threshold
held = []


def hold(n, keep=0):
    """n blocks live at once, then all freed but keep."""
    held[:] = [libc.malloc(BLOCK) for _ in range(n)]
    for p in held[keep:]:
        libc.free(p)
    del held[keep:]
