"""Alignment of full runs and a proxy: by step, tokens/samples or relative progress; resampling
onto a common grid at a documented resolution; the seed-noise baseline."""

from __future__ import annotations

from proxydiag.align.alignment import ALIGNERS, Alignment, align_runs
from proxydiag.align.axis import Axis
from proxydiag.align.grid import Grid, MetricGrid, build_grid, resample_grid

__all__ = [
    "ALIGNERS",
    "Alignment",
    "Axis",
    "Grid",
    "MetricGrid",
    "align_runs",
    "build_grid",
    "resample_grid",
]
