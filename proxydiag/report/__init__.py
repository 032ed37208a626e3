"""Outputs: the HTML/Markdown/JSON report, figures, notebook reprs and the fleet dashboard.

The top-level function :func:`proxydiag.report` shares this package's name; the package is
imported by ``proxydiag/__init__.py`` before that function is defined, so later imports of
its modules (``proxydiag.report.api``, :mod:`proxydiag.report.plot`) leave the function in place —
the same way ``proxydiag.diagnose`` and ``proxydiag.compare`` work.
"""

# results render in notebooks through the renderers this module registers
from proxydiag.report import notebook as _notebook  # noqa: F401
