"""The kind of a precision fault, read from the shape of the mismatch that decided it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

from proxydiag.diagnose.api import diagnose
from proxydiag.evaluate.diagnose import score
from proxydiag.run import Run
from proxydiag.synth.corpus import write_corpus
from tests._paths import SCHEMAS

N = 400


def _run(series: dict[str, np.ndarray], steps: np.ndarray | None = None) -> Run:
    steps = np.arange(N) if steps is None else steps
    frames = [
        pl.DataFrame({"step": steps, "key": [k] * len(steps), "value": v.astype(float)})
        for k, v in series.items()
    ]
    raw = pl.concat(frames).with_columns(pl.lit(None, dtype=pl.Float64).alias("wall_time"))
    return Run.from_raw(raw, name="t", source="<test>", fmt="test", attrs={})


def _noise(seed: int, scale: float = 0.08) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).normal(0, scale, N))


def _loss() -> np.ndarray:
    return 2.0 - np.arange(N) / 1000


def _kind(run: Run) -> tuple[str, str | None]:
    d = diagnose(run)
    kind = d.precision_kind or {}
    jsonschema.validate(d.to_dict(), json.loads((SCHEMAS / "diagnosis.schema.json").read_text()))
    return d.label, kind.get("kind")


def test_a_step_that_stays_is_a_weight_sync() -> None:
    t = np.arange(N)
    d = 0.003 * _noise(1) * np.where(t < 200, 1.0, 6.0)
    assert _kind(_run({"training/rollout_probs_diff_mean": d, "loss": _loss()})) == (
        "precision_fault",
        "weight_sync",
    )


def test_a_gradual_climb_is_a_drift() -> None:
    t = np.arange(N)
    d = 0.003 * _noise(2) * (1 + np.clip(t - 200, 0, None) / 25)
    assert _kind(_run({"train/train_rollout_logprob_abs_diff": d, "loss": _loss()})) == (
        "precision_fault",
        "drift",
    )


def test_a_bump_that_comes_back_is_an_export_lag() -> None:
    t = np.arange(N)
    bump = np.where((t >= 200) & (t < 300), 1 + 6 * np.sin(np.pi * (t - 200) / 100), 1.0)
    d = 0.01 * _noise(3) * bump
    assert _kind(_run({"policy/rollout_train_logprobs_abs_diff_mean": d, "loss": _loss()})) == (
        "precision_fault",
        "export_lag",
    )


def test_a_climb_reset_at_every_sync_is_a_sawtooth() -> None:
    t = np.arange(N)
    phase = np.where(t >= 160, np.mod(t - 160, 30) / 30, 0.0)
    d = 0.01 * _noise(4, 0.04) * (1 + 7 * phase)
    assert _kind(_run({"train/train_rollout_logprob_abs_diff": d, "loss": _loss()})) == (
        "precision_fault",
        "sync_sawtooth",
    )


def test_beyond_the_bound_from_the_first_step_is_from_start() -> None:
    err = 1.09 * _noise(5, 0.002)
    label, kind = _kind(_run({"train/token_mult_prob_error": err, "loss": _loss()}))
    assert (label, kind) == ("precision_fault", "from_start")


def test_a_zero_mismatch_that_stops_being_zero_is_on_policy_broken() -> None:
    t = np.arange(N)
    d = np.where(t < 150, 0.0, 0.004 * _noise(6))
    label, kind = _kind(_run({"train/train_rollout_logprob_abs_diff": d, "loss": _loss()}))
    assert (label, kind) == ("precision_fault", "on_policy_nonzero")


def test_a_shift_right_after_a_resume_is_a_resume_shift() -> None:
    """Logged to step 260, resumed from the checkpoint of step 220: the mismatch is 6x from
    the resume on."""
    first = np.arange(0, 261)
    second = np.arange(220, N)
    steps = np.r_[first, second]
    d = np.r_[0.003 * _noise(7)[: first.size], 0.018 * _noise(8)[: second.size]]
    loss = np.r_[_loss()[: first.size], _loss()[220:N]]
    label, kind = _kind(_run({"training/rollout_probs_diff_mean": d, "loss": loss}, steps))
    assert (label, kind) == ("precision_fault", "resume_shift")


@pytest.mark.slow
def test_bench_diagnose_reports_the_kinds_of_a_generated_corpus(tmp_path: Path) -> None:
    write_corpus(
        tmp_path,
        n_groups=14,
        seed=404,
        variants=["sync_step", "gradual_climb", "export_lag", "sync_sawtooth"],
        formats=["jsonl"],
    )
    result = score(tmp_path)
    kinds = result.per_kind
    assert set(kinds) == {"weight_sync", "drift", "export_lag", "sync_sawtooth"}, kinds
    total = sum(k["support"] for k in kinds.values())
    correct = sum(k["correct"] for k in kinds.values())
    assert correct / total >= 0.9, kinds
    assert "per_kind" in result.to_dict()
