"""A raw frame's rows grouped by metric, steps ascending: the canonical frame's layout.

:func:`group_by_metric` is the heart of :func:`~proxydiag.run.build.build_run`: keys arrive as
integer codes in runs (:mod:`proxydiag.run.keys`), and the rows are reordered run by run (as
slices of a few aligned chunks when the runs are long, by one gather when they are short), so
that no string is hashed per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from proxydiag.run import keys

#: runs of one key are reordered as slices when there are at most this many, of this many
#: rows on average; else the rows are sorted one by one (a gather beats many tiny slices)
_MAX_SLICES = 4096


_MIN_RUN_ROWS = 64


#: a raw frame keeps at most this many chunks, or runs of one key as slices (aligned
#: across its columns: a frame of 50 chunks is no slower to diagnose than one of 1)
MAX_CHUNKS = 64


#: the columns of a canonical frame that always hold a value a row (see :func:`aligned`)
_CUT_COLUMNS = ("step", "metric", "key", "value")


@dataclass(frozen=True)
class Grouped:
    """The rows of a raw frame grouped by metric name, in runs of one key.

    ``rows`` (step, value and wall_time unless it is all null) hold run after run; run ``i``
    has ``lengths[i]`` rows of the metric ``metrics[ranks[i]]`` (``metrics`` sorted). They are
    in one chunk, or in a few chunks aligned across the columns (see
    :func:`group_by_metric`).
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
        """The canonical frame, in one chunk per column or at most :data:`MAX_CHUNKS` chunks
        aligned across them (a frame of many chunks makes every later group-by slower: 15x
        for 300 chunks of 12 M rows). The ``cumulative`` counters become per-step counts
        (:func:`per_step`)."""
        value = self.rows.get_column("value")
        counters = [i for i, m in enumerate(self.metrics) if m in cumulative]
        spans = self._metric_spans(counters) if counters else []
        if spans:  # a counter named by an Enum may have no rows
            value = per_step(value, spans)
        renamed = self.metrics != self.keys  # some key has an alias
        rows = self.rows
        if self.text_keys is not None and (self.by_run or not renamed):
            key = self.text_keys.alias("key")
            # without an alias the metric column is the key column (the same buffers)
            metric = self._metric_by_run(key) if renamed else key.alias("metric")
        elif self.text_keys is None and renamed and len(self.ranks) <= MAX_CHUNKS:
            # a chunk a run: a key that keeps its name shares its chunk with the metric
            # column, so only renamed rows are written twice (a third of a DeepSpeed log's
            # rows, not all); the rows are cut alike (slices, no copy)
            key = pl.concat(
                [
                    repeated(self.keys[r], n)
                    for r, n in zip(self.ranks.tolist(), self.lengths.tolist(), strict=True)
                ],
                rechunk=False,
            ).alias("key")
            metric = self._metric_by_run(key)
            cuts = list(zip(self.starts.tolist(), self.lengths.tolist(), strict=True))
            rows = pl.concat([rows.slice(a, n) for a, n in cuts], rechunk=False)
            value = pl.concat([value.slice(a, n) for a, n in cuts], rechunk=False)
        else:
            # a polars index: gathering with a numpy array of indices costs 3x as much
            per_row = pl.Series(np.repeat(self.ranks.astype(np.uint32), self.lengths))
            key = (
                self.text_keys.alias("key")
                if self.text_keys is not None
                else pl.Series("key", self.keys, dtype=pl.Utf8).gather(per_row)
            )
            metric = (
                pl.Series("metric", self.metrics, dtype=pl.Utf8).gather(per_row)
                if renamed
                else key.alias("metric")
            )
        timed = "wall_time" in rows.columns
        return aligned(
            rows.select(
                pl.lit(rid, dtype=pl.Utf8).alias("run"),
                "step",
                metric,
                key,
                value,
                "wall_time" if timed else pl.lit(None, dtype=pl.Float64).alias("wall_time"),
            ),
            timed=timed,
        )

    def _metric_by_run(self, key: pl.Series) -> pl.Series:
        """The metric column in the chunks of ``key`` (cut at every run's start): a run whose
        key is its metric name is its key slice, another the metric name repeated."""
        pieces, start = [], 0
        for rank, length in zip(self.ranks.tolist(), self.lengths.tolist(), strict=True):
            piece = key.slice(start, length)
            if self.metrics[rank] != self.keys[rank]:
                piece = pl.concat(
                    [repeated(self.metrics[rank], n) for n in piece.chunk_lengths()], rechunk=False
                )
            pieces.append(piece)
            start += length
        return pl.concat(pieces, rechunk=False).alias("metric")

    def _metric_spans(self, ranks: list[int]) -> list[tuple[int, int]]:
        """``(start, stop)`` of the rows of each metric in ``ranks`` (each is contiguous)."""
        starts, ends = self.starts, self.starts + self.lengths
        return [
            (int(starts[self.ranks == r].min()), int(ends[self.ranks == r].max()))
            for r in ranks
            if (self.ranks == r).any()
        ]


