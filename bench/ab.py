#!/usr/bin/env python3
# ab.py N LIB... -- CMD: N interleaved runs of CMD with each LIB preloaded
# ("-": none) after one warm-up round; prints the median user+sys CPU
# seconds of each and its change against the first. Used by bench/floor.
import os, sys, statistics, subprocess
n = int(sys.argv[1]); i = sys.argv.index("--"); libs = sys.argv[2:i]; cmd = sys.argv[i+1:]
res = {l: [] for l in libs}
env0 = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
env0["HEAPLINE_SUMMARY"] = "0"
for r in range(n + 1):
    for l in libs:
        env = dict(env0)
        if l != "-": env["LD_PRELOAD"] = l
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        _, st, ru = os.wait4(p.pid, 0)
        if r: res[l].append(ru.ru_utime + ru.ru_stime)
base = statistics.median(res[libs[0]])
for l in libs:
    m = statistics.median(res[l])
    print("%-28s %.4f s  %+6.1f%%" % (l[-28:], m, 100 * (m / base - 1)))
