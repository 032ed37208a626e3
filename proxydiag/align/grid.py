"""`Grid`: full runs and a proxy aligned on one axis and resampled per metric.

A metric is compared when the proxy and at least one full run have it. Rows ``0 .. n_full-1`` of
its arrays are the full runs that have it, in the order given (row 0, the first of them, is the
reference; the others are its seeds); row ``n_full`` is the proxy. ``rows`` maps rows back to
runs. The range compared is the :class:`~proxydiag.align.alignment.Alignment`'s. The analysis
resolution is ``buckets`` buckets per metric (min/max kept, so at most twice that many points per
metric and run); never more buckets than the sparsest run has finite points in the range. A
phase of the comparison is resampled on its own range (``x_range``), at its own resolution, from
the series extracted once (:func:`shared_series`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np
import numpy.typing as npt
import polars as pl

from proxydiag.align.alignment import ALIGNERS, Alignment, align_runs
from proxydiag.align.resample import resample
from proxydiag.errors import AnalysisError
from proxydiag.metrics import LOG_SCALE_METRICS, layer_families, layer_of, mean_over_layers
from proxydiag.run import Run

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
#: one run's metrics as ``metric -> (steps, values)``, sorted by step
Series = dict[str, tuple[Floats, Floats]]

#: skip reason of a metric no run has a finite point of: its comparison is undecidable
NO_FINITE = "undecidable: no finite point in any run"
#: buckets where the first full run and the proxy must both have a finite value
_MIN_SHARED = 3
#: default analysis resolution: buckets per metric (2 points each, min and max)
BUCKETS = 1000
#: default least number of finite points in every run for a metric to be resampled
MIN_POINTS = 8
__all__ = [
    "ALIGNERS",
    "LOG_SCALE_METRICS",
    "Alignment",
    "Grid",
    "MetricGrid",
    "build_grid",
    "resample_grid",
    "shared_series",
]


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
class Grid(Alignment):
    """An :class:`Alignment` with every shared metric resampled on it: what the tests need."""

    metrics: dict[str, MetricGrid] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def undecidable(self) -> list[str]:
        """Skipped metrics without a finite point in any run (all NaN/inf: nothing to compare)."""
        return [m for m, why in self.skipped.items() if why.startswith(NO_FINITE)]


def build_grid(
    full: list[Run],
    proxy: Run,
    *,
    align: str = "step",
    buckets: int = BUCKETS,
    min_points: int = MIN_POINTS,
    log_scale_metrics: tuple[str, ...] = LOG_SCALE_METRICS,
    register_onsets: tuple[float, float] | None = None,
) -> Grid:
    """Align ``full`` runs and ``proxy`` and resample every metric the proxy and a full run have.

    ``register_onsets = (proxy_onset_step, full_onset_progress)`` warps the proxy's axis so its
    fault onset lands on the full run's (:meth:`Alignment.registered`). A shortcut for
    :func:`~proxydiag.align.alignment.align_runs` then :func:`resample_grid`.
    """
    aligned = align_runs(full, proxy, align=align)
    if register_onsets is not None:
        onset_step, full_progress = register_onsets
        aligned = aligned.registered(proxy, onset_step=onset_step, full_progress=full_progress)
    return resample_grid(
        aligned,
        full,
        proxy,
        buckets=buckets,
        min_points=min_points,
        log_scale_metrics=log_scale_metrics,
    )


def resample_grid(
    aligned: Alignment,
    full: list[Run],
    proxy: Run,
    *,
    buckets: int = BUCKETS,
    min_points: int = MIN_POINTS,
    log_scale_metrics: tuple[str, ...] = LOG_SCALE_METRICS,
    x_range: tuple[float, float] | None = None,
    series: list[Series] | None = None,
) -> Grid:
    """Resample every metric the proxy and a full run share onto ``aligned``.

    ``buckets`` per metric (each keeps its min and max), never more than the sparsest run has
    finite points in the range; a metric with fewer than ``min_points`` is skipped. Changes of
    ``log_scale_metrics`` (when positive) and of any positive metric spanning a decade are
    taken on log scale. ``x_range``: a part of the alignment's range (a phase), resampled at
    its own resolution; ``series``: the runs' :func:`shared_series`, when already extracted.
    """
    per_run = series if series is not None else shared_series(full, proxy)
    grid = Grid(**{f.name: getattr(aligned, f.name) for f in fields(Alignment)})
    if x_range is not None:
        grid = replace(grid, x_range=x_range)
    for metric in sorted(per_run[-1]):
        rows = [i for i in range(len(full)) if metric in per_run[i]] + [len(full)]
        points = [(aligned.axes[i](per_run[i][metric][0]), per_run[i][metric][1]) for i in rows]
        result = _metric_grid(
            metric,
            _within(points, x_range) if x_range is not None else points,
            grid.x_range,
            rows=tuple(rows),
            buckets=buckets,
            min_points=min_points,
            log_scale=metric in log_scale_metrics,
            sign=_sign(points),
        )
        if isinstance(result, str):
            grid.skipped[metric] = result
        else:
            grid.metrics[metric] = result
    return grid


def shared_series(full: list[Run], proxy: Run) -> list[Series]:
    """Each run's ``(steps, values)`` of the metrics the proxy and a full run share (full runs in
    order, then the proxy), extracted once for every resampling of the same runs.

    A per-layer family (``<metric>_layer_<i>``, :func:`proxydiag.metrics.layer_of`) is compared
    as its run-level metric, never layer by layer: the run's own when it logs one, else the
    mean over its routed layers (:func:`proxydiag.metrics.mean_over_layers`, as Megatron-Core
    aggregates it), so a run logging only the layers compares with one logging only the mean."""
    folded = [_folded(r.metrics) for r in [*full, proxy]]
    common = set(folded[-1]) & {m for f in folded[:-1] for m in f}
    if not common:
        raise AnalysisError(
            f"proxy {proxy.id} shares no metric with the full runs; "
            "check the alias table (--aliases)"
        )
    out = []
    for run, names in zip([*full, proxy], folded, strict=True):
        # metric -> the names of its layers, where this run logs only those
        layered = {m: layers for m in common if (layers := names.get(m))}
        wanted = {m for m in common if m not in layered} | {
            n for layers in layered.values() for n in layers.values()
        }
        series = _by_metric(run, wanted)
        for metric, layers in layered.items():
            steps, values = mean_over_layers({i: series.pop(n) for i, n in layers.items()})
            series[metric] = (steps.astype(np.float64), values)
        out.append(series)
    return out


def _folded(metrics: list[str]) -> dict[str, dict[int, str]]:
    """Each metric the run is compared on -> the per-layer metrics its mean is taken over
    (empty: the run logs the metric itself)."""
    out: dict[str, dict[int, str]] = {m: {} for m in metrics if layer_of(m) is None}
    for base, layers in layer_families(metrics).items():
        out.setdefault(base, layers)
    return out


def _by_metric(run: Run, metrics: set[str]) -> dict[str, tuple[Floats, Floats]]:
    """Each metric's ``(steps, values)`` sorted by step (a stable sort only where needed).

    A stored or built run holds each metric in one block of rows: the blocks are sliced out of
    two whole-column arrays (2-3x faster than partitioning the frame); otherwise it is
    partitioned by metric.
    """
    frame = run.frame
    blocks = frame.select(pl.col("metric").rle()).unnest("metric")
    if blocks.height != frame["metric"].n_unique():
        parts = frame.partition_by("metric", as_dict=True).items()
        pieces = {
            str(name): (part["step"].to_numpy(), part["value"].to_numpy())
            for (name,), part in parts
            if name in metrics
        }
    else:
        all_steps, all_values = frame["step"].to_numpy(), frame["value"].to_numpy()
        ends = np.cumsum(blocks["len"].to_numpy())
        starts = ends - blocks["len"].to_numpy()
        pieces = {
            str(name): (all_steps[a:b], all_values[a:b])
            for name, a, b in zip(blocks["value"].to_list(), starts, ends, strict=True)
            if name in metrics
        }
    out: dict[str, tuple[Floats, Floats]] = {}
    for name, (raw_steps, raw_values) in pieces.items():
        steps = raw_steps.astype(np.float64)
        values = raw_values.astype(np.float64)  # a copy: the run's frame stays untouched
        if steps.size > 1 and bool(np.any(steps[1:] < steps[:-1])):
            order = np.argsort(steps, kind="stable")
            steps, values = steps[order], values[order]
        out[name] = (steps, values)
    return out


def _within(
    points: list[tuple[Floats, Floats]], x_range: tuple[float, float]
) -> list[tuple[Floats, Floats]]:
    """Each run's points inside ``x_range`` (a phase), where its axis positions are sorted
    (they are, but for an axis that steps back): a phase's resampling reads its part only."""
    lo, hi = x_range
    out = []
    for x, v in points:
        if x.size > 1 and not bool(np.all(x[1:] >= x[:-1])):
            out.append((x, v))
            continue
        a, b = np.searchsorted(x, lo, side="left"), np.searchsorted(x, hi, side="right")
        out.append((x[a:b], v[a:b]))
    return out


