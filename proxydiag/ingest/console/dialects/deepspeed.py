"""DeepSpeed progress and loss-scaler lines (docs/formats.md#deepspeed).

Progress lines (anchors):

- ``step=N, skipped=K, lr=[...], mom=[...]`` → ``ds_skipped`` (the *cumulative* skipped
  count, canonical ``skipped_total``) and ``lr`` (first parameter group);
- ``epoch=E/micro_step=M/global_step=N, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...,
  MemAllocated=...GB, MaxMemAllocated=...GB`` (``utils/timer.py``);
- pipeline engine ``steps: N loss: L ... iter time (s): T samples/sec: S``.

Overflow lines become overflow rows (resolved in :mod:`console_overflow`), one family each:

- ``ds_rank0``: ``[deepspeed] OVERFLOW! Rank r Skipping step. Attempted loss scale: X,
  reducing to Y`` (also ``[deepscale]``, and ``... but hysteresis is h``, where the scale
  stays X), ``fp16 dynamic loss scale overflow! ...``, ``Overflow detected. Skipping step.``;
- ``ds_iter``: ``Grad overflow on iteration N`` (one per rank; names its iteration);
- ``ds_scale_down`` / ``ds_scale_up``: ``Reducing|Increasing dynamic loss scale from X to Y``
  (one per rank; two log lines may be spliced on one physical line: the last complete
  message on the line is read);
- ``min_scale``: ``Current loss scale already at minimum`` (a critical event).

An overflow line without its own iteration that follows a tqdm counter on the same physical
line (HF Trainer + DeepSpeed: ``378/2724 [10:23<1:04:12, 1.64s/it][...] OVERFLOW! ...``)
takes its step from that counter: tqdm shows the steps completed, so the step that
overflowed is the counter + 1.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console import _records as rec
from proxydiag.ingest.console._fields import split_fields

NAME = "deepspeed"
SNIFF = re.compile(
    r"step=\d+, skipped=\d+|global_step=\d+, RunningAvg|OVERFLOW! Rank|Grad overflow on iteration"
    r"|dynamic loss scale from|Overflow detected\. Skipping step|steps: \d+ loss: "
)

_NUM = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))"
_PIPE = rf"steps: (\d+) loss: {_NUM}.*?iter time \(s\): {_NUM} samples/sec: {_NUM}"
_FAMILIES: dict[str, str] = {
    "ds_rank0": (
        rf"(?:OVERFLOW! Rank (\d+) Skipping step\."
        rf"|fp16 dynamic loss scale overflow! Skipping step\."
        rf"|Overflow detected\. Skipping step\.)(?: Attempted loss scale: {_NUM}"
        rf"(?:, reducing to {_NUM}|, but hysteresis))?"
    ),
    "ds_iter": r"Grad overflow on iteration:?\s*(\d+)",
    "ds_scale_down": rf".*Reducing dynamic loss scale from {_NUM} to {_NUM}",
    "ds_scale_up": rf".*Increasing dynamic loss scale from {_NUM} to {_NUM}",
    "min_scale": r"(Current loss scale already at minimum)",
}
_LITERALS = ("OVERFLOW!", "overflow", "Overflow", "dynamic loss scale", "already at minimum")
#: a tqdm counter before the message on the same line: ``378/2724 [10:23<1:04:12, 1.64s/it]``
_TQDM = r"(\d+)/\d+ \[[^\]\r]*(?:it/s|s/it|<)[^\]\r]*\]"


def extract(chunk: rec.Chunk) -> rec.Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    text = pl.col("text")
    lines = chunk.lines.filter(rec.any_of("step=", "steps: ", *_LITERALS))
    if lines.is_empty():
        return rec.Extract(rec.empty_records())
    lines = rec.with_wall_time(lines)
    records = pl.concat(
        [
            _step_lines(chunk, lines.filter(text.str.contains(", skipped=", literal=True))),
            _timer(chunk, lines.filter(text.str.contains("global_step=", literal=True))),
            _pipe(chunk, lines.filter(text.str.contains("steps: ", literal=True))),
        ]
    )
    rare = lines.filter(rec.any_of(*_LITERALS))
    return rec.Extract(records, _overflows(rare))  # each key comes from one kind of line


def _step_lines(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    """``step=N, skipped=K, lr=[a, b]``, cut with literal splits (no regex per line)."""
    # split once into columns (an expression used three times is computed three times)
    after = pl.col("text").str.split_exact("step=", 1).struct.field("field_1")
    parts = lines.select("line", "wall_time", after.str.split_exact(", ", 2).alias("_p")).unnest(
        "_p"
    )
    skipped, lr = pl.col("field_1"), pl.col("field_2")
    hits = parts.select(
        "line",
        "wall_time",
        rec.steps(pl.col("field_0")).alias("step"),
        skipped.str.strip_prefix("skipped=").alias("ds_skipped"),
        lr.str.strip_prefix("lr=[")
        .str.split_exact(",", 1)
        .struct.field("field_0")
        .str.strip_chars_end("]")
        .alias("lr"),
        (skipped.str.starts_with("skipped=") & lr.str.starts_with("lr=[")).alias("_ok"),
    ).filter(pl.col("_ok") & pl.col("step").is_not_null())
    if hits.is_empty():
        return rec.empty_records()
    long = hits.unpivot(
        index=["line", "step", "wall_time"],
        on=["ds_skipped", "lr"],
        variable_name="key",
        value_name="raw",
    )
    return rec.finish(
        rec.checked(long, path=chunk.path, raw="raw", what="DeepSpeed step="), anchor=True
    )


def _timer(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    """``global_step=N, RunningAvgSamplesPerSec=..., MemAllocated=3.96GB, ...`` (any fields)."""
    after = pl.col("text").str.split_exact("global_step=", 1).struct.field("field_1")
    hits = (
        lines.select("line", "wall_time", after.alias("text"))
        .with_columns(
            rec.steps(pl.col("text").str.split_exact(",", 1).struct.field("field_0")).alias("step"),
        )
        .filter(pl.col("step").is_not_null())
    )
    if hits.is_empty():
        return rec.empty_records()
    fields = split_fields(hits, sep=", ", kv="=", keep=("line", "step", "wall_time"))
    fields = fields.with_columns(pl.col("raw").str.strip_suffix("GB"))
    return rec.finish(
        rec.checked(fields, path=chunk.path, raw="raw", what="DeepSpeed timer"), anchor=True
    )


def _pipe(chunk: rec.Chunk, lines: pl.DataFrame) -> pl.DataFrame:
    names = ("loss", "iter time (s)", "samples/sec")
    return _wide(chunk, lines, _PIPE, names, what="DeepSpeed pipeline")


def _wide(
    chunk: rec.Chunk, lines: pl.DataFrame, pattern: str, names: tuple[str, ...], *, what: str
) -> pl.DataFrame:
    """Rows of a fixed-layout line: group 1 is the step, groups 2.. are ``names``."""
    hits = (
        lines.select(
            "line",
            pl.col("text").str.extract_groups(pattern).alias("m"),
            "wall_time",
        )
        .unnest("m")
        .filter(pl.col("1").is_not_null())
    )
    if hits.is_empty():
        return rec.empty_records()
    long = pl.concat(
        [
            hits.select(
                "line",
                rec.steps(pl.col("1")).alias("step"),
                "wall_time",
                pl.lit(name).alias("key"),
                pl.col(str(i + 2)).alias("raw"),
            )
            for i, name in enumerate(names)
        ]
    ).filter(pl.col("raw").is_not_null() & pl.col("step").is_not_null())
    return rec.finish(rec.checked(long, path=chunk.path, raw="raw", what=what), anchor=True)


def _overflows(lines: pl.DataFrame) -> pl.DataFrame:
    text = pl.col("text")
    frames = [rec.empty_overflows()]
    for family, pattern in _FAMILIES.items():
        hits = lines.filter(text.str.contains(pattern))
        if hits.is_empty():
            continue
        hits = hits.select(
            "line",
            text.str.extract_groups(pattern).alias("m"),
            "wall_time",
            (rec.steps(text.str.extract(_TQDM, 1)) + 1).alias("_tqdm"),
        ).unnest("m")
        frames.append(hits.select(_overflow_columns(family)))
    return pl.concat(frames)


def _num(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Float64, strict=False)


def _overflow_columns(family: str) -> list[pl.Expr]:
    none_f = pl.lit(None, dtype=pl.Float64)
    none_i = pl.lit(None, dtype=pl.Int64)
    if family == "ds_rank0":
        rank_col = pl.col("1").cast(pl.Int64, strict=False)
        step, rank, attempted, scale = (
            none_i,
            rank_col,
            _num("2"),
            pl.coalesce(_num("3"), _num("2")),
        )
    elif family == "ds_iter":
        step, rank, attempted, scale = rec.steps(pl.col("1")) + 1, none_i, none_f, none_f
    elif family == "ds_scale_down":
        step, rank, attempted, scale = none_i, none_i, _num("1"), _num("2")
    elif family == "ds_scale_up":  # not an attempt: no skipped step ran with X
        step, rank, attempted, scale = none_i, none_i, none_f, _num("2")
    else:
        step, rank, attempted, scale = none_i, none_i, none_f, none_f
    exprs = {
        "line": pl.col("line"),
        "step": pl.coalesce(step, pl.col("_tqdm")),
        "family": pl.lit(family),
        "attempted": attempted,
        "scale": scale,
        "rank": rank,
        "wall_time": pl.col("wall_time"),
    }
    return [exprs[c].cast(t).alias(c) for c, t in rec.OVERFLOW_SCHEMA.items()]
