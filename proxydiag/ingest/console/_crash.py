"""A log that stops on a traceback right after a run of overflows: the overflow killed it.

DeepSpeed raises ``Current loss scale already at minimum`` (caught by the min-scale family);
other stacks die on the first NaN after the scale has fallen (an assertion, a CUDA error in
a fused kernel, a NaN check in the training loop). The traceback is the run's end: when the
last progress lines before it (:data:`RECENT_PROGRESS_LINES`) report skipped iterations, or
overflow lines lie between them and the traceback, the run died of overflow, however short
the log.
"""

from __future__ import annotations

import polars as pl

from proxydiag.events import Event

#: progress lines before the traceback in which an overflow counts as "right before" it
RECENT_PROGRESS_LINES = 2
#: record keys of per-step or per-interval skip counts (Megatron, DeepSpeed, fairseq, veRL)
SKIP_KEYS = (
    "number of skipped iterations",
    "skipped iterations",
    "skipped",
    "ds_overflow",
    "fairseq_overflow",
    "grad_norm_not_finite",
    "number of nan iterations",
)


def crash_events(
    records: pl.DataFrame,
    overflows: pl.DataFrame,
    anchor_lines: pl.DataFrame,
    tracebacks: list[int],
) -> list[Event]:
    """A critical ``overflow_crash`` event when the log ends on a traceback after overflows.

    >>> recs = pl.DataFrame({"line": [1, 2, 3], "step": [10, 11, 12],
    ...                      "key": ["number of skipped iterations"] * 3, "value": [0.0, 1, 1]})
    >>> anc = recs.select("line", "step")
    >>> ovf = pl.DataFrame(schema={"line": pl.Int64, "step": pl.Int64})
    >>> [(e.kind, e.onset_step) for e in crash_events(recs, ovf, anc, [4])]
    [('overflow_crash', 11)]
    >>> crash_events(recs, ovf, anc, [])
    []
    """
    if not tracebacks or anchor_lines.is_empty():
        return []
    last_anchor = int(anchor_lines["line"].max())  # type: ignore[arg-type]
    after = [t for t in tracebacks if t > last_anchor]
    if not after:
        return []  # training went on after the traceback (a caught, logged exception)
    tb = min(after)
    recent = anchor_lines.sort("line").tail(RECENT_PROGRESS_LINES)
    since = int(recent["line"][0])
    skips = records.filter(
        (pl.col("line") >= since)
        & (pl.col("line") < tb)
        & pl.col("key").cast(pl.Utf8).is_in(SKIP_KEYS)
        & (pl.col("value") > 0)
    )
    lines = overflows.filter((pl.col("line") >= since) & (pl.col("line") < tb))
    steps = [*skips["step"].drop_nulls().to_list(), *lines["step"].drop_nulls().to_list()]
    if skips.is_empty() and lines.is_empty():
        return []
    onset = min(steps) if steps else int(recent["step"][0])
    n = skips.height + lines.height
    return [
        Event(
            "overflow_crash",
            "skipped",
            int(onset),
            None,
            "critical",
            0.9,
            f"line {tb}: the log ends on a traceback right after {n} overflow report(s) in its "
            f"last {RECENT_PROGRESS_LINES} progress lines: the run died of overflow",
        )
    ]
