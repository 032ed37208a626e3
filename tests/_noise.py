"""AR(1) noise for synthetic test series, the one implementation the tests share.

``x[t] = phi * x[t-1] + e[t]`` is a first-order recursive filter: ``scipy.signal.lfilter``
runs it in C, bit for bit what the Python loop it replaced gave (``tests/align/test_noise.py``).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter


def ar1(
    rng: np.random.Generator,
    n: int,
    *,
    phi: float = 0.6,
    sigma: float = 1.0,
    stationary: bool = True,
) -> np.ndarray:
    """``n`` steps of Gaussian AR(1) noise with lag-1 autocorrelation ``phi``.

    ``stationary=True``: ``sigma`` is the series' standard deviation from the first step on
    (innovations ``N(0, sigma * sqrt(1 - phi**2))``, then ``x[0] ~ N(0, sigma)``, drawn in this
    order). ``stationary=False``: ``sigma`` is the innovations' standard deviation and the
    series starts at the first innovation.

    >>> ar1(np.random.default_rng(0), 3, phi=0.5, sigma=1.0, stationary=False).round(3)
    array([ 0.126, -0.069,  0.606])
    """
    if not 0.0 <= abs(phi) < 1.0 or sigma < 0 or n < 1:
        raise ValueError(f"need |phi| < 1, sigma >= 0, n >= 1; got {phi}, {sigma}, {n}")
    if stationary:
        innovations = rng.normal(scale=sigma * np.sqrt(1 - phi**2), size=n)
        innovations[0] = rng.normal(scale=sigma)
    else:
        innovations = rng.normal(0.0, sigma, n)
    return np.asarray(lfilter([1.0], [1.0, -phi], innovations), dtype=np.float64)
