"""Registering a reproduced fault: warp the proxy's axis so its fault onset meets the full run's.

When the proxy reproduces the full run's fault within the onset tolerance, the lag is judged by
the fault test (:mod:`proxydiag.fidelity.fault_match`); the curve tests then compare the dynamics
*around* the fault, not the lag a second time. The proxy's axis is warped piecewise linearly
through (first step, its onset, last step) so that its onset lands on the full run's onset
position; only the axis moves, never a value, and the output says so.
"""

from __future__ import annotations

import numpy as np

from proxydiag.align.axis import Axis


def register(
    axis: Axis, *, first_step: float, last_step: float, onset_step: float, to_position: float
) -> Axis | None:
    """``axis`` warped so that ``onset_step`` maps to ``to_position`` (None when impossible).

    >>> from proxydiag.align.axis import linear
    >>> ax = linear("step", first_step=0, last_step=100, first=0, last=100)
    >>> warped = register(ax, first_step=0, last_step=100, onset_step=60, to_position=50)
    >>> warped(np.array([0, 30, 60, 80, 100])).tolist()
    [0.0, 25.0, 50.0, 75.0, 100.0]
    """
    lo, onset, hi = (float(v) for v in axis(np.array([first_step, onset_step, last_step])))
    if not lo < to_position < hi or not lo < onset < hi:
        return None
    knots = np.unique(np.r_[axis.knots, first_step, onset_step, last_step])
    knots = knots[(knots >= first_step) & (knots <= last_step)]
    values = np.interp(axis(knots), [lo, onset, hi], [lo, to_position, hi])
    return Axis(axis.unit, knots.astype(np.float64), values)
