"""Shared rules of the tabular readers (CSV/TSV, JSONL, Parquet): columns, steps, values.

A table is *wide* (a step column plus one column per metric) or *long* (step, key, value and
optionally wall time). Validation is vectorised: the first bad cell is found with polars and
reported as ``file:line`` by the reader's ``locate(row)`` callback.

Spellings of a value (CSV/TSV text, JSON strings):

* ``nan``, ``NaN``, ``-nan``, ``inf``, ``Infinity``, ``-inf``, ``-Infinity`` (any case) are
  the IEEE values;
* ``null`` / ``None`` (any case) stand for a logged value the writer could not represent —
  orjson and JavaScript write NaN and ±inf as ``null`` — so they become NaN and the run's
  ``attrs["null_as_nan"]`` counts them (the sign of an infinity is lost);
* an empty cell is *no row* (the value was not logged);
* anything else is an :class:`~proxydiag.errors.IngestError` naming file, line and column.

A column with no numeric cell at all (a label such as ``phase=train``) is not a metric: it is
skipped and listed in ``attrs["ignored_columns"]``; so is a row index that pandas wrote beside
the data (a column with an empty header, ``Unnamed: 0``, ``__index_level_0__``, or ``index`` /
``level_0`` from ``reset_index()``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from proxydiag.errors import IngestError
from proxydiag.metrics import AliasTable
from proxydiag.run import Run
from proxydiag.run.sidecar import sidecar_for
from proxydiag.run.wide import Wide, build_table

#: step column names, in order of preference (matched case-insensitively)
STEP_NAMES = (
    "step",
    "_step",
    "global_step",
    "trainer/global_step",
    "train/global_step",
    "iteration",
    "iter",
    "steps",
    "global step",
    "num_updates",
    "update",
    "train/step",
    "rollout/step",
)
#: wall-time column names (seconds since the epoch)
WALL_NAMES = ("wall_time", "walltime", "_timestamp", "timestamp", "time")
#: key column names of the long form
KEY_NAMES = ("key", "metric", "tag", "name")
#: value column names of the long form
VALUE_NAMES = ("value", "val", "simple_value")
#: spellings of a logged value that could not be represented (see module docstring)
NULL_SPELLINGS = ("null", "none")
#: names a dataframe library gives the row index it writes beside the data: pandas' ``to_csv``
#: leaves the header cell empty (``Unnamed: 0`` once read and written again; a MultiIndex
#: leaves several, the later ones renamed ``#2``, ... by :func:`dedupe_names`), its
#: ``to_parquet`` writes ``__index_level_0__``, and ``reset_index()`` makes the index a column
#: named ``index`` (``level_0`` when there is one already)
_INDEX_NAME = re.compile(r"(|Unnamed: \d+|__index_level_\d+__|index|level_\d+)(#\d+)?")


Locate = Callable[[int], str]


@dataclass
class Notes:
    """What a tabular reader learned besides the data (goes into ``Run.attrs``)."""

    null_as_nan: int = 0
    #: the same count per column (a reader that splits a file into runs counts per run)
    null_columns: dict[str, int] = field(default_factory=dict)
    #: columns the caller asked to leave out, unread (e.g. W&B's min/max bands)
    skipped_columns: list[str] = field(default_factory=list)
    #: every key's steps strictly increase (a wide table with an increasing step column)
    monotonic: bool = False
    ignored_columns: list[str] = field(default_factory=list)
    renamed_columns: dict[str, str] = field(default_factory=dict)

    def attrs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.null_as_nan:
            out["null_as_nan"] = self.null_as_nan
            out.setdefault("notes", []).append(
                f"{self.null_as_nan} null value(s) read as NaN: the writer could not represent "
                "NaN/±inf, so the sign of an infinity was lost"
            )
        if self.ignored_columns:
            out["ignored_columns"] = self.ignored_columns
        if self.renamed_columns:
            out["renamed_columns"] = self.renamed_columns
        return out


def file_run(
    table: pl.DataFrame | Wide,
    notes: Notes,
    path: Path,
    *,
    fmt: str,
    aliases: AliasTable | None,
    attrs: Mapping[str, Any] | None = None,
) -> Run:
    """The run of one tabular file: named after it, its sidecar beside it, ``notes.attrs()``
    (or ``attrs``, when the reader added to them) as its attrs."""
    return build_table(
        table,
        name=path.stem,
        source=path,
        fmt=fmt,
        aliases=aliases,
        attrs=notes.attrs() if attrs is None else attrs,
        sidecar=sidecar_for(path),
        monotonic=notes.monotonic,
    )


def find_column(columns: Sequence[str], names: Sequence[str]) -> str | None:
    """The first of ``names`` present in ``columns`` (case-insensitive).

    >>> find_column(["Step", "loss"], STEP_NAMES)
    'Step'
    """
    lowered = {c.strip().lower(): c for c in reversed(columns)}
    for name in names:
        if name in lowered:
            return lowered[name]
    return None


def step_column(columns: Sequence[str], *, where: str) -> str:
    """The step column of ``columns``, or an IngestError at ``where`` (``file:line``).

    >>> step_column(["loss", "global_step"], where="m.csv:1")
    'global_step'
    >>> step_column(["loss"], where="m.csv:1")
    Traceback (most recent call last):
    proxydiag.errors.IngestError: m.csv:1: no step column (expected one of step, ...); rename...
    """
    step = find_column(columns, STEP_NAMES)
    if step is None:
        raise IngestError(
            f"{where}: no step column (expected one of "
            f"{', '.join(STEP_NAMES[:6])}, ...); rename or add it"
        )
    return step


def sniff(
    source: str | Path,
    *,
    suffixes: Sequence[str],
    peek_bytes: int,
    looks_right: Callable[[bytes], bool],
) -> bool:
    """A tabular reader's ``can_read``: a file named with one of ``suffixes``, or one whose
    first ``peek_bytes`` bytes pass ``looks_right`` (an unreadable file is not ours).

    >>> sniff("no/such/file.csv", suffixes=(".csv",), peek_bytes=64, looks_right=bool)
    False
    """
    path = Path(source)
    if not path.is_file():
        return False
    if path.suffix.lower() in suffixes:
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(peek_bytes)
    except OSError:
        return False
    return looks_right(head)


def is_index(name: str) -> bool:
    """A row index written beside the data (see :data:`_INDEX_NAME`), not a metric.

    >>> is_index(""), is_index("#2"), is_index("Unnamed: 0"), is_index("__index_level_0__")
    (True, True, True, True)
    >>> is_index("index"), is_index("level_0")
    (True, True)
    >>> is_index("loss"), is_index("loss#2"), is_index("index_loss")
    (False, False, False)
    """
    return _INDEX_NAME.fullmatch(name.strip()) is not None


def long_layout(columns: Sequence[str]) -> tuple[str, str, str, str | None] | None:
    """``(step, key, value, wall)`` column names when ``columns`` are the long form (a row
    index beside them aside), else None.

    >>> long_layout(["step", "key", "value", "wall_time"])
    ('step', 'key', 'value', 'wall_time')
    >>> long_layout(["", "step", "key", "value"])
    ('step', 'key', 'value', None)
    >>> long_layout(["step", "loss"]) is None
    True
    """
    step, key = find_column(columns, STEP_NAMES), find_column(columns, KEY_NAMES)
    value, wall = find_column(columns, VALUE_NAMES), find_column(columns, WALL_NAMES)
    if step is None or key is None or value is None:
        return None
    if {c for c in columns if not is_index(c)} - {step, key, value, wall}:
        return None
    return step, key, value, wall


def dedupe_names(names: Sequence[str], notes: Notes) -> list[str]:
    """Make column names unique: a repeated name gets ``#2``, ``#3`` (recorded in ``notes``).

    >>> dedupe_names(["step", "a", "a"], Notes())
    ['step', 'a', 'a#2']
    """
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        new = name if seen[name] == 1 else f"{name}#{seen[name]}"
        while new in seen and new != name:
            seen[name] += 1
            new = f"{name}#{seen[name]}"
        if new != name:
            notes.renamed_columns[new] = name
            seen[new] = 1
        out.append(new)
    return out


def steps(column: pl.Series, *, locate: Locate, rechunk: bool = True) -> pl.Series:
    """Validate a step column (any dtype) and return it as Int64; errors name the line. In
    one chunk unless ``rechunk=False``: a parse in parallel leaves one per piece of the file,
    and every copy of the index in a wide table's unpivot would repeat them (a long table
    keeps them, as its other columns do)."""
    name = column.name
    dtype = column.dtype
    if dtype == pl.Int64:
        out = column
    elif dtype.is_integer():  # UInt64, Int128 (a JSON step above 2**63)
        out = column.cast(pl.Int64, strict=False)
        _fail_first(
            out.is_null() & column.is_not_null(),
            locate,
            lambda r: f"step {column[r]} does not fit in 64 bits",
        )
    else:
        text = column.cast(pl.Utf8).str.strip_chars()
        as_int = text.cast(pl.Int64, strict=False)
        as_float = text.cast(pl.Float64, strict=False)
        bad = as_int.is_null() & (
            as_float.is_null()
            | ~as_float.is_finite()
            | (as_float != as_float.floor())
            | (as_float.abs() > 2.0**53)
        )
        _fail_first(
            bad & text.is_not_null(),
            locate,
            lambda r: f"step {text[r]!r} is not an integer that fits in 64 bits (column {name})",
        )
        out = as_int.fill_null(as_float.cast(pl.Int64, strict=False))
    if out.has_nulls():
        _fail_first(out.is_null(), locate, lambda r: f"no step in column {name}")
    return (out.rechunk() if rechunk else out).alias("step")


def increasing(steps: pl.Series) -> bool:
    """The steps strictly increase (each key of a wide table then has its steps in order).

    >>> increasing(pl.Series([1, 2, 5])), increasing(pl.Series([1, 1]))
    (True, False)
    """
    return bool((np.diff(steps.to_numpy()) > 0).all())


def values(column: pl.Series, *, locate: Locate, notes: Notes) -> pl.Series | None:
    """A metric column as Float64 (NaN/±inf spellings kept); None if it holds no number."""
    dtype = column.dtype
    if dtype.is_numeric() or dtype == pl.Null:
        return column.cast(pl.Float64)
    if dtype != pl.Utf8:
        notes.ignored_columns.append(column.name)
        return None
    text = column.str.strip_chars()
    folded = text.str.to_lowercase()
    is_null_word = folded.is_in(list(NULL_SPELLINGS))
    parsed = folded.cast(pl.Float64, strict=False)
    filled = text.is_not_null() & (text != "")
    if not (parsed.is_not_null() | is_null_word).any() and filled.any():
        notes.ignored_columns.append(column.name)  # a label column, not a metric
        return None
    bad = parsed.is_null() & filled & ~is_null_word
    _fail_first(bad, locate, lambda r: f"{column[r]!r} is not a number in column {column.name}")
    if not is_null_word.any():
        return parsed.alias(column.name)
    count = int(is_null_word.sum())
    notes.null_as_nan += count
    notes.null_columns[column.name] = notes.null_columns.get(column.name, 0) + count
    frame = pl.DataFrame({"v": parsed, "n": is_null_word})
    return frame.select(
        pl.when(pl.col("n")).then(float("nan")).otherwise(pl.col("v")).alias(column.name)
    ).to_series()


_Table = TypeVar("_Table", pl.DataFrame, Wide)


def wide_columns(
    frame: pl.DataFrame, *, step: str, wall: str | None, locate: Locate, notes: Notes
) -> Wide:
    """Validate a wide table (steps, wall times, values; errors name file and line) and note
    whether its steps strictly increase (``notes.monotonic``)."""
    frame, locate = _drop_blank_rows(frame, locate)
    step_col = steps(frame.get_column(step), locate=locate)
    notes.monotonic = increasing(step_col)
    wall_col = _wall(frame.get_column(wall), locate=locate, notes=notes) if wall else None
    metrics = []
    for column in frame.iter_columns():
        if column.name in (step, wall):
            continue
        if is_index(column.name):
            notes.ignored_columns.append(column.name)
            continue
        series = values(column, locate=locate, notes=notes)
        if series is not None:
            metrics.append(series)
    return Wide(step_col, wall_col, metrics)


def wide_to_raw(
    frame: pl.DataFrame, *, step: str, wall: str | None, locate: Locate, notes: Notes
) -> pl.DataFrame:
    """Turn a wide table into a raw frame (``step, key, value, wall_time``); empty cells drop
    (:meth:`Wide.raw`)."""
    return wide_columns(frame, step=step, wall=wall, locate=locate, notes=notes).raw()


def long_to_raw(
    frame: pl.DataFrame,
    *,
    layout: tuple[str, str, str, str | None],
    locate: Locate,
    notes: Notes,
) -> pl.DataFrame:
    """Turn a long table (step, key, value[, wall]) into a raw frame; empty values drop."""
    step, key, value, wall = layout
    notes.ignored_columns.extend(c for c in frame.columns if c not in layout)  # a row index
    frame, locate = _drop_blank_rows(frame, locate)
    vals = values(frame[value], locate=locate, notes=notes)
    if vals is None:
        raise IngestError(f"{locate(0)}: column {value} holds no numbers")
    keys = frame[key].cast(pl.Utf8)
    if keys.has_nulls():
        _fail_first(
            keys.is_null() & vals.is_not_null(), locate, lambda r: f"no key in column {key}"
        )
    out = pl.DataFrame(
        {"step": steps(frame[step], locate=locate, rechunk=False), "key": keys, "value": vals}
    )
    out = out.with_columns(  # no wall time: one null for the column
        _wall(frame[wall], locate=locate, notes=notes)
        if wall
        else pl.lit(None, dtype=pl.Float64).alias("wall_time")
    )
    return out.filter(pl.col("value").is_not_null()) if vals.has_nulls() else out


def nonempty(table: _Table, where: object) -> _Table:
    """``table`` (a raw frame or a wide table) unchanged, or an IngestError when it holds no
    value at all."""
    if (table.height if isinstance(table, pl.DataFrame) else table.points()) == 0:
        raise IngestError(f"{where}: no metric values (every cell is empty); nothing to ingest")
    return table


def as_raw(table: pl.DataFrame | Wide) -> pl.DataFrame:
    """The raw frame of a reader's table (a long table's is already one)."""
    return table.raw() if isinstance(table, Wide) else table


def _wall(column: pl.Series, *, locate: Locate, notes: Notes) -> pl.Series:
    out = values(column, locate=locate, notes=notes)
    if out is None:  # a date string column, say: keep the run, drop the wall time
        return pl.repeat(None, column.len(), dtype=pl.Float64, eager=True).alias("wall_time")
    return out.alias("wall_time")


def _drop_blank_rows(frame: pl.DataFrame, locate: Locate) -> tuple[pl.DataFrame, Locate]:
    """Rows where every cell is empty are blank lines, not data; ``locate`` keeps file rows."""
    if not frame.height or not all(column.has_nulls() for column in frame.iter_columns()):
        return frame, locate  # a column without a null (the step, mostly): no row is blank
    blank = frame.select(pl.all_horizontal(pl.all().is_null())).to_series()
    if not blank.any():
        return frame, locate
    rows = (~blank).arg_true()
    return frame.filter(~blank), lambda r: locate(int(rows[r]))


def _fail_first(mask: pl.Series, locate: Locate, message: Callable[[int], str]) -> None:
    """Raise naming the first row where ``mask`` is true (nulls count as false)."""
    if not mask.any():
        return
    row = int(mask.fill_null(False).arg_true()[0])
    raise IngestError(f"{locate(row)}: {message(row)}")
