"""Megatron-LM / Megatron-DeepSpeed ``training_log`` iteration and validation lines.

Every historical variant (docs/formats.md#megatron-lm-and-megatron-deepspeed): with or without the
leading ``[%Y-%m-%d %H:%M:%S(.%f)]`` timestamp, ``learning rate: {:.3E}`` or ``{:.6E}``, the
BigScience launcher prefix ``[default7]:``, ``elapsed time per iteration (s)`` or ``(ms)``,
``consumed tokens``, MoE loss keys, ``number of skipped/nan iterations``. Fields are split
on ``" | "`` and ``key: value``, so unknown fields are read too. Keys are kept as printed
(``lm loss``, ``grad norm``); the alias table maps them. Megatron prints no loss when it is
NaN (``if avg >= 0``): such a step has no loss row, never a made-up one.

Validation lines (``validation loss at iteration 100 | lm loss value: ... | lm loss PPL:
...``) become ``lm loss validation`` and ``lm loss validation ppl``, the TensorBoard names.

When progress lines come from several launcher ranks (``[default0]:``, ``[default7]:``),
the first rank seen keeps the plain keys and the others get ``@rank<N>``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.ingest.console._fields import split_fields
from proxydiag.ingest.console._lines import head_text
from proxydiag.ingest.console._records import (
    Chunk,
    Extract,
    checked,
    empty_records,
    finish,
    pairs,
    steps,
    with_wall_time,
)

NAME = "megatron"
SNIFF = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|.*(?:loss|learning rate)")

_RANK = r"^\s*\[(?:default|rank)?(\d+)\]:"
_FIRST_RANK = re.compile(r"^\s*\[(?:default|rank)?(\d+)\]:.*iteration\s+\d+\s*/", re.MULTILINE)
_VALID = r"validation(.*?) loss at iteration\s+(\d+)"


def prepare(path: Path, state: dict[str, Any]) -> None:
    """Learn the launcher rank that prints iteration lines from the head of the file, so
    that blocks extracted in parallel agree on which rank keeps the plain keys."""
    if "megatron_rank" in state:  # a tail's later chunk: learnt from the file's head
        return
    match = _FIRST_RANK.search(head_text(path))
    if match is not None:
        state["megatron_rank"] = int(match.group(1))


def extract(chunk: Chunk) -> Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    lines = chunk.lines.filter(pl.col("text").str.contains("iteration", literal=True))
    if lines.is_empty():
        return Extract(empty_records())
    lines = with_wall_time(_iteration(lines))
    iters = lines.filter(pl.col("step").is_not_null())
    progress = _progress(chunk, iters)
    valid = lines.filter(
        pl.col("step").is_null() & pl.col("text").str.contains("validation", literal=True)
    ).with_columns(steps(pl.col("text").str.extract(_VALID, 2)).alias("vstep"))
    valid = _validation(chunk, valid.filter(pl.col("vstep").is_not_null()))
    records = pl.concat([progress, valid])  # the keys differ: no need to interleave
    return Extract(records, anchors=iters.select("line", "step"))


def _iteration(lines: pl.DataFrame) -> pl.DataFrame:
    """Add ``step``: N of ``iteration N/ M |``, with literal splits (a regex costs 4x more)."""
    after = pl.col("text").str.split_exact("iteration", 1).struct.field("field_1")
    parts = lines.select(after.str.split_exact("/", 1).alias("_p")).unnest("_p")
    step = parts.select(
        pl.when(pl.col("field_1").str.contains("|", literal=True)).then(steps(pl.col("field_0")))
    ).to_series()
    return lines.with_columns(step.alias("step"))


def _progress(chunk: Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    if lines.is_empty():
        return empty_records()
    prefixed = lines["text"].str.contains("]:", literal=True).any()  # launcher prefixes
    rank = pl.col("text").str.extract(_RANK, 1).cast(pl.Int64, strict=False) if prefixed else None
    lines = lines.with_columns(
        pl.lit(rank, dtype=pl.Int64).alias("rank") if rank is None else rank.alias("rank"),
    )
    fields = split_fields(
        lines, sep=" | ", kv=":", keep=("line", "step", "rank", "wall_time"), numbers=True
    )
    fields = _rank_keys(chunk, fields)
    if "raw" in fields.columns:  # some value is not a plain number
        fields = checked(fields, path=chunk.path, raw="raw", what="Megatron")
    return finish(fields, anchor=True)


def _rank_keys(chunk: Chunk, fields: pl.DataFrame) -> pl.DataFrame:
    ranks = fields["rank"].drop_nulls()
    if ranks.is_empty():
        return fields.drop("rank")
    primary = chunk.state.setdefault("megatron_rank", int(ranks[0]))
    other = pl.col("rank").is_not_null() & (pl.col("rank") != primary)
    text = pl.col("key").cast(pl.Utf8)  # categorical when split_fields read numbers
    key = pl.when(other).then(pl.format("{}@rank{}", text, "rank")).otherwise(text)
    return fields.with_columns(key.alias("key")).drop("rank")


def _validation(chunk: Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    if lines.is_empty():
        return empty_records()
    lines = lines.with_columns(
        pl.col("vstep").alias("step"),
        pl.col("text").str.strip_chars_end(" |").str.split(" | ").list.slice(1).list.join(" | "),
    )
    fields = pairs(lines, column="text", sep=" | ", kv=":", keep=("line", "step", "wall_time"))
    key = (
        pl.col("key")
        .str.replace(r"^(.*) value$", "$1 validation")
        .str.replace(r"^(.*) PPL$", "$1 validation ppl")
    )
    fields = checked(
        fields.with_columns(key), path=chunk.path, raw="raw", what="Megatron validation"
    )
    return finish(fields)
