"""Python dict reprs printed as log lines: slime and the HF Trainer.

- slime (``backends/megatron_utils``): ``step 3: {'train/loss': 0.5, ...}``,
  ``critic-step 3: {...}``, ``perf 3: {...}``, ``eval 3: {...}`` after any logger prefix. The
  number is the step as printed (the train step for ``step``, the rollout id otherwise).
- HF Trainer (``ProgressCallback``): ``{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate':
  5e-05, 'epoch': 0.1}`` alone on a line (after any tqdm ``\\r`` redraws). These carry no
  step: the step is the *index of the training log line* (1, 2, ... counting the dicts that
  hold ``loss``; multiply by ``logging_steps`` for optimizer steps), or the dict's own
  ``step`` where it has one; eval dicts and the final summary take the current index.
  ``attrs["step_note"]`` says so. HF's ``logging_nan_inf_filter`` hides NaN losses.

The dicts are parsed with :func:`ast.literal_eval` -- a literal parser, never ``eval`` --
one line at a time, which is fine: such lines are few (one per logging interval). Only
number values are kept (``True``/``False`` as 1/0; the bare ``nan``/``inf`` Python prints
are read as NaN/±inf); anything unparseable is skipped with a warning naming ``file:line``.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from typing import Any

import polars as pl

from proxydiag.errors import IngestWarning, where
from proxydiag.ingest.console._records import Chunk, Extract, empty_records, finish

NAME = "dict"
#: the HF index of log lines runs from block to block: blocks are read in order
SEQUENTIAL = True
SNIFF = re.compile(r"^\s*\{'[^']+': [-+\d.]|\b[A-Za-z][\w\-/]* \d+: \{'", re.MULTILINE)

_SLIME = r"(?:^|\s)([A-Za-z][\w\-/]*) (\d+): (\{'.*\})\s*$"
_HF = r"^\s*(?:\[\w+\]:\s*)?(\{'.*\})\s*$"
MAX_DICT_CHARS = 200_000
# Python prints float("nan") and float("inf") in a dict as bare nan / inf, which are not
# literals: inf becomes 1e999 (a literal that reads as inf), nan a marker string
_NONFINITE = re.compile(r"(?<![\w'\"])(-?)(nan|inf)(?![\w'\"])")
_NAN = "__proxydiag_nan__"


def extract(chunk: Chunk) -> Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    text = pl.col("text")
    lines = chunk.lines.filter(text.str.contains("{'", literal=True)).with_columns(
        pl.when(text.str.contains("\r", literal=True))
        .then(text.str.replace(r"^.*\r", ""))
        .otherwise(text)
        .alias("text")
    )
    if lines.is_empty():
        return Extract(empty_records())
    found = lines.select(
        "line",
        pl.col("text").str.extract(_SLIME, 2).alias("step"),
        pl.coalesce(pl.col("text").str.extract(_SLIME, 3), pl.col("text").str.extract(_HF, 1)).alias("body"),
    ).filter(pl.col("body").is_not_null())
    rows = _literal_rows(chunk, found.rows())
    if not rows["key"]:
        return Extract(empty_records())
    if any(s is None for s in found["step"].to_list()):
        chunk.state.setdefault("attrs", {})["step_note"] = (
            "HF Trainer console dicts carry no step: step = index of the training log line "
            "(or the dict's own 'step')"
        )
    frame = pl.DataFrame(rows, schema={"line": pl.Int64, "step": pl.Int64, "key": pl.Utf8,
                                       "value": pl.Float64})
    return Extract(finish(frame, anchor=True))


def _literal_rows(chunk: Chunk, found: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"line": [], "step": [], "key": [], "value": []}
    bad: list[int] = []
    for line, step_text, body in found:
        data = _literal(body)
        if data is None:
            bad.append(line)
            continue
        step = _step(chunk, step_text, data)
        if not -(2**63) <= step < 2**63:
            bad.append(line)
            continue
        for key, value in data.items():
            num = _number(value)
            if num is None or key == "step" or not isinstance(key, str):
                continue
            out["line"].append(line)
            out["step"].append(step)
            out["key"].append(key)
            out["value"].append(num)
    if bad:
        warnings.warn(IngestWarning(
            f"{where(chunk.path, bad[0])}: {len(bad)} dict line(s) are not Python literals; skipped"
        ), stacklevel=3)
    return out


def _literal(body: str) -> dict[Any, Any] | None:
    if len(body) > MAX_DICT_CHARS:
        return None
    body = _NONFINITE.sub(lambda m: f"'{_NAN}'" if m[2] == "nan" else f"{m[1]}1e999", body)
    try:
        data = ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _step(chunk: Chunk, step_text: str | None, data: dict[Any, Any]) -> int:
    if step_text is not None:
        return int(step_text)
    own = data.get("step")
    if isinstance(own, int) and not isinstance(own, bool):
        chunk.state["hf_index"] = own
        return own
    index = int(chunk.state.get("hf_index", 0))
    if "loss" in data:
        index += 1
        chunk.state["hf_index"] = index
    return index


def _number(value: Any) -> float | None:
    if value == _NAN:
        return math.nan
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range: keep the sign as inf
            return math.copysign(math.inf, value)
    return None
