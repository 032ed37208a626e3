"""`compare(full, proxy)`: how faithfully a proxy run reproduced the full run(s).

Pipeline: align (:mod:`proxydiag.align`) → per metric, the seed baseline and shared bootstrap
resamples (:mod:`proxydiag.fidelity.context`) → one test per module (trend, shape, volatility,
increments, level) → metric score and verdict → events and fault reproduction on full data →
overall fidelity and verdict (:mod:`proxydiag.fidelity.aggregate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from proxydiag.align import tokens
from proxydiag.align.axis import Axis
from proxydiag.align.grid import Grid, build_grid
from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import AnalysisError
from proxydiag.fidelity import (
    aggregate,
    events,
    faults,
    increments,
    level,
    shape,
    trend,
    volatility,
)
from proxydiag.fidelity.config import FidelityConfig, load_config
from proxydiag.fidelity.context import metric_context
from proxydiag.fidelity.contract import FidelityTest
from proxydiag.fidelity.result import Comparison, MetricFidelity
from proxydiag.registry import Registry
from proxydiag.run import Run

#: the per-metric tests, in the order they are reported (one module each)
TESTS: Registry[FidelityTest] = Registry(
    "fidelity test", {t.NAME: t for t in (trend, shape, volatility, increments, level)}
)


def compare(full: Run | Sequence[Run], proxy: Run, *, align: str = "step",
            config: FidelityConfig | str | Path | None = None,
            full_diagnoses: Sequence[Diagnosis | None] | None = None,
            proxy_diagnosis: Diagnosis | None = None, seed: int = 0) -> Comparison:
    """Score how faithfully ``proxy`` reproduced the dynamics and fault of ``full``.

    Parameters
    ----------
    full
        The full run, or several seeds of it (the first is the reference; the others define
        seed-to-seed noise; with one, pseudo-seeds by block bootstrap do).
    proxy
        The proxy run.
    align
        ``step`` (default), ``tokens`` (consumed tokens, else samples) or ``progress``.
    config
        A :class:`FidelityConfig`, or a TOML file with a ``[compare]`` table.
    full_diagnoses, proxy_diagnosis
        Diagnoses already made (else the runs are diagnosed here).
    seed
        Seed of the bootstrap (results are deterministic for a seed).
    """
    fulls = [full] if isinstance(full, Run) else list(full)
    cfg = config if isinstance(config, FidelityConfig) else (
        load_config(config) if config is not None else FidelityConfig())
    grid = build_grid(fulls, proxy, align=align, config=cfg)
    diagnoses = _diagnoses(fulls, proxy, full_diagnoses, proxy_diagnosis)
    fault = faults.score(fulls, proxy, grid, full=diagnoses[:-1], proxy_diagnosis=diagnoses[-1],
                         config=cfg)
    ev = events.score(grid, diagnoses, config=cfg)
    curves = grid
    if fault.reproduced and fault.onset_lag_steps and fault.full.get("onset_progress") is not None:
        curves = build_grid(fulls, proxy, align=align, config=cfg, like=grid, register_onsets=(
            float(fault.proxy["onset_step"]), float(fault.full["onset_progress"])))
    per_metric = _score_metrics(curves, fulls, proxy, config=cfg, seed=seed)
    fidelity, verdict, reasons = aggregate.overall(per_metric, fault, cfg, ev)
    undecidable = curves.undecidable
    if undecidable:
        reasons = (*reasons, f"undecidable, left out: {', '.join(undecidable)} (no finite point in "
                             "any run)")
    hint = _consumption_hint(fulls, proxy) if align == "step" else None
    if hint:
        reasons = (*reasons, hint)
    other = {m: why for m, why in curves.skipped.items() if m not in undecidable}
    if not per_metric and (other or not undecidable):
        reasons = (*reasons, f"no curve could be compared ({_skips(other)})")
    return Comparison(
        fidelity=float(np.clip(fidelity, 0.0, 1.0)), verdict=verdict, align=align,
        metrics=per_metric, faults=fault, full_runs=tuple(r.id for r in fulls), proxy_run=proxy.id,
        overlap=curves.overlap, reasons=reasons,
        events={**ev.to_dict(), "skipped_metrics": dict(curves.skipped),
                "baseline": _baseline_words(len(fulls), cfg)},
    )


def _diagnoses(fulls: list[Run], proxy: Run, full_diagnoses: Sequence[Diagnosis | None] | None,
               proxy_diagnosis: Diagnosis | None) -> list[Diagnosis | None]:
    """Every run's diagnosis (full runs..., proxy), diagnosing those not given."""
    given: list[Diagnosis | None] = list(full_diagnoses or [])[: len(fulls)]
    given += [None] * (len(fulls) - len(given)) + [proxy_diagnosis]
    return faults.diagnose_runs([*fulls, proxy], given)


def _score_metrics(grid: Grid, fulls: list[Run], proxy: Run, *, config: FidelityConfig,
                   seed: int) -> dict[str, MetricFidelity]:
    """Every test on every aligned metric (one bootstrap stream, metrics in sorted order)."""
    rng = np.random.default_rng(seed)
    out: dict[str, MetricFidelity] = {}
    for name, mg in grid.metrics.items():
        ctx = metric_context(mg, config=config, rng=rng)
        tests = {t.NAME: t.score(fulls, proxy, mg, ctx=ctx) for t in TESTS}
        out[name] = aggregate.metric_fidelity(name, tests, config)
    return out


#: a proxy consuming this many times more (or less) data per step than the full run is
#: better compared at equal data consumed
CONSUMPTION_RATIO = 1.5


def _consumption_hint(fulls: list[Run], proxy: Run) -> str | None:
    """A hint to align by data consumed when the runs' tokens (or samples) per step differ
    by :data:`CONSUMPTION_RATIO` or more (a proxy with half the batch takes twice the steps
    to the same data, and a fault at the same data looks late by steps)."""
    for counter in tokens.COUNTERS:
        if not all(run.has(counter) for run in [*fulls, proxy]):
            continue
        try:
            rates = [_per_step(tokens.axis(run, counter=counter)) for run in [*fulls, proxy]]
        except AnalysisError:
            continue
        full_rate = float(np.median(rates[:-1]))
        if not (full_rate > 0 and rates[-1] > 0):
            continue
        ratio = rates[-1] / full_rate
        if max(ratio, 1 / ratio) < CONSUMPTION_RATIO:
            return None
        return (f"the proxy consumes {ratio:.2g}x the full run's {counter} per step "
                f"({rates[-1]:.4g} vs {full_rate:.4g}): compared by step, the same data comes at "
                f"other steps; consider --align tokens (equal {counter} consumed)")
    return None


def _per_step(axis: Axis) -> float:
    """Data consumed per step over a run's logged counter."""
    span = float(axis.knots[-1] - axis.knots[0])
    return (axis.last - axis.first) / span if span > 0 else 0.0


def _skips(skipped: dict[str, str]) -> str:
    return "; ".join(f"{m}: {why}" for m, why in list(skipped.items())[:3]) or "no shared metric"


def _baseline_words(n_full: int, cfg: FidelityConfig) -> str:
    if n_full >= 2:
        return f"{n_full} full seeds: every seed pair is a baseline pair"
    return (f"1 full seed: {cfg.n_pseudo_seeds} pseudo-seeds (trend + circular block bootstrap of "
            "the residuals)")
