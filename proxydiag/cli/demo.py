"""``proxydiag demo``: ingest sample_runs/, diagnose, compare, report, dashboard."""

from __future__ import annotations

from pathlib import Path

from proxydiag.cli._app import app, err, out
from proxydiag.cli._options import DEFAULT_STORE, OutputOpt, SamplesOpt, StoreOpt


@app.command()
def demo(
    store: StoreOpt = DEFAULT_STORE,
    samples: SamplesOpt = None,
    output: OutputOpt = Path("demo-out"),
) -> None:
    """The whole pipeline on the sample runs, with a summary table and the report's path.

    The store at --store is (re)created: an existing store there is replaced. The report and
    the dashboard go into --output.
    """
    from rich.table import Table

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
