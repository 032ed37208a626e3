"""MLflow tracking servers: the URI and REST plumbing both directions share — reading runs
(:mod:`proxydiag.ingest.mlflow`) and writing results back (:mod:`proxydiag.mlflow`).

Requests go through MLflow's own ``http_request`` (its credentials: MLFLOW_TRACKING_USERNAME /
PASSWORD / TOKEN, and its retry and timeout variables); every failure is one
:class:`~proxydiag.errors.MlflowError` line with the server's address redacted.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from proxydiag.errors import MlflowError

#: the REST API, and the UI's (which has the bulk history endpoint)
API = "/api/2.0/mlflow"
AJAX = "/ajax-api/2.0/mlflow"


def resolve_tracking_uri(explicit: str | None = None) -> str:
    """``explicit``, else ``MLFLOW_TRACKING_URI``; an error says how to set one."""
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise MlflowError("no MLflow tracking URI: pass --tracking-uri or set MLFLOW_TRACKING_URI")
    return uri


def redact(uri: str) -> str:
    """A URI without user-info, safe to print.

    >>> redact("https://alice:s3cret@mlflow.example.com/")
    'https://***@mlflow.example.com/'
    """
    return re.sub(r"(?<=://)[^/@\s]+@", "***@", uri)


def _timeouts() -> dict[str, Any]:
    return {
        "max_retries": int(os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")),
        "timeout": int(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")),
    }


def get_json(
    tracking_uri: str,
    endpoint: str,
    params: dict[str, Any],
    *,
    api: str = API,
) -> dict[str, Any]:
    """``GET`` an MLflow REST endpoint; any failure is one :class:`MlflowError` line."""
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    where = f"MLflow server {redact(tracking_uri)}"
    try:
        creds = get_default_host_creds(tracking_uri)  # type: ignore[no-untyped-call]
        resp = http_request(  # type: ignore[no-untyped-call]
            creds, f"{api}/{endpoint}", "GET", params=params, raise_on_status=False, **_timeouts()
        )
    except Exception as exc:  # requests/urllib3 raise many types; all mean "not reachable"
        text = str(exc).lower()
        reason = (
            "connection refused"
            if "refused" in text
            else "timed out"
            if "timed out" in text or "timeout" in text
            else "connection failed"
        )
        raise MlflowError(
            f"{where} is not answering ({reason}); start it, or check MLFLOW_TRACKING_URI"
        ) from None
    if resp.status_code in (401, 403):
        raise MlflowError(
            f"{where} refused the request (HTTP {resp.status_code}); set MLFLOW_TRACKING_USERNAME"
            "/MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN"
        )
    if resp.status_code != 200:
        detail = _error_message(resp.text)
        raise MlflowError(f"{where}: {endpoint} failed (HTTP {resp.status_code}: {detail})")
    try:
        data = json.loads(resp.content)
    except ValueError:  # a proxy's HTML page, a cut reply
        data = None
    if not isinstance(data, dict):
        raise MlflowError(
            f"{where}: {endpoint} did not answer with a JSON object "
            f"(HTTP 200, {len(resp.content)} bytes); is this an MLflow server?"
        )
    return data


def _error_message(text: str) -> str:
    try:
        return str(json.loads(text).get("message", ""))[:200].replace("\n", " ")
    except (ValueError, AttributeError):
        return text[:100].replace("\n", " ")


def probe(tracking_uri: str) -> None:
    """Raise :class:`MlflowError` at once when the server is down or refuses us."""
    get_json(tracking_uri, "experiments/search", {"max_results": 1})
