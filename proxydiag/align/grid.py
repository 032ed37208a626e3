"""`Grid`: full runs and a proxy aligned on one axis and resampled per metric.

A metric is compared when the proxy and at least one full run have it. Rows ``0 .. n_full-1`` of
its arrays are the full runs that have it, in the order given (row 0, the first of them, is the
reference; the others are its seeds); row ``n_full`` is the proxy. ``rows`` maps rows back to
runs. The range compared is the overlap of the reference
full run and the proxy on the axis (``step``, ``tokens``) or [0, 1] (``progress``); :attr:`Grid.overlap` says which, in words.
The analysis resolution is ``config.buckets`` buckets per metric (min/max kept, so at most
``resolution_points`` points per metric and run); never more buckets than the sparsest run has
finite points in the range.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from proxydiag.align import progress, step, tokens
from proxydiag.align.axis import Axis
from proxydiag.align.contract import Aligner
from proxydiag.align.register import register
from proxydiag.align.resample import resample
from proxydiag.errors import AnalysisError
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.registry import Registry
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

#: skip reason of a metric no run has a finite point of: its comparison is undecidable
NO_FINITE = "undecidable: no finite point in any run"
#: buckets where the first full run and the proxy must both have a finite value
_MIN_SHARED = 3
#: alignment name -> aligner (:class:`~proxydiag.align.contract.Aligner`)
ALIGNERS: Registry[Aligner] = Registry("aligner", {m.NAME: m for m in (step, tokens, progress)})


@dataclass(frozen=True)
class MetricGrid:
    """One metric of every run on the common buckets (see :mod:`proxydiag.align.resample`)."""

    metric: str
    edges: Floats  # (B+1,) bucket edges on the axis
    sample: Floats  # (R, B) one logged finite point per bucket, NaN = no finite point
    envelope: Floats  # (R, 2B) bucket min/max in order of occurrence
    n_finite: Ints  # (R,) finite points in the range (full data)
    n_nonfinite: Ints  # (R,) NaN/±inf points in the range (full data)
    nonfinite_x: tuple[Floats, ...]  # (R,) their axis positions
    positive: bool  # every finite point of every run > 0
    rows: tuple[int, ...]  # run index (into Grid.run_ids) of each row
    log_scale: bool  # positive, and a scale-like metric or spanning a decade: log-scale changes
    n_full: int

    @property
    def buckets(self) -> int:
        return int(self.edges.size - 1)

    @property
    def centres(self) -> Floats:
        return np.asarray((self.edges[:-1] + self.edges[1:]) / 2, dtype=np.float64)

    @property
    def full(self) -> Floats:
        return self.sample[: self.n_full]

    @property
    def proxy(self) -> Floats:
        return np.asarray(self.sample[self.n_full], dtype=np.float64)

    def row_of(self, run_index: int) -> int | None:
        """The row of run ``run_index`` (None when that run lacks the metric)."""
        return self.rows.index(run_index) if run_index in self.rows else None


@dataclass(frozen=True)
class Grid:
    """Everything the fidelity tests need, aligned."""

    align: str
    unit: str
    x_range: tuple[float, float]
    overlap: str
    run_ids: tuple[str, ...]
    n_full: int
    axes: tuple[Axis, ...]
    spans: tuple[tuple[float, float], ...]  # each run's first/last position on the axis
    metrics: dict[str, MetricGrid] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    #: each run's shared metrics as ``(steps, values)``, kept so that a registered grid of the
    #: same runs (:func:`build_grid` ``like=``) does not extract them again
    series: tuple[dict[str, tuple[Floats, Floats]], ...] = field(default=(), repr=False,
                                                                compare=False)

    @property
    def undecidable(self) -> list[str]:
        """Skipped metrics without a finite point in any run (all NaN/inf: nothing to compare)."""
        return [m for m, why in self.skipped.items() if why.startswith(NO_FINITE)]

    @property
    def reference_span(self) -> tuple[float, float]:
        """The span progress is measured on: the reference full run's, or (0, 1) for
        ``progress`` alignment."""
        return _reference_span(self.align, self.spans)

    def progress(self, row: int, at_step: float) -> float:
        """Relative progress of ``at_step`` of run ``row``: on the reference full run's span for
        ``step``/``tokens`` alignment (so a proxy that stopped early is not stretched), on the
        run's own span for ``progress``."""
        x = float(self.axes[row](at_step))
        first, last = self.reference_span
        return (x - first) / max(last - first, 1e-12)


