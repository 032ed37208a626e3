"""Properties (hypothesis): self-comparison scores 1, progress alignment is invariant to step
rescaling, the discrepancies are symmetric where they should be."""

from __future__ import annotations

import numpy as np
from _fidelity_runs import compare_healthy, curves, make_run
from hypothesis import given, settings
from hypothesis import strategies as st

from proxydiag.fidelity.api import compare
from proxydiag.fidelity.config import FidelityConfig
from proxydiag.fidelity.tests.increments import ks_statistic
from proxydiag.fidelity.tests.shape import area
from proxydiag.fidelity.tests.trend import spearman
from proxydiag.fidelity.tests.volatility import log_ratio

CFG = FidelityConfig(n_boot=50)
arrays = st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=8, max_size=60).map(np.array)


def _healthy(full, proxy, **kw):  # type: ignore[no-untyped-def]
    return compare_healthy(full, proxy, config=CFG, **kw)


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000), n=st.integers(60, 400), align=st.sampled_from(["step", "progress"])
)
def test_self_comparison_scores_one(seed: int, n: int, align: str) -> None:
    run = make_run("r", curves(n, seed=seed))
    c = _healthy([run], run, align=align)
    assert c.fidelity == 1.0 and c.verdict == "faithful"


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.integers(2, 50), offset=st.integers(0, 10_000))
def test_progress_alignment_is_invariant_to_step_rescaling(
    seed: int, scale: int, offset: int
) -> None:
    data = curves(300, seed=seed)
    full = make_run("full", data)
    proxy = make_run("proxy", curves(300, seed=seed + 1))
    rescaled = make_run("proxy", curves(300, seed=seed + 1), steps=np.arange(300) * scale + offset)
    a = _healthy([full], proxy, align="progress")
    b = _healthy([full], rescaled, align="progress")
    assert a.fidelity == b.fidelity
    assert {m: f.score for m, f in a.metrics.items()} == {m: f.score for m, f in b.metrics.items()}


@given(x=arrays, y=arrays)
def test_discrepancies_are_symmetric(x: np.ndarray, y: np.ndarray) -> None:
    n = min(x.size, y.size)
    x, y = x[:n], y[:n]
    assert spearman(x, y) == spearman(y, x)
    assert abs(area(x, y) - area(y, x)) < 1e-9
    assert ks_statistic(x, y) == ks_statistic(y, x)
    assert abs(
        log_ratio(x, y, log_scale=False) + log_ratio(y, x, log_scale=False)
    ) < 1e-9 or not np.isfinite(log_ratio(x, y, log_scale=False))


def test_a_subnormal_spread_is_no_spread() -> None:
    """Hypothesis found it: a spread of 1e-313 scaled a curve beyond the float range (area
    NaN, a volatility log-ratio overflowing before its log)."""
    tiny = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.2250738585e-313])
    zeros = np.zeros(8)
    assert area(tiny, tiny) == 0.0
    assert area(zeros, tiny) == area(tiny, zeros) and np.isfinite(area(zeros, tiny))
    subnormal = np.array([0.0, 1e-320, 0.0, 1e-320, 0.0])
    assert log_ratio(subnormal, np.array([0.0, 1, 0, 1, 0]), log_scale=False) > 700


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 1000))
def test_swapping_two_seeds_keeps_the_verdict(seed: int) -> None:
    a = make_run("a", curves(300, seed=seed))
    b = make_run("b", curves(300, seed=seed + 1))
    assert _healthy([a], b).verdict == _healthy([b], a).verdict == "faithful"


METRICS = ("reward", "entropy", "grad_norm", "kl", "pg_loss")


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    all_nan=st.sets(st.sampled_from(METRICS)),
    sprinkled=st.floats(0.0, 0.2),
)
def test_identical_runs_score_one_whatever_their_nonfinite_values(
    seed: int, all_nan: set[str], sprinkled: float
) -> None:
    """NaN/inf are data: identical runs score 1 and are faithful (diagnosed for real). A metric
    with no finite point is undecidable, left out and named; with every metric undecidable the
    identical symptoms (non-finite bursts) decide."""
    rng = np.random.default_rng(seed)
    data = curves(200, seed=seed)
    for name, values in data.items():
        hit = rng.random(values.size) < sprinkled
        values[hit] = rng.choice([np.nan, np.inf, -np.inf], size=int(hit.sum()))
        if name in all_nan:
            values[:] = np.nan
    run = make_run("r", data)
    c = compare([run], run, config=CFG)
    assert (c.fidelity, c.verdict) == (1.0, "faithful"), c.reasons
    assert set(c.metrics) == set(METRICS) - all_nan
    if all_nan:
        listed = ", ".join(sorted(all_nan))
        assert f"undecidable, left out: {listed} (no finite point in any run)" in c.reasons


def test_identical_all_nan_runs_are_faithful_and_say_why() -> None:
    """The reported case: two identical all-NaN runs were "partial 0.50"."""
    run = make_run("r", {"loss": np.full(100, np.nan), "reward": np.full(100, np.nan)})
    c = compare([run], run, config=CFG)
    assert (c.fidelity, c.verdict, c.metrics) == (1.0, "faithful", {})
    assert c.reasons == (
        "no curve could be compared; the symptoms co-occur (events score 1.00) and the fault "
        "comparison agrees",
        "undecidable, left out: loss, reward (no finite point in any run)",
    )
