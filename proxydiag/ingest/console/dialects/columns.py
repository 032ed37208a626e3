"""Tables of numbers under a header row: ``|``-separated, tab-separated or aligned by blanks.

Trainers and their users print metrics as tables: a header row naming the columns
(``step | loss | grad_norm``, ``epoch  step  loss  lr``; a rule such as ``---+---`` may follow
it), then one row of numbers a step. A header between blanks only (no ``|``, no tab) needs a
counter or ``epoch`` column: words over columns of numbers are otherwise prose. A row is a
line of numbers only (``nan``/``inf`` too, ``%`` dropped), as many as the header has names;
the rows run until the first line that is not one. The step is the first column named as a
counter (``step``, ``iter``, ``global_step``, …, the grammar's :data:`~.grammar.COUNTERS`);
counters and integer epochs are not points; a table without a counter column reads its rows in
order (only in a file with no step anywhere).

**Without the header in the excerpt** (rows pasted from the middle of a table), rows are read
under the last header seen earlier in the file with as many columns, when its counter column
holds an integer in every row; otherwise they are reported once, with their first line, as
"columns unnamed" and not read: numbers without names are not metrics.

Runs before the grammar (:data:`FALLBACK`, listed before it): lines another dialect reads (the
HF notebook table) stay theirs.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import polars as pl

from proxydiag.errors import IngestWarning, where
from proxydiag.ingest.console._records import Chunk, Extract, empty_records
from proxydiag.ingest.console.dialects.grammar import COUNTERS

NAME = "columns"
FALLBACK = True
#: a header's columns and an open table run from block to block
SEQUENTIAL = True

_CELL = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?|[-+]?(?:nan|NaN|inf|Inf)"
#: a line of numbers only (two or more), separated by ``|``, tabs or blanks
_ROW = rf"^\s*\|?\s*(?:{_CELL})(?:\s*[|\t ]\s*(?:{_CELL}))+\s*\|?\s*$"
_ROW_RE = re.compile(_ROW)
_RULE = re.compile(r"^\s*[|+:=\-\s]*-{3,}[|+:=\-\s]*$|^\s*={3,}\s*$")
_NAME = re.compile(r"[A-Za-z_]")
_NUMBER = re.compile(rf"^(?:{_CELL})$")
SNIFF = re.compile(
    r"(?m)^[ \t|]*[A-Za-z_][\w./\-]*(?:[ \t]*[|\t ][ \t]*[A-Za-z_][\w./\- ()%]*)+[ \t|]*\n"
    r"(?:[ \t|:+=\-]*-{3,}[ \t|:+=\-]*\n)?"
    rf"[ \t|]*(?:{_CELL})(?:[ \t]*[|\t ][ \t]*(?:{_CELL}))+[ \t|]*$"
)
#: rows in a row before header-less rows are worth a "columns unnamed" line
LEAST_ROWS = 2


def extract(chunk: Chunk) -> Extract:
    """The rows of the tables in one block (a header may come from an earlier block)."""
    state: dict[str, Any] = chunk.state.setdefault(NAME, {})
    lines = chunk.lines
    # the last lines of the block before (a header there heads rows here: a live tail's
    # chunk may end right under it)
    before = {int(k): v for k, v in state.pop("last_lines", {}).items()}
    last = {**before, **dict(lines.tail(2).iter_rows())}
    state["last_lines"] = {str(k): last[k] for k in sorted(last)[-2:]}
    rows = lines.filter(pl.col("text").str.contains(_ROW))
    if rows.is_empty():
        state.pop("open", None)
        return Extract(empty_records())
    # the two lines before each run of rows may be its header and a rule under it
    starts = rows.filter(pl.col("line").diff().fill_null(0) != 1)["line"]
    wanted = pl.concat([rows["line"], starts - 1, starts - 2]).unique()
    near = lines.filter(pl.col("line").is_in(wanted.implode())).sort("line")
    out: dict[str, list[Any]] = {"line": [], "step": [], "key": [], "value": [], "attach": []}
    texts = {**before, **dict(near.select("line", "text").iter_rows())}
    open_: dict[str, Any] | None = state.get("open")
    unnamed: tuple[int, int, int] | None = None  # first line, rows, columns
    for line in rows["line"].to_list():
        body = texts[line]
        cells = _cells(body)
        if open_ is not None and open_["last"] == line - 1 and len(cells) == len(open_["columns"]):
            open_["last"] = line
            _row(out, line, open_, cells)
            continue
        open_ = _opened(texts, line, len(cells), state)
        if open_ is None:
            if unnamed is not None and unnamed[0] + unnamed[1] == line and unnamed[2] == len(cells):
                unnamed = (unnamed[0], unnamed[1] + 1, unnamed[2])
            else:
                _unnamed(chunk, unnamed)
                unnamed = (line, 1, len(cells))
            continue
        open_["last"] = line
        _row(out, line, open_, cells)
    _unnamed(chunk, unnamed)
    state["open"] = open_
    if not out["line"]:
        return Extract(empty_records())
    frame = pl.DataFrame(
        out,
        schema={
            "line": pl.Int64,
            "step": pl.Int64,
            "key": pl.Utf8,
            "value": pl.Float64,
            "attach": pl.Int8,
        },
    )
    records = frame.select(
        "line",
        "step",
        pl.col("key").cast(pl.Categorical),
        "value",
        pl.lit(None, dtype=pl.Float64).alias("wall_time"),
        "attach",
        (pl.col("attach") == 0).alias("anchor"),
    )
    return Extract(records)


def _cells(body: str) -> list[str]:
    return [c for c in re.split(r"[\s|]+", body.strip()) if c]


def _opened(
    texts: dict[int, str], line: int, width: int, state: dict[str, Any]
) -> dict[str, Any] | None:
    """The table a row at ``line`` opens: under the header just above it (a rule between
    them allowed), or under the last header of as many columns seen in the file."""
    above = texts.get(line - 1)
    if above is not None and _RULE.match(above):
        above = texts.get(line - 2)
    if above is not None:
        names = _header(above, width)
        if names is not None:
            table = _table(names)
            state.setdefault("headers", {})[width] = table
            return dict(table)
    known = state.get("headers", {}).get(width)
    if known is not None and known["step"] is not None:
        cells = _cells(texts[line])
        if re.fullmatch(r"\d+", cells[known["step"]]):
            return dict(known)
    return None


def _header(text: str, width: int) -> list[str] | None:
    """The column names of a header line of ``width`` columns, or None."""
    body = text.strip().strip("|").strip()
    blanks = "|" not in body and "\t" not in body
    if not blanks:
        splits = [re.split(r"\s*\|\s*" if "|" in body else r"\s*\t\s*", body)]
    else:
        splits = [re.split(r"\s{2,}", body), body.split()]
    for names in splits:
        names = [n.strip() for n in names if n.strip()]
        if len(names) != width or not all(_NAME.search(n) and not _NUMBER.match(n) for n in names):
            continue
        # words between blanks are a header only with a counter or epoch column among them
        # (``noise line`` above two columns of numbers is prose)
        if blanks and not any(_last(n) in (*COUNTERS, "epoch", "epochs") for n in names):
            continue
        return names
    return None


def _last(name: str) -> str:
    """A column name's last part, lowercased (``train/global_step`` -> ``global_step``)."""
    return name.lower().rsplit("/", 1)[-1]