def build_grid(full: list[Run], proxy: Run, *, align: str = "step",
               config: FidelityConfig | None = None,
               register_onsets: tuple[float, float] | None = None,
               like: Grid | None = None) -> Grid:
    """Align ``full`` runs and ``proxy`` and resample every metric the proxy and a full run have.

    ``register_onsets = (proxy_onset_step, full_onset_progress)`` warps the proxy's axis so its
    fault onset lands on the full run's (:mod:`proxydiag.align.register`). ``like``: a grid
    already built for the same runs, whose extracted series are reused.
    """
    config = config or FidelityConfig()
    if align not in ALIGNERS:
        raise AnalysisError(f"unknown alignment {align!r}; use one of {', '.join(ALIGNERS.names())}")
    if not full:
        raise AnalysisError("compare needs at least one full run; pass --full SOURCE")
    runs = [*full, proxy]
    module = ALIGNERS[align]
    if module is tokens:
        counter = tokens.counter_for(runs)
        axes = tuple(tokens.axis(r, counter=counter) for r in runs)
    else:
        axes = tuple(module.axis(r) for r in runs)
    spans = tuple((ax.first, ax.last) for ax in axes)
    x_range, overlap = _range(module.RANGE, axes, runs)
    if register_onsets is not None:
        axes, note = _registered(axes, proxy, register_onsets, align=align, spans=spans)
        overlap += note
    common = set(proxy.metrics) & {m for r in full for m in r.metrics}
    if not common:
        raise AnalysisError(
            f"proxy {proxy.id} shares no metric with the full runs; check the alias table (--aliases)"
        )
    per_run = list(like.series) if like is not None else [_by_metric(r, common) for r in runs]
    grid = Grid(align, axes[0].unit, x_range, overlap, tuple(r.id for r in runs), len(full), axes,
                spans, series=tuple(per_run))
    for metric in sorted(common):
        rows = [i for i in range(len(full)) if metric in per_run[i]] + [len(full)]
        series = [(axes[i](per_run[i][metric][0]), per_run[i][metric][1]) for i in rows]
        result = _metric_grid(metric, series, x_range, rows=tuple(rows), config=config)
        if isinstance(result, str):
            grid.skipped[metric] = result
        else:
            grid.metrics[metric] = result
    return grid


def _registered(axes: tuple[Axis, ...], proxy: Run, onsets: tuple[float, float], *, align: str,
                spans: tuple[tuple[float, float], ...]) -> tuple[tuple[Axis, ...], str]:
    onset_step, full_progress = onsets
    first, last = _reference_span(align, spans)
    target = first + full_progress * (last - first)
    warped = register(axes[-1], first_step=proxy.first_step, last_step=proxy.last_step,
                      onset_step=onset_step, to_position=target)
    if warped is None:
        return axes, ""
    return (*axes[:-1], warped), (
        f"; proxy axis warped to register its fault onset (step {onset_step:g}) on the full "
        f"run's ({target:.4g} on the {axes[0].unit} axis)")


