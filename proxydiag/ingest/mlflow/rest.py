"""MLflow tracking servers over REST: complete metric histories, fetched concurrently.

Every (run, key) history is read in a thread pool and parsed straight into columns (no
``Metric`` object per point), first with ``GET /ajax-api/2.0/mlflow/metrics/get-history-bulk``
(the UI's endpoint for whole histories: compact JSON, about 25% less server time than
``get-history``; at most :data:`BULK_MAX` points and no pagination), and when that may have
been cut short, is refused or is missing (an older server, a proxy that forwards only
``/api``) with ``GET /api/2.0/mlflow/metrics/get-history`` page by page (``max_results`` +
``next_page_token``) until the server has no next page (a key already logged at 25,000 steps
or more is paged at once). Points that tie on timestamp and step come from the bulk endpoint
in value order, from ``get-history`` in the store's order (the same for SQL stores). Nothing is
sampled: ``get-history-bulk-interval`` returns at most a few hundred points per key, so it is
never used. Each history is checked against the run's latest value of that key (``runs/get``):
a bulk reply that stops short of it is read again page by page, and a paged one that does
raises :class:`~proxydiag.errors.MlflowError`.

Credentials come only from MLflow's environment variables (``MLFLOW_TRACKING_USERNAME`` /
``_PASSWORD`` / ``_TOKEN``, TLS settings) through ``mlflow.utils.credentials``; they are never
put in a message: URIs are shown without their user-info (:func:`redact`). Our own calls fail
fast: no retries and a 10 s timeout unless ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` /
``MLFLOW_HTTP_REQUEST_TIMEOUT`` say otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl

from proxydiag.errors import MlflowError
from proxydiag.frame import empty_raw
from proxydiag.ingest.mlflow._meta import OWN_PREFIX, decode_values
from proxydiag.tracking import AJAX, get_json, redact

#: points per page: MLflow's own GET_METRIC_HISTORY_MAX_RESULTS
PAGE_SIZE = 25_000
#: concurrent requests one reader (one fleet worker) keeps in flight (the server does the work;
#: threads overlap its latency with parsing). A fleet of N workers sends at most N times this:
#: the read option ``requests`` or :data:`REQUESTS_ENV` lowers it for a server that should see
#: fewer at once
WORKERS = 8
#: environment variable that sets that bound instead of :data:`WORKERS` (``proxydiag ingest``
#: reads it once and sends it with the work, so local and Ray workers alike obey it)
REQUESTS_ENV = "PROXYDIAG_MLFLOW_REQUESTS"
#: the bulk endpoint's cap per run and key (MLflow's MAX_HISTORY_RESULTS): a reply this long
#: may be cut short, so that history is read again page by page
BULK_MAX = 25_000


def request_bound(options: Mapping[str, Any]) -> int:
    """Concurrent REST requests per reader: the read option ``requests`` (``workers`` is its
    older name), else :data:`REQUESTS_ENV`, else :data:`WORKERS`; at least 1.

    >>> request_bound({}), request_bound({"requests": 2}), request_bound({"requests": "0"})
    (8, 2, 1)
    """
    value = options.get("requests", options.get("workers"))
    if value is None:
        value = os.environ.get(REQUESTS_ENV) or WORKERS
    try:
        bound = int(value)
    except (TypeError, ValueError):
        raise MlflowError(
            f"{REQUESTS_ENV}/requests={value!r}: not a whole number of concurrent requests"
        ) from None
    return max(1, bound)


def get_run(tracking_uri: str, run_id: str) -> dict[str, Any]:
    """``runs/get``: ``{"info": ..., "data": {"metrics", "params", "tags"}}``."""
    run: dict[str, Any] = get_json(tracking_uri, "runs/get", {"run_id": run_id})["run"]
    return run


def histories(
    tracking_uri: str,
    runs: Sequence[dict[str, Any]],
    *,
    page_size: int = PAGE_SIZE,
    workers: int = WORKERS,
) -> list[pl.DataFrame]:
    """The raw frame (file order = logging order) of each run in ``runs`` (``runs/get`` bodies)."""
    tasks = [
        (run["info"]["run_id"], m)
        for run in runs
        for m in run["data"].get("metrics", [])
        if not m["key"].startswith(OWN_PREFIX)
    ]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        parts = list(pool.map(lambda t: _history(tracking_uri, *t, page_size=page_size), tasks))
    frames: dict[str, list[pl.DataFrame]] = {run["info"]["run_id"]: [] for run in runs}
    for (run_id, _), part in zip(tasks, parts, strict=True):
        frames[run_id].append(part)
    empty = empty_raw()
    return [
        pl.concat(frames[r["info"]["run_id"]]) if frames[r["info"]["run_id"]] else empty
        for r in runs
    ]


def _history(
    tracking_uri: str, run_id: str, latest: dict[str, Any], *, page_size: int
) -> pl.DataFrame:
    key, want = latest["key"], int(latest.get("step", 0))
    # a key logged at BULK_MAX steps or more cannot fit one bulk reply: page it at once
    if want + 1 < BULK_MAX:
        metrics = _bulk(tracking_uri, run_id, key)
        if metrics is not None:
            frame = _columns(metrics, key)
            if _reached(frame) >= want:
                return frame
    frame = _columns(_pages(tracking_uri, run_id, key, page_size=page_size), key)
    if _reached(frame) < want:
        got = _reached(frame) if frame.height else None
        raise MlflowError(
            f"{redact(tracking_uri)} run {run_id} key {key!r}: history stops at step {got} but "
            f"the latest value is at step {want}; the server returned an incomplete history, retry"
        )
    return frame


def _bulk(tracking_uri: str, run_id: str, key: str) -> list[dict[str, Any]] | None:
    """The whole history in one reply, or None when the bulk endpoint cannot vouch for it
    (refused, missing, not JSON, or :data:`BULK_MAX` points long: maybe cut short)."""
    try:
        body = get_json(
            tracking_uri,
            "metrics/get-history-bulk",
            {"run_id": run_id, "metric_key": key, "max_results": BULK_MAX},
            api=AJAX,
        )
    except MlflowError:
        return None  # get-history says what is wrong, if anything is
    metrics = body.get("metrics")
    if not isinstance(metrics, list) or len(metrics) >= BULK_MAX:
        return None
    return metrics


def _pages(tracking_uri: str, run_id: str, key: str, *, page_size: int) -> list[dict[str, Any]]:
    """The history page by page from ``get-history``."""
    pages: list[list[dict[str, Any]]] = []
    token: str | None = None
    seen: set[str] = set()
    while True:
        params: dict[str, Any] = {"run_id": run_id, "metric_key": key, "max_results": page_size}
        if token:
            params["page_token"] = token
        body = get_json(tracking_uri, "metrics/get-history", params)
        pages.append(body.get("metrics", []))
        token = body.get("next_page_token") or None
        if token is None:
            break
        if token in seen:
            raise MlflowError(f"{redact(tracking_uri)} run {run_id} key {key!r}: pagination loops")
        seen.add(token)
    return [m for page in pages for m in page]


def _columns(metrics: list[dict[str, Any]], key: str) -> pl.DataFrame:
    # proto JSON writes non-finite doubles as "NaN"/"Infinity"/"-Infinity"; numpy parses them
    values = np.array([m.get("value", 0.0) for m in metrics], dtype=np.float64)
    frame = pl.DataFrame(
        {
            "step": np.array([int(m.get("step", 0)) for m in metrics], dtype=np.int64),
            "value": values,
            "timestamp": np.array([int(m.get("timestamp", 0)) for m in metrics], dtype=np.int64),
        }
    )
    return frame.sort("timestamp", "step", maintain_order=True).select(
        "step",
        pl.lit(key).alias("key"),
        decode_values(pl.col("value")),
        (pl.col("timestamp").cast(pl.Float64) / 1000.0).alias("wall_time"),
    )


def _reached(frame: pl.DataFrame) -> int:
    """The last step a history reaches (-1 when it is empty)."""
    return int(frame["step"].max()) if frame.height else -1  # type: ignore[arg-type]
