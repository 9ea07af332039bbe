import ctypes
import os

import pytest

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
BLOCK = 65528
held = []


def hold(n, keep=0):
    held[:] = [libc.malloc(BLOCK) for _ in range(n)]
    for p in held[keep:]:
        libc.free(p)
    del held[keep:]


hold(1)


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_0():
    hold(0)


# test_exact.py's test_30, limited to the bytes in LIMIT
@pytest.mark.limit_memory(int(os.environ["LIMIT"]))
def test_30():
    hold(30, 5)
