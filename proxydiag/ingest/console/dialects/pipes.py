"""``key: value | key: value`` lines whose step is a ``global iter: N/M`` field (MiniLLM).

MiniLLM and the trainers derived from it print (``finetune.py``, ``train_minillm.py``)::

    train | epoch   0 | Iter:     16/  8000 | global iter:      4/  2000 | loss: 3.1234 |
    ds_loss: 0.0000 | lr: 5.0000e-06 | scale: 65536.0000 | micro time: 0.400 | step time: 1.600

``Iter`` counts micro-batches, ``global iter`` optimizer steps: the step is ``global iter``.
Every other ``key: value`` field after it is a record; ``scale`` is DeepSpeed's current loss
scale (``optimizer.cur_scale``, 0 when the optimizer has none), kept as ``loss_scale``.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console import _records as rec

NAME = "pipes"
SNIFF = re.compile(r"\|\s*global iter:\s*\d+\s*/\s*\d+\s*\|\s*\S[^|]*:")

_LINE = r"global iter:\s*(\d+)\s*/\s*\d+\s*\|(.*)$"
#: the field names MiniLLM prints, as the canonical keys the alias table knows
_RENAME = {"scale": "loss_scale"}


def extract(chunk: rec.Chunk) -> rec.Extract:
    """The records of this dialect's lines in one block."""
    fields = rec.bar_fields(chunk, "global iter:", _LINE)
    if fields is None:
        return rec.Extract(rec.empty_records())
    fields = fields.with_columns(
        pl.col("key").str.strip_chars().replace(_RENAME).alias("key")
    ).filter(
        ~(
            (pl.col("key") == "loss_scale")
            & (pl.col("raw").str.strip_chars().cast(pl.Float64, strict=False) == 0.0)
        )
    )
    return rec.Extract(
        rec.finish(rec.checked(fields, path=chunk.path, raw="raw", what="MiniLLM"), anchor=True)
    )
