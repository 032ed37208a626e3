"""The drift detector's Kendall tau and Theil-Sen slope equal scipy's, ties included, and its
exact p-value (no ties, at most 33 points or a monotone series) without importing scipy."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from scipy import stats

from proxydiag.diagnose._stats import kendall_tau, theil_sen_slope


def _close(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 1e-10 * max(abs(a), 1e-300)


@pytest.mark.parametrize(
    "shape", ["noise", "rounded", "trend", "tied_x", "constant_y", "monotone", "one_swap", "short"]
)
def test_equal_to_scipy(shape: str) -> None:
    rng = np.random.default_rng(zlib.crc32(shape.encode()))  # the same in every process
    for _ in range(60):
        n = int(rng.integers(2, 300))
        x = np.sort(rng.choice(10**6, n, replace=False)).astype(float)
        y = rng.standard_normal(n)
        if shape == "rounded":
            y = np.round(y, 1)
        elif shape == "trend":
            y = np.arange(n) * 0.01 + y
        elif shape == "tied_x":  # pairs of equal x (at least two distinct: scipy warns else)
            n = max(n, 3)
            x = np.repeat(np.arange((n + 1) // 2), 2)[:n].astype(float)
            y = rng.integers(0, 3, n).astype(float)
        elif shape == "constant_y":
            y = np.ones(n)
        elif shape in ("monotone", "one_swap"):  # a schedule, a counter, a smooth curve
            y = np.cumsum(rng.uniform(0.1, 1.0, n)) * rng.choice([-1.0, 1.0])
            if shape == "one_swap" and n > 2:
                k = int(rng.integers(0, n - 1))
                y[[k, k + 1]] = y[[k + 1, k]]
        elif shape == "short":  # the exact distribution at every size it is used for
            n = int(rng.integers(2, 34))
            x, y = np.arange(n, dtype=float), rng.standard_normal(n)
        want = stats.kendalltau(x, y)
        tau, p = kendall_tau(x, y)
        assert _close(float(want.statistic), tau) and _close(float(want.pvalue), p), (n, shape)
        assert _close(float(stats.theilslopes(y, x).slope), theil_sen_slope(y, x))
