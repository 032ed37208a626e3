"""What a console dialect extracts from a block of lines, and the helpers dialects share.

A dialect turns a frame of lines (``line``, ``text``) into *records* (:data:`RECORD_SCHEMA`)
and *overflow rows* (:data:`OVERFLOW_SCHEMA`). A record with ``attach = 0`` has its own step;
``attach = 1`` takes the step of the next progress line (an ``OVERFLOW!`` line), ``attach =
-1`` the step of the previous one (DeepSpeed-Chat's ``average reward score`` after its step
line). ``anchor`` marks records of progress lines: the lines whose steps others take.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from proxydiag.errors import IngestWarning, where

RECORD_SCHEMA: dict[str, pl.DataType] = {
    "line": pl.Int64(),
    "step": pl.Int64(),
    # 4 bytes a row instead of a string view and its bytes: a long log keeps its records until
    # it is assembled, and keys.of reads the codes without comparing strings
    "key": pl.Categorical(),
    "value": pl.Float64(),
    "wall_time": pl.Float64(),
    "attach": pl.Int8(),
    "anchor": pl.Boolean(),
}

OVERFLOW_SCHEMA: dict[str, pl.DataType] = {
    "line": pl.Int64(),
    "step": pl.Int64(),  # known only where the line names its iteration
    "family": pl.Utf8(),
    "attempted": pl.Float64(),  # the loss scale the skipped step used
    "scale": pl.Float64(),  # the loss scale after it
    "rank": pl.Int64(),
    "wall_time": pl.Float64(),
}

# numpy/torch reprs (veRL pprints numpy >= 2 scalars as np.float64(0.5)), booleans
_WRAPPER = r"^(?:np|numpy|torch)?\.?(?:float\d*|int\d*|tensor)\((.*?)(?:,\s*device=.*)?\)$"


@dataclass
class Chunk:
    """One block of lines plus what a dialect may carry from block to block."""

    path: Path
    lines: pl.DataFrame
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class Extract:
    records: pl.DataFrame
    overflows: pl.DataFrame | None = None
    anchors: pl.DataFrame | None = None  # (line, step) of progress lines, when cheaper to give


def empty_records() -> pl.DataFrame:
    return pl.DataFrame(schema=RECORD_SCHEMA)


def empty_overflows() -> pl.DataFrame:
    return pl.DataFrame(schema=OVERFLOW_SCHEMA)


#: a number as printed, before its unit (thousands separators allowed)
NUM = (
    r"[-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
    r"|[-+]?(?:nan|NaN|NAN|inf|Inf|INF|Infinity|infinity)\b"
)
#: one-letter multipliers after a number (``1.2k``, ``18.9M``); longer units are dropped
MULTIPLIERS = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def scaled(num: pl.Expr, unit: pl.Expr) -> pl.Expr:
    """A number string (:data:`NUM`) without its thousands separators, times the multiplier
    its unit names (1 for any other unit: ``GiB``, ``%``, ``s``, ``tokens/s``)."""
    plain = num.str.replace_all(",", "").cast(pl.Float64, strict=False)
    scale = unit.replace_strict(MULTIPLIERS, default=1.0, return_dtype=pl.Float64)
    return plain * scale


def number(expr: pl.Expr) -> pl.Expr:
    """A value string as Float64: trims blanks, unwraps ``np.float64(x)``, reads nan/inf,
    thousands separators, multipliers and units (``12,345``, ``18.9M``, ``31.2GiB``, ``45%``).

    >>> s = pl.Series(["1.5E+00", " nan ", "np.float64(-inf)", "True", "x", "18.9M", "31.2GiB"])
    >>> pl.select(number(pl.lit(s))).to_series().to_list()
    [1.5, nan, -inf, 1.0, None, 18900000.0, 31.2]
    """
    text = expr.str.strip_chars().str.replace(_WRAPPER, "$1").str.strip_chars()
    text = text.replace({"True": "1", "False": "0"})
    parts = text.str.extract_groups(rf"^['\"]?({NUM})([A-Za-z%/]*)['\"]?(?:\s*\(.*\))?$")
    return pl.coalesce(
        text.cast(pl.Float64, strict=False),
        scaled(parts.struct.field("1"), parts.struct.field("2").fill_null("")),
    )


def checked(frame: pl.DataFrame, *, path: Path, raw: str, what: str) -> pl.DataFrame:
    """Cast column ``raw`` to ``value``; rows that do not parse are dropped with one warning.

    A value that matched a pattern but is not a number is never guessed: it becomes no row,
    and the warning names the first ``file:line`` and how many there were.
    """
    frame = frame.with_columns(
        pl.col(raw).str.strip_chars().cast(pl.Float64, strict=False).alias("value")
    )
    if frame["value"].null_count():  # wrappers like np.float64(x), True/False: the slow path
        frame = frame.with_columns(number(pl.col(raw)).alias("value"))

    def says(bad: pl.DataFrame) -> str:
        first = bad.row(0, named=True)
        return (
            f"{bad.height} {what} value(s) are not "
            f"numbers (first: {str(first[raw])[:40]!r} for {str(first.get('key'))[:60]!r}); "
            "skipped"
        )

    return skip_nulls(frame, "value", path=path, says=says).drop(raw)


def skip_nulls(
    frame: pl.DataFrame, column: str, *, path: Path, says: Callable[[pl.DataFrame], str]
) -> pl.DataFrame:
    """``frame`` without its rows where ``column`` is null, with one warning when there are
    any: the first one's ``file:line``, then ``says(those rows)``. The warning points at the
    caller's caller, as a warning the caller gave with ``stacklevel=3``."""
    bad = frame.filter(pl.col(column).is_null())
    if not bad.height:
        return frame
    message = f"{where(path, int(bad['line'][0]))}: {says(bad)}"
    warnings.warn(IngestWarning(message), stacklevel=4)
    return frame.filter(pl.col(column).is_not_null())


