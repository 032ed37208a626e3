"""``proxydiag diagnose SOURCE...`` (or ``--store DIR --all``): label each run with its failure
class, onset and evidence; ``--workers N`` or ``--ray`` spread the runs over processes or Ray.

Exit codes: 0 done; 1 when ``--fail-on`` matched a run's label; 2 bad input (one line).
"""

from __future__ import annotations

from typing import Annotated

import typer

from proxydiag.cli._app import AliasesOpt, ConfigOpt, FormatOpt, TrackingOpt, app
from proxydiag.cli._fleet import ForceOpt, RayAddressOpt, RayOpt, WorkersOpt, executor
from proxydiag.cli._fleet_results import existing, source_diagnoses, stored_diagnoses
from proxydiag.cli._results import (
    Destination,
    LogToMlflowOpt,
    MlflowExperimentOpt,
    ResultStoreOpt,
    check_format,
    fail_classes,
)


@app.command()
def diagnose(
    sources: Annotated[
        list[str] | None, typer.Argument(help="run paths, MLflow URIs, or run ids in --store")
    ] = None,
    fmt: FormatOpt = "text",
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="exit 1 when a run is labelled so: CLASS[,CLASS] "
            "(gradient_overflow, loss_divergence, precision_fault)",
        ),
    ] = None,
    config: ConfigOpt = None,
    aliases: AliasesOpt = None,
    store: ResultStoreOpt = None,
    log_to_mlflow: LogToMlflowOpt = False,
    mlflow_experiment: MlflowExperimentOpt = None,
    tracking_uri: TrackingOpt = None,
    every: Annotated[
        bool,
        typer.Option("--all", help="diagnose every run in --store (and keep the results there)"),
    ] = False,
    workers: WorkersOpt = 1,
    ray: RayOpt = False,
    ray_address: RayAddressOpt = None,
    force: ForceOpt = False,
) -> None:
    """Label each run healthy / gradient_overflow / loss_divergence / precision_fault.

    With ``--store DIR --all``, every stored run; a result already kept for the same run
    content, configuration and proxydiag version is reused unless ``--force``.
    """
    from proxydiag.diagnose.config import DiagnoseConfig, load_config

    check_format(fmt)
    failing = fail_classes(fail_on, labels=True, verdicts=False)
    cfg = load_config(config) if config is not None else DiagnoseConfig()
    pool = executor(workers, ray, ray_address)
    if every == bool(sources) or (every and store is None):
        raise typer.BadParameter("give SOURCE..., or --store DIR --all (one of them)")
    if every:
        if log_to_mlflow:
            raise typer.BadParameter(
                "--all keeps results in --store; `proxydiag mlflow sync` logs them to MLflow"
            )
        from proxydiag.fleet.analyse import diagnose_all

        assert store is not None
        results = diagnose_all(existing(store), executor=pool, config=cfg, force=force)
        stored_diagnoses(results, fmt=fmt, failing=failing).finish()
        return
    to = Destination(
        store=store, mlflow=log_to_mlflow, experiment=mlflow_experiment, tracking_uri=tracking_uri
    )
    source_diagnoses(
        list(sources or []),
        pool=pool,
        config=cfg,
        store=store,
        aliases=aliases,
        to=to,
        fmt=fmt,
        failing=failing,
    ).finish()
