"""Print a rich renderable (a table) to stdout without squeezing it into 80 columns.

When stdout is not a terminal (a pipe, a CI log) rich assumes 80 columns and truncates table
cells; run ids and metric keys must come out whole, so tables get a wide page there.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from proxydiag.cli._app import out

#: columns used when stdout is not a terminal
PIPE_WIDTH = 240


def show(renderable: RenderableType) -> None:
    """Print ``renderable`` on stdout, PIPE_WIDTH columns wide when not on a terminal."""
    if out.is_terminal:
        out.print(renderable)
        return
    width = out.width
    out.width = PIPE_WIDTH
    try:
        out.print(renderable)
    finally:
        out.width = width


def cell(value: object) -> Text:
    """A table cell shown literally: run names and metric keys are user data, and rich would
    otherwise read ``[red]`` or ``[/b]`` in them as markup (or fail on it)."""
    return Text("" if value is None else str(value))
