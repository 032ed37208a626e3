"""`proxydiag watch` where it used to crash or surprise: MLflow file stores, sources that are
not there yet, sources that never come, a precision that does not exist, names that differ
from diagnose's, a console chunk with no metric line, checkpoints written after the start."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from proxydiag.ingest.mlflow.files import running_run_dirs
from proxydiag.watch.checkpoints import Checkpoints
from tests._paths import SAMPLES

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _watch(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "proxydiag", "watch", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or {k: v for k, v in os.environ.items() if k != "MLFLOW_ALLOW_FILE_STORE"},
    )


def _done(proc: subprocess.Popen[str]) -> tuple[int, list[dict[str, Any]], str]:
    out, err = proc.communicate(timeout=120)
    objs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return proc.returncode, objs, err


def _file_store(tmp_path: Path, *, running: bool) -> Path:
    store = tmp_path / "mlruns"
    shutil.copytree(REAL / "sft-lrjump-e8" / "mlruns", store)
    if running:
        for meta in store.glob("*/*/meta.yaml"):
            meta.write_text(meta.read_text().replace("status: 3", "status: 1"))
    return store


def test_an_experiment_in_a_file_store_is_watched_without_a_client(tmp_path: Path) -> None:
    """MLflow 3's client refuses file stores (unless MLFLOW_ALLOW_FILE_STORE is set) and
    wanted a .trash folder: the store's folders are read directly."""
    store = _file_store(tmp_path, running=True)
    assert [p.parent.name for p in running_run_dirs(store, "sft-lrjump")]
    proc = _watch(
        "--mlflow-experiment", "sft-lrjump", "--tracking-uri", store.as_uri(), "--until-done",
        "--interval", "0.2", "--idle-timeout", "2", "--format", "json",
        "--store", str(tmp_path / "s"),
    )  # fmt: skip
    code, objs, err = _done(proc)
    assert code == 0 and "Traceback" not in err, err
    alerts = [o for o in objs if not o["final"]]
    assert alerts and alerts[0]["class"] == "loss_divergence"
    assert alerts[0]["name"] == "sft-lrjump-e8"  # the run's name, as diagnose gives it
    assert [o["label"] for o in objs if o["final"]] == ["loss_divergence"]


def test_no_running_run_waits_then_exits_2_naming_the_experiment(tmp_path: Path) -> None:
    store = _file_store(tmp_path, running=False)
    start = time.monotonic()
    proc = _watch(
        "--mlflow-experiment", "sft-lrjump", "--tracking-uri", store.as_uri(), "--until-done",
        "--interval", "0.2", "--start-timeout", "2", "--store", str(tmp_path / "s"),
    )  # fmt: skip
    code, _, err = _done(proc)
    assert code == 2 and time.monotonic() - start >= 2
    assert err.strip().count("\n") == 0 and "'sft-lrjump'" in err and "--start-timeout" in err


def test_an_empty_logdir_is_waited_for_and_read_when_it_fills(tmp_path: Path) -> None:
    logdir = tmp_path / "grpo-7b" / "tb"
    logdir.mkdir(parents=True)
    proc = _watch(
        str(logdir), "--until-done", "--interval", "0.2", "--idle-timeout", "2",
        "--format", "json", "--store", str(tmp_path / "s"),
    )  # fmt: skip
    time.sleep(1.5)  # the watch is running on an empty folder
    for event in (REAL / "sft-lrjump-e4" / "runs").iterdir():
        shutil.copy(event, logdir / event.name)
    code, objs, err = _done(proc)
    assert code == 0, err
    assert {o["name"] for o in objs} == {"grpo-7b"}
    assert [o["label"] for o in objs if o["final"]] == ["loss_divergence"]


def test_a_source_that_never_comes_is_exit_2_after_the_start_timeout(tmp_path: Path) -> None:
    log = tmp_path / "never.jsonl"
    grows = tmp_path / "grows.jsonl"
    proc = _watch(
        str(log), str(grows), "--until-done", "--interval", "0.2", "--idle-timeout", "1",
        "--start-timeout", "3", "--format", "json", "--store", str(tmp_path / "s"),
        "--precision", "bf16",
    )  # fmt: skip
    with grows.open("a") as fh:  # data arrives after the idle timeout has passed once
        time.sleep(1.5)
        for step in range(50):
            fh.write(json.dumps({"step": step, "loss": 2.0, "grad_norm": 1.0}) + "\n")
    code, objs, err = _done(proc)
    assert code == 2 and "Traceback" not in err
    assert str(log) in err and "--start-timeout" in err
    assert [o["name"] for o in objs if o["final"]] == ["grows"]  # the other one was finished


def test_a_precision_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    code, _, err = _done(_watch(str(tmp_path / "x.jsonl"), "--precision", "fp17"))
    assert code == 2 and "fp17" in err and "Traceback" not in err


def test_live_names_are_diagnose_names_and_two_tb_folders_differ(tmp_path: Path) -> None:
    for run in ("sft-lrjump-e8", "sft-lrjump-e4"):
        shutil.copytree(REAL / run / "runs", tmp_path / run / "tb")
    shutil.copy(REAL / "sft-lrjump-e8" / "console.log", tmp_path / "sft-lrjump-e8")
    sources = [
        str(tmp_path / "sft-lrjump-e8" / "tb"),
        str(tmp_path / "sft-lrjump-e4" / "tb"),
        str(tmp_path / "sft-lrjump-e8" / "console.log"),
    ]
    live = _watch(
        *sources, "--until-done", "--interval", "0.2", "--idle-timeout", "2", "--format", "json",
        "--store", str(tmp_path / "s"),
    )  # fmt: skip
    code, objs, err = _done(live)
    assert code == 0 and "proxydiag-tail-" not in err, err  # no scratch file named
    replayed = subprocess.run(
        [sys.executable, "-m", "proxydiag", "watch", *sources, "--replay", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    again = [json.loads(line) for line in replayed.stdout.splitlines()]
    names = sorted({o["name"] for o in objs})
    assert (
        names == sorted({o["name"] for o in again}) == ["console", "sft-lrjump-e4", "sft-lrjump-e8"]
    )


def test_a_checkpoint_folder_made_after_the_start_is_read_at_the_alert(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt"
    ckpt = Checkpoints.parse(str(folder))
    assert ckpt.rollback(300) is None  # not there yet
    for step in (100, 150, 250):
        (folder / f"checkpoint-{step}").mkdir(parents=True)
    back = ckpt.rollback(300)
    assert back is not None and back.checkpoint_step == 150
    assert back.checkpoint == str(folder / "checkpoint-150")


def test_a_sample_run_folder_keeps_its_sidecar_name() -> None:
    from proxydiag.watch.names import display_name

    run = SAMPLES / "divergence" / "divergence-full-s1"
    assert display_name(str(run)) == json.loads((run / "proxydiag.json").read_text()).get(
        "name", run.name
    )