def steps(expr: pl.Expr) -> pl.Expr:
    """A step string as Int64 (null when it does not fit)."""
    return expr.str.strip_chars().cast(pl.Int64, strict=False)


_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?")
_STAMP_AT_START = re.compile(r"^\W*(?:\[?(?:default|rank)?\d+\]:\s*)?\[?(?=\d{4}-)")
_REGEX_WALL = (
    r"^\W*(?:\[?(?:default|rank)?\d+\]:\s*)?\[?"
    r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?"
)


def step_lines(lines: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """``line, wall_time, step, rest`` of the lines (with their ``wall_time``) that match
    ``pattern`` (group 1: the step, group 2: the rest of the line); lines whose step does not
    fit in Int64 are dropped."""
    hits = (
        lines.select("line", pl.col("text").str.extract_groups(pattern).alias("m"), "wall_time")
        .unnest("m")
        .filter(pl.col("1").is_not_null())
    )
    return hits.select(
        "line", "wall_time", steps(pl.col("1")).alias("step"), pl.col("2").alias("rest")
    ).filter(pl.col("step").is_not_null())


def with_wall_time(frame: pl.DataFrame, *, column: str = "text") -> pl.DataFrame:
    """Add ``wall_time``: seconds since the epoch from a leading timestamp (as UTC), else null.

    Accepts ``[2023-04-18 01:46:52,554]`` (DeepSpeed), ``[2024-05-01 10:00:00.123456]``
    (Megatron), ``2021-01-01 00:00:00 | INFO`` (fairseq), after a launcher prefix. The
    position is learnt from the first line and read by slicing (no regex per line); lines
    laid out differently fall back to a regex.

    >>> f = pl.DataFrame({"text": ["[2023-04-18 01:46:52,554] x", " iteration 1/ 2 |"]})
    >>> with_wall_time(f)["wall_time"].to_list()
    [1681782412.554, None]
    """
    texts = frame[column]
    offset = _offset(texts)
    if offset is None:
        return frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    fast = _sliced(texts, offset)
    if fast.null_count() and fast.null_count() < len(fast):
        fast = fast.fill_null(_regex_wall(texts))
    return frame.with_columns(fast.alias("wall_time"))


def _offset(texts: pl.Series) -> int | None:
    """Where the date starts on the first line that has a leading timestamp."""
    for text in texts.head(64).to_list():
        start = _STAMP_AT_START.match(text) if text is not None else None
        if start is not None and _STAMP.match(text, start.end()) is not None:
            return start.end()
    return None


def _sliced(texts: pl.Series, offset: int) -> pl.Series:
    stamp = texts.str.slice(offset, 19).str.replace("T", " ", literal=True)
    seconds = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us").dt.epoch("s")
    digits = texts.str.slice(offset + 19, 10).str.extract(r"^[.,](\d{1,9})", 1)
    frac = digits.cast(pl.Float64, strict=False) / (10.0 ** digits.str.len_chars().cast(pl.Float64))
    return seconds.cast(pl.Float64) + frac.fill_null(0.0)


def _regex_wall(texts: pl.Series) -> pl.Series:
    parts = (
        pl.DataFrame({"t": texts}).select(pl.col("t").str.extract_groups(_REGEX_WALL)).unnest("t")
    )
    stamp = pl.concat_str(pl.col("1"), pl.lit(" "), pl.col("2"))
    frac = pl.col("3").cast(pl.Float64, strict=False) / (10.0 ** pl.col("3").str.len_chars())
    seconds = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us").dt.epoch("s")
    return parts.select(seconds.cast(pl.Float64) + frac.fill_null(0.0)).to_series()


def pairs(
    frame: pl.DataFrame, *, column: str, sep: str, kv: str, keep: tuple[str, ...] = ()
) -> pl.DataFrame:
    """Explode ``column`` (``k: v<sep>k: v...``) into rows ``key``, ``raw`` (+ ``keep`` columns).

    The key is everything before the *last* ``kv`` of a field (keys like ``lm loss`` have
    blanks; values never contain ``kv``); empty fields are dropped.

    >>> f = pl.DataFrame({"line": [1], "rest": ["lm loss: 2.5E+00 | grad norm: 1.0"]})
    >>> pairs(f, column="rest", sep=" | ", kv=":", keep=("line",)).rows()
    [(1, 'lm loss', '2.5E+00'), (1, 'grad norm', '1.0')]
    """
    fields = frame.select(*keep, pl.col(column).str.split(sep).alias("_f")).explode("_f")
    split = pl.col("_f").str.extract_groups(rf"^\s*(.*\S)\s*{_re_escape(kv)}\s*(.*?)\s*$")
    out = fields.select(*keep, split.alias("_kv")).unnest("_kv").rename({"1": "key", "2": "raw"})
    return out.filter(pl.col("key").is_not_null() & (pl.col("key") != ""))


def bar_fields(chunk: Chunk, marker: str, pattern: str) -> pl.DataFrame | None:
    """The ``key: value | key: value`` fields (``line``, ``step``, ``wall_time``, ``key``,
    ``raw``) of the block's lines holding ``marker`` that ``pattern`` matches (its groups: the
    step, then the fields); None when no line does."""
    lines = chunk.lines.filter(pl.col("text").str.contains(marker, literal=True))
    if lines.is_empty():
        return None
    hits = step_lines(with_wall_time(lines), pattern).with_columns(
        pl.col("rest").str.strip_chars_end(" |")
    )
    if hits.is_empty():
        return None
    return pairs(hits, column="rest", sep="|", kv=":", keep=("line", "step", "wall_time"))


def any_of(*literals: str, column: str = "text") -> pl.Expr:
    """True where ``column`` contains any of ``literals`` (one regex pass, not one per literal).

    >>> f = pl.DataFrame({"text": ["a step=1", "x|y", "none"]})
    >>> f.filter(any_of("step=", "|"))["text"].to_list()
    ['a step=1', 'x|y']
    """
    return pl.col(column).str.contains("|".join(_re_escape(lit) for lit in literals))


def finish(frame: pl.DataFrame, *, attach: int = 0, anchor: bool = False) -> pl.DataFrame:
    """Add the constant columns and order the columns as :data:`RECORD_SCHEMA`."""
    extra = []
    if "wall_time" not in frame.columns:
        extra.append(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    if "step" not in frame.columns:
        extra.append(pl.lit(None, dtype=pl.Int64).alias("step"))
    frame = frame.with_columns(
        *extra, pl.lit(attach, dtype=pl.Int8).alias("attach"), pl.lit(anchor).alias("anchor")
    )
    return frame.select([pl.col(c).cast(t) for c, t in RECORD_SCHEMA.items()])


def _re_escape(text: str) -> str:
    return "".join("\\" + ch if not ch.isalnum() and ch != " " else ch for ch in text)
