"""MLflow file stores: written by the real MLflow client, read back without it."""

from __future__ import annotations

import math
import random
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlflow_fixtures import QUIET_ENV

from proxydiag.errors import IngestError, IngestWarning
from proxydiag.ingest import ReadContext
from proxydiag.ingest.mlflow import files as mlflow_files
from proxydiag.ingest.mlflow import uri as mlflow_uri
from proxydiag.ingest.mlflow._metricfiles import _parse_slow, metric_files, read_metrics

VALUES = [0.5, float("nan"), float("inf"), float("-inf"), 1e-300, -2.25]


@pytest.fixture
def file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """An mlruns tree with two live runs and a deleted one, logged by MlflowClient."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    for key, value in {**QUIET_ENV, "MLFLOW_ALLOW_FILE_STORE": "true"}.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "mlruns"
    client = MlflowClient(root.as_uri())
    exp = client.create_experiment("sweep")
    ids = []
    for i, role in enumerate(("full", "proxy", "proxy")):
        run = client.create_run(exp, run_name=f"{role}-{i}", tags={"role": role, "group": "g7"})
        ts = int(time.time() * 1000)
        metrics = [Metric("actor/pg_loss", v, ts + s, s) for s, v in enumerate(VALUES)]
        metrics += [Metric("actor/grad_norm", 1.0 + s, ts + s, s) for s in range(3)]
        params = [Param("experts_kept", str(64 >> i)), Param("optim/lr", "1e-6")]
        client.log_batch(run.info.run_id, metrics=metrics, params=params)
        ids.append(run.info.run_id)
    client.delete_run(ids[2])
    return root, ids


def test_reads_every_live_run_of_a_root_with_nonfinite_values(
    file_store: tuple[Path, list[str]],
) -> None:
    root, ids = file_store
    assert mlflow_files.can_read(root)
    runs = mlflow_files.read(root, ReadContext())
    assert [r.name for r in runs] == ["full-0", "proxy-1"]  # start-time order
    full = next(r for r in runs if r.name == "full-0")
    steps, values = full.series("pg_loss")
    assert steps.tolist() == list(range(6))
    assert values[0] == 0.5 and math.isnan(values[1])
    assert values[2] == math.inf and values[3] == -math.inf and values[4] == 1e-300
    assert full.series("grad_norm")[1].tolist() == [1.0, 2.0, 3.0]
    assert full.attrs["role"] == "full" and full.attrs["group"] == "g7"
    assert full.attrs["experts_kept"] == 64 and full.attrs["params"]["optim/lr"] == "1e-6"
    assert full.attrs["mlflow_run_id"] == ids[0] and full.attrs["mlflow_experiment"] == "sweep"
    assert full.id == f"full-0-{ids[0][:8]}"
    assert full.frame["wall_time"][0] > 1.7e9  # ms -> s


def test_experiment_run_and_file_uri_give_the_same_runs(file_store: tuple[Path, list[str]]) -> None:
    root, ids = file_store
    experiment = next(root.glob(f"*/{ids[1]}")).parent
    by_exp = mlflow_files.read(experiment, ReadContext())
    one = mlflow_files.read(experiment / ids[1], ReadContext())
    via_uri = mlflow_uri.read(root.as_uri(), ReadContext())
    assert [r.id for r in by_exp] == [r.id for r in via_uri]
    assert one[0].id == f"proxy-1-{ids[1][:8]}" and one[0].attrs["experts_kept"] == 32
    deleted = mlflow_files.read(experiment / ids[2], ReadContext())  # named directly: read
    assert deleted[0].name == "proxy-2"


def test_missing_meta_yaml_warns_and_still_reads(file_store: tuple[Path, list[str]]) -> None:
    root, ids = file_store
    run_dir = next(root.glob(f"*/{ids[0]}"))
    (run_dir / "meta.yaml").unlink()
    (run_dir / "tags" / "mlflow.runName").unlink()
    with pytest.warns(IngestWarning, match=r"meta.yaml: missing"):
        runs = mlflow_files.read(run_dir, ReadContext())
    assert runs[0].name == ids[0] and runs[0].frame.height == 9


def test_garbled_meta_yaml_warns(file_store: tuple[Path, list[str]]) -> None:
    root, ids = file_store
    run_dir = next(root.glob(f"*/{ids[1]}"))
    (run_dir / "meta.yaml").write_text("run_id: [unclosed\n  : :")
    with pytest.warns(IngestWarning, match="unreadable"):
        runs = mlflow_files.read(run_dir, ReadContext())
    assert runs[0].name == "proxy-1"  # from the mlflow.runName tag


def _run_dir(tmp_path: Path, lines: bytes) -> Path:
    run_dir = tmp_path / "0" / "abc"
    (run_dir / "metrics" / "train").mkdir(parents=True)
    (run_dir / "tags").mkdir()
    (run_dir / "meta.yaml").write_text("run_id: abc\nrun_name: r\nlifecycle_stage: active\n")
    (run_dir / "metrics" / "train" / "loss").write_bytes(lines)
    return run_dir


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, b"1000 0.5 0\n1001 0.25 1\n1002 zero 2\n1003 0.1 3\n")
    with pytest.raises(IngestError, match=r"metrics/train/loss:3: '1002 zero 2'"):
        mlflow_files.read(run_dir, ReadContext())


def test_cut_last_line_is_dropped_with_offset(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, b"1000 0.5 0\n1001 0.25 1\n1002 0.12")
    with pytest.warns(IngestWarning, match=r"loss@23: last line has no newline"):
        run = mlflow_files.read(run_dir, ReadContext())[0]
    assert run.series("loss")[1].tolist() == [0.5, 0.25]
    assert run.attrs["mlflow_run_id"] == "abc"


def test_two_field_lines_get_step_zero_as_in_mlflow(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, b"1000 0.5\n")
    run = mlflow_files.read(run_dir, ReadContext())[0]
    assert run.series("loss")[0].tolist() == [0]


def test_fast_parse_equals_mlflow_line_rules(tmp_path: Path) -> None:
    """Oracle: the one-shot polars parse equals MLflow's own per-line rules on random files."""
    rng = random.Random(7)
    spellings = ["nan", "inf", "-inf", "1e308", "-0.0", "5e-324"]
    files = []
    for i in range(20):
        lines = []
        for step in range(rng.randint(1, 300)):
            value = rng.choice(spellings) if rng.random() < 0.1 else repr(rng.gauss(0, 1e3))
            lines.append(f"{1_700_000_000_000 + step} {value} {step * rng.randint(1, 3)}\n")
        path = tmp_path / f"k{i}"
        path.write_text("".join(lines))
        files.append((f"k{i}", path))
    fast = read_metrics(files)
    slow = [_parse_slow(p, p.read_bytes()) for _, p in files]
    assert fast.height == sum(s.height for s in slow)
    np.testing.assert_array_equal(
        fast["value"].to_numpy(), np.concatenate([s["value"].to_numpy() for s in slow])
    )
    assert fast["step"].to_list() == [x for s in slow for x in s["step"].to_list()]
    assert fast["key"].unique(maintain_order=True).to_list() == [k for k, _ in files]


