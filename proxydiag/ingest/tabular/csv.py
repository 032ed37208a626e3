"""CSV/TSV metric tables, wide (step + one column per metric) or long (step, key, value).

The fast path is one typed ``polars.read_csv`` of the rows below the header (which the csv
module reads) that takes quotes literally, so that a file with a quote in its body fails it (a
number with a quote does not parse). Only when it refuses the file does a second, all-text read
(quotes honoured) find the first bad cell (vectorised) so that the error names ``file:line`` and
the column. The value spellings are those of :mod:`proxydiag.ingest.tabular.tables`.

The number of fields of every row is checked exactly (the csv module; a cheap count first when
the body has no quote) only when polars could have hidden a wrong one: polars refuses a row
with too many fields, except a last line without newline, and reads a row with too few, or a
blank line, with a null in the last column. A clean file is never scanned from Python.

Damage and oddities, and what happens:

* a last line without newline that has fewer fields than the header was cut mid-write:
  it is dropped with an :class:`~proxydiag.errors.IngestWarning` (a complete one is kept);
* any other row with a different number of fields than the header is an error naming the line;
* a header repeated inside the file (runs appended after a restart) separates segments; the
  restart rules of :mod:`proxydiag.run._segments` then apply;
* a column name given twice keeps both columns, the later one renamed ``name#2`` (warning);
* blank lines, a UTF-8 BOM and Windows newlines are accepted.

A directory of DeepSpeed ``csv_monitor`` files is one run
(:mod:`proxydiag.ingest.tabular.csv_monitor`).
"""

from __future__ import annotations

import csv as _csv
import io
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import ReadContext
from proxydiag.ingest.tabular import _bytes, _holes, csv_monitor, tables
from proxydiag.run import Run
from proxydiag.run.wide import Wide

NAME = "csv"
SUFFIXES = (".csv", ".tsv")
_PEEK_BYTES = 8192
_NON_SPACE = re.compile(rb"\S")


def can_read(source: str | Path) -> bool:
    """A ``.csv``/``.tsv`` file, a text file whose header names a step column, or a
    DeepSpeed csv_monitor directory."""
    path = Path(source)
    if path.is_dir():
        return csv_monitor.is_monitor_dir(path)
    return tables.sniff(path, suffixes=SUFFIXES, peek_bytes=_PEEK_BYTES, looks_right=_step_header)


def _step_header(head: bytes) -> bool:
    """The first line is a comma- or tab-separated header that starts with a step column."""
    first = head.split(b"\n", 1)[0].removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")
    for sep in (",", "\t"):
        cells = [c.strip().strip('"') for c in first.split(sep)]
        if len(cells) >= 2 and tables.find_column(cells, tables.STEP_NAMES) in cells[:1]:
            return True
    return False


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    path = Path(source)
    if path.is_dir():
        return [csv_monitor.read(path, ctx, read_table)]
    table, notes = read_any(path)
    fmt = "csv" if _separator(path, b"") == "," else "tsv"
    return [tables.file_run(table, notes, path, fmt=fmt, aliases=ctx.aliases)]


def read_table(
    path: Path,
    *,
    skip: Callable[[str], bool] | None = None,
    holes: bool = True,
) -> tuple[pl.DataFrame, tables.Notes]:
    """Read one CSV/TSV file into a raw frame (``step, key, value, wall_time``).

    Columns for which ``skip(name)`` is true are left out before their cells are read (listed
    in ``notes.skipped_columns``); the file's shape is still checked whole. ``holes=False``:
    no warning of empty cells after a column logged every row (:func:`_holes.holes`; a
    W&B export's columns are runs of their own lengths).
    """
    table, notes = read_any(path, skip=skip, holes=holes)
    return tables.as_raw(table), notes


