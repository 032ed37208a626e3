"""proxydiag: what went wrong in an RL post-training run, and did the proxy reproduce it.

>>> import proxydiag
>>> sorted(proxydiag.__all__)[:3]
['AliasTable', 'Comparison', 'Diagnosis']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proxydiag.diagnose.result import Diagnosis
from proxydiag.errors import ProxydiagError
from proxydiag.events import Event
from proxydiag.fidelity.recommend import ProxyCost, Recommendation, recommend
from proxydiag.fidelity.result import Comparison
from proxydiag.ingest import read_run, read_runs
from proxydiag.metrics import AliasTable
from proxydiag.run import Run

# bind the subpackage names now, so that the functions below keep these names after any
# later import of their modules (importing proxydiag.report.api would rebind proxydiag.report)
import proxydiag.report as _report_package  # noqa: F401  isort: skip

if TYPE_CHECKING:
    from proxydiag.store import RunStore

__version__ = "0.1.0"

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


def diagnose(run: Run, **kwargs: Any) -> Diagnosis:
    """Label a run healthy / gradient_overflow / loss_divergence / precision_fault."""
    from proxydiag.diagnose.api import diagnose as _diagnose

    return _diagnose(run, **kwargs)


def compare(full: Run | list[Run], proxy: Run, **kwargs: Any) -> Comparison:
    """Score how faithfully ``proxy`` reproduced the full run(s)."""
    from proxydiag.fidelity.api import compare as _compare

    return _compare(full, proxy, **kwargs)


def report(*args: Any, **kwargs: Any) -> Any:
    """Write an HTML/Markdown/JSON report (see :func:`proxydiag.report.api.report`)."""
    from proxydiag.report.api import report as _report

    return _report(*args, **kwargs)


def __getattr__(name: str) -> Any:
    if name == "RunStore":
        from proxydiag.store import RunStore

        return RunStore
    raise AttributeError(name)
