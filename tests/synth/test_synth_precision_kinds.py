"""The routing, master-weight, from-the-start, broken on-policy and resume precision variants:
each shows where its truth says, only on request, and a corpus that asks for a routing variant
logs the routing shares in every run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.detectors.master_weights import grid_states
from proxydiag.errors import ConfigError
from proxydiag.evaluate.diagnose import score
from proxydiag.synth import FaultSpec, Scenario, named, simulate, write_corpus
from proxydiag.synth.corpus import DEFAULT_VARIANTS
from proxydiag.synth.view import logged_rows
from proxydiag.synth.writers import write_run

NEW = ("routing_replay_off", "routing_mismatch", "lost_master_weights")
START = ("from_start", "on_policy_nonzero")
RESUME = ("resume_shift",)


def test_routing_replay_off_drops_the_replayed_share_and_raises_the_mismatch() -> None:
    sr = simulate("routing_replay_off", seed=0)
    onset = sr.truth.onset_step or 0
    v = sr.values
    before, after = slice(0, onset - 1), slice(onset + 5, None)
    assert np.median(v["mismatch_route_replay"][before]) > 0.99
    assert np.median(v["mismatch_route_replay"][after]) < 0.85
    assert np.allclose(v["mismatch_route_replay"] + v["mismatch_route_fallback"], 1.0)
    ratio = np.median(v["mismatch_k3"][after]) / np.median(v["mismatch_k3"][before])
    assert ratio > 4  # k3 is second order: a 2x+ token mismatch is 4x+ in k3


def test_routing_mismatch_climbs_the_set_change_share_from_its_onset() -> None:
    sr = simulate("routing_mismatch", seed=1)
    onset = sr.truth.onset_step or 0
    change = sr.values["mismatch_route_change"]
    assert np.median(change[onset + 120 :]) > 4 * np.median(change[: onset - 1])
    assert np.median(change[onset - 40 : onset - 1]) < 1.5 * np.median(change[: onset - 40])


def test_lost_master_weights_puts_the_grad_norm_on_the_bf16_grid_from_its_onset() -> None:
    sr = simulate("lost_master_weights", seed=2)
    onset = sr.truth.onset_step or 0
    states = grid_states(sr.values["grad_norm"])
    assert (states[: onset - 1] == 1).sum() == 0
    kept = states[onset - 1 :]
    assert (kept[kept >= 0] == 1).all()
    assert "mismatch_route_replay" not in sr.values  # routing is logged only when asked for


def test_from_start_is_beyond_the_bound_from_the_first_step() -> None:
    sr = simulate("from_start", seed=3)
    assert sr.truth.onset_step == 1
    pd = sr.values["mismatch_prob_diff"]
    assert np.median(pd[:20]) > 0.01  # veRL's bound on the mean probability difference
    assert np.median(pd[-50:]) > 0.01
    assert np.median(sr.values["mismatch_corr"][:20]) < 0.99  # and on the Pearson correlation


def test_on_policy_nonzero_logs_exact_zeros_until_its_onset() -> None:
    sr = simulate("on_policy_nonzero", seed=5)
    onset = sr.truth.onset_step or 0
    v = sr.values
    for k in ("mismatch_prob_diff", "mismatch_k3", "mismatch_kl", "mismatch_logp_diff"):
        assert (v[k][: onset - 1] == 0.0).all(), k
        assert (v[k][onset - 1 :] != 0.0).all(), k
    assert (v["mismatch_corr"][: onset - 1] == 1.0).all()


def test_a_mismatch_of_exactly_zero_leaves_the_other_runs_as_they_were() -> None:
    """The KL estimate's noise is dropped only where the two sides agree bit for bit: every
    other variant draws and logs what it did."""
    for name in ("healthy", "sync_step", "gradual_climb"):
        a = simulate(name, seed=6).values["mismatch_kl"]
        assert np.isfinite(a).all() and (a != 0).all(), name


def test_routing_variants_need_the_routing_shares_logged() -> None:
    with pytest.raises(ConfigError, match="routing=True"):
        Scenario("x", fault=FaultSpec("routing_mismatch", 100))
    assert named("routing_mismatch").routing


def test_the_new_variants_come_only_on_request() -> None:
    assert not set(NEW + START + RESUME) & set(DEFAULT_VARIANTS)


def test_the_routing_shares_do_not_change_the_other_metrics() -> None:
    sc = named("healthy")
    plain, routed = simulate(sc, seed=4), simulate(replace(sc, routing=True), seed=4)
    assert set(routed.values) - set(plain.values) == {
        "mismatch_route_replay",
        "mismatch_route_fallback",
        "mismatch_route_change",
    }
    for k, v in plain.values.items():
        assert np.array_equal(v, routed.values[k], equal_nan=True), k


@pytest.mark.slow
def test_a_corpus_of_the_new_kinds_is_labelled_and_scored_per_kind(tmp_path: Path) -> None:
    labels = write_corpus(tmp_path, n_groups=15, seed=305, variants=list(NEW), formats=["jsonl"])
    runs = json.loads(labels.read_text())["runs"]
    assert {r["variant"] for r in runs.values()} >= set(NEW)
    # every run, healthy ones too, logs a routing share: its presence says nothing
    for name, r in runs.items():
        text = (labels.parent / r["path"] / "metrics.jsonl").read_text()
        assert "set_change_fraction" in text, name
    result = score(tmp_path)
    assert set(result.per_kind) == set(NEW), result.per_kind
    total = sum(k["support"] for k in result.per_kind.values())
    correct = sum(k["correct"] for k in result.per_kind.values())
    assert correct / total >= 0.9, result.per_kind
    assert result.per_class["healthy"]["precision"] >= 0.95


def test_logged_rows_carry_the_routing_keys_of_the_naming() -> None:
    sr = simulate(named("routing_replay_off"), seed=0)
    keys = set(logged_rows(sr, naming="verl", fmt="jsonl", log_interval=5)["key"].to_list())
    assert {"r3/replay_fraction_active", "train/router/compare_current_set_change_fraction"} <= keys
    keys = set(logged_rows(sr, naming="slime", fmt="csv", log_interval=1)["key"].to_list())
    assert "r3/skip_fraction_active" in keys


@pytest.mark.slow
def test_a_corpus_of_the_start_kinds_is_labelled_and_scored_per_kind(tmp_path: Path) -> None:
    """A fault from the first step stays there in its proxies (none early or late); each kind
    is named."""
    labels = write_corpus(tmp_path, n_groups=14, seed=404, variants=list(START), formats=["jsonl"])
    runs = json.loads(labels.read_text())["runs"]
    assert {r["variant"] for r in runs.values()} >= set(START)
    for r in runs.values():
        if r["variant"] == "from_start":
            assert r["onset_step"] == 1 and r["relation"] not in ("late", "early"), r
    result = score(tmp_path)
    assert set(result.per_kind) == set(START), result.per_kind
    for kind, k in result.per_kind.items():
        assert k["correct"] / k["support"] >= 0.9, (kind, k)


def test_a_resumed_run_logs_the_steps_past_its_checkpoint_twice(tmp_path: Path) -> None:
    """resume_shift: the JSONL holds the steps past the checkpoint as logged before the crash
    (the mismatch at its level before), then the resumed run from the checkpoint on (the
    mismatch 3-6x); a CSV the same rows in the same order."""
    sr = simulate("resume_shift", seed=7)
    onset = sr.truth.onset_step or 0
    jsonl = write_run(tmp_path / "j", sr, fmt="jsonl", naming="slime", log_interval=5)
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    steps = [r["step"] for r in records]
    back = [i for i in range(1, len(steps)) if steps[i] <= steps[i - 1]]
    assert len(back) == 1 and steps[back[0]] == (onset - 1) // 5 * 5 + 5, (back, onset)
    key = "train/train_rollout_logprob_abs_diff"
    old = [r["data"][key] for r in records[: back[0]] if r["step"] >= onset]
    new = [r["data"][key] for r in records[back[0] :]][: len(old)]
    before = [r["data"][key] for r in records if r["step"] < onset - 20]
    assert np.median(old) < 1.5 * np.median(before) < np.median(new)
    csv = write_run(tmp_path / "c", sr, fmt="csv", naming="slime", log_interval=5)
    assert pl.read_csv(csv)["step"].to_list() == steps


@pytest.mark.slow
# a CSV overflow run of the mix warns that its absent grad-norm cells read as not logged
@pytest.mark.filterwarnings("ignore::proxydiag.errors.IngestWarning")
def test_a_corpus_of_resumed_runs_is_labelled_and_scored_per_kind(tmp_path: Path) -> None:
    labels = write_corpus(
        tmp_path, n_groups=14, seed=606, variants=list(RESUME), formats=["jsonl", "csv"]
    )
    runs = json.loads(labels.read_text())["runs"]
    assert {r["variant"] for r in runs.values()} >= set(RESUME)
    result = score(tmp_path)
    assert set(result.per_kind) == set(RESUME), result.per_kind
    k = result.per_kind["resume_shift"]
    assert k["correct"] / k["support"] >= 0.9, k
    assert result.per_class["healthy"]["precision"] >= 0.95