def _table(names: list[str]) -> dict[str, Any]:
    step = next((i for i, n in enumerate(names) if _last(n) in COUNTERS), None)
    return {"columns": names, "step": step, "last": -1}


def _row(out: dict[str, list[Any]], line: int, table: dict[str, Any], cells: list[str]) -> None:
    step_col = table["step"]
    step: int | None = None
    if step_col is not None:
        try:
            step = int(float(cells[step_col]))
        except (ValueError, OverflowError):
            return
    for i, (name, cell) in enumerate(zip(table["columns"], cells, strict=True)):
        if i == step_col:
            continue
        lowered = _last(name)
        whole = re.fullmatch(r"[-+]?\d+", cell) is not None
        if lowered in COUNTERS or (lowered in {"epoch", "epochs"} and whole):
            continue
        try:
            value = float(cell.rstrip("%"))
        except ValueError:
            continue
        out["line"].append(line)
        out["step"].append(step)
        out["key"].append(name)
        out["value"].append(value)
        out["attach"].append(0 if step is not None else 2)


def _unnamed(chunk: Chunk, run: tuple[int, int, int] | None) -> None:
    if run is None or run[1] < LEAST_ROWS:
        return
    first, n_rows, width = run
    warnings.warn(
        IngestWarning(
            f"{where(chunk.path, first)}: {n_rows} rows of {width} numbers without a header "
            "(columns unnamed); not read. Include the table's header line in the excerpt"
        ),
        stacklevel=2,
    )
