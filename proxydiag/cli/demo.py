"""``proxydiag demo``: ingest sample_runs/, diagnose, compare, report, dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from proxydiag.cli._app import DEFAULT_STORE, app, err, out


@app.command()
def demo(
    store: Annotated[
        Path,
        typer.Option("--store", help="store to (re)create; an existing store there is replaced"),
    ] = DEFAULT_STORE,
    samples: Annotated[
        Path | None,
        typer.Option(
            "--samples", help="folder of runs (default: ./sample_runs or the repository's)"
        ),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="where the report goes")] = Path(
        "demo-out"
    ),
) -> None:
    """The whole pipeline on the sample runs, with a summary table and the report's path."""
    from proxydiag.cli.demo_pipeline import run_demo

    result = run_demo(samples=samples, store_path=store, out_dir=output)
    names = {r.id: r.name for r in result.runs}
    runs = Table("run", "role", "label", "onset", title=f"{len(result.runs)} runs in {store}")
    for run in result.runs:
        d = result.diagnoses.get(run.id)
        runs.add_row(
            run.name,
            str(run.attrs.get("role") or ""),
            d.label if d else "-",
            "" if d is None or d.onset_step is None else str(d.onset_step),
        )
    out.print(runs)
    if result.comparisons:
        table = Table("proxy", "fidelity", "verdict", title="proxies vs their full runs")
        for c in result.comparisons:
            table.add_row(names.get(c.proxy_run, c.proxy_run), f"{c.fidelity:.2f}", c.verdict)
        out.print(table)
    for why in result.unavailable.values():
        err.print(f"({why})", markup=False)
    if result.report:
        out.print(f"report: {result.report}", markup=False)
    if result.dashboard:
        out.print(f"dashboard: {result.dashboard}", markup=False)
