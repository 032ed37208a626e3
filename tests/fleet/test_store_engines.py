"""Other engines read a store where it lies: DuckDB and pyarrow's dataset API over the run
files directly (no proxydiag code), the catalog attached read-only (docs/store.md)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from fleet_helpers import ingest_quietly, sample_group

from proxydiag.store import RunStore


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("engines")
    ingest_quietly(sample_group(tmp), tmp / "store")
    return tmp / "store"


def _catalog_points(store: Path) -> dict[str, int]:
    runs = RunStore(store).runs()
    return dict(zip(runs["run"].to_list(), runs["n_points"].to_list(), strict=True))


def test_duckdb_reads_the_run_files_and_joins_the_catalog(store: Path) -> None:
    con = duckdb.connect()
    counted = dict(
        con.execute(
            f"SELECT run, count(*) FROM read_parquet('{store}/runs/*.parquet') GROUP BY run"
        ).fetchall()
    )
    assert counted == _catalog_points(store) and len(counted) == 4
    con.execute(f"ATTACH '{store}/catalog.duckdb' AS cat (READ_ONLY)")
    last_reward = con.execute(f"""
        SELECT c.role, count(DISTINCT p.run), max(p.step)
        FROM read_parquet('{store}/runs/*.parquet') p JOIN cat.runs c USING (run)
        WHERE p.metric = 'reward' GROUP BY c.role ORDER BY c.role""").fetchall()
    assert last_reward == [("full", 2, 400), ("proxy", 2, 400)]


def test_pyarrow_dataset_reads_the_run_files_and_their_metadata(store: Path) -> None:
    dataset = ds.dataset(store / "runs", format="parquet")
    assert set(dataset.schema.names) == {"run", "step", "metric", "key", "value", "wall_time"}
    table = dataset.to_table(columns=["run", "value"], filter=pc.field("metric") == "grad_norm")
    per_run = table.group_by("run").aggregate([("value", "count")]).to_pydict()
    assert set(per_run["run"]) == set(_catalog_points(store))
    assert all(n > 0 for n in per_run["value_count"])
    for file in dataset.files:
        meta = json.loads(pq.read_metadata(file).metadata[b"proxydiag"])
        assert meta["attrs"]["group"] == "healthy" and meta["attrs"]["role"] in ("full", "proxy")
