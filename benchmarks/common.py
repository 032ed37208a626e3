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


def alternate(fns: dict[str, Callable[[], Any]], *, repeat: int) -> dict[str, list[float]]:
    """Time several tools alternately in the same session (fairer than one after the other)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def peak_rss_mb(code: str) -> float:
    """Peak RSS (MB) above the idle interpreter with proxydiag imported, of ``code`` run in a
    fresh subprocess (``code`` may use the names ``proxydiag`` and ``Path``)."""
    import json
    import subprocess
    import sys

    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec, so a large parent
    # (the benchmark driver) would hide the child's own peak
    prog = (
        "import json, proxydiag, polars, numpy\n"
        "from pathlib import Path\n"
        "def _hwm():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1])\n"
        "    return 0\n"
        "base = _hwm()\n"
        f"{code}\n"
        "peak = _hwm()\n"
        "print(json.dumps({'base': base, 'peak': peak}))\n"
    )
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True)
    data = json.loads(res.stdout.strip().splitlines()[-1])
    return (data["peak"] - data["base"]) / 1024.0
