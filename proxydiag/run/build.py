"""From a reader's raw frame to a :class:`~proxydiag.run.Run`: restarts, aliases, counters, metadata."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.errors import IngestError
from proxydiag.events import Event
from proxydiag.frame import coerce_raw
from proxydiag.ingest.tabular._table import Wide
from proxydiag.metrics import AliasTable
from proxydiag.run import Run, keys, run_id, threads
from proxydiag.run import _segments as segments

SIDECAR = "proxydiag.json"
#: names a wide table's key or metric may not have for polars' unpivot in :func:`build_table`
#: (its index and output columns; an empty name, which a frame renames ``column_N``)
_UNPIVOT_NAMES = frozenset({"step", "wall_time", "key", "value", "metric", ""})
#: runs of one key are reordered as slices when there are at most this many, of this many
#: rows on average; else the rows are sorted one by one (a gather beats many tiny slices)
_MAX_SLICES = 4096
_MIN_RUN_ROWS = 64
#: a raw frame keeps at most this many chunks, or runs of one key as slices (aligned
#: across its columns: a frame of 50 chunks is no slower to diagnose than one of 1)
_MAX_CHUNKS = 64
#: the columns of a canonical frame that always hold a value a row (see :func:`_aligned`)
_CUT_COLUMNS = ("step", "metric", "key", "value")
#: a wide table of this many cells or more is unpivoted in parts of at least this many
#: columns, side by side (:func:`_wide_frame`)
_PARALLEL_CELLS = 1 << 18
_PART_COLUMNS = 8
#: a wide table of at most this many keys becomes a frame of a chunk per key (:func:`_key_chunks`)
_KEY_CHUNKS = _MAX_CHUNKS
_SIDECAR_FIELDS = (
    "role", "group", "seed", "experts_kept", "experts_total", "cost_per_step", "precision",
    "step_kind", "notes", "name", "log_interval", "params", "tags",
)


def build_run(
    raw: pl.DataFrame,
    *,
    name: str,
    source: str | Path,
    fmt: str,
    aliases: AliasTable | None = None,
    attrs: Mapping[str, Any] | None = None,
    events: list[Event] | None = None,
    sidecar: Path | None = None,
    monotonic: bool = False,
) -> Run:
    """Turn a raw frame (``step, key, value, wall_time`` in file order) into a canonical Run.

    Keys become integer codes (:mod:`~proxydiag.run.keys`), aliases are resolved once per
    distinct key, and the rows are grouped by metric name with the steps of each ascending.
    When some key's steps drop or repeat along the file (a restart, interleaved ranks), the
    rules of :mod:`~proxydiag.run._segments` resolve them first. ``monotonic=True`` is the
    reader's promise that every key's steps strictly increase in file order (a wide table
    whose step column increases): the check is skipped.

    ``sidecar`` is the path of a ``proxydiag.json`` to merge into attrs (if it exists);
    its fields override what the reader found (a user's statement beats inference).
    """
    table = aliases or AliasTable.default()
    frame = coerce_raw(raw)
    del raw  # with the caller's only reference, ``del frame`` below frees the key column
    coded = keys.of(frame["key"])
    # aliases compete among the keys that have rows: an Enum may name keys without any (an
    # empty column of a wide table), and those must not win a canonical name
    resolved = table.resolve([k for k, has in zip(coded.names, coded.present(), strict=True)
                              if has])
    grouped = _group_by_metric(frame, coded, [resolved.get(k, k) for k in coded.names])
    if not monotonic and grouped.steps_not_increasing():
        frame, seg_events = segments.resolve(frame)
        return build_run(
            frame, name=name, source=source, fmt=fmt, aliases=table, attrs=attrs,
            events=[*(events or []), *seg_events], sidecar=sidecar, monotonic=True,
        )
    del frame  # ``grouped`` holds what is left of it
    name, all_attrs = _attrs(name, source, fmt, attrs, sidecar)
    out = grouped.frame(all_attrs["run_id"], _cumulative(table, grouped.metrics))
    return _run(out, name, all_attrs, table, resolved, events)


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
    kwargs: dict[str, Any] = {"name": name, "source": source, "fmt": fmt, "aliases": aliases,
                              "attrs": attrs, "sidecar": sidecar, "monotonic": monotonic}
    if isinstance(table, pl.DataFrame):
        return build_run(table, **kwargs)
    aliases = aliases or AliasTable.default()
    # aliases compete among the keys that have rows, as in build_run
    columns = [c for c in table.columns if c.len() > c.null_count()]
    plan = _straight([c.name for c in columns], aliases)
    if not monotonic or plan is None:
        return build_run(table.raw(), **kwargs)
    resolved, metrics, order = plan
    name, all_attrs = _attrs(name, source, fmt, attrs, sidecar)
    out = _wide_frame(table, [columns[i] for i in order], [metrics[i] for i in order],
                      all_attrs["run_id"], _cumulative(aliases, metrics))
    return _run(out, name, all_attrs, aliases, resolved, None)


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
    (:class:`~proxydiag.ingest.tabular._table.Wide`), or gives None when the table is not as
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
    name, all_attrs = _attrs(name, source, fmt, attrs, sidecar)
    rid, cumulative = all_attrs["run_id"], _cumulative(aliases, metrics)

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
    out = _stacked([f for f in frames if f is not None])
    return _run(out, name, all_attrs, aliases, resolved, None)


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
    spans = (threads.parts(len(columns), least=_PART_COLUMNS)
             if table.step.len() * len(columns) >= _PARALLEL_CELLS else [(0, len(columns))])
    frames = threads.side_by_side(
        lambda a, b: _wide_part(table, columns[a:b], metrics[a:b], rid, cumulative), spans)
    return frames[0] if len(frames) == 1 else _stacked(frames)


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
    pieces: dict[str, list[pl.Series]] = {"step": [], "metric": [], "key": [], "value": [],
                                          "wall_time": []}
    for column, metric in zip(columns, metrics, strict=True):
        value, steps, walls = _one_chunk(column), step, wall
        if value.has_nulls():  # an empty cell is no row
            logged = value.is_not_null()
            value, steps = value.filter(logged), steps.filter(logged)
            walls = walls.filter(logged) if walls is not None else None
        if metric in cumulative:
            value = _per_step(value, [(0, value.len())])
        key = _repeated(column.name, value.len())
        named = key if metric == column.name else _repeated(metric, value.len())
        for name, piece in (("step", steps), ("metric", named), ("key", key), ("value", value),
                            ("wall_time", walls)):
            if piece is not None:
                pieces[name].append(piece)
    out = {name: pl.concat(chunks, rechunk=False).alias(name)
           for name, chunks in pieces.items() if chunks}
    timed = "wall_time" in out and out["wall_time"].null_count() < out["wall_time"].len()
    return _aligned(pl.select(
        pl.lit(rid, dtype=pl.Utf8).alias("run"),
        out["step"],
        out["metric"],
        out["key"],
        out["value"],
        out["wall_time"] if timed else pl.lit(None, dtype=pl.Float64).alias("wall_time"),
    ), timed=timed)


def _one_chunk(series: pl.Series) -> pl.Series:
    return series if series.n_chunks() == 1 else series.rechunk()


def _repeated(text: str, n: int) -> pl.Series:
    """``text`` ``n`` times, one chunk (polars' ``new_from_index``: ``pl.repeat`` goes
    through a query and costs 0.1 ms a call, 7 ms for the 50 keys of a wide table)."""
    return pl.Series([text], dtype=pl.Utf8).new_from_index(0, n)


def _wide_part(
    table: Wide, columns: list[pl.Series], metrics: list[str], rid: str, cumulative: set[str]
) -> pl.DataFrame:
    """The canonical frame of some of a wide table's columns (see :func:`_wide_frame`): a
    chunk per run of keys that aliases rename or not (a key kept as its metric name shares
    its strings with the metric column: 32 bytes a point written, not 48)."""
    renamed = [m != c.name for m, c in zip(metrics, columns, strict=True)]
    cuts = [i for i in range(1, len(renamed)) if renamed[i] != renamed[i - 1]]
    if cuts:
        return _stacked([
            _wide_part(table, columns[a:b], metrics[a:b], rid, cumulative)
            for a, b in itertools.pairwise([0, *cuts, len(columns)])
        ])
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
    spans = [(int(e - n), int(e)) for m, n, e in zip(metrics, counts, ends, strict=True)
             if m in cumulative]
    value = _per_step(out.get_column("value"), spans) if spans else out.get_column("value")
    timed = "wall_time" in out.columns and out.get_column("wall_time").null_count() < out.height
    return out.select(
        pl.lit(rid, dtype=pl.Utf8).alias("run"),
        "step",
        "metric",
        "key",
        value,
        "wall_time" if timed else pl.lit(None, dtype=pl.Float64).alias("wall_time"),
    )


def _attrs(
    name: str, source: str | Path, fmt: str, attrs: Mapping[str, Any] | None,
    sidecar: Path | None,
) -> tuple[str, dict[str, Any]]:
    """The run's name and attrs: the reader's, then the sidecar's (a user's statement beats
    inference), with the run id."""
    all_attrs: dict[str, Any] = {"format": fmt, "source": str(source)}
    all_attrs.update(attrs or {})
    if sidecar is not None:
        all_attrs.update(read_sidecar(sidecar))
    name = str(all_attrs.pop("name", None) or name)
    all_attrs["run_id"] = str(all_attrs.get("run_id") or run_id(name, str(source)))
    return name, all_attrs


def _cumulative(table: AliasTable, metrics: list[str]) -> set[str]:
    """Which of ``metrics`` are cumulative counters (made per-step counts)."""
    return {m for m in metrics if m in table.specs and table.specs[m].counter == "cumulative"}


def _run(
    frame: pl.DataFrame, name: str, attrs: dict[str, Any], aliases: AliasTable,
    resolved: Mapping[str, str], events: list[Event] | None,
) -> Run:
    """The Run, mapping each canonical metric to the key it was read from."""
    mapping = {m: k for k, m in resolved.items() if m in aliases.specs}
    return Run(frame, name, attrs, mapping, list(events or []))


@dataclass(frozen=True)
class _Grouped:
    """The rows of a raw frame grouped by metric name, in runs of one key.

    ``rows`` (step, value and wall_time unless it is all null) hold run after run; run ``i``
    has ``lengths[i]`` rows of the metric ``metrics[ranks[i]]`` (``metrics`` sorted). They are
    in one chunk, or in a few chunks aligned across the columns (see
    :func:`_group_by_metric`).
    """

    rows: pl.DataFrame
    ranks: np.ndarray
    lengths: np.ndarray
    metrics: list[str]
    keys: list[str]
    #: the raw frame's text keys in the order of ``rows``, when they were kept or sliced with
    #: them rather than gathered: the key column as it is
    text_keys: pl.Series | None = None
    #: ``rows`` and ``text_keys`` are cut into chunks at every run's start (slices of the raw
    #: frame): a metric column is put together run by run, in the same chunks
    by_run: bool = False

    @property
    def starts(self) -> np.ndarray:
        """The first row of each run."""
        starts: np.ndarray = np.cumsum(self.lengths) - self.lengths
        return starts

    def steps_not_increasing(self) -> bool:
        """Some key's steps drop or repeat along its rows (a restart, a duplicate)."""
        steps = self.rows["step"].to_numpy()
        later = np.flatnonzero(steps[1:] <= steps[:-1]) + 1
        if not len(later):
            return False
        new_metric = np.concatenate(([True], self.ranks[1:] != self.ranks[:-1]))
        metric_starts = self.starts[new_metric]
        return not np.isin(later, metric_starts).all()

    def frame(self, rid: str, cumulative: set[str]) -> pl.DataFrame:
        """The canonical frame, in one chunk per column or at most :data:`_MAX_CHUNKS` chunks
        aligned across them (a frame of many chunks makes every later group-by slower: 15x
        for 300 chunks of 12 M rows). The ``cumulative`` counters become per-step counts
        (:func:`_per_step`)."""
        value = self.rows.get_column("value")
        counters = [i for i, m in enumerate(self.metrics) if m in cumulative]
        spans = self._metric_spans(counters) if counters else []
        if spans:  # a counter named by an Enum may have no rows
            value = _per_step(value, spans)
        renamed = self.metrics != self.keys  # some key has an alias
        rows = self.rows
        if self.text_keys is not None and (self.by_run or not renamed):
            key = self.text_keys.alias("key")
            # without an alias the metric column is the key column (the same buffers)
            metric = self._metric_by_run(key) if renamed else key.alias("metric")
        elif self.text_keys is None and renamed and len(self.ranks) <= _MAX_CHUNKS:
            # a chunk a run: a key that keeps its name shares its chunk with the metric
            # column, so only renamed rows are written twice (a third of a DeepSpeed log's
            # rows, not all); the rows are cut alike (slices, no copy)
            key = pl.concat([_repeated(self.keys[r], n)
                             for r, n in zip(self.ranks.tolist(), self.lengths.tolist(),
                                             strict=True)], rechunk=False).alias("key")
            metric = self._metric_by_run(key)
            cuts = list(zip(self.starts.tolist(), self.lengths.tolist(), strict=True))
            rows = pl.concat([rows.slice(a, n) for a, n in cuts], rechunk=False)
            value = pl.concat([value.slice(a, n) for a, n in cuts], rechunk=False)
        else:
            # a polars index: gathering with a numpy array of indices costs 3x as much
            per_row = pl.Series(np.repeat(self.ranks.astype(np.uint32), self.lengths))
            key = (self.text_keys.alias("key") if self.text_keys is not None
                   else pl.Series("key", self.keys, dtype=pl.Utf8).gather(per_row))
            metric = (pl.Series("metric", self.metrics, dtype=pl.Utf8).gather(per_row)
                      if renamed else key.alias("metric"))
        timed = "wall_time" in rows.columns
        return _aligned(rows.select(
            pl.lit(rid, dtype=pl.Utf8).alias("run"),
            "step",
            metric,
            key,
            value,
            "wall_time" if timed else pl.lit(None, dtype=pl.Float64).alias("wall_time"),
        ), timed=timed)

    def _metric_by_run(self, key: pl.Series) -> pl.Series:
        """The metric column in the chunks of ``key`` (cut at every run's start): a run whose
        key is its metric name is its key slice, another the metric name repeated."""
        pieces, start = [], 0
        for rank, length in zip(self.ranks.tolist(), self.lengths.tolist(), strict=True):
            piece = key.slice(start, length)
            if self.metrics[rank] != self.keys[rank]:
                piece = pl.concat([_repeated(self.metrics[rank], n)
                                   for n in piece.chunk_lengths()], rechunk=False)
            pieces.append(piece)
            start += length
        return pl.concat(pieces, rechunk=False).alias("metric")

    def _metric_spans(self, ranks: list[int]) -> list[tuple[int, int]]:
        """``(start, stop)`` of the rows of each metric in ``ranks`` (each is contiguous)."""
        starts, ends = self.starts, self.starts + self.lengths
        return [(int(starts[self.ranks == r].min()), int(ends[self.ranks == r].max()))
                for r in ranks if (self.ranks == r).any()]


