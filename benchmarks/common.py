"""Shared benchmark machinery: timing with medians, peak memory in a subprocess, result rows.

Each ``benchmarks/bench_<area>.py`` exposes ``run(ctx: Context) -> list[Row]``. Rows of one
``group`` are compared with the row whose ``tool`` is ``"proxydiag"`` (ratios printed by
``benchmarks/run.py``). Inputs are generated (cached under ``benchmarks/.cache``).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CACHE = Path(__file__).with_name(".cache")


@dataclass
class Context:
    smoke: bool
    repeat: int
    cache: Path = CACHE

    def size(self, full: int, smoke: int) -> int:
        return smoke if self.smoke else full


@dataclass
class Row:
    group: str  # what is measured, e.g. "tensorboard 1M points (simple_value)"
    tool: str  # "proxydiag", "tbparse", "EventFileLoader", ...
    seconds: list[float]
    points: int = 0
    peak_mb: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def points_per_s(self) -> float:
        return self.points / self.median if self.median > 0 else float("inf")


def measure(fn: Callable[[], Any], *, repeat: int, warmup: int = 1) -> list[float]:
    """Wall-clock seconds of ``repeat`` calls of ``fn`` (after ``warmup`` untimed calls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def alternate(
    fns: dict[str, Callable[[], Any]],
    *,
    repeat: int,
    check: Callable[[str, Any], None] | None = None,
    cpu: dict[str, float] | None = None,
) -> dict[str, list[float]]:
    """Time several tools alternately in the same run (fairer than one after the other).

    Each tool runs once first to warm up; ``check(name, result)`` may verify that result (no
    extra run). ``cpu``, when given, receives each tool's median CPU seconds per timed call
    (all threads: a rate that holds on a machine others share).
    """
    for name, fn in fns.items():
        result = fn()
        if check is not None:
            check(name, result)
    times: dict[str, list[float]] = {name: [] for name in fns}
    cpu_times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
            cpu_times[name].append(time.process_time() - c0)
    if cpu is not None:
        cpu.update({name: max(statistics.median(v), 1e-9) for name, v in cpu_times.items()})
    return times


_PEAK = """
import json, re
from pathlib import Path
import numpy, polars, proxydiag
{warm}
def status(field):
    return int(re.search(field + r":\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark after the warm-up
base = status("VmRSS")
{code}
peak = status("VmHWM")
frame = globals().get("run")
print(json.dumps({{"base": base, "peak": peak,
                  "frame": frame.frame.estimated_size() if frame is not None else None,
                  "points": frame.frame.height if frame is not None else None,
                  "lines": frame.attrs.get("console_lines") if frame is not None else None}}))
"""


@dataclass(frozen=True)
class Peak:
    """Peak RSS above the warm process, and the in-memory size of the run read (if any)."""

    mb: float
    frame_mb: float | None
    points: int | None = None  # the run's points
    lines: int | None = None  # a console log's lines read

    @property
    def note(self) -> str:
        if not self.frame_mb:
            return ""
        return f"peak = {self.mb / self.frame_mb:.1f}x the run's frame ({self.frame_mb:.0f} MB)"


def peak_rss_mb(code: str, *, warm: str = "") -> Peak:
    """Peak RSS (MB) of ``code`` run in a fresh subprocess, above the process right before it:
    imports done (numpy, polars, proxydiag) and ``warm`` run (reading a small file of the same
    format loads what the reader needs: compiled code, thread pools), high-water mark reset.
    ``code`` may use ``proxydiag`` and ``Path``; a ``run`` it leaves is measured too. Linux.

    Not ``ru_maxrss``: Linux carries it over fork+exec, so a large parent (the benchmark
    driver) would hide the child's own peak.
    """
    import json
    import subprocess
    import sys

    prog = _PEAK.format(code=code, warm=warm)
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True)
    data = json.loads(res.stdout.strip().splitlines()[-1])
    frame = data["frame"]
    return Peak(
        (data["peak"] - data["base"]) / 1024.0,
        frame / 2**20 if frame else None,
        data["points"],
        data["lines"],
    )


def store_job(script: str, src: Path, *args: str) -> dict[str, Any]:
    """The JSON last line that ``script`` prints, run in a fresh process from the repository's
    root as ``script SRC DST ARGS...``; DST is a store folder made for it and removed after."""
    import json
    import shutil
    import subprocess
    import sys
    import tempfile

    dst = Path(tempfile.mkdtemp(prefix="proxydiag-bench-store-"))
    try:
        res = subprocess.run(
            [sys.executable, "-c", script, str(src), str(dst), *args],
            cwd=Path(__file__).resolve().parents[1],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        shutil.rmtree(dst, ignore_errors=True)
    result: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return result
