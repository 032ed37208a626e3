"""Lines of one shape are read once: the metric-line grammar on a line, its numbers sliced out
of every other line printed the same way.

A trainer prints one metric line a million times with other digits in it. Two lines have the
same *shape* when they differ only in their digits 1-9 (each read as 0: the characters, the
digit runs and their lengths are the same). The grammar's patterns look at characters and
at digits only as a class (``\\d``), never at a digit's value, so on lines of one shape they
match the same spans: the same keys, the step and each value at the same places. So the
grammar reads one line of each shape (its *representative*) and the line again with its
digit runs rewritten (*probes*: run ``j`` filled with the digit ``1 + (j // 9**p) % 9`` in
probe ``p``), and each value it reads tells, by its first digit in every probe, the digit
run it came from. That gives the shape's *plan*: where the step and each value sit, and
their keys; every line of the shape is then a few slices of fixed offsets (no pattern at
all). A plan is kept only when slicing the representative and every probe gives back
exactly what the grammar read; a shape without one (a step computed from an epoch and a
batch counter, keys with digits that change, anything the check does not confirm) is read
line by line by the grammar, as are shapes seen on fewer than :data:`SHAPE_LINES` lines of a
block.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from proxydiag.ingest.console._records import MULTIPLIERS, NUM

#: lines of a shape in a block before it is read by its plan (fewer: line by line)
SHAPE_LINES = 16
#: blocks with fewer lines are read line by line (a plan costs a few grammar reads)
MIN_LINES = 256
#: plans kept from block to block (a log of ever new shapes starts afresh past this)
MAX_PLANS = 4096

_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_RUN = re.compile(r"[0-9]+")
_NUM = re.compile(NUM)
_UNIT = re.compile(r"[A-Za-z%/]*")
_NONFINITE_WORD = re.compile(r"(?i)\b(?:nan|inf)")


@dataclass
class Facts:
    """What each line says on its own, before step headers and record order are applied."""

    #: ``line``, ``step`` (its own, or null), ``explicit`` (a counter names it), ``worded``
    #: (a step after a word: a header when the line has no pairs)
    lines: pl.DataFrame
    #: ``line``, ``step``, ``key``, ``value``, ``bare`` (``word number``, no ``:``/``=``)
    pairs: pl.DataFrame
    #: ``line``, ``step``, ``key``, ``value`` of ``<metric> is nan`` lines
    warnings: pl.DataFrame


#: the grammar on a frame of lines (``line``, ``text``)
Reader = Callable[[pl.DataFrame], Facts]


@dataclass(frozen=True)
class _Slot:
    start: int
    length: int

    def text(self) -> pl.Expr:
        return pl.col("text").str.slice(self.start, self.length)


@dataclass(frozen=True)
class _Pair:
    key: str
    bare: bool
    slot: _Slot | None  # None: the constant below (``nan``, ``inf`` printed as words)
    unit: str = ""
    constant: float = math.nan
    #: thousands separators in the number (at the same places in every line of the shape)
    commas: bool = False

    def value(self) -> pl.Expr:
        if self.slot is None:
            return pl.lit(self.constant, dtype=pl.Float64)
        text = self.slot.text()
        if self.commas:
            text = text.str.replace_all(",", "", literal=True)
        value = text.cast(pl.Float64, strict=False)
        factor = MULTIPLIERS.get(self.unit, 1.0)
        return value * factor if factor != 1.0 else value


@dataclass(frozen=True)
class Plan:
    """Where a shape's step and values sit, and what the grammar read there."""

    explicit: bool
    step: _Slot | None
    worded: _Slot | None
    pairs: tuple[_Pair, ...]
    warnings: tuple[tuple[str, float], ...]

    def read(self, part: pl.DataFrame) -> Facts:
        """The facts of lines of this shape (``line``, ``text``)."""
        base = part.select(
            "line",
            _integer(self.step).alias("step"),
            pl.lit(self.explicit).alias("explicit"),
            _integer(self.worded).alias("worded"),
            *[p.value().alias(f"_v{k}") for k, p in enumerate(self.pairs)],
        )
        lines = base.select("line", "step", "explicit", "worded")
        # pair by pair (the caller's stable sort by line puts each line's pairs in order)
        found = pl.concat(
            [_empty_pairs()]
            + [
                base.select(
                    "line",
                    "step",
                    pl.lit(p.key).alias("key"),
                    pl.col(f"_v{k}").alias("value"),
                    pl.lit(p.bare).alias("bare"),
                )
                for k, p in enumerate(self.pairs)
            ]
        )
        if found["value"].null_count():
            found = found.filter(pl.col("value").is_not_null())
        warnings = [
            lines.select(
                "line",
                "step",
                pl.lit(key).alias("key"),
                pl.lit(value, dtype=pl.Float64).alias("value"),
            )
            for key, value in self.warnings
        ]
        return Facts(lines, found, pl.concat(warnings) if warnings else _empty_warnings())


