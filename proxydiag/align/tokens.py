"""Alignment by consumed tokens (or samples): the runs' cumulative counters, on their overlap.

Used when every run logs ``tokens`` (else ``samples``): a proxy with another batch size or
sequence length is compared at equal data consumed. The counter's own logged points are the
knots of the map; steps between them are placed by linear interpolation of the *counter*.
"""

from __future__ import annotations

import numpy as np

from proxydiag.align.axis import Axis
from proxydiag.errors import AnalysisError
from proxydiag.run import Run

NAME = "tokens"
RANGE = "overlap"
COUNTERS = ("tokens", "samples")


def counter_for(runs: list[Run]) -> str:
    """``tokens`` when every run logs it, else ``samples``; AnalysisError when neither."""
    for counter in COUNTERS:
        if all(run.has(counter) for run in runs):
            return counter
    lacking = next(r for r in runs if not r.has("tokens"))
    raise AnalysisError(
        f"run {lacking.id}: --align tokens needs 'tokens' or 'samples' logged by every run; "
        "use --align step or --align progress"
    )


def axis(run: Run, *, counter: str = "tokens") -> Axis:
    """The map step -> consumed ``counter`` of ``run`` (finite, non-decreasing points only)."""
    steps, values = run.series(counter)
    keep = np.isfinite(values)
    steps, values = steps[keep].astype(np.float64), values[keep]
    if values.size < 2:
        raise AnalysisError(
            f"run {run.id}: '{counter}' has fewer than 2 finite points; "
            "use --align step or progress"
        )
    monotone = values >= np.maximum.accumulate(values)  # a counter reset is not a position
    steps, values = steps[monotone], values[monotone]
    steps, first = np.unique(steps, return_index=True)
    return Axis(counter, steps, values[first])
