"""The sentences every output format shares (plain text; each renderer escapes them).

>>> from proxydiag.diagnose.result import Diagnosis, RootCause
>>> d = Diagnosis("s", "run-a", "loss_divergence", 420, 0.91,
...               RootCause("divergence", "grad_norm", 420), first_step=0, last_step=1000)
>>> label_sentence(d, name="run-a")
'run-a: loss_divergence from step 420 (root cause: divergence in grad_norm; confidence 0.91).'
"""

from __future__ import annotations

import math

from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity.result import Comparison

LABEL_TITLES = {
    "healthy": "healthy",
    "gradient_overflow": "gradient overflow",
    "loss_divergence": "loss divergence",
    "precision_fault": "precision fault",
}


def num(x: float | None, *, digits: int = 3) -> str:
    """A number for people: ``—`` for missing, ``NaN``/``+inf``/``-inf`` spelled out.

    >>> num(0.123456), num(None), num(float("inf")), num(12345678.0)
    ('0.123', '—', '+inf', '1.23e+07')
    """
    if x is None:
        return "—"
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}" if abs(x) >= 1 else f"{x:.{digits}f}"


def step_text(step: int | None) -> str:
    """A step as an integer, ``—`` when unknown.

    >>> step_text(123456), step_text(None)
    ('123456', '—')
    """
    return "—" if step is None else str(int(step))


def ci_text(ci: tuple[float, float] | None) -> str:
    """``[lo, hi]`` or ``—``.

    >>> ci_text((0.912, 0.98))
    '[0.912, 0.980]'
    """
    if ci is None:
        return "—"
    return f"[{num(ci[0])}, {num(ci[1])}]"


def label_sentence(d: Diagnosis, *, name: str | None = None) -> str:
    """One sentence: the run's label, onset, root cause and confidence."""
    who = name or d.run
    if d.label == "healthy":
        span = ""
        if d.first_step is not None and d.last_step is not None:
            span = f" over steps {d.first_step}–{d.last_step}"
        return f"{who}: healthy — no failure found{span} (confidence {d.confidence:.2f})."
    cause = ""
    if d.root_cause is not None:
        where = f" in {d.root_cause.metric}" if d.root_cause.metric else ""
        cause = f"root cause: {d.root_cause.kind}{where}; "
    onset = f" from step {d.onset_step}" if d.onset_step is not None else ""
    return f"{who}: {d.label}{onset} ({cause}confidence {d.confidence:.2f})."


def verdict_sentence(c: Comparison, *, proxy: str | None = None, full: str | None = None) -> str:
    """One sentence: the proxy's verdict, its fidelity, and the main reason."""
    who = proxy or c.proxy_run or "proxy"
    fulls = full or ", ".join(c.full_runs) or "the full run"
    reason = c.reasons[0] if c.reasons else c.faults.explanation
    tail = f": {reason.rstrip('.')}" if reason else ""
    return f"{who} is {c.verdict} to {fulls} (fidelity {c.fidelity:.2f}){tail}."


def fault_sentence(c: Comparison) -> str:
    """The fault reproduction in words.

    Uses the comparison's own explanation when it has one.
    """
    f = c.faults
    if f.explanation:
        return f.explanation
    full, proxy = f.full.get("label"), f.proxy.get("label")
    lag = f" (onset lag {f.onset_lag_steps} steps)" if f.onset_lag_steps is not None else ""
    word = "reproduced" if f.reproduced else "not reproduced"
    return f"full run: {full}; proxy: {proxy} — fault {word}{lag}."
