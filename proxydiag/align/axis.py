"""`Axis`: how one run's steps map onto the alignment axis (steps, tokens, samples, progress)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Axis:
    """A monotone map from a run's steps to the alignment axis.

    The map is piecewise linear through ``knots`` (steps) and ``values`` (axis positions);
    steps outside the knots extrapolate linearly for two knots and are clamped otherwise.
    Only the *axis* is interpolated, never a metric's values.

    >>> Axis("progress", np.array([0.0, 200.0]), np.array([0.0, 1.0]))(np.array([50, 200]))
    array([0.25, 1.  ])
    """

    unit: str
    knots: Floats
    values: Floats

    def __call__(self, steps: npt.ArrayLike) -> Floats:
        s = np.asarray(steps, dtype=np.float64)
        if self.knots.size == 2:
            (k0, k1), (v0, v1) = self.knots, self.values
            scale = (v1 - v0) / (k1 - k0) if k1 != k0 else 0.0
            return np.asarray(v0 + (s - k0) * scale, dtype=np.float64)
        return np.interp(s, self.knots, self.values)

    @property
    def first(self) -> float:
        return float(self.values[0])

    @property
    def last(self) -> float:
        return float(self.values[-1])


def linear(unit: str, *, first_step: float, last_step: float, first: float, last: float) -> Axis:
    """An axis that maps ``first_step..last_step`` linearly onto ``first..last``."""
    return Axis(
        unit,
        np.array([first_step, last_step], dtype=np.float64),
        np.array([first, last], dtype=np.float64),
    )
