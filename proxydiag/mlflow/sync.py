"""``proxydiag mlflow sync``: push the results the store holds but MLflow has not accepted yet.

Results are always stored before they are logged (:mod:`proxydiag.mlflow.sink`), so a server
that was down or refused loses nothing: this module replays what the store's outbox of the
MLflow sink (``RunStore.outbox_for("mlflow")``) lists, from the stored JSON and the HTML report
kept beside it, and marks each one synced there.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxydiag.errors import IngestWarning, ProxydiagError, StoreError
from proxydiag.mlflow.sink import SINK, log_to_run

if TYPE_CHECKING:
    from proxydiag.run import Run
    from proxydiag.store import RunStore


@dataclass(frozen=True)
class SyncResult:
    """What one sync did: results pushed (kind, proxydiag run, MLflow run) and failures."""

    pushed: tuple[tuple[str, str, str], ...]
    failed: tuple[tuple[str, str, str], ...]


def sync(
    store: RunStore,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
) -> SyncResult:
    """Log every pending result of ``store``, with the HTML report kept beside it when it was
    first logged (if any); one failure does not stop the others."""
    pushed, failed = [], []
    outbox = store.outbox_for(SINK)
    for item in outbox.pending():
        kind, key = str(item["kind"]), str(item["key"])
        try:
            result = _result(item)
            runs = _runs(store, kind, result)
            html = outbox.report(kind, key)
            mlflow_id = log_to_run(
                kind,
                result,
                runs[0],
                runs[1:],
                report_html=html,
                tracking_uri=tracking_uri,
                experiment=experiment,
            )
        except ProxydiagError as exc:
            failed.append((kind, key, str(exc)))
            continue
        outbox.mark_synced(kind, key, result=result)
        pushed.append((kind, key, mlflow_id))
    return SyncResult(tuple(pushed), tuple(failed))


def _result(item: Mapping[str, Any]) -> dict[str, Any]:
    raw = item.get("result", item.get("json"))
    data = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(data, dict):
        raise StoreError(
            f"stored {item.get('kind')} {item.get('key')}: result JSON is not an object"
        )
    return data


def _runs(store: RunStore, kind: str, result: Mapping[str, Any]) -> list[Run]:
    """The run to log to first (the analysed run, or the proxy), then the full runs."""
    if kind == "diagnosis":
        return [store.get(str(result["run"]))]
    if kind != "comparison":
        raise StoreError(f"unknown result kind {kind!r} in the store's pending list")
    fulls = []
    for rid in result.get("full_runs") or []:
        try:
            fulls.append(store.get(str(rid)))
        except StoreError:
            warnings.warn(IngestWarning(f"full run {rid} is no longer in the store"), stacklevel=3)
    return [store.get(str(result["proxy_run"])), *fulls]
