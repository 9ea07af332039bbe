import ctypes
import pytest

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


hold(1)  # the first calls' own allocations are not the tests'


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_0():
    hold(0)


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_10():
    hold(10, 0)


@pytest.mark.limit_memory("1 GB")
@pytest.mark.limit_leaks("1 GB")
def test_30():
    hold(30, 5)
