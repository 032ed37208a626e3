"""Parquet metric tables, wide (step + one column per metric) or long (step, key, value[, wall]).

The same rules as the CSV reader apply (see :mod:`proxydiag.ingest.tabular.tables`); Parquet is
typed, so the usual problems are a step column of floats or strings and text in a metric column. A
frame written by proxydiag's own store (the canonical schema) is read back as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from proxydiag.errors import IngestError
from proxydiag.frame import SCHEMA
from proxydiag.ingest import ReadContext
from proxydiag.ingest.tabular import _holes, tables
from proxydiag.run import Run, threads
from proxydiag.run.sidecar import sidecar_for
from proxydiag.run.wide import Wide, build_wide_parts

NAME = "parquet"
FORMAT = "parquet"
_MAGIC = b"PAR1"
#: files from this size on are read in parts of columns, one thread each (see :func:`_read`)
_PARALLEL_BYTES = 1 << 20
#: how pandas loses NaN in Parquet, and the cure (see :func:`_holes.holes`)
_NAN_AS_NULL = {
    "writer": "pandas' to_parquet writes NaN as null",
    "cure": "write with pl.from_pandas(df, nan_to_null=False).write_parquet(path)",
}


def can_read(source: str | Path) -> bool:
    """A file that starts with Parquet's magic bytes."""
    path = Path(source)
    if not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            return fh.read(4) == _MAGIC
    except OSError:
        return False


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    import pyarrow as pa  # 40-100 ms to import: only for a Parquet file, not to sniff one

    path = Path(source)
    try:
        run = _read_in_parts(path, ctx)
    except (OSError, pl.exceptions.PolarsError, pa.ArrowException):
        run = None  # the whole read below says what is wrong, naming the file
    if run is not None:
        return [run]
    table, notes = read_any(path)
    return [tables.file_run(table, notes, path, fmt=FORMAT, aliases=ctx.aliases)]


def read_table(path: Path) -> tuple[pl.DataFrame, tables.Notes]:
    """Read one Parquet file into a raw frame (``step, key, value, wall_time``)."""
    table, notes = read_any(path)
    return tables.as_raw(table), notes


