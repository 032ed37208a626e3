"""What a fleet driver asks the store before it hands out work: the runs with their content
digests, the digest each source was last read with, and the results kept with their inputs.

Read-only queries (the driver takes the writer lock only to write); a store of schema 1 is
grown first (:meth:`RunStore.writing` adds the columns these queries read).
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from proxydiag.store import RunStore

INDEX_SCHEMA: dict[str, pl.DataType] = {
    "run": pl.Utf8(),
    "name": pl.Utf8(),
    "role": pl.Utf8(),
    "group": pl.Utf8(),
    "seed": pl.Int64(),
    "n_points": pl.Int64(),
    "n_metrics": pl.Int64(),
    "source": pl.Utf8(),
    "content_hash": pl.Utf8(),
}


def _rows(store: RunStore, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The rows of ``sql``; none where there is no catalog, or (a schema-1 catalog not written
    since) where it lacks a digest column the query reads."""
    try:
        return store.query(sql, schema)
    except duckdb.BinderException:
        return pl.DataFrame(schema=schema)


def run_index(store: RunStore) -> pl.DataFrame:
    """Every stored run, ordered by run id (an order that does not depend on ingest timing)."""
    cols = ", ".join(f'"{c}"' for c in INDEX_SCHEMA)
    return _rows(store, f"SELECT {cols} FROM runs ORDER BY run", INDEX_SCHEMA)


def source_digests(store: RunStore) -> dict[str, str]:
    """``source_key -> source_hash`` for sources whose every stored run has the same digest."""
    found = _rows(
        store,
        "SELECT source_key, min(source_hash) AS source_hash FROM runs WHERE source_key IS NOT "
        "NULL GROUP BY source_key HAVING count(*) = count(source_hash) AND "
        "count(DISTINCT source_hash) = 1",
        {"source_key": pl.Utf8(), "source_hash": pl.Utf8()},
    )
    return dict(zip(found["source_key"].to_list(), found["source_hash"].to_list(), strict=True))


def kept_results(store: RunStore, kind: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """``key -> (input_hash, result dict)`` of the results kept with their input digest
    (diagnoses by run id, comparisons by proxy run id and full runs)."""
    import json

    if kind == "diagnosis":
        sql = "SELECT run AS key, input_hash, json FROM diagnoses WHERE input_hash IS NOT NULL"
    else:
        sql = "SELECT key, input_hash, json FROM comparisons WHERE input_hash IS NOT NULL"
    found = _rows(store, sql, {"key": pl.Utf8(), "input_hash": pl.Utf8(), "json": pl.Utf8()})
    return {key: (digest, json.loads(text)) for key, digest, text in found.iter_rows()}
