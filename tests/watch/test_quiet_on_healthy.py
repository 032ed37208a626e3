"""A guard must never alert on a healthy run: every source of the healthy real-trainer runs
(fp16 with its calibration burst and isolated overflows included) with the precision as read,
unsaid, or said to be fp16, and the healthy DeepSpeed-Chat fp16 logs, replayed a logged step at
a time (what a live watch raises, whatever its ticks)."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from proxydiag.errors import IngestWarning
from proxydiag.ingest import read_run
from proxydiag.watch.replay import replay

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
HEALTHY = sorted(
    (name, entry["path"])
    for name, entry in json.loads((REAL / "labels.json").read_text())["runs"].items()
    if entry["label"] == "healthy"
)


@pytest.mark.parametrize(("name", "path"), HEALTHY, ids=[n for n, _ in HEALTHY])
@pytest.mark.parametrize("precision", ["as read", None, "fp16"])
def test_healthy_real_trainer_runs_raise_nothing(name: str, path: str, precision: str) -> None:
    run = read_run(REAL / path)
    if precision != "as read":
        attrs = {k: v for k, v in run.attrs.items() if k != "precision"}
        run = replace(run, attrs={**attrs, **({"precision": precision} if precision else {})})
    result = replay(run, every=1)
    assert [a.to_dict() for a in result.alerts] == [], name
    assert result.final.label == "healthy"


@pytest.mark.parametrize(
    "log",
    [
        "step1_supervised_finetuning__opt-1.3b-globalBatchSize128.log",
        "step2_reward_model_finetuning__opt-350m_globalBatchSize-64.log",
        "step2_dpo_finetuning__opt-350M_globalBatchSize-32.log",
        "step3_rlhf_finetuning__actor_opt-1.3b_critic_opt-350m_globalBatchSize64.log",
    ],
)
def test_healthy_deepspeed_chat_fp16_logs_raise_nothing(realruns: Path, log: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        run = read_run(realruns / "deepspeed_chat" / log)
    result = replay(run, every=1)
    assert [a.to_dict()["class"] for a in result.alerts] == [], log
    assert result.final.label == "healthy"
