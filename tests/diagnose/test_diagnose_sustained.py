"""The sustained-change locator on seeded climbs that take every path of the fit: a warm-up
transient refitted away, a rise refitted on its own, bucket medians (3,000 points) and the
square-root location space, the hinge then re-placed on that stretch. The reference values were
produced by the implementation that spliced the stretch back into the whole series (only the
stretch was ever read); they must not move."""

from __future__ import annotations

import numpy as np
import pytest

from proxydiag.diagnose import _sustained


def _climb(seed: int, n: int, onset: int, *, log: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    climb = np.maximum(t - onset, 0.0)
    # log: a second-order measure (a KL) on log scale, climbing with the square of the change
    y = np.log1p((0.01 * climb) ** 2) if log else 0.004 * climb
    y = y + rng.normal(0, 0.05, n)
    y[: n // 10] += np.linspace(1.5, 0.0, n // 10)  # a warm-up transient
    return t, y


@pytest.mark.parametrize(
    ("seed", "n", "onset", "log", "expected"),
    [
        (0, 600, 400, False, (395, "ramp", 395)),
        (1, 800, 300, False, (300, "ramp", 300)),
        (2, 3000, 2000, False, (1992, "ramp", 1992)),
        (3, 600, 350, True, (368, "ramp", 368)),
        (4, 1000, 500, True, (522, "ramp", 522)),
    ],
)
def test_climb_after_a_warm_up_transient_is_located_as_before(
    seed: int, n: int, onset: int, log: bool, expected: tuple[int, str, int]
) -> None:
    t, y = _climb(seed, n, onset, log=log)
    c = _sustained.sustained_change(t, y, sign=1, locate_power=0.5 if log else None)
    assert c is not None and (c.index, c.kind, c.onset_step) == expected
