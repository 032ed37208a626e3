"""JSON Lines metric records: flat ``{"step": N, "loss": ...}`` or veRL's file logger
``{"step": N, "data": {...}}`` (``verl/utils/tracking.py``, written with orjson).

* ``NaN``, ``Infinity`` and ``-Infinity`` tokens (Python's ``json.dumps``) are read as such.
* ``null`` is a value the writer could not represent — orjson writes NaN and ±inf as ``null`` —
  so it becomes NaN and ``attrs["null_as_nan"]`` says how many (the sign of an inf is lost).
* A key absent from a record is no row. Nested objects are flattened with ``/``.
* A last line cut mid-write is dropped with an :class:`~proxydiag.errors.IngestWarning`;
  any other unparseable line is an error naming ``file:line``.

Fast path: the non-standard tokens are replaced in bulk by rare finite sentinels, the file is
parsed by ``polars.read_ndjson`` and the sentinels turned back into NaN/±inf; if a sentinel value
also occurs in the data itself the file is re-read exactly, record by record.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import ReadContext, tabular
from proxydiag.ingest.build import build_run, sidecar_for
from proxydiag.run import Run

NAME = "jsonl"
SUFFIXES = (".jsonl", ".ndjson")
FORMAT = "jsonl"
_NON_SPACE = re.compile(rb"\S")
_TOKENS = re.compile(rb"([:,\[]\s*)(NaN|-Infinity|Infinity|null)(?=\s*[,}\]])")
#: token -> (sentinel text, value it stands for); sentinels are finite so any JSON parser reads them
_SENTINELS = {
    b"NaN": (b"-1.2345678987654321e-307", float("nan")),
    b"Infinity": (b"1.2345678987654322e-307", float("inf")),
    b"-Infinity": (b"-1.2345678987654323e-307", float("-inf")),
    b"null": (b"1.2345678987654324e-307", float("nan")),
}


def can_read(source: str | Path) -> bool:
    """A ``.jsonl``/``.ndjson`` file, or a file whose first line is a JSON object with a step."""
    return tabular.sniff(source, suffixes=SUFFIXES, peek_bytes=1 << 16, looks_right=_step_record)


def _step_record(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].strip()
    if not first.startswith(b"{") or not first.endswith(b"}"):
        return False
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and tabular.find_column(list(record), tabular.STEP_NAMES) is not None


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    path = Path(source)
    raw, notes, verl = read_table(path)
    attrs = notes.attrs()
    if verl:
        attrs["framework"] = "verl"
    return [
        build_run(raw, name=path.stem, source=path, fmt=FORMAT, aliases=ctx.aliases, attrs=attrs,
                  sidecar=sidecar_for(path), monotonic=notes.monotonic)
    ]


def read_table(path: Path) -> tuple[pl.DataFrame, tabular.Notes, bool]:
    """Raw frame, notes, and whether the records had veRL's ``{"step", "data"}`` shape."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(f"{path}: cannot read ({exc.strerror})") from exc
    if _NON_SPACE.search(data) is None:
        raise IngestError(f"{path}: empty file; nothing to ingest")
    data = _drop_cut_tail(path, data)
    if _NON_SPACE.search(data) is None:
        raise IngestError(f"{path}: no complete JSON line; nothing to ingest")
    notes = tabular.Notes()
    fast = _fast_frame(data)
    frame, notes.null_as_nan = fast if fast is not None else (_exact_frame(path, data), 0)
    verl = _is_verl(data)
    frame, _ = _flatten(frame)
    step = tabular.step_column(frame.columns, where=f"{path}:1")
    wall = tabular.find_column(frame.columns, tabular.WALL_NAMES)
    raw = tabular.wide_to_raw(frame, step=step, wall=wall, locate=_locator(path, data), notes=notes)
    return tabular.nonempty(raw, path), notes, verl


def _is_verl(data: bytes) -> bool:
    """veRL's file logger writes ``{"step": N, "data": {...}}`` and nothing else."""
    try:
        first = json.loads(data[: data.find(b"\n")] if b"\n" in data else data)
    except ValueError:
        return False
    return isinstance(first, dict) and set(first) == {"step", "data"}


def _drop_cut_tail(path: Path, data: bytes) -> bytes:
    if data.endswith(b"\n"):
        return data
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
        return data
    except ValueError:
        pass
    if start == 0:
        raise IngestError(f"{path}:1: the only line is not complete JSON; nothing to ingest")
    line = data.count(b"\n") + 1
    warnings.warn(
        IngestWarning(
            f"{path}:{line}: the last line is cut (incomplete JSON, no newline);"
            " read the complete lines before it"
        ),
        stacklevel=3,
    )
    return data[:start]


