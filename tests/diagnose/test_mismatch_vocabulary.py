"""One mismatch vocabulary across stacks: every spelling maps to its family's canonical
quantity, policy lag stays apart, and two quantities that disagree are said to."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import mismatch
from proxydiag.diagnose.view import from_arrays
from proxydiag.metrics import AliasTable
from proxydiag.run import Run

SPELLINGS = {
    # veRL
    "rollout_corr/kl": "mismatch_kl",
    "rollout_corr/k3_kl": "mismatch_k3",
    "rollout_corr/chi2_token": "mismatch_chi2",
    "rollout_corr/rollout_is_mean": "mismatch_is_mean",
    "rollout_corr/rollout_is_eff_sample_size": "mismatch_is_ess",
    "rollout_corr/rollout_rs_masked_fraction": "mismatch_masked",
    "training/rollout_probs_diff_mean": "mismatch_prob_diff",
    "training/rollout_probs_diff_max": "mismatch_prob_diff_max",
    "training/rollout_actor_probs_pearson_corr": "mismatch_corr",
    # slime / miles
    "train/train_rollout_kl": "mismatch_k3",
    "train/train_rollout_logprob_abs_diff": "mismatch_logp_diff",
    "train/mis_k3_kl": "mismatch_k3",
    # NeMo-RL
    "train/token_mult_prob_error": "mismatch_prob_error",
    "train/max_seq_mult_prob_error": "mismatch_prob_error_max",
    "train/gen_kl_error": "mismatch_kl",
    "train/sampling_importance_ratio": "mismatch_is_mean",
    "train/num_masked_seqs_by_logprob_error": "mismatch_masked_count",
    "train/is_oob_ratio": "mismatch_masked",
    # OpenRLHF
    "train/vllm_kl": "mismatch_kl",
    # SkyRL
    "policy/rollout_train_logprobs_abs_diff_mean": "mismatch_logp_diff",
    "policy/rollout_train_logprobs_abs_diff_max": "mismatch_logp_diff_max",
    # AReaL
    "compute_logp/r3/rollout_train_k3_kl/avg": "mismatch_k3",
    "compute_logp/r3/rollout_train_logp_abs_diff/avg": "mismatch_logp_diff",
    "compute_logp/r3/rollout_train_extreme_frac_tau2/avg": "mismatch_tail_ln2",
    "compute_logp/r3/rollout_train_extreme_frac_tau5/avg": "mismatch_tail_ln5",
    "ppo_actor/update/rs_filtered_fraction": "mismatch_masked",
    # xtuner
    "mismatch/mismatch_k3_kl": "mismatch_k3",
    "rollout_is/mismatch/rollout_is_eff_sample_size": "mismatch_is_ess",
    # TRL
    "sampling/sampling_logp_difference/mean": "mismatch_logp_diff",
}
#: the learner against its own old policy: not rollout-vs-learner mismatch
POLICY_LAG = [
    "actor/ppo_kl",
    "train_metrics/worker_0/step_avg_reduced_train_policy_kl1",
    "train_metrics/worker_0/step_avg_reduced_train_policy_kl3",
    "train/ess_ratio",
    "train/ois",
]


@pytest.mark.parametrize("key", sorted(SPELLINGS))
def test_every_stack_spelling_maps_to_its_family(key: str) -> None:
    table = AliasTable.default()
    assert table.resolve([key])[key] == SPELLINGS[key]
    spec = table.specs[SPELLINGS[key]]
    assert spec.family and spec.scale  # every mismatch quantity says what its values mean


@pytest.mark.parametrize("key", POLICY_LAG)
def test_policy_lag_is_not_mismatch(key: str) -> None:
    assert not AliasTable.default().resolve([key])[key].startswith("mismatch")


def _run(series: dict[str, np.ndarray], steps: np.ndarray) -> Run:
    rows = [
        {"step": int(s), "key": k, "value": float(v), "wall_time": None}
        for k, vs in series.items()
        for s, v in zip(steps, vs, strict=True)
    ]
    raw = pl.DataFrame(
        rows,
        schema={"step": pl.Int64, "key": pl.Utf8, "value": pl.Float64, "wall_time": pl.Float64},
    )
    return Run.from_raw(raw, name="t", source="<test>", fmt="test", attrs={})


def test_a_kl_climb_beside_a_flat_probability_difference_is_said() -> None:
    rng = np.random.default_rng(3)
    t = np.arange(400)
    k3 = 2e-4 * np.exp(rng.normal(0, 0.15, t.size)) * np.where(t < 200, 1.0, 25.0)
    diff = 3e-3 * np.exp(rng.normal(0, 0.05, t.size))
    rv = from_arrays({"mismatch_k3": (t, k3), "mismatch_prob_diff": (t, diff)})
    events = mismatch.detect(rv, DiagnoseConfig())
    kinds = {(e.kind, e.metric) for e in events}
    assert ("mismatch_step", "mismatch_k3") in kinds or ("mismatch_climb", "mismatch_k3") in kinds
    said = [e for e in events if e.kind == "mismatch_disagree"]
    assert len(said) == 1 and said[0].metric == "mismatch_prob_diff"
    assert "disagree" in said[0].evidence and said[0].severity == "warning"


def test_two_quantities_that_agree_say_nothing_more() -> None:
    rng = np.random.default_rng(4)
    t = np.arange(400)
    step = np.where(t < 200, 1.0, 6.0)
    k3 = 2e-4 * np.exp(rng.normal(0, 0.15, t.size)) * step**2
    diff = 3e-3 * np.exp(rng.normal(0, 0.05, t.size)) * step
    events = mismatch.detect(
        from_arrays({"mismatch_k3": (t, k3), "mismatch_prob_diff": (t, diff)}), DiagnoseConfig()
    )
    assert not [e for e in events if e.kind == "mismatch_disagree"]


def test_a_multiplicative_error_beyond_its_bound_from_the_start_is_a_precision_fault() -> None:
    rng = np.random.default_rng(5)
    t = np.arange(300)
    err = 1.08 + 0.003 * rng.normal(size=t.size)
    d = diagnose(_run({"train/token_mult_prob_error": err, "loss": 2 - t / 1000}, t))
    assert d.label == "precision_fault", [e.evidence for e in d.events]


def test_a_miles_k3_climb_read_from_its_own_name_is_a_precision_fault() -> None:
    rng = np.random.default_rng(6)
    t = np.arange(300)
    kl = 1e-4 * np.exp(rng.normal(0, 0.1, t.size)) * np.where(t < 180, 1.0, 1 + (t - 180) / 4)
    d = diagnose(_run({"train/train_rollout_kl": kl, "loss": 2 - t / 1000}, t))
    assert d.label == "precision_fault" and d.onset_step is not None
    assert abs(d.onset_step - 180) <= 20
