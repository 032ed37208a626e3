"""The streaming watcher: causal alerts, bounded state, classes and onsets as offline diagnose."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.evaluate.watch import _oracle
from proxydiag.frame import raw
from proxydiag.ingest import read_run
from proxydiag.ingest.tail import open_tail
from proxydiag.run.build import build_run
from proxydiag.run.rows import steps_of
from proxydiag.watch import Checkpoints, Watcher, WatchLimits
from proxydiag.watch.replay import replay
from tests._paths import SAMPLES


def _run(n: int, series: dict[str, np.ndarray], precision: str = "bf16"):  # type: ignore[no-untyped-def]
    steps = np.arange(n)
    keys = [k for k in series for _ in range(n)]
    return build_run(
        raw(np.tile(steps, len(series)), keys, np.concatenate(list(series.values()))),
        name="t",
        source="t",
        fmt="test",
        attrs={"precision": precision},
    )


def _divergence(n: int = 400, onset: int = 250, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    grow = np.where(t < onset, 0.0, 0.03 * (t - onset))
    return {
        "grad_norm": np.exp(rng.normal(0, 0.1, n) + grow),
        "loss": 2.0 * np.exp(rng.normal(0, 0.02, n) + grow / 3),
    }


def test_divergence_is_alerted_soon_after_onset_and_agrees_with_offline() -> None:
    run = _run(400, _divergence())
    result = replay(run, every=10)
    assert [a.label for a in result.alerts] == ["loss_divergence"]
    alert = result.alerts[0]
    assert abs(alert.onset_step - 250) <= 10
    oracle, _ = _oracle(run, "loss_divergence", every=10, config=DiagnoseConfig(), earliest=0)
    assert oracle is not None and 250 < alert.raised_at_step <= oracle + 10
    assert result.final.label == diagnose(run).label == "loss_divergence"


def test_healthy_noise_raises_nothing() -> None:
    rng = np.random.default_rng(3)
    n = 600
    run = _run(
        n,
        {
            "grad_norm": np.exp(rng.normal(0, 0.2, n)),
            "loss": 3.0 - np.linspace(0, 1, n) + rng.normal(0, 0.05, n),
        },
    )
    result = replay(run, every=1)
    assert result.alerts == ()
    assert result.final.label == "healthy"


def test_alerts_are_causal() -> None:
    """An alert raised at step t is the same whatever comes after t."""
    series = _divergence()
    full = replay(_run(400, series), every=10).alerts[0]
    cut = full.raised_at_step + 1
    prefix = replay(_run(cut, {k: v[:cut] for k, v in series.items()}), every=10).alerts
    assert prefix and prefix[0].label == full.label and prefix[0].onset_step == full.onset_step


def test_state_is_bounded_whatever_the_run_length() -> None:
    limits = WatchLimits(head_points=16, history_points=32, recent_points=64)
    w = Watcher(limits=limits, precision="bf16")
    rng = np.random.default_rng(0)
    for step in range(20_000):
        w.add(step, {"loss": float(2 + rng.normal(0, 0.01)), "grad_norm": 1.0, "other": 1.0})
        if step % 10 == 9:
            w.check()
    assert w.held_points <= 3 * (16 + 32 + 64)
    assert w.fits <= 20_000 // limits.periodic_steps + 10  # re-fits bounded, not one per check


def test_nonfinite_values_are_kept_and_alerted() -> None:
    w = Watcher(precision="bf16")
    alerts = []
    for step in range(200):
        alerts += w.update(step, {"grad_norm": 1.0 if step < 150 else math.nan, "loss": 2.0})
    assert [(a.label, a.onset_step) for a in alerts] == [("gradient_overflow", 150)]


def test_calibration_burst_of_fp16_is_not_an_alert() -> None:
    """DeepSpeed's scaler overflows while it calibrates (2^16 -> ~2^10): no alert."""
    w = Watcher(precision="fp16")
    alerts = []
    scale = 65536.0
    for step in range(400):
        calibrating = step < 7
        if calibrating:
            scale /= 2
        alerts += w.update(
            step, {"grad_norm": math.inf if calibrating else 1.0, "loss_scale": scale, "loss": 2.0}
        )
    alerts += w.close()
    assert alerts == []


def test_restart_rewinds_and_replaces() -> None:
    w = Watcher(precision="bf16")
    for step in range(50):
        w.add(step, {"loss": 2.0})
    for step in range(40, 60):  # resumed from a checkpoint at step 40
        w.add(step, {"loss": 1.0})
    w.check()
    steps, values = w._buffers["loss"].arrays()
    assert steps.tolist() == list(range(60))
    assert values[40:].tolist() == [1.0] * 20


def test_state_round_trip_resumes_identically() -> None:
    series = _divergence()
    a = Watcher(precision="bf16")
    for step in range(230):
        a.add(step, {k: float(v[step]) for k, v in series.items()})
    a.check()
    b = Watcher.from_state(json.loads(json.dumps(a.to_state())))
    for w in (a, b):
        for step in range(230, 400):
            w.update(step, {k: float(v[step]) for k, v in series.items()})
    assert [x.to_dict() for x in a.alerts] == [x.to_dict() for x in b.alerts]


def test_rollback_names_the_checkpoint_before_the_onset() -> None:
    ckpt = Checkpoints.from_steps([50, 100, 150, 200], margin_steps=50)
    result = replay(_run(400, _divergence()), every=10, checkpoints=ckpt)
    back = result.alerts[0].rollback
    assert back is not None
    assert back.checkpoint_step <= result.alerts[0].onset_step - 50
    assert back.skip_to_step == result.alerts[0].onset_step


