"""Rich display of results without the results knowing their renderer.

Results (``Diagnosis``, ``Comparison``) sit in the analysis layer and may not import the
outputs; Jupyter still asks them for ``_repr_html_``. The output layer registers one renderer
per result type here (:mod:`proxydiag.report.notebook` does at import); a result's
``_repr_html_`` asks :func:`html`, which imports the modules named in :data:`RENDERER_MODULES`
on its first call (the way registries import their plug-ins on first use), so a result shown
before anything imported the report still renders, and importing proxydiag loads no plotting.

>>> class Box:
...     pass
>>> register_html(Box, lambda b: "<b>box</b>")
>>> html(Box())
'<b>box</b>'
>>> html(3)
'<pre>3</pre>'
"""

from __future__ import annotations

import html as _html
import importlib
from collections.abc import Callable
from typing import Any

_RENDERERS: dict[type, Callable[[Any], str]] = {}
#: modules that register renderers when imported (dotted paths, imported on first use)
RENDERER_MODULES: list[str] = ["proxydiag.report.notebook"]


def register_html(cls: type, render: Callable[[Any], str]) -> None:
    """Render instances of ``cls`` (and its subclasses) with ``render``."""
    _RENDERERS[cls] = render


def html(obj: object) -> str:
    """``obj`` as an HTML fragment: its registered renderer, else its escaped ``repr``."""
    while RENDERER_MODULES:
        importlib.import_module(RENDERER_MODULES.pop(0))
    for cls in type(obj).__mro__:
        render = _RENDERERS.get(cls)
        if render is not None:
            return render(obj)
    return f"<pre>{_html.escape(repr(obj))}</pre>"
