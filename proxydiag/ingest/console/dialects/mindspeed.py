"""MindSpeed-RL console lines (docs/formats.md#mindspeed-rl).

``mindspeed_rl/utils/loggers.py`` prints ``'%(asctime)s - %(levelname)s - %(message)s'``
with the message ``[{utc}] iteration: {it} / {steps} | key : {v:.4f} | ...`` (keys holding
``lr`` with ``{:e}``). MindSpeed-RL logs ``actor/pg_loss`` as ``abs(pg_loss)``:
``attrs["pg_loss_abs"] = True`` says so, the value is kept as logged.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console import _records as rec

NAME = "mindspeed"
SNIFF = re.compile(r"iteration:\s*\d+\s*/\s*\d+\s*\|\s*\S+\s*:")

_LINE = r"iteration:\s*(\d+)\s*/\s*\d+\s*\|(.*)$"


def extract(chunk: rec.Chunk) -> rec.Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    fields = rec.bar_fields(chunk, "iteration:", _LINE)
    if fields is None:
        return rec.Extract(rec.empty_records())
    records = rec.finish(
        rec.checked(fields, path=chunk.path, raw="raw", what="MindSpeed-RL"), anchor=True
    )
    if records.filter(pl.col("key").cat.ends_with("pg_loss")).height:
        chunk.state.setdefault("attrs", {})["pg_loss_abs"] = True
    return rec.Extract(records)
