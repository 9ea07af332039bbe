#!/usr/bin/env bash
# cpython-suite.sh: CPython's own tests give the same results under the
# shim as without it. Runs 50 modules of the interpreter's test package
# (regrtest, two workers) once without and once under bin/libheap.so,
# sampling at 64 KiB with pymalloc's wrapper on (HEAPLINE_PYMALLOC=1), so
# that Python frames and pymalloc's objects are exercised, and compares every test case's result (pass, skip, failure,
# error) from the two JUnit files.
#
#   bench/cpython-suite.sh [PYTHON]   # from the project root, after make (LIB= another build)
#   PYMALLOC=0 bench/cpython-suite.sh # the default shim: pymalloc's arena allocator alone wrapped
# Debian's python3.11 needs libpython3.11-testsuite (make deps).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-/usr/bin/python3.11}
lib=${LIB:-$PWD/bin/libheap.so}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mods="test_list test_tuple test_dict test_set test_bytes test_int test_float test_complex test_bool
test_enumerate test_iter test_itertools test_generators test_coroutines test_asyncgen test_contextlib
test_functools test_operator test_collections test_deque test_heapq test_bisect test_array test_struct
test_weakref test_gc test_json test_re test_textwrap test_string_literals test_format test_fstring
test_slice test_range test_dictviews test_ordered_dict test_copy test_memoryview test_class test_descr
test_scope test_exceptions test_thread test_queue test_zlib test_base64 test_binascii test_random
test_sort test_userdict"
# shellcheck disable=SC2086
"$py" -m test -j2 --junit-xml "$dir/plain.xml" $mods >"$dir/plain.log" 2>&1 || true
# shellcheck disable=SC2086
env LD_PRELOAD="$lib" HEAPLINE_SAMPLE=64k HEAPLINE_PYMALLOC="${PYMALLOC:-1}" HEAPLINE_SUMMARY=0 "$py" -m test -j2 --junit-xml "$dir/shim.xml" $mods >"$dir/shim.log" 2>&1 || true
"$py" - "$dir/plain.xml" "$dir/shim.xml" <<'PY'
import sys, collections, xml.etree.ElementTree as ET
def results(path):
    out = {}
    for tc in ET.parse(path).iter("testcase"):
        st = "pass"
        for c in tc:
            if c.tag in ("failure", "error", "skipped"):
                st = c.tag
        out[tc.get("classname", "") + "." + tc.get("name")] = st
    return out
a, b = results(sys.argv[1]), results(sys.argv[2])
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print(f"{sys.version.split()[0]}: {len(a)} test cases without the shim {dict(collections.Counter(a.values()))}, "
      f"{len(b)} under it; {len(diff)} differ")
for k in diff[:20]:
    print(" ", k, a.get(k), "->", b.get(k))
sys.exit(1 if diff else 0)
PY
