# app.py: the Python program of release/test-dist.sh. It allocates from
# two functions, blobs (1 MiB bytearrays, malloc's) and words (strings
# joined into lists), and prints what it made: the same lines with and
# without the shim, on any Python 3.
def blobs(n):
    kept = []
    for i in range(n):
        kept.append(bytearray(1 << 20))
    return sum(len(b) for b in kept)


def words(n):
    return len(" ".join(str(i) * 7 for i in range(n)))


print("blobs", blobs(64))
print("words", words(200000))
