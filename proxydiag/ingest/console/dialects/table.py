"""The training table the HF Trainer draws in notebooks, pasted as text.

``NotebookProgressCallback`` renders a table with a header ``Step | Training Loss |
Validation Loss | <metric>...`` and one row per evaluation; copied out of a notebook it
arrives with ``|`` or tab separators (a Markdown rule ``|---|---|`` may follow the header),
and ``No log`` where a column has no value yet. The step is the ``Step`` column (or the
``Epoch`` column when the table has no ``Step``). ``Training Loss`` is the loss,
``Validation Loss`` the eval loss; other columns keep their header as key.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from proxydiag.ingest.console._records import Chunk, Extract, empty_records, finish

NAME = "table"
#: the header names its rows' columns: read in file order
SEQUENTIAL = True
SNIFF = re.compile(r"^\s*\|?\s*(?:Step|Epoch)\s*(?:\||\t)\s*Training Loss\b", re.MULTILINE)

_HEADER = re.compile(r"^\s*\|?\s*(?:Step|Epoch)\s*(?:\||\t)\s*Training Loss\b")
_SPLIT = re.compile(r"\s*\|\s*|\t")
_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")
_NAMES = {"Training Loss": "loss", "Validation Loss": "eval_loss"}
_EMPTY = {"No log", "", "-", "nan"}


def extract(chunk: Chunk) -> Extract:
    """Rows of the tables in one block (the header may come from an earlier block)."""
    state: dict[str, Any] = chunk.state.setdefault("table", {})
    text = pl.col("text")
    candidates = chunk.lines.filter(
        text.str.contains(r"\||\t")
        & (text.str.contains("Training Loss", literal=True) | text.str.contains(r"^\s*\|?\s*\d"))
    )
    out: dict[str, list[Any]] = {"line": [], "step": [], "key": [], "raw": []}
    for line, body in candidates.select("line", "text").iter_rows():
        if _HEADER.match(body):
            state["columns"] = [c for c in _SPLIT.split(body.strip().strip("|")) if c]
            state["last_line"] = line
            continue
        columns = state.get("columns")
        if not columns:
            continue
        if line - state["last_line"] > 1:  # the table ended before this line
            state.pop("columns")
            continue
        if _RULE.match(body):
            state["last_line"] = line
            continue
        cells = _SPLIT.split(body.strip().strip("|"))
        if len(cells) != len(columns) or not cells[0].strip().replace(".", "", 1).isdigit():
            state.pop("columns")
            continue
        state["last_line"] = line
        step = int(float(cells[0]))
        for name, cell in zip(columns[1:], cells[1:], strict=True):
            if cell.strip() in _EMPTY:
                continue
            out["line"].append(line)
            out["step"].append(step)
            out["key"].append(_NAMES.get(name, name))
            out["raw"].append(cell.strip())
    if not out["line"]:
        return Extract(empty_records())
    frame = pl.DataFrame(
        out, schema={"line": pl.Int64, "step": pl.Int64, "key": pl.Utf8, "raw": pl.Utf8}
    )
    frame = frame.with_columns(pl.col("raw").cast(pl.Float64, strict=False).alias("value"))
    return Extract(finish(frame.filter(pl.col("value").is_not_null()).drop("raw"), anchor=True))
