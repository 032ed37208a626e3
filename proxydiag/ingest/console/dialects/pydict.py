"""Python dict reprs printed as log lines: slime, the HF Trainer and TRL.

- slime (``backends/megatron_utils``): ``step 3: {'train/loss': 0.5, ...}``,
  ``critic-step 3: {...}``, ``perf 3: {...}``, ``eval 3: {...}`` after any logger prefix. The
  number is the step as printed (the train step for ``step``, the rollout id otherwise).
- HF Trainer (``ProgressCallback``): ``{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate':
  5e-05, 'epoch': 0.1}`` after any tqdm ``\\r`` redraws. transformers >= 5 prints every value
  as a quoted string (``{'loss': '2.31', 'grad_norm': 'nan', ...}``): a string that reads as a
  number is one. TRL's PPO prints ``{'episode': 128, 'epoch': 0.1, 'objective/kl': ...}``.

Where the step comes from (the first that is there; ``attrs["step_source"]`` and a
``step_source`` event say which):

1. the dict's own counter: ``step``, ``global_step``, ``iteration`` or ``episode``;
2. the tqdm counter drawn on the same line before the dict (``378/2724 [...]``): tqdm redraws
   at most every 0.1 s, so the counter drawn may lag the step; a training dict takes
   ``max(counter, previous step + 1)``, any other ``max(counter, previous step)``;
3. the record's order: the index of the training dict (1, 2, ...); eval dicts take the
   current index.

A training dict is any dict that is neither an evaluation (``eval_*`` keys) nor the run-end
summary (``train_runtime``, ``train_samples_per_second``, ...): the summary's values are not
curve points and go into ``attrs["run_summary"]``. HF's ``logging_nan_inf_filter`` hides NaN
losses.

The dicts are parsed with :func:`ast.literal_eval` -- a literal parser, never ``eval`` --
one line at a time, which is fine: such lines are few (one per logging interval). Only
number values are kept (``True``/``False`` as 1/0; the bare ``nan``/``inf`` Python prints
are read as NaN/±inf); anything unparseable is skipped with a warning naming ``file:line``.
"""

from __future__ import annotations

import ast
import json
import math
import re
import warnings
from typing import Any

import polars as pl

from proxydiag.errors import IngestWarning, where
from proxydiag.ingest.console._records import MULTIPLIERS, Chunk, Extract, empty_records, finish

NAME = "dict"
#: the HF index of log lines runs from block to block: blocks are read in order
SEQUENTIAL = True
SNIFF = re.compile(
    r"(?:^|\r)\s*\{'[^']+': '?[-+\d.na]|\b[A-Za-z][\w\-/]* \d+: \{'"
    r"|^\s*\{\"[^\"]+\": \"?[-+\d.na][^\n]*\"global_step/max_steps\"",
    re.MULTILINE,
)

_SLIME = r"(?:^|\s)([A-Za-z][\w\-/]*) (\d+): (\{'.*\})\s*$"
_HF = r"^\s*(?:\[\w+\]:\s*)?(\{['\"].*\})\s*$"
#: the last tqdm counter drawn before the dict (``378/2724 [00:10<...]``)
_TQDM = r"^(?:.*\D)?(\d+)/\d+ \[[^\]\r]*\][^\r{]*(?:\r[^\r{]*)*\{'"
#: a dict's own step counters, in order of preference (ms-swift's ``'global_step/max_steps':
#: '2/4389'`` is read as 2)
COUNTERS = ("step", "global_step", "global_step/max_steps", "iteration", "episode")
_FRACTION = re.compile(r"^\s*(\d+)\s*/\s*\d+\s*$")
#: keys of the run-end summary the HF Trainer logs once (not curve points)
SUMMARY_KEYS = frozenset(
    {
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "total_flos",
        "train_loss",
    }
)
MAX_DICT_CHARS = 200_000
# Python prints float("nan") and float("inf") in a dict as bare nan / inf, which are not
# literals: inf becomes 1e999 (a literal that reads as inf), nan a marker string
_NONFINITE = re.compile(r"(?<![\w'\"])(-?)(nan|inf)(?![\w'\"])")
_NAN = "__proxydiag_nan__"


def extract(chunk: Chunk) -> Extract:
    """The records (and overflow rows) of this dialect's lines in one block."""
    text = pl.col("text")
    lines = chunk.lines.filter(
        text.str.contains("{'", literal=True) | text.str.contains(r'^\s*\{"')
    ).with_columns(
        text.str.extract(_TQDM, 1).cast(pl.Int64, strict=False).alias("tqdm"),
        pl.when(text.str.contains("\r", literal=True))
        .then(text.str.replace(r"^.*\r", ""))
        .otherwise(text)
        .alias("text"),
    )
    if lines.is_empty():
        return Extract(empty_records())
    found = lines.select(
        "line",
        pl.col("text").str.extract(_SLIME, 2).alias("step"),
        "tqdm",
        pl.coalesce(
            pl.col("text").str.extract(_SLIME, 3), pl.col("text").str.extract(_HF, 1)
        ).alias("body"),
    ).filter(pl.col("body").is_not_null())
    rows = _literal_rows(chunk, found.rows())
    if not rows["key"]:
        return Extract(empty_records())
    frame = pl.DataFrame(
        rows, schema={"line": pl.Int64, "step": pl.Int64, "key": pl.Utf8, "value": pl.Float64}
    )
    return Extract(finish(frame, anchor=True))


