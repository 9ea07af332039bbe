# pyobjects.py: Python objects allocated, kept and freed, with the shim's
# count of pymalloc's live blocks (the region's header, line 13) and
# CPython's own (sys.getallocatedblocks) at each step. Every object here is
# 512 bytes or less, so pymalloc serves them all, but for the two
# containers' item arrays: both counts move alike.
import gc
import os
import sys

gc.disable()
fd = os.open("/dev/shm/heapline.%d" % os.getpid(), os.O_RDONLY)


def step(name):
    b = os.pread(fd, 32, 832)  # py_allocs, py_frees, py_alloc_bytes, py_free_bytes
    n = sys.getallocatedblocks()
    w = [int.from_bytes(b[i:i + 8], "little") for i in range(0, 32, 8)]
    print(name, w[0] - w[1], n, w[2] - w[3])


cold = int.from_bytes(os.pread(fd, 4, 884), "little")  # py_eval_cold
print("cold", cold, 0, 0)
step("start")
keep = [(i, str(i)) for i in range(100000)]
step("kept")
more = {str(i): [i] * (i % 60) for i in range(20000)}
step("dict")
del keep
step("freed")
more.clear()
step("cleared")
