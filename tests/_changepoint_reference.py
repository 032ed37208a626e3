"""The change-point fits as they were before their sums were shared (the oracle).

Verbatim copy of ``proxydiag/diagnose/_changepoint.py`` before the refactor (docstrings
dropped): each fit computes its own prefix and suffix sums. The oracle tests in
``test_diagnose_changepoint.py`` require the shared-sum fits to give bit-identical results.
"""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose._changepoint import ChangeFit, Kind, _better


def step_fit(y: np.ndarray, *, min_points: int = 3, sign: int = 1) -> ChangeFit | None:
    n = y.size
    if n < 2 * min_points:
        return None
    k = np.arange(min_points, n - min_points + 1)
    c1 = np.concatenate([[0.0], np.cumsum(y)])
    total, total2 = c1[-1], float(np.dot(y, y))
    s1, s2 = c1[k], total - c1[k]
    n1, n2 = k.astype(np.float64), (n - k).astype(np.float64)
    sse = total2 - s1**2 / n1 - s2**2 / n2
    shift = s2 / n2 - s1 / n1
    if sign:
        sse = np.where(np.sign(shift) == sign, sse, np.inf)
    best = int(np.argmin(sse))
    if not np.isfinite(sse[best]):
        return None
    sse_null = total2 - total**2 / n
    return ChangeFit(
        "step", int(k[best]), float(shift[best]), float(max(sse[best], 0.0)), float(sse_null)
    )


def ramp_fit(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    n = y.size
    if n < 2 * min_points:
        return None
    scale = max(float(t[-1] - t[0]), 1.0)
    tt = (t - t[0]) / scale
    k = np.arange(min_points - 1, n - min_points)

    # suffix sums from each candidate hinge (inclusive)
    def suffix(a: np.ndarray) -> np.ndarray:
        return np.cumsum(a[::-1])[::-1]

    st, st2, sy, sty = suffix(tt), suffix(tt * tt), suffix(y), suffix(tt * y)
    tk, cnt = tt[k], (n - k).astype(np.float64)
    su = st[k] - tk * cnt
    su2 = st2[k] - 2 * tk * st[k] + tk * tk * cnt
    suy = sty[k] - tk * sy[k]
    total, total2 = float(sy[0]), float(np.dot(y, y))
    det = n * su2 - su * su
    ok = det > 1e-18
    b = np.where(ok, (n * suy - su * total) / np.where(ok, det, 1.0), 0.0)
    a = (total - b * su) / n
    sse = total2 - a * total - b * suy
    shift = b * (tt[-1] - tk)
    valid = ok & ((np.sign(shift) == sign) if sign else True)
    sse = np.where(valid, sse, np.inf)
    best = int(np.argmin(sse))
    if not np.isfinite(sse[best]):
        return None
    sse_null = total2 - total**2 / n
    return ChangeFit(
        "ramp",
        int(k[best]),
        float(shift[best]),
        float(max(sse[best], 0.0)),
        float(sse_null),
        "hinge",
    )


def hinge_from_level(t: np.ndarray, z: np.ndarray, *, min_points: int = 3) -> int | None:
    n = z.size
    if n < 2 * min_points:
        return None
    tt = (t - t[0]) / max(float(t[-1] - t[0]), 1.0)
    k = np.arange(min_points - 1, n - min_points)

    def suffix(a: np.ndarray) -> np.ndarray:
        return np.cumsum(a[::-1])[::-1]

    st, st2, sz, stz = suffix(tt), suffix(tt * tt), suffix(z), suffix(tt * z)
    tk, cnt = tt[k], (n - k).astype(np.float64)
    su2 = st2[k] - 2 * tk * st[k] + tk * tk * cnt
    suz = stz[k] - tk * sz[k]
    gain = np.where((su2 > 1e-18) & (suz > 0), suz * suz / np.where(su2 > 1e-18, su2, 1.0), -np.inf)
    best = int(np.argmax(gain))
    return int(k[best]) if np.isfinite(gain[best]) else None


def jump_ramp_fit(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    n = y.size
    if n < 2 * min_points:
        return None
    scale = max(float(t[-1] - t[0]), 1.0)
    tt = (t - t[0]) / scale
    k = np.arange(min_points, n - min_points + 1)
    c1, c2 = np.concatenate([[0.0], np.cumsum(y)]), np.concatenate([[0.0], np.cumsum(y * y)])

    def suffix(a: np.ndarray) -> np.ndarray:
        return np.concatenate([np.cumsum(a[::-1])[::-1], [0.0]])

    st, st2, sy, sty, sy2 = suffix(tt), suffix(tt * tt), suffix(y), suffix(tt * y), suffix(y * y)
    n1, m = k.astype(np.float64), (n - k).astype(np.float64)
    sse1 = c2[k] - c1[k] ** 2 / n1
    sxx = st2[k] - st[k] ** 2 / m
    sxy = sty[k] - st[k] * sy[k] / m
    syy = sy2[k] - sy[k] ** 2 / m
    ok = sxx > 1e-18
    b = np.where(ok, sxy / np.where(ok, sxx, 1.0), 0.0)
    sse = sse1 + syy - b * sxy
    a1 = c1[k] / n1
    start = sy[k] / m - b * (st[k] / m - tt[k])  # the line's value at t_k
    shift = start + b * (tt[-1] - tt[k]) - a1
    valid = ok & ((np.sign(shift) == sign) if sign else True)
    if sign:
        valid &= np.sign(start - a1) != -sign  # the new regime starts on the side it ends
    sse = np.where(valid, sse, np.inf)
    best = int(np.argmin(sse))
    if not np.isfinite(sse[best]):
        return None
    jump = float(start[best] - a1[best])
    kind: Kind = "step" if abs(jump) >= 0.5 * abs(float(shift[best])) else "ramp"
    sse_null = float(c2[-1] - c1[-1] ** 2 / n)
    return ChangeFit(
        kind, int(k[best]), float(shift[best]), float(max(sse[best], 0.0)), sse_null, "jump_ramp"
    )


def best_change(
    t: np.ndarray, y: np.ndarray, *, min_points: int = 3, sign: int = 1
) -> ChangeFit | None:
    step = step_fit(y, min_points=min_points, sign=sign)
    ramp = ramp_fit(t, y, min_points=min_points, sign=sign)
    if step is None or ramp is None:
        best = step or ramp
    else:
        best = ramp if ramp.sse < 0.9 * step.sse else step
    both = jump_ramp_fit(t, y, min_points=min_points, sign=sign)
    if best is None or (both is not None and _better(both.sse, best.sse, n=y.size)):
        return both
    return best
