"""Outputs: the HTML/Markdown/JSON report, figures, notebook reprs and the fleet dashboard.

The top-level function :func:`proxydiag.report` shares this package's name; importing this
package or its modules never rebinds ``proxydiag.report`` (``proxydiag/__init__.py``), the same
way ``proxydiag.diagnose`` works. Notebook renderers (:mod:`proxydiag.report.notebook`) are
imported by :func:`proxydiag.display.html` on first use.
"""
