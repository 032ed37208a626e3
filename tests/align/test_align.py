"""Alignment: axes, resampling at the analysis resolution, the grid, registration, the noise
baseline."""

from __future__ import annotations

import _minmax_reference
import numpy as np
import pytest
from _fidelity_runs import curves, make_run
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from proxydiag.align import progress, step, tokens
from proxydiag.align._register import register
from proxydiag.align.alignment import align_runs
from proxydiag.align.grid import build_grid, resample_grid
from proxydiag.align.noise import baseline, circular_block_indices, pseudo_seeds
from proxydiag.align.resample import minmax_downsample, resample
from proxydiag.align.smooth import smooth
from proxydiag.errors import AnalysisError
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.report import _downsample


def test_step_and_progress_axes() -> None:
    run = make_run("r", {"loss": np.ones(5)}, steps=np.array([100, 150, 200, 250, 300]))
    assert step.axis(run)(np.array([100, 300])).tolist() == [100.0, 300.0]
    assert progress.axis(run)(np.array([100, 200, 300])).tolist() == [0.0, 0.5, 1.0]


def test_tokens_axis_from_cumulative_counter() -> None:
    run = make_run("r", {"loss": np.ones(4), "tokens": np.array([0.0, 1000, 3000, 6000])})
    ax = tokens.axis(run, counter=tokens.counter_for([run]))
    assert ax(np.array([0, 1, 1.5, 3])).tolist() == [0.0, 1000.0, 2000.0, 6000.0]


def test_tokens_alignment_needs_a_counter_in_every_run() -> None:
    a = make_run("a", {"loss": np.ones(4), "tokens": np.arange(4.0)})
    b = make_run("b", {"loss": np.ones(4)})
    with pytest.raises(AnalysisError, match=r"run b-.*'tokens' or 'samples'.*--align step"):
        build_grid([a], b, align="tokens")


def test_resample_keeps_one_logged_point_and_the_envelope() -> None:
    x = np.arange(8.0)
    v = np.array([1, 5, 2, 2, np.nan, 3, 9, np.inf])
    r = resample(x, v, np.linspace(0, 8, 3))
    assert r.sample.tolist() == [2.0, 9.0]  # the last finite point of each bucket
    assert r.envelope.tolist() == [1.0, 5.0, 3.0, 9.0]
    assert r.n_finite == 6
    assert r.nonfinite_x.tolist() == [4.0, 7.0]  # kept as positions, never interpolated


def test_a_single_spike_survives_the_analysis_resolution() -> None:
    values = np.ones(20_000)
    values[12_345] = 100.0
    r = resample(np.arange(20_000.0), values, np.linspace(0, 20_000, 1001))
    assert r.envelope.size == 2000 and r.envelope.max() == 100.0
    assert minmax_downsample(r.envelope, max_points=500).max() == 100.0


def test_grid_resolution_overlap_and_rows() -> None:
    full = make_run("full", curves(3000, seed=0))
    seed = make_run("seed", {"reward": curves(1000, seed=1)["reward"]})  # shorter, one metric
    proxy = make_run("proxy", curves(2500, seed=2), role="proxy")
    grid = build_grid([full, seed], proxy, buckets=FidelityConfig().buckets)
    assert grid.x_range == (0.0, 2499.0)
    assert grid.overlap.startswith("overlap: step 0–2499")
    reward, kl = grid.metrics["reward"], grid.metrics["kl"]
    assert reward.buckets == 1000 and reward.envelope.shape == (3, 2000)
    assert reward.rows == (0, 1, 2) and kl.rows == (0, 2) and kl.n_full == 1
    assert np.isnan(reward.sample[1, 500:]).all()  # the seed stopped at step 999: gaps, no guesses


def test_grid_never_has_more_buckets_than_the_sparsest_run_has_points() -> None:
    full = make_run("full", curves(1000, seed=0))
    proxy = make_run(
        "proxy", {k: v[::10] for k, v in curves(1000, seed=1).items()}, steps=np.arange(0, 1000, 10)
    )
    assert build_grid([full], proxy).metrics["reward"].buckets == 100


