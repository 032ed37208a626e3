"""Write diagnoses and fidelity scores back to MLflow, where the runs already live.

A diagnosis goes to the analysed run, a comparison to the proxy run:

- tags ``proxydiag.label``, ``proxydiag.onset_step``, ``proxydiag.confidence`` (diagnosis);
  ``proxydiag.verdict``, ``proxydiag.full_run`` (comparison);
- metrics ``proxydiag.fidelity`` and ``proxydiag.fidelity.<metric>`` (comparison), at step 0;
- artifacts ``proxydiag/report.html`` (shown inline by the MLflow UI) and
  ``proxydiag/result.json`` (the result's ``to_dict()``; also kept as ``diagnosis.json`` /
  ``comparison.json`` so a proxy that is both diagnosed and compared keeps both).

Re-running replaces tags and artifacts in place. MLflow cannot delete metric history, so a
re-run logs the metrics again at step 0 and the UI shows the latest value.

A run that did not come from MLflow gets a run of its own in ``experiment`` (default
``proxydiag``), tagged with the proxydiag run id and source; a re-run finds and updates it.
When a ``store`` is given the result (and its HTML report) is stored first, which queues it
for this sink (``SINK``), and marked synced in the store's outbox of that sink after MLflow
accepted it, so a server that is down loses nothing (``proxydiag mlflow sync`` retries, report
included).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxydiag.errors import MlflowError
from proxydiag.run import PLAN_ATTRS
from proxydiag.tracking import probe, redact

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from proxydiag.diagnose.result import Diagnosis
    from proxydiag.fidelity.result import Comparison
    from proxydiag.run import Run
    from proxydiag.store import RunStore

DEFAULT_EXPERIMENT = "proxydiag"
#: this sink's name in a store's queue (``RunStore.outbox_for(SINK)``)
SINK = "mlflow"
_UNSAFE_KEY = re.compile(r"[^/\w.\- ]")
_RUN_ATTRS_AS_PARAMS = PLAN_ATTRS


def log_diagnosis(
    diagnosis: Diagnosis,
    run: Run,
    *,
    report_html: str | Path | None = None,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    store: RunStore | None = None,
) -> str:
    """Log ``diagnosis`` to ``run``'s MLflow run (created if needed); return the MLflow run id."""
    if store is not None:  # the run too: a sync needs it to find its MLflow run
        store.put(run)
        store.put_diagnosis(diagnosis)
    html = _html(report_html)
    if store is not None and html is not None:  # kept until MLflow accepts the result
        store.outbox_for(SINK).put_report("diagnosis", diagnosis.run, html)
    result = diagnosis.to_dict()
    mlflow_id = log_to_run(
        "diagnosis", result, run, report_html=html, tracking_uri=tracking_uri, experiment=experiment
    )
    if store is not None:
        store.outbox_for(SINK).mark_synced("diagnosis", diagnosis.run, result=result)
    return mlflow_id


def log_comparison(
    comparison: Comparison,
    proxy: Run,
    full: Run | list[Run],
    *,
    report_html: str | Path | None = None,
    tracking_uri: str | None = None,
    experiment: str | None = None,
    store: RunStore | None = None,
) -> str:
    """Log ``comparison`` to the proxy's MLflow run (created if needed); return its run id."""
    fulls = full if isinstance(full, list) else [full]
    key = None
    if store is not None:  # the runs too: a sync needs them to find their MLflow runs
        for run in (proxy, *fulls):
            store.put(run)
        key = store.put_comparison(comparison)
    html = _html(report_html)
    if store is not None and key is not None and html is not None:
        store.outbox_for(SINK).put_report("comparison", key, html)
    result = comparison.to_dict()
    mlflow_id = log_to_run(
        "comparison",
        result,
        proxy,
        fulls,
        report_html=html,
        tracking_uri=tracking_uri,
        experiment=experiment,
    )
    if store is not None and key is not None:
        store.outbox_for(SINK).mark_synced("comparison", key, result=result)
    return mlflow_id


def diagnosis_fields(result: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, float | None]]:
    """Tags and metrics of a diagnosis ``to_dict()``.

    >>> diagnosis_fields({"label": "gradient_overflow", "onset_step": 120, "confidence": 0.9})[0]
    {'proxydiag.label': 'gradient_overflow', 'proxydiag.onset_step': '120',
     'proxydiag.confidence': '0.900'}
    """
    onset = result.get("onset_step")
    tags = {
        "proxydiag.label": str(result["label"]),
        "proxydiag.onset_step": "none" if onset is None else str(onset),
        "proxydiag.confidence": f"{float(result.get('confidence') or 0.0):.3f}",
    }
    return tags, {}


def comparison_fields(
    result: Mapping[str, Any], full_names: list[str]
) -> tuple[dict[str, str], dict[str, float | None]]:
    """Tags and metrics of a comparison ``to_dict()`` (``full_names``: the full runs' MLflow ids).

    >>> tags, metrics = comparison_fields(
    ...     {"fidelity": 0.8, "verdict": "faithful", "metrics": {"grad_norm": {"score": 0.7}}},
    ...     ["a"],
    ... )
    >>> tags["proxydiag.verdict"], metrics
    ('faithful', {'proxydiag.fidelity': 0.8, 'proxydiag.fidelity.grad_norm': 0.7})
    """
    tags = {"proxydiag.verdict": str(result["verdict"]), "proxydiag.full_run": ",".join(full_names)}
    metrics: dict[str, float | None] = {"proxydiag.fidelity": result.get("fidelity")}
    for name, fid in (result.get("metrics") or {}).items():
        metrics[f"proxydiag.fidelity.{_UNSAFE_KEY.sub('_', name)}"] = fid.get("score")
    return tags, metrics


