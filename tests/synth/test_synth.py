"""The generator: determinism, the scaler, and that each fault shows where its truth says."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from polars.testing import assert_frame_equal

from proxydiag.errors import ConfigError
from proxydiag.synth import FaultSpec, Scenario, named, simulate, write_corpus
from proxydiag.synth.loss_scaler import run_scaler
from proxydiag.synth.view import logged_rows


def test_same_seed_gives_identical_frames() -> None:
    a, b = simulate("divergence", seed=3), simulate("divergence", seed=3)
    assert_frame_equal(a.run.frame, b.run.frame)
    assert np.array_equal(a.wall_time, b.wall_time)


def test_seeds_share_dynamics_but_not_noise() -> None:
    a, b = simulate("healthy", seed=0), simulate("healthy", seed=1)
    assert not np.array_equal(a.values["reward"], b.values["reward"])
    smooth = np.ones(25) / 25
    ra, rb = (np.convolve(x.values["reward"], smooth, "valid") for x in (a, b))
    assert np.corrcoef(ra, rb)[0, 1] > 0.9
    assert abs(ra[-1] - rb[-1]) < 0.1


def test_scaler_calibrates_probes_and_collapses() -> None:
    steady = run_scaler(np.full(400, 12.5), init_scale_log2=16, scale_window_steps=100)
    first = np.flatnonzero(steady.overflow)
    # calibration: 1 hysteresis step + 4 halvings (2**16 -> 2**12); then a 2-overflow probe
    # every 100 clean steps
    assert first[:5].tolist() == [0, 1, 2, 3, 4]
    assert first[5:].tolist() == [105, 106, 207, 208, 309, 310]
    assert steady.scale[-1] == 2.0**12
    collapse = run_scaler(np.r_[np.full(50, 12.5), np.full(50, -3.0)], scale_window_steps=100)
    assert collapse.overflow[50:].all() and collapse.scale[-1] == 1.0


def test_healthy_fp16_run_has_only_benign_overflows() -> None:
    sr = simulate("healthy", seed=0)
    skipped = sr.values["skipped"]
    assert skipped[:10].sum() >= 3  # calibration burst
    later = skipped[20:]
    assert 0 < later.sum() < 0.06 * len(later)  # periodic growth probes, rare
    window = np.convolve(later, np.ones(30), "valid")
    assert window.max() <= 4  # never persistent
    assert np.isfinite(sr.values["grad_norm"][skipped == 0]).all()
    assert sr.values["reward"][-50:].mean() > sr.values["reward"][:50].mean() + 0.2


def _before_after(x: np.ndarray, onset: int, *, gap: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return x[: onset - 1], x[onset - 1 + gap :]


def test_scaler_collapse_shows_after_onset_only() -> None:
    sr = simulate("fp16_scaler_collapse", seed=2)
    onset = sr.truth.onset_step
    assert onset == 200
    skipped, scale = sr.values["skipped"], sr.values["loss_scale"]
    assert skipped[onset - 1] == 1 and skipped[onset - 31 : onset - 1].sum() <= 2
    assert skipped[onset + 30 :].all() and (scale[onset + 30 :] == 1.0).all()
    assert np.isfinite(sr.values["pg_loss"]).all()  # the loss stays finite


def test_bf16_nonfinite_shows_after_onset_only() -> None:
    sr = simulate("bf16_nonfinite", seed=0)
    before, after = _before_after(sr.values["grad_norm"], sr.truth.onset_step)
    assert np.isfinite(before).all() and not np.isfinite(after[0])
    assert (~np.isfinite(after)).mean() > 0.6
    assert "loss_scale" not in sr.values and np.isfinite(sr.values["pg_loss"]).all()


def test_divergence_grows_then_collapses_then_nan() -> None:
    sr = simulate("divergence", seed=0)
    onset, v = sr.truth.onset_step, sr.values
    nan_from = onset + 100  # named("divergence") sets NaN n_steps // 5 after the onset
    g_before, g_after = _before_after(v["grad_norm"], onset, gap=20)
    assert np.median(g_after[: nan_from - onset - 20]) > 5 * np.median(g_before[-100:])
    assert np.isfinite(v["grad_norm"][: nan_from - 1]).all()
    assert np.isnan(v["grad_norm"][nan_from - 1 :]).all()
    assert (
        v["reward"][nan_from - 20 : nan_from - 1].mean()
        < 0.5 * v["reward"][onset - 50 : onset - 1].mean()
    )


@pytest.mark.parametrize("variant", ["sync_step", "gradual_climb", "climb_then_divergence"])
def test_precision_faults_raise_mismatch_from_onset(variant: str) -> None:
    sr = simulate(variant, seed=1)
    onset, pd = sr.truth.onset_step, sr.values["mismatch_prob_diff"]
    assert sr.truth.label == "precision_fault"
    assert np.median(pd[: onset - 1]) < 0.005  # bf16 baseline, within veRL's 0.01 bound
    assert np.median(pd[onset + 80 : onset + 120]) > 3 * np.median(pd[: onset - 1])
    if variant == "sync_step":
        assert pd[onset - 1 : onset + 10].min() > 2.5 * np.median(pd[: onset - 1])


def test_climb_precedes_divergence() -> None:
    sr = simulate("climb_then_divergence", seed=0)
    onset, g = sr.truth.onset_step, sr.values["grad_norm"]
    base = np.median(g[onset - 60 : onset - 1])
    first_big = int(np.flatnonzero(np.nan_to_num(g, nan=np.inf) > 3 * base)[0]) + 1
    assert first_big > onset + 30


def test_pruned_proxy_learns_less_and_is_noisier() -> None:
    full = simulate(Scenario("f", n_steps=400), seed=0)
    proxy = simulate(Scenario("p", n_steps=400, experts_kept=8, role="proxy"), seed=0)
    assert proxy.values["reward"][-100:].mean() < full.values["reward"][-100:].mean() - 0.05
    assert np.median(proxy.values["grad_norm"]) > 1.5 * np.median(full.values["grad_norm"])
    assert proxy.attrs["cost_per_step"] < 0.2 < full.attrs["cost_per_step"]


def test_logged_rows_follow_log_interval() -> None:
    sr = simulate("fp16_scaler_collapse", seed=0)
    rows = logged_rows(sr, naming="megatron", fmt="tensorboard", log_interval=10)
    assert (rows["step"] % 10 == 0).all()
    scale = rows.filter(rows["key"] == "loss-scale")
    assert scale.height == 50
    # Megatron has no grad norm on an overflowed (skipped) fp16 step
    grad = rows.filter(rows["key"] == "grad-norm")["step"].to_numpy()
    assert not (sr.values["skipped"][grad - 1] > 0).any()


def test_invalid_scenarios_are_refused() -> None:
    with pytest.raises(ConfigError, match="needs precision='fp16'"):
        replace(named("fp16_scaler_collapse"), precision="bf16")
    with pytest.raises(ConfigError, match="unknown fault variant"):
        FaultSpec("meltdown", 10)
    with pytest.raises(ConfigError, match="unknown scenario"):
        simulate("meltdown", seed=0)


def test_corpus_covers_every_format_naming_interval_and_why(tmp_path: Path) -> None:
    labels = write_corpus(tmp_path, n_groups=14, seed=5, steps=150)
    data = json.loads(labels.read_text())
    runs, pairs = data["runs"], data["pairs"]
    assert len(runs) == 84
    for field, expected in (
        ("format", {"tensorboard", "mlflow", "csv", "jsonl", "megatron", "deepspeed"}),
        ("naming", {"verl", "openrlhf", "trl", "slime", "megatron", "deepspeed"}),
        ("log_interval", {1, 5, 10}),
        ("precision", {"fp16", "bf16"}),
        ("label", {"healthy", "gradient_overflow", "loss_divergence", "precision_fault"}),
    ):
        assert {r[field] for r in runs.values()} == expected, field
    assert {p["why"] for p in pairs.values()} == {
        "",
        "trend",
        "dynamics",
        "fault_missing",
        "fault_late",
        "fault_early",
        "wrong_fault",
        "extra_fault",
    }
    for name, r in runs.items():
        assert (labels.parent / r["path"] / "proxydiag.json").exists()
        assert (
            json.loads((labels.parent / r["path"] / "proxydiag.json").read_text())["name"] == name
        )
        if r["label"] == "precision_fault":
            assert r["format"] not in ("megatron", "deepspeed")
        assert (r["onset_step"] is None) == (r["label"] == "healthy")
    seed_pairs = [p for k, p in pairs.items() if k.endswith("-vs-seeds")]
    assert len(seed_pairs) == 42 and all(p["faithful"] for p in seed_pairs)
