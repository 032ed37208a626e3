"""The taxonomy's causal reading of symptom order, `missing`, the config, and the API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from _noise import ar1

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig, load_config
from proxydiag.errors import ConfigError
from proxydiag.frame import raw
from proxydiag.run import Run
from proxydiag.run.build import build_run
from tests._paths import SAMPLES

N = 500


def _noise(rng: np.random.Generator, sigma: float = 0.08) -> np.ndarray:
    return ar1(rng, N, sigma=sigma, stationary=False)


def _run(series: dict[str, np.ndarray], name: str = "t") -> Run:
    steps = np.arange(1, N + 1)
    keys = [k for k in series for _ in range(N)]
    frame = raw(np.tile(steps, len(series)), keys, np.concatenate(list(series.values())))
    return build_run(frame, name=name, source=f"synthetic:{name}", fmt="test")


def _base(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "grad_norm": 0.3 * np.exp(_noise(rng)),
        "loss": 1.2 * np.exp(_noise(rng, 0.02)),
        "reward": 0.5 + 0.02 * _noise(rng, 1.0),
        "mismatch_prob_diff": 0.003 * np.exp(_noise(rng)),
    }


T = np.arange(1, N + 1)


def test_healthy_run_is_healthy_with_nothing_missing() -> None:
    d = diagnose(_run(_base(0)))
    assert (d.label, d.onset_step, d.root_cause, d.missing) == ("healthy", None, None, ())
    assert d.hints == () and d.summary.startswith("healthy")
    assert (d.first_step, d.last_step) == (1, N)
    assert d.metrics["grad_norm"] == "grad_norm"


def test_mismatch_climb_before_divergence_is_a_precision_fault_at_the_climb_start() -> None:
    s = _base(1)
    s["mismatch_prob_diff"] *= 1.0 + 6.0 * np.clip((T - 200) / 100.0, 0.0, 1.0)
    s["grad_norm"] *= np.exp(np.where(T < 330, 0.0, 0.03 * (T - 330)))
    d = diagnose(_run(s))
    assert d.label == "precision_fault"
    assert d.root_cause is not None and d.root_cause.metric == "mismatch_prob_diff"
    assert abs(d.onset_step - 200) <= 8  # type: ignore[operator]
    kinds = [e.kind for e in d.events if e.severity == "critical"]
    assert kinds[0] == "mismatch_climb" and "divergence" in kinds
    assert any("sampler" in h for h in d.hints)


def test_mismatch_rising_after_the_divergence_is_its_consequence() -> None:
    s = _base(2)
    s["grad_norm"] *= np.exp(np.where(T < 250, 0.0, 0.03 * (T - 250)))
    s["mismatch_prob_diff"] *= np.where(T < 290, 1.0, 6.0)
    d = diagnose(_run(s))
    assert d.label == "loss_divergence" and abs(d.onset_step - 250) <= 6  # type: ignore[operator]


def test_finite_growth_that_ends_in_nan_is_a_divergence() -> None:
    s = _base(3)
    s["grad_norm"] *= np.exp(np.where(T < 240, 0.0, 0.04 * (T - 240)))
    s["grad_norm"][T >= 380] = np.nan
    s["loss"][T >= 380] = np.nan
    d = diagnose(_run(s))
    assert d.label == "loss_divergence" and abs(d.onset_step - 240) <= 6  # type: ignore[operator]
    assert any(e.kind == "nonfinite" and e.onset_step == 380 for e in d.events)


def test_nonfinite_gradients_with_a_stable_loss_are_an_overflow() -> None:
    s = _base(4)
    rng = np.random.default_rng(4)
    bad = (T >= 260) & (rng.random(N) < 0.7)
    bad[T == 260] = True
    s["grad_norm"][bad] = np.inf
    d = diagnose(_run(s))
    assert (d.label, d.onset_step) == ("gradient_overflow", 260)
    assert d.root_cause is not None and d.root_cause.kind == "nonfinite"


def test_scaler_collapse_with_a_stable_loss_is_an_overflow() -> None:
    s = _base(5)
    level = np.where(T < 300, 12.0, np.maximum(12.0 - (T - 299), 0.0))
    s["loss_scale"] = 2.0**level
    s["skipped"] = (T >= 300).astype(float)
    s["grad_norm"][T >= 300] = np.inf
    d = diagnose(_run(s))
    assert (d.label, d.onset_step) == ("gradient_overflow", 300)


def test_missing_metrics_are_listed_not_guessed() -> None:
    s = _base(6)
    del s["mismatch_prob_diff"]
    d = diagnose(_run(s))
    assert d.label == "healthy" and d.missing == ("mismatch_*",)
    only_reward = diagnose(_run({"reward": _base(6)["reward"]}))
    assert only_reward.missing == ("mismatch_*", "grad_norm", "loss_scale", "loss")


def test_symptoms_in_the_warm_up_do_not_make_a_divergence() -> None:
    s = _base(7)
    warm = np.clip(T / 40.0, 0.0, 1.0)
    s["kl"] = 1e-4 + 0.02 * warm * np.exp(_noise(np.random.default_rng(7)))
    s["clip_frac"] = 0.002 + 0.01 * warm
    assert diagnose(_run(s)).label == "healthy"


def test_load_config_overrides_and_errors(tmp_path: Path) -> None:
    good = tmp_path / "diag.toml"
    good.write_text("[mismatch]\nprob_diff_bound = 0.02\n[spikes]\nmetrics = ['grad_norm']\n")
    cfg = load_config(good)
    assert cfg.mismatch.prob_diff_bound == 0.02 and cfg.spikes.metrics == ("grad_norm",)
    assert cfg.scaler == DiagnoseConfig().scaler
    bad_key = tmp_path / "bad.toml"
    bad_key.write_text("[mismatch]\nprobs_diff_bound = 0.02\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: unknown key mismatch\.probs_diff_bound"):
        load_config(bad_key)
    bad_section = tmp_path / "sect.toml"
    bad_section.write_text("[mismatchh]\nz_min = 3\n")
    with pytest.raises(ConfigError, match=r"sect\.toml: unknown section \[mismatchh\]"):
        load_config(bad_section)
    out_of_range = tmp_path / "range.toml"
    out_of_range.write_text("[scaler]\nmax_skip_fraction = 3.0\n")
    with pytest.raises(
        ConfigError, match=r"range\.toml: \[scaler\] max_skip_fraction = 3\.0 is out of range"
    ):
        load_config(out_of_range)
    wrong_type = tmp_path / "type.toml"
    wrong_type.write_text("[scaler]\nwindow_steps = 'forty'\n")
    with pytest.raises(ConfigError, match=r"type\.toml: scaler\.window_steps must be int"):
        load_config(wrong_type)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.toml")


def test_config_changes_the_outcome(tmp_path: Path) -> None:
    s = _base(8)
    # 1.6×: below min_fold (and the streaming statistic's shift_fold: a fast change of 2.3×
    # is a fault wherever its level)
    s["mismatch_prob_diff"] *= np.where(T < 250, 1.0, 1.6)
    run = _run(s)
    assert diagnose(run).label == "healthy"  # 0.005 stays under the veRL bound of 0.01
    loose = tmp_path / "loose.toml"
    loose.write_text("[mismatch]\nprob_diff_bound = 0.004\nmin_fold = 1.4\nz_min = 3.0\n")
    d = diagnose(run, config=loose)
    assert (d.label, d.onset_step) == ("precision_fault", 250)


def test_a_mismatch_beyond_its_bound_from_the_start_is_a_precision_fault() -> None:
    s = _base(9)
    s["mismatch_prob_diff"] *= 5.0  # ≈ 0.015 all along, as an fp8 sampler (veRL bound 0.01)
    d = diagnose(_run(s))
    assert (d.label, d.onset_step) == ("precision_fault", 1)
    assert d.root_cause is not None and d.root_cause.kind == "mismatch_level"


def test_mismatch_right_after_rl_symptoms_is_their_consequence() -> None:
    """A grad norm too noisy to show the divergence; reward and entropy collapse at 300 and
    the mismatch follows 12 steps later: the run diverged, the mismatch did not cause it."""
    s = _base(10)
    rng = np.random.default_rng(10)
    s["grad_norm"] = 0.3 * np.exp(rng.normal(0.0, 1.5, N))
    collapse = np.clip((T - 300) / 15.0, 0.0, 1.0)
    s["reward"] = 0.5 - 0.45 * collapse + 0.01 * _noise(rng, 1.0)
    s["entropy"] = 0.8 * np.exp(_noise(rng, 0.03)) * (1.0 - 0.9 * collapse)
    s["mismatch_prob_diff"] *= 1.0 + 5.0 * np.clip((T - 312) / 10.0, 0.0, 1.0)
    d = diagnose(_run(s))
    assert d.label == "loss_divergence" and abs(d.onset_step - 300) <= 6  # type: ignore[operator]
    assert any(e.kind == "mismatch_climb" or e.kind == "mismatch_step" for e in d.events)


def test_onsets_move_with_the_step_axis() -> None:
    """Shifting every step by 10^6 (a resumed run) shifts the onset by exactly that."""
    s = _base(11)
    s["grad_norm"] *= np.exp(np.where(T < 260, 0.0, 0.03 * (T - 260)))
    base = diagnose(_run(s))
    steps = np.arange(1, N + 1) + 1_000_000
    frame = raw(
        np.tile(steps, len(s)), [k for k in s for _ in range(N)], np.concatenate(list(s.values()))
    )
    shifted = diagnose(build_run(frame, name="shifted", source="synthetic:shifted", fmt="test"))
    assert base.label == shifted.label == "loss_divergence"
    assert shifted.onset_step == base.onset_step + 1_000_000  # type: ignore[operator]


def test_grad_norm_settling_higher_during_lr_warm_up_is_not_a_divergence() -> None:
    s = _base(12)
    s["lr"] = 1e-6 * np.minimum(1.0, T / 40.0)
    s["grad_norm"] *= np.where(T < 25, 1.0, 4.0)  # a new level from step 25, inside warm-up
    d = diagnose(_run(s))
    assert d.label == "healthy"
    shifted = next(e for e in d.events if e.kind == "divergence")
    assert shifted.severity == "warning" and "during warm-up, before step 38" in shifted.evidence


def test_policy_collapse_with_an_erratic_gradient_is_a_divergence() -> None:
    # the lab's real lr-blowup runs: reward and entropy collapse while the grad norm turns
    # erratic (spikes and drops by decades) instead of growing smoothly
    rng = np.random.default_rng(7)
    s = _base(7)
    s["reward"] = np.where(T < 250, 0.7, 0.1) + 0.02 * _noise(rng, 1.0)
    s["entropy"] = np.where(T < 250, 0.6, 0.03) * np.exp(_noise(rng, 0.05))
    erratic = np.exp(rng.normal(0.0, 2.5, N))
    s["grad_norm"] = np.where(T < 250, s["grad_norm"], 0.3 * erratic)
    d = diagnose(_run(s))
    assert d.label == "loss_divergence"
    assert d.onset_step is not None and abs(d.onset_step - 250) <= 10


def test_entropy_decline_with_reward_rising_stays_healthy() -> None:
    s = _base(8)
    s["reward"] = 0.2 + 0.6 * (T / N) + 0.02 * _noise(np.random.default_rng(8), 1.0)
    s["entropy"] = 1.0 * np.exp(-3.0 * T / N) * np.exp(_noise(np.random.default_rng(9), 0.03))
    assert diagnose(_run(s)).label == "healthy"


def test_reward_and_entropy_collapsing_together_is_a_divergence() -> None:
    # the lab's lr-blowup seed 2: the policy turns deterministic, so GRPO's advantages vanish
    # and the grad norm falls by decades instead of growing
    rng = np.random.default_rng(11)
    s = _base(11)
    s["reward"] = np.where(T < 300, 0.7, 0.12) + 0.02 * _noise(rng, 1.0)
    s["entropy"] = np.where(T < 300, 0.5, 1e-3) * np.exp(_noise(rng, 0.05))
    s["grad_norm"] = np.where(T < 300, s["grad_norm"], 1e-5 * s["grad_norm"])
    d = diagnose(_run(s))
    assert d.label == "loss_divergence"
    assert d.onset_step is not None and abs(d.onset_step - 300) <= 10


LAB = SAMPLES / "lab"


def test_a_grad_norm_that_ends_below_its_level_is_not_a_divergence() -> None:
    """The lab's 4-expert proxy: its grad norm turns erratic after the learning-rate blow-up
    (the change is located going up) but ends at a third of its level before: growth that
    did not last is no divergence (it was read as one, '0.327x')."""
    from proxydiag.diagnose.detectors import divergence
    from proxydiag.ingest import read_run

    events = divergence.detect(read_run(LAB / "lr_blowup-fp32-proxy4-s0"), DiagnoseConfig())
    assert [e.evidence for e in events if e.kind == "divergence"] == []


def test_a_proxys_smaller_reward_fall_with_entropy_collapse_and_unstable_gradient_diverges() -> (
    None
):
    """The lab's 1-expert proxy with a 40x learning rate from step 40 (real GRPO run): its
    reward falls 0.42 -> 0.22 (2.9 sigma, too noisy for a collapse) while entropy collapses and
    grad_norm shifts level. Without the unstable gradient, and with the reward ending above
    where it started (0.24; below it, all it learned is lost: a collapse), the same run is
    healthy."""
    from proxydiag.ingest import read_run

    run = read_run(LAB / "lr_blowup-fp32-proxy1-s0")
    d = diagnose(run)
    assert d.label == "loss_divergence" and abs(int(d.onset_step or 0) - 40) <= 5, d.summary
    calm = run.frame.with_columns(
        value=pl.when(pl.col("metric") == "grad_norm").then(0.45).otherwise(pl.col("value"))
    )
    lost = diagnose(Run(calm, run.name, run.attrs, run.mapping, run.events))
    assert "reward_collapse" in {e.kind for e in lost.events}
    kept = calm.with_columns(
        value=pl.when((pl.col("metric") == "reward") & (pl.col("step") > 40))
        .then(pl.col("value") + 0.1)
        .otherwise(pl.col("value"))
    )
    assert diagnose(Run(kept, run.name, run.attrs, run.mapping, run.events)).label == "healthy"


def test_a_reward_sag_with_entropy_sharpening_and_two_reverted_spikes_is_healthy() -> None:
    """Healthy GRPO can sag a little in reward while entropy sharpens; two isolated grad-norm
    spikes that came back are no unstable gradient (found in review: 8 of 20 such runs were
    called loss_divergence)."""
    n, t = 500, np.arange(500)
    for seed in range(6):
        rng = np.random.default_rng(seed)
        reward = (
            0.25
            + 0.45 * (1 - np.exp(-t / 60))
            - 0.12 * np.clip((t - 300) / 100, 0, 1)
            + rng.normal(0, 0.03, n)
        )
        entropy = np.exp(-np.clip(t - 250, 0, None) / 150) + np.abs(rng.normal(0, 0.02, n))
        grad = np.exp(rng.normal(0, 0.15, n))
        grad[[280, 380]] *= 6
        series = {
            "reward": reward,
            "entropy": entropy,
            "grad_norm": grad,
            "lr": np.minimum(1.0, (t + 1) / 20) * 1e-6,
        }
        frame = raw(
            np.tile(t, 4), [k for k in series for _ in t], np.concatenate(list(series.values()))
        )
        assert (
            diagnose(build_run(frame, name=f"s{seed}", source="synthetic", fmt="test")).label
            == "healthy"
        )


@pytest.mark.parametrize("lr", ["none", "constant", "jump"])
def test_an_early_divergence_is_not_excused_as_warm_up(lr: str) -> None:
    """Grad norm and loss grow from step 63 of 1000 (6%): without a learning-rate ramp only
    the first 5% is warm-up for growth, and a learning rate that jumps ends it at the jump."""
    n, t = 1000, np.arange(1000)
    rng = np.random.default_rng(0)
    series = {
        "grad_norm": np.exp(rng.normal(0, 0.1, n) + np.where(t < 63, 0.0, 0.01 * (t - 63))),
        "loss": 2.0 + 0.01 * rng.normal(size=n) + np.where(t < 63, 0, 0.004 * (t - 63)),
    }
    if lr != "none":
        series["lr"] = np.where((t < 40) | (lr == "constant"), 3e-4, 1.2e-2)
    frame = raw(
        np.tile(t, len(series)),
        [k for k in series for _ in t],
        np.concatenate(list(series.values())),
    )
    d = diagnose(build_run(frame, name="early", source="synthetic", fmt="test"))
    assert d.label == "loss_divergence" and abs(int(d.onset_step or 0) - 63) <= 5, d.summary


def test_loss_that_rises_two_thirds_and_stays_is_a_divergence() -> None:
    """A loss in nats rarely triples (BLOOM's tr8-104B went 6.44 -> 11.4): 2.4 -> 4.0 from
    step 300 on, never back, is a divergence there (``loss_fold`` 1.5); the grad norm's 3x
    rule is unchanged."""
    rng = np.random.default_rng(21)
    s = {
        "grad_norm": 0.3 * np.exp(_noise(rng)),
        "loss": 2.4 * np.where(T < 300, 1.0, 1.67) * np.exp(_noise(rng, 0.02)),
    }
    d = diagnose(_run(s))
    assert d.label == "loss_divergence" and d.onset_step is not None
    assert abs(d.onset_step - 300) <= 5
    s["loss"] = 2.4 * np.where(T < 300, 1.0, 1.3) * np.exp(_noise(rng, 0.02))  # a data-mix bump
    assert diagnose(_run(s)).label == "healthy"


def test_a_plain_loss_beside_a_reward_is_the_rl_objective() -> None:
    """TRL's GRPO logs its objective as ``loss`` (β·KL: it grows from ~0 as the policy leaves
    its reference) beside the reward: its growth is a symptom (``pg_loss_blowup``), not a
    divergence of an LM loss."""
    rng = np.random.default_rng(22)
    s = _base(22)
    s["reward"] = 0.2 + 0.5 * (T / N) + 0.02 * _noise(rng, 1.0)
    s["loss"] = 1e-3 + 0.05 * (T / N) ** 1.5 * np.exp(_noise(rng, 0.05))
    d = diagnose(_run(s))
    assert d.label == "healthy"
    assert [e.kind for e in d.events if e.metric == "loss" and e.kind != "drift"] == [
        "pg_loss_blowup"
    ]


def test_reward_collapse_with_kl_and_clip_blowing_up_is_a_divergence() -> None:
    """A policy collapsing into repetition: reward collapses while KL and the clip fraction
    blow up, with the entropy only drifting down and the grad norm steady. Three symptoms
    with a reward collapse decide on their own."""
    rng = np.random.default_rng(23)
    s = _base(23)
    s["reward"] = np.where(T < 300, 0.6, 0.05) + 0.02 * _noise(rng, 1.0)
    s["kl"] = 0.01 * np.where(T < 300, 1.0, 20.0) * np.exp(_noise(rng, 0.05))
    s["clip_frac"] = 0.004 * np.where(T < 300, 1.0, 50.0) * np.exp(_noise(rng, 0.05))
    s["entropy"] = 0.6 * np.where(T < 300, 1.0, 0.7) * np.exp(_noise(rng, 0.03))
    d = diagnose(_run(s))
    assert d.label == "loss_divergence" and d.onset_step is not None
    assert abs(d.onset_step - 300) <= 10
    s["clip_frac"] = 0.004 * np.exp(_noise(rng, 0.05))  # two symptoms: not enough
    assert diagnose(_run(s)).label == "healthy"


def test_a_reward_that_falls_below_where_it_started_is_a_collapse() -> None:
    """The learning rise before a fall inflates the spread of the level it falls from, which
    kept the fall's z under reward_z_min: a reward that climbed 0.2 -> 0.55 and ends at 0.15,
    below where the run started, lost everything it learned. With the entropy exploding and no
    gradient logged, that is a divergence where the fall starts; the same fall ending above
    the start is no collapse."""
    rng = np.random.default_rng(24)
    learn = 0.2 + 0.35 * np.clip(T / 300, 0, 1)
    s = {
        "reward": np.where(T < 400, learn, 0.15) + 0.06 * rng.standard_normal(N),
        "entropy": 0.5 * np.where(T < 400, 1.0, 4.0) * np.exp(_noise(rng, 0.03)),
        "kl": 0.01 * np.exp(_noise(rng, 0.05)),
    }
    d = diagnose(_run(s))
    assert d.label == "loss_divergence" and d.onset_step is not None
    assert abs(d.onset_step - 400) <= 10
    s["reward"] = np.where(T < 400, learn, 0.3) + 0.06 * rng.standard_normal(N)
    above = diagnose(_run(s))
    assert "reward_collapse" not in {e.kind for e in above.events} and above.label == "healthy"
