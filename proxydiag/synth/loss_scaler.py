"""The fp16 dynamic loss scaler, step by step as DeepSpeed's ``DynamicLossScaler`` runs it.

On an overflow the step is skipped and the scale halves — unless hysteresis is left, which
is spent first. After ``scale_window`` clean steps the scale doubles and hysteresis is
restored (DeepSpeed ``deepspeed/runtime/fp16/loss_scaler.py::update_scale``). Whether a step
overflows depends on the scale: it does when log2(scale) exceeds the step's *headroom*
(log2 of the largest scale the gradients tolerate). This one mechanism produces the benign
calibration burst (the initial scale is far above the headroom), the periodic growth-probe
overflows (every doubling tests the headroom again) and, when the headroom collapses, a
scale that falls to its minimum with every step skipped.

The scaler is a sequential state machine, so it is a loop over steps (one per step of a
simulated run, ~1 µs each); everything else in the generator is vectorised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScalerTrace:
    """Per step: the scale after the step's update, and whether the step overflowed."""

    scale: np.ndarray
    overflow: np.ndarray
    #: scale attempted at the step (before its update), for overflow messages
    attempted: np.ndarray
    #: hysteresis left before the step's update (an overflow with > 1 left keeps the scale)
    hysteresis: np.ndarray


def run_scaler(
    headroom_log2: np.ndarray,
    *,
    init_scale_log2: int = 16,
    scale_window_steps: int = 1000,
    hysteresis: int = 2,
    min_scale: float = 1.0,
) -> ScalerTrace:
    """Run the dynamic loss scaler against a per-step headroom.

    Parameters
    ----------
    headroom_log2
        Per step, log2 of the largest loss scale that does not overflow.
    init_scale_log2
        log2 of the initial scale (DeepSpeed-Chat uses 2**16; DeepSpeed's default is 2**32).
    scale_window_steps
        Clean steps after which the scale doubles (DeepSpeed's default 1000).
    hysteresis
        Overflows tolerated before the scale halves (DeepSpeed ``delayed_shift``).
    min_scale
        The scale never goes below this.

    Examples
    --------
    >>> t = run_scaler(np.full(12, 13.5), init_scale_log2=16, scale_window_steps=5)
    >>> t.overflow.astype(int).tolist()
    [1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0]
    >>> np.log2(t.scale).astype(int).tolist()
    [16, 15, 14, 13, 13, 13, 13, 13, 14, 14, 13, 13]
    """
    if scale_window_steps < 1 or hysteresis < 1:
        raise ValueError("scale_window_steps and hysteresis must be >= 1")
    n = len(headroom_log2)
    scale_out = np.empty(n)
    attempted = np.empty(n)
    hyst_out = np.empty(n, dtype=np.int64)
    overflow = np.zeros(n, dtype=bool)
    scale = float(2.0**init_scale_log2)
    hyst = hysteresis
    last_overflow = -1
    for i in range(n):
        attempted[i] = scale
        hyst_out[i] = hyst
        over = bool(np.log2(scale) > headroom_log2[i])
        overflow[i] = over
        if over:
            if hyst <= 1:
                scale = max(scale / 2.0, min_scale)
            else:
                hyst -= 1
            last_overflow = i
        elif (i - last_overflow) % scale_window_steps == 0:
            hyst = hysteresis
            scale *= 2.0
        scale_out[i] = scale
    return ScalerTrace(scale_out, overflow, attempted, hyst_out)
