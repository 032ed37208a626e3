"""One log_history -> Run conversion: the callback's final diagnosis and a later read of the
run's trainer_state.json see the same frame."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from proxydiag.ingest import read_runs
from proxydiag.integrations.transformers import history_run


def _history(shape: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for step in range(1, 31):
        row: dict[str, object] = {
            "step": step,
            "loss": 2.0 - step / 60,
            "grad_norm": 1.0 + step / 100,
            "learning_rate": 1e-5,
            "epoch": step / 30,
        }
        if shape == "nonfinite" and step in (12, 13):
            row["grad_norm"] = math.inf if step == 12 else math.nan
        rows.append(row)
        if shape == "eval" and step % 10 == 0:
            rows.append({"step": step, "eval_loss": 1.9, "eval_runtime": 1.2, "epoch": step / 30})
        if shape == "alerts" and step == 20:  # what the callback appends on an alert
            rows.append({"step": step, "proxydiag/alert": {"label": "loss_divergence"}})
    rows.append({"step": 30, "train_runtime": 12.5, "train_loss": 1.8, "total_flos": 3e12})
    return rows


@pytest.mark.parametrize("shape", ["plain", "nonfinite", "eval", "alerts"])
def test_the_callback_and_the_reader_see_one_frame(shape: str, tmp_path: Path) -> None:
    history = _history(shape)
    path = tmp_path / "out" / "trainer_state.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"global_step": 30, "log_history": history}), encoding="utf-8")
    read = read_runs(path)[0]
    live = history_run(history, name="out")
    cols = ["step", "metric", "key", "value"]
    assert read.frame.select(cols).equals(live.frame.select(cols))
    assert read.attrs["summary"] == live.attrs["summary"]
    assert not any(m.startswith("proxydiag/") for m in live.metrics)
    if shape == "nonfinite":
        values = live.frame.filter(live.frame["metric"] == "grad_norm")["value"].to_list()
        assert math.inf in values and any(math.isnan(v) for v in values)