def read_any(path: Path) -> tuple[pl.DataFrame | Wide, tables.Notes]:
    """As :func:`read_table`, but a wide file stays a :class:`~proxydiag.run.wide.Wide`
    table (:func:`~proxydiag.run.wide.build_table` builds its run without a raw frame)."""
    import pyarrow as pa

    try:
        frame = _read(path)
    except (OSError, pl.exceptions.PolarsError, pa.ArrowException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise IngestError(
            f"{path}: cannot read as Parquet ({reason}); is the file complete?"
        ) from exc
    notes = tables.Notes()

    def locate(row: int) -> str:
        return f"{path}@row {row}"

    if set(SCHEMA) <= set(frame.columns):  # a canonical frame (e.g. a store file copied out)
        frame = frame.select("step", "key", "value", "wall_time")
    if tables.find_column(frame.columns, tables.STEP_NAMES) is None:
        frame = _with_range_index(path, frame)
    layout = tables.long_layout(frame.columns)
    if layout:
        raw = tables.long_to_raw(frame, layout=layout, locate=locate, notes=notes)
        return tables.nonempty(raw, path), notes
    step = tables.step_column(frame.columns, where=str(path))
    wall = tables.find_column(frame.columns, tables.WALL_NAMES)
    wide = tables.wide_columns(frame, step=step, wall=wall, locate=locate, notes=notes)
    _holes.warn_holes(path, _holes.holes(wide), **_NAN_AS_NULL)
    return tables.nonempty(wide, path), notes


def _read(path: Path) -> pl.DataFrame:
    """The file's columns. polars decodes the row groups of a file side by side, but the
    columns of one row group one after the other, on one core, and a metric table mostly is
    a single row group: such a file of 1 MB or more is read as contiguous parts of its
    columns, one per polars thread (polars releases the GIL), put back in their order without
    a copy. 4.5 ms instead of 6.6 for 50 columns of 20,000 steps, on 2 cores.

    A name like ``run[1].parquet`` is a file, not a glob.
    """
    if path.stat().st_size < _PARALLEL_BYTES:
        return pl.read_parquet(path, glob=False)
    import pyarrow.parquet as pq  # 25-80 ms to import: only for a file that may need it

    meta = pq.read_metadata(path)  # the footer, once: row groups and column names
    names = meta.schema.to_arrow_schema().names
    spans = threads.parts(len(names))
    if len(spans) < 2 or meta.num_row_groups >= len(spans):
        return pl.read_parquet(path, glob=False)
    return pl.concat(
        threads.side_by_side(
            lambda a, b: pl.read_parquet(path, columns=names[a:b], glob=False),
            spans,
        ),
        how="horizontal",
    )


def _read_in_parts(path: Path, ctx: ReadContext) -> Run | None:
    """A big wide file: its Run read and built in parts of its columns side by side
    (:func:`~proxydiag.run.wide.build_wide_parts`), 9 ms for 50 columns of 20,000 steps
    on 2 cores where it took 11 with the parts unpivoted, against polars' 8 ms for the wide
    table alone (with a ``gc.collect()`` before each read: 12 ms, where it took 15, against
    polars' 10). None for a smaller file, and for one that needs :func:`read_any`'s rules (a
    long table, a step column that is not of integers, a column of text, a key without
    values, ...): the same Run comes from :func:`read_any` then. polars' schema read decides
    (pyarrow's footer read costs 6 ms of imports in a fresh process).
    """
    if path.stat().st_size < _PARALLEL_BYTES:
        return None
    schema = pl.read_parquet_schema(path)
    names = list(schema)
    step = tables.find_column(names, tables.STEP_NAMES)
    wall = tables.find_column(names, tables.WALL_NAMES)
    if (
        step is None
        or set(SCHEMA) <= set(names)
        or tables.long_layout(names)
        or not (schema[step].is_integer() and schema[step] != pl.UInt64)
        or (wall is not None and not _numbers(schema[wall]))
    ):
        return None
    notes = tables.Notes(monotonic=True)
    keys = []
    for name, dtype in schema.items():
        if name in (step, wall):
            continue
        if tables.is_index(name):
            notes.ignored_columns.append(name)
        elif _numbers(dtype):
            keys.append(name)
        else:  # text, say: read_any tells a label column from a column of bad numbers
            return None
    index = [step, *([wall] if wall else [])]
    # the columns that show skipped steps (a loss scale) may be in another part: read for all
    signs = [k for k in keys if _holes.skip_sign(k)]
    skipped = None
    if signs:
        shown = pl.read_parquet(path, columns=signs, glob=False)
        skipped = _holes.skipped_rows(shown.get_columns(), shown.height)

    def read_part(part: list[str]) -> Wide | None:
        frame = pl.read_parquet(path, columns=[*index, *part], glob=False)
        steps = frame.get_column(step)
        if steps.has_nulls():
            return None
        steps = steps.cast(pl.Int64).alias("step")
        if not tables.increasing(steps):
            return None
        walls = frame.get_column(wall).cast(pl.Float64).alias("wall_time") if wall else None
        table = Wide(steps, walls, [frame.get_column(k).cast(pl.Float64) for k in part])
        found.extend(_holes.holes(table, skipped=skipped))  # a list's append is atomic
        return table

    found: list[tuple[str, int, int]] = []
    run = build_wide_parts(
        read_part,
        keys,
        name=path.stem,
        source=path,
        fmt=FORMAT,
        aliases=ctx.aliases,
        attrs=notes.attrs(),
        sidecar=sidecar_for(path),
    )
    if run is not None:
        _holes.warn_holes(path, sorted(found, key=lambda h: keys.index(h[0])), **_NAN_AS_NULL)
    return run


def _numbers(dtype: pl.DataType) -> bool:
    """A column that :func:`~proxydiag.ingest.tabular.tables.values` casts to Float64 as it is."""
    return dtype.is_numeric() or dtype == pl.Null


def _with_range_index(path: Path, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its step column back when pandas wrote it as a ``RangeIndex``
    (``df.set_index("step").to_parquet()`` with evenly spaced steps): pandas then stores only
    its start, stop and step in the file's metadata, not a column. Else ``frame`` as it is.
    """
    try:
        meta = json.loads(pl.read_parquet_metadata(path).get("pandas", "{}"))
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return frame
    for index in meta.get("index_columns", []) if isinstance(meta, dict) else []:
        if not (
            isinstance(index, dict)
            and index.get("kind") == "range"
            and isinstance(index.get("name"), str)
            and tables.find_column([index["name"]], tables.STEP_NAMES)
        ):
            continue
        try:
            steps = range(int(index["start"]), int(index["stop"]), int(index["step"]))
        except (KeyError, TypeError, ValueError):
            continue
        if len(steps) == frame.height and index["name"] not in frame.columns:
            return frame.insert_column(0, pl.Series(index["name"], steps, dtype=pl.Int64))
    return frame
