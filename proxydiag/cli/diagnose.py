"""``proxydiag diagnose SOURCE...``: label each run with its failure class, onset and evidence.

Exit codes: 0 done; 1 when ``--fail-on`` matched a run's label; 2 bad input (one line).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from proxydiag.cli._app import AliasesOpt, ConfigOpt, FormatOpt, TrackingOpt, app, out
from proxydiag.cli._results import (
    Destination,
    LogToMlflowOpt,
    MlflowExperimentOpt,
    ResultStoreOpt,
    check_format,
    fail_classes,
    keep_diagnosis,
    load,
)


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
    store: ResultStoreOpt = None,
    log_to_mlflow: LogToMlflowOpt = False,
    mlflow_experiment: MlflowExperimentOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Label each run healthy / gradient_overflow / loss_divergence / precision_fault."""
    from proxydiag.diagnose.api import diagnose as run_diagnose
    from proxydiag.diagnose.config import DiagnoseConfig, load_config
    from proxydiag.report.diagnosis import markdown, text

    check_format(fmt)
    failing = fail_classes(fail_on, labels=True, verdicts=False)
    cfg = load_config(config) if config is not None else DiagnoseConfig()
    to = Destination(store=store, mlflow=log_to_mlflow, experiment=mlflow_experiment,
                     tracking_uri=tracking_uri)
    matched = False
    for source in sources:
        for run in load(source, store, aliases):
            d = run_diagnose(run, config=cfg, source=source)
            if fmt == "json":
                out.print(json.dumps(d.to_dict()), markup=False, soft_wrap=True, highlight=False)
            else:
                out.print(markdown(d) if fmt == "markdown" else text(d), markup=False)
                out.print("")
            keep_diagnosis(d, run, to=to)
            matched = matched or d.label in failing
    if matched:
        raise typer.Exit(1)
