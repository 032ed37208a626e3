"""Fidelity tests one by one, with concrete values; statistics checked against scipy oracles."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _fidelity_runs import compare_healthy, curves, diag, make_run
from scipy.stats import ks_2samp, spearmanr

from proxydiag.align.grid import build_grid
from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.result import RootCause
from proxydiag.errors import ConfigError
from proxydiag.fidelity import _symptom_order
from proxydiag.fidelity import fault_match as faults
from proxydiag.fidelity._scoring import reference, relative
from proxydiag.fidelity._stats import binned_sigma, robust_sigma
from proxydiag.fidelity.api import compare
from proxydiag.fidelity.config import FidelityConfig, load_config
from proxydiag.fidelity.tests.increments import binned_ks, ks_statistic
from proxydiag.fidelity.tests.shape import area, dtw_distance
from proxydiag.fidelity.tests.trend import change, spearman
from proxydiag.fidelity.tests.volatility import log_ratio
from proxydiag.run import Run

CFG = FidelityConfig(n_boot=100)


def _compare(full: list, proxy, **kw):  # type: ignore[no-untyped-def]
    return compare_healthy(full, proxy, config=CFG, **kw)


def test_spearman_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=300), rng.normal(size=300)
    y[:50] = x[:50]
    assert spearman(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
    assert spearman(np.ones(5), np.ones(5)) == 1.0


def test_ks_statistic_matches_scipy_and_binned_replicates_are_close() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=999), rng.standard_t(3, size=999)
    assert ks_statistic(x, y) == pytest.approx(ks_2samp(x, y).statistic, abs=1e-12)
    identity = np.arange(999)[None, :]
    assert binned_ks(x, y, identity)[0] == pytest.approx(ks_statistic(x, y), abs=0.03)


def test_binned_sigma_matches_the_exact_mad() -> None:
    rng = np.random.default_rng(2)
    v = rng.standard_t(4, size=3000)
    idx = rng.integers(0, 3000, size=(20, 3000))
    np.testing.assert_allclose(binned_sigma(v, idx), robust_sigma(v[idx]), rtol=0.03)


def test_shape_ignores_level_and_scale_and_dtw_tolerates_a_shift() -> None:
    t = np.linspace(0, 1, 400)
    assert area(np.tanh(5 * t), 3 + 0.2 * np.tanh(5 * t)) == pytest.approx(0.0, abs=1e-12)
    base = np.sin(2 * np.pi * 2 * t)
    shifted = np.sin(2 * np.pi * 2 * (t - 0.03))  # 3% of progress later
    warped = dtw_distance(base, shifted, band_fraction=0.1)
    pointwise = dtw_distance(base, shifted, band_fraction=0.0)  # a 2-point band: no warping
    assert warped < 0.25 * pointwise and pointwise == pytest.approx(0.173, abs=0.001)


def test_volatility_ratio_of_doubled_noise() -> None:
    rng = np.random.default_rng(3)
    noise = rng.normal(size=5000)
    assert log_ratio(noise, 2 * rng.normal(size=5000), log_scale=False) == pytest.approx(
        np.log(2), abs=0.06
    )


def test_change_in_noise_units() -> None:
    rng = np.random.default_rng(4)
    c = change(np.linspace(0, 1, 1000) + rng.normal(scale=0.05, size=1000), trend_fraction=0.15)
    assert c.delta == pytest.approx(0.8, abs=0.03)
    assert 14 < c.z < 18 and c.half_progress == pytest.approx(0.5, abs=0.03)


def test_scores_are_relative_to_the_seed_range() -> None:
    assert reference([0.05], floor=0.1) == 0.1
    assert relative(np.array([0.1, 0.3, 1.0]), 0.2).tolist() == [1.0, pytest.approx(2 / 3), 0.2]


def test_level_is_reported_but_not_scored() -> None:
    fulls = [make_run(f"f{s}", curves(1000, seed=s)) for s in range(2)]
    low = make_run(
        "p", {k: (v * 0.5 if k == "reward" else v) for k, v in curves(1000, seed=9).items()}
    )
    c = _compare(fulls, low)
    level = c.metrics["reward"].tests["level"]
    assert level.value == pytest.approx(0.5, abs=0.03) and level.score < 0.2
    assert c.metrics["reward"].verdict == "faithful" and c.verdict == "faithful"


def test_trend_in_opposite_directions_scores_zero() -> None:
    full = make_run("f", curves(800, seed=0))
    falling = make_run("p", curves(800, seed=1, reward_dir=-1.0))
    trend = _compare([full], falling).metrics["reward"].tests["trend"]
    assert trend.score == 0.0 and trend.details["opposite_direction"] is True
    assert "opposite directions" in trend.explanation


def test_explanations_name_statistic_interval_and_seed_value() -> None:
    fulls = [make_run(f"f{s}", curves(600, seed=s)) for s in range(2)]
    c = _compare(fulls, make_run("p", curves(600, seed=5)))
    words = c.metrics["reward"].tests["trend"].explanation
    assert words.startswith("reward trend: Spearman 0.9") and "seed-to-seed 0.9" in words
    lo, hi = c.metrics["reward"].tests["trend"].ci  # type: ignore[misc]
    assert lo <= c.metrics["reward"].tests["trend"].value <= hi  # type: ignore[operator]


def test_nonfinite_points_are_counted_not_drawn() -> None:
    data = curves(600, seed=1)
    data["grad_norm"][100:110] = np.nan
    data["grad_norm"][300] = np.inf
    c = _compare([make_run("f", curves(600, seed=0))], make_run("p", data))
    shape = c.metrics["grad_norm"].tests["shape"]
    assert shape.details["nonfinite_proxy"] == 11 and shape.details["nonfinite_full"] == 0
    assert c.events["details"]["proxy"]["nonfinite:grad_norm"] == pytest.approx(
        [100 / 599, 300 / 599], abs=1e-3
    )


def test_events_f1_merge_and_order() -> None:
    a = {"spike:loss": [0.1, 0.5], "nonfinite:grad_norm": [0.6]}
    b = {"spike:loss": [0.11], "nonfinite:grad_norm": [0.05]}
    assert _symptom_order.f1(a, b, window=0.02) == pytest.approx(2 * 1 / 5)
    assert _symptom_order.merge([0.1, 0.11, 0.115, 0.4], window=0.02) == [0.1, 0.4]
    order_a, order_b, tau = _symptom_order.order(a, b)
    assert (
        order_a == ["spike:loss", "nonfinite:grad_norm"]
        and order_b == order_a[::-1]
        and tau == -1.0
    )


def test_symptoms_within_the_event_window_have_no_order() -> None:
    """Three symptoms of one climb within 1% of progress in both runs are simultaneous: no
    order to reverse (their order by noise made a faithful proxy partial in 6 of 10 draws).
    Symptoms further apart keep theirs."""
    full = {"mismatch_climb:a": [0.404], "mismatch_climb:b": [0.406], "mismatch_climb:c": [0.407]}
    proxy = {"mismatch_climb:a": [0.437], "mismatch_climb:b": [0.428], "mismatch_climb:c": [0.424]}
    assert _symptom_order.order(full, proxy, window=0.02)[2] is None
    assert _symptom_order.order(full, proxy)[2] == -1.0
    early = {**full, "spike:grad_norm": [0.2]}
    assert _symptom_order.order(early, {**proxy, "spike:grad_norm": [0.3]}, window=0.02)[2] == 1.0
    assert _symptom_order.order(early, {**proxy, "spike:grad_norm": [0.6]}, window=0.02)[2] == -1.0


@pytest.mark.parametrize(
    ("full", "proxy", "lag", "expected"),
    [
        ("healthy", "healthy", None, "reproduced"),
        ("loss_divergence", "loss_divergence", 0.05, "reproduced"),
        ("loss_divergence", "loss_divergence", 0.15, "fault_late"),
        ("loss_divergence", "loss_divergence", -0.12, "fault_early"),
        ("loss_divergence", "healthy", None, "fault_missing"),
        ("healthy", "gradient_overflow", None, "extra_fault"),
        ("precision_fault", "loss_divergence", 0.0, "wrong_fault"),
    ],
)
def test_fault_outcomes(full: str, proxy: str, lag: float | None, expected: str) -> None:
    run = make_run("r", {"loss": np.ones(10)})
    assert faults.outcome(diag(run, full, 5), diag(run, proxy, 5), lag, tolerance=0.1) == expected


def test_config_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[scaler]\nwindow_steps = 3\n[compare]\nn_boot = 50\nfloor_trend = 0.2\n")
    cfg = load_config(path)
    assert (cfg.n_boot, cfg.floor_trend, cfg.resolution_points) == (50, 0.2, 2000)
    path.write_text("[compare]\nnboot = 50\n")
    with pytest.raises(ConfigError, match=r"c.toml: unknown key compare.nboot"):
        load_config(path)
    path.write_text("[compare]\nci_level = 2\n")
    with pytest.raises(ConfigError, match=r"ci_level = 2.0 is out of range"):
        load_config(path)


def test_overflows_come_from_the_skip_counter_and_empty_kinds_are_dropped() -> None:
    data = curves(500, seed=0)
    skipped = np.zeros(500)
    skipped[[100, 101, 300]] = 1.0
    full = make_run("f", {**data, "skipped": skipped})
    quiet = make_run("p", {**curves(500, seed=1), "skipped": np.zeros(500)})
    c = _compare([full], quiet)
    assert c.events["details"]["full"]["overflow:skipped"] == pytest.approx([0.2, 0.6], abs=0.005)
    assert "overflow:skipped" not in c.events["details"]["proxy"]
    assert c.events["value"] == 0.0


def test_opposite_directions_are_excused_when_seeds_disagree_too() -> None:
    up = [
        make_run("up", curves(800, seed=0)),
        make_run("down", curves(800, seed=1, reward_dir=-1.0)),
    ]
    trend = (
        _compare(up, make_run("p", curves(800, seed=2, reward_dir=-1.0)))
        .metrics["reward"]
        .tests["trend"]
    )
    assert trend.details["opposite_direction"] is False


def test_a_nonfinite_skip_count_is_an_overflow_event() -> None:
    """A NaN (or inf) in the skipped counter is a signal, not zero."""
    skipped = np.zeros(500)
    skipped[300], skipped[400] = np.nan, np.inf
    full = make_run("f", {**curves(500, seed=0), "skipped": skipped})
    quiet = make_run("p", {**curves(500, seed=1), "skipped": np.zeros(500)})
    grid = build_grid([full], quiet, buckets=CFG.buckets)
    found = _symptom_order.run_events(grid, 0, None, window=CFG.event_window_progress)
    assert found["overflow:skipped"] == pytest.approx([300 / 499, 400 / 499], abs=0.005)
    assert "overflow:skipped" not in _symptom_order.run_events(
        grid, 1, None, window=CFG.event_window_progress
    )


def test_consensus_takes_step_and_progress_from_one_seed() -> None:
    """With an even number of seeds the onset step and its progress come from the same (lower
    middle) seed, not a step from one seed and the progress averaged over two."""
    loss = np.linspace(2.0, 1.0, 100)
    seeds = [make_run(f"full{i}", {"loss": loss}) for i in range(2)]
    grid = build_grid(seeds, make_run("proxy", {"loss": loss}, role="proxy"), buckets=CFG.buckets)
    known = [(0, diag(seeds[0], "loss_divergence", 60)), (1, diag(seeds[1], "loss_divergence", 20))]
    label, step, progress, agree, spread = faults.consensus(known, grid)
    assert (label, step, agree) == ("loss_divergence", 20, 2)
    assert progress == grid.progress(1, 20) != grid.progress(0, 60)
    assert spread == (grid.progress(1, 20), grid.progress(0, 60))


def test_an_onset_among_the_seeds_own_onsets_is_on_time() -> None:
    """Seeds whose onsets are 30% and 70% of progress apart show how much the fault's onset
    varies by itself: a proxy at 66% is as late as another seed (it was fault_late against
    the lower middle seed); 10% beyond the latest seed is late."""
    seeds = [make_run(f"full{i}", curves(500, seed=i)) for i in range(2)]
    labels = [diag(seeds[0], "loss_divergence", 150), diag(seeds[1], "loss_divergence", 350)]
    proxy = make_run("proxy", curves(500, seed=9), role="proxy")
    grid = build_grid(seeds, proxy, buckets=CFG.buckets)
    for onset, want in (
        (330, "reproduced"),
        (160, "reproduced"),
        (110, "reproduced"),
        (420, "fault_late"),
        (60, "fault_early"),
    ):
        got = faults.score(
            seeds,
            proxy,
            grid,
            full=labels,
            config=CFG,
            proxy_diagnosis=diag(proxy, "loss_divergence", onset),
        )
        assert got.outcome == want, (onset, got.explanation)
    assert "of the seeds' onsets (30%–70% of progress)" in got.explanation


def test_seeds_split_evenly_the_order_of_the_full_runs_does_not_decide() -> None:
    """One seed diverges, the other is healthy: a diverging proxy reproduces one of them
    whichever seed is passed first; the verdict is partial, and says the seeds disagree."""
    seeds = [make_run(f"full{i}", curves(400, seed=i)) for i in range(2)]
    proxy = make_run("proxy", curves(400, seed=7), role="proxy")
    labels = [diag(seeds[0], "loss_divergence", 200), diag(seeds[1])]
    verdicts = set()
    for order in ((0, 1), (1, 0)):
        result = compare(
            [seeds[i] for i in order],
            proxy,
            config=CFG,
            full_diagnoses=[labels[i] for i in order],
            proxy_diagnosis=diag(proxy, "loss_divergence", 205),
        )
        verdicts.add((result.verdict, result.faults.outcome))
        assert any("full seeds disagree" in r for r in result.reasons)
    assert verdicts == {("partial", "reproduced")}


@pytest.mark.parametrize(
    ("label", "cause", "proxy_logs", "told"),
    [
        ("precision_fault", "mismatch_kl", ["reward"], False),
        ("precision_fault", "mismatch_kl", ["reward", "mismatch_prob_diff"], True),
        ("loss_divergence", "grad_norm", ["reward"], False),
        ("loss_divergence", "grad_norm", ["reward", "grad_norm"], True),
        ("gradient_overflow", "skipped", ["reward", "loss_scale"], True),  # overflows from halvings
    ],
)
def test_a_missing_fault_says_when_the_proxy_does_not_log_where_it_shows(
    label: str, cause: str, proxy_logs: list[str], told: bool
) -> None:
    """A proxy without the metrics the full run's fault was found in is not called healthy."""
    data = curves(400, seed=0)
    full = make_run("f", {**data, cause: np.linspace(0.1, 1.0, 400)})
    proxy = make_run(
        "p", {m: curves(400, seed=1).get(m, np.full(400, 0.1)) for m in proxy_logs}, role="proxy"
    )
    carrier = replace(diag(full, label, 200), root_cause=RootCause("climb", cause, 200))
    healthy = replace(diag(proxy), missing=diagnose(proxy).missing)  # what it cannot show
    grid = build_grid([full], proxy, buckets=CFG.buckets)
    got = faults.score([full], proxy, grid, full=[carrier], proxy_diagnosis=healthy, config=CFG)
    assert got.outcome == "fault_missing" and not got.reproduced
    assert ("the proxy is healthy" in got.explanation) is told
    assert ("cannot be told" in got.explanation) is not told


