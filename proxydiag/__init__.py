"""proxydiag: what went wrong in an RL post-training run, and did the proxy reproduce it.

The public API: read runs (:func:`read_run`, :func:`read_runs`), label them (:func:`diagnose`),
score a proxy against its full runs (:func:`compare`), write a report (:func:`report`), keep runs
and results (:class:`RunStore`). ``docs/architecture.md`` maps the rest.

>>> import proxydiag
>>> sorted(proxydiag.__all__)[:3]
['AliasTable', 'Comparison', 'Diagnosis']
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from proxydiag._version import __version__

if TYPE_CHECKING:
    from proxydiag.diagnose.api import diagnose
    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.errors import ProxydiagError
    from proxydiag.events import Event
    from proxydiag.fidelity.api import compare
    from proxydiag.fidelity.recommend import ProxyCost, Recommendation, recommend
    from proxydiag.fidelity.result import Comparison
    from proxydiag.ingest import read_run, read_runs
    from proxydiag.metrics import AliasTable
    from proxydiag.report.api import report
    from proxydiag.run import Run
    from proxydiag.store import RunStore

#: the public API, imported on first use (``import proxydiag`` and ``proxydiag --help`` load no
#: analysis library): name -> the module that defines it
_API = {
    "AliasTable": "proxydiag.metrics",
    "Comparison": "proxydiag.fidelity.result",
    "Diagnosis": "proxydiag.diagnose.result",
    "Event": "proxydiag.events",
    "ProxyCost": "proxydiag.fidelity.recommend",
    "ProxydiagError": "proxydiag.errors",
    "Recommendation": "proxydiag.fidelity.recommend",
    "Run": "proxydiag.run",
    "RunStore": "proxydiag.store",
    "compare": "proxydiag.fidelity.api",
    "diagnose": "proxydiag.diagnose.api",
    "read_run": "proxydiag.ingest",
    "read_runs": "proxydiag.ingest",
    "recommend": "proxydiag.fidelity.recommend",
    "report": "proxydiag.report.api",
}


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'proxydiag' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


class _Package(types.ModuleType):
    """``proxydiag.diagnose`` and ``proxydiag.report`` are the functions, whichever of them or
    of their subpackages is imported first: importing a subpackage does not rebind the name."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and isinstance(value, types.ModuleType):
            return  # the subpackage stays in sys.modules, reachable by its dotted name
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "AliasTable",
    "Comparison",
    "Diagnosis",
    "Event",
    "ProxyCost",
    "ProxydiagError",
    "Recommendation",
    "Run",
    "RunStore",
    "__version__",
    "compare",
    "diagnose",
    "read_run",
    "read_runs",
    "recommend",
    "report",
]