def facts(lines: pl.DataFrame, state: dict[str, Any], read: Reader, keep: pl.Expr) -> Facts:
    """What each line of ``lines`` (``line``, ``text``) that ``keep`` (an expression of
    ``text`` that looks only at a line's shape) holds says: shapes by their plans (cached in
    ``state``), the rest by ``read``."""
    if lines.height < MIN_LINES:
        lines = lines.filter(keep)
        return read(lines) if lines.height else _no_facts()
    framed = lines.select("line", "text", shape(lines["text"]).alias("shape"))
    groups = framed.group_by("shape").agg(pl.len().alias("n"), pl.col("text").first())
    # what ``keep`` says of a line it says of its shape: asked once a shape
    kept = groups.filter(keep)
    if kept.height < groups.height:
        framed = framed.filter(pl.col("shape").is_in(kept["shape"].implode()))
    common = kept.filter(pl.col("n") >= SHAPE_LINES)
    if framed.is_empty() or common.is_empty():
        return read(framed.select("line", "text"))
    plans: dict[str, Plan | None] = state.setdefault("plans", {})
    if len(plans) > MAX_PLANS:
        plans.clear()
    for key, rep in common.select("shape", "text").iter_rows():
        if key not in plans:
            plans[key] = plan(rep, read)
    planned = [key for key in common["shape"].to_list() if plans[key] is not None]
    if not planned:
        return read(framed.select("line", "text"))
    by_plan = pl.col("shape").is_in(pl.Series(planned).implode())
    rest = framed.filter(~by_plan).select("line", "text")
    parts = [read(rest)] if rest.height else []
    for (key,), part in framed.filter(by_plan).partition_by("shape", as_dict=True).items():
        found = plans[str(key)]
        assert found is not None
        parts.append(found.read(part))
    return Facts(
        pl.concat([p.lines for p in parts]).sort("line"),
        pl.concat([p.pairs for p in parts]).sort("line", maintain_order=True),
        pl.concat([p.warnings for p in parts]).sort("line", maintain_order=True),
    )


def shape(text: pl.Series) -> pl.Series:
    """Each line with its digits 1-9 read as 0 (a byte translation of the whole block)."""
    import pyarrow as pa  # once a log is read (see _lines._frame)

    arr = text.rechunk().to_arrow()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    _, offsets, data = arr.buffers()
    if data is None:
        return pl.Series("shape", [""] * len(text), dtype=pl.Utf8)
    out = pa.py_buffer(data.to_pybytes().translate(_DIGITS))
    shaped = pa.LargeStringArray.from_buffers(len(arr), offsets, out, offset=arr.offset)
    return pl.Series("shape", shaped)


def plan(rep: str, read: Reader) -> Plan | None:
    """The plan of ``rep``'s shape, or None when the probes do not confirm one."""
    runs = [m.span() for m in _RUN.finditer(rep)]
    n_probes = 1
    while 9**n_probes < len(runs):
        n_probes += 1
    # the probes, and one more with every run's digit other than in the first probe: a key
    # or anything else that holds a digit run reads differently there (no plan)
    texts = [rep] + [_probe(rep, runs, p) for p in range(n_probes)] + [_probe(rep, runs, -1)]
    got = read(pl.DataFrame({"line": list(range(len(texts))), "text": texts}))
    lines = got.lines.sort("line").to_dicts()
    if len(lines) != len(texts) or len({row["explicit"] for row in lines}) != 1:
        return None
    pairs = [got.pairs.filter(pl.col("line") == i).to_dicts() for i in range(len(texts))]
    warns = [got.warnings.filter(pl.col("line") == i).to_dicts() for i in range(len(texts))]
    sig = [[(r["key"], r["bare"]) for r in rows] for rows in pairs]
    if any(s != sig[0] for s in sig) or any(
        [(r["key"], repr(r["value"])) for r in rows]
        != [(r["key"], repr(r["value"])) for r in warns[0]]
        for rows in warns
    ):
        return None
    if any(not _nonfinite(r["value"]) for r in warns[0]):
        return None
    step_ok, step = _integer_slot([row["step"] for row in lines], texts, runs)
    worded_ok, worded = _integer_slot([row["worded"] for row in lines], texts, runs)
    if not (step_ok and worded_ok):
        return None
    found: list[_Pair] = []
    for k, (key, bare) in enumerate(sig[0]):
        pair = _value_slot(key, bare, [rows[k]["value"] for rows in pairs], texts, runs)
        if pair is None:
            return None
        found.append(pair)
    return Plan(
        explicit=bool(lines[0]["explicit"]),
        step=step,
        worded=worded,
        pairs=tuple(found),
        warnings=tuple((str(r["key"]), float(r["value"])) for r in warns[0]),
    )