def per_step(value: pl.Series, spans: list[tuple[int, int]]) -> pl.Series:
    """Cumulative counters (a running total of skipped steps, say) as per-step counts: within
    each metric's rows ``spans`` (steps ascending) a value becomes its increase over the
    previous row; the first row, and a drop (a counter reset at a restart: the new total
    counts from zero), keep the value. NaN stays NaN. Only the counters' rows are touched.

    >>> per_step(pl.Series([1.0, 3.0, 3.0, 1.0, 9.0]), [(0, 4)]).to_list()
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
    return pl.concat([out.slice(a, n) for a, n in zip(starts, lengths, strict=True)], rechunk=False)


def group_by_metric(frame: pl.DataFrame, coded: keys.Codes, metric_of: list[str]) -> Grouped:
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
        aligned = text.dtype == pl.Utf8 and few_aligned_chunks([*rows.iter_columns(), text])
        renamed = metrics != key_names
        grouped = rows if text.dtype != pl.Utf8 else rows.with_columns(text)
        # slices, not a copy (a chunk a run) when they are few; nothing to move when the
        # runs are in order and keep their names
        by_run = aligned and len(order) <= MAX_CHUNKS
        if not (in_order and aligned and not renamed):
            grouped = pl.concat(
                [grouped.slice(int(coded.starts[r]), int(lengths[r])) for r in order],
                rechunk=not by_run,
            )
        else:
            by_run = False
        text_keys = grouped.get_column("key") if "key" in grouped.columns else None
        return Grouped(
            grouped.drop("key", strict=False),
            run_ranks[order],
            lengths[order],
            metrics,
            key_names,
            text_keys,
            by_run,
        )
    per_row = rank[coded.per_row()]
    order = np.argsort(per_row, kind="stable")
    counts = np.bincount(per_row, minlength=len(metrics))
    present = np.flatnonzero(counts)
    return Grouped(rows[pl.Series(order)], present, counts[present], metrics, key_names)


def aligned(frame: pl.DataFrame, *, timed: bool = False) -> pl.DataFrame:
    """``frame``, in one chunk unless its columns are cut into the same chunks (polars may
    merge small chunks of a numeric column and not of a text one when frames are put
    together; a misaligned frame would be copied again by every later filter).

    Only the columns that hold a value a row are looked at (``wall_time`` when ``timed``): a
    column of one value (``run``) is written out row by row the first time it is taken from
    the frame (48 MB for 3 million rows), and stays so.
    """
    names = [*_CUT_COLUMNS, *(["wall_time"] if timed else [])]
    if few_aligned_chunks([frame.get_column(n) for n in names], limit=2 * MAX_CHUNKS):
        return frame
    return frame.rechunk()


def stacked(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Canonical frames of parts of a table, one after the other, aligned (see
    :func:`aligned`; wall times too when some part has them: one part may, another not)."""
    out = pl.concat(frames, rechunk=False)
    # counted by a query: taking the column out would write a one-value column row by row
    timed = out.select(pl.col("wall_time").null_count()).item() < out.height
    return aligned(out, timed=timed)


def few_aligned_chunks(columns: list[pl.Series], limit: int = MAX_CHUNKS) -> bool:
    """The ``columns`` are cut into the same chunks, and at most ``limit`` of them (a long
    Parquet file's row groups, a parse's pieces of a file): a frame keeps them rather than a
    copy in one chunk."""
    lengths = [c.chunk_lengths() for c in columns]
    return len(lengths[0]) <= limit and all(n == lengths[0] for n in lengths[1:])


def _sliceable(n_runs: int, n_rows: int) -> bool:
    return n_runs <= _MAX_SLICES and n_runs * _MIN_RUN_ROWS <= n_rows


def repeated(text: str, n: int) -> pl.Series:
    """``text`` ``n`` times, one chunk (polars' ``new_from_index``: ``pl.repeat`` goes
    through a query and costs 0.1 ms a call, 7 ms for the 50 keys of a wide table)."""
    return pl.Series([text], dtype=pl.Utf8).new_from_index(0, n)
