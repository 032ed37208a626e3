"""The lead of the first precision alert over a collapse (benchmarks/lab_lead.py), on
fabricated watch records and reward curves: no torch, no training."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.lab_lead import (
    Alert,
    RunLead,
    collapse_of,
    first_precision_alert,
    markdown,
    reward_collapse_step,
    summarise,
)


def _alert(cls: str, raised: int, onset: int) -> str:
    return json.dumps({"final": False, "class": cls, "onset_step": onset, "raised_at_step": raised})


def _final(label: str) -> str:
    return json.dumps({"final": True, "label": label, "onset_step": 40})


def test_first_precision_alert_skips_other_classes_and_finals() -> None:
    lines = [
        _alert("gradient_overflow", 30, 28),
        "",
        _final("precision_fault"),
        _alert("precision_fault", 47, 41),
        _alert("precision_fault", 52, 40),
    ]
    assert first_precision_alert(lines) == Alert(47, 41)
    assert first_precision_alert([_alert("loss_divergence", 45, 41), _final("x")]) is None


def _reward(n: int, fault: int, drop_at: int | None, rng: np.random.Generator) -> np.ndarray:
    """A learning curve rising from 0.4 to 0.7 with rollout noise; from ``drop_at`` it decays
    towards 0.05 within a few steps (the shape of a lab divergence)."""
    steps = np.arange(n)
    r = 0.4 + 0.3 * np.minimum(steps / fault, 1.0) + rng.normal(0, 0.02, n)
    if drop_at is not None:
        after = steps >= drop_at
        r[after] = 0.05 + (r[after] - 0.05) * np.exp(-(steps[after] - drop_at) / 2.0)
    return r


def test_reward_collapse_is_the_first_step_at_a_quarter_of_the_pre_fault_level() -> None:
    rng = np.random.default_rng(3)
    r = _reward(100, 40, 55, rng)
    step = reward_collapse_step(np.arange(100), r, 40)
    level = np.median(r[30:40])
    assert step is not None and step > 55
    assert r[step] <= 0.25 * level and (r[40:step] > 0.25 * level).all()


def test_no_collapse_when_the_reward_only_dips() -> None:
    rng = np.random.default_rng(4)
    r = _reward(100, 40, None, rng)
    r[60:70] *= 0.5  # a dip to half is not a collapse
    assert reward_collapse_step(np.arange(100), r, 40) is None


def test_a_drop_before_the_fault_does_not_count_and_nan_is_no_collapse() -> None:
    rng = np.random.default_rng(5)
    r = _reward(100, 40, None, rng)
    r[10] = 0.0
    r[50] = np.nan
    assert reward_collapse_step(np.arange(100), r, 40) is None
    # logged every 5 steps: the steps, not the indices, are returned
    steps = np.arange(0, 500, 5)
    r2 = _reward(100, 40, 70, rng)
    got = reward_collapse_step(steps, r2, 200)
    assert got is not None and got % 5 == 0 and got > 350


def test_collapse_prefers_the_divergence_onset() -> None:
    assert collapse_of("loss_divergence", 43, 46, 40, steps=100) == (43, "loss_divergence")
    assert collapse_of("precision_fault", 40, 80, 40, steps=100) == (80, "reward_quarter")
    assert collapse_of("precision_fault", 40, None, 40, steps=100) == (None, None)
    # within the onset tolerance (5 steps here, 2% of a 1000-step run) before the fault: its
    # own; further before: not the fault's collapse, the reward decides
    assert collapse_of("loss_divergence", 38, 49, 40, steps=100) == (38, "loss_divergence")
    assert collapse_of("loss_divergence", 29, None, 40, steps=200) == (None, None)
    assert collapse_of("loss_divergence", 29, 70, 40, steps=200) == (70, "reward_quarter")
    assert collapse_of("loss_divergence", 385, None, 400, steps=1000) == (385, "loss_divergence")


def test_lead_and_the_table() -> None:
    rows = [
        RunLead("fp8_sampler", 0, 100, Alert(50, 40), "precision_fault", 40, 70, "reward_quarter"),
        RunLead("fp8_sampler", 1, 100, Alert(46, 40), "precision_fault", 40, 90, "reward_quarter"),
        RunLead("fp8_sampler", 2, 100, Alert(48, 39), "precision_fault", 40, None, None),
        RunLead("lr_blowup", 0, 100, None, "loss_divergence", 43, 43, "loss_divergence"),
    ]
    assert [r.lead for r in rows] == [20, 44, None, None]
    table = summarise(rows)
    fp8, lr = table
    assert (fp8["runs"], fp8["alerted"], fp8["collapses"]) == (3, 3, 2)
    assert fp8["alert_step"] == "48 (46–50)"
    assert fp8["collapse_step"] == "80 (70–90)"
    assert fp8["lead"] == "32 (20–44)"
    assert (lr["alerted"], lr["collapses"], lr["lead"]) == (0, 1, "–")
    md = markdown(table).splitlines()
    assert len(md) == 4 and md[2].startswith("| fp8_sampler | 3 | 3/3 | 48 (46–50) | 2/3")
    assert md[3] == "| lr_blowup | 1 | 0/1 | – | 1/1 (loss_divergence) | 43 | – |"
    never = summarise(
        [RunLead("stale_sync", 0, 120, Alert(45, 40), "precision_fault", 40, None, None)]
    )
    assert "| none within 120 steps | ≥ 75 (no collapse yet) |" in markdown(never)
    assert fp8["lead_at_least"] == 52 and "32 (20–44); ≥ 52 (no collapse yet)" in md[2]
