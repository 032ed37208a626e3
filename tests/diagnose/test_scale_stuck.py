"""A loss scale that stops halving while every step overflows is no dynamic scaler at work.

Under a dynamic loss scaler non-finite grad norms are the scaler's (judged by its events); but
a scaler halves at every overflow, so a stretch of overflows with the scale held still is a
static scale that no longer fits the gradients (a real TRL fp16 run, its scale pinned at 2^40
from step 30, read healthy).
"""

from __future__ import annotations

import numpy as np
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.view import from_arrays
from proxydiag.frame import raw
from proxydiag.run.build import build_run


def _run(scale: np.ndarray, grad: np.ndarray) -> object:
    steps = np.arange(1, scale.size + 1)
    loss = np.linspace(2.0, 1.0, scale.size)
    keys = ["loss_scale"] * steps.size + ["grad_norm"] * steps.size + ["loss"] * steps.size
    return build_run(
        raw(np.r_[steps, steps, steps], keys, np.r_[scale, grad, loss]),
        name="s",
        source="s",
        fmt="test",
    )


@pytest.mark.parametrize("pinned_from", [30, 80])
def test_a_pinned_scale_that_overflows_every_step_is_an_overflow(pinned_from: int) -> None:
    n = pinned_from + 40
    scale = np.full(n, 2.0**19)
    scale[pinned_from - 1 :] = 2.0**40
    grad = np.ones(n)
    grad[pinned_from:] = np.nan
    d = diagnose(_run(scale, grad))
    assert d.label == "gradient_overflow" and d.onset_step == pinned_from + 1


def test_a_scale_that_halves_at_each_isolated_overflow_stays_healthy() -> None:
    n = 150
    scale, grad = np.empty(n), np.ones(n)
    level = 2.0**16
    for i in range(n):
        if i % 25 == 24:  # a growth probe: overflow, skipped, the scale halved back
            grad[i], level = np.inf, level / 2
        elif i % 25 == 0 and i:
            level *= 2
        scale[i] = level
    assert diagnose(_run(scale, grad)).label == "healthy"


def test_from_arrays_view_is_enough_for_the_rule() -> None:
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.diagnose.detectors import nonfinite

    steps = np.arange(1, 41)
    v = from_arrays(
        {
            "loss_scale": (steps, np.r_[np.full(20, 2.0**16), np.full(20, 2.0**30)]),
            "grad_norm": (steps, np.r_[np.ones(20), np.full(20, np.nan)]),
        }
    )
    [event] = nonfinite.detect(v, DiagnoseConfig())
    assert event.severity == "critical" and event.onset_step == 21
