"""Alignment by relative progress: each run's own first..last step mapped onto [0, 1].

Runs of different length (or with rescaled step counters, e.g. a proxy with a larger batch)
are compared over their whole length.
"""

from __future__ import annotations

from proxydiag.align.axis import Axis, linear
from proxydiag.run import Run

NAME = "progress"
RANGE = "progress"


def axis(run: Run) -> Axis:
    """Map ``run``'s steps onto [0, 1].

    >>> from proxydiag.frame import raw
    >>> from proxydiag.run.build import build_run
    >>> run = build_run(
    ...     raw([100, 300], ["loss"] * 2, [1.0, 0.5]), name="r", source="mem", fmt="test"
    ... )
    >>> axis(run)(200).item()
    0.5
    """
    return linear(
        "progress",
        first_step=run.first_step,
        last_step=max(run.last_step, run.first_step + 1),
        first=0.0,
        last=1.0,
    )
