# Holds 2,000 instances of a class of 100 slots (832 bytes each: malloc's,
# on the GC lists), collects so that they are in the oldest generation,
# prints "ready", then churns until stdin closes: tuples of 100 items
# (malloc's, tracked) made and dropped, so that the youngest generation's
# list changes all the time under a reader.
import gc
import sys
import threading


class Wide:
    __slots__ = tuple("w%d" % i for i in range(100))


wides = [Wide() for _ in range(2000)]
gc.collect()
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), done.set()), daemon=True).start()
print("ready", flush=True)
anchor = []
while not done.is_set():
    churn = [tuple(range(99)) + (anchor,) for _ in range(100)]
