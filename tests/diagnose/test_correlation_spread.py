"""The Pearson correlation of the token probabilities moves with their spread: a policy that
sharpens lowers it with the same sampler/learner differences. Series are computed from
simulated token probabilities (a learner's, and a sampler's that differ from them by a
rounding-sized log-probability error), the way veRL computes its debug metrics."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.run import Run

N_STEPS = 150
TOKENS = 1024


def _metrics(
    rng: np.random.Generator, *, sharpen_at: int, error_at: int | None, error: float
) -> dict[str, np.ndarray]:
    """Per step, veRL's probability difference, k3 and Pearson correlation of a batch of
    token probabilities. The policy sharpens from ``sharpen_at`` (tokens pile up near
    probability 1); from ``error_at`` the sampler's log-probability error is ``error``
    instead of 2e-3 (a bf16-sized rounding error)."""
    out: dict[str, list[float]] = {"diff": [], "k3": [], "corr": []}
    for t in range(N_STEPS):
        sharp = 2.0 + (40.0 * (t - sharpen_at) / (N_STEPS - sharpen_at) if t > sharpen_at else 0)
        p_learner = rng.beta(sharp, 1.0, TOKENS).clip(1e-6, 1.0)
        scale = error if error_at is not None and t >= error_at else 2e-3
        log_ratio = rng.normal(0.0, scale, TOKENS)  # log(pi_learner / pi_rollout)
        p_rollout = (p_learner * np.exp(-log_ratio)).clip(1e-6, 1.0)
        out["diff"].append(float(np.mean(np.abs(p_learner - p_rollout))))
        out["k3"].append(float(np.mean(np.exp(log_ratio) - log_ratio - 1.0)))
        out["corr"].append(float(np.corrcoef(p_learner, p_rollout)[0, 1]))
    return {k: np.asarray(v) for k, v in out.items()}


def _run(series: dict[str, np.ndarray]) -> Run:
    keys = {
        "diff": "training/rollout_probs_diff_mean",
        "k3": "rollout_corr/k3_kl",
        "corr": "training/rollout_actor_probs_pearson_corr",
    }
    steps = np.arange(N_STEPS)
    raw = pl.concat(
        pl.DataFrame({"step": steps, "key": [keys[k]] * N_STEPS, "value": v})
        for k, v in series.items()
    ).with_columns(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    return Run.from_raw(raw, name="r", source="<test>", fmt="test", attrs={})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_sharpening_policy_lowers_the_correlation_and_is_no_precision_fault(seed: int) -> None:
    rng = np.random.default_rng(seed)
    series = _metrics(rng, sharpen_at=100, error_at=None, error=2e-3)
    # the correlation's disagreement grows several-fold with nothing else changing
    one_minus_r = 1.0 - series["corr"]
    assert np.median(one_minus_r[-10:]) > 4 * np.median(one_minus_r[:50])
    d = diagnose(_run(series))
    assert d.label == "healthy", [(e.kind, e.metric, e.onset_step) for e in d.events]
    said = [e for e in d.events if e.metric == "mismatch_corr" and e.severity == "warning"]
    assert all("spread" in e.evidence for e in said)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_sampler_error_that_grows_is_still_found_on_a_sharpening_policy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = diagnose(_run(_metrics(rng, sharpen_at=100, error_at=80, error=2e-2)))
    assert d.label == "precision_fault"
    assert d.onset_step is not None and abs(d.onset_step - 80) <= 5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_correlation_beyond_its_bound_is_a_fault_whatever_the_others_say(seed: int) -> None:
    """Broken plumbing: the correlation collapses (veRL reports 0.05-0.62) while the
    probability difference and k3 are not logged over the same tokens and stay flat."""
    rng = np.random.default_rng(seed)
    series = _metrics(rng, sharpen_at=N_STEPS, error_at=None, error=2e-3)
    series["corr"][90:] = rng.uniform(0.3, 0.6, N_STEPS - 90)
    d = diagnose(_run(series))
    assert d.label == "precision_fault"
    assert d.onset_step is not None and abs(d.onset_step - 90) <= 5
