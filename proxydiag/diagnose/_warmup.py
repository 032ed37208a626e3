"""Where a run's warm-up ends: the stretch at its start where changes are not faults.

While the learning rate warms up, grad norms settle at a new level and the policy starts to
move (KL rises, entropy and clip fraction change): the divergence detector downgrades growth
that starts there, and the taxonomy does not count RL symptoms that start there.
"""

from __future__ import annotations

import math

import numpy as np

from proxydiag.diagnose.view import RunView

#: without a learning-rate warm-up to read, the first 10% of the run is its warm-up for RL
#: symptoms (entropy and KL move as the policy starts to learn) ...
FALLBACK_FRACTION = 0.1
#: ... and the first 5% for grad-norm / loss growth (a real divergence can start early)
GROWTH_FALLBACK_FRACTION = 0.05


def warmup_end(rv: RunView, *, fallback_fraction: float = FALLBACK_FRACTION) -> int:
    """The step where the learning rate first reaches 95% of its peak when it warms up (its
    first logged value is below half the peak, and it *ramps* there: it rises on at least
    half of its logged points up to that step), else ``fallback_fraction`` into the run.

    A learning rate that sits still and then jumps (a schedule bug, a blow-up injected at
    step 40) is not a warm-up: its jump is where a fault may start, not where one is excused,
    so the warm-up ends by the jump at the latest.

    >>> from proxydiag.diagnose.view import from_arrays
    >>> warmup_end(from_arrays({"lr": (range(100), np.minimum(1.0, np.arange(100) / 20.0))}))
    19
    >>> warmup_end(from_arrays({"lr": (range(100), np.full(100, 1e-5))}))  # constant: 10%
    10
    >>> jump = np.where(np.arange(1000) < 40, 3e-4, 1.2e-2)
    >>> warmup_end(from_arrays({"lr": (range(1000), jump)}))  # not 10%: the jump at 40
    40
    """
    first = rv.first_step or 0
    # the first step at or after that fraction (steps are integers)
    fallback = math.ceil(first + fallback_fraction * rv.span)
    lr = rv.get("lr")
    if lr is None or not lr.finite.any():
        return fallback
    steps, values = lr.steps[lr.finite], lr.values[lr.finite]
    peak = float(values.max())
    if not peak > 0 or values[0] >= 0.5 * peak:
        return fallback
    end = int(np.argmax(values >= 0.95 * peak))
    if np.count_nonzero(np.diff(values[: end + 1]) > 0) < 0.5 * end:
        return min(fallback, int(steps[end]))  # a jump, not a ramp
    return int(steps[end])
