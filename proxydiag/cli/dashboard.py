"""``proxydiag dashboard``: a static fleet dashboard from the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import DEFAULT_STORE, ConfigOpt, StoreOpt, app, out, output_dir
from proxydiag.cli._fleet import Fleet
from proxydiag.cli._groups import command
from proxydiag.errors import StoreError


@command(app)
def dashboard(
    store: StoreOpt = DEFAULT_STORE,
    output: Annotated[Path, typer.Option("--output", "-o", help="directory to write")] = Path(
        "dashboard"
    ),
    analyse: Annotated[
        bool,
        typer.Option(
            "--analyse/--no-analyse",
            help="diagnose/compare in memory what the store has no result for",
        ),
    ] = True,
    config: ConfigOpt = None,
    fleet: Fleet = Fleet(),
) -> None:
    """Every run's label and key metrics, every proxy's fidelity, fidelity vs pruning and cost."""
    from proxydiag.pipeline import Settings
    from proxydiag.report.dashboard import write_dashboard

    if not store.is_dir():
        raise StoreError(
            f"{store}: no store here; ingest runs first (proxydiag ingest ... "
            "--store DIR) or pass --store DIR"
        )
    settings = Settings.load(config)
    pool = fleet.executor()
    index = write_dashboard(
        store, output_dir(output), analyse=analyse, executor=pool, settings=settings
    )
    out.print(str(index), markup=False)