def _mlflow_name(run: Run) -> str:
    """How a full run is named in a tag: its MLflow run id when it has one, else its id."""
    return str(run.attrs.get("mlflow_run_id") or run.id)


def log_to_run(
    kind: str,
    result: Mapping[str, Any],
    run: Run,
    fulls: Sequence[Run] = (),
    *,
    report_html: str | Path | None,
    tracking_uri: str | None,
    experiment: str | None,
) -> str:
    """Log a diagnosis or comparison ``to_dict()`` (``kind``) to ``run``'s MLflow run, a
    comparison naming the ``fulls`` it was scored against; return the MLflow run id."""
    if kind == "diagnosis":
        tags, metrics = diagnosis_fields(result)
    else:
        tags, metrics = comparison_fields(result, [_mlflow_name(f) for f in fulls])
    return log_result(
        kind,
        result,
        run.attrs,
        run_id=run.id,
        run_name=run.name,
        tags=tags,
        metrics=metrics,
        report_html=report_html,
        tracking_uri=tracking_uri,
        experiment=experiment,
    )


def log_result(
    kind: str,
    result: Mapping[str, Any],
    attrs: Mapping[str, Any],
    *,
    run_id: str,
    run_name: str,
    tags: Mapping[str, str],
    metrics: Mapping[str, float | None],
    report_html: str | Path | None,
    tracking_uri: str | None,
    experiment: str | None,
) -> str:
    """Log one result (a ``to_dict()``) to MLflow; the shared core of both public functions."""
    from mlflow.entities import Metric, RunTag
    from mlflow.exceptions import MlflowException

    uri = target_uri(attrs, tracking_uri)
    where = f"MLflow {redact(uri)}"
    with fast_fail():
        if uri.startswith(("http://", "https://")):
            probe(uri)
        try:
            client = _client(uri)
            mlflow_id = _target_run(
                client,
                attrs,
                run_id=run_id,
                run_name=run_name,
                experiment=experiment or DEFAULT_EXPERIMENT,
            )
            all_tags = {**tags, "proxydiag.run_id": run_id}
            values = {k: float(v) for k, v in metrics.items() if v is not None}
            client.log_batch(
                mlflow_id,
                metrics=[Metric(k, v, _now_ms(), 0) for k, v in values.items()],
                tags=[RunTag(k, v) for k, v in all_tags.items()],
            )
            text = json.dumps(result, indent=2, allow_nan=True, default=str)
            client.log_text(mlflow_id, text, "proxydiag/result.json")
            client.log_text(mlflow_id, text, f"proxydiag/{kind}.json")
            html = _html(report_html)
            if html is not None:
                client.log_text(mlflow_id, html, "proxydiag/report.html")
        except MlflowException as exc:
            first = (str(exc.message).splitlines() or [type(exc).__name__])[0][:200]
            raise MlflowError(f"{where}: {redact(first)}") from None
        except OSError as exc:
            raise MlflowError(f"{where}: cannot write artifacts ({exc.strerror or exc})") from None
    return mlflow_id


def target_uri(attrs: Mapping[str, Any], explicit: str | None) -> str:
    """Where to log: the explicit URI, else the store the run was read from (an MLflow run is
    updated where it lives), else ``MLFLOW_TRACKING_URI``.

    >>> target_uri({"mlflow_tracking_uri": "sqlite:///m.db"}, None)
    'sqlite:///m.db'
    """
    uri = explicit or attrs.get("mlflow_tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise MlflowError("no MLflow tracking URI: pass --tracking-uri or set MLFLOW_TRACKING_URI")
    return str(uri)


def _client(uri: str) -> MlflowClient:
    from mlflow import MlflowClient

    return MlflowClient(uri)


def _target_run(
    client: MlflowClient, attrs: Mapping[str, Any], *, run_id: str, run_name: str, experiment: str
) -> str:
    """The MLflow run to log to: the run itself, or the run proxydiag made for it before, or new."""
    from mlflow.exceptions import MlflowException

    own = attrs.get("mlflow_run_id")
    if own:
        try:
            return str(client.get_run(str(own)).info.run_id)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp is not None else client.create_experiment(experiment)
    found = client.search_runs(
        [exp_id], f"tags.`proxydiag.run_id` = '{_quote(run_id)}'", max_results=1
    )
    if found:
        return str(found[0].info.run_id)
    source = redact(str(attrs.get("source", "")))
    new = client.create_run(
        exp_id,
        run_name=run_name,
        tags={"proxydiag.run_id": run_id, "proxydiag.source": source[:5000]},
    )
    params = {k: str(attrs[k]) for k in _RUN_ATTRS_AS_PARAMS if attrs.get(k) is not None}
    for key, value in params.items():
        client.log_param(new.info.run_id, key, value)
    return str(new.info.run_id)


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _html(report_html: str | Path | None) -> str | None:
    if report_html is None or isinstance(report_html, str):
        return report_html
    try:
        return Path(report_html).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MlflowError(f"{report_html}: cannot read the report to attach ({exc})") from exc


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


@contextmanager
def fast_fail() -> Iterator[None]:
    """MLflow's client retries for minutes by default; ours give up fast unless the user set
    ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` / ``MLFLOW_HTTP_REQUEST_TIMEOUT`` (then theirs hold)."""
    defaults = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
    added = [k for k in defaults if k not in os.environ]
    os.environ.update({k: defaults[k] for k in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)
