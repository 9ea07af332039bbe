# A leak as users have it: a dict that keeps 32,768 strs of 1,000
# characters (32 MiB), each larger than pymalloc's 512 bytes, so malloc's,
# untracked and on no GC list; and 2,000 bytearray(1000), whose bytes are a
# buffer apart from the object. Prints the bytearrays' sys.getsizeof sum
# and the strs' ("truth TYPE COUNT BYTES"), then "ready", and holds them
# until a line on stdin.
import sys

cache = {}
for i in range(32 * 1024):
    cache[i] = ("%07d" % i).ljust(1000, ".")  # the leak's line: 11
buffers = [bytearray(1000) for _ in range(2000)]
print("truth bytearray", len(buffers), sum(sys.getsizeof(b) for b in buffers))
print("truth str", len(cache), sum(sys.getsizeof(s) for s in cache.values()))
print("ready", flush=True)
sys.stdin.readline()
