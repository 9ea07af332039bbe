# Holds known objects and prints its own truth: for each type, the count of
# live objects and their sys.getsizeof sum, over gc.get_objects(), the
# untracked objects they refer to (strs, ints: interned names, constants)
# and the objects the containers it holds refer to, each object once, by
# id. It prints "ready" and holds them until a line on stdin.
import gc
import sys


class Plain:
    def __init__(self, i):
        self.a = i
        self.b = i


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, i):
        self.a = i
        self.b = i


dicts = [{"k": i} for i in range(100000)]
strs = ["s%07d" % i for i in range(200000)]
plains = [Plain(i) for i in range(50000)]
slotted = [Slotted(i) for i in range(50000)]
lists = [list(range(100)) for _ in range(20000)]

count, size, seen = {}, {}, set()


def add(o):
    if id(o) in seen or o is untracked:
        return
    seen.add(id(o))
    t = type(o).__name__
    count[t] = count.get(t, 0) + 1
    size[t] = size.get(t, 0) + sys.getsizeof(o)


untracked = []
for o in gc.get_objects():
    add(o)
    untracked.extend(r for r in gc.get_referents(o) if not gc.is_tracked(r))
    if isinstance(o, type):  # a builtin type's dict is the interpreter's, not a referent
        for k, v in vars(o).items():
            untracked.append(k)
            if not gc.is_tracked(v):
                untracked.append(v)
while untracked:  # and what untracked tuples (of names, constants) hold
    r = untracked.pop()
    if id(r) not in seen:
        add(r)
        untracked.extend(gc.get_referents(r))
del untracked  # the truth's own list: counted by neither
for c in (dicts, strs, plains, slotted, lists):
    for o in c:
        add(o)
for t in ("dict", "str", "Plain", "Slotted", "list"):
    print("truth", t, count[t], size[t])
print("ready", flush=True)
sys.stdin.readline()
