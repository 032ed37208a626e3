"""``proxydiag mlflow sync``: push stored results that MLflow has not accepted yet."""

from __future__ import annotations

import typer

from proxydiag.cli._app import err, out, sub_app
from proxydiag.cli._options import (
    DEFAULT_STORE,
    FilterOpt,
    MlflowExperimentOpt,
    StoreOpt,
    TrackingOpt,
)

mlflow_app = sub_app("mlflow", "MLflow: push stored diagnoses and comparisons to MLflow runs.")


@mlflow_app.command("sync")
def sync_command(
    store: StoreOpt = DEFAULT_STORE,
    tracking_uri: TrackingOpt = None,
    experiment: MlflowExperimentOpt = None,
) -> None:
    """Log every pending result in the store to MLflow (exit 2 if any failed)."""
    from proxydiag.errors import MlflowError
    from proxydiag.mlflow.sync import sync
    from proxydiag.store import RunStore

    result = sync(RunStore(store), tracking_uri=tracking_uri, experiment=experiment)
    for kind, key, mlflow_id in result.pushed:
        out.print(f"synced {kind} {key} -> MLflow run {mlflow_id}", markup=False)
    for kind, key, why in result.failed:
        err.print(f"not synced {kind} {key}: {why}", markup=False)
    if not result.pushed and not result.failed:
        out.print("nothing to sync")
    if result.failed:
        raise MlflowError(
            f"{len(result.failed)} result(s) not synced; they stay pending in {store}"
        )


@mlflow_app.command("runs")
def runs_command(
    experiment: MlflowExperimentOpt,
    filter_string: FilterOpt = "",
    tracking_uri: TrackingOpt = None,
) -> None:
    """List the MLflow runs of an experiment (with proxydiag's tags and fidelity if logged)."""
    from proxydiag.ingest.mlflow.uri import search_ids
    from proxydiag.mlflow.sink import fast_fail
    from proxydiag.tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    with fast_fail():
        ids = search_ids(experiment or "", filter_string, uri)
        rows = _describe(uri, ids)
    header = [
        "mlflow_run_id",
        "name",
        "role",
        "experts_kept",
        "proxydiag.label",
        "proxydiag.fidelity",
    ]
    for row in [header, *rows]:
        typer.echo("\t".join(row))  # tab-separated for scripts (rich would expand the tabs)


def _describe(uri: str, ids: list[str]) -> list[list[str]]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    rows = []
    for rid in ids:
        run = client.get_run(rid)
        tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
        rows.append(
            [
                rid,
                run.info.run_name or "",
                tags.get("role", ""),
                tags.get("experts_kept", params.get("experts_kept", "")),
                tags.get("proxydiag.label", ""),
                f"{metrics.get('proxydiag.fidelity', '')}",
            ]
        )
    return rows