def test_a_sparse_metric_logged_at_other_steps_in_each_run_is_left_out_not_a_crash() -> None:
    """A loss scale logged at its overflows only: a burst at the start of the full run, one
    late in the proxy. Each run has enough points, the two have no step in common: the metric
    is left out with its reason (it crashed the volatility bootstrap on an empty array)."""
    n = 600
    sparse_full = np.full(n, np.nan)
    sparse_full[:12] = 2.0 ** np.arange(16, 4, -1)
    sparse_proxy = np.full(n, np.nan)
    sparse_proxy[500:512] = 2.0 ** np.arange(16, 4, -1)

    def with_sparse(name: str, seed: int, sparse: np.ndarray, role: str = "full"):  # type: ignore[no-untyped-def]
        run = make_run(name, {**curves(n, seed=seed), "loss_scale": sparse}, role=role)
        frame = run.frame.filter(
            ~((run.frame["metric"] == "loss_scale") & run.frame["value"].is_nan())
        )
        return Run(frame, run.name, run.attrs, run.mapping, list(run.events))

    c = _compare([with_sparse("f", 0, sparse_full)], with_sparse("p", 1, sparse_proxy, "proxy"))
    assert "loss_scale" not in c.metrics and "reward" in c.metrics
    assert "both have a finite value" in c.events["skipped_metrics"]["loss_scale"]


@pytest.mark.parametrize(("per_step", "hint"), [(500.0, True), (900.0, False)])
def test_a_proxy_consuming_data_at_another_rate_gets_a_hint_to_align_by_tokens(
    per_step: float, hint: bool
) -> None:
    """Half the batch: half the tokens a step, and the same data at twice the steps."""
    n = 400
    full = make_run("f", {**curves(n, seed=0), "tokens": 1000.0 * np.arange(1, n + 1)})
    proxy = make_run(
        "p", {**curves(n, seed=1), "tokens": per_step * np.arange(1, n + 1)}, role="proxy"
    )
    said = [r for r in _compare([full], proxy).reasons if "--align tokens" in r]
    assert bool(said) is hint
    if hint:
        assert "0.5x the full run's tokens per step" in said[0]
    assert not any("--align tokens" in r for r in _compare([full], proxy, align="tokens").reasons)
