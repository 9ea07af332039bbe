# pythreads.py: three threads allocate from three functions each (a plain
# loop, a generator, a coroutine), for TestProfilePythonThreads.
import threading, asyncio
from itertools import repeat

def worker_a(n):
    keep = []
    for _ in repeat(None, n):
        keep.append(bytearray(1000))  # a

def gen_b(n):
    for _ in repeat(None, n):
        yield (n, "x", "y")  # b

def worker_b(n):
    return list(gen_b(n))

async def coro_c(n):
    out = []
    for _ in repeat(None, n):
        out.append("abc" + str(n))  # c
        if len(out) % 1000 == 0:
            await asyncio.sleep(0)
    return out

def worker_c(n):
    return asyncio.run(coro_c(n))

ts = [threading.Thread(target=f, args=(n,)) for f, n in ((worker_a, 20000), (worker_b, 300000), (worker_c, 300000))]
for t in ts: t.start()
for t in ts: t.join()
