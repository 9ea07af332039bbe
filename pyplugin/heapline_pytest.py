"""heapline's pytest plugin: memory limits on a test (docs/ci.md, "pytest").

    @pytest.mark.limit_memory("24 MB")   # the test's own peak
    @pytest.mark.limit_leaks("1 MB")     # what stays live after it, after gc.collect()

Run pytest under the shim (heapctl run -- python3 -m pytest, or with
LD_PRELOAD=libheap.so): the plugin reads the process's own region, which
the shim maps (/proc/self/maps), and starts a new peak at each marked
test by setting the region's epoch_peak to 0, which the shim raises on
every publication as it raises the process's peak. Without the shim the
plugin does nothing, and says why once.

The figures are the malloc family's usable bytes, as heapline counts them;
Python's small objects live in pymalloc's arenas, outside them, unless
PYTHONMALLOC=malloc (heapctl run --python-objects) puts them in. What stays
live is exact (the slots' counters, as heapctl reads them); the peak is
the difference of two published figures, each within the peak's error
bound (peak_error_bytes) either way with the default batch: a test fails
only when its peak less twice that bound is over the limit;
HEAPLINE_PEAK_BATCH=0 makes it exact.
"""

import ctypes
import gc
import os
import re
import struct

import pytest

# preload/region.h, the one layout: ctl/pytest_plugin_test.go checks every
# offset and size here against what the C compiler makes of it.
HL_MAGIC = 0x454E494C50414548
HL_VERSION = 2
HL_PATH_PREFIX = "/dev/shm/heapline."
OFF_MAGIC = 0
OFF_VERSION = 8
OFF_NSLOTS = 20
OFF_PID = 32
OFF_PEAK_SLACK = 56
OFF_SEQ = 64
OFF_THREADS_MAX = 96
OFF_RETIRED = 128
OFF_PUBLISHED_LIVE = 192
OFF_MODE = 208
OFF_EPOCH_PEAK = 216
OFF_PROF_OFFSET = 768
OFF_NSTACKS = 784
OFF_STACKS_USED = 824
OFF_PYCODES_USED = 828
OFF_PYCODE_OFFSET = 864
OFF_NPYCODES = 872
OFF_PY_FLAGS = 880
HL_HEADER_SIZE = 1024
HL_SLOT_SIZE = 64
SLOT_ALLOC_WORD = 0
SLOT_FREE_WORD = 8
SLOT_ALLOC_BYTES = 16
SLOT_FREE_BYTES = 24
SLOT_ALLOCS = 32
SLOT_FREES = 40
COUNTERS_ALLOCS = 0
COUNTERS_FREES = 8
COUNTERS_ALLOCATED_BYTES = 16
COUNTERS_FREED_BYTES = 24
HL_WORD_SHIFT = 50
HL_WORD_UNIT = 16
HL_CHUNK_BIAS = 8
SIZEOF_HL_STACK = 576
STACK_HASH = 0
STACK_NFRAMES = 12
STACK_ALLOC_BYTES = 24
STACK_FREE_BYTES = 40
STACK_FRAMES = 64
HL_STACK_FRAMES = 64
SIZEOF_HL_PYCODE = 512
PYCODE_CODE = 0
PYCODE_FIRSTLINE = 20
PYCODE_NAME = 24
PYCODE_NAME_MAX = 128
PYCODE_FILE = 152
PYCODE_FILE_MAX = 360
HL_PYFRAME_BIT = 1 << 63
HL_PYCODE_NONE = 0x7FFFFFFF
HL_PY_FRAMES = 1
HL_MODE_BYPASSED = 3
OFF_BYPASSED_BY = 512
HL_OBJECT_MAX = 256

