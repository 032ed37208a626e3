"""What a framework would have logged: a simulated run seen through a naming and a log interval.

A run logged every ``k`` steps has rows only at multiples of ``k``. Gauges (grad norm,
reward, ...) are the value at that step; counters (``skipped``, ``nonfinite``) count the
steps of the interval. Under fp16 the grad norm of an overflowed step is inf or absent, as
the naming says. The output is a raw frame (``step, key, value, wall_time``), the shape a
reader produces, so writers only serialise it.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from proxydiag.frame import raw
from proxydiag.synth.naming import NAMINGS
from proxydiag.synth.scenario import RESUME_VARIANTS
from proxydiag.synth.sim import SynthRun

#: a run that resumes from a checkpoint logged this many log intervals past it (at least
#: RESUME_MIN_STEPS steps) before it crashed: those steps are logged twice
RESUME_INTERVALS = 3
RESUME_MIN_STEPS = 20

COUNTERS = frozenset({"skipped", "nonfinite"})


def logged_steps(n_steps: int, *, log_interval: int) -> np.ndarray:
    """Steps at which a run of ``n_steps`` logged every ``log_interval`` steps has rows.

    >>> logged_steps(25, log_interval=10).tolist()
    [10, 20]
    """
    return np.arange(log_interval, n_steps + 1, log_interval, dtype=np.int64)


def interval_sum(values: np.ndarray, *, log_interval: int) -> np.ndarray:
    """Per logged step, the sum of ``values`` over its interval.

    >>> interval_sum(np.array([1.0, 0, 1, 1, 1]), log_interval=2).tolist()
    [1.0, 2.0]
    """
    n = len(values) // log_interval * log_interval
    return np.asarray(values[:n].reshape(-1, log_interval).sum(axis=1), dtype=np.float64)


def logged_values(
    sr: SynthRun, *, naming: str, fmt: str, log_interval: int
) -> dict[str, np.ndarray]:
    """canonical -> values at the logged steps (NaN marks an absent value: see `logged_rows`)."""
    spec = NAMINGS[naming]
    keys = spec.key_map(precision=sr.scenario.precision, fmt=fmt, routing=sr.scenario.routing)
    idx = logged_steps(sr.n_steps, log_interval=log_interval) - 1
    out: dict[str, np.ndarray] = {}
    for metric in keys:
        if metric in COUNTERS:
            out[metric] = interval_sum(sr.values[metric], log_interval=log_interval)
        elif metric == "skipped_total":
            out[metric] = np.cumsum(sr.values["skipped"])[idx]
        elif metric == "loss_scale" and sr.scenario.precision != "fp16":
            out[metric] = np.full(len(idx), spec.bf16_loss_scale or 1.0)
        else:
            out[metric] = sr.values[metric][idx]
    return out


def logged_rows(sr: SynthRun, *, naming: str, fmt: str, log_interval: int) -> pl.DataFrame:
    """The raw frame a ``naming`` run written as ``fmt`` every ``log_interval`` steps holds."""
    spec = NAMINGS[naming]
    keys = spec.key_map(precision=sr.scenario.precision, fmt=fmt, routing=sr.scenario.routing)
    steps = logged_steps(sr.n_steps, log_interval=log_interval)
    values = logged_values(sr, naming=naming, fmt=fmt, log_interval=log_interval)
    wall = sr.wall_time[steps - 1]
    overflow = _overflowed(sr)[steps - 1]
    cols_s, cols_k, cols_v, cols_w = [], [], [], []
    for metric, key in keys.items():
        present = np.ones(len(steps), dtype=bool)
        if metric == "grad_norm" and spec.grad_on_overflow == "absent":
            present = ~overflow
        cols_s.append(steps[present])
        cols_k.append(np.full(int(present.sum()), key, dtype=object))
        cols_v.append(values[metric][present])
        cols_w.append(wall[present])
    frame = raw(
        np.concatenate(cols_s),
        np.concatenate(cols_k),
        np.concatenate(cols_v),
        np.concatenate(cols_w),
    )
    return frame.sort("step", maintain_order=True)


def _overflowed(sr: SynthRun) -> np.ndarray:
    """Steps skipped by the fp16 scaler (not by non-finite bf16 gradients)."""
    return np.asarray((sr.values["skipped"] > 0) & (sr.values["nonfinite"] == 0))


def superseded_rows(
    sr: SynthRun, rows: pl.DataFrame, *, naming: str, fmt: str, log_interval: int
) -> pl.DataFrame | None:
    """The rows a run that resumed from a checkpoint logged past it before it crashed (None
    for a run that did not): the logged steps from the checkpoint (the onset's step - 1) to
    :data:`RESUME_INTERVALS` log intervals past it, with the run's values except its mismatch
    quantities, which keep the level from before the resume (the stretch before the
    checkpoint, moved on): what broke came with the resume, not before it. ``rows``: the
    run's :func:`logged_rows`."""
    fault = sr.scenario.fault
    if fault is None or fault.variant not in RESUME_VARIANTS:
        return None
    back = log_interval * max(RESUME_INTERVALS, -(-RESUME_MIN_STEPS // log_interval))
    start = fault.onset_step - 1
    sc = sr.scenario
    keys = NAMINGS[naming].key_map(precision=sc.precision, fmt=fmt, routing=sc.routing)
    mismatch = [k for m, k in keys.items() if m.startswith("mismatch")]
    step = pl.col("step")
    later = rows.filter((step > start) & (step <= start + back) & ~pl.col("key").is_in(mismatch))
    before = rows.filter(
        (step > start - back) & (step <= start) & pl.col("key").is_in(mismatch)
    ).with_columns(step + back)
    return pl.concat([later, before.select(later.columns)]).sort("step", maintain_order=True)
