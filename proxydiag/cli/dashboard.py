"""``proxydiag dashboard``: a static fleet dashboard from the store."""

from __future__ import annotations

from pathlib import Path

from proxydiag.cli._app import app, out, output_dir
from proxydiag.cli._groups import command
from proxydiag.cli._options import (
    DEFAULT_STORE,
    AnalyseOpt,
    ConfigOpt,
    Fleet,
    OutputOpt,
    StoreOpt,
)
from proxydiag.errors import StoreError


@command(app)
def dashboard(
    store: StoreOpt = DEFAULT_STORE,
    output: OutputOpt = Path("dashboard"),
    analyse: AnalyseOpt = True,
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
