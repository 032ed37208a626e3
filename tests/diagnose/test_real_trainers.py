"""The corpus written by real trainers (tests/data/real/) and the real public logs.

Every source of every run (TensorBoard, MLflow, trainer_state.json, console) must be read,
labelled as its run is, with the onset within the tolerance ``bench diagnose`` uses:
max(5 steps, the log interval, 2% of the run).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.diagnose.config import DiagnoseConfig
from proxydiag.diagnose.detectors import nonfinite
from proxydiag.diagnose.view import from_arrays
from proxydiag.errors import IngestWarning
from proxydiag.evaluate.diagnose import score
from proxydiag.frame import raw
from proxydiag.ingest import read_run
from proxydiag.run.build import build_run
from tests._paths import TESTS

REAL = TESTS / "data" / "real"
LABELS = json.loads((REAL / "labels.json").read_text(encoding="utf-8"))["runs"]


@pytest.fixture(scope="module")
def corpus_score() -> dict[str, dict[str, object]]:
    return {
        r.run: {
            "truth": r.truth,
            "predicted": r.predicted,
            "hit": r.onset_hit,
            "onset": r.onset_predicted,
        }
        for r in score(REAL).runs
    }


def test_every_run_has_all_four_sources() -> None:
    runs: dict[str, set[str]] = {}
    for entry in LABELS.values():
        runs.setdefault(entry["path"].split("/")[0], set()).add(entry["format"])
    assert len(runs) == 10
    assert all(
        formats == {"tensorboard", "mlflow", "trainer_state", "console"}
        for formats in runs.values()
    ), runs


@pytest.mark.parametrize("source", sorted(LABELS))
def test_each_source_gets_its_label_and_onset(
    corpus_score: dict[str, dict[str, object]], source: str
) -> None:
    got = corpus_score[source]
    assert got["predicted"] == got["truth"], got
    if got["truth"] != "healthy":
        assert got["hit"], got


def test_fp16_runs_really_overflowed_and_the_healthy_ones_still_learn() -> None:
    """The fp16 runs are real: their grad norms are inf/NaN where the scaler skipped."""
    state = json.loads((REAL / "sft-fp16-dynamic-e8" / "trainer_state.json").read_text())
    logs = [h for h in state["log_history"] if "loss" in h]
    skipped = [h["step"] for h in logs if not np.isfinite(h["grad_norm"])]
    assert skipped[:15] == list(range(1, 16)) and len(skipped) > 15  # burst, then isolated
    assert logs[0]["loss_scale"] == 2.0**31 and logs[-1]["loss"] < logs[0]["loss"] / 3


def test_console_of_transformers_5_steps_from_tqdm_and_summary_kept_out() -> None:
    run = read_run(REAL / "sft-healthy-e8" / "console.log")
    loss = run.frame.filter(pl.col("metric") == "loss")
    assert loss["step"].to_list() == list(range(1, 151))
    assert "train_runtime" not in set(run.frame["metric"].to_list())
    assert run.attrs["run_summary"]["train_runtime"] > 0
    assert any(e.kind == "step_source" and "tqdm" in e.evidence for e in run.events)


def test_tensorboard_logdir_named_runs_takes_the_run_name_and_sidecar_of_its_parent() -> None:
    run = read_run(REAL / "grpo-healthy-e4" / "runs")
    assert run.name == "grpo-healthy-e4" and run.attrs["experts_kept"] == 4
    assert "train/train_runtime" not in set(run.frame["key"].to_list())


def test_experts_kept_from_the_model_config_in_mlflow_params() -> None:
    run = read_run(REAL / "grpo-healthy-e8" / "mlflow.db")
    assert run.attrs["experts_kept"] == 8
    assert run.attrs.get("experts_kept_from") == "the model config in the run's params"


def test_calibration_descent_of_a_scaler_that_starts_high_is_not_persistent() -> None:
    """HF + torch GradScaler from 2^32: no scale or precision logged, 14 skipped steps while
    it halves, then isolated skips; reward rises. The descent is calibration."""
    steps = np.arange(1, 201)
    grad = np.full(200, 0.5)
    grad[:14] = np.inf
    grad[[21, 59, 109, 149, 189]] = np.inf
    view = from_arrays(
        {"grad_norm": (steps, grad), "reward": (steps, np.linspace(0.65, 0.99, 200))}
    )
    events = nonfinite.detect(view, DiagnoseConfig())
    assert [e.severity for e in events] == ["warning"]
    # the run says neither fp16 nor a loss scale: the calibration is named as a possibility
    assert "the burst up to step 14 may be an fp16 loss scaler's calibration" in events[0].evidence
    # a scale that never settles is a fault from the first step
    stuck = np.full(200, np.inf)
    stuck[[30, 70, 120]] = 0.5
    events = nonfinite.detect(from_arrays({"grad_norm": (steps, stuck)}), DiagnoseConfig())
    assert [(e.severity, e.onset_step) for e in events] == [("critical", 1)]


def test_a_rolled_back_divergence_is_diagnosed_and_named_first() -> None:
    """Diverged at 150, rolled back to 120; the final timeline recovers."""
    first = np.arange(1, 171)
    loss1 = np.where(first < 150, 2.0 - first * 1e-3, 2.0 + (first - 149) * 0.5)
    second = np.arange(120, 301)
    loss2 = 2.0 - second * 1e-3
    steps = np.r_[first, second]
    run = build_run(
        raw(steps, ["loss"] * steps.size, np.r_[loss1, loss2]), name="rb", source="rb", fmt="test"
    )
    assert [s.attrs["rolled_back_to"] for s in run.superseded] == [120]
    d = diagnose(run)
    assert d.label == "loss_divergence" and 145 <= d.onset_step <= 155
    assert d.rollbacks[0]["rolled_back_to"] == 120 and d.rollbacks[0]["final_recovered"]
    assert d.events[0].kind == "rollback" and "rolled back to step 120" in d.events[0].evidence
    assert d.to_dict()["rollbacks"][0]["superseded_until"] == 170


# the real public logs (skipped without ../shared/realruns)
DSCHAT = (
    "step1_supervised_finetuning__opt-1.3b-globalBatchSize128.log",
    "step2_dpo_finetuning__opt-350M_globalBatchSize-32.log",
    "step2_reward_model_finetuning__opt-350m_globalBatchSize-64.log",
    "step3_rlhf_finetuning__actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log",
)


@pytest.mark.parametrize("name", DSCHAT)
def test_healthy_deepspeed_chat_logs_stay_healthy(realruns: Path, name: str) -> None:
    assert diagnose(read_run(realruns / "deepspeed_chat" / name)).label == "healthy"


@pytest.mark.parametrize(
    "name", ["tr8-104B-wide__chronicle-excerpts.log", "tr8b-104B__chronicle-excerpts.log"]
)
def test_bigscience_blow_ups_are_flagged(realruns: Path, name: str) -> None:
    with warnings.catch_warnings():
        # tr8b's excerpt has one line cut short ('learning rate:' without a value): warned
        warnings.simplefilter("ignore", IngestWarning)
        d = diagnose(read_run(realruns / "bigscience" / name))
    assert d.label == "loss_divergence"


def test_tr8_wide_names_the_rollback_it_came_from(realruns: Path) -> None:
    d = diagnose(read_run(realruns / "bigscience" / "tr8-104B-wide__chronicle-excerpts.log"))
    assert d.onset_step == 7010 and d.rollbacks[0]["rolled_back_to"] == 6900
    assert "rolled back to step 6900" in d.events[0].evidence


def test_random_ltd_nan_perplexity_is_a_nonfinite_loss(realruns: Path) -> None:
    d = diagnose(
        read_run(realruns / "deepspeed_chat" / "random_ltd__train_with_kernel__d0df7a8c.log")
    )
    assert d.label != "healthy" and d.onset_step == 4
    assert d.root_cause is not None and d.root_cause.metric == "perplexity"
