"""A run's metrics as numpy series, extracted once and shared by every detector.

The view holds the metrics the diagnosis reads (:class:`Reads`: what the registered detectors
and the taxonomy declare, :func:`proxydiag.diagnose.api.metrics_read`); it is what a detector
plug-in receives (:class:`~proxydiag.diagnose.contract.Detector`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from proxydiag.metrics import is_mismatch
from proxydiag.run import Run


@dataclass(frozen=True)
class Reads:
    """A set of canonical metric names; a pattern ending in ``*`` stands for a prefix.

    >>> r = Reads.of(["loss", "mismatch*"])
    >>> "loss" in r, "mismatch_kl" in r, "lr" in r
    (True, True, False)
    """

    names: frozenset[str]
    prefixes: tuple[str, ...] = ()

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Reads:
        found = list(patterns)
        prefixes = tuple(sorted({p[:-1] for p in found if p.endswith("*")}))
        return cls(frozenset(p for p in found if not p.endswith("*")), prefixes)

    def __contains__(self, metric: object) -> bool:
        return isinstance(metric, str) and (
            metric in self.names or metric.startswith(self.prefixes)
        )

    def expr(self) -> pl.Expr:
        """A polars filter on a canonical frame's ``metric`` column."""
        keep = pl.col("metric").is_in(sorted(self.names))
        for prefix in self.prefixes:
            keep = keep | pl.col("metric").str.starts_with(prefix)
        return keep


@dataclass(frozen=True)
class Series:
    """One metric: steps (int64, ascending) and values (float64, NaN/±inf kept)."""

    name: str
    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return int(self.steps.size)

    @cached_property
    def finite(self) -> np.ndarray:
        """Boolean mask of finite values."""
        mask: np.ndarray = np.isfinite(self.values)
        return mask

    @cached_property
    def interval(self) -> float:
        """Median spacing of the logged steps (the log interval), at least 1."""
        if self.steps.size < 2:
            return 1.0
        return max(float(np.median(np.diff(self.steps))), 1.0)

    def points(self, steps: float, *, minimum: int = 3) -> int:
        """How many logged points span ``steps`` steps."""
        return max(round(steps / self.interval), minimum)


@dataclass(frozen=True)
class RunView:
    """The series a diagnosis needs, keyed by canonical metric name."""

    series: dict[str, Series]
    first_step: int | None
    last_step: int | None
    mapping: dict[str, str] = field(default_factory=dict)
    #: the run's ``precision`` attribute (``fp16``, ``bf16`` ...), lower-case; None when unknown
    precision: str | None = None

    def get(self, metric: str) -> Series | None:
        """The metric's series, or None when absent or empty."""
        found = self.series.get(metric)
        return found if found is not None and len(found) else None

    def has(self, metric: str) -> bool:
        return self.get(metric) is not None

    @property
    def mismatch_metrics(self) -> list[str]:
        return sorted(m for m in self.series if is_mismatch(m))

    @property
    def interval(self) -> float:
        """The run's log interval: the median of its metrics' intervals (1 without data)."""
        found = [s.interval for s in self.series.values() if len(s) >= 2]
        return float(np.median(found)) if found else 1.0

    @property
    def span(self) -> int:
        """Steps between the first and the last logged step (at least 1)."""
        if self.first_step is None or self.last_step is None:
            return 1
        return max(self.last_step - self.first_step, 1)


def view(run: Run | RunView, reads: Reads | None = None) -> RunView:
    """Extract the metrics ``reads`` (default: what the diagnosis reads with its default
    settings) of ``run`` once (a :class:`RunView` passes through).

    >>> from proxydiag.frame import raw
    >>> from proxydiag.run.build import build_run
    >>> r = build_run(raw([1, 2, 2], ["loss", "loss", "grad_norm"], [1.0, float("nan"), 3.0]),
    ...               name="t", source="t", fmt="test")
    >>> v = view(r)
    >>> v.get("loss").values.tolist(), v.last_step
    ([1.0, nan], 2)
    """
    if isinstance(run, RunView):
        return run
    frame = run.frame
    if frame.height == 0:
        return RunView({}, None, None, dict(run.mapping), _precision(run))
    if reads is None:
        from proxydiag.diagnose.api import metrics_read

        reads = metrics_read()
    wanted = frame.filter(reads.expr()).select("metric", "step", "value")
    series: dict[str, Series] = {}
    if wanted.height:
        parts = wanted.sort("metric", "step").partition_by("metric", as_dict=True)
        for key, part in parts.items():
            name = str(key[0])
            steps = part["step"].to_numpy().astype(np.int64, copy=False)
            values = part["value"].to_numpy().astype(np.float64, copy=False)
            series[name] = Series(name, steps, values)
    bounds = frame.select(pl.col("step").min().alias("lo"), pl.col("step").max().alias("hi")).row(0)
    return RunView(series, int(bounds[0]), int(bounds[1]), dict(run.mapping), _precision(run))


def _precision(run: Run) -> str | None:
    value = run.attrs.get("precision")
    return str(value).strip().lower() if value is not None else None


def from_arrays(
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] | dict[str, tuple[list[int], list[float]]],
) -> RunView:
    """A view from ``{metric: (steps, values)}`` (for tests and synthetic series).

    >>> v = from_arrays({"grad_norm": ([0, 1, 2], [1.0, 1.1, float("inf")])})
    >>> v.span, v.get("grad_norm").interval
    (2, 1.0)
    """
    series: dict[str, Series] = {}
    for name, (steps, values) in arrays.items():
        s = np.asarray(steps, dtype=np.int64)
        v = np.asarray(values, dtype=np.float64)
        order = np.argsort(s, kind="stable")
        series[name] = Series(name, s[order], v[order])
    all_steps = [s.steps for s in series.values() if len(s)]
    if not all_steps:
        return RunView(series, None, None)
    return RunView(
        series,
        int(min(int(s[0]) for s in all_steps)),
        int(max(int(s[-1]) for s in all_steps)),
    )
