"""Non-finite values: NaN/±inf in gradient norms and losses, and NaN-iteration counters.

veRL logs a skipped step's ``actor/grad_norm`` as NaN/Inf; Megatron counts "nan iterations"
(and prints no loss when it is NaN); a NaN can occur while the counters stay 0
(Megatron-LLM#33), so values and counters are read independently.
"""

from __future__ import annotations

import numpy as np

from proxydiag.diagnose._view import RunView, Series, view
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.events import Event, Severity
from proxydiag.run import Run


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``nonfinite`` (per metric) and ``nonfinite_counter``.

    Critical when at least ``min_count`` points are non-finite or the run ends non-finite;
    a single isolated NaN is a warning.

    >>> from proxydiag.diagnose._view import from_arrays
    >>> v = from_arrays({"grad_norm": (range(6), [1, 1, np.inf, 1, np.nan, np.nan])})
    >>> [(e.kind, e.onset_step, e.severity) for e in detect(v, DiagnoseConfig())]
    [('nonfinite', 2, 'critical')]
    """
    rv = view(run)
    scaled = _dynamic_scaler(rv)
    events = [e for m in cfg.nonfinite.metrics if (s := rv.get(m)) is not None
              for e in _values(s, min_count=cfg.nonfinite.min_count,
                               scaler_owned=scaled and m == "grad_norm")]
    counter = rv.get("nonfinite")
    if counter is not None:
        events.extend(_counter(counter))
    return events


def _dynamic_scaler(rv: RunView) -> bool:
    """True when the run logs a loss scale that changes (fp16 dynamic loss scaling)."""
    scale = rv.get("loss_scale")
    if scale is None:
        return False
    finite = scale.values[scale.finite]
    return finite.size >= 2 and float(finite.max()) > float(finite.min())


def _values(s: Series, *, min_count: int, scaler_owned: bool = False) -> list[Event]:
    bad = ~s.finite
    n_bad = int(bad.sum())
    if n_bad == 0:
        return []
    idx = np.flatnonzero(bad)
    first = int(idx[0])
    terminal = bool(bad[-1])
    after = float(bad[first:].mean())
    nan = int(np.isnan(s.values).sum())
    pos = int(np.isposinf(s.values).sum())
    neg = int(np.isneginf(s.values).sum())
    before = s.values[:first][s.finite[:first]]
    prior = f"{before[-1]:.4g}" if before.size else "none"
    critical = (n_bad >= min_count or terminal) and not scaler_owned
    evidence = (
        f"{s.name}: {n_bad} of {len(s)} points non-finite (nan={nan}, +inf={pos}, -inf={neg}); "
        f"first at step {int(s.steps[first])} (last finite value before it {prior}); "
        f"{after:.0%} of the points from there on are non-finite"
        + ("; the run ends non-finite" if terminal else "")
        + ("; under fp16 dynamic loss scaling these are overflow steps the scaler skipped "
           "(judged by the scaler events)" if scaler_owned else "")
    )
    severity: Severity = "critical" if critical else ("info" if scaler_owned else "warning")
    return [
        Event(
            "nonfinite",
            s.name,
            int(s.steps[first]),
            int(s.steps[idx[-1]]),
            severity,
            0.95 if critical else 0.5,
            evidence,
        )
    ]


def _counter(s: Series) -> list[Event]:
    hit = (s.values > 0) | ~s.finite
    if not hit.any():
        return []
    idx = np.flatnonzero(hit)
    total = float(np.nansum(np.where(np.isfinite(s.values), s.values, 0.0)))
    first = int(idx[0])
    return [
        Event(
            "nonfinite_counter",
            s.name,
            int(s.steps[first]),
            int(s.steps[idx[-1]]),
            "critical" if idx.size >= 2 else "warning",
            0.9 if idx.size >= 2 else 0.5,
            f"{s.name}: NaN/Inf iterations counted at {idx.size} logged steps "
            f"({total:.0f} in total), first at step {int(s.steps[first])}",
        )
    ]
