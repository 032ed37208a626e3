"""Alignment of full runs and a proxy: by step, tokens/samples or relative progress; resampling
onto a common grid at a documented resolution; the seed-noise baseline."""

from __future__ import annotations

from proxydiag.align.axis import Axis
from proxydiag.align.grid import ALIGNERS, Grid, MetricGrid, build_grid

__all__ = ["ALIGNERS", "Axis", "Grid", "MetricGrid", "build_grid"]
