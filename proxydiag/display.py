"""Rich display of results without the results knowing their renderer.

Results (``Diagnosis``, ``Comparison``) sit in the analysis layer and may not import the
outputs; Jupyter still asks them for ``_repr_html_``. The output layer registers one renderer
per result type here (:mod:`proxydiag.report.notebook` does at import, and ``import proxydiag``
imports it); a result's ``_repr_html_`` asks :func:`html`.

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
from collections.abc import Callable
from typing import Any

_RENDERERS: dict[type, Callable[[Any], str]] = {}


def register_html(cls: type, render: Callable[[Any], str]) -> None:
    """Render instances of ``cls`` (and its subclasses) with ``render``."""
    _RENDERERS[cls] = render


def html(obj: object) -> str:
    """``obj`` as an HTML fragment: its registered renderer, else its escaped ``repr``."""
    for cls in type(obj).__mro__:
        render = _RENDERERS.get(cls)
        if render is not None:
            return render(obj)
    return f"<pre>{_html.escape(repr(obj))}</pre>"
