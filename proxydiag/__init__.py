"""proxydiag: what went wrong in an RL post-training run, and did the proxy reproduce it.

The public API: read runs (:func:`read_run`, :func:`read_runs`), label them (:func:`diagnose`),
score a proxy against its full runs (:func:`compare`), write a report (:func:`report`), keep runs
and results (:class:`RunStore`). ``docs/architecture.md`` maps the rest.

>>> import proxydiag
>>> sorted(proxydiag.__all__)[:3]
['AliasTable', 'Comparison', 'Diagnosis']
"""

from __future__ import annotations

from proxydiag._version import __version__

# The functions diagnose, compare and report share their names with the subpackages that hold
# them: importing each function binds the name to the function after its package was imported
# (a later import of a submodule sets attributes on the package, not on this module).
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
