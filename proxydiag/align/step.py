"""Alignment by step (the default): the runs' own step numbers, compared on their overlap."""

from __future__ import annotations

from proxydiag.align.axis import Axis, linear
from proxydiag.run import Run

NAME = "step"
#: runs of different length are compared on the steps they share
RANGE = "overlap"


def axis(run: Run) -> Axis:
    """The identity map of ``run``'s steps.

    >>> from proxydiag.frame import raw
    >>> from proxydiag.run.build import build_run
    >>> run = build_run(raw([0, 10], ["loss"] * 2, [1.0, 0.5]), name="r", source="mem", fmt="test")
    >>> axis(run)(15).item()
    15.0
    """
    return linear(
        "step",
        first_step=run.first_step,
        last_step=run.last_step,
        first=run.first_step,
        last=run.last_step,
    )
