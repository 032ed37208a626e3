"""Events: do the full run's symptoms co-occur in the proxy, and in the same order?

Events come from full data, never from the resampled curves: non-finite points of every metric
(each burst is one event), steps where the optimizer skipped (``skipped`` > 0, i.e. overflows,
taken from the bucket maxima, which keep every non-zero count; a non-finite count is one too),
and the warning/critical events of the runs' diagnoses (spikes, scaler collapse, mismatch jumps and
climbs, divergence). Positions are in relative progress
(:meth:`proxydiag.align.grid.Grid.progress`); events of one kind closer than the tolerance window
are one event.

* **co-occurrence**: F1 of events matched one-to-one within ``event_window_progress``, kind by
  kind; judged against the F1 between full seeds (with one seed, against the floor).
* **order**: the first onset of each symptom present in both runs; Kendall's tau of the two
  orders (1 = the same order), over the pairs of symptoms more than the tolerance window apart
  in both runs (closer ones are simultaneous: no order). The order *differs* when at least
  ``order_min_symptoms`` (3) symptoms are shared, the seeds agree on their order (median tau
  ≥ 0.5) and the proxy's tau is ≤ 0; a reproduced fault with its symptoms in another order
  makes the proxy partial.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from proxydiag.align.grid import Floats, Grid, MetricGrid
from proxydiag.diagnose.result import Diagnosis
from proxydiag.fidelity._scoring import fmt, reference, relative
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.result import TestResult

NAME = "events"
Events = dict[str, list[float]]  # kind:metric -> onsets in progress


def run_events(grid: Grid, row: int, diagnosis: Diagnosis | None, *, window: float) -> Events:
    """Onsets of every symptom in run ``row`` (progress units), bursts merged."""
    found: dict[str, list[float]] = {}
    first, last = grid.reference_span
    span = max(last - first, 1e-12)
    for name, mg in grid.metrics.items():
        r = mg.row_of(row)
        if r is None:
            continue
        if mg.nonfinite_x[r].size:
            found[f"nonfinite:{name}"] = list((mg.nonfinite_x[r] - first) / span)
        if name == "skipped":
            found["overflow:skipped"] = list((_overflows(mg, r) - first) / span)
    if diagnosis is not None:
        for ev in diagnosis.events:
            if ev.severity != "info" and ev.onset_step is not None:
                key = f"{ev.kind}:{ev.metric or 'run'}"
                found.setdefault(key, []).append(grid.progress(row, ev.onset_step))
    return {k: merge(sorted(v), window=window) for k, v in found.items() if v}


def _overflows(mg: MetricGrid, r: int) -> Floats:
    """Axis positions of the skipped steps of row ``r``: buckets whose largest count is > 0, and
    every non-finite count (a NaN/inf counter is a signal, never "no overflow"; buckets without a
    finite count are NaN in the envelope, so they come from ``nonfinite_x``)."""
    hi = mg.envelope[r].reshape(-1, 2).max(axis=1)
    counted = mg.centres[np.isfinite(hi) & (hi > 0)]
    return np.sort(np.r_[counted, mg.nonfinite_x[r]])


def merge(onsets: Sequence[float], *, window: float) -> list[float]:
    """Onsets with bursts merged: an onset within ``window`` of the previous one is dropped.

    >>> merge([0.1, 0.105, 0.5], window=0.02)
    [0.1, 0.5]
    """
    x = np.asarray(onsets, dtype=np.float64)
    if x.size == 0:
        return []
    keep = np.r_[True, np.diff(x) > window]
    return [float(v) for v in x[keep]]


def f1(a: Events, b: Events, *, window: float) -> float:
    """F1 of events matched one-to-one within ``window`` (1 when neither run has events).

    >>> f1({"spike:loss": [0.1, 0.5]}, {"spike:loss": [0.11]}, window=0.02)
    0.6666666666666666
    """
    n_a, n_b = sum(len(v) for v in a.values()), sum(len(v) for v in b.values())
    if n_a + n_b == 0:
        return 1.0
    matched = sum(_matches(a.get(k, []), b.get(k, []), window=window) for k in set(a) | set(b))
    return 2 * matched / (n_a + n_b)


def _matches(x: list[float], y: list[float], *, window: float) -> int:
    i = j = n = 0
    while i < len(x) and j < len(y):  # both sorted: a greedy sweep is an optimal matching
        if abs(x[i] - y[j]) <= window:
            n, i, j = n + 1, i + 1, j + 1
        elif x[i] < y[j]:
            i += 1
        else:
            j += 1
    return n


def order(
    a: Events, b: Events, *, window: float = 0.0
) -> tuple[list[str], list[str], float | None]:
    """Symptoms present in both runs by first onset, and Kendall's tau of the two orders.

    Two symptoms whose first onsets lie within ``window`` of each other in either run have no
    order there (a tie): only pairs ordered in both runs count, and with none the order is
    unknown (None). Three symptoms of one climb, all within 1% of progress, ordered by their
    noise, read as a reversed order in 6 of 10 draws of a faithful proxy.

    >>> order({"a": [0.1], "b": [0.3]}, {"a": [0.31], "b": [0.3]}, window=0.02)[2] is None
    True
    >>> order({"a": [0.1], "b": [0.3], "c": [0.5]}, {"a": [0.5], "b": [0.3], "c": [0.1]})[2]
    -1.0
    """
    shared = sorted(set(a) & set(b))
    ka = sorted(shared, key=lambda k: a[k][0])
    kb = sorted(shared, key=lambda k: b[k][0])
    x = np.array([a[k][0] for k in shared])
    y = np.array([b[k][0] for k in shared])
    i, j = np.triu_indices(len(shared), k=1)  # every pair once
    dx, dy = x[i] - x[j], y[i] - y[j]
    ordered = (np.abs(dx) > window) & (np.abs(dy) > window)
    if not ordered.any():
        return ka, kb, None
    return ka, kb, float(np.mean(np.sign(dx[ordered]) * np.sign(dy[ordered])))


def score(
    grid: Grid, diagnoses: Sequence[Diagnosis | None], *, config: FidelityConfig
) -> TestResult:
    """Co-occurrence and order of symptoms; ``diagnoses`` are the runs' (full..., proxy)."""
    window = config.event_window_progress
    per_run = [
        run_events(grid, row, diagnoses[row] if row < len(diagnoses) else None, window=window)
        for row in range(grid.n_full + 1)
    ]
    full, proxy = per_run[0], per_run[-1]
    value = f1(full, proxy, window=window)
    base = [
        f1(per_run[i], per_run[j], window=window)
        for i in range(grid.n_full)
        for j in range(i + 1, grid.n_full)
    ]
    ref = reference([1 - b for b in base], floor=config.floor_events)
    ka, kb, tau = order(full, proxy, window=window)
    seed_taus = [
        t
        for i in range(grid.n_full)
        for j in range(i + 1, grid.n_full)
        if (t := order(per_run[i], per_run[j], window=window)[2]) is not None
    ]
    seed_tau = float(np.median(seed_taus)) if seed_taus else None
    # the order differs when the seeds agree on it (tau >= 0.5) and the proxy reverses it
    differs = (
        tau is not None
        and tau <= 0
        and len(ka) >= config.order_min_symptoms
        and seed_tau is not None
        and seed_tau >= 0.5
    )
    seed_f1 = float(np.median(base)) if base else None
    words = (
        f"events: F1 {fmt(value)} of symptoms co-occurring within {window:.0%} of progress, "
        f"seed-to-seed {fmt(seed_f1)}; order of {len(ka)} shared symptoms: Kendall tau "
        f"{fmt(tau)}, seed-to-seed {fmt(seed_tau)}"
    )
    details: dict[str, Any] = {
        "full": {k: [round(x, 4) for x in v] for k, v in full.items()},
        "proxy": {k: [round(x, 4) for x in v] for k, v in proxy.items()},
        "order_full": ka,
        "order_proxy": kb,
        "kendall_tau": tau,
        "window_progress": window,
        "seed_f1": [round(b, 4) for b in base],
        "seed_kendall_tau": seed_tau,
        "order_differs": bool(differs),
    }
    return TestResult(NAME, value, float(relative(1 - value, ref)), None, seed_f1, words, details)
