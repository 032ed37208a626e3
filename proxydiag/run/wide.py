"""Wide tables (a step column plus one column per key) into runs, without a long detour.

A tabular reader validates its table into a :class:`Wide`; :func:`build_table` turns it
straight into the canonical frame when nothing needs :func:`~proxydiag.run.build.build_run`'s
rules (steps strictly increase, every key has a metric name of its own), else through its raw
frame. Both routes give the same Run. :func:`build_wide_parts` does the same for a table read
in parts of columns (Parquet), side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.frame import empty_raw
from proxydiag.metrics import AliasTable
from proxydiag.run import Run, threads
from proxydiag.run._grouped import MAX_CHUNKS, aligned, per_step, repeated, stacked
from proxydiag.run.build import build_run, cumulative_metrics, make_run, run_attrs
from proxydiag.run.keys import enum_keys


@dataclass(frozen=True)
class Wide:
    """A wide table, validated: its steps (Int64), wall times (Float64) if it has them, and
    one Float64 column per metric key, named by the key (a null is a cell left empty)."""

    step: pl.Series
    wall: pl.Series | None
    columns: list[pl.Series]

    def points(self) -> int:
        """The number of values (non-empty cells)."""
        return points(self.columns)

    def raw(self) -> pl.DataFrame:
        """The raw frame (``step, key, value, wall_time``); empty cells drop.

        The frame comes out in one block per key (the table is unpivoted column by column),
        the steps of each in file order; keys are numbered (an ``Enum``), not a string per row.
        """
        if not self.columns:
            return empty_raw()
        n, k = self.step.len(), len(self.columns)
        value = pl.concat(self.columns, rechunk=True).alias("value")
        raw = pl.DataFrame(
            [
                pl.Series("step", np.tile(self.step.to_numpy(), k)),
                # column names are distinct (polars frames have no duplicate names): Enum categories
                enum_keys(
                    np.repeat(np.arange(k, dtype=np.min_scalar_type(k)), n),
                    [m.name for m in self.columns],
                ),
                value,
            ]
        )
        raw = raw.with_columns(
            pl.concat([self.wall] * k, rechunk=True)
            if self.wall is not None
            else pl.lit(None, dtype=pl.Float64).alias("wall_time")
        )
        if value.has_nulls():  # an empty cell is no row
            raw = raw.filter(pl.col("value").is_not_null())
        return raw


def points(columns: Sequence[pl.Series]) -> int:
    """The non-empty cells of ``columns``.

    >>> points([pl.Series([1.0, None]), pl.Series([None, float("nan")])])
    2
    """
    return sum(c.len() - c.null_count() for c in columns)


#: names a wide table's key or metric may not have for polars' unpivot in :func:`build_table`
#: (its index and output columns; an empty name, which a frame renames ``column_N``)
_UNPIVOT_NAMES = frozenset({"step", "wall_time", "key", "value", "metric", ""})


#: a wide table of this many cells or more is unpivoted in parts of at least this many
#: columns, side by side (:func:`_wide_frame`)
_PARALLEL_CELLS = 1 << 18


_PART_COLUMNS = 8


#: a wide table of at most this many keys becomes a frame of a chunk per key (:func:`_key_chunks`)
_KEY_CHUNKS = MAX_CHUNKS


def build_table(
    table: pl.DataFrame | Wide,
    *,
    name: str,
    source: str | Path,
    fmt: str,
    aliases: AliasTable | None = None,
    attrs: Mapping[str, Any] | None = None,
    sidecar: Path | None = None,
    monotonic: bool = False,
) -> Run:
    """A tabular reader's table into a Run: a raw frame through :func:`build_run`; a wide
    table straight into the canonical frame when nothing needs :func:`build_run`'s rules
    (its steps strictly increase and every key has a metric name of its own), else through
    its raw frame (also when a key or metric is named like one of the unpivot's columns).
    Both give the same Run."""
    kwargs: dict[str, Any] = {
        "name": name,
        "source": source,
        "fmt": fmt,
        "aliases": aliases,
        "attrs": attrs,
        "sidecar": sidecar,
        "monotonic": monotonic,
    }
    if isinstance(table, pl.DataFrame):
        return build_run(table, **kwargs)
    aliases = aliases or AliasTable.default()
    # aliases compete among the keys that have rows, as in build_run
    columns = [c for c in table.columns if c.len() > c.null_count()]
    plan = _straight([c.name for c in columns], aliases)
    if not monotonic or plan is None:
        return build_run(table.raw(), **kwargs)
    resolved, metrics, order = plan
    name, all_attrs = run_attrs(name, source, fmt, attrs, sidecar)
    out = _wide_frame(
        table,
        [columns[i] for i in order],
        [metrics[i] for i in order],
        all_attrs["run_id"],
        cumulative_metrics(aliases, metrics),
    )
    return make_run(out, name, all_attrs, aliases, resolved, None)


def build_wide_parts(
    read_part: Callable[[list[str]], Wide | None],
    keys: list[str],
    *,
    name: str,
    source: str | Path,
    fmt: str,
    aliases: AliasTable | None = None,
    attrs: Mapping[str, Any] | None = None,
    sidecar: Path | None = None,
) -> Run | None:
    """The Run of a wide table that is read in parts of its columns, each part read and
    made canonical (:func:`_wide_frame`'s two ways) on its own thread, side by side: a big
    file read column by column on one core (a single-row-group Parquet file) is read and
    built on all, without waiting for the whole table between the two.
    ``read_part(some_keys)`` reads those columns with the steps and wall times, validated
    (:class:`~proxydiag.run.wide.Wide`), or gives None when the table is not as
    :func:`build_table`'s straight route needs it (steps that do not strictly increase, a
    null step).

    None also when a key has no value at all (aliases compete among the keys that have
    rows), when two keys would share a metric name, or when a key or metric is named like
    one of the unpivot's columns: the caller then reads the whole table and builds it with
    :func:`build_table`, which gives the same Run.
    """
    aliases = aliases or AliasTable.default()
    plan = _straight(keys, aliases)
    if plan is None:
        return None
    resolved, metrics, order = plan
    name, all_attrs = run_attrs(name, source, fmt, attrs, sidecar)
    rid, cumulative = all_attrs["run_id"], cumulative_metrics(aliases, metrics)

    by_key = len(keys) <= _KEY_CHUNKS

    def part(a: int, b: int) -> pl.DataFrame | None:
        table = read_part([keys[i] for i in order[a:b]])
        if table is None or any(c.len() == c.null_count() for c in table.columns):
            return None
        build = _key_chunks if by_key else _wide_part
        return build(table, table.columns, [metrics[i] for i in order[a:b]], rid, cumulative)

    frames = threads.side_by_side(part, threads.parts(len(keys), least=_PART_COLUMNS))
    if any(f is None for f in frames):
        return None
    out = stacked([f for f in frames if f is not None])
    return make_run(out, name, all_attrs, aliases, resolved, None)


def _straight(
    keys: list[str], aliases: AliasTable
) -> tuple[dict[str, str], list[str], list[int]] | None:
    """How a wide table's ``keys`` (its columns that have values) go straight into the
    canonical frame: the resolved aliases, each key's metric name, and the keys' order by
    metric name. None when they cannot: no key, two keys sharing a metric name (their rows
    go to one metric through :func:`build_run`), or a key or metric named like one of the
    unpivot's columns."""
    resolved = aliases.resolve(keys)
    metrics = [resolved.get(k, k) for k in keys]
    if not keys or len(set(metrics)) < len(metrics) or (set(keys) | set(metrics)) & _UNPIVOT_NAMES:
        return None
    return resolved, metrics, sorted(range(len(keys)), key=metrics.__getitem__)


def _wide_frame(
    table: Wide, columns: list[pl.Series], metrics: list[str], rid: str, cumulative: set[str]
) -> pl.DataFrame:
    """The canonical frame of a wide table whose ``columns`` (in ``metrics`` order: one
    metric each) have steps that strictly increase; empty cells drop. A table of at most
    :data:`_KEY_CHUNKS` columns becomes a chunk per column (:func:`_key_chunks`), a wider
    one is unpivoted by polars, the key and the metric names as one string column each.

    Writing the unpivoted frame, 48 bytes a point against the table's 8 and on fresh pages
    mostly, is most of the time, and polars does it on one core: a big table is unpivoted in
    parts of its columns side by side, the frame keeping a chunk per part (a handful: later
    group-bys do not notice)."""
    if len(columns) <= _KEY_CHUNKS:
        return _key_chunks(table, columns, metrics, rid, cumulative)
    spans = (
        threads.parts(len(columns), least=_PART_COLUMNS)
        if table.step.len() * len(columns) >= _PARALLEL_CELLS
        else [(0, len(columns))]
    )
    frames = threads.side_by_side(
        lambda a, b: _wide_part(table, columns[a:b], metrics[a:b], rid, cumulative), spans
    )
    return frames[0] if len(frames) == 1 else stacked(frames)


def _key_chunks(
    table: Wide, columns: list[pl.Series], metrics: list[str], rid: str, cumulative: set[str]
) -> pl.DataFrame:
    """The canonical frame of a wide table's ``columns`` (see :func:`_wide_frame`) in a chunk
    per column: its values and the table's steps (and wall times) are the table's own
    buffers, shared rather than copied, except that a column (or the steps) in several
    chunks is put in one first, a column with empty cells is filtered and a cumulative
    counter differenced; only the names are written, 16 bytes a point for the key, and
    again for the metric where an alias renames the key (else the metric chunk is the
    key's). 2 ms for 50 columns of 20,000 steps where polars' unpivot takes 4 on two cores."""
    step, wall = _one_chunk(table.step), table.wall
    wall = _one_chunk(wall) if wall is not None and wall.null_count() < wall.len() else None
    pieces: dict[str, list[pl.Series]] = {
        "step": [],
        "metric": [],
        "key": [],
        "value": [],
        "wall_time": [],
    }
    for column, metric in zip(columns, metrics, strict=True):
        value, steps, walls = _one_chunk(column), step, wall
        if value.has_nulls():  # an empty cell is no row
            logged = value.is_not_null()
            value, steps = value.filter(logged), steps.filter(logged)
            walls = walls.filter(logged) if walls is not None else None
        if metric in cumulative:
            value = per_step(value, [(0, value.len())])
        key = repeated(column.name, value.len())
        named = key if metric == column.name else repeated(metric, value.len())
        for name, piece in (
            ("step", steps),
            ("metric", named),
            ("key", key),
            ("value", value),
            ("wall_time", walls),
        ):
            if piece is not None:
                pieces[name].append(piece)
    out = {
        name: pl.concat(chunks, rechunk=False).alias(name)
        for name, chunks in pieces.items()
        if chunks
    }
    timed = "wall_time" in out and out["wall_time"].null_count() < out["wall_time"].len()
    return aligned(
        pl.select(
            pl.lit(rid, dtype=pl.Utf8).alias("run"),
            out["step"],
            out["metric"],
            out["key"],
            out["value"],
            out["wall_time"] if timed else pl.lit(None, dtype=pl.Float64).alias("wall_time"),
        ),
        timed=timed,
    )


def _one_chunk(series: pl.Series) -> pl.Series:
    return series if series.n_chunks() == 1 else series.rechunk()


def _wide_part(
    table: Wide, columns: list[pl.Series], metrics: list[str], rid: str, cumulative: set[str]
) -> pl.DataFrame:
    """The canonical frame of some of a wide table's columns (see :func:`_wide_frame`): a
    chunk per run of keys that aliases rename or not (a key kept as its metric name shares
    its strings with the metric column: 32 bytes a point written, not 48)."""
    renamed = [m != c.name for m, c in zip(metrics, columns, strict=True)]
    cuts = [i for i in range(1, len(renamed)) if renamed[i] != renamed[i - 1]]
    if cuts:
        return stacked(
            [
                _wide_part(table, columns[a:b], metrics[a:b], rid, cumulative)
                for a, b in itertools.pairwise([0, *cuts, len(columns)])
            ]
        )
    index = [table.step, *([table.wall.alias("wall_time")] if table.wall is not None else [])]
    wide = pl.DataFrame([*index, *columns])
    long = wide.unpivot(index=[s.name for s in index], variable_name="key", value_name="value")
    if renamed and renamed[0]:
        # the names alone, unpivoted from columns of nulls (no buffers): no copy of the values
        nulls = pl.repeat(None, table.step.len(), dtype=pl.Null, eager=True)
        names = pl.DataFrame([nulls.alias(m) for m in metrics])
        metric = names.unpivot(variable_name="metric").get_column("metric")
    else:  # no key renamed: the same strings
        metric = long.get_column("key").alias("metric")
    out = long.with_columns(metric)
    if any(c.has_nulls() for c in columns):
        out = out.filter(pl.col("value").is_not_null())
    counts = np.array([c.len() - c.null_count() for c in columns])
    ends = np.cumsum(counts)
    spans = [
        (int(e - n), int(e))
        for m, n, e in zip(metrics, counts, ends, strict=True)
        if m in cumulative
    ]
    value = per_step(out.get_column("value"), spans) if spans else out.get_column("value")
    timed = "wall_time" in out.columns and out.get_column("wall_time").null_count() < out.height
    return out.select(
        pl.lit(rid, dtype=pl.Utf8).alias("run"),
        "step",
        "metric",
        "key",
        value,
        "wall_time" if timed else pl.lit(None, dtype=pl.Float64).alias("wall_time"),
    )
