"""`compare(full, proxy)`: how faithfully a proxy run reproduced the full run(s).

Pipeline, one way: diagnose every run → align (:mod:`proxydiag.align`) → fault reproduction
(:mod:`.fault_match`) → register the proxy's onset → resample every metric once → events on full
data → split into phases (:mod:`.phases`) → per phase and metric, the seed baseline and shared
bootstrap resamples (:mod:`.context`) → one test per module (trend, shape, volatility,
increments, level) → metric score and verdict → the phase's verdict (:mod:`.progress`,
:mod:`.verdicts`) → the whole-run table (the one phase of a healthy run, else assembled from
the phases: :mod:`.assemble`) → overall (:mod:`.aggregate`), capped by the phases.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from proxydiag.align import tokens
from proxydiag.align.alignment import Alignment, align_runs
from proxydiag.align.axis import Axis
from proxydiag.align.grid import Grid, MetricGrid, Series, resample_grid, shared_series
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import AnalysisError
from proxydiag.fidelity import (
    _aggregate,
    _assemble,
    _progress,
    _routing,
    _symptom_order,
    _verdicts,
    fault_match,
)
from proxydiag.fidelity.config import FidelityConfig, load_config
from proxydiag.fidelity.context import metric_context
from proxydiag.fidelity.contract import FidelityTest
from proxydiag.fidelity.phases import WHOLE, Phase
from proxydiag.fidelity.phases import split as phases_of
from proxydiag.fidelity.result import Comparison, MetricFidelity, PhaseFidelity, Verdict
from proxydiag.fidelity.tests import increments, level, shape, trend, volatility
from proxydiag.metrics import layer_families
from proxydiag.registry import Registry
from proxydiag.run import Run

_RANK = {"faithful": 0, "undecidable": 0, "partial": 1, "unfaithful": 2}
#: the per-metric tests, in the order they are reported (one module each)
TESTS: Registry[FidelityTest] = Registry(
    "fidelity test", {t.NAME: t for t in (trend, shape, volatility, increments, level)}
)


def compare(
    full: Run | Sequence[Run],
    proxy: Run,
    *,
    align: str = "step",
    config: FidelityConfig | str | Path | None = None,
    full_diagnoses: Sequence[Diagnosis | None] | None = None,
    proxy_diagnosis: Diagnosis | None = None,
    seed: int = 0,
    diagnose_config: DiagnoseConfig | None = None,
) -> Comparison:
    """Score how faithfully ``proxy`` reproduced the dynamics and fault of ``full``.

    One way: diagnose every run, align them, compare the faults, register the proxy's onset on
    the full run's, resample every metric once, split into phases
    (:mod:`~proxydiag.fidelity.phases`), then test each phase; with two phases, the whole-run
    ``metrics`` are assembled from theirs (:mod:`~proxydiag.fidelity._assemble`; or tested as
    one range too with ``whole_run_tests``).

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
        Diagnoses already made (else the runs are diagnosed here, with ``diagnose_config``).
    seed
        Seed of the bootstrap (results are deterministic for a seed).
    """
    fulls = [full] if isinstance(full, Run) else list(full)
    cfg = (
        config
        if isinstance(config, FidelityConfig)
        else (load_config(config) if config is not None else FidelityConfig())
    )
    diagnoses = _diagnoses(fulls, proxy, full_diagnoses, proxy_diagnosis, diagnose_config)
    aligned = align_runs(fulls, proxy, align=align)
    fault = fault_match.score(
        fulls, proxy, aligned, full=diagnoses[:-1], proxy_diagnosis=diagnoses[-1], config=cfg
    )
    if fault.reproduced and fault.onset_lag_steps and fault.full.get("onset_progress") is not None:
        aligned = aligned.registered(
            proxy,
            onset_step=float(fault.proxy["onset_step"]),
            full_progress=float(fault.full["onset_progress"]),
        )
    series = shared_series(fulls, proxy)
    per_layer = _per_layer(fulls, proxy)
    unrouted = _routing.no_routing(proxy)
    dropped = sorted(m for m in series[-1] if _routing.is_routing(m)) if unrouted else []
    if dropped:
        series = [{m: v for m, v in s.items() if m not in dropped} for s in series]
    grid = _resampled(aligned, fulls, proxy, series, cfg)
    ev = _symptom_order.score(grid, diagnoses, config=cfg)
    rng = np.random.default_rng(seed)
    split = phases_of(aligned, fault, diagnoses, config=cfg)
    decided = [
        p for p in split if not p.undecidable and p.name != WHOLE and not cfg.whole_run_tests
    ]
    # with phases, the whole-run table is assembled from them (one analysis in all, and a
    # fault that no longer dominates it); without, the whole run is tested as the one phase
    per_metric = {} if decided else _score_metrics(grid.metrics, fulls, proxy, config=cfg, rng=rng)
    phases = _score_phases(
        split, aligned, series, grid, per_metric, fulls, proxy, config=cfg, rng=rng
    )
    if decided:
        per_metric = _assemble.whole_run(
            [(p.name, p.progress[1] - p.progress[0], p.metrics) for p in phases], cfg
        )
    elif len(phases) == 1 and phases[0].verdict != "undecidable":
        per_metric = phases[0].metrics  # the whole run is the phase: its sharpened verdicts
    fidelity, verdict, reasons = _aggregate.overall(per_metric, fault, cfg, ev)
    fidelity, verdict, reasons = _with_phases(fidelity, verdict, reasons, phases, cfg)
    undecidable = grid.undecidable
    if undecidable:
        reasons = (
            *reasons,
            f"undecidable, left out: {', '.join(undecidable)} (no finite point in any run)",
        )
    if dropped:
        reasons = (
            *reasons,
            f"{unrouted}: its routing metrics are not scored ({', '.join(dropped)})",
        )
    if per_layer:
        reasons = (
            *reasons,
            "per-layer metrics compared as their run-level metric (a run's own, else the mean "
            f"over its routed layers): {', '.join(f'{b} ({w})' for b, w in per_layer.items())}",
        )
    hint = _consumption_hint(fulls, proxy) if align == "step" else None
    if hint:
        reasons = (*reasons, hint)
    other = {m: why for m, why in grid.skipped.items() if m not in undecidable}
    if not per_metric and (other or not undecidable):
        reasons = (*reasons, f"no curve could be compared ({_skips(other)})")
    return Comparison(
        fidelity=float(np.clip(fidelity, 0.0, 1.0)),
        verdict=verdict,
        align=align,
        metrics=per_metric,
        faults=fault,
        full_runs=tuple(r.id for r in fulls),
        proxy_run=proxy.id,
        overlap=grid.overlap,
        reasons=reasons,
        events={
            **ev.to_dict(),
            "skipped_metrics": {
                **dict(grid.skipped),
                **{m: f"not scored: {unrouted}" for m in dropped},
                **{f"{b}_layer_*": f"compared as {b}: {w}" for b, w in per_layer.items()},
            },
            "baseline": _baseline_words(len(fulls), cfg),
        },
        phases=phases,
    )


def _per_layer(fulls: list[Run], proxy: Run) -> dict[str, str]:
    """Per run-level metric, the layers its per-layer family holds in the full runs and the
    proxy (folded into it by :func:`~proxydiag.align.grid.shared_series`)."""
    out: dict[str, str] = {}
    found = [layer_families(r.metrics) for r in [*fulls, proxy]]
    for base in sorted({b for f in found for b in f}):
        full_n = sorted({len(f[base]) for f in found[:-1] if base in f})
        proxy_n = len(found[-1].get(base, {}))
        full_words = "/".join(map(str, full_n)) if full_n else "no"
        out[base] = f"{full_words} layers in the full runs, {proxy_n or 'no'} in the proxy"
    return out


def _resampled(
    aligned: Alignment,
    fulls: list[Run],
    proxy: Run,
    series: list[Series],
    cfg: FidelityConfig,
    x_range: tuple[float, float] | None = None,
) -> Grid:
    """The grid of the whole range, or of a phase with its share of the buckets (the phases
    together cost one whole-run analysis)."""
    buckets, min_points = cfg.buckets, cfg.min_points
    if x_range is not None:
        lo, hi = aligned.x_range
        share = (x_range[1] - x_range[0]) / max(hi - lo, 1e-12)
        buckets = max(min_points, round(cfg.buckets * share))
    return resample_grid(
        aligned,
        fulls,
        proxy,
        buckets=buckets,
        min_points=min_points,
        log_scale_metrics=cfg.log_scale_metrics,
        x_range=x_range,
        series=series,
    )


def _score_phases(
    phases: tuple[Phase, ...],
    aligned: Alignment,
    series: list[Series],
    grid: Grid,
    whole: dict[str, MetricFidelity],
    fulls: list[Run],
    proxy: Run,
    *,
    config: FidelityConfig,
    rng: np.random.Generator,
) -> tuple[PhaseFidelity, ...]:
    """Every phase's tests, learning progress and verdict. A phase is resampled on its own range
    (a pre-fault phase keeps its resolution when a run goes NaN after the fault); the whole
    run's grid and tests are reused when the whole range is the only phase."""
    out = []
    for phase in phases:
        metrics: dict[str, MetricFidelity] = {}
        learned: dict[str, dict[str, object]] = {}
        if not phase.undecidable:
            part = (
                grid
                if phase.name == WHOLE
                else _resampled(aligned, fulls, proxy, series, config, x_range=(phase.lo, phase.hi))
            )
            metrics = (
                whole
                if phase.name == WHOLE
                else _score_metrics(part.metrics, fulls, proxy, config=config, rng=rng)
            )
            learned = _progress.learning(part.metrics, config)
        out.append(_verdicts.judge(phase, metrics, learned, config))
    return tuple(out)


