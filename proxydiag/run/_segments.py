"""Restarts and interleaving, by the rules of docs/formats.md#steps-restarts-and-interleaving
(vectorised over the raw frame).

Per key, a step lower than the key's previous step in the file starts a new *segment*;
the later segment wins from its first step on (as TensorBoard's purge_orphaned_data does)
and a ``restart`` event is recorded. Several records of one (key, step) that survive are
interleaved ranks or engines: the last one is kept and the conflict recorded.
"""

from __future__ import annotations

import polars as pl

from proxydiag.events import Event

_MAX_EVENTS = 50
#: the column of superseded rows naming the step the run was rolled back to
ROLLED_BACK_TO = "rolled_back_to"


def resolve(raw: pl.DataFrame) -> tuple[pl.DataFrame, list[Event]]:
    """Apply restart and duplicate rules to a raw frame in file order (see :func:`resolve_all`).

    >>> f = pl.DataFrame({"step": [1, 2, 1], "key": ["a"] * 3, "value": [1.0, 2, 3],
    ...                   "wall_time": [None] * 3})
    >>> resolve(f)[0]["value"].to_list()
    [3.0]
    """
    kept, events, _ = resolve_all(raw)
    return kept, events


def resolve_all(raw: pl.DataFrame) -> tuple[pl.DataFrame, list[Event], pl.DataFrame]:
    """Apply restart and duplicate rules to a raw frame in file order; also return the
    superseded rows (``step, key, value, wall_time`` and ``rolled_back_to``, the first step of
    the segment that superseded them).

    >>> import polars as pl
    >>> f = pl.DataFrame({"step": [1, 2, 3, 2, 3, 4], "key": ["a"] * 6,
    ...                   "value": [1.0, 2, 3, 20, 30, 40], "wall_time": [None] * 6})
    >>> out, events = resolve(f)
    >>> out["value"].to_list(), events[0].kind, events[0].onset_step
    ([1.0, 20.0, 30.0, 40.0], 'restart', 2)
    """
    # windows over an integer code of the key: hashing strings per row costs 4x more
    frame = raw.with_row_index("_seq").with_columns(
        pl.col("key").cast(pl.Categorical).to_physical().alias("_k")
    )
    frame = frame.with_columns(
        # a drop below the key's previous step: one restart per drop, not one per row that
        # stays below an earlier maximum (tr8-104B: 3 restarts, not 13)
        (pl.col("step") < pl.col("step").shift(1).over("_k")).fill_null(False).alias("_restart")
    )
    events: list[Event] = []
    reordered = False
    dropped = raw.clear().with_columns(pl.lit(None, dtype=pl.Int64).alias(ROLLED_BACK_TO))
    if frame["_restart"].any():
        frame, events, dropped = _drop_orphans(frame)
        reordered = True
    frame = frame.drop("_restart")
    # restarts resolved, steps never decrease per key: a duplicate follows its twin, so this
    # cheap check spares the (key, step) hash of is_duplicated() on clean runs
    has_dup = frame.select((pl.col("step") == pl.col("step").shift(1).over("_k")).any()).item()
    dup_mask = (
        frame.select(pl.struct("key", "step").is_duplicated()).to_series() if has_dup else None
    )
    if dup_mask is not None and dup_mask.any():
        n_dups = int(dup_mask.sum())
        keys = frame.filter(dup_mask)["key"].unique().head(5).to_list()
        frame = frame.sort("_seq").unique(subset=["_k", "step"], keep="last", maintain_order=True)
        events.append(
            Event(
                "duplicate_steps",
                None,
                None,
                None,
                "info",
                1.0,
                f"{n_dups} rows share a (key, step) with another row (interleaved ranks or "
                f"engines, e.g. {', '.join(map(repr, keys))}); the last value of each was kept",
            )
        )
    # file order is kept: per key, steps now strictly increase along the frame
    return (frame.sort("_seq") if reordered else frame).drop("_seq", "_k"), events, dropped


def _drop_orphans(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[Event], pl.DataFrame]:
    frame = frame.with_columns(pl.col("_restart").cast(pl.Int32).cum_sum().over("_k").alias("_seg"))
    starts = (
        frame.group_by("_k", "_seg")
        .agg(pl.col("step").first().alias("_start"), pl.col("_seq").first().alias("_s0"))
        .sort("_k", "_seg", descending=[False, True])
        .with_columns(pl.col("_start").cum_min().shift(1).over("_k").alias("_cutoff"))
    )
    frame = frame.join(starts.select("_k", "_seg", "_cutoff"), on=["_k", "_seg"], how="left")
    is_kept = pl.col("_cutoff").is_null() | (pl.col("step") < pl.col("_cutoff"))
    kept = frame.filter(is_kept)
    superseded = (
        frame.filter(~is_kept)
        .sort("_seq")
        .select(
            "step",
            "key",
            "value",
            "wall_time",
            pl.col("_cutoff").cast(pl.Int64).alias(ROLLED_BACK_TO),
        )
    )
    dropped = frame.height - kept.height
    restarts = (
        starts.filter(pl.col("_seg") > 0)
        .group_by("_start")
        .agg(pl.len().alias("n_keys"), pl.col("_s0").min())
        .sort("_s0")
    )
    events = [
        Event(
            "restart",
            None,
            int(row["_start"]),
            None,
            "info",
            1.0,
            f"steps went back to {row['_start']} on {row['n_keys']} key(s): a restart; "
            "the later segment wins from that step on",
        )
        for row in restarts.head(_MAX_EVENTS).iter_rows(named=True)
    ]
    if restarts.height > _MAX_EVENTS:
        events.append(
            Event(
                "restart",
                None,
                None,
                None,
                "info",
                1.0,
                f"{restarts.height - _MAX_EVENTS} more restarts not listed",
            )
        )
    if events and dropped:
        first = events[0]
        events[0] = Event(
            first.kind,
            first.metric,
            first.onset_step,
            first.end_step,
            first.severity,
            first.confidence,
            first.evidence + f" ({dropped} superseded rows dropped in total)",
        )
    return kept.drop("_seg", "_cutoff"), events, superseded
