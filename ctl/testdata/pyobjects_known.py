# Holds known objects (of them, tuples and Wide instances larger than
# pymalloc's 512 bytes) and prints its own truth: for each type, the count of
# live objects and their sys.getsizeof sum, over gc.get_objects(), the
# untracked objects they refer to (strs, ints: interned names, constants)
# and the objects the containers it holds refer to, each object once, by
# id. It prints "ready" and holds them until a line on stdin.
import gc
import struct
import sys
import types


class Plain:
    def __init__(self, i):
        self.a = i
        self.b = i


# 100 slots: 832 bytes an instance with its GC header, more than
# pymalloc's 512: malloc's, found on the GC lists
class Wide:
    __slots__ = tuple("w%d" % i for i in range(100))


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
# 200 items: 1,640 bytes a tuple, malloc's; the list in each keeps it
# tracked (the collector untracks a tuple of untracked items)
anchor = []
tuples = [tuple(range(199)) + (anchor,) for _ in range(5000)]
wides = [Wide() for _ in range(2000)]

count, size, seen = {}, {}, set()


def images():
    """The address ranges of the interpreter's own image: the python
    program's and libpython's, each from its first mapping to the end of
    its last PT_LOAD in memory (its .bss). The objects there (static
    types, 3.11's deep-frozen code and its constants, 3.12's static
    strings) are not on the heap."""
    out, done = [], set()
    for line in open("/proc/self/maps"):
        f = line.split()
        if len(f) < 6 or f[2] != "00000000" or f[5] in done:
            continue
        if not f[5].rsplit("/", 1)[-1].startswith(("python", "libpython")):
            continue
        done.add(f[5])
        with open(f[5], "rb") as elf:
            h = elf.read(64)
            (phoff,) = struct.unpack_from("<Q", h, 32)
            size, n = struct.unpack_from("<HH", h, 54)
            elf.seek(phoff)
            ph = elf.read(size * n)
        loads = [struct.unpack_from("<IIQQQQQ", ph, i * size) for i in range(n)]
        loads = [(vaddr, vaddr + memsz) for kind, _, _, vaddr, _, _, memsz in loads if kind == 1]  # PT_LOAD
        start = int(f[0].split("-")[0], 16)
        base = start - (min(lo for lo, _ in loads) & ~4095)
        out.append((start, base + max(hi for _, hi in loads)))
    return out


image = images()


def add(o):
    if id(o) in seen or o is untracked:
        return
    if any(lo <= id(o) < hi for lo, hi in image):
        seen.add(id(o))  # walked, not counted
        return
    seen.add(id(o))
    t = type(o).__name__
    count[t] = count.get(t, 0) + 1
    if type(o) is types.CodeType and o.co_nlocals + len(o.co_cellvars) + len(o.co_freevars) > 0:
        count["names"] = count.get("names", 0) + 1
    size[t] = size.get(t, 0) + sys.getsizeof(o)


def held(o):
    """What o refers to. A builtin type and a code object (not tracked)
    give no referents: a type's dict, __mro__ and __bases__, a code
    object's constants and names."""
    r = gc.get_referents(o)
    if type(o) is types.CodeType:
        r += (o.co_consts, o.co_names)
    if isinstance(o, type):
        for k, v in vars(o).items():
            r += (k, v)
        r += (o.__mro__, o.__bases__)
    return r


untracked = []
for o in gc.get_objects():
    add(o)
    untracked.extend(r for r in held(o) if not gc.is_tracked(r))
while untracked:  # and what untracked objects (tuples of names, constants, builtin types) hold
    r = untracked.pop()
    if id(r) not in seen:
        add(r)
        untracked.extend(held(r))
del untracked  # the truth's own list: counted by neither
for c in (dicts, strs, plains, slotted, lists, tuples, wides):
    for o in c:
        add(o)
for t in ("dict", "str", "Plain", "Slotted", "list", "tuple", "Wide"):
    print("truth", t, count[t], size[t])
# Each code object of the heap holds a tuple of its locals' names
# (co_localsplusnames) that no Python code can reach: so many tuples the
# truth may miss.
print("unreached tuple", count.get("names", 0))
print("ready", flush=True)
sys.stdin.readline()