def test_progress_alignment_maps_rescaled_steps_onto_the_same_grid() -> None:
    data = curves(500, seed=3)
    full = make_run("full", data)
    proxy = make_run("proxy", data, steps=np.arange(500) * 4 + 1000)
    grid = build_grid([full], proxy, align="progress")
    assert grid.overlap.startswith("progress:")
    np.testing.assert_array_equal(
        grid.metrics["reward"].sample[0], grid.metrics["reward"].sample[1]
    )


def test_register_warps_the_axis_not_the_values() -> None:
    ax = step.axis(make_run("r", {"loss": np.ones(101)}))
    warped = register(ax, first_step=0, last_step=100, onset_step=60, to_position=50)
    assert warped is not None
    assert warped(np.array([0, 60, 100])).tolist() == [0.0, 50.0, 100.0]
    assert register(ax, first_step=0, last_step=100, onset_step=60, to_position=150) is None


def test_smooth_ignores_gaps() -> None:
    out = smooth(np.array([1.0, np.nan, 3.0, 5.0]), window_points=3)
    assert out[0] == 1.0 and np.isnan(out[1]) and out[2] == 4.0 and out[3] == 4.0


def test_circular_blocks_are_runs_of_consecutive_positions() -> None:
    idx = circular_block_indices(100, n_rows=50, block_points=10, rng=np.random.default_rng(0))
    steps = np.diff(idx.reshape(50, 10, 10), axis=2)
    assert idx.shape == (50, 100)
    assert np.isin(steps, [1, -99]).all()


def test_baseline_uses_seed_pairs_or_pseudo_seeds() -> None:
    rng = np.random.default_rng(0)
    seeds = np.vstack([curves(400, seed=s)["reward"] for s in range(3)])
    assert (
        len(baseline(seeds, n_pseudo_seeds=8, trend_fraction=0.15, block_points=8, rng=rng).pairs)
        == 3
    )
    one = baseline(seeds[:1], n_pseudo_seeds=8, trend_fraction=0.15, block_points=8, rng=rng)
    assert one.kind == "bootstrap" and len(one.pairs) == 4


def test_pseudo_seeds_keep_the_trend_and_the_residual_distribution() -> None:
    rng = np.random.default_rng(1)
    curve = np.linspace(0, 10, 2000) + rng.normal(scale=0.5, size=2000)
    curve[7] = np.nan
    ps = pseudo_seeds(curve, n=6, trend_fraction=0.1, block_points=12, rng=rng)
    assert ps.shape == (6, 2000) and np.isnan(ps[:, 7]).all()
    assert abs(np.nanmean(ps) - np.nanmean(curve)) < 0.05
    resid = ps[:, 1000:1200] - np.linspace(0, 10, 2000)[1000:1200]
    assert 0.4 < float(np.std(resid)) < 0.6


def test_tokens_alignment_compares_at_equal_data_consumed() -> None:
    tok_full = np.arange(1000) * 1000.0
    tok_proxy = np.arange(500) * 2000.0  # a proxy with twice the batch: half the steps
    curve = lambda tok: 1 - np.exp(-tok / 3e5)  # noqa: E731 - the same curve over tokens
    full = make_run("full", {"reward": curve(tok_full), "tokens": tok_full})
    proxy = make_run("proxy", {"reward": curve(tok_proxy), "tokens": tok_proxy})
    grid = build_grid([full], proxy, align="tokens")
    reward = grid.metrics["reward"]
    assert grid.unit == "tokens" and grid.x_range == (0.0, 998_000.0)
    assert reward.buckets == 500
    # equal up to where in its bucket each run last logged: one full-run interval (1,000 tokens)
    np.testing.assert_allclose(reward.sample[0], reward.sample[1], atol=1000 / 3e5 + 1e-9)


def test_registering_the_alignment_then_resampling_once_equals_build_grid() -> None:
    full = make_run("full", curves(2000, seed=0))
    proxy = make_run("proxy", curves(1800, seed=2), role="proxy")
    aligned = align_runs([full], proxy)
    registered = aligned.registered(proxy, onset_step=900.0, full_progress=0.5)
    once = resample_grid(registered, [full], proxy)
    shortcut = build_grid([full], proxy, register_onsets=(900.0, 0.5))
    assert once.overlap == shortcut.overlap and "warped" in once.overlap
    assert once.x_range == aligned.x_range  # the range is the one found before the warp
    for name, mg in shortcut.metrics.items():
        np.testing.assert_array_equal(once.metrics[name].sample, mg.sample)
        np.testing.assert_array_equal(once.metrics[name].envelope, mg.envelope)


