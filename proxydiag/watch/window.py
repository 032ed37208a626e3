"""The offline detectors and taxonomy, run on the watcher's bounded memory of a run.

The watcher does not have its own copy of the failure rules: when a cheap trigger fires it runs
exactly the detectors of :func:`proxydiag.diagnose.api.diagnose` (same
:class:`~proxydiag.diagnose.config.DiagnoseConfig`, same thresholds) on a
:class:`~proxydiag.diagnose.view.RunView` made of the points it holds (head, thinned history,
recent window; see :mod:`proxydiag.watch.buffers`). The cost is bounded by the memory, not by
the run's length.
"""

from __future__ import annotations

from collections.abc import Mapping

from proxydiag.diagnose.api import DETECTORS, metrics_read
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.contract import Detector
from proxydiag.diagnose.taxonomy import Verdict, classify
from proxydiag.diagnose.view import Reads, RunView, Series
from proxydiag.watch.buffers import MetricBuffer


def detectors() -> list[Detector]:
    """The offline detectors that can decide a label (``DECIDES``), in the offline order.

    A context-only detector (``drift``: slow drift, stalls and throughput drops as ``info``
    events, which the taxonomy never reads for a label, and half of a re-fit's cost with its
    Theil-Sen fits) runs in the final diagnosis only.
    """
    return [d for d in DETECTORS if d.DECIDES]


def window_view(
    buffers: Mapping[str, MetricBuffer],
    *,
    first_step: int | None,
    last_step: int | None,
    precision: str | None,
    mapping: Mapping[str, str],
    reads: Reads | None = None,
) -> RunView:
    """A run view of the held points of the metrics ``reads`` (default: what the diagnosis
    reads with its default settings)."""
    reads = reads if reads is not None else metrics_read()
    series = {}
    for name, buf in buffers.items():
        if name in reads and buf.size:
            steps, values = buf.arrays()
            series[name] = Series(name, steps, values)
    return RunView(series, first_step, last_step, dict(mapping), precision)


def verdict(rv: RunView, cfg: DiagnoseConfig) -> Verdict:
    """The offline detectors that decide labels (:func:`detectors`), then the taxonomy."""
    events = [e for module in detectors() for e in module.detect(rv, cfg)]
    return classify(events, rv, cfg)
