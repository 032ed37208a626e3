"""The JSON Lines reader's fast path: polars parses the file, and byte scans check it.

polars parses the file (from its path; Python only memory-maps it for the byte scans below)
with the schema of its first records: inferring the schema from every record costs as much as
the parse itself. That schema is trusted for flat records of numbers and for veRL's shape when
every key of the file is accounted for: with no backslash in the file every ``"`` opens or
closes a string, so half the quote count is the number of keys plus string values, and it must
equal the non-null cells plus the explicit ``null`` values. A key the first records missed
(veRL logs validation scores and checkpoint timings every N steps only) breaks the equality on
the lines that hold it: those lines alone are parsed by Python and their new keys join the
frame, and then every line's keys must be its cells. Anything else that breaks it (a string,
too many such lines) has the file parsed again with the schema of every record. An explicit
``null`` is told apart from an absent key by searching the lines of the null cells for
``"key": null``. ``NaN``/``Infinity`` tokens are replaced in bulk by rare finite sentinels
before the parse and turned back into NaN/±inf after it. When a token cannot be placed that way
(a sentinel value in the data, a token inside a string) :func:`fast_frame` gives None and the
reader (:mod:`proxydiag.ingest.tabular.jsonl`) reads the file exactly, record by record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from proxydiag.ingest.tabular import _bytes
from proxydiag.run.wide import points

#: bytes per line above which finding newlines one by one beats scanning every byte
_LONG_LINE = 1024


#: lines with keys the first records missed that are always parsed one by one (else at most an
#: eighth of the records)
_LATE_LINES = 64


_TOKENS = re.compile(rb"([:,\[]\s*)(NaN|-Infinity|Infinity|null)(?=\s*[,}\]])")


#: token -> (sentinel text, value it stands for); sentinels are finite so any JSON parser reads them
_SENTINELS = {
    b"NaN": (b"-1.2345678987654321e-307", float("nan")),
    b"Infinity": (b"1.2345678987654322e-307", float("inf")),
    b"-Infinity": (b"-1.2345678987654323e-307", float("-inf")),
    b"null": (b"1.2345678987654324e-307", float("nan")),
}


def fast_frame(data: _bytes.Buffer, source: Path | bytes) -> tuple[pl.DataFrame, int] | None:
    """Parse with polars (``source``: the file or its bytes); None if unsure (then the exact
    record-by-record path runs).

    Returns the flat frame (NaN/±inf restored) and the number of ``null`` values read as NaN.
    """
    if _contains(data, b"NaN") or _contains(data, b"Infinity"):
        return _swapped_frame(bytes(data))
    return _trusted_head(data, source) or _every_record(bytes(data))


def _trusted_head(data: _bytes.Buffer, source: Path | bytes) -> tuple[pl.DataFrame, int] | None:
    """The frame parsed with the schema of the first records, and the keys they missed read
    from their lines, when the key count shows every key found (see the module docstring)."""
    head = _head_frame(data, source)
    if head is None:
        return None
    frame, leaves, unaccounted, schema = head
    if not unaccounted:
        return frame, 0
    lines = _record_lines(data, frame.height)
    nulls = _explicit_nulls(data, frame, leaves, lines) if lines is not None else None
    if nulls is None or nulls[1] == unaccounted:
        return nulls
    late = _late_columns(data, nulls[0], schema, unaccounted - nulls[1], lines)
    return None if late is None else (nulls[0].with_columns(late[0]), nulls[1] + late[1])


def _late_columns(
    data: _bytes.Buffer,
    frame: pl.DataFrame,
    schema: pl.Schema,
    missing: int,
    lines: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[pl.Series], int] | None:
    """The keys the first records missed, as Float64 columns beside ``frame`` (flat, explicit
    nulls filled), and how many of their values were explicit ``null`` (NaN): a record that
    holds one has more keys on its line than cells in its row, and only those lines are parsed,
    by Python. None when those lines are more than an eighth of the records (parsing every
    record is cheaper), when a new key holds anything but a number or ``null`` or is not a
    leaf where the first records have theirs, when a line's keys are still not its cells, or
    when the new cells are not the ``missing`` keys of the whole file (a veRL record whose
    "data" is null has as many keys as one with an object, so only the total shows it).
    ``lines`` are the records' lines (:func:`_record_lines`), if already found.
    """
    lines = lines or _record_lines(data, frame.height)
    if lines is None:
        return None
    quotes = _bytes.byte_positions(data, ord('"'))
    keys = (np.searchsorted(quotes, lines[1]) - np.searchsorted(quotes, lines[0])) // 2
    verl = isinstance(schema.get("data"), pl.Struct)
    cells = frame.select(pl.sum_horizontal(pl.all().is_not_null())).to_series().to_numpy()
    cells = cells + verl  # veRL's "data" key holds no cell of its own
    rows = np.flatnonzero(keys != cells)
    if not len(rows) or len(rows) > max(_LATE_LINES, frame.height // 8):
        return None
    late: dict[str, tuple[list[int], list[float]]] = {}
    nulls, known = 0, set(frame.columns)
    for row, a, b in zip(
        rows.tolist(), lines[0][rows].tolist(), lines[1][rows].tolist(), strict=True
    ):
        record = json.loads(data[a:b])
        if verl:
            if not isinstance(record, dict) or set(record) - {"step", "data"}:
                return None
            record = record.get("data") or {}
        if not isinstance(record, dict):
            return None
        added = 0
        for key, value in record.items():
            if key in known:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float | None):
                return None
            try:
                number = float("nan") if value is None else float(value)
            except OverflowError:  # an integer beyond any float
                return None
            cells_of = late.setdefault(key, ([], []))
            cells_of[0].append(row)
            cells_of[1].append(number)
            nulls += value is None
            added += 1
        if keys[row] != cells[row] + added:
            return None
    columns = [  # scatter writes in place: one column of nulls each
        pl.repeat(None, frame.height, dtype=pl.Float64, eager=True).scatter(at, values).alias(key)
        for key, (at, values) in late.items()
    ]
    if not columns or points(columns) != missing:
        return None
    return columns, nulls


def _every_record(data: bytes) -> tuple[pl.DataFrame, int] | None:
    """The frame parsed with the schema of every record: each ``null`` found on its line,
    else swapped for a sentinel."""
    parsed = _polars_frame(data)
    if parsed is None:
        return None
    frame, leaves = parsed
    total = data.count(b"null")
    if not total:
        return frame, 0
    nulls = _explicit_nulls(data, frame, leaves)
    if nulls is not None and nulls[1] == total:
        return nulls
    return _swapped_frame(data)


def _contains(data: _bytes.Buffer, token: bytes) -> bool:
    """Whether ``token`` occurs, looking first for its capital letter alone (memchr: much
    faster, and metric names rarely hold one)."""
    return data.find(token.lstrip(b"-")[:1]) >= 0 and data.find(token) >= 0


def _polars_frame(data: bytes) -> tuple[pl.DataFrame, dict[str, str]] | None:
    """The flat frame of polars' parse with the schema of every record, and its leaf names."""
    try:
        return flatten(pl.read_ndjson(data, infer_schema_length=None))
    except pl.exceptions.PolarsError:
        return None


