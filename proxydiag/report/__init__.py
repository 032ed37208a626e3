"""Outputs: the HTML/Markdown/JSON report, figures, notebook reprs and the fleet dashboard.

``proxydiag.report(...)`` is a function of the top-level package, but importing any module of
this package (``proxydiag.report.api``, or :mod:`proxydiag.plot`) binds the *package* to the
name ``proxydiag.report``. So the package itself is callable and does what the function does:
``proxydiag.report(full=..., proxy=...)`` works whatever was imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> str:
        from proxydiag.report.api import report

        return report(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
