"""``proxydiag compare --full SOURCE [--full ...] --proxy SOURCE``: proxy fidelity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from proxydiag.cli._app import ConfigOpt, FormatOpt, TrackingOpt, app, err, out
from proxydiag.errors import AnalysisError, ProxydiagError
from proxydiag.run import Run

#: --fail-on VERDICT exits 1 on that verdict or a worse one
FAIL_ON = {"unfaithful": ("unfaithful",), "partial": ("partial", "unfaithful")}


@app.command()
def compare(
    full: Annotated[list[str], typer.Option("--full", help="full run (repeat for seeds; the first is the reference)")],
    proxy: Annotated[str, typer.Option("--proxy", help="proxy run")],
    align: Annotated[str, typer.Option("--align", help="step | tokens | progress")] = "step",
    fmt: FormatOpt = "text",
    fail_on: Annotated[str | None, typer.Option("--fail-on", help="exit 1 on this verdict or worse: unfaithful | partial")] = None,
    config: ConfigOpt = None,
    store: Annotated[Path | None, typer.Option("--store", help="store: resolve run ids, keep the comparison")] = None,
    log_to_mlflow: Annotated[bool, typer.Option("--log-to-mlflow", help="log the result to the proxy's MLflow run")] = False,
    mlflow_experiment: Annotated[str | None, typer.Option("--mlflow-experiment", help="experiment for runs not from MLflow")] = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Score how faithfully a proxy reproduced the full run's dynamics and fault."""
    from proxydiag.fidelity.api import compare as run_compare
    from proxydiag.fidelity.config import FidelityConfig, load_config
    from proxydiag.fidelity.render import markdown, text

    if fmt not in ("text", "json", "markdown"):
        raise typer.BadParameter(f"--format {fmt!r}: use text, json or markdown")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise typer.BadParameter(f"--fail-on {fail_on!r}: use unfaithful or partial")
    fulls = [run for source in full for run in _load(source, store)]
    proxies = _load(proxy, store)
    if len(proxies) != 1:
        raise AnalysisError(f"{proxy}: holds {len(proxies)} runs; pass exactly one proxy run")
    cfg = load_config(config) if config is not None else FidelityConfig()
    result = run_compare(fulls, proxies[0], align=align, config=cfg)
    if fmt == "json":
        out.print(json.dumps(result.to_dict()), markup=False, soft_wrap=True)
    else:
        out.print(markdown(result, cfg) if fmt == "markdown" else text(result, cfg), markup=False)
    _keep(result, fulls, proxies[0], store=store, mlflow=log_to_mlflow,
          experiment=mlflow_experiment, tracking_uri=tracking_uri)
    if fail_on is not None and result.verdict in FAIL_ON[fail_on]:
        raise typer.Exit(1)


def _load(source: str, store: Path | None) -> list[Run]:
    from proxydiag.sources import load

    return load(source, store=store)


def _keep(result: Any, fulls: list[Run], proxy: Run, *, store: Path | None, mlflow: bool,
          experiment: str | None, tracking_uri: str | None) -> None:
    """Save to the store first (nothing is lost if MLflow is down), then log to MLflow."""
    run_store = None
    if store is not None:
        from proxydiag.store import RunStore

        run_store = RunStore(store)
        if not mlflow:
            run_store.put_comparison(result)
    if mlflow:
        from proxydiag.mlflow_sink import log_comparison

        mlflow_id = log_comparison(result, proxy, fulls, report_html=_report(result, fulls, proxy),
                                   tracking_uri=tracking_uri, experiment=experiment, store=run_store)
        err.print(f"logged to MLflow run {mlflow_id}", markup=False)


def _report(result: Any, fulls: list[Run], proxy: Run) -> str | None:
    try:
        from proxydiag.report.api import report
    except ImportError:
        return None
    try:
        return str(report(full=fulls, proxy=proxy, comparison=result, fmt="html"))
    except ProxydiagError:
        return None
