"""Live alerts do not depend on how the points were split between checks, and a healthy fp16
run's benign overflows (the scaler's calibration, then isolated skips) never raise one.

A tail hands the watcher whatever was appended since its last tick (3 steps or 10, a step's
metrics possibly split across two ticks); a trainer callback hands it one logged step at a
time. Both must raise what ``--replay --every 1`` raises on the same data, at the same step.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proxydiag.integrations.transformers import history_run
from proxydiag.run import Run
from proxydiag.run.rows import steps_of
from proxydiag.watch.replay import replay
from proxydiag.watch.watcher import Watcher

REAL = Path(__file__).resolve().parents[1] / "data" / "real"


def _history(name: str) -> list[dict[str, Any]]:
    return list(json.loads((REAL / name / "trainer_state.json").read_text())["log_history"])


def _chunked(run: Run, *, seed: int, precision: str | None) -> list[tuple[str, int | None, int]]:
    """Alerts of a watcher fed 3-10 logged steps per check, a step sometimes split in two."""
    rng = random.Random(seed)
    w = Watcher(run=run.id, name=run.name, precision=precision)
    rows = list(steps_of(run))
    alerts, i = [], 0
    while i < len(rows):
        n = rng.randint(3, 10)
        for step, metrics in rows[i : i + n]:
            items = list(metrics.items())
            if rng.random() < 0.2 and len(items) > 1:  # a step's metrics over two ticks
                cut = rng.randint(1, len(items) - 1)
                w.add(step, dict(items[:cut]))
                alerts += w.check()
                w.add(step, dict(items[cut:]))
            else:
                w.add(step, metrics)
        i += n
        alerts += w.check()
    alerts += w.close()
    return [(a.label, a.onset_step, a.raised_at_step) for a in alerts]


def _replayed(run: Run) -> list[tuple[str, int | None, int]]:
    return [(a.label, a.onset_step, a.raised_at_step) for a in replay(run, every=1).alerts]


def _static_overflow_from(history: list[dict[str, Any]], start: int) -> list[dict[str, Any]]:
    """A learning run whose fp16 scale stops working at ``start``: every later step overflows
    (grad norm NaN, the optimizer step skipped), the loss still logged."""
    out = []
    for entry in history:
        e = dict(entry)
        if e.get("step", 0) >= start and "grad_norm" in e:
            e["grad_norm"] = math.nan
        out.append(e)
    return out


CASES = {
    "grpo-healthy-e8": lambda: _history("grpo-healthy-e8"),
    "grpo-fp16-dynamic-e8": lambda: _history("grpo-fp16-dynamic-e8"),
    "sft-fp16-dynamic-e8": lambda: _history("sft-fp16-dynamic-e8"),
    "sft-lrjump-e8": lambda: _history("sft-lrjump-e8"),
    "grpo-static-overflow-80": lambda: _static_overflow_from(_history("grpo-healthy-e8"), 80),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("precision", [None, "fp16"])
def test_random_chunkings_raise_what_replay_every_step_raises(
    case: str, precision: str | None
) -> None:
    run = history_run(CASES[case](), name=case, precision=precision)
    expected = _replayed(run)
    for seed in range(4):
        assert _chunked(run, seed=seed, precision=precision) == expected, (case, seed)


def test_a_static_overflow_is_alerted_within_a_few_steps_of_its_start() -> None:
    """The issue's case: a learning GRPO run (entropy falling, the level trigger busy) whose
    every step overflows from step 80; the NaN re-fits at once, whatever the streak."""
    for precision in (None, "fp16"):
        run = history_run(
            _static_overflow_from(_history("grpo-healthy-e8"), 80), name="s", precision=precision
        )
        first = _replayed(run)[0]
        assert first[0] == "gradient_overflow" and first[1] == 80, first
        assert first[2] - 80 <= 4, first  # benign_streak_points + 1 under fp16


def _fp16_healthy(seed: int, *, log_scale: bool) -> list[dict[str, Any]]:
    """A healthy fp16 run as a dynamic loss scaler (HF's GradScaler) writes it: a calibration
    burst halving the scale from 2^32 (a finite, scaled-down grad norm inside it now and then),
    then the scale doubling every ``growth`` clean steps and, now and then, the probe
    overflowing: one skipped step, the scale halved back; the first of these may come right
    after the burst, two in a row (the issue's run: calibration 1-13, skips at 16 and 17).
    The loss is always logged and finite, and falls."""
    rng = np.random.default_rng(seed)
    calib = int(rng.integers(6, 16))
    steps = int(rng.integers(60, 160))
    growth = int(rng.integers(10, 30))
    early = calib + int(rng.integers(2, 6)) if rng.random() < 0.5 else -10
    scale, clean = 2.0**32, 0
    out = []
    for step in range(1, steps + 1):
        if step <= calib:
            skipped = rng.random() > 0.15
        elif step in (early, early + 1):
            skipped = True
        else:
            skipped = clean >= growth and rng.random() < 0.5
        if clean >= growth:
            scale, clean = scale * 2, 0
        if skipped:
            scale, clean = scale / 2, 0
            grad = math.nan
        else:
            clean += 1
            grad = float(rng.uniform(1e-4, 1e-2) if step <= calib else rng.lognormal(0.0, 0.2))
        e: dict[str, Any] = {
            "step": step,
            "loss": float(1.5 * math.exp(-step / 80) + rng.normal(0, 0.02)),
            "grad_norm": grad,
            "learning_rate": 1e-4,
        }
        if log_scale:
            e["loss_scale"] = scale
        out.append(e)
    return out


@pytest.mark.parametrize("log_scale", [False, True])
@pytest.mark.parametrize("precision", [None, "fp16"])
def test_benign_fp16_overflows_never_alert(log_scale: bool, precision: str | None) -> None:
    for seed in range(12):
        history = _fp16_healthy(seed, log_scale=log_scale)
        run = history_run(history, name=f"fp16-{seed}", precision=precision)
        assert _replayed(run) == [], (seed, precision, log_scale)
        assert _chunked(run, seed=seed, precision=precision) == [], (seed, precision)