def _per_step(value: pl.Series, spans: list[tuple[int, int]]) -> pl.Series:
    """Cumulative counters (a running total of skipped steps, say) as per-step counts: within
    each metric's rows ``spans`` (steps ascending) a value becomes its increase over the
    previous row; the first row, and a drop (a counter reset at a restart: the new total
    counts from zero), keep the value. NaN stays NaN. Only the counters' rows are touched.

    >>> _per_step(pl.Series([1.0, 3.0, 3.0, 1.0, 9.0]), [(0, 4)]).to_list()
    [1.0, 2.0, 0.0, 1.0, 9.0]
    """
    index, counts = [], []
    for start, stop in spans:
        total = value.slice(start, stop - start).to_numpy()
        with np.errstate(invalid="ignore"):  # inf - inf is NaN, as it should be
            step = np.diff(total)
        counts.append(np.concatenate((total[:1], np.where(step < 0, total[1:], step))))
        index.append(np.arange(start, stop))
    lengths = value.chunk_lengths()
    # scatter changes the Series it is called on: a clone shares the buffer and copies it
    # on write, so the caller's series (a wide table's own column) stays as it was
    out = value.clone().scatter(np.concatenate(index), np.concatenate(counts))  # one chunk
    if len(lengths) < 2:
        return out
    # cut as ``value`` was (slices: no copy), or its frame's columns would not be aligned
    starts = np.cumsum([0, *lengths[:-1]]).tolist()
    return pl.concat([out.slice(a, n) for a, n in zip(starts, lengths, strict=True)],
                     rechunk=False)