def _reference_span(align: str, spans: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    return spans[0] if align != "progress" else (0.0, 1.0)


def _range(kind: str, axes: tuple[Axis, ...], runs: list[Run]) -> tuple[tuple[float, float], str]:
    if kind == "progress":
        spans = ", ".join(f"{r.id} steps {r.first_step}–{r.last_step}" for r in runs)
        return (0.0, 1.0), f"progress: each run's own span mapped onto [0, 1] ({spans})"
    # the reference full run and the proxy decide the range; a seed that stopped early (a
    # crashed run) leaves gaps in the baseline, it does not shorten the comparison
    lo, hi = max(axes[0].first, axes[-1].first), min(axes[0].last, axes[-1].last)
    unit = axes[0].unit
    if hi <= lo:
        raise AnalysisError(
            f"runs do not overlap on the {unit} axis ({', '.join(r.id for r in runs)}); "
            "use --align progress"
        )
    spans = ", ".join(f"{r.id} {ax.first:g}–{ax.last:g}" for r, ax in zip(runs, axes, strict=True))
    return (lo, hi), f"overlap: {unit} {lo:g}–{hi:g} ({spans})"


def _by_metric(run: Run, metrics: set[str]) -> dict[str, tuple[Floats, Floats]]:
    """Each metric's ``(steps, values)`` sorted by step (a stable sort only where needed)."""
    out: dict[str, tuple[Floats, Floats]] = {}
    for (name,), part in run.frame.partition_by("metric", as_dict=True).items():
        if name not in metrics:
            continue
        steps = part["step"].to_numpy().astype(np.float64)
        values = part["value"].to_numpy().astype(np.float64)
        if steps.size > 1 and bool(np.any(steps[1:] < steps[:-1])):
            order = np.argsort(steps, kind="stable")
            steps, values = steps[order], values[order]
        out[str(name)] = (steps, values)
    return out


def _metric_grid(metric: str, series: list[tuple[Floats, Floats]], x_range: tuple[float, float],
                 *, rows: tuple[int, ...], config: FidelityConfig) -> MetricGrid | str:
    lo, hi = x_range
    counts = [int(np.count_nonzero(np.isfinite(v) & (x >= lo) & (x <= hi))) for x, v in series]
    buckets = min(config.buckets, min(counts))
    if max(counts) == 0:
        n_bad = sum(int(np.count_nonzero(~np.isfinite(v) & (x >= lo) & (x <= hi))) for x, v in series)
        return f"{NO_FINITE} in the compared range ({n_bad} non-finite points)"
    if buckets < config.min_points:
        return (f"too few finite points in the compared range ({min(counts)} < "
                f"{config.min_points}) in at least one run")
    edges = np.linspace(lo, hi, buckets + 1)
    parts = [resample(x, v, edges) for x, v in series]
    # the tests compare the first full run with the metric and the proxy where both have a
    # finite value: a sparse metric (a loss scale logged at its overflows) may have enough
    # points in each run and hardly a step in common. Fewer than 3 leave the tests nothing
    # to work on (the volatility bootstrap needs two changes); non-finite stretches are data
    # and are compared as long as that many finite steps are shared
    both = int(np.count_nonzero(np.isfinite(parts[0].sample) & np.isfinite(parts[-1].sample)))
    if both < _MIN_SHARED:
        return (f"{both} of {buckets} buckets where the full run and the proxy both have a finite "
                f"value (< {_MIN_SHARED}): logged at other steps, or non-finite where the other "
                "has values")
    finite_values = [v[np.isfinite(v)] for _, v in series]
    positive = all(fv.size > 0 and bool(np.all(fv > 0)) for fv in finite_values)
    ref = finite_values[0]
    decade = positive and float(ref.max()) >= 10 * float(ref.min())
    return MetricGrid(
        metric=metric,
        edges=edges,
        sample=np.vstack([p.sample for p in parts]),
        envelope=np.vstack([p.envelope for p in parts]),
        n_finite=np.array([p.n_finite for p in parts], dtype=np.int64),
        n_nonfinite=np.array([p.nonfinite_x.size for p in parts], dtype=np.int64),
        nonfinite_x=tuple(p.nonfinite_x for p in parts),
        positive=positive,
        log_scale=positive and (metric in config.log_scale_metrics or decade),
        rows=rows,
        n_full=len(rows) - 1,
    )
