"""How a discrepancy becomes a score: relative to the seed-to-seed discrepancy.

Every test measures a discrepancy ``d ≥ 0`` between the proxy and the reference full run, and the
same discrepancy between baseline pairs (seeds, or pseudo-seeds). The *reference* is the largest
baseline discrepancy, but never less than the test's noise floor. Then

* ``score = min(1, reference / d)``: 1 within the seed range, 0.5 at twice it, 0.2 at five times;
* a test is ``faithful`` at score ≥ 0.5, ``diverged`` below 0.2, ``drifted`` in between
  (thresholds in :class:`~proxydiag.fidelity.config.FidelityConfig`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import MetricVerdict

Floats = npt.NDArray[np.float64]


def reference(baseline: Sequence[float], *, floor: float) -> float:
    """The largest finite baseline discrepancy, at least ``floor``.

    >>> reference([0.02, 0.05], floor=0.1), reference([0.3, 0.05], floor=0.1)
    (0.1, 0.3)
    """
    finite = [b for b in baseline if np.isfinite(b)]
    return max([floor, *finite])


def relative(discrepancy: Floats | float, ref: float) -> Floats:
    """``min(1, ref / discrepancy)`` (1 for a zero discrepancy).

    >>> relative(np.array([0.0, 0.1, 0.4]), 0.2).tolist()
    [1.0, 1.0, 0.5]
    """
    d = np.asarray(discrepancy, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d > ref, ref / d, 1.0)
    return np.asarray(np.where(np.isfinite(d), out, 0.0), dtype=np.float64)


def seed_score(baseline: Sequence[float], ref: float) -> float:
    """The score a typical seed pair gets (its median discrepancy against the reference).

    >>> seed_score([0.1, 0.3], 0.1)
    0.5
    """
    finite = [b for b in baseline if np.isfinite(b)]
    return float(relative(float(np.median(finite)), ref)) if finite else 1.0


def verdict(score: float, config: FidelityConfig) -> MetricVerdict:
    """faithful / drifted / diverged for one score.

    >>> (
    ...     verdict(0.6, FidelityConfig()),
    ...     verdict(0.3, FidelityConfig()),
    ...     verdict(0.1, FidelityConfig()),
    ... )
    ('faithful', 'drifted', 'diverged')
    """
    if score >= config.faithful_score:
        return "faithful"
    return "drifted" if score >= config.diverged_score else "diverged"


def fmt(x: float | None, digits: int = 2) -> str:
    """A number for an explanation (``n/a`` for None/NaN)."""
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.{digits}f}"
