"""A fleet on one machine: ingest + diagnose many runs into one store; store scaling cases.

* fleet: 500 runs × 20 metrics × 10,000 steps (10^8 points; smoke: 5 runs × 20 × 200) written
  as wide Parquet files (cached), then ``proxydiag ingest`` semantics run by run — read, store
  atomically, ``proxydiag.diagnose`` (when importable; the row says if it was left out) and the
  diagnosis stored. Time, peak RSS (of a fresh process, above its idle imports) and the store's
  size on disk. Target: ≤ 5 minutes and ≤ 4 GB.
* 1,000 runs in one store (smoke: 20): put small runs, then list them (``runs()``) and scan
  every Parquet file (``scan().collect()``).
* 10,000 distinct metric keys in one run (smoke: 500), long CSV with 10 steps per key:
  ``read_run`` + ``put``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.common import Context, Row, store_job

NAMES = [
    "actor/pg_loss",
    "actor/grad_norm",
    "actor/entropy",
    "actor/ppo_kl",
    "actor/pg_clipfrac",
    "actor/lr",
    "critic/score/mean",
    "response_length/mean",
    "training/rollout_probs_diff_mean",
    "training/rollout_probs_diff_max",
    "rollout_corr/k3_kl",
    "perf/throughput",
    "perf/time_per_step",
]


def fleet_inputs(ctx: Context, *, n_runs: int, n_metrics: int, n_steps: int) -> Path:
    folder = ctx.cache / f"fleet_{n_runs}x{n_metrics}x{n_steps}"
    done = folder / ".complete"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    names = (NAMES + [f"extra/metric_{i}" for i in range(n_metrics)])[:n_metrics]
    for r in range(n_runs):
        rng = np.random.default_rng(r)
        t = np.arange(n_steps)
        cols: dict[str, object] = {"step": t}
        for i, name in enumerate(names):
            level = 1 + 0.5 * np.exp(-t / (n_steps / (i + 2)))
            cols[name] = level * (1 + 0.05 * rng.standard_normal(n_steps))
        pl.DataFrame(cols).write_parquet(folder / f"run{r:04d}.parquet")
    done.touch()
    return folder


JOB = """
import json, sys, time
from pathlib import Path
import polars as pl
import proxydiag
from proxydiag.ingest import discover, ReadContext
from proxydiag.store import RunStore
try:
    from proxydiag.diagnose.api import diagnose
except ImportError:
    diagnose = None
src, dst, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
def hwm_kb():
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork+exec from the (large) driver
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
base = hwm_kb()
store = RunStore(dst)
ctx = ReadContext()
t0 = time.perf_counter()
n = 0
if mode == "fleet":
    for reader, item in discover(src):
        for run in reader.read(item, ctx):
            store.put(run)
            n += run.frame.height
            if diagnose is not None:
                store.put_diagnosis(diagnose(run))
elif mode == "many":
    from proxydiag.run.build import build_run
    count = int(sys.argv[4])
    for i in range(count):
        raw = pl.DataFrame({"step": list(range(100)), "key": ["loss"] * 100,
                            "value": [i + s / 100 for s in range(100)]})
        store.put(build_run(raw, name=f"r{i}", source=f"/fleet/r{i}", fmt="bench"))
        n += 100
t_ingest = time.perf_counter() - t0
t1 = time.perf_counter()
listed = store.runs().height
t_list = time.perf_counter() - t1
t2 = time.perf_counter()
scanned = store.scan().select(pl.len()).collect().item()
t_scan = time.perf_counter() - t2
if mode == "keys":
    from proxydiag.ingest import read_run
    t0 = time.perf_counter()
    run = read_run(src)
    store.put(run)
    n, listed, t_ingest = run.frame.height, run.frame["key"].n_unique(), time.perf_counter() - t0
peak = hwm_kb()
print(json.dumps({"seconds": t_ingest, "points": n, "listed": listed, "list_s": t_list,
                  "scan_s": t_scan, "scanned": scanned, "peak_mb": (peak - base) / 1024,
                  "diagnose": diagnose is not None, "size": store.size_bytes()}))
"""


def _job(src: Path, mode: str, *extra: str) -> dict[str, Any]:
    return store_job(JOB, src, mode, *extra)


def _keys_input(ctx: Context, n_keys: int) -> Path:
    path = ctx.cache / f"keys_{n_keys}.csv"
    if not path.exists():
        steps = np.tile(np.arange(10), n_keys)
        keys = np.repeat(
            [f"layer_{i // 100}/expert_{i % 100}/load <{i}>" for i in range(n_keys)], 10
        )
        pl.DataFrame({"step": steps, "key": keys, "value": np.sin(steps + 0.1)}).write_csv(path)
    return path


def run(ctx: Context) -> list[Row]:
    n_runs, n_metrics, n_steps = ctx.size(500, 5), 20, ctx.size(10_000, 200)
    src = fleet_inputs(ctx, n_runs=n_runs, n_metrics=n_metrics, n_steps=n_steps)
    fleet = _job(src, "fleet")
    what = "ingest + diagnose" if fleet["diagnose"] else "ingest only (diagnose not importable)"
    rows = [
        Row(
            f"fleet {n_runs} runs × {n_metrics} metrics × {n_steps:,} steps: {what}",
            "proxydiag",
            [float(fleet["seconds"])],
            points=int(fleet["points"]),
            peak_mb=float(fleet["peak_mb"]),
            note=f"store {int(fleet['size']) / 1e6:,.0f} MB on disk",
        )
    ]
    count = ctx.size(1000, 20)
    many = _job(src, "many", str(count))
    rows.append(
        Row(
            f"{count:,} runs in one store: put each",
            "proxydiag",
            [float(many["seconds"])],
            points=int(many["points"]),
            peak_mb=float(many["peak_mb"]),
            note=f"runs() {float(many['list_s']):.2f} s, "
            f"scan() of all {float(many['scan_s']):.2f} s, "
            f"store {int(many['size']) / 1e6:,.1f} MB",
        )
    )
    n_keys = ctx.size(10_000, 500)
    keys = _job(_keys_input(ctx, n_keys), "keys")
    rows.append(
        Row(
            f"{n_keys:,} distinct metric keys in one run: read + put",
            "proxydiag",
            [float(keys["seconds"])],
            points=int(keys["points"]),
            peak_mb=float(keys["peak_mb"]),
            note=f"{keys['listed']} keys stored",
        )
    )
    return rows
