#!/usr/bin/env python3
"""table.py: a markdown table from `heapctl overhead --json` documents.

    bench/table.py RESULT.json [OTHER.json...]

The first document gives the rows; each further document (heaptrack's with
--wrap, another library's) adds an overhead column for the scenarios it
measured. Above the table: the machine, library, date and command of each
document, which belong beside every figure.
"""

import json
import sys


def pct(f):
    return "?" if f is None else f"{100 * f:+.1f}%"


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    docs = []
    for p in paths:
        with open(p) as f:
            docs.append(json.load(f))
    for p, d in zip(paths, docs):
        e = d["env"]
        print(f"- `{p}`: {e.get('date')}, {e.get('cpu')} ({e.get('cores')} cores), {e.get('kernel')}, "
              f"{e.get('go')}, lib {e.get('lib_version')} {e.get('commit')}; `{' '.join(e.get('args') or [])}`")
    print()
    first = docs[0]["scenarios"]
    instr = bool(first) and first[0].get("measure") == "instructions"
    prof = first[0]["profiled"]["label"] if first else "heapline"
    extra = [(d["scenarios"][0]["profiled"]["label"] if d["scenarios"] else "?", {s["scenario"]: s for s in d["scenarios"]})
             for d in docs[1:]]
    unit = "instructions" if instr else "median"
    head = ["scenario", f"baseline {unit}", f"{prof} {unit}", "overhead", "95% CI", "CV (base / prof)", "runs",
            "instr/alloc" if instr else "allocs/s"]
    head += [f"{label} overhead" for label, _ in extra]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for s in first:
        b, p = s["baseline"], s["profiled"]
        if instr:
            bm, pm = f"{b.get('median_instructions', 0):,.0f}", f"{p.get('median_instructions', 0):,.0f}"
            rate = s.get("added_instructions_per_alloc")
            rate = "-" if rate is None else f"{rate:+.1f}"
        else:
            bm, pm = f"{b['median_s']:.3f} s", f"{p['median_s']:.3f} s"
            rate = s.get("allocs_per_s")
            rate = "-" if rate is None else f"{rate:.2e}"
        row = [s["scenario"], bm, pm, pct(s["overhead"]), f"{pct(s['ci_low'])} .. {pct(s['ci_high'])}",
               f"{100 * b['cv']:.1f}% / {100 * p['cv']:.1f}%", str(s["runs"] * s.get("rounds", 1)), rate]
        for _, by in extra:
            o = by.get(s["scenario"])
            row.append("-" if o is None else f"{pct(o['overhead'])} ({pct(o['ci_low'])} .. {pct(o['ci_high'])})")
        print("| " + " | ".join(row) + " |")
    warnings = [(s["scenario"], s["profiled"]["label"], w) for d in docs for s in d["scenarios"] for w in s.get("warnings", [])]
    if warnings:
        print()
        for name, label, w in warnings:
            print(f"- {name} ({label}): {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