def _sign(points: list[tuple[Floats, Floats]]) -> tuple[bool, bool]:
    """``(positive, decade)`` of a metric over the whole runs: every finite point of every run
    is > 0; the first run's finite points span a decade."""
    finite_values = [v[np.isfinite(v)] for _, v in points]
    positive = all(fv.size > 0 and bool(np.all(fv > 0)) for fv in finite_values)
    ref = finite_values[0]
    return positive, positive and float(ref.max()) >= 10 * float(ref.min())


def _metric_grid(
    metric: str,
    series: list[tuple[Floats, Floats]],
    x_range: tuple[float, float],
    *,
    rows: tuple[int, ...],
    buckets: int,
    min_points: int,
    log_scale: bool,
    sign: tuple[bool, bool],
) -> MetricGrid | str:
    lo, hi = x_range
    counts = [int(np.count_nonzero(np.isfinite(v) & (x >= lo) & (x <= hi))) for x, v in series]
    buckets = min(buckets, min(counts))
    if max(counts) == 0:
        n_bad = sum(
            int(np.count_nonzero(~np.isfinite(v) & (x >= lo) & (x <= hi))) for x, v in series
        )
        return f"{NO_FINITE} in the compared range ({n_bad} non-finite points)"
    if buckets < min_points:
        return (
            f"too few finite points in the compared range ({min(counts)} < "
            f"{min_points}) in at least one run"
        )
    edges = np.linspace(lo, hi, buckets + 1)
    parts = [resample(x, v, edges) for x, v in series]
    # the tests compare the first full run with the metric and the proxy where both have a
    # finite value: a sparse metric (a loss scale logged at its overflows) may have enough
    # points in each run and hardly a step in common. Fewer than 3 leave the tests nothing
    # to work on (the volatility bootstrap needs two changes); non-finite stretches are data
    # and are compared as long as that many finite steps are shared
    both = int(np.count_nonzero(np.isfinite(parts[0].sample) & np.isfinite(parts[-1].sample)))
    if both < _MIN_SHARED:
        return (
            f"{both} of {buckets} buckets where the full run and the proxy both have a finite "
            f"value (< {_MIN_SHARED}): logged at other steps, or non-finite where the other "
            "has values"
        )
    positive, decade = sign
    return MetricGrid(
        metric=metric,
        edges=edges,
        sample=np.vstack([p.sample for p in parts]),
        envelope=np.vstack([p.envelope for p in parts]),
        n_finite=np.array([p.n_finite for p in parts], dtype=np.int64),
        n_nonfinite=np.array([p.nonfinite_x.size for p in parts], dtype=np.int64),
        nonfinite_x=tuple(p.nonfinite_x for p in parts),
        positive=positive,
        log_scale=positive and (log_scale or decade),
        rows=rows,
        n_full=len(rows) - 1,
    )
