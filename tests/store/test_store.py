"""RunStore: put/get/runs/remove, idempotence, results, scan, schema version, crash recovery."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import polars as pl
import pytest

from proxydiag.diagnose.result import Diagnosis, RootCause
from proxydiag.errors import StoreError
from proxydiag.events import Event
from proxydiag.fidelity.result import Comparison, FaultComparison
from proxydiag.run import Run
from proxydiag.run.build import build_run
from proxydiag.store import JOURNAL, RunStore
from proxydiag.store._catalog import SCHEMA_VERSION

NAN, INF = float("nan"), float("inf")


def make_run(
    name: str = "r1",
    source: str = "/data/r1.csv",
    values: list[float] | None = None,
    **attrs: object,
) -> Run:
    vals = values if values is not None else [0.5, NAN, INF, -INF, 1e308]
    raw = pl.DataFrame(
        {
            "step": list(range(1, len(vals) + 1)),
            "key": ["actor/grad_norm"] * len(vals),
            "value": vals,
            "wall_time": [1.0e9 + i for i in range(len(vals))],
        }
    )
    run = build_run(raw, name=name, source=source, fmt="csv", attrs=dict(attrs))
    run.events.append(Event("restart", None, 3, None, "info", 1.0, "steps went back to 3"))
    return run


def test_put_get_keeps_values_metadata_and_events(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    run = make_run(role="proxy", group="g1", seed=3, experts_kept=0.25, precision="fp16")
    rid = store.put(run)
    back = store.get(rid)
    assert back.frame.equals(run.frame)  # NaN, ±inf and ±1e308 survive exactly
    vals = back.frame["value"].to_list()
    assert math.isnan(vals[1]) and vals[2:] == [INF, -INF, 1e308]
    assert back.name == "r1" and back.mapping == {"grad_norm": "actor/grad_norm"}
    assert back.attrs["group"] == "g1" and back.events == run.events
    row = store.runs().row(0, named=True)
    assert {
        k: row[k]
        for k in (
            "run",
            "name",
            "role",
            "group",
            "seed",
            "experts_kept",
            "precision",
            "format",
            "n_points",
            "n_metrics",
            "first_step",
            "last_step",
        )
    } == {
        "run": rid,
        "name": "r1",
        "role": "proxy",
        "group": "g1",
        "seed": 3,
        "experts_kept": 0.25,
        "precision": "fp16",
        "format": "csv",
        "n_points": 5,
        "n_metrics": 1,
        "first_step": 1,
        "last_step": 5,
    }
    assert store.get("r1").id == rid  # by unique name
    assert store.get(rid).to_pandas()["value"].iloc[0] == 0.5


def test_reingest_replaces_never_duplicates(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    rid = store.put(make_run(values=[1.0, 2.0]))
    assert store.put(make_run(values=[1.0, 2.0])) == rid  # unchanged: nothing rewritten
    assert store.put(make_run(values=[5.0, 6.0, 7.0])) == rid
    assert store.runs().height == 1 and store.runs()["n_points"].to_list() == [3]
    assert store.get(rid).frame["value"].to_list() == [5.0, 6.0, 7.0]
    assert sorted(p.name for p in (tmp_path / "s" / "runs").iterdir()) == [f"{rid}.parquet"]


def test_remove_and_unknown_and_ambiguous_names(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    a = store.put(make_run("same", "/a"))
    b = store.put(make_run("same", "/b"))
    with pytest.raises(StoreError, match="2 runs have this name"):
        store.get("same")
    assert store.remove(a) == a
    assert store.runs()["run"].to_list() == [b]
    with pytest.raises(StoreError, match="nope: no such run in store"):
        store.get("nope")
    assert not (tmp_path / "s" / "runs" / f"{a}.parquet").exists()


def test_empty_store_reads_without_creating_anything(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "none")
    assert store.runs().height == 0 and store.diagnoses().height == 0
    assert store.scan().collect().height == 0 and store.size_bytes() == 0
    assert not (tmp_path / "none").exists()


def test_scan_and_size(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    for i in range(3):
        store.put(make_run(f"r{i}", f"/r{i}", values=[float(i)] * 4))
    scanned = store.scan().group_by("run").agg(pl.col("value").sum()).sort("value").collect()
    assert scanned["value"].to_list() == [0.0, 4.0, 8.0]
    parquet = sum(p.stat().st_size for p in (tmp_path / "s" / "runs").glob("*.parquet"))
    assert store.size_bytes() > parquet > 0


def diagnosis(run: str, label: str = "gradient_overflow") -> Diagnosis:
    return Diagnosis(
        source="/x",
        run=run,
        label=label,
        onset_step=120,
        confidence=0.9,
        root_cause=RootCause("overflow", "loss_scale", 120),
    )


def comparison(proxy: str, full: tuple[str, ...]) -> Comparison:
    faults = FaultComparison(
        {"label": "healthy", "onset_step": None},
        {"label": "healthy", "onset_step": None},
        None,
        None,
        True,
    )
    return Comparison(
        fidelity=0.8,
        verdict="faithful",
        align="step",
        metrics={},
        faults=faults,
        full_runs=full,
        proxy_run=proxy,
    )


def test_results_and_pending_mlflow(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    rid = store.put(make_run())
    store.put_diagnosis(diagnosis(rid, "healthy"))
    store.put_diagnosis(diagnosis(rid))  # the latest per run wins
    key = store.put_comparison(comparison("p1", ("f2", "f1")))
    assert key == "p1<-f1,f2"
    diags = store.diagnoses()
    assert diags.select("run", "label", "onset_step", "mlflow_synced").rows() == [
        (rid, "gradient_overflow", 120, False)
    ]
    assert json.loads(diags["json"][0])["root_cause"]["metric"] == "loss_scale"
    comps = store.comparisons()
    assert comps.select("proxy_run", "full_runs", "fidelity", "verdict").rows() == [
        ("p1", ["f2", "f1"], 0.8, "faithful")
    ]
    assert [(p["kind"], p["key"]) for p in store.outbox.pending()] == [
        ("diagnosis", rid),
        ("comparison", key),
    ]
    store.outbox.mark_synced("diagnosis", rid)
    store.outbox.mark_synced("comparison", key)
    assert store.outbox.pending() == []
    with pytest.raises(StoreError, match="unknown result kind"):
        store.outbox.mark_synced("report", "x")


def test_schema_version_is_recorded_and_a_newer_store_is_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    store.put(make_run())
    con = duckdb.connect(str(store.db))
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match=r"newer proxydiag \(schema 99"):
        store.runs()


def test_a_change_killed_after_the_rename_is_rolled_forward(tmp_path: Path) -> None:
    """Simulate a writer killed between the Parquet rename and the catalog commit."""
    store = RunStore(tmp_path / "s")
    rid = store.put(make_run(values=[1.0, 2.0]))
    new = make_run(values=[3.0, 4.0, 5.0])
    from proxydiag.store import _files as store_files

    store_files.write(store._file(rid), new, digest=store_files.content_hash(new))
    (tmp_path / "s" / JOURNAL).write_text(json.dumps({"op": "put", "run": rid}))
    (tmp_path / "s" / "runs" / ".half.parquet.123.tmp").write_bytes(b"PAR1 half")
    assert store.runs()["n_points"].to_list() == [2]  # readers: catalog not yet updated
    store.put(make_run("other", "/other"))  # the next writer repairs
    assert store.runs().filter(pl.col("run") == rid)["n_points"].to_list() == [3]
    assert not (tmp_path / "s" / JOURNAL).exists()
    assert not list((tmp_path / "s" / "runs").glob(".*.tmp"))


def test_a_file_where_the_store_should_be(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    store = RunStore(tmp_path / "afile")
    with pytest.raises(StoreError, match="afile: is a file, not a store directory"):
        store.runs()
    with pytest.raises(StoreError, match="afile: is a file, not a store directory"):
        store.put(make_run())


def test_a_pending_report_lives_until_its_result_syncs_or_changes(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s")
    run = make_run()
    store.put(run)
    d = diagnosis(run.id, "healthy")
    store.put_diagnosis(d)
    store.outbox.put_report("diagnosis", run.id, "<html>é</html>")
    assert store.outbox.report("diagnosis", run.id) == "<html>é</html>"
    store.put_diagnosis(d)  # a new result: the old report is not its report
    assert store.outbox.report("diagnosis", run.id) is None
    store.outbox.put_report("diagnosis", run.id, "<html>2</html>")
    kept = next((tmp_path / "s" / "pending_reports").iterdir())
    kept.write_bytes(kept.read_bytes()[:10])  # cut short: the result still syncs, without it
    with pytest.warns(UserWarning, match=f"{kept}: damaged pending report"):
        assert store.outbox.report("diagnosis", run.id) is None
    store.outbox.mark_synced("diagnosis", run.id)
    assert not kept.exists()


def test_a_late_mark_synced_does_not_swallow_a_newer_result(tmp_path: Path) -> None:
    """Writer 1 logs d1 while writer 2 stores d2 (and its report) for the same run: writer 1
    marking d1 synced must leave d2 pending, its report kept (found in review)."""
    store = RunStore(tmp_path / "s")
    run = make_run()
    store.put(run)
    d1, d2 = diagnosis(run.id, "healthy"), diagnosis(run.id, "loss_divergence")
    store.put_diagnosis(d1)
    store.put_diagnosis(d2)
    store.outbox.put_report("diagnosis", run.id, "<html>d2</html>")
    assert not store.outbox.mark_synced("diagnosis", run.id, result=d1.to_dict())
    assert [p["result"]["label"] for p in store.outbox.pending()] == ["loss_divergence"]
    assert store.outbox.report("diagnosis", run.id) == "<html>d2</html>"
    assert store.outbox.mark_synced("diagnosis", run.id, result=d2.to_dict())
    assert store.outbox.pending() == [] and store.outbox.report("diagnosis", run.id) is None
