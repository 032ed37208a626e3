"""Comparing read points exactly: ``(step, key, value)`` rows, NaN equal to NaN."""

from __future__ import annotations

import math

Point = tuple[int, str, float]


def same(a: list[Point], b: list[Point]) -> bool:
    """Equal, with NaN equal to NaN and the sign of zero kept (-0.0 is not 0.0).

    >>> nan = float("nan")
    >>> same([(1, "a", nan)], [(1, "a", nan)]), same([(1, "a", -0.0)], [(1, "a", 0.0)])
    (True, False)
    """
    return len(a) == len(b) and all(
        x[:2] == y[:2]
        and (
            (x[2] == y[2] and math.copysign(1, x[2]) == math.copysign(1, y[2]))
            or (math.isnan(x[2]) and math.isnan(y[2]))
        )
        for x, y in zip(a, b, strict=True)
    )