def _literal_rows(chunk: Chunk, found: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"line": [], "step": [], "key": [], "value": []}
    bad: list[int] = []
    for line, step_text, tqdm, body in found:
        data = _literal(body)
        if data is None:
            bad.append(line)
            continue
        values = {
            k: num
            for k, v in data.items()
            if isinstance(k, str) and (num := _number(v)) is not None
        }
        values.update(_fractions(data))
        if not values:  # a config dict ({'random_ltd': {...}}): no curve point, no step
            continue
        if "train_runtime" in values:
            chunk.state.setdefault("attrs", {})["run_summary"] = values
            continue
        step = _step(chunk, step_text, tqdm, values)
        if not -(2**63) <= step < 2**63:
            bad.append(line)
            continue
        for key, num in values.items():
            if key in ("step", "global_step/max_steps"):
                continue
            out["line"].append(line)
            out["step"].append(step)
            out["key"].append(key)
            out["value"].append(num)
    if bad:
        warnings.warn(
            IngestWarning(
                f"{where(chunk.path, bad[0])}: {len(bad)} dict line(s) are not Python literals; "
                "skipped"
            ),
            stacklevel=3,
        )
    return out


def _fractions(data: dict[Any, Any]) -> dict[str, float]:
    """Counters printed as ``'N/M'`` strings (ms-swift's ``global_step/max_steps``) as N."""
    out = {}
    for key in COUNTERS:
        value = data.get(key)
        if isinstance(value, str) and (m := _FRACTION.match(value)):
            out[key] = float(m.group(1))
    return out


def _literal(body: str) -> dict[Any, Any] | None:
    if len(body) > MAX_DICT_CHARS:
        return None
    if body.startswith('{"'):  # a JSON line (ms-swift's logging.jsonl, echoed to the console)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return data
    body = _NONFINITE.sub(lambda m: f"'{_NAN}'" if m[2] == "nan" else f"{m[1]}1e999", body)
    try:
        data = ast.literal_eval(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _step(chunk: Chunk, step_text: str | None, tqdm: int | None, values: dict[str, float]) -> int:
    """The dict's step (see the module docstring for the order), noting where it came from."""
    if step_text is not None:
        return int(step_text)
    prev = int(chunk.state.get("hf_index", 0))
    training = not any(k.startswith("eval_") for k in values)
    own = next((k for k in COUNTERS if k in values and math.isfinite(values[k])), None)
    if own is not None:
        step, source = int(values[own]), f"the dict's own {own!r}"
    elif tqdm is not None:
        step = max(int(tqdm), prev + 1 if training else prev)
        source = "the tqdm counter on the same line"
    else:
        step, source = (prev + 1 if training else prev), "the order of the training log lines"
    chunk.state["hf_index"] = step
    _note_source(chunk, source)
    return step


def _note_source(chunk: Chunk, source: str) -> None:
    attrs = chunk.state.setdefault("attrs", {})
    sources = attrs.setdefault("step_source", [])
    if source not in sources:
        sources.append(source)


def _number(value: Any) -> float | None:
    """A dict value as a number: numbers, booleans, and strings that read as numbers
    (transformers >= 5 prints ``'0.53'``, ``'nan'``, ``'inf'``).

    >>> [_number(v) for v in ("0.53", "-1e-05", "nan", "inf", "x", True, 3)]
    [0.53, -1e-05, nan, inf, None, 1.0, 3.0]
    """
    if value == _NAN:
        return math.nan
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return _text_number(value)
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range: keep the sign as inf
            return math.copysign(math.inf, value)
    return None


#: a string value that is a number with a unit or multiplier (``'0.32%'``, ``'31.2GiB'``,
#: ``'1.2k'``): the number, and the one-letter multiplier if any
_UNIT = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%/()]{1,12})$")


def _text_number(text: str) -> float | None:
    """>>> [_text_number(t) for t in ("0.32%", "18.9M", "31.2GiB", "1m 2s", "12/4389")]
    [0.32, 18900000.0, 31.2, None, None]
    """
    text = text.strip()
    if not text or len(text) > 40 or text[0] not in "+-.0123456789nNiI":
        return None
    try:
        return float(text)
    except ValueError:
        pass
    m = _UNIT.match(text)
    if m is None:
        return None
    return float(m.group(1)) * MULTIPLIERS.get(m.group(2), 1.0)
