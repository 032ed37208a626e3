"""`proxydiag diagnose`: JSON lines valid against the schema, text/markdown, exit codes, store."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from _spies import mlflow_down, recorded

from proxydiag.cli import main
from tests._paths import SCHEMAS

SCHEMA = json.loads((SCHEMAS / "diagnosis.schema.json").read_text(encoding="utf-8"))


def _write_csv(path: Path, *, diverge_at: int | None) -> Path:
    rng = np.random.default_rng(0)
    steps = np.arange(1, 401)
    grad = 0.3 * np.exp(rng.normal(0, 0.08, 400))
    if diverge_at is not None:
        grad *= np.exp(np.where(steps < diverge_at, 0.0, 0.04 * (steps - diverge_at)))
    loss = 1.5 + rng.normal(0, 0.02, 400)
    lines = ["step,actor/grad_norm,train/loss"]
    lines += [f"{s},{g:.6g},{v:.6g}" for s, g, v in zip(steps, grad, loss, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return (
        _write_csv(tmp_path / "healthy.csv", diverge_at=None),
        _write_csv(tmp_path / "diverged.csv", diverge_at=250),
    )


def _run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def test_json_lines_validate_against_the_schema(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run_cli(["diagnose", str(runs[0]), str(runs[1]), "--format", "json"], capsys)
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(objs) == 2
    for obj in objs:
        jsonschema.validate(obj, SCHEMA, cls=jsonschema.Draft202012Validator)
    healthy, diverged = objs
    assert (healthy["label"], healthy["onset_step"]) == ("healthy", None)
    assert diverged["label"] == "loss_divergence" and abs(diverged["onset_step"] - 250) <= 6
    assert diverged["root_cause"] == {
        "kind": "divergence",
        "metric": "grad_norm",
        "onset_step": diverged["onset_step"],
    }
    assert diverged["missing"] == ["mismatch_*"]
    assert diverged["metrics"] == {"grad_norm": "actor/grad_norm", "loss": "train/loss"}
    assert diverged["source"] == str(runs[1])


def test_schema_rejects_a_broken_object() -> None:
    bad = {
        "source": "x",
        "run": "r",
        "label": "healthy",
        "onset_step": "soon",
        "confidence": 2,
        "root_cause": None,
        "events": [],
        "hints": [],
        "missing": [],
        "metrics": {},
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, SCHEMA, cls=jsonschema.Draft202012Validator)


def test_fail_on_exit_codes(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    both = [str(runs[0]), str(runs[1])]
    assert _run_cli(["diagnose", *both, "--fail-on", "loss_divergence"], capsys)[0] == 1
    assert (
        _run_cli(["diagnose", *both, "--fail-on", "gradient_overflow,precision_fault"], capsys)[0]
        == 0
    )
    assert _run_cli(["diagnose", str(runs[0]), "--fail-on", "loss_divergence"], capsys)[0] == 0
    code, _, err = _run_cli(["diagnose", str(runs[0]), "--fail-on", "explosion"], capsys)
    assert code == 2 and "explosion" in err


def test_text_and_markdown(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run_cli(["diagnose", str(runs[1])], capsys)
    assert code == 0
    assert "label: loss_divergence" in out and "what to check next:" in out
    assert "1. [critical] divergence grad_norm@" in out
    assert "missing: no rollout-vs-learner mismatch metric" in out
    code, out, _ = _run_cli(["diagnose", str(runs[1]), "-f", "markdown"], capsys)
    assert code == 0 and ": **loss_divergence**" in out and "| 1 | critical | divergence |" in out


def test_bad_inputs_exit_2_with_one_line(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run_cli(["diagnose", str(tmp_path / "absent.csv")], capsys)
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    cfg = tmp_path / "c.toml"
    cfg.write_text("[spikes]\nz_treshold = 3\n")
    code, _, err = _run_cli(["diagnose", str(runs[0]), "--config", str(cfg)], capsys)
    assert code == 2 and f"{cfg}: unknown key spikes.z_treshold" in err
    code, _, _ = _run_cli(["diagnose", str(runs[0]), "--format", "yaml"], capsys)
    assert code == 2


def test_store_keeps_the_diagnoses(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("proxydiag.store", reason="the store module is not available")
    from proxydiag.store import RunStore

    store = tmp_path / "store"
    code, _, _ = _run_cli(["diagnose", str(runs[1]), "--store", str(store), "-f", "json"], capsys)
    assert code == 0
    rows = RunStore(store).diagnoses()
    assert rows.height == 1 and rows["label"].to_list() == ["loss_divergence"]


def test_log_to_mlflow_stores_the_diagnosis_once_and_first(
    runs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MLflow sink stores the result itself: the CLI must not store it a second time, and a
    tracking server that is down loses nothing (the row waits, unsynced, for ``mlflow sync``)."""
    from proxydiag.store import RunStore

    calls = recorded(monkeypatch, RunStore, "put_diagnosis")
    uri = mlflow_down(monkeypatch)
    store = tmp_path / "store"
    code, _, err = _run_cli(
        [
            "diagnose",
            str(runs[1]),
            "--store",
            str(store),
            "--log-to-mlflow",
            "--tracking-uri",
            uri,
            "-f",
            "json",
        ],
        capsys,
    )
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    stored = [d.run for _, d in calls]
    assert len(stored) == 1 and stored[0].startswith("diverged-")
    rows = RunStore(store).diagnoses()
    assert rows["label"].to_list() == ["loss_divergence"] and rows["mlflow_synced"].to_list() == [
        False
    ]
