"""The MLflow outbox: stored results MLflow has not accepted yet, and their HTML reports.

Results are always stored before they are logged (a tracking server may be down). A result row
carries ``mlflow_synced``; its HTML report waits, gzip-compressed, in
``<store>/pending_reports/`` until ``proxydiag mlflow sync`` (:mod:`proxydiag.mlflow.sync`)
attaches it. The store drops a kept report when a newer result replaces the one it belongs to
(:meth:`Outbox.forget`). Writes take the store's writer lock.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import warnings
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from proxydiag.errors import IngestWarning, StoreError

if TYPE_CHECKING:
    from proxydiag.store import RunStore

#: the folder of kept reports, inside the store
PENDING_REPORTS = "pending_reports"
KINDS = ("diagnosis", "comparison")


class Outbox:
    """The MLflow outbox of ``store`` (``store.outbox``)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store

    def put_report(self, kind: str, key: str, html: str) -> None:
        """Keep the HTML report of a stored result until MLflow has accepted it (gzip, written
        atomically): ``proxydiag mlflow sync`` attaches it, :meth:`mark_synced` removes it."""
        path = self._report_path(kind, key)
        with self._store.writing():
            path.parent.mkdir(exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(gzip.compress(html.encode("utf-8"), compresslevel=6))
            os.replace(tmp, path)

    def report(self, kind: str, key: str) -> str | None:
        """The report kept for a pending result (None if there is none, or it is damaged: a
        warning names the file, and the result syncs without its report)."""
        path = self._report_path(kind, key)
        try:
            return gzip.decompress(path.read_bytes()).decode("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
            warnings.warn(
                IngestWarning(
                    f"{path}: damaged pending report ({exc}); syncing the result without it"
                ),
                stacklevel=2,
            )
            return None

    def forget(self, kind: str, key: str) -> None:
        """Drop the kept report of a result that was replaced or removed (no lock: the caller
        holds it)."""
        self._report_path(kind, key).unlink(missing_ok=True)

    def mark_synced(
        self,
        kind: str,
        key: str,
        *,
        result: Mapping[str, Any] | None = None,
    ) -> bool:
        """Mark a stored diagnosis (key: run id) or comparison (key) as logged to MLflow, and
        drop its kept report; returns whether it was marked.

        With ``result`` (what was logged), only while the store still holds that result: a
        newer one another writer stored meanwhile stays pending, with its report.
        """
        table, column = _table(kind)
        where, params = f"{column} = ?", [key]
        if result is not None:
            where, params = f"{where} AND json = ?", [key, json.dumps(result, default=str)]
        with self._store.writing(), self._store.session() as con:
            marked = con.execute(
                f"UPDATE {table} SET mlflow_synced = true WHERE {where}", params
            ).fetchall()
            done = bool(marked and marked[0][0])
            if done:
                self.forget(kind, key)
        return done

    def pending(self) -> list[dict[str, Any]]:
        """Results not yet logged to MLflow: ``{"kind", "key", "run", "result"}`` each."""
        from proxydiag.store import comparison_key

        out: list[dict[str, Any]] = []
        store = self._store
        for row in store.diagnoses().filter(~pl.col("mlflow_synced")).iter_rows(named=True):
            out.append(
                {
                    "kind": "diagnosis",
                    "key": row["run"],
                    "run": row["run"],
                    "result": json.loads(row["json"]),
                }
            )
        for row in store.comparisons().filter(~pl.col("mlflow_synced")).iter_rows(named=True):
            key = comparison_key(row["proxy_run"], row["full_runs"])
            out.append(
                {
                    "kind": "comparison",
                    "key": key,
                    "run": row["proxy_run"],
                    "full_runs": row["full_runs"],
                    "result": json.loads(row["json"]),
                }
            )
        return out

    def clean_temporaries(self) -> None:
        """Remove the temporary files a killed writer left (called under the writer lock)."""
        for tmp in (self._store.path / PENDING_REPORTS).glob(".*.tmp"):
            tmp.unlink(missing_ok=True)

    def _report_path(self, kind: str, key: str) -> Path:
        digest = hashlib.blake2b(f"{kind}\0{key}".encode(), digest_size=12).hexdigest()
        return self._store.path / PENDING_REPORTS / f"{kind}-{digest}.html.gz"


def _table(kind: str) -> tuple[str, str]:
    if kind == "diagnosis":
        return "diagnoses", "run"
    if kind == "comparison":
        return "comparisons", "key"
    raise StoreError(f"unknown result kind {kind!r}; use one of {KINDS}")