def read_any(
    path: Path,
    *,
    skip: Callable[[str], bool] | None = None,
    holes: bool = True,
) -> tuple[pl.DataFrame | Wide, tables.Notes]:
    """As :func:`read_table`, but a wide file stays a :class:`~proxydiag.run.wide.Wide`
    table (:func:`~proxydiag.run.wide.build_table` builds its run without a raw frame)."""
    mapped = _bytes.map_file(path)
    if _blank(mapped, 0):
        raise IngestError(f"{path}: empty file; nothing to ingest")
    sep = _separator(path, mapped)
    header, body_at = _header(path, mapped, sep)
    data = _drop_cut_tail(path, mapped, sep, len(header))
    if _blank(data, body_at):
        raise IngestError(f"{path}: a header and no data rows; nothing to ingest")
    notes = tables.Notes()
    names = tables.dedupe_names(header, notes)
    layout = tables.long_layout(names)
    # an untouched file is read by polars from its path (its own mmap, no copy)
    source: Path | bytes = path if data is mapped else bytes(data)
    skipped = _skipped(names, layout, skip)
    # only a long table's keys need the quote check: a wide file's body is not scanned
    quoted = bool(layout) and data.find(b'"', body_at) >= 0
    _bytes.release(data)  # that scan touched every page: polars maps the file itself
    frame = _typed(source, sep, names, layout, skipped, quoted=quoted)
    if frame is None or _maybe_ragged(frame, data):
        _check_fields(path, data, body_at, sep, len(header))
    for new, old in notes.renamed_columns.items():
        if tables.is_index(old):  # a pandas MultiIndex: its levels are not read
            continue
        warnings.warn(
            IngestWarning(
                f"{path}:1: column {old!r} appears twice; the later one is read as {new!r}"
            ),
            stacklevel=2,
        )
    step = layout[0] if layout else tables.step_column(names, where=f"{path}:1")
    if frame is None:
        frame = _text(path, source, sep, names)

    def line_of(row: int) -> str:
        return f"{path}:{_line_of_row(data, body_at, sep, row)}"

    frame, locate = _drop_repeated_headers(frame, header, step, line_of)
    if skipped:
        notes.skipped_columns = skipped
        frame = frame.drop(skipped, strict=False)  # the typed read kept the last column only
    if layout:
        raw = tables.long_to_raw(frame, layout=layout, locate=locate, notes=notes)
        return tables.nonempty(raw, path), notes
    wall = tables.find_column(names, tables.WALL_NAMES)
    wide = tables.wide_columns(frame, step=step, wall=wall, locate=locate, notes=notes)
    if holes:
        _holes.warn_holes(
            path,
            _holes.holes(wide),
            writer="pandas' to_csv writes NaN as an empty cell",
            cure="write with na_rep='nan'",
        )
    return tables.nonempty(wide, path), notes


def _separator(path: Path, data: _bytes.Buffer) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    first = data[: data.find(b"\n")] if b"\n" in data[:65536] else data[:65536]
    return "\t" if b"\t" in first and b"," not in first else ","


def _blank(data: _bytes.Buffer, start: int) -> bool:
    """Nothing but whitespace from ``start`` on (without copying the data)."""
    return _NON_SPACE.search(data, start) is None


def _header(path: Path, data: _bytes.Buffer, sep: str) -> tuple[list[str], int]:
    """The header's cells (BOM stripped) and the byte offset where the body starts."""
    end = data.find(b"\n")
    end = len(data) if end < 0 else end + 1
    line = data[:end].removeprefix(b"\xef\xbb\xbf")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{path}:1: the header is not UTF-8 text; save the file as UTF-8"
        ) from exc
    cells = _split(text.rstrip("\r\n"), sep, f"{path}:1")
    if len(cells) < 2:
        raise IngestError(
            f"{path}:1: the header has {len(cells)} column(s); expected a step column and metrics"
        )
    return cells, end


def _drop_cut_tail(path: Path, data: _bytes.Buffer, sep: str, n_fields: int) -> _bytes.Buffer:
    """Drop a last line that was cut mid-write (no newline and too few fields)."""
    if data[-1:] == b"\n":
        return data
    start = data.rfind(b"\n") + 1
    if start == 0:
        return data  # only a header
    line = _bytes.count_byte(data, ord("\n")) + 1
    fields = _split(data[start:].decode("utf-8", "replace"), sep, f"{path}:{line}")
    if len(fields) >= n_fields or not data[start:].strip():
        return data
    warnings.warn(
        IngestWarning(
            f"{path}:{line}: the last line is cut ({len(fields)} of {n_fields} fields, no "
            "newline); read the complete rows before it"
        ),
        stacklevel=3,
    )
    return bytes(data[:start])


def _check_fields(path: Path, data: _bytes.Buffer, body_at: int, sep: str, n_fields: int) -> None:
    """Every non-blank row has as many fields as the header (cheap count, exact scan if not)."""
    body = np.frombuffer(data, dtype=np.uint8, offset=body_at)
    if not np.count_nonzero(body == ord('"')):
        n_lines = np.count_nonzero(body == ord("\n")) + (data[-1:] != b"\n")
        if np.count_nonzero(body == ord(sep)) == n_lines * (n_fields - 1):
            return  # blank lines or a miscount: the exact scan below decides
    reader = _csv.reader(
        io.StringIO(bytes(data).decode("utf-8", "replace"), newline=""), delimiter=sep
    )
    try:
        next(reader)
        for row in reader:
            if row and len(row) != n_fields:
                raise IngestError(
                    f"{path}:{reader.line_num}: {len(row)} fields where the header has "
                    f"{n_fields}; fix or remove the row"
                )
    except _csv.Error as exc:
        raise IngestError(f"{path}:{reader.line_num}: {exc}; is this a CSV file?") from exc


