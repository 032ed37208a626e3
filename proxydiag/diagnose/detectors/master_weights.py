"""Lost fp32 master weights: the gradient norm falls onto the bf16 grid and stays there.

A mixed-precision learner keeps fp32 master weights (and fp32 main gradients): the global
gradient norm it logs is an fp32 (or fp64) number, and a logged fp32 value lies on the bf16 grid
(8 significant bits: the low 16 bits of its fp32 mantissa zero) once in 2¹⁶. When the master
weights are lost — a resume that restored only the bf16 weights, an optimizer wrapper that
dropped its fp32 copy, a config switch to pure bf16 parameters and gradients — the norm is
reduced in bf16 and every logged value sits on that grid; updates smaller than half a bf16 ulp
of a weight (2⁻⁹ relative) round away and vanish. The mismatch metrics may show nothing (the
sampler serves what the learner holds), which is why this reads the gradient norm itself.

The test is against the run's own earlier steps: a point counts as *on the grid* when its value
is a bf16 number that is not also a short decimal (at most :data:`SHORT_DIGITS` significant
digits: a console that prints ``0.75`` or ``12`` says nothing about the grid), *off* when it is
not a bf16 number; short decimals on the grid are left out. The event is a change from a stretch
of at least :data:`MIN_BEFORE` points at most :data:`OFF_SHARE` on the grid to a stretch to the
end of the run, of at least ``max(MIN_POINTS, MIN_SHARE of the points)``, at least
:data:`ON_SHARE` on it, holding :data:`MIN_DISTINCT` distinct values (a norm clipped to a
constant is no grid). A run on the grid from its first step (pure bf16 by design) has no
earlier steps to be measured against and raises nothing.
"""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event
from proxydiag.run import Run

#: the series read, in order (the first present with enough points)
METRICS = ("grad_norm",)
#: bits of a float64 mantissa below bf16's 7 explicit bits
_LOW_BITS = np.uint64((1 << 45) - 1)
SHORT_DIGITS = 4
MIN_POINTS = 10
#: points off the grid before the change (each is on it by chance once in 2^16)
MIN_BEFORE = 5
MIN_SHARE = 0.05
OFF_SHARE = 0.1
ON_SHARE = 0.9
MIN_DISTINCT = 5


def on_bf16_grid(x: np.ndarray) -> np.ndarray:
    """Whether each finite, non-zero value is exactly a bf16 number (8 significant bits).

    >>> on_bf16_grid(np.array([0.81640625, 0.8164, 1.0, np.nan, 3.0e-3])).tolist()
    [True, False, True, False, False]
    """
    x = np.ascontiguousarray(x, dtype=np.float64)
    ok = np.isfinite(x) & (x != 0.0)
    exact = (x.view(np.uint64) & _LOW_BITS) == 0
    # bf16 shares fp32's exponent range: smaller magnitudes are subnormal or zero there
    in_range = (np.abs(x) >= 2.0**-126) & (np.abs(x) < 2.0**128)
    out: np.ndarray = ok & exact & in_range
    return out


def short_decimal(x: np.ndarray, digits: int = SHORT_DIGITS) -> np.ndarray:
    """Whether each value is written exactly with at most ``digits`` significant digits.

    >>> short_decimal(np.array([0.75, 12.0, 0.81640625])).tolist()
    [True, True, False]
    """
    return np.array([float(f"{v:.{digits}g}") == v for v in np.asarray(x, dtype=np.float64)])


def grid_states(x: np.ndarray) -> np.ndarray:
    """Per value: 1 on the bf16 grid, 0 off it, -1 left out (non-finite, zero, a short decimal
    on the grid)."""
    x = np.asarray(x, dtype=np.float64)
    state = np.where(np.isfinite(x) & (x != 0.0), 0, -1)
    grid = on_bf16_grid(x)
    idx = np.flatnonzero(grid)
    if idx.size:
        state[idx] = np.where(short_decimal(x[idx]), -1, 1)
    return state.astype(np.int8)


NAME = "master_weights"
#: its events decide labels (precision_fault: lost master weights)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads."""
    return METRICS


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Event ``master_weights_lost`` (critical) on the first of :data:`METRICS` that moves onto
    the bf16 grid and stays there.

    >>> from proxydiag.diagnose.view import from_arrays
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(1, 301)
    >>> g = np.exp(rng.normal(0, 0.2, 300))
    >>> bf = (g.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    >>> g = np.where(t > 200, bf.astype(np.float64), g)
    >>> [(e.kind, e.onset_step) for e in detect(from_arrays({"grad_norm": (t, g)}),
    ...                                          DiagnoseConfig())]
    [('master_weights_lost', 201)]
    """
    rv = view(run)
    for metric in METRICS:
        s = rv.get(metric)
        if s is not None and len(s) >= MIN_BEFORE + MIN_POINTS:
            event = _check(s)
            if event is not None:
                return [event]
    return []


def _check(s: Series) -> Event | None:
    state = grid_states(s.values)
    keep = state >= 0
    where = np.flatnonzero(keep)
    z, x = state[keep].astype(np.float64), s.values[keep]
    n = z.size
    if n < MIN_BEFORE + MIN_POINTS or z.sum() < MIN_POINTS:
        return None
    least = max(MIN_POINTS, int(np.ceil(MIN_SHARE * n)))
    on_before = np.r_[0.0, np.cumsum(z)]  # on-grid points in z[:k]
    for k in np.flatnonzero((z == 1) & (np.r_[0.0, z[:-1]] == 0)):
        if k < MIN_BEFORE or n - k < least:
            continue
        before = on_before[k] / k
        after = (on_before[n] - on_before[k]) / (n - k)
        if before > OFF_SHARE or after < ON_SHARE:
            continue
        grid_values = x[k:][z[k:] == 1]
        distinct = np.unique(grid_values).size
        if distinct < MIN_DISTINCT:
            continue
        # the onset: right after the last point off the grid (a short decimal left out
        # between them is on the grid's side)
        onset = int(s.steps[where[k - 1] + 1])
        return Event(
            "master_weights_lost",
            s.name,
            onset,
            None,
            "critical",
            float(min(0.95, 0.6 + 0.35 * (after - before))),
            f"{s.name} is on the bf16 grid (8 significant bits) at {after:.0%} of its {n - k} "
            f"points from step {onset} ({distinct} distinct values), against {before:.0%} of "
            f"its {k} points before: the norm is reduced in bf16 from then on — fp32 master "
            "weights or main gradients lost, updates below half a bf16 ulp vanish",
        )
    return None


__all__ = ["detect", "grid_states", "on_bf16_grid", "short_decimal"]
