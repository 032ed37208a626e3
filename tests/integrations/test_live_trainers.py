"""The live guard on real training: ``proxydiag watch`` tails TensorBoard, MLflow and the
console while TRL's ``GRPOTrainer`` or a transformers ``Trainer`` trains on CPU, and
``ProxydiagCallback`` rides inside the trainer.

The runs are built by ``tests/data/real/generate.py`` (tiny Qwen2-MoE from a config, a
tokenizer built locally, real fp16 loss scaling on CPU): healthy fp32 GRPO, healthy fp16 GRPO
(the scaler's calibration burst, then isolated overflows as its scale grows back), a static
fp16 scale that overflows every step from step 30, and a learning rate x500 from step 50.
Healthy runs: no alert, no stop. Faults: the first alert names the class within
max(40 steps, 3 log intervals, 5% of the run) of the onset, from every source, with where to go
back to; and what each source raised live is what ``--replay --every 1`` raises on the data
it ended with.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

from proxydiag.ingest import read_run
from proxydiag.integrations.transformers import ALERT_FILE, ProxydiagCallback
from proxydiag.watch.replay import replay

pytestmark = pytest.mark.slow

GENERATE = Path(__file__).resolve().parents[1] / "data" / "real" / "generate.py"
PROXYDIAG = str(Path(sys.executable).with_name("proxydiag"))
CLASSES = ("gradient_overflow", "loss_divergence", "precision_fault")
#: the bound on a first alert's delay (steps; these runs log every step and are short)
BOUND = 40


def _generate() -> Any:
    spec = importlib.util.spec_from_file_location("real_generate", GENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_generate"] = module
    spec.loader.exec_module(module)
    return module


gen = _generate()
SCENARIOS = {
    "grpo-healthy": gen.Spec("live-grpo", "grpo", 4, 50, 3e-3, "healthy", "live", save_steps=10),
    "grpo-fp16-dynamic": gen.Spec(
        "live-grpo-fp16", "grpo", 4, 50, 3e-3, "healthy", "live", fp16="dynamic",
        growth_interval=8, save_steps=10,
    ),
    "grpo-fp16-static-from-30": gen.Spec(
        "live-grpo-static", "grpo", 4, 60, 3e-3, "gradient_overflow", "live",
        fp16="static-from", static_from_step=30, onset_step=30, save_steps=10,
    ),
    "sft-lrjump-50": gen.Spec(
        "live-sft-lrjump", "sft", 4, 80, 2e-3, "loss_divergence", "live",
        lr_jump_step=50, lr_jump=500.0, onset_step=50, save_steps=10,
    ),
}  # fmt: skip


def _watch(out: Path, spec: Any, precision: str | None) -> subprocess.Popen[str]:
    """``proxydiag watch`` on the run's TensorBoard logdir, console and MLflow experiment,
    started before training (nothing exists yet)."""
    argv = [
        PROXYDIAG, "watch", str(out / "runs"), str(out / "console.log"),
        "--mlflow-experiment", spec.group, "--tracking-uri", (out / "mlruns").as_uri(),
        "--until-done", "--format", "json", "--interval", "0.5", "--idle-timeout", "10",
        "--start-timeout", "300", "--checkpoints", str(out / "trainer"),
        "--store", str(out / f"store-{precision}"),
    ]  # fmt: skip
    if precision:
        argv += ["--precision", precision]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def trained(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    spec = SCENARIOS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    watches = {p: _watch(out, spec, p) for p in (None, "fp16")}
    guard = ProxydiagCallback(stop_on=CLASSES)
    trainer = gen.train(spec, out, callbacks=(guard,))
    seen: dict[str | None, list[dict[str, Any]]] = {}
    for precision, proc in watches.items():
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
        seen[precision] = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    return spec, out, guard, trainer, seen


def _first_alerts(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each source's first alert (by the run it names)."""
    first: dict[str, dict[str, Any]] = {}
    for obj in objects:
        if not obj["final"]:
            first.setdefault(obj["run"], obj)
    return first


def test_the_callback_never_stops_a_healthy_run_and_catches_a_fault(trained: Any) -> None:
    spec, out, guard, trainer, _ = trained
    if spec.label == "healthy":
        assert guard.alerts == [], [a.to_dict() for a in guard.alerts]
        assert trainer.state.global_step == spec.steps  # not stopped
        assert guard.final is not None and guard.final.label == "healthy"
        return
    first = guard.alerts[0]
    assert first.label == spec.label, first.to_dict()
    assert 0 <= first.raised_at_step - spec.onset_step <= BOUND, first.to_dict()
    assert trainer.state.global_step < spec.steps  # stopped
    # attached, the alert reached the trainer's loggers, and the step's metrics once only
    history = trainer.state.log_history
    tag = f"proxydiag/{spec.label}/onset_step"  # TensorBoardCallback adds "train/"
    assert any(m.endswith(tag) for m in read_run(out / "runs").metrics)
    logged = [e["step"] for e in history if "learning_rate" in e]
    assert len(logged) == len(set(logged)), "a step's metrics were logged twice"
    # where to go back to: named in the alert and written beside the checkpoints
    assert first.rollback is not None and first.rollback.checkpoint_step <= first.onset_step
    assert Path(first.rollback.checkpoint or "").is_dir()
    advice = json.loads((out / "trainer" / ALERT_FILE).read_text())
    assert advice["class"] == spec.label and advice["rollback"] is not None


@pytest.mark.parametrize("precision", [None, "fp16"])
def test_watch_on_every_source_is_quiet_on_healthy_and_alerts_a_fault(
    trained: Any, precision: str | None
) -> None:
    spec, _, _, _, seen = trained
    objects = seen[precision]
    finals = [o for o in objects if o["final"]]
    assert len(finals) == 3, objects  # TensorBoard, console, the MLflow run
    first = _first_alerts(objects)
    if spec.label == "healthy":
        assert first == {}, first
        assert {f["label"] for f in finals} == {"healthy"}, finals
        return
    assert len(first) == 3, first
    for alert in first.values():
        assert alert["class"] == spec.label, alert
        assert 0 <= alert["raised_at_step"] - spec.onset_step <= BOUND, alert
        assert alert["rollback"] is not None and alert["recommendation"], alert


def test_live_first_alerts_equal_replay_on_the_same_data(trained: Any) -> None:
    """Each source's first live alert is the first alert of ``--replay --every 1`` on the
    data it ended with, within one log interval (these runs log every step)."""
    _, out, _, _, seen = trained
    first = _first_alerts(seen[None])
    for source, alert in first.items():
        path = source if source.startswith("/") else str(out / source)
        run = read_run(path)
        replayed = replay(replace_precision(run), every=1).alerts
        assert replayed, (source, alert)
        assert (replayed[0].label, replayed[0].onset_step) == (alert["class"], alert["onset_step"])
        assert abs(replayed[0].raised_at_step - alert["raised_at_step"]) <= 1, (source, alert)


def replace_precision(run: Any) -> Any:
    """The run as the watch without ``--precision`` saw it (no sidecar says it here)."""
    return replace(run, attrs={k: v for k, v in run.attrs.items() if k != "precision"})