def _with_phases(
    fidelity: float,
    verdict: Verdict,
    reasons: tuple[str, ...],
    phases: tuple[PhaseFidelity, ...],
    config: FidelityConfig,
) -> tuple[float, Verdict, tuple[str, ...]]:
    """The whole-run verdict capped by the phases' (see :mod:`.verdicts`): the smaller score,
    the worse verdict (an undecidable phase is named, never counted); a partial proxy's
    fidelity is at most ``partial_below``, so that the score and the verdict agree."""
    by_phase, worst, why = _verdicts.combine(phases)
    if by_phase is not None and len(phases) > 1:
        factor = config.unfaithful_factor if verdict == "unfaithful" else 1.0
        fidelity = min(fidelity, by_phase * factor)
    changed = _RANK[worst] > _RANK[verdict] if len(phases) == 1 else True
    new = tuple(w for w in why if w not in reasons) if changed else ()
    if worst == "unfaithful" and verdict != "unfaithful":
        fidelity, verdict = fidelity * config.unfaithful_factor, "unfaithful"
    elif worst == "partial" and verdict == "faithful":
        verdict = "partial"
    if verdict == "partial":  # the score agrees with the verdict: faithful needs partial_below
        fidelity = min(fidelity, config.partial_below)
    if verdict != "faithful" and reasons and reasons[0].startswith("dynamics within"):
        reasons = ()
    return fidelity, verdict, (*reasons, *new)


