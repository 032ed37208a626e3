"""The detector contract: one failure signature, found in a run's canonical frame.

A detector is a module with ``detect(run, cfg) -> list[Event]``: it reads the metrics it needs
from the run's view (:class:`~proxydiag.diagnose.view.RunView`: per-metric series on the full
data, NaN and ±inf kept), uses only its own section of
:class:`~proxydiag.diagnose.config.DiagnoseConfig`, and returns the events it found (possibly
none). It never labels the run: the taxonomy (:mod:`proxydiag.diagnose.taxonomy`) turns every
detector's events into a label, an onset and a root cause. Detectors are listed in
:data:`proxydiag.diagnose.api.DETECTORS`.

A detector declares what it reads, ``reads(cfg)``: canonical metric names, a name ending in
``*`` standing for every metric with that prefix. The run view, offline and in the watcher's
memory, holds exactly the metrics the registered detectors and the taxonomy declare: a metric
a detector reads without declaring it is absent from its view (``tests/diagnose`` checks every
read is declared). ``DECIDES`` says whether its events can decide a label (False: they only
add context, ``info`` events; the watcher runs such a detector for the final diagnosis only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from proxydiag.diagnose.config import DiagnoseConfig
    from proxydiag.diagnose.view import RunView
    from proxydiag.events import Event


@runtime_checkable
class Detector(Protocol):
    """Finds one kind of event in a run."""

    #: its name in :data:`proxydiag.diagnose.api.DETECTORS`
    NAME: str
    #: whether its events can decide a label (False: context only)
    DECIDES: bool

    def reads(self, cfg: DiagnoseConfig) -> tuple[str, ...]: ...

    def detect(self, run: RunView, cfg: DiagnoseConfig) -> list[Event]: ...