def test_not_a_file_store(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    assert not mlflow_files.can_read(tmp_path)
    assert metric_files(tmp_path / "nothing") == []
    with pytest.raises(IngestError, match="not an MLflow file store"):
        mlflow_files.read(tmp_path, ReadContext())


_points = st.lists(
    st.tuples(st.integers(0, 2**53), st.floats(allow_nan=True), st.integers(-(2**40), 2**62)),
    min_size=1,
    max_size=50,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(points=_points)
def test_property_every_logged_float_reads_back_exactly(
    tmp_path: Path, points: list[tuple[int, float, int]]
) -> None:
    path = tmp_path / "m"
    path.write_text("".join(f"{ts} {v!r} {s}\n" for ts, v, s in points))
    frame = read_metrics([("k", path)])
    np.testing.assert_array_equal(frame["value"].to_numpy(), np.array([v for _, v, _ in points]))
    assert frame["step"].to_list() == [s for _, _, s in points]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=200))
def test_property_garbage_is_an_error_or_data_never_a_crash(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "m"
    path.write_bytes(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IngestWarning)
            frame = read_metrics([("k", path)])
    except IngestError as exc:
        assert f"{path}:" in str(exc)
        return
    assert frame.height == data[: data.rfind(b"\n") + 1].count(b"\n")


def test_a_run_without_points_is_skipped_with_a_warning(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path, b"1000 0.5 0\n")
    empty = tmp_path / "0" / "def"
    (empty / "metrics").mkdir(parents=True)
    (empty / "meta.yaml").write_text("run_id: def\nrun_name: e\nlifecycle_stage: active\n")
    with pytest.warns(IngestWarning, match=r"0/def: MLflow run has no metric points; skipped"):
        runs = mlflow_files.read(tmp_path / "0", ReadContext())
    assert [r.attrs["mlflow_run_id"] for r in runs] == [run_dir.name]
