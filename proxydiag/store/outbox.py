"""The store's outboxes: per sink, the stored results it has not accepted yet, and their reports.

Results are always stored before a sink sends them anywhere (a tracking server may be down).
Storing a result queues it for every sink of :data:`SINKS` in the same transaction (the
catalog's ``pending`` table, one row per sink, kind and key); a sink's outbox
(``RunStore.outbox_for(sink)``; ``RunStore.outbox`` is MLflow's) lists what it still has to
send and clears an item once the sink has accepted it. A result's HTML report waits,
gzip-compressed, in ``<store>/pending_reports/`` until no sink has the result pending
(``proxydiag mlflow sync``, :mod:`proxydiag.mlflow.sync`, attaches it). The store drops a kept
report when a newer result replaces the one it belongs to (:meth:`Outbox.forget`). Writes take
the store's writer lock.
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
from proxydiag.store import _catalog as catalog
from proxydiag.store._catalog import MLFLOW, RESULT_TABLES, SINKS

if TYPE_CHECKING:
    from proxydiag.store import RunStore

#: the folder of kept reports, inside the store
PENDING_REPORTS = "pending_reports"
KINDS = tuple(RESULT_TABLES)
__all__ = ["KINDS", "MLFLOW", "PENDING_REPORTS", "SINKS", "Outbox"]


class Outbox:
    """The outbox of the sink ``sink`` in ``store``: the results it has not accepted yet."""

    def __init__(self, store: RunStore, sink: str = MLFLOW) -> None:
        if sink not in catalog.SINKS:
            raise StoreError(f"unknown sink {sink!r}; the store queues results for {catalog.SINKS}")
        self._store = store
        self.sink = sink

    def __repr__(self) -> str:
        return f"Outbox({self._store!r}, {self.sink!r})"

    def put_report(self, kind: str, key: str, html: str) -> None:
        """Keep the HTML report of a stored result until every sink has accepted it (gzip,
        written atomically): ``proxydiag mlflow sync`` attaches it, :meth:`mark_synced` of the
        last sink that had it pending removes it."""
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
        """Mark a stored diagnosis (key: run id) or comparison (key) as accepted by this sink
        (it leaves the sink's queue), and drop its kept report once no sink has it pending;
        returns whether the store holds that result (marked, or already synced).

        With ``result`` (what was sent), only while the store still holds that result: a
        newer one another writer stored meanwhile stays pending, with its report.
        """
        table, column = _table(kind)
        where, params = f"{column} = ?", [key]
        if result is not None:
            where, params = f"{where} AND json = ?", [key, json.dumps(result, default=str)]
        with self._store.writing(), self._store.session() as con:
            held = con.execute(f"SELECT count(*) FROM {table} WHERE {where}", params).fetchone()
            done = bool(held and held[0])
            if done:
                con.execute(
                    "DELETE FROM pending WHERE sink = ? AND kind = ? AND key = ?",
                    [self.sink, kind, key],
                )
                left = con.execute(
                    "SELECT count(*) FROM pending WHERE kind = ? AND key = ?", [kind, key]
                ).fetchone()
                if not (left and left[0]):
                    self.forget(kind, key)
        return done

    def pending(self) -> list[dict[str, Any]]:
        """Results this sink has not accepted yet: ``{"kind", "key", "run", "result"}`` each
        (comparisons also ``full_runs``), diagnoses by run, then comparisons by key."""
        from proxydiag.store import comparison_key

        out: list[dict[str, Any]] = []
        store = self._store
        waiting = ~pl.col(f"{self.sink}_synced")
        for row in store.diagnoses().filter(waiting).iter_rows(named=True):
            out.append(
                {
                    "kind": "diagnosis",
                    "key": row["run"],
                    "run": row["run"],
                    "result": json.loads(row["json"]),
                }
            )
        for row in store.comparisons().filter(waiting).iter_rows(named=True):
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
    if kind not in RESULT_TABLES:
        raise StoreError(f"unknown result kind {kind!r}; use one of {KINDS}")
    return RESULT_TABLES[kind]
