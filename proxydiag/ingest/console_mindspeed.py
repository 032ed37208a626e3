"""MindSpeed-RL console lines (REFERENCE-formats.md §2).

``mindspeed_rl/utils/loggers.py`` prints ``'%(asctime)s - %(levelname)s - %(message)s'``
with the message ``[{utc}] iteration: {it} / {steps} | key : {v:.4f} | ...`` (keys holding
``lr`` with ``{:e}``). MindSpeed-RL logs ``actor/pg_loss`` as ``abs(pg_loss)``:
``attrs["pg_loss_abs"] = True`` says so, the value is kept as logged.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console_records import (
    Chunk,
    Extract,
    checked,
    empty_records,
    finish,
    pairs,
    steps,
    with_wall_time,
)

NAME = "mindspeed"
SNIFF = re.compile(r"iteration:\s*\d+\s*/\s*\d+\s*\|\s*\S+\s*:")

_LINE = r"iteration:\s*(\d+)\s*/\s*\d+\s*\|(.*)$"


def extract(chunk: Chunk) -> Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    lines = chunk.lines.filter(pl.col("text").str.contains("iteration:", literal=True))
    if lines.is_empty():
        return Extract(empty_records())
    lines = with_wall_time(lines)
    hits = lines.select(
        "line", pl.col("text").str.extract_groups(_LINE).alias("m"),
        "wall_time",
    ).unnest("m").filter(pl.col("1").is_not_null())
    hits = hits.select(
        "line", "wall_time", steps(pl.col("1")).alias("step"),
        pl.col("2").str.strip_chars_end(" |").alias("rest"),
    ).filter(pl.col("step").is_not_null())
    if hits.is_empty():
        return Extract(empty_records())
    fields = pairs(hits, column="rest", sep="|", kv=":", keep=("line", "step", "wall_time"))
    records = finish(checked(fields, path=chunk.path, raw="raw", what="MindSpeed-RL"), anchor=True)
    if records.filter(pl.col("key").str.ends_with("pg_loss")).height:
        chunk.state.setdefault("attrs", {})["pg_loss_abs"] = True
    return Extract(records)
