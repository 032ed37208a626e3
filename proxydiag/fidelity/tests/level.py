"""Level and scale: where the proxy ends up relative to the full run. Reported, never scored.

A pruned proxy learning less (a lower reward ceiling, larger gradients) is expected, so the
level must not by itself make a proxy unfaithful: this test's weight in the metric score is 0.
The value is the ratio of the medians of the last quarter (for metrics positive throughout), else
the difference in units of the full run's interquartile range; the seed range is reported next to
it so a reviewer sees how unusual the level is.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import numpy.typing as npt

from proxydiag.align.grid import MetricGrid
from proxydiag.fidelity._scoring import fmt, reference, relative
from proxydiag.fidelity.context import MetricContext
from proxydiag.fidelity.result import TestResult
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
NAME = "level"


def level(x: Floats, y: Floats, *, ratio: bool) -> float:
    """Level of ``y`` relative to ``x`` over the last quarter.

    >>> level(np.array([1.0, 1, 2, 2]), np.array([1.0, 1, 3, 3]), ratio=True)
    1.5
    """
    return float(levels(x, y, ratio=ratio))


def levels(x: Floats, y: Floats, *, ratio: bool) -> Floats:
    """:func:`level` of each row of ``y`` relative to the same row of ``x``."""
    k = max(1, x.shape[-1] // 4)
    mx, my = np.median(x[..., -k:], axis=-1), np.median(y[..., -k:], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ratio:
            return np.asarray(np.where(mx != 0, my / mx, np.nan), dtype=np.float64)
        q1, q3 = np.percentile(x, [25, 75], axis=-1)
        return np.asarray(np.where(q3 > q1, (my - mx) / (q3 - q1), np.nan), dtype=np.float64)


def score(full_runs: list[Run], proxy: Run, grid: MetricGrid, *, ctx: MetricContext) -> TestResult:
    """The proxy's level against the full run's, beside the seed-to-seed levels."""
    ratio = grid.positive
    value = level(ctx.a, ctx.b, ratio=ratio)
    base = ctx.on_pairs(partial(levels, ratio=ratio))
    d = abs(np.log(value)) if ratio and value > 0 else abs(value)
    base_d = [abs(np.log(b)) if ratio and b > 0 else abs(b) for b in base]
    s = float(relative(d, reference(base_d, floor=0.05)))
    unit = "ratio of last-quarter medians" if ratio else "shift in IQR units"
    spread = f"{fmt(min(base))}–{fmt(max(base))}" if base else "n/a"
    words = (
        f"{grid.metric} level: proxy/full {unit} {fmt(value)}, seed-to-seed {spread} "
        "(reported, not scored: a pruned proxy may learn less)"
    )
    return TestResult(
        NAME,
        value,
        s,
        None,
        float(np.median(base)) if base else None,
        words,
        details={
            "kind": "ratio" if ratio else "shift_iqr",
            "seed_levels": [round(b, 4) for b in base],
        },
    )
