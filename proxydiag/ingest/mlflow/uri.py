"""MLflow run URIs (``runs:/<run_id>``), server run pages, and run selection by experiment.

The tracking URI is the read option ``tracking_uri`` or ``MLFLOW_TRACKING_URI``. It decides
the route, fastest first:

=================== ==========================================================
``sqlite:///...``   direct SQL on the file (:mod:`proxydiag.ingest.mlflow.sql`)
``file:`` / a path  the mlruns text files (:mod:`proxydiag.ingest.mlflow.files`)
``http(s)://...``   concurrent, paginated REST (:mod:`proxydiag.ingest.mlflow.rest`)
=================== ==========================================================

A server page such as ``http://host:5000/#/experiments/3/runs/<run_id>`` is read as that run.
:func:`search` selects runs by experiment name and an MLflow filter string.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from proxydiag.errors import IngestError, MlflowError
from proxydiag.ingest import ReadContext
from proxydiag.ingest.mlflow import files as mlflow_files
from proxydiag.ingest.mlflow import rest as mlflow_rest
from proxydiag.ingest.mlflow import sql as mlflow_sql
from proxydiag.ingest.mlflow._meta import RUN_NAME_TAG, has_points, proxydiag_run_id, run_attrs
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.tracking import probe, redact, resolve_tracking_uri

NAME = "mlflow_uri"
_RUN_PAGE = re.compile(r"#/experiments/[^/]+/runs/([0-9a-fA-F]{32})")


def can_read(source: str | Path) -> bool:
    """``runs:/<id>``, ``file:`` URIs, and MLflow run pages on an http(s) server."""
    if not isinstance(source, str):
        return False
    return source.startswith(("runs:/", "file:")) or (
        source.startswith(("http://", "https://")) and bool(_RUN_PAGE.search(source))
    )


def read(source: str | Path, ctx: ReadContext) -> list[Run]:
    """The run a URI names (for ``file:`` URIs, every run under that folder)."""
    text = str(source)
    if text.startswith("file:"):
        return mlflow_files.read(_file_path(text), ctx)
    if text.startswith("runs:/"):
        run_id = text[len("runs:/") :].strip("/").split("/")[0]
        return read_mlflow_runs(
            resolve_tracking_uri(ctx.options.get("tracking_uri")), [run_id], ctx=ctx
        )
    match = _RUN_PAGE.search(text)
    if match is None:
        raise IngestError(f"{text}: not an MLflow run URI (use runs:/<run_id>)")
    return read_mlflow_runs(text[: text.index("#")].rstrip("/"), [match.group(1)], ctx=ctx)


def read_mlflow_runs(uri: str, run_ids: list[str], *, ctx: ReadContext | None = None) -> list[Run]:
    """Read the runs ``run_ids`` of the tracking store ``uri`` by the fastest route."""
    ctx = ctx or ReadContext()
    if uri.startswith("sqlite:///"):
        return mlflow_sql.read(uri, ReadContext(ctx.aliases, {**ctx.options, "run_ids": run_ids}))
    if uri.startswith(("http://", "https://")):
        return _read_http(uri, run_ids, ctx)
    root = file_store(uri)
    if root is not None:
        return [run for rid in run_ids for run in mlflow_files.read(_find_run_dir(root, rid), ctx)]
    raise MlflowError(
        f"{redact(uri)}: unsupported tracking URI scheme for reading "
        "(use http(s)://, sqlite:/// or a file store)"
    )


def search(
    experiment: str, filter_string: str = "", tracking_uri: str | None = None, **read_options: Any
) -> list[Run]:
    """Runs of ``experiment`` matching an MLflow ``filter_string`` (e.g. ``tags.role = 'proxy'``).

    Selection uses MLflow's own search (every filter it accepts works); the histories are then
    read by the fastest route for the store.
    """
    uri = resolve_tracking_uri(tracking_uri)
    ids = search_ids(experiment, filter_string, uri)
    if not ids:
        where = f" matching {filter_string!r}" if filter_string else ""
        raise MlflowError(f"MLflow experiment {experiment!r} has no runs{where}")
    return read_mlflow_runs(uri, ids, ctx=ReadContext(options=dict(read_options)))


def search_ids(experiment: str, filter_string: str, uri: str) -> list[str]:
    """MLflow run ids of ``experiment`` matching ``filter_string``, oldest first."""
    return [rid for rid, _ in search_states(experiment, filter_string, uri)]


#: run statuses after which MLflow changes a run only if someone logs to it again
ENDED = frozenset({"FINISHED", "FAILED", "KILLED"})


def search_states(experiment: str, filter_string: str, uri: str) -> list[tuple[str, str | None]]:
    """``(run id, state)`` of the runs of ``experiment`` matching ``filter_string``, oldest
    first. ``state`` is what the search says of an ended run (:data:`ENDED`): its status,
    end time, name, params, tags and the latest ``(step, timestamp, value)`` of every key, so
    that a run logged to, tagged or renamed since has another state; None for a run that has
    not ended (it is still logging: read it every time)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    if uri.startswith(("http://", "https://")):
        probe(uri)
    try:
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise MlflowError(f"{redact(uri)}: no MLflow experiment {experiment!r}")
        found: list[tuple[str, str | None]] = []
        token: str | None = None
        while True:
            page = client.search_runs(
                [exp.experiment_id],
                filter_string,
                max_results=1000,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
            found.extend((r.info.run_id, _state(r)) for r in page)
            token = page.token
            if not token:
                return found
    except MlflowException as exc:
        first = str(exc.message).splitlines()[0] if exc.message else type(exc).__name__
        raise MlflowError(f"{redact(uri)}: {first}") from None


def _state(run: Any) -> str | None:
    """The state of one ``search_runs`` result (see :func:`search_states`)."""
    info = run.info
    if info.status not in ENDED or info.end_time is None:
        return None
    data = run.data.to_proto()  # the latest value of each key with its step and timestamp
    latest = sorted(
        (m.key, m.step, m.timestamp, repr(m.value))  # repr: NaN equals itself here
        for m in data.metrics
    )
    return json.dumps(
        [
            info.status,
            info.end_time,
            info.run_name,
            latest,
            sorted(run.data.params.items()),
            sorted(run.data.tags.items()),
        ]
    )


def _read_http(uri: str, run_ids: list[str], ctx: ReadContext) -> list[Run]:
    probe(uri)
    bodies = [mlflow_rest.get_run(uri, rid) for rid in run_ids]
    raws = mlflow_rest.histories(
        uri,
        bodies,
        page_size=int(ctx.options.get("page_size", mlflow_rest.PAGE_SIZE)),
        workers=mlflow_rest.request_bound(ctx.options),
    )
    return [
        _build(uri, body, raw, ctx)
        for body, raw in zip(bodies, raws, strict=True)
        if has_points(raw, where=f"{redact(uri)} run {body['info']['run_id']}")
    ]


def _build(uri: str, body: dict[str, Any], raw: Any, ctx: ReadContext) -> Run:
    info, data = body["info"], body["data"]
    params = {p["key"]: p.get("value", "") for p in data.get("params", [])}
    tags = {t["key"]: t.get("value", "") for t in data.get("tags", [])}
    mlflow_id = info["run_id"]
    name = tags.get(RUN_NAME_TAG) or info.get("run_name") or mlflow_id
    attrs = run_attrs(
        mlflow_run_id=mlflow_id,
        experiment_id=info.get("experiment_id"),
        tracking_uri=uri,
        params=params,
        tags=tags,
        where=f"runs:/{mlflow_id}",
    )
    attrs["run_id"] = proxydiag_run_id(name, mlflow_id)
    return build_run(
        raw, name=name, source=f"runs:/{mlflow_id}", fmt=NAME, aliases=ctx.aliases, attrs=attrs
    )


def file_store(uri: str) -> Path | None:
    """The folder of a file store (a ``file:`` URI or a plain path), else None.

    >>> file_store("file:///tmp/mlruns"), file_store("sqlite:///m.db")
    (PosixPath('/tmp/mlruns'), None)
    """
    if uri.startswith("file:"):
        return _file_path(uri)
    return Path(uri) if "://" not in uri and ":" not in uri.split("/")[0] else None


def _file_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def _find_run_dir(root: Path, run_id: str) -> Path:
    for candidate in (root / run_id, *root.glob(f"*/{run_id}")):
        if (candidate / "metrics").is_dir():
            return candidate
    raise MlflowError(f"{root}: no MLflow run {run_id} in this file store")
