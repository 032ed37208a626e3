"""CSV, JSONL and Parquet: proxydiag's readers against polars reading the same file alone.

1,000,000 points (50 metrics × 20,000 steps; smoke: 5 × 2,000) with a sprinkle of NaN/±inf;
seven of the keys are veRL's (``actor/grad_norm``, ...), which aliases rename.
Rows per format: ``polars alone`` (``read_csv`` / ``read_ndjson`` / ``read_parquet``),
``proxydiag`` end to end (``read_run``: reader + validation + restart rules + aliases into the
canonical frame), the reader's raw frame only, and ``canonical frame floor``: polars' read
plus the least work any reader must do to hand over the canonical frame (polars' own unpivot
of a wide file, whose key column also serves as the metric column; a stable sort by key for a
long one; no checks, no aliases). Target: proxydiag within 1.5× of polars; the floor row shows
how close that can be.
The JSONL file is veRL's file-logger shape with ``null`` for non-finite values (the token path).
``late jsonl`` is the same file with two validation keys every 100 steps from step 5,000 on, as
veRL logs them: polars' default read infers its schema from the first 100 records and drops
them, so its row ``polars, every record's schema`` is the fair floor.
The same points are also written long (``step, key, value``: one row per point, as a melted
pandas frame or a metrics table exported from a database is), as CSV and Parquet: there polars
alone must build the key strings too, and the floor row is polars' read plus the grouping by
metric (a stable sort on the key) and the constant columns.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import Context, Row, alternate, peak_rss_mb
from proxydiag.ingest import read_run

#: veRL keys that proxydiag's aliases map to canonical names (grad_norm, entropy, ...): a real
#: run has some, and they make the reader build a metric column apart from the key column
VERL_KEYS = (
    "actor/grad_norm",
    "actor/entropy",
    "actor/pg_loss",
    "actor/ppo_kl",
    "critic/score/mean",
    "response_length/mean",
    "actor/pg_clipfrac",
)


#: more rounds than the other modules: these reads take 10-100 ms and their medians move with
#: the allocator's state (fresh pages faulted in on some reads, not others)
_ROUNDS = 4


def _table(n_metrics: int, n_steps: int) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(n_steps, n_metrics))
    values[rng.random(values.shape) < 1e-4] = np.nan
    values[rng.random(values.shape) < 1e-4] = np.inf
    names = [*VERL_KEYS, *(f"actor/metric_{i:02d}" for i in range(n_metrics))][:n_metrics]
    cols: dict[str, np.ndarray] = {"step": np.arange(n_steps)}
    cols.update({name: values[:, i] for i, name in enumerate(names)})
    return pl.DataFrame(cols)


def inputs(ctx: Context) -> dict[str, Path]:
    n_metrics, n_steps = ctx.size(50, 5), ctx.size(20_000, 2_000)
    folder = ctx.cache / f"tabular_{n_metrics}x{n_steps}_verl"
    paths = {
        "csv": folder / "m.csv",
        "jsonl": folder / "m.jsonl",
        "parquet": folder / "m.parquet",
        "long csv": folder / "long.csv",
        "long parquet": folder / "long.parquet",
        "late jsonl": folder / "late.jsonl",
    }
    if all(p.exists() for p in paths.values()):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    table = _table(n_metrics, n_steps)
    table.write_csv(paths["csv"])
    table.write_parquet(paths["parquet"])
    long = table.unpivot(index="step", variable_name="key", value_name="value")
    long.write_csv(paths["long csv"])
    long.write_parquet(paths["long parquet"])
    buf, late = io.StringIO(), io.StringIO()
    for row in table.iter_rows(named=True):
        step = row.pop("step")
        data = {k: (v if np.isfinite(v) else None) for k, v in row.items()}
        buf.write(json.dumps({"step": step, "data": data}) + "\n")
        if step >= n_steps // 4 and step % 100 == 0:  # validation keys, logged every 100 steps
            data.update({"val-core/acc/mean@1": 0.5 + step * 1e-6, "timing_s/testing": 12.5})
        late.write(json.dumps({"step": step, "data": data}) + "\n")
    paths["jsonl"].write_text(buf.getvalue())
    paths["late jsonl"].write_text(late.getvalue())
    return paths


def _polars(fmt: str, path: Path) -> pl.DataFrame:
    """The floor: polars reading the file into its wide frame (no path globbing, as ours)."""
    if fmt.endswith("csv"):
        return pl.read_csv(path, glob=False)
    if fmt.endswith("jsonl"):
        return pl.read_ndjson(path)
    return pl.read_parquet(path, glob=False)


def _floor(fmt: str, path: Path) -> pl.DataFrame:
    """polars' read, then the canonical frame built the cheapest way (no checks)."""
    if fmt.startswith("long"):
        return (
            _polars(fmt, path)
            .sort("key", maintain_order=True)
            .select(
                pl.lit("run").alias("run"),
                "step",
                pl.col("key").alias("metric"),
                "key",
                "value",
                pl.lit(None, dtype=pl.Float64).alias("wall_time"),
            )
        )
    wide = (
        pl.read_ndjson(path, infer_schema_length=None)
        if fmt == "late jsonl"
        else _polars(fmt, path)
    )
    if fmt.endswith("jsonl"):
        wide = wide.unnest("data")
    return wide.unpivot(index="step", variable_name="key").select(
        pl.lit("run").alias("run"),
        "step",
        pl.col("key").alias("metric"),
        "key",
        pl.col("value").cast(pl.Float64),
        pl.lit(None, dtype=pl.Float64).alias("wall_time"),  # one value, as proxydiag's frame has
    )


def _raw_only(fmt: str, path: Path) -> object:
    from proxydiag.ingest.tabular import csv, jsonl, parquet

    if fmt.endswith("csv"):
        return csv.read_table(path)
    if fmt.endswith("jsonl"):
        return jsonl.read_table(path)
    return parquet.read_table(path)


def run(ctx: Context) -> list[Row]:
    paths = inputs(ctx)
    small = inputs(Context(smoke=True, repeat=1, cache=ctx.cache))  # warms the reader up
    points = ctx.size(50, 5) * ctx.size(20_000, 2_000)
    rows = []
    for fmt, path in paths.items():
        tools: dict[str, Callable[[], object]] = {
            "proxydiag": partial(read_run, path),
            "proxydiag (raw frame only)": partial(_raw_only, fmt, path),
            "polars alone": partial(_polars, fmt, path),
            "canonical frame floor": partial(_floor, fmt, path),
        }
        if fmt == "late jsonl":  # polars' default drops the late keys
            tools["polars, every record's schema"] = partial(
                pl.read_ndjson, path, infer_schema_length=None
            )
        times = alternate(
            tools,
            repeat=ctx.repeat * _ROUNDS,
        )
        group = f"{fmt} {points:,} points ({path.stat().st_size / 1e6:.0f} MB)"
        peak = peak_rss_mb(
            f"run = proxydiag.read_run(Path({str(path)!r}))",
            warm=f"proxydiag.read_run(Path({str(small[fmt])!r}))",
        )
        for tool, seconds in times.items():
            mine = tool == "proxydiag"
            rows.append(
                Row(
                    group,
                    tool,
                    seconds,
                    points=points,
                    peak_mb=peak.mb if mine else None,
                    note=peak.note if mine else "",
                )
            )
    return rows
