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
* the fleet driver (:func:`driver_rows`): 1,000 small JSONL runs (200 steps × 6 metrics;
  smoke: 20) ingested with batched commits on ``--workers 1``, ``--workers 2`` and ``--ray``,
  side by side with per-run commits (the ingest before batches: runs back as Arrow, one
  ``put`` each) on the same executors and the plain floor (one process: polars read, one
  Parquet file per run, the catalog rows at once); the driver's own CPU time and peak RSS
  at 1,000 and 10,000 runs (smoke: 40); and the start-up of ``runs --store`` and
  ``diagnose --store --all`` on a store of 10,000 runs (time to the first line).
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
    return rows + driver_rows(ctx)


# -- the fleet's driver: batched commits against per-run commits and the plain floor --------

SMALL_METRICS = NAMES[:6]

DRIVER_JOB = """
import json, os, resource, sys, time
from functools import partial
from pathlib import Path
import polars as pl
from proxydiag.fleet import ingest as fleet_ingest
from proxydiag.fleet import make_executor
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import ReadSpec, SourceItem, read_source
from proxydiag.ingest import ReadContext, discover
from proxydiag.store import RunStore

def hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0

def cpu_s():
    use = resource.getrusage(resource.RUSAGE_SELF)  # this process only, not its workers
    return use.ru_utime + use.ru_stime

src, dst, path, flag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
limit = int(sys.argv[5])
files = sorted(src.glob("*.jsonl"))[:limit]
base = hwm_kb()
if path == "floor":  # one process: polars read, one Parquet per run, catalog rows at once
    import duckdb
    (dst / "runs").mkdir(parents=True)
    t0, c0 = time.perf_counter(), cpu_s()
    rows = []
    for f in files:
        frame = pl.read_ndjson(f)
        frame.write_parquet(dst / "runs" / (f.stem + ".parquet"), compression="zstd")
        rows.append((f.stem, str(f), frame.height * (frame.width - 1), frame["step"].min(),
                     frame["step"].max()))
    catalog = pl.DataFrame(rows, schema=["run", "source", "n_points", "first_step",
                                         "last_step"], orient="row")
    with duckdb.connect(str(dst / "catalog.duckdb")) as con:
        con.execute("CREATE TABLE runs AS SELECT * FROM catalog")
    print(json.dumps({"seconds": time.perf_counter() - t0, "driver_cpu_s": cpu_s() - c0,
                      "in_store_s": 0.0, "runs": len(rows), "peak_mb": (hwm_kb() - base) / 1024,
                      "start_s": 0.0}))
    sys.exit(0)
t0 = time.perf_counter()
if flag == "--ray":
    import ray
    ray.init(include_dashboard=False, log_to_driver=False)
    pool = make_executor(ray=True)
else:
    pool = make_executor(workers=int(flag.split()[1]))
if pool.name != "serial":  # every worker started (and proxydiag imported) before timing
    list(pool.map(abs, range(4 * (os.cpu_count() or 1))))
    list(pool.map(partial(read_source, ReadSpec(ReadContext())),
                  [SourceItem("jsonl", str(f)) for f in files[:8]]))
start_s = time.perf_counter() - t0
store = RunStore(dst)
in_store = [0.0]
def timed(owner, name):  # the driver's own, serial, time in the store
    method = getattr(owner, name)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return method(*a, **k)
        finally:
            in_store[0] += time.perf_counter() - t
    setattr(owner, name, wrapper)
work = [("jsonl", str(f)) for f in files]
spec = ReadSpec(ReadContext())
if path == "batched":
    timed(RunStore, "commit")
    timed(fleet_ingest, "stage")  # runs a worker sent back, staged by the driver
    t0, c0 = time.perf_counter(), cpu_s()
    got = ingest_sources(work, store=store, executor=pool, spec=spec, skip_unchanged=True)
    stored = len(got.stored)
else:  # per run: what `ingest` did before batches (runs back as Arrow, one put each)
    timed(RunStore, "put")
    t0, c0 = time.perf_counter(), cpu_s()
    stored = 0
    for outcome in pool.map(partial(read_source, spec), [SourceItem(r, s) for r, s in work]):
        for blob in outcome.value.runs:
            store.put(blob.run(), source_key=outcome.item.source, source_hash=outcome.value.digest)
            stored += 1
seconds, driver_cpu = time.perf_counter() - t0, cpu_s() - c0
print(json.dumps({"seconds": seconds, "driver_cpu_s": driver_cpu, "in_store_s": in_store[0],
                  "runs": stored, "peak_mb": (hwm_kb() - base) / 1024, "start_s": start_s}))
"""

