"""The canonical long frame: the only currency between proxydiag's stages.

========== ======= ==========================================================
column     dtype   meaning
========== ======= ==========================================================
run        Utf8    stable run id (source + name)
step       Int64   the source's step axis (see ``Run.attrs["step_kind"]``)
metric     Utf8    canonical metric name, or the raw key when unmapped
key        Utf8    the key exactly as logged
value      Float64 NaN, +inf and -inf are kept: they are the signal
wall_time  Float64 seconds since the epoch, null where the source has none
========== ======= ==========================================================

A value that was never logged is *no row*; only a logged NaN is NaN.
Readers produce a *raw* frame (``step, key, value, wall_time`` in file order; ``key`` is
``Utf8``, an ``Enum`` when the reader numbers its keys (see
:func:`proxydiag.run.keys.enum_keys`), or a ``Categorical`` when it keeps many rows
before building the run (the console reader)); :func:`proxydiag.run.build.build_run`
turns it into the canonical frame.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from proxydiag.errors import FrameError

SCHEMA: dict[str, pl.DataType] = {
    "run": pl.Utf8(),
    "step": pl.Int64(),
    "metric": pl.Utf8(),
    "key": pl.Utf8(),
    "value": pl.Float64(),
    "wall_time": pl.Float64(),
}

RAW_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64(),
    "key": pl.Utf8(),
    "value": pl.Float64(),
    "wall_time": pl.Float64(),
}


def empty() -> pl.DataFrame:
    """An empty canonical frame."""
    return pl.DataFrame(schema=SCHEMA)


def empty_raw() -> pl.DataFrame:
    """An empty raw frame, as readers produce."""
    return pl.DataFrame(schema=RAW_SCHEMA)


def raw(steps: Any, keys: Any, values: Any, wall_times: Any = None) -> pl.DataFrame:
    """Build a raw frame from columns (lists, numpy arrays or polars Series).

    >>> raw([1, 2], ["loss", "loss"], [0.5, float("nan")]).height
    2
    """
    coded = isinstance(keys, pl.Series) and _coded(keys.dtype)
    frame = pl.DataFrame(
        {
            "step": pl.Series("step", steps, dtype=pl.Int64),
            "key": keys.alias("key") if coded else pl.Series("key", keys, dtype=pl.Utf8),
            "value": pl.Series("value", values, dtype=pl.Float64),
        }
    )
    wall = (
        pl.Series("wall_time", wall_times, dtype=pl.Float64)
        if wall_times is not None
        else pl.lit(None, dtype=pl.Float64).alias("wall_time")  # one null, not one per row
    )
    return frame.with_columns(wall)


def _coded(dtype: pl.DataType) -> bool:
    return isinstance(dtype, (pl.Enum, pl.Categorical))


def coerce_raw(frame: pl.DataFrame) -> pl.DataFrame:
    """Cast a reader's frame to :data:`RAW_SCHEMA` (adds a null wall_time if missing; an
    ``Enum`` or ``Categorical`` key column stays one)."""
    if "wall_time" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    missing = [c for c in RAW_SCHEMA if c not in frame.columns]
    if missing:
        raise FrameError(f"raw frame lacks columns {missing}")
    return frame.select(
        pl.col(c) if c == "key" and _coded(frame.schema[c]) else pl.col(c).cast(t)
        for c, t in RAW_SCHEMA.items()
    )


def validate(frame: pl.DataFrame) -> pl.DataFrame:
    """Check that ``frame`` follows :data:`SCHEMA`; return it unchanged.

    >>> validate(empty()).width
    6
    """
    got = dict(frame.schema)
    if list(got) != list(SCHEMA):
        raise FrameError(f"canonical frame columns are {list(got)}, expected {list(SCHEMA)}")
    for name, dtype in SCHEMA.items():
        if got[name] != dtype:
            raise FrameError(f"column {name!r} has dtype {got[name]}, expected {dtype}")
    if frame.height and frame.select(pl.col("step").is_null().any()).item():
        raise FrameError("column 'step' has nulls")
    return frame