def test_checkpoint_folders_are_found(tmp_path: Path) -> None:
    for name in ("checkpoint-100", "iter_0000300", "global_step200", "notes"):
        (tmp_path / name).mkdir()
    assert Checkpoints.scan(tmp_path).steps == (100, 200, 300)


@pytest.mark.parametrize(
    "name",
    [
        "overflow-fp16/overflow-fp16-full-s2",
        "precision-sync-step/precision-sync-step-full-s0",
        "healthy/healthy-full-s2",
    ],
)
def test_sample_runs_last_alert_agrees_with_final(name: str) -> None:
    result = replay(read_run(SAMPLES / name), every=10)
    last = result.alerts[-1].label if result.alerts else "healthy"
    assert last == result.final.label


@pytest.mark.parametrize("fmt", ["tensorboard", "jsonl", "csv"])
def test_tail_reads_only_appended_bytes_and_matches_offline(tmp_path: Path, fmt: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "proxydiag",
            "synth",
            "-s",
            "divergence",
            "-f",
            fmt,
            "-o",
            str(tmp_path / "src"),
            "--steps",
            "120",
        ],
        check=True,
        capture_output=True,
    )
    src = next(p for p in (tmp_path / "src" / "divergence").iterdir() if p.name != "proxydiag.json")
    live = tmp_path / "live" / src.name
    live.parent.mkdir()
    live.write_bytes(b"")
    tail = open_tail(live)
    data, got = src.read_bytes(), {}
    for i in range(0, len(data), 997):  # cuts records and lines anywhere
        with open(live, "ab") as fh:
            fh.write(data[i : i + 997])
        for step, metrics in tail.poll():
            got.setdefault(step, {}).update(metrics)
    expected = dict(steps_of(read_run(src)))
    assert got.keys() == expected.keys()
    for step, metrics in expected.items():
        assert got[step].keys() == metrics.keys()
        assert np.allclose([got[step][k] for k in metrics], list(metrics.values()), equal_nan=True)


def test_tail_survives_truncation_and_vanishing(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(5)))
    tail = open_tail(path)
    assert [s for s, _ in tail.poll()] == list(range(5))
    path.write_text(json.dumps({"step": 0, "loss": 2.0}) + "\n")  # truncated and rewritten
    assert [m["loss"] for _, m in tail.poll()] == [2.0]
    path.unlink()
    with pytest.warns(UserWarning, match="vanished"):
        assert tail.poll() == []


def test_routing_that_concentrates_is_evidence_and_its_lead_is_reported() -> None:
    """MoE: the max expert load and the load-balancing loss climb 60 steps before the loss."""
    n, rng = 400, np.random.default_rng(5)
    t = np.arange(n)
    series = _divergence(n, onset=260, seed=5)
    series["expert_load_max"] = 0.02 * np.exp(
        rng.normal(0, 0.03, n) + np.where(t < 200, 0.0, 0.02 * (t - 200))
    )
    series["load_balancing_loss"] = np.exp(
        rng.normal(0, 0.03, n) + np.where(t < 200, 0.0, 0.015 * (t - 200))
    )
    result = replay(_run(n, series), every=10)
    alert = result.alerts[0]
    assert alert.label == "loss_divergence"
    assert alert.router_lead_steps is not None and 40 <= alert.router_lead_steps <= 80
    kinds = {e.kind for e in result.final.events}
    assert {"router_concentration", "router_loss_jump"} <= kinds


def _overflow_rows(n: int, onset: int) -> list[tuple[int, dict[str, float]]]:
    return [
        (s, {"grad_norm": 1.0 + 0.01 * (s % 3) if s < onset else math.nan, "loss": 2.0 - 1e-3 * s})
        for s in range(n)
    ]


@pytest.mark.parametrize("precision", [None, "fp16"])
@pytest.mark.parametrize(
    "split",
    [
        # one metric read 2 steps behind the other (an MLflow metric file polled mid-write)
        lambda s, key: 0 if s < 30 else (1 if key == "grad_norm" or s < 33 else 2),
        # a step's points split between two polls, every step
        lambda s, key: 2 * s + (key == "loss"),
        # the loss read in one poll at the very end, behind everything
        lambda s, key: 0 if key == "grad_norm" else 1,
    ],
)
def test_a_metric_behind_the_others_catches_up_without_forgetting(
    precision: str | None, split: Any
) -> None:
    """Points that arrive behind other metrics' later steps are no restart: nothing held is
    forgotten and the alert is the one of the whole run fed step by step."""
    rows = _overflow_rows(36, 30)
    whole = Watcher(precision=precision)
    for step, metrics in rows:
        whole.update(step, metrics)
    polls: dict[int, list[tuple[int, dict[str, float]]]] = {}
    for step, metrics in rows:
        for key, value in metrics.items():
            polls.setdefault(split(step, key), []).append((step, {key: value}))
    lagged = Watcher(precision=precision)
    for tick in sorted(polls):
        for step, metrics in sorted(polls[tick], key=lambda r: r[0]):
            lagged.add(step, metrics)
        lagged.check()
    lagged.close()
    whole.close()
    assert [(a.label, a.onset_step) for a in lagged.alerts] == [
        (a.label, a.onset_step) for a in whole.alerts
    ]
    assert whole.alerts and whole.alerts[0].label == "gradient_overflow"
    for name in ("grad_norm", "loss"):
        assert lagged._buffers[name].arrays()[0].tolist() == list(range(36))
