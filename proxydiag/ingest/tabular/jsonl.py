"""JSON Lines metric records: flat ``{"step": N, "loss": ...}`` or veRL's file logger
``{"step": N, "data": {...}}`` (``verl/utils/tracking.py``, written with orjson).

* ``NaN``, ``Infinity`` and ``-Infinity`` tokens (Python's ``json.dumps``) are read as such.
* ``null`` is a value the writer could not represent — orjson writes NaN and ±inf as ``null`` —
  so it becomes NaN and ``attrs["null_as_nan"]`` says how many (the sign of an inf is lost).
* A key absent from a record is no row. Nested objects are flattened with ``/``.
* A last line cut mid-write is dropped with an :class:`~proxydiag.errors.IngestWarning`;
  any other unparseable line is an error naming ``file:line``.

Fast path (:mod:`~proxydiag.ingest.tabular._jsonl_fast`): polars parses the file with the schema of
its first records, checked by byte scans; when unsure, the exact path reads record by record.
"""

from __future__ import annotations

import json
import mmap
import re
import warnings
from pathlib import Path

import polars as pl

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import ReadContext
from proxydiag.ingest.tabular import _bytes, tables
from proxydiag.ingest.tabular._jsonl_fast import fast_frame, flatten_record
from proxydiag.run import Run
from proxydiag.run.wide import Wide

NAME = "jsonl"
SUFFIXES = (".jsonl", ".ndjson")
FORMAT = "jsonl"
_NON_SPACE = re.compile(rb"\S")
_GLOB = re.compile(r"[*?\[\]{}]")


def can_read(source: str | Path) -> bool:
    """A ``.jsonl``/``.ndjson`` file, or a file whose first line is a JSON object with a step.

    ms-swift's ``logging.jsonl`` names its step only inside ``"global_step/max_steps": "2/4389"``:
    the console reader's dict dialect reads that counter, so such a file is left to it.
    """
    if _swift_counter_only(Path(source)):
        return False
    return tables.sniff(source, suffixes=SUFFIXES, peek_bytes=1 << 16, looks_right=_step_record)


def _swift_counter_only(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            first = fh.readline(1 << 16).strip()
    except OSError:
        return False
    if b'"global_step/max_steps"' not in first:
        return False
    keys = _record_keys(first)
    return keys is not None and tables.find_column(keys, tables.STEP_NAMES) is None


def _step_record(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].strip()
    if not first.startswith(b"{") or not first.endswith(b"}"):
        return False
    keys = _record_keys(first)
    return keys is not None and tables.find_column(keys, tables.STEP_NAMES) is not None


def _record_keys(line: bytes) -> list[str] | None:
    """The keys of ``line`` read as a JSON object; None when it is not one."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return list(record) if isinstance(record, dict) else None


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    path = Path(source)
    table, notes, verl = read_any(path)
    attrs = notes.attrs()
    if verl:
        attrs["framework"] = "verl"
    return [tables.file_run(table, notes, path, fmt=FORMAT, aliases=ctx.aliases, attrs=attrs)]


def read_table(path: Path) -> tuple[pl.DataFrame, tables.Notes, bool]:
    """Raw frame, notes, and whether the records had veRL's ``{"step", "data"}`` shape."""
    table, notes, verl = read_any(path)
    return tables.as_raw(table), notes, verl


def read_any(path: Path) -> tuple[pl.DataFrame | Wide, tables.Notes, bool]:
    """As :func:`read_table`, with records of one step each as a
    :class:`~proxydiag.run.wide.Wide` table (:func:`~proxydiag.run.wide.build_table`
    builds its run without a raw frame); records of one point each (``step, key, value``: the
    long form) as a raw frame."""
    mapped = _bytes.map_file(path)
    if _NON_SPACE.search(mapped) is None:
        raise IngestError(f"{path}: empty file; nothing to ingest")
    data = _drop_cut_tail(path, mapped)
    if _NON_SPACE.search(data) is None:
        raise IngestError(f"{path}: no complete JSON line; nothing to ingest")
    notes = tables.Notes()
    fast = fast_frame(data, _polars_input(path, data))
    frame, notes.null_as_nan = fast if fast is not None else (_exact_frame(path, bytes(data)), 0)
    verl = _is_verl(data)
    layout = tables.long_layout(frame.columns)
    if layout:
        raw = tables.long_to_raw(frame, layout=layout, locate=_locator(path, data), notes=notes)
        return tables.nonempty(raw, path), notes, verl
    step = tables.step_column(frame.columns, where=f"{path}:1")
    wall = tables.find_column(frame.columns, tables.WALL_NAMES)
    wide = tables.wide_columns(
        frame, step=step, wall=wall, locate=_locator(path, data), notes=notes
    )
    return tables.nonempty(wide, path), notes, verl


def _polars_input(path: Path, data: _bytes.Buffer) -> Path | bytes:
    """What polars parses: the file itself when ``data`` is its untouched map (polars reads
    it without a Python copy), unless the name has a character polars would expand as a glob."""
    if isinstance(data, mmap.mmap) and not _GLOB.search(str(path)):
        return path
    return bytes(data)


def _is_verl(data: _bytes.Buffer) -> bool:
    """veRL's file logger writes ``{"step": N, "data": {...}}`` and nothing else."""
    end = data.find(b"\n")
    try:
        first = json.loads(data[:end] if end >= 0 else data[:])
    except ValueError:
        return False
    return isinstance(first, dict) and set(first) == {"step", "data"}


def _drop_cut_tail(path: Path, data: _bytes.Buffer) -> _bytes.Buffer:
    if data[-1:] == b"\n":
        return data
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
        return data
    except ValueError:
        pass
    if start == 0:
        raise IngestError(f"{path}:1: the only line is not complete JSON; nothing to ingest")
    line = data[:start].count(b"\n") + 1
    warnings.warn(
        IngestWarning(
            f"{path}:{line}: the last line is cut (incomplete JSON, no newline);"
            " read the complete lines before it"
        ),
        stacklevel=3,
    )
    return data[:start]


def _exact_frame(path: Path, data: bytes) -> pl.DataFrame:
    """Record-by-record parse (the fallback): exact, and names the first bad line.

    Every value becomes text (``repr`` of a float round-trips exactly; ``None`` is ``"null"``)
    and :func:`proxydiag.ingest.tabular.tables.values` parses the columns.
    """
    rows: list[dict[str, str]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            reason = getattr(exc, "msg", "invalid")
            raise IngestError(
                f"{path}:{number}: not valid JSON ({reason}); fix or remove the line"
            ) from exc
        if not isinstance(record, dict):
            raise IngestError(
                f"{path}:{number}: a JSON {type(record).__name__}, expected an object"
            )
        rows.append(flatten_record(record))
    names = list(dict.fromkeys(k for row in rows for k in row))
    return pl.from_dicts(rows, schema=dict.fromkeys(names, pl.Utf8))


def _locator(path: Path, data: _bytes.Buffer) -> tables.Locate:
    """Map a record index to its file line (blank lines are not records)."""

    def locate(row: int) -> str:
        seen = -1
        for number, line in enumerate(data[:].split(b"\n"), start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    return f"{path}:{number}"
        return f"{path}:?"

    return locate
