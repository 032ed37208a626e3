"""The detector contract: one failure signature, found in a run's canonical frame.

A detector is a module with ``detect(run, cfg) -> list[Event]``: it reads the metrics it needs
from the run's view (``RunView``: per-metric series on the full data, NaN and ±inf kept), uses
only its own section of :class:`~proxydiag.diagnose.config.DiagnoseConfig`, and returns the
events it found (possibly none). It never labels the run: the taxonomy
(:mod:`proxydiag.diagnose.taxonomy`) turns every detector's events into a label, an onset and
a root cause. Detectors are listed in :data:`proxydiag.diagnose.api.DETECTORS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from proxydiag.diagnose._view import RunView
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.events import Event


@runtime_checkable
class Detector(Protocol):
    """Finds one kind of event in a run."""

    def detect(self, run: RunView, cfg: DiagnoseConfig) -> list[Event]: ...