def _group_by_metric(frame: pl.DataFrame, coded: keys.Codes, metric_of: list[str]) -> _Grouped:
    """Rows sorted by metric name, file order kept within each (a stable sort on the metric's
    rank: integers, not strings), copied once into one chunk.

    Rows in long runs of one key (a wide table unpivoted column by column, a console log
    parsed block by block) are reordered as slices, one per run, instead of a gather of
    every row; rows already in order (one chunk) are not copied at all.
    """
    by_name = sorted(range(len(metric_of)), key=metric_of.__getitem__)
    rank = np.empty(len(by_name), dtype=np.uint16 if len(by_name) <= 1 << 16 else np.uint32)
    rank[by_name] = np.arange(len(by_name))
    metrics = [metric_of[c] for c in by_name]
    key_names = [coded.names[c] for c in by_name]
    # a source without wall times: one null for the whole column, not 8 bytes a row
    timed = frame.get_column("wall_time").null_count() < frame.height
    rows = frame.select("step", "value", *(["wall_time"] if timed else []))
    if coded.rows is None and _sliceable(len(coded.starts), coded.n):
        run_ranks, lengths = rank[coded.run_codes], coded.lengths
        order = np.argsort(run_ranks, kind="stable")
        in_order = not (order != np.arange(len(order))).any()
        # text keys are kept or sliced with the rows, not gathered (coded keys are gathered
        # from their names, in one chunk: so are the rows then)
        text = frame.get_column("key")
        aligned = (text.dtype == pl.Utf8
                   and _few_aligned_chunks([*rows.iter_columns(), text]))
        renamed = metrics != key_names
        grouped = rows if text.dtype != pl.Utf8 else rows.with_columns(text)
        # slices, not a copy (a chunk a run) when they are few; nothing to move when the
        # runs are in order and keep their names
        by_run = aligned and len(order) <= _MAX_CHUNKS
        if not (in_order and aligned and not renamed):
            grouped = pl.concat([grouped.slice(int(coded.starts[r]), int(lengths[r]))
                                 for r in order], rechunk=not by_run)
        else:
            by_run = False
        text_keys = grouped.get_column("key") if "key" in grouped.columns else None
        return _Grouped(grouped.drop("key", strict=False), run_ranks[order], lengths[order],
                        metrics, key_names, text_keys, by_run)
    per_row = rank[coded.per_row()]
    order = np.argsort(per_row, kind="stable")
    counts = np.bincount(per_row, minlength=len(metrics))
    present = np.flatnonzero(counts)
    return _Grouped(rows[pl.Series(order)], present, counts[present], metrics, key_names)


