"""``proxydiag diagnose SOURCE...``: label each run with its failure class, onset and evidence.

Exit codes: 0 done; 1 when ``--fail-on`` matched a run's label; 2 bad input (one line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from proxydiag.cli._app import AliasesOpt, ConfigOpt, FormatOpt, TrackingOpt, app, err, out
from proxydiag.diagnose.result import LABELS, Diagnosis
from proxydiag.run import Run


@app.command()
def diagnose(
    sources: Annotated[list[str], typer.Argument(help="run paths, MLflow URIs, or run ids in --store")],
    fmt: FormatOpt = "text",
    fail_on: Annotated[
        str | None,
        typer.Option("--fail-on", help="exit 1 when a run is labelled so: CLASS[,CLASS] "
                                       "(gradient_overflow, loss_divergence, precision_fault)"),
    ] = None,
    config: ConfigOpt = None,
    aliases: AliasesOpt = None,
    store: Annotated[Path | None, typer.Option("--store", help="store: resolve run ids, keep the diagnoses")] = None,
    log_to_mlflow: Annotated[bool, typer.Option("--log-to-mlflow", help="log each diagnosis to its MLflow run")] = False,
    mlflow_experiment: Annotated[str | None, typer.Option("--mlflow-experiment", help="experiment for runs not from MLflow")] = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Label each run healthy / gradient_overflow / loss_divergence / precision_fault."""
    from proxydiag.diagnose.api import diagnose as run_diagnose
    from proxydiag.diagnose.config import DiagnoseConfig, load_config
    from proxydiag.diagnose.render import markdown, text

    if fmt not in ("text", "json", "markdown"):
        raise typer.BadParameter(f"--format {fmt!r}: use text, json or markdown")
    failing = _fail_classes(fail_on)
    cfg = load_config(config) if config is not None else DiagnoseConfig()
    matched = False
    for source in sources:
        for run in _load(source, store, aliases):
            d = run_diagnose(run, config=cfg, source=source)
            if fmt == "json":
                out.print(json.dumps(d.to_dict()), markup=False, soft_wrap=True, highlight=False)
            else:
                out.print(markdown(d) if fmt == "markdown" else text(d), markup=False)
                out.print("")
            _keep(d, run, store=store, mlflow=log_to_mlflow, experiment=mlflow_experiment,
                  tracking_uri=tracking_uri)
            matched = matched or d.label in failing
    if matched:
        raise typer.Exit(1)


def _fail_classes(fail_on: str | None) -> frozenset[str]:
    if fail_on is None:
        return frozenset()
    classes = frozenset(c.strip() for c in fail_on.split(",") if c.strip())
    unknown = sorted(classes - set(LABELS))
    if unknown or not classes:
        raise typer.BadParameter(
            f"--fail-on {fail_on!r}: unknown class {', '.join(unknown) or '(none)'}; "
            f"use one or more of {', '.join(LABELS)}"
        )
    return classes


def _load(source: str, store: Path | None, aliases: Path | None) -> list[Run]:
    from proxydiag.sources import load

    options = {"aliases": aliases} if aliases is not None else {}
    return load(source, store=store, **options)


def _keep(d: Diagnosis, run: Run, *, store: Path | None, mlflow: bool, experiment: str | None,
          tracking_uri: str | None) -> None:
    """Save to the store first (nothing is lost if MLflow is down), then log to MLflow."""
    run_store = None
    if store is not None:
        from proxydiag.store import RunStore

        run_store = RunStore(store)
        run_store.put_diagnosis(d)
    if mlflow:
        from proxydiag.mlflow_sink import log_diagnosis

        mlflow_id = log_diagnosis(d, run, report_html=_report(d, run), tracking_uri=tracking_uri,
                                  experiment=experiment, store=run_store)
        err.print(f"logged to MLflow run {mlflow_id}", markup=False)


def _report(d: Diagnosis, run: Run) -> str | None:
    """The HTML report for the MLflow artifact, when the report module is available."""
    from proxydiag.errors import ProxydiagError

    try:
        from proxydiag.report.api import report
    except ImportError:
        return None
    try:
        return str(report(runs=[run], diagnoses=[d], fmt="html"))
    except ProxydiagError:
        return None
