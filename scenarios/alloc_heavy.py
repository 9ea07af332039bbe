#!/usr/bin/env python3
"""alloc_heavy: an allocation-heavy Python workload for heapctl overhead.

Each round builds a list of records (dicts of strings, ints, floats and small
lists), serialises it to JSON, parses it back, indexes the records in dicts
keyed by formatted strings, groups and sorts them, and joins strings. Every
step allocates and frees many small objects through pymalloc and, for the
larger strings and lists, through malloc itself.

Deterministic: the data come from a fixed-seed random.Random and nothing
depends on hash order (set PYTHONHASHSEED=0 for identical instruction counts
too; heapctl does). Usage: alloc_heavy.py [ROUNDS] (default 10). Prints one
checksum line with -v only, so the output cannot perturb a timing.
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


def make_records(rng, n):
    records = []
    for i in range(n):
        name = "-".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        records.append({
            "id": i,
            "name": name,
            "group": WORDS[rng.randrange(len(WORDS))],
            "score": rng.random() * 1000.0,
            "tags": [rng.choice(WORDS)[: rng.randint(1, 5)] for _ in range(rng.randint(0, 6))],
            "point": {"x": rng.randint(-1000, 1000), "y": rng.randint(-1000, 1000)},
        })
    return records


def one_round(rng, n):
    records = make_records(rng, n)
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
    return total + len(text) + len(upper) + sum(tags.values())


def main(argv):
    verbose = "-v" in argv
    args = [a for a in argv if a != "-v"]
    rounds = int(args[0]) if args else 10
    if rounds < 0:
        print("alloc_heavy: ROUNDS must be at least 0", file=sys.stderr)
        return 2
    rng = random.Random(20240611)
    checksum = 0
    for _ in range(rounds):
        checksum = (checksum * 31 + one_round(rng, 4000)) % (1 << 61)
    if verbose:
        print(f"alloc_heavy: {rounds} rounds, checksum {checksum}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
