"""The aligner contract: the x axis runs are compared on.

An aligner is a module with ``NAME``, ``RANGE`` (``"overlap"``: compare where the runs
overlap on the axis; ``"progress"``: each run spans [0, 1]) and ``axis(run) -> Axis`` (the
run's position on the axis at each of its steps). Aligners are listed in
:data:`proxydiag.align.grid.ALIGNERS`; ``compare --align NAME`` picks one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from proxydiag.align.axis import Axis
    from proxydiag.run import Run


@runtime_checkable
class Aligner(Protocol):
    """Maps a run's steps to a common axis."""

    NAME: str
    RANGE: str

    def axis(self, run: Run) -> Axis: ...
