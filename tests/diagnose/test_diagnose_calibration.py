"""The fp16 loss scaler's start-up calibration: one rule (``scaler.calibration_end``) for the
scaler's skip counts and for non-finite gradient norms, pinned on small hand-made series.

A dynamic scaler starts at 2^16 and halves on overflow steps until it settles: those first overflows
are calibration, not a fault (docs/failures.md#benign-look-alikes, the DeepSpeed-Chat logs). A run
that overflows continuously from its start never settled: a fault from the first step.
"""

from __future__ import annotations

import numpy as np
import pytest

from proxydiag.diagnose.config import DiagnoseConfig, ScalerConfig
from proxydiag.diagnose.detectors import nonfinite, scaler
from proxydiag.diagnose.view import Series, from_arrays

CFG = DiagnoseConfig()
STEPS = np.arange(1, 401)

#: overflow steps: a calibration burst in the first 8 steps, a real overflow from step 250
CALIBRATION_THEN_FAULT = (STEPS <= 8) | (STEPS >= 250)
NO_CALIBRATION = STEPS >= 250
CONTINUOUS = np.ones(STEPS.size, dtype=bool)


def _calibration(overflow: np.ndarray, steps: np.ndarray = STEPS) -> int | None:
    return scaler.calibration_end(
        Series("skipped", steps, overflow.astype(np.float64)), ScalerConfig()
    )


def _scaler_events(overflow: np.ndarray) -> list[tuple[str, int | None]]:
    view = from_arrays({"skipped": (STEPS, overflow.astype(np.float64))})
    return [(e.kind, e.onset_step) for e in scaler.detect(view, CFG)]


def _nonfinite_events(overflow: np.ndarray) -> list[tuple[str, int | None, str]]:
    """The same overflow steps as non-finite grad norms of an fp16 run (it logs a loss scale)."""
    view = from_arrays(
        {
            "grad_norm": (STEPS, np.where(overflow, np.nan, 1.0)),
            "loss_scale": (STEPS, np.full(STEPS.size, 1024.0)),
        }
    )
    return [(e.kind, e.onset_step, e.severity) for e in nonfinite.detect(view, CFG)]


def test_a_calibration_burst_then_a_real_overflow() -> None:
    assert _calibration(CALIBRATION_THEN_FAULT) == 8
    assert _scaler_events(CALIBRATION_THEN_FAULT) == [("calibration", 1), ("skip_burst", 250)]
    assert _nonfinite_events(CALIBRATION_THEN_FAULT) == [("nonfinite", 250, "critical")]


def test_no_calibration_at_all() -> None:
    assert _calibration(NO_CALIBRATION) is None
    assert _scaler_events(NO_CALIBRATION) == [("skip_burst", 250)]
    assert _nonfinite_events(NO_CALIBRATION) == [("nonfinite", 250, "critical")]


def test_overflowing_continuously_from_the_start_is_a_fault_not_calibration() -> None:
    assert _calibration(CONTINUOUS) is None
    assert _scaler_events(CONTINUOUS) == [("skip_burst", 1)]
    assert _nonfinite_events(CONTINUOUS) == [("nonfinite", 1, "critical")]
    # also when it stops later than any calibration could, and when the run is short
    assert _calibration(STEPS <= 200) is None
    assert _calibration(np.ones(30, dtype=bool), np.arange(1, 31)) is None


def test_a_calibration_is_a_calibration_for_both_detectors() -> None:
    """The scaler's counts and the non-finite points go through the same rule."""
    burst = STEPS <= 12
    assert _calibration(burst) == 12
    assert _scaler_events(burst) == [("calibration", 1)]
    assert _nonfinite_events(burst) == [("nonfinite", 1, "info")]


@pytest.mark.parametrize(
    ("steps", "counts", "expected"),
    [
        # a log that records skipped steps only at its overflow lines: the scale settles
        # through sparse overflows (the DeepSpeed-Chat DPO log: 7 in its first 209 steps)
        (np.array([1, 2, 3, 10, 77, 136, 209, 473, 638, 872, 1031, 1071]), np.ones(12), 151),
        # a 4-step benchmark whose two start-up overflows are all it logged (bigscience
        # hf_ds_gpt2): too little data to show anything persisting
        (np.array([0]), np.array([2.0]), 0),
    ],
)
def test_sparse_or_short_start_up_overflows_stay_calibration(
    steps: np.ndarray, counts: np.ndarray, expected: int
) -> None:
    assert scaler.calibration_end(Series("skipped", steps, counts), ScalerConfig()) == expected


def test_a_short_run_that_overflows_on_every_step_has_a_fault() -> None:
    """20 logged steps, every one skipped while the scale halves to its minimum: judged on the
    steps the run has, not a 40-step window it never filled (it was 'calibration')."""
    steps = np.arange(1, 21)
    assert _calibration(np.ones(20, dtype=bool), steps) is None