def _aligned(frame: pl.DataFrame, *, timed: bool = False) -> pl.DataFrame:
    """``frame``, in one chunk unless its columns are cut into the same chunks (polars may
    merge small chunks of a numeric column and not of a text one when frames are put
    together; a misaligned frame would be copied again by every later filter).

    Only the columns that hold a value a row are looked at (``wall_time`` when ``timed``): a
    column of one value (``run``) is written out row by row the first time it is taken from
    the frame (48 MB for 3 million rows), and stays so.
    """
    names = [*_CUT_COLUMNS, *(["wall_time"] if timed else [])]
    if _few_aligned_chunks([frame.get_column(n) for n in names], limit=2 * _MAX_CHUNKS):
        return frame
    return frame.rechunk()


def _stacked(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Canonical frames of parts of a table, one after the other, aligned (see
    :func:`_aligned`; wall times too when some part has them: one part may, another not)."""
    out = pl.concat(frames, rechunk=False)
    # counted by a query: taking the column out would write a one-value column row by row
    timed = out.select(pl.col("wall_time").null_count()).item() < out.height
    return _aligned(out, timed=timed)


def _few_aligned_chunks(columns: list[pl.Series], limit: int = _MAX_CHUNKS) -> bool:
    """The ``columns`` are cut into the same chunks, and at most ``limit`` of them (a long
    Parquet file's row groups, a parse's pieces of a file): a frame keeps them rather than a
    copy in one chunk."""
    lengths = [c.chunk_lengths() for c in columns]
    return len(lengths[0]) <= limit and all(n == lengths[0] for n in lengths[1:])


def _sliceable(n_runs: int, n_rows: int) -> bool:
    return n_runs <= _MAX_SLICES and n_runs * _MIN_RUN_ROWS <= n_rows


def sidecar_for(path: Path) -> Path:
    """Where a source's sidecar lives: ``<dir>/proxydiag.json`` or ``<file>.proxydiag.json``
    (falling back to ``proxydiag.json`` beside the file)."""
    if path.is_dir():
        return path / SIDECAR
    own = path.with_name(path.name + "." + SIDECAR)
    return own if own.exists() else path.parent / SIDECAR


def read_sidecar(path: Path) -> dict[str, Any]:
    """Read a sidecar; absent means no metadata. Unknown fields go into ``attrs['notes']``."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(f"{path}: invalid proxydiag.json sidecar ({exc}); fix or remove it") from exc
    if not isinstance(data, dict):
        raise IngestError(f"{path}: a proxydiag.json sidecar must hold a JSON object")
    out = {k: data[k] for k in _SIDECAR_FIELDS if k in data}
    extra = {k: v for k, v in data.items() if k not in _SIDECAR_FIELDS}
    if extra:
        out["extra"] = extra
    return out
