"""`Grid`: full runs and a proxy aligned on one axis and resampled per metric.

Rows ``0 .. n_full-1`` of every array are the full runs (row 0 is the reference, the first
``--full``), row ``n_full`` is the proxy. The range compared is the runs' overlap on the axis
(``step``, ``tokens``) or [0, 1] (``progress``); :attr:`Grid.overlap` says which, in words.
The analysis resolution is ``config.buckets`` buckets per metric (min/max kept, so at most
``resolution_points`` points per metric and run); never more buckets than the sparsest run has
finite points in the range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import numpy.typing as npt
import polars as pl

from proxydiag.align import progress, step, tokens
from proxydiag.align.axis import Axis
from proxydiag.align.resample import resample
from proxydiag.errors import AnalysisError
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

#: alignment name -> module with ``axis(run)`` and ``RANGE`` ("overlap" | "progress")
ALIGNERS: dict[str, ModuleType] = {"step": step, "tokens": tokens, "progress": progress}


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
    positive: bool  # every finite point of every run > 0 (increments taken on log scale)
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
        return self.sample[self.n_full]


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

    def progress(self, row: int, at_step: float) -> float:
        """Relative progress of ``at_step`` of run ``row``: on the reference full run's span for
        ``step``/``tokens`` alignment (so a proxy that stopped early is not stretched), on the
        run's own span for ``progress``."""
        x = float(self.axes[row](at_step))
        first, last = self.spans[0] if self.align != "progress" else (0.0, 1.0)
        return (x - first) / max(last - first, 1e-12)


def build_grid(full: list[Run], proxy: Run, *, align: str = "step",
               config: FidelityConfig | None = None) -> Grid:
    """Align ``full`` runs and ``proxy`` and resample every metric they all have."""
    config = config or FidelityConfig()
    if align not in ALIGNERS:
        raise AnalysisError(f"unknown alignment {align!r}; use one of {', '.join(ALIGNERS)}")
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
    common = set.intersection(*(set(r.metrics) for r in runs))
    if not common:
        raise AnalysisError(
            f"runs {', '.join(r.id for r in runs)} share no metric; check the alias table (--aliases)"
        )
    per_run = [_by_metric(r, common) for r in runs]
    grid = Grid(align, axes[0].unit, x_range, overlap, tuple(r.id for r in runs), len(full), axes,
                spans)
    for metric in sorted(common):
        series = [(axes[i](per_run[i][metric][0]), per_run[i][metric][1]) for i in range(len(runs))]
        result = _metric_grid(metric, series, x_range, n_full=len(full), config=config)
        if isinstance(result, str):
            grid.skipped[metric] = result
        else:
            grid.metrics[metric] = result
    return grid


def _range(kind: str, axes: tuple[Axis, ...], runs: list[Run]) -> tuple[tuple[float, float], str]:
    if kind == "progress":
        spans = ", ".join(f"{r.id} steps {r.first_step}–{r.last_step}" for r in runs)
        return (0.0, 1.0), f"progress: each run's own span mapped onto [0, 1] ({spans})"
    lo, hi = max(ax.first for ax in axes), min(ax.last for ax in axes)
    unit = axes[0].unit
    if hi <= lo:
        raise AnalysisError(
            f"runs do not overlap on the {unit} axis ({', '.join(r.id for r in runs)}); "
            "use --align progress"
        )
    spans = ", ".join(f"{r.id} {ax.first:g}–{ax.last:g}" for r, ax in zip(runs, axes, strict=True))
    return (lo, hi), f"overlap: {unit} {lo:g}–{hi:g} ({spans})"


def _by_metric(run: Run, metrics: set[str]) -> dict[str, tuple[Floats, Floats]]:
    frame = (run.frame.lazy().filter(pl.col("metric").is_in(list(metrics)))
             .select("metric", "step", "value").sort("metric", "step").collect())
    out: dict[str, tuple[Floats, Floats]] = {}
    for (name,), part in frame.partition_by("metric", as_dict=True, maintain_order=True).items():
        out[str(name)] = (part["step"].to_numpy().astype(np.float64),
                          part["value"].to_numpy().astype(np.float64))
    return out


def _metric_grid(metric: str, series: list[tuple[Floats, Floats]], x_range: tuple[float, float],
                 *, n_full: int, config: FidelityConfig) -> MetricGrid | str:
    lo, hi = x_range
    counts = [int(np.count_nonzero(np.isfinite(v) & (x >= lo) & (x <= hi))) for x, v in series]
    buckets = min(config.buckets, min(counts))
    if buckets < config.min_points:
        return (f"too few finite points in the compared range ({min(counts)} < "
                f"{config.min_points}) in at least one run")
    edges = np.linspace(lo, hi, buckets + 1)
    parts = [resample(x, v, edges) for x, v in series]
    finite_values = [v[np.isfinite(v)] for _, v in series]
    return MetricGrid(
        metric=metric,
        edges=edges,
        sample=np.vstack([p.sample for p in parts]),
        envelope=np.vstack([p.envelope for p in parts]),
        n_finite=np.array([p.n_finite for p in parts], dtype=np.int64),
        n_nonfinite=np.array([p.nonfinite_x.size for p in parts], dtype=np.int64),
        nonfinite_x=tuple(p.nonfinite_x for p in parts),
        positive=all(fv.size > 0 and bool(np.all(fv > 0)) for fv in finite_values),
        n_full=n_full,
    )
