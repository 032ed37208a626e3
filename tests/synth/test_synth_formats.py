"""Every format the generator writes reads back through proxydiag's readers (and the real
producers' readers: TensorBoard's RecordWriter framing, MlflowClient on the file store)."""

from __future__ import annotations

import importlib
import io
from pathlib import Path

import numpy as np
import pytest

from proxydiag import read_runs
from proxydiag.metrics import AliasTable
from proxydiag.synth import Scenario, simulate
from proxydiag.synth.naming import NAMINGS, can_show
from proxydiag.synth.scenario import FaultSpec
from proxydiag.synth.view import logged_values
from proxydiag.synth.writers import write_run
from proxydiag.synth.writers.tensorboard import frame_record

READER = {
    "tensorboard": "proxydiag.ingest.tensorboard",
    "mlflow": "proxydiag.ingest.mlflow.files",
    "csv": "proxydiag.ingest.tabular.csv",
    "jsonl": "proxydiag.ingest.tabular.jsonl",
    "megatron": "proxydiag.ingest.console",
    "deepspeed": "proxydiag.ingest.console",
}
COMBOS = [(f, n) for n, spec in NAMINGS.items() for f in spec.formats]


def _reader_or_skip(fmt: str) -> None:
    try:
        importlib.import_module(READER[fmt])
    except ModuleNotFoundError:
        pytest.skip(f"reader {READER[fmt]} not importable yet")


def test_every_naming_key_resolves_to_its_canonical_metric() -> None:
    table = AliasTable.default()
    for naming, spec in NAMINGS.items():
        if naming == "deepspeed":
            continue  # console lines, not keys: the console reader names them
        for fmt in spec.formats:
            keys = spec.key_map(precision="fp16", fmt=fmt)
            resolved = table.resolve(list(keys.values()))
            assert {m: resolved[k] for m, k in keys.items()} == {m: m for m in keys}, (naming, fmt)


# a grad norm left out on skipped steps (Megatron's CSV) warns as a possible lost NaN: expected
@pytest.mark.filterwarnings("ignore::proxydiag.errors.IngestWarning")
@pytest.mark.parametrize(("fmt", "naming"), COMBOS)
def test_written_run_reads_back(tmp_path: Path, fmt: str, naming: str) -> None:
    _reader_or_skip(fmt)
    precision = "fp16"
    fault = FaultSpec("fp16_scaler_collapse", 80)
    sc = Scenario(
        "rt",
        n_steps=120,
        precision=precision,
        fault=fault,
        role="proxy",
        experts_kept=16,
        group="g",
    )
    assert can_show(naming, fmt, variant=fault.variant, precision=precision)
    sr = simulate(sc, seed=4)
    write_run(tmp_path / "rt", sr, fmt=fmt, naming=naming, log_interval=5)
    (run,) = read_runs(tmp_path / "rt")
    assert run.name == "rt"
    assert (run.attrs["role"], run.attrs["group"], int(run.attrs["experts_kept"])) == (
        "proxy",
        "g",
        16,
    )
    spec = NAMINGS[naming]
    expected = set(spec.key_map(precision=precision, fmt=fmt)) - {"skipped_total", "step_time"}
    assert expected <= set(run.metrics), sorted(expected - set(run.metrics))
    want = logged_values(sr, naming=naming, fmt=fmt, log_interval=5)
    if "loss_scale" in expected:
        steps, got = run.series("loss_scale")
        assert got[-1] == 1.0 and want["loss_scale"][-1] == 1.0
        if fmt != "deepspeed":  # DeepSpeed prints the scale only when it changes
            assert np.array_equal(steps, np.arange(5, 121, 5))
            assert np.array_equal(got, want["loss_scale"])
    else:  # the collapse shows as non-finite grad norms from the onset on
        steps, grad = run.series("grad_norm")
        assert (
            np.isfinite(grad[steps < 75]).mean() > 0.8 and not np.isfinite(grad[steps > 85]).any()
        )
    for metric in ("reward", "pg_loss", "lr", "loss"):
        if metric in expected and fmt != "megatron":
            s, v = run.series(metric)
            rtol = 1e-6 if fmt == "tensorboard" else 1e-12  # simple_value is float32
            idx = s // 5 - 1 if fmt != "deepspeed" else None
            ref = want[metric][idx] if idx is not None else sr.values[metric][s - 1]
            np.testing.assert_allclose(v, ref, rtol=rtol)


def test_console_formats_carry_the_overflow_counters(tmp_path: Path) -> None:
    _reader_or_skip("megatron")
    sr = simulate("fp16_scaler_collapse", seed=0)
    write_run(tmp_path / "m", sr, fmt="megatron", naming="megatron", log_interval=10)
    (run,) = read_runs(tmp_path / "m")
    steps, skipped = run.series("skipped")
    assert skipped.sum() == sr.values["skipped"].sum()
    assert np.array_equal(steps, np.arange(10, 501, 10))
    _, grad = run.series("grad_norm")
    assert len(grad) < len(steps)  # no grad norm on skipped fp16 iterations


def test_jsonl_nonfinite_values_become_nan(tmp_path: Path) -> None:
    _reader_or_skip("jsonl")
    sr = simulate("bf16_nonfinite", seed=0)
    write_run(tmp_path / "j", sr, fmt="jsonl", naming="verl", log_interval=1)
    (run,) = read_runs(tmp_path / "j")
    _, grad = run.series("grad_norm")
    truth = sr.values["grad_norm"]
    assert np.array_equal(np.isnan(grad), ~np.isfinite(truth))


def test_tensorboard_framing_equals_tensorboards_record_writer() -> None:
    from tensorboard.summary.writer.record_writer import RecordWriter

    payloads = [b"", b"brain.Event:2", bytes(range(256)) * 3]
    buffer = io.BytesIO()
    writer = RecordWriter(buffer)
    for p in payloads:
        writer.write(p)
    assert b"".join(frame_record(p) for p in payloads) == buffer.getvalue()


def test_mlflow_client_reads_the_written_file_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    sr = simulate("bf16_nonfinite", seed=1)
    root = write_run(tmp_path / "ml", sr, fmt="mlflow", naming="verl", log_interval=5)
    client = MlflowClient(tracking_uri=root.resolve().as_uri())
    (exp,) = [e for e in client.search_experiments() if e.name == "proxydiag-synth"]
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.params["experts_kept"] == "64" and run.data.tags["role"] == "full"
    history = client.get_metric_history(run.info.run_id, "actor/grad_norm")
    values = np.array([m.value for m in sorted(history, key=lambda m: m.step)])
    truth = sr.values["grad_norm"][4::5]
    assert len(values) == 100
    np.testing.assert_array_equal(np.isfinite(values), np.isfinite(truth))
    np.testing.assert_allclose(values[np.isfinite(values)], truth[np.isfinite(truth)])
