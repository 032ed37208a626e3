"""The short-window detector: a blow-up in fewer points than the window detectors need."""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import short
from proxydiag.diagnose.view import from_arrays

BASE = [0.44, 0.34, 0.32, 0.31, 0.28, 0.35, 0.25, 0.35, 0.28]


def _onset(grad: list[float]) -> int | None:
    steps = np.arange(10, 10 * (len(grad) + 1), 10)
    events = short.detect(from_arrays({"grad_norm": (steps, np.array(grad))}), DiagnoseConfig())
    assert [e.kind for e in events] == ["divergence"]
    return events[0].onset_step


def test_a_spike_that_fell_back_before_the_climb_is_not_its_onset() -> None:
    """23 finite points (a NaN tail follows): a x4 spike at step 100 fell back; the x10 climb
    leaves the level at step 160."""
    climb = [0.59, 0.78, 1.14, 1.26, 1.64, 1.99, 2.16, 2.54]
    grad = [*BASE, 1.08, 0.26, 0.23, 0.20, 0.26, 0.25, *climb] + [float("nan")] * 23
    assert _onset(grad) == 160


def test_a_dip_inside_the_climb_does_not_delay_its_onset() -> None:
    climb = [2.0, 1.6, 3.0, 0.6, 4.5, 6.0, 8.0, 9.0]
    assert _onset([*BASE, 0.3, 0.27, *climb]) == 120