def _probe(rep: str, runs: list[tuple[int, int]], p: int) -> str:
    """``rep`` with digit run ``j`` filled with the digit ``1 + (j // 9**p) % 9`` (``p =
    -1``: a digit other than probe 0's)."""
    out, last = [], 0
    for j, (a, b) in enumerate(runs):
        digit = 1 + (j // 9**p) % 9 if p >= 0 else 1 + (j + 1) % 9
        out += [rep[last:a], str(digit) * (b - a)]
        last = b
    out.append(rep[last:])
    return "".join(out)


def _run_of(values: list[float], n_runs: int) -> int | None:
    """The digit run a value of the probes came from (its first digit in each probe)."""
    j = 0
    for p, v in enumerate(values):
        if v is None or not math.isfinite(v) or v == 0:
            return None
        j += (int(f"{abs(v):e}"[0]) - 1) * 9**p
    return j if j < n_runs else None


def _integer_slot(
    steps: list[int | None], texts: list[str], runs: list[tuple[int, int]]
) -> tuple[bool, _Slot | None]:
    """Whether the probes confirm where an integer (the step) is read, and the digit run it
    is read from (None: the line has none). Not confirmed: a step computed from several
    numbers, or one that is there in some probes only."""
    if all(s is None for s in steps):
        return True, None
    known = [s for s in steps if s is not None]
    if len(known) < len(steps):
        return False, None
    j = _run_of([float(s) for s in known[1:-1]], len(runs))
    if j is None:
        return False, None
    a, b = runs[j]
    if any(int(t[a:b]) != s for t, s in zip(texts, known, strict=True)):
        return False, None
    return True, _Slot(a, b - a)


def _value_slot(
    key: str, bare: bool, values: list[float], texts: list[str], runs: list[tuple[int, int]]
) -> _Pair | None:
    """Where the value of pair ``key`` sits, checked on the representative and every probe."""
    first = values[0]
    if first is None:
        return None
    if not math.isfinite(first):
        # ``nan``/``inf`` printed as a word: the same in every line of the shape
        same = all(repr(v) == repr(first) for v in values)
        return (
            _Pair(key, bare, None, constant=first)
            if same and _NONFINITE_WORD.search(texts[0])
            else None
        )
    j = _run_of(values[1:-1], len(runs))
    if j is None:
        return None
    start = runs[j][0]
    for pos in (start - 2, start - 1, start):
        match = _NUM.match(texts[0], pos) if pos >= 0 else None
        if match is not None and match.start() <= start < match.end():
            break
    else:
        return None
    unit_match = _UNIT.match(texts[0], match.end())
    unit = unit_match.group(0) if unit_match else ""
    a, b = match.span()
    for text, value in zip(texts, values, strict=True):
        try:
            read = float(text[a:b].replace(",", "")) * MULTIPLIERS.get(unit, 1.0)
        except ValueError:
            return None
        if read != value:
            return None
    return _Pair(key, bare, _Slot(a, b - a), unit=unit, commas="," in texts[0][a:b])


def _nonfinite(value: float | None) -> bool:
    return value is not None and not math.isfinite(value)


def _integer(slot: _Slot | None) -> pl.Expr:
    if slot is None:
        return pl.lit(None, dtype=pl.Int64)
    return slot.text().cast(pl.Int64, strict=False)


def _no_facts() -> Facts:
    lines = pl.DataFrame(
        schema={"line": pl.Int64, "step": pl.Int64, "explicit": pl.Boolean, "worded": pl.Int64}
    )
    return Facts(lines, _empty_pairs(), _empty_warnings())


def _empty_pairs() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "line": pl.Int64,
            "step": pl.Int64,
            "key": pl.Utf8,
            "value": pl.Float64,
            "bare": pl.Boolean,
        }
    )


def _empty_warnings() -> pl.DataFrame:
    return pl.DataFrame(
        schema={"line": pl.Int64, "step": pl.Int64, "key": pl.Utf8, "value": pl.Float64}
    )