def _fast_frame(data: bytes) -> tuple[pl.DataFrame, int] | None:
    """Parse with polars; None if unsure (then the exact record-by-record path runs).

    Returns the frame (NaN/±inf restored) and the number of ``null`` values read as NaN.
    ``null`` alone (orjson's output) is told apart from an absent key line by line with
    vectorised string search; NaN/Infinity tokens (Python's output) are swapped for sentinels.
    """
    if b"NaN" not in data and b"Infinity" not in data:
        try:
            frame, leaves = _flatten(pl.read_ndjson(data, infer_schema_length=None))
        except pl.exceptions.PolarsError:
            return None
        total = data.count(b"null")
        if not total:
            return frame, 0
        nulls = _explicit_nulls(data, frame, leaves, total=total)
        if nulls is not None:
            return nulls, total
    counts: dict[bytes, int] = {}
    data = _swap_tokens(data, counts)  # a sentinel already in the data shows in the counts
    try:
        frame, _ = _flatten(pl.read_ndjson(data, infer_schema_length=None))
    except pl.exceptions.PolarsError:
        return None
    floats = [c for c, t in frame.schema.items() if t == pl.Float64]
    exprs = {c: pl.col(c) for c in floats}
    for token, (text, value) in _SENTINELS.items():
        sentinel = float(text)
        if sum(int((frame[c] == sentinel).sum()) for c in floats) != counts.get(token, 0):
            return None  # a token inside a string, say: read exactly instead
        for c in floats:
            exprs[c] = pl.when(pl.col(c) == sentinel).then(value).otherwise(exprs[c])
    if any(counts.values()) and floats:
        frame = frame.with_columns([e.alias(c) for c, e in exprs.items()])
    return frame, counts.get(b"null", 0)


def _explicit_nulls(
    data: bytes, frame: pl.DataFrame, leaves: dict[str, str], *, total: int
) -> pl.DataFrame | None:
    """``frame`` with each explicit ``"key": null`` as NaN (absent keys stay null), or None
    when the ``null`` tokens cannot all be attributed that way (spacing, strings, nesting)."""
    try:
        lines = pl.Series("line", data.decode("utf-8").split("\n"))
    except UnicodeDecodeError:
        return None
    lines = lines.filter(lines.str.strip_chars() != "")
    if lines.len() != frame.height:
        return None
    found, updates = 0, []
    for col, dtype in frame.schema.items():
        if not (dtype.is_numeric() or dtype == pl.Null) or not frame[col].null_count():
            continue
        rows = frame[col].is_null().arg_true()  # search only the lines where col is null
        key = json.dumps(leaves.get(col, col), ensure_ascii=False)
        sub = lines.gather(rows)
        hit = sub.str.contains(f"{key}:null", literal=True) | sub.str.contains(
            f"{key}: null", literal=True)
        if not hit.any():
            continue
        rows = rows.filter(hit)
        found += rows.len()
        updates.append(frame[col].cast(pl.Float64).scatter(rows, float("nan")))
    if found != total:
        return None
    return frame.with_columns(updates)


def _swap_tokens(data: bytes, counts: dict[bytes, int]) -> bytes:
    """Replace value tokens by sentinels, counting them: C-speed ``bytes.replace`` for the
    spellings writers use (``"k": null`` / ``"k":null``), a regex for anything left."""
    leftover = False
    for token in (b"-Infinity", b"Infinity", b"NaN", b"null"):
        total = data.count(token)
        if not total:
            continue
        for prefix in (b": ", b":"):
            n = data.count(prefix + token)
            if n:
                counts[token] = counts.get(token, 0) + n
                data = data.replace(prefix + token, prefix + _SENTINELS[token][0])
                total -= n
        leftover = leftover or total > 0
    if leftover:

        def swap(match: re.Match[bytes]) -> bytes:
            counts[match.group(2)] = counts.get(match.group(2), 0) + 1
            return match.group(1) + _SENTINELS[match.group(2)][0]

        data = _TOKENS.sub(swap, data)
    return data


def _exact_frame(path: Path, data: bytes) -> pl.DataFrame:
    """Record-by-record parse (the fallback): exact, and names the first bad line.

    Every value becomes text (``repr`` of a float round-trips exactly; ``None`` is ``"null"``)
    and :func:`proxydiag.ingest.tabular.values` parses the columns.
    """
    rows: list[dict[str, str]] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            reason = getattr(exc, "msg", "invalid")
            raise IngestError(f"{path}:{number}: not valid JSON ({reason}); fix or remove the line") from exc
        if not isinstance(record, dict):
            raise IngestError(f"{path}:{number}: a JSON {type(record).__name__}, expected an object")
        rows.append(_flatten_dict(record))
    names = list(dict.fromkeys(k for row in rows for k in row))
    return pl.from_dicts(rows, schema=dict.fromkeys(names, pl.Utf8))


def _flatten_dict(record: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in record.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            out.update(_flatten_dict(value, "" if key == "data" and not prefix else name + "/"))
        elif value is None:
            out[name] = "null"
        else:
            out[name] = repr(value) if isinstance(value, float) else str(value)
    return out


def _flatten(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str]]:
    """Unnest struct columns (``data`` without prefix, others as ``parent/child``); also
    returns each column's key as written in the JSON (its leaf name)."""
    leaves = {c: c for c in frame.columns}
    while True:
        structs = [c for c, t in frame.schema.items() if isinstance(t, pl.Struct)]
        if not structs:
            return frame, leaves
        for col in structs:
            dtype = frame.schema[col]
            fields = dtype.fields if isinstance(dtype, pl.Struct) else []
            prefix = "" if col == "data" else f"{col}/"
            leaves.update({prefix + f.name: f.name for f in fields})
            frame = frame.with_columns(
                [pl.col(col).struct.field(f.name).alias(prefix + f.name) for f in fields]
            ).drop(col)


def _locator(path: Path, data: bytes) -> tabular.Locate:
    """Map a record index to its file line (blank lines are not records)."""

    def locate(row: int) -> str:
        seen = -1
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    return f"{path}:{number}"
        return f"{path}:?"

    return locate
