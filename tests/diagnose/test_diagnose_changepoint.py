"""Oracle tests: the change-point fits, sharing one set of cumulative sums, must equal the
previous implementation (each fit computing its own sums, ``_changepoint_reference``) bit for
bit — on random series including NaN and ±inf, which the fits do not reject (callers pass
finite values) but must treat exactly as before."""

from __future__ import annotations

import struct

import _changepoint_reference as ref
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from proxydiag.diagnose import _changepoint as cp

FITS = ("step_fit", "ramp_fit", "jump_ramp_fit", "best_change")


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _same(new: object, old: object) -> bool:
    """Equal results, floats compared by their bits (NaN equals NaN, 0.0 differs from -0.0)."""
    if isinstance(new, cp.ChangeFit) and isinstance(old, cp.ChangeFit):
        return (new.kind, new.index, new.model) == (old.kind, old.index, old.model) and all(
            _bits(getattr(new, f)) == _bits(getattr(old, f)) for f in ("shift", "sse", "sse_null")
        )
    return type(new) is type(old) and new == old


def _check(t: np.ndarray, y: np.ndarray, *, min_points: int, sign: int) -> None:
    with np.errstate(all="ignore"):
        for name in FITS:
            args = (y,) if name == "step_fit" else (t, y)
            new = getattr(cp, name)(*args, min_points=min_points, sign=sign)
            try:
                old = getattr(ref, name)(*args, min_points=min_points, sign=sign)
            except OverflowError:  # the old ramp fit squared a Python float (~1e154): it
                continue  # crashed where the new one returns (found by this test)
            assert _same(new, old), (name, new, old)
        new_h = cp.hinge_from_level(t, y, min_points=min_points)
        assert new_h == ref.hinge_from_level(t, y, min_points=min_points)


values = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=300, deadline=None)
@given(
    y=arrays(np.float64, st.integers(0, 40), elements=values),
    gaps=st.lists(st.floats(0.0, 100.0), min_size=40, max_size=40),
    min_points=st.integers(1, 6),
    sign=st.sampled_from([-1, 0, 1]),
)
def test_shared_sums_equal_the_previous_fits_on_arbitrary_values(
    y: np.ndarray, gaps: list[float], min_points: int, sign: int
) -> None:
    t = np.cumsum(np.asarray(gaps[: y.size], dtype=np.float64))  # sorted, repeats allowed
    _check(t, y, min_points=min_points, sign=sign)


def test_huge_values_do_not_crash_the_fits() -> None:
    """A series near 1e153 (its sum of squares overflows) gives a fit or None, no exception."""
    y = np.full(23, 1.2930131e153)
    with np.errstate(all="ignore"):
        for name in FITS:
            args = (y,) if name == "step_fit" else (np.arange(23.0), y)
            getattr(cp, name)(*args, min_points=1, sign=-1)


def test_shared_sums_equal_the_previous_fits_on_seeded_runs() -> None:
    """Series shaped like the detectors' input (noise, a step or a climb, logged every k
    steps), some with NaN and ±inf injected, up to the analysis resolution (2,000 points)."""
    rng = np.random.default_rng(20240611)
    for case in range(400):
        n = int(rng.integers(6, 2001))
        t = np.cumsum(rng.integers(1, 11, n)).astype(np.float64)
        onset = int(rng.integers(0, n))
        shape = case % 3
        jump = np.where(np.arange(n) >= onset, rng.normal(0, 3), 0.0) if shape != 1 else 0.0
        climb = rng.normal(0, 0.05) * np.maximum(t - t[onset], 0.0) if shape != 0 else 0.0
        y = rng.normal(0, rng.uniform(0.01, 1.0), n) + jump + climb
        if case % 4 == 3:
            hit = rng.random(n) < 0.05
            y[hit] = rng.choice([np.nan, np.inf, -np.inf], int(hit.sum()))
        _check(t, y, min_points=max(3, n // 100), sign=int(rng.choice([-1, 1])))
