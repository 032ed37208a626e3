"""The x axis a report draws on: optimizer step, consumed tokens/samples, or relative progress.

Display only: the fidelity analysis aligns runs itself (:mod:`proxydiag.align`); a report draws
each run on the same axis it was compared on.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from proxydiag.errors import AnalysisError
from proxydiag.run import Run

ALIGNS = ("step", "tokens", "samples", "progress")

AXIS_TITLES = {
    "step": "step",
    "tokens": "consumed tokens",
    "samples": "consumed samples",
    "progress": "progress (fraction of run)",
}


def check_align(align: str) -> str:
    """Validate an alignment name.

    >>> check_align("progress")
    'progress'
    """
    if align not in ALIGNS:
        raise AnalysisError(f"align={align!r} is not one of {', '.join(ALIGNS)}")
    return align


def to_axis(run: Run, steps: npt.ArrayLike, *, align: str) -> npt.NDArray[np.float64]:
    """Positions of ``steps`` of ``run`` on the ``align`` axis.

    ``tokens``/``samples`` interpolate the run's cumulative counter at each step (the counter
    must be logged: otherwise the message says to align by step or progress).
    """
    s = np.asarray(steps, dtype=np.float64)
    check_align(align)
    if align == "step":
        return s
    if align == "progress":
        first, last = float(run.first_step), float(run.last_step)
        return (s - first) / max(last - first, 1.0)
    cs, cv = run.series(align)
    ok = np.isfinite(cv)
    if not ok.any():
        raise AnalysisError(
            f"run {run.name}: no finite '{align}' counter to align by; use --align step or progress"
        )
    return np.asarray(np.interp(s, cs[ok].astype(np.float64), cv[ok]), dtype=np.float64)


def step_to_axis(run: Run, step: int | None, *, align: str) -> float | None:
    """One step (an onset) on the ``align`` axis; None stays None."""
    if step is None:
        return None
    return float(to_axis(run, [step], align=align)[0])