def _head_frame(
    data: _bytes.Buffer, source: Path | bytes
) -> tuple[pl.DataFrame, dict[str, str], int, pl.Schema] | None:
    """The flat frame of polars' parse with the schema of the first records, its leaf names,
    the number of keys in the file that are not a non-null cell (the explicit ``null`` values
    when that schema is complete), and the parsed schema. None unless the records are
    numbers, flat or in veRL's shape, and the file has no backslash (then keys can be
    counted)."""
    if data.find(b"\\") >= 0:
        return None
    keys = _bytes.count_byte(data, ord('"')) // 2
    # the scans mapped every page; they stay mapped for the line searches after the parse
    # (polars maps the file itself): dropping them cost 8 ms of faults again on 40 MB, for a
    # peak 1.5x -> 2.3x the run's frame (clean page-cache pages, the kernel's to reclaim)
    try:
        frame = pl.read_ndjson(source)
    except pl.exceptions.PolarsError:
        return None
    data_type = frame.schema.get("data")
    objects = 0
    dtypes = list(frame.schema.values())
    if isinstance(data_type, pl.Struct) and frame.width == 2 and "step" in frame.columns:
        if "step" in frame["data"].struct.fields:
            return None
        objects = frame.height - frame["data"].null_count()  # each one is a "data" key
        dtypes = [frame.schema["step"], *frame["data"].struct.schema.values()]
    if not all(t.is_numeric() or t == pl.Null for t in dtypes):
        return None
    flat, leaves = flatten(frame)
    cells = points(flat.get_columns()) + objects
    return flat, leaves, keys - cells, frame.schema


