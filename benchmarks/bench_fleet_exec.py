"""Fleet executors: 1,000 runs ingested + diagnosed with --workers 1, --workers 2 and --ray.

1,000 runs × 20 metrics × 10,000 steps (2×10^8 points; smoke: 6 runs × 20 × 200) as wide
Parquet files (cached, as ``bench_fleet``), ingested into a fresh store with
:func:`proxydiag.fleet.ingest.ingest_sources` and then diagnosed with
:func:`proxydiag.fleet.analyse.diagnose_all`, each executor in a fresh driver process. Per
executor: wall time, the speed-up against one worker, the driver's peak RSS (above its idle
imports; Ray's object store and workers are other processes), and the driver's own time in
the store (Parquet write + catalog, serial by design: what no cluster divides). Ray's
overhead per task is timed on 2,000 trivial tasks once its workers are up, as is the local
pool's; Ray's start-up (with its workers') is reported on its own. The numbers feed
docs/fleet.md's projection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.bench_fleet import fleet_inputs
from benchmarks.common import Context, Row, store_job

EXECUTORS = (("proxydiag", "--workers 1"), ("--workers 2", "--workers 2"), ("--ray", "--ray"))

JOB = """
import json, os, sys, time
from pathlib import Path
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.fleet.analyse import diagnose_all
from proxydiag.fleet import make_executor
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import ReadSpec
from proxydiag.ingest import ReadContext, discover
from proxydiag.store import RunStore

def hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

src, dst, flag, n_trivial = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
base = hwm_kb()
in_store = [0.0]
for name in ("put", "put_diagnosis"):  # the driver's own, serial, time in the store
    method = getattr(RunStore, name)
    def timed(self, *a, _m=method, **k):
        t = time.perf_counter()
        try:
            return _m(self, *a, **k)
        finally:
            in_store[0] += time.perf_counter() - t
    setattr(RunStore, name, timed)
t0 = time.perf_counter()
if flag == "--ray":
    import ray
    ray.init(include_dashboard=False, log_to_driver=False)
    pool = make_executor(ray=True)
else:
    pool = make_executor(workers=int(flag.split()[1]))
if pool.name != "serial":  # every worker started before the trivial tasks are timed
    list(pool.map(abs, range(4 * (os.cpu_count() or 1))))
t_start = time.perf_counter() - t0
t0 = time.perf_counter()
trivial = sum(o.value for o in pool.map(abs, range(n_trivial))) if pool.name != "serial" else 0
t_trivial = time.perf_counter() - t0
store = RunStore(dst)
work = [(reader.__name__, str(item)) for reader, item in discover(src)]
t0 = time.perf_counter()
got = ingest_sources(work, store=store, executor=pool, spec=ReadSpec(ReadContext()),
                     skip_unchanged=False)
t_ingest = time.perf_counter() - t0
t0 = time.perf_counter()
diagnosed = [r for r in diagnose_all(store, executor=pool, config=DiagnoseConfig()) if not r.reason]
t_diagnose = time.perf_counter() - t0
print(json.dumps({"start_s": t_start, "trivial_s": t_trivial, "ingest_s": t_ingest,
                  "diagnose_s": t_diagnose, "runs": len(got.stored), "failed": len(got.failures),
                  "diagnosed": len(diagnosed), "points": int(store.runs()["n_points"].sum()),
                  "in_store_s": in_store[0], "peak_mb": (hwm_kb() - base) / 1024,
                  "cpus": os.cpu_count()}))
"""


def _job(src: Path, flag: str, n_trivial: int) -> dict[str, Any]:
    return store_job(JOB, src, flag, str(n_trivial))


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def run(ctx: Context) -> list[Row]:
    n_runs, n_metrics, n_steps = ctx.size(1000, 6), 20, ctx.size(10_000, 200)
    n_trivial = ctx.size(2000, 50)
    src = fleet_inputs(ctx, n_runs=n_runs, n_metrics=n_metrics, n_steps=n_steps)
    group = f"fleet {n_runs:,} runs × {n_metrics} × {n_steps:,} steps: ingest + diagnose"
    rows: list[Row] = []
    for tool, flag in EXECUTORS:
        if flag == "--ray" and not _ray_available():
            continue  # the row is missing: proxydiag[ray] is not installed
        got = _job(src, flag, n_trivial)
        seconds = float(got["ingest_s"]) + float(got["diagnose_s"])
        per_task = (
            f", {1e3 * float(got['trivial_s']) / n_trivial:.2f} ms/trivial task"
            if flag != "--workers 1"
            else ""
        )
        start = f", start {float(got['start_s']):.1f} s (not counted)" if flag == "--ray" else ""
        rows.append(
            Row(
                group,
                tool,
                [seconds],
                points=int(got["points"]),
                peak_mb=float(got["peak_mb"]),
                note=f"ingest {float(got['ingest_s']):.1f} s + diagnose "
                f"{float(got['diagnose_s']):.1f} s; driver in store "
                f"{float(got['in_store_s']):.1f} s{per_task}{start}; "
                f"{got['runs']} stored, {got['failed']} failed",
                extra=got,
            )
        )
    return rows
