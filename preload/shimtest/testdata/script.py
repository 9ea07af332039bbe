# script.py: deterministic Python work whose output must be identical with
# and without the shim: JSON, dicts, strings, sorting, threads, a child.
import json, subprocess, sys, threading

data = [{"id": i, "name": "item-%d" % i, "tags": ["t%d" % (i % 7)] * (i % 5)} for i in range(20000)]
text = json.dumps(data)
back = json.loads(text)
index = {d["name"]: d for d in back}
words = sorted(set(" ".join(d["name"] for d in back).split("-")), key=lambda w: (len(w), w))
results = [0] * 4

def work(k):
    results[k] = sum(len(json.dumps({"k": k, "v": list(range(i % 50))})) for i in range(5000))

threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
child = subprocess.run([sys.executable, "-c", "print(sum(range(1000)))"], capture_output=True, text=True)
print(len(text), len(index), words[:3], words[-1], results, child.stdout.strip())
print("stderr line", file=sys.stderr)