def _explicit_nulls(
    data: _bytes.Buffer,
    frame: pl.DataFrame,
    leaves: dict[str, str],
    lines: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[pl.DataFrame, int] | None:
    """``frame`` with each explicit ``"key": null`` as NaN (absent keys stay null) and how many
    there were, or None when the records cannot be matched with the lines.

    A null cell is an explicit null when its line holds ``"key":null`` or ``"key": null``; the
    caller checks the count, which fails when the ``null`` tokens are spaced otherwise, inside
    strings or lists, or under a leaf name that two parents share. ``lines`` are the records'
    lines (:func:`_record_lines`), if already found.
    """
    lines = lines or _record_lines(data, frame.height)
    if lines is None:
        return None
    columns = [
        c
        for c, t in frame.schema.items()
        if (t.is_numeric() or t == pl.Null) and frame[c].has_nulls()
    ]
    if not columns:
        return frame, 0
    keys = [json.dumps(leaves.get(c, c), ensure_ascii=False).encode() for c in columns]
    null_rows = pl.DataFrame([frame.get_column(c) for c in columns]).select(
        pl.all().is_null().arg_true().implode()
    )  # one query for every column
    hits = _null_lines(data, lines, [s[0].to_numpy() for s in null_rows.iter_columns()], keys)
    updates = [
        frame[c].cast(pl.Float64).scatter(rows, float("nan"))
        for c, rows in zip(columns, hits, strict=True)
        if len(rows)
    ]
    return frame.with_columns(updates), sum(len(rows) for rows in hits)


def _null_lines(
    data: _bytes.Buffer,
    lines: tuple[np.ndarray, np.ndarray],
    null_rows: list[np.ndarray],
    keys: list[bytes],
) -> list[np.ndarray]:
    """Per column (its null rows, its JSON key), the rows whose line holds ``key:null`` or
    ``key: null``: one vectorised search, over the lines that hold a ``null`` at all."""
    rows = np.unique(np.concatenate(null_rows))
    spans = list(zip(lines[0][rows].tolist(), lines[1][rows].tolist(), strict=True))
    hold = np.array([data.find(b"null", a, b) >= 0 for a, b in spans], dtype=bool)
    at = np.full(len(lines[0]), -1, dtype=np.int64)  # row -> its line in ``held``, if searched
    at[rows[hold]] = np.arange(np.count_nonzero(hold))
    held = pl.Series(
        [data[a:b] for (a, b), h in zip(spans, hold, strict=True) if h], dtype=pl.Binary
    )
    cells = [r[at[r] >= 0] for r in null_rows]
    column = np.repeat(np.arange(len(keys)), [len(r) for r in cells])
    search = pl.DataFrame(
        {
            "line": held.gather(at[np.concatenate(cells)]),
            "tight": pl.Series([k + b":null" for k in keys], dtype=pl.Binary).gather(column),
            "spaced": pl.Series([k + b": null" for k in keys], dtype=pl.Binary).gather(column),
        }
    )
    hit = (
        search.select(
            pl.col("line").bin.contains(pl.col("tight"))
            | pl.col("line").bin.contains(pl.col("spaced"))
        )
        .to_series()
        .to_numpy()
    )
    return [
        r[h]
        for r, h in zip(cells, np.split(hit, np.cumsum([len(r) for r in cells])[:-1]), strict=True)
    ]


def _record_lines(data: _bytes.Buffer, records: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end offsets of the lines that hold a record (not blank), or None if there
    are not ``records`` of them."""
    text = np.frombuffer(data, dtype=np.uint8)
    newlines = _newlines(data, records)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.concatenate((newlines, [len(data)]))
    filled = ends > starts
    first = text[np.minimum(starts, len(data) - 1)]
    spaced = np.flatnonzero(filled & np.isin(first, list(b" \t\r\x0b\x0c")))
    filled[spaced] = [bool(data[starts[i] : ends[i]].strip()) for i in spaced]
    if np.count_nonzero(filled) != records:
        return None
    return starts[filled], ends[filled]


def _newlines(data: _bytes.Buffer, records: int) -> np.ndarray:
    """The offsets of the newlines: found one by one (memchr) when the lines are long, as
    metric records mostly are, else by a vectorised scan of every byte."""
    if len(data) < _LONG_LINE * records:
        return _bytes.byte_positions(data, ord("\n"))
    out, find = [], data.find
    at = find(b"\n")
    while at >= 0:
        out.append(at)
        at = find(b"\n", at + 1)
    return np.array(out, dtype=np.int64)


def _swapped_frame(data: bytes) -> tuple[pl.DataFrame, int] | None:
    """Parse with the value tokens swapped for sentinels, then restore NaN/±inf; None if a
    sentinel count does not match (a token inside a string, a sentinel value in the data)."""
    counts: dict[bytes, int] = {}
    data = _swap_tokens(data, counts)  # a sentinel already in the data shows in the counts
    head = _head_frame(data, data)  # no null left to account for: every key is a non-null cell
    parsed = head[:2] if head is not None and not head[2] else None
    if head is not None and head[2]:  # keys the first records missed, or a string
        late = _late_columns(data, head[0], head[3], head[2])
        if late is not None and not late[1]:  # every null was swapped for its sentinel
            parsed = head[0].with_columns(late[0]), head[1]
    parsed = parsed or _polars_frame(data)
    if parsed is None:
        return None
    frame = parsed[0]
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


def _swap_tokens(data: bytes, counts: dict[bytes, int]) -> bytes:
    """Replace value tokens by sentinels, counting them: C-speed ``bytes.replace`` for the
    spellings writers use (``"k": null`` / ``"k":null``; the count is the growth of the data,
    a sentinel being longer than its token), a regex for anything left."""
    leftover = False
    for token in (b"-Infinity", b"Infinity", b"NaN", b"null"):
        if not _contains(data, token):
            continue
        sentinel = _SENTINELS[token][0]
        for prefix in (b": ", b":"):
            swapped = data.replace(prefix + token, prefix + sentinel)
            n = (len(swapped) - len(data)) // (len(sentinel) - len(token))
            if n:
                counts[token] = counts.get(token, 0) + n
                data = swapped
        leftover = leftover or _contains(data, token)
    if leftover:

        def swap(match: re.Match[bytes]) -> bytes:
            counts[match.group(2)] = counts.get(match.group(2), 0) + 1
            return match.group(1) + _SENTINELS[match.group(2)][0]

        data = _TOKENS.sub(swap, data)
    return data


def flatten_record(record: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in record.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            out.update(flatten_record(value, "" if key == "data" and not prefix else name + "/"))
        elif value is None:
            out[name] = "null"
        else:
            out[name] = repr(value) if isinstance(value, float) else str(value)
    return out


def flatten(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, str]]:
    """Unnest struct columns (``data`` without prefix, others as ``parent/child``; a field
    replaces a column of its name); also returns each column's key as written in the JSON
    (its leaf name)."""
    leaves = {c: c for c in frame.columns}
    top = True  # only the records' own "data" loses its prefix, as in flatten_record
    while structs := [c for c, t in frame.schema.items() if isinstance(t, pl.Struct)]:
        columns = dict(zip(frame.columns, frame.iter_columns(), strict=True))
        for col in structs:
            prefix = "" if col == "data" and top else f"{col}/"
            series = columns.pop(col)
            if not isinstance(series.dtype, pl.Struct):  # a field of an earlier struct
                columns[col] = series  # replaced it: that field stays
                continue
            for field in series.struct.unnest().iter_columns():  # "data" in "data" too
                leaves[prefix + field.name] = field.name
                columns[prefix + field.name] = field.alias(prefix + field.name)
        frame = pl.DataFrame(list(columns.values()))
        top = False
    return frame, leaves
