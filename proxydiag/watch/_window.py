"""The offline detectors and taxonomy, run on the watcher's bounded memory of a run.

The watcher does not have its own copy of the failure rules: when a cheap trigger fires it runs
exactly the detectors of :func:`proxydiag.diagnose.api.diagnose` (same
:class:`~proxydiag.diagnose.config.DiagnoseConfig`, same thresholds) on a
:class:`~proxydiag.diagnose._view.RunView` made of the points it holds (head, thinned history,
recent window; see :mod:`proxydiag.watch.buffers`). The cost is bounded by the memory, not by
the run's length.
"""

from __future__ import annotations

from collections.abc import Mapping

from proxydiag.diagnose._view import USED, RunView, Series
from proxydiag.diagnose.api import DETECTORS
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.contract import Detector
from proxydiag.diagnose.taxonomy import Verdict, classify
from proxydiag.metrics import is_mismatch
from proxydiag.watch.buffers import MetricBuffer

#: detectors whose events never decide a label: ``drift`` reports slow drift, stalls and
#: throughput drops as ``info`` (context; the taxonomy reads critical and warning events),
#: and its Theil-Sen fits were half of a re-fit's cost. The final diagnosis runs it.
CONTEXT_ONLY = frozenset({"drift"})


def detectors() -> list[Detector]:
    """The offline detectors that can decide a label, in the offline order."""
    return [DETECTORS[name] for name in DETECTORS.names() if name not in CONTEXT_ONLY]


def used(metric: str) -> bool:
    """True for the canonical metrics the detectors read.

    >>> used("grad_norm"), used("mismatch_kl"), used("throughput_tokens")
    (True, True, False)
    """
    return metric in USED or is_mismatch(metric)


def window_view(
    buffers: Mapping[str, MetricBuffer],
    *,
    first_step: int | None,
    last_step: int | None,
    precision: str | None,
    mapping: Mapping[str, str],
) -> RunView:
    """A run view of the held points of the used metrics."""
    series = {}
    for name, buf in buffers.items():
        if used(name) and buf.size:
            steps, values = buf.arrays()
            series[name] = Series(name, steps, values)
    return RunView(series, first_step, last_step, dict(mapping), precision)


def verdict(rv: RunView, cfg: DiagnoseConfig) -> Verdict:
    """The offline detectors (but :data:`CONTEXT_ONLY`), then the taxonomy, on ``rv``."""
    events = [e for module in detectors() for e in module.detect(rv, cfg)]
    return classify(events, rv, cfg)