# heapctl's sizes (ctl/internal/gate/size.go): K, M, G, T and KiB..TiB are
# powers of 1024, kB..TB powers of 1000.
_UNITS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kib": 1 << 10, "kb": 10**3,
    "m": 1 << 20, "mib": 1 << 20, "mb": 10**6,
    "g": 1 << 30, "gib": 1 << 30, "gb": 10**9,
    "t": 1 << 40, "tib": 1 << 40, "tb": 10**12,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text):
    """Bytes of a size such as "24 MB", "1.5GiB" or 500000, as heapctl run's
    --max-peak reads it; ValueError if it is none."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    m = _SIZE.match(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(
            f"{text!r} is not a size: want a number and a unit, such as 24MB, "
            "24MiB or 500000 (K, M, G, T: powers of 1024, also as KiB..TiB; "
            "kB, MB, GB, TB: powers of 1000)"
        )
    whole, _, frac = m.group(1).partition(".")
    mult = _UNITS[m.group(2).lower()]
    return int(whole) * mult + (int(frac) * mult // 10 ** len(frac) if frac else 0)


def size_text(n):
    """n bytes as heapctl writes them: "28.6 MiB (30003184 B)"."""
    v, unit = float(n), "B"
    for u in ("KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024:
            break
        v, unit = v / 1024, u
    if unit == "B":
        return f"{n} B"
    return f"{v:.1f} {unit} ({n} B)"


class Region:
    """The process's own region, read and written in place through the
    shim's shared mapping: the header page is always there, and the
    tables' entries below their "used" counts are (the pages past them
    are not the file's yet, and are never touched here)."""

    def __init__(self, base):
        self.base = base

    def u64(self, off):
        return ctypes.c_uint64.from_address(self.base + off).value

    def i64(self, off):
        return ctypes.c_int64.from_address(self.base + off).value

    def u32(self, off):
        return ctypes.c_uint32.from_address(self.base + off).value

    def live(self):
        """The live bytes now, exact: the slots' counters and the retired
        ones, summed under the fold seqlock as heapctl sums them (region.h,
        hl_slot_counts), not published_live, which lags by the batch."""
        n = self.u32(OFF_NSLOTS)
        mask = (1 << HL_WORD_SHIFT) - 1
        for _ in range(1000):
            seq = self.u64(OFF_SEQ)
            if seq & 1:
                os.sched_yield()
                continue
            raw = ctypes.string_at(self.base + HL_HEADER_SIZE, n * HL_SLOT_SIZE)
            ret = ctypes.string_at(self.base + OFF_RETIRED, 32)
            if self.u64(OFF_SEQ) != seq:
                continue
            r = struct.unpack_from("<4Q", ret)
            live = r[COUNTERS_ALLOCATED_BYTES // 8] - r[COUNTERS_FREED_BYTES // 8]
            for i in range(n):
                aw, fw, ab, fb, na, nf = struct.unpack_from("<6Q", raw, i * HL_SLOT_SIZE)
                allocs, frees = na + (aw & mask), nf + (fw & mask)
                live += ab + (aw >> HL_WORD_SHIFT) * HL_WORD_UNIT - HL_CHUNK_BIAS * allocs
                live -= fb + (fw >> HL_WORD_SHIFT) * HL_WORD_UNIT - HL_CHUNK_BIAS * frees
            return live
        return self.i64(OFF_PUBLISHED_LIVE)  # a fold never ended: the published figure

    def start_epoch(self):
        """Starts a new epoch peak: the shim raises the word from 0 with
        every publication from now on (an aligned 8-byte store is whole)."""
        ctypes.c_uint64.from_address(self.base + OFF_EPOCH_PEAK).value = 0

    def epoch_peak(self):
        return self.u64(OFF_EPOCH_PEAK)

    def bound(self):
        """The error bound of one published figure: peak_error_bytes."""
        return self.u64(OFF_PEAK_SLACK) * self.u64(OFF_THREADS_MAX)

    def stacks(self):
        """Each sampled stack's (alloc_bytes, free_bytes) by its entry."""
        prof = self.u64(OFF_PROF_OFFSET)
        if prof == 0:
            return {}
        n = min(self.u32(OFF_STACKS_USED), self.u32(OFF_NSTACKS))
        out = {}
        for i in range(1, n):
            at = prof + i * SIZEOF_HL_STACK
            if self.u64(at + STACK_HASH) == 0:
                continue
            out[i] = (self.u64(at + STACK_ALLOC_BYTES), self.u64(at + STACK_FREE_BYTES))
        return out

    def python_frames(self, entry):
        """The Python frames of a stack, innermost first: "name (file:line)"."""
        prof = self.u64(OFF_PROF_OFFSET)
        pycodes = self.u64(OFF_PYCODE_OFFSET)
        used = min(self.u32(OFF_PYCODES_USED), self.u32(OFF_NPYCODES))
        at = prof + entry * SIZEOF_HL_STACK
        n = min(self.u32(at + STACK_NFRAMES), HL_STACK_FRAMES)
        out = []
        for k in range(n):
            f = self.u64(at + STACK_FRAMES + 8 * k)
            if not f & HL_PYFRAME_BIT:
                continue
            idx, line = (f >> 32) & HL_PYCODE_NONE, f & 0xFFFFFFFF
            if pycodes == 0 or idx >= used:
                out.append("?")
                continue
            code = pycodes + idx * SIZEOF_HL_PYCODE
            if self.u64(code + PYCODE_CODE) == 0:
                out.append("?")
                continue
            name = self._text(code + PYCODE_NAME, PYCODE_NAME_MAX)
            path = self._text(code + PYCODE_FILE, PYCODE_FILE_MAX)
            out.append(f"{name} ({os.path.basename(path)}:{line})")
        return out

    def _text(self, off, size):
        raw = ctypes.string_at(self.base + off, size)
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def find_region():
    """The region the shim maps in this process, or (None, why)."""
    pid = os.getpid()
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return None, f"cannot read /proc/self/maps ({e})"
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or HL_PATH_PREFIX not in parts[5] or "w" not in parts[1] or "s" not in parts[1]:
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if end - start < 1024 or int(parts[2], 16) != 0:
            continue
        r = Region(start)
        if r.u64(OFF_MAGIC) != HL_MAGIC or r.i64(OFF_PID) & 0xFFFFFFFF != pid:
            continue
        if r.u32(OFF_VERSION) != HL_VERSION:
            return None, (
                f"the shim's region is of layout version {r.u32(OFF_VERSION)}, this plugin reads {HL_VERSION}: "
                "use the heapline_pytest.py that came with this libheap.so; limits are not checked"
            )
        if r.u32(OFF_MODE) == HL_MODE_BYPASSED:
            return None, (
                f"this process calls another malloc ({r._text(OFF_BYPASSED_BY, HL_OBJECT_MAX)}): "
                "the shim counts nothing, so limits are not checked"
            )
        return r, ""
    return None, (
        "libheap.so is not loaded in this process (no heapline region in /proc/self/maps): "
        "limit_memory and limit_leaks are not checked; run pytest under heapctl run -- "
        "python3 -m pytest, or with LD_PRELOAD=/usr/lib/heapline/libheap.so"
    )


_KEY = pytest.StashKey[str]()
_state = {"region": None, "why": "", "unchecked": 0}


def pytest_configure(config):
    config.addinivalue_line("markers", "limit_memory(size): fail if the test's peak heap passes size (heapline)")
    config.addinivalue_line("markers", "limit_leaks(size): fail if more than size stays live after the test, after gc.collect() (heapline)")
    _state["region"], _state["why"] = find_region()


def _limits(item):
    out = {}
    for name in ("limit_memory", "limit_leaks"):
        m = item.get_closest_marker(name)
        if m is None:
            continue
        if len(m.args) != 1 or m.kwargs:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} takes one size, such as \"24 MB\"")
        try:
            out[name] = parse_size(m.args[0])
        except ValueError as e:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name}: {e}")
    return out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limits = _limits(item)
    r = _state["region"]
    if not limits or r is None:
        if limits:
            _state["unchecked"] += 1
        yield
        return
    gc.collect()
    before = r.stacks()
    # exact live first: reading it allocates (a copy of the slots), which
    # must not be the epoch's
    start = r.live()
    r.start_epoch()
    # the peak's start in the epoch's own terms, published_live: what a
    # publication has not yet added is within the bound at either end
    published = r.i64(OFF_PUBLISHED_LIVE)
    yield
    peak = max(r.epoch_peak(), published) - published
    if "limit_leaks" in limits:
        gc.collect()
    left = r.live() - start
    verdicts = []
    for name, limit in limits.items():
        if name == "limit_memory":
            # two published figures, each within the bound
            figure, bound, what = peak, 2 * r.bound(), "allocated at its peak"
        else:
            figure, bound, what = left, 0, "left live after it"
        if figure - bound > limit:
            verdicts.append((name, limit, figure, bound, what))
    # for --junitxml and other reports: the figures, judged or not
    if "limit_memory" in limits:
        item.user_properties.append(("heapline_peak_bytes", peak))
    if "limit_leaks" in limits:
        item.user_properties.append(("heapline_left_bytes", left))
    if verdicts:
        item.stash[_KEY] = _message(r, item, verdicts, before)