START_JOB = """
import json, subprocess, sys, time
from pathlib import Path
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
# the catalog of a store of len(files) runs, committed in batches by one ingest
from proxydiag.fleet import make_executor
from proxydiag.fleet.ingest import ingest_sources
from proxydiag.fleet.tasks import ReadSpec
from proxydiag.ingest import ReadContext
from proxydiag.store import RunStore
files = sorted(src.glob("*.jsonl"))
pool = make_executor(workers=2)
got = ingest_sources([("jsonl", str(f)) for f in files], store=RunStore(dst), executor=pool,
                     spec=ReadSpec(ReadContext()), skip_unchanged=True)
def first_line(args):
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "proxydiag", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    first = time.perf_counter() - t0
    proc.kill()
    proc.communicate()
    return first, bool(line.strip())
def whole(args):
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "proxydiag", *args], capture_output=True,
                         text=True, check=True).stdout
    return time.perf_counter() - t0, len(out.splitlines())
runs_first, _ = first_line(["runs", "--store", str(dst), "--format", "json"])
runs_all, listed = whole(["runs", "--store", str(dst), "--format", "json"])
diag_first, said = first_line(["diagnose", "--store", str(dst), "--all", "--format", "json"])
help_s, _ = whole(["--help"])
print(json.dumps({"runs": len(got.stored), "runs_first_s": runs_first, "runs_all_s": runs_all,
                  "listed": listed, "diagnose_first_s": diag_first, "diagnosed": said,
                  "version_s": help_s}))
"""


def small_inputs(ctx: Context, n_runs: int, n_steps: int = 200) -> Path:
    """``n_runs`` JSONL runs of ``n_steps`` records × 6 metrics (cached)."""
    folder = ctx.cache / f"small_{n_runs}x6x{n_steps}"
    done = folder / ".complete"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    t = np.arange(n_steps)
    for r in range(n_runs):
        rng = np.random.default_rng(r)
        cols: dict[str, object] = {"step": t}
        for i, name in enumerate(SMALL_METRICS):
            cols[name] = (1 + 0.5 * np.exp(-t / (n_steps / (i + 2)))) * (
                1 + 0.05 * rng.standard_normal(n_steps)
            )
        pl.DataFrame(cols).write_ndjson(folder / f"run{r:05d}.jsonl")
    done.touch()
    return folder


def _ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def driver_rows(ctx: Context) -> list[Row]:
    """Small runs (200 steps × 6 metrics): end to end at 1,000 runs (floor, per-run commits,
    batched commits on each executor) and the driver's cost at 1,000 and 10,000 runs."""
    small, large = ctx.size(1000, 20), ctx.size(10_000, 40)
    src = small_inputs(ctx, large)
    rows: list[Row] = []
    group = f"fleet ingest {small:,} small runs (200 steps × 6 metrics, JSONL)"
    cases = [
        ("plain floor (polars read, Parquet per run, catalog at once)", "floor", "-"),
        ("proxydiag", "batched", "--workers 2"),
        ("per-run commits --workers 2 (before)", "perrun", "--workers 2"),
        ("batched --workers 1", "batched", "--workers 1"),
        ("per-run commits --workers 1 (before)", "perrun", "--workers 1"),
    ]
    if _ray_available():
        cases += [
            ("batched --ray", "batched", "--ray"),
            ("per-run commits --ray (before)", "perrun", "--ray"),
        ]
    for tool, path, flag in cases:
        got = store_job(DRIVER_JOB, src, path, flag, str(small))
        rows.append(_driver_row(group, tool, got, small))
    group = "fleet driver: batched commits, --workers 2, 200 steps × 6 metrics per run"
    for count in (small, large):
        got = store_job(DRIVER_JOB, src, "batched", "--workers 2", str(count))
        rows.append(_driver_row(f"{group}, {count:,} runs", "proxydiag", got, count))
    got = store_job(START_JOB, src)
    rows.append(
        Row(
            f"start-up on a store of {int(got['runs']):,} runs",
            "proxydiag",
            [float(got["runs_first_s"])],
            note=f"`runs --store -f json`: first line {float(got['runs_first_s']):.2f} s, "
            f"all {int(got['listed']):,} lines {float(got['runs_all_s']):.2f} s; "
            f"`diagnose --store --all -f json`: first line "
            f"{float(got['diagnose_first_s']):.2f} s; `--help` "
            f"{float(got['version_s']):.2f} s (interpreter + CLI import)",
            extra=got,
        )
    )
    return rows


def _driver_row(group: str, tool: str, got: dict[str, Any], count: int) -> Row:
    per_run = 1e3 * float(got["driver_cpu_s"]) / max(count, 1)
    start = f", start-up {float(got['start_s']):.1f} s not counted" if got["start_s"] else ""
    return Row(
        group,
        tool,
        [float(got["seconds"])],
        points=count,
        peak_mb=float(got["peak_mb"]),
        note=f"runs/s in points/s column; {1e3 * float(got['seconds']) / count:.1f} ms/run "
        f"end to end; driver CPU {per_run:.1f} ms/run, in the store "
        f"{1e3 * float(got['in_store_s']) / count:.1f} ms/run; {got['runs']} stored{start}",
        extra=got,
    )
