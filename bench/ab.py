#!/usr/bin/env python3
# ab.py N LIB... -- CMD: each LIB after the first against the first ("-":
# no library), measured by `heapctl overhead --measure cpu` (N interleaved
# runs of each side after one warm-up, median user+sys CPU time, 95%
# bootstrap interval), one comparison per LIB; prints each median and its
# change against the first. Used by bench/floor, whose prototypes are not
# profilers (--any-lib). HEAPCTL: default bin/heapctl of this project.
import json, os, subprocess, sys

n = sys.argv[1]; i = sys.argv.index("--"); libs = sys.argv[2:i]; cmd = sys.argv[i + 1:]
heapctl = os.environ.get("HEAPCTL") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bin", "heapctl")
if "-" in libs[1:]:
    sys.exit("ab.py: only the first LIB may be - (no library)")
base = [] if libs[0] == "-" else ["--baseline-lib", libs[0]]
rows = []
for lib in libs[1:]:
    out = subprocess.run([heapctl, "overhead", "--measure", "cpu", "-n", n, "--warmup", "1", "--any-lib", "--json",
                          *base, "--lib", lib, "--", *cmd], check=True, stdout=subprocess.PIPE).stdout
    s = json.loads(out)["scenarios"][0]
    cpu = lambda side: sorted(u + y for u, y in zip(side["samples_user_s"], side["samples_sys_s"]))
    med = lambda xs: (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2
    if not rows:
        rows.append((libs[0], med(cpu(s["baseline"])), ""))
    rows.append((lib, med(cpu(s["profiled"])), "%+6.1f%%  (%+.1f .. %+.1f)" % (100 * s["overhead"], 100 * s["ci_low"], 100 * s["ci_high"])))
for lib, m, change in rows:
    print("%-28s %.4f s  %s" % (lib[-28:], m, change))