def test_a_phase_is_resampled_on_its_own_range_at_its_own_resolution() -> None:
    data = curves(2000, seed=0)
    data["loss"] = np.where(np.arange(2000) > 1000, np.nan, data["reward"])  # NaN after a fault
    full, proxy = make_run("full", data), make_run("proxy", data, role="proxy")
    aligned = align_runs([full], proxy)
    whole = resample_grid(aligned, [full], proxy, buckets=1000)
    early = resample_grid(aligned, [full], proxy, buckets=1000, x_range=(0.0, 999.0))
    assert whole.metrics["loss"].buckets == 1000 and early.x_range == (0.0, 999.0)
    assert early.metrics["loss"].buckets == 1000  # not the 500 the whole range leaves it
    assert bool(np.isfinite(early.metrics["loss"].sample).all())


# --- the min/max reduction shared with report.downsample: oracle against the two copies ----

_ties = st.sampled_from([0.0, -0.0, 1.0, 2.0, -1.0])  # few values: many ties, both zeros
_any = st.one_of(_ties, st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=300, deadline=None)
@given(
    values=arrays(np.float64, st.integers(0, 120), elements=_any),
    max_points=st.integers(2, 130),
)
def test_minmax_downsample_equals_its_previous_copy(values: np.ndarray, max_points: int) -> None:
    new = minmax_downsample(values, max_points=max_points)
    old = _minmax_reference.minmax_downsample(values, max_points=max_points)
    assert new.dtype == old.dtype and new.tobytes() == old.tobytes()


@settings(max_examples=300, deadline=None)
@given(
    values=arrays(
        np.float64, st.integers(0, 400), elements=st.one_of(_ties, st.floats(-1e300, 1e300))
    ),
    n_buckets=st.integers(1, 150),
)
def test_report_minmax_indices_equal_its_previous_copy(values: np.ndarray, n_buckets: int) -> None:
    new = _downsample.minmax_indices(values, n_buckets=n_buckets)
    old = _minmax_reference.minmax_indices(values, n_buckets=n_buckets)
    assert new.dtype == old.dtype and new.tolist() == old.tolist()


def test_minmax_reductions_equal_their_previous_copies_on_long_series() -> None:
    rng = np.random.default_rng(7)
    for n in (1_999, 2_000, 20_000, 100_003):
        y = np.round(rng.normal(size=n), 1)  # rounded: ties in most buckets
        y[rng.random(n) < 0.01] = np.nan
        for points in (500, 2_000):
            assert minmax_downsample(y, max_points=points).tobytes() == (
                _minmax_reference.minmax_downsample(y, max_points=points).tobytes()
            )
        finite = y[np.isfinite(y)]
        assert np.array_equal(
            _downsample.minmax_indices(finite, n_buckets=1000),
            _minmax_reference.minmax_indices(finite, n_buckets=1000),
        )


def test_series_are_the_same_whatever_the_row_order_of_the_frame() -> None:
    """Metric blocks are sliced out of the columns; a frame whose metrics interleave (or
    whose steps are out of order) is partitioned instead: the same series either way."""
    import dataclasses

    from proxydiag.align.grid import shared_series

    data = {"loss": np.r_[1.0, np.nan, 3.0, np.inf, 5.0], "reward": np.arange(5.0)}
    run = make_run("r", data)
    shuffled = run.frame.sample(fraction=1.0, shuffle=True, seed=3)
    other = dataclasses.replace(run, frame=shuffled)
    for got, want in zip(shared_series([other], other), shared_series([run], run), strict=True):
        assert got.keys() == want.keys() == {"loss", "reward"}
        for name in got:
            assert np.array_equal(got[name][0], want[name][0])
            assert np.array_equal(got[name][1], want[name][1], equal_nan=True)
            assert got[name][0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
