"""The HTML shell: one self-contained file with plotly.js embedded exactly once.

Figures are collected in a :class:`FigureSet`; each becomes an empty ``<div>`` in the body and
one entry of a JSON array (``<script type="application/json">``) that a small boot script hands
to ``Plotly.newPlot``. Templates are plain ``string.Template`` files in ``templates/``
(no Jinja): substituted values are never re-scanned, so plotly.js's own ``$`` are harmless.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from string import Template

import plotly.graph_objects as go

from proxydiag.report._escape import script_json

PACKAGE = "proxydiag.report"


@cache
def template_text(name: str) -> str:
    """A template shipped inside the package (``proxydiag/report/templates/<name>``)."""
    return resources.files(PACKAGE).joinpath("templates", name).read_text(encoding="utf-8")


@cache
def plotly_js() -> str:
    """plotly.js as bundled with the installed plotly (offline, no CDN)."""
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


class FigureSet:
    """Figures of one page, in order; :meth:`div` places one and returns its container."""

    def __init__(self) -> None:
        self._figs: list[tuple[str, str]] = []

    def __len__(self) -> int:
        return len(self._figs)

    def div(self, fig: go.Figure, *, css_class: str = "plot") -> str:
        fig_id = f"fig-{len(self._figs)}"
        self._figs.append((fig_id, fig.to_json(validate=False, engine="json")))
        # the container reserves the figure's height, so the page does not jump or overlap
        height = f' style="height:{int(fig.layout.height)}px"' if fig.layout.height else ""
        return f'<div class="{css_class}" id="{fig_id}"{height}></div>'

    def json(self) -> str:
        body = ",".join(f'{{"id":{json.dumps(i)},"fig":{f}}}' for i, f in self._figs)
        return script_json(f"[{body}]")


def render(template: str, *, figures: FigureSet, **parts: str) -> str:
    """Fill ``template`` with escaped-already ``parts``, the figures, CSS and plotly.js."""
    from proxydiag._version import __version__

    return Template(template_text(template)).substitute(
        style=template_text("style.css"),
        boot=template_text("boot.js"),
        plotlyjs=plotly_js(),
        figures=figures.json(),
        version=__version__,
        **parts,
    )