def _skipped(
    names: list[str],
    layout: tuple[str, str, str, str | None] | None,
    skip: Callable[[str], bool] | None,
) -> list[str]:
    """The columns of a wide table that ``skip`` leaves out (never the step column)."""
    if skip is None or layout:
        return []
    step = tables.find_column(names, tables.STEP_NAMES)
    return [n for n in names if n != step and skip(n)]


def _typed(
    data: Path | bytes,
    sep: str,
    names: list[str],
    layout: tuple[str, str, str, str | None] | None,
    skipped: list[str],
    *,
    quoted: bool,
) -> pl.DataFrame | None:
    """The fast path: one typed read of the rows after the header (step Int64, key text, the
    rest Float64, quotes taken literally); None when polars refuses a cell or a row, a key
    holds a quote (``quoted``: the body of a long table has one at all), or there is no step
    column.

    The ``skipped`` columns are not parsed, except the file's last one: a short row shows
    as a null there (:func:`_maybe_ragged`)."""
    step = layout[0] if layout else tables.find_column(names, tables.STEP_NAMES)
    key = layout[1] if layout else None
    if step is None:
        return None
    dtypes: list[pl.DataType] = [  # a row index (a pandas DatetimeIndex, say) stays text
        pl.Int64() if n == step else pl.Utf8() if n == key or tables.is_index(n) else pl.Float64()
        for n in names
    ]
    left_out = set(skipped)
    project = [i for i, n in enumerate(names) if n not in left_out or i == len(names) - 1]
    try:
        frame = pl.read_csv(
            data,
            has_header=False,
            skip_rows=1,
            schema_overrides=dtypes,
            quote_char=None,
            columns=project if skipped else None,
            **_options(sep, names),
        )
    except pl.exceptions.PolarsError:
        return None
    if quoted and key is not None and frame[key].str.contains('"', literal=True).any():
        return None
    return frame


def _text(path: Path, data: Path | bytes, sep: str, names: list[str]) -> pl.DataFrame:
    """Every cell as text, so that :mod:`~proxydiag.ingest.tabular.tables` finds the bad one."""
    try:
        return pl.read_csv(data, infer_schema=False, **_options(sep, names))
    except pl.exceptions.PolarsError as exc:
        reason = str(exc).splitlines()[0]
        raise IngestError(f"{path}: cannot parse as CSV ({reason}); is it UTF-8 text?") from exc


def _options(sep: str, names: list[str]) -> dict[str, Any]:
    return {"separator": sep, "new_columns": names, "raise_if_empty": False, "glob": False}


def _maybe_ragged(frame: pl.DataFrame, data: _bytes.Buffer) -> bool:
    """Whether a row may have the wrong number of fields although the typed read took the file
    (see the module docstring)."""
    return frame.to_series(-1).has_nulls() or data[-1:] != b"\n"


def _split(text: str, sep: str, where: str) -> list[str]:
    """The fields of one line; a line the csv module cannot split is an IngestError."""
    try:
        return next(_csv.reader([text], delimiter=sep), [])
    except _csv.Error as exc:
        raise IngestError(f"{where}: {exc}; is this a CSV file?") from exc


def _drop_repeated_headers(
    frame: pl.DataFrame, header: list[str], step: str, locate: tables.Locate
) -> tuple[pl.DataFrame, tables.Locate]:
    if frame[step].dtype != pl.Utf8:  # the typed read (which may leave columns out) ends here
        return frame, locate
    again = (frame[step].str.strip_chars() == header[frame.columns.index(step)].strip()).fill_null(
        False
    )
    if not again.any():
        return frame, locate
    rows = (~again).arg_true()
    return frame.filter(~again), lambda r: locate(int(rows[r]))


def _line_of_row(data: _bytes.Buffer, body_at: int, sep: str, row: int) -> int:
    """The 1-based file line of data row ``row`` (polars keeps blank lines as rows)."""
    body = data[body_at:]
    if b'"' not in body:
        return row + 2
    reader = _csv.reader(io.StringIO(body.decode("utf-8", "replace"), newline=""), delimiter=sep)
    try:
        for index, _ in enumerate(reader):
            if index == row:
                return reader.line_num + 1
    except _csv.Error:
        pass
    return row + 2
