"""veRL console logger lines (docs/formats.md#verl-console).

``concat_dict_to_str`` prints ``step:3 - actor/pg_loss:0.012 - critic/score/mean:0.5``, each
value through ``pprint.pformat``: with numpy >= 2 a value may read ``np.float64(0.5)``, and
``nan``/``inf`` appear as such (they are kept: NaN and ±inf are data). Ray prefixes lines
with ``(TaskRunner pid=123)``; that is fine, the step is found anywhere on the line.

``WARN: rank r grad_norm is not finite: inf`` (``dp_actor._optimizer_step``) means the
optimizer step was skipped: an overflow row of family ``verl`` (once per step however many
ranks print it), taking the step of the next progress line.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console import _records as rec

NAME = "verl"
SNIFF = re.compile(r"(?:^|[\s)])step:\d+ - [^\s:]+:|grad_norm is not finite", re.MULTILINE)

_LINE = r"(?:^|[\s)])step:(\d+) - (.*)$"
_WARN = r"WARN: rank (\d+) grad_norm is not finite"


def extract(chunk: rec.Chunk) -> rec.Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    lines = chunk.lines.filter(rec.any_of("step:", "is not finite"))
    if lines.is_empty():
        return rec.Extract(rec.empty_records())
    lines = rec.with_wall_time(lines)
    hits = rec.step_lines(lines, _LINE)
    records = rec.empty_records()
    if not hits.is_empty():
        fields = rec.pairs(
            hits, column="rest", sep=" - ", kv=":", keep=("line", "step", "wall_time")
        )
        records = rec.finish(
            rec.checked(fields, path=chunk.path, raw="raw", what="veRL"), anchor=True
        )
    return rec.Extract(records, _warnings(lines))


def _warnings(lines: pl.DataFrame) -> pl.DataFrame:
    hits = lines.select(
        "line",
        pl.col("text").str.extract(_WARN, 1).alias("r"),
        "wall_time",
    ).filter(pl.col("r").is_not_null())
    cols = {
        "line": pl.col("line"),
        "step": pl.lit(None),
        "family": pl.lit("verl"),
        "attempted": pl.lit(None),
        "scale": pl.lit(None),
        "rank": pl.col("r").cast(pl.Int64, strict=False),
        "wall_time": pl.col("wall_time"),
    }
    return hits.select([cols[c].cast(t).alias(c) for c, t in rec.OVERFLOW_SCHEMA.items()])