def _diagnoses(
    fulls: list[Run],
    proxy: Run,
    full_diagnoses: Sequence[Diagnosis | None] | None,
    proxy_diagnosis: Diagnosis | None,
    config: DiagnoseConfig | None = None,
) -> list[Diagnosis]:
    """Every run's diagnosis (full runs..., proxy), diagnosing those not given with
    ``config``."""
    given: list[Diagnosis | None] = list(full_diagnoses or [])[: len(fulls)]
    given += [None] * (len(fulls) - len(given)) + [proxy_diagnosis]
    return fault_match.diagnose_runs([*fulls, proxy], given, config)


def _score_metrics(
    metrics: dict[str, MetricGrid],
    fulls: list[Run],
    proxy: Run,
    *,
    config: FidelityConfig,
    rng: np.random.Generator,
) -> dict[str, MetricFidelity]:
    """Every test on every aligned metric (one bootstrap stream, metrics in sorted order)."""
    out: dict[str, MetricFidelity] = {}
    for name, mg in metrics.items():
        ctx = metric_context(mg, config=config, rng=rng)
        tests = {t.NAME: t.score(fulls, proxy, mg, ctx=ctx) for t in TESTS}
        out[name] = _aggregate.metric_fidelity(name, tests, config)
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
        return (
            f"the proxy consumes {ratio:.2g}x the full run's {counter} per step "
            f"({rates[-1]:.4g} vs {full_rate:.4g}): compared by step, the same data comes at "
            f"other steps; consider --align tokens (equal {counter} consumed)"
        )
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
    return (
        f"1 full seed: {cfg.n_pseudo_seeds} pseudo-seeds (trend + circular block bootstrap of "
        "the residuals)"
    )
