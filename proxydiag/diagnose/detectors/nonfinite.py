"""Non-finite values: NaN/±inf in gradient norms and losses, and NaN-iteration counters.

veRL logs a skipped step's ``actor/grad_norm`` as NaN/Inf; Megatron counts "nan iterations"
(and prints no loss when it is NaN); a NaN can occur while the counters stay 0
(Megatron-LLM#33), so values and counters are read independently.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from proxydiag.diagnose._stats import cluster_start, runs_of, window_sum
from proxydiag.diagnose.config import DiagnoseConfig, ScalerConfig
from proxydiag.diagnose.detectors.scaler import (
    burst_gap,
    calibration_end,
    floor_step,
    may_calibrate,
    skip_counts,
    skip_window,
)
from proxydiag.diagnose.view import RunView, Series, view
from proxydiag.events import Event, Severity
from proxydiag.run import Run

NAME = "nonfinite"
#: its events decide labels (gradient_overflow, precision_fault)
DECIDES = True


def reads(cfg: DiagnoseConfig) -> tuple[str, ...]:
    """The canonical metrics :func:`detect` reads (with the scaler's, whose rules it shares)."""
    from proxydiag.diagnose.detectors import scaler

    return (
        *cfg.nonfinite.metrics,
        "grad_norm",
        "loss",
        "loss_scale",
        "nonfinite",
        *scaler.reads(cfg),
    )


def detect(run: Run | RunView, cfg: DiagnoseConfig) -> list[Event]:
    """Events ``nonfinite`` (per metric) and ``nonfinite_counter``.

    Critical when non-finite values persist (more than ``scaler.max_skip_fraction`` of a
    window's logged points, ``scaler.unscaled_skip_fraction`` without a dynamic loss scaler;
    the leading calibration burst of a run that is, or may be, fp16 excluded, see
    :func:`proxydiag.diagnose.detectors.scaler.calibration_end`) or the run ends
    non-finite (its last ``min_count`` points; a grad norm of a run that is or may be fp16, more
    than ``scaler.benign_streak_points``: the scaler skips a few steps in a row after its
    calibration and learning goes on); isolated ones are a warning (a skipped step),
    a calibration burst is info.

    >>> from proxydiag.diagnose.view import from_arrays
    >>> v = from_arrays({"grad_norm": (range(62), [1.0] * 20 + [np.inf, np.inf, 1.0] * 14)})
    >>> [(e.kind, e.onset_step, e.severity) for e in detect(v, DiagnoseConfig())]
    [('nonfinite', 20, 'critical')]
    """
    rv = view(run)
    scaled = _dynamic_scaler(rv)
    scaler, calibration = scaler_rules(rv, cfg)
    open_end = may_calibrate(rv)
    events = [
        e
        for m in cfg.nonfinite.metrics
        if (s := rv.get(m)) is not None
        for e in _values(
            s,
            # under a loss scaler a short trailing overflow streak is the scaler at work
            min_count=max(cfg.nonfinite.min_count, cfg.scaler.benign_streak_points + 1)
            if calibration is not None and m == "grad_norm"
            else cfg.nonfinite.min_count,
            scaler=scaler,
            calibration=calibration,
            scaler_owned=scaled and m == "grad_norm" and not _stuck(rv, s, cfg.scaler),
            open_end=open_end,
            fp16_known=rv.has("loss_scale") or (rv.precision or "").startswith(FP16),
            floor=floor_step(rv, cfg.scaler),
        )
    ]
    counter = rv.get("nonfinite")
    if counter is not None:
        events.extend(_counter(counter))
    return events


def scaler_rules(rv: RunView, cfg: DiagnoseConfig) -> tuple[ScalerConfig, ScalerConfig | None]:
    """The skipping rules of ``rv`` and, when it is or may be fp16, the rules of its loss
    scaler's start-up calibration (None: a bf16/fp32 run calibrates nothing)."""
    scaled = _dynamic_scaler(rv)
    fp16 = rv.has("loss_scale") or (rv.precision or "").startswith(FP16)
    # a run without a scaler skips nothing by design: a lower skipped fraction persists.
    # HF's fp16 AMP logs neither its scale nor its precision: a run that may be fp16 has a
    # short start-up burst read as the scaler's calibration
    scaler = (
        cfg.scaler
        if fp16 or scaled
        else replace(
            cfg.scaler,
            max_skip_fraction=min(cfg.scaler.max_skip_fraction, cfg.scaler.unscaled_skip_fraction),
        )
    )
    calibration = scaler if fp16 else None
    if calibration is None and rv.precision is None and not _scaled_overflow(rv):
        calibration = replace(
            scaler,
            calibration_steps=min(scaler.calibration_steps, scaler.unknown_calibration_steps),
        )
    elif calibration is None and rv.precision is None:
        calibration = scaler
    return scaler, calibration


def _scaled_overflow(rv: RunView) -> bool:
    """True when the grad norm is non-finite at a step whose loss is finite: the backward pass
    overflowed and the forward did not, the mark of a loss scaler at work (fp16), whatever the
    run says of its precision (HF's fp16 AMP logs neither its precision nor its scale)."""
    grad, loss = rv.get("grad_norm"), rv.get("loss")
    if grad is None or loss is None or grad.finite.all():
        return False
    at = np.isin(loss.steps, grad.steps[~grad.finite])
    return bool(loss.finite[at].any())


def calibration_end_of(run: Run | RunView, cfg: DiagnoseConfig) -> int | None:
    """Last step of the loss scaler's start-up calibration, from its skip counter or scale
    halvings, or from the non-finite grad norms and losses of a run that is or may be fp16;
    None when the run shows none. Nothing measured inside it is a baseline: the scaled
    gradients of a step the scaler is still calibrating are not the run's level.

    >>> from proxydiag.diagnose.view import from_arrays
    >>> g = np.r_[[np.nan] * 5, 0.001, [np.nan] * 8, np.ones(40)]
    >>> calibration_end_of(from_arrays({"grad_norm": (range(1, 55), g)}), DiagnoseConfig())
    14
    """
    rv = view(run)
    counts = skip_counts(rv)
    open_end = may_calibrate(rv)
    floor = floor_step(rv, cfg.scaler)
    ends = (
        [calibration_end(counts, cfg.scaler, open_end=open_end, floor=floor)]
        if counts is not None
        else []
    )
    _, calibration = scaler_rules(rv, cfg)
    if calibration is not None:
        for m in cfg.nonfinite.metrics:
            s = rv.get(m)
            if s is not None and not s.finite.all():
                ends.append(
                    calibration_end(
                        _overflow_steps(s, ~s.finite), calibration, open_end=open_end, floor=floor
                    )
                )
    found = [e for e in ends if e is not None]
    return max(found) if found else None


#: ``precision`` attributes (prefixes) of runs whose loss scaler calibrates, i.e. overflows in
#: the first steps: ``fp16``, ``float16``, ``half``, Lightning's ``16-mixed``
FP16 = ("fp16", "float16", "half", "16")


def _dynamic_scaler(rv: RunView) -> bool:
    """True when the run logs a loss scale that changes (fp16 dynamic loss scaling)."""
    scale = rv.get("loss_scale")
    if scale is None:
        return False
    finite = scale.values[scale.finite]
    return finite.size >= 2 and float(finite.max()) > float(finite.min())


def _stuck(rv: RunView, grad: Series, c: ScalerConfig) -> bool:
    """True when more than ``benign_streak_points`` non-finite grad norms in a row came with a
    loss scale that did not fall: a dynamic scaler halves at every overflow, so these are not
    its business (a scale set static, or stuck, while every step overflows: a real TRL fp16
    run whose scale was pinned at 2^40 from step 30 read healthy)."""
    scale = rv.get("loss_scale")
    if scale is None:
        return False
    ok = scale.finite
    steps, values = scale.steps[ok], scale.values[ok]
    if steps.size < 2:
        return False
    # the scale logged at or before each grad-norm step, and at the grad norm's step before
    at = np.searchsorted(steps, grad.steps, side="right") - 1
    before = np.r_[-1, at[:-1]]
    now = np.where(at >= 0, values[np.clip(at, 0, None)], np.nan)
    then = np.where(before >= 0, values[np.clip(before, 0, None)], np.nan)
    held = ~grad.finite & ~(now < then)
    starts, ends = runs_of(held)
    return bool(starts.size) and int((ends - starts).max()) > c.benign_streak_points


def _values(
    s: Series,
    *,
    min_count: int,
    scaler: ScalerConfig,
    calibration: ScalerConfig | None = None,
    scaler_owned: bool = False,
    open_end: bool = False,
    fp16_known: bool = True,
    floor: int | None = None,
) -> list[Event]:
    """The event of one metric's non-finite values; ``calibration``: the rules of the loss
    scaler's start-up calibration when the run is, or may be, fp16 (``fp16_known``: it says
    so, or logs a loss scale; otherwise a burst read as calibration is still a finding, a
    warning, since nothing in the run confirms a scaler)."""
    bad = ~s.finite
    n_bad = int(bad.sum())
    if n_bad == 0:
        return []
    idx = np.flatnonzero(bad)
    first = int(idx[0])
    calib_end = (
        calibration_end(_overflow_steps(s, bad), calibration, open_end=open_end, floor=floor)
        if calibration is not None
        else None
    )
    # the run ends non-finite: its last min_count points (none of them the calibration's,
    # unless something says the overflows are no calibration: see may_calibrate)
    tail = bad[-min_count:]
    terminal = bool(
        tail.size >= min_count
        and tail.all()
        and (calib_end is None or not open_end or s.steps[-min_count] > calib_end)
    )
    burst = _burst(s, bad, scaler, calib_end=calib_end)
    critical = (burst is not None or terminal) and not scaler_owned
    onset = (
        burst
        if burst is not None
        else (int(s.steps[first]) if not terminal else int(s.steps[_trailing_start(bad)]))
    )
    nan = int(np.isnan(s.values).sum())
    pos = int(np.isposinf(s.values).sum())
    neg = int(np.isneginf(s.values).sum())
    evidence = (
        f"{s.name}: {n_bad} of {len(s)} points non-finite (nan={nan}, +inf={pos}, -inf={neg}); "
        f"first at step {int(s.steps[first])}"
        + (
            f"; persistent from step {burst} (more than {scaler.max_skip_fraction:.0%} of the "
            f"points of a {scaler.window_steps}-step window)"
            if burst is not None
            else ""
        )
        + ("; the run ends non-finite" if terminal else "")
        + (
            (
                f"; the burst up to step {calib_end} is the fp16 loss scaler's calibration"
                if fp16_known
                else f"; the burst up to step {calib_end} may be an fp16 loss scaler's "
                "calibration (the run logs neither its precision nor a loss scale: check "
                "that it is fp16 with dynamic loss scaling)"
            )
            if calib_end is not None
            else ""
        )
        + (
            "; under fp16 dynamic loss scaling these are overflow steps the scaler skipped "
            "(judged by the scaler events)"
            if scaler_owned
            else ""
        )
        + (
            "; perplexity is exp(loss): a non-finite perplexity is a non-finite loss"
            if s.name == "perplexity"
            else ""
        )
    )
    severity: Severity = (
        "critical"
        if critical
        else (
            "info"
            if scaler_owned
            or (
                fp16_known
                and calib_end is not None
                and idx[-1] <= np.searchsorted(s.steps, calib_end, side="right") - 1
            )
            else "warning"
        )
    )
    return [
        Event(
            "nonfinite",
            s.name,
            onset if critical else int(s.steps[first]),
            int(s.steps[idx[-1]]),
            severity,
            0.95 if critical else 0.5,
            evidence,
        )
    ]


def _overflow_steps(s: Series, bad: np.ndarray) -> Series:
    """Non-finite points as overflow steps per logged step: a non-finite point stands for the
    steps since the previous logged point (the first for one log interval)."""
    span = np.diff(s.steps, prepend=s.steps[0] - s.interval)
    return Series(s.name, s.steps, np.where(bad, span, 0.0).astype(np.float64))


def _burst(s: Series, bad: np.ndarray, c: ScalerConfig, *, calib_end: int | None) -> int | None:
    """First step of persistent non-finite values: more than ``max_skip_fraction`` of the
    logged points of a window (the calibration burst of an fp16 run excluded)."""
    hits = bad.astype(np.float64)
    if calib_end is not None:
        hits[s.steps <= calib_end] = 0.0
    window = skip_window(c, s.interval)
    num = window_sum(s.steps, hits, window_steps=window)
    den = window_sum(s.steps, np.ones_like(hits), window_steps=window)
    starts, ends = runs_of((num / den > c.max_skip_fraction) & (den >= 3))
    if starts.size == 0:
        return None
    # the burst's density: its points from the first window above the fraction to the end of
    # the stretch of such windows
    a, b = int(starts[0]), int(ends[0])
    inside = (s.steps > s.steps[a] - window) & (s.steps <= s.steps[b - 1])
    gap = burst_gap(
        c, s.interval, rate=float(hits[inside].mean()), hits=int(np.count_nonzero(hits[inside]))
    )
    start = cluster_start(s.steps[hits > 0], s.steps[a], gap_steps=gap)
    # logged every k steps, the burst began after the last logged point before it
    i = int(np.searchsorted(s.steps, start))
    return int(s.steps[i - 1]) + 1 if i > 0 else start


def _trailing_start(bad: np.ndarray) -> int:
    """Index where the run's final stretch of non-finite values begins."""
    good = np.flatnonzero(~bad)
    return int(good[-1]) + 1 if good.size else 0


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
