"""``proxydiag compare --full SOURCE [--full ...] --proxy SOURCE``: proxy fidelity."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from proxydiag.cli._app import ConfigOpt, FormatOpt, TrackingOpt, app, out
from proxydiag.cli._results import (
    Destination,
    LogToMlflowOpt,
    MlflowExperimentOpt,
    ResultStoreOpt,
    check_format,
    fail_classes,
    keep_comparison,
    load,
    load_one,
)


@app.command()
def compare(
    full: Annotated[list[str], typer.Option("--full", help="full run (repeat for seeds; the first is the reference)")],
    proxy: Annotated[str, typer.Option("--proxy", help="proxy run")],
    align: Annotated[str, typer.Option("--align", help="step | tokens | progress")] = "step",
    fmt: FormatOpt = "text",
    fail_on: Annotated[str | None, typer.Option("--fail-on", help="exit 1 on this verdict or worse: unfaithful | partial")] = None,
    config: ConfigOpt = None,
    store: ResultStoreOpt = None,
    log_to_mlflow: LogToMlflowOpt = False,
    mlflow_experiment: MlflowExperimentOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Score how faithfully a proxy reproduced the full run's dynamics and fault."""
    from proxydiag.diagnose.api import diagnose
    from proxydiag.fidelity.api import compare as run_compare
    from proxydiag.fidelity.config import FidelityConfig, load_config
    from proxydiag.report.comparison import markdown, text

    check_format(fmt)
    failing = fail_classes(fail_on, labels=False, verdicts=True)
    fulls = [run for source in full for run in load(source, store)]
    proxies = [load_one(proxy, store)]
    cfg = load_config(config) if config is not None else FidelityConfig()
    # diagnosed once here: the comparison and the report logged to MLflow both use them
    diagnoses = [diagnose(run) for run in [*fulls, proxies[0]]]
    result = run_compare(fulls, proxies[0], align=align, config=cfg,
                         full_diagnoses=diagnoses[:-1], proxy_diagnosis=diagnoses[-1])
    if fmt == "json":
        out.print(json.dumps(result.to_dict()), markup=False, soft_wrap=True)
    else:
        out.print(markdown(result, cfg) if fmt == "markdown" else text(result, cfg), markup=False)
    keep_comparison(result, fulls, proxies[0], diagnoses=diagnoses, to=Destination(
        store=store, mlflow=log_to_mlflow, experiment=mlflow_experiment, tracking_uri=tracking_uri))
    if result.verdict in failing:
        raise typer.Exit(1)
