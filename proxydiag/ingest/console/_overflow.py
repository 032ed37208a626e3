"""Overflow and skip messages → canonical ``skipped`` and ``loss_scale`` points.

Rules (docs/formats.md#steps-restarts-and-interleaving, docs/formats.md#overflow-lines):

- One family counts the skipped steps, the most exact present: ``ds_iter`` (``Grad overflow
  on iteration N``: step N+1, DeepSpeed's 1-based count of steps taken, no uncertainty),
  else ``ds_rank0`` (``OVERFLOW!``/``Overflow detected``), ``fairseq`` (``NOTE: gradient
  overflow detected``), ``verl`` (``grad_norm is not finite``), ``ds_scale_down``.
- Lines repeated per rank count once: ``Grad overflow on iteration 0`` x 16 is one overflow;
  ``OVERFLOW! Rank r`` counts for the lowest rank only; a scale change ``X → Y`` printed by
  every rank counts once; veRL's per-rank warnings count once per step.
- A line without its own step takes the step of the next progress line; the log interval
  goes into ``attrs["overflow_step_uncertainty"]``. Each overflow adds 1 to ``ds_overflow``
  (``fairseq_overflow``, ``grad_norm_not_finite``) at its step.
- ``Attempted loss scale: X, reducing to Y`` (or ``from X to Y``) gives ``ds_loss_scale`` = Y
  (the scale after the step; the last of the step) and ``ds_loss_scale_attempted`` = X (the
  scale the skipped step ran with; the first of the step). Under hysteresis Y = X.
- When the final cumulative counter (``step=N, skipped=K``; summed over engines) disagrees
  with the count of overflow lines up to it, the counter wins: the line count is kept as
  ``ds_overflow_lines`` (not canonical) and an info event says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from proxydiag.events import Event
from proxydiag.ingest.console._records import RECORD_SCHEMA, empty_overflows, empty_records
from proxydiag.ingest.console._steps import attach, log_interval

COUNT_ORDER = ("ds_iter", "ds_rank0", "fairseq", "verl", "ds_scale_down")
SKIP_KEY = {"ds": "ds_overflow", "fairseq": "fairseq_overflow", "verl": "grad_norm_not_finite"}
SCALE_KEY = {"ds": "ds_loss_scale", "fairseq": "fairseq_loss_scale"}


@dataclass
class Resolved:
    records: pl.DataFrame
    overflows: pl.DataFrame  # one row per counted overflow (line, step, family, attempted, scale)
    events: list[Event] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


def resolve(ovf: pl.DataFrame, anchor_lines: pl.DataFrame, counters: pl.DataFrame) -> Resolved:
    """Turn overflow rows (file order) into records, given progress lines and DS counters."""
    if ovf.is_empty():
        return Resolved(empty_records(), empty_overflows())
    ovf = _dedupe(ovf.sort("line", maintain_order=True))
    present = set(ovf["family"].unique().to_list())
    counting = next((f for f in COUNT_ORDER if f in present), None)
    ovf = _dedupe_changes(_steps(ovf, anchor_lines, exact=counting == "ds_iter"))
    counted = ovf.filter(pl.col("family") == counting) if counting else ovf.clear()
    if (
        counting == "verl"
    ):  # every rank warns: once per step (a step seen again after a restart counts)
        counted = counted.filter((pl.col("step") != pl.col("step").shift(1)).fill_null(True))
    prefix = (counting or "ds").split("_")[0]
    skip_key = SKIP_KEY[prefix]
    records = [_per_step(counted, {skip_key: pl.len().cast(pl.Float64)})]
    scales = _scale_rows(ovf, present)
    if not scales.is_empty():
        key = SCALE_KEY.get(prefix, "ds_loss_scale")
        records.append(
            _per_step(
                scales,
                {
                    key: pl.col("scale").last(),
                    key + "_attempted": pl.col("attempted").drop_nulls().first(),
                },
            )
        )
    out = Resolved(pl.concat(records), _counted_view(counted))
    out.attrs = {
        "overflow_family": counting,
        "overflow_events": counted.height,
        "overflow_step_uncertainty": 0 if counting == "ds_iter" else log_interval(anchor_lines),
    }
    out.events = _min_scale_events(ovf)
    _counter_check(out, counters, skip_key)
    return out


def _dedupe(ovf: pl.DataFrame) -> pl.DataFrame:
    """One row per event for the rank-repeated ``OVERFLOW! Rank r`` and iteration lines."""
    min_rank = pl.col("rank").min().over("family")
    keep_rank = pl.col("rank").is_null() | (pl.col("rank") == min_rank)
    same_iter = (pl.col("step") == pl.col("step").shift(1)).over("family").fill_null(False)
    repeated = pl.when(pl.col("family") == "ds_iter").then(same_iter).otherwise(False)
    return ovf.filter(keep_rank & ~repeated)


def _dedupe_changes(ovf: pl.DataFrame) -> pl.DataFrame:
    """``from X to Y`` printed by every rank counts once: drop a scale change equal to the
    previous one (same kind, step, X and Y); a growth in between keeps both."""
    changes = pl.col("family").is_in(["ds_scale_down", "ds_scale_up"])
    cols = ["family", "step", "attempted", "scale"]
    sub = ovf.with_row_index("_i").filter(changes)
    same = pl.all_horizontal(pl.col(c).eq_missing(pl.col(c).shift(1)) for c in cols).fill_null(
        False
    )
    repeated = sub.filter(same)["_i"]
    return ovf.with_row_index("_i").filter(~pl.col("_i").is_in(repeated.implode())).drop("_i")


def _steps(ovf: pl.DataFrame, anchor_lines: pl.DataFrame, *, exact: bool) -> pl.DataFrame:
    """Give every row a step: its own, the preceding ``ds_iter`` row's, or the next anchor's."""
    if exact:
        iters = ovf.filter(pl.col("family") == "ds_iter").select(
            "line", pl.col("step").alias("_it")
        )
        near = ovf.sort("line").join_asof(iters, on="line", strategy="backward")
        follows = pl.col("family").is_in(["ds_rank0", "ds_scale_down", "min_scale"])
        ovf = near.with_columns(
            pl.when(follows).then(pl.coalesce("step", "_it")).otherwise("step").alias("step")
        ).drop("_it")
        # the iteration lines are exact progress marks too (a scale increase before one)
        anchor_lines = pl.concat([anchor_lines, iters.rename({"_it": "step"})]).sort("line")
    ovf = ovf.with_columns(pl.lit(1, dtype=pl.Int8).alias("attach"))
    return attach(ovf, anchor_lines).drop("attach")


def _scale_rows(ovf: pl.DataFrame, present: set[str]) -> pl.DataFrame:
    if "ds_scale_down" in present:
        families = ["ds_scale_down", "ds_scale_up"]
    else:
        families = ["ds_rank0", "ds_scale_up", "fairseq"]
    return ovf.filter(pl.col("family").is_in(families) & pl.col("scale").is_not_null())


def _per_step(rows: pl.DataFrame, values: dict[str, pl.Expr]) -> pl.DataFrame:
    """One record per key and run of equal steps (file order); a restart stays separate."""
    if rows.is_empty():
        return empty_records()
    grouped = (
        rows.with_columns(pl.col("step").rle_id().alias("_run"))
        .group_by("_run", maintain_order=True)
        .agg(
            pl.col("line").first(),
            pl.col("step").first(),
            pl.col("wall_time").last(),
            *[expr.alias(key) for key, expr in values.items()],
        )
    )
    long = grouped.unpivot(
        index=["line", "step", "wall_time"],
        on=list(values),
        variable_name="key",
        value_name="value",
    )
    long = long.filter(pl.col("value").is_not_null()).sort("line", maintain_order=True)
    long = long.with_columns(
        pl.lit(0, dtype=pl.Int8).alias("attach"), pl.lit(False).alias("anchor")
    )
    return long.select([pl.col(c).cast(t) for c, t in RECORD_SCHEMA.items()])


def _counted_view(counted: pl.DataFrame) -> pl.DataFrame:
    return counted.select("line", "step", "family", "attempted", "scale")


def _min_scale_events(ovf: pl.DataFrame) -> list[Event]:
    """The scaler's end states: ``Current loss scale already at minimum`` (DeepSpeed raises
    and the run stops), or a scale that reached 0 (``Attempted loss scale: 0, reducing to
    0``: with ``min_loss_scale`` 0 nothing stops it, and no gradient can be scaled)."""
    rows = (
        ovf.filter(
            (pl.col("family") == "min_scale") | (pl.col("scale") <= 0) | (pl.col("attempted") <= 0)
        )
        .sort("line")
        .head(1)
    )
    return [
        Event(
            "loss_scale_minimum",
            "loss_scale",
            int(r["step"]),
            None,
            "critical",
            1.0,
            f"line {r['line']}: the loss scale reached its minimum (the run stopped)"
            if r["family"] == "min_scale"
            else f"line {r['line']}: the loss scale fell to {r['scale']:g} (attempted "
            f"{r['attempted']:g}): no gradient can be scaled any more",
        )
        for r in rows.iter_rows(named=True)
    ]


def _counter_check(out: Resolved, counters: pl.DataFrame, skip_key: str) -> None:
    if counters.is_empty():
        return
    finals = (
        counters.sort("line")
        .group_by("key", maintain_order=True)
        .agg(pl.col("value").last(), pl.col("line").last())
    )
    total = int(finals["value"].sum())
    last_line = int(finals["line"].max())  # type: ignore[arg-type]
    n_lines = out.overflows.filter(pl.col("line") <= last_line).height
    out.attrs["skipped_counter_final"] = total
    if n_lines == total:
        return
    out.records = out.records.with_columns(
        pl.when(pl.col("key") == skip_key)
        .then(pl.lit(skip_key + "_lines"))
        .otherwise(pl.col("key"))
        .cast(RECORD_SCHEMA["key"])
        .alias("key")
    )
    out.events.append(
        Event(
            "skip_count_mismatch",
            "skipped",
            None,
            None,
            "info",
            1.0,
            f"{n_lines} overflow line(s) but the final skipped counter says {total}; the counter "
            f"wins (the line count is kept as {skip_key}_lines)",
        )
    )
