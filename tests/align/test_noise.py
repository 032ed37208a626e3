"""The shared AR(1) test noise (``tests/_noise.py``) is bit-identical to the Python loops it
replaced (oracle test: the slow references are kept here, verbatim)."""

from __future__ import annotations

import numpy as np
import pytest
from _noise import ar1


def _loop_stationary(
    rng: np.random.Generator, n: int, *, phi: float = 0.6, sigma: float = 1.0
) -> np.ndarray:
    """Was ``tests/_fidelity_runs.ar1``."""
    e = rng.normal(scale=sigma * np.sqrt(1 - phi**2), size=n)
    out = np.empty(n)
    out[0] = rng.normal(scale=sigma)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + e[i]
    return out


def _loop_innovations(
    rng: np.random.Generator, n: int, *, phi: float = 0.6, sigma: float = 0.1
) -> np.ndarray:
    """Was ``tests/test_diagnose_detectors._ar1``."""
    e = rng.normal(0.0, sigma, n)
    out = np.empty(n)
    out[0] = e[0]
    for i in range(1, n):
        out[i] = phi * out[i - 1] + e[i]
    return out


CASES = [
    (seed, n, phi, sigma)
    for seed in range(6)
    for n in (1, 2, 300, 5000)
    for phi in (0.0, 0.2, 0.3, 0.6, 0.8, 0.99, -0.5)
    for sigma in (0.001, 0.03, 0.1, 1.0)
]


@pytest.mark.parametrize("stationary", [True, False])
def test_lfilter_is_bit_identical_to_the_loops(stationary: bool) -> None:
    loop = _loop_stationary if stationary else _loop_innovations
    for seed, n, phi, sigma in CASES:
        old_rng, rng = np.random.default_rng(seed), np.random.default_rng(seed)
        want = loop(old_rng, n, phi=phi, sigma=sigma)
        got = ar1(rng, n, phi=phi, sigma=sigma, stationary=stationary)
        assert got.dtype == np.float64 and got.shape == (n,)
        assert got.tobytes() == want.tobytes(), (seed, n, phi, sigma)
        # the generator is left where the loop left it: later draws do not shift
        assert rng.random() == old_rng.random()
