"""Steps for console records that have none, and engines that log without names.

docs/formats.md#steps-restarts-and-interleaving: a line without its own step takes the step
of the next progress line (``attach = 1``, e.g. ``OVERFLOW!``) or, for lines that report on
the step just printed, of the previous one (``attach = -1``), whichever dialect printed
it. With no progress line after
it, a line takes the last step seen; with none before it, step 0 (an evaluation before
training). With no progress line at all, the lines take their order (1, 2, ...), never step 0
for all. The log interval is the uncertainty of such a step.

DeepSpeed-Chat PPO runs two engines (actor, critic) whose ``step=N, skipped=K`` lines come
in adjacent pairs with the same N and no name: the k-th line of such a group is engine k,
and its keys get ``@engine<k>`` (engine 0, the first to log -- the actor in DeepSpeed-Chat
-- keeps the plain key). A step that comes back much later is a restart, not an engine.
"""

from __future__ import annotations

import polars as pl

#: at most this many lines between the step= lines of one step's engines
ENGINE_GAP_LINES = 8


def anchors(records: pl.DataFrame) -> pl.DataFrame:
    """``(line, step)`` of the progress lines, sorted by line."""
    return (
        records.filter(pl.col("anchor") & pl.col("step").is_not_null())
        .select("line", "step")
        .unique("line", keep="first")
        .sort("line")
    )


def attach(frame: pl.DataFrame, anchor_lines: pl.DataFrame) -> pl.DataFrame:
    """Fill ``step`` of rows whose ``attach`` is 1 (next) or -1 (previous progress line).

    >>> recs = pl.DataFrame({"line": [1, 3, 5], "step": [None, None, None],
    ...                      "attach": [1, -1, 1]}, schema_overrides={"step": pl.Int64})
    >>> anc = pl.DataFrame({"line": [2, 4], "step": [10, 20]})
    >>> attach(recs, anc)["step"].to_list()
    [10, 10, 20]
    """
    if frame.is_empty():
        return frame
    # a progress line whose step did not parse (a number beyond 64 bits) anchors nothing
    anc = anchor_lines.filter(pl.col("step").is_not_null())
    if anc.is_empty():  # no progress line at all: the records' order
        return frame.with_columns(
            pl.col("step").fill_null(pl.col("line").rank("dense").cast(pl.Int64))
        )
    anc = anc.select("line", pl.col("step").alias("_s")).sort("line")
    last = int(anc["_s"][-1])
    out = frame.with_row_index("_i").sort("line")
    fwd = out.join_asof(anc, on="line", strategy="forward")["_s"]
    bwd = out.join_asof(anc, on="line", strategy="backward")["_s"]
    resolved = (
        pl.when(pl.col("attach") == 1)
        .then(fwd.fill_null(last))
        .when(pl.col("attach") == -1)
        .then(bwd.fill_null(0))
        .otherwise(pl.col("step"))
    )
    return (
        out.with_columns(pl.coalesce(pl.col("step"), resolved).alias("step")).sort("_i").drop("_i")
    )


def log_interval(anchor_lines: pl.DataFrame) -> int:
    """The typical gap between logged steps (median), 1 when unknown.

    >>> log_interval(pl.DataFrame({"line": [1, 2, 3], "step": [10, 20, 30]}))
    10
    """
    gaps = anchor_lines["step"].unique().sort().diff().drop_nulls()
    gaps = gaps.filter(gaps > 0)
    if gaps.is_empty():
        return 1
    return int(gaps.cast(pl.Float64).median() or 1)  # type: ignore[arg-type]


def split_engines(
    records: pl.DataFrame, *, counter_key: str = "ds_skipped"
) -> tuple[pl.DataFrame, int]:
    """Suffix the keys of the 2nd, 3rd... engine's ``step=`` lines; return (records, engines).

    >>> r = pl.DataFrame({"line": [1, 3, 20, 22], "step": [10, 10, 20, 20],
    ...                   "key": ["ds_skipped"] * 4})
    >>> out, n = split_engines(r)
    >>> out["key"].to_list(), n
    (['ds_skipped', 'ds_skipped@engine1', 'ds_skipped', 'ds_skipped@engine1'], 2)
    """
    lines = records.filter(pl.col("key") == counter_key).select("line", "step").sort("line")
    new_group = (
        (pl.col("step") != pl.col("step").shift(1))
        | ((pl.col("line") - pl.col("line").shift(1)) > ENGINE_GAP_LINES)
    ).fill_null(True)
    lines = lines.with_columns(new_group.alias("_new"))
    if lines["_new"].all():  # one engine: the usual case, no grouping needed
        return records, 1
    # k-th line of a group = its index minus the index where the group starts (no group_by)
    index = pl.int_range(pl.len(), dtype=pl.Int64)
    start = pl.when(pl.col("_new")).then(index).forward_fill()
    lines = lines.with_columns((index - start).alias("_engine"))
    n_engines = int(lines["_engine"].max() or 0) + 1  # type: ignore[arg-type]
    tagged = lines.filter(pl.col("_engine") > 0).select("line", "_engine")
    out = records.join(tagged, on="line", how="left", maintain_order="left")
    key = (
        pl.when(pl.col("_engine").is_not_null())
        .then(pl.format("{}@engine{}", "key", "_engine"))
        .otherwise("key")
    )
    # the suffixed keys are text: back to the records' own key dtype
    key = key.cast(records.schema["key"])
    return out.with_columns(key.alias("key")).drop("_engine"), n_engines
