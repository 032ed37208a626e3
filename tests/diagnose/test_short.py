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


def _events(grad: list[float]) -> list[str]:
    steps = np.arange(10, 10 * (len(grad) + 1), 10)
    rv = from_arrays({"grad_norm": (steps, np.array(grad))})
    return [e.kind for e in short.detect(rv, DiagnoseConfig())]


def test_a_run_s_first_points_need_a_blow_up_that_holds() -> None:
    """A window that starts with training is a live run's first checks, not an excerpt quoted
    for its blow-up: one or two high grad-norm points (8-12x) may still come back, and are not
    a divergence yet; three that stand are, and so is a climb that keeps climbing."""
    for spike in ([2.2], [2.2, 3.3], [0.3, 3.3], [3.3, 0.9, 3.0]):
        assert _events([*BASE, *spike]) == [], spike
    assert _events([*BASE, 2.2, 3.3, 2.9]) == ["divergence"]
    assert _events([*BASE, 0.9, 1.6, 2.8, 4.0]) == ["divergence"]


def test_an_excerpt_is_judged_on_its_last_point() -> None:
    """An excerpt quoted from the middle of a run (its first step far from the start) is what
    the short detector is for: a grad norm x12 at its last point is a blow-up."""
    steps = np.arange(5000, 5000 + 10 * (len(BASE) + 2), 10)
    grad = np.array([*BASE, 0.9, 3.3])
    rv = from_arrays({"grad_norm": (steps, grad)})
    assert [e.kind for e in short.detect(rv, DiagnoseConfig())] == ["divergence"]


def test_a_run_s_first_loss_points_need_a_blow_up_that_holds() -> None:
    """The same for a loss: a run's first points rising 2.2 -> 4.5 nats on one or two points
    may still come back; three that stand are a blow-up."""
    base = [2.3, 2.25, 2.2, 2.2, 2.15, 2.2, 2.18, 2.2, 2.16]
    steps = np.arange(10, 10 * (len(base) + 4), 10)
    for tail, found in (([4.5], []), ([4.2, 4.6], []), ([4.2, 4.6, 4.4], ["divergence"])):
        loss = np.array([*base, *tail])
        rv = from_arrays({"loss": (steps[: loss.size], loss)})
        assert [e.kind for e in short.detect(rv, DiagnoseConfig())] == found, tail
