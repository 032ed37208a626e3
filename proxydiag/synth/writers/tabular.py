"""CSV (wide: a ``step`` column and one column per key) and JSONL (veRL's file logger).

CSV: an absent value is an empty cell; NaN and ±inf are written as ``NaN``, ``inf``,
``-inf``. JSONL: one ``{"step": N, "data": {key: value}}`` line per logged step, as veRL's
``file`` backend writes it with orjson, which turns NaN and ±inf into ``null`` — so a JSONL
run keeps *that* a value was non-finite (read back as NaN) but not its sign; the label of
every fault stays derivable (a non-finite grad norm is non-finite either way).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from proxydiag.synth.sim import SynthRun
from proxydiag.synth.view import logged_rows, superseded_rows


def _wide(sr: SynthRun, *, naming: str, fmt: str, log_interval: int) -> pl.DataFrame:
    rows = logged_rows(sr, naming=naming, fmt=fmt, log_interval=log_interval)
    order = rows["key"].unique(maintain_order=True).to_list()
    wide = _pivot(rows, order)
    old = superseded_rows(sr, rows, naming=naming, fmt=fmt, log_interval=log_interval)
    if old is None or old.is_empty() or sr.scenario.fault is None:
        return wide
    # a resumed run: the rows it logged past its checkpoint before the crash, then the
    # resumed rows from the checkpoint on (the steps go back where it resumed)
    resume = sr.scenario.fault.onset_step - 1
    step = pl.col("step")
    return pl.concat(
        [wide.filter(step <= resume), _pivot(old, order), wide.filter(step > resume)],
        how="diagonal",
    ).select("step", *order)


def _pivot(rows: pl.DataFrame, order: list[str]) -> pl.DataFrame:
    wide = rows.pivot(on="key", index="step", values="value", aggregate_function="first")
    return wide.sort("step").select("step", *[k for k in order if k in wide.columns])


def write_csv(run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path:
    """Write ``metrics.csv`` in ``run_dir``."""
    path = run_dir / "metrics.csv"
    wide = _wide(sr, naming=naming, fmt="csv", log_interval=log_interval)
    wide.write_csv(path, float_precision=None, null_value="")
    return path


def write_jsonl(run_dir: Path, sr: SynthRun, *, naming: str, log_interval: int) -> Path:
    """Write ``metrics.jsonl`` in ``run_dir`` (veRL file-logger records)."""
    path = run_dir / "metrics.jsonl"
    wide = _wide(sr, naming=naming, fmt="jsonl", log_interval=log_interval)
    keys = [c for c in wide.columns if c != "step"]
    lines = []
    for row in wide.iter_rows():
        data = {
            k: (v if math.isfinite(v) else None)
            for k, v in zip(keys, row[1:], strict=True)
            if v is not None
        }
        lines.append(json.dumps({"step": row[0], "data": data}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
