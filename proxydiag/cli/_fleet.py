"""The options every fleet command shares: where its work runs, and ``--force``.

``--workers N`` runs work items in N local processes (1, the default, runs them in this
process: the behaviour of a single command); ``--ray`` runs them as Ray tasks, on a local Ray
or, with ``--ray-address auto``, on the cluster this node belongs to. Results and stdout are
the same whichever runs them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

import typer

from proxydiag.cli._app import err
from proxydiag.fleet.executor import Executor, failure_line, make_executor

WorkersOpt = Annotated[
    int,
    typer.Option(
        "--workers", min=1, help="local worker processes for the fleet's work items (1: in-process)"
    ),
]
RayOpt = Annotated[
    bool, typer.Option("--ray", help="run the work items as Ray tasks (needs proxydiag[ray])")
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to join with --ray: 'auto', or ray://HOST:PORT "
        "(default: start a local Ray)",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="redo work whose inputs are unchanged since it was last stored"),
]


@dataclass(frozen=True)
class Fleet:
    """Where a command's work items run: ``--workers``, ``--ray`` and ``--ray-address``, an
    option group (:func:`proxydiag.cli._groups.grouped`)."""

    workers: WorkersOpt = 1
    ray: RayOpt = False
    ray_address: RayAddressOpt = None

    def executor(self) -> Executor:
        """The executor the flags ask for (a bad combination is a one-line usage error)."""
        return make_executor(workers=self.workers, ray=self.ray, ray_address=self.ray_address)


def report_failures(failures: Iterable[tuple[str, str]]) -> int:
    """One ``error: SOURCE: REASON`` line on stderr per failed item; returns how many."""
    count = 0
    for source, reason in failures:
        err.print(f"error: {failure_line(source, reason)}", markup=False)
        count += 1
    return count
