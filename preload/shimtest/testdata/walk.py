# walk.py: Python stacks for the unwinder's oracle test: recursion,
# generators, comprehensions, a C extension calling back (json, sorted's
# key), and threads.
import json
import threading


def rec(n):
    if n == 0:
        return [str(i) for i in range(2000)]
    return rec(n - 1)


def gen(n):
    for i in range(n):
        yield {"k": [i, str(i)]}


def work():
    for r in range(1):
        d = {i: [i, str(i)] for i in range(3000)}
        json.dumps(d)
        rec(10 + r)
        list(gen(2000))
        sorted(range(2000), key=lambda v: str(-v))


threads = [threading.Thread(target=work) for _ in range(2)]
for t in threads:
    t.start()
work()
for t in threads:
    t.join()
