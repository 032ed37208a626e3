"""fairseq / metaseq console logs (docs/formats.md#fairseq-and-metaseq).

- JSON format: ``2021-01-01 00:00:00 | INFO | train_inner | {"epoch": 1, "update": 1.05,
  "loss": "9.82", ..., "num_updates": "100"}``. Values are *strings* (``{:g}``/``{:.3f}``);
  the step is ``num_updates`` (``train_num_updates`` / ``valid_num_updates`` at epoch end).
  Key/value pairs are pulled out with one ``str.extract_all`` per block, not ``json.loads``.
- simple format: ``epoch 001:    100 / 1234 loss=9.82, nll_loss=..., num_updates=100``.
- ``NOTE: gradient overflow detected, ignoring gradient, setting loss scale to: 64.0`` and
  ``AMP: overflow detected, setting scale to to 64.0`` (sic) are overflow rows (family
  ``fairseq``) that take the step of the next progress line.

fairseq's ``loss`` and ``nll_loss`` are in **base 2** (``loss_sum / sample_size / ln 2``):
they are kept as logged and ``attrs["loss_base"] = 2`` says so; ``ppl`` is ``2**loss``.
"""

from __future__ import annotations

import re

import polars as pl

from proxydiag.ingest.console import _records as rec

NAME = "fairseq"
SNIFF = re.compile(
    r"\| [\w\-]+ \| \{\"epoch\": |gradient overflow detected, ignoring gradient"
    r"|^epoch \d+:\s+\d+ / \d+ .*num_updates=",
    re.MULTILINE,
)

_JSON = r"\|\s*[\w\-]+\s*\|\s*(\{\"epoch\".*\})\s*$"
_JSON_PAIR = r"\"([^\"]+)\":\s*(\"[^\"]*\"|[^,}\s]+)"
_SIMPLE = r"^epoch \d+:\s+\d+ / \d+ (.*)$"
_SIMPLE_PAIR = r"([\w\-/]+)=([^,\s]+)"
_MINIMUM = r"(Minimum loss scale reached)"
_OVERFLOW = (
    r"(?:gradient overflow detected, ignoring gradient, setting loss scale to:"
    r"|AMP: overflow detected, setting scale to to)\s*(\S+)"
)


def extract(chunk: rec.Chunk) -> rec.Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    lines = chunk.lines.filter(
        rec.any_of('{"epoch"', "num_updates=", "overflow detected", "Minimum loss scale reached")
    )
    if lines.is_empty():
        return rec.Extract(rec.empty_records())
    lines = rec.with_wall_time(lines)
    json_rows = _pairs(lines, _JSON, _JSON_PAIR)
    simple_rows = _pairs(lines, _SIMPLE, _SIMPLE_PAIR)
    rows = pl.concat([json_rows, simple_rows]).sort("line", maintain_order=True)
    if not rows.is_empty():
        chunk.state.setdefault("attrs", {})["loss_base"] = 2
    records = _with_steps(chunk, rows)
    return rec.Extract(records, _overflows(lines))


def _pairs(lines: pl.DataFrame, line_re: str, pair_re: str) -> pl.DataFrame:
    body = lines.select("line", pl.col("text").str.extract(line_re, 1).alias("body"), "wall_time")
    body = body.filter(pl.col("body").is_not_null())
    found = body.select("line", "wall_time", pl.col("body").str.extract_all(pair_re).alias("p"))
    found = found.explode("p").filter(pl.col("p").is_not_null())
    kv = found.select("line", "wall_time", pl.col("p").str.extract_groups(pair_re).alias("kv"))
    return kv.unnest("kv").select(
        "line", "wall_time", pl.col("1").alias("key"), pl.col("2").str.strip_chars('"').alias("raw")
    )


def _with_steps(chunk: rec.Chunk, rows: pl.DataFrame) -> pl.DataFrame:
    if rows.is_empty():
        return rec.empty_records()
    is_step = pl.col("key").str.contains(r"(?:^|_)num_updates$")
    step_of = (
        rows.filter(is_step)
        .group_by("line")
        .agg(
            pl.col("raw")
            .first()
            .cast(pl.Float64, strict=False)
            .cast(pl.Int64, strict=False)
            .alias("step")
        )
    )
    rows = rows.join(step_of, on="line", how="left", maintain_order="left")
    rows = rec.skip_nulls(
        rows,
        "step",
        path=chunk.path,
        says=lambda missing: (
            f"{missing['line'].n_unique()} fairseq log line(s) without num_updates; skipped"
        ),
    )
    rows = rows.filter(~pl.col("key").is_in(["epoch", "update"]) & ~is_step)
    return rec.finish(rec.checked(rows, path=chunk.path, raw="raw", what="fairseq"), anchor=True)


def _overflows(lines: pl.DataFrame) -> pl.DataFrame:
    """``NOTE: gradient overflow`` rows (family ``fairseq``) and the fatal minimum-scale line."""
    frames = []
    for family, pattern in (("fairseq", _OVERFLOW), ("min_scale", _MINIMUM)):
        hits = lines.select(
            "line", "wall_time", pl.col("text").str.extract(pattern, 1).alias("s")
        ).filter(pl.col("s").is_not_null())
        scale = pl.col("s").cast(pl.Float64, strict=False) if family == "fairseq" else pl.lit(None)
        cols = {
            "line": pl.col("line"),
            "step": pl.lit(None),
            "family": pl.lit(family),
            "attempted": pl.lit(None),
            "scale": scale,
            "rank": pl.lit(None),
            "wall_time": pl.col("wall_time"),
        }
        frames.append(
            hits.select([cols[c].cast(t).alias(c) for c, t in rec.OVERFLOW_SCHEMA.items()])
        )
    return pl.concat(frames)
