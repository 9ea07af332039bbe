#!/usr/bin/env python3
"""alloc_heavy: an allocation-heavy Python workload for heapctl overhead.

Each round builds a list of records (dicts of strings, ints, floats and small
lists), serialises it to JSON, parses it back, indexes the records in dicts
keyed by formatted strings, groups and sorts them, and joins strings. Every
step allocates and frees many small objects through pymalloc and, for the
larger strings and lists, through malloc itself.

Deterministic: the data come from a fixed-seed random.Random and nothing
depends on hash order (set PYTHONHASHSEED=0 for identical instruction counts
too; heapctl does). Objects up to 512 bytes come from pymalloc's arenas, not
from malloc; the records' texts (50-2500 characters) and what is built from
them are larger, so about 2.5e5 malloc calls per second reach the allocator.

Usage: alloc_heavy.py [ROUNDS [RECORDS]] (default 4 rounds of 4000 records).
Prints one checksum line with -v only, so the output cannot perturb a timing.
"""

import json
import random
import sys

WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    "india", "juliett", "kilo", "lima", "mike", "november", "oscar", "papa",
    "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
    "xray", "yankee", "zulu",
]


def make_records(rng, corpus, n):
    records = []
    for i in range(n):
        start = rng.randrange(len(corpus) - 2500)
        name = "-".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        records.append({
            "id": i,
            "name": name,
            "group": WORDS[rng.randrange(len(WORDS))],
            "score": rng.random() * 1000.0,
            "tags": [rng.choice(WORDS)[: rng.randint(1, 5)] for _ in range(rng.randint(0, 6))],
            "point": {"x": rng.randint(-1000, 1000), "y": rng.randint(-1000, 1000)},
            # Text of 50-2500 characters: most strings and word lists built
            # from it are larger than pymalloc's 512-byte limit, so they
            # reach malloc itself, as the large objects of real programs do.
            "text": corpus[start : start + rng.randint(50, 2500)],
        })
    return records


def one_round(rng, corpus, n):
    records = make_records(rng, corpus, n)
    # JSON build and parse: many short-lived strings, dicts and lists.
    text = json.dumps(records)
    parsed = json.loads(text)
    # Dicts keyed by formatted strings.
    by_key = {f"{r['group']}:{r['id']:06d}": r for r in parsed}
    groups = {}
    for key, r in by_key.items():
        groups.setdefault(r["group"], []).append((r["score"], key))
    # Sorting: each group by score, then all names.
    total = 0
    for g in sorted(groups):
        members = sorted(groups[g], reverse=True)
        total += len(members[0][1])
    names = sorted((r["name"] for r in parsed), key=lambda s: (len(s), s))
    # String building.
    joined = ",".join(names[:: max(1, len(names) // 500)])
    upper = joined.upper().split(",")
    tags = {}
    for r in parsed:
        for t in r["tags"]:
            tags[t] = tags.get(t, 0) + 1
        # Word lists and case changes of each text: medium-size lists and
        # strings, freed at once.
        words = r["text"].split()
        total += len(sorted(words)[len(words) // 2]) + len(r["text"].title())
    return total + len(text) + len(upper) + sum(tags.values())


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    try:
        rounds = int(args[0]) if args else 4
        records = int(args[1]) if len(args) > 1 else 4000
    except ValueError as e:
        print(f"alloc_heavy: {e}", file=sys.stderr)
        return 2
    if rounds < 0 or records < 1:
        print("alloc_heavy: ROUNDS must be at least 0 and RECORDS at least 1", file=sys.stderr)
        return 2
    rng = random.Random(20240611)
    corpus = " ".join(rng.choices(WORDS, k=20000))
    checksum = 0
    for _ in range(rounds):
        checksum = (checksum * 31 + one_round(rng, corpus, records)) % (1 << 61)
    if verbose:
        print(f"alloc_heavy: {rounds} rounds, checksum {checksum}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