def _message(r, item, verdicts, before):
    lines = []
    for name, limit, figure, bound, what in verdicts:
        said = item.get_closest_marker(name).args[0]
        line = f"heapline: {item.name} {what} {size_text(figure)}, over its {name}({said!r}): {limit} B"
        if bound:
            line += f" (± {size_text(bound)}, judged in the test's favour: HEAPLINE_PEAK_BATCH=0 makes it exact)"
        lines.append(line)
    leaks = any(v[0] == "limit_leaks" for v in verdicts) and not any(v[0] == "limit_memory" for v in verdicts)
    after = r.stacks()
    # the plugin's own reads of the region (Region.live's copies) allocate
    # too, between the two snapshots: a sample of theirs is not the test's
    own = f" ({os.path.basename(__file__)}:"
    grown = []
    for entry, (a, f) in after.items():
        a0, f0 = before.get(entry, (0, 0))
        d = (a - f) - (a0 - f0) if leaks else a - a0
        if d > 0:
            frames = r.python_frames(entry)
            if not any(own in fr for fr in frames):
                grown.append((d, entry, frames))
    grown.sort(reverse=True)
    what = "left live" if leaks else "allocated"
    if not grown:
        lines.append(f"  no sampled stack {what} during the test (HEAPLINE_SAMPLE=0 samples none)")
    else:
        lines.append(f"  the Python frames that {what} most during the test (sampled, estimates; innermost first):")
        test = getattr(getattr(item, "obj", None), "__qualname__", item.name)
        for d, _, frames in grown[:5]:
            # down to the test's own frame: pytest's callers say nothing
            for k, f in enumerate(frames):
                if f.startswith(test + " ("):
                    frames = frames[: k + 1]
                    break
            where = " < ".join(frames[:4]) if frames else "(no Python frame: the interpreter's own, or frames not read)"
            lines.append(f"    {size_text(d):>28}  {where}")
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or _KEY not in item.stash:
        return
    msg = item.stash[_KEY]
    del item.stash[_KEY]
    if report.passed:
        report.outcome = "failed"
        report.longrepr = msg
    elif report.longrepr is not None:
        report.sections.append(("heapline", msg))


def pytest_terminal_summary(terminalreporter):
    if _state["unchecked"]:
        terminalreporter.write_line(f"heapline: {_state['why']}")
