"""The drift detector's Kendall tau and Theil-Sen slope equal scipy's, ties included."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from proxydiag.diagnose._stats import kendall_tau, theil_sen_slope


def _close(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or abs(a - b) <= 1e-10 * max(abs(a), 1e-300)


@pytest.mark.parametrize("shape", ["noise", "rounded", "trend", "tied_x", "constant_y"])
def test_equal_to_scipy(shape: str) -> None:
    rng = np.random.default_rng(abs(hash(shape)) % 2**32)
    for _ in range(60):
        n = int(rng.integers(2, 300))
        x = np.sort(rng.choice(10**6, n, replace=False)).astype(float)
        y = rng.standard_normal(n)
        if shape == "rounded":
            y = np.round(y, 1)
        elif shape == "trend":
            y = np.arange(n) * 0.01 + y
        elif shape == "tied_x":
            x = np.repeat(np.arange((n + 1) // 2), 2)[:n].astype(float)
            y = rng.integers(0, 3, n).astype(float)
        elif shape == "constant_y":
            y = np.ones(n)
        want = stats.kendalltau(x, y)
        tau, p = kendall_tau(x, y)
        assert _close(float(want.statistic), tau) and _close(float(want.pvalue), p), (n, shape)
        assert _close(float(stats.theilslopes(y, x).slope), theil_sen_slope(y, x))
